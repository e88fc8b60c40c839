/* run/tp_udp.c - transparent UDP (issue 26): UDP connect(), sendto() and
 * sendmsg() of the command to any address, judged by name like TCP.
 *
 * The security comes from routing, not from reading syscall arguments
 * (which a second thread can rewrite, and which the filter cannot see for
 * sendmsg()/sendmmsg()):
 *
 *   1. Every address is local in the sandbox's namespace: tp_dns.c's
 *      helper adds `local 0.0.0.0/0 dev lo` and `local ::/0 dev lo` to its
 *      local table. A datagram the command sends, to any address, by any
 *      call (sendto another address after connect(), connect(AF_UNSPEC),
 *      re-connect, sendmsg, sendmmsg, a msg_name rewritten during the
 *      call), is delivered inside the namespace, to a socket bound to its
 *      port, or answered with port unreachable. The namespace has no other
 *      interface: nothing leaves it. The command only ever holds UDP
 *      sockets of that namespace (sluice never hands it a host one).
 *   2. Relays: per destination port, a UDP socket bound to 0.0.0.0:PORT
 *      (and [::]:PORT) in the namespace, made by run/ports.c's helper, held
 *      here, with IP_RECVORIGDSTADDR: each datagram carries the address the
 *      command aimed at. Port 53 and the udp: rules' ports have one from
 *      the start; other ports get one when a UDP socket is connect()ed to
 *      them (tp_call.c, before the call runs; glibc's getaddrinfo() does so
 *      for each answer it sorts), at most TPU_MAX_PORTS learned (a port scan
 *      from inside makes no more). A datagram to a port no relay serves
 *      meets port unreachable: sendto() and sendmsg() are not notified (one
 *      notification per datagram costs too much), so an unconnected socket
 *      reaches the ports that have relays.
 *   3. Flows: (the command's address:port, the original destination). Each
 *      is judged once, like a SOCKS5 UDP destination (socks/udp.c): a
 *      synthetic address maps back to its name (tp_dns.c), any other
 *      address is an IP literal; policy_decide_transport(POLICY_UDP), a
 *      name resolved by sluice's resolver and its answers guarded, the
 *      first dialable answer kept. An allowed flow gets a host socket of
 *      sluice's connected to that answer (the kernel takes replies from it
 *      only); a denied datagram is answered with ICMP port unreachable (a
 *      connected socket then fails with ECONNREFUSED, as for a closed
 *      port) and counted, the destination logged once (protocol
 *      "transparent-udp") and in the blocked summary. At most TPU_MAX_FLOWS: the least recently used goes first.
 *      A reload judges every flow again.
 *   4. Replies leave the relay with the original destination as their
 *      source (IP_PKTINFO / IPV6_PKTINFO; the relay is IP_TRANSPARENT), so
 *      recvfrom() shows the peer the command aimed at.
 *   5. DNS: a datagram to port 53 of any address is answered by the
 *      sandbox's resolver (tp_dns_answer: synthetic answers, NXDOMAIN for
 *      denied names) unless a udp: rule allows that resolver; then it is
 *      relayed like any other.
 *   6. Fail closed: without the IPv4 route (or without the helper) there
 *      are no relays and datagrams fail as before (ENETUNREACH).
 */
#define _GNU_SOURCE
#include "run/transparent_int.h"

#include "common/common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define TPU_MAX_PORTS 64        /* relay ports (each an IPv4 and an IPv6 socket) */
#define TPU_MAX_FLOWS 256       /* flows at once; the least recently used goes */
#define TPU_PENDING 4           /* datagrams held per flow while its name resolves */
#define TPU_HELD_BYTES 262144   /* bytes held in all */
#define TPU_BATCH 64            /* datagrams read per wakeup of a relay */
#define TPU_IDLE_DEFAULT 120000 /* ms: a flow without datagrams is closed */
#define TPU_IDLE_MAX 300000
#define TPU_LOGGED 128 /* destinations logged (a ring) */
#define TPU_BUF 65536

enum tpu_state { TPU_PENDING_ST = 0, TPU_ALLOWED, TPU_DENIED, TPU_DNS };

struct tpu_relay {
    struct tp_udp *u;
    uv_poll_t poll;
    int fd;
    int family; /* AF_INET, AF_INET6 */
    uint16_t port;
};

struct tpu_held {
    uint8_t *data;
    size_t len;
};

