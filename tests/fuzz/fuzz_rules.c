/* tests/fuzz/fuzz_rules.c - the rule grammar and request-host normalisation
 * (policy/host.c, pattern.c, match.c, guard.c).
 *
 * The input is lines. Each line, raw, goes through:
 *   - policy_host_normalize: canonical names are lower-case LDH(_) labels,
 *     never an IP address text; IP kinds print as their address; the
 *     canonical text normalises to itself;
 *   - policy_target_parse (default port 443): a port is never 0, the host
 *     is canonical, a colon-free host that normalises is a target too;
 *   - policy_pattern_parse: what allowedDomains accepts deniedDomains accepts
 *     the same way; names are canonical; CIDRs have no host bits;
 *   - policy_addr_parse / policy_addr_str round trip.
 * "udp:PAT:PORT" lines (policy_rule_parse) are udp: rules: what
 * allowedDomains accepts deniedDomains accepts too, and plain pattern keys
 * refuse them. Then the lines build a policy: "-PAT" a deny rule, "@PAT" a
 * deniedResolvedAddresses entry, "!strict" / "!all" / "!private" the
 * flags, any other line an allow rule (only lines whose pattern parses, so
 * the compile must succeed). Every line that is a target is decided, and
 * the decision is checked against a reference matcher written here from
 * design.md's semantics: the deciding rule matches the host (exact name,
 * right-anchored "*." subdomain, CIDR prefix, port), an IP literal is never
 * decided by a name rule nor a name by an IP rule, and a deny rule (or a
 * deniedResolvedAddresses entry, which judges IP literals too) that matches
 * always wins. Addresses in the input go through policy_guard.
 * Every target is also decided for UDP (policy/udp.c): a deny rule of
 * either kind that matches wins, only a udp: allow rule allows, nothing
 * is asked and no rule deciding denies; a udp: rule never decides TCP.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "policy/policy.h"

#define MAX_LINES 48
#define MAX_LINE 600
#define MAX_ADDRS 16

static const char fuzz_file[] = "fuzz.rules";

struct parsed_rule {
    int ok;
    struct policy_rule r;
    char name[POLICY_HOST_MAX + 1];
};

static int is_canon_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
}

static void check_canonical(const struct policy_host *h)
{
    static struct policy_host h2;
    struct policy_addr a;
    const char *why = NULL;
    char buf[64];

    FUZZ_CHECK(h->len > 0 && h->len <= POLICY_HOST_MAX && h->len == strlen(h->name));
    FUZZ_CHECK(policy_host_normalize(h->name, h->len, &h2, &why) == 0);
    FUZZ_CHECK(h2.kind == h->kind && strcmp(h2.name, h->name) == 0);
    if (h->kind == POLICY_HOST_NAME) {
        for (size_t i = 0; i < h->len; i++)
            FUZZ_CHECK(is_canon_name_char(h->name[i]));
        FUZZ_CHECK(h->name[0] != '.' && h->name[h->len - 1] != '.');
        FUZZ_CHECK(strstr(h->name, "..") == NULL);
        FUZZ_CHECK(policy_addr_parse(h->name, &a) != 0);
    } else {
        FUZZ_CHECK(h->addr.family == (h->kind == POLICY_HOST_IPV4 ? 4 : 6));
        FUZZ_CHECK(strcmp(policy_addr_str(&h->addr, buf, sizeof(buf)), h->name) == 0);
        FUZZ_CHECK(policy_addr_parse(h->name, &a) == 0);
        FUZZ_CHECK(a.family == h->addr.family &&
                   memcmp(a.bytes, h->addr.bytes, a.family == 4 ? 4 : 16) == 0);
    }
}

static int prefix_match(const struct policy_addr *a, const struct policy_addr *net, unsigned prefix)
{
    for (unsigned i = 0; i < prefix; i++) {
        unsigned m = 0x80u >> (i % 8);
        if ((a->bytes[i / 8] & m) != (net->bytes[i / 8] & m))
            return 0;
    }
    return 1;
}

/* The reference: 1 matches, 0 does not, -1 this reference does not know. */
static int ref_match(const struct parsed_rule *p, const struct policy_host *h, uint16_t port)
{
    const struct policy_rule *r = &p->r;

    if (r->port != 0 && r->port != port)
        return 0;
    switch (r->kind) {
    case POLICY_RULE_ANY:
        return 1;
    case POLICY_RULE_NAME:
        return h->kind == POLICY_HOST_NAME && strcmp(h->name, p->name) == 0;
    case POLICY_RULE_WILDCARD: {
        size_t nl = strlen(p->name);
        return h->kind == POLICY_HOST_NAME && h->len > nl + 1 &&
               h->name[h->len - nl - 1] == '.' && strcmp(h->name + h->len - nl, p->name) == 0;
    }
    case POLICY_RULE_CIDR:
    default:
        if (h->kind == POLICY_HOST_NAME)
            return 0;
        if (h->addr.family != r->addr.family)
            return -1; /* embedded / mapped forms: the engine's own business */
        return prefix_match(&h->addr, &r->addr, r->prefix);
    }
}

