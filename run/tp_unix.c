/* run/tp_unix.c - transparent mode: a connect() or bind() to a Unix
 * socket path (network.allowAllUnixSockets), run by a short-lived child
 * in the caller's namespaces, root, working directory and credentials. */
#define _GNU_SOURCE
#include "run/transparent_int.h"

#include "common/common.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* The value(s) of field KEY ("Uid", "Groups", ...) of a /proc/PID/status
 * text: up to MAX numbers in BASE into V. The count, or -1 when the field is
 * missing. */
static int status_field(const char *buf, const char *key, unsigned long long *v, int max, int base)
{
    size_t klen = strlen(key);
    const char *p = buf;
    int n = 0;

    for (;;) {
        if (strncmp(p, key, klen) == 0 && p[klen] == ':')
            break;
        p = strchr(p, '\n');
        if (p == NULL)
            return -1;
        p++;
    }
    p += klen + 1;
    while (n < max) {
        char *end;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '\n' || *p == '\0')
            break;
        v[n] = strtoull(p, &end, base);
        if (end == p)
            return -1;
        n++;
        p = end;
    }
    return n;
}

#define TP_MAX_GROUPS 256

/* The child of unix_path_call: becomes the caller as far as a Unix path
 * lookup can tell, then runs the call on S (sluice's copy of the checked
 * socket) with the address read_call read, and writes its errno (0 for
 * success) to OUT. On a step that fails it writes nothing and exits: the
 * call is then refused (EPERM). Only system calls (and strtoull on a local
 * buffer) after fork(): the host may have threads.
 *   - the user namespace that owns the caller's mount namespace (USERFD, -1
 *     when it is sluice's): the caller's, or an ancestor of it (bwrap
 *     nests one user namespace in another, and the command's is the inner
 *     one); sluice owns it, so the next steps are allowed there, and
 *     /proc/PID/status, opened after it through PROCFD, gives the caller's
 *     ids as that namespace maps them (the same kernel ids);
 *   - its mount namespace (MNTFD, -1 when sluice's), then its root and
 *     working directory (ROOTFD, CWDFD: /proc/PID/root and cwd), so that an
 *     absolute path is looked up in its view and a relative one from its
 *     working directory;
 *   - its supplementary groups (when setgroups() is denied in that
 *     namespace, bwrap's unprivileged case, they must already be sluice's),
 *     its real, effective, saved and filesystem gids and uids, its umask
 *     (the mode of the file bind() makes);
 *   - its effective and permitted capabilities when USERFD is the caller's
 *     own user namespace (OWNCAPS), else none (the caller's would count in
 *     its namespace, not in the ancestor's), and none at all if they cannot
 *     be set: fewer rights than the caller's only ever refuse;
 *   - a Landlock domain of its own (handling only LANDLOCK_ACCESS_FS_MAKE_BLOCK,
 *     which connect() and bind() never need), for Landlock's ptrace scoping:
 *     the command cannot follow /proc/1/fd/N or /proc/1/root (bwrap's init
 *     is in no domain), and the child must not either. On a kernel without
 *     Landlock the command has no such scoping and neither has the child.
 * /proc/self and /proc/thread-self name no process for the child (it is not
 * in the sandbox's PID namespace): a path through them fails with ENOENT,
 * never reaches sluice's own descriptors. */
