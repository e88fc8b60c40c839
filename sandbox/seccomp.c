/* sandbox/seccomp.c - the syscall filter `sluice inner` loads just before it
 * execs the command (design.md "The sandbox").
 *
 * Built with libseccomp. The default action is ALLOW: the filter is a short
 * deny list aimed at the holes a network namespace and a read-only bind do
 * not close, not a general-purpose syscall allow list.
 *
 *   socket(AF_UNIX, ...)    EPERM, unless network.allowAllUnixSockets. A
 *                           Unix socket reaches services outside the
 *                           sandbox (the host's D-Bus, docker.sock, an
 *                           ssh-agent) that the network namespace does not
 *                           cut off. The domain is compared masked to its
 *                           low 32 bits: the kernel's socket() takes an int,
 *                           so socket(0x100000001, ...) is socket(AF_UNIX,
 *                           ...) and must be refused too.
 *   socketpair(AF_UNIX, TYPE, ...)
 *                           EPERM for every type but SOCK_STREAM and
 *                           SOCK_SEQPACKET, unless allowAllUnixSockets
 *                           (issue 21). A datagram pair is not bound to its
 *                           peer: sendto()/sendmsg() with a path or an
 *                           abstract name delivers to any host datagram
 *                           socket the command may write to (/dev/log,
 *                           journald, /run/systemd/notify, a daemon's
 *                           control socket; a read-only bind does not stop
 *                           it), and after connect(AF_UNSPEC) and a short
 *                           bind() the host can answer. The sendmsg()
 *                           address is behind a pointer, so the pair itself
 *                           is refused. SOCK_RAW is refused too: the kernel
 *                           makes it a datagram pair. A stream pair refuses
 *                           any address (EISCONN, EINVAL for AF_UNSPEC), a
 *                           seqpacket pair ignores the one sendto() names
 *                           and sends to its peer, and neither can listen()
 *                           once connected, bound or not. The type is
 *                           compared masked to SOCK_TYPE_MASK (the kernel
 *                           drops SOCK_NONBLOCK/SOCK_CLOEXEC and the high
 *                           32 bits), the domain masked to 32 bits. On i386
 *                           socketcall(SYS_SOCKETPAIR) is refused whatever
 *                           its arguments (behind a pointer), like
 *                           socketcall(SYS_SOCKET).
 *   socket(FAMILY, ...)     EPERM for every family but AF_INET, AF_INET6,
 *                           AF_UNIX (rule above) and AF_NETLINK, and for
 *                           AF_NETLINK any protocol but NETLINK_ROUTE
 *                           (glibc's getaddrinfo/getifaddrs/if_nameindex).
 *                           A network namespace does not scope AF_VSOCK (a
 *                           VM's hypervisor), AF_BLUETOOTH, AF_ALG (kernel
 *                           crypto attack surface) or AF_KEY, and other
 *                           netlink protocols reach kernel-wide state.
 *   keyctl, add_key, request_key
 *                           ENOSYS: the caller's session, user (@u) and
 *                           user-session keyrings stay out of reach.
 *   bind(), listen()        EPERM, unless network.allowLocalBinding (issue
 *                           15: the key was accepted and did nothing). The
 *                           address is behind a pointer, but its length is
 *                           a register: bind() is refused when addrlen is
 *                           16 or more, which every IPv4 (16) and IPv6
 *                           (24/28) address and any Unix path of 14 bytes
 *                           or more needs, while netlink's 12-byte
 *                           sockaddr_nl (glibc's getaddrinfo, getifaddrs
 *                           and if_nameindex bind one) still works. The
 *                           kernel refuses an IP address shorter than 16
 *                           bytes (EINVAL), so no length below the cut
 *                           binds an IP socket. listen() is refused
 *                           whatever the socket. The sandbox's own proxy
 *                           listeners are made by inner before the filter.
 *                           On i386 socketcall(SYS_BIND) and
 *                           socketcall(SYS_LISTEN) are refused whole (the
 *                           length is behind the argument pointer there).
 *   io_uring_setup/_enter/_register
 *                           EPERM. io_uring performs socket(), connect(),
 *                           ... from kernel context, out of this filter's
 *                           sight.
 *   unshare(CLONE_NEWUSER), clone(CLONE_NEWUSER, ...)
 *                           EPERM. A new user namespace gives the command
 *                           every capability inside it and with them new
 *                           mount and network namespaces of its own. The
 *                           flags are arg 0 of clone on x86-64, x32, i386,
 *                           aarch64 and arm (only s390 and cris swap the
 *                           first two arguments: not built here).
 *                           Both lifted by allowNestedUserNamespaces.
 *   clone3()                ENOSYS (unless allowNestedUserNamespaces). Its flags are in a struct behind a
 *                           pointer that seccomp cannot read; ENOSYS makes
 *                           libc (glibc >= 2.34, musl) fall back to clone(),
 *                           whose flags the rule above inspects.
 *   ptrace(.., 1, ..), process_vm_readv/writev(1, ..)
 *                           EPERM. PID 1 is bwrap's init, which is not
 *                           under this filter: driving it would run any
 *                           refused syscall. inner.c also puts the command
 *                           in a Landlock domain (where the kernel has it),
 *                           which covers /proc/1/mem too.
 *   connect()               transparent mode only (network.transparent):
 *                           SCMP_ACT_NOTIFY, answered by the host
 *                           (transparent.c); getpeername() too, and bind()
 *                           when network.allowLocalBinding allows it. Also
 *                           (without getpeername()) when the command
 *                           inherits a TCP socket of the host's network
 *                           (inherit.c, inner --guard-connect): the host
 *                           refuses both on it. The filter is then loaded with
 *                           seccomp(2) itself (load_with_listener) to get
 *                           the listener descriptor and WAIT_KILLABLE_RECV.
 *   open/openat with a write flag, creat, openat2 (ENOSYS before), mkdir,
 *   mknod, unlink, rmdir, rename, link, symlink, truncate, chmod, chown,
 *   utime families
 *                           when the run reports write denials (not
 *                           --quiet): SCMP_ACT_NOTIFY, answered by the host
 *                           with CONTINUE after a look (fswatch.c); the
 *                           same listener as transparent mode's.
 *   chmod, fchmod, fchmodat, fchmodat2, creat, mknod, mknodat with a mode
 *   holding S_ISUID or S_ISGID; open/openat with O_CREAT or __O_TMPFILE and
 *   such a mode
 *                           EPERM, in every mode (rt-3 hole 6: as root the
 *                           command would leave a set-user-ID root program
 *                           behind). openat2: ENOSYS. A filter of its own,
 *                           loaded first: see "set-user-ID and set-group-ID
 *                           bits" below.
 *   ioctl(fd, TIOCSTI), ioctl(fd, TIOCLINUX)
 *                           EPERM. Both push keystrokes into a terminal the
 *                           command shares with the user's shell (the
 *                           classic sandbox escape, CVE-2017-5226 for
 *                           bwrap). The request is an unsigned int in the
 *                           kernel, so it is compared masked to 32 bits.
 *
 * Every ABI the kernel runs on this architecture gets the same rules; any
 * other audit architecture kills the process (SCMP_FLTATR_ACT_BADARCH).
 *   x86-64: native, x32 (syscall numbers with __X32_SYSCALL_BIT; the rules
 *           apply even when the kernel has x32 disabled) and i386 (int $0x80
 *           from any process, or a 32-bit program). On i386 socket() can
 *           also be reached through socketcall(2), whose arguments sit
 *           behind a pointer that seccomp cannot read: when Unix sockets are
 *           refused, socketcall(SYS_SOCKET, ...) is refused whatever the
 *           domain, so i386 programs must use the direct socket syscall
 *           (i386 nr 359, Linux >= 4.3; glibc >= 2.23 tries it first). The
 *           other socketcall operations stay allowed.
 *   aarch64: native and arm (AArch32). Not tested in CI.
 * libseccomp's seccomp_rule_add() (not _exact) rewrites the socket rule for
 * i386 into both the direct syscall and socketcall, and resolves each
 * syscall per ABI; the explicit socketcall rule below keeps the i386
 * behaviour from depending on that rewrite.
 *
 * The filter is loaded by the calling thread only (inner is single-threaded
 * when it loads it) and is inherited by everything the command starts. */
