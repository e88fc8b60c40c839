/* proxy/learn_out.c - where a learned fragment goes (proxy/learn.h), and
 * `sluice check --learn LOG [--settings BASE] [-o FILE]`.
 *
 * A fragment is written by the host after the run: into FILE's directory
 * as opened before the run (a directory the sandbox could write may have
 * been swapped for a link by then), through a temporary file made with
 * O_EXCL | O_NOFOLLOW, synced and renamed over FILE, never through a
 * symbolic link at FILE. */
#include "proxy/check.h"
#include "proxy/learn.h"
#include "common/common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int learn_out_open(struct learn_out *o, const char *path)
{
    const char *slash = strrchr(path, '/');
    char dir[4096];
    struct stat st;

    o->dirfd = -1;
    o->path = path;
    if (slash == NULL) {
        snprintf(dir, sizeof(dir), ".");
        snprintf(o->name, sizeof(o->name), "%s", path);
    } else {
        snprintf(dir, sizeof(dir), "%.*s", slash == path ? 1 : (int)(slash - path), path);
        snprintf(o->name, sizeof(o->name), "%s", slash + 1);
    }
    if (o->name[0] == '\0' || strcmp(o->name, ".") == 0 || strcmp(o->name, "..") == 0 ||
        strlen(slash != NULL ? slash + 1 : path) >= sizeof(o->name) - 32) {
        fprintf(stderr, "sluice: learn: '%s': not a file name\n", path);
        return -1;
    }
    o->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (o->dirfd < 0) {
        fprintf(stderr, "sluice: learn: '%s': cannot open its directory: %s\n", path,
                strerror(errno));
        return -1;
    }
    if (fstatat(o->dirfd, o->name, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(st.st_mode)) {
        fprintf(stderr, "sluice: learn: '%s': %s; not written\n", path,
                S_ISLNK(st.st_mode) ? "a symbolic link" : "not a regular file");
        learn_out_close(o);
        return -1;
    }
    if (faccessat(o->dirfd, ".", W_OK, AT_EACCESS) < 0) {
        fprintf(stderr, "sluice: learn: '%s': its directory is not writable: %s\n", path,
                strerror(errno));
        learn_out_close(o);
        return -1;
    }
    return 0;
}

int learn_out_write(struct learn_out *o, const char *text)
{
    char tmp[sizeof(o->name) + 32];
    struct stat st;
    int fd = -1, tries;

    if (fstatat(o->dirfd, o->name, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(st.st_mode)) {
        fprintf(stderr, "sluice: learn: '%s': %s now; not written\n", o->path,
                S_ISLNK(st.st_mode) ? "a symbolic link" : "not a regular file");
        return -1;
    }
    for (tries = 0; tries < 100 && fd < 0; tries++) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        snprintf(tmp, sizeof(tmp), ".%s.%ld.%lx", o->name, (long)getpid(),
                 (unsigned long)ts.tv_nsec ^ (unsigned long)tries);
        fd = openat(o->dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    if (fd < 0) {
        fprintf(stderr, "sluice: learn: '%s': cannot create a temporary file beside it: %s\n",
                o->path, strerror(errno));
        return -1;
    }
    if (common_write_all(fd, text, strlen(text)) < 0 || fsync(fd) < 0) {
        fprintf(stderr, "sluice: learn: '%s': cannot write: %s\n", o->path, strerror(errno));
        goto fail;
    }
    if (close(fd) < 0) {
        fd = -1;
        fprintf(stderr, "sluice: learn: '%s': cannot write: %s\n", o->path, strerror(errno));
        goto fail;
    }
    fd = -1;
    if (renameat(o->dirfd, tmp, o->dirfd, o->name) < 0) {
        fprintf(stderr, "sluice: learn: '%s': cannot rename the temporary file over it: %s\n",
                o->path, strerror(errno));
        goto fail;
    }
    return 0;
fail:
    if (fd >= 0)
        close(fd);
    unlinkat(o->dirfd, tmp, 0);
    return -1;
}

void learn_out_close(struct learn_out *o)
{
    if (o->dirfd >= 0)
        close(o->dirfd);
    o->dirfd = -1;
}

/* ---- sluice check --learn ---- */

static int add_record(void *ctx, const struct replay_record *r)
{
    return learn_add(ctx, r);
}

int check_learn(const struct check_opts *o, const struct settings *s, const char *settings_path)
{
    struct learn *l = NULL;
    struct policy *base = NULL;
    struct settings_error err;
    struct learn_result res;
    struct learn_out out = {.dirfd = -1};
    unsigned long decisions = 0, others = 0;
    int rc = 2;

    memset(&res, 0, sizeof(res));
    if (settings_path != NULL && policy_compile(s, &base, &err) < 0) {
        fprintf(stderr, "%s\n", err.msg);
        goto out;
    }
    if (o->output_path != NULL && learn_out_open(&out, o->output_path) < 0)
        goto out;
    if (learn_new(&l) < 0) {
        fprintf(stderr, "sluice: check: out of memory\n");
        goto out;
    }
    if (replay_read(o->learn_path, add_record, l, &decisions, &others) < 0)
        goto out;
    if (learn_build(l, base, stderr, &res) < 0)
        goto out;
    if (o->output_path != NULL) {
        if (learn_out_write(&out, res.json) < 0)
            goto out;
    } else {
        fputs(res.json, stdout);
        fflush(stdout);
    }
    learn_print_summary(&res, o->output_path != NULL ? o->output_path : "stdout",
                        base != NULL);
    rc = 0;
out:
    free(res.json);
    learn_out_close(&out);
    learn_free(l);
    policy_free(base);
    return rc;
}
