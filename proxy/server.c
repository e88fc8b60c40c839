/* proxy/server.c - `sluice proxy`: the standalone egress proxy service.
 *
 * One libuv loop serves the SOCKS5 and HTTP front ends over one policy, one
 * resolver and one ask broker (proxy/core.c). This file owns the listeners,
 * the connection limit (over proxy.limits.maxConnections a connection is
 * refused quickly; PROXY_OVERLOAD_SLACK beyond it, or when descriptors or
 * memory run out, accepting pauses until a connection ends: the one rule
 * of bridge/limit.h), reload
 * (SIGHUP re-reads the settings and swaps the policy for new requests; a
 * bad file keeps the old one), and drain: SIGTERM/SIGINT stop accepting,
 * close kept-alive HTTP connections that wait between requests, let the
 * rest finish for proxy.timeouts.drain, close what is left and exit 0. The
 * admin listener is proxy/admin.c, the counters proxy/metrics.c, the log
 * proxy/log.c.
 */
#include "proxy/server-int.h"

#include "bridge/limit.h"
#include "proxy/proxy.h"
#include "socks/socks.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define WATCH_DEBOUNCE_MS 500 /* --watch: one reload per burst of changes */

static void on_connlog(void *ctx, const struct connlog *r)
{
    struct proxy_srv *srv = ctx;

    proxy_metrics_note(&srv->m, r);
    proxy_log_record(&srv->log, r);
}

/* ------------------------------------------------------------------------ */
/* Settings and policy                                                       */

/* Loads and compiles; in proxy mode private addresses are denied unless the
 * settings say otherwise. 0, or -1 with the message in err. */
static int load_policy(struct proxy_srv *srv, struct settings *s, struct policy **p,
                       struct settings_error *err)
{
    settings_init(s);
    if (settings_load(s, srv->settings_path, err) < 0 || settings_apply_managed(s, NULL, err) < 0)
        return -1;
    if (s->network.deny_private_addresses == SETTINGS_UNSET)
        s->network.deny_private_addresses = SETTINGS_TRUE;
    if (policy_compile(s, p, err) < 0)
        return -1;
    proxy_set_local(*p, srv->laddr, srv->lport, srv->nlisten);
    return 0;
}

static void reload(struct proxy_srv *srv)
{
    struct settings s;
    struct settings_error err;
    struct policy *p = NULL;
    char msg[1200];

    notify_reloading(srv->notify);
    if (load_policy(srv, &s, &p, &err) < 0) {
        proxy_metrics_reload(&srv->m, 0);
        snprintf(msg, sizeof(msg), "reload failed, keeping the current policy: %s", err.msg);
        proxy_log_event(&srv->log, "error", "reload_failed", msg);
        settings_free(&s);
        notify_ready(srv->notify); /* still serving, on the old policy */
        return;
    }
    proxy_metrics_reload(&srv->m, 1);
    egress_env_set_policy(srv->core.egress, p);
    settings_free(&srv->settings);
    srv->settings = s;
    proxy_frontend_apply(&srv->socks.fe, &srv->settings, 1);
    proxy_frontend_apply(&srv->http.fe, &srv->settings, 1);
    srv->max_conns = proxy_max_connections(&srv->settings);
    conn_limit_set(&srv->limit, srv->max_conns + PROXY_OVERLOAD_SLACK);
    snprintf(msg, sizeof(msg), "settings reloaded: %zu rules", policy_rule_count(p));
    proxy_log_event(&srv->log, "info", "reload", msg);
    if (srv->watch != NULL && watch_update(srv->watch, &srv->settings) < 0)
        proxy_log_event(&srv->log, "error", "watch_failed",
                        "cannot watch the settings' directories any more");
    notify_ready(srv->notify);
}

static void on_watch(void *ctx)
{
    struct proxy_srv *srv = ctx;

    if (!srv->stopping)
        reload(srv);
}

/* NULL when ready: serving (listeners open, not paused for overload) with a
 * policy loaded, and not draining. A failed reload keeps the old policy and
 * does not change readiness (it is counted in sluice_reloads_total). */
