/* bridge/forward.c - the forwarder (bridge/forward.h): accept, dial the
 * fixed target, splice with a relay, close; one over-limit rule (pause at
 * max_conns, resume when a connection ends). */
#include "bridge/forward.h"

#include "common/common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One client connection: the front-end connection base (id, peer, start
 * time, its own timer, the log fields, the close record) plus the relay.
 * In the forwarder's list (the base's) from accept until the base's
 * release(), after the relay's last close callback and the timer's (R5). */
struct fwd_conn {
    struct frontend_conn fc; /* fc.timer: the linger after a failed dial */
    struct relay relay;      /* a = client, b = upstream */
    struct forwarder *f;
    struct dialer *dialer; /* dialing; NULL once the callback ran or was cancelled */
    uv_shutdown_t shut;    /* dial failed: our FIN to the client */
    int dial_status;   /* 0, or the UV_E* the dial failed with */
    int accept_status; /* 0, or the UV_E* listener_accept failed with */
    int stopped;       /* closed because the forwarder is stopping */
};

struct forwarder {
    struct frontend fe; /* loop, log, shared id counter, the live connections */
    struct forward_opts o;
    struct dialer_target target;
    enum relay_kind b_kind;
    char host[ENDPOINT_STR_MAX]; /* the target's text, for the log */
    struct conn_limit own;       /* when the owner gives none */
    struct conn_limit *limit;
    uint64_t own_id;
    int stopping;
    void (*done)(void *);
    void *done_arg;
};

static size_t live_of(void *ctx)
{
    const struct forwarder *f = ctx;

    return f->fe.nconns;
}

static void on_conn_ended(struct frontend *fe);

