/* tests/policy/test_ask.c - the ask broker with a C handler that records
 * what it is asked and answers when the test says so.
 *
 * Deadlines are only watchdogs, except the broker timeouts under test, whose
 * exact timing is never asserted.
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
#include <uv.h>

#include "tests/fixture/loop.h"

#include "bridge/bridge.h" /* ask_broker_new/close: the broker on a loop */
#include "policy/policy.h"

#define WATCHDOG_MS 15000
#define MAXREC 16

/* ------------------------------------------------------------------------ */
/* A recording handler                                                       */

struct handler {
    struct ask_broker *b;
    int nask;
    struct {
        uint64_t id;
        char host[POLICY_HOST_MAX + 1];
        uint16_t port;
        char protocol[16];
        char client[64];
    } asked[MAXREC];
    int nwithdraw;
    uint64_t withdrawn[MAXREC];
    /* answer inside the ask call when set */
    int sync;
    enum ask_decision sync_d;
    const char *sync_reason;
};

static void h_ask(void *ctx, const struct ask_question *q)
{
    struct handler *h = ctx;
    int i = h->nask++;

    assert_true(i < MAXREC);
    assert_true(q->id > 0);
    h->asked[i].id = q->id;
    snprintf(h->asked[i].host, sizeof(h->asked[i].host), "%s", q->host);
    h->asked[i].port = q->port;
    snprintf(h->asked[i].protocol, sizeof(h->asked[i].protocol), "%s", q->protocol);
    snprintf(h->asked[i].client, sizeof(h->asked[i].client), "%s", q->client);
    if (h->sync)
        assert_int_equal(ask_broker_answer(h->b, q->id, h->sync_d, h->sync_reason), 0);
}

static void h_withdraw(void *ctx, uint64_t id)
{
    struct handler *h = ctx;

    if (h->nwithdraw < MAXREC)
        h->withdrawn[h->nwithdraw] = id;
    h->nwithdraw++;
    /* the question is gone already */
    assert_int_equal(ask_broker_answer(h->b, id, ASK_ALLOW, NULL), UV_ENOENT);
}

static const struct ask_handler_ops h_ops = {h_ask, h_withdraw};

/* ------------------------------------------------------------------------ */
/* Waiters                                                                   */

struct waiter {
    int calls;
    int allow;
    char reason[ASK_REASON_MAX + 8];
    int had_reason;
    struct ask_wait *w; /* cleared by the callback */
    int w_was_set;      /* *w had been written when the callback ran */
    int *order;         /* optional shared sequence counter */
    int seq;
    /* re-entrancy actions, run from the callback */
    void (*action)(struct waiter *self);
    struct ask_broker *b;
    void *extra;
};

static void on_answer(void *arg, int allow, const char *reason)
{
    struct waiter *wt = arg;

    wt->calls++;
    wt->allow = allow;
    wt->had_reason = reason != NULL;
    snprintf(wt->reason, sizeof(wt->reason), "%s", reason != NULL ? reason : "");
    if (reason != NULL)
        assert_true(strlen(reason) <= ASK_REASON_MAX);
    wt->w_was_set = wt->w != NULL;
    wt->w = NULL;
    if (wt->order != NULL)
        wt->seq = ++*wt->order;
    if (wt->action != NULL)
        wt->action(wt);
}

/* ------------------------------------------------------------------------ */
/* Fixture                                                                   */

struct fixture {
    uv_loop_t loop;
    struct test_watchdog watchdog;
    struct ask_broker *b;
    struct handler h;
    int closed;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    assert_int_equal(test_loop_init(&f->loop, &f->watchdog, WATCHDOG_MS, TEST_WATCHDOG_FAIL), 0);
    *state = f;
    return 0;
}

static void on_closed(void *arg)
{
    struct fixture *f = arg;
    f->closed++;
}

static void broker(struct fixture *f, unsigned timeout_ms, size_t max_pending)
{
    assert_int_equal(ask_broker_new(&f->b, &f->loop, timeout_ms, max_pending), 0);
    f->h.b = f->b;
    ask_broker_set_handler(f->b, &h_ops, &f->h);
}

