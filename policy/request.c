/* policy/request.c - request rules (network.requestRules, issue 23): the
 * path normaliser, the glob matcher, the compiled rules and the narrowing
 * step of the one verdict.
 *
 * Rules only narrow. The domain lists decide first (policy_decide); a host
 * that no request rule names is decided by them alone. A request to a host
 * some rule names is allowed only when an allow rule matches its method and
 * normalised path and no deny rule does. A connection that carries no
 * request line sluice can read (a CONNECT, a SOCKS5 CONNECT, a transparent
 * connect()) to such a host is refused: request rules need TLS termination
 * to see inside it. A CONNECT sluice proxy terminates (network.tlsTerminate,
 * the host not in excludeDomains) is judged with a request line whose
 * method is NULL: the domain lists decide it, the rules each request inside.
 *
 * Paths are judged after normalisation: the query is left out, unreserved
 * characters are percent-decoded (other escapes are kept, hex upper-cased),
 * and dot segments are resolved. A target whose meaning depends on the
 * server reading it is ambiguous and refused on a host with rules: an
 * encoded '/', '\' or NUL, a raw '\', control or non-ASCII bytes, a bad
 * escape, an overlong UTF-8 escape (%C0%AE), an empty segment before the
 * last ("//"), a segment ending in '.', '..' climbing above the root, a
 * target that is not an origin-form path, a path over POLICY_PATH_MAX.
 */
#include "policy/policy.h"
#include "policy/policy-int.h"

#include "common/common.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct policy_req_rule {
    struct policy_rule r; /* the host pattern's compiled form, list, index, source, text */
    char host[POLICY_HOST_MAX + 1]; /* canonical name part (names and wildcards) */
    size_t host_len;
    int deny;
    char **methods; /* NULL: any */
    size_t nmethods;
    char **globs; /* normalised; NULL: any path */
    size_t nglobs;
};

/* ------------------------------------------------------------------------ */
/* Normalising a path                                                        */

static int unreserved(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '-' || ch == '.' || ch == '_' || ch == '~';
}

/* The byte of "%XY" at s (3 bytes available), or -1. */
static int escape_at(const char *s, size_t left)
{
    int hi, lo;

    if (left < 3 || (hi = common_hex_digit((unsigned char)s[1])) < 0 ||
        (lo = common_hex_digit((unsigned char)s[2])) < 0)
        return -1;
    return hi * 16 + lo;
}

/* An escape that starts an overlong UTF-8 form (C0, C1; E0 80-9F; F0
 * 80-8F): some servers decode it to '/' or '.'. */
static int overlong(int b, const char *next, size_t left)
{
    int b2;

    if (b == 0xC0 || b == 0xC1)
        return 1;
    if (b != 0xE0 && b != 0xF0)
        return 0;
    if (left < 3 || next[0] != '%' || (b2 = escape_at(next, left)) < 0)
        return 0;
    return b == 0xE0 ? b2 >= 0x80 && b2 <= 0x9F : b2 >= 0x80 && b2 <= 0x8F;
}

/* Decodes one segment's bytes [s, s+n) into out (at most n bytes): the
 * unreserved escapes decoded, the others upper-cased. glob: '*' is the
 * glob's. 0 or -EINVAL with *why. */
