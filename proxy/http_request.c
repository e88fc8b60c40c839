/* proxy/http_request.c - one parsed request and its verdict: the request
 * head checks (authentication, request-level keys, the health path), the
 * egress call or the reuse of a kept upstream, and sluice's own answers. */
#include "proxy/http_int.h"

#include <errno.h>
#include <sys/socket.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Answers of our own                                                        */

/* After an answer that keeps the connection: the next request. */
void http_next_request(struct http_conn *c)
{
    struct http_work *w = c->w;

    if (c->fc.f->draining) { /* an answer that began before the drain */
        http_close_gracefully(c, "drained");
        return;
    }
    http_set_state(c, HTTP_ST_HEAD);
    w->scan = 0;
    w->upgrade = 0;
    w->is_connect = 0;
    if (w->in_len == 0) {
        free(w->in);
        w->in = NULL;
        http_timer_set(c, TIMER_IDLE, c->fc.f->idle_timeout_ms);
    }
    if (!w->processing)
        http_process_client(c);
}

/* Sends an answer of ours; close: the connection ends after it. */
static void reply_bytes(struct http_conn *c, int status, const char *buf, size_t n, int close,
                        const char *end)
{
    uv_buf_t b = uv_buf_init((char *)(uintptr_t)buf, (unsigned)n);

    c->fc.code = status;
    if (http_client_send(c, &b, 1) < 0) {
        http_conn_close(c, "client write failed");
        return;
    }
    if (close || c->w->client_eof)
        http_close_gracefully(c, end);
    else
        http_next_request(c);
}

void http_answer(struct http_conn *c, const struct http_reply *r, const char *end)
{
    char buf[HTTP_REPLY_MAX];
    struct http_reply rr = *r;
    size_t n;

    if (c->fc.f->draining)
        rr.close = 1;
    n = http_reply_build(&rr, buf, sizeof(buf));
    if (n == 0) {
        c->fc.code = r->status;
        http_conn_close(c, end);
        return;
    }
    reply_bytes(c, r->status, buf, n, rr.close, end);
}

/* A refusal decided from the request itself. */
void http_refuse(struct http_conn *c, int status, const char *why, int close, const char *end)
{
    struct http_reply r;
    char body[300];

    http_set_reason(c, why);
    memset(&r, 0, sizeof(r));
    r.status = status;
    r.error = "http_request_error";
    r.details = why;
    snprintf(body, sizeof(body), "sluice: %s", why);
    r.body = body;
    r.close = close != 0;
    r.allow = status == 405;
    http_answer(c, &r, end);
}

void http_reply_overloaded(struct http_conn *c)
{
    struct http_reply r;

    http_set_reason(c, "too many connections");
    memset(&r, 0, sizeof(r));
    r.status = 503;
    r.error = "connection_limit_reached";
    r.details = "too many connections";
    r.body = "sluice: too many connections, retry later";
    r.retry_after = HTTP_RETRY_AFTER_S;
    r.close = 1;
    http_answer(c, &r, "over the connection limit");
}

/* The health path (proxy.h): "GET <f->health_path> HTTP/1.x" exactly. */
static int is_health_request(const struct http_conn *c, const char *h, size_t len)
{
    const char *p = c->fc.f->health_path;
    size_t pl;

    if (p == NULL)
        return 0;
    pl = strlen(p);
    if (len < 4 + pl + 11 || memcmp(h, "GET ", 4) != 0 || memcmp(h + 4, p, pl) != 0)
        return 0;
    return memcmp(h + 4 + pl, " HTTP/1.1\r\n", 11) == 0 ||
           memcmp(h + 4 + pl, " HTTP/1.0\r\n", 11) == 0;
}

