/* run/tp_dns.c - transparent mode's names and resolver (see
 * transparent.c's opening comment, parts 2 and 3): the synthetic address of
 * each name, the sandbox's DNS server on 127.0.0.1:53 (UDP and TCP), the
 * sandbox's /etc/resolv.conf, and the helper that makes the resolver's
 * sockets in the sandbox's namespace. */
#define _GNU_SOURCE
#include "run/transparent_int.h"

#include "common/common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define TP_V4_BASE 0xC6120000u /* 198.18.0.0/15 */
#define TP_V4_COUNT 131070u    /* .0.1 .. .255.254 of the /15, no .0.0 or last */
static const uint8_t tp_v6_prefix[8] = {0xfd, 0x53, 0x6c, 0x75, 0x69, 0x63, 0x65, 0x00};

#define DNS_TTL 300u
#define DNS_TCP_MAX 65535u
#define DNS_TCP_IDLE_MS 10000u
#define DNS_TCP_CONNS 64u        /* open DNS-over-TCP connections */
#define DNS_TCP_WRITES 32u       /* answers queued per connection */
#define DNS_TCP_QUEUED 16384u    /* bytes queued per connection */

/* ------------------------------------------------------------------------ */
/* Names and synthetic addresses                                             */

static uint32_t name_hash(const char *s)
{
    uint32_t h = 2166136261u;

    for (; *s != '\0'; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

void tp_names_free(struct tp_names *n)
{
    for (size_t i = 0; i < n->n; i++)
        free(n->v[i]);
    free(n->v);
    free(n->slots);
    memset(n, 0, sizeof(*n));
}

static int slots_grow(struct tp_names *n)
{
    size_t cap = n->scap != 0 ? n->scap * 2 : 256;
    uint32_t *s = calloc(cap, sizeof(*s));

    if (s == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < n->n; i++) {
        size_t j = name_hash(n->v[i]) & (cap - 1);
        while (s[j] != 0)
            j = (j + 1) & (cap - 1);
        s[j] = (uint32_t)(i + 1);
    }
    free(n->slots);
    n->slots = s;
    n->scap = cap;
    return 0;
}

long tp_names_find(const struct tp_names *n, const char *name)
{
    if (n->scap == 0)
        return -1;
    for (size_t j = name_hash(name) & (n->scap - 1);; j = (j + 1) & (n->scap - 1)) {
        uint32_t k = n->slots[j];
        if (k == 0)
            return -1;
        if (strcmp(n->v[k - 1], name) == 0)
            return (long)(k - 1);
    }
}

long tp_names_add(struct tp_names *n, const char *name)
{
    long i = tp_names_find(n, name);
    size_t j;

    if (i >= 0)
        return i;
    if (n->n >= TP_V4_COUNT)
        return -ENOSPC;
    if ((n->n + 1) * 2 > n->scap && slots_grow(n) < 0)
        return -ENOMEM;
    if (n->n == n->cap) {
        size_t cap = n->cap != 0 ? n->cap * 2 : 64;
        char **v = realloc(n->v, cap * sizeof(*v));
        if (v == NULL)
            return -ENOMEM;
        n->v = v;
        n->cap = cap;
    }
    n->v[n->n] = strdup(name);
    if (n->v[n->n] == NULL)
        return -ENOMEM;
    for (j = name_hash(name) & (n->scap - 1); n->slots[j] != 0; j = (j + 1) & (n->scap - 1))
        ;
    n->slots[j] = (uint32_t)(n->n + 1);
    return (long)n->n++;
}

void tp_synthetic(size_t index, int family, struct policy_addr *a)
{
    uint32_t v = (uint32_t)index + 1;

    memset(a, 0, sizeof(*a));
    if (family == 4) {
        uint32_t ip = TP_V4_BASE + v;
        a->family = 4;
        a->bytes[0] = (uint8_t)(ip >> 24);
        a->bytes[1] = (uint8_t)(ip >> 16);
        a->bytes[2] = (uint8_t)(ip >> 8);
        a->bytes[3] = (uint8_t)ip;
    } else {
        a->family = 6;
        memcpy(a->bytes, tp_v6_prefix, sizeof(tp_v6_prefix));
        a->bytes[12] = (uint8_t)(v >> 24);
        a->bytes[13] = (uint8_t)(v >> 16);
        a->bytes[14] = (uint8_t)(v >> 8);
        a->bytes[15] = (uint8_t)v;
    }
}

const char *tp_names_lookup(const struct tp_names *n, const struct policy_addr *a)
{
    uint32_t v;

    if (a->family == 4) {
        uint32_t ip = (uint32_t)a->bytes[0] << 24 | (uint32_t)a->bytes[1] << 16 |
                      (uint32_t)a->bytes[2] << 8 | a->bytes[3];
        if ((ip & 0xFFFE0000u) != TP_V4_BASE)
            return NULL;
        v = ip - TP_V4_BASE;
    } else if (a->family == 6) {
        if (memcmp(a->bytes, tp_v6_prefix, sizeof(tp_v6_prefix)) != 0 || a->bytes[8] != 0 ||
            a->bytes[9] != 0 || a->bytes[10] != 0 || a->bytes[11] != 0)
            return NULL;
        v = (uint32_t)a->bytes[12] << 24 | (uint32_t)a->bytes[13] << 16 |
            (uint32_t)a->bytes[14] << 8 | a->bytes[15];
    } else {
        return NULL;
    }
    if (v == 0 || v > n->n)
        return NULL;
    return n->v[v - 1];
}

/* ------------------------------------------------------------------------ */
/* DNS messages                                                              */

enum { DNS_NOERROR = 0, DNS_FORMERR = 1, DNS_NXDOMAIN = 3, DNS_NOTIMP = 4 };

static void put16(uint8_t *p, unsigned v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

/* The DECISION record of a denied name, through the connection base as
 * transparent mode's connect() records go (the same id counter and log). */
static void dns_log_denied(struct tp *t, const struct policy_host *h,
                           const struct policy_judgment *d)
{
    struct frontend_conn c;
    char hint[400];
    const char *name = h->name;

    if (t->fe.log == NULL)
        return;
    memset(&c, 0, sizeof(c));
    frontend_conn_begin(&t->fe, &c, "dns");
    snprintf(c.client, sizeof(c.client), "sandbox");
    c.host = name;
    snprintf(c.verdict, sizeof(c.verdict), "deny");
    frontend_conn_set_text(&c.rule, d->rule_text);
    frontend_conn_set_text(&c.source, d->source[0] != '\0' ? d->source : NULL);
    frontend_conn_set_text(&c.reason, d->reason);
    frontend_conn_set_text(&c.hint, policy_deny_hint(egress_env_policy(t->egress), h, 0, NULL, d,
                                                     NULL, hint, sizeof(hint)));
    c.code = DNS_NXDOMAIN;
    frontend_conn_emit(&c, CONNLOG_DECISION);
    frontend_conn_clear(&c);
}

/* Builds the answer to query q in out (cap >= 512). Returns its length, or 0
 * to drop the query (too short, or a response). */
size_t tp_dns_answer(struct tp *t, const uint8_t *q, size_t qlen, uint8_t *out, size_t cap)
{
    char name[POLICY_HOST_MAX + 2];
    size_t pos = 12, nlen = 0, qend, o;
    unsigned opcode, qtype, qclass, rcode = DNS_NOERROR, ancount = 0;
    struct policy_host h;
    struct policy_judgment d;
    const char *why;

    if (qlen < 12 || cap < 512 || (q[2] & 0x80) != 0)
        return 0;
    opcode = (q[2] >> 3) & 0x0F;
    memcpy(out, q, 4);
    out[2] = (uint8_t)(0x80 | (q[2] & 0x79)); /* QR, opcode, RD */
    out[3] = 0x80;                            /* RA */
    memset(out + 4, 0, 8);
    if (opcode != 0) {
        out[3] |= DNS_NOTIMP;
        return 12;
    }
    if (q[4] != 0 || q[5] != 1) {
        out[3] |= DNS_FORMERR;
        return 12;
    }
    /* the question's name: plain labels, no compression */
    for (;;) {
        unsigned l;
        if (pos >= qlen)
            goto formerr;
        l = q[pos++];
        if (l == 0)
            break;
        if (l > 63 || pos + l > qlen || nlen + l + 1 > POLICY_HOST_MAX)
            goto formerr;
        if (nlen > 0)
            name[nlen++] = '.';
        memcpy(name + nlen, q + pos, l);
        nlen += l;
        pos += l;
    }
    name[nlen] = '\0';
    if (pos + 4 > qlen)
        goto formerr;
    qtype = (unsigned)q[pos] << 8 | q[pos + 1];
    qclass = (unsigned)q[pos + 2] << 8 | q[pos + 3];
    qend = pos + 4;
    if (qend > cap - 64)
        goto formerr;
    memcpy(out + 12, q + 12, qend - 12);
    put16(out + 4, 1);
    o = qend;
    if (qclass != 1 && qclass != 255) {
        rcode = DNS_NOTIMP;
        goto done;
    }
    if (nlen == 0 || memchr(name, '\0', nlen) != NULL ||
        policy_host_normalize(name, nlen, &h, &why) < 0 || h.kind != POLICY_HOST_NAME) {
        rcode = nlen == 0 ? DNS_NOERROR : DNS_NXDOMAIN;
        goto done;
    }
    if (policy_dns_refused(egress_env_policy(t->egress), &h, &d)) {
        dns_log_denied(t, &h, &d);
        rcode = DNS_NXDOMAIN;
        goto done;
    }
    if (qtype == 1 || qtype == 28) {
        long i = tp_names_add(&t->names, h.name);
        struct policy_addr a;
        size_t rdlen = qtype == 1 ? 4 : 16;
        if (i < 0) {
            out[3] |= 2; /* SERVFAIL: out of addresses or memory */
            return o;
        }
        tp_synthetic((size_t)i, qtype == 1 ? 4 : 6, &a);
        out[o++] = 0xC0; /* the name in the question */
        out[o++] = 12;
        put16(out + o, qtype);
        put16(out + o + 2, 1);
        out[o + 4] = 0;
        out[o + 5] = 0;
        put16(out + o + 6, DNS_TTL);
        put16(out + o + 8, (unsigned)rdlen);
        o += 10;
        memcpy(out + o, a.bytes, rdlen);
        o += rdlen;
        ancount = 1;
    }
done:
    out[3] = (uint8_t)(out[3] | rcode);
    put16(out + 6, ancount);
    return o;
formerr:
    memset(out + 4, 0, 8);
    out[3] |= DNS_FORMERR;
    return 12;
}

void tp_dns_udp_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    static char rx[4096];

    (void)h;
    (void)suggested;
    *buf = uv_buf_init(rx, sizeof(rx));
}

void tp_dns_udp_recv(uv_udp_t *u, ssize_t n, const uv_buf_t *buf, const struct sockaddr *from,
                     unsigned flags)
{
    struct tp *t = container_of(u, struct tp, udp);
    uint8_t out[1024];
    size_t len;
    uv_buf_t b;

    if (n <= 0 || from == NULL || (flags & UV_UDP_PARTIAL))
        return;
    len = tp_dns_answer(t, (const uint8_t *)buf->base, (size_t)n, out, sizeof(out));
    if (len == 0)
        return;
    b = uv_buf_init((char *)out, (unsigned)len);
    (void)uv_udp_try_send(u, &b, 1, from); /* a full socket buffer drops it, as UDP does */
}

/* DNS over TCP: two-byte length, message; several per connection.
 *
 * Memory stays bounded whatever the sandbox sends: at most DNS_TCP_CONNS
 * connections (one more is accepted and closed at once), each with its
 * fixed receive buffer and at most DNS_TCP_WRITES answers queued. A client
 * that pipelines queries and does not read its answers stops being read
 * (TCP's own flow control then holds it back) until it has taken them; the
 * queries already received wait in the buffer. */
static void dconn_closed(uv_handle_t *h)
{
    struct dns_conn *c = h->data;

    if (++c->nclosed == 2) {
        struct tp *t = c->t;
        free(c);
        if (--t->handles == 0)
            free(t);
    }
}

void tp_dns_conn_close(struct dns_conn *c)
{
    if (c->closing)
        return;
    c->closing = 1;
    TP_LIST_UNLINK(c);
    c->t->ndconns--;
    uv_close((uv_handle_t *)&c->tcp, dconn_closed);
    uv_close((uv_handle_t *)&c->idle, dconn_closed);
}

static void dconn_idle(uv_timer_t *tm)
{
    tp_dns_conn_close(tm->data);
}

static void dconn_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct dns_conn *c = h->data;

    (void)suggested;
    *buf = uv_buf_init((char *)c->buf + c->have, (unsigned)(sizeof(c->buf) - c->have));
}

struct dwrite {
    uv_write_t w;
    struct dns_conn *c;
    uint8_t data[2 + 1024];
};

static void dconn_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);
static void dwrite_done(uv_write_t *req, int status);

