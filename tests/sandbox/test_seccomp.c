/* tests/sandbox/test_seccomp.c - the seccomp filter (sandbox/seccomp.c) and
 * `sluice inner` with the host's end of its handoff (sandbox/inner.c).
 *
 * Filter tests. A filter cannot be unloaded, so every operation runs in a
 * forked child that sets no_new_privs, loads the filter and reports the
 * operation's errno (0 for success) to the parent through a pipe; the
 * parent asserts, and also that the child exited normally (a process killed
 * by the filter's bad-architecture action would not). Most operations also
 * run once without the filter (the "control"), to show that the refusal
 * comes from the filter and not from the kernel or the machine: where the
 * control already fails the same way the test says so and cannot tell.
 *
 * The i386 cases issue `int $0x80` from this 64-bit process, which enters
 * the kernel through the i386 ABI (seccomp sees AUDIT_ARCH_I386) with i386
 * syscall numbers and 32-bit arguments; pointers must be below 4 GiB
 * (MAP_32BIT). They skip when the kernel has no IA32 emulation (probed once
 * without the filter). The x32 cases set __X32_SYSCALL_BIT on a native
 * syscall: with the filter they must never succeed; EPERM (the filter) and
 * ENOSYS (x32 disabled in the kernel) are both accepted.
 *
 * Handoff tests fork a child that runs sb_inner_main() with ports 0 on one
 * end of a socketpair; the test plays the host with sb_handoff_recv() on the
 * other end. Parent-side tests send hand-made messages to sb_handoff_recv()
 * and check that every received descriptor is closed on failure (the count
 * of open descriptors is unchanged).
 *
 * Children reset the signals cmocka catches (a longjmp back into cmocka from
 * a child would run the rest of the suite twice) and arm alarm() so that a
 * hang fails the test instead of blocking the suite. No timing is asserted.
 */
#define _GNU_SOURCE /* MAP_32BIT, SO_PASSCRED, struct ucred, syscall() */
#include <setjmp.h> /* cmocka needs these first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <ifaddrs.h>
#include <linux/netlink.h>
#include <net/if.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/sandbox.h"

/* ASan builds: LeakSanitizer reports 28 blocks libseccomp 2.5.4 keeps
 * after seccomp_release() of the set-user-ID filter's context (indirect
 * only; cli/main.c suppresses them for the sluice binary). They used to
 * show in inner's children only; sb_handoff_send_filters compiles the
 * filters in this process (issue 25). */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_LSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define TEST_LSAN 1
#endif
#ifdef TEST_LSAN
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:libseccomp.so\n";
}
const char *__lsan_default_options(void);
const char *__lsan_default_options(void)
{
    return "print_suppressions=0";
}
#endif

#ifndef __X32_SYSCALL_BIT
#define __X32_SYSCALL_BIT 0x40000000L
#endif
#ifndef TIOCLINUX
#define TIOCLINUX 0x541C
#endif
#ifndef SYS_clone3
#define SYS_clone3 435
#endif

#define CHILD_ALARM_S 30
#define RECV_TIMEOUT_MS 20000u

/* i386 syscall numbers */
#define I386_GETPID 20
#define I386_IOCTL 54
#define I386_SOCKETCALL 102
#define I386_UNSHARE 310
#define I386_SOCKET 359
#define I386_SOCKETPAIR 360
#define I386_CLONE3 435
/* x32 syscall numbers (without the bit) */
#define X32_SOCKET 41
#define X32_SOCKETPAIR 53
#define X32_IOCTL 514

enum filter_mode {
    NO_FILTER = -1,
    REFUSE_UNIX = 0,
    ALLOW_UNIX = 1,
    ALLOW_BIND = 2,   /* network.allowLocalBinding */
    ALLOW_USERNS = 3, /* allowNestedUserNamespaces */
    WATCH_WRITES = 4, /* the write report's NOTIFY rules, with the listener closed */
};

/* ------------------------------------------------------------------------ */
/* Child plumbing                                                            */

static void child_init(void)
{
    static const int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGSYS, SIGABRT, SIGPIPE};

    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        signal(sigs[i], SIG_DFL);
    alarm(CHILD_ALARM_S);
}

#define LOAD_FAILED (-1000)

/* Runs OP in a child, under the filter unless mode is NO_FILTER. Returns the
 * op's result: 0 for success, else the errno. */
static int run_op(enum filter_mode mode, int (*op)(void))
{
    int p[2], status = 0, res = LOAD_FAILED;
    pid_t pid;
    ssize_t r;

    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int out = LOAD_FAILED;
        close(p[0]);
        child_init();
        if (mode != NO_FILTER) {
            struct sb_seccomp_opts o = {.allow_unix_sockets = mode == ALLOW_UNIX,
                                        .allow_local_binding = mode == ALLOW_BIND,
                                        .allow_user_namespaces = mode == ALLOW_USERNS,
                                        .watch_writes = mode == WATCH_WRITES};
            char err[256];
            if (prctl(PR_SET_NO_NEW_PRIVS, 1UL, 0UL, 0UL, 0UL) < 0 ||
                sb_seccomp_load(&o, err, sizeof err) < 0) {
                (void)!write(p[1], &out, sizeof out);
                _exit(0);
            }
        }
        out = op();
        (void)!write(p[1], &out, sizeof out);
        _exit(0);
    }
    close(p[1]);
    r = read(p[0], &res, sizeof res);
    close(p[0]);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status))
        fail_msg("child killed by signal %d", WIFSIGNALED(status) ? WTERMSIG(status) : -1);
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(r, (ssize_t)sizeof res);
    if (res == LOAD_FAILED)
        fail_msg("the child could not load the filter");
    return res;
}

/* The op's result under the filter must be WANT. The control (no filter)
 * is run too; when it gives WANT as well, a note says that this machine
 * cannot tell the filter's refusal from the kernel's. */
static void expect(enum filter_mode mode, int (*op)(void), int want, const char *what)
{
    int got = run_op(mode, op);
    int control = run_op(NO_FILTER, op);

    if (got != want)
        fail_msg("%s: got %d (%s), want %d (%s)", what, got, strerror(got), want, strerror(want));
    if (control == want)
        print_message("note: %s: fails with %s even without the filter here\n", what,
                      strerror(control));
}

static int errno_of(long r)
{
    return r < 0 ? errno : 0;
}

/* ------------------------------------------------------------------------ */
/* Native operations                                                         */

static int op_socket_unix(void)
{
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    int e = errno_of(fd);
    if (fd >= 0)
        close(fd);
    return e;
}

static int op_socket_unix_dgram(void)
{
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    int e = errno_of(fd);
    if (fd >= 0)
        close(fd);
    return e;
}

static int op_socket_inet(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int e = errno_of(fd);
    if (fd >= 0)
        close(fd);
    return e;
}

static int op_socket_inet6(void)
{
    int fd = socket(AF_INET6, SOCK_DGRAM, 0);
    int e = errno_of(fd);
    if (fd >= 0)
        close(fd);
    /* no IPv6 in this kernel: not the filter's business */
    return e == EAFNOSUPPORT ? 0 : e;
}

/* The kernel takes the domain as an int: 0x100000001 is AF_UNIX. */
static int op_socket_unix_hibits(void)
{
    long fd = syscall(SYS_socket, 0x100000001L, (long)SOCK_STREAM, 0L);
    int e = errno_of(fd);
    if (fd >= 0)
        close((int)fd);
    return e;
}

/* socketpair(DOMAIN, TYPE) through syscall(), so that the arguments may
 * carry high bits; 0 or the errno */
static int pair_errno(long domain, long type)
{
    int sv[2];
    long r = syscall(SYS_socketpair, domain, type, 0L, sv);
    int e = errno_of(r);
    if (r == 0) {
        close(sv[0]);
        close(sv[1]);
    }
    return e;
}

static int op_socketpair(void)
{
    return pair_errno(AF_UNIX, SOCK_STREAM);
}
static int op_socketpair_flags(void)
{
    return pair_errno(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC);
}
static int op_socketpair_seqpacket(void)
{
    return pair_errno(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC);
}
/* issue 21: a datagram pair may sendto() any path (or abstract name) */
static int op_socketpair_dgram(void)
{
    return pair_errno(AF_UNIX, SOCK_DGRAM);
}
static int op_socketpair_dgram_flags(void)
{
    return pair_errno(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC);
}
/* the kernel makes SOCK_RAW a datagram pair for AF_UNIX */
static int op_socketpair_raw(void)
{
    return pair_errno(AF_UNIX, SOCK_RAW);
}
/* the kernel takes domain and type as ints: these are AF_UNIX, SOCK_DGRAM */
static int op_socketpair_dgram_hibits(void)
{
    return pair_errno(0x100000001L, 0x100000000L | SOCK_DGRAM);
}
static int op_socketpair_dgram_type_hibits(void)
{
    return pair_errno(AF_UNIX, (long)0xffffffff00000000UL | SOCK_DGRAM | SOCK_CLOEXEC);
}
static int op_socketpair_local(void)
{
    return pair_errno(AF_LOCAL, SOCK_DGRAM);
}
#ifndef AF_TIPC
#define AF_TIPC 30
#endif
static int op_socketpair_tipc(void)
{
    return pair_errno(AF_TIPC, SOCK_SEQPACKET);
}
static int op_socketpair_inet(void)
{
    return pair_errno(AF_INET, SOCK_STREAM);
}

static int op_io_uring_setup(void)
{
    unsigned char params[512]; /* struct io_uring_params, zeroed */
    long fd;
    int e;

    memset(params, 0, sizeof params);
    fd = syscall(SYS_io_uring_setup, 1L, params);
    e = errno_of(fd);
    if (fd >= 0)
        close((int)fd);
    return e;
}

static int op_io_uring_enter(void)
{
    return errno_of(syscall(SYS_io_uring_enter, -1L, 0L, 0L, 0L, NULL, 0L)); /* else EBADF */
}

static int op_io_uring_register(void)
{
    return errno_of(syscall(SYS_io_uring_register, -1L, 0L, NULL, 0L)); /* else EBADF */
}

static int op_unshare_user(void)
{
    return errno_of(unshare(CLONE_NEWUSER));
}

static int op_unshare_user_mnt(void)
{
    return errno_of(unshare(CLONE_NEWUSER | CLONE_NEWNS));
}

/* bind() of a TCP socket to 127.0.0.1 port 0, then listen() */
static int op_bind_inet(void)
{
    struct sockaddr_in a;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), e;

    if (fd < 0)
        return errno;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    e = errno_of(bind(fd, (struct sockaddr *)&a, sizeof a));
    close(fd);
    return e;
}

/* bind(AF_INET) with a 64-bit length whose low half is 16: the filter
 * compares all 64 bits, the kernel uses the low 32 */
static int op_bind_inet_hibits(void)
{
    struct sockaddr_in a;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), e;

    if (fd < 0)
        return errno;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    e = errno_of((int)syscall(SYS_bind, fd, &a, 0xffffffff00000000UL | sizeof a));
    close(fd);
    return e;
}

/* bind(AF_NETLINK, NETLINK_ROUTE), as glibc's getifaddrs and
 * getaddrinfo(AI_ADDRCONFIG) do */
static int op_bind_netlink(void)
{
    struct sockaddr_nl a;
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE), e;

    if (fd < 0)
        return errno;
    memset(&a, 0, sizeof a);
    a.nl_family = AF_NETLINK;
    e = errno_of(bind(fd, (struct sockaddr *)&a, sizeof a));
    close(fd);
    return e;
}

/* getifaddrs() itself: netlink socket, bind, request, answer */
static int op_getifaddrs(void)
{
    struct ifaddrs *ifa = NULL;

    if (getifaddrs(&ifa) < 0)
        return errno;
    freeifaddrs(ifa);
    return 0;
}

/* listen() on an unbound TCP socket (the kernel binds it to a port) */
static int op_listen_unbound(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), e;

    if (fd < 0)
        return errno;
    e = errno_of(listen(fd, 1));
    close(fd);
    return e;
}

static int op_unshare_mnt(void)
{
    return errno_of(unshare(CLONE_NEWNS));
}

/* clone(2) as fork (no new stack); a child that appears exits at once. */
static int raw_clone(unsigned long flags)
{
    long r = syscall(SYS_clone, flags, 0L, 0L, 0L, 0L);
    int e = errno_of(r);

    if (r == 0)
        _exit(0);
    if (r > 0)
        waitpid((pid_t)r, NULL, 0);
    return e;
}

static int op_clone_user(void)
{
    return raw_clone((unsigned long)CLONE_NEWUSER | (unsigned long)SIGCHLD);
}

/* The kernel uses the low 32 bits of clone's flags. */
static int op_clone_user_hibits(void)
{
    return raw_clone(0xffffffff00000000UL | (unsigned long)CLONE_NEWUSER | (unsigned long)SIGCHLD);
}

