/* proxy/service.h - the proxy service: ONE loop's listeners, its HTTP and
 * SOCKS5 front ends, its connection limit (bridge/limit.h), its resolver,
 * ask broker and egress, and the log hook. `sluice proxy` runs one per
 * worker (proxy/worker.c: a thread around one); `sluice run` starts one on
 * the listeners the sandbox handed over (run/launch.c). What differs
 * between them (metrics, the process-wide count, nudging other workers,
 * run's relay to an external proxy) comes in through the hooks. One loop;
 * not thread-safe, except the live count, which may be shared (atomic). */
#ifndef SLUICE_PROXY_SERVICE_H
#define SLUICE_PROXY_SERVICE_H

#include "bridge/bridge.h"
#include "bridge/limit.h"
#include "policy/policy.h"

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#define PROXY_SERVICE_MAX_LISTENERS 4

enum proxy_fe_kind { PROXY_FE_HTTP = 0, PROXY_FE_SOCKS, PROXY_FE_N };

enum proxy_service_state {
    PROXY_SERVICE_OPEN = 0, /* accepting */
    PROXY_SERVICE_DRAINING, /* listeners closed; the live connections finish */
    PROXY_SERVICE_CLOSED,   /* everything closed or closing */
};

/* What a service takes from the settings: copies, so that the thread that
 * loaded them may free them. */
struct proxy_service_conf {
    struct policy *policy; /* a reference for the egress, or NULL (keep the one in use) */
    char *auth_user, *auth_pass;
    unsigned handshake_ms, head_ms, idle_ms, max_head;
    size_t max_conns;
    struct proxy_gw *gw; /* credentials.headers (sluice proxy; a reference), or NULL */
};

/* From settings s and policy p (referenced when not NULL); auth: with the
 * settings' proxy credentials (the standalone proxy) or without (run).
 * NULL when out of memory. */
struct proxy_service_conf *proxy_service_conf_new(const struct settings *s, struct policy *p,
                                                  int auth);
void proxy_service_conf_free(struct proxy_service_conf *c);

/* The owner's hooks; every one but log may be NULL. */
struct proxy_service_hooks {
    void *ctx;
    /* every connection log record */
    void (*log)(void *ctx, const struct connlog *r);
    /* after each accept attempt: served (a front end took it) and over
     * the limit (answered 503 / 0x01); served 0 when not admitted */
    void (*accepted)(void *ctx, enum proxy_fe_kind kind, int served, int over);
    /* a connection ended (any state) */
    void (*ended)(void *ctx);
    /* a connection ended while open: the limit may have resumed */
    void (*released)(void *ctx);
    /* draining, and the last connection ended */
    void (*drained)(void *ctx);
    /* connections counted against the limit besides the front ends' */
    size_t (*extra_live)(void *ctx);
    /* 1 when the connection waiting on l was taken elsewhere */
    int (*divert)(void *ctx, enum proxy_fe_kind kind, struct listener *l);
    /* the front ends' debug lines (phase transitions, one line without a
     * newline, "conn ID PROTOCOL: ..."); NULL: none */
    void (*debug)(void *ctx, const char *line);
};

/* Where the ask broker comes from: one of its own with a handler (spec),
 * one shared from the same loop (broker), one of its own whose handler
 * relay() attaches (a worker's ask relay), or none (deny unmatched). */
struct proxy_service_ask {
    const char *spec;
    struct ask_broker *broker;
    int (*relay)(void *ctx, struct ask_broker *b);
    void *relay_ctx;
};

struct proxy_service_listener {
    struct proxy_service *svc;
    struct listener *l;
    enum proxy_fe_kind kind;
};

struct proxy_service {
    uv_loop_t *loop;
    enum proxy_service_state state;
    struct frontend fe[PROXY_FE_N];
    struct proxy_service_listener ls[PROXY_SERVICE_MAX_LISTENERS];
    size_t nls;
    struct conn_limit limit;
    int limit_on;
    size_t *live;    /* atomic: connections counted against conf->max_conns */
    size_t own_live; /* what live points at unless the owner shares a count */
    struct proxy_service_conf *conf;
    struct resolver *resolver;
    struct ask_broker *broker;
    struct ask_handler *handler;
    int own_broker;
    struct egress_env *egress;
    struct proxy_service_hooks h;
    struct proxy_tls *tls; /* network.tlsTerminate on this loop (sluice proxy), or NULL */
    struct proxy_creds *creds; /* credentials swapped in (sluice run, issue 24), or NULL */
};

/* Ready for listeners: empty front ends on loop, connection ids from
 * *next_id, live the count to share (NULL: the service's own). */
void proxy_service_init(struct proxy_service *svc, uv_loop_t *loop, uint64_t *next_id,
                        size_t *live, const struct proxy_service_hooks *h);

/* Listens on ep for front end kind (an fd: endpoint's descriptor is the
 * listener's on success, still the caller's on failure); *out, when not
 * NULL, borrows the listener. 0, or UV_E* (*why set when the listener
 * says why). */
int proxy_service_listen(struct proxy_service *svc, enum proxy_fe_kind kind,
                         const struct endpoint *ep, struct listener **out, const char **why);

/* Resolver (settings s), ask broker, egress over conf->policy, the front
 * ends' settings and the limit. Takes conf (also on failure). 0, or -1
 * with a message in err; what was started is closed by proxy_service_close. */
int proxy_service_start(struct proxy_service *svc, const struct settings *s,
                        struct proxy_service_conf *conf, const struct proxy_service_ask *ask,
                        char *err, size_t errlen);

/* A new configuration (reload): the policy for requests started from now
 * on, the front ends' settings, the limit. Takes c. */
void proxy_service_apply(struct proxy_service *svc, struct proxy_service_conf *c);

/* Open connections of both front ends. */
size_t proxy_service_conns(const struct proxy_service *svc);

/* Drain: no more accepting; kept-alive HTTP connections waiting between
 * requests close now, the others after their current answer; the drained
 * hook runs when the last one ends (not from here). */
void proxy_service_drain(struct proxy_service *svc);

/* Closes every connection now. */
void proxy_service_close_conns(struct proxy_service *svc);

/* Closes the listeners and the limit. Idempotent. */
void proxy_service_close_listeners(struct proxy_service *svc);

/* Closes listeners, limit, broker and handler (when its own) and resolver
 * (asynchronously: run the loop); done runs once per closed part, may be
 * NULL. Idempotent. */
void proxy_service_close(struct proxy_service *svc, void (*done)(void *), void *arg);

/* After the loop has run the closes: frees the egress and the conf. */
void proxy_service_free(struct proxy_service *svc);

#endif
