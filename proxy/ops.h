/* proxy/ops.h - what an operator's supervisor talks to: the systemd notify
 * protocol (proxy/notify.c), reload on change (proxy/watch.c), process
 * metrics and latency histograms for /metrics (proxy/procmetrics.c).
 * Each runs on the proxy's event loop; none is thread-safe.
 */
#ifndef SLUICE_PROXY_OPS_H
#define SLUICE_PROXY_OPS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct uv_loop_s;
struct settings;

/* ------------------------------------------------------------------------ */
/* systemd notify protocol (proxy/notify.c)                                 */
/*                                                                          */
/* sd_notify(3) written out: datagrams on the AF_UNIX socket named by       */
/* $NOTIFY_SOCKET (a path, or '@' for the abstract namespace). Without it   */
/* every call is a no-op. With $WATCHDOG_USEC (and $WATCHDOG_PID unset or   */
/* ours) WATCHDOG=1 is sent every half interval from the loop, so a stuck   */
/* loop is noticed. notify_open unsets the variables so that children (an   */
/* exec: ask handler) do not inherit them. status_fn, when given, writes    */
/* the STATUS= text sent with each state change and every watchdog tick.    */

struct notify;

typedef void (*notify_status_fn)(void *ctx, char *buf, size_t len);

/* 0 (also when there is no NOTIFY_SOCKET: *out is then NULL-safe to use),
 * or -errno when NOTIFY_SOCKET is set but unusable (message in why). */
int notify_open(struct notify **out, struct uv_loop_s *loop, notify_status_fn status_fn,
                void *ctx, const char **why);
void notify_ready(struct notify *n);     /* READY=1 + STATUS= */
void notify_reloading(struct notify *n); /* RELOADING=1 + MONOTONIC_USEC= */
void notify_stopping(struct notify *n);  /* STOPPING=1 + STATUS= */
void notify_status(struct notify *n);    /* STATUS= */
/* Closes the socket and the watchdog timer; cb(arg) once the timer handle
 * has closed (cb may be NULL). n may be NULL. */
void notify_close(struct notify *n, void (*cb)(void *arg), void *arg);

/* ------------------------------------------------------------------------ */
/* Reload on change (proxy/watch.c)                                         */
/*                                                                          */
/* Watches the directories that hold the settings file, the managed file    */
/* and every list file the settings name (and, for a path that is a         */
/* symbolic link, the directory of its target), so an edit in place, an     */
/* editor's rename over the file and a Kubernetes ConfigMap update (an      */
/* atomic swap of the ..data symlink in the mounted directory) are all      */
/* seen. Events are debounced: cb runs once, debounce_ms after the last     */
/* one. The caller reloads (the same path as SIGHUP) and then calls         */
/* watch_update with the settings in use, since the set of list files and   */
/* symlink targets may have changed.                                        */

struct watch;

int watch_start(struct watch **out, struct uv_loop_s *loop, const char *settings_path,
                const struct settings *s, unsigned debounce_ms, void (*cb)(void *ctx), void *ctx,
                const char **why);
int watch_update(struct watch *w, const struct settings *s);
size_t watch_dirs(const struct watch *w); /* directories watched now */
void watch_close(struct watch *w, void (*cb)(void *arg), void *arg);

/* ------------------------------------------------------------------------ */
/* Metrics (proxy/procmetrics.c)                                            */

/* process_* metrics of the Prometheus client conventions, from /proc/self:
 * process_cpu_seconds_total, process_open_fds,
 * process_resident_memory_bytes, process_virtual_memory_bytes (proxy/metrics.c
 * writes process_start_time_seconds and process_max_fds itself). */
void procmetrics_write(FILE *m);

/* A cumulative latency histogram with fixed buckets (seconds). */
#define HIST_BUCKETS 14
struct histogram {
    uint64_t count[HIST_BUCKETS + 1]; /* per bucket, +Inf last (not cumulative) */
    uint64_t n;
    uint64_t sum_ns;
};

/* Relaxed atomic adds: one thread observes, another may sum (the workers'
 * histograms into /metrics). */
void histogram_observe(struct histogram *h, double seconds);
/* dst += src, src read with atomic loads. */
void histogram_add(struct histogram *dst, const struct histogram *src);
/* Writes NAME_bucket{le=...}, NAME_sum and NAME_count (with HELP and TYPE). */
void histogram_write(FILE *m, const char *name, const char *help, const struct histogram *h);

#endif
