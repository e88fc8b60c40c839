/* proxy/http_forward.c - forwarding one absolute-form request and its
 * response: the llhttp body framing, upstream connections and their reuse,
 * request bodies up and response heads and bodies down. */
#include "proxy/http_int.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void process_upstream(struct http_conn *c);

static void set_check(struct http_conn *c, enum http_check_phase p)
{
    static const char *const names[] = {"off", "head", "done"};
    struct http_work *w = c->w;

    assert(p == CHECK_OFF || p > w->check);
    if (w->check != p)
        frontend_conn_debug(&c->fc, "head check %s -> %s", names[w->check], names[p]);
    w->check = p;
}
static void exchange_end(struct http_conn *c);

/* ------------------------------------------------------------------------ */
/* llhttp callbacks                                                          */

static int req_on_body(llhttp_t *p, const char *at, size_t len)
{
    struct http_conn *c = p->data;
    struct http_work *w = c->w;
    int rc;

    if (w->check != CHECK_OFF || w->send_err != 0 || w->up_werr || w->up == NULL)
        return 0;
    rc = http_cred_body_up(c, at, len);
    if (rc == 0)
        rc = http_send_body(c, w->up, w->req_body == HTTP_BODY_CHUNKED, at, len);
    if (rc < 0)
        w->send_err = rc;
    c->bytes_up += len;
    return 0;
}

static int req_on_message_complete(llhttp_t *p)
{
    struct http_conn *c = p->data;
    struct http_work *w = c->w;

    if (w->check != CHECK_OFF) {
        set_check(c, CHECK_DONE);
        return HPE_PAUSED;
    }
    if (w->up != NULL && w->send_err == 0 && !w->up_werr) {
        int rc = http_cred_body_up_end(c);
        if (rc < 0)
            w->send_err = rc;
    }
    if (w->req_body == HTTP_BODY_CHUNKED && w->up != NULL && w->send_err == 0 && !w->up_werr &&
        !http_cred_cut(c)) {
        int rc = http_send_last_chunk(c, w->up);
        if (rc < 0)
            w->send_err = rc;
    }
    http_set_req(c, REQ_DONE);
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

    if (w->check != CHECK_OFF || w->send_err != 0)
        return 0;
    rc = http_cred_body_down(c, at, len);
    if (rc == 0)
        rc = http_send_body(c, NULL, w->chunk_out, at, len);
    if (rc < 0)
        w->send_err = rc;
    c->bytes_down += len;
    if (w->body_counted)
        w->body_left -= len < w->body_left ? len : w->body_left;
    return 0;
}

static int resp_on_message_complete(llhttp_t *p)
{
    struct http_conn *c = p->data;
    struct http_work *w = c->w;

    if (w->check != CHECK_OFF) {
        set_check(c, CHECK_DONE);
        return HPE_PAUSED;
    }
    if (w->send_err == 0) {
        int rc = http_cred_body_down_end(c);
        if (rc < 0)
            w->send_err = rc;
    }
    if (w->chunk_out && w->send_err == 0) {
        int rc = http_send_last_chunk(c, NULL);
        if (rc < 0)
            w->send_err = rc;
    }
    http_set_resp(c, RESP_DONE);
    return HPE_PAUSED;
}

const llhttp_settings_t http_req_settings = {
    .on_body = req_on_body,
    .on_message_complete = req_on_message_complete,
};

const llhttp_settings_t http_resp_settings = {
    .on_headers_complete = resp_on_headers_complete,
    .on_body = resp_on_body,
    .on_message_complete = resp_on_message_complete,
};

/* Feeds exactly one head to a fresh parser and checks that llhttp saw the
 * same head with the same framing as head.c. 0, or UV_EPROTO on a
 * disagreement. */
int http_llhttp_check_head(struct http_conn *c, llhttp_t *p, const llhttp_settings_t *st,
                           llhttp_type_t type, const char *head, size_t len, enum http_body body,
                           uint64_t cl)
{
    struct http_work *w = c->w;
    llhttp_errno_t e;
    int ok, done;

    llhttp_init(p, type, st);
    p->data = c;
    set_check(c, CHECK_HEAD);
    e = llhttp_execute(p, head, len);
    done = w->check == CHECK_DONE;
    set_check(c, CHECK_OFF);
    switch (body) {
    case HTTP_BODY_NONE:
        ok = e == HPE_PAUSED && done && llhttp_get_error_pos(p) == head + len;
        break;
    case HTTP_BODY_LENGTH:
        ok = e == HPE_OK && !done && (p->flags & F_CONTENT_LENGTH) &&
             !(p->flags & F_CHUNKED) && p->content_length == cl;
        break;
    case HTTP_BODY_CHUNKED:
        ok = e == HPE_OK && !done && (p->flags & F_CHUNKED);
        break;
    case HTTP_BODY_EOF:
    default:
        ok = e == HPE_OK && !done && llhttp_message_needs_eof(p);
        break;
    }
    return ok ? 0 : UV_EPROTO;
}

