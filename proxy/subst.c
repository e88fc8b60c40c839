/* proxy/subst.c - the credential substitution scanner (subst.h). */
#include "proxy/subst.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int subst_set_init(struct subst_set *s, const struct subst_pair *pairs, size_t n)
{
    memset(s, 0, sizeof(*s));
    if (n > SUBST_MAX)
        return -EINVAL;
    for (size_t i = 0; i < n; i++) {
        if (pairs[i].len < SUBST_LEN_MIN || pairs[i].len > SUBST_LEN_MAX)
            return -EINVAL;
        s->pairs[i] = pairs[i];
        s->first[pairs[i].from[0]] = 1;
        if (pairs[i].len > s->maxlen)
            s->maxlen = pairs[i].len;
    }
    s->n = n;
    return 0;
}

/* At b[0..avail): the pair decided there (the longest; of pairs with the
 * same from, the first ALLOW has, else the first). Returns its index, -1
 * when none matches, or -2 when the answer needs bytes past avail (only
 * when !final). */
static int decide(const struct subst_set *s, const uint8_t *b, size_t avail, int final,
                  uint64_t allow)
{
    int best = -1;

    if (!s->first[b[0]])
        return -1;
    for (size_t k = 0; k < s->n; k++) {
        const struct subst_pair *p = &s->pairs[k];
        if (p->len <= avail) {
            int better = best < 0 || p->len > s->pairs[best].len ||
                         (p->len == s->pairs[best].len && !(allow & (UINT64_C(1) << best)) &&
                          (allow & (UINT64_C(1) << k)));
            if (better && memcmp(b, p->from, p->len) == 0)
                best = (int)k;
        } else if (!final && memcmp(b, p->from, avail) == 0) {
            return -2; /* a longer pair may still start here */
        }
    }
    return best;
}

static int resizes(const struct subst_pair *p)
{
    return p->tolen != 0 && p->tolen != p->len;
}

/* Rewrites b[0..len) in place up to the first position that needs more
 * bytes; returns how many bytes are decided. With var, it stops at an
 * allowed pair of another length instead (*var its index, the return its
 * position; else *var is -1); without, such a pair is left and blocked. */
static size_t scan(const struct subst_set *s, uint64_t allow, uint8_t *b, size_t len, int final,
                   uint64_t *replaced, uint64_t *blocked, int *var)
{
    size_t i = 0;

    if (var != NULL)
        *var = -1;
    while (i < len) {
        int k = decide(s, b + i, len - i, final, allow);
        if (k == -2)
            return i;
        if (k < 0) {
            i++;
            continue;
        }
        if ((allow & (UINT64_C(1) << k)) && resizes(&s->pairs[k]) && var != NULL) {
            *var = k;
            return i;
        }
        if ((allow & (UINT64_C(1) << k)) && !resizes(&s->pairs[k])) {
            memcpy(b + i, s->pairs[k].to, s->pairs[k].len);
            *replaced |= UINT64_C(1) << k;
        } else {
            *blocked |= UINT64_C(1) << k;
        }
        i += s->pairs[k].len;
    }
    return len;
}

int subst_stream_init(struct subst_stream *st, const struct subst_set *s, uint64_t allow)
{
    memset(st, 0, sizeof(*st));
    st->set = s;
    st->allow = allow;
    if (s->maxlen > 1 && (st->carry = malloc(s->maxlen - 1)) == NULL)
        return -ENOMEM;
    return 0;
}

void subst_stream_free(struct subst_stream *st)
{
    free(st->carry);
    st->carry = NULL;
    st->ncarry = 0;
}

size_t subst_feed(struct subst_stream *st, const uint8_t *in, size_t len, uint8_t *out)
{
    size_t total = st->ncarry + len, done;

    if (st->set->n == 0) {
        memmove(out, in, len);
        return len;
    }
    if (st->ncarry > 0)
        memcpy(out, st->carry, st->ncarry);
    memmove(out + st->ncarry, in, len);
    done = scan(st->set, st->allow, out, total, 0, &st->replaced, &st->blocked, NULL);
    /* what is held back is shorter than the longest pair: it started a
     * partial match at done */
    st->ncarry = total - done;
    if (st->ncarry > 0)
        memcpy(st->carry, out + done, st->ncarry);
    return done;
}

size_t subst_finish(struct subst_stream *st, uint8_t *out)
{
    size_t n = st->ncarry;

    if (n == 0)
        return 0;
    memcpy(out, st->carry, n);
    (void)scan(st->set, st->allow, out, n, 1, &st->replaced, &st->blocked, NULL);
    st->ncarry = 0;
    return n;
}

uint64_t subst_buffer(const struct subst_set *s, uint64_t allow, uint8_t *buf, size_t len,
                      uint64_t *blocked)
{
    uint64_t replaced = 0, b = 0;

    if (s->n > 0)
        (void)scan(s, allow, buf, len, 1, &replaced, &b, NULL);
    if (blocked != NULL)
        *blocked = b;
    return replaced;
}

/* b[0..len) scanned: runs and pairs of another length emitted; *done the
 * bytes decided. 0 or emit's negative value. */
static int emit_scan(const struct subst_set *s, uint64_t allow, uint8_t *b, size_t len, int final,
                     uint64_t *replaced, uint64_t *blocked, subst_emit_fn emit, void *arg,
                     size_t *done)
{
    size_t at = 0;
    int rc;

    for (;;) {
        int var;
        size_t i = at;
        if (s->n > 0)
            i += scan(s, allow, b + at, len - at, final, replaced, blocked, &var);
        else {
            i = len;
            var = -1;
        }
        if (i > at && (rc = emit(arg, b + at, i - at, -1)) < 0)
            return rc;
        if (var < 0) {
            *done = i;
            return 0;
        }
        *replaced |= UINT64_C(1) << var;
        rc = emit(arg, s->pairs[var].to, s->pairs[var].tolen, var);
        if (rc < 0)
            return rc;
        at = i + s->pairs[var].len;
    }
}

int subst_feed_emit(struct subst_stream *st, const uint8_t *in, size_t len, uint8_t *work,
                    subst_emit_fn emit, void *arg)
{
    size_t total = st->ncarry + len, done = 0;
    int rc;

    if (st->ncarry > 0)
        memcpy(work, st->carry, st->ncarry);
    memmove(work + st->ncarry, in, len);
    rc = emit_scan(st->set, st->allow, work, total, 0, &st->replaced, &st->blocked, emit, arg,
                   &done);
    if (rc < 0)
        return rc;
    st->ncarry = total - done;
    if (st->ncarry > 0)
        memcpy(st->carry, work + done, st->ncarry);
    return 0;
}

int subst_finish_emit(struct subst_stream *st, uint8_t *work, subst_emit_fn emit, void *arg)
{
    size_t n = st->ncarry, done = 0;

    if (n == 0)
        return 0;
    memcpy(work, st->carry, n);
    st->ncarry = 0;
    return emit_scan(st->set, st->allow, work, n, 1, &st->replaced, &st->blocked, emit, arg, &done);
}

int subst_buffer_emit(const struct subst_set *s, uint64_t allow, uint8_t *buf, size_t len,
                      uint64_t *replaced, uint64_t *blocked, subst_emit_fn emit, void *arg)
{
    size_t done = 0;

    *replaced = *blocked = 0;
    return emit_scan(s, allow, buf, len, 1, replaced, blocked, emit, arg, &done);
}
