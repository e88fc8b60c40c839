/* bridge/dialer.c - connects to the first reachable of n targets (TCP address
 * or unix path), one at a time, each attempt bounded by timeout_ms.
 *
 * Why not uv_tcp_connect. The caller hands the connected socket to the relay
 * as an fd (relay_open_b), and a unix target must be tried with the same code
 * as a TCP one; a libuv stream would have to be closed (asynchronously) after
 * every failed attempt. So each attempt is a plain non-blocking socket():
 *   - connect() == 0 (usual for unix sockets): connected;
 *   - EINPROGRESS (usual for TCP): one poll() with a zero timeout first. On
 *     loopback the handshake has completed inside connect() (the SYN, the
 *     SYN-ACK and the ACK are processed before it returns), so the answer is
 *     usually already there, and the attempt ends without any libuv watcher
 *     (a uv_poll_t costs five epoll_ctl/ioctl calls to set up and tear down).
 *     Otherwise a uv_poll_t watches for UV_WRITABLE, and the timer bounds the
 *     attempt; SO_ERROR then says how it went. The poll status is not the
 *     error: libuv reports POLLERR (a refused connect) as UV_EBADF, so
 *     SO_ERROR is read whatever the status;
 *   - anything else (ECONNREFUSED, ENOENT, and EAGAIN from a unix listener
 *     whose backlog is full) fails the attempt and the next target is tried.
 * TCP_NODELAY is not set here: the relay sets it in relay_start(), and once
 * is enough.
 *
 * Reporting. The callback never runs inside dialer_start(): a result known
 * there (immediate success, or every target failed at once) is reported from
 * the timer at 0 ms. That costs no system call and no extra poll: the timer
 * runs at the start of the next loop iteration, before it polls, so a relay
 * started from the callback is watched by that same poll.
 *
 * fd handoff. Before the callback gets the fd, the attempt's poll is closed.
 * uv_close() on a poll stops the watcher synchronously (loop->watchers[fd] is
 * cleared and the fd is removed from epoll), so uv_tcp_open()/uv_pipe_open()
 * on the fd works from inside the callback; only the poll's memory waits for
 * its close callback. Polls cannot be re-initialised for a new fd before
 * their close callback, so each attempt allocates its own.
 *
 * Lifetime (R5). pending_close counts the polls and the timer being closed.
 * The dialer is freed by the last close callback once it is DONE (callback
 * delivered or cancelled); the timer is closed only then.
 */
#include "bridge/bridge.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <uv.h>

#include "policy/policy.h"

#include "common/common.h"

#define DIALER_CHECK(expr)                                                                         \
    do {                                                                                           \
        if (!(expr))                                                                               \
            abort();                                                                               \
    } while (0)

enum dialer_state {
    DIALER_ST_CONNECTING, /* owns fd, poll (started) and the timer (attempt deadline) */
    DIALER_ST_REPORT,     /* result known; owns fd (connected) or none (failed); timer at 0 */
    DIALER_ST_DONE,       /* callback ran or cancelled; owns nothing but closing handles */
};

struct dialer {
    uv_loop_t *loop;
    uv_timer_t timer;
    uv_poll_t *poll; /* the current attempt's watcher (CONNECTING only) */
    dialer_cb cb;
    void *arg;
    enum dialer_state state;
    int fd;       /* the current attempt's socket, or -1 */
    int last_err; /* last failure other than a timeout, 0 if none */
    unsigned timeout_ms;
    unsigned timed_out : 1; /* an attempt timed out */
    unsigned refused : 1;   /* an attempt was refused */
    unsigned now : 1;       /* inside dialer_start_now(): a connection made at once is kept */
    unsigned pending_close;
    size_t idx; /* target being tried */
    size_t n;
    struct dialer_target targets[]; /* copied; unix paths are the caller's */
};

/* ------------------------------------------------------------------------ */
/* Lifetime                                                                  */

static void maybe_free(struct dialer *d)
{
    if (d->pending_close == 0 && d->state == DIALER_ST_DONE)
        free(d);
}

static void on_poll_close(uv_handle_t *h)
{
    struct dialer *d = h->data;

    free(h);
    d->pending_close--;
    maybe_free(d);
}

