/* socks/udp.c - SOCKS5 UDP ASSOCIATE (RFC 1928 section 7, issue 26).
 *
 * One association per accepted UDP ASSOCIATE request. It owns:
 *   relay   a UDP socket bound on the control connection's local address
 *           (port 0), named in the reply: the client sends its datagrams
 *           here, and gets the destinations' replies from here;
 *   out4/6  unconnected sockets (made on first use) that send to the
 *           destinations and receive their replies;
 *   idle    the proxy's idle timeout (proxy.timeouts.idle; none when 0);
 *   dests   every destination the client named (at most SOCKS_UDP_MAX_DESTS),
 *           each judged once like a CONNECT with transport udp
 *           (policy_decide_transport): a name is resolved by sluice's
 *           resolver and its answers guarded, the first dialable answer
 *           kept; datagrams that arrive while a name resolves wait (at
 *           most SOCKS_UDP_PENDING each, SOCKS_UDP_PENDING_BYTES in all).
 * Datagrams are taken only from the control connection's client address,
 * and from the port the request named (or, when it named 0, the port of
 * the first datagram); fragments (FRAG != 0) are dropped and counted. A
 * reply is passed back only from an address:port this client sent to
 * after it was allowed. The policy a destination was judged by is the one
 * current when it was judged; a reload makes every destination judged
 * again. Sends never queue: a datagram the socket will not take now is
 * dropped (UDP), so memory stays bounded whatever the peers do.
 *
 * The association ends with its control connection (the session calls
 * socks_udp_close) and ends the control connection when it is idle or a
 * socket fails (the ended callback).
 */
#include "socks/socks-int.h"

#include "bridge/bridge.h"
#include "policy/policy.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define SOCKS_UDP_MAX_ASSOC 256          /* per process */
#define SOCKS_UDP_MAX_DESTS 64           /* per association */
#define SOCKS_UDP_PENDING 4              /* datagrams held per name being resolved */
#define SOCKS_UDP_PENDING_BYTES 65536    /* held per association */
#define SOCKS_UDP_BUF (65536 + SOCKS5_UDP_REPLY_HDR_MAX)

/* ---- process-wide counters (every worker) ---- */

static struct socks_udp_stats stats;

#define STAT_ADD(field, n) __atomic_add_fetch(&stats.field, (uint64_t)(n), __ATOMIC_RELAXED)

void socks_udp_stats(struct socks_udp_stats *out)
{
    const uint64_t *src = (const uint64_t *)&stats;
    uint64_t *dst = (uint64_t *)out;

    for (size_t i = 0; i < sizeof(stats) / sizeof(uint64_t); i++)
        dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
}

/* ---- the association ---- */

enum dest_state { DEST_PENDING = 0, DEST_ALLOWED, DEST_DENIED };

struct pending {
    uint8_t *data;
    size_t len;
};

struct udp_dest {
    struct socks_udp *u;
    struct policy_host host;
    uint16_t port;
    enum dest_state state;
    struct policy_decision m;     /* the rule match, finished once the answers are in */
    struct resolver_query *q;     /* DEST_PENDING: the lookup */
    struct sockaddr_storage to;   /* DEST_ALLOWED: where datagrams go */
    struct policy_addr to_addr;
    struct pending held[SOCKS_UDP_PENDING];
    size_t nheld;
};

struct socks_udp {
    struct frontend_conn *fc; /* NULL once closed */
    struct frontend *f;
    socks_udp_ended_cb ended;
    void *arg;
    uv_udp_t relay, out4, out6;
    uv_timer_t idle;
    unsigned open_handles; /* handles initialised and not yet closed */
    int out4_on, out6_on, closing;
    struct sockaddr_storage client; /* the client's address; its port once known */
    int port_known;
    struct policy *pol; /* a reference: destinations were judged by it */
    struct udp_dest *dests[SOCKS_UDP_MAX_DESTS];
    size_t ndests;
    size_t held_bytes;
    /* counters of this association */
    uint64_t dgrams_up, bytes_up, dgrams_down, bytes_down;
    uint64_t denied, fragments, spoofed, malformed, dropped, unsolicited;
};