static int op_clone_plain(void)
{
    return raw_clone((unsigned long)SIGCHLD);
}

static int op_fork(void)
{
    pid_t pid = fork();
    int st = 0;

    if (pid == 0)
        _exit(3);
    if (pid < 0)
        return errno;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 3)
        return ECHILD;
    return 0;
}

/* Size 0 is invalid: without the filter the kernel says EINVAL and never
 * creates a process. */
static int op_clone3(void)
{
    uint64_t args[11];

    memset(args, 0, sizeof args);
    return errno_of(syscall(SYS_clone3, args, 0L));
}

/* /dev/null, never a terminal: without the filter TIOCSTI is ENOTTY, and a
 * broken filter cannot inject anything into the user's terminal. */
static int ioctl_on_null(unsigned long req)
{
    char c = 'x';
    int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    int e;

    if (fd < 0)
        return errno;
    e = errno_of(syscall(SYS_ioctl, (long)fd, req, &c));
    close(fd);
    return e;
}

static int op_tiocsti(void)
{
    return ioctl_on_null(TIOCSTI);
}

static int op_tiocsti_hibits(void)
{
    return ioctl_on_null(0xffffffff00000000UL | TIOCSTI);
}

static int op_tioclinux(void)
{
    return ioctl_on_null(TIOCLINUX);
}

static int op_fionread(void)
{
    int p[2], n = -1, e;

    if (pipe(p) < 0)
        return errno;
    e = errno_of(ioctl(p[0], FIONREAD, &n));
    close(p[0]);
    close(p[1]);
    return e == 0 && n != 0 ? EINVAL : e;
}

/* ------------------------------------------------------------------------ */
/* rt-3 hole 6: set-user-ID and set-group-ID modes                           */

#ifndef SYS_fchmodat2
#define SYS_fchmodat2 452
#endif
#ifndef SYS_openat2
#define SYS_openat2 437
#endif
#ifndef O_TMPFILE
#define O_TMPFILE (020000000 | O_DIRECTORY)
#endif
/* i386 numbers */
#define I386_OPEN 5
#define I386_CREAT 8
#define I386_MKNOD 14
#define I386_CHMOD 15
#define I386_FCHMOD 94
#define I386_OPENAT 295
#define I386_MKNODAT 297
#define I386_FCHMODAT 306
#define I386_FCHMODAT2 452
#define I386_OPENAT2 437
/* x32 numbers (without the bit) */
#define X32_CHMOD 90
#define X32_OPEN 2

/* A directory of the test's own, made before the children fork. */
static char mode_dir[64];

static void mode_dir_make(void)
{
    if (mode_dir[0] == '\0') {
        snprintf(mode_dir, sizeof mode_dir, "/tmp/sluice-test-mode-XXXXXX");
        assert_non_null(mkdtemp(mode_dir));
        assert_int_equal(chmod(mode_dir, 0755), 0);
    }
}

/* DIR/NAME; and a plain 0755 file there, made without any special bit. */
static const char *mode_path(const char *name)
{
    static char p[128];

    snprintf(p, sizeof p, "%s/%s", mode_dir, name);
    return p;
}

static int mode_plain_file(const char *name)
{
    const char *p = mode_path(name);
    int fd;

    (void)unlink(p);
    fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
    if (fd < 0)
        return -1;
    close(fd);
    return 0;
}

/* The parent makes the plain file DIR/c the chmod ops change, before each
 * child: under the write report's rules with no listener (WATCH_WRITES) the
 * child could not make it (open(O_CREAT) is notified: ENOSYS). */
static void mode_prep(void)
{
    assert_int_equal(mode_plain_file("c"), 0);
}

static int run_op_prep(enum filter_mode mode, int (*op)(void))
{
    mode_prep();
    return run_op(mode, op);
}

/* After an op: did the file end up with a special bit? (EEXIST then, so
 * that a filter that let it through can never pass as refusing.) */
static int mode_result(const char *name, int e)
{
    struct stat st;
    const char *p = mode_path(name);

    if (e == 0 && lstat(p, &st) == 0 && (st.st_mode & (S_ISUID | S_ISGID)) == 0)
        e = EEXIST; /* the call "worked" and left no bit: say so */
    (void)unlink(p);
    (void)rmdir(p);
    return e;
}

static int chmod_to(mode_t m)
{
    return mode_result("c", errno_of(chmod(mode_path("c"), m)));
}

static int op_chmod_suid(void)
{
    return chmod_to(04755);
}
static int op_chmod_sgid(void)
{
    return chmod_to(02755);
}

static int op_chmod_plain(void)
{
    int e = errno_of(chmod(mode_path("c"), 0700));
    (void)unlink(mode_path("c"));
    return e;
}

/* a mode with bits above 07777 set too (the kernel keeps the low 12) */
static int op_chmod_suid_hibits(void)
{
    return mode_result("c", errno_of(syscall(SYS_chmod, mode_path("c"), 0xffff0000UL | 04755UL)));
}

