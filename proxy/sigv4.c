/* proxy/sigv4.c - AWS Signature Version 4 (see sigv4.h). Written from
 * AWS's documentation of the signing process: the canonical request
 * (method, canonical URI, canonical query string, canonical headers,
 * signed headers, payload hash), the string to sign (algorithm, request
 * date, credential scope, hash of the canonical request), and the signing
 * key (HMAC chain of "AWS4" + secret over date, region, service and
 * "aws4_request"). */
#define _GNU_SOURCE
#include "proxy/sigv4.h"

#include "common/common.h"
#include "tls/tls.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <uv.h>

const char sigv4_empty_hash[SIGV4_HEX_LEN + 1] =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

static const char hexdig[] = "0123456789abcdef";
static const char HEXDIG[] = "0123456789ABCDEF";

/* ------------------------------------------------------------------------ */
/* A growing buffer: an allocation failure is remembered, not reported at    */
/* each append.                                                              */

struct sb {
    char *p;
    size_t n, cap;
    int err;
};

static void sb_put(struct sb *s, const void *d, size_t n)
{
    if (s->err)
        return;
    if (n >= SIZE_MAX / 4 - s->n) { /* no text here is near that; and GCC sees the bound */
        s->err = 1;
        return;
    }
    if (s->n + n + 1 > s->cap) {
        size_t cap = s->cap > 0 ? s->cap : 256;
        char *np;
        while (cap < s->n + n + 1)
            cap *= 2;
        np = realloc(s->p, cap);
        if (np == NULL) {
            s->err = 1;
            return;
        }
        s->p = np;
        s->cap = cap;
    }
    if (n > 0)
        memcpy(s->p + s->n, d, n);
    s->n += n;
    s->p[s->n] = '\0';
}

static void sb_c(struct sb *s, char c)
{
    sb_put(s, &c, 1);
}

static void sb_str(struct sb *s, const char *str)
{
    sb_put(s, str, strlen(str));
}

static int unreserved(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.' || c == '~';
}

/* One byte as AWS's URI encoding writes it (slash kept when keep_slash). */
static void sb_enc(struct sb *s, unsigned char c, int keep_slash)
{
    char e[3];

    if (unreserved(c) || (keep_slash && c == '/')) {
        sb_c(s, (char)c);
        return;
    }
    e[0] = '%';
    e[1] = HEXDIG[c >> 4];
    e[2] = HEXDIG[c & 15];
    sb_put(s, e, 3);
}

/* The byte of "%XX" at p (n bytes left), or -1. */
static int pct(const char *p, size_t n)
{
    int h, l;

    if (n < 3 || p[0] != '%')
        return -1;
    h = common_hex_digit((unsigned char)p[1]);
    l = common_hex_digit((unsigned char)p[2]);
    return h < 0 || l < 0 ? -1 : h * 16 + l;
}

/* Decoded (only %XX) and encoded once. */
static void sb_reenc(struct sb *s, const char *p, size_t n, int keep_slash)
{
    for (size_t i = 0; i < n; i++) {
        int b = pct(p + i, n - i);
        if (b >= 0) {
            sb_enc(s, (unsigned char)b, 0);
            i += 2;
        } else {
            sb_enc(s, (unsigned char)p[i], keep_slash);
        }
    }
}

static void hex_of(const uint8_t *d, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hexdig[d[i] >> 4];
        out[2 * i + 1] = hexdig[d[i] & 15];
    }
    out[2 * n] = '\0';
}

