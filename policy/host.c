/* policy/host.c - request host normalisation and target parsing.
 *
 * Everything a client names passes through policy_host_normalize() once,
 * before any rule or resolver sees it (design.md "Policy semantics").
 */
#include "policy/policy.h"
#include "policy/policy-int.h"

#include "common/common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <idn2.h>
#include <stdlib.h>
#include <string.h>

/* Longest raw host we look at before IDNA; longer input is refused. */
#define RAW_HOST_MAX 1024

static int is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

static size_t count_char(const char *s, size_t len, char c)
{
    size_t n = 0;
    size_t i;

    for (i = 0; i < len; i++)
        n += s[i] == c;
    return n;
}

const char *policy_addr_str(const struct policy_addr *a, char *buf, size_t len)
{
    if (a->family == 4 && len >= 16) {
        size_t n = 0;
        int k;
        for (k = 0; k < 4; k++) {
            unsigned v = a->bytes[k];
            if (v >= 100)
                buf[n++] = (char)('0' + v / 100);
            if (v >= 10)
                buf[n++] = (char)('0' + v / 10 % 10);
            buf[n++] = (char)('0' + v % 10);
            buf[n++] = k < 3 ? '.' : '\0';
        }
        return buf;
    }
    if (inet_ntop(a->family == 4 ? AF_INET : AF_INET6, a->bytes, buf, (socklen_t)len) == NULL) {
        if (len > 0)
            buf[0] = '\0';
    }
    return buf;
}

int policy_addr_parse(const char *s, struct policy_addr *a)
{
    struct policy_addr tmp;

    memset(&tmp, 0, sizeof(tmp));
    if (inet_pton(AF_INET, s, tmp.bytes) == 1) {
        tmp.family = 4;
    } else if (strchr(s, '%') == NULL && inet_pton(AF_INET6, s, tmp.bytes) == 1) {
        tmp.family = 6;
    } else {
        return -EINVAL;
    }
    *a = tmp;
    return 0;
}

int policy__v6_is_mapped(const uint8_t *b)
{
    static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return memcmp(b, prefix, sizeof(prefix)) == 0;
}

/* Parses one part of a numeric IPv4 spelling: decimal, 0x hex, or octal
 * with a leading 0. Returns 0 or -1 (empty, bad digit, overflow). */
static int parse_v4_part(const char *s, size_t len, uint64_t *out)
{
    uint64_t v = 0;
    size_t i = 0;
    unsigned base = 10;

    if (len == 0)
        return -1;
    if (len >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        base = 16;
        i = 2;
        if (len == 2)
            return -1;
    } else if (len >= 2 && s[0] == '0') {
        base = 8;
        i = 1;
    }
    for (; i < len; i++) {
        int d;
        unsigned char c = (unsigned char)s[i];
        if (base == 16)
            d = common_hex_digit(c);
        else if (is_digit(c))
            d = c - '0';
        else
            d = -1;
        if (d < 0 || (unsigned)d >= base)
            return -1;
        v = v * base + (unsigned)d;
        if (v > 0xffffffffu)
            return -1;
    }
    *out = v;
    return 0;
}

/* Does the last label spell a number (so the host is an IPv4 spelling)? */
static int last_label_numeric(const char *s, size_t len)
{
    size_t start = len;
    size_t i;

    while (start > 0 && s[start - 1] != '.')
        start--;
    if (start == len)
        return 0;
    if (len - start >= 2 && s[start] == '0' && (s[start + 1] == 'x' || s[start + 1] == 'X')) {
        for (i = start + 2; i < len; i++)
            if (common_hex_digit((unsigned char)s[i]) < 0)
                return 0;
        return 1;
    }
    for (i = start; i < len; i++)
        if (!is_digit((unsigned char)s[i]))
            return 0;
    return 1;
}

/* inet_aton forms, strictly: 1 to 4 parts, the last filling the rest. */
static int parse_v4_number(const char *s, size_t len, uint8_t out[4])
{
    uint64_t parts[4];
    size_t nparts = 0;
    size_t start = 0;
    size_t i;
    uint32_t v;

    for (i = 0; i <= len; i++) {
        if (i == len || s[i] == '.') {
            if (nparts == 4)
                return -1;
            if (parse_v4_part(s + start, i - start, &parts[nparts]) < 0)
                return -1;
            nparts++;
            start = i + 1;
        }
    }
    for (i = 0; i + 1 < nparts; i++)
        if (parts[i] > 255)
            return -1;
    if (parts[nparts - 1] > (0xffffffffu >> (8 * (nparts - 1))))
        return -1;
    v = (uint32_t)parts[nparts - 1];
    for (i = 0; i + 1 < nparts; i++)
        v |= (uint32_t)parts[i] << (24 - 8 * i);
    out[0] = (uint8_t)(v >> 24);
    out[1] = (uint8_t)(v >> 16);
    out[2] = (uint8_t)(v >> 8);
    out[3] = (uint8_t)v;
    return 0;
}

