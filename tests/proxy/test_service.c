/* tests/proxy/test_service.c - the proxy service of one loop
 * (proxy/service.h), in process, without a subprocess: listeners on
 * 127.0.0.1:0, real connections from a client thread with blocking
 * sockets, a local echo origin. A CONNECT is relayed; the connection over
 * maxConnections is refused (HTTP 503, bridge/limit.c's rule); a drain lets
 * the live tunnel finish and refuses new connections; close frees
 * everything (ASan in CI). No timing is asserted: the loop runs on the test
 * thread; the client thread steps it through run_on_loop(); a watchdog
 * timer and SO_RCVTIMEO only keep a broken build from hanging. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cmocka.h>
#include <uv.h>

#include "policy/policy.h"
#include "proxy/service.h"
#include "proxy/tlsterm.h"

#define WATCHDOG_MS 60000u
#define IO_TIMEOUT_S 20

struct fixture {
    uv_loop_t loop;
    uv_async_t step;
    uv_timer_t watchdog;
    uv_sem_t done;
    void (*fn)(struct fixture *f);
    struct settings s;
    struct proxy_service svc;
    uint64_t next_id;
    uint16_t port;        /* the service's HTTP listener */
    uint16_t origin_port; /* the echo origin */
    int origin_fd;
    uv_thread_t origin;
    int drained, logged;
    int fired; /* the watchdog went off */
};

/* ------------------------------------------------------------------------ */
/* The echo origin: accepts, echoes each connection until EOF, one at a time */

static void origin_thread(void *arg)
{
    struct fixture *f = arg;
    char buf[4096];

    for (;;) {
        int c = accept(f->origin_fd, NULL, NULL);
        ssize_t n;
        if (c < 0)
            return; /* shut down */
        while ((n = read(c, buf, sizeof(buf))) > 0)
            if (write(c, buf, (size_t)n) != n)
                break;
        close(c);
    }
}

static uint16_t listen_local(int *fd)
{
    struct sockaddr_in a;
    socklen_t len = sizeof(a);

    *fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(*fd >= 0);
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(*fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(*fd, 16), 0);
    assert_int_equal(getsockname(*fd, (struct sockaddr *)&a, &len), 0);
    return ntohs(a.sin_port);
}

/* ------------------------------------------------------------------------ */
/* The loop and the client thread                                            */

static void on_step(uv_async_t *a)
{
    struct fixture *f = a->data;

    f->fn(f);
    uv_sem_post(&f->done);
}

/* From the client thread: fn runs on the loop; returns once it has. */
static void run_on_loop(struct fixture *f, void (*fn)(struct fixture *f))
{
    f->fn = fn;
    assert_int_equal(uv_async_send(&f->step), 0);
    uv_sem_wait(&f->done);
}

static void on_watchdog(uv_timer_t *t)
{
    struct fixture *f = t->data;

    f->fired = 1;
    uv_stop(&f->loop);
}

static void on_log(void *ctx, const struct connlog *r)
{
    struct fixture *f = ctx;

    (void)r;
    f->logged++;
}

static void on_drained(void *ctx)
{
    struct fixture *f = ctx;

    f->drained = 1;
}

