/* tests/bench/loadgen.c - load generator and origin servers for the relay
 * benchmark (tests/bench/bridge.sh) and the proxy benchmark
 * (tests/bench/proxy.sh).
 *
 * Origins:
 *   loadgen serve-echo ENDPOINT [--close-after N]
 *                                 echo every byte back; half-closes after EOF;
 *                                 --close-after N: closes first, once N bytes
 *                                 went back
 *   loadgen serve-sink ENDPOINT   read and drop everything; close after EOF
 *   loadgen serve-source ENDPOINT write bytes without end until the peer
 *                                 goes away (reads and drops its input)
 *   loadgen serve-http ENDPOINT   a tiny HTTP/1.1 origin: every request head
 *                                 gets "200 OK" with a 13-byte body and
 *                                 Content-Length; keep-alive unless the
 *                                 request says close (or is HTTP/1.0 without
 *                                 keep-alive)
 *       ENDPOINT is tcp:127.0.0.1:0 (any port) or unix:PATH; prints
 *       "listening ENDPOINT" (with the bound port) on stdout, then serves
 *       until killed.
 *
 * Clients:
 *   loadgen bulk ENDPOINT [--bytes N] [--seconds S] [--echo] [--download] [VIA]
 *       one connection: sends N bytes (or for S seconds), half-closes, and
 *       waits for the server's EOF, so every byte has arrived when the clock
 *       stops. --echo: a second thread reads the echo back as it comes (the
 *       bytes cross the path twice). --download: sends nothing, reads N bytes
 *       (from serve-source) and closes. Prints
 *       "bulk bytes=B seconds=T mib_s=X".
 *
 *   loadgen rate ENDPOINT [--clients C] [--seconds D] [--count N] [--size 100]
 *                [--threads N] [--latency] [--wait-eof] [--expect-deny] [VIA]
 *       C clients, each in a loop: connect, write SIZE bytes, read the
 *       SIZE-byte echo, close; for D seconds (--count N: exactly N jobs,
 *       then stop, for counts per tunnel), spread over N epoll threads
 *       (default: one per CPU, at most C).
 *       Prints "rate clients=C threads=N seconds=T conns=N conn_s=X errors=E",
 *       with --latency followed by " p50_us=X p99_us=Y" (connect to echo
 *       read, per connection). With VIA the tunnel is opened first (connect,
 *       handshake, reply), then the echo. --expect-deny: each client only
 *       asks for the tunnel and counts a refusal (HTTP 403, SOCKS5 reply
 *       0x02) as done; conns= are then refusals. --wait-eof: after the echo
 *       (or refusal) read on until the server's EOF, then close: with
 *       serve-echo --close-after SIZE the server side closes first, so the
 *       TIME_WAIT states stay off the client's ports (with the client closing
 *       first, one client address and one target exhaust the even half of
 *       the ephemeral range at ~14k connections/s and connect() scans).
 *
 *   loadgen http ENDPOINT [--target HOST:PORT] [--proxy http] [--clients C]
 *                [--seconds D] [--count N] [--threads N]
 *       C keep-alive clients, each sending "GET / HTTP/1.1" requests one at a
 *       time (origin form with Host: TARGET; with --proxy http, absolute form
 *       "GET http://TARGET/" to the proxy at ENDPOINT) and reading each
 *       response in full (Content-Length, or up to EOF). A connection the
 *       server closes (Connection: close, HTTP/1.0) is read to its EOF and
 *       reopened for the next request. Prints "http clients=C threads=N seconds=T reqs=N req_s=X
 *       conns=K errors=E p50_us=X p99_us=Y" (conns: connections opened;
 *       latency from writing the request, or from connect for the first
 *       request of a connection, to the last response byte).
 *
 *   loadgen idle ENDPOINT --count N [--parallel P] [--size 100] [--seconds S] VIA
 *       opens N tunnels (at most P handshakes at once), does one SIZE-byte
 *       echo through each (--size 0: none) and keeps them open and silent.
 *       Prints "idle tunnels=N errors=E seconds=T" once all are up (or after
 *       S seconds, default 120), then holds them until SIGTERM/SIGINT and
 *       prints "idle closed_while_idle=K" (tunnels the far side closed).
 *
 *   VIA is --proxy http|socks5 --target HOST:PORT: ENDPOINT is the proxy and
 *   TARGET what it is asked for, with an HTTP CONNECT (one request, reply
 *   head read to its end; 200 opens) or a SOCKS5 handshake without
 *   authentication (greeting, method reply, then the CONNECT request with
 *   an IPv4, IPv6 or domain address, reply read exactly; 0x00 opens), each
 *   step waiting for the previous reply as ordinary clients do.
 *
 * Servers are single epoll threads, the rate client one epoll thread per CPU,
 * all with non-blocking sockets, and bulk uses one blocking thread per
 * direction, so loadgen costs about what the kernel's socket work costs and
 * is not the bottleneck of what it measures. Linux only (epoll). Only loopback
 * and unix endpoints are accepted; a TARGET is a loopback address too, or a
 * name only with --expect-deny (a name the proxy is expected to refuse
 * without resolving it).
 */
