/* tests/fuzz/fuzz_subst.c - the credential substitution scanner
 * (proxy/subst.c).
 *
 * Input: a control byte (bits 0-1: 1..4 pairs; bits 2-5: the allow mask),
 * then for each pair a length byte (16 + b % 24) and that many bytes (each
 * folded onto "AB" when bit 6 of the control byte is set, so pairs overlap,
 * nest and repeat), then the body (folded the same way).
 *
 * Checks: the body fed whole (subst_buffer), in chunks sized from a PRNG
 * seeded by the input, and a byte at a time gives the same output and the
 * same replaced and blocked bits; the output has the body's length; it
 * equals a reference scanner written from subst.h's rule (at each position
 * the longest pair that matches, then past it); a pair not allowed is
 * never replaced; nothing is held back past the longest pair's length.
 * Every call gets an exact-size heap copy (ASan catches an overrun).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "proxy/subst.h"

static void reference(const struct subst_pair *p, size_t n, uint64_t allow, const uint8_t *in,
                      size_t len, uint8_t *out, uint64_t *rep, uint64_t *blk)
{
    size_t i = 0;

    memcpy(out, in, len);
    *rep = *blk = 0;
    while (i < len) {
        size_t best = n;
        for (size_t k = 0; k < n; k++)
            if (p[k].len <= len - i && memcmp(in + i, p[k].from, p[k].len) == 0 &&
                (best == n || p[k].len > p[best].len))
                best = k;
        if (best == n) {
            i++;
            continue;
        }
        if (allow & (UINT64_C(1) << best)) {
            memcpy(out + i, p[best].to, p[best].len);
            *rep |= UINT64_C(1) << best;
        } else {
            *blk |= UINT64_C(1) << best;
        }
        i += p[best].len;
    }
}

static void streamed(const struct subst_set *s, uint64_t allow, const uint8_t *body, size_t len,
                     uint64_t *seed, int bytewise, uint8_t *out, uint64_t *rep, uint64_t *blk)
{
    struct subst_stream st;
    size_t at = 0, n = 0;

    FUZZ_CHECK(subst_stream_init(&st, s, allow) == 0);
    while (at < len) {
        size_t chunk = bytewise ? 1 : 1 + (size_t)(fuzz_rand(seed) % 40);
        uint8_t *in, *tmp;
        size_t got;
        if (chunk > len - at)
            chunk = len - at;
        in = malloc(chunk);
        tmp = malloc(st.ncarry + chunk);
        FUZZ_CHECK(in != NULL && tmp != NULL);
        memcpy(in, body + at, chunk);
        got = subst_feed(&st, in, chunk, tmp);
        FUZZ_CHECK(n + got <= len);
        memcpy(out + n, tmp, got);
        n += got;
        at += chunk;
        FUZZ_CHECK(st.ncarry < s->maxlen || s->maxlen == 0);
        free(in);
        free(tmp);
    }
    {
        uint8_t *tmp = malloc(st.ncarry + 1);
        FUZZ_CHECK(tmp != NULL);
        size_t got = subst_finish(&st, tmp);
        FUZZ_CHECK(n + got == len);
        memcpy(out + n, tmp, got);
        free(tmp);
    }
    *rep = st.replaced;
    *blk = st.blocked;
    subst_stream_free(&st);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct subst_pair pairs[4];
    uint8_t keys[4][40], vals[4][40];
    struct subst_set s;
    size_t np, at = 1, len;
    uint64_t allow, seed = fuzz_hash(data, size), r0, b0, r1, b1, r2, b2, r3, b3;
    uint8_t *body, *w, *a, *b, *ref;
    int fold;

    if (size < 1)
        return 0;
    np = 1 + (data[0] & 3u);
    allow = (data[0] >> 2) & 15u;
    fold = (data[0] >> 6) & 1;
    for (size_t k = 0; k < np; k++) {
        size_t l;
        if (at >= size)
            return 0;
        l = 16 + data[at++] % 24u;
        if (size - at < l)
            return 0;
        for (size_t i = 0; i < l; i++) {
            keys[k][i] = fold ? (uint8_t)('A' + (data[at + i] & 1u)) : data[at + i];
            vals[k][i] = (uint8_t)('0' + k); /* never a pair's byte when folded */
        }
        pairs[k] = (struct subst_pair){keys[k], vals[k], l, 0};
        at += l;
    }
    if (subst_set_init(&s, pairs, np) < 0)
        return 0; /* a pair given twice */
    len = size - at;
    body = malloc(len + 1);
    w = malloc(len + 1);
    a = malloc(len + 1);
    b = malloc(len + 1);
    ref = malloc(len + 1);
    FUZZ_CHECK(body && w && a && b && ref);
    for (size_t i = 0; i < len; i++)
        body[i] = fold ? (uint8_t)('A' + (data[at + i] & 1u)) : data[at + i];

    reference(pairs, np, allow, body, len, ref, &r0, &b0);
    memcpy(w, body, len);
    r1 = subst_buffer(&s, allow, w, len, &b1);
    streamed(&s, allow, body, len, &seed, 0, a, &r2, &b2);
    streamed(&s, allow, body, len, &seed, 1, b, &r3, &b3);
    FUZZ_CHECK(len == 0 || memcmp(w, ref, len) == 0);
    FUZZ_CHECK(len == 0 || memcmp(a, ref, len) == 0);
    FUZZ_CHECK(len == 0 || memcmp(b, ref, len) == 0);
    FUZZ_CHECK(r1 == r0 && r2 == r0 && r3 == r0);
    FUZZ_CHECK(b1 == b0 && b2 == b0 && b3 == b0);
    FUZZ_CHECK((r0 & ~allow) == 0 && (b0 & allow) == 0);
    free(body);
    free(w);
    free(a);
    free(b);
    free(ref);
    return 0;
}