static void reply_health(struct http_conn *c, int keep)
{
    static const char ok[] = "HTTP/1.1 200 OK\r\n"
                             "Content-Type: text/plain; charset=us-ascii\r\n"
                             "Cache-Control: no-store\r\n"
                             "Content-Length: 3\r\n"
                             "Connection: keep-alive\r\n\r\nok\n";
    static const char ok_close[] = "HTTP/1.1 200 OK\r\n"
                                   "Content-Type: text/plain; charset=us-ascii\r\n"
                                   "Cache-Control: no-store\r\n"
                                   "Content-Length: 3\r\n"
                                   "Connection: close\r\n\r\nok\n";
    static const char draining[] = "HTTP/1.1 503 Service Unavailable\r\n"
                                   "Content-Type: text/plain; charset=us-ascii\r\n"
                                   "Cache-Control: no-store\r\n"
                                   "Content-Length: 9\r\n"
                                   "Connection: close\r\n\r\ndraining\n";

    http_set_reason(c, "health check");
    if (c->fc.f->draining)
        reply_bytes(c, 503, draining, sizeof(draining) - 1, 1, "drained");
    else if (keep)
        reply_bytes(c, 200, ok, sizeof(ok) - 1, 0, "health check");
    else
        reply_bytes(c, 200, ok_close, sizeof(ok_close) - 1, 1, "health check");
}

/* A health request of end bytes at the start of w->in: its fields get the
 * same checks as any request's (the head is validated with an absolute-form
 * request line in place of its own), and it may not carry a body. */
static void health_check(struct http_conn *c, size_t end)
{
    static const char line11[] = "GET http://health.invalid/ HTTP/1.1\r\n";
    static _Thread_local struct http_request rq;
    struct http_work *w = c->w;
    const char *eol = memchr(w->in, '\n', end), *why = NULL;
    size_t rest, n;
    char *h;
    int st;

    rest = end - (size_t)(eol + 1 - w->in);
    n = sizeof(line11) - 1 + rest;
    h = malloc(n);
    if (h == NULL) {
        http_conn_close(c, "out of memory");
        return;
    }
    memcpy(h, line11, sizeof(line11) - 1);
    h[sizeof(line11) - 4] = eol[-2]; /* the request's minor version */
    memcpy(h + sizeof(line11) - 1, eol + 1, rest);
    st = http_request_parse(h, n, &rq, &why);
    free(h);
    if (st == 0 && rq.body != HTTP_BODY_NONE) {
        st = 400;
        why = "a health check request has no body";
    }
    if (st != 0) {
        http_refuse(c, st, why, 1, "bad request");
        return;
    }
    http_consume_in(w, end);
    reply_health(c, rq.keep_alive);
}

/* ------------------------------------------------------------------------ */
/* Egress                                                                    */

void http_reply_error(struct http_conn *c, int status, const char *error, const char *details,
                      int close, const char *end)
{
    struct http_reply r;
    char body[800], hp[300];

    memset(&r, 0, sizeof(r));
    r.status = status;
    r.error = error;
    r.details = details;
    snprintf(body, sizeof(body), "sluice: %s: %s", http_host_port(c, hp, sizeof(hp)),
             details != NULL ? details : http_status_phrase(status));
    r.body = body;
    r.close = close != 0;
    http_answer(c, &r, end);
}

/* An egress failure as an answer (design.md "Wire behaviour"). */
static void egress_failed(struct http_conn *c, const struct egress_outcome *o)
{
    struct http_work *w = c->w;
    struct http_reply r;
    char body[1300], hp[300];
    const char *reason = o->reason[0] != '\0' ? o->reason : egress_result_str(o->result);

    memset(&r, 0, sizeof(r));
    r.details = reason;
    r.close = w->is_connect || !w->client_keep || w->req_body != HTTP_BODY_NONE;
    http_host_port(c, hp, sizeof(hp));
    switch (o->result) {
    case EGRESS_DENIED:
        r.status = 403;
        r.phrase = reason;
        r.error = o->stage == EGRESS_BY_GUARD ? "destination_ip_prohibited" : "http_request_denied";
        r.blocked = 1;
        /* what, why (the rule), and what to add to allow it (issue 26) */
        snprintf(body, sizeof(body), "sluice: %s blocked: %s%s%s", hp, reason,
                 o->hint[0] != '\0' ? "; " : "", o->hint);
        break;
    case EGRESS_DNS_FAILED:
        r.status = 502;
        r.error = "dns_error";
        r.rcode = o->status == UV_EAI_NONAME ? "NXDOMAIN" : NULL;
        snprintf(body, sizeof(body), "sluice: %s: %s", hp, reason);
        break;
    case EGRESS_DNS_TIMEOUT:
        r.status = 504;
        r.error = "dns_timeout";
        snprintf(body, sizeof(body), "sluice: %s: %s", hp, reason);
        break;
    case EGRESS_REFUSED:
        r.status = 502;
        r.error = "connection_refused";
        snprintf(body, sizeof(body), "sluice: %s: %s", hp, reason);
        break;
    case EGRESS_UNREACHABLE:
        r.status = 502;
        r.error = "destination_unavailable";
        snprintf(body, sizeof(body), "sluice: %s: %s", hp, reason);
        break;
    case EGRESS_DIAL_TIMEOUT:
        r.status = 504;
        r.error = "connection_timeout";
        snprintf(body, sizeof(body), "sluice: %s: %s", hp, reason);
        break;
    case EGRESS_CONNECTED:
    case EGRESS_ERROR:
    default:
        r.status = 502;
        r.error = "proxy_internal_error";
        snprintf(body, sizeof(body), "sluice: %s: %s", hp, reason);
        break;
    }
    r.body = body;
    http_answer(c, &r, egress_result_str(o->result));
}

