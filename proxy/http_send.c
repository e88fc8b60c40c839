/* proxy/http_send.c - writing: to the client (answers, the gathered response
 * pieces of one upstream read), to an upstream and to a tunnel's b side. */
#include "proxy/http_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
int http_stream_send(struct http_conn *c, struct http_up *up, uv_stream_t *s, const uv_buf_t *bufs,
                     unsigned n, uv_write_cb cb)
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


/* Bytes queued for the client, not yet taken by its socket. */
size_t http_client_queued(struct http_conn *c)
{
    if (c->cio != NULL)
        return http_pump_queued(c->cio);
    if (c->terminated)
        return 0; /* its pump is gone */
    return uv_stream_get_write_queue_size(relay_client(&c->relay));
}

/* The client's queue went down: resume what waits for it. */
static void client_drained(struct http_conn *c)
{
    struct http_work *w = c->w;

    if (w != NULL && w->splice_wait && c->state == HTTP_ST_FORWARD) {
        if (http_client_queued(c) == 0)
            http_splice_try(c);
        return;
    }
    if (w == NULL || http_client_queued(c) >= RELAY_LOW_WATER)
        return;
    if (c->state == HTTP_ST_FORWARD && w->up_paused && w->up != NULL) {
        w->up_paused = 0;
        http_up_read_start(c, w->up);
    } else if (c->state == HTTP_ST_HEAD && w->wait_drain) {
        w->wait_drain = 0;
        http_process_client(c);
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
        http_conn_close(c, "client write failed");
        return;
    }
    if (c->w != NULL)
        c->w->last_io = uv_now(c->fc.f->loop);
    client_drained(c);
}


/* The pump wrote to the client (an inner connection's transport). */
void http_client_drained(struct http_conn *c)
{
    if (c->state == HTTP_ST_CLOSING || c->state == HTTP_ST_TUNNEL)
        return;
    if (c->w != NULL)
        c->w->last_io = uv_now(c->fc.f->loop);
    client_drained(c);
}

/* To the client: through its pump, or its stream. */
static int client_write(struct http_conn *c, const uv_buf_t *bufs, unsigned n)
{
    if (c->cio != NULL)
        return http_pump_send(c->cio, bufs, n);
    if (c->terminated)
        return UV_EPIPE; /* its pump is gone */
    return http_stream_send(c, NULL, relay_client(&c->relay), bufs, n, on_client_write);
}

void http_on_up_write(uv_write_t *req, int status)
{
    struct http_wbuf *wb = container_of(req, struct http_wbuf, req);
    struct http_up *u = wb->up;
    struct http_conn *c = u->c;
    struct http_work *w;

    free(wb);
    if (c == NULL || u->phase == UP_CLOSING || c->state == HTTP_ST_CLOSING)
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
            http_up_close(c, u);
        return;
    }
    http_up_drained(u);
}

/* The upstream took bytes: resume the client if it waits for that. */
void http_up_drained(struct http_up *u)
{
    struct http_conn *c = u->c;
    struct http_work *w;

    if (c == NULL || u->phase == UP_CLOSING || c->state == HTTP_ST_CLOSING)
        return;
    w = c->w;
    if (w == NULL || w->up != u)
        return;
    w->last_io = uv_now(c->fc.f->loop);
    if (c->state == HTTP_ST_FORWARD && w->client_paused && http_up_queued(u) < RELAY_LOW_WATER) {
        w->client_paused = 0;
        http_client_read_start(c);
    }
}

void http_on_b_write(uv_write_t *req, int status)
{
    struct http_wbuf *wb = container_of(req, struct http_wbuf, req);

    (void)status; /* a failure shows up in the relay as well */
    free(wb);
}

static void out_drop(struct http_work *w)
{
    http_cred_flushed(w);
    free(w->ohead);
    w->ohead = NULL;
    w->nob = w->nhdr = 0;
}

/* Sends what was gathered for the client, in one write. 0 or UV_E*. */
int http_out_flush(struct http_conn *c)
{
    struct http_work *w = c->w;
    int rc;

    if (w == NULL || w->nob == 0)
        return 0;
    if (c->state == HTTP_ST_CLOSING) {
        out_drop(w);
        return 0;
    }
    rc = client_write(c, w->ob, w->nob);
    out_drop(w);
    return rc;
}

/* Makes room for nbufs more pieces (nhdr of them chunk-size lines). */
static int out_room(struct http_conn *c, unsigned nbufs, unsigned nhdr)
{
    struct http_work *w = c->w;

    if (w->nob + nbufs > HTTP_OUT_BUFS || w->nhdr + nhdr > HTTP_OUT_HDRS)
        return http_out_flush(c);
    return 0;
}

void http_out_add(struct http_work *w, const char *base, size_t len)
{
    w->ob[w->nob++] = uv_buf_init((char *)(uintptr_t)base, (unsigned)len);
}

/* Anything gathered goes first, so the client sees bytes in order. */
int http_client_send(struct http_conn *c, const uv_buf_t *bufs, unsigned n)
{
    int rc = http_out_flush(c);

    if (rc < 0)
        return rc;
    return client_write(c, bufs, n);
}

int http_up_send(struct http_conn *c, struct http_up *u, const uv_buf_t *bufs, unsigned n)
{
    if (u->tio != NULL)
        return http_pump_send(u->tio, bufs, n);
    return http_stream_send(c, u, (uv_stream_t *)&u->tcp, bufs, n, http_on_up_write);
}

/* Sends data as one chunk ("%zx\r\n" data "\r\n") or as is: upstream
 * (u) at once, to the client gathered for http_out_flush (data must stay valid
 * until then: it points into w->uin). */
int http_send_body(struct http_conn *c, struct http_up *u, int chunked, const char *at, size_t len)
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
            http_out_add(w, h, (size_t)hl);
        }
        http_out_add(w, at, len);
        if (chunked)
            http_out_add(w, "\r\n", 2);
        return 0;
    }
    if (chunked) {
        hl = snprintf(hdr, sizeof(hdr), "%zx\r\n", len);
        b[n++] = uv_buf_init(hdr, (unsigned)hl);
    }
    b[n++] = uv_buf_init((char *)(uintptr_t)at, (unsigned)len);
    if (chunked)
        b[n++] = uv_buf_init((char *)(uintptr_t) "\r\n", 2);
    return http_up_send(c, u, b, n);
}

int http_send_last_chunk(struct http_conn *c, struct http_up *u)
{
    uv_buf_t b = uv_buf_init((char *)(uintptr_t) "0\r\n\r\n", 5);
    int rc;

    if (u != NULL)
        return http_up_send(c, u, &b, 1);
    rc = out_room(c, 1, 0);
    if (rc == 0)
        http_out_add(c->w, b.base, b.len);
    return rc;
}

