/* proxy/head.c - the HTTP head validator and rewriter (style.md R11).
 *
 * Pure code: no I/O, no allocation, no locale. Everything the session needs
 * to know about a request or a response that can be decided from the bytes
 * of its head is decided here, so it can be tested and fuzzed on its own;
 * llhttp then frames the bodies (proxy/http.c cross-checks that llhttp saw
 * the same head and the same framing).
 *
 * The grammar is RFC 9112 read strictly: CRLF only, single spaces in the
 * start line, no whitespace before a colon, no obs-fold, no control bytes in
 * values, one unambiguous framing. Offsets are uint32_t: a head is never
 * near 4 GiB (the session caps it at proxy.limits.maxHeadBytes <= 1 MiB).
 */
#include "proxy/proxy.h"

#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Character classes (ASCII, locale-free)                                    */

static int is_digit(unsigned char ch)
{
    return ch >= '0' && ch <= '9';
}

static int is_alpha(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
}

static int is_hex(unsigned char ch)
{
    return is_digit(ch) || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F');
}

/* RFC 9110 tchar */
static int is_tchar(unsigned char ch)
{
    if (is_digit(ch) || is_alpha(ch))
        return 1;
    return ch != '\0' && strchr("!#$%&'*+-.^_`|~", ch) != NULL;
}

static unsigned char lower(unsigned char ch)
{
    return (ch >= 'A' && ch <= 'Z') ? (unsigned char)(ch + 32) : ch;
}

/* Case-insensitive comparison of n bytes of a with the literal b. */
static int ieq(const char *a, size_t n, const char *b)
{
    size_t bl = strlen(b);

    if (n != bl)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (lower((unsigned char)a[i]) != lower((unsigned char)b[i]))
            return 0;
    return 1;
}

static int span_ieq(const char *buf, struct http_span s, const char *lit)
{
    return ieq(buf + s.off, s.len, lit);
}

static int spans_ieq(const char *buf, struct http_span a, struct http_span b)
{
    if (a.len != b.len)
        return 0;
    for (uint32_t i = 0; i < a.len; i++)
        if (lower((unsigned char)buf[a.off + i]) != lower((unsigned char)buf[b.off + i]))
            return 0;
    return 1;
}

static struct http_span mkspan(size_t off, size_t len)
{
    struct http_span s;

    s.off = (uint32_t)off;
    s.len = (uint32_t)len;
    return s;
}

/* ------------------------------------------------------------------------ */
/* Delimiting                                                                */

enum http_find http_head_end(const char *buf, size_t len, size_t *scan, size_t *end,
                             const char **why)
{
    size_t i = *scan;

    for (; i < len; i++) {
        unsigned char ch = (unsigned char)buf[i];

        if (ch == '\0') {
            *why = "NUL byte in the head";
            return HTTP_FIND_BAD;
        }
        if (ch == '\n') {
            *why = "bare LF in the head (lines must end with CRLF)";
            return HTTP_FIND_BAD;
        }
        if (ch != '\r')
            continue;
        if (i + 1 >= len)
            break; /* the LF is not here yet: look at this CR again */
        if (buf[i + 1] != '\n') {
            *why = "CR not followed by LF in the head";
            return HTTP_FIND_BAD;
        }
        if (i >= 2 && buf[i - 2] == '\r' && buf[i - 1] == '\n') {
            *end = i + 2;
            *scan = i + 2;
            return HTTP_FIND_DONE;
        }
        i++; /* past the LF */
    }
    *scan = i;
    return HTTP_FIND_MORE;
}

/* 1 when h[0..len) is exactly one head as http_head_end delimits it (so
 * every line below ends with CRLF and no NUL is inside). */
