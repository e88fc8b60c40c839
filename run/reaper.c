/* run/reaper.c - the run directory, and nothing of a run left behind
 * when `sluice run` is killed (issue 14).
 *
 * Run directory. PARENT/run.PID.START.XXXXXX (mode 0700; PID and START
 * name the launcher, as in the record below), PARENT being
 * $XDG_RUNTIME_DIR/sluice when XDG_RUNTIME_DIR is an absolute directory of
 * ours, else a place no other user can make first (issue 21): /run/sluice
 * for root, /run/user/UID/sluice when logind made /run/user/UID (ours,
 * 0700); only else /tmp/sluice-UID, which anyone could make first. PARENT
 * is opened without following a link and checked by its descriptor: 0700,
 * ours, a directory, or the run stops with a message (and never uses it).
 * It holds the sandbox's /tmp (RUN/tmp) and the record below. Every
 * sandbox gets an empty tmpfs over PARENT (bwrap.c, mask_dir), so a command
 * never sees another run's directory, whatever it may read or write (a 0700
 * mode does not stop a process of the same uid).
 *
 * The record, RUN/sluice-run, written as the directory is made and again,
 * with the mount points, before bwrap starts (each time whole, by rename):
 *     "sluice-run 1 PID STARTTIME RPID RSTARTTIME\n" then each mount point
 *     the run holds in the project (parents first), each ended by a NUL.
 * PID/STARTTIME (field 22 of /proc/PID/stat) name the launcher, RPID and
 * RSTARTTIME its reaper (an older record without them is read too). A run
 * counts as live while its launcher is, or its reaper is: the sweep of
 * another run leaves a killed run to its reaper, which waits for the
 * sandbox to go first.
 *
 * Parallel runs in one project (issue 21). A run holds the mount points
 * its bwrap will create (sb_plan.created) and also those of other live
 * runs that its sandbox mounts on or below: another run's placeholder
 * .bash_profile is, to this run's protected-file scan, an existing name
 * bound over itself. A mount point is removed only by the last run out
 * that holds it (no live run's record names it), and only while it is
 * still an empty directory or file. Every change to PARENT (a run
 * directory made or removed, a record read and acted on, PARENT itself
 * removed) happens under an exclusive flock(2) on PARENT, and a run keeps
 * that lock from before its scan until its record names what it holds, so
 * nothing its scan saw can go before it is held. Whoever removes PARENT
 * does so under the lock; a run that then gets the lock on the removed
 * directory sees that PARENT is no longer it and starts again.
 *
 * The reaper. A process forked just before the run directory is made, in a
 * session of its own (a kill of the launcher's process group does not
 * reach it), holding the read end of a pipe whose write end only the
 * launcher has. The launcher sends 'P' + bwrap's pid once it runs, and 'D'
 * when it has cleaned up itself. A second pipe's write end goes to bwrap
 * as --info-fd: bwrap writes {"child-pid": N} there as soon as it has
 * cloned the sandbox's first process, and before that process may start
 * (it waits for bwrap's word), so the reaper knows it before any mount
 * point can exist. That process makes the mount points, placeholders
 * among them, and asks for a death signal only when it is done: a bwrap
 * killed with the launcher (--die-with-parent) left it making the rest
 * after the reaper had cleaned (issue 25: "SIGKILL after 0.05s" left
 * .profile ... .zshrc in the project now and then). EOF without 'D'
 * means the launcher died (SIGKILL, a crash): the reaper waits for bwrap
 * and that process to go (at most 10 s), then sweeps
 * PARENT as below, its launcher counting as dead: the launcher's run
 * directory is found by its record (rewritten with the mount points before
 * bwrap started) or its name, and the mount points that are still what
 * bwrap made (an empty directory or an empty file, deepest first) go with
 * it.
 *
 * The sweep. Each run first looks through PARENT for run directories with
 * a record whose launcher is gone (no such pid, or another start time) and
 * cleans them as the reaper would (their mount points that no live run
 * holds): this covers a reaper that was killed too,
 * or a machine that went down. A run directory killed before its first
 * record was written (no mount point can exist yet) is known by its name.
 * Nothing else, nothing outside PARENT and no mount point that is no longer
 * empty is touched. */
#define _GNU_SOURCE
#include "run/reaper.h"

#include "common/common.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RECORD_NAME "sluice-run"
#define RECORD_MAGIC "sluice-run 1 "
#define RECORD_MAX (1u << 20)
#define REAPER_WAIT_MS 10000
#define REAPER_INFO_MAX 256 /* bwrap's --info-fd text: {"child-pid": N} */

/* ------------------------------------------------------------------------ */
/* removal                                                                   */

static int rm_unreadable; /* a directory nftw could not open in this pass */

static int rm_chmod(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)ftw;
    if (type == FTW_DNR)
        rm_unreadable = 1;
    /* only where it is needed: a chmod is a write to the inode */
    if ((type == FTW_D || type == FTW_DNR) && (st->st_mode & S_IRWXU) != S_IRWXU)
        (void)chmod(path, (st->st_mode & 07777) | S_IRWXU);
    return 0;
}

static int rm_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    if (type == FTW_DP || type == FTW_D || type == FTW_DNR)
        (void)rmdir(path);
    else
        (void)unlink(path);
    return 0;
}

