/* tests/proxy/test_creds.c - the credential table (proxy/creds.c):
 * placeholders keep the value's length and shape and come from the random
 * source; the head rewrite replaces placeholders in the request line and
 * headers and inside "Authorization: Basic" (strict base64, re-encoded),
 * leaves what is not allowed and reports it; hostile heads (bad base64,
 * no header, truncated lines) change nothing they should not; responses
 * mask the value and its base64 forms; sluice proxy refuses entries.
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

#include "proxy/creds.h"
#include "settings/settings.h"

#define REAL1 "ghp_R3alT0kenValue0123456789abcdefXYZ"
#define FAKE1 "abc_D4ecO5fgnPqstu9876543210zyxwvuABC"
#define REAL2 "second-real-value-ABCDEFGH"
#define FAKE2 "zzzzzz-yyyy-xxxxx-QRSTUVWX"

static void table(struct proxy_creds *t)
{
    memset(t, 0, sizeof(*t));
    assert_int_equal(
        proxy_creds_add(t, "T1", 0, (const uint8_t *)REAL1, strlen(REAL1), (const uint8_t *)FAKE1),
        0);
    assert_int_equal(
        proxy_creds_add(t, "/f", 1, (const uint8_t *)REAL2, strlen(REAL2), (const uint8_t *)FAKE2),
        0);
    assert_int_equal(proxy_creds_seal(t), 0);
}

static void test_placeholder_shape(void **state)
{
    static const char *const vals[] = {REAL1, "0123456789012345678",
                                       "a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p",
                                       "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"};
    (void)state;
    for (size_t v = 0; v < sizeof(vals) / sizeof(vals[0]); v++) {
        size_t n = strlen(vals[v]), alnum = 0;
        uint8_t a[64], b[64];
        for (size_t i = 0; i < n; i++)
            alnum += (vals[v][i] >= '0' && vals[v][i] <= '9') ||
                     (vals[v][i] >= 'a' && vals[v][i] <= 'z') ||
                     (vals[v][i] >= 'A' && vals[v][i] <= 'Z');
        assert_int_equal(proxy_cred_placeholder((const uint8_t *)vals[v], n, a), 0);
        assert_int_equal(proxy_cred_placeholder((const uint8_t *)vals[v], n, b), 0);
        assert_memory_not_equal(a, vals[v], n);
        assert_memory_not_equal(a, b, n); /* random each time */
        for (size_t i = 0; i < n; i++) {
            char c = vals[v][i], f = (char)a[i];
            if (alnum < 16) { /* too few to keep the shape: letters and digits all over */
                assert_true((f >= '0' && f <= '9') || (f >= 'a' && f <= 'z') ||
                            (f >= 'A' && f <= 'Z'));
            } else if (c >= '0' && c <= '9') {
                assert_true(f >= '0' && f <= '9');
            } else if (c >= 'a' && c <= 'z') {
                assert_true(f >= 'a' && f <= 'z');
            } else if (c >= 'A' && c <= 'Z') {
                assert_true(f >= 'A' && f <= 'Z');
            } else {
                assert_int_equal(f, c);
            }
        }
    }
}

static void test_add_refusals(void **state)
{
    struct proxy_creds t;

    (void)state;
    memset(&t, 0, sizeof(t));
    assert_int_equal(proxy_creds_add(&t, "S", 0, (const uint8_t *)"short", 5, NULL), -EINVAL);
    /* a placeholder equal to its value, or to another entry's value */
    assert_int_equal(
        proxy_creds_add(&t, "A", 0, (const uint8_t *)REAL1, strlen(REAL1), (const uint8_t *)REAL1),
        -EINVAL);
    assert_int_equal(proxy_creds_add(&t, "A", 0, (const uint8_t *)REAL1, strlen(REAL1), NULL), 0);
    assert_int_equal(
        proxy_creds_add(&t, "B", 0, (const uint8_t *)FAKE1, strlen(FAKE1), (const uint8_t *)REAL1),
        -EINVAL);
    assert_int_equal(t.n, 1);
    for (size_t i = 1; i < PROXY_CREDS_MAX; i++) {
        char v[40];
        snprintf(v, sizeof(v), "value-number-%zu-xxxxxxxxxxxx", i);
        assert_int_equal(proxy_creds_add(&t, "N", 0, (const uint8_t *)v, strlen(v), NULL), 0);
    }
    assert_int_equal(proxy_creds_add(&t, "X", 0, (const uint8_t *)REAL2, strlen(REAL2), NULL),
                     -EINVAL);
    assert_int_equal(proxy_creds_seal(&t), 0);
    proxy_creds_clear(&t);
}

