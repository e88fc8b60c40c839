/* bridge/ask_timer.c - the ask broker's event-loop side.
 *
 * policy/ask.c keeps no loop: it asks its clock for the time and says when
 * its earliest deadline changed. This file is that clock: uv_now() and one
 * uv_timer_t armed for the broker's next deadline, which calls
 * ask_broker_expire(). Closing stops the timer, shuts the broker down (every
 * waiter is denied from inside the call) and frees it from the timer's close
 * callback, so the broker stays valid for the rest of any stack that closed
 * it.
 */
#include "bridge/bridge.h"

#include <stdlib.h>

#include "common/common.h"

struct ask_timer {
    uv_timer_t timer; /* armed for the broker's next deadline while there is one */
    uv_loop_t *loop;
    struct ask_broker *b;
    void (*done)(void *arg);
    void *done_arg;
};

static uint64_t clock_now(void *ctx)
{
    struct ask_timer *t = ctx;

    return uv_now(t->loop);
}

static void on_timer(uv_timer_t *timer)
{
    struct ask_timer *t = container_of(timer, struct ask_timer, timer);

    ask_broker_expire(t->b, uv_now(t->loop));
}

static void clock_changed(void *ctx)
{
    struct ask_timer *t = ctx;
    uint64_t at, now;

    if (!ask_broker_next_deadline(t->b, &at)) {
        uv_timer_stop(&t->timer);
        return;
    }
    now = uv_now(t->loop);
    uv_timer_start(&t->timer, on_timer, at > now ? at - now : 0, 0);
}

int ask_broker_new(struct ask_broker **out, uv_loop_t *loop, unsigned timeout_ms,
                   size_t max_pending)
{
    struct ask_clock clock;
    struct ask_timer *t;
    int rc;

    if (out == NULL || loop == NULL || timeout_ms == 0 || max_pending == 0)
        return UV_EINVAL;
    t = calloc(1, sizeof(*t));
    if (t == NULL)
        return UV_ENOMEM;
    t->loop = loop;
    clock.now = clock_now;
    clock.changed = clock_changed;
    clock.ctx = t;
    rc = ask_broker_open(&t->b, &clock, timeout_ms, max_pending);
    if (rc < 0) {
        free(t);
        return rc;
    }
    uv_timer_init(loop, &t->timer); /* cannot fail on Unix */
    *out = t->b;
    return 0;
}

static void on_timer_closed(uv_handle_t *h)
{
    struct ask_timer *t = container_of(h, struct ask_timer, timer);
    void (*done)(void *) = t->done;
    void *arg = t->done_arg;

    ask_broker_free(t->b);
    free(t);
    if (done != NULL)
        done(arg);
}

void ask_broker_close(struct ask_broker *b, void (*done)(void *arg), void *arg)
{
    struct ask_timer *t;

    if (b == NULL || ask_broker_closing(b))
        return;
    t = ask_broker_clock_ctx(b);
    t->done = done;
    t->done_arg = arg;
    uv_timer_stop(&t->timer);
    ask_broker_shutdown(b);
    uv_close((uv_handle_t *)&t->timer, on_timer_closed);
}
