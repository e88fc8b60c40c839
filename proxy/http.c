/* proxy/http.c - one HTTP proxy client connection, from accept to close.
 *
 * States (R7); each says what it owns besides the relay's three handles
 * (a = client, b = tunnel upstream, timer):
 *   HEAD     client reads into w->in; the head timer (from the first byte of
 *            a head, never extended) or the keep-alive idle timer; an idle
 *            kept upstream (w->up, read to notice its close)
 *   EGRESS   req (decision, ask, DNS, dial); the head is consumed, early
 *            bytes wait in w->in; client reads stopped for CONNECT, and for
 *            absolute-form once a byte is held (client_hold)
 *   FORWARD  an absolute-form exchange: w->up (busy), both llhttp parsers,
 *            queued writes both ways, the stall timer (idle_timeout_ms
 *            without progress); the response bytes of one upstream read
 *            gathered into one client write (w->ob, out_flush)
 *   TUNNEL   CONNECT, or an Upgrade after 101: the relay owns the bytes;
 *            w is freed (an idle tunnel holds only struct http_conn)
 *   LINGER   the last answer is queued, the write side shut down after it;
 *            reads are discarded until EOF or HTTP_LINGER_MS
 *   CLOSING  conn_close() ran: relay_close() issued, upstreams closing
 *
 * Memory is freed in two places only: an upstream connection (struct
 * http_up, own handle) in its close callback, the connection in the relay's
 * last close callback (on_relay_closed). Upstreams still closing then are
 * detached (u->c = NULL), so their late callbacks touch nothing else.
 * Writes to an upstream find the connection through u->c; writes to the
 * client or to b run before the relay's close callbacks complete, so their
 * c is always valid. Every callback that can arrive late checks CLOSING.
 */
#include "proxy/proxy.h"

#include "bridge/bridge.h"
#include "policy/policy.h"

#include <llhttp.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"

#define HTTP_IN_START 2048                   /* client input buffer at first (a head) */
#define HTTP_IN_MIN (16 * 1024)              /* ... grown up to this for bodies, at least */
#define HTTP_UIN_SIZE HTTP_RESPONSE_HEAD_MAX /* upstream input buffer */
#define HTTP_LINGER_MS 1000                  /* reading after a final answer before closing */
#define HTTP_RETRY_AFTER_S 1                 /* Retry-After on 503 */
#define HTTP_CRED_MAX 768                    /* decoded Basic credentials */
#define HTTP_OUT_BUFS 16                     /* pieces of response gathered for one write */
#define HTTP_OUT_HDRS 5                      /* chunk-size lines among them */

enum http_state {
    HTTP_ST_HEAD = 0,
    HTTP_ST_EGRESS,
    HTTP_ST_FORWARD,
    HTTP_ST_TUNNEL,
    HTTP_ST_LINGER,
    HTTP_ST_CLOSING,
};

enum http_timer {
    TIMER_NONE = 0,
    TIMER_HEAD,   /* HEAD: a request head must be complete by then */
    TIMER_IDLE,   /* HEAD: a kept connection with nothing to do */
    TIMER_STALL,  /* FORWARD: no progress either way for idle_timeout_ms */
    TIMER_FLUSH,  /* LINGER: the last answer is still being written; same rule */
    TIMER_LINGER, /* LINGER: our FIN is out; discarding reads */
};

struct http_conn;

/* An upstream connection for absolute-form requests, kept between requests
 * to the same canonical host:port. */
struct http_up {
    uv_tcp_t tcp;
    struct http_conn *c;  /* NULL once the connection is freed */
    struct http_up *next; /* in c->closing_ups while closing */
    char host[POLICY_HOST_MAX + 1];
    uint16_t port;
    struct policy_addr addr;
    unsigned closing : 1;
    unsigned idle : 1; /* between exchanges: reads are only watching for its close */
    unsigned reading : 1;
    unsigned parent : 1; /* connected to network.parentProxy for plain HTTP */
    char parent_auth[400]; /* that parent's Proxy-Authorization, or "" */
};

/* Request processing state; freed when the connection becomes a tunnel. */
struct http_work {
    llhttp_t reqp, resp;
    uv_shutdown_t shutdown_req;
    char *in; /* client bytes not yet consumed (a head, body, early or pipelined data) */
    size_t in_len, in_cap, in_max, scan; /* in_cap grows to in_max on demand */
    char *uin; /* upstream bytes not yet consumed (allocated during an exchange) */
    size_t uin_len, uscan;
    char *out; /* rewritten request head waiting for the upstream */
    size_t out_len;
    /* What goes to the client while one upstream read is processed (the
     * response head, body pieces pointing into uin, chunk framing), sent
     * with one write when the read is done (out_flush), or earlier when
     * something else is sent or the exchange ends. */
    uv_buf_t ob[HTTP_OUT_BUFS];
    unsigned nob, nhdr;
    char ohdr[HTTP_OUT_HDRS][20];
    char *ohead; /* the response head (owned) */
    struct http_up *up;
    enum http_timer timer;
    uint64_t last_io;
    enum http_body req_body;
    int send_err;
    unsigned creading : 1;   /* client reads started by us */
    unsigned processing : 1; /* inside process_client() */
    unsigned wait_drain : 1; /* answers pile up unread: waiting for the client to read */
    unsigned is_connect : 1;
    unsigned is_head : 1;
    unsigned upgrade : 1;       /* the request asks for an Upgrade */
    unsigned client_keep : 1;   /* the client wants to keep the connection */
    unsigned client_11 : 1;     /* the client speaks HTTP/1.1 */
    unsigned check_phase : 1;   /* parsers are fed a head only (callbacks only record) */
    unsigned head_msg_done : 1; /* the head check reached message complete */
    unsigned req_done : 1;      /* the whole request went upstream */
    unsigned resp_head_done : 1;
    unsigned resp_done : 1;
    unsigned resp_skip_body : 1;
    unsigned chunk_out : 1;   /* response body re-chunked for the client */
    unsigned close_after : 1; /* close the client after this response */
    unsigned up_keep : 1;     /* the upstream allows reuse after this response */
    unsigned up_junk : 1;     /* the upstream sent bytes after the response */
    unsigned up_eof : 1;
    unsigned up_werr : 1; /* writing upstream failed: the request body is dropped */
    unsigned reused : 1;  /* this exchange runs on a kept upstream connection */
    unsigned client_eof : 1;
    unsigned client_paused : 1; /* client reads stopped: upstream queue above high water */
    unsigned up_paused : 1;     /* upstream reads stopped: client queue above high water */
};

struct http_conn {
    struct relay relay;
    struct frontend_conn fc;
    struct frontend *f;
    struct http_work *w;
    struct http_up *closing_ups;
    struct egress_req *req;
    enum http_state state;
    uint64_t id;
    uint64_t bytes_up, bytes_down; /* forwarded outside the relay */
    unsigned overloaded : 1;
    unsigned have_host : 1;
    /* the last request, for the logs */
    const char *protocol;
    struct policy_host host;
    uint16_t port;
    int code;
    char verdict[12];
    char *rule, *source, *reason; /* NULL or heap copies */
    char method[16];     /* plain HTTP only, else "" */
    char *url;           /* plain HTTP only: without the query; NULL or a heap copy */
    char client[48];
    char addr[48];
    const char *end;
    char end_buf[80];
};

static void conn_close(struct http_conn *c, const char *end);
static void process_client(struct http_conn *c);
static void process_upstream(struct http_conn *c);
static void exchange_end(struct http_conn *c);
static void on_timer(uv_timer_t *t);

static _Thread_local char scratch[512]; /* discarded reads (linger, idle upstreams) */

/* ------------------------------------------------------------------------ */
/* Small helpers                                                             */

static void set_state(struct http_conn *c, enum http_state s)
{
    c->state = s;
}

static void set_text(char **dst, const char *s)
{
    free(*dst);
    *dst = NULL;
    if (s != NULL && s[0] != '\0') {
        size_t n = strlen(s);
        *dst = malloc(n + 1);
        if (*dst != NULL)
            memcpy(*dst, s, n + 1);
    }
}

static void set_reason(struct http_conn *c, const char *s)
{
    set_text(&c->reason, s);
}

static const char *host_port(const struct http_conn *c, char *buf, size_t len)
{
    if (!c->have_host)
        snprintf(buf, len, "-");
    else if (c->host.kind == POLICY_HOST_IPV6)
        snprintf(buf, len, "[%s]:%u", c->host.name, (unsigned)c->port);
    else
        snprintf(buf, len, "%s:%u", c->host.name, (unsigned)c->port);
    return buf;
}

static void emit(struct http_conn *c, enum connlog_event ev)
{
    struct connlog rec;
    uint64_t now = uv_now(c->f->loop);

    if (c->f->log == NULL)
        return;
    memset(&rec, 0, sizeof(rec));
    rec.event = ev;
    rec.id = c->id;
    rec.client = c->client;
    rec.protocol = c->protocol != NULL ? c->protocol : "http";
    rec.host = c->have_host ? c->host.name : NULL;
    rec.port = c->port;
    rec.verdict = c->verdict[0] != '\0' ? c->verdict : NULL;
    rec.rule = c->rule != NULL ? c->rule : "";
    rec.source = c->source;
    rec.reason = c->reason != NULL ? c->reason : "";
    rec.addr = c->addr;
    rec.code = c->code;
    rec.bytes_up = c->bytes_up + c->relay.a.nread;
    rec.bytes_down = c->bytes_down + c->relay.b.nread;
    rec.duration_ms = now >= c->relay.started_ms ? now - c->relay.started_ms : 0;
    rec.end = c->end != NULL ? c->end : "closed";
    rec.method = c->method[0] != '\0' ? c->method : NULL;
    rec.url = c->url;
    c->f->log(c->f->log_ctx, &rec);
}

