/* proxy/http_tls.c - network.tlsTerminate in the HTTP front end.
 *
 * An allowed CONNECT to a host to be terminated (policy_tls_opts on, not in
 * excludeDomains) gets its 200 (or 503 too-many-tunnels past maxTunnels),
 * then the client's first bytes are sniffed (SNIFF, on the connection's
 * timer: handshakeTimeoutMs): anything but TLS continues as the opaque
 * tunnel it would have been (unless refuseOpaqueTunnels); a ClientHello is
 * terminated (TLS) with a leaf named by the CONNECT target, never by the SNI.
 *
 * The transport shim is a pump between a TLS connection (tls/tls.h, driven
 * through memory buffers) and one end of a socket pair: the decrypted
 * bytes reach the other end, where an ordinary connection of this front
 * end (an "inner" one, c->terminated) reads them, so the requests inside a
 * tunnel take the same path as plain HTTP (parsing, request-level keys,
 * egress, logs). Its upstream leg is the same pump the other way round: the
 * socket egress dialed (verdict, guard, parentProxy's CONNECT) wrapped in a
 * TLS client that verifies the origin, its plaintext end adopted as the
 * kept upstream connection. A verification failure is a 502 naming it.
 * The pump is proxy/http_tlspump.c.
 */
#include "proxy/http_int.h"

#include "policy/policy.h"
#include "proxy/service.h"
#include "proxy/tlsterm.h"
#include "tls/tls.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* The front end's side                                                      */

static struct proxy_tls *loop_tls(const struct http_conn *c)
{
    const struct proxy_service *svc = c->fc.f->data;

    return svc != NULL ? svc->tls : NULL;
}

/* 1 when this CONNECT is to be terminated (the policy in use decides). */
int http_tls_wanted(const struct http_conn *c)
{
    return !c->terminated &&
           policy_tls_terminates(egress_env_policy(c->fc.f->egress), &c->host, c->fc.port);
}

static void on_sniff_timer(uv_timer_t *t)
{
    struct http_conn *c = container_of(frontend_conn_of_timer(t), struct http_conn, fc);
    const struct policy_tls_opts *to = policy_tls_opts(egress_env_policy(c->fc.f->egress));
    char why[120];

    if (c->state != HTTP_ST_SNIFF && c->state != HTTP_ST_TLS)
        return;
    snprintf(why, sizeof(why), "no TLS handshake within %u ms (handshakeTimeoutMs)",
             to->handshake_ms);
    proxy_tls_count(loop_tls(c), PROXY_TLS_CLIENT, why);
    http_set_reason(c, why);
    http_conn_close(c, "handshake timeout");
}

/* One of maxTunnels: 0, or -1 (none left: nothing taken). */
static int tunnel_reserve(const struct frontend *f, struct proxy_tls *t)
{
    const struct policy_tls_opts *to = policy_tls_opts(egress_env_policy(f->egress));

    if (__atomic_fetch_add(&t->sh->open, 1, __ATOMIC_RELAXED) >= to->max_tunnels) {
        __atomic_fetch_sub(&t->sh->open, 1, __ATOMIC_RELAXED);
        return -1;
    }
    return 0;
}

/* The tunnel is announced (reply: the CONNECT's 200 or SOCKS5's success):
 * the upstream socket waits in held_fd while the first bytes are sniffed. */
static void sniff_start(struct http_conn *c, int fd, const char *reply, size_t len)
{
    const struct policy_tls_opts *to = policy_tls_opts(egress_env_policy(c->fc.f->egress));
    uv_buf_t b = uv_buf_init((char *)(uintptr_t)reply, (unsigned)len);

    c->held_fd = fd;
    c->held_addr = c->fc.addr;
    if (http_client_send(c, &b, 1) < 0) {
        http_conn_close(c, "client write failed");
        return;
    }
    http_set_state(c, HTTP_ST_SNIFF);
    c->w->timer = TIMER_NONE;
    frontend_conn_timer_set(&c->fc, on_sniff_timer, to->handshake_ms);
    http_tls_sniff(c);
}

/* An allowed CONNECT to be terminated, dialed (fd): 503 past maxTunnels,
 * else 200 and the sniff. */
void http_tls_connect(struct http_conn *c, int fd)
{
    static const char ok[] = "HTTP/1.1 200 Connection Established\r\n\r\n";
    struct proxy_tls *t = loop_tls(c);

    if (t == NULL) { /* a policy with tlsTerminate on a loop without it: fail closed */
        close(fd);
        http_set_reason(c, "TLS termination is not available in this process");
        http_reply_error(c, 502, "proxy_internal_error",
                         "TLS termination is not available in this process", 1, "internal error");
        return;
    }
    if (tunnel_reserve(c->fc.f, t) < 0) {
        struct http_reply r;
        close(fd);
        http_set_reason(c, "too many terminated tunnels (network.tlsTerminate.maxTunnels)");
        memset(&r, 0, sizeof(r));
        r.status = 503;
        r.error = "connection_limit_reached";
        r.details = "too many terminated tunnels";
        r.x_error = "too-many-tunnels";
        r.body = "sluice: too many terminated tunnels, retry later";
        r.retry_after = HTTP_RETRY_AFTER_S;
        r.close = 1;
        http_answer(c, &r, "too many tunnels");
        return;
    }
    c->tls_counted = 1;
    c->fc.code = 200;
    sniff_start(c, fd, ok, sizeof(ok) - 1);
}

