/* tests/policy/test_verdict.c - policy_verdict(), the one verdict.
 *
 * A table of requests (host, port, answers) against a few settings files,
 * each row with the decision, origin, rule, guard class, counts and a piece
 * of the reason it must give; every failing row is printed and the test
 * fails once at the end. Then two properties: without answers a name gets
 * exactly policy_decide's decision, and with answers the per-answer verdicts
 * are exactly policy_guard's (the verdict composes them and adds nothing of
 * its own beyond the fold).
 */
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

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))
#define MAXA 4
#define NONE (-1) /* no rule / not guarded */

enum cfg_id { C_BASIC = 0, C_STRICT, C_ALL, C_REPORT, C_N };

/* Line numbers matter: rows name rules by FILE:LINE. */
static const char *const cfg_json[C_N] = {
    [C_BASIC] = "{\"network\": {\n"
                "  \"allowedDomains\": [\"*.npmjs.org\",\n"                    /* line 2 */
                "                     \"localhost\",\n"                        /* line 3 */
                "                     \"127.0.0.1:3000\",\n"                   /* line 4 */
                "                     \"203.0.113.0/24\",\n"                   /* line 5 */
                "                     \"github.com\"],\n"                      /* line 6 */
                "  \"deniedDomains\": [\"bad.npmjs.org\",\n"                   /* line 7 */
                "                    \"198.51.100.7\",\n"                      /* line 8 */
                "                    \"*:22\"],\n"                             /* line 9 */
                "  \"deniedDomainReasons\": {\"*:22\": \"SSH is blocked\"},\n" /* line 10 */
                "  \"deniedResolvedAddresses\": [\"93.184.216.99\"],\n"        /* line 11 */
                "  \"denyPrivateAddresses\": true\n"
                "}}\n",
    [C_STRICT] = "{\"network\": {\"allowedDomains\": [\"ok.com\"], \"strictAllowlist\": true}}\n",
    [C_ALL] = "{\"network\": {\"allowAllDomains\": true, \"deniedDomains\": [\"no.com\"]}}\n",
    [C_REPORT] = "{\"network\": {\"allowedDomains\": [\"ok.com\"], \"mode\": \"report\"}}\n",
};

static struct policy *pols[C_N];

static int setup(void **state)
{
    struct policy_addr listener;
    uint16_t lport = 3000;

    (void)state;
    for (int i = 0; i < C_N; i++) {
        struct settings s;
        struct settings_error err;
        char name[32];

        snprintf(name, sizeof(name), "cfg%d.json", i);
        settings_init(&s);
        if (settings_apply_buffer(&s, name, cfg_json[i], strlen(cfg_json[i]), &err) < 0 ||
            policy_compile(&s, &pols[i], &err) < 0) {
            print_error("cfg %d: %s\n", i, err.msg);
            settings_free(&s);
            return -1;
        }
        settings_free(&s);
    }
    /* the proxy listens on 127.0.0.1:3000, which C_BASIC allows by rule */
    if (policy_addr_parse("127.0.0.1", &listener) < 0 ||
        policy_set_local(pols[C_BASIC], NULL, 0, &listener, &lport, 1) < 0)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < C_N; i++)
        policy_free(pols[i]);
    return 0;
}

struct row {
    int cfg;
    const char *target; /* policy_target_parse form */
    int resolved;       /* 1: the answers below are given (maybe none) */
    const char *answers[MAXA];
    /* expected */
    enum policy_verdict decision;
    enum policy_origin origin;
    const char *rule;   /* pattern, or NULL */
    unsigned line;      /* rule's line (0: not checked) */
    int cls;            /* enum policy_addr_class, or NONE when not guarded */
    int nallowed;       /* NONE when not guarded */
    const char *reason; /* substring of the reason */
};

#define A(...)                                                                                     \
    1,                                                                                             \
    {                                                                                              \
        __VA_ARGS__                                                                                \
    }
#define NOA                                                                                        \
    0,                                                                                             \
    {                                                                                              \
        NULL                                                                                       \
    }

