/* bridge/limit.h - the one over-limit rule for every listener of sluice
 * (proxy, run, bridge): with `max` connections live, stop accepting on
 * every listener of the group; the first connection that ends below the
 * limit resumes them all. When accepting fails for want of memory or
 * descriptors (ENOMEM, EMFILE, ENFILE) the listener pauses the same way;
 * if no connection is live to end, a timer resumes it after
 * CONN_LIMIT_RETRY_MS, so no path waits for something that never comes.
 * The live count is the owner's (a callback), so it cannot drift from the
 * connections that exist. One loop; not thread-safe. */
#ifndef SLUICE_BRIDGE_LIMIT_H
#define SLUICE_BRIDGE_LIMIT_H

#include "bridge/bridge.h"

#include <stddef.h>
#include <uv.h>

#define CONN_LIMIT_RETRY_MS 100u
#define CONN_LIMIT_MAX_LISTENERS 8

struct conn_limit {
    uv_timer_t retry;
    struct listener *paused[CONN_LIMIT_MAX_LISTENERS];
    size_t npaused;
    size_t max;
    size_t (*live)(void *ctx);
    void *ctx;
    int stopped;
    uint64_t pauses; /* times a listener was paused (metrics, tests) */
};

void conn_limit_init(struct conn_limit *cl, uv_loop_t *loop, size_t max,
                     size_t (*live)(void *ctx), void *ctx);

/* Before accepting on l: 0 to accept, -1 when at the limit (l is paused). */
int conn_limit_admit(struct conn_limit *cl, struct listener *l);

/* After an accept attempt on l with result rc (0 or UV_E*): pauses l when
 * the limit is now reached or rc says memory or descriptors ran out. */
void conn_limit_accepted(struct conn_limit *cl, struct listener *l, int rc);

/* A connection ended: resumes the listeners when below the limit. May run
 * the accept callbacks before it returns. */
void conn_limit_released(struct conn_limit *cl);

/* A new limit (reload); resumes when it is higher. */
void conn_limit_set(struct conn_limit *cl, size_t max);

/* 1 while some listener is paused. */
int conn_limit_paused(const struct conn_limit *cl);

/* Forgets the listeners (they are being closed) and closes the timer. */
void conn_limit_close(struct conn_limit *cl);

#endif
