/* bridge/egress.c - from a requested host:port to a connected upstream socket.
 *
 * One request walks: decide -> (ask) -> (resolve) -> guard -> dial -> done.
 * The rules are matched once, in decide (policy_decide); the request keeps
 * the match and the guard step finishes it with the answers
 * (policy_verdict_finish), so ask, resolve and guard judge the same match.
 * Each asynchronous step is detachable (R10): the request records what it
 * waits on (aw, q, dialer) before it starts the step, because the step may
 * complete inside the call (a session-cache hit, a localhost lookup); the
 * step's callback clears it. egress_cancel() detaches or cancels whatever is
 * pending and frees the request; a request that finishes calls its callback
 * and frees itself. Nothing else frees a request.
 *
 * Policies are reference counted so that a SIGHUP reload can swap the
 * current one while requests still use the old one.
 */
#include "bridge/bridge.h"

#include "common/common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* egress_start_dial's requests: their socket is handed to the command */
#define EGRESS_HANDOVER 0x100u

struct egress_pol {
    struct policy *p;
    size_t refs; /* requests using it, + 1 while it is the env's current one */
};

struct egress_env {
    uv_loop_t *loop;
    struct egress_pol *cur;
    struct resolver *resolver;
    struct ask_broker *ask;
    unsigned dial_timeout_ms;
    size_t inflight;
    egress_cb observer; /* metrics: sees every outcome */
    void *observer_ctx;
};

enum req_state {
    REQ_DECIDE = 0, /* synchronous steps; owns nothing asynchronous */
    REQ_ASK,        /* owns aw (detachable ask) */
    REQ_RESOLVE,    /* owns q (detachable lookup) */
    REQ_DIAL,       /* owns dialer (cancellable) */
    REQ_PARENT,     /* owns pdial (through the parent proxy; cancellable) */
};

struct egress_req {
    struct egress_env *env;
    struct egress_pol *pol;
    enum req_state state;
    egress_cb cb;
    void *arg;
    struct policy_host host;
    uint16_t port;
    int report; /* network.mode report */
    struct policy_decision match; /* the one rule match, made in start() */
    unsigned how; /* EGRESS_DIAL_* */
    char protocol[16];
    char client[64];
    struct ask_wait *aw;
    struct resolver_query *q;
    struct dialer *dialer;
    struct parent_dial *pdial;
    char parent_shown[POLICY_HOST_MAX + 16];
    int parent_http; /* plain HTTP through the parent: no CONNECT */
    int handover;    /* egress_start_dial: the socket goes to the command */
    int mitm;        /* through network.mitmProxy's socket, not the parent */
    struct egress_outcome o;
    uint64_t t0, t_step; /* uv_hrtime() at the start, and of the step under way */
    size_t ntargets;
    struct dialer_target targets[RESOLVER_MAX_ADDRS];
};

static void pol_unref(struct egress_env *e, struct egress_pol *pol)
{
    if (--pol->refs > 0)
        return;
    (void)e;
    policy_free(pol->p);
    free(pol);
}

static struct egress_pol *pol_new(struct policy *p)
{
    struct egress_pol *pol = calloc(1, sizeof(*pol));

    if (pol == NULL)
        return NULL;
    pol->p = p;
    pol->refs = 1;
    return pol;
}

int egress_env_new(struct egress_env **out, uv_loop_t *loop, struct policy *policy,
                   struct resolver *resolver, struct ask_broker *ask, unsigned dial_timeout_ms)
{
    struct egress_env *e = calloc(1, sizeof(*e));

    if (e == NULL)
        return UV_ENOMEM;
    e->cur = pol_new(policy);
    if (e->cur == NULL) {
        free(e);
        return UV_ENOMEM;
    }
    e->loop = loop;
    e->resolver = resolver;
    e->ask = ask;
    e->dial_timeout_ms = dial_timeout_ms > 0 ? dial_timeout_ms : 10000;
    *out = e;
    return 0;
}

void egress_env_set_policy(struct egress_env *e, struct policy *policy)
{
    struct egress_pol *pol = pol_new(policy);

    if (pol == NULL) { /* keep the old policy rather than run without one */
        policy_free(policy);
        return;
    }
    pol_unref(e, e->cur);
    e->cur = pol;
}

const struct policy *egress_env_policy(const struct egress_env *e)
{
    return e->cur->p;
}

struct resolver *egress_env_resolver(const struct egress_env *e)
{
    return e->resolver;
}

