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
/*                                                                           */
/* IPv4 is a strict dotted quad (no 127.1, 0x7f.0.0.1, 010.0.0.1); IPv6 is    */
/* bracketed, without a zone id; names are refused (nothing here resolves).  */
/* The port is decimal without sign or leading zeros. fd:NAME requires        */
/* LISTEN_PID == getpid() and a unique NAME among the first LISTEN_FDS        */
/* entries of LISTEN_FDNAMES (fds start at 3); the environment is only read. */

enum endpoint_kind { ENDPOINT_TCP = 0, ENDPOINT_UNIX, ENDPOINT_FD };

#define ENDPOINT_PATH_MAX 108 /* sizeof(sun_path), NUL included */
#define ENDPOINT_STR_MAX 120  /* endpoint_str() of any endpoint fits */

struct endpoint {
    enum endpoint_kind kind;
    struct policy_addr addr; /* ENDPOINT_TCP */
    uint16_t port;           /* ENDPOINT_TCP */
    char path[ENDPOINT_PATH_MAX]; /* ENDPOINT_UNIX */
    int fd;                       /* ENDPOINT_FD */
    int reuseport;                /* ENDPOINT_TCP listeners: SO_REUSEPORT (workers) */
};

/* Parses an endpoint string. for_listen: port 0 is accepted (tcp), fd: is
 * accepted (it never is for connecting). Returns 0, or UV_EINVAL with *why
 * (may be NULL) a message naming what was wrong ("missing port", "port out of
 * range 1-65535", "hostnames are not accepted, use an IP address", "unknown
 * scheme 'udp' (expected tcp:, unix: or fd:)", ...): static text, except the
 * unknown-scheme message, which lives in per-thread storage until the next
 * call. *ep is written only on success. */
int endpoint_parse(const char *s, int for_listen, struct endpoint *ep, const char **why);

/* Canonical text: "tcp:127.0.0.1:80", "tcp:[::1]:80", "unix:/p", "fd:3" (an
 * fd:NAME prints as its number). Truncated to fit len (ENDPOINT_STR_MAX
 * always fits); returns buf. */
const char *endpoint_str(const struct endpoint *ep, char *buf, size_t len);

/* Fills a sockaddr for a TCP endpoint (or a policy_addr + port); len may
 * be NULL. */
void endpoint_sockaddr(const struct policy_addr *a, uint16_t port, struct sockaddr_storage *ss,
                       socklen_t *len);
/* The other way: the address and port of an AF_INET or AF_INET6 sockaddr,
 * an IPv4-mapped IPv6 address as IPv4. 0, or -1 for another family. */
int endpoint_sockaddr_split(const struct sockaddr *sa, struct policy_addr *a, uint16_t *port);

/* ------------------------------------------------------------------------ */
/* listeners (bridge/listener.c)                                             */

struct listener;

/* Called for each pending connection: accept it with listener_accept() into
 * a stream initialised for listener_kind(). A connection the callback leaves
 * unaccepted (or one that arrives while paused) is held by libuv, and nothing
 * more is accepted until listener_accept() takes it or listener_resume()
 * offers it to the callback again. */
typedef void (*listener_cb)(struct listener *l, void *arg);

/* Opens a listening socket on ep and starts watching it.
 * TCP: SO_REUSEADDR, IPV6_V6ONLY for IPv6, backlog 511, TCP_NODELAY (for
 * the accepted sockets; best effort, see listener_nodelay()).
 * UNIX: the socket file is created with mode 0600 (umask 0177 while binding,
 * checked after); its directory must exist and be owned by us (or root) and
 * not be writable by group or others unless sticky; an existing path is
 * replaced only when it is a socket owned by us (lstat: a symlink is never
 * followed nor removed) and nobody listens on it (UV_EADDRINUSE if someone
 * does, UV_EEXIST for anything else at the path). listener_close() removes
 * the file if it is still the one created here (same device and inode).
 * umask() is process-wide: open unix listeners from one thread at a time.
 * FD: the socket must be a listening stream socket (SO_ACCEPTCONN) of family
 * AF_INET, AF_INET6 (RELAY_TCP) or AF_UNIX (RELAY_PIPE); it gets FD_CLOEXEC,
 * and the listener owns it from then on (listener_close() closes it).
 * Returns 0, or a negative UV_E* with *why (may be NULL) set to a static
 * message; nothing is left to close, except when libuv itself refuses the
 * socket (does not happen for a fresh socket): then memory is released by a
 * close callback, so run the loop before uv_loop_close(). */
int listener_open(struct listener **out, uv_loop_t *loop, const struct endpoint *ep,
                  listener_cb cb, void *arg, const char **why);

/* RELAY_TCP or RELAY_PIPE: what stream type accepted connections are. */
int listener_kind(const struct listener *l);
/* The listening socket (to dup for another loop), or -1. */
int listener_fd(const struct listener *l);

/* 1 when the connections l accepts already have TCP_NODELAY: a TCP
 * listener sets it on its listening socket and Linux copies it to every
 * accepted socket, so the owner need not set it again (it sets
 * relay.a.nodelay instead, and relay_start() skips it). 0 for unix sockets,
 * or if it could not be set. */
int listener_nodelay(const struct listener *l);

/* Accepts one pending connection into client (initialised, not yet used).
 * 0 or UV_E* (UV_EAGAIN: none pending, UV_ECANCELED: closing). */