static const struct row rows[] = {
    /* names: the rule step alone */
    {C_BASIC, "a.npmjs.org", NOA, POLICY_ALLOW, POLICY_BY_RULE, "*.npmjs.org", 2, NONE, NONE,
     "allowed by rule '*.npmjs.org'"},
    {C_BASIC, "bad.npmjs.org", NOA, POLICY_DENY, POLICY_BY_RULE, "bad.npmjs.org", 7, NONE, NONE,
     "denied by rule 'bad.npmjs.org'"},
    {C_BASIC, "github.com:22", NOA, POLICY_DENY, POLICY_BY_RULE, "*:22", 9, NONE, NONE,
     "SSH is blocked"},
    {C_BASIC, "example.org", NOA, POLICY_ASK, POLICY_BY_NO_RULE, NULL, 0, NONE, NONE,
     "no rule matches"},
    {C_STRICT, "other.com", NOA, POLICY_DENY, POLICY_BY_STRICT, NULL, 0, NONE, NONE,
     "strictAllowlist"},
    {C_ALL, "any.org", NOA, POLICY_ALLOW, POLICY_BY_ALLOW_ALL, NULL, 0, NONE, NONE,
     "allowAllDomains"},

    /* names with answers: the guard folded in */
    {C_BASIC, "pub.npmjs.org", A("93.184.216.34"), POLICY_ALLOW, POLICY_BY_RULE, "*.npmjs.org", 2,
     POLICY_CLASS_PUBLIC, 1, "allowed by rule"},
    {C_BASIC, "meta.npmjs.org", A("169.254.169.254", "127.0.0.1"), POLICY_DENY, POLICY_BY_GUARD,
     "*.npmjs.org", 2, POLICY_CLASS_METADATA, 0,
     "every resolved address is refused: 169.254.169.254 is a metadata address"},
    {C_BASIC, "mixed.npmjs.org", A("10.0.0.1", "93.184.216.35"), POLICY_ALLOW, POLICY_BY_RULE,
     "*.npmjs.org", 2, POLICY_CLASS_PUBLIC, 1, "allowed by rule"},
    {C_BASIC, "priv.npmjs.org", A("10.0.0.1"), POLICY_DENY, POLICY_BY_GUARD, "*.npmjs.org", 2,
     POLICY_CLASS_PRIVATE, 0, "10.0.0.1 is a private address"},
    {C_BASIC, "v6.npmjs.org", A("2001:db8::10"), POLICY_DENY, POLICY_BY_GUARD, "*.npmjs.org", 2,
     POLICY_CLASS_RESERVED, 0, "reserved"},
    {C_BASIC, "mapped.npmjs.org", A("::ffff:127.0.0.1"), POLICY_DENY, POLICY_BY_GUARD,
     "*.npmjs.org", 2, POLICY_CLASS_LOOPBACK, 0, "loopback"},
    /* an IP rule refusing an answer becomes the rule */
    {C_BASIC, "listed.npmjs.org", A("198.51.100.7"), POLICY_DENY, POLICY_BY_GUARD, "198.51.100.7",
     8, POLICY_CLASS_LISTED, 0, "denied by network.deniedDomains rule '198.51.100.7'"},
    {C_BASIC, "rlisted.npmjs.org", A("93.184.216.99"), POLICY_DENY, POLICY_BY_GUARD,
     "93.184.216.99", 11, POLICY_CLASS_LISTED, 0, "deniedResolvedAddresses"},
    /* an allowed IP rule lets a name resolve to a denied class */
    {C_BASIC, "doc.npmjs.org", A("203.0.113.9"), POLICY_ALLOW, POLICY_BY_RULE, "*.npmjs.org", 2,
     POLICY_CLASS_RESERVED, 1, "allowed by rule"},
    /* localhost only to loopback */
    {C_BASIC, "localhost", A("127.0.0.1"), POLICY_ALLOW, POLICY_BY_RULE, "localhost", 3,
     POLICY_CLASS_LOOPBACK, 1, "allowed by rule 'localhost'"},
    {C_BASIC, "localhost", A("93.184.216.34"), POLICY_DENY, POLICY_BY_GUARD, "localhost", 3,
     POLICY_CLASS_PUBLIC, 0, "localhost may resolve only to loopback"},
    /* the proxy's own listener, reached through a name */
    {C_BASIC, "localhost:3000", A("127.0.0.1"), POLICY_DENY, POLICY_BY_GUARD, "localhost", 3,
     POLICY_CLASS_PROXY, 0, "own listeners"},
    /* ask keeps asking when an answer passes; denied when none does */
    {C_BASIC, "example.org", A("93.184.216.34"), POLICY_ASK, POLICY_BY_NO_RULE, NULL, 0,
     POLICY_CLASS_PUBLIC, 1, "no rule matches"},
    {C_BASIC, "example.org", A("169.254.169.254"), POLICY_DENY, POLICY_BY_GUARD, NULL, 0,
     POLICY_CLASS_METADATA, 0, "metadata"},
    /* a deny stays the rule's, even when answers are judged (report mode) */
    {C_BASIC, "bad.npmjs.org", A("93.184.216.34"), POLICY_DENY, POLICY_BY_RULE, "bad.npmjs.org", 7,
     POLICY_CLASS_PUBLIC, 1, "denied by rule"},
    {C_REPORT, "other.com", A("93.184.216.34"), POLICY_ASK, POLICY_BY_NO_RULE, NULL, 0,
     POLICY_CLASS_PUBLIC, 1, "no rule matches"},
    /* allowAllDomains does not open the metadata endpoint */
    {C_ALL, "any.org", A("169.254.169.254"), POLICY_DENY, POLICY_BY_GUARD, NULL, 0,
     POLICY_CLASS_METADATA, 0, "metadata"},
    /* resolved, but no address at all */
    {C_BASIC, "empty.npmjs.org", A(NULL), POLICY_DENY, POLICY_BY_GUARD, "*.npmjs.org", 2,
     POLICY_CLASS_PUBLIC, 0, "has no address"},

    /* IP literals are their own answer, guarded with or without answers */
    {C_BASIC, "127.0.0.1:80", NOA, POLICY_DENY, POLICY_BY_CLASS, NULL, 0, POLICY_CLASS_LOOPBACK, 0,
     "loopback address and no rule allows it"},
    {C_BASIC, "169.254.169.254:80", NOA, POLICY_DENY, POLICY_BY_CLASS, NULL, 0,
     POLICY_CLASS_METADATA, 0, "metadata"},
    {C_BASIC, "[::ffff:169.254.169.254]:80", NOA, POLICY_DENY, POLICY_BY_CLASS, NULL, 0,
     POLICY_CLASS_METADATA, 0, "metadata"},
    {C_BASIC, "203.0.113.7", NOA, POLICY_ALLOW, POLICY_BY_RULE, "203.0.113.0/24", 5,
     POLICY_CLASS_RESERVED, 1, "allowed by rule"},
    {C_BASIC, "198.51.100.7", NOA, POLICY_DENY, POLICY_BY_RULE, "198.51.100.7", 8,
     POLICY_CLASS_LISTED, 0, "denied by rule"},
    {C_BASIC, "93.184.216.34", NOA, POLICY_ASK, POLICY_BY_NO_RULE, NULL, 0, POLICY_CLASS_PUBLIC, 1,
     "no rule matches"},
    {C_BASIC, "10.1.2.3", NOA, POLICY_DENY, POLICY_BY_CLASS, NULL, 0, POLICY_CLASS_PRIVATE, 0,
     "private"},
    /* allowed by rule, but it is the proxy's own listener: the guard refuses */
    {C_BASIC, "127.0.0.1:3000", NOA, POLICY_DENY, POLICY_BY_GUARD, "127.0.0.1:3000", 4,
     POLICY_CLASS_PROXY, 0, "127.0.0.1 is one of this proxy's own listeners"},
    /* answers given for a literal are ignored: the literal is judged */
    {C_BASIC, "203.0.113.7", A("169.254.169.254"), POLICY_ALLOW, POLICY_BY_RULE, "203.0.113.0/24",
     5, POLICY_CLASS_RESERVED, 1, "allowed by rule"},
};

