/* bridge/connect.c - `sluice connect`'s tunnel: a netcat-like ssh
 * ProxyCommand (cli/connect.c parses its options).
 *
 * Opens a tunnel to HOST:PORT with an HTTP CONNECT through the proxy and
 * copies stdin to it and it to stdout until both directions have ended.
 * Blocking I/O and poll(2): one tunnel, no event loop needed.
 */
#include "bridge/connect.h"

#include "bridge/bridge.h"
#include "common/common.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define CONNECT_HEAD_MAX 8192
#define CONNECT_BUF 65536


/* A host for the request line: letters, digits, '.', '-', '_', ':' (IPv6,
 * then bracketed), nothing that could end the line or the head. */
static int host_ok(const char *h)
{
    if (h[0] == '\0' || strlen(h) > 253 + 2)
        return 0;
    for (const char *p = h; *p != '\0'; p++) {
        char c = *p;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '-' || c == '_' || c == ':' || c == '[' || c == ']'))
            return 0;
    }
    return 1;
}

static int port_ok(const char *p, unsigned *out)
{
    unsigned long v = 0;

    if (p[0] == '\0' || strlen(p) > 5)
        return 0;
    for (const char *q = p; *q != '\0'; q++) {
        if (*q < '0' || *q > '9')
            return 0;
        v = v * 10 + (unsigned long)(*q - '0');
    }
    if (v == 0 || v > 65535)
        return 0;
    *out = (unsigned)v;
    return 1;
}

/* Reads the proxy's response head; 0 when it is "HTTP/1.x 200". Bytes after
 * the head (the server may speak first) are copied to stdout. */
static int read_head(int s)
{
    char head[CONNECT_HEAD_MAX + 1];
    size_t n = 0;
    char *end = NULL;

    while (end == NULL) {
        ssize_t r;
        if (n == CONNECT_HEAD_MAX) {
            fprintf(stderr, "sluice: connect: the proxy's response head is too long\n");
            return -1;
        }
        r = read(s, head + n, CONNECT_HEAD_MAX - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            fprintf(stderr, "sluice: connect: the proxy closed the connection without an answer\n");
            return -1;
        }
        n += (size_t)r;
        head[n] = '\0';
        end = strstr(head, "\r\n\r\n");
    }
    if (strncmp(head, "HTTP/1.", 7) != 0 || n < 12 || strncmp(head + 8, " 200", 4) != 0) {
        char *eol = strstr(head, "\r\n");
        if (eol != NULL)
            *eol = '\0';
        fprintf(stderr, "sluice: connect: the proxy refused: %s\n", head);
        return -1;
    }
    end += 4;
    if ((size_t)(end - head) < n && common_write_all(1, end, n - (size_t)(end - head)) < 0)
        return -1;
    return 0;
}

static int dial(const char *spec)
{
    struct endpoint ep;
    struct sockaddr_storage ss;
    socklen_t len;
    const char *why = NULL;
    char buf[ENDPOINT_STR_MAX + 8];
    int s;

    if (strncmp(spec, "tcp:", 4) != 0 && strncmp(spec, "unix:", 5) != 0) {
        snprintf(buf, sizeof(buf), "tcp:%s", spec);
        spec = buf;
    }
    if (endpoint_parse(spec, 0, &ep, &why) < 0) {
        fprintf(stderr, "sluice: connect: proxy '%s': %s\n", spec, why != NULL ? why : "invalid");
        return -1;
    }
    if (ep.kind == ENDPOINT_UNIX) {
        struct sockaddr_un *sun = (struct sockaddr_un *)(void *)&ss;
        memset(&ss, 0, sizeof(ss));
        sun->sun_family = AF_UNIX;
        memcpy(sun->sun_path, ep.path, strlen(ep.path) + 1);
        len = sizeof(*sun);
    } else {
        endpoint_sockaddr(&ep.addr, ep.port, &ss, &len);
    }
    s = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0 || connect(s, (struct sockaddr *)&ss, len) < 0) {
        fprintf(stderr, "sluice: connect: cannot reach the proxy at %s: %s\n", spec,
                strerror(errno));
        if (s >= 0)
            close(s);
        return -1;
    }
    return s;
}

/* Copies both ways until both have ended; half-closes follow EOFs. */
static int pump(int s)
{
    static char buf[CONNECT_BUF];
    int in_open = 1, out_open = 1;

    while (in_open || out_open) {
        struct pollfd p[2];
        nfds_t np = 0;
        int in_i = -1, s_i = -1;

        if (in_open) {
            p[np].fd = 0;
            p[np].events = POLLIN;
            in_i = (int)np++;
        }
        if (out_open) {
            p[np].fd = s;
            p[np].events = POLLIN;
            s_i = (int)np++;
        }
        if (poll(p, np, -1) < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (in_i >= 0 && p[in_i].revents != 0) {
            ssize_t r = read(0, buf, sizeof(buf));
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0) {
                in_open = 0;
                (void)shutdown(s, SHUT_WR);
            } else if (common_write_all(s, buf, (size_t)r) < 0) {
                return -1;
            }
        }
        if (s_i >= 0 && p[s_i].revents != 0) {
            ssize_t r = read(s, buf, sizeof(buf));
            if (r < 0 && errno == EINTR)
                continue;
            if (r < 0)
                return -1;
            if (r == 0) {
                out_open = 0;
                close(1);
            } else if (common_write_all(1, buf, (size_t)r) < 0) {
                return -1;
            }
        }
    }
    return 0;
}

int connect_run(const char *proxy, const char *host, const char *port_s)
{
    char req[600];
    unsigned port = 0;
    int s, v6, n;

    if (!host_ok(host)) {
        fprintf(stderr, "sluice: connect: invalid host '%s'\n", host);
        return 2;
    }
    if (!port_ok(port_s, &port)) {
        fprintf(stderr, "sluice: connect: invalid port '%s' (1-65535)\n", port_s);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    s = dial(proxy);
    if (s < 0)
        return 1;
    v6 = strchr(host, ':') != NULL && host[0] != '[';
    n = snprintf(req, sizeof(req), "CONNECT %s%s%s:%u HTTP/1.1\r\nHost: %s%s%s:%u\r\n\r\n",
                 v6 ? "[" : "", host, v6 ? "]" : "", port, v6 ? "[" : "", host, v6 ? "]" : "",
                 port);
    if (n < 0 || (size_t)n >= sizeof(req) || common_write_all(s, req, (size_t)n) < 0 || read_head(s) < 0) {
        close(s);
        return 1;
    }
    n = pump(s);
    close(s);
    return n < 0 ? 1 : 0;
}
