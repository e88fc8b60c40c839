/* common/sys.c - monotonic clocks, whole writes and descriptor passing
 * (common.h): libc only, so that sluice-inner (cli/inner_main.c), the
 * first program in the sandbox, links none of sluice's libraries. */
#include "common/common.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

int64_t common_mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t common_mono_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int common_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;

    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -errno;
        if (w == 0)
            return -EIO;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

int common_send_fds(int sock, const void *data, size_t len, const int *fds, size_t n)
{
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int) * COMMON_FDS_MAX)];
    } ctl;
    struct iovec iov = {.iov_base = (void *)data, .iov_len = len};
    struct msghdr msg;
    ssize_t r;

    if (n > COMMON_FDS_MAX)
        return -EINVAL;
    memset(&msg, 0, sizeof(msg));
    memset(&ctl, 0, sizeof(ctl));
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (n > 0) {
        struct cmsghdr *c;
        msg.msg_control = ctl.buf;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * n);
        c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * n);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
    }
    do
        r = sendmsg(sock, &msg, MSG_NOSIGNAL);
    while (r < 0 && errno == EINTR);
    if (r < 0)
        return -errno;
    return (size_t)r == len ? 0 : -EIO;
}

ssize_t common_recv_fds(int sock, void *data, size_t len, int flags, int *fds, size_t max,
                        size_t *n, int *msg_flags)
{
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int) * COMMON_FDS_MAX)];
    } ctl;
    struct iovec iov = {.iov_base = data, .iov_len = len};
    struct msghdr msg;
    struct cmsghdr *c;
    ssize_t r;

    *n = 0;
    memset(&msg, 0, sizeof(msg));
    memset(&ctl, 0, sizeof(ctl));
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctl.buf;
    msg.msg_controllen = sizeof(ctl.buf);
    do
        r = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | flags);
    while (r < 0 && errno == EINTR);
    if (r < 0)
        return -errno;
    for (c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
            if (*n < max)
                fds[(*n)++] = fd;
            else
                close(fd);
        }
    }
    if (msg_flags != NULL)
        *msg_flags = msg.msg_flags;
    return r;
}
