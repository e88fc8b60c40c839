/* proxy/http_tlspump.c - the transport of terminated tunnels (proxy/http_tls.c
 * says where it sits): a pump between a TLS connection driven through
 * memory buffers (tls/tls.h) and whoever reads and writes its plaintext.
 *
 * A server pump reads its outer connection's client stream and owns the
 * engine that terminates the client's TLS; its handshake done, an inner
 * connection of the front end reads and writes the plaintext in process,
 * through the pump (http_pump_read_start, http_pump_send: the connection's
 * client transport, c->cio): no socket pair, no copy through the kernel.
 *
 * A client pump owns the origin socket egress dialed and the engine that
 * verifies the origin; its handshake done, it becomes the transport of the
 * inner connection's upstream (struct http_up.tio, http_up_adopt_tls), and
 * a failure is that connection's 502.
 *
 * After an Upgrade inside the tunnel the two pumps go back to back
 * (http_pump_mate: each engine's plaintext into the other's). No socket
 * pair, no relay. The transport half is proxy/http_tlsio.c.
 *
 * A pump frees itself once its handles are closed, its writes and shutdown
 * have called back, no mint is out and no inner connection holds it
 * (http_pump_maybe_free). A server pump's raw stream is the outer connection's
 * client (p->c; NULL once that connection is gone: it closes the stream, and
 * the pump never touches it again); closing the pump closes the inner
 * connection, and an inner connection that closes first detaches and makes
 * the pump send its close_notify and end.
 */
#include "proxy/http_int.h"

#include "proxy/service.h"
#include "proxy/tlsterm.h"
#include "tls/tls.h"

#include "proxy/http_pump_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

_Thread_local char http_pump_buf[PUMP_CHUNK];

static void pump_after(struct http_tls_pump *p);

/* ------------------------------------------------------------------------ */
/* Lifetime                                                                  */

void http_pump_maybe_free(struct http_tls_pump *p)
{
    if (!p->closing || p->handles > 0 || p->pending > 0 || p->minting || p->in != NULL ||
        p->up != NULL)
        return;
    if (p->rin != NULL)
        tls_in_free(p->rin);
    tls_conn_free(p->tc);
    free(p->o);
    free(p);
}

static void on_handle_closed(uv_handle_t *h)
{
    struct http_tls_pump *p = h->data;

    p->handles--;
    http_pump_maybe_free(p);
}

void http_pump_close(struct http_tls_pump *p)
{
    struct http_conn *in = p->in;

    if (p->closing)
        return;
    p->closing = 1;
    if (p->c != NULL && p->c->tp == p)
        p->c->tp = NULL;
    p->c = NULL;
    if (p->mate != NULL) { /* back to back: the other pump ends after its close_notify */
        struct http_tls_pump *m = p->mate;
        p->mate = NULL;
        m->mate = NULL;
        http_pump_plain_done(m);
    }
    if (in != NULL) /* the client is gone: so is its inner connection (detaches) */
        http_conn_close(in, p->why != NULL ? p->why : "tunnel closed");
    if (p->up != NULL && !p->in_eof) { /* the origin is gone: its reader learns it */
        p->in_reading = 0;
        p->in_eof = 1;
        http_up_got(p->up, p->why != NULL ? UV_ECONNRESET : UV_EOF);
    }
    if (p->raw_on)
        uv_close((uv_handle_t *)&p->raw, on_handle_closed);
    uv_close((uv_handle_t *)&p->timer, on_handle_closed);
}

static struct http_tls_pump *pump_new(struct http_conn *c, enum pump_mode mode)
{
    struct http_tls_pump *p = calloc(1, sizeof(*p));

    if (p == NULL)
        return NULL;
    p->mode = mode;
    p->loop = c->fc.f->loop;
    p->t = c->fc.f->data != NULL ? ((struct proxy_service *)c->fc.f->data)->tls : NULL;
    p->c = c;
    uv_timer_init(p->loop, &p->timer);
    p->timer.data = p;
    p->handles = 1;
    return p;
}

/* ------------------------------------------------------------------------ */
/* Writing                                                                   */

uv_stream_t *http_pump_raw(struct http_tls_pump *p)
{
    if (p->mode == PUMP_CLIENT)
        return (uv_stream_t *)&p->raw;
    return p->c != NULL ? relay_client(&p->c->relay) : NULL;
}


