/* proxy/server.h - the proxy service that `sluice proxy` and `sluice run`
 * both start (design.md "The proxy").
 *
 *   proxy/service.c  one loop's service: listeners, front ends, limit,
 *                    resolver, ask broker, egress, log hook (service.h)
 *   proxy/core.c     the shared start-up: resolver, limits, the guard's
 *                    local addresses
 *   proxy/log.c      the connection log (text or JSON), flushed per loop turn
 *   proxy/server.c   `sluice proxy`: listeners, limits, drain, reload, signals
 *   proxy/admin.c    the admin listener: /healthz, /readyz, /metrics
 *   proxy/metrics.c  the counters and their Prometheus text
 */
#ifndef SLUICE_PROXY_SERVER_H
#define SLUICE_PROXY_SERVER_H

#include "bridge/bridge.h"
#include "policy/policy.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <uv.h>

#ifndef SLUICE_VERSION
#define SLUICE_VERSION "0.1.0"
#endif

/* ------------------------------------------------------------------------ */
/* Core (proxy/core.c, proxy/service.c): what `proxy` and `run` share       */

/* Starts a resolver on LOOP with the settings' DNS servers and timeout
 * into *out (each worker has its own). 0, or -1 with a message in err and
 * *out NULL. */
int proxy_resolver_start(struct resolver **out, uv_loop_t *loop, const struct settings *s,
                         char *err, size_t errlen);

/* An ask broker on loop (settings' timeout and bound) with the handler of
 * spec (--ask). 0, or -1 with a message in err ("--ask 'SPEC': why"); what
 * was started is in *broker and *handler, for the caller to close. */
int proxy_ask_start(struct ask_broker **broker, struct ask_handler **handler, uv_loop_t *loop,
                    const struct settings *s, const char *spec, char *err, size_t errlen);
/* Closes them, the broker first (either may be NULL; asynchronously: run
 * the loop); done runs once per closed part, may be NULL. */
void proxy_ask_close(struct ask_broker **broker, struct ask_handler **handler,
                     void (*done)(void *), void *arg);

/* The defaults `sluice proxy` applies to its loaded settings (`run` does
 * not): an unset network.denyPrivateAddresses is true. `sluice check
 * --proxy` applies the same, to judge as the proxy would. */
void proxy_settings_defaults(struct settings *s);

/* Connections refused quickly (HTTP 503, SOCKS5 0x01) beyond
 * proxy.limits.maxConnections before accepting pauses (bridge/limit.h). */
#define PROXY_OVERLOAD_SLACK 64
/* Descriptors kept for listeners, DNS, the log and the ask handler. */
#define PROXY_FD_HEADROOM 64

/* Raises the soft RLIMIT_NOFILE to the hard limit (once per process);
 * returns the soft limit now in force. */
unsigned long proxy_raise_nofile(void);

/* proxy.limits.maxConnections, or when it is 0 (the default) what the
 * descriptor limit allows: (RLIMIT_NOFILE - PROXY_FD_HEADROOM) / 2, a tunnel
 * holding two descriptors; at least 1, at most 1,000,000. */
unsigned proxy_max_connections(const struct settings *s);

/* Tells the guard this host's own addresses (getifaddrs) and the proxy's own
 * listeners (port 0 = any port). */
void proxy_set_local(struct policy *p, const struct policy_addr *listeners, const uint16_t *ports,
                     size_t nlisteners);

/* ------------------------------------------------------------------------ */
/* Connection log (proxy/log.c)                                              */

struct proxy_log {
    uv_mutex_t mu; /* one line at a time, from any loop */
    int mu_ok;
    FILE *f;
    int json;
    int dirty; /* written since the last flush */
    int owned; /* f was opened by proxy_log_open */
    uv_prepare_t flush;
    int flush_on;
};

/* Opens path for appending (NULL: stderr). -1 with errno set when the file
 * cannot be opened. */
int proxy_log_open(struct proxy_log *lg, const char *path, int json);
/* Fully buffers the stream (line-buffered on a terminal), before anything
 * is written to it; for a log that proxy_log_start will flush. */
void proxy_log_buffer(struct proxy_log *lg);
/* Flushes once per loop iteration, before the loop waits (without it every
 * line is flushed as it is written). */
void proxy_log_start(struct proxy_log *lg, uv_loop_t *loop);
void proxy_log_stop(struct proxy_log *lg);
/* Buffered mode without a flush handle of its own: other loops flush it
 * with proxy_log_flush (the proxy's workers, before each waits). */
void proxy_log_buffered(struct proxy_log *lg);
void proxy_log_flush(struct proxy_log *lg);
/* SIGUSR1/SIGHUP: reopens path by name (logrotate) after writing what is
 * buffered to the old file; on failure keeps the old one. 0 or -1. */
int proxy_log_reopen(struct proxy_log *lg, const char *path);
/* Closes the file (not stderr), after a final flush. */
void proxy_log_close(struct proxy_log *lg);
void proxy_log_record(struct proxy_log *lg, const struct connlog *r);
/* The record as the text log writes it, one logfmt line without its
 * newline, into buf: its length, or -1 when it does not fit in cap. */
long proxy_log_render(const struct connlog *r, char *buf, size_t cap);
/* A server event (start, reload, drain): level "info", "warn" or "error". */
void proxy_log_event(struct proxy_log *lg, const char *level, const char *event, const char *msg);

/* ------------------------------------------------------------------------ */
/* The standalone proxy (proxy/server.c)                                     */

struct proxy_opts {
    const char *settings_path; /* NULL: the default layers */
    const char *ask_spec;      /* NULL: deny unmatched */
    struct endpoint http, socks, admin;
    int http_on, socks_on, admin_on;
    const char *health_path; /* NULL: none */
    const char *log_path;    /* NULL: stderr */
    int json;
    unsigned workers; /* event loops, 1..64; 0: proxy_default_workers() */
    int watch; /* --watch: reload when the settings' files change (proxy/watch.c) */
};

/* The online CPUs, at most 64. */
unsigned proxy_default_workers(void);

/* Default endpoints: HTTP tcp:127.0.0.1:3128, SOCKS tcp:127.0.0.1:1080, no
 * admin listener. */
void proxy_opts_init(struct proxy_opts *o);

/* Serves with o->workers event loops (worker 0 on the calling thread, the
 * others in threads) until SIGTERM/SIGINT and the drain; the exit status (0 after a
 * clean stop, 1 when a listener or the service cannot start, 2 for bad
 * settings or a bad ask handler). */
int proxy_server_run(const struct proxy_opts *o);

#endif
