/* tests/proxy/test_http_head.c - the HTTP head validator (proxy/head.c),
 * table-driven: delimiting, request targets (authority forms, IPv6, ports,
 * userinfo, schemes, percent-encoding), framing (CL+TE, double CL, codings),
 * field syntax (NUL, obs-fold, bare LF, whitespace before ':'), header
 * filtering and the rewritten heads, responses, sluice's own replies and
 * Basic credentials. Each row states what must come out, so each can fail.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "proxy/proxy.h"

#define ROWS(a) (sizeof(a) / sizeof((a)[0]))

/* The input, copied to an exact-size heap buffer so ASan sees overreads. */
static char *dup_exact(const char *s, size_t len)
{
    char *p = malloc(len > 0 ? len : 1);
    assert_non_null(p);
    memcpy(p, s, len);
    return p;
}

/* ------------------------------------------------------------------------ */
/* http_head_end                                                             */

struct end_row {
    const char *in;
    size_t len; /* 0: strlen */
    enum http_find want;
    size_t end;
};

static const struct end_row end_rows[] = {
    {"GET http://a/ HTTP/1.1\r\n\r\n", 0, HTTP_FIND_DONE, 26},
    {"GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\nGET", 0, HTTP_FIND_DONE, 35},
    {"GET http://a/ HTTP/1.1\r\nHost: a\r\n", 0, HTTP_FIND_MORE, 0},
    {"GET http://a/ HTTP/1.1\r\nHost: a\r\n\r", 0, HTTP_FIND_MORE, 0},
    {"GET http://a/ HTTP/1.1\nHost: a\n\n", 0, HTTP_FIND_BAD, 0},
    {"GET http://a/ HTTP/1.1\r\nHost: a\n\r\n", 0, HTTP_FIND_BAD, 0},
    {"GET http://a/ HTTP/1.1\r\nX: a\rb\r\n\r\n", 0, HTTP_FIND_BAD, 0},
    {"GET http://a/ HTTP/1.1\r\nX: a\0b\r\n\r\n", 33, HTTP_FIND_BAD, 0},
    {"", 0, HTTP_FIND_MORE, 0},
};

static void test_head_end(void **state)
{
    (void)state;
    for (size_t i = 0; i < ROWS(end_rows); i++) {
        const struct end_row *r = &end_rows[i];
        size_t len = r->len ? r->len : strlen(r->in), scan = 0, end = 0;
        const char *why = NULL;
        char *b = dup_exact(r->in, len);
        enum http_find f = http_head_end(b, len, &scan, &end, &why);

        if (f != r->want)
            fail_msg("row %zu: got %d want %d", i, (int)f, (int)r->want);
        if (f == HTTP_FIND_DONE && end != r->end)
            fail_msg("row %zu: end %zu want %zu", i, end, r->end);
        if (f == HTTP_FIND_BAD)
            assert_non_null(why);
        free(b);
    }
}

/* Fed one byte at a time, the result and the end are the same. */
static void test_head_end_incremental(void **state)
{
    const char *in = "POST http://a/ HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi";
    size_t scan = 0, end = 0, len = strlen(in), n;
    const char *why = NULL;
    enum http_find f = HTTP_FIND_MORE;

    (void)state;
    for (n = 1; n <= len; n++) {
        char *b = dup_exact(in, n);
        f = http_head_end(b, n, &scan, &end, &why);
        free(b);
        if (f != HTTP_FIND_MORE)
            break;
    }
    assert_int_equal(f, HTTP_FIND_DONE);
    assert_int_equal(end, len - 2);
    assert_int_equal(n, len - 2);
}

/* ------------------------------------------------------------------------ */
/* http_request_parse                                                        */

struct req_row {
    const char *in;
    int status;       /* 0 or the refusal */
    const char *host; /* expected raw host (status 0) */
    unsigned port;
    enum http_body body;
    int keep_alive;
    int upgrade;
    const char *why; /* substring of the refusal reason, or NULL */
};

#define H11 " HTTP/1.1\r\n"
#define END "\r\n"

