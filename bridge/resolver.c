/* bridge/resolver.c - c-ares 1.18 driven by a libuv loop.
 *
 * c-ares 1.18 has no event thread and no ares_process_fds(), so the channel
 * is driven by hand (style.md 2.4):
 *   - ARES_OPT_SOCK_STATE_CB tells us which sockets c-ares wants watched; each
 *     gets a uv_poll_t (struct resolver_sock). (fd, 0, 0) means c-ares is about
 *     to close the socket: the poll is closed and leaves the active list at
 *     once, so when c-ares opens a new socket that reuses the fd number while
 *     the old poll's close callback is still pending, the new socket gets a new
 *     poll (libuv releases the fd's watcher slot in uv_close itself).
 *   - poll events go to ares_process_fd().
 *   - one uv_timer_t serves both c-ares (re-armed from ares_timeout() after
 *     every call into c-ares) and our own per-query deadline.
 *
 * Deadlines. All queries share timeout_ms, so appending to a list keeps it in
 * deadline order: the timer only needs the head. On expiry the caller gets
 * RESOLVER_TIMEOUT and the query is detached; c-ares has no per-query cancel,
 * so the query object lives on until c-ares calls back, and frees itself then.
 * c-ares's own schedule is sized to end at about the same time: with TRIES = 2
 * it waits t, 2t per server (1.18 doubles the timeout each round over the
 * server list), so t = timeout_ms / (3 * nservers) makes a dead server
 * ARES_ETIMEOUT by timeout_ms too, and detached or timed-out queries do not
 * pile up inside c-ares.
 *
 * Lifetime (R5, R10). Queries: attached (cb set, on the deadline list) until
 * their callback runs, they time out, they are detached or the resolver
 * closes; then cb == NULL and they wait for c-ares. Only on_addrinfo() frees a
 * query. The resolver: resolver_close() cancels attached queries, then
 * teardown() (once) destroys the channel, which calls back every remaining
 * query with ARES_EDESTRUCTION and reports every socket closed, then closes
 * the remaining polls and the timer; the last close callback calls done and
 * frees r. ares_destroy() must not run inside a c-ares callback, so calls into
 * c-ares are bracketed by ares_enter()/ares_leave(), and a close requested
 * inside one is finished by the outermost ares_leave().
 *
 * Name handling. The name is canonical and was judged by the policy as is, so
 * it must be looked up as is: ARES_OPT_DOMAINS with zero domains replaces the
 * resolv.conf search list (ARES_FLAG_NOSEARCH alone is not enough: 1.18's
 * ares_getaddrinfo() appends search domains regardless of it, and NDOTS does
 * not help single-label names), and ARES_FLAG_NOALIASES ignores HOSTALIASES.
 * We do not append a trailing dot instead: 1.18 then no longer matches the
 * name in the hosts file nor recognises "localhost.".
 *
 * Sources. With network.dnsServers, lookups are DNS only (ARES_OPT_LOOKUPS
 * "b"): the operator named the servers to trust, and /etc/hosts on the proxy
 * host is not part of that policy. localhost names never reach DNS (c-ares
 * refuses to send them, RFC 6761 6.3), so we answer them ourselves with the
 * loopback addresses, as c-ares does in default mode; the policy's rule
 * "localhost may resolve only to loopback" then applies the same way in both
 * modes. Without dnsServers, c-ares's defaults match the system resolver:
 * resolv.conf servers and options, hosts file per nsswitch.conf/host.conf.
 *
 * Order. We keep c-ares's RFC 6724 sort (no ARES_AI_NOSORT): the dialer tries
 * addresses in order, and this is getaddrinfo(3)'s order (IPv6 first only when
 * this host has a usable IPv6 source, ...), independent of whether the A or
 * the AAAA answer arrived first. The cost is a socket() + UDP connect() per
 * address, which sends no packet.
 */
#include "bridge/bridge.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h> /* fd_set and struct timeval, for ares.h */
#include <sys/socket.h>
#include <sys/time.h>
#include <uv.h>

#include <ares.h>

#include "policy/policy.h"

