/* proxy/creds.c - the credential table of a run (creds.h). */
#define _GNU_SOURCE
#include "proxy/creds.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <stdio.h>
#include <sys/random.h>

#include "settings/settings.h"

static int fill_random(uint8_t *b, size_t n)
{
    while (n > 0) {
        ssize_t r = getrandom(b, n, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -EIO;
        b += r;
        n -= (size_t)r;
    }
    return 0;
}

/* An unbiased pick in 0..n-1 from random bytes. */
static int pick(unsigned n, unsigned *out)
{
    uint8_t b;
    unsigned limit = 256u - 256u % n;

    do {
        if (fill_random(&b, 1) < 0)
            return -EIO;
    } while (b >= limit);
    *out = b % n;
    return 0;
}

static int class_of(uint8_t c)
{
    if (c >= '0' && c <= '9')
        return 1;
    if (c >= 'a' && c <= 'z')
        return 2;
    if (c >= 'A' && c <= 'Z')
        return 3;
    return 0;
}

int proxy_cred_placeholder(const uint8_t *real, size_t len, uint8_t *fake)
{
    static const char alnum[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    size_t nalnum = 0;

    for (size_t i = 0; i < len; i++)
        nalnum += class_of(real[i]) != 0;
    for (size_t i = 0; i < len; i++) {
        int k = nalnum >= SUBST_LEN_MIN ? class_of(real[i]) : 4;
        unsigned r;
        if (k == 0) {
            fake[i] = real[i];
            continue;
        }
        if (pick(k == 1 ? 10 : k == 4 ? 62 : 26, &r) < 0)
            return -EIO;
        if (k == 4)
            fake[i] = (uint8_t)alnum[r];
        else
            fake[i] = (uint8_t)((k == 1 ? 48u : k == 2 ? 97u : 65u) + r); /* '0' 'a' 'A' */
    }
    return 0;
}

static int clashes(const struct proxy_creds *t, const uint8_t *fake, size_t len)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->e[i].len == len &&
            (memcmp(t->e[i].fake, fake, len) == 0 || memcmp(t->e[i].real, fake, len) == 0))
            return 1;
    return 0;
}

int proxy_creds_aws(struct proxy_creds *t, size_t i, size_t pair, char role)
{
    struct proxy_aws *a = NULL;
    int *slot;

    if (i >= t->n || (role != 'K' && role != 'S' && role != 'T'))
        return -EINVAL;
    for (size_t k = 0; k < t->naws && a == NULL; k++)
        if (t->aws[k].pair == pair)
            a = &t->aws[k];
    if (a == NULL) {
        if (t->naws >= PROXY_CREDS_MAX)
            return -EINVAL;
        a = &t->aws[t->naws++];
        a->pair = pair;
        a->key = a->secret = a->token = -1;
    }
    slot = role == 'K' ? &a->key : role == 'S' ? &a->secret : &a->token;
    if (*slot >= 0)
        return -EINVAL;
    *slot = (int)i;
    t->e[i].aws_role = role;
    return 0;
}

int proxy_creds_add(struct proxy_creds *t, const char *name, int file, const uint8_t *real,
                    size_t len, const uint8_t *fake)
{
    struct proxy_cred *e;

    if (t->n >= PROXY_CREDS_MAX || len < SUBST_LEN_MIN || len > SUBST_LEN_MAX)
        return -EINVAL;
    e = &t->e[t->n];
    memset(e, 0, sizeof(*e));
    e->name = strdup(name);
    e->real = malloc(len);
    e->fake = malloc(len);
    if (e->name == NULL || e->real == NULL || e->fake == NULL)
        goto nomem;
    memcpy(e->real, real, len);
    e->len = e->rlen = len;
    e->file = file;
    if (fake != NULL) {
        memcpy(e->fake, fake, len);
    } else {
        int tries = 0;
        do {
            if (proxy_cred_placeholder(real, len, e->fake) < 0 || ++tries > 8) {
                explicit_bzero(e->real, len);
                free(e->real);
                free(e->fake);
                free(e->name);
                return tries > 8 ? -EINVAL : -EIO;
            }
        } while (memcmp(e->fake, real, len) == 0 || clashes(t, e->fake, len));
    }
    e->rmask = e->fake;
    if (memcmp(e->fake, real, len) == 0 || clashes(t, e->fake, len) || clashes(t, real, len)) {
        explicit_bzero(e->real, len);
        free(e->real);
        free(e->fake);
        free(e->name);
        return -EINVAL;
    }
    t->n++;
    return 0;
nomem:
    free(e->name);
    free(e->real);
    free(e->fake);
    return -ENOMEM;
}

