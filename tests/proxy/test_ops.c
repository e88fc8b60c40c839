/* tests/proxy/test_ops.c - proxy/ops.h on its own: histogram buckets and
 * their exposition, the process metrics, the notify protocol on a real
 * datagram socket (path and abstract names, the watchdog, unset variables)
 * and the watcher's debounce (many writes, one callback; a file in the
 * directory that sluice does not read, none).
 */
#define _DEFAULT_SOURCE /* mkdtemp */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>
#include <uv.h>

#include "policy/policy.h"
#include "proxy/ops.h"
#include "tests/fixture/loop.h"

#define WATCHDOG_MS 15000 /* the test fixture's, not systemd's */

static char *render_histogram(const struct histogram *h)
{
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);

    assert_non_null(m);
    histogram_write(m, "t_seconds", "help", h);
    assert_int_equal(fclose(m), 0);
    return text;
}

static void test_histogram(void **state)
{
    struct histogram h;
    char *text;

    (void)state;
    memset(&h, 0, sizeof(h));
    histogram_observe(&h, 0.001);  /* on a bound: in that bucket (le) */
    histogram_observe(&h, 0.0011); /* just above: the next one */
    histogram_observe(&h, 0.3);
    histogram_observe(&h, 100);    /* beyond the last bound: +Inf only */
    histogram_observe(&h, -1);     /* clock weirdness counts as 0 */
    text = render_histogram(&h);
    assert_non_null(strstr(text, "# TYPE t_seconds histogram\n"));
    assert_non_null(strstr(text, "t_seconds_bucket{le=\"0.001\"} 2\n"));
    assert_non_null(strstr(text, "t_seconds_bucket{le=\"0.0025\"} 3\n"));
    assert_non_null(strstr(text, "t_seconds_bucket{le=\"0.25\"} 3\n"));
    assert_non_null(strstr(text, "t_seconds_bucket{le=\"0.5\"} 4\n"));
    assert_non_null(strstr(text, "t_seconds_bucket{le=\"30\"} 4\n"));
    assert_non_null(strstr(text, "t_seconds_bucket{le=\"+Inf\"} 5\n"));
    assert_non_null(strstr(text, "t_seconds_count 5\n"));
    assert_non_null(strstr(text, "t_seconds_sum 100.302100\n"));
    free(text);
}

static void test_procmetrics(void **state)
{
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    unsigned long long fds = 0, rss = 0;
    const char *p;

    (void)state;
    assert_non_null(m);
    procmetrics_write(m);
    assert_int_equal(fclose(m), 0);
    p = strstr(text, "\nprocess_open_fds ");
    assert_non_null(p);
    assert_int_equal(sscanf(p, "\nprocess_open_fds %llu", &fds), 1);
    assert_true(fds >= 3); /* stdin, stdout, stderr at least */
    p = strstr(text, "\nprocess_resident_memory_bytes ");
    assert_non_null(p);
    assert_int_equal(sscanf(p, "\nprocess_resident_memory_bytes %llu", &rss), 1);
    assert_true(rss > 4096);
    assert_non_null(strstr(text, "# TYPE process_cpu_seconds_total counter\n"));
    assert_non_null(strstr(text, "\nprocess_virtual_memory_bytes "));
    free(text);
}

static void status_text(void *ctx, char *buf, size_t len)
{
    snprintf(buf, len, "%s\nsecond line", (const char *)ctx);
}

/* Binds a datagram socket at name ('@' = abstract); returns it. */
static int bind_dgram(const char *name)
{
    struct sockaddr_un a;
    socklen_t alen;
    int fd = socket(AF_UNIX, SOCK_DGRAM, 0);

    assert_true(fd >= 0);
    memset(&a, 0, sizeof(a));
    a.sun_family = AF_UNIX;
    memcpy(a.sun_path, name, strlen(name));
    if (name[0] == '@')
        a.sun_path[0] = '\0';
    alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(name));
    assert_int_equal(bind(fd, (struct sockaddr *)&a, alen), 0);
    return fd;
}

