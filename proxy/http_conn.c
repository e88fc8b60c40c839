/* proxy/http_conn.c - the client connection and its head: accept, reading
 * the client, the head and keep-alive timers, the lingering close, teardown
 * and drain (the states are in proxy/http_int.h). */
#include "proxy/http_int.h"

#include "proxy/service.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

_Thread_local char http_scratch[512];

static void on_timer(uv_timer_t *t);

/* ------------------------------------------------------------------------ */
/* Small helpers                                                             */

void http_set_state(struct http_conn *c, enum http_state s)
{
    static const char *const names[] = {"HEAD",  "EGRESS", "FORWARD", "TUNNEL",
                                        "SNIFF", "TLS",    "LINGER",  "CLOSING"};

    assert(c->state != HTTP_ST_CLOSING); /* CLOSING is the last state */
    if (c->state != s)
        frontend_conn_debug(&c->fc, "%s -> %s", names[c->state], names[s]);
    c->state = s;
}

void http_set_req(struct http_conn *c, enum http_req_phase p)
{
    static const char *const names[] = {"body", "done"};
    struct http_work *w = c->w;

    if (w->req_phase != p)
        frontend_conn_debug(&c->fc, "request %s -> %s", names[w->req_phase], names[p]);
    w->req_phase = p;
}

void http_set_resp(struct http_conn *c, enum http_resp_phase p)
{
    static const char *const names[] = {"head", "body", "done"};
    struct http_work *w = c->w;

    assert(p == RESP_HEAD || p > w->resp_phase); /* forward, or a new exchange */
    if (w->resp_phase != p)
        frontend_conn_debug(&c->fc, "response %s -> %s", names[w->resp_phase], names[p]);
    w->resp_phase = p;
}

void http_set_up(struct http_conn *c, struct http_up *u, enum http_up_phase p)
{
    static const char *const names[] = {"busy", "idle", "closing"};

    assert(u->phase != UP_CLOSING); /* CLOSING is the last phase */
    if (u->phase != p)
        frontend_conn_debug(&c->fc, "upstream %s:%u %s -> %s", u->host, (unsigned)u->port,
                            names[u->phase], names[p]);
    u->phase = p;
}

void http_set_reason(struct http_conn *c, const char *s)
{
    frontend_conn_set_text(&c->fc.reason, s);
}

const char *http_host_port(const struct http_conn *c, char *buf, size_t len)
{
    size_t at;

    if (len == 0)
        return buf;
    if (c->fc.host == NULL) {
        common_cat(buf, len, 0, "-");
        return buf;
    }
    /* "[v6]:port" or "host:port", without snprintf (every denial) */
    at = common_cat(buf, len, 0, c->host.kind == POLICY_HOST_IPV6 ? "[" : "");
    at = common_cat(buf, len, at, c->host.name);
    at = common_cat(buf, len, at, c->host.kind == POLICY_HOST_IPV6 ? "]:" : ":");
    common_cat_u(buf, len, at, c->fc.port);
    return buf;
}

void http_timer_set(struct http_conn *c, enum http_timer kind, uint64_t ms)
{
    c->w->timer = kind;
    if (kind == TIMER_NONE || ms == 0)
        frontend_conn_timer_set(&c->fc, NULL, 0);
    else
        frontend_conn_timer_set(&c->fc, on_timer, ms);
}

/* ------------------------------------------------------------------------ */
/* Teardown                                                                  */

static void on_up_closed(uv_handle_t *h)
{
    struct http_up *u = container_of(h, struct http_up, tcp);
    struct http_conn *c = u->c;

    if (c != NULL) {
        struct http_up **pp = &c->closing_ups;
        while (*pp != NULL && *pp != u)
            pp = &(*pp)->next;
        if (*pp == u)
            *pp = u->next;
    }
    free(u);
}