/* One receive buffer per thread: datagrams are handled (and sent on with
 * uv_udp_try_send) inside the receive callback, so nothing outlives it.
 * Replies are received after SOCKS5_UDP_REPLY_HDR_MAX bytes of room, where
 * their header is written. */
static _Thread_local uint8_t rbuf[SOCKS_UDP_BUF];

/* ---- addresses ---- */

/* A sockaddr of address A and PORT (endpoint_sockaddr_split the other way). */

static void sa_make(const struct policy_addr *a, uint16_t port, struct sockaddr_storage *ss)
{
    endpoint_sockaddr(a, port, ss, NULL);
}

static int addr_eq(const struct policy_addr *a, const struct policy_addr *b)
{
    return a->family == b->family && memcmp(a->bytes, b->bytes, a->family == 4 ? 4 : 16) == 0;
}

static int addr_zero(const struct policy_addr *a)
{
    static const uint8_t zero[16];

    return memcmp(a->bytes, zero, a->family == 4 ? 4 : 16) == 0;
}

/* ---- closing ---- */

static void dest_free(struct udp_dest *d)
{
    resolver_query_detach(d->q);
    for (size_t i = 0; i < d->nheld; i++) {
        d->u->held_bytes -= d->held[i].len;
        free(d->held[i].data);
    }
    free(d);
}

static void forget_dests(struct socks_udp *u)
{
    for (size_t i = 0; i < u->ndests; i++)
        dest_free(u->dests[i]);
    u->ndests = 0;
}

static void on_handle_closed(uv_handle_t *h)
{
    struct socks_udp *u = h->data;

    if (--u->open_handles > 0)
        return;
    policy_free(u->pol);
    free(u);
}

static void close_handles(struct socks_udp *u)
{
    uv_close((uv_handle_t *)&u->relay, on_handle_closed);
    uv_close((uv_handle_t *)&u->idle, on_handle_closed);
    if (u->out4_on)
        uv_close((uv_handle_t *)&u->out4, on_handle_closed);
    if (u->out6_on)
        uv_close((uv_handle_t *)&u->out6, on_handle_closed);
}

void socks_udp_bytes(const struct socks_udp *u, uint64_t *up, uint64_t *down)
{
    *up = u->bytes_up;
    *down = u->bytes_down;
}

void socks_udp_close(struct socks_udp *u, char *summary, size_t len)
{
    if (summary != NULL && len > 0)
        snprintf(summary, len,
                 "udp association: datagrams up %llu (%llu B) down %llu (%llu B), %zu "
                 "destinations, denied %llu, fragments %llu, spoofed %llu, malformed %llu, "
                 "dropped %llu, unsolicited %llu",
                 (unsigned long long)u->dgrams_up, (unsigned long long)u->bytes_up,
                 (unsigned long long)u->dgrams_down, (unsigned long long)u->bytes_down,
                 u->ndests, (unsigned long long)u->denied, (unsigned long long)u->fragments,
                 (unsigned long long)u->spoofed, (unsigned long long)u->malformed,
                 (unsigned long long)u->dropped, (unsigned long long)u->unsolicited);
    if (u->closing)
        return;
    u->closing = 1;
    u->fc = NULL;
    u->ended = NULL;
    forget_dests(u);
    __atomic_sub_fetch(&stats.active, 1, __ATOMIC_RELAXED);
    close_handles(u);
}

/* The association ends by itself: the owner closes the control connection,
 * which closes the association. */
static void end_assoc(struct socks_udp *u, const char *why)
{
    if (u->ended != NULL)
        u->ended(u->arg, why);
}

static void on_idle(uv_timer_t *t)
{
    end_assoc(t->data, "udp association idle");
}

static void touch(struct socks_udp *u)
{
    if (u->f->idle_timeout_ms > 0 && !u->closing)
        uv_timer_start(&u->idle, on_idle, u->f->idle_timeout_ms, 0);
}