void egress_env_free(struct egress_env *e)
{
    if (e == NULL)
        return;
    pol_unref(e, e->cur);
    free(e);
}

void egress_env_set_observer(struct egress_env *e, egress_cb fn, void *ctx)
{
    e->observer = fn;
    e->observer_ctx = ctx;
}

size_t egress_inflight(const struct egress_env *e)
{
    return e->inflight;
}

const char *egress_result_str(enum egress_result r)
{
    switch (r) {
    case EGRESS_CONNECTED:
        return "connected";
    case EGRESS_DENIED:
        return "denied";
    case EGRESS_DNS_FAILED:
        return "dns failed";
    case EGRESS_DNS_TIMEOUT:
        return "dns timeout";
    case EGRESS_REFUSED:
        return "refused";
    case EGRESS_UNREACHABLE:
        return "unreachable";
    case EGRESS_DIAL_TIMEOUT:
        return "dial timeout";
    case EGRESS_ERROR:
        return "error";
    }
    return "?";
}

/* ------------------------------------------------------------------------ */

static void req_free(struct egress_req *r)
{
    r->env->inflight--;
    pol_unref(r->env, r->pol);
    free(r);
}

/* Ends the request: the callback, then the only free. */
static void finish(struct egress_req *r, enum egress_result res, int status)
{
    r->o.result = res;
    r->o.status = status;
    if (res == EGRESS_CONNECTED)
        r->o.verdict = r->o.would_deny ? "would_deny" : "allow";
    else if (res == EGRESS_DENIED)
        r->o.verdict = "deny";
    else
        r->o.verdict = r->o.would_deny ? "would_deny" : "allow";
    r->o.total_ns = uv_hrtime() - r->t0;
    if (r->env->observer != NULL)
        r->env->observer(r->env->observer_ctx, &r->o);
    r->cb(r->arg, &r->o);
    req_free(r);
}

static void deny(struct egress_req *r, enum egress_stage stage, const char *reason)
{
    if (r->o.hint[0] == '\0') { /* the ask handler's no, or nobody to ask */
        static const struct policy_judgment none = {.origin = POLICY_BY_NO_RULE};
        policy_deny_hint(r->pol->p, &r->host, r->port, NULL, &none, NULL, r->o.hint,
                         sizeof(r->o.hint));
    }
    r->o.stage = stage;
    if (reason != NULL && reason != r->o.reason)
        common_cat(r->o.reason, sizeof(r->o.reason), 0, reason);
    finish(r, EGRESS_DENIED, 0);
}

static const char *host_port(const struct egress_req *r, char *buf, size_t len)
{
    if (r->host.kind == POLICY_HOST_IPV6)
        snprintf(buf, len, "[%s]:%u", r->host.name, (unsigned)r->port);
    else
        snprintf(buf, len, "%s:%u", r->host.name, (unsigned)r->port);
    return buf;
}

/* ------------------------------------------------------------------------ */
/* dial                                                                      */

static void on_dialed(void *arg, int status, int fd, size_t index)
{
    struct egress_req *r = arg;
    char a[64];

    r->dialer = NULL;
    r->o.dial_ns = uv_hrtime() - r->t_step;
    r->o.timed |= EGRESS_TIMED_DIAL;
    if (status == 0) {
        r->o.addr = r->targets[index].addr;
        r->o.have_addr = 1;
        r->o.fd = fd;
        finish(r, EGRESS_CONNECTED, 0);
        return;
    }
    r->o.stage = EGRESS_BY_GUARD;
    r->o.addr = r->targets[r->ntargets - 1].addr;
    r->o.have_addr = 1;
    policy_addr_str(&r->o.addr, a, sizeof(a));
    switch (status) {
    case UV_ETIMEDOUT:
        snprintf(r->o.reason, sizeof(r->o.reason), "connect to %s port %u timed out", a,
                 (unsigned)r->port);
        finish(r, EGRESS_DIAL_TIMEOUT, status);
        return;
    case UV_ECONNREFUSED:
        snprintf(r->o.reason, sizeof(r->o.reason), "connection to %s port %u refused", a,
                 (unsigned)r->port);
        finish(r, EGRESS_REFUSED, status);
        return;
    case UV_ENOMEM:
    case UV_EMFILE:
    case UV_ENFILE:
    case UV_ENOBUFS:
        snprintf(r->o.reason, sizeof(r->o.reason), "cannot connect to %s port %u: %s", a,
                 (unsigned)r->port, uv_strerror(status));
        finish(r, EGRESS_ERROR, status);
        return;
    default:
        snprintf(r->o.reason, sizeof(r->o.reason), "cannot reach %s port %u: %s", a,
                 (unsigned)r->port, uv_strerror(status));
        finish(r, EGRESS_UNREACHABLE, status);
        return;
    }
}

