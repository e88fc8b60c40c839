/* tests/e2e/run-helpers/rt8_noexport.c - LD_PRELOAD for `sluice run` (rt-8):
 * libseccomp's seccomp_export_bpf fails with -ENOSYS, as where the launcher
 * cannot compile the filters (valgrind's seccomp(2) probes). The launcher
 * then sends no 'F' and inner, which does not get LD_PRELOAD (sandbox/env.c
 * drops it), builds and loads its own filters after 'G'. Each refusal
 * appends a line to $RT8_NOEXPORT_LOG. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

int seccomp_export_bpf(const void *ctx, int fd)
{
    const char *log = getenv("RT8_NOEXPORT_LOG");

    (void)ctx;
    (void)fd;
    if (log != NULL) {
        int l = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        if (l >= 0) {
            (void)!write(l, "refused\n", 8);
            close(l);
        }
    }
    return -ENOSYS;
}
