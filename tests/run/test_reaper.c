/* tests/run/test_reaper.c - issue 14: the run directory, the sweep of
 * dead runs' leftovers and the reaper (run/reaper.c), on real trees
 * under /tmp. What must hold: only what sluice's record names is removed,
 * only when its launcher is gone, and a mount point only while it is still
 * empty; a launcher that dies is cleaned up after by its reaper; one that
 * finishes is not second-guessed. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "run/reaper.h"

static char base[PATH_MAX]; /* XDG_RUNTIME_DIR for the tests */
static struct sb_reaper reaper; /* the tests' own runs': finished at teardown */

static int exists(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int exists(const char *fmt, ...)
{
    char p[PATH_MAX * 2];
    struct stat st;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(p, sizeof(p), fmt, ap);
    va_end(ap);
    return lstat(p, &st) == 0;
}

static void mk(const char *path, int dir, const char *content)
{
    if (dir) {
        if (mkdir(path, 0755) < 0 && errno != EEXIST)
            fail_msg("mkdir %s: %s", path, strerror(errno));
        return;
    }
    FILE *f = fopen(path, "w");
    if (f == NULL)
        fail_msg("fopen %s: %s", path, strerror(errno));
    if (content != NULL)
        fputs(content, f);
    fclose(f);
}

static unsigned long long my_start(pid_t pid)
{
    char path[64], buf[1024], *p;
    unsigned long long v = 0;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    f = fopen(path, "r");
    assert_non_null(f);
    assert_non_null(fgets(buf, sizeof(buf), f));
    fclose(f);
    p = strrchr(buf, ')');
    assert_non_null(p);
    for (int field = 2; field < 22 && p != NULL; field++)
        p = strchr(p + 1, ' ');
    assert_non_null(p);
    assert_int_equal(sscanf(p, " %llu", &v), 1);
    return v;
}

/* A run directory DIR/NAME with a record for PID/START naming PATHS. */
static void fake_run(const char *dir, const char *name, long pid, unsigned long long start,
                     const char *const *paths)
{
    char p[PATH_MAX * 2];
    FILE *f;

    snprintf(p, sizeof(p), "%s/%s", dir, name);
    mk(p, 1, NULL);
    snprintf(p, sizeof(p), "%s/%s/tmp", dir, name);
    mk(p, 1, NULL);
    snprintf(p, sizeof(p), "%s/%s/tmp/data", dir, name);
    mk(p, 0, "left by the command");
    if (start == 0)
        return; /* no record */
    snprintf(p, sizeof(p), "%s/%s/sluice-run", dir, name);
    f = fopen(p, "w");
    assert_non_null(f);
    fprintf(f, "sluice-run 1 %ld %llu\n", pid, start);
    for (size_t i = 0; paths != NULL && paths[i] != NULL; i++)
        fwrite(paths[i], 1, strlen(paths[i]) + 1, f);
    fclose(f);
}

static long dead_pid(void)
{
    pid_t pid = fork();

    assert_true(pid >= 0);
    if (pid == 0)
        _exit(0);
    assert_int_equal(waitpid(pid, NULL, 0), pid);
    return (long)pid;
}

/* A live process that is not this one (a run another launcher owns). */
static pid_t live_child(void)
{
    pid_t pid = fork();

    assert_true(pid >= 0);
    if (pid == 0) {
        /* gone with the test, even when a failed assertion skipped
         * end_child(); and not holding the test's output open */
        int null = open("/dev/null", O_WRONLY);
        (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (null >= 0) {
            (void)dup2(null, 1);
            (void)dup2(null, 2);
        }
        if (getppid() == 1)
            _exit(0);
        pause();
        _exit(0);
    }
    return pid;
}

static void end_child(pid_t pid)
{
    assert_int_equal(kill(pid, SIGKILL), 0);
    assert_int_equal(waitpid(pid, NULL, 0), pid);
}

static int setup(void **state)
{
    (void)state;
    reaper.pid = reaper.fd = reaper.info_fd = -1;
    snprintf(base, sizeof(base), "/tmp/sluice-test-reaper.XXXXXX");
    if (mkdtemp(base) == NULL)
        return -1;
    setenv("XDG_RUNTIME_DIR", base, 1);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    sb_reaper_finish(&reaper);
    sb_remove_tree(base);
    return 0;
}

static void test_rundir_private(void **state)
{
    char dir[PATH_MAX], tmp[PATH_MAX + 8], mask[PATH_MAX], err[256], want[PATH_MAX + 16];
    struct stat st;

    (void)state;
    assert_int_equal(sb_rundir_make(dir, sizeof(dir), tmp, sizeof(tmp), mask, sizeof(mask),
                                    &reaper, err, sizeof(err)),
                     0);
    snprintf(want, sizeof(want), "%s/sluice", base);
    assert_string_equal(mask, want);
    assert_int_equal(strncmp(dir, want, strlen(want)), 0);
    assert_int_equal(lstat(mask, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    assert_int_equal(lstat(dir, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    assert_true(exists("%s/sluice-run", dir)); /* the record, from the start */
    assert_true(exists("%s", tmp));
    mk(tmp, 1, NULL);
    sb_rundir_remove(dir);
    assert_false(exists("%s", dir));
    assert_false(exists("%s", mask)); /* the parent too, once empty */
}

static void test_parent_not_ours(void **state)
{
    char dir[PATH_MAX], tmp[PATH_MAX + 8], mask[PATH_MAX], err[256], p[PATH_MAX + 16];

    (void)state;
    snprintf(p, sizeof(p), "%s/sluice", base);
    assert_int_equal(mkdir(p, 0755), 0); /* group/other can read: refused */
    assert_int_equal(sb_rundir_make(dir, sizeof(dir), tmp, sizeof(tmp), mask, sizeof(mask),
                                    &reaper, err, sizeof(err)),
                     -1);
    assert_non_null(strstr(err, "mode 0700"));
    assert_int_equal(rmdir(p), 0);
}

/* issue 21: a link where the parent goes is refused, never followed */
static void test_parent_link(void **state)
{
    char dir[PATH_MAX], tmp[PATH_MAX + 8], mask[PATH_MAX], err[256], p[PATH_MAX + 16],
        t[PATH_MAX + 16];

    (void)state;
    snprintf(p, sizeof(p), "%s/sluice", base);
    snprintf(t, sizeof(t), "%s/elsewhere", base);
    assert_int_equal(mkdir(t, 0700), 0); /* ours, 0700: only the link is wrong */
    assert_int_equal(symlink(t, p), 0);
    assert_int_equal(sb_rundir_make(dir, sizeof(dir), tmp, sizeof(tmp), mask, sizeof(mask),
                                    &reaper, err, sizeof(err)),
                     -1);
    assert_non_null(strstr(err, "mode 0700"));
    assert_int_equal(rmdir(t), 0); /* empty: nothing was made through the link */
    assert_int_equal(unlink(p), 0);
}

static void test_sweep(void **state)
{
    char parent[PATH_MAX + 16], proj[PATH_MAX + 16], p[PATH_MAX * 3];
    char dir[PATH_MAX], tmp[PATH_MAX + 8], mask[PATH_MAX], err[256];
    char bashrc[PATH_MAX * 2], mcp[PATH_MAX * 2], idea[PATH_MAX * 2], profile[PATH_MAX * 2];
    char gitcfg[PATH_MAX * 2];
    const char *paths[6];
    long dead = dead_pid();
    pid_t other = live_child();

    (void)state;
    snprintf(parent, sizeof(parent), "%s/sluice", base);
    assert_int_equal(mkdir(parent, 0700), 0);
    snprintf(proj, sizeof(proj), "%s/proj", base);
    mk(proj, 1, NULL);
    snprintf(p, sizeof(p), "%s/.git", proj);
    mk(p, 1, NULL);
    snprintf(bashrc, sizeof(bashrc), "%s/.bashrc", proj);  /* placeholder dir: removed */
    snprintf(mcp, sizeof(mcp), "%s/.mcp.json", proj);      /* placeholder file: removed */
    snprintf(gitcfg, sizeof(gitcfg), "%s/.git/config", proj); /* the worst one: removed */
    snprintf(idea, sizeof(idea), "%s/.idea", proj);        /* the user filled it: kept */
    snprintf(profile, sizeof(profile), "%s/.profile", proj); /* not empty: kept */
    mk(bashrc, 1, NULL);
    mk(mcp, 0, NULL);
    mk(gitcfg, 1, NULL);
    mk(idea, 1, NULL);
    snprintf(p, sizeof(p), "%s/workspace.xml", idea);
    mk(p, 0, "<project/>");
    mk(profile, 0, "export A=1\n");
    paths[0] = bashrc;
    paths[1] = gitcfg;
    paths[2] = idea;
    paths[3] = mcp;
    paths[4] = profile;
    paths[5] = NULL;

    fake_run(parent, "run.dead", dead, 12345, paths);
    fake_run(parent, "run.live", (long)other, my_start(other), paths);
    fake_run(parent, "run.reused", (long)getpid(), my_start(getpid()) + 1, NULL); /* pid reused */
    fake_run(parent, "run.norecord", 0, 0, NULL);
    /* killed before its first record: known by its name alone */
    snprintf(p, sizeof(p), "run.%ld.12345.AbCdEf", dead);
    fake_run(parent, p, 0, 0, NULL);
    snprintf(p, sizeof(p), "run.%ld.%llu.GhIjKl", (long)getpid(), my_start(getpid()));
    fake_run(parent, p, 0, 0, NULL);
    fake_run(parent, "other.dead", dead, 12345, NULL); /* not a run.* name */

    /* the next run sweeps */
    assert_int_equal(sb_rundir_make(dir, sizeof(dir), tmp, sizeof(tmp), mask, sizeof(mask),
                                    &reaper, err, sizeof(err)),
                     0);
    /* the live run's record names the same paths: its sandbox mounts on
     * them, so the dead run's sweep leaves them (issue 21: a run's
     * clean-up never removes a mount point another live run holds) */
    assert_false(exists("%s/run.dead", parent));
    assert_false(exists("%s/run.reused", parent));
    assert_true(exists("%s/run.live/tmp/data", parent));
    assert_true(exists("%s/run.norecord/tmp/data", parent));
    assert_false(exists("%s/run.%ld.12345.AbCdEf", parent, dead));
    assert_true(exists("%s/run.%ld.%llu.GhIjKl/tmp/data", parent, (long)getpid(),
                       my_start(getpid())));
    assert_true(exists("%s/other.dead/tmp/data", parent));
    assert_true(exists("%s", bashrc));
    assert_true(exists("%s", mcp));
    assert_true(exists("%s", gitcfg));
    /* the live run ends (killed): the last one out removes what is empty */
    end_child(other);
    sb_rundir_remove(dir);
    assert_false(exists("%s/run.live", parent));
    assert_false(exists("%s", bashrc));
    assert_false(exists("%s", mcp));
    assert_false(exists("%s", gitcfg));
    assert_true(exists("%s/workspace.xml", idea));
    assert_true(exists("%s", profile));
    assert_true(exists("%s/other.dead/tmp/data", parent));
}

/* Issue 21: run B's scan finds run A's placeholder as an existing name and
 * mounts on it (here: below it, as on a placeholder .git); B's record holds
 * it, so A's clean-up leaves it for B, and B's removes it. */
static void test_shared_placeholder(void **state)
{
    char proj[PATH_MAX + 16], ph[PATH_MAX * 2], below[PATH_MAX * 3], mine[PATH_MAX * 2];
    char dir[PATH_MAX], tmp[PATH_MAX + 8], mask[PATH_MAX], err[256], rec[PATH_MAX + 16];
    char parent[PATH_MAX + 16], buf[8192];
    const char *paths[2];
    struct sb_plan plan;
    pid_t a = live_child();
    int fd;
    ssize_t n;

    (void)state;
    memset(&plan, 0, sizeof(plan));
    snprintf(proj, sizeof(proj), "%s/proj3", base);
    mk(proj, 1, NULL);
    snprintf(ph, sizeof(ph), "%s/.git", proj);     /* A's placeholder */
    snprintf(below, sizeof(below), "%s/hooks", ph); /* B's, inside it */
    snprintf(mine, sizeof(mine), "%s/.gitmodules", proj); /* a real file B binds */
    mk(ph, 1, NULL);
    mk(mine, 0, "[submodule]\n");
    paths[0] = ph;
    paths[1] = NULL;
    snprintf(parent, sizeof(parent), "%s/sluice", base);
    mk(parent, 1, NULL);
    assert_int_equal(chmod(parent, 0700), 0);
    fake_run(parent, "run.A", (long)a, my_start(a), paths);

    /* B: a plan that pins .git, makes .git/hooks and binds .gitmodules */
    assert_int_equal(sb_rundir_make(dir, sizeof(dir), tmp, sizeof(tmp), mask, sizeof(mask),
                                    &reaper, err, sizeof(err)),
                     0);
    assert_int_equal(sb_strv_push(&plan.argv, "bwrap"), 0);
    assert_int_equal(sb_strv_push(&plan.argv, "--bind"), 0);
    assert_int_equal(sb_strv_push(&plan.argv, ph), 0);
    assert_int_equal(sb_strv_push(&plan.argv, ph), 0);
    assert_int_equal(sb_strv_push(&plan.argv, "--ro-bind"), 0);
    assert_int_equal(sb_strv_push(&plan.argv, mine), 0);
    assert_int_equal(sb_strv_push(&plan.argv, mine), 0);
    assert_int_equal(sb_strv_push(&plan.argv, "--"), 0);
    assert_int_equal(sb_strv_push(&plan.argv, proj), 0); /* after "--": the command's */
    assert_int_equal(sb_strv_push(&plan.created, below), 0);
    fd = sb_rundir_lock(dir, err, sizeof(err));
    assert_true(fd >= 0);
    assert_int_equal(sb_reaper_record(dir, &plan, err, sizeof(err)), 0);
    sb_rundir_unlock(fd);
    snprintf(rec, sizeof(rec), "%s/sluice-run", dir);
    fd = open(rec, O_RDONLY);
    assert_true(fd >= 0);
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    assert_true(n > 0);
    buf[n] = '\0';
    {
        /* the record: the head line, then .git (held) before .git/hooks */
        const char *p = strchr(buf, '\n') + 1;
        assert_string_equal(p, ph);
        p += strlen(p) + 1;
        assert_string_equal(p, below);
        p += strlen(p) + 1;
        assert_true(p == buf + n);
    }
    mk(below, 1, NULL); /* what B's bwrap makes */

    /* A ends first (killed; its reaper or the next sweep cleans): B still
     * holds .git, which is not removed (it is not even empty here) */
    end_child(a);
    fd = sb_rundir_lock(dir, err, sizeof(err));
    assert_true(fd >= 0);
    sb_rundir_unlock(fd);
    /* B ends: .git/hooks, then .git, then A's dead run directory */
    sb_rundir_remove(dir);
    assert_false(exists("%s", below));
    assert_false(exists("%s", ph));
    assert_true(exists("%s", mine));
    assert_false(exists("%s", parent));
    sb_plan_free(&plan);
}

/* Issue 21: a run whose launcher was killed but whose reaper still waits
 * for its sandbox is left to that reaper (its bwrap may still be making a
 * mount point); once the reaper is gone too, the next sweep cleans it. */
static void test_dead_launcher_live_reaper(void **state)
{
    char proj[PATH_MAX + 16], ph[PATH_MAX * 2], parent[PATH_MAX + 16], p[PATH_MAX * 2];
    char dir[PATH_MAX], tmp[PATH_MAX + 8], mask[PATH_MAX], err[256];
    long dead = dead_pid();
    pid_t rp = live_child();
    FILE *f;

    (void)state;
    snprintf(proj, sizeof(proj), "%s/proj5", base);
    mk(proj, 1, NULL);
    snprintf(ph, sizeof(ph), "%s/.zprofile", proj);
    mk(ph, 1, NULL);
    snprintf(parent, sizeof(parent), "%s/sluice", base);
    mk(parent, 1, NULL);
    assert_int_equal(chmod(parent, 0700), 0);
    fake_run(parent, "run.K", 0, 0, NULL);
    snprintf(p, sizeof(p), "%s/run.K/sluice-run", parent);
    f = fopen(p, "w");
    assert_non_null(f);
    fprintf(f, "sluice-run 1 %ld 12345 %ld %llu\n", dead, (long)rp, my_start(rp));
    fwrite(ph, 1, strlen(ph) + 1, f);
    fclose(f);
    assert_int_equal(sb_rundir_make(dir, sizeof(dir), tmp, sizeof(tmp), mask, sizeof(mask),
                                    &reaper, err, sizeof(err)),
                     0);
    assert_true(exists("%s/run.K", parent)); /* its reaper's to clean */
    assert_true(exists("%s", ph));
    end_child(rp);
    sb_rundir_remove(dir);
    assert_false(exists("%s", ph));
    assert_false(exists("%s", parent));
}

/* Issue 21: while B holds a placeholder A made, A's own clean-up leaves it. */
static void test_placeholder_outlives_maker(void **state)
{
    char proj[PATH_MAX + 16], ph[PATH_MAX * 2], parent[PATH_MAX + 16];
    char dir[PATH_MAX], tmp[PATH_MAX + 8], mask[PATH_MAX], err[256];
    const char *paths[2];
    struct sb_plan plan;
    pid_t b = live_child();

    (void)state;
    memset(&plan, 0, sizeof(plan));
    snprintf(proj, sizeof(proj), "%s/proj4", base);
    mk(proj, 1, NULL);
    snprintf(ph, sizeof(ph), "%s/.bash_profile", proj);
    paths[0] = ph;
    paths[1] = NULL;
    snprintf(parent, sizeof(parent), "%s/sluice", base);
    mk(parent, 1, NULL);
    assert_int_equal(chmod(parent, 0700), 0);
    fake_run(parent, "run.B", (long)b, my_start(b), paths);
    /* A (this process) made it and finishes while B runs */
    assert_int_equal(sb_rundir_make(dir, sizeof(dir), tmp, sizeof(tmp), mask, sizeof(mask),
                                    &reaper, err, sizeof(err)),
                     0);
    assert_int_equal(sb_strv_push(&plan.created, ph), 0);
    assert_int_equal(sb_reaper_record(dir, &plan, err, sizeof(err)), 0);
    mk(ph, 1, NULL);
    sb_rundir_remove(dir);
    assert_true(exists("%s", ph)); /* B's sandbox mounts on it */
    assert_true(exists("%s", parent));
    end_child(b);
    /* the next run's sweep (B died without cleaning) removes it */
    assert_int_equal(sb_rundir_make(dir, sizeof(dir), tmp, sizeof(tmp), mask, sizeof(mask),
                                    &reaper, err, sizeof(err)),
                     0);
    assert_false(exists("%s", ph));
    sb_rundir_remove(dir);
    assert_false(exists("%s", parent));
    sb_plan_free(&plan);
}

/* A child that makes a run directory, starts the reaper, makes the mount
 * point bwrap would, then dies (FINISH 0) or finishes properly (1). */
static pid_t fake_launcher(const char *placeholder, int finish)
{
    pid_t pid = fork();

    assert_true(pid >= 0);
    if (pid == 0) {
        char dir[PATH_MAX], tmp[PATH_MAX + 8], mask[PATH_MAX], err[256];
        struct sb_plan plan;
        struct sb_reaper r;

        memset(&plan, 0, sizeof(plan));
        if (sb_strv_push(&plan.created, placeholder) < 0 ||
            sb_rundir_make(dir, sizeof(dir), tmp, sizeof(tmp), mask, sizeof(mask), &r, err,
                           sizeof(err)) < 0 ||
            sb_reaper_record(dir, &plan, err, sizeof(err)) < 0)
            _exit(2);
        if (mkdir(placeholder, 0755) < 0)
            _exit(3);
        if (finish) {
            sb_rundir_remove(dir); /* its run directory and the mount point */
            sb_reaper_finish(&r);
        }
        _exit(0); /* finish 0: as if killed, nothing cleaned */
    }
    return pid;
}

static int wait_gone(const char *path)
{
    struct stat st;

    for (int i = 0; i < 400; i++) {
        if (lstat(path, &st) < 0)
            return 1;
        struct timespec ts = {0, 25 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

static void test_reaper(void **state)
{
    char proj[PATH_MAX + 16], ph[PATH_MAX * 2], parent[PATH_MAX + 16];
    int st;
    pid_t pid;

    (void)state;
    snprintf(proj, sizeof(proj), "%s/proj2", base);
    mk(proj, 1, NULL);
    snprintf(ph, sizeof(ph), "%s/.zshrc", proj);
    snprintf(parent, sizeof(parent), "%s/sluice", base);

    /* dies: the reaper removes the mount point and the run directory */
    pid = fake_launcher(ph, 0);
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_true(wait_gone(ph));
    assert_true(wait_gone(parent));

    /* finishes: the launcher removes the mount point its record holds
     * itself (the reaper has nothing left to do) */
    pid = fake_launcher(ph, 1);
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_false(exists("%s", ph));
    assert_false(exists("%s", parent));
}

/* bwrap's --info-fd text: the sandbox's first process, or nothing */
static void test_info_pid(void **state)
{
    static const char *bad[] = {
        "",
        "{}",
        "{\"child-pid\": }",
        "{\"child-pid\": 0}",
        "{\"child-pid\": -5}",
        "{\"child-pid\": 12x}",
        "{\"child-pid\" 12}",
        "{\"child_pid\": 12}",
        "{\"child-pid\": 99999999999999999999}",
        "{\"child-pid\": 4294967296}",
        "{\"child-pid\": +12}",
    };
    char big[600];
    long pid = 0;

    (void)state;
    assert_int_equal(sb_reaper_info_pid("{\n    \"child-pid\": 4242\n}\n", 27, &pid), 0);
    assert_int_equal(pid, 4242);
    assert_int_equal(sb_reaper_info_pid("{ \"child-pid\": 7 }", 18, &pid), 0);
    assert_int_equal(pid, 7);
    /* cut short: only what LEN says is read */
    assert_int_equal(sb_reaper_info_pid("{\"child-pid\": 4242}", 16, &pid), 0);
    assert_int_equal(pid, 42);
    assert_int_equal(sb_reaper_info_pid("{\"child-pid\": 4242}", 12, &pid), -1);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        pid = 0;
        assert_int_equal(sb_reaper_info_pid(bad[i], strlen(bad[i]), &pid), -1);
        assert_int_equal(pid, 0);
    }
    /* past what the reaper keeps (256 bytes): not seen */
    memset(big, ' ', sizeof(big));
    memcpy(big + 400, "\"child-pid\": 5}", 15);
    assert_int_equal(sb_reaper_info_pid(big, sizeof(big), &pid), -1);
}

/* Issue 25: bwrap's first process makes the mount points and may outlive
 * a bwrap killed with the launcher (it asks for no death signal until it
 * is done). The reaper hears its pid on --info-fd and waits for it: a
 * mount point it makes after bwrap is gone is still removed. rt-8: the
 * reaper kills it (one waiting for bwrap's word waited forever), so it
 * is gone, and the mount point it would make 300 ms on is either never
 * made or removed. */
static void test_reaper_waits_for_sandbox(void **state)
{
    char proj[PATH_MAX + 16], ph[PATH_MAX * 2], parent[PATH_MAX + 16], mark[PATH_MAX + 16];
    int st;
    pid_t pid;

    (void)state;
    snprintf(proj, sizeof(proj), "%s/proj5", base);
    mk(proj, 1, NULL);
    snprintf(ph, sizeof(ph), "%s/.profile", proj);
    snprintf(parent, sizeof(parent), "%s/sluice", base);
    snprintf(mark, sizeof(mark), "%s/made", base);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) { /* the launcher */
        char dir[PATH_MAX], tmp[PATH_MAX + 8], mask[PATH_MAX], err[256], info[64];
        struct sb_plan plan;
        struct sb_reaper r;
        pid_t bw, first;
        int n, ready[2];
        char c;

        memset(&plan, 0, sizeof(plan));
        if (sb_strv_push(&plan.created, ph) < 0 ||
            sb_rundir_make(dir, sizeof(dir), tmp, sizeof(tmp), mask, sizeof(mask), &r, err,
                           sizeof(err)) < 0 ||
            sb_reaper_record(dir, &plan, err, sizeof(err)) < 0 || r.info_fd < 0)
            _exit(2);
        if (pipe(ready) < 0)
            _exit(5);
        bw = fork(); /* bwrap: dies with the launcher */
        if (bw == 0) {
            int null = open("/dev/null", O_WRONLY);
            close(r.fd);
            close(r.info_fd);
            if (null >= 0) { /* not holding the test's output open */
                (void)dup2(null, 1);
                (void)dup2(null, 2);
            }
            (void)prctl(PR_SET_PDEATHSIG, SIGKILL, 0UL, 0UL, 0UL);
            if (write(ready[1], "r", 1) != 1 || getppid() == 1)
                _exit(0);
            pause();
            _exit(0);
        }
        if (bw < 0 || read(ready[0], &c, 1) != 1) /* it dies with us from here on */
            _exit(6);
        first = fork(); /* its first process: makes the mount point late */
        if (first == 0) {
            struct timespec ts = {0, 300 * 1000 * 1000};
            int null = open("/dev/null", O_WRONLY);
            close(r.fd);
            close(r.info_fd);
            if (null >= 0) {
                (void)dup2(null, 1);
                (void)dup2(null, 2);
            }
            nanosleep(&ts, NULL);
            (void)mkdir(ph, 0755);
            (void)mkdir(mark, 0755);
            _exit(0);
        }
        if (first < 0)
            _exit(3);
        n = snprintf(info, sizeof(info), "{\n    \"child-pid\": %d\n}\n", (int)first);
        if (write(r.info_fd, info, (size_t)n) != n)
            _exit(4);
        {
            char fp[PATH_MAX + 24];
            FILE *f;
            snprintf(fp, sizeof(fp), "%s/firstpid", base);
            f = fopen(fp, "w");
            if (f == NULL || fprintf(f, "%d\n", (int)first) < 0 || fclose(f) != 0)
                _exit(7);
        }
        sb_reaper_info_sent(&r);
        sb_reaper_watch(&r, (int)bw);
        _exit(0); /* killed: nothing cleaned */
    }
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    {
        char fp[PATH_MAX + 24];
        FILE *f;
        int first = 0, gone = 0;
        snprintf(fp, sizeof(fp), "%s/firstpid", base);
        f = fopen(fp, "r");
        assert_non_null(f);
        assert_int_equal(fscanf(f, "%d", &first), 1);
        fclose(f);
        unlink(fp);
        /* killed by the reaper well before the 300 ms it sleeps (a
         * zombie of the test's init counts as gone: it can make nothing) */
        for (int i = 0; i < 200 && !gone; i++) {
            char stp[64], buf[512];
            FILE *sf;
            struct timespec ts = {0, 10 * 1000 * 1000};
            snprintf(stp, sizeof(stp), "/proc/%d/stat", first);
            sf = fopen(stp, "r");
            if (sf == NULL) {
                gone = 1;
                break;
            }
            if (fgets(buf, sizeof(buf), sf) != NULL && strstr(buf, ") Z ") != NULL)
                gone = 1;
            fclose(sf);
            nanosleep(&ts, NULL);
        }
        assert_true(gone);
    }
    assert_true(wait_gone(ph));
    assert_true(wait_gone(parent));
    (void)rmdir(mark); /* made only when the kill came late */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_rundir_private, setup, teardown),
        cmocka_unit_test_setup_teardown(test_parent_not_ours, setup, teardown),
        cmocka_unit_test_setup_teardown(test_parent_link, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sweep, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reaper, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shared_placeholder, setup, teardown),
        cmocka_unit_test_setup_teardown(test_placeholder_outlives_maker, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dead_launcher_live_reaper, setup, teardown),
        cmocka_unit_test_setup_teardown(test_info_pid, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reaper_waits_for_sandbox, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