#define _GNU_SOURCE /* syscall(), memfd_create number */
#include "sandbox/sandbox.h"
#include "sandbox/fswatch.h"

#include <errno.h>
#include <fcntl.h> /* O_CREAT */
#include <linux/filter.h>
#include <linux/net.h> /* SYS_SOCKET, socketcall's call numbers */
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h> /* S_ISUID, S_ISGID */
#include <sys/syscall.h>
#include <unistd.h>

#ifndef CLONE_NEWUSER
#define CLONE_NEWUSER 0x10000000
#endif
#ifndef TIOCLINUX
#define TIOCLINUX 0x541C
#endif

#define MASK32 ((scmp_datum_t)0xffffffffU)

/* The ABIs the kernel may run here, the native one first (sb_seccomp_arches). */
static const uint32_t extra_arches[] = {
#if defined(__x86_64__)
    SCMP_ARCH_X86_64,
    SCMP_ARCH_X32,
    SCMP_ARCH_X86,
#elif defined(__aarch64__)
    SCMP_ARCH_AARCH64,
    SCMP_ARCH_ARM,
#else
#error "sluice's seccomp filter knows x86-64 and aarch64 only"
#endif
};

const uint32_t *sb_seccomp_arches(size_t *n)
{
    *n = sizeof extra_arches / sizeof extra_arches[0];
    return extra_arches;
}

static int fail(char *err, size_t errlen, const char *what, int rc)
{
    if (err != NULL && errlen > 0)
        snprintf(err, errlen, "seccomp: %s failed: rc %d (%s)", what, rc,
                 rc < 0 ? strerror(-rc) : "unknown error");
    return rc < 0 ? rc : -1;
}

/* One rule with at most one argument comparison (ncmp 0 or 1). */
static int add_rule(scmp_filter_ctx ctx, uint32_t action, int nr, const char *name, unsigned ncmp,
                    struct scmp_arg_cmp cmp, char *err, size_t errlen)
{
    char what[64];
    int rc;

    if (ncmp == 0)
        rc = seccomp_rule_add(ctx, action, nr, 0);
    else
        rc = seccomp_rule_add_array(ctx, action, nr, 1, &cmp);
    if (rc < 0) {
        snprintf(what, sizeof what, "seccomp_rule_add(%s)", name);
        return fail(err, errlen, what, rc);
    }
    return 0;
}

/* --- issue 14: keyrings and the socket-family allow-list ---------------- */

/* Socket families the command may create (AF_UNIX has its own rule above,
 * under network.allowAllUnixSockets). Every other value of the domain in
 * [0, SB_FAMILY_SCAN) fails with EPERM, and so does any domain >=
 * SB_FAMILY_SCAN compared on all 64 bits (a value with high bits set is
 * refused, whatever the kernel would make of its low half). */
#define SB_FAMILY_SCAN 64
#ifndef AF_NETLINK
#define AF_NETLINK 16
#endif
#define SB_NETLINK_ROUTE 0

static int family_allowed(unsigned f)
{
    return f == AF_UNIX || f == AF_INET || f == AF_INET6 || f == AF_NETLINK;
}

/* A rule on socket(), always EPERM. libseccomp rewrites an i386 socket()
 * rule into socketcall(SYS_SOCKET) as well, without the argument
 * comparisons (they are behind a pointer there): every socket() rule thus
 * also makes "socketcall(SYS_SOCKET) -> its action", and two different
 * actions there collide (-EEXIST, and the rule is added on no ABI). So
 * every socket() refusal, the AF_UNIX one included, is the same EPERM. */
static int add_socket_rule(scmp_filter_ctx ctx, uint32_t action, unsigned n,
                           const struct scmp_arg_cmp *cmp, const char *name, char *err,
                           size_t errlen)
{
    char what[80];
    int rc = seccomp_rule_add_array(ctx, action, SCMP_SYS(socket), n, cmp);

    if (rc == 0)
        return 0;
    snprintf(what, sizeof what, "seccomp_rule_add(%s)", name);
    return fail(err, errlen, what, rc);
}

