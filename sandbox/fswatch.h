/* sandbox/fswatch.h - write denials for the run summary (issue 15): the
 * seccomp rules that send write-intent syscalls to the host, and the host's
 * handler that works out whether the sandbox refuses each one. Reporting
 * only: enforcement stays with the mounts bwrap makes. */
#ifndef SLUICE_SANDBOX_FSWATCH_H
#define SLUICE_SANDBOX_FSWATCH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <uv.h>

#include "sandbox/sandbox.h"

struct seccomp_notif;

/* inner: adds SCMP_ACT_NOTIFY rules to the filter being built (ctx is a
 * scmp_filter_ctx) for open/openat/open_by... with a write flag, creat,
 * openat2, mkdir(at), mknod(at), unlink(at), rmdir, rename(at/at2),
 * link(at), symlink(at), truncate, chmod/fchmodat, chown/lchown/fchownat,
 * utime/utimes/futimesat/utimensat, on every ABI of the filter. 0 or a
 * negative libseccomp code with err set. */
int sb_fswatch_rules(void *ctx, char *err, size_t errlen);

/* A write the sandbox refuses: PATH as the command named it, made absolute
 * and tidied (the sandbox's view, which is the host's path below the root
 * bind); CALL the syscall's name. */
typedef void (*fsw_report_fn)(void *ctx, const char *path, const char *call);

/* The host's answer to one notification: when it is one of the write
 * syscalls above, works out whether the write would be refused (a
 * read-only mount at the target, or at its parent when the target does not
 * exist), reports it if so, and lets the kernel run the call
 * (SECCOMP_USER_NOTIF_FLAG_CONTINUE). Returns 1 when it answered the
 * notification, 0 when the syscall is not one of its (the caller answers). */
int fsw_handle(int notify_fd, const struct seccomp_notif *n, fsw_report_fn report, void *ctx);

/* LEN bytes at ADDR in PID's memory (process_vm_readv: the memory PID has
 * now, one syscall, no descriptor to keep). The bytes read, or -1. A caller
 * that acts on them checks afterwards that the notification still stands
 * (SECCOMP_IOCTL_NOTIF_ID_VALID), so that PID was its caller throughout. */
ssize_t fsw_peek(int pid, uint64_t addr, void *buf, size_t len);

/* Asks the kernel to hand each notification on NOTIFY_FD, and each answer,
 * straight to the waiting task on the current CPU
 * (SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP): the caller and its server take
 * turns, so a wake-up on the other CPU only adds latency. 0, or -errno
 * (EINVAL, ENOTTY before Linux 6.6: the plain wake-up is kept). */
int fsw_notify_sync(int notify_fd);

/* The next notification waiting on the seccomp listener NOTIFY_FD, read
 * into N without blocking: 1 when one was read, 0 when none is waiting or
 * it went away before it was read (ENOENT). A listener with no task left
 * under its filter (POLLHUP) also stops P. Both servers of the listener
 * (this file's and transparent mode's) drain it with this, a batch at a
 * time. */
int fsw_notify_next(uv_poll_t *p, int notify_fd, struct seccomp_notif *n);

/* Why PATH is read-only in the sandbox, from the bwrap command line (the
 * last mount covering PATH) and the plan's ro_why pairs (may be NULL): the
 * reason the settings gave that mount ("protected": a protected name such
 * as .bashrc, .git/hooks or a placeholder for a missing .git; "denyWrite";
 * "allowRead only": readable inside a denied directory, not writable), else
 * "protected" for a protected name, else "read-only" (the read-only root,
 * /proc/sys, ...). */
const char *fsw_reason(const struct sb_strv *bwrap_argv, const struct sb_strv *ro_why,
                       const char *path);

/* The kernel has what the watch needs (seccomp user notification with
 * SECCOMP_USER_NOTIF_FLAG_CONTINUE, Linux 5.5; openat2, 5.6): NULL, or
 * what it lacks. */
const char *fsw_preflight(void);

/* Whether the command's Landlock domain has its file rules (landlock.c),
 * which refuse a FIFO or device node opened for writing on a read-only
 * mount: 0 with allowNestedUserNamespaces. Default: where the kernel has
 * Landlock. */
void fsw_file_rules(int on);

/* When transparent mode is off, the watch serves the listener alone. */
struct fsw;
int fsw_start(struct fsw **out, uv_loop_t *loop, int notify_fd, fsw_report_fn report, void *ctx,
              char *err, size_t errlen);
/* Stops serving, closes the listener (the memory goes with the loop's close
 * callbacks). NULL is a no-op. */
void fsw_close(struct fsw *w);

#endif