static int decode_segment(const char *s, size_t n, char *out, size_t *olen, int glob,
                          const char **why)
{
    size_t i, o = 0;

    for (i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        int b;
        if (ch == '%') {
            b = escape_at(s + i, n - i);
            if (b < 0) {
                *why = "a '%' that is not followed by two hex digits";
                return -EINVAL;
            }
            if (b == '/' || b == '\\' || b == 0) {
                *why = b == '/'    ? "an encoded '/' (%2F)"
                       : b == '\\' ? "an encoded '\\' (%5C)"
                                   : "an encoded NUL (%00)";
                return -EINVAL;
            }
            if (overlong(b, s + i + 3, n - i - 3)) {
                *why = "an overlong UTF-8 escape";
                return -EINVAL;
            }
            if (unreserved((unsigned char)b)) {
                out[o++] = (char)b;
            } else {
                out[o++] = '%';
                out[o++] = "0123456789ABCDEF"[b >> 4];
                out[o++] = "0123456789ABCDEF"[b & 15];
            }
            i += 2;
            continue;
        }
        if (ch == '\\') {
            *why = "a '\\'";
            return -EINVAL;
        }
        if (ch <= 0x20 || ch >= 0x7f) {
            *why = "a control byte, space or non-ASCII byte (percent-encode it)";
            return -EINVAL;
        }
        if (ch == '#' || (glob && ch == '?')) {
            *why = ch == '#' ? "a '#'" : "a '?' (the query is never matched)";
            return -EINVAL;
        }
        out[o++] = (char)ch;
    }
    *olen = o;
    return 0;
}

