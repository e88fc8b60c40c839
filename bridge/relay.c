/* bridge/relay.c - moves bytes between two libuv streams (TCP or unix
 * socket, any mix) with backpressure, half-close and an idle timeout
 * (style.md R5, R8, R9), through a buffer (the copy path) or, between two
 * stream sockets on Linux, with splice(2) through a pipe (the splice path).
 *
 * Two paths. A relay starts on the copy path, where libuv reads into a
 * buffer and the relay writes it out: simple, and cheap for short exchanges.
 * Every byte is copied twice (kernel -> buffer -> kernel), which caps bulk
 * transfers, so once the traffic looks like one (r->splice == AUTO: a read
 * filled the whole buffer, or RELAY_SPLICE_AFTER bytes went one way; ALWAYS:
 * at relay_start) the relay switches to the splice path for good. The switch
 * waits for a moment when neither stream has a queued write (the owner's
 * included: they must reach the socket before anything spliced) or a pending
 * shutdown. A switch that cannot be set up (no pipe, not a stream socket)
 * leaves the relay on the copy path.
 *
 * Copy path.
 *   Buffers. Each read gets a struct relay_buf: 64 KiB of data plus the
 *   uv_write_t that carries it when the peer cannot take it at once. One
 *   allocation per buffer; the buffer goes back to a small per-thread
 *   freelist as soon as it is no longer needed (on the uv_try_write fast
 *   path that is still inside the read callback), so a steady stream, or a
 *   stream of short connections, does not call malloc at all.
 *   relay_release_caches() empties it at exit.
 *   Writes. uv_try_write() first (it returns UV_EAGAIN by itself while
 *   earlier writes are queued, so order is kept, including writes the owner
 *   queued before relay_start); whatever it did not take is queued with
 *   uv_write(), and that request owns the buffer until on_write() puts it
 *   back. After queueing, a source whose peer holds more than
 *   RELAY_HIGH_WATER unwritten bytes stops reading (R8); the peer's write
 *   callback restarts it once the queue is below RELAY_LOW_WATER. A pause
 *   always has a queued write behind it, so a write callback is always
 *   coming to resume it.
 *
 * Splice path.
 *   Descriptors. libuv allows one watcher per fd, and the streams' own
 *   watchers must stay out of the way, so the relay stops reading both
 *   streams (and never calls uv_read_start, uv_write, uv_try_write or
 *   uv_shutdown on them again), dup()s their sockets and watches the
 *   duplicates with one uv_poll_t each. The streams stay open (the owner may
 *   still ask for their fd or peer name) and are closed as usual; each
 *   duplicate is closed in its poll handle's close callback, once. (libuv
 *   leaves a stopped stream's fd in epoll until its next event, then drops
 *   it: one epoll_ctl, no callback.)
 *   Pipes. One per direction (a -> b, b -> a), O_NONBLOCK, grown to
 *   RELAY_PIPE_SIZE with F_SETPIPE_SZ (the kernel may give less). Empty
 *   pipes go back to a small per-thread pool when the relay ends.
 *   Moving bytes (dir_pump). splice(source -> pipe), then splice(pipe ->
 *   destination), both SPLICE_F_NONBLOCK | SPLICE_F_MOVE, repeated while the
 *   source has data (RELAY_PUMP_ROUNDS at most per event, for fairness).
 *   SPLICE_F_MORE is not used: it would let TCP hold back a partial segment
 *   with nothing to push it later. A source socket is watched for
 *   UV_READABLE while its direction may read, a destination for UV_WRITABLE
 *   while its pipe holds bytes it refused; uv_poll_start() costs an
 *   epoll_ctl pair in libuv 1.44, so the mask is only changed when it
 *   differs.
 *   Backpressure. Bytes parked in a pipe are queued bytes: a direction stops
 *   reading when its pipe is full (RELAY_PIPE_SIZE bytes parked, or the
 *   kernel refuses more: a pipe has a fixed number of slots, and small
 *   segments fill them before the bytes add up) and resumes once a splice
 *   out brought it to RELAY_LOW_WATER. splice() says EAGAIN both for "no
 *   data" and "pipe full"; with bytes parked, FIONREAD on the source tells
 *   them apart.
 *   Fallback. splice() failing with EINVAL, ENOSYS or EPERM means it does
 *   not work here (socket type, kernel, seccomp): the relay stops its poll
 *   handles, reads what the pipes hold into buffers and queues them on the
 *   destinations (ahead of anything newer), and goes on on the copy path;
 *   the thread does not try splicing again.
 *   Measured (tests/bench/bridge.sh, 2-CPU VM, Linux 6.18, medians): bulk
 *   through one connection +25-45% over the copy path pinned, unix->tcp,
 *   tcp->tcp and unix->unix alike, hence AUTO by default. Setting it up costs
 *   about 16 system calls (dup, poll handles, pipes), paid only by bulk
 *   transfers. A 1 MiB pipe or TCP_NOTSENT_LOWAT (against the loopback
 *   reordering that sending one flow from two CPUs causes) changed nothing
 *   measurable.
 *
 * Half-close (R9). EOF from a side stops reading it and shuts down the other
 * side's write half once everything read before the EOF is out: on the copy
 * path with uv_shutdown() when bytes are still queued (libuv flushes the
 * queue first), else with shutdown(2) from the relay's timer on the next
 * loop iteration (side_shutdown); with shutdown(2) once the pipe has drained
 * on the splice path. The relay is done when both sides have sent EOF and
 * both shutdowns have completed; the last FIN, when the timer would send it,
 * is left to close(2) (flush_shutdowns). An EOF with a socket error pending
 * (a reset that read() or splice() reported as 0) is an error end, not a
 * half-close.
 *
 * The timer. Idle timeout: reads and write completions only store uv_now()
 * in last_io_ms (no timer call per read). The timer is a one-shot armed for
 * last_io_ms + idle_ms; when it fires early because traffic moved the
 * deadline (or to send deferred FINs), it re-arms itself for the remainder.
 * An active relay therefore costs one timer callback per idle_ms, and an
 * idle one ends within one loop iteration of its deadline.
 *
 * System calls of a short connection (copy path, TCP both sides, a taken
 * over from its owner while reading, TCP_NODELAY inherited from the
 * listener on a): one setsockopt (TCP_NODELAY on b), one read and one write
 * per chunk each way, one read + getsockopt(SO_ERROR) per EOF, one
 * shutdown(2), and libuv's epoll_ctl ADD for b and DEL per socket at close
 * (plus one for a stopped socket that reports its EOF again).
 *
 * Teardown (R5). relay_close() is the single exit: it closes the three
 * handles, and the poll handles the splice path initialised, once each
 * (skipping any handle already closing) and counts their close callbacks;
 * the last one releases the pipes and the splice state and calls on_closed.
 * libuv runs a stream's cancelled write and shutdown callbacks (UV_ECANCELED)
 * before that stream's close callback, so they all run while the relay
 * memory is still valid; they free their buffer and return when r->closing is
 * set.
 *
 * Handles are mapped back to the relay with container_of (R6); handle->data
 * is left to the owner.
 */
