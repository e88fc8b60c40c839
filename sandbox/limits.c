/* sandbox/limits.c - sandbox.limits (issue 14), applied by `sluice inner`
 * inside the sandbox after Landlock and seccomp, just before exec: they bind the
 * command and everything it starts, and nothing of sluice on the host.
 *
 *   processes  RLIMIT_NPROC, soft and hard. The kernel counts it per user
 *              per user namespace: bwrap gives the sandbox a user namespace
 *              of its own (unless bwrap is setuid), so for an unprivileged
 *              user the count is the sandbox's own tasks (threads included).
 *              The kernel never applies it to uid 0 (INIT_USER), namespace
 *              or not: a root launcher uses a pids cgroup instead (below),
 *              or says on stderr that the limit is not enforced. Default 8192: far above what `make -j` on a large
 *              machine or a JVM build uses, far below a fork bomb's reach.
 *   memory     RLIMIT_AS in MiB, per process (address space, not resident
 *              memory: a JVM or an ASan build reserves much more than it
 *              uses, so there is no default).
 *   openFiles  RLIMIT_NOFILE, per process (no default: the inherited one).
 * A value above the inherited hard limit is lowered to it: the limit is
 * "at most N". A cgroup v2 (pids.max, memory.max for the whole sandbox)
 * needs a delegated cgroup sluice does not have here; not done.
 * When a limit is hit, fork/clone fail with EAGAIN ("Resource temporarily
 * unavailable"), mmap/malloc with ENOMEM, open with EMFILE ("Too many open
 * files"), as the README says. */
#include "sandbox/sandbox.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static const struct {
    const char *opt;
    size_t off;
    unsigned long min, max;
} limit_opts[] = {
    {"--limit-processes=", offsetof(struct sb_limits, processes), 16, 4194304},
    {"--limit-memory-mib=", offsetof(struct sb_limits, memory_mib), 64, 1UL << 26},
    {"--limit-open-files=", offsetof(struct sb_limits, open_files), 64, 1UL << 24},
};

int sb_limits_parse_arg(struct sb_limits *l, const char *opt, char *why, size_t whylen)
{
    for (size_t i = 0; i < sizeof limit_opts / sizeof limit_opts[0]; i++) {
        size_t n = strlen(limit_opts[i].opt);
        unsigned long v = 0;
        const char *p;

        if (strncmp(opt, limit_opts[i].opt, n) != 0)
            continue;
        p = opt + n;
        if (*p == '\0')
            goto bad;
        for (; *p != '\0'; p++) {
            if (*p < '0' || *p > '9' || v > limit_opts[i].max)
                goto bad;
            v = v * 10 + (unsigned long)(*p - '0');
        }
        if (v < limit_opts[i].min || v > limit_opts[i].max)
            goto bad;
        *(unsigned long *)(void *)((char *)l + limit_opts[i].off) = v;
        return 0;
    bad:
        snprintf(why, whylen, "option '%s': expected a number from %lu to %lu", opt,
                 limit_opts[i].min, limit_opts[i].max);
        return -1;
    }
    snprintf(why, whylen, "unknown option '%s'", opt);
    return -1;
}

static int set_one(int res, const char *name, rlim_t want, char *err, size_t errlen)
{
    struct rlimit rl;

    if (getrlimit(res, &rl) < 0) {
        snprintf(err, errlen, "limits: getrlimit(%s): %s", name, strerror(errno));
        return -1;
    }
    if (rl.rlim_max != RLIM_INFINITY && want > rl.rlim_max)
        want = rl.rlim_max;
    rl.rlim_cur = want;
    rl.rlim_max = want;
    if (setrlimit(res, &rl) < 0) {
        snprintf(err, errlen, "limits: setrlimit(%s, %llu): %s", name, (unsigned long long)want,
                 strerror(errno));
        return -1;
    }
    return 0;
}

