/* run/spawn.c - bwrap as a process (issue 25: start-up at the floor).
 *
 * bwrap is started with posix_spawn, which glibc implements with
 * clone(CLONE_VM | CLONE_VFORK): the launcher's page tables are not
 * copied, and none of its pages is write-protected for copy on write
 * while bwrap starts (libuv's uv_spawn forks, and the launcher went on
 * faulting its own pages back for the rest of the run). What is left
 * between the spawn and bwrap's execve is the exec itself. The child gets
 * the launcher's environment plan, stdin, stdout and
 * stderr, inner's end of the socketpair as RUN_INNER_FD and, for a
 * read-only file on 0-2 that bwrap re-binds, /dev/null on N and the file on
 * SB_STDIO_RO_PASS + N; every signal back to its default action and none
 * blocked (the launcher ignores SIGPIPE).
 *
 * Its exit is watched on a pidfd in the loop (Linux 5.3), or where there
 * is none on SIGCHLD; either way the launcher waits for bwrap's pid only,
 * never for any child (the reaper and the transparent mode's helpers are
 * waited for by their owners). Signals go through the pidfd while bwrap
 * has not been waited for, so never to a recycled pid. */
#define _GNU_SOURCE
#include "run/launch-int.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define RUN_SPAWN_HIGH_FD 64 /* sources of the child's dup2s are moved above this */

extern char **environ;

static void on_watch_closed(uv_handle_t *h)
{
    (void)h;
}