/* splice(2), pipe2(2), F_SETPIPE_SZ and SPLICE_F_* are Linux extensions: the
 * project builds with _POSIX_C_SOURCE=200809L only, this file alone needs
 * more. Before any include. */
#define _GNU_SOURCE
#include "bridge/bridge.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#if defined(__linux__) && defined(SPLICE_F_NONBLOCK) && defined(F_SETPIPE_SZ)
#define RELAY_HAVE_SPLICE 1
#else
#define RELAY_HAVE_SPLICE 0
#endif

#include "common/common.h"

/* Always-on check for library calls that cannot fail (R13). */
#define RELAY_CHECK(expr)                                                                          \
    do {                                                                                           \
        if (!(expr))                                                                               \
            abort();                                                                               \
    } while (0)

/* Buffers kept for reuse per thread: enough for both directions of a few
 * busy relays; beyond that they go back to malloc. */
#define RELAY_FREELIST_MAX 8

/* Splice path: pipe size per direction (the queue cap, like
 * RELAY_HIGH_WATER on the copy path), empty pipes kept per thread, fills per
 * readiness event. */
#define RELAY_PIPE_SIZE RELAY_HIGH_WATER
#define RELAY_PIPE_POOL_MAX 8
#define RELAY_PUMP_ROUNDS 16

struct relay_buf {
    uv_write_t req;         /* when queued, owns this buffer until on_write */
    struct relay_side *dst; /* the side req writes to */
    struct relay_buf *next; /* freelist link */
    char data[RELAY_READ_SIZE];
};

/* Relays are used from one loop; loops may run on several threads, so the
 * caches are per thread. */
static _Thread_local struct relay_buf *free_bufs;
static _Thread_local unsigned nfree_bufs;

static struct relay_buf *buf_get(void)
{
    struct relay_buf *b = free_bufs;

    if (b != NULL) {
        free_bufs = b->next;
        nfree_bufs--;
        return b;
    }
    return malloc(sizeof(*b));
}

static void buf_put(struct relay_buf *b)
{
    if (nfree_bufs < RELAY_FREELIST_MAX) {
        b->next = free_bufs;
        free_bufs = b;
        nfree_bufs++;
    } else {
        free(b);
    }
}

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */

static struct relay_side *side_of(uv_stream_t *s)
{
    return container_of(s, struct relay_side, u.s);
}

static struct relay_side *peer_of(struct relay_side *s)
{
    return s == &s->r->a ? &s->r->b : &s->r->a;
}

static enum relay_end side_error(const struct relay_side *s)
{
    return s == &s->r->a ? RELAY_END_A_ERROR : RELAY_END_B_ERROR;
}

/* Records how the relay ended (the first reason wins) and closes it. */
static void relay_end(struct relay *r, enum relay_end end, int status)
{
    if (r->closing)
        return;
    r->end = end;
    relay_close(r, status);
}

static void check_done(struct relay *r)
{
    if (r->a.eof && r->b.eof && r->a.shut && r->b.shut)
        relay_end(r, RELAY_END_DONE, 0);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);
static void on_shutdown(uv_shutdown_t *req, int status);
static int splice_begin(struct relay *r);
static int splice_active(const struct relay *r);
static void close_done(struct relay *r);
static void close_handle(struct relay *r, uv_handle_t *h, uv_close_cb cb);

/* Starts (or resumes) reading s into relay buffers. A stream the owner left
 * reading when it called relay_start() (UV_EALREADY since libuv 1.38) is
 * taken over by swapping its callbacks: alloc_cb and read_cb are public
 * fields of uv_stream_t that libuv reads before every read. A uv_read_stop()
 * + uv_read_start() pair instead would cost two epoll_ctl calls in libuv
 * 1.44 (it forgets that a stopped fd is still registered, so the restart's
 * ADD fails with EEXIST and is retried as a MOD). */
static int side_read_start(struct relay_side *s)
{
    int rc = uv_read_start(&s->u.s, on_alloc, on_read);

    if (rc == UV_EALREADY) {
        s->u.s.alloc_cb = on_alloc;
        s->u.s.read_cb = on_read;
        rc = 0;
    }
    if (rc == 0)
        s->reading = 1;
    return rc;
}

