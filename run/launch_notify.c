/* run/launch_notify.c - the launcher's side of the seccomp listener: inner
 * sends it once its filter is loaded (before 'G' when the launcher sent the
 * filters, issue 25), when transparent mode, a guarded run or the write
 * report asked for notifications.
 *
 *   run_listener_start  receives it and starts its one server
 *                       (run/notify.c), before 'G'; run_tp_after_go and
 *                       run_fsw_after_go then route their syscalls there
 *                       (nothing is notified before the command runs);
 *   run_listener_close  stops it (after run_tp_close). */
#include "run/launch-int.h"
#include "run/notify.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>

#define RUN_NOTIFY_HANDOFF_MS 30000u

int run_listener_start(struct run *run)
{
    int connects = run->settings->network.transparent || run->guard, fd;

    if (!connects && !run->watch_writes)
        return 0;
    fd = sb_handoff_recv_notify(run->sp[0], RUN_NOTIFY_HANDOFF_MS, run->err, sizeof(run->err));
    if (fd == -EBUSY && !connects) {
        /* inner found the chain's one listener taken (a filter around
         * sluice has it) and sealed itself without the write report:
         * found where it happens, with no probe before every run (issue
         * 25) */
        run_debug(run, "no report of refused writes: it needs a seccomp listener of its own "
                       "(sluice runs under a filter that already has one)");
        run->watch_writes = 0;
        return 0;
    }
    if (fd < 0) {
        fprintf(stderr, "sluice: run: the sandbox did not start (%s); the command was not run\n",
                run->err);
        run_kill(run, SIGKILL);
        return -1;
    }
    /* a syscall nobody answers: refused when connect() is served (every
     * notified socket call is transparent.c's), else let run (the filter
     * then notifies only the write report's syscalls) */
    if (run_notify_start(&run->notify, &run->loop, fd, connects ? EPERM : 0,
                         connects ? "transparent mode" : "the write watch", run->err,
                         sizeof(run->err)) < 0) {
        fprintf(stderr, "sluice: run: %s; stopping the command\n", run->err);
        run_kill(run, SIGKILL);
        return -1;
    }
    return 0;
}

void run_listener_close(struct run *run)
{
    /* -d, once: what the listener cost the run (fswrite.sh: none for
     * writes unless --report-writes) */
    if (run->notify != NULL)
        run_debug(run, "seccomp notifications: %" PRIu64, run_notify_received(run->notify));
    else if (!run->notify_said)
        run_debug(run, "seccomp notifications: none (no listener)");
    run->notify_said = 1;
    run_notify_close(run->notify);
    run->notify = NULL;
}
