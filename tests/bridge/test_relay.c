/* tests/bridge/test_relay.c - the relay and the dialer over real sockets.
 *
 * Every test runs its own loop with an unref'd watchdog and ends with
 * uv_loop_close() == 0 (teardown). Only 127.0.0.1, ::1 and unix sockets in a
 * mkdtemp directory are used; TCP ports are always 0 (kernel-chosen).
 *
 * A relay scenario has four sockets: a test client connects to a "front"
 * listener, whose accept callback plays the owner (struct owner): it
 * relay_init()s, accepts into r->a, connects b to the "upstream" listener
 * (a blocking connect, which loopback and unix sockets complete without an
 * accept, or the dialer), relay_open_b() and relay_start(). The upstream
 * listener accepts the other end as the test's upstream peer. Peers are
 * scripted per test through small hooks.
 *
 * Callbacks never use cmocka asserts (a longjmp out of uv_run leaves libuv
 * mid-iteration): they record the first unexpected event in sc->err, and the
 * test body asserts after uv_run() returned.
 *
 * The whole suite runs three times, once per way the relay moves bytes: the
 * copy path (RELAY_SPLICE_OFF), splice(2) from relay_start on
 * (RELAY_SPLICE_ALWAYS) and the default (RELAY_SPLICE_AUTO); sc_check()
 * asserts which path carried the bytes. SLUICE_TEST_RELAY_MODE=copy|splice|
 * auto runs one group only. Teardown also checks that the test left no file
 * descriptor open (dup()s and pipes of the splice path included).
 */
#include <setjmp.h> /* cmocka needs these first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <uv.h>

#include "bridge/bridge.h"
#include "bridge/forward.h"

#define WATCHDOG_MS 30000
#define MAX_EXTRA_FDS 64

#include "common/common.h"
#include "tests/fixture/loop.h"

/* ------------------------------------------------------------------------ */
/* Fixture                                                                   */

struct params {
    enum relay_kind ka, kb; /* client side, upstream side */
    int use_dialer;         /* b comes from dialer_start() instead of connect() */
    unsigned fail_nth;      /* splice fallback tests: the splice(2) call that fails */
    int fail_err;           /* ... and its errno */
};

/* How the relays of the running group move bytes (main() sets it). */
static enum relay_splice_mode test_mode = RELAY_SPLICE_OFF;

/* Open file descriptors of this process. */
static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int n = 0;

    if (d == NULL)
        return -1;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

struct sc;

struct fx {
    uv_loop_t loop;
    struct test_watchdog watchdog;
    char dir[80]; /* short: socket paths must fit sun_path */
    unsigned npaths;
    unsigned nopen; /* teardown: handles the test left open */
    uv_timer_t aux; /* a timer for the dialer tests */
    int nfds;       /* open fds before the test */
    const struct params *p;
    struct sc *sc;                /* freed in teardown, after the loop closed */
    int extra_fds[MAX_EXTRA_FDS]; /* raw sockets, closed in teardown */
    size_t nextra;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    const char *tmp = getenv("TMPDIR");

    if (f == NULL)
        return -1;
    f->p = *state; /* prestate: the test's parameters, or NULL */
    f->nfds = count_fds();
    snprintf(f->dir, sizeof(f->dir), "%s/sluice-test-relay-XXXXXX",
             tmp != NULL && tmp[0] != '\0' && strlen(tmp) < 60 ? tmp : "/tmp");
    if (mkdtemp(f->dir) == NULL) {
        free(f);
        return -1;
    }
    if (test_loop_init(&f->loop, &f->watchdog, WATCHDOG_MS, TEST_WATCHDOG_STOP) != 0) {
        free(f);
        return -1;
    }
    *state = f;
    return 0;
}

static void count_open(uv_handle_t *h, void *arg)
{
    struct fx *f = arg;

    if (!test_watchdog_is(&f->watchdog, h) && !uv_is_closing(h))
        f->nopen++;
}

static void close_any(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

static void path_n(const struct fx *f, unsigned i, char *buf, size_t len)
{
    snprintf(buf, len, "%s/s%u", f->dir, i);
}

static void sc_free(struct sc *sc);

static int teardown(void **state)
{
    struct fx *f = *state;
    unsigned i;
    int leaked, rc, nfds, nfds_before;
    size_t k;

    /* Handles the test left open (a failed test, or a leak). */
    uv_walk(&f->loop, count_open, f);
    leaked = f->nopen > 0;
    if (leaked)
        uv_walk(&f->loop, close_any, NULL);
    rc = test_loop_close(&f->loop, &f->watchdog);

    for (k = 0; k < f->nextra; k++)
        close(f->extra_fds[k]);
    for (i = 0; i < f->npaths; i++) {
        char p[256];

        path_n(f, i, p, sizeof(p));
        unlink(p);
    }
    rmdir(f->dir);
    sc_free(f->sc);
    relay_release_caches();       /* pooled pipes are fds too */
    relay_test_fail_splice(0, 0); /* no injected failure, splice allowed again */
    nfds = count_fds();
    nfds_before = f->nfds;
    free(f);
    assert_false(leaked); /* the test left handles open */
    assert_int_equal(rc, 0);
    /* every fd closed (exactly once: a second close() would have failed or
     * hit another test's descriptor, and shown up somewhere here) */
    assert_int_equal(nfds, nfds_before);
    return 0;
}

/* Runs the loop until nothing is left; fails if the watchdog had to stop it. */
static void run(struct fx *f)
{
    test_loop_run(&f->loop, &f->watchdog);
}

static void keep_fd(struct fx *f, int fd)
{
    assert_true(f->nextra < MAX_EXTRA_FDS);
    f->extra_fds[f->nextra++] = fd;
}

static void new_path(struct fx *f, char *buf, size_t len)
{
    path_n(f, f->npaths++, buf, len);
}

/* ------------------------------------------------------------------------ */
/* Data                                                                      */

static unsigned char *random_bytes(uint64_t seed, size_t len)
{
    unsigned char *p = malloc(len > 0 ? len : 1);
    uint64_t x = seed | 1;
    size_t i;

    assert_non_null(p);
    for (i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        p[i] = (unsigned char)(x >> 24);
    }
    return p;
}

/* ------------------------------------------------------------------------ */
/* Test peers                                                                */

union tstream {
    uv_handle_t h;
    uv_stream_t s;
    uv_tcp_t tcp;
    uv_pipe_t pipe;
};

struct peer {
    union tstream u;
    struct sc *sc;
    uv_connect_t creq;
    uv_shutdown_t sreq;
    char rbuf[64 * 1024];
    unsigned char *in; /* everything received */
    size_t in_len, in_cap;
    int inited, connected, eof, shut_done, closing, closed;
    int read_err, write_err;
    size_t writes_pending;
    void (*on_data)(struct peer *p, const unsigned char *d, size_t n); /* after appending */
    void (*on_eof)(struct peer *p);
};

struct tlisten {
    union tstream u;
    struct sc *sc;
    enum relay_kind kind;
    uint16_t port;  /* tcp */
    char path[108]; /* pipe */
    int inited;
    void (*on_conn)(struct tlisten *l);
};

struct owner {
    struct relay r;
    struct sc *sc;
    uv_write_t wreq;   /* owner's own handshake reply (close-before-start test) */
    uv_write_t wreq_b; /* owner's early bytes upstream (owner-writes-first test) */
    char rbuf[256];
};

struct sc {
    struct fx *f;
    enum relay_kind ka, kb;
    enum relay_splice_mode mode; /* the relay's r->splice (test_mode unless a test says) */
    unsigned idle_ms;
    int use_dialer, small_bufs, no_upstream;
    int expect_errors; /* peers may see resets */
    struct tlisten front, up;
    struct peer client, upstream;
    struct owner *owner; /* NULL once closed */
    void (*owner_accepted)(struct sc *sc, struct owner *o);
    void (*client_ready)(struct sc *sc);   /* client connected */
    void (*upstream_ready)(struct sc *sc); /* upstream accepted */
    char err[256];                         /* first unexpected event */

    /* relay outcome (copied in on_closed) */
    int nclosed;
    enum relay_end end;
    int status;
    uint64_t a_nread, b_nread, npauses, nspliced;

    /* dialer outcome */
    int ndial, dial_status;
    size_t dial_index;

    /* payloads: req goes client -> upstream, resp upstream -> client */
    unsigned char *req, *resp;
    size_t req_len, resp_len;
    unsigned char *early; /* owner-writes-first test: queued on b before relay_start */
    size_t early_len;

    /* a helper timer for scripted peers */
    uv_timer_t timer;
    int timer_inited;
    size_t next_pause; /* slow reader: pause reading at this many bytes */
    unsigned nslow;    /* slow reader: pauses done */
    unsigned ticks;    /* idle test: ticks done; reset-while-paused: phase */
    int alive_after_ticks;
    int reset_done;
    int resume_after_reset;

    /* close-before-start test */
    int owner_write_cbs, owner_write_before_closed, owner_timer_fired;

    /* owner-left-reading test */
    int owner_reads, owner_started;
    size_t owner_early; /* bytes after the header the owner read itself */
};

static void sc_free(struct sc *sc)
{
    if (sc == NULL)
        return;
    free(sc->req);
    free(sc->resp);
    free(sc->early);
    free(sc->client.in);
    free(sc->upstream.in);
    free(sc);
}

static void sc_err(struct sc *sc, const char *what, int status)
{
    if (sc->err[0] == '\0')
        snprintf(sc->err, sizeof(sc->err), "%s: %s", what,
                 status != 0 ? uv_strerror(status) : "unexpected");
}

static void timer_close(struct sc *sc)
{
    if (sc->timer_inited && !uv_is_closing((uv_handle_t *)&sc->timer))
        uv_close((uv_handle_t *)&sc->timer, NULL);
}

static void peer_on_close(uv_handle_t *h)
{
    struct peer *p = container_of(h, struct peer, u.h);

    p->closed = 1;
    if (p->sc->client.closed && (p->sc->upstream.closed || !p->sc->upstream.inited))
        timer_close(p->sc);
}

static void peer_close(struct peer *p)
{
    if (p->closing)
        return;
    p->closing = 1;
    uv_close(&p->u.h, peer_on_close);
}

static void peer_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct peer *p = container_of(h, struct peer, u.h);

    (void)suggested;
    buf->base = p->rbuf;
    buf->len = sizeof(p->rbuf);
}

static void peer_append(struct peer *p, const void *d, size_t n)
{
    if (p->in_len + n > p->in_cap) {
        size_t cap = p->in_cap > 0 ? p->in_cap : (size_t)64 * 1024;
        unsigned char *np;

        while (cap < p->in_len + n)
            cap *= 2;
        np = realloc(p->in, cap);
        if (np == NULL)
            abort();
        p->in = np;
        p->in_cap = cap;
    }
    memcpy(p->in + p->in_len, d, n);
    p->in_len += n;
}

static void peer_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct peer *p = container_of(s, struct peer, u.s);

    if (nread > 0) {
        peer_append(p, buf->base, (size_t)nread);
        if (p->on_data != NULL)
            p->on_data(p, (const unsigned char *)buf->base, (size_t)nread);
        return;
    }
    if (nread == 0)
        return;
    if (nread == UV_EOF) {
        p->eof = 1;
        if (p->on_eof != NULL)
            p->on_eof(p);
        else if (p->shut_done)
            peer_close(p);
        return;
    }
    p->read_err = (int)nread;
    peer_close(p);
}

static void peer_read_start(struct peer *p)
{
    int rc = uv_read_start(&p->u.s, peer_alloc, peer_read);

    if (rc < 0)
        sc_err(p->sc, "peer read start", rc);
}

struct twrite {
    uv_write_t req;
    struct peer *p;
    unsigned char data[];
};

