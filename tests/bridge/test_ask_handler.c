/* tests/bridge/test_ask_handler.c - the tty, exec and socket ask handlers
 * behind a real broker.
 *
 * exec: tests/e2e/ask-helpers/answer.sh (copied into a private directory)
 * answers by the host's first label. socket: a small uv_pipe server in this
 * process answers by host. tty: forked children, one without a controlling
 * terminal, one whose controlling terminal is a pty driven by this process.
 * Deadlines are watchdogs only (and the broker timeouts under test).
 */
#define _XOPEN_SOURCE 700 /* posix_openpt, grantpt, unlockpt, ptsname */

#include <setjmp.h> /* cmocka needs these first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "tests/fixture/loop.h"

#include <jansson.h>

#include "bridge/bridge.h"
#include "policy/policy.h"

#define WATCHDOG_MS 20000

static char g_dir[256];    /* private directory */
static char g_script[320]; /* g_dir/answer.sh */
static char g_count[320];  /* g_dir/count */
static char g_log[320];    /* g_dir/log */
static char g_sock[320];   /* g_dir/sock */

/* ------------------------------------------------------------------------ */
/* Files                                                                     */

static int copy_file(const char *from, const char *to, mode_t mode)
{
    char buf[4096];
    int in, out, rc = -1;
    ssize_t n;

    in = open(from, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return -1;
    out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (out >= 0) {
        rc = 0;
        while ((n = read(in, buf, sizeof(buf))) > 0)
            if (write(out, buf, (size_t)n) != n)
                rc = -1;
        if (n < 0)
            rc = -1;
        close(out);
    }
    close(in);
    return rc;
}

/* Lines in a file, 0 when it does not exist. */
static int count_lines(const char *path)
{
    FILE *fp = fopen(path, "r");
    int c, n = 0;

    if (fp == NULL)
        return 0;
    while ((c = fgetc(fp)) != EOF)
        if (c == '\n')
            n++;
    fclose(fp);
    return n;
}

static char *read_all(const char *path)
{
    FILE *fp = fopen(path, "r");
    char *s;
    long len;

    if (fp == NULL)
        return NULL;
    fseek(fp, 0, SEEK_END);
    len = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    s = calloc(1, (size_t)len + 1);
    if (s != NULL && fread(s, 1, (size_t)len, fp) != (size_t)len) {
        free(s);
        s = NULL;
    }
    fclose(fp);
    return s;
}

static int group_setup(void **state)
{
    const char *tmp = getenv("TMPDIR"), *data = getenv("SLUICE_TEST_DATA");
    char src[512];

    (void)state;
    if (data != NULL && data[0] != '\0') {
        snprintf(src, sizeof(src), "%s/../e2e/ask-helpers/answer.sh", data);
    } else {
        /* tests/bridge/test_ask_handler.c -> tests/e2e/ask-helpers/answer.sh */
        const char *file = __FILE__, *slash = strrchr(file, '/');
        int dirlen = slash != NULL ? (int)(slash - file) : 1;
        snprintf(src, sizeof(src), "%.*s/../e2e/ask-helpers/answer.sh", dirlen,
                 slash != NULL ? file : ".");
    }
    snprintf(g_dir, sizeof(g_dir), "%s/sluice-test-ask-XXXXXX",
             tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
    if (mkdtemp(g_dir) == NULL) {
        fprintf(stderr, "test_ask_handler: mkdtemp '%s': %s\n", g_dir, strerror(errno));
        return -1;
    }
    snprintf(g_script, sizeof(g_script), "%s/answer.sh", g_dir);
    snprintf(g_count, sizeof(g_count), "%s/count", g_dir);
    snprintf(g_log, sizeof(g_log), "%s/log", g_dir);
    snprintf(g_sock, sizeof(g_sock), "%s/sock", g_dir);
    if (copy_file(src, g_script, 0700) < 0) {
        fprintf(stderr, "test_ask_handler: cannot copy '%s' to '%s': %s\n", src, g_script,
                strerror(errno));
        return -1;
    }
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    if (getenv("SLUICE_TEST_KEEP") == NULL) {
        unlink(g_script);
        unlink(g_count);
        unlink(g_log);
        unlink(g_sock);
        rmdir(g_dir);
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Fixture                                                                   */

struct fixture {
    uv_loop_t loop;
    struct test_watchdog watchdog;
    struct ask_broker *b;
    struct ask_handler *h;
    int bclosed, hclosed;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    assert_int_equal(test_loop_init(&f->loop, &f->watchdog, WATCHDOG_MS, TEST_WATCHDOG_FAIL), 0);
    unlink(g_count);
    unlink(g_log);
    unlink(g_sock);
    setenv("ASK_HELPER_COUNT", g_count, 1);
    setenv("ASK_HELPER_LOG", g_log, 1);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    free(*state);
    return 0;
}

static void on_bclosed(void *arg)
{
    ((struct fixture *)arg)->bclosed++;
}

static void on_hclosed(void *arg)
{
    ((struct fixture *)arg)->hclosed++;
}

static void open_handler(struct fixture *f, const char *spec, unsigned timeout_ms)
{
    const char *why = NULL;
    int rc;

    assert_int_equal(ask_broker_new(&f->b, &f->loop, timeout_ms, 1000), 0);
    rc = ask_handler_open(&f->h, &f->loop, spec, f->b, &why);
    if (rc != 0)
        fail_msg("ask_handler_open '%s': %s (%s)", spec, uv_strerror(rc), why ? why : "");
}

static void close_handler(struct fixture *f)
{
    if (f->b != NULL) {
        ask_broker_close(f->b, on_bclosed, f);
        f->b = NULL;
    }
    if (f->h != NULL) {
        ask_handler_close(f->h, on_hclosed, f);
        assert_int_equal(f->hclosed, 0); /* never synchronous */
        f->h = NULL;
    }
    /* other handles (a test server) may keep the loop alive */
    while (f->bclosed < 1 || f->hclosed < 1)
        if (uv_run(&f->loop, UV_RUN_ONCE) == 0 && (f->bclosed < 1 || f->hclosed < 1))
            fail_msg("loop went idle before the close callbacks");
    assert_int_equal(f->bclosed, 1);
    assert_int_equal(f->hclosed, 1);
}

/* Closes everything and checks the loop closes clean and no child is left. */
static void finish(struct fixture *f)
{
    if (f->b != NULL || f->h != NULL)
        close_handler(f);
    assert_int_equal(test_loop_close(&f->loop, &f->watchdog), 0);
    errno = 0;
    assert_int_equal(waitpid(-1, NULL, WNOHANG), -1); /* no child, running or zombie */
    assert_int_equal(errno, ECHILD);
}

struct answer {
    int calls;
    int allow;
    int had_reason;
    char reason[ASK_REASON_MAX + 1];
    struct ask_wait *w;
    size_t *count;
};

static void on_answer(void *arg, int allow, const char *reason)
{
    struct answer *a = arg;

    a->calls++;
    a->allow = allow;
    a->had_reason = reason != NULL;
    snprintf(a->reason, sizeof(a->reason), "%s", reason != NULL ? reason : "");
    a->w = NULL;
    if (a->count != NULL)
        (*a->count)++;
}

static void ask(struct fixture *f, const char *host, uint16_t port, struct answer *a)
{
    assert_int_equal(
        ask_broker_ask(f->b, host, port, "connect", "127.0.0.1:5555", on_answer, a, &a->w), 0);
}

static void run_until(struct fixture *f, const int *calls)
{
    test_loop_run_until(&f->loop, calls, "the answer");
}

static void run_until_count(struct fixture *f, const size_t *count, size_t want)
{
    test_loop_run_until_count(&f->loop, count, want, "answers");
}

/* Asks host:443 and waits for the answer. */
static void ask_wait(struct fixture *f, const char *host, struct answer *a)
{
    memset(a, 0, sizeof(*a));
    ask(f, host, 443, a);
    run_until(f, &a->calls);
    assert_int_equal(a->calls, 1);
}

/* ------------------------------------------------------------------------ */
/* exec                                                                      */

static void exec_open(struct fixture *f, unsigned timeout_ms)
{
    char spec[400];

    snprintf(spec, sizeof(spec), "exec:%s", g_script);
    open_handler(f, spec, timeout_ms);
}

static void test_exec_allow(void **state)
{
    struct fixture *f = *state;
    struct answer a;
    char *log;

    exec_open(f, 10000);
    ask_wait(f, "allow.test", &a);
    assert_int_equal(a.allow, 1);
    assert_int_equal(a.had_reason, 0);
    log = read_all(g_log);
    assert_non_null(log);
    assert_string_equal(log, "{\"id\":1,\"host\":\"allow.test\",\"port\":443,\"protocol\":"
                             "\"connect\",\"client\":\"127.0.0.1:5555\"}\n");
    free(log);
    /* once: asked again */
    ask_wait(f, "allow.test", &a);
    assert_int_equal(a.allow, 1);
    assert_int_equal(count_lines(g_count), 2);
    finish(f);
}

static void test_exec_deny_reason(void **state)
{
    struct fixture *f = *state;
    struct answer a;

    exec_open(f, 10000);
    ask_wait(f, "deny.test", &a);
    assert_int_equal(a.allow, 0);
    assert_string_equal(a.reason, "too risky");
    ask_wait(f, "unknown.test", &a); /* plain "deny" */
    assert_int_equal(a.allow, 0);
    assert_int_equal(a.had_reason, 0);
    finish(f);
}

static void test_exec_session_and_json(void **state)
{
    struct fixture *f = *state;
    struct answer a;

    exec_open(f, 10000);
    ask_wait(f, "session.test", &a);
    assert_int_equal(a.allow, 1);
    ask_wait(f, "json.test", &a);
    assert_int_equal(a.allow, 0);
    assert_string_equal(a.reason, "json says no");
    assert_int_equal(count_lines(g_count), 2);
    /* both remembered: answered at once, no new run */
    memset(&a, 0, sizeof(a));
    ask(f, "session.test", 443, &a);
    assert_int_equal(a.calls, 1);
    assert_int_equal(a.allow, 1);
    memset(&a, 0, sizeof(a));
    ask(f, "json.test", 443, &a);
    assert_int_equal(a.calls, 1);
    assert_int_equal(a.allow, 0);
    assert_string_equal(a.reason, "json says no");
    assert_int_equal(count_lines(g_count), 2);

    ask_wait(f, "jsonid.test", &a); /* {"id":<its id>, ...} */
    assert_int_equal(a.allow, 1);
    ask_wait(f, "jsonbadid.test", &a); /* someone else's id */
    assert_int_equal(a.allow, 0);
    assert_string_equal(a.reason, "ask program gave a malformed answer");
    finish(f);
}

static void test_exec_failures(void **state)
{
    static const struct {
        const char *host;
        const char *reason;
    } rows[] = {
        {"exit3.test", "ask program exited with status 3"},
        {"kill9.test", "ask program killed by signal 9"},
        {"garbage.test", "ask program gave a malformed answer"},
        {"late.test", "ask program exited with status 1"},
        {"long.test", "ask program's answer is too long"},
        {"empty.test", "ask program gave no answer"},
    };
    struct fixture *f = *state;
    struct answer a;
    size_t i;

    exec_open(f, 10000);
    for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        ask_wait(f, rows[i].host, &a);
        if (a.allow != 0 || strcmp(a.reason, rows[i].reason) != 0)
            fail_msg("%s: allow %d reason '%s', want deny '%s'", rows[i].host, a.allow, a.reason,
                     rows[i].reason);
    }
    /* allowed: a last line without newline, and a line followed by more output */
    ask_wait(f, "noline.test", &a);
    assert_int_equal(a.allow, 1);
    ask_wait(f, "more.test", &a);
    assert_int_equal(a.allow, 1);
    finish(f);
}

static void test_exec_timeout_kills(void **state)
{
    struct fixture *f = *state;
    struct answer a;

    exec_open(f, 300);
    ask_wait(f, "sleep.test", &a);
    assert_int_equal(a.allow, 0);
    assert_string_equal(a.reason, "no answer within 300 ms");
    /* The withdrawn child was killed and reaped: nothing keeps the loop
     * alive (a 60 s sleep would trip the watchdog). */
    assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0);
    errno = 0;
    assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
    assert_int_equal(errno, ECHILD);
    /* the handler still works */
    ask_wait(f, "allow.test", &a);
    assert_int_equal(a.allow, 1);
    finish(f);
}

static void test_exec_close_kills(void **state)
{
    struct fixture *f = *state;
    struct answer a = {0}, b = {0};

    exec_open(f, 60000);
    ask(f, "sleep.test", 443, &a);
    ask(f, "sleep.test", 444, &b);
    /* let both children start */
    while (count_lines(g_count) < 2)
        uv_run(&f->loop, UV_RUN_NOWAIT);
    close_handler(f); /* broker close denies; handler close kills and reaps */
    assert_int_equal(a.calls, 1);
    assert_int_equal(b.calls, 1);
    assert_string_equal(a.reason, "sluice is shutting down");
    finish(f);
}

static void test_exec_coalescing(void **state)
{
    struct fixture *f = *state;
    struct answer a[5];
    size_t done = 0;
    int i;

    memset(a, 0, sizeof(a));
    exec_open(f, 10000);
    for (i = 0; i < 5; i++) {
        a[i].count = &done;
        ask(f, "allow.test", 8080, &a[i]);
    }
    assert_int_equal(ask_broker_pending(f->b), 1);
    run_until_count(f, &done, 5);
    for (i = 0; i < 5; i++) {
        assert_int_equal(a[i].calls, 1);
        assert_int_equal(a[i].allow, 1);
    }
    assert_int_equal(count_lines(g_count), 1);
    finish(f);
}

static void test_exec_many(void **state)
{
    enum { N = 40 }; /* more than the handler runs at once */
    struct fixture *f = *state;
    struct answer a[N];
    char host[64];
    size_t done = 0;
    int i;

    memset(a, 0, sizeof(a));
    exec_open(f, 30000);
    for (i = 0; i < N; i++) {
        snprintf(host, sizeof(host), "%s%d.test", i % 2 ? "many" : "no", i);
        a[i].count = &done;
        ask(f, host, 443, &a[i]);
    }
    run_until_count(f, &done, N);
    for (i = 0; i < N; i++)
        assert_int_equal(a[i].allow, i % 2);
    assert_int_equal(count_lines(g_count), N);
    finish(f);
}

static void test_exec_spec_errors(void **state)
{
    struct fixture *f = *state;
    struct ask_handler *h = NULL;
    const char *why = NULL, *old;
    char spec[400], gone[320], *path, *saved;
    struct answer a;
    size_t plen;

    assert_int_equal(ask_broker_new(&f->b, &f->loop, 10000, 10), 0);
    assert_int_equal(ask_handler_open(&h, &f->loop, "exec:", f->b, &why), UV_EINVAL);
    assert_non_null(why);
    assert_int_equal(ask_handler_open(&h, &f->loop, "exec:/nonexistent/program", f->b, &why),
                     UV_ENOENT);
    assert_int_equal(ask_handler_open(&h, &f->loop, "exec:no-such-program-sluice", f->b, &why),
                     UV_ENOENT);
    assert_int_equal(ask_handler_open(&h, &f->loop, "exec:/etc", f->b, &why), UV_ENOENT);
    assert_int_equal(ask_handler_open(&h, &f->loop, "bogus", f->b, &why), UV_EINVAL);
    assert_int_equal(ask_handler_open(&h, &f->loop, "TTY", f->b, &why), UV_EINVAL);
    assert_int_equal(ask_handler_open(&h, &f->loop, "socket:", f->b, &why), UV_EINVAL);
    {
        char xs[120], longspec[200];
        memset(xs, 'x', sizeof(xs) - 1);
        xs[sizeof(xs) - 1] = '\0';
        snprintf(longspec, sizeof(longspec), "socket:/%s", xs); /* 120 bytes: over 107 */
        assert_int_equal(ask_handler_open(&h, &f->loop, longspec, f->b, &why), UV_EINVAL);
    }
    assert_null(h);

    /* a name found through PATH, as execvp finds it */
    old = getenv("PATH");
    saved = old != NULL ? strdup(old) : NULL;
    plen = strlen(g_dir) + (saved != NULL ? strlen(saved) : 0) + 2;
    path = malloc(plen);
    assert_non_null(path);
    snprintf(path, plen, "%s:%s", g_dir, saved != NULL ? saved : "");
    setenv("PATH", path, 1);
    assert_int_equal(ask_handler_open(&f->h, &f->loop, "exec:answer.sh", f->b, &why), 0);
    ask_wait(f, "allow.test", &a);
    if (saved != NULL)
        setenv("PATH", saved, 1);
    else
        unsetenv("PATH");
    free(saved);
    assert_int_equal(a.allow, 1);
    free(path);
    close_handler(f);

    /* the program disappears after the handler was opened */
    snprintf(gone, sizeof(gone), "%s/gone.sh", g_dir);
    assert_int_equal(copy_file(g_script, gone, 0700), 0);
    snprintf(spec, sizeof(spec), "exec:%s", gone);
    f->bclosed = f->hclosed = 0;
    open_handler(f, spec, 10000);
    unlink(gone);
    ask_wait(f, "allow.test", &a);
    assert_int_equal(a.allow, 0);
    assert_string_equal(a.reason, "cannot run the ask program: no such file or directory");
    finish(f);
}

/* ------------------------------------------------------------------------ */
/* socket: a server in this process                                          */

struct srv;

struct sconn {
    uv_pipe_t pipe;
    struct srv *s;
    struct sconn *next;
    int closed;
    size_t len;
    char buf[65536];
};

struct held {
    uint64_t id;
    struct sconn *c;
};

struct srv {
    uv_pipe_t listener;
    int listening;
    struct sconn *conns;
    int nconn;      /* accepted so far */
    int nquestions; /* lines read */
    int nclosed;    /* connections closed */
    struct held held[16];
    int nheld;
    char last_host[256];
};

static void srv_conn_closed(uv_handle_t *hd)
{
    struct sconn *c = hd->data;
    struct srv *s = c->s;
    struct sconn **pp;

    for (pp = &s->conns; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    }
    s->nclosed++;
    free(c);
}

static void srv_conn_close(struct sconn *c)
{
    if (c->closed)
        return;
    c->closed = 1;
    uv_close((uv_handle_t *)&c->pipe, srv_conn_closed);
}

static void srv_written(uv_write_t *req, int status)
{
    (void)status;
    free(req);
}

static void srv_send(struct sconn *c, const char *text)
{
    size_t len = strlen(text);
    uv_write_t *req;
    uv_buf_t buf;
    char *copy;

    if (c->closed)
        return;
    req = malloc(sizeof(*req) + len);
    assert_non_null(req);
    copy = (char *)(req + 1);
    memcpy(copy, text, len);
    buf = uv_buf_init(copy, (unsigned)len);
    assert_int_equal(uv_write(req, (uv_stream_t *)&c->pipe, &buf, 1, srv_written), 0);
}

static void srv_answer(struct sconn *c, uint64_t id, const char *decision, const char *reason)
{
    char line[512];

    if (reason != NULL)
        snprintf(line, sizeof(line), "{\"id\":%llu,\"decision\":\"%s\",\"reason\":\"%s\"}\n",
                 (unsigned long long)id, decision, reason);
    else
        snprintf(line, sizeof(line), "{\"id\":%llu,\"decision\":\"%s\"}\n", (unsigned long long)id,
                 decision);
    srv_send(c, line);
}

static void srv_question(struct sconn *c, const char *line, size_t len)
{
    struct srv *s = c->s;
    json_error_t err;
    json_t *o = json_loadb(line, len, 0, &err);
    const char *host;
    uint64_t id;
    char buf[512];

    assert_non_null(o);
    assert_true(json_is_integer(json_object_get(o, "id")));
    assert_int_equal(json_integer_value(json_object_get(o, "port")), 443);
    assert_string_equal(json_string_value(json_object_get(o, "protocol")), "connect");
    assert_string_equal(json_string_value(json_object_get(o, "client")), "127.0.0.1:5555");
    id = (uint64_t)json_integer_value(json_object_get(o, "id"));
    host = json_string_value(json_object_get(o, "host"));
    assert_non_null(host);
    s->nquestions++;
    snprintf(s->last_host, sizeof(s->last_host), "%s", host);

    if (strcmp(host, "allow.test") == 0) {
        srv_answer(c, id, "allow", "server ok");
    } else if (strcmp(host, "deny.test") == 0) {
        srv_answer(c, id, "deny-session", "server says no");
    } else if (strcmp(host, "bad.test") == 0) {
        srv_send(c, "this is not json\n");
    } else if (strcmp(host, "noid.test") == 0) {
        srv_send(c, "{\"decision\":\"allow\"}\n");
    } else if (strcmp(host, "close.test") == 0) {
        srv_conn_close(c);
    } else if (strcmp(host, "unknown.test") == 0) {
        /* an unknown id, a blank line, then the answer split over writes */
        snprintf(buf, sizeof(buf), "{\"id\":%llu,\"decision\":\"allow\"}\n\r\n{\"id\":%llu,",
                 (unsigned long long)id + 1000, (unsigned long long)id);
        srv_send(c, buf);
        srv_send(c, "\"decision\":\"deny\",\"reas");
        srv_send(c, "on\":\"after unknown\"}\r\n");
    } else {
        assert_true(s->nheld < 16);
        s->held[s->nheld].id = id;
        s->held[s->nheld].c = c;
        s->nheld++;
    }
    json_decref(o);
}

static void srv_alloc(uv_handle_t *hd, size_t suggested, uv_buf_t *buf)
{
    struct sconn *c = hd->data;

    (void)suggested;
    *buf = uv_buf_init(c->buf + c->len, (unsigned)(sizeof(c->buf) - c->len));
}

static void srv_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    struct sconn *c = st->data;
    char *nl;

    (void)buf;
    if (nread < 0) {
        srv_conn_close(c);
        return;
    }
    c->len += (size_t)nread;
    while (!c->closed && (nl = memchr(c->buf, '\n', c->len)) != NULL) {
        size_t n = (size_t)(nl - c->buf);
        srv_question(c, c->buf, n);
        memmove(c->buf, nl + 1, c->len - n - 1);
        c->len -= n + 1;
    }
}

static void srv_connection(uv_stream_t *l, int status)
{
    struct srv *s = l->data;
    struct sconn *c;

    assert_int_equal(status, 0);
    c = calloc(1, sizeof(*c));
    assert_non_null(c);
    c->s = s;
    assert_int_equal(uv_pipe_init(l->loop, &c->pipe, 0), 0);
    c->pipe.data = c;
    c->next = s->conns;
    s->conns = c;
    assert_int_equal(uv_accept(l, (uv_stream_t *)&c->pipe), 0);
    s->nconn++;
    assert_int_equal(uv_read_start((uv_stream_t *)&c->pipe, srv_alloc, srv_read), 0);
}

static void srv_start(struct fixture *f, struct srv *s)
{
    memset(s, 0, sizeof(*s));
    unlink(g_sock);
    assert_int_equal(uv_pipe_init(&f->loop, &s->listener, 0), 0);
    s->listener.data = s;
    assert_int_equal(uv_pipe_bind(&s->listener, g_sock), 0);
    assert_int_equal(uv_listen((uv_stream_t *)&s->listener, 16, srv_connection), 0);
    s->listening = 1;
}

/* Answers every held question (allow) on its connection. */
static void srv_release(struct srv *s)
{
    int i;

    for (i = 0; i < s->nheld; i++)
        srv_answer(s->held[i].c, s->held[i].id, "allow", "released");
    s->nheld = 0;
}

static void srv_stop(struct fixture *f, struct srv *s)
{
    struct sconn *c;

    for (c = s->conns; c != NULL; c = c->next)
        srv_conn_close(c);
    if (s->listening)
        uv_close((uv_handle_t *)&s->listener, NULL);
    s->listening = 0;
    uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_null(s->conns);
}

static void sock_open(struct fixture *f, unsigned timeout_ms)
{
    char spec[400];

    snprintf(spec, sizeof(spec), "socket:%s", g_sock);
    open_handler(f, spec, timeout_ms);
}

static void test_socket_answers(void **state)
{
    struct fixture *f = *state;
    struct answer a, b = {0}, c = {0};
    struct srv s;

    srv_start(f, &s);
    sock_open(f, 10000);
    ask_wait(f, "allow.test", &a);
    assert_int_equal(a.allow, 1);
    assert_string_equal(a.reason, "server ok");
    ask_wait(f, "deny.test", &a);
    assert_int_equal(a.allow, 0);
    assert_string_equal(a.reason, "server says no");
    memset(&a, 0, sizeof(a));
    ask(f, "deny.test", 443, &a); /* remembered */
    assert_int_equal(a.calls, 1);
    assert_int_equal(s.nquestions, 2);

    ask_wait(f, "unknown.test", &a);
    assert_int_equal(a.allow, 0);
    assert_string_equal(a.reason, "after unknown");

    /* several outstanding on one connection, answered out of order */
    ask(f, "hold1.test", 443, &b);
    ask(f, "hold2.test", 443, &c);
    while (s.nheld < 2)
        uv_run(&f->loop, UV_RUN_ONCE);
    {
        struct held t = s.held[0];
        s.held[0] = s.held[1];
        s.held[1] = t;
    }
    srv_release(&s);
    run_until(f, &b.calls);
    run_until(f, &c.calls);
    assert_int_equal(b.allow, 1);
    assert_int_equal(c.allow, 1);
    assert_string_equal(c.reason, "released");
    assert_int_equal(s.nconn, 1);
    close_handler(f);
    srv_stop(f, &s);
    finish(f);
}

static void test_socket_malformed(void **state)
{
    static const char *const bad[] = {"bad.test", "noid.test"};
    struct fixture *f = *state;
    struct answer a, held = {0};
    struct srv s;
    size_t i;

    srv_start(f, &s);
    sock_open(f, 10000);
    for (i = 0; i < 2; i++) {
        memset(&held, 0, sizeof(held));
        ask(f, "hold.test", 443, &held);
        ask_wait(f, bad[i], &a);
        assert_int_equal(a.allow, 0);
        assert_string_equal(a.reason, "the ask socket sent a malformed answer");
        /* everything pending on the dropped connection is denied */
        assert_int_equal(held.calls, 1);
        assert_int_equal(held.allow, 0);
        assert_string_equal(held.reason, "the ask socket sent a malformed answer");
        /* a new question connects again */
        ask_wait(f, "allow.test", &a);
        assert_int_equal(a.allow, 1);
        assert_int_equal(s.nconn, (int)(i + 2));
        s.nheld = 0;
    }
    close_handler(f);
    srv_stop(f, &s);
    finish(f);
}

static void test_socket_peer_closes(void **state)
{
    struct fixture *f = *state;
    struct answer a, held = {0};
    struct srv s;

    srv_start(f, &s);
    sock_open(f, 10000);
    ask(f, "hold.test", 443, &held);
    ask_wait(f, "close.test", &a);
    assert_int_equal(a.allow, 0);
    assert_string_equal(a.reason, "the ask socket closed the connection");
    assert_int_equal(held.calls, 1);
    assert_int_equal(held.allow, 0);
    ask_wait(f, "allow.test", &a);
    assert_int_equal(a.allow, 1);
    assert_int_equal(s.nconn, 2);
    close_handler(f);
    srv_stop(f, &s);
    finish(f);
}

static void test_socket_refused_then_reconnect(void **state)
{
    struct fixture *f = *state;
    struct answer a, b = {0};
    struct srv s;

    unlink(g_sock);
    sock_open(f, 10000);
    ask(f, "allow.test", 443, &b); /* both wait for the same connection attempt */
    ask_wait(f, "deny.test", &a);
    assert_int_equal(a.allow, 0);
    assert_string_equal(a.reason, "cannot connect to the ask socket: no such file or directory");
    assert_int_equal(b.calls, 1);
    assert_int_equal(b.allow, 0);

    /* a socket nobody listens on */
    {
        uv_pipe_t p;
        assert_int_equal(uv_pipe_init(&f->loop, &p, 0), 0);
        assert_int_equal(uv_pipe_bind(&p, g_sock), 0);
        ask_wait(f, "allow.test", &a);
        assert_int_equal(a.allow, 0);
        assert_string_equal(a.reason, "cannot connect to the ask socket: connection refused");
        uv_close((uv_handle_t *)&p, NULL);
        uv_run(&f->loop, UV_RUN_NOWAIT);
    }

    srv_start(f, &s);
    ask_wait(f, "allow.test", &a);
    assert_int_equal(a.allow, 1);
    assert_int_equal(s.nconn, 1);
    close_handler(f);
    srv_stop(f, &s);
    finish(f);
}

static void test_socket_late_answer_ignored(void **state)
{
    struct fixture *f = *state;
    struct answer a;
    struct srv s;

    srv_start(f, &s);
    sock_open(f, 200);
    ask_wait(f, "hold.test", &a);
    assert_int_equal(a.allow, 0);
    assert_string_equal(a.reason, "no answer within 200 ms");
    assert_int_equal(s.nheld, 1);
    srv_release(&s); /* an answer to a question that is gone */
    ask_wait(f, "allow.test", &a);
    assert_int_equal(a.allow, 1);
    assert_int_equal(s.nconn, 1); /* the connection survived */
    close_handler(f);
    srv_stop(f, &s);
    finish(f);
}

static void test_socket_close_while_connecting(void **state)
{
    struct fixture *f = *state;
    struct answer a = {0};
    struct srv s;

    srv_start(f, &s);
    sock_open(f, 10000);
    ask(f, "hold.test", 443, &a);
    close_handler(f); /* connect request cancelled; nothing answered twice */
    assert_int_equal(a.calls, 1);
    assert_string_equal(a.reason, "sluice is shutting down");
    srv_stop(f, &s);
    finish(f);
}

/* ------------------------------------------------------------------------ */
/* tty                                                                       */

#define CHILD_CHECK(cond)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "tty child: check failed at line %d: %s\n", __LINE__, #cond);          \
            return __LINE__ % 200 + 10;                                                            \
        }                                                                                          \
    } while (0)