int proxy_cred_b64_inner(const uint8_t *v, size_t len, unsigned a, uint8_t **out, size_t *olen)
{
    static const char B[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t first = (8 * a + 5) / 6, last = (8 * (a + len) - 6) / 6; /* char indices */
    uint8_t *o = malloc(last - first + 1);

    if (o == NULL)
        return -ENOMEM;
    for (size_t k = first; k <= last; k++) {
        size_t bit = 6 * k; /* of the stream: a zero bytes, then v */
        unsigned x = 0;
        for (size_t b = bit; b < bit + 6; b++) {
            size_t byte = b / 8 - a;
            x = x << 1 | ((unsigned)v[byte] >> (7 - b % 8) & 1u);
        }
        o[k - first] = (uint8_t)B[x];
    }
    *out = o;
    *olen = last - first + 1;
    return 0;
}

/* The base64 forms of v (len bytes) and of its mask m into r, f, l. */
static int b64_forms(const uint8_t *v, const uint8_t *m, size_t len, uint8_t *r[3], uint8_t *f[3],
                     size_t l[3])
{
    for (unsigned k = 0; k < 3; k++) {
        size_t l2;
        if (r[k] != NULL)
            continue;
        if (proxy_cred_b64_inner(v, len, k, &r[k], &l[k]) < 0 ||
            proxy_cred_b64_inner(m, len, k, &f[k], &l2) < 0)
            return -ENOMEM;
    }
    return 0;
}

static void b64_free(uint8_t *r[3], uint8_t *f[3], const size_t l[3])
{
    for (unsigned k = 0; k < 3; k++) {
        if (r[k] != NULL)
            explicit_bzero(r[k], l[k]);
        free(r[k]);
        free(f[k]);
        r[k] = f[k] = NULL;
    }
}

/* to_fake's layout: entry i's value at i, its base64 forms at n + 3i + k;
 * the p-th refreshable entry's value before at 4n + 4p and its base64
 * forms after it (its current value again while it has none). */
int proxy_creds_seal(struct proxy_creds *t)
{
    struct subst_pair a[SUBST_MAX], b[SUBST_MAX];
    size_t nb = t->n, nref = 0;

    for (size_t i = 0; i < t->n; i++)
        nref += t->e[i].refresh != 0;
    if (4 * (t->n + nref) > SUBST_MAX)
        return -EINVAL;
    for (size_t i = 0; i < t->n; i++) {
        struct proxy_cred *e = &t->e[i];
        a[i] = (struct subst_pair){e->fake, e->real, e->len, e->rlen};
        b[i] = (struct subst_pair){e->real, e->rmask, e->rlen, 0};
        if (b64_forms(e->real, e->rmask, e->rlen, e->b64real, e->b64fake, e->b64len) < 0)
            return -ENOMEM;
        for (unsigned k = 0; k < 3; k++)
            b[t->n + 3 * i + k] = (struct subst_pair){e->b64real[k], e->b64fake[k], e->b64len[k], 0};
        nb += 3;
    }
    for (size_t i = 0; i < t->n; i++) {
        struct proxy_cred *e = &t->e[i];
        if (!e->refresh)
            continue;
        if (e->old != NULL) {
            if (b64_forms(e->old, e->oldmask, e->oldlen, e->b64old, e->b64oldm, e->b64oldlen) < 0)
                return -ENOMEM;
            b[nb] = (struct subst_pair){e->old, e->oldmask, e->oldlen, 0};
            for (unsigned k = 0; k < 3; k++)
                b[nb + 1 + k] = (struct subst_pair){e->b64old[k], e->b64oldm[k], e->b64oldlen[k], 0};
        } else {
            b[nb] = b[i];
            for (unsigned k = 0; k < 3; k++)
                b[nb + 1 + k] = b[t->n + 3 * i + k];
        }
        nb += 4;
    }
    if (subst_set_init(&t->to_real, a, t->n) < 0 || subst_set_init(&t->to_fake, b, nb) < 0)
        return -EINVAL;
    if (nref > 0 && t->to_fake.maxlen < PROXY_CREDS_REFRESH_MAXLEN)
        t->to_fake.maxlen = PROXY_CREDS_REFRESH_MAXLEN; /* a stream's carry fits what comes */
    return 0;
}

uint64_t proxy_creds_fake_bits(const struct proxy_creds *t, uint64_t bits)
{
    uint64_t out = bits;
    size_t p = 0;

    for (size_t i = 0; i < t->n; i++) {
        if (bits & (UINT64_C(1) << i))
            out |= UINT64_C(7) << (t->n + 3 * i);
        if (t->e[i].refresh && (bits & (UINT64_C(1) << i)))
            out |= UINT64_C(15) << (4 * t->n + 4 * p);
        p += t->e[i].refresh != 0;
    }
    return out;
}

void proxy_creds_refreshable(struct proxy_creds *t, size_t i, uint64_t expires)
{
    t->e[i].refresh = 1;
    t->e[i].expires = expires;
}

int proxy_creds_resizes(const struct proxy_creds *t)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->e[i].rlen != t->e[i].len)
            return 1;
    return 0;
}