/* ---- the log: one DECISION record per destination ---- */

static void log_dest(struct socks_udp *u, const struct udp_dest *d, const struct policy_judgment *j,
                     const char *reason)
{
    struct frontend_conn *fc = u->fc;
    char hint[400];

    if (fc == NULL)
        return;
    fc->host = d->host.name;
    fc->port = d->port;
    snprintf(fc->verdict, sizeof(fc->verdict), "%s",
             d->state != DEST_ALLOWED ? "deny"
             : j != NULL && j->report_only ? "would_deny"
                                           : "allow");
    frontend_conn_set_text(&fc->rule, j != NULL ? j->rule_text : NULL);
    frontend_conn_set_text(&fc->source, j != NULL ? j->source : NULL);
    frontend_conn_set_text(&fc->reason, reason != NULL ? reason : j != NULL ? j->reason : NULL);
    frontend_conn_set_text(&fc->hint, NULL);
    if (d->state != DEST_ALLOWED && j != NULL)
        frontend_conn_set_text(&fc->hint, policy_deny_hint(u->pol, &d->host, d->port, NULL, j,
                                                           NULL, hint, sizeof(hint)));
    if (d->state == DEST_ALLOWED)
        fc->addr = d->to_addr;
    else
        memset(&fc->addr, 0, sizeof(fc->addr));
    fc->code = -1;
    frontend_conn_emit(fc, CONNLOG_DECISION);
    fc->host = NULL;
    fc->port = 0;
}

/* ---- sending ---- */

static void on_reply(uv_udp_t *h, ssize_t nread, const uv_buf_t *buf, const struct sockaddr *addr,
                     unsigned flags);
static void on_alloc_reply(uv_handle_t *h, size_t suggested, uv_buf_t *buf);

static uv_udp_t *out_socket(struct socks_udp *u, int family)
{
    struct sockaddr_storage any;
    struct policy_addr zero;
    uv_udp_t *h = family == 4 ? &u->out4 : &u->out6;
    int *on = family == 4 ? &u->out4_on : &u->out6_on;

    if (*on)
        return h;
    if (uv_udp_init(u->f->loop, h) < 0)
        return NULL;
    h->data = u;
    *on = 1;
    u->open_handles++;
    memset(&zero, 0, sizeof(zero));
    zero.family = (uint8_t)family;
    sa_make(&zero, 0, &any);
    if (uv_udp_bind(h, (const struct sockaddr *)&any, family == 6 ? UV_UDP_IPV6ONLY : 0) < 0 ||
        uv_udp_recv_start(h, on_alloc_reply, on_reply) < 0)
        return NULL; /* closed with the association */
    return h;
}

static void send_up(struct socks_udp *u, struct udp_dest *d, const uint8_t *data, size_t len)
{
    uv_udp_t *h = out_socket(u, d->to_addr.family);
    uv_buf_t b = uv_buf_init((char *)data, (unsigned)len);
    int n;

    if (h == NULL) {
        u->dropped++;
        STAT_ADD(dropped, 1);
        return;
    }
    n = uv_udp_try_send(h, &b, 1, (const struct sockaddr *)&d->to);
    if (n < 0) {
        u->dropped++;
        STAT_ADD(dropped, 1);
        return;
    }
    u->dgrams_up++;
    u->bytes_up += len;
    STAT_ADD(dgrams_up, 1);
    STAT_ADD(bytes_up, len);
}

static void deny_datagram(struct socks_udp *u)
{
    u->denied++;
    STAT_ADD(denied, 1);
}

/* A destination decided: its held datagrams go out or count as denied. */
static void release_held(struct socks_udp *u, struct udp_dest *d)
{
    for (size_t i = 0; i < d->nheld; i++) {
        if (d->state == DEST_ALLOWED)
            send_up(u, d, d->held[i].data, d->held[i].len);
        else
            deny_datagram(u);
        u->held_bytes -= d->held[i].len;
        free(d->held[i].data);
    }
    d->nheld = 0;
}

