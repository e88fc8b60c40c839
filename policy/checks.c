/* policy/checks.c - the checks the settings loader borrows from policy.
 *
 * settings/ sits below policy/ (design.md "Modules") and cannot call it,
 * yet network.parentProxy must be refused where it is written when its
 * URL or noProxy list does not parse by policy's host and rule grammar.
 * This file hands the loader those two checks before main runs. The
 * policy library is linked with -u policy__settings_checks
 * (policy/CMakeLists.txt) so that this file is always part of a program
 * that links policy, even one that calls nothing else in it; a program
 * without it refuses every parentProxy rather than take one unchecked.
 */
#include "policy/policy.h"

#include <errno.h>

static int proxy_url(const char *url, const char **why)
{
    struct policy_parent_proxy pp;

    return policy_parent_parse_url(url, &pp, why);
}

/* A request rule's host: a pattern as in allowedDomains. */
static int rule_host(const char *pattern, const char **why)
{
    struct policy_rule r;
    char name[POLICY_HOST_MAX + 1];

    if (pattern[0] == '*' && pattern[1] == '\0') {
        *why = "a bare '*' would put every host under request rules (and refuse every tunnel); "
               "name the hosts";
        return -EINVAL;
    }
    if (policy_pattern_parse(pattern, 0, &r, name, why) < 0)
        return -EINVAL;
    return 0;
}

const struct settings_checks policy__settings_checks = {
    .proxy_url = proxy_url,
    .no_proxy = policy_parent_check_noproxy,
    .rule_host = rule_host,
    .rule_path = policy_path_glob_check,
};

__attribute__((constructor)) static void install(void)
{
    settings_set_checks(&policy__settings_checks);
}