static int egress_code(const struct egress_outcome *o, int is_connect)
{
    switch (o->result) {
    case EGRESS_CONNECTED:
        return is_connect ? 200 : -1; /* the upstream's status comes later */
    case EGRESS_DENIED:
        return 403;
    case EGRESS_DNS_TIMEOUT:
    case EGRESS_DIAL_TIMEOUT:
        return 504;
    case EGRESS_DNS_FAILED:
    case EGRESS_REFUSED:
    case EGRESS_UNREACHABLE:
    case EGRESS_ERROR:
    default:
        return 502;
    }
}

static void on_egress(void *arg, const struct egress_outcome *o)
{
    struct http_conn *c = arg;
    struct http_work *w = c->w;
    int rc;

    c->req = NULL;
    frontend_conn_note(&c->fc, o);
    c->fc.code = egress_code(o, w->is_connect);
    frontend_conn_emit(&c->fc, CONNLOG_DECISION);
    if (o->result != EGRESS_CONNECTED) {
        if (c->terminated && o->result != EGRESS_DENIED)
            http_tls_dial_failed(c);
        egress_failed(c, o);
        return;
    }
    if (w->is_connect) {
        http_tunnel_start(c, o->fd);
        return;
    }
    if (c->terminated) { /* TLS to the origin first (proxy/http_tls.c) */
        http_tls_upstream(c, o);
        return;
    }
    rc = http_up_adopt(c, o->fd, o);
    if (rc < 0) {
        char why[160];
        snprintf(why, sizeof(why), "cannot adopt the upstream socket: %s", uv_strerror(rc));
        http_set_reason(c, why);
        http_reply_error(c, 502, "proxy_internal_error", why, 1, "internal error");
        return;
    }
    http_start_exchange(c);
}

/* The request line the verdict judges: NULL for a tunnel sluice cannot
 * read (CONNECT), method NULL for one it terminates. */
static const struct policy_request *judged_request(const struct http_conn *c,
                                                   struct policy_request *rq)
{
    const struct http_work *w = c->w;

    if (w->is_connect && http_tls_wanted(c)) {
        /* to be terminated: request rules judge the requests inside */
        memset(rq, 0, sizeof(*rq));
        return rq;
    }
    if (w->is_connect || w->rq_buf == NULL)
        return NULL;
    rq->method = w->rq_buf;
    rq->method_len = w->rq_method_len;
    rq->target = w->rq_buf + w->rq_method_len;
    rq->target_len = w->rq_target_len;
    return rq;
}

void http_start_egress(struct http_conn *c)
{
    struct policy_request prq;
    int rc;

    http_set_state(c, HTTP_ST_EGRESS);
    http_timer_set(c, TIMER_NONE, 0); /* egress has its own deadlines (ask, DNS, dial) */
    rc = egress_start_request(c->fc.f->egress, &c->host, c->fc.port, judged_request(c, &prq),
                              c->fc.protocol, c->fc.client, on_egress, c, &c->req);
    if (rc < 0) {
        c->req = NULL;
        http_set_reason(c, uv_strerror(rc));
        http_reply_error(c, 502, "proxy_internal_error", uv_strerror(rc), 1, "internal error");
    }
}

