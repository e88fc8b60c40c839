/* bridge/forward.h - the forwarder: every connection accepted on its
 * listeners is relayed to one fixed endpoint (accept, dial, splice, close).
 * `sluice bridge` and `sluice run`'s relay to an external proxy
 * (network.httpProxyPort / socksProxyPort) both use it.
 *
 * Over the limit: the one rule of bridge/limit.h. With max_conns
 * connections live (dialing or relaying) the forwarder pauses every
 * listener it accepted from; further clients wait in the kernel backlog.
 * The first connection that ends below the limit resumes them. An
 * allocation failure at accept pauses likewise. A forwarder may instead
 * share its owner's limit (`sluice run`: one limit for the front ends and
 * the relays).
 *
 * A connection whose dial fails is closed cleanly: what the client already
 * sent is read and dropped and our write half is shut down first, so the
 * client sees an EOF rather than a reset, and the socket is closed when the
 * client closes its side or after FORWARD_LINGER_MS.
 *
 * Each connection is a front-end connection (struct frontend_conn: id,
 * peer, the log fields, the close) and ends with one log record (struct
 * connlog, event CLOSE: id, client, protocol "forward", host and port of
 * the target, bytes each way, duration, end). One loop; not thread-safe.
 */
#ifndef SLUICE_BRIDGE_FORWARD_H
#define SLUICE_BRIDGE_FORWARD_H

#include "bridge/bridge.h"
#include "bridge/limit.h"

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#define FORWARD_LINGER_MS 1000u /* how long a refused client gets to close first */

struct forward_opts {
    struct endpoint connect; /* ENDPOINT_TCP (an address, no name) or ENDPOINT_UNIX */
    unsigned max_conns;      /* > 0; unused with limit */
    struct conn_limit *limit; /* NULL: the forwarder's own, of max_conns; else the
                                 owner's, told of every connection that ends */
    unsigned idle_ms;        /* 0: no idle timeout */
    unsigned connect_ms;     /* dial timeout, > 0 */
    connlog_fn log;          /* per closed connection; may be NULL */
    void *log_ctx;
    uint64_t *next_id; /* shared id counter; NULL: the forwarder's own */
    const char *protocol; /* the log records' protocol; NULL: "forward" */
    /* TCP: the dialer's socket source (struct dialer_target); NULL: socket() */
    int (*make_socket)(void *arg, int family);
    void *make_socket_arg;
};

struct forwarder;

/* 0, UV_EINVAL (bad options), UV_ENOMEM. */
int forwarder_new(struct forwarder **out, uv_loop_t *loop, const struct forward_opts *o);

/* From a listener's accept callback: accepts one connection from l and
 * relays it. Pauses l (and the others) at the limit. */
void forwarder_accept(struct forwarder *f, struct listener *l);

/* Connections live now (dialing, relaying or lingering). */
size_t forwarder_live(const struct forwarder *f);

/* Stops: cancels dials, closes every connection (their records say "closed
 * at shutdown"); f is freed once the last handle has closed, then done(arg)
 * runs (may be NULL). The listeners are the caller's to close. */
void forwarder_close(struct forwarder *f, void (*done)(void *), void *arg);

/* ------------------------------------------------------------------------ */
/* `sluice bridge`: one listener, one forwarder, SIGINT/SIGTERM stop.        */

struct forward_cmd {
    struct endpoint listen;
    struct forward_opts fwd;
    int quiet; /* no start-up line, no shutdown line */
};

/* Serves until SIGINT/SIGTERM has closed everything. The exit status: 0
 * after a signal, 1 when LISTEN cannot be opened or handles were left. */
int forward_cmd_run(struct forward_cmd *cmd);

#endif