void http_up_close(struct http_conn *c, struct http_up *u)
{
    if (u == NULL || u->phase == UP_CLOSING)
        return;
    http_set_up(c, u, UP_CLOSING);
    if (c->w != NULL && c->w->up == u)
        c->w->up = NULL;
    u->next = c->closing_ups;
    c->closing_ups = u;
    if (u->tio != NULL)
        http_pump_detach_up(u->tio, u); /* close_notify, then the pump ends */
    uv_close((uv_handle_t *)&u->tcp, on_up_closed);
}

void http_work_free(struct http_conn *c)
{
    struct http_work *w = c->w;

    if (w == NULL)
        return;
    http_splice_abort(c);
    http_up_close(c, w->up);
    free(w->in);
    free(w->uin);
    free(w->out);
    free(w->ohead);
    free(w->rq_buf);
    http_cred_free(w);
    free(w);
    c->w = NULL;
}

static void release(struct frontend_conn *fc)
{
    free(container_of(fc, struct http_conn, fc));
}

static void on_relay_closed(struct relay *r)
{
    struct http_conn *c = container_of(r, struct http_conn, relay);

    http_work_free(c); /* before the detach: it may close an upstream too */
    for (struct http_up *u = c->closing_ups; u != NULL; u = u->next)
        u->c = NULL; /* their close callbacks only free them now */
    frontend_conn_relay_closed(&c->fc, r); /* the close record, then release() */
}

/* The one way a connection ends (idempotent). */
void http_conn_close(struct http_conn *c, const char *end)
{
    if (c->state == HTTP_ST_CLOSING)
        return;
    if (c->fc.end == NULL)
        c->fc.end = end;
    http_set_state(c, HTTP_ST_CLOSING);
    http_splice_abort(c); /* its copies of the sockets go with it */
    egress_cancel(c->req);
    c->req = NULL;
    http_tls_conn_closing(c);
    if (c->w != NULL)
        http_up_close(c, c->w->up);
    frontend_conn_timer_close(&c->fc);
    relay_close(&c->relay, 0);
}

static void conn_bytes(const struct frontend_conn *fc, uint64_t *up, uint64_t *down)
{
    const struct http_conn *c = container_of(fc, const struct http_conn, fc);

    *up += c->bytes_up;
    *down += c->bytes_down;
    relay_bytes(&c->relay, up, down);
}

static void force_close(struct frontend_conn *fc)
{
    struct http_conn *c = container_of(fc, struct http_conn, fc);
    http_conn_close(c, "closed by shutdown");
}

/* ------------------------------------------------------------------------ */
/* Reading the client                                                        */

static void on_client_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_client_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

void http_client_read_start(struct http_conn *c)
{
    struct http_work *w = c->w;
    int rc;

    if (w->creading || w->client_eof)
        return;
    if (c->cio != NULL)
        rc = http_pump_read_start(c->cio);
    else if (c->terminated)
        rc = UV_EPIPE; /* its pump is gone */
    else
        rc = uv_read_start(relay_client(&c->relay), on_client_alloc, on_client_read);
    if (rc < 0) {
        http_conn_close(c, "client read failed");
        return;
    }
    w->creading = 1;
}

/* Stops the client transport (also after a read error or EOF). */
static void client_halt(struct http_conn *c)
{
    if (c->cio != NULL)
        http_pump_read_stop(c->cio);
    else if (!c->terminated)
        uv_read_stop(relay_client(&c->relay));
}

void http_client_read_stop(struct http_conn *c)
{
    if (c->w != NULL && c->w->creading) {
        client_halt(c);
        c->w->creading = 0;
    }
}

/* Between a request head and the next one (EGRESS and FORWARD once the
 * request went up whole), client reads go on, so a kept-alive client that
 * waits for its answer costs no read stop and restart per request; bytes it
 * sends early (a pipelined request) are held in w->in and reading stops
 * until they are served. */
void http_client_hold(struct http_conn *c)
{
    if (c->w != NULL && c->w->in_len > 0)
        http_client_read_stop(c);
}

