/* sandbox/inner.c - `sluice inner`, the first program inside the sandbox,
 * and the host's end of its handoff (design.md "The sandbox").
 *
 *   sluice inner --fd N [--allow-unix-sockets] [--transparent] [--watch-writes]
 *                [--guard-connect] [--http-port P] [--debug]
 *                [--socks-port P] [--limit-processes=N] [--limit-memory-mib=N]
 *                [--limit-open-files=N] [--reopen-ro=FD:OFFSET] -- CMD ARGS...
 *
 * inner runs in the sandbox's network namespace, where the only route out
 * is the proxy. In order it:
 *   1. parses its arguments (strict: any error exits 125);
 *   2. makes the proxy listeners there: 127.0.0.1:HTTP, 127.0.0.1:SOCKS,
 *      [::1]:HTTP, [::1]:SOCKS (defaults 3128 and 1080; port 0 = any, for
 *      tests). A v6 listener whose address or family is missing
 *      (EADDRNOTAVAIL, EAFNOSUPPORT) is skipped; any other failure is fatal;
 *   3. hands them to the host over fd N (its end of a socketpair) in one
 *      message, below, and closes its own copies;
 *   4. reads the host's next message: the filters the host compiled ('F',
 *      issue 25: sluice run's launcher sends them while bwrap starts), or
 *      the go byte ('G': the host of the tests, or of a command that
 *      reuses inner); EOF or any other byte exits 125 without running the
 *      command (fail closed: no command runs before the host serves its
 *      proxy);
 *   5. reopens the read-only stdio (--reopen-ro) and hands its regular
 *      files back, sets no_new_privs, enters the Landlock domain
 *      (landlock.c) and loads the seccomp filters: the host's, or after
 *      'G' ones it builds itself (seccomp.c); with notifications, hands
 *      the seccomp listener to the host;
 *   6. after 'F': waits for the go byte, as in 4;
 *   7. applies sandbox.limits, closes fd N and every other inherited fd >= 3
 *      (stdin, stdout and stderr are the command's and stay as they are);
 *   8. execs CMD (PATH search): 127 if it is not found, 126 if it cannot be
 *      executed, with "sluice inner: CMD: reason" on stderr.
 * Its pid becomes the command's pid. Between the filters and the go byte
 * inner makes no system call that a filter notifies (reads, the limits,
 * closing descriptors and execve are not write-intent calls): the host
 * serves the listener only from the go byte on.
 *
 * Wire format on the socketpair (version 2; both ends are this file):
 *   inner -> host, one sendmsg:
 *     payload  n bytes (2 <= n <= 4), one per listener, in order: 'H' for the
 *              HTTP proxy listener, 'S' for the SOCKS5 listener. At least
 *              one of each. inner sends H(v4) S(v4) [H(v6)] [S(v6)].
 *     control  one SCM_RIGHTS message carrying the n listening sockets in
 *              the payload's order. The host sets SO_PASSCRED on its end
 *              before starting bwrap, so the kernel also attaches
 *              SCM_CREDENTIALS with inner's pid translated into the host's
 *              pid namespace; inner sends no credentials itself.
 *   host -> inner, optional, at any time before 'G':
 *     'F'      a native uint32_t length L (at most INNER_FILTERS_MAX) and L
 *              bytes: the two seccomp programs (sb_seccomp_export). A
 *              filter only adds to the ones in force, so a command that
 *              runs inner and sends its own weakens nothing.
 *   host -> inner, one byte:
 *     'G'      "go": the host is serving the listeners; inner execs CMD.
 *              Anything else, or EOF, makes inner exit 125.
 *   inner -> host, --reopen-ro of regular files only: payload '0' + N per
 *   descriptor N, control: those descriptors (sb_handoff_recv_stdio); after
 *   'F' and before 'G', or (old order) after 'G'.
 *   inner -> host, transparent mode (--transparent), a guarded run
 *   (--guard-connect) or the write report (--watch-writes) only, once the
 *   filter with connect() or the write syscalls -> SCMP_ACT_NOTIFY is
 *   loaded (one listener for both: the kernel allows one per filter
 *   chain); after 'F' and before 'G', or (old order) after 'G':
 *     payload  'N'; control: one SCM_RIGHTS descriptor, the seccomp
 *              listener (sb_handoff_recv_notify checks it is one). inner
 *              closes its copy before it execs CMD: a command holding it
 *              could answer its own connect()s.
 * The socketpair is SOCK_STREAM: inner reads 'F' and what follows it in
 * parts (each other message is a single write). */
/* SCM_CREDENTIALS, struct ucred, MSG_CMSG_CLOEXEC and syscall() are Linux
 * or BSD extensions: the project builds with _POSIX_C_SOURCE=200809L only.
 * Before any include. */
#define _GNU_SOURCE
#include "sandbox/sandbox.h"

#include "common/common.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define INNER_FAIL 125
#define INNER_BACKLOG 511
#define INNER_MAX_L 4 /* listeners in one handoff: 2 ports x 2 families */
_Static_assert(INNER_MAX_L <= COMMON_FDS_MAX, "a handoff fits one message");
#define HANDOFF_GO 'G'
#define KIND_HTTP 'H'
#define KIND_SOCKS 'S'
#define KIND_NOTIFY 'N' /* transparent mode: the seccomp listener, after the go byte */
#define KIND_NO_NOTIFY 'n' /* no listener: a filter around sluice holds it (issue 25) */
#define HANDOFF_FILTERS 'F' /* issue 25: the host's compiled filters, before 'G' */
/* two programs of at most BPF_MAXINSNS instructions, each with its count */
#define INNER_FILTERS_MAX (2 * (4 + 4096 * 8))