static int op_fchmod_suid(void)
{
    int fd, e;

    fd = open(mode_path("c"), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno;
    e = errno_of(fchmod(fd, 04755));
    close(fd);
    return mode_result("c", e);
}

static int op_fchmodat_sgid(void)
{
    return mode_result("c", errno_of(syscall(SYS_fchmodat, AT_FDCWD, mode_path("c"), 02755)));
}

/* fchmodat2 (Linux 6.6): ENOSYS without the filter on older kernels */
static int op_fchmodat2_suid(void)
{
    return mode_result("c", errno_of(syscall(SYS_fchmodat2, AT_FDCWD, mode_path("c"), 04755, 0)));
}

static int op_creat_suid(void)
{
    int fd;

    (void)unlink(mode_path("n"));
    fd = (int)syscall(SYS_creat, mode_path("n"), 04755);
    if (fd >= 0)
        close(fd);
    return mode_result("n", errno_of(fd));
}

static int open_new(int flags, mode_t m)
{
    int fd;

    (void)unlink(mode_path("n"));
    fd = (int)syscall(SYS_open, mode_path("n"), flags | O_CLOEXEC, m);
    if (fd >= 0)
        close(fd);
    return mode_result("n", errno_of(fd));
}

static int op_open_creat_suid(void)
{
    return open_new(O_WRONLY | O_CREAT, 04755);
}
static int op_open_creat_sgid(void)
{
    return open_new(O_RDWR | O_CREAT | O_EXCL, 02755);
}

static int op_open_creat_plain(void)
{
    int e = open_new(O_WRONLY | O_CREAT, 0644);
    return e == EEXIST ? 0 : e; /* made without a bit, as asked */
}

static int op_openat_creat_suid(void)
{
    int fd;

    (void)unlink(mode_path("n"));
    fd = openat(AT_FDCWD, mode_path("n"), O_WRONLY | O_CREAT | O_CLOEXEC, 06755);
    if (fd >= 0)
        close(fd);
    return mode_result("n", errno_of(fd));
}

/* without O_CREAT the mode argument is not read: garbage there is fine */
static int op_open_existing_garbage_mode(void)
{
    int fd, e;

    fd = (int)syscall(SYS_openat, AT_FDCWD, mode_path("c"), O_WRONLY | O_CLOEXEC, 06755);
    e = errno_of(fd);
    if (fd >= 0)
        close(fd);
    (void)unlink(mode_path("c"));
    return e;
}

/* O_TMPFILE with a set-user-ID mode, then linked into the directory:
 * EOPNOTSUPP without the filter where the file system lacks O_TMPFILE */
static int op_open_tmpfile_suid(void)
{
    char proc[64];
    int fd, e;

    (void)unlink(mode_path("n"));
    fd = (int)syscall(SYS_open, mode_dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 04755);
    if (fd < 0)
        return errno;
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    e = errno_of(linkat(AT_FDCWD, proc, AT_FDCWD, mode_path("n"), AT_SYMLINK_FOLLOW));
    close(fd);
    return mode_result("n", e);
}

static int op_mknod_suid(void)
{
    (void)unlink(mode_path("n"));
    return mode_result("n", errno_of(syscall(SYS_mknod, mode_path("n"), S_IFREG | 04755, 0)));
}

static int op_mknodat_sgid(void)
{
    (void)unlink(mode_path("n"));
    return mode_result("n", errno_of(mknodat(AT_FDCWD, mode_path("n"), S_IFREG | 02755, 0)));
}

/* mkdir keeps any mode: S_ISGID on a directory is group inheritance */
static int op_mkdir_sgid(void)
{
    (void)rmdir(mode_path("d"));
    int e = errno_of(mkdir(mode_path("d"), 02775));
    (void)rmdir(mode_path("d"));
    return e;
}

/* struct open_how { u64 flags, mode, resolve; } with a set-user-ID mode */
static int op_openat2_suid(void)
{
    uint64_t how[3] = {O_WRONLY | O_CREAT | O_CLOEXEC, 04755, 0};
    int fd;

    (void)unlink(mode_path("n"));
    fd = (int)syscall(SYS_openat2, AT_FDCWD, mode_path("n"), how, sizeof how);
    if (fd >= 0)
        close(fd);
    return mode_result("n", errno_of(fd));
}

static int op_x32_chmod_suid(void)
{
    return mode_result("c",
                       errno_of(syscall(__X32_SYSCALL_BIT | X32_CHMOD, mode_path("c"), 04755)));
}

static int op_x32_open_creat_suid(void)
{
    long fd;

    (void)unlink(mode_path("n"));
    fd = syscall(__X32_SYSCALL_BIT | X32_OPEN, mode_path("n"), O_WRONLY | O_CREAT | O_CLOEXEC,
                 04755);
    if (fd >= 0)
        close((int)fd);
    return mode_result("n", errno_of(fd));
}

/* ------------------------------------------------------------------------ */
/* x32 operations                                                            */

static int op_x32_socket_unix(void)
{
    long fd = syscall(__X32_SYSCALL_BIT | X32_SOCKET, (long)AF_UNIX, (long)SOCK_STREAM, 0L);
    int e = errno_of(fd);
    if (fd >= 0)
        close((int)fd);
    return e;
}

static int op_x32_socketpair_dgram(void)
{
    int sv[2];
    long r = syscall(__X32_SYSCALL_BIT | X32_SOCKETPAIR, (long)AF_UNIX, (long)SOCK_DGRAM, 0L, sv);
    int e = errno_of(r);
    if (r == 0) {
        close(sv[0]);
        close(sv[1]);
    }
    return e;
}

static int op_x32_tiocsti(void)
{
    char c = 'x';
    int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    int e;

    if (fd < 0)
        return errno;
    e = errno_of(syscall(__X32_SYSCALL_BIT | X32_IOCTL, (long)fd, (long)TIOCSTI, &c));
    close(fd);
    return e;
}

/* ------------------------------------------------------------------------ */
/* i386 operations (int $0x80)                                               */

#if defined(__x86_64__)
#define HAVE_I386 1

static long i386_call(long nr, long a, long b, long c)
{
    long ret = nr;

    /* The i386 entry takes ebx, ecx, edx and returns in eax; in a 64-bit
     * process it may clobber r8-r11. */
    __asm__ volatile("int $0x80"
                     : "+a"(ret)
                     : "b"(a), "c"(b), "d"(c)
                     : "memory", "r8", "r9", "r10", "r11");
    return (long)(int)ret;
}

/* The same with a fourth argument (esi). */
static long i386_call4(long nr, long a, long b, long c, long d)
{
    long ret = nr;

    __asm__ volatile("int $0x80"
                     : "+a"(ret)
                     : "b"(a), "c"(b), "d"(c), "S"(d)
                     : "memory", "r8", "r9", "r10", "r11");
    return (long)(int)ret;
}

/* 0 or the errno from an i386 syscall's return value. */
static int i386_errno(long r)
{
    return (r < 0 && r > -4096) ? (int)-r : 0;
}

/* A page below 4 GiB for the arguments i386 syscalls read through pointers. */
static uint32_t *low_page(void)
{
    void *p =
        mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
    if (p == MAP_FAILED || (uintptr_t)p > 0xffffffffu - 4096)
        return NULL;
    return p;
}

static int op_i386_getpid(void)
{
    long r = i386_call(I386_GETPID, 0, 0, 0);
    if (r < 0)
        return i386_errno(r);
    return r == (long)getpid() ? 0 : EINVAL;
}

static int i386_socketcall_socket(int domain)
{
    uint32_t *args = low_page();
    long r;
    int e;

    if (args == NULL)
        return ENOMEM;
    args[0] = (uint32_t)domain;
    args[1] = (uint32_t)SOCK_STREAM;
    args[2] = 0;
    r = i386_call(I386_SOCKETCALL, 1 /* SYS_SOCKET */, (long)(uintptr_t)args, 0);
    e = i386_errno(r);
    if (e == 0)
        close((int)r);
    munmap(args, 4096);
    return e;
}

static int op_i386_socketcall_unix(void)
{
    return i386_socketcall_socket(AF_UNIX);
}

static int op_i386_socketcall_inet(void)
{
    return i386_socketcall_socket(AF_INET);
}

static int i386_socket(int domain)
{
    long r = i386_call(I386_SOCKET, domain, SOCK_STREAM, 0);
    int e = i386_errno(r);
    if (e == 0)
        close((int)r);
    return e;
}

static int op_i386_socket_unix(void)
{
    return i386_socket(AF_UNIX);
}

static int op_i386_socket_inet(void)
{
    return i386_socket(AF_INET);
}

/* i386 socketpair(AF_UNIX, TYPE), directly or through socketcall */
static int i386_socketpair(int type, int via_socketcall)
{
    uint32_t *page = low_page();
    long r;
    int e;

    if (page == NULL)
        return ENOMEM;
    if (via_socketcall) {
        page[0] = AF_UNIX;
        page[1] = (uint32_t)type;
        page[2] = 0;
        page[3] = (uint32_t)(uintptr_t)(page + 8); /* int sv[2] */
        r = i386_call(I386_SOCKETCALL, 8 /* SYS_SOCKETPAIR */, (long)(uintptr_t)page, 0);
    } else {
        r = i386_call4(I386_SOCKETPAIR, AF_UNIX, type, 0, (long)(uintptr_t)(page + 8));
    }
    e = i386_errno(r);
    if (e == 0) {
        close((int)page[8]);
        close((int)page[9]);
    }
    munmap(page, 4096);
    return e;
}

static int op_i386_socketcall_pair_dgram(void)
{
    return i386_socketpair(SOCK_DGRAM, 1);
}

static int op_i386_socketcall_pair_stream(void)
{
    return i386_socketpair(SOCK_STREAM, 1);
}

static int op_i386_pair_dgram(void)
{
    return i386_socketpair(SOCK_DGRAM, 0);
}

static int op_i386_pair_raw(void)
{
    return i386_socketpair(SOCK_RAW | SOCK_CLOEXEC, 0);
}

static int op_i386_pair_stream(void)
{
    return i386_socketpair(SOCK_STREAM | SOCK_NONBLOCK, 0);
}

static int op_i386_pair_seqpacket(void)
{
    return i386_socketpair(SOCK_SEQPACKET, 0);
}

static int op_i386_tiocsti(void)
{
    uint32_t *c = low_page();
    int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    int e;

    if (c == NULL || fd < 0)
        return ENOMEM;
    c[0] = 'x';
    e = i386_errno(i386_call(I386_IOCTL, fd, TIOCSTI, (long)(uintptr_t)c));
    close(fd);
    munmap(c, 4096);
    return e;
}

static int op_i386_unshare_user(void)
{
    return i386_errno(i386_call(I386_UNSHARE, CLONE_NEWUSER, 0, 0));
}

static int op_i386_clone3(void)
{
    uint32_t *args = low_page();
    int e;

    if (args == NULL)
        return ENOMEM;
    e = i386_errno(i386_call(I386_CLONE3, (long)(uintptr_t)args, 0 /* size: EINVAL */, 0));
    munmap(args, 4096);
    return e;
}

/* rt-3 hole 6 on the i386 ABI: NR on DIR/NAME (copied below 4 GiB) with
 * up to two more arguments; HOW says how the path is passed (DIR/c is made
 * by the parent first when PLAIN_FIRST). */
enum i386_mode_how { I386_PATH_FIRST, I386_AT_CWD, I386_BY_FD };

static int i386_mode_op(long nr, enum i386_mode_how how, const char *name, int plain_first, long b,
                        long c)
{
    char *page = (char *)low_page();
    long r;
    int fd = -1;

    if (page == NULL)
        return ENOMEM;
    if (!plain_first)
        (void)unlink(mode_path(name));
    snprintf(page, 4096, "%s", mode_path(name));
    switch (how) {
    case I386_PATH_FIRST:
        r = i386_call(nr, (long)(uintptr_t)page, b, c);
        break;
    case I386_AT_CWD:
        r = i386_call4(nr, AT_FDCWD, (long)(uintptr_t)page, b, c);
        break;
    default:
        fd = open(page, O_RDONLY | O_CLOEXEC);
        r = fd < 0 ? -errno : i386_call(nr, fd, b, 0);
        break;
    }
    if (r >= 0 && nr != I386_CHMOD && nr != I386_FCHMOD && nr != I386_FCHMODAT &&
        nr != I386_FCHMODAT2 && nr != I386_MKNOD && nr != I386_MKNODAT)
        close((int)r); /* a descriptor */
    if (fd >= 0)
        close(fd);
    munmap(page, 4096);
    return mode_result(name, i386_errno(r));
}

static int op_i386_chmod_suid(void)
{
    return i386_mode_op(I386_CHMOD, I386_PATH_FIRST, "c", 1, 04755, 0);
}
static int op_i386_chmod_sgid(void)
{
    return i386_mode_op(I386_CHMOD, I386_PATH_FIRST, "c", 1, 02755, 0);
}
static int op_i386_fchmod_suid(void)
{
    return i386_mode_op(I386_FCHMOD, I386_BY_FD, "c", 1, 04755, 0);
}
static int op_i386_fchmodat_suid(void)
{
    return i386_mode_op(I386_FCHMODAT, I386_AT_CWD, "c", 1, 04755, 0);
}
static int op_i386_fchmodat2_sgid(void)
{
    return i386_mode_op(I386_FCHMODAT2, I386_AT_CWD, "c", 1, 02755, 0);
}
static int op_i386_creat_suid(void)
{
    return i386_mode_op(I386_CREAT, I386_PATH_FIRST, "n", 0, 04755, 0);
}
static int op_i386_open_creat_suid(void)
{
    return i386_mode_op(I386_OPEN, I386_PATH_FIRST, "n", 0, O_WRONLY | O_CREAT | O_CLOEXEC, 04755);
}
static int op_i386_openat_creat_sgid(void)
{
    return i386_mode_op(I386_OPENAT, I386_AT_CWD, "n", 0, O_WRONLY | O_CREAT | O_CLOEXEC, 02755);
}
static int op_i386_mknod_suid(void)
{
    return i386_mode_op(I386_MKNOD, I386_PATH_FIRST, "n", 0, S_IFREG | 04755, 0);
}
static int op_i386_mknodat_suid(void)
{
    return i386_mode_op(I386_MKNODAT, I386_AT_CWD, "n", 0, S_IFREG | 04755, 0);
}
static int op_i386_chmod_plain(void)
{
    int e = i386_mode_op(I386_CHMOD, I386_PATH_FIRST, "c", 1, 0700, 0);
    return e == EEXIST ? 0 : e;
}
static int op_i386_openat2(void)
{
    uint32_t *how = low_page();
    int e;

    if (how == NULL)
        return ENOMEM;
    snprintf((char *)(how + 256), 1024, "%s", mode_path("n"));
    (void)unlink(mode_path("n"));
    how[0] = O_WRONLY | O_CREAT | O_CLOEXEC; /* u64 flags, mode, resolve */
    how[2] = 04755;
    e = i386_errno(
        i386_call4(I386_OPENAT2, AT_FDCWD, (long)(uintptr_t)(how + 256), (long)(uintptr_t)how, 24));
    munmap(how, 4096);
    return mode_result("n", e);
}

/* 1 when int $0x80 works here (kernel with IA32 emulation), probed once in
 * a child without the filter. */
static int have_ia32(void)
{
    static int known = -1;

    if (known < 0) {
        /* not run_op: a kernel without IA32 emulation (or booted with
         * ia32_emulation=0) answers int $0x80 with SIGSEGV, which here means
         * "skip", not "fail" */
        int status = 0;
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            child_init(); /* cmocka's SIGSEGV handler would go on with the tests */
            _exit(op_i386_getpid() == 0 ? 0 : 1);
        }
        assert_int_equal(waitpid(pid, &status, 0), pid);
        known = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        if (!known)
            print_message("note: no IA32 emulation here (i386 getpid: %s %d)\n",
                          WIFSIGNALED(status) ? "signal" : "exit",
                          WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    }
    return known;
}
#else
#define HAVE_I386 0
#endif

#define SKIP_WITHOUT_IA32()                                                                        \
    do {                                                                                           \
        if (!HAVE_I386 || !have_ia32()) {                                                          \
            print_message("skipped: the kernel runs no i386 programs\n");                          \
            skip();                                                                                \
        }                                                                                          \
    } while (0)

/* ------------------------------------------------------------------------ */
/* Filter tests                                                              */

static void test_socket_unix_refused(void **state)
{
    (void)state;
    expect(REFUSE_UNIX, op_socket_unix, EPERM, "socket(AF_UNIX, SOCK_STREAM)");
    expect(REFUSE_UNIX, op_socket_unix_dgram, EPERM, "socket(AF_UNIX, SOCK_DGRAM|SOCK_CLOEXEC)");
}

static void test_socket_inet_allowed(void **state)
{
    (void)state;
    assert_int_equal(run_op(REFUSE_UNIX, op_socket_inet), 0);
    assert_int_equal(run_op(REFUSE_UNIX, op_socket_inet6), 0);
}

static void test_socket_unix_hibits_refused(void **state)
{
    (void)state;
    /* The control shows that the kernel does make an AF_UNIX socket. */
    assert_int_equal(run_op(NO_FILTER, op_socket_unix_hibits), 0);
    expect(REFUSE_UNIX, op_socket_unix_hibits, EPERM, "socket(0x100000001)");
}

static void test_socket_unix_allowed(void **state)
{
    (void)state;
    assert_int_equal(run_op(ALLOW_UNIX, op_socket_unix), 0);
    /* issue 14: a domain with high bits set is refused whatever its low
     * half (the family allow-list compares all 64 bits) */
    expect(ALLOW_UNIX, op_socket_unix_hibits, EPERM, "socket(0x100000001) (unix allowed)");
    assert_int_equal(run_op(ALLOW_UNIX, op_socket_inet), 0);
}

/* issue 14: the socket-family allow-list and the keyring syscalls */
static int sock_errno(long family, long type, long proto)
{
    long fd = syscall(SYS_socket, family, type, proto);
    int e = errno_of(fd);
    if (fd >= 0)
        close((int)fd);
    return e;
}
static int op_socket_vsock(void)
{
    return sock_errno(40, SOCK_STREAM, 0);
}
static int op_socket_packet(void)
{
    return sock_errno(17, SOCK_DGRAM, 0);
}
static int op_socket_bluetooth(void)
{
    return sock_errno(31, SOCK_STREAM, 0);
}
static int op_socket_alg(void)
{
    return sock_errno(38, SOCK_SEQPACKET, 0);
}
static int op_socket_key(void)
{
    return sock_errno(15, SOCK_RAW, 2);
}
static int op_socket_above_max(void)
{
    return sock_errno(64, SOCK_STREAM, 0);
}
static int op_socket_int_max(void)
{
    return sock_errno(0x7fffffffL, SOCK_STREAM, 0);
}
static int op_socket_family0(void)
{
    return sock_errno(0, SOCK_STREAM, 0);
}
static int op_netlink_route(void)
{
    return sock_errno(16, SOCK_RAW, 0);
}
static int op_netlink_audit(void)
{
    return sock_errno(16, SOCK_RAW, 9);
}
static int op_netlink_uevent(void)
{
    return sock_errno(16, SOCK_DGRAM, 15);
}
static int op_netlink_hibits(void)
{
    return sock_errno(16, SOCK_RAW, 0x100000000L);
}
static int op_keyctl(void)
{
    return errno_of(syscall(SYS_keyctl, 0L /* GET_KEYRING_ID */, -3L, 0L));
}
static int op_add_key(void)
{
    return errno_of(syscall(SYS_add_key, "user", "sluice-test", "x", 1L, -3L /* @s */));
}
static int op_request_key(void)
{
    return errno_of(syscall(SYS_request_key, "user", "sluice-test", NULL, 0L));
}

static void test_socket_families(void **state)
{
    (void)state;
    for (int allow = 0; allow < 2; allow++) {
        int f = allow ? ALLOW_UNIX : REFUSE_UNIX;
        expect(f, op_socket_vsock, EPERM, "socket(AF_VSOCK)");
        expect(f, op_socket_packet, EPERM, "socket(AF_PACKET)");
        expect(f, op_socket_bluetooth, EPERM, "socket(AF_BLUETOOTH)");
        expect(f, op_socket_alg, EPERM, "socket(AF_ALG)");
        expect(f, op_socket_key, EPERM, "socket(AF_KEY)");
        expect(f, op_socket_above_max, EPERM, "socket(64)");
        expect(f, op_socket_int_max, EPERM, "socket(INT_MAX)");
        expect(f, op_socket_family0, EPERM, "socket(AF_UNSPEC)");
        expect(f, op_netlink_audit, EPERM, "socket(AF_NETLINK, NETLINK_AUDIT)");
        expect(f, op_netlink_uevent, EPERM, "socket(AF_NETLINK, NETLINK_KOBJECT_UEVENT)");
        expect(f, op_netlink_hibits, EPERM, "socket(AF_NETLINK, 0x100000000)");
        assert_int_equal(run_op(f, op_netlink_route), 0);
        assert_int_equal(run_op(f, op_socket_inet), 0);
        assert_int_equal(run_op(f, op_socket_inet6), 0);
    }
}

static void test_keyrings(void **state)
{
    (void)state;
    expect(REFUSE_UNIX, op_keyctl, ENOSYS, "keyctl");
    expect(REFUSE_UNIX, op_add_key, ENOSYS, "add_key");
    expect(REFUSE_UNIX, op_request_key, ENOSYS, "request_key");
    expect(ALLOW_UNIX, op_keyctl, ENOSYS, "keyctl (unix allowed)");
}

/* Stream and seqpacket pairs stay allowed: shells, make, libuv (a child's
 * stdio), Python's socket.socketpair() and Chromium's IPC make them, and
 * neither can be re-aimed (a test below tries every route). */
static void test_socketpair_stream_allowed(void **state)
{
    (void)state;
    for (int allow = 0; allow < 2; allow++) {
        int f = allow ? ALLOW_UNIX : REFUSE_UNIX;
        assert_int_equal(run_op(f, op_socketpair), 0);
        assert_int_equal(run_op(f, op_socketpair_flags), 0);
        assert_int_equal(run_op(f, op_socketpair_seqpacket), 0);
    }
}

/* issue 21: socketpair(AF_UNIX, SOCK_DGRAM) then sendto(PATH) reached any
 * host datagram socket (journald, /dev/log, a daemon's control socket).
 * Datagram pairs are refused unless allowAllUnixSockets, whatever the
 * flags and the high bits of the arguments. */
static void test_socketpair_dgram_refused(void **state)
{
    (void)state;
    /* the controls: the kernel makes every one of these pairs */
    assert_int_equal(run_op(NO_FILTER, op_socketpair_dgram), 0);
    assert_int_equal(run_op(NO_FILTER, op_socketpair_raw), 0);
    assert_int_equal(run_op(NO_FILTER, op_socketpair_dgram_hibits), 0);
    assert_int_equal(run_op(NO_FILTER, op_socketpair_dgram_type_hibits), 0);
    expect(REFUSE_UNIX, op_socketpair_dgram, EPERM, "socketpair(AF_UNIX, SOCK_DGRAM)");
    expect(REFUSE_UNIX, op_socketpair_dgram_flags, EPERM,
           "socketpair(AF_UNIX, SOCK_DGRAM|SOCK_NONBLOCK|SOCK_CLOEXEC)");
    expect(REFUSE_UNIX, op_socketpair_raw, EPERM, "socketpair(AF_UNIX, SOCK_RAW)");
    expect(REFUSE_UNIX, op_socketpair_dgram_hibits, EPERM, "socketpair(0x100000001, 0x100000002)");
    expect(REFUSE_UNIX, op_socketpair_dgram_type_hibits, EPERM,
           "socketpair(AF_UNIX, 0xffffffff00080002)");
    expect(REFUSE_UNIX, op_socketpair_local, EPERM, "socketpair(AF_LOCAL, SOCK_DGRAM)");
    /* allowAllUnixSockets lifts it, with the socket(AF_UNIX) refusal */
    assert_int_equal(run_op(ALLOW_UNIX, op_socketpair_dgram), 0);
    assert_int_equal(run_op(ALLOW_UNIX, op_socketpair_raw), 0);
    /* allowLocalBinding does not */
    expect(ALLOW_BIND, op_socketpair_dgram, EPERM,
           "socketpair(AF_UNIX, SOCK_DGRAM) (bind allowed)");
}

/* socketpair() of a family other than AF_UNIX is refused in every mode:
 * the socket() family allow-list does not see pairs (AF_TIPC makes them) */
static void test_socketpair_other_family_refused(void **state)
{
    (void)state;
    for (int allow = 0; allow < 2; allow++) {
        int f = allow ? ALLOW_UNIX : REFUSE_UNIX;
        expect(f, op_socketpair_tipc, EPERM, "socketpair(AF_TIPC, SOCK_SEQPACKET)");
        expect(f, op_socketpair_inet, EPERM, "socketpair(AF_INET, SOCK_STREAM)");
    }
}

/* The host's sockets for test_socketpair_routes: a datagram socket, a
 * stream and a seqpacket listener bound to paths in a directory of their
 * own (the child names them relative to it), and an abstract datagram
 * socket. All non-blocking. */
static struct {
    char dir[64];
    char abs_name[48];
    int dgram, stream, seqpacket, abs_dgram;
} g_host = {.dgram = -1, .stream = -1, .seqpacket = -1, .abs_dgram = -1};

static socklen_t unix_addr(struct sockaddr_un *sa, const char *name, int abstract)
{
    size_t n = strlen(name);

    memset(sa, 0, sizeof *sa);
    sa->sun_family = AF_UNIX;
    assert_true(n + 2 < sizeof sa->sun_path);
    memcpy(sa->sun_path + (abstract ? 1 : 0), name, n);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + (size_t)(abstract ? 1 : 0) + n +
                       (size_t)(abstract ? 0 : 1));
}

