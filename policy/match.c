/* policy/match.c - the compiled matcher and the deny-first decision.
 *
 * Exact names live in a hash table; wildcard rules in a second table keyed by
 * the name under the '*.', probed with each proper suffix of the request;
 * IP rules in per-prefix-length hash tables. A decision costs O(labels) hash
 * probes (plus one per distinct prefix length for IPs), independent of the
 * number of rules.
 */
#include "policy/policy.h"
#include "policy/policy-int.h"

#include "common/common.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- arena for strings and keys owned by the policy ---- */

struct pchunk {
    struct pchunk *next;
    size_t used, cap;
    uint8_t data[];
};

static void *arena_alloc(struct policy *p, size_t n)
{
    struct pchunk *c = p->arena;
    void *out;

    n = (n + 7) & ~(size_t)7;
    if (c == NULL || c->cap - c->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        c = malloc(sizeof(*c) + cap);
        if (c == NULL)
            return NULL;
        c->next = p->arena;
        c->used = 0;
        c->cap = cap;
        p->arena = c;
    }
    out = c->data + c->used;
    c->used += n;
    return out;
}

static const char *arena_strdup(struct policy *p, const char *s)
{
    size_t n;
    char *d;

    if (s == NULL)
        return NULL;
    n = strlen(s) + 1;
    d = arena_alloc(p, n);
    if (d != NULL)
        memcpy(d, s, n);
    return d;
}

/* ---- hash table ---- */

uint64_t policy__hash(const uint8_t *key, size_t len)
{
    /* FNV-1a, 64-bit, over the bytes from last to first: the hashes of every
     * suffix of a name then come out of one backward pass (see
     * suffix_hashes). Keys come from trusted settings and canonical hosts. */
    uint64_t h = 0xcbf29ce484222325u;
    size_t i;

    for (i = len; i > 0; i--) {
        h ^= key[i - 1];
        h *= 0x100000001b3u;
    }
    return h;
}

/* The lowest-index rule stored under key whose port matches, or
 * POLICY_NO_RULE. The common case (one rule, or an any-port head) is decided
 * from the slot alone, without touching the rule array. */
uint32_t policy__ptab_first(const struct policy *p, const struct ptab *t, const uint8_t *key,
                            size_t len, uint64_t h, uint16_t port)
{
    size_t mask, i;

    if (t->cap == 0)
        return POLICY_NO_RULE;
    mask = t->cap - 1;
    for (i = (size_t)h & mask;; i = (i + 1) & mask) {
        const struct ptab_slot *s = &t->slots[i];
        if (s->key == NULL)
            return POLICY_NO_RULE;
        if (s->hash == h && s->keylen == len && memcmp(s->key, key, len) == 0) {
            if (s->head_port == 0 || s->head_port == port)
                return s->head;
            if (s->single)
                return POLICY_NO_RULE;
            return policy__chain_first(p, p->chain[s->head], port);
        }
    }
}

static int ptab_grow(struct ptab *t)
{
    size_t ncap = t->cap ? t->cap * 2 : 16;
    struct ptab_slot *ns = calloc(ncap, sizeof(*ns));
    size_t i;

    if (ns == NULL)
        return -ENOMEM;
    for (i = 0; i < t->cap; i++) {
        struct ptab_slot *s = &t->slots[i];
        size_t j;
        if (s->key == NULL)
            continue;
        for (j = (size_t)s->hash & (ncap - 1); ns[j].key != NULL; j = (j + 1) & (ncap - 1))
            ;
        ns[j] = *s;
    }
    free(t->slots);
    t->slots = ns;
    t->cap = ncap;
    return 0;
}

/* Adds rule index idx under key, appending to the key's chain. */
int policy__ptab_add(struct policy *p, struct ptab *t, const uint8_t *key, size_t len, uint32_t idx)
{
    uint64_t h = policy__hash(key, len);
    size_t mask, i;
    uint8_t *k;

    if ((t->n + 1) * 4 > t->cap * 3 && ptab_grow(t) < 0)
        return -ENOMEM;
    mask = t->cap - 1;
    for (i = (size_t)h & mask; t->slots[i].key != NULL; i = (i + 1) & mask) {
        struct ptab_slot *s = &t->slots[i];
        if (s->hash == h && s->keylen == len && memcmp(s->key, key, len) == 0) {
            p->chain[s->tail] = idx;
            s->tail = idx;
            s->single = 0;
            return 0;
        }
    }
    k = arena_alloc(p, len ? len : 1);
    if (k == NULL)
        return -ENOMEM;
    memcpy(k, key, len);
    t->slots[i].key = k;
    t->slots[i].keylen = (uint32_t)len;
    t->slots[i].hash = h;
    t->slots[i].head = idx;
    t->slots[i].tail = idx;
    t->slots[i].head_port = p->rules[idx].port;
    t->slots[i].single = 1;
    t->n++;
    return 0;
}