static void peer_write_cb(uv_write_t *req, int status)
{
    struct twrite *w = container_of(req, struct twrite, req);
    struct peer *p = w->p;

    free(w);
    p->writes_pending--;
    if (status < 0) {
        if (p->write_err == 0)
            p->write_err = status;
        peer_close(p);
    }
}

static void peer_send(struct peer *p, const void *data, size_t len)
{
    struct twrite *w;
    uv_buf_t b;
    int rc;

    if (p->closing)
        return;
    w = malloc(sizeof(*w) + len);
    if (w == NULL)
        abort();
    w->p = p;
    memcpy(w->data, data, len);
    b = uv_buf_init((char *)w->data, (unsigned int)len);
    rc = uv_write(&w->req, &p->u.s, &b, 1, peer_write_cb);
    if (rc < 0) {
        free(w);
        sc_err(p->sc, "peer write", rc);
        peer_close(p);
        return;
    }
    p->writes_pending++;
}

static void peer_shutdown_cb(uv_shutdown_t *req, int status)
{
    struct peer *p = container_of(req, struct peer, sreq);

    if (status < 0) {
        if (!p->closing && !p->sc->expect_errors)
            sc_err(p->sc, "peer shutdown", status);
        peer_close(p);
        return;
    }
    p->shut_done = 1;
    if (p->eof)
        peer_close(p);
}

static void peer_shutdown(struct peer *p)
{
    int rc;

    if (p->closing)
        return;
    rc = uv_shutdown(&p->sreq, &p->u.s, peer_shutdown_cb);
    if (rc < 0) {
        sc_err(p->sc, "peer shutdown", rc);
        peer_close(p);
    }
}

static void peer_init(struct sc *sc, struct peer *p, enum relay_kind k)
{
    p->sc = sc;
    if (k == RELAY_PIPE)
        assert_int_equal(uv_pipe_init(&sc->f->loop, &p->u.pipe, 0), 0);
    else
        assert_int_equal(uv_tcp_init(&sc->f->loop, &p->u.tcp), 0);
    p->inited = 1;
}

/* on_eof hook: close at once (a peer that never shuts down). */
static void peer_close_on_eof(struct peer *p)
{
    peer_close(p);
}

/* ------------------------------------------------------------------------ */
/* Listeners and raw sockets                                                 */

static void tlisten_conn(uv_stream_t *s, int status)
{
    struct tlisten *l = container_of(s, struct tlisten, u.s);

    if (status < 0) {
        sc_err(l->sc, "listen", status);
        return;
    }
    l->on_conn(l);
}

static void tlisten_close(struct tlisten *l)
{
    if (l->inited && !uv_is_closing(&l->u.h))
        uv_close(&l->u.h, NULL);
}

static void tlisten_open(struct sc *sc, struct tlisten *l, enum relay_kind k, int small_rcvbuf,
                         void (*on_conn)(struct tlisten *l))
{
    uv_loop_t *loop = &sc->f->loop;

    l->sc = sc;
    l->kind = k;
    l->on_conn = on_conn;
    if (k == RELAY_TCP) {
        struct sockaddr_in sin;
        struct sockaddr_storage ss;
        int len = sizeof(ss);

        assert_int_equal(uv_tcp_init(loop, &l->u.tcp), 0);
        l->inited = 1;
        assert_int_equal(uv_ip4_addr("127.0.0.1", 0, &sin), 0);
        assert_int_equal(uv_tcp_bind(&l->u.tcp, (struct sockaddr *)&sin, 0), 0);
        if (small_rcvbuf) { /* inherited by accepted sockets; disables autotuning */
            uv_os_fd_t fd;
            int v = 16 * 1024;

            assert_int_equal(uv_fileno(&l->u.h, &fd), 0);
            assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v)), 0);
        }
        assert_int_equal(uv_tcp_getsockname(&l->u.tcp, (struct sockaddr *)&ss, &len), 0);
        memcpy(&sin, &ss, sizeof(sin));
        l->port = ntohs(sin.sin_port);
    } else {
        assert_int_equal(uv_pipe_init(loop, &l->u.pipe, 0), 0);
        l->inited = 1;
        new_path(sc->f, l->path, sizeof(l->path));
        assert_int_equal(uv_pipe_bind(&l->u.pipe, l->path), 0);
    }
    assert_int_equal(uv_listen(&l->u.s, 16, tlisten_conn), 0);
}

static void sin_loopback(struct sockaddr_in *sin, uint16_t port)
{
    memset(sin, 0, sizeof(*sin));
    sin->sin_family = AF_INET;
    sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sin->sin_port = htons(port);
}

static void sun_path(struct sockaddr_un *su, const char *path)
{
    memset(su, 0, sizeof(*su));
    su->sun_family = AF_UNIX;
    memcpy(su->sun_path, path, strlen(path) + 1);
}

/* Blocking connect of a new socket to the upstream listener. */
static int connect_upstream(struct sc *sc)
{
    int fd;

    if (sc->kb == RELAY_TCP) {
        struct sockaddr_in sin;

        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return -1;
        if (sc->small_bufs) {
            int v = 16 * 1024;
            (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v));
        }
        sin_loopback(&sin, sc->up.port);
        if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
            close(fd);
            return -1;
        }
    } else {
        struct sockaddr_un su;

        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return -1;
        sun_path(&su, sc->up.path);
        if (connect(fd, (struct sockaddr *)&su, sizeof(su)) < 0) {
            close(fd);
            return -1;
        }
    }
    return fd;
}

/* ------------------------------------------------------------------------ */
/* The owner                                                                 */

static void owner_closed(struct relay *r)
{
    struct owner *o = container_of(r, struct owner, r);
    struct sc *sc = r->data;

    sc->nclosed++;
    sc->end = r->end;
    sc->status = r->status;
    sc->a_nread = r->a.nread;
    sc->b_nread = r->b.nread;
    sc->npauses = r->npauses;
    sc->nspliced = r->nspliced;
    sc->owner = NULL;
    free(o);
}

static void owner_adopt_b(struct sc *sc, struct owner *o, int fd)
{
    int rc = relay_open_b(&o->r, fd);

    if (rc < 0) {
        sc_err(sc, "relay_open_b", rc);
        relay_close(&o->r, rc);
        return;
    }
    rc = relay_start(&o->r, sc->idle_ms);
    if (rc < 0) {
        sc_err(sc, "relay_start", rc);
        relay_close(&o->r, rc);
    }
}

static void on_dialed(void *arg, int status, int fd, size_t index)
{
    struct sc *sc = arg;

    sc->ndial++;
    sc->dial_status = status;
    sc->dial_index = index;
    if (sc->owner == NULL) {
        sc_err(sc, "dial callback after the relay closed", 0);
        if (fd >= 0)
            close(fd);
        return;
    }
    if (status < 0) {
        sc_err(sc, "dial", status);
        relay_close(&sc->owner->r, status);
        return;
    }
    owner_adopt_b(sc, sc->owner, fd); /* inside the dial callback: fd handoff */
}

static void owner_connect_b(struct sc *sc, struct owner *o)
{
    int fd = connect_upstream(sc);

    if (fd < 0) {
        sc_err(sc, "connect upstream", uv_translate_sys_error(errno));
        relay_close(&o->r, UV_ECONNREFUSED);
        return;
    }
    owner_adopt_b(sc, o, fd);
}

/* Default owner: connect b (connect() or the dialer), then start. */
static void owner_default(struct sc *sc, struct owner *o)
{
    if (sc->use_dialer) {
        struct dialer_target t;
        struct dialer *d;
        int rc;

        memset(&t, 0, sizeof(t));
        if (sc->kb == RELAY_PIPE) {
            t.is_unix = 1;
            t.path = sc->up.path;
        } else {
            t.addr.family = 4;
            t.addr.bytes[0] = 127;
            t.addr.bytes[3] = 1;
            t.port = sc->up.port;
        }
        rc = dialer_start(&d, &sc->f->loop, &t, 1, 5000, on_dialed, sc);
        if (rc < 0) {
            sc_err(sc, "dialer_start", rc);
            relay_close(&o->r, rc);
        } else if (sc->ndial != 0) {
            sc_err(sc, "dial callback inside dialer_start", 0);
        }
        return;
    }
    owner_connect_b(sc, o);
}

static void front_conn(struct tlisten *l)
{
    struct sc *sc = l->sc;
    struct owner *o = calloc(1, sizeof(*o));
    int rc;

    if (o == NULL)
        abort();
    o->sc = sc;
    sc->owner = o;
    relay_init(&sc->f->loop, &o->r, sc->ka, sc->kb, owner_closed, sc);
    o->r.splice = sc->mode;
    if (uv_handle_get_type(&o->r.a.u.h) != (sc->ka == RELAY_PIPE ? UV_NAMED_PIPE : UV_TCP) ||
        uv_handle_get_type(&o->r.b.u.h) != (sc->kb == RELAY_PIPE ? UV_NAMED_PIPE : UV_TCP))
        sc_err(sc, "relay_init: handle types do not match the kinds", 0);
    rc = uv_accept(&l->u.s, &o->r.a.u.s);
    tlisten_close(l); /* one connection per scenario */
    if (rc < 0) {
        sc_err(sc, "accept front", rc);
        relay_close(&o->r, rc);
        return;
    }
    sc->owner_accepted(sc, o);
}

static void upstream_conn(struct tlisten *l)
{
    struct sc *sc = l->sc;
    int rc;

    peer_init(sc, &sc->upstream, sc->kb);
    rc = uv_accept(&l->u.s, &sc->upstream.u.s);
    tlisten_close(l);
    if (rc < 0) {
        sc_err(sc, "accept upstream", rc);
        peer_close(&sc->upstream);
        return;
    }
    sc->upstream.connected = 1;
    peer_read_start(&sc->upstream);
    if (sc->upstream_ready != NULL)
        sc->upstream_ready(sc);
}

static void client_connected(uv_connect_t *req, int status)
{
    struct peer *p = container_of(req, struct peer, creq);
    struct sc *sc = p->sc;

    if (status < 0) {
        sc_err(sc, "client connect", status);
        peer_close(p);
        return;
    }
    p->connected = 1;
    peer_read_start(p);
    if (sc->client_ready != NULL)
        sc->client_ready(sc);
}

static struct sc *sc_new(struct fx *f, enum relay_kind ka, enum relay_kind kb)
{
    struct sc *sc = calloc(1, sizeof(*sc));

    assert_non_null(sc);
    f->sc = sc;
    sc->f = f;
    sc->ka = ka;
    sc->kb = kb;
    sc->mode = test_mode;
    sc->owner_accepted = owner_default;
    assert_int_equal(uv_timer_init(&f->loop, &sc->timer), 0);
    sc->timer_inited = 1;
    return sc;
}

static void sc_start(struct sc *sc)
{
    struct peer *c = &sc->client;

    if (!sc->no_upstream)
        tlisten_open(sc, &sc->up, sc->kb, sc->small_bufs, upstream_conn);
    tlisten_open(sc, &sc->front, sc->ka, 0, front_conn);
    peer_init(sc, c, sc->ka);
    if (sc->ka == RELAY_TCP) {
        struct sockaddr_in sin;

        sin_loopback(&sin, sc->front.port);
        assert_int_equal(
            uv_tcp_connect(&c->creq, &c->u.tcp, (struct sockaddr *)&sin, client_connected), 0);
    } else {
        uv_pipe_connect(&c->creq, &c->u.pipe, sc->front.path, client_connected);
    }
}

/* The common end-of-test checks: one on_closed, no stray events, and the
 * path the bytes took: the copy path never splices; ALWAYS splices every
 * byte the relay read (the tests queue nothing before relay_start, so it
 * switches at once). */
