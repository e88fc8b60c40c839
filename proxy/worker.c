/* proxy/worker.c - one event loop of `sluice proxy --workers N`: a thread
 * around one proxy service (proxy/service.h). Its listeners (a tcp:
 * endpoint is bound by every worker with SO_REUSEPORT, so the kernel
 * spreads connections; an inherited fd: or a unix: listener is the first
 * worker's, shared through dup()), its share of the process-wide
 * connection limit (one atomic count for every worker's service), its
 * metrics and published gauges, and its mailbox. Worker 0 runs on the main
 * loop; the others each in a thread. The main thread talks to a worker only
 * through its mailbox (proxy/mailbox.h). */
#include "proxy/server-int.h"

#include "proxy/proxy.h"
#include "proxy/tlsterm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WORKER_BYTES_FEW 256 /* up to this many connections: bytes published every turn */
#define WORKER_BYTES_MS 100  /* otherwise at most this often */

void proxy_worker_send(struct proxy_worker *w, struct mail *m)
{
    (void)mailbox_post(&w->q, m);
}

/* ------------------------------------------------------------------------ */
/* The service's hooks: metrics, gauges, the process-wide limit              */

/* What the main thread reads: live connections, gauges, paused. */
static void publish(struct proxy_worker *w)
{
    const struct proxy_service *svc = &w->svc;

    __atomic_store_n(&w->http.live, svc->fe[PROXY_FE_HTTP].nconns, __ATOMIC_RELAXED);
    __atomic_store_n(&w->socks.live, svc->fe[PROXY_FE_SOCKS].nconns, __ATOMIC_RELAXED);
    __atomic_store_n(&w->paused, svc->limit_on && conn_limit_paused(&svc->limit),
                     __ATOMIC_RELAXED);
    __atomic_store_n(&w->inflight, svc->egress != NULL ? egress_inflight(svc->egress) : 0,
                     __ATOMIC_RELAXED);
    __atomic_store_n(&w->dns, svc->resolver != NULL ? resolver_outstanding(svc->resolver) : 0,
                     __ATOMIC_RELAXED);
}

/* Bytes the open connections moved so far (a walk of every connection):
 * every loop turn while there are few, at most every WORKER_BYTES_MS when
 * there are many. */
static void publish_bytes(struct proxy_worker *w)
{
    uint64_t up = 0, down = 0;

    frontend_bytes(&w->svc.fe[PROXY_FE_HTTP], &up, &down);
    frontend_bytes(&w->svc.fe[PROXY_FE_SOCKS], &up, &down);
    __atomic_store_n(&w->m.open_up, up, __ATOMIC_RELAXED);
    __atomic_store_n(&w->m.open_down, down, __ATOMIC_RELAXED);
}

static void on_accepted(void *ctx, enum proxy_fe_kind kind, int served, int over)
{
    struct proxy_worker *w = ctx;
    struct service *svc = kind == PROXY_FE_HTTP ? &w->http : &w->socks;

    if (served) {
        __atomic_fetch_add(&svc->accepted, 1, __ATOMIC_RELAXED);
        if (over)
            __atomic_fetch_add(&svc->overloaded, 1, __ATOMIC_RELAXED);
    }
    publish(w);
}

static void on_ended(void *ctx)
{
    publish(ctx);
}

static void worker_finish(struct proxy_worker *w);

static void on_drained(void *ctx)
{
    worker_finish(ctx);
}

/* A connection ended here below the limit: accepting resumes here (the
 * service did) and in workers paused elsewhere (their connections may
 * never end). */
static void on_released(void *ctx)
{
    struct proxy_worker *w = ctx;
    struct proxy_srv *srv = w->srv;

    publish(w);
    for (unsigned i = 0; i < srv->nworkers; i++) {
        struct proxy_worker *o = srv->workers[i];
        if (o != w && __atomic_load_n(&o->paused, __ATOMIC_RELAXED))
            proxy_worker_send(o, mail_new(MAIL_NUDGE, o));
    }
}

static void on_connlog(void *ctx, const struct connlog *r)
{
    struct proxy_worker *w = ctx;

    proxy_metrics_note(&w->m, r);
    proxy_log_record(&w->srv->log, r);
}

/* Before the loop waits: the log goes out, the gauges are published. */
static void on_prepare(uv_prepare_t *h)
{
    struct proxy_worker *w = h->data;

    proxy_log_flush(&w->srv->log);
    publish(w);
    if (proxy_service_conns(&w->svc) <= WORKER_BYTES_FEW ||
        uv_now(w->loop) - w->bytes_at >= WORKER_BYTES_MS) {
        w->bytes_at = uv_now(w->loop);
        publish_bytes(w);
    }
}

/* ------------------------------------------------------------------------ */
/* Stopping                                                                  */

