/* policy/guard.c - address classes and the resolved-address guard.
 *
 * An allowed name is resolved once; every answer is judged here and only
 * the ones that pass may be dialed (design.md "Resolved-address guard").
 */
#include "policy/policy.h"
#include "policy/policy-int.h"

#include "common/common.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *policy__article(enum policy_addr_class c)
{
    return c == POLICY_CLASS_UNSPECIFIED || c == POLICY_CLASS_EMBEDDED ? "an" : "a";
}

const char *policy_class_name(enum policy_addr_class c)
{
    switch (c) {
    case POLICY_CLASS_PUBLIC:
        return "public";
    case POLICY_CLASS_PRIVATE:
        return "private";
    case POLICY_CLASS_LOOPBACK:
        return "loopback";
    case POLICY_CLASS_UNSPECIFIED:
        return "unspecified";
    case POLICY_CLASS_LINK_LOCAL:
        return "link-local";
    case POLICY_CLASS_MULTICAST:
        return "multicast";
    case POLICY_CLASS_BROADCAST:
        return "broadcast";
    case POLICY_CLASS_RESERVED:
        return "reserved";
    case POLICY_CLASS_METADATA:
        return "metadata";
    case POLICY_CLASS_THIS_HOST:
        return "this-host";
    case POLICY_CLASS_PROXY:
        return "proxy-listener";
    case POLICY_CLASS_EMBEDDED:
        return "embedded-ipv4";
    case POLICY_CLASS_LISTED:
        return "listed";
    }
    return "unknown";
}

struct v4range {
    uint32_t net;
    unsigned prefix;
    enum policy_addr_class cls;
};

#define V4(a, b, c, d) (((uint32_t)(a) << 24) | ((uint32_t)(b) << 16) | ((uint32_t)(c) << 8) | (d))

/* Most specific first. */
static const struct v4range v4ranges[] = {
    {V4(169, 254, 169, 254), 32, POLICY_CLASS_METADATA}, /* AWS, GCP, Azure, OpenStack ... */
    {V4(169, 254, 170, 2), 32, POLICY_CLASS_METADATA},   /* AWS ECS task metadata */
    {V4(169, 254, 170, 23), 32, POLICY_CLASS_METADATA},  /* AWS EKS pod identity */
    {V4(100, 100, 100, 200), 32, POLICY_CLASS_METADATA}, /* Alibaba Cloud */
    {V4(192, 0, 0, 192), 32, POLICY_CLASS_METADATA},     /* Oracle Cloud */
    {V4(255, 255, 255, 255), 32, POLICY_CLASS_BROADCAST},
    {V4(0, 0, 0, 0), 8, POLICY_CLASS_UNSPECIFIED},
    {V4(10, 0, 0, 0), 8, POLICY_CLASS_PRIVATE},
    {V4(100, 64, 0, 0), 10, POLICY_CLASS_PRIVATE}, /* CGNAT */
    {V4(127, 0, 0, 0), 8, POLICY_CLASS_LOOPBACK},
    {V4(169, 254, 0, 0), 16, POLICY_CLASS_LINK_LOCAL},
    {V4(172, 16, 0, 0), 12, POLICY_CLASS_PRIVATE},
    {V4(192, 0, 0, 0), 24, POLICY_CLASS_RESERVED},    /* IETF protocol assignments */
    {V4(192, 0, 2, 0), 24, POLICY_CLASS_RESERVED},    /* TEST-NET-1 */
    {V4(192, 88, 99, 0), 24, POLICY_CLASS_RESERVED},  /* 6to4 relay anycast */
    {V4(192, 168, 0, 0), 16, POLICY_CLASS_PRIVATE},
    {V4(198, 18, 0, 0), 15, POLICY_CLASS_PRIVATE},    /* benchmarking; fake-IP resolvers */
    {V4(198, 51, 100, 0), 24, POLICY_CLASS_RESERVED}, /* TEST-NET-2 */
    {V4(203, 0, 113, 0), 24, POLICY_CLASS_RESERVED},  /* TEST-NET-3 */
    {V4(224, 0, 0, 0), 4, POLICY_CLASS_MULTICAST},
    {V4(240, 0, 0, 0), 4, POLICY_CLASS_RESERVED},
};

static enum policy_addr_class classify_v4(const uint8_t *b)
{
    uint32_t v = V4(b[0], b[1], b[2], b[3]);
    size_t i;

    for (i = 0; i < sizeof(v4ranges) / sizeof(v4ranges[0]); i++) {
        const struct v4range *r = &v4ranges[i];
        uint32_t mask = r->prefix == 0 ? 0 : 0xffffffffu << (32 - r->prefix);
        if ((v & mask) == r->net)
            return r->cls;
    }
    return POLICY_CLASS_PUBLIC;
}