static void inner_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void inner_err(const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    int n;

    /* one write: a SIGKILL (the launcher abandoning the run) leaves no half line */
    n = snprintf(line, sizeof line - 1, "sluice inner: ");
    va_start(ap, fmt);
    n += vsnprintf(line + n, sizeof line - 1 - (size_t)n, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof line - 2)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    (void)!write(STDERR_FILENO, line, (size_t)n);
}

/* ------------------------------------------------------------------------ */
/* inner                                                                     */

struct inner_args {
    int fd;
    int allow_unix_sockets;
    int allow_local_binding, allow_user_namespaces;
    int transparent, watch_writes, guard_connect;
    int debug;          /* --debug: a [SandboxDebug] line of inner's phases */
    unsigned reopen_ro; /* bit N: --reopen-ro=N:OFFSET */
    long long reopen_off[3];
    struct sb_limits limits;
    unsigned http_port, socks_port;
    char **cmd;
};

/* A decimal number in [0, max]: digits only, no sign, no spaces. */
static int parse_num(const char *s, unsigned long max, unsigned long *out)
{
    unsigned long v = 0;

    if (s == NULL || *s == '\0')
        return -1;
    for (; *s != '\0'; s++) {
        unsigned d;
        if (*s < '0' || *s > '9')
            return -1;
        d = (unsigned)(*s - '0');
        if (v > (max - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

enum inner_opt {
    OPT_FD = 256,
    OPT_HTTP_PORT,
    OPT_SOCKS_PORT,
    OPT_ALLOW_UNIX_SOCKETS,
    OPT_ALLOW_LOCAL_BINDING,
    OPT_ALLOW_USER_NAMESPACES,
    OPT_TRANSPARENT,
    OPT_WATCH_WRITES,
    OPT_GUARD_CONNECT,
    OPT_REOPEN_RO,
    OPT_LIMIT,
    OPT_DEBUG,
};

static const struct option inner_options[] = {
    {"fd", required_argument, NULL, OPT_FD},
    {"http-port", required_argument, NULL, OPT_HTTP_PORT},
    {"socks-port", required_argument, NULL, OPT_SOCKS_PORT},
    {"allow-unix-sockets", no_argument, NULL, OPT_ALLOW_UNIX_SOCKETS},
    {"allow-local-binding", no_argument, NULL, OPT_ALLOW_LOCAL_BINDING},
    {"allow-user-namespaces", no_argument, NULL, OPT_ALLOW_USER_NAMESPACES},
    {"transparent", no_argument, NULL, OPT_TRANSPARENT},
    {"watch-writes", no_argument, NULL, OPT_WATCH_WRITES},
    {"guard-connect", no_argument, NULL, OPT_GUARD_CONNECT},
    {"reopen-ro", required_argument, NULL, OPT_REOPEN_RO},
    {"debug", no_argument, NULL, OPT_DEBUG},
    /* sb_limits_parse_arg checks the name and the value */
    {"limit-processes", required_argument, NULL, OPT_LIMIT},
    {"limit-memory-mib", required_argument, NULL, OPT_LIMIT},
    {"limit-open-files", required_argument, NULL, OPT_LIMIT},
    {NULL, 0, NULL, 0},
};

static void inner_args_init(struct inner_args *a)
{
    memset(a, 0, sizeof(*a));
    a->fd = -1;
    a->http_port = 3128;
    a->socks_port = 1080;
}

/* The options whose value is the next argument. */
static const char *separate_value_option(int opt)
{
    return opt == OPT_FD ? "--fd" : opt == OPT_HTTP_PORT ? "--http-port" : "--socks-port";
}

/* 1 when element is option index as inner's caller (bwrap.c) writes it:
 * "--NAME=VALUE" for --reopen-ro and --limit-*, else "--NAME". getopt_long
 * also takes an unambiguous abbreviation and the other form of a value;
 * those stay unknown options, so the syntax inner accepts is what it was. */
static int as_written(const char *element, int index)
{
    const struct option *o = &inner_options[index];
    size_t n = strlen(o->name);

    if (strncmp(element, "--", 2) != 0 || strncmp(element + 2, o->name, n) != 0)
        return 0;
    if (o->val == OPT_REOPEN_RO || o->val == OPT_LIMIT)
        return element[2 + n] == '=';
    return element[2 + n] == '\0';
}

/* --fd, --http-port or --socks-port, each at most once. */
static int parse_fd_or_port(struct inner_args *a, int opt, const char *val, unsigned *seen)
{
    const char *name = separate_value_option(opt);
    unsigned bit = 1U << (opt - OPT_FD);
    unsigned long v;

    if (*seen & bit) {
        inner_err("option '%s' given twice", name);
        return -1;
    }
    *seen |= bit;
    if (opt == OPT_FD) {
        if (parse_num(val, INT_MAX, &v) < 0 || v < 3) {
            inner_err("--fd '%s' is not a descriptor number >= 3", val);
            return -1;
        }
        a->fd = (int)v;
        return 0;
    }
    if (parse_num(val, 65535, &v) < 0) {
        inner_err("%s '%s' is not a port number (0-65535)", name, val);
        return -1;
    }
    if (opt == OPT_HTTP_PORT)
        a->http_port = (unsigned)v;
    else
        a->socks_port = (unsigned)v;
    return 0;
}

/* --reopen-ro=FD:OFFSET, FD 0, 1 or 2. */
static int parse_reopen(struct inner_args *a, const char *val)
{
    unsigned long off;
    unsigned fd;

    if (val[0] < '0' || val[0] > '2' || val[1] != ':' ||
        parse_num(val + 2, (unsigned long)LLONG_MAX, &off) < 0) {
        inner_err("--reopen-ro '%s' is not FD:OFFSET with FD 0, 1 or 2", val);
        return -1;
    }
    fd = (unsigned)(val[0] - '0');
    a->reopen_ro |= 1U << fd;
    a->reopen_off[fd] = (long long)off;
    return 0;
}

/* --limit-NAME=N, checked (and its message written) by limits.c. */
static int parse_limit(struct inner_args *a, int index, const char *val)
{
    const char *name = inner_options[index].name;
    size_t len = strlen(name) + strlen(val) + 4;
    char *opt = malloc(len), why[160];
    int rc;

    if (opt == NULL) {
        inner_err("out of memory");
        return -1;
    }
    snprintf(opt, len, "--%s=%s", name, val);
    rc = sb_limits_parse_arg(&a->limits, opt, why, sizeof why);
    free(opt);
    if (rc < 0)
        inner_err("%s", why);
    return rc < 0 ? -1 : 0;
}

/* One option getopt_long returned; element is the argument it came from. */
static int parse_one(struct inner_args *a, int c, int index, const char *element, unsigned *seen)
{
    if (c >= OPT_FD && !as_written(element, index))
        c = '?';
    if (c == ':' && (optopt == OPT_FD || optopt == OPT_HTTP_PORT || optopt == OPT_SOCKS_PORT) &&
        strcmp(element, separate_value_option(optopt)) == 0) {
        inner_err("option '%s' needs a value", element);
        return -1;
    }
    switch (c) {
    case OPT_FD:
    case OPT_HTTP_PORT:
    case OPT_SOCKS_PORT:
        return parse_fd_or_port(a, c, optarg, seen);
    case OPT_ALLOW_UNIX_SOCKETS:
        a->allow_unix_sockets = 1;
        return 0;
    case OPT_ALLOW_LOCAL_BINDING:
        a->allow_local_binding = 1;
        return 0;
    case OPT_ALLOW_USER_NAMESPACES:
        a->allow_user_namespaces = 1;
        return 0;
    case OPT_TRANSPARENT:
        a->transparent = 1;
        return 0;
    case OPT_WATCH_WRITES:
        a->watch_writes = 1;
        return 0;
    case OPT_GUARD_CONNECT:
        a->guard_connect = 1;
        return 0;
    case OPT_DEBUG:
        a->debug = 1;
        return 0;
    case OPT_REOPEN_RO:
        return parse_reopen(a, optarg);
    case OPT_LIMIT:
        return parse_limit(a, index, optarg);
    default: /* '?', or ':' for an option written otherwise */
        if (strncmp(element, "--", 2) != 0)
            inner_err("expected '--' before the command '%s'", element);
        else
            inner_err("unknown option '%s'", element);
        return -1;
    }
}

/* Strict: "--" ends the options and a command must follow it; any error
 * is reported and makes inner exit 125. */
static int parse_args(int argc, char **argv, struct inner_args *a)
{
    unsigned seen = 0;
    int c, index, prev, dashdash;

    inner_args_init(a);
    optind = 1;
    opterr = 0;
    /* argv[0] is the subcommand's name ("inner"); '+': stop at the first
     * argument that is not an option */
    for (;;) {
        prev = optind;
        index = -1;
        c = getopt_long(argc, argv, "+:", inner_options, &index);
        if (c == -1)
            break;
        if (parse_one(a, c, index, argv[prev], &seen) < 0)
            return -1;
    }
    dashdash = optind == prev + 1 && strcmp(argv[prev], "--") == 0;
    if (!dashdash && optind < argc) {
        inner_err("expected '--' before the command '%s'", argv[optind]);
        return -1;
    }
    if ((seen & 1U) == 0) {
        inner_err("--fd is required");
        return -1;
    }
    if (!dashdash) {
        inner_err("expected '--' before the command");
        return -1;
    }
    if (optind >= argc || argv[optind][0] == '\0') {
        inner_err("no command after '--'");
        return -1;
    }
    if (fcntl(a->fd, F_GETFD) < 0) {
        inner_err("--fd %d: %s", a->fd, strerror(errno));
        return -1;
    }
    a->cmd = argv + optind;
    return 0;
}

/* A listening TCP socket on the loopback address of FAMILY; -errno on
 * failure with *what naming the step. */
static int make_listener(int family, unsigned port, const char **what)
{
    const int one = 1;
    union {
        struct sockaddr sa;
        struct sockaddr_in in4;
        struct sockaddr_in6 in6;
    } addr;
    socklen_t alen;
    int fd, e;

    memset(&addr, 0, sizeof addr);
    if (family == AF_INET) {
        addr.in4.sin_family = AF_INET;
        addr.in4.sin_port = htons((uint16_t)port);
        addr.in4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        alen = sizeof addr.in4;
    } else {
        addr.in6.sin6_family = AF_INET6;
        addr.in6.sin6_port = htons((uint16_t)port);
        addr.in6.sin6_addr = in6addr_loopback;
        alen = sizeof addr.in6;
    }

    *what = "socket";
    fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    *what = "setsockopt(SO_REUSEADDR)";
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0)
        goto fail;
    if (family == AF_INET6) {
        *what = "setsockopt(IPV6_V6ONLY)";
        if (setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) < 0)
            goto fail;
    }
    *what = "bind";
    if (bind(fd, &addr.sa, alen) < 0)
        goto fail;
    *what = "listen";
    if (listen(fd, INNER_BACKLOG) < 0)
        goto fail;
    return fd;
fail:
    e = errno;
    close(fd);
    return -e;
}

/* Closes every descriptor >= 3. */
static void close_from_3(void)
{
    struct rlimit rl;
    unsigned long max;
    DIR *d;

#ifdef SYS_close_range
    if (syscall(SYS_close_range, 3U, ~0U, 0U) == 0)
        return;
#endif
    /* Before Linux 5.9. */
    d = opendir("/proc/self/fd");
    if (d != NULL) {
        int dfd = dirfd(d);
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            unsigned long v;
            if (parse_num(e->d_name, INT_MAX, &v) == 0 && v >= 3 && (int)v != dfd)
                close((int)v);
        }
        closedir(d);
        return;
    }
    /* No /proc either: every possible number. */
    max = 65536;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        max = rl.rlim_cur < (1UL << 20) ? (unsigned long)rl.rlim_cur : (1UL << 20);
    for (unsigned long fd = 3; fd < max; fd++)
        close((int)fd);
}

/* Reads exactly LEN bytes; 0, or -1 after a message naming WHAT. */
static int read_exact(int sock, void *buf, size_t len, const char *what)
{
    char *p = buf;

    while (len > 0) {
        ssize_t r = read(sock, p, len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            inner_err("reading %s on fd %d: %s", what, sock, strerror(errno));
            return -1;
        }
        if (r == 0) {
            inner_err("the host closed fd %d before starting the command", sock);
            return -1;
        }
        p += r;
        len -= (size_t)r;
    }
    return 0;
}

/* The host's next message: 'G' (go) or, before it, 'F' (the filters);
 * *c is which. 0, or -1 (message printed) on anything else. */
static int next_message(int sock, int filters_ok, unsigned char *c)
{
    if (read_exact(sock, c, 1, "the host's go") < 0)
        return -1;
    if (*c != HANDOFF_GO && !(filters_ok && *c == HANDOFF_FILTERS)) {
        inner_err("unexpected byte 0x%02x from the host on fd %d", (unsigned)*c, sock);
        return -1;
    }
    return 0;
}

/* After 'F': a native uint32_t length and the filter blob
 * (sb_seccomp_export). 0 with *blob malloc'ed, or -1 after a message. */
static int read_filters(int sock, unsigned char **blob, size_t *len)
{
    uint32_t n;

    *blob = NULL;
    if (read_exact(sock, &n, sizeof n, "the host's filters") < 0)
        return -1;
    if (n == 0 || n > INNER_FILTERS_MAX) {
        inner_err("the host's filters: %u bytes", (unsigned)n);
        return -1;
    }
    *blob = malloc(n);
    if (*blob == NULL) {
        inner_err("out of memory");
        return -1;
    }
    if (read_exact(sock, *blob, n, "the host's filters") < 0) {
        free(*blob);
        *blob = NULL;
        return -1;
    }
    *len = n;
    return 0;
}

/* --reopen-ro=FD:OFFSET (allowNestedUserNamespaces, where the Landlock
 * domain has no filesystem rules, or a kernel without Landlock): the
 * launcher gave bwrap /dev/null as FD and the read-only regular file the
 * caller gave as FD on another descriptor, which bwrap bound at
 * SB_STDIO_RO_FMT on a read-only mount and closed. FD becomes that file
 * opened there, at OFFSET, so that reopening /proc/self/fd/FD for writing
 * gets EROFS instead of reaching the host's writable mount of it, and no
 * process of the sandbox (bwrap's init included) holds a descriptor on
 * that mount. 0, or -1 after a message. */
static int reopen_read_only(int fd, long long off)
{
    char path[64];
    struct stat st;
    int nfd;

    snprintf(path, sizeof path, SB_STDIO_RO_FMT, fd);
    nfd = open(path, O_RDONLY | O_NOCTTY | O_CLOEXEC);
    if (nfd < 0) {
        inner_err("--reopen-ro=%d: %s: %s", fd, path, strerror(errno));
        return -1;
    }
    if (fstat(nfd, &st) < 0 || (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))) {
        inner_err("--reopen-ro=%d: %s is not a regular file or a directory", fd, path);
        goto fail;
    }
    if (lseek(nfd, (off_t)off, SEEK_SET) != (off_t)off || dup2(nfd, fd) < 0) {
        inner_err("--reopen-ro=%d: %s", fd, strerror(errno));
        goto fail;
    }
    close(nfd);
    return 0;
fail:
    close(nfd);
    return -1;
}

