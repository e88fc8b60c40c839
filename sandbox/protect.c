/* sandbox/protect.c - the protected-file scan below a writable root.
 *
 * A sandboxed command must not be able to plant code that runs later, outside
 * the sandbox: shell start-up files, git hooks and configuration, editor and
 * MCP settings. For one writable ROOT this finds what the bwrap builder must
 * bind read-only (or pin) inside it.
 *
 * Depth (mandatoryDenySearchDepth) counts directory levels the way
 * ripgrep's --max-depth does for the reference's scan: depth 1 scans ROOT's
 * own entries only, depth 2 also those of ROOT's subdirectories, depth N
 * directories up to N-1 levels below ROOT. A protected file found by the
 * reference at ROOT/a/b/.bashrc (depth 3) is found here at depth 3 too.
 * The walk never follows a symbolic link, never descends into node_modules,
 * into a protected directory (all of it is read-only anyway) or into .git
 * (handled below), and skips directories it cannot open.
 *
 * The list is the reference's mandatory denies as of srt 0.0.83
 * (../shared/reference/srt-0.0.83-cli-and-settings.md, "Mandatory denies":
 * .bashrc .bash_profile .zshrc .zprofile .profile .gitconfig .gitmodules
 * .ripgreprc .mcp.json, .vscode/ .idea/ .claude/commands/ .claude/agents/
 * .git/hooks/ .git/config). In every scanned directory:
 *   - .bashrc .bash_profile .zshrc .zprofile .profile .gitconfig .gitmodules
 *     .ripgreprc .mcp.json .vscode .idea: an existing one is FILE or DIR
 *     (by what it is);
 *   - .claude/commands and .claude/agents (an agent's slash commands and
 *     subagent definitions, which it runs later with its own permissions):
 *     FILE or DIR when they exist; in ROOT, ABSENT when missing, and when
 *     .claude itself is missing it is MKDIR (the rest of .claude stays
 *     writable); a .claude that is a symbolic link is handled as a
 *     protected link (its target inside ROOT read-only), a .claude that is
 *     a file is FILE;
 *   - .git as a FILE (a "gitdir:" pointer of a worktree or submodule) is
 *     FILE: it cannot be pointed elsewhere;
 *   - .git as a directory is a git directory, see below.
 * Every name above is matched in any (ASCII) case where it exists, as the
 * reference matches them (issue 21): .BASHRC is FILE, .GIT a git directory,
 * .GIT/HOOKS DIR, and the walk does not descend into them; git, bash and
 * editors read them under the protected name on a case-insensitive
 * filesystem. A missing name is blocked under its exact spelling; in a
 * case-folding directory (ext4 or tmpfs casefold, chattr +F) that mount
 * point is also what every other spelling looks up, so none can be made.
 * In ROOT itself a protected name that does not exist is ABSENT (a mount
 * point there keeps it from being created; bwrap.c makes it an empty
 * read-only directory), .git included: with no .git in ROOT the command
 * cannot make one. Deeper down only existing names
 * are protected (mount points in every directory would be thousands of
 * empty files on the host).
 *
 * A git directory G (ROOT/.git, a nested repository's .git, and the git
 * directories of submodules and linked worktrees inside G) gets:
 *   - PIN on G: a read-write self-bind makes G a mount point, which rename(2)
 *     refuses (EBUSY), so `mv .git x; mkdir -p .git/hooks` cannot replace it;
 *   - G/hooks: DIR (or FILE), ABSENT when missing;
 *   - G/config and G/config.worktree (read when extensions.worktreeConfig is
 *     on): FILE, ABSENT when missing, unless allow_git_config;
 *   - G/commondir (git reads hooks and config from the directory it names):
 *     FILE when it exists. A missing one is NOT blocked: git dies on any
 *     commondir it cannot read as a path ("failed to read"), so a mount
 *     point there would break git inside the sandbox and, through the
 *     host-side mount point, outside it during the run. A known gap: the
 *     remedy is a check after the run (all of the sandbox's processes are
 *     dead by then, so it cannot race) that no commondir appeared;
 *   - G/modules/... (submodule git directories, found by their HEAD): each
 *     handled as a git directory; G/worktrees/W: PIN W, W/commondir FILE,
 *     W/config.worktree as config.
 *
 * Every existing directory strictly between ROOT and a protected path is
 * PIN too: otherwise `mv sub x; mkdir sub` would bring back an unprotected
 * sub/.git or sub/.bashrc under the old name.
 *
 * Symbolic links: a bind mount cannot be put on a link (bwrap follows the
 * destination), and the link itself can always be replaced by its
 * writable parent directory. A protected name that is a symlink is handled by
 * protecting its target read-only when the target exists and lies strictly
 * inside ROOT (so nothing can be written through the link); a target outside
 * ROOT is not touched (it is read-only unless it lies in another writable
 * root), and a dangling link gets nothing. Replacing the link remains
 * possible: a residual risk, reported.
 *
 * Output: parents before children (bwrap applies mounts in order, and a pin
 * must be under the binds inside it), without duplicates, and without
 * entries inside a read-only FILE/DIR entry (they are covered by it; an
 * ABSENT there could not even be created).
 */
