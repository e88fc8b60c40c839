/* proxy/head.c - the HTTP head validator and rewriter (style.md R11):
 * delimiting a head, its field lines and framing, and response heads;
 * request heads are in head_request.c, writing heads in head_write.c.
 *
 * Pure code: no I/O, no allocation, no locale. Everything the session needs
 * to know about a request or a response that can be decided from the bytes
 * of its head is decided here, so it can be tested and fuzzed on its own;
 * llhttp then frames the bodies (proxy/http_forward.c cross-checks that llhttp saw
 * the same head and the same framing).
 *
 * The grammar is RFC 9112 read strictly: CRLF only, single spaces in the
 * start line, no whitespace before a colon, no obs-fold, no control bytes in
 * values, one unambiguous framing. Offsets are uint32_t: a head is never
 * near 4 GiB (the session caps it at proxy.limits.maxHeadBytes <= 1 MiB).
 */
#include "proxy/head_int.h"

#include <stdio.h>
#include <string.h>

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
int head_whole(const char *h, size_t len, const char **why)
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
size_t head_line_end(const char *h, size_t len, size_t off)
{
    while (off < len && h[off] != '\r')
        off++;
    return off;
}

/* Parses the field lines from off (just after the start line's CRLF) to the
 * empty line. Returns 0, -1 (malformed, *why) or -2 (too many fields). */
int head_parse_fields(const char *h, size_t len, size_t off, struct http_field *out, size_t *nout,
                      const char **why)
{
    size_t n = 0;

    while (off < len) {
        size_t eol = head_line_end(h, len, off), p = off, vs, ve;

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
int head_scan_fields(const char *h, struct http_field *f, size_t n, struct head_fields *hf,
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
void head_mark_drops(const char *h, struct http_field *f, size_t n, const struct head_fields *hf,
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

/* "HTTP/1.0" or "HTTP/1.1": 0 with *minor; another HTTP/D.D: 505; else 400. */
int head_parse_version(const char *s, size_t len, int *minor, const char **why)
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
    if (!head_whole(h, len, why))
        return 502;
    /* status-line = HTTP-version SP 3DIGIT SP [reason]; "HTTP/1.1 200" without the
     * second SP is accepted (seen in the wild; nothing ambiguous). */
    eol = head_line_end(h, len, 0);
    if (eol < 12 || head_parse_version(h, 8, &minor, why) != 0 || h[8] != ' ' ||
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

    rc = head_parse_fields(h, len, eol + 2, r->fields, &r->nfields, why);
    if (rc < 0) {
        if (rc == -2)
            *why = "too many header fields in the upstream response";
        return 502;
    }
    if (head_scan_fields(h, r->fields, r->nfields, &hf, &fr, why) < 0)
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
    head_mark_drops(h, r->fields, r->nfields, &hf, r->upgrade);
    return 0;
}