static const struct req_row req_rows[] = {
    /* targets */
    {"GET http://example.com/x?y=1" H11 "Host: example.com" END END, 0, "example.com", 80,
     HTTP_BODY_NONE, 1, 0, NULL},
    {"GET http://example.com:8080" H11 END, 0, "example.com", 8080, HTTP_BODY_NONE, 1, 0, NULL},
    {"GET HTTP://Example.COM:65535/" H11 END, 0, "Example.COM", 65535, HTTP_BODY_NONE, 1, 0, NULL},
    {"GET http://[::1]:8080/" H11 END, 0, "::1", 8080, HTTP_BODY_NONE, 1, 0, NULL},
    {"GET http://[2001:db8::1]/" H11 END, 0, "2001:db8::1", 80, HTTP_BODY_NONE, 1, 0, NULL},
    {"GET http://127.0.0.1:1/" H11 END, 0, "127.0.0.1", 1, HTTP_BODY_NONE, 1, 0, NULL},
    {"GET http://under_score.test/" H11 END, 0, "under_score.test", 80, HTTP_BODY_NONE, 1, 0, NULL},
    {"CONNECT example.com:443" H11 "Host: example.com:443" END END, 0, "example.com", 443,
     HTTP_BODY_NONE, 1, 0, NULL},
    {"CONNECT [::1]:443" H11 END, 0, "::1", 443, HTTP_BODY_NONE, 1, 0, NULL},
    {"CONNECT example.com" H11 END, 400, NULL, 0, 0, 0, 0, "without a port"},
    {"CONNECT example.com:443/x" H11 END, 400, NULL, 0, 0, 0, 0, "authority"},
    {"CONNECT http://example.com:443/" H11 END, 400, NULL, 0, 0, 0, 0, "authority"},
    {"CONNECT ::1:443" H11 END, 400, NULL, 0, 0, 0, 0, "unbracketed"},
    {"GET http://example.com:0/" H11 END, 400, NULL, 0, 0, 0, 0, "bad port"},
    {"GET http://example.com:65536/" H11 END, 400, NULL, 0, 0, 0, 0, "bad port"},
    {"GET http://example.com:99999999999/" H11 END, 400, NULL, 0, 0, 0, 0, "bad port"},
    {"GET http://example.com:+80/" H11 END, 400, NULL, 0, 0, 0, 0, "bad port"},
    {"GET http://example.com:0080/" H11 END, 400, NULL, 0, 0, 0, 0, "bad port"},
    {"GET http://example.com:-1/" H11 END, 400, NULL, 0, 0, 0, 0, "bad port"},
    {"GET http://example.com:/" H11 END, 400, NULL, 0, 0, 0, 0, "bad port"},
    {"GET http://example.com:80x/" H11 END, 400, NULL, 0, 0, 0, 0, "bad port"},
    {"CONNECT example.com:0" H11 END, 400, NULL, 0, 0, 0, 0, "bad port"},
    {"GET http://user:pw@example.com/" H11 END, 400, NULL, 0, 0, 0, 0, "userinfo"},
    {"GET http://@example.com/" H11 END, 400, NULL, 0, 0, 0, 0, "userinfo"},
    {"CONNECT user@example.com:443" H11 END, 400, NULL, 0, 0, 0, 0, "userinfo"},
    {"GET http://ex%61mple.com/" H11 END, 400, NULL, 0, 0, 0, 0, "percent"},
    {"GET http://[fe80::1%25eth0]/" H11 END, 400, NULL, 0, 0, 0, 0, "zone"},
    {"GET http://[::1/" H11 END, 400, NULL, 0, 0, 0, 0, "unterminated"},
    /* brackets hold an IPv6 address only: not a dotted IPv4 or a hex name */
    {"GET http://[127.0.0.1]/" H11 END, 400, NULL, 0, 0, 0, 0, "not an IPv6"},
    {"CONNECT [deadbeef]:443" H11 "Host: [deadbeef]:443\r\n" END, 400, NULL, 0, 0, 0, 0,
     "not an IPv6"},
    {"GET http://[::1]x/" H11 END, 400, NULL, 0, 0, 0, 0, "junk"},
    {"GET http://[v1.x]/" H11 END, 400, NULL, 0, 0, 0, 0, "IPv6"},
    {"GET http://exa$mple.com/" H11 END, 400, NULL, 0, 0, 0, 0, "invalid character"},
    {"GET http://\xc3\xa9.com/" H11 END, 400, NULL, 0, 0, 0, 0, "request target"},
    {"GET http:///path" H11 END, 400, NULL, 0, 0, 0, 0, "empty"},
    {"GET http://:80/" H11 END, 400, NULL, 0, 0, 0, 0, "empty host"},
    {"GET https://example.com/" H11 END, 400, NULL, 0, 0, 0, 0, "CONNECT"},
    {"GET ftp://example.com/" H11 END, 400, NULL, 0, 0, 0, 0, "scheme"},
    {"GET ws://example.com/" H11 END, 400, NULL, 0, 0, 0, 0, "scheme"},
    {"GET /index.html" H11 "Host: example.com" END END, 400, NULL, 0, 0, 0, 0, "origin-form"},
    {"OPTIONS *" H11 END, 400, NULL, 0, 0, 0, 0, "asterisk"},
    {"GET example.com:80" H11 END, 400, NULL, 0, 0, 0, 0, "only for CONNECT"},
    {"GET http://example.com/#frag" H11 END, 400, NULL, 0, 0, 0, 0, "fragment"},
    /* request line */
    {"GET  http://example.com/" H11 END, 400, NULL, 0, 0, 0, 0, "request line"},
    {"GET http://example.com/  HTTP/1.1\r\n\r\n", 400, NULL, 0, 0, 0, 0, "version"},
    {"GET http://example.com/ HTTP/1.1 \r\n\r\n", 400, NULL, 0, 0, 0, 0, "version"},
    {"GET http://example.com/ http/1.1\r\n\r\n", 400, NULL, 0, 0, 0, 0, "version"},
    {"GET http://example.com/ HTTP/2.0\r\n\r\n", 505, NULL, 0, 0, 0, 0, "not supported"},
    {"GET http://example.com/ HTTP/1.2\r\n\r\n", 505, NULL, 0, 0, 0, 0, "not supported"},
    {"GET http://example.com/ HTTP/1.0\r\n\r\n", 0, "example.com", 80, HTTP_BODY_NONE, 0, 0, NULL},
    {"TRACE http://example.com/" H11 END, 405, NULL, 0, 0, 0, 0, "TRACE"},
    {"FOO http://example.com/" H11 END, 405, NULL, 0, 0, 0, 0, "method"},
    {"get http://example.com/" H11 END, 405, NULL, 0, 0, 0, 0, "method"},
    {"PROPFIND http://example.com/" H11 END, 0, "example.com", 80, HTTP_BODY_NONE, 1, 0, NULL},
    {"G\x01T http://example.com/" H11 END, 400, NULL, 0, 0, 0, 0, "request line"},
    {"\r\nGET http://example.com/" H11 END, 400, NULL, 0, 0, 0, 0, "complete head"},
    /* field syntax */
    {"GET http://a/" H11 "X: a\r\n b" END END, 400, NULL, 0, 0, 0, 0, "obs-fold"},
    {"GET http://a/" H11 "X: a\r\n\tb" END END, 400, NULL, 0, 0, 0, 0, "obs-fold"},
    {"GET http://a/" H11 "Host : a" END END, 400, NULL, 0, 0, 0, 0, "colon"},
    {"GET http://a/" H11 "X-(y): a" END END, 400, NULL, 0, 0, 0, 0, "header name"},
    {"GET http://a/" H11 ": a" END END, 400, NULL, 0, 0, 0, 0, "header name"},
    {"GET http://a/" H11 "X a" END END, 400, NULL, 0, 0, 0, 0, "header name"},
    {"GET http://a/" H11 "X: a\001b" END END, 400, NULL, 0, 0, 0, 0, "control"},
    {"GET http://a/" H11 "X: a\x7f" END END, 400, NULL, 0, 0, 0, 0, "control"},
    {"GET http://a/" H11 "X: caf\xc3\xa9" END END, 0, "a", 80, HTTP_BODY_NONE, 1, 0, NULL},
    {"GET http://a/" H11 "X:\t a \t" END END, 0, "a", 80, HTTP_BODY_NONE, 1, 0, NULL},
    {"GET http://a/" H11 "Host: a" END "Host: b" END END, 400, NULL, 0, 0, 0, 0, "Host"},
    /* framing */
    {"POST http://a/" H11 "Content-Length: 5" END END, 0, "a", 80, HTTP_BODY_LENGTH, 1, 0, NULL},
    {"POST http://a/" H11 "Content-Length: 0" END END, 0, "a", 80, HTTP_BODY_NONE, 1, 0, NULL},
    {"POST http://a/" H11 "Transfer-Encoding: chunked" END END, 0, "a", 80, HTTP_BODY_CHUNKED, 1, 0,
     NULL},
    {"POST http://a/" H11 "Transfer-Encoding: CHUNKED" END END, 0, "a", 80, HTTP_BODY_CHUNKED, 1, 0,
     NULL},
    {"POST http://a/" H11 "Content-Length: 5" END "Transfer-Encoding: chunked" END END, 400, NULL,
     0, 0, 0, 0, "both"},
    {"POST http://a/" H11 "Transfer-Encoding: chunked" END "Content-Length: 5" END END, 400, NULL,
     0, 0, 0, 0, "both"},
    {"POST http://a/" H11 "Content-Length: 5" END "Content-Length: 6" END END, 400, NULL, 0, 0, 0,
     0, "more than one"},
    {"POST http://a/" H11 "Content-Length: 5" END "Content-Length: 5" END END, 400, NULL, 0, 0, 0,
     0, "more than one"},
    {"POST http://a/" H11 "Content-Length: 5, 5" END END, 400, NULL, 0, 0, 0, 0, "invalid"},
    {"POST http://a/" H11 "Content-Length: +5" END END, 400, NULL, 0, 0, 0, 0, "invalid"},
    {"POST http://a/" H11 "Content-Length: 5 5" END END, 400, NULL, 0, 0, 0, 0, "invalid"},
    {"POST http://a/" H11 "Content-Length: 0x10" END END, 400, NULL, 0, 0, 0, 0, "invalid"},
    {"POST http://a/" H11 "Content-Length: 1234567890123456789" END END, 400, NULL, 0, 0, 0, 0,
     "invalid"},
    {"POST http://a/" H11 "Transfer-Encoding: gzip, chunked" END END, 501, NULL, 0, 0, 0, 0,
     "coding"},
    {"POST http://a/" H11 "Transfer-Encoding: identity" END END, 501, NULL, 0, 0, 0, 0, "coding"},
    {"POST http://a/" H11 "Transfer-Encoding: chunked, gzip" END END, 400, NULL, 0, 0, 0, 0,
     "last"},
    {"POST http://a/" H11 "Transfer-Encoding: chunked" END "Transfer-Encoding: chunked" END END,
     400, NULL, 0, 0, 0, 0, "once"},
    {"POST http://a/" H11 "Transfer-Encoding: chunked;x=1" END END, 501, NULL, 0, 0, 0, 0,
     "coding"},
    {"POST http://a/" H11 "Transfer-Encoding:" END END, 400, NULL, 0, 0, 0, 0, "Transfer"},
    {"POST http://a/ HTTP/1.0\r\nTransfer-Encoding: chunked" END END, 400, NULL, 0, 0, 0, 0,
     "HTTP/1.0"},
    {"CONNECT a:443" H11 "Content-Length: 3" END END, 400, NULL, 0, 0, 0, 0, "body"},
    {"CONNECT a:443" H11 "Content-Length: 0" END END, 0, "a", 443, HTTP_BODY_NONE, 1, 0, NULL},
    /* connection management */
    {"GET http://a/" H11 "Connection: close" END END, 0, "a", 80, HTTP_BODY_NONE, 0, 0, NULL},
    {"GET http://a/" H11 "Proxy-Connection: Close" END END, 0, "a", 80, HTTP_BODY_NONE, 0, 0, NULL},
    {"GET http://a/" H11 "Connection: a b" END END, 400, NULL, 0, 0, 0, 0, "Connection"},
    {"GET http://a/" H11 "Upgrade: websocket" END "Connection: Upgrade" END END, 0, "a", 80,
     HTTP_BODY_NONE, 1, 1, NULL},
    {"GET http://a/" H11 "Upgrade: websocket" END END, 0, "a", 80, HTTP_BODY_NONE, 1, 0, NULL},
    {"POST http://a/" H11 "Upgrade: h2c" END "Connection: upgrade" END "Content-Length: 1" END END,
     0, "a", 80, HTTP_BODY_LENGTH, 1, 0, NULL},
    {"GET http://a/" H11 "Proxy-Authorization: Basic a" END "Proxy-Authorization: Basic b" END END,
     400, NULL, 0, 0, 0, 0, "Proxy-Authorization"},
};

