/* proxy/gwrun.h - credentials.headers' helper programs on `sluice proxy`'s
 * main loop: each exec entry of the table in use (gw.h) runs when it is
 * due (at once when it has no value, before its value's lifetime runs
 * out, again after a failure: PROXY_GW_RETRY_MS doubling), one run per
 * entry at a time (proxy/helper.c), its result stored in the table the
 * run was started for. A new table (reload) takes the old one's values
 * (proxy_gw_carry, by the caller) and its own schedule. */
#ifndef SLUICE_PROXY_GWRUN_H
#define SLUICE_PROXY_GWRUN_H

#include <uv.h>

struct proxy_gw;
struct proxy_gwrun;

/* log: a line for each failure and each new value (level, event, message:
 * the entry's label and why, never the value). NULL when out of memory. */
struct proxy_gwrun *proxy_gwrun_new(uv_loop_t *loop,
                                    void (*log)(void *ctx, const char *level, const char *event,
                                                const char *msg),
                                    void *ctx);
/* fn(ctx, g, i) after entry i of table g took a new value (from the
 * loop; sluice run swaps it into its credential table). */
void proxy_gwrun_on_value(struct proxy_gwrun *r,
                          void (*fn)(void *ctx, struct proxy_gw *g, size_t i));
/* The table in use from now on (a reference is taken; NULL: none). */
void proxy_gwrun_set(struct proxy_gwrun *r, struct proxy_gw *g);
/* Kills the running helpers, closes the timer; freed on the loop. */
void proxy_gwrun_close(struct proxy_gwrun *r);

#endif
