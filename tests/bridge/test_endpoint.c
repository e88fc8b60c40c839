/* tests/bridge/test_endpoint.c - endpoint parsing and listeners.
 *
 * Parsing is table-driven (valid endpoints with their canonical text, invalid
 * ones with the message they must give). Listeners run on a real loop, on
 * 127.0.0.1 / ::1 port 0 and on unix sockets in a private directory; clients
 * are plain blocking sockets (a loopback connect completes in the kernel's
 * backlog without the loop running). Nothing but loopback and unix sockets is
 * ever contacted.
 */
#include <setjmp.h> /* cmocka needs these first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <uv.h>

#include "bridge/bridge.h"
#include "policy/policy.h"

#define RUN_LIMIT_MS 5000
#define MAX_ACCEPTED 8

/* ------------------------------------------------------------------------ */
/* Parsing                                                                   */

struct valid_case {
    const char *in;
    int for_listen;
    const char *canonical;
};

static const struct valid_case valid_cases[] = {
    {"tcp:127.0.0.1:80", 0, "tcp:127.0.0.1:80"},
    {"tcp:127.0.0.1:65535", 0, "tcp:127.0.0.1:65535"},
    {"tcp:10.1.2.3:1", 0, "tcp:10.1.2.3:1"},
    {"tcp:0.0.0.0:0", 1, "tcp:0.0.0.0:0"},
    {"tcp:[::1]:80", 0, "tcp:[::1]:80"},
    {"tcp:[0:0:0:0:0:0:0:1]:8080", 0, "tcp:[::1]:8080"},
    {"tcp:[2001:DB8::A]:443", 0, "tcp:[2001:db8::a]:443"},
    {"tcp:[::]:0", 1, "tcp:[::]:0"},
    {"tcp:[::ffff:127.0.0.1]:3128", 0, "tcp:[::ffff:127.0.0.1]:3128"},
    {"unix:/tmp/sluice.sock", 0, "unix:/tmp/sluice.sock"},
    {"unix:relative/x.sock", 1, "unix:relative/x.sock"},
    {"unix:@not-abstract", 0, "unix:@not-abstract"},
    {"unix:with:colons", 0, "unix:with:colons"},
    {"fd:0", 1, "fd:0"},
    {"fd:3", 1, "fd:3"},
    {"fd:2147483647", 1, "fd:2147483647"},
};

struct invalid_case {
    const char *in;
    int for_listen;
    const char *why; /* substring of the message */
};

static const struct invalid_case invalid_cases[] = {
    {"", 1, "empty endpoint"},
    {"127.0.0.1:80", 0, "missing scheme"},
    {"[::1]:80", 0, "missing scheme"},
    {":80", 0, "missing scheme"},
    {"/tmp/x.sock", 0, "missing scheme"},
    {"udp:1.2.3.4:53", 0, "unknown scheme 'udp' (expected tcp:, unix: or fd:)"},
    {"TCP:127.0.0.1:80", 0, "unknown scheme 'TCP'"},
    {"tcp4:127.0.0.1:80", 0, "unknown scheme 'tcp4'"},
    {"tcp:", 0, "missing address and port"},
    {"tcp:127.0.0.1", 0, "missing port"},
    {"tcp:127.0.0.1:", 0, "missing port"},
    {"tcp::80", 0, "missing address"},
    {"tcp:127.0.0.1:0", 0, "port 0 is only valid for listening"},
    {"tcp:127.0.0.1:65536", 0, "port out of range 1-65535"},
    {"tcp:127.0.0.1:65536", 1, "port out of range 0-65535"},
    {"tcp:127.0.0.1:99999999999999999999999", 0, "port out of range 1-65535"},
    {"tcp:127.0.0.1:080", 0, "leading zeros"},
    {"tcp:127.0.0.1:00", 1, "leading zeros"},
    {"tcp:127.0.0.1:+80", 0, "invalid port"},
    {"tcp:127.0.0.1:-80", 0, "invalid port"},
    {"tcp:127.0.0.1: 80", 0, "invalid port"},
    {"tcp:127.0.0.1:80 ", 0, "invalid port"},
    {"tcp:127.0.0.1:80x", 0, "invalid port"},
    {"tcp:localhost:80", 0, "hostnames are not accepted, use an IP address"},
    {"tcp:example.com:443", 0, "hostnames are not accepted"},
    {"tcp:localhost", 0, "hostnames are not accepted"},
    {"tcp:127.1:80", 0, "dotted quad"},
    {"tcp:0x7f.0.0.1:80", 0, "dotted quad"},
    {"tcp:2130706433:80", 0, "dotted quad"},
    {"tcp:0177.0.0.1:80", 0, "dotted quad"},
    {"tcp:01.2.3.4:80", 0, "dotted quad"},
    {"tcp:1.2.3.256:80", 0, "dotted quad"},
    {"tcp:1.2.3.4.5:80", 0, "dotted quad"},
    {"tcp:1.2.3.4/8:80", 0, "invalid IPv4 address"},
    {"tcp:::1:80", 0, "must be in brackets"},
    {"tcp:::1", 0, "must be in brackets"},
    {"tcp:[::1]", 0, "missing port"},
    {"tcp:[::1]80", 0, "unexpected text after ']'"},
    {"tcp:[::1:80", 0, "missing ']'"},
    {"tcp:[]:80", 0, "missing address"},
    {"tcp:[127.0.0.1]:80", 0, "IPv4 address must not be in brackets"},
    {"tcp:[fe80::1%eth0]:80", 0, "zone ids are not accepted"},
    {"tcp:[::g]:80", 0, "invalid IPv6 address"},
    {"tcp:[::1]:0", 0, "only valid for listening"},
    {"unix:", 0, "missing unix socket path"},
    {"fd:3", 0, "fd: endpoints can only be listened on"},
    {"fd:", 1, "missing fd number or name"},
    {"fd:-1", 1, "without sign"},
    {"fd:+3", 1, "without sign"},
    {"fd:03", 1, "leading zeros"},
    {"fd:2147483648", 1, "fd number out of range"},
    {"fd:a:b", 1, "invalid fd name"},
};

