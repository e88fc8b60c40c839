/* cli/proxy.c - `sluice proxy`: the standalone egress proxy.
 *
 * One libuv loop serves the SOCKS5 and HTTP front ends over one policy, one
 * resolver and one ask broker. SIGHUP re-reads the settings and swaps the
 * policy for new requests (a bad file keeps the old one); SIGTERM/SIGINT
 * stop accepting, close kept-alive HTTP connections that wait between
 * requests, let the rest finish for proxy.timeouts.drain, close what is
 * left and exit 0.
 *
 * The admin listener (--admin, off by default) is a minimal HTTP/1.1 server
 * on llhttp for operators: GET /healthz, /readyz and /metrics (Prometheus
 * text format 0.0.4). It never proxies. Its counters come from the
 * connection log records and the accept path; everything runs on the one
 * loop, so nothing is locked.
 */
#include "cli/cli.h"

#include "bridge/bridge.h"
#include "policy/policy.h"
#include "proxy/ops.h"
#include "proxy/proxy.h"
#include "socks/socks.h"

#include <errno.h>
#include <jansson.h>
#include <llhttp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#define PROXY_OVERLOAD_SLACK 64 /* connections refused quickly before accept pauses */
#define PROXY_LOG_BUF (64 * 1024) /* the log is flushed once per loop iteration */
#define ADMIN_MAX_CONNS 64         /* admin connections at once; more are closed */
#define ADMIN_MAX_REQUEST (16 * 1024) /* bytes of one admin request */
#define ADMIN_TIMEOUT_MS 10000     /* per admin request, and idle kept admin connections */
#define HEALTH_PATH_MAX 200
#define WATCH_DEBOUNCE_MS 500 /* --watch: one reload per burst of changes */

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
    uint64_t accepted;   /* connections served (metrics) */
    uint64_t overloaded; /* of them, refused over the connection limit */
};

/* Decision counters by the log record's protocol and verdict. */
enum { MPROTO_HTTP = 0, MPROTO_CONNECT, MPROTO_SOCKS5, MPROTO_N };
enum { MDEC_ALLOW = 0, MDEC_DENY, MDEC_WOULD_DENY, MDEC_OTHER, MDEC_N };
static const char *const mproto_names[MPROTO_N] = {"http", "connect", "socks5"};
static const char *const mdec_names[MDEC_N] = {"allow", "deny", "would_deny", "other"};

struct admin_conn {
    union {
        uv_handle_t h;
        uv_stream_t s;
        uv_tcp_t tcp;
        uv_pipe_t pipe;
    } u;
    uv_timer_t timer;
    uv_shutdown_t shutdown_req;
    llhttp_t parser;
    struct proxy_srv *srv;
    struct admin_conn *prev, *next;
    size_t req_bytes; /* of the request being read */
    char url[256];
    size_t url_len;
    int nclose;             /* handles still closing */
    unsigned url_long : 1;  /* the target did not fit url */
    unsigned done : 1;      /* the last answer is queued: nothing more is read */
    unsigned closing : 1;
};

struct admin {
    struct endpoint ep;
    int on;
    struct listener *l;
    struct admin_conn *conns;
    size_t nconns;
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
    struct admin admin;
    const char *health_path;
    uv_signal_t sig_hup, sig_term, sig_int;
    uv_timer_t drain_timer;
    uv_prepare_t log_flush;
    FILE *log;
    int log_dirty; /* written since the last flush */
    int json;
    uint64_t next_id;
    int stopping;
    int exit_code;
    struct policy_addr laddr[3];
    uint16_t lport[3];
    size_t nlisten;
    /* metrics */
    double start_time;
    uint64_t decisions[MPROTO_N][MDEC_N];
    uint64_t bytes_up, bytes_down;
    uint64_t reloads_ok, reloads_failed;
    /* operations (issue 16): proxy/ops.h */
    uv_signal_t sig_usr1;
    const char *log_path;
    struct notify *notify;
    struct watch *watch;
    int watch_on;
    int last_reload_ok;        /* 1 until a load fails; the next good one sets it again */
    double last_reload_ok_time; /* wall-clock seconds of the last good load */
    struct histogram h_dns, h_dial, h_ask, h_decision;
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
    srv->log_dirty = 1;
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
        srv->log_dirty = 1;
        free(text);
    }
    json_decref(o);
}