int sb_limits_apply(const struct sb_limits *l, char *err, size_t errlen)
{
    if (l->processes > 0) {
        /* ignored by the kernel for uid 0: the launcher's pids cgroup */
        if (set_one(RLIMIT_NPROC, "RLIMIT_NPROC", (rlim_t)l->processes, err, errlen) < 0)
            return -1;
    }
    if (l->memory_mib > 0 &&
        set_one(RLIMIT_AS, "RLIMIT_AS", (rlim_t)l->memory_mib << 20, err, errlen) < 0)
        return -1;
    if (l->open_files > 0 &&
        set_one(RLIMIT_NOFILE, "RLIMIT_NOFILE", (rlim_t)l->open_files, err, errlen) < 0)
        return -1;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* a pids cgroup for root (host side)                                        */
/*
 * The kernel never applies RLIMIT_NPROC to uid 0 (INIT_USER), user
 * namespace or not, and sluice run as root maps root into the sandbox. So
 * for a root launcher sandbox.limits.processes is enforced with a pids
 * cgroup instead: PIDS/sluice-run.PID.START (PID, START: the launcher's pid
 * and start time, so the sweep and the reaper can tell a dead run's), where
 * PIDS is this process's own cgroup in the cgroup v1 "pids" hierarchy, or
 * in the unified (v2) hierarchy when "pids" is enabled in its
 * cgroup.subtree_control. The command and everything it starts are
 * counted, and nothing else once the go byte is sent:
 *
 *   - v1 (issue 25): the launcher's spawning thread writes "0" to the
 *     cgroup's `tasks` file, starts bwrap (which is born in the cgroup, with
 *     everything it forks) and writes "0" to its own cgroup's `tasks` file
 *     again. The kernel moves one thread that moves itself without its
 *     global threadgroup lock (Linux 6.2, "cgroup: Optimize single thread
 *     migration"); a pid written to cgroup.procs takes that lock, and its
 *     first taking after a quiet moment waits for an RCU grace period (5 to
 *     19 ms measured here, on the run's critical path). Before the go byte
 *     pids.max becomes the limit plus what bwrap holds besides inner
 *     (sb_cgroup_seal: pids.current - 1), so the command gets the limit.
 *   - otherwise (v2 has no `tasks` file): inner's pid is written to
 *     cgroup.procs before the go byte (sb_cgroup_enter); bwrap is not
 *     counted.
 *
 * The cgroup is removed after the run, by the reaper when the launcher is
 * killed, or by the next run's sweep. */

static int read_line(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "re");
    int ok;

    if (f == NULL)
        return -1;
    ok = fgets(buf, (int)len, f) != NULL;
    fclose(f);
    if (!ok)
        return -1;
    buf[strcspn(buf, "\n")] = '\0';
    return 0;
}

static int write_str(const char *path, const char *s)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    ssize_t n;
    int e;

    if (fd < 0)
        return -errno;
    n = write(fd, s, strlen(s));
    e = errno;
    close(fd);
    if (n < 0)
        return -e;
    return (size_t)n == strlen(s) ? 0 : -EIO;
}

/* The directory of this process's cgroup where pids can be limited. */
static int pids_base(char *out, size_t len)
{
    FILE *f = fopen("/proc/self/cgroup", "re");
    char line[4096], v2[4096] = "", v1[4096] = "";
    struct stat st;

    if (f == NULL)
        return -1;
    while (fgets(line, sizeof line, f) != NULL) {
        char *a = strchr(line, ':'), *b = a != NULL ? strchr(a + 1, ':') : NULL;
        if (b == NULL)
            continue;
        b[strcspn(b, "\n")] = '\0';
        *b = '\0';
        if (strcmp(a + 1, "") == 0 && strncmp(line, "0:", 2) == 0)
            snprintf(v2, sizeof v2, "%s", b + 1);
        else {
            /* "pids" alone or in a comma list of controllers */
            char *c = a + 1, *save = NULL;
            for (char *t = strtok_r(c, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save))
                if (strcmp(t, "pids") == 0)
                    snprintf(v1, sizeof v1, "%s", b + 1);
        }
    }
    fclose(f);
    if (v1[0] != '\0') {
        if ((size_t)snprintf(out, len, "/sys/fs/cgroup/pids%s", strcmp(v1, "/") == 0 ? "" : v1) <
                len &&
            stat(out, &st) == 0 && S_ISDIR(st.st_mode) && access(out, W_OK) == 0)
            return 0;
    }
    if (v2[0] != '\0') {
        char ctl[4200], buf[512];
        if ((size_t)snprintf(out, len, "/sys/fs/cgroup%s", strcmp(v2, "/") == 0 ? "" : v2) >= len)
            return -1;
        snprintf(ctl, sizeof ctl, "%s/cgroup.subtree_control", out);
        if (read_line(ctl, buf, sizeof buf) == 0 && access(out, W_OK) == 0) {
            char *save = NULL;
            for (char *t = strtok_r(buf, " ", &save); t != NULL; t = strtok_r(NULL, " ", &save))
                if (strcmp(t, "pids") == 0)
                    return 0;
        }
    }
    return -1;
}

static unsigned long long self_start(void)
{
    char buf[1024], *p;
    unsigned long long v = 0;

    if (read_line("/proc/self/stat", buf, sizeof buf) < 0 || (p = strrchr(buf, ')')) == NULL)
        return 0;
    for (int field = 2; field < 22 && p != NULL; field++)
        p = strchr(p + 1, ' ');
    if (p == NULL || sscanf(p, " %llu", &v) != 1)
        return 0;
    return v;
}

