/* run/run.h - the host side of `sluice run` (design.md "Modules"): on top
 * of sandbox/ (enforcement) and proxy/ (the proxy service).
 *   launch.c      runs the command under bwrap and serves the sandbox's
 *                 proxies on the proxy service's core
 *   rundir.c      the host checks and the private run directory
 *   reaper.c      the run directory's records, the reaper and the sweep
 *   summary.c     the decision log and the blocked-connections summary
 *   launch_tp.c   transparent mode's steps in the launcher; the mode itself
 *                 is transparent.c (connect() notifications) and tp_dns.c
 *                 (names, synthetic addresses, the sandbox's resolver)
 *   launch_fsw.c  the write report's steps in the launcher
 * cli/run.c only parses options. */
#ifndef SLUICE_RUN_H
#define SLUICE_RUN_H

#include <stdio.h>

#include "sandbox/sandbox.h"

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

/* ------------------------------------------------------------------------ */
/* run directory, reaper and sweep (run/reaper.c)                           */

struct sb_reaper {
    int pid; /* the reaper, -1 when none */
    int fd;  /* our end of its pipe */
};

/* Makes PARENT/run.PID.START.XXXXXX (0700) and RUN/tmp, PARENT
 * ($XDG_RUNTIME_DIR/sluice, root's /run/sluice, /run/user/UID/sluice or
 * /tmp/sluice-UID, 0700, ours, never a link) going to MASK (every
 * sandbox gets an empty tmpfs there), after sweeping PARENT of the run
 * directories and project mount points of dead runs, and forks the reaper
 * (R), which cleans them up if this process dies before
 * sb_reaper_finish(). -1 with a message in err. */
int sb_rundir_make(char *dir, size_t len, char *tmp, size_t tlen, char *mask, size_t mlen,
                   struct sb_reaper *r, char *err, size_t errlen);
/* With RUNDIR's parent locked: the mount points RUNDIR's record holds that
 * no other live run holds (deepest first, each only while still an empty
 * directory or file), dead runs' leftovers, rm -rf RUNDIR (no symlink
 * followed, 000 directories included), then the parent when empty. */
void sb_rundir_remove(const char *rundir);
/* Locks RUNDIR's parent: a run holds it from before its protected-file scan
 * until sb_reaper_record() has named the mount points it stands on, so no
 * run removes one another run's scan has seen. The descriptor to pass to
 * sb_rundir_unlock(), or -1 with a message in err. */
int sb_rundir_lock(const char *rundir, char *err, size_t errlen);
void sb_rundir_unlock(int fd);
/* rm -rf PATH, not following symbolic links nor crossing mounts. */
void sb_remove_tree(const char *path);


/* Rewrites RUNDIR's record with the mount points this run holds: PLAN's
 * (those bwrap will make) and those of other live runs that PLAN mounts on
 * or below (their placeholders, which this run's scan saw as existing
 * names). Before bwrap starts, with the parent locked (sb_rundir_lock). */
int sb_reaper_record(const char *rundir, const struct sb_plan *plan, char *err, size_t errlen);
/* Tells the reaper bwrap's pid, to wait for it before cleaning. */
void sb_reaper_watch(struct sb_reaper *r, int pid);
/* After this process cleaned up itself: the reaper exits, and is waited. */
void sb_reaper_finish(struct sb_reaper *r);

#endif
