/* run/transparent.c - transparent mode for `sluice run`
 * (network.transparent, `sluice run --transparent`; design.md "Transparent
 * mode"). Host side only; inner.c makes the sockets and the seccomp listener.
 *
 * Owns three things, all on the run's event loop. The files:
 *   transparent.c  this overview, start and stop, the syscalls routed to
 *                  it on the listener's server (run/notify.c);
 *   tp_call.c      a connect()/bind() notification: the call read, the
 *                  socket taken and checked, run here or judged (1a-1d);
 *   tp_dial.c      the egress pipeline's dial and the hand-over of its
 *                  socket (settle, options, kcmp, ADDFD; 1d-1f);
 *   tp_unix.c      a Unix path connect()/bind() run as the caller;
 *   tp_peer.c      getpeername() (1g);
 *   tp_dns.c       the synthetic addresses and the sandbox's resolver (2, 3).
 *
 *
 * 1. connect() interception. inner's filter (seccomp.c) answers every
 *    connect() of the command with SCMP_ACT_NOTIFY; the listener descriptor
 *    reaches the host after the go byte. For each notification the host:
 *      a. reads the sockaddr from the caller's memory (process_vm_readv;
 *         for i386 socketcall(SYS_CONNECT), the argument block first);
 *      b. takes a copy of the command's socket (pidfd_getfd), checks the
 *         notification is still valid (SECCOMP_IOCTL_NOTIF_ID_VALID: the
 *         caller was alive throughout, so its pid named it and no other
 *         process), and looks at the socket: its network namespace must be
 *         the sandbox's (SO_NETNS_COOKIE, or SIOCGSKNS before Linux 5.14; a
 *         socket from anywhere else is refused with EPERM), its domain and
 *         type, whether it is already connected;
 *      c. runs the call itself, on the copy it checked and with the address
 *         it read, and answers with the result (run_here), where it can
 *         reach nothing but the sandbox's namespace, see "Why running it
 *         here is safe" below: sockets that are not TCP over IPv4/IPv6 (UDP,
 *         Unix, netlink), AF_UNSPEC (disconnect), a socket already
 *         connected or listening, a bad address length, a loopback or
 *         unspecified destination where something listens on that port
 *         inside the sandbox (the proxy listeners, the command's own
 *         servers); and bind() (notified with allowLocalBinding only). A
 *         Unix socket path is refused, or with allowAllUnixSockets run by
 *         a short-lived child in the caller's namespaces, root, working
 *         directory and credentials (unix_path_call);
 *      d. otherwise judges the destination as the proxies do: a synthetic
 *         address the sandbox's resolver gave out (below) maps back to its
 *         name, exactly; any other address is an IP literal. The egress
 *         pipeline (verdict -> ask -> resolve -> guard -> dial) connects
 *         from the host's namespace to a vetted address;
 *      e. connected: the socket options the command set (O_NONBLOCK,
 *         FD_CLOEXEC, SO_KEEPALIVE, TCP_NODELAY, SO_RCVTIMEO/SO_SNDTIMEO,
 *         SO_LINGER, SO_PRIORITY, IP_TOS/IPV6_TCLASS, TCP keepalive timers,
 *         TCP_USER_TIMEOUT, buffer sizes that differ from a fresh socket's)
 *         are copied onto the host's socket, kcmp(KCMP_FILE) checks the
 *         command's descriptor number still holds the socket it called
 *         connect() on, and SECCOMP_IOCTL_NOTIF_ADDFD with
 *         SECCOMP_ADDFD_FLAG_SETFD puts the host's socket at that number;
 *         the call then returns 0, or EINPROGRESS for a non-blocking socket
 *         (the socket is already connected: poll() reports it writable at
 *         once and SO_ERROR is 0). The command only ever holds sockets of
 *         the host's namespace that are connected, in the socket layer's
 *         SS_CONNECTED too (sb_tcp_settle): a socket whose handshake is
 *         under way could be taken back to unconnected (shutdown() in
 *         SYN_SENT), and one left in SS_CONNECTING by a non-blocking dial
 *         could after a reset (a first sendto(MSG_FASTOPEN) answers
 *         ECONNABORTED and unconnects it), and then be aimed elsewhere with
 *         sendto(MSG_FASTOPEN), which no connect() notification sees, or
 *         made a listener. The kernel never runs the command's
 *         connect(), so the address the command could rewrite after (a)
 *         is never used;
 *      f. denied or failed: the call fails at once, ECONNREFUSED for a
 *         denial (and a record in the log and the blocked summary, same
 *         fields as the proxies', protocol "transparent"), ETIMEDOUT,
 *         EHOSTUNREACH, ENETUNREACH for what the dial met.
 *      g. getpeername() is notified too: on a socket sluice connected (known
 *         by SO_COOKIE, the last TP_PEERS of them) it answers with the
 *         address the command asked for, written through /proc/PID/mem;
 *         on any other descriptor the kernel answers (CONTINUE).
 *    Limits, documented in the README: a socket bound
 *    before connect() loses its local address; an IPv6 socket stays one (an
 *    IPv4 upstream as ::ffff:a.b.c.d) unless it is IPV6_V6ONLY, an IPv4 one
 *    may get an IPv6 connection (an upstream with IPv6 addresses only); a non-blocking
 *    connect() returns only once the dial ended (the command's thread waits
 *    in connect(), at most the dial timeout); bytes are not counted (no
 *    close record): the command holds the real connection, no relay.
 *
 *    Why running it here is safe: a socket belongs to the network
 *    namespace it was created in, whatever address it is given. Every
 *    socket the command can create is in the sandbox's namespace, which has
 *    a loopback device and nothing else: no route leaves it. (b) checks the
 *    namespace of the very socket the call is about, so a socket from
 *    outside (one sluice handed over, an inherited one) never gets a
 *    connect() or bind() run. The call is run on that checked copy, never
 *    handed back to the kernel (CONTINUE), which would look the descriptor
 *    number and the address up again: another thread could dup2() a socket
 *    of the host's namespace onto the number in between and rewrite the
 *    address to AF_UNSPEC, disconnecting it (issue 21). Every socket of the
 *    host's namespace the command holds is in SS_CONNECTED (install,
 *    sb_tcp_settle), where only connect(AF_UNSPEC) could take it back. The
 *    same holds for UDP: it stays closed in transparent mode as before,
 *    apart from the sandbox's own resolver.
 *
 *    The same listener serves a run that is not transparent but inherited a
 *    TCP socket of the host's network on stdin, stdout or stderr (inherit.c,
 *    egress NULL): there every connect() and allowed bind() is refused on
 *    the host's socket and run here on any other.
 *
 * 2. Synthetic addresses. Each name the resolver answers for gets its own
 *    IPv4 address from 198.18.0.0/15 (RFC 2544 benchmarking space, never
 *    routed) and IPv6 address from fd53:6c75:6963:6500::/64 (a ULA), by the
 *    order in which names were first asked: 131,070 names per run. Two
 *    names never share an address, so a connect() is decided by the name
 *    that produced its address, even when the real names resolve to the
 *    same host.
 *
 * 3. The sandbox's resolver. inner binds UDP and TCP sockets to
 *    127.0.0.1:53 in the sandbox's namespace; the command's
 *    /etc/resolv.conf (bwrap.c) names only that server. A query (one
 *    question, class IN, opcode QUERY) for a name a port-less deny rule
 *    denies gets NXDOMAIN and a blocked record; any other name gets its
 *    synthetic address (A, AAAA) or an empty NOERROR (every other type);
 *    the real decision, with the port, is made at connect(). Other opcodes:
 *    NOTIMP; malformed: FORMERR. Nothing is resolved upstream here: the
 *    egress pipeline resolves the name once, at connect(), through sluice's
 *    own resolver (network.dnsServers), and the guard applies to that. */