/* The socket error pending on s, 0 if none. Linux can report a TCP reset as
 * EOF: read() returns 0 while SO_ERROR still holds ECONNRESET (seen on 6.18
 * when the RST arrives while data queued before it is still unread; see
 * test_reset_while_paused_then_resume). */
static int side_pending_error(struct relay_side *s)
{
    uv_os_fd_t fd;
    socklen_t len = sizeof(int);
    int soerr = 0;

    if (uv_fileno(&s->u.h, &fd) != 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0)
        return 0;
    return soerr != 0 ? uv_translate_sys_error(soerr) : 0;
}

static void on_timer(uv_timer_t *t);

/* Copy path: half-closes dst once what is queued for it is written (R9).
 * With bytes queued, uv_shutdown() waits for them. With nothing queued (the
 * usual case) the relay calls shutdown(2) itself from its timer, started at
 * 0 ms, i.e. on the next loop iteration: uv_shutdown() would send the FIN
 * at the same moment (from libuv's pending queue) but then re-arms the
 * stream's epoll registration for nothing (one epoll_ctl per FIN in libuv
 * 1.44). Not right here: a shutdown(2) inside this callback measured 15-20%
 * fewer short connections per second, because the FIN (and the peer's
 * wakeup) then comes before the next connection's accept and connect, which
 * the same event batch usually holds. When that FIN is the last thing the
 * relay waits for, it is not sent with shutdown(2) at all: see
 * flush_shutdowns(). */
static void side_shutdown(struct relay *r, struct relay_side *dst)
{
    int rc;

    dst->shutting = 1;
    if (uv_stream_get_write_queue_size(&dst->u.s) == 0) {
        dst->shut_due = 1;
        uv_timer_start(&r->timer, on_timer, 0, 0);
        return;
    }
    rc = uv_shutdown(&dst->shutdown_req, &dst->u.s, on_shutdown);
    if (rc < 0)
        relay_end(r, side_error(dst), rc);
}

/* Moves the relay to the splice path if it asked to and nothing on the copy
 * path is in flight: no unwritten byte queued on either stream (it would be
 * overtaken) and no shutdown waiting for one. A failed attempt is not
 * repeated. */
static void maybe_splice(struct relay *r)
{
    if (!r->want_splice || r->closing || !r->started || r->sp != NULL)
        return;
    if (uv_stream_get_write_queue_size(&r->a.u.s) != 0 ||
        uv_stream_get_write_queue_size(&r->b.u.s) != 0)
        return;
    if ((r->a.shutting && !r->a.shut) || (r->b.shutting && !r->b.shut))
        return;
    r->want_splice = 0;
    (void)splice_begin(r); /* on failure the copy path just goes on */
}

/* ------------------------------------------------------------------------ */
/* Copy path                                                                 */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct relay_buf *b = buf_get();

    (void)h;
    (void)suggested;
    if (b == NULL) { /* libuv reports UV_ENOBUFS to on_read */
        buf->base = NULL;
        buf->len = 0;
        return;
    }
    buf->base = b->data;
    buf->len = sizeof(b->data);
}

static void on_write(uv_write_t *req, int status)
{
    struct relay_buf *b = container_of(req, struct relay_buf, req);
    struct relay_side *dst = b->dst, *src;
    struct relay *r = dst->r; /* valid: the relay is freed after every close callback */
    int rc;

    buf_put(b);
    if (r->closing)
        return; /* UV_ECANCELED from our own close, or an error nobody needs now */
    if (status < 0) {
        relay_end(r, side_error(dst), status);
        return;
    }
    r->last_io_ms = uv_now(dst->u.h.loop);
    if (splice_active(r))
        return; /* written before the switch; nothing is paused on the copy path */
    src = peer_of(dst);
    if (src->paused && uv_stream_get_write_queue_size(&dst->u.s) < (size_t)RELAY_LOW_WATER) {
        src->paused = 0;
        rc = side_read_start(src);
        if (rc < 0) {
            relay_end(r, side_error(src), rc);
            return;
        }
    }
    maybe_splice(r);
}

/* Writes len bytes of b to dst: what the socket takes now, the rest queued
 * (then the write request owns b until on_write). Takes b. 0, or -1 when
 * that ended the relay. */
static int send_buf(struct relay *r, struct relay_side *dst, struct relay_buf *b, size_t len)
{
    uv_buf_t wb = uv_buf_init(b->data, (unsigned int)len);
    int n = uv_try_write(&dst->u.s, &wb, 1);

    if (n >= 0 && (size_t)n == len) {
        buf_put(b);
        return 0;
    }
    if (n < 0 && n != UV_EAGAIN) {
        buf_put(b);
        relay_end(r, side_error(dst), n);
        return -1;
    }
    if (n > 0) {
        wb.base += n;
        wb.len -= (size_t)n;
    }
    b->dst = dst;
    n = uv_write(&b->req, &dst->u.s, &wb, 1, on_write);
    if (n < 0) {
        buf_put(b);
        relay_end(r, side_error(dst), n);
        return -1;
    }
    return 0;
}

/* Stops reading src while dst holds more than RELAY_HIGH_WATER unwritten
 * bytes (R8); dst's write callback resumes it. */
static void check_pause(struct relay *r, struct relay_side *src, struct relay_side *dst)
{
    if (uv_stream_get_write_queue_size(&dst->u.s) > (size_t)RELAY_HIGH_WATER) {
        uv_read_stop(&src->u.s);
        src->reading = 0;
        src->paused = 1;
        r->npauses++;
    }
}