static void set_ip(struct policy_host *out, const struct policy_addr *a)
{
    out->addr = *a;
    out->kind = a->family == 4 ? POLICY_HOST_IPV4 : POLICY_HOST_IPV6;
    policy_addr_str(a, out->name, sizeof(out->name));
    out->len = strlen(out->name);
}

/* An IPv6 text without brackets; IPv4-mapped becomes IPv4. */
static int host_from_v6(const char *s, size_t len, struct policy_host *out, const char **why)
{
    char buf[64];
    struct policy_addr a;

    if (memchr(s, '%', len) != NULL) {
        *why = "IPv6 zone ids are not allowed";
        return -EINVAL;
    }
    if (len == 0 || len >= sizeof(buf)) {
        *why = "not a valid IPv6 address";
        return -EINVAL;
    }
    memcpy(buf, s, len);
    buf[len] = '\0';
    memset(&a, 0, sizeof(a));
    if (inet_pton(AF_INET6, buf, a.bytes) != 1) {
        *why = "not a valid IPv6 address";
        return -EINVAL;
    }
    a.family = 6;
    if (policy__v6_is_mapped(a.bytes)) {
        memmove(a.bytes, a.bytes + 12, 4);
        memset(a.bytes + 4, 0, 12);
        a.family = 4;
    }
    set_ip(out, &a);
    return 0;
}

/* Checks the A-label form: letters, digits, '-', '_', '.', label lengths. */
static int check_name(const char *s, size_t len, const char **why)
{
    size_t label = 0;
    size_t i;

    if (len == 0) {
        *why = "empty host";
        return -EINVAL;
    }
    if (len > POLICY_HOST_MAX) {
        *why = "host name longer than 253 bytes";
        return -EINVAL;
    }
    for (i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '.') {
            if (label == 0) {
                *why = "empty label in host name";
                return -EINVAL;
            }
            if (s[i - 1] == '-') {
                *why = "host name label ends with '-'";
                return -EINVAL;
            }
            label = 0;
            continue;
        }
        if (c == '-' && label == 0) {
            *why = "host name label starts with '-'";
            return -EINVAL;
        }
        if (!((c >= 'a' && c <= 'z') || is_digit(c) || c == '-' || c == '_')) {
            *why = c == '*' ? "'*' is not allowed in a host" : "invalid character in host name";
            return -EINVAL;
        }
        if (++label > 63) {
            *why = "host name label longer than 63 bytes";
            return -EINVAL;
        }
    }
    if (label == 0) {
        *why = "empty label in host name";
        return -EINVAL;
    }
    if (s[len - 1] == '-') {
        *why = "host name label ends with '-'";
        return -EINVAL;
    }
    return 0;
}


/* Validates A-labels ("xn--") with libidn2; the name is otherwise ASCII. */
static int check_alabels(char *buf, size_t *len, const char **why)
{
    char *ace = NULL;
    size_t n;
    int rc = idn2_lookup_u8((const uint8_t *)buf, (uint8_t **)&ace,
                            IDN2_NFC_INPUT | IDN2_NONTRANSITIONAL);

    if (rc != IDN2_OK) {
        *why = "invalid internationalised host name (IDNA)";
        return -EINVAL;
    }
    n = strlen(ace);
    if (n > RAW_HOST_MAX) {
        idn2_free(ace);
        *why = "host name longer than 253 bytes";
        return -EINVAL;
    }
    memcpy(buf, ace, n + 1);
    idn2_free(ace);
    *len = n;
    return 0;
}

