/* tests/proxy/test_gw.c - credentials.headers' table (proxy/gw.c) and the
 * helper runner (proxy/helper.c): values read from files and variables
 * (trimmed, refused when they are no value, the message never holding
 * one), a helper's output, its failures (exit status, a signal, a timeout,
 * output over the limit, a program that cannot start), that it inherits
 * no descriptor but its pipe, and the lifetime rules on a clock the test
 * sets (a value used until its ttl, never after; a failed refresh keeps
 * the old value only until then; a reload carries a helper's value).
 */
#define _GNU_SOURCE
#include <setjmp.h> /* cmocka needs these first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proxy/gw.h"
#include "proxy/helper.h"
#include "tests/fixture/loop.h"

#define TOKEN "tok_0123456789abcdefXYZ"

static char dir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/sluice-test-gw.XXXXXX");
    return mkdtemp(dir) != NULL ? 0 : -1;
}

static int teardown(void **state)
{
    char cmd[128];

    (void)state;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void write_file(const char *name, const char *text, mode_t mode)
{
    char p[128];
    FILE *f;

    snprintf(p, sizeof(p), "%s/%s", dir, name);
    f = fopen(p, "w");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(chmod(p, mode), 0);
}

/* The table of one settings text (%s: the test directory). */
static int table(const char *json_fmt, struct proxy_gw **g, struct settings_error *err)
{
    struct settings s;
    char json[20000];
    size_t o = 0;
    int rc;

    /* each "%s" is the test directory */
    for (const char *p = json_fmt; *p != '\0' && o + sizeof(dir) + 1 < sizeof(json); p++) {
        if (p[0] == '%' && p[1] == 's') {
            o += (size_t)snprintf(json + o, sizeof(json) - o, "%s", dir);
            p++;
        } else {
            json[o++] = *p;
        }
    }
    json[o] = '\0';
    settings_init(&s);
    memset(err, 0, sizeof(*err));
    rc = settings_apply_buffer(&s, "g.json", json, strlen(json), err);
    if (rc == 0)
        rc = proxy_gw_new(&s, 1000, g, err);
    settings_free(&s);
    return rc;
}

#define ENTRY(v)                                                                                   \
    "{\"credentials\": {\"headers\": [{\"hosts\": [\"a.test\"], \"name\": \"Authorization\", "     \
    "\"value\": " v "}]}}"

static void test_values(void **state)
{
    struct proxy_gw *g = NULL;
    struct proxy_gw_snap s;
    struct settings_error err;
    char why[300];

    (void)state;
    write_file("tok", "  " TOKEN "\n\n", 0600);
    assert_int_equal(table(ENTRY("{\"file\": \"%s/tok\", \"prefix\": \"Bearer \"}"), &g, &err), 0);
    assert_non_null(g);
    assert_int_equal(g->n, 1);
    assert_string_equal(g->e[0].label, "headers[0]:Authorization");
    assert_string_equal(g->e[0].prefix, "Bearer ");
    assert_int_equal(proxy_gw_get(g, 0, 5000, &s, why, sizeof(why)), 0);
    assert_int_equal(s.len, strlen(TOKEN));
    assert_memory_equal(s.value, TOKEN, s.len);
    assert_memory_not_equal(s.mask, TOKEN, s.len); /* a mask of the same length */
    proxy_gw_snap_free(&s);
    assert_null(proxy_gw_unready(g, 5000));
    proxy_gw_unref(g);

    setenv("SLUICE_TEST_GW", "\t" TOKEN " ", 1);
    assert_int_equal(table(ENTRY("{\"env\": \"SLUICE_TEST_GW\"}"), &g, &err), 0);
    assert_int_equal(proxy_gw_get(g, 0, 5000, &s, why, sizeof(why)), 0);
    assert_memory_equal(s.value, TOKEN, s.len);
    proxy_gw_snap_free(&s);
    proxy_gw_unref(g);

    /* no headers: no table */
    assert_int_equal(table("{}", &g, &err), 0);
    assert_null(g);
}

struct refused {
    const char *file, *text, *json, *msg;
};

static void test_refused(void **state)
{
    static const struct refused cases[] = {
        {NULL, NULL, ENTRY("{\"file\": \"%s/missing\"}"),
         "/missing': cannot read it: No such file or directory"},
        {"short", "short-token\n", ENTRY("{\"file\": \"%s/short\"}"),
         "/short': refused: it is shorter than 16 bytes"},
        {"empty", " \n", ENTRY("{\"file\": \"%s/empty\"}"), "/empty': refused: it is empty"},
        {"ctl", TOKEN "\r\nX-Evil: 1", ENTRY("{\"file\": \"%s/ctl\"}"),
         "/ctl': refused: it holds a byte that is not printable ASCII"},
        {NULL, NULL, ENTRY("{\"file\": \"%s\"}"), "': cannot read it: not a regular file"},
        {NULL, NULL, ENTRY("{\"env\": \"SLUICE_TEST_GW_UNSET\"}"),
         "value.env 'SLUICE_TEST_GW_UNSET': not set in sluice's environment"},
    };
    char big[PROXY_GW_READ_MAX + 10];

    (void)state;
    unsetenv("SLUICE_TEST_GW_UNSET");
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct proxy_gw *g = NULL;
        struct settings_error err;
        if (cases[i].file != NULL)
            write_file(cases[i].file, cases[i].text, 0600);
        assert_int_equal(table(cases[i].json, &g, &err), -1);
        assert_null(g);
        if (strstr(err.msg, cases[i].msg) == NULL || strncmp(err.msg, "g.json:1:", 9) != 0)
            print_error("case %zu: %s\n", i, err.msg);
        assert_non_null(strstr(err.msg, cases[i].msg));
        assert_int_equal(strncmp(err.msg, "g.json:1:", 9), 0); /* located */
        assert_non_null(strstr(err.msg, "credentials.headers[0]"));
        assert_null(strstr(err.msg, "short-token")); /* never the value */
        assert_null(strstr(err.msg, TOKEN));
    }
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    write_file("big", big, 0600);
    {
        struct proxy_gw *g = NULL;
        struct settings_error err;
        assert_int_equal(table(ENTRY("{\"file\": \"%s/big\"}"), &g, &err), -1);
        assert_non_null(strstr(err.msg, "larger than 65536 bytes"));
    }
}

