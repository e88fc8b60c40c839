/* tests/proxy/test_subst.c - the credential substitution scanner
 * (proxy/subst.c): placeholders split at every offset and fed a byte at a
 * time give what the whole buffer gives; overlapping, nested (one pair a
 * prefix of another: the longest wins) and repeated placeholders; a pair
 * not allowed is left and reported; a pair held back at the end is
 * released; a huge body in chunks of every shape; bad sets refused.
 */
#include <setjmp.h> /* cmocka needs these first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/subst.h"

#define P1 "PLACEHOLDER_one_0123456789"
#define R1 "realsecret_one_ABCDEFGHIJ"
#define P2 "xq7Z9kLmN2pR4sT6vW8yB0cD"
#define R2 "REAL-TWO-abcdefghijklmno"

static void set2(struct subst_set *s)
{
    static const struct subst_pair p[] = {
        {(const uint8_t *)P1, (const uint8_t *)R1 "!", sizeof(P1) - 1, 0},
        {(const uint8_t *)P2, (const uint8_t *)R2, sizeof(P2) - 1, 0},
    };
    assert_int_equal(sizeof(P1), sizeof(R1 "!"));
    assert_int_equal(sizeof(P2), sizeof(R2));
    assert_int_equal(subst_set_init(s, p, 2), 0);
}

/* Feeds text in pieces cut at cuts[] (sorted); returns the output. */
static char *feed_cuts(const struct subst_set *s, uint64_t allow, const char *text, size_t len,
                       const size_t *cuts, size_t ncuts, uint64_t *replaced, uint64_t *blocked)
{
    struct subst_stream st;
    uint8_t *out = malloc(len + 1), *tmp = malloc(len + s->maxlen + 1);
    size_t at = 0, n = 0;

    assert_non_null(out);
    assert_non_null(tmp);
    assert_int_equal(subst_stream_init(&st, s, allow), 0);
    for (size_t c = 0; c <= ncuts; c++) {
        size_t end = c < ncuts ? cuts[c] : len, got;
        got = subst_feed(&st, (const uint8_t *)text + at, end - at, tmp);
        assert_true(n + got <= len);
        memcpy(out + n, tmp, got);
        n += got;
        at = end;
        assert_true(st.ncarry < s->maxlen);
    }
    n += subst_finish(&st, out + n);
    assert_int_equal(n, len);
    out[n] = '\0';
    *replaced = st.replaced;
    *blocked = st.blocked;
    subst_stream_free(&st);
    free(tmp);
    return (char *)out;
}

static void whole(const struct subst_set *s, uint64_t allow, const char *text, char *out,
                  uint64_t *replaced, uint64_t *blocked)
{
    size_t len = strlen(text);

    memcpy(out, text, len + 1);
    *replaced = subst_buffer(s, allow, (uint8_t *)out, len, blocked);
}

static void test_every_split(void **state)
{
    static const char *const texts[] = {
        "Authorization: Bearer " P1 "\r\nX-Other: " P2 "\r\n",
        P1 P2 P1,                             /* back to back */
        "PLACEHOLDER_" P1 "PLACE",            /* a false start before, a prefix at the end */
        "xq7Z9" P2 "xq7Z9kLmN2pR4sT6vW8yB0c", /* the last one short by a byte */
        "no placeholder at all, but P and x and PLACEHOLDER_one_012345678",
        "",
    };
    struct subst_set s;

    (void)state;
    set2(&s);
    for (size_t t = 0; t < sizeof(texts) / sizeof(texts[0]); t++) {
        const char *text = texts[t];
        size_t len = strlen(text);
        char *want = malloc(len + 1);
        uint64_t wr, wb, r, b;
        whole(&s, 3, text, want, &wr, &wb);
        /* one cut at every offset, two cuts at every pair of offsets */
        for (size_t i = 0; i <= len; i++)
            for (size_t j = i; j <= len; j++) {
                size_t cuts[2] = {i, j};
                char *got = feed_cuts(&s, 3, text, len, cuts, 2, &r, &b);
                if (strcmp(got, want) != 0)
                    print_error("text %zu cuts %zu,%zu:\n got %s\nwant %s\n", t, i, j, got, want);
                assert_string_equal(got, want);
                assert_true(r == wr && b == wb);
                free(got);
            }
        /* a byte at a time */
        {
            size_t *cuts = calloc(len + 1, sizeof(*cuts));
            char *got;
            for (size_t i = 0; i < len; i++)
                cuts[i] = i;
            got = feed_cuts(&s, 3, text, len, cuts, len, &r, &b);
            assert_string_equal(got, want);
            free(got);
            free(cuts);
        }
        free(want);
    }
}