/* The verdict on this request with addr (the address an open upstream is
 * connected to) as the only answer: 1 when the policy as it is now allows
 * it by rule and the guard passes addr (the decision is logged, with why),
 * else 0 (a deny, an ask, report mode: the full egress path decides). */
static int judged_on(struct http_conn *c, const struct policy_addr *addr, const char *why)
{
    const struct policy *pol = egress_env_policy(c->fc.f->egress);
    struct policy_guard_verdict gv;
    struct policy_judgment j;
    struct policy_request prq;

    /* request rules judge every request on an open connection */
    policy_verdict_request(pol, &c->host, c->fc.port, judged_request(c, &prq), addr, 1, &gv, &j);
    if (j.verdict != POLICY_ALLOW || j.nallowed != 1)
        return 0;
    snprintf(c->fc.verdict, sizeof(c->fc.verdict), "allow");
    frontend_conn_set_text(&c->fc.rule, j.rule_text);
    frontend_conn_set_text(&c->fc.source, j.source[0] != '\0' ? j.source : NULL);
    http_set_reason(c, why);
    c->fc.addr = *addr;
    c->fc.code = -1;
    frontend_conn_emit(&c->fc, CONNLOG_DECISION);
    return 1;
}

/* The kept upstream serves this request when it goes to the same canonical
 * host:port and judged_on() its address allows it. */
static int can_reuse(struct http_conn *c)
{
    struct http_up *u = c->w->up;

    if (u == NULL || u->phase == UP_CLOSING || u->phase != UP_IDLE || u->port != c->fc.port ||
        strcmp(u->host, c->host.name) != 0)
        return 0;
    return judged_on(c, &u->addr, "reusing the kept upstream connection");
}

/* ------------------------------------------------------------------------ */
/* Request heads                                                             */

/* Checks Proxy-Authorization when proxy.auth is set. 1 when it passes. */
static int auth_ok(struct http_conn *c, const struct http_request *rq, const char *head)
{
    uint8_t cred[HTTP_CRED_MAX];
    size_t ul = 0, pl = 0;
    int ok;

    if (c->fc.f->auth_user == NULL)
        return 1;
    if (!rq->has_auth) {
        http_set_reason(c, "proxy authentication required");
        return 0;
    }
    ok = http_basic_decode(head + rq->auth.off, rq->auth.len, cred, sizeof(cred), &ul, &pl) == 0 &&
         frontend_auth_ok(c->fc.f, cred, ul, cred + ul + 1, pl);
    memset(cred, 0, sizeof(cred));
    if (!ok)
        http_set_reason(c, "wrong proxy credentials");
    return ok;
}

/* For the log of a plain HTTP request: the method, and the URL without its
 * query string (nor fragment): scheme, canonical host, port unless 80, path. */
static void note_url(struct http_conn *c, const struct http_request *rq, const char *in)
{
    char url[POLICY_HOST_MAX + 600], method[16];
    const char *path = in + rq->path.off;
    size_t plen = 0, at;
    int v6 = c->host.kind == POLICY_HOST_IPV6;
    unsigned dport = c->terminated ? 443 : 80;

    while (plen < rq->path.len && path[plen] != '?' && path[plen] != '#')
        plen++;
    /* common_cat, not snprintf: once per request */
    common_catn(method, sizeof(method), 0, in + rq->method_text.off, rq->method_text.len);
    frontend_conn_set_text(&c->fc.method, method);
    at = common_cat(url, sizeof(url), 0, c->terminated ? "https://" : "http://");
    at = common_cat(url, sizeof(url), at, v6 ? "[" : "");
    at = common_cat(url, sizeof(url), at, c->host.name);
    at = common_cat(url, sizeof(url), at, v6 ? "]" : "");
    if (c->fc.port != dport)
        at = common_cat_u(url, sizeof(url), common_cat(url, sizeof(url), at, ":"), c->fc.port);
    common_catn(url, sizeof(url), at, path, plen < 512 ? plen : 512);
    frontend_conn_set_text(&c->fc.url, url);
}