void sb_remove_tree(const char *path)
{
    /* nftw opens a directory before reporting it, so one it cannot read
     * (FTW_DNR) is made traversable without being entered: repeat until a
     * pass meets none (each pass reaches one level deeper; bounded) */
    for (int pass = 0; pass < 64; pass++) {
        rm_unreadable = 0;
        (void)nftw(path, rm_chmod, 16, FTW_PHYS | FTW_MOUNT);
        if (!rm_unreadable)
            break;
    }
    (void)nftw(path, rm_one, 16, FTW_PHYS | FTW_DEPTH | FTW_MOUNT);
}

/* The directory a placeholder is removed from, kept open for its
 * siblings (they are removed one after the other, mostly from the
 * working directory: one walk for them all, issue 25). */
struct ph_dir {
    char path[PATH_MAX];
    int fd; /* -1: none */
};

static void ph_dir_close(struct ph_dir *d)
{
    if (d->fd >= 0)
        close(d->fd);
    d->fd = -1;
    d->path[0] = '\0';
}

/* DIR (absolute, physical) opened by a walk from / that never follows a
 * symbolic link (rt-5: a directory above a placeholder may be renamed and
 * replaced by a link by the command of another run whose sandbox does not
 * pin it (its scan skips node_modules and stops at
 * mandatoryDenySearchDepth), and the clean-up must not then remove an
 * empty file or directory outside; the recorded paths are physical, so a
 * link met is such a swap). The descriptor, or -1. */
static int open_physical(char *dir)
{
    int dfd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC), nfd;

    for (char *p = dir + 1; dfd >= 0 && *p != '\0';) {
        char *e = strchr(p, '/');
        if (e != NULL)
            *e = '\0';
        nfd = *p != '\0' ? openat(dfd, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : dup(dfd);
        close(dfd);
        dfd = nfd;
        if (e == NULL)
            break;
        *e = '/';
        p = e + 1;
    }
    return dfd;
}

/* unlinkat(DFD, NAME, FLAGS); in a directory of ours that we may not write
 * (the user's own, mode 555: a command could chmod it and make a protected
 * name there, so it has mount points, sb_could_create, rt-19) with the
 * owner's write bit for the call, the mode put back after. */
static int unlink_own(int dfd, const char *name, int flags)
{
    struct stat st;
    int rc = unlinkat(dfd, name, flags), e = errno;

    if (rc == 0 || e != EACCES || fstat(dfd, &st) < 0 || st.st_uid != geteuid() ||
        (st.st_mode & S_IWUSR) != 0 || fchmod(dfd, (st.st_mode & 07777) | S_IWUSR | S_IXUSR) < 0) {
        errno = e;
        return rc;
    }
    rc = unlinkat(dfd, name, flags);
    e = errno;
    (void)fchmod(dfd, st.st_mode & 07777);
    errno = e;
    return rc;
}

/* Removes PATH, a mount point bwrap made, when it still is what bwrap made
 * (an empty directory or an empty file), from its directory as D holds it
 * or walks to it (open_physical). 1 when it is still a mount point. */
