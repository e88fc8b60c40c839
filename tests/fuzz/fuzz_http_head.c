/* tests/fuzz/fuzz_http_head.c - the HTTP request head path of the proxy.
 *
 * The input is the byte stream a client sends (a request head, maybe a body
 * or early tunnel bytes, maybe followed by the upstream's response head), or
 * one upstream response when it starts with "HTTP/". What the HTTP front
 * end (proxy/http_*.c) does with such bytes is replayed on the pure
 * functions of proxy/head*.c and llhttp:
 *   - http_head_end, fed whole, byte by byte and in pseudo-random chunks
 *     (each prefix in an exact-size heap block): the same verdict and end;
 *   - http_request_parse; for an accepted head, the llhttp cross-check
 *     the front end makes (the same framing in both parsers), the host through
 *     policy_host_normalize (idempotent) and policy_target_parse of the
 *     authority (same canonical host and port);
 *   - http_request_build as http_request.c calls it (length first, then an exact
 *     buffer; a short buffer is never overrun), and the rebuilt head turned
 *     back into absolute form re-parses to the same method, host, port, path
 *     and framing, and llhttp frames it the same way;
 *   - Basic credentials (http_basic_decode) when Proxy-Authorization is set;
 *   - the body bytes after the head through llhttp;
 *   - the response head after the request (or the whole input) through
 *     http_response_parse / http_response_build, whose output re-parses;
 *   - http_reply_build with text from the input: sluice's own answer always
 *     parses as one response head with the status asked for and a
 *     Content-Length that matches its body (no header injection).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <llhttp.h>

#include "fuzz.h"
#include "policy/policy.h"
#include "proxy/proxy.h"

/* llhttp side: what the front end's callbacks record, reduced to counters. */
struct ll_state {
    int msg_done;
    int skip_body; /* responses: an answer to HEAD */
    uint64_t body;
};

static int on_body(llhttp_t *p, const char *at, size_t len)
{
    struct ll_state *s = p->data;
    (void)at;
    s->body += len;
    return 0;
}

static int on_message_complete(llhttp_t *p)
{
    struct ll_state *s = p->data;
    s->msg_done = 1;
    return HPE_PAUSED;
}

static int on_resp_headers_complete(llhttp_t *p)
{
    struct ll_state *s = p->data;
    int st = p->status_code;
    return (s->skip_body || st < 200 || st == 204 || st == 304) ? 1 : 0;
}

static llhttp_settings_t req_settings;
static llhttp_settings_t resp_settings;

/* http_forward.c's http_llhttp_check_head: 1 when llhttp frames the head as head_request.c did. */
static int ll_agrees(llhttp_t *p, struct ll_state *s, llhttp_type_t type, const char *head,
                     size_t len, enum http_body body, uint64_t cl)
{
    llhttp_errno_t e;

    llhttp_init(p, type, type == HTTP_REQUEST ? &req_settings : &resp_settings);
    p->data = s;
    s->msg_done = 0;
    e = llhttp_execute(p, head, len);
    switch (body) {
    case HTTP_BODY_NONE:
        return e == HPE_PAUSED && s->msg_done && llhttp_get_error_pos(p) == head + len;
    case HTTP_BODY_LENGTH:
        return e == HPE_OK && !s->msg_done && (p->flags & F_CONTENT_LENGTH) &&
               !(p->flags & F_CHUNKED) && p->content_length == cl;
    case HTTP_BODY_CHUNKED:
        return e == HPE_OK && !s->msg_done && (p->flags & F_CHUNKED);
    case HTTP_BODY_EOF:
    default:
        return e == HPE_OK && !s->msg_done && llhttp_message_needs_eof(p);
    }
}

static int strict_llhttp(void)
{
    static int v = -1;
    if (v < 0) {
        const char *e = getenv("SLUICE_FUZZ_LLHTTP_STRICT");
        v = e != NULL && *e == '1';
    }
    return v;
}

/* http_head_end over buf[0..n) fed in the chunks chosen by mode; returns the
 * verdict and *end. mode 0: whole; 1: byte by byte; 2: random chunks, each
 * prefix copied to an exact-size block. */
static enum http_find find_end(const char *buf, size_t n, int mode, uint64_t *rng, size_t *end)
{
    size_t scan = 0, have = 0;
    const char *why = NULL;
    enum http_find f = HTTP_FIND_MORE;

