/* tests/run/test_transparent.c - transparent mode's host-side pieces
 * that need no sandbox (run/transparent.c): the synthetic address table
 * (one address per name, mapped back exactly) and the resolver's answers
 * (tp_dns_answer) decided by a compiled policy, the seccomp listener's
 * handoff (sb_handoff_recv_notify) and the filter's notification for
 * connect() (a forked child under sb_seccomp_load with transparent on), and
 * transparent UDP's verdict at connect()/sendto() and its bound on relay
 * ports (tp_udp.c, with a relay maker that makes none). The host's handling
 * of a connect() is covered end to end by tests/e2e/transparent.sh, UDP's
 * by tests/e2e/transparent_udp.sh. */
#define _GNU_SOURCE
#include <setjmp.h> /* cmocka needs these first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/sandbox.h"
#include "run/transparent.h"
#include "run/transparent_int.h"

/* ------------------------------------------------------------------------ */
/* names                                                                     */

static void test_names(void **state)
{
    struct tp_names n;
    struct policy_addr a;
    char buf[64];
    long i;

    (void)state;
    memset(&n, 0, sizeof(n));
    assert_int_equal(tp_names_add(&n, "a.test"), 0);
    assert_int_equal(tp_names_add(&n, "b.test"), 1);
    assert_int_equal(tp_names_add(&n, "a.test"), 0); /* same name, same address */
    assert_int_equal(tp_names_find(&n, "b.test"), 1);
    assert_int_equal(tp_names_find(&n, "c.test"), -1);

    tp_synthetic(0, 4, &a);
    assert_string_equal(policy_addr_str(&a, buf, sizeof(buf)), "198.18.0.1");
    assert_string_equal(tp_names_lookup(&n, &a), "a.test");
    tp_synthetic(1, 6, &a);
    assert_string_equal(policy_addr_str(&a, buf, sizeof(buf)), "fd53:6c75:6963:6500::2");
    assert_string_equal(tp_names_lookup(&n, &a), "b.test");

    /* addresses no name produced */
    tp_synthetic(2, 4, &a);
    assert_null(tp_names_lookup(&n, &a));
    assert_int_equal(policy_addr_parse("198.18.0.0", &a), 0);
    assert_null(tp_names_lookup(&n, &a));
    assert_int_equal(policy_addr_parse("198.20.0.1", &a), 0);
    assert_null(tp_names_lookup(&n, &a));
    assert_int_equal(policy_addr_parse("127.0.0.1", &a), 0);
    assert_null(tp_names_lookup(&n, &a));
    assert_int_equal(policy_addr_parse("fd53:6c75:6963:6500:1::1", &a), 0);
    assert_null(tp_names_lookup(&n, &a));
    assert_int_equal(policy_addr_parse("fd53:6c75:6963:6501::1", &a), 0);
    assert_null(tp_names_lookup(&n, &a));

    /* many names: each its own address, all mapped back (the table grows) */
    for (int k = 0; k < 5000; k++) {
        snprintf(buf, sizeof(buf), "n%d.test", k);
        i = tp_names_add(&n, buf);
        assert_int_equal(i, k + 2);
    }
    for (int k = 0; k < 5000; k += 97) {
        snprintf(buf, sizeof(buf), "n%d.test", k);
        tp_synthetic((size_t)k + 2, k % 2 ? 4 : 6, &a);
        assert_string_equal(tp_names_lookup(&n, &a), buf);
    }
    /* the end of the /15 */
    tp_synthetic(131069, 4, &a);
    assert_string_equal(policy_addr_str(&a, buf, sizeof(buf)), "198.19.255.254");
    tp_names_free(&n);
}

/* ------------------------------------------------------------------------ */
/* the resolver                                                              */

struct fixture {
    uv_loop_t loop;
    struct settings s;
    struct egress_env *egress;
    struct tp *tp;
    int denied_logged;
    char last_host[256];
    char dir[64];
};

static void on_log(void *ctx, const struct connlog *r)
{
    struct fixture *f = ctx;

    assert_string_equal(r->verdict, "deny");
    assert_string_equal(r->protocol, "dns");
    f->denied_logged++;
    snprintf(f->last_host, sizeof(f->last_host), "%s", r->host);
}