/* What the logs say from now on is about this request. */
static void request_log_reset(struct http_conn *c)
{
    c->fc.host = NULL;
    c->fc.protocol = "http";
    c->fc.verdict[0] = '\0';
    memset(&c->fc.addr, 0, sizeof(c->fc.addr));
    frontend_conn_set_text(&c->fc.rule, NULL);
    frontend_conn_set_text(&c->fc.source, NULL);
    frontend_conn_set_text(&c->fc.url, NULL);
    frontend_conn_set_text(&c->fc.method, NULL);
    frontend_conn_set_text(&c->fc.hint, NULL);
    frontend_conn_set_text(&c->fc.secret, NULL);
    frontend_conn_set_text(&c->fc.cred_header, NULL);
    http_set_reason(c, NULL);
    c->fc.code = -1;
}

/* The 407 of a request without good credentials. */
static void reply_auth_required(struct http_conn *c, const struct http_request *rq, size_t end)
{
    struct http_work *w = c->w;
    struct http_reply r;
    int keep = rq->keep_alive && rq->body == HTTP_BODY_NONE && !(w->is_connect && w->in_len > end);

    memset(&r, 0, sizeof(r));
    r.status = 407;
    r.challenge = 1;
    r.details = c->fc.reason;
    r.body = "sluice: proxy authentication required";
    r.close = !keep;
    http_consume_in(w, end);
    http_answer(c, &r, "authentication failed");
}

/* The request-level options (srt 0.0.83; proxy/reqopts.c). 0 to go on
 * (*norm_head: NULL, or the head with a normalised path, rq->path pointing
 * into it), or -1 after a refusal. */
static int request_options(struct http_conn *c, struct http_request *rq, size_t end,
                           char **norm_head)
{
    struct http_work *w = c->w;
    const struct policy_http_opts *ho = policy_http_opts(egress_env_policy(c->fc.f->egress));

    if (w->is_connect && ho->refuse_opaque_tunnels && !http_tls_wanted(c)) {
        http_refuse(c, 403,
                    "tunnels are refused (network.refuseOpaqueTunnels): sluice cannot see "
                    "inside CONNECT",
                    1, "tunnel refused");
        return -1;
    }
    /* inside a terminated tunnel to a host that needs termination (request
     * rules), the Host must name the CONNECT target whatever
     * requireHostMatch says */
    if (!w->is_connect &&
        (ho->require_host_match ||
         (c->terminated &&
          policy_tls_needed(egress_env_policy(c->fc.f->egress), &c->host, c->fc.port))) &&
        reqopt_host_mismatch(w->in, rq, &c->host, c->fc.port)) {
        http_refuse(c, 421,
                    "the Host header names another host than the request target "
                    "(network.requireHostMatch)",
                    1, "host mismatch");
        return -1;
    }
    if (!w->is_connect && ho->ambiguous != SETTINGS_AMBIGUOUS_AS_SPELLED &&
        reqopt_target_ambiguous(w->in + rq->path.off, rq->path.len)) {
        size_t plen = 0, cap = (size_t)rq->path.len + 2;
        char *nb = ho->ambiguous == SETTINGS_AMBIGUOUS_NORMALIZE ? malloc(end + cap) : NULL;
        if (nb == NULL ||
            reqopt_normalize(w->in + rq->path.off, rq->path.len, nb + end, cap, &plen) < 0) {
            free(nb);
            http_refuse(c, 400,
                        "ambiguous request target (dot segments, a backslash or an encoded "
                        "slash; network.ambiguousRequestTarget)",
                        1, "ambiguous request target");
            return -1;
        }
        memcpy(nb, w->in, end);
        rq->path.off = (uint32_t)end;
        rq->path.len = (uint32_t)plen;
        *norm_head = nb;
    }
    return 0;
}

/* On a host with request rules the path goes upstream as it was judged:
 * normalised (policy_path_normalize), the query kept as sent, so the origin
 * and the rules read the same path. An ambiguous path is left alone: the
 * verdict refuses it. *norm_head as in request_options. 0, or UV_ENOMEM. */