static int remove_placeholder(struct ph_dir *d, const char *path)
{
    char buf[PATH_MAX], *slash;
    struct stat st;
    const char *name;
    int busy = 0;

    if (path[0] != '/' || strlen(path) >= sizeof buf)
        return 0;
    memcpy(buf, path, strlen(path) + 1);
    slash = strrchr(buf, '/');
    if (slash[1] == '\0')
        return 0;
    *slash = '\0';
    name = slash + 1;
    if (d->fd < 0 || strcmp(d->path, slash == buf ? "/" : buf) != 0) {
        ph_dir_close(d);
        snprintf(d->path, sizeof d->path, "%s", slash == buf ? "/" : buf);
        d->fd = slash == buf ? open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : open_physical(buf);
        if (d->fd < 0)
            return 0;
    }
    if (fstatat(d->fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        int rc = 0, lk = -1;
        /* a run whose sandbox stands on it holds a shared lock, whatever
         * its run directory's parent (sb_rundir_hold): busy */
        if ((S_ISREG(st.st_mode) && st.st_size == 0) || S_ISDIR(st.st_mode)) {
            lk = openat(d->fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
            if (lk >= 0 && flock(lk, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK) {
                close(lk);
                return 1;
            }
        }
        if (S_ISREG(st.st_mode) && st.st_size == 0)
            rc = unlink_own(d->fd, name, 0);
        else if (S_ISDIR(st.st_mode))
            rc = unlink_own(d->fd, name, AT_REMOVEDIR); /* fails, as it should, unless empty */
        /* still a mount point: the dead sandbox's mount namespace is torn
         * down after its last process is reaped, not always before */
        busy = rc < 0 && errno == EBUSY;
        if (lk >= 0)
            close(lk);
    }
    return busy;
}

/* Whether FD, a directory or a regular file, is empty. */
static int empty_entry(int fd)
{
    struct stat st;
    struct dirent *e;
    DIR *dir;
    int dup_fd, n = 0;

    if (fstat(fd, &st) < 0 || st.st_nlink == 0)
        return 0;
    if (S_ISREG(st.st_mode))
        return st.st_size == 0;
    if (!S_ISDIR(st.st_mode) || (dup_fd = dup(fd)) < 0)
        return 0;
    dir = fdopendir(dup_fd);
    if (dir == NULL) {
        close(dup_fd);
        return 0;
    }
    while (n == 0 && (e = readdir(dir)) != NULL)
        n = strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(dir);
    return n == 0;
}

int sb_rundir_hold(const struct sb_plan *plan, struct sb_holds *h)
{
    for (size_t i = 0; i + 1 < plan->ro_why.n && h->n < SB_HOLDS_MAX; i += 2) {
        int fd = open(plan->ro_why.v[i], O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0)
            continue; /* not there (yet: one of ours bwrap makes) */
        if (!empty_entry(fd) || flock(fd, LOCK_SH) < 0) {
            close(fd);
            continue;
        }
        h->fds[h->n++] = fd;
    }
    return 0;
}

void sb_rundir_release(struct sb_holds *h)
{
    for (size_t i = 0; i < h->n; i++)
        close(h->fds[i]);
    h->n = 0;
}

/* ------------------------------------------------------------------------ */
/* processes                                                                 */

/* From one read of /proc/PID/stat: field 22 (the start time in clock
 * ticks; 0 when unknown) and, when STATE is not NULL, field 3 (the state
 * letter; '?' when unknown). */
static unsigned long long proc_stat(long pid, char *state)
{
    char path[64], buf[1024], *p;
    unsigned long long v = 0;
    ssize_t n;
    int fd;

    if (state != NULL)
        *state = '?';
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    p = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
    if (p == NULL)
        return 0;
    if (state != NULL && p[1] == ' ' && p[2] != '\0')
        *state = p[2];
    p++;
    /* fields 3.. follow; the start time is the 20th of them */
    for (int field = 3; field < 22 && p != NULL; field++)
        p = strchr(p + 1, ' ');
    if (p == NULL || sscanf(p, " %llu", &v) != 1)
        return 0;
    return v;
}

static unsigned long long start_time(long pid)
{
    return proc_stat(pid, NULL);
}

/* PID is the process that started at START and has not exited (a zombie,
 * killed but not yet waited for by its parent, has). */
static int process_alive(long pid, unsigned long long start)
{
    unsigned long long now;
    char st;

    if (pid <= 0)
        return 0;
    if (kill((pid_t)pid, 0) < 0 && errno == ESRCH)
        return 0;
    now = proc_stat(pid, &st);
    return now != 0 && now == start && st != 'Z' && st != 'X';
}

/* ------------------------------------------------------------------------ */
/* the record and the sweep                                                  */

/* Writes RUNDIR's record (PLAN may be NULL: no mount points yet) through a
 * temporary file renamed over it, so the sweep never reads half a record. */
static int write_record(const char *rundir, const struct sb_plan *plan, long rpid,
                        unsigned long long rstart)
{
    char path[PATH_MAX], tmp[PATH_MAX], head[128];
    int fd, rc = 0;

    if ((size_t)snprintf(path, sizeof path, "%s/" RECORD_NAME, rundir) >= sizeof path ||
        (size_t)snprintf(tmp, sizeof tmp, "%s/" RECORD_NAME ".new", rundir) >= sizeof tmp)
        return -ENAMETOOLONG;
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return -errno;
    snprintf(head, sizeof head, RECORD_MAGIC "%ld %llu %ld %llu\n", (long)getpid(),
             start_time((long)getpid()), rpid, rstart);
    if (common_write_all(fd, head, strlen(head)) < 0)
        rc = -errno;
    for (size_t i = 0; rc == 0 && plan != NULL && i < plan->created.n; i++)
        if (common_write_all(fd, plan->created.v[i], strlen(plan->created.v[i]) + 1) < 0)
            rc = -errno;
    if (close(fd) < 0 && rc == 0)
        rc = -errno;
    if (rc == 0 && rename(tmp, path) < 0)
        rc = -errno;
    if (rc < 0)
        (void)unlink(tmp);
    return rc;
}

/* Reads RUNDIR's record: its launcher (PID, START) and the mount points it
 * holds, appended to PATHS. -ENOENT when there is none yet, another
 * negative error when it is not a record of ours. */
struct record_head {
    long pid, rpid;                 /* the launcher, its reaper (0: unknown) */
    unsigned long long start, rstart;
};

static int read_record(const char *rundir, struct record_head *h, struct sb_strv *paths)
{
    char path[PATH_MAX], *buf = NULL, *p, *end;
    struct stat st;
    ssize_t n;
    int fd, rc = -EINVAL;

    if ((size_t)snprintf(path, sizeof path, "%s/" RECORD_NAME, rundir) >= sizeof path)
        return -ENAMETOOLONG;
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
        st.st_size <= 0 || (unsigned long long)st.st_size > RECORD_MAX ||
        (buf = malloc((size_t)st.st_size + 1)) == NULL)
        goto out;
    n = read(fd, buf, (size_t)st.st_size);
    if (n != st.st_size)
        goto out;
    buf[n] = '\0';
    memset(h, 0, sizeof(*h));
    if (strncmp(buf, RECORD_MAGIC, strlen(RECORD_MAGIC)) != 0 ||
        sscanf(buf + strlen(RECORD_MAGIC), "%ld %llu %ld %llu", &h->pid, &h->start, &h->rpid,
               &h->rstart) < 2)
        goto out;
    p = strchr(buf, '\n');
    if (p == NULL)
        goto out;
    end = buf + n;
    rc = 0;
    for (p++; rc == 0 && p < end; p += strlen(p) + 1)
        if (p[0] == '/')
            rc = sb_strv_push(paths, p);
out:
    close(fd);
    free(buf);
    return rc;
}

static int in_list(const struct sb_strv *l, const char *path)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i], path) == 0)
            return 1;
    return 0;
}

