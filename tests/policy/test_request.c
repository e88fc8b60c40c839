/* tests/policy/test_request.c - request rules (policy/request.c): the path
 * normaliser against hostile targets, the segment glob matcher, and the
 * narrowing step of the one verdict (policy_decide_request): rules only
 * narrow, deny-first, a connection without a request line refused on a
 * host with rules, report mode, the rule and source named.
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
#include <unistd.h>

#include "policy/policy.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* ------------------------------------------------------------------------ */
/* The normaliser                                                            */

struct norm_row {
    const char *in;
    const char *out; /* NULL: refused as ambiguous */
    const char *why; /* a piece of the reason when refused */
};

static const struct norm_row norm_rows[] = {
    {"/", "/", NULL},
    {"/a/b", "/a/b", NULL},
    {"/a/b/", "/a/b/", NULL},
    {"/a/b?x=1", "/a/b", NULL},
    {"/a/b?x=/../../..", "/a/b", NULL},
    {"/?", "/", NULL},
    {"/a/./b", "/a/b", NULL},
    {"/a/.", "/a/", NULL},
    {"/a/b/..", "/a/", NULL},
    {"/a/../b", "/b", NULL},
    {"/a/b/../../c", "/c", NULL},
    {"/./a", "/a", NULL},
    {"/..", NULL, "climbs above the root"},
    {"/../a", NULL, "climbs above the root"},
    {"/a/../../b", NULL, "climbs above the root"},
    {"/a/%2e%2e/b", "/b", NULL},
    {"/a/%2E%2e/%2e%2E/b", NULL, "climbs above the root"},
    {"/a/%2e/b", "/a/b", NULL},
    {"/.%2e/b", NULL, "climbs above the root"},
    {"/%41%42c", "/ABc", NULL},
    {"/%7e%5F%2d%2E", NULL, "ending in '.'"},
    {"/%7euser", "/~user", NULL},
    {"/a%3ab", "/a%3Ab", NULL},
    {"/a%3Ab", "/a%3Ab", NULL},
    {"/a%20b", "/a%20b", NULL},
    {"/caf%C3%A9", "/caf%C3%A9", NULL},
    {"/a%2Fb", NULL, "encoded '/'"},
    {"/a%2fb", NULL, "encoded '/'"},
    {"/a%5Cb", NULL, "encoded '\\'"},
    {"/a%5cb", NULL, "encoded '\\'"},
    {"/a\\b", NULL, "'\\'"},
    {"/a%00b", NULL, "NUL"},
    {"/a%", NULL, "two hex digits"},
    {"/a%4", NULL, "two hex digits"},
    {"/a%zz", NULL, "two hex digits"},
    {"/%C0%AE%C0%AE/x", NULL, "overlong"},
    {"/%c0%af", NULL, "overlong"},
    {"/%C1%9C", NULL, "overlong"},
    {"/%E0%80%AE", NULL, "overlong"},
    {"/%F0%80%80%AE", NULL, "overlong"},
    {"/%E0%A0%80", "/%E0%A0%80", NULL}, /* a real 3-byte form */
    {"//a", NULL, "empty segment"},
    {"/a//b", NULL, "empty segment"},
    {"/a/b//", NULL, "empty segment"},
    {"/a./b", NULL, "ending in '.'"},
    {"/a/b.", NULL, "ending in '.'"},
    {"/a/.../b", NULL, "ending in '.'"},
    {"/a/b.c/d", "/a/b.c/d", NULL},
    {"/a/.b", "/a/.b", NULL},
    {"/a b", NULL, "control byte, space"},
    {"/a\tb", NULL, "control byte, space"},
    {"/a\x7f", NULL, "control byte, space"},
    {"/caf\xc3\xa9", NULL, "non-ASCII"},
    {"/a#b", NULL, "'#'"},
    {"", NULL, "origin-form"},
    {"*", NULL, "origin-form"},
    {"a/b", NULL, "origin-form"},
    {"?x", NULL, "origin-form"},
    {"http://h/a", NULL, "origin-form"},
};