static void timer_set(struct http_conn *c, enum http_timer kind, uint64_t ms)
{
    c->w->timer = kind;
    if (kind == TIMER_NONE || ms == 0)
        uv_timer_stop(&c->relay.timer);
    else
        uv_timer_start(&c->relay.timer, on_timer, ms, 0);
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

static void up_close(struct http_conn *c, struct http_up *u)
{
    if (u == NULL || u->closing)
        return;
    u->closing = 1;
    if (c->w != NULL && c->w->up == u)
        c->w->up = NULL;
    u->next = c->closing_ups;
    c->closing_ups = u;
    uv_close((uv_handle_t *)&u->tcp, on_up_closed);
}

static void work_free(struct http_conn *c)
{
    struct http_work *w = c->w;

    if (w == NULL)
        return;
    up_close(c, w->up);
    free(w->in);
    free(w->uin);
    free(w->out);
    free(w->ohead);
    free(w);
    c->w = NULL;
}

static void on_relay_closed(struct relay *r)
{
    struct http_conn *c = container_of(r, struct http_conn, relay);
    struct frontend *f = c->f;

    work_free(c); /* before the detach: it may close an upstream too */
    for (struct http_up *u = c->closing_ups; u != NULL; u = u->next)
        u->c = NULL; /* their close callbacks only free them now */
    if (r->end != RELAY_END_NONE && r->end != RELAY_END_OWNER)
        c->end = relay_end_text(r, c->end_buf, sizeof(c->end_buf));
    emit(c, CONNLOG_CLOSE);
    frontend_remove(f, &c->fc);
    free(c->rule);
    free(c->source);
    free(c->url);
    free(c->reason);
    free(c);
    if (f->conn_ended != NULL)
        f->conn_ended(f);
}

/* The one way a connection ends (idempotent). */
static void conn_close(struct http_conn *c, const char *end)
{
    if (c->state == HTTP_ST_CLOSING)
        return;
    if (c->end == NULL)
        c->end = end;
    set_state(c, HTTP_ST_CLOSING);
    egress_cancel(c->req);
    c->req = NULL;
    if (c->w != NULL)
        up_close(c, c->w->up);
    relay_close(&c->relay, 0);
}

static void conn_bytes(const struct frontend_conn *fc, uint64_t *up, uint64_t *down)
{
    const struct http_conn *c = container_of(fc, const struct http_conn, fc);

    *up += c->bytes_up + c->relay.a.nread;
    *down += c->bytes_down + c->relay.b.nread;
}

static void force_close(struct frontend_conn *fc)
{
    struct http_conn *c = container_of(fc, struct http_conn, fc);
    conn_close(c, "closed by shutdown");
}

/* ------------------------------------------------------------------------ */
/* Writing                                                                   */

struct http_wbuf {
    uv_write_t req;
    struct http_conn *c; /* client and b writes */
    struct http_up *up;  /* upstream writes: the connection is up->c */
    char data[];
};

/* Sends bufs in order: uv_try_write first, the rest copied and queued
 * (uv_try_write refuses while writes are queued, so order is kept). */
static int stream_send(struct http_conn *c, struct http_up *up, uv_stream_t *s,
                       const uv_buf_t *bufs, unsigned n, uv_write_cb cb)
{
    size_t total = 0, skip, off = 0;
    struct http_wbuf *wb;
    uv_buf_t b;
    int rc;

    for (unsigned i = 0; i < n; i++)
        total += bufs[i].len;
    if (total == 0)
        return 0;
    rc = uv_try_write(s, bufs, n);
    if (rc < 0 && rc != UV_EAGAIN)
        return rc;
    skip = rc > 0 ? (size_t)rc : 0;
    if (skip >= total)
        return 0;
    wb = malloc(sizeof(*wb) + total - skip);
    if (wb == NULL)
        return UV_ENOMEM;
    for (unsigned i = 0; i < n; i++) {
        size_t len = bufs[i].len;
        if (skip >= len) {
            skip -= len;
            continue;
        }
        memcpy(wb->data + off, bufs[i].base + skip, len - skip);
        off += len - skip;
        skip = 0;
    }
    wb->c = c;
    wb->up = up;
    b = uv_buf_init(wb->data, (unsigned)off);
    rc = uv_write(&wb->req, s, &b, 1, cb);
    if (rc < 0)
        free(wb);
    return rc;
}

static void up_read_start(struct http_conn *c, struct http_up *u);

/* The client's queue went down: resume what waits for it. */
static void client_drained(struct http_conn *c)
{
    struct http_work *w = c->w;

    if (w == NULL || uv_stream_get_write_queue_size(&c->relay.a.u.s) >= RELAY_LOW_WATER)
        return;
    if (c->state == HTTP_ST_FORWARD && w->up_paused && w->up != NULL) {
        w->up_paused = 0;
        up_read_start(c, w->up);
    } else if (c->state == HTTP_ST_HEAD && w->wait_drain) {
        w->wait_drain = 0;
        process_client(c);
    }
}

static void on_client_write(uv_write_t *req, int status)
{
    struct http_wbuf *wb = container_of(req, struct http_wbuf, req);
    struct http_conn *c = wb->c;

    free(wb);
    if (c->state == HTTP_ST_CLOSING || c->state == HTTP_ST_TUNNEL)
        return; /* in a tunnel the relay sees any error itself */
    if (status < 0) {
        conn_close(c, "client write failed");
        return;
    }
    if (c->w != NULL)
        c->w->last_io = uv_now(c->f->loop);
    client_drained(c);
}

static void client_read_start(struct http_conn *c);

static void on_up_write(uv_write_t *req, int status)
{
    struct http_wbuf *wb = container_of(req, struct http_wbuf, req);
    struct http_up *u = wb->up;
    struct http_conn *c = u->c;
    struct http_work *w;

    free(wb);
    if (c == NULL || u->closing || c->state == HTTP_ST_CLOSING)
        return;
    w = c->w;
    if (w == NULL || w->up != u)
        return;
    if (status < 0) {
        /* The upstream may have answered without reading the body (413,
         * 401, ...): stop sending, keep reading; its answer, its EOF or the
         * stall timer decides. */
        w->up_werr = 1;
        if (c->state != HTTP_ST_FORWARD)
            up_close(c, u);
        return;
    }
    w->last_io = uv_now(c->f->loop);
    if (c->state == HTTP_ST_FORWARD && w->client_paused &&
        uv_stream_get_write_queue_size((uv_stream_t *)&u->tcp) < RELAY_LOW_WATER) {
        w->client_paused = 0;
        client_read_start(c);
    }
}

static void on_b_write(uv_write_t *req, int status)
{
    struct http_wbuf *wb = container_of(req, struct http_wbuf, req);

    (void)status; /* a failure shows up in the relay as well */
    free(wb);
}

static void out_drop(struct http_work *w)
{
    free(w->ohead);
    w->ohead = NULL;
    w->nob = w->nhdr = 0;
}

/* Sends what was gathered for the client, in one write. 0 or UV_E*. */
static int out_flush(struct http_conn *c)
{
    struct http_work *w = c->w;
    int rc;

    if (w == NULL || w->nob == 0)
        return 0;
    if (c->state == HTTP_ST_CLOSING) {
        out_drop(w);
        return 0;
    }
    rc = stream_send(c, NULL, &c->relay.a.u.s, w->ob, w->nob, on_client_write);
    out_drop(w);
    return rc;
}

/* Makes room for nbufs more pieces (nhdr of them chunk-size lines). */
static int out_room(struct http_conn *c, unsigned nbufs, unsigned nhdr)
{
    struct http_work *w = c->w;

    if (w->nob + nbufs > HTTP_OUT_BUFS || w->nhdr + nhdr > HTTP_OUT_HDRS)
        return out_flush(c);
    return 0;
}

static void out_add(struct http_work *w, const char *base, size_t len)
{
    w->ob[w->nob++] = uv_buf_init((char *)(uintptr_t)base, (unsigned)len);
}

/* Anything gathered goes first, so the client sees bytes in order. */
static int client_send(struct http_conn *c, const uv_buf_t *bufs, unsigned n)
{
    int rc = out_flush(c);

    if (rc < 0)
        return rc;
    return stream_send(c, NULL, &c->relay.a.u.s, bufs, n, on_client_write);
}

static int up_send(struct http_conn *c, struct http_up *u, const uv_buf_t *bufs, unsigned n)
{
    return stream_send(c, u, (uv_stream_t *)&u->tcp, bufs, n, on_up_write);
}

/* Sends data as one chunk ("%zx\r\n" data "\r\n") or as is: upstream
 * (u) at once, to the client gathered for out_flush (data must stay valid
 * until then: it points into w->uin). */
static int send_body(struct http_conn *c, struct http_up *u, int chunked, const char *at,
                     size_t len)
{
    char hdr[24];
    uv_buf_t b[3];
    unsigned n = 0;
    int hl;

    if (u == NULL) {
        struct http_work *w = c->w;
        int rc = out_room(c, chunked ? 3u : 1u, chunked ? 1u : 0u);

        if (rc < 0)
            return rc;
        if (chunked) {
            char *h = w->ohdr[w->nhdr++];
            hl = snprintf(h, sizeof(w->ohdr[0]), "%zx\r\n", len);
            out_add(w, h, (size_t)hl);
        }
        out_add(w, at, len);
        if (chunked)
            out_add(w, "\r\n", 2);
        return 0;
    }
    if (chunked) {
        hl = snprintf(hdr, sizeof(hdr), "%zx\r\n", len);
        b[n++] = uv_buf_init(hdr, (unsigned)hl);
    }
    b[n++] = uv_buf_init((char *)(uintptr_t)at, (unsigned)len);
    if (chunked)
        b[n++] = uv_buf_init((char *)(uintptr_t) "\r\n", 2);
    return up_send(c, u, b, n);
}

static int send_last_chunk(struct http_conn *c, struct http_up *u)
{
    uv_buf_t b = uv_buf_init((char *)(uintptr_t) "0\r\n\r\n", 5);
    int rc;

    if (u != NULL)
        return up_send(c, u, &b, 1);
    rc = out_room(c, 1, 0);
    if (rc == 0)
        out_add(c->w, b.base, b.len);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Reading the client                                                        */

static void on_client_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_client_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

static void client_read_start(struct http_conn *c)
{
    struct http_work *w = c->w;
    int rc;

    if (w->creading || w->client_eof)
        return;
    rc = uv_read_start(&c->relay.a.u.s, on_client_alloc, on_client_read);
    if (rc < 0) {
        conn_close(c, "client read failed");
        return;
    }
    w->creading = 1;
}

static void client_read_stop(struct http_conn *c)
{
    if (c->w != NULL && c->w->creading) {
        uv_read_stop(&c->relay.a.u.s);
        c->w->creading = 0;
    }
}

/* Between a request head and the next one (EGRESS and FORWARD once the
 * request went up whole), client reads go on, so a kept-alive client that
 * waits for its answer costs no read stop and restart per request; bytes it
 * sends early (a pipelined request) are held in w->in and reading stops
 * until they are served. */
static void client_hold(struct http_conn *c)
{
    if (c->w != NULL && c->w->in_len > 0)
        client_read_stop(c);
}

static size_t in_capacity(const struct frontend *f)
{
    return f->max_head_bytes > HTTP_IN_MIN ? f->max_head_bytes : HTTP_IN_MIN;
}

static void consume_in(struct http_work *w, size_t n)
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
    *buf = uv_buf_init(scratch, sizeof(scratch));
}

static void on_linger_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct http_conn *c = container_of(s, struct http_conn, relay.a.u.s);

    (void)buf;
    if (nread < 0)
        conn_close(c, NULL);
}