static int whole_head(const char *h, size_t len, const char **why)
{
    size_t scan = 0, end = 0;
    enum http_find f;

    if (len < 4 || len > UINT32_MAX) {
        *why = "empty or oversized head";
        return 0;
    }
    f = http_head_end(h, len, &scan, &end, why);
    if (f == HTTP_FIND_BAD)
        return 0;
    if (f != HTTP_FIND_DONE || end != len || h[0] == '\r') {
        *why = "not a complete head";
        return 0;
    }
    return 1;
}

/* ------------------------------------------------------------------------ */
/* Lines and fields                                                          */

/* The end of the line starting at off (the offset of its CR). The head was
 * delimited by http_head_end, so every line ends with CRLF. */
static size_t line_end(const char *h, size_t len, size_t off)
{
    while (off < len && h[off] != '\r')
        off++;
    return off;
}

struct head_fields {
    size_t n;
    struct http_field *f;
    /* Connection / Proxy-Connection tokens */
    size_t ntok;
    struct http_span tok[HTTP_CONN_TOKENS_MAX];
    unsigned tok_close : 1, tok_keep_alive : 1, tok_upgrade : 1;
};

/* Parses the field lines from off (just after the start line's CRLF) to the
 * empty line. Returns 0, -1 (malformed, *why) or -2 (too many fields). */
static int parse_fields(const char *h, size_t len, size_t off, struct http_field *out, size_t *nout,
                        const char **why)
{
    size_t n = 0;

    while (off < len) {
        size_t eol = line_end(h, len, off), p = off, vs, ve;

        if (eol == off) /* the empty line */
            break;
        if (h[off] == ' ' || h[off] == '\t') {
            *why = "obsolete line folding (obs-fold) in a header";
            return -1;
        }
        while (p < eol && is_tchar((unsigned char)h[p]))
            p++;
        if (p == off) {
            *why = "empty or invalid header name";
            return -1;
        }
        if (p >= eol || h[p] != ':') {
            *why = (h[p] == ' ' || h[p] == '\t') ? "whitespace between a header name and its colon"
                                                 : "invalid character in a header name";
            return -1;
        }
        vs = p + 1;
        while (vs < eol && (h[vs] == ' ' || h[vs] == '\t'))
            vs++;
        ve = eol;
        while (ve > vs && (h[ve - 1] == ' ' || h[ve - 1] == '\t'))
            ve--;
        for (size_t i = vs; i < ve; i++) {
            unsigned char ch = (unsigned char)h[i];
            if ((ch < 0x20 && ch != '\t') || ch == 0x7f) {
                *why = "control character in a header value";
                return -1;
            }
        }
        if (n == HTTP_HEAD_MAX_FIELDS) {
            *why = "too many header fields";
            return -2;
        }
        out[n].name = mkspan(off, p - off);
        out[n].value = mkspan(vs, ve - vs);
        out[n].drop = 0;
        n++;
        off = eol + 2;
    }
    *nout = n;
    return 0;
}

/* Splits a comma-separated list value and calls fn for each element (OWS
 * trimmed). Empty elements are skipped (RFC 9110 5.6.1). Returns the first
 * non-zero fn result, or 0. */
typedef int (*list_fn)(const char *h, struct http_span el, void *arg);

static int for_each_element(const char *h, struct http_span v, list_fn fn, void *arg)
{
    size_t i = v.off, end = (size_t)v.off + v.len;

    while (i <= end) {
        size_t s = i, e;
        int rc;

        while (i < end && h[i] != ',')
            i++;
        e = i;
        while (s < e && (h[s] == ' ' || h[s] == '\t'))
            s++;
        while (e > s && (h[e - 1] == ' ' || h[e - 1] == '\t'))
            e--;
        if (e > s) {
            rc = fn(h, mkspan(s, e - s), arg);
            if (rc != 0)
                return rc;
        }
        i++; /* past the comma (or end) */
    }
    return 0;
}

