/* bridge/forward.c - the forwarder (bridge/forward.h): accept, dial the
 * fixed target, splice with a relay, close; one over-limit rule (pause at
 * max_conns, resume when a connection ends). */
#include "bridge/forward.h"

#include "common/common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One client connection. Owned by the forwarder's list from accept to the
 * relay's last close callback, where it is logged and freed (R5). */
struct fwd_conn {
    struct relay relay; /* a = client, b = upstream, timer */
    struct forwarder *f;
    struct fwd_conn *prev, *next;
    struct dialer *dialer; /* dialing; NULL once the callback ran or was cancelled */
    uv_shutdown_t shut;    /* dial failed: our FIN to the client */
    uint64_t id;
    int dial_status;   /* 0, or the UV_E* the dial failed with */
    int accept_status; /* 0, or the UV_E* listener_accept failed with */
    int stopped;       /* closed because the forwarder is stopping */
    char peer[64];
};

struct forwarder {
    uv_loop_t *loop;
    struct forward_opts o;
    struct dialer_target target;
    enum relay_kind b_kind;
    char host[ENDPOINT_STR_MAX]; /* the target's text, for the log */
    struct conn_limit own;       /* when the owner gives none */
    struct conn_limit *limit;
    struct fwd_conn *conns;
    size_t live;
    uint64_t own_id;
    int stopping;
    void (*done)(void *);
    void *done_arg;
};

static size_t live_of(void *ctx)
{
    const struct forwarder *f = ctx;

    return f->live;
}

int forwarder_new(struct forwarder **out, uv_loop_t *loop, const struct forward_opts *o)
{
    struct forwarder *f;

    if ((o->limit == NULL && o->max_conns == 0) || o->connect_ms == 0 ||
        (o->connect.kind != ENDPOINT_TCP && o->connect.kind != ENDPOINT_UNIX))
        return UV_EINVAL;
    f = calloc(1, sizeof(*f));
    if (f == NULL)
        return UV_ENOMEM;
    f->loop = loop;
    f->o = *o;
    if (f->o.next_id == NULL)
        f->o.next_id = &f->own_id;
    if (o->connect.kind == ENDPOINT_UNIX) {
        f->target.is_unix = 1;
        f->target.path = f->o.connect.path;
        f->b_kind = RELAY_PIPE;
        snprintf(f->host, sizeof(f->host), "%s", o->connect.path);
    } else {
        f->target.addr = o->connect.addr;
        f->target.port = o->connect.port;
        f->b_kind = RELAY_TCP;
        policy_addr_str(&o->connect.addr, f->host, sizeof(f->host));
    }
    f->limit = o->limit;
    if (f->limit == NULL) {
        conn_limit_init(&f->own, loop, o->max_conns, live_of, f);
        f->limit = &f->own;
    }
    *out = f;
    return 0;
}

size_t forwarder_live(const struct forwarder *f)
{
    return f->live;
}

/* ------------------------------------------------------------------------ */
/* Connections                                                               */

static void log_conn(const struct fwd_conn *c)
{
    const struct relay *r = &c->relay;
    char how[96];
    struct connlog rec;

    if (c->f->o.log == NULL)
        return;
    if (c->accept_status < 0)
        snprintf(how, sizeof(how), "accept failed: %s", uv_err_name(c->accept_status));
    else if (c->dial_status < 0)
        snprintf(how, sizeof(how), "connect failed: %s", uv_err_name(c->dial_status));
    else if (c->stopped && r->end == RELAY_END_OWNER)
        snprintf(how, sizeof(how), "closed at shutdown");
    else if (c->stopped)
        snprintf(how, sizeof(how), "closed at shutdown before connecting");
    else
        relay_end_text(r, how, sizeof(how));
    memset(&rec, 0, sizeof(rec));
    rec.event = CONNLOG_CLOSE;
    rec.id = c->id;
    rec.client = c->peer;
    rec.protocol = "forward";
    rec.host = c->f->host;
    rec.port = c->f->target.is_unix ? 0 : c->f->target.port;
    rec.code = -1;
    rec.bytes_up = r->a.nread;
    rec.bytes_down = r->b.nread;
    rec.duration_ms = uv_now(r->timer.loop) - r->started_ms;
    rec.end = how;
    c->f->o.log(c->f->o.log_ctx, &rec);
}

static void on_own_closed(uv_handle_t *h)
{
    struct forwarder *f = container_of(h, struct forwarder, own.retry);

    if (f->done != NULL)
        f->done(f->done_arg);
    free(f);
}