void policy__ptab_free(struct ptab *t)
{
    free(t->slots);
    t->slots = NULL;
    t->cap = t->n = 0;
}

/* First rule in a chain (lowest index) whose port matches. */
uint32_t policy__chain_first(const struct policy *p, uint32_t head, uint16_t port)
{
    uint32_t i;

    for (i = head; i != POLICY_NO_RULE; i = p->chain[i]) {
        if (p->rules[i].port == 0 || p->rules[i].port == port)
            return i;
    }
    return POLICY_NO_RULE;
}

static uint32_t min_rule(uint32_t a, uint32_t b)
{
    return a < b ? a : b;
}

/* ---- CIDR tables ---- */

static void mask_addr(const struct policy_addr *a, unsigned prefix, uint8_t *out)
{
    unsigned nbytes = a->family == 4 ? 4 : 16;
    unsigned i;

    for (i = 0; i < nbytes; i++) {
        unsigned bit0 = i * 8;
        if (bit0 + 8 <= prefix)
            out[i] = a->bytes[i];
        else if (bit0 >= prefix)
            out[i] = 0;
        else
            out[i] = (uint8_t)(a->bytes[i] & (0xffu << (8 - (prefix - bit0))));
    }
}

int policy__cidr_add(struct policy *p, struct pcidr *c, const struct policy_rule *r, uint32_t idx)
{
    uint8_t key[16];
    size_t i;

    mask_addr(&r->addr, r->prefix, key);
    if (c->bylen[r->prefix].cap == 0) {
        /* keep lens sorted, longest first */
        for (i = c->nlens; i > 0 && c->lens[i - 1] < r->prefix; i--)
            c->lens[i] = c->lens[i - 1];
        c->lens[i] = (uint8_t)r->prefix;
        c->nlens++;
    }
    return policy__ptab_add(p, &c->bylen[r->prefix], key, r->addr.family == 4 ? 4 : 16, idx);
}

uint32_t policy__cidr_match(const struct policy *p, const struct pcidr *c,
                            const struct policy_addr *a, uint16_t port)
{
    uint32_t best = POLICY_NO_RULE;
    size_t klen = a->family == 4 ? 4 : 16;
    uint8_t key[16];
    size_t i;

    for (i = 0; i < c->nlens; i++) {
        unsigned len = c->lens[i];
        uint32_t head;
        mask_addr(a, len, key);
        head = policy__ptab_first(p, &c->bylen[len], key, klen, policy__hash(key, klen), port);
        best = min_rule(best, head);
    }
    return best;
}

void policy__cidr_free(struct pcidr *c)
{
    size_t i;

    for (i = 0; i < 129; i++)
        policy__ptab_free(&c->bylen[i]);
    c->nlens = 0;
}

/* ---- compile ---- */

static void set_error(struct settings_error *err, const struct settings_item *it,
                      const char *what)
{
    if (err == NULL)
        return;
    if (it->list != NULL && strstr(it->list, "Files") != NULL)
        snprintf(err->msg, sizeof(err->msg), "%s:%u:%u: %s: '%s': %s", it->file, it->line, it->col,
                 it->list, it->value, what);
    else
        snprintf(err->msg, sizeof(err->msg), "%s:%u:%u: %s[%zu]: '%s': %s", it->file, it->line,
                 it->col, it->list ? it->list : "?", it->index, it->value, what);
}

static const char *find_reason(const struct settings *s, const char *pattern)
{
    size_t i;

    for (i = 0; i < s->network.denied_domain_reasons.n; i++) {
        const struct settings_pair *pr = &s->network.denied_domain_reasons.pairs[i];
        if (strcmp(pr->key, pattern) == 0)
            return pr->value;
    }
    return NULL;
}

static int add_rule(struct policy *p, const struct settings *s, const struct settings_item *it,
                    enum policy_list_id list_id, struct settings_error *err)
{
    struct policy_rule r;
    char name[POLICY_HOST_MAX + 1];
    const char *why = NULL;
    uint32_t idx;
    int rc;

