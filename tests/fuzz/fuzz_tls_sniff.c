/* tests/fuzz/fuzz_tls_sniff.c - the ClientHello sniffer (tls/sniff.c).
 *
 * The input is used twice.
 *
 * 1. As the first bytes of a tunnel, as the front end will hand them over:
 *    the answer for the whole input, and for prefixes (all of them up to
 *    128 bytes, then 48 spread over the rest), must be consistent: once a
 *    prefix gets an answer other than NEED_MORE, every longer prefix gets
 *    the same one; the answer never depends on bytes past TLS_SNIFF_MAX.
 *    CLIENT_HELLO: hello_len is inside the input, the prefix of hello_len
 *    bytes gives the same hello, a good SNI is valid (tls_name_valid) and
 *    lower case, a bad one is "" with a reason, the ALPN text is
 *    NUL-terminated and printable. MALFORMED has a reason. NOT_TLS only
 *    when the input does not start with 22, 3.
 *
 * 2. As a ClientHello body (after one control byte), wrapped in a handshake
 *    header and then in records of a size the control byte picks, and in
 *    one record: both framings must give the same answer and the same hello
 *    (hello_len aside) whenever both fit in TLS_SNIFF_MAX, so the record
 *    layer's reassembly never changes what is read.
 *
 * Every call gets an exact-size heap copy, so ASan catches a read past the
 * bytes given. Seeds (corpus/tls_sniff/): ClientHellos of Python's ssl
 * (OpenSSL) over a MemoryBIO with and without SNI and ALPN, TLS 1.2 only,
 * split in records; and the hand-made rows of tests/tls/test_tls.c.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "tls/tls.h"

static enum tls_sniff_result sniff(const uint8_t *d, size_t n, struct tls_hello *h)
{
    char *copy = fuzz_dup(d, n, 0);
    enum tls_sniff_result r = tls_sniff((const uint8_t *)copy, n, h);

    free(copy);
    return r;
}

static void check_hello(const struct tls_hello *h, enum tls_sniff_result r)
{
    size_t alen = strnlen(h->alpn, sizeof(h->alpn));

    FUZZ_CHECK(alen < sizeof(h->alpn));
    for (size_t i = 0; i < alen; i++)
        FUZZ_CHECK(h->alpn[i] >= 0x20 && h->alpn[i] < 0x7f);
    FUZZ_CHECK(strnlen(h->sni, sizeof(h->sni)) < sizeof(h->sni));
    if (r == TLS_SNIFF_MALFORMED)
        FUZZ_CHECK(h->reason != NULL);
    if (r != TLS_SNIFF_CLIENT_HELLO) {
        FUZZ_CHECK(!h->has_sni && h->sni[0] == '\0' && h->alpn_count == 0);
        return;
    }
    if (h->sni_bad) {
        FUZZ_CHECK(h->has_sni && h->sni[0] == '\0' && h->reason != NULL);
    } else if (h->has_sni) {
        FUZZ_CHECK(tls_name_valid(h->sni));
        for (const char *p = h->sni; *p != '\0'; p++)
            FUZZ_CHECK(!(*p >= 'A' && *p <= 'Z'));
        FUZZ_CHECK(h->reason == NULL);
    } else {
        FUZZ_CHECK(h->sni[0] == '\0');
    }
    FUZZ_CHECK(h->alpn_offered || (h->alpn_count == 0 && !h->alpn_h2 && !h->alpn_http11));
    FUZZ_CHECK(h->alpn_count >= (unsigned)(h->alpn_h2 + h->alpn_http11));
    FUZZ_CHECK((h->version >> 8) == 3);
}

static int same_hello(const struct tls_hello *a, const struct tls_hello *b)
{
    return a->version == b->version && a->has_sni == b->has_sni && a->sni_bad == b->sni_bad &&
           strcmp(a->sni, b->sni) == 0 && a->alpn_offered == b->alpn_offered &&
           a->alpn_http11 == b->alpn_http11 && a->alpn_h2 == b->alpn_h2 &&
           a->alpn_count == b->alpn_count && strcmp(a->alpn, b->alpn) == 0 &&
           a->reason == b->reason;
}

static void as_stream(const uint8_t *d, size_t n)
{
    struct tls_hello h, p;
    enum tls_sniff_result r = sniff(d, n, &h), pr;
    size_t step = n > 128 ? (n - 128) / 48 + 1 : 1;

    check_hello(&h, r);
    if (r == TLS_SNIFF_NOT_TLS)
        FUZZ_CHECK(n >= 1 && (d[0] != 22 || (n >= 2 && d[1] != 3)));
    if (r == TLS_SNIFF_CLIENT_HELLO) {
        FUZZ_CHECK(h.hello_len > 0 && h.hello_len <= n && h.hello_len <= TLS_SNIFF_MAX);
        FUZZ_CHECK(sniff(d, h.hello_len, &p) == r && same_hello(&h, &p));
        FUZZ_CHECK(p.hello_len == h.hello_len);
    }
    if (n > TLS_SNIFF_MAX) {
        FUZZ_CHECK(sniff(d, TLS_SNIFF_MAX, &p) == r && same_hello(&h, &p));
        return;
    }
    for (size_t i = 0; i < n; i += i < 128 ? 1 : step) {
        pr = sniff(d, i, &p);
        check_hello(&p, pr);
        if (pr != TLS_SNIFF_NEED_MORE)
            FUZZ_CHECK(pr == r && same_hello(&h, &p));
    }
}

/* hs (handshake header + body) in records of k payload bytes; 0 when the
 * result would not fit out. */
static size_t frame(const uint8_t *hs, size_t n, size_t k, uint8_t *out, size_t cap)
{
    size_t o = 0;

    for (size_t i = 0; i < n; i += k) {
        size_t c = n - i < k ? n - i : k;
        if (o + 5 + c > cap)
            return 0;
        out[o] = 22;
        out[o + 1] = 3;
        out[o + 2] = 1;
        out[o + 3] = (uint8_t)(c >> 8);
        out[o + 4] = (uint8_t)c;
        memcpy(out + o + 5, hs + i, c);
        o += 5 + c;
    }
    return o;
}

static void as_body(const uint8_t *d, size_t n)
{
    static uint8_t hs[4 + TLS_HELLO_MAX], one[TLS_SNIFF_MAX], many[TLS_SNIFF_MAX];
    struct tls_hello a, b;
    size_t k, len, n1, n2;
    enum tls_sniff_result r1, r2;

    if (n < 1 || n - 1 > TLS_HELLO_MAX)
        return;
    k = 1 + d[0] % 97u;
    len = n - 1;
    hs[0] = 1;
    hs[1] = (uint8_t)(len >> 16);
    hs[2] = (uint8_t)(len >> 8);
    hs[3] = (uint8_t)len;
    memcpy(hs + 4, d + 1, len);
    n1 = frame(hs, len + 4, 16384, one, sizeof(one));
    n2 = frame(hs, len + 4, k, many, sizeof(many));
    if (n1 == 0 || n2 == 0)
        return;
    r1 = sniff(one, n1, &a);
    r2 = sniff(many, n2, &b);
    check_hello(&a, r1);
    check_hello(&b, r2);
    FUZZ_CHECK(r1 != TLS_SNIFF_NOT_TLS && r1 != TLS_SNIFF_NEED_MORE);
    FUZZ_CHECK(r1 == r2 && same_hello(&a, &b));
    if (r1 == TLS_SNIFF_CLIENT_HELLO)
        FUZZ_CHECK(a.hello_len == n1 && b.hello_len == n2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    as_stream(data, size);
    as_body(data, size);
    return 0;
}