static void test_normalize_table(void **state)
{
    int failed = 0;

    (void)state;
    for (size_t i = 0; i < NELEM(norm_rows); i++) {
        const struct norm_row *r = &norm_rows[i];
        char out[128];
        size_t n = 0;
        const char *why = NULL;
        int rc = policy_path_normalize(r->in, strlen(r->in), out, sizeof(out), &n, &why);
        if (r->out != NULL && (rc != 0 || strcmp(out, r->out) != 0 || n != strlen(r->out))) {
            print_error("row %zu '%s': want '%s', got rc %d '%s' (%s)\n", i, r->in, r->out, rc,
                        rc == 0 ? out : "", why != NULL ? why : "");
            failed++;
        } else if (r->out == NULL &&
                   (rc != -EINVAL || why == NULL || strstr(why, r->why) == NULL)) {
            print_error("row %zu '%s': want refused (%s), got rc %d '%s' (%s)\n", i, r->in, r->why,
                        rc, rc == 0 ? out : "", why != NULL ? why : "");
            failed++;
        } else if (r->out != NULL) {
            /* normalising the output again changes nothing */
            char again[128];
            size_t n2 = 0;
            if (policy_path_normalize(out, n, again, sizeof(again), &n2, &why) != 0 ||
                strcmp(again, out) != 0) {
                print_error("row %zu '%s': '%s' is not a fixed point\n", i, r->in, out);
                failed++;
            }
        }
    }
    assert_int_equal(failed, 0);
}

/* An embedded NUL (a C string would stop there) is refused, and the length
 * given is the only bound: no read past it. */
static void test_normalize_nul_and_bounds(void **state)
{
    char out[64];
    size_t n = 0;
    const char *why = NULL;
    char *p;

    (void)state;
    assert_int_equal(policy_path_normalize("/a\0/../../etc", 13, out, sizeof(out), &n, &why),
                     -EINVAL);
    assert_non_null(strstr(why, "control byte"));
    /* "/ab%" cut after "/a": fine */
    p = malloc(2);
    assert_non_null(p);
    memcpy(p, "/a", 2);
    assert_int_equal(policy_path_normalize(p, 2, out, sizeof(out), &n, &why), 0);
    assert_string_equal(out, "/a");
    free(p);
    /* an escape cut at the end of the buffer */
    p = malloc(3);
    assert_non_null(p);
    memcpy(p, "/a%", 3);
    assert_int_equal(policy_path_normalize(p, 3, out, sizeof(out), &n, &why), -EINVAL);
    free(p);
    /* out too small for the input: refused, nothing written past cap */
    assert_int_equal(policy_path_normalize("/abcdef", 7, out, 4, &n, &why), -EINVAL);
}

/* Overlong targets: up to POLICY_PATH_MAX bytes judged, beyond refused. */
static void test_normalize_overlong(void **state)
{
    size_t big = POLICY_PATH_MAX + 64;
    char *in = malloc(big), *out = malloc(big + 1);
    size_t n = 0;
    const char *why = NULL;

    (void)state;
    assert_non_null(in);
    assert_non_null(out);
    for (size_t i = 0; i < big; i++)
        in[i] = i % 2 == 0 ? '/' : 'a';
    assert_int_equal(policy_path_normalize(in, POLICY_PATH_MAX, out, big + 1, &n, &why), 0);
    assert_int_equal(n, POLICY_PATH_MAX);
    assert_int_equal(policy_path_normalize(in, POLICY_PATH_MAX + 2, out, big + 1, &n, &why),
                     -EINVAL);
    assert_non_null(strstr(why, "longer"));
    /* many '..' that stay inside: /a/a/a.../../.. resolves without climbing */
    free(in);
    free(out);
}

/* ------------------------------------------------------------------------ */
/* Globs                                                                     */

struct glob_row {
    const char *glob, *path;
    int match;
};

