/* tests/bridge/test_resolver.c - the c-ares/libuv resolver against a real
 * DNS server: dnsmasq on 127.0.0.1 with a free port, started by this test.
 *
 * Only 127.0.0.0/8 is ever contacted. Default-mode (resolv.conf) tests look
 * up localhost only, which c-ares never sends to DNS.
 */
#include <setjmp.h> /* cmocka needs these first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "tests/fixture/loop.h"

#include "bridge/bridge.h"
#include "policy/policy.h"

#ifndef DNSMASQ
#define DNSMASQ "/usr/sbin/dnsmasq"
#endif
#define WATCHDOG_MS 15000

/* ------------------------------------------------------------------------ */
/* dnsmasq                                                                   */

static pid_t g_dns_pid = -1;
static int g_dns_port;
static char g_dir[256];
static char g_log[300];
static char g_server[64]; /* "127.0.0.1:PORT" */

static int free_udp_port(void)
{
    struct sockaddr_in sa;
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_DGRAM, 0), port = -1;

    if (fd < 0)
        return -1;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
        port = ntohs(sa.sin_port);
    close(fd);
    return port;
}

/* The probe name only our dnsmasq knows, so a probe is never answered by
 * something else that happens to share the port. */
static char g_probe_name[64];

/* One A query for g_probe_name to 127.0.0.1:port; 1 if it was answered with
 * an address (NOERROR, ANCOUNT >= 1). */
static int probe_dns(int port)
{
    unsigned char q[128], buf[512];
    size_t len = 0, i, lab;
    struct sockaddr_in sa;
    struct pollfd pfd;
    int fd, ok = 0;
    ssize_t got;

    static const unsigned char hdr[] = {0x12, 0x34, 0x01, 0x00, 0x00, 0x01,
                                        0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
    memcpy(q, hdr, sizeof(hdr));
    len = sizeof(hdr);
    for (i = 0, lab = len++; g_probe_name[i] != '\0'; i++) { /* labels */
        if (g_probe_name[i] == '.') {
            q[lab] = (unsigned char)(len - lab - 1);
            lab = len++;
        } else {
            q[len++] = (unsigned char)g_probe_name[i];
        }
    }
    q[lab] = (unsigned char)(len - lab - 1);
    q[len++] = 0;
    q[len++] = 0x00, q[len++] = 0x01; /* A */
    q[len++] = 0x00, q[len++] = 0x01; /* IN */

    fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (fd < 0)
        return 0;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = htons((uint16_t)port);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && send(fd, q, len, 0) > 0) {
        pfd.fd = fd;
        pfd.events = POLLIN;
        if (poll(&pfd, 1, 100) == 1 && (got = recv(fd, buf, sizeof(buf), 0)) >= 12 &&
            buf[0] == 0x12 && buf[1] == 0x34 && (buf[3] & 0x0f) == 0 && (buf[6] | buf[7]) != 0)
            ok = 1;
    }
    close(fd);
    return ok;
}