static void sc_check(struct sc *sc)
{
    assert_string_equal(sc->err, "");
    assert_int_equal(sc->nclosed, 1);
    assert_null(sc->owner);
    assert_true(sc->client.closed);
    if (sc->upstream.inited)
        assert_true(sc->upstream.closed);
    if (sc->mode == RELAY_SPLICE_OFF)
        assert_int_equal(sc->nspliced, 0);
    else if (sc->mode == RELAY_SPLICE_ALWAYS)
        assert_int_equal(sc->nspliced, sc->a_nread + sc->b_nread);
    else
        assert_true(sc->nspliced <= sc->a_nread + sc->b_nread);
}

static void assert_bytes(const unsigned char *got, size_t got_len, const unsigned char *want,
                         size_t want_len)
{
    assert_int_equal(got_len, want_len);
    if (want_len > 0)
        assert_memory_equal(got, want, want_len);
}

/* ------------------------------------------------------------------------ */
/* Scripts                                                                   */

/* client: send req, then half-close */
static void client_send_req_shut(struct sc *sc)
{
    peer_send(&sc->client, sc->req, sc->req_len);
    peer_shutdown(&sc->client);
}

/* upstream: send resp, then half-close */
static void upstream_send_resp_shut(struct sc *sc)
{
    peer_send(&sc->upstream, sc->resp, sc->resp_len);
    peer_shutdown(&sc->upstream);
}

/* upstream: echo everything; half-close after EOF (the echo is flushed first) */
static void echo_data(struct peer *p, const unsigned char *d, size_t n)
{
    peer_send(p, d, n);
}

static void shut_on_eof(struct peer *p)
{
    if (p->shut_done)
        peer_close(p);
    else
        peer_shutdown(p); /* closes from its callback: eof is set */
}

/* upstream after EOF: answer with resp, then half-close */
static void resp_on_eof(struct peer *p)
{
    peer_send(p, p->sc->resp, p->sc->resp_len);
    peer_shutdown(p);
}

/* client after EOF: send req, then half-close */
static void req_on_eof(struct peer *p)
{
    peer_send(p, p->sc->req, p->sc->req_len);
    peer_shutdown(p);
}

/* ------------------------------------------------------------------------ */
/* 1. backpressure                                                           */

#define BP_LEN ((size_t)8 * 1024 * 1024 + 12345)
#define BP_PAUSE_EVERY ((size_t)512 * 1024)

static void slow_resume(uv_timer_t *t)
{
    struct sc *sc = container_of(t, struct sc, timer);

    if (!sc->upstream.closing)
        peer_read_start(&sc->upstream);
}

static void slow_data(struct peer *p, const unsigned char *d, size_t n)
{
    struct sc *sc = p->sc;

    (void)d;
    (void)n;
    if (p->in_len >= sc->next_pause) {
        sc->next_pause += BP_PAUSE_EVERY;
        sc->nslow++;
        uv_read_stop(&p->u.s);
        uv_timer_start(&sc->timer, slow_resume, 20, 0);
    }
}

static void test_backpressure(void **state)
{
    struct fx *f = *state;
    struct sc *sc = sc_new(f, RELAY_TCP, RELAY_TCP);

    sc->small_bufs = 1;
    sc->req_len = BP_LEN;
    sc->req = random_bytes(1, sc->req_len);
    sc->next_pause = BP_PAUSE_EVERY;
    sc->client_ready = client_send_req_shut;
    sc->upstream.on_data = slow_data;
    sc->upstream.on_eof = shut_on_eof;
    sc_start(sc);
    run(f);

    sc_check(sc);
    assert_int_equal(sc->end, RELAY_END_DONE);
    assert_int_equal(sc->status, 0);
    assert_true(sc->npauses > 0);
    assert_true(sc->nslow > 4); /* the reader really was slow */
    assert_int_equal(sc->a_nread, BP_LEN);
    assert_int_equal(sc->b_nread, 0);
    assert_bytes(sc->upstream.in, sc->upstream.in_len, sc->req, sc->req_len);
    assert_int_equal(sc->client.in_len, 0);
    assert_true(sc->client.eof);
    assert_int_equal(sc->client.read_err, 0);
    assert_int_equal(sc->client.write_err, 0);
}

/* ------------------------------------------------------------------------ */
/* 2. echo, every TCP/pipe mix, with connect() or the dialer for b           */

static void test_echo(void **state)
{
    struct fx *f = *state;
    const struct params *p = f->p;
    struct sc *sc = sc_new(f, p->ka, p->kb);

    sc->use_dialer = p->use_dialer;
    sc->req_len = 1024 * 1024 + 77;
    sc->req = random_bytes(2, sc->req_len);
    sc->client_ready = client_send_req_shut;
    sc->upstream.on_data = echo_data;
    sc->upstream.on_eof = shut_on_eof;
    sc_start(sc);
    run(f);

    sc_check(sc);
    assert_int_equal(sc->end, RELAY_END_DONE);
    assert_int_equal(sc->status, 0);
    assert_int_equal(sc->a_nread, sc->req_len);
    assert_int_equal(sc->b_nread, sc->req_len);
    assert_bytes(sc->upstream.in, sc->upstream.in_len, sc->req, sc->req_len);
    assert_bytes(sc->client.in, sc->client.in_len, sc->req, sc->req_len);
    if (p->use_dialer) {
        assert_int_equal(sc->ndial, 1);
        assert_int_equal(sc->dial_status, 0);
        assert_int_equal(sc->dial_index, 0);
    }
}

/* ------------------------------------------------------------------------ */
/* 3. half-close, each way                                                   */

/* The client half-closes first and keeps reading; the upstream answers only
 * after it saw EOF, then closes. */
static void test_half_close_client_first(void **state)
{
    struct fx *f = *state;
    const struct params *p = f->p;
    struct sc *sc = sc_new(f, p->ka, p->kb);

    sc->req_len = 100 * 1024 + 3;
    sc->req = random_bytes(3, sc->req_len);
    sc->resp_len = 1024 * 1024 + 5;
    sc->resp = random_bytes(4, sc->resp_len);
    sc->client_ready = client_send_req_shut;
    sc->upstream.on_eof = resp_on_eof;
    sc_start(sc);
    run(f);

    sc_check(sc);
    assert_int_equal(sc->end, RELAY_END_DONE);
    assert_int_equal(sc->status, 0);
    assert_bytes(sc->upstream.in, sc->upstream.in_len, sc->req, sc->req_len);
    assert_bytes(sc->client.in, sc->client.in_len, sc->resp, sc->resp_len);
    assert_int_equal(sc->a_nread, sc->req_len);
    assert_int_equal(sc->b_nread, sc->resp_len);
    assert_int_equal(sc->client.read_err, 0);
    assert_int_equal(sc->upstream.read_err, 0);
}

/* The mirror: the upstream sends and half-closes first; the client answers
 * after EOF. */
static void test_half_close_upstream_first(void **state)
{
    struct fx *f = *state;
    const struct params *p = f->p;
    struct sc *sc = sc_new(f, p->ka, p->kb);

    sc->req_len = 1024 * 1024 + 9;
    sc->req = random_bytes(5, sc->req_len);
    sc->resp_len = 100 * 1024 + 1;
    sc->resp = random_bytes(6, sc->resp_len);
    sc->upstream_ready = upstream_send_resp_shut;
    sc->client.on_eof = req_on_eof;
    sc_start(sc);
    run(f);

    sc_check(sc);
    assert_int_equal(sc->end, RELAY_END_DONE);
    assert_int_equal(sc->status, 0);
    assert_bytes(sc->client.in, sc->client.in_len, sc->resp, sc->resp_len);
    assert_bytes(sc->upstream.in, sc->upstream.in_len, sc->req, sc->req_len);
    assert_int_equal(sc->a_nread, sc->req_len);
    assert_int_equal(sc->b_nread, sc->resp_len);
}

/* ------------------------------------------------------------------------ */
/* 4. abrupt reset                                                           */

static void reset_peer(struct peer *p)
{
    struct linger lg = {1, 0};
    uv_os_fd_t fd;

    if (p->closing)
        return;
    if (uv_fileno(&p->u.h, &fd) != 0 || setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)) != 0)
        sc_err(p->sc, "SO_LINGER", uv_translate_sys_error(errno));
    peer_close(p);
}

/* upstream: after 256 KiB, reset */
static void reset_upstream_data(struct peer *p, const unsigned char *d, size_t n)
{
    (void)d;
    (void)n;
    if (p->in_len >= (size_t)256 * 1024 && !p->sc->reset_done) {
        p->sc->reset_done = 1;
        reset_peer(p);
    }
}

/* upstream: after 256 KiB from the client, the client resets */
static void reset_client_data(struct peer *p, const unsigned char *d, size_t n)
{
    (void)d;
    (void)n;
    if (p->in_len >= (size_t)256 * 1024 && !p->sc->reset_done) {
        p->sc->reset_done = 1;
        reset_peer(&p->sc->client);
    }
}

static void client_send_req(struct sc *sc)
{
    peer_send(&sc->client, sc->req, sc->req_len);
}

static void test_reset_upstream(void **state)
{
    struct fx *f = *state;
    struct sc *sc = sc_new(f, RELAY_TCP, RELAY_TCP);

    sc->small_bufs = 1;
    sc->expect_errors = 1;
    sc->req_len = (size_t)4 * 1024 * 1024;
    sc->req = random_bytes(7, sc->req_len);
    sc->client_ready = client_send_req_shut;
    sc->client.on_eof = peer_close_on_eof;
    sc->upstream.on_data = reset_upstream_data;
    sc_start(sc);
    run(f);

    sc_check(sc);
    assert_true(sc->reset_done);
    assert_int_equal(sc->end, RELAY_END_B_ERROR);
    assert_true(sc->status == UV_ECONNRESET || sc->status == UV_EPIPE);
    assert_true(sc->a_nread < sc->req_len); /* it really was mid-transfer */
    assert_string_equal(relay_end_str(sc->end), "upstream error");
}

static void test_reset_client(void **state)
{
    struct fx *f = *state;
    struct sc *sc = sc_new(f, RELAY_TCP, RELAY_TCP);

    sc->small_bufs = 1;
    sc->expect_errors = 1;
    sc->req_len = (size_t)4 * 1024 * 1024;
    sc->req = random_bytes(8, sc->req_len);
    sc->client_ready = client_send_req;
    sc->upstream.on_data = reset_client_data;
    sc->upstream.on_eof = peer_close_on_eof;
    sc_start(sc);
    run(f);

    sc_check(sc);
    assert_true(sc->reset_done);
    assert_int_equal(sc->end, RELAY_END_A_ERROR);
    assert_int_equal(sc->status, UV_ECONNRESET);
    assert_true(sc->a_nread < sc->req_len);
    assert_string_equal(relay_end_str(sc->end), "client error");
    /* what the upstream got is a prefix of what was sent */
    assert_true(sc->upstream.in_len <= sc->req_len);
    assert_memory_equal(sc->upstream.in, sc->req, sc->upstream.in_len);
}

/* The client resets while the relay is paused on it (b's queue is above the
 * high-water mark and the upstream reads nothing), so the relay cannot read
 * the reset yet. Then either
 *   - the upstream half-closes: the relay's shutdown of a fails, and that must
 *     end the relay (not leave it waiting for an EOF from a side it no longer
 *     reads); or
 *   - the upstream reads again: the relay drains b, resumes a, reads what was
 *     queued before the reset, then meets the reset. Linux reports that as
 *     read() == 0 with ECONNRESET pending in SO_ERROR; taken as EOF, the
 *     abort would reach the upstream as a clean half-close. */
static int reset_arrived(struct relay_side *s)
{
    struct pollfd pfd;
    uv_os_fd_t fd;

    if (uv_fileno(&s->u.h, &fd) != 0)
        return 0;
    pfd.fd = fd;
    pfd.events = POLLOUT;
    pfd.revents = 0;
    return poll(&pfd, 1, 0) == 1 && (pfd.revents & (POLLERR | POLLHUP)) != 0;
}