static int host_socket(int type, const char *name, int abstract)
{
    struct sockaddr_un sa;
    socklen_t len;
    int fd = socket(AF_UNIX, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    char path[128];

    assert_true(fd >= 0);
    if (abstract) {
        len = unix_addr(&sa, name, 1);
    } else {
        assert_true((size_t)snprintf(path, sizeof path, "%s/%s", g_host.dir, name) < sizeof path);
        len = unix_addr(&sa, path, 0);
    }
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, len), 0);
    if (type != SOCK_DGRAM)
        assert_int_equal(listen(fd, 8), 0);
    return fd;
}

/* How many datagrams and connections the host's sockets got (drained). */
static int host_received(void)
{
    char buf[64];
    int n = 0, fd;

    while (recv(g_host.dgram, buf, sizeof buf, MSG_DONTWAIT) >= 0)
        n++;
    while (recv(g_host.abs_dgram, buf, sizeof buf, MSG_DONTWAIT) >= 0)
        n++;
    while ((fd = accept4(g_host.stream, NULL, NULL, SOCK_CLOEXEC)) >= 0) {
        close(fd);
        n++;
    }
    while ((fd = accept4(g_host.seqpacket, NULL, NULL, SOCK_CLOEXEC)) >= 0) {
        close(fd);
        n++;
    }
    return n;
}

/* Every route from one end of a pair to the host's sockets: sendto() and
 * sendmsg() with a path or an abstract name, connect() (then send()), the
 * same after connect(AF_UNSPEC), and bind() to a short name then listen().
 * Errors are expected and ignored: what counts is what the host got. */
static void pair_routes(int fd)
{
    static const char *const paths[] = {"hd", "hs", "hq"};
    struct sockaddr_un sa;
    struct sockaddr unspec;
    struct msghdr mh;
    struct iovec iov;
    char x = 'x';
    socklen_t len;

    (void)!fcntl(fd, F_SETFL, O_NONBLOCK);
    for (int round = 0; round < 2; round++) {
        for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
            len = unix_addr(&sa, paths[i], 0);
            (void)!sendto(fd, &x, 1, MSG_NOSIGNAL, (struct sockaddr *)&sa, len);
            iov.iov_base = &x;
            iov.iov_len = 1;
            memset(&mh, 0, sizeof mh);
            mh.msg_name = &sa;
            mh.msg_namelen = len;
            mh.msg_iov = &iov;
            mh.msg_iovlen = 1;
            (void)!sendmsg(fd, &mh, MSG_NOSIGNAL);
            if (connect(fd, (struct sockaddr *)&sa, len) == 0)
                (void)!send(fd, &x, 1, MSG_NOSIGNAL);
        }
        len = unix_addr(&sa, g_host.abs_name, 1);
        (void)!sendto(fd, &x, 1, MSG_NOSIGNAL, (struct sockaddr *)&sa, len);
        if (connect(fd, (struct sockaddr *)&sa, len) == 0)
            (void)!send(fd, &x, 1, MSG_NOSIGNAL);
        /* and again, disconnected */
        memset(&unspec, 0, sizeof unspec);
        unspec.sa_family = AF_UNSPEC;
        (void)!connect(fd, &unspec, sizeof unspec);
    }
    len = unix_addr(&sa, "pb", 0);
    if (bind(fd, (struct sockaddr *)&sa, len) == 0)
        (void)!listen(fd, 1);
    (void)!unlink("pb");
}

static int op_pair_routes(void)
{
    static const int types[] = {SOCK_STREAM, SOCK_SEQPACKET, SOCK_DGRAM, SOCK_RAW};
    static const long flags[] = {0, SOCK_NONBLOCK | SOCK_CLOEXEC};
    static const long domains[] = {AF_UNIX, 0x100000001L};
    int made = 0;

    if (chdir(g_host.dir) < 0)
        return errno;
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        for (size_t f = 0; f < sizeof flags / sizeof flags[0]; f++)
            for (size_t d = 0; d < sizeof domains / sizeof domains[0]; d++) {
                int sv[2];
                if (syscall(SYS_socketpair, domains[d], (long)types[t] | flags[f], 0L, sv) < 0)
                    continue;
                made++;
                pair_routes(sv[0]);
                pair_routes(sv[1]);
                close(sv[0]);
                close(sv[1]);
            }
    return made > 0 ? 0 : ENOENT;
}

/* issue 21: with Unix sockets refused, no socketpair of any type reaches a
 * host socket by path or abstract name, by any route. The control (no
 * filter) shows that the routes do reach them when nothing stops it. */
static void test_socketpair_routes(void **state)
{
    const char *tmp = getenv("TMPDIR");
    char path[128];
    int control, got;

    (void)state;
    assert_true((size_t)snprintf(g_host.dir, sizeof g_host.dir, "%s/sluice-sp.XXXXXX",
                                 tmp != NULL && strlen(tmp) < 30 ? tmp : "/tmp") <
                sizeof g_host.dir);
    assert_non_null(mkdtemp(g_host.dir));
    snprintf(g_host.abs_name, sizeof g_host.abs_name, "sluice-test-sp-%ld", (long)getpid());
    g_host.dgram = host_socket(SOCK_DGRAM, "hd", 0);
    g_host.stream = host_socket(SOCK_STREAM, "hs", 0);
    g_host.seqpacket = host_socket(SOCK_SEQPACKET, "hq", 0);
    g_host.abs_dgram = host_socket(SOCK_DGRAM, g_host.abs_name, 1);

    assert_int_equal(run_op(NO_FILTER, op_pair_routes), 0);
    control = host_received();
    print_message("note: without the filter the pairs reached the host's sockets %d times\n",
                  control);
    assert_true(control > 0);
    assert_int_equal(run_op(REFUSE_UNIX, op_pair_routes), 0); /* stream pairs are made */
    got = host_received();
    assert_int_equal(run_op(ALLOW_BIND, op_pair_routes), 0);
    got += host_received();
    if (got != 0)
        fail_msg("under the filter the pairs reached the host's sockets %d times", got);

    close(g_host.dgram);
    close(g_host.stream);
    close(g_host.seqpacket);
    close(g_host.abs_dgram);
    for (size_t i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", g_host.dir, i == 0 ? "hd" : i == 1 ? "hs" : "hq");
        unlink(path);
    }
    snprintf(path, sizeof path, "%s/pb", g_host.dir);
    unlink(path);
    assert_int_equal(rmdir(g_host.dir), 0);
}

static void test_io_uring_refused(void **state)
{
    (void)state;
    expect(REFUSE_UNIX, op_io_uring_setup, EPERM, "io_uring_setup");
    expect(REFUSE_UNIX, op_io_uring_enter, EPERM, "io_uring_enter");
    expect(REFUSE_UNIX, op_io_uring_register, EPERM, "io_uring_register");
    expect(ALLOW_UNIX, op_io_uring_setup, EPERM, "io_uring_setup (unix allowed)");
}

static void test_unshare_user_refused(void **state)
{
    (void)state;
    expect(REFUSE_UNIX, op_unshare_user, EPERM, "unshare(CLONE_NEWUSER)");
    expect(REFUSE_UNIX, op_unshare_user_mnt, EPERM, "unshare(CLONE_NEWUSER|CLONE_NEWNS)");
}

static void test_unshare_mnt_not_refused(void **state)
{
    int control, got;

    (void)state;
    control = run_op(NO_FILTER, op_unshare_mnt);
    got = run_op(REFUSE_UNIX, op_unshare_mnt);
    if (geteuid() != 0 || control != 0) {
        print_message("skipped: unshare(CLONE_NEWNS) fails here without the filter (%s)\n",
                      strerror(control));
        skip();
    }
    assert_int_equal(got, 0);
}