/* The first answer the verdict marks dialable, else DENIED. */
static void settle(struct udp_dest *d, const struct policy_judgment *j,
                   const struct policy_guard_verdict *gv)
{
    d->state = DEST_DENIED;
    if (j->verdict != POLICY_ALLOW && !j->report_only)
        return;
    for (size_t i = 0; i < j->naddrs; i++) {
        if (gv[i].dial) {
            struct policy_addr a = gv[i].addr;
            uint16_t p;
            struct sockaddr_storage ss;
            sa_make(&a, d->port, &ss);
            endpoint_sockaddr_split((const struct sockaddr *)&ss, &d->to_addr, &p); /* unmaps */
            sa_make(&d->to_addr, d->port, &d->to);
            d->state = DEST_ALLOWED;
            return;
        }
    }
}

static void on_resolved(void *arg, enum resolver_status st, const struct policy_addr *addrs,
                        size_t n)
{
    struct udp_dest *d = arg;
    struct socks_udp *u = d->u;
    struct policy_guard_verdict gv[RESOLVER_MAX_ADDRS];
    struct policy_judgment j;
    char why[300];

    d->q = NULL;
    if (st != RESOLVER_OK) {
        d->state = DEST_DENIED;
        snprintf(why, sizeof(why), "cannot resolve %.200s: %s", d->host.name,
                 st == RESOLVER_NXDOMAIN ? "no such name"
                 : st == RESOLVER_TIMEOUT ? "DNS timeout"
                                          : "DNS failure");
        log_dest(u, d, NULL, why);
    } else {
        if (n > RESOLVER_MAX_ADDRS)
            n = RESOLVER_MAX_ADDRS;
        policy_verdict_finish(u->pol, &d->host, d->port, &d->m, addrs, n, gv, &j);
        settle(d, &j, gv);
        log_dest(u, d, &j, NULL);
    }
    release_held(u, d);
}

/* Judges a new destination: an IP literal at once, a name by its rules and,
 * unless they deny it, by the guard over its answers once resolved. */
static void judge(struct socks_udp *u, struct udp_dest *d)
{
    struct policy_guard_verdict gv[1];
    struct policy_judgment j;
    struct resolver *r;
    int rc;

    policy_decide_transport(u->pol, POLICY_UDP, &d->host, d->port, &d->m);
    policy_verdict_finish(u->pol, &d->host, d->port, &d->m, NULL, 0, gv, &j);
    if (d->host.kind != POLICY_HOST_NAME || (j.verdict == POLICY_DENY && !j.report_only)) {
        settle(d, &j, gv); /* a literal was guarded as its own answer */
        if (d->host.kind == POLICY_HOST_NAME)
            d->state = DEST_DENIED;
        log_dest(u, d, &j, NULL);
        return;
    }
    d->state = DEST_PENDING;
    r = egress_env_resolver(u->f->egress);
    rc = r != NULL ? resolver_query(r, d->host.name, on_resolved, d, &d->q) : UV_EINVAL;
    if (rc < 0) {
        d->q = NULL;
        d->state = DEST_DENIED;
        log_dest(u, d, NULL, "cannot start the DNS lookup");
    }
}

/* A reload since the destinations were judged: judge them all again. */
static void follow_policy(struct socks_udp *u)
{
    const struct policy *cur = egress_env_policy(u->f->egress);

    if (cur == u->pol)
        return;
    forget_dests(u);
    policy_free(u->pol);
    u->pol = policy_ref((struct policy *)cur);
}

static int dest_host(const struct socks5_request *q, struct policy_host *h)
{
    char text[INET6_ADDRSTRLEN];
    const char *why;

    if (q->atyp == SOCKS5_ATYP_IPV4 || q->atyp == SOCKS5_ATYP_IPV6) {
        inet_ntop(q->atyp == SOCKS5_ATYP_IPV4 ? AF_INET : AF_INET6, q->addr, text, sizeof(text));
        return policy_host_normalize(text, strlen(text), h, &why);
    }
    return policy_host_normalize((const char *)q->addr, q->addr_len, h, &why);
}