static int dconn_full(struct dns_conn *c)
{
    return c->writes >= DNS_TCP_WRITES ||
           uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) >= DNS_TCP_QUEUED;
}

/* Answers the complete queries in the buffer while the queue has room; stops
 * reading when it has none. 0, or -1 when the connection was closed. */
static int dconn_answer(struct dns_conn *c)
{
    uv_stream_t *s = (uv_stream_t *)&c->tcp;

    while (c->have >= 2) {
        size_t mlen = (size_t)c->buf[0] << 8 | c->buf[1];
        struct dwrite *w;
        size_t len;
        uv_buf_t b;

        if (c->have < 2 + mlen)
            break;
        if (dconn_full(c)) {
            if (!c->paused) {
                c->paused = 1;
                uv_read_stop(s);
            }
            return 0;
        }
        w = malloc(sizeof(*w));
        if (w == NULL) {
            tp_dns_conn_close(c);
            return -1;
        }
        w->c = c;
        len = tp_dns_answer(c->t, c->buf + 2, mlen, w->data + 2, sizeof(w->data) - 2);
        memmove(c->buf, c->buf + 2 + mlen, c->have - 2 - mlen);
        c->have -= 2 + mlen;
        if (len == 0) {
            free(w);
            continue;
        }
        put16(w->data, (unsigned)len);
        b = uv_buf_init((char *)w->data, (unsigned)(len + 2));
        c->writes++;
        if (uv_write(&w->w, s, &b, 1, dwrite_done) < 0) {
            c->writes--;
            free(w);
            tp_dns_conn_close(c);
            return -1;
        }
    }
    if (c->paused) {
        c->paused = 0;
        if (uv_read_start(s, dconn_alloc, dconn_read) < 0) {
            tp_dns_conn_close(c);
            return -1;
        }
    }
    return 0;
}