/* ------------------------------------------------------------------------ */
/* Upstream connections                                                      */

/* Room for the upstream's next bytes: w->uin, or scratch when nobody
 * waits for them (an idle upstream: only its close matters). */
void http_up_alloc(struct http_up *u, uv_buf_t *buf)
{
    struct http_conn *c = u->c;
    struct http_work *w = c != NULL ? c->w : NULL;

    if (u->phase == UP_IDLE || w == NULL || w->up != u) {
        *buf = uv_buf_init(http_scratch, sizeof(http_scratch));
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

static void on_up_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    http_up_alloc(container_of(h, struct http_up, tcp), buf);
}

static void upstream_gone(struct http_conn *c, int status);

static void on_up_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    (void)buf;
    http_up_got(container_of(s, struct http_up, tcp), nread);
}

/* nread upstream bytes appended (from its socket, or its pump), or its EOF
 * or error. */
void http_up_got(struct http_up *u, ssize_t nread)
{
    struct http_conn *c = u->c;
    struct http_work *w;

    if (c == NULL || u->phase == UP_CLOSING || c->state == HTTP_ST_CLOSING || nread == 0)
        return;
    w = c->w;
    if (u->phase == UP_IDLE || w == NULL || w->up != u || c->state != HTTP_ST_FORWARD) {
        /* an idle upstream closed, failed or sent bytes nobody asked for */
        http_up_close(c, u);
        return;
    }
    if (nread < 0) {
        upstream_gone(c, (int)nread);
        return;
    }
    w->uin_len += (size_t)nread;
    w->last_io = uv_now(c->fc.f->loop);
    process_upstream(c);
}

void http_up_read_start(struct http_conn *c, struct http_up *u)
{
    int rc;

    if (u->reading)
        return;
    if (u->tio != NULL)
        rc = http_pump_read_start(u->tio);
    else
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
        if (u->tio != NULL)
            http_pump_read_stop(u->tio);
        else
            uv_read_stop((uv_stream_t *)&u->tcp);
        u->reading = 0;
    }
}

/* Bytes queued for the upstream, not yet taken by its socket. */
size_t http_up_queued(struct http_up *u)
{
    if (u->tio != NULL)
        return http_pump_queued(u->tio);
    return uv_stream_get_write_queue_size((uv_stream_t *)&u->tcp);
}

/* A new upstream of c for o (its handle initialised, not open). */
static struct http_up *up_new(struct http_conn *c, const struct egress_outcome *o)
{
    const struct policy_addr *a = &o->addr;
    struct http_up *u = calloc(1, sizeof(*u));

    if (u == NULL)
        return NULL;
    if (uv_tcp_init(c->fc.f->loop, &u->tcp) != 0) {
        free(u);
        return NULL;
    }
    u->c = c;
    snprintf(u->host, sizeof(u->host), "%s", c->host.name);
    u->port = c->fc.port;
    u->addr = *a;
    if (o->parent_http) {
        u->parent = 1;
        snprintf(u->parent_auth, sizeof(u->parent_auth), "%s", o->parent_auth);
    }
    return u;
}

/* A terminated tunnel's upstream: the TLS client pump p on the origin
 * socket is its transport. 0 or UV_ENOMEM (p untouched). */
int http_up_adopt_tls(struct http_conn *c, struct http_tls_pump *p, const struct egress_outcome *o)
{
    struct http_up *u = up_new(c, o);

    if (u == NULL)
        return UV_ENOMEM;
    http_pump_attach_up(p, u);
    c->w->up = u;
    return 0;
}