/* rt-3 #5: the descriptors reopen_read_only() made of regular files go
 * back to the host (payload '0' + N for fd N), which keeps them and, when
 * the command is done, moves the caller's offset to where the command's
 * reads left this shared one: `{ sluice run -- head -n1; sluice run --
 * head -n1; } < file` reads two lines, as without the re-bind. 0, or -1
 * after a message. */
static int send_reopened(int sock, unsigned reopen)
{
    int fds[3];
    char kinds[3];
    size_t n = 0;
    int rc;

    for (int fd = 0; fd <= 2; fd++) {
        struct stat st;
        if ((reopen & (1U << fd)) == 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
            continue;
        fds[n] = fd;
        kinds[n] = (char)('0' + fd);
        n++;
    }
    if (n == 0)
        return 0;
    rc = common_send_fds(sock, kinds, n, fds, n);
    if (rc < 0) {
        inner_err("sending the re-bound stdio descriptors on fd %d: %s", sock, strerror(-rc));
        return -1;
    }
    return 0;
}

/* PID 1 of the sandbox is bwrap's init: same uid as the command, dumpable,
 * and not under the seccomp filter (it was forked before inner ran). A
 * command that can ptrace it or write its /proc/1/mem makes it run any
 * syscall the filter refuses. The Landlock domain of landlock.c stops that
 * (a process in a domain may only ptrace processes in the same domain or
 * one nested in it, and bwrap's init is in none), besides closing host
 * FIFOs and device nodes outside the writable paths. */

/* Steps 2 and 3: the proxy listeners, made here and handed to the host.
 * 0, or -1 after a message. */
static int hand_off_listeners(const struct inner_args *a)
{
    static const struct {
        int family;
        char kind;
    } plan[INNER_MAX_L] = {
        {AF_INET, KIND_HTTP},
        {AF_INET, KIND_SOCKS},
        {AF_INET6, KIND_HTTP},
        {AF_INET6, KIND_SOCKS},
    };
    int fds[INNER_MAX_L];
    char kinds[INNER_MAX_L];
    size_t n = 0;
    int rc;

    for (size_t i = 0; i < INNER_MAX_L; i++) {
        unsigned port = plan[i].kind == KIND_HTTP ? a->http_port : a->socks_port;
        const char *what = "";
        int fd = make_listener(plan[i].family, port, &what);
        if (fd < 0) {
            if (plan[i].family == AF_INET6 && (fd == -EADDRNOTAVAIL || fd == -EAFNOSUPPORT))
                continue; /* no IPv6 loopback in this namespace */
            inner_err("%s listener on %s:%u: %s: %s", plan[i].kind == KIND_HTTP ? "http" : "socks",
                      plan[i].family == AF_INET ? "127.0.0.1" : "[::1]", port, what, strerror(-fd));
            for (size_t j = 0; j < n; j++)
                close(fds[j]);
            return -1;
        }
        fds[n] = fd;
        kinds[n] = plan[i].kind;
        n++;
    }
    rc = common_send_fds(a->fd, kinds, n, fds, n);
    for (size_t j = 0; j < n; j++)
        close(fds[j]);
    if (rc < 0) {
        inner_err("sending the listeners on fd %d: %s", a->fd, strerror(-rc));
        return -1;
    }
    return 0;
}

/* 1 when the seccomp listener goes to the host after the filter, which
 * keeps fd N open until then. */
static int notifies(const struct inner_args *a)
{
    return a->transparent || a->watch_writes || a->guard_connect;
}

/* The read-only stdio reopened on its re-bind, and handed back. 0, or -1
 * after a message. */
static int reopen_stdio(const struct inner_args *a)
{
    for (int fd = 0; fd <= 2; fd++)
        if ((a->reopen_ro & (1U << fd)) && reopen_read_only(fd, a->reopen_off[fd]) < 0)
            return -1;
    return send_reopened(a->fd, a->reopen_ro);
}

/* no_new_privs and the Landlock domain, with a warning for what this mode
 * or this kernel leaves open. 0, or -1 after a message. */
static int confine_landlock(const struct inner_args *a)
{
    char err[256];
    int rc;

    if (prctl(PR_SET_NO_NEW_PRIVS, 1UL, 0UL, 0UL, 0UL) < 0) {
        inner_err("prctl(PR_SET_NO_NEW_PRIVS): %s", strerror(errno));
        return -1;
    }
    rc = sb_landlock_confine(a->allow_user_namespaces, err, sizeof err);
    if (rc < 0) {
        inner_err("%s", err);
        return -1;
    }
    if (a->allow_user_namespaces)
        inner_err("warning: allowNestedUserNamespaces: no Landlock filesystem rules (they would "
                  "forbid a nested sandbox's mounts): host FIFOs and device nodes outside the "
                  "writable paths, and FIFOs or devices given read-only on stdin, stdout or "
                  "stderr, can be opened for writing");
    if (rc > 0 && a->allow_user_namespaces)
        inner_err("warning: this kernel has no Landlock scopes (Linux 6.12): with "
                  "allowNestedUserNamespaces the command runs in no Landlock domain, so only "
                  "seccomp keeps it from PID 1 (bwrap's init): /proc/1/mem, and /proc/1/fd/N "
                  "(the stdin, stdout and stderr it was given, but a read-only regular file), "
                  "can be opened");
    else if (rc > 0)
        inner_err("warning: this kernel has no Landlock: host FIFOs and device nodes outside the "
                  "writable paths are not closed (nor a FIFO or device given read-only on "
                  "stdin, stdout or stderr), and only seccomp keeps the command from PID 1 "
                  "(bwrap's init): /proc/1/mem, and /proc/1/fd/N (the stdin, stdout and stderr it "
                  "was given, but a read-only regular file), can be opened");
    return 0;
}

/* Step 6: the seccomp filters (the host's BLOB, or built here when the
 * host sent none), and their listener to the host (no copy stays here: a
 * command holding it could answer its own connect()s). 0, or -1 after a
 * message. */
static int confine_seccomp(const struct inner_args *a, const unsigned char *blob, size_t len)
{
    struct sb_seccomp_opts so;
    char err[256];
    int rc, notify_fd = -1;

    memset(&so, 0, sizeof so);
    so.allow_unix_sockets = a->allow_unix_sockets;
    so.allow_local_binding = a->allow_local_binding;
    so.allow_user_namespaces = a->allow_user_namespaces;
    so.transparent = a->transparent;
    so.watch_writes = a->watch_writes;
    so.guard_connect = a->guard_connect;
    so.notify_fd = &notify_fd;
    if (blob != NULL)
        rc = sb_seccomp_load_blob(&so, blob, len, err, sizeof err);
    else
        rc = sb_seccomp_load(&so, err, sizeof err);
    if (rc < 0) {
        inner_err("%s", err);
        return -1;
    }
    if (notifies(a) && notify_fd < 0) {
        /* loaded without the write report's rules (a listener is taken by
         * a filter around sluice): the host runs without the report */
        const char kind = KIND_NO_NOTIFY;
        ssize_t w;
        do
            w = write(a->fd, &kind, 1);
        while (w < 0 && errno == EINTR);
        if (w != 1) {
            inner_err("telling the host on fd %d: %s", a->fd, strerror(errno));
            return -1;
        }
    } else if (notifies(a)) {
        const char kind = KIND_NOTIFY;
        rc = common_send_fds(a->fd, &kind, 1, &notify_fd, 1);
        close(notify_fd);
        if (rc < 0) {
            inner_err("sending the seccomp listener on fd %d: %s", a->fd, strerror(-rc));
            return -1;
        }
    }
    return 0;
}

/* --debug: where inner's time went, in ms since its start. */
struct inner_clock {
    int64_t t0, listeners, filters, landlock, seccomp, go;
};

static void inner_debug(const struct inner_args *a, const struct inner_clock *k)
{
    if (!a->debug)
        return;
    fprintf(stderr,
            "[SandboxDebug] inner (ms since its start): listeners sent %.2f, filters %s %.2f, "
            "Landlock %.2f, seccomp %.2f, go %.2f\n",
            (double)(k->listeners - k->t0) / 1000.0, k->filters != 0 ? "from the host" : "built",
            (double)((k->filters != 0 ? k->filters : k->go) - k->t0) / 1000.0,
            (double)(k->landlock - k->t0) / 1000.0, (double)(k->seccomp - k->t0) / 1000.0,
            (double)(k->go - k->t0) / 1000.0);
}

/* Steps 4 to 6. The host either sends the filters it compiled ('F')
 * before 'G', and inner seals itself (Landlock, seccomp, the listener
 * handed over) while the host finishes its side, then waits for 'G'; or
 * only 'G' (the host of the tests, or of a command reusing inner), and
 * inner builds the filters itself after it. 0, or -1 after a message. */
static int seal(const struct inner_args *a, struct inner_clock *k)
{
    unsigned char c, *blob = NULL;
    size_t len = 0;
    int rc = -1;

    if (next_message(a->fd, 1, &c) < 0)
        return -1;
    if (c == HANDOFF_FILTERS) {
        if (read_filters(a->fd, &blob, &len) < 0)
            return -1;
        k->filters = common_mono_us();
    } else {
        k->go = common_mono_us();
    }
    if (reopen_stdio(a) < 0 || confine_landlock(a) < 0)
        goto out;
    k->landlock = common_mono_us();
    if (confine_seccomp(a, blob, len) < 0)
        goto out;
    k->seccomp = common_mono_us();
    if (c == HANDOFF_FILTERS) {
        if (next_message(a->fd, 0, &c) < 0)
            goto out;
        k->go = common_mono_us();
    }
    rc = 0;
out:
    free(blob);
    return rc;
}

int sb_inner_main(int argc, char **argv)
{
    struct inner_clock k = {.t0 = common_mono_us()};
    struct inner_args a;
    char err[256];
    int e;

    if (parse_args(argc, argv, &a) < 0 || hand_off_listeners(&a) < 0)
        return INNER_FAIL;
    k.listeners = common_mono_us();
    if (seal(&a, &k) < 0)
        return INNER_FAIL;
    inner_debug(&a, &k);
    /* sandbox.limits last: nothing of inner's own (an ASan build's
     * allocator, Landlock's mountinfo reading) runs under them */
    if (sb_limits_apply(&a.limits, err, sizeof err) < 0) {
        inner_err("%s", err);
        return INNER_FAIL;
    }
    /* every inherited descriptor but 0-2: the socketpair (the seccomp
     * listener's copy went with the message) */
    close(a.fd);
    close_from_3();
    execvp(a.cmd[0], a.cmd);
    e = errno;
    inner_err("%s: %s", a.cmd[0], strerror(e));
    return (e == ENOENT || e == ENOTDIR) ? 127 : 126;
}

/* ------------------------------------------------------------------------ */
/* host side                                                                 */

#define RX_MAX_FDS 16 /* room to see (and close) more than a valid message has */

static int handoff_fail(char *err, size_t errlen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int handoff_fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
    va_list ap;
    int k;

    if (err != NULL && errlen > 0) {
        k = snprintf(err, errlen, "handoff from sluice inner: ");
        if (k >= 0 && (size_t)k < errlen) {
            va_start(ap, fmt);
            vsnprintf(err + k, errlen - (size_t)k, fmt, ap);
            va_end(ap);
        }
    }
    return rc;
}

/* Waits until SOCK is readable; 0, -ETIMEDOUT or -errno. */
static int wait_readable(int sock, unsigned timeout_ms)
{
    const int64_t deadline = common_mono_ms() + (int64_t)timeout_ms;

    for (;;) {
        struct pollfd p = {.fd = sock, .events = POLLIN};
        int64_t left = deadline - common_mono_ms();
        int r;

        if (left < 0)
            left = 0;
        r = poll(&p, 1, left > INT_MAX ? INT_MAX : (int)left);
        if (r > 0)
            return 0; /* readable, EOF or error: recvmsg tells which */
        if (r == 0) {
            if (left == 0)
                return -ETIMEDOUT;
            continue;
        }
        if (errno != EINTR)
            return -errno;
    }
}

/* 0 when FD is a listening TCP (v4 or v6) socket; else a reason. */
static const char *listener_problem(int fd)
{
    int v = 0;
    socklen_t len = sizeof v;

    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &len) < 0)
        return errno == ENOTSOCK ? "not a socket" : "SO_TYPE failed";
    if (v != SOCK_STREAM)
        return "not a stream socket";
    len = sizeof v;
    if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &len) < 0)
        return "SO_DOMAIN failed";
    if (v != AF_INET && v != AF_INET6)
        return "not an IPv4 or IPv6 socket";
    len = sizeof v;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &len) < 0)
        return "SO_ACCEPTCONN failed";
    if (v != 1)
        return "not listening";
    return NULL;
}

