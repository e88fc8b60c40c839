/* policy/tls.c - network.tlsTerminate as the policy carries it: which
 * allowed hosts are terminated (excludeDomains, patterns as in
 * allowedDomains and checked the same way, with a located message), and
 * the numbers the proxy reads per request (maxTunnels, handshakeTimeoutMs,
 * scope), so a reload changes them for new tunnels. */
#include "policy/policy-int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct policy_tls_exclude {
    struct policy_rule r;
    char name[POLICY_HOST_MAX + 1];
};

int policy__tls_compile(struct policy *p, const struct settings *s, struct settings_error *err)
{
    const struct settings_list *l = &s->network.tls_terminate.exclude_domains;
    struct policy_tls_opts *t = &p->tls;

    t->on = s->network.tls_terminate.given.set;
    t->max_tunnels = s->network.tls_terminate.max_tunnels;
    t->handshake_ms = s->network.tls_terminate.handshake_timeout_ms;
    t->scope_needed = s->network.tls_terminate.scope == SETTINGS_TLS_SCOPE_NEEDED;
    if (l->n == 0)
        return 0;
    t->exclude = calloc(l->n, sizeof(*t->exclude));
    if (t->exclude == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < l->n; i++) {
        const struct settings_item *it = &l->items[i];
        struct policy_tls_exclude *e = &t->exclude[i];
        const char *why = NULL;

        if (policy_pattern_parse(it->value, 0, &e->r, e->name, &why) < 0) {
            if (err != NULL)
                snprintf(err->msg, sizeof(err->msg), "%s:%u:%u: %s[%zu]: '%s': %s", it->file,
                         it->line, it->col, it->list != NULL ? it->list : "?", it->index,
                         it->value, why != NULL ? why : "invalid pattern");
            return -EINVAL;
        }
        t->nexclude++;
    }
    return 0;
}

void policy__tls_free(struct policy *p)
{
    free(p->tls.exclude);
    p->tls.exclude = NULL;
    p->tls.nexclude = 0;
}

const struct policy_tls_opts *policy_tls_opts(const struct policy *p)
{
    return &p->tls;
}

static int cidr_has(const struct policy_rule *r, const struct policy_addr *a)
{
    unsigned nbytes = a->family == 4 ? 4 : 16, bits = r->prefix;

    if (r->addr.family != a->family)
        return 0;
    for (unsigned i = 0; i < nbytes && bits > 0; i++) {
        unsigned m = bits >= 8 ? 0xffu : (0xffu << (8 - bits)) & 0xffu;
        if (((unsigned)a->bytes[i] & m) != ((unsigned)r->addr.bytes[i] & m))
            return 0;
        bits = bits >= 8 ? bits - 8 : 0;
    }
    return 1;
}

static int name_has(const struct policy_tls_exclude *e, const struct policy_host *h)
{
    size_t nl = strlen(e->name);

    if (h->kind != POLICY_HOST_NAME)
        return 0;
    if (e->r.kind == POLICY_RULE_NAME)
        return strcmp(h->name, e->name) == 0;
    /* *.example.com: a name below example.com, as in allowedDomains */
    return h->len > nl + 1 && h->name[h->len - nl - 1] == '.' &&
           strcmp(h->name + h->len - nl, e->name) == 0;
}

int policy_tls_excluded(const struct policy *p, const struct policy_host *h, uint16_t port)
{
    for (size_t i = 0; i < p->tls.nexclude; i++) {
        const struct policy_tls_exclude *e = &p->tls.exclude[i];
        int hit;

        if (e->r.port != 0 && e->r.port != port)
            continue;
        if (e->r.kind == POLICY_RULE_CIDR)
            hit = h->kind != POLICY_HOST_NAME && cidr_has(&e->r, &h->addr);
        else
            hit = name_has(e, h);
        if (hit)
            return 1;
    }
    return 0;
}

/* Each reason a host needs termination; credentials (a later issue) add a
 * predicate here. */
int policy_tls_needed(const struct policy *p, const struct policy_host *h, uint16_t port)
{
    return policy_request_ruled(p, h, port);
}

int policy_tls_terminates(const struct policy *p, const struct policy_host *h, uint16_t port)
{
    if (!p->tls.on || policy_tls_excluded(p, h, port))
        return 0;
    return !p->tls.scope_needed || policy_tls_needed(p, h, port);
}