/* Closes the broker (if open) and checks that the loop closes clean. */
static void finish(struct fixture *f)
{
    if (f->b != NULL) {
        ask_broker_close(f->b, on_closed, f);
        assert_int_equal(f->closed, 0); /* done is never synchronous */
        uv_run(&f->loop, UV_RUN_DEFAULT);
        assert_int_equal(f->closed, 1);
        f->b = NULL;
    }
    assert_int_equal(test_loop_close(&f->loop, &f->watchdog), 0);
}

static int teardown(void **state)
{
    free(*state);
    return 0;
}

static void ask(struct fixture *f, const char *host, uint16_t port, struct waiter *wt)
{
    assert_int_equal(
        ask_broker_ask(f->b, host, port, "connect", "127.0.0.1:5555", on_answer, wt, &wt->w), 0);
}

static void run_until(struct fixture *f, const int *calls)
{
    test_loop_run_until(&f->loop, calls, "the callback");
}

/* ------------------------------------------------------------------------ */
/* Tests                                                                     */

static void test_allow_deny_once(void **state)
{
    struct fixture *f = *state;
    struct waiter a = {0}, b = {0};

    broker(f, 10000, 100);
    ask(f, "example.com", 443, &a);
    assert_int_equal(a.calls, 0);
    assert_non_null(a.w);
    assert_int_equal(f->h.nask, 1);
    assert_string_equal(f->h.asked[0].host, "example.com");
    assert_int_equal(f->h.asked[0].port, 443);
    assert_string_equal(f->h.asked[0].protocol, "connect");
    assert_string_equal(f->h.asked[0].client, "127.0.0.1:5555");
    assert_int_equal(ask_broker_pending(f->b), 1);

    assert_int_equal(ask_broker_answer(f->b, f->h.asked[0].id, ASK_ALLOW, "fine"), 0);
    assert_int_equal(a.calls, 1);
    assert_int_equal(a.allow, 1);
    assert_string_equal(a.reason, "fine");
    assert_null(a.w);
    assert_int_equal(ask_broker_pending(f->b), 0);

    /* once: not remembered */
    ask(f, "example.com", 443, &b);
    assert_int_equal(f->h.nask, 2);
    assert_true(f->h.asked[1].id != f->h.asked[0].id);
    assert_int_equal(ask_broker_answer(f->b, f->h.asked[1].id, ASK_DENY, NULL), 0);
    assert_int_equal(b.calls, 1);
    assert_int_equal(b.allow, 0);
    assert_int_equal(b.had_reason, 0);
    assert_int_equal(f->h.nwithdraw, 0);
    finish(f);
}

static void test_allow_session_cached(void **state)
{
    struct fixture *f = *state;
    struct waiter a = {0}, b = {0}, c = {0}, d = {0};

    broker(f, 10000, 100);
    ask(f, "example.com", 443, &a);
    assert_int_equal(ask_broker_answer(f->b, f->h.asked[0].id, ASK_ALLOW_SESSION, "ok for now"), 0);
    assert_int_equal(a.calls, 1);
    assert_int_equal(a.allow, 1);

    /* same key: answered inside the call, handler not asked */
    b.w = (struct ask_wait *)&b; /* must be overwritten with NULL before cb */
    ask(f, "example.com", 443, &b);
    assert_int_equal(b.calls, 1);
    assert_int_equal(b.allow, 1);
    assert_string_equal(b.reason, "ok for now");
    assert_int_equal(b.w_was_set, 0);
    assert_null(b.w);
    assert_int_equal(f->h.nask, 1);
    assert_int_equal(ask_broker_pending(f->b), 0);

    /* another port and another host are other questions */
    ask(f, "example.com", 80, &c);
    assert_int_equal(c.calls, 0);
    assert_int_equal(f->h.nask, 2);
    assert_int_equal(f->h.asked[1].port, 80);
    ask(f, "www.example.com", 443, &d);
    assert_int_equal(d.calls, 0);
    assert_int_equal(f->h.nask, 3);
    assert_int_equal(ask_broker_answer(f->b, f->h.asked[1].id, ASK_DENY, NULL), 0);
    assert_int_equal(ask_broker_answer(f->b, f->h.asked[2].id, ASK_DENY, NULL), 0);
    assert_int_equal(c.allow, 0);
    assert_int_equal(d.allow, 0);
    finish(f);
}

