/* tests/sandbox/test_protect.c - the protected-file scan (sandbox/protect.c),
 * on real directory trees under /tmp. */
#define _XOPEN_SOURCE 700 /* realpath */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "sandbox/sandbox.h"

/* ------------------------------------------------------------------------ */
/* Trees                                                                     */

struct tree {
    char root[PATH_MAX];
};

static void mkpath(const struct tree *t, const char *rel, int dir)
{
    char p[PATH_MAX * 2];

    /* parents */
    for (const char *s = rel; (s = strchr(s, '/')) != NULL; s++) {
        snprintf(p, sizeof(p), "%s/%.*s", t->root, (int)(s - rel), rel);
        if (mkdir(p, 0755) < 0 && errno != EEXIST)
            fail_msg("mkdir %s: %s", p, strerror(errno));
    }
    snprintf(p, sizeof(p), "%s/%s", t->root, rel);
    if (dir) {
        if (mkdir(p, 0755) < 0 && errno != EEXIST)
            fail_msg("mkdir %s: %s", p, strerror(errno));
    } else {
        FILE *f = fopen(p, "w");
        assert_non_null(f);
        fputs("x\n", f);
        fclose(f);
    }
}

static void mkfile(const struct tree *t, const char *rel)
{
    mkpath(t, rel, 0);
}

static void mkdir_(const struct tree *t, const char *rel)
{
    mkpath(t, rel, 1);
}

static void mklink(const struct tree *t, const char *rel, const char *target)
{
    char p[PATH_MAX * 2];

    snprintf(p, sizeof(p), "%s/%s", t->root, rel);
    assert_int_equal(symlink(target, p), 0);
}

static int setup_tree(void **state)
{
    struct tree *t = calloc(1, sizeof(*t));
    char tmpl[] = "/tmp/sluice-test-protect-XXXXXX";

    if (t == NULL || mkdtemp(tmpl) == NULL)
        return -1;
    if (realpath(tmpl, t->root) == NULL)
        return -1;
    *state = t;
    return 0;
}

static int teardown_tree(void **state)
{
    struct tree *t = *state;
    char cmd[PATH_MAX + 32];
    int rc;

    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", t->root);
    rc = system(cmd);
    free(t);
    return rc == 0 ? 0 : -1;
}

/* ------------------------------------------------------------------------ */
/* Results as text: one "KIND path" line each, paths relative to the root    */

static const char *kind_name(enum sb_prot_kind k)
{
    switch (k) {
    case SB_PROT_FILE:
        return "FILE";
    case SB_PROT_DIR:
        return "DIR";
    case SB_PROT_ABSENT:
        return "ABSENT";
    case SB_PROT_PIN:
        return "PIN";
    case SB_PROT_LINK:
        return "LINK";
    case SB_PROT_MKDIR:
        return "MKDIR";
    }
    return "?";
}

static char *render(const struct tree *t, const struct sb_prot_list *l, size_t from)
{
    size_t rl = strlen(t->root), size = 1, o = 0;
    char *buf;

    for (size_t i = from; i < l->n; i++)
        size += strlen(l->v[i].path) + 16;
    buf = malloc(size);
    assert_non_null(buf);
    buf[0] = '\0';
    for (size_t i = from; i < l->n; i++) {
        const char *p = l->v[i].path;
        if (strncmp(p, t->root, rl) == 0 && p[rl] == '/')
            p += rl + 1;
        o += (size_t)snprintf(buf + o, size - o, "%s %s\n", kind_name(l->v[i].kind), p);
    }
    return buf;
}

/* No entry comes after one of its descendants; no path twice; all absolute. */
static void assert_parents_first(const struct sb_prot_list *l)
{
    for (size_t i = 0; i < l->n; i++) {
        assert_int_equal(l->v[i].path[0], '/');
        for (size_t j = i + 1; j < l->n; j++) {
            const char *a = l->v[i].path, *b = l->v[j].path;
            size_t bl = strlen(b);
            assert_string_not_equal(a, b);
            if (strncmp(a, b, bl) == 0 && a[bl] == '/')
                fail_msg("'%s' comes before its parent '%s'", a, b);
        }
    }
}

