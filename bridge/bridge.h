/* bridge/bridge.h - moving bytes: endpoints, listeners, the dialer, the relay,
 * and the asynchronous DNS resolver they use.
 *
 * Errors are 0 / negative UV_E* (R3). Everything here runs on one libuv loop
 * and is not thread-safe; use one instance per loop.
 */
#ifndef SLUICE_BRIDGE_H
#define SLUICE_BRIDGE_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h> /* struct relay embeds libuv handles (R2) */

#include "policy/policy.h"

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

/* ------------------------------------------------------------------------ */
/* endpoints (bridge/endpoint.c)                                             */
/*                                                                           */
/*   tcp:IPV4:PORT   tcp:[IPV6]:PORT   (literal addresses only, port 1-65535; */
/*                                      port 0 allowed for listeners = any)  */
/*   unix:PATH       (absolute or relative, at most 107 bytes, no NUL)       */
/*   fd:N            an inherited socket (listening for listeners)           */
/*   fd:NAME         systemd socket activation: the LISTEN_FDS socket whose  */
/*                   LISTEN_FDNAMES entry is NAME; "fd:" + a number >= 3 that */
/*                   is within LISTEN_FDS is the same as fd:N                */

enum endpoint_kind { ENDPOINT_TCP = 0, ENDPOINT_UNIX, ENDPOINT_FD };

#define ENDPOINT_PATH_MAX 108 /* sizeof(sun_path), NUL included */

struct endpoint {
    enum endpoint_kind kind;
    struct policy_addr addr; /* ENDPOINT_TCP */
    uint16_t port;           /* ENDPOINT_TCP */
    char path[ENDPOINT_PATH_MAX]; /* ENDPOINT_UNIX */
    int fd;                       /* ENDPOINT_FD */
};

/* Parses an endpoint string. for_listen: port 0 is accepted (tcp), fd: is
 * accepted (it never is for connecting). Returns 0, or UV_EINVAL with *why a
 * static message naming what was wrong. */
int endpoint_parse(const char *s, int for_listen, struct endpoint *ep, const char **why);

/* Canonical text: "tcp:127.0.0.1:80", "tcp:[::1]:80", "unix:/p", "fd:3". */
const char *endpoint_str(const struct endpoint *ep, char *buf, size_t len);

/* Fills a sockaddr for a TCP endpoint (or a policy_addr + port). */
void endpoint_sockaddr(const struct policy_addr *a, uint16_t port, struct sockaddr_storage *ss,
                       socklen_t *len);

/* ------------------------------------------------------------------------ */
/* listeners (bridge/listener.c)                                             */

struct listener;

/* Called for each pending connection: accept it with listener_accept() into
 * a stream initialised for listener_kind(). */
typedef void (*listener_cb)(struct listener *l, void *arg);

/* Opens a listening socket on ep and starts watching it.
 * TCP: SO_REUSEADDR, IPV6_V6ONLY for [::], backlog 511.
 * UNIX: the socket file is created with mode 0600 (umask while binding);
 * its directory must exist and be owned by us (or root) and not be writable
 * by others unless sticky; an existing path is replaced only when it is a
 * socket (lstat: a symlink is never followed nor removed) and nobody
 * listens on it. The file is removed by listener_close().
 * FD: the socket must be a listening stream socket (SO_ACCEPTCONN).
 * Returns 0, or a negative UV_E* with *why (may be NULL) set to a static
 * message. */
int listener_open(struct listener **out, uv_loop_t *loop, const struct endpoint *ep,
                  listener_cb cb, void *arg, const char **why);

/* RELAY_TCP or RELAY_PIPE: what stream type accepted connections are. */
int listener_kind(const struct listener *l);

/* Accepts one pending connection into client (initialised, not yet used).
 * 0 or UV_E*. */
int listener_accept(struct listener *l, uv_stream_t *client);

/* Stops (pause) / restarts (resume) accepting, for connection limits. */
void listener_pause(struct listener *l);
void listener_resume(struct listener *l);