static void test_parse_valid(void **state)
{
    char buf[ENDPOINT_STR_MAX];
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(valid_cases) / sizeof(valid_cases[0]); i++) {
        const struct valid_case *c = &valid_cases[i];
        struct endpoint ep;
        const char *why = NULL;
        int rc = endpoint_parse(c->in, c->for_listen, &ep, &why);
        if (rc != 0)
            fail_msg("'%s' refused: %s", c->in, why != NULL ? why : "(null)");
        endpoint_str(&ep, buf, sizeof(buf));
        if (strcmp(buf, c->canonical) != 0)
            fail_msg("'%s' -> '%s', want '%s'", c->in, buf, c->canonical);
    }
}

static void test_parse_invalid(void **state)
{
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(invalid_cases) / sizeof(invalid_cases[0]); i++) {
        const struct invalid_case *c = &invalid_cases[i];
        struct endpoint ep;
        const char *why = NULL;
        int rc;

        memset(&ep, 0x5a, sizeof(ep));
        rc = endpoint_parse(c->in, c->for_listen, &ep, &why);
        if (rc != UV_EINVAL)
            fail_msg("'%s' (for_listen %d) accepted (rc %d)", c->in, c->for_listen, rc);
        if (why == NULL || strstr(why, c->why) == NULL)
            fail_msg("'%s': message '%s', want '%s'", c->in, why != NULL ? why : "(null)", c->why);
        assert_int_equal(ep.kind, 0x5a5a5a5a); /* untouched on error (R3) */
    }
}

static void test_parse_unix_length(void **state)
{
    char s[5 + 200], buf[ENDPOINT_STR_MAX];
    struct endpoint ep;
    const char *why = NULL;

    (void)state;
    memcpy(s, "unix:", 5);
    memset(s + 5, 'a', 107);
    s[5 + 107] = '\0';
    assert_int_equal(endpoint_parse(s, 1, &ep, &why), 0);
    assert_int_equal(strlen(ep.path), 107);
    assert_string_equal(endpoint_str(&ep, buf, sizeof(buf)), s);

    s[5 + 107] = 'a';
    s[5 + 108] = '\0';
    assert_int_equal(endpoint_parse(s, 1, &ep, &why), UV_EINVAL);
    assert_non_null(strstr(why, "too long"));
    assert_int_equal(endpoint_parse(NULL, 1, &ep, NULL), UV_EINVAL);
}

static void test_str_round_trip(void **state)
{
    char a[ENDPOINT_STR_MAX], b[ENDPOINT_STR_MAX], tiny[8];
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(valid_cases) / sizeof(valid_cases[0]); i++) {
        struct endpoint e1, e2;
        assert_int_equal(endpoint_parse(valid_cases[i].in, 1, &e1, NULL), 0);
        endpoint_str(&e1, a, sizeof(a));
        assert_int_equal(endpoint_parse(a, 1, &e2, NULL), 0);
        endpoint_str(&e2, b, sizeof(b));
        assert_string_equal(a, b);
        assert_int_equal(e1.kind, e2.kind);
        if (e1.kind == ENDPOINT_TCP) {
            assert_memory_equal(&e1.addr, &e2.addr, sizeof(e1.addr));
            assert_int_equal(e1.port, e2.port);
        }
        /* A short buffer truncates, NUL-terminated. */
        endpoint_str(&e1, tiny, sizeof(tiny));
        assert_true(strlen(tiny) < sizeof(tiny));
    }
}