static void on_final_shutdown(uv_shutdown_t *sr, int status)
{
    struct http_conn *c = sr->data;

    if (c->state == HTTP_ST_CLOSING)
        return;
    if (status < 0 || c->w->client_eof ||
        uv_read_start(&c->relay.a.u.s, on_linger_alloc, on_linger_read) < 0) {
        conn_close(c, NULL);
        return;
    }
    timer_set(c, TIMER_LINGER, HTTP_LINGER_MS);
}

/* The last answer is queued: once it is flushed, send our FIN, then read
 * and drop what the client still sends until its EOF or HTTP_LINGER_MS, so
 * unread bytes do not turn close() into a reset that destroys the answer
 * before the client reads it. */
static void close_gracefully(struct http_conn *c, const char *end)
{
    struct http_work *w = c->w;

    if (c->state == HTTP_ST_CLOSING || c->state == HTTP_ST_LINGER)
        return;
    if (out_flush(c) < 0) { /* the shutdown goes after everything queued */
        conn_close(c, "client write failed");
        return;
    }
    if (end != NULL)
        c->end = end;
    set_state(c, HTTP_ST_LINGER);
    egress_cancel(c->req);
    c->req = NULL;
    up_close(c, w->up);
    client_read_stop(c);
    w->last_io = uv_now(c->f->loop);
    timer_set(c, TIMER_FLUSH, c->f->idle_timeout_ms);
    w->shutdown_req.data = c;
    if (uv_shutdown(&w->shutdown_req, &c->relay.a.u.s, on_final_shutdown) < 0)
        conn_close(c, NULL);
}

/* ------------------------------------------------------------------------ */
/* Answers of our own                                                        */

/* After an answer that keeps the connection: the next request. */
static void next_request(struct http_conn *c)
{
    struct http_work *w = c->w;

    if (c->f->draining) { /* an answer that began before the drain */
        close_gracefully(c, "drained");
        return;
    }
    set_state(c, HTTP_ST_HEAD);
    w->scan = 0;
    w->upgrade = 0;
    w->is_connect = 0;
    if (w->in_len == 0) {
        free(w->in);
        w->in = NULL;
        timer_set(c, TIMER_IDLE, c->f->idle_timeout_ms);
    }
    if (!w->processing)
        process_client(c);
}

/* Sends an answer of ours; close: the connection ends after it. */
static void reply_bytes(struct http_conn *c, int status, const char *buf, size_t n, int close,
                        const char *end)
{
    uv_buf_t b = uv_buf_init((char *)(uintptr_t)buf, (unsigned)n);

    c->code = status;
    if (client_send(c, &b, 1) < 0) {
        conn_close(c, "client write failed");
        return;
    }
    if (close || c->w->client_eof)
        close_gracefully(c, end);
    else
        next_request(c);
}

static void reply(struct http_conn *c, const struct http_reply *r, const char *end)
{
    char buf[HTTP_REPLY_MAX];
    struct http_reply rr = *r;
    size_t n;

    if (c->f->draining)
        rr.close = 1;
    n = http_reply_build(&rr, buf, sizeof(buf));
    if (n == 0) {
        c->code = r->status;
        conn_close(c, end);
        return;
    }
    reply_bytes(c, r->status, buf, n, rr.close, end);
}

/* A refusal decided from the request itself. */
static void refuse(struct http_conn *c, int status, const char *why, int close, const char *end)
{
    struct http_reply r;
    char body[300];

    set_reason(c, why);
    memset(&r, 0, sizeof(r));
    r.status = status;
    r.error = "http_request_error";
    r.details = why;
    snprintf(body, sizeof(body), "sluice: %s", why);
    r.body = body;
    r.close = close != 0;
    r.allow = status == 405;
    reply(c, &r, end);
}

static void reply_overloaded(struct http_conn *c)
{
    struct http_reply r;

    set_reason(c, "too many connections");
    memset(&r, 0, sizeof(r));
    r.status = 503;
    r.error = "connection_limit_reached";
    r.details = "too many connections";
    r.body = "sluice: too many connections, retry later";
    r.retry_after = HTTP_RETRY_AFTER_S;
    r.close = 1;
    reply(c, &r, "over the connection limit");
}

/* The health path (proxy.h): "GET <f->health_path> HTTP/1.x" exactly. */
static int is_health_request(const struct http_conn *c, const char *h, size_t len)
{
    const char *p = c->f->health_path;
    size_t pl;

    if (p == NULL)
        return 0;
    pl = strlen(p);
    if (len < 4 + pl + 11 || memcmp(h, "GET ", 4) != 0 || memcmp(h + 4, p, pl) != 0)
        return 0;
    return memcmp(h + 4 + pl, " HTTP/1.1\r\n", 11) == 0 ||
           memcmp(h + 4 + pl, " HTTP/1.0\r\n", 11) == 0;
}

static void reply_health(struct http_conn *c, int keep)
{
    static const char ok[] = "HTTP/1.1 200 OK\r\n"
                             "Content-Type: text/plain; charset=us-ascii\r\n"
                             "Cache-Control: no-store\r\n"
                             "Content-Length: 3\r\n"
                             "Connection: keep-alive\r\n\r\nok\n";
    static const char ok_close[] = "HTTP/1.1 200 OK\r\n"
                                   "Content-Type: text/plain; charset=us-ascii\r\n"
                                   "Cache-Control: no-store\r\n"
                                   "Content-Length: 3\r\n"
                                   "Connection: close\r\n\r\nok\n";
    static const char draining[] = "HTTP/1.1 503 Service Unavailable\r\n"
                                   "Content-Type: text/plain; charset=us-ascii\r\n"
                                   "Cache-Control: no-store\r\n"
                                   "Content-Length: 9\r\n"
                                   "Connection: close\r\n\r\ndraining\n";

    set_reason(c, "health check");
    if (c->f->draining)
        reply_bytes(c, 503, draining, sizeof(draining) - 1, 1, "drained");
    else if (keep)
        reply_bytes(c, 200, ok, sizeof(ok) - 1, 0, "health check");
    else
        reply_bytes(c, 200, ok_close, sizeof(ok_close) - 1, 1, "health check");
}

/* A health request of end bytes at the start of w->in: its fields get the
 * same checks as any request's (the head is validated with an absolute-form
 * request line in place of its own), and it may not carry a body. */
static void health_check(struct http_conn *c, size_t end)
{
    static const char line11[] = "GET http://health.invalid/ HTTP/1.1\r\n";
    static _Thread_local struct http_request rq;
    struct http_work *w = c->w;
    const char *eol = memchr(w->in, '\n', end), *why = NULL;
    size_t rest, n;
    char *h;
    int st;

    rest = end - (size_t)(eol + 1 - w->in);
    n = sizeof(line11) - 1 + rest;
    h = malloc(n);
    if (h == NULL) {
        conn_close(c, "out of memory");
        return;
    }
    memcpy(h, line11, sizeof(line11) - 1);
    h[sizeof(line11) - 4] = eol[-2]; /* the request's minor version */
    memcpy(h + sizeof(line11) - 1, eol + 1, rest);
    st = http_request_parse(h, n, &rq, &why);
    free(h);
    if (st == 0 && rq.body != HTTP_BODY_NONE) {
        st = 400;
        why = "a health check request has no body";
    }
    if (st != 0) {
        refuse(c, st, why, 1, "bad request");
        return;
    }
    consume_in(w, end);
    reply_health(c, rq.keep_alive);
}