static void check_line(const char *line, size_t len)
{
    static struct policy_host h, h2;
    static struct parsed_rule pa, pd;
    struct policy_addr a, a2;
    const char *why = NULL;
    uint16_t port = 0;
    char buf[64];
    int has_nul = memchr(line, '\0', len) != NULL;

    if (policy_host_normalize(line, len, &h, &why) == 0)
        check_canonical(&h);
    else
        FUZZ_CHECK(why != NULL);
    if (has_nul)
        return;

    if (policy_target_parse(line, 443, &h2, &port, &why) == 0) {
        FUZZ_CHECK(port != 0);
        check_canonical(&h2);
    } else {
        FUZZ_CHECK(why != NULL);
        /* a host without a port that normalises is a valid target */
        FUZZ_CHECK(memchr(line, ':', len) != NULL || policy_host_normalize(line, len, &h, &why) != 0);
    }

    pa.ok = policy_pattern_parse(line, 0, &pa.r, pa.name, &why) == 0;
    if (!pa.ok)
        FUZZ_CHECK(why != NULL);
    pd.ok = policy_pattern_parse(line, 1, &pd.r, pd.name, &why) == 0;
    if (strncmp(line, "udp:", 4) == 0) {
        struct policy_rule ru;
        char nu[POLICY_HOST_MAX + 1];
        FUZZ_CHECK(!pa.ok && !pd.ok); /* plain pattern keys never take udp: */
        memset(&ru, 0, sizeof(ru));
        if (policy_rule_parse(line, 0, &ru, nu, &why) == 0) {
            FUZZ_CHECK(ru.udp);
            pd.ok = policy_rule_parse(line, 1, &pd.r, pd.name, &why) == 0;
            FUZZ_CHECK(pd.ok && pd.r.udp && pd.r.kind == ru.kind && pd.r.port == ru.port &&
                       strcmp(pd.name, nu) == 0);
        }
        return;
    }
    if (pa.ok) {
        FUZZ_CHECK(pd.ok && pd.r.kind == pa.r.kind && pd.r.port == pa.r.port &&
                   strcmp(pd.name, pa.name) == 0);
        FUZZ_CHECK(pa.r.kind != POLICY_RULE_ANY);
    }
    if (pd.ok) {
        if (pd.r.kind == POLICY_RULE_NAME || pd.r.kind == POLICY_RULE_WILDCARD) {
            FUZZ_CHECK(policy_host_normalize(pd.name, strlen(pd.name), &h, &why) == 0);
            FUZZ_CHECK(h.kind == POLICY_HOST_NAME && strcmp(h.name, pd.name) == 0);
        } else if (pd.r.kind == POLICY_RULE_CIDR) {
            struct policy_addr net = pd.r.addr;
            FUZZ_CHECK(pd.r.addr.family == 4 || pd.r.addr.family == 6);
            FUZZ_CHECK(pd.r.prefix <= (pd.r.addr.family == 4 ? 32u : 128u));
            for (unsigned i = pd.r.prefix; i < (net.family == 4 ? 32u : 128u); i++)
                FUZZ_CHECK((net.bytes[i / 8] & (0x80u >> (i % 8))) == 0);
        }
    }

    if (policy_addr_parse(line, &a) == 0) {
        FUZZ_CHECK(a.family == 4 || a.family == 6);
        FUZZ_CHECK(policy_addr_parse(policy_addr_str(&a, buf, sizeof(buf)), &a2) == 0);
        FUZZ_CHECK(a2.family == a.family && memcmp(a2.bytes, a.bytes, a.family == 4 ? 4 : 16) == 0);
    }
}

static void add_item(struct settings_list *l, const char *value, const char *list)
{
    struct settings_item *items;

    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        items = realloc(l->items, cap * sizeof(*items));
        if (items == NULL)
            abort();
        l->items = items;
        l->cap = cap;
    }
    memset(&l->items[l->n], 0, sizeof(l->items[0]));
    l->items[l->n].value = fuzz_dup(value, strlen(value), 1);
    l->items[l->n].file = fuzz_file;
    l->items[l->n].line = (unsigned)l->n + 1;
    l->items[l->n].col = 1;
    l->items[l->n].list = list;
    l->items[l->n].index = l->n;
    l->n++;
}