struct tpu_flow {
    struct tp_udp *u;
    struct tpu_flow *prev, *next; /* most recently used first */
    struct tpu_relay *relay;      /* where its datagrams came in; replies leave it */
    union tp_sa client;           /* the command's socket */
    union tp_sa odst;             /* the destination it aimed at */
    struct policy_host host;
    uint16_t port;
    enum tpu_state state;
    struct policy_decision m;
    struct resolver_query *q;
    struct policy_addr to_addr; /* TPU_ALLOWED: where datagrams go */
    struct sockaddr_storage to;
    uv_udp_t out;
    int out_on, closing;
    struct tpu_held held[TPU_PENDING];
    size_t nheld;
    uint64_t last_ms;
};

/* A destination logged (first_seen): kept whole, not as a hash, so that a
 * destination whose hash collides with one logged before is still logged
 * (rt-14: a command could pick names under an allowed wildcard whose
 * 32-bit hash matches an earlier one, and send to them unlogged). */
struct tpu_logged {
    uint16_t port;
    uint8_t allowed, used;
    char name[POLICY_HOST_MAX + 1];
};

struct tp_udp {
    struct tp *t;
    uv_loop_t *loop;
    int (*make)(void *ctx, int family, unsigned port);
    void *make_ctx;
    struct tpu_relay *relays[2 * (TPU_MAX_PORTS + TP_UDP_PORTS_MAX + 1)];
    size_t nrelays;
    uint16_t ports[TPU_MAX_PORTS + TP_UDP_PORTS_MAX + 1]; /* ports with relays (or tried) */
    size_t nports, nfixed; /* nfixed: served from the start (53, the udp: rules') */
    struct tpu_flow flows; /* list head */
    size_t nflows;
    size_t held_bytes; /* datagrams held while names resolve, in all flows */
    struct policy *pol; /* a reference: the flows were judged by it */
    uv_timer_t sweep;
    uint64_t idle_ms;
    int handles, closing;
    int icmp[2]; /* raw ICMP, ICMPv6 sockets of the namespace (refusals), -1 */
    struct tpu_logged logged[TPU_LOGGED]; /* destinations logged, the last TPU_LOGGED */
    size_t nlogged;
    /* counters of the run */
    uint64_t dgrams_up, bytes_up, dgrams_down, bytes_down, denied, dropped, dns, unsolicited;
    uint64_t dests, ports_refused, evicted;
};

static uint8_t rbuf[TPU_BUF];

/* ---- addresses ---- */

static socklen_t sa_len(const union tp_sa *a)
{
    return a->in4.sin_family == AF_INET ? sizeof(a->in4) : sizeof(a->in6);
}

static const struct sockaddr *sa_of(const union tp_sa *a)
{
    return a->in4.sin_family == AF_INET ? (const struct sockaddr *)&a->in4
                                        : (const struct sockaddr *)&a->in6;
}

static int sa_eq(const union tp_sa *a, const union tp_sa *b)
{
    if (a->in4.sin_family != b->in4.sin_family)
        return 0;
    if (a->in4.sin_family == AF_INET)
        return a->in4.sin_port == b->in4.sin_port && a->in4.sin_addr.s_addr == b->in4.sin_addr.s_addr;
    return a->in6.sin6_port == b->in6.sin6_port &&
           memcmp(&a->in6.sin6_addr, &b->in6.sin6_addr, 16) == 0;
}

/* A sockaddr of address A and PORT (endpoint_sockaddr_split the other way). */

static void sa_make(const struct policy_addr *a, uint16_t port, struct sockaddr_storage *ss)
{
    endpoint_sockaddr(a, port, ss, NULL);
}

/* The policy's host for DST: the name its synthetic address stands for,
 * else the IP literal. 0 or -1. */
static int dest_host(struct tp *t, const struct policy_addr *dst, struct policy_host *h)
{
    const char *name = tp_names_lookup(&t->names, dst);
    char text[INET6_ADDRSTRLEN];
    const char *why;

    if (name == NULL) {
        if (inet_ntop(dst->family == 4 ? AF_INET : AF_INET6, dst->bytes, text, sizeof(text)) ==
            NULL)
            return -1;
        name = text;
    }
    return policy_host_normalize(name, strlen(name), h, &why);
}

/* ---- the log ---- */

