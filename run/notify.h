/* run/notify.h - the one server of the seccomp listener inner hands over
 * after 'G' (run/notify.c), private to run/. Transparent mode
 * (transparent.c) and the write report (fswrite.c) each route the syscalls
 * they answer here; a notification of a syscall nobody routed gets the
 * fallback answer. */
#ifndef SLUICE_RUN_NOTIFY_H
#define SLUICE_RUN_NOTIFY_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

struct seccomp_notif;
struct run_notify;

/* Answers N (one of the syscalls it was routed) on NOTIFY_FD: 1 when it
 * did, 0 to leave it to the fallback answer. */
typedef int (*run_notify_fn)(void *ctx, int notify_fd, const struct seccomp_notif *n);

/* Starts serving NOTIFY_FD (taken in every case) on LOOP: asks the kernel
 * for SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP, drains notifications a batch at
 * a time, stops at POLLHUP. FALLBACK: the errno a syscall nobody answered
 * fails with, 0 to let the kernel run it (SECCOMP_USER_NOTIF_FLAG_CONTINUE).
 * WHAT names the server in err ("the write watch", "transparent mode").
 * 0, or a negative UV_E* with err set; on failure *out may still be set
 * (call run_notify_close). */
int run_notify_start(struct run_notify **out, uv_loop_t *loop, int notify_fd, int fallback,
                     const char *what, char *err, size_t errlen);

/* Sends syscall NR of audit architecture ARCH to FN(CTX, ...). 0, or
 * UV_ENOSPC when the table is full. A negative NR is ignored (a name the
 * ABI does not have). */
int run_notify_route(struct run_notify *nt, uint32_t arch, int nr, run_notify_fn fn, void *ctx);

/* Forgets every route to CTX (their syscalls get the fallback answer). */
void run_notify_unroute(struct run_notify *nt, const void *ctx);

/* The listener's descriptor (for answers, ADDFD and ID_VALID), -1 for NULL. */
int run_notify_fd(const struct run_notify *nt);

/* How many notifications the server has read so far (0 for NULL). */
uint64_t run_notify_received(const struct run_notify *nt);

/* Stops serving and closes the listener (the memory goes with the loop's
 * close callbacks). NULL is a no-op. */
void run_notify_close(struct run_notify *nt);

#endif