static void paused_tick(uv_timer_t *t)
{
    struct sc *sc = container_of(t, struct sc, timer);

    if (sc->ticks == 2) { /* upstream half-closed: wait for the relay to end */
        if (sc->nclosed > 0) {
            uv_timer_stop(t);
            peer_close(&sc->upstream); /* it reads nothing, so it would not see EOF */
        }
        return;
    }
    if (sc->owner == NULL) {
        sc_err(sc, "relay ended before the upstream half-closed", 0);
        uv_timer_stop(t);
        peer_close(&sc->upstream);
        return;
    }
    if (sc->ticks == 0 && sc->owner->r.a.paused) {
        sc->reset_done = 1;
        reset_peer(&sc->client);
        sc->ticks = 1;
    } else if (sc->ticks == 1 && reset_arrived(&sc->owner->r.a)) {
        sc->ticks = 2;
        if (sc->resume_after_reset) {
            uv_timer_stop(t);
            peer_read_start(&sc->upstream); /* closes on EOF once the relay ends */
        } else {
            peer_shutdown(&sc->upstream);
        }
    }
}

static void upstream_stalls(struct sc *sc)
{
    uv_read_stop(&sc->upstream.u.s);
    uv_timer_start(&sc->timer, paused_tick, 5, 5);
}

static void reset_while_paused(struct fx *f, int resume)
{
    struct sc *sc = sc_new(f, RELAY_TCP, RELAY_TCP);

    sc->small_bufs = 1;
    sc->expect_errors = 1;
    sc->idle_ms = 5000; /* a relay that missed the error would end "idle" */
    sc->req_len = (size_t)4 * 1024 * 1024;
    sc->req = random_bytes(9, sc->req_len);
    sc->client_ready = client_send_req;
    sc->upstream_ready = upstream_stalls;
    sc->resume_after_reset = resume;
    if (resume)
        sc->upstream.on_eof = peer_close_on_eof;
    sc_start(sc);
    run(f);

    sc_check(sc);
    assert_true(sc->reset_done);
    assert_int_equal(sc->ticks, 2);
    assert_true(sc->npauses > 0);
    assert_int_equal(sc->end, RELAY_END_A_ERROR);
    assert_int_equal(sc->status, resume ? UV_ECONNRESET : UV_ENOTCONN);
    assert_true(sc->upstream.in_len <= sc->req_len);
    assert_memory_equal(sc->upstream.in, sc->req, sc->upstream.in_len);
}

static void test_reset_while_paused_then_fin(void **state)
{
    reset_while_paused(*state, 0);
}

static void test_reset_while_paused_then_resume(void **state)
{
    reset_while_paused(*state, 1);
}

/* ------------------------------------------------------------------------ */
/* 5. idle timeout                                                           */

static void test_idle_fires(void **state)
{
    struct fx *f = *state;
    struct sc *sc = sc_new(f, RELAY_TCP, RELAY_PIPE);

    sc->idle_ms = 100;
    sc->client.on_eof = peer_close_on_eof;
    sc->upstream.on_eof = peer_close_on_eof;
    sc_start(sc);
    run(f);

    sc_check(sc);
    assert_int_equal(sc->end, RELAY_END_IDLE);
    assert_int_equal(sc->status, UV_ETIMEDOUT);
    assert_string_equal(relay_end_str(sc->end), "idle timeout");
    assert_true(sc->client.eof);
    assert_true(sc->upstream.eof);
    assert_int_equal(sc->a_nread, 0);
    assert_int_equal(sc->b_nread, 0);
}

/* 40 ticks 60 ms apart (2.4 s, far more than idle_ms = 1000): one byte from
 * the client on the first 20, from the upstream on the last 20, so each
 * direction alone (1.2 s) has to keep the relay alive for longer than
 * idle_ms. The gap between a tick and idle_ms is wide (940 ms) so a loaded
 * machine that leaves this process unscheduled for a while (it failed 2 of 4
 * runs at nice 19 under a CI load with 20 ms ticks and idle_ms = 300) does not
 * fire the idle timer before a due tick's byte is read. */
#define IDLE_TICKS 40

static void idle_tick(uv_timer_t *t)
{
    struct sc *sc = container_of(t, struct sc, timer);
    static const char byte = 'x';

    if (sc->ticks < IDLE_TICKS) {
        peer_send(sc->ticks < IDLE_TICKS / 2 ? &sc->client : &sc->upstream, &byte, 1);
        sc->ticks++;
        return;
    }
    uv_timer_stop(t);
    sc->alive_after_ticks = sc->nclosed == 0;
    peer_shutdown(&sc->client);
    peer_shutdown(&sc->upstream);
}

static void idle_both_ready(struct sc *sc)
{
    if (sc->client.connected && sc->upstream.connected)
        uv_timer_start(&sc->timer, idle_tick, 60, 60);
}

static void test_idle_traffic_keeps_alive(void **state)
{
    struct fx *f = *state;
    struct sc *sc = sc_new(f, RELAY_TCP, RELAY_TCP);

    sc->idle_ms = 1000;
    sc->client_ready = idle_both_ready;
    sc->upstream_ready = idle_both_ready;
    sc_start(sc);
    run(f);

    sc_check(sc);
    assert_int_equal(sc->ticks, IDLE_TICKS);
    assert_true(sc->alive_after_ticks);
    assert_int_equal(sc->end, RELAY_END_DONE);
    assert_int_equal(sc->status, 0);
    assert_int_equal(sc->a_nread, IDLE_TICKS / 2);
    assert_int_equal(sc->b_nread, IDLE_TICKS / 2);
    assert_int_equal(sc->upstream.in_len, IDLE_TICKS / 2);
    assert_int_equal(sc->client.in_len, IDLE_TICKS / 2);
}

/* ------------------------------------------------------------------------ */
/* 6. close before start, and by the owner                                   */

static void owner_write_cb(uv_write_t *req, int status)
{
    struct owner *o = container_of(req, struct owner, wreq);
    struct sc *sc = o->sc; /* o is valid: on_closed has not run yet */

    (void)status;
    sc->owner_write_cbs++;
    sc->owner_write_before_closed = sc->nclosed == 0;
}

static void owner_timer_cb(uv_timer_t *t)
{
    struct owner *o = container_of(t, struct owner, r.timer);

    o->sc->owner_timer_fired = 1;
}

static void owner_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct relay_side *s = container_of(h, struct relay_side, u.h);
    struct owner *o = container_of(s->r, struct owner, r);

    (void)suggested;
    buf->base = o->rbuf;
    buf->len = sizeof(o->rbuf);
}

/* The owner reads the "handshake" on a, replies, arms its phase timer, and
 * then aborts: relay_close() with the write and the timer still pending. */
static void owner_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct relay_side *side = container_of(s, struct relay_side, u.s);
    struct owner *o = container_of(side->r, struct owner, r);
    static char reply[] = "no thanks\n";
    uv_buf_t b = uv_buf_init(reply, sizeof(reply) - 1);
    int rc;

    (void)buf;
    if (nread == 0)
        return;
    uv_read_stop(s);
    if (nread < 0) {
        sc_err(o->sc, "owner read", (int)nread);
        relay_close(&o->r, (int)nread);
        return;
    }
    rc = uv_write(&o->wreq, s, &b, 1, owner_write_cb);
    if (rc < 0)
        sc_err(o->sc, "owner write", rc);
    uv_timer_start(&o->r.timer, owner_timer_cb, 10000, 0);
    relay_close(&o->r, UV_ECANCELED);
    relay_close(&o->r, UV_EIO); /* idempotent: ignored */
}

static void owner_handshake(struct sc *sc, struct owner *o)
{
    int rc = uv_read_start(&o->r.a.u.s, owner_alloc, owner_read);

    if (rc < 0) {
        sc_err(sc, "owner read start", rc);
        relay_close(&o->r, rc);
    }
}

static void client_send_hello(struct sc *sc)
{
    peer_send(&sc->client, "hello", 5);
}

static void test_close_before_start(void **state)
{
    struct fx *f = *state;
    struct sc *sc = sc_new(f, f->p->ka, RELAY_TCP);

    sc->no_upstream = 1;
    sc->owner_accepted = owner_handshake;
    sc->client_ready = client_send_hello;
    sc->client.on_eof = peer_close_on_eof;
    sc_start(sc);
    run(f);

    sc_check(sc);
    assert_int_equal(sc->end, RELAY_END_NONE);
    assert_int_equal(sc->status, UV_ECANCELED);
    assert_string_equal(relay_end_str(sc->end), "none");
    assert_int_equal(sc->owner_write_cbs, 1);
    assert_true(sc->owner_write_before_closed);
    assert_false(sc->owner_timer_fired);
    assert_int_equal(sc->a_nread, 0);
}

/* b opened (upstream connected) but the relay never started. */
static void owner_open_b_then_close(struct sc *sc, struct owner *o)
{
    int fd = connect_upstream(sc), rc;

    if (fd < 0) {
        sc_err(sc, "connect upstream", uv_translate_sys_error(errno));
        relay_close(&o->r, UV_ECONNREFUSED);
        return;
    }
    rc = relay_open_b(&o->r, fd);
    if (rc < 0)
        sc_err(sc, "relay_open_b", rc);
    relay_close(&o->r, UV_ECANCELED);
    if (relay_start(&o->r, 0) != UV_EINVAL) /* too late */
        sc_err(sc, "relay_start after close", 0);
}

static void test_close_b_open_not_started(void **state)
{
    struct fx *f = *state;
    struct sc *sc = sc_new(f, RELAY_TCP, f->p->kb);

    sc->owner_accepted = owner_open_b_then_close;
    sc->client.on_eof = peer_close_on_eof;
    sc->upstream.on_eof = peer_close_on_eof;
    sc_start(sc);
    run(f);

    sc_check(sc);
    assert_int_equal(sc->end, RELAY_END_NONE);
    assert_int_equal(sc->status, UV_ECANCELED);
    assert_true(sc->upstream.inited);
    assert_true(sc->upstream.eof);
    assert_true(sc->client.eof);
}

/* A running relay closed by its owner: end "closed". */
static void owner_close_later(uv_timer_t *t)
{
    struct sc *sc = container_of(t, struct sc, timer);

    if (sc->owner == NULL) {
        sc_err(sc, "relay gone before the owner closed it", 0);
        return;
    }
    if (relay_start(&sc->owner->r, 0) != UV_EALREADY)
        sc_err(sc, "second relay_start", 0);
    relay_close(&sc->owner->r, UV_ECANCELED);
}

static void close_soon(struct sc *sc)
{
    uv_timer_start(&sc->timer, owner_close_later, 20, 0);
}

static void test_owner_close_running(void **state)
{
    struct fx *f = *state;
    struct sc *sc = sc_new(f, RELAY_PIPE, RELAY_TCP);

    sc->upstream_ready = close_soon;
    sc->client.on_eof = peer_close_on_eof;
    sc->upstream.on_eof = peer_close_on_eof;
    sc_start(sc);
    run(f);

    sc_check(sc);
    assert_int_equal(sc->end, RELAY_END_OWNER);
    assert_int_equal(sc->status, UV_ECANCELED);
    assert_string_equal(relay_end_str(sc->end), "closed");
}

/* The owner reads a 3-byte header itself and leaves a reading when it
 * starts the relay from inside its read callback (as the SOCKS front end
 * does, minus the dial): the relay takes the reading stream over (its read
 * callbacks replace the owner's, no stop/start), the owner forwards the
 * bytes it read past the header, and every later byte reaches the relay. */
#define HDR "HS\n"

