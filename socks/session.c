/* socks/session.c - one SOCKS5 client connection, from accept to close.
 *
 * States (R7); each says what it owns besides the relay's three handles:
 *   HANDSHAKE  client reads (into rbuf), the handshake timer
 *   EGRESS     req (decision, ask, DNS, dial in progress); client reads stay
 *              on until something arrives (see egress_read)
 *   REPLY      a failure reply being written; close after it is flushed
 *   RELAY      the relay owns the bytes
 *   CLOSING    relay_close() issued; on_relay_closed() logs and frees
 *
 * The connection struct is freed in exactly one place: on_relay_closed(),
 * the relay's last close callback. Every late callback (writes, shutdown,
 * egress) first checks CLOSING.
 *
 * System calls per tunnel. Replies are written with uv_try_write() (a
 * queued uv_write() costs libuv an epoll_ctl when it completes), and the
 * client's stream keeps reading from the greeting to the end of the tunnel:
 * relay_start() takes a reading stream over without the stop/start pair
 * that libuv pays two epoll_ctl calls for. TCP_NODELAY comes from the
 * listener (listener_nodelay()).
 */
#include "socks/socks.h"

#include "bridge/bridge.h"
#include "policy/policy.h"

#include <arpa/inet.h>
#include <assert.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"

#define SOCKS_READ_SIZE 512 /* greeting <= 257, auth <= 513 comes in pieces, request <= 262 */
#define SOCKS_LINGER_MS 1000       /* reading after a refusal before closing */

enum socks_state {
    SOCKS_ST_HANDSHAKE = 0,
    SOCKS_ST_EGRESS,
    SOCKS_ST_REPLY,
    SOCKS_ST_RELAY,
    SOCKS_ST_CLOSING,
};

/* What only the handshake needs; freed once the success reply is written
 * (or with the connection), so an idle tunnel keeps little besides the
 * relay. */
struct socks_hs {
    struct socks5_parser parser;
    struct policy_host host; /* the request's normalised host */
    uint8_t rbuf[SOCKS_READ_SIZE];
    uint8_t method_out[2], auth_out[2];
    uv_write_t method_req, auth_req;
};

struct socks_conn {
    struct relay relay; /* a = client, b = upstream */
    struct frontend_conn fc; /* fc.timer: the handshake and linger timer */
    struct socks_hs *hs; /* NULL once the tunnel is up */
    struct egress_req *req;
    enum socks_state state;
    int overloaded;
    char *host; /* canonical, for the log (fc.host); NULL until parsed */
    uint8_t reply_out[SOCKS5_REPLY_LEN];
    uint8_t hs_queued; /* queued writes whose request lives in hs (method, auth) */
    uint8_t hs_done;   /* the success reply is out: hs goes once hs_queued is 0 */
    uv_write_t reply_req, early_req;
    uv_shutdown_t shutdown_req;
    uint8_t *early; /* bytes after the request, forwarded after the dial */
    size_t early_len;
};

static void conn_close(struct socks_conn *c, const char *end);

static void set_state(struct socks_conn *c, enum socks_state s)
{
    static const char *const names[] = {"HANDSHAKE", "EGRESS", "REPLY", "RELAY", "CLOSING"};

    assert(c->state != SOCKS_ST_CLOSING); /* CLOSING is the last state */
    if (c->state != s)
        frontend_conn_debug(&c->fc, "%s -> %s", names[c->state], names[s]);
    c->state = s;
}

