/* proxy/helper.c - a credential helper program (helper.h). */
#define _GNU_SOURCE
#include "proxy/helper.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define REAP_MS 20

extern char **environ;

struct proxy_helper {
    uv_pipe_t out;
    uv_poll_t exitp; /* the pidfd (only initialised with one) */
    uv_timer_t reap; /* without a pidfd (kernel < 5.3, valgrind): waitpid every REAP_MS */
    uv_timer_t timer;
    pid_t pid;
    int pidfd;
    uint8_t *buf;
    size_t len, cap, max;
    unsigned exited : 1, eof : 1, failed : 1, cancelled : 1, finishing : 1;
    int status;
    unsigned open; /* handles not yet closed */
    unsigned timeout_ms;
    char why[160];
    char rbuf[4096];
    proxy_helper_cb cb;
    void *arg;
};

static void wipe(struct proxy_helper *h)
{
    if (h->buf != NULL)
        explicit_bzero(h->buf, h->len);
    free(h->buf);
    h->buf = NULL;
    explicit_bzero(h->rbuf, sizeof(h->rbuf));
}

static void on_closed(uv_handle_t *hd)
{
    struct proxy_helper *h = hd->data;

    if (--h->open > 0)
        return;
    if (!h->cancelled) {
        int ok = !h->failed && WIFEXITED(h->status) && WEXITSTATUS(h->status) == 0;
        if (!ok && !h->failed) {
            if (WIFEXITED(h->status))
                snprintf(h->why, sizeof(h->why), "exit status %d", WEXITSTATUS(h->status));
            else if (WIFSIGNALED(h->status))
                snprintf(h->why, sizeof(h->why), "killed by signal %d", WTERMSIG(h->status));
            else
                snprintf(h->why, sizeof(h->why), "ended abnormally");
        }
        h->cb(h->arg, ok, h->buf != NULL ? h->buf : (const uint8_t *)"", h->len,
              ok ? NULL : h->why);
    }
    wipe(h);
    if (h->pidfd >= 0)
        close(h->pidfd);
    free(h);
}

static void finish(struct proxy_helper *h)
{
    if (h->finishing)
        return;
    h->finishing = 1;
    h->open = h->pidfd >= 0 ? 4 : 3;
    uv_close((uv_handle_t *)&h->out, on_closed);
    uv_close((uv_handle_t *)&h->reap, on_closed);
    if (h->pidfd >= 0)
        uv_close((uv_handle_t *)&h->exitp, on_closed);
    uv_close((uv_handle_t *)&h->timer, on_closed);
}

static void maybe_finish(struct proxy_helper *h)
{
    if (h->exited && (h->eof || h->failed))
        finish(h);
}

/* Kills the helper and what it started: its process group (its own, from
 * the spawn), while the group is still ours: the helper not reaped yet, or
 * its stdout still open (a process it started holds it: rt-15, a child
 * that kept stdout outlived the timeout, one more each retry). */
static void kill_group(struct proxy_helper *h)
{
    if (!h->exited || !h->eof)
        (void)kill(-h->pid, SIGKILL);
}

/* It failed (why): killed, so that it exits. */
static void fail(struct proxy_helper *h, const char *why)
{
    if (!h->failed) {
        h->failed = 1;
        snprintf(h->why, sizeof(h->why), "%s", why);
    }
    kill_group(h);
    uv_read_stop((uv_stream_t *)&h->out);
    h->eof = 1;
    maybe_finish(h);
}

static void on_alloc(uv_handle_t *hd, size_t suggested, uv_buf_t *b)
{
    struct proxy_helper *h = hd->data;

    (void)suggested;
    *b = uv_buf_init(h->rbuf, sizeof(h->rbuf));
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    struct proxy_helper *h = s->data;
    char why[80];

    (void)b;
    if (n == 0)
        return;
    if (n < 0) {
        uv_read_stop(s);
        h->eof = 1;
        maybe_finish(h);
        return;
    }
    if (h->len + (size_t)n > h->max) {
        snprintf(why, sizeof(why), "its output is over %zu bytes", h->max);
        fail(h, why);
        return;
    }
    if (h->len + (size_t)n > h->cap) {
        size_t cap = h->len + (size_t)n > 2 * h->cap ? h->len + (size_t)n : 2 * h->cap;
        uint8_t *nb = malloc(cap);
        if (nb == NULL) {
            fail(h, "out of memory");
            return;
        }
        if (h->buf != NULL) {
            memcpy(nb, h->buf, h->len);
            explicit_bzero(h->buf, h->len);
        }
        free(h->buf);
        h->buf = nb;
        h->cap = cap;
    }
    memcpy(h->buf + h->len, h->rbuf, (size_t)n);
    h->len += (size_t)n;
}

/* It may have exited: reaped when it has (its pid is ours until then). */
static void try_reap(struct proxy_helper *h)
{
    pid_t r;

    if (h->exited)
        return;
    do
        r = waitpid(h->pid, &h->status, WNOHANG);
    while (r < 0 && errno == EINTR);
    if (r != h->pid)
        return;
    h->exited = 1;
    if (h->pidfd >= 0)
        uv_poll_stop(&h->exitp);
    uv_timer_stop(&h->reap);
    maybe_finish(h);
}