    *end = 0;
    if (mode == 0) {
        f = http_head_end(buf, n, &scan, end, &why);
        FUZZ_CHECK(f != HTTP_FIND_BAD || why != NULL);
        return f;
    }
    while (have < n) {
        size_t step = mode == 1 ? 1 : 1 + (size_t)(fuzz_rand(rng) % 700);
        size_t old_scan = scan;
        have = have + step < n ? have + step : n;
        if (mode == 2) {
            char *p = fuzz_dup(buf, have, 0);
            f = http_head_end(p, have, &scan, end, &why);
            free(p);
        } else {
            f = http_head_end(buf, have, &scan, end, &why);
        }
        FUZZ_CHECK(scan >= old_scan && scan <= have);
        if (f == HTTP_FIND_BAD)
            FUZZ_CHECK(why != NULL);
        if (f != HTTP_FIND_MORE)
            return f;
    }
    if (n == 0)
        f = http_head_end(buf, 0, &scan, end, &why);
    return f;
}

static void check_span(struct http_span s, size_t len)
{
    FUZZ_CHECK(s.off <= len && s.len <= len - s.off);
}

/* Builds into a block of exactly cap bytes; the result must not depend on cap. */
static size_t build_req_capped(const char *head, const struct http_request *r, const char *auth,
                               int close, size_t cap, size_t want)
{
    char *o = fuzz_alloc(cap);
    size_t n = http_request_build(head, r, auth, close, o, cap);
    free(o);
    FUZZ_CHECK(n == want);
    return n;
}

/* sluice's own reply, with text from the input, parses as one response. */
static void check_reply(int status, const char *phrase, const char *text, uint64_t bits)
{
    static struct http_response rs;
    struct http_reply r;
    char *out = fuzz_alloc(HTTP_REPLY_MAX);
    size_t n, scan = 0, end = 0;
    const char *why = NULL;

    memset(&r, 0, sizeof(r));
    r.status = status;
    r.phrase = (bits & 1) ? text : phrase;
    r.error = (bits & 2) ? "http_request_denied" : NULL;
    r.details = (bits & 4) ? text : phrase;
    r.rcode = (bits & 8) ? text : NULL;
    r.body = (bits & 16) ? text : NULL;
    r.retry_after = (bits & 32) ? (unsigned)(bits >> 32) : 0;
    r.blocked = (bits >> 6) & 1;
    r.close = (bits >> 7) & 1;
    r.challenge = (bits >> 8) & 1;
    r.allow = (bits >> 9) & 1;
    n = http_reply_build(&r, out, HTTP_REPLY_MAX);
    FUZZ_CHECK(n > 0 && n <= HTTP_REPLY_MAX);
    FUZZ_CHECK(http_head_end(out, n, &scan, &end, &why) == HTTP_FIND_DONE);
    FUZZ_CHECK(http_response_parse(out, end, 0, &rs, &why) == 0);
    FUZZ_CHECK(rs.status == status);
    FUZZ_CHECK(rs.body == HTTP_BODY_LENGTH && rs.content_length == n - end);
    FUZZ_CHECK(memchr(out + end, '\n', n - end) == out + n - 1); /* one line */
    FUZZ_CHECK(rs.keep_alive == !r.close);
    /* too small a buffer: nothing, never a partial reply */
    FUZZ_CHECK(http_reply_build(&r, out, n - 1) == 0);
    free(out);
}

