/* run/tp_call.c - transparent mode: one connect() or bind() notification
 * (transparent.c's overview, 1a-1d): the call read from the caller's
 * memory, a copy of its socket taken and checked to be the sandbox's, then
 * run here (a call that stays in the sandbox's namespace, or a Unix path
 * one, tp_unix.c) or judged and dialed by the egress pipeline (tp_dial.c). */
#define _GNU_SOURCE
#include "run/transparent_int.h"

#include "common/common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/inet_diag.h>
#include <linux/net.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "run/fswrite.h"

/* Reads the call's arguments and address from the caller's memory (for
 * i386 socketcall(SYS_CONNECT), its argument block first). Whether the
 * notification still stands, so that the memory read was the caller's, is
 * checked once after the socket is taken too (take_socket). 0, or -1 when
 * the call has been answered. */
static int read_call(struct tp *t, const struct seccomp_notif *n, struct tp_call *c)
{
    uint64_t a_fd = n->data.args[0], a_addr = n->data.args[1], a_len = n->data.args[2];
    int abi = -1, pid = (int)n->pid, is_bind = 0;

    for (int i = 0; i < 3; i++)
        if (n->data.arch == t->arch[i])
            abi = i;
    if (abi < 0) {
        tp_respond(t, n->id, EPERM, 0);
        return -1;
    }
    if (n->data.nr == t->nr_socketcall && t->nr_socketcall >= 0) {
        uint32_t blk[3];
        if (a_fd != SYS_CONNECT && a_fd != SYS_BIND) {
            tp_respond(t, n->id, 0, 1);
            return -1;
        }
        is_bind = a_fd == SYS_BIND;
        if (fsw_peek(pid, a_addr, blk, sizeof(blk)) != (ssize_t)sizeof(blk)) {
            tp_respond(t, n->id, EFAULT, 0);
            return -1;
        }
        a_fd = blk[0];
        a_addr = blk[1];
        a_len = blk[2];
    } else if (n->data.nr == t->nr_bind[abi] ||
               (abi == 0 && t->nr_bind[1] >= 0 && n->data.nr == t->nr_bind[1])) {
        is_bind = 1;
    } else if (n->data.nr != t->nr_connect[abi] &&
               !(abi == 0 && t->nr_connect[1] >= 0 && n->data.nr == t->nr_connect[1])) {
        /* x32 system calls arrive with the x86-64 audit arch and their own
         * numbers (__X32_SYSCALL_BIT) */
        tp_respond(t, n->id, EPERM, 0);
        return -1;
    }
    a_len &= 0xffffffffu;
    memset(c, 0, sizeof(*c));
    if (a_len > sizeof(c->sa.ss) || a_len < sizeof(c->sa.sa.sa_family)) {
        tp_respond(t, n->id, EINVAL, 0);
        return -1;
    }
    if (fsw_peek(pid, a_addr, &c->sa, (size_t)a_len) != (ssize_t)a_len) {
        tp_respond(t, n->id, EFAULT, 0);
        return -1;
    }
    c->fd = (int)(a_fd & 0x7fffffff);
    c->len = (size_t)a_len;
    c->bind = is_bind;
    return 0;
}

/* The thread group of thread TID, from /proc; TID itself when unknown. */
static int tgid_of(int tid)
{
    char path[64], line[128];
    int tgid = tid;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/status", tid);
    f = fopen(path, "re");
    if (f == NULL)
        return tid;
    while (fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "Tgid: %d", &tgid) == 1)
            break;
    fclose(f);
    return tgid > 0 ? tgid : tid;
}

void tp_cache_drop(struct tp *t)
{
    if (t->cache_pidfd >= 0)
        close(t->cache_pidfd);
    if (t->cache_fdinfo >= 0)
        close(t->cache_fdinfo);
    if (t->cache_info >= 0)
        close(t->cache_info);
    t->cache_pid = 0;
    t->cache_pidfd = t->cache_fdinfo = t->cache_info = -1;
}

/* A copy of descriptor FD of the process that thread PID belongs to
 * (pidfd_getfd), or -1 with errno. A pidfd names one process, never a pid
 * number reused after it: the last caller's is kept (with its
 * /proc/PID/fdinfo) while it goes on calling, which most callers do, and
 * dropped once its process is gone (ESRCH). Only a thread group leader's is
 * kept: another thread's number would lead back to its leader. */