int listener_accept(struct listener *l, uv_stream_t *client);

/* Stops (pause) / restarts (resume) accepting, for connection limits. While
 * paused, at most one connection is taken from the kernel and held; the rest
 * wait in the backlog. listener_resume() may call the callback before it
 * returns, for the held connection. */
void listener_pause(struct listener *l);
void listener_resume(struct listener *l);

/* The bound address (tcp; port resolved for port 0). 0 or UV_EINVAL. */
int listener_address(const struct listener *l, struct policy_addr *a, uint16_t *port);

/* Closes the listener (removes a unix socket file it created, first, and
 * closes a held connection); done(arg), which may be NULL, is called from the
 * close callback. Idempotent: later calls do nothing; NULL is a no-op. */
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
    int v4mapped;            /* TCP to an IPv4 addr from an IPv6 socket (::ffff:a.b.c.d) */
    /* TCP: where the socket comes from; NULL: socket(). Else a new
     * non-blocking, close-on-exec stream socket of family (AF_INET or
     * AF_INET6), or a negative UV_E*: published ports (run/ports.c) dial
     * with sockets made in the sandbox's network namespace. */
    int (*make_socket)(void *arg, int family);
    void *make_socket_arg;
};

/* status 0: fd is connected (non-blocking, close-on-exec; TCP_NODELAY is left
 * to the consumer: relay_start() sets it), no longer watched by the loop, and
 * the caller owns it; index is the
 * target that connected. status < 0: every target failed; the error is the
 * most telling one seen (UV_ETIMEDOUT if any attempt timed out and none was
 * refused, else the last error other than a timeout: UV_ECONNREFUSED,
 * UV_ENOENT, UV_EAGAIN (unix listener backlog full), UV_ENETUNREACH, ...);
 * fd is -1 and index is n. Called exactly once unless dialer_cancel() ran
 * first; never from inside dialer_start(). After it returns the dialer
 * handle is invalid (it frees itself). */
typedef void (*dialer_cb)(void *arg, int status, int fd, size_t index);

/* Starts dialing targets[0..n) in order, each attempt bounded by timeout_ms
 * (> 0). The targets array is copied. 0 and *out set, or UV_EINVAL (n == 0,
 * timeout_ms == 0, a target with port 0, an address family other than 4/6,
 * or an empty or too long unix path), UV_ENOMEM; cb is not called then. */
int dialer_start(struct dialer **out, uv_loop_t *loop, const struct dialer_target *targets,
                 size_t n, unsigned timeout_ms, dialer_cb cb, void *arg);

/* One attempt, without waiting: a non-blocking, close-on-exec TCP socket
 * with connect() to target T started. The socket, with
 * *in_progress set when the handshake is still under way (poll() for
 * POLLOUT, then SO_ERROR), or a UV_* error when connect() failed at once. */
int dialer_connect_now(const struct dialer_target *t, int *in_progress);

/* As dialer_start(), except that a connection made at once (a loopback
 * target) is handed over here: 1 with *fd and *index set, the callback never
 * called and *out NULL. 0: under way, the callback will report it (also
 * when every target failed at once). < 0 as dialer_start(). */
int dialer_start_now(struct dialer **out, uv_loop_t *loop, const struct dialer_target *targets,
                     size_t n, unsigned timeout_ms, dialer_cb cb, void *arg, int *fd,
                     size_t *index);

/* Cancels a dial whose callback has not run: the callback will not run, any
 * socket is closed, memory is freed from a close callback (the loop must run
 * once more). NULL is a no-op. Must not be called after the callback ran. */
void dialer_cancel(struct dialer *d);

/* ------------------------------------------------------------------------ */
/* parent proxy (bridge/parent.c)                                            */
/*                                                                           */
/* A tunnel through network.parentProxy: connect to the parent (its name     */
/* resolved with resolver), CONNECT authority, wait for 2xx. Used by egress  */
/* after the policy and the guard allowed the destination.                   */

struct parent_dial;

/* status 0: fd is the tunnel (non-blocking, close-on-exec), the caller owns
 * it. status < 0: why says what failed (UV_ETIMEDOUT, UV_ECONNREFUSED, ...,
 * UV_EPROTO when the parent answered something other than 2xx). Called
 * once, never inside parent_dial_start(), unless cancelled first. */
typedef void (*parent_dial_cb)(void *arg, int status, int fd, const char *why);

int parent_dial_start(struct parent_dial **out, uv_loop_t *loop, struct resolver *resolver,
                      const struct policy_parent_proxy *pp, const char *authority,
                      unsigned timeout_ms, parent_dial_cb cb, void *arg);
/* authority NULL: plain HTTP, no CONNECT: fd is the connection to the parent
 * itself, for requests in absolute form (egress_outcome.parent_http). */