/* The bound address (tcp; port resolved for port 0). 0 or UV_EINVAL. */
int listener_address(const struct listener *l, struct policy_addr *a, uint16_t *port);

/* Closes the listener (removes a unix socket file it created); done(arg) is
 * called from the close callback. Idempotent. */
void listener_close(struct listener *l, void (*done)(void *arg), void *arg);

/* ------------------------------------------------------------------------ */
/* dialer (bridge/dialer.c)                                                  */
/*                                                                           */
/* Connects to one of n targets, in order, each with timeout_ms. Never        */
/* resolves anything: TCP targets are addresses the caller (and the guard)    */
/* vetted. The connected socket is handed to the caller as a non-blocking     */
/* fd, ready for uv_tcp_open()/uv_pipe_open() (the relay's relay_open()).     */

struct dialer;

struct dialer_target {
    int is_unix;             /* 0: TCP to addr:port; 1: unix path */
    struct policy_addr addr; /* TCP */
    uint16_t port;           /* TCP */
    const char *path;        /* unix; must outlive the dial */
};

/* status 0: fd is connected and the caller owns it; index is the target that
 * connected. status < 0: every target failed; the error is the most telling
 * one seen (UV_ETIMEDOUT if any attempt timed out and none was refused, else
 * the last error: UV_ECONNREFUSED, UV_ENETUNREACH, UV_EHOSTUNREACH, ...);
 * fd is -1. Called exactly once unless dialer_cancel() ran first; never from
 * inside dialer_start(). */
typedef void (*dialer_cb)(void *arg, int status, int fd, size_t index);

int dialer_start(struct dialer **out, uv_loop_t *loop, const struct dialer_target *targets,
                 size_t n, unsigned timeout_ms, dialer_cb cb, void *arg);

/* Cancels a dial whose callback has not run: the callback will not run, any
 * socket is closed, memory is freed from a close callback. NULL is a no-op. */
void dialer_cancel(struct dialer *d);

/* ------------------------------------------------------------------------ */
/* relay (bridge/relay.c)                                                    */
/*                                                                           */
/* Splices two libuv streams, a (client side) and b (upstream side), each a   */
/* TCP socket or a pipe. The owner embeds struct relay in its connection      */
/* struct, calls relay_init() at accept time (all three handles initialised,   */
/* so teardown is always "close three"), may use a and the timer itself while */
/* it negotiates (handshake reads, replies, phase timeouts), opens b with     */
/* relay_open_b() once dialed, then calls relay_start(). From then on the     */
/* relay owns the bytes:                                                      */
/*   - read A -> write B (uv_try_write first, the rest queued);               */
/*   - A stops reading while B's write queue is above RELAY_HIGH_WATER and    */
/*     resumes from B's write callback below RELAY_LOW_WATER;                 */
/*   - EOF from A -> shutdown(B) after B's queue is flushed; the relay is done */
/*     when both directions have ended;                                       */
/*   - any read/write error, or no byte either way for idle_ms, ends it.       */
/* relay_close() is the only way a relay ends (the relay calls it itself when */
/* done): idempotent, closes the three handles, and on_closed(r) runs from    */
/* the last close callback, where the owner logs and frees.                  */

enum relay_kind { RELAY_TCP = 0, RELAY_PIPE = 1 };

#define RELAY_READ_SIZE (64 * 1024)
#define RELAY_HIGH_WATER (256 * 1024)
#define RELAY_LOW_WATER (64 * 1024)

/* How a relay ended, for logs. */
enum relay_end {
    RELAY_END_NONE = 0,  /* still running, or closed before relay_start */
    RELAY_END_DONE,      /* both directions half-closed cleanly */
    RELAY_END_IDLE,      /* idle timeout */
    RELAY_END_A_ERROR,   /* read/write/shutdown error on a (status says which) */
    RELAY_END_B_ERROR,   /* same on b */
    RELAY_END_OWNER,     /* relay_close() by the owner (status says why) */
};