static void check_decision(const struct policy *pol, const struct policy_host *h, uint16_t port,
                           const struct parsed_rule *deny, size_t ndeny, int allow_all)
{
    struct policy_decision d;
    static struct parsed_rule pr;
    const char *why = NULL;
    int deny_matches = 0;

    memset(&d, 0x5a, sizeof(d));
    policy_decide(pol, h, port, &d);
    FUZZ_CHECK(d.verdict == POLICY_DENY || d.verdict == POLICY_ALLOW || d.verdict == POLICY_ASK);
    FUZZ_CHECK(memchr(d.reason, '\0', sizeof(d.reason)) != NULL);
    for (const char *c = d.reason; *c; c++)
        FUZZ_CHECK(*c >= 0x20 && *c <= 0x7e);

    for (size_t i = 0; i < ndeny; i++)
        if (!deny[i].r.udp && ref_match(&deny[i], h, port) == 1)
            deny_matches = 1;
    FUZZ_CHECK(d.transport == POLICY_TCP && (d.rule == NULL || !d.rule->udp));
    if (deny_matches && d.verdict != POLICY_DENY) {
        fprintf(stderr, "'%s' port %u: a deny rule matches but the verdict is %d (%s)\n", h->name,
                (unsigned)port, (int)d.verdict, d.reason);
        abort();
    }

    switch (d.origin) {
    case POLICY_BY_RULE: {
        int m;
        FUZZ_CHECK(d.rule != NULL && d.rule->pattern != NULL);
        FUZZ_CHECK(d.verdict == (d.rule->list_id == POLICY_LIST_ALLOWED ? POLICY_ALLOW
                                                                         : POLICY_DENY));
        /* deniedResolvedAddresses also judge IP literals (design.md) */
        if (d.rule->list_id == POLICY_LIST_RESOLVED_DENIED)
            FUZZ_CHECK(d.rule->kind == POLICY_RULE_CIDR && h->kind != POLICY_HOST_NAME);
        if (h->kind == POLICY_HOST_NAME)
            FUZZ_CHECK(d.rule->kind != POLICY_RULE_CIDR);
        else
            FUZZ_CHECK(d.rule->kind == POLICY_RULE_CIDR || d.rule->kind == POLICY_RULE_ANY);
        pr.ok = policy_rule_parse(d.rule->pattern, d.rule->list_id != POLICY_LIST_ALLOWED, &pr.r,
                                  pr.name, &why) == 0;
        FUZZ_CHECK(pr.ok && pr.r.kind == d.rule->kind && pr.r.port == d.rule->port);
        m = ref_match(&pr, h, port);
        if (m == 0) {
            fprintf(stderr, "'%s' port %u decided by rule '%s', which does not match it\n",
                    h->name, (unsigned)port, d.rule->pattern);
            abort();
        }
        break;
    }
    case POLICY_BY_CLASS:
        FUZZ_CHECK(h->kind != POLICY_HOST_NAME && d.verdict == POLICY_DENY && d.rule == NULL);
        break;
    case POLICY_BY_ALLOW_ALL:
        FUZZ_CHECK(allow_all && d.verdict == POLICY_ALLOW && d.rule == NULL);
        break;
    case POLICY_BY_STRICT:
        FUZZ_CHECK(d.verdict == POLICY_DENY && d.rule == NULL);
        break;
    case POLICY_BY_NO_RULE:
        FUZZ_CHECK(d.verdict == POLICY_ASK && d.rule == NULL);
        break;
    default:
        FUZZ_CHECK(0);
    }
}

/* The UDP decision against the reference: deny-first over both kinds of
 * deny rule, only udp: allow rules allow, no asking. */