/* The callback will not run; the socket is closed. Not after the callback. */
void parent_dial_cancel(struct parent_dial *d);

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
/* done): idempotent, closes the three handles (and the splice path's two     */
/* poll handles, if it got that far), and on_closed(r) runs from the last     */
/* close callback, where the owner logs and frees.                            */
/* The owner never uv_close()s a, b or the timer itself, and leaves the       */
/* handles' data fields free for its own use (the relay uses container_of).  */
/*                                                                           */
/* Zero copy. Between two stream sockets on Linux the relay can move bytes    */
/* with splice(2), socket -> pipe -> socket, instead of reading them into a   */
/* buffer and writing them out (two copies per byte). r->splice says when:    */
/* RELAY_SPLICE_AUTO (the default) starts every relay on the copy path and    */
/* switches once the traffic looks like a bulk transfer (a read fills the     */
/* whole buffer, or RELAY_SPLICE_AFTER bytes went one way), so short          */
/* exchanges never pay for the pipes; RELAY_SPLICE_ALWAYS switches at         */
/* relay_start (tests, benchmarks); RELAY_SPLICE_OFF never. The switch waits  */
/* until nothing the owner or the copy path queued is still unwritten. The    */
/* environment variable SLUICE_SPLICE=off|auto|always sets the default that   */
/* relay_init() puts in r->splice (read once per thread). The same water      */
/* marks, half-close and error ends apply on both paths; a splice(2) that     */
/* fails with EINVAL, ENOSYS or EPERM (unsupported socket type, seccomp)      */
/* moves the relay back to the copy path without losing a byte.             */

enum relay_kind { RELAY_TCP = 0, RELAY_PIPE = 1 };

#define RELAY_READ_SIZE (64 * 1024)
#define RELAY_HIGH_WATER (256 * 1024)
#define RELAY_LOW_WATER (64 * 1024)
#define RELAY_SPLICE_AFTER (512 * 1024) /* AUTO: bytes one way before splicing */

/* How a relay moves bytes (see "Zero copy" above). */
enum relay_splice_mode {
    RELAY_SPLICE_OFF = 0, /* always read into a buffer and write it out */
    RELAY_SPLICE_AUTO,    /* copy; splice(2) once the traffic is a bulk transfer */
    RELAY_SPLICE_ALWAYS,  /* splice(2) as soon as nothing queued is in the way */
};

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

/* A TCP or pipe stream handle, seen as each of its libuv types. */
union bridge_stream {
    uv_handle_t h;
    uv_stream_t s;
    uv_tcp_t tcp;
    uv_pipe_t pipe;
};

struct relay_side {
    union bridge_stream u;
    uv_shutdown_t shutdown_req;
    struct relay *r;
    uint64_t nread;        /* bytes read from this side and forwarded */
    unsigned eof : 1;      /* read EOF from this side */
    unsigned shut : 1;     /* shutdown of this side's write half completed */
    unsigned shutting : 1; /* shutdown requested */
    unsigned paused : 1;   /* reading stopped by backpressure */
    unsigned reading : 1;
    unsigned shut_due : 1; /* shutdown(2) waits for the timer (next loop iteration) */
    unsigned nodelay : 1;  /* the owner's: TCP_NODELAY is already on (listener_nodelay());
                              relay_start() does not set it again */
};

struct relay_splice; /* the splice path's state, private to relay.c */

struct relay {
    struct relay_side a, b;
    uv_timer_t timer;       /* idle timer once started; the owner's before */
    relay_closed_cb on_closed;
    void *data;             /* the owner's */
    uint64_t started_ms;    /* uv_now() at relay_init */
    uint64_t last_io_ms;
    uint64_t npauses;       /* times a side was paused by backpressure */
    uint64_t nspliced;      /* bytes read with splice(2) (included in a/b.nread) */
    enum relay_splice_mode splice; /* from relay_init; the owner may change it
                                      before relay_start */
    struct relay_splice *sp; /* NULL until the relay tries the splice path */
    unsigned idle_ms;
    int status;             /* 0 or the UV_E* that ended it */
    enum relay_end end;
    unsigned pending_close;
    unsigned closing : 1;
    unsigned started : 1;
    unsigned b_open : 1;
    unsigned want_splice : 1; /* switch to splicing at the next chance */
};

/* Initialises the three handles (a and b of the given kinds, the timer), and
 * r->splice to the default (SLUICE_SPLICE, else RELAY_SPLICE_AUTO). */
void relay_init(uv_loop_t *loop, struct relay *r, enum relay_kind a, enum relay_kind b,
                relay_closed_cb on_closed, void *data);

/* Adopts a connected socket fd as b (uv_tcp_open / uv_pipe_open). On error the
 * fd is closed. 0 or UV_E* (UV_EINVAL if b is already open or the relay is
 * closing; UV_EEXIST if the loop still watches fd). */
int relay_open_b(struct relay *r, int fd);

/* Starts splicing; the owner must have stopped its own use of the timer
 * (the relay takes the timer over). The owner may leave a reading: the relay
 * takes the stream over as it is (its read callbacks replace the owner's),
 * which spares libuv the two epoll_ctl calls of a uv_read_stop() +
 * uv_read_start() pair; nothing read before belongs to the relay. Writes the
 * owner queued before still go first (libuv keeps write order; the splice
 * path starts only once they are written). From then on the owner does not
 * read, write or shut down a or b itself (on the splice path libuv's own I/O
 * on them stays off); asking for their fd or peer name is fine. TCP sides
 * get TCP_NODELAY here, unless their nodelay bit says they have it already.
 * idle_ms 0 = no idle timeout. 0 or UV_E* (UV_EALREADY if started before,
 * UV_EINVAL if closing, or uv_read_start's error; then the owner calls
 * relay_close). */
int relay_start(struct relay *r, unsigned idle_ms);

