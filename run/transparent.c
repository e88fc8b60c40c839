/* run/transparent.c - transparent mode for `sluice run`
 * (network.transparent, `sluice run --transparent`; design.md "Transparent
 * mode"). Host side only; inner.c makes the sockets and the seccomp listener.
 *
 * Owns three things, all on the run's event loop:
 *
 * 1. connect() interception. inner's filter (seccomp.c) answers every
 *    connect() of the command with SCMP_ACT_NOTIFY; the listener descriptor
 *    reaches the host after the go byte. For each notification the host:
 *      a. reads the sockaddr from the caller's memory (process_vm_readv;
 *         for i386 socketcall(SYS_CONNECT), the argument block first);
 *      b. takes a copy of the command's socket (pidfd_getfd), checks the
 *         notification is still valid (SECCOMP_IOCTL_NOTIF_ID_VALID: the
 *         caller was alive throughout, so its pid named it and no other
 *         process), and looks at the socket: its network namespace must be
 *         the sandbox's (SO_NETNS_COOKIE, or SIOCGSKNS before Linux 5.14; a
 *         socket from anywhere else is refused with EPERM), its domain and
 *         type, whether it is already connected;
 *      c. runs the call itself, on the copy it checked and with the address
 *         it read, and answers with the result (run_here), where it can
 *         reach nothing but the sandbox's namespace, see "Why running it
 *         here is safe" below: sockets that are not TCP over IPv4/IPv6 (UDP,
 *         Unix, netlink), AF_UNSPEC (disconnect), a socket already
 *         connected or listening, a bad address length, a loopback or
 *         unspecified destination where something listens on that port
 *         inside the sandbox (the proxy listeners, the command's own
 *         servers); and bind() (notified with allowLocalBinding only). A
 *         Unix socket path is refused, or with allowAllUnixSockets run by
 *         a short-lived child in the caller's namespaces, root, working
 *         directory and credentials (unix_path_call);
 *      d. otherwise judges the destination as the proxies do: a synthetic
 *         address the sandbox's resolver gave out (below) maps back to its
 *         name, exactly; any other address is an IP literal. The egress
 *         pipeline (verdict -> ask -> resolve -> guard -> dial) connects
 *         from the host's namespace to a vetted address;
 *      e. connected: the socket options the command set (O_NONBLOCK,
 *         FD_CLOEXEC, SO_KEEPALIVE, TCP_NODELAY, SO_RCVTIMEO/SO_SNDTIMEO,
 *         SO_LINGER, SO_PRIORITY, IP_TOS/IPV6_TCLASS, TCP keepalive timers,
 *         TCP_USER_TIMEOUT, buffer sizes that differ from a fresh socket's)
 *         are copied onto the host's socket, kcmp(KCMP_FILE) checks the
 *         command's descriptor number still holds the socket it called
 *         connect() on, and SECCOMP_IOCTL_NOTIF_ADDFD with
 *         SECCOMP_ADDFD_FLAG_SETFD puts the host's socket at that number;
 *         the call then returns 0, or EINPROGRESS for a non-blocking socket
 *         (the socket is already connected: poll() reports it writable at
 *         once and SO_ERROR is 0). The command only ever holds sockets of
 *         the host's namespace that are connected, in the socket layer's
 *         SS_CONNECTED too (sb_tcp_settle): a socket whose handshake is
 *         under way could be taken back to unconnected (shutdown() in
 *         SYN_SENT), and one left in SS_CONNECTING by a non-blocking dial
 *         could after a reset (a first sendto(MSG_FASTOPEN) answers
 *         ECONNABORTED and unconnects it), and then be aimed elsewhere with
 *         sendto(MSG_FASTOPEN), which no connect() notification sees, or
 *         made a listener. The kernel never runs the command's
 *         connect(), so the address the command could rewrite after (a)
 *         is never used;
 *      f. denied or failed: the call fails at once, ECONNREFUSED for a
 *         denial (and a record in the log and the blocked summary, same
 *         fields as the proxies', protocol "transparent"), ETIMEDOUT,
 *         EHOSTUNREACH, ENETUNREACH for what the dial met.
 *      g. getpeername() is notified too: on a socket sluice connected (known
 *         by SO_COOKIE, the last TP_PEERS of them) it answers with the
 *         address the command asked for, written through /proc/PID/mem;
 *         on any other descriptor the kernel answers (CONTINUE).
 *    Limits, documented in the README: a socket bound
 *    before connect() loses its local address; an IPv6 socket stays one (an
 *    IPv4 upstream as ::ffff:a.b.c.d) unless it is IPV6_V6ONLY, an IPv4 one
 *    may get an IPv6 connection (an upstream with IPv6 addresses only); a non-blocking
 *    connect() returns only once the dial ended (the command's thread waits
 *    in connect(), at most the dial timeout); bytes are not counted (no
 *    close record): the command holds the real connection, no relay.
 *
 *    Why running it here is safe: a socket belongs to the network
 *    namespace it was created in, whatever address it is given. Every
 *    socket the command can create is in the sandbox's namespace, which has
 *    a loopback device and nothing else: no route leaves it. (b) checks the
 *    namespace of the very socket the call is about, so a socket from
 *    outside (one sluice handed over, an inherited one) never gets a
 *    connect() or bind() run. The call is run on that checked copy, never
 *    handed back to the kernel (CONTINUE), which would look the descriptor
 *    number and the address up again: another thread could dup2() a socket
 *    of the host's namespace onto the number in between and rewrite the
 *    address to AF_UNSPEC, disconnecting it (issue 21). Every socket of the
 *    host's namespace the command holds is in SS_CONNECTED (install,
 *    sb_tcp_settle), where only connect(AF_UNSPEC) could take it back. The
 *    same holds for UDP: it stays closed in transparent mode as before,
 *    apart from the sandbox's own resolver.
 *
 *    The same listener serves a run that is not transparent but inherited a
 *    TCP socket of the host's network on stdin, stdout or stderr (inherit.c,
 *    egress NULL): there every connect() and allowed bind() is refused on
 *    the host's socket and run here on any other.
 *
 * 2. Synthetic addresses. Each name the resolver answers for gets its own
 *    IPv4 address from 198.18.0.0/15 (RFC 2544 benchmarking space, never
 *    routed) and IPv6 address from fd53:6c75:6963:6500::/64 (a ULA), by the
 *    order in which names were first asked: 131,070 names per run. Two
 *    names never share an address, so a connect() is decided by the name
 *    that produced its address, even when the real names resolve to the
 *    same host.
 *
 * 3. The sandbox's resolver. inner binds UDP and TCP sockets to
 *    127.0.0.1:53 in the sandbox's namespace; the command's
 *    /etc/resolv.conf (bwrap.c) names only that server. A query (one
 *    question, class IN, opcode QUERY) for a name a port-less deny rule
 *    denies gets NXDOMAIN and a blocked record; any other name gets its
 *    synthetic address (A, AAAA) or an empty NOERROR (every other type);
 *    the real decision, with the port, is made at connect(). Other opcodes:
 *    NOTIMP; malformed: FORMERR. Nothing is resolved upstream here: the
 *    egress pipeline resolves the name once, at connect(), through sluice's
 *    own resolver (network.dnsServers), and the guard applies to that. */
