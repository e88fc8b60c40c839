/* sandbox/landlock.c - the Landlock domain `sluice inner` puts the command
 * in, just before the seccomp filter (issue 14).
 *
 * A read-only bind stops writes to regular files but not open(O_WRONLY) of
 * a named pipe or a device node: they are not written through the
 * filesystem. A host FIFO (`mkfifo /var/tmp/f`, /run/initctl as root) would
 * be a channel around the network namespace, and seccomp cannot see paths.
 * So the domain handles LANDLOCK_ACCESS_FS_WRITE_FILE (opening any file for
 * writing) and allows it only:
 *   - beneath every mount of the sandbox that is writable (fstatvfs without
 *     ST_RDONLY: the working directory and filesystem.allowWrite, the
 *     private /tmp, bwrap's /dev and its devpts and /dev/shm, /proc), read
 *     from /proc/self/mountinfo as the sandbox sees it (a line whose own or
 *     superblock options say ro is passed over without a system call; the
 *     others are judged by the mount their path reaches). A FIFO in a
 *     writable path stays usable: the command could make one there anyway;
 *   - on the command's stdin, stdout and stderr when they are files, ttys or
 *     FIFOs of the host (what the user handed the command) opened for
 *     writing, so `echo x > /dev/stderr` keeps working; one opened
 *     read-only (`< FILE`) stays read-only when it is reopened by path
 *     (/proc/self/fd/0, /dev/stdin), which would otherwise reach the host's
 *     writable mount of FILE (issue 21). Pipes and sockets are not on a
 *     filesystem and Landlock never restricts them.
 * LANDLOCK_ACCESS_FS_MAKE_BLOCK is handled too (no rule allows it). So are
 * truncate(2) (ABI 3), making and removing entries of every kind and
 * reparenting (REFER, ABI 2), allowed only beneath the writable mounts:
 * a descriptor of the host's writable mount handed over read-only (a
 * FILE on stdin: `truncate /proc/self/fd/0`; a directory on stdin:
 * unlinkat/renameat/mkdirat/symlinkat/mkfifoat on it) must not reach
 * around the read-only binds (rt-3). Landlock cannot stop chmod, chown,
 * utimes or setxattr through such a descriptor.
 *
 * Being in any domain also scopes ptrace: the command can ptrace (or open
 * /proc/PID/mem of) only processes in its domain, and bwrap's init (PID 1,
 * outside the seccomp filter) is in none (see inner.c).
 *
 * Kernels without Landlock (before 5.13, or not in the lsm= list): the
 * documented fallback is to run without it, with one line on stderr saying
 * that host FIFOs and device nodes outside the writable paths are not
 * closed, and that ptrace of PID 1 is left to the seccomp rules. Any other
 * failure (the ruleset cannot be built or applied) is fatal: the command
 * does not run. */
#define _GNU_SOURCE
#include "sandbox/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#endif
#ifndef SYS_landlock_add_rule
#define SYS_landlock_add_rule 445
#endif
#ifndef SYS_landlock_restrict_self
#define SYS_landlock_restrict_self 446
#endif

#define LL_WRITE_FILE (1ULL << 1)
#define LL_REMOVE_DIR (1ULL << 4)
#define LL_REMOVE_FILE (1ULL << 5)
#define LL_MAKE_CHAR (1ULL << 6)
#define LL_MAKE_DIR (1ULL << 7)
#define LL_MAKE_REG (1ULL << 8)
#define LL_MAKE_SOCK (1ULL << 9)
#define LL_MAKE_FIFO (1ULL << 10)
#define LL_MAKE_BLOCK (1ULL << 11)
#define LL_MAKE_SYM (1ULL << 12)
#define LL_REFER (1ULL << 13)
#define LL_TRUNCATE (1ULL << 14)
/* the rights a directory rule may carry, MAKE_BLOCK aside (never allowed) */
#define LL_DIR_RIGHTS                                                                              \
    (LL_REMOVE_DIR | LL_REMOVE_FILE | LL_MAKE_CHAR | LL_MAKE_DIR | LL_MAKE_REG | LL_MAKE_SOCK |    \
     LL_MAKE_FIFO | LL_MAKE_SYM)
#define LL_RULE_PATH_BENEATH 1
#define LL_CREATE_RULESET_VERSION (1U << 0)
#define LL_SCOPE_ABSTRACT_UNIX (1ULL << 0)

struct ll_ruleset_attr {
    uint64_t handled_access_fs;
};

