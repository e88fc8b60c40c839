/* sandbox/verify.c - the post-run check of what no mount can protect.
 *
 * A git directory's `commondir` file redirects git to another directory for
 * its hooks and config (that is how worktrees work). When it does not exist
 * it cannot be blocked by a mount: git dies on a commondir it cannot read,
 * so an empty directory or /dev/null there would break git inside the
 * sandbox. Instead sluice notes, before the run, every git directory below
 * the working directory (the same walk as the protected-file scan) and what
 * its commondir held, and afterwards (every process of the sandbox is dead,
 * so this cannot race) puts back what was there: a commondir the command
 * created is removed, one it changed is restored. Each repair is reported
 * on stderr. The same is done for a `.git` file (a "gitdir:" pointer)
 * inside the tree, which redirects the whole repository.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox/sandbox.h"

#define WATCH_MAX_BYTES 4096 /* commondir and gitdir files are one short line */

/* Reads a small regular file (not following a final symlink). 1 with *out
 * (malloc'd, *len bytes) when it exists, 0 when it does not, -1 otherwise
 * (another type, too large, unreadable: then it is treated as changed). */
static int read_small(const char *path, char **out, size_t *len)
{
    struct stat st;
    char *buf;
    ssize_t n;
    int fd;

    *out = NULL;
    *len = 0;
    fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return errno == ENOENT ? 0 : -1;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > WATCH_MAX_BYTES) {
        close(fd);
        return -1;
    }
    buf = malloc(WATCH_MAX_BYTES + 1);
    if (buf == NULL) {
        close(fd);
        return -1;
    }
    n = read(fd, buf, WATCH_MAX_BYTES + 1);
    close(fd);
    if (n < 0 || n > WATCH_MAX_BYTES) {
        free(buf);
        return -1;
    }
    *out = buf;
    *len = (size_t)n;
    return 1;
}

static int watch_add(struct sb_gitwatch *w, const char *path)
{
    struct sb_gitwatch_item *it;

    for (size_t i = 0; i < w->n; i++)
        if (strcmp(w->v[i].path, path) == 0)
            return 0;
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 8;
        it = realloc(w->v, cap * sizeof(*it));
        if (it == NULL)
            return -ENOMEM;
        w->v = it;
        w->cap = cap;
    }
    it = &w->v[w->n];
    memset(it, 0, sizeof(*it));
    it->path = strdup(path);
    if (it->path == NULL)
        return -ENOMEM;
    it->state = read_small(path, &it->content, &it->len);
    w->n++;
    return 0;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

int sb_gitwatch_begin(const char *root, unsigned depth, struct sb_gitwatch *w, char *err,
                      size_t errlen)
{
    struct sb_prot_list l = {0};
    char path[4096];
    int rc;

    memset(w, 0, sizeof(*w));
    rc = sb_protect_scan(root, depth, 0, &l, err, errlen);
    if (rc < 0)
        return rc;
    for (size_t i = 0; i < l.n && rc == 0; i++) {
        const struct sb_prot *p = &l.v[i];
        /* a git directory (pinned) or the .git pointer file */
        if (p->kind == SB_PROT_PIN && ends_with(p->path, "/.git")) {
            if ((size_t)snprintf(path, sizeof(path), "%s/commondir", p->path) < sizeof(path))
                rc = watch_add(w, path);
        } else if (p->kind == SB_PROT_FILE && ends_with(p->path, "/.git")) {
            rc = watch_add(w, p->path);
        } else if (ends_with(p->path, "/commondir")) {
            rc = watch_add(w, p->path);
        }
    }
    sb_prot_list_free(&l);
    if (rc < 0) {
        snprintf(err, errlen, "git watch: out of memory");
        sb_gitwatch_free(w);
    }
    return rc;
}

/* Puts the file back as it was: removed when it did not exist, rewritten
 * (through a temporary file and rename) when it held something else. */
static int restore(const struct sb_gitwatch_item *it)
{
    struct stat st;
    char tmp[4200];
    int fd;

    if (lstat(it->path, &st) == 0 && S_ISDIR(st.st_mode)) {
        if (rmdir(it->path) < 0)
            return -errno;
    } else if (unlink(it->path) < 0 && errno != ENOENT) {
        return -errno;
    }
    if (it->state != 1)
        return 0;
    if ((size_t)snprintf(tmp, sizeof(tmp), "%s.sluice-restore", it->path) >= sizeof(tmp))
        return -ENAMETOOLONG;
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    if (write(fd, it->content, it->len) != (ssize_t)it->len || close(fd) < 0) {
        (void)unlink(tmp);
        return -EIO;
    }
    if (rename(tmp, it->path) < 0) {
        int e = errno;
        (void)unlink(tmp);
        return -e;
    }
    return 0;
}

size_t sb_gitwatch_end(struct sb_gitwatch *w, FILE *report)
{
    size_t repaired = 0;

    for (size_t i = 0; i < w->n; i++) {
        const struct sb_gitwatch_item *it = &w->v[i];
        char *now = NULL;
        size_t len = 0;
        int state = read_small(it->path, &now, &len);
        int same = state == it->state &&
                   (state != 1 || (len == it->len && memcmp(now, it->content, len) == 0));
        free(now);
        if (same || it->state == -1)
            continue; /* unchanged, or something we could not read before */
        int rc = restore(it);
        if (report != NULL) {
            if (rc == 0)
                fprintf(report,
                        "sluice: %s %s, which would redirect git's hooks and config; %s\n",
                        it->state == 0 ? "the command created" : "the command changed", it->path,
                        it->state == 0 ? "removed it" : "restored it");
            else
                fprintf(report, "sluice: WARNING: the command %s %s (redirects git's hooks and "
                                "config) and it could not be undone: %s\n",
                        it->state == 0 ? "created" : "changed", it->path, strerror(-rc));
        }
        repaired++;
    }
    return repaired;
}

void sb_gitwatch_free(struct sb_gitwatch *w)
{
    for (size_t i = 0; i < w->n; i++) {
        free(w->v[i].path);
        free(w->v[i].content);
    }
    free(w->v);
    memset(w, 0, sizeof(*w));
}