static void test_sockaddr(void **state)
{
    struct endpoint ep;
    struct sockaddr_storage ss;
    socklen_t len;

    (void)state;
    assert_int_equal(endpoint_parse("tcp:127.0.0.1:3128", 0, &ep, NULL), 0);
    endpoint_sockaddr(&ep.addr, ep.port, &ss, &len);
    assert_int_equal(ss.ss_family, AF_INET);
    assert_int_equal(len, sizeof(struct sockaddr_in));
    assert_int_equal(ntohs(((struct sockaddr_in *)(void *)&ss)->sin_port), 3128);
    assert_int_equal(ntohl(((struct sockaddr_in *)(void *)&ss)->sin_addr.s_addr), 0x7f000001);

    assert_int_equal(endpoint_parse("tcp:[::1]:1080", 0, &ep, NULL), 0);
    endpoint_sockaddr(&ep.addr, ep.port, &ss, &len);
    assert_int_equal(ss.ss_family, AF_INET6);
    assert_int_equal(len, sizeof(struct sockaddr_in6));
    assert_int_equal(ntohs(((struct sockaddr_in6 *)(void *)&ss)->sin6_port), 1080);
    assert_true(IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *)(void *)&ss)->sin6_addr));
}

/* ---- systemd socket activation (parsing only) ---- */

static void set_listen_env(const char *pid, const char *fds, const char *names)
{
    if (pid != NULL)
        setenv("LISTEN_PID", pid, 1);
    else
        unsetenv("LISTEN_PID");
    if (fds != NULL)
        setenv("LISTEN_FDS", fds, 1);
    else
        unsetenv("LISTEN_FDS");
    if (names != NULL)
        setenv("LISTEN_FDNAMES", names, 1);
    else
        unsetenv("LISTEN_FDNAMES");
}

static void expect_fd_name(const char *s, int fd)
{
    struct endpoint ep;
    const char *why = NULL;

    if (endpoint_parse(s, 1, &ep, &why) != 0)
        fail_msg("'%s' refused: %s", s, why);
    assert_int_equal(ep.kind, ENDPOINT_FD);
    assert_int_equal(ep.fd, fd);
}

static void expect_fd_error(const char *s, const char *want)
{
    struct endpoint ep;
    const char *why = NULL;

    assert_int_equal(endpoint_parse(s, 1, &ep, &why), UV_EINVAL);
    if (why == NULL || strstr(why, want) == NULL)
        fail_msg("'%s': message '%s', want '%s'", s, why != NULL ? why : "(null)", want);
}

static void test_parse_listen_fdnames(void **state)
{
    char pid[32];

    (void)state;
    snprintf(pid, sizeof(pid), "%ld", (long)getpid());

    set_listen_env(NULL, NULL, NULL);
    expect_fd_error("fd:web", "needs LISTEN_PID and LISTEN_FDS");

    set_listen_env(pid, "3", "web:admin:metrics");
    expect_fd_name("fd:web", 3);
    expect_fd_name("fd:admin", 4);
    expect_fd_name("fd:metrics", 5);
    expect_fd_name("fd:4", 4); /* a number is the fd itself */
    expect_fd_error("fd:nope", "no socket of that name");
    expect_fd_error("fd:we", "no socket of that name");
    expect_fd_error("fd:webx", "no socket of that name");

    set_listen_env(pid, "1", "web:admin"); /* names beyond LISTEN_FDS ignored */
    expect_fd_name("fd:web", 3);
    expect_fd_error("fd:admin", "no socket of that name");

    set_listen_env(pid, "2", "dup:dup");
    expect_fd_error("fd:dup", "several");

    set_listen_env("1", "1", "web");
    expect_fd_error("fd:web", "LISTEN_PID is not this process");
    set_listen_env("x", "1", "web");
    expect_fd_error("fd:web", "LISTEN_PID is not this process");
    set_listen_env(pid, "one", "web");
    expect_fd_error("fd:web", "LISTEN_FDS is not a number");
    set_listen_env(pid, "1", NULL);
    expect_fd_error("fd:web", "no LISTEN_FDNAMES");

    set_listen_env(NULL, NULL, NULL);
}

/* ------------------------------------------------------------------------ */
/* Listeners                                                                 */

union stream {
    uv_handle_t h;
    uv_stream_t s;
    uv_tcp_t tcp;
    uv_pipe_t pipe;
};

struct fixture {
    uv_loop_t loop;
    uv_timer_t limit;
    int timed_out;
    struct listener *l;
    int listener_closed;
    union stream accepted[MAX_ACCEPTED];
    size_t naccepted;
    int accept_rc;
    int pause_after; /* pause the listener after this many accepts (0: never) */
    char dir[64];
    char path[128];
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    assert_int_equal(uv_loop_init(&f->loop), 0);
    assert_int_equal(uv_timer_init(&f->loop, &f->limit), 0);
    memcpy(f->dir, "/tmp/sluice-test-ep.XXXXXX", sizeof("/tmp/sluice-test-ep.XXXXXX"));
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof(f->path), "%s/s.sock", f->dir);
    *state = f;
    return 0;
}

