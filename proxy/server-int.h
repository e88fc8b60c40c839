/* proxy/server-int.h - the standalone proxy's state, shared by
 * proxy/server.c (listeners, limits, drain, reload, signals), proxy/admin.c
 * (the admin listener) and proxy/metrics.c (the counters). Not for other
 * modules: they use proxy/server.h. */
#ifndef SLUICE_PROXY_SERVER_INT_H
#define SLUICE_PROXY_SERVER_INT_H

#include "bridge/limit.h"
#include "proxy/ops.h"
#include "proxy/server.h"

struct proxy_srv;
struct admin_conn;

struct service {
    struct proxy_srv *srv;
    const char *name; /* "socks5", "http" */
    struct endpoint ep;
    int on;
    struct listener *l;
    struct frontend fe;
    int (*accept)(struct frontend *f, struct listener *l, int overloaded);
    uint64_t accepted;   /* connections served (metrics) */
    uint64_t overloaded; /* of them, refused over the connection limit */
};

/* Decision counters by the log record's protocol and verdict. */
enum { MPROTO_HTTP = 0, MPROTO_CONNECT, MPROTO_SOCKS5, MPROTO_N };
enum { MDEC_ALLOW = 0, MDEC_DENY, MDEC_WOULD_DENY, MDEC_OTHER, MDEC_N };

struct proxy_metrics {
    double start_time;
    uint64_t decisions[MPROTO_N][MDEC_N];
    uint64_t bytes_up, bytes_down;
    uint64_t reloads_ok, reloads_failed;
    int last_reload_ok;         /* 1 until a load fails; the next good one sets it again */
    double last_reload_ok_time; /* wall-clock seconds of the last good load */
    struct histogram h_dns, h_dial, h_ask, h_decision;
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
    struct proxy_core core;
    struct service socks, http;
    struct admin admin;
    uv_signal_t sig_hup, sig_term, sig_int;
    uv_timer_t drain_timer;
    struct proxy_log log;
    uint64_t next_id;
    int stopping; /* 1 draining, 2 everything closed */
    struct policy_addr laddr[3];
    uint16_t lport[3];
    size_t nlisten;
    struct proxy_metrics m;
    /* operations (issue 16): proxy/ops.h */
    uv_signal_t sig_usr1;
    const char *log_path;
    int watch_on;
    struct notify *notify;
    struct watch *watch;
    struct conn_limit limit; /* maxConnections + PROXY_OVERLOAD_SLACK, both front ends */
    size_t max_conns;        /* proxy_max_connections() of the settings in use */
    unsigned long nofile;    /* RLIMIT_NOFILE after raising it */
};

/* proxy/server.c: NULL when ready to serve, else why not (for /readyz). */
const char *proxy_not_ready(const struct proxy_srv *srv);

/* proxy/metrics.c */
void proxy_metrics_init(struct proxy_metrics *m);
/* Counts a log record: decisions by protocol and verdict, bytes at close. */
void proxy_metrics_note(struct proxy_metrics *m, const struct connlog *r);
/* Latency histograms from an egress outcome (egress_env_set_observer). */
void proxy_metrics_outcome(void *m, const struct egress_outcome *o);
/* A load of the settings (start, SIGHUP, --watch) and its result. */
void proxy_metrics_reload(struct proxy_metrics *m, int ok);
/* The Prometheus text (format 0.0.4), malloc'ed; NULL when out of memory. */
char *proxy_metrics_text(const struct proxy_srv *srv, size_t *len);

/* proxy/admin.c: opens the admin listener when it is on (0, or -1 after
 * printing why); closes it and its connections. */
int proxy_admin_open(struct proxy_srv *srv);
void proxy_admin_close(struct proxy_srv *srv);

#endif