static void test_deny_session_cached(void **state)
{
    struct fixture *f = *state;
    struct waiter a = {0}, b = {0}, c = {0};

    broker(f, 10000, 100);
    ask(f, "evil.example", 443, &a);
    assert_int_equal(ask_broker_answer(f->b, f->h.asked[0].id, ASK_DENY_SESSION, "not today"), 0);
    assert_int_equal(a.allow, 0);
    assert_string_equal(a.reason, "not today");
    ask(f, "evil.example", 443, &b);
    assert_int_equal(b.calls, 1);
    assert_int_equal(b.allow, 0);
    assert_string_equal(b.reason, "not today");
    assert_int_equal(f->h.nask, 1);

    /* without a reason, a cached hit has none either */
    ask(f, "evil.example", 8443, &a);
    assert_int_equal(ask_broker_answer(f->b, f->h.asked[1].id, ASK_DENY_SESSION, NULL), 0);
    ask(f, "evil.example", 8443, &c);
    assert_int_equal(c.calls, 1);
    assert_int_equal(c.allow, 0);
    assert_int_equal(c.had_reason, 0);
    assert_int_equal(f->h.nask, 2);
    finish(f);
}

static void test_coalescing(void **state)
{
    struct fixture *f = *state;
    struct waiter w[3];
    int order = 0, i;

    memset(w, 0, sizeof(w));
    broker(f, 10000, 100);
    for (i = 0; i < 3; i++) {
        w[i].order = &order;
        assert_int_equal(ask_broker_ask(f->b, "example.com", 443, "http",
                                        i == 0 ? "first" : "other", on_answer, &w[i], &w[i].w),
                         0);
    }
    assert_int_equal(f->h.nask, 1);
    assert_string_equal(f->h.asked[0].client, "first");
    assert_int_equal(ask_broker_pending(f->b), 1);
    assert_int_equal(ask_broker_answer(f->b, f->h.asked[0].id, ASK_ALLOW, "all of you"), 0);
    for (i = 0; i < 3; i++) {
        assert_int_equal(w[i].calls, 1);
        assert_int_equal(w[i].allow, 1);
        assert_string_equal(w[i].reason, "all of you");
        assert_int_equal(w[i].seq, i + 1); /* arrival order */
    }
    assert_int_equal(ask_broker_answer(f->b, f->h.asked[0].id, ASK_ALLOW, NULL), UV_ENOENT);
    finish(f);
}

static void test_cancel_waiter(void **state)
{
    struct fixture *f = *state;
    struct waiter w[3], x = {0}, y = {0};
    int i;

    memset(w, 0, sizeof(w));
    broker(f, 10000, 100);
    for (i = 0; i < 3; i++)
        ask(f, "example.com", 443, &w[i]);
    ask_wait_cancel(w[1].w);
    ask_wait_cancel(NULL); /* no-op */
    assert_int_equal(ask_broker_answer(f->b, f->h.asked[0].id, ASK_DENY, "no"), 0);
    assert_int_equal(w[0].calls, 1);
    assert_int_equal(w[1].calls, 0);
    assert_int_equal(w[2].calls, 1);

    /* every waiter gone: the question stays, and a session answer is still
     * remembered; a new waiter can join it */
    ask(f, "lonely.example", 443, &x);
    ask_wait_cancel(x.w);
    assert_int_equal(ask_broker_pending(f->b), 1);
    ask(f, "lonely.example", 443, &y);
    assert_int_equal(f->h.nask, 2);
    ask_wait_cancel(y.w);
    assert_int_equal(ask_broker_answer(f->b, f->h.asked[1].id, ASK_ALLOW_SESSION, NULL), 0);
    assert_int_equal(x.calls, 0);
    assert_int_equal(y.calls, 0);
    memset(&x, 0, sizeof(x));
    ask(f, "lonely.example", 443, &x);
    assert_int_equal(x.calls, 1);
    assert_int_equal(x.allow, 1);
    assert_int_equal(f->h.nask, 2);
    finish(f);
}