static void on_timer_close(uv_handle_t *h)
{
    struct dialer *d = container_of((uv_timer_t *)h, struct dialer, timer);

    d->pending_close--;
    maybe_free(d);
}

/* Ends the current attempt's watching: stops the deadline, closes the poll
 * (which releases the fd from the loop at once). The fd stays open. */
static void attempt_unwatch(struct dialer *d)
{
    uv_timer_stop(&d->timer);
    if (d->poll != NULL) {
        d->pending_close++;
        uv_close((uv_handle_t *)d->poll, on_poll_close);
        d->poll = NULL;
    }
}

/* The dialer is finished: only closing handles remain. */
static void finish(struct dialer *d)
{
    d->state = DIALER_ST_DONE;
    d->pending_close++;
    uv_close((uv_handle_t *)&d->timer, on_timer_close);
}

static void deliver(struct dialer *d, int status, int fd, size_t index)
{
    finish(d); /* d stays valid until the close callbacks, after cb returns */
    d->cb(d->arg, status, fd, index);
}

/* ------------------------------------------------------------------------ */
/* Attempts                                                                  */

static void note_error(struct dialer *d, int err)
{
    if (err == UV_ETIMEDOUT) {
        d->timed_out = 1;
        return;
    }
    d->last_err = err;
    if (err == UV_ECONNREFUSED)
        d->refused = 1;
}

static int final_error(const struct dialer *d)
{
    if (d->timed_out && !d->refused)
        return UV_ETIMEDOUT;
    return d->last_err != 0 ? d->last_err : UV_ETIMEDOUT;
}

static int target_sockaddr(const struct dialer_target *t, struct sockaddr_storage *ss,
                           socklen_t *len)
{
    memset(ss, 0, sizeof(*ss));
    if (t->is_unix) {
        struct sockaddr_un *su = (struct sockaddr_un *)ss;
        size_t plen = t->path != NULL ? strlen(t->path) : 0;

        if (plen == 0 || plen >= sizeof(su->sun_path))
            return UV_EINVAL;
        su->sun_family = AF_UNIX;
        memcpy(su->sun_path, t->path, plen + 1);
        *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + plen + 1);
        return 0;
    }
    if (t->port == 0)
        return UV_EINVAL;
    if (t->addr.family == 4 && t->v4mapped) {
        struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = htons(t->port);
        sin6->sin6_addr.s6_addr[10] = 0xff;
        sin6->sin6_addr.s6_addr[11] = 0xff;
        memcpy(&sin6->sin6_addr.s6_addr[12], t->addr.bytes, 4);
        *len = sizeof(*sin6);
        return 0;
    }
    if (t->addr.family == 4) {
        struct sockaddr_in *sin = (struct sockaddr_in *)ss;

        sin->sin_family = AF_INET;
        sin->sin_port = htons(t->port);
        memcpy(&sin->sin_addr, t->addr.bytes, 4);
        *len = sizeof(*sin);
        return 0;
    }
    if (t->addr.family == 6) {
        struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = htons(t->port);
        memcpy(&sin6->sin6_addr, t->addr.bytes, 16);
        *len = sizeof(*sin6);
        return 0;
    }
    return UV_EINVAL;
}

/* 0 if the socket is connected, else why not. */
static int connect_result(int fd, int status)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(int);
    int soerr = 0;

    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
        return uv_translate_sys_error(errno);
    if (soerr != 0)
        return uv_translate_sys_error(soerr);
    if (status == 0)
        return 0;
    /* An error event without a pending socket error: ask the socket. */
    len = sizeof(ss);
    if (getpeername(fd, (struct sockaddr *)&ss, &len) == 0)
        return 0;
    return uv_translate_sys_error(errno);
}

static void on_poll(uv_poll_t *h, int status, int events);
static void on_timer(uv_timer_t *t);

/* fd connected inside attempt_start(): reported from the loop, never from
 * here; inside dialer_start_now(), handed to its caller instead. */
static void report_connected(struct dialer *d, int fd)
{
    d->fd = fd;
    d->state = DIALER_ST_REPORT;
    if (!d->now)
        DIALER_CHECK(uv_timer_start(&d->timer, on_timer, 0, 0) == 0);
}