#define _GNU_SOURCE
#include "run/transparent.h"
#include "run/transparent_int.h"
#include "run/notify.h"
#include "sandbox/sandbox.h"

#include "common/common.h"

#include <errno.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

void tp_respond(struct tp *t, uint64_t id, int error, int cont)
{
    memset(t->resp, 0, sizeof(*t->resp));
    t->resp->id = id;
    t->resp->error = cont ? 0 : -error;
    t->resp->val = 0;
    t->resp->flags = cont ? SECCOMP_USER_NOTIF_FLAG_CONTINUE : 0;
    (void)seccomp_notify_respond(t->notify_fd, t->resp); /* ENOENT: the caller is gone */
}

/* ------------------------------------------------------------------------ */
/* Start and stop                                                            */

static const char *kernel_problem(void)
{
    struct utsname u;
    unsigned maj = 0, min = 0;
    long fd;

    /* pidfd_getfd (5.6): EBADF for a bad pidfd, ENOSYS when missing */
    fd = syscall(SYS_pidfd_getfd, -1, 0, 0U);
    if (fd < 0 && errno == ENOSYS)
        return "pidfd_getfd(2) (Linux 5.6+)";
    if (uname(&u) == 0 && sscanf(u.release, "%u.%u", &maj, &min) == 2 &&
        (maj < 5 || (maj == 5 && min < 14)))
        return "SECCOMP_ADDFD_FLAG_SETFD (Linux 5.14+)";
    return NULL;
}

const char *tp_preflight(void)
{
    return kernel_problem();
}

static void on_handle_closed(uv_handle_t *h)
{
    struct tp *t = h->data;

    if (--t->handles == 0)
        free(t);
}