static void on_raw_write(uv_write_t *req, int status)
{
    struct pump_obuf *ob = container_of(req, struct pump_obuf, req);
    struct http_tls_pump *p = ob->p;
    uv_stream_t *s;

    tls_out_free(ob->o);
    free(ob);
    p->pending--;
    if (p->closing) {
        http_pump_maybe_free(p);
        return;
    }
    if (status < 0) {
        http_pump_end(p, "tls peer write failed");
        return;
    }
    if (p->ending) {
        if (p->pending == 0)
            http_pump_end(p, NULL);
        return;
    }
    s = http_pump_raw(p);
    if (s == NULL || p->open == 0 || uv_stream_get_write_queue_size(s) >= RELAY_LOW_WATER)
        return;
    if (p->mate != NULL)
        http_pump_raw_start(p->mate); /* it waited for this queue */
    else if (p->in != NULL)
        http_client_drained(p->in);
    else if (p->up != NULL)
        http_up_drained(p->up);
}

/* Sends what the TLS engine has for the peer, from the engine's own
 * buffer: what the socket takes at once, then the rest queued. */
int http_pump_flush(struct http_tls_pump *p)
{
    uv_stream_t *s = http_pump_raw(p);

    while (s != NULL && tls_conn_pending_out(p->tc) > 0) {
        struct pump_obuf *ob;
        struct tls_out *o;
        char *data = NULL;
        size_t len = 0, done;
        uv_buf_t b;
        int rc;

        o = tls_conn_take_out_buf(p->tc, &data, &len);
        if (o == NULL)
            return UV_ENOMEM;
        if (p->mode == PUMP_SERVER)
            p->c->bytes_down += len;
        b = uv_buf_init(data, (unsigned)len);
        rc = uv_try_write(s, &b, 1);
        if (rc < 0 && rc != UV_EAGAIN) {
            tls_out_free(o);
            return rc;
        }
        done = rc > 0 ? (size_t)rc : 0;
        if (done == len) {
            tls_out_free(o);
            continue;
        }
        ob = malloc(sizeof(*ob));
        if (ob == NULL) {
            tls_out_free(o);
            return UV_ENOMEM;
        }
        ob->p = p;
        ob->o = o;
        b = uv_buf_init(data + done, (unsigned)(len - done));
        rc = uv_write(&ob->req, s, &b, 1, on_raw_write);
        if (rc < 0) {
            tls_out_free(o);
            free(ob);
            return rc;
        }
        p->pending++;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Ending                                                                    */

/* The pump is done (end: the connection's end text, or NULL). */
void http_pump_end(struct http_tls_pump *p, const char *end)
{
    if (p->why == NULL)
        p->why = end;
    if (p->mode == PUMP_SERVER && p->c != NULL) {
        http_conn_close(p->c, end != NULL ? end : "tunnel closed"); /* closes p too */
        return;
    }
    http_pump_close(p);
}

/* The plaintext side is done: close_notify, then the end once it is sent. */
void http_pump_plain_done(struct http_tls_pump *p)
{
    if (p->closing || p->ending)
        return;
    (void)tls_conn_shutdown(p->tc);
    p->ending = 1;
    if (http_pump_flush(p) < 0 || p->pending == 0) {
        http_pump_end(p, NULL);
        return;
    }
    uv_timer_start(&p->timer, http_pump_on_timer, PUMP_LINGER_MS, 0);
}

/* The handshake failed, or timed out. */
static void pump_fail(struct http_tls_pump *p, const char *reason)
{
    struct http_conn *c = p->c;
    char why[300];

    (void)http_pump_flush(p); /* the alert, if the socket takes it at once */
    proxy_tls_count(p->t, p->mode == PUMP_SERVER ? PROXY_TLS_CLIENT : PROXY_TLS_ORIGIN, reason);
    if (c == NULL) {
        http_pump_close(p);
        return;
    }
    if (p->mode == PUMP_SERVER) {
        snprintf(why, sizeof(why), "TLS handshake with the client failed: %s", reason);
        http_set_reason(c, why);
        http_conn_close(c, "tls handshake failed");
        return;
    }
    http_pump_close(p); /* detaches c */
    snprintf(why, sizeof(why), "TLS with the origin failed: %s", reason);
    http_set_reason(c, why);
    http_reply_error(c, 502,
                     strstr(reason, "certificate") != NULL || strstr(reason, "issuer") != NULL
                         ? "tls_certificate_error"
                         : "tls_protocol_error",
                     why, 1, "upstream tls failed");
}

void http_pump_on_timer(uv_timer_t *t)
{
    struct http_tls_pump *p = t->data;
    char why[100];

    if (p->closing)
        return;
    if (p->ending) { /* our close_notify did not go out in time */
        http_pump_end(p, NULL);
        return;
    }
    if (p->mode == PUMP_SERVER && p->mate != NULL) { /* a tunnel: the idle timeout */
        uint64_t now = uv_now(p->loop), due = p->last_io + p->idle_ms;
        if (now < due) {
            uv_timer_start(&p->timer, http_pump_on_timer, due - now, 0);
            return;
        }
        http_pump_end(p, "idle timeout");
        return;
    }
    if (p->mode == PUMP_SERVER || p->open) { /* a reader started again: what the engine holds */
        http_pump_plain_out(p);
        return;
    }
    snprintf(why, sizeof(why), "no TLS handshake within %u ms", p->handshake_ms);
    pump_fail(p, why);
}

/* ------------------------------------------------------------------------ */
/* Reading                                                                   */

/* Raw reads go straight into a buffer the engine then takes (no copy);
 * http_pump_buf when that cannot be had. */
static void raw_alloc(struct http_tls_pump *p, uv_buf_t *buf)
{
    char *data = NULL;

    if (p != NULL && p->rin == NULL && (p->rin = tls_in_new(PUMP_IN, &data)) != NULL) {
        *buf = uv_buf_init(data, PUMP_IN);
        return;
    }
    *buf = uv_buf_init(http_pump_buf, sizeof(http_pump_buf));
}

static void on_server_raw_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    raw_alloc(((struct http_conn *)h->data)->tp, buf);
}

static void on_client_raw_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    raw_alloc(h->data, buf);
}