static void test_values(void **state)
{
    struct subst_set s;
    char out[256];
    uint64_t r, b;

    (void)state;
    set2(&s);
    whole(&s, 3, "a " P1 " b " P2 " c " P1, out, &r, &b);
    assert_string_equal(out, "a " R1 "! b " R2 " c " R1 "!");
    assert_true(r == 3 && b == 0);
    /* pair 1 not allowed here: left as it is and reported */
    whole(&s, 1, "a " P1 " b " P2, out, &r, &b);
    assert_string_equal(out, "a " R1 "! b " P2);
    assert_true(r == 1 && b == 2);
    whole(&s, 0, P1 P2, out, &r, &b);
    assert_string_equal(out, P1 P2);
    assert_true(r == 0 && b == 3);
    /* a replaced value is never scanned again (R1 contains no placeholder,
     * but a placeholder's own bytes right after one are found) */
    whole(&s, 3, P1 P1, out, &r, &b);
    assert_string_equal(out, R1 "!" R1 "!");
}

/* One pair a prefix of another, and two that overlap: the longest at the
 * earliest position wins, the same for every split. */
static void test_overlap(void **state)
{
    static const struct subst_pair p[] = {
        {(const uint8_t *)"AAAAAAAAAAAAAAAA", (const uint8_t *)"1111111111111111", 16, 0},
        {(const uint8_t *)"AAAAAAAAAAAAAAAAB", (const uint8_t *)"22222222222222222", 17, 0},
        {(const uint8_t *)"BAAAAAAAAAAAAAAAC", (const uint8_t *)"33333333333333333", 17, 0},
    };
    static const struct {
        const char *in, *out;
    } rows[] = {
        {"AAAAAAAAAAAAAAAAB", "22222222222222222"},
        {"AAAAAAAAAAAAAAAAC", "1111111111111111C"},
        {"AAAAAAAAAAAAAAAAAB", "1111111111111111AB"},
        {"xAAAAAAAAAAAAAAAABAAAAAAAAAAAAAAACx", "x22222222222222222AAAAAAAAAAAAAAACx"},
        {"BAAAAAAAAAAAAAAAC", "33333333333333333"},
        {"AAAAAAAAAAAAAAAA", "1111111111111111"},
        {"AAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAA"},
    };
    struct subst_set s;

    (void)state;
    assert_int_equal(subst_set_init(&s, p, 3), 0);
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        size_t len = strlen(rows[i].in);
        char out[64];
        uint64_t r, b;
        whole(&s, 7, rows[i].in, out, &r, &b);
        assert_string_equal(out, rows[i].out);
        for (size_t c = 0; c <= len; c++) {
            char *got = feed_cuts(&s, 7, rows[i].in, len, &c, 1, &r, &b);
            assert_string_equal(got, rows[i].out);
            free(got);
        }
    }
}

/* 32 MiB in chunks of sizes that drift against the placeholders, one
 * placeholder every 4099 bytes: each is found, the output is exact. */