static struct udp_dest *find_dest(struct socks_udp *u, const struct policy_host *h, uint16_t port)
{
    for (size_t i = 0; i < u->ndests; i++) {
        struct udp_dest *d = u->dests[i];
        if (d->port == port && d->host.len == h->len && memcmp(d->host.name, h->name, h->len) == 0)
            return d;
    }
    return NULL;
}

static void drop(struct socks_udp *u, uint64_t *mine, uint64_t *global)
{
    (*mine)++;
    __atomic_add_fetch(global, 1, __ATOMIC_RELAXED);
    (void)u;
}

/* 1 when the datagram comes from the client (its address; its port once
 * known, which the first datagram teaches when the request named none). */
static int from_client(struct socks_udp *u, const struct sockaddr *sa)
{
    struct policy_addr a, c;
    uint16_t p, cp;

    if (endpoint_sockaddr_split(sa, &a, &p) < 0 || endpoint_sockaddr_split((const struct sockaddr *)&u->client, &c, &cp) < 0 ||
        !addr_eq(&a, &c))
        return 0;
    if (!u->port_known) {
        sa_make(&c, p, &u->client);
        u->port_known = 1;
        return 1;
    }
    return p == cp;
}

/* Holds a datagram for a destination being resolved. */
static void hold(struct socks_udp *u, struct udp_dest *d, const uint8_t *data, size_t len)
{
    uint8_t *copy;

    if (d->nheld == SOCKS_UDP_PENDING || u->held_bytes + len > SOCKS_UDP_PENDING_BYTES ||
        (copy = malloc(len > 0 ? len : 1)) == NULL) {
        drop(u, &u->dropped, &stats.dropped);
        return;
    }
    memcpy(copy, data, len);
    d->held[d->nheld].data = copy;
    d->held[d->nheld].len = len;
    d->nheld++;
    u->held_bytes += len;
}

static void client_datagram(struct socks_udp *u, const uint8_t *data, size_t len)
{
    struct socks5_udp_header hd;
    struct policy_host h;
    struct udp_dest *d;

    if (socks5_udp_parse(data, len, &hd) != SOCKS5_UDP_OK) {
        drop(u, &u->malformed, &stats.malformed);
        return;
    }
    if (hd.frag != 0) { /* no reassembly: a fragment is refused */
        drop(u, &u->fragments, &stats.fragments);
        return;
    }
    if (hd.dst.port == 0 || dest_host(&hd.dst, &h) < 0) {
        drop(u, &u->malformed, &stats.malformed);
        return;
    }
    follow_policy(u);
    d = find_dest(u, &h, hd.dst.port);
    if (d == NULL) {
        if (u->ndests == SOCKS_UDP_MAX_DESTS || (d = calloc(1, sizeof(*d))) == NULL) {
            drop(u, &u->dropped, &stats.dropped);
            return;
        }
        d->u = u;
        d->host = h;
        d->port = hd.dst.port;
        u->dests[u->ndests++] = d;
        judge(u, d);
    }
    switch (d->state) {
    case DEST_ALLOWED:
        send_up(u, d, data + hd.header_len, len - hd.header_len);
        return;
    case DEST_PENDING:
        hold(u, d, data + hd.header_len, len - hd.header_len);
        return;
    case DEST_DENIED:
        deny_datagram(u);
        return;
    }
}

static void on_alloc_client(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)h;
    (void)suggested;
    *buf = uv_buf_init((char *)rbuf, (unsigned)(SOCKS_UDP_BUF - SOCKS5_UDP_REPLY_HDR_MAX));
}

static void on_alloc_reply(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)h;
    (void)suggested;
    *buf = uv_buf_init((char *)rbuf + SOCKS5_UDP_REPLY_HDR_MAX,
                       (unsigned)(SOCKS_UDP_BUF - SOCKS5_UDP_REPLY_HDR_MAX));
}