#define _GNU_SOURCE
#include "run/transparent.h"
#include "run/transparent_int.h"
#include "run/fswrite.h"
#include "run/notify.h"

#include "common/common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/inet_diag.h>
#include <linux/kcmp.h>
#include <linux/net.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
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
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/fsuid.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif
#ifndef SECCOMP_USER_NOTIF_FLAG_CONTINUE
#define SECCOMP_USER_NOTIF_FLAG_CONTINUE (1UL << 0)
#endif
#ifndef NS_GET_USERNS
#define NS_GET_USERNS 0xb701 /* _IO(0xb7, 0x1), <linux/nsfs.h> */
#endif
#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#endif
#ifndef SYS_landlock_restrict_self
#define SYS_landlock_restrict_self 446
#endif

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

/* ------------------------------------------------------------------------ */
/* connect() notifications                                                   */

static void respond(struct tp *t, uint64_t id, int error, int cont)
{
    memset(t->resp, 0, sizeof(*t->resp));
    t->resp->id = id;
    t->resp->error = cont ? 0 : -error;
    t->resp->val = 0;
    t->resp->flags = cont ? SECCOMP_USER_NOTIF_FLAG_CONTINUE : 0;
    (void)seccomp_notify_respond(t->notify_fd, t->resp); /* ENOENT: the caller is gone */
}

static void req_free(struct tp_req *r)
{
    r->t->npending--;
    r->prev->next = r->next;
    r->next->prev = r->prev;
    if (r->orig >= 0)
        close(r->orig);
    free(r);
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

static int is_loopback_or_any(const struct policy_addr *a)
{
    static const uint8_t zero[16];

    if (a->family == 4)
        return a->bytes[0] == 127 || memcmp(a->bytes, zero, 4) == 0;
    return memcmp(a->bytes, zero, 15) == 0 && (a->bytes[15] == 1 || a->bytes[15] == 0);
}

static void read_defaults(int (*def)[N_INT_OPTS])
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
        respond(t, r->id, rc == -ENOTCONN ? ECONNRESET : -rc, 0);
        return;
    }
    copy_opts(t, r->orig, r->family, fd, o->addr.family == 6 || r->mapped ? AF_INET6 : AF_INET);
    if (!r->nonblock)
        (void)fcntl(fd, F_SETFL, 0); /* the dialer's only status flag is O_NONBLOCK */
    /* the command's descriptor still holds the socket it connect()ed? (a
     * thread may have closed it and opened something else there) */
    if (syscall(SYS_kcmp, t->self_pid, r->pid, KCMP_FILE, r->orig, r->target_fd) != 0) {
        close(fd);
        respond(t, r->id, EBADF, 0);
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
            respond(t, r->id, ECONNABORTED, 0);
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
    respond(t, r->id, r->nonblock ? EINPROGRESS : 0, 0);
}

/* The decision record (the front ends log from their egress callbacks;
 * this is the transparent front end's), then the answer. */
static void on_egress(void *arg, const struct egress_outcome *o)
{
    struct tp_req *r = arg;
    struct tp *t = r->t;
    char addr[64] = "";

    r->er = NULL;
    if (t->log != NULL) {
        struct connlog rec;
        memset(&rec, 0, sizeof(rec));
        if (o->have_addr)
            policy_addr_str(&o->addr, addr, sizeof(addr));
        rec.event = CONNLOG_DECISION;
        rec.id = r->conn_id;
        rec.client = r->client;
        rec.protocol = "transparent";
        rec.host = r->host;
        rec.port = r->port;
        rec.verdict = o->verdict;
        rec.rule = o->rule;
        rec.source = o->source[0] != '\0' ? o->source : NULL;
        rec.reason = o->reason;
        rec.addr = o->result == EGRESS_CONNECTED ? addr : "";
        rec.code = errno_of(o);
        t->log(t->log_ctx, &rec);
    }
    if (o->result == EGRESS_CONNECTED)
        install(r, o);
    else
        respond(t, r->id, errno_of(o), 0);
    req_free(r);
}

