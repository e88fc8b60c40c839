/* proxy/admin.c - the admin listener of `sluice proxy` (--admin, off by
 * default): a minimal HTTP/1.1 server on llhttp for operators, answering
 * GET /healthz, /readyz and /metrics (Prometheus text format 0.0.4). It
 * never proxies. At most ADMIN_MAX_CONNS connections, ADMIN_MAX_REQUEST
 * bytes per request, ADMIN_TIMEOUT_MS per request and between requests. */
#include "proxy/server-int.h"

#include "common/common.h"

#include <llhttp.h>
#include <stdlib.h>
#include <string.h>

#define ADMIN_MAX_CONNS 64            /* admin connections at once; more are closed */
#define ADMIN_MAX_REQUEST (16 * 1024) /* bytes of one admin request */
#define ADMIN_TIMEOUT_MS 10000        /* per admin request, and idle kept admin connections */

struct admin_conn {
    union bridge_stream u;
    uv_timer_t timer;
    uv_shutdown_t shutdown_req;
    llhttp_t parser;
    struct proxy_srv *srv;
    struct admin_conn *prev, *next;
    size_t req_bytes; /* of the request being read */
    char url[256];
    size_t url_len;
    int nclose;             /* handles still closing */
    unsigned url_long : 1;  /* the target did not fit url */
    unsigned done : 1;      /* the last answer is queued: nothing more is read */
    unsigned closing : 1;
};

static void admin_closed(uv_handle_t *h)
{
    struct admin_conn *a = h->data;

    if (--a->nclose == 0)
        free(a);
}

static void admin_close(struct admin_conn *a)
{
    struct admin *ad = &a->srv->admin;

    if (a->closing)
        return;
    a->closing = 1;
    a->done = 1;
    if (a->prev != NULL)
        a->prev->next = a->next;
    else
        ad->conns = a->next;
    if (a->next != NULL)
        a->next->prev = a->prev;
    ad->nconns--;
    a->nclose = 2;
    uv_close(&a->u.h, admin_closed);
    uv_close((uv_handle_t *)&a->timer, admin_closed);
}

static void admin_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void admin_timeout(uv_timer_t *t);

static void admin_linger_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    (void)buf;
    if (nread < 0)
        admin_close(s->data);
}

/* Our FIN is out after the last answer: read and drop what the client still
 * sends until its EOF or a second, so unread bytes do not turn the close
 * into a reset that destroys the answer before the client reads it. */
static void admin_shut(uv_shutdown_t *req, int status)
{
    struct admin_conn *a = req->data;

    if (a->closing)
        return;
    if (status < 0 || uv_read_start(&a->u.s, admin_alloc, admin_linger_read) < 0) {
        admin_close(a);
        return;
    }
    uv_timer_start(&a->timer, admin_timeout, 1000, 0);
}

/* The answer just queued is the last: our FIN goes after it, then close. */
static void admin_end(struct admin_conn *a)
{
    if (a->closing)
        return;
    a->done = 1;
    (void)uv_read_stop(&a->u.s);
    a->shutdown_req.data = a;
    if (uv_shutdown(&a->shutdown_req, &a->u.s, admin_shut) < 0)
        admin_close(a);
}

struct admin_wr {
    uv_write_t req;
    struct admin_conn *a;
    char data[];
};

static void admin_written(uv_write_t *req, int status)
{
    struct admin_wr *wr = (struct admin_wr *)(void *)req;
    struct admin_conn *a = wr->a;

    free(wr);
    if (status < 0)
        admin_close(a);
}

static void admin_respond(struct admin_conn *a, int status, const char *phrase, const char *ctype,
                          const char *body, size_t blen, const char *extra, int keep)
{
    char head[512];
    struct admin_wr *wr;
    uv_buf_t b;
    int hl;

    if (a->closing)
        return;
    hl = snprintf(head, sizeof(head),
                  "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                  "Cache-Control: no-store\r\n%sConnection: %s\r\n\r\n",
                  status, phrase, ctype, blen, extra != NULL ? extra : "",
                  keep ? "keep-alive" : "close");
    if (hl < 0 || (size_t)hl >= sizeof(head)) {
        admin_close(a);
        return;
    }
    wr = malloc(sizeof(*wr) + (size_t)hl + blen);
    if (wr == NULL) {
        admin_close(a);
        return;
    }
    wr->a = a;
    memcpy(wr->data, head, (size_t)hl);
    if (blen > 0)
        memcpy(wr->data + hl, body, blen);
    b = uv_buf_init(wr->data, (unsigned)((size_t)hl + blen));
    if (uv_write(&wr->req, &a->u.s, &b, 1, admin_written) < 0) {
        free(wr);
        admin_close(a);
        return;
    }
    if (!keep)
        admin_end(a);
}

static void admin_text(struct admin_conn *a, int status, const char *phrase, const char *text,
                       const char *extra, int keep)
{
    admin_respond(a, status, phrase, "text/plain; charset=utf-8", text, strlen(text), extra, keep);
}