/* One message from inner: what the descriptors and credentials it carried
 * became. Every descriptor is the caller's: up to RX_MAX_FDS in fds, the
 * rest closed at once and counted in extra. */
struct rx {
    int fds[RX_MAX_FDS];
    size_t nfds, extra;
    struct ucred cred;
    int have_cred;
    int flags; /* msg_flags: MSG_CTRUNC, MSG_TRUNC */
};

/* Receives one message (the caller waited for it) into payload and rx. The
 * payload's length, or -errno (no descriptor is then held). */
static ssize_t recv_handoff(int sock, void *payload, size_t len, struct rx *rx)
{
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(sizeof(int) * RX_MAX_FDS)];
    } ctl;
    struct iovec iov;
    struct msghdr msg;
    struct cmsghdr *c;
    ssize_t r;

    memset(rx, 0, sizeof *rx);
    memset(&ctl, 0, sizeof ctl);
    memset(&msg, 0, sizeof msg);
    iov.iov_base = payload;
    iov.iov_len = len;
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctl.buf;
    msg.msg_controllen = sizeof ctl.buf;
    do
        r = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    while (r < 0 && errno == EINTR);
    if (r < 0)
        return -errno;
    rx->flags = msg.msg_flags;
    /* Take ownership of every descriptor that arrived before judging. */
    for (c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET)
            continue;
        if (c->cmsg_type == SCM_RIGHTS && c->cmsg_len >= CMSG_LEN(0)) {
            size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t i = 0; i < k; i++) {
                int fd;
                memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
                if (rx->nfds < RX_MAX_FDS) {
                    rx->fds[rx->nfds++] = fd;
                } else {
                    close(fd);
                    rx->extra++;
                }
            }
        } else if (c->cmsg_type == SCM_CREDENTIALS &&
                   c->cmsg_len >= CMSG_LEN(sizeof(struct ucred))) {
            memcpy(&rx->cred, CMSG_DATA(c), sizeof rx->cred);
            rx->have_cred = 1;
        }
    }
    return r;
}

