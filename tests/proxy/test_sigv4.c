/* tests/proxy/test_sigv4.c - AWS SigV4 (proxy/sigv4.c): cases of AWS's
 * published aws-sig-v4-test-suite (credentials AKIDEXAMPLE /
 * wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY, us-east-1, service "service",
 * 20150830T123600Z; each expected signature is the suite's .authz) and the
 * GET Object example of the S3 documentation; the check with the fake
 * secret finding the URI form a client used; re-signing round trips
 * (what the fake secret signed verifies with the real one only after
 * re-signing; a header the proxy removed leaves the signed list); and bad
 * Authorization values.
 */
#include <setjmp.h> /* cmocka needs these first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "proxy/sigv4.h"

#define SECRET "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
#define CRED "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
#define DATE "X-Amz-Date:20150830T123600Z\r\n"

struct vec {
    const char *name, *head, *body, *authz;
};

/* The suite's .req files with CRLF line ends (and the Authorization the
 * .authz gives, which is not a signed header), and its .authz. */
static const struct vec vecs[] = {
    {"get-vanilla", "GET / HTTP/1.1\r\nHost:example.amazonaws.com\r\n" DATE, "",
     CRED "SignedHeaders=host;x-amz-date, "
          "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"},
    {"get-vanilla-query-order-key-case",
     "GET /?Param2=value2&Param1=value1 HTTP/1.1\r\nHost:example.amazonaws.com\r\n" DATE, "",
     CRED "SignedHeaders=host;x-amz-date, "
          "Signature=b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"},
    {"get-header-value-trim",
     "GET / HTTP/1.1\r\nHost:example.amazonaws.com\r\nMy-Header1: value1\r\n"
     "My-Header2: \"a   b   c\"\r\n" DATE,
     "",
     CRED "SignedHeaders=host;my-header1;my-header2;x-amz-date, "
          "Signature=acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a9c736"},
    {"get-header-key-duplicate",
     "GET / HTTP/1.1\r\nHost:example.amazonaws.com\r\nMy-Header1:value2\r\nMy-Header1:value2\r\n"
     "My-Header1:value1\r\n" DATE,
     "",
     CRED "SignedHeaders=host;my-header1;x-amz-date, "
          "Signature=c9d5ea9f3f72853aea855b47ea873832890dbdd183b4468f858259531a5138ea"},
    {"post-vanilla", "POST / HTTP/1.1\r\nHost:example.amazonaws.com\r\n" DATE, "",
     CRED "SignedHeaders=host;x-amz-date, "
          "Signature=5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"},
    {"post-x-www-form-urlencoded",
     "POST / HTTP/1.1\r\nContent-Type:application/x-www-form-urlencoded\r\n"
     "Host:example.amazonaws.com\r\n" DATE,
     "Param1=value1",
     CRED "SignedHeaders=content-type;host;x-amz-date, "
          "Signature=ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a"},
    {"post-x-www-form-urlencoded-parameters",
     "POST / HTTP/1.1\r\nContent-Type:application/x-www-form-urlencoded; charset=utf8\r\n"
     "Host:example.amazonaws.com\r\n" DATE,
     "Param1=value1",
     CRED "SignedHeaders=content-type;host;x-amz-date, "
          "Signature=1a72ec8f64bd914b0e42e42607c7fbce7fb2c7465f63e3092b3b0d39fa77a6fe"},
    {"post-sts-header-before",
     "POST / HTTP/1.1\r\nHost:example.amazonaws.com\r\n" DATE
     "X-Amz-Security-Token:AQoDYXdzEPT//////////wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQWL"
     "WsKWHGBuFqwAeMicRXmxfpSPfIeoIYRqTflfKD8YUuwthAx7mSEI/qkPpKPi/kMcGdQrmGdeehM4IC1NtBmUpp2wUE8"
     "phUZampKsburEDy0KPkyQDYwT7WZ0wq5VSXDvp75YU9HFvlRd8Tx6q6fE8YQcHNVXAkiY9q6d+xo0rKwT38xVqr7ZD0u"
     "0iPPkUL64lIZbqBAz+scqKmlzm8FDrypNC9Yjc8fPOLn9FX9KSYvKTr4rvx3iSIlTJabIQwj2ICCR/oLxBA==\r\n",
     "",
     CRED "SignedHeaders=host;x-amz-date;x-amz-security-token, "
          "Signature=85d96828115b5dc0cfc3bd16ad9e210dd772bbebba041836c64533a82be05ead"},
};