static void check_udp(const struct policy *pol, const struct policy_host *h, uint16_t port,
                      const struct parsed_rule *deny, size_t ndeny,
                      const struct policy_addr *addrs, size_t n)
{
    static struct policy_guard_verdict g1[MAX_ADDRS], g2[MAX_ADDRS];
    static struct policy_judgment j;
    static struct parsed_rule pr;
    struct policy_decision d;
    const char *why = NULL;
    int deny_matches = 0;
    size_t ok;

    memset(&d, 0x5a, sizeof(d));
    policy_decide_transport(pol, POLICY_UDP, h, port, &d);
    FUZZ_CHECK(d.transport == POLICY_UDP);
    FUZZ_CHECK(d.verdict == POLICY_DENY || d.verdict == POLICY_ALLOW);
    for (size_t i = 0; i < ndeny; i++)
        if (ref_match(&deny[i], h, port) == 1)
            deny_matches = 1;
    if (deny_matches)
        FUZZ_CHECK(d.verdict == POLICY_DENY);
    if (d.verdict == POLICY_ALLOW) {
        FUZZ_CHECK(d.origin == POLICY_BY_RULE && d.rule != NULL && d.rule->udp &&
                   d.rule->list_id == POLICY_LIST_ALLOWED);
        pr.ok = policy_rule_parse(d.rule->pattern, 0, &pr.r, pr.name, &why) == 0;
        FUZZ_CHECK(pr.ok && ref_match(&pr, h, port) != 0);
    } else {
        FUZZ_CHECK(d.origin == POLICY_BY_RULE || d.origin == POLICY_BY_CLASS ||
                   d.origin == POLICY_BY_NO_RULE);
        FUZZ_CHECK(d.rule == NULL || d.rule->list_id != POLICY_LIST_ALLOWED);
    }
    for (const char *c = d.reason; *c; c++)
        FUZZ_CHECK(*c >= 0x20 && *c <= 0x7e);
    /* the verdict folds it with the UDP guard, as for TCP */
    policy_verdict_transport(pol, POLICY_UDP, h, port, addrs, n, g2, &j);
    FUZZ_CHECK(j.transport == POLICY_UDP);
    if (h->kind != POLICY_HOST_NAME) {
        addrs = &h->addr;
        n = 1;
    }
    ok = n > 0 ? policy_guard_transport(pol, POLICY_UDP, h, port, addrs, n, g1) : 0;
    FUZZ_CHECK(j.nallowed == ok);
    for (size_t k = 0; k < n; k++)
        FUZZ_CHECK(g1[k].allowed == g2[k].allowed && g1[k].cls == g2[k].cls);
    if (d.verdict == POLICY_DENY)
        FUZZ_CHECK(j.verdict == POLICY_DENY && j.rule == d.rule);
    else if (ok == 0)
        FUZZ_CHECK(j.verdict == POLICY_DENY && j.origin == POLICY_BY_GUARD);
    else
        FUZZ_CHECK(j.verdict == POLICY_ALLOW && j.ndial > 0);
}

/* policy_verdict is the fold of policy_decide and policy_guard, nothing more:
 * not resolved (addrs NULL), a name gets the rule decision; an IP literal is
 * its own answer; with answers (maybe none) a rule deny stays and anything else is denied by the
 * guard exactly when no answer passes. */