static void test_clone_user_refused(void **state)
{
    (void)state;
    expect(REFUSE_UNIX, op_clone_user, EPERM, "clone(CLONE_NEWUSER)");
    expect(REFUSE_UNIX, op_clone_user_hibits, EPERM, "clone(0xffffffff00000000|CLONE_NEWUSER)");
    /* plain process creation still works, through clone and through libc */
    assert_int_equal(run_op(REFUSE_UNIX, op_clone_plain), 0);
    assert_int_equal(run_op(REFUSE_UNIX, op_fork), 0);
}

/* network.allowLocalBinding: bind() and listen() refused unless it is set */
static void test_bind_listen(void **state)
{
    (void)state;
    assert_int_equal(run_op(NO_FILTER, op_bind_inet), 0);
    assert_int_equal(run_op(NO_FILTER, op_listen_unbound), 0);
    expect(REFUSE_UNIX, op_bind_inet, EPERM, "bind(127.0.0.1:0)");
    expect(REFUSE_UNIX, op_listen_unbound, EPERM, "listen() on an unbound socket");
    expect(ALLOW_UNIX, op_bind_inet, EPERM, "bind(127.0.0.1:0) (unix allowed)");
    expect(REFUSE_UNIX, op_bind_inet_hibits, EPERM, "bind(127.0.0.1:0, high bits in addrlen)");
    /* netlink binds stay possible: glibc's getifaddrs needs them */
    assert_int_equal(run_op(REFUSE_UNIX, op_bind_netlink), 0);
    assert_int_equal(run_op(REFUSE_UNIX, op_getifaddrs), 0);
    assert_int_equal(run_op(ALLOW_BIND, op_bind_inet), 0);
    assert_int_equal(run_op(ALLOW_BIND, op_listen_unbound), 0);
}

/* allowNestedUserNamespaces lifts the CLONE_NEWUSER rules and clone3's ENOSYS */
static void test_user_namespaces_allowed(void **state)
{
    int control;

    (void)state;
    expect(REFUSE_UNIX, op_unshare_user, EPERM, "unshare(CLONE_NEWUSER)");
    assert_int_not_equal(run_op(ALLOW_USERNS, op_clone3), ENOSYS);
    control = run_op(NO_FILTER, op_unshare_user);
    if (control != 0) {
        print_message("skipped: unshare(CLONE_NEWUSER) fails here without the filter (%s)\n",
                      strerror(control));
        skip();
    }
    assert_int_equal(run_op(ALLOW_USERNS, op_unshare_user), 0);
    assert_int_equal(run_op(ALLOW_USERNS, op_clone_user), 0);
}

static void test_clone3_enosys(void **state)
{
    (void)state;
    expect(REFUSE_UNIX, op_clone3, ENOSYS, "clone3");
}

static void test_ioctl_tty_injection_refused(void **state)
{
    (void)state;
    expect(REFUSE_UNIX, op_tiocsti, EPERM, "ioctl(TIOCSTI)");
    expect(REFUSE_UNIX, op_tiocsti_hibits, EPERM, "ioctl(0xffffffff00000000|TIOCSTI)");
    expect(REFUSE_UNIX, op_tioclinux, EPERM, "ioctl(TIOCLINUX)");
    expect(ALLOW_UNIX, op_tiocsti, EPERM, "ioctl(TIOCSTI) (unix allowed)");
    /* other ioctls are untouched */
    assert_int_equal(run_op(REFUSE_UNIX, op_fionread), 0);
}

static void test_x32(void **state)
{
    int control, got;

    (void)state;
    control = run_op(NO_FILTER, op_x32_socket_unix);
    print_message("note: x32 socket() without the filter: %s\n",
                  control == 0 ? "works (x32 enabled)" : strerror(control));
    got = run_op(REFUSE_UNIX, op_x32_socket_unix);
    if (got != EPERM && got != ENOSYS)
        fail_msg("x32 socket(AF_UNIX): got %d (%s), want EPERM or ENOSYS", got, strerror(got));
    got = run_op(REFUSE_UNIX, op_x32_socketpair_dgram);
    if (got != EPERM && got != ENOSYS)
        fail_msg("x32 socketpair(AF_UNIX, SOCK_DGRAM): got %d (%s), want EPERM or ENOSYS", got,
                 strerror(got));
    got = run_op(REFUSE_UNIX, op_x32_tiocsti);
    if (got != EPERM && got != ENOSYS)
        fail_msg("x32 ioctl(TIOCSTI): got %d (%s), want EPERM or ENOSYS", got, strerror(got));
}

#if HAVE_I386
static void test_i386_getpid_works(void **state)
{
    (void)state;
    SKIP_WITHOUT_IA32();
    /* The i386 ABI is known to the filter: not killed, not refused. */
    assert_int_equal(run_op(REFUSE_UNIX, op_i386_getpid), 0);
}

static void test_i386_socketcall_refused(void **state)
{
    (void)state;
    SKIP_WITHOUT_IA32();
    assert_int_equal(run_op(NO_FILTER, op_i386_socketcall_unix), 0);
    expect(REFUSE_UNIX, op_i386_socketcall_unix, EPERM, "i386 socketcall(SYS_SOCKET, AF_UNIX)");
    /* documented: its arguments are unreadable, so any domain is refused */
    expect(REFUSE_UNIX, op_i386_socketcall_inet, EPERM, "i386 socketcall(SYS_SOCKET, AF_INET)");
    /* issue 14: refused with Unix sockets allowed too, or it would get
     * round the family allow-list */
    expect(ALLOW_UNIX, op_i386_socketcall_unix, EPERM,
           "i386 socketcall(SYS_SOCKET) (unix allowed)");
}

static void test_i386_socket_refused(void **state)
{
    (void)state;
    SKIP_WITHOUT_IA32();
    assert_int_equal(run_op(NO_FILTER, op_i386_socket_unix), 0);
    expect(REFUSE_UNIX, op_i386_socket_unix, EPERM, "i386 socket(AF_UNIX)");
    assert_int_equal(run_op(REFUSE_UNIX, op_i386_socket_inet), 0);
    assert_int_equal(run_op(ALLOW_UNIX, op_i386_socket_unix), 0);
}

/* issue 21: datagram pairs on the i386 ABI, directly (i386 nr 360) and
 * through socketcall(SYS_SOCKETPAIR), whose arguments the filter cannot
 * read: refused whole, as socketcall(SYS_SOCKET) is */
static void test_i386_socketpair(void **state)
{
    (void)state;
    SKIP_WITHOUT_IA32();
    assert_int_equal(run_op(NO_FILTER, op_i386_pair_dgram), 0);
    assert_int_equal(run_op(NO_FILTER, op_i386_socketcall_pair_dgram), 0);
    expect(REFUSE_UNIX, op_i386_pair_dgram, EPERM, "i386 socketpair(AF_UNIX, SOCK_DGRAM)");
    expect(REFUSE_UNIX, op_i386_pair_raw, EPERM, "i386 socketpair(AF_UNIX, SOCK_RAW)");
    expect(REFUSE_UNIX, op_i386_socketcall_pair_dgram, EPERM,
           "i386 socketcall(SYS_SOCKETPAIR, AF_UNIX, SOCK_DGRAM)");
    expect(REFUSE_UNIX, op_i386_socketcall_pair_stream, EPERM,
           "i386 socketcall(SYS_SOCKETPAIR, AF_UNIX, SOCK_STREAM)");
    assert_int_equal(run_op(REFUSE_UNIX, op_i386_pair_stream), 0);
    assert_int_equal(run_op(REFUSE_UNIX, op_i386_pair_seqpacket), 0);
    assert_int_equal(run_op(ALLOW_UNIX, op_i386_pair_dgram), 0);
}

static void test_i386_other_rules(void **state)
{
    (void)state;
    SKIP_WITHOUT_IA32();
    expect(REFUSE_UNIX, op_i386_tiocsti, EPERM, "i386 ioctl(TIOCSTI)");
    expect(REFUSE_UNIX, op_i386_unshare_user, EPERM, "i386 unshare(CLONE_NEWUSER)");
    expect(REFUSE_UNIX, op_i386_clone3, ENOSYS, "i386 clone3");
}
#endif

/* rt-3 hole 6: no mode argument with S_ISUID or S_ISGID, in every mode of
 * the filter; each refused op is first shown to leave the bit without the
 * filter (the control), so the test fails on a filter without the rules */
static void mode_refused(enum filter_mode mode, int (*op)(void), const char *what)
{
    int control = run_op_prep(NO_FILTER, op);
    int got = run_op_prep(mode, op);

    if (control != 0)
        print_message("note: %s: without the filter %s here\n", what, strerror(control));
    if (got != EPERM)
        fail_msg("%s (mode %d): got %d (%s), want EPERM", what, (int)mode, got, strerror(got));
}

static void test_setuid_modes_refused(void **state)
{
    static const enum filter_mode modes[] = {REFUSE_UNIX, ALLOW_UNIX, ALLOW_BIND, ALLOW_USERNS,
                                             WATCH_WRITES};

    (void)state;
    mode_dir_make();
    assert_int_equal(run_op_prep(NO_FILTER, op_chmod_suid), 0);
    assert_int_equal(run_op_prep(NO_FILTER, op_open_creat_suid), 0);
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        enum filter_mode m = modes[i];
        mode_refused(m, op_chmod_suid, "chmod(04755)");
        mode_refused(m, op_chmod_sgid, "chmod(02755)");
        mode_refused(m, op_chmod_suid_hibits, "chmod(0xffff0000 | 04755)");
        mode_refused(m, op_fchmod_suid, "fchmod(04755)");
        mode_refused(m, op_fchmodat_sgid, "fchmodat(02755)");
        mode_refused(m, op_fchmodat2_suid, "fchmodat2(04755)");
        mode_refused(m, op_creat_suid, "creat(04755)");
        mode_refused(m, op_open_creat_suid, "open(O_CREAT, 04755)");
        mode_refused(m, op_open_creat_sgid, "open(O_CREAT|O_EXCL, 02755)");
        mode_refused(m, op_openat_creat_suid, "openat(O_CREAT, 06755)");
        mode_refused(m, op_open_tmpfile_suid, "open(O_TMPFILE, 04755) + linkat");
        mode_refused(m, op_mknod_suid, "mknod(S_IFREG|04755)");
        mode_refused(m, op_mknodat_sgid, "mknodat(S_IFREG|02755)");
    }
}

/* what stays allowed; openat2 (its mode is behind a pointer) is ENOSYS */
static void test_setuid_modes_rest(void **state)
{
    int got;

    (void)state;
    mode_dir_make();
    assert_int_equal(run_op_prep(REFUSE_UNIX, op_chmod_plain), 0);
    assert_int_equal(run_op_prep(REFUSE_UNIX, op_open_creat_plain), 0);
    assert_int_equal(run_op_prep(REFUSE_UNIX, op_open_existing_garbage_mode), 0);
    assert_int_equal(run_op_prep(REFUSE_UNIX, op_mkdir_sgid), 0);
    assert_int_equal(run_op_prep(ALLOW_USERNS, op_mkdir_sgid), 0);
    expect(REFUSE_UNIX, op_openat2_suid, ENOSYS, "openat2(O_CREAT, 04755)");
    expect(ALLOW_USERNS, op_openat2_suid, ENOSYS, "openat2(O_CREAT, 04755)");
    expect(WATCH_WRITES, op_openat2_suid, ENOSYS, "openat2(O_CREAT, 04755)");
    /* the write report's NOTIFY rules with no listener give ENOSYS: the
     * EPERM above is this filter's, and a plain chmod still reaches them */
    got = run_op_prep(WATCH_WRITES, op_chmod_plain);
    if (got != ENOSYS)
        fail_msg("plain chmod under the write report without a listener: got %d (%s), want "
                 "ENOSYS",
                 got, strerror(got));
    /* x32: EPERM (the filter) or ENOSYS (x32 disabled in the kernel) */
    got = run_op_prep(REFUSE_UNIX, op_x32_chmod_suid);
    if (got != EPERM && got != ENOSYS)
        fail_msg("x32 chmod(04755): got %d (%s), want EPERM or ENOSYS", got, strerror(got));
    got = run_op_prep(REFUSE_UNIX, op_x32_open_creat_suid);
    if (got != EPERM && got != ENOSYS)
        fail_msg("x32 open(O_CREAT, 04755): got %d (%s), want EPERM or ENOSYS", got, strerror(got));
}