/* awsPairs roles: one pair's entries found by its index, a role given
 * twice or an unknown one refused, an entry out of range refused. */
static void test_aws_roles(void **state)
{
    struct proxy_creds t;
    static const char *const v[4] = {"AKIAREALKEYID0000001",
                                     "realsecretrealsecretrealsecret0000000001",
                                     "AKIAOTHERKEY99990002", "realsessiontokenrealsessiontoken"};

    (void)state;
    memset(&t, 0, sizeof(t));
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(proxy_creds_add(&t, "V", 0, (const uint8_t *)v[i], strlen(v[i]), NULL), 0);
    assert_int_equal(proxy_creds_aws(&t, 0, 3, 'K'), 0);
    assert_int_equal(proxy_creds_aws(&t, 1, 3, 'S'), 0);
    assert_int_equal(proxy_creds_aws(&t, 2, 5, 'K'), 0);
    assert_int_equal(proxy_creds_aws(&t, 3, 3, 'T'), 0);
    assert_int_equal(proxy_creds_aws(&t, 3, 3, 'T'), -EINVAL); /* twice */
    assert_int_equal(proxy_creds_aws(&t, 2, 5, 'X'), -EINVAL);
    assert_int_equal(proxy_creds_aws(&t, 4, 5, 'S'), -EINVAL); /* no entry 4 */
    assert_int_equal(t.naws, 2);
    assert_int_equal(t.aws[0].pair, 3);
    assert_int_equal(t.aws[0].key, 0);
    assert_int_equal(t.aws[0].secret, 1);
    assert_int_equal(t.aws[0].token, 3);
    assert_int_equal(t.aws[1].pair, 5);
    assert_int_equal(t.aws[1].key, 2);
    assert_int_equal(t.aws[1].secret, -1);
    assert_int_equal(t.aws[1].token, -1);
    assert_int_equal(t.e[1].aws_role, 'S');
    assert_int_equal(t.e[3].aws_role, 'T');
    assert_int_equal(proxy_creds_seal(&t), 0);
    proxy_creds_clear(&t);
}

struct head_row {
    const char *in, *out;
    uint64_t allow, rep, blk;
};

