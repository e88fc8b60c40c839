/* policy/hint.c - the hint a denial carries (issue 26): in one short line,
 * what a user would change in the settings to allow the destination. It
 * names settings only, never a way around the proxy (an agent told "use
 * --noproxy" retries without it). The 403 body, the connection log's hint
 * key and the end-of-run summary all print this one line. Pure. */
#include "policy/policy.h"
#include "policy/policy-int.h"

#include <stdio.h>
#include <string.h>

/* The rule prefix of a transport: "udp:" opens UDP (policy/udp.c). */
static const char *proto(const struct policy_judgment *j)
{
    return j->transport == POLICY_UDP ? "udp:" : "";
}

/* "host:port", "[v6]:port", or the host alone for port 0 (a name), with
 * the judgment's transport prefix */
static const char *dest(const struct policy_judgment *j, const struct policy_host *h,
                        uint16_t port, char *buf, size_t len)
{
    int v6 = h->kind == POLICY_HOST_IPV6;

    if (port == 0)
        snprintf(buf, len, "%s%s", proto(j), h->name);
    else
        snprintf(buf, len, "%s%s%s%s:%u", proto(j), v6 ? "[" : "", h->name, v6 ? "]" : "",
                 (unsigned)port);
    return buf;
}

static const char *addr_dest(const struct policy_judgment *j, const struct policy_addr *a,
                             uint16_t port, char *buf, size_t len)
{
    char ip[64];

    policy_addr_str(a, ip, sizeof(ip));
    if (a->family == 6)
        snprintf(buf, len, "%s[%s]:%u", proto(j), ip, (unsigned)port);
    else
        snprintf(buf, len, "%s%s:%u", proto(j), ip, (unsigned)port);
    return buf;
}

/* A request rules denial without a deny rule: the allow rule to add, with
 * the path as the rules see it (normalised; the query left out). */
static void request_hint(const struct policy_host *h, const struct policy_request *rq, char *buf,
                         size_t len)
{
    char path[256], method[32];
    size_t plen = 0;
    const char *why;

    if (rq == NULL) {
        snprintf(buf, len,
                 "'%s' has network.requestRules, which judge plain-HTTP requests only; its "
                 "tunnels are refused",
                 h->name);
        return;
    }
    if (rq->target_len >= sizeof(path) ||
        policy_path_normalize(rq->target, rq->target_len, path, sizeof(path), &plen, &why) < 0) {
        snprintf(buf, len, "to allow it, add a network.requestRules allow rule for '%s'", h->name);
        return;
    }
    snprintf(method, sizeof(method), "%.*s", (int)(rq->method_len < 31 ? rq->method_len : 31),
             rq->method);
    snprintf(buf, len,
             "to allow it, add {\"host\": \"%s\", \"method\": \"%s\", \"path\": \"%.*s\", "
             "\"action\": \"allow\"} to network.requestRules",
             h->name, method, (int)plen, path);
}

const char *policy_deny_hint(const struct policy *p, const struct policy_host *h, uint16_t port,
                             const struct policy_request *rq, const struct policy_judgment *j,
                             const struct policy_addr *refused, char *buf, size_t len)
{
    const struct policy_rule *r = j->rule;
    char d[POLICY_HOST_MAX + 16];
    const char *msg = policy_deny_message(p);

    if (len == 0)
        return buf;
    if (msg != NULL) { /* network.denyMessage replaces the text */
        snprintf(buf, len, "%s", msg);
        return buf;
    }
    if (r != NULL && r->list_id != POLICY_LIST_ALLOWED) { /* a deny rule decided */
        if (r->managed)
            snprintf(buf, len,
                     "'%s' is in the managed settings (%s): only their administrator can "
                     "change it",
                     r->pattern, j->source);
        else
            snprintf(buf, len,
                     "deny rules win over allow rules: to allow it, remove or narrow "
                     "'%s' (%s)",
                     r->pattern, j->source);
        return buf;
    }
    switch (j->origin) {
    case POLICY_BY_REQUEST:
        request_hint(h, rq, buf, len);
        return buf;
    case POLICY_BY_CLASS: /* an IP literal in a denied class */
        snprintf(buf, len, "to allow this address, add '%s' to network.allowedDomains",
                 dest(j, h, port, d, sizeof(d)));
        return buf;
    case POLICY_BY_GUARD:
        if (j->cls == POLICY_CLASS_PROXY) {
            snprintf(buf, len, "sluice never connects to its own listeners");
            return buf;
        }
        if (h->kind != POLICY_HOST_NAME) {
            snprintf(buf, len, "to allow this address, add '%s' to network.allowedDomains",
                     dest(j, h, port, d, sizeof(d)));
            return buf;
        }
        if (refused != NULL && port != 0) {
            snprintf(buf, len,
                     "'%s' resolved to an address the guard refuses; to allow that address, add "
                     "'%s' to network.allowedDomains",
                     h->name, addr_dest(j, refused, port, d, sizeof(d)));
            return buf;
        }
        snprintf(buf, len, "'%s' has no address sluice may connect to", h->name);
        return buf;
    case POLICY_BY_RULE:
    case POLICY_BY_STRICT:
    case POLICY_BY_NO_RULE:
    case POLICY_BY_ALLOW_ALL:
        break;
    }
    snprintf(buf, len, "to allow it, add '%s' to network.allowedDomains",
             dest(j, h, port, d, sizeof(d)));
    return buf;
}
