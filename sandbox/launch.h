/* sandbox/launch.h - the host side of `sluice run` (design.md "The
 * sandbox"): sandbox/launch.c runs the command under bwrap and serves the
 * sandbox's proxies on the proxy service's core; sandbox/rundir.c has the
 * host checks and the private run directory; sandbox/summary.c the decision
 * log and the blocked-connections summary. cli/run.c only parses options. */
#ifndef SLUICE_SANDBOX_LAUNCH_H
#define SLUICE_SANDBOX_LAUNCH_H

#include <stdio.h>

struct settings;

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
    char **cmd;           /* NULL-terminated; unused with cstr */
    const char *cstr;     /* -c STRING, or NULL */
};

/* Runs the command with settings s (loaded by the caller, still the
 * caller's to free). Returns the exit status: the command's, 128+N when it
 * was killed by signal N (never 0 for an interrupted run), 126/127 when an
 * unsandboxed exec fails, SB_LAUNCH_FAIL when sluice could not set up the
 * sandbox. */
int sb_launch(const struct sb_launch_opts *o, struct settings *s);

#endif