/* Replaces *dst with a heap copy of the formatted text (NULL on no memory). */
static void set_text(char **dst, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_text(char **dst, const char *fmt, ...)
{
    va_list ap;
    char tmp[512];

    va_start(ap, fmt);
    vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    free(*dst);
    *dst = strdup(tmp);
}

static void release(struct frontend_conn *fc)
{
    struct socks_conn *c = container_of(fc, struct socks_conn, fc);

    free(c->early);
    free(c->hs);
    free(c->host);
    free(c);
}

static void on_relay_closed(struct relay *r)
{
    struct socks_conn *c = container_of(r, struct socks_conn, relay);

    frontend_conn_relay_closed(&c->fc, r); /* the close record, then release() */
}

/* The one way a connection ends (idempotent). */
static void conn_close(struct socks_conn *c, const char *end)
{
    if (c->state == SOCKS_ST_CLOSING)
        return;
    if (c->fc.end == NULL)
        c->fc.end = end;
    set_state(c, SOCKS_ST_CLOSING);
    egress_cancel(c->req);
    c->req = NULL;
    frontend_conn_timer_close(&c->fc);
    relay_close(&c->relay, 0);
}

static void conn_bytes(const struct frontend_conn *fc, uint64_t *up, uint64_t *down)
{
    const struct socks_conn *c = container_of(fc, const struct socks_conn, fc);

    relay_bytes(&c->relay, up, down);
}

static void force_close(struct frontend_conn *fc)
{
    struct socks_conn *c = container_of(fc, struct socks_conn, fc);
    conn_close(c, "closed by shutdown");
}

/* ------------------------------------------------------------------------ */
/* Writing to the client                                                     */

static void on_handshake_write(uv_write_t *w, int status)
{
    struct socks_conn *c = w->data;

    if (c->state == SOCKS_ST_CLOSING)
        return;
    if (status < 0)
        conn_close(c, "client write failed");
}

/* The handshake state is no longer needed once the success reply is out and
 * no queued write still uses a request inside it. */
static void hs_release(struct socks_conn *c)
{
    if (!c->hs_done || c->hs_queued > 0)
        return;
    free(c->hs);
    c->hs = NULL;
}

/* A method or auth reply (its request lives in hs) was written. */
static void on_hs_write(uv_write_t *w, int status)
{
    struct socks_conn *c = w->data;

    c->hs_queued--;
    hs_release(c);
    on_handshake_write(w, status);
}

/* Writes data to the client: at once when the socket takes all of it (the
 * usual case: a few bytes into an empty socket buffer; uv_try_write()
 * refuses while earlier writes are queued, so the order is kept), else the
 * rest is queued with w and cb. 1: written, cb will not run; 0: queued;
 * < 0: error. data must stay valid until cb when queued. */
static int client_write(struct socks_conn *c, uv_write_t *w, uint8_t *data, size_t len,
                        uv_write_cb cb)
{
    uv_buf_t b = uv_buf_init((char *)data, (unsigned)len);
    int n = uv_try_write(relay_client(&c->relay), &b, 1);

    if (n >= 0 && (size_t)n == len)
        return 1;
    if (n < 0 && n != UV_EAGAIN)
        return n;
    if (n > 0) {
        b.base += n;
        b.len -= (size_t)n;
    }
    w->data = c;
    return uv_write(w, relay_client(&c->relay), &b, 1, cb);
}

/* A method or auth reply: its request and bytes live in hs. */
static int hs_write(struct socks_conn *c, uv_write_t *w, uint8_t *data, size_t len)
{
    int rc = client_write(c, w, data, len, on_hs_write);

    if (rc == 0)
        c->hs_queued++;
    return rc;
}

/* Lingering close: after the reply and our FIN, read and drop what the
 * client still sends (a SOCKS4 request's tail, early data) until its EOF or
 * SOCKS_LINGER_MS, so close() does not turn unread bytes into a reset that
 * could destroy the reply before the client reads it. */
static void on_linger_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct socks_conn *c = s->data;

    (void)buf;
    if (nread < 0)
        conn_close(c, NULL);
}

static void on_linger_timeout(uv_timer_t *t)
{
    struct socks_conn *c = container_of(frontend_conn_of_timer(t), struct socks_conn, fc);
    conn_close(c, NULL);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);

static void on_final_shutdown(uv_shutdown_t *sr, int status)
{
    struct socks_conn *c = sr->data;

    if (c->state == SOCKS_ST_CLOSING)
        return;
    if (status < 0 || uv_read_start(relay_client(&c->relay), on_alloc, on_linger_read) < 0) {
        conn_close(c, NULL);
        return;
    }
    frontend_conn_timer_set(&c->fc, on_linger_timeout, SOCKS_LINGER_MS);
}

/* A failure reply (or method/auth refusal) is queued: close once it is
 * flushed, with a shutdown first so the client reads it before the FIN. */
static void close_after_writes(struct socks_conn *c, const char *end)
{
    if (c->state == SOCKS_ST_CLOSING)
        return;
    c->fc.end = end;
    set_state(c, SOCKS_ST_REPLY);
    uv_read_stop(relay_client(&c->relay));
    c->shutdown_req.data = c;
    if (uv_shutdown(&c->shutdown_req, relay_client(&c->relay), on_final_shutdown) < 0)
        conn_close(c, NULL);
}