static void owner_hdr_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct owner *o = container_of(h, struct owner, r.a.u.h);

    (void)suggested;
    *buf = uv_buf_init(o->rbuf, sizeof(o->rbuf));
}

static void owner_hdr_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct owner *o = container_of(s, struct owner, r.a.u.s);
    struct sc *sc = o->sc;
    size_t n = nread > 0 ? (size_t)nread : 0, skip = sizeof(HDR) - 1;
    int fd, rc;

    sc->owner_reads++;
    if (sc->owner_started) {
        sc_err(sc, "the owner's read callback ran after relay_start", 0);
        return;
    }
    if (nread == 0)
        return;
    if (nread < 0 || n < skip || memcmp(buf->base, HDR, skip) != 0) {
        sc_err(sc, "owner: no header", nread < 0 ? (int)nread : 0);
        relay_close(&o->r, UV_EPROTO);
        return;
    }
    fd = connect_upstream(sc);
    if (fd < 0) {
        sc_err(sc, "connect upstream", uv_translate_sys_error(errno));
        relay_close(&o->r, UV_ECONNREFUSED);
        return;
    }
    rc = relay_open_b(&o->r, fd);
    sc->owner_early = n - skip;
    if (rc == 0 && sc->owner_early > 0) {
        uv_buf_t eb;

        sc->early = malloc(sc->owner_early);
        assert_non_null(sc->early);
        memcpy(sc->early, buf->base + skip, sc->owner_early);
        eb = uv_buf_init((char *)sc->early, (unsigned int)sc->owner_early);
        rc = uv_write(&o->wreq_b, &o->r.b.u.s, &eb, 1, NULL);
    }
    if (rc == 0) {
        sc->owner_started = 1;
        rc = relay_start(&o->r, 0); /* a is still reading */
    }
    if (rc < 0) {
        sc_err(sc, "owner start", rc);
        relay_close(&o->r, rc);
    }
}

static void owner_read_header(struct sc *sc, struct owner *o)
{
    int rc = uv_read_start(&o->r.a.u.s, owner_hdr_alloc, owner_hdr_read);

    if (rc < 0) {
        sc_err(sc, "owner read start", rc);
        relay_close(&o->r, rc);
    }
}

static void client_send_hdr_req_shut(struct sc *sc)
{
    peer_send(&sc->client, HDR, sizeof(HDR) - 1);
    client_send_req_shut(sc);
}

static void test_owner_left_reading(void **state)
{
    struct fx *f = *state;
    const struct params *p = f->p;
    struct sc *sc = sc_new(f, p->ka, p->kb);

    sc->req_len = 300 * 1024 + 11;
    sc->req = random_bytes(18, sc->req_len);
    sc->resp_len = 200 * 1024 + 7;
    sc->resp = random_bytes(19, sc->resp_len);
    sc->owner_accepted = owner_read_header;
    sc->client_ready = client_send_hdr_req_shut;
    sc->upstream.on_eof = resp_on_eof;
    sc_start(sc);
    run(f);

    if (sc->mode == RELAY_SPLICE_ALWAYS) /* the owner's bytes are queued first: spliced after */
        sc->mode = RELAY_SPLICE_AUTO;
    sc_check(sc);
    assert_int_equal(sc->owner_reads, 1);
    assert_int_equal(sc->end, RELAY_END_DONE);
    assert_int_equal(sc->status, 0);
    assert_int_equal(sc->a_nread + sc->owner_early, sc->req_len);
    assert_int_equal(sc->b_nread, sc->resp_len);
    assert_bytes(sc->upstream.in, sc->upstream.in_len, sc->req, sc->req_len);
    assert_bytes(sc->client.in, sc->client.in_len, sc->resp, sc->resp_len);
}

static void test_end_str(void **state)
{
    (void)state;
    assert_string_equal(relay_end_str(RELAY_END_NONE), "none");
    assert_string_equal(relay_end_str(RELAY_END_DONE), "done");
    assert_string_equal(relay_end_str(RELAY_END_IDLE), "idle timeout");
    assert_string_equal(relay_end_str(RELAY_END_A_ERROR), "client error");
    assert_string_equal(relay_end_str(RELAY_END_B_ERROR), "upstream error");
    assert_string_equal(relay_end_str(RELAY_END_OWNER), "closed");
}

/* ------------------------------------------------------------------------ */
/* 8. the splice path: fallback, AUTO, the owner's writes first              */

/* splice(2) fails as unsupported (EINVAL, ENOSYS, EPERM) at its nth call,
 * while 8 MiB go to a slow reader (so for most nth bytes sit in a pipe when
 * it happens) and a response comes back after EOF: the relay goes back to
 * the copy path without losing, reordering or repeating a byte, and still
 * ends with a clean double half-close. */
static void test_splice_fallback(void **state)
{
    struct fx *f = *state;
    const struct params *p = f->p;
    struct sc *sc = sc_new(f, p->ka, p->kb);

    sc->mode = RELAY_SPLICE_ALWAYS;
    relay_test_fail_splice(p->fail_nth, p->fail_err); /* teardown resets it */
    sc->small_bufs = 1;
    sc->req_len = BP_LEN;
    sc->req = random_bytes(11, sc->req_len);
    sc->resp_len = 300 * 1024 + 7;
    sc->resp = random_bytes(12, sc->resp_len);
    sc->next_pause = BP_PAUSE_EVERY;
    sc->client_ready = client_send_req_shut;
    sc->upstream.on_data = slow_data;
    sc->upstream.on_eof = resp_on_eof;
    sc_start(sc);
    run(f);

    sc->mode = RELAY_SPLICE_AUTO; /* sc_check: some bytes spliced, not all */
    sc_check(sc);
    assert_int_equal(sc->end, RELAY_END_DONE);
    assert_int_equal(sc->status, 0);
    assert_bytes(sc->upstream.in, sc->upstream.in_len, sc->req, sc->req_len);
    assert_bytes(sc->client.in, sc->client.in_len, sc->resp, sc->resp_len);
    assert_int_equal(sc->a_nread, sc->req_len);
    assert_int_equal(sc->b_nread, sc->resp_len);
    assert_true(sc->nspliced < sc->req_len); /* it did fall back */
    if (p->fail_nth == 1)
        assert_int_equal(sc->nspliced, 0);
}

/* AUTO: a short exchange stays on the copy path; a bulk transfer switches to
 * splicing after its first full buffer, byte-exact across the switch. */
static void auto_echo(struct fx *f, size_t len, uint64_t seed)
{
    const struct params *p = f->p;
    struct sc *sc = sc_new(f, p->ka, p->kb);

    sc->mode = RELAY_SPLICE_AUTO;
    sc->req_len = len;
    sc->req = random_bytes(seed, sc->req_len);
    sc->client_ready = client_send_req_shut;
    sc->upstream.on_data = echo_data;
    sc->upstream.on_eof = shut_on_eof;
    sc_start(sc);
    run(f);

    sc_check(sc);
    assert_int_equal(sc->end, RELAY_END_DONE);
    assert_int_equal(sc->status, 0);
    assert_bytes(sc->upstream.in, sc->upstream.in_len, sc->req, sc->req_len);
    assert_bytes(sc->client.in, sc->client.in_len, sc->req, sc->req_len);
}

static void test_splice_auto_short(void **state)
{
    struct fx *f = *state;

    auto_echo(f, 2000, 13);
    assert_int_equal(f->sc->nspliced, 0);
}

static void test_splice_auto_bulk(void **state)
{
    struct fx *f = *state;

    auto_echo(f, (size_t)4 * 1024 * 1024 + 5, 14);
    assert_true(f->sc->nspliced > 0);
    assert_true(f->sc->nspliced < f->sc->a_nread + f->sc->b_nread); /* copy first */
}

/* The owner queues bytes on both sides before relay_start (a reply to the
 * client, early data upstream; the upstream one too big to be written at
 * once): with RELAY_SPLICE_ALWAYS the relay must not splice anything until
 * they are out, so both peers see the owner's bytes first. */
static void owner_queue_then_start(struct sc *sc, struct owner *o)
{
    static char hello[] = "HELLO from the owner\n";
    uv_buf_t ha = uv_buf_init(hello, sizeof(hello) - 1);
    uv_buf_t eb = uv_buf_init((char *)sc->early, (unsigned int)sc->early_len);
    int fd = connect_upstream(sc), rc;

    if (fd < 0) {
        sc_err(sc, "connect upstream", uv_translate_sys_error(errno));
        relay_close(&o->r, UV_ECONNREFUSED);
        return;
    }
    rc = relay_open_b(&o->r, fd);
    if (rc == 0)
        rc = uv_write(&o->wreq, &o->r.a.u.s, &ha, 1, NULL);
    if (rc == 0)
        rc = uv_write(&o->wreq_b, &o->r.b.u.s, &eb, 1, NULL);
    if (rc == 0 && uv_stream_get_write_queue_size(&o->r.b.u.s) == 0)
        sc_err(sc, "the owner's upstream write went out at once; the test needs it queued", 0);
    if (rc == 0)
        rc = relay_start(&o->r, 0);
    if (rc < 0) {
        sc_err(sc, "owner start", rc);
        relay_close(&o->r, rc);
    }
}

static void test_splice_after_owner_writes(void **state)
{
    struct fx *f = *state;
    const struct params *p = f->p;
    struct sc *sc = sc_new(f, p->ka, RELAY_TCP);
    static const char hello[] = "HELLO from the owner\n";
    unsigned char *want;

    sc->mode = RELAY_SPLICE_ALWAYS;
    sc->small_bufs = 1;
    sc->early_len = (size_t)2 * 1024 * 1024 + 1;
    sc->early = random_bytes(15, sc->early_len);
    sc->req_len = 1024 * 1024 + 3;
    sc->req = random_bytes(16, sc->req_len);
    sc->resp_len = 1024 * 1024 + 4;
    sc->resp = random_bytes(17, sc->resp_len);
    sc->owner_accepted = owner_queue_then_start;
    sc->client_ready = client_send_req_shut;
    sc->upstream.on_eof = resp_on_eof;
    sc_start(sc);
    run(f);

    sc->mode = RELAY_SPLICE_AUTO; /* sc_check: spliced once the queue drained */
    sc_check(sc);
    assert_int_equal(sc->end, RELAY_END_DONE);
    assert_int_equal(sc->status, 0);
    assert_int_equal(sc->a_nread, sc->req_len); /* the owner's bytes are not counted */
    assert_int_equal(sc->b_nread, sc->resp_len);
    assert_true(sc->nspliced > 0);

    want = malloc(sc->early_len + sc->req_len);
    assert_non_null(want);
    memcpy(want, sc->early, sc->early_len);
    memcpy(want + sc->early_len, sc->req, sc->req_len);
    assert_bytes(sc->upstream.in, sc->upstream.in_len, want, sc->early_len + sc->req_len);
    free(want);
    assert_true(sc->client.in_len == sizeof(hello) - 1 + sc->resp_len);
    assert_memory_equal(sc->client.in, hello, sizeof(hello) - 1);
    assert_memory_equal(sc->client.in + sizeof(hello) - 1, sc->resp, sc->resp_len);
}

/* Many tiny segments (one write each, from a unix socket: one pipe slot
 * each) while the upstream reads nothing: the pipe runs out of slots long
 * before RELAY_PIPE_SIZE bytes, and splice() then says EAGAIN although the
 * client has sent more. The relay must pause on that (64 KiB in all, so a
 * pause can only come from the full pipe), not spin on a readable socket,
 * and pass every byte in order once the upstream reads. */
#define TINY_MSGS 4000
#define TINY_LEN 16

static void client_send_tiny(struct sc *sc)
{
    size_t i;

    for (i = 0; i < TINY_MSGS; i++)
        peer_send(&sc->client, sc->req + i * TINY_LEN, TINY_LEN);
    peer_shutdown(&sc->client);
}

