/* tests/e2e/run-helpers/rt18_cgkill.c - LD_PRELOAD for `sluice run` as root
 * (rt-18): the launcher killed, or one of its cgroup writes refused, at an
 * exact moment of the pids cgroup's use (sandbox/limits.c, run/spawn.c),
 * instead of at a time that load moves. RT18_CG names the moment:
 *
 *   joined   SIGKILL right after the spawning thread wrote "0" to the run
 *            cgroup's `tasks` (it is in the cgroup, bwrap not started);
 *   spawned  SIGKILL as that thread opens its own cgroup's `tasks` to move
 *            back (bwrap started in the cgroup, the thread still in it);
 *   noleave  that open fails with EACCES (the thread cannot move back);
 *   noseal   the second write of the run cgroup's pids.max (the seal,
 *            before the go byte) cannot be opened (EACCES).
 *
 * Every other call goes to the kernel. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static int join_fd = -1, joined, nmax;

static int mode(const char *m)
{
    const char *v = getenv("RT18_CG");

    return v != NULL && strcmp(v, m) == 0;
}

static int ends(const char *s, const char *tail)
{
    size_t n = strlen(s), t = strlen(tail);

    return n >= t && strcmp(s + n - t, tail) == 0;
}

int open(const char *path, int flags, ...)
{
    const char *run = strstr(path, "sluice-run.");
    mode_t m = 0;
    int fd;

    if (flags & (O_CREAT | O_TMPFILE)) {
        va_list ap;
        va_start(ap, flags);
        m = va_arg(ap, mode_t);
        va_end(ap);
    }
    if (run == NULL && joined && ends(path, "/tasks")) {
        if (mode("spawned"))
            kill(getpid(), SIGKILL);
        if (mode("noleave")) {
            errno = EACCES;
            return -1;
        }
    }
    if (run != NULL && ends(run, "/pids.max") && ++nmax == 2 && mode("noseal")) {
        errno = EACCES;
        return -1;
    }
    fd = (int)syscall(SYS_openat, AT_FDCWD, path, flags, m);
    if (fd >= 0 && run != NULL && ends(run, "/tasks"))
        join_fd = fd;
    return fd;
}

int open64(const char *path, int flags, ...) __attribute__((alias("open")));

ssize_t write(int fd, const void *buf, size_t n)
{
    ssize_t r = syscall(SYS_write, fd, buf, n);

    if (fd == join_fd && r > 0) {
        join_fd = -1;
        joined = 1;
        if (mode("joined"))
            kill(getpid(), SIGKILL);
    }
    return r;
}