#define _DEFAULT_SOURCE /* d_type */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <linux/capability.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sandbox/sandbox.h"

#define MODULES_DEPTH_MAX 8 /* submodule names are paths: modules/a/b/c */

static const char *const prot_names[] = {
    ".bashrc",     ".bash_profile", ".zshrc",    ".zprofile", ".profile", ".gitconfig",
    ".gitmodules", ".ripgreprc",    ".mcp.json", ".vscode",   ".idea",
};

static const char *const claude_names[] = {"commands", "agents"};

static const char *const display_names[] = {
    ".bashrc",     ".bash_profile", ".zshrc",   ".zprofile",         ".profile",
    ".gitconfig",  ".gitmodules",   ".ripgreprc", ".mcp.json",       ".vscode/",
    ".idea/",      ".claude/commands/", ".claude/agents/", ".git/hooks/", ".git/config",
    NULL};

#define COUNT(t) (sizeof(t) / sizeof((t)[0]))

const char *const *sb_protect_names(void)
{
    return display_names;
}

struct walk {
    struct sb_prot_list *l;
    const char *root; /* resolved */
    size_t rootlen;
    int allow_git_config;
    unsigned depth; /* mandatoryDenySearchDepth, at least 1 */
    char *err;
    size_t errlen;
};

/* ------------------------------------------------------------------------ */
/* Lists                                                                     */

static int list_add(struct sb_prot_list *l, char *path, enum sb_prot_kind kind)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 32;
        struct sb_prot *v = realloc(l->v, cap * sizeof(*v));
        if (v == NULL) {
            free(path);
            return -ENOMEM;
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n].path = path;
    l->v[l->n].kind = kind;
    l->n++;
    return 0;
}

void sb_prot_list_free(struct sb_prot_list *l)
{
    if (l == NULL)
        return;
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i].path);
    free(l->v);
    l->v = NULL;
    l->n = l->cap = 0;
}

static char *join(const char *dir, const char *name)
{
    size_t dl = strlen(dir), nl = strlen(name);
    char *p;

    if (dl == 1 && dir[0] == '/')
        dl = 0;
    p = malloc(dl + nl + 2);
    if (p != NULL) {
        memcpy(p, dir, dl);
        p[dl] = '/';
        memcpy(p + dl + 1, name, nl + 1);
    }
    return p;
}

/* 1 when p is strictly below dir. */
static int strictly_inside(const char *p, const char *dir, size_t dl)
{
    if (dl == 1 && dir[0] == '/')
        return p[0] == '/' && p[1] != '\0';
    return strncmp(p, dir, dl) == 0 && p[dl] == '/' && p[dl + 1] != '\0';
}

static int nomem(struct walk *w)
{
    snprintf(w->err, w->errlen, "protected files: out of memory");
    return -ENOMEM;
}

/* Takes ownership of path (NULL: out of memory). */
static int add_owned(struct walk *w, char *path, enum sb_prot_kind kind)
{
    if (path == NULL || list_add(w->l, path, kind) < 0)
        return nomem(w);
    return 0;
}

static int add(struct walk *w, const char *dir, const char *name, enum sb_prot_kind kind)
{
    return add_owned(w, join(dir, name), kind);
}

