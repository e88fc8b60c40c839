/* tests/socks/test_socks_udp.c - the SOCKS5 UDP datagram header
 * (socks5_udp_parse, socks5_udp_header_build, socks5_reply_bound;
 * RFC 1928 section 7): a table of good and bad datagrams, every prefix of
 * a good one refused as short, and the builders' bytes.
 */
#include <setjmp.h> /* cmocka needs these first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "socks/socks.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))
#define S(lit) (const uint8_t *)(lit), sizeof(lit) - 1

struct row {
    const char *name;
    const uint8_t *d;
    size_t len;
    enum socks5_udp_result want;
    uint8_t frag, atyp;
    size_t addr_len;
    const char *addr; /* bytes, addr_len of them */
    uint16_t port;
    size_t header_len;
};

static const struct row rows[] = {
    {"ipv4 with payload", S("\0\0\0\x01\x0a\x09\x00\x01\x1f\x90hello"), SOCKS5_UDP_OK, 0, 1, 4,
     "\x0a\x09\x00\x01", 8080, 10},
    {"ipv4, empty payload", S("\0\0\0\x01\x7f\0\0\x01\0\x35"), SOCKS5_UDP_OK, 0, 1, 4,
     "\x7f\0\0\x01", 53, 10},
    {"domain", S("\0\0\0\x03\x09" "echo.test" "\x00\x07" "ping"), SOCKS5_UDP_OK, 0, 3, 9,
     "echo.test", 7, 16},
    {"domain with NUL (raw: judged by the caller)", S("\0\0\0\x03\x03" "a\0b" "\x00\x07"),
     SOCKS5_UDP_OK, 0, 3, 3, "a\0b", 7, 10},
    {"ipv6", S("\0\0\0\x04" "\x20\x01\x0d\xb8\0\0\0\0\0\0\0\0\0\0\0\x01" "\x01\xbb" "q"),
     SOCKS5_UDP_OK, 0, 4, 16, "\x20\x01\x0d\xb8\0\0\0\0\0\0\0\0\0\0\0\x01", 443, 22},
    {"fragment 1 reported", S("\0\0\x01\x01\x0a\x09\x00\x01\x1f\x90x"), SOCKS5_UDP_OK, 1, 1, 4,
     "\x0a\x09\x00\x01", 8080, 10},
    {"last fragment reported", S("\0\0\x81\x01\x0a\x09\x00\x01\x1f\x90x"), SOCKS5_UDP_OK, 0x81, 1,
     4, "\x0a\x09\x00\x01", 8080, 10},
    {"port 0 passed through (the caller refuses it)", S("\0\0\0\x01\x0a\x09\x00\x01\0\0"),
     SOCKS5_UDP_OK, 0, 1, 4, "\x0a\x09\x00\x01", 0, 10},
    /* refusals */
    {"empty", (const uint8_t *)"", 0, SOCKS5_UDP_ERR_SHORT, 0, 0, 0, NULL, 0, 0},
    {"RSV first byte", S("\x01\0\0\x01\x0a\x09\x00\x01\x1f\x90"), SOCKS5_UDP_ERR_RSV, 0, 0, 0, NULL,
     0, 0},
    {"RSV second byte", S("\0\x80\0\x01\x0a\x09\x00\x01\x1f\x90"), SOCKS5_UDP_ERR_RSV, 0, 0, 0,
     NULL, 0, 0},
    {"ATYP 0", S("\0\0\0\0\x0a\x09\x00\x01\x1f\x90"), SOCKS5_UDP_ERR_ATYP, 0, 0, 0, NULL, 0, 0},
    {"ATYP 2", S("\0\0\0\x02\x0a\x09\x00\x01\x1f\x90"), SOCKS5_UDP_ERR_ATYP, 0, 0, 0, NULL, 0, 0},
    {"ATYP 5", S("\0\0\0\x05\x0a\x09\x00\x01\x1f\x90"), SOCKS5_UDP_ERR_ATYP, 0, 0, 0, NULL, 0, 0},
    {"empty domain", S("\0\0\0\x03\x00\x00\x35"), SOCKS5_UDP_ERR_DOMAIN_EMPTY, 0, 0, 0, NULL, 0, 0},
    {"domain longer than the datagram", S("\0\0\0\x03\xff" "abc\0\x35"), SOCKS5_UDP_ERR_SHORT, 0, 0,
     0, NULL, 0, 0},
    {"ipv6 cut", S("\0\0\0\x04\x20\x01\x0d\xb8\0\0\0\0\0\0\0\0\0\0\0\x01\x01"),
     SOCKS5_UDP_ERR_SHORT, 0, 0, 0, NULL, 0, 0},
};