#include "common/common.h"

#define RESOLVER_TRIES 2
#define RESOLVER_MIN_TRY_MS 50
#define RESOLVER_NAME_MAX 253
#define RESOLVER_SERVERS_MAX 32

/* One c-ares socket being watched. Owned by r->socks while active; once its
 * close has been requested it is on no list and is freed in on_handle_close. */
struct resolver_sock {
    uv_poll_t poll;
    struct resolver *r;
    struct resolver_sock *next; /* r->socks */
    int fd;
};

struct resolver_query {
    struct resolver *r;
    resolver_cb cb; /* NULL once answered, timed out, cancelled or detached */
    void *arg;
    uint64_t deadline;                  /* uv_now() time */
    struct resolver_query *prev, *next; /* r->head list, only while cb != NULL */
};

struct resolver {
    uv_loop_t *loop;
    ares_channel channel; /* NULL after teardown */
    uv_timer_t timer;     /* c-ares timeouts and query deadlines */
    struct resolver_sock *socks;
    struct resolver_query *head, *tail; /* attached queries, deadline order */
    size_t nqueries;                    /* queries alive: attached + waiting for c-ares */
    unsigned timeout_ms;
    int dns_only; /* dnsServers configured */
    unsigned in_ares;
    unsigned pending_closes;
    int closing;   /* resolver_close() called */
    int torn_down; /* teardown() done */
    void (*done)(void *arg);
    void *done_arg;
};

/* ------------------------------------------------------------------------ */
/* Server list                                                               */

/* Decimal 1..65535 without sign or leading zeros. */
static int parse_port(const char *s, int *port)
{
    long v = 0;
    size_t i;

    if (s[0] == '\0' || s[0] == '0')
        return UV_EINVAL;
    for (i = 0; s[i] != '\0'; i++) {
        if (s[i] < '0' || s[i] > '9' || i >= 5)
            return UV_EINVAL;
        v = v * 10 + (s[i] - '0');
    }
    if (v > 65535)
        return UV_EINVAL;
    *port = (int)v;
    return 0;
}

