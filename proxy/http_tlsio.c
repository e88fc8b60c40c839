/* proxy/http_tlsio.c - the TLS pump (proxy/http_tlspump.c) as a
 * connection's transport: the engine's plaintext goes straight into the
 * reader's input buffer (an inner connection's client side, or an
 * upstream), or after an Upgrade into the other pump's engine; what the
 * reader sends is encrypted at once. */
#include "proxy/http_pump_int.h"

#include "tls/tls.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* The plaintext: to the reader, or to the other pump                        */

/* The reader: the inner connection (server) or the upstream (client). */
static int reader_on(const struct http_tls_pump *p)
{
    return p->mode == PUMP_SERVER ? p->in != NULL : p->up != NULL;
}

static void reader_got(struct http_tls_pump *p, ssize_t n)
{
    if (p->mode == PUMP_SERVER)
        http_client_got(p->in, n);
    else
        http_up_got(p->up, n);
}

/* The engine's plaintext straight into the reader's input
 * buffer, while it reads; EOF once the TLS peer's close_notify or its FIN
 * came and nothing is left. */
static void deliver(struct http_tls_pump *p)
{
    while (reader_on(p) && p->in_reading && !p->closing && !p->in_eof) {
        uv_buf_t b;
        size_t got = 0;
        int rc;

        if (p->mode == PUMP_SERVER)
            http_client_alloc(p->in, &b);
        else
            http_up_alloc(p->up, &b);
        if (b.base == NULL) {
            p->in_reading = 0;
            reader_got(p, UV_ENOBUFS);
            return;
        }
        rc = tls_conn_read(p->tc, b.base, b.len, &got);
        if (rc < 0 && rc != UV_EOF) {
            http_pump_end(p, "tls read failed");
            return;
        }
        if (got == 0 && (rc == UV_EOF || p->raw_eof)) {
            p->in_reading = 0;
            p->in_eof = 1;
            reader_got(p, UV_EOF);
            return;
        }
        if (got == 0)
            break;
        reader_got(p, (ssize_t)got);
    }
    if (p->closing || p->ending || p->mate != NULL)
        return;
    (void)http_pump_flush(p); /* a KeyUpdate answered while reading */
    if (p->in_reading)
        http_pump_raw_start(p);
    else if (p->open)
        http_pump_raw_stop(p); /* backpressure: the reader holds what it has */
}

/* The engine's plaintext to the mate's engine; the mate's queue above the
 * high water stops our reads (its drain starts them again). 0, or -1 when
 * a pump ended. */
static int to_mate(struct http_tls_pump *p)
{
    struct http_tls_pump *m = p->mate;
    struct http_tls_pump *srv = p->mode == PUMP_SERVER ? p : m;

    while (!p->closing && p->mate != NULL) {
        size_t got = 0;
        int rc = tls_conn_read(p->tc, http_pump_buf, sizeof(http_pump_buf), &got);
        if (rc < 0 && rc != UV_EOF) {
            http_pump_end(p, "tls read failed");
            return -1;
        }
        if (got == 0 && (rc == UV_EOF || p->raw_eof)) {
            p->in_eof = 1;
            http_pump_plain_done(m); /* close_notify on the other side; its end ends us */
            return -1;
        }
        if (got == 0)
            break;
        if (srv->in != NULL) {
            if (p == srv)
                srv->in->bytes_up += got;
            else
                srv->in->bytes_down += got;
        }
        srv->last_io = uv_now(p->loop);
        if (tls_conn_write(m->tc, http_pump_buf, got) < 0 || http_pump_flush(m) < 0) {
            http_pump_end(m, "tls write failed");
            return -1;
        }
    }
    if (p->closing || p->mate == NULL)
        return -1;
    if (http_pump_queued(m) > RELAY_HIGH_WATER)
        http_pump_raw_stop(p);
    else
        http_pump_raw_start(p);
    return 0;
}

void http_pump_plain_out(struct http_tls_pump *p)
{
    if (p->mate != NULL)
        (void)to_mate(p);
    else
        deliver(p);
}

/* ------------------------------------------------------------------------ */
/* The transport of an inner connection (server) or an upstream (client)     */

/* The reader let the pump go: close_notify, then the end (or only the
 * free, when the pump is closing already). */
static void reader_gone(struct http_tls_pump *p)
{
    p->in_reading = 0;
    if (p->closing) {
        http_pump_maybe_free(p);
        return;
    }
    http_pump_plain_done(p);
}

