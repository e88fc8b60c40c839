/* proxy/worker.c - one event loop of `sluice proxy --workers N`: its
 * listeners (a tcp: endpoint is bound by every worker with SO_REUSEPORT,
 * so the kernel spreads connections; an inherited fd: or a unix: listener
 * is the first worker's, shared through dup()), its resolver (a c-ares
 * channel per loop), its egress over the process's one policy (a
 * reference), its HTTP and SOCKS5 front ends, and its share of the
 * process-wide connection limit. Worker 0 runs on the main loop; the
 * others each in a thread. The main thread talks to a worker only through
 * its message queue (server-int.h). */
#include "proxy/server-int.h"

#include "proxy/proxy.h"
#include "socks/socks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WORKER_BYTES_FEW 256 /* up to this many connections: bytes published every turn */
#define WORKER_BYTES_MS 100  /* otherwise at most this often */

/* ------------------------------------------------------------------------ */
/* Message queues                                                            */

struct wmsg *wmsg_new(enum wmsg_kind kind, struct proxy_worker *w)
{
    struct wmsg *m = calloc(1, sizeof(*m));

    if (m != NULL) {
        m->kind = kind;
        m->w = w;
    }
    return m;
}

void wmsg_free(struct wmsg *m)
{
    if (m == NULL)
        return;
    worker_conf_free(m->conf);
    free(m->host);
    free(m->protocol);
    free(m->client);
    free(m->reason);
    free(m);
}

int wqueue_init(struct wqueue *q, uv_loop_t *loop, uv_async_cb cb, void *data)
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