int sb_handoff_send_filters(int sock, const struct sb_seccomp_opts *o, char *err, size_t errlen)
{
    unsigned char *blob = NULL, *msg = NULL;
    size_t len = 0, off = 0, total;
    uint32_t n;
    int rc;

    rc = sb_seccomp_export(o, &blob, &len, err, errlen);
    if (rc < 0)
        return 1; /* nothing sent: inner builds its own after 'G' */
    if (len == 0 || len > INNER_FILTERS_MAX) {
        free(blob);
        return handoff_fail(err, errlen, -EINVAL, "the filters are %zu bytes", len);
    }
    /* one write: 'F', the length, the blob */
    n = (uint32_t)len;
    total = 1 + sizeof n + len;
    msg = malloc(total);
    if (msg == NULL) {
        free(blob);
        return handoff_fail(err, errlen, -ENOMEM, "out of memory");
    }
    msg[0] = HANDOFF_FILTERS;
    memcpy(msg + 1, &n, sizeof n);
    memcpy(msg + 1 + sizeof n, blob, len);
    free(blob);
    while (off < total) {
        ssize_t w = send(sock, msg + off, total - off, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            rc = handoff_fail(err, errlen, -errno, "sending the filters: %s", strerror(errno));
            break;
        }
        off += (size_t)w;
    }
    free(msg);
    return rc;
}

