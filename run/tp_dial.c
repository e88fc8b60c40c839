/* run/tp_dial.c - transparent mode: a connection sluice makes for the
 * command (transparent.c's overview, 1d-1f): the request handed to the
 * egress pipeline (verdict -> ask -> resolve -> guard -> dial), its
 * decision record, and the connected socket handed over to the command
 * (sb_tcp_settle, the command's socket options, kcmp, ADDFD at its
 * descriptor number), or the call failed with the dial's errno. */
#define _GNU_SOURCE
#include "run/transparent_int.h"
#include "sandbox/sandbox.h"

#include "common/common.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/kcmp.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The options copied onto sluice's socket when the command set them
 * before connect(): compared with a fresh socket's value (tp->optdef, read
 * once at start) so that only what the command changed costs a setsockopt.
 * Buffer sizes are among them: setting one turns the kernel's autotuning
 * off, so it is copied only when changed. */
static const struct {
    int level, name, family; /* family 0: both */
} int_opts[] = {
    {SOL_SOCKET, SO_KEEPALIVE, 0},
    {SOL_SOCKET, SO_PRIORITY, 0},
    {SOL_SOCKET, SO_OOBINLINE, 0},
    {SOL_SOCKET, SO_RCVBUF, 0},
    {SOL_SOCKET, SO_SNDBUF, 0},
    {IPPROTO_TCP, TCP_NODELAY, 0},
    {IPPROTO_TCP, TCP_KEEPIDLE, 0},
    {IPPROTO_TCP, TCP_KEEPINTVL, 0},
    {IPPROTO_TCP, TCP_KEEPCNT, 0},
    {IPPROTO_TCP, TCP_USER_TIMEOUT, 0},
    {IPPROTO_TCP, TCP_NOTSENT_LOWAT, 0},
    {IPPROTO_IP, IP_TOS, AF_INET},
    {IPPROTO_IPV6, IPV6_TCLASS, AF_INET6},
};
#define N_INT_OPTS (sizeof(int_opts) / sizeof(int_opts[0]))
_Static_assert(N_INT_OPTS == TP_N_INT_OPTS, "TP_N_INT_OPTS (transparent_int.h) counts int_opts");

void tp_frontend_init(struct tp *t)
{
    frontend_init(&t->fe, t->loop, t->next_id);
    t->fe.log = t->log;
    t->fe.log_ctx = t->log_ctx;
}

void tp_req_free(struct tp_req *r)
{
    r->t->npending--;
    TP_LIST_UNLINK(r);
    if (r->orig >= 0)
        close(r->orig);
    frontend_conn_clear(&r->fc);
    free(r);
}