    memset(&r, 0, sizeof(r));
    if (list_id == POLICY_LIST_RESOLVED_DENIED) {
        /* addresses take no port here, so an IPv6 address or CIDR may be
         * written unbracketed, as the reference writes them (fc00::/7) */
        const char *v = it->value, *slash = strchr(v, '/'), *c1 = strchr(v, ':');
        char br[POLICY_HOST_MAX + 8];

        if (v[0] != '[' && c1 != NULL && strchr(c1 + 1, ':') != NULL &&
            strlen(v) < POLICY_HOST_MAX) {
            if (slash != NULL)
                snprintf(br, sizeof(br), "[%.*s]%s", (int)(slash - v), v, slash);
            else
                snprintf(br, sizeof(br), "[%s]", v);
            v = br;
        }
        rc = policy_pattern_parse(v, 0, &r, name, &why);
        if (rc == 0 && (r.kind != POLICY_RULE_CIDR || r.port != 0)) {
            why = "must be an IP address or CIDR without a port";
            rc = -EINVAL;
        }
    } else {
        rc = policy_rule_parse(it->value, list_id == POLICY_LIST_DENIED, &r, name, &why);
    }
    if (rc < 0) {
        set_error(err, it, why ? why : "invalid pattern");
        return -EINVAL;
    }
    if (p->nrules == p->caprules) {
        size_t ncap = p->caprules ? p->caprules * 2 : 64;
        struct policy_rule *nr = realloc(p->rules, ncap * sizeof(*nr));
        uint32_t *nc;
        if (nr == NULL)
            return -ENOMEM;
        p->rules = nr;
        nc = realloc(p->chain, ncap * sizeof(*nc));
        if (nc == NULL)
            return -ENOMEM;
        p->chain = nc;
        p->caprules = ncap;
    }
    if (p->nrules >= POLICY_NO_RULE - 1)
        return -ENOMEM;
    idx = (uint32_t)p->nrules;
    r.list_id = list_id;
    r.list = arena_strdup(p, it->list ? it->list : "?");
    r.index = it->index;
    r.pattern = arena_strdup(p, it->value);
    r.file = arena_strdup(p, it->file ? it->file : "?");
    r.line = it->line;
    r.col = it->col;
    r.reason = list_id == POLICY_LIST_DENIED ? arena_strdup(p, find_reason(s, it->value)) : NULL;
    r.managed = it->managed;
    if (r.list == NULL || r.pattern == NULL || r.file == NULL)
        return -ENOMEM;
    p->rules[idx] = r;
    p->chain[idx] = POLICY_NO_RULE;
    p->nrules++;

    if (r.udp)
        return policy__udp_add(p, &p->rules[idx], name, idx);
    switch (r.kind) {
    case POLICY_RULE_NAME:
        return policy__ptab_add(p, list_id == POLICY_LIST_DENIED ? &p->deny_exact : &p->allow_exact,
                        (const uint8_t *)name, strlen(name), idx);
    case POLICY_RULE_WILDCARD: {
        struct ptab *t = list_id == POLICY_LIST_DENIED ? &p->deny_wild : &p->allow_wild;
        size_t labels = 1, k;
        for (k = 0; name[k] != '\0'; k++)
            labels += name[k] == '.';
        t->label_mask |= UINT64_C(1) << (labels < 63 ? labels : 63);
        return policy__ptab_add(p, t, (const uint8_t *)name, strlen(name), idx);
    }
    case POLICY_RULE_ANY:
        if (p->deny_any == POLICY_NO_RULE)
            p->deny_any = idx;
        else
            p->chain[p->deny_any_tail] = idx;
        p->deny_any_tail = idx;
        return 0;
    case POLICY_RULE_CIDR: {
        struct pcidr *c = list_id == POLICY_LIST_DENIED  ? p->deny_cidr
                          : list_id == POLICY_LIST_ALLOWED ? p->allow_cidr
                                                           : p->rdeny_cidr;
        return policy__cidr_add(p, &c[r.addr.family == 4 ? 0 : 1], &r, idx);
    }
    }
    return -EINVAL;
}

const struct policy_http_opts *policy_http_opts(const struct policy *p)
{
    return &p->http;
}