static int prefix_eq(const uint8_t *b, const uint8_t *p, unsigned bits)
{
    unsigned full = bits / 8, rest = bits % 8;

    if (memcmp(b, p, full) != 0)
        return 0;
    if (rest == 0)
        return 1;
    return ((b[full] ^ p[full]) & (0xffu << (8 - rest))) == 0;
}

/* Classifies an embedded IPv4: a denied inner class makes the whole
 * address EMBEDDED; otherwise the v6 address takes the inner class. */
static enum policy_addr_class embedded(const uint8_t *v4, enum policy_addr_class *inner)
{
    enum policy_addr_class c = classify_v4(v4);

    if (inner != NULL)
        *inner = c;
    if (c == POLICY_CLASS_PUBLIC || c == POLICY_CLASS_PRIVATE)
        return c;
    return POLICY_CLASS_EMBEDDED;
}

/* Finds an IPv4 address embedded in an IPv6 one: mapped ::ffff:a.b.c.d,
 * SIIT-translated ::ffff:0:a.b.c.d (RFC 7915), compatible ::a.b.c.d, NAT64
 * 64:ff9b::/96 and the local-use 64:ff9b:1::/48 (last 32 bits), 6to4
 * 2002:AABB:CCDD::/16, and Teredo 2001:0::/32 (client address, inverted, in
 * the last 32 bits). Returns 1 and fills v4, or 0. */
int policy__embedded_v4(const uint8_t *b, uint8_t v4[4])
{
    static const uint8_t zero[12];
    static const uint8_t siit[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0};
    static const uint8_t nat64[12] = {0x00, 0x64, 0xff, 0x9b};
    static const uint8_t nat64_local[6] = {0x00, 0x64, 0xff, 0x9b, 0x00, 0x01};
    static const uint8_t teredo[4] = {0x20, 0x01, 0x00, 0x00};
    static const uint8_t sixtofour[2] = {0x20, 0x02};
    int i;

    if (policy__v6_is_mapped(b) || prefix_eq(b, siit, 96) || prefix_eq(b, nat64, 96) ||
        prefix_eq(b, nat64_local, 48) ||
        (memcmp(b, zero, 12) == 0 && !(b[12] == 0 && b[13] == 0 && b[14] == 0 && b[15] <= 1))) {
        memcpy(v4, b + 12, 4);
        return 1;
    }
    if (prefix_eq(b, sixtofour, 16)) {
        memcpy(v4, b + 2, 4);
        return 1;
    }
    if (prefix_eq(b, teredo, 32)) {
        for (i = 0; i < 4; i++)
            v4[i] = (uint8_t)(b[12 + i] ^ 0xff);
        return 1;
    }
    return 0;
}

static enum policy_addr_class classify_v6(const uint8_t *b, enum policy_addr_class *inner)
{
    static const uint8_t zero[16];
    static const uint8_t nat64_local[6] = {0x00, 0x64, 0xff, 0x9b, 0x00, 0x01};
    static const uint8_t doc[4] = {0x20, 0x01, 0x0d, 0xb8};
    static const uint8_t doc2[3] = {0x3f, 0xff, 0x00};
    static const uint8_t bench[6] = {0x20, 0x01, 0x00, 0x02, 0x00, 0x00};
    static const uint8_t discard[8] = {0x01, 0x00};
    static const uint8_t orchid[4] = {0x20, 0x01, 0x00, 0x10};
    static const uint8_t md_aws[16] = {0xfd, 0x00, 0x0e, 0xc2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, 0x54};
    static const uint8_t md_aws2[16] = {0xfd, 0x00, 0x0e, 0xc2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x00, 0x23};
    uint8_t v4[4];

    if (memcmp(b, zero, 16) == 0)
        return POLICY_CLASS_UNSPECIFIED;
    if (memcmp(b, zero, 15) == 0 && b[15] == 1)
        return POLICY_CLASS_LOOPBACK;
    if (memcmp(b, md_aws, 16) == 0 || memcmp(b, md_aws2, 16) == 0)
        return POLICY_CLASS_METADATA;
    if (policy__embedded_v4(b, v4)) {
        enum policy_addr_class c = embedded(v4, inner);
        /* the local-use NAT64 prefix is a site's own network */
        if (c == POLICY_CLASS_PUBLIC && prefix_eq(b, nat64_local, 48))
            return POLICY_CLASS_PRIVATE;
        return c;
    }
    if ((b[0] & 0xfe) == 0xfc)
        return POLICY_CLASS_PRIVATE; /* ULA fc00::/7 */
    if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80)
        return POLICY_CLASS_LINK_LOCAL; /* fe80::/10 */
    if (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0)
        return POLICY_CLASS_PRIVATE; /* fec0::/10 site-local, deprecated */
    if (b[0] == 0xff)
        return POLICY_CLASS_MULTICAST;
    if (prefix_eq(b, doc, 32) || prefix_eq(b, doc2, 20) || prefix_eq(b, discard, 64) ||
        prefix_eq(b, orchid, 28) || prefix_eq(b, bench, 48))
        return POLICY_CLASS_RESERVED;
    return POLICY_CLASS_PUBLIC;
}

