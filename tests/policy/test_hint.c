/* tests/policy/test_hint.c - policy_deny_hint() (policy/hint.c): the one
 * line every denial ends with. A table of denials, each judged by the real
 * verdict, with the exact hint it must give; every hint is one line of
 * printable ASCII that names settings only (never a way around the proxy);
 * network.denyMessage replaces it, and a managed deny rule points to the
 * administrator. */
#include <setjmp.h> /* cmocka needs these first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "policy/policy.h"

static const char cfg[] =
    "{\"network\": {\n"
    "  \"allowedDomains\": [\"ok.test\", \"ruled.test\", \"named.test\"],\n" /* line 2 */
    "  \"deniedDomains\": [\"bad.test\", \"198.51.100.7\"],\n"               /* line 3 */
    "  \"requestRules\": [{\"host\": \"ruled.test\", \"method\": \"GET\", \"path\": \"/a/**\",\n"
    "                    \"action\": \"allow\"},\n" /* line 5 */
    "                   {\"host\": \"ruled.test\", \"path\": \"/a/secret/**\", \"action\": "
    "\"deny\"}]\n" /* line 6 */
    "}}\n";

static struct policy *compile(const char *json, const char *name)
{
    struct settings s;
    struct settings_error err;
    struct policy *p = NULL;

    settings_init(&s);
    if (settings_apply_buffer(&s, name, json, strlen(json), &err) < 0 ||
        policy_compile(&s, &p, &err) < 0)
        fail_msg("%s: %s", name, err.msg);
    settings_free(&s);
    return p;
}

/* The hint for a request (method and target NULL: a connection), with one
 * resolved answer when addr is not NULL. */
static const char *hint(const struct policy *p, const char *target, const char *method,
                        const char *path, const char *addr, char *buf, size_t len)
{
    struct policy_host h;
    struct policy_addr a;
    struct policy_guard_verdict gv[1];
    struct policy_judgment j;
    struct policy_request rq;
    uint16_t port;
    const char *why;

    assert_int_equal(policy_target_parse(target, 443, &h, &port, &why), 0);
    if (method != NULL) {
        rq.method = method;
        rq.method_len = strlen(method);
        rq.target = path;
        rq.target_len = strlen(path);
    }
    if (addr != NULL)
        assert_int_equal(policy_addr_parse(addr, &a), 0);
    policy_verdict_request(p, &h, port, method != NULL ? &rq : NULL, addr != NULL ? &a : NULL,
                           addr != NULL ? 1 : 0, gv, &j);
    assert_int_not_equal(j.verdict, POLICY_ALLOW);
    return policy_deny_hint(p, &h, port, method != NULL ? &rq : NULL, &j, addr != NULL ? &a : NULL,
                            buf, len);
}

/* one line of printable ASCII that names no way around the proxy */
static void check_line(const char *s)
{
    for (const char *c = s; *c != '\0'; c++)
        if ((unsigned char)*c < 0x20 || (unsigned char)*c > 0x7e)
            fail_msg("a byte 0x%02x in '%s'", (unsigned char)*c, s);
    if (strstr(s, "noproxy") != NULL || strstr(s, "no_proxy") != NULL ||
        strstr(s, "NO_PROXY") != NULL || strstr(s, "unset") != NULL)
        fail_msg("a way around the proxy in '%s'", s);
}