int sb_cgroup_make(struct sb_cgroup *cg, unsigned long pids_max, char *err, size_t errlen)
{
    char base[4096], file[4400], num[32];
    int rc;

    cg->path[0] = '\0';
    cg->joined = 0;
    if (pids_max == 0 || getuid() != 0)
        return 1; /* RLIMIT_NPROC does it (limits.c, in inner) */
    if (pids_base(base, sizeof base) < 0)
        return 1;
    if ((size_t)snprintf(cg->path, sizeof cg->path, "%s/sluice-run.%ld.%llu", base,
                         (long)getpid(), self_start()) >= sizeof cg->path) {
        cg->path[0] = '\0';
        return 1;
    }
    if (mkdir(cg->path, 0755) < 0 && errno != EEXIST) {
        snprintf(err, errlen, "limits: cannot create the cgroup '%s': %s", cg->path,
                 strerror(errno));
        cg->path[0] = '\0';
        return -1;
    }
    snprintf(file, sizeof file, "%s/pids.max", cg->path);
    snprintf(num, sizeof num, "%lu", pids_max + SB_CGROUP_SPAWN_ROOM);
    rc = write_str(file, num);
    if (rc < 0) {
        snprintf(err, errlen, "limits: cannot write '%s': %s", file, strerror(-rc));
        (void)rmdir(cg->path);
        cg->path[0] = '\0';
        return -1;
    }
    return 0;
}

/* DIR/FILE ("0": the calling thread) for a thread that moves itself. */
static int move_self(const char *dir, size_t dirlen)
{
    char file[4400];

    if ((size_t)snprintf(file, sizeof file, "%.*s/tasks", (int)dirlen, dir) >= sizeof file)
        return -ENAMETOOLONG;
    return write_str(file, "0");
}

int sb_cgroup_join(struct sb_cgroup *cg)
{
    cg->joined = 0;
    if (cg->path[0] == '\0' || move_self(cg->path, strlen(cg->path)) < 0)
        return -1;
    cg->joined = 1;
    return 0;
}

int sb_cgroup_leave(struct sb_cgroup *cg, char *err, size_t errlen)
{
    const char *slash = strrchr(cg->path, '/');
    int rc;

    if (!cg->joined || slash == NULL)
        return 0;
    rc = move_self(cg->path, (size_t)(slash - cg->path));
    if (rc < 0) {
        snprintf(err, errlen, "limits: cannot leave the cgroup '%s': %s", cg->path,
                 strerror(-rc));
        /* no rmdir can succeed while this thread is in it: the next run's
         * sweep removes it once this launcher is gone (rt-18) */
        cg->path[0] = '\0';
        return -1;
    }
    return 0;
}

int sb_cgroup_seal(const struct sb_cgroup *cg, unsigned long pids_max, char *err, size_t errlen)
{
    char file[4400], num[32];
    unsigned long cur = 0;
    int rc;

    snprintf(file, sizeof file, "%s/pids.current", cg->path);
    if (read_line(file, num, sizeof num) < 0 || sscanf(num, "%lu", &cur) != 1 || cur == 0) {
        snprintf(err, errlen, "limits: cannot read '%s'", file);
        return -1;
    }
    snprintf(file, sizeof file, "%s/pids.max", cg->path);
    snprintf(num, sizeof num, "%lu", pids_max + (cur - 1));
    rc = write_str(file, num);
    if (rc < 0) {
        snprintf(err, errlen, "limits: cannot write '%s': %s", file, strerror(-rc));
        return -1;
    }
    return 0;
}

int sb_cgroup_enter(const struct sb_cgroup *cg, int pid, char *err, size_t errlen)
{
    char file[4400], num[32];
    int rc;

    if (cg->path[0] == '\0')
        return 0;
    snprintf(file, sizeof file, "%s/cgroup.procs", cg->path);
    snprintf(num, sizeof num, "%d", pid);
    rc = write_str(file, num);
    if (rc < 0) {
        snprintf(err, errlen, "limits: cannot move the sandbox into the cgroup '%s': %s",
                 cg->path, strerror(-rc));
        return -1;
    }
    return 0;
}

void sb_cgroup_remove(struct sb_cgroup *cg)
{
    if (cg->path[0] == '\0')
        return;
    /* the command's processes are gone (bwrap's pid namespace ended with
     * it) but the kernel frees them a moment later: EBUSY for a short while */
    for (int i = 0; i < 100 && rmdir(cg->path) < 0 && errno == EBUSY; i++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    cg->path[0] = '\0';
}

void sb_cgroup_sweep(int (*alive)(long pid, unsigned long long start), unsigned wait_ms)
{
    char base[4096];
    DIR *d;
    struct dirent *e;

    if (getuid() != 0 || pids_base(base, sizeof base) < 0 || (d = opendir(base)) == NULL)
        return;
    while ((e = readdir(d)) != NULL) {
        long pid;
        unsigned long long start;
        char path[4400];
        if (sscanf(e->d_name, "sluice-run.%ld.%llu", &pid, &start) != 2 || alive(pid, start))
            continue;
        snprintf(path, sizeof path, "%s/%s", base, e->d_name);
        /* only when empty; its last processes may take a moment to go
         * (WAIT_MS); one still busy is the next sweep's */
        for (unsigned i = 0; rmdir(path) < 0 && errno == EBUSY && i < wait_ms / 10; i++) {
            struct timespec ts = {0, 10 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    closedir(d);
}