static void parse_ok(const char *authz, struct sigv4_auth *a)
{
    const char *why = NULL;

    assert_int_equal(sigv4_parse_auth(authz, strlen(authz), a, &why), SIGV4_ALG_HMAC);
}

static void test_suite(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(vecs) / sizeof(vecs[0]); i++) {
        const struct vec *v = &vecs[i];
        struct sigv4_auth a;
        char payload[SIGV4_HEX_LEN + 1], list[SIGV4_SIGNED_MAX + 1], sig[SIGV4_HEX_LEN + 1];
        char head[2048];
        int form;

        snprintf(head, sizeof(head), "%s\r\n", v->head);
        parse_ok(v->authz, &a);
        assert_int_equal(sigv4_hash_hex(v->body, strlen(v->body), payload), 0);
        assert_int_equal(sigv4_sign(head, strlen(head), &a, SIGV4_URI_RAW, payload,
                                    (const uint8_t *)SECRET, strlen(SECRET), 0, list, sig),
                         0);
        if (strncmp(sig, a.sig, SIGV4_HEX_LEN) != 0)
            fail_msg("%s: got %s", v->name, sig);
        assert_memory_equal(list, a.signed_h, a.signed_len);
        form =
            sigv4_verify(head, strlen(head), &a, payload, (const uint8_t *)SECRET, strlen(SECRET));
        assert_true(form >= 0);
        /* one byte of the secret off: no form verifies */
        assert_int_equal(sigv4_verify(head, strlen(head), &a, payload,
                                      (const uint8_t *)"wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEZ",
                                      strlen(SECRET)),
                         -1);
        /* the body changed: no form verifies */
        assert_int_equal(sigv4_hash_hex("Param1=value2", 13, payload), 0);
        assert_int_equal(
            sigv4_verify(head, strlen(head), &a, payload, (const uint8_t *)SECRET, strlen(SECRET)),
            -1);
    }
}

/* The GET Object example of the S3 documentation (signed payload hash of
 * an empty body in x-amz-content-sha256). */