int tp_getfd(struct tp *t, int pid, int fd)
{
    int pidfd, orig, e;

    if (pid == t->cache_pid) {
        orig = (int)syscall(SYS_pidfd_getfd, t->cache_pidfd, fd, 0U);
        if (orig >= 0 || errno != ESRCH)
            return orig;
        tp_cache_drop(t);
    }
    pidfd = (int)syscall(SYS_pidfd_open, pid, 0U);
    if (pidfd >= 0) {
        char path[64];
        orig = (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0U);
        e = errno;
        tp_cache_drop(t);
        t->cache_pid = pid;
        t->cache_pidfd = pidfd;
        snprintf(path, sizeof(path), "/proc/%d/fdinfo", pid);
        t->cache_fdinfo = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        errno = e;
        return orig;
    }
    if (errno != EINVAL && errno != ENOENT)
        return -1;
    /* not a thread group leader (EINVAL before Linux 6.9, ENOENT after):
     * pidfd_open wants the leader (threads share the descriptor table) */
    {
        int tgid = tgid_of(pid);
        if (tgid == pid)
            return -1;
        pidfd = (int)syscall(SYS_pidfd_open, tgid, 0U);
        if (pidfd < 0)
            return -1;
        orig = (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0U);
        e = errno;
        close(pidfd);
        errno = e;
        return orig;
    }
}

/* Whether socket S belongs to the sandbox's network namespace: its
 * SO_NETNS_COOKIE (Linux 5.14; one call, and cookies are never reused), or
 * else its namespace file (SIOCGSKNS). 1 yes, 0 no, -errno when S is not a
 * socket or the question failed. */
static int in_sandbox_ns(const struct tp *t, int s)
{
    struct stat st;
    uint64_t cookie = 0;
    socklen_t len = sizeof(cookie);
    int nsfd, rc;

    if (t->ns_cookie != 0 && getsockopt(s, SOL_SOCKET, SO_NETNS_COOKIE, &cookie, &len) == 0)
        return cookie == t->ns_cookie;
    nsfd = ioctl(s, SIOCGSKNS);
    if (nsfd < 0)
        return -errno;
    rc = fstat(nsfd, &st);
    close(nsfd);
    return rc == 0 && st.st_dev == t->ns_dev && st.st_ino == t->ns_ino;
}

/* A copy of the command's socket FD (pidfd_getfd), checked to belong to the
 * sandbox's network namespace, with its domain in *domain. The copy, or -1
 * when the call has been answered. Checks, after the copy and after
 * read_call's reads, that the notification still stands: the caller was
 * alive throughout, so its pid named it and no other process. */
static int take_socket(struct tp *t, const struct seccomp_notif *n, int fd, int *domain)
{
    int orig, e, ns;

    orig = tp_getfd(t, (int)n->pid, fd);
    e = errno;
    if (seccomp_notify_id_valid(t->notify_fd, n->id) != 0) {
        if (orig >= 0)
            close(orig);
        return -1;
    }
    if (orig < 0) {
        tp_respond(t, n->id, e == EBADF ? EBADF : EPERM, 0);
        return -1;
    }
    ns = in_sandbox_ns(t, orig);
    if (ns <= 0) {
        close(orig); /* not a socket of the sandbox's namespace: never CONTINUE */
        tp_respond(t, n->id, ns == -ENOTTY || ns == -ENOTSOCK ? ENOTSOCK : EPERM, 0);
        return -1;
    }
    {
        socklen_t len = sizeof(*domain);
        *domain = 0;
        (void)getsockopt(orig, SOL_SOCKET, SO_DOMAIN, domain, &len);
    }
    return orig;
}

/* The destination of C, an address of the socket's own family DOMAIN (a
 * v4-mapped IPv6 one as IPv4): 1 with *dst and *port set, else 0
 * (AF_UNSPEC, a family mismatch, a short address). */
static int call_dst(int domain, const struct tp_call *c, struct policy_addr *dst, uint16_t *port)
{
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

    memset(dst, 0, sizeof(*dst));
    if (c->sa.sa.sa_family == AF_INET && domain == AF_INET && c->len >= sizeof(c->sa.in4)) {
        dst->family = 4;
        memcpy(dst->bytes, &c->sa.in4.sin_addr, 4);
        *port = ntohs(c->sa.in4.sin_port);
        return 1;
    }
    if (c->sa.sa.sa_family == AF_INET6 && domain == AF_INET6 && c->len >= 24) {
        if (memcmp(&c->sa.in6.sin6_addr, mapped, 12) == 0) {
            dst->family = 4;
            memcpy(dst->bytes, (const uint8_t *)&c->sa.in6.sin6_addr + 12, 4);
        } else {
            dst->family = 6;
            memcpy(dst->bytes, &c->sa.in6.sin6_addr, 16);
        }
        *port = ntohs(c->sa.in6.sin6_port);
        return 1;
    }
    return 0;
}