/* A directory stream on fd (taken), or NULL when fd is -1 or it cannot be
 * read as one (fd closed). */
static DIR *dir_stream(int fd)
{
    DIR *d;

    if (fd < 0)
        return NULL;
    d = fdopendir(fd);
    if (d == NULL)
        close(fd);
    return d;
}

/* ------------------------------------------------------------------------ */
/* One name                                                                  */

/* A protected name that is a symbolic link: the link itself (LINK, for the
 * post-run check), and its target, read-only, when it exists strictly
 * inside ROOT. */
static int protect_link(struct walk *w, const char *dir, const char *name)
{
    char *lexical = join(dir, name), *target = NULL;
    struct stat st;

    if (lexical == NULL || add(w, dir, name, SB_PROT_LINK) < 0)
        goto nomem;
    target = realpath(lexical, NULL);
    free(lexical);
    if (target == NULL) {
        if (errno == ENOMEM)
            goto nomem;
        return 0; /* dangling, a loop, or not searchable */
    }
    if (!strictly_inside(target, w->root, w->rootlen) || lstat(target, &st) < 0) {
        free(target);
        return 0;
    }
    if (list_add(w->l, target, S_ISDIR(st.st_mode) ? SB_PROT_DIR : SB_PROT_FILE) < 0)
        goto nomem;
    return 0;
nomem:
    return nomem(w);
}

/* The command owns the directory PATH (relative to dfd): whatever its mode
 * bits say, it can chmod it writable and then make any name there (rt-19:
 * root:OTHER or the user's own, mode 555, `chmod u+w . && echo x >
 * .bashrc`), unless the mount is read-only or the inode immutable, which
 * stop the chmod too. */
static int owner_could_write(int dfd, const char *path)
{
    struct statvfs v;
    int fd, ro;

    if (faccessat(dfd, path, W_OK, 0) == 0)
        return 1;
    if (errno != EACCES)
        return 0; /* EROFS, EPERM (immutable): no chmod either */
    fd = openat(dfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return 1;
    ro = fstatvfs(fd, &v) == 0 && (v.f_flag & ST_RDONLY) != 0;
    close(fd);
    return !ro;
}

/* Could the command make an entry in PATH (relative to dfd)? Asked as the
 * sandbox runs it, without capabilities (bwrap --cap-drop ALL). As root,
 * sluice's own CAP_DAC_OVERRIDE must not count: in bwrap's user namespace
 * (only root's uid and gid mapped) root has its capabilities only over an
 * inode whose owner and group are both mapped (the command could regain
 * them there through a nested user namespace), and elsewhere the mode bits
 * and ACLs decide, for bwrap making a mount point as for the command. A
 * directory of another user that only root's override could write got a
 * placeholder bwrap could not make ("bwrap: Can't mkdir DIR/.bash_profile:
 * Permission denied", nothing run), in a directory where the command
 * cannot create the name either. Asked with CAP_DAC_OVERRIDE and
 * CAP_DAC_READ_SEARCH out of this thread's effective set for the call;
 * where that cannot be done (or glibc lacks faccessat2 and answers yes for
 * root), the answer is yes: a placeholder, as before. */
int sb_could_create(int dfd, const char *path)
{
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct caps[_LINUX_CAPABILITY_U32S_3], off[_LINUX_CAPABILITY_U32S_3];
    struct stat st;
    int ok;

    if (fstatat(dfd, path, &st, 0) < 0)
        return faccessat(dfd, path, W_OK, 0) == 0;
    if (st.st_uid == geteuid())
        return owner_could_write(dfd, path);
    if (geteuid() != 0 || syscall(SYS_capget, &h, caps) < 0)
        return faccessat(dfd, path, W_OK, 0) == 0;
    memcpy(off, caps, sizeof(off));
    off[CAP_TO_INDEX(CAP_DAC_OVERRIDE)].effective &= ~CAP_TO_MASK(CAP_DAC_OVERRIDE);
    off[CAP_TO_INDEX(CAP_DAC_READ_SEARCH)].effective &= ~CAP_TO_MASK(CAP_DAC_READ_SEARCH);
    if (syscall(SYS_capset, &h, off) < 0)
        return faccessat(dfd, path, W_OK, 0) == 0;
    ok = faccessat(dfd, path, W_OK, AT_EACCESS) == 0;
    (void)syscall(SYS_capset, &h, caps); /* within the permitted set: cannot fail */
    return ok;
}

/* Protects DIR/NAME (dfd is DIR): FILE or DIR when it exists; ABSENT when it
 * does not, if absent_ok and the command could create it (sb_could_create). */
static int protect_name(struct walk *w, int dfd, const char *dir, const char *name, int absent_ok)
{
    struct stat st;

    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        if (errno == ENOENT && absent_ok && sb_could_create(dfd, "."))
            return add(w, dir, name, SB_PROT_ABSENT);
        return 0;
    }
    if (S_ISLNK(st.st_mode))
        return protect_link(w, dir, name);
    return add(w, dir, name, S_ISDIR(st.st_mode) ? SB_PROT_DIR : SB_PROT_FILE);
}