static int add_hardening_rules(scmp_filter_ctx ctx, const struct sb_seccomp_opts *o, char *err,
                               size_t errlen)
{
    const struct scmp_arg_cmp none = {0, SCMP_CMP_EQ, 0, 0};
    const uint32_t enosys = SCMP_ACT_ERRNO(ENOSYS);
    const uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
    int rc;

    (void)o;
    /* keyrings: ENOSYS, the kernel's own answer without CONFIG_KEYS, which
     * keyutils, krb5 (KEYRING: caches) and systemd treat as "no keyring
     * here" and fall back from; EPERM/EACCES read as a denied key instead.
     * Refusing the syscalls (rather than a fresh session keyring) also hides
     * the per-uid user keyring (@u) and user-session keyring (@us), which a
     * new session keyring would still link to. */
    rc = add_rule(ctx, enosys, SCMP_SYS(keyctl), "keyctl", 0, none, err, errlen);
    if (rc == 0)
        rc = add_rule(ctx, enosys, SCMP_SYS(add_key), "add_key", 0, none, err, errlen);
    if (rc == 0)
        rc = add_rule(ctx, enosys, SCMP_SYS(request_key), "request_key", 0, none, err, errlen);
    if (rc < 0)
        return rc;

    for (unsigned f = 0; f < SB_FAMILY_SCAN && rc == 0; f++) {
        if (family_allowed(f))
            continue;
        const struct scmp_arg_cmp cmp = SCMP_A0_64(SCMP_CMP_EQ, (scmp_datum_t)f, 0);
        rc = add_socket_rule(ctx, eperm, 1, &cmp, "socket(family)", err, errlen);
    }
    if (rc == 0) {
        const struct scmp_arg_cmp cmp = SCMP_A0_64(SCMP_CMP_GE, (scmp_datum_t)SB_FAMILY_SCAN, 0);
        rc = add_socket_rule(ctx, eperm, 1, &cmp, "socket(family >= 64)", err, errlen);
    }
    if (rc < 0)
        return rc;
    /* socketpair() of any family but AF_UNIX (AF_TIPC implements it): the
     * family allow-list above judges socket() only, and a pair of another
     * family is a socket of that family all the same. Compared on all 64
     * bits, so a domain with high bits set is refused too. */
    rc = add_rule(ctx, eperm, SCMP_SYS(socketpair), "socketpair(family)", 1,
                  SCMP_A0_64(SCMP_CMP_NE, (scmp_datum_t)AF_UNIX, 0), err, errlen);
    if (rc < 0)
        return rc;
    /* AF_NETLINK: NETLINK_ROUTE only (glibc's getaddrinfo AI_ADDRCONFIG,
     * getifaddrs and if_nameindex; it sees the sandbox's own namespace) */
    {
        /* protocol compared on all 64 bits: one with high bits set is
         * refused too */
        const struct scmp_arg_cmp cmp[2] = {
            SCMP_A0_64(SCMP_CMP_EQ, (scmp_datum_t)AF_NETLINK, 0),
            SCMP_A2_64(SCMP_CMP_GT, (scmp_datum_t)SB_NETLINK_ROUTE, 0),
        };
        rc = add_socket_rule(ctx, eperm, 2, cmp,
                             "socket(AF_NETLINK, protocol)", err, errlen);
        if (rc < 0)
            return rc;
    }
    /* i386 socketcall(SYS_SOCKET, ...) hides its arguments behind a pointer:
     * refused whatever the domain (and so whatever allowAllUnixSockets
     * says), or it would get round the list above. Only i386 has
     * socketcall here; on the other ABIs libseccomp adds no rule. */
    return add_rule(ctx, eperm, SCMP_SYS(socketcall), "socketcall(SYS_SOCKET)", 1,
                    SCMP_A0_64(SCMP_CMP_EQ, (scmp_datum_t)SYS_SOCKET, 0), err, errlen);
}

/* --- end of issue 14's rules ------------------------------------------- */

/* issue 21: the socketpair() types allowed without allowAllUnixSockets, of
 * the type's low bits (the kernel's SOCK_TYPE_MASK; the rest of the int is
 * SOCK_NONBLOCK and SOCK_CLOEXEC, or EINVAL). A stream or seqpacket pair
 * reaches only its peer whatever the command does with it; a datagram pair
 * (SOCK_DGRAM, or SOCK_RAW, which AF_UNIX makes a datagram socket) sends to
 * any address sendto()/sendmsg() names, and sendmsg()'s address is out of
 * the filter's sight. Every other type is refused too, so that no type the
 * kernel may one day map onto datagrams gets through. */
#define SB_SOCK_TYPE_MASK 0xfU

static int pair_type_allowed(unsigned t)
{
    return t == SOCK_STREAM || t == SOCK_SEQPACKET;
}

static int add_socketpair_rules(scmp_filter_ctx ctx, char *err, size_t errlen)
{
    const uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
    char what[80];
    int rc = 0;

    for (unsigned t = 0; t <= SB_SOCK_TYPE_MASK; t++) {
        if (pair_type_allowed(t))
            continue;
        const struct scmp_arg_cmp cmp[2] = {
            SCMP_A0_64(SCMP_CMP_MASKED_EQ, MASK32, (scmp_datum_t)AF_UNIX),
            SCMP_A1_64(SCMP_CMP_MASKED_EQ, (scmp_datum_t)SB_SOCK_TYPE_MASK, (scmp_datum_t)t),
        };
        rc = seccomp_rule_add_array(ctx, eperm, SCMP_SYS(socketpair), 2, cmp);
        if (rc < 0) {
            snprintf(what, sizeof what, "seccomp_rule_add(socketpair(AF_UNIX, type %u))", t);
            return fail(err, errlen, what, rc);
        }
    }
    /* i386 socketcall(SYS_SOCKETPAIR, ...): the arguments are behind a
     * pointer, so refused whatever they are (libseccomp also folds the
     * rules above into it, with the same action) */
    return add_rule(ctx, eperm, SCMP_SYS(socketcall), "socketcall(SYS_SOCKETPAIR)", 1,
                    SCMP_A0_64(SCMP_CMP_EQ, (scmp_datum_t)SYS_SOCKETPAIR, 0), err, errlen);
}

/* The shortest bind() address length refused without allowLocalBinding:
 * sizeof(struct sockaddr_in). sockaddr_nl (12 bytes) stays below it. */
#define SB_BIND_MIN_REFUSED 16