struct relay;
typedef void (*relay_closed_cb)(struct relay *r);

struct relay_side {
    union {
        uv_handle_t h;
        uv_stream_t s;
        uv_tcp_t tcp;
        uv_pipe_t pipe;
    } u;
    uv_shutdown_t shutdown_req;
    struct relay *r;
    uint64_t nread;        /* bytes read from this side and forwarded */
    unsigned eof : 1;      /* read EOF from this side */
    unsigned shut : 1;     /* shutdown of this side's write half completed */
    unsigned shutting : 1; /* shutdown requested */
    unsigned paused : 1;   /* reading stopped by backpressure */
    unsigned reading : 1;
};

struct relay {
    struct relay_side a, b;
    uv_timer_t timer;       /* idle timer once started; the owner's before */
    relay_closed_cb on_closed;
    void *data;             /* the owner's */
    uint64_t started_ms;    /* uv_now() at relay_init */
    uint64_t last_io_ms;
    uint64_t npauses;       /* times a side was paused by backpressure */
    unsigned idle_ms;
    int status;             /* 0 or the UV_E* that ended it */
    enum relay_end end;
    unsigned pending_close;
    unsigned closing : 1;
    unsigned started : 1;
    unsigned b_open : 1;
};

/* Initialises the three handles (a and b of the given kinds, the timer). */
void relay_init(uv_loop_t *loop, struct relay *r, enum relay_kind a, enum relay_kind b,
                relay_closed_cb on_closed, void *data);

/* Adopts a connected socket fd as b (uv_tcp_open / uv_pipe_open). On error the
 * fd is closed. 0 or UV_E*. */
int relay_open_b(struct relay *r, int fd);

/* Starts splicing; the owner must have stopped its own reads on a and its own
 * use of the timer. Writes the owner queued before still go first (libuv
 * keeps write order). idle_ms 0 = no idle timeout. 0 or UV_E* (then the
 * owner calls relay_close). */
int relay_start(struct relay *r, unsigned idle_ms);

/* Ends the relay (idempotent). status 0 or UV_E*; when called by the owner
 * the end is RELAY_END_OWNER unless the relay already recorded one. */
void relay_close(struct relay *r, int status);

/* "done", "idle timeout", "client error", "upstream error", "closed". */
const char *relay_end_str(enum relay_end e);

/* ------------------------------------------------------------------------ */
/* ask handlers (bridge/ask_handler.c)                                       */
/*                                                                           */
/* The three built-in handlers behind the broker's C API (policy.h):         */
/*   tty           prompt on /dev/tty, one question at a time (others queue); */
/*                 no tty: every question is denied with a message           */
/*   exec:PROGRAM  run PROGRAM (no shell) per question, JSON object on stdin: */
/*                 {"id":N,"host":..,"port":..,"protocol":..,"client":..};   */
/*                 the first line of its stdout is the answer: a decision     */
/*                 word optionally followed by a space and a reason, or a     */
/*                 JSON object {"decision":..,"reason":..}; a non-zero exit,  */
/*                 a signal, no line or anything else denies                 */
/*   socket:PATH   JSON lines on a Unix stream socket to a supervising        */
/*                 program: sends {"id":N,"host":..,"port":..,"protocol":..,  */
/*                 "client":..}\n, reads {"id":N,"decision":..,"reason":..}\n;  */
/*                 a malformed line or a lost connection denies what is      */
/*                 pending (the connection is re-established for later asks) */

struct ask_handler;

/* Parses spec and installs the handler on broker b. 0, or UV_EINVAL with
 * *why set (bad spec), or another UV_E*. */
int ask_handler_open(struct ask_handler **out, uv_loop_t *loop, const char *spec,
                     struct ask_broker *b, const char **why);

/* Closes the handler (kills running exec children, closes the socket and
 * tty); done(arg) from the last close callback. Idempotent. Close the broker
 * first. */
void ask_handler_close(struct ask_handler *h, void (*done)(void *arg), void *arg);

#endif /* SLUICE_BRIDGE_H */