/* Calls fn(path, name, arg) for each run directory of ours in PARENT. */
static void each_run(const char *parent, void (*fn)(const char *path, const char *name, void *arg),
                     void *arg)
{
    DIR *d = opendir(parent);
    struct dirent *e;

    if (d == NULL)
        return;
    while ((e = readdir(d)) != NULL) {
        char path[PATH_MAX];
        struct stat st;
        if (strncmp(e->d_name, "run.", 4) != 0)
            continue;
        if ((size_t)snprintf(path, sizeof path, "%s/%s", parent, e->d_name) >= sizeof path)
            continue;
        if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid())
            fn(path, e->d_name, arg);
    }
    closedir(d);
}

struct sweep {
    long dead_pid;       /* counts as dead whatever /proc says (0: none) */
    struct sb_strv live; /* the mount points live runs hold */
    int nomem;
};

/* A run is live while its launcher is, and, once the launcher is gone,
 * while its reaper is: the reaper waits for the sandbox to go before it
 * cleans, and until then no other run may remove what the run holds (its
 * bwrap could still be making a mount point). DEAD_PID's run is not. */
static int run_live(const struct record_head *h, long dead_pid)
{
    return h->pid != dead_pid &&
           (process_alive(h->pid, h->start) || (h->rpid > 0 && process_alive(h->rpid, h->rstart)));
}

static void collect_live(const char *path, const char *name, void *arg)
{
    struct sweep *s = arg;
    struct sb_strv paths = {0};
    struct record_head h;

    (void)name;
    if (read_record(path, &h, &paths) == 0 && run_live(&h, s->dead_pid))
        for (size_t i = 0; i < paths.n; i++)
            if (!in_list(&s->live, paths.v[i]) && sb_strv_push(&s->live, paths.v[i]) < 0)
                s->nomem = 1;
    sb_strv_free(&paths);
}

/* A placeholder still a mount point (EBUSY) is tried again, 1 ms later,
 * then twice as long each time up to 50 ms apart, for PLACEHOLDER_WAIT_MS
 * in all before its run directory is left to a later sweep (the dead
 * sandbox's mounts usually go within a few ms; issue 25: a fixed 50 ms
 * sleep made the common case slow) */
#define PLACEHOLDER_WAIT_MS 2000
#define PLACEHOLDER_STEP_MAX_MS 50

static void placeholder_wait(int64_t *step_ms)
{
    struct timespec ts = {0, (long)*step_ms * 1000 * 1000};

    (void)nanosleep(&ts, NULL);
    if (*step_ms < PLACEHOLDER_STEP_MAX_MS)
        *step_ms = *step_ms * 2 > PLACEHOLDER_STEP_MAX_MS ? PLACEHOLDER_STEP_MAX_MS : *step_ms * 2;
}

/* Cleans the run directory PATH (the mount points its record holds that no
 * live run holds too, deepest first, then the directory) when its record,
 * or its name, names a launcher that is gone. */
static void clean_dead(const char *path, const char *name, void *arg)
{
    struct sweep *s = arg;
    struct sb_strv paths = {0};
    struct record_head h;
    unsigned long long start;
    long pid;
    int rc = read_record(path, &h, &paths);

    if (rc == -ENOENT) {
        /* killed before its first record was in place (bwrap had not
         * started: no mount points yet): the name says whose it is */
        if (sscanf(name, "run.%ld.%llu.", &pid, &start) == 2 &&
            (pid == s->dead_pid || !process_alive(pid, start)))
            sb_remove_tree(path);
    } else if (rc == 0 && !run_live(&h, s->dead_pid)) {
        /* a mount point is held by every run whose sandbox mounts on it:
         * the last one out removes it, never one a live sandbox uses */
        int busy = 0;
        int64_t step = 1, deadline = common_mono_ms() + PLACEHOLDER_WAIT_MS;
        for (;;) {
            struct ph_dir d = {.fd = -1};
            busy = 0;
            for (size_t i = paths.n; i-- > 0;)
                if (!in_list(&s->live, paths.v[i]))
                    busy |= remove_placeholder(&d, paths.v[i]);
            ph_dir_close(&d);
            if (!busy || common_mono_ms() >= deadline)
                break;
            placeholder_wait(&step);
        }
        /* a mount point still busy keeps the record, for the next sweep */
        if (!busy)
            sb_remove_tree(path);
    }
    sb_strv_free(&paths);
}

/* Cleans every dead run's directory in PARENT (the parent is locked);
 * DEAD_PID's (the reaper's launcher, or this process) counts as dead
 * whatever /proc says. */
static void sweep(const char *parent, long dead_pid)
{
    struct sweep s = {.dead_pid = dead_pid};

    each_run(parent, collect_live, &s);
    if (!s.nomem) /* else what live runs hold is unknown: remove nothing */
        each_run(parent, clean_dead, &s);
    sb_strv_free(&s.live);
}

/* ------------------------------------------------------------------------ */
/* the run directory's parent and its lock                                   */

/* PATH is a directory that OWNER made and nobody else can write into. */
static int owned_dir(const char *path, uid_t owner, mode_t loose)
{
    struct stat st;

    return lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == owner &&
           (st.st_mode & loose) == 0;
}