static void scan_expect(const struct tree *t, unsigned depth, int allow_git_config,
                        const char *want)
{
    struct sb_prot_list l = {0};
    char err[512] = "";
    char *got;
    int rc;

    rc = sb_protect_scan(t->root, depth, allow_git_config, &l, err, sizeof(err));
    if (rc != 0)
        fail_msg("scan: %d %s", rc, err);
    assert_parents_first(&l);
    got = render(t, &l, 0);
    if (strcmp(got, want) != 0)
        print_error("depth %u\n--- got:\n%s--- want:\n%s", depth, got, want);
    assert_string_equal(got, want);
    free(got);
    sb_prot_list_free(&l);
}

/* Every protected name is missing at the root. */
#define ROOT_ABSENT_BEFORE_GIT "ABSENT .bash_profile\nABSENT .bashrc\nMKDIR .claude\nABSENT .claude/agents\nABSENT .claude/commands\n"
#define ROOT_ABSENT_AFTER_GIT                                                                      \
    "ABSENT .gitconfig\nABSENT .gitmodules\nABSENT .idea\nABSENT .mcp.json\nABSENT .profile\n"     \
    "ABSENT .ripgreprc\nABSENT .vscode\nABSENT .zprofile\nABSENT .zshrc\n"

/* ------------------------------------------------------------------------ */
/* Tests                                                                     */

static void test_empty_root(void **state)
{
    const struct tree *t = *state;

    /* nothing exists: every name is blocked at the root, .git included */
    scan_expect(t, 3, 0, ROOT_ABSENT_BEFORE_GIT "ABSENT .git\n" ROOT_ABSENT_AFTER_GIT);
    scan_expect(t, 1, 1, ROOT_ABSENT_BEFORE_GIT "ABSENT .git\n" ROOT_ABSENT_AFTER_GIT);
}

static void test_existing_and_git(void **state)
{
    const struct tree *t = *state;

    mkfile(t, ".bashrc");
    mkfile(t, ".mcp.json");
    mkdir_(t, ".vscode");
    mkfile(t, ".vscode/settings.json");
    mkdir_(t, ".idea");
    mkfile(t, ".git/HEAD");
    mkfile(t, ".git/config");
    mkfile(t, ".git/hooks/pre-commit");
    mkfile(t, ".git/objects/ab/cdef");
    scan_expect(t, 3, 0,
                "ABSENT .bash_profile\n"
                "FILE .bashrc\nMKDIR .claude\nABSENT .claude/agents\nABSENT .claude/commands\n"
                "PIN .git\n"
                "FILE .git/config\n"
                "ABSENT .git/config.worktree\n"
                "DIR .git/hooks\n"
                "ABSENT .gitconfig\n"
                "ABSENT .gitmodules\n"
                "DIR .idea\n"
                "FILE .mcp.json\n"
                "ABSENT .profile\n"
                "ABSENT .ripgreprc\n"
                "DIR .vscode\n"
                "ABSENT .zprofile\n"
                "ABSENT .zshrc\n");
}

/* issue 21: protected names in any case, where they exist (the reference
 * matches them case-insensitively; on a case-insensitive filesystem git
 * and the shells read them under the protected name). Missing ones are
 * blocked by their exact name only. */
static void test_case_variants(void **state)
{
    const struct tree *t = *state;

    mkfile(t, ".BASHRC");
    mkfile(t, ".Zshrc");
    mkdir_(t, ".VSCode");
    mkfile(t, ".VSCode/tasks.json");
    mkfile(t, ".GIT/HEAD");
    mkfile(t, ".GIT/hooks/pre-commit");
    mkfile(t, ".GIT/Config");
    mkfile(t, ".git/HEAD");
    mkfile(t, ".git/HOOKS/post-checkout");
    mkfile(t, ".Claude/Commands/x.md");
    mkfile(t, "sub/.Gitconfig");
    mkfile(t, "sub/.Git/HEAD");
    scan_expect(t, 2, 0,
                "FILE .BASHRC\n"
                "PIN .Claude\n"
                "DIR .Claude/Commands\n"
                "PIN .GIT\n" /* a git directory in another case: pinned, hooks and config */
                "FILE .GIT/Config\n"
                "ABSENT .GIT/config\n"
                "ABSENT .GIT/config.worktree\n"
                "DIR .GIT/hooks\n"
                "DIR .VSCode\n"
                "FILE .Zshrc\n"
                "ABSENT .bash_profile\n"
                "ABSENT .bashrc\n"
                "MKDIR .claude\n"
                "ABSENT .claude/agents\n"
                "ABSENT .claude/commands\n"
                "PIN .git\n"
                "DIR .git/HOOKS\n"
                "ABSENT .git/config\n"
                "ABSENT .git/config.worktree\n"
                "ABSENT .git/hooks\n"
                "ABSENT .gitconfig\n"
                "ABSENT .gitmodules\n"
                "ABSENT .idea\n"
                "ABSENT .mcp.json\n"
                "ABSENT .profile\n"
                "ABSENT .ripgreprc\n"
                "ABSENT .vscode\n"
                "ABSENT .zprofile\n"
                "ABSENT .zshrc\n"
                "PIN sub\n"
                "PIN sub/.Git\n"
                "ABSENT sub/.Git/config\n"
                "ABSENT sub/.Git/config.worktree\n"
                "ABSENT sub/.Git/hooks\n"
                "FILE sub/.Gitconfig\n");
}

