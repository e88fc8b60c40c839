/* policy/cred.c - "credentials" (issue 24) as the policy carries it: for
 * each masked entry, the hosts its real value may be sent to (injectHosts,
 * patterns as in allowedDomains; default: the hosts allowedDomains allows),
 * and the load-time refusals srt makes that need the other keys: mask
 * without network.tlsTerminate (unless allowPlaintextInject), an
 * injectHosts pattern allowedDomains does not cover, one wholly inside
 * tlsTerminate.excludeDomains. The secrets themselves are never here: the
 * policy knows credentials by name only (run/creds.c holds the values).
 */
#include "policy/policy-int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct policy_cred_host {
    struct policy_rule r;
    char name[POLICY_HOST_MAX + 1];
    char pattern[POLICY_HOST_MAX + 16];
};

struct policy_cred {
    char *name; /* variable name, or the path of a files entry */
    int file;
    struct policy_cred_host *hosts; /* NULL (nhosts 0): allowedDomains' hosts */
    size_t nhosts;
    char *require; /* require: the header that must carry the placeholder, or NULL */
};

static int fail(struct settings_error *err, const struct settings_item *it, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(struct settings_error *err, const struct settings_item *it, const char *fmt, ...)
{
    va_list ap;
    int w;

    if (err == NULL)
        return -EINVAL;
    w = snprintf(err->msg, sizeof(err->msg), "%s:%u:%u: %s[%zu]: ", it->file, it->line, it->col,
                 it->list != NULL ? it->list : "credentials", it->index);
    if (w < 0 || (size_t)w >= sizeof(err->msg))
        return -EINVAL;
    va_start(ap, fmt);
    vsnprintf(err->msg + w, sizeof(err->msg) - (size_t)w, fmt, ap);
    va_end(ap);
    return -EINVAL;
}

/* A host that only the pattern (or a wider one) matches: the name itself,
 * or a label no one would write below a wildcard's domain. */
static int probe_host(const struct policy_cred_host *c, struct policy_host *h)
{
    char buf[POLICY_HOST_MAX + 32];
    const char *why;

    if (c->r.kind == POLICY_RULE_CIDR) {
        char a[64];
        if (policy_addr_str(&c->r.addr, a, sizeof(a)) == NULL)
            return -EINVAL;
        return policy_host_normalize(a, strlen(a), h, &why);
    }
    if (c->r.kind == POLICY_RULE_WILDCARD)
        snprintf(buf, sizeof(buf), "sluice-probe.%s", c->name);
    else
        snprintf(buf, sizeof(buf), "%s", c->name);
    return policy_host_normalize(buf, strlen(buf), h, &why);
}

static int check_host(const struct policy *p, const struct settings *s,
                      const struct settings_item *it, const struct policy_cred_host *c,
                      const char *what, struct settings_error *err)
{
    struct policy_host h;
    struct policy_decision d;
    uint16_t port = c->r.port != 0 ? c->r.port : 443;

    if (probe_host(c, &h) < 0)
        return fail(err, it, "%s '%s': not a host sluice can judge", what, c->pattern);
    policy_decide(p, &h, port, &d);
    if (d.verdict != POLICY_ALLOW)
        return fail(err, it,
                    "%s '%s' is not covered by network.allowedDomains: the real value "
                    "could never be sent there; add it to allowedDomains or remove it",
                    what, c->pattern);
    if (s->network.tls_terminate.given.set && policy_tls_excluded(p, &h, port))
        return fail(err, it,
                    "%s '%s' is wholly inside network.tlsTerminate.excludeDomains: "
                    "sluice cannot read its requests to put the value in",
                    what, c->pattern);
    return 0;
}

/* The hosts lines of a header entry (or of a masked one) into pc, each
 * judged by check_host. */
static int compile_hosts(struct policy *p, const struct settings *s, const struct settings_item *it,
                         struct policy_cred *pc, const char *rest0, const char *what,
                         struct settings_error *err)
{
    const char *rest = rest0, *hs;
    size_t hl, n = 0;

    while (settings_credential_next(&rest, 'h', &hs, &hl))
        n++;
    if (n == 0)
        return 0;
    pc->hosts = calloc(n, sizeof(*pc->hosts));
    if (pc->hosts == NULL)
        return -ENOMEM;
    rest = rest0;
    while (settings_credential_next(&rest, 'h', &hs, &hl)) {
        struct policy_cred_host *c = &pc->hosts[pc->nhosts];
        const char *why = NULL;
        int rc;
        snprintf(c->pattern, sizeof(c->pattern), "%.*s", (int)hl, hs);
        if (hl >= sizeof(c->pattern) ||
            policy_pattern_parse(c->pattern, 0, &c->r, c->name, &why) < 0)
            return fail(err, it, "%s '%s': %s", what, c->pattern,
                        why != NULL ? why : "invalid pattern");
        pc->nhosts++;
        rc = check_host(p, s, it, c, what, err);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int compile_one(struct policy *p, const struct settings *s, const struct settings_item *it,
                       struct policy_cred *pc, struct settings_error *err)
{
    struct settings_credential cr;
    const char *rest, *hs;
    size_t hl;

    if (settings_credential_split(it->value, &cr) < 0)
        return fail(err, it, "internal: unreadable entry");
    pc->file = cr.file;
    pc->name = strndup(cr.name, cr.name_len);
    if (pc->name == NULL)
        return -ENOMEM;
    rest = cr.rest;
    if (settings_credential_next(&rest, 'r', &hs, &hl) && (pc->require = strndup(hs, hl)) == NULL)
        return -ENOMEM;
    return compile_hosts(p, s, it, pc, cr.rest, "injectHosts", err);
}

/* credentials.headers (sluice proxy's gateway form): entry i is named
 * "headers[i]:NAME" (POLICY_CRED_HEADER), its hosts explicit. */
static int compile_headers(struct policy *p, const struct settings *s, struct settings_error *err)
{
    const struct settings_list *l = &s->credentials.headers;

    for (size_t i = 0; i < l->n; i++) {
        const struct settings_item *it = &l->items[i];
        struct policy_cred *pc = &p->cred[p->ncred];
        struct settings_header h;
        char label[100];
        int rc;
        if (settings_header_split(it->value, &h) < 0)
            return fail(err, it, "internal: unreadable entry");
        if (!s->network.tls_terminate.given.set && !s->credentials.plaintext.on)
            return fail(err, it,
                        "a header is injected inside terminated HTTPS: it needs "
                        "network.tlsTerminate, or credentials.allowPlaintextInject for plain "
                        "HTTP only");
        snprintf(label, sizeof(label), "headers[%zu]:%.*s", i, (int)h.name_len, h.name);
        pc->file = POLICY_CRED_HEADER;
        pc->name = strdup(label);
        if (pc->name == NULL)
            return -ENOMEM;
        p->ncred++;
        rc = compile_hosts(p, s, it, pc, h.rest, "hosts", err);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int policy__cred_compile(struct policy *p, const struct settings *s, struct settings_error *err)
{
    const struct settings_list *lists[3] = {&s->credentials.env_vars, &s->credentials.files,
                                            &s->credentials.aws_pairs};
    size_t n = s->credentials.headers.n;

    for (size_t l = 0; l < 3; l++)
        for (size_t i = 0; i < lists[l]->n; i++) {
            struct settings_credential cr;
            if (settings_credential_split(lists[l]->items[i].value, &cr) == 0 && cr.mask)
                n++;
        }
    if (n == 0)
        return 0;
    p->cred = calloc(n, sizeof(*p->cred));
    if (p->cred == NULL)
        return -ENOMEM;
    for (size_t l = 0; l < 3; l++)
        for (size_t i = 0; i < lists[l]->n; i++) {
            const struct settings_item *it = &lists[l]->items[i];
            struct settings_credential cr;
            int rc;
            if (settings_credential_split(it->value, &cr) < 0 || !cr.mask)
                continue;
            for (size_t k = 0; k < p->ncred; k++)
                if (p->cred[k].file == cr.file && strlen(p->cred[k].name) == cr.name_len &&
                    memcmp(p->cred[k].name, cr.name, cr.name_len) == 0)
                    return fail(err, it, "'%.*s' is masked by another entry already (envVars "
                                "and awsPairs may not name one variable twice)",
                                (int)cr.name_len, cr.name);
            if (!s->network.tls_terminate.given.set && !s->credentials.plaintext.on)
                return fail(err, it,
                            "mode \"mask\" needs network.tlsTerminate (the placeholder is "
                            "swapped inside terminated HTTPS), or credentials.allowPlaintextInject "
                            "for plain HTTP only");
            rc = compile_one(p, s, it, &p->cred[p->ncred++], err);
            if (rc < 0)
                return rc;
        }
    return compile_headers(p, s, err);
}

void policy__cred_free(struct policy *p)
{
    for (size_t i = 0; i < p->ncred; i++) {
        free(p->cred[i].name);
        free(p->cred[i].hosts);
        free(p->cred[i].require);
    }
    free(p->cred);
    p->cred = NULL;
    p->ncred = 0;
}

size_t policy_cred_count(const struct policy *p)
{
    return p != NULL ? p->ncred : 0;
}

const char *policy_cred_name(const struct policy *p, size_t i, int *file)
{
    if (p == NULL || i >= p->ncred)
        return NULL;
    if (file != NULL)
        *file = p->cred[i].file;
    return p->cred[i].name;
}

const char *policy_cred_require(const struct policy *p, size_t i)
{
    return p != NULL && i < p->ncred ? p->cred[i].require : NULL;
}

int policy_cred_find(const struct policy *p, int file, const char *name)
{
    for (size_t i = 0; p != NULL && i < p->ncred; i++)
        if (p->cred[i].file == file && strcmp(p->cred[i].name, name) == 0)
            return (int)i;
    return -1;
}

int policy_cred_injects(const struct policy *p, size_t i, const struct policy_host *h,
                        uint16_t port)
{
    const struct policy_cred *c;
    struct policy_decision d;

    if (p == NULL || i >= p->ncred)
        return 0;
    c = &p->cred[i];
    if (c->nhosts == 0) {
        policy_decide(p, h, port, &d);
        return d.verdict == POLICY_ALLOW;
    }
    for (size_t k = 0; k < c->nhosts; k++)
        if (policy__rule_host_match(&c->hosts[k].r, c->hosts[k].name, strlen(c->hosts[k].name), h,
                                    port))
            return 1;
    return 0;
}

int policy_cred_header_host(const struct policy *p, const struct policy_host *h, uint16_t port)
{
    for (size_t i = 0; p != NULL && i < p->ncred; i++)
        if (p->cred[i].file == POLICY_CRED_HEADER && policy_cred_injects(p, i, h, port))
            return 1;
    return 0;
}

int policy_cred_host(const struct policy *p, const struct policy_host *h, uint16_t port)
{
    for (size_t i = 0; p != NULL && i < p->ncred; i++)
        if (policy_cred_injects(p, i, h, port))
            return 1;
    return 0;
}
