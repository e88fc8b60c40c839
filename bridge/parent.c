/* bridge/parent.c - a connection through the parent (corporate) proxy.
 *
 * Called by the egress pipeline (egress.c) after the policy, the ask handler
 * and the resolved-address guard have allowed a destination: instead of
 * dialing the vetted address, connect to the parent proxy (its name resolved
 * with the server's resolver; it is configuration, not a destination, so the
 * guard does not judge it), send
 *
 *   CONNECT AUTHORITY HTTP/1.1
 *   Host: AUTHORITY
 *   Proxy-Authorization: Basic ...      (when the URL had credentials)
 *
 * and wait for a 2xx answer. AUTHORITY is the destination as sluice judged
 * it (canonical name or address, and port): nothing the client sent beyond
 * that reaches the parent before the tunnel is up. The answer's head is
 * consumed exactly (MSG_PEEK, then a read of its length), so bytes the
 * destination sends first (an SSH or SMTP banner) stay in the socket for
 * the relay. The whole exchange is bounded by timeout_ms.
 *
 * Plain HTTP (no authority) is not tunnelled: a default Squid refuses
 * CONNECT to any port but 443, so the connection to the parent is handed
 * back as soon as it is made, and the HTTP front end sends each request to
 * the parent in absolute form with the parent's Proxy-Authorization.
 *
 * network.mitmProxy (srt 0.0.83) uses the same exchange with a proxy on a
 * host Unix socket (policy_parent_proxy.unix_path): no name to resolve, a
 * connect() that succeeds or fails at once, no Proxy-Authorization.
 *
 * The callback runs once, from a close callback (never inside
 * parent_dial_start()), unless parent_dial_cancel() ran first.
 */
#include "bridge/bridge.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define PARENT_HEAD_MAX 8192

struct parent_dial {
    uv_loop_t *loop;
    struct resolver *resolver;
    struct policy_parent_proxy pp;
    char req[1024];
    size_t reqlen, sent;
    parent_dial_cb cb;
    void *arg;
    struct resolver_query *q;
    struct dialer *dialer;
    uv_timer_t timer;
    uv_poll_t poll;
    int poll_open;
    int fd;
    int pending_closes;
    int cancelled;
    int done;
    int status;
    char why[300];
    char label[POLICY_HOST_MAX + 40]; /* "parent proxy HOST:PORT", "mitmProxy unix:PATH" */
};

static void on_handle_closed(uv_handle_t *h)
{
    struct parent_dial *d = h->data;

    if (--d->pending_closes > 0)
        return;
    if (!d->cancelled)
        d->cb(d->arg, d->status, d->status == 0 ? d->fd : -1, d->why);
    else if (d->fd >= 0)
        close(d->fd);
    if (d->status != 0 && !d->cancelled && d->fd >= 0)
        close(d->fd);
    free(d);
}

/* Ends the attempt: stops everything; the callback runs when the handles
 * are closed. */
static void end(struct parent_dial *d, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void end(struct parent_dial *d, int status, const char *fmt, ...)
{
    if (d->done)
        return;
    d->done = 1;
    d->status = status;
    if (fmt != NULL) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(d->why, sizeof(d->why), fmt, ap);
        va_end(ap);
    }
    if (d->q != NULL) {
        resolver_query_detach(d->q);
        d->q = NULL;
    }
    if (d->dialer != NULL) {
        dialer_cancel(d->dialer);
        d->dialer = NULL;
    }
    uv_timer_stop(&d->timer);
    d->pending_closes = 1;
    uv_close((uv_handle_t *)&d->timer, on_handle_closed);
    if (d->poll_open) {
        d->pending_closes++;
        uv_close((uv_handle_t *)&d->poll, on_handle_closed);
    }
}

static void on_timeout(uv_timer_t *t)
{
    struct parent_dial *d = t->data;

    end(d, UV_ETIMEDOUT, "the %s did not answer in time", d->label);
}