static void test_git_without_hooks(void **state)
{
    const struct tree *t = *state;

    mkfile(t, ".git/HEAD");
    mkfile(t, ".git/config");
    mkfile(t, ".git/commondir");
    /* hooks missing: its name is blocked; the pin on .git comes first */
    scan_expect(t, 1, 0,
                ROOT_ABSENT_BEFORE_GIT "PIN .git\n"
                                       "FILE .git/commondir\n"
                                       "FILE .git/config\n"
                                       "ABSENT .git/config.worktree\n"
                                       "ABSENT .git/hooks\n" ROOT_ABSENT_AFTER_GIT);
    /* allowGitConfig: config is the command's */
    scan_expect(t, 1, 1,
                ROOT_ABSENT_BEFORE_GIT "PIN .git\n"
                                       "FILE .git/commondir\n"
                                       "ABSENT .git/hooks\n" ROOT_ABSENT_AFTER_GIT);
}

static void test_git_file(void **state)
{
    const struct tree *t = *state;

    /* a worktree or submodule checkout: .git is a "gitdir:" pointer */
    mkfile(t, ".git");
    scan_expect(t, 1, 0, ROOT_ABSENT_BEFORE_GIT "FILE .git\n" ROOT_ABSENT_AFTER_GIT);
}

static void test_depth(void **state)
{
    const struct tree *t = *state;

    mkfile(t, ".bashrc");
    mkfile(t, ".gitconfig");
    mkfile(t, ".git");
    mkfile(t, "a/.bashrc");
    mkfile(t, "a/b/.bashrc");
    mkfile(t, "a/b/.git/HEAD");
    mkdir_(t, "a/b/.git/hooks");
    mkfile(t, "a/b/c/.bashrc");
    mkfile(t, "a/b/c/d/.zshrc");
    mkfile(t, "x/y/plain.txt");

#define TOP "ABSENT .bash_profile\nFILE .bashrc\nMKDIR .claude\nABSENT .claude/agents\nABSENT .claude/commands\nFILE .git\nFILE .gitconfig\n"
#define REST                                                                                       \
    "ABSENT .gitmodules\nABSENT .idea\nABSENT .mcp.json\nABSENT .profile\nABSENT .ripgreprc\n"     \
    "ABSENT .vscode\nABSENT .zprofile\nABSENT .zshrc\n"
    scan_expect(t, 1, 0, TOP REST);
    scan_expect(t, 2, 0, TOP REST "PIN a\nFILE a/.bashrc\n");
    /* deeper than the root only what exists is protected; a nested repository's
     * missing config is blocked all the same */
    scan_expect(t, 3, 0,
                TOP REST "PIN a\nFILE a/.bashrc\nPIN a/b\nFILE a/b/.bashrc\nPIN a/b/.git\n"
                         "ABSENT a/b/.git/config\nABSENT a/b/.git/config.worktree\n"
                         "DIR a/b/.git/hooks\n");
    scan_expect(t, 4, 0,
                TOP REST "PIN a\nFILE a/.bashrc\nPIN a/b\nFILE a/b/.bashrc\nPIN a/b/.git\n"
                         "ABSENT a/b/.git/config\nABSENT a/b/.git/config.worktree\n"
                         "DIR a/b/.git/hooks\nPIN a/b/c\nFILE a/b/c/.bashrc\n");
    scan_expect(t, 10, 0,
                TOP REST "PIN a\nFILE a/.bashrc\nPIN a/b\nFILE a/b/.bashrc\nPIN a/b/.git\n"
                         "ABSENT a/b/.git/config\nABSENT a/b/.git/config.worktree\n"
                         "DIR a/b/.git/hooks\nPIN a/b/c\nFILE a/b/c/.bashrc\nPIN a/b/c/d\n"
                         "FILE a/b/c/d/.zshrc\n");
    /* depth 0 is read as 1: the root is always scanned */
    scan_expect(t, 0, 0, TOP REST);
#undef TOP
#undef REST
}