/* Sends len bytes of b, read from src, to the other side. Takes b. */
static void forward(struct relay *r, struct relay_side *src, struct relay_buf *b, size_t len)
{
    struct relay_side *dst = peer_of(src);

    src->nread += len;
    r->last_io_ms = uv_now(src->u.h.loop);
    if (r->splice == RELAY_SPLICE_AUTO &&
        (len == sizeof(b->data) || src->nread >= (uint64_t)RELAY_SPLICE_AFTER))
        r->want_splice = 1; /* a bulk transfer */
    if (send_buf(r, dst, b, len) < 0)
        return;
    check_pause(r, src, dst);
    maybe_splice(r);
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
    struct relay_side *s = container_of(req, struct relay_side, shutdown_req);
    struct relay *r = s->r;

    if (r->closing)
        return; /* UV_ECANCELED from our own close */
    if (status < 0) {
        relay_end(r, side_error(s), status);
        return;
    }
    s->shut = 1;
    check_done(r);
    maybe_splice(r); /* it may have been waiting for this shutdown */
}

/* src sent EOF: stop reading it and half-close the other side once its
 * queued writes are out. An EOF that was really a reset ends the relay
 * instead: passing it on as a clean half-close would tell the other side the
 * stream ended normally. One getsockopt() per EOF, none per read. */
static void side_eof(struct relay *r, struct relay_side *src)
{
    int rc;

    uv_read_stop(&src->u.s);
    src->reading = 0;
    rc = side_pending_error(src);
    if (rc < 0) {
        relay_end(r, side_error(src), rc);
        return;
    }
    src->eof = 1;
    side_shutdown(r, peer_of(src));
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct relay_side *src = side_of(s);
    struct relay *r = src->r;
    struct relay_buf *b = NULL;

    /* buf->base is NULL on some errors (libuv #1604) and on UV_ENOBUFS. */
    if (buf->base != NULL)
        b = container_of(buf->base, struct relay_buf, data);
    if (nread > 0 && b != NULL) {
        forward(r, src, b, (size_t)nread);
        return;
    }
    if (b != NULL)
        buf_put(b);
    if (nread == 0) /* EAGAIN, not EOF */
        return;
    if (nread == UV_EOF)
        side_eof(r, src);
    else
        relay_end(r, side_error(src), (int)nread);
}

/* ------------------------------------------------------------------------ */
/* Splice path                                                               */

#if RELAY_HAVE_SPLICE

struct relay_pipe {
    int r, w;      /* read and write ends, -1 when none */
    size_t cap;    /* what the kernel granted */
    size_t parked; /* bytes in it: spliced in from the source, not out yet */
};

/* One socket's watcher. */
struct splice_end {
    uv_poll_t poll; /* watches fd; initialised iff inited */
    struct relay_splice *sp;
    int fd;       /* a dup of the stream's socket, -1 when none */
    int events;   /* what poll is started with, 0 when stopped */
    unsigned idx; /* 0: a, 1: b */
    unsigned inited : 1;
};

struct relay_splice {
    struct relay *r;
    struct splice_end end[2];  /* [0]: a, [1]: b */
    struct relay_pipe pipe[2]; /* [0]: a -> b, [1]: b -> a */
    unsigned active : 1;       /* bytes move here (not after a fallback) */
};

static _Thread_local struct relay_pipe pipe_pool[RELAY_PIPE_POOL_MAX];
static _Thread_local unsigned npooled;
static _Thread_local int splice_broken; /* splice() failed as unsupported */
static _Thread_local unsigned fail_nth; /* relay_test_fail_splice */
static _Thread_local int fail_errno;

static struct relay_side *side_at(struct relay *r, unsigned i)
{
    return i == 0 ? &r->a : &r->b;
}

static int splice_active(const struct relay *r)
{
    return r->sp != NULL && r->sp->active;
}

static int pipe_get(struct relay_pipe *p)
{
    int fds[2], sz;

    if (npooled > 0) {
        *p = pipe_pool[--npooled];
        return 0;
    }
    if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0)
        return uv_translate_sys_error(errno);
    p->r = fds[0];
    p->w = fds[1];
    p->parked = 0;
    sz = fcntl(p->w, F_SETPIPE_SZ, RELAY_PIPE_SIZE);
    if (sz < 0) /* over fs.pipe-max-size or the per-user page limit: keep what we got */
        sz = fcntl(p->w, F_GETPIPE_SZ);
    p->cap = sz > 0 ? (size_t)sz : (size_t)4096;
    return 0;
}

/* An empty pipe goes back to the pool; one with bytes in it is closed. */
static void pipe_put(struct relay_pipe *p)
{
    if (p->r < 0)
        return;
    if (p->parked == 0 && npooled < RELAY_PIPE_POOL_MAX) {
        pipe_pool[npooled++] = *p;
    } else {
        close(p->r);
        close(p->w);
    }
    p->r = p->w = -1;
}

