/* bridge/relay.c - splices two libuv streams (TCP or pipe, any mix) with
 * backpressure, half-close and an idle timeout (style.md R5, R8, R9).
 *
 * Buffers. Each read gets a struct relay_buf: the 64 KiB of data plus the
 * uv_write_t that carries it when the peer cannot take it at once. One
 * allocation per buffer; the buffer goes back to a small per-thread freelist
 * as soon as it is no longer needed (on the uv_try_write fast path that is
 * still inside the read callback), so a steady stream does not call malloc
 * at all. The freelist is drained when the last relay of the thread closes,
 * so an idle process holds no buffers and leak checkers see none.
 *
 * Write path. uv_try_write() first (it returns UV_EAGAIN by itself while
 * earlier writes are queued, so order is kept, including writes the owner
 * queued before relay_start); whatever it did not take is queued with
 * uv_write(), and that request owns the buffer until on_write() puts it
 * back. After queueing, a source whose peer holds more than RELAY_HIGH_WATER
 * unwritten bytes stops reading (R8); the peer's write callback restarts it
 * once the queue is below RELAY_LOW_WATER. A pause always has a queued write
 * behind it, so a write callback is always coming to resume it.
 *
 * Half-close (R9). UV_EOF from a side stops reading it and shuts down the
 * other side's write half; libuv sends the FIN only after that side's queued
 * writes are flushed. The relay is done when both sides have sent EOF and both
 * shutdowns have completed. An EOF with a socket error pending (a reset that
 * read() reported as 0) is an error end, not a half-close.
 *
 * Idle timeout. Reads and write completions only store uv_now() in
 * last_io_ms (no timer call per read). The timer is a one-shot armed for
 * last_io_ms + idle_ms; when it fires early because traffic moved the
 * deadline, it re-arms itself for the remainder. An active relay therefore
 * costs one timer callback per idle_ms, and an idle one ends within one
 * loop iteration of its deadline.
 *
 * Teardown (R5). relay_close() is the single exit: it closes the three
 * handles once each (skipping any handle already closing) and counts their
 * close callbacks; the last one calls on_closed. libuv runs a stream's
 * cancelled write and shutdown callbacks (UV_ECANCELED) before that stream's
 * close callback, so they all run while the relay memory is still valid;
 * they free their buffer and return when r->closing is set.
 *
 * Handles are mapped back to the relay with container_of (R6); handle->data
 * is left to the owner.
 */
#include "bridge/bridge.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#define container_of(ptr, type, member) ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

/* Always-on check for library calls that cannot fail (R13). */
#define RELAY_CHECK(expr)                                                                          \
    do {                                                                                           \
        if (!(expr))                                                                               \
            abort();                                                                               \
    } while (0)

/* Buffers kept for reuse per thread: enough for both directions of a few
 * busy relays; beyond that they go back to malloc. */
#define RELAY_FREELIST_MAX 8

struct relay_buf {
    uv_write_t req;         /* when queued, owns this buffer until on_write */
    struct relay_side *dst; /* the side req writes to */
    struct relay_buf *next; /* freelist link */
    char data[RELAY_READ_SIZE];
};

/* Relays are used from one loop; loops may run on several threads, so the
 * cache is per thread. */
static _Thread_local struct relay_buf *free_bufs;
static _Thread_local unsigned nfree_bufs;
static _Thread_local size_t nlive; /* relays initialised and not yet fully closed */

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

static void bufs_drain(void)
{
    while (free_bufs != NULL) {
        struct relay_buf *b = free_bufs;

        free_bufs = b->next;
        free(b);
    }
    nfree_bufs = 0;
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

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

static int side_read_start(struct relay_side *s)
{
    int rc = uv_read_start(&s->u.s, on_alloc, on_read);

    if (rc == 0)
        s->reading = 1;
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Data path                                                                 */

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
    src = peer_of(dst);
    if (src->paused && uv_stream_get_write_queue_size(&dst->u.s) < (size_t)RELAY_LOW_WATER) {
        src->paused = 0;
        rc = side_read_start(src);
        if (rc < 0)
            relay_end(r, side_error(src), rc);
    }
}

/* Sends len bytes of b, read from src, to the other side. Takes b. */
static void forward(struct relay *r, struct relay_side *src, struct relay_buf *b, size_t len)
{
    struct relay_side *dst = peer_of(src);
    uv_buf_t wb = uv_buf_init(b->data, (unsigned int)len);
    int n;

    src->nread += len;
    r->last_io_ms = uv_now(src->u.h.loop);

    n = uv_try_write(&dst->u.s, &wb, 1);
    if (n >= 0 && (size_t)n == len) {
        buf_put(b);
        return;
    }
    if (n < 0 && n != UV_EAGAIN) {
        buf_put(b);
        relay_end(r, side_error(dst), n);
        return;
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
        return;
    }
    if (uv_stream_get_write_queue_size(&dst->u.s) > (size_t)RELAY_HIGH_WATER) {
        uv_read_stop(&src->u.s);
        src->reading = 0;
        src->paused = 1;
        r->npauses++;
    }
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
    if (r->a.eof && r->b.eof && r->a.shut && r->b.shut)
        relay_end(r, RELAY_END_DONE, 0);
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

/* src sent EOF: stop reading it and half-close the other side once its
 * queued writes are out. An EOF that was really a reset ends the relay
 * instead: passing it on as a clean half-close would tell the other side the
 * stream ended normally. One getsockopt() per EOF, none per read. */
static void side_eof(struct relay *r, struct relay_side *src)
{
    struct relay_side *dst = peer_of(src);
    int rc;

    uv_read_stop(&src->u.s);
    src->reading = 0;
    rc = side_pending_error(src);
    if (rc < 0) {
        relay_end(r, side_error(src), rc);
        return;
    }
    src->eof = 1;
    dst->shutting = 1;
    rc = uv_shutdown(&dst->shutdown_req, &dst->u.s, on_shutdown);
    if (rc < 0)
        relay_end(r, side_error(dst), rc);
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
/* Idle timeout                                                              */

static void on_idle(uv_timer_t *t)
{
    struct relay *r = container_of(t, struct relay, timer);
    uint64_t now = uv_now(t->loop), due = r->last_io_ms + r->idle_ms;

    if (now >= due) {
        relay_end(r, RELAY_END_IDLE, UV_ETIMEDOUT);
        return;
    }
    uv_timer_start(t, on_idle, due - now, 0);
}

/* ------------------------------------------------------------------------ */
/* Lifecycle                                                                 */

static void close_done(struct relay *r)
{
    if (--r->pending_close > 0)
        return;
    if (--nlive == 0)
        bufs_drain();
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
    nlive++;
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
     * Best effort: a failure changes latency, not correctness. */
    if (r->a.u.h.type == UV_TCP)
        (void)uv_tcp_nodelay(&r->a.u.tcp, 1);
    if (r->b.u.h.type == UV_TCP)
        (void)uv_tcp_nodelay(&r->b.u.tcp, 1);

    if (idle_ms > 0)
        uv_timer_start(&r->timer, on_idle, idle_ms, 0);
    else
        uv_timer_stop(&r->timer);

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