static const struct glob_row glob_rows[] = {
    {"/ORG/**", "/ORG", 1},
    {"/ORG/**", "/ORG/", 1},
    {"/ORG/**", "/ORG/r.git/git-receive-pack", 1},
    {"/ORG/**", "/ORGX/r", 0},
    {"/ORG/**", "/org/r", 0}, /* case-sensitive */
    {"/ORG/**", "/", 0},
    {"/**", "/", 1},
    {"/**", "/a/b/c", 1},
    {"/*", "/", 1},
    {"/*", "/a", 1},
    {"/*", "/a/b", 0},
    {"/*/*/info/refs", "/o/r.git/info/refs", 1},
    {"/*/*/info/refs", "/o/info/refs", 0},
    {"/*/*/info/refs", "/a/b/c/info/refs", 0},
    {"/**/info/refs", "/info/refs", 1},
    {"/**/info/refs", "/a/b/c/info/refs", 1},
    {"/**/info/refs", "/a/b/c/info/refsx", 0},
    {"/a/**/b/**/c", "/a/b/c", 1},
    {"/a/**/b/**/c", "/a/x/b/y/z/c", 1},
    {"/a/**/b/**/c", "/a/x/c/y/b", 0},
    {"/a/**/**/b", "/a/b", 1},
    {"/a/**/*", "/a", 0},
    {"/a/**/*", "/a/x", 1},
    {"/a/b", "/a/b/", 0},
    {"/a/b/", "/a/b/", 1},
    {"/a/*/", "/a/b/", 1},
    {"/a/b", "/a/b", 1},
    {"/a/b", "/a/bc", 0},
    {"/a/b", "/a", 0},
};

static void test_glob_table(void **state)
{
    int failed = 0;

    (void)state;
    for (size_t i = 0; i < NELEM(glob_rows); i++) {
        const struct glob_row *r = &glob_rows[i];
        int got = policy_path_glob_match(r->glob, strlen(r->glob), r->path, strlen(r->path));
        if (got != r->match) {
            print_error("glob '%s' path '%s': want %d got %d\n", r->glob, r->path, r->match, got);
            failed++;
        }
    }
    assert_int_equal(failed, 0);
}

/* Many '**' against a long path: the matcher backtracks only to the last
 * '**', so this answers (a naive recursion would not). */
static void test_glob_many_stars(void **state)
{
    char glob[400] = "", path[4200] = "";
    size_t g = 0, p = 0;

    (void)state;
    for (int i = 0; i < 60; i++)
        g += (size_t)snprintf(glob + g, sizeof(glob) - g, "/**/a");
    for (int i = 0; i < 2000; i++)
        p += (size_t)snprintf(path + p, sizeof(path) - p, "/b");
    assert_int_equal(policy_path_glob_match(glob, g, path, p), 0);
    p += (size_t)snprintf(path + p, sizeof(path) - p, "/a");
    assert_int_equal(policy_path_glob_match(glob, g, path, p), 0); /* one 'a', 60 wanted */
}

static void test_glob_check(void **state)
{
    static const struct {
        const char *glob;
        const char *why; /* NULL: accepted */
    } rows[] = {
        {"/", NULL},
        {"/ORG/**", NULL},
        {"/*/*/info/refs", NULL},
        {"/a/%7e", NULL},
        {"ORG/**", "start with '/'"},
        {"", "start with '/'"},
        {"/a*", "whole segments"},
        {"/***", "whole segments"},
        {"/a/*b/c", "whole segments"},
        {"/a?b", "query"},
        {"/a#b", "'#'"},
        {"/a/../..", "above the root"},
        {"/a%2Fb", "encoded '/'"},
        {"/a//b", "empty segment"},
        {"/a b", "space"},
    };

    (void)state;
    for (size_t i = 0; i < NELEM(rows); i++) {
        const char *why = NULL;
        int rc = policy_path_glob_check(rows[i].glob, &why);
        if (rows[i].why == NULL) {
            if (rc != 0)
                print_error("glob '%s': %s\n", rows[i].glob, why);
            assert_int_equal(rc, 0);
        } else {
            if (rc == 0 || why == NULL || strstr(why, rows[i].why) == NULL)
                print_error("glob '%s': want '%s', got %d (%s)\n", rows[i].glob, rows[i].why, rc,
                            why != NULL ? why : "");
            assert_int_equal(rc, -EINVAL);
            assert_non_null(strstr(why, rows[i].why));
        }
    }
}

/* ------------------------------------------------------------------------ */
/* The verdict                                                               */