/* A SOCKS5 CONNECT to be terminated (frontend.tls_adopt, set by the
 * service): a connection of the HTTP front end takes the client and the dialed
 * upstream, writes the success reply and sniffs. UV_EBUSY past maxTunnels,
 * UV_ENOTSUP without termination on this loop, UV_ENOMEM: nothing taken. */
int http_tls_adopt(struct frontend *f, const struct frontend_tls_adopt *a)
{
    struct proxy_service *svc = f->data;
    struct proxy_tls *t = svc != NULL ? svc->tls : NULL;
    struct frontend *hf = svc != NULL ? &svc->fe[PROXY_FE_HTTP] : NULL;
    struct http_conn *c;

    if (t == NULL)
        return UV_ENOTSUP;
    if (tunnel_reserve(hf, t) < 0)
        return UV_EBUSY;
    c = http_session_adopt(hf, a); /* the HTTP front end's connection from now on */
    if (c == NULL) {
        __atomic_fetch_sub(&t->sh->open, 1, __ATOMIC_RELAXED);
        return UV_ENOMEM;
    }
    c->tls_counted = 1;
    sniff_start(c, a->up_fd, a->reply, a->reply_len);
    return 0;
}

/* Not TLS: the opaque tunnel it would have been. */
static void go_opaque(struct http_conn *c)
{
    const struct policy_http_opts *ho = policy_http_opts(egress_env_policy(c->fc.f->egress));
    struct proxy_tls *t = loop_tls(c);
    int fd = c->held_fd;

    if (ho->refuse_opaque_tunnels) {
        http_set_reason(c, "not TLS inside the tunnel, and opaque tunnels are refused "
                           "(network.refuseOpaqueTunnels)");
        http_conn_close(c, "tunnel refused");
        return;
    }
    if (policy_tls_needed(egress_env_policy(c->fc.f->egress), &c->host, c->fc.port) &&
        !policy_mode_report(egress_env_policy(c->fc.f->egress))) {
        char why[300];
        snprintf(why, sizeof(why), "not TLS inside a tunnel to a host with %s: never passed opaque",
                 policy_tls_needed_why(egress_env_policy(c->fc.f->egress), &c->host, c->fc.port));
        http_set_reason(c, why);
        proxy_tls_count(t, PROXY_TLS_CLIENT, "not TLS");
        http_conn_close(c, "tunnel refused");
        return;
    }
    c->held_fd = -1;
    if (c->tls_counted) {
        __atomic_fetch_sub(&t->sh->open, 1, __ATOMIC_RELAXED);
        c->tls_counted = 0;
    }
    frontend_conn_timer_set(&c->fc, NULL, 0);
    http_tunnel_opaque(c, fd);
}

/* A ClientHello: terminate. */
static void terminate(struct http_conn *c, const struct tls_hello *h)
{
    struct proxy_tls *t = loop_tls(c);
    struct http_work *w = c->w;
    struct tls_conn *tc;
    char why[300];

    if (h->alpn_offered && !h->alpn_http11) {
        /* An h2-only client (gRPC): sluice serves http/1.1 only. A host
         * that needs termination (request rules, credentials) refuses it; any other
         * passes opaque, as it would without tlsTerminate. */
        const struct policy *pol = egress_env_policy(c->fc.f->egress);
        if (!policy_tls_needed(pol, &c->host, c->fc.port) || policy_mode_report(pol)) {
            go_opaque(c);
            return;
        }
        snprintf(why, sizeof(why),
                 "the client offers only ALPN %s, which sluice does not serve in a terminated "
                 "tunnel (http/1.1 only), and this host's %s need termination",
                 h->alpn, policy_tls_needed_why(pol, &c->host, c->fc.port));
        proxy_tls_count(t, PROXY_TLS_CLIENT, why);
        http_set_reason(c, why);
        http_conn_close(c, "tls refused");
        return;
    }
    /* held_fd stays: the inner connection's first request takes it */
    tc = tls_conn_server_new(t->sctx, c->host.name); /* the judged host, never the SNI */
    if (tc == NULL || tls_conn_feed(tc, w->in, w->in_len) == UV_ENOMEM) {
        tls_conn_free(tc);
        http_conn_close(c, "out of memory");
        return;
    }
    c->fc.terminated = 1;
    c->bytes_up += w->in_len;
    http_client_read_stop(c);
    http_set_state(c, HTTP_ST_TLS);
    http_work_free(c);
    http_pump_server(c, tc); /* takes tc */
}