static void reply_fail(struct socks_conn *c, uint8_t code, const char *end)
{
    socks5_reply(c->reply_out, (enum socks5_reply_code)code);
    c->fc.code = code;
    if (client_write(c, &c->reply_req, c->reply_out, SOCKS5_REPLY_LEN, on_handshake_write) < 0) {
        conn_close(c, end);
        return;
    }
    close_after_writes(c, end);
}

/* ------------------------------------------------------------------------ */
/* After the dial                                                            */

static void early_free(struct socks_conn *c)
{
    free(c->early);
    c->early = NULL;
    c->early_len = 0;
}

static void on_early_written(uv_write_t *w, int status)
{
    struct socks_conn *c = w->data;

    (void)status; /* a failure shows up in the relay as well */
    early_free(c);
}

/* Early data goes upstream ahead of everything the relay forwards: written
 * at once if the socket takes it, the rest queued (the relay's writes queue
 * behind it). 0 or < 0. */
static int early_write(struct socks_conn *c)
{
    uv_buf_t b = uv_buf_init((char *)c->early, (unsigned)c->early_len);
    int n = uv_try_write(relay_upstream(&c->relay), &b, 1);

    if (n < 0 && n != UV_EAGAIN)
        return n;
    relay_count_up(&c->relay, c->early_len); /* counted as client -> upstream */
    if (n >= 0 && (size_t)n == c->early_len) {
        early_free(c);
        return 0;
    }
    if (n > 0) {
        b.base += n;
        b.len -= (size_t)n;
    }
    c->early_req.data = c;
    return uv_write(&c->early_req, relay_upstream(&c->relay), &b, 1, on_early_written);
}

/* The success reply is written: every handshake write before it is too
 * (libuv completes writes in order), so the handshake state can go once no
 * queued write uses it. */
static void on_success_written(uv_write_t *w, int status)
{
    struct socks_conn *c = w->data;

    c->hs_done = 1;
    hs_release(c);
    if (c->state == SOCKS_ST_CLOSING)
        return;
    if (status < 0)
        conn_close(c, "client write failed");
}

/* network.tlsTerminate: the tunnel goes to the owner's HTTP front end,
 * which writes the success reply and sniffs the first bytes (a ClientHello
 * is terminated, anything else stays opaque unless the host has request
 * rules). This connection ends here, its record saying so. */
static void hand_to_tls(struct socks_conn *c, int fd)
{
    struct frontend *f = c->fc.f;
    struct frontend_tls_adopt a;
    uv_os_fd_t cfd;
    int dfd = -1, rc = UV_ENOTSUP;

    socks5_reply(c->reply_out, SOCKS5_REP_SUCCEEDED);
    memset(&a, 0, sizeof(a));
    a.up_fd = fd;
    a.host = &c->hs->host;
    a.port = c->fc.port;
    a.addr = c->fc.addr;
    a.client = c->fc.client;
    a.protocol = "socks5";
    a.reply = (const char *)c->reply_out;
    a.reply_len = SOCKS5_REPLY_LEN;
    a.early = c->early;
    a.early_len = c->early_len;
    if (f->tls_adopt != NULL && uv_fileno((uv_handle_t *)relay_client(&c->relay), &cfd) == 0 &&
        (dfd = fcntl(cfd, F_DUPFD_CLOEXEC, 3)) >= 0) {
        a.client_fd = dfd;
        rc = f->tls_adopt(f, &a);
    }
    if (rc == 0) {
        c->fc.code = SOCKS5_REP_SUCCEEDED;
        conn_close(c, "handed to TLS termination"); /* the socket lives on in dfd */
        return;
    }
    if (dfd >= 0)
        close(dfd);
    close(fd);
    if (rc == UV_EBUSY)
        set_text(&c->fc.reason, "too many terminated tunnels (network.tlsTerminate.maxTunnels)");
    else
        set_text(&c->fc.reason, "TLS termination is not available for SOCKS5 here: "
                                "never passed opaque");
    reply_fail(c, SOCKS5_REP_GENERAL, rc == UV_EBUSY ? "too many tunnels" : "tunnel refused");
}

