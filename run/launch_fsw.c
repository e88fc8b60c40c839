/* run/launch_fsw.c - the launcher's side of the write report (issue
 * 15): the hooks run/launch.c calls. The watch itself is
 * sandbox/fswatch.c; the summary line is run/summary.c's.
 *
 *   run_fsw_prepare    the run watches writes unless --quiet (nothing would
 *                      show them) or the kernel lacks a piece (then a -d
 *                      line says so and the run goes on without the report:
 *                      enforcement does not depend on it);
 *   run_fsw_after_go   inner sends its seccomp listener after 'G'; when
 *                      transparent mode is on, launch_tp.c has taken it and
 *                      transparent.c passes the write syscalls to
 *                      run_fsw_dispatch; otherwise fswatch.c serves it. */
#include "sandbox/fswatch.h"
#include "run/launch-int.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

#define RUN_FSW_HANDOFF_MS 30000u

int run_fsw_prepare(struct run *run)
{
    const char *why;

    run->watch_writes = 0;
    if (run->o->quiet)
        return 0;
    why = fsw_preflight();
    if (why != NULL) {
        run_debug(run, "no report of refused writes: it needs %s", why);
        return 0;
    }
    run->watch_writes = 1;
    return 0;
}

static void on_write(void *ctx, const char *path, const char *call)
{
    struct run *run = ctx;

    run_note_write(run, path, fsw_reason(&run->plan.argv, &run->plan.ro_why, path), call);
}

int run_fsw_dispatch(void *run, int notify_fd, const struct seccomp_notif *n)
{
    return fsw_handle(notify_fd, n, on_write, run);
}

int run_fsw_after_go(struct run *run)
{
    int fd;

    if (!run->watch_writes || run->settings->network.transparent || run->guard)
        return 0;
    fd = sb_handoff_recv_notify(run->sp[0], RUN_FSW_HANDOFF_MS, run->err, sizeof(run->err));
    if (fd < 0) {
        fprintf(stderr, "sluice: run: the sandbox did not start (%s); the command was not run\n",
                run->err);
        (void)uv_process_kill(&run->proc, SIGKILL);
        return -1;
    }
    if (fsw_start(&run->fsw, &run->loop, fd, on_write, run, run->err, sizeof(run->err)) < 0) {
        fprintf(stderr, "sluice: run: %s; stopping the command\n", run->err);
        (void)uv_process_kill(&run->proc, SIGKILL);
        return -1;
    }
    return 0;
}

void run_fsw_close(struct run *run)
{
    fsw_close(run->fsw);
    run->fsw = NULL;
}