/* 1 the first time (in the last TPU_LOGGED) H:PORT is seen ALLOWED (or
 * denied): each destination is logged once, however many sockets and
 * datagrams go to it. Destinations are compared whole. */
static int first_seen(struct tp_udp *u, const struct policy_host *h, uint16_t port, int allowed)
{
    struct tpu_logged *e;

    for (size_t i = 0; i < TPU_LOGGED; i++) {
        e = &u->logged[i];
        if (e->used && e->port == port && e->allowed == (allowed != 0) &&
            strcmp(e->name, h->name) == 0)
            return 0;
    }
    e = &u->logged[u->nlogged++ % TPU_LOGGED];
    e->used = 1;
    e->port = port;
    e->allowed = allowed != 0;
    snprintf(e->name, sizeof(e->name), "%s", h->name);
    return 1;
}

/* One DECISION record for H:PORT (protocol "transparent-udp", client
 * "sandbox": the command's source address is the destination's under the
 * local routes, and says nothing): the verdict J (NULL: REASON alone, a
 * denial), the address datagrams go to. */
static void log_dest(struct tp_udp *u, const struct policy_host *h, uint16_t port, int allowed,
                     const struct policy_judgment *j, const char *reason,
                     const struct policy_addr *to)
{
    struct tp *t = u->t;
    struct frontend_conn c;
    char hint[400];

    u->dests++;
    if (t->fe.log == NULL)
        return;
    memset(&c, 0, sizeof(c));
    frontend_conn_begin(&t->fe, &c, "transparent-udp");
    snprintf(c.client, sizeof(c.client), "sandbox");
    c.host = h->name;
    c.port = port;
    snprintf(c.verdict, sizeof(c.verdict), "%s",
             !allowed                           ? "deny"
             : j != NULL && j->report_only      ? "would_deny"
                                                : "allow");
    frontend_conn_set_text(&c.rule, j != NULL ? j->rule_text : NULL);
    frontend_conn_set_text(&c.source, j != NULL && j->source[0] != '\0' ? j->source : NULL);
    frontend_conn_set_text(&c.reason, reason != NULL ? reason : j != NULL ? j->reason : NULL);
    if (!allowed && j != NULL)
        frontend_conn_set_text(&c.hint, policy_deny_hint(u->pol, h, port, NULL, j, NULL, hint,
                                                         sizeof(hint)));
    if (allowed && to != NULL)
        c.addr = *to;
    frontend_conn_emit(&c, CONNLOG_DECISION);
    frontend_conn_clear(&c);
}

static void flow_log(struct tpu_flow *f, const struct policy_judgment *j, const char *reason)
{
    int allowed = f->state == TPU_ALLOWED;

    if (first_seen(f->u, &f->host, f->port, allowed))
        log_dest(f->u, &f->host, f->port, allowed, j, reason, &f->to_addr);
}

/* ---- refusals ---- */

static uint16_t csum16(const uint8_t *p, size_t n)
{
    uint32_t s = 0;

    for (size_t i = 0; i + 1 < n; i += 2)
        s += (uint32_t)p[i] << 8 | p[i + 1];
    if (n & 1)
        s += (uint32_t)p[n - 1] << 8;
    while (s >> 16)
        s = (s & 0xffff) + (s >> 16);
    return (uint16_t)~s;
}

/* Answers a denied datagram of LEN bytes from F's client with ICMP port
 * unreachable, as the kernel answers one to a port nobody holds: a
 * connected socket's next call fails with ECONNREFUSED (an unconnected one
 * sees nothing, unless it asked with IP_RECVERR). The quoted headers are
 * those of the datagram the command sent; the kernel matches them to its
 * socket. */