static void test_timeout(void **state)
{
    struct fixture *f = *state;
    struct waiter a = {0}, b = {0}, c = {0};

    broker(f, 50, 100);
    ask(f, "slow.example", 443, &a);
    ask(f, "slow.example", 443, &b);
    ask(f, "gone.example", 443, &c);
    ask_wait_cancel(c.w); /* no waiter left: still times out and is withdrawn */
    run_until(f, &a.calls);
    assert_int_equal(a.calls, 1);
    assert_int_equal(b.calls, 1);
    assert_int_equal(a.allow, 0);
    assert_string_equal(a.reason, "no answer within 50 ms");
    assert_string_equal(b.reason, "no answer within 50 ms");
    assert_int_equal(ask_broker_answer(f->b, f->h.asked[0].id, ASK_ALLOW, NULL), UV_ENOENT);
    /* the loop ends once nothing is pending: the timer is stopped */
    assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(c.calls, 0);
    assert_int_equal(f->h.nwithdraw, 2);
    assert_int_equal(f->h.withdrawn[0], f->h.asked[0].id);
    assert_int_equal(f->h.withdrawn[1], f->h.asked[1].id);
    assert_int_equal(ask_broker_pending(f->b), 0);
    finish(f);
}

static void test_timeout_whole_seconds(void **state)
{
    struct fixture *f = *state;
    struct waiter a = {0}, b = {0};

    broker(f, 1000, 100);
    ask(f, "first.example", 443, &a);
    ask(f, "second.example", 443, &b);
    /* answering the head re-arms the timer for the next question */
    assert_int_equal(ask_broker_answer(f->b, f->h.asked[0].id, ASK_ALLOW, NULL), 0);
    assert_int_equal(a.allow, 1);
    run_until(f, &b.calls);
    assert_int_equal(b.allow, 0);
    assert_string_equal(b.reason, "no answer within 1 s");
    assert_int_equal(f->h.nwithdraw, 1);
    assert_int_equal(f->h.withdrawn[0], f->h.asked[1].id);
    finish(f);
}

static void test_max_pending(void **state)
{
    struct fixture *f = *state;
    struct waiter a = {0}, b = {0}, c = {0}, a2 = {0};

    broker(f, 10000, 2);
    ask(f, "a.example", 443, &a);
    ask(f, "b.example", 443, &b);
    c.w = (struct ask_wait *)&c;
    assert_int_equal(ask_broker_ask(f->b, "c.example", 443, "connect", "x", on_answer, &c, &c.w),
                     UV_EBUSY);
    assert_int_equal(c.calls, 0);
    assert_int_equal(f->h.nask, 2);
    /* joining an outstanding question is not a new one */
    ask(f, "a.example", 443, &a2);
    assert_int_equal(ask_broker_pending(f->b), 2);
    assert_int_equal(ask_broker_answer(f->b, f->h.asked[0].id, ASK_ALLOW, NULL), 0);
    assert_int_equal(a2.calls, 1);
    memset(&c, 0, sizeof(c));
    ask(f, "c.example", 443, &c);
    assert_int_equal(f->h.nask, 3);
    assert_int_equal(ask_broker_pending(f->b), 2);
    finish(f); /* b and c are denied by the close */
    assert_int_equal(b.calls, 1);
    assert_int_equal(c.calls, 1);
}

static void test_answer_unknown_id(void **state)
{
    struct fixture *f = *state;
    struct waiter a = {0};

    broker(f, 10000, 100);
    assert_int_equal(ask_broker_answer(f->b, 12345, ASK_ALLOW, NULL), UV_ENOENT);
    assert_int_equal(ask_broker_answer(f->b, 0, ASK_ALLOW, NULL), UV_ENOENT);
    ask(f, "example.com", 443, &a);
    assert_int_equal(ask_broker_answer(f->b, f->h.asked[0].id + 1, ASK_ALLOW, NULL), UV_ENOENT);
    assert_int_equal(ask_broker_answer(f->b, f->h.asked[0].id, (enum ask_decision)42, NULL),
                     UV_EINVAL);
    assert_int_equal(a.calls, 0);
    assert_int_equal(ask_broker_answer(f->b, f->h.asked[0].id, ASK_ALLOW, NULL), 0);
    assert_int_equal(ask_broker_answer(f->b, f->h.asked[0].id, ASK_ALLOW, NULL), UV_ENOENT);
    assert_int_equal(a.calls, 1);
    finish(f);
}