static int add_rules(scmp_filter_ctx ctx, const struct sb_seccomp_opts *o, char *err, size_t errlen)
{
    const uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
    const struct scmp_arg_cmp none = {0, SCMP_CMP_EQ, 0, 0};
    int rc = 0;

    if (!o->allow_unix_sockets) {
        rc = add_rule(ctx, eperm, SCMP_SYS(socket), "socket", 1,
                      SCMP_A0_64(SCMP_CMP_MASKED_EQ, MASK32, (scmp_datum_t)AF_UNIX), err, errlen);
        if (rc == 0)
            rc = add_socketpair_rules(ctx, err, errlen);
        if (rc < 0)
            return rc;
    }

    rc = add_hardening_rules(ctx, o, err, errlen);
    if (rc < 0)
        return rc;
    if (o->watch_writes) {
        /* write-intent syscalls -> the host, which reports the refused ones
         * (fswatch.c) and lets each run */
        rc = sb_fswatch_rules(ctx, err, errlen);
        if (rc < 0)
            return rc;
    }

    if (o->transparent || o->guard_connect) {
        /* Transparent mode (transparent.c): every connect() waits for the
         * host's answer. libseccomp also routes i386 socketcall(SYS_CONNECT)
         * here (the host reads its argument block). */
        rc = add_rule(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(connect), "connect", 0, none, err, errlen);
        /* and getpeername(), so that a socket sluice connected names the
         * address the command asked for, not the one sluice dialed */
        if (rc == 0 && o->transparent)
            rc = add_rule(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(getpeername), "getpeername", 0, none, err,
                          errlen);
        /* and bind() where it is allowed: on a socket of the host's
         * namespace (one sluice handed over, reset by its peer) it would
         * take a port there; the host refuses it and runs the others */
        if (rc == 0 && o->allow_local_binding)
            rc = add_rule(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(bind), "bind", 0, none, err, errlen);
        if (rc < 0)
            return rc;
    }

    if (!o->allow_local_binding) {
        /* addrlen compared on all 64 bits: a value with high bits set is
         * refused too, whatever the kernel would make of its low half. */
        rc = add_rule(ctx, eperm, SCMP_SYS(bind), "bind", 1,
                      SCMP_A2_64(SCMP_CMP_GE, (scmp_datum_t)SB_BIND_MIN_REFUSED, 0), err, errlen);
        if (rc == 0)
            rc = add_rule(ctx, eperm, SCMP_SYS(listen), "listen", 0, none, err, errlen);
        if (rc == 0)
            rc = add_rule(ctx, eperm, SCMP_SYS(socketcall), "socketcall(SYS_BIND)", 1,
                          SCMP_A0_64(SCMP_CMP_EQ, (scmp_datum_t)SYS_BIND, 0), err, errlen);
        if (rc == 0)
            rc = add_rule(ctx, eperm, SCMP_SYS(socketcall), "socketcall(SYS_LISTEN)", 1,
                          SCMP_A0_64(SCMP_CMP_EQ, (scmp_datum_t)SYS_LISTEN, 0), err, errlen);
        if (rc < 0)
            return rc;
    }

    rc = add_rule(ctx, eperm, SCMP_SYS(io_uring_setup), "io_uring_setup", 0, none, err, errlen);
    if (rc == 0)
        rc = add_rule(ctx, eperm, SCMP_SYS(io_uring_enter), "io_uring_enter", 0, none, err, errlen);
    if (rc == 0)
        rc = add_rule(ctx, eperm, SCMP_SYS(io_uring_register), "io_uring_register", 0, none, err,
                      errlen);
    if (rc < 0)
        return rc;

    if (o->allow_user_namespaces)
        goto ptrace_rules;
    rc = add_rule(
        ctx, eperm, SCMP_SYS(unshare), "unshare", 1,
        SCMP_A0_64(SCMP_CMP_MASKED_EQ, (scmp_datum_t)CLONE_NEWUSER, (scmp_datum_t)CLONE_NEWUSER),
        err, errlen);
    if (rc == 0)
        rc = add_rule(ctx, eperm, SCMP_SYS(clone), "clone", 1,
                      SCMP_A0_64(SCMP_CMP_MASKED_EQ, (scmp_datum_t)CLONE_NEWUSER,
                                 (scmp_datum_t)CLONE_NEWUSER),
                      err, errlen);
    if (rc == 0)
        rc =
            add_rule(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), "clone3", 0, none, err, errlen);
    if (rc < 0)
        return rc;

ptrace_rules:
    /* PID 1 is bwrap's init, outside this filter: no ptrace of it and no
     * access to its memory (inner.c's Landlock domain covers /proc/1/mem). */
    rc = add_rule(ctx, eperm, SCMP_SYS(ptrace), "ptrace(pid 1)", 1,
                  SCMP_A1_64(SCMP_CMP_MASKED_EQ, MASK32, 1), err, errlen);
    if (rc == 0)
        rc = add_rule(ctx, eperm, SCMP_SYS(process_vm_readv), "process_vm_readv(pid 1)", 1,
                      SCMP_A0_64(SCMP_CMP_MASKED_EQ, MASK32, 1), err, errlen);
    if (rc == 0)
        rc = add_rule(ctx, eperm, SCMP_SYS(process_vm_writev), "process_vm_writev(pid 1)", 1,
                      SCMP_A0_64(SCMP_CMP_MASKED_EQ, MASK32, 1), err, errlen);
    if (rc < 0)
        return rc;

    rc = add_rule(ctx, eperm, SCMP_SYS(ioctl), "ioctl(TIOCSTI)", 1,
                  SCMP_A1_64(SCMP_CMP_MASKED_EQ, MASK32, (scmp_datum_t)TIOCSTI), err, errlen);
    if (rc == 0)
        rc = add_rule(ctx, eperm, SCMP_SYS(ioctl), "ioctl(TIOCLINUX)", 1,
                      SCMP_A1_64(SCMP_CMP_MASKED_EQ, MASK32, (scmp_datum_t)TIOCLINUX), err, errlen);
    return rc;
}

#ifndef SECCOMP_SET_MODE_FILTER
#define SECCOMP_SET_MODE_FILTER 1
#endif
#ifndef SECCOMP_FILTER_FLAG_NEW_LISTENER
#define SECCOMP_FILTER_FLAG_NEW_LISTENER (1UL << 3)
#endif
#ifndef SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
#define SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (1UL << 5)
#endif

/* The filter CTX compiled to classic BPF (libseccomp 2.5 exports to a
 * descriptor only: a memfd). *prog->filter is malloc'ed. 0 or -1 with err. */
static int export_prog(scmp_filter_ctx ctx, struct sock_fprog *prog, char *err, size_t errlen)
{
    unsigned char *buf;
    off_t size;
    int mfd, rc;

    mfd = (int)syscall(SYS_memfd_create, "sluice-seccomp", 1U /* MFD_CLOEXEC */);
    if (mfd < 0)
        return fail(err, errlen, "memfd_create", -errno);
    rc = seccomp_export_bpf(ctx, mfd);
    if (rc < 0) {
        close(mfd);
        return fail(err, errlen, "seccomp_export_bpf", rc);
    }
    size = lseek(mfd, 0, SEEK_END);
    if (size <= 0 || size % (off_t)sizeof(struct sock_filter) != 0 ||
        size > (off_t)(sizeof(struct sock_filter) * BPF_MAXINSNS)) {
        close(mfd);
        return fail(err, errlen, "seccomp_export_bpf (size)", -EINVAL);
    }
    buf = malloc((size_t)size);
    if (buf == NULL || pread(mfd, buf, (size_t)size, 0) != (ssize_t)size) {
        free(buf);
        close(mfd);
        return fail(err, errlen, "reading the exported filter", -EIO);
    }
    close(mfd);
    prog->len = (unsigned short)((size_t)size / sizeof(struct sock_filter));
    prog->filter = (struct sock_filter *)(void *)buf;
    return 0;
}