static void raw_got(struct http_tls_pump *p, ssize_t nread, const uv_buf_t *buf)
{
    struct tls_in *in = p->rin;
    int rc;

    p->rin = NULL;
    if (in != NULL && (buf->base == http_pump_buf || nread <= 0 || p->closing)) {
        tls_in_free(in); /* unused */
        in = NULL;
    }
    if (p->closing || nread == 0)
        return;
    if (nread < 0) {
        http_pump_raw_stop(p);
        p->raw_eof = 1;
        if (nread != UV_EOF)
            http_pump_end(p, "tls peer read failed");
        else if (!p->open)
            pump_fail(p, "the peer closed the connection during the handshake");
        else
            http_pump_plain_out(p); /* the reader sees EOF after the plaintext */
        return;
    }
    if (p->mode == PUMP_SERVER) {
        p->c->bytes_up += (uint64_t)nread;
        if (p->mate != NULL)
            p->last_io = uv_now(p->loop);
    }
    if (in != NULL)
        rc = tls_conn_feed_in(p->tc, in, (size_t)nread); /* takes in */
    else
        rc = tls_conn_feed(p->tc, http_pump_buf, (size_t)nread);
    if (rc == UV_ENOMEM) {
        http_pump_end(p, "out of memory");
        return;
    }
    pump_after(p);
}

static void on_server_raw_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct http_conn *c = s->data;

    if (c->tp != NULL)
        raw_got(c->tp, nread, buf);
}

static void on_client_raw_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    raw_got(s->data, nread, buf);
}

void http_pump_raw_start(struct http_tls_pump *p)
{
    uv_stream_t *s = http_pump_raw(p);

    if (s == NULL || p->raw_reading || p->raw_eof || p->closing || p->minting)
        return;
    if (uv_read_start(s, p->mode == PUMP_SERVER ? on_server_raw_alloc : on_client_raw_alloc,
                      p->mode == PUMP_SERVER ? on_server_raw_read : on_client_raw_read) < 0) {
        http_pump_end(p, "tls peer read failed");
        return;
    }
    p->raw_reading = 1;
}

void http_pump_raw_stop(struct http_tls_pump *p)
{
    if (p->raw_reading) {
        uv_read_stop(http_pump_raw(p));
        p->raw_reading = 0;
    }
}

/* ------------------------------------------------------------------------ */
/* The handshake                                                             */

static void mint_work(uv_work_t *w)
{
    struct http_tls_pump *p = container_of(w, struct http_tls_pump, work);

    tls_mint_run(p->mint);
}

static void mint_after(uv_work_t *w, int status)
{
    struct http_tls_pump *p = container_of(w, struct http_tls_pump, work);
    struct tls_mint *m = p->mint;

    (void)status;
    p->minting = 0;
    p->mint = NULL;
    if (p->closing) {
        tls_mint_free(m);
        http_pump_maybe_free(p);
        return;
    }
    (void)tls_conn_resume(p->tc, m); /* a failure shows as FAILED */
    pump_after(p);
    if (!p->open)
        http_pump_raw_start(p);
}

/* A cache miss: the handshake waits while a worker thread mints. */
static void start_mint(struct http_tls_pump *p)
{
    p->mint = tls_conn_mint_job(p->tc);
    if (p->mint == NULL) {
        pump_fail(p, "out of memory");
        return;
    }
    http_pump_raw_stop(p);
    p->minting = 1;
    if (uv_queue_work(p->loop, &p->work, mint_work, mint_after) < 0) {
        p->minting = 0;
        tls_mint_free(p->mint);
        p->mint = NULL;
        pump_fail(p, "cannot queue the leaf mint");
    }
}

/* Client: the handshake is done; the pump becomes the inner connection's
 * upstream transport. 0, or -1 when the pump ended. */
