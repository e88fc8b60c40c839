/* tests/e2e/run-helpers/rt8_nocgroup.c - LD_PRELOAD for `sluice run` (rt-8):
 * a root's sandbox.limits.processes that cannot be enforced is refused,
 * with the command not run and nothing left.
 *
 *   - by default, mkdir of a "sluice-run." pids cgroup fails with EACCES
 *     (refused before bwrap starts);
 *   - with RT8_NOCG_LATE set (not empty), the cgroup is made but neither its `tasks`
 *     (bwrap born in it) nor its cgroup.procs (inner moved in) can be
 *     opened: refused after bwrap has started (the launcher's kill path).
 *
 * Every other call goes to the kernel. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static int late(void)
{
    const char *v = getenv("RT8_NOCG_LATE");

    return v != NULL && *v != '\0';
}

int mkdir(const char *path, mode_t mode)
{
    if (!late() && strstr(path, "sluice-run.") != NULL) {
        errno = EACCES;
        return -1;
    }
    return (int)syscall(SYS_mkdirat, AT_FDCWD, path, mode);
}

static int refused(const char *path)
{
    const char *c = path != NULL ? strstr(path, "sluice-run.") : NULL;

    return late() && c != NULL &&
           (strstr(c, "/tasks") != NULL || strstr(c, "/cgroup.procs") != NULL);
}

int open(const char *path, int flags, ...)
{
    mode_t mode = 0;

    if (flags & (O_CREAT | O_TMPFILE)) {
        va_list ap;
        va_start(ap, flags);
        mode = va_arg(ap, mode_t);
        va_end(ap);
    }
    if (refused(path)) {
        errno = EACCES;
        return -1;
    }
    return (int)syscall(SYS_openat, AT_FDCWD, path, flags, mode);
}

int open64(const char *path, int flags, ...) __attribute__((alias("open")));
