/* proxy/head_int.h - what the head validator's files share (proxy/head.c,
 * head_request.c, head_write.c): ASCII character classes, the field scan
 * and framing common to requests and responses. Private to them. */
#ifndef SLUICE_PROXY_HEAD_INT_H
#define SLUICE_PROXY_HEAD_INT_H

#include "proxy/proxy.h"

#include <string.h>

/* ------------------------------------------------------------------------ */
/* Character classes (ASCII, locale-free)                                    */

static inline int is_digit(unsigned char ch)
{
    return ch >= '0' && ch <= '9';
}

static inline int is_alpha(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
}

static inline int is_hex(unsigned char ch)
{
    return is_digit(ch) || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F');
}

/* RFC 9110 tchar */
static inline int is_tchar(unsigned char ch)
{
    if (is_digit(ch) || is_alpha(ch))
        return 1;
    return ch != '\0' && strchr("!#$%&'*+-.^_`|~", ch) != NULL;
}

static inline unsigned char lower(unsigned char ch)
{
    return (ch >= 'A' && ch <= 'Z') ? (unsigned char)(ch + 32) : ch;
}

/* Case-insensitive comparison of n bytes of a with the literal b. */
static inline int ieq(const char *a, size_t n, const char *b)
{
    size_t bl = strlen(b);

    if (n != bl)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (lower((unsigned char)a[i]) != lower((unsigned char)b[i]))
            return 0;
    return 1;
}

static inline int span_ieq(const char *buf, struct http_span s, const char *lit)
{
    return ieq(buf + s.off, s.len, lit);
}

static inline int spans_ieq(const char *buf, struct http_span a, struct http_span b)
{
    if (a.len != b.len)
        return 0;
    for (uint32_t i = 0; i < a.len; i++)
        if (lower((unsigned char)buf[a.off + i]) != lower((unsigned char)buf[b.off + i]))
            return 0;
    return 1;
}

static inline struct http_span mkspan(size_t off, size_t len)
{
    struct http_span s;

    s.off = (uint32_t)off;
    s.len = (uint32_t)len;
    return s;
}


struct head_fields {
    size_t n;
    struct http_field *f;
    /* Connection / Proxy-Connection tokens */
    size_t ntok;
    struct http_span tok[HTTP_CONN_TOKENS_MAX];
    unsigned tok_close : 1, tok_keep_alive : 1, tok_upgrade : 1;
};

struct te_state {
    int n;       /* codings seen */
    int chunked; /* position of chunked + 1, 0 none */
    int unknown; /* a coding other than chunked */
    int bad;     /* malformed element */
};

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

/* proxy/head.c */
int head_whole(const char *h, size_t len, const char **why);
size_t head_line_end(const char *h, size_t len, size_t off);
int head_parse_fields(const char *h, size_t len, size_t off, struct http_field *out, size_t *nout,
                      const char **why);
int head_scan_fields(const char *h, struct http_field *f, size_t n, struct head_fields *hf,
                     struct framing *fr, const char **why);
void head_mark_drops(const char *h, struct http_field *f, size_t n, const struct head_fields *hf,
                     int keep_upgrade);
int head_parse_version(const char *s, size_t len, int *minor, const char **why);

#endif
