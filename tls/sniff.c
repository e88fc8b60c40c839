/* tls/sniff.c - the ClientHello sniffer (tls.h).
 *
 * Two steps. First the record layer: the stream must start with handshake
 * records (type 22, version 3.x, length 1..2^14); their payloads are
 * concatenated until the handshake header (type 1, ClientHello) and the
 * length it announces are all there, within TLS_SNIFF_MAX stream bytes.
 * Then the ClientHello itself (RFC 8446 4.1.2, RFC 5246 7.4.1.2): every
 * length is checked against what holds it, extensions must fill the rest
 * exactly and appear once each, server_name (RFC 6066 3) and ALPN
 * (RFC 7301 3.1) are read. No byte outside data[0..len) is read, and no
 * byte past TLS_SNIFF_MAX is looked at, so the answer for a stream depends
 * on its first TLS_SNIFF_MAX bytes only.
 */
#include <string.h>

#include "tls/tls.h"

#define REC_HEADER 5
#define REC_MAX 16384 /* 2^14: the largest plaintext record */
#define CT_HANDSHAKE 22
#define HS_CLIENT_HELLO 1
#define EXT_SERVER_NAME 0
#define EXT_ALPN 16
#define EXT_SUPPORTED_VERSIONS 43

/* A read cursor over a byte range: every get fails once past the end. */
struct cur {
    const uint8_t *p;
    size_t left;
};

static int get_u8(struct cur *c, unsigned *v)
{
    if (c->left < 1)
        return -1;
    *v = c->p[0];
    c->p++;
    c->left--;
    return 0;
}

static int get_u16(struct cur *c, unsigned *v)
{
    if (c->left < 2)
        return -1;
    *v = (unsigned)c->p[0] << 8 | c->p[1];
    c->p += 2;
    c->left -= 2;
    return 0;
}

static int skip(struct cur *c, size_t n)
{
    if (c->left < n)
        return -1;
    c->p += n;
    c->left -= n;
    return 0;
}

/* A sub-cursor of n bytes, prefixed by a length of width bytes. */
static int get_vec(struct cur *c, int width, struct cur *sub)
{
    unsigned n;

    if ((width == 1 ? get_u8(c, &n) : get_u16(c, &n)) < 0 || c->left < n)
        return -1;
    sub->p = c->p;
    sub->left = n;
    c->p += n;
    c->left -= n;
    return 0;
}

static int is_ipv4_literal(const char *s)
{
    for (; *s != '\0'; s++)
        if ((*s < '0' || *s > '9') && *s != '.')
            return 0;
    return 1;
}

/* Label syntax over n bytes; NUL and anything but LDH and '_' fail. */
static int name_bytes_valid(const uint8_t *s, size_t n)
{
    size_t label = 0;

    if (n == 0 || n > TLS_SNI_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t ch = s[i];
        if (ch == '.') {
            if (label == 0)
                return 0;
            label = 0;
            continue;
        }
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '-' || ch == '_'))
            return 0;
        if (++label > 63)
            return 0;
    }
    return label > 0; /* no trailing dot, no empty name */
}

int tls_name_valid(const char *s)
{
    size_t n = strnlen(s, TLS_SNI_MAX + 1);

    return name_bytes_valid((const uint8_t *)s, n) && !is_ipv4_literal(s);
}

/* server_name: a list of (type, name); one host_name (type 0) at most.
 * Structure errors are MALFORMED (-1, reason set); a bad name only flags. */
static int parse_sni(struct cur ext, struct tls_hello *h)
{
    struct cur list, name;
    unsigned type;
    int seen = 0;

    if (get_vec(&ext, 2, &list) < 0 || ext.left != 0 || list.left == 0) {
        h->reason = "bad server_name extension";
        return -1;
    }
    while (list.left > 0) {
        if (get_u8(&list, &type) < 0 || get_vec(&list, 2, &name) < 0) {
            h->reason = "bad server_name extension";
            return -1;
        }
        if (type != 0)
            continue;
        if (seen) {
            h->reason = "two host names in server_name";
            return -1;
        }
        seen = 1;
        h->has_sni = 1;
        if (name.left > TLS_SNI_MAX || !name_bytes_valid(name.p, name.left)) {
            h->sni_bad = 1;
            h->reason = memchr(name.p, 0, name.left) != NULL ? "NUL in SNI"
                        : name.left > TLS_SNI_MAX            ? "SNI too long"
                                                             : "SNI is no valid host name";
            continue;
        }
        for (size_t i = 0; i < name.left; i++) {
            char ch = (char)name.p[i];
            h->sni[i] = ch >= 'A' && ch <= 'Z' ? (char)(ch - 'A' + 'a') : ch;
        }
        h->sni[name.left] = '\0';
        if (is_ipv4_literal(h->sni)) {
            h->sni_bad = 1;
            h->reason = "IP literal in SNI";
            h->sni[0] = '\0';
        }
    }
    return 0;
}

