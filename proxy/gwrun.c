/* proxy/gwrun.c - credentials.headers' helpers on the main loop (gwrun.h). */
#include "proxy/gwrun.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/gw.h"
#include "proxy/helper.h"

struct job {
    struct job *next;
    struct proxy_gwrun *r;
    struct proxy_gw *g; /* the table the run is for (a reference) */
    size_t i;
    struct proxy_helper *h;
};

struct proxy_gwrun {
    uv_loop_t *loop;
    uv_timer_t timer;
    struct proxy_gw *g;
    struct job *jobs;
    void (*log)(void *ctx, const char *level, const char *event, const char *msg);
    void (*on_value)(void *ctx, struct proxy_gw *g, size_t i);
    void *ctx;
    int closing;
};

void proxy_gwrun_on_value(struct proxy_gwrun *r,
                          void (*fn)(void *ctx, struct proxy_gw *g, size_t i))
{
    r->on_value = fn;
}

static void schedule(struct proxy_gwrun *r);

static void unlink_job(struct proxy_gwrun *r, struct job *j)
{
    for (struct job **pp = &r->jobs; *pp != NULL; pp = &(*pp)->next)
        if (*pp == j) {
            *pp = j->next;
            return;
        }
}

static void on_done(void *arg, int ok, const uint8_t *out, size_t len, const char *why)
{
    struct job *j = arg;
    struct proxy_gwrun *r = j->r;
    const struct proxy_gw_entry *e = &j->g->e[j->i];
    char msg[400];
    const char *failed = proxy_gw_helper_done(j->g, j->i, proxy_gw_now(), ok, out, len, why);

    if (failed == NULL) {
        snprintf(msg, sizeof(msg), "credential %s: its helper gave a new value, used for %u ms",
                 e->label, e->ttl_ms);
        r->log(r->ctx, "info", "credential_helper", msg);
        if (r->on_value != NULL)
            r->on_value(r->ctx, j->g, j->i);
    } else {
        snprintf(msg, sizeof(msg),
                 "credential %s: its helper failed: %s (its last value is used until its "
                 "lifetime runs out, then requests that need it are refused)",
                 e->label, failed);
        r->log(r->ctx, "error", "credential_helper_failed", msg);
    }
    unlink_job(r, j);
    proxy_gw_unref(j->g);
    free(j);
    if (!r->closing)
        schedule(r);
}

static void start_job(struct proxy_gwrun *r, size_t i)
{
    struct job *j = calloc(1, sizeof(*j));
    const struct proxy_gw_entry *e = &r->g->e[i];
    char why[160];
    int rc;

    if (j == NULL) {
        proxy_gw_helper_done(r->g, i, proxy_gw_now(), 0, NULL, 0, "out of memory");
        return;
    }
    j->r = r;
    j->g = proxy_gw_ref(r->g);
    j->i = i;
    rc = proxy_helper_start(r->loop, e->argv, e->timeout_ms, PROXY_GW_READ_MAX, on_done, j, &j->h);
    if (rc < 0) {
        char msg[400];
        snprintf(why, sizeof(why), "it cannot be started: %s", strerror(-rc));
        proxy_gw_helper_done(r->g, i, proxy_gw_now(), 0, NULL, 0, why);
        snprintf(msg, sizeof(msg), "credential %s: its helper failed: %s", e->label, why);
        r->log(r->ctx, "error", "credential_helper_failed", msg);
        proxy_gw_unref(j->g);
        free(j);
        return;
    }
    j->next = r->jobs;
    r->jobs = j;
}

static void on_timer(uv_timer_t *t)
{
    schedule(t->data);
}

/* Starts what is due; the timer for what is due next. */
static void schedule(struct proxy_gwrun *r)
{
    uint64_t now = proxy_gw_now(), next = UINT64_MAX;
    long i;

    if (r->g == NULL || r->closing)
        return;
    while ((i = proxy_gw_due(r->g, now, &next)) >= 0)
        start_job(r, (size_t)i);
    uv_timer_stop(&r->timer);
    if (next != UINT64_MAX)
        uv_timer_start(&r->timer, on_timer, next > now ? next - now : 0, 0);
}

struct proxy_gwrun *proxy_gwrun_new(uv_loop_t *loop,
                                    void (*log)(void *ctx, const char *level, const char *event,
                                                const char *msg),
                                    void *ctx)
{
    struct proxy_gwrun *r = calloc(1, sizeof(*r));

    if (r == NULL)
        return NULL;
    r->loop = loop;
    r->log = log;
    r->ctx = ctx;
    uv_timer_init(loop, &r->timer);
    r->timer.data = r;
    return r;
}

void proxy_gwrun_set(struct proxy_gwrun *r, struct proxy_gw *g)
{
    struct proxy_gw *old = r->g;
    struct job **pp = &r->jobs;

    r->g = proxy_gw_ref(g);
    /* a run under way goes on for the new table's entry with the same
     * helper, so a reload storm starts no second run (rt-15); one the new
     * table has no entry for is stopped */
    while (*pp != NULL) {
        struct job *j = *pp;
        long k = j->g == g ? (long)j->i : proxy_gw_adopt(g, j->g, j->i);
        if (k >= 0) {
            if (j->g != g) {
                proxy_gw_unref(j->g);
                j->g = proxy_gw_ref(g);
                j->i = (size_t)k;
            }
            pp = &j->next;
            continue;
        }
        *pp = j->next;
        proxy_helper_cancel(j->h);
        proxy_gw_unref(j->g);
        free(j);
    }
    proxy_gw_unref(old);
    schedule(r);
}

static void on_timer_closed(uv_handle_t *h)
{
    free(h->data);
}

void proxy_gwrun_close(struct proxy_gwrun *r)
{
    if (r == NULL || r->closing)
        return;
    r->closing = 1;
    while (r->jobs != NULL) {
        struct job *j = r->jobs;
        r->jobs = j->next;
        proxy_helper_cancel(j->h);
        proxy_gw_unref(j->g);
        free(j);
    }
    proxy_gw_unref(r->g);
    r->g = NULL;
    uv_close((uv_handle_t *)&r->timer, on_timer_closed);
}