static size_t in_capacity(const struct frontend *f)
{
    return f->max_head_bytes > HTTP_IN_MIN ? f->max_head_bytes : HTTP_IN_MIN;
}

void http_consume_in(struct http_work *w, size_t n)
{
    memmove(w->in, w->in + n, w->in_len - n);
    w->in_len -= n;
    w->scan = 0;
}

/* ------------------------------------------------------------------------ */
/* Lingering close                                                           */

static void on_linger_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)h;
    (void)suggested;
    *buf = uv_buf_init(http_scratch, sizeof(http_scratch));
}

/* Reads dropped in LINGER. Before our FIN is out (TIMER_FLUSH) an EOF or an
 * error only stops reading: on_final_shutdown then closes. */
static void on_linger_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct http_conn *c = s->data;

    (void)buf;
    if (nread >= 0 || c->state == HTTP_ST_CLOSING)
        return;
    if (c->w->timer != TIMER_FLUSH) {
        http_conn_close(c, NULL);
        return;
    }
    c->w->client_eof = 1;
    c->w->creading = 0;
    uv_read_stop(s);
}

/* Our FIN is out (status 0) or could not be sent: linger, or close. */
static void after_fin(struct http_conn *c, int status)
{
    if (c->state == HTTP_ST_CLOSING)
        return;
    if (status < 0 || c->w->client_eof ||
        (!c->w->creading &&
         uv_read_start(relay_client(&c->relay), on_linger_alloc, on_linger_read) < 0)) {
        http_conn_close(c, NULL);
        return;
    }
    http_timer_set(c, TIMER_LINGER, HTTP_LINGER_MS);
}

static void on_final_shutdown(uv_shutdown_t *sr, int status)
{
    after_fin(sr->data, status);
}

/* Our FIN with shutdown(2) at once when nothing is queued for the client:
 * uv_shutdown() sends it from libuv's pending queue and then re-arms the
 * stream's epoll registration for nothing (one epoll_ctl per close in
 * libuv 1.44; relay.c's side_shutdown avoids it the same way). Returns 0
 * when uv_shutdown() is needed. */
static int fin_now(struct http_conn *c)
{
    uv_stream_t *s = relay_client(&c->relay);
    uv_os_fd_t fd;

    if (uv_stream_get_write_queue_size(s) != 0 || uv_fileno((uv_handle_t *)s, &fd) != 0)
        return 0;
    after_fin(c, shutdown(fd, SHUT_WR) == 0 ? 0 : uv_translate_sys_error(errno));
    return 1;
}

/* LINGER: a client stream that is being read goes on being read, into
 * on_linger_read (its callbacks swapped in place, as uv_read_start() would
 * set them): stopping here and starting again after the FIN cost two
 * epoll_ctl calls per answered-and-closed connection (every denial).
 * Returns 1 when it did, 0 when reads stop instead. */
static int linger_early(struct http_conn *c)
{
    uv_stream_t *s = relay_client(&c->relay);

    if (c->terminated || c->cio != NULL || c->w->client_eof || !c->w->creading)
        return 0;
    s->alloc_cb = on_linger_alloc;
    s->read_cb = on_linger_read;
    return 1;
}

/* The last answer is queued: once it is flushed, send our FIN, then read
 * and drop what the client still sends until its EOF or HTTP_LINGER_MS, so
 * unread bytes do not turn close() into a reset that destroys the answer
 * before the client reads it. */