/* Line numbers matter: the source names rules by FILE:LINE. */
static const char rules_json[] =
    "{\"network\": {\n"
    "  \"allowedDomains\": [\"github.com\", \"*.example.com\", \"plain.test\", \"10.0.0.0/8\"],\n"
    "  \"deniedDomains\": [\"bad.example.com\"],\n"
    "  \"requestRules\": [\n"
    "    {\"host\": \"github.com\", \"method\": [\"GET\", \"POST\"],\n" /* 5 */
    "     \"path\": [\"/*/*/info/refs\", \"/*/*/git-upload-pack\"], \"action\": \"allow\"},\n"
    "    {\"host\": \"github.com\", \"method\": \"POST\", \"path\": \"/ORG/**\", \"action\": "
    "\"allow\"},\n"                                                                         /* 7 */
    "    {\"host\": \"github.com\", \"path\": \"/ORG/secret/**\", \"action\": \"deny\"},\n" /* 8 */
    "    {\"host\": \"*.example.com\", \"method\": \"GET\", \"action\": \"allow\"},\n"      /* 9 */
    "    {\"host\": \"bad.example.com\", \"action\": \"allow\"},\n"                         /* 10 */
    "    {\"host\": \"10.1.0.0/16:8080\", \"path\": \"/api/**\", \"action\": \"allow\"},\n" /* 11 */
    "    {\"host\": \"ask.test\", \"action\": \"deny\", \"method\": \"PUT\"}\n"             /* 12 */
    "  ]\n"
    "}}\n";

static struct policy *compile(const char *json, const char *mode)
{
    struct settings s;
    struct settings_error err;
    struct policy *p = NULL;
    size_t cap = strlen(json) + 64;
    char *buf = malloc(cap);

    assert_non_null(buf);
    snprintf(buf, cap, "%s", json);
    if (mode != NULL) {
        char *end = strstr(buf, "\n}}\n");
        assert_non_null(end);
        snprintf(end, cap - (size_t)(end - buf), ",\n  \"mode\": \"%s\"\n}}\n", mode);
    }
    settings_init(&s);
    if (settings_apply_buffer(&s, "rules.json", buf, strlen(buf), &err) < 0 ||
        policy_compile(&s, &p, &err) < 0)
        print_error("%s\n", err.msg);
    settings_free(&s);
    free(buf);
    assert_non_null(p);
    return p;
}

struct vrow {
    const char *host;
    uint16_t port;
    const char *method; /* NULL: no request line (a tunnel) */
    const char *target;
    enum policy_verdict verdict;
    enum policy_origin origin;
    int rule_line;      /* line of the deciding rule, 0: none */
    const char *reason; /* a piece of the reason */
};