static void test_node_modules_skipped(void **state)
{
    const struct tree *t = *state;

    mkfile(t, ".git");
    mkfile(t, "node_modules/pkg/.bashrc");
    mkfile(t, "node_modules/.git/HEAD");
    mkfile(t, "node_modules/pkg/.vscode/x");
    mkfile(t, "src/node_modules/.gitconfig");
    mkfile(t, "src/.npmrc");
    scan_expect(t, 5, 0, ROOT_ABSENT_BEFORE_GIT "FILE .git\n" ROOT_ABSENT_AFTER_GIT);
}

static void test_symlinks(void **state)
{
    const struct tree *t = *state;
    char outside[PATH_MAX + 32], p[PATH_MAX + 64];

    /* a tree outside the root, reached only through symlinks */
    snprintf(outside, sizeof(outside), "%s-outside", t->root);
    assert_int_equal(mkdir(outside, 0755), 0);
    snprintf(p, sizeof(p), "%s/.bashrc", outside);
    assert_int_equal(close(open(p, O_CREAT | O_WRONLY, 0644)), 0);
    snprintf(p, sizeof(p), "%s/dir", outside);
    assert_int_equal(mkdir(p, 0755), 0);
    snprintf(p, sizeof(p), "%s/dir/.zshrc", outside);
    assert_int_equal(close(open(p, O_CREAT | O_WRONLY, 0644)), 0);

    mkfile(t, ".git");
    /* a protected name linking outside: nothing is bound (its target is
     * read-only unless it lies in another writable root) */
    snprintf(p, sizeof(p), "%s/.bashrc", outside);
    mklink(t, ".bashrc", p);
    /* a protected name linking inside: its target is protected, with pins */
    mkfile(t, "dotfiles/zsh/zshrc");
    mklink(t, ".zshrc", "dotfiles/zsh/zshrc");
    mkdir_(t, "conf/vscode");
    mklink(t, ".vscode", "conf/vscode");
    /* dangling: nothing */
    mklink(t, ".profile", "nowhere/profile");
    /* a symlinked directory is not walked */
    snprintf(p, sizeof(p), "%s/dir", outside);
    mklink(t, "linked", p);
    mklink(t, "loop", "loop");

    /* every link is listed (LINK) for the post-run check: no mount covers it */
    scan_expect(t, 4, 0,
                "ABSENT .bash_profile\n"
                "LINK .bashrc\nMKDIR .claude\nABSENT .claude/agents\nABSENT .claude/commands\n"
                "FILE .git\n"
                "ABSENT .gitconfig\n"
                "ABSENT .gitmodules\n"
                "ABSENT .idea\n"
                "ABSENT .mcp.json\n"
                "LINK .profile\n"
                "ABSENT .ripgreprc\n"
                "LINK .vscode\n"
                "ABSENT .zprofile\n"
                "LINK .zshrc\n"
                "PIN conf\n"
                "DIR conf/vscode\n"
                "PIN dotfiles\n"
                "PIN dotfiles/zsh\n"
                "FILE dotfiles/zsh/zshrc\n");

    snprintf(p, sizeof(p), "rm -rf '%s'", outside);
    assert_int_equal(system(p), 0);
}

static void test_git_symlink_and_ro_cover(void **state)
{
    const struct tree *t = *state;

    /* .git linking to a directory inside the root: all of it read-only, and
     * what the walk finds inside a read-only entry is dropped */
    mkfile(t, "real-git/HEAD");
    mkdir_(t, "real-git/hooks");
    mklink(t, ".git", "real-git");
    /* .idea linking to a project holding a repository */
    mkfile(t, "proj/.git/HEAD");
    mkfile(t, "proj/.bashrc");
    mklink(t, ".idea", "proj");
    scan_expect(t, 3, 0,
                "ABSENT .bash_profile\n"
                "ABSENT .bashrc\nMKDIR .claude\nABSENT .claude/agents\nABSENT .claude/commands\n"
                "LINK .git\n"
                "ABSENT .gitconfig\n"
                "ABSENT .gitmodules\n"
                "LINK .idea\n"
                "ABSENT .mcp.json\n"
                "ABSENT .profile\n"
                "ABSENT .ripgreprc\n"
                "ABSENT .vscode\n"
                "ABSENT .zprofile\n"
                "ABSENT .zshrc\n"
                "DIR proj\n"
                "DIR real-git\n");
}