int sigv4_hash_hex(const void *data, size_t len, char hex[SIGV4_HEX_LEN + 1])
{
    uint8_t h[TLS_SHA256_LEN];

    if (tls_sha256(data, len, h) < 0)
        return UV_EIO;
    hex_of(h, sizeof(h), hex);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The Authorization header                                                  */

static int is_lhex(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f')))
            return 0;
    return 1;
}

/* SignedHeaders: names of [a-z0-9!#$%&'*+.^_`|~-], ';' between, strictly
 * ascending, host among them. */
static int signed_ok(const char *p, size_t n)
{
    const char *prev = NULL;
    size_t prevl = 0;
    int host = 0;

    if (n == 0 || n > SIGV4_SIGNED_MAX)
        return 0;
    for (size_t i = 0; i <= n;) {
        size_t j = i;
        while (j < n && p[j] != ';') {
            unsigned char c = (unsigned char)p[j];
            if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                  (c != 0 && strchr("!#$%&'*+.^_`|~-", c) != NULL)))
                return 0;
            j++;
        }
        if (j == i)
            return 0;
        if (prev != NULL) {
            size_t m = prevl < j - i ? prevl : j - i;
            int cmp = memcmp(prev, p + i, m);
            if (cmp > 0 || (cmp == 0 && prevl >= j - i))
                return 0;
        }
        if (j - i == 4 && memcmp(p + i, "host", 4) == 0)
            host = 1;
        prev = p + i;
        prevl = j - i;
        i = j + 1;
    }
    return host;
}

/* Credential=KEY/YYYYMMDD/region/service/aws4_request */
static int credential(const char *p, size_t n, struct sigv4_auth *a)
{
    const char *s[5];
    size_t l[5], k = 0, st = 0;

    for (size_t i = 0; i <= n; i++) {
        if (i < n && p[i] != '/')
            continue;
        if (k == 5)
            return 0;
        s[k] = p + st;
        l[k++] = i - st;
        st = i + 1;
    }
    if (k != 5 || l[0] == 0 || l[0] > SIGV4_KEYID_MAX || l[1] != 8 || l[2] == 0 || l[3] == 0 ||
        l[4] != 12 || memcmp(s[4], "aws4_request", 12) != 0)
        return 0;
    for (size_t i = 0; i < 8; i++)
        if (s[1][i] < '0' || s[1][i] > '9')
            return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)p[i] <= ' ' || (unsigned char)p[i] >= 0x7f || p[i] == ',')
            return 0;
    a->key = s[0];
    a->key_len = l[0];
    a->scope = s[1];
    a->scope_len = n - (size_t)(s[1] - p);
    a->date = s[1];
    a->region = s[2];
    a->region_len = l[2];
    a->service = s[3];
    a->service_len = l[3];
    return 1;
}

enum sigv4_alg sigv4_parse_auth(const char *v, size_t len, struct sigv4_auth *a, const char **why)
{
    static const char hmac[] = "AWS4-HMAC-SHA256", ecdsa[] = "AWS4-ECDSA-P256-SHA256";
    enum sigv4_alg alg;
    const char *r = NULL;
    size_t i;
    unsigned seen = 0;

    memset(a, 0, sizeof(*a));
    if (len < 5 || strncasecmp(v, "AWS4-", 5) != 0)
        return SIGV4_ALG_NONE;
    if (len > sizeof(hmac) && memcmp(v, hmac, sizeof(hmac) - 1) == 0 &&
        v[sizeof(hmac) - 1] == ' ') {
        alg = SIGV4_ALG_HMAC;
        i = sizeof(hmac);
    } else if (len > sizeof(ecdsa) && memcmp(v, ecdsa, sizeof(ecdsa) - 1) == 0 &&
               v[sizeof(ecdsa) - 1] == ' ') {
        alg = SIGV4_ALG_ECDSA;
        i = sizeof(ecdsa);
    } else {
        r = "an AWS4- scheme other than AWS4-HMAC-SHA256 and AWS4-ECDSA-P256-SHA256";
        goto bad;
    }
    while (i < len) {
        size_t st, e, pe;
        while (i < len && v[i] == ' ')
            i++;
        st = i;
        while (i < len && v[i] != ',')
            i++;
        e = i;
        if (i < len)
            i++; /* the comma */
        while (e > st && v[e - 1] == ' ')
            e--;
        pe = st;
        while (pe < e && v[pe] != '=')
            pe++;
        if (pe == e) {
            r = "a parameter without '='";
            goto bad;
        }
#define PARAM(NAME) (pe - st == sizeof(NAME) - 1 && memcmp(v + st, NAME, pe - st) == 0)
        if (PARAM("Credential") && !(seen & 1u)) {
            seen |= 1u;
            if (!credential(v + pe + 1, e - pe - 1, a)) {
                r = "Credential is not KEY/YYYYMMDD/REGION/SERVICE/aws4_request";
                goto bad;
            }
        } else if (PARAM("SignedHeaders") && !(seen & 2u)) {
            seen |= 2u;
            a->signed_h = v + pe + 1;
            a->signed_len = e - pe - 1;
            if (!signed_ok(a->signed_h, a->signed_len)) {
                r = "SignedHeaders is not a sorted list of lower-case names with host";
                goto bad;
            }
        } else if (PARAM("Signature") && !(seen & 4u)) {
            seen |= 4u;
            a->sig = v + pe + 1;
            if (e - pe - 1 != (alg == SIGV4_ALG_HMAC ? SIGV4_HEX_LEN : e - pe - 1) ||
                e - pe - 1 == 0 || !is_lhex(a->sig, e - pe - 1)) {
                r = "Signature is not lower-case hex of the right length";
                goto bad;
            }
        } else {
            r = "an unknown or repeated parameter";
            goto bad;
        }
#undef PARAM
    }
    if (seen != 7u) {
        r = "Credential, SignedHeaders or Signature is missing";
        goto bad;
    }
    return alg;
bad:
    if (why != NULL)
        *why = r;
    return SIGV4_ALG_BAD;
}

