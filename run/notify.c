/* run/notify.c - the one server of the seccomp user-notification listener
 * of `sluice run` (inner's filter: connect(), bind(), getpeername() in
 * transparent mode or a guarded run, the write syscalls for the write
 * report). It owns the listener: the uv_poll on it, the batch drain, the
 * end at POLLHUP, the SYNC_WAKE_UP setting; and it dispatches each
 * notification by its (audit arch, syscall number) to the module that
 * routed that syscall here (transparent.c, fswrite.c). A syscall nobody
 * routed (or whose handler did not answer) gets the fallback answer the
 * starter chose. */
#define _GNU_SOURCE
#include "run/notify.h"

#include "common/common.h"

#include <errno.h>
#include <poll.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

/* SECCOMP_IOCTL_NOTIF_SET_FLAGS and its one flag (Linux 6.6; Debian 12's
 * headers predate them) */
#define SLUICE_NOTIF_SET_FLAGS _IOW('!', 4, uint64_t)
#define SLUICE_NOTIF_SYNC_WAKE_UP 1UL

#define NOTIFY_SLOTS 256u /* routes: a few dozen syscalls on up to three ABIs */
#define NOTIFY_BATCH 64   /* notifications read per poll callback */

struct route {
    uint32_t arch; /* 0: slot unused */
    int nr;
    run_notify_fn fn; /* NULL: unrouted again (the key stays for the probes) */
    void *ctx;
};

struct run_notify {
    uv_poll_t poll;
    int notify_fd;
    int fallback; /* errno, 0: CONTINUE */
    uint64_t received; /* notifications read (-d) */
    struct seccomp_notif *notif;
    struct seccomp_notif_resp *resp;
    struct route routes[NOTIFY_SLOTS];
};

static size_t slot_of(uint32_t arch, int nr)
{
    return ((size_t)arch * 31u + (size_t)(unsigned)nr) % NOTIFY_SLOTS;
}

int run_notify_route(struct run_notify *nt, uint32_t arch, int nr, run_notify_fn fn, void *ctx)
{
    size_t s = slot_of(arch, nr);

    if (nr < 0 || arch == 0)
        return 0;
    for (size_t i = 0; i < NOTIFY_SLOTS; i++, s = (s + 1) % NOTIFY_SLOTS) {
        struct route *r = &nt->routes[s];
        if (r->arch == 0 || (r->arch == arch && r->nr == nr)) {
            r->arch = arch;
            r->nr = nr;
            r->fn = fn;
            r->ctx = ctx;
            return 0;
        }
    }
    return UV_ENOSPC;
}

void run_notify_unroute(struct run_notify *nt, const void *ctx)
{
    if (nt == NULL)
        return;
    for (size_t i = 0; i < NOTIFY_SLOTS; i++)
        if (nt->routes[i].arch != 0 && nt->routes[i].ctx == ctx)
            nt->routes[i].fn = NULL;
}

static const struct route *route_of(const struct run_notify *nt, uint32_t arch, int nr)
{
    size_t s = slot_of(arch, nr);

    for (size_t i = 0; i < NOTIFY_SLOTS; i++, s = (s + 1) % NOTIFY_SLOTS) {
        const struct route *r = &nt->routes[s];
        if (r->arch == 0)
            return NULL;
        if (r->arch == arch && r->nr == nr)
            return r->fn != NULL ? r : NULL;
    }
    return NULL;
}

int run_notify_fd(const struct run_notify *nt)
{
    return nt != NULL ? nt->notify_fd : -1;
}

uint64_t run_notify_received(const struct run_notify *nt)
{
    return nt != NULL ? nt->received : 0;
}

/* The next notification waiting on the listener, read into nt->notif
 * without blocking: 1 when one was read, 0 when none is waiting or it went
 * away before it was read (ENOENT). A listener with no task left under its
 * filter (POLLHUP) also stops the poll. */