/* http_target_for_tunnel: a request inside a terminated tunnel goes to the
 * CONNECT target; anything naming another host, or malformed, is refused. */
static void test_target_for_tunnel(void **state)
{
    static const struct {
        const char *in, *want; /* want NULL: refused */
    } rows[] = {
        {"GET /a?b HTTP/1.1\r\nHost: x\r\n\r\n",
         "GET http://t.example:443/a?b HTTP/1.1\r\nHost: x\r\n\r\n"},
        {"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n",
         "OPTIONS http://t.example:443 HTTP/1.1\r\nHost: x\r\n\r\n"},
        {"POST / HTTP/1.0\r\n\r\n", "POST http://t.example:443/ HTTP/1.0\r\n\r\n"},
        {"GET http://evil.example/ HTTP/1.1\r\n\r\n", NULL},
        {"GET https://evil.example/ HTTP/1.1\r\n\r\n", NULL},
        {"CONNECT evil.example:443 HTTP/1.1\r\n\r\n", NULL},
        {"GET //evil.example/ HTTP/1.1\r\n\r\n",
         "GET http://t.example:443//evil.example/ HTTP/1.1\r\n\r\n"},
        {"GET *x HTTP/1.1\r\n\r\n", NULL},
        {"GET  HTTP/1.1\r\n\r\n", NULL},
        {" /a HTTP/1.1\r\n\r\n", NULL},
        {"GET /a\r\n\r\n", NULL},
        {"GET\r\n /a HTTP/1.1\r\n\r\n", NULL},
        {"", NULL},
    };
    static struct http_request rq;
    char out[512];

    (void)state;
    for (size_t i = 0; i < ROWS(rows); i++) {
        const char *why = NULL;
        size_t len = strlen(rows[i].in);
        char *b = dup_exact(rows[i].in, len);
        size_t n = http_target_for_tunnel(b, len, "t.example:443", out, sizeof(out), &why);

        if (rows[i].want == NULL) {
            if (n != 0)
                fail_msg("row %zu: accepted '%.*s'", i, (int)n, out);
            assert_non_null(why);
        } else {
            if (n != strlen(rows[i].want) || memcmp(out, rows[i].want, n) != 0)
                fail_msg("row %zu: got '%.*s'", i, (int)(n < sizeof(out) ? n : 0), out);
            /* a short buffer: the length, and nothing written past it */
            out[3] = '#';
            assert_int_equal(http_target_for_tunnel(b, len, "t.example:443", out, 3, &why), n);
            assert_int_equal(out[3], '#');
            if (http_request_parse(out, n, &rq, &why) == 0) {
                assert_int_equal(rq.port, 443);
                assert_memory_equal(out + rq.host.off, "t.example", 9);
            }
        }
        free(b);
    }
}