static void dwrite_done(uv_write_t *req, int status)
{
    struct dwrite *w = container_of(req, struct dwrite, w);
    struct dns_conn *c = w->c;

    free(w);
    c->writes--; /* c lives until its close callbacks, which come after this */
    if (c->closing)
        return;
    if (status < 0) {
        tp_dns_conn_close(c);
        return;
    }
    /* the client took answers: a sign of life, and room for more */
    (void)uv_timer_start(&c->idle, dconn_idle, DNS_TCP_IDLE_MS, 0);
    if (c->paused && !dconn_full(c))
        (void)dconn_answer(c);
}

static void dconn_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    struct dns_conn *c = s->data;

    (void)buf;
    if (n < 0) {
        tp_dns_conn_close(c);
        return;
    }
    c->have += (size_t)n;
    (void)uv_timer_start(&c->idle, dconn_idle, DNS_TCP_IDLE_MS, 0);
    (void)dconn_answer(c);
}

static void refused_closed(uv_handle_t *h)
{
    free(h);
}

/* Takes the pending connection and closes it: one left unaccepted would
 * stop libuv from accepting any more. */
static void tp_dns_refuse(uv_stream_t *l)
{
    uv_tcp_t *r = malloc(sizeof(*r));

    if (r == NULL)
        return;
    uv_tcp_init(l->loop, r);
    (void)uv_accept(l, (uv_stream_t *)r);
    uv_close((uv_handle_t *)r, refused_closed);
}

