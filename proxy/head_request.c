/* proxy/head_request.c - request heads: the start line, the request
 * target (CONNECT authority form, absolute-form http://) and the whole
 * request head checked (head validator: proxy/proxy.h, proxy/head.c). */
#include "proxy/head_int.h"

#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Request targets                                                           */

/* Decimal port 1-65535 without sign or leading zeros. */
static int parse_port(const char *s, size_t len, uint16_t *port)
{
    unsigned long v = 0;

    if (len == 0 || len > 5 || s[0] == '0')
        return -1;
    for (size_t i = 0; i < len; i++) {
        if (!is_digit((unsigned char)s[i]))
            return -1;
        v = v * 10 + (unsigned long)(s[i] - '0');
    }
    if (v == 0 || v > 65535)
        return -1;
    *port = (uint16_t)v;
    return 0;
}

/* authority = host [":" port] at h[off..off+len). need_port: CONNECT. */
static int parse_authority(const char *h, size_t off, size_t len, int need_port,
                           struct http_request *r, const char **why)
{
    const char *a = h + off;
    size_t hs, he, p;

    if (len == 0) {
        *why = "empty authority";
        return 400;
    }
    for (size_t i = 0; i < len; i++) {
        if (a[i] == '@') {
            *why = "userinfo in the authority";
            return 400;
        }
    }
    if (a[0] == '[') {
        p = 1;
        while (p < len && a[p] != ']') {
            unsigned char ch = (unsigned char)a[p];
            if (ch == '%') {
                *why = "percent-encoding or zone id in the host";
                return 400;
            }
            if (!is_hex(ch) && ch != ':' && ch != '.') {
                *why = "invalid character in a bracketed IPv6 host";
                return 400;
            }
            p++;
        }
        if (p >= len) {
            *why = "unterminated '[' in the host";
            return 400;
        }
        /* brackets hold an IPv6 address only (RFC 3986 IP-literal): never
         * a dotted IPv4 spelling or a name made of hex letters */
        if (memchr(a + 1, ':', p - 1) == NULL) {
            *why = "brackets around something that is not an IPv6 address";
            return 400;
        }
        hs = 1;
        he = p;
        p++; /* past ']' */
        r->host_v6 = 1;
    } else {
        size_t ncolon = 0;
        for (size_t i = 0; i < len; i++)
            ncolon += a[i] == ':';
        if (ncolon > 1) {
            *why = "unbracketed IPv6 address or extra ':' in the authority";
            return 400;
        }
        p = 0;
        while (p < len && a[p] != ':') {
            unsigned char ch = (unsigned char)a[p];
            if (ch == '%') {
                *why = "percent-encoding in the host";
                return 400;
            }
            if (!is_alpha(ch) && !is_digit(ch) && ch != '-' && ch != '.' && ch != '_') {
                *why = ch >= 0x80 ? "non-ASCII byte in the host" : "invalid character in the host";
                return 400;
            }
            p++;
        }
        hs = 0;
        he = p;
        r->host_v6 = 0;
    }
    if (he == hs) {
        *why = "empty host";
        return 400;
    }
    r->host = mkspan(off + hs, he - hs);
    if (p == len) {
        if (need_port) {
            *why = "CONNECT target without a port";
            return 400;
        }
        r->port = 80;
        return 0;
    }
    if (a[p] != ':') {
        *why = "junk after the host";
        return 400;
    }
    p++;
    for (size_t i = p; i < len; i++) {
        if (a[i] == ':') {
            *why = "unbracketed IPv6 address or extra ':' in the authority";
            return 400;
        }
    }
    if (parse_port(a + p, len - p, &r->port) < 0) {
        *why = "bad port (1-65535, decimal, no sign or leading zeros)";
        return 400;
    }
    return 0;
}

static int parse_target(const char *h, size_t off, size_t len, struct http_request *r,
                        const char **why)
{
    const char *t = h + off;
    size_t a;

    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)t[i];
        if (ch <= 0x20 || ch >= 0x7f) {
            *why = "invalid byte in the request target";
            return 400;
        }
        if (ch == '#') {
            *why = "fragment in the request target";
            return 400;
        }
    }
    if (r->method == HTTP_METHOD_CONNECT) {
        if (memchr(t, '/', len) != NULL) {
            *why = "CONNECT needs an authority (host:port), not a URI";
            return 400;
        }
        r->path = mkspan(off + len, 0);
        return parse_authority(h, off, len, 1, r, why);
    }
    if (len >= 7 && ieq(t, 7, "http://")) {
        a = 7;
        while (a < len && t[a] != '/' && t[a] != '?')
            a++;
        r->path = mkspan(off + a, len - a);
        return parse_authority(h, off + 7, a - 7, 0, r, why);
    }
    if (len >= 8 && ieq(t, 8, "https://")) {
        *why = "https:// in a request line: TLS goes through CONNECT";
        return 400;
    }
    if (t[0] == '/') {
        *why = "origin-form request: this is a proxy, send an absolute URI (http://host/path)";
        return 400;
    }
    if (len == 1 && t[0] == '*') {
        *why = "asterisk-form request: this is a proxy";
        return 400;
    }
    for (size_t i = 0; i + 2 < len; i++) {
        if (t[i] == ':' && t[i + 1] == '/' && t[i + 2] == '/') {
            *why = "unsupported URI scheme (only http:// is forwarded)";
            return 400;
        }
    }
    *why = "authority-form target is only for CONNECT";
    return 400;
}