static void test_reason_sanitising(void **state)
{
    static const struct {
        const char *in;
        const char *out; /* NULL: no reason */
    } rows[] = {
        {"first line\nsecond line", "first line"},
        {"carriage\rreturn", "carriage"},
        {"bell\a esc\x1b[31m del\x7f", "bell? esc?[31m del?"},
        {"tab\there", "tab here"},
        {"caf\xc3\xa9", "caf??"},
        {"  padded  ", "padded"},
        {"", NULL},
        {"\n", NULL},
        {"   \nhidden", NULL},
        {NULL, NULL},
    };
    struct fixture *f = *state;
    char big[501];
    size_t i;
    int n = 0;

    broker(f, 10000, 100);
    for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        struct waiter a = {0};

        ask(f, "example.com", 443, &a);
        assert_int_equal(ask_broker_answer(f->b, f->h.asked[n++].id, ASK_DENY, rows[i].in), 0);
        assert_int_equal(a.calls, 1);
        if (rows[i].out == NULL) {
            assert_int_equal(a.had_reason, 0);
        } else {
            assert_int_equal(a.had_reason, 1);
            assert_string_equal(a.reason, rows[i].out);
        }
        if (n == MAXREC)
            n = f->h.nask = 0;
    }

    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    {
        struct waiter a = {0};
        char want[ASK_REASON_MAX + 1];

        memset(want, 'x', ASK_REASON_MAX);
        want[ASK_REASON_MAX] = '\0';
        ask(f, "example.com", 443, &a);
        assert_int_equal(ask_broker_answer(f->b, f->h.asked[n].id, ASK_DENY, big), 0);
        assert_int_equal(strlen(a.reason), ASK_REASON_MAX);
        assert_string_equal(a.reason, want);
    }
    finish(f);
}

static void test_close_with_pending(void **state)
{
    struct fixture *f = *state;
    struct waiter a = {0}, b = {0}, c = {0}, d = {0};

    broker(f, 10000, 100);
    ask(f, "one.example", 443, &a);
    ask(f, "one.example", 443, &b);
    ask(f, "two.example", 80, &c);
    ask_broker_close(f->b, on_closed, f);
    assert_int_equal(a.calls, 1);
    assert_int_equal(b.calls, 1);
    assert_int_equal(c.calls, 1);
    assert_int_equal(a.allow + b.allow + c.allow, 0);
    assert_string_equal(a.reason, "sluice is shutting down");
    assert_string_equal(c.reason, "sluice is shutting down");
    assert_int_equal(f->h.nwithdraw, 2);
    assert_int_equal(f->closed, 0);
    /* closing: no new questions, close is idempotent */
    assert_int_equal(ask_broker_ask(f->b, "x.example", 1, "http", "c", on_answer, &d, &d.w),
                     UV_ECANCELED);
    ask_broker_close(f->b, on_closed, f);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_int_equal(f->closed, 1);
    assert_int_equal(d.calls, 0);
    f->b = NULL;
    finish(f);
}

static void test_handler_answers_inside_ask(void **state)
{
    struct fixture *f = *state;
    struct waiter a = {0}, b = {0};

    broker(f, 10000, 100);
    f->h.sync = 1;
    f->h.sync_d = ASK_ALLOW;
    f->h.sync_reason = "quick";
    ask(f, "example.com", 443, &a);
    assert_int_equal(a.calls, 1);
    assert_int_equal(a.w_was_set, 1); /* *w was written before the handler ran */
    assert_null(a.w);
    assert_string_equal(a.reason, "quick");
    assert_int_equal(ask_broker_pending(f->b), 0);

    f->h.sync_d = ASK_DENY_SESSION;
    ask(f, "example.org", 443, &b);
    assert_int_equal(b.calls, 1);
    assert_int_equal(b.allow, 0);
    memset(&b, 0, sizeof(b));
    ask(f, "example.org", 443, &b);
    assert_int_equal(b.calls, 1);
    assert_int_equal(f->h.nask, 2);
    finish(f);
}