static void on_client(uv_udp_t *h, ssize_t nread, const uv_buf_t *buf,
                      const struct sockaddr *addr, unsigned flags)
{
    struct socks_udp *u = h->data;

    (void)flags;
    if (u->closing || addr == NULL)
        return;
    if (nread < 0) {
        end_assoc(u, "udp relay socket failed");
        return;
    }
    if (!from_client(u, addr)) {
        drop(u, &u->spoofed, &stats.spoofed);
        return;
    }
    touch(u);
    client_datagram(u, (const uint8_t *)buf->base, (size_t)nread);
}

/* A destination's datagram: passed back only from an address:port this
 * client was allowed to send to, with its header in front. */
static void on_reply(uv_udp_t *h, ssize_t nread, const uv_buf_t *buf, const struct sockaddr *addr,
                     unsigned flags)
{
    struct socks_udp *u = h->data;
    struct policy_addr a;
    uint16_t port;
    uint8_t hdr[SOCKS5_UDP_REPLY_HDR_MAX];
    size_t hlen = 0;
    uv_buf_t b;

    (void)flags;
    if (u->closing || addr == NULL || nread < 0 || endpoint_sockaddr_split(addr, &a, &port) < 0)
        return;
    for (size_t i = 0; i < u->ndests && hlen == 0; i++) {
        const struct udp_dest *d = u->dests[i];
        if (d->state == DEST_ALLOWED && d->port == port && addr_eq(&d->to_addr, &a))
            hlen = socks5_udp_header_build(hdr, a.family, a.bytes, port);
    }
    if (hlen == 0 || !u->port_known) {
        drop(u, &u->unsolicited, &stats.unsolicited);
        return;
    }
    memcpy(buf->base - hlen, hdr, hlen);
    b = uv_buf_init(buf->base - hlen, (unsigned)((size_t)nread + hlen));
    if (uv_udp_try_send(&u->relay, &b, 1, (const struct sockaddr *)&u->client) < 0) {
        drop(u, &u->dropped, &stats.dropped);
        return;
    }
    touch(u);
    u->dgrams_down++;
    u->bytes_down += (uint64_t)nread;
    STAT_ADD(dgrams_down, 1);
    STAT_ADD(bytes_down, nread);
}

/* ---- opening ---- */

static int refuse(uint8_t *code, const char **why, uint8_t c, const char *text)
{
    *code = c;
    *why = text;
    STAT_ADD(refused, 1);
    return UV_EINVAL;
}

/* The client's and the local address of the control connection, both in
 * one family (a v4-mapped pair becomes IPv4). */
static int control_addrs(uv_tcp_t *ctl, struct policy_addr *peer, uint16_t *peer_port,
                         struct policy_addr *local)
{
    struct sockaddr_storage ps, ls;
    int plen = sizeof(ps), llen = sizeof(ls);
    uint16_t lport;

    if (uv_tcp_getpeername(ctl, (struct sockaddr *)&ps, &plen) < 0 ||
        uv_tcp_getsockname(ctl, (struct sockaddr *)&ls, &llen) < 0 ||
        endpoint_sockaddr_split((struct sockaddr *)&ps, peer, peer_port) < 0 ||
        endpoint_sockaddr_split((struct sockaddr *)&ls, local, &lport) < 0 || peer->family != local->family)
        return -1;
    return 0;
}