/* A response head resp[0..len): parse, build as http_forward.c would, re-parse. */
static void check_response(const char *resp, size_t len, int head_request, uint64_t bits)
{
    static struct http_response rs, rs2;
    static llhttp_t lp;
    struct ll_state ls;
    const char *why = NULL;
    size_t scan = 0, end = 0, n, n2;
    unsigned flags = 0;
    char *out, *h;
    int st;

    if (http_head_end(resp, len, &scan, &end, &why) != HTTP_FIND_DONE || end > len)
        return;
    h = fuzz_dup(resp, end, 0);
    st = http_response_parse(h, end, head_request, &rs, &why);
    if (st != 0) {
        FUZZ_CHECK(st == 502 && why != NULL);
        free(h);
        return;
    }
    FUZZ_CHECK(rs.status >= 100 && rs.status <= 999 && (rs.minor == 0 || rs.minor == 1));
    FUZZ_CHECK(rs.nfields <= HTTP_HEAD_MAX_FIELDS);
    check_span(rs.reason, end);
    for (size_t i = 0; i < rs.nfields; i++) {
        check_span(rs.fields[i].name, end);
        check_span(rs.fields[i].value, end);
    }
    memset(&ls, 0, sizeof(ls));
    ls.skip_body = head_request;
    (void)ll_agrees(&lp, &ls, HTTP_RESPONSE, h, end, rs.body, rs.content_length);

    if (rs.body == HTTP_BODY_CHUNKED || (rs.body == HTTP_BODY_EOF && (bits & 1)))
        flags |= HTTP_OUT_CHUNKED;
    if (rs.upgrade)
        flags |= HTTP_OUT_UPGRADE;
    else if (!rs.keep_alive || (bits & 2))
        flags |= HTTP_OUT_CLOSE;
    n = http_response_build(h, &rs, flags, NULL, 0);
    out = fuzz_alloc(n);
    n2 = http_response_build(h, &rs, flags, out, n);
    FUZZ_CHECK(n2 == n);
    {
        size_t cap = n > 0 ? (size_t)(bits >> 8) % n : 0;
        char *small = fuzz_alloc(cap);
        FUZZ_CHECK(http_response_build(h, &rs, flags, small, cap) == n);
        free(small);
    }
    /* what the client gets is one well-formed head, framed the same way */
    scan = 0;
    FUZZ_CHECK(http_head_end(out, n, &scan, &end, &why) == HTTP_FIND_DONE && end == n);
    st = http_response_parse(out, n, head_request, &rs2, &why);
    FUZZ_CHECK(st == 0);
    FUZZ_CHECK(rs2.status == rs.status && rs2.minor == 1);
    FUZZ_CHECK(rs2.content_length == rs.content_length);
    if (flags & HTTP_OUT_CHUNKED)
        FUZZ_CHECK(rs2.body == HTTP_BODY_CHUNKED || rs2.body == HTTP_BODY_NONE);
    else if (rs.body != HTTP_BODY_EOF)
        FUZZ_CHECK(rs2.body == rs.body);
    FUZZ_CHECK(rs2.upgrade == rs.upgrade);
    free(out);
    free(h);
}

/* Inside a terminated tunnel: the head's target goes to the CONNECT target
 * (http_target_for_tunnel) or is refused; the length is the same with and
 * without room, nothing is written past cap, and a rewritten head that
 * parses names exactly the tunnel's target. */
static void check_tunnel_target(const char *head, size_t len)
{
    static const char auth[] = "t.example:8443";
    static struct http_request rq;
    const char *why = NULL;
    size_t n = http_target_for_tunnel(head, len, auth, NULL, 0, &why), m;
    char *out;

    if (n == 0) {
        FUZZ_CHECK(why != NULL && *why != '\0');
        return;
    }
    FUZZ_CHECK(n <= len + 7 + sizeof(auth) - 1);
    out = malloc(n + 1);
    FUZZ_CHECK(out != NULL);
    out[n] = '#';
    m = http_target_for_tunnel(head, len, auth, out, n, &why);
    FUZZ_CHECK(m == n && out[n] == '#');
    if (http_request_parse(out, n, &rq, &why) == 0) {
        FUZZ_CHECK(rq.port == 8443 && rq.host.len == 9 && memcmp(out + rq.host.off, "t.example", 9) == 0);
        FUZZ_CHECK(rq.method != HTTP_METHOD_CONNECT);
    }
    free(out);
}