static void connected(struct socks_conn *c, int fd)
{
    const struct policy *pol = egress_env_policy(c->fc.f->egress);
    int rc;

    if (policy_tls_terminates(pol, &c->hs->host, c->fc.port)) {
        hand_to_tls(c, fd);
        return;
    }
    if (policy_tls_needed(pol, &c->hs->host, c->fc.port) && !policy_mode_report(pol)) {
        /* judged as a tunnel to terminate, and a reload since turned that
         * off: a host that needs termination is never passed opaque */
        close(fd);
        set_text(&c->fc.reason, "a host with %s is reachable only through TLS termination",
                 policy_tls_needed_why(pol, &c->hs->host, c->fc.port));
        reply_fail(c, SOCKS5_REP_NOT_ALLOWED, "tunnel refused");
        return;
    }

    rc = relay_open_b(&c->relay, fd);
    if (rc < 0) {
        set_text(&c->fc.reason, "cannot adopt the upstream socket: %s",
                 uv_strerror(rc));
        reply_fail(c, SOCKS5_REP_GENERAL, "internal error");
        return;
    }
    socks5_reply(c->reply_out, SOCKS5_REP_SUCCEEDED);
    c->fc.code = SOCKS5_REP_SUCCEEDED;
    rc = client_write(c, &c->reply_req, c->reply_out, SOCKS5_REPLY_LEN, on_success_written);
    if (rc == 1) { /* written: no callback */
        c->hs_done = 1;
        hs_release(c);
        rc = 0;
    }
    if (rc == 0 && c->early_len > 0)
        rc = early_write(c);
    frontend_conn_timer_close(&c->fc); /* the relay has a timer of its own */
    if (rc == 0)
        rc = relay_start(&c->relay, c->fc.f->idle_timeout_ms);
    if (rc < 0) {
        conn_close(c, "relay failed to start");
        return;
    }
    set_state(c, SOCKS_ST_RELAY);
}

static uint8_t reply_code(const struct egress_outcome *o)
{
    switch (o->result) {
    case EGRESS_CONNECTED:
        return SOCKS5_REP_SUCCEEDED;
    case EGRESS_DENIED:
        return SOCKS5_REP_NOT_ALLOWED;
    case EGRESS_DNS_FAILED:
        return SOCKS5_REP_HOST_UNREACH;
    case EGRESS_DNS_TIMEOUT:
    case EGRESS_DIAL_TIMEOUT:
        return SOCKS5_REP_TTL_EXPIRED;
    case EGRESS_REFUSED:
        return SOCKS5_REP_REFUSED;
    case EGRESS_UNREACHABLE:
        return o->status == UV_ENETUNREACH ? SOCKS5_REP_NET_UNREACH : SOCKS5_REP_HOST_UNREACH;
    case EGRESS_ERROR:
        break;
    }
    return SOCKS5_REP_GENERAL;
}

static void on_egress(void *arg, const struct egress_outcome *o)
{
    struct socks_conn *c = arg;
    uint8_t code;

    c->req = NULL;
    frontend_conn_note(&c->fc, o);
    code = reply_code(o);
    c->fc.code = code;
    frontend_conn_emit(&c->fc, CONNLOG_DECISION);
    if (o->result == EGRESS_CONNECTED) {
        connected(c, o->fd);
        return;
    }
    reply_fail(c, code, egress_result_str(o->result));
}

/* ------------------------------------------------------------------------ */
/* The request                                                               */

static int request_host(struct socks_conn *c, const struct socks5_request *q, const char **why)
{
    char text[INET6_ADDRSTRLEN];

    switch (q->atyp) {
    case SOCKS5_ATYP_IPV4:
        inet_ntop(AF_INET, q->addr, text, sizeof(text));
        return policy_host_normalize(text, strlen(text), &c->hs->host, why);
    case SOCKS5_ATYP_IPV6:
        inet_ntop(AF_INET6, q->addr, text, sizeof(text));
        return policy_host_normalize(text, strlen(text), &c->hs->host, why);
    default:
        return policy_host_normalize((const char *)q->addr, q->addr_len, &c->hs->host, why);
    }
}