static int setup_json(void **state, const char *json)
{
    struct fixture *f = calloc(1, sizeof(*f));
    struct settings_error err;
    struct policy *p = NULL;
    char path[128];
    FILE *fp;

    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/sluice-test-tp.XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    setenv("XDG_CONFIG_HOME", f->dir, 1);
    setenv("HOME", f->dir, 1);
    snprintf(path, sizeof(path), "%s/s.json", f->dir);
    fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(json, fp);
    fclose(fp);
    settings_init(&f->s);
    memset(&err, 0, sizeof(err));
    assert_int_equal(settings_load(&f->s, path, &err), 0);
    assert_int_equal(policy_compile(&f->s, &p, &err), 0);
    unlink(path);
    assert_int_equal(uv_loop_init(&f->loop), 0);
    assert_int_equal(egress_env_new(&f->egress, &f->loop, p, NULL, NULL, 1000), 0);
    f->tp = tp_new_for_test(&f->loop, f->egress, on_log, f);
    assert_non_null(f->tp);
    *state = f;
    return 0;
}

static int setup(void **state)
{
    return setup_json(state,
                      "{\"network\": {\"allowedDomains\": [\"ok.test\", \"twin.test\"],"
                      " \"deniedDomains\": [\"evil.test\", \"*.bad.test\", \"port.test:443\"]}}");
}

static int setup_udp(void **state)
{
    return setup_json(state, "{\"network\": {\"allowedDomains\": [\"udp:ok.test:443\", "
                             "\"udp:10.1.2.3:5000\", \"tcp.test\"],"
                             " \"deniedDomains\": [\"evil.test\"]}}");
}

static int setup_report(void **state)
{
    return setup_json(state,
                      "{\"network\": {\"deniedDomains\": [\"evil.test\"], \"mode\": \"report\"}}");
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    tp_free_for_test(f->tp);
    egress_env_free(f->egress);
    (void)uv_loop_close(&f->loop);
    settings_free(&f->s);
    rmdir(f->dir);
    free(f);
    return 0;
}

/* A query: id 0xbeef, RD, one question NAME TYPE class CLASS. */
static size_t query(uint8_t *q, const char *name, unsigned type, unsigned cls)
{
    size_t o = 12;
    const char *p = name;

    memset(q, 0, 12);
    q[0] = 0xbe;
    q[1] = 0xef;
    q[2] = 0x01;
    q[5] = 1;
    while (*p != '\0') {
        const char *dot = strchr(p, '.');
        size_t l = dot != NULL ? (size_t)(dot - p) : strlen(p);
        q[o++] = (uint8_t)l;
        memcpy(q + o, p, l);
        o += l;
        p += l;
        if (*p == '.')
            p++;
    }
    q[o++] = 0;
    q[o++] = (uint8_t)(type >> 8);
    q[o++] = (uint8_t)type;
    q[o++] = (uint8_t)(cls >> 8);
    q[o++] = (uint8_t)cls;
    return o;
}

struct answer {
    unsigned rcode, qd, an;
    uint8_t rdata[16];
    size_t rdlen;
};

static struct answer ask(struct fixture *f, const uint8_t *q, size_t qlen)
{
    uint8_t out[1024];
    struct answer a;
    size_t len = tp_dns_answer(f->tp, q, qlen, out, sizeof(out));

    memset(&a, 0, sizeof(a));
    assert_true(len >= 12);
    assert_int_equal(out[0], q[0]);
    assert_int_equal(out[1], q[1]);
    assert_true(out[2] & 0x80); /* QR */
    a.rcode = out[3] & 15;
    a.qd = (unsigned)out[4] << 8 | out[5];
    a.an = (unsigned)out[6] << 8 | out[7];
    if (a.an == 1) {
        /* question copied, then one answer: pointer, type, class, ttl, rdlength */
        size_t o = qlen;
        assert_int_equal(out[o], 0xC0);
        assert_int_equal(out[o + 1], 12);
        a.rdlen = (size_t)out[o + 10] << 8 | out[o + 11];
        assert_true(a.rdlen == 4 || a.rdlen == 16);
        assert_int_equal(len, o + 12 + a.rdlen);
        memcpy(a.rdata, out + o + 12, a.rdlen);
    }
    return a;
}