/* bwrap is gone (or still there: then nothing happens). */
static void reap(struct run *run)
{
    pid_t r;
    int st = 0;

    if (run->proc_exited || run->bwrap_pid <= 0)
        return;
    do
        r = waitpid(run->bwrap_pid, &st, WNOHANG);
    while (r < 0 && errno == EINTR);
    if (r != run->bwrap_pid)
        return;
    if (run->bwrap_watching) {
        uv_close((uv_handle_t *)&run->bwrap_watch, on_watch_closed);
        run->bwrap_watching = 0;
    }
    if (run->bwrap_pidfd >= 0) {
        close(run->bwrap_pidfd);
        run->bwrap_pidfd = -1;
    }
    run_bwrap_exited(run, WIFEXITED(st) ? WEXITSTATUS(st) : 0,
                     WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

static void on_pidfd(uv_poll_t *h, int status, int events)
{
    (void)status;
    (void)events;
    reap(h->data);
}

static void on_sigchld(uv_signal_t *h, int signum)
{
    (void)signum;
    reap(h->data);
}

/* FD moved to RUN_SPAWN_HIGH_FD or above (CLOEXEC), so that no dup2 of the
 * child overwrites a source another one still needs. The new descriptor,
 * or -1. FD is closed either way. */
static int move_high(int fd)
{
    int n = fcntl(fd, F_DUPFD_CLOEXEC, RUN_SPAWN_HIGH_FD);

    close(fd);
    return n;
}

/* The child's descriptors: 3 is inner's end, RUN_BWRAP_INFO_FD the
 * reaper's pipe (INFO, -1: none), 0-2 stay (or become /dev/null when
 * bwrap re-binds them: the file goes on SB_STDIO_RO_PASS + N first). */
static int file_actions(struct run *run, posix_spawn_file_actions_t *fa, int inner, int info,
                        int devnull)
{
    int rc = 0;

    for (int i = 0; i < 3 && rc == 0; i++)
        if (run->stdio_ro & (1U << i))
            rc = posix_spawn_file_actions_adddup2(fa, i, SB_STDIO_RO_PASS + i);
    for (int i = 0; i < 3 && rc == 0; i++)
        if (run->stdio_ro & (1U << i))
            rc = posix_spawn_file_actions_adddup2(fa, devnull, i);
    if (rc == 0)
        rc = posix_spawn_file_actions_adddup2(fa, inner, RUN_INNER_FD);
    if (rc == 0 && info >= 0)
        rc = posix_spawn_file_actions_adddup2(fa, info, RUN_BWRAP_INFO_FD);
    return rc;
}

/* Starts watching bwrap's exit. 0 or a negative UV_E* error. */
static int watch(struct run *run)
{
    int rc;

#ifdef SYS_pidfd_open
    run->bwrap_pidfd = (int)syscall(SYS_pidfd_open, run->bwrap_pid, 0U);
#else
    run->bwrap_pidfd = -1;
#endif
    if (run->bwrap_pidfd >= 0) {
        (void)fcntl(run->bwrap_pidfd, F_SETFD, FD_CLOEXEC);
        rc = uv_poll_init(&run->loop, &run->bwrap_watch.poll, run->bwrap_pidfd);
        if (rc < 0)
            return rc;
        run->bwrap_watch.poll.data = run;
        run->bwrap_watching = 1;
        return uv_poll_start(&run->bwrap_watch.poll, UV_READABLE, on_pidfd);
    }
    uv_signal_init(&run->loop, &run->bwrap_watch.sig);
    run->bwrap_watch.sig.data = run;
    run->bwrap_watching = 1;
    rc = uv_signal_start(&run->bwrap_watch.sig, on_sigchld, SIGCHLD);
    if (rc == 0)
        reap(run); /* it may have gone before the handler was there */
    return rc;
}

int run_spawn_bwrap(struct run *run, char *err, size_t errlen)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    sigset_t all, none;
    int inner = -1, info = -1, devnull = -1, rc, left = 0;
    char lerr[256] = "";
    pid_t pid;

    /* every signal, glibc's own two (32, 33: SIGCANCEL, SIGSETXID) too:
     * sigfillset leaves them out, and glibc's posix_spawn sets a signal of
     * its own that is not in the default set to SIG_IGN in the child
     * (rt-8: the command ran with 32 and 33 ignored, which uv_spawn reset) */
    memset(&all, 0xff, sizeof all);
    sigemptyset(&none);
    inner = fcntl(run->sp[1], F_DUPFD_CLOEXEC, RUN_SPAWN_HIGH_FD);
    /* the plan names --info-fd when the reaper has a pipe for it */
    if (inner >= 0 && run->reaper.info_fd >= 0) {
        info = fcntl(run->reaper.info_fd, F_DUPFD_CLOEXEC, RUN_SPAWN_HIGH_FD);
        if (info < 0) {
            close(inner);
            inner = -1;
        }
    }
    sb_reaper_info_sent(&run->reaper); /* bwrap's copy, if any, is INFO */
    if (inner < 0) {
        snprintf(err, errlen, "cannot start %s: %s", run->plan.argv.v[0], strerror(errno));
        return -1;
    }
    if (run->stdio_ro != 0) {
        devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (devnull >= 0)
            devnull = move_high(devnull);
        if (devnull < 0) {
            snprintf(err, errlen, "/dev/null: %s", strerror(errno));
            close(inner);
            if (info >= 0)
                close(info);
            return -1;
        }
    }
    rc = posix_spawn_file_actions_init(&fa);
    if (rc == 0) {
        rc = posix_spawnattr_init(&attr);
        if (rc != 0)
            posix_spawn_file_actions_destroy(&fa);
    }
    if (rc == 0) {
        rc = file_actions(run, &fa, inner, info, devnull);
        if (rc == 0)
            rc = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
        if (rc == 0)
            rc = posix_spawnattr_setsigdefault(&attr, &all);
        if (rc == 0)
            rc = posix_spawnattr_setsigmask(&attr, &none);
        /* bwrap born in the pids cgroup (limits.c), this thread back out */
        if (rc == 0 && run->cgroup_rc == 0)
            (void)sb_cgroup_join(&run->cgroup);
        if (rc == 0)
            rc = posix_spawnp(&pid, run->plan.argv.v[0], &fa, &attr, run->plan.argv.v,
                              run->env.v);
        left = sb_cgroup_leave(&run->cgroup, lerr, sizeof lerr);
        posix_spawnattr_destroy(&attr);
        posix_spawn_file_actions_destroy(&fa);
    }
    close(inner);
    if (info >= 0)
        close(info);
    if (devnull >= 0)
        close(devnull);
    if (rc != 0) {
        snprintf(err, errlen, "cannot start %s: %s", run->plan.argv.v[0], strerror(rc));
        return -1;
    }
    run->bwrap_pid = (int)pid;
    run->proc_started = 1;
    /* the reaper first: a launcher killed from here on leaves a bwrap that
     * may not yet die with it (its own PR_SET_PDEATHSIG comes after its
     * clone), and only a reaper that waits for it cleans up after it */
    sb_reaper_watch(&run->reaper, run->bwrap_pid);
    rc = watch(run);
    if (rc < 0) {
        snprintf(err, errlen, "cannot watch %s: %s", run->plan.argv.v[0], uv_strerror(rc));
        run_kill(run, SIGKILL);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
        run->proc_exited = 1;
        return -1;
    }
    if (left < 0) {
        /* the launcher's thread is in the command's cgroup: the run is
         * given up, but not by killing bwrap now, whose child could be left
         * waiting for its uid map forever (rt-18): abort_early() */
        snprintf(err, errlen, "%s", lerr);
        return -2;
    }
    return 0;
}

void run_kill(struct run *run, int sig)
{
    if (!run->proc_started || run->proc_exited || run->bwrap_pid <= 0)
        return;
#ifdef SYS_pidfd_send_signal
    if (run->bwrap_pidfd >= 0 &&
        syscall(SYS_pidfd_send_signal, run->bwrap_pidfd, sig, NULL, 0U) == 0)
        return;
#endif
    (void)kill(run->bwrap_pid, sig);
}