static void check_verdict(const struct policy *pol, const struct policy_host *h, uint16_t port,
                          const struct policy_addr *addrs, size_t n)
{
    static struct policy_guard_verdict g1[MAX_ADDRS], g2[MAX_ADDRS];
    static struct policy_judgment j;
    struct policy_decision d;
    size_t ok;

    policy_decide(pol, h, port, &d);
    policy_verdict(pol, h, port, addrs, n, g2, &j);
    FUZZ_CHECK(memchr(j.reason, '\0', sizeof(j.reason)) != NULL);
    for (const char *c = j.reason; *c; c++)
        FUZZ_CHECK(*c >= 0x20 && *c <= 0x7e);
    if (h->kind == POLICY_HOST_NAME && addrs == NULL) {
        FUZZ_CHECK(!j.guarded && j.verdict == d.verdict && j.origin == d.origin &&
                   j.rule == d.rule && strcmp(j.reason, d.reason) == 0);
        return;
    }
    if (h->kind != POLICY_HOST_NAME) {
        addrs = &h->addr;
        n = 1;
    }
    ok = n > 0 ? policy_guard(pol, h, port, addrs, n, g1) : 0;
    FUZZ_CHECK(j.guarded && j.naddrs == n && j.nallowed == ok);
    for (size_t k = 0; k < n; k++)
        FUZZ_CHECK(g1[k].allowed == g2[k].allowed && g1[k].cls == g2[k].cls);
    if (d.verdict == POLICY_DENY)
        FUZZ_CHECK(j.verdict == POLICY_DENY && j.origin == d.origin && j.rule == d.rule);
    else if (ok == 0)
        FUZZ_CHECK(j.verdict == POLICY_DENY && j.origin == POLICY_BY_GUARD);
    else
        FUZZ_CHECK(j.verdict == d.verdict && j.origin == d.origin && j.rule == d.rule);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct parsed_rule deny[MAX_LINES];
    static struct policy_host targets[MAX_LINES];
    static uint16_t tports[MAX_LINES];
    static struct policy_guard_verdict gv[MAX_ADDRS];
    struct policy_addr addrs[MAX_ADDRS];
    struct settings s;
    struct settings_error err;
    struct policy *pol = NULL;
    size_t off = 0, nlines = 0, ndeny = 0, ntargets = 0, naddrs = 0;
    int rc;

    if (size > MAX_LINES * (MAX_LINE + 1))
        return 0;
    memset(addrs, 0, sizeof(addrs));
    settings_init(&s);
    s.network.deny_private_addresses = SETTINGS_FALSE;
    while (off < size && nlines < MAX_LINES) {
        const char *start = (const char *)data + off;
        const char *nl = memchr(start, '\n', size - off);
        size_t len = nl != NULL ? (size_t)(nl - start) : size - off;
        char *line;
        const char *why = NULL, *pat;
        struct policy_rule r;
        char name[POLICY_HOST_MAX + 1];

        off += len + (nl != NULL);
        nlines++;
        if (len > MAX_LINE)
            continue;
        line = fuzz_dup(start, len, 1);
        check_line(line, len);
        if (memchr(line, '\0', len) != NULL) {
            free(line);
            continue;
        }
        if (policy_target_parse(line, 443, &targets[ntargets], &tports[ntargets], &why) == 0)
            ntargets++;
        if (naddrs < MAX_ADDRS && policy_addr_parse(line, &addrs[naddrs]) == 0)
            naddrs++;

        pat = line[0] == '-' || line[0] == '@' ? line + 1 : line;
        if (strcmp(line, "!strict") == 0) {
            s.network.strict_allowlist = 1;
        } else if (strcmp(line, "!all") == 0) {
            s.network.allow_all_domains = 1;
        } else if (strcmp(line, "!private") == 0) {
            s.network.deny_private_addresses = SETTINGS_TRUE;
        } else if (line[0] == '-') {
            if (policy_rule_parse(pat, 1, &deny[ndeny].r, deny[ndeny].name, &why) == 0) {
                deny[ndeny].ok = 1;
                ndeny++;
                add_item(&s.network.denied_domains, pat, "network.deniedDomains");
            }
        } else if (line[0] == '@') {
            if (policy_pattern_parse(pat, 0, &r, name, &why) == 0 && r.kind == POLICY_RULE_CIDR &&
                r.port == 0) {
                r.udp = 0;
                add_item(&s.network.denied_resolved_addresses, pat,
                         "network.deniedResolvedAddresses");
                deny[ndeny].ok = 1;
                deny[ndeny].r = r;
                memcpy(deny[ndeny].name, name, sizeof(name));
                ndeny++;
            }
        } else if (policy_rule_parse(pat, 0, &r, name, &why) == 0) {
            add_item(&s.network.allowed_domains, pat, "network.allowedDomains");
        }
        free(line);
    }

    memset(&err, 0, sizeof(err));
    rc = policy_compile(&s, &pol, &err);
    if (rc != 0) {
        fprintf(stderr, "compile of patterns that each parse failed: %s\n", err.msg);
        abort();
    }
    FUZZ_CHECK(policy_rule_count(pol) ==
               s.network.allowed_domains.n + s.network.denied_domains.n +
                   s.network.denied_resolved_addresses.n);
    for (size_t i = 0; i < ntargets; i++) {
        check_decision(pol, &targets[i], tports[i], deny, ndeny, s.network.allow_all_domains);
        check_verdict(pol, &targets[i], tports[i], NULL, 0);
        check_verdict(pol, &targets[i], tports[i], addrs, naddrs);
        check_udp(pol, &targets[i], tports[i], deny, ndeny, addrs, naddrs);
        if (naddrs > 0) {
            size_t ok = policy_guard(pol, &targets[i], tports[i], addrs, naddrs, gv), count = 0;
            FUZZ_CHECK(ok <= naddrs);
            for (size_t k = 0; k < naddrs; k++) {
                FUZZ_CHECK(gv[k].addr.family == addrs[k].family &&
                           memcmp(gv[k].addr.bytes, addrs[k].bytes, addrs[k].family == 4 ? 4 : 16) == 0);
                FUZZ_CHECK(memchr(gv[k].why, '\0', sizeof(gv[k].why)) != NULL);
                FUZZ_CHECK(policy_class_name(gv[k].cls) != NULL);
                count += gv[k].allowed != 0;
            }
            FUZZ_CHECK(count == ok);
        }
    }
    policy_free(pol);
    settings_free(&s);
    return 0;
}