/* Reads the answer's head; 1 when complete (consumed), 0 for more, <0 error. */
static int read_head(struct parent_dial *d)
{
    char buf[PARENT_HEAD_MAX + 1], *eoh, *sp;
    ssize_t n = recv(d->fd, buf, PARENT_HEAD_MAX, MSG_PEEK);
    size_t headlen;
    long code;

    if (n < 0)
        return errno == EAGAIN || errno == EINTR ? 0 : -errno;
    if (n == 0) {
        end(d, UV_ECONNRESET, "the %s closed the connection before answering",
            d->label);
        return -1;
    }
    buf[n] = '\0';
    eoh = strstr(buf, "\r\n\r\n");
    if (eoh == NULL) {
        if (n >= PARENT_HEAD_MAX) {
            end(d, UV_EPROTO, "the %s sent an oversized answer", d->label);
            return -1;
        }
        return 0;
    }
    headlen = (size_t)(eoh + 4 - buf);
    if (recv(d->fd, buf, headlen, 0) != (ssize_t)headlen) {
        end(d, UV_EPROTO, "reading the %s's answer failed", d->label);
        return -1;
    }
    buf[headlen] = '\0';
    if (strncmp(buf, "HTTP/1.", 7) != 0 || (sp = strchr(buf, ' ')) == NULL) {
        end(d, UV_EPROTO, "the %s did not answer in HTTP", d->label);
        return -1;
    }
    code = strtol(sp + 1, NULL, 10);
    if (code < 200 || code > 299) {
        char *eol = strstr(sp + 1, "\r\n");
        if (eol != NULL)
            *eol = '\0';
        for (char *c = sp + 1; *c != '\0'; c++)
            if (*c < 0x20 || *c > 0x7e)
                *c = '?';
        end(d, UV_EPROTO, "the %s answered %.80s%s", d->label, sp + 1,
            code == 407 ? " (check the credentials in its URL)" : "");
        return -1;
    }
    return 1;
}

static void on_poll(uv_poll_t *p, int status, int events)
{
    struct parent_dial *d = p->data;

    if (d->done)
        return;
    if (status < 0) {
        end(d, status, "talking to the %s: %s", d->label, uv_strerror(status));
        return;
    }
    if ((events & UV_WRITABLE) && d->sent < d->reqlen) {
        ssize_t n = send(d->fd, d->req + d->sent, d->reqlen - d->sent, MSG_NOSIGNAL);
        if (n < 0 && errno != EAGAIN && errno != EINTR) {
            end(d, -errno, "sending CONNECT to the %s: %s", d->label,
                strerror(errno));
            return;
        }
        if (n > 0)
            d->sent += (size_t)n;
        if (d->sent == d->reqlen)
            uv_poll_start(&d->poll, UV_READABLE, on_poll);
        return;
    }
    if (events & UV_READABLE) {
        int rc = read_head(d);
        if (rc < 0 && !d->done)
            end(d, rc, "reading the %s's answer: %s", d->label, uv_strerror(rc));
        else if (rc == 1)
            end(d, 0, NULL);
    }
}

static void on_dialed(void *arg, int status, int fd, size_t index)
{
    struct parent_dial *d = arg;
    int rc;

    (void)index;
    d->dialer = NULL;
    if (status < 0) {
        end(d, status, "cannot reach the %s: %s", d->label, uv_strerror(status));
        return;
    }
    d->fd = fd;
    rc = uv_poll_init(d->loop, &d->poll, fd);
    if (rc < 0) {
        end(d, rc, "cannot watch the connection to the %s: %s", d->label, uv_strerror(rc));
        return;
    }
    d->poll.data = d;
    d->poll_open = 1;
    if (d->reqlen == 0) { /* plain HTTP: nothing to ask the parent first */
        end(d, 0, NULL);
        return;
    }
    uv_poll_start(&d->poll, UV_WRITABLE, on_poll);
}

static void dial_addrs(struct parent_dial *d, const struct policy_addr *addrs, size_t n)
{
    struct dialer_target t[RESOLVER_MAX_ADDRS];
    int rc;

    if (n > RESOLVER_MAX_ADDRS)
        n = RESOLVER_MAX_ADDRS;
    memset(t, 0, sizeof(t));
    for (size_t i = 0; i < n; i++) {
        t[i].addr = addrs[i];
        t[i].port = d->pp.port;
    }
    rc = dialer_start(&d->dialer, d->loop, t, n, 60000, on_dialed, d);
    if (rc < 0) {
        d->dialer = NULL;
        end(d, rc, "cannot connect to the %s: %s", d->label, uv_strerror(rc));
    }
}