static void test_request_parse(void **state)
{
    static struct http_request rq;

    (void)state;
    for (size_t i = 0; i < ROWS(req_rows); i++) {
        const struct req_row *r = &req_rows[i];
        size_t len = strlen(r->in);
        char *b = dup_exact(r->in, len);
        const char *why = NULL;
        int st = http_request_parse(b, len, &rq, &why);

        if (st != r->status)
            fail_msg("row %zu (%s): status %d want %d (%s)", i, r->in, st, r->status,
                     why != NULL ? why : "");
        if (st != 0) {
            assert_non_null(why);
            if (r->why != NULL && strstr(why, r->why) == NULL)
                fail_msg("row %zu: reason '%s' lacks '%s'", i, why, r->why);
        } else {
            if (rq.host.len != strlen(r->host) || memcmp(b + rq.host.off, r->host, rq.host.len))
                fail_msg("row %zu: host '%.*s' want '%s'", i, (int)rq.host.len, b + rq.host.off,
                         r->host);
            if (rq.port != r->port)
                fail_msg("row %zu: port %u want %u", i, rq.port, r->port);
            if (rq.body != r->body)
                fail_msg("row %zu: body %d want %d", i, (int)rq.body, (int)r->body);
            if ((int)rq.keep_alive != r->keep_alive)
                fail_msg("row %zu: keep_alive %u", i, rq.keep_alive);
            if ((int)rq.upgrade != r->upgrade)
                fail_msg("row %zu: upgrade %u", i, rq.upgrade);
        }
        free(b);
    }
}