static ssize_t splice_io(int in, int out, size_t len)
{
    if (fail_nth > 0 && --fail_nth == 0) {
        errno = fail_errno;
        return -1;
    }
    return splice(in, NULL, out, NULL, len, SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
}

/* "splice() does not work for these descriptors here", as opposed to an
 * error of the connection. EPERM is what seccomp filters usually answer. */
static int splice_unsupported(int err)
{
    return err == EINVAL || err == ENOSYS || err == EPERM;
}

/* Bytes waiting to be read on a socket (EAGAIN from a splice into a pipe
 * that holds bytes means "no data" or "pipe full"; this tells which). */
static int has_data(int fd)
{
    int n = 0;

    return ioctl(fd, FIONREAD, &n) == 0 && n > 0;
}

static void on_splice_poll(uv_poll_t *h, int status, int events);

/* Watches each socket for what its directions wait for: readable while the
 * direction it feeds may read, writable while the pipe into it holds bytes
 * (a pump leaves bytes parked only when the destination refused them). */
static void update_polls(struct relay *r)
{
    struct relay_splice *sp = r->sp;
    unsigned i;

    for (i = 0; i < 2; i++) {
        struct splice_end *e = &sp->end[i];
        struct relay_side *s = side_at(r, i);
        int want = 0;

        if (!s->eof && !s->paused)
            want |= UV_READABLE;
        if (sp->pipe[1 - i].parked > 0)
            want |= UV_WRITABLE;
        if (want == e->events)
            continue;
        if (want == 0)
            RELAY_CHECK(uv_poll_stop(&e->poll) == 0);
        else
            RELAY_CHECK(uv_poll_start(&e->poll, want, on_splice_poll) == 0);
        e->events = want;
    }
}

/* splice() does not work here: back to the copy path. Parked bytes are read
 * out of the pipes and queued on their destination before anything else, a
 * direction that saw EOF gets its shutdown after them, and reading resumes
 * where the destination's queue allows. The poll handles are only stopped:
 * they, and the duplicate fds they watch, are closed with the relay. */
static void splice_revert(struct relay *r)
{
    struct relay_splice *sp = r->sp;
    unsigned i;
    int rc;

    splice_broken = 1;
    sp->active = 0;
    for (i = 0; i < 2; i++) {
        if (sp->end[i].events != 0)
            RELAY_CHECK(uv_poll_stop(&sp->end[i].poll) == 0);
        sp->end[i].events = 0;
        side_at(r, i)->paused = 0;
    }
    for (i = 0; i < 2; i++) {
        struct relay_side *dst = side_at(r, 1 - i);
        struct relay_pipe *p = &sp->pipe[i];

        while (p->parked > 0) {
            struct relay_buf *b = buf_get();
            size_t want = p->parked < sizeof(b->data) ? p->parked : sizeof(b->data);
            ssize_t n;

            if (b == NULL) {
                relay_end(r, side_error(dst), UV_ENOMEM);
                return;
            }
            n = read(p->r, b->data, want);
            if (n <= 0) {
                buf_put(b);
                relay_end(r, side_error(dst), n < 0 ? uv_translate_sys_error(errno) : UV_EIO);
                return;
            }
            p->parked -= (size_t)n;
            if (send_buf(r, dst, b, (size_t)n) < 0)
                return;
        }
        pipe_put(p);
    }
    for (i = 0; i < 2; i++) {
        struct relay_side *src = side_at(r, i), *dst = side_at(r, 1 - i);

        if (src->eof && !dst->shutting)
            side_shutdown(r, dst);
        if (r->closing)
            return;
    }
    for (i = 0; i < 2; i++) {
        struct relay_side *src = side_at(r, i), *dst = side_at(r, 1 - i);

        if (src->eof)
            continue;
        if (uv_stream_get_write_queue_size(&dst->u.s) > (size_t)RELAY_HIGH_WATER) {
            src->paused = 1; /* on_write resumes it */
            r->npauses++;
            continue;
        }
        rc = side_read_start(src);
        if (rc < 0) {
            relay_end(r, side_error(src), rc);
            return;
        }
    }
}

/* A splice failed with err on side s. -1 always: the caller stops using the
 * splice state (the relay ended, or went back to the copy path). */
static int splice_failed(struct relay *r, struct relay_side *s, int err)
{
    if (splice_unsupported(err))
        splice_revert(r);
    else
        relay_end(r, side_error(s), uv_translate_sys_error(err));
    return -1;
}

/* Splice path: half-closes dst now (its pipe is empty; libuv's stream I/O
 * is off, so uv_shutdown() is not an option). */
static void shut_now(struct relay *r, struct relay_side *dst)
{
    uv_os_fd_t fd;
    int rc = 0;

    dst->shutting = 1;
    if (uv_fileno(&dst->u.h, &fd) != 0)
        rc = UV_EBADF;
    else if (shutdown(fd, SHUT_WR) != 0)
        rc = uv_translate_sys_error(errno);
    if (rc < 0) {
        relay_end(r, side_error(dst), rc);
        return;
    }
    dst->shut = 1;
    check_done(r);
}

static void dir_pause(struct relay *r, struct relay_side *src)
{
    src->paused = 1;
    r->npauses++;
}

/* Moves bytes from side i through its pipe to the other side until the
 * source has no more, the pipe is full or the destination refuses more; a
 * source that sent EOF gets its destination shut down once the pipe is
 * empty. Returns 0, or -1 when the relay ended or went back to the copy
 * path. */
static int dir_pump(struct relay *r, unsigned i)
{
    struct relay_splice *sp = r->sp;
    struct relay_side *src = side_at(r, i), *dst = side_at(r, 1 - i);
    struct relay_pipe *p = &sp->pipe[i];
    int in_fd = sp->end[i].fd, out_fd = sp->end[1 - i].fd, dst_blocked = 0, rc;
    unsigned round;
    ssize_t n;

    for (round = 0; round < RELAY_PUMP_ROUNDS; round++) {
        int more = 0;

        if (!src->eof && !src->paused) {
            if (p->parked >= p->cap) {
                dir_pause(r, src);
            } else if ((n = splice_io(in_fd, p->w, p->cap - p->parked)) > 0) {
                p->parked += (size_t)n;
                src->nread += (uint64_t)n;
                r->nspliced += (uint64_t)n;
                r->last_io_ms = uv_now(src->u.h.loop);
                more = 1;
            } else if (n == 0) { /* EOF, unless a reset hides behind it */
                rc = side_pending_error(src);
                if (rc < 0) {
                    relay_end(r, side_error(src), rc);
                    return -1;
                }
                src->eof = 1;
            } else if (errno == EAGAIN) {
                if (p->parked > 0 && has_data(in_fd))
                    dir_pause(r, src); /* the pipe is full */
            } else if (errno == EINTR) {
                more = 1;
            } else {
                return splice_failed(r, src, errno);
            }
        }
        while (p->parked > 0 && !dst_blocked) { /* until empty or refused */
            n = splice_io(p->r, out_fd, p->parked);
            if (n > 0) {
                p->parked -= (size_t)n;
                r->last_io_ms = uv_now(src->u.h.loop);
                if (src->paused && p->parked <= (size_t)RELAY_LOW_WATER) {
                    src->paused = 0;
                    more = 1;
                }
            } else if (n < 0 && errno == EAGAIN) {
                dst_blocked = 1; /* wait for UV_WRITABLE */
            } else if (n < 0 && errno != EINTR) {
                return splice_failed(r, dst, errno);
            } else if (n == 0) {
                return splice_failed(r, dst, EIO); /* cannot happen: we hold the write end */
            }
        }
        if (src->eof && p->parked == 0 && !dst->shutting) {
            shut_now(r, dst);
            return r->closing ? -1 : 0;
        }
        if (!more)
            break;
    }
    return 0;
}

static void on_splice_poll(uv_poll_t *h, int status, int events)
{
    struct splice_end *e = container_of(h, struct splice_end, poll);
    struct relay_splice *sp = e->sp;
    struct relay *r = sp->r;
    unsigned i = e->idx;
    int rc;

    if (r->closing || !sp->active)
        return; /* cannot happen: closed and stopped handles report nothing */
    if (status < 0) {
        /* POLLERR: libuv stopped the handle. The socket error says what
         * happened; without one, trying both directions finds out. */
        e->events = 0;
        rc = side_pending_error(side_at(r, i));
        if (rc < 0) {
            relay_end(r, side_error(side_at(r, i)), rc);
            return;
        }
        events = UV_READABLE | UV_WRITABLE;
    }
    if ((events & UV_READABLE) != 0 && dir_pump(r, i) < 0)
        return;
    if ((events & UV_WRITABLE) != 0 && dir_pump(r, 1 - i) < 0)
        return;
    update_polls(r);
}

static void on_poll_close(uv_handle_t *h)
{
    struct splice_end *e = container_of((uv_poll_t *)h, struct splice_end, poll);
    struct relay *r = e->sp->r;

    close(e->fd); /* the poll is gone: the duplicate can go */
    e->fd = -1;
    close_done(r);
}

/* Switches the relay to the splice path (see the top of the file). Every
 * step that can fail comes before the streams stop reading, so a failure
 * leaves the copy path as it was. */
static int splice_begin(struct relay *r)
{
    struct relay_splice *sp;
    uv_loop_t *loop = r->timer.loop;
    unsigned i, ninit = 0;
    int rc = 0;

    if (splice_broken)
        return UV_ENOSYS;
    sp = calloc(1, sizeof(*sp));
    if (sp == NULL)
        return UV_ENOMEM;
    sp->r = r;
    for (i = 0; i < 2; i++) {
        sp->end[i].sp = sp;
        sp->end[i].idx = i;
        sp->end[i].fd = -1;
        sp->pipe[i].r = sp->pipe[i].w = -1;
    }
    for (i = 0; i < 2 && rc == 0; i++) {
        struct relay_side *s = side_at(r, i);
        uv_os_fd_t fd;
        int type = 0;
        socklen_t len = sizeof(type);

        if (uv_fileno(&s->u.h, &fd) != 0) {
            rc = UV_EBADF;
        } else if (s->u.h.type == UV_NAMED_PIPE &&
                   (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM)) {
            rc = UV_EINVAL; /* a pipe or tty, not a unix stream socket */
        } else if ((sp->end[i].fd = fcntl(fd, F_DUPFD_CLOEXEC, 3)) < 0) {
            rc = uv_translate_sys_error(errno);
        }
    }
    for (i = 0; i < 2 && rc == 0; i++)
        rc = pipe_get(&sp->pipe[i]);
    for (i = 0; i < 2 && rc == 0; i++) {
        rc = uv_poll_init(loop, &sp->end[i].poll, sp->end[i].fd);
        if (rc == 0) {
            sp->end[i].inited = 1;
            ninit++;
        }
    }
    if (rc < 0) {
        for (i = 0; i < 2; i++) {
            pipe_put(&sp->pipe[i]);
            if (!sp->end[i].inited && sp->end[i].fd >= 0) {
                close(sp->end[i].fd);
                sp->end[i].fd = -1;
            }
        }
        if (ninit == 0) {
            free(sp);
            return rc;
        }
        r->sp = sp; /* inactive; its poll handle closes with the relay */
        return rc;
    }

    r->sp = sp;
    sp->active = 1;
    for (i = 0; i < 2; i++) {
        struct relay_side *s = side_at(r, i);

        uv_read_stop(&s->u.s); /* for good: the streams' watchers stay off */
        s->reading = 0;
        s->paused = 0; /* nothing is queued (maybe_splice) */
    }
    update_polls(r);
    return 0;
}

/* relay_close(): closes the poll handles (their close callbacks close the
 * duplicate fds). */
static void splice_close(struct relay *r)
{
    struct relay_splice *sp = r->sp;
    unsigned i;

    sp->active = 0;
    for (i = 0; i < 2; i++)
        if (sp->end[i].inited)
            close_handle(r, (uv_handle_t *)&sp->end[i].poll, on_poll_close);
}

/* The last close callback: the pipes and the state go. */
static void splice_free(struct relay *r)
{
    struct relay_splice *sp = r->sp;

    pipe_put(&sp->pipe[0]);
    pipe_put(&sp->pipe[1]);
    free(sp);
    r->sp = NULL;
}

static void pipes_release(void)
{
    while (npooled > 0) {
        npooled--;
        close(pipe_pool[npooled].r);
        close(pipe_pool[npooled].w);
    }
}

void relay_test_fail_splice(unsigned nth, int err)
{
    fail_nth = nth;
    fail_errno = err;
    splice_broken = 0;
}

int relay_pipe_take(struct relay_pipe_ends *p)
{
    struct relay_pipe rp = {-1, -1, 0, 0};
    int rc;

    if (splice_broken)
        return UV_ENOSYS;
    rc = pipe_get(&rp);
    if (rc < 0)
        return rc;
    p->r = rp.r;
    p->w = rp.w;
    p->cap = rp.cap;
    return 0;
}

void relay_pipe_give(struct relay_pipe_ends *p, size_t parked)
{
    struct relay_pipe rp = {p->r, p->w, p->cap, parked};

    pipe_put(&rp);
    p->r = p->w = -1;
}

ssize_t relay_splice_io(int in, int out, size_t len)
{
    ssize_t n = splice_io(in, out, len);

    if (n < 0 && splice_unsupported(errno))
        splice_broken = 1;
    return n;
}

#else /* !RELAY_HAVE_SPLICE: the copy path only */

static int splice_active(const struct relay *r)
{
    (void)r;
    return 0;
}

static int splice_begin(struct relay *r)
{
    (void)r;
    return UV_ENOSYS;
}

static void splice_close(struct relay *r)
{
    (void)r;
}

static void splice_free(struct relay *r)
{
    (void)r;
}

static void pipes_release(void)
{
}

void relay_test_fail_splice(unsigned nth, int err)
{
    (void)nth;
    (void)err;
}

int relay_pipe_take(struct relay_pipe_ends *p)
{
    (void)p;
    return UV_ENOSYS;
}

void relay_pipe_give(struct relay_pipe_ends *p, size_t parked)
{
    (void)p;
    (void)parked;
}

ssize_t relay_splice_io(int in, int out, size_t len)
{
    (void)in;
    (void)out;
    (void)len;
    errno = ENOSYS;
    return -1;
}

#endif /* RELAY_HAVE_SPLICE */

/* ------------------------------------------------------------------------ */
/* The timer: deferred shutdowns and the idle timeout                        */

/* Sends the FINs side_shutdown() deferred (their write queues were empty
 * then, and nothing can have been queued since: only the peer that sent EOF
 * feeds them). When both directions have ended, the relay is done once
 * these FINs are out, and it closes both sockets right away: close(2) sends
 * the FIN of a socket whose write half is still open, and no shutdown(2) is
 * needed (nor would it change what goes on the wire: both receive queues
 * are empty, each side having been read to its EOF, so close() does not
 * turn into a reset). */
static void flush_shutdowns(struct relay *r)
{
    struct relay_side *side[2] = {&r->a, &r->b};
    unsigned i;

    if (r->a.eof && r->b.eof && (r->a.shut || r->a.shut_due) && (r->b.shut || r->b.shut_due)) {
        r->a.shut_due = r->b.shut_due = 0;
        r->a.shut = r->b.shut = 1;
        check_done(r);
        return;
    }
    for (i = 0; i < 2; i++) {
        struct relay_side *s = side[i];
        uv_os_fd_t fd;

        if (!s->shut_due)
            continue;
        s->shut_due = 0;
        if (uv_fileno(&s->u.h, &fd) != 0) {
            relay_end(r, side_error(s), UV_EBADF);
            return;
        }
        if (shutdown(fd, SHUT_WR) != 0) {
            relay_end(r, side_error(s), uv_translate_sys_error(errno));
            return;
        }
        s->shut = 1;
    }
    check_done(r);
    maybe_splice(r); /* it may have been waiting for these shutdowns */
}

/* One-shot, armed for last_io_ms + idle_ms when there is an idle timeout,
 * or at 0 ms for deferred shutdowns. When it fires early because traffic
 * moved the deadline, it re-arms itself for the remainder. */
static void on_timer(uv_timer_t *t)
{
    struct relay *r = container_of(t, struct relay, timer);
    uint64_t now, due;

    if (r->a.shut_due || r->b.shut_due) {
        flush_shutdowns(r);
        if (r->closing)
            return;
    }
    if (r->idle_ms == 0)
        return;
    now = uv_now(t->loop);
    due = r->last_io_ms + r->idle_ms;
    if (now >= due) {
        relay_end(r, RELAY_END_IDLE, UV_ETIMEDOUT);
        return;
    }
    uv_timer_start(t, on_timer, due - now, 0);
}

/* ------------------------------------------------------------------------ */
/* Lifecycle                                                                 */

static void close_done(struct relay *r)
{
    if (--r->pending_close > 0)
        return;
    if (r->sp != NULL)
        splice_free(r);
    if (r->on_closed != NULL)
        r->on_closed(r); /* may free r */
}

static void on_side_close(uv_handle_t *h)
{
    close_done(container_of(h, struct relay_side, u.h)->r);
}

static void on_timer_close(uv_handle_t *h)
{
    close_done(container_of((uv_timer_t *)h, struct relay, timer));
}

static void side_init(uv_loop_t *loop, struct relay *r, struct relay_side *s, enum relay_kind k)
{
    s->r = r;
    if (k == RELAY_PIPE)
        RELAY_CHECK(uv_pipe_init(loop, &s->u.pipe, 0) == 0);
    else
        RELAY_CHECK(uv_tcp_init(loop, &s->u.tcp) == 0);
}

/* SLUICE_SPLICE=off|auto|always, read once per thread. */
enum relay_splice_mode relay_splice_default(void)
{
    static _Thread_local int mode = -1;
    const char *e;

    if (mode >= 0)
        return (enum relay_splice_mode)mode;
    mode = RELAY_SPLICE_AUTO;
    e = getenv("SLUICE_SPLICE");
    if (e != NULL && (strcmp(e, "off") == 0 || strcmp(e, "0") == 0))
        mode = RELAY_SPLICE_OFF;
    else if (e != NULL && strcmp(e, "always") == 0)
        mode = RELAY_SPLICE_ALWAYS;
    return (enum relay_splice_mode)mode;
}

void relay_init(uv_loop_t *loop, struct relay *r, enum relay_kind a, enum relay_kind b,
                relay_closed_cb on_closed, void *data)
{
    memset(r, 0, sizeof(*r));
    side_init(loop, r, &r->a, a);
    side_init(loop, r, &r->b, b);
    RELAY_CHECK(uv_timer_init(loop, &r->timer) == 0);
    r->on_closed = on_closed;
    r->data = data;
    r->started_ms = uv_now(loop);
    r->last_io_ms = r->started_ms;
    r->splice = relay_splice_default();
}

int relay_open_b(struct relay *r, int fd)
{
    int rc;

    if (r->closing || r->b_open) {
        close(fd);
        return UV_EINVAL;
    }
    if (r->b.u.h.type == UV_NAMED_PIPE)
        rc = uv_pipe_open(&r->b.u.pipe, fd);
    else
        rc = uv_tcp_open(&r->b.u.tcp, fd);
    if (rc < 0) {
        close(fd);
        return rc;
    }
    r->b_open = 1;
    return 0;
}

int relay_start(struct relay *r, unsigned idle_ms)
{
    int rc;

    if (r->closing)
        return UV_EINVAL;
    if (r->started)
        return UV_EALREADY;
    r->started = 1;
    r->idle_ms = idle_ms;
    r->last_io_ms = uv_now(r->timer.loop);

    /* The relay forwards what it has at once; Nagle would only add delay.
     * Best effort: a failure changes latency, not correctness. Set here
     * only (the dialer leaves it to us), unless the owner says the socket
     * has it already (accepted from a listener that set it). */
    if (r->a.u.h.type == UV_TCP && !r->a.nodelay)
        (void)uv_tcp_nodelay(&r->a.u.tcp, 1);
    if (r->b.u.h.type == UV_TCP && !r->b.nodelay)
        (void)uv_tcp_nodelay(&r->b.u.tcp, 1);

    if (idle_ms > 0)
        uv_timer_start(&r->timer, on_timer, idle_ms, 0);
    else
        uv_timer_stop(&r->timer);

    if (r->splice == RELAY_SPLICE_ALWAYS) {
        r->want_splice = 1;
        maybe_splice(r); /* else later, once the owner's writes are out */
        if (splice_active(r))
            return 0;
    }
    rc = side_read_start(&r->a);
    if (rc == 0)
        rc = side_read_start(&r->b);
    return rc;
}

static void close_handle(struct relay *r, uv_handle_t *h, uv_close_cb cb)
{
    if (uv_is_closing(h))
        return; /* closed by someone else: uv_close() twice would abort */
    r->pending_close++;
    uv_close(h, cb);
}

void relay_close(struct relay *r, int status)
{
    if (r->closing)
        return;
    r->closing = 1;
    r->status = status;
    if (r->end == RELAY_END_NONE && r->started)
        r->end = RELAY_END_OWNER;
    r->a.reading = r->b.reading = 0;
    if (r->sp != NULL)
        splice_close(r);
    close_handle(r, &r->a.u.h, on_side_close);
    close_handle(r, &r->b.u.h, on_side_close);
    close_handle(r, (uv_handle_t *)&r->timer, on_timer_close);
}

const char *relay_end_str(enum relay_end e)
{
    switch (e) {
    case RELAY_END_NONE:
        return "none";
    case RELAY_END_DONE:
        return "done";
    case RELAY_END_IDLE:
        return "idle timeout";
    case RELAY_END_A_ERROR:
        return "client error";
    case RELAY_END_B_ERROR:
        return "upstream error";
    case RELAY_END_OWNER:
        return "closed";
    }
    return "unknown";
}

uv_stream_t *relay_client(struct relay *r)
{
    return &r->a.u.s;
}

uv_stream_t *relay_upstream(struct relay *r)
{
    return &r->b.u.s;
}

void relay_bytes(const struct relay *r, uint64_t *up, uint64_t *down)
{
    *up += r->a.nread;
    *down += r->b.nread;
}

void relay_count_up(struct relay *r, uint64_t n)
{
    r->a.nread += n;
}

void relay_client_nodelay(struct relay *r)
{
    r->a.nodelay = 1;
}

const char *relay_end_text(const struct relay *r, char *buf, size_t len)
{
    if (r->status < 0 && r->end != RELAY_END_IDLE)
        snprintf(buf, len, "%s: %s", relay_end_str(r->end), uv_err_name(r->status));
    else
        snprintf(buf, len, "%s", relay_end_str(r->end));
    return buf;
}

void relay_release_caches(void)
{
    while (free_bufs != NULL) {
        struct relay_buf *b = free_bufs;

        free_bufs = b->next;
        free(b);
    }
    nfree_bufs = 0;
    pipes_release();
}