/* ------------------------------------------------------------------------ */
/* Timers                                                                    */

static void on_timer(uv_timer_t *t)
{
    struct http_conn *c = container_of(t, struct http_conn, relay.timer);
    struct http_work *w = c->w;
    char why[120];

    if (c->state == HTTP_ST_CLOSING || w == NULL)
        return;
    switch (c->state) {
    case HTTP_ST_HEAD:
        if (w->timer == TIMER_IDLE) {
            conn_close(c, "idle timeout");
            return;
        }
        snprintf(why, sizeof(why), "no complete request head within %u ms", c->f->head_timeout_ms);
        if (w->in_len == 0) {
            set_reason(c, why);
            conn_close(c, "head timeout");
            return;
        }
        {
            struct http_reply r;
            memset(&r, 0, sizeof(r));
            set_reason(c, why);
            r.status = 408;
            r.error = "http_request_error";
            r.details = why;
            r.close = 1;
            reply(c, &r, "head timeout");
        }
        return;
    case HTTP_ST_FORWARD: {
        uint64_t now = uv_now(c->f->loop), due = w->last_io + c->f->idle_timeout_ms;
        if (now < due) {
            timer_set(c, TIMER_STALL, due - now);
            return;
        }
        snprintf(why, sizeof(why), "no progress for %u ms", c->f->idle_timeout_ms);
        set_reason(c, why);
        if (!w->resp_head_done) {
            struct http_reply r;
            memset(&r, 0, sizeof(r));
            r.status = 504;
            r.error = "http_response_timeout";
            r.details = "the upstream did not answer in time";
            r.close = 1;
            reply(c, &r, "upstream timeout");
        } else {
            conn_close(c, "upstream stalled");
        }
        return;
    }
    case HTTP_ST_LINGER:
        if (w->timer == TIMER_FLUSH) {
            uint64_t now = uv_now(c->f->loop), due = w->last_io + c->f->idle_timeout_ms;
            if (now < due) {
                timer_set(c, TIMER_FLUSH, due - now);
                return;
            }
            conn_close(c, "client does not read");
            return;
        }
        conn_close(c, NULL);
        return;
    default:
        return;
    }
}

/* ------------------------------------------------------------------------ */
/* llhttp callbacks                                                          */

static int req_on_body(llhttp_t *p, const char *at, size_t len)
{
    struct http_conn *c = p->data;
    struct http_work *w = c->w;
    int rc;

    if (w->check_phase || w->send_err != 0 || w->up_werr || w->up == NULL)
        return 0;
    rc = send_body(c, w->up, w->req_body == HTTP_BODY_CHUNKED, at, len);
    if (rc < 0)
        w->send_err = rc;
    c->bytes_up += len;
    return 0;
}

static int req_on_message_complete(llhttp_t *p)
{
    struct http_conn *c = p->data;
    struct http_work *w = c->w;

    if (w->check_phase) {
        w->head_msg_done = 1;
        return HPE_PAUSED;
    }
    if (w->req_body == HTTP_BODY_CHUNKED && w->up != NULL && w->send_err == 0 && !w->up_werr) {
        int rc = send_last_chunk(c, w->up);
        if (rc < 0)
            w->send_err = rc;
    }
    w->req_done = 1;
    return HPE_PAUSED;
}

/* 1 = no body: an answer to HEAD, and 1xx, 204, 304 whatever their
 * Content-Length says (llhttp 8 reads a body for those otherwise). */
static int resp_on_headers_complete(llhttp_t *p)
{
    struct http_conn *c = p->data;
    int st = p->status_code;

    return (c->w->resp_skip_body || st < 200 || st == 204 || st == 304) ? 1 : 0;
}

static int resp_on_body(llhttp_t *p, const char *at, size_t len)
{
    struct http_conn *c = p->data;
    struct http_work *w = c->w;
    int rc;

    if (w->check_phase || w->send_err != 0)
        return 0;
    rc = send_body(c, NULL, w->chunk_out, at, len);
    if (rc < 0)
        w->send_err = rc;
    c->bytes_down += len;
    return 0;
}

static int resp_on_message_complete(llhttp_t *p)
{
    struct http_conn *c = p->data;
    struct http_work *w = c->w;

    if (w->check_phase) {
        w->head_msg_done = 1;
        return HPE_PAUSED;
    }
    if (w->chunk_out && w->send_err == 0) {
        int rc = send_last_chunk(c, NULL);
        if (rc < 0)
            w->send_err = rc;
    }
    w->resp_done = 1;
    return HPE_PAUSED;
}

static const llhttp_settings_t req_settings = {
    .on_body = req_on_body,
    .on_message_complete = req_on_message_complete,
};

static const llhttp_settings_t resp_settings = {
    .on_headers_complete = resp_on_headers_complete,
    .on_body = resp_on_body,
    .on_message_complete = resp_on_message_complete,
};

/* Feeds exactly one head to a fresh parser and checks that llhttp saw the
 * same head with the same framing as head.c. 0, or -1 on a disagreement. */
static int llhttp_check_head(struct http_conn *c, llhttp_t *p, const llhttp_settings_t *st,
                             llhttp_type_t type, const char *head, size_t len, enum http_body body,
                             uint64_t cl)
{
    struct http_work *w = c->w;
    llhttp_errno_t e;
    int ok;

    llhttp_init(p, type, st);
    p->data = c;
    w->check_phase = 1;
    w->head_msg_done = 0;
    e = llhttp_execute(p, head, len);
    w->check_phase = 0;
    switch (body) {
    case HTTP_BODY_NONE:
        ok = e == HPE_PAUSED && w->head_msg_done && llhttp_get_error_pos(p) == head + len;
        break;
    case HTTP_BODY_LENGTH:
        ok = e == HPE_OK && !w->head_msg_done && (p->flags & F_CONTENT_LENGTH) &&
             !(p->flags & F_CHUNKED) && p->content_length == cl;
        break;
    case HTTP_BODY_CHUNKED:
        ok = e == HPE_OK && !w->head_msg_done && (p->flags & F_CHUNKED);
        break;
    case HTTP_BODY_EOF:
    default:
        ok = e == HPE_OK && !w->head_msg_done && llhttp_message_needs_eof(p);
        break;
    }
    return ok ? 0 : -1;
}

/* ------------------------------------------------------------------------ */
/* Upstream connections                                                      */

static void on_up_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct http_up *u = container_of(h, struct http_up, tcp);
    struct http_conn *c = u->c;
    struct http_work *w = c != NULL ? c->w : NULL;

    (void)suggested;
    if (u->idle || w == NULL || w->up != u) {
        *buf = uv_buf_init(scratch, sizeof(scratch));
        return;
    }
    if (w->uin == NULL) {
        w->uin = malloc(HTTP_UIN_SIZE);
        w->uin_len = 0;
        w->uscan = 0;
        if (w->uin == NULL) {
            *buf = uv_buf_init(NULL, 0); /* UV_ENOBUFS */
            return;
        }
    }
    *buf = uv_buf_init(w->uin + w->uin_len, (unsigned)(HTTP_UIN_SIZE - w->uin_len));
}

static void upstream_gone(struct http_conn *c, int status);
static void start_egress(struct http_conn *c);

static void on_up_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct http_up *u = container_of(s, struct http_up, tcp);
    struct http_conn *c = u->c;
    struct http_work *w;

    (void)buf;
    if (c == NULL || u->closing || c->state == HTTP_ST_CLOSING || nread == 0)
        return;
    w = c->w;
    if (u->idle || w == NULL || w->up != u || c->state != HTTP_ST_FORWARD) {
        /* an idle upstream closed, failed or sent bytes nobody asked for */
        up_close(c, u);
        return;
    }
    if (nread < 0) {
        upstream_gone(c, (int)nread);
        return;
    }
    w->uin_len += (size_t)nread;
    w->last_io = uv_now(c->f->loop);
    process_upstream(c);
}

static void up_read_start(struct http_conn *c, struct http_up *u)
{
    int rc;

    if (u->reading)
        return;
    rc = uv_read_start((uv_stream_t *)&u->tcp, on_up_alloc, on_up_read);
    if (rc < 0) {
        upstream_gone(c, rc);
        return;
    }
    u->reading = 1;
}

static void up_read_stop(struct http_up *u)
{
    if (u->reading) {
        uv_read_stop((uv_stream_t *)&u->tcp);
        u->reading = 0;
    }
}