/* Ends the relay (idempotent: only the first call counts, on_closed runs
 * once). status 0 or UV_E*; when called by the owner the end is
 * RELAY_END_OWNER unless the relay already recorded one, or RELAY_END_NONE
 * if relay_start() was never called. Callable before relay_start() (b never
 * opened is fine) and from any callback; on_closed never runs inside it.
 * Pending writes and shutdowns are cancelled. */
void relay_close(struct relay *r, int status);

/* For the owner, before and after relay_start(): the client (a) and the
 * upstream (b) streams, to read, write and shut down before the relay
 * starts (the handles' data fields are the owner's); the bytes forwarded
 * each way (a's and b's nread, added to *up and *down); bytes the owner
 * forwarded client -> upstream itself, counted as the relay's; a's TCP
 * nodelay already on (listener_nodelay()), so relay_start() does not set
 * it again. */
uv_stream_t *relay_client(struct relay *r);
uv_stream_t *relay_upstream(struct relay *r);
void relay_bytes(const struct relay *r, uint64_t *up, uint64_t *down);
void relay_count_up(struct relay *r, uint64_t n);
void relay_client_nodelay(struct relay *r);

/* "done", "idle timeout", "client error", "upstream error", "closed", and
 * "none" for RELAY_END_NONE. */
const char *relay_end_str(enum relay_end e);

/* How the relay ended, for a log line: relay_end_str(), followed by ": " and
 * the error name when an error ended it ("client error: ECONNRESET"). */
const char *relay_end_text(const struct relay *r, char *buf, size_t len);

/* Relays keep a few 64 KiB buffers and empty pipes per thread for the next
 * connections. This frees the calling thread's (call it at exit, after the
 * loop closed, so leak checkers see nothing); later relays refill them. */
void relay_release_caches(void);

/* Testing only: the nth splice(2) the calling thread makes from now on (1 =
 * the next one) fails with errno err, as an unsupporting kernel or a seccomp
 * filter would make it. Also forgets an earlier "splice does not work here"
 * verdict of this thread. relay_test_fail_splice(0, 0) injects nothing. */
void relay_test_fail_splice(unsigned nth, int err);

/* Bulk bytes through splice(2) outside a relay (the HTTP front end's
 * response bodies, proxy/http_splice.c), on the relays' terms: a pipe from
 * this thread's pool (relay_pipe_take: 0, or UV_ENOSYS once splice() has
 * failed as unsupported on this thread or is not built, or a pipe2 error;
 * relay_pipe_give: pooled again when nothing is parked in it, else closed);
 * relay_splice_io: one non-blocking splice(2), which notes an unsupported
 * one for the thread and takes relay_test_fail_splice's injections. The
 * mode SLUICE_SPLICE sets for this thread: relay_splice_default. */
struct relay_pipe_ends {
    int r, w;   /* read and write ends */
    size_t cap; /* bytes it holds at most */
};
int relay_pipe_take(struct relay_pipe_ends *p);
void relay_pipe_give(struct relay_pipe_ends *p, size_t parked);
ssize_t relay_splice_io(int in, int out, size_t len);
enum relay_splice_mode relay_splice_default(void);

/* ------------------------------------------------------------------------ */
/* egress (bridge/egress.c)                                                  */
/*                                                                           */
/* The path every front end (HTTP CONNECT, absolute-form HTTP, SOCKS5) takes */
/* from a requested, normalised host:port to a connected upstream socket:    */
/*   1. policy_decide on the canonical host (never the raw bytes): the one   */
/*      rule match of the request, kept and carried through 2-4;             */
/*   2. no rule decides: the ask broker (if any), else deny;                 */
/*   3. a name: one DNS lookup; an IP literal: no lookup;                    */
/*   4. policy_verdict_finish: the match with every answer, through the      */
/*      guard; only the answers it marks dialable are kept;                  */
/*   5. the dialer over those, in order, each with the dial timeout.         */
/* Nothing is resolved or dialed for a denied target. In report mode         */
/* (network.mode "report") what would be denied is allowed and flagged       */
/* would_deny; the guard still never dials the proxy's own listeners, this   */
/* host's addresses or the unspecified address.                              */

struct egress_env;
struct egress_req;

enum egress_result {
    EGRESS_CONNECTED = 0, /* fd is connected; the caller owns it */
    EGRESS_DENIED,        /* policy, ask or guard (403, SOCKS 0x02) */
    EGRESS_DNS_FAILED,    /* NXDOMAIN, no address, server failure (502, SOCKS 0x04) */
    EGRESS_DNS_TIMEOUT,   /* (504, SOCKS 0x06) */
    EGRESS_REFUSED,       /* every address refused the connection (502, SOCKS 0x05) */
    EGRESS_UNREACHABLE,   /* network/host unreachable, reset (502, SOCKS 0x04) */
    EGRESS_DIAL_TIMEOUT,  /* (504, SOCKS 0x06) */
    EGRESS_ERROR,         /* out of memory or another local failure (502, SOCKS 0x01) */
};

/* Which step decided a denial. */
enum egress_stage {
    EGRESS_BY_POLICY = 0, /* a rule, an address class, strictAllowlist, no rule and no handler */
    EGRESS_BY_ASK,        /* the ask handler's answer, its timeout or the pending-asks limit */
    EGRESS_BY_GUARD,      /* every resolved address was refused */
};