static int check_row(size_t i, const struct row *r)
{
    struct policy_host h;
    uint16_t port;
    const char *why;
    struct policy_addr addrs[MAXA];
    struct policy_guard_verdict gv[MAXA];
    struct policy_judgment j;
    char src[64];
    size_t n = 0;
    int bad = 0;

    if (policy_target_parse(r->target, 443, &h, &port, &why) < 0) {
        print_error("row %zu %s: bad target: %s\n", i, r->target, why);
        return 1;
    }
    for (; r->resolved && n < MAXA && r->answers[n] != NULL; n++)
        assert_int_equal(policy_addr_parse(r->answers[n], &addrs[n]), 0);
    memset(gv, 0xa5, sizeof(gv));
    policy_verdict(pols[r->cfg], &h, port, r->resolved ? addrs : NULL, n, gv, &j);

    if (j.verdict != r->decision || j.origin != r->origin) {
        print_error("row %zu %s: decision %d origin %d, want %d %d\n", i, r->target, j.verdict,
                    j.origin, r->decision, r->origin);
        bad = 1;
    }
    if ((r->rule == NULL) != (j.rule == NULL) ||
        (r->rule != NULL && strcmp(r->rule, j.rule->pattern) != 0)) {
        print_error("row %zu %s: rule %s, want %s\n", i, r->target,
                    j.rule != NULL ? j.rule->pattern : "(none)", r->rule ? r->rule : "(none)");
        bad = 1;
    }
    if (r->rule == NULL && (j.rule_text[0] != '\0' || j.source[0] != '\0')) {
        print_error("row %zu %s: rule text '%s' source '%s' without a rule\n", i, r->target,
                    j.rule_text, j.source);
        bad = 1;
    }
    if (r->rule != NULL && r->line != 0) {
        snprintf(src, sizeof(src), "cfg%d.json:%u", r->cfg, r->line);
        /* the source is its own field, not part of the rule text */
        if (strcmp(j.source, src) != 0 || strstr(j.rule_text, src) != NULL ||
            strstr(j.rule_text, r->rule) == NULL) {
            print_error("row %zu %s: source '%s' rule text '%s', want %s\n", i, r->target, j.source,
                        j.rule_text, src);
            bad = 1;
        }
    }
    if (r->cls == NONE) {
        if (j.guarded) {
            print_error("row %zu %s: guarded without answers\n", i, r->target);
            bad = 1;
        }
    } else if (!j.guarded || (int)j.cls != r->cls || (int)j.nallowed != r->nallowed) {
        print_error("row %zu %s: guarded %d class %s nallowed %zu, want %s %d\n", i, r->target,
                    j.guarded, policy_class_name(j.cls), j.nallowed,
                    policy_class_name((enum policy_addr_class)r->cls), r->nallowed);
        bad = 1;
    }
    if (strstr(j.reason, r->reason) == NULL) {
        print_error("row %zu %s: reason '%s' lacks '%s'\n", i, r->target, j.reason, r->reason);
        bad = 1;
    }
    for (const char *c = j.reason; *c != '\0'; c++) {
        if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f) {
            print_error("row %zu %s: reason not printable ASCII\n", i, r->target);
            bad = 1;
            break;
        }
    }
    return bad;
}

