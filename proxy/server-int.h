/* proxy/server-int.h - the standalone proxy's state, shared by
 * proxy/server.c (the process: start, reload, signals, drain),
 * proxy/worker.c (a thread around one loop's proxy service, its share of
 * the process-wide limit and its gauges),
 * proxy/admin.c (the admin listener) and proxy/metrics.c (the counters).
 * Not for other modules: they use proxy/server.h.
 *
 * The parts of a worker are the proxy service of its loop (proxy/service.h),
 * its mailbox (proxy/mailbox.h) and, for workers 1..N-1, an ask relay
 * (proxy/askrelay.h); those headers and their .c files do not include this
 * one, so they depend on nothing of the server or the worker.
 *
 * Threads. The main loop runs signals, the admin listener, reload, the
 * drain timer, the ask broker and its handler, and worker 0. Workers 1..N-1
 * each run their own loop in a thread. A worker's state is touched by its
 * own thread only, except: the fields marked "atomic" (read by the main
 * thread for /metrics and the process-wide limit, with __atomic builtins),
 * and its message queue (under its mutex). Messages go main -> worker
 * (new configuration, stop, close all, nudge, ask answers) and worker ->
 * main (ask questions and withdrawals, done), each queue woken by a
 * uv_async_t (proxy/mailbox.c). The log is one stream under its own mutex. */
#ifndef SLUICE_PROXY_SERVER_INT_H
#define SLUICE_PROXY_SERVER_INT_H

#include "proxy/askrelay.h"
#include "proxy/mailbox.h"
#include "proxy/ops.h"
#include "proxy/server.h"
#include "proxy/service.h"

#define PROXY_MAX_WORKERS 64

struct proxy_srv;
struct proxy_worker;
struct admin_conn;

/* One front end of a worker as the process sees it: its endpoint and its
 * counters (the listener and the front end are the proxy service's). */
struct service {
    const char *name; /* "socks5", "http" */
    struct endpoint ep;
    int on;
    struct listener *l; /* borrowed from the proxy service; NULL when closed */
    uint64_t accepted;   /* atomic: connections served (metrics) */
    uint64_t overloaded; /* atomic: of them, refused over the connection limit */
    size_t live;         /* atomic: the front end's nconns, published */
};

/* Decision counters by the log record's protocol and verdict. */
enum { MPROTO_HTTP = 0, MPROTO_CONNECT, MPROTO_SOCKS5, MPROTO_HTTPS, MPROTO_N };
enum { MDEC_ALLOW = 0, MDEC_DENY, MDEC_WOULD_DENY, MDEC_OTHER, MDEC_N };

/* Per worker; every field atomic. */
struct proxy_metrics {
    uint64_t decisions[MPROTO_N][MDEC_N];
    uint64_t bytes_up, bytes_down;           /* of closed connections */
    uint64_t open_up, open_down;             /* of open ones, published (worker.c) */
    struct histogram h_dns, h_dial, h_ask, h_decision; /* histogram_observe is atomic */
};