/* SNIFF: the client's bytes so far in w->in. */
void http_tls_sniff(struct http_conn *c)
{
    struct http_work *w = c->w;
    struct tls_hello h;
    char why[200];

    switch (tls_sniff((const uint8_t *)w->in, w->in_len, &h)) {
    case TLS_SNIFF_NEED_MORE:
        if (w->in_len >= w->in_max && w->in_max > 0) {
            snprintf(why, sizeof(why), "a ClientHello longer than %zu bytes", w->in_max);
            proxy_tls_count(loop_tls(c), PROXY_TLS_CLIENT, why);
            http_set_reason(c, why);
            http_conn_close(c, "tls refused");
            return;
        }
        if (w->client_eof) {
            http_conn_close(c, "client closed before its first bytes");
            return;
        }
        http_client_read_start(c);
        return;
    case TLS_SNIFF_NOT_TLS:
        go_opaque(c);
        return;
    case TLS_SNIFF_MALFORMED:
        snprintf(why, sizeof(why), "malformed ClientHello: %s",
                 h.reason != NULL ? h.reason : "invalid");
        proxy_tls_count(loop_tls(c), PROXY_TLS_CLIENT, why);
        http_set_reason(c, why);
        http_conn_close(c, "tls refused");
        return;
    case TLS_SNIFF_CLIENT_HELLO:
    default:
        terminate(c, &h);
        return;
    }
}

/* From http_conn_close: the pump, the held socket and the tunnel count. */
void http_tls_conn_closing(struct http_conn *c)
{
    if (c->held_fd >= 0) {
        close(c->held_fd);
        c->held_fd = -1;
    }
    if (c->tls_counted) {
        struct proxy_tls *t = loop_tls(c);
        if (t != NULL)
            __atomic_fetch_sub(&t->sh->open, 1, __ATOMIC_RELAXED);
        c->tls_counted = 0;
    }
    if (c->tp != NULL)
        http_pump_close(c->tp); /* detaches */
}

/* An inner connection's request head of *end bytes at the start of w->in:
 * its path goes to the CONNECT target (http_target_for_tunnel), so it is
 * judged and dialed by that target, never by its Host. 0, or -1 after a
 * refusal. */
int http_tls_head(struct http_conn *c, size_t *end)
{
    struct http_work *w = c->w;
    char auth[POLICY_HOST_MAX + 16];
    const char *why = NULL;
    size_t n, rest = w->in_len - *end;
    char *nb;

    if (c->host.kind == POLICY_HOST_IPV6)
        snprintf(auth, sizeof(auth), "[%s]:%u", c->host.name, (unsigned)c->fc.port);
    else
        snprintf(auth, sizeof(auth), "%s:%u", c->host.name, (unsigned)c->fc.port);
    n = http_target_for_tunnel(w->in, *end, auth, NULL, 0, &why);
    if (n == 0) {
        http_refuse(c, 400, why, 1, "bad request");
        return -1;
    }
    nb = malloc(n + rest + 1);
    if (nb == NULL) {
        http_conn_close(c, "out of memory");
        return -1;
    }
    (void)http_target_for_tunnel(w->in, *end, auth, nb, n, &why);
    memcpy(nb + n, w->in + *end, rest); /* a body or pipelined bytes */
    free(w->in);
    w->in = nb;
    w->in_len = n + rest;
    w->in_cap = n + rest + 1;
    if (w->in_max < w->in_cap)
        w->in_max = w->in_cap;
    *end = n;
    return 0;
}

/* An inner connection's egress dialed the target (through parentProxy's
 * CONNECT when one is set): the TLS client, then the exchange. */
void http_tls_upstream(struct http_conn *c, const struct egress_outcome *o)
{
    const struct policy_tls_opts *to = policy_tls_opts(egress_env_policy(c->fc.f->egress));
    struct proxy_tls *t = loop_tls(c);
    struct tls_conn *tc = t != NULL ? tls_conn_client_new(t->cctx, c->host.name) : NULL;

    if (tc == NULL) {
        close(o->fd);
        http_conn_close(c, "out of memory");
        return;
    }
    http_pump_client(c, tc, o, to->handshake_ms); /* takes tc and o->fd */
}

/* An inner connection's first request on the socket the CONNECT dialed. */
void http_tls_upstream_fd(struct http_conn *c, int fd, const struct policy_addr *addr)
{
    struct egress_outcome o;

    memset(&o, 0, sizeof(o));
    o.result = EGRESS_CONNECTED;
    o.verdict = "allow";
    o.addr = *addr;
    o.have_addr = addr->family != 0;
    o.fd = fd;
    http_tls_upstream(c, &o);
}

/* An inner connection's dial failed: an origin-side handshake failure. */
void http_tls_dial_failed(struct http_conn *c)
{
    proxy_tls_count(loop_tls(c), PROXY_TLS_ORIGIN, "cannot connect");
}