int dialer_connect_now(const struct dialer_target *t, int *in_progress)
{
    struct sockaddr_storage ss;
    socklen_t sslen = 0;
    int fd, rc;

    *in_progress = 0;
    rc = target_sockaddr(t, &ss, &sslen);
    if (rc < 0)
        return rc;
    if (t->make_socket != NULL && !t->is_unix) {
        fd = t->make_socket(t->make_socket_arg, ss.ss_family);
        if (fd < 0)
            return fd;
    } else
        fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 && errno == EAFNOSUPPORT && t->v4mapped) {
        /* no IPv6 on this host: the IPv4 socket it would have used */
        struct dialer_target plain = *t;
        plain.v4mapped = 0;
        return dialer_connect_now(&plain, in_progress);
    }
    if (fd < 0)
        return uv_translate_sys_error(errno);
    if (t->v4mapped) {
        int off = 0; /* whatever net.ipv6.bindv6only says */
        (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
    }
    if (connect(fd, (struct sockaddr *)&ss, sslen) == 0)
        return fd;
    if (errno != EINPROGRESS && errno != EINTR) { /* EINTR: the connect goes on */
        rc = uv_translate_sys_error(errno);
        close(fd);
        return rc;
    }
    *in_progress = 1;
    return fd;
}

/* Whether the connect() under way on FD has ended, without waiting: 1
 * connected, 0 not yet, or the UV_* error it failed with (SO_ERROR, read
 * and so cleared). */
static int connect_done(int fd)
{
    struct pollfd pfd;

    /* POLLOUT alone means connected (a failed connect shows POLLERR or
     * POLLHUP) */
    pfd.fd = fd;
    pfd.events = POLLOUT;
    pfd.revents = 0;
    if (poll(&pfd, 1, 0) != 1)
        return 0;
    if (pfd.revents != POLLOUT) {
        int rc = connect_result(fd, UV_EBADF); /* reads (and clears) SO_ERROR */
        return rc < 0 ? rc : 1;
    }
    return 1;
}

/* The attempt at d->idx, whose connect() on FD is under way: reported at
 * once if it has finished already (loopback), else watched. Closes FD on
 * failure. */
static int attempt_watch(struct dialer *d, int fd)
{
    uv_poll_t *p;
    int rc, done = connect_done(fd);

    if (done < 0) {
        rc = done;
        goto fail;
    }
    if (done > 0) {
        report_connected(d, fd);
        return 0;
    }

    p = malloc(sizeof(*p));
    if (p == NULL) {
        rc = UV_ENOMEM;
        goto fail;
    }
    rc = uv_poll_init(d->loop, p, fd);
    if (rc < 0) {
        free(p);
        goto fail;
    }
    p->data = d;
    d->poll = p;
    d->fd = fd;
    d->state = DIALER_ST_CONNECTING;
    rc = uv_poll_start(p, UV_WRITABLE, on_poll);
    if (rc < 0) {
        attempt_unwatch(d);
        d->fd = -1;
        goto fail;
    }
    DIALER_CHECK(uv_timer_start(&d->timer, on_timer, d->timeout_ms, 0) == 0);
    return 0;

fail:
    close(fd);
    return rc;
}

/* Starts connecting to targets[d->idx]. 0: CONNECTING or REPORT was entered;
 * < 0: this attempt failed, nothing is left open. */
static int attempt_start(struct dialer *d)
{
    int fd, in_progress;

    fd = dialer_connect_now(&d->targets[d->idx], &in_progress);
    if (fd < 0)
        return fd;
    if (!in_progress) {
        report_connected(d, fd);
        return 0;
    }
    return attempt_watch(d, fd);
}

/* Tries targets from d->idx on until one is under way; when none is left,
 * schedules the failure report. Never calls the callback. */
static void try_next(struct dialer *d)
{
    for (; d->idx < d->n; d->idx++) {
        int rc = attempt_start(d);

        if (rc == 0)
            return;
        note_error(d, rc);
    }
    d->fd = -1;
    d->state = DIALER_ST_REPORT;
    DIALER_CHECK(uv_timer_start(&d->timer, on_timer, 0, 0) == 0);
}