static void free_old(struct proxy_cred *e)
{
    if (e->old != NULL)
        explicit_bzero(e->old, e->oldlen);
    free(e->old);
    if (e->oldmask != e->fake)
        free(e->oldmask);
    b64_free(e->b64old, e->b64oldm, e->b64oldlen);
    e->old = e->oldmask = NULL;
    e->oldlen = 0;
}

int proxy_creds_refresh(struct proxy_creds *t, size_t i, const uint8_t *real, size_t rlen,
                        const uint8_t *mask, uint64_t expires)
{
    struct proxy_cred *e = &t->e[i], was;
    uint8_t *nr, *nm;

    if (i >= t->n || !e->refresh || rlen < SUBST_LEN_MIN || rlen > SUBST_LEN_MAX)
        return -EINVAL;
    nr = malloc(rlen);
    nm = rlen == e->len ? e->fake : malloc(rlen);
    if (nr == NULL || nm == NULL) {
        free(nr);
        if (nm != e->fake)
            free(nm);
        return -ENOMEM;
    }
    memcpy(nr, real, rlen);
    if (nm != e->fake)
        memcpy(nm, mask, rlen);
    was = *e;
    /* the current value becomes the old one (its base64 forms with it) */
    free_old(e);
    e->old = e->real;
    e->oldmask = e->rmask;
    e->oldlen = e->rlen;
    for (unsigned k = 0; k < 3; k++) {
        e->b64old[k] = e->b64real[k];
        e->b64oldm[k] = e->b64fake[k];
        e->b64oldlen[k] = e->b64len[k];
        e->b64real[k] = e->b64fake[k] = NULL;
    }
    e->real = nr;
    e->rmask = nm;
    e->rlen = rlen;
    e->expires = expires;
    e->gen++;
    if (proxy_creds_seal(t) == 0)
        return 0;
    /* back as it was: the new value dropped, the old one current again */
    b64_free(e->b64real, e->b64fake, e->b64len);
    explicit_bzero(nr, rlen);
    free(nr);
    if (nm != e->fake)
        free(nm);
    *e = was; /* was's old was freed above: its value is gone from masking */
    e->old = e->oldmask = NULL;
    e->oldlen = 0;
    for (unsigned k = 0; k < 3; k++)
        e->b64old[k] = e->b64oldm[k] = NULL;
    (void)proxy_creds_seal(t);
    return -ENOMEM;
}