/* ------------------------------------------------------------------------ */
/* The head                                                                  */

struct target {
    const char *method, *path, *query;
    size_t method_len, path_len, query_len;
};

/* The request line's method, path and query (origin or absolute form). */
static int request_line(const char *head, size_t len, struct target *t)
{
    const char *eol = memchr(head, '\n', len), *sp1, *sp2, *p, *q;

    if (eol == NULL || (sp1 = memchr(head, ' ', (size_t)(eol - head))) == NULL)
        return UV_EINVAL;
    sp2 = memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1));
    if (sp2 == NULL || sp1 == head)
        return UV_EINVAL;
    t->method = head;
    t->method_len = (size_t)(sp1 - head);
    p = sp1 + 1;
    if ((size_t)(sp2 - p) > 7 &&
        (strncasecmp(p, "http://", 7) == 0 || strncasecmp(p, "https://", 8) == 0)) {
        p = (const char *)memchr(p, '/', (size_t)(sp2 - p)) + 2; /* after "//" */
        while (p < sp2 && *p != '/' && *p != '?')
            p++;
    }
    q = memchr(p, '?', (size_t)(sp2 - p));
    t->path = p;
    t->path_len = (size_t)((q != NULL ? q : sp2) - p);
    t->query = q != NULL ? q + 1 : sp2;
    t->query_len = q != NULL ? (size_t)(sp2 - q - 1) : 0;
    return 0;
}

/* Calls back with each header line's name and value (trimmed) after the
 * first line; stops at the empty line. */
struct hline {
    const char *name, *value;
    size_t name_len, value_len;
    const char *line, *next; /* the line's start, and the next line's */
};

static int next_header(const char *head, size_t len, const char **pos, struct hline *h)
{
    const char *p = *pos, *end = head + len, *eol, *colon, *ve;

    if (p == NULL) {
        p = memchr(head, '\n', len);
        if (p == NULL)
            return 0;
        p++;
    }
    if (p >= end || *p == '\r' || *p == '\n')
        return 0;
    eol = memchr(p, '\n', (size_t)(end - p));
    if (eol == NULL)
        eol = end;
    colon = memchr(p, ':', (size_t)(eol - p));
    if (colon == NULL)
        return 0;
    h->line = p;
    h->next = eol < end ? eol + 1 : end;
    h->name = p;
    h->name_len = (size_t)(colon - p);
    h->value = colon + 1;
    ve = eol;
    if (ve > h->value && ve[-1] == '\r')
        ve--;
    while (h->value < ve && (*h->value == ' ' || *h->value == '\t'))
        h->value++;
    while (ve > h->value && (ve[-1] == ' ' || ve[-1] == '\t'))
        ve--;
    h->value_len = (size_t)(ve - h->value);
    *pos = h->next;
    return 1;
}

/* The canonical values of header name (lower case) in head, joined by ','
 * with inner runs of blanks as one space; 0 when the head has none. */