void tp_dns_tcp_accept(uv_stream_t *l, int status)
{
    struct tp *t = container_of(l, struct tp, tcp);
    struct dns_conn *c;

    if (status < 0 || t->closing)
        return;
    c = calloc(1, sizeof(*c));
    if (c == NULL) {
        tp_dns_refuse(l);
        return;
    }
    if (t->ndconns >= DNS_TCP_CONNS) {
        free(c);
        tp_dns_refuse(l);
        return;
    }
    c->t = t;
    uv_tcp_init(t->loop, &c->tcp);
    uv_timer_init(t->loop, &c->idle);
    c->tcp.data = c;
    c->idle.data = c;
    TP_LIST_PUSH(&t->dconns, c);
    t->ndconns++;
    t->handles++;
    if (uv_accept(l, (uv_stream_t *)&c->tcp) < 0 ||
        uv_read_start((uv_stream_t *)&c->tcp, dconn_alloc, dconn_read) < 0) {
        tp_dns_conn_close(c);
        return;
    }
    (void)uv_timer_start(&c->idle, dconn_idle, DNS_TCP_IDLE_MS, 0);
}

/* ------------------------------------------------------------------------ */
/* The sandbox's /etc/resolv.conf                                            */

int tp_resolv_conf(const char *dir, char *file, size_t flen, char *dest, size_t dlen, char *err,
                   size_t errlen)
{
    char *real;
    FILE *f;

    if ((size_t)snprintf(file, flen, "%s/resolv.conf", dir) >= flen) {
        snprintf(err, errlen, "transparent mode: run directory path too long");
        return -ENAMETOOLONG;
    }
    f = fopen(file, "we");
    if (f == NULL ||
        fputs("# sluice run --transparent: the sandbox's own resolver\n"
              "nameserver 127.0.0.1\noptions timeout:5 attempts:2\n",
              f) < 0 ||
        fclose(f) != 0) {
        snprintf(err, errlen, "transparent mode: cannot write %s: %s", file, strerror(errno));
        return -EIO;
    }
    /* The host's /etc/resolv.conf may be a link (systemd-resolved,
     * NetworkManager, resolvconf): a mount follows links, so the file is
     * bound over what the link leads to, which must exist. */
    real = realpath("/etc/resolv.conf", NULL);
    if (real == NULL) {
        struct stat st;
        if (lstat("/etc/resolv.conf", &st) == 0) {
            snprintf(err, errlen,
                     "transparent mode: /etc/resolv.conf is a link to nothing (%s); the "
                     "sandbox's resolver cannot be put in its place",
                     strerror(errno));
            return -ENOENT;
        }
        snprintf(err, errlen,
                 "transparent mode: this host has no /etc/resolv.conf to put the "
                 "sandbox's resolver in place of");
        return -ENOENT;
    }
    if ((size_t)snprintf(dest, dlen, "%s", real) >= dlen) {
        free(real);
        snprintf(err, errlen, "transparent mode: /etc/resolv.conf's target path too long");
        return -ENAMETOOLONG;
    }
    free(real);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The resolver's sockets                                                    */

#ifndef NS_GET_USERNS
#define NS_GET_USERNS 0xb701 /* _IO(0xb7, 0x1), <linux/nsfs.h> */
#endif

/* A bound socket on 127.0.0.1:53 in the calling process's namespace. */
static int dns_socket(int type)
{
    struct sockaddr_in a;
    const int one = 1;
    int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return -1;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons(SETTINGS_SANDBOX_DNS_PORT); /* refused as a host port (settings/ports.c) */
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    /* SO_REUSEADDR: the UDP socket shares port 53 with transparent UDP's
     * relay on the wildcard address (tp_udp.c), which needs it on both; no
     * socket of the command may take the port beside them, because a
     * bind() of port 53 in the sandbox is refused (tp_call.c: run_here) */
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
        (type == SOCK_STREAM && listen(fd, 128) < 0)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Sends one rtnetlink request REQ (LEN bytes) and reads its
 * acknowledgement. 0 or -1. */
static int nl_request(void *req, size_t len)
{
    struct sockaddr_nl sa;
    char ack[256];
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    ssize_t r;

    if (fd < 0)
        return -1;
    memset(&sa, 0, sizeof(sa));
    sa.nl_family = AF_NETLINK;
    if (sendto(fd, req, len, 0, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        close(fd);
        return -1;
    }
    r = recv(fd, ack, sizeof(ack), 0);
    close(fd);
    if (r < (ssize_t)NLMSG_LENGTH(sizeof(struct nlmsgerr)))
        return -1;
    {
        struct nlmsghdr *h = (struct nlmsghdr *)(void *)ack;
        struct nlmsgerr *e = NLMSG_DATA(h);
        return h->nlmsg_type == NLMSG_ERROR && e->error == 0 ? 0 : -1;
    }
}

/* Adds ADDR/prefix to the loopback device (ifindex 1 in a new network
 * namespace) over rtnetlink. 0 or -1. */
static int add_lo_addr(int family, const void *addr, size_t alen, unsigned prefix)
{
    struct {
        struct nlmsghdr nh;
        struct ifaddrmsg ifa;
        char attrs[64];
    } req;
    struct rtattr *rta;

    memset(&req, 0, sizeof(req));
    req.nh.nlmsg_type = RTM_NEWADDR;
    req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK;
    req.nh.nlmsg_seq = 1;
    req.ifa.ifa_family = (unsigned char)family;
    req.ifa.ifa_prefixlen = (unsigned char)prefix;
    req.ifa.ifa_scope = RT_SCOPE_HOST;
    req.ifa.ifa_index = 1;
    rta = (struct rtattr *)(void *)req.attrs;
    rta->rta_type = IFA_LOCAL;
    rta->rta_len = (unsigned short)RTA_LENGTH(alen);
    memcpy(RTA_DATA(rta), addr, alen);
    rta = (struct rtattr *)(void *)(req.attrs + RTA_ALIGN(rta->rta_len));
    rta->rta_type = IFA_ADDRESS;
    rta->rta_len = (unsigned short)RTA_LENGTH(alen);
    memcpy(RTA_DATA(rta), addr, alen);
    req.nh.nlmsg_len = (uint32_t)(NLMSG_LENGTH(sizeof(req.ifa)) + 2 * RTA_ALIGN(RTA_LENGTH(alen)));
    return nl_request(&req, req.nh.nlmsg_len);
}

/* Transparent UDP (tp_udp.c): `ip route add local 0.0.0.0/0 dev lo` (or
 * ::/0) in the local table, so that every address is local in the
 * sandbox's namespace: a datagram to any address stays in it, delivered
 * to a socket bound to its port (sluice's relays) or answered with port
 * unreachable. 0 or -1. */
static int add_local_route(int family)
{
    struct {
        struct nlmsghdr nh;
        struct rtmsg rt;
        char attrs[16];
    } req;
    struct rtattr *rta;
    uint32_t lo = 1;

    memset(&req, 0, sizeof(req));
    req.nh.nlmsg_type = RTM_NEWROUTE;
    req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK;
    req.nh.nlmsg_seq = 2;
    req.rt.rtm_family = (unsigned char)family;
    req.rt.rtm_dst_len = 0;
    req.rt.rtm_table = RT_TABLE_LOCAL;
    req.rt.rtm_protocol = RTPROT_BOOT;
    req.rt.rtm_scope = RT_SCOPE_HOST;
    req.rt.rtm_type = RTN_LOCAL;
    rta = (struct rtattr *)(void *)req.attrs;
    rta->rta_type = RTA_OIF;
    rta->rta_len = (unsigned short)RTA_LENGTH(sizeof(lo));
    memcpy(RTA_DATA(rta), &lo, sizeof(lo));
    req.nh.nlmsg_len = (uint32_t)(NLMSG_LENGTH(sizeof(req.rt)) + RTA_ALIGN(rta->rta_len));
    return nl_request(&req, req.nh.nlmsg_len);
}

/* The child: joins the user namespace that owns the sandbox's network
 * namespace (the host user owns it, so it has every capability there, and
 * with it CAP_NET_BIND_SERVICE for that network namespace), then the network
 * namespace, makes the two sockets and sends them back. Only system calls
 * after fork(): the host may have threads. Exit status: 0, or a step
 * number. */
static void dns_child(int pid, int sock, int routes)
{
    char path[64], msg[2] = {'D', 0};
    int netfd, userfd, fds[3];

    snprintf(path, sizeof(path), "/proc/%d/ns/net", pid);
    netfd = open(path, O_RDONLY | O_CLOEXEC);
    if (netfd < 0)
        _exit(10);
    userfd = ioctl(netfd, NS_GET_USERNS);
    if (userfd < 0)
        _exit(11);
    /* EINVAL: already in it (a setuid bwrap made no user namespace) */
    if (syscall(SYS_setns, userfd, CLONE_NEWUSER) < 0 && errno != EINVAL)
        _exit(12);
    if (syscall(SYS_setns, netfd, CLONE_NEWNET) < 0)
        _exit(13);
    /* getaddrinfo(AI_ADDRCONFIG) answers nothing for a family with no
     * address but loopback: one host-scoped address of each family, outside
     * the ranges handed out, makes the synthetic answers usable (best
     * effort for IPv6, which the namespace may not have) */
    {
        static const uint8_t v4[4] = {198, 18, 0, 0};
        static const uint8_t v6[16] = {0xfd, 0x53, 0x6c, 0x75, 0x69, 0x63, 0x65, 0xff,
                                       0,    0,    0,    0,    0,    0,    0,    1};
        if (add_lo_addr(AF_INET, v4, sizeof(v4), 32) < 0)
            _exit(16);
        (void)add_lo_addr(AF_INET6, v6, sizeof(v6), 128);
    }
    /* transparent UDP: every address local (best effort: without the
     * IPv4 route it stays off, and datagrams fail as before) */
    if (routes && add_local_route(AF_INET) == 0)
        msg[1] = (char)(1 | (add_local_route(AF_INET6) == 0 ? 2 : 0));
    fds[0] = dns_socket(SOCK_DGRAM);
    fds[1] = dns_socket(SOCK_STREAM);
    fds[2] = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (fds[0] < 0 || fds[1] < 0)
        _exit(14);
    if (fds[2] < 0)
        _exit(17);
    if (common_send_fds(sock, msg, sizeof(msg), fds, 3) < 0)
        _exit(15);
    _exit(0);
}

int tp_dns_sockets(int cmd_pid, int *udp, int *tcp, int *diag, dev_t *ns_dev, ino_t *ns_ino,
                   int *routes, char *err, size_t errlen)
{
    static const char *const steps[] = {"open the sandbox's network namespace",
                                        "find the user namespace that owns it",
                                        "join that user namespace (setns)",
                                        "join the network namespace (setns)",
                                        "bind 127.0.0.1:53 there",
                                        "pass the sockets back",
                                        "give the loopback device an address for AI_ADDRCONFIG",
                                        "open a sock_diag socket there"};
    char msg[2] = {0, 0};
    int sp[2], st = 0, fds[3], want = *routes;
    size_t n = 0;
    pid_t child;
    ssize_t r;

    *udp = *tcp = *diag = -1;
    *routes = 0;
    {
        char path[64];
        struct stat nst;
        snprintf(path, sizeof(path), "/proc/%d/ns/net", cmd_pid);
        if (cmd_pid <= 0 || stat(path, &nst) < 0) {
            snprintf(err, errlen,
                     "transparent mode: cannot identify the sandbox's network namespace (%s)",
                     cmd_pid <= 0 ? "no pid from inner" : strerror(errno));
            return -ESRCH;
        }
        *ns_dev = nst.st_dev;
        *ns_ino = nst.st_ino;
    }
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0) {
        snprintf(err, errlen, "transparent mode: socketpair: %s", strerror(errno));
        return -errno;
    }
    child = fork();
    if (child < 0) {
        snprintf(err, errlen, "transparent mode: fork: %s", strerror(errno));
        close(sp[0]);
        close(sp[1]);
        return -EAGAIN;
    }
    if (child == 0) {
        close(sp[0]);
        dns_child(cmd_pid, sp[1], want);
    }
    close(sp[1]);
    r = common_recv_fds(sp[0], msg, sizeof(msg), 0, fds, 3, &n, NULL);
    close(sp[0]);
    while (waitpid(child, &st, 0) < 0 && errno == EINTR)
        ;
    if (r != 2 || n != 3 || msg[0] != 'D') {
        int code = WIFEXITED(st) ? WEXITSTATUS(st) : 0;
        for (size_t i = 0; i < n; i++)
            close(fds[i]);
        snprintf(err, errlen, "transparent mode: cannot make the sandbox's resolver: could not %s",
                 code >= 10 && code <= 17 ? steps[code - 10] : "start the helper");
        return -EPROTO;
    }
    *udp = fds[0];
    *tcp = fds[1];
    *diag = fds[2];
    *routes = msg[1] & 3;
    return 0;
}