int forwarder_new(struct forwarder **out, uv_loop_t *loop, const struct forward_opts *o)
{
    struct forwarder *f;

    if ((o->limit == NULL && o->max_conns == 0) || o->connect_ms == 0 ||
        (o->connect.kind != ENDPOINT_TCP && o->connect.kind != ENDPOINT_UNIX))
        return UV_EINVAL;
    f = calloc(1, sizeof(*f));
    if (f == NULL)
        return UV_ENOMEM;
    f->o = *o;
    if (f->o.next_id == NULL)
        f->o.next_id = &f->own_id;
    frontend_init(&f->fe, loop, f->o.next_id);
    f->fe.log = o->log;
    f->fe.log_ctx = o->log_ctx;
    f->fe.conn_ended = on_conn_ended;
    if (o->connect.kind == ENDPOINT_UNIX) {
        f->target.is_unix = 1;
        f->target.path = f->o.connect.path;
        f->b_kind = RELAY_PIPE;
        snprintf(f->host, sizeof(f->host), "%s", o->connect.path);
    } else {
        f->target.addr = o->connect.addr;
        f->target.port = o->connect.port;
        f->target.make_socket = o->make_socket;
        f->target.make_socket_arg = o->make_socket_arg;
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
    return f->fe.nconns;
}

/* ------------------------------------------------------------------------ */
/* Connections                                                               */

/* How the connection ended, for its close record: the forwarder's own words
 * for a failed accept or dial and for a shutdown, else the relay's. */
static void note_end(struct fwd_conn *c)
{
    const struct relay *r = &c->relay;
    char how[80];

    if (c->accept_status < 0)
        frontend_conn_end_fmt(&c->fc, "accept failed: %s", uv_err_name(c->accept_status));
    else if (c->dial_status < 0)
        frontend_conn_end_fmt(&c->fc, "connect failed: %s", uv_err_name(c->dial_status));
    else if (c->stopped && r->end == RELAY_END_OWNER)
        c->fc.end = "closed at shutdown";
    else if (c->stopped)
        c->fc.end = "closed at shutdown before connecting";
    else
        frontend_conn_end_fmt(&c->fc, "%s", relay_end_text(r, how, sizeof(how)));
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
    if (f->stopping != 1 || f->fe.nconns != 0)
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

/* The base's last step, after the close record and leaving the list. */
static void on_conn_ended(struct frontend *fe)
{
    struct forwarder *f = container_of(fe, struct forwarder, fe);

    if (f->stopping)
        maybe_free(f);
    else
        conn_limit_released(f->limit);
}

static void release(struct frontend_conn *fc)
{
    free(container_of(fc, struct fwd_conn, fc));
}

static void conn_bytes(const struct frontend_conn *fc, uint64_t *up, uint64_t *down)
{
    relay_bytes(&container_of(fc, const struct fwd_conn, fc)->relay, up, down);
}

/* The end text is the forwarder's (note_end); the base adds the relay's
 * own ending only where note_end would have written the same words. */
static void on_relay_closed(struct relay *r)
{
    struct fwd_conn *c = r->data;

    note_end(c);
    frontend_conn_relay_closed(&c->fc, r); /* the close record, then release() */
}

/* Every close the forwarder makes: the relay's handles and the timer. */
static void conn_close(struct fwd_conn *c, int status)
{
    frontend_conn_timer_close(&c->fc);
    relay_close(&c->relay, status);
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
        conn_close(c, c->dial_status); /* EOF or error: the client is gone */
}

static void on_drain_shutdown(uv_shutdown_t *req, int status)
{
    (void)req;
    (void)status; /* UV_ECANCELED when closed first; nothing else to do */
}

static void on_linger_timeout(uv_timer_t *t)
{
    struct fwd_conn *c = container_of(frontend_conn_of_timer(t), struct fwd_conn, fc);

    conn_close(c, c->dial_status);
}

static void close_refused(struct fwd_conn *c)
{
    uv_stream_t *a = relay_client(&c->relay);

    if (c->f->stopping || uv_read_start(a, on_drain_alloc, on_drain_read) != 0 ||
        uv_shutdown(&c->shut, a, on_drain_shutdown) != 0) {
        conn_close(c, c->dial_status);
        return;
    }
    frontend_conn_timer_set(&c->fc, on_linger_timeout, FORWARD_LINGER_MS);
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
    if (rc < 0) {
        conn_close(c, rc);
        return;
    }
    frontend_conn_timer_close(&c->fc); /* the relay has a timer of its own */
}

/* Shutdown: the dial cancelled, the connection closed ("closed at
 * shutdown" unless it was already ending). */
static void force_close(struct frontend_conn *fc)
{
    struct fwd_conn *c = container_of(fc, struct fwd_conn, fc);

    if (c->dialer != NULL) {
        dialer_cancel(c->dialer);
        c->dialer = NULL;
    }
    c->stopped = c->dial_status == 0 && c->accept_status == 0 && !c->relay.closing;
    conn_close(c, UV_ECANCELED);
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
    c->fc.force_close = force_close;
    c->fc.bytes = conn_bytes;
    c->fc.release = release;
    /* counted live from here */
    if (frontend_conn_start(&f->fe, &c->fc, f->o.protocol != NULL ? f->o.protocol : "forward") <
        0) {
        free(c);
        conn_limit_accepted(f->limit, l, UV_ENOMEM);
        return;
    }
    c->fc.host = f->host;
    c->fc.port = f->target.is_unix ? 0 : f->target.port;
    relay_init(f->fe.loop, &c->relay, (enum relay_kind)listener_kind(l), f->b_kind,
               on_relay_closed, c);
    rc = listener_accept(l, relay_client(&c->relay));
    conn_limit_accepted(f->limit, l, rc);
    if (rc < 0) {
        snprintf(c->fc.client, sizeof(c->fc.client), "-");
        c->accept_status = rc;
        conn_close(c, rc);
        return;
    }
    if (f->o.log != NULL) /* only the log needs it: a getpeername() saved */
        common_peer_name(relay_client(&c->relay), listener_kind(l) == RELAY_PIPE, c->fc.client,
                         sizeof(c->fc.client));
    rc = dialer_start(&c->dialer, f->fe.loop, &f->target, 1, f->o.connect_ms, on_dialed, c);
    if (rc < 0) {
        c->dialer = NULL;
        c->dial_status = rc;
        close_refused(c);
    }
}

void forwarder_close(struct forwarder *f, void (*done)(void *), void *arg)
{
    struct frontend_conn *fc, *prev;

    if (f->stopping)
        return;
    f->stopping = 1;
    f->done = done;
    f->done_arg = arg;
    if (f->limit == &f->own)
        f->own.npaused = 0; /* the listeners are being closed */
    /* newest first, as the connections were always closed at shutdown;
     * force_close frees nothing synchronously */
    for (fc = f->fe.conns.prev; fc != &f->fe.conns; fc = prev) {
        prev = fc->prev;
        fc->force_close(fc);
    }
    maybe_free(f);
}