/* One connect() as the command made it. */
struct call {
    int bind; /* 1: a bind() (network.allowLocalBinding), 0: a connect() */
    int fd;   /* its descriptor number */
    union {
        struct sockaddr sa;
        struct sockaddr_in in4;
        struct sockaddr_in6 in6;
        struct sockaddr_storage ss;
    } sa;
    size_t len; /* address length */
};

/* Reads the call's arguments and address from the caller's memory (for
 * i386 socketcall(SYS_CONNECT), its argument block first). Whether the
 * notification still stands, so that the memory read was the caller's, is
 * checked once after the socket is taken too (take_socket). 0, or -1 when
 * the call has been answered. */
static int read_call(struct tp *t, const struct seccomp_notif *n, struct call *c)
{
    uint64_t a_fd = n->data.args[0], a_addr = n->data.args[1], a_len = n->data.args[2];
    int abi = -1, pid = (int)n->pid, is_bind = 0;

    for (int i = 0; i < 3; i++)
        if (n->data.arch == t->arch[i])
            abi = i;
    if (abi < 0) {
        respond(t, n->id, EPERM, 0);
        return -1;
    }
    if (n->data.nr == t->nr_socketcall && t->nr_socketcall >= 0) {
        uint32_t blk[3];
        if (a_fd != SYS_CONNECT && a_fd != SYS_BIND) {
            respond(t, n->id, 0, 1);
            return -1;
        }
        is_bind = a_fd == SYS_BIND;
        if (fsw_peek(pid, a_addr, blk, sizeof(blk)) != (ssize_t)sizeof(blk)) {
            respond(t, n->id, EFAULT, 0);
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
        respond(t, n->id, EPERM, 0);
        return -1;
    }
    a_len &= 0xffffffffu;
    memset(c, 0, sizeof(*c));
    if (a_len > sizeof(c->sa.ss) || a_len < sizeof(c->sa.sa.sa_family)) {
        respond(t, n->id, EINVAL, 0);
        return -1;
    }
    if (fsw_peek(pid, a_addr, &c->sa, (size_t)a_len) != (ssize_t)a_len) {
        respond(t, n->id, EFAULT, 0);
        return -1;
    }
    c->fd = (int)(a_fd & 0x7fffffff);
    c->len = (size_t)a_len;
    c->bind = is_bind;
    return 0;
}

static void cache_drop(struct tp *t)
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
static int getfd(struct tp *t, int pid, int fd)
{
    int pidfd, orig, e;

    if (pid == t->cache_pid) {
        orig = (int)syscall(SYS_pidfd_getfd, t->cache_pidfd, fd, 0U);
        if (orig >= 0 || errno != ESRCH)
            return orig;
        cache_drop(t);
    }
    pidfd = (int)syscall(SYS_pidfd_open, pid, 0U);
    if (pidfd >= 0) {
        char path[64];
        orig = (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0U);
        e = errno;
        cache_drop(t);
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

    orig = getfd(t, (int)n->pid, fd);
    e = errno;
    if (seccomp_notify_id_valid(t->notify_fd, n->id) != 0) {
        if (orig >= 0)
            close(orig);
        return -1;
    }
    if (orig < 0) {
        respond(t, n->id, e == EBADF ? EBADF : EPERM, 0);
        return -1;
    }
    ns = in_sandbox_ns(t, orig);
    if (ns <= 0) {
        close(orig); /* not a socket of the sandbox's namespace: never CONTINUE */
        respond(t, n->id, ns == -ENOTTY || ns == -ENOTSOCK ? ENOTSOCK : EPERM, 0);
        return -1;
    }
    {
        socklen_t len = sizeof(*domain);
        *domain = 0;
        (void)getsockopt(orig, SOL_SOCKET, SO_DOMAIN, domain, &len);
    }
    return orig;
}

/* Whether sluice makes this connection: a TCP socket of the sandbox's
 * namespace, not connected or listening, given an address of its own family.
 * Then *dst and *port are set. 0 when the kernel may run the call instead
 * (see "Why CONTINUE is safe" at the top). */
static int intercepted(int orig, int domain, const struct call *c, struct policy_addr *dst,
                       uint16_t *port)
{
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    socklen_t len;
    int type = 0;
    uint8_t state = 0; /* struct tcp_info's first member, tcpi_state */

    len = sizeof(type);
    (void)getsockopt(orig, SOL_SOCKET, SO_TYPE, &type, &len);
    if ((domain != AF_INET && domain != AF_INET6) || type != SOCK_STREAM)
        return 0; /* UDP, Unix, ...: confined to the sandbox's namespace */
    len = sizeof(state);
    if (getsockopt(orig, IPPROTO_TCP, TCP_INFO, &state, &len) < 0 || len < 1 ||
        state != TCP_CLOSE)
        return 0; /* connected (EISCONN), listening (EINVAL), a connect() of the
                     kernel's under way (EALREADY): the kernel's answer */
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
    return 0; /* AF_UNSPEC, a family mismatch, a short address: the kernel's answer */
}

/* Judges and dials DST:PORT for the call (egress pipeline); on_egress
 * answers it. Takes orig. */
static void start_request(struct tp *t, const struct seccomp_notif *n, const struct call *c,
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
        respond(t, n->id, EAGAIN, 0);
        return;
    }
    r = calloc(1, sizeof(*r));
    if (rc < 0 || r == NULL) {
        free(r);
        close(orig);
        respond(t, n->id, rc < 0 ? ECONNREFUSED : ENOBUFS, 0);
        return;
    }
    r->t = t;
    r->id = n->id;
    r->pid = (int)n->pid;
    r->target_fd = c->fd;
    r->orig = orig;
    r->family = domain;
    r->next = t->reqs.next;
    r->prev = &t->reqs;
    t->reqs.next->prev = r;
    t->reqs.next = r;
    t->npending++;
    snprintf(r->host, sizeof(r->host), "%s", host.name);
    r->port = port;
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
    snprintf(r->client, sizeof(r->client), "pid %d", (int)n->pid);
    r->conn_id = t->next_id != NULL ? ++*t->next_id : 0;
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
    rc = egress_start_dial(t->egress, &host, port, "transparent", r->client,
                           EGRESS_DIAL_SYNC | (r->mapped ? EGRESS_DIAL_V6SOCKET : 0), on_egress, r,
                           &r->er);
    if (rc < 0) {
        r->er = NULL;
        respond(t, r->id, ENOBUFS, 0);
        req_free(r);
    }
}

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
static int peer_call(struct tp *t, const struct seccomp_notif *n)
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
            respond(t, n->id, EFAULT, 0);
            return 1;
        }
        a_fd = blk[0];
        a_addr = blk[1];
        a_lenp = blk[2];
    } else if (n->data.nr != t->nr_getpeername[abi] &&
               !(abi == 0 && t->nr_getpeername[1] >= 0 && n->data.nr == t->nr_getpeername[1])) {
        return 0;
    }
    fd = getfd(t, pid, (int)(a_fd & 0x7fffffff));
    if (fd >= 0) {
        if (getsockopt(fd, SOL_SOCKET, SO_COOKIE, &cookie, &clen) == 0 && cookie != 0)
            for (size_t i = 0; i < TP_PEERS && p == NULL; i++)
                if (t->peers[i].cookie == cookie)
                    p = &t->peers[i];
        close(fd);
    }
    if (p == NULL) {
        respond(t, n->id, 0, 1); /* not one of sluice's: the kernel's answer */
        return 1;
    }
    /* the value-result length, then the address cut to it, as the kernel
     * does; written through /proc/PID/mem opened before the notification
     * is found still valid, so the memory is the caller's */
    if (fsw_peek(pid, a_lenp, &len, sizeof(len)) != (ssize_t)sizeof(len)) {
        respond(t, n->id, EFAULT, 0);
        return 1;
    }
    if ((int32_t)len < 0) {
        respond(t, n->id, EINVAL, 0);
        return 1;
    }
    snprintf(path, sizeof(path), "/proc/%d/mem", pid);
    memfd = open(path, O_RDWR | O_CLOEXEC);
    if (memfd < 0) {
        respond(t, n->id, 0, 1);
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
    respond(t, n->id, e, 0);
    return 1;
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
static void wait_end(struct tp_wait *w, int error)
{
    struct tp *t = w->t;

    respond(t, w->id, error, 0);
    w->prev->next = w->next;
    w->next->prev = w->prev;
    t->npending--;
    uv_close((uv_handle_t *)&w->poll, wait_closed);
}

static void on_wait(uv_poll_t *p, int status, int events)
{
    struct tp_wait *w = container_of(p, struct tp_wait, poll);
    socklen_t len = sizeof(int);
    int e = 0;

    (void)events;
    if (status < 0)
        e = -status;
    else if (getsockopt(w->fd, SOL_SOCKET, SO_ERROR, &e, &len) < 0)
        e = errno;
    if (e == 0)
        e = -sb_tcp_settle(w->fd); /* as a blocking connect() leaves it: SS_CONNECTED */
    wait_end(w, e);
}

/* The caller of notification ID waits for the handshake of FD (taken)
 * under way. */
static void wait_connect(struct tp *t, uint64_t id, int fd)
{
    struct tp_wait *w = calloc(1, sizeof(*w));

    if (w == NULL || uv_poll_init(t->loop, &w->poll, fd) < 0) {
        free(w);
        close(fd);
        respond(t, id, ENOBUFS, 0);
        return;
    }
    w->t = t;
    w->id = id;
    w->fd = fd;
    w->poll.data = w;
    w->next = t->waits.next;
    w->prev = &t->waits;
    t->waits.next->prev = w;
    t->waits.next = w;
    t->npending++;
    t->handles++;
    if (uv_poll_start(&w->poll, UV_WRITABLE, on_wait) < 0)
        wait_end(w, ENOBUFS);
}

/* The value(s) of field KEY ("Uid", "Groups", ...) of a /proc/PID/status
 * text: up to MAX numbers in BASE into V. The count, or -1 when the field is
 * missing. */
static int status_field(const char *buf, const char *key, unsigned long long *v, int max, int base)
{
    size_t klen = strlen(key);
    const char *p = buf;
    int n = 0;

    for (;;) {
        if (strncmp(p, key, klen) == 0 && p[klen] == ':')
            break;
        p = strchr(p, '\n');
        if (p == NULL)
            return -1;
        p++;
    }
    p += klen + 1;
    while (n < max) {
        char *end;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '\n' || *p == '\0')
            break;
        v[n] = strtoull(p, &end, base);
        if (end == p)
            return -1;
        n++;
        p = end;
    }
    return n;
}