static void request(struct socks_conn *c)
{
    const struct socks5_request *q = &c->hs->parser.req;
    const struct policy *pol;
    struct policy_request prq;
    const char *why = NULL;
    int rc, term;

    frontend_conn_timer_set(&c->fc, NULL, 0);
    if (c->overloaded) {
        set_text(&c->fc.reason, "too many connections");
        reply_fail(c, SOCKS5_REP_GENERAL, "over the connection limit");
        return;
    }
    if (request_host(c, q, &why) < 0) {
        set_text(&c->fc.reason, "bad destination host: %s", why);
        reply_fail(c, SOCKS5_REP_GENERAL, "bad destination host");
        return;
    }
    c->host = strdup(c->hs->host.name);
    c->fc.host = c->host;
    c->fc.port = q->port;
    if (q->port == 0) {
        set_text(&c->fc.reason, "destination port 0");
        reply_fail(c, SOCKS5_REP_GENERAL, "bad destination port");
        return;
    }
    pol = egress_env_policy(c->fc.f->egress);
    term = c->fc.f->tls_adopt != NULL && policy_tls_terminates(pol, &c->hs->host, c->fc.port);
    if (!term && policy_http_opts(pol)->refuse_opaque_tunnels) {
        set_text(&c->fc.reason, "tunnels are refused (network.refuseOpaqueTunnels)");
        reply_fail(c, SOCKS5_REP_GENERAL, "tunnel refused");
        return;
    }
    /* to be terminated: request rules judge the requests inside (method NULL) */
    memset(&prq, 0, sizeof(prq));
    set_state(c, SOCKS_ST_EGRESS);
    rc = egress_start_request(c->fc.f->egress, &c->hs->host, c->fc.port, term ? &prq : NULL,
                              "socks5", c->fc.client, on_egress, c, &c->req);
    if (rc < 0) {
        c->req = NULL;
        set_text(&c->fc.reason, "%s", uv_strerror(rc));
        reply_fail(c, SOCKS5_REP_GENERAL, "internal error");
    }
}

/* ------------------------------------------------------------------------ */
/* The handshake                                                             */

static void handshake_error(struct socks_conn *c, enum socks5_result res)
{
    uint8_t out[SOCKS5_REPLY_LEN];
    size_t n = socks5_error_reply(res, out);

    set_text(&c->fc.reason, "%s", socks5_result_str(res));
    if (res == SOCKS5_ERR_CMD) { /* the request is well-formed: name its target in the log */
        const char *why;
        if (request_host(c, &c->hs->parser.req, &why) == 0) {
            c->host = strdup(c->hs->host.name);
            c->fc.host = c->host;
            c->fc.port = c->hs->parser.req.port;
        }
    }
    if (n == 0) {
        conn_close(c, "not a socks5 client");
        return;
    }
    memcpy(c->reply_out, out, n);
    if (n == SOCKS5_REPLY_LEN)
        c->fc.code = out[1];
    if (client_write(c, &c->reply_req, c->reply_out, n, on_handshake_write) < 0) {
        conn_close(c, "client write failed");
        return;
    }
    close_after_writes(c, res == SOCKS5_ERR_SOCKS4 ? "socks4 client refused" : "bad request");
}

/* Feeds what was read; returns when it needs more, or the state changed. */
static void feed(struct socks_conn *c, const uint8_t *data, size_t len)
{
    while (c->state == SOCKS_ST_HANDSHAKE) {
        size_t used = 0;
        enum socks5_result res = socks5_feed(&c->hs->parser, data, len, &used);

        data += used;
        len -= used;
        switch (res) {
        case SOCKS5_NEED_MORE:
            return;
        case SOCKS5_GREETING_DONE:
            socks5_method_reply(c->hs->method_out, c->hs->parser.method);
            if (hs_write(c, &c->hs->method_req, c->hs->method_out, 2) < 0) {
                conn_close(c, "client write failed");
                return;
            }
            if (c->hs->parser.method == SOCKS5_METHOD_NONE) {
                set_text(&c->fc.reason,
                         c->fc.f->auth_user != NULL ? "client offers no username/password auth"
                                                 : "client offers no acceptable method");
                close_after_writes(c, "no acceptable auth method");
                return;
            }
            break;
        case SOCKS5_AUTH_DONE: {
            int ok = frontend_auth_ok(c->fc.f, c->hs->parser.user, c->hs->parser.user_len, c->hs->parser.pass,
                                      c->hs->parser.pass_len);
            socks5_auth_result(&c->hs->parser, ok);
            socks5_auth_reply(c->hs->auth_out, ok);
            if (hs_write(c, &c->hs->auth_req, c->hs->auth_out, 2) < 0) {
                conn_close(c, "client write failed");
                return;
            }
            if (!ok) {
                set_text(&c->fc.reason, "wrong username or password");
                close_after_writes(c, "authentication failed");
                return;
            }
            break;
        }
        case SOCKS5_REQUEST_DONE:
            /* reading stays on: see egress_read() */
            if (len > 0) {
                c->early = malloc(len);
                if (c->early == NULL) {
                    conn_close(c, "out of memory");
                    return;
                }
                memcpy(c->early, data, len);
                c->early_len = len;
            }
            request(c);
            return;
        default:
            handshake_error(c, res);
            return;
        }
    }
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct socks_conn *c = h->data;

    (void)suggested;
    if (c->hs == NULL) { /* lingering after the tunnel was up: never happens, be safe */
        *buf = uv_buf_init(NULL, 0);
        return;
    }
    *buf = uv_buf_init((char *)c->hs->rbuf, sizeof(c->hs->rbuf));
}

