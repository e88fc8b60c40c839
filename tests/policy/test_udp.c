/* tests/policy/test_udp.c - "udp:" rules and the verdict's transport
 * (policy/udp.c, issue 26).
 *
 * A table of (transport, host, port) against one settings file that holds
 * every combination: a TCP allow rule, a udp: allow rule (name, wildcard,
 * address, CIDR, '*' port), a TCP deny rule, a udp: deny rule, both on the
 * same name. Each row names the decision and the deciding rule's line.
 * Then the guard (an IP allow rule opens its address for its own transport
 * only), report mode, allowAllDomains, the grammar's refusals with their
 * FILE:LINE:COL, and the hint a UDP denial ends with.
 */
#include <setjmp.h> /* cmocka needs these first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* Line numbers matter: rows name rules by their line. */
static const char cfg[] =
    "{\"network\": {\n"
    "  \"allowedDomains\": [\"tcp.example\",\n"           /* 2 */
    "    \"udp:dns.example:53\",\n"                       /* 3 */
    "    \"udp:*.quic.example:*\",\n"                     /* 4 */
    "    \"udp:203.0.113.9:443\",\n"                      /* 5 */
    "    \"udp:[2001:db8::]/32:*\",\n"                    /* 6 */
    "    \"both.example\", \"udp:both.example:53\",\n"    /* 7 */
    "    \"198.51.100.0/24\",\n"                          /* 8 */
    "    \"udp:127.0.0.1:5353\", \"udp:lo.example:9\"],\n" /* 9 */
    "  \"deniedDomains\": [\"bad.quic.example\",\n"       /* 10 */
    "    \"udp:no.quic.example\",\n"                      /* 11 */
    "    \"udp:dns.example:5353\",\n"                     /* 12 */
    "    \"udp:203.0.113.9:444\", \"tcp.example:22\"]\n"  /* 13 */
    "}}\n";

static struct policy *pol;
static struct policy_guard_verdict gv1[1]; /* an IP literal's own answer */

static struct policy *compile(const char *json, const char *name, char *msg, size_t msglen)
{
    struct settings s;
    struct settings_error err;
    struct policy *p = NULL;

    settings_init(&s);
    memset(&err, 0, sizeof(err));
    if (settings_apply_buffer(&s, name, json, strlen(json), &err) < 0 ||
        policy_compile(&s, &p, &err) < 0) {
        snprintf(msg, msglen, "%.500s", err.msg);
        p = NULL;
    }
    settings_free(&s);
    return p;
}

