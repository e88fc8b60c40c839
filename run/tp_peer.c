/* run/tp_peer.c - transparent mode: getpeername() (transparent.c's
 * overview, 1g) on a socket sluice connected answers with the address the
 * command asked for (recorded by tp_dial.c at the hand-over). */
#define _GNU_SOURCE
#include "run/transparent_int.h"

#include "common/common.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/net.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "run/fswrite.h"

/* The ABI of notification N (index into t->arch), or -1. */
static int abi_of(const struct tp *t, const struct seccomp_notif *n)
{
    for (int i = 0; i < 3; i++)
        if (n->data.arch == t->arch[i])
            return i;
    return -1;
}

/* LEN bytes of BUF to ADDR in PID's memory through MEMFD (/proc/PID/mem,
 * opened before the notification was found still valid). 0 or -1. */
static int poke(int memfd, uint64_t addr, const void *buf, size_t len)
{
    return pwrite(memfd, buf, len, (off_t)addr) == (ssize_t)len ? 0 : -1;
}

/* getpeername() (i386: socketcall(SYS_GETPEERNAME)) on a socket sluice
 * connected answers with the address the command asked for; on any other
 * descriptor the kernel answers. 1 when N was a getpeername() (answered),
 * 0 when it is not one. */
int tp_peer_call(struct tp *t, const struct seccomp_notif *n)
{
    uint64_t a_fd = n->data.args[0], a_addr = n->data.args[1], a_lenp = n->data.args[2];
    uint64_t cookie = 0;
    socklen_t clen = sizeof(cookie);
    const struct tp_peer *p = NULL;
    int abi = abi_of(t, n), pid = (int)n->pid, fd, memfd, e = 0;
    uint32_t len, plen;
    char path[64];

    if (abi < 0)
        return 0;
    if (n->data.nr == t->nr_socketcall && t->nr_socketcall >= 0) {
        uint32_t blk[3];
        if (a_fd != SYS_GETPEERNAME)
            return 0;
        if (fsw_peek(pid, a_addr, blk, sizeof(blk)) != (ssize_t)sizeof(blk)) {
            tp_respond(t, n->id, EFAULT, 0);
            return 1;
        }
        a_fd = blk[0];
        a_addr = blk[1];
        a_lenp = blk[2];
    } else if (n->data.nr != t->nr_getpeername[abi] &&
               !(abi == 0 && t->nr_getpeername[1] >= 0 && n->data.nr == t->nr_getpeername[1])) {
        return 0;
    }
    fd = tp_getfd(t, pid, (int)(a_fd & 0x7fffffff));
    if (fd >= 0) {
        if (getsockopt(fd, SOL_SOCKET, SO_COOKIE, &cookie, &clen) == 0 && cookie != 0)
            for (size_t i = 0; i < TP_PEERS && p == NULL; i++)
                if (t->peers[i].cookie == cookie)
                    p = &t->peers[i];
        close(fd);
    }
    if (p == NULL) {
        tp_respond(t, n->id, 0, 1); /* not one of sluice's: the kernel's answer */
        return 1;
    }
    /* the value-result length, then the address cut to it, as the kernel
     * does; written through /proc/PID/mem opened before the notification
     * is found still valid, so the memory is the caller's */
    if (fsw_peek(pid, a_lenp, &len, sizeof(len)) != (ssize_t)sizeof(len)) {
        tp_respond(t, n->id, EFAULT, 0);
        return 1;
    }
    if ((int32_t)len < 0) {
        tp_respond(t, n->id, EINVAL, 0);
        return 1;
    }
    snprintf(path, sizeof(path), "/proc/%d/mem", pid);
    memfd = open(path, O_RDWR | O_CLOEXEC);
    if (memfd < 0) {
        tp_respond(t, n->id, 0, 1);
        return 1;
    }
    if (seccomp_notify_id_valid(t->notify_fd, n->id) != 0) {
        close(memfd); /* the caller is gone */
        return 1;
    }
    plen = p->len;
    if ((len > 0 && poke(memfd, a_addr, &p->sa, len < plen ? len : plen) < 0) ||
        poke(memfd, a_lenp, &plen, sizeof(plen)) < 0)
        e = EFAULT;
    close(memfd);
    tp_respond(t, n->id, e, 0);
    return 1;
}