static void test_huge(void **state)
{
    struct subst_set s;
    struct subst_stream st;
    size_t total = 32u << 20, step = 4099, plen = sizeof(P2) - 1, at = 0, n = 0, found = 0;
    uint8_t *in = malloc(total), *out = malloc(total), *tmp = malloc(70000 + 64);
    size_t sizes[] = {1, 7, 16, 23, 24, 25, 4096, 65536, 65535};
    size_t k = 0;

    (void)state;
    assert_non_null(in);
    assert_non_null(out);
    assert_non_null(tmp);
    set2(&s);
    for (size_t i = 0; i < total; i++)
        in[i] = (uint8_t)('a' + i % 7);
    for (size_t i = 100; i + plen <= total; i += step)
        memcpy(in + i, P2, plen);
    assert_int_equal(subst_stream_init(&st, &s, 3), 0);
    while (at < total) {
        size_t len = sizes[k++ % (sizeof(sizes) / sizeof(sizes[0]))], got;
        if (len > total - at)
            len = total - at;
        got = subst_feed(&st, in + at, len, tmp);
        memcpy(out + n, tmp, got);
        n += got;
        at += len;
    }
    n += subst_finish(&st, out + n);
    assert_int_equal(n, total);
    for (size_t i = 0; i < total; i++) {
        if (i >= 100 && (i - 100) % step == 0 && i + plen <= total) {
            assert_memory_equal(out + i, R2, plen);
            found++;
            i += plen - 1;
        } else if (out[i] != in[i]) {
            fail_msg("byte %zu changed", i);
        }
    }
    assert_int_equal(found, (total - 100 - plen) / step + 1);
    subst_stream_free(&st);
    free(in);
    free(out);
    free(tmp);
}

static void test_bad_sets(void **state)
{
    struct subst_set s;
    struct subst_pair p[2] = {
        {(const uint8_t *)"short", (const uint8_t *)"SHORT", 5, 0},
        {(const uint8_t *)P2, (const uint8_t *)R2, sizeof(P2) - 1, 0},
    };
    struct subst_pair many[SUBST_MAX + 1];

    (void)state;
    assert_int_equal(subst_set_init(&s, p, 2), -EINVAL);
    p[0] = p[1];
    for (size_t i = 0; i <= SUBST_MAX; i++)
        many[i] = p[1];
    assert_int_equal(subst_set_init(&s, many, SUBST_MAX + 1), -EINVAL);
    assert_int_equal(subst_set_init(&s, p, 0), 0);
    {
        char buf[] = P2;
        assert_int_equal(subst_buffer(&s, 1, (uint8_t *)buf, strlen(buf), NULL), 0);
        assert_string_equal(buf, P2);
    }
}

/* One from in two pairs (two values' base64 forms can share the text
 * their bytes alone decide): the first pair the stream allows is used,
 * else the first is blocked; the set builds. */
static void test_shared_from(void **state)
{
    struct subst_set s;
    const struct subst_pair p[3] = {
        {(const uint8_t *)"REALVALUE-SHARED-1234", (const uint8_t *)"fake-A-xxxxxxxxxxxxxx", 21, 0},
        {(const uint8_t *)"REALVALUE-SHARED-1234", (const uint8_t *)"fake-B-yyyyyyyyyyyyyy", 21, 0},
        {(const uint8_t *)"OTHERVALUE-0123456789", (const uint8_t *)"fake-C-zzzzzzzzzzzzzz", 21, 0},
    };
    char buf[64];
    uint64_t blocked;

    (void)state;
    assert_int_equal(subst_set_init(&s, p, 3), 0);
    snprintf(buf, sizeof(buf), "%s", "x REALVALUE-SHARED-1234 y");
    assert_int_equal(subst_buffer(&s, 2, (uint8_t *)buf, strlen(buf), &blocked), 2);
    assert_string_equal(buf, "x fake-B-yyyyyyyyyyyyyy y");
    snprintf(buf, sizeof(buf), "%s", "x REALVALUE-SHARED-1234 y");
    assert_int_equal(subst_buffer(&s, 3, (uint8_t *)buf, strlen(buf), &blocked), 1);
    assert_string_equal(buf, "x fake-A-xxxxxxxxxxxxxx y");
    snprintf(buf, sizeof(buf), "%s", "x REALVALUE-SHARED-1234 y");
    assert_int_equal(subst_buffer(&s, 4, (uint8_t *)buf, strlen(buf), &blocked), 0);
    assert_int_equal(blocked, 1);
    assert_string_equal(buf, "x REALVALUE-SHARED-1234 y");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_split), cmocka_unit_test(test_values),
        cmocka_unit_test(test_overlap),     cmocka_unit_test(test_huge),
        cmocka_unit_test(test_bad_sets),    cmocka_unit_test(test_shared_from),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
