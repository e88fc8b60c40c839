/* cli/connect.c - `sluice connect`: a netcat-like ssh ProxyCommand.
 *
 *   sluice connect [--proxy HOST:PORT] HOST PORT
 *
 * Opens a tunnel to HOST:PORT with an HTTP CONNECT through the proxy
 * (default 127.0.0.1:3128, the in-sandbox HTTP proxy of `sluice run`; also
 * $SLUICE_CONNECT_PROXY) and copies stdin to it and it to stdout until both
 * directions have ended. ssh uses it as `-o ProxyCommand='sluice connect %h
 * %p'`, which is how GIT_SSH_COMMAND inside the sandbox reaches a git host.
 *
 * Exit status: 0 when the tunnel ran and ended; 1 when the proxy refused
 * (its status line is printed) or the connection failed; 2 for bad usage.
 * Blocking I/O and poll(2): one tunnel, no event loop needed.
 */
#include "cli/cli.h"

#include "bridge/bridge.h"

#include <errno.h>
#include <getopt.h>
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

void cli_connect_usage(FILE *f)
{
    fprintf(f, "usage: sluice connect [--proxy ADDR:PORT] HOST PORT\n"
               "\n"
               "Tunnels stdin/stdout to HOST:PORT through an HTTP proxy with CONNECT\n"
               "(default 127.0.0.1:3128, or $SLUICE_CONNECT_PROXY). For ssh:\n"
               "  ssh -o ProxyCommand='sluice connect %%h %%p' git@example.com\n"
               "\n"
               "  --proxy ADDR:PORT  the proxy (or unix:PATH)\n"
               "  -h, --help         show this help\n"
               "  -V, --version      print the version and exit\n"
               "\n"
               "exit status: 0 the tunnel ended, 1 the proxy refused or failed, 2 bad\n"
               "arguments\n");
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

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
    if ((size_t)(end - head) < n && write_all(1, end, n - (size_t)(end - head)) < 0)
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
            } else if (write_all(s, buf, (size_t)r) < 0) {
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
            } else if (write_all(1, buf, (size_t)r) < 0) {
                return -1;
            }
        }
    }
    return 0;
}

enum { OPT_PROXY = 256 };

static const struct option connect_options[] = {
    {"proxy", required_argument, NULL, OPT_PROXY},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

int cli_connect(int argc, char **argv)
{
    const char *proxy = getenv("SLUICE_CONNECT_PROXY");
    const char *host = NULL, *port_s = NULL;
    char req[600];
    unsigned port = 0;
    int i, s, v6, n, c;

    if (proxy == NULL || proxy[0] == '\0')
        proxy = "127.0.0.1:3128";
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+:hV", connect_options, NULL)) != -1) {
        if (c == 'h') {
            cli_connect_usage(stdout);
            return 0;
        }
        if (c == 'V')
            return cli_version();
        if (c != OPT_PROXY) {
            cli_bad_option("connect", c, argv, cli_connect_usage);
            return 2;
        }
        proxy = optarg;
    }
    i = optind;
    if (argc - i != 2) {
        cli_connect_usage(stderr);
        return 2;
    }
    host = argv[i];
    port_s = argv[i + 1];
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
    if (n < 0 || (size_t)n >= sizeof(req) || write_all(s, req, (size_t)n) < 0 || read_head(s) < 0) {
        close(s);
        return 1;
    }
    n = pump(s);
    close(s);
    return n < 0 ? 1 : 0;
}