static int client_opened(struct http_tls_pump *p)
{
    struct http_conn *c = p->c;
    char why[200];
    int rc;

    c->tp = NULL;
    p->c = NULL;
    rc = http_up_adopt_tls(c, p, p->o);
    if (rc < 0) {
        snprintf(why, sizeof(why), "cannot adopt the upstream socket: %s", uv_strerror(rc));
        http_set_reason(c, why);
        http_reply_error(c, 502, "proxy_internal_error", why, 1, "internal error");
        http_pump_close(p);
        return -1;
    }
    http_start_exchange(c);
    return 0;
}

/* The handshake is done. 0, or -1 when the pump ended. */
static int pump_opened(struct http_tls_pump *p)
{
    struct http_conn *c = p->c;

    p->open = 1;
    if (p->mode == PUMP_SERVER)
        frontend_conn_timer_set(&c->fc, NULL, 0);
    else
        uv_timer_stop(&p->timer);
    if (p->mode == PUMP_SERVER && tls_conn_alpn(p->tc) == TLS_ALPN_UNSERVED) {
        pump_fail(p, "the client offers no ALPN protocol sluice serves (http/1.1)");
        return -1;
    }
    proxy_tls_count(p->t, p->mode == PUMP_SERVER ? PROXY_TLS_CLIENT : PROXY_TLS_ORIGIN, NULL);
    if (p->mode == PUMP_CLIENT)
        return client_opened(p);
    /* server: the inner connection reads the plaintext from now on
     * (http_pump_attach); it starts reading, which delivers */
    if (http_session_open_terminated(c->fc.f, p, c) < 0) {
        http_pump_end(p, "cannot start the terminated session");
        return -1;
    }
    return p->closing ? -1 : 0;
}

/* After every input to the engine: its output goes out, its state moves on,
 * its plaintext goes to the reader. */
static void pump_after(struct http_tls_pump *p)
{
    if (p->closing)
        return;
    if (http_pump_flush(p) < 0) {
        http_pump_end(p, "tls peer write failed");
        return;
    }
    switch (tls_conn_state(p->tc)) {
    case TLS_CONN_FAILED:
        pump_fail(p, tls_conn_reason(p->tc) != NULL ? tls_conn_reason(p->tc) : "failed");
        return;
    case TLS_CONN_NEED_LEAF:
        if (!p->minting)
            start_mint(p);
        return;
    case TLS_CONN_HANDSHAKE:
        return;
    case TLS_CONN_OPEN:
    case TLS_CONN_CLOSED:
    default:
        break;
    }
    if (!p->open) {
        if (pump_opened(p) < 0)
            return;
        if (p->mode == PUMP_SERVER || p->closing)
            return; /* server: the inner connection's first read start delivers */
    }
    http_pump_plain_out(p);
}

/* ------------------------------------------------------------------------ */
/* Starting                                                                  */

/* The outer connection c (state TLS, its client reads stopped) terminates:
 * tc has the client's first bytes already. */
void http_pump_server(struct http_conn *c, struct tls_conn *tc)
{
    struct http_tls_pump *p = pump_new(c, PUMP_SERVER);

    if (p == NULL) {
        tls_conn_free(tc);
        http_conn_close(c, "out of memory");
        return;
    }
    p->tc = tc;
    c->tp = p;
    pump_after(p);
    if (!p->open)
        http_pump_raw_start(p); /* a no-op when the pump already ended */
}

/* The inner connection c's upstream, dialed (o->fd, taken): the TLS client
 * tc shakes hands within handshake_ms. */
void http_pump_client(struct http_conn *c, struct tls_conn *tc, const struct egress_outcome *o,
                      unsigned handshake_ms)
{
    struct http_tls_pump *p = pump_new(c, PUMP_CLIENT);
    int rc;

    if (p == NULL || (p->o = malloc(sizeof(*o))) == NULL) {
        close(o->fd);
        tls_conn_free(tc);
        if (p != NULL)
            http_pump_close(p);
        http_conn_close(c, "out of memory");
        return;
    }
    p->tc = tc;
    memcpy(p->o, o, sizeof(*o));
    uv_tcp_init(p->loop, &p->raw);
    p->raw.data = p;
    p->raw_on = 1;
    p->handles++;
    rc = uv_tcp_open(&p->raw, o->fd);
    if (rc < 0) {
        close(o->fd);
        http_pump_close(p);
        http_reply_error(c, 502, "proxy_internal_error", uv_strerror(rc), 1, "internal error");
        return;
    }
    (void)uv_tcp_nodelay(&p->raw, 1);
    c->tp = p;
    p->handshake_ms = handshake_ms;
    uv_timer_start(&p->timer, http_pump_on_timer, handshake_ms, 0);
    pump_after(p); /* the ClientHello */
    http_pump_raw_start(p);
}