/* Appends one ALPN name to the log text, keeping room for "...". */
static void alpn_text_add(struct tls_hello *h, const uint8_t *p, size_t n)
{
    size_t at = strlen(h->alpn);
    const size_t room = sizeof(h->alpn) - 4; /* "..." and NUL */

    if (at >= room)
        return;
    if (at > 0)
        h->alpn[at++] = ',';
    for (size_t i = 0; i < n && at < room; i++)
        h->alpn[at++] = p[i] >= 0x20 && p[i] < 0x7f && p[i] != ',' ? (char)p[i] : '?';
    if (at >= room)
        memcpy(h->alpn + room, "...", 4);
    else
        h->alpn[at] = '\0';
}

static int parse_alpn(struct cur ext, struct tls_hello *h)
{
    struct cur list, name;

    if (get_vec(&ext, 2, &list) < 0 || ext.left != 0 || list.left < 2) {
        h->reason = "bad ALPN extension";
        return -1;
    }
    h->alpn_offered = 1;
    while (list.left > 0) {
        if (get_vec(&list, 1, &name) < 0 || name.left == 0) {
            h->reason = "bad ALPN extension";
            return -1;
        }
        h->alpn_count++;
        if (name.left == 8 && memcmp(name.p, "http/1.1", 8) == 0)
            h->alpn_http11 = 1;
        else if (name.left == 2 && memcmp(name.p, "h2", 2) == 0)
            h->alpn_h2 = 1;
        alpn_text_add(h, name.p, name.left);
    }
    return 0;
}

static int parse_versions(struct cur ext, struct tls_hello *h)
{
    struct cur list;
    unsigned v;

    if (get_vec(&ext, 1, &list) < 0 || ext.left != 0 || list.left < 2 || list.left % 2 != 0) {
        h->reason = "bad supported_versions extension";
        return -1;
    }
    while (get_u16(&list, &v) == 0)
        if ((v >> 8) == 3 && v > h->version && v <= 0x0304) /* GREASE values are skipped */
            h->version = (uint16_t)v;
    return 0;
}

/* The extensions block: each type once, each length inside the block. Only
 * the types we read are remembered for the duplicate check beyond a small
 * table of every type seen. */
static int parse_extensions(struct cur *c, struct tls_hello *h)
{
    struct cur all, body;
    unsigned type, seen[64];
    size_t nseen = 0;

    if (get_vec(c, 2, &all) < 0 || c->left != 0) {
        h->reason = "bad extensions length";
        return -1;
    }
    while (all.left > 0) {
        if (get_u16(&all, &type) < 0 || get_vec(&all, 2, &body) < 0) {
            h->reason = "bad extension length";
            return -1;
        }
        for (size_t i = 0; i < nseen; i++)
            if (seen[i] == type) {
                h->reason = "duplicate extension";
                return -1;
            }
        if (nseen == sizeof(seen) / sizeof(seen[0])) {
            h->reason = "too many extensions";
            return -1;
        }
        seen[nseen++] = type;
        if ((type == EXT_SERVER_NAME && parse_sni(body, h) < 0) ||
            (type == EXT_ALPN && parse_alpn(body, h) < 0) ||
            (type == EXT_SUPPORTED_VERSIONS && parse_versions(body, h) < 0))
            return -1;
    }
    return 0;
}

