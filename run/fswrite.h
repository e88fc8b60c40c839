/* run/fswrite.h - the write report's host side (run/fswrite.c), private
 * to run/: the handler of the write syscalls inner's filter notifies
 * (sandbox/fswatch.c), the reason a path is read-only, and the kernel
 * check. run/notify.c routes the write syscalls to fsw_handle. */
#ifndef SLUICE_RUN_FSWRITE_H
#define SLUICE_RUN_FSWRITE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sandbox/sandbox.h"

struct seccomp_notif;
struct run_notify;

/* A write the sandbox refuses: PATH as the command named it, made absolute
 * and tidied (the sandbox's view, which is the host's path below the root
 * bind); CALL the syscall's name. */
typedef void (*fsw_report_fn)(void *ctx, const char *path, const char *call);

/* The host's answer to one notification: when it is one of the write
 * syscalls of sandbox/fswatch.c, works out whether the write would be
 * refused (a read-only mount at the target, or at its parent when the
 * target does not exist), reports it if so, and lets the kernel run the
 * call (SECCOMP_USER_NOTIF_FLAG_CONTINUE). Returns 1 when it answered the
 * notification, 0 when the syscall is not one of its (the caller answers). */
int fsw_handle(int notify_fd, const struct seccomp_notif *n, fsw_report_fn report, void *ctx);

/* Routes the write syscalls, on each ABI of the filter, to FN(CTX, ...)
 * on NT (notify.c); FN calls fsw_handle. 0 or UV_ENOSPC. */
int fsw_route(struct run_notify *nt, int (*fn)(void *, int, const struct seccomp_notif *),
              void *ctx);

/* LEN bytes at ADDR in PID's memory (process_vm_readv: the memory PID has
 * now, one syscall, no descriptor to keep). The bytes read, or -1. A caller
 * that acts on them checks afterwards that the notification still stands
 * (SECCOMP_IOCTL_NOTIF_ID_VALID), so that PID was its caller throughout. */
ssize_t fsw_peek(int pid, uint64_t addr, void *buf, size_t len);

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

#endif
