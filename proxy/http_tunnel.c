/* proxy/http_tunnel.c - tunnels: a CONNECT's 200, or an Upgrade after 101,
 * then the relay takes the bytes over. */
#include "proxy/http_int.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Tunnels: CONNECT, and Upgrade after 101                                   */

static void tunnel_go(struct http_conn *c)
{
    struct http_work *w = c->w;
    int rc;

    if (w->in_len > 0) { /* early bytes, held until now */
        uv_buf_t b = uv_buf_init(w->in, (unsigned)w->in_len);
        rc = http_stream_send(c, NULL, relay_upstream(&c->relay), &b, 1, http_on_b_write);
        if (rc < 0) {
            http_conn_close(c, "upstream write failed");
            return;
        }
        c->bytes_up += w->in_len;
    }
    http_timer_set(c, TIMER_NONE, 0);
    frontend_conn_timer_close(&c->fc); /* the relay has a timer of its own */
    /* client reads stay on: relay_start() takes a reading stream over */
    http_work_free(c);
    http_set_state(c, HTTP_ST_TUNNEL);
    rc = relay_start(&c->relay, c->fc.f->idle_timeout_ms);
    if (rc < 0)
        http_conn_close(c, "relay failed to start");
}

/* SNIFF found no TLS: the tunnel the 200 announced (proxy/http_tls.c). */
void http_tunnel_opaque(struct http_conn *c, int fd)
{
    char why[160];
    int rc = relay_open_b(&c->relay, fd);

    if (rc < 0) {
        snprintf(why, sizeof(why), "cannot adopt the upstream socket: %s", uv_strerror(rc));
        http_set_reason(c, why);
        http_conn_close(c, "internal error");
        return;
    }
    http_set_state(c, HTTP_ST_EGRESS); /* tunnel_go moves on to TUNNEL */
    tunnel_go(c);
}

void http_tunnel_start(struct http_conn *c, int fd)
{
    static const char ok[] = "HTTP/1.1 200 Connection Established\r\n\r\n";
    uv_buf_t b = uv_buf_init((char *)(uintptr_t)ok, sizeof(ok) - 1);
    char why[300];
    int rc;

    if (http_tls_wanted(c)) {
        http_tls_connect(c, fd);
        return;
    }
    if (policy_tls_needed(egress_env_policy(c->fc.f->egress), &c->host, c->fc.port) &&
        !policy_mode_report(egress_env_policy(c->fc.f->egress))) {
        /* a host that needs termination (request rules, credentials) and
         * is not terminated (excludeDomains, or a reload since turned it
         * off) is never passed opaque (report mode lets it through, as its
         * verdict did) */
        close(fd);
        snprintf(why, sizeof(why),
                 "a host with %s is reachable only through TLS termination (excludeDomains, or a "
                 "reload, turned it off)",
                 policy_tls_needed_why(egress_env_policy(c->fc.f->egress), &c->host, c->fc.port));
        http_refuse(c, 403, why, 1, "tunnel refused");
        return;
    }
    rc = relay_open_b(&c->relay, fd);
    if (rc < 0) {
        snprintf(why, sizeof(why), "cannot adopt the upstream socket: %s", uv_strerror(rc));
        http_set_reason(c, why);
        http_reply_error(c, 502, "proxy_internal_error", why, 1, "internal error");
        return;
    }
    c->fc.code = 200;
    if (http_client_send(c, &b, 1) < 0) {
        http_conn_close(c, "client write failed");
        return;
    }
    tunnel_go(c);
}

/* A 101 to an upgrade request: the upstream socket moves to the relay (a
 * duplicate of its descriptor; the old handle closes), the 101 and the
 * bytes after it go to the client, the client's bytes after its request go
 * upstream, and the relay takes over. */
void http_upgrade_start(struct http_conn *c, const struct http_response *rs, size_t end)
{
    struct http_work *w = c->w;
    struct http_up *u = w->up;
    uv_os_fd_t fd;
    char *head = NULL;
    size_t n;
    int nfd, rc;
    uv_buf_t b[2];

    if (uv_fileno((uv_handle_t *)&u->tcp, &fd) != 0 || (nfd = fcntl(fd, F_DUPFD_CLOEXEC, 3)) < 0) {
        http_set_reason(c, "cannot take over the upstream socket");
        http_reply_error(c, 502, "proxy_internal_error", "cannot take over the upstream socket", 1,
                         "internal error");
        return;
    }
    http_up_close(c, u); /* closes fd; the socket lives on in nfd */
    rc = relay_open_b(&c->relay, nfd);
    if (rc < 0) {
        http_set_reason(c, "cannot adopt the upstream socket");
        http_reply_error(c, 502, "proxy_internal_error", "cannot adopt the upstream socket", 1,
                         "internal error");
        return;
    }
    n = http_response_build(w->uin, rs, HTTP_OUT_UPGRADE, NULL, 0);
    head = malloc(n);
    if (head == NULL) {
        http_conn_close(c, "out of memory");
        return;
    }
    (void)http_response_build(w->uin, rs, HTTP_OUT_UPGRADE, head, n);
    b[0] = uv_buf_init(head, (unsigned)n);
    b[1] = uv_buf_init(w->uin + end, (unsigned)(w->uin_len - end));
    c->fc.code = 101;
    c->bytes_down += n + (w->uin_len - end);
    rc = http_client_send(c, b, 2);
    free(head);
    if (rc < 0) {
        http_conn_close(c, "client write failed");
        return;
    }
    tunnel_go(c);
}
