/* cli/proxy.c - `sluice proxy`: the standalone egress proxy.
 *
 * One libuv loop serves the SOCKS5 and HTTP front ends over one policy, one
 * resolver and one ask broker. SIGHUP re-reads the settings and swaps the
 * policy for new requests (a bad file keeps the old one); SIGTERM/SIGINT
 * stop accepting, let open connections finish for proxy.timeouts.drain,
 * close the rest and exit 0.
 */
#include "cli/cli.h"

#include "bridge/bridge.h"
#include "policy/policy.h"
#include "proxy/proxy.h"
#include "socks/socks.h"

#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#define PROXY_OVERLOAD_SLACK 64 /* connections refused quickly before accept pauses */

struct proxy_srv;

struct service {
    struct proxy_srv *srv;
    const char *name; /* "socks5", "http" */
    struct endpoint ep;
    int on;
    struct listener *l;
    struct frontend fe;
    int paused;
    int (*accept)(struct frontend *f, struct listener *l, int overloaded);
};

struct proxy_srv {
    uv_loop_t loop;
    struct settings settings;
    const char *settings_path;
    const char *ask_spec;
    struct resolver *resolver;
    struct ask_broker *broker;
    struct ask_handler *handler;
    struct egress_env *egress;
    struct service socks, http;
    uv_signal_t sig_hup, sig_term, sig_int;
    uv_timer_t drain_timer;
    FILE *log;
    int json;
    uint64_t next_id;
    int stopping;
    int exit_code;
    struct policy_addr laddr[2];
    uint16_t lport[2];
    size_t nlisten;
};

/* ------------------------------------------------------------------------ */
/* Logging                                                                   */

static void now_text(char *buf, size_t len)
{
    struct timespec ts;
    struct tm tm;
    char day[32];

    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    strftime(day, sizeof(day), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, len, "%s.%03ldZ", day, ts.tv_nsec / 1000000);
}

/* key=value, quoted when needed; control bytes never reach the log (every
 * value is sluice's own text or canonical host names). */