static const struct vrow vrows[] = {
    /* the GitHub example */
    {"github.com", 80, "GET", "/o/r.git/info/refs?service=git-upload-pack", POLICY_ALLOW,
     POLICY_BY_RULE, 2, "allowed by request rule 'allow GET,POST github.com"},
    {"github.com", 80, "POST", "/o/r.git/git-upload-pack", POLICY_ALLOW, POLICY_BY_RULE, 2, NULL},
    {"github.com", 80, "POST", "/o/r.git/git-receive-pack", POLICY_DENY, POLICY_BY_REQUEST, 0,
     "matches no allow rule"},
    {"github.com", 80, "POST", "/ORG/r.git/git-receive-pack", POLICY_ALLOW, POLICY_BY_RULE, 2,
     "allow POST github.com /ORG/**"},
    {"github.com", 80, "POST", "/ORG/secret/r.git/git-receive-pack", POLICY_DENY, POLICY_BY_REQUEST,
     8, "denied by request rule 'deny * github.com /ORG/secret/**'"},
    {"github.com", 80, "GET", "/ORG/secret/r.git/info/refs", POLICY_DENY, POLICY_BY_REQUEST, 8,
     NULL},
    {"github.com", 80, "post", "/ORG/r.git/git-receive-pack", POLICY_DENY, POLICY_BY_REQUEST, 0,
     "no allow rule"}, /* methods are case-sensitive */
    {"github.com", 80, "POST", "/ORG/../o/r.git/git-receive-pack", POLICY_DENY, POLICY_BY_REQUEST,
     0, "no allow rule"},
    {"github.com", 80, "POST", "/ORG%2Fx/r.git/git-receive-pack", POLICY_DENY, POLICY_BY_REQUEST, 0,
     "ambiguous request target"},
    {"github.com", 80, "POST", "/ORG/secret./x", POLICY_DENY, POLICY_BY_REQUEST, 0, "ambiguous"},
    /* tunnels to a host with rules: refused, whatever the port */
    {"github.com", 443, NULL, NULL, POLICY_DENY, POLICY_BY_REQUEST, 0, "TLS termination"},
    {"github.com", 22, NULL, NULL, POLICY_DENY, POLICY_BY_REQUEST, 0, "TLS termination"},
    /* a host no rule names: the domain lists alone */
    {"plain.test", 443, NULL, NULL, POLICY_ALLOW, POLICY_BY_RULE, 2, NULL},
    {"plain.test", 80, "DELETE", "/a//b/../..", POLICY_ALLOW, POLICY_BY_RULE, 2, NULL},
    {"api.github.com", 443, NULL, NULL, POLICY_ASK, POLICY_BY_NO_RULE, 0, NULL},
    /* wildcard host rules: subdomains only */
    {"www.example.com", 80, "GET", "/x", POLICY_ALLOW, POLICY_BY_RULE, 2, NULL},
    {"www.example.com", 80, "POST", "/x", POLICY_DENY, POLICY_BY_REQUEST, 0, "no allow rule"},
    {"example.com", 80, "POST", "/x", POLICY_ASK, POLICY_BY_NO_RULE, 0, NULL},
    /* rules only narrow: a host the domain lists deny stays denied */
    {"bad.example.com", 80, "GET", "/x", POLICY_DENY, POLICY_BY_RULE, 3, NULL},
    /* CIDR host with a port */
    {"10.1.2.3", 8080, "GET", "/api/v1", POLICY_ALLOW, POLICY_BY_RULE, 2, NULL},
    {"10.1.2.3", 8080, "GET", "/admin", POLICY_DENY, POLICY_BY_REQUEST, 0, "no allow rule"},
    {"10.1.2.3", 8081, "GET", "/admin", POLICY_ALLOW, POLICY_BY_RULE, 2, NULL},
    {"10.2.0.1", 8080, "GET", "/admin", POLICY_ALLOW, POLICY_BY_RULE, 2, NULL},
    /* no domain rule (ask): the request rules still narrow */
    {"ask.test", 80, "PUT", "/x", POLICY_DENY, POLICY_BY_REQUEST, 12, NULL},
    {"ask.test", 80, "GET", "/x", POLICY_DENY, POLICY_BY_REQUEST, 0, "no allow rule"},
};

static void check_rows(struct policy *p, int report)
{
    int failed = 0;

    for (size_t i = 0; i < NELEM(vrows); i++) {
        const struct vrow *r = &vrows[i];
        struct policy_host h;
        struct policy_request rq;
        struct policy_judgment j;
        struct policy_guard_verdict gv[1];
        const char *why;
        int line;

        assert_int_equal(policy_host_normalize(r->host, strlen(r->host), &h, &why), 0);
        if (r->method != NULL) {
            rq.method = r->method;
            rq.method_len = strlen(r->method);
            rq.target = r->target;
            rq.target_len = strlen(r->target);
        }
        policy_verdict_request(p, &h, r->port, r->method != NULL ? &rq : NULL, NULL, 0, gv, &j);
        line = j.rule != NULL ? (int)j.rule->line : 0;
        if (j.verdict != r->verdict || j.origin != r->origin || line != r->rule_line ||
            (r->reason != NULL && strstr(j.reason, r->reason) == NULL) ||
            (report && j.report_only != (r->verdict != POLICY_ALLOW))) {
            print_error("row %zu %s:%u %s %s: want %d/%d line %d '%s', got %d/%d line %d '%s' "
                        "report_only %d\n",
                        i, r->host, r->port, r->method ? r->method : "-",
                        r->target ? r->target : "-", r->verdict, r->origin, r->rule_line,
                        r->reason ? r->reason : "", j.verdict, j.origin, line, j.reason,
                        j.report_only);
            failed++;
        }
        if (j.origin == POLICY_BY_REQUEST && j.rule != NULL &&
            (j.rule->list_id != POLICY_LIST_REQUEST ||
             strstr(j.rule_text, "network.requestRules[") == NULL ||
             strncmp(j.source, "rules.json:", 11) != 0)) {
            print_error("row %zu: rule text '%s' source '%s'\n", i, j.rule_text, j.source);
            failed++;
        }
    }
    assert_int_equal(failed, 0);
}

