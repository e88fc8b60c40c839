/* sandbox/bwrap.c - bubblewrap's argument vector.
 *
 * A pure function of the settings, the options and the filesystem as it is
 * now (paths are resolved, globs expanded and the protected-file scan done
 * here, once). Every path is one argv element; nothing of the environment is
 * in the vector.
 *
 *   BWRAP [--new-session] --die-with-parent [--unshare-net]
 *         --unshare-pid --unshare-ipc --unshare-uts --unshare-cgroup-try
 *         [--unshare-user] --cap-drop ALL
 *         --ro-bind / /            (--bind / / with filesystem.disabled)
 *         --dev /dev
 *         --proc /proc             (--bind /proc /proc with enableWeakerNestedSandbox)
 *         --bind HOST_TMPDIR /tmp
 *         MOUNTS...
 *         --chdir CWD
 *         -- SELF inner --fd N [--allow-unix-sockets] [--allow-local-binding]
 *            [--allow-user-namespaces] -- CMD...
 *
 * MOUNTS come from five sources:
 *   W   filesystem.allowWrite (default: the working directory): --bind P P
 *   P   the protected files inside each writable directory (protect.c, to
 *       mandatoryDenySearchDepth): FILE/DIR --ro-bind P P, PIN --bind P P,
 *       MKDIR (a missing .claude holding ABSENT entries) nothing: bwrap
 *       creates it as their parent, recorded in plan->created like them,
 *       ABSENT --tmpfs P --remount-ro P: an empty read-only directory, which
 *       blocks a file or a directory of that name alike (it cannot be
 *       written into, removed or renamed: EBUSY). bwrap creates P on the host
 *       as an empty directory: recorded in plan->created, removed by
 *       sb_plan_cleanup. Not /dev/null: a character device in the work tree
 *       makes `git add -A` fail ("can only add regular files") and the
 *       host's mount point would be an empty file, which git reports as
 *       untracked and, named .git, as an invalid gitfile; git ignores empty
 *       directories (and an empty .git directory is not a repository, so
 *       discovery goes on to a parent repository). Also read-only, with
 *       pins on the directories above them inside a writable one: sluice's
 *       own binary, bwrap and every settings and list file the settings came
 *       from (a relative name taken as relative to the working directory),
 *       so a command cannot rewrite what confines the next run
 *   DW  filesystem.denyWrite, existing paths: --ro-bind P P
 *   DR  filesystem.denyRead, existing paths: a directory becomes an empty
 *       tmpfs the command may write into, discarded after the run (as both
 *       shell sandboxes do: tools that keep caches and logs under a hidden
 *       $HOME keep working), a file /dev/null; also ~/.npm/_logs when it
 *       exists outside every writable directory (add_scratch)
 *   AR  filesystem.allowRead inside a denied directory: --ro-bind P P
 *
 * A later mount over P hides what earlier mounts did at and below P (bwrap
 * takes the source from the host), so MOUNTS are emitted in tree order,
 * parents first, and the most specific rule for a path wins. On the same
 * path: AR, P (FILE/DIR), W, DR, PIN, MKDIR, ABSENT, DW: a deny on the very path of
 * an allow wins, a protected path stays read-only even when allowWrite names
 * it, and nothing is pinned or bound where it is hidden. Each mount is then
 * kept only where it means something, judged by the nearest kept mount above
 * it (or on the same path, earlier):
 *   W   always, except below a protected FILE/DIR (mandatory protection wins)
 *   PIN, P, MKDIR, ABSENT, DW  only in a writable region (nearest is W, PIN
 *       or MKDIR): in a
 *       read-only or hidden region they would re-expose host content or, for
 *       ABSENT, fail to create their mount point
 *   DR  unless already inside a denied directory
 *   AR  only directly inside a denied directory (else reading is allowed)
 * So a writable directory inside a denied one is visible and writable again
 * (writing implies reading), with its own protections and denials.
 *
 * Paths in the lists: "~", "~/...", "$HOME", "$HOME/..." (and "${HOME}")
 * expand with the home directory (resolved); any other leading '$' is an
 * error (never a silent skip); relative paths are relative to the working
 * directory; a trailing slash-star-star is dropped (DIR and everything
 * below it is DIR, as the reference reads it); ".", ".." and repeated '/'
 * are folded lexically; a path with * ? or [ is a glob(3) pattern expanded now (without
 * matches it is taken literally if that path exists, else a warning naming
 * the entry is printed). An entry written {"path": P, "literal": true} is
 * taken as written: no ~, $HOME, slash-star-star or glob (a literal allowRead
 * entry that does not exist is warned about, as a glob without a match is).
 * Missing paths are skipped, as srt does (nothing to bind; a missing allowWrite path cannot be created
 * by the command); a path that exists but cannot be resolved (EACCES,
 * ELOOP, ...) is an error. Paths under /dev and
 * /proc are skipped for allowWrite and denyWrite (the sandbox has its own).
 * An allowWrite or allowRead path that resolves through a symbolic link to a
 * place outside the path as written is an error (a link planted by an
 * earlier run must not widen this one); name the real path instead. Also
 * errors: allowWrite "/" (that is filesystem.disabled) and denyRead "/", a
 * denyRead that hides the working directory or sluice's own binary, and a
 * working directory under /dev or /proc, which the sandbox replaces with its
 * own (the run could not even start: bwrap would fail to chdir there).
 *
 * *plan is replaced on success (it must be zeroed or hold an earlier plan)
 * and untouched on failure.
 */
#define _XOPEN_SOURCE 700 /* realpath */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox/sandbox.h"