void http_close_gracefully(struct http_conn *c, const char *end)
{
    struct http_work *w = c->w;

    if (c->state == HTTP_ST_CLOSING || c->state == HTTP_ST_LINGER)
        return;
    if (http_out_flush(c) < 0) { /* the shutdown goes after everything queued */
        http_conn_close(c, "client write failed");
        return;
    }
    if (end != NULL)
        c->fc.end = end;
    http_set_state(c, HTTP_ST_LINGER);
    egress_cancel(c->req);
    c->req = NULL;
    http_up_close(c, w->up);
    if (!linger_early(c))
        http_client_read_stop(c);
    w->last_io = uv_now(c->fc.f->loop);
    http_timer_set(c, TIMER_FLUSH, c->fc.f->idle_timeout_ms);
    if (c->terminated) {
        /* the pump sends close_notify after what is queued, then ends */
        http_conn_close(c, NULL);
        return;
    }
    if (fin_now(c))
        return;
    w->shutdown_req.data = c;
    if (uv_shutdown(&w->shutdown_req, relay_client(&c->relay), on_final_shutdown) < 0)
        http_conn_close(c, NULL);
}

/* ------------------------------------------------------------------------ */
/* Timers                                                                    */

static void on_timer(uv_timer_t *t)
{
    struct http_conn *c = container_of(frontend_conn_of_timer(t), struct http_conn, fc);
    struct http_work *w = c->w;
    char why[120];

    if (c->state == HTTP_ST_CLOSING || w == NULL)
        return;
    switch (c->state) {
    case HTTP_ST_HEAD:
        if (w->timer == TIMER_IDLE) {
            http_conn_close(c, "idle timeout");
            return;
        }
        snprintf(why, sizeof(why), "no complete request head within %u ms", c->fc.f->head_timeout_ms);
        if (w->in_len == 0) {
            http_set_reason(c, why);
            http_conn_close(c, "head timeout");
            return;
        }
        {
            struct http_reply r;
            memset(&r, 0, sizeof(r));
            http_set_reason(c, why);
            r.status = 408;
            r.error = "http_request_error";
            r.details = why;
            r.close = 1;
            http_answer(c, &r, "head timeout");
        }
        return;
    case HTTP_ST_FORWARD: {
        uint64_t now = uv_now(c->fc.f->loop), due = w->last_io + c->fc.f->idle_timeout_ms;
        if (now < due) {
            http_timer_set(c, TIMER_STALL, due - now);
            return;
        }
        snprintf(why, sizeof(why), "no progress for %u ms", c->fc.f->idle_timeout_ms);
        http_set_reason(c, why);
        if (w->resp_phase == RESP_HEAD) {
            struct http_reply r;
            memset(&r, 0, sizeof(r));
            r.status = 504;
            r.error = "http_response_timeout";
            r.details = "the upstream did not answer in time";
            r.close = 1;
            http_answer(c, &r, "upstream timeout");
        } else {
            http_conn_close(c, "upstream stalled");
        }
        return;
    }
    case HTTP_ST_LINGER:
        if (w->timer == TIMER_FLUSH) {
            uint64_t now = uv_now(c->fc.f->loop), due = w->last_io + c->fc.f->idle_timeout_ms;
            if (now < due) {
                http_timer_set(c, TIMER_FLUSH, due - now);
                return;
            }
            http_conn_close(c, "client does not read");
            return;
        }
        http_conn_close(c, NULL);
        return;
    default:
        return;
    }
}