static void test_verdict_rows(void **state)
{
    struct policy *p = compile(rules_json, NULL);

    (void)state;
    assert_int_equal(policy_request_rule_count(p), 7);
    check_rows(p, 0);
    policy_free(p);
}

/* Report mode lets every request-rule denial (and the domain lists' deny and
 * ask) through as would_deny; nothing else changes in the rows. */
static void test_verdict_report(void **state)
{
    struct policy *p = compile(rules_json, "report");

    (void)state;
    check_rows(p, 1);
    policy_free(p);
}

/* A tunnel sluice terminates (a request line whose method is NULL) is
 * decided by the domain lists alone on a ruled host, where one it cannot
 * read (NULL) is refused; an unmatched host is still not allowed. */
static void test_terminated_tunnel(void **state)
{
    struct policy *p = compile(rules_json, NULL);
    struct policy_decision a, b;
    struct policy_request tunnel;
    struct policy_host h;
    const char *why;

    (void)state;
    memset(&tunnel, 0, sizeof(tunnel));
    assert_int_equal(policy_host_normalize("github.com", 10, &h, &why), 0);
    policy_decide_request(p, &h, 443, NULL, &a);
    assert_int_equal(a.verdict, POLICY_DENY);
    assert_non_null(strstr(a.reason, "has request rules"));
    policy_decide_request(p, &h, 443, &tunnel, &b);
    assert_int_equal(b.verdict, POLICY_ALLOW);
    assert_int_not_equal(b.origin, POLICY_BY_REQUEST);
    assert_int_equal(policy_host_normalize("nowhere.example", 15, &h, &why), 0);
    policy_decide_request(p, &h, 443, &tunnel, &b);
    assert_int_not_equal(b.verdict, POLICY_ALLOW); /* unmatched: ask, or deny */
    policy_free(p);
}

/* policy_decide is policy_decide_request without a request line; without
 * request rules a request line changes nothing. */
static void test_decide_same(void **state)
{
    static const char plain[] = "{\"network\": {\"allowedDomains\": [\"github.com\"]}}\n";
    struct policy *p = compile(rules_json, NULL), *q = compile(plain, NULL);
    struct policy_decision a, b;
    struct policy_host h;
    struct policy_request rq = {"POST", 4, "/x/../..", 8};
    const char *why;

    (void)state;
    assert_int_equal(policy_host_normalize("github.com", 10, &h, &why), 0);
    policy_decide(p, &h, 443, &a);
    policy_decide_request(p, &h, 443, NULL, &b);
    assert_int_equal(a.verdict, b.verdict);
    assert_int_equal(a.origin, b.origin);
    assert_string_equal(a.reason, b.reason);
    policy_decide(q, &h, 80, &a);
    policy_decide_request(q, &h, 80, &rq, &b);
    assert_int_equal(a.verdict, POLICY_ALLOW);
    assert_int_equal(b.verdict, POLICY_ALLOW);
    assert_ptr_equal(a.rule, b.rule);
    assert_int_equal(policy_request_rule_count(q), 0);
    policy_free(p);
    policy_free(q);
}

/* The transparent resolver still answers a name with rules (a port-less
 * deny rule alone refuses at DNS); its connect() is refused by the verdict. */
static void test_dns_answers_ruled_host(void **state)
{
    struct policy *p = compile(rules_json, NULL);
    struct policy_judgment j;
    struct policy_host h;
    const char *why;

    (void)state;
    assert_int_equal(policy_host_normalize("github.com", 10, &h, &why), 0);
    assert_int_equal(policy_dns_refused(p, &h, &j), 0);
    assert_int_equal(j.verdict, POLICY_DENY);
    assert_int_equal(j.origin, POLICY_BY_REQUEST);
    policy_free(p);
}

/* Report mode does not lift request rules the managed file wrote (as it
 * does not lift its deny rules); the user's are lifted. */