#include "bridge/bridge.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define CHUNK (256 * 1024)
#define MAX_EVENTS 256
#define MAX_CLIENTS 4096
#define MAX_IDLE 65536
#define SLOT_BUF 2048

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what)
{
    fprintf(stderr, "loadgen: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void fail_msg(const char *what)
{
    fprintf(stderr, "loadgen: %s\n", what);
    exit(1);
}

static int set_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* The offset just past the first "\r\n\r\n" in buf[0..len), or 0. */
static size_t head_end(const char *buf, size_t len)
{
    size_t i;
    for (i = 3; i < len; i++) {
        if (buf[i] == '\n' && buf[i - 1] == '\r' && buf[i - 2] == '\n' && buf[i - 3] == '\r')
            return i + 1;
    }
    return 0;
}

/* Case-insensitive search for needle in hay[0..len). */
static int ci_contains(const char *hay, size_t len, const char *needle)
{
    size_t n = strlen(needle), i;
    for (i = 0; i + n <= len; i++) {
        if (strncasecmp(hay + i, needle, n) == 0)
            return 1;
    }
    return 0;
}

/* Whether a header line "NAME: ..." in head[0..len) mentions token
 * (both case-insensitive; NAME without the colon). */
static int header_has(const char *head, size_t len, const char *name, const char *token)
{
    const char *p = head, *lim = head + len;
    size_t nlen = strlen(name);
    while (p < lim) {
        const char *nl = memchr(p, '\n', (size_t)(lim - p));
        size_t l = nl != NULL ? (size_t)(nl - p) : (size_t)(lim - p);
        if (l > nlen && p[nlen] == ':' && strncasecmp(p, name, nlen) == 0 &&
            ci_contains(p + nlen + 1, l - nlen - 1, token))
            return 1;
        if (nl == NULL)
            break;
        p = nl + 1;
    }
    return 0;
}

/* The status code of an "HTTP/1.x NNN" head, or -1. */
static int http_status(const char *buf, size_t len)
{
    if (len < 12 || strncmp(buf, "HTTP/1.", 7) != 0 || buf[8] != ' ')
        return -1;
    if (buf[9] < '0' || buf[9] > '9' || buf[10] < '0' || buf[10] > '9' || buf[11] < '0' ||
        buf[11] > '9')
        return -1;
    return (buf[9] - '0') * 100 + (buf[10] - '0') * 10 + (buf[11] - '0');
}

/* ------------------------------------------------------------------------ */
/* Endpoints                                                                 */

struct target {
    struct sockaddr_storage ss;
    socklen_t len;
    int family;
};

static void parse_target(const char *s, int for_listen, struct target *t)
{
    struct endpoint ep;
    const char *why = NULL;

    if (endpoint_parse(s, for_listen, &ep, &why) < 0) {
        fprintf(stderr, "loadgen: '%s': %s\n", s, why);
        exit(2);
    }
    memset(t, 0, sizeof(*t));
    if (ep.kind == ENDPOINT_TCP) {
        int loopback = ep.addr.family == 4
                           ? ep.addr.bytes[0] == 127
                           : (memcmp(ep.addr.bytes, "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\1", 16) == 0);
        if (!loopback) {
            fprintf(stderr, "loadgen: '%s': only loopback addresses\n", s);
            exit(2);
        }
        endpoint_sockaddr(&ep.addr, ep.port, &t->ss, &t->len);
        t->family = t->ss.ss_family;
    } else if (ep.kind == ENDPOINT_UNIX) {
        struct sockaddr_un *sun = (struct sockaddr_un *)(void *)&t->ss;
        sun->sun_family = AF_UNIX;
        memcpy(sun->sun_path, ep.path, strlen(ep.path) + 1);
        t->len = (socklen_t)sizeof(*sun);
        t->family = AF_UNIX;
    } else {
        fprintf(stderr, "loadgen: '%s': tcp: or unix: only\n", s);
        exit(2);
    }
}

static void tune(int fd, int family)
{
    int one = 1;
    if (family != AF_UNIX)
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* ------------------------------------------------------------------------ */
/* Proxy handshakes (VIA)                                                    */

enum via_kind { VIA_NONE, VIA_HTTP, VIA_SOCKS5 };

struct via {
    enum via_kind kind;
    char authority[300]; /* host:port or [v6]:port, as sent in CONNECT and Host */
    unsigned char req[300]; /* the CONNECT request head, or the SOCKS5 request */
    size_t req_len;
};

static const unsigned char socks_greeting[3] = {5, 1, 0}; /* one method: no auth */

/* Fills v from --proxy KIND and --target HOST:PORT. A name is accepted only
 * when allow_name (the proxy is expected to refuse it); addresses must be
 * loopback. */
static void via_setup(struct via *v, const char *kind, const char *target, int allow_name)
{
    char host[256];
    const char *colon;
    unsigned char a4[4], a6[16];
    unsigned long port;
    char *end;
    size_t hlen;
    int is4 = 0, is6 = 0;

    memset(v, 0, sizeof(*v));
    if (kind == NULL) {
        v->kind = VIA_NONE;
        return;
    }
    if (strcmp(kind, "http") == 0)
        v->kind = VIA_HTTP;
    else if (strcmp(kind, "socks5") == 0)
        v->kind = VIA_SOCKS5;
    else
        fail_msg("--proxy must be http or socks5");
    if (target == NULL)
        fail_msg("--proxy needs --target HOST:PORT");
    colon = strrchr(target, ':');
    if (colon == NULL || colon == target)
        fail_msg("--target must be HOST:PORT");
    if (target[0] == '[') {
        if (colon[-1] != ']')
            fail_msg("--target: [v6]:PORT");
        hlen = (size_t)(colon - target) - 2;
        if (hlen >= sizeof(host))
            fail_msg("--target: host too long");
        memcpy(host, target + 1, hlen);
    } else {
        hlen = (size_t)(colon - target);
        if (hlen >= sizeof(host))
            fail_msg("--target: host too long");
        memcpy(host, target, hlen);
    }
    host[hlen] = '\0';
    errno = 0;
    port = strtoul(colon + 1, &end, 10);
    if (errno != 0 || *end != '\0' || port == 0 || port > 65535)
        fail_msg("--target: bad port");
    if (inet_pton(AF_INET, host, a4) == 1) {
        is4 = 1;
        if (a4[0] != 127)
            fail_msg("--target: only loopback addresses");
    } else if (inet_pton(AF_INET6, host, a6) == 1) {
        is6 = 1;
        if (memcmp(a6, "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\1", 16) != 0)
            fail_msg("--target: only loopback addresses");
    } else if (!allow_name) {
        fail_msg("--target: a name only with --expect-deny");
    }
    snprintf(v->authority, sizeof(v->authority), is6 ? "[%s]:%lu" : "%s:%lu", host, port);
    if (v->kind == VIA_HTTP) {
        int n = snprintf((char *)v->req, sizeof(v->req), "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n",
                         v->authority, v->authority);
        if (n < 0 || (size_t)n >= sizeof(v->req))
            fail_msg("--target too long");
        v->req_len = (size_t)n;
        return;
    }
    v->req[0] = 5;
    v->req[1] = 1; /* CONNECT */
    v->req[2] = 0;
    if (is4) {
        v->req[3] = 1;
        memcpy(v->req + 4, a4, 4);
        v->req_len = 8;
    } else if (is6) {
        v->req[3] = 4;
        memcpy(v->req + 4, a6, 16);
        v->req_len = 20;
    } else {
        v->req[3] = 3;
        v->req[4] = (unsigned char)hlen;
        memcpy(v->req + 5, host, hlen);
        v->req_len = 5 + hlen;
    }
    v->req[v->req_len++] = (unsigned char)(port >> 8);
    v->req[v->req_len++] = (unsigned char)(port & 0xff);
}

static void write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            die("write");
        c += w;
        n -= (size_t)w;
    }
}

static void read_exact(int fd, void *p, size_t n)
{
    char *c = p;
    while (n > 0) {
        ssize_t r = read(fd, c, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            die("read");
        if (r == 0)
            fail_msg("proxy closed during the handshake");
        c += r;
        n -= (size_t)r;
    }
}

/* Opens the tunnel on a connected blocking socket. Returns how many tunnel
 * bytes arrived behind an HTTP reply head (they are counted, not kept). */
static size_t via_blocking(int fd, const struct via *v)
{
    if (v->kind == VIA_HTTP) {
        char buf[4096];
        size_t len = 0, end = 0;
        write_all(fd, v->req, v->req_len);
        while (end == 0) {
            ssize_t r;
            if (len == sizeof(buf))
                fail_msg("CONNECT reply head too long");
            r = read(fd, buf + len, sizeof(buf) - len);
            if (r < 0 && errno == EINTR)
                continue;
            if (r < 0)
                die("read");
            if (r == 0)
                fail_msg("proxy closed before the CONNECT reply");
            len += (size_t)r;
            end = head_end(buf, len);
        }
        if (http_status(buf, len) != 200) {
            fprintf(stderr, "loadgen: CONNECT refused: %.*s\n", (int)(strchr(buf, '\r') - buf), buf);
            exit(1);
        }
        return len - end;
    }
    if (v->kind == VIA_SOCKS5) {
        unsigned char rep[262];
        size_t rest;
        write_all(fd, socks_greeting, sizeof(socks_greeting));
        read_exact(fd, rep, 2);
        if (rep[0] != 5 || rep[1] != 0)
            fail_msg("SOCKS5 method not accepted");
        write_all(fd, v->req, v->req_len);
        read_exact(fd, rep, 5);
        if (rep[0] != 5 || rep[1] != 0) {
            fprintf(stderr, "loadgen: SOCKS5 reply 0x%02x\n", rep[1]);
            exit(1);
        }
        rest = rep[3] == 1 ? 4 + 2 - 1 : rep[3] == 4 ? 16 + 2 - 1 : (size_t)rep[4] + 2;
        read_exact(fd, rep + 5, rest);
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Servers                                                                   */

enum serve_mode { SERVE_SINK, SERVE_ECHO, SERVE_SOURCE };

struct sconn {
    int fd;
    size_t off, len; /* echo: bytes of buf still to write */
    int eof;
    unsigned long long echoed; /* echo: bytes written back so far */
    char buf[CHUNK];
};

/* serve-echo --close-after N: close (FIN first, from the server) once N
 * bytes went back; 0: echo until the peer's EOF. */
static unsigned long long echo_close_after;

static char source_bytes[CHUNK];

static void sconn_close(int ep, struct sconn *c)
{
    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    free(c);
}

static void sconn_watch(int ep, struct sconn *c, uint32_t events)
{
    struct epoll_event ev;
    ev.events = events;
    ev.data.ptr = c;
    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
}

/* Moves bytes for one connection until it would block. Returns 0 to keep it,
 * -1 when it is done (closed). */
static int sconn_run(int ep, struct sconn *c, int echo)
{
    for (;;) {
        if (c->len > c->off) {
            ssize_t w = write(c->fd, c->buf + c->off, c->len - c->off);
            if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                sconn_watch(ep, c, EPOLLOUT);
                return 0;
            }
            if (w < 0)
                return -1;
            c->off += (size_t)w;
            if (c->off < c->len)
                continue;
            c->echoed += c->len;
            c->off = c->len = 0;
            if (echo_close_after > 0 && c->echoed >= echo_close_after)
                return -1;
            sconn_watch(ep, c, EPOLLIN);
        }
        if (c->eof) {
            if (!echo)
                return -1;
            shutdown(c->fd, SHUT_WR);
            return -1;
        }
        {
            ssize_t r = read(c->fd, c->buf, sizeof(c->buf));
            if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                return 0;
            if (r <= 0) {
                c->eof = 1;
                continue;
            }
            if (echo)
                c->len = (size_t)r;
        }
    }
}

/* serve-source: drops what the peer sends, writes until the socket is full.
 * Returns -1 once the peer is gone. The watch is EPOLLIN|EPOLLOUT for the
 * whole life of the connection (level-triggered). */
static int source_run(struct sconn *c)
{
    char drop[4096];
    for (;;) {
        ssize_t r = read(c->fd, drop, sizeof(drop));
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
            return -1;
        if (r < 0)
            break;
    }
    for (;;) {
        ssize_t w = write(c->fd, source_bytes, sizeof(source_bytes));
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (w < 0)
            return -1;
    }
}

/* Binds and listens on endpoint (non-blocking), prints "listening ..." with
 * the bound address, returns the socket; *family gets its family. */
static int listen_on(const char *endpoint, int *family)
{
    struct target t;
    int lfd, one = 1;
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);

    parse_target(endpoint, 1, &t);
    lfd = socket(t.family, SOCK_STREAM, 0);
    if (lfd < 0)
        die("socket");
    if (t.family == AF_UNIX)
        unlink(((struct sockaddr_un *)(void *)&t.ss)->sun_path);
    else
        setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(lfd, (struct sockaddr *)&t.ss, t.len) < 0)
        die("bind");
    if (listen(lfd, 4096) < 0)
        die("listen");
    set_nonblock(lfd);
    if (t.family == AF_UNIX) {
        printf("listening %s\n", endpoint);
    } else {
        getsockname(lfd, (struct sockaddr *)&ss, &len);
        if (ss.ss_family == AF_INET6)
            printf("listening tcp:[::1]:%u\n",
                   (unsigned)ntohs(((struct sockaddr_in6 *)(void *)&ss)->sin6_port));
        else
            printf("listening tcp:127.0.0.1:%u\n",
                   (unsigned)ntohs(((struct sockaddr_in *)(void *)&ss)->sin_port));
    }
    fflush(stdout);
    *family = t.family;
    return lfd;
}

static _Noreturn void serve(const char *endpoint, enum serve_mode mode)
{
    struct epoll_event evs[MAX_EVENTS], ev;
    int lfd, ep, family, i, n;
    int echo = mode == SERVE_ECHO;

    lfd = listen_on(endpoint, &family);
    if (mode == SERVE_SOURCE)
        memset(source_bytes, 'x', sizeof(source_bytes));
    ep = epoll_create1(0);
    if (ep < 0)
        die("epoll_create1");
    ev.events = EPOLLIN;
    ev.data.ptr = NULL;
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
    for (;;) {
        n = epoll_wait(ep, evs, MAX_EVENTS, -1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            die("epoll_wait");
        for (i = 0; i < n; i++) {
            struct sconn *c = evs[i].data.ptr;
            if (c == NULL) {
                int cfd;
                while ((cfd = accept(lfd, NULL, NULL)) >= 0) {
                    /* source connections use no per-connection buffer */
                    c = malloc(mode == SERVE_SOURCE ? offsetof(struct sconn, buf) : sizeof(*c));
                    if (c == NULL) {
                        close(cfd);
                        continue;
                    }
                    c->fd = cfd;
                    c->off = c->len = 0;
                    c->eof = 0;
                    c->echoed = 0;
                    set_nonblock(cfd);
                    tune(cfd, family);
                    ev.events = mode == SERVE_SOURCE ? EPOLLIN | EPOLLOUT : EPOLLIN;
                    ev.data.ptr = c;
                    epoll_ctl(ep, EPOLL_CTL_ADD, cfd, &ev);
                    if ((mode == SERVE_SOURCE ? source_run(c) : sconn_run(ep, c, echo)) < 0)
                        sconn_close(ep, c);
                }
                continue;
            }
            if ((mode == SERVE_SOURCE ? source_run(c) : sconn_run(ep, c, echo)) < 0)
                sconn_close(ep, c);
        }
    }
}

/* serve-http ------------------------------------------------------------- */

#define HTTP_BODY "hello, world\n"

struct hconn {
    int fd;
    size_t inlen;           /* bytes of in[] held */
    size_t outoff, outlen;  /* response bytes still to write */
    int close_after;        /* close once out[] is written */
    char in[8192];
    char out[256];
};

static void hconn_close(int ep, struct hconn *c)
{
    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    free(c);
}

/* Answers every complete request head in c->in, one at a time (a response
 * is written before the next head is looked at). Request bodies are not
 * expected (GET). Returns -1 when the connection is done. */
static int hconn_run(int ep, struct hconn *c)
{
    struct epoll_event ev;
    for (;;) {
        size_t end;
        if (c->outlen > c->outoff) {
            ssize_t w = write(c->fd, c->out + c->outoff, c->outlen - c->outoff);
            if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                ev.events = EPOLLOUT;
                ev.data.ptr = c;
                epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
                return 0;
            }
            if (w < 0)
                return -1;
            c->outoff += (size_t)w;
            if (c->outoff < c->outlen)
                continue;
            c->outoff = c->outlen = 0;
            if (c->close_after)
                return -1;
            ev.events = EPOLLIN;
            ev.data.ptr = c;
            epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
        }
        end = head_end(c->in, c->inlen);
        if (end > 0) {
            const char *nl = memchr(c->in, '\n', end);
            size_t line = nl != NULL ? (size_t)(nl - c->in) : 0;
            int http10 = line >= 9 && memcmp(c->in + line - 9, "HTTP/1.0\r", 9) == 0;
            int n;
            c->close_after = header_has(c->in, end, "connection", "close") ||
                             (http10 && !header_has(c->in, end, "connection", "keep-alive"));
            n = snprintf(c->out, sizeof(c->out),
                         "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %u\r\n%s\r\n"
                         "%s",
                         (unsigned)strlen(HTTP_BODY),
                         c->close_after ? "Connection: close\r\n"
                                        : (http10 ? "Connection: keep-alive\r\n" : ""),
                         HTTP_BODY);
            c->outlen = (size_t)n;
            c->outoff = 0;
            memmove(c->in, c->in + end, c->inlen - end);
            c->inlen -= end;
            continue;
        }
        if (c->inlen == sizeof(c->in))
            return -1; /* head too large */
        {
            ssize_t r = read(c->fd, c->in + c->inlen, sizeof(c->in) - c->inlen);
            if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                return 0;
            if (r <= 0)
                return -1;
            c->inlen += (size_t)r;
        }
    }
}

static _Noreturn void serve_http(const char *endpoint)
{
    struct epoll_event evs[MAX_EVENTS], ev;
    int lfd, ep, family, i, n;

    lfd = listen_on(endpoint, &family);
    ep = epoll_create1(0);
    if (ep < 0)
        die("epoll_create1");
    ev.events = EPOLLIN;
    ev.data.ptr = NULL;
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
    for (;;) {
        n = epoll_wait(ep, evs, MAX_EVENTS, -1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            die("epoll_wait");
        for (i = 0; i < n; i++) {
            struct hconn *c = evs[i].data.ptr;
            if (c == NULL) {
                int cfd;
                while ((cfd = accept(lfd, NULL, NULL)) >= 0) {
                    c = malloc(sizeof(*c));
                    if (c == NULL) {
                        close(cfd);
                        continue;
                    }
                    c->fd = cfd;
                    c->inlen = c->outoff = c->outlen = 0;
                    c->close_after = 0;
                    set_nonblock(cfd);
                    tune(cfd, family);
                    ev.events = EPOLLIN;
                    ev.data.ptr = c;
                    epoll_ctl(ep, EPOLL_CTL_ADD, cfd, &ev);
                    if (hconn_run(ep, c) < 0)
                        hconn_close(ep, c);
                }
                continue;
            }
            if (hconn_run(ep, c) < 0)
                hconn_close(ep, c);
        }
    }
}

/* ------------------------------------------------------------------------ */
/* bulk                                                                      */

struct reader {
    int fd;
    unsigned long long got;
};

static void *read_thread(void *arg)
{
    struct reader *rd = arg;
    char *buf = malloc(CHUNK);
    ssize_t r;

    if (buf == NULL)
        return NULL;
    while ((r = read(rd->fd, buf, CHUNK)) > 0)
        rd->got += (unsigned long long)r;
    free(buf);
    return NULL;
}

static int bulk(const char *endpoint, unsigned long long bytes, double seconds, int echo,
                int download, const struct via *via)
{
    struct target t;
    struct reader rd;
    pthread_t th;
    unsigned long long sent = 0;
    double t0, t1, deadline;
    char *buf;
    int fd;

    parse_target(endpoint, 0, &t);
    buf = malloc(CHUNK);
    if (buf == NULL)
        die("malloc");
    memset(buf, 'x', CHUNK);
    fd = socket(t.family, SOCK_STREAM, 0);
    if (fd < 0)
        die("socket");
    tune(fd, t.family);
    t0 = now();
    if (connect(fd, (struct sockaddr *)&t.ss, t.len) < 0)
        die("connect");
    if (download) {
        /* reads `bytes` (or for `seconds`) from serve-source, then closes */
        unsigned long long got = via_blocking(fd, via);
        deadline = t0 + seconds;
        while (seconds > 0 ? now() < deadline : got < bytes) {
            ssize_t r = read(fd, buf, CHUNK);
            if (r < 0 && errno == EINTR)
                continue;
            if (r < 0)
                die("read");
            if (r == 0)
                fail_msg("download: the source closed early");
            got += (unsigned long long)r;
        }
        t1 = now();
        close(fd);
        free(buf);
        printf("bulk bytes=%llu seconds=%.3f mib_s=%.1f\n", got, t1 - t0,
               (double)got / (1024.0 * 1024.0) / (t1 - t0));
        return 0;
    }
    if (via_blocking(fd, via) != 0)
        fail_msg("data arrived before the first byte was sent");
    rd.fd = fd;
    rd.got = 0;
    if (pthread_create(&th, NULL, read_thread, &rd) != 0)
        die("pthread_create");
    deadline = t0 + seconds;
    while (seconds > 0 ? now() < deadline : sent < bytes) {
        size_t n = CHUNK;
        ssize_t w;
        if (seconds <= 0 && bytes - sent < n)
            n = (size_t)(bytes - sent);
        w = write(fd, buf, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            die("write");
        }
        sent += (unsigned long long)w;
    }
    shutdown(fd, SHUT_WR);
    pthread_join(th, NULL); /* the server's EOF: everything arrived */
    t1 = now();
    close(fd);
    free(buf);
    if (echo && rd.got != sent) {
        fprintf(stderr, "loadgen: sent %llu bytes, %llu came back\n", sent, rd.got);
        return 1;
    }
    printf("bulk bytes=%llu seconds=%.3f mib_s=%.1f\n", sent, t1 - t0,
           (double)sent / (1024.0 * 1024.0) / (t1 - t0));
    return 0;
}

/* ------------------------------------------------------------------------ */
/* rate, http and idle: non-blocking clients                                 */

enum slot_state {
    SLOT_IDLE,       /* no connection; (re)connected by the loop */
    SLOT_CONNECTING, /* connect() in progress */
    SLOT_HEAD,       /* CONNECT sent, reading the reply head */
    SLOT_S5_METHOD,  /* SOCKS5 greeting sent, reading the 2-byte method reply */
    SLOT_S5_REPLY,   /* SOCKS5 request sent, reading the reply */
    SLOT_READING,    /* echo message sent, reading it back */
    SLOT_HTTP,       /* HTTP request sent, reading the response */
    SLOT_DRAIN,      /* job done, reading (and dropping) up to the server's EOF */
    SLOT_HELD,       /* idle: tunnel up and silent */
    SLOT_DEAD        /* idle: failed or closed, not reopened */
};

enum run_mode { RUN_ECHO, RUN_DENY, RUN_HTTP };

struct slot {
    int fd;
    enum slot_state st;
    size_t got;       /* bytes of the current reply / echo / response read */
    size_t need;      /* SOCKS5 reply: bytes known to be due */
    double t0;        /* start of the current tunnel or request */
    int t0_set;       /* http: t0 already set (by connect) for the next request */
    unsigned reqs;    /* http: responses on this connection */
    size_t body_left; /* http: body bytes still due */
    int head_done, to_eof, close_after;
    char buf[SLOT_BUF];
};

struct rate {
    struct target t;
    struct via via;
    enum run_mode mode;
    int hold;    /* idle: keep the tunnel after the echo */
    int wait_eof; /* rate: after the echo or refusal, wait for the server's EOF */
    int latency; /* record latencies */
    int ep;
    size_t size;
    char msg[4096];
    const char *hreq; /* http: the request */
    size_t hreq_len;
    unsigned long long done, errors, conns, held, closed;
    unsigned long long budget, started; /* rate --count: jobs to start (0: no limit), started */
    unsigned retry; /* slots waiting to reconnect (EAGAIN from a full unix backlog) */
    double *lat;    /* latencies, microseconds */
    size_t nlat, caplat;
};

static void lat_add(struct rate *r, double t0)
{
    if (!r->latency)
        return;
    if (r->nlat == r->caplat) {
        size_t cap = r->caplat ? r->caplat * 2 : 65536;
        double *p = realloc(r->lat, cap * sizeof(*p));
        if (p == NULL)
            die("realloc");
        r->lat = p;
        r->caplat = cap;
    }
    r->lat[r->nlat++] = (now() - t0) * 1e6;
}

static void slot_watch(struct rate *r, struct slot *s, uint32_t events)
{
    struct epoll_event ev;
    ev.events = events;
    ev.data.ptr = s;
    epoll_ctl(r->ep, EPOLL_CTL_MOD, s->fd, &ev);
}

static void slot_fail(struct rate *r, struct slot *s)
{
    if (s->fd >= 0) {
        close(s->fd); /* closing removes it from epoll */
        s->fd = -1;
    }
    s->st = r->hold ? SLOT_DEAD : SLOT_IDLE;
    s->t0_set = 0;
    r->errors++;
}

/* The slot's job is over (echo read back, refusal seen): close and count. */
static void slot_done(struct rate *r, struct slot *s)
{
    lat_add(r, s->t0);
    close(s->fd);
    s->fd = -1;
    s->st = SLOT_IDLE;
    r->done++;
}

/* The job is done; with --wait-eof the server closes first (so the TIME_WAIT
 * is on its side, not on the client's ports) and the slot is done at EOF. */
static void slot_finish(struct rate *r, struct slot *s)
{
    if (r->wait_eof) {
        s->st = SLOT_DRAIN;
        return;
    }
    slot_done(r, s);
}

static void slot_send(struct rate *r, struct slot *s)
{
    ssize_t w;

    if (r->size == 0) { /* idle --size 0: no echo */
        s->st = SLOT_HELD;
        r->held++;
        slot_watch(r, s, EPOLLIN);
        return;
    }
    w = write(s->fd, r->msg, r->size);
    if (w != (ssize_t)r->size) {
        slot_fail(r, s);
        return;
    }
    s->st = SLOT_READING;
    s->got = 0;
    slot_watch(r, s, EPOLLIN);
}

static void http_send(struct rate *r, struct slot *s)
{
    ssize_t w;

    if (!s->t0_set)
        s->t0 = now();
    s->t0_set = 1;
    w = write(s->fd, r->hreq, r->hreq_len);
    if (w != (ssize_t)r->hreq_len) {
        slot_fail(r, s);
        return;
    }
    s->st = SLOT_HTTP;
    s->got = 0;
    s->head_done = s->to_eof = s->close_after = 0;
    s->body_left = 0;
    slot_watch(r, s, EPOLLIN);
}

/* The tunnel (or plain connection) is open: do the job. */
static void slot_open(struct rate *r, struct slot *s)
{
    if (r->mode == RUN_HTTP)
        http_send(r, s);
    else if (r->mode == RUN_DENY)
        slot_fail(r, s); /* a tunnel we expected to be refused was opened */
    else
        slot_send(r, s);
}

/* Connected: start the proxy handshake, or go straight to the job. */
static void slot_connected(struct rate *r, struct slot *s)
{
    const void *p;
    size_t n;
    ssize_t w;

    if (r->via.kind == VIA_NONE) {
        slot_open(r, s);
        return;
    }
    if (r->via.kind == VIA_HTTP) {
        p = r->via.req;
        n = r->via.req_len;
        s->st = SLOT_HEAD;
    } else {
        p = socks_greeting;
        n = sizeof(socks_greeting);
        s->st = SLOT_S5_METHOD;
    }
    w = write(s->fd, p, n);
    if (w != (ssize_t)n) {
        slot_fail(r, s);
        return;
    }
    s->got = 0;
    slot_watch(r, s, EPOLLIN);
}

/* Starts a connection; returns 0, or 1 when it must be retried later. */
static int slot_connect(struct rate *r, struct slot *s)
{
    struct epoll_event ev;
    int rc;

    if (!s->t0_set) {
        s->t0 = now();
        s->t0_set = r->mode == RUN_HTTP;
    }
    s->reqs = 0;
    s->fd = socket(r->t.family, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (s->fd < 0)
        die("socket");
    tune(s->fd, r->t.family);
    rc = connect(s->fd, (struct sockaddr *)&r->t.ss, r->t.len);
    if (rc < 0 && errno == EAGAIN) { /* unix: backlog full */
        close(s->fd);
        s->fd = -1;
        s->st = SLOT_IDLE;
        return 1;
    }
    if (rc < 0 && errno != EINPROGRESS) {
        slot_fail(r, s);
        return 0;
    }
    r->conns++;
    s->st = SLOT_CONNECTING;
    ev.events = EPOLLOUT;
    ev.data.ptr = s;
    epoll_ctl(r->ep, EPOLL_CTL_ADD, s->fd, &ev);
    if (rc == 0)
        slot_connected(r, s);
    return 0;
}

/* Reads what is available into s->buf up to `want` bytes in total. Returns
 * 1 with data, 0 when it would block, -1 on EOF or error (slot failed). */
static int slot_fill(struct rate *r, struct slot *s, size_t want)
{
    ssize_t n = read(s->fd, s->buf + s->got, want - s->got);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return 0;
    if (n <= 0) {
        slot_fail(r, s);
        return -1;
    }
    s->got += (size_t)n;
    return 1;
}

static void slot_head(struct rate *r, struct slot *s)
{
    size_t end;
    int status;

    if (slot_fill(r, s, sizeof(s->buf)) <= 0)
        return;
    end = head_end(s->buf, s->got);
    if (end == 0) {
        if (s->got == sizeof(s->buf))
            slot_fail(r, s);
        return;
    }
    status = http_status(s->buf, s->got);
    if (r->mode == RUN_DENY) {
        if (status == 403)
            slot_finish(r, s);
        else
            slot_fail(r, s);
        return;
    }
    if (status != 200 || end != s->got) { /* refused, or bytes before we sent any */
        slot_fail(r, s);
        return;
    }
    slot_open(r, s);
}

static void slot_socks(struct rate *r, struct slot *s)
{
    unsigned char *b = (unsigned char *)s->buf;

    if (s->st == SLOT_S5_METHOD) {
        if (slot_fill(r, s, 2) <= 0 || s->got < 2)
            return;
        if (b[0] != 5 || b[1] != 0) {
            slot_fail(r, s);
            return;
        }
        if (write(s->fd, r->via.req, r->via.req_len) != (ssize_t)r->via.req_len) {
            slot_fail(r, s);
            return;
        }
        s->st = SLOT_S5_REPLY;
        s->got = 0;
        s->need = 5;
        return;
    }
    /* the reply is read exactly, never into the tunnel's bytes */
    if (slot_fill(r, s, s->need) <= 0 || s->got < s->need)
        return;
    if (s->need == 5) {
        if (b[0] != 5) {
            slot_fail(r, s);
            return;
        }
        if (b[1] != 0) { /* refused */
            if (r->mode == RUN_DENY && b[1] == 2)
                slot_finish(r, s);
            else
                slot_fail(r, s);
            return;
        }
        s->need = b[3] == 1 ? 10 : b[3] == 4 ? 22 : 5 + (size_t)b[4] + 2;
        if (s->got < s->need)
            return;
    }
    slot_open(r, s);
}

/* Parses a complete response head in s->buf[0..end). Returns 0, or -1 for
 * an answer we do not expect (not 200, chunked). */
static int http_parse_head(struct slot *s, size_t end)
{
    const char *p = s->buf, *lim = s->buf + end;
    int keepalive = 0, http10;

    if (http_status(s->buf, end) != 200)
        return -1;
    http10 = s->buf[7] == '0';
    s->to_eof = 1;
    while (p < lim) {
        const char *nl = memchr(p, '\n', (size_t)(lim - p));
        size_t len;
        if (nl == NULL)
            break;
        len = (size_t)(nl - p);
        if (len > 15 && strncasecmp(p, "content-length:", 15) == 0) {
            s->body_left = strtoul(p + 15, NULL, 10);
            s->to_eof = 0;
        } else if (len > 11 && strncasecmp(p, "connection:", 11) == 0) {
            if (ci_contains(p, len, "close"))
                s->close_after = 1;
            if (ci_contains(p, len, "keep-alive"))
                keepalive = 1;
        } else if (len > 18 && strncasecmp(p, "transfer-encoding:", 18) == 0) {
            return -1;
        }
        p = nl + 1;
    }
    if (http10 && !keepalive)
        s->close_after = 1;
    if (s->to_eof)
        s->close_after = 1;
    return 0;
}

static void http_complete(struct rate *r, struct slot *s)
{
    lat_add(r, s->t0);
    s->t0_set = 0;
    s->reqs++;
    r->done++;
    if (s->close_after) { /* let the server close first, then reconnect */
        s->st = SLOT_DRAIN;
        return;
    }
    http_send(r, s);
}

static void slot_http(struct rate *r, struct slot *s)
{
    size_t cap = s->head_done ? sizeof(s->buf) : sizeof(s->buf) - s->got;
    ssize_t n = read(s->fd, s->buf + (s->head_done ? 0 : s->got), cap);

    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return;
    if (n <= 0) {
        if (s->head_done && s->to_eof && n == 0) {
            lat_add(r, s->t0);
            s->t0_set = 0;
            r->done++;
            close(s->fd);
            s->fd = -1;
            s->st = SLOT_IDLE;
            return;
        }
        if (n == 0 && !s->head_done && s->got == 0 && s->reqs > 0) {
            /* the server closed a kept-alive connection: ask again */
            close(s->fd);
            s->fd = -1;
            s->st = SLOT_IDLE;
            return;
        }
        slot_fail(r, s);
        return;
    }
    if (s->head_done) {
        if (s->to_eof)
            return;
        if ((size_t)n > s->body_left) {
            slot_fail(r, s);
            return;
        }
        s->body_left -= (size_t)n;
    } else {
        size_t end;
        s->got += (size_t)n;
        end = head_end(s->buf, s->got);
        if (end == 0) {
            if (s->got == sizeof(s->buf))
                slot_fail(r, s);
            return;
        }
        if (http_parse_head(s, end) < 0) {
            slot_fail(r, s);
            return;
        }
        s->head_done = 1;
        if (s->to_eof)
            return;
        if (s->got - end > s->body_left) { /* more than the body: not pipelined */
            slot_fail(r, s);
            return;
        }
        s->body_left -= s->got - end;
    }
    if (s->body_left == 0)
        http_complete(r, s);
}

static void slot_event(struct rate *r, struct slot *s)
{
    switch (s->st) {
    case SLOT_CONNECTING: {
        int err = 0;
        socklen_t len = sizeof(err);
        if (getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err != 0) {
            slot_fail(r, s);
            return;
        }
        slot_connected(r, s);
        return;
    }
    case SLOT_HEAD:
        slot_head(r, s);
        return;
    case SLOT_S5_METHOD:
    case SLOT_S5_REPLY:
        slot_socks(r, s);
        return;
    case SLOT_READING: {
        char buf[4096];
        ssize_t n = read(s->fd, buf, sizeof(buf));
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n <= 0) {
            slot_fail(r, s);
            return;
        }
        s->got += (size_t)n;
        if (s->got >= r->size) {
            if (r->hold) {
                lat_add(r, s->t0);
                s->st = SLOT_HELD;
                r->held++;
                return;
            }
            slot_finish(r, s);
        }
        return;
    }
    case SLOT_DRAIN: {
        char buf[4096];
        ssize_t n = read(s->fd, buf, sizeof(buf));
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n < 0) {
            slot_fail(r, s);
            return;
        }
        if (n > 0)
            return;
        if (r->mode == RUN_HTTP) { /* counted already */
            close(s->fd);
            s->fd = -1;
            s->st = SLOT_IDLE;
            return;
        }
        slot_done(r, s);
        return;
    }
    case SLOT_HTTP:
        slot_http(r, s);
        return;
    case SLOT_HELD: {
        char buf[256];
        ssize_t n = read(s->fd, buf, sizeof(buf));
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n <= 0) {
            close(s->fd);
            s->fd = -1;
            s->st = SLOT_DEAD;
            r->closed++;
        }
        return;
    }
    default:
        return;
    }
}

