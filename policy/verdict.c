/* policy/verdict.c - the one verdict: rule decision + resolved-address guard.
 *
 * Owns the composition of a decision. policy_decide (match.c) says what the
 * rules say about a host:port (including an IP literal in a denied class,
 * allowAllDomains, strictAllowlist and "ask"); policy_guard (guard.c) says
 * which resolved answers may be dialed (denied classes, IP rules, the
 * proxy's own listeners, localhost only to loopback). This file folds the two
 * into one judgment with the rule, its source, the guard class and a reason,
 * so that egress, HTTP upstream reuse and `sluice check` cannot disagree.
 */
#include "policy/policy.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *policy_rule_format(const struct policy_rule *r, char *buf, size_t len)
{
    if (strstr(r->list, "Files") != NULL) /* a list file: its line is the source */
        snprintf(buf, len, "'%s' %s", r->pattern, r->list);
    else
        snprintf(buf, len, "'%s' %s[%zu]", r->pattern, r->list, r->index);
    return buf;
}

/* A reason is a one-line summary, cut at its size (a long host name may not
 * fit; gcc's -Wformat-truncation would say so, and here it is meant). */
static void set_reason(struct policy_judgment *j, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void set_reason(struct policy_judgment *j, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(j->reason, sizeof(j->reason), fmt, ap);
    va_end(ap);
}

static void set_rule(struct policy_judgment *j, const struct policy_rule *r)
{
    j->rule = r;
    j->rule_text[0] = '\0';
    j->source[0] = '\0';
    if (r == NULL)
        return;
    policy_rule_source(r, j->source, sizeof(j->source));
    policy_rule_format(r, j->rule_text, sizeof(j->rule_text));
}

void policy_verdict(const struct policy *p, const struct policy_host *h, uint16_t port,
                    const struct policy_addr *addrs, size_t n, struct policy_guard_verdict *gv,
                    struct policy_judgment *j)
{
    struct policy_decision d;
    size_t i;

    policy_decide(p, h, port, &d);
    j->verdict = d.verdict;
    j->origin = d.origin;
    j->guarded = 0;
    j->cls = POLICY_CLASS_PUBLIC;
    j->naddrs = 0;
    j->nallowed = 0;
    set_rule(j, d.rule);
    /* d.reason is one NUL-terminated line and shorter than j->reason */
    _Static_assert(sizeof(d.reason) <= sizeof(j->reason), "reason sizes");
    memcpy(j->reason, d.reason, strnlen(d.reason, sizeof(d.reason) - 1) + 1);

    if (h->kind != POLICY_HOST_NAME) { /* an IP literal is its own answer */
        addrs = &h->addr;
        n = 1;
    } else if (addrs == NULL) {
        return; /* not resolved (yet): the rule decision is the verdict */
    }
    j->guarded = 1;
    j->naddrs = n;
    j->nallowed = policy_guard(p, h, port, addrs, n, gv);
    if (n == 0) {
        j->cls = POLICY_CLASS_PUBLIC;
    } else {
        j->cls = gv[0].cls;
        for (i = 0; i < n; i++) {
            if (gv[i].allowed) {
                j->cls = gv[i].cls;
                break;
            }
        }
    }
    if (j->verdict == POLICY_DENY || j->nallowed > 0)
        return;

    /* allowed or to be asked, but nothing may be dialed */
    j->verdict = POLICY_DENY;
    j->origin = POLICY_BY_GUARD;
    if (n == 0) {
        set_reason(j, "'%s' has no address to connect to", h->name);
        return;
    }
    if (gv[0].rule != NULL) /* the IP rule that refused the first answer */
        set_rule(j, gv[0].rule);
    if (h->kind == POLICY_HOST_NAME)
        set_reason(j, "every resolved address is refused: %s", gv[0].why);
    else
        set_reason(j, "%s", gv[0].why);
}

int policy_report_only(const struct policy *p, const struct policy_judgment *j)
{
    if (!policy_mode_report(p) || j->verdict == POLICY_ALLOW)
        return 0;
    switch (j->origin) {
    case POLICY_BY_RULE:
        return j->rule != NULL && j->rule->kind != POLICY_RULE_CIDR && !j->rule->managed;
    case POLICY_BY_STRICT:
    case POLICY_BY_NO_RULE:
        return 1;
    case POLICY_BY_CLASS:
    case POLICY_BY_ALLOW_ALL:
    case POLICY_BY_GUARD:
        break;
    }
    return 0;
}

int policy_report_may_dial(const struct policy_guard_verdict *g)
{
    /* the guard passes loopback for localhost names because a rule allowed
     * the name; an explicit IP rule (g->rule) is a rule of its own */
    return g->allowed && !(g->cls == POLICY_CLASS_LOOPBACK && g->rule == NULL);
}
