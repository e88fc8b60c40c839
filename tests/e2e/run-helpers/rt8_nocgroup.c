/* tests/e2e/run-helpers/rt8_nocgroup.c - LD_PRELOAD for `sluice run` (rt-8):
 * mkdir of a "sluice-run." pids cgroup fails with EACCES, so that a
 * sandbox.limits.processes set in the settings is refused after bwrap has
 * started (issue 25 moved the cgroup's creation behind the spawn: the
 * launcher's abort_early path). Every other mkdir goes to the kernel. */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

int mkdir(const char *path, mode_t mode)
{
    if (path != NULL && strstr(path, "sluice-run.") != NULL) {
        errno = EACCES;
        return -1;
    }
    return (int)syscall(SYS_mkdirat, -100, path, mode);
}