/* The current attempt failed with err: drop it and go on. */
static void attempt_failed(struct dialer *d, int err)
{
    attempt_unwatch(d);
    close(d->fd);
    d->fd = -1;
    note_error(d, err);
    d->idx++;
    try_next(d);
}

static void on_poll(uv_poll_t *h, int status, int events)
{
    struct dialer *d = h->data;
    int err, fd;

    (void)events;
    if (d->state != DIALER_ST_CONNECTING || h != d->poll)
        return; /* cannot happen: a finished attempt's poll is closed */
    err = connect_result(d->fd, status);
    if (err < 0) {
        attempt_failed(d, err);
        return;
    }
    attempt_unwatch(d); /* the fd is no longer registered with the loop */
    fd = d->fd;
    d->fd = -1;
    deliver(d, 0, fd, d->idx);
}

static void on_timer(uv_timer_t *t)
{
    struct dialer *d = container_of(t, struct dialer, timer);
    int fd;

    switch (d->state) {
    case DIALER_ST_CONNECTING:
        attempt_failed(d, UV_ETIMEDOUT);
        break;
    case DIALER_ST_REPORT:
        fd = d->fd;
        d->fd = -1;
        if (fd >= 0)
            deliver(d, 0, fd, d->idx);
        else
            deliver(d, final_error(d), -1, d->n);
        break;
    case DIALER_ST_DONE:
        break;
    }
}

/* ------------------------------------------------------------------------ */
/* API                                                                       */

static int dialer_new(struct dialer **out, uv_loop_t *loop, const struct dialer_target *targets,
                      size_t n, unsigned timeout_ms, dialer_cb cb, void *arg)
{
    struct sockaddr_storage ss;
    socklen_t sslen;
    struct dialer *d;
    size_t i;

    if (out == NULL || loop == NULL || targets == NULL || n == 0 || timeout_ms == 0 || cb == NULL)
        return UV_EINVAL;
    if (n > (SIZE_MAX - sizeof(*d)) / sizeof(*targets))
        return UV_ENOMEM;
    for (i = 0; i < n; i++)
        if (target_sockaddr(&targets[i], &ss, &sslen) < 0)
            return UV_EINVAL;

    d = calloc(1, sizeof(*d) + n * sizeof(*targets));
    if (d == NULL)
        return UV_ENOMEM;
    memcpy(d->targets, targets, n * sizeof(*targets));
    d->n = n;
    d->loop = loop;
    d->cb = cb;
    d->arg = arg;
    d->timeout_ms = timeout_ms;
    d->fd = -1;
    DIALER_CHECK(uv_timer_init(loop, &d->timer) == 0);
    *out = d;
    return 0;
}

int dialer_start(struct dialer **out, uv_loop_t *loop, const struct dialer_target *targets,
                 size_t n, unsigned timeout_ms, dialer_cb cb, void *arg)
{
    int rc = dialer_new(out, loop, targets, n, timeout_ms, cb, arg);

    if (rc == 0)
        try_next(*out);
    return rc;
}

int dialer_start_now(struct dialer **out, uv_loop_t *loop, const struct dialer_target *targets,
                     size_t n, unsigned timeout_ms, dialer_cb cb, void *arg, int *fd,
                     size_t *index)
{
    struct dialer *d;
    int rc = dialer_new(out, loop, targets, n, timeout_ms, cb, arg);

    if (rc < 0)
        return rc;
    d = *out;
    d->now = 1;
    try_next(d);
    d->now = 0;
    if (d->state == DIALER_ST_REPORT && d->fd >= 0) { /* connected at once */
        *fd = d->fd;
        *index = d->idx;
        d->fd = -1;
        finish(d); /* no callback; freed once its timer has closed */
        *out = NULL;
        return 1;
    }
    return 0;
}

void dialer_cancel(struct dialer *d)
{
    if (d == NULL || d->state == DIALER_ST_DONE)
        return;
    attempt_unwatch(d);
    if (d->fd >= 0)
        close(d->fd);
    d->fd = -1;
    finish(d);
}