/* "IPv4", "IPv4:PORT", "IPv6", "[IPv6]", "[IPv6]:PORT". */
static int parse_server(const char *s, struct ares_addr_port_node *n)
{
    char host[INET6_ADDRSTRLEN + 1];
    const char *h = s, *port = NULL, *colon;
    size_t hlen;
    int family, p = 0;

    if (s == NULL)
        return UV_EINVAL;
    if (s[0] == '[') {
        const char *rb = strchr(s, ']');
        if (rb == NULL)
            return UV_EINVAL;
        h = s + 1;
        hlen = (size_t)(rb - h);
        if (rb[1] == ':')
            port = rb + 2;
        else if (rb[1] != '\0')
            return UV_EINVAL;
        family = AF_INET6;
    } else if ((colon = strchr(s, ':')) != NULL && strchr(colon + 1, ':') != NULL) {
        hlen = strlen(s); /* bare IPv6, no port */
        family = AF_INET6;
    } else if (colon != NULL) {
        hlen = (size_t)(colon - s);
        port = colon + 1;
        family = AF_INET;
    } else {
        hlen = strlen(s);
        family = AF_INET;
    }
    if (hlen == 0 || hlen >= sizeof(host))
        return UV_EINVAL;
    memcpy(host, h, hlen);
    host[hlen] = '\0';

    memset(n, 0, sizeof(*n));
    n->family = family;
    if (inet_pton(family, host,
                  family == AF_INET ? (void *)&n->addr.addr4 : (void *)&n->addr.addr6) != 1)
        return UV_EINVAL;
    if (port != NULL && parse_port(port, &p) < 0)
        return UV_EINVAL;
    n->udp_port = p; /* host order; 0 = the channel's port (53) */
    n->tcp_port = p;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */

static void on_sock_state(void *data, ares_socket_t fd, int readable, int writable);
static void on_timer(uv_timer_t *t);
static void on_handle_close(uv_handle_t *h);

static void ares_enter(struct resolver *r)
{
    r->in_ares++;
}

static void teardown(struct resolver *r);
static void timer_rearm(struct resolver *r);

static void ares_leave(struct resolver *r)
{
    if (--r->in_ares > 0)
        return;
    if (r->closing)
        teardown(r);
    else
        timer_rearm(r);
}

static void list_unlink(struct resolver *r, struct resolver_query *q)
{
    if (q->prev != NULL)
        q->prev->next = q->next;
    else
        r->head = q->next;
    if (q->next != NULL)
        q->next->prev = q->prev;
    else
        r->tail = q->prev;
    q->prev = q->next = NULL;
}

/* Hands the result to the caller, once; the query stays allocated until
 * c-ares lets go of it (on_addrinfo). */
static void deliver(struct resolver_query *q, enum resolver_status st,
                    const struct policy_addr *addrs, size_t n)
{
    resolver_cb cb = q->cb;

    if (cb == NULL)
        return;
    list_unlink(q->r, q);
    q->cb = NULL;
    cb(q->arg, st, n > 0 ? addrs : NULL, n);
}

static void timer_rearm(struct resolver *r)
{
    uint64_t now, due = UINT64_MAX;
    struct timeval tv, *tvp;

    if (r->torn_down)
        return;
    now = uv_now(r->loop);
    if (r->head != NULL)
        due = r->head->deadline > now ? r->head->deadline - now : 0;
    tvp = ares_timeout(r->channel, NULL, &tv);
    if (tvp != NULL) {
        uint64_t ms = (uint64_t)tvp->tv_sec * 1000u + ((uint64_t)tvp->tv_usec + 999u) / 1000u;
        if (ms < due)
            due = ms;
    }
    if (due == UINT64_MAX)
        uv_timer_stop(&r->timer);
    else
        uv_timer_start(&r->timer, on_timer, due, 0);
}

static enum resolver_status map_status(int status)
{
    switch (status) {
    case ARES_SUCCESS:
        return RESOLVER_OK;
    case ARES_ENOTFOUND:
        return RESOLVER_NXDOMAIN;
    case ARES_ENODATA:
        return RESOLVER_NODATA;
    case ARES_ETIMEOUT:
        return RESOLVER_TIMEOUT;
    case ARES_ECANCELLED:
    case ARES_EDESTRUCTION:
        return RESOLVER_CANCELLED;
    default:
        return RESOLVER_FAIL;
    }
}

/* Appends a unless already present; returns the new count. */
static size_t addr_add(struct policy_addr *v, size_t n, const struct policy_addr *a)
{
    size_t i;

    if (n >= RESOLVER_MAX_ADDRS)
        return n;
    for (i = 0; i < n; i++)
        if (v[i].family == a->family && memcmp(v[i].bytes, a->bytes, sizeof(a->bytes)) == 0)
            return n;
    v[n] = *a;
    return n + 1;
}

static size_t addrs_from_ai(const struct ares_addrinfo *ai, struct policy_addr *v)
{
    const struct ares_addrinfo_node *nd;
    size_t n = 0;

    for (nd = ai != NULL ? ai->nodes : NULL; nd != NULL; nd = nd->ai_next) {
        struct policy_addr a;

        memset(&a, 0, sizeof(a));
        if (nd->ai_addr == NULL)
            continue;
        if (nd->ai_family == AF_INET && nd->ai_addrlen >= sizeof(struct sockaddr_in)) {
            struct sockaddr_in sin;
            memcpy(&sin, nd->ai_addr, sizeof(sin));
            a.family = 4;
            memcpy(a.bytes, &sin.sin_addr, 4);
        } else if (nd->ai_family == AF_INET6 && nd->ai_addrlen >= sizeof(struct sockaddr_in6)) {
            struct sockaddr_in6 sin6;
            memcpy(&sin6, nd->ai_addr, sizeof(sin6));
            a.family = 6;
            memcpy(a.bytes, &sin6.sin6_addr, 16);
        } else {
            continue;
        }
        n = addr_add(v, n, &a);
    }
    return n;
}

/* c-ares's callback; the only place a query is freed. */
static void on_addrinfo(void *arg, int status, int timeouts, struct ares_addrinfo *ai)
{
    struct resolver_query *q = arg;
    struct resolver *r = q->r;

    (void)timeouts;
    if (q->cb != NULL) {
        struct policy_addr addrs[RESOLVER_MAX_ADDRS] = {{0}};
        size_t n = 0;
        enum resolver_status st = map_status(status);

        if (st == RESOLVER_OK) {
            n = addrs_from_ai(ai, addrs);
            if (n == 0)
                st = RESOLVER_NODATA;
        }
        deliver(q, st, addrs, n);
    }
    if (ai != NULL)
        ares_freeaddrinfo(ai);
    r->nqueries--;
    free(q);
}

/* Queries whose deadline has passed get RESOLVER_TIMEOUT. */
static void expire(struct resolver *r)
{
    uint64_t now = uv_now(r->loop);

    /* Re-read the head every time: a callback may detach, add or close. */
    while (r->head != NULL && r->head->deadline <= now)
        deliver(r->head, RESOLVER_TIMEOUT, NULL, 0);
}

static void on_timer(uv_timer_t *t)
{
    struct resolver *r = container_of(t, struct resolver, timer);

    expire(r);
    if (r->closing)
        return; /* resolver_close() ran from a callback and tore down */
    ares_enter(r);
    ares_process_fd(r->channel, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
    ares_leave(r);
}

/* ------------------------------------------------------------------------ */
/* Sockets                                                                   */

static void on_poll(uv_poll_t *h, int status, int events)
{
    struct resolver_sock *s = container_of(h, struct resolver_sock, poll);
    struct resolver *r = s->r;
    ares_socket_t rfd = ARES_SOCKET_BAD, wfd = ARES_SOCKET_BAD;

    if (status < 0) {
        /* Let c-ares find the error itself on read/write. */
        rfd = s->fd;
        wfd = s->fd;
    } else {
        if (events & UV_READABLE)
            rfd = s->fd;
        if (events & UV_WRITABLE)
            wfd = s->fd;
    }
    /* s may be closed (not freed: frees are deferred) during this call. */
    ares_enter(r);
    ares_process_fd(r->channel, rfd, wfd);
    ares_leave(r);
}

static void sock_close(struct resolver *r, struct resolver_sock *s)
{
    struct resolver_sock **pp;

    for (pp = &r->socks; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == s) {
            *pp = s->next;
            break;
        }
    }
    s->next = NULL;
    r->pending_closes++;
    uv_close((uv_handle_t *)&s->poll, on_handle_close);
}

static void on_sock_state(void *data, ares_socket_t fd, int readable, int writable)
{
    struct resolver *r = data;
    struct resolver_sock *s;
    int events = 0, rc;

    for (s = r->socks; s != NULL; s = s->next)
        if (s->fd == fd)
            break;

    if (!readable && !writable) {
        if (s != NULL)
            sock_close(r, s); /* c-ares closes fd right after this */
        return;
    }
    if (s == NULL) {
        s = calloc(1, sizeof(*s));
        if (s == NULL)
            return; /* the query will time out */
        if (uv_poll_init_socket(r->loop, &s->poll, fd) < 0) {
            free(s); /* not a handle yet: nothing to close */
            return;
        }
        s->r = r;
        s->fd = fd;
        s->next = r->socks;
        r->socks = s;
    }
    if (readable)
        events |= UV_READABLE;
    if (writable)
        events |= UV_WRITABLE;
    rc = uv_poll_start(&s->poll, events, on_poll);
    if (rc < 0)
        sock_close(r, s); /* the query will time out */
}

/* ------------------------------------------------------------------------ */
/* Lifetime                                                                  */

static void on_handle_close(uv_handle_t *h)
{
    struct resolver *r;

    if (h->type == UV_POLL) {
        struct resolver_sock *s = container_of(h, struct resolver_sock, poll);
        r = s->r;
        free(s);
    } else {
        r = container_of(h, struct resolver, timer);
    }
    r->pending_closes--;
    if (r->torn_down && r->pending_closes == 0) {
        void (*done)(void *) = r->done;
        void *arg = r->done_arg;

        free(r);
        if (done != NULL)
            done(arg);
    }
}

/* Runs once, outside any c-ares call. */
static void teardown(struct resolver *r)
{
    if (r->torn_down)
        return;
    /* Calls on_addrinfo (ARES_EDESTRUCTION) for every query left, and
     * on_sock_state(fd, 0, 0) for every open socket. */
    r->in_ares++;
    ares_destroy(r->channel);
    r->in_ares--;
    r->channel = NULL;
    r->torn_down = 1;
    while (r->socks != NULL)
        sock_close(r, r->socks);
    r->pending_closes++;
    uv_close((uv_handle_t *)&r->timer, on_handle_close);
}

void resolver_close(struct resolver *r, void (*done)(void *arg), void *arg)
{
    if (r == NULL || r->closing)
        return;
    r->closing = 1;
    r->done = done;
    r->done_arg = arg;
    while (r->head != NULL)
        deliver(r->head, RESOLVER_CANCELLED, NULL, 0);
    if (r->in_ares == 0)
        teardown(r);
    /* else the outermost ares_leave() tears down */
}

static int channel_open(struct resolver *r, unsigned try_ms, ares_channel *out)
{
    struct ares_options o;
    int mask;

    memset(&o, 0, sizeof(o));
    o.flags = ARES_FLAG_NOSEARCH | ARES_FLAG_NOALIASES;
    o.timeout = (int)try_ms;
    o.tries = RESOLVER_TRIES;
    o.domains = NULL;
    o.ndomains = 0; /* replaces resolv.conf's search list: look names up as is */
    o.sock_state_cb = on_sock_state;
    o.sock_state_cb_data = r;
    mask = ARES_OPT_FLAGS | ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES | ARES_OPT_DOMAINS |
           ARES_OPT_SOCK_STATE_CB;
    if (r->dns_only) {
        static char dns_only[] = "b"; /* c-ares copies it */
        o.lookups = dns_only;
        mask |= ARES_OPT_LOOKUPS;
    }
    /* ares_library_init() is a no-op outside Windows in 1.18. */
    switch (ares_init_options(out, &o, mask)) {
    case ARES_SUCCESS:
        return 0;
    case ARES_ENOMEM:
        return UV_ENOMEM;
    default:
        return UV_EIO;
    }
}

static unsigned try_timeout(unsigned timeout_ms, size_t nservers)
{
    uint64_t t = timeout_ms / (3u * (uint64_t)(nservers > 0 ? nservers : 1));

    return t < RESOLVER_MIN_TRY_MS ? RESOLVER_MIN_TRY_MS : (unsigned)t;
}

int resolver_init(struct resolver **out, uv_loop_t *loop, const char *const *servers,
                  size_t nservers, unsigned timeout_ms)
{
    struct ares_addr_port_node *nodes = NULL;
    struct resolver *r = NULL;
    size_t i;
    int rc;

    if (out == NULL || loop == NULL || timeout_ms == 0 || nservers > RESOLVER_SERVERS_MAX ||
        (nservers > 0 && servers == NULL))
        return UV_EINVAL;
    if (nservers > 0) {
        nodes = calloc(nservers, sizeof(*nodes));
        if (nodes == NULL)
            return UV_ENOMEM;
        for (i = 0; i < nservers; i++) {
            rc = parse_server(servers[i], &nodes[i]);
            if (rc < 0)
                goto out;
            nodes[i].next = i + 1 < nservers ? &nodes[i + 1] : NULL;
        }
    }
    r = calloc(1, sizeof(*r));
    if (r == NULL) {
        rc = UV_ENOMEM;
        goto out;
    }
    r->loop = loop;
    r->timeout_ms = timeout_ms;
    r->dns_only = nservers > 0;

    rc = channel_open(r, try_timeout(timeout_ms, nservers), &r->channel);
    if (rc < 0)
        goto out;
    if (nservers > 0) {
        if (ares_set_servers_ports(r->channel, nodes) != ARES_SUCCESS) {
            rc = UV_ENOMEM;
            goto out;
        }
    } else {
        /* Size the per-try timeout to the number of resolv.conf servers. */
        struct ares_addr_port_node *cur = NULL, *p;
        size_t n = 0;

        if (ares_get_servers_ports(r->channel, &cur) == ARES_SUCCESS) {
            for (p = cur; p != NULL; p = p->next)
                n++;
            ares_free_data(cur);
        }
        if (n > 1) {
            ares_destroy(r->channel); /* no sockets or queries yet */
            r->channel = NULL;
            rc = channel_open(r, try_timeout(timeout_ms, n), &r->channel);
            if (rc < 0)
                goto out;
        }
    }
    uv_timer_init(loop, &r->timer); /* cannot fail on Unix */
    *out = r;
    r = NULL;
    rc = 0;
out:
    if (r != NULL) {
        if (r->channel != NULL)
            ares_destroy(r->channel);
        free(r);
    }
    free(nodes);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Queries                                                                   */

static int name_ok(const char *name)
{
    size_t i;

    if (name == NULL || name[0] == '\0')
        return 0;
    for (i = 0; name[i] != '\0'; i++) {
        char c = name[i];
        if (i >= RESOLVER_NAME_MAX)
            return 0;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.'))
            return 0;
    }
    return 1;
}

/* RFC 6761 6.3: "localhost" and names under ".localhost". */
static int is_localhost(const char *name)
{
    static const char suffix[] = ".localhost";
    size_t len = strlen(name), slen = sizeof(suffix) - 1;

    if (strcmp(name, "localhost") == 0)
        return 1;
    return len > slen && strcmp(name + len - slen, suffix) == 0;
}

int resolver_query(struct resolver *r, const char *name, resolver_cb cb, void *arg,
                   struct resolver_query **qp)
{
    struct ares_addrinfo_hints hints;
    struct resolver_query *q;

    if (r == NULL || cb == NULL || qp == NULL)
        return UV_EINVAL;
    if (r->closing)
        return UV_ECANCELED;
    if (!name_ok(name))
        return UV_EINVAL;
    q = calloc(1, sizeof(*q));
    if (q == NULL)
        return UV_ENOMEM;
    q->r = r;
    q->cb = cb;
    q->arg = arg;
    q->deadline = uv_now(r->loop) + r->timeout_ms;
    q->prev = r->tail;
    if (r->tail != NULL)
        r->tail->next = q;
    else
        r->head = q;
    r->tail = q;
    r->nqueries++;
    *qp = q; /* before anything can call back */

    if (r->dns_only && is_localhost(name)) {
        struct policy_addr lo[2];

        memset(lo, 0, sizeof(lo));
        lo[0].family = 4;
        lo[0].bytes[0] = 127;
        lo[0].bytes[3] = 1;
        lo[1].family = 6;
        lo[1].bytes[15] = 1;
        deliver(q, RESOLVER_OK, lo, 2);
        r->nqueries--;
        free(q);
        return 0;
    }

    /* c-ares 1.18.1 sends even a dotted quad to DNS; answer it as getaddrinfo
     * would (the policy never passes IP literals; ':' is not a name byte). */
    {
        struct policy_addr a;

        memset(&a, 0, sizeof(a));
        if (inet_pton(AF_INET, name, a.bytes) == 1) {
            a.family = 4;
            deliver(q, RESOLVER_OK, &a, 1);
            r->nqueries--;
            free(q);
            return 0;
        }
    }

    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    ares_enter(r);
    ares_getaddrinfo(r->channel, name, NULL, &hints, on_addrinfo, q); /* may call back now */
    ares_leave(r);
    return 0;
}

void resolver_query_detach(struct resolver_query *q)
{
    if (q == NULL || q->cb == NULL)
        return;
    list_unlink(q->r, q);
    q->cb = NULL;
    q->arg = NULL;
}

size_t resolver_outstanding(const struct resolver *r)
{
    return r->nqueries;
}