/* Same-path order is the enum order (see the comment at the top). */
enum op_kind {
    OP_AR = 0,
    OP_PROT, /* read-only over itself */
    OP_W,
    OP_DR_DIR,
    OP_DR_FILE,
    OP_PIN,
    OP_MKDIR,  /* no mount: bwrap creates it as the parent of ABSENT entries */
    OP_ABSENT, /* an empty read-only directory where nothing exists */
    OP_DW,
};

struct op {
    char *path;
    enum op_kind kind;
    size_t seq;                     /* insertion order, for a stable sort */
    const struct settings_item *it; /* the list entry it came from, or NULL */
    int keep;
};

struct ops {
    struct op *v;
    size_t n, cap;
};

struct ctx {
    const struct sb_bwrap_opts *o;
    const struct settings *s;
    char *home; /* resolved home directory, or NULL */
    struct ops ops;
    struct sb_strv roots; /* writable directories and files */
    struct sb_plan plan;  /* what the stages emit */
    int rc;               /* the emitting stages' first error (sticky) */
    char *err;
    size_t errlen;
};

#define COUNT(t) (sizeof(t) / sizeof((t)[0]))

/* ------------------------------------------------------------------------ */
/* Paths                                                                     */

/* 1 when p is dir or below it. */
static int path_within(const char *p, const char *dir)
{
    size_t n = strlen(dir);

    if (n == 1 && dir[0] == '/')
        return p[0] == '/';
    return strncmp(p, dir, n) == 0 && (p[n] == '\0' || p[n] == '/');
}

/* Folds ".", ".." and repeated '/' of an absolute path, in place. */
static void normalize(char *p)
{
    size_t o = 0, i = 0, n = strlen(p);

    while (i < n) {
        size_t s, len;

        while (i < n && p[i] == '/')
            i++;
        if (i >= n)
            break;
        s = i;
        while (i < n && p[i] != '/')
            i++;
        len = i - s;
        if (len == 1 && p[s] == '.')
            continue;
        if (len == 2 && p[s] == '.' && p[s + 1] == '.') {
            while (o > 0 && p[o - 1] != '/')
                o--;
            if (o > 0)
                o--;
            continue;
        }
        p[o++] = '/';
        memmove(p + o, p + s, len);
        o += len;
    }
    if (o == 0)
        p[o++] = '/';
    p[o] = '\0';
}

static char *concat(const char *a, const char *b, const char *c)
{
    size_t la = strlen(a), lb = strlen(b), lc = strlen(c);
    char *p = malloc(la + lb + lc + 1);

    if (p != NULL) {
        memcpy(p, a, la);
        memcpy(p + la, b, lb);
        memcpy(p + la + lb, c, lc + 1);
    }
    return p;
}

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */

__attribute__((format(printf, 3, 4))) static int fail(struct ctx *c, int rc, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(c->err, c->errlen, fmt, ap);
    va_end(ap);
    return rc;
}

static int nomem(struct ctx *c)
{
    return fail(c, -ENOMEM, "bwrap arguments: out of memory");
}

/* "FILE:LINE:COL: filesystem.allowWrite[I]: MESSAGE" */
__attribute__((format(printf, 4, 5))) static int
fail_item(struct ctx *c, int rc, const struct settings_item *it, const char *fmt, ...)
{
    va_list ap;
    int n;

    n = snprintf(c->err, c->errlen, "%s:%u:%u: %s[%zu]: ", it->file, it->line, it->col, it->list,
                 it->index);
    if (n >= 0 && (size_t)n < c->errlen) {
        va_start(ap, fmt);
        vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Mount operations                                                          */

/* Takes ownership of path. */
static int op_add(struct ctx *c, char *path, enum op_kind kind, const struct settings_item *it)
{
    struct ops *l = &c->ops;

    if (path == NULL)
        return nomem(c);
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        struct op *v = realloc(l->v, cap * sizeof(*v));
        if (v == NULL) {
            free(path);
            return nomem(c);
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n].path = path;
    l->v[l->n].kind = kind;
    l->v[l->n].seq = l->n;
    l->v[l->n].it = it;
    l->v[l->n].keep = 0;
    l->n++;
    return 0;
}

static void ops_free(struct ops *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i].path);
    free(l->v);
    memset(l, 0, sizeof(*l));
}