static void test_submodules_and_worktrees(void **state)
{
    const struct tree *t = *state;

    mkfile(t, ".git/HEAD");
    mkfile(t, ".git/config");
    mkdir_(t, ".git/hooks");
    mkfile(t, ".git/modules/libs/foo/HEAD");
    mkfile(t, ".git/modules/libs/foo/config");
    mkdir_(t, ".git/modules/libs/foo/hooks");
    mkfile(t, ".git/modules/libs/foo/modules/nested/HEAD");
    mkfile(t, ".git/modules/bar/HEAD");
    mkfile(t, ".git/worktrees/wt/commondir");
    mkfile(t, ".git/worktrees/wt/HEAD");
    mkfile(t, "libs/foo/.git");
    scan_expect(t, 3, 0,
                ROOT_ABSENT_BEFORE_GIT
                "PIN .git\n"
                "FILE .git/config\n"
                "ABSENT .git/config.worktree\n"
                "DIR .git/hooks\n"
                "PIN .git/modules\n"
                "PIN .git/modules/bar\n"
                "ABSENT .git/modules/bar/config\n"
                "ABSENT .git/modules/bar/config.worktree\n"
                "ABSENT .git/modules/bar/hooks\n"
                "PIN .git/modules/libs\n"
                "PIN .git/modules/libs/foo\n"
                "FILE .git/modules/libs/foo/config\n"
                "ABSENT .git/modules/libs/foo/config.worktree\n"
                "DIR .git/modules/libs/foo/hooks\n"
                "PIN .git/modules/libs/foo/modules\n"
                "PIN .git/modules/libs/foo/modules/nested\n"
                "ABSENT .git/modules/libs/foo/modules/nested/config\n"
                "ABSENT .git/modules/libs/foo/modules/nested/config.worktree\n"
                "ABSENT .git/modules/libs/foo/modules/nested/hooks\n"
                "PIN .git/worktrees\n"
                "PIN .git/worktrees/wt\n"
                "FILE .git/worktrees/wt/commondir\n"
                "ABSENT .git/worktrees/wt/config.worktree\n" ROOT_ABSENT_AFTER_GIT "PIN libs\n"
                "PIN libs/foo\n"
                "FILE libs/foo/.git\n");
}

static void test_appends_and_errors(void **state)
{
    const struct tree *t = *state;
    struct sb_prot_list l = {0};
    char err[512], p[PATH_MAX + 32];
    char *got;

    mkfile(t, ".git");
    l.v = calloc(1, sizeof(*l.v));
    assert_non_null(l.v);
    l.cap = 1;
    l.v[0].path = strdup("/earlier");
    l.v[0].kind = SB_PROT_DIR;
    l.n = 1;
    /* a root given with a trailing slash and a dot is resolved */
    snprintf(p, sizeof(p), "%s/./", t->root);
    assert_int_equal(sb_protect_scan(p, 2, 0, &l, err, sizeof(err)), 0);
    assert_string_equal(l.v[0].path, "/earlier");
    got = render(t, &l, 1);
    assert_string_equal(got, ROOT_ABSENT_BEFORE_GIT "FILE .git\n" ROOT_ABSENT_AFTER_GIT);
    free(got);

    /* errors leave the list as it was */
    assert_int_equal(sb_protect_scan("relative/dir", 3, 0, &l, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "absolute"));
    snprintf(p, sizeof(p), "%s/missing", t->root);
    assert_int_equal(sb_protect_scan(p, 3, 0, &l, err, sizeof(err)), -ENOENT);
    assert_non_null(strstr(err, "missing"));
    snprintf(p, sizeof(p), "%s/.git", t->root);
    assert_int_equal(sb_protect_scan(p, 3, 0, &l, err, sizeof(err)), -ENOTDIR);
    assert_int_equal(l.n, 16);
    sb_prot_list_free(&l);
    assert_null(l.v);
    sb_prot_list_free(&l); /* twice is fine */
}