struct egress_outcome {
    enum egress_result result;
    enum egress_stage stage;  /* meaningful for EGRESS_DENIED; how far it got otherwise */
    int status;               /* UV_E* behind DNS/dial failures, else 0 */
    int asked;                /* the ask handler was consulted (or its cache) */
    int would_deny;           /* report mode: allowed, but enforce mode would deny */
    const char *verdict;      /* "allow", "deny", "would_deny" */
    char rule[512];           /* "" or: 'PATTERN' LIST[INDEX] (policy_rule_format) */
    char source[300];         /* "" or where that rule is written: FILE:LINE */
    char reason[400];         /* one line, printable ASCII: why denied / what failed */
    char hint[400];           /* EGRESS_DENIED: what to change in the settings to allow it
                                 (policy_deny_hint), one line; else "" */
    size_t naddrs;            /* addresses the name resolved to */
    struct policy_addr addr;  /* dialed (EGRESS_CONNECTED, or the last tried) */
    int have_addr;
    int fd;                   /* EGRESS_CONNECTED only, else -1 */
    /* EGRESS_CONNECTED for protocol "http" through network.parentProxy: fd
     * is connected to the parent itself (no CONNECT), so requests go to it
     * in absolute form, with parent_auth ("Basic ...", or "") as their
     * Proxy-Authorization */
    int parent_http;
    char parent_auth[400];
    /* how long each step took (ns), for latency histograms; a step not
     * taken has its EGRESS_TIMED_* bit clear in timed */
    unsigned timed;
    uint64_t ask_ns, dns_ns, dial_ns, total_ns;
};
#define EGRESS_TIMED_ASK 1u
#define EGRESS_TIMED_DNS 2u
#define EGRESS_TIMED_DIAL 4u

/* Called exactly once per started request that was not cancelled, possibly
 * before egress_start() returns (denied by a rule, an IP literal refused,
 * ...): the caller sets its state first and forgets *req in the callback.
 * The outcome is valid during the call only. */
typedef void (*egress_cb)(void *arg, const struct egress_outcome *o);

/* An observer sees every outcome just before the request's callback (for
 * metrics); NULL removes it. */
void egress_env_set_observer(struct egress_env *e, egress_cb fn, void *ctx);

/* The shared context of a server. policy: the compiled policy (the env takes
 * ownership). resolver and ask (may be NULL) stay the caller's. */
int egress_env_new(struct egress_env **out, uv_loop_t *loop, struct policy *policy,
                   struct resolver *resolver, struct ask_broker *ask, unsigned dial_timeout_ms);

/* Replaces the policy (SIGHUP reload) for requests started from now on;
 * requests in flight keep the one they started with, freed when the last of
 * them ends. Takes ownership of policy. */
void egress_env_set_policy(struct egress_env *e, struct policy *policy);
const struct policy *egress_env_policy(const struct egress_env *e);
/* The env's resolver (SOCKS5 UDP ASSOCIATE resolves names in datagrams
 * with it and judges the answers itself). */
struct resolver *egress_env_resolver(const struct egress_env *e);

/* Frees the env; requests must have ended or been cancelled. */
void egress_env_free(struct egress_env *e);

/* Starts a request for host:port on behalf of client ("127.0.0.1:4242",
 * "unix", ...). protocol: "connect", "http" or "socks5". 0 when cb will be
 * called, or UV_ENOMEM (cb not called). */
int egress_start(struct egress_env *e, const struct policy_host *host, uint16_t port,
                 const char *protocol, const char *client, egress_cb cb, void *arg,
                 struct egress_req **req);

/* egress_start for one request sluice can read (a plain-HTTP request):
 * rq (used during the call only) goes into the rule decision, so request
 * rules (network.requestRules) judge it. egress_start is this with no
 * request: a connection whose requests sluice cannot read, which request
 * rules refuse on a host they name. */
int egress_start_request(struct egress_env *e, const struct policy_host *host, uint16_t port,
                         const struct policy_request *rq, const char *protocol, const char *client,
                         egress_cb cb, void *arg, struct egress_req **req);

/* How egress_start_dial() dials (transparent mode's connect()), flags:
 * EGRESS_DIAL_SYNC     a connection made at once (a loopback origin) is
 *                      reported before egress_start_dial() returns, without
 *                      a turn of the loop;
 * EGRESS_DIAL_V6SOCKET the socket is an IPv6 one, as the caller's is: an
 *                      IPv4 address is dialed as ::ffff:a.b.c.d (the
 *                      outcome's addr stays the IPv4 one).
 * Without flags, as egress_start(). Either way the outcome's socket is connected: a socket whose handshake is
 * still under way is never handed out (transparent mode gives it to the
 * command, which could shutdown() it back to unconnected and aim it
 * elsewhere from the host's namespace, with sendto(MSG_FASTOPEN)).
 * A parent proxy (network.parentProxy) is dialed as by egress_start(). */
#define EGRESS_DIAL_SYNC 1u
#define EGRESS_DIAL_V6SOCKET 2u
int egress_start_dial(struct egress_env *e, const struct policy_host *host, uint16_t port,
                      const char *protocol, const char *client, unsigned how, egress_cb cb,
                      void *arg, struct egress_req **req);

/* The caller is closing: cb will not be called; a pending lookup or ask is
 * detached, a dial in progress is cancelled (its socket closed). NULL is a
 * no-op. */
