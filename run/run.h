/* run/run.h - the host side of `sluice run` (design.md "Modules"): on top
 * of sandbox/ (enforcement) and proxy/ (the proxy service).
 *   launch.c      runs the command under bwrap and serves the sandbox's
 *                 proxies on the proxy service's core
 *   rundir.c      the host checks and the private run directory
 *   reaper.c      the run directory's records, the reaper and the sweep
 *   summary.c     the decision log and the blocked-connections summary
 *   launch_tp.c   transparent mode's steps in the launcher; the mode itself
 *                 is transparent.c (start, stop; transparent.h), tp_call.c,
 *                 tp_dial.c, tp_unix.c, tp_peer.c (connect(), bind() and
 *                 getpeername() notifications) and tp_dns.c (names,
 *                 synthetic addresses, the sandbox's resolver)
 *   launch_fsw.c  the write report's steps in the launcher; the handler is
 *                 fswrite.c (fswrite.h), its filter rules sandbox/fswatch.c
 *   tls_trust.c   TLS termination in the run: the CA, the service's TLS
 *                 state, the bundle, variables and Java trust store inside
 *   launch_notify.c, notify.c  the one server of the seccomp listener,
 *                 dispatching by syscall to transparent mode and the write
 *                 report (notify.h)
 * This header is the module's public one (cli/run.c only parses options
 * and calls sb_launch); the others are run/'s own: launch-int.h,
 * reaper.h, transparent.h and transparent_int.h, fswrite.h, notify.h. */
#ifndef SLUICE_RUN_H
#define SLUICE_RUN_H

#include <stdint.h>
#include <stdio.h>

#include "sandbox/sandbox.h"

struct settings;
struct learn;

#define SB_LAUNCH_FAIL 125 /* sluice failed; the command did not run */

struct sb_launch_opts {
    const char *ask_spec; /* NULL: deny what no rule decides */
    const char *log_path; /* NULL: no connection log */
    int log_json;         /* --log-format json */
    int quiet;            /* no summary of blocked connections */
    int bypass;           /* --dangerously-disable-sandbox */
    int debug;            /* -d / SRT_DEBUG: [SandboxDebug] lines on stderr */
    int control_fd;       /* --control-fd N (N >= 3), or -1 */
    int transparent;      /* --transparent: network.transparent on */
    int report_writes;    /* --report-writes: refused writes listed (not with quiet) */
    char **publish;       /* --publish values (checked by the caller), or NULL */
    size_t npublish;
    char **cmd;           /* NULL-terminated; unused with cstr */
    const char *cstr;     /* -c STRING, or NULL */
    struct learn *learn;  /* --learn FILE: every decision record is added to it
                             (proxy/learn.h), or NULL */
    int64_t t0_us;        /* when the subcommand started (common_mono_us), for -d's
                             start-up phases; 0 when unknown */
};

/* Runs the command with settings s (loaded by the caller, still the
 * caller's to free). Returns the exit status: the command's, 128+N when it
 * was killed by signal N (never 0 for an interrupted run), 126/127 when an
 * unsandboxed exec fails, SB_LAUNCH_FAIL when sluice could not set up the
 * sandbox. */
int sb_launch(const struct sb_launch_opts *o, struct settings *s);

#endif