void proxy_creds_clear(struct proxy_creds *t)
{
    for (size_t i = 0; i < t->n; i++) {
        struct proxy_cred *e = &t->e[i];
        free_old(e);
        explicit_bzero(e->real, e->rlen);
        free(e->real);
        if (e->rmask != e->fake)
            free(e->rmask);
        free(e->fake);
        free(e->name);
        b64_free(e->b64real, e->b64fake, e->b64len);
    }
    explicit_bzero(t, sizeof(*t));
}

/* The value of header name in a head (after the request or status line),
 * or NULL. */
char *proxy_head_value(char *head, size_t len, const char *name, size_t *vlen)
{
    size_t nl = strlen(name);
    char *p = memchr(head, '\n', len), *end = head + len;

    while (p != NULL && p + 1 < end) {
        char *line = p + 1, *eol = memchr(line, '\n', (size_t)(end - line));
        size_t ll = eol != NULL ? (size_t)(eol - line) : (size_t)(end - line);
        if (ll > nl && line[nl] == ':' && strncasecmp(line, name, nl) == 0) {
            char *v = line + nl + 1, *ve = line + ll;
            while (v < ve && (*v == ' ' || *v == '\t'))
                v++;
            while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t'))
                ve--;
            *vlen = (size_t)(ve - v);
            return v;
        }
        p = eol;
    }
    return NULL;
}

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int b64_val(char ch)
{
    const char *p = ch != '\0' ? strchr(B64, ch) : NULL;

    return p != NULL ? (int)(p - B64) : -1;
}

/* Strict base64 with padding: 0 with *olen, or -1. */
static int b64_decode(const char *in, size_t len, uint8_t *out, size_t cap, size_t *olen)
{
    size_t o = 0;

    if (len == 0 || len % 4 != 0 || len / 4 * 3 > cap)
        return -1;
    for (size_t i = 0; i < len; i += 4) {
        int v[4], pad = 0;
        for (int k = 0; k < 4; k++) {
            v[k] =
                in[i + (size_t)k] == '=' && i + 4 == len && k >= 2 ? 0 : b64_val(in[i + (size_t)k]);
            pad += in[i + (size_t)k] == '=';
            if (v[k] < 0)
                return -1;
        }
        if (pad == 1 && in[i + 2] == '=')
            return -1;
        out[o++] = (uint8_t)(v[0] << 2 | v[1] >> 4);
        if (pad < 2)
            out[o++] = (uint8_t)((v[1] & 15) << 4 | v[2] >> 2);
        if (pad < 1)
            out[o++] = (uint8_t)((v[2] & 3) << 6 | v[3]);
    }
    *olen = o;
    return 0;
}

static void b64_encode(const uint8_t *in, size_t len, char *out)
{
    for (size_t i = 0; i < len; i += 3) {
        unsigned v = (unsigned)in[i] << 16 | (i + 1 < len ? (unsigned)in[i + 1] << 8 : 0) |
                     (i + 2 < len ? in[i + 2] : 0);
        *out++ = B64[v >> 18 & 63];
        *out++ = B64[v >> 12 & 63];
        *out++ = i + 1 < len ? B64[v >> 6 & 63] : '=';
        *out++ = i + 2 < len ? B64[v & 63] : '=';
    }
}

/* One "Basic B64" credentials value (v, vlen: trimmed): the decoded
 * credentials scanned, and written back re-encoded when something was
 * replaced (the same length: base64 without its padding stays without).
 * The bits replaced and found-and-left go to *rep and *blk. */