/* Loads PROG on the calling thread (no_new_privs set). With LISTENER, as
 * transparent mode and the write report need: seccomp(2) itself, because
 * libseccomp 2.5 cannot ask for SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
 * (Linux 5.19): once the host has read a connect()'s notification, a
 * non-fatal signal no longer interrupts the wait (without it every Go
 * program's preemption signal would restart connect() and the host's dial
 * with it). Kernels without the flag (EINVAL) get the filter without it.
 * The listener descriptor goes to *o->notify_fd. */
static int load_prog(const struct sock_fprog *prog, int listener, const struct sb_seccomp_opts *o,
                     char *err, size_t errlen)
{
    long fd;

    if (!listener) {
        if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0U, prog) != 0)
            return fail(err, errlen, "seccomp(SECCOMP_SET_MODE_FILTER)", -errno);
        return 0;
    }
    fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
                 SECCOMP_FILTER_FLAG_NEW_LISTENER | SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV, prog);
    if (fd < 0 && errno == EINVAL)
        fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, prog);
    if (fd < 0)
        return fail(err, errlen,
                    "seccomp(SECCOMP_FILTER_FLAG_NEW_LISTENER) (transparent mode and the "
                    "write report need seccomp user notification, Linux 5.0+)",
                    -errno);
    if (o->notify_fd != NULL)
        *o->notify_fd = (int)fd;
    else
        close((int)fd);
    return 0;
}

static int load_with_listener(scmp_filter_ctx ctx, const struct sb_seccomp_opts *o, char *err,
                              size_t errlen)
{
    struct sock_fprog prog;
    int rc = export_prog(ctx, &prog, err, errlen);

    if (rc < 0)
        return rc;
    rc = load_prog(&prog, 1, o, err, errlen);
    free(prog.filter);
    return rc;
}

/* A filter context with sluice's attributes and every ABI of
 * extra_arches. */
static int new_ctx(scmp_filter_ctx *out, char *err, size_t errlen)
{
    scmp_filter_ctx ctx;
    int rc;

    *out = NULL;
    ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (ctx == NULL)
        return fail(err, errlen, "seccomp_init", -ENOMEM);

    /* Report the kernel's errno from seccomp_load rather than libseccomp's
     * generic -ECANCELED. Optional (libseccomp >= 2.5): ignore a refusal. */
    (void)seccomp_attr_set(ctx, SCMP_FLTATR_API_SYSRAWRC, 1);

    rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
    if (rc < 0) {
        rc = fail(err, errlen, "seccomp_attr_set(SCMP_FLTATR_ACT_BADARCH)", rc);
        goto out;
    }
    for (size_t i = 0; i < sizeof extra_arches / sizeof extra_arches[0]; i++) {
        rc = seccomp_arch_add(ctx, extra_arches[i]);
        if (rc == -EEXIST) /* the native one, added by seccomp_init */
            rc = 0;
        if (rc < 0) {
            char what[64];
            snprintf(what, sizeof what, "seccomp_arch_add(0x%x)", (unsigned)extra_arches[i]);
            rc = fail(err, errlen, what, rc);
            goto out;
        }
    }
    *out = ctx;
    ctx = NULL;
out:
    if (ctx != NULL)
        seccomp_release(ctx);
    return rc;
}

/* --- rt-3 hole 6: set-user-ID and set-group-ID bits -------------------- */

/* As root the command is host root in the writable paths (it owns what it
 * makes there), so `cp /bin/sh x; chmod 4755 x` would leave a root shell
 * for any local user once the run is over: nosuid on the sandbox's mounts
 * stops the bit only inside. Every syscall that sets a file's mode from a
 * register fails with EPERM when that mode has S_ISUID or S_ISGID:
 * chmod, fchmod, fchmodat, fchmodat2 (S_ISGID included: chmod cannot tell
 * a directory from a file, so `chmod g+s DIR` is refused too), creat,
 * mknod, mknodat, and open/openat when the flags hold O_CREAT or the
 * O_TMPFILE bit (without them the mode argument is not read, and is
 * garbage). mkdir/mkdirat stay allowed with any mode: S_ISGID on a
 * directory is the BSD group-inheritance idiom, S_ISUID on one means
 * nothing on Linux, and neither makes a program run with other ids.
 * openat2 carries its mode inside a struct open_how the filter cannot
 * read: it fails with ENOSYS, as on kernels before 5.6, and callers
 * (glibc has no wrapper; systemd, crun, Go's x/sys users) fall back to
 * openat, which the rule above judges. Copies that keep the bits (cp -p,
 * tar -p, rsync -p, install -m 4755) go through the same calls; rename()
 * and link() of a setuid binary from the read-only root into a writable
 * path fail with EXDEV (another mount); chown() clears the bits.
 *
 * These rules are a filter of their own, loaded next to the main one: in
 * the write report's mode (fswatch.c) the main filter sends open, creat,
 * mknod, chmod and openat2 to the host (SCMP_ACT_NOTIFY), and the kernel,
 * which runs every filter and keeps the action of highest precedence,
 * makes EPERM/ENOSYS win over NOTIFY whatever libseccomp would do with two
 * overlapping rules in one filter. */
#ifndef __NR_fchmodat2
#define __NR_fchmodat2 452 /* Linux 6.6; the same number on every ABI here (x32: | the x32 bit) */
#endif
/* The kernel's __O_TMPFILE bit (glibc's __O_TMPFILE also holds O_DIRECTORY):
 * the kernel reads the mode whenever it is set, and fails with EINVAL
 * unless O_DIRECTORY is set too; the same value on x86 and the generic
 * ABIs (aarch64, arm). */
#define SB_O_TMPFILE_BIT 020000000

/* A syscall whose mode argument is judged: MODE is its index, FLAGS the
 * index of its open flags (-1: the mode is always used). */
struct mode_call {
    int nr;
    const char *name;
    unsigned mode;
    int flags;
};