void http_pump_attach(struct http_tls_pump *p, struct http_conn *in)
{
    p->in = in;
    in->cio = p;
}

/* The inner connection is closing: the pump lets it go, sends its
 * close_notify and ends once that is out. */
void http_pump_detach(struct http_tls_pump *p, struct http_conn *in)
{
    if (p->in != in)
        return;
    p->in = NULL;
    in->cio = NULL;
    reader_gone(p);
}

int http_pump_read_start(struct http_tls_pump *p)
{
    if (p->closing || p->ending)
        return UV_EPIPE;
    if (p->in_reading || p->in_eof)
        return 0;
    p->in_reading = 1;
    if (tls_conn_has_input(p->tc) || p->raw_eof) /* delivered on the next loop turn */
        uv_timer_start(&p->timer, http_pump_on_timer, 0, 0);
    else
        http_pump_raw_start(p);
    return 0;
}

/* The upstream u (client) reads and writes through the pump. */
void http_pump_attach_up(struct http_tls_pump *p, struct http_up *u)
{
    p->up = u;
    u->tio = p;
}

/* The upstream u is closing: close_notify to the origin, then the end. */
void http_pump_detach_up(struct http_tls_pump *p, struct http_up *u)
{
    if (p->up != u)
        return;
    p->up = NULL;
    u->tio = NULL;
    reader_gone(p);
}

void http_pump_read_stop(struct http_tls_pump *p)
{
    p->in_reading = 0; /* the raw reads stop at the next delivery */
}

size_t http_pump_queued(struct http_tls_pump *p)
{
    uv_stream_t *s = http_pump_raw(p);

    if (s == NULL)
        return 0;
    return uv_stream_get_write_queue_size(s) + tls_conn_pending_out(p->tc);
}

/* Encrypts bufs for the client, pieces shorter than PUMP_GATHER_MIN
 * gathered into one record. 0 or UV_E*. */
int http_pump_send(struct http_tls_pump *p, const uv_buf_t *bufs, unsigned n)
{
    size_t held = 0;

    if (p->closing || p->ending || http_pump_raw(p) == NULL)
        return UV_EPIPE;
    for (unsigned i = 0; i < n; i++) {
        const char *at = bufs[i].base;
        size_t len = bufs[i].len;
        if (len < PUMP_GATHER_MIN && held + len <= sizeof(http_pump_buf)) {
            memcpy(http_pump_buf + held, at, len);
            held += len;
            continue;
        }
        if (held > 0 && tls_conn_write(p->tc, http_pump_buf, held) < 0)
            return UV_EPIPE;
        held = 0;
        if (len < PUMP_GATHER_MIN) {
            memcpy(http_pump_buf, at, len);
            held = len;
        } else if (tls_conn_write(p->tc, at, len) < 0) {
            return UV_EPIPE;
        }
    }
    if (held > 0 && tls_conn_write(p->tc, http_pump_buf, held) < 0)
        return UV_EPIPE;
    return http_pump_flush(p);
}

/* A tunnel's idle timeout on the server pump's timer (0: none). */
static void idle_start(struct http_tls_pump *p, unsigned idle_ms)
{
    p->idle_ms = idle_ms;
    p->last_io = uv_now(p->loop);
    if (idle_ms > 0)
        uv_timer_start(&p->timer, http_pump_on_timer, idle_ms, 0);
    else
        uv_timer_stop(&p->timer);
}

/* An Upgrade with TLS to the origin: the upstream u lets its pump p go
 * without ending it; in holds it (in->tp, closed with in) until
 * http_pump_mate. */
void http_pump_take_up(struct http_tls_pump *p, struct http_up *u, struct http_conn *in)
{
    p->up = NULL;
    u->tio = NULL;
    p->in_reading = 0;
    p->c = in;
    in->tp = p;
}

/* The inner connection in becomes a tunnel to the origin of its upstream
 * pump m (in->tp): the two pumps back to back, each engine's plaintext
 * written into the other's; idle_ms without a byte either way ends them. */
int http_pump_mate(struct http_tls_pump *p, struct http_conn *in, unsigned idle_ms)
{
    struct http_tls_pump *m = in->tp;

    if (m == NULL || m->closing || m->ending || p->closing || p->ending || p->in != in)
        return UV_EPIPE;
    in->tp = NULL;
    m->c = NULL;
    p->in_reading = 0;
    p->mate = m;
    m->mate = p;
    idle_start(p, idle_ms);
    if (to_mate(p) == 0 && p->mate != NULL)
        (void)to_mate(m);
    return 0;
}
