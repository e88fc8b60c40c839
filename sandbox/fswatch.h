/* sandbox/fswatch.h - write denials for the run summary (issue 15), the
 * filter's half: the seccomp rules that send write-intent syscalls to the
 * host, and the table of those syscalls the host's handler reads them by
 * (run/fswrite.c). Reporting only: enforcement stays with the mounts bwrap
 * makes. */
#ifndef SLUICE_SANDBOX_FSWATCH_H
#define SLUICE_SANDBOX_FSWATCH_H

#include <stddef.h>

/* What a syscall does to its path. */
enum fsw_kind {
    FSW_OPEN,    /* open*: flags decide; an existing device or FIFO is fine */
    FSW_CREATE,  /* makes a new entry (EEXIST when there is one) */
    FSW_REPLACE, /* rename's destination: made or replaced */
    FSW_CHANGE,  /* changes an existing file (follows a final symlink) */
    FSW_REMOVE,  /* removes an entry (the link itself) */
};

/* One write syscall the filter notifies, and where its arguments are. */
struct fsw_call {
    const char *name;
    signed char dfd, path;     /* argument indexes; dfd -1: the cwd */
    signed char dfd2, path2;   /* a second path (rename), path2 -1: none */
    signed char flags;         /* open: the flags argument; -2 openat2's how */
    unsigned char kind, kind2; /* enum fsw_kind */
};

/* inner: adds SCMP_ACT_NOTIFY rules to the filter being built (ctx is a
 * scmp_filter_ctx) for open/openat/open_by... with a write flag, creat,
 * openat2, mkdir(at), mknod(at), unlink(at), rmdir, rename(at/at2),
 * link(at), symlink(at), truncate, chmod/fchmodat, chown/lchown/fchownat,
 * utime/utimes/futimesat/utimensat, on every ABI of the filter. 0 or a
 * negative libseccomp code with err set. */
int sb_fswatch_rules(void *ctx, char *err, size_t errlen);

/* The syscalls sb_fswatch_rules notifies (by name; libseccomp resolves
 * each per ABI), *n of them. */
const struct fsw_call *sb_fswatch_calls(size_t *n);

#endif