static void test_no_handler_and_bad_args(void **state)
{
    struct fixture *f = *state;
    struct ask_broker *tmp = NULL;
    struct waiter a = {0};
    enum ask_decision d;
    char longhost[POLICY_HOST_MAX + 2];

    assert_int_equal(ask_broker_new(&tmp, &f->loop, 0, 10), UV_EINVAL);
    assert_int_equal(ask_broker_new(&tmp, &f->loop, 10, 0), UV_EINVAL);
    assert_null(tmp);

    assert_int_equal(ask_broker_new(&f->b, &f->loop, 1000, 10), 0);
    assert_int_equal(ask_broker_ask(f->b, "example.com", 443, "http", "c", on_answer, &a, &a.w),
                     UV_ENOENT);
    f->h.b = f->b;
    ask_broker_set_handler(f->b, &h_ops, &f->h);
    assert_int_equal(ask_broker_ask(f->b, "", 443, "http", "c", on_answer, &a, &a.w), UV_EINVAL);
    memset(longhost, 'a', sizeof(longhost) - 1);
    longhost[sizeof(longhost) - 1] = '\0';
    assert_int_equal(ask_broker_ask(f->b, longhost, 443, "http", "c", on_answer, &a, &a.w),
                     UV_EINVAL);
    longhost[POLICY_HOST_MAX] = '\0'; /* the longest canonical host is fine */
    assert_int_equal(ask_broker_ask(f->b, longhost, 65535, NULL, NULL, on_answer, &a, &a.w), 0);
    assert_string_equal(f->h.asked[0].protocol, "");
    assert_string_equal(f->h.asked[0].client, "");
    assert_int_equal(a.calls, 0);
    assert_int_equal(ask_broker_answer(f->b, f->h.asked[0].id, ASK_ALLOW_SESSION, NULL), 0);
    assert_int_equal(a.calls, 1);
    assert_int_equal(ask_broker_pending(NULL), 0);

    assert_int_equal(ask_decision_parse("allow", 5, &d), 0);
    assert_int_equal(d, ASK_ALLOW);
    assert_int_equal(ask_decision_parse("deny", 4, &d), 0);
    assert_int_equal(d, ASK_DENY);
    assert_int_equal(ask_decision_parse("allow-session", 13, &d), 0);
    assert_int_equal(d, ASK_ALLOW_SESSION);
    assert_int_equal(ask_decision_parse("deny-session", 12, &d), 0);
    assert_int_equal(d, ASK_DENY_SESSION);
    assert_int_equal(ask_decision_parse("Allow", 5, &d), UV_EINVAL);
    assert_int_equal(ask_decision_parse("allowx", 6, &d), UV_EINVAL);
    assert_int_equal(ask_decision_parse("allow", 4, &d), UV_EINVAL);
    assert_int_equal(ask_decision_parse("", 0, &d), UV_EINVAL);
    assert_int_equal(ask_decision_parse("deny ", 5, &d), UV_EINVAL);
    finish(f);
}

/* ------------------------------------------------------------------------ */
/* Re-entrancy                                                               */

static struct fixture *g_f; /* for actions */

/* asks the same key again from its callback */
static void act_ask_again(struct waiter *self)
{
    struct waiter *next = self->extra;

    self->action = NULL;
    assert_int_equal(
        ask_broker_ask(self->b, "example.com", 443, "connect", "again", on_answer, next, &next->w),
        0);
}

/* cancels another waiter of the same question */
static void act_cancel(struct waiter *self)
{
    struct waiter *victim = self->extra;

    ask_wait_cancel(victim->w);
    victim->w = NULL;
    ask_wait_cancel(NULL);
}

/* closes the broker */
static void act_close(struct waiter *self)
{
    ask_broker_close(self->b, on_closed, g_f);
}

static void test_reentrant_ask(void **state)
{
    struct fixture *f = *state;
    struct waiter a = {0}, again = {0}, b = {0}, again2 = {0};

    broker(f, 10000, 100);
    /* once answer: the callback's ask is a new question */
    a.action = act_ask_again;
    a.b = f->b;
    a.extra = &again;
    ask(f, "example.com", 443, &a);
    assert_int_equal(ask_broker_answer(f->b, f->h.asked[0].id, ASK_ALLOW, NULL), 0);
    assert_int_equal(a.calls, 1);
    assert_int_equal(again.calls, 0);
    assert_int_equal(f->h.nask, 2);
    assert_string_equal(f->h.asked[1].client, "again");
    assert_int_equal(ask_broker_pending(f->b), 1);

    /* session answer: the callback's ask hits the cache at once */
    b.action = act_ask_again;
    b.b = f->b;
    b.extra = &again2;
    ask(f, "example.com", 443, &b); /* joins question 2 */
    assert_int_equal(ask_broker_answer(f->b, f->h.asked[1].id, ASK_ALLOW_SESSION, NULL), 0);
    assert_int_equal(again.calls, 1);
    assert_int_equal(b.calls, 1);
    assert_int_equal(again2.calls, 1);
    assert_int_equal(again2.allow, 1);
    assert_int_equal(f->h.nask, 2);
    finish(f);
}

