/* tests/bridge/test_limit.c - the one over-limit rule (bridge/limit.h) on a
 * real loop and a real listener on 127.0.0.1 port 0: clients are plain
 * blocking sockets (a loopback connect completes in the kernel's backlog
 * without the loop running). Checks: accepting stops at the limit and the
 * first release resumes it; a raised limit resumes; an accept that ran out
 * of descriptors pauses and, with no connection live to end, the retry
 * timer resumes it. Loopback only. */
#include <setjmp.h> /* cmocka needs these first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "bridge/bridge.h"
#include "bridge/limit.h"

#define MAX_CONNS 16

struct fixture {
    uv_loop_t loop;
    struct listener *l;
    struct conn_limit cl;
    uv_tcp_t conns[MAX_CONNS];
    size_t live;       /* accepted and not released */
    size_t accepted;   /* ever */
    int fail_next;     /* the next accept reports UV_EMFILE without accepting */
    uint16_t port;
    int clients[MAX_CONNS];
    size_t nclients;
};

static void pause_us(long us)
{
    struct timespec ts = {0, us * 1000};

    nanosleep(&ts, NULL);
}

static size_t live_of(void *ctx)
{
    return ((struct fixture *)ctx)->live;
}

static void on_accept(struct listener *l, void *arg)
{
    struct fixture *fx = arg;
    int rc;

    if (conn_limit_admit(&fx->cl, l) < 0)
        return;
    if (fx->fail_next) {
        fx->fail_next = 0;
        conn_limit_accepted(&fx->cl, l, UV_EMFILE); /* left held by the listener */
        return;
    }
    assert_true(fx->accepted < MAX_CONNS);
    uv_tcp_init(&fx->loop, &fx->conns[fx->accepted]);
    rc = listener_accept(l, (uv_stream_t *)&fx->conns[fx->accepted]);
    assert_int_equal(rc, 0);
    fx->accepted++;
    fx->live++;
    conn_limit_accepted(&fx->cl, l, rc);
}

static void connect_client(struct fixture *fx)
{
    struct sockaddr_in sin;
    int s = socket(AF_INET, SOCK_STREAM, 0);

    assert_true(s >= 0);
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_port = htons(fx->port);
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(s, (struct sockaddr *)&sin, sizeof(sin)), 0);
    fx->clients[fx->nclients++] = s;
}

/* Runs the loop until accepted reaches want or 5 s pass (then fails). */
static void run_until(struct fixture *fx, size_t want)
{
    for (int i = 0; i < 500 && fx->accepted < want; i++) {
        uv_run(&fx->loop, UV_RUN_NOWAIT);
        pause_us(10000);
    }
    assert_int_equal(fx->accepted, want);
}

/* Runs the loop a while: nothing more may be accepted. */
static void run_idle(struct fixture *fx)
{
    for (int i = 0; i < 20; i++) {
        uv_run(&fx->loop, UV_RUN_NOWAIT);
        pause_us(5000);
    }
}

static int setup(void **state)
{
    struct fixture *fx = calloc(1, sizeof(*fx));
    struct endpoint ep;
    struct policy_addr a;
    const char *why = NULL;

    assert_non_null(fx);
    assert_int_equal(uv_loop_init(&fx->loop), 0);
    assert_int_equal(endpoint_parse("tcp:127.0.0.1:0", 1, &ep, &why), 0);
    assert_int_equal(listener_open(&fx->l, &fx->loop, &ep, on_accept, fx, &why), 0);
    assert_int_equal(listener_address(fx->l, &a, &fx->port), 0);
    conn_limit_init(&fx->cl, &fx->loop, 2, live_of, fx);
    *state = fx;
    return 0;
}

static void closed(uv_handle_t *h)
{
    (void)h;
}

static int teardown(void **state)
{
    struct fixture *fx = *state;

    for (size_t i = 0; i < fx->nclients; i++)
        close(fx->clients[i]);
    for (size_t i = 0; i < fx->accepted; i++)
        uv_close((uv_handle_t *)&fx->conns[i], closed);
    listener_close(fx->l, NULL, NULL);
    conn_limit_close(&fx->cl);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&fx->loop), 0);
    free(fx);
    return 0;
}

static void release(struct fixture *fx)
{
    fx->live--;
    conn_limit_released(&fx->cl);
}

static void test_pause_at_limit_resume_on_release(void **state)
{
    struct fixture *fx = *state;

    for (int i = 0; i < 4; i++)
        connect_client(fx);
    run_until(fx, 2);
    run_idle(fx);
    assert_int_equal(fx->accepted, 2); /* the limit: the rest wait in the backlog */
    assert_true(conn_limit_paused(&fx->cl));
    release(fx);
    run_until(fx, 3); /* one ended: one more is served */
    run_idle(fx);
    assert_int_equal(fx->accepted, 3);
    release(fx);
    release(fx);
    run_until(fx, 4);
    assert_false(conn_limit_paused(&fx->cl));
}

static void test_raised_limit_resumes(void **state)
{
    struct fixture *fx = *state;

    for (int i = 0; i < 4; i++)
        connect_client(fx);
    run_until(fx, 2);
    run_idle(fx);
    assert_int_equal(fx->accepted, 2);
    conn_limit_set(&fx->cl, 4); /* a reload with a higher maxConnections */
    run_until(fx, 4);
}

static void test_out_of_descriptors_resumed_by_timer(void **state)
{
    struct fixture *fx = *state;

    fx->fail_next = 1;
    connect_client(fx);
    for (int i = 0; i < 50 && !conn_limit_paused(&fx->cl); i++) {
        uv_run(&fx->loop, UV_RUN_NOWAIT);
        pause_us(5000);
    }
    assert_true(conn_limit_paused(&fx->cl)); /* nothing live: only the timer can resume */
    assert_int_equal(fx->accepted, 0);
    run_until(fx, 1); /* CONN_LIMIT_RETRY_MS later the held connection is served */
    assert_false(conn_limit_paused(&fx->cl));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_pause_at_limit_resume_on_release, setup, teardown),
        cmocka_unit_test_setup_teardown(test_raised_limit_resumes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_out_of_descriptors_resumed_by_timer, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
