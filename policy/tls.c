/* policy/tls.c - network.tlsTerminate as the policy carries it: which
 * allowed hosts are terminated (excludeDomains, patterns as in
 * allowedDomains and checked the same way, with a located message), and
 * the numbers the proxy reads per request (maxTunnels, handshakeTimeoutMs,
 * scope), so a reload changes them for new tunnels. Also network.mitmProxy
 * (srt 0.0.83): which allowed hosts go to an external proxy on a Unix
 * socket (domains, the same patterns), refused beside tlsTerminate as srt
 * refuses it. */
#include "policy/policy-int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct policy_tls_exclude {
    struct policy_rule r;
    char name[POLICY_HOST_MAX + 1];
};

/* A list of patterns as in allowedDomains, each checked with a located
 * message. */
static int compile_list(const struct settings_list *l, struct policy_tls_exclude **out,
                        size_t *nout, struct settings_error *err)
{
    if (l->n == 0)
        return 0;
    *out = calloc(l->n, sizeof(**out));
    if (*out == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < l->n; i++) {
        const struct settings_item *it = &l->items[i];
        struct policy_tls_exclude *e = &(*out)[i];
        const char *why = NULL;

        if (policy_pattern_parse(it->value, 0, &e->r, e->name, &why) < 0) {
            if (err != NULL)
                snprintf(err->msg, sizeof(err->msg), "%s:%u:%u: %s[%zu]: '%s': %s", it->file,
                         it->line, it->col, it->list != NULL ? it->list : "?", it->index, it->value,
                         why != NULL ? why : "invalid pattern");
            return -EINVAL;
        }
        (*nout)++;
    }
    return 0;
}

static int mitm_compile(struct policy *p, const struct settings *s, struct settings_error *err)
{
    const __typeof__(s->network.mitm_proxy) *m = &s->network.mitm_proxy;
    struct policy_parent_proxy *pp = &p->tls.mitm_pp;

    if (!m->given.set || m->socket_path == NULL)
        return 0;
    if (s->network.tls_terminate.given.set) {
        if (err != NULL)
            snprintf(err->msg, sizeof(err->msg),
                     "%s:%u:%u: network.mitmProxy: cannot be combined with "
                     "network.tlsTerminate (%s:%u:%u), as in srt: hosts go either to the "
                     "external proxy or through sluice's own termination; remove one of them",
                     m->given.file, m->given.line, m->given.col,
                     s->network.tls_terminate.given.file, s->network.tls_terminate.given.line,
                     s->network.tls_terminate.given.col);
        return -EINVAL;
    }
    if (strlen(m->socket_path) >= sizeof(pp->unix_path))
        return -EINVAL; /* the loader refuses it with a message */
    memset(pp, 0, sizeof(*pp));
    pp->set = 1;
    snprintf(pp->unix_path, sizeof(pp->unix_path), "%s", m->socket_path);
    snprintf(pp->shown, sizeof(pp->shown), "unix:%.*s", (int)(sizeof(pp->shown) - 6),
             m->socket_path);
    return compile_list(&m->domains, &p->tls.mitm, &p->tls.nmitm, err);
}

int policy__tls_compile(struct policy *p, const struct settings *s, struct settings_error *err)
{
    struct policy_tls_opts *t = &p->tls;
    int rc;

    t->on = s->network.tls_terminate.given.set;
    t->max_tunnels = s->network.tls_terminate.max_tunnels;
    t->handshake_ms = s->network.tls_terminate.handshake_timeout_ms;
    t->scope_needed = s->network.tls_terminate.scope == SETTINGS_TLS_SCOPE_NEEDED;
    rc = compile_list(&s->network.tls_terminate.exclude_domains, &t->exclude, &t->nexclude, err);
    return rc < 0 ? rc : mitm_compile(p, s, err);
}

void policy__tls_free(struct policy *p)
{
    free(p->tls.exclude);
    p->tls.exclude = NULL;
    p->tls.nexclude = 0;
    free(p->tls.mitm);
    p->tls.mitm = NULL;
    p->tls.nmitm = 0;
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

static int list_has(const struct policy_tls_exclude *l, size_t n, const struct policy_host *h,
                    uint16_t port)
{
    for (size_t i = 0; i < n; i++) {
        const struct policy_tls_exclude *e = &l[i];
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

int policy_tls_excluded(const struct policy *p, const struct policy_host *h, uint16_t port)
{
    return list_has(p->tls.exclude, p->tls.nexclude, h, port);
}

const struct policy_parent_proxy *policy_mitm_pick(const struct policy *p,
                                                   const struct policy_host *h, uint16_t port)
{
    if (p == NULL || p->tls.nmitm == 0 || !list_has(p->tls.mitm, p->tls.nmitm, h, port))
        return NULL;
    return &p->tls.mitm_pp;
}

/* Credentials that need termination: the hosts a masked credential is
 * sent to (with tlsTerminate on; with allowPlaintextInject alone they go
 * in plain HTTP only, srt's meaning), and a credentials.headers entry's
 * hosts always (a gateway never lets a request to them pass without its
 * header, so a tunnel it cannot read is refused). */
static int cred_needs(const struct policy *p, const struct policy_host *h, uint16_t port)
{
    return p->tls.on ? policy_cred_host(p, h, port) : policy_cred_header_host(p, h, port);
}

/* Each reason a host needs termination: request rules, and credentials. */
int policy_tls_needed(const struct policy *p, const struct policy_host *h, uint16_t port)
{
    return policy_request_ruled(p, h, port) || cred_needs(p, h, port);
}

const char *policy_tls_needed_why(const struct policy *p, const struct policy_host *h,
                                  uint16_t port)
{
    int rules = policy_request_ruled(p, h, port), creds = cred_needs(p, h, port);
    int hdr = creds && policy_cred_header_host(p, h, port);

    if (hdr)
        return rules ? "request rules (network.requestRules) and credentials (a "
                       "credentials.headers entry's hosts)"
                     : "credentials (a credentials.headers entry's hosts)";
    return rules && creds ? "request rules (network.requestRules) and credentials (a masked "
                            "entry's injectHosts)"
           : creds        ? "credentials (a masked entry's injectHosts)"
                          : "request rules (network.requestRules)";
}

int policy_tls_terminates(const struct policy *p, const struct policy_host *h, uint16_t port)
{
    if (!p->tls.on || policy_tls_excluded(p, h, port))
        return 0;
    return !p->tls.scope_needed || policy_tls_needed(p, h, port);
}