static void test_head(void **state)
{
    static const struct head_row rows[] = {
        {"GET /p/" FAKE1 "?q=" FAKE1 " HTTP/1.1\r\nHost: a\r\nX: " FAKE2 "\r\n\r\n",
         "GET /p/" REAL1 "?q=" REAL1 " HTTP/1.1\r\nHost: a\r\nX: " REAL2 "\r\n\r\n", 3, 3, 0},
        {"GET / HTTP/1.1\r\nX: " FAKE1 " " FAKE2 "\r\n\r\n",
         "GET / HTTP/1.1\r\nX: " REAL1 " " FAKE2 "\r\n\r\n", 1, 1, 2},
        {"GET / HTTP/1.1\r\nX: " FAKE1 "\r\n\r\n", "GET / HTTP/1.1\r\nX: " FAKE1 "\r\n\r\n", 0, 0,
         1},
        /* base64("u:" FAKE1) -> base64("u:" REAL1) */
        {"GET / HTTP/1.1\r\nauthorization:   basic "
         "dTphYmNfRDRlY081ZmduUHFzdHU5ODc2NTQzMjEwenl4d3Z1QUJD\r\n\r\n",
         "GET / HTTP/1.1\r\nauthorization:   basic "
         "dTpnaHBfUjNhbFQwa2VuVmFsdWUwMTIzNDU2Nzg5YWJjZGVmWFla\r\n\r\n",
         1, 1, 0},
        /* bad base64, a Bearer, no header: left */
        {"GET / HTTP/1.1\r\nAuthorization: Basic dTphYmNfRDRl!!!\r\n\r\n",
         "GET / HTTP/1.1\r\nAuthorization: Basic dTphYmNfRDRl!!!\r\n\r\n", 3, 0, 0},
        {"GET / HTTP/1.1\r\nAuthorization: Basic =\r\n\r\n",
         "GET / HTTP/1.1\r\nAuthorization: Basic =\r\n\r\n", 3, 0, 0},
        {"GET / HTTP/1.1\r\nAuthorization: Basic", "GET / HTTP/1.1\r\nAuthorization: Basic", 3, 0,
         0},
        {"GET / HTTP/1.1\r\nAuthorization: Basic "
         "dTphYmNfRDRlY081ZmduUHFzdHU5ODc2NTQzMjEwenl4d3Z1QUJD\r\n\r\n",
         "GET / HTTP/1.1\r\nAuthorization: Basic "
         "dTphYmNfRDRlY081ZmduUHFzdHU5ODc2NTQzMjEwenl4d3Z1QUJD\r\n\r\n",
         2, 0, 1},
        /* rt-12: a tab after Basic, padding left out, a second Authorization */
        {"GET / HTTP/1.1\r\nAuthorization: "
         "Basic\tdTphYmNfRDRlY081ZmduUHFzdHU5ODc2NTQzMjEwenl4d3Z1QUJD\r\n\r\n",
         "GET / HTTP/1.1\r\nAuthorization: "
         "Basic\tdTpnaHBfUjNhbFQwa2VuVmFsdWUwMTIzNDU2Nzg5YWJjZGVmWFla\r\n\r\n",
         1, 1, 0},
        {"GET / HTTP/1.1\r\nAuthorization: Basic "
         "YWI6YWJjX0Q0ZWNPNWZnblBxc3R1OTg3NjU0MzIxMHp5eHd2dUFCQw\r\n\r\n",
         "GET / HTTP/1.1\r\nAuthorization: Basic "
         "YWI6Z2hwX1IzYWxUMGtlblZhbHVlMDEyMzQ1Njc4OWFiY2RlZlhZWg\r\n\r\n",
         1, 1, 0},
        {"GET / HTTP/1.1\r\nAuthorization: Bearer x\r\nAuthorization: Basic "
         "YWI6YWJjX0Q0ZWNPNWZnblBxc3R1OTg3NjU0MzIxMHp5eHd2dUFCQw==\r\n\r\n",
         "GET / HTTP/1.1\r\nAuthorization: Bearer x\r\nAuthorization: Basic "
         "YWI6Z2hwX1IzYWxUMGtlblZhbHVlMDEyMzQ1Njc4OWFiY2RlZlhZWg==\r\n\r\n",
         1, 1, 0},
        {"GET / HTTP/1.1\r\nAuthorization: Basic "
         "YWI6YWJjX0Q0ZWNPNWZnblBxc3R1OTg3NjU0MzIxMHp5eHd2dUFCQw\r\n\r\n",
         "GET / HTTP/1.1\r\nAuthorization: Basic "
         "YWI6YWJjX0Q0ZWNPNWZnblBxc3R1OTg3NjU0MzIxMHp5eHd2dUFCQw\r\n\r\n",
         2, 0, 1},
        {"", "", 3, 0, 0},
    };
    struct proxy_creds t;

    (void)state;
    table(&t);
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        size_t n = strlen(rows[i].in);
        char *h = malloc(n + 1);
        uint64_t blk = 99, rep;
        memcpy(h, rows[i].in, n + 1);
        rep = proxy_creds_head(&t, rows[i].allow, h, n, &blk);
        if (strcmp(h, rows[i].out) != 0 || rep != rows[i].rep || blk != rows[i].blk)
            print_error("row %zu: rep %llu blk %llu\n got %s\n", i, (unsigned long long)rep,
                        (unsigned long long)blk, h);
        assert_string_equal(h, rows[i].out);
        assert_true(rep == rows[i].rep && blk == rows[i].blk);
        free(h);
    }
    proxy_creds_clear(&t);
}

