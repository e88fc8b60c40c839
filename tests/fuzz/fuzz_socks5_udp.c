/* tests/fuzz/fuzz_socks5_udp.c - the SOCKS5 UDP datagram header
 * (socks5_udp_parse, socks/parser.c), which reads every datagram a client
 * sends to a UDP ASSOCIATE relay.
 *
 * The input is one datagram, in a heap block of exactly its size (ASan sees
 * any overread). Checked: a result is one of the enum's; OK exactly when a
 * reference parser written here from RFC 1928 section 7 accepts, with the
 * same FRAG, ATYP, address, port and header length; the header lies within
 * the datagram, and every shorter prefix of it is refused as short; an
 * IPv4/IPv6 destination, rebuilt with socks5_udp_header_build, is the same
 * header byte for byte (for FRAG 0); the address goes through the
 * association's host step (inet_ntop + policy_host_normalize): an address
 * normalises to itself.
 */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "policy/policy.h"
#include "socks/socks.h"

/* The reference: -1 refused, else the header length. */
static long ref_parse(const uint8_t *d, size_t len)
{
    size_t alen, off = 4;

    if (len < 4 || d[0] != 0 || d[1] != 0)
        return -1;
    switch (d[3]) {
    case 1:
        alen = 4;
        break;
    case 4:
        alen = 16;
        break;
    case 3:
        if (len < 5 || d[4] == 0)
            return -1;
        alen = d[4];
        off = 5;
        break;
    default:
        return -1;
    }
    if (len < off + alen + 2)
        return -1;
    return (long)(off + alen + 2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct socks5_udp_header h, h2;
    uint8_t *d;
    enum socks5_udp_result r;
    long want;

    if (size > 70000)
        return 0;
    d = (uint8_t *)fuzz_dup(data, size, 0);
    r = socks5_udp_parse(d, size, &h);
    FUZZ_CHECK(r == SOCKS5_UDP_OK || r == SOCKS5_UDP_ERR_SHORT || r == SOCKS5_UDP_ERR_RSV ||
               r == SOCKS5_UDP_ERR_ATYP || r == SOCKS5_UDP_ERR_DOMAIN_EMPTY);
    FUZZ_CHECK(socks5_udp_result_str(r) != NULL && strcmp(socks5_udp_result_str(r), "unknown") != 0);
    want = ref_parse(d, size);
    FUZZ_CHECK((r == SOCKS5_UDP_OK) == (want >= 0));
    if (r != SOCKS5_UDP_OK) {
        free(d);
        return 0;
    }
    FUZZ_CHECK(h.header_len == (size_t)want && h.header_len <= size);
    FUZZ_CHECK(h.frag == d[2] && h.dst.atyp == d[3] && h.dst.cmd == 0);
    FUZZ_CHECK(h.dst.port == (uint16_t)((d[h.header_len - 2] << 8) | d[h.header_len - 1]));
    FUZZ_CHECK(h.dst.addr_len >= 1 && h.dst.addr_len <= SOCKS5_FIELD_MAX);
    FUZZ_CHECK(memcmp(h.dst.addr, d + h.header_len - 2 - h.dst.addr_len, h.dst.addr_len) == 0);
    for (size_t n = 0; n < h.header_len; n++)
        FUZZ_CHECK(socks5_udp_parse(d, n, &h2) == SOCKS5_UDP_ERR_SHORT);

    if (h.dst.atyp == SOCKS5_ATYP_IPV4 || h.dst.atyp == SOCKS5_ATYP_IPV6) {
        uint8_t out[SOCKS5_UDP_REPLY_HDR_MAX];
        char text[INET6_ADDRSTRLEN];
        struct policy_host ph;
        const char *why;
        int v4 = h.dst.atyp == SOCKS5_ATYP_IPV4;
        size_t n = socks5_udp_header_build(out, v4 ? 4 : 6, h.dst.addr, h.dst.port);

        FUZZ_CHECK(n == h.header_len);
        if (h.frag == 0)
            FUZZ_CHECK(memcmp(out, d, n) == 0);
        FUZZ_CHECK(inet_ntop(v4 ? AF_INET : AF_INET6, h.dst.addr, text, sizeof(text)) != NULL);
        FUZZ_CHECK(policy_host_normalize(text, strlen(text), &ph, &why) == 0);
        FUZZ_CHECK(ph.kind != POLICY_HOST_NAME);
        FUZZ_CHECK(policy_host_normalize(ph.name, ph.len, &ph, &why) == 0);
    } else {
        struct policy_host ph;
        const char *why = NULL;
        if (policy_host_normalize((const char *)h.dst.addr, h.dst.addr_len, &ph, &why) < 0)
            FUZZ_CHECK(why != NULL);
    }
    free(d);
    return 0;
}
