/* run/ports.c - ports between the host and the sandbox (issue 26):
 *
 *   publish    (`--publish`, network.publish) sluice listens on the host at
 *              HOST_ADDR:HOST_PORT and relays each connection to
 *              127.0.0.1:SANDBOX_PORT in the sandbox's network namespace;
 *   hostPorts  (network.hostPorts) sluice listens in the sandbox's namespace
 *              on 127.0.0.1:PORT (and [::1]:PORT when it has IPv6) and
 *              relays each connection to the host's 127.0.0.1:PORT.
 *
 * Both are bridge forwarders (bridge/forward.h: accept, dial the one fixed
 * target, the relay's splice), so nothing else is reachable: a connection
 * goes to that one address and port, whatever the peer sends. No process
 * runs inside the sandbox: a helper forked from sluice (never in the
 * sandbox's pid or mount namespace) joins only its user and network
 * namespaces, as transparent mode's resolver helper does (tp_dns.c), makes
 * the hostPorts listeners there, and then makes the sockets the published
 * ports dial with, a batch at a time, on request. It holds nothing else
 * (every other descriptor closed), dies with sluice (PR_SET_PDEATHSIG) and
 * ends when its socket closes.
 *
 * SOCKS5 UDP ASSOCIATE (issue 26): when a udp: rule allows UDP somewhere,
 * the helper also makes UDP sockets of the namespace (requests "u"/"U"):
 * each association's relay socket, where the sandboxed client sends its
 * datagrams (socks/udp.c through frontend.udp_socket); the sockets that
 * reach the destinations stay the host's, as every egress does.
 *
 * Fail closed: every listener is made before the go byte; one that cannot
 * be made stops the run before the command starts. Connections are bounded
 * per port (half the service's connection limit shared among them, at
 * least PORTS_MIN_CONNS and at most PORTS_MAX_CONNS each): a flood waits in
 * the kernel's backlog.
 */
#define _GNU_SOURCE
#include "run/ports.h"

#include "common/common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/icmp.h>
#include <netinet/icmp6.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef NS_GET_USERNS
#define NS_GET_USERNS 0xb701 /* linux/nsfs.h: _IO(0xb7, 0x1) */
#endif

#define PORTS_MAX 64         /* publish entries (--publish and the key) */
#define PORTS_BATCH 8        /* sockets per request to the helper */
_Static_assert(PORTS_BATCH <= COMMON_FDS_MAX, "a batch fits one message");
#define PORTS_MIN_CONNS 16u  /* per forwarder, whatever the service's limit */
#define PORTS_MAX_CONNS 256u /* per forwarder: a flood waits in the backlog */
#define PORTS_HELPER_MS 5000 /* how long a helper answer may take */
#define PORTS_PRE_MAX 16     /* transparent UDP: udp: rules' ports made before the go byte */

struct ports_fwd {
    struct forwarder *fwd;
    struct listener *ls[2];
    size_t nls;
};

struct run_ports {
    struct run *run;
    struct settings_publish pub[PORTS_MAX];
    size_t npub;
    unsigned host[PORTS_MAX];
    size_t nhost;
    struct ports_fwd fwd[PORTS_MAX * 2];
    size_t nfwd;
    int helper; /* our end of the helper's socket, -1 */
    pid_t helper_pid;
    int pool[2][PORTS_BATCH]; /* unused sockets of the namespace: [0] IPv4, [1] IPv6 */
    size_t npool[2];
    int upool[2][PORTS_BATCH]; /* the same, UDP: SOCKS5 UDP ASSOCIATE's relay sockets */
    size_t nupool[2];
    int udp; /* udp: rules: the helper runs for UDP ASSOCIATE's relay sockets */
    int tpudp; /* transparent mode: relay sockets bound in the namespace (tp_udp.c) */
    /* transparent UDP: relay sockets made before the go byte (port 53 and
     * the udp: rules' ports), taken by run_ports_udp_relay */
    struct {
        int fd;
        int family;
        unsigned port;
    } pre[2 * (PORTS_PRE_MAX + 1)];
    size_t npre;
};