static void test_reentrant_cancel(void **state)
{
    struct fixture *f = *state;
    struct waiter w[3];

    memset(w, 0, sizeof(w));
    broker(f, 10000, 100);
    ask(f, "example.com", 443, &w[0]);
    ask(f, "example.com", 443, &w[1]);
    ask(f, "example.com", 443, &w[2]);
    w[0].action = act_cancel;
    w[0].extra = &w[2];
    w[1].action = act_cancel; /* cancels itself while delivered: no-op */
    w[1].extra = &w[1];
    assert_int_equal(ask_broker_answer(f->b, f->h.asked[0].id, ASK_ALLOW, NULL), 0);
    assert_int_equal(w[0].calls, 1);
    assert_int_equal(w[1].calls, 1);
    assert_int_equal(w[2].calls, 0);
    finish(f);
}

static void test_reentrant_close(void **state)
{
    struct fixture *f = *state;
    struct waiter a = {0}, a2 = {0}, other = {0}, t = {0}, t2 = {0};

    g_f = f;
    broker(f, 10000, 100);
    a.action = act_close;
    a.b = f->b;
    ask(f, "example.com", 443, &a);
    ask(f, "example.com", 443, &a2);
    ask(f, "other.example", 443, &other);
    assert_int_equal(ask_broker_answer(f->b, f->h.asked[0].id, ASK_ALLOW, "yes"), 0);
    /* the question being answered still reaches every waiter */
    assert_int_equal(a.calls, 1);
    assert_int_equal(a2.calls, 1);
    assert_int_equal(a2.allow, 1);
    assert_string_equal(a2.reason, "yes");
    /* the others were denied by the close */
    assert_int_equal(other.calls, 1);
    assert_int_equal(other.allow, 0);
    assert_string_equal(other.reason, "sluice is shutting down");
    assert_int_equal(f->h.nwithdraw, 1);
    assert_int_equal(f->closed, 0);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_int_equal(f->closed, 1);

    /* close from a timeout callback */
    f->closed = 0;
    memset(&f->h, 0, sizeof(f->h));
    broker(f, 20, 100);
    t.action = act_close;
    t.b = f->b;
    ask(f, "slow.example", 443, &t);
    ask(f, "slower.example", 443, &t2);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_int_equal(t.calls, 1);
    assert_int_equal(t2.calls, 1);
    assert_int_equal(t.allow + t2.allow, 0);
    assert_int_equal(f->closed, 1);
    f->b = NULL;

    /* close from a cache hit inside ask_broker_ask */
    f->closed = 0;
    memset(&f->h, 0, sizeof(f->h));
    broker(f, 10000, 100);
    memset(&a, 0, sizeof(a));
    ask(f, "example.com", 443, &a);
    assert_int_equal(ask_broker_answer(f->b, f->h.asked[0].id, ASK_DENY_SESSION, NULL), 0);
    memset(&a, 0, sizeof(a));
    memset(&other, 0, sizeof(other));
    ask(f, "other.example", 443, &other);
    a.action = act_close;
    a.b = f->b;
    ask(f, "example.com", 443, &a);
    assert_int_equal(a.calls, 1);
    assert_int_equal(other.calls, 1);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_int_equal(f->closed, 1);
    f->b = NULL;
    finish(f);
}