/* Responses: the value, and base64 text with the value at each alignment. */
/* plain's base64 (padded) into b64 */
static void b64enc(const char *plain, char *b64)
{
    const char *B = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t n = strlen(plain), o = 0;

    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)(uint8_t)plain[i] << 16 |
                     (i + 1 < n ? (unsigned)(uint8_t)plain[i + 1] << 8 : 0) |
                     (i + 2 < n ? (uint8_t)plain[i + 2] : 0);
        b64[o++] = B[v >> 18 & 63];
        b64[o++] = B[v >> 12 & 63];
        b64[o++] = i + 1 < n ? B[v >> 6 & 63] : '=';
        b64[o++] = i + 2 < n ? B[v & 63] : '=';
    }
    b64[o] = '\0';
}

/* Two values that differ in their last character only: some of their
 * base64 forms share every character the bytes alone decide. The table
 * builds (it failed before), and each value's forms are masked where
 * only that value is allowed. */
static void test_shared_b64(void **state)
{
    static const char *const v[2] = {"AKIAREALKEYID0000001", "AKIAREALKEYID0000002"};
    static const char *const pre[] = {"", "u", "u:"};
    struct proxy_creds t;

    (void)state;
    memset(&t, 0, sizeof(t));
    for (size_t i = 0; i < 2; i++)
        assert_int_equal(proxy_creds_add(&t, "K", 0, (const uint8_t *)v[i], strlen(v[i]), NULL), 0);
    assert_int_equal(proxy_creds_seal(&t), 0);
    for (size_t i = 0; i < 2; i++)
        for (size_t p = 0; p < 3; p++) {
            char plain[64], b64[100], out[100];
            snprintf(plain, sizeof(plain), "%s%s", pre[p], v[i]);
            b64enc(plain, b64);
            snprintf(out, sizeof(out), "%s", b64);
            (void)subst_buffer(&t.to_fake, proxy_creds_fake_bits(&t, UINT64_C(1) << i),
                               (uint8_t *)out, strlen(out), NULL);
            assert_null(strstr(out, b64 + 8));
        }
    proxy_creds_clear(&t);
}

static void test_response_forms(void **state)
{
    static const char *const pre[] = {"", "u", "u:", "ab:"};
    struct proxy_creds t;

    (void)state;
    table(&t);
    for (size_t p = 0; p < 4; p++) {
        char plain[128], b64[180], out[320];
        snprintf(plain, sizeof(plain), "%s%s", pre[p], REAL1);
        b64enc(plain, b64);
        snprintf(out, sizeof(out), "echo %s and %s", b64, REAL1);
        (void)subst_buffer(&t.to_fake, proxy_creds_fake_bits(&t, 1), (uint8_t *)out, strlen(out),
                           NULL);
        assert_null(strstr(out, REAL1));
        /* the characters that only the value decides are gone */
        assert_null(strstr(out, b64 + 8));
        assert_non_null(strstr(out, FAKE1));
    }
    /* entry 2 is not allowed here: its value stays */
    {
        char out[] = "x " REAL2 " y";
        (void)subst_buffer(&t.to_fake, proxy_creds_fake_bits(&t, 1), (uint8_t *)out, strlen(out),
                           NULL);
        assert_string_equal(out, "x " REAL2 " y");
    }
    proxy_creds_clear(&t);
}

static void test_proxy_refuses(void **state)
{
    struct settings s;
    struct settings_error err;
    const char *j = "{\"credentials\": {\"envVars\": [{\"name\": \"T\", \"mode\": \"deny\"}]}}";

    (void)state;
    settings_init(&s);
    assert_int_equal(proxy_creds_settings_check(&s, &err), 0);
    assert_int_equal(settings_apply_buffer(&s, "p.json", j, strlen(j), &err), 0);
    assert_int_equal(proxy_creds_settings_check(&s, &err), -1);
    if (strstr(err.msg, ": credentials.envVars[0]: refused by sluice proxy: mode \"deny\"") == NULL)
        print_error("%s\n", err.msg);
    assert_non_null(
        strstr(err.msg, ": credentials.envVars[0]: refused by sluice proxy: mode \"deny\""));
    settings_free(&s);
}

