/* proxy/server.c - `sluice proxy`: the standalone egress proxy service, the
 * process side.
 *
 * N workers (proxy/worker.c; --workers, default the online CPUs, at most
 * 64; 1 is a single event loop) serve the SOCKS5 and HTTP front ends; this
 * file owns what there is one of: the settings and the one policy (each
 * worker's egress holds a reference; SIGHUP compiles a new one and hands
 * every worker a reference, a bad file keeps the old one), the one ask
 * broker and its handler (proxy/askrelay.c brings the workers' questions
 * to it), signals, the admin listener (proxy/admin.c) and its metrics
 * (proxy/metrics.c, summed over workers), the one log stream
 * (proxy/log.c), and drain: SIGTERM/SIGINT tell every worker to stop
 * accepting, close kept-alive HTTP connections that wait between requests
 * and let the rest finish for proxy.timeouts.drain; then what is left is
 * closed and the process exits 0. The connection limit is process-wide
 * (server-int.h, bridge/limit.h): over proxy.limits.maxConnections a
 * connection is refused quickly; PROXY_OVERLOAD_SLACK beyond it, or when
 * descriptors or memory run out, accepting pauses until a connection ends.
 */
#include "proxy/server-int.h"

#include "proxy/creds.h"
#include "proxy/gw.h"
#include "proxy/gwrun.h"
#include "proxy/proxy.h"
#include "proxy/tlsterm.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WATCH_DEBOUNCE_MS 500 /* --watch: one reload per burst of changes */