int sb_handoff_recv_stdio(int sock, unsigned timeout_ms, unsigned want, int fds[3], char *err,
                          size_t errlen)
{
    unsigned char payload[4];
    unsigned got = 0;
    size_t nwant = 0;
    struct rx rx;
    ssize_t r;
    int rc;

    if (err != NULL && errlen > 0)
        err[0] = '\0';
    for (int fd = 0; fd <= 2; fd++)
        nwant += (want >> fd) & 1U;
    rc = wait_readable(sock, timeout_ms);
    if (rc < 0)
        return handoff_fail(err, errlen, rc, "no re-bound stdio descriptors: %s", strerror(-rc));
    r = recv_handoff(sock, payload, sizeof payload, &rx);
    if (r < 0)
        return handoff_fail(err, errlen, (int)r, "recvmsg: %s", strerror((int)-r));
    rc = 0;
    if (r == 0)
        rc = handoff_fail(err, errlen, -EPIPE,
                          "inner exited before sending the re-bound stdio descriptors");
    else if ((size_t)r != nwant || rx.nfds != nwant || rx.extra > 0 || (rx.flags & MSG_CTRUNC))
        rc = handoff_fail(err, errlen, -EPROTO, "expected %zu re-bound stdio descriptors", nwant);
    for (size_t i = 0; rc == 0 && i < rx.nfds; i++) {
        int n = payload[i] - '0';
        struct stat a, b;
        if (n < 0 || n > 2 || !(want & (1U << n)) || (got & (1U << n)) ||
            fstat(rx.fds[i], &a) < 0 || fstat(n, &b) < 0 || !S_ISREG(a.st_mode) ||
            a.st_dev != b.st_dev || a.st_ino != b.st_ino)
            rc = handoff_fail(err, errlen, -EPROTO,
                              "a re-bound stdio descriptor is not the caller's file");
        else
            got |= 1U << n;
    }
    for (size_t i = 0; i < rx.nfds; i++) {
        int n = payload[i] - '0';
        if (rc == 0)
            fds[n] = rx.fds[i];
        else
            close(rx.fds[i]);
    }
    return rc;
}

