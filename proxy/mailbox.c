/* proxy/mailbox.c - the cross-thread mailbox (proxy/mailbox.h). */
#include "proxy/mailbox.h"

#include "proxy/service.h"

#include <stdlib.h>
#include <string.h>

struct mail *mail_new(enum mail_kind kind, struct proxy_worker *w)
{
    struct mail *m = calloc(1, sizeof(*m));

    if (m != NULL) {
        m->kind = kind;
        m->w = w;
    }
    return m;
}

void mail_free(struct mail *m)
{
    if (m == NULL)
        return;
    proxy_service_conf_free(m->conf);
    free(m->host);
    free(m->protocol);
    free(m->client);
    free(m->reason);
    free(m);
}

void mail_free_list(struct mail *m)
{
    while (m != NULL) {
        struct mail *next = m->next;
        mail_free(m);
        m = next;
    }
}

int mailbox_init(struct mailbox *q, uv_loop_t *loop, uv_async_cb cb, void *data)
{
    int rc;

    memset(q, 0, sizeof(*q));
    if (uv_mutex_init(&q->mu) != 0)
        return UV_ENOMEM;
    rc = uv_async_init(loop, &q->async, cb);
    if (rc < 0) {
        uv_mutex_destroy(&q->mu);
        return rc;
    }
    q->async.data = data;
    return 0;
}

int mailbox_post(struct mailbox *q, struct mail *m)
{
    if (m == NULL)
        return UV_EINVAL;
    uv_mutex_lock(&q->mu);
    if (q->closed) {
        uv_mutex_unlock(&q->mu);
        mail_free(m);
        return UV_ECANCELED;
    }
    m->next = NULL;
    if (q->tail != NULL)
        q->tail->next = m;
    else
        q->head = m;
    q->tail = m;
    uv_async_send(&q->async); /* under the lock: the handle is not closing */
    uv_mutex_unlock(&q->mu);
    return 0;
}

struct mail *mailbox_take(struct mailbox *q)
{
    struct mail *m;

    uv_mutex_lock(&q->mu);
    m = q->head;
    q->head = q->tail = NULL;
    uv_mutex_unlock(&q->mu);
    return m;
}

static void on_mailbox_closed(uv_handle_t *h)
{
    (void)h; /* the mutex lives on until mailbox_destroy: others may still post */
}

void mailbox_destroy(struct mailbox *q)
{
    mail_free_list(mailbox_take(q));
    uv_mutex_destroy(&q->mu);
}

void mailbox_close(struct mailbox *q)
{
    struct mail *m;

    uv_mutex_lock(&q->mu);
    if (q->closed) {
        uv_mutex_unlock(&q->mu);
        return;
    }
    q->closed = 1;
    m = q->head;
    q->head = q->tail = NULL;
    uv_mutex_unlock(&q->mu);
    mail_free_list(m);
    uv_close((uv_handle_t *)&q->async, on_mailbox_closed);
}