static int add_mode_rules(scmp_filter_ctx ctx, char *err, size_t errlen)
{
    const struct mode_call calls[] = {
        {SCMP_SYS(chmod), "chmod", 1, -1},
        {SCMP_SYS(fchmod), "fchmod", 1, -1},
        {SCMP_SYS(fchmodat), "fchmodat", 2, -1},
        {SCMP_SYS(fchmodat2), "fchmodat2", 2, -1},
        {SCMP_SYS(creat), "creat", 1, -1},
        {SCMP_SYS(mknod), "mknod", 1, -1},
        {SCMP_SYS(mknodat), "mknodat", 2, -1},
        {SCMP_SYS(open), "open", 2, 1},
        {SCMP_SYS(openat), "openat", 3, 2},
    };
    const scmp_datum_t bits[] = {S_ISUID, S_ISGID};
    const scmp_datum_t creating[] = {O_CREAT, SB_O_TMPFILE_BIT};
    const uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
    const struct scmp_arg_cmp none = {0, SCMP_CMP_EQ, 0, 0};
    const char *name = "";
    char what[80];
    int rc = 0;

    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
        const struct mode_call *c = &calls[i];
        name = c->name;
        for (size_t b = 0; b < sizeof bits / sizeof bits[0]; b++) {
            const struct scmp_arg_cmp mode = {c->mode, SCMP_CMP_MASKED_EQ, bits[b], bits[b]};
            if (c->flags < 0) {
                rc = seccomp_rule_add_array(ctx, eperm, c->nr, 1, &mode);
                if (rc < 0)
                    goto fail;
                continue;
            }
            for (size_t f = 0; f < sizeof creating / sizeof creating[0]; f++) {
                const struct scmp_arg_cmp cmp[2] = {
                    {(unsigned)c->flags, SCMP_CMP_MASKED_EQ, creating[f], creating[f]},
                    mode,
                };
                rc = seccomp_rule_add_array(ctx, eperm, c->nr, 2, cmp);
                if (rc < 0)
                    goto fail;
            }
        }
    }
    return add_rule(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(openat2), "openat2", 0, none, err,
                    errlen);
fail:
    snprintf(what, sizeof what, "seccomp_rule_add(%s, S_ISUID|S_ISGID)", name);
    return fail(err, errlen, what, rc);
}

/* Loads the mode filter (above) on the calling thread. */
static int load_mode_filter(char *err, size_t errlen)
{
    scmp_filter_ctx ctx;
    int rc = new_ctx(&ctx, err, errlen);

    if (rc < 0)
        return rc;
    rc = add_mode_rules(ctx, err, errlen);
    if (rc == 0) {
        rc = seccomp_load(ctx);
        if (rc < 0)
            rc = fail(err, errlen, "seccomp_load(the set-user-ID filter)", rc);
    }
    seccomp_release(ctx);
    return rc;
}

/* The main filter's context for O, rules added. */
static int main_ctx(const struct sb_seccomp_opts *o, scmp_filter_ctx *out, char *err,
                    size_t errlen)
{
    int rc = new_ctx(out, err, errlen);

    if (rc < 0)
        return rc;
    rc = add_rules(*out, o, err, errlen);
    if (rc < 0) {
        seccomp_release(*out);
        *out = NULL;
    }
    return rc;
}

static int notifies(const struct sb_seccomp_opts *o)
{
    return o->transparent || o->watch_writes || o->guard_connect;
}

/* The main filter could not get a listener because the filter chain
 * already has one (EBUSY: a sandbox of this kind around sluice). When only
 * the write report wanted it, the main filter is loaded without the
 * report's rules, the one place it is built here when the host sent its
 * own (issue 25: no probe child on the host before every run); 1, or
 * RC unchanged when connect() needs the listener. */
static int without_report(const struct sb_seccomp_opts *o, int rc, char *err, size_t errlen)
{
    struct sb_seccomp_opts plain = *o;
    scmp_filter_ctx ctx;

    if (rc != -EBUSY || !o->watch_writes || o->transparent || o->guard_connect)
        return rc;
    plain.watch_writes = 0;
    plain.notify_fd = NULL;
    rc = main_ctx(&plain, &ctx, err, errlen);
    if (rc < 0)
        return rc;
    rc = seccomp_load(ctx);
    seccomp_release(ctx);
    if (rc < 0)
        return fail(err, errlen, "seccomp_load (without the write report)", rc);
    if (err != NULL && errlen > 0)
        err[0] = '\0';
    if (o->notify_fd != NULL)
        *o->notify_fd = -1;
    return 1;
}

int sb_seccomp_load(const struct sb_seccomp_opts *o, char *err, size_t errlen)
{
    scmp_filter_ctx ctx;
    int rc;

    if (err != NULL && errlen > 0)
        err[0] = '\0';
    /* first the mode filter, in every mode: should the main one fail to
     * load after it, inner does not exec the command anyway */
    rc = load_mode_filter(err, errlen);
    if (rc < 0)
        return rc;
    rc = main_ctx(o, &ctx, err, errlen);
    if (rc < 0)
        return rc;
    if (notifies(o))
        rc = load_with_listener(ctx, o, err, errlen);
    else
        rc = seccomp_load(ctx);
    if (rc < 0 && !notifies(o))
        rc = fail(err, errlen, "seccomp_load", rc);
    seccomp_release(ctx);
    return without_report(o, rc, err, errlen);
}

/* issue 25: the host compiles the filters while bwrap makes the sandbox,
 * and inner only loads them. The blob: for the mode filter, then the main
 * one, a native uint32_t count of instructions and that many struct
 * sock_filter. */

static int blob_put(unsigned char **blob, size_t *len, const struct sock_fprog *prog)
{
    uint32_t n = prog->len;
    size_t add = sizeof n + (size_t)n * sizeof(struct sock_filter);
    unsigned char *b = realloc(*blob, *len + add);

    if (b == NULL)
        return -ENOMEM;
    memcpy(b + *len, &n, sizeof n);
    memcpy(b + *len + sizeof n, prog->filter, (size_t)n * sizeof(struct sock_filter));
    *blob = b;
    *len += add;
    return 0;
}

int sb_seccomp_export(const struct sb_seccomp_opts *o, unsigned char **blob, size_t *len,
                      char *err, size_t errlen)
{
    scmp_filter_ctx ctx[SB_SECCOMP_PROGS] = {NULL, NULL};
    struct sock_fprog prog;
    int rc;

    if (err != NULL && errlen > 0)
        err[0] = '\0';
    *blob = NULL;
    *len = 0;
    rc = new_ctx(&ctx[0], err, errlen);
    if (rc == 0) {
        rc = add_mode_rules(ctx[0], err, errlen);
        if (rc == 0)
            rc = main_ctx(o, &ctx[1], err, errlen);
    }
    for (size_t i = 0; rc == 0 && i < SB_SECCOMP_PROGS; i++) {
        rc = export_prog(ctx[i], &prog, err, errlen);
        if (rc == 0) {
            rc = blob_put(blob, len, &prog);
            if (rc < 0)
                rc = fail(err, errlen, "the filter blob", rc);
            free(prog.filter);
        }
    }
    for (size_t i = 0; i < SB_SECCOMP_PROGS; i++)
        if (ctx[i] != NULL)
            seccomp_release(ctx[i]);
    if (rc < 0) {
        free(*blob);
        *blob = NULL;
        *len = 0;
    }
    return rc;
}