/* The relay maker of test_udp: counts the calls, makes nothing. */
static int no_relay(void *ctx, int family, unsigned port)
{
    (void)family;
    (void)port;
    ++*(int *)ctx;
    return -ENOSYS;
}

/* Transparent UDP's relay ports: 53 and the udp: rules' ports from the
 * start (IPv4 and IPv6 each, and the raw ICMP sockets), then at most 64
 * learned ports (connect()s), a port tried once never asked for again, and
 * the counters line at the end of the run. The verdicts on datagrams are
 * tests/e2e/transparent_udp.sh's. */
static void test_udp(void **state)
{
    struct fixture *f = *state;
    const uint16_t fixed[2] = {443, 5000};
    char line[400];
    int made = 0;

    assert_int_equal(tp_udp_port(f->tp, 443), -1); /* off */
    assert_int_equal(tp_udp_start(f->tp, no_relay, &made, 0, fixed, 2), 0);
    assert_int_equal(made, 8); /* ICMP, 53, 443, 5000: IPv4 and IPv6 each */
    made = 0;
    assert_int_equal(tp_udp_port(f->tp, 443), 0); /* from the start */
    assert_int_equal(tp_udp_port(f->tp, 0), -1);
    assert_int_equal(made, 0);
    for (uint16_t p = 20000; p < 20100; p++)
        assert_int_equal(tp_udp_port(f->tp, p), -1); /* the maker makes none */
    assert_int_equal(made, 128);                     /* 64 ports, then none tried */
    assert_int_equal(tp_udp_port(f->tp, 20000), 0);  /* known: tried already */
    assert_int_equal(made, 128);
    tp_udp_summary(f->tp, line, sizeof(line));
    assert_string_equal(line, ""); /* nothing carried: no line */
    tp_udp_close(f->tp);
    assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0);
}

static void test_dns_answers(void **state)
{
    struct fixture *f = *state;
    uint8_t q[600];
    struct answer a;
    size_t n;

    n = query(q, "ok.test", 1, 1);
    a = ask(f, q, n);
    assert_int_equal(a.rcode, 0);
    assert_int_equal(a.an, 1);
    assert_memory_equal(a.rdata, "\xc6\x12\x00\x01", 4);
    n = query(q, "OK.Test.", 28, 1); /* case and a trailing dot: the same name */
    a = ask(f, q, n);
    assert_int_equal(a.an, 1);
    assert_memory_equal(a.rdata, "\xfd\x53\x6c\x75\x69\x63\x65\x00\0\0\0\0\0\0\0\x01", 16);
    n = query(q, "twin.test", 1, 1);
    a = ask(f, q, n);
    assert_memory_equal(a.rdata, "\xc6\x12\x00\x02", 4);
    /* a name no rule decides gets an address too: the port decides later */
    n = query(q, "unknown.test", 1, 1);
    a = ask(f, q, n);
    assert_int_equal(a.an, 1);
    /* a rule for one port: not refused at the resolver */
    n = query(q, "port.test", 1, 1);
    a = ask(f, q, n);
    assert_int_equal(a.rcode, 0);
    assert_int_equal(a.an, 1);
    assert_int_equal(f->denied_logged, 0);
    /* other types: empty NOERROR */
    n = query(q, "ok.test", 15, 1);
    a = ask(f, q, n);
    assert_int_equal(a.rcode, 0);
    assert_int_equal(a.an, 0);
    assert_int_equal(a.qd, 1);
    /* class CH: NOTIMP */
    n = query(q, "ok.test", 1, 3);
    a = ask(f, q, n);
    assert_int_equal(a.rcode, 4);
}