/* A helper's result on the loop. */
struct result {
    int done, ok;
    char out[256];
    size_t len;
    char why[160];
};

static void on_helper(void *arg, int ok, const uint8_t *out, size_t len, const char *why)
{
    struct result *r = arg;

    r->done = 1;
    r->ok = ok;
    r->len = len < sizeof(r->out) ? len : sizeof(r->out);
    memcpy(r->out, out, r->len);
    snprintf(r->why, sizeof(r->why), "%s", why != NULL ? why : "");
}

/* Runs sh -c script as a helper: its result. */
static void run_helper(const char *script, unsigned timeout_ms, size_t max, struct result *r)
{
    uv_loop_t loop;
    struct test_watchdog wd;
    struct proxy_helper *h = NULL;
    char a0[] = "/bin/sh", a1[] = "-c", a2[512];
    char *argv[] = {a0, a1, a2, NULL};

    memset(r, 0, sizeof(*r));
    snprintf(a2, sizeof(a2), "%s", script);
    assert_int_equal(test_loop_init(&loop, &wd, 20000, TEST_WATCHDOG_FAIL), 0);
    assert_int_equal(proxy_helper_start(&loop, argv, timeout_ms, max, on_helper, r, &h), 0);
    test_loop_run_until(&loop, &r->done, "the helper's result");
    assert_int_equal(test_loop_close(&loop, &wd), 0);
}

