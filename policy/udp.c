/* policy/udp.c - "udp:" rules and the UDP decision (issue 26).
 *
 *   network.allowedDomains: "udp:PATTERN:PORT" or "udp:PATTERN:*" opens UDP
 *   to that destination; every other allow rule stays TCP-only.
 *   network.deniedDomains:  "udp:PATTERN[:PORT|:*]" denies UDP only; a deny
 *   rule without "udp:" denies both transports.
 *
 * The "udp:" rules sit in the policy's rule array (so a decision names them
 * like any other) and in tables of their own here. A UDP decision is
 * deny-first over the deny rules of both kinds, then the "udp:" allow rules;
 * no rule deciding is a denial: UDP is never asked about and never opened by
 * allowAllDomains. Report mode reports such a denial as it reports TCP's.
 */
#include "policy/policy.h"
#include "policy/policy-int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct policy_udp {
    struct ptab deny_exact, deny_wild, allow_exact, allow_wild;
    uint32_t deny_any, deny_any_tail;
    struct pcidr deny_cidr[2], allow_cidr[2]; /* [0] v4, [1] v6 */
};

#define UDP_PREFIX "udp:"
#define UDP_PREFIX_LEN 4

int policy_rule_parse(const char *value, int in_denied, struct policy_rule *r, char *name,
                      const char **why)
{
    char rest[POLICY_HOST_MAX + 64];
    size_t len;
    int any_port = 0, rc;

    if (strncmp(value, UDP_PREFIX, UDP_PREFIX_LEN) != 0) {
        r->udp = 0;
        return policy_pattern_parse(value, in_denied, r, name, why);
    }
    len = strlen(value + UDP_PREFIX_LEN);
    if (len >= sizeof(rest)) {
        *why = "pattern too long";
        name[0] = '\0';
        return -EINVAL;
    }
    memcpy(rest, value + UDP_PREFIX_LEN, len + 1);
    if (len >= 2 && rest[len - 1] == '*' && rest[len - 2] == ':') {
        rest[len - 2] = '\0'; /* udp:PATTERN:* is PATTERN on every port */
        any_port = 1;
    }
    rc = policy_pattern_parse(rest, in_denied, r, name, why);
    if (rc < 0)
        return rc;
    if (r->port == 0 && !any_port && !in_denied) {
        *why = "a udp: rule names its port: udp:PATTERN:PORT (PORT may be '*' for every port)";
        return -EINVAL;
    }
    if (any_port && r->port != 0) {
        *why = "a udp: rule has one port (udp:PATTERN:PORT or udp:PATTERN:*)";
        return -EINVAL;
    }
    r->udp = 1;
    return 0;
}

int policy__udp_add(struct policy *p, const struct policy_rule *r, const char *name, uint32_t idx)
{
    struct policy_udp *u = p->udp;
    int denied = r->list_id == POLICY_LIST_DENIED;

    if (u == NULL) {
        u = calloc(1, sizeof(*u));
        if (u == NULL)
            return -ENOMEM;
        u->deny_any = POLICY_NO_RULE;
        u->deny_any_tail = POLICY_NO_RULE;
        p->udp = u;
    }
    switch (r->kind) {
    case POLICY_RULE_NAME:
        return policy__ptab_add(p, denied ? &u->deny_exact : &u->allow_exact,
                                (const uint8_t *)name, strlen(name), idx);
    case POLICY_RULE_WILDCARD: {
        struct ptab *t = denied ? &u->deny_wild : &u->allow_wild;
        size_t labels = 1;
        for (size_t k = 0; name[k] != '\0'; k++)
            labels += name[k] == '.';
        t->label_mask |= UINT64_C(1) << (labels < 63 ? labels : 63);
        return policy__ptab_add(p, t, (const uint8_t *)name, strlen(name), idx);
    }
    case POLICY_RULE_ANY: /* deniedDomains only (the grammar refuses it elsewhere) */
        if (u->deny_any == POLICY_NO_RULE)
            u->deny_any = idx;
        else
            p->chain[u->deny_any_tail] = idx;
        u->deny_any_tail = idx;
        return 0;
    case POLICY_RULE_CIDR: {
        struct pcidr *c = denied ? u->deny_cidr : u->allow_cidr;
        return policy__cidr_add(p, &c[r->addr.family == 4 ? 0 : 1], r, idx);
    }
    }
    return -EINVAL;
}