static void test_many_questions(void **state)
{
    enum { N = 2000 };
    struct fixture *f = *state;
    struct waiter *w = calloc(N, sizeof(*w));
    char host[64];
    size_t i;

    assert_non_null(w);
    assert_int_equal(ask_broker_new(&f->b, &f->loop, 60000, N), 0);
    /* ids are consecutive from 1 */
    f->h.b = f->b;
    ask_broker_set_handler(f->b, &h_ops, &f->h);
    for (i = 0; i < N; i++) {
        snprintf(host, sizeof(host), "h%zu.example", i);
        if (f->h.nask == MAXREC)
            f->h.nask = 0;
        ask(f, host, (uint16_t)(i % 3 + 1), &w[i]);
    }
    assert_int_equal(ask_broker_pending(f->b), N);
    /* answer in reverse, every other one for the session */
    for (i = N; i-- > 0;)
        assert_int_equal(
            ask_broker_answer(f->b, (uint64_t)i + 1, i % 2 ? ASK_ALLOW_SESSION : ASK_DENY, NULL),
            0);
    assert_int_equal(ask_broker_pending(f->b), 0);
    for (i = 0; i < N; i++) {
        assert_int_equal(w[i].calls, 1);
        assert_int_equal(w[i].allow, (int)(i % 2));
    }
    /* the session answers are remembered, the once ones are not */
    for (i = 0; i < N; i++) {
        struct waiter x = {0};
        snprintf(host, sizeof(host), "h%zu.example", i);
        if (f->h.nask == MAXREC)
            f->h.nask = 0;
        ask(f, host, (uint16_t)(i % 3 + 1), &x);
        assert_int_equal(x.calls, (int)(i % 2));
        if (x.calls == 0)
            ask_wait_cancel(x.w);
    }
    free(w);
    assert_int_equal(ask_broker_pending(f->b), N / 2);
    finish(f);
    assert_int_equal(f->h.nwithdraw, N / 2);
}

/* The broker itself keeps no loop: on a hand-driven clock, a question's
 * deadline is now + timeout, the clock hears of every change of the
 * earliest deadline, and expire() denies exactly what is due. */
struct fake_clock {
    uint64_t now;
    int changed;
};

static uint64_t fake_now(void *ctx)
{
    return ((struct fake_clock *)ctx)->now;
}

static void fake_changed(void *ctx)
{
    ((struct fake_clock *)ctx)->changed++;
}

static void test_loop_free_deadlines(void **state)
{
    struct fake_clock fc = {1000, 0};
    struct ask_clock clock = {fake_now, fake_changed, &fc};
    struct handler h;
    struct waiter a, b;
    struct ask_broker *br = NULL;
    uint64_t at = 0;

    (void)state;
    memset(&h, 0, sizeof(h));
    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    assert_int_equal(ask_broker_open(&br, &clock, 0, 4), -EINVAL);
    assert_int_equal(ask_broker_open(&br, &clock, 2000, 4), 0);
    h.b = br;
    ask_broker_set_handler(br, &h_ops, &h);
    assert_int_equal(ask_broker_next_deadline(br, &at), 0);

    assert_int_equal(ask_broker_ask(br, "a.example", 443, "connect", "c", on_answer, &a, &a.w), 0);
    assert_int_equal(fc.changed, 1);
    assert_int_equal(ask_broker_next_deadline(br, &at), 1);
    assert_true(at == 3000);
    fc.now = 1500;
    assert_int_equal(ask_broker_ask(br, "b.example", 443, "connect", "c", on_answer, &b, &b.w), 0);
    assert_int_equal(fc.changed, 1); /* not the earliest */

    ask_broker_expire(br, 2999);
    assert_int_equal(a.calls, 0);
    ask_broker_expire(br, 3000);
    assert_int_equal(a.calls, 1);
    assert_int_equal(a.allow, 0);
    assert_string_equal(a.reason, "no answer within 2 s");
    assert_int_equal(h.nwithdraw, 1);
    assert_int_equal(b.calls, 0);
    assert_int_equal(ask_broker_next_deadline(br, &at), 1);
    assert_true(at == 3500);

    ask_broker_shutdown(br);
    assert_int_equal(b.calls, 1);
    assert_int_equal(b.allow, 0);
    assert_int_equal(ask_broker_closing(br), 1);
    assert_int_equal(ask_broker_next_deadline(br, &at), 0);
    assert_int_equal(ask_broker_ask(br, "c.example", 443, NULL, NULL, on_answer, &a, &a.w),
                     -ECANCELED);
    ask_broker_free(br);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loop_free_deadlines),
        cmocka_unit_test_setup_teardown(test_allow_deny_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_allow_session_cached, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deny_session_cached, setup, teardown),
        cmocka_unit_test_setup_teardown(test_coalescing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_waiter, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timeout_whole_seconds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_max_pending, setup, teardown),
        cmocka_unit_test_setup_teardown(test_answer_unknown_id, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reason_sanitising, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_with_pending, setup, teardown),
        cmocka_unit_test_setup_teardown(test_handler_answers_inside_ask, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_handler_and_bad_args, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reentrant_ask, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reentrant_cancel, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reentrant_close, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_questions, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