static void test_helper(void **state)
{
    struct result r;
    uv_loop_t loop;
    struct test_watchdog wd;
    struct proxy_helper *h = NULL;
    char sh[] = "sh", c[] = "-c", tr[] = "true", nx[] = "/nonexistent/helper", bsh[] = "/bin/sh";
    char sl[] = "exec sleep 30";
    char *rel[] = {sh, c, tr, NULL}, *none[] = {nx, NULL}, *slow[] = {bsh, c, sl, NULL};
    int fd, rc;

    (void)state;
    run_helper("printf '  " TOKEN "\\n'", 10000, 65536, &r);
    assert_int_equal(r.ok, 1);
    assert_int_equal(r.len, strlen(TOKEN) + 3); /* trimmed by the table, not here */
    assert_memory_equal(r.out + 2, TOKEN, strlen(TOKEN));

    run_helper("echo " TOKEN "; exit 3", 10000, 65536, &r);
    assert_int_equal(r.ok, 0);
    assert_string_equal(r.why, "exit status 3");

    run_helper("kill -TERM $$", 10000, 65536, &r);
    assert_int_equal(r.ok, 0);
    assert_string_equal(r.why, "killed by signal 15");

    run_helper("exec sleep 30", 200, 65536, &r);
    assert_int_equal(r.ok, 0);
    assert_string_equal(r.why, "it timed out after 200 ms");

    run_helper("head -c 100000 /dev/zero | tr '\\0' a", 10000, 65536, &r);
    assert_int_equal(r.ok, 0);
    assert_string_equal(r.why, "its output is over 65536 bytes");

    /* no descriptor but stdin, stdout and stderr: an open descriptor of
     * ours (not close-on-exec) does not reach it; stderr is /dev/null */
    fd = open("/dev/null", O_RDONLY);
    assert_true(fd >= 3);
    run_helper("ls /proc/self/fd | tr '\\n' ' '; echo x >&2; readlink /proc/self/fd/2", 10000,
               65536, &r);
    close(fd);
    assert_int_equal(r.ok, 1);
    r.out[r.len < sizeof(r.out) ? r.len : sizeof(r.out) - 1] = '\0';
    /* ls itself opens one for the directory it lists: 0 1 2 and that one */
    assert_non_null(strstr(r.out, "0 1 2 3 /dev/null"));

    /* no shell, no PATH search: a relative program is refused, a missing
     * one cannot start (the callback never runs; under valgrind, whose
     * posix_spawn cannot report a failed exec, it fails as exit 127) */
    assert_int_equal(test_loop_init(&loop, &wd, 20000, TEST_WATCHDOG_FAIL), 0);
    assert_int_equal(proxy_helper_start(&loop, rel, 1000, 100, on_helper, &r, &h), -EINVAL);
    memset(&r, 0, sizeof(r));
    rc = proxy_helper_start(&loop, none, 1000, 100, on_helper, &r, &h);
    if (rc == 0) {
        test_loop_run_until(&loop, &r.done, "the missing helper's result");
        assert_int_equal(r.ok, 0);
        assert_string_equal(r.why, "exit status 127");
    } else {
        assert_int_equal(rc, -ENOENT);
    }
    /* a cancelled helper is killed and reaped; its callback never runs */
    memset(&r, 0, sizeof(r));
    assert_int_equal(proxy_helper_start(&loop, slow, 20000, 100, on_helper, &r, &h), 0);
    proxy_helper_cancel(h);
    assert_int_equal(test_loop_close(&loop, &wd), 0);
    assert_int_equal(r.done, 0);
}