/* The client sent something while its request is being decided. Reading
 * stays on through EGRESS so that the relay can take the stream over as it
 * is (relay_start), but the first thing that comes stops it:
 *   - bytes join the early data (forwarded once the tunnel is up); the
 *     relay resumes reading;
 *   - EOF: libuv stopped reading; the relay reads the EOF again (a socket
 *     keeps returning it) and half-closes as usual;
 *   - an error (a reset): the client is gone for good, so the connection
 *     ends now, cancelling its ask, lookup or dial (waiting for them would
 *     hold the descriptor up to the ask timeout for nobody). */
static void egress_read(struct socks_conn *c, ssize_t nread)
{
    uint8_t *p;

    if (nread == 0 || nread == UV_EOF)
        return;
    if (nread < 0) {
        if (c->fc.end == NULL)
            frontend_conn_end_fmt(&c->fc, "client error: %s", uv_err_name((int)nread));
        conn_close(c, c->fc.end);
        return;
    }
    uv_read_stop(relay_client(&c->relay));
    p = realloc(c->early, c->early_len + (size_t)nread);
    if (p == NULL) {
        conn_close(c, "out of memory");
        return;
    }
    memcpy(p + c->early_len, c->hs->rbuf, (size_t)nread);
    c->early = p;
    c->early_len += (size_t)nread;
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct socks_conn *c = s->data;

    (void)buf;
    if (c->state == SOCKS_ST_EGRESS) {
        egress_read(c, nread);
        return;
    }
    if (c->state != SOCKS_ST_HANDSHAKE)
        return;
    if (nread == 0)
        return;
    if (nread < 0) {
        set_text(&c->fc.reason, "client went away during the handshake");
        conn_close(c, nread == UV_EOF ? "client closed during handshake" : "client error");
        return;
    }
    feed(c, c->hs->rbuf, (size_t)nread);
}

static void on_handshake_timeout(uv_timer_t *t)
{
    struct socks_conn *c = container_of(frontend_conn_of_timer(t), struct socks_conn, fc);

    if (c->state != SOCKS_ST_HANDSHAKE)
        return;
    set_text(&c->fc.reason, "no complete request within %u ms",
             c->fc.f->handshake_timeout_ms);
    conn_close(c, "handshake timeout");
}

int socks_session_accept(struct frontend *f, struct listener *l, int overloaded)
{
    struct socks_conn *c = calloc(1, sizeof(*c));
    int kind = listener_kind(l);
    int rc;

    if (c == NULL)
        return UV_ENOMEM; /* the caller pauses accepting */
    c->hs = calloc(1, sizeof(*c->hs));
    if (c->hs == NULL) {
        free(c);
        return UV_ENOMEM;
    }
    c->overloaded = overloaded;
    c->fc.force_close = force_close;
    c->fc.bytes = conn_bytes;
    c->fc.release = release;
    if (frontend_conn_start(f, &c->fc, "socks5") < 0) {
        free(c->hs);
        free(c);
        return UV_ENOMEM;
    }
    relay_init(f->loop, &c->relay, (enum relay_kind)kind, RELAY_TCP, on_relay_closed, c);
    relay_client(&c->relay)->data = c; /* our read callbacks find c there */
    set_state(c, SOCKS_ST_HANDSHAKE);
    rc = listener_accept(l, relay_client(&c->relay));
    if (rc < 0) {
        snprintf(c->fc.client, sizeof(c->fc.client), "-");
        conn_close(c, "accept failed");
        return rc;
    }
    common_peer_name(relay_client(&c->relay), kind == RELAY_PIPE, c->fc.client, sizeof(c->fc.client));
    if (listener_nodelay(l))
        relay_client_nodelay(&c->relay);
    socks5_parser_init(&c->hs->parser, f->auth_user != NULL);
    rc = uv_read_start(relay_client(&c->relay), on_alloc, on_read);
    if (rc < 0) {
        conn_close(c, "client read failed");
        return 0;
    }
    frontend_conn_timer_set(&c->fc, on_handshake_timeout, f->handshake_timeout_ms);
    return 0;
}
