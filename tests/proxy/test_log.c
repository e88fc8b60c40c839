/* tests/proxy/test_log.c - the connection log's text line (proxy/log.c),
 * rendered in memory since issue 25: hostile values quoted and escaped
 * byte for byte as before, numbers, the room check of proxy_log_render(),
 * a line longer than the stack buffer written whole, and the cached
 * timestamp (common_timestamp). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/common.h"
#include "proxy/server.h"

static struct connlog base_rec(void)
{
    struct connlog r;

    memset(&r, 0, sizeof(r));
    r.event = CONNLOG_CLOSE;
    r.id = 18446744073709551615ull;
    r.client = "127.0.0.1:40000";
    r.protocol = "connect";
    r.host = "example.com";
    r.port = 443;
    r.verdict = "deny";
    r.rule = "'example.com' network.deniedDomains[0]";
    r.reason = "a \"quoted\" back\\slash, tab\tnl\ncr\r del\x7f high\xc3\xa9 eq=";
    r.addr = "";
    r.code = 403;
    r.bytes_up = 0;
    r.bytes_down = 12345;
    r.duration_ms = 7;
    r.end = "denied";
    return r;
}

/* the line after its time= field */
static const char *after_time(const char *line)
{
    const char *sp = strchr(line, ' ');

    assert_non_null(sp);
    assert_memory_equal(line, "time=", 5);
    return sp + 1;
}

static void test_render_escapes(void **state)
{
    struct connlog r = base_rec();
    char buf[1024];
    long n;

    (void)state;
    n = proxy_log_render(&r, buf, sizeof(buf));
    assert_true(n > 0);
    assert_int_equal((size_t)n, strlen(buf));
    assert_string_equal(
        after_time(buf),
        "level=warn event=close id=18446744073709551615 client=127.0.0.1:40000 protocol=connect "
        "host=example.com port=443 decision=deny rule=\"'example.com' network.deniedDomains[0]\" "
        "reason=\"a \\\"quoted\\\" back\\\\slash, tab\\x09nl\\x0acr\\x0d del\\x7f high\xc3\xa9 "
        "eq=\" code=403 bytes_up=0 bytes_down=12345 duration_ms=7 end=denied");
}

static void test_render_plain_and_zero(void **state)
{
    struct connlog r = base_rec();
    char buf[512];

    (void)state;
    r.event = CONNLOG_DECISION;
    r.verdict = "allow";
    r.rule = "";
    r.reason = "";
    r.id = 0;
    r.code = -1;
    r.port = 0;
    r.terminated = 1;
    r.method = "GET";
    r.url = "http://example.com/a=b"; /* '=' is quoted */
    assert_true(proxy_log_render(&r, buf, sizeof(buf)) > 0);
    assert_string_equal(after_time(buf), "level=info event=decision id=0 client=127.0.0.1:40000 "
                                         "protocol=connect host=example.com terminated=1 "
                                         "method=GET url=\"http://example.com/a=b\" "
                                         "decision=allow");
}

/* proxy_log_render's room check is the one it had with fmemopen() */
static void test_render_room(void **state)
{
    struct connlog r = base_rec();
    char buf[1024], small[1024];
    long n;

    (void)state;
    n = proxy_log_render(&r, buf, sizeof(buf));
    assert_true(n > 0);
    /* the line with its newline is n + 1 bytes; as with the fmemopen()
     * it replaced, one byte more than that and the NUL are needed */
    assert_int_equal(proxy_log_render(&r, small, (size_t)n + 2), -1);
    n = proxy_log_render(&r, small, (size_t)n + 3);
    assert_true(n > 0);
    assert_string_equal(after_time(small), after_time(buf));
    assert_int_equal(proxy_log_render(&r, small, 1), -1);
}

/* a line longer than the stack buffer goes out whole, once */
static void test_record_long_line(void **state)
{
    struct connlog r = base_rec();
    struct proxy_log lg;
    char path[] = "/tmp/sluice-test-log.XXXXXX", *url, *text;
    size_t len = 5000;
    FILE *f;
    long size;
    int fd;

    (void)state;
    fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    url = malloc(len + 1);
    assert_non_null(url);
    memset(url, 'u', len);
    url[len] = '\0';
    url[len / 2] = '"'; /* quoted: the worst-case room is used */
    r.url = url;
    assert_int_equal(proxy_log_open(&lg, path, 0), 0);
    proxy_log_record(&lg, &r);
    proxy_log_close(&lg);
    f = fopen(path, "r");
    assert_non_null(f);
    text = calloc(1, 16384);
    assert_non_null(text);
    size = (long)fread(text, 1, 16383, f);
    fclose(f);
    unlink(path);
    assert_true(size > (long)len);
    assert_int_equal(text[size - 1], '\n');
    assert_ptr_equal(strchr(text, '\n'), text + size - 1); /* one line */
    assert_non_null(strstr(text, " url=\"uuu"));
    assert_non_null(strstr(text, "u\\\"u"));
    assert_non_null(strstr(text, " end=denied\n"));
    free(text);
    free(url);
}

static void test_timestamp(void **state)
{
    char a[COMMON_TIME_MAX], b[COMMON_TIME_MAX], tiny[8];

    (void)state;
    common_timestamp(a, sizeof(a));
    common_timestamp(b, sizeof(b)); /* the cached second */
    assert_int_equal(strlen(a), 24);
    assert_int_equal(strlen(b), 24);
    assert_int_equal(a[10], 'T');
    assert_int_equal(a[19], '.');
    assert_int_equal(a[23], 'Z');
    for (int i = 20; i < 23; i++)
        assert_true(b[i] >= '0' && b[i] <= '9');
    assert_string_equal(common_timestamp(tiny, sizeof(tiny)), "-");
}

static void test_utoa(void **state)
{
    char out[24];

    (void)state;
    out[common_utoa(out, 0)] = '\0';
    assert_string_equal(out, "0");
    out[common_utoa(out, 18446744073709551615ull)] = '\0';
    assert_string_equal(out, "18446744073709551615");
    out[common_utoa(out, 1000)] = '\0';
    assert_string_equal(out, "1000");
}

/* common_cat cuts as snprintf(buf, cap, "%s%s", buf, s) would */
static void test_cat(void **state)
{
    char buf[8];
    size_t at;

    (void)state;
    at = common_cat(buf, sizeof(buf), 0, "ab");
    assert_int_equal(at, 2);
    at = common_cat_u(buf, sizeof(buf), at, 345);
    assert_string_equal(buf, "ab345");
    at = common_cat(buf, sizeof(buf), at, "xyz");
    assert_int_equal(at, 7);
    assert_string_equal(buf, "ab345xy");
    at = common_cat(buf, sizeof(buf), at, "more");
    assert_int_equal(at, 7);
    assert_string_equal(buf, "ab345xy");
    assert_int_equal(common_cat(buf, 1, 0, "x"), 0);
    assert_string_equal(buf, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_render_escapes),    cmocka_unit_test(test_render_plain_and_zero),
        cmocka_unit_test(test_render_room),       cmocka_unit_test(test_record_long_line),
        cmocka_unit_test(test_timestamp),         cmocka_unit_test(test_utoa),
        cmocka_unit_test(test_cat),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