/* Through the parent proxy (bridge/parent.c): the tunnel is to the
 * destination as judged (canonical name or address). */
static void on_parent(void *arg, int status, int fd, const char *why)
{
    struct egress_req *r = arg;
    char via[sizeof(r->o.reason)];

    r->pdial = NULL;
    r->o.addr = r->targets[0].addr;
    r->o.have_addr = 1;
    if (status == 0) {
        r->o.fd = fd;
        r->o.parent_http = r->parent_http;
        snprintf(via, sizeof(via), "%s", r->o.reason);
        snprintf(r->o.reason, sizeof(r->o.reason), "%.100s%svia the %s %.260s", via,
                 via[0] != '\0' ? "; " : "", r->mitm ? "mitmProxy" : "parent proxy",
                 r->parent_shown);
        finish(r, EGRESS_CONNECTED, 0);
        return;
    }
    r->o.stage = EGRESS_BY_GUARD;
    snprintf(r->o.reason, sizeof(r->o.reason), "%s", why);
    finish(r, status == UV_ETIMEDOUT       ? EGRESS_DIAL_TIMEOUT
              : status == UV_ECONNREFUSED ? EGRESS_REFUSED
              : status == UV_ENOMEM       ? EGRESS_ERROR
                                          : EGRESS_UNREACHABLE,
           status);
}

/* Through pp (network.parentProxy, or network.mitmProxy's Unix socket):
 * a CONNECT to the destination as judged, or for plain HTTP the connection
 * to the proxy itself, for absolute-form requests. */
static void via_proxy(struct egress_req *r, const struct policy_parent_proxy *pp)
{
    char hp[300];
    int rc;

    snprintf(r->parent_shown, sizeof(r->parent_shown), "%s", pp->shown);
    r->mitm = pp->unix_path[0] != '\0';
    r->state = REQ_PARENT;
    /* plain HTTP goes to the parent as absolute-form requests, not through a
     * CONNECT tunnel (a default Squid allows CONNECT to port 443 only) */
    r->parent_http = strcmp(r->protocol, "http") == 0;
    if (r->parent_http)
        snprintf(r->o.parent_auth, sizeof(r->o.parent_auth), "%s", pp->auth);
    rc = parent_dial_start(&r->pdial, r->env->loop, r->env->resolver, pp,
                           r->parent_http ? NULL : host_port(r, hp, sizeof(hp)),
                           r->env->dial_timeout_ms, on_parent, r);
    if (rc < 0) {
        r->pdial = NULL;
        snprintf(r->o.reason, sizeof(r->o.reason), "cannot use the %s %s: %s",
                 pp->unix_path[0] != '\0' ? "mitmProxy" : "parent proxy", pp->shown,
                 uv_strerror(rc));
        finish(r, EGRESS_ERROR, rc);
    }
}

/* 1 when the request went to the parent proxy (network.parentProxy or the
 * environment's HTTP(S)_PROXY; loopback and NO_PROXY go direct). */
static int via_parent(struct egress_req *r)
{
    const struct policy_parent_proxy *pp = policy_parent_pick(
        policy_parent(r->pol->p), &r->host, strcmp(r->protocol, "http") == 0);

    if (pp == NULL)
        return 0;
    via_proxy(r, pp);
    return 1;
}

/* network.mitmProxy (srt 0.0.83): 1 when the allowed host matches its
 * domains, and the request went to the external proxy on its Unix socket
 * (not resolved, not guarded: as in srt, the guard does not judge that
 * hop; an unreachable socket fails the request, which never goes direct).
 * A transparent connect() is refused instead: its socket would be handed
 * to the command, and a host Unix socket never is. */