static void test_table(void **state)
{
    size_t failed = 0;

    (void)state;
    for (size_t i = 0; i < NELEM(rows); i++)
        failed += (size_t)check_row(i, &rows[i]);
    if (failed > 0)
        print_error("%zu of %zu rows failed\n", failed, NELEM(rows));
    assert_int_equal(failed, 0);
}

/* Without answers, a name's verdict is the rule decision, to the byte. With
 * answers, the per-answer verdicts are the guard's, and the fold is: a rule
 * deny stays; otherwise denied by the guard exactly when nothing passes. */
static void test_composes(void **state)
{
    static const char *const hosts[] = {"a.npmjs.org", "bad.npmjs.org", "npmjs.org",
                                        "localhost",   "github.com",    "x.localhost",
                                        "ok.com",      "no.com",        "other.org"};
    static const uint16_t ports[] = {22, 80, 443, 3000};
    static const char *const answers[] = {"93.184.216.34", "127.0.0.1",     "10.0.0.1",
                                          "::1",           "2001:4860::8",  "169.254.169.254",
                                          "198.51.100.7",  "93.184.216.99", "203.0.113.1"};
    size_t checked = 0;

    (void)state;
    for (int c = 0; c < C_N; c++) {
        for (size_t hi = 0; hi < NELEM(hosts); hi++) {
            for (size_t pi = 0; pi < NELEM(ports); pi++) {
                struct policy_host h;
                struct policy_decision d;
                struct policy_judgment j;
                const char *why;
                uint16_t port;

                assert_int_equal(policy_target_parse(hosts[hi], 443, &h, &port, &why), 0);
                port = ports[pi];
                policy_decide(pols[c], &h, port, &d);
                policy_verdict(pols[c], &h, port, NULL, 0, NULL, &j);
                assert_int_equal(j.verdict, d.verdict);
                assert_int_equal(j.origin, d.origin);
                assert_ptr_equal(j.rule, d.rule);
                assert_string_equal(j.reason, d.reason);
                assert_int_equal(j.guarded, 0);

                for (size_t ai = 0; ai < NELEM(answers); ai++) {
                    struct policy_addr a[2];
                    struct policy_guard_verdict g1[2], g2[2];
                    size_t ok;

                    assert_int_equal(policy_addr_parse(answers[ai], &a[0]), 0);
                    assert_int_equal(policy_addr_parse(answers[(ai + 1) % NELEM(answers)], &a[1]),
                                     0);
                    ok = policy_guard(pols[c], &h, port, a, 2, g1);
                    policy_verdict(pols[c], &h, port, a, 2, g2, &j);
                    assert_int_equal(j.nallowed, ok);
                    assert_int_equal(j.naddrs, 2);
                    for (int k = 0; k < 2; k++) {
                        assert_int_equal(g2[k].allowed, g1[k].allowed);
                        assert_int_equal(g2[k].cls, g1[k].cls);
                        assert_string_equal(g2[k].why, g1[k].why);
                    }
                    if (d.verdict == POLICY_DENY) {
                        assert_int_equal(j.verdict, POLICY_DENY);
                        assert_int_equal(j.origin, d.origin);
                    } else if (ok == 0) {
                        assert_int_equal(j.verdict, POLICY_DENY);
                        assert_int_equal(j.origin, POLICY_BY_GUARD);
                        assert_non_null(strstr(j.reason, g1[0].why));
                    } else {
                        assert_int_equal(j.verdict, d.verdict);
                        assert_string_equal(j.reason, d.reason);
                    }
                    checked++;
                }
            }
        }
    }
    assert_true(checked > 500);
}