static int setup(void **state)
{
    char msg[512];

    (void)state;
    pol = compile(cfg, "udp.json", msg, sizeof(msg));
    if (pol == NULL) {
        print_error("%s\n", msg);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    policy_free(pol);
    return 0;
}

struct row {
    enum policy_transport t;
    const char *host;
    uint16_t port;
    enum policy_verdict v;
    int line; /* deciding rule's line, 0: none */
};

static const struct row rows[] = {
    /* a TCP allow rule does not open UDP; a udp: rule does not open TCP */
    {POLICY_TCP, "tcp.example", 443, POLICY_ALLOW, 2},
    {POLICY_UDP, "tcp.example", 443, POLICY_DENY, 0},
    {POLICY_UDP, "dns.example", 53, POLICY_ALLOW, 3},
    {POLICY_TCP, "dns.example", 53, POLICY_ASK, 0},
    {POLICY_UDP, "dns.example", 54, POLICY_DENY, 0}, /* the port is the rule's */
    /* wildcard with '*' port: every subdomain, every port, not the apex */
    {POLICY_UDP, "a.quic.example", 443, POLICY_ALLOW, 4},
    {POLICY_UDP, "a.b.quic.example", 1, POLICY_ALLOW, 4},
    {POLICY_UDP, "quic.example", 443, POLICY_DENY, 0},
    {POLICY_TCP, "a.quic.example", 443, POLICY_ASK, 0},
    /* a TCP deny rule denies UDP too (deny-first over a udp: allow) */
    {POLICY_UDP, "bad.quic.example", 443, POLICY_DENY, 10},
    {POLICY_TCP, "bad.quic.example", 443, POLICY_DENY, 10},
    /* a udp: deny rule denies UDP only */
    {POLICY_UDP, "no.quic.example", 443, POLICY_DENY, 11},
    {POLICY_TCP, "no.quic.example", 443, POLICY_ASK, 0},
    {POLICY_UDP, "dns.example", 5353, POLICY_DENY, 12},
    {POLICY_TCP, "dns.example", 5353, POLICY_ASK, 0},
    /* addresses */
    {POLICY_UDP, "203.0.113.9", 443, POLICY_ALLOW, 5},
    {POLICY_UDP, "203.0.113.9", 444, POLICY_DENY, 13},
    {POLICY_TCP, "203.0.113.9", 444, POLICY_DENY, 0}, /* reserved class, no TCP rule */
    {POLICY_UDP, "2001:db8::1", 7, POLICY_ALLOW, 6},
    {POLICY_TCP, "2001:db8::1", 7, POLICY_DENY, 0},
    {POLICY_UDP, "198.51.100.1", 53, POLICY_DENY, 0}, /* the CIDR is TCP-only */
    {POLICY_TCP, "198.51.100.1", 53, POLICY_ALLOW, 8},
    /* a name with both rules: each transport its own */
    {POLICY_UDP, "both.example", 53, POLICY_ALLOW, 7},
    {POLICY_UDP, "both.example", 443, POLICY_DENY, 0},
    {POLICY_TCP, "both.example", 443, POLICY_ALLOW, 7},
    /* a TCP deny rule with a port denies that port for UDP */
    {POLICY_UDP, "tcp.example", 22, POLICY_DENY, 13},
    /* loopback: only an explicit udp: rule */
    {POLICY_UDP, "127.0.0.1", 5353, POLICY_ALLOW, 9},
    {POLICY_UDP, "127.0.0.1", 53, POLICY_DENY, 0},
};

static void test_table(void **state)
{
    int bad = 0;

    (void)state;
    for (size_t i = 0; i < NELEM(rows); i++) {
        const struct row *r = &rows[i];
        struct policy_host h;
        struct policy_judgment j;
        const char *why;

        assert_int_equal(policy_host_normalize(r->host, strlen(r->host), &h, &why), 0);
        policy_verdict_transport(pol, r->t, &h, r->port, NULL, 0, gv1, &j);
        if (j.verdict != r->v || (r->line == 0) != (j.rule == NULL) ||
            (j.rule != NULL && (int)j.rule->line != r->line) || j.transport != r->t) {
            print_error("row %zu %s %s:%u: got %d rule line %d: %s\n", i,
                        r->t == POLICY_UDP ? "udp" : "tcp", r->host, (unsigned)r->port,
                        (int)j.verdict, j.rule != NULL ? (int)j.rule->line : 0, j.reason);
            bad = 1;
        }
    }
    assert_int_equal(bad, 0);
}

/* The TCP verdict is policy_verdict's, whatever udp: rules exist. */
static void test_tcp_unchanged(void **state)
{
    (void)state;
    for (size_t i = 0; i < NELEM(rows); i++) {
        struct policy_host h;
        struct policy_judgment a, b;
        const char *why;

        assert_int_equal(policy_host_normalize(rows[i].host, strlen(rows[i].host), &h, &why), 0);
        policy_verdict(pol, &h, rows[i].port, NULL, 0, gv1, &a);
        policy_verdict_transport(pol, POLICY_TCP, &h, rows[i].port, NULL, 0, gv1, &b);
        assert_int_equal(a.verdict, b.verdict);
        assert_ptr_equal(a.rule, b.rule);
        assert_int_equal(b.transport, POLICY_TCP);
    }
}

/* The guard judges answers for the match's transport: a TCP IP allow rule
 * does not open a denied class for UDP, a udp: one does; udp: deny IP
 * rules refuse UDP answers only. */
static void test_guard(void **state)
{
    struct policy_host h;
    struct policy_judgment j;
    struct policy_guard_verdict gv[2];
    struct policy_addr a[2];
    const char *why;

    (void)state;
    assert_int_equal(policy_host_normalize("lo.example", 10, &h, &why), 0);
    assert_int_equal(policy_addr_parse("127.0.0.1", &a[0]), 0);
    /* lo.example:9 is allowed for UDP; 127.0.0.1:9 has no udp: IP rule */
    policy_verdict_transport(pol, POLICY_UDP, &h, 9, a, 1, gv, &j);
    assert_int_equal(j.verdict, POLICY_DENY);
    assert_int_equal(j.origin, POLICY_BY_GUARD);
    /* port 5353 of 127.0.0.1 is opened by udp:127.0.0.1:5353, for UDP */
    assert_int_equal(policy_host_normalize("dns.example", 11, &h, &why), 0);
    assert_int_equal(policy_addr_parse("203.0.113.9", &a[0]), 0);
    assert_int_equal(policy_addr_parse("93.184.216.34", &a[1]), 0);
    policy_verdict_transport(pol, POLICY_UDP, &h, 53, a, 2, gv, &j);
    assert_int_equal(j.verdict, POLICY_ALLOW);
    assert_int_equal(j.nallowed, 1); /* 203.0.113.9 is reserved; :53 has no udp: rule */
    assert_false(gv[0].allowed);
    assert_true(gv[1].dial);
    /* a udp: deny IP rule refuses the answer for UDP, not for TCP */
    assert_int_equal(policy_guard_transport(pol, POLICY_UDP, &h, 444, a, 1, gv), 0);
    assert_int_equal(gv[0].cls, POLICY_CLASS_LISTED);
    assert_int_equal(policy_guard_transport(pol, POLICY_TCP, &h, 444, a, 1, gv), 0);
    assert_int_equal(gv[0].cls, POLICY_CLASS_RESERVED);
    /* a udp: allow IP rule opens a reserved address for UDP only */
    assert_int_equal(policy_guard_transport(pol, POLICY_UDP, &h, 443, a, 1, gv), 1);
    assert_int_equal(policy_guard_transport(pol, POLICY_TCP, &h, 443, a, 1, gv), 0);
}

/* allowAllDomains opens TCP only; report mode reports a UDP denial as it
 * reports TCP's (and never lifts the guard). */
static void test_modes(void **state)
{
    struct policy_host h;
    struct policy_judgment j;
    struct policy *p;
    char msg[512];
    const char *why;

    (void)state;
    assert_int_equal(policy_host_normalize("x.example", 9, &h, &why), 0);
    p = compile("{\"network\": {\"allowAllDomains\": true}}", "all.json", msg, sizeof(msg));
    assert_non_null(p);
    policy_verdict_transport(p, POLICY_UDP, &h, 53, NULL, 0, gv1, &j);
    assert_int_equal(j.verdict, POLICY_DENY);
    policy_verdict_transport(p, POLICY_TCP, &h, 53, NULL, 0, gv1, &j);
    assert_int_equal(j.verdict, POLICY_ALLOW);
    policy_free(p);

    p = compile("{\"network\": {\"mode\": \"report\"}}", "rep.json", msg, sizeof(msg));
    assert_non_null(p);
    policy_verdict_transport(p, POLICY_UDP, &h, 53, NULL, 0, gv1, &j);
    assert_int_equal(j.verdict, POLICY_DENY);
    assert_true(j.report_only);
    assert_int_equal(policy_host_normalize("127.0.0.1", 9, &h, &why), 0);
    policy_verdict_transport(p, POLICY_UDP, &h, 53, NULL, 0, gv1, &j);
    assert_int_equal(j.verdict, POLICY_DENY);
    assert_false(j.report_only); /* a denied class: the guard */
    policy_free(p);
}

struct bad {
    const char *list;
    const char *value;
    const char *why; /* a piece of the message */
};

static const struct bad bads[] = {
    {"allowedDomains", "udp:dns.example", "names its port"},
    {"allowedDomains", "udp:*:53", "bare '*'"},
    {"allowedDomains", "udp:", "empty pattern"},
    {"allowedDomains", "udp:a.example:0", "invalid port"},
    {"allowedDomains", "udp:a.example:53:*", "one port"},
    {"allowedDomains", "udp:*.com:53", "public suffix"},
    {"allowedDomains", "udp:udp:a.example:53", "udp: rule is written"},
    {"deniedDomains", "udp:a.example:99999", "invalid port"},
};

/* Each refusal is located: FILE:LINE:COL, the key and index, the value. */
static void test_refused(void **state)
{
    (void)state;
    for (size_t i = 0; i < NELEM(bads); i++) {
        char json[256], msg[512], want[128];
        struct policy *p;

        snprintf(json, sizeof(json), "{\"network\": {\n  \"%s\": [\"ok.example\",\n    \"%s\"]}}",
                 bads[i].list, bads[i].value);
        p = compile(json, "bad.json", msg, sizeof(msg));
        if (p != NULL) {
            policy_free(p);
            fail_msg("'%s' accepted", bads[i].value);
        }
        snprintf(want, sizeof(want), "bad.json:3:5: network.%s[1]: '%s': ", bads[i].list,
                 bads[i].value);
        if (strstr(msg, want) == NULL || strstr(msg, bads[i].why) == NULL)
            fail_msg("'%s': %s", bads[i].value, msg);
    }
}

/* What a UDP denial tells the user to add is a udp: rule. */
static void test_hint(void **state)
{
    struct policy_host h;
    struct policy_judgment j;
    char buf[400];
    const char *why;

    (void)state;
    assert_int_equal(policy_host_normalize("tcp.example", 11, &h, &why), 0);
    policy_verdict_transport(pol, POLICY_UDP, &h, 443, NULL, 0, gv1, &j);
    policy_deny_hint(pol, &h, 443, NULL, &j, NULL, buf, sizeof(buf));
    assert_non_null(strstr(buf, "'udp:tcp.example:443' to network.allowedDomains"));
    assert_int_equal(policy_host_normalize("bad.quic.example", 16, &h, &why), 0);
    policy_verdict_transport(pol, POLICY_UDP, &h, 443, NULL, 0, gv1, &j);
    policy_deny_hint(pol, &h, 443, NULL, &j, NULL, buf, sizeof(buf));
    assert_non_null(strstr(buf, "remove or narrow 'bad.quic.example'"));
}

/* policy_rule_parse: the udp: form and the plain form; '*' is port 0. */
static void test_parse(void **state)
{
    struct policy_rule r;
    char name[POLICY_HOST_MAX + 1];
    const char *why;

    (void)state;
    memset(&r, 0, sizeof(r));
    assert_int_equal(policy_rule_parse("udp:a.example:*", 0, &r, name, &why), 0);
    assert_true(r.udp);
    assert_int_equal(r.port, 0);
    assert_string_equal(name, "a.example");
    assert_int_equal(policy_rule_parse("udp:[2001:db8::1]:53", 0, &r, name, &why), 0);
    assert_true(r.udp);
    assert_int_equal(r.port, 53);
    assert_int_equal(r.kind, POLICY_RULE_CIDR);
    assert_int_equal(policy_rule_parse("udp:*", 1, &r, name, &why), 0);
    assert_int_equal(r.kind, POLICY_RULE_ANY);
    assert_int_equal(policy_rule_parse("a.example:53", 0, &r, name, &why), 0);
    assert_false(r.udp);
    /* other pattern keys do not take udp: */
    assert_int_equal(policy_pattern_parse("udp:a.example:53", 0, &r, name, &why), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),   cmocka_unit_test(test_tcp_unchanged),
        cmocka_unit_test(test_guard),   cmocka_unit_test(test_modes),
        cmocka_unit_test(test_refused), cmocka_unit_test(test_hint),
        cmocka_unit_test(test_parse),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