/* Opens DIR/NAME as a directory without following a symlink, or -1. */
static int open_subdir(int dfd, const char *name)
{
    return openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/* Appends to OUT every entry of dfd whose name is one of NAMES[0..N) in
 * another case (".BASHRC", ".Git"): git, shells and editors on a
 * case-insensitive filesystem read it under the protected name, and the
 * reference matches these names case-insensitively (issue 21). The exact
 * spelling is not listed: callers look it up directly. ASCII case only
 * (sluice never calls setlocale). */
static int case_variants(struct walk *w, int dfd, const char *const *names, size_t n,
                         struct sb_strv *out)
{
    DIR *d;
    struct dirent *e;
    /* a descriptor of its own: a dup would share (and leave at the end)
     * the offset the walk's own readdir of dfd starts from */
    int rc = 0;

    d = dir_stream(openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (d == NULL)
        return 0;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        for (size_t i = 0; i < n; i++) {
            if (strcasecmp(e->d_name, names[i]) == 0 && strcmp(e->d_name, names[i]) != 0) {
                rc = sb_strv_push(out, e->d_name);
                break;
            }
        }
    }
    closedir(d);
    return rc < 0 ? nomem(w) : 0;
}

/* Protects DIR/NAME and each existing entry of dfd that is NAME in another
 * case, as protect_name does (ABSENT only for the exact name). */
static int protect_any_case(struct walk *w, int dfd, const char *dir, const char *name,
                            int absent_ok)
{
    struct sb_strv v = {0};
    int rc = protect_name(w, dfd, dir, name, absent_ok);

    if (rc == 0)
        rc = case_variants(w, dfd, &name, 1, &v);
    for (size_t i = 0; rc == 0 && i < v.n; i++)
        rc = protect_name(w, dfd, dir, v.v[i], 0);
    sb_strv_free(&v);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Git directories                                                           */

static int git_dir(struct walk *w, int gfd, const char *g);

static int git_config(struct walk *w, int gfd, const char *g)
{
    int rc = 0;

    if (!w->allow_git_config) {
        rc = protect_any_case(w, gfd, g, "config", 1);
        if (rc == 0)
            rc = protect_any_case(w, gfd, g, "config.worktree", 1);
    }
    return rc;
}

typedef int (*subdir_fn)(struct walk *w, int sfd, const char *sub, unsigned level);
typedef int (*skip_fn)(const struct walk *w, const struct dirent *e, unsigned level);

/* Calls fn(w, sfd, sub, level) for each subdirectory of dfd (not following
 * symlinks) that skip (if any) lets through, sub being DIR/NAME; stops at
 * the first error. */
static int each_subdir(struct walk *w, int dfd, const char *dir, unsigned level, skip_fn skip,
                       subdir_fn fn)
{
    DIR *d = dir_stream(dup(dfd));
    struct dirent *e;
    int rc = 0;

    if (d == NULL)
        return 0;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        char *sub;
        int sfd;

        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
            (skip != NULL && skip(w, e, level)))
            continue;
        sfd = open_subdir(dfd, e->d_name);
        if (sfd < 0)
            continue;
        sub = join(dir, e->d_name);
        if (sub == NULL) {
            close(sfd);
            rc = nomem(w);
            break;
        }
        rc = fn(w, sfd, sub, level);
        free(sub);
        close(sfd);
    }
    closedir(d);
    return rc;
}