/* The lifetime rules, on the test's clock. */
static void test_lifetime(void **state)
{
    struct proxy_gw *g = NULL, *g2 = NULL;
    struct proxy_gw_snap s;
    struct settings_error err;
    uint64_t next;
    char why[300];
    const char *out = TOKEN "\n", *out2 = "another-token-0123456789";

    (void)state;
    assert_int_equal(
        table(ENTRY("{\"exec\": [\"/bin/echo\", \"x\"], \"ttl\": 10, \"timeout\": 2}"), &g, &err),
        0);
    assert_int_equal(g->e[0].ttl_ms, 10000);
    assert_int_equal(g->e[0].timeout_ms, 2000);
    assert_string_equal(g->e[0].argv[0], "/bin/echo");
    assert_string_equal(g->e[0].argv[1], "x");
    assert_null(g->e[0].argv[2]);
    /* no value before its helper ran: refused, and not ready */
    assert_int_equal(proxy_gw_get(g, 0, 1000, &s, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "has not given a value yet"));
    assert_string_equal(proxy_gw_unready(g, 1000), "headers[0]:Authorization");
    /* due at once, once: a running entry is not due again */
    assert_int_equal(proxy_gw_due(g, 1000, &next), 0);
    assert_int_equal(proxy_gw_due(g, 1000, &next), -1);
    assert_int_equal(next, UINT64_MAX);
    /* its output is the value (trimmed) for 10 s from 2000 */
    assert_null(proxy_gw_helper_done(g, 0, 2000, 1, (const uint8_t *)out, strlen(out), NULL));
    assert_int_equal(proxy_gw_get(g, 0, 2000, &s, why, sizeof(why)), 0);
    assert_memory_equal(s.value, TOKEN, s.len);
    proxy_gw_snap_free(&s);
    assert_null(proxy_gw_unready(g, 11999));
    /* refreshed before it runs out (at 3/4 of its ttl) */
    assert_int_equal(proxy_gw_due(g, 9000, &next), -1);
    assert_int_equal(next, 9500);
    assert_int_equal(proxy_gw_due(g, 9500, &next), 0);
    /* a failed refresh keeps the old value until its ttl, never after */
    assert_string_equal(proxy_gw_helper_done(g, 0, 9600, 0, NULL, 0, "exit status 1"),
                        "exit status 1");
    assert_int_equal(proxy_gw_get(g, 0, 11999, &s, why, sizeof(why)), 0);
    proxy_gw_snap_free(&s);
    assert_int_equal(proxy_gw_get(g, 0, 12000, &s, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "lifetime (ttl) ran out"));
    assert_non_null(strstr(why, "exit status 1"));
    assert_null(strstr(why, TOKEN));
    assert_string_equal(proxy_gw_unready(g, 12000), "headers[0]:Authorization");
    /* retried after 1 s, then 2 s */
    assert_int_equal(proxy_gw_due(g, 10000, &next), -1);
    assert_int_equal(next, 10600);
    assert_int_equal(proxy_gw_due(g, 10600, &next), 0);
    /* output that is no value is a failure too */
    assert_non_null(strstr(proxy_gw_helper_done(g, 0, 10700, 1, (const uint8_t *)"short", 5, NULL),
                           "shorter than 16 bytes"));
    assert_int_equal(proxy_gw_due(g, 12000, &next), -1);
    assert_int_equal(next, 12700);
    /* a new value after the old one ran out */
    assert_int_equal(proxy_gw_due(g, 12700, &next), 0);
    assert_null(proxy_gw_helper_done(g, 0, 12800, 1, (const uint8_t *)out2, strlen(out2), NULL));
    assert_int_equal(proxy_gw_get(g, 0, 12800, &s, why, sizeof(why)), 0);
    assert_memory_equal(s.value, out2, s.len);
    proxy_gw_snap_free(&s);

    /* a reload carries a helper's value when argv, ttl and header are the
     * same, not otherwise */
    assert_int_equal(
        table(ENTRY("{\"exec\": [\"/bin/echo\", \"x\"], \"ttl\": 10, \"timeout\": 2}"), &g2, &err),
        0);
    proxy_gw_carry(g2, g);
    assert_int_equal(proxy_gw_get(g2, 0, 12800, &s, why, sizeof(why)), 0);
    assert_memory_equal(s.value, out2, s.len);
    proxy_gw_snap_free(&s);
    proxy_gw_unref(g2);
    assert_int_equal(table(ENTRY("{\"exec\": [\"/bin/echo\", \"y\"], \"ttl\": 10}"), &g2, &err), 0);
    proxy_gw_carry(g2, g);
    assert_int_equal(proxy_gw_get(g2, 0, 12800, &s, why, sizeof(why)), -1);
    proxy_gw_unref(g2);
    proxy_gw_unref(g);
}

static void test_trim_check(void **state)
{
    size_t start;

    (void)state;
    assert_int_equal(proxy_gw_trim((const uint8_t *)" \t\r\nab \n", 8, &start), 2);
    assert_int_equal(start, 4);
    assert_int_equal(proxy_gw_trim((const uint8_t *)" \n ", 3, &start), 0);
    assert_null(proxy_gw_value_check((const uint8_t *)"0123456789abcdef", 16));
    assert_null(proxy_gw_value_check((const uint8_t *)"0123456789 abc\tef", 17));
    assert_non_null(proxy_gw_value_check((const uint8_t *)"0123456789abcde", 15));
    assert_non_null(proxy_gw_value_check((const uint8_t *)"0123456789abcde\x01", 16));
    assert_non_null(proxy_gw_value_check((const uint8_t *)"0123456789abcde\xc3", 16));
}

/* rt-15: a client's header of the entry's name with '_' for '-' goes too
 * (CGI and WSGI read X_Key as X-Key); a settings file or helper others
 * could write is refused; a reload hands a run under way to the new
 * table; more than 64 entries are refused. */
