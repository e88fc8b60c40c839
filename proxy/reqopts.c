/* proxy/reqopts.c - the request-level options of srt 0.0.83 for plain HTTP
 * (network.requireHostMatch, ambiguousRequestTarget, stripResponseHeaders;
 * refuseOpaqueTunnels is checked where tunnels start). Pure functions over
 * a parsed head; http_request.c and http_forward.c call them.
 *
 * An ambiguous request target is a path that two servers may read
 * differently: a dot segment ("." or ".." between slashes, also
 * percent-encoded as %2e), a backslash, or an encoded '/' or '\' (%2f,
 * %5c). "asSpelled" (the default) forwards it as written; "refuse" answers
 * 400; "normalize" decodes percent-encoded unreserved characters (RFC 3986
 * 6.2.2.2) and removes dot segments (RFC 3986 5.2.4), and refuses what
 * stays ambiguous (a backslash or an encoded slash cannot be normalised
 * without changing the meaning).
 */
#include "proxy/proxy.h"
#include "policy/policy.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int hexv(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = tolower(c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* The path part only (before '?'). */
static size_t path_len(const char *p, size_t n)
{
    const char *q = memchr(p, '?', n);
    return q != NULL ? (size_t)(q - p) : n;
}

/* 1 when a segment of p[0..n) (after percent-decoding dots) is "." or "..". */
static int has_dot_segment(const char *p, size_t n)
{
    size_t i = 0;

    while (i < n) {
        size_t s = i, dots = 0, other = 0;
        while (i < n && p[i] != '/') {
            if (p[i] == '.') {
                dots++;
                i++;
            } else if (p[i] == '%' && i + 2 < n && p[i + 1] == '2' && tolower(p[i + 2]) == 'e') {
                dots++;
                i += 3;
            } else {
                other++;
                i++;
            }
        }
        if (i > s && other == 0 && (dots == 1 || dots == 2))
            return 1;
        i++;
    }
    return 0;
}

static int has_encoded_sep(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '\\')
            return 1;
        if (p[i] == '%' && i + 2 < n &&
            ((p[i + 1] == '2' && tolower(p[i + 2]) == 'f') ||
             (p[i + 1] == '5' && tolower(p[i + 2]) == 'c')))
            return 1;
    }
    return 0;
}

int reqopt_target_ambiguous(const char *path, size_t len)
{
    size_t n = path_len(path, len);

    return has_dot_segment(path, n) || has_encoded_sep(path, n);
}

int reqopt_normalize(const char *path, size_t len, char *out, size_t cap, size_t *outlen)
{
    size_t n = path_len(path, len), o = 0;
    char *dec;

    if (has_encoded_sep(path, n) || cap < len + 2)
        return -1;
    dec = malloc(n + 1);
    if (dec == NULL)
        return -1;
    /* decode %XX of unreserved characters only */
    for (size_t i = 0; i < n; i++) {
        int h, l, c;
        if (path[i] == '%' && i + 2 < n && (h = hexv((unsigned char)path[i + 1])) >= 0 &&
            (l = hexv((unsigned char)path[i + 2])) >= 0) {
            c = h * 16 + l;
            if (isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
                dec[o++] = (char)c;
                i += 2;
                continue;
            }
        }
        dec[o++] = path[i];
    }
    dec[o] = '\0';
    /* remove_dot_segments (RFC 3986 5.2.4) into out, segment by segment */
    {
        size_t w = 0, i = 0;
        while (i < o) {
            size_t s0, k;
            int last;
            if (dec[i] == '/')
                i++;
            s0 = i;
            while (i < o && dec[i] != '/')
                i++;
            k = i - s0;
            last = i >= o;
            if (k == 1 && dec[s0] == '.') {
                if (last)
                    out[w++] = '/';
            } else if (k == 2 && dec[s0] == '.' && dec[s0 + 1] == '.') {
                while (w > 0 && out[w - 1] != '/')
                    w--;
                if (w > 0)
                    w--;
                if (last)
                    out[w++] = '/';
            } else {
                out[w++] = '/';
                memcpy(out + w, dec + s0, k);
                w += k;
            }
        }
        if (w == 0)
            out[w++] = '/';
        memcpy(out + w, path + n, len - n); /* the query, as written */
        w += len - n;
        *outlen = w;
    }
    free(dec);
    return 0;
}

int reqopt_host_mismatch(const char *h, const struct http_request *rq,
                         const struct policy_host *target, uint16_t port)
{
    for (size_t i = 0; i < rq->nfields; i++) {
        const struct http_field *f = &rq->fields[i];
        struct policy_host hh;
        const char *v = h + f->value.off, *why, *colon;
        size_t vl = f->value.len;
        unsigned long p = 80;
        size_t hl;

        if (f->name.len != 4 || strncasecmp(h + f->name.off, "host", 4) != 0)
            continue;
        if (vl > 0 && v[0] == '[') {
            const char *close = memchr(v, ']', vl);
            if (close == NULL)
                return 1;
            colon = close + 1 < v + vl && close[1] == ':' ? close + 1 : NULL;
            hl = (size_t)(close + 1 - v);
        } else {
            colon = memchr(v, ':', vl);
            hl = colon != NULL ? (size_t)(colon - v) : vl;
        }
        if (colon != NULL) {
            char num[8];
            size_t nl = (size_t)(v + vl - colon - 1);
            if (nl == 0 || nl >= sizeof(num))
                return 1;
            memcpy(num, colon + 1, nl);
            num[nl] = '\0';
            p = strtoul(num, NULL, 10);
        }
        if (policy_host_normalize(v, hl, &hh, &why) < 0)
            return 1;
        if (p != port || hh.kind != target->kind || strcmp(hh.name, target->name) != 0)
            return 1;
    }
    return 0;
}

void reqopt_strip(const char *h, struct http_response *rs, char *const *names, size_t n)
{
    for (size_t i = 0; i < rs->nfields; i++) {
        struct http_field *f = &rs->fields[i];
        for (size_t k = 0; k < n; k++) {
            if (strlen(names[k]) == f->name.len &&
                strncasecmp(h + f->name.off, names[k], f->name.len) == 0) {
                f->drop = 1;
                break;
            }
        }
    }
}