/* A request head accepted by http_request_parse: everything the front end does next. */
static void check_request(const char *h, size_t end, const struct http_request *rq,
                          const char *rest, size_t restlen, uint64_t bits)
{
    static struct http_request rq2;
    static struct policy_host host, host2, host3;
    static llhttp_t lp;
    struct ll_state ls;
    char authority[POLICY_HOST_MAX + 16], target[POLICY_HOST_MAX + 32];
    const char *why = NULL;
    uint16_t port = 0;
    int agrees, rc;

    FUZZ_CHECK(rq->minor == 0 || rq->minor == 1);
    FUZZ_CHECK(rq->port != 0);
    FUZZ_CHECK(rq->nfields <= HTTP_HEAD_MAX_FIELDS);
    check_span(rq->method_text, end);
    check_span(rq->host, end);
    check_span(rq->path, end);
    check_span(rq->auth, end);
    for (size_t i = 0; i < rq->nfields; i++) {
        check_span(rq->fields[i].name, end);
        check_span(rq->fields[i].value, end);
    }
    FUZZ_CHECK(rq->host.len > 0);
    if (rq->upgrade)
        FUZZ_CHECK(rq->minor == 1 && rq->body == HTTP_BODY_NONE);
    if (rq->method == HTTP_METHOD_CONNECT)
        FUZZ_CHECK(rq->body == HTTP_BODY_NONE && rq->path.len == 0);
    if (rq->body == HTTP_BODY_LENGTH)
        FUZZ_CHECK(rq->content_length > 0);
    if (rq->minor == 0)
        FUZZ_CHECK(!rq->keep_alive && rq->body != HTTP_BODY_CHUNKED);

    memset(&ls, 0, sizeof(ls));
    agrees = ll_agrees(&lp, &ls, HTTP_REQUEST, h, end, rq->body, rq->content_length);
    if (!agrees && strict_llhttp()) {
        fprintf(stderr, "llhttp frames this head differently (the front end answers 400)\n");
        abort();
    }
    /* the body (or early tunnel bytes) after the head */
    if (agrees && rq->body != HTTP_BODY_NONE && restlen > 0) {
        llhttp_errno_t e = llhttp_execute(&lp, rest, restlen);
        if (rq->body == HTTP_BODY_LENGTH)
            FUZZ_CHECK(ls.body <= rq->content_length);
        if (e == HPE_OK)
            (void)llhttp_finish(&lp);
    }

    if (rq->has_auth) {
        size_t cap = (size_t)(bits >> 16) % 600, ulen = 0, plen = 0;
        uint8_t *out = (uint8_t *)fuzz_alloc(cap);
        if (http_basic_decode(h + rq->auth.off, rq->auth.len, out, cap, &ulen, &plen) == 0)
            FUZZ_CHECK(ulen + 1 + plen <= cap);
        free(out);
    }

    rc = policy_host_normalize(h + rq->host.off, rq->host.len, &host, &why);
    if (rc != 0) {
        FUZZ_CHECK(why != NULL);
        return;
    }
    FUZZ_CHECK(host.len == strlen(host.name) && host.len > 0 && host.len <= POLICY_HOST_MAX);
    FUZZ_CHECK(policy_host_normalize(host.name, host.len, &host2, &why) == 0);
    FUZZ_CHECK(host2.kind == host.kind && strcmp(host2.name, host.name) == 0);

    /* the authority, as http_request.c writes it */
    if (host.kind == POLICY_HOST_IPV6)
        snprintf(authority, sizeof(authority), "[%s]", host.name);
    else
        snprintf(authority, sizeof(authority), "%s", host.name);
    snprintf(target, sizeof(target), "%s:%u", authority, (unsigned)rq->port);
    if (rq->port != 80) {
        size_t al = strlen(authority);
        snprintf(authority + al, sizeof(authority) - al, ":%u", (unsigned)rq->port);
    }
    rc = policy_target_parse(target, 1, &host3, &port, &why);
    FUZZ_CHECK(rc == 0 && port == rq->port && host3.kind == host.kind &&
               strcmp(host3.name, host.name) == 0);

    if (rq->method == HTTP_METHOD_CONNECT)
        return;

    /* the head sent upstream */
    {
        int close = !rq->keep_alive;
        size_t n = http_request_build(h, rq, authority, close, NULL, 0), n2, end2, scan = 0;
        char *out = fuzz_alloc(n), *abs;
        size_t sp, tl, alen = strlen(authority), mlen = rq->method_text.len;
        const char *t;

        n2 = http_request_build(h, rq, authority, close, out, n);
        FUZZ_CHECK(n2 == n);
        (void)build_req_capped(h, rq, authority, close, n > 0 ? (size_t)(bits >> 24) % n : 0, n);
        FUZZ_CHECK(http_head_end(out, n, &scan, &end2, &why) == HTTP_FIND_DONE && end2 == n);
        FUZZ_CHECK(n > mlen + 1 && memcmp(out, h + rq->method_text.off, mlen) == 0);

        /* back to absolute form: METHOD http://authority<origin-form> ... */
        t = out + mlen + 1;
        sp = (size_t)((const char *)memchr(t, ' ', n - mlen - 1) - t);
        tl = (sp == 1 && t[0] == '*') ? 0 : sp; /* OPTIONS * came from an empty path */
        abs = fuzz_alloc(n + alen + 8);
        {
            size_t k = 0;
            memcpy(abs + k, out, mlen + 1), k += mlen + 1;
            memcpy(abs + k, "http://", 7), k += 7;
            memcpy(abs + k, authority, alen), k += alen;
            memcpy(abs + k, t, tl), k += tl;
            memcpy(abs + k, t + sp, n - (size_t)(t + sp - out)), k += n - (size_t)(t + sp - out);
            rc = http_request_parse(abs, k, &rq2, &why);
            if (rc != 0) {
                fprintf(stderr, "rebuilt head refused (%d %s):\n%.*s\n", rc, why, (int)k, abs);
                abort();
            }
            FUZZ_CHECK(rq2.method == rq->method && rq2.minor == 1);
            FUZZ_CHECK(rq2.method_text.len == mlen);
            FUZZ_CHECK(rq2.port == rq->port);
            FUZZ_CHECK(rq2.body == rq->body && rq2.content_length == rq->content_length);
            FUZZ_CHECK(rq2.upgrade == rq->upgrade);
            FUZZ_CHECK(rq2.has_auth == 0);
            FUZZ_CHECK(rq2.expect_continue == rq->expect_continue);
            FUZZ_CHECK(policy_host_normalize(abs + rq2.host.off, rq2.host.len, &host2, &why) == 0);
            FUZZ_CHECK(host2.kind == host.kind && strcmp(host2.name, host.name) == 0);
            /* same path, but "" -> "/" and "?q" -> "/?q" */
            if (rq->path.len > 0 && h[rq->path.off] != '?')
                FUZZ_CHECK(rq2.path.len == rq->path.len &&
                           memcmp(abs + rq2.path.off, h + rq->path.off, rq->path.len) == 0);
            else if (rq->path.len > 0)
                FUZZ_CHECK(rq2.path.len == rq->path.len + 1 &&
                           memcmp(abs + rq2.path.off + 1, h + rq->path.off, rq->path.len) == 0);
            /* a strict parser upstream frames it as sluice does */
            if (agrees)
                FUZZ_CHECK(ll_agrees(&lp, &ls, HTTP_REQUEST, out, n, rq->body, rq->content_length));
        }
        free(abs);
        free(out);
    }
}