/* ------------------------------------------------------------------------ */
/* Methods                                                                   */

struct method_entry {
    const char *name;
    enum http_method m;
};

/* What llhttp parses for HTTP, except TRACE and PRI (405 / 400). */
static const struct method_entry methods[] = {
    {"GET", HTTP_METHOD_GET},         {"HEAD", HTTP_METHOD_HEAD},
    {"POST", HTTP_METHOD_POST},       {"PUT", HTTP_METHOD_PUT},
    {"DELETE", HTTP_METHOD_DELETE},   {"OPTIONS", HTTP_METHOD_OPTIONS},
    {"PATCH", HTTP_METHOD_PATCH},     {"CONNECT", HTTP_METHOD_CONNECT},
    {"COPY", HTTP_METHOD_OTHER},      {"LOCK", HTTP_METHOD_OTHER},
    {"MKCOL", HTTP_METHOD_OTHER},     {"MOVE", HTTP_METHOD_OTHER},
    {"PROPFIND", HTTP_METHOD_OTHER},  {"PROPPATCH", HTTP_METHOD_OTHER},
    {"SEARCH", HTTP_METHOD_OTHER},    {"UNLOCK", HTTP_METHOD_OTHER},
    {"BIND", HTTP_METHOD_OTHER},      {"REBIND", HTTP_METHOD_OTHER},
    {"UNBIND", HTTP_METHOD_OTHER},    {"ACL", HTTP_METHOD_OTHER},
    {"REPORT", HTTP_METHOD_OTHER},    {"MKACTIVITY", HTTP_METHOD_OTHER},
    {"CHECKOUT", HTTP_METHOD_OTHER},  {"MERGE", HTTP_METHOD_OTHER},
    {"M-SEARCH", HTTP_METHOD_OTHER},  {"NOTIFY", HTTP_METHOD_OTHER},
    {"SUBSCRIBE", HTTP_METHOD_OTHER}, {"UNSUBSCRIBE", HTTP_METHOD_OTHER},
    {"PURGE", HTTP_METHOD_OTHER},     {"MKCALENDAR", HTTP_METHOD_OTHER},
    {"LINK", HTTP_METHOD_OTHER},      {"UNLINK", HTTP_METHOD_OTHER},
    {"SOURCE", HTTP_METHOD_OTHER},
};

/* Methods are case-sensitive (RFC 9110 9.1). -1 when unknown. */
static int method_lookup(const char *s, size_t len, enum http_method *m)
{
    for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
        if (strlen(methods[i].name) == len && memcmp(methods[i].name, s, len) == 0) {
            *m = methods[i].m;
            return 0;
        }
    }
    return -1;
}


/* ------------------------------------------------------------------------ */
/* Requests                                                                  */