static int via_mitm(struct egress_req *r)
{
    const struct policy_parent_proxy *pp = policy_mitm_pick(r->pol->p, &r->host, r->port);

    if (pp == NULL)
        return 0;
    if (r->handover) {
        char why[sizeof(r->o.reason)];
        snprintf(why, sizeof(why),
                 "'%.253s' matches network.mitmProxy.domains, whose proxy is a Unix socket on the "
                 "host: a transparent connect() cannot be sent there",
                 r->host.name);
        snprintf(r->o.hint, sizeof(r->o.hint),
                 "use the proxy variables (HTTPS_PROXY, ALL_PROXY) for this host");
        deny(r, EGRESS_BY_POLICY, why);
        return 1;
    }
    via_proxy(r, pp);
    return 1;
}

static void dial(struct egress_req *r)
{
    int rc;

    if (via_mitm(r) || via_parent(r))
        return;
    r->state = REQ_DIAL;
    r->t_step = uv_hrtime();
    if (r->how & EGRESS_DIAL_SYNC) {
        /* a connection made at once (loopback) is the outcome now */
        int fd = -1;
        size_t idx = 0;
        rc = dialer_start_now(&r->dialer, r->env->loop, r->targets, r->ntargets,
                              r->env->dial_timeout_ms, on_dialed, r, &fd, &idx);
        if (rc == 1) {
            r->dialer = NULL;
            r->o.dial_ns = uv_hrtime() - r->t_step;
            r->o.timed |= EGRESS_TIMED_DIAL;
            r->o.addr = r->targets[idx].addr;
            r->o.have_addr = 1;
            r->o.fd = fd;
            finish(r, EGRESS_CONNECTED, 0);
            return;
        }
    } else {
        rc = dialer_start(&r->dialer, r->env->loop, r->targets, r->ntargets,
                          r->env->dial_timeout_ms, on_dialed, r);
    }
    if (rc < 0) {
        r->dialer = NULL;
        snprintf(r->o.reason, sizeof(r->o.reason), "cannot start a connection: %s",
                 uv_strerror(rc));
        finish(r, EGRESS_ERROR, rc);
    }
}

/* ------------------------------------------------------------------------ */
/* guard                                                                     */

/* The verdict with the answers (for an IP literal, the literal itself),
 * finished from start()'s match: which addresses to dial, or the guard's
 * refusal. Only answers the verdict marks dialable are dialed, in report
 * mode too: report mode reports what the rules would deny (start() let it
 * through as would_deny), never lifts the guard. */
static void guard(struct egress_req *r, const struct policy_addr *addrs, size_t n)
{
    struct policy_guard_verdict gv[RESOLVER_MAX_ADDRS]; /* on the stack: ~14 KB, transient */
    struct policy_judgment j;

    if (n > RESOLVER_MAX_ADDRS)
        n = RESOLVER_MAX_ADDRS;
    policy_verdict_finish(r->pol->p, &r->host, r->port, &r->match, addrs, n, gv, &j);
    addrs = r->host.kind == POLICY_HOST_NAME ? addrs : &r->host.addr;
    n = j.naddrs;
    r->o.naddrs = n;
    r->ntargets = 0;
    for (size_t i = 0; i < n; i++) {
        if (!gv[i].dial)
            continue;
        memset(&r->targets[r->ntargets], 0, sizeof(r->targets[0]));
        r->targets[r->ntargets].addr = addrs[i];
        r->targets[r->ntargets].port = r->port;
        r->targets[r->ntargets].v4mapped =
            (r->how & EGRESS_DIAL_V6SOCKET) != 0 && addrs[i].family == 4;
        r->ntargets++;
    }
    if (j.nallowed == 0) {
        /* the first refusal explains it; its rule, if an IP rule decided */
        if (gv[0].rule != NULL) {
            policy_rule_format(gv[0].rule, r->o.rule, sizeof(r->o.rule));
            policy_rule_source(gv[0].rule, r->o.source, sizeof(r->o.source));
        }
        r->o.addr = addrs[0];
        r->o.have_addr = 1;
        policy_deny_hint(r->pol->p, &r->host, r->port, NULL, &j, &addrs[0], r->o.hint,
                         sizeof(r->o.hint));
        deny(r, EGRESS_BY_GUARD, j.origin == POLICY_BY_GUARD ? j.reason : gv[0].why);
        return;
    }
    if (r->ntargets == 0) { /* report mode: only loopback answers of a localhost name */
        char why[sizeof(r->o.reason)];
        snprintf(why, sizeof(why),
                 "'%s' may reach loopback only when a rule allows it (report mode does not "
                 "lift that)",
                 r->host.name);
        r->o.addr = addrs[0];
        r->o.have_addr = 1;
        deny(r, EGRESS_BY_GUARD, why);
        return;
    }
    dial(r);
}