static void upstream_read_later(uv_timer_t *t)
{
    struct sc *sc = container_of(t, struct sc, timer);

    if (!sc->upstream.closing)
        peer_read_start(&sc->upstream);
}

static void upstream_stall_200ms(struct sc *sc)
{
    uv_read_stop(&sc->upstream.u.s);
    uv_timer_start(&sc->timer, upstream_read_later, 200, 0);
}

static void test_splice_small_segments(void **state)
{
    struct fx *f = *state;
    struct sc *sc = sc_new(f, RELAY_PIPE, RELAY_TCP);

    sc->mode = RELAY_SPLICE_ALWAYS;
    sc->small_bufs = 1;
    sc->req_len = (size_t)TINY_MSGS * TINY_LEN;
    sc->req = random_bytes(18, sc->req_len);
    sc->client_ready = client_send_tiny;
    sc->upstream_ready = upstream_stall_200ms;
    sc->upstream.on_eof = shut_on_eof;
    sc_start(sc);
    run(f);

    sc_check(sc);
    assert_int_equal(sc->end, RELAY_END_DONE);
    assert_int_equal(sc->status, 0);
    assert_true(sc->req_len < (size_t)RELAY_LOW_WATER);
    assert_true(sc->npauses > 0);
    assert_int_equal(sc->a_nread, sc->req_len);
    assert_bytes(sc->upstream.in, sc->upstream.in_len, sc->req, sc->req_len);
}

/* ------------------------------------------------------------------------ */
/* 7. dialer                                                                 */

struct dial_res {
    int n;
    int status;
    int fd;
    size_t index;
};

static void dial_cb(void *arg, int status, int fd, size_t index)
{
    struct dial_res *d = arg;

    d->n++;
    d->status = status;
    d->fd = fd;
    d->index = index;
}

static struct dialer_target tcp4_target(uint16_t port)
{
    struct dialer_target t;

    memset(&t, 0, sizeof(t));
    t.addr.family = 4;
    t.addr.bytes[0] = 127;
    t.addr.bytes[3] = 1;
    t.port = port;
    return t;
}

static struct dialer_target unix_target(const char *path)
{
    struct dialer_target t;

    memset(&t, 0, sizeof(t));
    t.is_unix = 1;
    t.path = path;
    return t;
}

static uint16_t bound_port(int fd)
{
    struct sockaddr_storage ss;
    struct sockaddr_in sin;
    socklen_t len = sizeof(ss);

    assert_int_equal(getsockname(fd, (struct sockaddr *)&ss, &len), 0);
    memcpy(&sin, &ss, sizeof(sin));
    return ntohs(sin.sin_port);
}

/* A TCP port on 127.0.0.1 that is bound (so nobody else gets it) but not
 * listening: connecting is refused. */
static uint16_t refused_port(struct fx *f)
{
    struct sockaddr_in sin;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    assert_true(fd >= 0);
    keep_fd(f, fd);
    sin_loopback(&sin, 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    return bound_port(fd);
}

static int listen_tcp(struct fx *f, int backlog)
{
    struct sockaddr_in sin;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    assert_true(fd >= 0);
    keep_fd(f, fd);
    sin_loopback(&sin, 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    assert_int_equal(listen(fd, backlog), 0);
    return fd;
}

static int listen_unix(struct fx *f, char *path, size_t len, int backlog)
{
    struct sockaddr_un su;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    assert_true(fd >= 0);
    keep_fd(f, fd);
    new_path(f, path, len);
    sun_path(&su, path);
    assert_int_equal(bind(fd, (struct sockaddr *)&su, sizeof(su)), 0);
    assert_int_equal(listen(fd, backlog), 0);
    return fd;
}

/* A port where connect() hangs: a listener with backlog 0 that never accepts.
 * Linux queues one connection, then drops SYNs while the accept queue is full
 * (net.ipv4.tcp_abort_on_overflow = 0, the default), so further connects sit
 * in SYN_SENT. Filler connects are made until one is seen hanging (not
 * writable within 200 ms). 0 if that could not be arranged. */
static uint16_t hanging_port(struct fx *f)
{
    int lfd = listen_tcp(f, 0), i;
    uint16_t port = bound_port(lfd);
    struct sockaddr_in sin;

    sin_loopback(&sin, port);
    for (i = 0; i < 16 && f->nextra < MAX_EXTRA_FDS; i++) {
        int c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        struct pollfd pfd;

        assert_true(c >= 0);
        keep_fd(f, c);
        if (connect(c, (struct sockaddr *)&sin, sizeof(sin)) < 0 && errno != EINPROGRESS)
            return 0;
        pfd.fd = c;
        pfd.events = POLLOUT;
        pfd.revents = 0;
        if (poll(&pfd, 1, 200) == 0)
            return port; /* this one hangs: so will the next */
    }
    return 0;
}

static void test_dial_refused(void **state)
{
    struct fx *f = *state;
    struct dialer_target t = tcp4_target(refused_port(f));
    struct dial_res res = {0, 0, -2, 99};
    struct dialer *d = NULL;

    assert_int_equal(dialer_start(&d, &f->loop, &t, 1, 5000, dial_cb, &res), 0);
    assert_non_null(d);
    assert_int_equal(res.n, 0); /* never from inside dialer_start */
    run(f);
    assert_int_equal(res.n, 1);
    assert_int_equal(res.status, UV_ECONNREFUSED);
    assert_int_equal(res.fd, -1);
    assert_int_equal(res.index, 1);
}

/* dialer_connect_now(): one attempt, no waiting (transparent mode's
 * non-blocking connect()). A hanging handshake is handed back in progress;
 * a refused one fails at once or shows the refusal in SO_ERROR; a listening
 * port connects. */
static void test_dial_now(void **state)
{
    struct fx *f = *state;
    uint16_t hang = hanging_port(f);
    struct dialer_target t;
    struct pollfd pfd;
    int fd, in_progress = -1, err = 0;
    socklen_t len = sizeof(err);

    if (hang == 0)
        skip();
    t = tcp4_target(hang);
    fd = dialer_connect_now(&t, &in_progress);
    assert_true(fd >= 0);
    assert_int_equal(in_progress, 1);
    assert_true((fcntl(fd, F_GETFL) & O_NONBLOCK) != 0);
    assert_true((fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0);
    pfd.fd = fd;
    pfd.events = POLLOUT;
    pfd.revents = 0;
    assert_int_equal(poll(&pfd, 1, 0), 0); /* the handshake is still under way */
    close(fd);

    t = tcp4_target(bound_port(listen_tcp(f, 8)));
    fd = dialer_connect_now(&t, &in_progress);
    assert_true(fd >= 0);
    pfd.fd = fd;
    pfd.revents = 0;
    assert_int_equal(poll(&pfd, 1, 5000), 1);
    assert_int_equal(getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len), 0);
    assert_int_equal(err, 0);
    close(fd);

    t = tcp4_target(refused_port(f));
    fd = dialer_connect_now(&t, &in_progress);
    if (fd >= 0) { /* in progress: the refusal arrives as SO_ERROR */
        pfd.fd = fd;
        pfd.revents = 0;
        assert_int_equal(poll(&pfd, 1, 5000), 1);
        assert_int_equal(getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len), 0);
        assert_int_equal(err, ECONNREFUSED);
        close(fd);
    } else {
        assert_int_equal(fd, UV_ECONNREFUSED);
    }

    t = tcp4_target(0);
    assert_int_equal(dialer_connect_now(&t, &in_progress), UV_EINVAL);
}

/* dialer_start_now(): a connection made at once (loopback) is handed back
 * at once, with no callback, after the targets that failed at once; one
 * that cannot be made at once, or none at all, goes through the callback. */
static void test_dial_start_now(void **state)
{
    struct fx *f = *state;
    uint16_t good = bound_port(listen_tcp(f, 8)), hang = hanging_port(f);
    struct dialer_target t[2];
    struct dial_res res = {0, 0, -2, 99};
    struct dialer *d = NULL;
    size_t idx = 99;
    int fd = -1;

    t[0] = tcp4_target(refused_port(f));
    t[1] = tcp4_target(good);
    assert_int_equal(dialer_start_now(&d, &f->loop, t, 2, 5000, dial_cb, &res, &fd, &idx), 1);
    assert_null(d);
    assert_true(fd >= 0);
    assert_int_equal(idx, 1);
    close(fd);
    run(f); /* the dialer's timer closes; no callback */
    assert_int_equal(res.n, 0);

    assert_int_equal(dialer_start_now(&d, &f->loop, t, 1, 5000, dial_cb, &res, &fd, &idx), 0);
    assert_non_null(d);
    assert_int_equal(res.n, 0);
    run(f);
    assert_int_equal(res.n, 1);
    assert_int_equal(res.status, UV_ECONNREFUSED);

    if (hang == 0)
        return;
    t[0] = tcp4_target(hang);
    res.n = 0;
    assert_int_equal(dialer_start_now(&d, &f->loop, t, 2, 200, dial_cb, &res, &fd, &idx), 0);
    run(f); /* the hanging attempt times out, then the listening one connects */
    assert_int_equal(res.n, 1);
    assert_int_equal(res.status, 0);
    assert_int_equal(res.index, 1);
    close(res.fd);
}

static void test_dial_fallback(void **state)
{
    struct fx *f = *state;
    int lfd = listen_tcp(f, 8);
    uint16_t good = bound_port(lfd);
    struct dialer_target t[2];
    struct dial_res res = {0, 0, -2, 99};
    struct dialer *d;

    t[0] = tcp4_target(refused_port(f));
    t[1] = tcp4_target(good);
    assert_int_equal(dialer_start(&d, &f->loop, t, 2, 5000, dial_cb, &res), 0);
    assert_int_equal(res.n, 0);
    run(f);
    assert_int_equal(res.n, 1);
    assert_int_equal(res.status, 0);
    assert_int_equal(res.index, 1);
    assert_true(res.fd >= 0);
    {
        struct sockaddr_storage ss;
        struct sockaddr_in sin;
        socklen_t len = sizeof(ss);

        assert_int_equal(getpeername(res.fd, (struct sockaddr *)&ss, &len), 0);
        memcpy(&sin, &ss, sizeof(sin));
        assert_int_equal(ntohs(sin.sin_port), good);
    }
    close(res.fd);
}

static void test_dial_unix(void **state)
{
    struct fx *f = *state;
    char path[256], missing[256];
    struct dialer_target t[2];
    struct dial_res res = {0, 0, -2, 99};
    struct dialer *d;
    int fl;

    listen_unix(f, path, sizeof(path), 8);
    snprintf(missing, sizeof(missing), "%s/missing.sock", f->dir);

    /* missing path alone */
    t[0] = unix_target(missing);
    assert_int_equal(dialer_start(&d, &f->loop, t, 1, 5000, dial_cb, &res), 0);
    assert_int_equal(res.n, 0);
    run(f);
    assert_int_equal(res.n, 1);
    assert_int_equal(res.status, UV_ENOENT);
    assert_int_equal(res.fd, -1);

    /* missing, then a listening one: connects at once inside connect(), and is
     * still reported from the loop */
    memset(&res, 0, sizeof(res));
    t[1] = unix_target(path);
    assert_int_equal(dialer_start(&d, &f->loop, t, 2, 5000, dial_cb, &res), 0);
    assert_int_equal(res.n, 0);
    run(f);
    assert_int_equal(res.n, 1);
    assert_int_equal(res.status, 0);
    assert_int_equal(res.index, 1);
    assert_true(res.fd >= 0);
    fl = fcntl(res.fd, F_GETFL);
    assert_true(fl >= 0 && (fl & O_NONBLOCK) != 0);
    close(res.fd);
}

/* A unix listener with a full backlog refuses non-blocking connects with
 * EAGAIN: that is a failed attempt, not "in progress". */
static void test_dial_unix_backlog_full(void **state)
{
    struct fx *f = *state;
    char path[256];
    struct sockaddr_un su;
    struct dialer_target t;
    struct dial_res res = {0, 0, -2, 99};
    struct dialer *d;
    int i, full = 0;

    listen_unix(f, path, sizeof(path), 0);
    sun_path(&su, path);
    for (i = 0; i < 8 && !full; i++) {
        int c = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

        assert_true(c >= 0);
        keep_fd(f, c);
        if (connect(c, (struct sockaddr *)&su, sizeof(su)) < 0) {
            assert_int_equal(errno, EAGAIN);
            full = 1;
        }
    }
    assert_true(full);

    t = unix_target(path);
    assert_int_equal(dialer_start(&d, &f->loop, &t, 1, 5000, dial_cb, &res), 0);
    run(f);
    assert_int_equal(res.n, 1);
    assert_int_equal(res.status, UV_EAGAIN);
    assert_int_equal(res.fd, -1);
}

static void test_dial_timeout(void **state)
{
    struct fx *f = *state;
    uint16_t hang = hanging_port(f);
    struct dialer_target t[2];
    struct dial_res res = {0, 0, -2, 99};
    struct dialer *d;
    int lfd;

    if (hang == 0)
        skip(); /* could not make a hanging connect on loopback */

    /* alone: times out */
    t[0] = tcp4_target(hang);
    assert_int_equal(dialer_start(&d, &f->loop, t, 1, 200, dial_cb, &res), 0);
    run(f);
    assert_int_equal(res.n, 1);
    assert_int_equal(res.status, UV_ETIMEDOUT);
    assert_int_equal(res.fd, -1);

    /* times out, then the next target works */
    lfd = listen_tcp(f, 8);
    memset(&res, 0, sizeof(res));
    t[1] = tcp4_target(bound_port(lfd));
    assert_int_equal(dialer_start(&d, &f->loop, t, 2, 200, dial_cb, &res), 0);
    run(f);
    assert_int_equal(res.n, 1);
    assert_int_equal(res.status, 0);
    assert_int_equal(res.index, 1);
    close(res.fd);

    /* timed out and refused: refused is the more telling error */
    memset(&res, 0, sizeof(res));
    t[1] = tcp4_target(refused_port(f));
    assert_int_equal(dialer_start(&d, &f->loop, t, 2, 200, dial_cb, &res), 0);
    run(f);
    assert_int_equal(res.n, 1);
    assert_int_equal(res.status, UV_ECONNREFUSED);

    /* timed out, and failed otherwise but not refused: the timeout wins */
    {
        char missing[256];

        snprintf(missing, sizeof(missing), "%s/missing.sock", f->dir);
        memset(&res, 0, sizeof(res));
        t[1] = unix_target(missing);
        assert_int_equal(dialer_start(&d, &f->loop, t, 2, 200, dial_cb, &res), 0);
        run(f);
        assert_int_equal(res.n, 1);
        assert_int_equal(res.status, UV_ETIMEDOUT);
    }

    /* refused, then timed out */
    memset(&res, 0, sizeof(res));
    t[1] = t[0];
    t[0] = tcp4_target(refused_port(f));
    assert_int_equal(dialer_start(&d, &f->loop, t, 2, 200, dial_cb, &res), 0);
    run(f);
    assert_int_equal(res.n, 1);
    assert_int_equal(res.status, UV_ECONNREFUSED);
}

static void cancel_cb(uv_timer_t *t)
{
    dialer_cancel(t->data);
    uv_close((uv_handle_t *)t, NULL);
}

static void test_dial_cancel(void **state)
{
    struct fx *f = *state;
    uint16_t hang = hanging_port(f);
    char path[256];
    struct dialer_target t;
    struct dial_res res = {0, 0, -2, 99};
    struct dialer *d;

    /* immediate success pending (unix connect returned 0): cancel */
    listen_unix(f, path, sizeof(path), 8);
    t = unix_target(path);
    assert_int_equal(dialer_start(&d, &f->loop, &t, 1, 5000, dial_cb, &res), 0);
    dialer_cancel(d);
    run(f);
    assert_int_equal(res.n, 0);

    /* failure report pending (connect() failed at once): cancel */
    snprintf(path, sizeof(path), "%s/missing.sock", f->dir);
    t = unix_target(path);
    assert_int_equal(dialer_start(&d, &f->loop, &t, 1, 5000, dial_cb, &res), 0);
    dialer_cancel(d);
    dialer_cancel(NULL);
    run(f);
    assert_int_equal(res.n, 0);

    /* in progress (a hanging connect), cancelled from a timer 50 ms later */
    if (hang == 0)
        skip(); /* could not make a hanging connect on loopback */
    t = tcp4_target(hang);
    assert_int_equal(dialer_start(&d, &f->loop, &t, 1, 10000, dial_cb, &res), 0);
    assert_int_equal(uv_timer_init(&f->loop, &f->aux), 0);
    f->aux.data = d;
    assert_int_equal(uv_timer_start(&f->aux, cancel_cb, 50, 0), 0);
    run(f);
    assert_int_equal(res.n, 0);
}

static void test_dial_args(void **state)
{
    struct fx *f = *state;
    struct dialer_target t = tcp4_target(80), bad;
    struct dial_res res = {0, 0, -2, 99};
    struct dialer *d = NULL;

    assert_int_equal(dialer_start(&d, &f->loop, &t, 0, 5000, dial_cb, &res), UV_EINVAL);
    assert_int_equal(dialer_start(&d, &f->loop, &t, 1, 0, dial_cb, &res), UV_EINVAL);
    bad = tcp4_target(0);
    assert_int_equal(dialer_start(&d, &f->loop, &bad, 1, 5000, dial_cb, &res), UV_EINVAL);
    bad = tcp4_target(80);
    bad.addr.family = 5;
    assert_int_equal(dialer_start(&d, &f->loop, &bad, 1, 5000, dial_cb, &res), UV_EINVAL);
    bad = unix_target("");
    assert_int_equal(dialer_start(&d, &f->loop, &bad, 1, 5000, dial_cb, &res), UV_EINVAL);
    assert_null(d);
    run(f);
    assert_int_equal(res.n, 0);
}

static void test_dial_ipv6(void **state)
{
    struct fx *f = *state;
    struct sockaddr_in6 sin6;
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    struct dialer_target t;
    struct dial_res res = {0, 0, -2, 99};
    struct dialer *d;
    int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd < 0)
        skip(); /* no IPv6 here */
    keep_fd(f, fd);
    memset(&sin6, 0, sizeof(sin6));
    sin6.sin6_family = AF_INET6;
    sin6.sin6_addr = in6addr_loopback;
    if (bind(fd, (struct sockaddr *)&sin6, sizeof(sin6)) < 0)
        skip(); /* no ::1 here */
    assert_int_equal(listen(fd, 8), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&ss, &len), 0);
    memcpy(&sin6, &ss, sizeof(sin6));

    memset(&t, 0, sizeof(t));
    t.addr.family = 6;
    t.addr.bytes[15] = 1;
    t.port = ntohs(sin6.sin6_port);
    assert_int_equal(dialer_start(&d, &f->loop, &t, 1, 5000, dial_cb, &res), 0);
    run(f);
    assert_int_equal(res.n, 1);
    assert_int_equal(res.status, 0);
    assert_true(res.fd >= 0);
    close(res.fd);
}