struct proxy_worker {
    struct proxy_srv *srv;
    unsigned index;
    uv_loop_t own_loop;
    uv_loop_t *loop; /* worker 0: the main loop */
    uv_thread_t thread;
    int threaded, loop_ok, thread_ok, q_ok;
    struct proxy_service svc; /* its broker: worker 0 the main one; others their own */
    struct service http, socks;
    struct mailbox q;
    uv_prepare_t prep; /* flushes the log and publishes gauges */
    uint64_t bytes_at; /* uv_now of the last publish_bytes */
    int stopping; /* 1 draining, 2 closing */
    int done_sent;
    struct proxy_metrics m;
    size_t inflight, dns; /* atomic: published gauges */
    int paused;           /* atomic: accepting paused */
    struct askrelay *relay;
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
    struct ask_broker *broker;   /* the one ask broker (main loop), or NULL */
    struct ask_handler *handler; /* its handler, or NULL */
    struct policy *policy;       /* the policy in use (the main thread's reference) */
    struct proxy_tls_shared *tls; /* network.tlsTerminate's CA and leaves, or NULL */
    struct proxy_worker *workers[PROXY_MAX_WORKERS];
    unsigned nworkers, ndone;
    unsigned nworkers_made; /* created (for the error paths) */
    struct mailbox q; /* worker -> main */
    int q_ok;
    struct askrelay_hub hub; /* questions from workers at the broker (askrelay.c) */
    struct admin admin;
    uv_signal_t sig_hup, sig_term, sig_int;
    uv_timer_t drain_timer;
    struct proxy_log log;
    uint64_t next_id; /* atomic: connection ids, process-wide */
    size_t live;      /* atomic: client connections, process-wide */
    int stopping;     /* 1 draining, 2 everything closed */
    struct policy_addr laddr[3];
    uint16_t lport[3];
    size_t nlisten;
    double start_time;
    uint64_t reloads_ok, reloads_failed;
    size_t max_conns;     /* proxy_max_connections() of the settings in use */
    unsigned long nofile; /* RLIMIT_NOFILE after raising it */
    struct proxy_opts o;
    int last_reload_ok;         /* 1 until a load fails; the next good one sets it again */
    double last_reload_ok_time; /* wall-clock seconds of the last good load */
    /* operations (issue 16): proxy/ops.h; main loop */
    uv_signal_t sig_usr1;
    const char *log_path;
    int watch_on;
    struct notify *notify;
    struct watch *watch;
    /* credentials.headers (issue 24 item 4): the table in use (the main
     * thread's reference; each worker's conf holds one) and its helpers */
    struct proxy_gw *gw;
    struct proxy_gwrun *gwrun;
};

/* proxy/server.c */
const char *proxy_not_ready(const struct proxy_srv *srv);
/* A worker has closed everything (main thread). */
void proxy_worker_done(struct proxy_srv *srv, struct proxy_worker *w);

/* proxy/worker.c */
/* Creates worker index on its loop (the main loop for 0): listeners
 * (tcp: SO_REUSEPORT when several; fd:/unix: the first worker's, shared),
 * resolver, egress, front ends. 0, or the exit status after a message. */
int proxy_worker_new(struct proxy_srv *srv, unsigned index, struct proxy_worker **out);
/* The second half, once the policy is loaded (main thread): resolver, ask
 * relay, egress, front ends, limit, with conf (taken, also on failure).
 * 0, or 1 with a message in err. */
int proxy_worker_setup(struct proxy_worker *w, struct proxy_service_conf *conf, char *err,
                       size_t errlen);
/* Starts the worker's thread (workers 1..N-1). */
int proxy_worker_start(struct proxy_worker *w);
/* Sends a message to a worker (from the main thread). */
void proxy_worker_send(struct proxy_worker *w, struct mail *m);
/* Closes what an unstarted worker opened (error paths; main thread). */
void proxy_worker_abort(struct proxy_worker *w);
/* After the worker is done (thread joined): frees it. */
void proxy_worker_free(struct proxy_worker *w);

/* proxy/metrics.c */
void proxy_metrics_note(struct proxy_metrics *m, const struct connlog *r);
/* Latency histograms from an egress outcome (egress_env_set_observer). */
void proxy_metrics_outcome(void *m, const struct egress_outcome *o);
/* A load of the settings (start, SIGHUP, --watch) and its result (main). */
void proxy_metrics_reload(struct proxy_srv *srv, int ok);
/* The Prometheus text (format 0.0.4), malloc'ed; NULL when out of memory. */
char *proxy_metrics_text(const struct proxy_srv *srv, size_t *len);

/* proxy/admin.c: opens the admin listener when it is on (0, or -1 after
 * printing why); closes it and its connections. */
int proxy_admin_open(struct proxy_srv *srv);
void proxy_admin_close(struct proxy_srv *srv);

#endif