/* network.mitmProxy: the proxy is a host Unix socket, connected at once (a
 * local stream socket connects or fails in the call; EAGAIN is a full
 * backlog, reported as such). A missing or refused socket ends the attempt:
 * the connection fails closed, it never goes direct. */
static void dial_unix(struct parent_dial *d)
{
    struct sockaddr_un sun;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    if (fd < 0) {
        end(d, -errno, "cannot make a socket for the %s: %s", d->label, strerror(errno));
        return;
    }
    memset(&sun, 0, sizeof(sun));
    sun.sun_family = AF_UNIX;
    memcpy(sun.sun_path, d->pp.unix_path, strnlen(d->pp.unix_path, sizeof(sun.sun_path) - 1));
    if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
        int e = errno;
        close(fd);
        end(d, e == ENOENT || e == ECONNREFUSED ? UV_ECONNREFUSED : -e, "cannot reach the %s: %s",
            d->label,
            e == EAGAIN ? "its backlog is full" : e == ENOENT ? "no such socket" : strerror(e));
        return;
    }
    on_dialed(d, 0, fd, 0);
}

static void on_resolved(void *arg, enum resolver_status st, const struct policy_addr *addrs,
                        size_t n)
{
    struct parent_dial *d = arg;

    d->q = NULL;
    if (st != RESOLVER_OK) {
        end(d, st == RESOLVER_TIMEOUT ? UV_ETIMEDOUT : UV_EAI_NONAME,
            "cannot resolve the parent proxy's name '%s'", d->pp.host.name);
        return;
    }
    dial_addrs(d, addrs, n);
}

int parent_dial_start(struct parent_dial **out, uv_loop_t *loop, struct resolver *resolver,
                      const struct policy_parent_proxy *pp, const char *authority,
                      unsigned timeout_ms, parent_dial_cb cb, void *arg)
{
    struct parent_dial *d;
    int n;

    if (pp == NULL || !pp->set || timeout_ms == 0)
        return UV_EINVAL;
    d = calloc(1, sizeof(*d));
    if (d == NULL)
        return UV_ENOMEM;
    d->loop = loop;
    d->resolver = resolver;
    d->pp = *pp;
    d->cb = cb;
    d->arg = arg;
    d->fd = -1;
    n = authority == NULL ? 0 : snprintf(d->req, sizeof(d->req), "CONNECT %s HTTP/1.1\r\nHost: %s\r\n%s%s%s\r\n",
                 authority, authority, pp->auth[0] != '\0' ? "Proxy-Authorization: " : "",
                 pp->auth, pp->auth[0] != '\0' ? "\r\n" : "");
    if (n < 0 || (size_t)n >= sizeof(d->req)) {
        free(d);
        return UV_EINVAL;
    }
    d->reqlen = (size_t)n;
    uv_timer_init(loop, &d->timer);
    d->timer.data = d;
    uv_timer_start(&d->timer, on_timeout, timeout_ms, 0);
    *out = d;
    if (pp->unix_path[0] != '\0')
        snprintf(d->label, sizeof(d->label), "mitmProxy %s", pp->shown);
    else
        snprintf(d->label, sizeof(d->label), "parent proxy %s", pp->shown);
    if (pp->unix_path[0] != '\0') {
        dial_unix(d);
    } else if (pp->host.kind != POLICY_HOST_NAME) {
        dial_addrs(d, &pp->host.addr, 1);
    } else if (resolver == NULL) {
        end(d, UV_EINVAL, "no resolver for the parent proxy's name '%s'", pp->host.name);
    } else {
        int rc = resolver_query(resolver, pp->host.name, on_resolved, d, &d->q);
        if (rc < 0) {
            d->q = NULL;
            end(d, rc, "cannot look up the parent proxy '%s': %s", pp->host.name,
                uv_strerror(rc));
        }
    }
    return 0;
}

void parent_dial_cancel(struct parent_dial *d)
{
    if (d == NULL)
        return;
    d->cancelled = 1;
    end(d, UV_ECANCELED, NULL);
}