/* Sends the syscalls transparent mode answers to tp_handle(): connect(),
 * bind(), getpeername() on each ABI of the filter (x32's numbers arrive
 * with x86-64's arch), i386's socketcall. 0 or UV_ENOSPC. */
static int route(struct tp *t)
{
    int rc = 0;

    for (size_t i = 0; i < 3 && rc == 0; i++) {
        const int *nrs[3] = {t->nr_connect, t->nr_bind, t->nr_getpeername};
        for (size_t k = 0; k < 3 && rc == 0; k++) {
            rc = run_notify_route(t->notify, t->arch[i], nrs[k][i], tp_handle, t);
            if (rc == 0 && i == 0)
                rc = run_notify_route(t->notify, t->arch[0], nrs[k][1], tp_handle, t);
        }
    }
#if defined(__x86_64__)
    if (rc == 0)
        rc = run_notify_route(t->notify, SCMP_ARCH_X86, t->nr_socketcall, tp_handle, t);
#endif
    return rc;
}

/* A tp with nothing open (the descriptors -1, the lists empty). */
static struct tp *tp_alloc(void)
{
    struct tp *t = calloc(1, sizeof(*t));

    if (t == NULL)
        return NULL;
    t->notify_fd = -1;
    t->diag_fd = -1;
    t->cache_pidfd = t->cache_fdinfo = t->cache_info = -1;
    TP_LIST_INIT(&t->reqs);
    TP_LIST_INIT(&t->waits);
    TP_LIST_INIT(&t->dconns);
    return t;
}

/* tp_start's first step: the kernel has what the mode needs, and the
 * sandbox's namespace is known. 0, or -errno with err set. */
static int start_check(const struct tp_opts *o, char *err, size_t errlen)
{
    const char *why = kernel_problem();

    if (why != NULL) {
        snprintf(err, errlen, "transparent mode needs %s, which this kernel lacks", why);
        return -ENOSYS;
    }
    if (o->ns_ino == 0) {
        snprintf(err, errlen, "transparent mode: the sandbox's network namespace is unknown");
        return -ESRCH;
    }
    return 0;
}

/* The options' values, a fresh socket's options, the namespace's cookie. */
static void take_opts(struct tp *t, const struct tp_opts *o)
{
    t->loop = o->loop;
    t->egress = o->egress;
    t->log = o->log;
    t->log_ctx = o->log_ctx;
    t->next_id = o->next_id;
    tp_frontend_init(t);
    t->notify = o->notify;
    t->notify_fd = run_notify_fd(o->notify);
    t->pid = o->cmd_pid;
    t->diag_fd = o->diag_fd;
    t->max_pending = o->max_pending != 0 ? o->max_pending : 1024;
    t->allow_unix = o->allow_unix;
    t->self_pid = (int)getpid();
    tp_read_defaults(t->optdef);
    t->ns_dev = o->ns_dev;
    t->ns_ino = o->ns_ino;
    if (t->diag_fd >= 0) {
        socklen_t len = sizeof(t->ns_cookie);
        if (getsockopt(t->diag_fd, SOL_SOCKET, SO_NETNS_COOKIE, &t->ns_cookie, &len) < 0)
            t->ns_cookie = 0; /* before Linux 5.14: SIOCGSKNS each time */
    }
}

/* The filter's ABIs and, on each, the numbers of the syscalls routed here. */
static void resolve_nrs(struct tp *t)
{
    size_t narch;
    const uint32_t *arches = sb_seccomp_arches(&narch); /* the filter's */

    for (size_t i = 0; i < 3; i++) {
        t->arch[i] = i < narch ? arches[i] : 0;
        t->nr_connect[i] =
            t->arch[i] != 0 ? seccomp_syscall_resolve_name_arch(t->arch[i], "connect") : -1;
        t->nr_bind[i] =
            t->arch[i] != 0 ? seccomp_syscall_resolve_name_arch(t->arch[i], "bind") : -1;
        t->nr_getpeername[i] =
            t->arch[i] != 0 ? seccomp_syscall_resolve_name_arch(t->arch[i], "getpeername") : -1;
    }
    t->nr_socketcall = -1;
#if defined(__x86_64__)
    t->nr_socketcall = seccomp_syscall_resolve_name_arch(SCMP_ARCH_X86, "socketcall");
    /* i386's direct socket calls (Linux 4.3): libseccomp names them with a
     * negative pseudo number (its socketcall multiplexing), which routes
     * nothing, yet the filter notifies the direct calls as well as
     * socketcall(SYS_CONNECT, ...) (rt-7: an i386 connect() without
     * socketcall got the fallback, EPERM) */
    for (size_t i = 0; i < 3; i++)
        if (t->arch[i] == SCMP_ARCH_X86) {
            if (t->nr_connect[i] < 0)
                t->nr_connect[i] = 362;
            if (t->nr_bind[i] < 0)
                t->nr_bind[i] = 361;
            if (t->nr_getpeername[i] < 0)
                t->nr_getpeername[i] = 368;
        }
#endif
}