/* A blocking client of the service; -1 when refused. */
static int client(const struct fixture *f)
{
    struct sockaddr_in a;
    struct timeval tv = {.tv_sec = IO_TIMEOUT_S};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    assert_true(fd >= 0);
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(f->port);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Sends a CONNECT to the origin; the status code of the answer (its head
 * read to the blank line), or -1. */
static int connect_origin(const struct fixture *f, int fd)
{
    char req[128], head[1024];
    size_t n = 0;
    int status = -1;

    snprintf(req, sizeof(req), "CONNECT 127.0.0.1:%u HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n\r\n",
             (unsigned)f->origin_port, (unsigned)f->origin_port);
    assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
    while (n < sizeof(head) - 1) { /* byte by byte: nothing of the tunnel is eaten */
        ssize_t r = read(fd, head + n, 1);
        if (r <= 0)
            break;
        n++;
        head[n] = '\0';
        if (n >= 4 && memcmp(head + n - 4, "\r\n\r\n", 4) == 0)
            break;
    }
    head[n] = '\0';
    if (sscanf(head, "HTTP/1.%*d %d", &status) != 1)
        return -1;
    return status;
}

/* Bytes through the tunnel come back from the echo origin: 1, else 0 (no
 * cmocka assertion off the test thread). */
static int echo_through(int fd, const char *what)
{
    char buf[64];
    size_t len = strlen(what), got = 0;

    if (write(fd, what, len) != (ssize_t)len)
        return 0;
    while (got < len) {
        ssize_t r = read(fd, buf + got, len - got);
        if (r <= 0)
            return 0;
        got += (size_t)r;
    }
    return memcmp(buf, what, len) == 0;
}

/* ------------------------------------------------------------------------ */
/* Set-up and teardown                                                       */

static void start_service(struct fixture *f, const char *json)
{
    const struct proxy_service_hooks hooks = {
        .ctx = f, .log = on_log, .drained = on_drained};
    const struct proxy_service_ask ask = {0};
    struct settings_error err;
    struct policy *p = NULL;
    struct endpoint ep;
    struct listener *l = NULL;
    struct policy_addr addr;
    const char *why = NULL;
    char msg[512];

    settings_init(&f->s);
    assert_int_equal(settings_apply_buffer(&f->s, "test", json, strlen(json), &err), 0);
    assert_int_equal(policy_compile(&f->s, &p, &err), 0);
    proxy_service_init(&f->svc, &f->loop, &f->next_id, NULL, &hooks);
    assert_int_equal(endpoint_parse("tcp:127.0.0.1:0", 1, &ep, &why), 0);
    assert_int_equal(proxy_service_listen(&f->svc, PROXY_FE_HTTP, &ep, &l, &why), 0);
    assert_int_equal(listener_address(l, &addr, &f->port), 0);
    assert_int_equal(proxy_service_start(&f->svc, &f->s, proxy_service_conf_new(&f->s, p, 0),
                                         &ask, msg, sizeof(msg)),
                     0);
    policy_free(p); /* the egress has its own reference */
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    assert_int_equal(uv_loop_init(&f->loop), 0);
    assert_int_equal(uv_async_init(&f->loop, &f->step, on_step), 0);
    f->step.data = f;
    assert_int_equal(uv_sem_init(&f->done, 0), 0);
    uv_timer_init(&f->loop, &f->watchdog);
    f->watchdog.data = f;
    uv_timer_start(&f->watchdog, on_watchdog, WATCHDOG_MS, 0);
    uv_unref((uv_handle_t *)&f->watchdog);
    f->origin_port = listen_local(&f->origin_fd);
    assert_int_equal(uv_thread_create(&f->origin, origin_thread, f), 0);
    *state = f;
    return 0;
}

/* On the loop: the service closes and the loop may end. */
static void close_everything(struct fixture *f)
{
    proxy_service_close_conns(&f->svc);
    proxy_service_close(&f->svc, NULL, NULL);
    uv_close((uv_handle_t *)&f->step, NULL);
    uv_close((uv_handle_t *)&f->watchdog, NULL);
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    shutdown(f->origin_fd, SHUT_RDWR); /* accept() returns */
    uv_thread_join(&f->origin);
    close(f->origin_fd);
    proxy_service_free(&f->svc);
    relay_release_caches();
    assert_int_equal(uv_loop_close(&f->loop), 0);
    uv_sem_destroy(&f->done);
    settings_free(&f->s);
    free(f);
    return 0;
}

/* Runs scenario on a client thread while the loop runs here; the scenario
 * ends with close_everything. */
static void run_scenario(struct fixture *f, void (*scenario)(void *))
{
    uv_thread_t t;

    assert_int_equal(uv_thread_create(&t, scenario, f), 0);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    if (f->fired) { /* unstick the client, then fail */
        proxy_service_close_conns(&f->svc);
        proxy_service_close_listeners(&f->svc);
        uv_sem_post(&f->done);
    }
    uv_thread_join(&t);
    assert_false(f->fired);
}

/* ------------------------------------------------------------------------ */
/* Scenarios (client thread)                                                 */

static const char *const ALLOW_LOCAL =
    "{\"network\": {\"allowedDomains\": [\"127.0.0.1\"], \"dnsServers\": [\"127.0.0.1:9\"]}}";
static const char *const LIMIT_ONE =
    "{\"network\": {\"allowedDomains\": [\"127.0.0.1\"], \"dnsServers\": [\"127.0.0.1:9\"]},"
    " \"proxy\": {\"limits\": {\"maxConnections\": 1}}}";

static int status_a, status_b, echoed, refused, after_drain;

static void reset_results(void)
{
    status_a = status_b = -1;
    echoed = refused = after_drain = 0;
}

static void connect_relayed(void *arg)
{
    struct fixture *f = arg;
    int fd = client(f);

    status_a = fd >= 0 ? connect_origin(f, fd) : -1;
    echoed = status_a == 200 && echo_through(fd, "ping through the tunnel");
    if (fd >= 0)
        close(fd);
    run_on_loop(f, close_everything);
}

static void test_connect_relayed(void **state)
{
    struct fixture *f = *state;

    reset_results();
    start_service(f, ALLOW_LOCAL);
    run_scenario(f, connect_relayed);
    assert_int_equal(status_a, 200);
    assert_true(echoed);
    assert_true(f->logged > 0);
}

static void over_the_limit(void *arg)
{
    struct fixture *f = arg;
    int a = client(f), b;

    status_a = a >= 0 ? connect_origin(f, a) : -1;
    b = client(f); /* a is live: b is over maxConnections 1 */
    status_b = b >= 0 ? connect_origin(f, b) : -1;
    echoed = status_a == 200 && echo_through(a, "still here");
    if (b >= 0)
        close(b);
    if (a >= 0)
        close(a);
    run_on_loop(f, close_everything);
}

static void test_limit_refuses_over(void **state)
{
    struct fixture *f = *state;

    reset_results();
    start_service(f, LIMIT_ONE);
    run_scenario(f, over_the_limit);
    assert_int_equal(status_a, 200);
    assert_int_equal(status_b, 503);
    assert_true(echoed); /* the one within the limit was not disturbed */
}

static void drain(struct fixture *f)
{
    proxy_service_drain(&f->svc);
}

static void note_drained(struct fixture *f)
{
    after_drain = f->drained;
}

static void drain_lets_live_finish(void *arg)
{
    struct fixture *f = arg;
    int a = client(f), b;
    char c;

    status_a = a >= 0 ? connect_origin(f, a) : -1;
    run_on_loop(f, drain);
    b = client(f); /* the listener is closed */
    refused = b < 0 || read(b, &c, 1) <= 0;
    if (b >= 0)
        close(b);
    echoed = status_a == 200 && echo_through(a, "the live tunnel goes on");
    if (a >= 0)
        close(a);
    /* the service sees the close on its loop; wait for the drained hook
     * (the watchdog bounds this) */
    for (int i = 0; i < 60000; i++) {
        run_on_loop(f, note_drained);
        if (after_drain)
            break;
        uv_sleep(1);
    }
    run_on_loop(f, close_everything);
}

static void test_drain(void **state)
{
    struct fixture *f = *state;

    reset_results();
    start_service(f, ALLOW_LOCAL);
    run_scenario(f, drain_lets_live_finish);
    assert_int_equal(status_a, 200);
    assert_true(refused);
    assert_true(echoed);
    assert_true(after_drain);
    assert_int_equal(f->svc.state, PROXY_SERVICE_CLOSED);
}

/* The failure texts of terminated tunnels map onto the small fixed set of
 * reason labels of sluice_tls_handshake_failures_total. */
static void test_tls_fail_labels(void **state)
{
    static const struct {
        const char *reason;
        const char *label;
    } rows[] = {
        {"no TLS handshake within 300 ms (handshakeTimeoutMs)", "timeout"},
        {"no TLS handshake within 10000 ms", "timeout"},
        {"malformed ClientHello: truncated extension", "bad_hello"},
        {"a ClientHello longer than 16384 bytes", "bad_hello"},
        {"not TLS", "bad_hello"},
        {"the client offers only ALPN h2, which sluice does not serve", "alpn"},
        {"the client offers no ALPN protocol sluice serves (http/1.1)", "alpn"},
        {"the peer refused the certificate", "cert_refused"},
        {"handshake failure alert from the peer", "alert"},
        {"alert from the peer", "alert"},
        {"certificate expired", "verify"},
        {"certificate name mismatch", "verify"},
        {"unknown issuer", "verify"},
        {"invalid CA in the chain", "verify"},
        {"certificate verify failed", "verify"},
        {"the peer closed the connection during the handshake", "closed"},
        {"unexpected end of stream", "closed"},
        {"cannot connect", "connect"},
        {"cannot mint the leaf", "internal"},
        {"out of memory", "internal"},
        {"cannot make the socket pair: too many open files", "internal"},
        {"no shared cipher", "protocol"},
        {"unsupported protocol version", "protocol"},
        {"TLS protocol error", "protocol"},
        {"", "protocol"},
        {NULL, "protocol"},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        const char *got = proxy_tls_fail_names[proxy_tls_fail_of(rows[i].reason)];
        if (strcmp(got, rows[i].label) != 0)
            print_error("row %zu: '%s' -> %s, want %s\n", i,
                        rows[i].reason != NULL ? rows[i].reason : "(null)", got, rows[i].label);
        assert_string_equal(got, rows[i].label);
    }
    /* every label is a valid Prometheus label value: lower case and _ */
    for (int f = 0; f < PROXY_TLS_F_N; f++)
        assert_int_equal(strspn(proxy_tls_fail_names[f], "abcdefghijklmnopqrstuvwxyz_"),
                         strlen(proxy_tls_fail_names[f]));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_connect_relayed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_limit_refuses_over, setup, teardown),
        cmocka_unit_test_setup_teardown(test_drain, setup, teardown),
        cmocka_unit_test(test_tls_fail_labels),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