/* The ClientHello body (after the 4-byte handshake header). */
static int parse_hello(const uint8_t *p, size_t n, struct tls_hello *h)
{
    struct cur c = {p, n}, v;
    unsigned legacy;

    if (get_u16(&c, &legacy) < 0 || (legacy >> 8) != 3) {
        h->reason = "bad ClientHello version";
        return -1;
    }
    h->version = (uint16_t)legacy;
    if (skip(&c, 32) < 0 || get_vec(&c, 1, &v) < 0 || v.left > 32) {
        h->reason = "bad ClientHello session id";
        return -1;
    }
    if (get_vec(&c, 2, &v) < 0 || v.left < 2 || v.left % 2 != 0) {
        h->reason = "bad ClientHello cipher suites";
        return -1;
    }
    if (get_vec(&c, 1, &v) < 0 || v.left < 1) {
        h->reason = "bad ClientHello compression methods";
        return -1;
    }
    if (c.left == 0)
        return 0; /* no extensions (allowed before TLS 1.3): no SNI, no ALPN */
    return parse_extensions(&c, h);
}

/* The handshake bytes of the records at the start of data, copied into hs
 * until need bytes are there. Returns 1 when they are, 0 for more, -1 when
 * the stream is no handshake record at all (NOT_TLS), -2 malformed. */
static int gather(const uint8_t *data, size_t len, uint8_t *hs, size_t *have, size_t need,
                  size_t *end, struct tls_hello *h)
{
    size_t off = 0;

    *have = 0;
    while (*have < need) {
        if (off == len)
            return 0;
        if (data[off] != CT_HANDSHAKE)
            return off == 0 ? -1 : (h->reason = "ClientHello interrupted by another record", -2);
        if (len - off < 2)
            return 0;
        if (data[off + 1] != 3)
            return off == 0 ? -1 : (h->reason = "bad record version", -2);
        if (len - off < REC_HEADER)
            return 0;
        size_t rlen = (size_t)data[off + 3] << 8 | data[off + 4];
        if (rlen == 0 || rlen > REC_MAX) {
            h->reason = rlen == 0 ? "empty handshake record" : "record too long";
            return -2;
        }
        off += REC_HEADER;
        size_t avail = len - off < rlen ? len - off : rlen;
        size_t take = need - *have < avail ? need - *have : avail;
        memcpy(hs + *have, data + off, take);
        *have += take;
        if (*have == need) {
            *end = off + rlen; /* the hello ends inside this record */
            return avail == rlen ? 1 : 0;
        }
        if (avail < rlen)
            return 0;
        off += rlen;
    }
    return 1;
}

enum tls_sniff_result tls_sniff(const uint8_t *data, size_t len, struct tls_hello *hello)
{
    static uint8_t dummy;
    uint8_t hs[4 + TLS_HELLO_MAX];
    size_t have, end = 0, body;
    int rc;

    memset(hello, 0, sizeof(*hello));
    if (data == NULL)
        data = &dummy, len = 0;
    if (len > TLS_SNIFF_MAX)
        len = TLS_SNIFF_MAX;
    rc = gather(data, len, hs, &have, 4, &end, hello);
    if (rc == 0 && have < 4) {
        if (len == TLS_SNIFF_MAX) {
            hello->reason = "ClientHello too large";
            rc = -2;
        } else {
            return TLS_SNIFF_NEED_MORE;
        }
    }
    if (rc == -1) {
        memset(hello, 0, sizeof(*hello));
        return TLS_SNIFF_NOT_TLS;
    }
    if (rc == -2)
        goto malformed;
    if (hs[0] != HS_CLIENT_HELLO) {
        hello->reason = "first handshake message is not a ClientHello";
        goto malformed;
    }
    body = (size_t)hs[1] << 16 | (size_t)hs[2] << 8 | hs[3];
    if (body > TLS_HELLO_MAX) {
        hello->reason = "ClientHello too large";
        goto malformed;
    }
    rc = gather(data, len, hs, &have, 4 + body, &end, hello);
    if (rc == -2)
        goto malformed;
    if (rc == 0) {
        if (len < TLS_SNIFF_MAX)
            return TLS_SNIFF_NEED_MORE;
        hello->reason = "ClientHello too large";
        goto malformed;
    }
    if (parse_hello(hs + 4, body, hello) < 0)
        goto malformed;
    hello->hello_len = end;
    if (!hello->sni_bad)
        hello->reason = NULL;
    return TLS_SNIFF_CLIENT_HELLO;

malformed: {
    const char *why = hello->reason;
    memset(hello, 0, sizeof(*hello));
    hello->reason = why;
    return TLS_SNIFF_MALFORMED;
}
}
