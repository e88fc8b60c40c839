/* proxy/checkconf.c - the config test: `sluice check --settings FILE` with
 * no target, like `nginx -t` or `squid -k parse`.
 *
 * Given the settings loaded the way `sluice proxy` loads them (user file,
 * FILE, managed file; the list files FILE names), compiles the policy and
 * prints one line: the
 * rules by kind, the mode, what happens to a destination no rule decides,
 * the address guard's private-range setting and the listeners a proxy
 * started on these settings opens by default. Exit 0 when it loads, 2 when
 * it does not (the located error is printed).
 */
#include "proxy/check.h"

#include <errno.h>

#include "proxy/gw.h"

#include "policy/policy.h"

#include <stdio.h>
#include <string.h>

struct rule_counts {
    size_t names, wildcards, any, addrs, bad;
    size_t udp; /* of those, udp: rules (UDP only) */
};

static void count_rules(const struct settings_list *l, int in_denied, struct rule_counts *c)
{
    for (size_t i = 0; i < l->n; i++) {
        struct policy_rule r;
        char name[POLICY_HOST_MAX + 1];
        const char *why;

        memset(&r, 0, sizeof(r));
        if (policy_rule_parse(l->items[i].value, in_denied, &r, name, &why) < 0) {
            c->bad++;
            continue;
        }
        c->udp += r.udp != 0;
        switch (r.kind) {
        case POLICY_RULE_NAME:
            c->names++;
            break;
        case POLICY_RULE_WILDCARD:
            c->wildcards++;
            break;
        case POLICY_RULE_ANY:
            c->any++;
            break;
        case POLICY_RULE_CIDR:
            c->addrs++;
            break;
        }
    }
}

static const char *unmatched(const struct settings *s)
{
    if (s->network.allow_all_domains)
        return "allowed (allowAllDomains)";
    if (s->network.strict_allowlist)
        return "denied (strictAllowlist)";
    return "denied, or asked with --ask";
}

static const char *private_addrs(const struct settings *s)
{
    switch (s->network.deny_private_addresses) {
    case SETTINGS_TRUE:
        return "denied";
    case SETTINGS_FALSE:
        return "allowed";
    case SETTINGS_UNSET:
        break;
    }
    return "denied by proxy, allowed by run";
}

int check_config(const struct settings *sp, const char *path)
{
    struct settings_error err;
    struct policy *p = NULL;
    struct rule_counts allow = {0}, deny = {0};
    char http[64], socks[64], audp[32] = "", dudp[32] = "";

    struct proxy_gw *gw = NULL;
    int rc;

    if (policy_compile(sp, &p, &err) < 0) {
        fprintf(stderr, "%s\n", err.msg);
        return 2;
    }
    /* credentials.headers: from a file nobody else could have written, and
     * their files and variables must read as values (helpers are not run
     * by a config test) */
    if ((rc = proxy_gw_trusted(sp, &err)) != 0 ||
        (rc = proxy_gw_new(sp, proxy_gw_now(), &gw, &err)) != 0) {
        fprintf(stderr, "%s\n", rc == -ENOMEM ? "sluice: out of memory" : err.msg);
        policy_free(p);
        return 2;
    }
    proxy_gw_unref(gw);
    count_rules(&sp->network.allowed_domains, 0, &allow);
    count_rules(&sp->network.denied_domains, 1, &deny);
    if (allow.udp > 0)
        snprintf(audp, sizeof(audp), "; %zu udp", allow.udp);
    if (deny.udp > 0)
        snprintf(dudp, sizeof(dudp), "; %zu udp", deny.udp);
    if (sp->network.http_proxy_port != 0)
        snprintf(http, sizeof(http), "external 127.0.0.1:%u", sp->network.http_proxy_port);
    else
        snprintf(http, sizeof(http), "tcp:127.0.0.1:3128");
    if (sp->network.socks_proxy_port != 0)
        snprintf(socks, sizeof(socks), "external 127.0.0.1:%u", sp->network.socks_proxy_port);
    else
        snprintf(socks, sizeof(socks), "tcp:127.0.0.1:1080");

    printf("%s: ok: %zu rules: allow %zu (%zu names, %zu wildcards, %zu addresses%s), deny %zu "
           "(%zu names, %zu wildcards, %zu addresses, %zu any%s), %zu resolved-address denials, "
           "%zu list files, %zu request rules; mode %s; unmatched %s; private addresses %s; "
           "listeners http %s, socks5 %s, admin off (defaults of sluice proxy); "
           "maxConnections %u\n",
           path, policy_rule_count(p), sp->network.allowed_domains.n, allow.names, allow.wildcards,
           allow.addrs, audp, sp->network.denied_domains.n, deny.names, deny.wildcards, deny.addrs,
           deny.any, dudp, sp->network.denied_resolved_addresses.n,
           sp->network.allowed_domains_files.n + sp->network.denied_domains_files.n,
           policy_request_rule_count(p), policy_mode_report(p) ? "report" : "enforce",
           unmatched(sp), private_addrs(sp), http, socks, sp->proxy.max_connections);
    policy_free(p);
    return fflush(stdout) == 0 ? 0 : 2;
}
