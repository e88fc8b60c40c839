/* proxy/head_write.c - writing heads: the request and response heads sent
 * on, sluice's own answers, and Basic credentials (head validator:
 * proxy/proxy.h, proxy/head.c). Pure code, as head.c. */
#include "proxy/head_int.h"

#include <stdio.h>
#include <string.h>

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
    else if (r->x_error != NULL) {
        puts_(&w, "X-Proxy-Error: ");
        puts_(&w, r->x_error);
        puts_(&w, "\r\n");
    }
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