static void remove_dir(const char *dir)
{
    static const char *const names[] = {"s.sock", "target", "sub/s.sock", "sticky/s.sock"};
    char p[160];
    size_t i;

    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
        unlink(p);
    }
    snprintf(p, sizeof(p), "%s/sub", dir);
    rmdir(p);
    snprintf(p, sizeof(p), "%s/sticky", dir);
    rmdir(p);
    rmdir(dir);
}

static void on_any_close(uv_handle_t *h)
{
    (void)h;
}

static void on_listener_closed(void *arg)
{
    struct fixture *f = arg;
    f->listener_closed = 1;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    size_t i;

    if (f->l != NULL)
        listener_close(f->l, on_listener_closed, f);
    for (i = 0; i < f->naccepted; i++)
        uv_close(&f->accepted[i].h, on_any_close);
    uv_close((uv_handle_t *)&f->limit, on_any_close);
    assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(uv_loop_close(&f->loop), 0); /* no handle leaked */
    if (f->l != NULL)
        assert_true(f->listener_closed);
    remove_dir(f->dir);
    free(f);
    return 0;
}

static void on_limit(uv_timer_t *t)
{
    struct fixture *f = t->data;
    f->timed_out = 1;
}

/* Runs the loop until *flag >= want or ms pass. Returns 1 if reached. */
static int run_until(struct fixture *f, const size_t *flag, size_t want, uint64_t ms)
{
    f->timed_out = 0;
    f->limit.data = f;
    uv_timer_start(&f->limit, on_limit, ms, 0);
    while (*flag < want && !f->timed_out)
        uv_run(&f->loop, UV_RUN_ONCE);
    uv_timer_stop(&f->limit);
    return *flag >= want;
}

static void on_accept(struct listener *l, void *arg)
{
    struct fixture *f = arg;
    union stream *c;

    assert_true(f->naccepted < MAX_ACCEPTED);
    c = &f->accepted[f->naccepted];
    if (listener_kind(l) == RELAY_TCP)
        assert_int_equal(uv_tcp_init(&f->loop, &c->tcp), 0);
    else
        assert_int_equal(uv_pipe_init(&f->loop, &c->pipe, 0), 0);
    f->accept_rc = listener_accept(l, &c->s);
    if (f->accept_rc != 0) {
        uv_close(&c->h, on_any_close);
        return;
    }
    f->naccepted++;
    if (f->pause_after > 0 && f->naccepted == (size_t)f->pause_after)
        listener_pause(l);
}

static int open_ep(struct fixture *f, const char *s, const char **why)
{
    struct endpoint ep;
    const char *pwhy = NULL;

    if (endpoint_parse(s, 1, &ep, &pwhy) != 0)
        fail_msg("'%s': %s", s, pwhy);
    return listener_open(&f->l, &f->loop, &ep, on_accept, f, why);
}

static int connect_tcp(const struct policy_addr *a, uint16_t port)
{
    struct sockaddr_storage ss;
    socklen_t len;
    int fd;

    endpoint_sockaddr(a, port, &ss, &len);
    fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&ss, len), 0);
    return fd;
}

static int connect_unix(const char *path)
{
    struct sockaddr_un sun;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), rc;

    assert_true(fd >= 0);
    memset(&sun, 0, sizeof(sun));
    sun.sun_family = AF_UNIX;
    snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
    rc = connect(fd, (struct sockaddr *)&sun, sizeof(sun));
    if (rc != 0) {
        close(fd);
        return -errno;
    }
    return fd;
}