/* Adopts a dialed socket as the connection's upstream. 0 or UV_E*. */
static int up_adopt(struct http_conn *c, int fd, const struct egress_outcome *o)
{
    const struct policy_addr *a = &o->addr;
    struct http_up *u = calloc(1, sizeof(*u));
    int rc;

    if (u == NULL) {
        close(fd);
        return UV_ENOMEM;
    }
    if (uv_tcp_init(c->f->loop, &u->tcp) != 0) {
        free(u);
        close(fd);
        return UV_EIO;
    }
    u->c = c;
    snprintf(u->host, sizeof(u->host), "%s", c->host.name);
    u->port = c->port;
    u->addr = *a;
    if (o->parent_http) {
        u->parent = 1;
        snprintf(u->parent_auth, sizeof(u->parent_auth), "%s", o->parent_auth);
    }
    rc = uv_tcp_open(&u->tcp, fd);
    if (rc < 0) {
        close(fd);
        up_close(c, u);
        return rc;
    }
    (void)uv_tcp_nodelay(&u->tcp, 1);
    c->w->up = u;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Tunnels: CONNECT, and Upgrade after 101                                   */

static void tunnel_go(struct http_conn *c)
{
    struct http_work *w = c->w;
    int rc;

    if (w->in_len > 0) { /* early bytes, held until now */
        uv_buf_t b = uv_buf_init(w->in, (unsigned)w->in_len);
        rc = stream_send(c, NULL, &c->relay.b.u.s, &b, 1, on_b_write);
        if (rc < 0) {
            conn_close(c, "upstream write failed");
            return;
        }
        c->bytes_up += w->in_len;
    }
    timer_set(c, TIMER_NONE, 0);
    /* client reads stay on: relay_start() takes a reading stream over */
    work_free(c);
    set_state(c, HTTP_ST_TUNNEL);
    rc = relay_start(&c->relay, c->f->idle_timeout_ms);
    if (rc < 0)
        conn_close(c, "relay failed to start");
}

static void reply_error(struct http_conn *c, int status, const char *error, const char *details,
                        int close, const char *end);

static void tunnel_start(struct http_conn *c, int fd)
{
    static const char ok[] = "HTTP/1.1 200 Connection Established\r\n\r\n";
    uv_buf_t b = uv_buf_init((char *)(uintptr_t)ok, sizeof(ok) - 1);
    char why[160];
    int rc;

    rc = relay_open_b(&c->relay, fd);
    if (rc < 0) {
        snprintf(why, sizeof(why), "cannot adopt the upstream socket: %s", uv_strerror(rc));
        set_reason(c, why);
        reply_error(c, 502, "proxy_internal_error", why, 1, "internal error");
        return;
    }
    c->code = 200;
    if (client_send(c, &b, 1) < 0) {
        conn_close(c, "client write failed");
        return;
    }
    tunnel_go(c);
}

/* A 101 to an upgrade request: the upstream socket moves to the relay (a
 * duplicate of its descriptor; the old handle closes), the 101 and the
 * bytes after it go to the client, the client's bytes after its request go
 * upstream, and the relay takes over. */
static void upgrade_start(struct http_conn *c, const struct http_response *rs, size_t end)
{
    struct http_work *w = c->w;
    struct http_up *u = w->up;
    uv_os_fd_t fd;
    char *head = NULL;
    size_t n;
    int nfd, rc;
    uv_buf_t b[2];

    if (uv_fileno((uv_handle_t *)&u->tcp, &fd) != 0 || (nfd = fcntl(fd, F_DUPFD_CLOEXEC, 3)) < 0) {
        set_reason(c, "cannot take over the upstream socket");
        reply_error(c, 502, "proxy_internal_error", "cannot take over the upstream socket", 1,
                    "internal error");
        return;
    }
    up_close(c, u); /* closes fd; the socket lives on in nfd */
    rc = relay_open_b(&c->relay, nfd);
    if (rc < 0) {
        set_reason(c, "cannot adopt the upstream socket");
        reply_error(c, 502, "proxy_internal_error", "cannot adopt the upstream socket", 1,
                    "internal error");
        return;
    }
    n = http_response_build(w->uin, rs, HTTP_OUT_UPGRADE, NULL, 0);
    head = malloc(n);
    if (head == NULL) {
        conn_close(c, "out of memory");
        return;
    }
    (void)http_response_build(w->uin, rs, HTTP_OUT_UPGRADE, head, n);
    b[0] = uv_buf_init(head, (unsigned)n);
    b[1] = uv_buf_init(w->uin + end, (unsigned)(w->uin_len - end));
    c->code = 101;
    c->bytes_down += n + (w->uin_len - end);
    rc = client_send(c, b, 2);
    free(head);
    if (rc < 0) {
        conn_close(c, "client write failed");
        return;
    }
    tunnel_go(c);
}

/* ------------------------------------------------------------------------ */
/* The exchange: one absolute-form request and its response                  */

static void feed_request_body(struct http_conn *c)
{
    struct http_work *w = c->w;
    llhttp_errno_t e;
    size_t used;

    if (w->req_done || w->in_len == 0)
        return;
    e = llhttp_execute(&w->reqp, w->in, w->in_len);
    if (e == HPE_OK) {
        used = w->in_len;
    } else if (e == HPE_PAUSED && w->req_done) {
        used = (size_t)(llhttp_get_error_pos(&w->reqp) - w->in);
    } else {
        set_reason(c, "malformed request body");
        if (!w->resp_head_done) {
            refuse(c, 400, "malformed request body (chunk framing)", 1, "bad request body");
        } else {
            conn_close(c, "bad request body");
        }
        return;
    }
    consume_in(w, used);
    if (w->send_err != 0) { /* as in on_up_write: drop the rest, wait for the upstream */
        w->send_err = 0;
        w->up_werr = 1;
    }
    if (w->req_done) {
        client_hold(c);
        return;
    }
    if (w->up != NULL &&
        uv_stream_get_write_queue_size((uv_stream_t *)&w->up->tcp) > RELAY_HIGH_WATER) {
        client_read_stop(c);
        w->client_paused = 1;
    }
}

/* The head w->out (origin form) as a parent proxy takes it: the request
 * line in absolute form ("GET http://authority/path HTTP/1.1"; "*" of
 * OPTIONS becomes the bare authority) and the parent's own
 * Proxy-Authorization after it (the client's never reaches anyone). The
 * pieces point into w->out, authority and auth; returns how many. */
static unsigned parent_form(const struct http_work *w, const struct http_up *u, char *authority,
                            size_t alen, char *auth, size_t authlen, uv_buf_t b[5])
{
    const char *h = w->out, *end = w->out + w->out_len;
    const char *sp1 = memchr(h, ' ', w->out_len), *sp2, *eol, *host, *hend;
    unsigned n = 0;

    if (sp1 == NULL || (sp2 = memchr(sp1 + 1, ' ', (size_t)(end - sp1 - 1))) == NULL ||
        (eol = memchr(sp2, '\n', (size_t)(end - sp2))) == NULL ||
        end - eol < 8 || memcmp(eol + 1, "Host: ", 6) != 0 ||
        (hend = memchr(eol + 7, '\r', (size_t)(end - eol - 7))) == NULL)
        return 0; /* http_request_build writes the Host line second */
    host = eol + 7;
    snprintf(authority, alen, "http://%.*s", (int)(hend - host), host);
    b[n++] = uv_buf_init(w->out, (unsigned)(sp1 + 1 - h));
    b[n++] = uv_buf_init(authority, (unsigned)strlen(authority));
    if (sp2 - sp1 - 1 == 1 && sp1[1] == '*')
        b[n++] = uv_buf_init((char *)(uintptr_t)sp2, (unsigned)(eol + 1 - sp2));
    else
        b[n++] = uv_buf_init((char *)(uintptr_t)(sp1 + 1), (unsigned)(eol + 1 - sp1 - 1));
    if (u->parent_auth[0] != '\0') {
        snprintf(auth, authlen, "Proxy-Authorization: %s\r\n", u->parent_auth);
        b[n++] = uv_buf_init(auth, (unsigned)strlen(auth));
    }
    b[n++] = uv_buf_init((char *)(uintptr_t)(eol + 1), (unsigned)(end - eol - 1));
    return n;
}

static void start_exchange(struct http_conn *c)
{
    struct http_work *w = c->w;
    struct http_up *u = w->up;
    uv_buf_t b[5] = {uv_buf_init(w->out, (unsigned)w->out_len)};
    char authority[POLICY_HOST_MAX + 32], auth[448];
    unsigned nb = 1;
    size_t sent = w->out_len;
    int rc;

    set_state(c, HTTP_ST_FORWARD);
    u->idle = 0;
    w->req_done = w->req_body == HTTP_BODY_NONE;
    w->resp_head_done = w->resp_done = 0;
    w->chunk_out = w->close_after = w->up_keep = w->up_junk = w->up_eof = w->up_werr = 0;
    w->client_paused = w->up_paused = 0;
    w->send_err = 0;
    w->uin_len = 0;
    w->uscan = 0;
    if (u->parent) {
        nb = parent_form(w, u, authority, sizeof(authority), auth, sizeof(auth), b);
        if (nb == 0) {
            upstream_gone(c, UV_EINVAL);
            return;
        }
        sent = 0;
        for (unsigned i = 0; i < nb; i++)
            sent += b[i].len;
    }
    rc = up_send(c, u, b, nb);
    c->bytes_up += sent;
    if (!w->reused || w->req_body != HTTP_BODY_NONE) {
        /* kept only for a retry on a fresh connection (upstream_gone) */
        free(w->out);
        w->out = NULL;
        w->out_len = 0;
    }
    if (rc < 0) {
        upstream_gone(c, rc);
        return;
    }
    w->last_io = uv_now(c->f->loop);
    timer_set(c, TIMER_STALL, c->f->idle_timeout_ms);
    up_read_start(c, u);
    if (c->state != HTTP_ST_FORWARD)
        return;
    if (!w->req_done) {
        feed_request_body(c);
        if (c->state == HTTP_ST_FORWARD && !w->req_done && w->client_eof) {
            conn_close(c, "client closed mid-request"); /* EOF seen while dialing */
            return;
        }
        if (c->state == HTTP_ST_FORWARD && !w->req_done && !w->client_paused)
            client_read_start(c);
    }
}

/* The upstream failed before the response was complete. */
static void upstream_gone(struct http_conn *c, int status)
{
    struct http_work *w = c->w;
    char why[160];

    if (c->state != HTTP_ST_FORWARD) {
        up_close(c, w != NULL ? w->up : NULL);
        return;
    }
    w->up_eof = 1;
    if (!w->resp_head_done && w->uin_len == 0 && w->reused && w->out != NULL) {
        /* A kept connection the upstream closed as we reused it: the
         * request (no body) is sent again once, on a new connection. */
        w->reused = 0;
        up_close(c, w->up);
        start_egress(c);
        return;
    }
    if (!w->resp_head_done) {
        if (status == UV_EOF)
            snprintf(why, sizeof(why), "the upstream closed the connection %s",
                     w->uin_len > 0 ? "in the middle of the response head" : "without a response");
        else
            snprintf(why, sizeof(why), "the upstream connection failed: %s", uv_err_name(status));
        set_reason(c, why);
        reply_error(c, 502, status == UV_EOF ? "http_response_incomplete" : "connection_terminated",
                    why, 1, "upstream failed");
        return;
    }
    if (status == UV_EOF && !w->resp_done) {
        /* a close-delimited body ends here; any other is cut short */
        w->send_err = 0;
        (void)llhttp_finish(&w->resp);
        if (w->resp_done && w->send_err == 0) {
            exchange_end(c);
            return;
        }
    }
    snprintf(why, sizeof(why), "the upstream connection ended mid-response: %s",
             uv_err_name(status));
    set_reason(c, why);
    conn_close(c, "upstream failed mid-response");
}

/* A response head that cannot be forwarded: 502 while nothing final went to
 * the client, else the client connection is cut. */
static void upstream_bad(struct http_conn *c, const char *why)
{
    set_reason(c, why);
    if (!c->w->resp_head_done)
        reply_error(c, 502, "http_protocol_error", why, 1, "bad upstream response");
    else
        conn_close(c, "bad upstream response");
}

/* One response head at the start of w->uin (end bytes). 0 to go on, -1 when
 * the state changed. */
static int response_head(struct http_conn *c, size_t end)
{
    struct http_work *w = c->w;
    static _Thread_local struct http_response rs;
    const char *why = NULL;
    unsigned flags = 0;
    char *head;
    size_t n;
    uv_buf_t b;
    int rc;

    if (http_response_parse(w->uin, end, w->is_head, &rs, &why) != 0) {
        upstream_bad(c, why);
        return -1;
    }
    if (rs.status == 407 && w->up != NULL && w->up->parent) {
        /* the parent's challenge is not the client's to answer: passed on,
         * it would ask the client for credentials sluice never forwards */
        upstream_bad(c, "the parent proxy answered 407 Proxy Authentication Required (check "
                        "the credentials in its URL)");
        return -1;
    }
    {
        const struct policy_http_opts *ho = policy_http_opts(egress_env_policy(c->f->egress));
        if (ho->nstrip > 0) /* network.stripResponseHeaders */
            reqopt_strip(w->uin, &rs, ho->strip, ho->nstrip);
    }
    w->resp_skip_body = w->is_head;
    if (llhttp_check_head(c, &w->resp, &resp_settings, HTTP_RESPONSE, w->uin, end, rs.body,
                          rs.content_length) < 0) {
        upstream_bad(c, "ambiguous response head from the upstream");
        return -1;
    }
    if (rs.status < 200) {
        if (rs.status == 101) {
            if (!w->upgrade || !rs.upgrade) {
                upstream_bad(c, "101 from the upstream without an upgrade");
                return -1;
            }
            upgrade_start(c, &rs, end);
            return -1;
        }
        if (w->client_11) {
            n = http_response_build(w->uin, &rs, 0, NULL, 0);
            head = malloc(n);
            if (head == NULL) {
                conn_close(c, "out of memory");
                return -1;
            }
            (void)http_response_build(w->uin, &rs, 0, head, n);
            b = uv_buf_init(head, (unsigned)n);
            rc = client_send(c, &b, 1);
            free(head);
            if (rc < 0) {
                conn_close(c, "client write failed");
                return -1;
            }
            c->bytes_down += n;
        }
        memmove(w->uin, w->uin + end, w->uin_len - end);
        w->uin_len -= end;
        w->uscan = 0;
        return 0;
    }

    if (rs.body == HTTP_BODY_CHUNKED || rs.body == HTTP_BODY_EOF) {
        if (w->client_11) {
            w->chunk_out = 1;
            flags |= HTTP_OUT_CHUNKED;
        } else {
            w->close_after = 1; /* raw until close for an HTTP/1.0 client */
        }
    }
    if (!w->client_keep || w->client_eof || !w->req_done || w->upgrade || c->f->draining)
        w->close_after = 1;
    if (w->close_after)
        flags |= HTTP_OUT_CLOSE;
    w->up_keep = rs.keep_alive;
    n = http_response_build(w->uin, &rs, flags, NULL, 0);
    head = malloc(n);
    if (head == NULL) {
        conn_close(c, "out of memory");
        return -1;
    }
    (void)http_response_build(w->uin, &rs, flags, head, n);
    /* gathered: the head goes out with the first body bytes, in one write */
    rc = out_flush(c);
    if (rc < 0) {
        free(head);
        conn_close(c, "client write failed");
        return -1;
    }
    w->ohead = head;
    out_add(w, head, n);
    c->code = rs.status;
    c->bytes_down += n;
    w->resp_head_done = 1;
    if (rs.body == HTTP_BODY_NONE)
        w->resp_done = 1;
    memmove(w->uin, w->uin + end, w->uin_len - end);
    w->uin_len -= end;
    w->uscan = 0;
    return 0;
}

static void process_upstream(struct http_conn *c)
{
    struct http_work *w = c->w;

    if (w->out != NULL && w->uin_len > 0) { /* answered: no retry any more */
        free(w->out);
        w->out = NULL;
        w->out_len = 0;
    }
    while (c->state == HTTP_ST_FORWARD && !w->resp_done) {
        const char *why = NULL;
        size_t end = 0;
        llhttp_errno_t e;

        if (!w->resp_head_done) {
            enum http_find f = http_head_end(w->uin, w->uin_len, &w->uscan, &end, &why);
            if (f == HTTP_FIND_MORE) {
                if (w->uin_len >= HTTP_UIN_SIZE)
                    upstream_bad(c, "response head from the upstream too large");
                break;
            }
            if (f == HTTP_FIND_BAD) {
                upstream_bad(c, why);
                return;
            }
            if (response_head(c, end) < 0)
                return;
            continue;
        }
        if (w->uin_len == 0)
            break;
        e = llhttp_execute(&w->resp, w->uin, w->uin_len);
        if (w->send_err != 0) {
            conn_close(c, "client write failed");
            return;
        }
        if (e == HPE_PAUSED && w->resp_done) {
            if ((size_t)(llhttp_get_error_pos(&w->resp) - w->uin) < w->uin_len)
                w->up_junk = 1; /* bytes after the response: never reuse */
        } else if (e != HPE_OK) {
            set_reason(c, "malformed response body from the upstream");
            conn_close(c, "bad upstream response body");
            return;
        }
        w->uin_len = 0;
    }
    if (c->state != HTTP_ST_FORWARD)
        return;
    /* what this read produced for the client, in one write, before w->uin
     * is reused or freed */
    if (out_flush(c) < 0) {
        conn_close(c, "client write failed");
        return;
    }
    if (w->resp_done) {
        exchange_end(c);
        return;
    }
    if (w->up != NULL && uv_stream_get_write_queue_size(&c->relay.a.u.s) > RELAY_HIGH_WATER) {
        up_read_stop(w->up);
        w->up_paused = 1;
    }
}

static void exchange_end(struct http_conn *c)
{
    struct http_work *w = c->w;
    struct http_up *u = w->up;

    if (out_flush(c) < 0) { /* body pieces point into w->uin, freed below */
        conn_close(c, "client write failed");
        return;
    }
    timer_set(c, TIMER_NONE, 0);
    free(w->uin);
    w->uin = NULL;
    w->uin_len = 0;
    free(w->out);
    w->out = NULL;
    w->out_len = 0;
    if (u != NULL && w->up_keep && !w->up_junk && !w->up_eof && !w->close_after && w->req_done) {
        u->idle = 1; /* still read: its close or stray bytes retire it */
        up_read_start(c, u);
    } else {
        up_close(c, u);
    }
    if (w->close_after || w->client_eof) {
        close_gracefully(c, w->client_eof ? "client closed" : "done");
        return;
    }
    next_request(c);
}

/* ------------------------------------------------------------------------ */
/* Egress                                                                    */

static void reply_error(struct http_conn *c, int status, const char *error, const char *details,
                        int close, const char *end)
{
    struct http_reply r;
    char body[800], hp[300];

    memset(&r, 0, sizeof(r));
    r.status = status;
    r.error = error;
    r.details = details;
    snprintf(body, sizeof(body), "sluice: %s: %s", host_port(c, hp, sizeof(hp)),
             details != NULL ? details : http_status_phrase(status));
    r.body = body;
    r.close = close != 0;
    reply(c, &r, end);
}

/* An egress failure as an answer (design.md "Wire behaviour"). */
static void egress_failed(struct http_conn *c, const struct egress_outcome *o)
{
    struct http_work *w = c->w;
    struct http_reply r;
    char body[800], hp[300];
    const char *reason = o->reason[0] != '\0' ? o->reason : egress_result_str(o->result);

    memset(&r, 0, sizeof(r));
    r.details = reason;
    r.close = w->is_connect || !w->client_keep || w->req_body != HTTP_BODY_NONE;
    host_port(c, hp, sizeof(hp));
    switch (o->result) {
    case EGRESS_DENIED:
        r.status = 403;
        r.phrase = reason;
        r.error = o->stage == EGRESS_BY_GUARD ? "destination_ip_prohibited" : "http_request_denied";
        r.blocked = 1;
        snprintf(body, sizeof(body), "sluice: %s blocked: %s", hp, reason);
        break;
    case EGRESS_DNS_FAILED:
        r.status = 502;
        r.error = "dns_error";
        r.rcode = o->status == UV_EAI_NONAME ? "NXDOMAIN" : NULL;
        snprintf(body, sizeof(body), "sluice: %s: %s", hp, reason);
        break;
    case EGRESS_DNS_TIMEOUT:
        r.status = 504;
        r.error = "dns_timeout";
        snprintf(body, sizeof(body), "sluice: %s: %s", hp, reason);
        break;
    case EGRESS_REFUSED:
        r.status = 502;
        r.error = "connection_refused";
        snprintf(body, sizeof(body), "sluice: %s: %s", hp, reason);
        break;
    case EGRESS_UNREACHABLE:
        r.status = 502;
        r.error = "destination_unavailable";
        snprintf(body, sizeof(body), "sluice: %s: %s", hp, reason);
        break;
    case EGRESS_DIAL_TIMEOUT:
        r.status = 504;
        r.error = "connection_timeout";
        snprintf(body, sizeof(body), "sluice: %s: %s", hp, reason);
        break;
    case EGRESS_CONNECTED:
    case EGRESS_ERROR:
    default:
        r.status = 502;
        r.error = "proxy_internal_error";
        snprintf(body, sizeof(body), "sluice: %s: %s", hp, reason);
        break;
    }
    r.body = body;
    snprintf(c->end_buf, sizeof(c->end_buf), "%s", egress_result_str(o->result));
    reply(c, &r, c->end_buf);
}

static int egress_code(const struct egress_outcome *o, int is_connect)
{
    switch (o->result) {
    case EGRESS_CONNECTED:
        return is_connect ? 200 : -1; /* the upstream's status comes later */
    case EGRESS_DENIED:
        return 403;
    case EGRESS_DNS_TIMEOUT:
    case EGRESS_DIAL_TIMEOUT:
        return 504;
    case EGRESS_DNS_FAILED:
    case EGRESS_REFUSED:
    case EGRESS_UNREACHABLE:
    case EGRESS_ERROR:
    default:
        return 502;
    }
}

static void on_egress(void *arg, const struct egress_outcome *o)
{
    struct http_conn *c = arg;
    struct http_work *w = c->w;
    int rc;

    c->req = NULL;
    snprintf(c->verdict, sizeof(c->verdict), "%s", o->verdict);
    set_text(&c->rule, o->rule);
    set_text(&c->source, o->source[0] != '\0' ? o->source : NULL);
    set_reason(c, o->reason);
    c->addr[0] = '\0';
    if (o->have_addr)
        policy_addr_str(&o->addr, c->addr, sizeof(c->addr));
    c->code = egress_code(o, w->is_connect);
    emit(c, CONNLOG_DECISION);
    if (o->result != EGRESS_CONNECTED) {
        egress_failed(c, o);
        return;
    }
    if (w->is_connect) {
        tunnel_start(c, o->fd);
        return;
    }
    rc = up_adopt(c, o->fd, o);
    if (rc < 0) {
        char why[160];
        snprintf(why, sizeof(why), "cannot adopt the upstream socket: %s", uv_strerror(rc));
        set_reason(c, why);
        reply_error(c, 502, "proxy_internal_error", why, 1, "internal error");
        return;
    }
    start_exchange(c);
}

static void start_egress(struct http_conn *c)
{
    int rc;

    set_state(c, HTTP_ST_EGRESS);
    timer_set(c, TIMER_NONE, 0); /* egress has its own deadlines (ask, DNS, dial) */
    rc = egress_start(c->f->egress, &c->host, c->port, c->protocol, c->client, on_egress, c,
                      &c->req);
    if (rc < 0) {
        c->req = NULL;
        set_reason(c, uv_strerror(rc));
        reply_error(c, 502, "proxy_internal_error", uv_strerror(rc), 1, "internal error");
    }
}

/* The kept upstream serves this request when it goes to the same canonical
 * host:port and the policy as it is now allows it by rule and the guard
 * still passes the address it is connected to. Anything else (a deny, an
 * ask, report mode) takes the full egress path on a new connection. */
static int can_reuse(struct http_conn *c)
{
    struct http_up *u = c->w->up;
    const struct policy *pol = egress_env_policy(c->f->egress);
    struct policy_guard_verdict gv;
    struct policy_judgment j;

    if (u == NULL || u->closing || !u->idle || u->port != c->port ||
        strcmp(u->host, c->host.name) != 0)
        return 0;
    /* the verdict with the connected address as the only answer */
    policy_verdict(pol, &c->host, c->port, &u->addr, 1, &gv, &j);
    if (j.verdict != POLICY_ALLOW || j.nallowed != 1)
        return 0;
    snprintf(c->verdict, sizeof(c->verdict), "allow");
    set_text(&c->rule, j.rule_text);
    set_text(&c->source, j.source[0] != '\0' ? j.source : NULL);
    set_reason(c, "reusing the kept upstream connection");
    policy_addr_str(&u->addr, c->addr, sizeof(c->addr));
    c->code = -1;
    emit(c, CONNLOG_DECISION);
    return 1;
}

/* ------------------------------------------------------------------------ */
/* Request heads                                                             */

/* Checks Proxy-Authorization when proxy.auth is set. 1 when it passes. */
static int auth_ok(struct http_conn *c, const struct http_request *rq, const char *head)
{
    uint8_t cred[HTTP_CRED_MAX];
    size_t ul = 0, pl = 0;
    int ok;

    if (c->f->auth_user == NULL)
        return 1;
    if (!rq->has_auth) {
        set_reason(c, "proxy authentication required");
        return 0;
    }
    ok = http_basic_decode(head + rq->auth.off, rq->auth.len, cred, sizeof(cred), &ul, &pl) == 0 &&
         frontend_auth_ok(c->f, cred, ul, cred + ul + 1, pl);
    memset(cred, 0, sizeof(cred));
    if (!ok)
        set_reason(c, "wrong proxy credentials");
    return ok;
}

/* For the log of a plain HTTP request: the method, and the URL without its
 * query string (nor fragment): scheme, canonical host, port unless 80, path. */
static void note_url(struct http_conn *c, const struct http_request *rq, const char *in)
{
    char url[POLICY_HOST_MAX + 600], port[8] = "";
    const char *path = in + rq->path.off;
    size_t plen = 0;
    int v6 = c->host.kind == POLICY_HOST_IPV6;

    while (plen < rq->path.len && path[plen] != '?' && path[plen] != '#')
        plen++;
    snprintf(c->method, sizeof(c->method), "%.*s", (int)rq->method_text.len,
             in + rq->method_text.off);
    if (c->port != 80)
        snprintf(port, sizeof(port), ":%u", (unsigned)c->port);
    snprintf(url, sizeof(url), "http://%s%s%s%s%.*s", v6 ? "[" : "", c->host.name, v6 ? "]" : "",
             port, (int)(plen < 512 ? plen : 512), path);
    set_text(&c->url, url);
}

/* A complete head of end bytes at the start of w->in. */
static void handle_head(struct http_conn *c, size_t end)
{
    struct http_work *w = c->w;
    static _Thread_local struct http_request rq;
    const char *why = NULL;
    char authority[POLICY_HOST_MAX + 16];
    char *norm_head = NULL; /* the head with a normalised path (ambiguousRequestTarget) */
    int st;

    timer_set(c, TIMER_NONE, 0);
    /* what the logs say from now on is about this request */
    c->have_host = 0;
    c->protocol = "http";
    c->verdict[0] = '\0';
    c->addr[0] = '\0';
    set_text(&c->rule, NULL);
    set_text(&c->source, NULL);
    set_text(&c->url, NULL);
    c->method[0] = '\0';
    set_reason(c, NULL);
    c->code = -1;
    if (c->overloaded) {
        reply_overloaded(c);
        return;
    }
    if (is_health_request(c, w->in, end)) {
        health_check(c, end);
        return;
    }
    st = http_request_parse(w->in, end, &rq, &why);
    if (st != 0) {
        refuse(c, st, why, 1, "bad request");
        return;
    }
    if (llhttp_check_head(c, &w->reqp, &req_settings, HTTP_REQUEST, w->in, end, rq.body,
                          rq.content_length) < 0) {
        refuse(c, 400, "ambiguous request head", 1, "bad request");
        return;
    }
    w->is_connect = rq.method == HTTP_METHOD_CONNECT;
    w->is_head = rq.method == HTTP_METHOD_HEAD;
    w->upgrade = rq.upgrade;
    w->client_keep = rq.keep_alive;
    w->client_11 = rq.minor == 1;
    w->req_body = rq.body;
    c->protocol = w->is_connect ? "connect" : "http";
    if (policy_host_normalize(w->in + rq.host.off, rq.host.len, &c->host, &why) < 0) {
        char msg[200];
        c->have_host = 0;
        snprintf(msg, sizeof(msg), "bad destination host: %s", why);
        refuse(c, 400, msg, 1, "bad destination host");
        return;
    }
    c->have_host = 1;
    c->port = rq.port;
    if (!w->is_connect)
        note_url(c, &rq, w->in);
    if (!auth_ok(c, &rq, w->in)) {
        struct http_reply r;
        int keep =
            rq.keep_alive && rq.body == HTTP_BODY_NONE && !(w->is_connect && w->in_len > end);

        memset(&r, 0, sizeof(r));
        r.status = 407;
        r.challenge = 1;
        r.details = c->reason;
        r.body = "sluice: proxy authentication required";
        r.close = !keep;
        consume_in(w, end);
        reply(c, &r, "authentication failed");
        return;
    }

    /* request-level options (srt 0.0.83; proxy/reqopts.c) */
    {
        const struct policy_http_opts *ho = policy_http_opts(egress_env_policy(c->f->egress));
        if (w->is_connect && ho->refuse_opaque_tunnels) {
            refuse(c, 403,
                   "tunnels are refused (network.refuseOpaqueTunnels): sluice cannot see "
                   "inside CONNECT",
                   1, "tunnel refused");
            return;
        }
        if (!w->is_connect && ho->require_host_match &&
            reqopt_host_mismatch(w->in, &rq, &c->host, c->port)) {
            refuse(c, 421,
                   "the Host header names another host than the request target "
                   "(network.requireHostMatch)",
                   1, "host mismatch");
            return;
        }
        if (!w->is_connect && ho->ambiguous != SETTINGS_AMBIGUOUS_AS_SPELLED &&
            reqopt_target_ambiguous(w->in + rq.path.off, rq.path.len)) {
            size_t plen = 0, cap = (size_t)rq.path.len + 2;
            char *nb = ho->ambiguous == SETTINGS_AMBIGUOUS_NORMALIZE ? malloc(end + cap) : NULL;
            if (nb == NULL || reqopt_normalize(w->in + rq.path.off, rq.path.len, nb + end, cap,
                                               &plen) < 0) {
                free(nb);
                refuse(c, 400,
                       "ambiguous request target (dot segments, a backslash or an encoded "
                       "slash; network.ambiguousRequestTarget)",
                       1, "ambiguous request target");
                return;
            }
            memcpy(nb, w->in, end);
            rq.path.off = (uint32_t)end;
            rq.path.len = (uint32_t)plen;
            norm_head = nb;
        }
    }

    if (!w->is_connect) {
        size_t n;
        const char *hb = norm_head != NULL ? norm_head : w->in;
        if (c->host.kind == POLICY_HOST_IPV6)
            snprintf(authority, sizeof(authority), "[%s]", c->host.name);
        else
            snprintf(authority, sizeof(authority), "%s", c->host.name);
        if (c->port != 80) {
            size_t al = strlen(authority);
            snprintf(authority + al, sizeof(authority) - al, ":%u", (unsigned)c->port);
        }
        n = http_request_build(hb, &rq, authority, !rq.keep_alive, NULL, 0);
        free(w->out);
        w->out = malloc(n);
        if (w->out == NULL) {
            free(norm_head);
            conn_close(c, "out of memory");
            return;
        }
        w->out_len = http_request_build(hb, &rq, authority, !rq.keep_alive, w->out, n);
        free(norm_head);
    }
    consume_in(w, end);
    client_hold(c); /* CONNECT too: early bytes wait for the dial (in w->in) */
    if (w->is_connect) {
        up_close(c, w->up); /* an idle upstream from an earlier request */
        start_egress(c);
        return;
    }
    w->reused = 0;
    if (can_reuse(c)) {
        w->reused = 1;
        start_exchange(c);
        return;
    }
    up_close(c, w->up); /* never reused across authorities */
    start_egress(c);
}

/* Serves what w->in holds, in order, while the connection waits for heads. */
static void process_client(struct http_conn *c)
{
    struct http_work *w = c->w;

    if (w->processing)
        return;
    w->processing = 1;
    while (c->state == HTTP_ST_HEAD) {
        size_t end = 0, max = c->f->max_head_bytes;
        const char *why = NULL;
        enum http_find f;

        /* RFC 9112 2.2: empty lines before a request line are ignored */
        while (w->scan == 0 && w->in_len >= 2 && w->in[0] == '\r' && w->in[1] == '\n')
            consume_in(w, 2);
        if (w->in_len == 0) {
            if (w->client_eof) /* seen while the last request was served */
                close_gracefully(c, "client closed");
            else
                client_read_start(c);
            break;
        }
        if (uv_stream_get_write_queue_size(&c->relay.a.u.s) > RELAY_HIGH_WATER) {
            /* the client sends requests without reading the answers */
            w->wait_drain = 1;
            client_read_stop(c);
            break;
        }
        if (w->timer != TIMER_HEAD)
            timer_set(c, TIMER_HEAD, c->f->head_timeout_ms);
        f = http_head_end(w->in, w->in_len, &w->scan, &end, &why);
        if (f == HTTP_FIND_MORE && (w->in_len >= max || w->in_len >= w->in_max)) {
            if (c->overloaded)
                reply_overloaded(c);
            else
                refuse(c, 431, "request head too large", 1, "head too large");
            break;
        }
        if (f == HTTP_FIND_MORE) {
            if (w->client_eof)
                close_gracefully(c, "client closed mid-head");
            else
                client_read_start(c);
            break;
        }
        if (f == HTTP_FIND_BAD) {
            if (c->overloaded)
                reply_overloaded(c);
            else
                refuse(c, 400, why, 1, "bad request");
            break;
        }
        if (end > max) {
            refuse(c, 431, "request head too large", 1, "head too large");
            break;
        }
        handle_head(c, end);
    }
    if (c->w != NULL)
        c->w->processing = 0;
}

static void on_client_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct http_conn *c = container_of(h, struct http_conn, relay.a.u.h);
    struct http_work *w = c->w;

    (void)suggested;
    if (w->in == NULL) {
        w->in_max = in_capacity(c->f);
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

static void on_client_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct http_conn *c = container_of(s, struct http_conn, relay.a.u.s);
    struct http_work *w = c->w;

    (void)buf;
    if (c->state == HTTP_ST_CLOSING || w == NULL || nread == 0)
        return;
    if (nread < 0) {
        w->creading = 0;
        if (nread != UV_EOF) {
            snprintf(c->end_buf, sizeof(c->end_buf), "client error: %s", uv_err_name((int)nread));
            conn_close(c, c->end_buf);
            return;
        }
        if (c->state == HTTP_ST_FORWARD && w->req_done) {
            w->client_eof = 1; /* half-closed after its request: the answer still goes out */
            uv_read_stop(s);
            return;
        }
        if (c->state == HTTP_ST_FORWARD) {
            conn_close(c, "client closed mid-request");
            return;
        }
        if (c->state == HTTP_ST_EGRESS) {
            w->client_eof = 1; /* as above; a body still missing ends it in start_exchange */
            uv_read_stop(s);
            return;
        }
        /* answers may still be queued: they go out before our FIN */
        w->client_eof = 1;
        close_gracefully(c, w->in_len > 0 ? "client closed mid-head" : "client closed");
        return;
    }
    w->in_len += (size_t)nread;
    switch (c->state) {
    case HTTP_ST_HEAD:
        process_client(c);
        return;
    case HTTP_ST_FORWARD:
        if (w->req_done) {
            client_hold(c); /* a pipelined request: held for later */
            return;
        }
        w->last_io = uv_now(c->f->loop);
        feed_request_body(c);
        return;
    default:
        /* held for later (CONNECT early data, pipelined requests, a body
         * that arrives while dialing) */
        client_read_stop(c);
        return;
    }
}

/* ------------------------------------------------------------------------ */
/* Accept                                                                    */

int http_session_accept(struct frontend *f, struct listener *l, int overloaded)
{
    struct http_conn *c = calloc(1, sizeof(*c));
    struct http_work *w = calloc(1, sizeof(*w));
    int kind = listener_kind(l);
    int rc;

    if (c == NULL || w == NULL) {
        free(c);
        free(w);
        return UV_ENOMEM;
    }
    c->f = f;
    c->w = w;
    c->code = -1;
    c->overloaded = overloaded != 0;
    relay_init(f->loop, &c->relay, (enum relay_kind)kind, RELAY_TCP, on_relay_closed, c);
    c->fc.force_close = force_close;
    c->fc.bytes = conn_bytes;
    frontend_add(f, &c->fc);
    c->id = __atomic_add_fetch(f->next_id, 1, __ATOMIC_RELAXED); /* workers share it */
    set_state(c, HTTP_ST_HEAD);
    rc = listener_accept(l, &c->relay.a.u.s);
    if (rc < 0) {
        snprintf(c->client, sizeof(c->client), "-");
        conn_close(c, "accept failed");
        return rc;
    }
    common_peer_name(&c->relay.a.u.s, kind == RELAY_PIPE, c->client, sizeof(c->client));
    if (kind == RELAY_TCP && !listener_nodelay(l))
        (void)uv_tcp_nodelay(&c->relay.a.u.tcp, 1);
    if (kind == RELAY_TCP)
        c->relay.a.nodelay = 1; /* set one way or the other */
    llhttp_init(&w->reqp, HTTP_REQUEST, &req_settings);
    llhttp_init(&w->resp, HTTP_RESPONSE, &resp_settings);
    w->reqp.data = c;
    w->resp.data = c;
    timer_set(c, TIMER_HEAD, f->head_timeout_ms);
    client_read_start(c);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Drain                                                                     */

void http_frontend_drain(struct frontend *f)
{
    struct frontend_conn *fc = f->conns.next;

    f->draining = 1;
    /* close_gracefully never frees synchronously: the list stays valid */
    while (fc != &f->conns) {
        struct frontend_conn *next = fc->next;
        struct http_conn *c = container_of(fc, struct http_conn, fc);

        if (c->state == HTTP_ST_HEAD && c->w != NULL && c->w->in_len == 0 && !c->w->processing)
            close_gracefully(c, "drained");
        fc = next;
    }
}
