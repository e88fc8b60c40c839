/* bridge/bridge.h - moving bytes: endpoints, listeners, the dialer, the relay,
 * and the asynchronous DNS resolver they use.
 *
 * Errors are 0 / negative UV_E* (R3). Everything here runs on one libuv loop
 * and is not thread-safe; use one instance per loop.
 */
#ifndef SLUICE_BRIDGE_H
#define SLUICE_BRIDGE_H

#include <stddef.h>

struct uv_loop_s;   /* uv_loop_t */
struct policy_addr; /* policy/policy.h */

/* ------------------------------------------------------------------------ */
/* resolver (bridge/resolver.c)                                              */
/*                                                                           */
/* c-ares on the caller's libuv loop: one uv_poll_t per c-ares socket, one   */
/* uv_timer_t for both c-ares retransmits and the per-query deadline.        */
/* A query asks for A and AAAA at once and answers with every address, in    */
/* c-ares's RFC 6724 order, deduplicated, at most RESOLVER_MAX_ADDRS. The     */
/* resolver does not judge addresses: the caller runs them through the       */
/* policy guard.                                                             */

#define RESOLVER_MAX_ADDRS 32

struct resolver;
struct resolver_query;

enum resolver_status {
    RESOLVER_OK = 0,    /* n >= 1 addresses */
    RESOLVER_NXDOMAIN,  /* the name does not exist */
    RESOLVER_NODATA,    /* the name exists but has no A or AAAA record */
    RESOLVER_TIMEOUT,   /* no answer within the deadline */
    RESOLVER_FAIL,      /* server failure, refusal, bad answer, no memory, ... */
    RESOLVER_CANCELLED, /* resolver_close() ran before an answer came */
};

/* Called exactly once per query that was not detached. addrs is valid only
 * during the call (n == 0 and addrs == NULL unless st == RESOLVER_OK). After
 * this call the query handle is invalid: the callback should forget it. */
typedef void (*resolver_cb)(void *arg, enum resolver_status st, const struct policy_addr *addrs,
                            size_t n);

/* Creates a resolver on loop.
 *
 * servers: nservers (at most 32) strings from network.dnsServers, each "IPv4",
 * "IPv4:PORT", "IPv6", "[IPv6]" or "[IPv6]:PORT" (no zone ids; port 1-65535
 * without leading zeros, default 53).
 * With servers, lookups go to those servers only: no /etc/hosts, no
 * resolv.conf servers, and "localhost" / "*.localhost" answer 127.0.0.1 and
 * ::1 without asking anyone (RFC 6761 6.3).
 * With nservers == 0 the system configuration is used like the system resolver
 * does: /etc/resolv.conf servers and options, then the hosts file per
 * nsswitch.conf / host.conf (c-ares defaults).
 * In both modes the name is looked up exactly as given: search domains and
 * HOSTALIASES are never applied (the policy judged this exact name).
 *
 * timeout_ms (> 0) is the deadline of each query, retries included; a query
 * without an answer by then gets RESOLVER_TIMEOUT.
 *
 * Returns 0 and sets *out, or UV_EINVAL (bad server string, timeout_ms == 0),
 * UV_ENOMEM, UV_EIO (c-ares could not initialise). */
int resolver_init(struct resolver **out, struct uv_loop_s *loop, const char *const *servers,
                  size_t nservers, unsigned timeout_ms);

/* Starts a lookup of name (canonical: lower-case A-labels, no trailing dot;
 * only letters, digits, '-', '_' and '.' are accepted).
 *
 * Returns 0 when cb will be called exactly once, or a negative UV_E* when it
 * will not be called at all: UV_EINVAL (bad name), UV_ENOMEM, UV_ECANCELED
 * (the resolver is closing).
 *
 * *q is written before the query starts, because cb may run before
 * resolver_query() returns (c-ares completes some lookups immediately, e.g.
 * localhost or numeric names): set your state first, and clear your copy of
 * the handle in cb. Until cb runs, *q may be passed to
 * resolver_query_detach(). */
int resolver_query(struct resolver *r, const char *name, resolver_cb cb, void *arg,
                   struct resolver_query **q);

/* Detaches a query whose callback has not run yet (R10): the callback will
 * never be called; the query finishes inside c-ares (there is no per-query
 * cancel) and frees itself. q == NULL is a no-op. */
void resolver_query_detach(struct resolver_query *q);

/* Number of lookups c-ares still holds, attached or detached (for metrics and
 * drain; a detached or timed-out query stays counted until c-ares lets go). */
size_t resolver_outstanding(const struct resolver *r);

/* Closes the resolver. Attached queries get RESOLVER_CANCELLED from inside
 * this call; detached ones are freed silently. Then the c-ares channel is
 * destroyed (right away, or when the c-ares call that is running returns, if
 * called from a resolver callback), every uv handle is closed, and done(arg)
 * runs from the last close callback (never from inside this call); r is then
 * freed and the loop can be closed. May be called from any resolver callback.
 * Idempotent: later calls do nothing (their done is not called). done may be
 * NULL. */
void resolver_close(struct resolver *r, void (*done)(void *arg), void *arg);

/* ------------------------------------------------------------------------ */
/* end of resolver                                                           */

#endif /* SLUICE_BRIDGE_H */
