/* proxy/notify.c - the systemd notify protocol, by hand (sd_notify(3)):
 * one datagram per state change on $NOTIFY_SOCKET, and the watchdog.
 *
 * No libsystemd: the protocol is a datagram of NEWLINE-separated
 * VARIABLE=value lines sent to a Unix socket, and the proxy needs five of
 * them. A send that fails (the manager is gone, its queue is full) is not an
 * error for the proxy: it keeps serving.
 */
#include "proxy/ops.h"

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#define NOTIFY_MSG_MAX 1024

struct notify {
    int fd;
    struct sockaddr_un addr;
    socklen_t addrlen;
    uv_timer_t watchdog;
    int has_watchdog;
    notify_status_fn status_fn;
    void *ctx;
    void (*close_cb)(void *arg);
    void *close_arg;
};

static void send_msg(struct notify *n, const char *msg)
{
    ssize_t rc;

    do
        rc = sendto(n->fd, msg, strlen(msg), MSG_NOSIGNAL | MSG_DONTWAIT,
                    (const struct sockaddr *)&n->addr, n->addrlen);
    while (rc < 0 && errno == EINTR);
}

/* Sends head, then STATUS= when there is a status function. */
static void send_with_status(struct notify *n, const char *head)
{
    char msg[NOTIFY_MSG_MAX], status[NOTIFY_MSG_MAX - 64];

    if (n == NULL)
        return;
    status[0] = '\0';
    if (n->status_fn != NULL)
        n->status_fn(n->ctx, status, sizeof(status));
    /* STATUS= is one line: the protocol separates variables by newlines */
    for (char *p = status; *p != '\0'; p++)
        if (*p == '\n')
            *p = ' ';
    snprintf(msg, sizeof(msg), "%s%sSTATUS=%s", head, head[0] != '\0' ? "\n" : "", status);
    send_msg(n, msg);
}

static void on_watchdog(uv_timer_t *t)
{
    struct notify *n = t->data;

    send_with_status(n, "WATCHDOG=1");
}

/* $WATCHDOG_USEC when it is meant for this process, else 0. */
static uint64_t watchdog_usec(void)
{
    const char *us = getenv("WATCHDOG_USEC"), *pid = getenv("WATCHDOG_PID");
    char *end;
    unsigned long long v;

    if (us == NULL)
        return 0;
    if (pid != NULL) {
        errno = 0;
        v = strtoull(pid, &end, 10);
        if (errno != 0 || *end != '\0' || v != (unsigned long long)getpid())
            return 0;
    }
    errno = 0;
    v = strtoull(us, &end, 10);
    if (errno != 0 || *end != '\0' || end == us)
        return 0;
    return v;
}

int notify_open(struct notify **out, uv_loop_t *loop, notify_status_fn status_fn, void *ctx,
                const char **why)
{
    const char *path = getenv("NOTIFY_SOCKET");
    struct notify *n;
    size_t len;
    uint64_t wd;

    *out = NULL;
    if (path == NULL || path[0] == '\0')
        return 0;
    len = strlen(path);
    if ((path[0] != '/' && path[0] != '@') || len >= sizeof(n->addr.sun_path)) {
        *why = "NOTIFY_SOCKET is not an absolute path or an @abstract name that fits a Unix address";
        return -EINVAL;
    }
    n = calloc(1, sizeof(*n));
    if (n == NULL) {
        *why = "out of memory";
        return -ENOMEM;
    }
    n->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (n->fd < 0) {
        int e = errno;
        free(n);
        *why = "cannot create a datagram socket for NOTIFY_SOCKET";
        return -e;
    }
    n->addr.sun_family = AF_UNIX;
    memcpy(n->addr.sun_path, path, len);
    if (path[0] == '@')
        n->addr.sun_path[0] = '\0';
    n->addrlen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len +
                             (path[0] == '@' ? 0 : 1));
    n->status_fn = status_fn;
    n->ctx = ctx;
    uv_timer_init(loop, &n->watchdog);
    n->watchdog.data = n;
    wd = watchdog_usec();
    if (wd > 0) {
        uint64_t ms = wd / 2000;
        n->has_watchdog = 1;
        uv_timer_start(&n->watchdog, on_watchdog, ms > 0 ? ms : 1, ms > 0 ? ms : 1);
    }
    uv_unref((uv_handle_t *)&n->watchdog);
    /* our children (an exec: ask handler) must not talk for us */
    unsetenv("NOTIFY_SOCKET");
    unsetenv("WATCHDOG_USEC");
    unsetenv("WATCHDOG_PID");
    *out = n;
    return 0;
}

void notify_ready(struct notify *n)
{
    send_with_status(n, "READY=1");
}

void notify_reloading(struct notify *n)
{
    char head[96];
    struct timespec ts;

    if (n == NULL)
        return;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    snprintf(head, sizeof(head), "RELOADING=1\nMONOTONIC_USEC=%llu",
             (unsigned long long)ts.tv_sec * 1000000ULL + (unsigned long long)ts.tv_nsec / 1000ULL);
    send_with_status(n, head);
}

void notify_stopping(struct notify *n)
{
    send_with_status(n, "STOPPING=1");
}

void notify_status(struct notify *n)
{
    send_with_status(n, "");
}

static void on_closed(uv_handle_t *h)
{
    struct notify *n = h->data;
    void (*cb)(void *) = n->close_cb;
    void *arg = n->close_arg;

    free(n);
    if (cb != NULL)
        cb(arg);
}

void notify_close(struct notify *n, void (*cb)(void *arg), void *arg)
{
    if (n == NULL) {
        if (cb != NULL)
            cb(arg);
        return;
    }
    close(n->fd);
    n->close_cb = cb;
    n->close_arg = arg;
    uv_close((uv_handle_t *)&n->watchdog, on_closed);
}