/* The resolver's UDP (UDP 1) or TCP server on FD (taken in every case).
 * 0 or UV_E*. */
static int serve_dns(struct tp *t, int udp, int fd)
{
    uv_handle_t *h = udp ? (uv_handle_t *)&t->udp : (uv_handle_t *)&t->tcp;
    int rc = udp ? uv_udp_init(t->loop, &t->udp) : uv_tcp_init(t->loop, &t->tcp);

    if (rc == 0) {
        h->data = t;
        *(udp ? &t->udp_open : &t->tcp_open) = 1;
        t->handles++;
        rc = udp ? uv_udp_open(&t->udp, fd) : uv_tcp_open(&t->tcp, fd);
    }
    if (rc < 0) {
        close(fd);
        return rc;
    }
    if (udp)
        return uv_udp_recv_start(&t->udp, tp_dns_udp_alloc, tp_dns_udp_recv);
    return uv_listen((uv_stream_t *)&t->tcp, 128, tp_dns_tcp_accept);
}

int tp_start(struct tp **out, const struct tp_opts *o, char *err, size_t errlen)
{
    struct tp *t = NULL;
    int rc;

    *out = NULL;
    rc = start_check(o, err, errlen);
    if (rc == 0) {
        t = tp_alloc();
        if (t == NULL || seccomp_notify_alloc(&t->notif, &t->resp) < 0) {
            free(t);
            snprintf(err, errlen, "out of memory");
            rc = -ENOMEM;
        }
    }
    if (rc < 0) {
        int fds[3] = {o->diag_fd, o->dns_udp_fd, o->dns_tcp_fd};
        for (int i = 0; i < 3; i++)
            if (fds[i] >= 0)
                close(fds[i]);
        return rc;
    }
    take_opts(t, o);
    resolve_nrs(t);
    t->handles = 1; /* our own reference, dropped by tp_close */
    if (o->dns_udp_fd >= 0)
        rc = serve_dns(t, 1, o->dns_udp_fd);
    if (o->dns_tcp_fd >= 0 && rc == 0)
        rc = serve_dns(t, 0, o->dns_tcp_fd);
    else if (o->dns_tcp_fd >= 0)
        close(o->dns_tcp_fd);
    *out = t;
    if (rc == 0)
        rc = route(t);
    if (rc == 0 && o->udp_relay != NULL && o->egress != NULL) {
        int urc = tp_udp_start(t, o->udp_relay, o->udp_relay_ctx, o->udp_idle_ms, o->udp_ports,
                               o->udp_nports);
        if (urc < 0) { /* fail closed: without relays datagrams go nowhere */
            snprintf(err, errlen, "transparent UDP: %s", strerror(-urc));
            return urc;
        }
    }
    if (rc < 0) {
        snprintf(err, errlen,
                 "transparent mode: cannot serve the seccomp listener or the "
                 "resolver: %s",
                 uv_strerror(rc));
        return rc;
    }
    return 0;
}

struct tp *tp_new_for_test(uv_loop_t *loop, struct egress_env *egress, connlog_fn log, void *ctx)
{
    struct tp *t = tp_alloc();

    if (t == NULL)
        return NULL;
    t->loop = loop;
    t->egress = egress;
    t->log = log;
    t->log_ctx = ctx;
    tp_frontend_init(t);
    return t;
}

void tp_free_for_test(struct tp *t)
{
    if (t == NULL)
        return;
    tp_names_free(&t->names);
    free(t);
}

const struct tp_names *tp_names_of(const struct tp *t)
{
    return &t->names;
}

void tp_close(struct tp *t)
{
    if (t == NULL || t->closing)
        return;
    t->closing = 1;
    while (t->reqs.next != &t->reqs) {
        struct tp_req *r = t->reqs.next;
        egress_cancel(r->er);
        /* the egress callback will not run: its log context goes too */
        tp_respond(t, r->id, ECONNREFUSED, 0);
        tp_req_free(r);
    }
    while (t->waits.next != &t->waits)
        tp_wait_end(t->waits.next, ECONNABORTED);
    while (t->dconns.next != &t->dconns)
        tp_dns_conn_close(t->dconns.next);
    run_notify_unroute(t->notify, t);
    tp_udp_close(t);
    if (t->udp_open)
        uv_close((uv_handle_t *)&t->udp, on_handle_closed);
    if (t->tcp_open)
        uv_close((uv_handle_t *)&t->tcp, on_handle_closed);
    if (t->diag_fd >= 0)
        close(t->diag_fd);
    tp_cache_drop(t);
    seccomp_notify_free(t->notif, t->resp);
    tp_names_free(&t->names);
    if (--t->handles == 0)
        free(t);
}