int policy_host_normalize(const char *raw, size_t len, struct policy_host *out, const char **why)
{
    char buf[RAW_HOST_MAX + 1];
    int nonascii = 0, alabel = 0;
    size_t colons = 0;
    size_t i;

    *why = NULL;
    if (len == 0) {
        *why = "empty host";
        return -EINVAL;
    }
    if (len > RAW_HOST_MAX) {
        *why = "host longer than 1024 bytes";
        return -EINVAL;
    }
    if (raw[0] == '[') {
        if (len < 2 || raw[len - 1] != ']') {
            *why = "unterminated '[' in IPv6 address";
            return -EINVAL;
        }
        for (i = 1; i + 1 < len; i++) {
            unsigned char c = (unsigned char)raw[i];
            if (c <= ' ' || c >= 0x7f) {
                *why = c == '\0' ? "NUL byte in host" : "invalid byte in IPv6 address";
                return -EINVAL;
            }
        }
        return host_from_v6(raw + 1, len - 2, out, why);
    }
    /* One pass: refuse bytes no host may hold, copy and lower-case ASCII. */
    for (i = 0; i < len; i++) {
        unsigned char c = (unsigned char)raw[i];
        if (c <= ' ' || c == 0x7f || c == '%') {
            *why = c == '\0'  ? "NUL byte in host"
                   : c == ' ' ? "whitespace in host"
                   : c == '%' ? "'%' is not allowed in a host (zone ids and escapes are refused)"
                              : "control character in host";
            return -EINVAL;
        }
        if (c >= 'A' && c <= 'Z')
            c = (unsigned char)(c - 'A' + 'a');
        else if (c == ':')
            colons++;
        else if (c >= 0x80)
            nonascii = 1;
        else if (c == '-' && i >= 3 && buf[i - 1] == '-' && buf[i - 2] == 'n' &&
                 buf[i - 3] == 'x' && (i == 3 || buf[i - 4] == '.'))
            alabel = 1; /* "xn--" starts a label: validate it with IDNA */
        buf[i] = (char)c;
    }
    if (colons > 1)
        return host_from_v6(raw, len, out, why);
    if (colons == 1) {
        *why = "':' is not allowed in a host name";
        return -EINVAL;
    }
    buf[len] = '\0';
    if (buf[len - 1] == '.')
        buf[--len] = '\0';
    if (len == 0) {
        *why = "empty host";
        return -EINVAL;
    }

    if (nonascii || alabel) {
        if (check_alabels(buf, &len, why) < 0)
            return -EINVAL;
        for (i = 0; i < len; i++) {
            if (buf[i] >= 'A' && buf[i] <= 'Z')
                buf[i] = (char)(buf[i] - 'A' + 'a');
        }
        if (len > 0 && buf[len - 1] == '.') {
            *why = "empty label in host name";
            return -EINVAL;
        }
    }
    if (check_name(buf, len, why) < 0)
        return -EINVAL;

    if (last_label_numeric(buf, len)) {
        struct policy_addr a;
        memset(&a, 0, sizeof(a));
        if (parse_v4_number(buf, len, a.bytes) < 0) {
            *why = "host ends in a number but is not a valid IPv4 address";
            return -EINVAL;
        }
        a.family = 4;
        set_ip(out, &a);
        return 0;
    }

    out->kind = POLICY_HOST_NAME;
    memset(&out->addr, 0, sizeof(out->addr));
    memcpy(out->name, buf, len + 1);
    out->len = len;
    return 0;
}

/* Strict port: 1..65535, digits only, no leading zero. */
int policy__parse_port(const char *s, size_t len, uint16_t *port)
{
    unsigned v = 0;
    size_t i;

    if (len == 0 || len > 5 || s[0] == '0')
        return -EINVAL;
    for (i = 0; i < len; i++) {
        if (!is_digit((unsigned char)s[i]))
            return -EINVAL;
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    if (v < 1 || v > 65535)
        return -EINVAL;
    *port = (uint16_t)v;
    return 0;
}

int policy_target_parse(const char *s, uint16_t default_port, struct policy_host *host,
                        uint16_t *port, const char **why)
{
    size_t len = strlen(s);
    const char *host_start = s;
    size_t host_len = len;
    const char *port_s = NULL;
    size_t port_len = 0;
    uint16_t p = default_port;
    struct policy_host h;

    *why = NULL;
    if (len == 0) {
        *why = "empty target";
        return -EINVAL;
    }
    if (memchr(s, '@', len) != NULL) {
        *why = "userinfo ('@') is not allowed in a target";
        return -EINVAL;
    }
    if (s[0] == '[') {
        const char *close = memchr(s, ']', len);
        if (close == NULL) {
            *why = "unterminated '[' in IPv6 address";
            return -EINVAL;
        }
        host_len = (size_t)(close - s) + 1;
        if (host_len < len) {
            if (close[1] != ':') {
                *why = "unexpected text after ']'";
                return -EINVAL;
            }
            port_s = close + 2;
            port_len = len - host_len - 1;
        }
    } else {
        const char *colon = memchr(s, ':', len);
        if (colon != NULL && count_char(s, len, ':') == 1) {
            host_len = (size_t)(colon - s);
            port_s = colon + 1;
            port_len = len - host_len - 1;
        }
    }
    if (port_s != NULL && policy__parse_port(port_s, port_len, &p) < 0) {
        *why = "invalid port (must be 1-65535, digits only, no leading zero)";
        return -EINVAL;
    }
    if (policy_host_normalize(host_start, host_len, &h, why) < 0)
        return -EINVAL;
    *host = h;
    *port = p;
    return 0;
}