static int canon_header(const char *head, size_t len, const char *name, size_t nl, struct sb *s)
{
    const char *pos = NULL;
    struct hline h;
    int found = 0;

    while (next_header(head, len, &pos, &h)) {
        if (h.name_len != nl || strncasecmp(h.name, name, nl) != 0)
            continue;
        if (found)
            sb_c(s, ',');
        found = 1;
        for (size_t i = 0; i < h.value_len; i++) {
            char c = h.value[i];
            if (c == ' ' || c == '\t') {
                if (i > 0 && (h.value[i - 1] == ' ' || h.value[i - 1] == '\t'))
                    continue;
                c = ' ';
            }
            sb_c(s, c);
        }
    }
    return found;
}

/* RFC 3986 5.2.4 on the path's bytes, into s. */
static void remove_dots(const char *p, size_t n, struct sb *s)
{
    size_t i = 0;

    while (i < n) {
        size_t j = i + 1;
        while (j < n && p[j] != '/')
            j++;
        /* the segment is p[i+1 .. j) when p[i] == '/' */
        if (p[i] == '/' && j - i == 2 && p[i + 1] == '.') {
            if (j == n)
                sb_c(s, '/');
        } else if (p[i] == '/' && j - i == 3 && p[i + 1] == '.' && p[i + 2] == '.') {
            while (s->n > 0 && s->p[s->n - 1] != '/')
                s->n--;
            if (s->n > 0)
                s->n--;
            if (j == n)
                sb_c(s, '/');
        } else {
            sb_put(s, p + i, j - i);
        }
        i = j;
    }
    if (s->p != NULL)
        s->p[s->n] = '\0';
}

static void canon_uri(const struct target *t, unsigned form, struct sb *s)
{
    struct sb d = {0};
    const char *p = t->path;
    size_t n = t->path_len;

    if (n == 0) {
        sb_c(s, '/');
        return;
    }
    if (form & SIGV4_URI_DOTS) {
        remove_dots(p, n, &d);
        if (d.err) {
            s->err = 1;
            return;
        }
        p = d.p != NULL ? d.p : "/";
        n = d.p != NULL ? d.n : 1;
    }
    switch (form & 3u) {
    case SIGV4_URI_ONCE:
        sb_reenc(s, p, n, 1);
        break;
    case SIGV4_URI_TWICE:
        for (size_t i = 0; i < n; i++)
            sb_enc(s, (unsigned char)p[i], 1);
        break;
    default:
        sb_put(s, p, n);
        break;
    }
    free(d.p);
}

struct qparam {
    char *kv; /* "name=value", encoded */
    size_t name_len;
};

static int qcmp(const void *x, const void *y)
{
    const struct qparam *a = x, *b = y;
    size_t m = a->name_len < b->name_len ? a->name_len : b->name_len;
    int c = memcmp(a->kv, b->kv, m);

    if (c != 0)
        return c;
    if (a->name_len != b->name_len)
        return a->name_len < b->name_len ? -1 : 1;
    return strcmp(a->kv + a->name_len, b->kv + b->name_len);
}

/* Parameters decoded and encoded once, sorted by name, then value. */
static void canon_query(const struct target *t, struct sb *s)
{
    struct qparam *qp;
    size_t n = 0, cap = 1;
    const char *q = t->query, *end = t->query + t->query_len;

    for (size_t i = 0; i < t->query_len; i++)
        cap += q[i] == '&';
    qp = calloc(cap, sizeof(*qp));
    if (qp == NULL) {
        s->err = 1;
        return;
    }
    while (q < end) {
        const char *amp = memchr(q, '&', (size_t)(end - q)), *e = amp != NULL ? amp : end;
        const char *eq = memchr(q, '=', (size_t)(e - q));
        struct sb one = {0};
        if (e > q) {
            sb_reenc(&one, q, (size_t)((eq != NULL ? eq : e) - q), 0);
            qp[n].name_len = one.n;
            sb_c(&one, '=');
            if (eq != NULL)
                sb_reenc(&one, eq + 1, (size_t)(e - eq - 1), 0);
            if (one.err) {
                free(one.p);
                s->err = 1;
                break;
            }
            qp[n++].kv = one.p;
        }
        q = e + (amp != NULL);
    }
    qsort(qp, n, sizeof(*qp), qcmp);
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            sb_c(s, '&');
        sb_str(s, qp[i].kv);
        free(qp[i].kv);
    }
    free(qp);
}