void egress_cancel(struct egress_req *req);

/* Requests started and not yet ended (for drain and metrics). */
size_t egress_inflight(const struct egress_env *e);

/* "connected", "denied", "dns failed", ... */
const char *egress_result_str(enum egress_result r);

/* ------------------------------------------------------------------------ */
/* front ends (bridge/frontend.c): what HTTP, SOCKS5, the bridge forwarder  */
/* and transparent mode share                                               */
/*                                                                           */
/* A struct frontend is one proxy service's configuration plus its live      */
/* connections (for limits, drain and shutdown). Each connection embeds a    */
/* struct frontend_conn, registered while it lives. Connections report to   */
/* the frontend's log callback: one DECISION record per request (when the   */
/* egress outcome is known) and one CLOSE record per connection.            */

enum connlog_event { CONNLOG_DECISION = 0, CONNLOG_CLOSE };

struct connlog {
    enum connlog_event event;
    uint64_t id;
    const char *client;   /* "127.0.0.1:40000", "[::1]:40000", "unix" */
    const char *protocol; /* "socks5", "connect", "http" */
    const char *host;     /* canonical host, or NULL when none was parsed */
    uint16_t port;
    const char *verdict;  /* "allow", "deny", "would_deny", or NULL */
    const char *rule;     /* "" or the deciding rule */
    const char *reason;   /* "" or one line */
    const char *addr;     /* "" or the address dialed */
    int code;             /* HTTP status / SOCKS reply code sent, -1 none */
    uint64_t bytes_up;    /* client -> upstream (CLOSE) */
    uint64_t bytes_down;  /* upstream -> client (CLOSE) */
    uint64_t duration_ms; /* since accept (CLOSE) */
    const char *end;      /* how it ended (CLOSE) */
    const char *source;   /* NULL or where the deciding rule is written */
    const char *method;   /* plain HTTP: the request method, else NULL */
    const char *url;      /* plain HTTP: the URL without its query, else NULL */
    int terminated;       /* a CONNECT terminated by sluice, or a request inside one */
    const char *hint;     /* a denial: what to change in the settings to allow it, or NULL */
    const char *secret_placeholder; /* credential names (never values) whose placeholder the
                                       request carried to another host, or NULL */
    const char *credential_header; /* credentials.headers entries (never values) the request
                                      was given or refused for ("headers[0]:Authorization"),
                                      or NULL */
};

typedef void (*connlog_fn)(void *ctx, const struct connlog *rec);

/* The base of every front-end connection (HTTP, SOCKS5, the forwarder;
 * transparent mode's connect() takes the id and log parts): its place in the
 * frontend's list, its id, peer name and start time, its own timer (the
 * head, handshake, keep-alive and linger timer: the relay's timer is the
 * relay's), the fields of its log records, emitting them, and the last
 * steps of its close. The owner embeds it, calls frontend_conn_start() at
 * accept, frontend_conn_timer_close() when the relay takes over or the
 * connection closes, and frontend_conn_relay_closed() from its relay's
 * close callback; release() then frees the owner's struct. */
struct frontend_conn {
    struct frontend_conn *prev, *next;
    struct frontend *f;
    void (*force_close)(struct frontend_conn *c); /* drain timeout / shutdown */
    /* bytes relayed so far each way, for metrics while it is open and the
     * close record; may be NULL (then 0) */
    void (*bytes)(const struct frontend_conn *c, uint64_t *up, uint64_t *down);
    void (*release)(struct frontend_conn *c); /* frees the owner's struct */
    /* The front end's own timer, before the relay starts: a heap handle
     * (timer->data is this struct), freed once closed, so that an idle
     * tunnel does not carry it. */
    uv_timer_t *timer;
    uint64_t id;
    uint64_t started_ms; /* uv_now() at accept */
    char client[48];     /* the peer: "127.0.0.1:40000", "[::1]:40000", "unix", "-" */
    /* the log fields, about the last request (struct connlog) */
    const char *protocol; /* static text */
    const char *host;     /* the owner's text, or NULL when none was parsed */
    uint16_t port;
    char verdict[12];             /* "" or the egress verdict */
    struct policy_addr addr;      /* the address dialed; family 0: none */
    int code;                     /* status / reply code sent, -1 none */
    char *rule, *source, *reason; /* NULL or heap copies */
    const char *end;              /* how it ended: static text or end_own */
    char *end_own;                /* NULL or a heap copy (frontend_conn_end_fmt) */
    char *method;                 /* plain HTTP only; NULL or a heap copy */
    char *url;                    /* plain HTTP only; NULL or a heap copy */
    unsigned terminated : 1;      /* TLS terminated here (connlog.terminated) */
    char *hint;                   /* a denial's hint; NULL or a heap copy */
    char *secret; /* credentials whose placeholder went elsewhere; NULL or a heap copy */
    char *cred_header; /* credentials.headers entries of the request; NULL or a heap copy */
    unsigned timer_closing : 1, timer_closed : 1, relay_closed : 1;
};

struct frontend_tls_adopt;

