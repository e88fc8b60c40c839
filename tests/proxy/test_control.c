/* tests/proxy/test_control.c - --control-fd (proxy/control.c): JSON lines,
 * each a complete settings document; valid ones become the policy for new
 * connections, invalid ones are reported with their line and ignored, the
 * managed file applies over every line. */
#define _GNU_SOURCE /* pipe2 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "policy/policy.h"
#include "proxy/proxy.h"

struct got {
    struct policy *p[8];
    size_t n;
};

static void on_policy(void *arg, struct policy *p)
{
    struct got *g = arg;

    if (g->n < 8)
        g->p[g->n++] = p;
    else
        policy_free(p);
}

static enum policy_verdict verdict(const struct policy *p, const char *host, uint16_t port)
{
    struct policy_host h;
    struct policy_decision d;
    const char *why;

    assert_int_equal(policy_host_normalize(host, strlen(host), &h, &why), 0);
    policy_decide(p, &h, port, &d);
    return d.verdict;
}

/* Feeds text through a pipe to a control on a fresh loop; report in *rep. */
static void feed(const char *managed, const char *text, struct got *g, char **rep, unsigned *ok,
                 unsigned *bad)
{
    uv_loop_t loop;
    int fds[2];
    size_t replen = 0;
    FILE *r = open_memstream(rep, &replen);
    struct proxy_control *c = NULL;

    assert_non_null(r);
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
    if (fds[0] < 3) { /* keep the test honest about fd >= 3 */
        int d = fcntl(fds[0], F_DUPFD_CLOEXEC, 3);
        close(fds[0]);
        fds[0] = d;
    }
    assert_true(write(fds[1], text, strlen(text)) == (ssize_t)strlen(text));
    close(fds[1]);
    assert_int_equal(proxy_control_open(&c, &loop, fds[0], managed, on_policy, g, r), 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    proxy_control_counts(c, ok, bad);
    proxy_control_close(c);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
    fclose(r);
}

static void test_lines(void **state)
{
    struct got g = {0};
    char *rep = NULL;
    unsigned ok = 0, bad = 0;

    (void)state;
    feed("/nonexistent/managed.json",
         "{\"network\": {\"allowedDomains\": [\"a.example\"]}}\n"
         "\n"
         "{\"network\": {\"allowedDomains\": [\"b.example\"]\n"   /* bad JSON */
         "{\"network\": {\"allowedDomain\": [\"c.example\"]}}\n"  /* unknown key */
         "{\"network\": {\"allowedDomains\": [\"*.com\"]}}\n"     /* bad pattern */
         "{\"network\": {\"allowedDomains\": [\"b.example\"], \"deniedDomains\": [\"x.b.example\"]},"
         " \"filesystem\": {\"denyRead\": [\"/etc\"]}}\r\n"
         "{\"network\": {\"allowedDomains\": [\"c.example\"]}}", /* no final newline */
         &g, &rep, &ok, &bad);
    assert_int_equal(ok, 3);
    assert_int_equal(bad, 3);
    assert_int_equal(g.n, 3);
    assert_int_equal(verdict(g.p[0], "a.example", 443), POLICY_ALLOW);
    assert_int_equal(verdict(g.p[0], "b.example", 443), POLICY_ASK);
    assert_int_equal(verdict(g.p[1], "a.example", 443), POLICY_ASK); /* replaced, not added */
    assert_int_equal(verdict(g.p[1], "b.example", 443), POLICY_ALLOW);
    assert_int_equal(verdict(g.p[1], "x.b.example", 443), POLICY_DENY);
    assert_int_equal(verdict(g.p[2], "c.example", 443), POLICY_ALLOW);
    if (strstr(rep, "control-fd line 3:") == NULL || strstr(rep, "control-fd line 4:") == NULL ||
        strstr(rep, "control-fd line 5:") == NULL || strstr(rep, "unknown key 'allowedDomain'") == NULL ||
        strstr(rep, "ignored, the current policy stays") == NULL)
        fail_msg("report:\n%s", rep);
    for (size_t i = 0; i < g.n; i++)
        policy_free(g.p[i]);
    free(rep);
}

/* The managed file applies over every line: its deny stays. */
static void test_managed_over_lines(void **state)
{
    char dir[] = "/tmp/sluice-test-control-XXXXXX", path[64];
    struct got g = {0};
    char *rep = NULL;
    unsigned ok = 0, bad = 0;
    FILE *f;

    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/managed.json", dir);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"network\": {\"deniedDomains\": [\"evil.example\"]}}\n", f);
    fclose(f);
    feed(path, "{\"network\": {\"allowedDomains\": [\"evil.example\", \"ok.example\"]}}\n", &g,
         &rep, &ok, &bad);
    assert_int_equal(ok, 1);
    assert_int_equal(g.n, 1);
    assert_int_equal(verdict(g.p[0], "evil.example", 443), POLICY_DENY);
    assert_int_equal(verdict(g.p[0], "ok.example", 443), POLICY_ALLOW);
    policy_free(g.p[0]);
    free(rep);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lines),
        cmocka_unit_test(test_managed_over_lines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