int sb_seccomp_blob_parse(const unsigned char *blob, size_t len, struct sock_fprog *progs)
{
    size_t off = 0;

    for (size_t i = 0; i < SB_SECCOMP_PROGS; i++)
        progs[i].filter = NULL;
    for (size_t i = 0; i < SB_SECCOMP_PROGS; i++) {
        uint32_t n;
        if (len - off < sizeof n)
            goto bad;
        memcpy(&n, blob + off, sizeof n);
        off += sizeof n;
        if (n == 0 || n > BPF_MAXINSNS || (len - off) / sizeof(struct sock_filter) < n)
            goto bad;
        progs[i].len = (unsigned short)n;
        /* an aligned copy: the blob's offsets are multiples of 4 only */
        progs[i].filter = malloc((size_t)n * sizeof(struct sock_filter));
        if (progs[i].filter == NULL) {
            sb_seccomp_blob_free(progs);
            return -ENOMEM;
        }
        memcpy(progs[i].filter, blob + off, (size_t)n * sizeof(struct sock_filter));
        off += (size_t)n * sizeof(struct sock_filter);
    }
    if (off == len)
        return 0;
bad:
    sb_seccomp_blob_free(progs);
    return -EPROTO;
}

void sb_seccomp_blob_free(struct sock_fprog *progs)
{
    for (size_t i = 0; i < SB_SECCOMP_PROGS; i++) {
        free(progs[i].filter);
        progs[i].filter = NULL;
    }
}

int sb_seccomp_load_blob(const struct sb_seccomp_opts *o, const unsigned char *blob, size_t len,
                         char *err, size_t errlen)
{
    struct sock_fprog prog[SB_SECCOMP_PROGS];
    int rc;

    if (err != NULL && errlen > 0)
        err[0] = '\0';
    rc = sb_seccomp_blob_parse(blob, len, prog);
    if (rc < 0)
        return fail(err, errlen, "reading the host's filters", rc);
    /* the mode filter first, as sb_seccomp_load does */
    rc = load_prog(&prog[0], 0, o, err, errlen);
    if (rc == 0)
        rc = without_report(o, load_prog(&prog[1], notifies(o), o, err, errlen), err, errlen);
    sb_seccomp_blob_free(prog);
    return rc;
}

/* ------------------------------------------------------------------------ */

/* The lines `sluice explain` prints, chosen by the options. */
/* sb_seccomp_describe's lines, one group of rules a step: each appends to
 * lines from n and returns the new count. */

/* Transparent mode: connect() (and bind()) answered on the host. */
static size_t describe_transparent(const char **lines, size_t n, int tp)
{
    if (tp)
        lines[n++] = "connect() waits for sluice on the host (transparent mode: seccomp user "
                     "notification); sluice decides it with the policy and puts its own "
                     "connected socket in place, or runs it itself, on the socket it checked, "
                     "where it can reach only the sandbox's own namespace; getpeername() is "
                     "answered by sluice too, with the address the command asked for on the "
                     "sockets it connected; with allowLocalBinding, bind() is answered by "
                     "sluice the same way; on a socket of the host's namespace both fail "
                     "with EPERM";
    if (tp)
        lines[n++] = "UDP is kept in the sandbox by its routes (every address local there: "
                     "sluice's relays judge each destination), not by this filter";
    return n;
}

/* socket(), socketpair() and socketcall() for Unix sockets, then the
 * families socket() allows at all, and the keyrings. */
static size_t describe_sockets(const char **lines, size_t n, int unix_ok)
{
    if (unix_ok) {
        lines[n++] = "socket(AF_UNIX, ...) is allowed (network.allowAllUnixSockets is true)";
        lines[n++] = "socketpair(AF_UNIX, ...) is allowed with any type, datagram pairs "
                     "included (network.allowAllUnixSockets is true)";
        lines[n++] = "i386 socketcall(SYS_SOCKET, ...) fails with EPERM whatever the domain "
                     "(its arguments are behind a pointer, and the family list below must "
                     "hold): 32-bit programs must use the direct socket syscall";
    } else {
        lines[n++] = "socket(AF_UNIX, ...) fails with EPERM (network.allowAllUnixSockets is "
                     "false; the domain is compared on its low 32 bits)";
        lines[n++] = "i386 socketcall(SYS_SOCKET, ...) fails with EPERM whatever the domain "
                     "(its arguments are behind a pointer): 32-bit programs must use the "
                     "direct socket syscall";
        lines[n++] = "socketpair(AF_UNIX, ...) works for SOCK_STREAM and SOCK_SEQPACKET pairs "
                     "(they reach only their peer) and fails with EPERM for datagram pairs "
                     "(SOCK_DGRAM, SOCK_RAW): a datagram socket can sendto() any host "
                     "socket's path or abstract name; i386 socketcall(SYS_SOCKETPAIR, ...) "
                     "fails with EPERM whatever the type";
    }
    /* issue 14 */
    lines[n++] = "socket() fails with EPERM for every family but AF_INET, AF_INET6, Unix sockets "
                 "(above) and AF_NETLINK (AF_VSOCK, AF_PACKET, AF_BLUETOOTH, AF_ALG, AF_KEY, ...: "
                 "a network namespace does not scope them all), and AF_NETLINK only with "
                 "NETLINK_ROUTE (what glibc's getaddrinfo and getifaddrs use); socketpair() of any "
                 "other family than the Unix one fails with EPERM";
    lines[n++] = "keyctl(), add_key() and request_key() fail with ENOSYS (as on a kernel without "
                 "keys, which keyutils, krb5 and systemd fall back from): the caller's session, "
                 "user and user-session keyrings cannot be read or written";
    return n;
}

/* bind() and listen(); io_uring; new user namespaces. */
static size_t describe_binding_userns(const char **lines, size_t n, int bind_ok, int userns_ok)
{
    if (bind_ok)
        lines[n++] = "bind() and listen() are allowed (network.allowLocalBinding is true): "
                     "servers can listen on the sandbox's own loopback, which nothing outside "
                     "the sandbox can reach";
    else
        lines[n++] = "bind() to an IP address or a Unix socket path, and listen(), fail with "
                     "EPERM (network.allowLocalBinding is false): no server can be started, not "
                     "even on loopback; netlink sockets (used by getaddrinfo and getifaddrs) "
                     "still bind";
    lines[n++] = "io_uring_setup, io_uring_enter and io_uring_register fail with EPERM";
    if (userns_ok)
        lines[n++] = "new user namespaces are allowed (allowNestedUserNamespaces is true): "
                     "unshare() and clone() with CLONE_NEWUSER and clone3() work, so nested "
                     "sandboxes (bwrap, podman) can run inside";
    else {
        lines[n++] = "unshare() and clone() with CLONE_NEWUSER fail with EPERM (no new user "
                     "namespaces)";
        lines[n++] = "clone3() fails with ENOSYS, so libc falls back to clone(), whose flags "
                     "are checked";
    }
    return n;
}