void tp_read_defaults(int (*def)[N_INT_OPTS])
{
    for (int f = 0; f < 2; f++) {
        int fresh = socket(f == 0 ? AF_INET : AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
        for (size_t i = 0; i < N_INT_OPTS; i++) {
            socklen_t len = sizeof(int);
            def[f][i] = INT_MIN; /* unknown: always copied */
            if (fresh >= 0 &&
                getsockopt(fresh, int_opts[i].level, int_opts[i].name, &def[f][i], &len) < 0)
                def[f][i] = INT_MIN;
        }
        if (fresh >= 0)
            close(fresh);
    }
}

static void copy_opts(const struct tp *t, int from, int from_family, int to, int to_family)
{
    struct timeval tv;
    struct linger lg;
    socklen_t len;
    int v;

    for (size_t i = 0; i < N_INT_OPTS; i++) {
        if (int_opts[i].family != 0 &&
            (int_opts[i].family != from_family || int_opts[i].family != to_family))
            continue;
        len = sizeof(v);
        if (getsockopt(from, int_opts[i].level, int_opts[i].name, &v, &len) < 0 ||
            v == t->optdef[from_family == AF_INET6][i])
            continue;
        if (int_opts[i].level == SOL_SOCKET &&
            (int_opts[i].name == SO_RCVBUF || int_opts[i].name == SO_SNDBUF))
            v /= 2; /* the kernel doubles what is set */
        (void)setsockopt(to, int_opts[i].level, int_opts[i].name, &v, sizeof(v));
    }
    len = sizeof(lg);
    if (getsockopt(from, SOL_SOCKET, SO_LINGER, &lg, &len) == 0 && lg.l_onoff != 0)
        (void)setsockopt(to, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    len = sizeof(tv);
    if (getsockopt(from, SOL_SOCKET, SO_RCVTIMEO, &tv, &len) == 0 && (tv.tv_sec || tv.tv_usec))
        (void)setsockopt(to, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    len = sizeof(tv);
    if (getsockopt(from, SOL_SOCKET, SO_SNDTIMEO, &tv, &len) == 0 && (tv.tv_sec || tv.tv_usec))
        (void)setsockopt(to, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* FD_CLOEXEC of the command's descriptor FD, from /proc/PID/fdinfo/FD. The
 * cached caller's file stays open: the kernel looks the descriptor up
 * again at each read from offset 0. */
static int remote_cloexec(struct tp *t, int pid, int fd)
{
    char path[64], buf[256];
    const char *f;
    ssize_t n;
    int pf;

    if (pid == t->cache_pid && t->cache_fdinfo >= 0) {
        if (t->cache_info < 0 || t->cache_infonum != fd) {
            if (t->cache_info >= 0)
                close(t->cache_info);
            snprintf(path, sizeof(path), "%d", fd);
            t->cache_info = openat(t->cache_fdinfo, path, O_RDONLY | O_CLOEXEC);
            t->cache_infonum = fd;
        }
        if (t->cache_info < 0)
            return 0;
        n = pread(t->cache_info, buf, sizeof(buf) - 1, 0);
    } else {
        snprintf(path, sizeof(path), "/proc/%d/fdinfo/%d", pid, fd);
        pf = open(path, O_RDONLY | O_CLOEXEC);
        if (pf < 0)
            return 0;
        n = read(pf, buf, sizeof(buf) - 1);
        close(pf);
    }
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    f = strstr(buf, "flags:");
    return f != NULL && (strtoul(f + 6, NULL, 8) & O_CLOEXEC) != 0;
}

static int errno_of(const struct egress_outcome *o)
{
    switch (o->result) {
    case EGRESS_CONNECTED:
        return 0;
    case EGRESS_DENIED:
    case EGRESS_REFUSED:
        return ECONNREFUSED;
    case EGRESS_DNS_FAILED:
        return EHOSTUNREACH;
    case EGRESS_DNS_TIMEOUT:
    case EGRESS_DIAL_TIMEOUT:
        return ETIMEDOUT;
    case EGRESS_UNREACHABLE:
        if (o->status == UV_ENETUNREACH)
            return ENETUNREACH;
        if (o->status == UV_ECONNRESET)
            return ECONNRESET;
        return EHOSTUNREACH;
    case EGRESS_ERROR:
    default:
        return ENOBUFS;
    }
}

/* Puts the egress outcome's connected socket O->fd (non-blocking,
 * close-on-exec, from the dialer) at the command's descriptor number. */
static void install(struct tp_req *r, const struct egress_outcome *o)
{
    struct tp *t = r->t;
    struct seccomp_notif_addfd add;
    int fd = o->fd, rc;

    /* SS_CONNECTED, not SS_CONNECTING: a non-blocking connect() that
     * returned EINPROGRESS (every handshake that did not end inside the
     * call) leaves the socket there even once the handshake is done. A
     * command holding such a socket, reset by its peer, got ECONNABORTED
     * from a first sendto(MSG_FASTOPEN), which took it to unconnected, and
     * a second aimed it anywhere from the host's namespace (bind() + listen()
     * made it a listener there). From SS_CONNECTED only connect(AF_UNSPEC)
     * takes it back, and take_socket refuses that on a host socket. A reset
     * before this point fails the command's connect() instead. */
    rc = sb_tcp_settle(fd);
    if (rc < 0) {
        close(fd);
        tp_respond(t, r->id, rc == -ENOTCONN ? ECONNRESET : -rc, 0);
        return;
    }
    copy_opts(t, r->orig, r->family, fd, o->addr.family == 6 || r->mapped ? AF_INET6 : AF_INET);
    if (!r->nonblock)
        (void)fcntl(fd, F_SETFL, 0); /* the dialer's only status flag is O_NONBLOCK */
    /* the command's descriptor still holds the socket it connect()ed? (a
     * thread may have closed it and opened something else there) */
    if (syscall(SYS_kcmp, t->self_pid, r->pid, KCMP_FILE, r->orig, r->target_fd) != 0) {
        close(fd);
        tp_respond(t, r->id, EBADF, 0);
        return;
    }
    memset(&add, 0, sizeof(add));
    add.id = r->id;
    add.flags = SECCOMP_ADDFD_FLAG_SETFD;
    add.srcfd = (uint32_t)fd;
    add.newfd = (uint32_t)r->target_fd;
    add.newfd_flags = remote_cloexec(t, r->pid, r->target_fd) ? O_CLOEXEC : 0;
    if (ioctl(t->notify_fd, SECCOMP_IOCTL_NOTIF_ADDFD, &add) < 0) {
        int e = errno;
        close(fd);
        if (e != ENOENT) /* ENOENT: the call was interrupted or the caller died */
            tp_respond(t, r->id, ECONNABORTED, 0);
        return;
    }
    if (r->asked_len != 0) {
        uint64_t cookie = 0;
        socklen_t len = sizeof(cookie);
        if (getsockopt(fd, SOL_SOCKET, SO_COOKIE, &cookie, &len) == 0 && cookie != 0) {
            struct tp_peer *p = &t->peers[t->peer_next++ % TP_PEERS];
            p->cookie = cookie;
            p->sa = r->asked;
            p->len = r->asked_len;
        }
    }
    close(fd);
    tp_respond(t, r->id, r->nonblock ? EINPROGRESS : 0, 0);
}

/* The decision record (the front ends log from their egress callbacks;
 * this is the transparent front end's), then the answer. */
static void on_egress(void *arg, const struct egress_outcome *o)
{
    struct tp_req *r = arg;
    struct tp *t = r->t;

    r->er = NULL;
    if (t->log != NULL) {
        frontend_conn_note(&r->fc, o);
        if (o->result != EGRESS_CONNECTED)
            memset(&r->fc.addr, 0, sizeof(r->fc.addr)); /* only an address the command got */
        r->fc.code = errno_of(o);
        frontend_conn_emit(&r->fc, CONNLOG_DECISION);
    }
    if (o->result == EGRESS_CONNECTED)
        install(r, o);
    else
        tp_respond(t, r->id, errno_of(o), 0);
    tp_req_free(r);
}

/* Judges and dials DST:PORT for the call (egress pipeline); on_egress
 * answers it. Takes orig. */
void tp_start_request(struct tp *t, const struct seccomp_notif *n, const struct tp_call *c,
                      int orig, int domain, const struct policy_addr *dst, uint16_t port)
{
    const char *name = tp_names_lookup(&t->names, dst), *why;
    struct policy_host host;
    struct tp_req *r;
    char text[64];
    int rc, fl;

    if (name == NULL)
        name = policy_addr_str(dst, text, sizeof(text)); /* judged as an IP literal */
    rc = policy_host_normalize(name, strlen(name), &host, &why);
    if (t->npending >= t->max_pending) {
        /* as many connect()s in flight as the proxies' maxConnections:
         * the host's descriptors are not the command's to exhaust */
        close(orig);
        tp_respond(t, n->id, EAGAIN, 0);
        return;
    }
    r = calloc(1, sizeof(*r));
    if (rc < 0 || r == NULL) {
        free(r);
        close(orig);
        tp_respond(t, n->id, rc < 0 ? ECONNREFUSED : ENOBUFS, 0);
        return;
    }
    r->t = t;
    r->id = n->id;
    r->pid = (int)n->pid;
    r->target_fd = c->fd;
    r->orig = orig;
    r->family = domain;
    TP_LIST_PUSH(&t->reqs, r);
    t->npending++;
    snprintf(r->host, sizeof(r->host), "%s", host.name);
    /* as the kernel gives it: family, port, address, the rest zero (r is
     * calloc()ed) */
    r->asked.in4.sin_family = c->sa.sa.sa_family;
    if (c->sa.sa.sa_family == AF_INET) {
        r->asked.in4.sin_port = c->sa.in4.sin_port;
        r->asked.in4.sin_addr = c->sa.in4.sin_addr;
        r->asked_len = sizeof(r->asked.in4);
    } else {
        r->asked.in6.sin6_port = c->sa.in6.sin6_port;
        r->asked.in6.sin6_addr = c->sa.in6.sin6_addr;
        r->asked_len = sizeof(r->asked.in6);
    }
    frontend_conn_begin(&t->fe, &r->fc, "transparent");
    r->fc.host = r->host;
    r->fc.port = port;
    snprintf(r->fc.client, sizeof(r->fc.client), "pid %d", (int)n->pid);
    /* the command gets sluice's socket once it is connected, never while its
     * handshake is under way: shutdown() would take such a socket back to
     * unconnected, and sendto(MSG_FASTOPEN) could then aim it anywhere from
     * the host's namespace */
    fl = fcntl(orig, F_GETFL);
    r->nonblock = fl >= 0 && (fl & O_NONBLOCK) != 0;
    /* an IPv6 socket stays one: an IPv4 upstream is reached as
     * ::ffff:a.b.c.d, as the kernel does for a dual-stack socket; only an
     * IPV6_V6ONLY one is given an IPv4 socket for it */
    if (domain == AF_INET6) {
        int v6only = 0;
        socklen_t len = sizeof(v6only);
        r->mapped = getsockopt(orig, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, &len) == 0 && !v6only;
    }
    rc = egress_start_dial(t->egress, &host, port, "transparent", r->fc.client,
                           EGRESS_DIAL_SYNC | (r->mapped ? EGRESS_DIAL_V6SOCKET : 0), on_egress, r,
                           &r->er);
    if (rc < 0) {
        r->er = NULL;
        tp_respond(t, r->id, ENOBUFS, 0);
        tp_req_free(r);
    }
}