/* require: the placeholder alone in the header, hostile forms refused. */
static void test_required(void **state)
{
    static const struct {
        const char *hdrs; /* header lines after "GET / HTTP/1.1\r\n" */
        int ok;
    } cases[] = {
        {"Authorization: " FAKE1 "\r\n", 1},
        {"Authorization: Bearer " FAKE1 "\r\n", 1},
        {"authorization:   token   " FAKE1 "  \r\n", 1},
        /* Basic: x-access-token:FAKE1, FAKE1:x-oauth-basic, FAKE1: */
        {"Authorization: Basic "
         "eC1hY2Nlc3MtdG9rZW46YWJjX0Q0ZWNPNWZnblBxc3R1OTg3NjU0MzIxMHp5eHd2dUFCQw==\r\n",
         1},
        {"Authorization: Basic "
         "YWJjX0Q0ZWNPNWZnblBxc3R1OTg3NjU0MzIxMHp5eHd2dUFCQzp4LW9hdXRoLWJhc2lj\r\n",
         1},
        {"Authorization: Basic YWJjX0Q0ZWNPNWZnblBxc3R1OTg3NjU0MzIxMHp5eHd2dUFCQzo=\r\n", 1},
        /* missing, someone else's token, two headers, extra words */
        {"X-Other: " FAKE1 "\r\n", 0},
        {"Authorization: Bearer ghp_sandboxOwnToken0123456789abcdefXYZ\r\n", 0},
        {"Authorization: Bearer " FAKE1 "\r\nAuthorization: Bearer mine\r\n", 0},
        {"Authorization: Bearer " FAKE1 " mine\r\n", 0},
        {"Authorization: Bearer mine " FAKE1 "\r\n", 0},
        {"Authorization: " FAKE1 "x\r\n", 0},
        {"Authorization: " FAKE2 "\r\n", 0},
        {"Authorization: Bearer\r\n", 0},
        {"Authorization: averyveryveryveryveryveryverylongschemeword " FAKE1 "\r\n", 0},
        /* Basic: the other side a credential of its own (16 bytes and more), bad base64 */
        {"Authorization: Basic "
         "c2FuZGJveC1vd24tdG9rZW4tMTIzNDphYmNfRDRlY081ZmduUHFzdHU5ODc2NTQzMjEwenl4d3Z1QUJD\r\n",
         0},
        {"Authorization: Basic "
         "eC1hY2Nlc3MtdG9rZW46YWJjX0Q0ZWNPNWZnblBxc3R1OTg3NjU0MzIxMHp5eHd2dUFCQw=\r\n",
         0},
        {"Authorization: Basic eC1hY2Nlc3MtdG9rZW4=\r\n", 0},
    };
    struct proxy_creds t;
    char head[1024];

    (void)state;
    table(&t);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int n = snprintf(head, sizeof(head), "GET / HTTP/1.1\r\nHost: a\r\n%s", cases[i].hdrs);
        int got = proxy_creds_required(&t, 0, "Authorization", head, (size_t)n);
        if (got != cases[i].ok)
            print_error("case %zu: got %d: %s\n", i, got, cases[i].hdrs);
        assert_int_equal(got, cases[i].ok);
    }
    /* another header by name; entry 1 (the file's) is not entry 0's placeholder */
    snprintf(head, sizeof(head), "GET / HTTP/1.1\r\nX-Api-Key: %s\r\n", FAKE2);
    assert_int_equal(proxy_creds_required(&t, 1, "x-api-key", head, strlen(head)), 1);
    assert_int_equal(proxy_creds_required(&t, 0, "x-api-key", head, strlen(head)), 0);
    assert_int_equal(proxy_creds_required(&t, 1, "Authorization", head, strlen(head)), 0);
    proxy_creds_clear(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_placeholder_shape), cmocka_unit_test(test_add_refusals),
        cmocka_unit_test(test_aws_roles),         cmocka_unit_test(test_head),
        cmocka_unit_test(test_response_forms), cmocka_unit_test(test_shared_b64),    cmocka_unit_test(test_proxy_refuses),
        cmocka_unit_test(test_required),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