static void basic_one(const struct proxy_creds *t, uint64_t allow, char *v, size_t vlen,
                      uint64_t *rep, uint64_t *blk)
{
    size_t dlen, b64len, plen;
    char *b64, *tmp;
    uint8_t *dec;
    uint64_t r, b = 0;

    if (vlen < 7 || strncasecmp(v, "Basic", 5) != 0 || (v[5] != ' ' && v[5] != '\t'))
        return;
    b64 = v + 5;
    b64len = vlen - 5;
    while (b64len > 0 && (*b64 == ' ' || *b64 == '\t')) { /* rt-12: a tab, several */
        b64++;
        b64len--;
    }
    if (b64len % 4 == 1)
        return;
    plen = (b64len + 3) / 4 * 4; /* rt-12: padding left out is read as there */
    tmp = malloc(plen);
    dec = malloc(plen / 4 * 3 + 1);
    if (tmp == NULL || dec == NULL) {
        free(tmp);
        free(dec);
        return;
    }
    memcpy(tmp, b64, b64len);
    memset(tmp + b64len, '=', plen - b64len);
    if (b64_decode(tmp, plen, dec, plen / 4 * 3, &dlen) == 0) {
        r = subst_buffer(&t->to_real, allow, dec, dlen, &b);
        if (r != 0) {
            b64_encode(dec, dlen, tmp); /* plen characters: dlen did not change */
            memcpy(b64, tmp, b64len);
        }
        *rep |= r;
        *blk |= b;
    }
    explicit_bzero(dec, plen / 4 * 3 + 1);
    explicit_bzero(tmp, plen);
    free(dec);
    free(tmp);
}

/* Every "Authorization: Basic B64" of the head (rt-12: not only the
 * first), by basic_one. */
static void basic_credentials(const struct proxy_creds *t, uint64_t allow, char *head, size_t len,
                              uint64_t *rep, uint64_t *blk)
{
    char *p = head, *end = head + len;

    for (;;) {
        size_t vlen;
        char *v = proxy_head_value(p, (size_t)(end - p), "Authorization", &vlen), *eol;
        if (v == NULL)
            return;
        basic_one(t, allow, v, vlen, rep, blk);
        eol = memchr(v, '\n', (size_t)(end - v));
        if (eol == NULL)
            return;
        p = eol; /* proxy_head_value skips its first line */
    }
}

uint64_t proxy_creds_head(const struct proxy_creds *t, uint64_t allow, char *head, size_t len,
                          uint64_t *blocked)
{
    uint64_t blk = 0, rep = subst_buffer(&t->to_real, allow, (uint8_t *)head, len, &blk);

    basic_credentials(t, allow, head, len, &rep, &blk);
    if (blocked != NULL)
        *blocked = blk;
    return rep;
}

/* ------------------------------------------------------------------------ */
/* Heads that change length (a refreshed value of another length)           */

#define HEAD_GROW_MAX (1u << 20)

struct grow {
    uint8_t *p;
    size_t n, cap;
};

static void grow_free(struct grow *g)
{
    if (g->p != NULL)
        explicit_bzero(g->p, g->cap);
    free(g->p);
    memset(g, 0, sizeof(*g));
}

/* Appends (a new buffer when full: the old one is wiped, never realloc'd
 * with a value left behind). 0, -E2BIG or -ENOMEM. */
static int grow_add(struct grow *g, const uint8_t *b, size_t n)
{
    if (g->n + n > HEAD_GROW_MAX)
        return -E2BIG;
    if (g->n + n > g->cap) {
        size_t cap = g->n + n > 2 * g->cap ? g->n + n + 256 : 2 * g->cap;
        uint8_t *nb = malloc(cap);
        if (nb == NULL)
            return -ENOMEM;
        if (g->n > 0)
            memcpy(nb, g->p, g->n);
        if (g->p != NULL)
            explicit_bzero(g->p, g->cap);
        free(g->p);
        g->p = nb;
        g->cap = cap;
    }
    memcpy(g->p + g->n, b, n);
    g->n += n;
    return 0;
}

static int grow_emit(void *arg, const uint8_t *b, size_t n, int pair)
{
    (void)pair;
    return grow_add(arg, b, n);
}