static int metric_index(const char *s, const char *const *names, int n, int other)
{
    for (int i = 0; s != NULL && i < n; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return other;
}

static void on_connlog(void *ctx, const struct connlog *r)
{
    struct proxy_srv *srv = ctx;

    if (r->event == CONNLOG_DECISION) {
        int p = metric_index(r->protocol, mproto_names, MPROTO_N, -1);
        int d = metric_index(r->verdict, mdec_names, MDEC_OTHER, MDEC_OTHER);
        if (p >= 0)
            srv->decisions[p][d]++;
    } else {
        srv->bytes_up += r->bytes_up;
        srv->bytes_down += r->bytes_down;
    }
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
    srv->log_dirty = 1;
}

/* Before the loop waits: what was logged during this iteration goes out in
 * one write (a file or a pipe is fully buffered; a terminal line-buffered). */
static void on_log_flush(uv_prepare_t *h)
{
    struct proxy_srv *srv = h->data;

    if (srv->log_dirty) {
        srv->log_dirty = 0;
        fflush(srv->log);
    }
}

static void log_buffering(FILE *f)
{
    static char buf[PROXY_LOG_BUF];

    if (isatty(fileno(f)))
        (void)setvbuf(f, NULL, _IOLBF, BUFSIZ);
    else
        (void)setvbuf(f, buf, _IOFBF, sizeof(buf));
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

static double wall_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void reload(struct proxy_srv *srv)
{
    struct settings s;
    struct settings_error err;
    struct policy *p = NULL;
    char msg[1200];

    notify_reloading(srv->notify);
    if (load_policy(srv, &s, &p, &err) < 0) {
        srv->reloads_failed++;
        srv->last_reload_ok = 0;
        snprintf(msg, sizeof(msg), "reload failed, keeping the current policy: %s", err.msg);
        log_event(srv, "reload_failed", msg);
        settings_free(&s);
        notify_ready(srv->notify); /* still serving, on the old policy */
        return;
    }
    srv->reloads_ok++;
    srv->last_reload_ok = 1;
    srv->last_reload_ok_time = wall_now();
    egress_env_set_policy(srv->egress, p);
    settings_free(&srv->settings);
    srv->settings = s;
    apply_frontend_settings(srv, &srv->socks.fe);
    apply_frontend_settings(srv, &srv->http.fe);
    snprintf(msg, sizeof(msg), "settings reloaded: %zu rules", policy_rule_count(p));
    log_event(srv, "reload", msg);
    if (srv->watch != NULL && watch_update(srv->watch, &srv->settings) < 0)
        log_event(srv, "watch_failed", "cannot watch the settings' directories any more");
    notify_ready(srv->notify);
}

/* SIGUSR1 (and SIGHUP): the log file is reopened by name, for logrotate.
 * Lines buffered for the old file are written to it first; on failure the
 * old file stays in use. */
static void reopen_log(struct proxy_srv *srv)
{
    FILE *f;
    char msg[600];

    if (srv->log_path == NULL)
        return;
    f = fopen(srv->log_path, "ae");
    if (f == NULL) {
        snprintf(msg, sizeof(msg), "cannot reopen the log file, still writing the old one: %s",
                 strerror(errno));
        log_event(srv, "log_reopen_failed", msg);
        return;
    }
    fflush(srv->log);
    fclose(srv->log);
    srv->log = f;
    log_buffering(f);
    srv->log_dirty = 0;
    log_event(srv, "log_reopened", srv->log_path);
}

/* Every egress outcome: latency histograms. */
static void on_outcome(void *ctx, const struct egress_outcome *o)
{
    struct proxy_srv *srv = ctx;

    if (o->timed & EGRESS_TIMED_DNS)
        histogram_observe(&srv->h_dns, (double)o->dns_ns / 1e9);
    if (o->timed & EGRESS_TIMED_DIAL)
        histogram_observe(&srv->h_dial, (double)o->dial_ns / 1e9);
    if (o->timed & EGRESS_TIMED_ASK)
        histogram_observe(&srv->h_ask, (double)o->ask_ns / 1e9);
    histogram_observe(&srv->h_decision, (double)o->total_ns / 1e9);
}

static void on_watch(void *ctx)
{
    struct proxy_srv *srv = ctx;

    if (!srv->stopping)
        reload(srv);
}

/* ------------------------------------------------------------------------ */
/* Admin listener: /healthz, /readyz, /metrics                               */

static void admin_closed(uv_handle_t *h)
{
    struct admin_conn *a = h->data;

    if (--a->nclose == 0)
        free(a);
}

static void admin_close(struct admin_conn *a)
{
    struct admin *ad = &a->srv->admin;

    if (a->closing)
        return;
    a->closing = 1;
    a->done = 1;
    if (a->prev != NULL)
        a->prev->next = a->next;
    else
        ad->conns = a->next;
    if (a->next != NULL)
        a->next->prev = a->prev;
    ad->nconns--;
    a->nclose = 2;
    uv_close(&a->u.h, admin_closed);
    uv_close((uv_handle_t *)&a->timer, admin_closed);
}

static void admin_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void admin_timeout(uv_timer_t *t);

static void admin_linger_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    (void)buf;
    if (nread < 0)
        admin_close(s->data);
}

/* Our FIN is out after the last answer: read and drop what the client still
 * sends until its EOF or a second, so unread bytes do not turn the close
 * into a reset that destroys the answer before the client reads it. */
static void admin_shut(uv_shutdown_t *req, int status)
{
    struct admin_conn *a = req->data;

    if (a->closing)
        return;
    if (status < 0 || uv_read_start(&a->u.s, admin_alloc, admin_linger_read) < 0) {
        admin_close(a);
        return;
    }
    uv_timer_start(&a->timer, admin_timeout, 1000, 0);
}

/* The answer just queued is the last: our FIN goes after it, then close. */
static void admin_end(struct admin_conn *a)
{
    if (a->closing)
        return;
    a->done = 1;
    (void)uv_read_stop(&a->u.s);
    a->shutdown_req.data = a;
    if (uv_shutdown(&a->shutdown_req, &a->u.s, admin_shut) < 0)
        admin_close(a);
}

struct admin_wr {
    uv_write_t req;
    struct admin_conn *a;
    char data[];
};

static void admin_written(uv_write_t *req, int status)
{
    struct admin_wr *wr = (struct admin_wr *)(void *)req;
    struct admin_conn *a = wr->a;

    free(wr);
    if (status < 0)
        admin_close(a);
}

static void admin_respond(struct admin_conn *a, int status, const char *phrase, const char *ctype,
                          const char *body, size_t blen, const char *extra, int keep)
{
    char head[512];
    struct admin_wr *wr;
    uv_buf_t b;
    int hl;

    if (a->closing)
        return;
    hl = snprintf(head, sizeof(head),
                  "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                  "Cache-Control: no-store\r\n%sConnection: %s\r\n\r\n",
                  status, phrase, ctype, blen, extra != NULL ? extra : "",
                  keep ? "keep-alive" : "close");
    if (hl < 0 || (size_t)hl >= sizeof(head)) {
        admin_close(a);
        return;
    }
    wr = malloc(sizeof(*wr) + (size_t)hl + blen);
    if (wr == NULL) {
        admin_close(a);
        return;
    }
    wr->a = a;
    memcpy(wr->data, head, (size_t)hl);
    if (blen > 0)
        memcpy(wr->data + hl, body, blen);
    b = uv_buf_init(wr->data, (unsigned)((size_t)hl + blen));
    if (uv_write(&wr->req, &a->u.s, &b, 1, admin_written) < 0) {
        free(wr);
        admin_close(a);
        return;
    }
    if (!keep)
        admin_end(a);
}

static void admin_text(struct admin_conn *a, int status, const char *phrase, const char *text,
                       const char *extra, int keep)
{
    admin_respond(a, status, phrase, "text/plain; charset=utf-8", text, strlen(text), extra, keep);
}

/* NULL when ready: serving (listeners open, not paused for overload) with a
 * policy loaded, and not draining. A failed reload keeps the old policy and
 * does not change readiness (it is counted in sluice_reloads_total). */
static const char *not_ready(const struct proxy_srv *srv)
{
    if (srv->stopping)
        return "draining";
    if (srv->egress == NULL || egress_env_policy(srv->egress) == NULL)
        return "no policy loaded";
    if ((srv->http.on && srv->http.paused) || (srv->socks.on && srv->socks.paused))
        return "over the connection limit: not accepting";
    return NULL;
}

static void metric_head(FILE *m, const char *name, const char *type, const char *help)
{
    fprintf(m, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Prometheus text exposition format 0.0.4. */
static char *metrics_text(const struct proxy_srv *srv, size_t *len)
{
    const struct service *svcs[2] = {&srv->http, &srv->socks};
    char *text = NULL;
    FILE *m = open_memstream(&text, len);

    if (m == NULL)
        return NULL;
    metric_head(m, "sluice_build_info", "gauge", "Build information; the value is always 1.");
    fprintf(m, "sluice_build_info{version=\"%s\"} 1\n", SLUICE_VERSION);
    metric_head(m, "process_start_time_seconds", "gauge",
                "Start time of the process since the Unix epoch in seconds.");
    fprintf(m, "process_start_time_seconds %.3f\n", srv->start_time);

    metric_head(m, "sluice_connections_total", "counter",
                "Client connections accepted, by front end.");
    for (int i = 0; i < 2; i++)
        fprintf(m, "sluice_connections_total{protocol=\"%s\"} %llu\n", svcs[i]->name,
                (unsigned long long)svcs[i]->accepted);
    metric_head(m, "sluice_connections_active", "gauge", "Client connections open now.");
    for (int i = 0; i < 2; i++)
        fprintf(m, "sluice_connections_active{protocol=\"%s\"} %zu\n", svcs[i]->name,
                svcs[i]->fe.nconns);
    metric_head(m, "sluice_overloaded_total", "counter",
                "Connections refused over proxy.limits.maxConnections (HTTP 503, SOCKS 0x01).");
    fprintf(m, "sluice_overloaded_total %llu\n",
            (unsigned long long)(srv->http.overloaded + srv->socks.overloaded));

    metric_head(m, "sluice_decisions_total", "counter",
                "Egress decisions (one per request), by protocol and decision.");
    for (int p = 0; p < MPROTO_N; p++)
        for (int d = 0; d < MDEC_N; d++)
            if (d != MDEC_OTHER || srv->decisions[p][d] > 0)
                fprintf(m, "sluice_decisions_total{protocol=\"%s\",decision=\"%s\"} %llu\n",
                        mproto_names[p], mdec_names[d],
                        (unsigned long long)srv->decisions[p][d]);
    {
        uint64_t up = srv->bytes_up, down = srv->bytes_down; /* closed, + open ones so far */
        frontend_bytes(&srv->http.fe, &up, &down);
        frontend_bytes(&srv->socks.fe, &up, &down);
        metric_head(m, "sluice_bytes_total", "counter",
                    "Bytes relayed, counted while connections are open: up is client to upstream.");
        fprintf(m, "sluice_bytes_total{direction=\"up\"} %llu\n", (unsigned long long)up);
        fprintf(m, "sluice_bytes_total{direction=\"down\"} %llu\n", (unsigned long long)down);
    }

    metric_head(m, "sluice_reloads_total", "counter", "Settings reloads (SIGHUP), by result.");
    fprintf(m, "sluice_reloads_total{result=\"ok\"} %llu\n", (unsigned long long)srv->reloads_ok);
    fprintf(m, "sluice_reloads_total{result=\"error\"} %llu\n",
            (unsigned long long)srv->reloads_failed);
    metric_head(m, "sluice_policy_rules", "gauge", "Rules in the policy in use.");
    fprintf(m, "sluice_policy_rules %zu\n",
            srv->egress != NULL ? policy_rule_count(egress_env_policy(srv->egress)) : 0);
    metric_head(m, "sluice_asks_pending", "gauge", "Questions waiting for the ask handler.");
    fprintf(m, "sluice_asks_pending %zu\n",
            srv->broker != NULL ? ask_broker_pending(srv->broker) : 0);
    metric_head(m, "sluice_egress_inflight", "gauge",
                "Requests deciding, resolving or dialing now.");
    fprintf(m, "sluice_egress_inflight %zu\n",
            srv->egress != NULL ? egress_inflight(srv->egress) : 0);
    metric_head(m, "sluice_dns_outstanding", "gauge", "DNS lookups in progress.");
    fprintf(m, "sluice_dns_outstanding %zu\n",
            srv->resolver != NULL ? resolver_outstanding(srv->resolver) : 0);
    metric_head(m, "sluice_draining", "gauge", "1 while draining after SIGTERM/SIGINT.");
    fprintf(m, "sluice_draining %d\n", srv->stopping ? 1 : 0);
    metric_head(m, "sluice_config_last_reload_successful", "gauge",
                "1 when the last load of the settings (start, SIGHUP, --watch) succeeded.");
    fprintf(m, "sluice_config_last_reload_successful %d\n", srv->last_reload_ok);
    metric_head(m, "sluice_config_last_reload_success_timestamp_seconds", "gauge",
                "Wall-clock time of the last successful load of the settings.");
    fprintf(m, "sluice_config_last_reload_success_timestamp_seconds %.3f\n",
            srv->last_reload_ok_time);
    histogram_write(m, "sluice_dns_seconds", "DNS lookups of allowed names.", &srv->h_dns);
    histogram_write(m, "sluice_dial_seconds", "Connecting to vetted addresses (all attempts).",
                    &srv->h_dial);
    histogram_write(m, "sluice_ask_seconds", "Waiting for the ask handler's answer.", &srv->h_ask);
    histogram_write(m, "sluice_decision_seconds",
                    "From a parsed request to its outcome: rules, ask, DNS, guard and dial.",
                    &srv->h_decision);
    procmetrics_write(m);
    if (fclose(m) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

static void admin_route(struct admin_conn *a, int keep)
{
    struct proxy_srv *srv = a->srv;
    size_t n = a->url_len;
    const char *q = memchr(a->url, '?', a->url_len);
    const char *why;

    if (q != NULL)
        n = (size_t)(q - a->url);
    if (llhttp_get_method(&a->parser) != HTTP_GET) {
        admin_text(a, 405, "Method Not Allowed", "method not allowed\n", "Allow: GET\r\n", keep);
        return;
    }
    if (!a->url_long && n == 8 && memcmp(a->url, "/healthz", 8) == 0) {
        admin_text(a, 200, "OK", "ok\n", NULL, keep);
    } else if (!a->url_long && n == 7 && memcmp(a->url, "/readyz", 7) == 0) {
        why = not_ready(srv);
        if (why == NULL) {
            admin_text(a, 200, "OK", "ready\n", NULL, keep);
        } else {
            char body[120];
            snprintf(body, sizeof(body), "not ready: %s\n", why);
            admin_text(a, 503, "Service Unavailable", body, NULL, keep);
        }
    } else if (!a->url_long && n == 8 && memcmp(a->url, "/metrics", 8) == 0) {
        size_t len = 0;
        char *text = metrics_text(srv, &len);
        if (text == NULL) {
            admin_text(a, 500, "Internal Server Error", "out of memory\n", NULL, 0);
            return;
        }
        admin_respond(a, 200, "OK", "text/plain; version=0.0.4; charset=utf-8", text, len, NULL,
                      keep);
        free(text);
    } else {
        admin_text(a, 404, "Not Found", "not found\n", NULL, keep);
    }
}

static int admin_on_message_begin(llhttp_t *p)
{
    struct admin_conn *a = p->data;

    a->url_len = 0;
    a->url_long = 0;
    return 0;
}

static int admin_on_url(llhttp_t *p, const char *at, size_t len)
{
    struct admin_conn *a = p->data;

    if (len > sizeof(a->url) - a->url_len) {
        a->url_long = 1;
        return 0;
    }
    memcpy(a->url + a->url_len, at, len);
    a->url_len += len;
    return 0;
}

static void admin_timeout(uv_timer_t *t)
{
    admin_close(t->data);
}

static int admin_on_message_complete(llhttp_t *p)
{
    struct admin_conn *a = p->data;
    /* never an upgrade or a tunnel here: CONNECT and Upgrade end it */
    int keep = llhttp_should_keep_alive(p) && !p->upgrade && p->method != HTTP_CONNECT;

    admin_route(a, keep);
    if (!keep || a->done)
        return HPE_PAUSED;
    a->req_bytes = 0;
    uv_timer_start(&a->timer, admin_timeout, ADMIN_TIMEOUT_MS, 0);
    return 0;
}

static const llhttp_settings_t admin_settings = {
    .on_message_begin = admin_on_message_begin,
    .on_url = admin_on_url,
    .on_message_complete = admin_on_message_complete,
};

static void admin_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    static char in[4096]; /* parsed at once in admin_read */

    (void)h;
    (void)suggested;
    *buf = uv_buf_init(in, sizeof(in));
}

static void admin_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct admin_conn *a = s->data;
    llhttp_errno_t e;

    if (a->closing || a->done || nread == 0)
        return;
    if (nread < 0) {
        /* EOF: answers still queued go out before our FIN */
        if (nread == UV_EOF)
            admin_end(a);
        else
            admin_close(a);
        return;
    }
    a->req_bytes += (size_t)nread;
    if (a->req_bytes > ADMIN_MAX_REQUEST) {
        admin_text(a, 431, "Request Header Fields Too Large", "request too large\n", NULL, 0);
        return;
    }
    e = llhttp_execute(&a->parser, buf->base, (size_t)nread);
    if (e == HPE_OK || a->done)
        return;
    admin_text(a, 400, "Bad Request", "bad request\n", NULL, 0);
}

static void on_admin_accept(struct listener *l, void *arg)
{
    struct proxy_srv *srv = arg;
    struct admin *ad = &srv->admin;
    struct admin_conn *a = calloc(1, sizeof(*a));
    int rc;

    if (a == NULL)
        return; /* held by the listener until the next connection */
    if (listener_kind(l) == RELAY_PIPE)
        rc = uv_pipe_init(&srv->loop, &a->u.pipe, 0);
    else
        rc = uv_tcp_init(&srv->loop, &a->u.tcp);
    if (rc < 0) {
        free(a);
        return;
    }
    uv_timer_init(&srv->loop, &a->timer);
    a->srv = srv;
    a->u.h.data = a;
    a->timer.data = a;
    a->next = ad->conns;
    if (ad->conns != NULL)
        ad->conns->prev = a;
    ad->conns = a;
    ad->nconns++;
    rc = listener_accept(l, &a->u.s);
    if (rc < 0 || ad->nconns > ADMIN_MAX_CONNS) {
        admin_close(a);
        return;
    }
    if (listener_kind(l) == RELAY_TCP)
        (void)uv_tcp_nodelay(&a->u.tcp, 1);
    llhttp_init(&a->parser, HTTP_REQUEST, &admin_settings);
    a->parser.data = a;
    uv_timer_start(&a->timer, admin_timeout, ADMIN_TIMEOUT_MS, 0);
    if (uv_read_start(&a->u.s, admin_alloc, admin_read) < 0)
        admin_close(a);
}

static void admin_shutdown(struct proxy_srv *srv)
{
    if (srv->admin.l != NULL)
        listener_close(srv->admin.l, NULL, NULL);
    srv->admin.l = NULL;
    while (srv->admin.conns != NULL)
        admin_close(srv->admin.conns);
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
    uv_close((uv_handle_t *)&srv->sig_usr1, on_handle_closed);
    watch_close(srv->watch, NULL, NULL);
    srv->watch = NULL;
    notify_close(srv->notify, NULL, NULL);
    srv->notify = NULL;
    uv_close((uv_handle_t *)&srv->drain_timer, on_handle_closed);
    uv_close((uv_handle_t *)&srv->log_flush, on_handle_closed);
    admin_shutdown(srv);
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
    if (rc == 0) {
        svc->accepted++;
        if (live >= max)
            svc->overloaded++;
    }
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
        reopen_log(srv);
        return;
    }
    if (signum == SIGHUP) {
        reopen_log(srv);
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
          "  --admin ENDPOINT      admin listener: GET /healthz, /readyz, /metrics\n"
          "                        (Prometheus), or 'off' (the default)\n"
          "  --health-path PATH    answer 'GET PATH' (origin form) on the HTTP proxy port\n"
          "                        with 200 ok, e.g. /healthz (default: none, 400)\n"
          "  --log FILE            append the connection log to FILE (default stderr)\n"
          "  --log-format FORMAT   text (default) or json\n"
          "  --watch               reload when the settings file or a list file changes\n"
          "                        (also a ConfigMap-style swap of their directory)\n"
          "  -h, --help            show this help\n"
          "\n"
          "Endpoints: tcp:IP:PORT, tcp:[IPv6]:PORT, unix:PATH, fd:N (an inherited\n"
          "listening socket) or fd:NAME (systemd LISTEN_FDNAMES).\n"
          "Signals: SIGHUP reopens the log and reloads the settings; SIGUSR1 reopens the\n"
          "log; SIGTERM/SIGINT drain and exit; SIGUSR2, SIGPIPE and SIGALRM are ignored.\n"
          "With NOTIFY_SOCKET set, speaks the systemd notify protocol (Type=notify).\n"
          "Exit status: 0 after a drain, 1 cannot start, 2 bad arguments or settings.\n",
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

/* A health path: '/' then visible ASCII, no '?' or '#'. NULL or why. */
static const char *health_path_error(const char *p)
{
    size_t n = strlen(p);

    if (p[0] != '/')
        return "must start with '/'";
    if (n > HEALTH_PATH_MAX)
        return "too long";
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)p[i];
        if (ch <= 0x20 || ch >= 0x7f || ch == '?' || ch == '#')
            return "only visible ASCII without '?' and '#'";
    }
    return NULL;
}

/* The listener's address for the guard (the proxy never dials itself). */
static void note_listener(struct proxy_srv *srv, struct listener *l)
{
    if (srv->nlisten < 3 &&
        listener_address(l, &srv->laddr[srv->nlisten], &srv->lport[srv->nlisten]) == 0)
        srv->nlisten++;
}

static int open_admin(struct proxy_srv *srv)
{
    const char *why = NULL;
    char ep[ENDPOINT_STR_MAX];
    int rc;

    if (!srv->admin.on)
        return 0;
    rc = listener_open(&srv->admin.l, &srv->loop, &srv->admin.ep, on_admin_accept, srv, &why);
    if (rc < 0) {
        srv->admin.l = NULL;
        fprintf(stderr, "sluice: proxy: cannot listen on %s (admin): %s\n",
                endpoint_str(&srv->admin.ep, ep, sizeof(ep)), why != NULL ? why : uv_strerror(rc));
        return -1;
    }
    note_listener(srv, srv->admin.l);
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

/* STATUS= for systemd: what `systemctl status` shows. */
static void notify_status_text(void *ctx, char *buf, size_t len)
{
    struct proxy_srv *srv = ctx;
    uint64_t allowed = 0, denied = 0;

    for (int p = 0; p < MPROTO_N; p++) {
        allowed += srv->decisions[p][MDEC_ALLOW];
        denied += srv->decisions[p][MDEC_DENY] + srv->decisions[p][MDEC_WOULD_DENY];
    }
    snprintf(buf, len, "%s%zu connections (http %zu, socks5 %zu); %llu allowed, %llu denied; "
                       "%zu rules; %llu reloads, %llu failed",
             srv->stopping ? "draining: " : "", live_conns(srv), srv->http.fe.nconns,
             srv->socks.fe.nconns, (unsigned long long)allowed, (unsigned long long)denied,
             srv->egress != NULL ? policy_rule_count(egress_env_policy(srv->egress)) : 0,
             (unsigned long long)srv->reloads_ok, (unsigned long long)srv->reloads_failed);
}

/* The notify socket and --watch, once everything else is up. */
static int ops_start(struct proxy_srv *srv)
{
    const char *why = NULL;
    const char *path = srv->settings_path != NULL ? srv->settings_path : getenv("SLUICE_SETTINGS");

    if (srv->watch_on &&
        watch_start(&srv->watch, &srv->loop, path, &srv->settings, WATCH_DEBOUNCE_MS, on_watch,
                    srv, &why) < 0) {
        fprintf(stderr, "sluice: proxy: --watch: %s\n", why);
        return -1;
    }
    if (notify_open(&srv->notify, &srv->loop, notify_status_text, srv, &why) < 0) {
        fprintf(stderr, "sluice: proxy: NOTIFY_SOCKET: %s\n", why);
        return -1;
    }
    return 0;
}

int cli_proxy(int argc, char **argv)
{
    struct proxy_srv *srv = calloc(1, sizeof(*srv));
    struct settings_error err;
    struct policy *p = NULL;
    const char *log_path = NULL;
    const char **servers = NULL;
    int rc, code = 1, loop_ok = 0;
    char msg[800], e1[200], e2[200], e3[200];
    struct timespec ts;

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
    clock_gettime(CLOCK_REALTIME, &ts);
    srv->start_time = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
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
        if (strcmp(o, "--watch") == 0) { /* issue 16: proxy/watch.c */
            srv->watch_on = 1;
            continue;
        }
        if (strcmp(o, "--settings") != 0 && strcmp(o, "--http") != 0 &&
            strcmp(o, "--socks") != 0 && strcmp(o, "--ask") != 0 && strcmp(o, "--log") != 0 &&
            strcmp(o, "--log-format") != 0 && strcmp(o, "--admin") != 0 &&
            strcmp(o, "--health-path") != 0) {
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
        } else if (strcmp(o, "--admin") == 0) {
            const char *why = NULL;
            if (strcmp(v, "off") == 0) {
                srv->admin.on = 0;
            } else if (endpoint_parse(v, 1, &srv->admin.ep, &why) < 0) {
                fprintf(stderr, "sluice: proxy: --admin '%s': %s\n", v, why);
                code = 2;
                goto out;
            } else {
                srv->admin.on = 1;
            }
        } else if (strcmp(o, "--health-path") == 0) {
            const char *why = health_path_error(v);
            if (why != NULL) {
                fprintf(stderr, "sluice: proxy: --health-path '%s': %s\n", v, why);
                code = 2;
                goto out;
            }
            srv->health_path = v;
        } else if (strcmp(o, "--log") == 0) {
            log_path = v;
            srv->log_path = v;
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
    log_buffering(srv->log);
    srv->http.fe.health_path = srv->health_path;
    signal(SIGPIPE, SIG_IGN);
    /* no signal an operator may send kills the proxy by default */
    signal(SIGUSR2, SIG_IGN);
    signal(SIGALRM, SIG_IGN);
    raise_fd_limit();

    /* Listeners first, so the guard knows their addresses. */
    if (open_service(srv, &srv->http) < 0 || open_service(srv, &srv->socks) < 0 ||
        open_admin(srv) < 0)
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
    egress_env_set_observer(srv->egress, on_outcome, srv);
    apply_frontend_settings(srv, &srv->socks.fe);
    apply_frontend_settings(srv, &srv->http.fe);

    uv_signal_init(&srv->loop, &srv->sig_hup);
    uv_signal_init(&srv->loop, &srv->sig_term);
    uv_signal_init(&srv->loop, &srv->sig_int);
    uv_timer_init(&srv->loop, &srv->drain_timer);
    uv_prepare_init(&srv->loop, &srv->log_flush);
    srv->sig_hup.data = srv->sig_term.data = srv->sig_int.data = srv;
    srv->drain_timer.data = srv;
    srv->log_flush.data = srv;
    uv_prepare_start(&srv->log_flush, on_log_flush);
    uv_unref((uv_handle_t *)&srv->log_flush);
    uv_signal_start(&srv->sig_hup, on_signal, SIGHUP);
    uv_signal_start(&srv->sig_term, on_signal, SIGTERM);
    uv_signal_start(&srv->sig_int, on_signal, SIGINT);
    uv_signal_init(&srv->loop, &srv->sig_usr1);
    srv->sig_usr1.data = srv;
    uv_signal_start(&srv->sig_usr1, on_signal, SIGUSR1);
    srv->last_reload_ok = 1;
    srv->last_reload_ok_time = wall_now();
    if (ops_start(srv) < 0) {
        code = 2;
        goto out;
    }

    snprintf(msg, sizeof(msg), "sluice %s listening: http %s, socks5 %s%s%s; %zu rules%s%s",
             SLUICE_VERSION,
             service_str(&srv->http, e1, sizeof(e1)), service_str(&srv->socks, e2, sizeof(e2)),
             srv->admin.on ? ", admin " : "",
             srv->admin.on ? listen_str(1, &srv->admin.ep, srv->admin.l, e3, sizeof(e3)) : "",
             policy_rule_count(egress_env_policy(srv->egress)),
             srv->settings.network.mode == SETTINGS_MODE_REPORT ? "; report mode" : "",
             srv->ask_spec != NULL ? "; asking unmatched" : "");
    log_event(srv, "start", msg);
    fflush(srv->log); /* the start line is out before READY=1 */
    notify_ready(srv->notify);

    uv_run(&srv->loop, UV_RUN_DEFAULT);
    code = 0;

out:
    /* Error paths close whatever was opened; a clean stop has closed it all. */
    if (srv->stopping != 2) {
        if (srv->socks.l != NULL)
            listener_close(srv->socks.l, NULL, NULL);
        if (srv->http.l != NULL)
            listener_close(srv->http.l, NULL, NULL);
        admin_shutdown(srv);
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
    else
        fflush(stderr);
    free(srv);
    return code;
}
