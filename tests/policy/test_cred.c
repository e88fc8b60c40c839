/* tests/policy/test_cred.c - "credentials" in the policy (policy/cred.c):
 * the load-time refusals that need the other keys (mask without
 * tlsTerminate, injectHosts not covered by allowedDomains or wholly inside
 * excludeDomains), which hosts get which credential, and that those hosts
 * need termination (policy_tls_needed) while others do not.
 */
#include <setjmp.h> /* cmocka needs these first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "policy/policy.h"

static int compile(const char *json, struct policy **p, struct settings_error *err)
{
    struct settings s;
    int rc;

    settings_init(&s);
    rc = settings_apply_buffer(&s, "c.json", json, strlen(json), err);
    if (rc == 0)
        rc = policy_compile(&s, p, err);
    settings_free(&s);
    return rc;
}

static void host(const char *name, struct policy_host *h)
{
    const char *why;

    assert_int_equal(policy_host_normalize(name, strlen(name), h, &why), 0);
}

struct refusal {
    const char *json;
    const char *msg;
};

static const struct refusal refusals[] = {
    {"{\"network\": {\"allowedDomains\": [\"api.example.com\"]}, \"credentials\": {\"envVars\": "
     "[{\"name\": \"T\", \"mode\": \"mask\"}]}}",
     "c.json:1:82: credentials.envVars[0]: mode \"mask\" needs network.tlsTerminate"},
    {"{\"network\": {\"allowedDomains\": [\"api.example.com\"], \"tlsTerminate\": {}}, "
     "\"credentials\": {\"envVars\": [{\"name\": \"T\", \"mode\": \"mask\", \"injectHosts\": "
     "[\"evil.example\"]}]}}",
     "injectHosts 'evil.example' is not covered by network.allowedDomains"},
    {"{\"network\": {\"allowedDomains\": [\"api.example.com\"], \"tlsTerminate\": {}}, "
     "\"credentials\": {\"envVars\": [{\"name\": \"T\", \"mode\": \"mask\", \"injectHosts\": "
     "[\"*.example.com\"]}]}}",
     "injectHosts '*.example.com' is not covered by network.allowedDomains"},
    {"{\"network\": {\"allowedDomains\": [\"*.example.com\"], \"tlsTerminate\": "
     "{\"excludeDomains\": [\"*.example.com\"]}}, \"credentials\": {\"files\": [{\"path\": "
     "\"/t\", \"mode\": \"mask\", \"injectHosts\": [\"api.example.com\"]}]}}",
     "credentials.files[0]: injectHosts 'api.example.com' is wholly inside "
     "network.tlsTerminate.excludeDomains"},
    {"{\"network\": {\"allowedDomains\": [\"a.com\"], \"deniedDomains\": [\"a.com\"], "
     "\"tlsTerminate\": {}}, \"credentials\": {\"envVars\": [{\"name\": \"T\", \"mode\": "
     "\"mask\", \"injectHosts\": [\"a.com\"]}]}}",
     "injectHosts 'a.com' is not covered by network.allowedDomains"},
    /* credentials.headers (sluice proxy's gateway form) */
    {"{\"network\": {\"allowedDomains\": [\"api.example.com\"]}, \"credentials\": {\"headers\": "
     "[{\"hosts\": [\"api.example.com\"], \"name\": \"X-Key\", \"value\": {\"env\": \"K\"}}]}}",
     "c.json:1:82: credentials.headers[0]: a header is injected inside terminated HTTPS: it "
     "needs network.tlsTerminate, or credentials.allowPlaintextInject for plain HTTP only"},
    {"{\"network\": {\"allowedDomains\": [\"api.example.com\"], \"tlsTerminate\": {}}, "
     "\"credentials\": {\"headers\": [{\"hosts\": [\"evil.example\"], \"name\": \"X-Key\", "
     "\"value\": {\"env\": \"K\"}}]}}",
     "credentials.headers[0]: hosts 'evil.example' is not covered by network.allowedDomains"},
    {"{\"network\": {\"allowedDomains\": [\"*.example.com\"], \"tlsTerminate\": "
     "{\"excludeDomains\": [\"*.example.com\"]}}, \"credentials\": {\"headers\": [{\"hosts\": "
     "[\"api.example.com\"], \"name\": \"X-Key\", \"value\": {\"file\": \"/k\"}}]}}",
     "credentials.headers[0]: hosts 'api.example.com' is wholly inside "
     "network.tlsTerminate.excludeDomains"},
};

static void test_refusals(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(refusals) / sizeof(refusals[0]); i++) {
        struct policy *p = NULL;
        struct settings_error err = {{0}};
        int rc = compile(refusals[i].json, &p, &err);
        if (rc != -EINVAL || strstr(err.msg, refusals[i].msg) == NULL)
            print_error("case %zu: rc %d: %s\n", i, rc, err.msg);
        assert_int_equal(rc, -EINVAL);
        assert_non_null(strstr(err.msg, refusals[i].msg));
        assert_null(p);
    }
}