/* Serves what w->in holds, in order, while the connection waits for heads. */
void http_process_client(struct http_conn *c)
{
    struct http_work *w = c->w;

    if (w->processing)
        return;
    w->processing = 1;
    while (c->state == HTTP_ST_HEAD) {
        size_t end = 0, max = c->fc.f->max_head_bytes;
        const char *why = NULL;
        enum http_find f;

        /* RFC 9112 2.2: empty lines before a request line are ignored */
        while (w->scan == 0 && w->in_len >= 2 && w->in[0] == '\r' && w->in[1] == '\n')
            http_consume_in(w, 2);
        if (w->in_len == 0) {
            if (w->client_eof) /* seen while the last request was served */
                http_close_gracefully(c, "client closed");
            else
                http_client_read_start(c);
            break;
        }
        if (http_client_queued(c) > RELAY_HIGH_WATER) {
            /* the client sends requests without reading the answers */
            w->wait_drain = 1;
            http_client_read_stop(c);
            break;
        }
        if (w->timer != TIMER_HEAD)
            http_timer_set(c, TIMER_HEAD, c->fc.f->head_timeout_ms);
        f = http_head_end(w->in, w->in_len, &w->scan, &end, &why);
        if (f == HTTP_FIND_MORE && (w->in_len >= max || w->in_len >= w->in_max)) {
            if (c->overloaded)
                http_reply_overloaded(c);
            else
                http_refuse(c, 431, "request head too large", 1, "head too large");
            break;
        }
        if (f == HTTP_FIND_MORE) {
            if (w->client_eof)
                http_close_gracefully(c, "client closed mid-head");
            else
                http_client_read_start(c);
            break;
        }
        if (f == HTTP_FIND_BAD) {
            if (c->overloaded)
                http_reply_overloaded(c);
            else
                http_refuse(c, 400, why, 1, "bad request");
            break;
        }
        if (end > max) {
            http_refuse(c, 431, "request head too large", 1, "head too large");
            break;
        }
        http_handle_head(c, end);
    }
    if (c->w != NULL)
        c->w->processing = 0;
}

/* Room for the next client bytes in w->in (a null buffer when none). */
void http_client_alloc(struct http_conn *c, uv_buf_t *buf)
{
    struct http_work *w = c->w;

    if (w->in == NULL) {
        w->in_max = in_capacity(c->fc.f);
        w->in_cap = HTTP_IN_START;
        w->in_len = 0;
        w->scan = 0;
        w->in = malloc(w->in_cap);
        if (w->in == NULL) {
            *buf = uv_buf_init(NULL, 0); /* UV_ENOBUFS */
            return;
        }
    }
    /* Grow (doubling, up to in_max) when little room is left, and to
     * HTTP_IN_MIN for a body: most heads fit the first 2 KiB, and an idle
     * or tunnelled connection should not hold more. */
    if (w->in_cap < w->in_max && (w->in_cap - w->in_len < HTTP_IN_START / 2 ||
                                  (c->state == HTTP_ST_FORWARD && w->in_cap < HTTP_IN_MIN))) {
        size_t ncap = w->in_cap * 2;
        char *n;
        if (c->state == HTTP_ST_FORWARD && ncap < HTTP_IN_MIN)
            ncap = HTTP_IN_MIN;
        if (ncap > w->in_max)
            ncap = w->in_max;
        n = realloc(w->in, ncap);
        if (n != NULL) {
            w->in = n;
            w->in_cap = ncap;
        }
    }
    if (w->in_cap == w->in_len) {
        *buf = uv_buf_init(NULL, 0); /* full: UV_ENOBUFS (never reached: 431 first) */
        return;
    }
    *buf = uv_buf_init(w->in + w->in_len, (unsigned)(w->in_cap - w->in_len));
}

static void on_client_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    http_client_alloc(h->data, buf);
}

static void on_client_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    (void)buf;
    http_client_got(s->data, nread);
}

/* nread client bytes appended to w->in (from the stream, or the pump), or
 * the client transport's EOF or error. */