static void test_dns_denied(void **state)
{
    struct fixture *f = *state;
    uint8_t q[600];
    struct answer a;
    size_t n;

    n = query(q, "evil.test", 1, 1);
    a = ask(f, q, n);
    assert_int_equal(a.rcode, 3);
    assert_int_equal(a.an, 0);
    assert_int_equal(f->denied_logged, 1);
    assert_string_equal(f->last_host, "evil.test");
    n = query(q, "deep.x.bad.test", 28, 1);
    a = ask(f, q, n);
    assert_int_equal(a.rcode, 3);
    assert_int_equal(f->denied_logged, 2);
    n = query(q, "evil.test", 16, 1); /* any type */
    a = ask(f, q, n);
    assert_int_equal(a.rcode, 3);
    /* an IP literal as a name, a bad name */
    n = query(q, "127.0.0.1", 1, 1);
    a = ask(f, q, n);
    assert_int_equal(a.rcode, 3);
    assert_int_equal(a.an, 0);
}

static void test_dns_malformed(void **state)
{
    struct fixture *f = *state;
    uint8_t q[600], out[1024];
    struct answer a;
    size_t n;

    n = query(q, "ok.test", 1, 1);
    /* a response is dropped; so is anything shorter than a header */
    q[2] |= 0x80;
    assert_int_equal(tp_dns_answer(f->tp, q, n, out, sizeof(out)), 0);
    q[2] &= 0x7f;
    assert_int_equal(tp_dns_answer(f->tp, q, 11, out, sizeof(out)), 0);
    /* opcode STATUS: NOTIMP */
    q[2] = (uint8_t)(2 << 3);
    a = ask(f, q, n);
    assert_int_equal(a.rcode, 4);
    q[2] = 1;
    /* two questions: FORMERR */
    q[5] = 2;
    a = ask(f, q, n);
    assert_int_equal(a.rcode, 1);
    q[5] = 1;
    /* cut inside the name, inside the type */
    for (size_t cut = 12; cut < n; cut++) {
        a = ask(f, q, cut);
        assert_int_equal(a.rcode, 1);
        assert_int_equal(a.an, 0);
    }
    /* a compression pointer in the question */
    q[12] = 0xC0;
    a = ask(f, q, n);
    assert_int_equal(a.rcode, 1);
    /* a name longer than 253 */
    {
        char name[400];
        size_t o = 0;
        for (int i = 0; i < 5; i++) { /* five 63-byte labels: 320 bytes with the dots */
            memset(name + o, 'a', 63);
            name[o + 63] = '.';
            o += 64;
        }
        memcpy(name + o, "test", 5);
        n = query(q, name, 1, 1);
        a = ask(f, q, n);
        assert_int_equal(a.rcode, 1);
    }
    /* the root: NOERROR, no answer */
    n = query(q, "", 1, 1);
    a = ask(f, q, n);
    assert_int_equal(a.rcode, 0);
    assert_int_equal(a.an, 0);
}

static void test_dns_report_mode(void **state)
{
    struct fixture *f = *state;
    uint8_t q[600];
    struct answer a;
    size_t n = query(q, "evil.test", 1, 1);

    /* report mode denies nothing: the name gets an address, the connect is
     * flagged would_deny by the egress pipeline */
    a = ask(f, q, n);
    assert_int_equal(a.rcode, 0);
    assert_int_equal(a.an, 1);
    assert_int_equal(f->denied_logged, 0);
}

/* ------------------------------------------------------------------------ */
/* the seccomp listener: filter (seccomp.c) and handoff (inner.c)            */

static int send_fds(int sock, const char *kinds, size_t nk, const int *fds, size_t nfds)
{
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int) * 4)];
    } ctl;
    struct iovec iov = {.iov_base = (void *)kinds, .iov_len = nk};
    struct msghdr msg;

    memset(&ctl, 0, sizeof(ctl));
    memset(&msg, 0, sizeof(msg));
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (nfds > 0) {
        struct cmsghdr *c;
        msg.msg_control = ctl.buf;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
        c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
    }
    return sendmsg(sock, &msg, 0) < 0 ? -errno : 0;
}

