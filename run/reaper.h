/* run/reaper.h - the run directory, its removal, the reaper and the sweep
 * (run/reaper.c), private to run/. */
#ifndef SLUICE_RUN_REAPER_H
#define SLUICE_RUN_REAPER_H

#include <stddef.h>

#include "sandbox/sandbox.h"

struct sb_reaper {
    int pid;     /* the reaper, -1 when none */
    int fd;      /* our end of its pipe */
    int info_fd; /* the write end of its second pipe, for bwrap's --info-fd
                    (closed once bwrap has it), -1 when none */
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
/* Runs whose run directories have different parents (another
 * XDG_RUNTIME_DIR, another user) do not see each other's records: a
 * placeholder of one that another's sandbox stands on, read-only over
 * itself, was removed when the first ended, and with it the second's
 * mount (an unlink in another mount namespace detaches the mounts on it),
 * so its command could write the protected name (rt-16). Each run holds a
 * shared flock(2) on every empty directory or file it binds read-only
 * (PLAN's ro_why), from before bwrap starts until it has cleaned up, and a
 * placeholder is removed only under an exclusive one (busy otherwise: its
 * record stays for the next sweep). At most SB_HOLDS_MAX. */
#define SB_HOLDS_MAX 256
struct sb_holds {
    int fds[SB_HOLDS_MAX];
    size_t n;
};
int sb_rundir_hold(const struct sb_plan *plan, struct sb_holds *h);
void sb_rundir_release(struct sb_holds *h);
/* rm -rf PATH, not following symbolic links nor crossing mounts. */
void sb_remove_tree(const char *path);

/* Rewrites RUNDIR's record with the mount points this run holds: PLAN's
 * (those bwrap will make) and those of other live runs that PLAN mounts on
 * or below (their placeholders, which this run's scan saw as existing
 * names). Before bwrap starts, with the parent locked (sb_rundir_lock). */
int sb_reaper_record(const char *rundir, const struct sb_plan *plan, char *err, size_t errlen);
/* Tells the reaper bwrap's pid, to wait for it before cleaning. */
void sb_reaper_watch(struct sb_reaper *r, int pid);
/* bwrap has its copy of r->info_fd (or will never run): ours is closed. */
void sb_reaper_info_sent(struct sb_reaper *r);
/* The sandbox's first process in what bwrap wrote on --info-fd (BUF, LEN
 * bytes: {"child-pid": N}): 0 with *PID, -1 when BUF names none. */
int sb_reaper_info_pid(const char *buf, size_t len, long *pid);
/* After this process cleaned up itself: the reaper exits, and is waited. */
void sb_reaper_finish(struct sb_reaper *r);

#endif