struct child_ctx {
    uv_loop_t loop;
    struct ask_broker *b;
    struct ask_handler *h;
    int closed;
};

static void child_closed(void *arg)
{
    ((struct child_ctx *)arg)->closed++;
}

static int child_open(struct child_ctx *c, unsigned timeout_ms)
{
    const char *why = NULL;

    c->closed = 0;
    CHILD_CHECK(ask_broker_new(&c->b, &c->loop, timeout_ms, 100) == 0);
    CHILD_CHECK(ask_handler_open(&c->h, &c->loop, "tty", c->b, &why) == 0);
    return 0;
}

static int child_close(struct child_ctx *c)
{
    ask_broker_close(c->b, child_closed, c);
    ask_handler_close(c->h, child_closed, c);
    uv_run(&c->loop, UV_RUN_DEFAULT);
    CHILD_CHECK(c->closed == 2);
    return 0;
}

static int child_wait(struct child_ctx *c, const int *calls)
{
    while (*calls == 0)
        CHILD_CHECK(uv_run(&c->loop, UV_RUN_ONCE) != 0 || *calls != 0);
    return 0;
}

/* No controlling terminal: every question is denied, one warning. */
static int child_no_tty(void)
{
    struct child_ctx c;
    struct answer a = {0};
    int rc;

    CHILD_CHECK(setsid() >= 0);
    CHILD_CHECK(open("/dev/tty", O_RDWR | O_NOCTTY) < 0);
    CHILD_CHECK(uv_loop_init(&c.loop) == 0);
    if ((rc = child_open(&c, 10000)) != 0)
        return rc;
    CHILD_CHECK(ask_broker_ask(c.b, "example.com", 443, "http", "unix", on_answer, &a, &a.w) == 0);
    CHILD_CHECK(a.calls == 1);
    CHILD_CHECK(a.allow == 0);
    CHILD_CHECK(strcmp(a.reason, "no terminal to ask on (--ask tty)") == 0);
    memset(&a, 0, sizeof(a));
    CHILD_CHECK(ask_broker_ask(c.b, "example.org", 443, "http", "unix", on_answer, &a, &a.w) == 0);
    CHILD_CHECK(a.calls == 1 && a.allow == 0);
    if ((rc = child_close(&c)) != 0)
        return rc;
    CHILD_CHECK(uv_loop_close(&c.loop) == 0);
    return 0;
}