static int next(struct run_notify *nt)
{
    struct pollfd pf = {.fd = nt->notify_fd, .events = POLLIN};

    if (poll(&pf, 1, 0) != 1)
        return 0;
    if ((pf.revents & POLLIN) == 0) {
        /* POLLHUP: no task is left under the filter (the command and all
         * its children are gone); nothing more will come */
        if (pf.revents & (POLLHUP | POLLERR | POLLNVAL))
            (void)uv_poll_stop(&nt->poll);
        return 0;
    }
    memset(nt->notif, 0, sizeof(*nt->notif));
    return seccomp_notify_receive(nt->notify_fd, nt->notif) == 0;
}

static void answer_fallback(struct run_notify *nt, uint64_t id)
{
    memset(nt->resp, 0, sizeof(*nt->resp));
    nt->resp->id = id;
    nt->resp->error = -nt->fallback;
    nt->resp->flags = nt->fallback == 0 ? SECCOMP_USER_NOTIF_FLAG_CONTINUE : 0;
    (void)seccomp_notify_respond(nt->notify_fd, nt->resp); /* ENOENT: the caller is gone */
}

static void on_notify(uv_poll_t *p, int status, int events)
{
    struct run_notify *nt = container_of(p, struct run_notify, poll);

    if (status < 0 || (events & UV_READABLE) == 0)
        return;
    for (int i = 0; i < NOTIFY_BATCH && next(nt); i++) {
        const struct route *r = route_of(nt, nt->notif->data.arch, nt->notif->data.nr);
        nt->received++;
        if (r == NULL || !r->fn(r->ctx, nt->notify_fd, nt->notif))
            answer_fallback(nt, nt->notif->id);
    }
}

/* Asks the kernel to hand each notification, and each answer, straight to
 * the waiting task on the current CPU (SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP):
 * the caller and its server take turns, so a wake-up on the other CPU only
 * adds latency. Before Linux 6.6 (EINVAL, ENOTTY) the plain wake-up is
 * kept. */
static void sync_wake_up(int notify_fd)
{
    /* the flag is the argument itself, not a pointer to it */
    (void)ioctl(notify_fd, SLUICE_NOTIF_SET_FLAGS, (unsigned long)SLUICE_NOTIF_SYNC_WAKE_UP);
}

int run_notify_start(struct run_notify **out, uv_loop_t *loop, int notify_fd, int fallback,
                     const char *what, char *err, size_t errlen)
{
    struct run_notify *nt = calloc(1, sizeof(*nt));
    int rc = 0;

    *out = NULL;
    if (nt != NULL)
        rc = seccomp_notify_alloc(&nt->notif, &nt->resp);
    if (nt == NULL || rc < 0) {
        snprintf(err, errlen, "%s: %s", what,
                 nt == NULL ? "out of memory" : "seccomp_notify_alloc failed");
        free(nt);
        close(notify_fd);
        return UV_ENOMEM;
    }
    nt->notify_fd = notify_fd;
    nt->fallback = fallback;
    sync_wake_up(notify_fd);
    rc = uv_poll_init(loop, &nt->poll, notify_fd);
    if (rc < 0) {
        seccomp_notify_free(nt->notif, nt->resp);
        free(nt);
        close(notify_fd);
        snprintf(err, errlen, "%s: uv_poll_init: %s", what, uv_strerror(rc));
        return rc;
    }
    nt->poll.data = nt;
    *out = nt;
    rc = uv_poll_start(&nt->poll, UV_READABLE, on_notify);
    if (rc < 0) {
        snprintf(err, errlen, "%s: uv_poll_start: %s", what, uv_strerror(rc));
        return rc;
    }
    return 0;
}

static void on_closed(uv_handle_t *h)
{
    struct run_notify *nt = h->data;

    close(nt->notify_fd);
    seccomp_notify_free(nt->notif, nt->resp);
    free(nt);
}

void run_notify_close(struct run_notify *nt)
{
    if (nt == NULL)
        return;
    uv_close((uv_handle_t *)&nt->poll, on_closed);
}