static void on_exit_ready(uv_poll_t *p, int status, int events)
{
    (void)status;
    (void)events;
    try_reap(p->data);
}

static void on_reap_tick(uv_timer_t *t)
{
    try_reap(t->data);
}

static void on_timeout(uv_timer_t *t)
{
    struct proxy_helper *h = t->data;
    char why[80];

    snprintf(why, sizeof(why), "it timed out after %u ms", h->timeout_ms);
    fail(h, why);
}

static char **helper_env; /* NULL: environ */

void proxy_helper_set_env(char **env)
{
    helper_env = env;
}

/* posix_spawn with stdout on wfd, stdin and stderr on devnull, nothing
 * else. 0 or a positive errno. */
static int spawn(char *const argv[], int wfd, int devnull, pid_t *pid)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    sigset_t all, none;
    int rc;

    memset(&all, 0xff, sizeof all); /* glibc's own signals too (run/spawn.c) */
    sigemptyset(&none);
    rc = posix_spawn_file_actions_init(&fa);
    if (rc != 0)
        return rc;
    rc = posix_spawnattr_init(&attr);
    if (rc != 0) {
        posix_spawn_file_actions_destroy(&fa);
        return rc;
    }
    rc = posix_spawn_file_actions_adddup2(&fa, devnull, 0);
    if (rc == 0)
        rc = posix_spawn_file_actions_adddup2(&fa, wfd, 1);
    if (rc == 0)
        rc = posix_spawn_file_actions_adddup2(&fa, devnull, 2);
    if (rc == 0)
        rc = posix_spawn_file_actions_addclosefrom_np(&fa, 3);
    /* in "/", never a directory a sandbox may write (a project's .git/config
     * would run code of its choosing in a git-based helper) */
    if (rc == 0)
        rc = posix_spawn_file_actions_addchdir_np(&fa, "/");
    if (rc == 0) /* a group of its own: killed whole (kill_group) */
        rc = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK |
                                                 POSIX_SPAWN_SETPGROUP);
    if (rc == 0)
        rc = posix_spawnattr_setpgroup(&attr, 0);
    if (rc == 0)
        rc = posix_spawnattr_setsigdefault(&attr, &all);
    if (rc == 0)
        rc = posix_spawnattr_setsigmask(&attr, &none);
    if (rc == 0)
        rc = posix_spawn(pid, argv[0], &fa, &attr, argv, helper_env != NULL ? helper_env : environ);
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&fa);
    return rc;
}

int proxy_helper_start(uv_loop_t *loop, char *const argv[], unsigned timeout_ms, size_t max_out,
                       proxy_helper_cb cb, void *arg, struct proxy_helper **out)
{
    struct proxy_helper *h;
    int p[2], devnull, rc;

    if (argv == NULL || argv[0] == NULL || argv[0][0] != '/')
        return -EINVAL;
    h = calloc(1, sizeof(*h));
    if (h == NULL)
        return -ENOMEM;
    h->pidfd = -1;
    if (pipe2(p, O_CLOEXEC) < 0) {
        rc = -errno;
        free(h);
        return rc;
    }
    devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    rc = devnull < 0 ? errno : spawn(argv, p[1], devnull, &h->pid);
    close(p[1]);
    if (devnull >= 0)
        close(devnull);
    if (rc == 0) /* -1 where there is none: polled with waitpid instead */
        h->pidfd = (int)syscall(SYS_pidfd_open, h->pid, 0U);
    if (rc != 0) {
        close(p[0]);
        free(h);
        return -rc;
    }
    if (h->pidfd >= 0)
        (void)fcntl(h->pidfd, F_SETFD, FD_CLOEXEC);
    h->max = max_out;
    h->timeout_ms = timeout_ms;
    h->cb = cb;
    h->arg = arg;
    uv_pipe_init(loop, &h->out, 0);
    if (h->pidfd >= 0)
        uv_poll_init(loop, &h->exitp, h->pidfd);
    uv_timer_init(loop, &h->timer);
    uv_timer_init(loop, &h->reap);
    h->out.data = h->exitp.data = h->timer.data = h->reap.data = h;
    rc = uv_pipe_open(&h->out, p[0]);
    if (rc == 0)
        rc = uv_read_start((uv_stream_t *)&h->out, on_alloc, on_read);
    else
        close(p[0]);
    if (rc == 0)
        rc = h->pidfd >= 0 ? uv_poll_start(&h->exitp, UV_READABLE, on_exit_ready)
                           : uv_timer_start(&h->reap, on_reap_tick, REAP_MS, REAP_MS);
    if (rc == 0)
        rc = uv_timer_start(&h->timer, on_timeout, timeout_ms, 0);
    *out = h;
    if (rc < 0) { /* cb says so, from the close callbacks */
        (void)kill(-h->pid, SIGKILL);
        while (waitpid(h->pid, &h->status, 0) < 0 && errno == EINTR)
            ;
        h->exited = 1;
        fail(h, "it cannot be watched on the loop");
    }
    return 0;
}

void proxy_helper_cancel(struct proxy_helper *h)
{
    if (h == NULL || h->cancelled)
        return;
    h->cancelled = 1;
    kill_group(h);
    if (!h->exited) {
        while (waitpid(h->pid, NULL, 0) < 0 && errno == EINTR)
            ;
        h->exited = 1;
    }
    finish(h);
}