static void test_tty_none(void **state)
{
    int pfd[2], status;
    char out[4096];
    size_t len = 0;
    ssize_t n;
    pid_t pid;

    (void)state;
    assert_int_equal(pipe(pfd), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(pfd[0]);
        dup2(pfd[1], STDERR_FILENO);
        close(pfd[1]);
        alarm(20);
        _exit(child_no_tty());
    }
    close(pfd[1]);
    while ((n = read(pfd[0], out + len, sizeof(out) - 1 - len)) > 0)
        len += (size_t)n;
    out[len] = '\0';
    close(pfd[0]);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("child status 0x%x, stderr:\n%s", (unsigned)status, out);
    /* exactly one warning, naming the problem */
    assert_non_null(strstr(out, "sluice: warning: --ask tty: cannot open /dev/tty"));
    assert_null(strstr(strstr(out, "cannot open") + 1, "cannot open"));
}

/* A pty as the controlling terminal; the parent types the answers. */
static int child_pty(const char *slave)
{
    struct child_ctx c;
    struct answer a = {0}, b = {0}, x = {0}, v6 = {0}, cc = {0}, d = {0}, e = {0}, ff = {0};
    int fd, rc;

    CHILD_CHECK(setsid() >= 0);
    fd = open(slave, O_RDWR); /* a session leader's first tty becomes its controlling one */
    CHILD_CHECK(fd >= 0);
    CHILD_CHECK(uv_loop_init(&c.loop) == 0);

    if ((rc = child_open(&c, 30000)) != 0)
        return rc;
    CHILD_CHECK(
        ask_broker_ask(c.b, "a.test", 443, "socks5", "127.0.0.1:5555", on_answer, &a, &a.w) == 0);
    CHILD_CHECK(ask_broker_ask(c.b, "b.test", 80, "http", "unix", on_answer, &b, &b.w) == 0);
    if ((rc = child_wait(&c, &a.calls)) != 0 || (rc = child_wait(&c, &b.calls)) != 0)
        return rc;
    CHILD_CHECK(a.allow == 1);
    CHILD_CHECK(b.allow == 0);
    CHILD_CHECK(strcmp(b.reason, "denied on the terminal for this session") == 0);
    /* never: remembered, no prompt */
    CHILD_CHECK(ask_broker_ask(c.b, "b.test", 80, "http", "unix", on_answer, &x, &x.w) == 0);
    CHILD_CHECK(x.calls == 1 && x.allow == 0);

    /* three invalid answers deny; ^D denies; the terminal keeps working */
    CHILD_CHECK(ask_broker_ask(c.b, "c.test", 443, "http", "unix", on_answer, &cc, &cc.w) == 0);
    CHILD_CHECK(ask_broker_ask(c.b, "d.test", 443, "http", "unix", on_answer, &d, &d.w) == 0);
    CHILD_CHECK(ask_broker_ask(c.b, "e.test", 443, "http", "unix", on_answer, &e, &e.w) == 0);
    if ((rc = child_wait(&c, &cc.calls)) != 0 || (rc = child_wait(&c, &d.calls)) != 0 ||
        (rc = child_wait(&c, &e.calls)) != 0)
        return rc;
    CHILD_CHECK(cc.allow == 0);
    CHILD_CHECK(strcmp(cc.reason, "no valid answer on the terminal") == 0);
    CHILD_CHECK(d.allow == 0);
    CHILD_CHECK(strcmp(d.reason, "no answer on the terminal") == 0);
    CHILD_CHECK(e.allow == 1);
    memset(&e, 0, sizeof(e));
    CHILD_CHECK(ask_broker_ask(c.b, "e.test", 443, "http", "unix", on_answer, &e, &e.w) == 0);
    CHILD_CHECK(e.calls == 1 && e.allow == 1); /* always: remembered */

    /* type-ahead: the parent types "y" before the question exists; the
     * prompt flushes it, so only what is typed after the prompt counts */
    {
        struct pollfd p = {fd, POLLIN, 0};
        CHILD_CHECK(poll(&p, 1, 15000) == 1);
    }
    CHILD_CHECK(ask_broker_ask(c.b, "f.test", 443, "http", "unix", on_answer, &ff, &ff.w) == 0);
    if ((rc = child_wait(&c, &ff.calls)) != 0)
        return rc;
    CHILD_CHECK(ff.allow == 0);
    CHILD_CHECK(strcmp(ff.reason, "denied on the terminal") == 0);
    if ((rc = child_close(&c)) != 0)
        return rc;

    /* a prompt nobody answers */
    if ((rc = child_open(&c, 300)) != 0)
        return rc;
    CHILD_CHECK(ask_broker_ask(c.b, "2001:db8::1", 443, "connect", "[::1]:4000", on_answer, &v6,
                               &v6.w) == 0);
    if ((rc = child_wait(&c, &v6.calls)) != 0)
        return rc;
    CHILD_CHECK(v6.allow == 0);
    CHILD_CHECK(strcmp(v6.reason, "no answer within 300 ms") == 0);
    /* let the "timed out" line reach the terminal */
    uv_run(&c.loop, UV_RUN_NOWAIT);
    if ((rc = child_close(&c)) != 0)
        return rc;
    CHILD_CHECK(uv_loop_close(&c.loop) == 0);
    close(fd);
    return 0;
}

