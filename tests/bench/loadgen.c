/* tests/bench/loadgen.c - load generator and origin servers for the relay
 * benchmark (tests/bench/bridge.sh).
 *
 *   loadgen serve-echo ENDPOINT   echo every byte back; half-closes after EOF
 *   loadgen serve-sink ENDPOINT   read and drop everything; close after EOF
 *       ENDPOINT is tcp:127.0.0.1:0 (any port) or unix:PATH; prints
 *       "listening ENDPOINT" (with the bound port) on stdout, then serves
 *       until killed.
 *
 *   loadgen bulk ENDPOINT [--bytes N] [--seconds S] [--echo]
 *       one connection: sends N bytes (or for S seconds), half-closes, and
 *       waits for the server's EOF, so every byte has arrived when the clock
 *       stops. --echo: a second thread reads the echo back as it comes (the
 *       bytes cross the path twice). Prints
 *       "bulk bytes=B seconds=T mib_s=X".
 *
 *   loadgen rate ENDPOINT [--clients C] [--seconds D] [--size 100] [--threads N]
 *       C clients, each in a loop: connect, write SIZE bytes, read the
 *       SIZE-byte echo, close; for D seconds, spread over N epoll threads
 *       (default: one per CPU, at most C).
 *       Prints "rate clients=C threads=N seconds=T conns=N conn_s=X errors=E".
 *
 * Servers are single epoll threads, the rate client one epoll thread per CPU,
 * all with non-blocking sockets, and bulk uses one blocking thread per
 * direction, so loadgen costs about what the kernel's socket work costs and
 * is not the bottleneck of what it measures. Linux only (epoll). Only loopback and unix endpoints
 * are accepted.
 */
#include "bridge/bridge.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define CHUNK (256 * 1024)
#define MAX_EVENTS 256
#define MAX_CLIENTS 4096

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

static int set_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
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
/* Servers                                                                   */

struct sconn {
    int fd;
    size_t off, len; /* echo: bytes of buf still to write */
    int eof;
    char buf[CHUNK];
};

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
            c->off = c->len = 0;
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

static _Noreturn void serve(const char *endpoint, int echo)
{
    struct epoll_event evs[MAX_EVENTS], ev;
    struct target t;
    int lfd, ep, one = 1, i, n;
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
                    c = malloc(sizeof(*c));
                    if (c == NULL) {
                        close(cfd);
                        continue;
                    }
                    c->fd = cfd;
                    c->off = c->len = 0;
                    c->eof = 0;
                    set_nonblock(cfd);
                    tune(cfd, t.family);
                    ev.events = EPOLLIN;
                    ev.data.ptr = c;
                    epoll_ctl(ep, EPOLL_CTL_ADD, cfd, &ev);
                    if (sconn_run(ep, c, echo) < 0)
                        sconn_close(ep, c);
                }
                continue;
            }
            if (sconn_run(ep, c, echo) < 0)
                sconn_close(ep, c);
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

static int bulk(const char *endpoint, unsigned long long bytes, double seconds, int echo)
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
/* rate                                                                      */

enum slot_state { SLOT_IDLE, SLOT_CONNECTING, SLOT_READING };

struct slot {
    int fd;
    enum slot_state st;
    size_t got;
};

struct rate {
    struct target t;
    int ep;
    size_t size;
    char msg[4096];
    unsigned long long done, errors;
    unsigned retry; /* slots waiting to reconnect (EAGAIN from a full unix backlog) */
};

static void slot_fail(struct rate *r, struct slot *s)
{
    if (s->fd >= 0) {
        close(s->fd); /* closing removes it from epoll */
        s->fd = -1;
    }
    s->st = SLOT_IDLE;
    r->errors++;
}

static void slot_send(struct rate *r, struct slot *s)
{
    struct epoll_event ev;
    ssize_t w = write(s->fd, r->msg, r->size);

    if (w != (ssize_t)r->size) {
        slot_fail(r, s);
        return;
    }
    s->st = SLOT_READING;
    s->got = 0;
    ev.events = EPOLLIN;
    ev.data.ptr = s;
    epoll_ctl(r->ep, EPOLL_CTL_MOD, s->fd, &ev);
}

/* Starts a connection; returns 0, or 1 when it must be retried later. */
static int slot_connect(struct rate *r, struct slot *s)
{
    struct epoll_event ev;
    int rc;

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
    s->st = SLOT_CONNECTING;
    ev.events = EPOLLOUT;
    ev.data.ptr = s;
    epoll_ctl(r->ep, EPOLL_CTL_ADD, s->fd, &ev);
    if (rc == 0)
        slot_send(r, s);
    return 0;
}