static int sock_type(int fd)
{
    socklen_t len = sizeof(int);
    int type = 0;

    (void)getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len);
    return type;
}

/* Whether sluice makes this connection: a TCP socket of the sandbox's
 * namespace, not connected or listening, given an address of its own family.
 * Then *dst and *port are set. 0 when the kernel may run the call instead
 * (see "Why running it here is safe" in transparent.c). */
static int intercepted(int orig, int domain, const struct tp_call *c, struct policy_addr *dst,
                       uint16_t *port)
{
    socklen_t len;
    uint8_t state = 0; /* struct tcp_info's first member, tcpi_state */

    if ((domain != AF_INET && domain != AF_INET6) || sock_type(orig) != SOCK_STREAM)
        return 0; /* UDP, Unix, ...: confined to the sandbox's namespace */
    len = sizeof(state);
    if (getsockopt(orig, IPPROTO_TCP, TCP_INFO, &state, &len) < 0 || len < 1 || state != TCP_CLOSE)
        return 0; /* connected (EISCONN), listening (EINVAL), a connect() of the
                     kernel's under way (EALREADY): the kernel's answer */
    return call_dst(domain, c, dst, port); /* else the kernel's answer */
}

/* Transparent UDP (tp_udp.c): a UDP socket of the sandbox's namespace
 * connect()ed to C's address gets a relay for that port before the call
 * runs, so that its first datagram is not lost. The call is never
 * refused: it sends nothing, and glibc's getaddrinfo() connect()s a UDP
 * socket to every answer to sort them (RFC 6724), a TCP client's lookup
 * included; the relay judges the first datagram. Only a look: the routes
 * keep every datagram in the namespace, whatever the command writes into
 * the call's memory after it. sendto() is not notified (a notification
 * per datagram costs too much): its ports are those with a relay. */
static void udp_connect(struct tp *t, int orig, int domain, const struct tp_call *c)
{
    struct policy_addr dst;
    uint16_t port = 0;

    if (t->udpr != NULL && (domain == AF_INET || domain == AF_INET6) &&
        sock_type(orig) == SOCK_DGRAM && call_dst(domain, c, &dst, &port) && port != 0)
        (void)tp_udp_port(t, port);
}

/* Would a connection to DST:PORT be accepted by a listener in the sandbox's
 * namespace (one bound to that address or to any; a dual-stack [::] one for
 * IPv4 too)? One sock_diag request (no dump) over DIAG, a netlink socket
 * made in that namespace (tp_dns_sockets): the kernel runs the lookup an
 * incoming SYN would. Errors say no (the connection is then judged by the
 * policy, which fails closed). */
static int sandbox_listens(int diag, const struct policy_addr *dst, unsigned port)
{
    struct {
        struct nlmsghdr nh;
        struct inet_diag_req_v2 r;
    } req;
    union {
        struct nlmsghdr align;
        char buf[1024];
    } rx;
    struct nlmsghdr *h = &rx.align;
    ssize_t n;

    if (diag < 0)
        return 0;
    memset(&req, 0, sizeof(req));
    req.nh.nlmsg_len = sizeof(req);
    req.nh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    req.nh.nlmsg_flags = NLM_F_REQUEST;
    req.r.sdiag_family = dst->family == 4 ? AF_INET : AF_INET6;
    req.r.sdiag_protocol = IPPROTO_TCP;
    req.r.idiag_states = ~0u;
    req.r.id.idiag_sport = htons((uint16_t)port);
    memcpy(req.r.id.idiag_src, dst->bytes, dst->family == 4 ? 4 : 16);
    memcpy(req.r.id.idiag_dst, dst->bytes, dst->family == 4 ? 4 : 16);
    req.r.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
    req.r.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
    if (send(diag, &req, sizeof(req), 0) < 0)
        return 0;
    n = recv(diag, rx.buf, sizeof(rx.buf), 0);
    if (n < (ssize_t)sizeof(struct nlmsghdr) || !NLMSG_OK(h, (size_t)n))
        return 0;
    if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY ||
        h->nlmsg_len < NLMSG_LENGTH(sizeof(struct inet_diag_msg)))
        return 0; /* NLMSG_ERROR: ENOENT, nothing there */
    return ((const struct inet_diag_msg *)NLMSG_DATA(h))->idiag_state == 10; /* TCP_LISTEN */
}