static void refuse(struct tpu_flow *f, size_t len)
{
    struct tp_udp *u = f->u;
    uint8_t m[8 + 40 + 8];
    size_t ulen = len + 8 > 0xffff - 40 ? 0xffff - 40 : len + 8, n;
    union tp_sa to = f->client;
    int fd;

    memset(m, 0, sizeof(m));
    if (f->relay->family == AF_INET) {
        m[0] = 3; /* destination unreachable, port unreachable */
        m[1] = 3;
        m[8] = 0x45;
        m[10] = (uint8_t)((ulen + 20) >> 8);
        m[11] = (uint8_t)(ulen + 20);
        m[16] = 64;
        m[17] = IPPROTO_UDP;
        memcpy(m + 20, &f->client.in4.sin_addr, 4);
        memcpy(m + 24, &f->odst.in4.sin_addr, 4);
        uint16_t ic = csum16(m + 8, 20);
        m[18] = (uint8_t)(ic >> 8);
        m[19] = (uint8_t)ic;
        memcpy(m + 28, &f->client.in4.sin_port, 2);
        memcpy(m + 30, &f->odst.in4.sin_port, 2);
        m[32] = (uint8_t)(ulen >> 8);
        m[33] = (uint8_t)ulen;
        n = 36;
        ic = csum16(m, n);
        m[2] = (uint8_t)(ic >> 8);
        m[3] = (uint8_t)ic;
        to.in4.sin_port = 0;
        fd = u->icmp[0];
    } else {
        m[0] = 1; /* destination unreachable, port unreachable (the kernel sums it) */
        m[1] = 4;
        m[8] = 0x60;
        m[12] = (uint8_t)(ulen >> 8);
        m[13] = (uint8_t)ulen;
        m[14] = IPPROTO_UDP;
        m[15] = 64;
        memcpy(m + 16, &f->client.in6.sin6_addr, 16);
        memcpy(m + 32, &f->odst.in6.sin6_addr, 16);
        memcpy(m + 48, &f->client.in6.sin6_port, 2);
        memcpy(m + 50, &f->odst.in6.sin6_port, 2);
        m[52] = (uint8_t)(ulen >> 8);
        m[53] = (uint8_t)ulen;
        n = 56;
        to.in6.sin6_port = 0;
        fd = u->icmp[1];
    }
    if (fd >= 0)
        (void)sendto(fd, m, n, MSG_DONTWAIT | MSG_NOSIGNAL, sa_of(&to), sa_len(&to));
}

/* ---- flows ---- */

static void on_handle_closed(uv_handle_t *h);

static void out_closed(uv_handle_t *h)
{
    struct tpu_flow *f = h->data;
    struct tp_udp *u = f->u;

    free(f);
    on_handle_closed((uv_handle_t *)&u->sweep);
}

static void flow_free(struct tpu_flow *f)
{
    struct tp_udp *u = f->u;

    resolver_query_detach(f->q);
    f->q = NULL;
    for (size_t i = 0; i < f->nheld; i++) {
        u->held_bytes -= f->held[i].len;
        free(f->held[i].data);
    }
    f->nheld = 0;
    TP_LIST_UNLINK(f);
    u->nflows--;
    f->closing = 1;
    if (f->out_on) {
        uv_close((uv_handle_t *)&f->out, out_closed);
        return;
    }
    free(f);
}

/* Sends DATA back to the flow's client from the destination it aimed at. */
static int reply(struct tpu_flow *f, const void *data, size_t len)
{
    union {
        struct cmsghdr align;
        char b[CMSG_SPACE(sizeof(struct in6_pktinfo))];
    } cb;
    struct iovec iov = {.iov_base = (void *)(uintptr_t)data, .iov_len = len};
    struct msghdr mh;
    struct cmsghdr *cm;

    memset(&mh, 0, sizeof(mh));
    memset(&cb, 0, sizeof(cb));
    mh.msg_name = &f->client;
    mh.msg_namelen = sa_len(&f->client);
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = cb.b;
    cm = (struct cmsghdr *)(void *)cb.b;
    if (f->relay->family == AF_INET) {
        struct in_pktinfo pi;
        memset(&pi, 0, sizeof(pi));
        pi.ipi_spec_dst = f->odst.in4.sin_addr;
        mh.msg_controllen = CMSG_SPACE(sizeof(pi));
        cm->cmsg_level = IPPROTO_IP;
        cm->cmsg_type = IP_PKTINFO;
        cm->cmsg_len = CMSG_LEN(sizeof(pi));
        memcpy(CMSG_DATA(cm), &pi, sizeof(pi));
    } else {
        struct in6_pktinfo pi;
        memset(&pi, 0, sizeof(pi));
        pi.ipi6_addr = f->odst.in6.sin6_addr;
        mh.msg_controllen = CMSG_SPACE(sizeof(pi));
        cm->cmsg_level = IPPROTO_IPV6;
        cm->cmsg_type = IPV6_PKTINFO;
        cm->cmsg_len = CMSG_LEN(sizeof(pi));
        memcpy(CMSG_DATA(cm), &pi, sizeof(pi));
    }
    return sendmsg(f->relay->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 ? -1 : 0;
}

static void on_out_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)h;
    (void)suggested;
    *buf = uv_buf_init((char *)rbuf, sizeof(rbuf));
}