struct ll_ruleset_attr_v6 {
    uint64_t handled_access_fs, handled_access_net, scoped;
};

struct ll_path_beneath {
    uint64_t allowed_access;
    int32_t parent_fd;
} __attribute__((packed));

/* Undoes mountinfo's octal escapes (\040 space, \011, \012, \134) in place. */
static void unescape(char *s)
{
    char *w = s;

    for (char *r = s; *r != '\0'; r++) {
        if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' &&
            r[3] >= '0' && r[3] <= '7') {
            *w++ = (char)(((r[1] - '0') << 6) | ((r[2] - '0') << 3) | (r[3] - '0'));
            r += 3;
        } else {
            *w++ = *r;
        }
    }
    *w = '\0';
}

/* 1 when a mountinfo options field (OPTS, "ro,..." or "rw,...") says
 * read-only. */
static int opts_ro(const char *opts)
{
    return opts != NULL && strncmp(opts, "ro", 2) == 0 && (opts[2] == ',' || opts[2] == '\0' ||
                                                           opts[2] == '\n');
}

/* 1 when the mountinfo line (the fields after MOUNTPOINT, in SAVE's
 * strtok_r state) lists a read-only mount: its own options (field 6) or its
 * superblock's (the last field, after " - FSTYPE SOURCE"). Only a shortcut:
 * a writable mount hidden under a read-only one is still judged by the
 * path (statvfs), and a writable top mount always has a line of its own
 * that says rw. */
static int line_ro(char **save)
{
    char *opts = strtok_r(NULL, " ", save), *f, *last = NULL;
    int dash = 0, after = 0;

    if (opts_ro(opts))
        return 1;
    while ((f = strtok_r(NULL, " ", save)) != NULL) {
        if (!dash && strcmp(f, "-") == 0) {
            dash = 1;
            continue;
        }
        if (dash && ++after == 3)
            last = f;
    }
    return opts_ro(last);
}

/* the rights the domain handles (set by sb_landlock_confine from the ABI) */
static uint64_t ll_handled = LL_WRITE_FILE | LL_MAKE_BLOCK;

/* A rule allowing every handled right but MAKE_BLOCK beneath FD; on a
 * file (stdio) only the file rights. */
static int add_rule(int ruleset, int fd)
{
    struct stat st;
    uint64_t allow = ll_handled & ~LL_MAKE_BLOCK;
    struct ll_path_beneath pb = {.parent_fd = fd};

    if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode))
        allow &= LL_WRITE_FILE | LL_TRUNCATE;
    pb.allowed_access = allow;

    return (int)syscall(SYS_landlock_add_rule, ruleset, LL_RULE_PATH_BENEATH, &pb, 0U);
}

/* The host's files, ttys or FIFOs the command was given as 0, 1 and 2, each
 * only when it was itself opened for writing (O_WRONLY or O_RDWR): the
 * rule is on the file, so it also lets the command reopen it by path
 * (/proc/self/fd/N, /dev/stdout), and a file handed over read-only (`<
 * FILE`) must stay read-only when reopened; the filesystem rules decide
 * for it, as for any other path. Pipes and sockets are not on a
 * filesystem and Landlock never restricts them. -1 with errno set. */
static int add_stdio(long ruleset)
{
    for (int fd = 0; fd <= 2; fd++) {
        struct stat st;
        int fl = fcntl(fd, F_GETFL);

        if (fl < 0 || (fl & O_ACCMODE) == O_RDONLY || fstat(fd, &st) < 0)
            continue; /* closed, or read-only */
        if (!S_ISREG(st.st_mode) && !S_ISCHR(st.st_mode) && !S_ISFIFO(st.st_mode) &&
            !S_ISBLK(st.st_mode))
            continue;
        /* a pipe is a FIFO on pipefs: the kernel refuses a rule on it
         * (EBADFD: not beneath a mount) and needs none */
        if (add_rule((int)ruleset, fd) < 0 && errno != EBADFD)
            return -1;
    }
    return 0;
}

