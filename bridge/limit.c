/* bridge/limit.c - the over-limit rule (bridge/limit.h). */
#include "bridge/limit.h"

static void pause_one(struct conn_limit *cl, struct listener *l)
{
    for (size_t i = 0; i < cl->npaused; i++)
        if (cl->paused[i] == l)
            return;
    if (cl->npaused == CONN_LIMIT_MAX_LISTENERS)
        return; /* never: a group has at most a few listeners */
    listener_pause(l);
    cl->paused[cl->npaused++] = l;
    cl->pauses++;
}

static void resume_all(struct conn_limit *cl)
{
    /* listener_resume may accept (and so pause again) before it returns:
     * take each listener off the list before resuming it */
    while (!cl->stopped && cl->npaused > 0 && cl->live(cl->ctx) < cl->max) {
        struct listener *l = cl->paused[--cl->npaused];
        listener_resume(l);
    }
    if (cl->npaused == 0)
        uv_timer_stop(&cl->retry);
}

static void on_retry(uv_timer_t *t)
{
    resume_all(t->data);
}

void conn_limit_init(struct conn_limit *cl, uv_loop_t *loop, size_t max,
                     size_t (*live)(void *ctx), void *ctx)
{
    cl->npaused = 0;
    cl->max = max > 0 ? max : 1;
    cl->live = live;
    cl->ctx = ctx;
    cl->stopped = 0;
    cl->pauses = 0;
    uv_timer_init(loop, &cl->retry);
    cl->retry.data = cl;
}

int conn_limit_admit(struct conn_limit *cl, struct listener *l)
{
    if (cl->stopped)
        return -1;
    if (cl->live(cl->ctx) < cl->max)
        return 0;
    pause_one(cl, l);
    return -1;
}

void conn_limit_accepted(struct conn_limit *cl, struct listener *l, int rc)
{
    if (cl->stopped)
        return;
    if (rc == UV_ENOMEM || rc == UV_EMFILE || rc == UV_ENFILE) {
        pause_one(cl, l);
        /* resumed by the next connection that ends, or by the timer when
         * none is live */
        if (cl->live(cl->ctx) == 0)
            uv_timer_start(&cl->retry, on_retry, CONN_LIMIT_RETRY_MS, 0);
        return;
    }
    if (cl->live(cl->ctx) >= cl->max)
        pause_one(cl, l);
}

void conn_limit_released(struct conn_limit *cl)
{
    resume_all(cl);
}

void conn_limit_set(struct conn_limit *cl, size_t max)
{
    cl->max = max > 0 ? max : 1;
    resume_all(cl);
}

int conn_limit_paused(const struct conn_limit *cl)
{
    return cl->npaused > 0;
}

static void on_timer_closed(uv_handle_t *h)
{
    (void)h;
}

void conn_limit_close(struct conn_limit *cl)
{
    if (cl->stopped)
        return;
    cl->stopped = 1;
    cl->npaused = 0;
    uv_close((uv_handle_t *)&cl->retry, on_timer_closed);
}