static size_t live_conns(const struct proxy_srv *srv)
{
    return __atomic_load_n(&srv->live, __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------------------ */
/* Settings and policy                                                       */

/* Loads and compiles with the proxy's defaults (proxy_settings_defaults:
 * private addresses are denied unless the settings say otherwise), and
 * reads credentials.headers' values (*gw, NULL when there are none). 0, or
 * -1 with the message in err (nothing is left in *p or *gw). */
static int load_policy(struct proxy_srv *srv, struct settings *s, struct policy **p,
                       struct proxy_gw **gw, struct settings_error *err)
{
    int rc;

    *gw = NULL;
    settings_init(s);
    if (settings_load(s, srv->settings_path, err) < 0 || settings_apply_managed(s, NULL, err) < 0)
        return -1;
    proxy_settings_defaults(s);
    if (proxy_tls_settings_check(s, err) < 0 || proxy_creds_settings_check(s, err) < 0)
        return -1;
    if (proxy_gw_trusted(s, err) < 0 || policy_compile(s, p, err) < 0)
        return -1;
    rc = proxy_gw_new(s, proxy_gw_now(), gw, err);
    if (rc < 0) {
        if (rc == -ENOMEM)
            snprintf(err->msg, sizeof(err->msg), "credentials.headers: out of memory");
        policy_free(*p);
        *p = NULL;
        return -1;
    }
    proxy_set_local(*p, srv->laddr, srv->lport, srv->nlisten);
    return 0;
}

static void gw_log(void *ctx, const char *level, const char *event, const char *msg)
{
    struct proxy_srv *srv = ctx;

    proxy_log_event(&srv->log, level, event, msg);
}

static void reload(struct proxy_srv *srv)
{
    struct settings s;
    struct settings_error err;
    struct policy *p = NULL;
    struct proxy_gw *gw = NULL;
    struct proxy_service_conf *confs[PROXY_MAX_WORKERS];
    char msg[1200];
    unsigned i;

    notify_reloading(srv->notify);
    if (load_policy(srv, &s, &p, &gw, &err) < 0 ||
        proxy_tls_reload_check(srv->tls, &s, &err) < 0) {
        proxy_metrics_reload(srv, 0);
        snprintf(msg, sizeof(msg), "reload failed, keeping the current policy: %s", err.msg);
        proxy_log_event(&srv->log, "error", "reload_failed", msg);
        policy_free(p);
        proxy_gw_unref(gw);
        settings_free(&s);
        notify_ready(srv->notify); /* still serving, on the old policy */
        return;
    }
    proxy_gw_carry(gw, srv->gw); /* helper values go on while they last */
    for (i = 0; i < srv->nworkers; i++) {
        confs[i] = proxy_service_conf_new(&s, p, 1);
        if (confs[i] == NULL)
            break;
        confs[i]->gw = proxy_gw_ref(gw);
    }
    if (i < srv->nworkers) { /* all or nothing: one policy for every worker */
        while (i-- > 0)
            proxy_service_conf_free(confs[i]);
        proxy_metrics_reload(srv, 0);
        proxy_log_event(&srv->log, "error", "reload_failed",
                        "reload failed, keeping the current policy: out of memory");
        policy_free(p);
        proxy_gw_unref(gw);
        settings_free(&s);
        notify_ready(srv->notify);
        return;
    }
    for (i = 0; i < srv->nworkers; i++) {
        struct mail *m = mail_new(MAIL_CONF, srv->workers[i]);
        if (m == NULL) {
            proxy_service_conf_free(confs[i]);
            continue;
        }
        m->conf = confs[i];
        proxy_worker_send(srv->workers[i], m);
    }
    proxy_metrics_reload(srv, 1);
    policy_free(srv->policy);
    srv->policy = p;
    proxy_gw_unref(srv->gw);
    srv->gw = gw;
    if (srv->gwrun != NULL)
        proxy_gwrun_set(srv->gwrun, gw);
    settings_free(&srv->settings); /* the workers hold copies of what they use */
    srv->settings = s;
    srv->max_conns = proxy_max_connections(&srv->settings);
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
    if (srv->policy == NULL)
        return "no policy loaded";
    if (proxy_gw_unready(srv->gw, proxy_gw_now()) != NULL)
        return "a credentials.headers entry has no value (its helper has not given one, or it "
               "failed)";
    for (unsigned i = 0; i < srv->nworkers; i++)
        if (__atomic_load_n(&srv->workers[i]->paused, __ATOMIC_RELAXED))
            return "over the connection limit: not accepting";
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Stopping                                                                  */

static void shutdown_done(void *arg)
{
    (void)arg;
}

static void on_handle_closed(uv_handle_t *h)
{
    (void)h;
}

/* Every worker is done: close what the process holds; the loop ends. */
static void finish(struct proxy_srv *srv)
{
    if (srv->stopping == 2)
        return;
    srv->stopping = 2;
    proxy_log_event(&srv->log, "info", "stopped", "all connections closed");
    proxy_ask_close(&srv->broker, &srv->handler, shutdown_done, NULL);
    proxy_gwrun_close(srv->gwrun);
    srv->gwrun = NULL;
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
    proxy_admin_close(srv);
    mailbox_close(&srv->q);
}

void proxy_worker_done(struct proxy_srv *srv, struct proxy_worker *w)
{
    askrelay_main_forget(&srv->hub, w);
    if (++srv->ndone == srv->nworkers)
        finish(srv);
}

static void send_all(struct proxy_srv *srv, enum mail_kind kind)
{
    for (unsigned i = 0; i < srv->nworkers; i++)
        proxy_worker_send(srv->workers[i], mail_new(kind, srv->workers[i]));
}

static void on_drain_timeout(uv_timer_t *t)
{
    struct proxy_srv *srv = t->data;
    char msg[120];

    snprintf(msg, sizeof(msg), "drain time is up: closing %zu connections", live_conns(srv));
    proxy_log_event(&srv->log, "warn", "drain_timeout", msg);
    send_all(srv, MAIL_CLOSE_ALL);
}

static void begin_stop(struct proxy_srv *srv, const char *why)
{
    char msg[200];

    if (srv->stopping)
        return;
    srv->stopping = 1;
    snprintf(msg, sizeof(msg), "%s: no longer accepting; draining %zu connections for up to %u ms",
             why, live_conns(srv), srv->settings.proxy.drain_timeout_ms);
    proxy_log_event(&srv->log, "info", "drain", msg);
    notify_stopping(srv->notify);
    /* tunnels run on until the timer; each worker reports when it is done */
    uv_timer_start(&srv->drain_timer, on_drain_timeout, srv->settings.proxy.drain_timeout_ms, 0);
    send_all(srv, MAIL_STOP);
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

/* Questions and withdrawals from the workers' brokers; workers done. */
static void on_main_messages(uv_async_t *a)
{
    struct proxy_srv *srv = a->data;
    struct mail *m = mailbox_take(&srv->q);

    while (m != NULL) {
        struct mail *next = m->next;
        if (m->kind == MAIL_ASK)
            askrelay_main_ask(&srv->hub, srv->stopping == 2 ? NULL : srv->broker, m);
        else if (m->kind == MAIL_WITHDRAW)
            askrelay_main_withdraw(&srv->hub, m);
        else if (m->kind == MAIL_DONE)
            proxy_worker_done(srv, m->w);
        mail_free(m);
        m = next;
    }
}

/* ------------------------------------------------------------------------ */
/* Start-up                                                                  */

/* The listener's address for the guard (the proxy never dials itself). */
static void note_listener(struct proxy_srv *srv, struct listener *l)
{
    if (l != NULL && srv->nlisten < 3 &&
        listener_address(l, &srv->laddr[srv->nlisten], &srv->lport[srv->nlisten]) == 0)
        srv->nlisten++;
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

/* The ask broker and handler, on the main loop. 0 or the exit status. */
static int start_ask(struct proxy_srv *srv)
{
    char msg[1200];

    if (srv->ask_spec == NULL)
        return 0;
    if (proxy_ask_start(&srv->broker, &srv->handler, &srv->loop, &srv->settings, srv->ask_spec,
                        msg, sizeof(msg)) < 0) {
        fprintf(stderr, "sluice: proxy: %s\n", msg);
        return 2;
    }
    return 0;
}

/* Listeners first, so the guard knows their addresses; then the policy, the
 * ask broker and the workers' resolvers and egress. 0 or the exit status. */
static int start(struct proxy_srv *srv)
{
    struct settings_error err;
    struct policy *p = NULL;
    char msg[1200];
    int code;

    for (unsigned i = 0; i < srv->nworkers; i++) {
        code = proxy_worker_new(srv, i, &srv->workers[i]);
        if (srv->workers[i] != NULL)
            srv->nworkers_made = i + 1;
        if (code != 0)
            return code;
    }
    note_listener(srv, srv->workers[0]->http.l);
    note_listener(srv, srv->workers[0]->socks.l);
    if (proxy_admin_open(srv) < 0)
        return 1;
    note_listener(srv, srv->admin.l);
    if (load_policy(srv, &srv->settings, &p, &srv->gw, &err) < 0) {
        fprintf(stderr, "%s\n", err.msg);
        policy_free(p);
        return 2;
    }
    srv->policy = p;
    srv->gwrun = proxy_gwrun_new(&srv->loop, gw_log, srv); /* helpers start with the signals */
    if (srv->gwrun == NULL) {
        fprintf(stderr, "sluice: proxy: out of memory\n");
        return 1;
    }
    if (proxy_tls_shared_new(&srv->settings, &srv->tls, msg, sizeof(msg)) < 0) {
        fprintf(stderr, "sluice: proxy: network.tlsTerminate: %s\n", msg);
        return 2;
    }
    if (srv->tls != NULL && srv->tls->warning != NULL)
        fprintf(stderr, "sluice: warning: network.tlsTerminate: %s\n", srv->tls->warning);
    for (size_t i = 0; i < srv->settings.notices.n; i++)
        fprintf(stderr, "sluice: warning: %s\n", srv->settings.notices.items[i].value);
    srv->max_conns = proxy_max_connections(&srv->settings);
    code = start_ask(srv);
    if (code != 0)
        return code;
    for (unsigned i = 0; i < srv->nworkers; i++) {
        struct proxy_service_conf *conf = proxy_service_conf_new(&srv->settings, p, 1);
        if (conf == NULL) {
            fprintf(stderr, "sluice: proxy: out of memory\n");
            return 1;
        }
        conf->gw = proxy_gw_ref(srv->gw);
        if (proxy_worker_setup(srv->workers[i], conf, msg, sizeof(msg)) != 0) {
            fprintf(stderr, "sluice: proxy: %s\n", msg);
            return 1;
        }
    }
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

/* STATUS= for systemd: what `systemctl status` shows (summed over workers). */
static void notify_status_text(void *ctx, char *buf, size_t len)
{
    struct proxy_srv *srv = ctx;
    uint64_t allowed = 0, denied = 0;
    size_t http = 0, socks = 0;

    for (unsigned i = 0; i < srv->nworkers; i++) {
        const struct proxy_worker *w = srv->workers[i];
        for (int p = 0; p < MPROTO_N; p++) {
            allowed += __atomic_load_n(&w->m.decisions[p][MDEC_ALLOW], __ATOMIC_RELAXED);
            denied += __atomic_load_n(&w->m.decisions[p][MDEC_DENY], __ATOMIC_RELAXED) +
                      __atomic_load_n(&w->m.decisions[p][MDEC_WOULD_DENY], __ATOMIC_RELAXED);
        }
        http += __atomic_load_n(&w->http.live, __ATOMIC_RELAXED);
        socks += __atomic_load_n(&w->socks.live, __ATOMIC_RELAXED);
    }
    snprintf(buf, len,
             "%s%zu connections (http %zu, socks5 %zu); %llu allowed, %llu denied; "
             "%zu rules; %llu reloads, %llu failed",
             srv->stopping ? "draining: " : "", live_conns(srv), http, socks,
             (unsigned long long)allowed, (unsigned long long)denied,
             srv->policy != NULL ? policy_rule_count(srv->policy) : 0,
             (unsigned long long)srv->reloads_ok, (unsigned long long)srv->reloads_failed);
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
    const struct proxy_worker *w0 = srv->workers[0];
    char msg[900], e1[200], e2[200], e3[200];

    snprintf(msg, sizeof(msg),
             "sluice %s listening: http %s, socks5 %s%s%s; %zu rules%s%s; maxConnections %zu%s, "
             "descriptors %lu; %u worker%s",
             SLUICE_VERSION, service_str(&w0->http, e1, sizeof(e1)),
             service_str(&w0->socks, e2, sizeof(e2)), srv->admin.on ? ", admin " : "",
             srv->admin.on ? listen_str(1, &srv->admin.ep, srv->admin.l, e3, sizeof(e3)) : "",
             policy_rule_count(srv->policy),
             srv->settings.network.mode == SETTINGS_MODE_REPORT ? "; report mode" : "",
             srv->ask_spec != NULL ? "; asking unmatched" : "", srv->max_conns,
             srv->settings.proxy.max_connections == 0 ? " (from the descriptor limit)" : "",
             srv->nofile, srv->nworkers, srv->nworkers == 1 ? "" : "s");
    proxy_log_event(&srv->log, "info", "start", msg);
    fflush(srv->log.f); /* the start line is out before READY=1 */
    notify_ready(srv->notify);
}

static void walk_close(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

/* Error paths close whatever was opened; a clean stop has closed it all. */
static int cleanup(struct proxy_srv *srv, int code)
{
    if (srv->stopping != 2) {
        for (unsigned i = 0; i < srv->nworkers_made; i++)
            proxy_worker_abort(srv->workers[i]);
        proxy_admin_close(srv);
        proxy_ask_close(&srv->broker, &srv->handler, NULL, NULL);
        proxy_gwrun_close(srv->gwrun);
        srv->gwrun = NULL;
        watch_close(srv->watch, NULL, NULL);
        notify_close(srv->notify, NULL, NULL);
        srv->watch = NULL;
        srv->notify = NULL;
        uv_walk(&srv->loop, walk_close, NULL);
        uv_run(&srv->loop, UV_RUN_DEFAULT);
    }
    for (unsigned i = 0; i < srv->nworkers_made; i++)
        proxy_worker_free(srv->workers[i]); /* joins the threads */
    if (srv->q_ok)
        mailbox_destroy(&srv->q);
    if (uv_loop_close(&srv->loop) != 0 && code == 0) {
        fprintf(stderr, "sluice: proxy: handles left open at exit\n");
        code = 1;
    }
    policy_free(srv->policy);
    proxy_gw_unref(srv->gw);
    settings_free(&srv->settings);
    proxy_log_close(&srv->log);
    if (srv->tls != NULL) {
        proxy_tls_shared_free(srv->tls);
        uv_library_shutdown(); /* the mint threads end before OpenSSL's atexit (tls.h) */
    }
    return code;
}

void proxy_opts_init(struct proxy_opts *o)
{
    const char *why = NULL;

    memset(o, 0, sizeof(*o));
    (void)endpoint_parse("tcp:127.0.0.1:3128", 1, &o->http, &why);
    (void)endpoint_parse("tcp:127.0.0.1:1080", 1, &o->socks, &why);
    o->http_on = o->socks_on = 1;
    o->workers = 0;
}

unsigned proxy_default_workers(void)
{
    unsigned n = uv_available_parallelism();

    return n < 1 ? 1 : n > PROXY_MAX_WORKERS ? PROXY_MAX_WORKERS : n;
}

static struct proxy_srv *srv_new(const struct proxy_opts *o)
{
    struct proxy_srv *srv = calloc(1, sizeof(*srv));
    struct timespec ts;

    if (srv == NULL) {
        fprintf(stderr, "sluice: proxy: out of memory\n");
        return NULL;
    }
    if (uv_loop_init(&srv->loop) != 0) {
        fprintf(stderr, "sluice: proxy: cannot create the event loop\n");
        free(srv);
        return NULL;
    }
    settings_init(&srv->settings);
    srv->o = *o;
    srv->settings_path = o->settings_path;
    srv->ask_spec = o->ask_spec;
    srv->admin.ep = o->admin;
    srv->admin.on = o->admin_on;
    srv->log_path = o->log_path;
    srv->watch_on = o->watch;
    srv->nworkers = o->workers > 0 ? o->workers : proxy_default_workers();
    clock_gettime(CLOCK_REALTIME, &ts);
    srv->start_time = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
    srv->last_reload_ok = 1;
    srv->last_reload_ok_time = srv->start_time;
    return srv;
}

int proxy_server_run(const struct proxy_opts *o)
{
    struct proxy_srv *srv;
    int code;

    if (!o->http_on && !o->socks_on) {
        fprintf(stderr, "sluice: proxy: both --http and --socks are off: nothing to serve\n");
        return 2;
    }
    srv = srv_new(o);
    if (srv == NULL)
        return 1;
    if (proxy_log_open(&srv->log, o->log_path, o->json) < 0) {
        fprintf(stderr, "sluice: proxy: cannot open log file '%s': %s\n",
                o->log_path != NULL ? o->log_path : "-", strerror(errno));
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
    code = mailbox_init(&srv->q, &srv->loop, on_main_messages, srv) == 0 ? 0 : 1;
    srv->q_ok = code == 0;
    if (code == 0)
        code = start(srv);
    if (code == 0) {
        start_signals(srv);
        proxy_gwrun_set(srv->gwrun, srv->gw);
        code = start_ops(srv);
    }
    if (code == 0) {
        for (unsigned i = 1; i < srv->nworkers; i++) {
            if (code != 0) { /* never started: closed here, counted as done */
                proxy_worker_abort(srv->workers[i]);
                srv->ndone++;
            } else if (proxy_worker_start(srv->workers[i]) < 0) {
                fprintf(stderr, "sluice: proxy: cannot start worker %u\n", i);
                code = 1;
                proxy_worker_abort(srv->workers[i]);
                srv->ndone++;
            }
        }
        if (code != 0) /* the started workers drain and stop */
            begin_stop(srv, "a worker could not start");
        else
            log_start(srv); /* and READY=1: every worker is running */
        uv_run(&srv->loop, UV_RUN_DEFAULT);
    }
    code = cleanup(srv, code);
    free(srv);
    return code;
}