void http_client_got(struct http_conn *c, ssize_t nread)
{
    struct http_work *w = c->w;

    if (c->state == HTTP_ST_CLOSING || w == NULL || nread == 0)
        return;
    if (nread < 0) {
        w->creading = 0;
        if (nread != UV_EOF) {
            if (c->fc.end == NULL)
                frontend_conn_end_fmt(&c->fc, "client error: %s", uv_err_name((int)nread));
            http_conn_close(c, c->fc.end);
            return;
        }
        if (c->state == HTTP_ST_FORWARD && w->req_phase == REQ_DONE) {
            w->client_eof = 1; /* half-closed after its request: the answer still goes out */
            client_halt(c);
            return;
        }
        if (c->state == HTTP_ST_FORWARD) {
            http_conn_close(c, "client closed mid-request");
            return;
        }
        if (c->state == HTTP_ST_EGRESS) {
            w->client_eof = 1; /* as above; a body still missing ends it in http_start_exchange */
            client_halt(c);
            return;
        }
        if (c->state == HTTP_ST_SNIFF) {
            w->client_eof = 1;
            client_halt(c);
            http_tls_sniff(c);
            return;
        }
        /* answers may still be queued: they go out before our FIN */
        w->client_eof = 1;
        http_close_gracefully(c, w->in_len > 0 ? "client closed mid-head" : "client closed");
        return;
    }
    w->in_len += (size_t)nread;
    switch (c->state) {
    case HTTP_ST_HEAD:
        http_process_client(c);
        return;
    case HTTP_ST_SNIFF:
        http_tls_sniff(c);
        return;
    case HTTP_ST_FORWARD:
        if (w->req_phase == REQ_DONE) {
            http_client_hold(c); /* a pipelined request: held for later */
            return;
        }
        w->last_io = uv_now(c->fc.f->loop);
        http_feed_request_body(c);
        return;
    default:
        /* held for later (CONNECT early data, pipelined requests, a body
         * that arrives while dialing) */
        http_client_read_stop(c);
        return;
    }
}

/* ------------------------------------------------------------------------ */
/* Accept                                                                    */

/* A new connection of f on a client stream of kind (not open yet). NULL
 * when out of memory. */
static struct http_conn *conn_new(struct frontend *f, int kind, const char *protocol)
{
    struct http_conn *c = calloc(1, sizeof(*c));
    struct http_work *w = calloc(1, sizeof(*w));

    if (c == NULL || w == NULL) {
        free(c);
        free(w);
        return NULL;
    }
    c->w = w;
    c->held_fd = -1;
    c->fc.force_close = force_close;
    c->fc.bytes = conn_bytes;
    c->fc.release = release;
    if (frontend_conn_start(f, &c->fc, protocol) < 0) {
        free(c);
        free(w);
        return NULL;
    }
    relay_init(f->loop, &c->relay, (enum relay_kind)kind, RELAY_TCP, on_relay_closed, c);
    relay_client(&c->relay)->data = c; /* our read callbacks find c there */
    http_set_state(c, HTTP_ST_HEAD);
    return c;
}

/* The client stream is open: the parsers, the head timer, reading. */
static void conn_begin(struct http_conn *c)
{
    struct http_work *w = c->w;

    llhttp_init(&w->reqp, HTTP_REQUEST, &http_req_settings);
    llhttp_init(&w->resp, HTTP_RESPONSE, &http_resp_settings);
    w->reqp.data = c;
    w->resp.data = c;
    http_timer_set(c, TIMER_HEAD, c->fc.f->head_timeout_ms);
    http_client_read_start(c);
}

int http_session_accept(struct frontend *f, struct listener *l, int overloaded)
{
    int kind = listener_kind(l);
    struct http_conn *c = conn_new(f, kind, "http");
    int rc;

    if (c == NULL)
        return UV_ENOMEM;
    c->overloaded = overloaded != 0;
    rc = listener_accept(l, relay_client(&c->relay));
    if (rc < 0) {
        snprintf(c->fc.client, sizeof(c->fc.client), "-");
        http_conn_close(c, "accept failed");
        return rc;
    }
    common_peer_name(relay_client(&c->relay), kind == RELAY_PIPE, c->fc.client, sizeof(c->fc.client));
    if (kind == RELAY_TCP && !listener_nodelay(l))
        (void)uv_tcp_nodelay((uv_tcp_t *)relay_client(&c->relay), 1);
    if (kind == RELAY_TCP)
        relay_client_nodelay(&c->relay); /* set one way or the other */
    conn_begin(c);
    return 0;
}