static void unix_child(int procfd, int userfd, int mntfd, int rootfd, int cwdfd, int owncaps, int s,
                       const struct tp_call *c, int out)
{
    static char buf[8192];
    unsigned long long uid[4], gid[4], grp[TP_MAX_GROUPS], um[1], eff[1], prm[1];
    gid_t groups[TP_MAX_GROUPS], mine[TP_MAX_GROUPS];
    struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct cap[2];
    size_t have = 0;
    ssize_t r;
    int fd, ng, e;

    if (userfd >= 0 && syscall(SYS_setns, userfd, CLONE_NEWUSER) < 0)
        _exit(1);
    fd = openat(procfd, "status", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        _exit(2);
    while (have < sizeof(buf) - 1 && (r = read(fd, buf + have, sizeof(buf) - 1 - have)) > 0)
        have += (size_t)r;
    buf[have] = '\0';
    if (status_field(buf, "Uid", uid, 4, 10) != 4 || status_field(buf, "Gid", gid, 4, 10) != 4 ||
        status_field(buf, "Umask", um, 1, 8) != 1 || status_field(buf, "CapEff", eff, 1, 16) != 1 ||
        status_field(buf, "CapPrm", prm, 1, 16) != 1)
        _exit(3);
    ng = status_field(buf, "Groups", grp, TP_MAX_GROUPS, 10);
    if (ng < 0 || ng == TP_MAX_GROUPS)
        _exit(3);
    if (mntfd >= 0 && syscall(SYS_setns, mntfd, CLONE_NEWNS) < 0)
        _exit(4);
    if (fchdir(rootfd) < 0 || chroot(".") < 0 || fchdir(cwdfd) < 0)
        _exit(5);
    for (int i = 0; i < ng; i++)
        groups[i] = (gid_t)grp[i];
    if (setgroups((size_t)ng, groups) < 0) {
        /* setgroups denied in that namespace: sluice's groups must be the
         * caller's already */
        int why = errno, nm = getgroups(TP_MAX_GROUPS, mine);
        if (why != EPERM || nm != ng)
            _exit(6);
        for (int i = 0; i < ng; i++)
            if (mine[i] != groups[i])
                _exit(6);
    }
    if (setresgid((gid_t)gid[0], (gid_t)gid[1], (gid_t)gid[2]) < 0 ||
        setresuid((uid_t)uid[0], (uid_t)uid[1], (uid_t)uid[2]) < 0)
        _exit(7);
    (void)setfsgid((gid_t)gid[3]);
    (void)setfsuid((uid_t)uid[3]);
    if ((gid_t)setfsgid((gid_t)-1) != (gid_t)gid[3] || (uid_t)setfsuid((uid_t)-1) != (uid_t)uid[3])
        _exit(7);
    umask((mode_t)(um[0] & 0777));
    memset(cap, 0, sizeof(cap));
    if (!owncaps)
        eff[0] = prm[0] = 0;
    cap[0].effective = (uint32_t)eff[0];
    cap[1].effective = (uint32_t)(eff[0] >> 32);
    cap[0].permitted = (uint32_t)prm[0];
    cap[1].permitted = (uint32_t)(prm[0] >> 32);
    if (syscall(SYS_capset, &hdr, cap) < 0) {
        memset(cap, 0, sizeof(cap));
        if (syscall(SYS_capset, &hdr, cap) < 0)
            _exit(8);
    }
    {
        uint64_t handled = 1ULL << 11; /* LANDLOCK_ACCESS_FS_MAKE_BLOCK, ABI 1 */
        long rs = syscall(SYS_landlock_create_ruleset, &handled, sizeof(handled), 0U);
        if (rs < 0 && errno != ENOSYS && errno != EOPNOTSUPP)
            _exit(10);
        if (rs >= 0 && (prctl(PR_SET_NO_NEW_PRIVS, 1L, 0L, 0L, 0L) < 0 ||
                        syscall(SYS_landlock_restrict_self, (int)rs, 0U) < 0))
            _exit(10);
    }
    if (c->bind)
        e = bind(s, &c->sa.sa, (socklen_t)c->len) == 0 ? 0 : errno;
    else
        e = connect(s, &c->sa.sa, (socklen_t)c->len) == 0 ? 0 : errno;
    if (write(out, &e, sizeof(e)) != (ssize_t)sizeof(e))
        _exit(9);
    _exit(0);
}

/* Whether descriptor FD names the same namespace as /proc/self/ns/NAME. */
static int same_ns(int fd, const char *name)
{
    struct stat a, b;
    char path[64];

    snprintf(path, sizeof(path), "/proc/self/ns/%s", name);
    return fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

/* Closes each of the N descriptors FDS that is open (>= 0). */
static void close_all(const int *fds, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

/* A connect() or bind() to a Unix socket path (network.allowAllUnixSockets),
 * run on ORIG (taken), the copy of the command's socket take_socket checked,
 * with the address read_call read, in the caller's view and with its
 * permissions: by a short-lived child (unix_child) that joins the caller's
 * mount namespace (and the user namespace that owns it) and takes its
 * root, working directory, credentials and capabilities. Never CONTINUE
 * (see run_here, tp_call.c); the host waits for the child. The socket's
 * O_NONBLOCK is set while the child runs, as run_here does, so the host
 * waits only for a path lookup: a Unix stream connect() that meets a full
 * backlog answers EAGAIN even to a blocking caller. Any step that fails
 * refuses the call (EPERM). */
void tp_unix_path_call(struct tp *t, const struct seccomp_notif *n, int orig,
                       const struct tp_call *c)
{
    int procfd, userfd = -1, mntfd = -1, rootfd = -1, cwdfd = -1, callerfd = -1, p[2] = {-1, -1};
    int fl = -1, e = EPERM, gone = 0, owncaps, res, st;
    struct stat a, b;
    char path[64];
    pid_t child;
    ssize_t got;

    snprintf(path, sizeof(path), "/proc/%d", (int)n->pid);
    procfd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (procfd < 0)
        goto out;
    callerfd = openat(procfd, "ns/user", O_RDONLY | O_CLOEXEC);
    mntfd = openat(procfd, "ns/mnt", O_RDONLY | O_CLOEXEC);
    rootfd = openat(procfd, "root", O_PATH | O_DIRECTORY | O_CLOEXEC);
    cwdfd = openat(procfd, "cwd", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (seccomp_notify_id_valid(t->notify_fd, n->id) != 0) {
        gone = 1; /* the caller is gone: PID may name another process now */
        goto out;
    }
    if (callerfd < 0 || mntfd < 0 || rootfd < 0 || cwdfd < 0)
        goto out;
    userfd = ioctl(mntfd, NS_GET_USERNS); /* the mount namespace's owner */
    if (userfd < 0 || fstat(userfd, &a) < 0 || fstat(callerfd, &b) < 0)
        goto out;
    owncaps = a.st_dev == b.st_dev && a.st_ino == b.st_ino;
    if (same_ns(userfd, "user")) { /* a root run without a user namespace */
        close(userfd);
        userfd = -1;
    }
    if (same_ns(mntfd, "mnt")) {
        close(mntfd);
        mntfd = -1;
    }
    fl = fcntl(orig, F_GETFL);
    if (fl < 0) {
        e = EBADF;
        goto out;
    }
    if (pipe2(p, O_CLOEXEC) < 0)
        goto out;
    if (!(fl & O_NONBLOCK))
        (void)fcntl(orig, F_SETFL, fl | O_NONBLOCK);
    child = fork();
    if (child == 0) {
        close(p[0]);
        unix_child(procfd, userfd, mntfd, rootfd, cwdfd, owncaps, orig, c, p[1]);
    }
    close(p[1]);
    p[1] = -1;
    if (child > 0) {
        do
            got = read(p[0], &res, sizeof(res));
        while (got < 0 && errno == EINTR);
        while (waitpid(child, &st, 0) < 0 && errno == EINTR)
            ;
        if (got == (ssize_t)sizeof(res))
            e = res; /* else a step failed: EPERM */
    }
    if (!(fl & O_NONBLOCK))
        (void)fcntl(orig, F_SETFL, fl);
out:
    close_all((const int[]){p[0], p[1], procfd, userfd, callerfd, mntfd, rootfd, cwdfd, orig}, 9);
    if (!gone)
        tp_respond(t, n->id, e, 0);
}