/* A destination's datagram (the socket is connected to it: the kernel
 * takes no other): back to the command. */
static void on_out(uv_udp_t *h, ssize_t n, const uv_buf_t *buf, const struct sockaddr *from,
                   unsigned flags)
{
    struct tpu_flow *f = h->data;
    struct tp_udp *u = f->u;

    if (f->closing || n < 0 || from == NULL || (flags & UV_UDP_PARTIAL))
        return;
    if (f->state != TPU_ALLOWED) {
        u->unsolicited++;
        return;
    }
    if (reply(f, buf->base, (size_t)n) < 0) {
        u->dropped++;
        return;
    }
    f->last_ms = uv_now(u->loop);
    u->dgrams_down++;
    u->bytes_down += (uint64_t)n;
}

/* The flow's host socket, connected to f->to. 0 or -1. */
static int out_open(struct tpu_flow *f)
{
    struct sockaddr_storage any;
    struct policy_addr zero;

    if (f->out_on)
        return 0;
    if (uv_udp_init(f->u->loop, &f->out) < 0)
        return -1;
    f->out.data = f;
    f->out_on = 1;
    f->u->handles++;
    memset(&zero, 0, sizeof(zero));
    zero.family = f->to_addr.family;
    sa_make(&zero, 0, &any);
    if (uv_udp_bind(&f->out, (const struct sockaddr *)&any,
                    f->to_addr.family == 6 ? UV_UDP_IPV6ONLY : 0) < 0 ||
        uv_udp_connect(&f->out, (const struct sockaddr *)&f->to) < 0 ||
        uv_udp_recv_start(&f->out, on_out_alloc, on_out) < 0)
        return -1;
    return 0;
}

static void send_up(struct tpu_flow *f, const uint8_t *data, size_t len)
{
    struct tp_udp *u = f->u;
    uv_buf_t b = uv_buf_init((char *)(uintptr_t)data, (unsigned)len);

    if (out_open(f) < 0 || uv_udp_try_send(&f->out, &b, 1, NULL) < 0) {
        u->dropped++;
        return;
    }
    u->dgrams_up++;
    u->bytes_up += len;
}

static void release_held(struct tpu_flow *f)
{
    for (size_t i = 0; i < f->nheld; i++) {
        if (f->state == TPU_ALLOWED) {
            send_up(f, f->held[i].data, f->held[i].len);
        } else {
            f->u->denied++;
            refuse(f, f->held[i].len);
        }
        f->u->held_bytes -= f->held[i].len;
        free(f->held[i].data);
    }
    f->nheld = 0;
}

/* The first answer the guard lets through, else DENIED. */
static void settle(struct tpu_flow *f, const struct policy_judgment *j,
                   const struct policy_guard_verdict *gv)
{
    f->state = TPU_DENIED;
    if (j->verdict != POLICY_ALLOW && !j->report_only)
        return;
    for (size_t i = 0; i < j->naddrs; i++)
        if (gv[i].dial) {
            struct sockaddr_storage ss;
            uint16_t p;
            sa_make(&gv[i].addr, f->port, &ss);
            endpoint_sockaddr_split((const struct sockaddr *)&ss, &f->to_addr, &p); /* unmaps */
            sa_make(&f->to_addr, f->port, &f->to);
            f->state = TPU_ALLOWED;
            return;
        }
}

static void on_resolved(void *arg, enum resolver_status st, const struct policy_addr *addrs,
                        size_t n)
{
    struct tpu_flow *f = arg;
    struct policy_guard_verdict gv[RESOLVER_MAX_ADDRS];
    struct policy_judgment j;
    char why[300];

    f->q = NULL;
    if (st != RESOLVER_OK) {
        f->state = TPU_DENIED;
        snprintf(why, sizeof(why), "cannot resolve %.200s: %s", f->host.name,
                 st == RESOLVER_NXDOMAIN  ? "no such name"
                 : st == RESOLVER_TIMEOUT ? "DNS timeout"
                                          : "DNS failure");
        flow_log(f, NULL, why);
    } else {
        if (n > RESOLVER_MAX_ADDRS)
            n = RESOLVER_MAX_ADDRS;
        policy_verdict_finish(f->u->pol, &f->host, f->port, &f->m, addrs, n, gv, &j);
        settle(f, &j, gv);
        flow_log(f, &j, NULL);
    }
    release_held(f);
}