struct pty_out {
    int master;
    char buf[16384];
    size_t len, pos; /* pos: where the next expect starts */
};

/* Reads the pty until needle appears after pos; pos moves past it. */
static void expect(struct pty_out *o, const char *needle)
{
    time_t deadline = time(NULL) + 15;

    for (;;) {
        struct pollfd p = {o->master, POLLIN, 0};
        char *hit;
        ssize_t n;

        o->buf[o->len] = '\0';
        hit = strstr(o->buf + o->pos, needle);
        if (hit != NULL) {
            o->pos = (size_t)(hit - o->buf) + strlen(needle);
            return;
        }
        if (time(NULL) > deadline)
            fail_msg("pty: no '%s' in:\n%s", needle, o->buf);
        if (poll(&p, 1, 200) <= 0)
            continue;
        n = read(o->master, o->buf + o->len, sizeof(o->buf) - 1 - o->len);
        if (n <= 0)
            fail_msg("pty: read ended (%zd) without '%s' in:\n%s", n, needle, o->buf);
        o->len += (size_t)n;
    }
}

static void type(struct pty_out *o, const char *s)
{
    assert_int_equal(write(o->master, s, strlen(s)), (ssize_t)strlen(s));
}

static void test_tty_prompt(void **state)
{
    struct pty_out *o = calloc(1, sizeof(*o));
    const char *slave;
    int status;
    pid_t pid;

    (void)state;
    assert_non_null(o);
    o->master = posix_openpt(O_RDWR | O_NOCTTY);
    if (o->master < 0 || grantpt(o->master) != 0 || unlockpt(o->master) != 0 ||
        (slave = ptsname(o->master)) == NULL) {
        if (o->master >= 0)
            close(o->master);
        free(o);
        skip(); /* no pty support here */
        return;
    }
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(o->master);
        alarm(20);
        _exit(child_pty(slave));
    }

    expect(o, "sluice: allow a connection to a.test:443 from 127.0.0.1:5555 (socks5)? "
              "[y]es once, [n]o, [a]lways, [N]ever: ");
    type(o, "maybe\n");
    expect(o, "please answer");
    expect(o, "a.test:443 from 127.0.0.1:5555 (socks5)? [y]es once, [n]o, [a]lways, [N]ever: ");
    type(o, "y\n");
    expect(o, "sluice: allow a connection to b.test:80 from unix (http)? ");
    type(o, "N\n");
    expect(o, "sluice: allow a connection to c.test:443 from unix (http)? ");
    type(o, "x\n");
    expect(o, "please answer");
    expect(o, "c.test:443");
    type(o, "\n"); /* empty: asked again, not counted */
    expect(o, "c.test:443");
    type(o, "yes please\n");
    expect(o, "please answer");
    expect(o, "c.test:443");
    type(o, "maybe\n");
    expect(o, "sluice: no valid answer, denied");
    expect(o, "sluice: allow a connection to d.test:443 from unix (http)? ");
    type(o, "\x04"); /* ^D: end of input */
    expect(o, "sluice: allow a connection to e.test:443 from unix (http)? ");
    type(o, "a\n");
    expect(o, "a\r\n"); /* the echo: the answer was read */
    type(o, "y\n");     /* type-ahead, before f.test is asked */
    expect(o, "sluice: allow a connection to f.test:443 from unix (http)? ");
    type(o, "n\n");
    expect(o, "sluice: allow a connection to [2001:db8::1]:443 from [::1]:4000 (connect)? ");
    expect(o, "timed out, denied\r\n"); /* the tty turns \n into \r\n */

    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        o->buf[o->len] = '\0';
        fail_msg("child status 0x%x, terminal:\n%s", (unsigned)status, o->buf);
    }
    close(o->master);
    free(o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_exec_allow, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exec_deny_reason, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exec_session_and_json, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exec_failures, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exec_timeout_kills, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exec_close_kills, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exec_coalescing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exec_many, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exec_spec_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_socket_answers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_socket_malformed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_socket_peer_closes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_socket_refused_then_reconnect, setup, teardown),
        cmocka_unit_test_setup_teardown(test_socket_late_answer_ignored, setup, teardown),
        cmocka_unit_test_setup_teardown(test_socket_close_while_connecting, setup, teardown),
        cmocka_unit_test(test_tty_none),
        cmocka_unit_test(test_tty_prompt),
    };

    signal(SIGPIPE, SIG_IGN); /* as sluice does: EPIPE instead */
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