static int http_opts(struct policy *p, const struct settings *s)
{
    const struct settings_list *l = &s->network.strip_response_headers;

    p->http.refuse_opaque_tunnels = s->network.refuse_opaque_tunnels;
    p->http.require_host_match = s->network.require_host_match;
    p->http.ambiguous = s->network.ambiguous_request_target;
    if (l->n == 0)
        return 0;
    p->http.strip = calloc(l->n, sizeof(*p->http.strip));
    if (p->http.strip == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < l->n; i++) {
        char *v = strdup(l->items[i].value);
        if (v == NULL)
            return -ENOMEM;
        for (char *q = v; *q != '\0'; q++)
            if (*q >= 'A' && *q <= 'Z')
                *q = (char)(*q - 'A' + 'a');
        p->http.strip[p->http.nstrip++] = v;
    }
    return 0;
}

const struct policy_parent *policy_parent(const struct policy *p)
{
    return p != NULL ? p->parent : NULL;
}

int policy_compile(const struct settings *s, struct policy **out, struct settings_error *err)
{
    struct policy *p = calloc(1, sizeof(*p));
    size_t i;
    int rc = 0;

    if (p == NULL)
        return -ENOMEM;
    p->refs = 1;
    p->deny_any = POLICY_NO_RULE;
    p->deny_any_tail = POLICY_NO_RULE;
    p->allow_all = s->network.allow_all_domains;
    p->strict = s->network.strict_allowlist;
    p->deny_private = s->network.deny_private_addresses == SETTINGS_TRUE;
    p->report = s->network.mode == SETTINGS_MODE_REPORT;
    if (s->network.deny_message != NULL &&
        (p->deny_message = strdup(s->network.deny_message)) == NULL)
        rc = -ENOMEM;

    for (i = 0; rc == 0 && i < s->network.denied_domains.n; i++)
        rc = add_rule(p, s, &s->network.denied_domains.items[i], POLICY_LIST_DENIED, err);
    for (i = 0; rc == 0 && i < s->network.allowed_domains.n; i++)
        rc = add_rule(p, s, &s->network.allowed_domains.items[i], POLICY_LIST_ALLOWED, err);
    for (i = 0; rc == 0 && i < s->network.denied_resolved_addresses.n; i++)
        rc = add_rule(p, s, &s->network.denied_resolved_addresses.items[i],
                      POLICY_LIST_RESOLVED_DENIED, err);
    if (rc == 0) {
        extern char **environ;
        rc = policy_parent_build(s, environ, &p->parent, err);
    }
    if (rc == 0)
        rc = http_opts(p, s);
    if (rc == 0)
        rc = policy__request_compile(p, s, err);
    if (rc == 0)
        rc = policy__tls_compile(p, s, err);
    if (rc == 0)
        rc = policy__cred_compile(p, s, err);
    if (rc < 0) {
        if (rc == -ENOMEM && err != NULL)
            snprintf(err->msg, sizeof(err->msg), "out of memory compiling the policy");
        policy_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

struct policy *policy_ref(struct policy *p)
{
    __atomic_add_fetch(&p->refs, 1, __ATOMIC_RELAXED);
    return p;
}

void policy_free(struct policy *p)
{
    int f;

    if (p == NULL || __atomic_sub_fetch(&p->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    policy_parent_free(p->parent);
    policy__request_free(p);
    policy__cred_free(p);
    free(p->deny_message);
    for (size_t k = 0; k < p->http.nstrip; k++)
        free(p->http.strip[k]);
    free(p->http.strip);
    policy__tls_free(p);
    policy__udp_free(p);
    policy__ptab_free(&p->deny_exact);
    policy__ptab_free(&p->deny_wild);
    policy__ptab_free(&p->allow_exact);
    policy__ptab_free(&p->allow_wild);
    for (f = 0; f < 2; f++) {
        policy__cidr_free(&p->deny_cidr[f]);
        policy__cidr_free(&p->allow_cidr[f]);
        policy__cidr_free(&p->rdeny_cidr[f]);
    }
    while (p->arena != NULL) {
        struct pchunk *c = p->arena;
        p->arena = c->next;
        free(c);
    }
    free(p->rules);
    free(p->chain);
    free(p->self);
    free(p->listeners);
    free(p->listener_ports);
    free(p);
}

int policy_mode_report(const struct policy *p)
{
    return p->report;
}

const char *policy_deny_message(const struct policy *p)
{
    return p->deny_message;
}

int policy_deny_private(const struct policy *p)
{
    return p->deny_private;
}

size_t policy_rule_count(const struct policy *p)
{
    return p->nrules;
}

const char *policy_rule_source(const struct policy_rule *r, char *buf, size_t len)
{
    if (len > 0) /* "FILE:LINE", without snprintf: twice per connection */
        common_cat_u(buf, len, common_cat(buf, len, common_cat(buf, len, 0, r->file), ":"),
                     r->line);
    return buf;
}

/* ---- decide ---- */

static void decide_domains(const struct policy *p, const struct policy_host *h, uint16_t port,
                           struct policy_decision *d);

/* The hashes of the whole name (slot 0) and of every proper suffix that
 * starts after a '.', with their offsets, in one backward pass. */
struct suffixes {
    size_t n;
    uint32_t off[POLICY_HOST_MAX / 2 + 2];
    uint64_t hash[POLICY_HOST_MAX / 2 + 2];
};

static void suffix_hashes(const struct policy_host *h, struct suffixes *sx)
{
    const uint8_t *name = (const uint8_t *)h->name;
    uint64_t hv = 0xcbf29ce484222325u;
    size_t i, n = 1;

    for (i = h->len; i > 0; i--) {
        if (name[i - 1] == '.') {
            sx->off[n] = (uint32_t)i;
            sx->hash[n] = hv;
            n++;
        }
        hv ^= name[i - 1];
        hv *= 0x100000001b3u;
    }
    sx->off[0] = 0;
    sx->hash[0] = hv;
    sx->n = n;
}

/* Lowest-index rule of a name table matching the host exactly or, for the
 * wildcard table, matching one of its proper suffixes. */
static uint32_t match_name(const struct policy *p, const struct ptab *exact,
                           const struct ptab *wild, const struct policy_host *h,
                           const struct suffixes *sx, uint16_t port)
{
    uint32_t best = POLICY_NO_RULE;
    const uint8_t *name = (const uint8_t *)h->name;
    size_t i;

    if (exact->n > 0)
        best = policy__ptab_first(p, exact, name, h->len, sx->hash[0], port);
    if (wild->n > 0) {
        /* suffix i has i labels; probe only label counts some key has */
        for (i = 1; i < sx->n; i++) {
            if (!(wild->label_mask & (UINT64_C(1) << (i < 63 ? i : 63))))
                continue;
            best = min_rule(best, policy__ptab_first(p, wild, name + sx->off[i],
                                                     h->len - sx->off[i], sx->hash[i], port));
        }
    }
    return best;
}

uint32_t policy__name_match(const struct policy *p, const struct ptab *exact,
                            const struct ptab *wild, const struct policy_host *h, uint16_t port)
{
    struct suffixes sx;

    if (exact->n == 0 && wild->n == 0)
        return POLICY_NO_RULE;
    suffix_hashes(h, &sx);
    return match_name(p, exact, wild, h, &sx, port);
}

/* Joins up to three strings into dst (truncating), without printf. */
static void join3(char *dst, size_t cap, const char *a, const char *b, const char *c)
{
    const char *parts[3] = {a, b, c};
    size_t used = 0;
    int k;

    for (k = 0; k < 3; k++) {
        size_t n;
        if (parts[k] == NULL)
            continue;
        n = strlen(parts[k]);
        if (n > cap - 1 - used)
            n = cap - 1 - used;
        memcpy(dst + used, parts[k], n);
        used += n;
    }
    dst[used] = '\0';
}

static void sanitize(char *s)
{
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20 || c >= 0x7f)
            *s = '?';
    }
}

void policy__decide_rule(const struct policy *p, uint32_t idx, enum policy_verdict v,
                         struct policy_decision *d)
{
    const struct policy_rule *r = &p->rules[idx];

    d->verdict = v;
    d->origin = POLICY_BY_RULE;
    d->rule = r;
    if (v == POLICY_DENY && r->reason != NULL) {
        join3(d->reason, sizeof(d->reason), r->reason, NULL, NULL);
        sanitize(d->reason);
    } else {
        join3(d->reason, sizeof(d->reason), v == POLICY_DENY ? "denied by rule '" : "allowed by rule '",
              r->pattern, "'");
        sanitize(d->reason);
    }
}

static void decide_unmatched(const struct policy *p, struct policy_decision *d)
{
    d->rule = NULL;
    if (p->allow_all) {
        d->verdict = POLICY_ALLOW;
        d->origin = POLICY_BY_ALLOW_ALL;
        join3(d->reason, sizeof(d->reason), "no rule matches; network.allowAllDomains is set", NULL,
              NULL);
    } else if (p->strict) {
        d->verdict = POLICY_DENY;
        d->origin = POLICY_BY_STRICT;
        join3(d->reason, sizeof(d->reason),
              "no rule allows this host and network.strictAllowlist is set", NULL, NULL);
    } else {
        d->verdict = POLICY_ASK;
        d->origin = POLICY_BY_NO_RULE;
        join3(d->reason, sizeof(d->reason),
              "no rule matches; asks the handler (denied when none is configured)", NULL, NULL);
    }
}

void policy_count_matches(struct policy *p, unsigned long *counter)
{
    p->match_count = counter;
}

/* One rule's host pattern against a request host and port: the semantics
 * of the tables above for a single rule (request rules, policy/request.c). */
int policy__rule_host_match(const struct policy_rule *r, const char *name, size_t nlen,
                            const struct policy_host *h, uint16_t port)
{
    uint8_t a[16], b[16];

    if (r->port != 0 && r->port != port)
        return 0;
    switch (r->kind) {
    case POLICY_RULE_NAME:
        return h->kind == POLICY_HOST_NAME && h->len == nlen && memcmp(h->name, name, nlen) == 0;
    case POLICY_RULE_WILDCARD: /* a proper subdomain: ".name" ends the host */
        return h->kind == POLICY_HOST_NAME && h->len > nlen + 1 &&
               h->name[h->len - nlen - 1] == '.' &&
               memcmp(h->name + h->len - nlen, name, nlen) == 0;
    case POLICY_RULE_ANY:
        return 1;
    case POLICY_RULE_CIDR:
        if (h->kind == POLICY_HOST_NAME || h->addr.family != r->addr.family)
            return 0;
        mask_addr(&h->addr, r->prefix, a);
        mask_addr(&r->addr, r->prefix, b);
        return memcmp(a, b, r->addr.family == 4 ? 4 : 16) == 0;
    }
    return 0;
}

void policy_decide(const struct policy *p, const struct policy_host *h, uint16_t port,
                   struct policy_decision *d)
{
    policy_decide_request(p, h, port, NULL, d);
}

void policy_decide_request(const struct policy *p, const struct policy_host *h, uint16_t port,
                           const struct policy_request *rq, struct policy_decision *d)
{
    decide_domains(p, h, port, d);
    policy__request_narrow(p, h, port, rq, d);
}

int policy__decide_class(const struct policy *p, const struct policy_host *h, uint16_t port,
                         struct policy_decision *d)
{
    enum policy_addr_class cls = policy__local_class(p, &h->addr, port);
    char ip[64];

    if (!policy__addr_denied_class(cls, p->deny_private))
        return 0;
    d->verdict = POLICY_DENY;
    d->origin = POLICY_BY_CLASS;
    d->rule = NULL;
    snprintf(d->reason, sizeof(d->reason), "%s is %s %s address and no rule allows it",
             policy_addr_str(&h->addr, ip, sizeof(ip)), policy__article(cls),
             policy_class_name(cls));
    return 1;
}

/* The domain lists' decision (deny, allow, IP literals, the unmatched). */
static void decide_domains(const struct policy *p, const struct policy_host *h, uint16_t port,
                           struct policy_decision *d)
{
    uint32_t deny, allow;

    if (p->match_count != NULL)
        ++*p->match_count;
    d->transport = POLICY_TCP;
    deny = policy__chain_first(p, p->deny_any, port);
    if (h->kind == POLICY_HOST_NAME) {
        struct suffixes sx;
        suffix_hashes(h, &sx);
        deny = min_rule(deny, match_name(p, &p->deny_exact, &p->deny_wild, h, &sx, port));
        if (deny != POLICY_NO_RULE) {
            policy__decide_rule(p, deny, POLICY_DENY, d);
            return;
        }
        allow = match_name(p, &p->allow_exact, &p->allow_wild, h, &sx, port);
        if (allow != POLICY_NO_RULE) {
            policy__decide_rule(p, allow, POLICY_ALLOW, d);
            return;
        }
        decide_unmatched(p, d);
        return;
    }

    /* IP literal: judged by the IP rules only, then by its address class. */
    {
        int f = h->addr.family == 4 ? 0 : 1;

        deny = min_rule(deny, policy__ip_denied(p, &h->addr, port));
        if (deny != POLICY_NO_RULE) {
            policy__decide_rule(p, deny, POLICY_DENY, d);
            return;
        }
        allow = policy__cidr_match(p, &p->allow_cidr[f], &h->addr, port);
        if (allow != POLICY_NO_RULE) {
            policy__decide_rule(p, allow, POLICY_ALLOW, d);
            return;
        }
        if (policy__decide_class(p, h, port, d))
            return;
        decide_unmatched(p, d);
    }
}