/* ------------------------------------------------------------------------ */

static const struct params P_TT = {RELAY_TCP, RELAY_TCP, 0, 0, 0};
static const struct params P_TP = {RELAY_TCP, RELAY_PIPE, 0, 0, 0};
static const struct params P_PT = {RELAY_PIPE, RELAY_TCP, 0, 0, 0};
static const struct params P_PP = {RELAY_PIPE, RELAY_PIPE, 0, 0, 0};
static const struct params P_TT_DIAL = {RELAY_TCP, RELAY_TCP, 1, 0, 0};
static const struct params P_PP_DIAL = {RELAY_PIPE, RELAY_PIPE, 1, 0, 0};
/* splice fallback: which splice(2) call fails, and how */
static const struct params P_FB_1 = {RELAY_TCP, RELAY_TCP, 0, 1, EINVAL};
static const struct params P_FB_2 = {RELAY_TCP, RELAY_TCP, 0, 2, ENOSYS};
static const struct params P_FB_3 = {RELAY_TCP, RELAY_TCP, 0, 3, EPERM};
static const struct params P_FB_40 = {RELAY_TCP, RELAY_TCP, 0, 40, EINVAL};
static const struct params P_FB_PT = {RELAY_PIPE, RELAY_TCP, 0, 5, EINVAL};
static const struct params P_FB_PP = {RELAY_PIPE, RELAY_PIPE, 0, 9, ENOSYS};

/* ------------------------------------------------------------------------ */
/* The front-end connection base (bridge/frontend.c)                         */

struct fc_owner {
    struct relay relay;
    struct frontend_conn fc;
    struct fc_log *log;
};

struct fc_log {
    unsigned ndecision, nclose, nreleased, nended;
    int released_after_close; /* release() ran after the CLOSE record */
    uint64_t id, up, down;
    char protocol[16], host[32], verdict[16], end[48], client[16];
    int code;
    unsigned port;
};

static void fc_record(void *ctx, const struct connlog *rec)
{
    struct fc_log *l = ctx;

    if (rec->event == CONNLOG_DECISION) {
        l->ndecision++;
        snprintf(l->verdict, sizeof(l->verdict), "%s", rec->verdict != NULL ? rec->verdict : "");
        return;
    }
    l->nclose++;
    l->id = rec->id;
    l->up = rec->bytes_up;
    l->down = rec->bytes_down;
    l->code = rec->code;
    l->port = rec->port;
    snprintf(l->protocol, sizeof(l->protocol), "%s", rec->protocol);
    snprintf(l->host, sizeof(l->host), "%s", rec->host != NULL ? rec->host : "(null)");
    snprintf(l->end, sizeof(l->end), "%s", rec->end);
    snprintf(l->client, sizeof(l->client), "%s", rec->client);
}

static void fc_bytes(const struct frontend_conn *fc, uint64_t *up, uint64_t *down)
{
    *up += 3;
    *down += 4;
}

static void fc_release(struct frontend_conn *fc)
{
    struct fc_owner *o = container_of(fc, struct fc_owner, fc);

    o->log->nreleased++;
    o->log->released_after_close = o->log->nclose == 1;
    free(o);
}

static void fc_relay_closed(struct relay *r)
{
    struct fc_owner *o = container_of(r, struct fc_owner, relay);

    frontend_conn_relay_closed(&o->fc, r);
}

static void fc_ended(struct frontend *fe)
{
    struct fc_log *l = fe->log_ctx;

    l->nended++;
}