/* The helper's answers: a header and up to 2 (listeners) or PORTS_BATCH
 * (sockets) descriptors. */
struct ports_msg {
    char tag; /* 'L' listeners of one host port, 'S' sockets */
    unsigned char nfds;
    int err; /* errno of the step that failed, else 0 */
};

/* ------------------------------------------------------------------------ */
/* Checks, before anything starts                                            */

/* "127.0.0.1:8080", "[::1]:8080" */
static const char *host_text(const struct settings_publish *pub, char *buf, size_t len)
{
    char a[INET6_ADDRSTRLEN];

    if (inet_ntop(pub->family == 6 ? AF_INET6 : AF_INET, pub->addr, a, sizeof(a)) == NULL)
        snprintf(a, sizeof(a), "?");
    snprintf(buf, len, pub->family == 6 ? "[%s]:%u" : "%s:%u", a, pub->host_port);
    return buf;
}

static int add_publish(struct run_ports *p, const char *s, const char *where)
{
    const char *why;

    if (p->npub == PORTS_MAX) {
        fprintf(stderr, "sluice: run: %s: at most %d published ports\n", where, PORTS_MAX);
        return -1;
    }
    if (settings_publish_parse(s, &p->pub[p->npub], &why) < 0) {
        fprintf(stderr, "sluice: run: %s: invalid published port '%s' (%s)\n", where, s, why);
        return -1;
    }
    for (size_t i = 0; i < p->npub; i++)
        if (p->pub[i].host_port == p->pub[p->npub].host_port) {
            fprintf(stderr, "sluice: run: %s: host port %u is published twice\n", where,
                    p->pub[i].host_port);
            return -1;
        }
    p->npub++;
    return 0;
}

static int collect(struct run_ports *p, const struct sb_launch_opts *o, const struct settings *s)
{
    char where[600];

    for (size_t i = 0; i < s->network.publish.n; i++) {
        const struct settings_item *it = &s->network.publish.items[i];
        snprintf(where, sizeof(where), "%s:%u:%u: network.publish[%zu]", it->file, it->line,
                 it->col, it->index);
        if (add_publish(p, it->value, where) < 0)
            return -1;
    }
    for (size_t i = 0; i < o->npublish; i++)
        if (add_publish(p, o->publish[i], "--publish") < 0)
            return -1;
    for (size_t i = 0; i < s->network.host_ports.n && p->nhost < PORTS_MAX; i++) {
        const struct settings_item *it = &s->network.host_ports.items[i];
        p->host[p->nhost] = (unsigned)strtoul(it->value, NULL, 10);
        for (size_t j = 0; j < p->npub; j++) {
            const char *why = NULL;
            if (p->pub[j].host_port == p->host[p->nhost])
                why = "also a published host port: the sandbox would reach itself";
            else if (p->pub[j].sandbox_port == p->host[p->nhost])
                why = "also a published SANDBOX_PORT: inside the sandbox it is the command's";
            if (why != NULL) {
                fprintf(stderr, "sluice: run: %s:%u:%u: network.hostPorts[%zu]: port %u is %s\n",
                        it->file, it->line, it->col, it->index, p->host[p->nhost], why);
                return -1;
            }
        }
        p->nhost++;
    }
    return 0;
}

/* 1 when a udp: rule allows UDP somewhere: SOCKS5 UDP ASSOCIATE is served
 * from the sandbox (its relay sockets come from the helper). */
static int has_udp_rules(const struct settings *s)
{
    for (size_t i = 0; i < s->network.allowed_domains.n; i++)
        if (strncmp(s->network.allowed_domains.items[i].value, "udp:", 4) == 0)
            return 1;
    return 0;
}

