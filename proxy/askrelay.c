/* proxy/askrelay.c - one ask broker for every worker. Workers 1..N-1 each
 * have a broker of their own on their loop (it coalesces their waiters and
 * times them out); its handler is this relay, which hands each question to
 * the main loop, where it is asked of the one broker (which coalesces the
 * same host:port from every worker, keeps the session answers, and runs
 * the handler: tty, exec or socket, in one place). The answer comes back to
 * the worker's broker as allow or deny with its reason. Worker 0 runs on
 * the main loop and uses the one broker directly. */
#include "proxy/server-int.h"

#include <stdlib.h>
#include <string.h>

struct askrelay {
    struct proxy_worker *w;
};

/* A worker's question waiting at the main broker (main thread only). */
struct relay_wait {
    struct proxy_srv *srv;
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
    struct wmsg *m = wmsg_new(WMSG_ASK, r->w);

    if (m != NULL) {
        m->id = q->id;
        m->port = q->port;
        m->host = dup_or_empty(q->host);
        m->protocol = dup_or_empty(q->protocol);
        m->client = dup_or_empty(q->client);
    }
    if (m == NULL || m->host == NULL || m->protocol == NULL || m->client == NULL) {
        wmsg_free(m);
        (void)ask_broker_answer(r->w->broker, q->id, ASK_DENY, "out of memory");
        return;
    }
    if (wqueue_push(&r->w->srv->q, m) < 0)
        (void)ask_broker_answer(r->w->broker, q->id, ASK_DENY, "sluice is shutting down");
}

static void relay_withdraw(void *ctx, uint64_t id)
{
    struct askrelay *r = ctx;
    struct wmsg *m = wmsg_new(WMSG_WITHDRAW, r->w);

    if (m != NULL) {
        m->id = id;
        (void)wqueue_push(&r->w->srv->q, m);
    }
}

static const struct ask_handler_ops relay_ops = {
    .ask = relay_ask,
    .withdraw = relay_withdraw,
};

int askrelay_new(struct proxy_worker *w, struct askrelay **out)
{
    struct askrelay *r = calloc(1, sizeof(*r));

    if (r == NULL)
        return UV_ENOMEM;
    r->w = w;
    ask_broker_set_handler(w->broker, &relay_ops, r);
    *out = r;
    return 0;
}

void askrelay_answer(struct askrelay *r, uint64_t id, int allow, const char *reason)
{
    /* UV_ENOENT: the question ended meanwhile (timeout, withdrawn) */
    (void)ask_broker_answer(r->w->broker, id, allow ? ASK_ALLOW : ASK_DENY, reason);
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
        rw->srv->waits = rw->next;
    if (rw->next != NULL)
        rw->next->prev = rw->prev;
    rw->prev = rw->next = NULL;
}

static void answer_worker(struct proxy_worker *w, uint64_t id, int allow, const char *reason)
{
    struct wmsg *m = wmsg_new(WMSG_ANSWER, w);

    if (m == NULL)
        return; /* the worker's broker times the question out */
    m->id = id;
    m->allow = allow;
    m->reason = reason != NULL ? strdup(reason) : NULL;
    proxy_worker_send(w, m);
}

static void on_main_answer(void *arg, int allow, const char *reason)
{
    struct relay_wait *rw = arg;

    unlink_wait(rw);
    answer_worker(rw->w, rw->id, allow, reason);
    free(rw);
}

void askrelay_main_ask(struct proxy_srv *srv, struct wmsg *m)
{
    struct relay_wait *rw = calloc(1, sizeof(*rw));
    int rc;

    if (rw == NULL || srv->broker == NULL || srv->stopping == 2) {
        free(rw);
        answer_worker(m->w, m->id, 0, "sluice cannot ask now");
        return;
    }
    rw->srv = srv;
    rw->w = m->w;
    rw->id = m->id;
    rw->next = srv->waits;
    if (srv->waits != NULL)
        srv->waits->prev = rw;
    srv->waits = rw;
    /* on_main_answer may run (and free rw) before this returns */
    rc = ask_broker_ask(srv->broker, m->host, m->port, m->protocol, m->client, on_main_answer, rw,
                        &rw->wait);
    if (rc < 0) {
        unlink_wait(rw);
        free(rw);
        answer_worker(m->w, m->id, 0,
                      rc == UV_EBUSY ? "too many questions pending" : "sluice cannot ask now");
    }
}

void askrelay_main_withdraw(struct proxy_srv *srv, struct wmsg *m)
{
    for (struct relay_wait *rw = srv->waits; rw != NULL; rw = rw->next) {
        if (rw->w == m->w && rw->id == m->id) {
            ask_wait_cancel(rw->wait);
            unlink_wait(rw);
            free(rw);
            return;
        }
    }
}

void askrelay_main_forget(struct proxy_srv *srv, struct proxy_worker *w)
{
    struct relay_wait *rw = srv->waits;

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