/* The first occurrence of lit in buf[0..len), or NULL. */
static const char *find(const char *buf, size_t len, const char *lit)
{
    size_t ll = strlen(lit);
    for (size_t i = 0; i + ll <= len; i++)
        if (memcmp(buf + i, lit, ll) == 0)
            return buf + i;
    return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct http_request rq;
    const char *in = (const char *)data;
    uint64_t bits = fuzz_hash(data, size), rng = bits;
    enum http_find f0, f;
    size_t end0 = 0, end = 0;
    const char *why = NULL;
    char *head, text[201];
    int st;

    if (req_settings.on_message_complete == NULL) {
        llhttp_settings_init(&req_settings);
        req_settings.on_body = on_body;
        req_settings.on_message_complete = on_message_complete;
        llhttp_settings_init(&resp_settings);
        resp_settings.on_headers_complete = on_resp_headers_complete;
        resp_settings.on_body = on_body;
        resp_settings.on_message_complete = on_message_complete;
    }
    if (size > 128 * 1024)
        return 0;

    f0 = find_end(in, size, 0, &rng, &end0);
    for (int mode = 1; mode <= 2; mode++) {
        f = find_end(in, size, mode, &rng, &end);
        FUZZ_CHECK(f == f0);
        if (f == HTTP_FIND_DONE)
            FUZZ_CHECK(end == end0);
    }

    /* some text from the input for sluice's own reply */
    {
        size_t tl = size < 200 ? size : 200;
        memcpy(text, in, tl);
        text[tl] = '\0';
    }

    if (f0 != HTTP_FIND_DONE) {
        check_reply(400, why != NULL ? why : "bad request", text, bits);
        return 0;
    }
    FUZZ_CHECK(end0 >= 4 && end0 <= size);

    if (size >= 5 && memcmp(in, "HTTP/", 5) == 0) {
        check_response(in, size, (int)(bits & 1), bits >> 1);
        return 0;
    }

    head = fuzz_dup(in, end0, 0);
    check_tunnel_target(head, end0);
    st = http_request_parse(head, end0, &rq, &why);
    if (st != 0) {
        FUZZ_CHECK(why != NULL && *why != '\0');
        FUZZ_CHECK(st == 400 || st == 405 || st == 431 || st == 501 || st == 505);
        check_reply(st, why, text, bits);
    } else {
        check_request(head, end0, &rq, in + end0, size - end0, bits);
        /* the upstream's answer, when the input carries one after the head */
        if (size - end0 >= 5) {
            const char *r = find(in + end0, size - end0, "HTTP/1.");
            if (r != NULL)
                check_response(r, size - (size_t)(r - in), rq.method == HTTP_METHOD_HEAD, bits);
        }
        check_reply(403, "Forbidden", text, bits);
    }
    free(head);
    return 0;
}
