/* sandbox/limits.c - sandbox.limits (issue 14), applied by `sluice inner`
 * inside the sandbox just before Landlock and seccomp, so they bind the
 * command and everything it starts, and nothing of sluice on the host.
 *
 *   processes  RLIMIT_NPROC, soft and hard. The kernel counts it per user
 *              per user namespace: bwrap gives the sandbox a user namespace
 *              of its own (unless bwrap is setuid), so the count is the
 *              sandbox's own tasks (threads included), for root as well
 *              (capable() is asked of the initial namespace, where the
 *              command has nothing). Without a user namespace it counts
 *              every process of the real uid on the host, and uid 0 is
 *              exempt: inner then says the limit is not enforced.
 *              Default 8192: far above what `make -j` on a large machine or
 *              a JVM build uses, far below what a fork bomb reaches.
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

#include <errno.h>
#include <stdio.h>
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

/* 1 when this process is in the initial user namespace as uid 0: the
 * kernel does not apply RLIMIT_NPROC to it. */
static int nproc_exempt(void)
{
    FILE *f;
    unsigned long a = 0, b = 0, n = 0;
    int init_ns = 0;

    if (getuid() != 0)
        return 0;
    f = fopen("/proc/self/uid_map", "re");
    if (f == NULL)
        return 1;
    if (fscanf(f, "%lu %lu %lu", &a, &b, &n) == 3 && a == 0 && b == 0 && n == 4294967295UL)
        init_ns = 1;
    fclose(f);
    return init_ns;
}

int sb_limits_apply(const struct sb_limits *l, char *err, size_t errlen)
{
    if (l->processes > 0) {
        if (set_one(RLIMIT_NPROC, "RLIMIT_NPROC", (rlim_t)l->processes, err, errlen) < 0)
            return -1;
        if (nproc_exempt())
            fprintf(stderr, "sluice inner: warning: sandbox.limits.processes is not enforced: "
                            "the sandbox runs as root without a user namespace (setuid bwrap)\n");
    }
    if (l->memory_mib > 0 &&
        set_one(RLIMIT_AS, "RLIMIT_AS", (rlim_t)l->memory_mib << 20, err, errlen) < 0)
        return -1;
    if (l->open_files > 0 &&
        set_one(RLIMIT_NOFILE, "RLIMIT_NOFILE", (rlim_t)l->open_files, err, errlen) < 0)
        return -1;
    return 0;
}