static void test_hosts(void **state)
{
    struct policy *p = NULL;
    struct settings_error err;
    struct policy_host gh, api, other, sub;

    (void)state;
    assert_int_equal(
        compile("{\"network\": {\"allowedDomains\": [\"github.com\", \"*.example.com\", "
                "\"other.org\"], \"tlsTerminate\": {\"scope\": \"needed\"}}, \"credentials\": "
                "{\"envVars\": [{\"name\": \"GH\", \"mode\": \"mask\", \"injectHosts\": "
                "[\"github.com\"]}, {\"name\": \"GONE\", \"mode\": \"deny\"}, {\"name\": \"ANY\", "
                "\"mode\": \"mask\"}], \"files\": [{\"path\": \"/k\", \"mode\": \"mask\", "
                "\"injectHosts\": [\"*.example.com\"]}]}}",
                &p, &err),
        0);
    host("github.com", &gh);
    host("api.example.com", &api);
    host("other.org", &other);
    host("nowhere.net", &sub);
    assert_int_equal(policy_cred_count(p), 3); /* deny entries are not in the policy */
    assert_int_equal(policy_cred_find(p, 0, "GH"), 0);
    assert_int_equal(policy_cred_find(p, 0, "GONE"), -1);
    assert_int_equal(policy_cred_find(p, 0, "ANY"), 1);
    assert_int_equal(policy_cred_find(p, 1, "/k"), 2);
    assert_int_equal(policy_cred_find(p, 0, "/k"), -1);
    assert_int_equal(policy_cred_injects(p, 0, &gh, 443), 1);
    assert_int_equal(policy_cred_injects(p, 0, &api, 443), 0);
    assert_int_equal(policy_cred_injects(p, 2, &api, 443), 1);
    assert_int_equal(policy_cred_injects(p, 2, &gh, 443), 0);
    /* the default: every host allowedDomains allows, and no other */
    assert_int_equal(policy_cred_injects(p, 1, &other, 443), 1);
    assert_int_equal(policy_cred_injects(p, 1, &sub, 443), 0);
    assert_int_equal(policy_tls_needed(p, &other, 443), 1);
    assert_int_equal(policy_tls_needed(p, &sub, 443), 0);
    policy_free(p);

    /* without a default-hosts entry only the named hosts need termination */
    assert_int_equal(
        compile("{\"network\": {\"allowedDomains\": [\"github.com\", \"other.org\"], "
                "\"tlsTerminate\": {\"scope\": \"needed\"}}, \"credentials\": {\"envVars\": "
                "[{\"name\": \"GH\", \"mode\": \"mask\", \"injectHosts\": [\"github.com\"]}]}}",
                &p, &err),
        0);
    assert_int_equal(policy_tls_needed(p, &gh, 443), 1);
    assert_int_equal(policy_tls_needed(p, &other, 443), 0);
    assert_int_equal(policy_tls_terminates(p, &other, 443), 0);
    assert_int_equal(policy_tls_terminates(p, &gh, 443), 1);
    policy_free(p);

    /* allowPlaintextInject: mask without tlsTerminate */
    assert_int_equal(compile("{\"network\": {\"allowedDomains\": [\"github.com\"]}, "
                             "\"credentials\": {\"allowPlaintextInject\": true, \"envVars\": "
                             "[{\"name\": \"GH\", \"mode\": \"mask\"}]}}",
                             &p, &err),
                     0);
    assert_int_equal(policy_cred_injects(p, 0, &gh, 80), 1);
    policy_free(p);

    /* credentials.headers: named "headers[i]:NAME", their hosts need
     * termination, a mask entry's name space is apart */
    assert_int_equal(
        compile("{\"network\": {\"allowedDomains\": [\"github.com\", \"other.org\"], "
                "\"tlsTerminate\": {\"scope\": \"needed\"}}, \"credentials\": {\"headers\": "
                "[{\"hosts\": [\"github.com\"], \"name\": \"Authorization\", \"value\": "
                "{\"file\": \"/run/secrets/gh\", \"prefix\": \"Bearer \"}}]}}",
                &p, &err),
        0);
    assert_int_equal(policy_cred_count(p), 1);
    assert_int_equal(policy_cred_find(p, POLICY_CRED_HEADER, "headers[0]:Authorization"), 0);
    assert_int_equal(policy_cred_find(p, 0, "headers[0]:Authorization"), -1);
    assert_int_equal(policy_cred_injects(p, 0, &gh, 443), 1);
    assert_int_equal(policy_cred_injects(p, 0, &other, 443), 0);
    assert_int_equal(policy_tls_needed(p, &gh, 443), 1);
    assert_int_equal(policy_tls_needed(p, &other, 443), 0);
    policy_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_hosts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