int wqueue_push(struct wqueue *q, struct wmsg *m)
{
    if (m == NULL)
        return -1;
    uv_mutex_lock(&q->mu);
    if (q->closed) {
        uv_mutex_unlock(&q->mu);
        wmsg_free(m);
        return -1;
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

struct wmsg *wqueue_take(struct wqueue *q)
{
    struct wmsg *m;

    uv_mutex_lock(&q->mu);
    m = q->head;
    q->head = q->tail = NULL;
    uv_mutex_unlock(&q->mu);
    return m;
}

static void on_queue_closed(uv_handle_t *h)
{
    (void)h; /* the mutex lives on until wqueue_destroy: others may still push */
}

void wqueue_destroy(struct wqueue *q)
{
    struct wmsg *m = wqueue_take(q);

    while (m != NULL) {
        struct wmsg *next = m->next;
        wmsg_free(m);
        m = next;
    }
    uv_mutex_destroy(&q->mu);
}

void wqueue_close(struct wqueue *q)
{
    struct wmsg *m;

    uv_mutex_lock(&q->mu);
    if (q->closed) {
        uv_mutex_unlock(&q->mu);
        return;
    }
    q->closed = 1;
    m = q->head;
    q->head = q->tail = NULL;
    uv_mutex_unlock(&q->mu);
    while (m != NULL) {
        struct wmsg *next = m->next;
        wmsg_free(m);
        m = next;
    }
    uv_close((uv_handle_t *)&q->async, on_queue_closed);
}

void proxy_worker_send(struct proxy_worker *w, struct wmsg *m)
{
    (void)wqueue_push(&w->q, m);
}

/* ------------------------------------------------------------------------ */
/* Configuration                                                             */

struct worker_conf *worker_conf_new(const struct settings *s, struct policy *p)
{
    struct worker_conf *c = calloc(1, sizeof(*c));

    if (c == NULL)
        return NULL;
    if (s->proxy.auth_username != NULL)
        c->auth_user = strdup(s->proxy.auth_username);
    if (s->proxy.auth_password != NULL)
        c->auth_pass = strdup(s->proxy.auth_password);
    if ((s->proxy.auth_username != NULL && c->auth_user == NULL) ||
        (s->proxy.auth_password != NULL && c->auth_pass == NULL)) {
        worker_conf_free(c);
        return NULL;
    }
    c->handshake_ms = s->proxy.handshake_timeout_ms;
    c->head_ms = s->proxy.head_timeout_ms;
    c->idle_ms = s->proxy.idle_timeout_ms;
    c->max_head = s->proxy.max_head_bytes;
    c->max_conns = proxy_max_connections(s);
    c->policy = p != NULL ? policy_ref(p) : NULL;
    return c;
}

void worker_conf_free(struct worker_conf *c)
{
    if (c == NULL)
        return;
    policy_free(c->policy);
    free(c->auth_user);
    free(c->auth_pass);
    free(c);
}

static void conf_frontend(struct frontend *fe, const struct worker_conf *c)
{
    fe->auth_user = c->auth_user;
    fe->auth_pass = c->auth_pass;
    fe->handshake_timeout_ms = c->handshake_ms;
    fe->head_timeout_ms = c->head_ms;
    fe->idle_timeout_ms = c->idle_ms;
    fe->max_head_bytes = c->max_head;
    fe->max_conns = c->max_conns;
}

/* A new configuration (reload): the policy for requests started from now
 * on, the front ends' settings, the limit. */
static void apply_conf(struct proxy_worker *w, struct worker_conf *c)
{
    struct worker_conf *old = w->conf;

    if (c->policy != NULL) {
        egress_env_set_policy(w->egress, c->policy); /* takes the reference */
        c->policy = NULL;
    }
    conf_frontend(&w->http.fe, c);
    conf_frontend(&w->socks.fe, c);
    w->conf = c;
    if (w->limit_on)
        conn_limit_set(&w->limit, c->max_conns + PROXY_OVERLOAD_SLACK);
    worker_conf_free(old);
}

/* ------------------------------------------------------------------------ */
/* Accepting and the limit                                                   */

static size_t worker_live(const struct proxy_worker *w)
{
    return w->http.fe.nconns + w->socks.fe.nconns;
}

static size_t process_live(void *ctx)
{
    const struct proxy_worker *w = ctx;

    return __atomic_load_n(&w->srv->live, __ATOMIC_RELAXED);
}

/* What the main thread reads: live connections, gauges, paused. */
static void publish(struct proxy_worker *w)
{
    __atomic_store_n(&w->http.live, w->http.fe.nconns, __ATOMIC_RELAXED);
    __atomic_store_n(&w->socks.live, w->socks.fe.nconns, __ATOMIC_RELAXED);
    __atomic_store_n(&w->paused, w->limit_on && conn_limit_paused(&w->limit), __ATOMIC_RELAXED);
    __atomic_store_n(&w->inflight, w->egress != NULL ? egress_inflight(w->egress) : 0,
                     __ATOMIC_RELAXED);
    __atomic_store_n(&w->dns, w->resolver != NULL ? resolver_outstanding(w->resolver) : 0,
                     __ATOMIC_RELAXED);
}

/* Bytes the open connections moved so far (a walk of every connection):
 * every loop turn while there are few, at most every WORKER_BYTES_MS when
 * there are many. */
static void publish_bytes(struct proxy_worker *w)
{
    uint64_t up = 0, down = 0;

    frontend_bytes(&w->http.fe, &up, &down);
    frontend_bytes(&w->socks.fe, &up, &down);
    __atomic_store_n(&w->m.open_up, up, __ATOMIC_RELAXED);
    __atomic_store_n(&w->m.open_down, down, __ATOMIC_RELAXED);
}

static void on_accept(struct listener *l, void *arg)
{
    struct service *svc = arg;
    struct proxy_worker *w = svc->w;
    struct proxy_srv *srv = w->srv;
    size_t before = svc->fe.nconns, prev;
    int over, rc;

    if (w->stopping || conn_limit_admit(&w->limit, l) < 0) {
        publish(w);
        return;
    }
    /* reserved before the front end decides, so the overload decision is
     * exact across workers */
    prev = __atomic_fetch_add(&srv->live, 1, __ATOMIC_RELAXED);
    over = prev >= w->conf->max_conns;
    rc = svc->accept(&svc->fe, l, over);
    if (svc->fe.nconns == before) /* nothing was added: no conn_ended will come */
        __atomic_fetch_sub(&srv->live, 1, __ATOMIC_RELAXED);
    if (rc == 0) {
        __atomic_fetch_add(&svc->accepted, 1, __ATOMIC_RELAXED);
        if (over)
            __atomic_fetch_add(&svc->overloaded, 1, __ATOMIC_RELAXED);
    }
    conn_limit_accepted(&w->limit, l, rc);
    publish(w);
}

static void worker_finish(struct proxy_worker *w);

/* A connection ended here: accepting resumes below the limit, here and in
 * workers paused elsewhere (their connections may never end). */
static void on_conn_ended(struct frontend *f)
{
    struct service *svc = f->data;
    struct proxy_worker *w = svc->w;
    struct proxy_srv *srv = w->srv;

    __atomic_fetch_sub(&srv->live, 1, __ATOMIC_RELAXED);
    publish(w);
    if (w->stopping) {
        if (worker_live(w) == 0)
            worker_finish(w);
        return;
    }
    conn_limit_released(&w->limit);
    publish(w);
    for (unsigned i = 0; i < srv->nworkers; i++) {
        struct proxy_worker *o = srv->workers[i];
        if (o != w && __atomic_load_n(&o->paused, __ATOMIC_RELAXED))
            proxy_worker_send(o, wmsg_new(WMSG_NUDGE, o));
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
    if (worker_live(w) <= WORKER_BYTES_FEW ||
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
    if (w->own_broker && w->broker != NULL)
        ask_broker_close(w->broker, closed_part, NULL);
    w->broker = NULL;
    if (w->resolver != NULL)
        resolver_close(w->resolver, closed_part, NULL);
    w->resolver = NULL;
    uv_close((uv_handle_t *)&w->prep, on_closed);
    wqueue_close(&w->q);
    if (!w->threaded && !w->done_sent) {
        w->done_sent = 1;
        (void)wqueue_push(&w->srv->q, wmsg_new(WMSG_DONE, w));
    }
}

static void close_listeners(struct proxy_worker *w)
{
    if (w->http.l != NULL)
        listener_close(w->http.l, NULL, NULL);
    if (w->socks.l != NULL)
        listener_close(w->socks.l, NULL, NULL);
    w->http.l = w->socks.l = NULL;
    if (w->limit_on)
        conn_limit_close(&w->limit);
    w->limit_on = 0;
}

/* Drain: no more accepting; kept-alive HTTP connections waiting between
 * requests close now, the others after their current answer. */
static void worker_stop(struct proxy_worker *w)
{
    if (w->stopping)
        return;
    w->stopping = 1;
    close_listeners(w);
    w->socks.fe.draining = 1;
    http_frontend_drain(&w->http.fe);
    publish(w);
    if (worker_live(w) == 0)
        worker_finish(w);
}

static void on_messages(uv_async_t *a)
{
    struct proxy_worker *w = a->data;
    struct wmsg *m = wqueue_take(&w->q);

    while (m != NULL) {
        struct wmsg *next = m->next;
        switch (m->kind) {
        case WMSG_CONF:
            if (w->stopping == 0) {
                apply_conf(w, m->conf);
                m->conf = NULL;
            }
            break;
        case WMSG_STOP:
            worker_stop(w);
            break;
        case WMSG_CLOSE_ALL:
            frontend_close_all(&w->socks.fe);
            frontend_close_all(&w->http.fe);
            break;
        case WMSG_NUDGE:
            if (w->stopping == 0 && w->limit_on)
                conn_limit_released(&w->limit);
            publish(w);
            break;
        case WMSG_ANSWER:
            if (w->relay != NULL && w->broker != NULL)
                askrelay_answer(w->relay, m->id, m->allow, m->reason);
            break;
        default:
            break;
        }
        wmsg_free(m);
        m = next;
        if (w->stopping == 2) { /* the queue closed under us: drop the rest */
            while (m != NULL) {
                next = m->next;
                wmsg_free(m);
                m = next;
            }
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Creating                                                                  */

static void init_service(struct proxy_worker *w, struct service *svc, const char *name,
                         const struct endpoint *ep, int on,
                         int (*accept)(struct frontend *, struct listener *, int))
{
    svc->w = w;
    svc->name = name;
    svc->on = on;
    svc->ep = *ep;
    svc->accept = accept;
    frontend_init(&svc->fe, w->loop, &w->srv->next_id);
    svc->fe.data = svc;
    svc->fe.log = on_connlog;
    svc->fe.log_ctx = w;
    svc->fe.conn_ended = on_conn_ended;
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

static int open_service(struct proxy_worker *w, struct service *svc, const struct service *first)
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
    rc = listener_open(&svc->l, w->loop, &ep, on_accept, svc, &why);
    if (rc < 0) {
        svc->l = NULL;
        fprintf(stderr, "sluice: proxy: cannot listen on %s (%s): %s\n",
                endpoint_str(&svc->ep, text, sizeof(text)), svc->name,
                why != NULL ? why : uv_strerror(rc));
        return -1;
    }
    return 0;
}

int proxy_worker_new(struct proxy_srv *srv, unsigned index, struct worker_conf *conf,
                     struct proxy_worker **out)
{
    struct proxy_worker *w = calloc(1, sizeof(*w));
    const struct proxy_worker *first = index > 0 ? srv->workers[0] : NULL;

    *out = w;
    if (w == NULL) {
        fprintf(stderr, "sluice: proxy: out of memory\n");
        return 1;
    }
    w->srv = srv;
    w->index = index;
    w->threaded = index > 0;
    w->conf = conf;
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
    if (wqueue_init(&w->q, w->loop, on_messages, w) < 0)
        return 1;
    w->q_ok = 1;
    init_service(w, &w->http, "http", &srv->o.http, srv->o.http_on, http_session_accept);
    init_service(w, &w->socks, "socks5", &srv->o.socks, srv->o.socks_on, socks_session_accept);
    w->http.fe.health_path = srv->o.health_path;
    if (open_service(w, &w->http, first != NULL ? &first->http : NULL) < 0 ||
        open_service(w, &w->socks, first != NULL ? &first->socks : NULL) < 0)
        return 1;
    return 0;
}

/* The second half, once the policy is loaded: resolver, ask relay, egress,
 * front ends, limit. */
int proxy_worker_setup(struct proxy_worker *w, char *err, size_t errlen)
{
    struct proxy_srv *srv = w->srv;
    const struct settings *s = &srv->settings;
    int rc;

    if (proxy_resolver_start(&w->resolver, w->loop, s, err, errlen) < 0)
        return 1;
    if (srv->broker != NULL && w->index == 0) {
        w->broker = srv->broker;
    } else if (srv->broker != NULL) {
        rc = ask_broker_new(&w->broker, w->loop, s->proxy.ask_timeout_ms,
                            s->proxy.max_pending_asks);
        if (rc == 0) {
            w->own_broker = 1;
            rc = askrelay_new(w, &w->relay);
        }
        if (rc < 0) {
            snprintf(err, errlen, "cannot start the ask relay: %s", uv_strerror(rc));
            return 1;
        }
    }
    rc = egress_env_new(&w->egress, w->loop, w->conf->policy, w->resolver, w->broker,
                        s->proxy.dial_timeout_ms);
    if (rc < 0) {
        w->egress = NULL;
        snprintf(err, errlen, "cannot start the proxies: %s", uv_strerror(rc));
        return 1;
    }
    w->conf->policy = NULL; /* the egress has the reference */
    egress_env_set_observer(w->egress, proxy_metrics_outcome, &w->m);
    w->http.fe.egress = w->socks.fe.egress = w->egress;
    conf_frontend(&w->http.fe, w->conf);
    conf_frontend(&w->socks.fe, w->conf);
    conn_limit_init(&w->limit, w->loop, w->conf->max_conns + PROXY_OVERLOAD_SLACK, process_live,
                    w);
    w->limit_on = 1;
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
    (void)wqueue_push(&w->srv->q, wmsg_new(WMSG_DONE, w));
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
    if (w->own_broker && w->broker != NULL)
        ask_broker_close(w->broker, NULL, NULL);
    w->broker = NULL;
    if (w->resolver != NULL)
        resolver_close(w->resolver, NULL, NULL);
    w->resolver = NULL;
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
    egress_env_free(w->egress);
    if (w->threaded && w->loop_ok && uv_loop_close(&w->own_loop) != 0)
        fprintf(stderr, "sluice: proxy: worker %u: handles left open at exit\n", w->index);
    askrelay_free(w->relay);
    worker_conf_free(w->conf);
    if (w->q_ok)
        wqueue_destroy(&w->q);
    free(w);
}