static void test_report_managed(void **state)
{
    static const char managed[] =
        "{\"network\": {\"mode\": \"report\", \"allowedDomains\": [\"github.com\"],\n"
        " \"requestRules\": [{\"host\": \"github.com\", \"method\": \"GET\", "
        "\"action\": \"allow\"}]}}\n";
    char path[] = "/tmp/sluice-test-request-XXXXXX";
    struct settings s;
    struct settings_error err;
    struct policy *p = NULL;
    struct policy_host h;
    struct policy_request rq = {"POST", 4, "/x", 2};
    struct policy_judgment j;
    struct policy_guard_verdict gv[1];
    const char *why;
    int fd = mkstemp(path);

    (void)state;
    assert_true(fd >= 0);
    assert_int_equal(write(fd, managed, sizeof(managed) - 1), (ssize_t)(sizeof(managed) - 1));
    close(fd);
    settings_init(&s);
    if (settings_apply_managed(&s, path, &err) < 0 || policy_compile(&s, &p, &err) < 0)
        print_error("%s\n", err.msg);
    unlink(path);
    settings_free(&s);
    assert_non_null(p);
    assert_int_equal(policy_mode_report(p), 1);
    assert_int_equal(policy_host_normalize("github.com", 10, &h, &why), 0);
    policy_verdict_request(p, &h, 80, &rq, NULL, 0, gv, &j);
    assert_int_equal(j.verdict, POLICY_DENY);
    assert_int_equal(j.origin, POLICY_BY_REQUEST);
    assert_int_equal(j.report_only, 0); /* the managed file's rule: enforced */
    policy_verdict_request(p, &h, 443, NULL, NULL, 0, gv, &j);
    assert_int_equal(j.verdict, POLICY_DENY);
    assert_int_equal(j.report_only, 0);
    policy_free(p);
}

/* network.tlsTerminate's scope: "all" terminates every host not in
 * excludeDomains, "needed" only the hosts that need it (request rules);
 * without tlsTerminate nothing is. */
static void test_tls_scope(void **state)
{
    static const char base[] =
        "{\"network\": {\n"
        "  \"allowedDomains\": [\"*.example.com\", \"plain.test\"],\n"
        "  \"requestRules\": [{\"host\": \"api.example.com\", \"method\": \"GET\", "
        "\"action\": \"allow\"}],\n"
        "  \"tlsTerminate\": {\"caCertPath\": \"/c.pem\", \"caKeyPath\": \"/c.key\", "
        "\"excludeDomains\": [\"pin.example.com\"]%s}\n"
        "}}\n";
    static const struct {
        const char *host;
        int all, needed, ruled;
    } rows[] = {
        {"api.example.com", 1, 1, 1},
        {"www.example.com", 1, 0, 0},
        {"plain.test", 1, 0, 0},
        {"pin.example.com", 0, 0, 0},
    };
    char json[1024];
    struct policy *all, *needed, *off;
    struct policy_host h;
    const char *why;

    (void)state;
    snprintf(json, sizeof(json), base, "");
    all = compile(json, NULL);
    snprintf(json, sizeof(json), base, ", \"scope\": \"needed\"");
    needed = compile(json, NULL);
    off = compile(rules_json, NULL);
    assert_int_equal(policy_tls_opts(needed)->scope_needed, 1);
    assert_int_equal(policy_tls_opts(all)->scope_needed, 0);
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        assert_int_equal(policy_host_normalize(rows[i].host, strlen(rows[i].host), &h, &why), 0);
        if (policy_tls_terminates(all, &h, 443) != rows[i].all ||
            policy_tls_terminates(needed, &h, 443) != rows[i].needed)
            print_error("row %zu: %s\n", i, rows[i].host);
        assert_int_equal(policy_tls_terminates(all, &h, 443), rows[i].all);
        assert_int_equal(policy_tls_terminates(needed, &h, 443), rows[i].needed);
        assert_int_equal(policy_tls_needed(needed, &h, 443), rows[i].ruled);
        assert_int_equal(policy_tls_terminates(off, &h, 443), 0);
    }
    policy_free(all);
    policy_free(needed);
    policy_free(off);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_normalize_table),    cmocka_unit_test(test_normalize_nul_and_bounds),
        cmocka_unit_test(test_normalize_overlong), cmocka_unit_test(test_glob_table),
        cmocka_unit_test(test_glob_many_stars),    cmocka_unit_test(test_glob_check),
        cmocka_unit_test(test_verdict_rows),       cmocka_unit_test(test_verdict_report),
        cmocka_unit_test(test_decide_same),
        cmocka_unit_test(test_terminated_tunnel),        cmocka_unit_test(test_dns_answers_ruled_host),
        cmocka_unit_test(test_report_managed),
        cmocka_unit_test(test_tls_scope),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