static int add_conn_token(const char *h, struct http_span el, void *arg)
{
    struct head_fields *hf = arg;

    for (uint32_t i = 0; i < el.len; i++)
        if (!is_tchar((unsigned char)h[el.off + i]))
            return -1;
    if (span_ieq(h, el, "close"))
        hf->tok_close = 1;
    else if (span_ieq(h, el, "keep-alive"))
        hf->tok_keep_alive = 1;
    else if (span_ieq(h, el, "upgrade"))
        hf->tok_upgrade = 1;
    if (hf->ntok == HTTP_CONN_TOKENS_MAX)
        return -2;
    hf->tok[hf->ntok++] = el;
    return 0;
}

struct te_state {
    int n;       /* codings seen */
    int chunked; /* position of chunked + 1, 0 none */
    int unknown; /* a coding other than chunked */
    int bad;     /* malformed element */
};

static int add_te(const char *h, struct http_span el, void *arg)
{
    struct te_state *t = arg;
    uint32_t i = 0;

    while (i < el.len && is_tchar((unsigned char)h[el.off + i]))
        i++;
    if (i == 0) {
        t->bad = 1;
        return 0;
    }
    t->n++;
    if (i == el.len && span_ieq(h, el, "chunked")) {
        if (t->chunked != 0)
            t->bad = 1; /* chunked twice */
        t->chunked = t->n;
    } else {
        t->unknown = 1; /* gzip, deflate, parameters, ... */
    }
    return 0;
}

/* Content-Length: 1*DIGIT, at most 18 digits (llhttp's uint64 never
 * overflows then). */
static int parse_length(const char *h, struct http_span v, uint64_t *out)
{
    uint64_t n = 0;

    if (v.len == 0 || v.len > 18)
        return -1;
    for (uint32_t i = 0; i < v.len; i++) {
        unsigned char ch = (unsigned char)h[v.off + i];
        if (!is_digit(ch))
            return -1;
        n = n * 10 + (uint64_t)(ch - '0');
    }
    *out = n;
    return 0;
}

/* Framing and connection fields shared by requests and responses. */
struct framing {
    int ncl;
    uint64_t cl;
    int bad_cl;
    int nte;
    struct te_state te;
    int nupgrade;
    int nhost;
    int nauth;
    int expect_continue;
    struct http_span auth;
};

static int is_hop_by_hop(const char *h, struct http_span name)
{
    static const char *const hop[] = {
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "proxy-authenticate",
        "proxy-authorization",
    };

    for (size_t i = 0; i < sizeof(hop) / sizeof(hop[0]); i++)
        if (span_ieq(h, name, hop[i]))
            return 1;
    return 0;
}

/* One pass over the fields: framing, Connection tokens, the special ones.
 * Returns 0, or -1 with *why. */
static int scan_fields(const char *h, struct http_field *f, size_t n, struct head_fields *hf,
                       struct framing *fr, const char **why)
{
    memset(fr, 0, sizeof(*fr));
    for (size_t i = 0; i < n; i++) {
        struct http_span name = f[i].name, v = f[i].value;

        if (span_ieq(h, name, "content-length")) {
            fr->ncl++;
            if (parse_length(h, v, &fr->cl) < 0)
                fr->bad_cl = 1;
        } else if (span_ieq(h, name, "transfer-encoding")) {
            fr->nte++;
            (void)for_each_element(h, v, add_te, &fr->te);
            if (v.len == 0)
                fr->te.bad = 1;
        } else if (span_ieq(h, name, "connection") || span_ieq(h, name, "proxy-connection")) {
            int rc = for_each_element(h, v, add_conn_token, hf);
            if (rc == -2) {
                *why = "too many Connection tokens";
                return -1;
            }
            if (rc != 0) {
                *why = "invalid token in Connection";
                return -1;
            }
        } else if (span_ieq(h, name, "upgrade")) {
            fr->nupgrade++;
        } else if (span_ieq(h, name, "host")) {
            fr->nhost++;
        } else if (span_ieq(h, name, "proxy-authorization")) {
            fr->nauth++;
            fr->auth = v;
        } else if (span_ieq(h, name, "expect")) {
            if (span_ieq(h, v, "100-continue"))
                fr->expect_continue = 1;
        }
    }
    return 0;
}