/* Issue 21 item 7: report mode reports what the rules would deny, never
 * lifts the guard nor a deny rule of the managed file. */
struct report_row {
    const char *target;
    const char *answer; /* NULL: not resolved */
    int report_only;    /* policy_judgment.report_only */
    int nallowed;       /* answers the guard passes (with an answer) */
    int dns_refused;    /* policy_dns_refused (names without an answer) */
};

static const struct report_row report_rows[] = {
    {"user-deny.example", NULL, 1, 0, 0},             /* a user deny rule: would_deny */
    {"user-deny.example", "93.184.216.34", 1, 1, 0},  /* ... dialed where the guard passes */
    {"user-deny.example", "127.0.0.1", 1, 0, 0},      /* ... never where it refuses */
    {"user-deny.example", "169.254.169.254", 1, 0, 0},
    {"user-deny.example", "10.1.2.3", 1, 0, 0},       /* denyPrivateAddresses */
    {"managed-deny.example", NULL, 0, 0, 1},          /* the managed file's rule denies */
    {"managed-deny.example", "93.184.216.34", 0, 1, 0},
    {"other.example", NULL, 1, 0, 0},                 /* no rule: would_deny */
    {"other.example", "169.254.169.254", 0, 0, 0},    /* the guard refuses every answer */
    {"other.example", "127.0.0.1", 0, 0, 0},
    {"169.254.169.254", NULL, 0, 0, 0},               /* a literal in a denied class */
    {"127.0.0.2", NULL, 0, 0, 0},
    {"198.51.100.7", NULL, 0, 0, 0},                  /* an IP rule: the guard's */
    {"ok.example", "93.184.216.34", 0, 1, 0},         /* allowed: nothing to report */
};