static int open_relay(struct socks_udp *u, const struct policy_addr *local, uint8_t *reply,
                      size_t *reply_len)
{
    struct sockaddr_storage ss;
    int len = sizeof(ss);
    struct policy_addr a;
    uint16_t port;

    sa_make(local, 0, &ss);
    if (u->f->udp_socket != NULL) { /* sluice run: a socket of the sandbox's namespace */
        int fd = u->f->udp_socket(u->f->udp_ctx, local->family == 4 ? AF_INET : AF_INET6);
        if (fd < 0)
            return -1;
        if (uv_udp_open(&u->relay, fd) < 0) {
            close(fd);
            return -1;
        }
        /* uv_udp_open sets SO_REUSEADDR: cleared before the bind, so no
         * socket of the sandbox can bind the relay's port beside it */
        if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &(int){0}, sizeof(int)) < 0)
            return -1;
    }
    if (uv_udp_bind(&u->relay, (const struct sockaddr *)&ss,
                    local->family == 6 ? UV_UDP_IPV6ONLY : 0) < 0 ||
        uv_udp_getsockname(&u->relay, (struct sockaddr *)&ss, &len) < 0 ||
        endpoint_sockaddr_split((struct sockaddr *)&ss, &a, &port) < 0 ||
        uv_udp_recv_start(&u->relay, on_alloc_client, on_client) < 0)
        return -1;
    *reply_len = socks5_reply_bound(reply, a.family, a.bytes, port);
    return 0;
}

int socks_udp_open(struct socks_udp **out, struct frontend_conn *fc, uv_tcp_t *ctl,
                   const struct socks5_request *req, socks_udp_ended_cb ended, void *arg,
                   uint8_t reply[SOCKS5_UDP_REPLY_HDR_MAX], size_t *reply_len, uint8_t *code,
                   const char **why)
{
    struct policy_addr peer, local, said;
    uint16_t peer_port;
    struct socks_udp *u;
    struct frontend *f = fc->f;

    if (control_addrs(ctl, &peer, &peer_port, &local) < 0)
        return refuse(code, why, SOCKS5_REP_GENERAL, "cannot read the control connection's "
                                                     "addresses");
    (void)peer_port;
    /* DST.ADDR: the address the client will send from; 0 when it does not
     * know. Datagrams are taken from the control connection's address only. */
    if (req->atyp == SOCKS5_ATYP_IPV4 || req->atyp == SOCKS5_ATYP_IPV6) {
        struct sockaddr_storage ss;
        uint16_t p;
        memset(&said, 0, sizeof(said));
        said.family = req->atyp == SOCKS5_ATYP_IPV4 ? 4 : 6;
        memcpy(said.bytes, req->addr, said.family == 4 ? 4 : 16);
        sa_make(&said, 0, &ss);
        endpoint_sockaddr_split((struct sockaddr *)&ss, &said, &p); /* unmaps */
        if (!addr_zero(&said) && !addr_eq(&said, &peer))
            return refuse(code, why, SOCKS5_REP_NOT_ALLOWED,
                          "the UDP source named differs from the control connection's client");
    }
    if (__atomic_add_fetch(&stats.active, 1, __ATOMIC_RELAXED) > SOCKS_UDP_MAX_ASSOC) {
        __atomic_sub_fetch(&stats.active, 1, __ATOMIC_RELAXED);
        return refuse(code, why, SOCKS5_REP_GENERAL, "too many UDP associations");
    }
    u = calloc(1, sizeof(*u));
    if (u == NULL) {
        __atomic_sub_fetch(&stats.active, 1, __ATOMIC_RELAXED);
        return refuse(code, why, SOCKS5_REP_GENERAL, "out of memory");
    }
    u->fc = fc;
    u->f = f;
    u->ended = ended;
    u->arg = arg;
    u->pol = policy_ref((struct policy *)egress_env_policy(f->egress));
    sa_make(&peer, req->port, &u->client);
    u->port_known = req->port != 0;
    uv_udp_init(f->loop, &u->relay);
    uv_timer_init(f->loop, &u->idle);
    u->relay.data = u;
    u->idle.data = u;
    u->open_handles = 2;
    if (open_relay(u, &local, reply, reply_len) < 0) {
        u->closing = 1;
        __atomic_sub_fetch(&stats.active, 1, __ATOMIC_RELAXED);
        close_handles(u);
        return refuse(code, why, SOCKS5_REP_GENERAL, "cannot open the UDP relay socket");
    }
    STAT_ADD(associations, 1);
    touch(u);
    *out = u;
    return 0;
}