/* Set-user-ID modes, openat2(), the write report, terminal injection. */
static size_t describe_files(const char **lines, size_t n)
{
    lines[n++] = "chmod(), fchmod(), fchmodat(), fchmodat2(), creat(), mknod(), mknodat(), and "
                 "open()/openat() with O_CREAT or O_TMPFILE fail with EPERM when the mode has "
                 "S_ISUID or S_ISGID, in every mode (as root the command owns what it writes as "
                 "host root, and a set-user-ID copy of a shell left behind would be a root shell "
                 "for any local user): installers that set those bits (make install of a "
                 "set-user-ID helper, install -m 4755, cp -p or tar -p of such a program) fail "
                 "there, and so do chmod g+s DIR and mkdir -m 2775 (chmod cannot tell a "
                 "directory from a file); mkdir() itself keeps S_ISGID, so mkdir(2) with 02775 "
                 "works";
    lines[n++] = "openat2() fails with ENOSYS (its mode is behind a pointer), as on kernels before "
                 "5.6: callers fall back to openat(), whose mode is checked; RESOLVE_BENEATH and "
                 "the other RESOLVE_* flags are not available";
    lines[n++] = "open()/openat() with O_WRONLY, O_RDWR, O_CREAT or O_TRUNC, creat(), "
                 "mkdir(), mknod(), unlink(), rmdir(), rename(), link(), symlink(), truncate(), "
                 "chmod(), chown() and utime() families (and their *at forms) wait for sluice's "
                 "look on the host, which lists the ones the sandbox refuses (a read-only "
                 "mount) after the run and then lets each run unchanged (not with --quiet; "
                 "read-only opens never leave the kernel)";
    lines[n++] = "ioctl(TIOCSTI) and ioctl(TIOCLINUX) fail with EPERM (no keystroke injection "
                 "into the terminal)";
    return n;
}

/* ptrace() of PID 1, Landlock, and the read-only stdio; then the ABIs and
 * no_new_privs. */
static size_t describe_confinement(const char **lines, size_t n, int userns_ok)
{
    if (userns_ok) {
        lines[n++] = "ptrace(), process_vm_readv() and process_vm_writev() aimed at PID 1 (bwrap's "
                     "init, outside the filter) fail with EPERM; where the kernel has Landlock "
                     "scopes (Linux 6.12) the command is also in a Landlock domain that restricts "
                     "no filesystem access, so it cannot ptrace or open /proc/PID/mem of any "
                     "process outside it (on older kernels it runs in none, with a warning, and "
                     "/proc/1/mem and /proc/1/fd/N of PID 1 can be opened: its stdin, stdout "
                     "and stderr, but a read-only regular file)";
        lines[n++] = "OFF with allowNestedUserNamespaces: the Landlock filesystem rules (the "
                     "kernel refuses mount(2) to any process in a domain that restricts the "
                     "filesystem, and a nested sandbox must mount), so host FIFOs and device "
                     "nodes under the read-only root CAN be opened for writing, and so can a "
                     "FIFO or device node given read-only on stdin, stdout or stderr";
        lines[n++] = "with allowNestedUserNamespaces, as in every mode, a regular file given "
                     "read-only on stdin, stdout or stderr is bound read-only at "
                     "/tmp/.sluice-fd-N and the descriptor is reopened there (same file, same "
                     "offset at the start), so reopening it for writing (/proc/self/fd/N, "
                     "/dev/stdin) fails with EROFS";
        lines[n++] = "with allowNestedUserNamespaces as root, the command runs as uid 1000 in the "
                     "sandbox (root on the host all the same: the kernel lets a nested user "
                     "namespace map uid 0 only for a creator with CAP_SETFCAP), and /proc/sys "
                     "stays read-only over /proc, so a nested sandbox cannot mount a new /proc "
                     "(bwrap --proc fails; --bind /proc /proc works)";
    } else {
        lines[n++] = "ptrace(), process_vm_readv() and process_vm_writev() aimed at PID 1 (bwrap's "
                     "init, outside the filter) fail with EPERM; where the kernel has Landlock the "
                     "command is also in a Landlock domain, so it cannot ptrace or open "
                     "/proc/PID/mem of any process outside it";
        lines[n++] = "where the kernel has Landlock, a file can be opened for writing only beneath "
                     "the sandbox's writable paths and on those of the command's stdin, stdout "
                     "and stderr that were opened for writing, so host FIFOs and device nodes "
                     "under the read-only root cannot be written, and a file given read-only "
                     "(< FILE) cannot be reopened for writing through /proc/self/fd/0 (without "
                     "Landlock the command runs with a warning that this is missing)";
        lines[n++] = "a regular file or directory given read-only on stdin, stdout or stderr is "
                     "bound read-only at /tmp/.sluice-fd-N and the descriptor is reopened there, "
                     "so its mode, owner, times and extended attributes cannot be changed through "
                     "it (EROFS); when the command is done sluice moves the caller's offset to "
                     "where the command's reads left it";
    }
    lines[n++] = "the rules apply to every ABI the kernel runs (x86-64: native, x32 and i386; "
                 "aarch64: native and arm); a syscall from any other architecture kills the "
                 "process";
    lines[n++] = "no_new_privs is set before the filter is loaded";
    return n;
}

const char *const *sb_seccomp_describe(const struct sb_seccomp_opts *o)
{
    static const char *all[16][32]; /* one list per combination of the options */
    int unix_ok = o != NULL && o->allow_unix_sockets;
    int bind_ok = o != NULL && o->allow_local_binding;
    int userns_ok = o != NULL && o->allow_user_namespaces;
    int tp = o != NULL && o->transparent;
    const char **lines =
        all[(unix_ok ? 1 : 0) | (bind_ok ? 2 : 0) | (userns_ok ? 4 : 0) | (tp ? 8 : 0)];
    size_t n = 0;

    n = describe_transparent(lines, n, tp);
    n = describe_sockets(lines, n, unix_ok);
    n = describe_binding_userns(lines, n, bind_ok, userns_ok);
    n = describe_files(lines, n);
    n = describe_confinement(lines, n, userns_ok);
    lines[n] = NULL;
    return lines;
}