int sb_handoff_recv_notify(int sock, unsigned timeout_ms, char *err, size_t errlen)
{
    unsigned char payload[4];
    struct rx rx;
    char path[64], link[64];
    ssize_t r, k;
    int rc;

    if (err != NULL && errlen > 0)
        err[0] = '\0';
    rc = wait_readable(sock, timeout_ms);
    if (rc < 0)
        return handoff_fail(err, errlen, rc, "no seccomp listener: %s", strerror(-rc));
    r = recv_handoff(sock, payload, sizeof payload, &rx);
    if (r < 0)
        return handoff_fail(err, errlen, (int)r, "recvmsg: %s", strerror((int)-r));
    if (r == 1 && payload[0] == KIND_NO_NOTIFY && rx.nfds == 0 && rx.extra == 0)
        return handoff_fail(err, errlen, -EBUSY,
                            "no seccomp listener: a filter around sluice already has the one "
                            "listener a filter chain may have");
    if (r != 1 || payload[0] != KIND_NOTIFY || rx.nfds != 1 || rx.extra > 0 ||
        (rx.flags & MSG_CTRUNC)) {
        for (size_t i = 0; i < rx.nfds; i++)
            close(rx.fds[i]);
        if (r == 0)
            return handoff_fail(err, errlen, -EPIPE,
                                "inner exited before sending the seccomp listener");
        return handoff_fail(err, errlen, -EPROTO, "expected one seccomp listener");
    }
    snprintf(path, sizeof path, "/proc/self/fd/%d", rx.fds[0]);
    k = readlink(path, link, sizeof link - 1);
    if (k <= 0 || (link[k] = '\0', strcmp(link, "anon_inode:seccomp notify") != 0)) {
        close(rx.fds[0]);
        return handoff_fail(err, errlen, -EPROTO, "the descriptor is not a seccomp listener");
    }
    return rx.fds[0];
}