/* A listening (or, with backlog < 0, merely bound) unix socket at path. */
static int bind_unix(const char *path, int backlog)
{
    struct sockaddr_un sun;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    assert_true(fd >= 0);
    memset(&sun, 0, sizeof(sun));
    sun.sun_family = AF_UNIX;
    snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
    assert_int_equal(bind(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
    if (backlog >= 0)
        assert_int_equal(listen(fd, backlog), 0);
    return fd;
}

static int listen_tcp4_loopback(void)
{
    struct sockaddr_in sa;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    assert_true(fd >= 0);
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(fd, 16), 0);
    return fd;
}

static void test_listen_tcp4(void **state)
{
    struct fixture *f = *state;
    struct policy_addr a;
    uint16_t port = 0;
    struct sockaddr_in peer;
    int len = sizeof(peer), fd;

    assert_int_equal(open_ep(f, "tcp:127.0.0.1:0", NULL), 0);
    assert_int_equal(listener_kind(f->l), RELAY_TCP);
    assert_int_equal(listener_address(f->l, &a, &port), 0);
    assert_int_equal(a.family, 4);
    assert_int_equal(a.bytes[0], 127);
    assert_int_not_equal(port, 0);

    fd = connect_tcp(&a, port);
    assert_true(run_until(f, &f->naccepted, 1, RUN_LIMIT_MS));
    assert_int_equal(uv_tcp_getpeername(&f->accepted[0].tcp, (struct sockaddr *)&peer, &len), 0);
    assert_int_equal(ntohl(peer.sin_addr.s_addr), 0x7f000001);

    /* A second listener on the same port: the address is in use. */
    {
        struct endpoint ep;
        struct listener *l2 = NULL;
        const char *why = NULL;
        char s[64];
        snprintf(s, sizeof(s), "tcp:127.0.0.1:%u", (unsigned)port);
        assert_int_equal(endpoint_parse(s, 1, &ep, NULL), 0);
        assert_int_equal(listener_open(&l2, &f->loop, &ep, on_accept, f, &why), UV_EADDRINUSE);
        assert_non_null(strstr(why, "in use"));
        assert_null(l2);
    }
    close(fd);
}

static void test_listen_tcp6(void **state)
{
    struct fixture *f = *state;
    struct sockaddr_in6 sa;
    struct policy_addr a;
    uint16_t port = 0;
    int probe, fd, rc;

    probe = socket(AF_INET6, SOCK_STREAM, 0);
    memset(&sa, 0, sizeof(sa));
    sa.sin6_family = AF_INET6;
    sa.sin6_addr = in6addr_loopback;
    rc = probe < 0 ? -1 : bind(probe, (struct sockaddr *)&sa, sizeof(sa));
    if (probe >= 0)
        close(probe);
    if (rc != 0)
        skip(); /* no IPv6 loopback here */

    assert_int_equal(open_ep(f, "tcp:[::1]:0", NULL), 0);
    assert_int_equal(listener_address(f->l, &a, &port), 0);
    assert_int_equal(a.family, 6);
    assert_int_not_equal(port, 0);
    fd = connect_tcp(&a, port);
    assert_true(run_until(f, &f->naccepted, 1, RUN_LIMIT_MS));
    close(fd);
}

static void test_pause_resume(void **state)
{
    struct fixture *f = *state;
    struct policy_addr a;
    uint16_t port;
    int fds[3], i;

    f->pause_after = 1;
    assert_int_equal(open_ep(f, "tcp:127.0.0.1:0", NULL), 0);
    assert_int_equal(listener_address(f->l, &a, &port), 0);
    for (i = 0; i < 3; i++)
        fds[i] = connect_tcp(&a, port);
    assert_true(run_until(f, &f->naccepted, 1, RUN_LIMIT_MS));
    /* Paused after the first: nothing else is accepted. */
    assert_false(run_until(f, &f->naccepted, 2, 200));
    assert_int_equal(f->naccepted, 1);

    f->pause_after = 0;
    listener_resume(f->l);
    assert_true(run_until(f, &f->naccepted, 3, RUN_LIMIT_MS));
    listener_resume(f->l); /* not paused: no-op */
    for (i = 0; i < 3; i++)
        close(fds[i]);
}

static void test_listener_close_idempotent(void **state)
{
    struct fixture *f = *state;

    assert_int_equal(open_ep(f, "tcp:127.0.0.1:0", NULL), 0);
    listener_close(f->l, on_listener_closed, f);
    listener_close(f->l, NULL, NULL); /* no-op */
    assert_false(f->listener_closed); /* done runs from the close callback */
    assert_int_equal(uv_run(&f->loop, UV_RUN_NOWAIT), 0);
    assert_true(f->listener_closed);
    f->l = NULL;
    listener_close(NULL, NULL, NULL);
}

static void test_listen_unix(void **state)
{
    struct fixture *f = *state;
    struct policy_addr a;
    uint16_t port;
    struct stat st;
    char s[256];
    mode_t old;
    int fd;

    snprintf(s, sizeof(s), "unix:%s", f->path);
    old = umask(0); /* the mode must not depend on the caller's umask */
    assert_int_equal(open_ep(f, s, NULL), 0);
    assert_int_equal(umask(old), 0); /* restored */
    assert_int_equal(listener_kind(f->l), RELAY_PIPE);
    assert_int_equal(listener_address(f->l, &a, &port), UV_EINVAL);
    assert_int_equal(lstat(f->path, &st), 0);
    assert_true(S_ISSOCK(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0600);

    fd = connect_unix(f->path);
    assert_true(fd >= 0);
    assert_true(run_until(f, &f->naccepted, 1, RUN_LIMIT_MS));
    close(fd);

    listener_close(f->l, on_listener_closed, f);
    f->l = NULL;
    assert_int_equal(lstat(f->path, &st), -1); /* removed */
    assert_int_equal(errno, ENOENT);
}

static void test_unix_symlink_refused(void **state)
{
    struct fixture *f = *state;
    char s[256], target[256], link[256];
    const char *why = NULL;
    struct stat st;
    ssize_t n;

    snprintf(target, sizeof(target), "%s/target", f->dir);
    assert_int_equal(symlink(target, f->path), 0); /* dangling: bind would create target */
    snprintf(s, sizeof(s), "unix:%s", f->path);
    assert_int_equal(open_ep(f, s, &why), UV_EEXIST);
    assert_null(f->l);
    assert_non_null(strstr(why, "symlink"));
    assert_int_equal(lstat(f->path, &st), 0);
    assert_true(S_ISLNK(st.st_mode)); /* left intact */
    n = readlink(f->path, link, sizeof(link) - 1);
    assert_true(n > 0);
    link[n] = '\0';
    assert_string_equal(link, target);
    assert_int_equal(lstat(target, &st), -1); /* never followed */

    /* A symlink to a live socket is refused too, not probed. */
    unlink(f->path);
    {
        int lfd = bind_unix(target, 4);
        assert_int_equal(symlink(target, f->path), 0);
        assert_int_equal(open_ep(f, s, &why), UV_EEXIST);
        assert_non_null(strstr(why, "symlink"));
        close(lfd);
    }
}

static void test_unix_stale_replaced(void **state)
{
    struct fixture *f = *state;
    struct stat before, after;
    char s[256];
    int fd;

    fd = bind_unix(f->path, -1); /* bound, never listened: connect is refused */
    close(fd);                   /* the file stays: a stale socket */
    assert_int_equal(lstat(f->path, &before), 0);
    assert_true(S_ISSOCK(before.st_mode));

    snprintf(s, sizeof(s), "unix:%s", f->path);
    assert_int_equal(open_ep(f, s, NULL), 0);
    assert_int_equal(lstat(f->path, &after), 0);
    assert_true(S_ISSOCK(after.st_mode));
    assert_int_equal(after.st_mode & 07777, 0600);
    fd = connect_unix(f->path);
    assert_true(fd >= 0);
    assert_true(run_until(f, &f->naccepted, 1, RUN_LIMIT_MS));
    close(fd);
}

static void test_unix_live_refused(void **state)
{
    struct fixture *f = *state;
    const char *why = NULL;
    struct stat st;
    char s[256];
    int lfd, cfd;

    lfd = bind_unix(f->path, 4);
    snprintf(s, sizeof(s), "unix:%s", f->path);
    assert_int_equal(open_ep(f, s, &why), UV_EADDRINUSE);
    assert_null(f->l);
    assert_non_null(strstr(why, "listening"));
    assert_int_equal(lstat(f->path, &st), 0); /* still there, still theirs */
    cfd = connect_unix(f->path);
    assert_true(cfd >= 0);
    close(cfd);
    close(lfd);
}

static void test_unix_file_refused(void **state)
{
    struct fixture *f = *state;
    const char *why = NULL;
    char s[256], buf[16];
    int fd;

    fd = open(f->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "keep me", 7), 7);
    close(fd);
    snprintf(s, sizeof(s), "unix:%s", f->path);
    assert_int_equal(open_ep(f, s, &why), UV_EEXIST);
    assert_non_null(strstr(why, "not a socket"));
    fd = open(f->path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(read(fd, buf, sizeof(buf)), 7);
    assert_memory_equal(buf, "keep me", 7);
    close(fd);

    /* A directory at the path. */
    unlink(f->path);
    assert_int_equal(mkdir(f->path, 0700), 0);
    assert_int_equal(open_ep(f, s, &why), UV_EEXIST);
    rmdir(f->path);

    /* A path ending in '/'. */
    snprintf(s, sizeof(s), "unix:%s/", f->dir);
    assert_int_equal(open_ep(f, s, &why), UV_EINVAL);
}

static void test_unix_parent_checks(void **state)
{
    struct fixture *f = *state;
    const char *why = NULL;
    char s[256], sub[160];
    struct stat st;

    /* Missing directory. */
    snprintf(s, sizeof(s), "unix:%s/nope/s.sock", f->dir);
    assert_int_equal(open_ep(f, s, &why), UV_ENOENT);
    assert_non_null(strstr(why, "does not exist"));

    /* World-writable, not sticky: refused. */
    snprintf(sub, sizeof(sub), "%s/sub", f->dir);
    assert_int_equal(mkdir(sub, 0700), 0);
    assert_int_equal(chmod(sub, 0777), 0);
    snprintf(s, sizeof(s), "unix:%s/s.sock", sub);
    assert_int_equal(open_ep(f, s, &why), UV_EPERM);
    assert_non_null(strstr(why, "writable by others"));
    assert_int_equal(chmod(sub, 0770), 0); /* group-writable: refused too */
    assert_int_equal(open_ep(f, s, &why), UV_EPERM);

    /* Sticky and world-writable (like /tmp): accepted. */
    snprintf(sub, sizeof(sub), "%s/sticky", f->dir);
    assert_int_equal(mkdir(sub, 0700), 0);
    assert_int_equal(chmod(sub, 01777), 0);
    snprintf(s, sizeof(s), "unix:%s/s.sock", sub);
    assert_int_equal(open_ep(f, s, &why), 0);
    snprintf(sub, sizeof(sub), "%s/sticky/s.sock", f->dir);
    assert_int_equal(lstat(sub, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);

    /* A directory owned by another user (not root): only testable as root. */
    if (geteuid() == 0) {
        struct listener *l2 = NULL;
        struct endpoint ep;
        snprintf(sub, sizeof(sub), "%s/sub", f->dir);
        assert_int_equal(chmod(sub, 0755), 0);
        assert_int_equal(chown(sub, 12345, 12345), 0);
        snprintf(s, sizeof(s), "unix:%s/s.sock", sub);
        assert_int_equal(endpoint_parse(s, 1, &ep, NULL), 0);
        assert_int_equal(listener_open(&l2, &f->loop, &ep, on_accept, f, &why), UV_EPERM);
        assert_non_null(strstr(why, "another user"));
    }
}

static void test_unix_close_keeps_replacement(void **state)
{
    struct fixture *f = *state;
    struct stat st;
    char s[256];
    int fd;

    snprintf(s, sizeof(s), "unix:%s", f->path);
    assert_int_equal(open_ep(f, s, NULL), 0);
    /* Someone replaced the socket file: close must not remove theirs. */
    assert_int_equal(unlink(f->path), 0);
    fd = open(f->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    close(fd);
    listener_close(f->l, on_listener_closed, f);
    f->l = NULL;
    assert_int_equal(lstat(f->path, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0);
    assert_true(f->listener_closed);
}

static void test_listen_fd(void **state)
{
    struct fixture *f = *state;
    struct endpoint ep;
    struct policy_addr a;
    uint16_t port;
    struct sockaddr_in sa;
    socklen_t len = sizeof(sa);
    const char *why = NULL;
    int lfd, cfd, nfd, pfd[2];

    /* An inherited listening TCP socket. */
    lfd = listen_tcp4_loopback();
    assert_int_equal(getsockname(lfd, (struct sockaddr *)&sa, &len), 0);
    memset(&ep, 0, sizeof(ep));
    ep.kind = ENDPOINT_FD;
    ep.fd = lfd;
    assert_int_equal(listener_open(&f->l, &f->loop, &ep, on_accept, f, &why), 0);
    assert_int_equal(listener_kind(f->l), RELAY_TCP);
    assert_int_equal(listener_address(f->l, &a, &port), 0);
    assert_int_equal(port, ntohs(sa.sin_port));
    cfd = connect_tcp(&a, port);
    assert_true(run_until(f, &f->naccepted, 1, RUN_LIMIT_MS));
    close(cfd);
    listener_close(f->l, on_listener_closed, f); /* closes the inherited fd */
    f->l = NULL;
    assert_int_equal(uv_run(&f->loop, UV_RUN_NOWAIT), 0);
    f->listener_closed = 0;

    /* An inherited unix socket: a pipe listener; its file is not ours to
     * remove. */
    lfd = bind_unix(f->path, 4);
    ep.fd = lfd;
    assert_int_equal(listener_open(&f->l, &f->loop, &ep, on_accept, f, &why), 0);
    assert_int_equal(listener_kind(f->l), RELAY_PIPE);
    cfd = connect_unix(f->path);
    assert_true(cfd >= 0);
    assert_true(run_until(f, &f->naccepted, 2, RUN_LIMIT_MS));
    close(cfd);

    /* A socket that is not listening, something that is not a socket, and a
     * closed fd. */
    {
        struct listener *l2 = NULL;
        nfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ep.fd = nfd;
        assert_int_equal(listener_open(&l2, &f->loop, &ep, on_accept, f, &why), UV_EINVAL);
        assert_non_null(strstr(why, "not a listening socket"));
        close(nfd);
        assert_int_equal(pipe(pfd), 0);
        ep.fd = pfd[0];
        assert_int_equal(listener_open(&l2, &f->loop, &ep, on_accept, f, &why), UV_ENOTSOCK);
        assert_non_null(strstr(why, "not a socket"));
        close(pfd[0]);
        close(pfd[1]);
        ep.fd = pfd[0]; /* now closed */
        assert_int_equal(listener_open(&l2, &f->loop, &ep, on_accept, f, &why), UV_EBADF);
        nfd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        ep.fd = nfd;
        assert_int_equal(listener_open(&l2, &f->loop, &ep, on_accept, f, &why), UV_EINVAL);
        assert_non_null(strstr(why, "not a stream socket"));
        close(nfd);
        assert_null(l2);
    }
}

/* Socket activation end to end: listening sockets on fds 3 and 4, named in
 * LISTEN_FDNAMES, with LISTEN_PID = us. They are put in place before the
 * loop exists (its epoll fd would otherwise take 3); whatever this process
 * inherited on 3 and 4 is parked and put back. */
static int g_saved3 = -1, g_saved4 = -1;

static int setup_systemd(void **state)
{
    char dir[] = "/tmp/sluice-test-sd.XXXXXX", path[64];
    int s1, s2;

    g_saved3 = fcntl(3, F_DUPFD_CLOEXEC, 64);
    g_saved4 = fcntl(4, F_DUPFD_CLOEXEC, 64);
    close(3);
    close(4);
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/s.sock", dir);
    s1 = listen_tcp4_loopback();
    s2 = bind_unix(path, 4);
    if (s1 != 3)
        assert_int_equal(dup2(s1, 3), 3), close(s1);
    if (s2 != 4)
        assert_int_equal(dup2(s2, 4), 4), close(s2);
    fcntl(3, F_SETFD, 0); /* systemd passes them without close-on-exec */
    fcntl(4, F_SETFD, 0);
    setup(state);
    /* The fixture's own directory holds the socket from now on. */
    {
        struct fixture *f = *state;
        assert_int_equal(rename(path, f->path), 0);
        rmdir(dir);
    }
    return 0;
}

static int teardown_systemd(void **state)
{
    teardown(state);
    set_listen_env(NULL, NULL, NULL);
    if (g_saved3 >= 0) {
        dup2(g_saved3, 3);
        close(g_saved3);
    }
    if (g_saved4 >= 0) {
        dup2(g_saved4, 4);
        close(g_saved4);
    }
    return 0;
}

static void test_listen_systemd(void **state)
{
    struct fixture *f = *state;
    struct endpoint ep;
    struct policy_addr a;
    uint16_t port;
    char pid[32];
    int cfd;

    snprintf(pid, sizeof(pid), "%ld", (long)getpid());
    set_listen_env(pid, "2", "web:ctl");

    assert_int_equal(endpoint_parse("fd:web", 1, &ep, NULL), 0);
    assert_int_equal(ep.fd, 3);
    assert_int_equal(fcntl(3, F_GETFD) & FD_CLOEXEC, 0); /* as systemd passes it */
    assert_int_equal(listener_open(&f->l, &f->loop, &ep, on_accept, f, NULL), 0);
    assert_int_equal(listener_kind(f->l), RELAY_TCP);
    assert_int_not_equal(fcntl(3, F_GETFD) & FD_CLOEXEC, 0);
    assert_int_equal(listener_address(f->l, &a, &port), 0);
    cfd = connect_tcp(&a, port);
    assert_true(run_until(f, &f->naccepted, 1, RUN_LIMIT_MS));
    close(cfd);
    listener_close(f->l, on_listener_closed, f);
    f->l = NULL;
    assert_int_equal(uv_run(&f->loop, UV_RUN_NOWAIT), 0);
    f->listener_closed = 0;

    assert_int_equal(endpoint_parse("fd:ctl", 1, &ep, NULL), 0);
    assert_int_equal(ep.fd, 4);
    assert_int_equal(listener_open(&f->l, &f->loop, &ep, on_accept, f, NULL), 0);
    assert_int_equal(listener_kind(f->l), RELAY_PIPE);
    cfd = connect_unix(f->path);
    assert_true(cfd >= 0);
    assert_true(run_until(f, &f->naccepted, 2, RUN_LIMIT_MS));
    close(cfd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_valid),
        cmocka_unit_test(test_parse_invalid),
        cmocka_unit_test(test_parse_unix_length),
        cmocka_unit_test(test_str_round_trip),
        cmocka_unit_test(test_sockaddr),
        cmocka_unit_test(test_parse_listen_fdnames),
        cmocka_unit_test_setup_teardown(test_listen_tcp4, setup, teardown),
        cmocka_unit_test_setup_teardown(test_listen_tcp6, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pause_resume, setup, teardown),
        cmocka_unit_test_setup_teardown(test_listener_close_idempotent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_listen_unix, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unix_symlink_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unix_stale_replaced, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unix_live_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unix_file_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unix_parent_checks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unix_close_keeps_replacement, setup, teardown),
        cmocka_unit_test_setup_teardown(test_listen_fd, setup, teardown),
        cmocka_unit_test_setup_teardown(test_listen_systemd, setup_systemd, teardown_systemd),
    };
    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