static void maybe_free(struct forwarder *f)
{
    if (f->stopping != 1 || f->live != 0)
        return;
    f->stopping = 2;
    if (f->limit != &f->own) {
        if (f->done != NULL)
            f->done(f->done_arg);
        free(f);
        return;
    }
    /* the own limit's timer: closed here, so f is freed after it */
    f->own.stopped = 1;
    uv_close((uv_handle_t *)&f->own.retry, on_own_closed);
}

static void on_conn_closed(struct relay *r)
{
    struct fwd_conn *c = r->data;
    struct forwarder *f = c->f;

    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        f->conns = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    log_conn(c);
    free(c);
    f->live--;
    if (f->stopping)
        maybe_free(f);
    else
        conn_limit_released(f->limit);
}

/* Dial failed: drop what the client sends, close once it has closed. One
 * loop, so one sink serves every draining connection. */
static void on_drain_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    static char sink[64 * 1024];

    (void)h;
    (void)suggested;
    *buf = uv_buf_init(sink, sizeof(sink));
}

static void on_drain_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct relay *r = container_of(s, struct relay, a.u.s);
    struct fwd_conn *c = r->data;

    (void)buf;
    if (nread < 0)
        relay_close(r, c->dial_status); /* EOF or error: the client is gone */
}

static void on_drain_shutdown(uv_shutdown_t *req, int status)
{
    (void)req;
    (void)status; /* UV_ECANCELED when closed first; nothing else to do */
}

static void on_linger_timeout(uv_timer_t *t)
{
    struct relay *r = container_of(t, struct relay, timer);
    struct fwd_conn *c = r->data;

    relay_close(r, c->dial_status);
}

static void close_refused(struct fwd_conn *c)
{
    uv_stream_t *a = &c->relay.a.u.s;

    if (c->f->stopping || uv_read_start(a, on_drain_alloc, on_drain_read) != 0 ||
        uv_shutdown(&c->shut, a, on_drain_shutdown) != 0) {
        relay_close(&c->relay, c->dial_status);
        return;
    }
    uv_timer_start(&c->relay.timer, on_linger_timeout, FORWARD_LINGER_MS, 0);
}

static void on_dialed(void *arg, int status, int fd, size_t index)
{
    struct fwd_conn *c = arg;
    int rc;

    (void)index;
    c->dialer = NULL;
    if (status < 0) {
        c->dial_status = status;
        close_refused(c);
        return;
    }
    rc = relay_open_b(&c->relay, fd); /* closes fd on error */
    if (rc == 0)
        rc = relay_start(&c->relay, c->f->o.idle_ms);
    if (rc < 0)
        relay_close(&c->relay, rc);
}

void forwarder_accept(struct forwarder *f, struct listener *l)
{
    struct fwd_conn *c;
    int rc;

    if (f->stopping || conn_limit_admit(f->limit, l) < 0)
        return;
    c = calloc(1, sizeof(*c));
    if (c == NULL) {
        /* the connection stays held by the listener until resumed */
        conn_limit_accepted(f->limit, l, UV_ENOMEM);
        return;
    }
    c->f = f;
    c->id = ++*f->o.next_id;
    c->next = f->conns;
    if (f->conns != NULL)
        f->conns->prev = c;
    f->conns = c;
    f->live++;
    relay_init(f->loop, &c->relay, (enum relay_kind)listener_kind(l), f->b_kind, on_conn_closed,
               c);
    rc = listener_accept(l, &c->relay.a.u.s);
    conn_limit_accepted(f->limit, l, rc);
    if (rc < 0) {
        snprintf(c->peer, sizeof(c->peer), "-");
        c->accept_status = rc;
        relay_close(&c->relay, rc);
        return;
    }
    if (f->o.log != NULL) /* only the log needs it: a getpeername() saved */
        common_peer_name(&c->relay.a.u.s, listener_kind(l) == RELAY_PIPE, c->peer,
                         sizeof(c->peer));
    rc = dialer_start(&c->dialer, f->loop, &f->target, 1, f->o.connect_ms, on_dialed, c);
    if (rc < 0) {
        c->dialer = NULL;
        c->dial_status = rc;
        close_refused(c);
    }
}

void forwarder_close(struct forwarder *f, void (*done)(void *), void *arg)
{
    if (f->stopping)
        return;
    f->stopping = 1;
    f->done = done;
    f->done_arg = arg;
    if (f->limit == &f->own)
        f->own.npaused = 0; /* the listeners are being closed */
    for (struct fwd_conn *c = f->conns; c != NULL; c = c->next) {
        if (c->dialer != NULL) {
            dialer_cancel(c->dialer);
            c->dialer = NULL;
        }
        c->stopped = c->dial_status == 0 && c->accept_status == 0 && !c->relay.closing;
        relay_close(&c->relay, UV_ECANCELED);
    }
    maybe_free(f);
}