#if HAVE_I386
static void test_i386_setuid_modes_refused(void **state)
{
    (void)state;
    SKIP_WITHOUT_IA32();
    mode_dir_make();
    assert_int_equal(run_op_prep(NO_FILTER, op_i386_chmod_suid), 0);
    mode_refused(REFUSE_UNIX, op_i386_chmod_suid, "i386 chmod(04755)");
    mode_refused(REFUSE_UNIX, op_i386_chmod_sgid, "i386 chmod(02755)");
    mode_refused(REFUSE_UNIX, op_i386_fchmod_suid, "i386 fchmod(04755)");
    mode_refused(REFUSE_UNIX, op_i386_fchmodat_suid, "i386 fchmodat(04755)");
    mode_refused(REFUSE_UNIX, op_i386_fchmodat2_sgid, "i386 fchmodat2(02755)");
    mode_refused(REFUSE_UNIX, op_i386_creat_suid, "i386 creat(04755)");
    mode_refused(REFUSE_UNIX, op_i386_open_creat_suid, "i386 open(O_CREAT, 04755)");
    mode_refused(WATCH_WRITES, op_i386_open_creat_suid, "i386 open(O_CREAT, 04755)");
    mode_refused(REFUSE_UNIX, op_i386_openat_creat_sgid, "i386 openat(O_CREAT, 02755)");
    mode_refused(REFUSE_UNIX, op_i386_mknod_suid, "i386 mknod(S_IFREG|04755)");
    mode_refused(REFUSE_UNIX, op_i386_mknodat_suid, "i386 mknodat(S_IFREG|04755)");
    assert_int_equal(run_op_prep(REFUSE_UNIX, op_i386_chmod_plain), 0);
    expect(REFUSE_UNIX, op_i386_openat2, ENOSYS, "i386 openat2(O_CREAT, 04755)");
}
#endif

static void test_describe(void **state)
{
    const struct sb_seccomp_opts refuse = {.allow_unix_sockets = 0};
    const struct sb_seccomp_opts allow = {.allow_unix_sockets = 1};
    const char *const *r = sb_seccomp_describe(&refuse);
    const char *const *a = sb_seccomp_describe(&allow);
    int r_unix = 0, a_unix = 0, r_uring = 0, a_uring = 0, r_pair = 0, a_pair = 0;
    size_t i;

    (void)state;
    assert_non_null(r);
    assert_non_null(a);
    for (i = 0; r[i] != NULL; i++) {
        assert_true(i < 32);
        if (strstr(r[i], "socket(AF_UNIX") == r[i] && strstr(r[i], "EPERM") != NULL)
            r_unix = 1;
        if (strstr(r[i], "io_uring_setup") != NULL)
            r_uring = 1;
        if (strstr(r[i], "socketpair(AF_UNIX") == r[i] && strstr(r[i], "SOCK_DGRAM") != NULL &&
            strstr(r[i], "EPERM") != NULL)
            r_pair = 1;
    }
    for (i = 0; a[i] != NULL; i++) {
        assert_true(i < 32);
        if (strstr(a[i], "socket(AF_UNIX") == a[i] && strstr(a[i], "allowed") != NULL)
            a_unix = 1;
        if (strstr(a[i], "EPERM") != NULL && strstr(a[i], "AF_UNIX") != NULL)
            fail_msg("allowed list refuses unix sockets: '%s'", a[i]);
        if (strstr(a[i], "io_uring_setup") != NULL)
            a_uring = 1;
        if (strstr(a[i], "socketpair(AF_UNIX") == a[i] && strstr(a[i], "allowed") != NULL)
            a_pair = 1;
    }
    assert_true(r_unix && a_unix && r_uring && a_uring);
    assert_true(r_pair && a_pair); /* issue 21 */
    /* rt-3 hole 6: in every combination of the options */
    for (unsigned m = 0; m < 16; m++) {
        const struct sb_seccomp_opts o = {.allow_unix_sockets = (m & 1) != 0,
                                          .allow_local_binding = (m & 2) != 0,
                                          .allow_user_namespaces = (m & 4) != 0,
                                          .transparent = (m & 8) != 0};
        const char *const *l = sb_seccomp_describe(&o);
        int suid = 0, at2 = 0;
        for (i = 0; l[i] != NULL; i++) {
            assert_true(i < 23);
            if (strstr(l[i], "S_ISUID") != NULL && strstr(l[i], "EPERM") != NULL &&
                strstr(l[i], "make install") != NULL)
                suid = 1;
            if (strstr(l[i], "openat2() fails with ENOSYS") == l[i])
                at2 = 1;
        }
        if (!suid || !at2)
            fail_msg("options %u: no line on set-user-ID modes or openat2", m);
    }
}

/* ------------------------------------------------------------------------ */
/* Handoff: sluice inner in a child                                          */

struct inner_child {
    pid_t pid;
    int host; /* the test's end of the socketpair */
    char dir[64];
    char marker[96];
};

#define EXTRA_FD 50 /* inherited by inner without CLOEXEC: must be closed */

/* Forks `sluice inner --fd N --http-port 0 --socks-port 0 [EXTRA] -- CMD...`,
 * after PREP (if any) ran in the child: a PREP that cannot do its job exits
 * the child with PREP_UNSUPPORTED. */
#define PREP_UNSUPPORTED 77
static void inner_start_prep(struct inner_child *ic, const char *http_port, const char *extra,
                             char *const *cmd, void (*prep)(void))
{
    int sv[2];
    const int one = 1;

    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    assert_int_equal(setsockopt(sv[0], SOL_SOCKET, SO_PASSCRED, &one, sizeof one), 0);
    ic->host = sv[0];
    ic->pid = fork();
    assert_true(ic->pid >= 0);
    if (ic->pid == 0) {
        char fdstr[16];
        char *argv[32];
        int argc = 0;

        close(sv[0]);
        child_init();
        if (dup2(STDERR_FILENO, EXTRA_FD) < 0) /* dup2 leaves it inheritable */
            _exit(99);
        if (prep != NULL)
            prep();
        snprintf(fdstr, sizeof fdstr, "%d", sv[1]);
        argv[argc++] = (char *)"inner";
        argv[argc++] = (char *)"--fd";
        argv[argc++] = fdstr;
        argv[argc++] = (char *)"--http-port";
        argv[argc++] = (char *)(http_port != NULL ? http_port : "0");
        argv[argc++] = (char *)"--socks-port";
        argv[argc++] = (char *)"0";
        if (extra != NULL)
            argv[argc++] = (char *)extra;
        argv[argc++] = (char *)"--";
        for (size_t i = 0; cmd[i] != NULL && argc < 31; i++)
            argv[argc++] = cmd[i];
        argv[argc] = NULL;
        _exit(sb_inner_main(argc, argv));
    }
    close(sv[1]);
}

static void inner_start(struct inner_child *ic, const char *extra, char *const *cmd)
{
    inner_start_prep(ic, NULL, extra, cmd, NULL);
}

/* The child's exit code; fails the test when it was killed. */
static int inner_wait(struct inner_child *ic)
{
    int st = 0;

    assert_int_equal(waitpid(ic->pid, &st, 0), ic->pid);
    if (!WIFEXITED(st))
        fail_msg("inner killed by signal %d", WIFSIGNALED(st) ? WTERMSIG(st) : -1);
    return WEXITSTATUS(st);
}

static void make_dir(struct inner_child *ic)
{
    const char *tmp = getenv("TMPDIR");

    snprintf(ic->dir, sizeof ic->dir, "%s/sluice-seccomp-XXXXXX",
             tmp != NULL && strlen(tmp) < 32 ? tmp : "/tmp");
    assert_non_null(mkdtemp(ic->dir));
    snprintf(ic->marker, sizeof ic->marker, "%s/ran", ic->dir);
}

static void remove_dir(struct inner_child *ic)
{
    char p[128];

    unlink(ic->marker);
    snprintf(p, sizeof p, "%s/noexec", ic->dir);
    unlink(p);
    rmdir(ic->dir);
}

static int tcp_listener(void);

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* Connects to listener FD over loopback and accepts the connection. */
static void check_accepts(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    int c, a;

    assert_int_equal(getsockname(fd, (struct sockaddr *)&ss, &len), 0);
    assert_true(ss.ss_family == AF_INET || ss.ss_family == AF_INET6);
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)&ss;
        assert_int_equal(ntohl(in->sin_addr.s_addr), INADDR_LOOPBACK);
    } else {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&ss;
        assert_memory_equal(&in6->sin6_addr, &in6addr_loopback, sizeof in6addr_loopback);
    }
    c = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(c >= 0);
    assert_int_equal(connect(c, (struct sockaddr *)&ss, len), 0);
    a = accept(fd, NULL, NULL);
    assert_true(a >= 0);
    assert_int_equal(write(c, "x", 1), 1);
    {
        char b = 0;
        assert_int_equal(read(a, &b, 1), 1);
        assert_int_equal(b, 'x');
    }
    close(a);
    close(c);
}

static void handoff_close(struct sb_handoff *h)
{
    for (size_t i = 0; i < 4; i++)
        if (h->fds[i] >= 0)
            close(h->fds[i]);
}

static void test_inner_handoff_and_go(void **state)
{
    struct inner_child ic;
    struct sb_handoff h;
    char script[512], err[256];
    size_t nh = 0, ns = 0;
    char *cmd[4];

    (void)state;
    make_dir(&ic);
    /* In the command: the extra fd and inner's socket are closed,
     * no_new_privs and a seccomp filter are on; then it leaves a marker. */
    snprintf(script, sizeof script,
             "if [ -e /proc/self/fd/%d ]; then exit 1; fi; "
             "grep -q '^NoNewPrivs:[[:space:]]*1$' /proc/self/status || exit 2; "
             "grep -q '^Seccomp:[[:space:]]*2$' /proc/self/status || exit 3; "
             "touch '%s' || exit 4; exit 7",
             EXTRA_FD, ic.marker);
    cmd[0] = (char *)"/bin/sh";
    cmd[1] = (char *)"-c";
    cmd[2] = script;
    cmd[3] = NULL;
    inner_start(&ic, NULL, cmd);

    memset(&h, 0xff, sizeof h);
    if (sb_handoff_recv(ic.host, RECV_TIMEOUT_MS, &h, err, sizeof err) != 0)
        fail_msg("sb_handoff_recv: %s", err);
    assert_true(h.n >= 2 && h.n <= 4);
    assert_int_equal(h.kind[0], SB_L_HTTP);
    assert_int_equal(h.kind[1], SB_L_SOCKS);
    for (size_t i = 0; i < 4; i++) {
        if (i >= h.n) {
            assert_int_equal(h.fds[i], -1);
            continue;
        }
        assert_true(h.fds[i] >= 0);
        assert_true(fcntl(h.fds[i], F_GETFD) & FD_CLOEXEC);
        if (h.kind[i] == SB_L_HTTP)
            nh++;
        else if (h.kind[i] == SB_L_SOCKS)
            ns++;
        else
            fail_msg("kind %d", (int)h.kind[i]);
        check_accepts(h.fds[i]);
    }
    assert_true(nh >= 1 && ns >= 1);
    assert_int_equal(h.cmd_pid, ic.pid);
    assert_false(exists(ic.marker)); /* nothing ran before 'G' */

    assert_int_equal(write(ic.host, "G", 1), 1);
    assert_int_equal(inner_wait(&ic), 7);
    assert_true(exists(ic.marker));
    handoff_close(&h);
    close(ic.host);
    remove_dir(&ic);
}

/* No socket above stderr reaches the command: inner's socketpair end and
 * its copies of the listeners are closed. $$ is the shell itself, also in
 * the command substitution that runs readlink. */
static void test_inner_closes_its_sockets(void **state)
{
    struct inner_child ic;
    struct sb_handoff h;
    char err[256];
    char *cmd[] = {(char *)"/bin/sh", (char *)"-c",
                   (char *)"for f in /proc/$$/fd/*; do n=${f##*/}; [ \"$n\" -gt 2 ] || continue; "
                           "case \"$(readlink \"$f\")\" in socket:*) exit 1;; esac; done; exit 7",
                   NULL};

    (void)state;
    inner_start(&ic, "--allow-unix-sockets", cmd);
    if (sb_handoff_recv(ic.host, RECV_TIMEOUT_MS, &h, err, sizeof err) != 0)
        fail_msg("sb_handoff_recv: %s", err);
    assert_int_equal(write(ic.host, "G", 1), 1);
    assert_int_equal(inner_wait(&ic), 7);
    handoff_close(&h);
    close(ic.host);
}

/* MSG (LEN bytes, or nothing) sent after the listeners, then the go byte
 * when GO (inner may have gone already): inner exits 125 and the command
 * never runs. */