/* Calls fn for each subdirectory of G/NAME (gfd is G), when there is one. */
static int each_subdir_of(struct walk *w, int gfd, const char *g, const char *name, subdir_fn fn)
{
    int rc, sfd = open_subdir(gfd, name);
    char *sub;

    if (sfd < 0)
        return 0;
    sub = join(g, name);
    rc = sub == NULL ? nomem(w) : each_subdir(w, sfd, sub, 0, NULL, fn);
    free(sub);
    close(sfd);
    return rc;
}

static int git_dir(struct walk *w, int gfd, const char *g);

/* G/modules/...: git directories of submodules (a directory with a HEAD),
 * under names that may hold '/'. */
static int git_module(struct walk *w, int sfd, const char *sub, unsigned level)
{
    struct stat st;

    if (fstatat(sfd, "HEAD", &st, AT_SYMLINK_NOFOLLOW) == 0)
        return git_dir(w, sfd, sub);
    if (level + 1 < MODULES_DEPTH_MAX)
        return each_subdir(w, sfd, sub, level + 1, NULL, git_module);
    return 0;
}

/* G/worktrees/W: the administrative directories of linked worktrees. */
static int git_worktree(struct walk *w, int sfd, const char *sub, unsigned level)
{
    int rc = add_owned(w, strdup(sub), SB_PROT_PIN);

    (void)level;
    if (rc < 0)
        return rc;
    rc = protect_any_case(w, sfd, sub, "commondir", 0);
    if (rc == 0 && !w->allow_git_config)
        rc = protect_any_case(w, sfd, sub, "config.worktree", 1);
    return rc;
}

/* G is an existing git directory (not a symlink), open as gfd. */
static int git_dir(struct walk *w, int gfd, const char *g)
{
    int rc = add_owned(w, strdup(g), SB_PROT_PIN);

    if (rc < 0)
        return rc;
    rc = protect_any_case(w, gfd, g, "hooks", 1);
    if (rc == 0)
        rc = git_config(w, gfd, g);
    if (rc == 0)
        rc = protect_any_case(w, gfd, g, "commondir", 0);
    if (rc == 0)
        rc = each_subdir_of(w, gfd, g, "modules", git_module);
    if (rc == 0)
        rc = each_subdir_of(w, gfd, g, "worktrees", git_worktree);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* The walk                                                                  */

/* NAME is a protected name, in any case: not walked into. */
static int is_prot_name(const char *name)
{
    for (size_t i = 0; i < COUNT(prot_names); i++)
        if (strcasecmp(prot_names[i], name) == 0)
            return 1;
    return 0;
}

/* DIR/NAME/commands and DIR/NAME/agents, NAME being .claude (see the top)
 * or, existing, .claude in another case (nothing is made inside that one). */
static int protect_claude(struct walk *w, int dfd, const char *dir, const char *name, int at_root)
{
    struct stat st;
    char *c;
    int rc = 0, cfd;

    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        if (errno != ENOENT || !at_root || !sb_could_create(dfd, "."))
            return 0;
        c = join(dir, name);
        if (c == NULL || list_add(w->l, c, SB_PROT_MKDIR) < 0)
            goto nomem;
        for (size_t i = 0; i < COUNT(claude_names) && rc == 0; i++)
            rc = add(w, c, claude_names[i], SB_PROT_ABSENT);
        return rc;
    }
    if (S_ISLNK(st.st_mode))
        return protect_link(w, dir, name);
    if (!S_ISDIR(st.st_mode))
        return add(w, dir, name, SB_PROT_FILE);
    cfd = open_subdir(dfd, name);
    c = join(dir, name);
    if (c == NULL) {
        if (cfd >= 0)
            close(cfd);
        goto nomem;
    }
    if (cfd < 0) { /* cannot look inside: keep all of it read-only */
        if (list_add(w->l, c, SB_PROT_DIR) < 0)
            goto nomem;
        return 0;
    }
    for (size_t i = 0; i < COUNT(claude_names) && rc == 0; i++)
        rc = protect_any_case(w, cfd, c, claude_names[i], at_root);
    free(c);
    close(cfd);
    return rc;
nomem:
    return nomem(w);
}

