/* proxy/askrelay.c - one ask broker for every worker. Workers 1..N-1 each
 * have a broker of their own on their loop (it coalesces their waiters and
 * times them out); its handler is this relay, which hands each question to
 * the main loop, where it is asked of the one broker (which coalesces the
 * same host:port from every worker, keeps the session answers, and runs
 * the handler: tty, exec or socket, in one place). The answer comes back to
 * the worker's broker as allow or deny with its reason. Worker 0 runs on
 * the main loop and uses the one broker directly. Both sides talk through
 * mailboxes (proxy/mailbox.h) only. */
#include "proxy/askrelay.h"

#include <stdlib.h>
#include <string.h>

struct askrelay {
    struct ask_broker *broker; /* the worker's own */
    struct mailbox *to_main, *reply;
    struct proxy_worker *w;    /* the tag of its questions */
};

/* A worker's question waiting at the main broker (main thread only). */
struct relay_wait {
    struct askrelay_hub *hub;
    struct mailbox *reply;
    struct proxy_worker *w;
    uint64_t id; /* the worker broker's question id */
    struct ask_wait *wait;
    struct relay_wait *prev, *next;
};

/* ------------------------------------------------------------------------ */
/* Worker side                                                               */

static char *dup_or_empty(const char *s)
{
    return strdup(s != NULL ? s : "");
}

static void relay_ask(void *ctx, const struct ask_question *q)
{
    struct askrelay *r = ctx;
    struct mail *m = mail_new(MAIL_ASK, r->w);

    if (m != NULL) {
        m->reply = r->reply;
        m->id = q->id;
        m->port = q->port;
        m->host = dup_or_empty(q->host);
        m->protocol = dup_or_empty(q->protocol);
        m->client = dup_or_empty(q->client);
    }
    if (m == NULL || m->host == NULL || m->protocol == NULL || m->client == NULL) {
        mail_free(m);
        (void)ask_broker_answer(r->broker, q->id, ASK_DENY, "out of memory");
        return;
    }
    if (mailbox_post(r->to_main, m) < 0)
        (void)ask_broker_answer(r->broker, q->id, ASK_DENY, "sluice is shutting down");
}

static void relay_withdraw(void *ctx, uint64_t id)
{
    struct askrelay *r = ctx;
    struct mail *m = mail_new(MAIL_WITHDRAW, r->w);

    if (m != NULL) {
        m->id = id;
        (void)mailbox_post(r->to_main, m);
    }
}

static const struct ask_handler_ops relay_ops = {
    .ask = relay_ask,
    .withdraw = relay_withdraw,
};

int askrelay_new(struct ask_broker *b, struct mailbox *to_main, struct mailbox *reply,
                 struct proxy_worker *w, struct askrelay **out)
{
    struct askrelay *r = calloc(1, sizeof(*r));

    if (r == NULL)
        return UV_ENOMEM;
    r->broker = b;
    r->to_main = to_main;
    r->reply = reply;
    r->w = w;
    ask_broker_set_handler(b, &relay_ops, r);
    *out = r;
    return 0;
}

void askrelay_answer(struct askrelay *r, uint64_t id, int allow, const char *reason)
{
    /* UV_ENOENT: the question ended meanwhile (timeout, withdrawn) */
    (void)ask_broker_answer(r->broker, id, allow ? ASK_ALLOW : ASK_DENY, reason);
}

void askrelay_free(struct askrelay *r)
{
    free(r);
}

/* ------------------------------------------------------------------------ */
/* Main side                                                                 */

static void unlink_wait(struct relay_wait *rw)
{
    if (rw->prev != NULL)
        rw->prev->next = rw->next;
    else
        rw->hub->waits = rw->next;
    if (rw->next != NULL)
        rw->next->prev = rw->prev;
    rw->prev = rw->next = NULL;
}

static void answer_worker(struct mailbox *reply, struct proxy_worker *w, uint64_t id, int allow,
                          const char *reason)
{
    struct mail *m = mail_new(MAIL_ANSWER, w);

    if (m == NULL)
        return; /* the worker's broker times the question out */
    m->id = id;
    m->allow = allow;
    m->reason = reason != NULL ? strdup(reason) : NULL;
    (void)mailbox_post(reply, m);
}

static void on_main_answer(void *arg, int allow, const char *reason)
{
    struct relay_wait *rw = arg;

    unlink_wait(rw);
    answer_worker(rw->reply, rw->w, rw->id, allow, reason);
    free(rw);
}

void askrelay_main_ask(struct askrelay_hub *hub, struct ask_broker *broker, struct mail *m)
{
    struct relay_wait *rw = calloc(1, sizeof(*rw));
    int rc;

    if (rw == NULL || broker == NULL) {
        free(rw);
        answer_worker(m->reply, m->w, m->id, 0, "sluice cannot ask now");
        return;
    }
    rw->hub = hub;
    rw->reply = m->reply;
    rw->w = m->w;
    rw->id = m->id;
    rw->next = hub->waits;
    if (hub->waits != NULL)
        hub->waits->prev = rw;
    hub->waits = rw;
    /* on_main_answer may run (and free rw) before this returns */
    rc = ask_broker_ask(broker, m->host, m->port, m->protocol, m->client, on_main_answer, rw,
                        &rw->wait);
    if (rc < 0) {
        unlink_wait(rw);
        free(rw);
        answer_worker(m->reply, m->w, m->id, 0,
                      rc == UV_EBUSY ? "too many questions pending" : "sluice cannot ask now");
    }
}

void askrelay_main_withdraw(struct askrelay_hub *hub, struct mail *m)
{
    for (struct relay_wait *rw = hub->waits; rw != NULL; rw = rw->next) {
        if (rw->w == m->w && rw->id == m->id) {
            ask_wait_cancel(rw->wait);
            unlink_wait(rw);
            free(rw);
            return;
        }
    }
}

void askrelay_main_forget(struct askrelay_hub *hub, struct proxy_worker *w)
{
    struct relay_wait *rw = hub->waits;

    while (rw != NULL) {
        struct relay_wait *next = rw->next;
        if (rw->w == w) {
            ask_wait_cancel(rw->wait);
            unlink_wait(rw);
            free(rw);
        }
        rw = next;
    }
}