/* Every refusal of a single byte flip must be a 4xx/5xx with a reason, never
 * a crash: a small deterministic mutation run over a valid head (the fuzz
 * harness does this at scale). */
static void test_request_mutations(void **state)
{
    static struct http_request rq;
    const char *base = "POST http://example.com:8080/p?q=1 HTTP/1.1\r\nHost: example.com\r\n"
                       "Connection: keep-alive, X-Drop\r\nX-Drop: 1\r\nContent-Length: 3\r\n\r\n";
    size_t len = strlen(base);
    static const unsigned char flips[] = {0x00, '\n', '\r', ' ', ':', '%', '@', 0xff, '\t', '0'};

    (void)state;
    for (size_t pos = 0; pos < len; pos++) {
        for (size_t k = 0; k < sizeof(flips); k++) {
            char *b = dup_exact(base, len);
            const char *why = NULL;
            int st;

            b[pos] = (char)flips[k];
            st = http_request_parse(b, len, &rq, &why);
            if (st != 0) {
                assert_true(st >= 400 && st <= 505);
                assert_non_null(why);
            } else {
                assert_true(rq.host.off + rq.host.len <= len);
                assert_true(rq.nfields <= HTTP_HEAD_MAX_FIELDS);
            }
            free(b);
        }
    }
}

static void test_too_many_fields(void **state)
{
    static struct http_request rq;
    static char buf[16384];
    size_t n = 0;
    const char *why = NULL;

    (void)state;
    n += (size_t)snprintf(buf + n, sizeof(buf) - n, "GET http://a/ HTTP/1.1\r\n");
    for (int i = 0; i <= HTTP_HEAD_MAX_FIELDS; i++)
        n += (size_t)snprintf(buf + n, sizeof(buf) - n, "X%d: y\r\n", i);
    n += (size_t)snprintf(buf + n, sizeof(buf) - n, "\r\n");
    assert_int_equal(http_request_parse(buf, n, &rq, &why), 431);
}

/* ------------------------------------------------------------------------ */
/* http_request_build: header filtering and the Host rewrite                 */

struct build_row {
    const char *in;
    const char *authority;
    int close;
    const char *want;
};