static void no_command(const void *msg, size_t len, int go)
{
    struct inner_child ic;
    struct sb_handoff h;
    char script[256], err[256];
    char *cmd[4];

    make_dir(&ic);
    snprintf(script, sizeof script, "touch '%s'; exit 0", ic.marker);
    cmd[0] = (char *)"/bin/sh";
    cmd[1] = (char *)"-c";
    cmd[2] = script;
    cmd[3] = NULL;
    inner_start(&ic, NULL, cmd);
    if (sb_handoff_recv(ic.host, RECV_TIMEOUT_MS, &h, err, sizeof err) != 0)
        fail_msg("sb_handoff_recv: %s", err);
    handoff_close(&h);
    if (len > 0)
        assert_int_equal(write(ic.host, msg, len), (ssize_t)len);
    if (go)
        (void)write(ic.host, "G", 1);
    close(ic.host);
    assert_int_equal(inner_wait(&ic), 125);
    assert_false(exists(ic.marker));
    remove_dir(&ic);
}

static void no_go(int send_byte)
{
    no_command("X", send_byte ? 1 : 0, 0);
}

static void test_inner_no_go_eof(void **state)
{
    (void)state;
    no_go(0);
}

static void test_inner_no_go_wrong_byte(void **state)
{
    (void)state;
    no_go(1);
}

/* inner with EXTRA to the exec of CMD: its exit code. With HOST, the
 * filters for HOST compiled here and sent first (issue 25). */
static int run_inner_host(const char *extra, const struct sb_seccomp_opts *host, char *const *cmd)
{
    struct inner_child ic;
    struct sb_handoff h;
    char err[256];

    inner_start(&ic, extra, cmd);
    if (host != NULL && sb_handoff_send_filters(ic.host, host, err, sizeof err) != 0)
        fail_msg("sb_handoff_send_filters: %s", err);
    if (sb_handoff_recv(ic.host, RECV_TIMEOUT_MS, &h, err, sizeof err) != 0)
        fail_msg("sb_handoff_recv: %s", err);
    handoff_close(&h);
    assert_int_equal(write(ic.host, "G", 1), 1);
    close(ic.host);
    return inner_wait(&ic);
}

static int run_inner_to_exec_opt(const char *extra, char *const *cmd)
{
    return run_inner_host(extra, NULL, cmd);
}

static int run_inner_to_exec(char *const *cmd)
{
    return run_inner_to_exec_opt(NULL, cmd);
}

static void test_inner_exec_failures(void **state)
{
    struct inner_child ic;
    char path[128];
    char *missing[] = {(char *)"/nonexistent-sluice-test/cmd", NULL};
    char *unknown[] = {(char *)"sluice-test-no-such-command", NULL};
    char *noexec[] = {path, NULL};
    int fd;

    (void)state;
    assert_int_equal(run_inner_to_exec(missing), 127);
    assert_int_equal(run_inner_to_exec(unknown), 127);

    make_dir(&ic);
    snprintf(path, sizeof path, "%s/noexec", ic.dir);
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "#!/bin/sh\nexit 0\n", 17), 17);
    close(fd);
    assert_int_equal(run_inner_to_exec(noexec), 126);
    remove_dir(&ic);
}

/* The command runs under the filter inner loaded, with or without
 * --allow-unix-sockets: the command is this test program in its probe mode
 * (main(), PROBE_UNIX). */
#define PROBE_UNIX "--probe-unix-socket"
static char self_exe[4096];

static int probe_unix_main(void)
{
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd >= 0)
        return 0;
    return errno == EPERM ? 1 : 2;
}

static void test_inner_filter_reaches_command(void **state)
{
    char *cmd[] = {self_exe, (char *)PROBE_UNIX, NULL};

    (void)state;
    assert_true(self_exe[0] == '/');
    assert_int_equal(run_inner_to_exec_opt(NULL, cmd), 1);                   /* EPERM */
    assert_int_equal(run_inner_to_exec_opt("--allow-unix-sockets", cmd), 0); /* made */
}

/* issue 25: the host compiles the filters and sends them ('F') before the
 * go byte; inner loads those, not ones of its own. The host's say and
 * inner's flag disagree here on purpose, so that the command shows whose
 * filter it runs under. */
static int run_inner_host_filters(const char *extra, int host_allows_unix, char *const *cmd)
{
    struct sb_seccomp_opts so;

    memset(&so, 0, sizeof so);
    so.allow_unix_sockets = host_allows_unix;
    return run_inner_host(extra, &so, cmd);
}

static void test_inner_filters_from_host(void **state)
{
    char *cmd[] = {self_exe, (char *)PROBE_UNIX, NULL};

    (void)state;
    assert_true(self_exe[0] == '/');
    assert_int_equal(run_inner_host_filters("--allow-unix-sockets", 0, cmd), 1); /* EPERM */
    assert_int_equal(run_inner_host_filters(NULL, 1, cmd), 0);                   /* made */
}

/* A bad 'F' message: inner exits 125 and the command never runs. */
static void bad_filters(const void *msg, size_t len)
{
    no_command(msg, len, 1);
}

static void test_inner_bad_filters(void **state)
{
    unsigned char m[64];
    uint32_t n;

    (void)state;
    /* a length of 0, one above the most two programs take, and a blob
     * that is no pair of programs */
    m[0] = 'F';
    n = 0;
    memcpy(m + 1, &n, sizeof n);
    bad_filters(m, 1 + sizeof n);
    n = 2 * (4 + 4096 * 8) + 1;
    memcpy(m + 1, &n, sizeof n);
    bad_filters(m, 1 + sizeof n);
    n = 16;
    memcpy(m + 1, &n, sizeof n);
    memset(m + 1 + sizeof n, 0xff, 16);
    bad_filters(m, 1 + sizeof n + 16);
    /* the length, then EOF */
    n = 100;
    memcpy(m + 1, &n, sizeof n);
    bad_filters(m, 1 + sizeof n);
}

/* sb_seccomp_blob_parse: only two programs of 1 to BPF_MAXINSNS
 * instructions each, nothing after them. */
static size_t blob_prog(unsigned char *b, uint32_t count, uint32_t real)
{
    struct sock_filter allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);

    memcpy(b, &count, sizeof count);
    for (uint32_t i = 0; i < real; i++)
        memcpy(b + sizeof count + i * sizeof allow, &allow, sizeof allow);
    return sizeof count + real * sizeof allow;
}

static void test_blob_parse(void **state)
{
    static unsigned char b[2 * (4 + 4097 * 8) + 16];
    struct sock_fprog p[SB_SECCOMP_PROGS];
    size_t n;

    (void)state;
    n = blob_prog(b, 1, 1);
    n += blob_prog(b + n, 2, 2);
    assert_int_equal(sb_seccomp_blob_parse(b, n, p), 0);
    assert_int_equal(p[0].len, 1);
    assert_int_equal(p[1].len, 2);
    assert_int_equal(p[1].filter[1].code, BPF_RET | BPF_K);
    sb_seccomp_blob_free(p);
    assert_null(p[0].filter);
    /* one program only, a trailing byte, half a count, a cut program */
    assert_int_equal(sb_seccomp_blob_parse(b, blob_prog(b, 1, 1), p), -EPROTO);
    assert_null(p[0].filter);
    assert_int_equal(sb_seccomp_blob_parse(b, n + 1, p), -EPROTO);
    assert_int_equal(sb_seccomp_blob_parse(b, 2, p), -EPROTO);
    assert_int_equal(sb_seccomp_blob_parse(b, n - 1, p), -EPROTO);
    assert_int_equal(sb_seccomp_blob_parse(b, 0, p), -EPROTO);
    /* an empty program; one above BPF_MAXINSNS; a count past the end */
    n = blob_prog(b, 0, 0);
    n += blob_prog(b + n, 1, 1);
    assert_int_equal(sb_seccomp_blob_parse(b, n, p), -EPROTO);
    n = blob_prog(b, 4097, 4097);
    n += blob_prog(b + n, 1, 1);
    assert_int_equal(sb_seccomp_blob_parse(b, n, p), -EPROTO);
    n = blob_prog(b, 4096, 4096);
    n += blob_prog(b + n, 1, 1);
    assert_int_equal(sb_seccomp_blob_parse(b, n, p), 0);
    sb_seccomp_blob_free(p);
    n = blob_prog(b, 1, 1);
    n += blob_prog(b + n, 0xffffffffU, 1);
    assert_int_equal(sb_seccomp_blob_parse(b, n, p), -EPROTO);
    assert_null(p[0].filter);
    assert_null(p[1].filter);
}

/* In a network namespace of its own (root only; skipped otherwise) with
 * IPv6 disabled, inner hands over the two IPv4 listeners only. */
static int lo_up(void)
{
    struct ifreq ifr;
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    int r = -1;

    if (fd < 0)
        return -1;
    memset(&ifr, 0, sizeof ifr);
    memcpy(ifr.ifr_name, "lo", 3);
    if (ioctl(fd, SIOCGIFFLAGS, &ifr) == 0) {
        ifr.ifr_flags = (short)(ifr.ifr_flags | IFF_UP);
        r = ioctl(fd, SIOCSIFFLAGS, &ifr);
    }
    close(fd);
    return r;
}

static void write_sysctl(const char *path, const char *v)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, v, strlen(v)) != (ssize_t)strlen(v))
        _exit(PREP_UNSUPPORTED);
    close(fd);
}

static void prep_netns_no_v6(void)
{
    if (unshare(CLONE_NEWNET) < 0)
        _exit(PREP_UNSUPPORTED);
    if (access("/proc/sys/net/ipv6/conf/lo/disable_ipv6", F_OK) == 0) {
        write_sysctl("/proc/sys/net/ipv6/conf/all/disable_ipv6", "1");
        write_sysctl("/proc/sys/net/ipv6/conf/default/disable_ipv6", "1");
        write_sysctl("/proc/sys/net/ipv6/conf/lo/disable_ipv6", "1");
    }
    if (lo_up() < 0)
        _exit(PREP_UNSUPPORTED);
}

static void test_inner_without_ipv6(void **state)
{
    struct inner_child ic;
    struct sb_handoff h;
    char err[256];
    char *cmd[] = {(char *)"/bin/sh", (char *)"-c", (char *)"exit 7", NULL};
    int rc;

    (void)state;
    inner_start_prep(&ic, NULL, NULL, cmd, prep_netns_no_v6);
    rc = sb_handoff_recv(ic.host, RECV_TIMEOUT_MS, &h, err, sizeof err);
    if (rc != 0) {
        int st = inner_wait(&ic);
        close(ic.host);
        if (st == PREP_UNSUPPORTED) {
            print_message("skipped: no network namespace of its own here\n");
            skip();
        }
        fail_msg("sb_handoff_recv: %s (inner exited %d)", err, st);
    }
    assert_int_equal(h.n, 2);
    assert_int_equal(h.kind[0], SB_L_HTTP);
    assert_int_equal(h.kind[1], SB_L_SOCKS);
    for (size_t i = 0; i < 2; i++) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        assert_int_equal(getsockname(h.fds[i], (struct sockaddr *)&ss, &len), 0);
        assert_int_equal(ss.ss_family, AF_INET);
    }
    assert_int_equal(write(ic.host, "G", 1), 1);
    assert_int_equal(inner_wait(&ic), 7);
    handoff_close(&h);
    close(ic.host);
}

/* A v4 listener that cannot be made is fatal: the HTTP port is taken. */
static void test_inner_port_in_use(void **state)
{
    struct inner_child ic;
    struct sb_handoff h;
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    char err[256], port[16];
    char *cmd[] = {(char *)"/bin/sh", (char *)"-c", (char *)"exit 7", NULL};
    int busy = tcp_listener();

    (void)state;
    assert_int_equal(getsockname(busy, (struct sockaddr *)&a, &len), 0);
    snprintf(port, sizeof port, "%u", (unsigned)ntohs(a.sin_port));
    inner_start_prep(&ic, port, NULL, cmd, NULL);
    assert_int_not_equal(sb_handoff_recv(ic.host, RECV_TIMEOUT_MS, &h, err, sizeof err), 0);
    assert_int_equal(inner_wait(&ic), 125);
    close(ic.host);
    close(busy);
}

/* Bad arguments: 125 with a message saying what was wrong, before anything
 * else happens. Each case runs in a child with stderr on a pipe. */
static void bad_args_case(const char *const *args, const char *want)
{
    int p[2], st = 0;
    char out[1024];
    size_t got = 0;
    pid_t pid;

    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char *argv[16];
        char fdstr[16];
        int argc = 0, fd;
        int sv[2];

        child_init();
        dup2(p[1], STDERR_FILENO);
        /* a real socketpair end with its peer kept open: a wrongly accepted
         * argument list would hand off and then wait for 'G' (alarm) */
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
            _exit(98);
        fd = sv[1];
        snprintf(fdstr, sizeof fdstr, "%d", fd);
        for (size_t i = 0; args[i] != NULL && argc < 15; i++)
            argv[argc++] = strcmp(args[i], "FD") == 0 ? fdstr : (char *)args[i];
        argv[argc] = NULL;
        _exit(sb_inner_main(argc, argv));
    }
    close(p[1]);
    for (;;) {
        ssize_t r = read(p[0], out + got, sizeof out - 1 - got);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    out[got] = '\0';
    close(p[0]);
    assert_int_equal(waitpid(pid, &st, 0), pid);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 125) {
        for (size_t i = 0; args[i] != NULL; i++)
            print_message("arg %zu: '%s'\n", i, args[i]);
        fail_msg("status 0x%x, stderr '%s'", (unsigned)st, out);
    }
    if (strstr(out, "sluice inner: ") != out || strstr(out, want) == NULL)
        fail_msg("stderr '%s' lacks '%s'", out, want);
}