static void test_rt15(void **state)
{
    static const char head[] = "GET / HTTP/1.1\r\nX_Api_Key: a\r\nx-api_KEY: b\r\n"
                               "X-Api-Keys: c\r\nXApiKey: d\r\n\r\n";
    char h[sizeof(head)], path[160], big[20000];
    struct proxy_gw *g = NULL, *g2 = NULL;
    struct settings s;
    struct settings_error err;
    size_t n, o;

    (void)state;
    memcpy(h, head, sizeof(head));
    n = proxy_head_drop(h, sizeof(head) - 1, "X-Api-Key");
    assert_int_equal(n, strlen("GET / HTTP/1.1\r\nX-Api-Keys: c\r\nXApiKey: d\r\n\r\n"));
    assert_memory_equal(h, "GET / HTTP/1.1\r\nX-Api-Keys: c\r\nXApiKey: d\r\n\r\n", n);

    /* who may name an entry: the file and the program, by their modes */
    write_file("tok", TOKEN "\n", 0600);
    write_file("prog", "#!/bin/sh\necho x\n", 0700);
    snprintf(big, sizeof(big),
             "{\"network\": {\"allowedDomains\": [\"a.test\"], \"tlsTerminate\": {}}, "
             "\"credentials\": {\"headers\": [{\"hosts\": [\"a.test\"], \"name\": \"X-A\", "
             "\"value\": {\"exec\": [\"%s/prog\"], \"ttl\": 5}}]}}",
             dir);
    write_file("s.json", big, 0600);
    snprintf(path, sizeof(path), "%s/s.json", dir);
    settings_init(&s);
    assert_int_equal(settings_apply_file(&s, path, &err), 0);
    assert_int_equal(proxy_gw_trusted(&s, &err), 0);
    assert_int_equal(chmod(path, 0666), 0);
    assert_int_equal(proxy_gw_trusted(&s, &err), -1);
    assert_non_null(strstr(err.msg, "credentials.headers[0]: refused: a header's value source"));
    assert_non_null(strstr(err.msg, "is writable by others"));
    assert_int_equal(chmod(path, 0600), 0);
    snprintf(path, sizeof(path), "%s/prog", dir);
    assert_int_equal(chmod(path, 0777), 0);
    assert_int_equal(proxy_gw_trusted(&s, &err), -1);
    assert_non_null(strstr(err.msg, "refused: value.exec: the helper program"));
    assert_int_equal(chmod(dir, 0777), 0); /* the directory too, unless sticky */
    assert_int_equal(chmod(path, 0700), 0);
    assert_int_equal(proxy_gw_trusted(&s, &err), -1);
    assert_non_null(strstr(err.msg, "which others may write"));
    assert_int_equal(chmod(dir, 01777), 0);
    assert_int_equal(proxy_gw_trusted(&s, &err), 0);
    assert_int_equal(chmod(dir, 0700), 0);
    settings_free(&s);

    /* a run under way goes to the new table's entry with the same helper,
     * once; none when the new table has no such entry */
    assert_int_equal(table(ENTRY("{\"exec\": [\"/bin/echo\", \"x\"], \"ttl\": 10}"), &g, &err), 0);
    assert_int_equal(table(ENTRY("{\"exec\": [\"/bin/echo\", \"x\"], \"ttl\": 10}"), &g2, &err), 0);
    assert_int_equal(proxy_gw_adopt(g2, g, 0), 0);
    assert_int_equal(g2->e[0].running, 1);
    assert_int_equal(proxy_gw_adopt(g2, g, 0), -1);
    proxy_gw_unref(g2);
    assert_int_equal(table(ENTRY("{\"exec\": [\"/bin/echo\", \"y\"], \"ttl\": 10}"), &g2, &err), 0);
    assert_int_equal(proxy_gw_adopt(g2, g, 0), -1);
    proxy_gw_unref(g2);
    proxy_gw_unref(g);

    /* 65 entries: refused, naming the 65th */
    o = (size_t)snprintf(big, sizeof(big), "{\"credentials\": {\"headers\": [");
    for (int i = 0; i < 65; i++)
        o += (size_t)snprintf(big + o, sizeof(big) - o,
                              "%s{\"hosts\": [\"a.test\"], \"name\": \"X-%d\", \"value\": "
                              "{\"env\": \"HOME\"}}",
                              i > 0 ? "," : "", i);
    snprintf(big + o, sizeof(big) - o, "]}}");
    g = NULL;
    assert_int_equal(table(big, &g, &err), -1);
    assert_null(g);
    assert_non_null(strstr(err.msg, "credentials.headers[64]: refused: at most 64 entries"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_values),     cmocka_unit_test(test_refused),
        cmocka_unit_test(test_helper),     cmocka_unit_test(test_lifetime),
        cmocka_unit_test(test_trim_check), cmocka_unit_test(test_rt15),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