static int is_loopback_or_any(const struct policy_addr *a)
{
    static const uint8_t zero[16];

    if (a->family == 4)
        return a->bytes[0] == 127 || memcmp(a->bytes, zero, 4) == 0;
    return memcmp(a->bytes, zero, 15) == 0 && (a->bytes[15] == 1 || a->bytes[15] == 0);
}

static void wait_closed(uv_handle_t *h)
{
    struct tp_wait *w = h->data;
    struct tp *t = w->t;

    close(w->fd);
    free(w);
    if (--t->handles == 0)
        free(t);
}

/* Answers W's connect() with ERROR and drops W. */
void tp_wait_end(struct tp_wait *w, int error)
{
    struct tp *t = w->t;

    tp_respond(t, w->id, error, 0);
    TP_LIST_UNLINK(w);
    t->npending--;
    uv_close((uv_handle_t *)&w->poll, wait_closed);
}

static void on_wait(uv_poll_t *p, int status, int events)
{
    struct tp_wait *w = container_of(p, struct tp_wait, poll);
    socklen_t len = sizeof(int);
    int e = 0;

    (void)events;
    /* the socket's own error first: libuv reports POLLERR (a refused
     * handshake: the peer's RST) as status UV_EBADF, which is not what the
     * kernel would have answered the caller (rt-7: a guarded run's refused
     * connect() got EBADF, not ECONNREFUSED) */
    if (getsockopt(w->fd, SOL_SOCKET, SO_ERROR, &e, &len) < 0)
        e = errno;
    if (e == 0 && status < 0)
        e = -status;
    if (e == 0)
        e = -sb_tcp_settle(w->fd); /* as a blocking connect() leaves it: SS_CONNECTED */
    tp_wait_end(w, e);
}

/* The caller of notification ID waits for the handshake of FD (taken)
 * under way. */
static void wait_connect(struct tp *t, uint64_t id, int fd)
{
    struct tp_wait *w = calloc(1, sizeof(*w));

    if (w == NULL || uv_poll_init(t->loop, &w->poll, fd) < 0) {
        free(w);
        close(fd);
        tp_respond(t, id, ENOBUFS, 0);
        return;
    }
    w->t = t;
    w->id = id;
    w->fd = fd;
    w->poll.data = w;
    TP_LIST_PUSH(&t->waits, w);
    t->npending++;
    t->handles++;
    if (uv_poll_start(&w->poll, UV_WRITABLE, on_wait) < 0)
        tp_wait_end(w, ENOBUFS);
}

/* Whether bind() C on a socket of DOMAIN would take port 53, sluice's (the
 * resolver and transparent UDP's relay, which share it with SO_REUSEADDR:
 * a socket of the command that set the option could bind beside them and
 * take the queries). Judged by the socket's domain, as the kernel does,
 * never by the address's family and length alone (rt-16): an AF_INET
 * socket binds AF_UNSPEC with INADDR_ANY as AF_INET (inet_bind's
 * "compatibility games"), and an AF_INET6 one binds a 24-byte address
 * (SIN6_LEN_RFC2133, no scope id). Both keep the port at offset 2, which
 * any address that long holds; a shorter one the kernel refuses anyway. */
static int binds_dns_port(int domain, const struct tp_call *c)
{
    uint16_t port;

    _Static_assert(offsetof(struct sockaddr_in6, sin6_port) == offsetof(struct sockaddr_in, sin_port),
                   "one port offset for both families");
    if ((domain != AF_INET && domain != AF_INET6) ||
        c->len < offsetof(struct sockaddr_in, sin_port) + sizeof(port))
        return 0;
    memcpy(&port, (const char *)&c->sa + offsetof(struct sockaddr_in, sin_port), sizeof(port));
    return ntohs(port) == SETTINGS_SANDBOX_DNS_PORT;
}