static void kv(FILE *f, const char *k, const char *v)
{
    int quote = 0;

    if (v == NULL)
        return;
    if (v[0] == '\0')
        quote = 1;
    for (const char *p = v; *p; p++)
        if (*p == ' ' || *p == '"' || *p == '=' || *p == '\\' || (unsigned char)*p < 0x20)
            quote = 1;
    if (!quote) {
        fprintf(f, " %s=%s", k, v);
        return;
    }
    fprintf(f, " %s=\"", k);
    for (const char *p = v; *p; p++) {
        unsigned char ch = (unsigned char)*p;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20 || ch == 0x7f)
            fprintf(f, "\\x%02x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

static void log_text(struct proxy_srv *srv, const struct connlog *r)
{
    char t[48], n[32];
    FILE *f = srv->log;

    now_text(t, sizeof(t));
    fprintf(f, "%s id=%llu event=%s", t, (unsigned long long)r->id,
            r->event == CONNLOG_DECISION ? "decision" : "close");
    kv(f, "client", r->client);
    kv(f, "proto", r->protocol);
    if (r->host != NULL) {
        kv(f, "host", r->host);
        snprintf(n, sizeof(n), "%u", (unsigned)r->port);
        kv(f, "port", n);
    }
    kv(f, "verdict", r->verdict);
    if (r->rule != NULL && r->rule[0] != '\0')
        kv(f, "rule", r->rule);
    if (r->reason != NULL && r->reason[0] != '\0')
        kv(f, "reason", r->reason);
    if (r->addr != NULL && r->addr[0] != '\0')
        kv(f, "addr", r->addr);
    if (r->code >= 0) {
        snprintf(n, sizeof(n), "%d", r->code);
        kv(f, "code", n);
    }
    if (r->event == CONNLOG_CLOSE) {
        fprintf(f, " up=%llu down=%llu ms=%llu", (unsigned long long)r->bytes_up,
                (unsigned long long)r->bytes_down, (unsigned long long)r->duration_ms);
        kv(f, "end", r->end);
    }
    fputc('\n', f);
    fflush(f);
}

static void log_json(struct proxy_srv *srv, const struct connlog *r)
{
    json_t *o = json_object();
    char t[48];
    char *text;

    if (o == NULL)
        return;
    now_text(t, sizeof(t));
    json_object_set_new(o, "time", json_string(t));
    json_object_set_new(o, "id", json_integer((json_int_t)r->id));
    json_object_set_new(o, "event", json_string(r->event == CONNLOG_DECISION ? "decision" : "close"));
    json_object_set_new(o, "client", json_string(r->client));
    json_object_set_new(o, "protocol", json_string(r->protocol));
    if (r->host != NULL) {
        json_object_set_new(o, "host", json_string(r->host));
        json_object_set_new(o, "port", json_integer(r->port));
    }
    if (r->verdict != NULL)
        json_object_set_new(o, "decision", json_string(r->verdict));
    if (r->rule != NULL && r->rule[0] != '\0')
        json_object_set_new(o, "rule", json_string(r->rule));
    if (r->reason != NULL && r->reason[0] != '\0')
        json_object_set_new(o, "reason", json_string(r->reason));
    if (r->addr != NULL && r->addr[0] != '\0')
        json_object_set_new(o, "addr", json_string(r->addr));
    if (r->code >= 0)
        json_object_set_new(o, "code", json_integer(r->code));
    if (r->event == CONNLOG_CLOSE) {
        json_object_set_new(o, "bytes_up", json_integer((json_int_t)r->bytes_up));
        json_object_set_new(o, "bytes_down", json_integer((json_int_t)r->bytes_down));
        json_object_set_new(o, "duration_ms", json_integer((json_int_t)r->duration_ms));
        json_object_set_new(o, "end", json_string(r->end));
    }
    text = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
    if (text != NULL) {
        fprintf(srv->log, "%s\n", text);
        fflush(srv->log);
        free(text);
    }
    json_decref(o);
}

static void on_connlog(void *ctx, const struct connlog *r)
{
    struct proxy_srv *srv = ctx;

    if (srv->json)
        log_json(srv, r);
    else
        log_text(srv, r);
}

/* A server event (start, reload, drain) in the log's format. */
static void log_event(struct proxy_srv *srv, const char *event, const char *msg)
{
    char t[48];

    now_text(t, sizeof(t));
    if (srv->json) {
        json_t *o = json_pack("{s:s, s:s, s:s}", "time", t, "event", event, "message", msg);
        char *text = o != NULL ? json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
        if (text != NULL)
            fprintf(srv->log, "%s\n", text);
        free(text);
        json_decref(o);
    } else {
        fprintf(srv->log, "%s event=%s", t, event);
        kv(srv->log, "message", msg);
        fputc('\n', srv->log);
    }
    fflush(srv->log);
}

/* ------------------------------------------------------------------------ */
/* Settings and policy                                                       */

static void apply_frontend_settings(struct proxy_srv *srv, struct frontend *fe)
{
    const struct settings *s = &srv->settings;

    fe->auth_user = s->proxy.auth_username;
    fe->auth_pass = s->proxy.auth_password;
    fe->handshake_timeout_ms = s->proxy.handshake_timeout_ms;
    fe->head_timeout_ms = s->proxy.head_timeout_ms;
    fe->idle_timeout_ms = s->proxy.idle_timeout_ms;
    fe->max_head_bytes = s->proxy.max_head_bytes;
    fe->max_conns = s->proxy.max_connections;
}

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
    cli_set_local(*p, srv->laddr, srv->lport, srv->nlisten);
    return 0;
}

static void reload(struct proxy_srv *srv)
{
    struct settings s;
    struct settings_error err;
    struct policy *p = NULL;
    char msg[1200];

    if (load_policy(srv, &s, &p, &err) < 0) {
        snprintf(msg, sizeof(msg), "reload failed, keeping the current policy: %s", err.msg);
        log_event(srv, "reload_failed", msg);
        settings_free(&s);
        return;
    }
    egress_env_set_policy(srv->egress, p);
    settings_free(&srv->settings);
    srv->settings = s;
    apply_frontend_settings(srv, &srv->socks.fe);
    apply_frontend_settings(srv, &srv->http.fe);
    snprintf(msg, sizeof(msg), "settings reloaded: %zu rules", policy_rule_count(p));
    log_event(srv, "reload", msg);
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
    log_event(srv, "stopped", "all connections closed");
    if (srv->handler != NULL)
        ask_handler_close(srv->handler, shutdown_done, NULL);
    if (srv->broker != NULL)
        ask_broker_close(srv->broker, shutdown_done, NULL);
    if (srv->resolver != NULL)
        resolver_close(srv->resolver, shutdown_done, NULL);
    uv_close((uv_handle_t *)&srv->sig_hup, on_handle_closed);
    uv_close((uv_handle_t *)&srv->sig_term, on_handle_closed);
    uv_close((uv_handle_t *)&srv->sig_int, on_handle_closed);
    uv_close((uv_handle_t *)&srv->drain_timer, on_handle_closed);
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
    /* resume accepting once below the limit */
    if (live_conns(srv) < srv->settings.proxy.max_connections) {
        if (srv->socks.paused) {
            srv->socks.paused = 0;
            listener_resume(srv->socks.l);
        }
        if (srv->http.paused) {
            srv->http.paused = 0;
            listener_resume(srv->http.l);
        }
    }
}

static void on_accept(struct listener *l, void *arg)
{
    struct service *svc = arg;
    struct proxy_srv *srv = svc->srv;
    size_t live = live_conns(srv);
    size_t max = srv->settings.proxy.max_connections;
    int rc;

    if (srv->stopping)
        return;
    if (live >= max + PROXY_OVERLOAD_SLACK) {
        svc->paused = 1;
        listener_pause(l);
        return;
    }
    rc = svc->accept(&svc->fe, l, live >= max);
    if (rc == UV_ENOMEM || rc == UV_EMFILE || rc == UV_ENFILE) {
        /* no memory or descriptors: stop accepting until a connection ends */
        svc->paused = 1;
        listener_pause(l);
    }
}

static void on_drain_timeout(uv_timer_t *t)
{
    struct proxy_srv *srv = t->data;
    char msg[120];

    snprintf(msg, sizeof(msg), "drain time is up: closing %zu connections", live_conns(srv));
    log_event(srv, "drain_timeout", msg);
    frontend_close_all(&srv->socks.fe);
    frontend_close_all(&srv->http.fe);
}

static void begin_stop(struct proxy_srv *srv, const char *why)
{
    char msg[200];

    if (srv->stopping)
        return;
    srv->stopping = 1;
    snprintf(msg, sizeof(msg), "%s: no longer accepting; draining %zu connections for up to %u ms",
             why, live_conns(srv), srv->settings.proxy.drain_timeout_ms);
    log_event(srv, "drain", msg);
    if (srv->socks.l != NULL)
        listener_close(srv->socks.l, NULL, NULL);
    if (srv->http.l != NULL)
        listener_close(srv->http.l, NULL, NULL);
    srv->socks.l = srv->http.l = NULL;
    if (live_conns(srv) == 0) {
        finish(srv);
        return;
    }
    uv_timer_start(&srv->drain_timer, on_drain_timeout, srv->settings.proxy.drain_timeout_ms, 0);
}

static void on_signal(uv_signal_t *h, int signum)
{
    struct proxy_srv *srv = h->data;

    if (signum == SIGHUP) {
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
/* Command line                                                              */

void cli_proxy_usage(FILE *f)
{
    fputs("usage: sluice proxy [OPTIONS]\n"
          "\n"
          "Runs the egress proxy: HTTP (CONNECT and absolute-form) and SOCKS5 on the\n"
          "settings' policy. Unmatched destinations are denied unless --ask is given;\n"
          "private addresses are denied unless network.denyPrivateAddresses is false.\n"
          "\n"
          "options:\n"
          "  --settings FILE       settings file (also $SLUICE_SETTINGS)\n"
          "  --http ENDPOINT       HTTP proxy listener, or 'off' (default tcp:127.0.0.1:3128)\n"
          "  --socks ENDPOINT      SOCKS5 listener, or 'off' (default tcp:127.0.0.1:1080)\n"
          "  --ask HANDLER         ask about unmatched destinations: tty, exec:PROGRAM,\n"
          "                        socket:PATH\n"
          "  --log FILE            append the connection log to FILE (default stderr)\n"
          "  --log-format FORMAT   text (default) or json\n"
          "  -h, --help            show this help\n"
          "\n"
          "Endpoints: tcp:IP:PORT, tcp:[IPv6]:PORT, unix:PATH, fd:N (an inherited\n"
          "listening socket) or fd:NAME (systemd LISTEN_FDNAMES).\n"
          "Signals: SIGHUP reloads the settings; SIGTERM/SIGINT drain and exit.\n",
          f);
}

static int parse_endpoint_opt(struct service *svc, const char *opt, const char *val)
{
    const char *why = NULL;

    if (strcmp(val, "off") == 0) {
        svc->on = 0;
        return 0;
    }
    if (endpoint_parse(val, 1, &svc->ep, &why) < 0) {
        fprintf(stderr, "sluice: proxy: %s '%s': %s\n", opt, val, why);
        return -1;
    }
    svc->on = 1;
    return 0;
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
    if (srv->nlisten < 2 &&
        listener_address(svc->l, &srv->laddr[srv->nlisten], &srv->lport[srv->nlisten]) == 0)
        srv->nlisten++;
    return 0;
}

/* The endpoint as bound (tcp port 0 resolved). */
static const char *service_str(const struct service *svc, char *buf, size_t len)
{
    struct endpoint ep = svc->ep;
    struct policy_addr a;
    uint16_t port;

    if (!svc->on)
        return "off";
    if (ep.kind == ENDPOINT_TCP && svc->l != NULL && listener_address(svc->l, &a, &port) == 0) {
        ep.addr = a;
        ep.port = port;
    }
    return endpoint_str(&ep, buf, len);
}

static void init_service(struct proxy_srv *srv, struct service *svc, const char *name,
                         const char *def, int (*accept)(struct frontend *, struct listener *, int))
{
    const char *why;

    svc->srv = srv;
    svc->name = name;
    svc->on = 1;
    svc->accept = accept;
    (void)endpoint_parse(def, 1, &svc->ep, &why);
    frontend_init(&svc->fe, &srv->loop, &srv->next_id);
    svc->fe.data = svc;
    svc->fe.log = on_connlog;
    svc->fe.log_ctx = srv;
    svc->fe.conn_ended = on_conn_ended;
}

static void raise_fd_limit(void)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
    }
}

static void walk_close(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

int cli_proxy(int argc, char **argv)
{
    struct proxy_srv *srv = calloc(1, sizeof(*srv));
    struct settings_error err;
    struct policy *p = NULL;
    const char *log_path = NULL;
    const char **servers = NULL;
    int rc, code = 1, loop_ok = 0;
    char msg[600], e1[200], e2[200];

    if (srv == NULL) {
        fprintf(stderr, "sluice: proxy: out of memory\n");
        return 1;
    }
    if (uv_loop_init(&srv->loop) != 0) {
        fprintf(stderr, "sluice: proxy: cannot create the event loop\n");
        free(srv);
        return 1;
    }
    loop_ok = 1;
    settings_init(&srv->settings);
    srv->log = stderr;
    init_service(srv, &srv->http, "http", "tcp:127.0.0.1:3128", http_session_accept);
    init_service(srv, &srv->socks, "socks5", "tcp:127.0.0.1:1080", socks_session_accept);

    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;

        if (strcmp(o, "-h") == 0 || strcmp(o, "--help") == 0) {
            cli_proxy_usage(stdout);
            code = 0;
            goto out;
        }
        if (strcmp(o, "--settings") != 0 && strcmp(o, "--http") != 0 &&
            strcmp(o, "--socks") != 0 && strcmp(o, "--ask") != 0 && strcmp(o, "--log") != 0 &&
            strcmp(o, "--log-format") != 0) {
            fprintf(stderr, "sluice: proxy: unknown option '%s'\n", o);
            cli_proxy_usage(stderr);
            code = 2;
            goto out;
        }
        if (v == NULL) {
            fprintf(stderr, "sluice: proxy: %s needs a value\n", o);
            code = 2;
            goto out;
        }
        i++;
        if (strcmp(o, "--settings") == 0) {
            srv->settings_path = v;
        } else if (strcmp(o, "--http") == 0) {
            if (parse_endpoint_opt(&srv->http, o, v) < 0) {
                code = 2;
                goto out;
            }
        } else if (strcmp(o, "--socks") == 0) {
            if (parse_endpoint_opt(&srv->socks, o, v) < 0) {
                code = 2;
                goto out;
            }
        } else if (strcmp(o, "--ask") == 0) {
            srv->ask_spec = v;
        } else if (strcmp(o, "--log") == 0) {
            log_path = v;
        } else if (strcmp(v, "json") == 0) {
            srv->json = 1;
        } else if (strcmp(v, "text") == 0) {
            srv->json = 0;
        } else {
            fprintf(stderr, "sluice: proxy: --log-format must be 'text' or 'json', got '%s'\n", v);
            code = 2;
            goto out;
        }
    }
    if (!srv->http.on && !srv->socks.on) {
        fprintf(stderr, "sluice: proxy: both --http and --socks are off: nothing to serve\n");
        code = 2;
        goto out;
    }
    if (log_path != NULL) {
        srv->log = fopen(log_path, "ae");
        if (srv->log == NULL) {
            fprintf(stderr, "sluice: proxy: cannot open log file '%s': %s\n", log_path,
                    strerror(errno));
            srv->log = stderr;
            goto out;
        }
    }
    signal(SIGPIPE, SIG_IGN);
    raise_fd_limit();

    /* Listeners first, so the guard knows their addresses. */
    if (open_service(srv, &srv->http) < 0 || open_service(srv, &srv->socks) < 0)
        goto out;
    if (load_policy(srv, &srv->settings, &p, &err) < 0) {
        fprintf(stderr, "%s\n", err.msg);
        code = 2;
        goto out;
    }
    for (size_t i = 0; i < srv->settings.notices.n; i++)
        fprintf(stderr, "sluice: warning: %s\n", srv->settings.notices.items[i].value);

    if (srv->settings.network.dns_servers.n > 0) {
        servers = calloc(srv->settings.network.dns_servers.n, sizeof(*servers));
        if (servers == NULL)
            goto out;
        for (size_t i = 0; i < srv->settings.network.dns_servers.n; i++)
            servers[i] = srv->settings.network.dns_servers.items[i].value;
    }
    rc = resolver_init(&srv->resolver, &srv->loop, servers, srv->settings.network.dns_servers.n,
                       srv->settings.proxy.dns_timeout_ms);
    free(servers);
    if (rc < 0) {
        fprintf(stderr, "sluice: proxy: cannot start the DNS resolver: %s\n", uv_strerror(rc));
        srv->resolver = NULL;
        goto out;
    }
    if (srv->ask_spec != NULL) {
        const char *why = NULL;
        rc = ask_broker_new(&srv->broker, &srv->loop, srv->settings.proxy.ask_timeout_ms,
                            srv->settings.proxy.max_pending_asks);
        if (rc == 0)
            rc = ask_handler_open(&srv->handler, &srv->loop, srv->ask_spec, srv->broker, &why);
        if (rc < 0) {
            fprintf(stderr, "sluice: proxy: --ask '%s': %s\n", srv->ask_spec,
                    why != NULL ? why : uv_strerror(rc));
            code = 2;
            goto out;
        }
    }
    rc = egress_env_new(&srv->egress, &srv->loop, p, srv->resolver, srv->broker,
                        srv->settings.proxy.dial_timeout_ms);
    if (rc < 0)
        goto out;
    p = NULL;
    srv->socks.fe.egress = srv->egress;
    srv->http.fe.egress = srv->egress;
    apply_frontend_settings(srv, &srv->socks.fe);
    apply_frontend_settings(srv, &srv->http.fe);

    uv_signal_init(&srv->loop, &srv->sig_hup);
    uv_signal_init(&srv->loop, &srv->sig_term);
    uv_signal_init(&srv->loop, &srv->sig_int);
    uv_timer_init(&srv->loop, &srv->drain_timer);
    srv->sig_hup.data = srv->sig_term.data = srv->sig_int.data = srv;
    srv->drain_timer.data = srv;
    uv_signal_start(&srv->sig_hup, on_signal, SIGHUP);
    uv_signal_start(&srv->sig_term, on_signal, SIGTERM);
    uv_signal_start(&srv->sig_int, on_signal, SIGINT);

    snprintf(msg, sizeof(msg), "sluice %s listening: http %s, socks5 %s; %zu rules%s%s",
             SLUICE_VERSION,
             service_str(&srv->http, e1, sizeof(e1)), service_str(&srv->socks, e2, sizeof(e2)),
             policy_rule_count(egress_env_policy(srv->egress)),
             srv->settings.network.mode == SETTINGS_MODE_REPORT ? "; report mode" : "",
             srv->ask_spec != NULL ? "; asking unmatched" : "");
    log_event(srv, "start", msg);

    uv_run(&srv->loop, UV_RUN_DEFAULT);
    code = 0;

out:
    /* Error paths close whatever was opened; a clean stop has closed it all. */
    if (srv->stopping != 2) {
        if (srv->socks.l != NULL)
            listener_close(srv->socks.l, NULL, NULL);
        if (srv->http.l != NULL)
            listener_close(srv->http.l, NULL, NULL);
        if (srv->handler != NULL)
            ask_handler_close(srv->handler, NULL, NULL);
        if (srv->broker != NULL)
            ask_broker_close(srv->broker, NULL, NULL);
        if (srv->resolver != NULL)
            resolver_close(srv->resolver, NULL, NULL);
        uv_walk(&srv->loop, walk_close, NULL);
        uv_run(&srv->loop, UV_RUN_DEFAULT);
    }
    if (loop_ok && uv_loop_close(&srv->loop) != 0 && code == 0) {
        fprintf(stderr, "sluice: proxy: handles left open at exit\n");
        code = 1;
    }
    egress_env_free(srv->egress);
    policy_free(p);
    settings_free(&srv->settings);
    if (srv->log != stderr)
        fclose(srv->log);
    free(srv);
    return code;
}