static void test_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < NELEM(rows); i++) {
        const struct row *r = &rows[i];
        struct socks5_udp_header h;
        enum socks5_udp_result got = socks5_udp_parse(r->d, r->len, &h);

        if (got != r->want)
            fail_msg("%s: got %d (%s), want %d", r->name, (int)got, socks5_udp_result_str(got),
                     (int)r->want);
        assert_string_not_equal(socks5_udp_result_str(got), "unknown");
        if (got != SOCKS5_UDP_OK)
            continue;
        assert_int_equal(h.frag, r->frag);
        assert_int_equal(h.dst.atyp, r->atyp);
        assert_int_equal(h.dst.addr_len, r->addr_len);
        assert_memory_equal(h.dst.addr, r->addr, r->addr_len);
        assert_int_equal(h.dst.port, r->port);
        assert_int_equal(h.header_len, r->header_len);
        assert_true(h.header_len <= r->len);
    }
}

/* Every proper prefix of a good header is short; the header itself and
 * anything after it parse the same. */
static void test_prefixes(void **state)
{
    (void)state;
    for (size_t i = 0; i < NELEM(rows); i++) {
        const struct row *r = &rows[i];
        struct socks5_udp_header h;

        if (r->want != SOCKS5_UDP_OK)
            continue;
        for (size_t n = 0; n < r->header_len; n++)
            if (socks5_udp_parse(r->d, n, &h) != SOCKS5_UDP_ERR_SHORT)
                fail_msg("%s: a prefix of %zu bytes was not refused as short", r->name, n);
        assert_int_equal(socks5_udp_parse(r->d, r->header_len, &h), SOCKS5_UDP_OK);
        assert_int_equal(h.header_len, r->header_len);
    }
}

static void test_build(void **state)
{
    static const uint8_t v4[4] = {10, 9, 0, 1};
    static const uint8_t v6[16] = {0x20, 0x01, 0x0d, 0xb8, [15] = 1};
    uint8_t out[SOCKS5_UDP_REPLY_HDR_MAX];
    struct socks5_udp_header h;

    (void)state;
    assert_int_equal(socks5_udp_header_build(out, 4, v4, 8080), 10);
    assert_memory_equal(out, "\0\0\0\x01\x0a\x09\x00\x01\x1f\x90", 10);
    assert_int_equal(socks5_udp_parse(out, 10, &h), SOCKS5_UDP_OK); /* round trip */
    assert_int_equal(h.dst.port, 8080);
    assert_int_equal(socks5_udp_header_build(out, 6, v6, 443), 22);
    assert_int_equal(out[3], SOCKS5_ATYP_IPV6);
    assert_memory_equal(out + 4, v6, 16);
    assert_int_equal(socks5_udp_parse(out, 22, &h), SOCKS5_UDP_OK);
    assert_int_equal(socks5_udp_header_build(out, 0, v4, 1), 0);
    assert_int_equal(socks5_reply_bound(out, 4, v4, 40000), 10);
    assert_memory_equal(out, "\x05\x00\x00\x01\x0a\x09\x00\x01\x9c\x40", 10);
    assert_int_equal(socks5_reply_bound(out, 6, v6, 1), 22);
    assert_int_equal(out[0], 5);
    assert_int_equal(out[1], SOCKS5_REP_SUCCEEDED);
    assert_int_equal(out[3], SOCKS5_ATYP_IPV6);
    assert_int_equal(socks5_reply_bound(out, 5, v6, 1), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_prefixes),
        cmocka_unit_test(test_build),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