/* The Basic credentials at b64[0..blen) of g's head: decoded, scanned into
 * *out re-encoded (with padding) when something was replaced (*olen its
 * length), else *out NULL. 0, -E2BIG or -ENOMEM. */
static int basic_grow_one(const struct proxy_creds *t, uint64_t allow, const char *b64,
                          size_t blen, char **out, size_t *olen, uint64_t *rep, uint64_t *blk)
{
    size_t plen = (blen + 3) / 4 * 4, dlen;
    char *tmp = malloc(plen);
    uint8_t *dec = malloc(plen / 4 * 3 + 1);
    struct grow g = {0};
    uint64_t r = 0, b = 0;
    int rc = 0;

    *out = NULL;
    if (tmp == NULL || dec == NULL) {
        rc = -ENOMEM;
        goto done;
    }
    memcpy(tmp, b64, blen);
    memset(tmp + blen, '=', plen - blen);
    if (blen % 4 == 1 || b64_decode(tmp, plen, dec, plen / 4 * 3, &dlen) != 0)
        goto done;
    rc = subst_buffer_emit(&t->to_real, allow, dec, dlen, &r, &b, grow_emit, &g);
    *rep |= r;
    *blk |= b;
    if (rc == 0 && r != 0) {
        *olen = (g.n + 2) / 3 * 4;
        *out = malloc(*olen);
        if (*out == NULL)
            rc = -ENOMEM;
        else
            b64_encode(g.p, g.n, *out);
    }
done:
    if (dec != NULL)
        explicit_bzero(dec, plen / 4 * 3 + 1);
    if (tmp != NULL)
        explicit_bzero(tmp, plen);
    free(dec);
    free(tmp);
    grow_free(&g);
    return rc;
}

/* Every "Authorization: Basic" of g's head, by basic_grow_one, spliced. */
static int basic_grow(const struct proxy_creds *t, uint64_t allow, struct grow *g, uint64_t *rep,
                      uint64_t *blk)
{
    size_t from = 0;

    for (;;) {
        char *head = (char *)g->p, *v, *b64, *enc = NULL;
        size_t vlen, blen, elen = 0;
        struct grow ng = {0};
        int rc;
        v = proxy_head_value(head + from, g->n - from, "Authorization", &vlen);
        if (v == NULL)
            return 0;
        from = (size_t)(v - head) + vlen;
        if (vlen < 7 || strncasecmp(v, "Basic", 5) != 0 || (v[5] != ' ' && v[5] != '\t'))
            continue;
        b64 = v + 5;
        blen = vlen - 5;
        while (blen > 0 && (*b64 == ' ' || *b64 == '\t')) {
            b64++;
            blen--;
        }
        rc = basic_grow_one(t, allow, b64, blen, &enc, &elen, rep, blk);
        if (rc < 0 || enc == NULL) {
            if (rc < 0)
                return rc;
            continue;
        }
        rc = grow_add(&ng, g->p, (size_t)(b64 - head));
        if (rc == 0)
            rc = grow_add(&ng, (const uint8_t *)enc, elen);
        if (rc == 0)
            rc = grow_add(&ng, g->p + (b64 - head) + blen, g->n - (size_t)(b64 - head) - blen);
        explicit_bzero(enc, elen);
        free(enc);
        if (rc < 0) {
            grow_free(&ng);
            return rc;
        }
        from = (size_t)(b64 - head) + elen;
        grow_free(g);
        *g = ng;
    }
}

int proxy_creds_head_grow(const struct proxy_creds *t, uint64_t allow, char **head, size_t *len,
                          uint64_t *replaced, uint64_t *blocked)
{
    struct grow g = {0};
    uint64_t r = 0, b = 0;
    int rc;

    if (!proxy_creds_resizes(t)) {
        *replaced = proxy_creds_head(t, allow, *head, *len, blocked);
        return 0;
    }
    rc = subst_buffer_emit(&t->to_real, allow, (uint8_t *)*head, *len, &r, &b, grow_emit, &g);
    if (rc == 0)
        rc = basic_grow(t, allow, &g, &r, &b);
    if (rc < 0) {
        grow_free(&g);
        return rc;
    }
    explicit_bzero(*head, *len);
    free(*head);
    *head = (char *)g.p; /* the caller frees it (plain free: wiped above where it moved) */
    *len = g.n;
    *replaced = r;
    *blocked = b;
    return 0;
}

