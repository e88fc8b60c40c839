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

/* fd, moved to 3 or above (keeps the test honest about fd >= 3) */
static int above2(int fd)
{
    if (fd < 3) {
        int d = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        close(fd);
        fd = d;
    }
    assert_true(fd >= 3);
    return fd;
}

/* sluice run's credentials fixed at start (test_fixed_credentials) */
static const struct settings *fixed;

/* Runs a control on fd on a fresh loop to the end; report in *rep. */
static void feed_fd(const char *managed, int fd, struct got *g, char **rep, unsigned *ok,
                    unsigned *bad)
{
    uv_loop_t loop;
    size_t replen = 0;
    FILE *r = open_memstream(rep, &replen);
    struct proxy_control *c = NULL;

    assert_non_null(r);
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(proxy_control_open(&c, &loop, fd, managed, on_policy, g, r), 0);
    if (fixed != NULL)
        proxy_control_fix_credentials(c, fixed);
    uv_run(&loop, UV_RUN_DEFAULT);
    proxy_control_counts(c, ok, bad);
    proxy_control_close(c);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
    fclose(r);
}

/* Feeds text through a pipe to a control on a fresh loop; report in *rep. */
static void feed(const char *managed, const char *text, struct got *g, char **rep, unsigned *ok,
                 unsigned *bad)
{
    int fds[2];

    assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
    fds[0] = above2(fds[0]);
    assert_true(write(fds[1], text, strlen(text)) == (ssize_t)strlen(text));
    close(fds[1]);
    feed_fd(managed, fds[0], g, rep, ok, bad);
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

/* issue 24: in sluice run credentials are fixed at start. A line without
 * them keeps the start's (entry 0 still injects at api.example.com, not
 * at the line's new host); a line repeating them is taken; a line that
 * moves injectHosts, adds an entry or drops tlsTerminate is refused. */
static void test_fixed_credentials(void **state)
{
#define NET "\"network\": {\"allowedDomains\": [\"api.example\", \"b.example\"], \"tlsTerminate\": {}}"
#define CRED(H) "\"credentials\": {\"envVars\": [{\"name\": \"TOKEN_A\", \"mode\": \"mask\", " \
                "\"injectHosts\": [\"" H "\"]}]}"
    static const char start[] = "{" NET ", " CRED("api.example") "}";
    struct settings s;
    struct settings_error err;
    struct got g = {0};
    char *rep = NULL;
    unsigned ok = 0, bad = 0;
    struct policy_host api, b;
    const char *why;

    (void)state;
    settings_init(&s);
    assert_int_equal(settings_apply_buffer(&s, "start.json", start, strlen(start), &err), 0);
    fixed = &s;
    feed("/nonexistent/managed.json",
         "{" NET "}\n"                                            /* left out: kept */
         "{" NET ", " CRED("api.example") "}\n"                    /* repeated: taken */
         "{" NET ", " CRED("b.example") "}\n"                      /* moved: refused */
         "{" NET ", \"credentials\": {}}\n"                        /* dropped: refused */
         "{\"network\": {\"allowedDomains\": [\"api.example\"]}}\n", /* no tlsTerminate: refused */
         &g, &rep, &ok, &bad);
    fixed = NULL;
    assert_int_equal(ok, 2);
    assert_int_equal(bad, 3);
    assert_int_equal(policy_host_normalize("api.example", 11, &api, &why), 0);
    assert_int_equal(policy_host_normalize("b.example", 9, &b, &why), 0);
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(policy_cred_count(g.p[i]), 1);
        assert_int_equal(policy_cred_injects(g.p[i], 0, &api, 443), 1);
        assert_int_equal(policy_cred_injects(g.p[i], 0, &b, 443), 0);
    }
    if (strstr(rep, "credentials: fixed when the run starts") == NULL ||
        strstr(rep, "needs network.tlsTerminate") == NULL)
        fail_msg("report:\n%s", rep);
    for (size_t i = 0; i < g.n; i++)
        policy_free(g.p[i]);
    free(rep);
    settings_free(&s);
#undef NET
#undef CRED
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

/* A descriptor epoll cannot watch (a regular file) is read to its end, as
 * the reference reads any readable descriptor; it used to abort (SIGABRT in
 * libuv's epoll_ctl). The file is bigger than one read, with a line across
 * the boundary, and is read from where the descriptor stands. */
static void test_regular_file(void **state)
{
    char path[] = "/tmp/sluice-test-control-XXXXXX";
    const char *skip = "{\"network\": {\"allowedDomains\": [\"skipped.example\"]}}\n";
    struct got g = {0};
    char *rep = NULL;
    unsigned ok = 0, bad = 0;
    int fd = mkstemp(path);
    FILE *f;

    (void)state;
    assert_true(fd >= 0);
    close(fd);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs(skip, f);
    fputs("{\"network\": {\"allowedDomains\": [\"a.example\"]}}\n", f);
    for (int i = 0; i < 20000; i++) /* blank lines: ~100 KiB, more than one read */
        fputs("     \n", f);
    fputs("{\"network\": {\"allowedDomain\": []}}\n", f);
    fputs("{\"network\": {\"allowedDomains\": [\"b.example\"]}}", f);
    fclose(f);
    fd = above2(open(path, O_RDONLY | O_CLOEXEC));
    assert_true(lseek(fd, (off_t)strlen(skip), SEEK_SET) == (off_t)strlen(skip));
    feed_fd("/nonexistent/managed.json", fd, &g, &rep, &ok, &bad);
    assert_int_equal(ok, 2);
    assert_int_equal(bad, 1);
    assert_int_equal(g.n, 2);
    assert_int_equal(verdict(g.p[0], "a.example", 443), POLICY_ALLOW);
    assert_int_equal(verdict(g.p[0], "skipped.example", 443), POLICY_ASK);
    assert_int_equal(verdict(g.p[1], "b.example", 443), POLICY_ALLOW);
    if (strstr(rep, "control-fd line 20002:") == NULL)
        fail_msg("report:\n%s", rep);
    for (size_t i = 0; i < g.n; i++)
        policy_free(g.p[i]);
    free(rep);
    unlink(path);
}

/* /dev/null cannot be polled either: read, empty, no line, no abort. */
static void test_dev_null(void **state)
{
    struct got g = {0};
    char *rep = NULL;
    unsigned ok = 1, bad = 1;

    (void)state;
    feed_fd("/nonexistent/managed.json", above2(open("/dev/null", O_RDONLY | O_CLOEXEC)), &g,
            &rep, &ok, &bad);
    assert_int_equal(ok, 0);
    assert_int_equal(bad, 0);
    assert_int_equal(g.n, 0);
    assert_string_equal(rep, "");
    free(rep);
}

/* Closed while a read of a file may be in flight: freed once, no leak. */
static void test_close_file_early(void **state)
{
    uv_loop_t loop;
    struct got g = {0};
    struct proxy_control *c = NULL;
    int fd = above2(open("/dev/zero", O_RDONLY | O_CLOEXEC));

    (void)state;
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(proxy_control_open(&c, &loop, fd, "/nonexistent/managed.json", on_policy,
                                        &g, NULL),
                     0);
    proxy_control_close(c);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
    assert_int_equal(g.n, 0);
}

/* Not open: an error, no abort. */
static void test_bad_fd(void **state)
{
    uv_loop_t loop;
    struct got g = {0};
    struct proxy_control *c = NULL;

    (void)state;
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_true(proxy_control_open(&c, &loop, 987, NULL, on_policy, &g, NULL) < 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lines),
        cmocka_unit_test(test_fixed_credentials),
        cmocka_unit_test(test_managed_over_lines),
        cmocka_unit_test(test_regular_file),
        cmocka_unit_test(test_dev_null),
        cmocka_unit_test(test_close_file_early),
        cmocka_unit_test(test_bad_fd),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