/* The parent of the run directories, in a place nobody else can take first
 * (issue 21): $XDG_RUNTIME_DIR/sluice when XDG_RUNTIME_DIR is an absolute
 * directory of ours that nobody else can write into (in one that others
 * can, they could rename our sluice/ and put their own in its place
 * between two uses of its path); else, for root, /run/sluice; else /run/user/UID/sluice
 * when logind's /run/user/UID is there (ours, 0700); else /tmp/sluice-UID,
 * which another user can make first: that one is refused by parent_lock. */
static int parent_dir(char *out, size_t len, char *err, size_t errlen)
{
    const char *base = getenv("XDG_RUNTIME_DIR");
    unsigned long uid = (unsigned long)geteuid();
    char user[64];
    struct stat st;
    int n;

    snprintf(user, sizeof user, "/run/user/%lu", uid);
    if (base != NULL && base[0] == '/' && stat(base, &st) == 0 && S_ISDIR(st.st_mode) &&
        st.st_uid == geteuid() && (st.st_mode & 022) == 0 && access(base, W_OK) == 0)
        n = snprintf(out, len, "%s/sluice", base);
    else if (uid == 0 && owned_dir("/run", 0, 022))
        n = snprintf(out, len, "/run/sluice");
    else if (owned_dir("/run", 0, 022) && owned_dir("/run/user", 0, 022) &&
             owned_dir(user, geteuid(), 077))
        n = snprintf(out, len, "%s/sluice", user);
    else
        n = snprintf(out, len, "/tmp/sluice-%lu", uid);
    if (n < 0 || (size_t)n >= len) {
        snprintf(err, errlen, "the run directory's path is too long");
        return -1;
    }
    return 0;
}

/* Opens PARENT (making it first when CREATE), checks it is a directory of
 * ours with mode 0700 that is not a symbolic link (by the descriptor: never
 * followed), and locks it: the lock orders every change to PARENT and to
 * the mount points its records hold (issue 21: parallel runs). The
 * descriptor, or a negative error: -ENOENT (not there and not CREATE),
 * -EPERM (not ours, a link or too open). Closing it unlocks. */