/* .claude/commands and .claude/agents (srt 0.0.83's mandatory denies): an
 * existing .claude is pinned, its commands/agents protected (ABSENT at the
 * root when missing); a missing .claude at the root is MKDIR; deeper, only
 * what exists. */
static void test_claude(void **state)
{
    const struct tree *t = *state;

    mkfile(t, ".git");
    mkdir_(t, ".claude/commands");
    mkfile(t, ".claude/settings.local.json");
    mkdir_(t, "sub/.claude/agents");
    mkdir_(t, "other/.claude");
    scan_expect(t, 2, 0,
                "ABSENT .bash_profile\nABSENT .bashrc\nPIN .claude\nABSENT .claude/agents\n"
                "DIR .claude/commands\nFILE .git\n" ROOT_ABSENT_AFTER_GIT
                "PIN sub\nPIN sub/.claude\nDIR sub/.claude/agents\n");
}

static void test_wide_tree(void **state)
{
    const struct tree *t = *state;
    struct sb_prot_list l = {0};
    char err[512], rel[64];

    /* 300 nested repositories two levels down */
    mkfile(t, ".git");
    for (int i = 0; i < 300; i++) {
        snprintf(rel, sizeof(rel), "vendor/r%03d/.git/HEAD", i);
        mkfile(t, rel);
        snprintf(rel, sizeof(rel), "vendor/r%03d/.git/hooks", i);
        mkdir_(t, rel);
    }
    assert_int_equal(sb_protect_scan(t->root, 3, 0, &l, err, sizeof(err)), 0);
    assert_parents_first(&l);
    /* 12 at the root and 3 for .claude (MKDIR, commands, agents), the vendor
     * pin, and for each repository: pins on it and its .git, hooks, config
     * and config.worktree */
    assert_int_equal(l.n, 12 + 3 + 1 + 300 * 5);
    sb_prot_list_free(&l);
}

/* The post-run check (verify.c) of protected names that are links: no mount
 * covers a link, so a replaced one is put back after the run and what
 * replaced it moved aside; a target created through a dangling link too. */
static void read_back(const struct tree *t, const char *rel, char *buf, size_t len)
{
    char p[PATH_MAX * 2];
    FILE *f;
    size_t n;

    snprintf(p, sizeof(p), "%s/%s", t->root, rel);
    f = fopen(p, "r");
    if (f == NULL)
        fail_msg("open %s: %s", p, strerror(errno));
    n = fread(buf, 1, len - 1, f);
    buf[n] = '\0';
    fclose(f);
}

static void test_watch_links(void **state)
{
    const struct tree *t = *state;
    struct sb_gitwatch w;
    char err[256], p[PATH_MAX * 2], q[PATH_MAX * 2], buf[64];
    ssize_t n;
    FILE *f;

    mkfile(t, "dotfiles/bashrc");
    mklink(t, ".bashrc", "dotfiles/bashrc");
    mklink(t, ".profile", "nowhere/profile");
    mklink(t, ".zshrc", "dotfiles/zshrc-missing");
    mkdir_(t, "conf/vscode");
    mklink(t, ".vscode", "conf/vscode");

    /* nothing changed: nothing repaired */
    assert_int_equal(sb_gitwatch_begin(t->root, 3, &w, err, sizeof(err)), 0);
    assert_int_equal(sb_gitwatch_end(&w, NULL), 0);
    sb_gitwatch_free(&w);

    assert_int_equal(sb_gitwatch_begin(t->root, 3, &w, err, sizeof(err)), 0);
    /* what a command could do: replace a link with a file, remove one,
     * create the target of a dangling one through it */
    snprintf(p, sizeof(p), "%s/.bashrc", t->root);
    assert_int_equal(unlink(p), 0);
    f = fopen(p, "w");
    assert_non_null(f);
    fputs("evil\n", f);
    fclose(f);
    snprintf(p, sizeof(p), "%s/.vscode", t->root);
    assert_int_equal(unlink(p), 0);
    mkdir_(t, "nowhere");
    snprintf(p, sizeof(p), "%s/.profile", t->root);
    f = fopen(p, "w");
    assert_non_null(f);
    fputs("evil too\n", f);
    fclose(f);
    assert_int_equal(sb_gitwatch_end(&w, NULL), 3);
    sb_gitwatch_free(&w);

    /* the links are back, with their targets */
    snprintf(p, sizeof(p), "%s/.bashrc", t->root);
    n = readlink(p, q, sizeof(q) - 1);
    assert_true(n > 0);
    q[n] = '\0';
    assert_string_equal(q, "dotfiles/bashrc");
    snprintf(p, sizeof(p), "%s/.vscode", t->root);
    n = readlink(p, q, sizeof(q) - 1);
    assert_true(n > 0);
    q[n] = '\0';
    assert_string_equal(q, "conf/vscode");
    /* what replaced them is kept aside, not deleted */
    snprintf(q, sizeof(q), ".bashrc.sluice-replaced.%ld", (long)getpid());
    read_back(t, q, buf, sizeof(buf));
    assert_string_equal(buf, "evil\n");
    snprintf(q, sizeof(q), "nowhere/profile.sluice-replaced.%ld", (long)getpid());
    read_back(t, q, buf, sizeof(buf));
    assert_string_equal(buf, "evil too\n");
    snprintf(p, sizeof(p), "%s/nowhere/profile", t->root);
    assert_int_equal(access(p, F_OK), -1);
    read_back(t, "dotfiles/bashrc", buf, sizeof(buf));
    assert_string_equal(buf, "x\n");
}