struct rate_thread {
    pthread_t th;
    struct rate r;
    unsigned clients;
    double seconds;
};

/* One epoll thread running its share of the clients until the deadline. */
static void *rate_run(void *arg)
{
    struct rate_thread *rt = arg;
    struct rate *r = &rt->r;
    struct epoll_event evs[MAX_EVENTS];
    struct slot *slots;
    double end = now() + rt->seconds;
    unsigned i;

    r->ep = epoll_create1(0);
    if (r->ep < 0)
        die("epoll_create1");
    slots = calloc(rt->clients > 0 ? rt->clients : 1, sizeof(*slots));
    if (slots == NULL)
        die("calloc");
    for (i = 0; i < rt->clients; i++)
        slots[i].fd = -1;
    while (r->budget > 0 ? r->done + r->errors < r->budget : now() < end) {
        int n, k;
        r->retry = 0;
        for (i = 0; i < rt->clients; i++) {
            if (slots[i].st != SLOT_IDLE || (r->budget > 0 && r->started >= r->budget))
                continue;
            if (slot_connect(r, &slots[i]) != 0)
                r->retry++;
            else
                r->started++;
        }
        n = epoll_wait(r->ep, evs, MAX_EVENTS, r->retry > 0 ? 1 : 100);
        for (k = 0; k < n; k++)
            slot_event(r, evs[k].data.ptr);
    }
    for (i = 0; i < rt->clients; i++) {
        if (slots[i].fd >= 0)
            close(slots[i].fd);
    }
    free(slots);
    close(r->ep);
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Sorts lat and prints " p50_us=X p99_us=Y". */
static void print_latency(double *lat, size_t n)
{
    if (n == 0) {
        printf(" p50_us=0 p99_us=0");
        return;
    }
    qsort(lat, n, sizeof(*lat), cmp_double);
    printf(" p50_us=%.1f p99_us=%.1f", lat[(size_t)((double)(n - 1) * 0.50)],
           lat[(size_t)((double)(n - 1) * 0.99)]);
}

struct run_opts {
    unsigned clients;
    double seconds;
    unsigned long long count; /* rate --count: exactly this many jobs, then stop (0: by time) */
    size_t size;
    unsigned threads;
    int latency;
    int wait_eof;
    enum run_mode mode;
    const struct via *via;
    const char *hreq;
};

/* clients are spread over threads (default: one per CPU, at most one per
 * client), so the generator is not what limits the rate. */
static int rate(const char *endpoint, const struct run_opts *o)
{
    struct rate_thread *rts;
    unsigned long long done = 0, errors = 0, conns = 0;
    double t0, t1, *lat = NULL;
    size_t nlat = 0;
    unsigned i, threads = o->threads, clients = o->clients;

    if (o->size == 0 || o->size > sizeof(rts->r.msg) || clients == 0 || clients > MAX_CLIENTS) {
        fprintf(stderr, "loadgen: rate: size 1-4096, clients 1-%d\n", MAX_CLIENTS);
        return 2;
    }
    if (threads == 0) {
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        threads = ncpu > 0 ? (unsigned)ncpu : 1;
    }
    if (threads > clients)
        threads = clients;
    rts = calloc(threads, sizeof(*rts));
    if (rts == NULL)
        die("calloc");
    t0 = now();
    for (i = 0; i < threads; i++) {
        struct rate_thread *rt = &rts[i];
        parse_target(endpoint, 0, &rt->r.t);
        rt->r.via = *o->via;
        rt->r.mode = o->mode;
        rt->r.latency = o->latency;
        rt->r.wait_eof = o->wait_eof;
        rt->r.size = o->size;
        memset(rt->r.msg, 'r', o->size);
        rt->r.hreq = o->hreq;
        rt->r.hreq_len = o->hreq != NULL ? strlen(o->hreq) : 0;
        rt->clients = clients / threads + (i < clients % threads ? 1 : 0);
        rt->seconds = o->seconds;
        rt->r.budget = o->count / threads + (i < o->count % threads ? 1 : 0);
        if (o->count > 0 && rt->r.budget == 0)
            rt->clients = 0; /* fewer jobs than threads: this one has none */
        if (pthread_create(&rt->th, NULL, rate_run, rt) != 0)
            die("pthread_create");
    }
    for (i = 0; i < threads; i++) {
        pthread_join(rts[i].th, NULL);
        done += rts[i].r.done;
        errors += rts[i].r.errors;
        conns += rts[i].r.conns;
    }
    t1 = now();
    if (o->latency) {
        size_t total = 0;
        for (i = 0; i < threads; i++)
            total += rts[i].r.nlat;
        lat = malloc((total ? total : 1) * sizeof(*lat));
        if (lat == NULL)
            die("malloc");
        for (i = 0; i < threads; i++) {
            if (rts[i].r.nlat > 0)
                memcpy(lat + nlat, rts[i].r.lat, rts[i].r.nlat * sizeof(*lat));
            nlat += rts[i].r.nlat;
            free(rts[i].r.lat);
        }
    }
    if (o->mode == RUN_HTTP)
        printf("http clients=%u threads=%u seconds=%.3f reqs=%llu req_s=%.1f conns=%llu "
               "errors=%llu",
               clients, threads, t1 - t0, done, (double)done / (t1 - t0), conns, errors);
    else
        printf("rate clients=%u threads=%u seconds=%.3f conns=%llu conn_s=%.1f errors=%llu",
               clients, threads, t1 - t0, done, (double)done / (t1 - t0), errors);
    if (o->latency)
        print_latency(lat, nlat);
    printf("\n");
    free(lat);
    free(rts);
    return 0;
}

static volatile sig_atomic_t stop_flag;

static void on_stop(int sig)
{
    (void)sig;
    stop_flag = 1;
}

/* idle: opens `count` tunnels, at most `parallel` at once, then holds them
 * until SIGTERM/SIGINT. */
static int idle(const char *endpoint, const struct via *via, unsigned count, unsigned parallel,
                size_t size, double seconds)
{
    struct rate r;
    struct epoll_event evs[MAX_EVENTS];
    struct slot *slots;
    struct sigaction sa;
    unsigned next = 0, i;
    double t0 = now(), t1;

    if (via->kind == VIA_NONE || count == 0 || count > MAX_IDLE || size > sizeof(r.msg) ||
        parallel == 0) {
        fprintf(stderr, "loadgen: idle: --proxy and --target needed, count 1-%d, size 0-4096\n",
                MAX_IDLE);
        return 2;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_stop;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    memset(&r, 0, sizeof(r));
    parse_target(endpoint, 0, &r.t);
    r.via = *via;
    r.mode = RUN_ECHO;
    r.hold = 1;
    r.size = size;
    memset(r.msg, 'i', size);
    r.ep = epoll_create1(0);
    if (r.ep < 0)
        die("epoll_create1");
    slots = calloc(count, sizeof(*slots));
    if (slots == NULL)
        die("calloc");
    for (i = 0; i < count; i++)
        slots[i].fd = -1;
    while (r.held + r.errors < count && !stop_flag && now() < t0 + seconds) {
        int n, k, wait = 100;
        while (next < count && next - (unsigned)(r.held + r.errors) < parallel) {
            if (slot_connect(&r, &slots[next]) != 0) {
                wait = 1;
                break;
            }
            next++;
        }
        n = epoll_wait(r.ep, evs, MAX_EVENTS, wait);
        for (k = 0; k < n; k++)
            slot_event(&r, evs[k].data.ptr);
    }
    t1 = now();
    printf("idle tunnels=%llu errors=%llu pending=%llu seconds=%.3f\n", r.held, r.errors,
           (unsigned long long)next - r.held - r.errors, t1 - t0);
    fflush(stdout);
    while (!stop_flag) {
        int n = epoll_wait(r.ep, evs, MAX_EVENTS, 200), k;
        for (k = 0; k < n; k++)
            slot_event(&r, evs[k].data.ptr);
    }
    printf("idle closed_while_idle=%llu\n", r.closed);
    fflush(stdout);
    return 0;
}

/* ------------------------------------------------------------------------ */

static void usage(void)
{
    fputs("usage: loadgen serve-echo ENDPOINT [--close-after BYTES]\n"
          "       loadgen serve-sink|serve-source|serve-http ENDPOINT\n"
          "       loadgen bulk ENDPOINT [--bytes N] [--seconds S] [--echo] [--download] [VIA]\n"
          "       loadgen rate ENDPOINT [--clients C] [--seconds D] [--count N] [--size BYTES] "
          "[--threads N] [--latency] [--wait-eof] [--expect-deny] [VIA]\n"
          "       loadgen http ENDPOINT [--target HOST:PORT] [--proxy http] [--clients C] "
          "[--seconds D] [--count N] [--threads N]\n"
          "       loadgen idle ENDPOINT --count N [--parallel P] [--size BYTES] [--seconds S] VIA\n"
          "       VIA: --proxy http|socks5 --target HOST:PORT\n",
          stderr);
}

int main(int argc, char **argv)
{
    unsigned long long bytes = 1024ull * 1024 * 1024;
    double seconds = 0;
    unsigned long clients = 1, count = 0, parallel = 256;
    unsigned long size = 100, threads = 0;
    int echo = 0, download = 0, latency = 0, expect_deny = 0, wait_eof = 0, size_set = 0, i;
    const char *proxy = NULL, *target_arg = NULL;
    struct via via;
    char *end;

    signal(SIGPIPE, SIG_IGN);
    if (argc < 3) {
        usage();
        return 2;
    }
    for (i = 3; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--echo") == 0) {
            echo = 1;
            continue;
        }
        if (strcmp(a, "--download") == 0) {
            download = 1;
            continue;
        }
        if (strcmp(a, "--latency") == 0) {
            latency = 1;
            continue;
        }
        if (strcmp(a, "--expect-deny") == 0) {
            expect_deny = 1;
            continue;
        }
        if (strcmp(a, "--wait-eof") == 0) {
            wait_eof = 1;
            continue;
        }
        if (v == NULL) {
            usage();
            return 2;
        }
        i++;
        errno = 0;
        if (strcmp(a, "--proxy") == 0) {
            proxy = v;
            continue;
        }
        if (strcmp(a, "--target") == 0) {
            target_arg = v;
            continue;
        }
        if (strcmp(a, "--bytes") == 0)
            bytes = strtoull(v, &end, 10);
        else if (strcmp(a, "--seconds") == 0)
            seconds = strtod(v, &end);
        else if (strcmp(a, "--clients") == 0)
            clients = strtoul(v, &end, 10);
        else if (strcmp(a, "--size") == 0) {
            size = strtoul(v, &end, 10);
            size_set = 1;
        } else if (strcmp(a, "--threads") == 0)
            threads = strtoul(v, &end, 10);
        else if (strcmp(a, "--count") == 0)
            count = strtoul(v, &end, 10);
        else if (strcmp(a, "--parallel") == 0)
            parallel = strtoul(v, &end, 10);
        else if (strcmp(a, "--close-after") == 0)
            echo_close_after = strtoull(v, &end, 10);
        else
            end = (char *)(uintptr_t)v;
        if (errno != 0 || end == v || *end != '\0') {
            usage();
            return 2;
        }
    }
    if (strcmp(argv[1], "serve-echo") == 0)
        serve(argv[2], SERVE_ECHO);
    if (echo_close_after > 0) { /* serve-echo only */
        usage();
        return 2;
    }
    if (strcmp(argv[1], "serve-sink") == 0)
        serve(argv[2], SERVE_SINK);
    if (strcmp(argv[1], "serve-source") == 0)
        serve(argv[2], SERVE_SOURCE);
    if (strcmp(argv[1], "serve-http") == 0)
        serve_http(argv[2]);
    if (strcmp(argv[1], "http") == 0) {
        /* --target without --proxy: the Host header of origin-form requests */
        static char req[1024];
        const char *host = target_arg;
        struct run_opts o;
        int n;
        if (proxy != NULL && strcmp(proxy, "http") != 0) {
            usage();
            return 2;
        }
        via_setup(&via, proxy, target_arg, 0);
        if (proxy == NULL && target_arg != NULL) /* checks TARGET is loopback */
            via_setup(&via, "http", target_arg, 0);
        if (host == NULL)
            host = strncmp(argv[2], "tcp:", 4) == 0 ? argv[2] + 4 : "localhost";
        n = proxy != NULL
                ? snprintf(req, sizeof(req), "GET http://%s/ HTTP/1.1\r\nHost: %s\r\n\r\n",
                           via.authority, via.authority)
                : snprintf(req, sizeof(req), "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", host);
        if (n < 0 || (size_t)n >= sizeof(req))
            return 2;
        via.kind = VIA_NONE; /* plain HTTP: no tunnel */
        memset(&o, 0, sizeof(o));
        o.clients = (unsigned)clients;
        o.seconds = seconds > 0 ? seconds : 5.0;
        o.size = 1;
        o.threads = (unsigned)threads;
        o.latency = 1;
        o.count = count;
        o.mode = RUN_HTTP;
        o.via = &via;
        o.hreq = req;
        return rate(argv[2], &o);
    }
    via_setup(&via, proxy, target_arg, expect_deny);
    if (strcmp(argv[1], "bulk") == 0) {
        if (!echo && seconds <= 0 && bytes == 0)
            return 2;
        if (download && echo) {
            usage();
            return 2;
        }
        return bulk(argv[2], bytes, seconds, echo, download, &via);
    }
    if (strcmp(argv[1], "rate") == 0) {
        struct run_opts o;
        memset(&o, 0, sizeof(o));
        o.clients = (unsigned)clients;
        o.seconds = seconds > 0 ? seconds : 5.0;
        o.size = (size_t)size;
        o.threads = (unsigned)threads;
        o.latency = latency;
        o.wait_eof = wait_eof;
        o.count = count;
        o.mode = expect_deny ? RUN_DENY : RUN_ECHO;
        o.via = &via;
        if (expect_deny && via.kind == VIA_NONE) {
            usage();
            return 2;
        }
        return rate(argv[2], &o);
    }
    if (strcmp(argv[1], "idle") == 0)
        return idle(argv[2], &via, (unsigned)count, (unsigned)parallel,
                    size_set ? (size_t)size : 100, seconds > 0 ? seconds : 120.0);
    usage();
    return 2;
}