static void test_frontend_conn(void **state)
{
    struct fx *f = *state;
    struct frontend fe;
    struct fc_log log;
    struct egress_outcome o;
    uint64_t next_id = 41;
    struct fc_owner *c = calloc(1, sizeof(*c));

    assert_non_null(c);
    memset(&log, 0, sizeof(log));
    frontend_init(&fe, &f->loop, &next_id);
    fe.log = fc_record;
    fe.log_ctx = &log;
    fe.conn_ended = fc_ended;
    c->log = &log;
    relay_init(&f->loop, &c->relay, RELAY_TCP, RELAY_TCP, fc_relay_closed, c);
    c->fc.bytes = fc_bytes;
    c->fc.release = fc_release;
    assert_int_equal(frontend_conn_start(&fe, &c->fc, "socks5"), 0);
    assert_int_equal(c->fc.id, 42);
    assert_int_equal(c->fc.code, -1);
    assert_int_equal(fe.nconns, 1);
    snprintf(c->fc.client, sizeof(c->fc.client), "unix");
    c->fc.host = "example.com";
    c->fc.port = 443;

    memset(&o, 0, sizeof(o));
    o.verdict = "deny";
    snprintf(o.reason, sizeof(o.reason), "no rule");
    frontend_conn_note(&c->fc, &o);
    assert_null(c->fc.rule);
    assert_null(c->fc.source);
    assert_string_equal(c->fc.reason, "no rule");
    c->fc.code = 2;
    frontend_conn_emit(&c->fc, CONNLOG_DECISION);
    assert_int_equal(log.ndecision, 1);
    assert_string_equal(log.verdict, "deny");

    /* the owner closes: its timer and its relay; the record and the
     * release wait for both close callbacks */
    c->fc.end = "closed by the test";
    frontend_conn_timer_close(&c->fc);
    frontend_conn_timer_close(&c->fc); /* idempotent */
    relay_close(&c->relay, 0);
    assert_int_equal(log.nclose, 0);
    run(f);
    assert_int_equal(log.nclose, 1);
    assert_int_equal(log.nreleased, 1);
    assert_true(log.released_after_close);
    assert_int_equal(log.nended, 1);
    assert_int_equal(fe.nconns, 0);
    assert_int_equal(log.id, 42);
    assert_int_equal(log.up, 3);
    assert_int_equal(log.down, 4);
    assert_int_equal(log.code, 2);
    assert_int_equal(log.port, 443);
    assert_string_equal(log.protocol, "socks5");
    assert_string_equal(log.host, "example.com");
    assert_string_equal(log.end, "closed by the test");
    assert_string_equal(log.client, "unix");
}

/* A connection without a stream (transparent mode's connect()): an id (0
 * without a counter), the log fields and the DECISION record; not listed. */
static void test_frontend_conn_begin(void **state)
{
    struct fx *f = *state;
    struct frontend fe;
    struct fc_log log;
    struct frontend_conn c;
    struct egress_outcome o;
    uint64_t next_id = 9;

    memset(&log, 0, sizeof(log));
    frontend_init(&fe, &f->loop, NULL);
    fe.log = fc_record;
    fe.log_ctx = &log;
    memset(&c, 0, sizeof(c));
    frontend_conn_begin(&fe, &c, "transparent");
    assert_int_equal(c.id, 0);
    assert_int_equal(c.code, -1);
    assert_int_equal(fe.nconns, 0);
    fe.next_id = &next_id;
    memset(&c, 0, sizeof(c));
    frontend_conn_begin(&fe, &c, "transparent");
    assert_int_equal(c.id, 10);
    assert_int_equal(next_id, 10);

    memset(&o, 0, sizeof(o));
    o.verdict = "allow";
    snprintf(o.rule, sizeof(o.rule), "'ok.test' network.allowedDomains[0]");
    frontend_conn_note(&c, &o);
    assert_string_equal(c.rule, "'ok.test' network.allowedDomains[0]");
    assert_null(c.reason);
    assert_int_equal(c.addr.family, 0); /* no address dialed */
    frontend_conn_emit(&c, CONNLOG_DECISION);
    assert_int_equal(log.ndecision, 1);
    assert_string_equal(log.verdict, "allow");
    frontend_conn_clear(&c);
    assert_null(c.rule);
    assert_int_equal(fe.nconns, 0);
}

/* ------------------------------------------------------------------------ */
/* The forwarder (bridge/forward.c) on the connection base                   */

static void fw_on_accept(struct listener *l, void *arg)
{
    forwarder_accept(arg, l);
}

static void fw_done(void *arg)
{
    (*(int *)arg)++;
}

/* A dial that is refused: one CLOSE record from the base with the
 * forwarder's words, its own id counter shared, the peer, no verdict. */
static void test_forward_refused(void **state)
{
    struct fx *f = *state;
    struct fc_log log;
    struct forward_opts o;
    struct forwarder *fw = NULL;
    struct listener *l = NULL;
    struct endpoint ep;
    struct policy_addr a;
    struct sockaddr_in sin;
    socklen_t sl = sizeof(sin);
    uint16_t lport, tport;
    uint64_t next_id = 6;
    char spec[64], want[32];
    int deaf, cfd, done = 0;

    /* a bound socket that never listens: a connect() to it is refused */
    deaf = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(deaf >= 0);
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(deaf, (struct sockaddr *)&sin, sizeof(sin)), 0);
    assert_int_equal(getsockname(deaf, (struct sockaddr *)&sin, &sl), 0);
    tport = ntohs(sin.sin_port);
    snprintf(spec, sizeof(spec), "tcp:127.0.0.1:%u", (unsigned)tport);

    memset(&log, 0, sizeof(log));
    memset(&o, 0, sizeof(o));
    assert_int_equal(endpoint_parse(spec, 0, &o.connect, NULL), 0);
    o.max_conns = 4;
    o.connect_ms = 5000;
    o.log = fc_record;
    o.log_ctx = &log;
    o.next_id = &next_id;
    assert_int_equal(forwarder_new(&fw, &f->loop, &o), 0);
    assert_int_equal(endpoint_parse("tcp:127.0.0.1:0", 1, &ep, NULL), 0);
    assert_int_equal(listener_open(&l, &f->loop, &ep, fw_on_accept, fw, NULL), 0);
    assert_int_equal(listener_address(l, &a, &lport), 0);

    cfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(cfd >= 0);
    sin.sin_port = htons(lport);
    assert_int_equal(connect(cfd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    sl = sizeof(sin);
    assert_int_equal(getsockname(cfd, (struct sockaddr *)&sin, &sl), 0);
    snprintf(want, sizeof(want), "127.0.0.1:%u", (unsigned)ntohs(sin.sin_port));
    close(cfd); /* the forwarder's drain then sees EOF: no linger */

    while (log.nclose == 0 && !f->watchdog.fired)
        uv_run(&f->loop, UV_RUN_ONCE);
    assert_int_equal(log.nclose, 1);
    assert_int_equal(log.ndecision, 0);
    assert_int_equal(log.id, 7);
    assert_int_equal(next_id, 7);
    assert_string_equal(log.protocol, "forward");
    assert_string_equal(log.host, "127.0.0.1");
    assert_int_equal(log.port, tport);
    assert_string_equal(log.end, "connect failed: ECONNREFUSED");
    assert_string_equal(log.client, want);
    assert_int_equal(log.code, -1);
    assert_int_equal(log.up, 0);
    assert_int_equal(log.down, 0);
    assert_int_equal(forwarder_live(fw), 0);

    forwarder_close(fw, fw_done, &done);
    listener_close(l, NULL, NULL);
    run(f);
    assert_int_equal(done, 1);
    close(deaf);
}

#define T(fn) cmocka_unit_test_prestate_setup_teardown(fn, setup, teardown, NULL)
#define TP(fn, p, tag)                                                                             \
    {                                                                                              \
#fn " " tag, fn, setup, teardown, (void *)&(p)                                             \
    }

static int group_copy(void **state)
{
    (void)state;
    test_mode = RELAY_SPLICE_OFF;
    return 0;
}

static int group_splice(void **state)
{
    (void)state;
    test_mode = RELAY_SPLICE_ALWAYS;
    return 0;
}

static int group_auto(void **state)
{
    (void)state;
    test_mode = RELAY_SPLICE_AUTO;
    return 0;
}

int main(void)
{
    /* The 33 relay and dialer tests, run once per group (path). */
    const struct CMUnitTest tests[] = {
        T(test_backpressure),
        TP(test_echo, P_TT, "tcp/tcp"),
        TP(test_echo, P_TP, "tcp/pipe"),
        TP(test_echo, P_PT, "pipe/tcp"),
        TP(test_echo, P_PP, "pipe/pipe"),
        TP(test_echo, P_TT_DIAL, "tcp/tcp dialer"),
        TP(test_echo, P_PP_DIAL, "pipe/pipe dialer"),
        TP(test_half_close_client_first, P_TT, "tcp/tcp"),
        TP(test_half_close_client_first, P_PP, "pipe/pipe"),
        TP(test_half_close_upstream_first, P_TT, "tcp/tcp"),
        TP(test_half_close_upstream_first, P_PP, "pipe/pipe"),
        T(test_dial_now),
        T(test_dial_start_now),
        T(test_reset_upstream),
        T(test_reset_client),
        T(test_reset_while_paused_then_fin),
        T(test_reset_while_paused_then_resume),
        T(test_idle_fires),
        T(test_idle_traffic_keeps_alive),
        TP(test_close_before_start, P_TT, "tcp"),
        TP(test_close_before_start, P_PP, "pipe"),
        TP(test_close_b_open_not_started, P_TT, "tcp"),
        TP(test_close_b_open_not_started, P_PP, "pipe"),
        T(test_owner_close_running),
        TP(test_owner_left_reading, P_TT, "tcp/tcp"),
        TP(test_owner_left_reading, P_PT, "pipe/tcp"),
        T(test_end_str),
        T(test_dial_refused),
        T(test_dial_fallback),
        T(test_dial_unix),
        T(test_dial_unix_backlog_full),
        T(test_dial_timeout),
        T(test_dial_cancel),
        T(test_dial_args),
        T(test_dial_ipv6),
    };
    /* Tests that choose their path themselves: run once. */
    const struct CMUnitTest splice_tests[] = {
        TP(test_splice_fallback, P_FB_1, "tcp/tcp 1st EINVAL"),
        TP(test_splice_fallback, P_FB_2, "tcp/tcp 2nd ENOSYS"),
        TP(test_splice_fallback, P_FB_3, "tcp/tcp 3rd EPERM"),
        TP(test_splice_fallback, P_FB_40, "tcp/tcp 40th EINVAL"),
        TP(test_splice_fallback, P_FB_PT, "pipe/tcp 5th EINVAL"),
        TP(test_splice_fallback, P_FB_PP, "pipe/pipe 9th ENOSYS"),
        TP(test_splice_auto_short, P_TT, "tcp/tcp"),
        TP(test_splice_auto_short, P_PT, "pipe/tcp"),
        TP(test_splice_auto_bulk, P_TT, "tcp/tcp"),
        TP(test_splice_auto_bulk, P_PT, "pipe/tcp"),
        TP(test_splice_auto_bulk, P_TP, "tcp/pipe"),
        TP(test_splice_auto_bulk, P_PP, "pipe/pipe"),
        TP(test_splice_after_owner_writes, P_TT, "tcp"),
        TP(test_splice_after_owner_writes, P_PT, "pipe"),
        T(test_splice_small_segments),
        T(test_frontend_conn),
        T(test_frontend_conn_begin),
        T(test_forward_refused),
    };
    const char *only = getenv("SLUICE_TEST_RELAY_MODE");
    uv_loop_t warm;
    int failed = 0;

    signal(SIGPIPE, SIG_IGN);
    /* libuv opens process-wide descriptors with the first loop; open them
     * before the per-test fd accounting starts. */
    if (uv_loop_init(&warm) != 0 || uv_loop_close(&warm) != 0)
        return 1;
    if (only == NULL || strcmp(only, "copy") == 0)
        failed += cmocka_run_group_tests_name("relay: copy path", tests, group_copy, NULL);
    if (only == NULL || strcmp(only, "splice") == 0)
        failed += cmocka_run_group_tests_name("relay: splice path", tests, group_splice, NULL);
    if (only == NULL || strcmp(only, "auto") == 0)
        failed += cmocka_run_group_tests_name("relay: auto (default)", tests, group_auto, NULL);
    if (only == NULL || strcmp(only, "splice") == 0)
        failed += cmocka_run_group_tests_name("relay: splice specifics", splice_tests, NULL, NULL);
    return failed;
}
