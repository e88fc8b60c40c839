/* sandbox/fswatch.c - write denials for the run summary (issue 15): the
 * filter's half (sb_fswatch_rules, the table of syscalls notified); the host's
 * handler that reads each notification is run/fswrite.c.
 *
 * The reference reports the writes its sandbox refused; sluice does it with
 * seccomp user notification. inner's filter sends the syscalls that mean to
 * write (an open with O_WRONLY, O_RDWR, O_CREAT or O_TRUNC -- the flags are
 * compared in the filter, so a read-only open never leaves the kernel --,
 * creat, openat2, mkdir, mknod, unlink, rmdir, rename, link, symlink,
 * truncate, chmod, chown and utime families) to the host; for each one the
 * host:
 *   1. reads the path(s) from its memory (process_vm_readv), then checks the notification is
 *      still valid (SECCOMP_IOCTL_NOTIF_ID_VALID: PID is still the caller);
 *   2. makes the path absolute in the sandbox's view (the caller's cwd or
 *      dirfd through /proc/PID/cwd, /proc/PID/fd/N) and looks it up below
 *      the caller's root (/proc/PID/root, openat2 RESOLVE_IN_ROOT, so the
 *      sandbox's symlinks resolve as they do for the caller);
 *   3. decides whether the sandbox refuses the write: the target (or, when
 *      it does not exist yet, its parent directory) is on a read-only mount
 *      (fstatvfs ST_RDONLY). That is how bwrap enforces the filesystem
 *      policy (the read-only root, denyWrite, protected files, the
 *      read-only empty directories over absent protected paths);
 *   4. reports it if so, and always answers SECCOMP_USER_NOTIF_FLAG_CONTINUE:
 *      the kernel then runs the call as if there were no notification.
 *
 * CONTINUE is safe here (seccomp_unotify(2) warns against it for decisions)
 * because nothing is decided: enforcement stays with the mounts, and the
 * notification only reports. A caller that changes its memory or its
 * mounts between our look and the kernel's run of the call (TOCTOU) can only
 * make the report wrong, never widen what it may write.
 *
 * Not seen: writes through descriptors already open (write(2), ftruncate,
 * fchmod: the open was seen), and a write the kernel refuses for another
 * reason (permissions, a full disk) is not a sandbox denial and is not
 * reported. */
#define _GNU_SOURCE
#include "sandbox/fswatch.h"

#include "common/common.h"

#include <fcntl.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>

/* The syscalls notified. libseccomp resolves each name per ABI and skips a
 * name the ABI does not have (open on aarch64, chown32 outside i386/arm). */
static const struct fsw_call calls[] = {
    {"open", -1, 0, -1, -1, 1, FSW_OPEN, 0},
    {"openat", 0, 1, -1, -1, 2, FSW_OPEN, 0},
    {"openat2", 0, 1, -1, -1, -2, FSW_OPEN, 0},
    {"creat", -1, 0, -1, -1, -1, FSW_CREATE, 0},
    {"mkdir", -1, 0, -1, -1, -1, FSW_CREATE, 0},
    {"mkdirat", 0, 1, -1, -1, -1, FSW_CREATE, 0},
    {"mknod", -1, 0, -1, -1, -1, FSW_CREATE, 0},
    {"mknodat", 0, 1, -1, -1, -1, FSW_CREATE, 0},
    {"symlink", -1, 1, -1, -1, -1, FSW_CREATE, 0},
    {"symlinkat", 1, 2, -1, -1, -1, FSW_CREATE, 0},
    {"link", -1, 1, -1, -1, -1, FSW_CREATE, 0},
    {"linkat", 2, 3, -1, -1, -1, FSW_CREATE, 0},
    {"unlink", -1, 0, -1, -1, -1, FSW_REMOVE, 0},
    {"unlinkat", 0, 1, -1, -1, -1, FSW_REMOVE, 0},
    {"rmdir", -1, 0, -1, -1, -1, FSW_REMOVE, 0},
    {"rename", -1, 0, -1, 1, -1, FSW_REMOVE, FSW_REPLACE},
    {"renameat", 0, 1, 2, 3, -1, FSW_REMOVE, FSW_REPLACE},
    {"renameat2", 0, 1, 2, 3, -1, FSW_REMOVE, FSW_REPLACE},
    {"truncate", -1, 0, -1, -1, -1, FSW_CHANGE, 0},
    {"truncate64", -1, 0, -1, -1, -1, FSW_CHANGE, 0},
    {"chmod", -1, 0, -1, -1, -1, FSW_CHANGE, 0},
    {"fchmodat", 0, 1, -1, -1, -1, FSW_CHANGE, 0},
    {"chown", -1, 0, -1, -1, -1, FSW_CHANGE, 0},
    {"lchown", -1, 0, -1, -1, -1, FSW_CHANGE, 0},
    {"chown32", -1, 0, -1, -1, -1, FSW_CHANGE, 0},
    {"lchown32", -1, 0, -1, -1, -1, FSW_CHANGE, 0},
    {"fchownat", 0, 1, -1, -1, -1, FSW_CHANGE, 0},
    {"utime", -1, 0, -1, -1, -1, FSW_CHANGE, 0},
    {"utimes", -1, 0, -1, -1, -1, FSW_CHANGE, 0},
    {"futimesat", 0, 1, -1, -1, -1, FSW_CHANGE, 0},
    {"utimensat", 0, 1, -1, -1, -1, FSW_CHANGE, 0},
};

#define NCALLS (sizeof(calls) / sizeof(calls[0]))

/* The open flags that mean a write; the same values on every ABI here. */
static const unsigned write_flags[] = {O_WRONLY, O_RDWR, O_CREAT, O_TRUNC};

int sb_fswatch_rules(void *ctxp, char *err, size_t errlen)
{
    scmp_filter_ctx ctx = ctxp;

    for (size_t i = 0; i < NCALLS; i++) {
        const struct fsw_call *c = &calls[i];
        int nr = seccomp_syscall_resolve_name(c->name);
        int rc = 0;

        if (nr == __NR_SCMP_ERROR)
            continue; /* not on this architecture at all */
        if (c->flags >= 0) {
            for (size_t j = 0; j < sizeof(write_flags) / sizeof(write_flags[0]) && rc == 0; j++) {
                struct scmp_arg_cmp cmp = {(unsigned)c->flags, SCMP_CMP_MASKED_EQ, write_flags[j],
                                           write_flags[j]};
                rc = seccomp_rule_add_array(ctx, SCMP_ACT_NOTIFY, nr, 1, &cmp);
            }
        } else {
            rc = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, nr, 0);
        }
        if (rc < 0) {
            if (err != NULL && errlen > 0)
                snprintf(err, errlen, "seccomp: seccomp_rule_add(%s, notify) failed: rc %d (%s)",
                         c->name, rc, strerror(-rc));
            return rc;
        }
    }
    return 0;
}

const struct fsw_call *sb_fswatch_calls(size_t *n)
{
    *n = NCALLS;
    return calls;
}