static int parent_lock(const char *parent, int create)
{
    for (int tries = 0; tries < 64; tries++) {
        struct stat st, now;
        int fd;

        if (create && mkdir(parent, 0700) < 0 && errno != EEXIST)
            return -errno;
        fd = open(parent, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT && create)
            continue; /* the last run out removed it after our mkdir */
        if (fd < 0)
            return errno == ELOOP || errno == ENOTDIR ? -EPERM : -errno;
        if (fstat(fd, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
            (st.st_mode & 077) != 0) {
            close(fd);
            return -EPERM;
        }
        while (flock(fd, LOCK_EX) < 0) {
            if (errno != EINTR) {
                int rc = -errno;
                close(fd);
                return rc;
            }
        }
        /* the last run out removes PARENT under this lock: the one we
         * hold must still be on the directory at PARENT */
        if (lstat(parent, &now) == 0 && now.st_dev == st.st_dev && now.st_ino == st.st_ino)
            return fd;
        close(fd);
        if (!create)
            return -ENOENT;
    }
    return -EAGAIN;
}

static void parent_lock_error(const char *parent, int rc, char *err, size_t errlen)
{
    if (rc == -EPERM)
        snprintf(err, errlen,
                 "'%s' is not a directory of uid %lu with mode 0700 (someone else made it?): "
                 "it is not used; remove it, or set XDG_RUNTIME_DIR to a directory of yours",
                 parent, (unsigned long)geteuid());
    else
        snprintf(err, errlen, "cannot create the run directory '%s': %s", parent,
                 strerror(-rc));
}

/* PARENT of RUNDIR into OUT. */
static int parent_of(const char *rundir, char *out, size_t len)
{
    const char *slash = strrchr(rundir, '/');

    if (slash == NULL || slash == rundir || (size_t)(slash - rundir) >= len)
        return -EINVAL;
    memcpy(out, rundir, (size_t)(slash - rundir));
    out[slash - rundir] = '\0';
    return 0;
}

int sb_rundir_lock(const char *rundir, char *err, size_t errlen)
{
    char parent[PATH_MAX];
    int fd;

    if (parent_of(rundir, parent, sizeof parent) < 0) {
        snprintf(err, errlen, "the run directory's path is too long");
        return -1;
    }
    fd = parent_lock(parent, 0);
    if (fd < 0)
        parent_lock_error(parent, fd, err, errlen);
    return fd < 0 ? -1 : fd;
}

void sb_rundir_unlock(int fd)
{
    if (fd >= 0)
        close(fd);
}

/* The run directory, the mount points its record holds that no other live
 * run holds, and the parent when no other run uses it. */
void sb_rundir_remove(const char *rundir)
{
    char parent[PATH_MAX], path[PATH_MAX];
    int fd;

    if (parent_of(rundir, parent, sizeof parent) < 0) {
        sb_remove_tree(rundir);
        return;
    }
    fd = parent_lock(parent, 0);
    if (fd >= 0)
        sweep(parent, (long)getpid()); /* this run, and any dead one */
    /* the sweep keeps a run directory whose mount points are still busy
     * (another run's sandbox stands on one: rt-16) for the next sweep: its
     * record stays, the sandbox's /tmp goes */
    if (fd >= 0 && snprintf(path, sizeof path, "%s/" RECORD_NAME, rundir) < (int)sizeof path &&
        access(path, F_OK) == 0 &&
        snprintf(path, sizeof path, "%s/tmp", rundir) < (int)sizeof path)
        sb_remove_tree(path);
    else
        sb_remove_tree(rundir);
    if (fd >= 0) {
        (void)rmdir(parent); /* fails while another run is in it */
        close(fd);
    }
}

/* ------------------------------------------------------------------------ */
/* the run directory                                                         */

static int reaper_fork(struct sb_reaper *r, const char *parent, char *err, size_t errlen);

int sb_rundir_make(char *dir, size_t len, char *tmp, size_t tlen, char *mask, size_t mlen,
                   struct sb_reaper *r, char *err, size_t errlen)
{
    int lock, rc = -1;

    if (parent_dir(mask, mlen, err, errlen) < 0)
        return -1;
    /* the reaper before the run directory: from here on a kill leaves
     * nothing behind; it also sweeps the pids cgroups of dead runs, beside
     * the launcher's own work (issue 25) */
    if (reaper_fork(r, mask, err, errlen) < 0)
        return -1;
    lock = parent_lock(mask, 1);
    if (lock < 0) {
        parent_lock_error(mask, lock, err, errlen);
        return -1;
    }
    sweep(mask, 0);
    /* run.PID.START.XXXXXX: recognisable as this launcher's even before
     * its record is written */
    if ((size_t)snprintf(dir, len, "%s/run.%ld.%llu.XXXXXX", mask, (long)getpid(),
                         start_time((long)getpid())) >= len) {
        snprintf(err, errlen, "the run directory's path is too long");
        goto out;
    }
    if (mkdtemp(dir) == NULL) {
        snprintf(err, errlen, "cannot create the run directory in '%s': %s", mask,
                 strerror(errno));
        goto out;
    }
    /* the record first (no mount points yet): a run killed from here on is
     * recognised by the sweep */
    if (write_record(dir, NULL, (long)r->pid, start_time((long)r->pid)) < 0) {
        snprintf(err, errlen, "cannot write '%s/" RECORD_NAME "': %s", dir, strerror(errno));
        sb_remove_tree(dir);
        goto out;
    }
    if ((size_t)snprintf(tmp, tlen, "%s/tmp", dir) >= tlen || mkdir(tmp, 0700) < 0) {
        snprintf(err, errlen, "cannot create '%s/tmp': %s", dir, strerror(errno));
        sb_remove_tree(dir);
        goto out;
    }
    rc = 0;
out:
    close(lock);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* the reaper                                                                */

int sb_reaper_info_pid(const char *buf, size_t len, long *pid)
{
    static const char key[] = "\"child-pid\"";
    char text[REAPER_INFO_MAX + 1], *k, *end;
    long v;

    if (len > REAPER_INFO_MAX)
        len = REAPER_INFO_MAX;
    memcpy(text, buf, len);
    text[len] = '\0';
    k = strstr(text, key);
    if (k == NULL)
        return -1;
    k += sizeof(key) - 1;
    while (*k == ' ' || *k == '\t' || *k == '\n' || *k == '\r')
        k++;
    if (*k++ != ':')
        return -1;
    while (*k == ' ' || *k == '\t' || *k == '\n' || *k == '\r')
        k++;
    if (*k < '1' || *k > '9')
        return -1;
    errno = 0;
    v = strtol(k, &end, 10);
    if (errno != 0 || v <= 0 || v > INT_MAX || (*end != '\0' && strchr(" \t\r\n,}", *end) == NULL))
        return -1;
    *pid = v;
    return 0;
}

/* What the reaper watches: its launcher's pipe, bwrap's --info-fd, and
 * pidfds of bwrap and of the sandbox's first process once it knows them. */
struct watch {
    int fd, info_fd, bwrap, child;
    char info[REAPER_INFO_MAX];
    size_t ninfo;
};

static int pidfd_of(long pid)
{
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, (pid_t)pid, 0U);
#else
    (void)pid;
    return -1;
#endif
}

/* bwrap's --info-fd is readable: its text so far, and the sandbox's first
 * process once named (pidfd_open at once: its parent, bwrap, has not
 * waited for it). At EOF the pipe is closed. */
static void read_info(struct watch *w)
{
    ssize_t r;
    long pid;

    do
        r = read(w->info_fd, w->info + w->ninfo, sizeof(w->info) - w->ninfo);
    while (r < 0 && errno == EINTR);
    if (r > 0)
        w->ninfo += (size_t)r;
    if (w->child < 0 && sb_reaper_info_pid(w->info, w->ninfo, &pid) == 0)
        w->child = pidfd_of(pid);
    if (r <= 0 || w->ninfo == sizeof(w->info)) {
        close(w->info_fd);
        w->info_fd = -1;
    }
}

/* Whatever bwrap's --info-fd holds now, without waiting. */
static void drain_info(struct watch *w)
{
    while (w->info_fd >= 0) {
        struct pollfd p = {.fd = w->info_fd, .events = POLLIN};
        if (poll(&p, 1, 0) != 1)
            break;
        read_info(w);
    }
}

/* One message from the launcher: 1 for 'D', -1 at EOF, else 0 ('P' +
 * bwrap's pid). */
static int read_launcher(struct watch *w)
{
    unsigned char c;
    int32_t pid;
    size_t got = 0;
    ssize_t r;

    do
        r = read(w->fd, &c, 1);
    while (r < 0 && errno == EINTR);
    if (r <= 0)
        return -1;
    if (c == 'D')
        return 1;
    if (c != 'P')
        return 0;
    while (got < sizeof pid) {
        r = read(w->fd, (char *)&pid + got, sizeof pid - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    if (pid > 0 && w->bwrap < 0)
        w->bwrap = pidfd_of((long)pid);
    return 0;
}

/* SIGKILL through a pidfd (never a recycled pid); -1 is none. */
static void kill_pidfd(int pidfd)
{
#ifdef SYS_pidfd_send_signal
    if (pidfd >= 0)
        (void)syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0U);
#else
    (void)pidfd;
#endif
}

/* The launcher is gone: bwrap (killed by --die-with-parent) and the
 * sandbox's first process (which may still be making mount points) go
 * first, for at most REAPER_WAIT_MS; bwrap's word on --info-fd is read
 * until then too. Without a pidfd of bwrap: 200 ms. The first process is
 * killed as soon as it is known (rt-8): it asks for its death signal only
 * once its set-up is done, and one whose bwrap died while it waited for
 * bwrap's word (the uid map, an eventfd) waited forever, holding inner's
 * end of the socketpair, after the reaper had given up on it. A run whose
 * launcher is gone is over: --die-with-parent would kill it anyway. */
static void wait_sandbox(struct watch *w)
{
    int64_t deadline = common_mono_ms() + REAPER_WAIT_MS;

    kill_pidfd(w->child);

    if (w->bwrap < 0) {
        struct timespec ts = {0, 200 * 1000 * 1000};
        nanosleep(&ts, NULL);
        return;
    }
    for (;;) {
        struct pollfd p[3] = {{.fd = w->bwrap, .events = POLLIN},
                              {.fd = w->child, .events = POLLIN},
                              {.fd = w->info_fd, .events = POLLIN}};
        int64_t left = deadline - common_mono_ms();
        if (left <= 0 || poll(p, 3, (int)left) < 0)
            break;
        if (p[0].revents != 0) {
            close(w->bwrap);
            w->bwrap = -1;
        }
        if (p[1].revents != 0) {
            close(w->child);
            w->child = -1;
        }
        if (p[2].revents != 0) {
            int had = w->child >= 0;
            read_info(w);
            if (!had)
                kill_pidfd(w->child);
        }
        if (w->bwrap < 0) {
            /* what bwrap wrote before it went is in the pipe (another
             * holder of the write end, a helper forked meanwhile, may keep
             * EOF away): the first process is known now, or it never left
             * its wait for bwrap's word (no mount point made) */
            {
                int had = w->child >= 0;
                drain_info(w);
                if (!had)
                    kill_pidfd(w->child);
            }
            if (w->child < 0)
                break;
        }
    }
}

/* In the reaper: until EOF or 'D' on FD; INFO_FD is bwrap's --info-fd
 * (-1: none). */
static void reaper_main(int fd, int info_fd, const char *parent, long launcher)
{
    struct watch w = {.fd = fd, .info_fd = info_fd, .bwrap = -1, .child = -1};
    int rc = 0;

    /* dead runs' pids cgroups (limits.c): one still busy is left for the
     * next sweep (waiting for it held every later run's end 0.5 s) */
    sb_cgroup_sweep(process_alive, 0);

    while (rc == 0) {
        struct pollfd p[2] = {{.fd = w.fd, .events = POLLIN}, {.fd = w.info_fd, .events = POLLIN}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (p[1].revents != 0)
            read_info(&w);
        if (p[0].revents != 0)
            rc = read_launcher(&w);
    }
    if (rc == 1)
        return;
    wait_sandbox(&w);
    /* the records on disk are the latest word: the launcher's run
     * directory (by its record, with the mount points once the launcher
     * knew them, or by its name) and any other dead run's */
    {
        int lock = parent_lock(parent, 0);
        if (lock >= 0) {
            sweep(parent, launcher);
            (void)rmdir(parent); /* when no other run uses it */
            close(lock);
        }
    }
    sb_cgroup_sweep(process_alive, 500); /* the launcher's pids cgroup (limits.c) */
}

/* Adds to HELD the mount points live runs hold (LIVE) that PLAN's sandbox
 * stands on: each one its bwrap mounts on, or below. Another run's
 * placeholder that this run's scan found as an existing name must stay
 * until this run is done too. */
static int hold_shared(const struct sb_strv *live, const struct sb_plan *plan,
                       struct sb_strv *held)
{
    for (size_t i = 0; i < live->n; i++) {
        const char *p = live->v[i];
        size_t n = strlen(p);
        for (size_t j = 0; j < plan->argv.n && strcmp(plan->argv.v[j], "--") != 0; j++) {
            const char *t = plan->argv.v[j];
            if (strncmp(t, p, n) == 0 && (t[n] == '\0' || t[n] == '/')) {
                if (!in_list(held, p) && sb_strv_push(held, p) < 0)
                    return -ENOMEM;
                break;
            }
        }
    }
    return 0;
}

static int cmp_path(const void *a, const void *b)
{
    return sb_path_cmp(*(char *const *)a, *(char *const *)b);
}

int sb_reaper_record(const char *rundir, const struct sb_plan *plan, char *err, size_t errlen)
{
    struct sweep s = {.dead_pid = (long)getpid()}; /* this run's own record is not live */
    struct sb_plan rec = {0};
    char parent[PATH_MAX];
    int rc = 0;

    for (size_t i = 0; rc == 0 && i < plan->created.n; i++)
        if (!in_list(&rec.created, plan->created.v[i]))
            rc = sb_strv_push(&rec.created, plan->created.v[i]);
    if (rc == 0 && parent_of(rundir, parent, sizeof parent) == 0) {
        each_run(parent, collect_live, &s);
        rc = s.nomem ? -ENOMEM : hold_shared(&s.live, plan, &rec.created);
    }
    if (rc == 0) {
        /* parents first, as the sweep removes them deepest first */
        if (rec.created.n > 1)
            qsort(rec.created.v, rec.created.n, sizeof(*rec.created.v), cmp_path);
        struct record_head h = {0};
        struct sb_strv old = {0};
        (void)read_record(rundir, &h, &old); /* the reaper, as first written */
        sb_strv_free(&old);
        rc = write_record(rundir, &rec, h.rpid, h.rstart);
    }
    if (rc < 0)
        snprintf(err, errlen, "cannot write '%s/" RECORD_NAME "': %s", rundir, strerror(-rc));
    sb_strv_free(&s.live);
    sb_plan_free(&rec);
    return rc < 0 ? -1 : 0;
}

/* The reaper's descriptors: 0-2 on /dev/null, RFD (the launcher's pipe)
 * on 3, IFD (bwrap's --info-fd, or -1) on 4, every other one closed (one
 * close_range instead of a thousand close calls, issue 25). Its new
 * numbers go to *rfd and *ifd. */
static void reaper_fds(int *rfd, int *ifd)
{
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    int r = fcntl(*rfd, F_DUPFD_CLOEXEC, 64), i = *ifd >= 0 ? fcntl(*ifd, F_DUPFD_CLOEXEC, 64) : -1;

    if (r < 0 || (*ifd >= 0 && i < 0)) {
        /* no room up there: keep them where they are, close the rest */
        for (int fd = 3; fd < 1024; fd++)
            if (fd != *rfd && fd != *ifd && fd != null)
                (void)close(fd);
        return;
    }
    if (null >= 0) {
        /* a caller reading our stdout to EOF must not wait for us */
        (void)dup2(null, 0);
        (void)dup2(null, 1);
        (void)dup2(null, 2);
    }
    *rfd = dup2(r, 3) == 3 ? 3 : r;
    *ifd = i >= 0 && dup2(i, 4) == 4 ? 4 : i;
#ifdef SYS_close_range
    if (*rfd != 3 || (i >= 0 && *ifd != 4) ||
        syscall(SYS_close_range, i >= 0 ? 5U : 4U, ~0U, 0U) != 0)
#endif
        for (int fd = 3; fd < 1024; fd++)
            if (fd != *rfd && fd != *ifd)
                (void)close(fd);
}

static int reaper_fork(struct sb_reaper *r, const char *parent, char *err, size_t errlen)
{
    long launcher = (long)getpid();
    int p[2], q[2] = {-1, -1};
    pid_t pid;

    r->pid = -1;
    r->fd = -1;
    r->info_fd = -1;
    if (pipe2(p, O_CLOEXEC) < 0) {
        snprintf(err, errlen, "reaper: pipe: %s", strerror(errno));
        return -1;
    }
    /* bwrap's --info-fd: without it the reaper waits for bwrap only */
    if (pipe2(q, O_CLOEXEC) < 0)
        q[0] = q[1] = -1;
    fflush(NULL);
    pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "reaper: fork: %s", strerror(errno));
        close(p[0]);
        close(p[1]);
        if (q[0] >= 0) {
            close(q[0]);
            close(q[1]);
        }
        return -1;
    }
    if (pid == 0) {
        int rfd = p[0], ifd = q[0];
        close(p[1]);
        if (q[1] >= 0)
            close(q[1]);
        (void)setsid();
        (void)prctl(PR_SET_NAME, "sluice-reaper", 0UL, 0UL, 0UL);
        signal(SIGINT, SIG_IGN);
        signal(SIGTERM, SIG_IGN);
        signal(SIGHUP, SIG_IGN);
        signal(SIGQUIT, SIG_IGN);
        signal(SIGPIPE, SIG_IGN);
        reaper_fds(&rfd, &ifd);
        reaper_main(rfd, ifd, parent, launcher);
        _exit(0);
    }
    close(p[0]);
    if (q[0] >= 0)
        close(q[0]);
    r->pid = pid;
    r->fd = p[1];
    r->info_fd = q[1];
    return 0;
}

void sb_reaper_watch(struct sb_reaper *r, int pid)
{
    unsigned char msg[1 + sizeof(int32_t)];
    int32_t v = pid;

    if (r->fd < 0 || pid <= 0)
        return;
    msg[0] = 'P';
    memcpy(msg + 1, &v, sizeof v);
    (void)common_write_all(r->fd, msg, sizeof msg);
}

void sb_reaper_info_sent(struct sb_reaper *r)
{
    if (r->info_fd >= 0) {
        close(r->info_fd);
        r->info_fd = -1;
    }
}

void sb_reaper_finish(struct sb_reaper *r)
{
    sb_reaper_info_sent(r);
    if (r->fd >= 0) {
        (void)common_write_all(r->fd, "D", 1);
        close(r->fd);
        r->fd = -1;
    }
    if (r->pid > 0) {
        while (waitpid(r->pid, NULL, 0) < 0 && errno == EINTR)
            ;
        r->pid = -1;
    }
}
