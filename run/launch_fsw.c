/* run/launch_fsw.c - the launcher's side of the write report (issue
 * 15): the hooks run/launch.c calls. The watch itself is
 * run/fswrite.c (its filter rules sandbox/fswatch.c); the summary line is
 * run/summary.c's.
 *
 *   run_fsw_prepare    the run watches writes only with --report-writes
 *                      (issue 25: every write-intent call is a round trip
 *                      to the host, so the report is off by default; a -d
 *                      line says which), never with --quiet (nothing would
 *                      show them), nor when the kernel lacks a piece (then
 *                      a -d line says so and the run goes on without the
 *                      report: enforcement does not depend on it);
 *   run_fsw_after_go   the listener's server is running (launch_notify.c):
 *                      the write syscalls are routed to fswrite.c. */
#include "run/fswrite.h"
#include "run/launch-int.h"
#include "run/notify.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

int run_fsw_prepare(struct run *run)
{
    const char *why;

    run->watch_writes = 0;
    if (!run->o->report_writes || run->o->quiet) {
        run_debug(run, "write report: off (%s)",
                  run->o->quiet ? "--quiet" : "--report-writes turns it on");
        return 0;
    }
    why = fsw_preflight();
    if (why != NULL) {
        run_debug(run, "no report of refused writes: it needs %s", why);
        return 0;
    }
    run->watch_writes = 1;
    run_debug(run, "write report: on (--report-writes)");
    return 0;
}

static void on_write(void *ctx, const char *path, const char *call)
{
    struct run *run = ctx;

    run_note_write(run, path, fsw_reason(&run->plan.argv, &run->plan.ro_why, path), call);
}

static int dispatch(void *run, int notify_fd, const struct seccomp_notif *n)
{
    return fsw_handle(notify_fd, n, on_write, run);
}

int run_fsw_after_go(struct run *run)
{
    int rc;

    if (!run->watch_writes)
        return 0;
    /* after transparent mode's routes: a write syscall is the report's */
    rc = fsw_route(run->notify, dispatch, run);
    if (rc < 0) {
        fprintf(stderr, "sluice: run: the write watch: %s; stopping the command\n",
                uv_strerror(rc));
        run_kill(run, SIGKILL);
        return -1;
    }
    return 0;
}