static void recv_is(int fd, const char *want)
{
    char buf[1100];
    ssize_t n = recv(fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);

    assert_true(n > 0);
    buf[n] = '\0';
    assert_string_equal(buf, want);
}

static void stop_loop(uv_timer_t *t)
{
    uv_stop(t->loop);
}

static void closed(void *arg)
{
    (*(int *)arg)++;
}

static void notify_on(const char *name, const char *env)
{
    uv_loop_t loop;
    struct test_watchdog wd;
    struct notify *n = NULL;
    const char *why = NULL;
    int fd = bind_dgram(name), done = 0;
    char buf[256];
    ssize_t got;

    assert_int_equal(test_loop_init(&loop, &wd, WATCHDOG_MS, TEST_WATCHDOG_FAIL), 0);
    setenv("NOTIFY_SOCKET", env, 1);
    setenv("WATCHDOG_USEC", "20000", 1); /* 10 ms pings */
    unsetenv("WATCHDOG_PID");
    assert_int_equal(notify_open(&n, &loop, status_text, (void *)"3 connections", &why), 0);
    assert_non_null(n);
    assert_null(getenv("NOTIFY_SOCKET")); /* children do not inherit it */
    assert_null(getenv("WATCHDOG_USEC"));
    notify_ready(n);
    recv_is(fd, "READY=1\nSTATUS=3 connections second line");
    notify_reloading(n);
    got = recv(fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);
    assert_true(got > 0);
    buf[got] = '\0';
    assert_memory_equal(buf, "RELOADING=1\nMONOTONIC_USEC=", 27);
    assert_non_null(strstr(buf, "\nSTATUS=3 connections second line"));
    notify_stopping(n);
    recv_is(fd, "STOPPING=1\nSTATUS=3 connections second line");
    notify_status(n);
    recv_is(fd, "STATUS=3 connections second line");
    /* the watchdog timer is unref'd: run the loop on a timer of our own */
    {
        uv_timer_t t;
        uv_timer_init(&loop, &t);
        uv_timer_start(&t, stop_loop, 35, 0);
        uv_run(&loop, UV_RUN_DEFAULT);
        uv_close((uv_handle_t *)&t, NULL);
        uv_run(&loop, UV_RUN_NOWAIT);
    }
    recv_is(fd, "WATCHDOG=1\nSTATUS=3 connections second line");
    notify_close(n, closed, &done);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(done, 1);
    assert_int_equal(test_loop_close(&loop, &wd), 0);
    close(fd);
}

static void test_notify_path(void **state)
{
    char dir[] = "/tmp/sluice-test-notify-XXXXXX", path[128];

    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/notify", dir);
    notify_on(path, path);
    unlink(path);
    rmdir(dir);
}

static void test_notify_abstract(void **state)
{
    char name[64];

    (void)state;
    snprintf(name, sizeof(name), "@sluice-test-notify-%ld", (long)getpid());
    notify_on(name, name);
}

static void test_notify_absent_or_bad(void **state)
{
    uv_loop_t loop;
    struct test_watchdog wd;
    struct notify *n = (struct notify *)1;
    const char *why = NULL;
    int done = 0;

    (void)state;
    assert_int_equal(test_loop_init(&loop, &wd, WATCHDOG_MS, TEST_WATCHDOG_FAIL), 0);
    unsetenv("NOTIFY_SOCKET");
    assert_int_equal(notify_open(&n, &loop, NULL, NULL, &why), 0);
    assert_null(n);
    notify_ready(n); /* no-ops */
    notify_close(n, closed, &done);
    assert_int_equal(done, 1);
    setenv("NOTIFY_SOCKET", "relative/path", 1);
    assert_true(notify_open(&n, &loop, NULL, NULL, &why) < 0);
    assert_non_null(why);
    unsetenv("NOTIFY_SOCKET");
    assert_int_equal(test_loop_close(&loop, &wd), 0);
}