static pid_t spawn_dnsmasq(int port)
{
    char portarg[32], probearg[128];
    char *argv[] = {
        (char *)DNSMASQ,
        (char *)"--no-daemon",
        (char *)"--conf-file=/dev/null",
        (char *)"--no-resolv",
        (char *)"--no-hosts",
        (char *)"--bind-interfaces",
        (char *)"--listen-address=127.0.0.1",
        portarg,
        (char *)"--local=/test/", /* unknown names under test: NXDOMAIN, never forwarded */
        probearg,
        (char *)"--host-record=a.test,10.1.2.3",
        (char *)"--host-record=v6.test,2001:db8::5",
        (char *)"--host-record=both.test,10.0.0.7,2001:db8::7",
        (char *)"--host-record=meta.test,169.254.169.254",
        (char *)"--address=/loop.test/127.0.0.1",
        (char *)"--txt-record=txt.test,no-address-here",
        (char *)"--log-queries",
        (char *)"--log-facility=-",
        NULL,
    };
    pid_t pid;

    snprintf(portarg, sizeof(portarg), "--port=%d", port);
    snprintf(probearg, sizeof(probearg), "--host-record=%s,10.99.99.99", g_probe_name);
    pid = fork();
    if (pid == 0) {
        int fd = open(g_log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the test */
        execv(DNSMASQ, argv);
        _exit(127);
    }
    return pid;
}

static void stop_dnsmasq(void)
{
    if (g_dns_pid > 0) {
        kill(g_dns_pid, SIGTERM);
        waitpid(g_dns_pid, NULL, 0);
        g_dns_pid = -1;
    }
}

static int start_dnsmasq(void)
{
    const char *tmp = getenv("TMPDIR");
    int attempt;

    snprintf(g_dir, sizeof(g_dir), "%s/sluice-test-resolver-XXXXXX",
             tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
    if (mkdtemp(g_dir) == NULL) {
        fprintf(stderr, "test_resolver: mkdtemp '%s': %s\n", g_dir, strerror(errno));
        return -1;
    }
    snprintf(g_log, sizeof(g_log), "%s/dnsmasq.log", g_dir);
    snprintf(g_probe_name, sizeof(g_probe_name), "probe-%ld.test", (long)getpid());

    for (attempt = 0; attempt < 10; attempt++) {
        int port = free_udp_port(), i;

        if (port <= 0)
            continue;
        g_dns_pid = spawn_dnsmasq(port);
        if (g_dns_pid < 0)
            return -1;
        for (i = 0; i < 250; i++) { /* up to ~5 s; a refused probe returns at once */
            struct timespec pause = {0, 20 * 1000 * 1000};
            int status;

            if (i > 0)
                nanosleep(&pause, NULL);
            if (waitpid(g_dns_pid, &status, WNOHANG) == g_dns_pid) {
                /* died: port taken in between, or bad args */
                fprintf(stderr, "test_resolver: dnsmasq on port %d exited (status 0x%x)\n", port,
                        (unsigned)status);
                g_dns_pid = -1;
                break;
            }
            if (probe_dns(port)) {
                g_dns_port = port;
                snprintf(g_server, sizeof(g_server), "127.0.0.1:%d", port);
                return 0;
            }
        }
        stop_dnsmasq();
    }
    fprintf(stderr, "test_resolver: dnsmasq did not come up; see '%s'\n", g_log);
    return -1;
}

static int group_setup(void **state)
{
    (void)state;
    return start_dnsmasq();
}

static int group_teardown(void **state)
{
    (void)state;
    stop_dnsmasq();
    if (getenv("SLUICE_TEST_KEEP") == NULL) {
        unlink(g_log);
        rmdir(g_dir);
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Fixture                                                                   */

struct fixture {
    uv_loop_t loop;
    struct test_watchdog watchdog;
    struct resolver *r;
    int closed;
    int dead_fd; /* a bound UDP socket that never answers */
    char dead[64];
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    struct sockaddr_in sa;
    socklen_t len = sizeof(sa);

    assert_non_null(f);
    assert_int_equal(test_loop_init(&f->loop, &f->watchdog, WATCHDOG_MS, TEST_WATCHDOG_FAIL), 0);

    f->dead_fd = socket(AF_INET, SOCK_DGRAM, 0);
    assert_true(f->dead_fd >= 0);
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(f->dead_fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(getsockname(f->dead_fd, (struct sockaddr *)&sa, &len), 0);
    snprintf(f->dead, sizeof(f->dead), "127.0.0.1:%d", ntohs(sa.sin_port));
    *state = f;
    return 0;
}

static void on_closed(void *arg)
{
    struct fixture *f = arg;
    f->closed++;
    f->r = NULL;
}

/* Closes the resolver (if open) and checks that the loop closes clean. */
static void finish(struct fixture *f)
{
    if (f->r != NULL) {
        resolver_close(f->r, on_closed, f);
        assert_int_equal(f->closed, 0); /* done is never synchronous */
        uv_run(&f->loop, UV_RUN_DEFAULT);
        assert_int_equal(f->closed, 1);
    }
    assert_int_equal(test_loop_close(&f->loop, &f->watchdog), 0);
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    if (f->dead_fd >= 0)
        close(f->dead_fd);
    free(f);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Results                                                                   */

struct result {
    int calls;
    enum resolver_status st;
    size_t n;
    struct policy_addr addrs[RESOLVER_MAX_ADDRS];
    uint64_t at;
    uv_loop_t *loop;
    struct resolver_query *q; /* cleared by the callback */
    size_t *count;            /* optional shared completion counter */
};

static void on_result(void *arg, enum resolver_status st, const struct policy_addr *addrs, size_t n)
{
    struct result *res = arg;

    res->calls++;
    res->st = st;
    res->n = n;
    assert_true(n <= RESOLVER_MAX_ADDRS);
    if (n > 0) {
        assert_non_null(addrs);
        memcpy(res->addrs, addrs, n * sizeof(*addrs));
    } else {
        assert_null(addrs);
    }
    res->at = res->loop != NULL ? uv_now(res->loop) : 0;
    res->q = NULL;
    if (res->count != NULL)
        (*res->count)++;
}

static int has_addr(const struct result *res, const char *text)
{
    struct policy_addr a;
    size_t i;

    memset(&a, 0, sizeof(a));
    if (inet_pton(AF_INET, text, a.bytes) == 1)
        a.family = 4;
    else if (inet_pton(AF_INET6, text, a.bytes) == 1)
        a.family = 6;
    else
        fail_msg("bad test address '%s'", text);
    for (i = 0; i < res->n; i++)
        if (res->addrs[i].family == a.family && memcmp(res->addrs[i].bytes, a.bytes, 16) == 0)
            return 1;
    return 0;
}

static void run_until(struct fixture *f, const int *calls)
{
    test_loop_run_until(&f->loop, calls, "the callback");
}

static void run_until_count(struct fixture *f, const size_t *count, size_t want)
{
    test_loop_run_until_count(&f->loop, count, want, "callbacks");
}

static void init_live(struct fixture *f, unsigned timeout_ms)
{
    const char *servers[] = {g_server};
    assert_int_equal(resolver_init(&f->r, &f->loop, servers, 1, timeout_ms), 0);
}

static void init_dead(struct fixture *f, unsigned timeout_ms)
{
    const char *servers[] = {f->dead};
    assert_int_equal(resolver_init(&f->r, &f->loop, servers, 1, timeout_ms), 0);
}

/* Looks name up on a live resolver and waits for the answer. */
static void lookup(struct fixture *f, const char *name, struct result *res)
{
    memset(res, 0, sizeof(*res));
    res->loop = &f->loop;
    assert_int_equal(resolver_query(f->r, name, on_result, res, &res->q), 0);
    run_until(f, &res->calls);
    assert_int_equal(res->calls, 1);
    assert_null(res->q);
}

/* ------------------------------------------------------------------------ */
/* Tests                                                                     */

/* Lookups on the live server: name -> status and the exact set of answers
 * (their order is RFC 6724's, which depends on this host's routes). */
struct lookup_row {
    const char *name;
    enum resolver_status st;
    const char *addrs[2]; /* NULL-terminated when fewer */
};

static const struct lookup_row lookup_rows[] = {
    {"a.test", RESOLVER_OK, {"10.1.2.3", NULL}},             /* A */
    {"v6.test", RESOLVER_OK, {"2001:db8::5", NULL}},         /* AAAA */
    {"both.test", RESOLVER_OK, {"10.0.0.7", "2001:db8::7"}}, /* both */
    {"nx.test", RESOLVER_NXDOMAIN, {NULL, NULL}},            /* no such name */
    {"txt.test", RESOLVER_NODATA, {NULL, NULL}},             /* no address */
};

static void test_lookups(void **state)
{
    struct fixture *f = *state;
    struct result res;
    size_t i, k, want;

    init_live(f, 3000);
    for (i = 0; i < sizeof(lookup_rows) / sizeof(lookup_rows[0]); i++) {
        const struct lookup_row *row = &lookup_rows[i];

        lookup(f, row->name, &res);
        for (want = 0; want < 2 && row->addrs[want] != NULL; want++)
            ;
        if (res.st != row->st || res.n != want)
            fail_msg("%s: status %d want %d, %zu answers want %zu", row->name, (int)res.st,
                     (int)row->st, res.n, want);
        for (k = 0; k < want; k++)
            if (!has_addr(&res, row->addrs[k]))
                fail_msg("%s: no answer %s", row->name, row->addrs[k]);
    }
    finish(f);
}

/* The resolver reports what DNS says; judging it is the policy guard's job. */
static void test_denied_classes_are_reported(void **state)
{
    struct fixture *f = *state;
    struct result res;

    init_live(f, 3000);
    lookup(f, "loop.test", &res);
    assert_int_equal(res.st, RESOLVER_OK);
    assert_true(has_addr(&res, "127.0.0.1"));
    lookup(f, "deep.sub.loop.test", &res);
    assert_int_equal(res.st, RESOLVER_OK);
    assert_true(has_addr(&res, "127.0.0.1"));
    lookup(f, "meta.test", &res);
    assert_int_equal(res.st, RESOLVER_OK);
    assert_int_equal(res.n, 1);
    assert_true(has_addr(&res, "169.254.169.254"));
    finish(f);
}

/* Names are looked up as given: case does not matter, no search list. */
static void test_single_label_not_searched(void **state)
{
    struct fixture *f = *state;
    struct result res;

    init_live(f, 3000);
    lookup(f, "test", &res); /* the zone apex: no address */
    assert_int_not_equal(res.st, RESOLVER_OK);
    lookup(f, "a", &res); /* never "a.test", whatever resolv.conf's search list says */
    assert_int_not_equal(res.st, RESOLVER_OK);
    lookup(f, "A.TEST", &res);
    assert_int_equal(res.st, RESOLVER_OK);
    assert_true(has_addr(&res, "10.1.2.3"));
    finish(f);
}

/* Callbacks that run inside resolver_query(): set state first. */
static void test_synchronous_completion(void **state)
{
    struct fixture *f = *state;
    struct result res;

    init_live(f, 3000);

    memset(&res, 0, sizeof(res));
    assert_int_equal(resolver_query(f->r, "localhost", on_result, &res, &res.q), 0);
    assert_int_equal(res.calls, 1); /* already answered: never sent to DNS */
    assert_null(res.q);
    assert_int_equal(res.st, RESOLVER_OK);
    assert_int_equal(res.n, 2);
    assert_true(has_addr(&res, "127.0.0.1"));
    assert_true(has_addr(&res, "::1"));

    memset(&res, 0, sizeof(res));
    assert_int_equal(resolver_query(f->r, "db.localhost", on_result, &res, &res.q), 0);
    assert_int_equal(res.calls, 1);
    assert_int_equal(res.st, RESOLVER_OK);

    /* A dotted quad is its own answer, never sent to DNS (the policy never
     * passes IP literals). */
    memset(&res, 0, sizeof(res));
    assert_int_equal(resolver_query(f->r, "10.9.8.7", on_result, &res, &res.q), 0);
    assert_int_equal(res.calls, 1);
    assert_int_equal(res.st, RESOLVER_OK);
    assert_int_equal(res.n, 1);
    assert_true(has_addr(&res, "10.9.8.7"));

    assert_int_equal(resolver_outstanding(f->r), 0);
    uv_run(&f->loop, UV_RUN_NOWAIT);
    finish(f);
}

static void test_dead_server_times_out(void **state)
{
    struct fixture *f = *state;
    struct result res;
    uint64_t start;

    init_dead(f, 400);
    memset(&res, 0, sizeof(res));
    res.loop = &f->loop;
    uv_update_time(&f->loop);
    start = uv_now(&f->loop);
    assert_int_equal(resolver_query(f->r, "a.test", on_result, &res, &res.q), 0);
    run_until(f, &res.calls);
    assert_int_equal(res.st, RESOLVER_TIMEOUT);
    assert_true(res.at - start <= 400 + 100);
    assert_true(res.at - start >= 200); /* it did wait */
    /* c-ares gives up by about the same time: nothing lingers. */
    uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_int_equal(resolver_outstanding(f->r), 0);
    assert_int_equal(res.calls, 1);
    finish(f);
}

/* A dead first server: c-ares moves on to the next one within the deadline. */
static void test_dead_then_live_server(void **state)
{
    struct fixture *f = *state;
    const char *servers[] = {f->dead, g_server};
    struct result res;

    assert_int_equal(resolver_init(&f->r, &f->loop, servers, 2, 1200), 0);
    uv_update_time(&f->loop);
    lookup(f, "a.test", &res);
    assert_int_equal(res.st, RESOLVER_OK);
    assert_true(has_addr(&res, "10.1.2.3"));
    finish(f);
}

static void never_called(void *arg, enum resolver_status st, const struct policy_addr *addrs,
                         size_t n)
{
    (void)arg;
    fail_msg("callback of a detached query ran (status %d, %zu addresses)", (int)st, n);
}

/* Live server: the answer arrives after the detach and is dropped. */
static void test_detach_before_answer(void **state)
{
    struct fixture *f = *state;
    struct resolver_query *q = NULL;
    struct result res;

    init_live(f, 3000);
    assert_int_equal(resolver_query(f->r, "both.test", never_called, NULL, &q), 0);
    assert_non_null(q);
    resolver_query_detach(q);
    assert_int_equal(resolver_outstanding(f->r), 1);
    uv_run(&f->loop, UV_RUN_DEFAULT); /* until c-ares is done with it */
    assert_int_equal(resolver_outstanding(f->r), 0);
    /* The resolver still works afterwards. */
    lookup(f, "a.test", &res);
    assert_int_equal(res.st, RESOLVER_OK);
    resolver_query_detach(NULL);
    finish(f);
}

/* Dead server: c-ares times out on its own and the query frees itself. */
static void test_detach_before_timeout(void **state)
{
    struct fixture *f = *state;
    struct resolver_query *q = NULL;

    init_dead(f, 300);
    assert_int_equal(resolver_query(f->r, "a.test", never_called, NULL, &q), 0);
    resolver_query_detach(q);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_int_equal(resolver_outstanding(f->r), 0);
    finish(f);
}

static void test_close_with_outstanding(void **state)
{
    struct fixture *f = *state;
    struct result res[3];
    struct resolver_query *qd = NULL;
    int i;

    init_dead(f, 5000);
    for (i = 0; i < 3; i++) {
        memset(&res[i], 0, sizeof(res[i]));
        assert_int_equal(resolver_query(f->r, "a.test", on_result, &res[i], &res[i].q), 0);
    }
    assert_int_equal(resolver_query(f->r, "v6.test", never_called, NULL, &qd), 0);
    resolver_query_detach(qd);
    uv_run(&f->loop, UV_RUN_NOWAIT); /* the queries are on the wire */
    assert_int_equal(resolver_outstanding(f->r), 4);

    resolver_close(f->r, on_closed, f);
    for (i = 0; i < 3; i++) {
        assert_int_equal(res[i].calls, 1); /* from inside resolver_close */
        assert_int_equal(res[i].st, RESOLVER_CANCELLED);
    }
    resolver_close(f->r, on_closed, f); /* idempotent */
    assert_int_equal(f->closed, 0);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_int_equal(f->closed, 1);
    finish(f);
}

/* resolver_close() from inside a c-ares callback; queries from callbacks. */
struct reentry {
    struct fixture *f;
    struct result first, second, third;
    int query_after_close;
};

static void on_first(void *arg, enum resolver_status st, const struct policy_addr *addrs, size_t n)
{
    struct reentry *e = arg;
    struct resolver_query *q = NULL;

    on_result(&e->first, st, addrs, n);
    assert_int_equal(resolver_query(e->f->r, "v6.test", on_result, &e->third, &e->third.q), 0);
    resolver_close(e->f->r, on_closed, e->f);
    assert_int_equal(e->third.calls, 1);
    assert_int_equal(e->third.st, RESOLVER_CANCELLED);
    e->query_after_close = resolver_query(e->f->r, "a.test", never_called, NULL, &q);
}

static void test_close_from_callback(void **state)
{
    struct fixture *f = *state;
    struct reentry e;
    const char *servers[] = {g_server};

    memset(&e, 0, sizeof(e));
    e.f = f;
    assert_int_equal(resolver_init(&f->r, &f->loop, servers, 1, 3000), 0);
    assert_int_equal(resolver_query(f->r, "a.test", on_first, &e, &e.first.q), 0);
    assert_int_equal(resolver_query(f->r, "both.test", on_result, &e.second, &e.second.q), 0);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_int_equal(f->closed, 1);
    assert_int_equal(e.first.calls, 1);
    assert_int_equal(e.first.st, RESOLVER_OK);
    assert_int_equal(e.second.calls, 1);
    assert_true(e.second.st == RESOLVER_OK || e.second.st == RESOLVER_CANCELLED);
    assert_int_equal(e.third.calls, 1);
    assert_int_equal(e.query_after_close, UV_ECANCELED);
    finish(f);
}

#define NCONC 200

static void test_concurrent(void **state)
{
    static const char *const names[] = {"a.test", "v6.test", "both.test", "nx.test", "txt.test"};
    static const enum resolver_status want[] = {RESOLVER_OK, RESOLVER_OK, RESOLVER_OK,
                                                RESOLVER_NXDOMAIN, RESOLVER_NODATA};
    static const size_t want_n[] = {1, 1, 2, 0, 0};
    struct fixture *f = *state;
    struct result *res = calloc(NCONC, sizeof(*res));
    size_t done = 0, i;

    assert_non_null(res);
    init_live(f, 5000);
    for (i = 0; i < NCONC; i++) {
        res[i].count = &done;
        res[i].loop = &f->loop;
        assert_int_equal(resolver_query(f->r, names[i % 5], on_result, &res[i], &res[i].q), 0);
    }
    assert_int_equal(resolver_outstanding(f->r), NCONC);
    run_until_count(f, &done, NCONC);
    for (i = 0; i < NCONC; i++) {
        assert_int_equal(res[i].calls, 1);
        assert_int_equal(res[i].st, want[i % 5]);
        assert_int_equal(res[i].n, want_n[i % 5]);
    }
    assert_true(has_addr(&res[0], "10.1.2.3"));
    assert_true(has_addr(&res[2], "2001:db8::7"));
    uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_int_equal(resolver_outstanding(f->r), 0);
    free(res);
    finish(f);
}

/* Each query is issued from a check callback, which runs in the same loop
 * iteration as the answer to the previous one: after c-ares closed that
 * socket (its poll's close callback still pending) and before libuv runs close
 * callbacks. The new socket gets the lowest free fd, i.e. the same number. */
struct chain {
    struct fixture *f;
    uv_check_t check;
    int inflight, left, calls, ok;
};

static void chain_cb(void *arg, enum resolver_status st, const struct policy_addr *addrs, size_t n)
{
    struct chain *ch = arg;

    ch->calls++;
    ch->inflight = 0;
    if (st == RESOLVER_OK && n >= 1)
        ch->ok++;
}

static void chain_check(uv_check_t *c)
{
    struct chain *ch = c->data;
    struct resolver_query *q = NULL;

    if (ch->inflight)
        return;
    if (ch->left == 0) {
        uv_check_stop(c);
        return;
    }
    ch->left--;
    ch->inflight = 1;
    assert_int_equal(
        resolver_query(ch->f->r, ch->left % 2 ? "a.test" : "both.test", chain_cb, ch, &q), 0);
}

static void test_socket_fd_reuse(void **state)
{
    struct fixture *f = *state;
    struct chain ch;

    memset(&ch, 0, sizeof(ch));
    ch.f = f;
    ch.left = 20;
    init_live(f, 3000);
    assert_int_equal(uv_check_init(&f->loop, &ch.check), 0);
    ch.check.data = &ch;
    assert_int_equal(uv_check_start(&ch.check, chain_check), 0);
    chain_check(&ch.check); /* the first one; later ones come from the check phase */
    uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_int_equal(ch.calls, 20);
    assert_int_equal(ch.ok, 20);
    uv_close((uv_handle_t *)&ch.check, NULL);
    finish(f);
}

/* nservers == 0: resolv.conf mode. Only localhost is looked up, which never
 * leaves the host (hosts file or c-ares's built-in loopback answer). */
static void test_default_mode_localhost(void **state)
{
    struct fixture *f = *state;
    struct result res;
    size_t i;

    assert_int_equal(resolver_init(&f->r, &f->loop, NULL, 0, 2000), 0);
    memset(&res, 0, sizeof(res));
    assert_int_equal(resolver_query(f->r, "localhost", on_result, &res, &res.q), 0);
    if (res.calls == 0)
        run_until(f, &res.calls);
    assert_int_equal(res.st, RESOLVER_OK);
    assert_true(res.n >= 1);
    for (i = 0; i < res.n; i++) {
        if (res.addrs[i].family == 4)
            assert_int_equal(res.addrs[i].bytes[0], 127);
        else
            assert_true(has_addr(&res, "::1"));
    }
    finish(f);
}

static void test_bad_arguments(void **state)
{
    static const char *const bad[] = {
        "",
        "localhost",
        "1.2.3.4:",
        "1.2.3.4:0",
        "1.2.3.4:65536",
        "1.2.3.4:053",
        "1.2.3",
        "[::1",
        "[::1]x",
        "[fe80::1%lo]:53",
        "fe80::1%lo",
        "[1.2.3.4]:53",
        "1.2.3.4:5:6x",
        "[::1]:",
        "1.2.3.4 ",
    };
    static const char *const good[] = {"127.0.0.1", "127.0.0.1:5353", "::1", "[::1]", "[::1]:5353"};
    struct fixture *f = *state;
    struct resolver *r = NULL;
    struct resolver_query *q = NULL;
    size_t i;

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *one[] = {bad[i]};
        if (resolver_init(&r, &f->loop, one, 1, 1000) != UV_EINVAL)
            fail_msg("server '%s' accepted", bad[i]);
        assert_null(r);
    }
    assert_int_equal(resolver_init(&r, &f->loop, good, 5, 0), UV_EINVAL);
    assert_int_equal(resolver_init(&r, &f->loop, NULL, 1, 1000), UV_EINVAL);
    assert_null(r);

    /* Every accepted form; nothing is queried. */
    assert_int_equal(resolver_init(&f->r, &f->loop, good, 5, 1000), 0);
    assert_int_equal(resolver_query(f->r, "", on_result, NULL, &q), UV_EINVAL);
    assert_int_equal(resolver_query(f->r, "a b.test", on_result, NULL, &q), UV_EINVAL);
    assert_int_equal(resolver_query(f->r, "::1", on_result, NULL, &q), UV_EINVAL);
    assert_int_equal(resolver_query(f->r, "a\\.test", on_result, NULL, &q), UV_EINVAL);
    {
        char longname[300];
        memset(longname, 'a', sizeof(longname) - 1);
        longname[sizeof(longname) - 1] = '\0';
        assert_int_equal(resolver_query(f->r, longname, on_result, NULL, &q), UV_EINVAL);
    }
    assert_null(q);
    assert_int_equal(resolver_outstanding(f->r), 0);
    finish(f);
}

/* ------------------------------------------------------------------------ */
/* One rule match per egress decision                                        */

/* The egress pipeline matches the rules once (policy_decide) and carries
 * the match through ask, resolve and guard (policy_verdict_finish). Each
 * row is one request on the live resolver; only loopback is ever dialed
 * (loop.test is 127.0.0.1, meta.test is refused by the guard). */
struct match_row {
    const char *json;   /* settings */
    const char *target; /* host or IP literal */
    uint16_t port;
    enum egress_result result;
    int would_deny;
};

static const struct match_row match_rows[] = {
    /* a name allowed by a rule, resolved, then judged by the guard */
    {"{\"network\": {\"allowedDomains\": [\"loop.test\"]}}", "loop.test", 9, EGRESS_DENIED, 0},
    {"{\"network\": {\"allowedDomains\": [\"meta.test\"]}}", "meta.test", 80, EGRESS_DENIED, 0},
    /* report mode lets a no-rule name through to the resolver and guard */
    {"{\"network\": {\"mode\": \"report\"}}", "meta.test", 80, EGRESS_DENIED, 1},
    /* an IP literal allowed by an IP rule: guarded, then dialed (refused) */
    {"{\"network\": {\"allowedDomains\": [\"127.0.0.1:9\"]}}", "127.0.0.1", 9, EGRESS_REFUSED, 0},
    /* denied before anything else */
    {"{\"network\": {\"deniedDomains\": [\"loop.test\"]}}", "loop.test", 9, EGRESS_DENIED, 0},
    {"{\"network\": {}}", "169.254.169.254", 80, EGRESS_DENIED, 0},
};

struct egress_result_rec {
    int calls;
    enum egress_result result;
    int would_deny;
};

static void on_egress(void *arg, const struct egress_outcome *o)
{
    struct egress_result_rec *rec = arg;

    rec->calls++;
    rec->result = o->result;
    rec->would_deny = o->would_deny;
    if (o->fd >= 0)
        close(o->fd);
}

static void test_egress_matches_once(void **state)
{
    struct fixture *f = *state;
    size_t i;

    init_live(f, 3000);
    for (i = 0; i < sizeof(match_rows) / sizeof(match_rows[0]); i++) {
        const struct match_row *row = &match_rows[i];
        struct settings s;
        struct settings_error err;
        struct policy *p = NULL;
        struct egress_env *e = NULL;
        struct egress_req *req = NULL;
        struct egress_result_rec rec = {0};
        struct policy_host h;
        unsigned long matches = 0;
        const char *why;
        uint16_t port;

        settings_init(&s);
        assert_int_equal(settings_apply_buffer(&s, "t.json", row->json, strlen(row->json), &err),
                         0);
        assert_int_equal(policy_compile(&s, &p, &err), 0);
        settings_free(&s);
        policy_count_matches(p, &matches);
        assert_int_equal(egress_env_new(&e, &f->loop, p, f->r, NULL, 2000), 0);
        assert_int_equal(policy_target_parse(row->target, row->port, &h, &port, &why), 0);
        assert_int_equal(egress_start(e, &h, port, "connect", "test", on_egress, &rec, &req), 0);
        run_until(f, &rec.calls);
        if (rec.result != row->result || rec.would_deny != row->would_deny || matches != 1)
            fail_msg("row %zu (%s): result %s want %s, would_deny %d want %d, %lu rule matches "
                     "(want 1)",
                     i, row->target, egress_result_str(rec.result), egress_result_str(row->result),
                     rec.would_deny, row->would_deny, matches);
        egress_env_free(e);
    }
    finish(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_lookups, setup, teardown),
        cmocka_unit_test_setup_teardown(test_denied_classes_are_reported, setup, teardown),
        cmocka_unit_test_setup_teardown(test_single_label_not_searched, setup, teardown),
        cmocka_unit_test_setup_teardown(test_synchronous_completion, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dead_server_times_out, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dead_then_live_server, setup, teardown),
        cmocka_unit_test_setup_teardown(test_detach_before_answer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_detach_before_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_with_outstanding, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_from_callback, setup, teardown),
        cmocka_unit_test_setup_teardown(test_concurrent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_socket_fd_reuse, setup, teardown),
        cmocka_unit_test_setup_teardown(test_default_mode_localhost, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_arguments, setup, teardown),
        cmocka_unit_test_setup_teardown(test_egress_matches_once, setup, teardown),
    };

    if (access(DNSMASQ, X_OK) != 0) {
        fprintf(stderr,
                "test_resolver: FAIL: %s not found or not executable; these tests need dnsmasq "
                "(Debian package dnsmasq-base, installed by scripts/deps.sh)\n",
                DNSMASQ);
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