/* Judges a new flow: DNS to port 53 is the sandbox resolver's unless a
 * udp: rule allows that resolver; an IP literal is decided at once, a name
 * by its rules and, unless they deny it, by the guard over its answers. */
static void judge(struct tpu_flow *f)
{
    struct tp_udp *u = f->u;
    struct policy_guard_verdict gv[1];
    struct policy_judgment j;
    struct resolver *r;
    int rc;

    policy_decide_transport(u->pol, POLICY_UDP, &f->host, f->port, &f->m);
    policy_verdict_finish(u->pol, &f->host, f->port, &f->m, NULL, 0, gv, &j);
    if (f->port == 53 && (j.verdict != POLICY_ALLOW || j.report_only)) {
        f->state = TPU_DNS;
        return;
    }
    if (f->host.kind != POLICY_HOST_NAME || (j.verdict == POLICY_DENY && !j.report_only)) {
        settle(f, &j, gv); /* a literal was guarded as its own answer */
        if (f->host.kind == POLICY_HOST_NAME)
            f->state = TPU_DENIED;
        flow_log(f, &j, NULL);
        return;
    }
    f->state = TPU_PENDING_ST;
    r = egress_env_resolver(u->t->egress);
    rc = r != NULL ? resolver_query(r, f->host.name, on_resolved, f, &f->q) : UV_EINVAL;
    if (rc < 0) {
        f->q = NULL;
        f->state = TPU_DENIED;
        flow_log(f, NULL, "cannot start the DNS lookup");
    }
}

/* A reload since the flows were judged: judge them all again. */
static void follow_policy(struct tp_udp *u)
{
    const struct policy *cur = egress_env_policy(u->t->egress);

    if (cur == u->pol)
        return;
    while (u->flows.next != &u->flows)
        flow_free(u->flows.next);
    policy_free(u->pol);
    u->pol = policy_ref((struct policy *)cur);
    memset(u->logged, 0, sizeof(u->logged));
}

static struct tpu_flow *find_flow(struct tp_udp *u, const union tp_sa *client,
                                  const union tp_sa *odst)
{
    for (struct tpu_flow *f = u->flows.next; f != &u->flows; f = f->next)
        if (sa_eq(&f->client, client) && sa_eq(&f->odst, odst))
            return f;
    return NULL;
}

static struct tpu_flow *new_flow(struct tp_udp *u, struct tpu_relay *r, const union tp_sa *client,
                                 const union tp_sa *odst)
{
    struct policy_addr a;
    uint16_t port;
    struct tpu_flow *f;

    if (u->nflows == TPU_MAX_FLOWS) { /* the least recently used goes */
        flow_free(u->flows.prev);
        u->evicted++;
    }
    f = calloc(1, sizeof(*f));
    if (f == NULL)
        return NULL;
    f->u = u;
    f->relay = r;
    f->client = *client;
    f->odst = *odst;
    if (endpoint_sockaddr_split(sa_of(odst), &a, &port) < 0 ||
        port == 0 || dest_host(u->t, &a, &f->host) < 0) {
        free(f);
        return NULL;
    }
    f->port = port;
    TP_LIST_PUSH(&u->flows, f);
    u->nflows++;
    judge(f);
    return f;
}

static void hold(struct tpu_flow *f, const uint8_t *data, size_t len)
{
    uint8_t *copy;

    if (f->nheld == TPU_PENDING || f->u->held_bytes + len > TPU_HELD_BYTES ||
        (copy = malloc(len > 0 ? len : 1)) == NULL) {
        f->u->dropped++;
        return;
    }
    f->u->held_bytes += len;
    memcpy(copy, data, len);
    f->held[f->nheld].data = copy;
    f->held[f->nheld].len = len;
    f->nheld++;
}