void policy__udp_free(struct policy *p)
{
    struct policy_udp *u = p->udp;

    if (u == NULL)
        return;
    policy__ptab_free(&u->deny_exact);
    policy__ptab_free(&u->deny_wild);
    policy__ptab_free(&u->allow_exact);
    policy__ptab_free(&u->allow_wild);
    for (int f = 0; f < 2; f++) {
        policy__cidr_free(&u->deny_cidr[f]);
        policy__cidr_free(&u->allow_cidr[f]);
    }
    free(u);
    p->udp = NULL;
}

static uint32_t min_rule(uint32_t a, uint32_t b)
{
    return a < b ? a : b;
}

uint32_t policy__udp_ip_denied(const struct policy *p, const struct policy_addr *a, uint16_t port)
{
    const struct policy_udp *u = p->udp;
    uint32_t r;

    if (u == NULL)
        return POLICY_NO_RULE;
    r = policy__cidr_match(p, &u->deny_cidr[a->family == 4 ? 0 : 1], a, port);
    if (r == POLICY_NO_RULE && a->family == 6) {
        struct policy_addr v4;
        memset(&v4, 0, sizeof(v4));
        if (policy__embedded_v4(a->bytes, v4.bytes)) {
            v4.family = 4;
            r = policy__cidr_match(p, &u->deny_cidr[0], &v4, port);
        }
    }
    return r;
}

uint32_t policy__udp_ip_allowed(const struct policy *p, const struct policy_addr *a,
                                uint16_t port)
{
    if (p->udp == NULL)
        return POLICY_NO_RULE;
    return policy__cidr_match(p, &p->udp->allow_cidr[a->family == 4 ? 0 : 1], a, port);
}

static void no_udp_rule(const struct policy_host *h, uint16_t port, struct policy_decision *d)
{
    d->verdict = POLICY_DENY;
    d->origin = POLICY_BY_NO_RULE;
    d->rule = NULL;
    /* a long name is cut: the reason is a one-line summary */
    snprintf(d->reason, sizeof(d->reason), "no udp: rule allows UDP to %s%.200s%s:%u",
             h->kind == POLICY_HOST_IPV6 ? "[" : "", h->name,
             h->kind == POLICY_HOST_IPV6 ? "]" : "", (unsigned)port);
}

/* The UDP decision: deny rules of both kinds first, then "udp:" allow
 * rules, then (an IP literal) its address class, else no rule: DENY. */
static void decide_udp(const struct policy *p, const struct policy_host *h, uint16_t port,
                       struct policy_decision *d)
{
    const struct policy_udp *u = p->udp;
    uint32_t deny, allow = POLICY_NO_RULE;

    if (p->match_count != NULL)
        ++*p->match_count;
    deny = policy__chain_first(p, p->deny_any, port);
    if (u != NULL)
        deny = min_rule(deny, policy__chain_first(p, u->deny_any, port));
    if (h->kind == POLICY_HOST_NAME) {
        deny = min_rule(deny, policy__name_match(p, &p->deny_exact, &p->deny_wild, h, port));
        if (u != NULL) {
            deny = min_rule(deny, policy__name_match(p, &u->deny_exact, &u->deny_wild, h, port));
            allow = policy__name_match(p, &u->allow_exact, &u->allow_wild, h, port);
        }
    } else {
        deny = min_rule(deny, policy__ip_denied(p, &h->addr, port));
        deny = min_rule(deny, policy__udp_ip_denied(p, &h->addr, port));
        allow = policy__udp_ip_allowed(p, &h->addr, port);
    }
    if (deny != POLICY_NO_RULE) {
        policy__decide_rule(p, deny, POLICY_DENY, d);
        return;
    }
    if (allow != POLICY_NO_RULE) {
        policy__decide_rule(p, allow, POLICY_ALLOW, d);
        return;
    }
    if (h->kind != POLICY_HOST_NAME && policy__decide_class(p, h, port, d))
        return;
    no_udp_rule(h, port, d);
}

void policy_decide_transport(const struct policy *p, enum policy_transport t,
                             const struct policy_host *h, uint16_t port,
                             struct policy_decision *d)
{
    if (t != POLICY_UDP) {
        policy_decide(p, h, port, d);
        return;
    }
    decide_udp(p, h, port, d);
    d->transport = POLICY_UDP;
}

void policy_verdict_transport(const struct policy *p, enum policy_transport t,
                              const struct policy_host *h, uint16_t port,
                              const struct policy_addr *addrs, size_t n,
                              struct policy_guard_verdict *gv, struct policy_judgment *j)
{
    struct policy_decision m;

    policy_decide_transport(p, t, h, port, &m);
    policy_verdict_finish(p, h, port, &m, addrs, n, gv, j);
}