/* A connect() or bind() that stays in the sandbox's namespace, run here on
 * ORIG (taken), the copy of the command's socket that take_socket found to
 * be the sandbox's, with the address read_call read, and answered with its
 * result: never SECCOMP_USER_NOTIF_FLAG_CONTINUE. With CONTINUE the kernel
 * looks the descriptor number up again and reads the address again, and
 * between the check and that moment another thread of the command can
 * dup2() a socket of the host's namespace (one sluice handed over, or one
 * it inherited) onto the number and rewrite the address to AF_UNSPEC (a
 * disconnect, after which the socket could be aimed anywhere) or to any
 * other: the call would then run on the host's socket. A connect() that
 * would block (TCP whose SYN is dropped by a full accept queue, a Unix
 * listener's full backlog) is started non-blocking, the socket's O_NONBLOCK
 * restored at once; a caller that would have waited is answered once the
 * handshake ends (wait_connect), one that would not gets EINPROGRESS. A
 * Unix stream connect() that meets a full backlog answers EAGAIN even to a
 * blocking caller.
 *
 * A Unix socket path is looked up in the caller's mounts and with its
 * credentials, not sluice's. Without network.allowAllUnixSockets no such
 * call has a use (the command's Unix sockets are socketpair()s and
 * inherited ones) and it is refused (EPERM), which also closes sendto() a
 * path from a datagram pair's connect(). With it, unix_path_call runs it
 * as the caller would. Abstract names and autobind belong to the network
 * namespace of the socket (the kernel looks them up in sock_net() of the
 * socket), the sandbox's, and are run here like the rest. */
static void run_here(struct tp *t, const struct seccomp_notif *n, int orig, int domain,
                     const struct tp_call *c)
{
    int fl, rc, e;

    if (c->sa.sa.sa_family == AF_UNIX && c->len > offsetof(struct sockaddr_un, sun_path) &&
        ((const char *)&c->sa)[offsetof(struct sockaddr_un, sun_path)] != '\0') {
        if (!t->allow_unix) {
            close(orig);
            tp_respond(t, n->id, EPERM, 0);
            return;
        }
        tp_unix_path_call(t, n, orig, c);
        return;
    }
    if (c->bind) {
        if (binds_dns_port(domain, c)) {
            close(orig);
            tp_respond(t, n->id, EADDRINUSE, 0);
            return;
        }
        e = bind(orig, &c->sa.sa, (socklen_t)c->len) == 0 ? 0 : errno;
        close(orig);
        tp_respond(t, n->id, e, 0);
        return;
    }
    fl = fcntl(orig, F_GETFL);
    if (fl < 0 || (!(fl & O_NONBLOCK) && t->npending >= t->max_pending)) {
        close(orig);
        tp_respond(t, n->id, fl < 0 ? EBADF : EAGAIN, 0);
        return;
    }
    if (!(fl & O_NONBLOCK))
        (void)fcntl(orig, F_SETFL, fl | O_NONBLOCK);
    rc = connect(orig, &c->sa.sa, (socklen_t)c->len);
    e = rc == 0 ? 0 : errno;
    if (!(fl & O_NONBLOCK))
        (void)fcntl(orig, F_SETFL, fl);
    if (e == EINPROGRESS && !(fl & O_NONBLOCK)) {
        wait_connect(t, n->id, orig);
        return;
    }
    close(orig);
    tp_respond(t, n->id, e, 0);
}

/* One notification of the syscalls tp_start routed here (notify.c):
 * read, inspect, then run the call here, refuse it, or make the
 * connection. Always answers it. */
int tp_handle(void *ctx, int notify_fd, const struct seccomp_notif *n)
{
    struct tp *t = ctx;
    struct tp_call c;
    struct policy_addr dst;
    uint16_t port = 0;
    int orig, domain;

    (void)notify_fd; /* t->notify_fd */
    if (tp_peer_call(t, n))
        return 1;
    if (read_call(t, n, &c) < 0)
        return 1;
    orig = take_socket(t, n, c.fd, &domain);
    if (orig < 0)
        return 1;
    if (!c.bind)
        udp_connect(t, orig, domain, &c);
    if (c.bind || t->egress == NULL || !intercepted(orig, domain, &c, &dst, &port) ||
        (is_loopback_or_any(&dst) && sandbox_listens(t->diag_fd, &dst, port))) {
        /* confined to the sandbox's namespace; for loopback: the proxy
         * listeners, the command's own servers */
        run_here(t, n, orig, domain, &c);
        return 1;
    }
    if (port == 0) {
        close(orig);
        tp_respond(t, n->id, ECONNREFUSED, 0);
        return 1;
    }
    tp_start_request(t, n, &c, orig, domain, &dst, port);
    return 1;
}