struct frontend {
    uv_loop_t *loop;
    struct egress_env *egress;
    const char *auth_user; /* NULL: no proxy authentication */
    const char *auth_pass;
    unsigned handshake_timeout_ms;
    unsigned head_timeout_ms;
    unsigned idle_timeout_ms; /* 0 = none */
    unsigned max_head_bytes;
    size_t max_conns;         /* beyond it new connections are refused quickly */
    connlog_fn log;
    void *log_ctx;
    void (*conn_ended)(struct frontend *f); /* after a connection is freed, may be NULL */
    void *data;                             /* the owner's */
    struct frontend_conn conns;             /* circular list head */
    size_t nconns;
    uint64_t *next_id; /* shared id counter (several front ends, one log) */
    /* Drain (SIGTERM): set by the owner; front ends that keep connections
     * between requests close them after the current answer (HTTP:
     * http_frontend_drain() also closes the idle ones at once). */
    int draining;
    /* HTTP only: an origin-form "GET <health_path>" on the proxy port is
     * answered 200 "ok" (503 while draining) instead of 400; NULL: none. */
    const char *health_path;
    /* Debug lines (each connection's state and phase transitions, from
     * frontend_conn_debug()), one line without newline; NULL: none (the
     * default). */
    void (*debug)(void *ctx, const char *line);
    void *debug_ctx;
    /* network.tlsTerminate for a front end that does not terminate itself
     * (SOCKS5): the owner takes an allowed, dialed tunnel to be terminated
     * (struct frontend_tls_adopt). 0: taken; UV_EBUSY: maxTunnels reached;
     * other < 0: not available. On < 0 nothing is taken or written. NULL:
     * no termination here (such a tunnel is refused: fail closed). */
    int (*tls_adopt)(struct frontend *f, const struct frontend_tls_adopt *a);
    /* SOCKS5 only: 1 when UDP ASSOCIATE is served (socks/udp.c); 0 refuses
     * it with 0x07. The relay socket must live in the client's network
     * namespace: sluice proxy makes it itself (udp_socket NULL); sluice run
     * gets one made in the sandbox's namespace from udp_socket (a UDP
     * socket of family AF_INET/AF_INET6, unbound; or < 0). */
    int udp_associate;
    int (*udp_socket)(void *ctx, int family);
    void *udp_ctx;
};

/* A tunnel handed to TLS termination (frontend.tls_adopt). */
struct frontend_tls_adopt {
    int client_fd, up_fd;            /* both taken on success */
    const struct policy_host *host;  /* the judged target: the leaf's name */
    uint16_t port;
    struct policy_addr addr;         /* up_fd's peer (the decision's address) */
    const char *client;              /* the peer, for the log */
    const char *protocol;            /* for the log ("socks5") */
    const char *reply;               /* written to the client first (the success reply) */
    size_t reply_len;
    const uint8_t *early;            /* client bytes read after the request */
    size_t early_len;
};

void frontend_init(struct frontend *f, uv_loop_t *loop, uint64_t *next_id);

struct egress_outcome;
struct relay;

/* Registers c (zeroed, its callbacks set) with f: the timer allocated and
 * initialised, then as frontend_conn_begin(). UV_ENOMEM: nothing was done
 * (c is not registered; the owner frees it). */
int frontend_conn_start(struct frontend *f, struct frontend_conn *c, const char *protocol);
/* The connection that owns a front-end timer (in its callback). */
static inline struct frontend_conn *frontend_conn_of_timer(uv_timer_t *t)
{
    return t->data;
}
/* For a connection without a client stream of its own (transparent mode's
 * connect()): c (zeroed) gets f, the next id (0 when f has no counter), the
 * start time, protocol and code -1; no timer, not in f's list, no CLOSE
 * record. The owner calls frontend_conn_clear() when it is done with c. */
void frontend_conn_begin(struct frontend *f, struct frontend_conn *c, const char *protocol);
/* Frees the log fields' heap copies (rule, source, reason, method, url,
 * end). */
void frontend_conn_clear(struct frontend_conn *c);
/* *dst becomes a heap copy of s, or NULL for NULL or "" (or no memory). */
void frontend_conn_set_text(char **dst, const char *s);
/* c->end becomes the formatted text (a heap copy; a fixed text when there
 * is no memory); returns it. */