/* The lowest-index deny IP rule (deniedDomains, then
 * deniedResolvedAddresses) matching an address or the IPv4 it embeds. */
uint32_t policy__ip_denied(const struct policy *p, const struct policy_addr *a, uint16_t port)
{
    int f = a->family == 4 ? 0 : 1;
    uint32_t r = policy__cidr_match(p, &p->deny_cidr[f], a, port);

    if (r == POLICY_NO_RULE)
        r = policy__cidr_match(p, &p->rdeny_cidr[f], a, port);
    if (r == POLICY_NO_RULE && a->family == 6) {
        struct policy_addr v4;
        memset(&v4, 0, sizeof(v4));
        if (policy__embedded_v4(a->bytes, v4.bytes)) {
            v4.family = 4;
            r = policy__cidr_match(p, &p->deny_cidr[0], &v4, port);
            if (r == POLICY_NO_RULE)
                r = policy__cidr_match(p, &p->rdeny_cidr[0], &v4, port);
        }
    }
    return r;
}

enum policy_addr_class policy_addr_classify(const struct policy_addr *a,
                                            enum policy_addr_class *inner)
{
    if (inner != NULL)
        *inner = POLICY_CLASS_PUBLIC;
    if (a->family == 4)
        return classify_v4(a->bytes);
    return classify_v6(a->bytes, inner);
}

int policy__addr_denied_class(enum policy_addr_class c, int deny_private)
{
    if (c == POLICY_CLASS_PUBLIC)
        return 0;
    if (c == POLICY_CLASS_PRIVATE)
        return deny_private;
    return 1;
}

static int addr_eq(const struct policy_addr *a, const struct policy_addr *b)
{
    return a->family == b->family && memcmp(a->bytes, b->bytes, a->family == 4 ? 4 : 16) == 0;
}

/* 1 when a listener on the wildcard address L (0.0.0.0 or ::) accepts a
 * connection to A: every loopback address (all of 127/8, ::1) and every
 * address of this host's interfaces. A "::" listener is dual-stack unless it
 * was made v6-only, so it takes IPv4 destinations too (counting them is the
 * safe side). A is never IPv4-mapped here: judge() unmaps it first. */
static int reaches_wildcard(const struct policy *p, const struct policy_addr *l,
                            const struct policy_addr *a, enum policy_addr_class natural)
{
    static const uint8_t zero[16];

    if (memcmp(l->bytes, zero, l->family == 4 ? 4 : 16) != 0)
        return 0;
    if (l->family == 4 && a->family != 4)
        return 0;
    if (natural == POLICY_CLASS_LOOPBACK)
        return 1;
    for (size_t i = 0; i < p->nself; i++)
        if (addr_eq(&p->self[i], a))
            return 1;
    return 0;
}

/* The class of an address, taking this host's and the proxy's own addresses
 * into account. */
enum policy_addr_class policy__local_class(const struct policy *p, const struct policy_addr *a,
                                           uint16_t port)
{
    enum policy_addr_class natural = policy_addr_classify(a, NULL);
    size_t i;

    for (i = 0; i < p->nlisteners; i++) {
        if ((addr_eq(&p->listeners[i], a) || reaches_wildcard(p, &p->listeners[i], a, natural)) &&
            (p->listener_ports[i] == 0 || p->listener_ports[i] == port))
            return POLICY_CLASS_PROXY;
    }
    /* Loopback, link-local and the like keep their own (denied) class. */
    if (natural != POLICY_CLASS_PUBLIC && natural != POLICY_CLASS_PRIVATE)
        return natural;
    for (i = 0; i < p->nself; i++) {
        if (addr_eq(&p->self[i], a))
            return POLICY_CLASS_THIS_HOST;
    }
    return natural;
}

int policy_set_local(struct policy *p, const struct policy_addr *self, size_t nself,
                     const struct policy_addr *listeners, const uint16_t *listener_ports,
                     size_t nlisteners)
{
    struct policy_addr *s = NULL, *l = NULL;
    uint16_t *lp = NULL;

    if (nself > 0) {
        s = malloc(nself * sizeof(*s));
        if (s == NULL)
            goto fail;
        memcpy(s, self, nself * sizeof(*s));
    }
    if (nlisteners > 0) {
        l = malloc(nlisteners * sizeof(*l));
        lp = malloc(nlisteners * sizeof(*lp));
        if (l == NULL || lp == NULL)
            goto fail;
        memcpy(l, listeners, nlisteners * sizeof(*l));
        memcpy(lp, listener_ports, nlisteners * sizeof(*lp));
    }
    free(p->self);
    free(p->listeners);
    free(p->listener_ports);
    p->self = s;
    p->nself = nself;
    p->listeners = l;
    p->listener_ports = lp;
    p->nlisteners = nlisteners;
    return 0;
fail:
    free(s);
    free(l);
    free(lp);
    return -ENOMEM;
}

