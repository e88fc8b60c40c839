/* policy/verdict.c - the one verdict: rule decision + resolved-address guard.
 *
 * Owns the composition of a decision. policy_decide (match.c) says what the
 * rules say about a host:port (including an IP literal in a denied class,
 * allowAllDomains, strictAllowlist and "ask"); policy_guard (guard.c) says
 * which resolved answers may be dialed (denied classes, IP rules, the
 * proxy's own listeners, localhost only to loopback). This file folds the two
 * into one judgment with the rule, its source, the guard class, a reason
 * and what report mode lets through, so that egress, HTTP upstream reuse,
 * transparent mode and `sluice check` cannot disagree. A caller that
 * resolves between the two keeps policy_decide's match and finishes it with
 * policy_verdict_finish: the rules are matched once per decision.
 */
#include "policy/policy.h"
#include "policy/policy-int.h"

#include "common/common.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *policy_rule_format(const struct policy_rule *r, char *buf, size_t len)
{
    size_t at;

    if (len == 0)
        return buf;
    /* "'PATTERN' LIST[INDEX]"; a list file's line is its source, so no
     * index ("'PATTERN' LIST"); request rules as the rest. Built with
     * common_cat: it runs twice per connection */
    at = common_cat(buf, len, 0, "'");
    at = common_cat(buf, len, at, r->pattern);
    at = common_cat(buf, len, at, "' ");
    at = common_cat(buf, len, at, r->list);
    if (r->list_id != POLICY_LIST_REQUEST && strstr(r->list, "Files") != NULL)
        return buf;
    at = common_cat(buf, len, at, "[");
    at = common_cat_u(buf, len, at, r->index);
    common_cat(buf, len, at, "]");
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

/* Report mode (network.mode "report"): 1 when the DENY (or ASK) of j is one
 * report mode only reports; see policy_judgment.report_only. */
static int report_only(const struct policy *p, const struct policy_judgment *j)
{
    if (!policy_mode_report(p) || j->verdict == POLICY_ALLOW)
        return 0;
    switch (j->origin) {
    case POLICY_BY_RULE:
        return j->rule != NULL && j->rule->kind != POLICY_RULE_CIDR && !j->rule->managed;
    case POLICY_BY_STRICT:
    case POLICY_BY_NO_RULE:
        return 1;
    case POLICY_BY_REQUEST: /* request rules; not the managed file's */
        return !policy__request_managed(p);
    case POLICY_BY_CLASS:
    case POLICY_BY_ALLOW_ALL:
    case POLICY_BY_GUARD:
        break;
    }
    return 0;
}

/* Whether an answer that passed the guard may be dialed for a request
 * report mode lets through: the guard passes loopback for localhost names
 * because a rule allowed the name; without that rule loopback stays refused
 * (an explicit IP rule, g->rule, is a rule of its own). */
static int report_may_dial(const struct policy_guard_verdict *g)
{
    return g->allowed && !(g->cls == POLICY_CLASS_LOOPBACK && g->rule == NULL);
}

/* The match as the verdict without answers. */
static void start_from_match(struct policy_judgment *j, const struct policy_decision *m)
{
    j->transport = m->transport;
    j->verdict = m->verdict;
    j->origin = m->origin;
    j->report_only = 0;
    j->guarded = 0;
    j->cls = POLICY_CLASS_PUBLIC;
    j->naddrs = 0;
    j->nallowed = 0;
    j->ndial = 0;
    set_rule(j, m->rule);
    /* m->reason is one NUL-terminated line and shorter than j->reason */
    _Static_assert(sizeof(m->reason) <= sizeof(j->reason), "reason sizes");
    memcpy(j->reason, m->reason, strnlen(m->reason, sizeof(m->reason) - 1) + 1);
}

/* The guard over n answers; j->cls from the first that passed. */
static void guard_answers(const struct policy *p, const struct policy_host *h, uint16_t port,
                          const struct policy_addr *addrs, size_t n,
                          struct policy_guard_verdict *gv, struct policy_judgment *j)
{
    size_t i;

    j->guarded = 1;
    j->naddrs = n;
    j->nallowed = policy_guard_transport(p, j->transport, h, port, addrs, n, gv);
    if (n == 0) {
        j->cls = POLICY_CLASS_PUBLIC;
        return;
    }
    j->cls = gv[0].cls;
    for (i = 0; i < n; i++) {
        if (gv[i].allowed) {
            j->cls = gv[i].cls;
            break;
        }
    }
}

/* An ALLOW or ASK of the rules with nothing to dial: the guard's DENY. */
static void refuse_by_guard(const struct policy_host *h, size_t n,
                            const struct policy_guard_verdict *gv, struct policy_judgment *j)
{
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

/* Which answers may be dialed: those the guard passes, and in a request
 * report mode lets through, not loopback reached only by being localhost. */
static void mark_dialable(struct policy_guard_verdict *gv, struct policy_judgment *j)
{
    size_t i;

    for (i = 0; i < j->naddrs; i++) {
        gv[i].dial = gv[i].allowed && (!j->report_only || report_may_dial(&gv[i]));
        j->ndial += gv[i].dial != 0;
    }
}

void policy_verdict_finish(const struct policy *p, const struct policy_host *h, uint16_t port,
                           const struct policy_decision *m, const struct policy_addr *addrs,
                           size_t n, struct policy_guard_verdict *gv, struct policy_judgment *j)
{
    start_from_match(j, m);
    if (h->kind != POLICY_HOST_NAME) { /* an IP literal is its own answer */
        addrs = &h->addr;
        n = 1;
    } else if (addrs == NULL) {
        /* not resolved (yet): the rule decision is the verdict */
        j->report_only = report_only(p, j);
        return;
    }
    guard_answers(p, h, port, addrs, n, gv, j);
    if (j->verdict != POLICY_DENY && j->nallowed == 0)
        refuse_by_guard(h, n, gv, j); /* allowed or to be asked, but nothing may be dialed */
    j->report_only = report_only(p, j);
    mark_dialable(gv, j);
}

void policy_verdict(const struct policy *p, const struct policy_host *h, uint16_t port,
                    const struct policy_addr *addrs, size_t n, struct policy_guard_verdict *gv,
                    struct policy_judgment *j)
{
    struct policy_decision m;

    policy_decide(p, h, port, &m);
    policy_verdict_finish(p, h, port, &m, addrs, n, gv, j);
}

void policy_verdict_request(const struct policy *p, const struct policy_host *h, uint16_t port,
                            const struct policy_request *rq, const struct policy_addr *addrs,
                            size_t n, struct policy_guard_verdict *gv, struct policy_judgment *j)
{
    struct policy_decision m;

    policy_decide_request(p, h, port, rq, &m);
    policy_verdict_finish(p, h, port, &m, addrs, n, gv, j);
}