const char *frontend_conn_end_fmt(struct frontend_conn *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The verdict, rule, source, reason and address of an egress outcome. */
void frontend_conn_note(struct frontend_conn *c, const struct egress_outcome *o);
/* Sends one record of the connection to the frontend's log (if any). */
void frontend_conn_emit(struct frontend_conn *c, enum connlog_event ev);
/* A debug line "conn ID PROTOCOL: ..." to the frontend's debug hook, when
 * there is one (nothing is formatted otherwise). */
void frontend_conn_debug(const struct frontend_conn *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Starts the connection's timer (one shot, ms from now), or stops it for
 * cb NULL; nothing once the timer is closing. */
void frontend_conn_timer_set(struct frontend_conn *c, uv_timer_cb cb, uint64_t ms);
/* Closes the connection's timer (idempotent). */
void frontend_conn_timer_close(struct frontend_conn *c);
/* From the relay's close callback: notes how the relay ended, closes the
 * timer; once both are closed: the CLOSE record, removal from the list,
 * release(), then the frontend's conn_ended. */
void frontend_conn_relay_closed(struct frontend_conn *c, const struct relay *r);
void frontend_add(struct frontend *f, struct frontend_conn *c);
void frontend_remove(struct frontend *f, struct frontend_conn *c);
/* Adds the bytes relayed so far by every live connection to *up and *down. */
void frontend_bytes(const struct frontend *f, uint64_t *up, uint64_t *down);
/* Calls force_close on every live connection (they end asynchronously). */
void frontend_close_all(struct frontend *f);
/* Constant-time comparison of a secret: 1 when equal (same length, same
 * bytes), else 0. The time depends only on max(alen, blen), never on where
 * the bytes differ nor on whether the lengths differ. NULL is fine with
 * length 0. */
int frontend_secret_equal(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen);

/* 1 when the credentials match the configured ones (constant time). */
int frontend_auth_ok(const struct frontend *f, const uint8_t *user, size_t ulen,
                     const uint8_t *pass, size_t plen);

/* ------------------------------------------------------------------------ */
/* The ask broker on a loop (bridge/ask_timer.c)                             */
/*                                                                           */
/* The broker (policy/ask.c) has no event loop; this gives it uv_now() as    */
/* its clock and one uv_timer_t for its next deadline.                       */

/* A broker on loop. 0, UV_EINVAL (timeout_ms or max_pending 0), UV_ENOMEM. */
int ask_broker_new(struct ask_broker **out, uv_loop_t *loop, unsigned timeout_ms,
                   size_t max_pending);

/* Closes the broker: the handler's withdraw is called for each question and
 * every waiter gets a deny ("sluice is shutting down") from inside this
 * call; done(arg) runs from the timer's close callback; b is then freed.
 * Idempotent. May be called from any waiter callback or handler call. */
void ask_broker_close(struct ask_broker *b, void (*done)(void *arg), void *arg);

/* ------------------------------------------------------------------------ */
/* ask handlers (bridge/ask_handler.c)                                       */
/*                                                                           */
/* The three built-in handlers behind the broker's C API (policy.h). The     */
/* question is always the JSON object                                        */
/*   {"id":N,"host":"example.com","port":443,"protocol":"connect",           */
/*    "client":"127.0.0.1:40000"}                                            */
/* (compact, ASCII, keys in this order). An answer line is a decision word:  */
/* allow, deny, allow-session, deny-session (exact, lower-case), optionally  */
/* followed by one space and a reason; or a JSON object                      */
/* {"decision":..,"reason":..} ("reason" optional string or null; "id"       */
/* optional for exec, where it must then be the question's id, and required  */
/* for socket). A trailing CR is ignored.                                    */
/*                                                                           */
/*   tty           prompt on /dev/tty, one question at a time (others queue):*/
/*                 "sluice: allow a connection to HOST:PORT from CLIENT      */
/*                 (PROTOCOL)? [y]es once, [n]o, [a]lways, [N]ever: ";       */
/*                 y/Y/yes allow, n/no deny, a/A/always allow-session,       */
/*                 N/never deny-session; anything else asks again (3 tries,  */
/*                 then deny; an empty line is not counted); ^D denies.      */
/*                 Input typed before a prompt is discarded. The terminal is */
/*                 read only while a prompt is up. A question that times out */
/*                 prints "timed out, denied". No tty: one warning on stderr */
/*                 at open, every question denied ("no terminal to ask on    */
/*                 (--ask tty)").                                            */
/*   exec:PROGRAM  run PROGRAM (argv {PROGRAM}, no shell; a name without '/' */
/*                 is looked up in PATH) per question, at most 16 at once    */
/*                 (others queue); the question line on stdin, then EOF;     */
/*                 stderr is sluice's. The answer is the first line of       */
/*                 stdout (newline or EOF ends it, at most 4096 bytes; later */
/*                 output is ignored), taken when the program has exited     */
/*                 with status 0. A non-zero status or a signal denies       */
/*                 whatever it printed; no line, a malformed or an overlong  */
/*                 one denies. A question that times out SIGKILLs the program*/
/*                 (not its children: wrapper scripts should exec) and reaps */
/*                 it.                                                       */
/*   socket:PATH   JSON lines on a Unix stream socket to a supervising       */
/*                 program: sends the question + "\n", reads answer objects  */
/*                 with "id", one per line (at most 64 KiB; blank lines are  */
/*                 ignored); an unknown id is ignored (it may have timed     */
/*                 out). Connected on the first question; a refused or lost  */
/*                 connection, a malformed line, or a write error denies     */
/*                 everything pending on it, and the next question connects  */
/*                 again.                                                    */
/*                                                                           */
/* The process must ignore SIGPIPE (a program that exits without reading, a  */
/* peer that hangs up).                                                      */

struct ask_handler;

/* Parses spec ("tty", "exec:PROGRAM", "socket:PATH") and installs the
 * handler on broker b. 0, or UV_EINVAL with *why set (bad spec, socket path
 * over 107 bytes), UV_ENOENT (exec: PROGRAM not found or not executable),
 * UV_ENOMEM. why may be NULL. */
int ask_handler_open(struct ask_handler **out, uv_loop_t *loop, const char *spec,
                     struct ask_broker *b, const char **why);

/* Closes the handler (kills and reaps running exec children, closes the
 * socket and tty); done(arg) from the last close callback, never from inside
 * this call. Idempotent. Close the broker first (its close withdraws every
 * question, so the handler never answers a freed broker); the handler never
 * calls the broker from here on. */
void ask_handler_close(struct ask_handler *h, void (*done)(void *arg), void *arg);

#endif /* SLUICE_BRIDGE_H */