static void on_closed(uv_handle_t *h)
{
    (void)h;
}

static void closed_part(void *arg)
{
    (void)arg;
}

/* Everything is closed or closing: the loop can end. Worker 0 says so at
 * once; a threaded worker after its loop has ended (worker_thread). */
static void worker_finish(struct proxy_worker *w)
{
    if (w->stopping == 2)
        return;
    w->stopping = 2;
    proxy_service_close(&w->svc, closed_part, NULL);
    uv_close((uv_handle_t *)&w->prep, on_closed);
    mailbox_close(&w->q);
    if (!w->threaded && !w->done_sent) {
        w->done_sent = 1;
        (void)mailbox_post(&w->srv->q, mail_new(MAIL_DONE, w));
    }
}

static void close_listeners(struct proxy_worker *w)
{
    proxy_service_close_listeners(&w->svc);
    w->http.l = w->socks.l = NULL;
}

/* Drain: no more accepting; kept-alive HTTP connections waiting between
 * requests close now, the others after their current answer. */
static void worker_stop(struct proxy_worker *w)
{
    if (w->stopping)
        return;
    w->stopping = 1;
    proxy_service_drain(&w->svc);
    w->http.l = w->socks.l = NULL;
    publish(w);
    if (proxy_service_conns(&w->svc) == 0)
        worker_finish(w);
}

static void on_mail(struct proxy_worker *w, struct mail *m)
{
    switch (m->kind) {
    case MAIL_CONF:
        if (w->stopping == 0) {
            proxy_service_apply(&w->svc, m->conf);
            m->conf = NULL;
        }
        break;
    case MAIL_STOP:
        worker_stop(w);
        break;
    case MAIL_CLOSE_ALL:
        proxy_service_close_conns(&w->svc);
        break;
    case MAIL_NUDGE:
        if (w->stopping == 0 && w->svc.limit_on)
            conn_limit_released(&w->svc.limit);
        publish(w);
        break;
    case MAIL_ANSWER:
        if (w->relay != NULL && w->svc.broker != NULL)
            askrelay_answer(w->relay, m->id, m->allow, m->reason);
        break;
    default:
        break;
    }
}