/* One datagram the command sent from CLIENT to ODST, received on R. */
static void datagram(struct tp_udp *u, struct tpu_relay *r, const union tp_sa *client,
                     const union tp_sa *odst, const uint8_t *data, size_t len)
{
    struct tpu_flow *f;

    follow_policy(u);
    f = find_flow(u, client, odst);
    if (f == NULL) {
        f = new_flow(u, r, client, odst);
        if (f == NULL) {
            u->dropped++;
            return;
        }
    } else if (u->flows.next != f) { /* most recently used first */
        TP_LIST_UNLINK(f);
        TP_LIST_PUSH(&u->flows, f);
    }
    f->last_ms = uv_now(u->loop);
    switch (f->state) {
    case TPU_DNS: {
        uint8_t out[1024];
        size_t n = tp_dns_answer(u->t, data, len, out, sizeof(out));
        u->dns++;
        if (n > 0 && reply(f, out, n) < 0)
            u->dropped++;
        return;
    }
    case TPU_ALLOWED:
        send_up(f, data, len);
        return;
    case TPU_PENDING_ST:
        hold(f, data, len);
        return;
    case TPU_DENIED:
        u->denied++;
        refuse(f, len);
        return;
    }
}

/* ---- relays ---- */

/* The original destination of a received datagram, from its control
 * messages. 0 or -1. */
static int orig_dst(struct msghdr *mh, union tp_sa *odst)
{
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); cm != NULL; cm = CMSG_NXTHDR(mh, cm)) {
        if (cm->cmsg_level == IPPROTO_IP && cm->cmsg_type == IP_ORIGDSTADDR &&
            cm->cmsg_len >= CMSG_LEN(sizeof(struct sockaddr_in))) {
            memcpy(&odst->in4, CMSG_DATA(cm), sizeof(odst->in4));
            return odst->in4.sin_family == AF_INET ? 0 : -1;
        }
        if (cm->cmsg_level == IPPROTO_IPV6 && cm->cmsg_type == IPV6_ORIGDSTADDR &&
            cm->cmsg_len >= CMSG_LEN(sizeof(struct sockaddr_in6))) {
            memcpy(&odst->in6, CMSG_DATA(cm), sizeof(odst->in6));
            return odst->in6.sin6_family == AF_INET6 ? 0 : -1;
        }
    }
    return -1;
}

