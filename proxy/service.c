/* proxy/service.c - one loop's proxy service (proxy/service.h): the
 * listeners and the one over-limit rule (bridge/limit.h) on them, the HTTP
 * and SOCKS5 front ends, the resolver, the ask broker and the egress.
 * Written once here; proxy/worker.c and run/launch.c start it. */
#include "proxy/service.h"

#include "proxy/gw.h"
#include "proxy/proxy.h"
#include "proxy/server.h"
#include "socks/socks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Configuration                                                             */

static int dup_opt(char **out, const char *s)
{
    *out = s != NULL ? strdup(s) : NULL;
    return s != NULL && *out == NULL ? -1 : 0;
}

struct proxy_service_conf *proxy_service_conf_new(const struct settings *s, struct policy *p,
                                                  int auth)
{
    struct proxy_service_conf *c = calloc(1, sizeof(*c));

    if (c == NULL)
        return NULL;
    if (auth && (dup_opt(&c->auth_user, s->proxy.auth_username) < 0 ||
                 dup_opt(&c->auth_pass, s->proxy.auth_password) < 0)) {
        proxy_service_conf_free(c);
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

void proxy_service_conf_free(struct proxy_service_conf *c)
{
    if (c == NULL)
        return;
    policy_free(c->policy);
    proxy_gw_unref(c->gw);
    free(c->auth_user);
    free(c->auth_pass);
    free(c);
}

static void conf_frontend(struct frontend *fe, const struct proxy_service_conf *c)
{
    fe->auth_user = c->auth_user;
    fe->auth_pass = c->auth_pass;
    fe->handshake_timeout_ms = c->handshake_ms;
    fe->head_timeout_ms = c->head_ms;
    fe->idle_timeout_ms = c->idle_ms;
    fe->max_head_bytes = c->max_head;
    fe->max_conns = c->max_conns;
}

void proxy_service_apply(struct proxy_service *svc, struct proxy_service_conf *c)
{
    struct proxy_service_conf *old = svc->conf;

    if (c->policy != NULL && svc->egress != NULL) {
        egress_env_set_policy(svc->egress, c->policy); /* takes the reference */
        c->policy = NULL;
    }
    for (int k = 0; k < PROXY_FE_N; k++)
        conf_frontend(&svc->fe[k], c);
    svc->conf = c;
    if (svc->limit_on)
        conn_limit_set(&svc->limit, c->max_conns + PROXY_OVERLOAD_SLACK);
    proxy_service_conf_free(old);
}

/* ------------------------------------------------------------------------ */
/* Accepting and the limit                                                   */

size_t proxy_service_conns(const struct proxy_service *svc)
{
    return svc->fe[PROXY_FE_HTTP].nconns + svc->fe[PROXY_FE_SOCKS].nconns;
}

static size_t limit_live(void *ctx)
{
    const struct proxy_service *svc = ctx;
    size_t n = __atomic_load_n(svc->live, __ATOMIC_RELAXED);

    return svc->h.extra_live != NULL ? n + svc->h.extra_live(svc->h.ctx) : n;
}

static void on_accept(struct listener *l, void *arg)
{
    struct proxy_service_listener *sl = arg;
    struct proxy_service *svc = sl->svc;
    struct frontend *fe = &svc->fe[sl->kind];
    size_t before = fe->nconns, prev;
    int over, rc;

    if (svc->h.divert != NULL && svc->h.divert(svc->h.ctx, sl->kind, l))
        return;
    if (svc->state != PROXY_SERVICE_OPEN || conn_limit_admit(&svc->limit, l) < 0) {
        if (svc->h.accepted != NULL)
            svc->h.accepted(svc->h.ctx, sl->kind, 0, 0);
        return;
    }
    /* reserved before the front end decides, so the overload decision is
     * exact when the count is shared by several loops */
    prev = __atomic_fetch_add(svc->live, 1, __ATOMIC_RELAXED);
    if (svc->h.extra_live != NULL)
        prev += svc->h.extra_live(svc->h.ctx);
    over = prev >= svc->conf->max_conns;
    rc = sl->kind == PROXY_FE_HTTP ? http_session_accept(fe, l, over)
                                   : socks_session_accept(fe, l, over);
    if (fe->nconns == before) /* nothing was added: no conn_ended will come */
        __atomic_fetch_sub(svc->live, 1, __ATOMIC_RELAXED);
    conn_limit_accepted(&svc->limit, l, rc);
    if (svc->h.accepted != NULL)
        svc->h.accepted(svc->h.ctx, sl->kind, rc == 0, over);
}

/* A connection ended: accepting resumes below the limit; a drain ends with
 * the last one. */
static void on_conn_ended(struct frontend *f)
{
    struct proxy_service *svc = f->data;

    __atomic_fetch_sub(svc->live, 1, __ATOMIC_RELAXED);
    if (svc->h.ended != NULL)
        svc->h.ended(svc->h.ctx);
    if (svc->state != PROXY_SERVICE_OPEN) {
        if (svc->state == PROXY_SERVICE_DRAINING && proxy_service_conns(svc) == 0 &&
            svc->h.drained != NULL)
            svc->h.drained(svc->h.ctx);
        return;
    }
    conn_limit_released(&svc->limit);
    if (svc->h.released != NULL)
        svc->h.released(svc->h.ctx);
}

static void on_connlog(void *ctx, const struct connlog *r)
{
    struct proxy_service *svc = ctx;

    svc->h.log(svc->h.ctx, r);
}

/* ------------------------------------------------------------------------ */
/* Starting                                                                  */

void proxy_service_init(struct proxy_service *svc, uv_loop_t *loop, uint64_t *next_id,
                        size_t *live, const struct proxy_service_hooks *h)
{
    memset(svc, 0, sizeof(*svc));
    svc->loop = loop;
    svc->live = live != NULL ? live : &svc->own_live;
    svc->h = *h;
    for (int k = 0; k < PROXY_FE_N; k++) {
        struct frontend *fe = &svc->fe[k];
        frontend_init(fe, loop, next_id);
        fe->data = svc;
        fe->log = on_connlog;
        fe->log_ctx = svc;
        fe->conn_ended = on_conn_ended;
        if (k == PROXY_FE_SOCKS)
            fe->tls_adopt = http_tls_adopt; /* a no-op without svc->tls (UV_ENOTSUP) */
        if (h->debug != NULL) {
            fe->debug = h->debug;
            fe->debug_ctx = h->ctx;
        }
    }
}

int proxy_service_listen(struct proxy_service *svc, enum proxy_fe_kind kind,
                         const struct endpoint *ep, struct listener **out, const char **why)
{
    struct proxy_service_listener *sl;
    int rc;

    if (out != NULL)
        *out = NULL;
    if (svc->nls == PROXY_SERVICE_MAX_LISTENERS)
        return UV_EMFILE;
    sl = &svc->ls[svc->nls];
    sl->svc = svc;
    sl->kind = kind;
    rc = listener_open(&sl->l, svc->loop, ep, on_accept, sl, why);
    if (rc < 0) {
        sl->l = NULL;
        return rc;
    }
    svc->nls++;
    if (out != NULL)
        *out = sl->l;
    return 0;
}

/* The ask broker: shared, of its own with a handler, of its own behind a
 * relay, or none. */
static int start_ask(struct proxy_service *svc, const struct settings *s,
                     const struct proxy_service_ask *ask, char *err, size_t errlen)
{
    int rc;

    if (ask == NULL)
        return 0;
    if (ask->broker != NULL) {
        svc->broker = ask->broker;
        return 0;
    }
    if (ask->spec != NULL) {
        svc->own_broker = 1;
        return proxy_ask_start(&svc->broker, &svc->handler, svc->loop, s, ask->spec, err,
                               errlen);
    }
    if (ask->relay == NULL)
        return 0;
    rc = ask_broker_new(&svc->broker, svc->loop, s->proxy.ask_timeout_ms,
                        s->proxy.max_pending_asks);
    if (rc == 0) {
        svc->own_broker = 1;
        rc = ask->relay(ask->relay_ctx, svc->broker);
    }
    if (rc < 0) {
        snprintf(err, errlen, "cannot start the ask relay: %s", uv_strerror(rc));
        return -1;
    }
    return 0;
}

int proxy_service_start(struct proxy_service *svc, const struct settings *s,
                        struct proxy_service_conf *conf, const struct proxy_service_ask *ask,
                        char *err, size_t errlen)
{
    int rc;

    svc->conf = conf;
    if (proxy_resolver_start(&svc->resolver, svc->loop, s, err, errlen) < 0 ||
        start_ask(svc, s, ask, err, errlen) < 0)
        return -1;
    rc = egress_env_new(&svc->egress, svc->loop, conf->policy, svc->resolver, svc->broker,
                        s->proxy.dial_timeout_ms);
    if (rc < 0) {
        svc->egress = NULL;
        snprintf(err, errlen, "cannot start the proxies: %s", uv_strerror(rc));
        return -1;
    }
    conf->policy = NULL; /* the egress has the reference */
    for (int k = 0; k < PROXY_FE_N; k++) {
        svc->fe[k].egress = svc->egress;
        conf_frontend(&svc->fe[k], conf);
    }
    conn_limit_init(&svc->limit, svc->loop, conf->max_conns + PROXY_OVERLOAD_SLACK, limit_live,
                    svc);
    svc->limit_on = 1;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Stopping                                                                  */

void proxy_service_close_listeners(struct proxy_service *svc)
{
    for (size_t i = 0; i < svc->nls; i++) {
        listener_close(svc->ls[i].l, NULL, NULL);
        svc->ls[i].l = NULL;
    }
    svc->nls = 0;
    if (svc->limit_on)
        conn_limit_close(&svc->limit);
    svc->limit_on = 0;
}

void proxy_service_drain(struct proxy_service *svc)
{
    if (svc->state != PROXY_SERVICE_OPEN)
        return;
    svc->state = PROXY_SERVICE_DRAINING;
    proxy_service_close_listeners(svc);
    svc->fe[PROXY_FE_SOCKS].draining = 1;
    http_frontend_drain(&svc->fe[PROXY_FE_HTTP]);
}

void proxy_service_close_conns(struct proxy_service *svc)
{
    frontend_close_all(&svc->fe[PROXY_FE_SOCKS]);
    frontend_close_all(&svc->fe[PROXY_FE_HTTP]);
}

void proxy_service_close(struct proxy_service *svc, void (*done)(void *), void *arg)
{
    svc->state = PROXY_SERVICE_CLOSED;
    proxy_service_close_listeners(svc);
    if (!svc->own_broker)
        svc->broker = NULL; /* shared: its owner closes it */
    proxy_ask_close(&svc->broker, &svc->handler, done, arg);
    if (svc->resolver != NULL)
        resolver_close(svc->resolver, done, arg);
    svc->resolver = NULL;
}

void proxy_service_free(struct proxy_service *svc)
{
    egress_env_free(svc->egress);
    svc->egress = NULL;
    proxy_service_conf_free(svc->conf);
    svc->conf = NULL;
}