static const struct build_row build_rows[] = {
    {"GET http://Example.com:80/a/b?c=d HTTP/1.1\r\nHost: evil.test\r\nUser-Agent: t\r\n"
     "Accept: */*\r\nProxy-Connection: Keep-Alive\r\nProxy-Authorization: Basic eDp5\r\n\r\n",
     "example.com", 0,
     "GET /a/b?c=d HTTP/1.1\r\nHost: example.com\r\nUser-Agent: t\r\nAccept: */*\r\n\r\n"},
    {"GET http://a.test HTTP/1.1\r\n\r\n", "a.test", 0, "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n"},
    {"GET http://a.test?x=1 HTTP/1.1\r\n\r\n", "a.test", 0,
     "GET /?x=1 HTTP/1.1\r\nHost: a.test\r\n\r\n"},
    {"OPTIONS http://a.test:8080 HTTP/1.1\r\n\r\n", "a.test:8080", 0,
     "OPTIONS * HTTP/1.1\r\nHost: a.test:8080\r\n\r\n"},
    {"GET http://a.test/ HTTP/1.0\r\nX:y\r\n\r\n", "a.test", 1,
     "GET / HTTP/1.1\r\nHost: a.test\r\nX: y\r\nConnection: close\r\n\r\n"},
    /* every hop-by-hop field, and the ones Connection names */
    {"GET http://a.test/ HTTP/1.1\r\nConnection: close, X-Secret , x-other\r\nKeep-Alive: 5\r\n"
     "TE: trailers\r\nTrailer: X\r\nUpgrade: foo\r\nProxy-Authenticate: x\r\nX-Secret: s\r\n"
     "X-OTHER: o\r\nX-Keep: k\r\n\r\n",
     "a.test", 1, "GET / HTTP/1.1\r\nHost: a.test\r\nX-Keep: k\r\nConnection: close\r\n\r\n"},
    /* framing is re-generated: a Connection token cannot remove it */
    {"POST http://a.test/ HTTP/1.1\r\nConnection: content-length\r\nContent-Length:  0012\r\n\r\n",
     "a.test", 0, "POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 12\r\n\r\n"},
    {"POST http://a.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\nConnection: "
     "transfer-encoding\r\n\r\n",
     "a.test", 0, "POST / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n"},
    {"GET http://[::1]:81/ws HTTP/1.1\r\nUpgrade: websocket\r\nConnection: keep-alive, Upgrade\r\n"
     "Sec-WebSocket-Key: k\r\n\r\n",
     "[::1]:81", 0,
     "GET /ws HTTP/1.1\r\nHost: [::1]:81\r\nUpgrade: websocket\r\nSec-WebSocket-Key: k\r\n"
     "Connection: Upgrade\r\n\r\n"},
    {"PUT http://a.test/ HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n", "a.test",
     0, "PUT / HTTP/1.1\r\nHost: a.test\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n"},
};

static void test_request_build(void **state)
{
    static struct http_request rq;
    char out[1024];

    (void)state;
    for (size_t i = 0; i < ROWS(build_rows); i++) {
        const struct build_row *r = &build_rows[i];
        size_t len = strlen(r->in), n;
        char *b = dup_exact(r->in, len);
        const char *why = NULL;
        int st = http_request_parse(b, len, &rq, &why);

        if (st != 0)
            fail_msg("row %zu: parse %d (%s)", i, st, why);
        n = http_request_build(b, &rq, r->authority, r->close, out, sizeof(out));
        assert_true(n < sizeof(out));
        if (n != strlen(r->want) || memcmp(out, r->want, n) != 0)
            fail_msg("row %zu:\n got: %.*s\nwant: %s", i, (int)n, out, r->want);
        /* too small a buffer: the length is still reported, nothing overflows */
        assert_int_equal(http_request_build(b, &rq, r->authority, r->close, out, 5), n);
        free(b);
    }
}

/* ------------------------------------------------------------------------ */
/* Responses                                                                 */

struct resp_row {
    const char *in;
    int head_request;
    int status; /* parse result */
    int code;
    enum http_body body;
    int keep_alive;
    int upgrade;
    unsigned flags;   /* for the build */
    const char *want; /* built head, or NULL */
};