static void on_relay(uv_poll_t *p, int status, int events)
{
    struct tpu_relay *r = p->data;
    struct tp_udp *u = r->u;

    (void)events;
    if (status < 0 || u->closing)
        return;
    for (int i = 0; i < TPU_BATCH; i++) {
        union {
            struct cmsghdr align;
            char b[CMSG_SPACE(sizeof(struct sockaddr_in6)) + 64];
        } cb;
        union tp_sa client, odst;
        struct iovec iov = {.iov_base = rbuf, .iov_len = sizeof(rbuf)};
        struct msghdr mh;
        ssize_t n;

        memset(&mh, 0, sizeof(mh));
        memset(&client, 0, sizeof(client));
        memset(&odst, 0, sizeof(odst));
        mh.msg_name = &client;
        mh.msg_namelen = sizeof(client);
        mh.msg_iov = &iov;
        mh.msg_iovlen = 1;
        mh.msg_control = cb.b;
        mh.msg_controllen = sizeof(cb.b);
        n = recvmsg(r->fd, &mh, MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return;
            continue; /* an ICMP error of an earlier reply */
        }
        if ((mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0 || orig_dst(&mh, &odst) < 0 ||
            client.in4.sin_family != odst.in4.sin_family) {
            u->dropped++;
            continue;
        }
        datagram(u, r, &client, &odst, rbuf, (size_t)n);
    }
}

static void relay_closed(uv_handle_t *h)
{
    struct tpu_relay *r = h->data;
    struct tp_udp *u = r->u;

    close(r->fd);
    free(r);
    on_handle_closed((uv_handle_t *)&u->sweep);
}

/* A relay of FAMILY for PORT, from the helper. 0 or -errno. */
static int relay_open(struct tp_udp *u, int family, uint16_t port)
{
    struct tpu_relay *r;
    int fd = u->make(u->make_ctx, family, port);

    if (fd < 0)
        return fd;
    r = calloc(1, sizeof(*r));
    if (r == NULL || uv_poll_init(u->loop, &r->poll, fd) < 0) {
        free(r);
        close(fd);
        return -ENOMEM;
    }
    r->u = u;
    r->fd = fd;
    r->family = family;
    r->port = port;
    r->poll.data = r;
    u->relays[u->nrelays++] = r;
    u->handles++;
    if (uv_poll_start(&r->poll, UV_READABLE, on_relay) < 0)
        return -EIO;
    return 0;
}

int tp_udp_port(struct tp *t, uint16_t port)
{
    struct tp_udp *u = t->udpr;
    int rc4, rc6;

    if (u == NULL || u->closing || port == 0)
        return -1;
    for (size_t i = 0; i < u->nports; i++)
        if (u->ports[i] == port)
            return 0;
    if (u->nports - u->nfixed == TPU_MAX_PORTS) {
        u->ports_refused++;
        return -1;
    }
    u->ports[u->nports++] = port;
    rc4 = relay_open(u, AF_INET, port);
    rc6 = relay_open(u, AF_INET6, port);
    return rc4 == 0 || rc6 == 0 ? 0 : -1;
}

/* ---- start and stop ---- */

static void on_handle_closed(uv_handle_t *h)
{
    struct tp_udp *u = h->data;

    if (--u->handles == 0) {
        policy_free(u->pol);
        free(u);
    }
}

static void on_sweep(uv_timer_t *tm)
{
    struct tp_udp *u = tm->data;
    uint64_t now = uv_now(u->loop);

    while (u->flows.prev != &u->flows && now - u->flows.prev->last_ms >= u->idle_ms)
        flow_free(u->flows.prev);
}

int tp_udp_start(struct tp *t, int (*make)(void *ctx, int family, unsigned port), void *ctx,
                 uint64_t idle_ms, const uint16_t *ports, size_t nports)
{
    struct tp_udp *u = calloc(1, sizeof(*u));

    if (u == NULL)
        return -ENOMEM;
    u->t = t;
    u->loop = t->loop;
    u->make = make;
    u->make_ctx = ctx;
    u->idle_ms = idle_ms == 0 ? TPU_IDLE_DEFAULT : idle_ms > TPU_IDLE_MAX ? TPU_IDLE_MAX : idle_ms;
    u->pol = policy_ref((struct policy *)egress_env_policy(t->egress));
    TP_LIST_INIT(&u->flows);
    uv_timer_init(t->loop, &u->sweep);
    u->sweep.data = u;
    u->handles = 1;
    uv_timer_start(&u->sweep, on_sweep, 5000, 5000);
    u->icmp[0] = make(ctx, AF_INET, 0); /* without them denials are silent drops */
    u->icmp[1] = make(ctx, AF_INET6, 0);
    t->udpr = u;
    /* a port whose relay cannot be made stays closed: its datagrams meet
     * port unreachable, as without transparent UDP */
    (void)tp_udp_port(t, 53);
    for (size_t i = 0; i < nports && i < TP_UDP_PORTS_MAX; i++)
        (void)tp_udp_port(t, ports[i]);
    u->nfixed = u->nports;
    return 0;
}

void tp_udp_summary(const struct tp *t, char *buf, size_t len)
{
    const struct tp_udp *u = t->udpr;

    buf[0] = '\0';
    if (u == NULL || (u->dgrams_up == 0 && u->dns == 0 && u->denied == 0 && u->dropped == 0))
        return;
    snprintf(buf, len,
             "transparent UDP: %llu destinations, datagrams up %llu (%llu B) down %llu (%llu "
             "B), DNS answered %llu, denied %llu, dropped %llu, unsolicited %llu, %zu relay "
             "ports (%zu from the start, %llu refused), %llu flows evicted",
             (unsigned long long)u->dests, (unsigned long long)u->dgrams_up,
             (unsigned long long)u->bytes_up, (unsigned long long)u->dgrams_down,
             (unsigned long long)u->bytes_down, (unsigned long long)u->dns,
             (unsigned long long)u->denied, (unsigned long long)u->dropped,
             (unsigned long long)u->unsolicited, u->nports, u->nfixed,
             (unsigned long long)u->ports_refused,
             (unsigned long long)u->evicted);
}

void tp_udp_close(struct tp *t)
{
    struct tp_udp *u = t->udpr;

    if (u == NULL || u->closing)
        return;
    u->closing = 1;
    t->udpr = NULL;
    for (int i = 0; i < 2; i++)
        if (u->icmp[i] >= 0)
            close(u->icmp[i]);
    while (u->flows.next != &u->flows)
        flow_free(u->flows.next);
    for (size_t i = 0; i < u->nrelays; i++)
        uv_close((uv_handle_t *)&u->relays[i]->poll, relay_closed);
    uv_close((uv_handle_t *)&u->sweep, on_handle_closed);
}