/* Adds a rule for every writable mount; -1 with err set on failure. */
static int add_writable_mounts(int ruleset, char *err, size_t errlen)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    char *line = NULL;
    size_t cap = 0;
    int rc = 0;

    if (f == NULL) {
        snprintf(err, errlen, "landlock: /proc/self/mountinfo: %s", strerror(errno));
        return -1;
    }
    while (rc == 0 && getline(&line, &cap, f) > 0) {
        /* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS ... */
        char *save = NULL, *mp = NULL;
        struct statvfs sv;
        int fd;

        (void)strtok_r(line, " ", &save);
        for (int i = 0; i < 4; i++)
            mp = strtok_r(NULL, " ", &save);
        if (mp == NULL || mp[0] != '/' || line_ro(&save))
            continue; /* most are read-only: the root and what bwrap binds so */
        unescape(mp);
        /* the mount the path reaches now (the top one), read-only by its
         * own flag or its superblock's (issue 25: no descriptor for it) */
        if (statvfs(mp, &sv) < 0 || (sv.f_flag & ST_RDONLY) != 0)
            continue; /* hidden below a later mount, gone, or read-only */
        fd = open(mp, O_PATH | O_CLOEXEC);
        if (fd < 0)
            continue;
        /* judged again by the descriptor the rule is made on */
        if (fstatvfs(fd, &sv) == 0 && (sv.f_flag & ST_RDONLY) == 0 && add_rule(ruleset, fd) < 0) {
            snprintf(err, errlen, "landlock: rule for the writable mount '%s': %s", mp,
                     strerror(errno));
            rc = -1;
        }
        close(fd);
    }
    free(line);
    fclose(f);
    return rc;
}

int sb_landlock_abi(void)
{
    long abi = syscall(SYS_landlock_create_ruleset, NULL, (size_t)0, LL_CREATE_RULESET_VERSION);

    return abi > 0 && abi < INT_MAX ? (int)abi : 0;
}

/* allowNestedUserNamespaces: a domain that handles no filesystem right,
 * only LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (ABI 6, Linux 6.12): the kernel
 * refuses mount(2), pivot_root and umount to a process in a domain that
 * handles any filesystem access, whatever namespace it mounts in, so a
 * nested sandbox (bwrap, rootless podman) can set up its mounts only in a
 * domain like this one. Being in it keeps the ptrace scoping (PID 1 stays
 * out of reach); the scope itself changes nothing in an isolated network
 * namespace, where every abstract socket is the sandbox's (with
 * network.isolate false, the host's abstract sockets become unreachable).
 * 0 done, 1 the kernel cannot make such a domain, -1 with errno set. */
static int confine_nested(void)
{
    struct ll_ruleset_attr_v6 attr = {.scoped = LL_SCOPE_ABSTRACT_UNIX};
    long abi, ruleset;
    int rc = 0, e;

    abi = syscall(SYS_landlock_create_ruleset, NULL, (size_t)0, LL_CREATE_RULESET_VERSION);
    if (abi < 0 && (errno == ENOSYS || errno == EOPNOTSUPP))
        return 1;
    if (abi < 0)
        return -1;
    if (abi < 6)
        return 1;
    ruleset = syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0U);
    if (ruleset < 0)
        return -1;
    if (syscall(SYS_landlock_restrict_self, (int)ruleset, 0U) < 0)
        rc = -1;
    e = errno;
    close((int)ruleset);
    errno = e;
    return rc;
}

int sb_landlock_confine(int nested, char *err, size_t errlen)
{
    struct ll_ruleset_attr attr;
    long ruleset;
    int rc = -1, abi = sb_landlock_abi();

    ll_handled = LL_WRITE_FILE | LL_MAKE_BLOCK | LL_DIR_RIGHTS;
    if (abi >= 2)
        ll_handled |= LL_REFER;
    if (abi >= 3)
        ll_handled |= LL_TRUNCATE;
    attr.handled_access_fs = ll_handled;

    if (err != NULL && errlen > 0)
        err[0] = '\0';
    if (nested) {
        rc = confine_nested();
        if (rc < 0)
            snprintf(err, errlen, "landlock: the domain for allowNestedUserNamespaces: %s",
                     strerror(errno));
        return rc;
    }
    ruleset = syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0U);
    if (ruleset < 0) {
        if (errno == ENOSYS || errno == EOPNOTSUPP)
            return 1;
        snprintf(err, errlen, "landlock: landlock_create_ruleset: %s", strerror(errno));
        return -1;
    }
    if (add_writable_mounts((int)ruleset, err, errlen) < 0)
        goto out;
    if (add_stdio(ruleset) < 0) {
        snprintf(err, errlen, "landlock: rule for the command's stdio: %s", strerror(errno));
        goto out;
    }
    if (syscall(SYS_landlock_restrict_self, (int)ruleset, 0U) < 0) {
        snprintf(err, errlen, "landlock: landlock_restrict_self: %s", strerror(errno));
        goto out;
    }
    rc = 0;
out:
    close((int)ruleset);
    return rc;
}