/* The inner connection of a terminated tunnel (proxy/http_tls.c): its
 * client transport is outer's pump p (no socket of its own); requests go
 * to outer's CONNECT target, the first over the socket outer's CONNECT
 * dialed. Counted as a connection of f like an accepted one. 0, or
 * UV_ENOMEM with nothing made. */
int http_session_open_terminated(struct frontend *f, struct http_tls_pump *p,
                                 struct http_conn *outer)
{
    struct proxy_service *svc = f->data;
    struct http_conn *c;

    __atomic_fetch_add(svc->live, 1, __ATOMIC_RELAXED); /* on_conn_ended takes it back */
    c = conn_new(f, RELAY_PIPE, "https");
    if (c == NULL) {
        __atomic_fetch_sub(svc->live, 1, __ATOMIC_RELAXED);
        return UV_ENOMEM;
    }
    c->terminated = 1;
    c->fc.terminated = 1;
    c->host = outer->host;
    c->fc.port = outer->fc.port;
    snprintf(c->fc.client, sizeof(c->fc.client), "%s", outer->fc.client);
    c->held_fd = outer->held_fd; /* the CONNECT's dial: the first request's upstream */
    c->held_addr = outer->held_addr;
    outer->held_fd = -1;
    http_pump_attach(p, c);
    conn_begin(c);
    return 0;
}

/* A tunnel another front end hands to TLS termination (http_tls_adopt):
 * a connection of f on a->client_fd, judged for a->host and a->port, with
 * the client's early bytes in w->in. NULL with nothing taken. */
struct http_conn *http_session_adopt(struct frontend *f, const struct frontend_tls_adopt *a)
{
    struct proxy_service *svc = f->data;
    struct http_conn *c;
    struct http_work *w;

    __atomic_fetch_add(svc->live, 1, __ATOMIC_RELAXED); /* on_conn_ended takes it back */
    c = conn_new(f, RELAY_TCP, a->protocol);
    if (c == NULL) {
        __atomic_fetch_sub(svc->live, 1, __ATOMIC_RELAXED);
        return NULL;
    }
    w = c->w;
    c->host = *a->host;
    c->fc.host = c->host.name;
    c->fc.port = a->port;
    c->fc.addr = a->addr;
    snprintf(c->fc.client, sizeof(c->fc.client), "%s", a->client);
    w->in_max = in_capacity(f);
    w->in_cap = a->early_len > HTTP_IN_START ? a->early_len : HTTP_IN_START;
    if (w->in_max < w->in_cap)
        w->in_max = w->in_cap;
    w->in = malloc(w->in_cap);
    if (w->in == NULL ||
        uv_tcp_open((uv_tcp_t *)relay_client(&c->relay), a->client_fd) < 0) {
        http_conn_close(c, "cannot adopt the client"); /* logged; the fds stay the caller's */
        return NULL;
    }
    if (a->early_len > 0)
        memcpy(w->in, a->early, a->early_len);
    w->in_len = a->early_len;
    relay_client_nodelay(&c->relay);
    llhttp_init(&w->reqp, HTTP_REQUEST, &http_req_settings);
    llhttp_init(&w->resp, HTTP_RESPONSE, &http_resp_settings);
    w->reqp.data = c;
    w->resp.data = c;
    return c;
}

/* ------------------------------------------------------------------------ */
/* Drain                                                                     */

void http_frontend_drain(struct frontend *f)
{
    struct frontend_conn *fc = f->conns.next;

    f->draining = 1;
    /* http_close_gracefully never frees synchronously: the list stays valid */
    while (fc != &f->conns) {
        struct frontend_conn *next = fc->next;
        struct http_conn *c = container_of(fc, struct http_conn, fc);

        if (c->state == HTTP_ST_HEAD && c->w != NULL && c->w->in_len == 0 && !c->w->processing)
            http_close_gracefully(c, "drained");
        fc = next;
    }
}