/* issue 25: the post-run check from what the plan's scan found (no second
 * walk): only what it watches is kept from the scan, and it repairs what
 * sb_gitwatch_begin would. */
static void test_watch_from_scan(void **state)
{
    const struct tree *t = *state;
    struct sb_prot_list scan = {0}, kept = {0};
    struct sb_gitwatch w;
    char err[256], p[PATH_MAX * 2];
    size_t git = 0, file = 0, link = 0;
    FILE *f;

    mkdir_(t, ".git/hooks");
    mkfile(t, ".git/config");
    mkfile(t, "sub/.git"); /* a gitdir: pointer */
    mkfile(t, "dotfiles/bashrc");
    mklink(t, ".bashrc", "dotfiles/bashrc");
    assert_int_equal(sb_protect_scan(t->root, 3, 1, &scan, err, sizeof(err)), 0);
    for (size_t i = 0; i < scan.n; i++)
        assert_int_equal(sb_gitwatch_keep(&kept, &scan.v[i]), 0);
    for (size_t i = 0; i < kept.n; i++) {
        const char *rel = kept.v[i].path + strlen(t->root);
        if (strcmp(rel, "/.git") == 0 && kept.v[i].kind == SB_PROT_PIN)
            git++;
        else if (strcmp(rel, "/sub/.git") == 0 && kept.v[i].kind == SB_PROT_FILE)
            file++;
        else if (strcmp(rel, "/.bashrc") == 0 && kept.v[i].kind == SB_PROT_LINK)
            link++;
        else
            fail_msg("kept %s (kind %d)", rel, (int)kept.v[i].kind);
    }
    assert_int_equal(git + file + link, 3);
    sb_prot_list_free(&scan);

    assert_int_equal(sb_gitwatch_list(&kept, &w, err, sizeof(err)), 0);
    /* the command: a commondir redirecting git, the pointer aimed away */
    for (int i = 0; i < 2; i++) {
        snprintf(p, sizeof(p), "%s/%s", t->root, i == 0 ? ".git/commondir" : "sub/.git");
        f = fopen(p, "w");
        assert_non_null(f);
        fputs(i == 0 ? "/elsewhere\n" : "gitdir: /elsewhere\n", f);
        fclose(f);
    }
    assert_int_equal(sb_gitwatch_end(&w, NULL), 2);
    sb_gitwatch_free(&w);
    sb_prot_list_free(&kept);
    snprintf(p, sizeof(p), "%s/.git/commondir", t->root);
    assert_int_equal(access(p, F_OK), -1);
    read_back(t, "sub/.git", p, sizeof(p));
    assert_string_equal(p, "x\n");
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup_tree, teardown_tree)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_empty_root),
        T(test_existing_and_git),
        T(test_case_variants),
        T(test_git_without_hooks),
        T(test_git_file),
        T(test_depth),
        T(test_node_modules_skipped),
        T(test_symlinks),
        T(test_git_symlink_and_ro_cover),
        T(test_watch_links),
        T(test_watch_from_scan),
        T(test_submodules_and_worktrees),
        T(test_appends_and_errors),
        T(test_claude),
    T(test_wide_tree),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