static int cmp_op(const void *pa, const void *pb)
{
    const struct op *a = pa, *b = pb;
    int c = sb_path_cmp(a->path, b->path);

    if (c != 0)
        return c;
    if (a->kind != b->kind)
        return a->kind < b->kind ? -1 : 1;
    return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* ------------------------------------------------------------------------ */
/* Settings lists                                                            */

/* "$HOME" or "${HOME}" at the start of v, followed by the end or '/': the
 * length of that prefix, else 0. */
static size_t home_var(const char *v)
{
    size_t n = 0;

    if (strncmp(v, "$HOME", 5) == 0)
        n = 5;
    else if (strncmp(v, "${HOME}", 7) == 0)
        n = 7;
    return n > 0 && (v[n] == '\0' || v[n] == '/') ? n : 0;
}

__attribute__((format(printf, 3, 4))) static void warn_item(struct ctx *c,
                                                           const struct settings_item *it,
                                                           const char *fmt, ...)
{
    FILE *w = c->o->warn != NULL ? c->o->warn : stderr;
    va_list ap;

    fprintf(w, "sluice: warning: %s:%u:%u: %s[%zu]: ", it->file, it->line, it->col, it->list,
            it->index);
    va_start(ap, fmt);
    vfprintf(w, fmt, ap);
    va_end(ap);
    fputc('\n', w);
}

/* Expands one list entry into absolute, lexically normal paths (appended to
 * out): ~ and $HOME, relative paths, a trailing slash-star-star, globs. */
static int expand(struct ctx *c, const struct settings_item *it, struct sb_strv *out)
{
    const char *v = it->value;
    char *abs;
    size_t hv, len;
    int rc = 0;

    if (!it->literal && v[0] == '~') {
        if (v[1] != '\0' && v[1] != '/')
            return fail_item(c, -EINVAL, it, "'%s': only '~' and '~/' are supported", v);
        if (c->home == NULL)
            return fail_item(c, -EINVAL, it, "'%s': '~' needs $HOME, which is not set", v);
        abs = concat(c->home, v + 1, "");
    } else if (!it->literal && (hv = home_var(v)) > 0) {
        if (c->home == NULL)
            return fail_item(c, -EINVAL, it, "'%s': '$HOME' is not set", v);
        abs = concat(c->home, v + hv, "");
    } else if (!it->literal && v[0] == '$') {
        return fail_item(c, -EINVAL, it,
                         "'%s': only $HOME (or ${HOME}) and '~' are expanded in paths; write "
                         "the path out",
                         v);
    } else if (v[0] != '/') {
        abs = concat(c->o->cwd, "/", v);
    } else {
        abs = strdup(v);
    }
    if (abs == NULL)
        return nomem(c);
    /* DIR + slash-star-star is DIR and everything below it: DIR itself (the
     * reference drops the suffix; glob(3) would list only what exists now) */
    len = strlen(abs);
    if (!it->literal && len > 3 && strcmp(abs + len - 3, "/**") == 0)
        abs[len - 3] = '\0';
    normalize(abs);
    if (!it->literal && strpbrk(abs, "*?[") != NULL) {
        glob_t g;
        int grc = glob(abs, 0, NULL, &g);

        if (grc == GLOB_NOSPACE) {
            rc = nomem(c);
        } else if (grc == 0) {
            for (size_t i = 0; i < g.gl_pathc && rc == 0; i++)
                if (sb_strv_push(out, g.gl_pathv[i]) < 0)
                    rc = nomem(c);
        } else if (access(abs, F_OK) == 0) {
            /* no match as a pattern, but a path of that very name */
            if (sb_strv_push(out, abs) < 0)
                rc = nomem(c);
        } else {
            warn_item(c, it, "'%s' matches nothing; the entry has no effect", it->value);
        }
        globfree(&g);
    } else if (sb_strv_push(out, abs) < 0) {
        rc = nomem(c);
    }
    free(abs);
    return rc;
}

/* realpath(3) of a path from a list: 0 with *real set, 1 when the path
 * cannot be resolved (missing, a loop, not searchable: skipped), <0 on
 * error. For grants (allowWrite, allowRead) the real path must be the
 * written path or below it. */
static int resolve(struct ctx *c, const struct settings_item *it, const char *lexical, int grant,
                   char **real)
{
    char *r = realpath(lexical, NULL);

    if (r == NULL) {
        int e = errno;
        if (e == ENOMEM)
            return nomem(c);
        if (e == ENOENT || e == ENOTDIR)
            return 1;
        /* it may exist, but the rule cannot be applied: never a skip */
        return fail_item(c, -EINVAL, it, "'%s' cannot be resolved: %s", lexical, strerror(e));
    }
    if (grant && !path_within(r, lexical)) {
        int rc = fail_item(c, -EINVAL, it,
                           "'%s' resolves to '%s' through a symbolic link outside it; name the "
                           "real path if that is what you mean",
                           lexical, r);
        free(r);
        return rc;
    }
    *real = r;
    return 0;
}

typedef int (*entry_fn)(struct ctx *c, const struct settings_item *it, const char *lexical);

static int each_entry(struct ctx *c, const struct settings_list *l, entry_fn fn)
{
    int rc = 0;

    for (size_t i = 0; i < l->n && rc == 0; i++) {
        struct sb_strv paths = {0};
        rc = expand(c, &l->items[i], &paths);
        for (size_t j = 0; j < paths.n && rc == 0; j++)
            rc = fn(c, &l->items[i], paths.v[j]);
        sb_strv_free(&paths);
    }
    return rc;
}

static int special(const char *p)
{
    return path_within(p, "/dev") || path_within(p, "/proc");
}

/* resolve() for allowWrite and denyWrite, which the sandbox's own /dev and
 * /proc ignore: 1 (skipped) for a path written under them too. */
static int resolve_writable(struct ctx *c, const struct settings_item *it, const char *lexical,
                            int grant, char **real)
{
    if (special(lexical))
        return 1;
    return resolve(c, it, lexical, grant, real);
}

static int add_write(struct ctx *c, const struct settings_item *it, const char *lexical)
{
    char *real = NULL;
    int rc = resolve_writable(c, it, lexical, 1, &real);

    if (rc != 0 || real == NULL)
        return rc < 0 ? rc : 0;
    if (strcmp(real, "/") == 0) {
        free(real);
        return fail_item(c, -EINVAL, it,
                         "'/' would make the whole filesystem writable; use "
                         "filesystem.disabled for that");
    }
    if (special(real)) {
        free(real);
        return 0;
    }
    for (size_t i = 0; i < c->roots.n; i++) {
        if (strcmp(c->roots.v[i], real) == 0) {
            free(real);
            return 0;
        }
    }
    if (sb_strv_push(&c->roots, real) < 0) {
        free(real);
        return nomem(c);
    }
    return op_add(c, real, OP_W, it);
}

/* filesystem.createWrite: like allowWrite, but a missing path is created
 * first (a name ending in '/' as a directory, mode 0700, else an empty file,
 * mode 0600; its parent must exist), as the agent wrapper does for
 * ~/.claude and ~/.claude.json. The one thing the builder changes on the
 * host, and only for paths the settings name this way. */
static int add_create_write(struct ctx *c, const struct settings_item *it, const char *lexical)
{
    struct stat st;
    size_t n = strlen(it->value);
    int dir = n > 0 && it->value[n - 1] == '/';

    if (lstat(lexical, &st) < 0 && errno == ENOENT) {
        int rc = 0;
        if (dir) {
            rc = mkdir(lexical, 0700);
        } else {
            int fd = open(lexical, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
            if (fd < 0)
                rc = -1;
            else
                close(fd);
        }
        if (rc < 0 && errno != EEXIST)
            return fail_item(c, -errno, it, "cannot create '%s': %s", lexical, strerror(errno));
    }
    return add_write(c, it, lexical);
}

static int add_deny_write(struct ctx *c, const struct settings_item *it, const char *lexical)
{
    char *real = NULL;
    int rc = resolve_writable(c, it, lexical, 0, &real);

    if (rc != 0 || real == NULL)
        return rc < 0 ? rc : 0;
    return op_add(c, real, OP_DW, it);
}

static int add_deny_read(struct ctx *c, const struct settings_item *it, const char *lexical)
{
    struct stat st;
    char *real = NULL;
    int rc;

    rc = resolve(c, it, lexical, 0, &real);
    if (rc != 0 || real == NULL)
        return rc < 0 ? rc : 0;
    if (strcmp(real, "/") == 0) {
        free(real);
        return fail_item(c, -EINVAL, it, "'/' would hide the whole filesystem");
    }
    if (stat(real, &st) < 0) {
        free(real);
        return 0;
    }
    return op_add(c, real, S_ISDIR(st.st_mode) ? OP_DR_DIR : OP_DR_FILE, it);
}

static int add_allow_read(struct ctx *c, const struct settings_item *it, const char *lexical)
{
    char *real = NULL;
    int rc;

    rc = resolve(c, it, lexical, 1, &real);
    if (rc == 1 && it->literal) /* said as a glob without a match is */
        warn_item(c, it, "'%s' does not exist; the entry has no effect", lexical);
    if (rc != 0 || real == NULL)
        return rc < 0 ? rc : 0;
    return op_add(c, real, OP_AR, it);
}

/* Places where common tools write logs and state they do not need to keep
 * (npm writes a debug log on every run and fails noisily when it cannot):
 * when one exists and is not writable anyway, an empty tmpfs the command
 * may write into, discarded after the run, like a hidden directory. */
static int add_scratch(struct ctx *c)
{
    static const char *const rel[] = {"/.npm/_logs"};
    static const struct settings_item scratch_item = {
        .value = (char *)"~/.npm/_logs", .file = "<built-in>", .list = "scratch"};
    struct stat st;

    if (c->home == NULL)
        return 0;
    for (size_t i = 0; i < COUNT(rel); i++) {
        char *p = concat(c->home, rel[i], ""), *real;
        int covered = 0;

        if (p == NULL)
            return nomem(c);
        real = realpath(p, NULL);
        free(p);
        if (real == NULL)
            continue;
        if (stat(real, &st) < 0 || !S_ISDIR(st.st_mode)) {
            free(real);
            continue;
        }
        for (size_t j = 0; j < c->roots.n && !covered; j++)
            covered = path_within(real, c->roots.v[j]);
        if (covered) {
            free(real);
            continue;
        }
        if (op_add(c, real, OP_DR_DIR, &scratch_item) < 0)
            return -ENOMEM;
    }
    return 0;
}

/* Read-only protection for a file sluice itself depends on (its binary,
 * bwrap, the settings), with pins on its ancestors; kept only where they lie
 * in a writable region. */
static int add_own_file(struct ctx *c, const char *path)
{
    char *real;
    int rc;

    if (path == NULL || path[0] == '\0')
        return 0;
    if (path[0] != '/') {
        char *abs = concat(c->o->cwd, "/", path);
        if (abs == NULL)
            return nomem(c);
        real = realpath(abs, NULL);
        free(abs);
    } else {
        real = realpath(path, NULL);
    }
    if (real == NULL)
        return errno == ENOMEM ? nomem(c) : 0;
    for (char *s = real + 1; (s = strchr(s, '/')) != NULL; s++) {
        rc = op_add(c, strndup(real, (size_t)(s - real)), OP_PIN, NULL);
        if (rc < 0) {
            free(real);
            return rc;
        }
    }
    return op_add(c, real, OP_PROT, NULL);
}

/* SPOT, the name beside sluice where a later run looks for sluice-inner
 * (run_find_inner), kept as it is in the sandbox, so that no command puts
 * a program there for the next run to start as the sandbox's first, before
 * and without the seccomp filter (rt-16: sluice alone in a writable
 * directory, its sluice-inner written by the command). Nothing there: an
 * empty read-only directory (a placeholder, like a missing protected
 * file's); a symbolic link: its directory read-only (a link in a writable
 * directory can be replaced by a file, and no mount covers a link);
 * anything else: read-only over itself. The chosen sluice-inner itself is
 * add_own_file's. Only where the directory is writable (keep). */
static int add_inner_spot(struct ctx *c, const char *spot)
{
    const char *slash = spot != NULL ? strrchr(spot, '/') : NULL;
    char *dir, *real, *path;
    struct stat st;
    int could;

    if (slash == NULL || spot[0] != '/' || slash[1] == '\0' ||
        (c->o->inner_exe != NULL && strcmp(c->o->inner_exe, spot) == 0))
        return 0;
    dir = strndup(spot, slash == spot ? 1 : (size_t)(slash - spot));
    if (dir == NULL)
        return nomem(c);
    real = realpath(dir, NULL);
    free(dir);
    if (real == NULL)
        return errno == ENOMEM ? nomem(c) : 0;
    if (lstat(spot, &st) == 0 && S_ISLNK(st.st_mode))
        return op_add(c, real, OP_PROT, NULL);
    path = concat(real, strcmp(real, "/") == 0 ? "" : "/", slash + 1);
    could = sb_could_create(AT_FDCWD, real); /* else no placeholder is needed */
    free(real);
    if (path == NULL)
        return nomem(c);
    if (lstat(path, &st) == 0)
        return op_add(c, path, OP_PROT, NULL);
    if (errno == ENOENT && could)
        return op_add(c, path, OP_ABSENT, NULL);
    free(path);
    return 0;
}

static int add_protected(struct ctx *c, const char *root)
{
    struct sb_prot_list l = {0};
    struct stat st;
    int rc;

    if (stat(root, &st) < 0 || !S_ISDIR(st.st_mode))
        return 0;
    rc = sb_protect_scan(root, c->s->mandatory_deny_search_depth, c->s->filesystem.allow_git_config,
                         &l, c->err, c->errlen);
    for (size_t i = 0; i < l.n && rc == 0; i++) {
        /* for the post-run check (verify.c): no second walk (issue 25) */
        if (sb_gitwatch_keep(&c->plan.watch, &l.v[i]) < 0) {
            rc = nomem(c);
            break;
        }
        if (l.v[i].kind == SB_PROT_LINK)
            continue; /* no mount covers a link: verify.c watches it */
        enum op_kind k = l.v[i].kind == SB_PROT_PIN      ? OP_PIN
                         : l.v[i].kind == SB_PROT_ABSENT ? OP_ABSENT
                         : l.v[i].kind == SB_PROT_MKDIR  ? OP_MKDIR
                                                         : OP_PROT;
        rc = op_add(c, l.v[i].path, k, NULL);
        l.v[i].path = NULL; /* owned by the op (or freed by op_add) */
    }
    sb_prot_list_free(&l);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Which mounts mean something                                               */

static int is_deny_read(enum op_kind k)
{
    return k == OP_DR_DIR || k == OP_DR_FILE;
}

static int writable(const struct op *near)
{
    return near != NULL && (near->kind == OP_W || near->kind == OP_PIN || near->kind == OP_MKDIR);
}

static int keep(const struct op *op, const struct op *near)
{
    switch (op->kind) {
    case OP_W:
        return !(near != NULL && near->kind == OP_PROT);
    case OP_PIN:
        return writable(near) && strcmp(near->path, op->path) != 0;
    case OP_PROT:
    case OP_ABSENT:
    case OP_MKDIR:
    case OP_DW:
        return writable(near);
    case OP_DR_DIR:
    case OP_DR_FILE:
        return !(near != NULL && is_deny_read(near->kind));
    case OP_AR:
        return near != NULL && near->kind == OP_DR_DIR;
    }
    return 0;
}

/* Sorts, drops duplicates and marks what to keep. */
static int plan_mounts(struct ctx *c)
{
    struct ops *l = &c->ops;
    size_t *stack, sp = 0, o = 0;

    if (l->n == 0)
        return 0;
    qsort(l->v, l->n, sizeof(*l->v), cmp_op);
    for (size_t i = 0; i < l->n; i++) {
        if (o > 0 && l->v[o - 1].kind == l->v[i].kind &&
            strcmp(l->v[o - 1].path, l->v[i].path) == 0) {
            free(l->v[i].path);
            continue;
        }
        l->v[o++] = l->v[i];
    }
    l->n = o;
    stack = malloc(l->n * sizeof(*stack));
    if (stack == NULL)
        return nomem(c);
    for (size_t i = 0; i < l->n; i++) {
        struct op *op = &l->v[i];
        while (sp > 0 && !path_within(op->path, l->v[stack[sp - 1]].path))
            sp--;
        op->keep = keep(op, sp > 0 ? &l->v[stack[sp - 1]] : NULL);
        if (op->keep)
            stack[sp++] = i;
    }
    free(stack);
    return 0;
}

/* The deepest kept mount at or above p, or NULL. */
static const struct op *covering(const struct ctx *c, const char *p)
{
    const struct op *found = NULL;

    for (size_t i = 0; i < c->ops.n; i++)
        if (c->ops.v[i].keep && path_within(p, c->ops.v[i].path))
            found = &c->ops.v[i];
    return found;
}

/* ------------------------------------------------------------------------ */
/* The vector, stage by stage                                                */

/* Appends each string up to the NULL to the vector; after a failure,
 * nothing (c->rc keeps the first error). */
__attribute__((sentinel)) static void args(struct ctx *c, const char *s, ...)
{
    va_list ap;

    va_start(ap, s);
    for (; s != NULL; s = va_arg(ap, const char *))
        if (c->rc == 0 && sb_strv_push(&c->plan.argv, s) < 0)
            c->rc = nomem(c);
    va_end(ap);
}

/* Appends one formatted element (a number or an option with one). */
__attribute__((format(printf, 2, 3))) static void argf(struct ctx *c, const char *fmt, ...)
{
    char buf[128];
    va_list ap;
    int n;

    if (c->rc != 0)
        return;
    va_start(ap, fmt);
    n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof(buf) || sb_strv_push(&c->plan.argv, buf) < 0)
        c->rc = nomem(c);
}

/* Records a host path bwrap creates as a mount point. */
static void created(struct ctx *c, const char *path)
{
    if (c->rc == 0 && sb_strv_push(&c->plan.created, path) < 0)
        c->rc = nomem(c);
}

/* Options every build needs, and a working directory the sandbox keeps. */
static int check_opts(struct ctx *c)
{
    const struct sb_bwrap_opts *o = c->o;

    if (c->s == NULL || o->bwrap == NULL || o->cwd == NULL || o->cwd[0] != '/' ||
        o->host_tmpdir == NULL || o->host_tmpdir[0] != '/' || o->self_exe == NULL ||
        o->inner_fd < 0 || o->cmd == NULL || o->cmd[0] == NULL)
        return fail(c, -EINVAL,
                    "bwrap arguments: invalid options (bwrap, cwd, host tmpdir, sluice's path, "
                    "descriptor or command missing)");
    if (special(o->cwd))
        return fail(c, -EINVAL,
                    "the working directory '%s' is under /dev or /proc, which the sandbox "
                    "replaces with its own; run the command from another directory",
                    o->cwd);
    return 0;
}

/* The home directory for ~ and $HOME: resolved where it can be. */
static int resolve_home(struct ctx *c)
{
    const char *home = c->o->home;

    if (home == NULL || home[0] != '/')
        return 0;
    c->home = realpath(home, NULL);
    if (c->home == NULL)
        c->home = strdup(home);
    if (c->home == NULL)
        return nomem(c);
    normalize(c->home);
    return 0;
}

/* W, P and DW: the writable roots (allowWrite, default the working
 * directory, and createWrite), the protected files in each, sluice's own
 * files, and the read-only carve-outs of denyWrite. */
static int add_writable(struct ctx *c)
{
    static const struct settings_item cwd_item = {
        .value = (char *)".", .file = "<default>", .list = "filesystem.allowWrite"};
    const struct settings *s = c->s;
    int rc;

    if (s->filesystem.allow_write.n == 0 && s->filesystem.create_write.n == 0)
        rc = add_write(c, &cwd_item, c->o->cwd);
    else
        rc = each_entry(c, &s->filesystem.allow_write, add_write);
    if (rc == 0)
        rc = each_entry(c, &s->filesystem.create_write, add_create_write);
    for (size_t i = 0; i < c->roots.n && rc == 0; i++)
        rc = add_protected(c, c->roots.v[i]);
    if (rc == 0)
        rc = add_own_file(c, c->o->self_exe);
    if (rc == 0)
        rc = add_own_file(c, c->o->inner_exe);
    if (rc == 0)
        rc = add_inner_spot(c, c->o->inner_spot);
    if (rc == 0)
        rc = add_own_file(c, c->o->bwrap);
    for (size_t i = 0; i < s->nfiles && rc == 0; i++)
        rc = add_own_file(c, s->files[i]);
    if (rc == 0)
        rc = each_entry(c, &s->filesystem.deny_write, add_deny_write);
    return rc;
}

/* network.mitmProxy's socket is the host's: the proxy on the host dials it,
 * the sandbox never sees it (hidden like a denied read, whatever the
 * filesystem lists and allowAllUnixSockets say). */
static int add_mitm_socket(struct ctx *c)
{
    const char *p = c->s->network.mitm_proxy.socket_path;
    struct stat st;
    char *real;

    if (!c->s->network.mitm_proxy.given.set || p == NULL)
        return 0;
    real = realpath(p, NULL);
    if (real == NULL)
        return errno == ENOMEM ? nomem(c) : 0; /* absent: nothing to see */
    if (stat(real, &st) < 0 || S_ISDIR(st.st_mode)) {
        free(real);
        return 0;
    }
    return op_add(c, real, OP_DR_FILE, NULL);
}

/* DR and AR: the denied reads (and the scratch directories), then what
 * allowRead shows again inside them. */
static int add_reads(struct ctx *c, int disabled)
{
    int rc = each_entry(c, &c->s->filesystem.deny_read, add_deny_read);

    if (rc == 0)
        rc = add_mitm_socket(c);

    if (rc == 0 && !disabled)
        rc = add_scratch(c);
    if (rc == 0)
        rc = each_entry(c, &c->s->filesystem.allow_read, add_allow_read);
    return rc;
}

/* Neither the working directory nor sluice's own binary may be hidden. */
static int check_not_hidden(struct ctx *c)
{
    const struct op *cw = covering(c, c->o->cwd), *se = covering(c, c->o->self_exe);
    const struct op *ie = c->o->inner_exe != NULL ? covering(c, c->o->inner_exe) : NULL;

    if (cw != NULL && is_deny_read(cw->kind))
        return fail_item(c, -EINVAL, cw->it,
                         "hides the working directory '%s'; allow it with "
                         "filesystem.allowRead or filesystem.allowWrite",
                         c->o->cwd);
    if (se != NULL && is_deny_read(se->kind))
        return fail_item(c, -EINVAL, se->it,
                         "hides sluice's own binary '%s', which must run in the sandbox; "
                         "allow it with filesystem.allowRead",
                         c->o->self_exe);
    if (ie != NULL && is_deny_read(ie->kind))
        return fail_item(c, -EINVAL, ie->it,
                         "hides sluice-inner '%s', which must run in the sandbox; "
                         "allow it with filesystem.allowRead",
                         c->o->inner_exe);
    return 0;
}

/* Every mount operation, planned and checked (what to mount). */
static int collect_mounts(struct ctx *c)
{
    int disabled = c->s->filesystem.disabled != 0;
    int rc = 0;

    if (!disabled)
        rc = add_writable(c);
    if (rc == 0)
        rc = add_reads(c, disabled);
    if (rc == 0)
        rc = plan_mounts(c);
    if (rc == 0)
        rc = check_not_hidden(c);
    return rc;
}

/* bwrap, the session and the namespaces. */
static void emit_namespaces(struct ctx *c)
{
    const struct sb_bwrap_opts *o = c->o;
    const struct settings *s = c->s;

    args(c, o->bwrap, NULL);
    if (!o->stdin_tty)
        args(c, "--new-session", NULL);
    args(c, "--die-with-parent", NULL);
    if (o->info_fd > 2) {
        /* the sandbox's first process outlives a bwrap killed while it
         * makes the mount points: the reaper waits for it too (reaper.c) */
        args(c, "--info-fd", NULL);
        argf(c, "%d", o->info_fd);
    }
    if (o->restrict_network && s->network.isolate)
        args(c, "--unshare-net", NULL);
    else if (!s->network.isolate) {
        FILE *w = o->warn != NULL ? o->warn : stderr;
        fprintf(w, "sluice: WARNING: network.isolate is false: the command uses the host's "
                   "network directly, with NO network policy (no allow or deny list, no "
                   "address guard, nothing logged); the filesystem, syscall and environment "
                   "rules still apply\n");
    }
    args(c, "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", NULL);
    if (!o->bwrap_setuid)
        args(c, "--unshare-user", NULL);
    if (s->allow_nested_user_namespaces && o->host_root && !o->bwrap_setuid) {
        /* the kernel lets a user namespace map uid 0 of its parent only
         * when its creator held CAP_SETFCAP, which the command never does:
         * as root it runs as SB_NESTED_UID (host root all the same), so a
         * nested bwrap or unshare can map its own uid */
        args(c, "--uid", SB_NESTED_UID, NULL);
    }
    args(c, "--cap-drop", "ALL", NULL);
}

/* The root, /dev, /proc (and its sysctls) and the private /tmp. */
static void emit_system(struct ctx *c)
{
    const struct sb_bwrap_opts *o = c->o;
    const struct settings *s = c->s;

    args(c, s->filesystem.disabled ? "--bind" : "--ro-bind", "/", "/", NULL);
    args(c, "--dev", "/dev", NULL);
    if (s->enable_weaker_nested_sandbox)
        args(c, "--bind", "/proc", NULL);
    else
        args(c, "--proc", NULL);
    args(c, "/proc", NULL);
    /* sysctls check only that the caller is uid 0, not its capabilities:
     * as root, a writable /proc/sys would let the command change the
     * host's kernel.core_pattern or kernel.modprobe. bwrap covers it only
     * when it looks writable, so do it always as root. Not for another
     * user with allowNestedUserNamespaces: nothing there is writable for
     * the command (and bwrap would cover it if it were), and the kernel
     * mounts a new procfs (a nested sandbox's --proc) only where no
     * procfs is partly covered by another mount. */
    if (o->host_root || !s->allow_nested_user_namespaces)
        args(c, "--ro-bind", "/proc/sys", "/proc/sys", "--ro-bind-try", "/proc/sysrq-trigger",
             "/proc/sysrq-trigger", NULL);
    args(c, "--bind", o->host_tmpdir, "/tmp", NULL);
}

/* Why a read-only mount the settings made is there, for the write report. */
static void record_ro_why(struct ctx *c, const struct op *op)
{
    const char *why;

    if (op->kind != OP_PROT && op->kind != OP_ABSENT && op->kind != OP_DW && op->kind != OP_AR)
        return;
    why = op->kind == OP_DW   ? "denyWrite"
          : op->kind == OP_AR ? "allowRead only"
                              : "protected"; /* also a missing .git */
    if (c->rc == 0 &&
        (sb_strv_push(&c->plan.ro_why, op->path) < 0 || sb_strv_push(&c->plan.ro_why, why) < 0))
        c->rc = nomem(c);
}

/* One kept mount operation (see the comment at the top). */
static void emit_op(struct ctx *c, const struct op *op)
{
    if (op->kind == OP_MKDIR) {
        created(c, op->path);
        return;
    }
    record_ro_why(c, op);
    switch (op->kind) {
    case OP_W:
    case OP_PIN:
        args(c, "--bind", op->path, NULL);
        break;
    case OP_PROT:
    case OP_DW:
    case OP_AR:
        args(c, "--ro-bind", op->path, NULL);
        break;
    case OP_DR_FILE:
        args(c, "--ro-bind", "/dev/null", NULL);
        break;
    case OP_ABSENT:
    case OP_DR_DIR:
        args(c, "--tmpfs", NULL);
        break;
    case OP_MKDIR:
        break;
    }
    args(c, op->path, NULL);
    if (op->kind == OP_ABSENT) {
        args(c, "--remount-ro", op->path, NULL);
        created(c, op->path);
    }
}

/* MOUNTS, in tree order, then what must come after every bind. */
static void emit_mounts(struct ctx *c)
{
    const struct sb_bwrap_opts *o = c->o;

    for (size_t i = 0; i < c->ops.n && c->rc == 0; i++)
        if (c->ops.v[i].keep)
            emit_op(c, &c->ops.v[i]);
    /* the run directories of every run (issue 14): after every bind, so
     * no allowWrite or allowRead can show them again */
    if (o->mask_dir != NULL)
        args(c, "--tmpfs", o->mask_dir, NULL);
    for (size_t i = 0; o->late_ro != NULL && o->late_ro[i] != NULL && o->late_ro[i + 1] != NULL;
         i += 2)
        args(c, "--ro-bind", o->late_ro[i], o->late_ro[i + 1], NULL);
    /* /tmp inside is the private one: sluice's binary under the host's
     * /tmp (a build tree) is bound back, read-only, at the same path, so
     * inner and `sluice connect` are found where they are named */
    if (strncmp(o->self_exe, "/tmp/", 5) == 0)
        args(c, "--ro-bind", o->self_exe, o->self_exe, NULL);
    if (o->inner_exe != NULL && strncmp(o->inner_exe, "/tmp/", 5) == 0)
        args(c, "--ro-bind", o->inner_exe, o->inner_exe, NULL);
}

/* The descriptors: read-only stdio re-bound, the sandbox's resolver, the
 * working directory. */
static void emit_descriptors(struct ctx *c)
{
    const struct sb_bwrap_opts *o = c->o;

    /* A regular file or a directory the command was given read-only on
     * 0-2 (stdio_ro) is bound read-only in /tmp too (from the launcher's
     * descriptor SB_STDIO_RO_PASS + N, which bwrap closes), and inner makes
     * N a descriptor opened there, in every mode (rt-3 #5): through the
     * host's writable mount the command could chmod, chown, utimes or
     * setxattr it (fchmod, or /proc/self/fd/N), which Landlock has no
     * right for, reopen /proc/self/fd/N for writing where Landlock has no
     * file rules (allowNestedUserNamespaces, a kernel without it), and
     * unlink, rename and make entries in a directory. On the read-only
     * mount all of these get EROFS. inner hands its descriptor of a
     * regular file back to the launcher, which sets the caller's offset
     * from it when the command is done (launch.c) */
    for (int fd = 0; fd <= 2; fd++) {
        if ((o->stdio_ro & (1U << fd)) == 0)
            continue;
        args(c, "--ro-bind-fd", NULL);
        argf(c, "%d", SB_STDIO_RO_PASS + fd);
        argf(c, SB_STDIO_RO_FMT, fd);
    }
    if (o->transparent && o->resolv_conf != NULL) {
        /* the sandbox's resolver: bound over the file /etc/resolv.conf
         * leads to (the host's may be a link into /run) */
        args(c, "--ro-bind", o->resolv_conf,
             o->resolv_conf_dest != NULL ? o->resolv_conf_dest : "/etc/resolv.conf", NULL);
    }
    args(c, "--chdir", o->cwd, NULL);
}

/* The first program inside: sluice inner and its options. */
static void emit_inner(struct ctx *c)
{
    const struct sb_bwrap_opts *o = c->o;
    const struct settings *s = c->s;
    const struct {
        const char *opt;
        unsigned v;
    } limits[] = {
        /* sandbox.limits (issue 14; limits.c), each only when set */
        {"--limit-processes=", s->sandbox.limits.processes},
        {"--limit-memory-mib=", s->sandbox.limits.memory_mib},
        {"--limit-open-files=", s->sandbox.limits.open_files},
    };

    if (o->inner_exe != NULL)
        args(c, "--", o->inner_exe, "--fd", NULL);
    else
        args(c, "--", o->self_exe, "inner", "--fd", NULL);
    argf(c, "%d", o->inner_fd);
    if (o->allow_unix_sockets)
        args(c, "--allow-unix-sockets", NULL);
    if (!s->network.isolate) {
        /* inner's listeners land in the host's namespace: ephemeral
         * loopback ports nothing points at, not 3128/1080 */
        args(c, "--http-port", "0", "--socks-port", "0", NULL);
    }
    if (s->network.allow_local_binding)
        args(c, "--allow-local-binding", NULL);
    if (s->allow_nested_user_namespaces)
        args(c, "--allow-user-namespaces", NULL);
    for (int fd = 0; fd <= 2; fd++)
        if (o->stdio_ro & (1U << fd))
            argf(c, "--reopen-ro=%d:%lld", fd, o->stdio_off[fd]);
    if (o->transparent)
        args(c, "--transparent", NULL);
    if (o->watch_writes)
        args(c, "--watch-writes", NULL);
    if (o->guard_connect)
        args(c, "--guard-connect", NULL);
    if (o->debug)
        args(c, "--debug", NULL);
    for (size_t i = 0; i < COUNT(limits); i++)
        if (limits[i].v > 0)
            argf(c, "%s%u", limits[i].opt, limits[i].v);
}

void sb_bwrap_seccomp_opts(const struct sb_bwrap_opts *o, struct sb_seccomp_opts *so)
{
    memset(so, 0, sizeof(*so));
    so->allow_unix_sockets = o->allow_unix_sockets;
    so->allow_local_binding = o->s->network.allow_local_binding;
    so->allow_user_namespaces = o->s->allow_nested_user_namespaces;
    so->transparent = o->transparent;
    so->watch_writes = o->watch_writes;
    so->guard_connect = o->guard_connect;
}

/* "--" and the command's argv, verbatim. */
static void emit_command(struct ctx *c)
{
    args(c, "--", NULL);
    for (size_t i = 0; c->o->cmd[i] != NULL; i++)
        args(c, c->o->cmd[i], NULL);
}

int sb_bwrap_build(const struct sb_bwrap_opts *o, struct sb_plan *plan, char *err, size_t errlen)
{
    struct ctx c;
    int rc;

    memset(&c, 0, sizeof(c));
    c.o = o;
    c.s = o->s;
    c.err = err;
    c.errlen = errlen;
    rc = check_opts(&c);
    if (rc < 0)
        return rc;
    rc = resolve_home(&c);
    if (rc == 0)
        rc = collect_mounts(&c);
    if (rc < 0)
        goto out;
    emit_namespaces(&c);
    emit_system(&c);
    emit_mounts(&c);
    emit_descriptors(&c);
    emit_inner(&c);
    emit_command(&c);
    rc = c.rc;
    if (rc < 0)
        goto out;
    sb_plan_free(plan);
    *plan = c.plan;
    memset(&c.plan, 0, sizeof(c.plan));
out:
    sb_plan_free(&c.plan);
    ops_free(&c.ops);
    sb_strv_free(&c.roots);
    free(c.home);
    return rc;
}

void sb_plan_cleanup(const struct sb_plan *p)
{
    if (p == NULL)
        return;
    for (size_t i = p->created.n; i-- > 0;) {
        const char *path = p->created.v[i];
        struct stat st;

        if (lstat(path, &st) < 0)
            continue;
        if (S_ISREG(st.st_mode) && st.st_size == 0)
            (void)unlink(path);
        else if (S_ISDIR(st.st_mode))
            (void)rmdir(path); /* fails, as it should, unless empty */
    }
}

void sb_plan_free(struct sb_plan *p)
{
    if (p == NULL)
        return;
    sb_strv_free(&p->argv);
    sb_strv_free(&p->created);
    sb_strv_free(&p->ro_why);
    sb_prot_list_free(&p->watch);
}