/* Drops the hop-by-hop fields and those named in Connection, except the
 * ones listed in keep (framing and Host are handled by the caller). */
static void mark_drops(const char *h, struct http_field *f, size_t n, const struct head_fields *hf,
                       int keep_upgrade)
{
    for (size_t i = 0; i < n; i++) {
        struct http_span name = f[i].name;

        if (span_ieq(h, name, "content-length"))
            continue; /* framing: never dropped by a Connection token */
        if (keep_upgrade && span_ieq(h, name, "upgrade"))
            continue;
        if (is_hop_by_hop(h, name)) {
            f[i].drop = 1;
            continue;
        }
        for (size_t t = 0; t < hf->ntok; t++)
            if (spans_ieq(h, name, hf->tok[t]))
                f[i].drop = 1;
    }
}

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

/* "HTTP/1.0" or "HTTP/1.1": 0 with *minor; another HTTP/D.D: 505; else 400. */
static int parse_version(const char *s, size_t len, int *minor, const char **why)
{
    if (len != 8 || memcmp(s, "HTTP/", 5) != 0 || !is_digit((unsigned char)s[5]) || s[6] != '.' ||
        !is_digit((unsigned char)s[7])) {
        *why = "malformed HTTP version";
        return 400;
    }
    if (s[5] != '1' || (s[7] != '0' && s[7] != '1')) {
        *why = "HTTP version not supported (HTTP/1.0 and HTTP/1.1 only)";
        return 505;
    }
    *minor = s[7] - '0';
    return 0;
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
    if (!whole_head(h, len, why))
        return 400;

    /* request-line = method SP request-target SP HTTP-version */
    eol = line_end(h, len, 0);
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
    rc = parse_version(h + sp2 + 1, eol - sp2 - 1, &r->minor, why);
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

    rc = parse_fields(h, len, eol + 2, r->fields, &r->nfields, why);
    if (rc == -2)
        return 431;
    if (rc < 0)
        return 400;
    if (scan_fields(h, r->fields, r->nfields, &hf, &fr, why) < 0)
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

    mark_drops(h, r->fields, r->nfields, &hf, r->upgrade);
    for (size_t i = 0; i < r->nfields; i++) {
        struct http_span name = r->fields[i].name;
        /* re-generated by http_request_build */
        if (span_ieq(h, name, "host") || span_ieq(h, name, "content-length"))
            r->fields[i].drop = 1;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Writing heads                                                             */

struct writer {
    char *p;
    size_t cap, len;
};

static void put(struct writer *w, const char *s, size_t n)
{
    if (w->len < w->cap) {
        size_t room = w->cap - w->len;
        memcpy(w->p + w->len, s, n < room ? n : room);
    }
    w->len += n;
}

static void puts_(struct writer *w, const char *s)
{
    put(w, s, strlen(s));
}

static void put_span(struct writer *w, const char *h, struct http_span s)
{
    put(w, h + s.off, s.len);
}

static void put_u64(struct writer *w, uint64_t v)
{
    char d[24];
    size_t n = 0;

    do {
        d[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v > 0);
    while (n > 0)
        put(w, &d[--n], 1);
}

static void put_fields(struct writer *w, const char *h, const struct http_field *f, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (f[i].drop)
            continue;
        put_span(w, h, f[i].name);
        puts_(w, ": ");
        put_span(w, h, f[i].value);
        puts_(w, "\r\n");
    }
}

size_t http_request_build(const char *h, const struct http_request *r, const char *authority,
                          int close, char *out, size_t cap)
{
    struct writer w = {out, cap, 0};

    put_span(&w, h, r->method_text);
    puts_(&w, " ");
    if (r->path.len == 0) {
        puts_(&w, r->method == HTTP_METHOD_OPTIONS ? "*" : "/");
    } else {
        if (h[r->path.off] == '?')
            puts_(&w, "/");
        put_span(&w, h, r->path);
    }
    puts_(&w, " HTTP/1.1\r\nHost: ");
    puts_(&w, authority);
    puts_(&w, "\r\n");
    put_fields(&w, h, r->fields, r->nfields);
    if (r->body == HTTP_BODY_LENGTH) {
        puts_(&w, "Content-Length: ");
        put_u64(&w, r->content_length);
        puts_(&w, "\r\n");
    } else if (r->body == HTTP_BODY_CHUNKED) {
        puts_(&w, "Transfer-Encoding: chunked\r\n");
    }
    if (r->upgrade)
        puts_(&w, "Connection: Upgrade\r\n");
    else if (close)
        puts_(&w, "Connection: close\r\n");
    puts_(&w, "\r\n");
    return w.len;
}

/* ------------------------------------------------------------------------ */
/* Responses                                                                 */

int http_response_parse(const char *h, size_t len, int head_request, struct http_response *r,
                        const char **why)
{
    struct head_fields hf;
    struct framing fr;
    size_t eol, p;
    int rc, minor = 0;

    memset(r, 0, offsetof(struct http_response, fields));
    memset(&hf, 0, sizeof(hf));
    if (!whole_head(h, len, why))
        return 502;
    /* status-line = HTTP-version SP 3DIGIT SP [reason]; "HTTP/1.1 200" without the
     * second SP is accepted (seen in the wild; nothing ambiguous). */
    eol = line_end(h, len, 0);
    if (eol < 12 || parse_version(h, 8, &minor, why) != 0 || h[8] != ' ' ||
        !is_digit((unsigned char)h[9]) || !is_digit((unsigned char)h[10]) ||
        !is_digit((unsigned char)h[11]) || (eol > 12 && h[12] != ' ') || h[9] == '0') {
        *why = "malformed status line from the upstream";
        return 502;
    }
    r->minor = minor;
    r->status = (h[9] - '0') * 100 + (h[10] - '0') * 10 + (h[11] - '0');
    p = eol > 12 ? 13 : 12;
    for (size_t i = p; i < eol; i++) {
        unsigned char ch = (unsigned char)h[i];
        if ((ch < 0x20 && ch != '\t') || ch == 0x7f) {
            *why = "control character in the upstream's reason phrase";
            return 502;
        }
    }
    r->reason = mkspan(p, eol - p);

    rc = parse_fields(h, len, eol + 2, r->fields, &r->nfields, why);
    if (rc < 0) {
        if (rc == -2)
            *why = "too many header fields in the upstream response";
        return 502;
    }
    if (scan_fields(h, r->fields, r->nfields, &hf, &fr, why) < 0)
        return 502;
    if (fr.ncl > 0 && fr.nte > 0) {
        *why = "upstream response with both Content-Length and Transfer-Encoding";
        return 502;
    }
    if (fr.ncl > 1) {
        *why = "upstream response with more than one Content-Length";
        return 502;
    }
    if (fr.ncl == 1 && fr.bad_cl) {
        *why = "invalid Content-Length from the upstream";
        return 502;
    }
    if (fr.nte > 0 && (fr.te.bad || fr.te.unknown || fr.te.chunked != fr.te.n)) {
        *why = "unsupported transfer coding from the upstream (only chunked)";
        return 502;
    }
    if (r->status < 200 || r->status == 204 || r->status == 304 || head_request)
        r->body = HTTP_BODY_NONE;
    else if (fr.nte > 0)
        r->body = HTTP_BODY_CHUNKED;
    else if (fr.ncl == 1)
        r->body = fr.cl > 0 ? HTTP_BODY_LENGTH : HTTP_BODY_NONE;
    else
        r->body = HTTP_BODY_EOF;
    r->content_length = fr.ncl == 1 ? fr.cl : 0;
    r->upgrade = r->status == 101 && fr.nupgrade > 0 && hf.tok_upgrade;
    if (r->minor == 1)
        r->keep_alive = !hf.tok_close;
    else
        r->keep_alive = hf.tok_keep_alive && !hf.tok_close;
    if (r->body == HTTP_BODY_EOF)
        r->keep_alive = 0;
    mark_drops(h, r->fields, r->nfields, &hf, r->upgrade);
    return 0;
}

size_t http_response_build(const char *h, const struct http_response *r, unsigned flags, char *out,
                           size_t cap)
{
    struct writer w = {out, cap, 0};
    char st[4];

    st[0] = (char)('0' + r->status / 100);
    st[1] = (char)('0' + r->status / 10 % 10);
    st[2] = (char)('0' + r->status % 10);
    st[3] = '\0';
    puts_(&w, "HTTP/1.1 ");
    puts_(&w, st);
    puts_(&w, " ");
    if (r->reason.len > 0)
        put_span(&w, h, r->reason);
    else
        puts_(&w, http_status_phrase(r->status));
    puts_(&w, "\r\n");
    put_fields(&w, h, r->fields, r->nfields);
    if (flags & HTTP_OUT_CHUNKED)
        puts_(&w, "Transfer-Encoding: chunked\r\n");
    if (flags & HTTP_OUT_UPGRADE)
        puts_(&w, "Connection: Upgrade\r\n");
    else if (flags & HTTP_OUT_CLOSE)
        puts_(&w, "Connection: close\r\n");
    puts_(&w, "\r\n");
    return w.len;
}

/* ------------------------------------------------------------------------ */
/* sluice's own responses                                                    */

const char *http_status_phrase(int status)
{
    switch (status) {
    case 100:
        return "Continue";
    case 101:
        return "Switching Protocols";
    case 200:
        return "OK";
    case 204:
        return "No Content";
    case 304:
        return "Not Modified";
    case 400:
        return "Bad Request";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 407:
        return "Proxy Authentication Required";
    case 408:
        return "Request Timeout";
    case 413:
        return "Content Too Large";
    case 417:
        return "Expectation Failed";
    case 421:
        return "Misdirected Request";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    case 505:
        return "HTTP Version Not Supported";
    default:
        return "Unknown";
    }
}

/* Printable ASCII only, at most max bytes, trimmed; quote_escape: backslash
 * before '"' and '\' (an RFC 8941 sf-string body). */
static void put_clean(struct writer *w, const char *s, size_t max, int quote_escape)
{
    size_t n = 0, len = strlen(s);

    while (len > 0 && s[len - 1] == ' ')
        len--;
    while (len > 0 && *s == ' ') {
        s++;
        len--;
    }
    for (size_t i = 0; i < len && n < max; i++, n++) {
        char ch = s[i];
        if ((unsigned char)ch < 0x20 || (unsigned char)ch > 0x7e)
            ch = '?';
        if (quote_escape && (ch == '"' || ch == '\\'))
            put(w, "\\", 1);
        put(w, &ch, 1);
    }
}

static int has_printable(const char *s)
{
    for (; s != NULL && *s != '\0'; s++)
        if (*s != ' ')
            return 1;
    return 0;
}

size_t http_reply_build(const struct http_reply *r, char *out, size_t cap)
{
    char body[600];
    struct writer b = {body, sizeof(body) - 1, 0};
    struct writer w = {out, cap, 0};
    const char *phrase = has_printable(r->phrase) ? r->phrase : http_status_phrase(r->status);
    char st[4];

    if (r->status < 100 || r->status > 999)
        return 0;
    st[0] = (char)('0' + r->status / 100);
    st[1] = (char)('0' + r->status / 10 % 10);
    st[2] = (char)('0' + r->status % 10);
    st[3] = '\0';

    /* body first: its length goes in the head */
    if (has_printable(r->body)) {
        put_clean(&b, r->body, 500, 0);
    } else {
        puts_(&b, st);
        puts_(&b, " ");
        puts_(&b, http_status_phrase(r->status));
    }
    put(&b, "\n", 1);

    puts_(&w, "HTTP/1.1 ");
    puts_(&w, st);
    puts_(&w, " ");
    put_clean(&w, phrase, 120, 0);
    puts_(&w, "\r\n");
    puts_(&w, "Proxy-Status: sluice");
    if (r->error != NULL) {
        puts_(&w, "; error=");
        puts_(&w, r->error);
    }
    if (r->rcode != NULL) {
        puts_(&w, "; rcode=\"");
        put_clean(&w, r->rcode, 32, 1);
        puts_(&w, "\"");
    }
    if (has_printable(r->details)) {
        puts_(&w, "; details=\"");
        put_clean(&w, r->details, 400, 1);
        puts_(&w, "\"");
    }
    puts_(&w, "\r\n");
    if (r->blocked)
        puts_(&w, "X-Proxy-Error: blocked-by-allowlist\r\n");
    if (r->challenge)
        puts_(&w, "Proxy-Authenticate: Basic realm=\"sluice\"\r\n");
    if (r->allow)
        puts_(&w, "Allow: GET, HEAD, POST, PUT, DELETE, OPTIONS, PATCH, CONNECT\r\n");
    if (r->retry_after > 0) {
        puts_(&w, "Retry-After: ");
        put_u64(&w, r->retry_after);
        puts_(&w, "\r\n");
    }
    puts_(&w, "Content-Type: text/plain; charset=us-ascii\r\nContent-Length: ");
    put_u64(&w, b.len);
    puts_(&w, "\r\n");
    puts_(&w, r->close ? "Connection: close\r\n" : "Connection: keep-alive\r\n");
    puts_(&w, "\r\n");
    put(&w, body, b.len);
    if (w.len > cap || w.len > HTTP_REPLY_MAX)
        return 0;
    return w.len;
}

/* ------------------------------------------------------------------------ */
/* Basic credentials                                                         */

static int b64_value(unsigned char ch)
{
    if (ch >= 'A' && ch <= 'Z')
        return ch - 'A';
    if (ch >= 'a' && ch <= 'z')
        return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9')
        return ch - '0' + 52;
    if (ch == '+')
        return 62;
    if (ch == '/')
        return 63;
    return -1;
}

int http_basic_decode(const char *v, size_t len, uint8_t *out, size_t cap, size_t *ulen,
                      size_t *plen)
{
    size_t i = 5, n = 0, colon;

    if (len < 6 || !ieq(v, 5, "basic") || (v[5] != ' ' && v[5] != '\t'))
        return -1;
    while (i < len && (v[i] == ' ' || v[i] == '\t'))
        i++;
    if ((len - i) == 0 || (len - i) % 4 != 0)
        return -1;
    for (; i < len; i += 4) {
        int q[4], pad = 0;
        uint32_t bits;

        for (int k = 0; k < 4; k++) {
            unsigned char ch = (unsigned char)v[i + (size_t)k];
            if (ch == '=' && i + 4 == len && k >= 2) {
                q[k] = 0;
                pad++;
                continue;
            }
            if (pad > 0) /* data after '=' */
                return -1;
            q[k] = b64_value(ch);
            if (q[k] < 0)
                return -1;
        }
        bits = ((uint32_t)q[0] << 18) | ((uint32_t)q[1] << 12) | ((uint32_t)q[2] << 6) |
               (uint32_t)q[3];
        if (n + 3 - (size_t)pad > cap)
            return -1;
        out[n++] = (uint8_t)(bits >> 16);
        if (pad < 2)
            out[n++] = (uint8_t)(bits >> 8);
        if (pad < 1)
            out[n++] = (uint8_t)bits;
    }
    for (colon = 0; colon < n && out[colon] != ':'; colon++)
        ;
    if (colon == n)
        return -1;
    *ulen = colon;
    *plen = n - colon - 1;
    return 0;
}