static int is_localhost_name(const struct policy_host *h)
{
    static const char suffix[] = ".localhost";
    size_t slen = sizeof(suffix) - 1;

    if (h->kind != POLICY_HOST_NAME)
        return 0;
    if (strcmp(h->name, "localhost") == 0)
        return 1;
    return h->len > slen && memcmp(h->name + h->len - slen, suffix, slen) == 0;
}

/* v->why: the parts a, b, ... joined (up to a NULL), cut to fit. Not
 * snprintf: every answer of every connection gets one, and it is read only
 * when something is refused or explained. */
static void set_why(struct policy_guard_verdict *v, const char *a, ...)
{
    va_list ap;
    size_t at = 0;

    va_start(ap, a);
    for (const char *s = a; s != NULL; s = va_arg(ap, const char *))
        at = common_cat(v->why, sizeof(v->why), at, s);
    va_end(ap);
}

static void judge(const struct policy *p, enum policy_transport t, const struct policy_host *h,
                  uint16_t port, const struct policy_addr *in, struct policy_guard_verdict *v)
{
    struct policy_addr a = *in;
    char ip[64];
    uint32_t rule;
    int f;

    /* An IPv4-mapped answer is dialed as IPv4: judge it as IPv4. */
    if (a.family == 6 && policy__v6_is_mapped(a.bytes)) {
        memmove(a.bytes, a.bytes + 12, 4);
        memset(a.bytes + 4, 0, 12);
        a.family = 4;
    }
    f = a.family == 4 ? 0 : 1;
    v->addr = *in;
    v->rule = NULL;
    v->allowed = 0;
    v->dial = 0;
    v->cls = policy__local_class(p, &a, port);
    policy_addr_str(in, ip, sizeof(ip));

    rule = policy__ip_denied(p, &a, port);
    if (rule == POLICY_NO_RULE && t == POLICY_UDP)
        rule = policy__udp_ip_denied(p, &a, port);
    if (rule != POLICY_NO_RULE) {
        v->rule = &p->rules[rule];
        v->cls = POLICY_CLASS_LISTED;
        set_why(v, ip, " is denied by ", v->rule->list, " rule '", v->rule->pattern, "'",
                (const char *)NULL);
        return;
    }
    if (v->cls == POLICY_CLASS_PROXY) {
        set_why(v, ip, " is one of this proxy's own listeners", (const char *)NULL);
        return;
    }
    if (is_localhost_name(h)) {
        if (v->cls == POLICY_CLASS_LOOPBACK) {
            v->allowed = 1;
            set_why(v, ip, " is loopback, as ", h->name, " must be", (const char *)NULL);
        } else {
            set_why(v, h->name, " may resolve only to loopback, not ", ip, (const char *)NULL);
        }
        return;
    }
    /* an IP rule opens an address for its own transport only */
    rule = t == POLICY_UDP ? policy__udp_ip_allowed(p, &a, port)
                           : policy__cidr_match(p, &p->allow_cidr[f], &a, port);
    if (rule != POLICY_NO_RULE) {
        v->rule = &p->rules[rule];
        v->allowed = 1;
        set_why(v, ip, " is allowed by rule '", v->rule->pattern, "'", (const char *)NULL);
        return;
    }
    if (policy__addr_denied_class(v->cls, p->deny_private)) {
        set_why(v, ip, " is ", policy__article(v->cls), " ", policy_class_name(v->cls),
                " address", (const char *)NULL);
        return;
    }
    v->allowed = 1;
    set_why(v, ip, " is ", policy__article(v->cls), " ", policy_class_name(v->cls), " address",
            (const char *)NULL);
}

size_t policy_guard(const struct policy *p, const struct policy_host *h, uint16_t port,
                    const struct policy_addr *addrs, size_t n, struct policy_guard_verdict *out)
{
    return policy_guard_transport(p, POLICY_TCP, h, port, addrs, n, out);
}

size_t policy_guard_transport(const struct policy *p, enum policy_transport t,
                              const struct policy_host *h, uint16_t port,
                              const struct policy_addr *addrs, size_t n,
                              struct policy_guard_verdict *out)
{
    size_t i, ok = 0;

    for (i = 0; i < n; i++) {
        judge(p, t, h, port, &addrs[i], &out[i]);
        ok += out[i].allowed != 0;
    }
    return ok;
}