static void test_s3_doc(void **state)
{
    static const char head[] =
        "GET /test.txt HTTP/1.1\r\nHost: examplebucket.s3.amazonaws.com\r\n"
        "Authorization: x\r\nRange: bytes=0-9\r\n"
        "x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\r\n"
        "x-amz-date: 20130524T000000Z\r\n\r\n";
    static const char authz[] =
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
        "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
        "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41";
    static const char secret[] = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
    struct sigv4_auth a;
    char list[SIGV4_SIGNED_MAX + 1], sig[SIGV4_HEX_LEN + 1];

    (void)state;
    parse_ok(authz, &a);
    assert_int_equal(sigv4_sign(head, sizeof(head) - 1, &a, SIGV4_URI_ONCE, sigv4_empty_hash,
                                (const uint8_t *)secret, sizeof(secret) - 1, 0, list, sig),
                     0);
    assert_string_equal(sig, "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
    assert_string_equal(list, "host;range;x-amz-content-sha256;x-amz-date");
}

#define FAKE_ID "AKIAFAKEFAKEFAKE0001"
#define REAL_ID "AKIAREALREALREAL0001"
#define FAKE_SECRET "fakefakefakefakefakefakefakefakefakefake"
#define REAL_SECRET "realREALrealREALrealREALrealREALrealREAL"

/* A head signed with secret by sigv4_resign over a stand-in Authorization
 * between the head's two parts. */
static char *signed_head(const char *const parts[2], const char *id, const char *secret,
                         const char *signed_h, unsigned form, size_t *len)
{
    char head[2048], *out = NULL;

    snprintf(head, sizeof(head),
             "%sAWS4-HMAC-SHA256 Credential=%s/20260101/eu-west-1/s3/aws4_request, "
             "SignedHeaders=%s, Signature=%064d%s",
             parts[0], id, signed_h, 0, parts[1]);
    assert_int_equal(sigv4_resign(head, strlen(head), form, "UNSIGNED-PAYLOAD",
                                  (const uint8_t *)secret, strlen(secret), &out, len),
                     0);
    return out;
}

static const char *auth_of(const char *head, size_t *vl)
{
    const char *p = strstr(head, "Authorization: ");

    assert_non_null(p);
    p += 15;
    *vl = (size_t)(strchr(p, '\r') - p);
    return p;
}

static void test_roundtrip(void **state)
{
    static const char *const fmt[2] = {
        "PUT /bucket/a%20b/../c.txt?x-id=PutObject&b=2&a=1 HTTP/1.1\r\n"
        "Host: s3.example.test\r\nAccept-Encoding: identity\r\nAuthorization: ",
        "\r\nx-amz-content-sha256: UNSIGNED-PAYLOAD\r\nX-Amz-Date: 20260101T101010Z\r\n\r\n"};
    static const unsigned forms[] = {SIGV4_URI_RAW, SIGV4_URI_ONCE, SIGV4_URI_TWICE,
                                     SIGV4_URI_TWICE | SIGV4_URI_DOTS};
    (void)state;

    for (size_t f = 0; f < sizeof(forms) / sizeof(forms[0]); f++) {
        size_t len, rlen, vl;
        char *h =
            signed_head(fmt, FAKE_ID, FAKE_SECRET,
                        "accept-encoding;host;x-amz-content-sha256;x-amz-date", forms[f], &len);
        char *real = NULL, *up, *v1, *v2;
        struct sigv4_auth a;
        const char *v = auth_of(h, &vl);
        int form;

        v1 = strndup(v, vl); /* a points into it */
        parse_ok(v1, &a);
        form = sigv4_verify(h, len, &a, "UNSIGNED-PAYLOAD", (const uint8_t *)FAKE_SECRET,
                            strlen(FAKE_SECRET));
        assert_true(form >= 0);
        /* another form may give the same URI for this path, never a wrong one */
        assert_int_equal(sigv4_verify(h, len, &a, "UNSIGNED-PAYLOAD", (const uint8_t *)REAL_SECRET,
                                      strlen(REAL_SECRET)),
                         -1);
        /* what the proxy sends: the real key id (substitution), and no
         * Accept-Encoding (the proxy drops it to credential hosts) */
        up = strdup(h);
        memcpy(strstr(up, FAKE_ID), REAL_ID, strlen(REAL_ID));
        {
            char *ae = strstr(up, "Accept-Encoding: identity\r\n");
            memmove(ae, ae + 27, strlen(ae + 27) + 1);
        }
        assert_int_equal(sigv4_resign(up, strlen(up), (unsigned)form, "UNSIGNED-PAYLOAD",
                                      (const uint8_t *)REAL_SECRET, strlen(REAL_SECRET), &real,
                                      &rlen),
                         0);
        v = auth_of(real, &vl);
        v2 = strndup(v, vl);
        parse_ok(v2, &a);
        assert_memory_equal(a.key, REAL_ID, a.key_len);
        assert_int_equal(a.signed_len, strlen("host;x-amz-content-sha256;x-amz-date"));
        assert_memory_equal(a.signed_h, "host;x-amz-content-sha256;x-amz-date", a.signed_len);
        assert_int_equal(sigv4_verify(real, rlen, &a, "UNSIGNED-PAYLOAD",
                                      (const uint8_t *)REAL_SECRET, strlen(REAL_SECRET)),
                         form);
        assert_int_equal(sigv4_verify(real, rlen, &a, "UNSIGNED-PAYLOAD",
                                      (const uint8_t *)FAKE_SECRET, strlen(FAKE_SECRET)),
                         -1);
        /* everything but the Authorization value is as it was */
        assert_memory_equal(real, up, (size_t)(strstr(up, "Authorization: ") - up));
        assert_string_equal(strstr(real, "\r\nx-amz-content-sha256"),
                            strstr(up, "\r\nx-amz-content-sha256"));
        free(h);
        free(up);
        free(real);
        free(v1);
        free(v2);
    }
}

/* host or x-amz-date gone, a second Authorization, none: refused. */
static void test_resign_refused(void **state)
{
    char *out = NULL;
    size_t ol;
    static const char nohost[] =
        "GET / HTTP/1.1\r\nAuthorization: " CRED "SignedHeaders=host;x-amz-date, Signature="
        "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31\r\n" DATE "\r\n";
    static const char two[] =
        "GET / HTTP/1.1\r\nHost: h\r\nAuthorization: " CRED
        "SignedHeaders=host;x-amz-date, Signature="
        "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31\r\nAuthorization: "
        "Bearer x\r\n" DATE "\r\n";
    static const char nodate[] =
        "GET / HTTP/1.1\r\nHost: h\r\nAuthorization: " CRED
        "SignedHeaders=host;x-amz-date, Signature="
        "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31\r\n\r\n";
    static const char baddate[] =
        "GET / HTTP/1.1\r\nHost: h\r\nAuthorization: " CRED
        "SignedHeaders=host;x-amz-date, Signature="
        "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31\r\n"
        "X-Amz-Date: 20150831T123600Z\r\n\r\n";

    (void)state;
    assert_int_equal(sigv4_resign(nohost, sizeof(nohost) - 1, 0, sigv4_empty_hash,
                                  (const uint8_t *)"s", 1, &out, &ol),
                     UV_ENOENT);
    assert_int_equal(
        sigv4_resign(two, sizeof(two) - 1, 0, sigv4_empty_hash, (const uint8_t *)"s", 1, &out, &ol),
        UV_EINVAL);
    assert_int_equal(sigv4_resign(nodate, sizeof(nodate) - 1, 0, sigv4_empty_hash,
                                  (const uint8_t *)"s", 1, &out, &ol),
                     UV_EINVAL);
    assert_int_equal(sigv4_resign(baddate, sizeof(baddate) - 1, 0, sigv4_empty_hash,
                                  (const uint8_t *)"s", 1, &out, &ol),
                     UV_EINVAL);
    assert_null(out);
}

static void test_bad_auth(void **state)
{
    static const char *const bad[] = {
        "AWS4-HMAC-SHA256",
        "AWS4-HMAC-SHA256 ",
        "AWS4-HMAC-SHA1 Credential=A/20150830/r/s/aws4_request",
        "AWS4-HMAC-SHA256 Credential=A/20150830/r/s/aws4_request, SignedHeaders=host",
        "AWS4-HMAC-SHA256 Credential=A/2015083/r/s/aws4_request, SignedHeaders=host, "
        "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
        "AWS4-HMAC-SHA256 Credential=A/20150830/r/s/aws4_reques, SignedHeaders=host, "
        "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
        "AWS4-HMAC-SHA256 Credential=A/20150830/r/s/x/aws4_request, SignedHeaders=host, "
        "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
        "AWS4-HMAC-SHA256 Credential=/20150830/r/s/aws4_request, SignedHeaders=host, "
        "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
        "AWS4-HMAC-SHA256 Credential=A/20150830//s/aws4_request, SignedHeaders=host, "
        "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
        /* unsorted, duplicate, upper case, no host, empty name */
        "AWS4-HMAC-SHA256 Credential=A/20150830/r/s/aws4_request, SignedHeaders=x-amz-date;host, "
        "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
        "AWS4-HMAC-SHA256 Credential=A/20150830/r/s/aws4_request, SignedHeaders=host;host, "
        "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
        "AWS4-HMAC-SHA256 Credential=A/20150830/r/s/aws4_request, SignedHeaders=Host, "
        "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
        "AWS4-HMAC-SHA256 Credential=A/20150830/r/s/aws4_request, SignedHeaders=x-amz-date, "
        "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
        "AWS4-HMAC-SHA256 Credential=A/20150830/r/s/aws4_request, SignedHeaders=host;;x, "
        "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
        /* signature: short, upper case, not hex */
        "AWS4-HMAC-SHA256 Credential=A/20150830/r/s/aws4_request, SignedHeaders=host, "
        "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf3",
        "AWS4-HMAC-SHA256 Credential=A/20150830/r/s/aws4_request, SignedHeaders=host, "
        "Signature=5FA00FA31553B73EBF1942676E86291E8372FF2A2260956D9B8AAE1D763FBF31",
        "AWS4-HMAC-SHA256 Credential=A/20150830/r/s/aws4_request, SignedHeaders=host, "
        "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbfzz",
        /* a parameter twice, an unknown one, one without '=' */
        "AWS4-HMAC-SHA256 Credential=A/20150830/r/s/aws4_request, SignedHeaders=host, "
        "SignedHeaders=host, "
        "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
        "AWS4-HMAC-SHA256 Credential=A/20150830/r/s/aws4_request, SignedHeaders=host, X=1, "
        "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
        "AWS4-HMAC-SHA256 Credential=A/20150830/r/s/aws4_request, SignedHeaders=host, Sig, "
        "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
    };
    struct sigv4_auth a;
    const char *why;

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        why = NULL;
        if (sigv4_parse_auth(bad[i], strlen(bad[i]), &a, &why) != SIGV4_ALG_BAD)
            fail_msg("accepted: %s", bad[i]);
        assert_non_null(why);
    }
    /* a NUL inside SignedHeaders */
    {
        char v[] = "AWS4-HMAC-SHA256 Credential=A/20150830/r/s/aws4_request, SignedHeaders=host;a"
                   "x, Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31";
        *strstr(v, "ax") = '\0';
        assert_int_equal(sigv4_parse_auth(v, sizeof(v) - 1, &a, &why), SIGV4_ALG_BAD);
    }
    assert_int_equal(sigv4_parse_auth("Bearer x", 8, &a, &why), SIGV4_ALG_NONE);
    assert_int_equal(sigv4_parse_auth("AWS AKID:sig", 12, &a, &why), SIGV4_ALG_NONE);
    assert_int_equal(
        sigv4_parse_auth("AWS4-ECDSA-P256-SHA256 Credential=A/20150830/r/s/aws4_request, "
                         "SignedHeaders=host, Signature=3045",
                         strlen("AWS4-ECDSA-P256-SHA256 Credential=A/20150830/r/s/aws4_request, "
                                "SignedHeaders=host, Signature=3045"),
                         &a, &why),
        SIGV4_ALG_ECDSA);
    assert_memory_equal(a.key, "A", 1);
    /* parameters in another order, no space after the commas */
    parse_ok("AWS4-HMAC-SHA256 Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d"
             "763fbf31,SignedHeaders=host;x-amz-date,Credential=AKIDEXAMPLE/20150830/us-east-1/"
             "service/aws4_request",
             &a);
    assert_int_equal(a.key_len, 11);
    assert_int_equal(a.service_len, 7);
    assert_memory_equal(a.scope, "20150830/us-east-1/service/aws4_request", a.scope_len);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_suite),     cmocka_unit_test(test_s3_doc),
        cmocka_unit_test(test_roundtrip), cmocka_unit_test(test_resign_refused),
        cmocka_unit_test(test_bad_auth),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