#define TP_MAX_GROUPS 256

/* The child of unix_path_call: becomes the caller as far as a Unix path
 * lookup can tell, then runs the call on S (sluice's copy of the checked
 * socket) with the address read_call read, and writes its errno (0 for
 * success) to OUT. On a step that fails it writes nothing and exits: the
 * call is then refused (EPERM). Only system calls (and strtoull on a local
 * buffer) after fork(): the host may have threads.
 *   - the user namespace that owns the caller's mount namespace (USERFD, -1
 *     when it is sluice's): the caller's, or an ancestor of it (bwrap
 *     nests one user namespace in another, and the command's is the inner
 *     one); sluice owns it, so the next steps are allowed there, and
 *     /proc/PID/status, opened after it through PROCFD, gives the caller's
 *     ids as that namespace maps them (the same kernel ids);
 *   - its mount namespace (MNTFD, -1 when sluice's), then its root and
 *     working directory (ROOTFD, CWDFD: /proc/PID/root and cwd), so that an
 *     absolute path is looked up in its view and a relative one from its
 *     working directory;
 *   - its supplementary groups (when setgroups() is denied in that
 *     namespace, bwrap's unprivileged case, they must already be sluice's),
 *     its real, effective, saved and filesystem gids and uids, its umask
 *     (the mode of the file bind() makes);
 *   - its effective and permitted capabilities when USERFD is the caller's
 *     own user namespace (OWNCAPS), else none (the caller's would count in
 *     its namespace, not in the ancestor's), and none at all if they cannot
 *     be set: fewer rights than the caller's only ever refuse;
 *   - a Landlock domain of its own (handling only LANDLOCK_ACCESS_FS_MAKE_BLOCK,
 *     which connect() and bind() never need), for Landlock's ptrace scoping:
 *     the command cannot follow /proc/1/fd/N or /proc/1/root (bwrap's init
 *     is in no domain), and the child must not either. On a kernel without
 *     Landlock the command has no such scoping and neither has the child.
 * /proc/self and /proc/thread-self name no process for the child (it is not
 * in the sandbox's PID namespace): a path through them fails with ENOENT,
 * never reaches sluice's own descriptors. */