/* v (vl bytes) is entry e's placeholder. */
static int is_fake(const struct proxy_cred *e, const char *v, size_t vl)
{
    return vl == e->len && memcmp(v, e->fake, vl) == 0;
}

/* Decoded Basic credentials "USER:PASSWORD": one side the placeholder, the
 * other shorter than any secret sluice masks (16 bytes), so no credential
 * of the client's own rides along. */
static int basic_alone(const struct proxy_cred *e, const char *b64, size_t len)
{
    size_t dlen;
    uint8_t *dec = malloc(len / 4 * 3 + 1);
    const uint8_t *colon;
    int ok = 0;

    if (dec != NULL && b64_decode(b64, len, dec, len / 4 * 3, &dlen) == 0 &&
        (colon = memchr(dec, ':', dlen)) != NULL) {
        size_t ul = (size_t)(colon - dec), pl = dlen - ul - 1;
        ok = (is_fake(e, (const char *)dec, ul) && pl < SUBST_LEN_MIN) ||
             (is_fake(e, (const char *)colon + 1, pl) && ul < SUBST_LEN_MIN);
    }
    if (dec != NULL)
        explicit_bzero(dec, len / 4 * 3 + 1);
    free(dec);
    return ok;
}

int proxy_creds_required(const struct proxy_creds *t, size_t i, const char *name, char *head,
                         size_t len)
{
    const struct proxy_cred *e = &t->e[i];
    size_t vl, other, w = 0;
    char *v = proxy_head_value(head, len, name, &vl), *rest;

    if (v == NULL || proxy_head_value(v, len - (size_t)(v - head), name, &other) != NULL)
        return 0; /* absent, or given twice */
    if (is_fake(e, v, vl))
        return 1;
    while (w < vl && w <= 32 &&
           ((v[w] >= 'A' && v[w] <= 'Z') || (v[w] >= 'a' && v[w] <= 'z') ||
            (v[w] >= '0' && v[w] <= '9') || v[w] == '-' || v[w] == '_'))
        w++;
    if (w == 0 || w > 32 || w >= vl || v[w] != ' ')
        return 0;
    rest = v + w;
    while (rest < v + vl && *rest == ' ')
        rest++;
    if (is_fake(e, rest, (size_t)(v + vl - rest)))
        return 1;
    return w == 5 && strncasecmp(v, "Basic", 5) == 0 &&
           basic_alone(e, rest, (size_t)(v + vl - rest));
}

int proxy_creds_settings_check(const struct settings *s, struct settings_error *err)
{
    const struct settings_list *lists[3] = {&s->credentials.env_vars, &s->credentials.files,
                                            &s->credentials.aws_pairs};

    for (size_t l = 0; l < 3; l++)
        for (size_t i = 0; i < lists[l]->n; i++) {
            const struct settings_item *it = &lists[l]->items[i];
            struct settings_credential cr;
            if (settings_credential_split(it->value, &cr) < 0)
                continue;
            snprintf(err->msg, sizeof(err->msg), "%s:%u:%u: %s[%zu]: refused by sluice proxy: %s",
                     it->file, it->line, it->col, it->list, it->index,
                     cr.mask ? "mode \"mask\" hands a sandbox a placeholder, and sluice proxy "
                               "has no sandbox to mask (its clients hold their own secrets); "
                               "use credentials with sluice run, or credentials.headers for a "
                               "gateway that sets headers itself"
                             : "mode \"deny\" hides a secret from a sandbox, and sluice proxy "
                               "has no sandbox; use credentials with sluice run");
            return -1;
        }
    return 0;
}