static int request_rules_path(struct http_conn *c, struct http_request *rq, size_t end,
                              char **norm_head)
{
    const struct policy *pol = egress_env_policy(c->fc.f->egress);
    const char *hb = *norm_head != NULL ? *norm_head : c->w->in, *path, *q;
    size_t plen, qlen, n = 0, cap;
    const char *why;
    char *nb;

    if (c->w->is_connect || !policy_request_ruled(pol, &c->host, c->fc.port))
        return 0;
    path = hb + rq->path.off;
    plen = rq->path.len;
    if (plen == 0 || path[0] != '/')
        return 0; /* "" or "?q": sent as "/..." by the head builder, nothing to normalise */
    q = memchr(path, '?', plen);
    qlen = q != NULL ? plen - (size_t)(q - path) : 0;
    cap = plen + 1;
    nb = malloc(end + cap + qlen);
    if (nb == NULL)
        return UV_ENOMEM;
    if (policy_path_normalize(path, plen, nb + end, cap, &n, &why) < 0) {
        free(nb);
        return 0;
    }
    memcpy(nb + end + n, path + plen - qlen, qlen);
    memcpy(nb, hb, end);
    rq->path.off = (uint32_t)end;
    rq->path.len = (uint32_t)(n + qlen);
    free(*norm_head);
    *norm_head = nb;
    return 0;
}

/* The head to send upstream for an absolute-form request, into w->out
 * (hb: the head the spans of rq point into). 0 or UV_ENOMEM. */
static int request_upstream_head(struct http_conn *c, const struct http_request *rq,
                                 const char *hb)
{
    struct http_work *w = c->w;
    char authority[POLICY_HOST_MAX + 16];
    int v6 = c->host.kind == POLICY_HOST_IPV6;
    size_t n, at;

    at = common_cat(authority, sizeof(authority), 0, v6 ? "[" : "");
    at = common_cat(authority, sizeof(authority), at, c->host.name);
    at = common_cat(authority, sizeof(authority), at, v6 ? "]" : "");
    if (c->fc.port != (c->terminated ? 443 : 80))
        common_cat_u(authority, sizeof(authority), common_cat(authority, sizeof(authority), at, ":"),
                     c->fc.port);
    n = http_request_build(hb, rq, authority, !rq->keep_alive, NULL, 0);
    free(w->out);
    w->out = malloc(n);
    if (w->out == NULL)
        return UV_ENOMEM;
    w->out_len = http_request_build(hb, rq, authority, !rq->keep_alive, w->out, n);
    return 0;
}

/* Keeps the request line the verdict judges: the method and the target as
 * it goes upstream (hb: the head rq's spans point into; an empty path or a
 * bare query is sent as "/..."). 0 or UV_ENOMEM. */
static int keep_request_line(struct http_work *w, const struct http_request *rq, const char *hb)
{
    const char *path = hb + rq->path.off;
    size_t ml = rq->method_text.len, pl = rq->path.len;
    int slash = pl == 0 || path[0] != '/';

    free(w->rq_buf);
    w->rq_buf = malloc(ml + pl + 1);
    if (w->rq_buf == NULL)
        return UV_ENOMEM;
    memcpy(w->rq_buf, hb + rq->method_text.off, ml);
    if (slash)
        w->rq_buf[ml] = '/';
    memcpy(w->rq_buf + ml + (size_t)slash, path, pl);
    w->rq_method_len = ml;
    w->rq_target_len = pl + (size_t)slash;
    return 0;
}

/* Parses and checks the head; notes the target. 0 to go on, or -1 after a
 * refusal. */