/* Wrong messages are refused and every descriptor received is closed. */
static void test_notify_handoff_refusals(void **state)
{
    int sp[2], p[2], rc;
    char err[256];

    (void)state;
    assert_int_equal(pipe(p), 0);
    /* a pipe is not a seccomp listener */
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
    assert_int_equal(send_fds(sp[1], "N", 1, &p[0], 1), 0);
    rc = sb_handoff_recv_notify(sp[0], 2000, err, sizeof(err));
    assert_int_equal(rc, -EPROTO);
    assert_non_null(strstr(err, "not a seccomp listener"));
    /* two descriptors, a wrong kind, none */
    assert_int_equal(send_fds(sp[1], "N", 1, p, 2), 0);
    assert_int_equal(sb_handoff_recv_notify(sp[0], 2000, err, sizeof(err)), -EPROTO);
    assert_int_equal(send_fds(sp[1], "X", 1, &p[0], 1), 0);
    assert_int_equal(sb_handoff_recv_notify(sp[0], 2000, err, sizeof(err)), -EPROTO);
    assert_int_equal(send_fds(sp[1], "N", 1, NULL, 0), 0);
    assert_int_equal(sb_handoff_recv_notify(sp[0], 2000, err, sizeof(err)), -EPROTO);
    /* the other end gone */
    close(sp[1]);
    assert_int_equal(sb_handoff_recv_notify(sp[0], 2000, err, sizeof(err)), -EPIPE);
    assert_non_null(strstr(err, "inner exited"));
    close(sp[0]);
    close(p[0]);
    close(p[1]);
}

/* rt-3 #5: inner hands back its descriptors of the re-bound stdio files
 * (payload '0' + N). The launcher keeps one only when it is the caller's
 * file on N (same device and inode), it was asked for, and the count
 * matches; the offset it then reads is the shared description's. */
static void test_stdio_handoff(void **state)
{
    char path[] = "/tmp/test_stdio_XXXXXX", other[] = "/tmp/test_stdio_XXXXXX", err[256];
    int sp[2], fds[3] = {-1, -1, -1}, save0, a, b, o;

    (void)state;
    a = mkstemp(path);
    o = mkstemp(other);
    assert_true(a >= 0 && o >= 0);
    assert_int_equal(write(a, "l1\nl2\n", 6), 6);
    save0 = dup(0);
    assert_true(save0 >= 0);
    assert_int_equal(dup2(a, 0), 0);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
    /* the caller's file on 0, at the offset inner's reads left it */
    b = open(path, O_RDONLY);
    assert_true(b >= 0);
    assert_int_equal(lseek(b, 3, SEEK_SET), 3);
    assert_int_equal(send_fds(sp[1], "0", 1, &b, 1), 0);
    assert_int_equal(sb_handoff_recv_stdio(sp[0], 2000, 1U, fds, err, sizeof(err)), 0);
    assert_true(fds[0] >= 0 && fds[1] == -1 && fds[2] == -1);
    assert_int_equal(lseek(fds[0], 0, SEEK_CUR), 3);
    close(fds[0]);
    fds[0] = -1;
    /* another file, a descriptor not asked for, too few, too many */
    assert_int_equal(send_fds(sp[1], "0", 1, &o, 1), 0);
    assert_int_equal(sb_handoff_recv_stdio(sp[0], 2000, 1U, fds, err, sizeof(err)), -EPROTO);
    assert_non_null(strstr(err, "not the caller's file"));
    assert_int_equal(send_fds(sp[1], "1", 1, &b, 1), 0);
    assert_int_equal(sb_handoff_recv_stdio(sp[0], 2000, 1U, fds, err, sizeof(err)), -EPROTO);
    assert_int_equal(send_fds(sp[1], "0", 1, NULL, 0), 0);
    assert_int_equal(sb_handoff_recv_stdio(sp[0], 2000, 1U, fds, err, sizeof(err)), -EPROTO);
    {
        int two[2] = {b, b};
        assert_int_equal(send_fds(sp[1], "00", 2, two, 2), 0);
        assert_int_equal(sb_handoff_recv_stdio(sp[0], 2000, 1U, fds, err, sizeof(err)), -EPROTO);
    }
    assert_true(fds[0] == -1 && fds[1] == -1 && fds[2] == -1);
    /* the other end gone */
    close(sp[1]);
    assert_int_equal(sb_handoff_recv_stdio(sp[0], 2000, 1U, fds, err, sizeof(err)), -EPIPE);
    assert_int_equal(dup2(save0, 0), 0);
    close(save0);
    close(sp[0]);
    close(a);
    close(b);
    close(o);
    unlink(path);
    unlink(other);
}