/* ------------------------------------------------------------------------ */
/* resolve                                                                   */

static void on_resolved(void *arg, enum resolver_status st, const struct policy_addr *addrs,
                        size_t n)
{
    struct egress_req *r = arg;

    r->q = NULL;
    r->o.dns_ns = uv_hrtime() - r->t_step;
    r->o.timed |= EGRESS_TIMED_DNS;
    switch (st) {
    case RESOLVER_OK:
        guard(r, addrs, n);
        return;
    case RESOLVER_NXDOMAIN:
        snprintf(r->o.reason, sizeof(r->o.reason), "name '%s' does not exist (NXDOMAIN)",
                 r->host.name);
        finish(r, EGRESS_DNS_FAILED, UV_EAI_NONAME);
        return;
    case RESOLVER_NODATA:
        snprintf(r->o.reason, sizeof(r->o.reason), "name '%s' has no address", r->host.name);
        finish(r, EGRESS_DNS_FAILED, UV_EAI_NODATA);
        return;
    case RESOLVER_TIMEOUT:
        snprintf(r->o.reason, sizeof(r->o.reason), "no DNS answer for '%s' in time",
                 r->host.name);
        finish(r, EGRESS_DNS_TIMEOUT, UV_ETIMEDOUT);
        return;
    case RESOLVER_FAIL:
        snprintf(r->o.reason, sizeof(r->o.reason), "DNS lookup of '%s' failed", r->host.name);
        finish(r, EGRESS_DNS_FAILED, UV_EAI_FAIL);
        return;
    case RESOLVER_CANCELLED:
        snprintf(r->o.reason, sizeof(r->o.reason), "DNS lookup of '%s' cancelled (shutting down)",
                 r->host.name);
        finish(r, EGRESS_ERROR, UV_ECANCELED);
        return;
    }
}

/* The destination is allowed (by a rule, an answer, or report mode). */
static void proceed(struct egress_req *r)
{
    int rc;

    if (r->host.kind != POLICY_HOST_NAME) {
        guard(r, &r->host.addr, 1);
        return;
    }
    if (via_mitm(r)) /* a name: the external proxy resolves it */
        return;
    if (r->env->resolver == NULL) {
        snprintf(r->o.reason, sizeof(r->o.reason), "no resolver");
        finish(r, EGRESS_ERROR, UV_EINVAL);
        return;
    }
    r->state = REQ_RESOLVE;
    r->t_step = uv_hrtime();
    rc = resolver_query(r->env->resolver, r->host.name, on_resolved, r, &r->q);
    if (rc < 0) {
        r->q = NULL;
        snprintf(r->o.reason, sizeof(r->o.reason), "cannot look up '%s': %s", r->host.name,
                 uv_strerror(rc));
        finish(r, EGRESS_ERROR, rc);
    }
}

/* ------------------------------------------------------------------------ */
/* ask                                                                       */

static void on_answer(void *arg, int allow, const char *reason)
{
    struct egress_req *r = arg;
    char hp[300];

    r->aw = NULL;
    r->o.ask_ns = uv_hrtime() - r->t_step;
    r->o.timed |= EGRESS_TIMED_ASK;
    r->o.stage = EGRESS_BY_ASK;
    if (allow) {
        r->o.reason[0] = '\0';
        if (reason != NULL && reason[0] != '\0')
            snprintf(r->o.reason, sizeof(r->o.reason), "allowed by the ask handler: %s", reason);
        proceed(r);
        return;
    }
    if (reason != NULL && reason[0] != '\0') {
        deny(r, EGRESS_BY_ASK, reason);
        return;
    }
    snprintf(r->o.reason, sizeof(r->o.reason), "the ask handler denied %s",
             host_port(r, hp, sizeof(hp)));
    deny(r, EGRESS_BY_ASK, NULL);
}

static void ask(struct egress_req *r)
{
    char hp[300];
    int rc;

    r->state = REQ_ASK;
    r->o.asked = 1;
    r->t_step = uv_hrtime();
    rc = ask_broker_ask(r->env->ask, r->host.name, r->port, r->protocol, r->client, on_answer, r,
                        &r->aw);
    if (rc == 0)
        return;
    r->aw = NULL;
    if (rc == UV_EBUSY)
        snprintf(r->o.reason, sizeof(r->o.reason),
                 "too many questions pending for the ask handler; %s denied",
                 host_port(r, hp, sizeof(hp)));
    else
        snprintf(r->o.reason, sizeof(r->o.reason), "cannot ask about %s: %s",
                 host_port(r, hp, sizeof(hp)), uv_strerror(rc));
    deny(r, EGRESS_BY_ASK, NULL);
}