static void test_report_only(void **state)
{
    static const char managed[] = "{\"network\": {\"mode\": \"report\", \"denyPrivateAddresses\": "
                                  "true, \"deniedDomains\": [\"managed-deny.example\"]}}\n";
    static const char user[] = "{\"network\": {\"allowedDomains\": [\"ok.example\"], "
                               "\"deniedDomains\": [\"user-deny.example\", \"198.51.100.7\"]}}\n";
    char dir[] = "/tmp/test_verdict.XXXXXX", mp[64];
    struct settings s;
    struct settings_error err;
    struct policy *p = NULL, *enforce = NULL;
    FILE *f;
    int nfail = 0;

    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(mp, sizeof(mp), "%s/managed.json", dir);
    f = fopen(mp, "w");
    assert_non_null(f);
    assert_int_equal(fputs(managed, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
    settings_init(&s);
    assert_int_equal(settings_apply_buffer(&s, "user.json", user, strlen(user), &err), 0);
    assert_int_equal(settings_apply_managed(&s, mp, &err), 0);
    assert_int_equal(policy_compile(&s, &p, &err), 0);
    s.network.mode = SETTINGS_MODE_ENFORCE;
    assert_int_equal(policy_compile(&s, &enforce, &err), 0);
    settings_free(&s);
    unlink(mp);
    rmdir(dir);

    for (size_t i = 0; i < NELEM(report_rows); i++) {
        const struct report_row *r = &report_rows[i];
        struct policy_host h;
        struct policy_addr a;
        struct policy_guard_verdict gv[1];
        struct policy_judgment j;
        const char *why;
        uint16_t port;
        int got, refused = -1;

        assert_int_equal(policy_target_parse(r->target, 443, &h, &port, &why), 0);
        if (r->answer != NULL) {
            assert_int_equal(policy_addr_parse(r->answer, &a), 0);
            policy_verdict(p, &h, port, &a, 1, gv, &j);
        } else {
            policy_verdict(p, &h, port, NULL, 0, gv, &j);
        }
        got = j.report_only;
        if (r->answer == NULL && h.kind == POLICY_HOST_NAME)
            refused = policy_dns_refused(p, &h, &j);
        if (got != r->report_only || (j.guarded && (int)j.nallowed != r->nallowed) ||
            (refused >= 0 && refused != r->dns_refused)) {
            print_error("report row %zu (%s%s%s): report_only %d want %d, nallowed %zu want %d, "
                        "dns_refused %d want %d (%s)\n",
                        i, r->target, r->answer ? " -> " : "", r->answer ? r->answer : "", got,
                        r->report_only, j.nallowed, r->nallowed, refused, r->dns_refused,
                        j.reason);
            nfail++;
        }
        /* enforce mode lets nothing through */
        if (r->answer != NULL)
            policy_verdict(enforce, &h, port, &a, 1, gv, &j);
        else
            policy_verdict(enforce, &h, port, NULL, 0, gv, &j);
        if (j.report_only != 0) {
            print_error("report row %zu: report_only in enforce mode\n", i);
            nfail++;
        }
    }
    /* localhost passes the guard to loopback because a rule allowed it; let
     * through by report mode, it must not reach loopback */
    {
        struct policy_host h;
        struct policy_addr a;
        struct policy_guard_verdict gv[1];
        struct policy_judgment j;
        const char *why;
        uint16_t port;

        assert_int_equal(policy_target_parse("localhost", 80, &h, &port, &why), 0);
        assert_int_equal(policy_addr_parse("127.0.0.1", &a), 0);
        policy_verdict(p, &h, port, &a, 1, gv, &j);
        assert_int_equal(j.report_only, 1);
        assert_int_equal(gv[0].allowed, 1);
        assert_int_equal(gv[0].dial, 0);
        assert_int_equal(policy_target_parse("ok.example", 80, &h, &port, &why), 0);
        assert_int_equal(policy_addr_parse("93.184.216.34", &a), 0);
        policy_verdict(p, &h, port, &a, 1, gv, &j);
        assert_int_equal(gv[0].dial, 1);
    }
    policy_free(p);
    policy_free(enforce);
    if (nfail)
        fail_msg("%d report row(s) failed", nfail);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_composes),
        cmocka_unit_test(test_report_only),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
