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
 *
 * A protected name that is a symbolic link (a dotfile manager's .bashrc) is
 * the other thing no mount covers: bwrap mounts follow links, so its target
 * is bound read-only but the link itself could be removed and replaced by a
 * file of the command's choosing. Its target is noted too; afterwards a
 * replaced link is put back and what replaced it is moved aside to
 * NAME.sluice-replaced.PID, and a target that did not exist before (a
 * dangling link) but was created through the link is moved aside likewise.
 */
#define _XOPEN_SOURCE 700 /* realpath */
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

/* Reads the symbolic link PATH: 1 with *out (malloc'd) when it is one, 0
 * when PATH does not exist, -1 otherwise (another type, unreadable). */
static int read_link(const char *path, char **out, size_t *len)
{
    char buf[4096];
    ssize_t n;

    *out = NULL;
    *len = 0;
    n = readlink(path, buf, sizeof(buf));
    if (n < 0)
        return errno == ENOENT ? 0 : -1;
    if ((size_t)n >= sizeof(buf))
        return -1;
    *out = strndup(buf, (size_t)n);
    if (*out == NULL)
        return -1;
    *len = (size_t)n;
    return 1;
}

static int watch_link(struct sb_gitwatch *w, const char *path)
{
    struct sb_gitwatch_item *it;
    struct stat st;
    int rc = watch_add(w, path);

    if (rc < 0 || w->n == 0 || strcmp(w->v[w->n - 1].path, path) != 0)
        return rc;
    it = &w->v[w->n - 1];
    free(it->content);
    if (read_link(path, &it->content, &it->len) != 1)
        it->state = -1; /* gone already, or not a link: nothing to keep */
    else
        it->state = 2;
    it->resolved = stat(path, &st) == 0;
    return 0;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* 1 when the post-run check watches this entry of a scan. */
static int watched(const struct sb_prot *p)
{
    return (p->kind == SB_PROT_PIN && ends_with(p->path, "/.git")) ||
           (p->kind == SB_PROT_FILE && ends_with(p->path, "/.git")) ||
           ends_with(p->path, "/commondir") || p->kind == SB_PROT_LINK;
}

int sb_gitwatch_list(const struct sb_prot_list *l, struct sb_gitwatch *w, char *err,
                     size_t errlen)
{
    char path[4096];
    int rc = 0;

    memset(w, 0, sizeof(*w));
    for (size_t i = 0; i < l->n && rc == 0; i++) {
        const struct sb_prot *p = &l->v[i];
        /* a git directory (pinned) or the .git pointer file */
        if (p->kind == SB_PROT_PIN && ends_with(p->path, "/.git")) {
            if ((size_t)snprintf(path, sizeof(path), "%s/commondir", p->path) < sizeof(path))
                rc = watch_add(w, path);
        } else if (p->kind == SB_PROT_FILE && ends_with(p->path, "/.git")) {
            rc = watch_add(w, p->path);
        } else if (ends_with(p->path, "/commondir")) {
            rc = watch_add(w, p->path);
        } else if (p->kind == SB_PROT_LINK) {
            rc = watch_link(w, p->path);
        }
    }
    if (rc < 0) {
        snprintf(err, errlen, "git watch: out of memory");
        sb_gitwatch_free(w);
    }
    return rc;
}

int sb_gitwatch_keep(struct sb_prot_list *l, const struct sb_prot *p)
{
    struct sb_prot *v;
    char *path;

    if (!watched(p))
        return 0;
    if (l->n == l->cap) {
        size_t cap = l->cap != 0 ? l->cap * 2 : 8;
        v = realloc(l->v, cap * sizeof(*v));
        if (v == NULL)
            return -ENOMEM;
        l->v = v;
        l->cap = cap;
    }
    path = strdup(p->path);
    if (path == NULL)
        return -ENOMEM;
    l->v[l->n].path = path;
    l->v[l->n].kind = p->kind;
    l->n++;
    return 0;
}

int sb_gitwatch_begin(const char *root, unsigned depth, struct sb_gitwatch *w, char *err,
                      size_t errlen)
{
    struct sb_prot_list l = {0};
    int rc;

    memset(w, 0, sizeof(*w));
    rc = sb_protect_scan(root, depth, 0, &l, err, errlen);
    if (rc == 0)
        rc = sb_gitwatch_list(&l, w, err, errlen);
    sb_prot_list_free(&l);
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

/* Moves PATH to PATH.sluice-replaced.PID; writes the new name to ASIDE. */
static int move_aside(const char *path, char *aside, size_t len)
{
    if ((size_t)snprintf(aside, len, "%s.sluice-replaced.%ld", path, (long)getpid()) >= len)
        return -ENAMETOOLONG;
    if (rename(path, aside) < 0)
        return -errno;
    return 0;
}

/* A protected link after the run: put back when replaced (what replaced it
 * moved aside), and a target created through a dangling link moved aside.
 * 1 when something was repaired (reported), 0 when it is as it was. */
static int check_link(const struct sb_gitwatch_item *it, FILE *report)
{
    char *now = NULL, aside[4200];
    size_t len = 0;
    struct stat st;
    int state = read_link(it->path, &now, &len), rc = 0;
    int same = state == 1 && len == it->len && memcmp(now, it->content, len) == 0;

    free(now);
    if (same) {
        if (it->resolved || stat(it->path, &st) < 0)
            return 0;
        /* the command created the target of a dangling protected link */
        char *target = realpath(it->path, NULL);
        if (target == NULL)
            return 0;
        rc = move_aside(target, aside, sizeof(aside));
        if (report != NULL) {
            if (rc == 0)
                fprintf(report,
                        "sluice: the command created %s through the protected link %s; moved it "
                        "to %s\n",
                        target, it->path, aside);
            else
                fprintf(report,
                        "sluice: WARNING: the command created %s through the protected link %s "
                        "and it could not be moved aside: %s\n",
                        target, it->path, strerror(-rc));
        }
        free(target);
        return 1;
    }
    if (state != 0)
        rc = move_aside(it->path, aside, sizeof(aside));
    else
        aside[0] = '\0';
    if (rc == 0 && symlink(it->content, it->path) < 0)
        rc = -errno;
    if (report != NULL) {
        if (rc == 0)
            fprintf(report, "sluice: the command %s the protected link %s; restored it%s%s\n",
                    state == 0 ? "removed" : "replaced", it->path,
                    aside[0] != '\0' ? " and moved what replaced it to " : "", aside);
        else
            fprintf(report,
                    "sluice: WARNING: the command replaced the protected link %s and it could not "
                    "be restored: %s\n",
                    it->path, strerror(-rc));
    }
    return 1;
}

size_t sb_gitwatch_end(struct sb_gitwatch *w, FILE *report)
{
    size_t repaired = 0;

    for (size_t i = 0; i < w->n; i++) {
        const struct sb_gitwatch_item *it = &w->v[i];
        if (it->state == 2) {
            repaired += (size_t)check_link(it, report);
            continue;
        }
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