/* A child loads the transparent filter and sends its listener as inner
 * does; the parent receives it through sb_handoff_recv_notify, sees the
 * child's connect() as a notification (nr connect, the child's pid, its
 * socket and address length) and answers ECONNREFUSED itself: the child's
 * connect() fails with exactly that. Control: without the filter the same
 * connect() to a closed loopback port fails with ECONNREFUSED from the
 * kernel too, so the child also reports a marker errno set by the answer
 * (EHOSTUNREACH, which loopback never gives). */
static void test_notify_filter(void **state)
{
    int sp[2], st = 0, lfd;
    pid_t pid;
    char err[256];
    struct seccomp_notif *req = NULL;
    struct seccomp_notif_resp *resp = NULL;
    struct sockaddr_in a;

    (void)state;
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct sb_seccomp_opts so;
        int nfd = -1, s, e;
        char ebuf[256], kind = 'N';
        signal(SIGSEGV, SIG_DFL);
        signal(SIGABRT, SIG_DFL);
        alarm(20);
        close(sp[0]);
        memset(&so, 0, sizeof(so));
        so.transparent = 1;
        so.allow_unix_sockets = 1;
        so.notify_fd = &nfd;
        if (prctl(PR_SET_NO_NEW_PRIVS, 1UL, 0UL, 0UL, 0UL) < 0 ||
            sb_seccomp_load(&so, ebuf, sizeof(ebuf)) < 0 || nfd < 0)
            _exit(3);
        if (send_fds(sp[1], &kind, 1, &nfd, 1) < 0)
            _exit(4);
        close(nfd);
        s = socket(AF_INET, SOCK_STREAM, 0);
        memset(&a, 0, sizeof(a));
        a.sin_family = AF_INET;
        a.sin_port = htons(9);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        e = connect(s, (struct sockaddr *)&a, sizeof(a)) == 0 ? 0 : errno;
        _exit(e == EHOSTUNREACH ? 0 : 5);
    }
    close(sp[1]);
    lfd = sb_handoff_recv_notify(sp[0], 10000, err, sizeof(err));
    if (lfd < 0)
        print_error("%s\n", err);
    assert_true(lfd >= 0);
    assert_int_equal(seccomp_notify_alloc(&req, &resp), 0);
    memset(req, 0, sizeof(*req));
    assert_int_equal(seccomp_notify_receive(lfd, req), 0);
    assert_int_equal(req->pid, pid);
    assert_int_equal(req->data.nr, seccomp_syscall_resolve_name("connect"));
    assert_int_equal(req->data.args[2], sizeof(struct sockaddr_in));
    memset(resp, 0, sizeof(*resp));
    resp->id = req->id;
    resp->error = -EHOSTUNREACH;
    assert_int_equal(seccomp_notify_respond(lfd, resp), 0);
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    seccomp_notify_free(req, resp);
    close(lfd);
    close(sp[0]);
}

/* Issue 21, item 5: what sb_inherit_check makes of a socket on stdin. */
static int with_stdin(int fd, int allow_unix, int *guard, char *err, size_t errlen)
{
    int saved = dup(0), rc;

    assert_true(saved >= 0);
    assert_int_equal(dup2(fd, 0), 0);
    rc = sb_inherit_check(allow_unix, guard, err, errlen);
    assert_int_equal(dup2(saved, 0), 0);
    close(saved);
    return rc;
}

