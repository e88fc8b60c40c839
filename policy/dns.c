/* policy/dns.c - the verdict on a name alone, for transparent mode's
 * resolver in the sandbox (run/transparent.c) and for `sluice check
 * --transparent` (proxy/check.c): one function, so the check says what the
 * resolver does. It asks policy_verdict (policy/verdict.c), the one place a
 * decision is composed, and only reads the judgment. */
#include "policy/policy.h"

int policy_dns_refused(const struct policy *p, const struct policy_host *h,
                       struct policy_judgment *d)
{
    /* the one verdict, for the name at no port and with no answers */
    policy_verdict(p, h, 0, NULL, 0, NULL, d);
    /* Deny rules win over allow rules, so a port-less deny rule denies the
     * name on every port: no answer can lead anywhere. Anything else
     * (allowed, no rule, a rule for some ports only) gets an answer and is
     * decided with its port at connect(). Report mode refuses only what
     * it does not lift: a deny rule of the managed file. */
    return h->kind == POLICY_HOST_NAME && d->verdict == POLICY_DENY &&
           d->origin == POLICY_BY_RULE && d->rule != NULL && d->rule->port == 0 &&
           !d->report_only;
}