static void admin_route(struct admin_conn *a, int keep)
{
    struct proxy_srv *srv = a->srv;
    size_t n = a->url_len;
    const char *q = memchr(a->url, '?', a->url_len);
    const char *why;

    if (q != NULL)
        n = (size_t)(q - a->url);
    if (llhttp_get_method(&a->parser) != HTTP_GET) {
        admin_text(a, 405, "Method Not Allowed", "method not allowed\n", "Allow: GET\r\n", keep);
        return;
    }
    if (!a->url_long && n == 8 && memcmp(a->url, "/healthz", 8) == 0) {
        admin_text(a, 200, "OK", "ok\n", NULL, keep);
    } else if (!a->url_long && n == 7 && memcmp(a->url, "/readyz", 7) == 0) {
        why = proxy_not_ready(srv);
        if (why == NULL) {
            admin_text(a, 200, "OK", "ready\n", NULL, keep);
        } else {
            char body[120];
            snprintf(body, sizeof(body), "not ready: %s\n", why);
            admin_text(a, 503, "Service Unavailable", body, NULL, keep);
        }
    } else if (!a->url_long && n == 8 && memcmp(a->url, "/metrics", 8) == 0) {
        size_t len = 0;
        char *text = proxy_metrics_text(srv, &len);
        if (text == NULL) {
            admin_text(a, 500, "Internal Server Error", "out of memory\n", NULL, 0);
            return;
        }
        admin_respond(a, 200, "OK", "text/plain; version=0.0.4; charset=utf-8", text, len, NULL,
                      keep);
        free(text);
    } else {
        admin_text(a, 404, "Not Found", "not found\n", NULL, keep);
    }
}

static int admin_on_message_begin(llhttp_t *p)
{
    struct admin_conn *a = p->data;

    a->url_len = 0;
    a->url_long = 0;
    return 0;
}

static int admin_on_url(llhttp_t *p, const char *at, size_t len)
{
    struct admin_conn *a = p->data;

    if (len > sizeof(a->url) - a->url_len) {
        a->url_long = 1;
        return 0;
    }
    memcpy(a->url + a->url_len, at, len);
    a->url_len += len;
    return 0;
}

static void admin_timeout(uv_timer_t *t)
{
    admin_close(t->data);
}

static int admin_on_message_complete(llhttp_t *p)
{
    struct admin_conn *a = p->data;
    /* never an upgrade or a tunnel here: CONNECT and Upgrade end it */
    int keep = llhttp_should_keep_alive(p) && !p->upgrade && p->method != HTTP_CONNECT;

    admin_route(a, keep);
    if (!keep || a->done)
        return HPE_PAUSED;
    a->req_bytes = 0;
    uv_timer_start(&a->timer, admin_timeout, ADMIN_TIMEOUT_MS, 0);
    return 0;
}

static const llhttp_settings_t admin_settings = {
    .on_message_begin = admin_on_message_begin,
    .on_url = admin_on_url,
    .on_message_complete = admin_on_message_complete,
};

static void admin_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    static char in[4096]; /* parsed at once in admin_read */

    (void)h;
    (void)suggested;
    *buf = uv_buf_init(in, sizeof(in));
}

static void admin_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct admin_conn *a = s->data;
    llhttp_errno_t e;

    if (a->closing || a->done || nread == 0)
        return;
    if (nread < 0) {
        /* EOF: answers still queued go out before our FIN */
        if (nread == UV_EOF)
            admin_end(a);
        else
            admin_close(a);
        return;
    }
    a->req_bytes += (size_t)nread;
    if (a->req_bytes > ADMIN_MAX_REQUEST) {
        admin_text(a, 431, "Request Header Fields Too Large", "request too large\n", NULL, 0);
        return;
    }
    e = llhttp_execute(&a->parser, buf->base, (size_t)nread);
    if (e == HPE_OK || a->done)
        return;
    admin_text(a, 400, "Bad Request", "bad request\n", NULL, 0);
}

static void on_admin_accept(struct listener *l, void *arg)
{
    struct proxy_srv *srv = arg;
    struct admin *ad = &srv->admin;
    struct admin_conn *a = calloc(1, sizeof(*a));
    int rc;

    if (a == NULL)
        return; /* held by the listener until the next connection */
    if (listener_kind(l) == RELAY_PIPE)
        rc = uv_pipe_init(&srv->loop, &a->u.pipe, 0);
    else
        rc = uv_tcp_init(&srv->loop, &a->u.tcp);
    if (rc < 0) {
        free(a);
        return;
    }
    uv_timer_init(&srv->loop, &a->timer);
    a->srv = srv;
    a->u.h.data = a;
    a->timer.data = a;
    a->next = ad->conns;
    if (ad->conns != NULL)
        ad->conns->prev = a;
    ad->conns = a;
    ad->nconns++;
    rc = listener_accept(l, &a->u.s);
    if (rc < 0 || ad->nconns > ADMIN_MAX_CONNS) {
        admin_close(a);
        return;
    }
    if (listener_kind(l) == RELAY_TCP)
        (void)uv_tcp_nodelay(&a->u.tcp, 1);
    llhttp_init(&a->parser, HTTP_REQUEST, &admin_settings);
    a->parser.data = a;
    uv_timer_start(&a->timer, admin_timeout, ADMIN_TIMEOUT_MS, 0);
    if (uv_read_start(&a->u.s, admin_alloc, admin_read) < 0)
        admin_close(a);
}

void proxy_admin_close(struct proxy_srv *srv)
{
    if (srv->admin.l != NULL)
        listener_close(srv->admin.l, NULL, NULL);
    srv->admin.l = NULL;
    while (srv->admin.conns != NULL)
        admin_close(srv->admin.conns);
}

int proxy_admin_open(struct proxy_srv *srv)
{
    const char *why = NULL;
    char ep[ENDPOINT_STR_MAX];
    int rc;

    if (!srv->admin.on)
        return 0;
    rc = listener_open(&srv->admin.l, &srv->loop, &srv->admin.ep, on_admin_accept, srv, &why);
    if (rc < 0) {
        srv->admin.l = NULL;
        fprintf(stderr, "sluice: proxy: cannot listen on %s (admin): %s\n",
                endpoint_str(&srv->admin.ep, ep, sizeof(ep)), why != NULL ? why : uv_strerror(rc));
        return -1;
    }
    return 0;
}