static void slot_event(struct rate *r, struct slot *s)
{
    if (s->st == SLOT_CONNECTING) {
        int err = 0;
        socklen_t len = sizeof(err);
        if (getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err != 0) {
            slot_fail(r, s);
            return;
        }
        slot_send(r, s);
        return;
    }
    if (s->st == SLOT_READING) {
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
            close(s->fd);
            s->fd = -1;
            s->st = SLOT_IDLE;
            r->done++;
        }
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
    slots = calloc(rt->clients, sizeof(*slots));
    if (slots == NULL)
        die("calloc");
    for (i = 0; i < rt->clients; i++)
        slots[i].fd = -1;
    while (now() < end) {
        int n, k;
        r->retry = 0;
        for (i = 0; i < rt->clients; i++) {
            if (slots[i].st == SLOT_IDLE)
                r->retry += (unsigned)slot_connect(r, &slots[i]);
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

/* clients are spread over threads (default: one per CPU, at most one per
 * client), so the generator is not what limits the rate. */
static int rate(const char *endpoint, unsigned clients, double seconds, size_t size,
                unsigned threads)
{
    struct rate_thread *rts;
    unsigned long long done = 0, errors = 0;
    double t0, t1;
    unsigned i;

    if (size == 0 || size > sizeof(rts->r.msg) || clients == 0 || clients > MAX_CLIENTS) {
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
        rt->r.size = size;
        memset(rt->r.msg, 'r', size);
        rt->clients = clients / threads + (i < clients % threads ? 1 : 0);
        rt->seconds = seconds;
        if (pthread_create(&rt->th, NULL, rate_run, rt) != 0)
            die("pthread_create");
    }
    for (i = 0; i < threads; i++) {
        pthread_join(rts[i].th, NULL);
        done += rts[i].r.done;
        errors += rts[i].r.errors;
    }
    t1 = now();
    free(rts);
    printf("rate clients=%u threads=%u seconds=%.3f conns=%llu conn_s=%.1f errors=%llu\n", clients,
           threads, t1 - t0, done, (double)done / (t1 - t0), errors);
    return 0;
}

/* ------------------------------------------------------------------------ */

static void usage(void)
{
    fputs("usage: loadgen serve-echo|serve-sink ENDPOINT\n"
          "       loadgen bulk ENDPOINT [--bytes N] [--seconds S] [--echo]\n"
          "       loadgen rate ENDPOINT [--clients C] [--seconds D] [--size BYTES] "
          "[--threads N]\n",
          stderr);
}

int main(int argc, char **argv)
{
    unsigned long long bytes = 1024ull * 1024 * 1024;
    double seconds = 0;
    unsigned long clients = 1;
    unsigned long size = 100, threads = 0;
    int echo = 0, i;
    char *end;

    signal(SIGPIPE, SIG_IGN);
    if (argc < 3) {
        usage();
        return 2;
    }
    if (strcmp(argv[1], "serve-echo") == 0)
        serve(argv[2], 1);
    if (strcmp(argv[1], "serve-sink") == 0)
        serve(argv[2], 0);
    for (i = 3; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--echo") == 0) {
            echo = 1;
            continue;
        }
        if (v == NULL) {
            usage();
            return 2;
        }
        i++;
        errno = 0;
        if (strcmp(a, "--bytes") == 0)
            bytes = strtoull(v, &end, 10);
        else if (strcmp(a, "--seconds") == 0)
            seconds = strtod(v, &end);
        else if (strcmp(a, "--clients") == 0)
            clients = strtoul(v, &end, 10);
        else if (strcmp(a, "--size") == 0)
            size = strtoul(v, &end, 10);
        else if (strcmp(a, "--threads") == 0)
            threads = strtoul(v, &end, 10);
        else
            end = (char *)(uintptr_t)v;
        if (errno != 0 || end == v || *end != '\0') {
            usage();
            return 2;
        }
    }
    if (strcmp(argv[1], "bulk") == 0) {
        if (!echo && seconds <= 0 && bytes == 0)
            return 2;
        return bulk(argv[2], bytes, seconds, echo);
    }
    if (strcmp(argv[1], "rate") == 0)
        return rate(argv[2], (unsigned)clients, seconds > 0 ? seconds : 5.0, (size_t)size,
                    (unsigned)threads);
    usage();
    return 2;
}