int http_request_parse(const char *h, size_t len, struct http_request *r, const char **why)
{
    struct head_fields hf;
    struct framing fr;
    size_t eol, sp1, sp2;
    int rc;

    memset(r, 0, offsetof(struct http_request, fields));
    memset(&hf, 0, sizeof(hf));
    if (!head_whole(h, len, why))
        return 400;

    /* request-line = method SP request-target SP HTTP-version */
    eol = head_line_end(h, len, 0);
    sp1 = 0;
    while (sp1 < eol && is_tchar((unsigned char)h[sp1]))
        sp1++;
    if (sp1 == 0 || sp1 >= eol || h[sp1] != ' ') {
        *why = "malformed request line";
        return 400;
    }
    sp2 = sp1 + 1;
    while (sp2 < eol && h[sp2] != ' ')
        sp2++;
    if (sp2 == sp1 + 1 || sp2 >= eol) {
        *why = "malformed request line";
        return 400;
    }
    rc = head_parse_version(h + sp2 + 1, eol - sp2 - 1, &r->minor, why);
    if (rc != 0)
        return rc;
    r->method_text = mkspan(0, sp1);
    if (method_lookup(h, sp1, &r->method) < 0) {
        *why = (sp1 == 5 && memcmp(h, "TRACE", 5) == 0) ? "TRACE is not forwarded by this proxy"
                                                        : "method not supported by this proxy";
        return 405;
    }
    rc = parse_target(h, sp1 + 1, sp2 - sp1 - 1, r, why);
    if (rc != 0)
        return rc;

    rc = head_parse_fields(h, len, eol + 2, r->fields, &r->nfields, why);
    if (rc == -2)
        return 431;
    if (rc < 0)
        return 400;
    if (head_scan_fields(h, r->fields, r->nfields, &hf, &fr, why) < 0)
        return 400;

    /* framing (RFC 9112 6.1-6.3) */
    if (fr.ncl > 0 && fr.nte > 0) {
        *why = "both Content-Length and Transfer-Encoding";
        return 400;
    }
    if (fr.ncl > 1) {
        *why = "more than one Content-Length";
        return 400;
    }
    if (fr.ncl == 1 && fr.bad_cl) {
        *why = "invalid Content-Length";
        return 400;
    }
    if (fr.nte > 0) {
        if (r->minor == 0) {
            *why = "Transfer-Encoding in an HTTP/1.0 request";
            return 400;
        }
        if (fr.te.bad || (fr.te.chunked != 0 && fr.te.chunked != fr.te.n)) {
            *why = "malformed Transfer-Encoding (chunked must be the last coding, once)";
            return 400;
        }
        if (fr.te.unknown) {
            *why = "unsupported transfer coding (only chunked)";
            return 501;
        }
        r->body = HTTP_BODY_CHUNKED;
    } else if (fr.ncl == 1 && fr.cl > 0) {
        r->body = HTTP_BODY_LENGTH;
        r->content_length = fr.cl;
    }
    if (fr.nhost > 1) {
        *why = "more than one Host";
        return 400;
    }
    if (fr.nauth > 1) {
        *why = "more than one Proxy-Authorization";
        return 400;
    }
    if (r->method == HTTP_METHOD_CONNECT && r->body != HTTP_BODY_NONE) {
        *why = "CONNECT with a body";
        return 400;
    }
    if (fr.nauth == 1) {
        r->has_auth = 1;
        r->auth = fr.auth;
    }
    r->expect_continue = fr.expect_continue != 0;
    r->keep_alive = r->minor == 1 && !hf.tok_close;
    r->upgrade = r->minor == 1 && fr.nupgrade > 0 && hf.tok_upgrade && r->body == HTTP_BODY_NONE &&
                 r->method != HTTP_METHOD_CONNECT;

    head_mark_drops(h, r->fields, r->nfields, &hf, r->upgrade);
    for (size_t i = 0; i < r->nfields; i++) {
        struct http_span name = r->fields[i].name;
        /* re-generated by http_request_build */
        if (span_ieq(h, name, "host") || span_ieq(h, name, "content-length"))
            r->fields[i].drop = 1;
    }
    return 0;
}


/* ------------------------------------------------------------------------ */
/* Requests inside a terminated tunnel                                       */

static void put_at(char *out, size_t cap, size_t *at, const char *s, size_t n)
{
    if (*at < cap)
        memcpy(out + *at, s, n <= cap - *at ? n : cap - *at);
    *at += n;
}

size_t http_target_for_tunnel(const char *head, size_t len, const char *authority, char *out,
                              size_t cap, const char **why)
{
    const char *eol = memchr(head, '\n', len), *sp1, *sp2;
    size_t at = 0, tlen;

    sp1 = eol != NULL ? memchr(head, ' ', (size_t)(eol - head)) : NULL;
    sp2 = sp1 != NULL ? memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1)) : NULL;
    if (sp1 == NULL || sp2 == NULL || sp1 == head) {
        *why = "malformed request line";
        return 0;
    }
    tlen = (size_t)(sp2 - sp1 - 1);
    if (tlen == 0 || !(sp1[1] == '/' || (tlen == 1 && sp1[1] == '*'))) {
        *why = "inside a terminated tunnel a request names a path (origin-form), not another "
               "host";
        return 0;
    }
    put_at(out, cap, &at, head, (size_t)(sp1 - head) + 1); /* "METHOD " */
    put_at(out, cap, &at, "http://", 7);
    put_at(out, cap, &at, authority, strlen(authority));
    if (sp1[1] == '/')
        put_at(out, cap, &at, sp1 + 1, tlen);
    put_at(out, cap, &at, sp2, len - (size_t)(sp2 - head)); /* " HTTP/1.x" and the fields */
    return at;
}
