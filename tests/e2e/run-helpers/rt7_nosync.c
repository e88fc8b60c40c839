/* tests/e2e/run-helpers/rt7_nosync.c - LD_PRELOAD for `sluice run` (rt-7):
 * ioctl(SECCOMP_IOCTL_NOTIF_SET_FLAGS) fails with EINVAL, as on a kernel
 * before Linux 6.6 (no SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP); every other
 * ioctl goes to the kernel. Each refusal appends a line to $RT7_NOSYNC_LOG. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int ioctl(int fd, unsigned long req, ...)
{
    va_list ap;
    unsigned long arg;

    va_start(ap, req);
    arg = va_arg(ap, unsigned long);
    va_end(ap);
    if (req == (unsigned long)_IOW('!', 4, uint64_t)) {
        const char *log = getenv("RT7_NOSYNC_LOG");
        if (log != NULL) {
            int l = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
            if (l >= 0) {
                (void)!write(l, "refused\n", 8);
                close(l);
            }
        }
        errno = EINVAL;
        return -1;
    }
    return (int)syscall(SYS_ioctl, fd, req, arg);
}