static void test_inherit_check(void **state)
{
    struct sockaddr_in a;
    socklen_t alen = sizeof(a);
    struct linger lg = {1, 0};
    char err[256];
    int guard = -1, pair[2], l, c, s, one = 1;
    const int fastopen = 0x20000000; /* MSG_FASTOPEN */

    (void)state;
    /* a UDP socket of the host: refused */
    s = socket(AF_INET, SOCK_DGRAM, 0);
    assert_int_equal(with_stdin(s, 0, &guard, err, sizeof(err)), -EPERM);
    assert_non_null(strstr(err, "stdin is a UDP or raw socket of the host's network"));
    close(s);
    /* a listening TCP socket, an unconnected one: refused */
    l = socket(AF_INET, SOCK_STREAM, 0);
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(l, 4), 0);
    assert_int_equal(getsockname(l, (struct sockaddr *)&a, &alen), 0);
    assert_int_equal(with_stdin(l, 0, &guard, err, sizeof(err)), -EPERM);
    assert_non_null(strstr(err, "a listening TCP socket"));
    s = socket(AF_INET, SOCK_STREAM, 0);
    assert_int_equal(with_stdin(s, 0, &guard, err, sizeof(err)), -EPERM);
    assert_non_null(strstr(err, "an unconnected TCP socket"));
    /* a Unix stream pair: fine, no guard; a datagram pair: refused unless
     * Unix sockets are allowed */
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
    assert_int_equal(with_stdin(pair[0], 0, &guard, err, sizeof(err)), 0);
    assert_int_equal(guard, 0);
    close(pair[0]);
    close(pair[1]);
    assert_int_equal(socketpair(AF_UNIX, SOCK_DGRAM, 0, pair), 0);
    assert_int_equal(with_stdin(pair[0], 0, &guard, err, sizeof(err)), -EPERM);
    assert_non_null(strstr(err, "a Unix datagram socket"));
    assert_int_equal(with_stdin(pair[0], 1, &guard, err, sizeof(err)), 0);
    close(pair[0]);
    close(pair[1]);
    /* a connected TCP socket whose non-blocking connect() returned
     * EINPROGRESS (SS_CONNECTING after the handshake): settled, guarded;
     * reset by its peer, MSG_FASTOPEN still answers EISCONN (the old code
     * left it connecting: ECONNABORTED, then a connection anywhere) */
    assert_int_equal(setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)), 0);
    assert_int_equal(fcntl(s, F_SETFL, O_NONBLOCK), 0);
    if (connect(s, (struct sockaddr *)&a, sizeof(a)) < 0)
        assert_int_equal(errno, EINPROGRESS);
    c = accept(l, NULL, NULL);
    assert_true(c >= 0);
    assert_int_equal(with_stdin(s, 0, &guard, err, sizeof(err)), 0);
    assert_int_equal(guard, 1);
    assert_int_equal(setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
    close(c);
    usleep(100000);
    assert_int_equal(sendto(s, "x", 1, fastopen, (struct sockaddr *)&a, sizeof(a)), -1);
    assert_true(errno == EISCONN || errno == ECONNRESET);
    assert_int_equal(sendto(s, "x", 1, fastopen, (struct sockaddr *)&a, sizeof(a)), -1);
    assert_int_equal(errno, EISCONN);
    assert_int_equal(listen(s, 1), -1);
    assert_int_equal(errno, EINVAL);
    close(s);
    /* a connected MPTCP socket (SOCK_STREAM too, not TCP): refused, since
     * reset by its peer a first MSG_FASTOPEN unconnects it and a second
     * connects it anywhere (rt-1). Skipped without MPTCP. */
    s = socket(AF_INET, SOCK_STREAM, 262 /* IPPROTO_MPTCP */);
    if (s >= 0) {
        assert_int_equal(connect(s, (struct sockaddr *)&a, sizeof(a)), 0);
        c = accept(l, NULL, NULL);
        assert_true(c >= 0);
        assert_int_equal(with_stdin(s, 0, &guard, err, sizeof(err)), -EPERM);
        assert_non_null(strstr(err, "a stream socket that is not TCP"));
        close(c);
        close(s);
    }
    close(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test_setup_teardown(test_dns_answers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dns_denied, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dns_malformed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dns_report_mode, setup_report, teardown),
        cmocka_unit_test_setup_teardown(test_udp, setup_udp, teardown),
        cmocka_unit_test(test_notify_handoff_refusals),
        cmocka_unit_test(test_notify_filter),
        cmocka_unit_test(test_stdio_handoff),
        cmocka_unit_test(test_inherit_check),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