static void unix_child(int procfd, int userfd, int mntfd, int rootfd, int cwdfd, int owncaps, int s,
                       const struct call *c, int out)
{
    static char buf[8192];
    unsigned long long uid[4], gid[4], grp[TP_MAX_GROUPS], um[1], eff[1], prm[1];
    gid_t groups[TP_MAX_GROUPS], mine[TP_MAX_GROUPS];
    struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct cap[2];
    size_t have = 0;
    ssize_t r;
    int fd, ng, e;

    if (userfd >= 0 && syscall(SYS_setns, userfd, CLONE_NEWUSER) < 0)
        _exit(1);
    fd = openat(procfd, "status", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        _exit(2);
    while (have < sizeof(buf) - 1 && (r = read(fd, buf + have, sizeof(buf) - 1 - have)) > 0)
        have += (size_t)r;
    buf[have] = '\0';
    if (status_field(buf, "Uid", uid, 4, 10) != 4 || status_field(buf, "Gid", gid, 4, 10) != 4 ||
        status_field(buf, "Umask", um, 1, 8) != 1 || status_field(buf, "CapEff", eff, 1, 16) != 1 ||
        status_field(buf, "CapPrm", prm, 1, 16) != 1)
        _exit(3);
    ng = status_field(buf, "Groups", grp, TP_MAX_GROUPS, 10);
    if (ng < 0 || ng == TP_MAX_GROUPS)
        _exit(3);
    if (mntfd >= 0 && syscall(SYS_setns, mntfd, CLONE_NEWNS) < 0)
        _exit(4);
    if (fchdir(rootfd) < 0 || chroot(".") < 0 || fchdir(cwdfd) < 0)
        _exit(5);
    for (int i = 0; i < ng; i++)
        groups[i] = (gid_t)grp[i];
    if (setgroups((size_t)ng, groups) < 0) {
        /* setgroups denied in that namespace: sluice's groups must be the
         * caller's already */
        int why = errno, nm = getgroups(TP_MAX_GROUPS, mine);
        if (why != EPERM || nm != ng)
            _exit(6);
        for (int i = 0; i < ng; i++)
            if (mine[i] != groups[i])
                _exit(6);
    }
    if (setresgid((gid_t)gid[0], (gid_t)gid[1], (gid_t)gid[2]) < 0 ||
        setresuid((uid_t)uid[0], (uid_t)uid[1], (uid_t)uid[2]) < 0)
        _exit(7);
    (void)setfsgid((gid_t)gid[3]);
    (void)setfsuid((uid_t)uid[3]);
    if ((gid_t)setfsgid((gid_t)-1) != (gid_t)gid[3] || (uid_t)setfsuid((uid_t)-1) != (uid_t)uid[3])
        _exit(7);
    umask((mode_t)(um[0] & 0777));
    memset(cap, 0, sizeof(cap));
    if (!owncaps)
        eff[0] = prm[0] = 0;
    cap[0].effective = (uint32_t)eff[0];
    cap[1].effective = (uint32_t)(eff[0] >> 32);
    cap[0].permitted = (uint32_t)prm[0];
    cap[1].permitted = (uint32_t)(prm[0] >> 32);
    if (syscall(SYS_capset, &hdr, cap) < 0) {
        memset(cap, 0, sizeof(cap));
        if (syscall(SYS_capset, &hdr, cap) < 0)
            _exit(8);
    }
    {
        uint64_t handled = 1ULL << 11; /* LANDLOCK_ACCESS_FS_MAKE_BLOCK, ABI 1 */
        long rs = syscall(SYS_landlock_create_ruleset, &handled, sizeof(handled), 0U);
        if (rs < 0 && errno != ENOSYS && errno != EOPNOTSUPP)
            _exit(10);
        if (rs >= 0 && (prctl(PR_SET_NO_NEW_PRIVS, 1L, 0L, 0L, 0L) < 0 ||
                        syscall(SYS_landlock_restrict_self, (int)rs, 0U) < 0))
            _exit(10);
    }
    if (c->bind)
        e = bind(s, &c->sa.sa, (socklen_t)c->len) == 0 ? 0 : errno;
    else
        e = connect(s, &c->sa.sa, (socklen_t)c->len) == 0 ? 0 : errno;
    if (write(out, &e, sizeof(e)) != (ssize_t)sizeof(e))
        _exit(9);
    _exit(0);
}

/* Whether descriptor FD names the same namespace as /proc/self/ns/NAME. */
static int same_ns(int fd, const char *name)
{
    struct stat a, b;
    char path[64];

    snprintf(path, sizeof(path), "/proc/self/ns/%s", name);
    return fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

/* A connect() or bind() to a Unix socket path (network.allowAllUnixSockets),
 * run on ORIG (taken), the copy of the command's socket take_socket checked,
 * with the address read_call read, in the caller's view and with its
 * permissions: by a short-lived child (unix_child) that joins the caller's
 * mount namespace (and the user namespace that owns it) and takes its
 * root, working directory, credentials and capabilities. Never CONTINUE
 * (see run_here); the host waits for the child. The socket's
 * O_NONBLOCK is set while the child runs, as run_here does, so the host
 * waits only for a path lookup: a Unix stream connect() that meets a full
 * backlog answers EAGAIN even to a blocking caller. Any step that fails
 * refuses the call (EPERM). */
static void unix_path_call(struct tp *t, const struct seccomp_notif *n, int orig,
                           const struct call *c)
{
    int procfd, userfd = -1, mntfd = -1, rootfd = -1, cwdfd = -1, callerfd = -1, p[2] = {-1, -1};
    int fl = -1, e = EPERM, gone = 0, owncaps, res, st;
    struct stat a, b;
    char path[64];
    pid_t child;
    ssize_t got;

    snprintf(path, sizeof(path), "/proc/%d", (int)n->pid);
    procfd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (procfd < 0)
        goto out;
    callerfd = openat(procfd, "ns/user", O_RDONLY | O_CLOEXEC);
    mntfd = openat(procfd, "ns/mnt", O_RDONLY | O_CLOEXEC);
    rootfd = openat(procfd, "root", O_PATH | O_DIRECTORY | O_CLOEXEC);
    cwdfd = openat(procfd, "cwd", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (seccomp_notify_id_valid(t->notify_fd, n->id) != 0) {
        gone = 1; /* the caller is gone: PID may name another process now */
        goto out;
    }
    if (callerfd < 0 || mntfd < 0 || rootfd < 0 || cwdfd < 0)
        goto out;
    userfd = ioctl(mntfd, NS_GET_USERNS); /* the mount namespace's owner */
    if (userfd < 0 || fstat(userfd, &a) < 0 || fstat(callerfd, &b) < 0)
        goto out;
    owncaps = a.st_dev == b.st_dev && a.st_ino == b.st_ino;
    if (same_ns(userfd, "user")) { /* a root run without a user namespace */
        close(userfd);
        userfd = -1;
    }
    if (same_ns(mntfd, "mnt")) {
        close(mntfd);
        mntfd = -1;
    }
    fl = fcntl(orig, F_GETFL);
    if (fl < 0) {
        e = EBADF;
        goto out;
    }
    if (pipe2(p, O_CLOEXEC) < 0)
        goto out;
    if (!(fl & O_NONBLOCK))
        (void)fcntl(orig, F_SETFL, fl | O_NONBLOCK);
    child = fork();
    if (child == 0) {
        close(p[0]);
        unix_child(procfd, userfd, mntfd, rootfd, cwdfd, owncaps, orig, c, p[1]);
    }
    close(p[1]);
    p[1] = -1;
    if (child > 0) {
        do
            got = read(p[0], &res, sizeof(res));
        while (got < 0 && errno == EINTR);
        while (waitpid(child, &st, 0) < 0 && errno == EINTR)
            ;
        if (got == (ssize_t)sizeof(res))
            e = res; /* else a step failed: EPERM */
    }
    if (!(fl & O_NONBLOCK))
        (void)fcntl(orig, F_SETFL, fl);
out:
    for (int i = 0; i < 2; i++)
        if (p[i] >= 0)
            close(p[i]);
    if (procfd >= 0)
        close(procfd);
    if (userfd >= 0)
        close(userfd);
    if (callerfd >= 0)
        close(callerfd);
    if (mntfd >= 0)
        close(mntfd);
    if (rootfd >= 0)
        close(rootfd);
    if (cwdfd >= 0)
        close(cwdfd);
    close(orig);
    if (!gone)
        respond(t, n->id, e, 0);
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
static void run_here(struct tp *t, const struct seccomp_notif *n, int orig, const struct call *c)
{
    int fl, rc, e;

    if (c->sa.sa.sa_family == AF_UNIX && c->len > offsetof(struct sockaddr_un, sun_path) &&
        ((const char *)&c->sa)[offsetof(struct sockaddr_un, sun_path)] != '\0') {
        if (!t->allow_unix) {
            close(orig);
            respond(t, n->id, EPERM, 0);
            return;
        }
        unix_path_call(t, n, orig, c);
        return;
    }
    if (c->bind) {
        e = bind(orig, &c->sa.sa, (socklen_t)c->len) == 0 ? 0 : errno;
        close(orig);
        respond(t, n->id, e, 0);
        return;
    }
    fl = fcntl(orig, F_GETFL);
    if (fl < 0 || (!(fl & O_NONBLOCK) && t->npending >= t->max_pending)) {
        close(orig);
        respond(t, n->id, fl < 0 ? EBADF : EAGAIN, 0);
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
    respond(t, n->id, e, 0);
}

/* One notification of the syscalls tp_start routed here (notify.c):
 * read, inspect, then run the call here, refuse it, or make the
 * connection. Always answers it. */
static int handle(void *ctx, int notify_fd, const struct seccomp_notif *n)
{
    struct tp *t = ctx;
    struct call c;
    struct policy_addr dst;
    uint16_t port = 0;
    int orig, domain;

    (void)notify_fd; /* t->notify_fd */
    if (peer_call(t, n))
        return 1;
    if (read_call(t, n, &c) < 0)
        return 1;
    orig = take_socket(t, n, c.fd, &domain);
    if (orig < 0)
        return 1;
    if (c.bind || t->egress == NULL || !intercepted(orig, domain, &c, &dst, &port) ||
        (is_loopback_or_any(&dst) && sandbox_listens(t->diag_fd, &dst, port))) {
        /* confined to the sandbox's namespace; for loopback: the proxy
         * listeners, the command's own servers */
        run_here(t, n, orig, &c);
        return 1;
    }
    if (port == 0) {
        close(orig);
        respond(t, n->id, ECONNREFUSED, 0);
        return 1;
    }
    start_request(t, n, &c, orig, domain, &dst, port);
    return 1;
}

/* ------------------------------------------------------------------------ */
/* Start and stop                                                            */

static const char *kernel_problem(void)
{
    struct utsname u;
    unsigned maj = 0, min = 0;
    long fd;

    /* pidfd_getfd (5.6): EBADF for a bad pidfd, ENOSYS when missing */
    fd = syscall(SYS_pidfd_getfd, -1, 0, 0U);
    if (fd < 0 && errno == ENOSYS)
        return "pidfd_getfd(2) (Linux 5.6+)";
    if (uname(&u) == 0 && sscanf(u.release, "%u.%u", &maj, &min) == 2 &&
        (maj < 5 || (maj == 5 && min < 14)))
        return "SECCOMP_ADDFD_FLAG_SETFD (Linux 5.14+)";
    return NULL;
}

const char *tp_preflight(void)
{
    return kernel_problem();
}

static void on_handle_closed(uv_handle_t *h)
{
    struct tp *t = h->data;

    if (--t->handles == 0)
        free(t);
}

/* Sends the syscalls transparent mode answers to handle(): connect(),
 * bind(), getpeername() on each ABI of the filter (x32's numbers arrive
 * with x86-64's arch), i386's socketcall. 0 or UV_ENOSPC. */
static int route(struct tp *t)
{
    int rc = 0;

    for (size_t i = 0; i < 3 && rc == 0; i++) {
        const int *nrs[3] = {t->nr_connect, t->nr_bind, t->nr_getpeername};
        for (size_t k = 0; k < 3 && rc == 0; k++) {
            rc = run_notify_route(t->notify, t->arch[i], nrs[k][i], handle, t);
            if (rc == 0 && i == 0)
                rc = run_notify_route(t->notify, t->arch[0], nrs[k][1], handle, t);
        }
    }
#if defined(__x86_64__)
    if (rc == 0)
        rc = run_notify_route(t->notify, SCMP_ARCH_X86, t->nr_socketcall, handle, t);
#endif
    return rc;
}

int tp_start(struct tp **out, const struct tp_opts *o, char *err, size_t errlen)
{
    struct tp *t;
    const char *why = kernel_problem();
    int rc, udp_taken = 0, tcp_taken = 0;

    *out = NULL;
    if (why != NULL) {
        snprintf(err, errlen, "transparent mode needs %s, which this kernel lacks", why);
        rc = -ENOSYS;
        goto early;
    }
    if (o->ns_ino == 0) {
        snprintf(err, errlen, "transparent mode: the sandbox's network namespace is unknown");
        rc = -ESRCH;
        goto early;
    }
    t = calloc(1, sizeof(*t));
    if (t == NULL || seccomp_notify_alloc(&t->notif, &t->resp) < 0) {
        free(t);
        snprintf(err, errlen, "out of memory");
        rc = -ENOMEM;
        goto early;
    }
    t->loop = o->loop;
    t->egress = o->egress;
    t->log = o->log;
    t->log_ctx = o->log_ctx;
    t->next_id = o->next_id;
    t->notify = o->notify;
    t->notify_fd = run_notify_fd(o->notify);
    t->pid = o->cmd_pid;
    t->diag_fd = o->diag_fd;
    t->max_pending = o->max_pending != 0 ? o->max_pending : 1024;
    t->allow_unix = o->allow_unix;
    t->self_pid = (int)getpid();
    read_defaults(t->optdef);
    t->ns_dev = o->ns_dev;
    t->ns_ino = o->ns_ino;
    if (t->diag_fd >= 0) {
        socklen_t len = sizeof(t->ns_cookie);
        if (getsockopt(t->diag_fd, SOL_SOCKET, SO_NETNS_COOKIE, &t->ns_cookie, &len) < 0)
            t->ns_cookie = 0; /* before Linux 5.14: SIOCGSKNS each time */
    }
    t->cache_pidfd = t->cache_fdinfo = t->cache_info = -1;
    t->reqs.next = t->reqs.prev = &t->reqs;
    t->waits.next = t->waits.prev = &t->waits;
    t->dconns.next = t->dconns.prev = &t->dconns;
    t->nr_socketcall = -1;
    {
        size_t narch;
        const uint32_t *arches = sb_seccomp_arches(&narch); /* the filter's */
        for (size_t i = 0; i < 3; i++) {
            t->arch[i] = i < narch ? arches[i] : 0;
            t->nr_connect[i] =
                t->arch[i] != 0 ? seccomp_syscall_resolve_name_arch(t->arch[i], "connect") : -1;
            t->nr_bind[i] =
                t->arch[i] != 0 ? seccomp_syscall_resolve_name_arch(t->arch[i], "bind") : -1;
            t->nr_getpeername[i] = t->arch[i] != 0
                                       ? seccomp_syscall_resolve_name_arch(t->arch[i], "getpeername")
                                       : -1;
        }
    }
#if defined(__x86_64__)
    t->nr_socketcall = seccomp_syscall_resolve_name_arch(SCMP_ARCH_X86, "socketcall");
#endif
    t->handles = 1; /* our own reference, dropped by tp_close */

    rc = 0;
    if (o->dns_udp_fd >= 0) {
        rc = uv_udp_init(t->loop, &t->udp);
        if (rc == 0) {
            t->udp.data = t;
            t->udp_open = 1;
            t->handles++;
            rc = uv_udp_open(&t->udp, o->dns_udp_fd);
            if (rc == 0)
                udp_taken = 1;
            if (rc == 0)
                rc = uv_udp_recv_start(&t->udp, tp_dns_udp_alloc, tp_dns_udp_recv);
        }
    }
    if (rc == 0 && o->dns_tcp_fd >= 0) {
        rc = uv_tcp_init(t->loop, &t->tcp);
        if (rc == 0) {
            t->tcp.data = t;
            t->tcp_open = 1;
            t->handles++;
            rc = uv_tcp_open(&t->tcp, o->dns_tcp_fd);
            if (rc == 0)
                tcp_taken = 1;
            if (rc == 0)
                rc = uv_listen((uv_stream_t *)&t->tcp, 128, tp_dns_tcp_accept);
        }
    }
    *out = t;
    if (!udp_taken && o->dns_udp_fd >= 0)
        close(o->dns_udp_fd);
    if (!tcp_taken && o->dns_tcp_fd >= 0)
        close(o->dns_tcp_fd);
    if (rc == 0)
        rc = route(t);
    if (rc < 0) {
        snprintf(err, errlen,
                 "transparent mode: cannot serve the seccomp listener or the "
                 "resolver: %s",
                 uv_strerror(rc));
        return rc;
    }
    return 0;
early:
    if (o->diag_fd >= 0)
        close(o->diag_fd);
    if (o->dns_udp_fd >= 0)
        close(o->dns_udp_fd);
    if (o->dns_tcp_fd >= 0)
        close(o->dns_tcp_fd);
    return rc;
}

struct tp *tp_new_for_test(struct egress_env *egress, connlog_fn log, void *ctx)
{
    struct tp *t = calloc(1, sizeof(*t));

    if (t == NULL)
        return NULL;
    t->egress = egress;
    t->log = log;
    t->log_ctx = ctx;
    t->notify_fd = -1;
    t->diag_fd = -1;
    t->cache_pidfd = t->cache_fdinfo = t->cache_info = -1;
    t->reqs.next = t->reqs.prev = &t->reqs;
    t->waits.next = t->waits.prev = &t->waits;
    t->dconns.next = t->dconns.prev = &t->dconns;
    return t;
}

void tp_free_for_test(struct tp *t)
{
    if (t == NULL)
        return;
    tp_names_free(&t->names);
    free(t);
}

const struct tp_names *tp_names_of(const struct tp *t)
{
    return &t->names;
}

void tp_close(struct tp *t)
{
    if (t == NULL || t->closing)
        return;
    t->closing = 1;
    while (t->reqs.next != &t->reqs) {
        struct tp_req *r = t->reqs.next;
        egress_cancel(r->er);
        /* the egress callback will not run: its log context goes too */
        respond(t, r->id, ECONNREFUSED, 0);
        req_free(r);
    }
    while (t->waits.next != &t->waits)
        wait_end(t->waits.next, ECONNABORTED);
    while (t->dconns.next != &t->dconns)
        tp_dns_conn_close(t->dconns.next);
    run_notify_unroute(t->notify, t);
    if (t->udp_open)
        uv_close((uv_handle_t *)&t->udp, on_handle_closed);
    if (t->tcp_open)
        uv_close((uv_handle_t *)&t->tcp, on_handle_closed);
    if (t->diag_fd >= 0)
        close(t->diag_fd);
    cache_drop(t);
    seccomp_notify_free(t->notif, t->resp);
    tp_names_free(&t->names);
    if (--t->handles == 0)
        free(t);
}