int sb_handoff_recv(int sock, unsigned timeout_ms, struct sb_handoff *h, char *err, size_t errlen)
{
    unsigned char payload[16];
    struct rx rx;
    size_t nfds, nh = 0, ns = 0;
    int *fds = rx.fds;
    ssize_t r;
    int rc;

    if (err != NULL && errlen > 0)
        err[0] = '\0';
    rc = wait_readable(sock, timeout_ms);
    if (rc == -ETIMEDOUT)
        return handoff_fail(err, errlen, rc, "no listeners within %u ms", timeout_ms);
    if (rc < 0)
        return handoff_fail(err, errlen, rc, "poll: %s", strerror(-rc));

    r = recv_handoff(sock, payload, sizeof payload, &rx);
    if (r == -ECONNRESET) /* inner (or bwrap) gone, with the filters unread */
        r = 0;
    if (r < 0)
        return handoff_fail(err, errlen, (int)r, "recvmsg: %s", strerror((int)-r));
    nfds = rx.nfds;

    if (rx.flags & MSG_CTRUNC) {
        rc = handoff_fail(err, errlen, -EPROTO, "control data truncated");
        goto bad;
    }
    if (rx.flags & MSG_TRUNC) {
        rc = handoff_fail(err, errlen, -EPROTO, "message longer than %zu bytes", sizeof payload);
        goto bad;
    }
    if (r == 0 && nfds == 0) {
        rc = handoff_fail(err, errlen, -EPIPE, "inner exited before sending its listeners");
        goto bad;
    }
    if (rx.extra > 0 || nfds != (size_t)r) {
        rc = handoff_fail(err, errlen, -EPROTO, "%zu descriptors for %zd kinds", nfds + rx.extra, r);
        goto bad;
    }
    if (nfds < 2 || nfds > INNER_MAX_L) {
        rc = handoff_fail(err, errlen, -EPROTO, "%zu listeners (expected 2 to %d)", nfds,
                          INNER_MAX_L);
        goto bad;
    }
    for (size_t i = 0; i < nfds; i++) {
        const char *why;
        if (payload[i] == KIND_HTTP) {
            nh++;
        } else if (payload[i] == KIND_SOCKS) {
            ns++;
        } else {
            rc = handoff_fail(err, errlen, -EPROTO, "unknown listener kind 0x%02x",
                              (unsigned)payload[i]);
            goto bad;
        }
        why = listener_problem(fds[i]);
        if (why != NULL) {
            rc = handoff_fail(err, errlen, -EPROTO, "descriptor %zu (%c): %s", i, (char)payload[i],
                              why);
            goto bad;
        }
    }
    if (nh == 0 || ns == 0) {
        rc = handoff_fail(err, errlen, -EPROTO, "no %s listener", nh == 0 ? "http" : "socks");
        goto bad;
    }

    for (size_t i = 0; i < INNER_MAX_L; i++) {
        h->fds[i] = i < nfds ? fds[i] : -1;
        h->kind[i] = (i < nfds && payload[i] == KIND_SOCKS) ? SB_L_SOCKS : SB_L_HTTP;
    }
    h->n = nfds;
    h->cmd_pid = (rx.have_cred && rx.cred.pid > 0) ? (int)rx.cred.pid : 0;
    return 0;

bad:
    for (size_t i = 0; i < nfds; i++)
        close(fds[i]);
    return rc;
}