/* ------------------------------------------------------------------------ */

static int start(struct egress_env *e, const struct policy_host *host, uint16_t port,
                 const struct policy_request *rq, const char *protocol, const char *client,
                 egress_cb cb, void *arg, struct egress_req **req, unsigned how)
{
    struct policy_guard_verdict gv[1];
    struct policy_judgment j;
    struct egress_req *r = calloc(1, sizeof(*r));

    if (r == NULL)
        return UV_ENOMEM;
    r->env = e;
    r->t0 = uv_hrtime();
    r->pol = e->cur;
    r->pol->refs++;
    e->inflight++;
    r->cb = cb;
    r->arg = arg;
    r->host = *host;
    r->port = port;
    r->report = policy_mode_report(r->pol->p);
    r->how = how;
    r->handover = (how & EGRESS_HANDOVER) != 0;
    common_cat(r->protocol, sizeof(r->protocol), 0, protocol);
    common_cat(r->client, sizeof(r->client), 0, client != NULL ? client : "-");
    r->o.fd = -1;
    r->o.verdict = "deny";
    *req = r;

    /* the rule decision, the one match of this request; an IP literal is
     * guarded here too, but dialed only through proceed() -> guard() */
    policy_decide_request(r->pol->p, host, port, rq, &r->match);
    policy_verdict_finish(r->pol->p, host, port, &r->match, NULL, 0, gv, &j);
    common_cat(r->o.rule, sizeof(r->o.rule), 0, j.rule_text);
    common_cat(r->o.source, sizeof(r->o.source), 0, j.source);
    r->o.stage = EGRESS_BY_POLICY;
    if (j.origin == POLICY_BY_GUARD) { /* an IP literal the guard refuses */
        proceed(r);
        return 0;
    }
    switch (j.verdict) {
    case POLICY_ALLOW:
        proceed(r);
        break;
    case POLICY_ASK:
    case POLICY_DENY:
    default:
        if (j.verdict == POLICY_ASK && !r->report && e->ask != NULL) {
            ask(r);
            break;
        }
        /* denied, or no rule decides and nobody to ask; report mode lets
         * only a rule's denial through (the guard and the managed file's
         * deny rules still deny) */
        common_cat(r->o.reason, sizeof(r->o.reason), 0, j.reason);
        if (j.report_only) {
            r->o.would_deny = 1;
            proceed(r);
        } else {
            policy_deny_hint(r->pol->p, host, port, rq, &j, NULL, r->o.hint, sizeof(r->o.hint));
            deny(r, EGRESS_BY_POLICY, NULL);
        }
        break;
    }
    return 0;
}

int egress_start(struct egress_env *e, const struct policy_host *host, uint16_t port,
                 const char *protocol, const char *client, egress_cb cb, void *arg,
                 struct egress_req **req)
{
    return start(e, host, port, NULL, protocol, client, cb, arg, req, 0);
}

int egress_start_request(struct egress_env *e, const struct policy_host *host, uint16_t port,
                         const struct policy_request *rq, const char *protocol, const char *client,
                         egress_cb cb, void *arg, struct egress_req **req)
{
    return start(e, host, port, rq, protocol, client, cb, arg, req, 0);
}

int egress_start_dial(struct egress_env *e, const struct policy_host *host, uint16_t port,
                      const char *protocol, const char *client, unsigned how, egress_cb cb,
                      void *arg, struct egress_req **req)
{
    return start(e, host, port, NULL, protocol, client, cb, arg, req, how | EGRESS_HANDOVER);
}

void egress_cancel(struct egress_req *r)
{
    if (r == NULL)
        return;
    switch (r->state) {
    case REQ_ASK:
        ask_wait_cancel(r->aw);
        break;
    case REQ_RESOLVE:
        resolver_query_detach(r->q);
        break;
    case REQ_DIAL:
        dialer_cancel(r->dialer);
        break;
    case REQ_PARENT:
        parent_dial_cancel(r->pdial);
        break;
    case REQ_DECIDE:
        break;
    }
    req_free(r);
}