static void test_table(void **state)
{
    static const struct {
        const char *target, *method, *path, *addr, *want;
    } rows[] = {
        {"nope.test:443", NULL, NULL, NULL,
         "to allow it, add 'nope.test:443' to network.allowedDomains"},
        {"[2606:4700::1111]:8443", NULL, NULL, NULL,
         "to allow it, add '[2606:4700::1111]:8443' to network.allowedDomains"},
        {"bad.test:80", NULL, NULL, NULL,
         "deny rules win over allow rules: to allow it, remove or narrow 'bad.test' "
         "(hint.json:3)"},
        {"198.51.100.7:443", NULL, NULL, NULL,
         "deny rules win over allow rules: to allow it, remove or narrow '198.51.100.7' "
         "(hint.json:3)"},
        {"127.0.0.1:8080", NULL, NULL, NULL,
         "to allow this address, add '127.0.0.1:8080' to network.allowedDomains"},
        {"[::1]:99", NULL, NULL, NULL,
         "to allow this address, add '[::1]:99' to network.allowedDomains"},
        {"named.test:443", NULL, NULL, "169.254.169.254",
         "'named.test' resolved to an address the guard refuses; to allow that address, add "
         "'169.254.169.254:443' to network.allowedDomains"},
        {"ruled.test:80", "POST", "/a/b?q=1", NULL,
         "to allow it, add {\"host\": \"ruled.test\", \"method\": \"POST\", \"path\": \"/a/b\", "
         "\"action\": \"allow\"} to network.requestRules"},
        {"ruled.test:80", "PUT", "/a/./x/../%62", NULL,
         "to allow it, add {\"host\": \"ruled.test\", \"method\": \"PUT\", \"path\": \"/a/b\", "
         "\"action\": \"allow\"} to network.requestRules"},
        {"ruled.test:80", "GET", "/a/secret/k", NULL,
         "deny rules win over allow rules: to allow it, remove or narrow 'deny * ruled.test "
         "/a/secret/**' (hint.json:6)"},
        {"ruled.test:80", "GET", "/x%2Fy", NULL,
         "to allow it, add a network.requestRules allow rule for 'ruled.test'"},
        {"ruled.test:443", NULL, NULL, NULL,
         "'ruled.test' has network.requestRules, which judge plain-HTTP requests only; its "
         "tunnels are refused"},
    };
    struct policy *p = compile(cfg, "hint.json");
    char buf[400];
    int nfail = 0;
    (void)state;

    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        const char *got =
            hint(p, rows[i].target, rows[i].method, rows[i].path, rows[i].addr, buf, sizeof(buf));
        check_line(got);
        if (strcmp(got, rows[i].want) != 0) {
            print_error("row %zu %s: got\n  %s\nwant\n  %s\n", i, rows[i].target, got,
                        rows[i].want);
            nfail++;
        }
    }
    policy_free(p);
    assert_int_equal(nfail, 0);
}

/* network.denyMessage replaces every hint; a short buffer is cut, never
 * overrun */
static void test_message_and_bounds(void **state)
{
    struct policy *p =
        compile("{\"network\": {\"deniedDomains\": [\"bad.test\"], \"denyMessage\": \"ask "
                "#egress\"}}",
                "msg.json");
    struct policy *q = compile(cfg, "hint.json");
    char buf[400], small[12];
    (void)state;

    assert_string_equal(hint(p, "bad.test", NULL, NULL, NULL, buf, sizeof(buf)), "ask #egress");
    assert_string_equal(hint(p, "other.test", NULL, NULL, NULL, buf, sizeof(buf)), "ask #egress");
    assert_string_equal(policy_deny_message(p), "ask #egress");
    assert_null(policy_deny_message(q));
    memset(small, 'x', sizeof(small));
    hint(q, "nope.test", NULL, NULL, NULL, small, sizeof(small) - 2);
    assert_int_equal(strlen(small), sizeof(small) - 3);
    assert_int_equal(small[sizeof(small) - 1], 'x');
    policy_free(p);
    policy_free(q);
}

/* A deny rule the managed file wrote: only its administrator can change it. */
static void test_managed(void **state)
{
    static const char managed[] = "{\"network\": {\"deniedDomains\": [\"corp-block.test\"]}}\n";
    char dir[] = "/tmp/test_hint.XXXXXX", mp[64], buf[400], want[200];
    struct settings s;
    struct settings_error err;
    struct policy *p = NULL;
    FILE *f;
    (void)state;

    assert_non_null(mkdtemp(dir));
    snprintf(mp, sizeof(mp), "%s/managed.json", dir);
    f = fopen(mp, "w");
    assert_non_null(f);
    assert_true(fputs(managed, f) >= 0);
    assert_int_equal(fclose(f), 0);
    settings_init(&s);
    assert_int_equal(settings_apply_buffer(&s, "user.json", cfg, strlen(cfg), &err), 0);
    assert_int_equal(settings_apply_managed(&s, mp, &err), 0);
    assert_int_equal(policy_compile(&s, &p, &err), 0);
    settings_free(&s);
    snprintf(want, sizeof(want),
             "'corp-block.test' is in the managed settings (%s:1): only their administrator "
             "can change it",
             mp);
    assert_string_equal(hint(p, "corp-block.test", NULL, NULL, NULL, buf, sizeof(buf)), want);
    policy_free(p);
    unlink(mp);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_message_and_bounds),
        cmocka_unit_test(test_managed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
