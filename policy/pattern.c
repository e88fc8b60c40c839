/* policy/pattern.c - the rule grammar (design.md "Policy semantics").
 *
 *   example.com   *.example.com   *   203.0.113.7   10.0.0.0/8
 *   [2001:db8::1]   [fc00::]/7    each with an optional :PORT
 */
#include "policy/policy.h"
#include "policy/policy-int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <libpsl.h>
#include <string.h>

static const psl_ctx_t *psl(void)
{
    static const psl_ctx_t *ctx;
    static int done;

    if (!done) {
        ctx = psl_latest(NULL);
        if (ctx == NULL)
            ctx = psl_builtin();
        done = 1;
    }
    return ctx;
}

/* policy.h: the registrable domain of a canonical name, by the same public
 * suffix list the wildcard check reads. */
int policy_registrable_domain(const char *name, char *out, size_t cap)
{
    const char *rd;
    size_t n;

    if (psl() == NULL)
        return -ENOENT;
    rd = psl_registrable_domain(psl(), name);
    if (rd == NULL)
        return -ENOENT;
    n = strlen(rd);
    if (n + 1 > cap)
        return -ENOSPC;
    memcpy(out, rd, n + 1);
    return 0;
}

/* Parses "/LEN" (no leading zeros) into *prefix. */
static int parse_prefix(const char *s, size_t len, unsigned max, unsigned *prefix)
{
    unsigned v = 0;
    size_t i;

    if (len == 0 || len > 3 || (len > 1 && s[0] == '0'))
        return -EINVAL;
    for (i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -EINVAL;
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    if (v > max)
        return -EINVAL;
    *prefix = v;
    return 0;
}

static int host_bits_set(const struct policy_addr *a, unsigned prefix)
{
    unsigned nbytes = a->family == 4 ? 4 : 16;
    unsigned i;

    for (i = 0; i < nbytes; i++) {
        unsigned bit0 = i * 8;
        uint8_t mask;
        if (bit0 + 8 <= prefix)
            continue;
        mask = (uint8_t)(bit0 >= prefix ? 0xffu : 0xffu >> (prefix - bit0));
        if (a->bytes[i] & mask)
            return 1;
    }
    return 0;
}

/* The address part of an IP rule: "1.2.3.4", "1.2.3.4/8", "[v6]", "[v6]/N". */
static int parse_ip_rule(const char *s, size_t len, struct policy_rule *r, const char **why)
{
    char buf[64];
    const char *slash = memchr(s, '/', len);
    size_t alen = slash ? (size_t)(slash - s) : len;
    struct policy_addr a;
    unsigned prefix;

    memset(&a, 0, sizeof(a));
    if (s[0] == '[') {
        if (alen < 2 || s[alen - 1] != ']') {
            *why = memchr(s, ']', alen) != NULL ? "unexpected text after ']'"
                                                : "unterminated '[' in IPv6 address";
            return -EINVAL;
        }
        if (memchr(s, '%', alen) != NULL) {
            *why = "IPv6 zone ids are not allowed";
            return -EINVAL;
        }
        if (alen - 2 >= sizeof(buf)) {
            *why = "not a valid IPv6 address";
            return -EINVAL;
        }
        memcpy(buf, s + 1, alen - 2);
        buf[alen - 2] = '\0';
        if (inet_pton(AF_INET6, buf, a.bytes) != 1) {
            *why = "not a valid IPv6 address";
            return -EINVAL;
        }
        a.family = 6;
    } else {
        if (alen >= sizeof(buf)) {
            *why = "not a valid IPv4 address";
            return -EINVAL;
        }
        memcpy(buf, s, alen);
        buf[alen] = '\0';
        if (inet_pton(AF_INET, buf, a.bytes) != 1) {
            *why = "not a valid IPv4 address (write CIDR as a.b.c.d/N)";
            return -EINVAL;
        }
        a.family = 4;
    }
    prefix = a.family == 4 ? 32 : 128;
    if (slash != NULL) {
        if (parse_prefix(slash + 1, len - alen - 1, prefix, &prefix) < 0) {
            *why = a.family == 4 ? "invalid prefix length (must be 0-32)"
                                 : "invalid prefix length (must be 0-128)";
            return -EINVAL;
        }
        if (host_bits_set(&a, prefix)) {
            *why = "address has bits set beyond the prefix length (write the network address)";
            return -EINVAL;
        }
    }
    /* An IPv4-mapped IPv6 rule is an IPv4 rule: requests are judged as v4. */
    if (a.family == 6 && policy__v6_is_mapped(a.bytes) && prefix >= 96) {
        memmove(a.bytes, a.bytes + 12, 4);
        memset(a.bytes + 4, 0, 12);
        a.family = 4;
        prefix -= 96;
    }
    r->kind = POLICY_RULE_CIDR;
    r->addr = a;
    r->prefix = prefix;
    return 0;
}

/* Step 1: a pattern is a host, not a URL, with no space or control byte. */
static int check_chars(const char *pattern, size_t len, const char **why)
{
    size_t i;

    if (len == 0) {
        *why = "empty pattern";
        return -EINVAL;
    }
    if (strstr(pattern, "://") != NULL) {
        *why = "a URL is not a pattern; write the host only (e.g. example.com)";
        return -EINVAL;
    }
    for (i = 0; i < len; i++) {
        unsigned char c = (unsigned char)pattern[i];
        if (c <= 0x20 || c == 0x7f) {
            *why = "whitespace or control character in pattern";
            return -EINVAL;
        }
    }
    return 0;
}

/* Step 2: splits the optional :PORT; *hlen is the host part's length. */
static int split_port(const char *pattern, size_t len, size_t *hlen, uint16_t *port,
                      const char **why)
{
    const char *colon;

    *hlen = len;
    *port = 0;
    if (pattern[0] == '[') {
        const char *close = strchr(pattern, ']');
        if (close == NULL) {
            *why = "unterminated '[' in IPv6 address";
            return -EINVAL;
        }
        colon = strchr(close, ':');
    } else {
        colon = strchr(pattern, ':');
        if (colon != NULL && strchr(colon + 1, ':') != NULL) {
            *why = "IPv6 addresses must be bracketed, e.g. [2001:db8::1] or [2001:db8::]/32";
            return -EINVAL;
        }
    }
    if (colon == NULL)
        return 0;
    *hlen = (size_t)(colon - pattern);
    if (policy__parse_port(colon + 1, len - *hlen - 1, port) < 0) {
        *why = "invalid port (must be 1-65535, digits only, no leading zero)";
        return -EINVAL;
    }
    if (*hlen == 0) {
        *why = "missing host before ':PORT'";
        return -EINVAL;
    }
    return 0;
}

/* Step 3a: a bracketed address or a CIDR (anything with '/'). */
static int parse_ip_pattern(const char *pattern, size_t hlen, struct policy_rule *r, char *name,
                            const char **why)
{
    size_t i;

    for (i = 0; i < hlen && pattern[0] != '['; i++) {
        char c = pattern[i];
        if (!((c >= '0' && c <= '9') || c == '.' || c == '/')) {
            *why = "a path is not allowed in a pattern; write the host only";
            return -EINVAL;
        }
    }
    if (parse_ip_rule(pattern, hlen, r, why) < 0)
        return -EINVAL;
    policy_addr_str(&r->addr, name, POLICY_HOST_MAX + 1);
    return 0;
}

/* Step 3b: "*.NAME", not over a public suffix. */
static int parse_wildcard(const char *pattern, size_t hlen, int in_denied, struct policy_rule *r,
                          char *name, const char **why)
{
    struct policy_host h;
    int rc;

    if (memchr(pattern + 2, '*', hlen - 2) != NULL) {
        *why = "'*' is only allowed as a leading '*.'";
        return -EINVAL;
    }
    if (policy_host_normalize(pattern + 2, hlen - 2, &h, why) < 0)
        return -EINVAL;
    if (h.kind != POLICY_HOST_NAME) {
        *why = "a wildcard cannot cover an IP address (use CIDR, e.g. 10.0.0.0/8)";
        return -EINVAL;
    }
    if (psl() == NULL) {
        *why = "the public suffix list is unavailable, so wildcards cannot be checked";
        return -EINVAL;
    }
    rc = psl_is_public_suffix2(psl(), h.name, PSL_TYPE_ICANN | PSL_TYPE_NO_STAR_RULE);
    /* A deny rule can only make a policy stricter, so there a wildcard
     * over a multi-label public suffix (*.co.uk) is accepted, as srt
     * accepts it; a top-level one (*.com) stays refused in both lists,
     * as srt refuses it. */
    if (rc && in_denied && memchr(h.name, '.', h.len) != NULL)
        rc = 0;
    if (rc) {
        *why = "wildcard over a public suffix (it would match every site under it)";
        return -EINVAL;
    }
    r->kind = POLICY_RULE_WILDCARD;
    memcpy(name, h.name, h.len + 1);
    return 0;
}

/* Step 3c: a name, or an unbracketed IP literal (a one-address CIDR). */
static int parse_host_pattern(const char *pattern, size_t hlen, struct policy_rule *r, char *name,
                              const char **why)
{
    struct policy_host h;

    if (memchr(pattern, '*', hlen) != NULL) {
        *why = "'*' is only allowed as a leading '*.' (or a bare '*' in deniedDomains)";
        return -EINVAL;
    }
    if (policy_host_normalize(pattern, hlen, &h, why) < 0)
        return -EINVAL;
    if (h.kind != POLICY_HOST_NAME) {
        r->kind = POLICY_RULE_CIDR;
        r->addr = h.addr;
        r->prefix = h.addr.family == 4 ? 32 : 128;
        memcpy(name, h.name, h.len + 1);
        return 0;
    }
    r->kind = POLICY_RULE_NAME;
    memcpy(name, h.name, h.len + 1);
    return 0;
}

int policy_pattern_parse(const char *pattern, int in_denied, struct policy_rule *r, char *name,
                         const char **why)
{
    size_t len = strlen(pattern), hlen;
    uint16_t port;

    *why = NULL;
    name[0] = '\0';
    r->port = 0;
    r->prefix = 0;
    memset(&r->addr, 0, sizeof(r->addr));
    if (strncmp(pattern, "udp:", 4) == 0) { /* policy_rule_parse's, in the domain lists */
        *why = "a udp: rule is written in network.allowedDomains or network.deniedDomains only";
        return -EINVAL;
    }
    if (check_chars(pattern, len, why) < 0 || split_port(pattern, len, &hlen, &port, why) < 0)
        return -EINVAL;
    r->port = port;

    if (hlen == 1 && pattern[0] == '*') {
        if (!in_denied) {
            *why = "a bare '*' is only allowed in deniedDomains (use network.allowAllDomains to "
                   "allow everything)";
            return -EINVAL;
        }
        r->kind = POLICY_RULE_ANY;
        name[0] = '*';
        name[1] = '\0';
        return 0;
    }
    if (pattern[0] == '[' || memchr(pattern, '/', hlen) != NULL)
        return parse_ip_pattern(pattern, hlen, r, name, why);
    if (hlen >= 2 && pattern[0] == '*' && pattern[1] == '.')
        return parse_wildcard(pattern, hlen, in_denied, r, name, why);
    return parse_host_pattern(pattern, hlen, r, name, why);
}