/* DIR/NAME, NAME being .git or (existing) .git in another case. */
static int protect_git(struct walk *w, int dfd, const char *dir, const char *name, int at_root)
{
    struct stat st;
    int rc = 0;

    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        if (errno == ENOENT && at_root && sb_could_create(dfd, "."))
            rc = add(w, dir, name, SB_PROT_ABSENT);
    } else if (S_ISDIR(st.st_mode)) {
        char *g = join(dir, name);
        int gfd = open_subdir(dfd, name);
        if (g == NULL) {
            rc = nomem(w);
        } else if (gfd < 0) {
            /* cannot look inside: keep all of it read-only */
            rc = add_owned(w, g, SB_PROT_DIR);
            g = NULL;
        } else {
            rc = git_dir(w, gfd, g);
        }
        if (gfd >= 0)
            close(gfd);
        free(g);
    } else if (S_ISLNK(st.st_mode)) {
        rc = protect_link(w, dir, name);
    } else {
        rc = add(w, dir, name, SB_PROT_FILE);
    }
    return rc;
}

static int walk_dir(struct walk *w, int dfd, const char *dir, unsigned level);

/* Not walked into: node_modules, .git and the protected names (any case),
 * what is known not to be a directory, and, when ROOT is /, the sandbox's
 * own /dev and /proc and the read-only /sys. */
static int walk_skips(const struct walk *w, const struct dirent *e, unsigned level)
{
    const char *n = e->d_name;

    if (strcmp(n, "node_modules") == 0 || strcasecmp(n, ".git") == 0 || is_prot_name(n))
        return 1;
#ifdef DT_DIR
    if (e->d_type != DT_DIR && e->d_type != DT_UNKNOWN)
        return 1;
#endif
    return level == 0 && w->rootlen == 1 &&
           (strcmp(n, "proc") == 0 || strcmp(n, "sys") == 0 || strcmp(n, "dev") == 0);
}

static int walk_child(struct walk *w, int sfd, const char *sub, unsigned level)
{
    return walk_dir(w, sfd, sub, level + 1);
}

/* The protected names in DIR (open as dfd), exact and in another case. */
static int protect_dir(struct walk *w, int dfd, const char *dir, int at_root)
{
    static const char *const special[] = {".git", ".claude"};
    struct sb_strv var = {0};
    int rc = 0;

    for (size_t i = 0; i < COUNT(prot_names) && rc == 0; i++)
        rc = protect_name(w, dfd, dir, prot_names[i], at_root);
    if (rc == 0)
        rc = protect_claude(w, dfd, dir, ".claude", at_root);
    if (rc == 0)
        rc = protect_git(w, dfd, dir, ".git", at_root);
    /* the same names in another case, where they exist (issue 21) */
    if (rc == 0)
        rc = case_variants(w, dfd, prot_names, COUNT(prot_names), &var);
    if (rc == 0)
        rc = case_variants(w, dfd, special, COUNT(special), &var);
    for (size_t i = 0; rc == 0 && i < var.n; i++) {
        if (strcasecmp(var.v[i], ".git") == 0)
            rc = protect_git(w, dfd, dir, var.v[i], 0);
        else if (strcasecmp(var.v[i], ".claude") == 0)
            rc = protect_claude(w, dfd, dir, var.v[i], 0);
        else
            rc = protect_name(w, dfd, dir, var.v[i], 0);
    }
    sb_strv_free(&var);
    return rc;
}

/* Scans DIR (open as dfd) at LEVEL below ROOT (ROOT is 0), then its
 * subdirectories down to the depth. */
static int walk_dir(struct walk *w, int dfd, const char *dir, unsigned level)
{
    int rc = protect_dir(w, dfd, dir, level == 0);

    if (rc < 0 || level + 1 >= w->depth)
        return rc;
    return each_subdir(w, dfd, dir, level, walk_skips, walk_child);
}

/* ------------------------------------------------------------------------ */
/* Ordering                                                                  */

static int is_ro(enum sb_prot_kind k)
{
    return k == SB_PROT_FILE || k == SB_PROT_DIR;
}