int run_ports_prepare(struct run *run)
{
    struct run_ports *p;
    char addr[INET6_ADDRSTRLEN + 10];

    int udp = has_udp_rules(run->settings);
    int tpudp = run->settings->network.transparent && run->settings->network.isolate;

    if (run->settings->network.publish.n == 0 && run->o->npublish == 0 &&
        run->settings->network.host_ports.n == 0 && !udp && !tpudp)
        return 0;
    if (!run->settings->network.isolate) {
        if (udp && run->settings->network.publish.n == 0 && run->o->npublish == 0 &&
            run->settings->network.host_ports.n == 0)
            return 0; /* the command has the host's network: UDP ASSOCIATE stays refused */
        fprintf(stderr, "sluice: run: network.publish, --publish and network.hostPorts need the "
                        "sandbox's own network (network.isolate is false: the command has the "
                        "host's); the command was not run\n");
        return -1;
    }
    p = calloc(1, sizeof(*p));
    if (p == NULL) {
        fprintf(stderr, "sluice: run: out of memory\n");
        return -1;
    }
    p->run = run;
    p->helper = -1;
    p->udp = udp;
    p->tpudp = tpudp;
    run->ports = p;
    if (collect(p, run->o, run->settings) < 0) {
        fprintf(stderr, "sluice: run: the command was not run\n");
        return -1;
    }
    /* a published port is a server the command starts: it may bind and
     * listen in its own namespace (network.allowLocalBinding) */
    if (p->npub > 0 && !run->settings->network.allow_local_binding) {
        run->settings->network.allow_local_binding = 1;
        run_debug(run, "ports: published ports turn on network.allowLocalBinding");
    }
    for (size_t i = 0; i < p->npub; i++) {
        if (settings_publish_is_loopback(&p->pub[i]))
            continue;
        fprintf(stderr,
                "sluice: run: warning: sandbox port %u is published on %s, outside the "
                "host's loopback: other machines may reach it\n",
                p->pub[i].sandbox_port, host_text(&p->pub[i], addr, sizeof(addr)));
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The helper (a child of this process; only system calls after fork)        */

static int send_fds(int sock, char tag, int err, const int *fds, size_t n)
{
    struct ports_msg m = {.tag = tag, .nfds = (unsigned char)n, .err = err};

    return common_send_fds(sock, &m, sizeof(m), fds, n) == 0 ? 0 : -1;
}

/* A listening socket on loopback:port of family in the namespace we are in;
 * -errno. No SO_REUSEADDR or SO_REUSEPORT: nobody in the sandbox may bind
 * the port beside it. */
static int helper_listen(int family, unsigned port)
{
    struct sockaddr_in a4;
    struct sockaddr_in6 a6;
    int fd, one = 1, e;

    fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    memset(&a4, 0, sizeof(a4));
    memset(&a6, 0, sizeof(a6));
    a4.sin_family = AF_INET;
    a4.sin_port = htons((uint16_t)port);
    a4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a6.sin6_family = AF_INET6;
    a6.sin6_port = htons((uint16_t)port);
    a6.sin6_addr = in6addr_loopback;
    if (family == AF_INET6)
        (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    if ((family == AF_INET ? bind(fd, (struct sockaddr *)&a4, sizeof(a4))
                           : bind(fd, (struct sockaddr *)&a6, sizeof(a6))) < 0 ||
        listen(fd, 511) < 0) {
        e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

static int helper_join(int pid)
{
    char path[64];
    int netfd, userfd;

    snprintf(path, sizeof(path), "/proc/%d/ns/net", pid);
    netfd = open(path, O_RDONLY | O_CLOEXEC);
    if (netfd < 0)
        return -1;
    userfd = ioctl(netfd, NS_GET_USERNS);
    if (userfd < 0)
        return -1;
    /* EINVAL: already in it (a setuid bwrap made no user namespace) */
    if (syscall(SYS_setns, userfd, CLONE_NEWUSER) < 0 && errno != EINVAL)
        return -1;
    if (syscall(SYS_setns, netfd, CLONE_NEWNET) < 0)
        return -1;
    close(netfd);
    close(userfd);
    return 0;
}

/* Transparent UDP's relay socket for PORT of FAMILY (tp_udp.c): bound to
 * the wildcard address, with the original destination of each datagram
 * (IP_RECVORIGDSTADDR) and IP_TRANSPARENT, so that replies can leave from
 * that destination (every address is local under the routes tp_dns.c
 * adds). Port 53 shares its port with the resolver's 127.0.0.1:53
 * (SO_REUSEADDR on both); no other port does, so that nothing in the
 * sandbox binds beside a relay. Port 0: a raw ICMP (ICMPv6) socket of the
 * namespace, filtered to receive nothing, with which tp_udp.c answers a
 * denied datagram with port unreachable. A descriptor or -errno. */
static int helper_relay(int family, unsigned port)
{
    struct sockaddr_storage ss;
    struct icmp6_filter f6;
    uint32_t f4 = ~0u;
    struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
    int one = 1, fd, e, ok;

    if (port == 0) { /* the raw ICMP socket that refuses denied datagrams; reads nothing */
        fd = socket(family, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC,
                    family == AF_INET ? IPPROTO_ICMP : IPPROTO_ICMPV6);
        if (fd < 0)
            return -errno;
        ICMP6_FILTER_SETBLOCKALL(&f6);
        if ((family == AF_INET ? setsockopt(fd, SOL_RAW, ICMP_FILTER, &f4, sizeof(f4))
                               : setsockopt(fd, IPPROTO_ICMPV6, ICMP6_FILTER, &f6, sizeof(f6))) <
            0) {
            e = errno;
            close(fd);
            return -e;
        }
        return fd;
    }
    fd = socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    memset(&ss, 0, sizeof(ss));
    if (family == AF_INET) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)port);
        ok = setsockopt(fd, IPPROTO_IP, IP_RECVORIGDSTADDR, &one, sizeof(one)) == 0 &&
             setsockopt(fd, IPPROTO_IP, IP_TRANSPARENT, &one, sizeof(one)) == 0;
    } else {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)port);
        ok = setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) == 0 &&
             setsockopt(fd, IPPROTO_IPV6, IPV6_RECVORIGDSTADDR, &one, sizeof(one)) == 0 &&
             setsockopt(fd, IPPROTO_IPV6, IPV6_TRANSPARENT, &one, sizeof(one)) == 0;
    }
    if (ok && port == 53)
        ok = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == 0;
    if (!ok || bind(fd, (struct sockaddr *)&ss,
                    family == AF_INET ? sizeof(*a4) : sizeof(*a6)) < 0) {
        e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

/* Answers "4"/"6" with PORTS_BATCH TCP sockets of that family, "u"/"U"
 * with UDP ones (IPv4/IPv6), "r" FAMILY PORT_HI PORT_LO with one relay
 * socket (helper_relay), until EOF. */
static void helper_serve(int sock)
{
    unsigned char rq[4];
    int fds[PORTS_BATCH];
    ssize_t got;

    while ((got = read(sock, rq, sizeof(rq))) >= 1) {
        char req = (char)rq[0];
        int family = req == '6' || req == 'U' ? AF_INET6 : AF_INET, e = 0;
        if (req == 'r') {
            int fd = got == 4 ? helper_relay(rq[1] == '6' ? AF_INET6 : AF_INET,
                                             (unsigned)rq[2] << 8 | rq[3])
                              : -EINVAL;
            if (send_fds(sock, 'S', fd < 0 ? -fd : 0, &fd, fd < 0 ? 0 : 1) < 0)
                _exit(0);
            if (fd >= 0)
                close(fd);
            continue;
        }
        int type = req == 'u' || req == 'U' ? SOCK_DGRAM : SOCK_STREAM;
        size_t n = 0;
        for (; n < PORTS_BATCH; n++) {
            fds[n] = socket(family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
            if (fds[n] < 0) {
                e = errno;
                break;
            }
        }
        if (send_fds(sock, 'S', n == 0 ? e : 0, fds, n) < 0)
            _exit(0);
        for (size_t i = 0; i < n; i++)
            close(fds[i]);
    }
    _exit(0);
}

static void helper_main(int pid, pid_t parent, int sock, const unsigned *ports, size_t nports)
{
    int fds[2];

    (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
    /* a copy of sluice's memory in the sandbox's user namespace: nobody
     * there may ptrace it or read its /proc files */
    (void)prctl(PR_SET_DUMPABLE, 0);
    if (getppid() != parent)
        _exit(1);
    /* nothing of sluice's but the one socket (fd 3): not even its
     * standard descriptors (a terminal) */
    if (dup2(sock, 3) < 0)
        _exit(1);
    sock = 3;
    for (int fd = 0; fd < 3; fd++)
        (void)close(fd);
    if (syscall(SYS_close_range, 4u, ~0u, 0u) < 0)
        for (int fd = 4; fd < 65536; fd++)
            (void)close(fd);
    if (helper_join(pid) < 0) {
        (void)send_fds(sock, 'L', errno != 0 ? errno : EPERM, NULL, 0);
        _exit(1);
    }
    for (size_t i = 0; i < nports; i++) {
        size_t n = 0;
        int fd = helper_listen(AF_INET, ports[i]);
        if (fd < 0) {
            (void)send_fds(sock, 'L', -fd, NULL, 0);
            _exit(1);
        }
        fds[n++] = fd;
        /* [::1] too when the namespace has IPv6 */
        fd = helper_listen(AF_INET6, ports[i]);
        if (fd >= 0)
            fds[n++] = fd;
        else if (fd != -EAFNOSUPPORT && fd != -EADDRNOTAVAIL) {
            (void)send_fds(sock, 'L', -fd, NULL, 0);
            _exit(1);
        }
        if (send_fds(sock, 'L', 0, fds, n) < 0)
            _exit(1);
        for (size_t j = 0; j < n; j++)
            close(fds[j]);
    }
    helper_serve(sock);
}

/* One answer: its header into *m, its descriptors (close-on-exec) into
 * fds (at most max; extra ones closed). 0 or -errno. */
static int recv_fds(int sock, struct ports_msg *m, int *fds, size_t max, size_t *n)
{
    int flags = 0;
    ssize_t r = common_recv_fds(sock, m, sizeof(*m), 0, fds, max, n, &flags);

    if (r < 0)
        return r == -EAGAIN ? -ETIMEDOUT : (int)r;
    if (r != (ssize_t)sizeof(*m) || (flags & (MSG_TRUNC | MSG_CTRUNC)) != 0) {
        for (size_t i = 0; i < *n; i++)
            close(fds[i]);
        *n = 0;
        return r == 0 ? -EPIPE : -EPROTO;
    }
    return 0;
}

static int helper_start(struct run_ports *p, char *err, size_t errlen)
{
    struct timeval tv = {.tv_sec = PORTS_HELPER_MS / 1000, .tv_usec = 0};
    pid_t parent = getpid(), child;
    int sp[2];

    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) {
        snprintf(err, errlen, "socketpair: %s", strerror(errno));
        return -1;
    }
    child = fork();
    if (child < 0) {
        snprintf(err, errlen, "fork: %s", strerror(errno));
        close(sp[0]);
        close(sp[1]);
        return -1;
    }
    if (child == 0) {
        close(sp[0]);
        helper_main(p->run->h.cmd_pid, parent, sp[1], p->host, p->nhost);
    }
    close(sp[1]);
    p->helper = sp[0];
    p->helper_pid = child;
    (void)setsockopt(p->helper, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The forwarders                                                            */

/* A socket of the sandbox's namespace from the helper's batches: pool
 * (and its count) for family, refilled with request req. */
static int pooled(struct run_ports *p, int *pool, size_t *n, char req, const char *what)
{
    if (*n == 0) {
        struct ports_msg m;
        int rc;
        if (p->helper < 0 || write(p->helper, &req, 1) != 1)
            return UV_EIO;
        rc = recv_fds(p->helper, &m, pool, PORTS_BATCH, n);
        if (rc < 0 || m.tag != 'S' || *n == 0) {
            run_debug(p->run, "%s: no socket from the sandbox's namespace (%s)", what,
                      strerror(rc < 0 ? -rc : m.err));
            return UV_EIO;
        }
    }
    return pool[--*n];
}

/* The dialer's socket source for published ports (bridge/forward.h). */
static int make_socket(void *arg, int family)
{
    struct run_ports *p = arg;
    size_t k = family == AF_INET6 ? 1 : 0;

    return pooled(p, p->pool[k], &p->npool[k], k == 1 ? '6' : '4', "published port");
}

/* SOCKS5 UDP ASSOCIATE's relay socket (frontend.udp_socket): a UDP socket
 * of the sandbox's namespace, where the client sends its datagrams. */
static int make_udp_socket(void *arg, int family)
{
    struct run_ports *p = arg;
    size_t k = family == AF_INET6 ? 1 : 0;

    return pooled(p, p->upool[k], &p->nupool[k], k == 1 ? 'U' : 'u', "SOCKS5 UDP ASSOCIATE");
}

/* One relay socket from the helper (request "r"), or -errno. */
static int helper_relay_request(struct run_ports *p, int family, unsigned port)
{
    unsigned char rq[4] = {'r', family == AF_INET6 ? '6' : '4', (unsigned char)(port >> 8),
                           (unsigned char)port};
    struct ports_msg m;
    int fd = -1, rc;
    size_t n = 0;

    if (p->helper < 0)
        return -EIO;
    if (write(p->helper, rq, sizeof(rq)) != (ssize_t)sizeof(rq))
        return -EIO;
    rc = recv_fds(p->helper, &m, &fd, 1, &n);
    if (rc < 0)
        return rc;
    if (m.tag != 'S' || n != 1) {
        if (n == 1)
            close(fd);
        return m.err != 0 ? -m.err : -EPROTO;
    }
    return fd;
}

int run_ports_udp_relay(void *arg, int family, unsigned port)
{
    struct run_ports *p = arg;

    for (size_t i = 0; i < p->npre; i++)
        if (p->pre[i].family == family && p->pre[i].port == port) {
            int fd = p->pre[i].fd;
            p->pre[i] = p->pre[--p->npre];
            return fd;
        }
    return helper_relay_request(p, family, port);
}

size_t run_ports_udp_ports(const struct run *run, uint16_t *out, size_t max)
{
    const struct run_ports *p = run->ports;
    size_t n = 0;

    for (size_t i = 0; p != NULL && i < p->npre; i++) {
        int seen = 0;
        for (size_t j = 0; j < n; j++)
            seen |= out[j] == p->pre[i].port;
        if (!seen && n < max)
            out[n++] = (uint16_t)p->pre[i].port;
    }
    return n;
}

/* The ports transparent UDP relays before the command starts: 53 and the
 * port of each udp: allow rule (not '*'), at most PORTS_PRE_MAX of those. */
static void pre_relays(struct run_ports *p)
{
    const struct settings_list *l = &p->run->settings->network.allowed_domains;
    unsigned ports[PORTS_PRE_MAX + 1];
    size_t n = 0;

    ports[n++] = 53;
    for (size_t i = 0; i < l->n && n < PORTS_PRE_MAX + 1; i++) {
        const char *v = l->items[i].value, *c = strrchr(v, ':');
        char *end;
        unsigned long port;
        int seen = 0;
        if (strncmp(v, "udp:", 4) != 0 || c == NULL || c[1] < '0' || c[1] > '9')
            continue;
        port = strtoul(c + 1, &end, 10);
        if (*end != '\0' || port == 0 || port > 65535)
            continue;
        for (size_t j = 0; j < n; j++)
            seen |= ports[j] == port;
        if (!seen)
            ports[n++] = (unsigned)port;
    }
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < 2; k++) {
            int family = k == 0 ? AF_INET : AF_INET6;
            int fd = helper_relay_request(p, family, ports[i]);
            if (fd < 0) {
                run_debug(p->run, "transparent UDP: no relay for %s port %u yet (%s)",
                          k == 0 ? "IPv4" : "IPv6", ports[i], strerror(-fd));
                continue;
            }
            p->pre[p->npre].fd = fd;
            p->pre[p->npre].family = family;
            p->pre[p->npre].port = ports[i];
            p->npre++;
        }
}

static void on_accept(struct listener *l, void *arg)
{
    forwarder_accept(((struct ports_fwd *)arg)->fwd, l);
}

static void on_log(void *ctx, const struct connlog *r)
{
    run_note_decision(ctx, r);
}

/* A forwarder to 127.0.0.1:port (in the sandbox with make_socket). */
static int new_fwd(struct run_ports *p, struct ports_fwd *f, unsigned port, int publish)
{
    struct run *run = p->run;
    struct forward_opts o;
    size_t max = run->core.limit.max / 2 / (p->npub + p->nhost);

    memset(&o, 0, sizeof(o));
    o.connect.kind = ENDPOINT_TCP;
    o.connect.addr.family = 4;
    o.connect.addr.bytes[0] = 127;
    o.connect.addr.bytes[3] = 1;
    o.connect.port = (uint16_t)port;
    o.max_conns = max < PORTS_MIN_CONNS   ? PORTS_MIN_CONNS
                  : max > PORTS_MAX_CONNS ? PORTS_MAX_CONNS
                                          : (unsigned)max;
    o.idle_ms = run->settings->proxy.idle_timeout_ms;
    o.connect_ms = run->settings->proxy.dial_timeout_ms;
    o.log = run->log_on ? on_log : NULL;
    o.log_ctx = run;
    o.next_id = &run->next_id;
    o.protocol = publish ? "publish" : "hostport";
    if (publish) {
        o.make_socket = make_socket;
        o.make_socket_arg = p;
    }
    return forwarder_new(&f->fwd, &run->loop, &o);
}

static int open_publish(struct run_ports *p, const struct settings_publish *pub, char *err,
                        size_t errlen)
{
    struct ports_fwd *f = &p->fwd[p->nfwd];
    struct endpoint ep;
    const char *why = NULL;
    char addr[INET6_ADDRSTRLEN + 10];
    int rc;

    memset(&ep, 0, sizeof(ep));
    ep.kind = ENDPOINT_TCP;
    ep.addr.family = (uint8_t)pub->family;
    memcpy(ep.addr.bytes, pub->addr, pub->family == 4 ? 4 : 16);
    ep.port = pub->host_port;
    rc = new_fwd(p, f, pub->sandbox_port, 1);
    if (rc == 0) {
        p->nfwd++;
        rc = listener_open(&f->ls[0], &p->run->loop, &ep, on_accept, f, &why);
    }
    if (rc < 0) {
        snprintf(err, errlen, "cannot publish sandbox port %u on %s: %s", pub->sandbox_port,
                 host_text(pub, addr, sizeof(addr)), why != NULL ? why : uv_strerror(rc));
        return -1;
    }
    f->nls = 1;
    return 0;
}

/* The helper's listeners for hostPorts[i], each port its forwarder. */
static int open_host_port(struct run_ports *p, unsigned port, char *err, size_t errlen)
{
    struct ports_fwd *f = &p->fwd[p->nfwd];
    struct ports_msg m;
    int fds[2], rc;
    size_t n;

    rc = recv_fds(p->helper, &m, fds, 2, &n);
    if (rc == 0 && (m.tag != 'L' || m.err != 0 || n == 0)) {
        rc = m.err != 0 ? -m.err : -EPROTO;
        for (size_t i = 0; i < n; i++)
            close(fds[i]);
    }
    if (rc < 0) {
        snprintf(err, errlen, "network.hostPorts: cannot listen on 127.0.0.1:%u in the sandbox: %s",
                 port, strerror(-rc));
        return -1;
    }
    rc = new_fwd(p, f, port, 0);
    if (rc == 0)
        p->nfwd++;
    for (size_t i = 0; i < n; i++) {
        struct endpoint ep;
        const char *why = NULL;
        memset(&ep, 0, sizeof(ep));
        ep.kind = ENDPOINT_FD;
        ep.fd = fds[i];
        if (rc == 0)
            rc = listener_open(&f->ls[f->nls], &p->run->loop, &ep, on_accept, f, &why);
        if (rc < 0) {
            for (size_t j = i; j < n; j++)
                close(fds[j]);
            snprintf(err, errlen, "network.hostPorts: cannot serve port %u in the sandbox: %s",
                     port, why != NULL ? why : uv_strerror(rc));
            return -1;
        }
        f->nls++;
    }
    return 0;
}

int run_ports_before_go(struct run *run)
{
    struct run_ports *p = run->ports;
    char err[300];

    if (p == NULL)
        return 0;
    err[0] = '\0';
    for (size_t i = 0; i < p->npub; i++)
        if (open_publish(p, &p->pub[i], err, sizeof(err)) < 0)
            goto fail;
    if (run->h.cmd_pid <= 0) {
        snprintf(err, sizeof(err), "the sandbox's network namespace is unknown (no pid)");
        goto fail;
    }
    if (helper_start(p, err, sizeof(err)) < 0)
        goto fail;
    for (size_t i = 0; i < p->nhost; i++)
        if (open_host_port(p, p->host[i], err, sizeof(err)) < 0)
            goto fail;
    if (p->udp) { /* SOCKS5 UDP ASSOCIATE: relay sockets made in the sandbox's namespace */
        struct frontend *fe = &run->core.fe[PROXY_FE_SOCKS];
        fe->udp_socket = make_udp_socket;
        fe->udp_ctx = p;
        fe->udp_associate = 1;
    }
    if (p->tpudp && run->tp_routes != 0)
        pre_relays(p);
    run_debug(run, "ports: %zu published, %zu host ports reachable from the sandbox%s", p->npub,
              p->nhost, p->udp ? ", SOCKS5 UDP ASSOCIATE served" : "");
    return 0;
fail:
    fprintf(stderr, "sluice: run: %s; the command was not run\n", err);
    run_kill(run, SIGKILL);
    return -1;
}

size_t run_ports_live(const struct run *run)
{
    size_t n = 0;

    if (run->ports == NULL)
        return 0;
    for (size_t i = 0; i < run->ports->nfwd; i++)
        n += forwarder_live(run->ports->fwd[i].fwd);
    return n;
}

void run_ports_close(struct run *run)
{
    struct run_ports *p = run->ports;

    if (p == NULL)
        return;
    for (size_t i = 0; i < p->nfwd; i++) {
        for (size_t j = 0; j < p->fwd[i].nls; j++)
            listener_close(p->fwd[i].ls[j], NULL, NULL);
        p->fwd[i].nls = 0;
        if (p->fwd[i].fwd != NULL)
            forwarder_close(p->fwd[i].fwd, NULL, NULL);
        p->fwd[i].fwd = NULL;
    }
    p->nfwd = 0;
}

void run_ports_free(struct run *run)
{
    struct run_ports *p = run->ports;

    if (p == NULL)
        return;
    for (size_t i = 0; i < p->npre; i++)
        close(p->pre[i].fd);
    for (size_t k = 0; k < 2; k++) {
        for (size_t i = 0; i < p->npool[k]; i++)
            close(p->pool[k][i]);
        for (size_t i = 0; i < p->nupool[k]; i++)
            close(p->upool[k][i]);
    }
    if (p->helper >= 0)
        close(p->helper); /* the helper's EOF: it exits */
    if (p->helper_pid > 0) {
        (void)kill(p->helper_pid, SIGKILL);
        while (waitpid(p->helper_pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    free(p);
    run->ports = NULL;
}