/* The canonical headers of the list a gives (those the head lacks left out
 * when drop, else UV_ENOENT), and the list used into list. */
static int canon_headers(const char *head, size_t len, const struct sigv4_auth *a, int drop,
                         struct sb *s, char *list)
{
    size_t ln = 0;
    const char *p = a->signed_h, *end = a->signed_h + a->signed_len;

    while (p < end) {
        const char *semi = memchr(p, ';', (size_t)(end - p)), *e = semi != NULL ? semi : end;
        size_t nl = (size_t)(e - p), mark = s->n;
        char name[SIGV4_SIGNED_MAX + 1];
        memcpy(name, p, nl);
        name[nl] = '\0';
        sb_put(s, p, nl);
        sb_c(s, ':');
        if (canon_header(head, len, name, nl, s)) {
            sb_c(s, '\n');
            if (ln > 0)
                list[ln++] = ';';
            memcpy(list + ln, p, nl);
            ln += nl;
        } else if (!drop || (nl == 4 && memcmp(name, "host", 4) == 0) ||
                   (nl == 10 && memcmp(name, "x-amz-date", 10) == 0)) {
            return UV_ENOENT;
        } else {
            s->n = mark; /* a header the proxy removed is not signed */
        }
        p = e + (semi != NULL);
    }
    list[ln] = '\0';
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Signing                                                                   */

static int hmac(const void *k, size_t kl, const void *d, size_t dl, uint8_t out[TLS_SHA256_LEN])
{
    return tls_hmac_sha256(k, kl, d, dl, out);
}

static int signing_key(const struct sigv4_auth *a, const uint8_t *secret, size_t slen,
                       uint8_t key[TLS_SHA256_LEN])
{
    uint8_t *k4 = malloc(slen + 4);
    uint8_t t[TLS_SHA256_LEN];
    int rc;

    if (k4 == NULL)
        return UV_ENOMEM;
    memcpy(k4, "AWS4", 4);
    memcpy(k4 + 4, secret, slen);
    rc = hmac(k4, slen + 4, a->date, 8, t);
    explicit_bzero(k4, slen + 4);
    free(k4);
    if (rc == 0)
        rc = hmac(t, sizeof(t), a->region, a->region_len, key);
    if (rc == 0)
        rc = hmac(key, TLS_SHA256_LEN, a->service, a->service_len, t);
    if (rc == 0)
        rc = hmac(t, sizeof(t), "aws4_request", 12, key);
    explicit_bzero(t, sizeof(t));
    return rc;
}

int sigv4_sign(const char *head, size_t len, const struct sigv4_auth *a, unsigned form,
               const char *payload, const uint8_t *secret, size_t slen, int drop,
               char list[SIGV4_SIGNED_MAX + 1], char sig[SIGV4_HEX_LEN + 1])
{
    struct target t;
    struct sb c = {0}, date = {0}, sts = {0};
    char chash[SIGV4_HEX_LEN + 1];
    uint8_t key[TLS_SHA256_LEN], mac[TLS_SHA256_LEN];
    int rc = request_line(head, len, &t);

    if (rc < 0)
        return rc;
    if (!canon_header(head, len, "x-amz-date", 10, &date) || date.err || date.n != 16 ||
        memcmp(date.p, a->date, 8) != 0 || date.p[8] != 'T' || date.p[15] != 'Z') {
        rc = date.err ? UV_ENOMEM : UV_EINVAL;
        goto out;
    }
    sb_put(&c, t.method, t.method_len);
    sb_c(&c, '\n');
    canon_uri(&t, form, &c);
    sb_c(&c, '\n');
    canon_query(&t, &c);
    sb_c(&c, '\n');
    rc = canon_headers(head, len, a, drop, &c, list);
    if (rc < 0)
        goto out;
    sb_c(&c, '\n');
    sb_str(&c, list);
    sb_c(&c, '\n');
    sb_str(&c, payload);
    if (c.err) {
        rc = UV_ENOMEM;
        goto out;
    }
    rc = sigv4_hash_hex(c.p, c.n, chash);
    if (rc < 0)
        goto out;
    sb_str(&sts, "AWS4-HMAC-SHA256\n");
    sb_put(&sts, date.p, date.n);
    sb_c(&sts, '\n');
    sb_put(&sts, a->scope, a->scope_len);
    sb_c(&sts, '\n');
    sb_str(&sts, chash);
    if (sts.err) {
        rc = UV_ENOMEM;
        goto out;
    }
    rc = signing_key(a, secret, slen, key);
    if (rc == 0)
        rc = hmac(key, sizeof(key), sts.p, sts.n, mac);
    if (rc == 0)
        hex_of(mac, sizeof(mac), sig);
    explicit_bzero(key, sizeof(key));
out:
    free(c.p);
    free(date.p);
    free(sts.p);
    return rc;
}

int sigv4_verify(const char *head, size_t len, const struct sigv4_auth *a, const char *payload,
                 const uint8_t *secret, size_t slen)
{
    static const unsigned forms[SIGV4_URI_FORMS] = {SIGV4_URI_RAW,
                                                    SIGV4_URI_ONCE,
                                                    SIGV4_URI_TWICE,
                                                    SIGV4_URI_RAW | SIGV4_URI_DOTS,
                                                    SIGV4_URI_ONCE | SIGV4_URI_DOTS,
                                                    SIGV4_URI_TWICE | SIGV4_URI_DOTS};
    char list[SIGV4_SIGNED_MAX + 1], sig[SIGV4_HEX_LEN + 1];

    for (size_t i = 0; i < SIGV4_URI_FORMS; i++) {
        unsigned diff = 0;
        if (sigv4_sign(head, len, a, forms[i], payload, secret, slen, 0, list, sig) < 0)
            return -1;
        for (size_t k = 0; k < SIGV4_HEX_LEN; k++)
            diff |= (unsigned)(sig[k] ^ a->sig[k]);
        if (diff == 0)
            return (int)forms[i];
    }
    return -1;
}

/* The one Authorization line of head with an AWS4-HMAC-SHA256 value. */
static int find_auth(const char *head, size_t len, struct hline *out, struct sigv4_auth *a)
{
    const char *pos = NULL;
    struct hline h;
    int n = 0;

    while (next_header(head, len, &pos, &h)) {
        if (h.name_len != 13 || strncasecmp(h.name, "Authorization", 13) != 0)
            continue;
        n++;
        if (sigv4_parse_auth(h.value, h.value_len, a, NULL) != SIGV4_ALG_HMAC)
            return UV_EINVAL;
        *out = h;
    }
    return n == 1 ? 0 : UV_EINVAL;
}

int sigv4_resign(const char *head, size_t len, unsigned form, const char *payload,
                 const uint8_t *secret, size_t slen, char **out, size_t *olen)
{
    struct sigv4_auth a;
    struct hline h = {0};
    struct sb s = {0};
    char list[SIGV4_SIGNED_MAX + 1], sig[SIGV4_HEX_LEN + 1];
    int rc = find_auth(head, len, &h, &a);

    if (rc == 0)
        rc = sigv4_sign(head, len, &a, form, payload, secret, slen, 1, list, sig);
    if (rc < 0)
        return rc;
    sb_put(&s, head, (size_t)(h.value - head));
    sb_str(&s, "AWS4-HMAC-SHA256 Credential=");
    sb_put(&s, a.key, a.key_len);
    sb_c(&s, '/');
    sb_put(&s, a.scope, a.scope_len);
    sb_str(&s, ", SignedHeaders=");
    sb_str(&s, list);
    sb_str(&s, ", Signature=");
    sb_str(&s, sig);
    sb_put(&s, h.value + h.value_len, len - (size_t)(h.value + h.value_len - head));
    if (s.err) {
        free(s.p);
        return UV_ENOMEM;
    }
    *out = s.p;
    *olen = s.n;
    return 0;
}