static void on_messages(uv_async_t *a)
{
    struct proxy_worker *w = a->data;
    struct mail *m = mailbox_take(&w->q);

    while (m != NULL) {
        struct mail *next = m->next;
        on_mail(w, m);
        mail_free(m);
        m = next;
        if (w->stopping == 2) { /* the mailbox closed under us: drop the rest */
            mail_free_list(m);
            m = NULL;
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Creating                                                                  */

static void init_service(struct service *svc, const char *name, const struct endpoint *ep,
                         int on)
{
    svc->name = name;
    svc->on = on;
    svc->ep = *ep;
}

/* The endpoint this worker listens on: worker 0's as given (SO_REUSEPORT
 * on tcp when there are several); the others bind the port worker 0 got,
 * or share worker 0's socket (fd:, unix:). */
static int service_endpoint(struct proxy_worker *w, struct service *svc,
                            const struct service *first, struct endpoint *ep)
{
    *ep = svc->ep;
    ep->reuseport = w->srv->nworkers > 1 && ep->kind == ENDPOINT_TCP;
    if (w->index == 0 || first->l == NULL)
        return 0;
    if (ep->kind == ENDPOINT_TCP) {
        struct policy_addr a;
        uint16_t port;
        if (listener_address(first->l, &a, &port) == 0)
            ep->port = port;
        return 0;
    }
    ep->kind = ENDPOINT_FD;
    ep->fd = dup(listener_fd(first->l));
    return ep->fd < 0 ? -1 : 0;
}

static int open_service(struct proxy_worker *w, struct service *svc, enum proxy_fe_kind kind,
                        const struct service *first)
{
    const char *why = NULL;
    char text[200];
    struct endpoint ep;
    int rc;

    if (!svc->on)
        return 0;
    if (service_endpoint(w, svc, first, &ep) < 0) {
        fprintf(stderr, "sluice: proxy: worker %u: cannot share the %s listener\n", w->index,
                svc->name);
        return -1;
    }
    rc = proxy_service_listen(&w->svc, kind, &ep, &svc->l, &why);
    if (rc < 0) {
        fprintf(stderr, "sluice: proxy: cannot listen on %s (%s): %s\n",
                endpoint_str(&svc->ep, text, sizeof(text)), svc->name,
                why != NULL ? why : uv_strerror(rc));
        return -1;
    }
    return 0;
}

int proxy_worker_new(struct proxy_srv *srv, unsigned index, struct proxy_worker **out)
{
    struct proxy_worker *w = calloc(1, sizeof(*w));
    const struct proxy_worker *first = index > 0 ? srv->workers[0] : NULL;
    const struct proxy_service_hooks hooks = {
        .ctx = w,
        .log = on_connlog,
        .accepted = on_accepted,
        .ended = on_ended,
        .released = on_released,
        .drained = on_drained,
    };

    *out = w;
    if (w == NULL) {
        fprintf(stderr, "sluice: proxy: out of memory\n");
        return 1;
    }
    w->srv = srv;
    w->index = index;
    w->threaded = index > 0;
    if (w->threaded) {
        if (uv_loop_init(&w->own_loop) != 0) {
            fprintf(stderr, "sluice: proxy: cannot create the event loop of worker %u\n", index);
            return 1;
        }
        w->loop_ok = 1;
        w->loop = &w->own_loop;
    } else {
        w->loop = &srv->loop;
    }
    if (mailbox_init(&w->q, w->loop, on_messages, w) < 0)
        return 1;
    w->q_ok = 1;
    proxy_service_init(&w->svc, w->loop, &srv->next_id, &srv->live, &hooks);
    w->svc.fe[PROXY_FE_HTTP].health_path = srv->o.health_path;
    /* UDP ASSOCIATE: the relay socket is made here, in the clients' network
     * namespace (sluice run's clients are in the sandbox's: not yet served) */
    w->svc.fe[PROXY_FE_SOCKS].udp_associate = 1;
    init_service(&w->http, "http", &srv->o.http, srv->o.http_on);
    init_service(&w->socks, "socks5", &srv->o.socks, srv->o.socks_on);
    if (open_service(w, &w->http, PROXY_FE_HTTP, first != NULL ? &first->http : NULL) < 0 ||
        open_service(w, &w->socks, PROXY_FE_SOCKS, first != NULL ? &first->socks : NULL) < 0)
        return 1;
    return 0;
}

/* The handler of a worker's own broker: the relay to the main one. */
static int start_relay(void *ctx, struct ask_broker *b)
{
    struct proxy_worker *w = ctx;

    return askrelay_new(b, &w->srv->q, &w->q, w, &w->relay);
}

/* The second half, once the policy is loaded: resolver, ask relay, egress,
 * front ends, limit. */
int proxy_worker_setup(struct proxy_worker *w, struct proxy_service_conf *conf, char *err,
                       size_t errlen)
{
    struct proxy_srv *srv = w->srv;
    struct proxy_service_ask ask = {0};

    if (srv->broker != NULL && w->index == 0)
        ask.broker = srv->broker;
    else if (srv->broker != NULL) {
        ask.relay = start_relay;
        ask.relay_ctx = w;
    }
    if (proxy_service_start(&w->svc, &srv->settings, conf, &ask, err, errlen) < 0)
        return 1;
    if (srv->tls != NULL && proxy_tls_new(srv->tls, &w->svc.tls, err, errlen) < 0)
        return 1;
    egress_env_set_observer(w->svc.egress, proxy_metrics_outcome, &w->m);
    uv_prepare_init(w->loop, &w->prep);
    w->prep.data = w;
    uv_prepare_start(&w->prep, on_prepare);
    uv_unref((uv_handle_t *)&w->prep);
    publish(w);
    return 0;
}

static void worker_thread(void *arg)
{
    struct proxy_worker *w = arg;

    uv_run(w->loop, UV_RUN_DEFAULT);
    relay_release_caches(); /* this thread's buffers and pipes */
    w->done_sent = 1;
    (void)mailbox_post(&w->srv->q, mail_new(MAIL_DONE, w));
}

int proxy_worker_start(struct proxy_worker *w)
{
    if (!w->threaded)
        return 0;
    if (uv_thread_create(&w->thread, worker_thread, w) != 0)
        return -1;
    w->thread_ok = 1;
    return 0;
}

static void walk_close(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

void proxy_worker_abort(struct proxy_worker *w)
{
    if (w == NULL)
        return;
    close_listeners(w);
    proxy_service_close(&w->svc, NULL, NULL);
    w->stopping = 2;
    if (w->threaded && w->loop_ok) {
        uv_walk(w->loop, walk_close, NULL);
        uv_run(w->loop, UV_RUN_DEFAULT);
    }
}

void proxy_worker_free(struct proxy_worker *w)
{
    if (w == NULL)
        return;
    if (w->thread_ok)
        uv_thread_join(&w->thread);
    proxy_tls_free(w->svc.tls);
    w->svc.tls = NULL;
    proxy_service_free(&w->svc);
    if (w->threaded && w->loop_ok && uv_loop_close(&w->own_loop) != 0)
        fprintf(stderr, "sluice: proxy: worker %u: handles left open at exit\n", w->index);
    askrelay_free(w->relay);
    if (w->q_ok)
        mailbox_destroy(&w->q);
    free(w);
}