struct watch_ctx {
    int fired;
    uv_loop_t *loop;
};

static void on_change(void *arg)
{
    struct watch_ctx *c = arg;
    c->fired++;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void run_for(uv_loop_t *loop, uint64_t ms)
{
    uv_timer_t t;
    uv_timer_init(loop, &t);
    uv_timer_start(&t, stop_loop, ms, 0);
    uv_run(loop, UV_RUN_DEFAULT);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
}

/* Runs the loop until the callback has fired want times (5 s at most, a
 * bound for a loaded machine, not a timing claim), then one more debounce
 * interval twice over, so that a second callback would show. */
static void wait_fired(uv_loop_t *loop, struct watch_ctx *c, int want, uint64_t debounce_ms)
{
    for (int i = 0; i < 250 && c->fired < want; i++)
        run_for(loop, 20);
    run_for(loop, 2 * debounce_ms);
}

static void test_watch_debounce(void **state)
{
    char dir[] = "/tmp/sluice-test-watch-XXXXXX", settings[128], other[128];
    struct settings s;
    struct watch *w = NULL;
    struct watch_ctx c = {0, NULL};
    const char *why = NULL;
    uv_loop_t loop;
    struct test_watchdog wd;
    int done = 0;

    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(settings, sizeof(settings), "%s/settings.json", dir);
    snprintf(other, sizeof(other), "%s/unrelated.txt", dir);
    write_file(settings, "{}\n");
    settings_init(&s);
    assert_int_equal(test_loop_init(&loop, &wd, WATCHDOG_MS, TEST_WATCHDOG_FAIL), 0);
    c.loop = &loop;
    assert_int_equal(watch_start(&w, &loop, settings, &s, 200, on_change, &c, &why), 0);
    assert_true(watch_dirs(w) >= 1);
    /* a file sluice does not read: nothing */
    write_file(other, "x\n");
    run_for(&loop, 400);
    assert_int_equal(c.fired, 0);
    /* five writes in a burst: one callback */
    for (int i = 0; i < 5; i++)
        write_file(settings, "{\"network\": {}}\n");
    wait_fired(&loop, &c, 1, 200);
    assert_int_equal(c.fired, 1);
    /* a rename over it (how editors save): one more */
    write_file(other, "{}\n");
    assert_int_equal(rename(other, settings), 0);
    wait_fired(&loop, &c, 2, 200);
    assert_int_equal(c.fired, 2);
    assert_int_equal(watch_update(w, &s), 0);
    watch_close(w, closed, &done);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(done, 1);
    assert_int_equal(test_loop_close(&loop, &wd), 0);
    settings_free(&s);
    unlink(settings);
    rmdir(dir);
}

static void test_watch_needs_a_file(void **state)
{
    struct watch *w = (struct watch *)1;
    const char *why = NULL;
    uv_loop_t loop;
    struct test_watchdog wd;

    (void)state;
    assert_int_equal(test_loop_init(&loop, &wd, WATCHDOG_MS, TEST_WATCHDOG_FAIL), 0);
    assert_true(watch_start(&w, &loop, NULL, NULL, 50, on_change, NULL, &why) < 0);
    assert_null(w);
    assert_non_null(strstr(why, "--settings"));
    assert_true(watch_start(&w, &loop, "/nonexistent-sluice-dir/settings.json", NULL, 50,
                            on_change, NULL, &why) < 0);
    assert_null(w);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(test_loop_close(&loop, &wd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_histogram),
        cmocka_unit_test(test_procmetrics),
        cmocka_unit_test(test_notify_path),
        cmocka_unit_test(test_notify_abstract),
        cmocka_unit_test(test_notify_absent_or_bad),
        cmocka_unit_test(test_watch_debounce),
        cmocka_unit_test(test_watch_needs_a_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