/* Same path twice: the read-only kind wins over a pin. */
static int kind_rank(enum sb_prot_kind k)
{
    return k == SB_PROT_PIN ? 0 : 1;
}

static int cmp_prot(const void *pa, const void *pb)
{
    const struct sb_prot *a = pa, *b = pb;
    int c = sb_path_cmp(a->path, b->path);

    if (c != 0)
        return c;
    return kind_rank(a->kind) - kind_rank(b->kind);
}

/* Adds a PIN for every directory strictly between ROOT and each entry. */
static int add_pins(struct walk *w)
{
    size_t n = w->l->n;

    for (size_t i = 0; i < n; i++) {
        const char *p = w->l->v[i].path;
        for (const char *s = p + w->rootlen + 1; (s = strchr(s, '/')) != NULL; s++) {
            char *anc = strndup(p, (size_t)(s - p));
            if (add_owned(w, anc, SB_PROT_PIN) < 0)
                return -ENOMEM;
        }
    }
    return 0;
}

/* Sorts, removes duplicates (keeping the read-only kind) and entries under a
 * read-only FILE/DIR entry. */
static void tidy(struct sb_prot_list *l)
{
    size_t o = 0;
    const char *ro = NULL;
    size_t rol = 0;

    if (l->n == 0)
        return;
    qsort(l->v, l->n, sizeof(*l->v), cmp_prot);
    for (size_t i = 0; i < l->n; i++) {
        struct sb_prot *e = &l->v[i];
        int drop = 0;

        if (o > 0 && strcmp(l->v[o - 1].path, e->path) == 0) {
            /* sorted: the later one is the read-only kind if any */
            if (kind_rank(e->kind) > kind_rank(l->v[o - 1].kind)) {
                l->v[o - 1].kind = e->kind;
                if (is_ro(e->kind)) {
                    ro = l->v[o - 1].path;
                    rol = strlen(ro);
                }
            }
            drop = 1;
        } else if (ro != NULL && strictly_inside(e->path, ro, rol)) {
            drop = 1;
        }
        if (drop) {
            free(e->path);
            continue;
        }
        l->v[o++] = *e;
        if (is_ro(e->kind)) {
            ro = l->v[o - 1].path;
            rol = strlen(ro);
        }
    }
    l->n = o;
}

int sb_protect_scan(const char *root, unsigned depth, int allow_git_config,
                    struct sb_prot_list *out, char *err, size_t errlen)
{
    struct sb_prot_list found = {0};
    struct walk w;
    char *real = NULL;
    int fd = -1, rc;

    if (root == NULL || root[0] != '/') {
        snprintf(err, errlen, "protected files: '%s' is not an absolute path",
                 root != NULL ? root : "(null)");
        return -EINVAL;
    }
    real = realpath(root, NULL);
    if (real == NULL) {
        rc = -errno;
        snprintf(err, errlen, "protected files: cannot resolve '%s': %s", root, strerror(errno));
        return rc;
    }
    fd = open(real, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        rc = -errno;
        snprintf(err, errlen, "protected files: cannot open '%s': %s", real, strerror(errno));
        goto out;
    }
    memset(&w, 0, sizeof(w));
    w.l = &found;
    w.root = real;
    w.rootlen = strlen(real);
    w.allow_git_config = allow_git_config;
    w.depth = depth == 0 ? 1 : depth;
    w.err = err;
    w.errlen = errlen;
    rc = walk_dir(&w, fd, real, 0);
    if (rc == 0)
        rc = add_pins(&w);
    if (rc < 0)
        goto out;
    tidy(&found);

    /* append to out, all or nothing */
    if (out->n + found.n > out->cap) {
        size_t cap = out->n + found.n;
        struct sb_prot *v = realloc(out->v, cap * sizeof(*v));
        if (v == NULL) {
            snprintf(err, errlen, "protected files: out of memory");
            rc = -ENOMEM;
            goto out;
        }
        out->v = v;
        out->cap = cap;
    }
    if (found.n > 0)
        memcpy(out->v + out->n, found.v, found.n * sizeof(*found.v));
    out->n += found.n;
    found.n = 0;
out:
    if (fd >= 0)
        close(fd);
    free(real);
    sb_prot_list_free(&found);
    return rc;
}