/* Adopts a dialed socket as the connection's upstream. 0 or UV_E*. */
int http_up_adopt(struct http_conn *c, int fd, const struct egress_outcome *o)
{
    struct http_up *u = up_new(c, o);
    int rc;

    if (u == NULL) {
        close(fd);
        return UV_ENOMEM;
    }
    rc = uv_tcp_open(&u->tcp, fd);
    if (rc < 0) {
        close(fd);
        http_up_close(c, u);
        return rc;
    }
    (void)uv_tcp_nodelay(&u->tcp, 1);
    c->w->up = u;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The exchange: one absolute-form request and its response                  */

void http_feed_request_body(struct http_conn *c)
{
    struct http_work *w = c->w;
    llhttp_errno_t e;
    size_t used;

    if (w->req_phase == REQ_DONE || w->in_len == 0)
        return;
    e = llhttp_execute(&w->reqp, w->in, w->in_len);
    if (http_cred_cut(c)) {
        const char *why = http_cred_refusal(c);
        if (why != NULL && w->resp_phase == RESP_HEAD && http_cred_held(c))
            http_refuse(c, http_cred_refusal_status(c), why, 1,
                        "credential refused"); /* nothing was sent */
        else
            http_conn_close(c, "credential refused"); /* nothing from the placeholder on was sent */
        return;
    }
    if (e == HPE_OK) {
        used = w->in_len;
    } else if (e == HPE_PAUSED && w->req_phase == REQ_DONE) {
        used = (size_t)(llhttp_get_error_pos(&w->reqp) - w->in);
    } else {
        http_set_reason(c, "malformed request body");
        if (w->resp_phase == RESP_HEAD) {
            http_refuse(c, 400, "malformed request body (chunk framing)", 1, "bad request body");
        } else {
            http_conn_close(c, "bad request body");
        }
        return;
    }
    http_consume_in(w, used);
    if (w->send_err != 0) { /* as in http_on_up_write: drop the rest, wait for the upstream */
        w->send_err = 0;
        w->up_werr = 1;
    }
    if (w->req_phase == REQ_DONE) {
        http_client_hold(c);
        return;
    }
    if (w->up != NULL &&
        http_up_queued(w->up) > RELAY_HIGH_WATER) {
        http_client_read_stop(c);
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

/* The request head w->out upstream (in the parent's form through a parent
 * proxy). 0 or UV_E*. */
int http_send_head(struct http_conn *c)
{
    struct http_work *w = c->w;
    struct http_up *u = w->up;
    uv_buf_t b[5] = {uv_buf_init(w->out, (unsigned)w->out_len)};
    char authority[POLICY_HOST_MAX + 32], auth[448];
    unsigned nb = 1;
    size_t sent = w->out_len;
    int rc;

    if (u->parent) {
        nb = parent_form(w, u, authority, sizeof(authority), auth, sizeof(auth), b);
        if (nb == 0)
            return UV_EINVAL;
        sent = 0;
        for (unsigned i = 0; i < nb; i++)
            sent += b[i].len;
    }
    rc = http_up_send(c, u, b, nb);
    c->bytes_up += sent;
    if (!w->reused || w->req_body != HTTP_BODY_NONE) {
        /* kept only for a retry on a fresh connection (upstream_gone) */
        free(w->out);
        w->out = NULL;
        w->out_len = 0;
    }
    return rc;
}

void http_start_exchange(struct http_conn *c)
{
    struct http_work *w = c->w;
    struct http_up *u = w->up;
    int rc;

    http_set_state(c, HTTP_ST_FORWARD);
    http_set_up(c, u, UP_BUSY);
    http_set_req(c, w->req_body == HTTP_BODY_NONE ? REQ_DONE : REQ_BODY);
    http_set_resp(c, RESP_HEAD);
    w->chunk_out = w->close_after = w->up_keep = w->up_junk = w->up_eof = w->up_werr = 0;
    w->body_counted = w->splice_wait = 0;
    w->body_left = 0;
    w->client_paused = w->up_paused = 0;
    w->send_err = 0;
    w->uin_len = 0;
    w->uscan = 0;
    /* a SigV4 request whose body is hashed: the head goes with the body */
    rc = http_cred_held(c) ? 0 : http_send_head(c);
    if (rc < 0) {
        upstream_gone(c, rc);
        return;
    }
    w->last_io = uv_now(c->fc.f->loop);
    http_timer_set(c, TIMER_STALL, c->fc.f->idle_timeout_ms);
    http_up_read_start(c, u);
    if (c->state != HTTP_ST_FORWARD)
        return;
    if (w->req_phase != REQ_DONE) {
        http_feed_request_body(c);
        if (c->state == HTTP_ST_FORWARD && w->req_phase != REQ_DONE && w->client_eof) {
            http_conn_close(c, "client closed mid-request"); /* EOF seen while dialing */
            return;
        }
        if (c->state == HTTP_ST_FORWARD && w->req_phase != REQ_DONE && !w->client_paused)
            http_client_read_start(c);
    }
}

/* The upstream failed before the response was complete. */
static void upstream_gone(struct http_conn *c, int status)
{
    struct http_work *w = c->w;
    char why[160];

    if (c->state != HTTP_ST_FORWARD) {
        http_up_close(c, w != NULL ? w->up : NULL);
        return;
    }
    w->up_eof = 1;
    if (w->resp_phase == RESP_HEAD && w->uin_len == 0 && w->reused && w->out != NULL) {
        /* A kept connection the upstream closed as we reused it: the
         * request (no body) is sent again once, on a new connection. */
        w->reused = 0;
        http_up_close(c, w->up);
        http_start_egress(c);
        return;
    }
    if (w->resp_phase == RESP_HEAD) {
        if (status == UV_EOF)
            snprintf(why, sizeof(why), "the upstream closed the connection %s",
                     w->uin_len > 0 ? "in the middle of the response head" : "without a response");
        else
            snprintf(why, sizeof(why), "the upstream connection failed: %s", uv_err_name(status));
        http_set_reason(c, why);
        http_reply_error(c, 502,
                         status == UV_EOF ? "http_response_incomplete" : "connection_terminated",
                         why, 1, "upstream failed");
        return;
    }
    if (status == UV_EOF && w->resp_phase != RESP_DONE) {
        /* a close-delimited body ends here; any other is cut short */
        w->send_err = 0;
        (void)llhttp_finish(&w->resp);
        if (w->resp_phase == RESP_DONE && w->send_err == 0) {
            exchange_end(c);
            return;
        }
    }
    snprintf(why, sizeof(why), "the upstream connection ended mid-response: %s",
             uv_err_name(status));
    http_set_reason(c, why);
    http_conn_close(c, "upstream failed mid-response");
}

/* A response head that cannot be forwarded: 502 while nothing final went to
 * the client, else the client connection is cut. */
static void upstream_bad(struct http_conn *c, const char *why)
{
    http_set_reason(c, why);
    if (c->w->resp_phase == RESP_HEAD)
        http_reply_error(c, 502, "http_protocol_error", why, 1, "bad upstream response");
    else
        http_conn_close(c, "bad upstream response");
}

/* rt-17: a head echoes as a body does, and the value its request carried
 * may be masked no more (two refreshes since): refused. 1 when so. */
static int head_outlived(struct http_conn *c)
{
    if (!http_cred_outlived(c))
        return 0;
    upstream_bad(c, "the response outlived two refreshes of a credential's value: the value its "
                    "request could have sent is masked no more");
    return 1;
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
        const struct policy_http_opts *ho = policy_http_opts(egress_env_policy(c->fc.f->egress));
        if (ho->nstrip > 0) /* network.stripResponseHeaders */
            reqopt_strip(w->uin, &rs, ho->strip, ho->nstrip);
    }
    w->resp_skip_body = w->is_head;
    if (head_outlived(c))
        return -1;
    if (http_llhttp_check_head(c, &w->resp, &http_resp_settings, HTTP_RESPONSE, w->uin, end,
                               rs.body, rs.content_length) < 0) {
        upstream_bad(c, "ambiguous response head from the upstream");
        return -1;
    }
    if (rs.status < 200) {
        if (rs.status == 101) {
            if (!w->upgrade || !rs.upgrade) {
                upstream_bad(c, "101 from the upstream without an upgrade");
                return -1;
            }
            if (http_cred_masked(c)) { /* rt-12: relayed raw, never masked */
                upstream_bad(c, "an upgraded connection (101) from a credential host: its bytes "
                                "would reach the sandbox unmasked");
                return -1;
            }
            http_upgrade_start(c, &rs, end);
            return -1;
        }
        if (w->client_11) {
            n = http_response_build(w->uin, &rs, 0, NULL, 0);
            head = malloc(n);
            if (head == NULL) {
                http_conn_close(c, "out of memory");
                return -1;
            }
            (void)http_response_build(w->uin, &rs, 0, head, n);
            (void)http_cred_response_head(c, head, n); /* 1xx: no body */
            b = uv_buf_init(head, (unsigned)n);
            rc = http_client_send(c, &b, 1);
            free(head);
            if (rc < 0) {
                http_conn_close(c, "client write failed");
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
    if (!w->client_keep || w->client_eof || w->req_phase != REQ_DONE || w->upgrade || c->fc.f->draining)
        w->close_after = 1;
    if (w->close_after)
        flags |= HTTP_OUT_CLOSE;
    w->up_keep = rs.keep_alive;
    n = http_response_build(w->uin, &rs, flags, NULL, 0);
    head = malloc(n);
    if (head == NULL) {
        http_conn_close(c, "out of memory");
        return -1;
    }
    (void)http_response_build(w->uin, &rs, flags, head, n);
    if (http_cred_response_head(c, head, n) < 0 && rs.body != HTTP_BODY_NONE) {
        free(head);
        upstream_bad(c, "an encoded response (Content-Encoding) from a credential host: sluice "
                        "cannot mask the real value in it");
        return -1;
    }
    /* gathered: the head goes out with the first body bytes, in one write */
    rc = http_out_flush(c);
    if (rc < 0) {
        free(head);
        http_conn_close(c, "client write failed");
        return -1;
    }
    w->ohead = head;
    http_out_add(w, head, n);
    c->fc.code = rs.status;
    c->bytes_down += n;
    w->body_counted = rs.body == HTTP_BODY_LENGTH && !w->resp_skip_body;
    w->body_left = w->body_counted ? rs.content_length : 0;
    http_set_resp(c, RESP_BODY);
    if (rs.body == HTTP_BODY_NONE)
        http_set_resp(c, RESP_DONE);
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
    while (c->state == HTTP_ST_FORWARD && w->resp_phase != RESP_DONE) {
        const char *why = NULL;
        size_t end = 0;
        llhttp_errno_t e;

        if (w->resp_phase == RESP_HEAD) {
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
            http_conn_close(c, "client write failed");
            return;
        }
        if (e == HPE_PAUSED && w->resp_phase == RESP_DONE) {
            if ((size_t)(llhttp_get_error_pos(&w->resp) - w->uin) < w->uin_len)
                w->up_junk = 1; /* bytes after the response: never reuse */
        } else if (e != HPE_OK) {
            http_set_reason(c, "malformed response body from the upstream");
            http_conn_close(c, "bad upstream response body");
            return;
        }
        w->uin_len = 0;
    }
    if (c->state != HTTP_ST_FORWARD)
        return;
    /* what this read produced for the client, in one write, before w->uin
     * is reused or freed */
    if (http_out_flush(c) < 0) {
        http_conn_close(c, "client write failed");
        return;
    }
    if (w->resp_phase == RESP_DONE) {
        exchange_end(c);
        return;
    }
    if (http_splice_candidate(c)) {
        up_read_stop(w->up);
        w->splice_wait = 1;
        if (http_client_queued(c) == 0)
            http_splice_try(c); /* else once the client's queue is empty */
        return;
    }
    if (w->up != NULL && http_client_queued(c) > RELAY_HIGH_WATER) {
        up_read_stop(w->up);
        w->up_paused = 1;
    }
}

/* The splice ended: 0, the body is complete (the count reached, as if
 * llhttp had seen it end); UV_ENOSYS, splice(2) does not work here and took
 * nothing (the copy path goes on); else the upstream's EOF or error. */
void http_forward_splice_done(struct http_conn *c, int status)
{
    struct http_work *w = c->w;

    if (w == NULL || c->state != HTTP_ST_FORWARD)
        return;
    if (status == UV_ENOSYS) {
        http_up_read_start(c, w->up);
        return;
    }
    if (status < 0) {
        upstream_gone(c, status);
        return;
    }
    w->body_left = 0;
    http_set_resp(c, RESP_DONE);
    exchange_end(c);
}

static void exchange_end(struct http_conn *c)
{
    struct http_work *w = c->w;
    struct http_up *u = w->up;

    if (http_out_flush(c) < 0) { /* body pieces point into w->uin, freed below */
        http_conn_close(c, "client write failed");
        return;
    }
    http_timer_set(c, TIMER_NONE, 0);
    free(w->uin);
    w->uin = NULL;
    w->uin_len = 0;
    free(w->out);
    w->out = NULL;
    w->out_len = 0;
    if (u != NULL && w->up_keep && !w->up_junk && !w->up_eof && !w->close_after && w->req_phase == REQ_DONE) {
        http_set_up(c, u, UP_IDLE); /* still read: its close or stray bytes retire it */
        http_up_read_start(c, u);
    } else {
        http_up_close(c, u);
    }
    if (w->close_after || w->client_eof) {
        http_close_gracefully(c, w->client_eof ? "client closed" : "done");
        return;
    }
    http_next_request(c);
}