static int dot_segment(const char *s, size_t n)
{
    return (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.');
}

/* Normalises in (a path, glob: a path glob) into out; see the header. */
static int normalize(const char *in, size_t len, char *out, size_t cap, size_t *outlen, int glob,
                     const char **why)
{
    size_t o = 0, i = 1, end = len;
    const char *q = glob ? NULL : memchr(in, '?', len);

    *why = NULL;
    if (q != NULL)
        end = (size_t)(q - in);
    if (end == 0 || in[0] != '/') {
        *why = "not an origin-form path (it must start with '/')";
        return -EINVAL;
    }
    if (end > POLICY_PATH_MAX || cap < end + 1) {
        *why = "a path longer than 8192 bytes";
        return -EINVAL;
    }
    /* one segment at a time: [i, j) */
    for (;;) {
        const char *sl = memchr(in + i, '/', end - i);
        size_t j = sl != NULL ? (size_t)(sl - in) : end, n;
        int last = sl == NULL;

        if (decode_segment(in + i, j - i, out + o + 1, &n, glob, why) < 0)
            return -EINVAL;
        if (dot_segment(out + o + 1, n)) {
            if (n == 2) { /* "..": drop the segment before */
                if (o == 0) {
                    *why = "'..' climbs above the root";
                    return -EINVAL;
                }
                do /* every piece of out is "/segment" */
                    o--;
                while (out[o] != '/');
            }
            if (last) {
                out[o++] = '/';
                break;
            }
        } else if (n == 0 && !last) {
            *why = "an empty segment ('//')";
            return -EINVAL;
        } else if (n > 0 && out[o + n] == '.') {
            *why = "a segment ending in '.'";
            return -EINVAL;
        } else {
            out[o] = '/';
            o += n + 1;
            if (last)
                break;
        }
        i = j + 1;
    }
    out[o] = '\0';
    *outlen = o;
    return 0;
}

int policy_path_normalize(const char *in, size_t len, char *out, size_t cap, size_t *outlen,
                          const char **why)
{
    return normalize(in, len, out, cap, outlen, 0, why);
}

/* ------------------------------------------------------------------------ */
/* Globs                                                                     */

/* The next segment of a normalised path or glob at *pos ("/seg..."):
 * [*s, *s + *n); 0 at the end. */
static int next_seg(const char *p, size_t len, size_t *pos, const char **s, size_t *n)
{
    const char *sl;

    if (*pos >= len)
        return 0;
    *s = p + *pos + 1;
    sl = memchr(*s, '/', len - *pos - 1);
    *n = sl != NULL ? (size_t)(sl - *s) : len - *pos - 1;
    *pos += *n + 1;
    return 1;
}

int policy_path_glob_check(const char *glob, const char **why)
{
    char *norm;
    size_t len = strlen(glob), nlen, pos = 0, n;
    const char *s;
    int rc;

    norm = malloc(len + 1);
    if (norm == NULL) {
        *why = "out of memory";
        return -ENOMEM;
    }
    rc = normalize(glob, len, norm, len + 1, &nlen, 1, why);
    while (rc == 0 && next_seg(norm, nlen, &pos, &s, &n)) {
        if (memchr(s, '*', n) != NULL && !(n == 1 || (n == 2 && s[0] == '*' && s[1] == '*'))) {
            *why = "'*' and '**' must be whole segments ('/a/*/b', '/a/**')";
            rc = -EINVAL;
        }
    }
    free(norm);
    return rc;
}

/* Whether the normalised path matches the normalised glob: '*' is one
 * segment (any, the empty last one included), '**' any number of segments
 * (none included). Linear backtracking to the last '**' only. */
int policy_path_glob_match(const char *glob, size_t glen, const char *path, size_t plen)
{
    size_t gp = 0, pp = 0, star_g = 0, star_p = 0;
    int have_star = 0;

    for (;;) {
        size_t gn = 0, pn = 0;
        const char *gs = NULL, *ps = NULL;
        int gmore = next_seg(glob, glen, &gp, &gs, &gn), pmore;

        if (gmore && gn == 2 && gs[0] == '*' && gs[1] == '*') {
            have_star = 1;
            star_g = gp; /* the glob after the '**' */
            star_p = pp; /* the '**' has taken the path up to here */
            continue;
        }
        pmore = next_seg(path, plen, &pp, &ps, &pn);
        if (!gmore && !pmore)
            return 1;
        if (gmore && pmore && ((gn == 1 && gs[0] == '*') || (gn == pn && memcmp(gs, ps, gn) == 0)))
            continue;
        /* a mismatch: the last '**' takes one more segment, or no match */
        if (!have_star || !next_seg(path, plen, &star_p, &ps, &pn))
            return 0;
        gp = star_g;
        pp = star_p;
    }
}

/* ------------------------------------------------------------------------ */
/* Compiling                                                                 */

static void rule_error(struct settings_error *err, const struct settings_item *it, const char *what)
{
    if (err != NULL)
        snprintf(err->msg, sizeof(err->msg), "%s:%u:%u: %s[%zu]: %s", it->file, it->line, it->col,
                 it->list != NULL ? it->list : "network.requestRules", it->index, what);
}

static char *dupn(const char *s, size_t n)
{
    char *d = malloc(n + 1);

    if (d != NULL) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

/* The rule as one line: "ACTION METHODS HOST PATHS" ('*' for any method,
 * '/' + '**' for any path; lists comma-separated). */
static char *rule_text(const struct settings_request_rule *sr)
{
    size_t cap = 32 + sr->host_len + sr->methods_len, o;
    char *t;

    for (size_t k = 0; k < sr->npaths; k++)
        cap += sr->path_lens[k] + 1;
    t = malloc(cap);
    if (t == NULL)
        return NULL;
    o = (size_t)snprintf(t, cap, "%s ", sr->deny ? "deny" : "allow");
    for (size_t k = 0; k < sr->methods_len; k++)
        t[o++] = sr->methods[k] == ' ' ? ',' : sr->methods[k];
    if (sr->methods_len == 0)
        t[o++] = '*';
    o += (size_t)snprintf(t + o, cap - o, " %.*s ", (int)sr->host_len, sr->host);
    if (sr->npaths == 0)
        o += (size_t)snprintf(t + o, cap - o, "/**");
    for (size_t k = 0; k < sr->npaths; k++)
        o += (size_t)snprintf(t + o, cap - o, "%s%.*s", k > 0 ? "," : "", (int)sr->path_lens[k],
                              sr->paths[k]);
    return t;
}

static int split_methods(struct policy_req_rule *q, const struct settings_request_rule *sr)
{
    const char *m = sr->methods, *end = sr->methods + sr->methods_len;

    if (sr->methods_len == 0)
        return 0;
    q->methods = calloc(sr->methods_len / 2 + 2, sizeof(*q->methods));
    if (q->methods == NULL)
        return -ENOMEM;
    while (m < end) {
        const char *sp = memchr(m, ' ', (size_t)(end - m));
        size_t n = sp != NULL ? (size_t)(sp - m) : (size_t)(end - m);
        if ((q->methods[q->nmethods] = dupn(m, n)) == NULL)
            return -ENOMEM;
        q->nmethods++;
        m += n + (sp != NULL);
    }
    return 0;
}

static int compile_globs(struct policy_req_rule *q, const struct settings_request_rule *sr,
                         const char **why)
{
    if (sr->npaths == 0)
        return 0;
    q->globs = calloc(sr->npaths, sizeof(*q->globs));
    if (q->globs == NULL)
        return -ENOMEM;
    for (size_t k = 0; k < sr->npaths; k++) {
        size_t n;
        char *g = malloc(sr->path_lens[k] + 1);
        if (g == NULL)
            return -ENOMEM;
        q->globs[q->nglobs++] = g;
        if (normalize(sr->paths[k], sr->path_lens[k], g, sr->path_lens[k] + 1, &n, 1, why) < 0)
            return -EINVAL;
    }
    return 0;
}

static int compile_one(struct policy_req_rule *q, const struct settings_item *it,
                       struct settings_error *err)
{
    struct settings_request_rule sr;
    char *host;
    const char *why = NULL;
    int rc;

    if (settings_request_rule_split(it->value, &sr) < 0) {
        rule_error(err, it, "malformed rule");
        return -EINVAL;
    }
    host = dupn(sr.host, sr.host_len);
    if (host == NULL)
        return -ENOMEM;
    rc = policy_pattern_parse(host, 0, &q->r, q->host, &why);
    free(host);
    if (rc < 0 || q->r.kind == POLICY_RULE_ANY) {
        rule_error(err, it, why != NULL ? why : "invalid host pattern");
        return -EINVAL;
    }
    q->host_len = strlen(q->host);
    q->deny = sr.deny;
    q->r.list_id = POLICY_LIST_REQUEST;
    q->r.list = "network.requestRules"; /* static: the rule outlives the settings */
    q->r.index = it->index;
    q->r.file = strdup(it->file != NULL ? it->file : "?");
    q->r.line = it->line;
    q->r.col = it->col;
    q->r.managed = it->managed;
    q->r.pattern = rule_text(&sr);
    if (q->r.file == NULL || q->r.pattern == NULL || split_methods(q, &sr) < 0)
        return -ENOMEM;
    rc = compile_globs(q, &sr, &why);
    if (rc == -EINVAL)
        rule_error(err, it, why != NULL ? why : "invalid path glob");
    return rc;
}

void policy__request_free(struct policy *p)
{
    for (size_t i = 0; i < p->nreq; i++) {
        struct policy_req_rule *q = &p->req[i];
        for (size_t k = 0; k < q->nmethods; k++)
            free(q->methods[k]);
        for (size_t k = 0; k < q->nglobs; k++)
            free(q->globs[k]);
        free(q->methods);
        free(q->globs);
        free((char *)(uintptr_t)q->r.pattern);
        free((char *)(uintptr_t)q->r.file);
    }
    free(p->req);
    p->req = NULL;
    p->nreq = 0;
}

int policy__request_compile(struct policy *p, const struct settings *s, struct settings_error *err)
{
    const struct settings_list *l = &s->network.request_rules;

    if (l->n == 0)
        return 0;
    p->req = calloc(l->n, sizeof(*p->req));
    if (p->req == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < l->n; i++) {
        int rc;
        p->nreq++;
        rc = compile_one(&p->req[i], &l->items[i], err);
        if (rc < 0)
            return rc;
        p->req_managed |= l->items[i].managed;
    }
    return 0;
}

size_t policy_request_rule_count(const struct policy *p)
{
    return p->nreq;
}

int policy__request_managed(const struct policy *p)
{
    return p->req_managed;
}

int policy_request_ruled(const struct policy *p, const struct policy_host *h, uint16_t port)
{
    for (size_t i = 0; i < p->nreq; i++)
        if (policy__rule_host_match(&p->req[i].r, p->req[i].host, p->req[i].host_len, h, port))
            return 1;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Narrowing a decision                                                      */

static int method_matches(const struct policy_req_rule *q, const struct policy_request *rq)
{
    if (q->nmethods == 0)
        return 1;
    for (size_t k = 0; k < q->nmethods; k++)
        if (strlen(q->methods[k]) == rq->method_len &&
            memcmp(q->methods[k], rq->method, rq->method_len) == 0)
            return 1;
    return 0;
}

static int path_matches(const struct policy_req_rule *q, const char *path, size_t plen)
{
    if (q->nglobs == 0)
        return 1;
    for (size_t k = 0; k < q->nglobs; k++)
        if (policy_path_glob_match(q->globs[k], strlen(q->globs[k]), path, plen))
            return 1;
    return 0;
}

static void deny_with(struct policy_decision *d, const struct policy_rule *r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void deny_with(struct policy_decision *d, const struct policy_rule *r, const char *fmt, ...)
{
    va_list ap;

    d->verdict = POLICY_DENY;
    d->origin = POLICY_BY_REQUEST;
    d->rule = r;
    va_start(ap, fmt);
    vsnprintf(d->reason, sizeof(d->reason), fmt, ap);
    va_end(ap);
    for (char *c = d->reason; *c != '\0'; c++)
        if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
            *c = '?';
}

/* The request line for a reason: "METHOD PATH", the path cut at 80. */
static void request_words(const struct policy_request *rq, const char *path, size_t plen, char *buf,
                          size_t len)
{
    snprintf(buf, len, "%.*s %.*s%s", (int)(rq->method_len < 32 ? rq->method_len : 32), rq->method,
             (int)(plen < 80 ? plen : 80), path, plen > 80 ? "..." : "");
}

void policy__request_narrow(const struct policy *p, const struct policy_host *h, uint16_t port,
                            const struct policy_request *rq, struct policy_decision *d)
{
    const struct policy_req_rule *first = NULL, *allow = NULL, *deny = NULL;
    char path[POLICY_PATH_MAX + 1], words[128];
    size_t plen = 0;
    const char *why = NULL;
    int ambiguous = 0;

    if (p->nreq == 0 || d->verdict == POLICY_DENY)
        return; /* rules only narrow */
    if (rq != NULL && rq->method == NULL)
        return; /* a terminated tunnel: the rules judge each request inside it */
    if (rq != NULL && normalize(rq->target, rq->target_len, path, sizeof(path), &plen, 0, &why) < 0)
        ambiguous = 1;
    for (size_t i = 0; i < p->nreq; i++) {
        const struct policy_req_rule *q = &p->req[i];
        if (!policy__rule_host_match(&q->r, q->host, q->host_len, h, port))
            continue;
        if (first == NULL)
            first = q;
        if (rq == NULL || ambiguous || !method_matches(q, rq) || !path_matches(q, path, plen))
            continue;
        if (q->deny && deny == NULL)
            deny = q;
        if (!q->deny && allow == NULL)
            allow = q;
    }
    if (first == NULL)
        return; /* the domain lists alone decide */
    if (rq == NULL) {
        deny_with(d, NULL,
                  "'%s' has request rules (network.requestRules, first at %s:%u), which need TLS "
                  "termination (network.tlsTerminate) to judge inside a tunnel, or plain http:// "
                  "through the HTTP proxy",
                  h->name, first->r.file, first->r.line);
        return;
    }
    if (ambiguous) {
        deny_with(d, NULL,
                  "ambiguous request target on a host with request rules (network.requestRules, "
                  "first at %s:%u): %s",
                  first->r.file, first->r.line, why);
        return;
    }
    request_words(rq, path, plen, words, sizeof(words));
    if (deny != NULL) {
        deny_with(d, &deny->r, "%s denied by request rule '%s'", words, deny->r.pattern);
        return;
    }
    if (allow == NULL) {
        deny_with(d, NULL,
                  "%s matches no allow rule of network.requestRules for '%s' (first "
                  "at %s:%u)",
                  words, h->name, first->r.file, first->r.line);
        return;
    }
    {
        size_t n = strlen(d->reason);
        snprintf(d->reason + n, sizeof(d->reason) - n, "; %s allowed by request rule '%s'", words,
                 allow->r.pattern);
    }
}