const char *proxy_not_ready(const struct proxy_srv *srv)
{
    if (srv->stopping)
        return "draining";
    if (srv->core.egress == NULL || egress_env_policy(srv->core.egress) == NULL)
        return "no policy loaded";
    if (conn_limit_paused(&srv->limit))
        return "over the connection limit: not accepting";
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Accepting, limits, shutdown                                               */

static size_t live_conns(const struct proxy_srv *srv)
{
    return srv->socks.fe.nconns + srv->http.fe.nconns;
}

static void shutdown_done(void *arg)
{
    (void)arg;
}

static void on_handle_closed(uv_handle_t *h)
{
    (void)h;
}

static void finish(struct proxy_srv *srv)
{
    if (srv->stopping == 2)
        return;
    srv->stopping = 2;
    proxy_log_event(&srv->log, "info", "stopped", "all connections closed");
    proxy_core_close(&srv->core, shutdown_done, NULL);
    uv_close((uv_handle_t *)&srv->sig_hup, on_handle_closed);
    uv_close((uv_handle_t *)&srv->sig_term, on_handle_closed);
    uv_close((uv_handle_t *)&srv->sig_int, on_handle_closed);
    uv_close((uv_handle_t *)&srv->sig_usr1, on_handle_closed);
    watch_close(srv->watch, NULL, NULL);
    srv->watch = NULL;
    notify_close(srv->notify, NULL, NULL);
    srv->notify = NULL;
    uv_close((uv_handle_t *)&srv->drain_timer, on_handle_closed);
    proxy_log_stop(&srv->log);
    conn_limit_close(&srv->limit);
    proxy_admin_close(srv);
}

static void on_conn_ended(struct frontend *f)
{
    struct service *svc = f->data;
    struct proxy_srv *srv = svc->srv;

    if (srv->stopping) {
        if (live_conns(srv) == 0)
            finish(srv);
        return;
    }
    conn_limit_released(&srv->limit); /* resumes accepting below the limit */
}

static void on_accept(struct listener *l, void *arg)
{
    struct service *svc = arg;
    struct proxy_srv *srv = svc->srv;
    size_t live = live_conns(srv);
    int over = live >= srv->max_conns, rc;

    if (srv->stopping || conn_limit_admit(&srv->limit, l) < 0)
        return;
    rc = svc->accept(&svc->fe, l, over);
    if (rc == 0) {
        svc->accepted++;
        if (over)
            svc->overloaded++;
    }
    conn_limit_accepted(&srv->limit, l, rc);
}

static void on_drain_timeout(uv_timer_t *t)
{
    struct proxy_srv *srv = t->data;
    char msg[120];

    snprintf(msg, sizeof(msg), "drain time is up: closing %zu connections", live_conns(srv));
    proxy_log_event(&srv->log, "warn", "drain_timeout", msg);
    frontend_close_all(&srv->socks.fe);
    frontend_close_all(&srv->http.fe);
}

static void begin_stop(struct proxy_srv *srv, const char *why)
{
    char msg[200];

    if (srv->stopping)
        return;
    srv->stopping = 1;
    conn_limit_close(&srv->limit);
    snprintf(msg, sizeof(msg), "%s: no longer accepting; draining %zu connections for up to %u ms",
             why, live_conns(srv), srv->settings.proxy.drain_timeout_ms);
    proxy_log_event(&srv->log, "info", "drain", msg);
    notify_stopping(srv->notify);
    if (srv->socks.l != NULL)
        listener_close(srv->socks.l, NULL, NULL);
    if (srv->http.l != NULL)
        listener_close(srv->http.l, NULL, NULL);
    srv->socks.l = srv->http.l = NULL;
    /* kept-alive HTTP connections waiting between requests close now, the
     * others after their current answer; tunnels run on until the timer */
    srv->socks.fe.draining = 1;
    http_frontend_drain(&srv->http.fe);
    if (live_conns(srv) == 0) {
        finish(srv);
        return;
    }
    uv_timer_start(&srv->drain_timer, on_drain_timeout, srv->settings.proxy.drain_timeout_ms, 0);
}

static void on_signal(uv_signal_t *h, int signum)
{
    struct proxy_srv *srv = h->data;

    if (signum == SIGUSR1) {
        proxy_log_reopen(&srv->log, srv->log_path);
        return;
    }
    if (signum == SIGHUP) {
        proxy_log_reopen(&srv->log, srv->log_path);
        if (!srv->stopping)
            reload(srv);
        return;
    }
    if (srv->stopping == 1) { /* a second signal: do not wait any longer */
        on_drain_timeout(&srv->drain_timer);
        return;
    }
    begin_stop(srv, signum == SIGTERM ? "SIGTERM" : "SIGINT");
}

/* ------------------------------------------------------------------------ */
/* Start-up                                                                  */

/* The listener's address for the guard (the proxy never dials itself). */
static void note_listener(struct proxy_srv *srv, struct listener *l)
{
    if (srv->nlisten < 3 &&
        listener_address(l, &srv->laddr[srv->nlisten], &srv->lport[srv->nlisten]) == 0)
        srv->nlisten++;
}

static int open_service(struct proxy_srv *srv, struct service *svc)
{
    const char *why = NULL;
    char ep[200];
    int rc;

    if (!svc->on)
        return 0;
    rc = listener_open(&svc->l, &srv->loop, &svc->ep, on_accept, svc, &why);
    if (rc < 0) {
        fprintf(stderr, "sluice: proxy: cannot listen on %s (%s): %s\n",
                endpoint_str(&svc->ep, ep, sizeof(ep)), svc->name, why != NULL ? why : uv_strerror(rc));
        return -1;
    }
    note_listener(srv, svc->l);
    return 0;
}

/* The endpoint as bound (tcp port 0 resolved). */
static const char *listen_str(int on, const struct endpoint *bound, const struct listener *l,
                              char *buf, size_t len)
{
    struct endpoint ep = *bound;
    struct policy_addr a;
    uint16_t port;

    if (!on)
        return "off";
    if (ep.kind == ENDPOINT_TCP && l != NULL && listener_address(l, &a, &port) == 0) {
        ep.addr = a;
        ep.port = port;
    }
    return endpoint_str(&ep, buf, len);
}

static const char *service_str(const struct service *svc, char *buf, size_t len)
{
    return listen_str(svc->on, &svc->ep, svc->l, buf, len);
}

static void init_service(struct proxy_srv *srv, struct service *svc, const char *name,
                         const struct endpoint *ep, int on,
                         int (*accept)(struct frontend *, struct listener *, int))
{
    svc->srv = srv;
    svc->name = name;
    svc->on = on;
    svc->ep = *ep;
    svc->accept = accept;
    frontend_init(&svc->fe, &srv->loop, &srv->next_id);
    svc->fe.data = svc;
    svc->fe.log = on_connlog;
    svc->fe.log_ctx = srv;
    svc->fe.conn_ended = on_conn_ended;
}

static size_t live_of(void *ctx)
{
    return live_conns(ctx);
}

static void walk_close(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}


void proxy_opts_init(struct proxy_opts *o)
{
    const char *why = NULL;

    memset(o, 0, sizeof(*o));
    (void)endpoint_parse("tcp:127.0.0.1:3128", 1, &o->http, &why);
    (void)endpoint_parse("tcp:127.0.0.1:1080", 1, &o->socks, &why);
    o->http_on = o->socks_on = 1;
}

/* Listeners first, so the guard knows their addresses; then the policy and
 * the core. The exit status on failure, 0 on success. */
static int start(struct proxy_srv *srv)
{
    struct settings_error err;
    struct policy *p = NULL;
    char msg[1200];

    if (open_service(srv, &srv->http) < 0 || open_service(srv, &srv->socks) < 0 ||
        proxy_admin_open(srv) < 0)
        return 1;
    if (srv->admin.l != NULL)
        note_listener(srv, srv->admin.l);
    if (load_policy(srv, &srv->settings, &p, &err) < 0) {
        fprintf(stderr, "%s\n", err.msg);
        policy_free(p);
        return 2;
    }
    for (size_t i = 0; i < srv->settings.notices.n; i++)
        fprintf(stderr, "sluice: warning: %s\n", srv->settings.notices.items[i].value);
    if (proxy_core_start(&srv->core, &srv->loop, &srv->settings, p, srv->ask_spec, msg,
                         sizeof(msg)) < 0) {
        fprintf(stderr, "sluice: proxy: %s\n", msg);
        policy_free(p);
        return srv->ask_spec != NULL && strncmp(msg, "--ask", 5) == 0 ? 2 : 1;
    }
    srv->socks.fe.egress = srv->core.egress;
    srv->http.fe.egress = srv->core.egress;
    proxy_frontend_apply(&srv->socks.fe, &srv->settings, 1);
    proxy_frontend_apply(&srv->http.fe, &srv->settings, 1);
    egress_env_set_observer(srv->core.egress, proxy_metrics_outcome, &srv->m);
    srv->max_conns = proxy_max_connections(&srv->settings);
    conn_limit_set(&srv->limit, srv->max_conns + PROXY_OVERLOAD_SLACK);
    return 0;
}

static void start_signals(struct proxy_srv *srv)
{
    uv_signal_init(&srv->loop, &srv->sig_hup);
    uv_signal_init(&srv->loop, &srv->sig_term);
    uv_signal_init(&srv->loop, &srv->sig_int);
    uv_timer_init(&srv->loop, &srv->drain_timer);
    srv->sig_hup.data = srv->sig_term.data = srv->sig_int.data = srv;
    srv->drain_timer.data = srv;
    proxy_log_start(&srv->log, &srv->loop);
    uv_signal_start(&srv->sig_hup, on_signal, SIGHUP);
    uv_signal_start(&srv->sig_term, on_signal, SIGTERM);
    uv_signal_start(&srv->sig_int, on_signal, SIGINT);
    uv_signal_init(&srv->loop, &srv->sig_usr1);
    srv->sig_usr1.data = srv;
    uv_signal_start(&srv->sig_usr1, on_signal, SIGUSR1);
}

/* STATUS= for systemd: what `systemctl status` shows. */
static void notify_status_text(void *ctx, char *buf, size_t len)
{
    struct proxy_srv *srv = ctx;
    uint64_t allowed = 0, denied = 0;

    for (int p = 0; p < MPROTO_N; p++) {
        allowed += srv->m.decisions[p][MDEC_ALLOW];
        denied += srv->m.decisions[p][MDEC_DENY] + srv->m.decisions[p][MDEC_WOULD_DENY];
    }
    snprintf(buf, len,
             "%s%zu connections (http %zu, socks5 %zu); %llu allowed, %llu denied; "
             "%zu rules; %llu reloads, %llu failed",
             srv->stopping ? "draining: " : "", live_conns(srv), srv->http.fe.nconns,
             srv->socks.fe.nconns, (unsigned long long)allowed, (unsigned long long)denied,
             srv->core.egress != NULL ? policy_rule_count(egress_env_policy(srv->core.egress)) : 0,
             (unsigned long long)srv->m.reloads_ok, (unsigned long long)srv->m.reloads_failed);
}

/* The notify socket and --watch (proxy/ops.h), once everything else is up:
 * 0, or 2 after printing why. */
static int start_ops(struct proxy_srv *srv)
{
    const char *why = NULL;
    const char *path = srv->settings_path != NULL ? srv->settings_path : getenv("SLUICE_SETTINGS");

    if (srv->watch_on &&
        watch_start(&srv->watch, &srv->loop, path, &srv->settings, WATCH_DEBOUNCE_MS, on_watch,
                    srv, &why) < 0) {
        fprintf(stderr, "sluice: proxy: --watch: %s\n", why);
        return 2;
    }
    if (notify_open(&srv->notify, &srv->loop, notify_status_text, srv, &why) < 0) {
        fprintf(stderr, "sluice: proxy: NOTIFY_SOCKET: %s\n", why);
        return 2;
    }
    return 0;
}

static void log_start(struct proxy_srv *srv)
{
    char msg[800], e1[200], e2[200], e3[200];

    snprintf(msg, sizeof(msg),
             "sluice %s listening: http %s, socks5 %s%s%s; %zu rules%s%s; maxConnections %zu%s, "
             "descriptors %lu",
             SLUICE_VERSION, service_str(&srv->http, e1, sizeof(e1)),
             service_str(&srv->socks, e2, sizeof(e2)), srv->admin.on ? ", admin " : "",
             srv->admin.on ? listen_str(1, &srv->admin.ep, srv->admin.l, e3, sizeof(e3)) : "",
             policy_rule_count(egress_env_policy(srv->core.egress)),
             srv->settings.network.mode == SETTINGS_MODE_REPORT ? "; report mode" : "",
             srv->ask_spec != NULL ? "; asking unmatched" : "", srv->max_conns,
             srv->settings.proxy.max_connections == 0 ? " (from the descriptor limit)" : "",
             srv->nofile);
    proxy_log_event(&srv->log, "info", "start", msg);
    fflush(srv->log.f); /* the start line is out before READY=1 */
    notify_ready(srv->notify);
}

/* Error paths close whatever was opened; a clean stop has closed it all. */
static int cleanup(struct proxy_srv *srv, int code)
{
    if (srv->stopping != 2) {
        if (srv->socks.l != NULL)
            listener_close(srv->socks.l, NULL, NULL);
        if (srv->http.l != NULL)
            listener_close(srv->http.l, NULL, NULL);
        proxy_admin_close(srv);
        proxy_core_close(&srv->core, NULL, NULL);
        watch_close(srv->watch, NULL, NULL);
        notify_close(srv->notify, NULL, NULL);
        uv_walk(&srv->loop, walk_close, NULL);
        uv_run(&srv->loop, UV_RUN_DEFAULT);
    }
    if (uv_loop_close(&srv->loop) != 0 && code == 0) {
        fprintf(stderr, "sluice: proxy: handles left open at exit\n");
        code = 1;
    }
    proxy_core_free(&srv->core);
    settings_free(&srv->settings);
    proxy_log_close(&srv->log);
    return code;
}

int proxy_server_run(const struct proxy_opts *o)
{
    struct proxy_srv *srv;
    int code;

    if (!o->http_on && !o->socks_on) {
        fprintf(stderr, "sluice: proxy: both --http and --socks are off: nothing to serve\n");
        return 2;
    }
    srv = calloc(1, sizeof(*srv));
    if (srv == NULL) {
        fprintf(stderr, "sluice: proxy: out of memory\n");
        return 1;
    }
    if (uv_loop_init(&srv->loop) != 0) {
        fprintf(stderr, "sluice: proxy: cannot create the event loop\n");
        free(srv);
        return 1;
    }
    settings_init(&srv->settings);
    srv->settings_path = o->settings_path;
    srv->ask_spec = o->ask_spec;
    srv->log_path = o->log_path;
    srv->watch_on = o->watch;
    srv->admin.ep = o->admin;
    srv->admin.on = o->admin_on;
    proxy_metrics_init(&srv->m);
    init_service(srv, &srv->http, "http", &o->http, o->http_on, http_session_accept);
    init_service(srv, &srv->socks, "socks5", &o->socks, o->socks_on, socks_session_accept);
    srv->http.fe.health_path = o->health_path;
    if (proxy_log_open(&srv->log, o->log_path, o->json) < 0) {
        fprintf(stderr, "sluice: proxy: cannot open log file '%s': %s\n", o->log_path,
                strerror(errno));
        code = cleanup(srv, 1);
        free(srv);
        return code;
    }
    proxy_log_buffer(&srv->log);
    signal(SIGPIPE, SIG_IGN);
    /* no signal an operator may send kills the proxy by default */
    signal(SIGUSR2, SIG_IGN);
    signal(SIGALRM, SIG_IGN);
    srv->nofile = proxy_raise_nofile();
    conn_limit_init(&srv->limit, &srv->loop, 1, live_of, srv);
    code = start(srv);
    if (code == 0) {
        start_signals(srv);
        code = start_ops(srv);
    }
    if (code == 0) {
        log_start(srv);
        uv_run(&srv->loop, UV_RUN_DEFAULT);
    }
    code = cleanup(srv, code);
    free(srv);
    return code;
}