static int request_parse(struct http_conn *c, struct http_request *rq, size_t end)
{
    struct http_work *w = c->w;
    const char *why = NULL;
    int st;

    st = http_request_parse(w->in, end, rq, &why);
    if (st != 0) {
        http_refuse(c, st, why, 1, "bad request");
        return -1;
    }
    if (http_llhttp_check_head(c, &w->reqp, &http_req_settings, HTTP_REQUEST, w->in, end,
                               rq->body, rq->content_length) < 0) {
        http_refuse(c, 400, "ambiguous request head", 1, "bad request");
        return -1;
    }
    w->is_connect = rq->method == HTTP_METHOD_CONNECT;
    w->is_head = rq->method == HTTP_METHOD_HEAD;
    w->upgrade = rq->upgrade;
    w->client_keep = rq->keep_alive;
    w->client_11 = rq->minor == 1;
    w->req_body = rq->body;
    c->fc.protocol = w->is_connect ? "connect" : c->terminated ? "https" : "http";
    if (policy_host_normalize(w->in + rq->host.off, rq->host.len, &c->host, &why) < 0) {
        char msg[200];
        c->fc.host = NULL;
        snprintf(msg, sizeof(msg), "bad destination host: %s", why);
        http_refuse(c, 400, msg, 1, "bad destination host");
        return -1;
    }
    c->fc.host = c->host.name;
    c->fc.port = rq->port;
    if (!w->is_connect)
        note_url(c, rq, w->in);
    return 0;
}

/* The first request inside a terminated tunnel: the socket the CONNECT
 * dialed (held_fd, to held_addr) is its upstream when judged_on() allows
 * it and the origin has not closed it meanwhile (nothing can be readable
 * before our ClientHello but its EOF or an error), so the origin is dialed
 * once per tunnel. 1 when taken. */
static int use_held(struct http_conn *c)
{
    int fd = c->held_fd;
    char b;

    if (fd < 0)
        return 0;
    c->held_fd = -1;
    if (recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK) ||
        !judged_on(c, &c->held_addr, "the tunnel's own upstream connection")) {
        close(fd);
        return 0;
    }
    http_set_state(c, HTTP_ST_EGRESS);
    http_timer_set(c, TIMER_NONE, 0);
    http_tls_upstream_fd(c, fd, &c->held_addr);
    return 1;
}

/* The head is consumed: a tunnel or a new upstream goes through egress, a
 * request for the kept upstream's authority may reuse it. */
static void request_route(struct http_conn *c)
{
    struct http_work *w = c->w;

    http_client_hold(c); /* CONNECT too: early bytes wait for the dial (in w->in) */
    if (w->is_connect) {
        http_up_close(c, w->up); /* an idle upstream from an earlier request */
        http_start_egress(c);
        return;
    }
    w->reused = 0;
    if (can_reuse(c)) {
        w->reused = 1;
        http_start_exchange(c);
        return;
    }
    http_up_close(c, w->up); /* never reused across authorities */
    if (c->terminated && use_held(c))
        return;
    http_start_egress(c);
}

/* A complete head of end bytes at the start of w->in. */
void http_handle_head(struct http_conn *c, size_t end)
{
    struct http_work *w = c->w;
    static _Thread_local struct http_request rq;
    char *norm_head = NULL; /* the head with a normalised path (ambiguousRequestTarget) */
    int rc;

    http_timer_set(c, TIMER_NONE, 0);
    request_log_reset(c);
    if (c->overloaded) {
        http_reply_overloaded(c);
        return;
    }
    if (c->terminated && http_tls_head(c, &end) < 0)
        return; /* inside a terminated tunnel: the CONNECT target's request */
    if (!c->terminated && is_health_request(c, w->in, end)) {
        health_check(c, end);
        return;
    }
    if (request_parse(c, &rq, end) < 0)
        return;
    if (!c->terminated && !auth_ok(c, &rq, w->in)) {
        reply_auth_required(c, &rq, end);
        return;
    }
    if (request_options(c, &rq, end, &norm_head) < 0)
        return;
    if (request_rules_path(c, &rq, end, &norm_head) < 0) {
        free(norm_head);
        http_conn_close(c, "out of memory");
        return;
    }
    if (!w->is_connect) {
        const char *hb = norm_head != NULL ? norm_head : w->in;
        rc = request_upstream_head(c, &rq, hb);
        if (rc == 0)
            rc = keep_request_line(w, &rq, hb);
        free(norm_head);
        if (rc < 0) {
            http_conn_close(c, "out of memory");
            return;
        }
    }
    if (http_cred_request(c) < 0)
        return;
    http_consume_in(w, end);
    request_route(c);
}