static const struct resp_row resp_rows[] = {
    {"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: keep-alive, X-H\r\nX-H: 1\r\n"
     "Keep-Alive: timeout=5\r\nServer: s\r\n\r\n",
     0, 0, 200, HTTP_BODY_LENGTH, 1, 0, 0,
     "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nServer: s\r\n\r\n"},
    {"HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\n", 0, 0, 200, HTTP_BODY_LENGTH, 0, 0,
     HTTP_OUT_CLOSE, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\n"},
    {"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 5\r\n\r\n", 0, 0, 200,
     HTTP_BODY_LENGTH, 1, 0, 0, NULL},
    {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", 0, 0, 200, HTTP_BODY_CHUNKED, 1, 0,
     HTTP_OUT_CHUNKED, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"},
    {"HTTP/1.1 200 OK\r\n\r\n", 0, 0, 200, HTTP_BODY_EOF, 0, 0, HTTP_OUT_CHUNKED,
     "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"},
    {"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", 1, 0, 200, HTTP_BODY_NONE, 1, 0, 0,
     "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n"},
    {"HTTP/1.1 204 No Content\r\n\r\n", 0, 0, 204, HTTP_BODY_NONE, 1, 0, 0, NULL},
    {"HTTP/1.1 304 Not Modified\r\nContent-Length: 7\r\n\r\n", 0, 0, 304, HTTP_BODY_NONE, 1, 0, 0,
     NULL},
    {"HTTP/1.1 100 Continue\r\n\r\n", 0, 0, 100, HTTP_BODY_NONE, 1, 0, 0,
     "HTTP/1.1 100 Continue\r\n\r\n"},
    {"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
     "Sec-WebSocket-Accept: x\r\n\r\n",
     0, 0, 101, HTTP_BODY_NONE, 1, 1, HTTP_OUT_UPGRADE,
     "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: x\r\n"
     "Connection: Upgrade\r\n\r\n"},
    {"HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n", 0, 0, 200, HTTP_BODY_NONE, 1, 0, 0,
     "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"},
    {"HTTP/1.1 407 Auth\r\nProxy-Authenticate: Basic\r\nContent-Length: 0\r\n\r\n", 0, 0, 407,
     HTTP_BODY_NONE, 1, 0, 0, "HTTP/1.1 407 Auth\r\nContent-Length: 0\r\n\r\n"},
    {"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", 0, 502, 0, 0, 0,
     0, 0, NULL},
    {"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 0, 502, 0, 0, 0, 0, 0,
     NULL},
    {"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", 0, 502, 0, 0, 0, 0, 0, NULL},
    {"HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n", 0, 502, 0, 0, 0, 0, 0, NULL},
    {"HTTP/1.1 2000 OK\r\n\r\n", 0, 502, 0, 0, 0, 0, 0, NULL},
    {"HTTP/1.1 099 OK\r\n\r\n", 0, 502, 0, 0, 0, 0, 0, NULL},
    {"HTTP/2 200 OK\r\n\r\n", 0, 502, 0, 0, 0, 0, 0, NULL},
    {"ICY 200 OK\r\n\r\n", 0, 502, 0, 0, 0, 0, 0, NULL},
};

static void test_response(void **state)
{
    static struct http_response rs;
    char out[1024];

    (void)state;
    for (size_t i = 0; i < ROWS(resp_rows); i++) {
        const struct resp_row *r = &resp_rows[i];
        size_t len = strlen(r->in), n;
        char *b = dup_exact(r->in, len);
        const char *why = NULL;
        int st = http_response_parse(b, len, r->head_request, &rs, &why);

        if (st != r->status)
            fail_msg("row %zu: status %d want %d (%s)", i, st, r->status, why ? why : "");
        if (st == 0) {
            if (rs.status != r->code || rs.body != r->body || (int)rs.keep_alive != r->keep_alive ||
                (int)rs.upgrade != r->upgrade)
                fail_msg("row %zu: code %d body %d ka %u up %u", i, rs.status, (int)rs.body,
                         rs.keep_alive, rs.upgrade);
            if (r->want != NULL) {
                n = http_response_build(b, &rs, r->flags, out, sizeof(out));
                if (n != strlen(r->want) || memcmp(out, r->want, n) != 0)
                    fail_msg("row %zu:\n got: %.*s\nwant: %s", i, (int)n, out, r->want);
            }
        } else {
            assert_non_null(why);
        }
        free(b);
    }
}

/* ------------------------------------------------------------------------ */
/* sluice's replies                                                          */

static void test_reply_denied(void **state)
{
    struct http_reply r;
    char out[HTTP_REPLY_MAX];
    size_t n;

    (void)state;
    memset(&r, 0, sizeof(r));
    r.status = 403;
    r.phrase = "'denied.test' is in \"deniedDomains\"\x01\xff";
    r.error = "http_request_denied";
    r.details = "'denied.test' is in \"deniedDomains\"\\";
    r.body = "sluice: denied.test:80 blocked: no rule\r\nInjected: yes";
    r.blocked = 1;
    n = http_reply_build(&r, out, sizeof(out));
    assert_true(n > 0 && n < sizeof(out));
    out[n] = '\0';
    assert_non_null(strstr(out, "HTTP/1.1 403 'denied.test' is in \"deniedDomains\"??\r\n"));
    assert_non_null(strstr(out, "\r\nProxy-Status: sluice; error=http_request_denied; details=\""
                                "'denied.test' is in \\\"deniedDomains\\\"\\\\\"\r\n"));
    assert_non_null(strstr(out, "\r\nX-Proxy-Error: blocked-by-allowlist\r\n"));
    assert_non_null(strstr(out, "\r\nConnection: keep-alive\r\n"));
    assert_null(strstr(out, "\r\nInjected"));
    assert_non_null(
        strstr(out, "\r\n\r\nsluice: denied.test:80 blocked: no rule??Injected: yes\n"));
    assert_non_null(strstr(out, "Content-Length: 55\r\n"));
}

static void test_reply_others(void **state)
{
    struct http_reply r;
    char out[HTTP_REPLY_MAX];
    size_t n;

    (void)state;
    memset(&r, 0, sizeof(r));
    r.status = 407;
    r.challenge = 1;
    n = http_reply_build(&r, out, sizeof(out));
    out[n] = '\0';
    assert_non_null(strstr(out, "HTTP/1.1 407 Proxy Authentication Required\r\n"));
    assert_non_null(strstr(out, "\r\nProxy-Authenticate: Basic realm=\"sluice\"\r\n"));
    assert_null(strstr(out, "X-Proxy-Error"));
    assert_non_null(strstr(out, "\r\n\r\n407 Proxy Authentication Required\n"));

    memset(&r, 0, sizeof(r));
    r.status = 503;
    r.retry_after = 1;
    r.close = 1;
    r.error = "connection_limit_reached";
    n = http_reply_build(&r, out, sizeof(out));
    out[n] = '\0';
    assert_non_null(strstr(out, "HTTP/1.1 503 Service Unavailable\r\n"));
    assert_non_null(strstr(out, "\r\nRetry-After: 1\r\n"));
    assert_non_null(strstr(out, "\r\nConnection: close\r\n"));

    memset(&r, 0, sizeof(r));
    r.status = 502;
    r.error = "dns_error";
    r.rcode = "NXDOMAIN";
    n = http_reply_build(&r, out, sizeof(out));
    out[n] = '\0';
    assert_non_null(strstr(out, "Proxy-Status: sluice; error=dns_error; rcode=\"NXDOMAIN\"\r\n"));

    assert_int_equal(http_reply_build(&r, out, 10), 0);
    r.status = 42;
    assert_int_equal(http_reply_build(&r, out, sizeof(out)), 0);
}

/* ------------------------------------------------------------------------ */
/* Basic credentials                                                         */

struct basic_row {
    const char *in;
    int rc;
    const char *user, *pass;
};

static const struct basic_row basic_rows[] = {
    {"Basic YWxpY2U6czNjcmV0IHB3", 0, "alice", "s3cret pw"},
    {"basic   YWxpY2U6czNjcmV0IHB3", 0, "alice", "s3cret pw"},
    {"Basic YTpiOmM=", 0, "a", "b:c"},
    {"Basic OnB3", 0, "", "pw"},
    {"Basic dTo=", 0, "u", ""},
    {"Basic YWxpY2U=", -1, NULL, NULL},            /* no ':' */
    {"Basic YWxpY2U6czNjcmV0IHB", -1, NULL, NULL}, /* length not a multiple of 4 */
    {"Basic YW=pY2U6", -1, NULL, NULL},            /* padding inside */
    {"Basic YWxp*2U6", -1, NULL, NULL},
    {"Bearer YWxpY2U6czNjcmV0IHB3", -1, NULL, NULL},
    {"Basic", -1, NULL, NULL},
    {"BasicYWxpY2U6czNjcmV0IHB3", -1, NULL, NULL},
};

static void test_basic(void **state)
{
    uint8_t out[64];

    (void)state;
    for (size_t i = 0; i < ROWS(basic_rows); i++) {
        const struct basic_row *r = &basic_rows[i];
        size_t ul = 0, pl = 0, len = strlen(r->in);
        char *b = dup_exact(r->in, len);
        int rc = http_basic_decode(b, len, out, sizeof(out), &ul, &pl);

        if (rc != r->rc)
            fail_msg("row %zu: rc %d want %d", i, rc, r->rc);
        if (rc == 0) {
            assert_int_equal(ul, strlen(r->user));
            assert_int_equal(pl, strlen(r->pass));
            assert_memory_equal(out, r->user, ul);
            assert_memory_equal(out + ul + 1, r->pass, pl);
        }
        free(b);
    }
    /* too small an output buffer */
    {
        size_t ul, pl;
        assert_int_equal(http_basic_decode("Basic YWxpY2U6czNjcmV0IHB3", 26, out, 4, &ul, &pl), -1);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_head_end),        cmocka_unit_test(test_head_end_incremental),
        cmocka_unit_test(test_request_parse),   cmocka_unit_test(test_request_mutations),
        cmocka_unit_test(test_too_many_fields), cmocka_unit_test(test_request_build),
        cmocka_unit_test(test_target_for_tunnel),
        cmocka_unit_test(test_response),        cmocka_unit_test(test_reply_denied),
        cmocka_unit_test(test_reply_others),    cmocka_unit_test(test_basic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