static void test_inner_bad_args(void **state)
{
    static const char *const c0[] = {"inner", NULL};
    static const char *const c1[] = {"inner", "--fd", NULL};
    static const char *const c2[] = {"inner", "--fd", "abc", "--", "/bin/true", NULL};
    static const char *const c3[] = {"inner", "--fd", "2", "--", "/bin/true", NULL};
    static const char *const c4[] = {"inner", "--fd", "-5", "--", "/bin/true", NULL};
    static const char *const c5[] = {"inner", "--fd", "999", "--", "/bin/true", NULL};
    static const char *const c6[] = {"inner", "--fd", "FD", "/bin/true", NULL};
    static const char *const c7[] = {"inner", "--fd", "FD", "--", NULL};
    static const char *const c8[] = {"inner", "--fd", "FD",        "--http-port",
                                     "65536", "--",   "/bin/true", NULL};
    static const char *const c9[] = {"inner", "--fd", "FD",        "--socks-port",
                                     "",      "--",   "/bin/true", NULL};
    static const char *const c10[] = {"inner", "--fd", "FD",        "--http-port",
                                      "12x",   "--",   "/bin/true", NULL};
    static const char *const c11[] = {"inner", "--fd", "FD", "--bogus", "--", "/bin/true", NULL};
    static const char *const c12[] = {"inner", "--fd", "FD", "--fd", "FD", "--", "/bin/true", NULL};
    static const char *const c13[] = {"inner", "--http-port", "0", "--", "/bin/true", NULL};
    static const char *const c14[] = {"inner", "--fd", "FD", "--socks-port", NULL};
    static const char *const c15[] = {"inner", "--fd", "99999999999", "--", "/bin/true", NULL};
    static const char *const c16[] = {"inner", "--fd", "FD", "--", "", NULL};

    (void)state;
    bad_args_case(c0, "--fd is required");
    bad_args_case(c1, "needs a value");
    bad_args_case(c2, "not a descriptor number");
    bad_args_case(c3, "not a descriptor number");
    bad_args_case(c4, "not a descriptor number");
    bad_args_case(c5, "--fd 999");
    bad_args_case(c6, "expected '--'");
    bad_args_case(c7, "no command");
    bad_args_case(c8, "not a port number");
    bad_args_case(c9, "not a port number");
    bad_args_case(c10, "not a port number");
    bad_args_case(c11, "unknown option '--bogus'");
    bad_args_case(c12, "given twice");
    bad_args_case(c13, "--fd is required");
    bad_args_case(c14, "needs a value");
    bad_args_case(c15, "not a descriptor number");
    bad_args_case(c16, "no command");
}

/* ------------------------------------------------------------------------ */
/* Handoff: hand-made messages to sb_handoff_recv                            */

static size_t count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    size_t n = 0;

    assert_non_null(d);
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

static int tcp_listener(void)
{
    struct sockaddr_in a;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    assert_true(fd >= 0);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(fd, 4), 0);
    return fd;
}

/* Sends PAYLOAD with FDS (closed here afterwards) on a fresh socketpair;
 * returns the receiving end. */
static int send_msg(const char *payload, size_t plen, int *fds, size_t nfds, int passcred)
{
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int) * 64)];
    } ctl;
    struct msghdr msg;
    struct iovec iov;
    int sv[2];
    const int one = 1;

    assert_true(nfds <= 64);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    if (passcred)
        assert_int_equal(setsockopt(sv[0], SOL_SOCKET, SO_PASSCRED, &one, sizeof one), 0);
    memset(&ctl, 0, sizeof ctl);
    memset(&msg, 0, sizeof msg);
    iov.iov_base = (void *)payload;
    iov.iov_len = plen;
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
    if (plen > 0 || nfds > 0)
        assert_int_equal(sendmsg(sv[1], &msg, 0), (ssize_t)plen);
    for (size_t i = 0; i < nfds; i++)
        close(fds[i]);
    close(sv[1]);
    return sv[0];
}

/* sb_handoff_recv must fail and leave no received descriptor open. */
static void expect_rejected(int sock, const char *why, const char *want)
{
    struct sb_handoff h;
    char err[256] = "";
    size_t before = count_fds();

    memset(&h, 0x5a, sizeof h);
    if (sb_handoff_recv(sock, 1000, &h, err, sizeof err) == 0)
        fail_msg("%s: accepted", why);
    if (strstr(err, want) == NULL)
        fail_msg("%s: error '%s' lacks '%s'", why, err, want);
    assert_int_equal(count_fds(), before);
    assert_int_equal(h.n, (size_t)0x5a5a5a5a5a5a5a5aULL); /* untouched on failure */
    close(sock);
}

static void test_handoff_valid_message(void **state)
{
    struct sb_handoff h;
    char err[256];
    int fds[2];
    int sock;

    (void)state;
    fds[0] = tcp_listener();
    fds[1] = tcp_listener();
    sock = send_msg("SH", 2, fds, 2, 1);
    if (sb_handoff_recv(sock, 1000, &h, err, sizeof err) != 0)
        fail_msg("sb_handoff_recv: %s", err);
    assert_int_equal(h.n, 2);
    assert_int_equal(h.kind[0], SB_L_SOCKS);
    assert_int_equal(h.kind[1], SB_L_HTTP);
    assert_int_equal(h.fds[2], -1);
    assert_int_equal(h.fds[3], -1);
    assert_int_equal(h.cmd_pid, getpid());
    check_accepts(h.fds[0]);
    check_accepts(h.fds[1]);
    handoff_close(&h);
    close(sock);

    /* without SO_PASSCRED the pid is unknown */
    fds[0] = tcp_listener();
    fds[1] = tcp_listener();
    sock = send_msg("HS", 2, fds, 2, 0);
    if (sb_handoff_recv(sock, 1000, &h, err, sizeof err) != 0)
        fail_msg("sb_handoff_recv: %s", err);
    assert_int_equal(h.cmd_pid, 0);
    handoff_close(&h);
    close(sock);
}

static void test_handoff_bogus_messages(void **state)
{
    int fds[40];
    int sv[2];

    (void)state;
    /* a plain file where a listener belongs */
    fds[0] = tcp_listener();
    fds[1] = open("/dev/null", O_RDONLY | O_CLOEXEC);
    assert_true(fds[1] >= 0);
    expect_rejected(send_msg("HS", 2, fds, 2, 1), "plain fd", "not a socket");

    /* a TCP socket that is not listening */
    fds[0] = tcp_listener();
    fds[1] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    expect_rejected(send_msg("HS", 2, fds, 2, 1), "not listening", "not listening");

    /* a listening unix socket */
    {
        struct sockaddr_un ua;
        fds[0] = tcp_listener();
        fds[1] = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        memset(&ua, 0, sizeof ua);
        ua.sun_family = AF_UNIX; /* autobind to an abstract name */
        assert_int_equal(bind(fds[1], (struct sockaddr *)&ua, sizeof(sa_family_t)), 0);
        assert_int_equal(listen(fds[1], 1), 0);
        expect_rejected(send_msg("HS", 2, fds, 2, 1), "unix listener",
                        "not an IPv4 or IPv6 socket");
    }

    /* a UDP socket */
    fds[0] = tcp_listener();
    fds[1] = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    expect_rejected(send_msg("HS", 2, fds, 2, 1), "udp socket", "not a stream socket");

    /* count and payload disagree */
    fds[0] = tcp_listener();
    expect_rejected(send_msg("HS", 2, fds, 1, 1), "one fd for two kinds",
                    "1 descriptors for 2 kinds");
    fds[0] = tcp_listener();
    fds[1] = tcp_listener();
    fds[2] = tcp_listener();
    expect_rejected(send_msg("HS", 2, fds, 3, 1), "three fds for two kinds",
                    "3 descriptors for 2 kinds");

    /* unknown kind, missing kind, too few, too many */
    fds[0] = tcp_listener();
    fds[1] = tcp_listener();
    expect_rejected(send_msg("HX", 2, fds, 2, 1), "unknown kind", "unknown listener kind 0x58");
    fds[0] = tcp_listener();
    fds[1] = tcp_listener();
    expect_rejected(send_msg("HH", 2, fds, 2, 1), "no socks listener", "no socks listener");
    fds[0] = tcp_listener();
    expect_rejected(send_msg("H", 1, fds, 1, 1), "one listener", "1 listeners");
    for (size_t i = 0; i < 5; i++)
        fds[i] = tcp_listener();
    expect_rejected(send_msg("HSHSH", 5, fds, 5, 1), "five listeners", "5 listeners");

    /* more descriptors than the control buffer holds: MSG_CTRUNC */
    {
        char many[40];
        for (size_t i = 0; i < 40; i++) {
            fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
            many[i] = 'H';
        }
        expect_rejected(send_msg(many, 40, fds, 40, 1), "truncated control data",
                        "control data truncated");
    }

    /* bytes without descriptors; nothing at all (EOF) */
    expect_rejected(send_msg("HS", 2, NULL, 0, 1), "no descriptors", "0 descriptors for 2 kinds");
    expect_rejected(send_msg("", 0, NULL, 0, 1), "eof", "before sending its listeners");

    /* nothing arrives in time */
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    {
        struct sb_handoff h;
        char err[256];
        assert_int_equal(sb_handoff_recv(sv[0], 50, &h, err, sizeof err), -ETIMEDOUT);
    }
    close(sv[0]);
    close(sv[1]);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_socket_unix_refused),
        cmocka_unit_test(test_socket_inet_allowed),
        cmocka_unit_test(test_socket_unix_hibits_refused),
        cmocka_unit_test(test_socket_unix_allowed),
        cmocka_unit_test(test_socket_families),
        cmocka_unit_test(test_keyrings),
        cmocka_unit_test(test_socketpair_stream_allowed),
        cmocka_unit_test(test_socketpair_dgram_refused),
        cmocka_unit_test(test_socketpair_other_family_refused),
        cmocka_unit_test(test_socketpair_routes),
        cmocka_unit_test(test_io_uring_refused),
        cmocka_unit_test(test_unshare_user_refused),
        cmocka_unit_test(test_unshare_mnt_not_refused),
        cmocka_unit_test(test_clone_user_refused),
        cmocka_unit_test(test_clone3_enosys),
        cmocka_unit_test(test_bind_listen),
        cmocka_unit_test(test_user_namespaces_allowed),
        cmocka_unit_test(test_ioctl_tty_injection_refused),
        cmocka_unit_test(test_x32),
#if HAVE_I386
        cmocka_unit_test(test_i386_getpid_works),
        cmocka_unit_test(test_i386_socketcall_refused),
        cmocka_unit_test(test_i386_socket_refused),
        cmocka_unit_test(test_i386_socketpair),
        cmocka_unit_test(test_i386_other_rules),
#endif
        cmocka_unit_test(test_setuid_modes_refused),
        cmocka_unit_test(test_setuid_modes_rest),
#if HAVE_I386
        cmocka_unit_test(test_i386_setuid_modes_refused),
#endif
        cmocka_unit_test(test_describe),
        cmocka_unit_test(test_inner_handoff_and_go),
        cmocka_unit_test(test_inner_closes_its_sockets),
        cmocka_unit_test(test_inner_no_go_eof),
        cmocka_unit_test(test_inner_no_go_wrong_byte),
        cmocka_unit_test(test_inner_exec_failures),
        cmocka_unit_test(test_inner_filter_reaches_command),
        cmocka_unit_test(test_inner_filters_from_host),
        cmocka_unit_test(test_inner_bad_filters),
        cmocka_unit_test(test_blob_parse),
        cmocka_unit_test(test_inner_without_ipv6),
        cmocka_unit_test(test_inner_port_in_use),
        cmocka_unit_test(test_inner_bad_args),
        cmocka_unit_test(test_handoff_valid_message),
        cmocka_unit_test(test_handoff_bogus_messages),
    };

    ssize_t n;
    int rc;

    if (argc == 2 && strcmp(argv[1], PROBE_UNIX) == 0)
        return probe_unix_main();
    n = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
    if (n > 0)
        self_exe[n] = '\0';
    signal(SIGPIPE, SIG_IGN);
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    if (mode_dir[0] != '\0') {
        static const char *const names[] = {"c", "n", "d"};
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
            (void)unlink(mode_path(names[i]));
            (void)rmdir(mode_path(names[i]));
        }
        (void)rmdir(mode_dir);
    }
    return rc;
}
