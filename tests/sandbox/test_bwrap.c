/* tests/sandbox/test_bwrap.c - bwrap's argument vector (sandbox/bwrap.c), built
 * against real directory trees under /tmp. bwrap itself is never run. */
#define _XOPEN_SOURCE 700 /* realpath, setenv */
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

#include "policy/policy.h"
#include "sandbox/sandbox.h"

#define SELF "/usr/lib/sluice-test/sluice" /* does not exist: not protected */

/* ------------------------------------------------------------------------ */
/* Fixture: R/home/proj is the working directory, R/home the home, R/run/tmp
 * the host side of /tmp. proj is a git repository.                          */

struct fx {
    char root[PATH_MAX];
    char cwd[PATH_MAX + 16], home[PATH_MAX + 16], tmp[PATH_MAX + 16];
    char *cmd[3];
    struct settings s;
    struct sb_bwrap_opts o;
};

static void mk(const struct fx *f, const char *rel, int dir, const char *content)
{
    char p[PATH_MAX * 2];

    for (const char *s = rel; (s = strchr(s, '/')) != NULL; s++) {
        snprintf(p, sizeof(p), "%s/%.*s", f->root, (int)(s - rel), rel);
        if (mkdir(p, 0755) < 0 && errno != EEXIST)
            fail_msg("mkdir %s: %s", p, strerror(errno));
    }
    snprintf(p, sizeof(p), "%s/%s", f->root, rel);
    if (dir) {
        if (mkdir(p, 0755) < 0 && errno != EEXIST)
            fail_msg("mkdir %s: %s", p, strerror(errno));
    } else {
        FILE *fp = fopen(p, "w");
        assert_non_null(fp);
        fputs(content, fp);
        fclose(fp);
    }
}

static void mkfile(const struct fx *f, const char *rel)
{
    mk(f, rel, 0, "x\n");
}

static void mkdir_(const struct fx *f, const char *rel)
{
    mk(f, rel, 1, NULL);
}

static void mklink(const struct fx *f, const char *rel, const char *target)
{
    char p[PATH_MAX * 2];

    snprintf(p, sizeof(p), "%s/%s", f->root, rel);
    assert_int_equal(symlink(target, p), 0);
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    char tmpl[] = "/tmp/sluice-test-bwrap-XXXXXX";

    if (f == NULL || mkdtemp(tmpl) == NULL || realpath(tmpl, f->root) == NULL)
        return -1;
    snprintf(f->cwd, sizeof(f->cwd), "%s/home/proj", f->root);
    snprintf(f->home, sizeof(f->home), "%s/home", f->root);
    snprintf(f->tmp, sizeof(f->tmp), "%s/run/tmp", f->root);
    mkfile(f, "home/proj/.git/HEAD");
    mkfile(f, "home/proj/.git/config");
    mkdir_(f, "home/proj/.git/hooks");
    mkdir_(f, "run/tmp");
    f->cmd[0] = (char *)"make";
    f->cmd[1] = (char *)"test";
    f->cmd[2] = NULL;
    settings_init(&f->s);
    f->o.s = &f->s;
    f->o.bwrap = "/usr/bin/bwrap";
    f->o.bwrap_setuid = 0;
    f->o.stdin_tty = 1;
    f->o.restrict_network = 1;
    f->o.cwd = f->cwd;
    f->o.home = f->home;
    f->o.host_tmpdir = f->tmp;
    f->o.self_exe = SELF;
    f->o.inner_fd = 3;
    f->o.allow_unix_sockets = 0;
    f->o.cmd = f->cmd;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    char cmd[PATH_MAX + 32];
    int rc;

    settings_free(&f->s);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->root);
    rc = system(cmd);
    free(f);
    return rc == 0 ? 0 : -1;
}

static void settings(struct fx *f, const char *json)
{
    struct settings_error err;

    if (settings_apply_buffer(&f->s, "t.json", json, strlen(json), &err) != 0)
        fail_msg("settings: %s", err.msg);
}

/* argv as one line, the fixture's root written as R. */
static char *render(const struct fx *f, const struct sb_strv *a)
{
    size_t rl = strlen(f->root), size = 1, o = 0;
    char *buf;

    for (size_t i = 0; i < a->n; i++)
        size += strlen(a->v[i]) + 2;
    buf = malloc(size);
    assert_non_null(buf);
    buf[0] = '\0';
    for (size_t i = 0; i < a->n; i++) {
        const char *s = a->v[i];
        if (i > 0)
            buf[o++] = ' ';
        if (strncmp(s, f->root, rl) == 0 && (s[rl] == '/' || s[rl] == '\0')) {
            buf[o++] = 'R';
            s += rl;
        }
        memcpy(buf + o, s, strlen(s) + 1);
        o += strlen(s);
    }
    return buf;
}

static void build_ok(struct fx *f, struct sb_plan *p)
{
    char err[1024] = "";

    memset(p, 0, sizeof(*p));
    if (sb_bwrap_build(&f->o, p, err, sizeof(err)) != 0)
        fail_msg("build: %s", err);
    assert_non_null(p->argv.v);
    assert_null(p->argv.v[p->argv.n]);
}

/* Builds and compares the whole line. */
static void expect(struct fx *f, const char *want)
{
    struct sb_plan p;
    char *got;

    build_ok(f, &p);
    got = render(f, &p.argv);
    if (strcmp(got, want) != 0)
        print_error("--- got:\n%s\n--- want:\n%s\n", got, want);
    assert_string_equal(got, want);
    free(got);
    sb_plan_free(&p);
}

/* Builds and checks that the line contains (or not) a fragment. */
static void expect_has(struct fx *f, const char *const *yes, const char *const *no)
{
    struct sb_plan p;
    char *got;

    build_ok(f, &p);
    got = render(f, &p.argv);
    for (size_t i = 0; yes != NULL && yes[i] != NULL; i++)
        if (strstr(got, yes[i]) == NULL)
            fail_msg("missing '%s' in:\n%s", yes[i], got);
    for (size_t i = 0; no != NULL && no[i] != NULL; i++)
        if (strstr(got, no[i]) != NULL)
            fail_msg("unexpected '%s' in:\n%s", no[i], got);
    free(got);
    sb_plan_free(&p);
}

static void expect_error(struct fx *f, int rc, const char *msg)
{
    struct sb_plan p;
    char err[1024] = "", want[2048];
    size_t rl = strlen(f->root);

    memset(&p, 0, sizeof(p));
    assert_int_equal(sb_bwrap_build(&f->o, &p, err, sizeof(err)), rc);
    assert_null(p.argv.v);
    assert_null(p.created.v);
    /* the message with the root written as R */
    for (char *s; (s = strstr(err, f->root)) != NULL;) {
        s[0] = 'R';
        memmove(s + 1, s + rl, strlen(s + rl) + 1);
    }
    snprintf(want, sizeof(want), "%s", msg);
    if (strcmp(err, want) != 0)
        print_error("--- got:\n%s\n--- want:\n%s\n", err, want);
    assert_string_equal(err, want);
}

#define NS                                                                                         \
    "/usr/bin/bwrap --die-with-parent --unshare-net --unshare-pid --unshare-ipc --unshare-uts "    \
    "--unshare-cgroup-try --unshare-user --cap-drop ALL"
#define SYSRO "--ro-bind /proc/sys /proc/sys --ro-bind-try /proc/sysrq-trigger /proc/sysrq-trigger"
#define BASE "--ro-bind / / --dev /dev --proc /proc " SYSRO " --bind R/run/tmp /tmp"
#define TAIL "--chdir R/home/proj -- " SELF " inner --fd 3 --limit-processes=8192 -- make test"
#define DN "--ro-bind /dev/null"
/* protections of R/home/proj as the fixture makes it */
/* an empty read-only directory where a protected name does not exist */
#define AB(P) "--tmpfs " P " --remount-ro " P
#define PROJ_PROT_A(P)                                                                             \
    AB(P "/.bash_profile") " " AB(P "/.bashrc") " " AB(P "/.claude/agents") " " AB(              \
        P "/.claude/commands")
#define PROJ_PROT_B(P)                                                                                                                         \
    "--bind " P "/.git " P "/.git --ro-bind " P "/.git/config " P "/.git/config " AB(                                                          \
        P                                                                                                                                      \
        "/.git/config.worktree") " --ro-bind " P "/.git/hooks " P                                                                              \
                                 "/.git/hooks " AB(P "/.gitconfig") " " AB(P "/.gitmodules") " " AB(P "/.idea") " " AB(P "/.mcp.json") " " AB( \
                                     P                                                                                                         \
                                     "/.profile") " " AB(P                                                                                     \
                                                         "/.ripgreprc") " " AB(P                                                               \
                                                                               "/.vscode") " " AB(P                                            \
                                                                                                  "/.zprofile") " " AB(P                       \
                                                                                                                       "/.zshrc")
#define PROJ_PROT(P) PROJ_PROT_A(P) " " PROJ_PROT_B(P)

/* ------------------------------------------------------------------------ */
/* The sequence                                                              */

static void test_minimal_sequence(void **state)
{
    struct fx *f = *state;
    struct sb_plan p;
    static const char *const created[] = {
        ".bash_profile", ".bashrc",    ".claude", ".claude/agents", ".claude/commands",
        ".git/config.worktree", ".gitconfig", ".gitmodules", ".idea", ".mcp.json", ".profile",
        ".ripgreprc",    ".vscode",    ".zprofile", ".zshrc"};

    expect(f, NS " " BASE " --bind R/home/proj R/home/proj " PROJ_PROT("R/home/proj") " " TAIL);

    /* the mount points bwrap will create, parents first */
    build_ok(f, &p);
    assert_int_equal(p.created.n, sizeof(created) / sizeof(created[0]));
    for (size_t i = 0; i < p.created.n; i++) {
        char want[PATH_MAX * 2];
        snprintf(want, sizeof(want), "%s/%s", f->cwd, created[i]);
        assert_string_equal(p.created.v[i], want);
    }
    sb_plan_free(&p);
    sb_plan_free(&p); /* twice is fine */
}

static void test_flags(void **state)
{
    struct fx *f = *state;
    const char *const tty_no[] = {"--new-session", "--allow-unix-sockets", NULL};
    const char *const notty[] = {"/usr/bin/bwrap --new-session --die-with-parent --unshare-net",
                                 NULL};
    const char *const setuid_yes[] = {"--unshare-cgroup-try --cap-drop ALL --ro-bind / /", NULL};
    const char *const setuid_no[] = {"--unshare-user", NULL};
    const char *const open_yes[] = {"--die-with-parent --unshare-pid", NULL};
    const char *const open_no[] = {"--unshare-net", NULL};
    const char *const unix_yes[] = {
        "inner --fd 7 --allow-unix-sockets --limit-processes=8192 -- make test", NULL};
    const char *const nested_yes[] = {"--dev /dev --bind /proc /proc " SYSRO " --bind R/run/tmp /tmp",
                                      NULL};
    const char *const nested_no[] = {"--proc", NULL};

    expect_has(f, NULL, tty_no);
    f->o.stdin_tty = 0;
    expect_has(f, notty, NULL);
    f->o.stdin_tty = 1;
    f->o.bwrap_setuid = 1;
    expect_has(f, setuid_yes, setuid_no);
    f->o.bwrap_setuid = 0;
    f->o.restrict_network = 0;
    expect_has(f, open_yes, open_no);
    f->o.restrict_network = 1;
    f->o.allow_unix_sockets = 1;
    f->o.inner_fd = 7;
    expect_has(f, unix_yes, NULL);
    settings(f, "{\"enableWeakerNestedSandbox\": true}");
    expect_has(f, nested_yes, nested_no);
}

static void test_command_argv_verbatim(void **state)
{
    struct fx *f = *state;
    char *cmd[] = {(char *)"sh", (char *)"-c",      (char *)"echo \"$HOME\" ; rm -rf / --",
                   (char *)"",   (char *)"--chdir", NULL};
    struct sb_plan p;
    size_t n;

    f->o.cmd = cmd;
    build_ok(f, &p);
    n = p.argv.n;
    assert_true(n > 6);
    assert_string_equal(p.argv.v[n - 6], "--");
    for (size_t i = 0; i < 5; i++)
        assert_string_equal(p.argv.v[n - 5 + i], cmd[i]);
    sb_plan_free(&p);
}

/* ------------------------------------------------------------------------ */
/* Lists                                                                     */

static void test_allow_write(void **state)
{
    struct fx *f = *state;
    const char *const yes[] = {
        /* ~ expands; a relative path is relative to the working directory */
        "--bind R/home/cache R/home/cache", "--bind R/home/proj/out R/home/proj/out",
        "--bind R/home/dir with space R/home/dir with space",
        /* each writable directory gets its protections */
        AB("R/home/cache/.bashrc"), AB("R/home/proj/out/.git") " ", TAIL, NULL};
    const char *const no[] = {
        /* the working directory is no longer writable, missing paths are skipped */
        "--bind R/home/proj R/home/proj", "missing", "/dev/shm", "/proc/self", NULL};

    mkdir_(f, "home/cache");
    mkdir_(f, "home/proj/out");
    mkdir_(f, "home/dir with space");
    settings(f, "{\"filesystem\": {\"allowWrite\": [\"~/cache\", \"out/\", \"./out/../out\", "
                "\"~/missing\", \"/dev/shm\", \"/proc/self\", \"~/dir with space\"]}}");
    expect_has(f, yes, no);
}

static void test_allow_write_globs(void **state)
{
    struct fx *f = *state;
    const char *const yes[] = {"--bind R/home/proj/build-a R/home/proj/build-a "
                               "--tmpfs R/home/proj/build-a/.bash_profile",
                               "--bind R/home/proj/build-b R/home/proj/build-b",
                               "--bind R/home/proj/lit[1] R/home/proj/lit[1]",
                               "--bind R/home/x1 R/home/x1", NULL};
    const char *const no[] = {"build-c", "nomatch", NULL};

    mkdir_(f, "home/proj/build-a");
    mkdir_(f, "home/proj/build-b");
    mkfile(f, "home/proj/build-c.txt");
    mkdir_(f, "home/proj/lit[1]"); /* no match as a glob: taken literally */
    mkdir_(f, "home/x1");
    settings(f, "{\"filesystem\": {\"allowWrite\": [\"build-?\", \"lit[1]\", \"~/x[0-9]\", "
                "\"nomatch-*\"]}}");
    settings(f, "{\"mandatoryDenySearchDepth\": 1}");
    expect_has(f, yes, no);
}

static void test_allow_write_symlink_escape(void **state)
{
    struct fx *f = *state;
    char want[PATH_MAX * 4];

    /* a link planted in the project pointing at the home directory */
    mklink(f, "home/proj/link", "..");
    settings(f, "{\"filesystem\": {\"allowWrite\": [\".\", \"link\"]}}");
    snprintf(want, sizeof(want),
             "t.json:1:37: filesystem.allowWrite[1]: 'R/home/proj/link' resolves to 'R/home' "
             "through a symbolic link outside it; name the real path if that is what you mean");
    expect_error(f, -EINVAL, want);

    /* through a glob, and in allowRead too */
    settings_free(&f->s);
    settings_init(&f->s);
    settings(f, "{\"filesystem\": {\"allowWrite\": [\"l*\"]}}");
    expect_error(f, -EINVAL,
                 "t.json:1:32: filesystem.allowWrite[0]: 'R/home/proj/link' resolves to "
                 "'R/home' through a symbolic link outside it; name the real path if that is "
                 "what you mean");
    settings_free(&f->s);
    settings_init(&f->s);
    settings(f, "{\"filesystem\": {\"denyRead\": [\"~\"], \"allowRead\": [\"link\"]}}");
    expect_error(f, -EINVAL,
                 "t.json:1:50: filesystem.allowRead[0]: 'R/home/proj/link' resolves to "
                 "'R/home' through a symbolic link outside it; name the real path if that is "
                 "what you mean");
}

static void test_symlinked_home(void **state)
{
    struct fx *f = *state;
    char link[PATH_MAX + 32];
    const char *const yes[] = {"--bind R/home/cache R/home/cache", NULL};

    /* $HOME itself through a symlink: resolved first, so ~ paths are fine */
    mkdir_(f, "home/cache");
    snprintf(link, sizeof(link), "%s/homelink", f->root);
    assert_int_equal(symlink("home", link), 0);
    f->o.home = link;
    settings(f, "{\"filesystem\": {\"allowWrite\": [\"~/cache\"]}}");
    expect_has(f, yes, NULL);
}

static void test_tilde_errors(void **state)
{
    struct fx *f = *state;

    settings(f, "{\"filesystem\": {\"denyRead\": [\"~/.ssh\"]}}");
    f->o.home = NULL;
    expect_error(f, -EINVAL,
                 "t.json:1:30: filesystem.denyRead[0]: '~/.ssh': '~' needs $HOME, which is not "
                 "set");
    f->o.home = f->home;
    settings(f, "{\"filesystem\": {\"denyRead\": [\"~root/.ssh\"]}}");
    expect_error(f, -EINVAL,
                 "t.json:1:30: filesystem.denyRead[0]: '~root/.ssh': only '~' and '~/' are "
                 "supported");
}

/* $HOME and ${HOME} expand like ~ (a denyRead of $HOME/.bashrc must hide it,
 * not be skipped); any other variable is an error naming the entry. */
static void test_home_variable(void **state)
{
    struct fx *f = *state;
    const char *const yes[] = {DN " R/home/.bashrc", "--tmpfs R/home/.ssh",
                               "--bind R/home/cache R/home/cache", NULL};

    mkfile(f, "home/.bashrc");
    mkdir_(f, "home/.ssh");
    mkdir_(f, "home/cache");
    settings(f, "{\"filesystem\": {\"denyRead\": [\"$HOME/.bashrc\", \"${HOME}/.ssh\"], "
                "\"allowWrite\": [\".\", \"$HOME/cache\"]}}");
    expect_has(f, yes, NULL);

    settings_free(&f->s);
    settings_init(&f->s);
    settings(f, "{\"filesystem\": {\"denyRead\": [\"$XDG_DATA_HOME/x\"]}}");
    expect_error(f, -EINVAL,
                 "t.json:1:30: filesystem.denyRead[0]: '$XDG_DATA_HOME/x': only $HOME (or "
                 "${HOME}) and '~' are expanded in paths; write the path out");
    settings_free(&f->s);
    settings_init(&f->s);
    settings(f, "{\"filesystem\": {\"denyRead\": [\"$HOMEDIR/x\"]}}");
    expect_error(f, -EINVAL,
                 "t.json:1:30: filesystem.denyRead[0]: '$HOMEDIR/x': only $HOME (or "
                 "${HOME}) and '~' are expanded in paths; write the path out");
    settings_free(&f->s);
    settings_init(&f->s);
    f->o.home = NULL;
    settings(f, "{\"filesystem\": {\"denyRead\": [\"$HOME/.ssh\"]}}");
    expect_error(f, -EINVAL, "t.json:1:30: filesystem.denyRead[0]: '$HOME/.ssh': '$HOME' is not set");
}

/* DIR followed by slash-star-star makes DIR itself writable (new files too),
 * as the reference does, instead of only the entries that exist now. */
static void test_trailing_double_star(void **state)
{
    struct fx *f = *state;
    const char *const yes[] = {"--bind R/home/proj/out R/home/proj/out", "--tmpfs R/home/.ssh",
                               NULL};
    const char *const no[] = {"--bind R/home/proj/out/a ", NULL};

    mkdir_(f, "home/proj/out/a");
    mkdir_(f, "home/.ssh/keys");
    settings(f, "{\"filesystem\": {\"allowWrite\": [\"out/**\"], \"denyRead\": [\"~/.ssh/**\"]}}");
    expect_has(f, yes, no);
}

/* A glob that matches nothing warns, naming the entry and where it is. */
static void test_glob_no_match_warns(void **state)
{
    struct fx *f = *state;
    char *buf = NULL;
    size_t len = 0;
    FILE *w = open_memstream(&buf, &len);
    struct sb_plan p;

    assert_non_null(w);
    f->o.warn = w;
    mkdir_(f, "home/proj/build-a");
    settings(f, "{\"filesystem\": {\"allowWrite\": [\"build-*\", \"nomatch-*\"],\n"
                "  \"denyRead\": [\"~/.aws*\"]}}");
    build_ok(f, &p);
    sb_plan_free(&p);
    fclose(w);
    f->o.warn = NULL;
    assert_non_null(buf);
    if (strstr(buf, "sluice: warning: t.json:1:43: filesystem.allowWrite[1]: 'nomatch-*' matches "
                    "nothing; the entry has no effect\n") == NULL ||
        strstr(buf, "t.json:2:16: filesystem.denyRead[0]: '~/.aws*' matches nothing") == NULL ||
        strstr(buf, "build-*") != NULL)
        fail_msg("warnings:\n%s", buf);
    free(buf);
}

/* A literal allowRead entry that does not exist warns like a glob without
 * a match (issue 21: it was skipped without a word). */
static void test_literal_missing_warns(void **state)
{
    struct fx *f = *state;
    char *buf = NULL;
    size_t len = 0;
    FILE *w = open_memstream(&buf, &len);
    struct sb_plan p;

    assert_non_null(w);
    f->o.warn = w;
    mkdir_(f, "home/proj/there*");
    settings(f, "{\"filesystem\": {\"denyRead\": [\"~\"],\n"
                "  \"allowRead\": [{\"path\": \"gone*\", \"literal\": true}, "
                "{\"path\": \"there*\", \"literal\": true}]}}");
    build_ok(f, &p);
    sb_plan_free(&p);
    fclose(w);
    f->o.warn = NULL;
    assert_non_null(buf);
    if (strstr(buf, "filesystem.allowRead[0]: '") == NULL ||
        strstr(buf, "/home/proj/gone*' does not exist; the entry has no effect\n") == NULL ||
        strstr(buf, "there*") != NULL)
        fail_msg("warnings:\n%s", buf);
    free(buf);
}

/* {"path": P, "literal": true}: taken as written, no glob, no ~. */
static void test_literal_entries(void **state)
{
    struct fx *f = *state;
    const char *const yes[] = {"--bind R/home/proj/a* R/home/proj/a*",
                               "--bind R/home/proj/~ R/home/proj/~", NULL};
    const char *const no[] = {"--bind R/home/proj/ab ", NULL};

    mkdir_(f, "home/proj/a*");
    mkdir_(f, "home/proj/ab");
    mkdir_(f, "home/proj/~");
    settings(f, "{\"filesystem\": {\"allowWrite\": [{\"path\": \"a*\", \"literal\": true}, "
                "{\"path\": \"~\", \"literal\": true}]}}");
    expect_has(f, yes, no);
}

static void test_root_refused(void **state)
{
    struct fx *f = *state;

    settings(f, "{\"filesystem\": {\"allowWrite\": [\"/\"]}}");
    expect_error(f, -EINVAL,
                 "t.json:1:32: filesystem.allowWrite[0]: '/' would make the whole filesystem "
                 "writable; use filesystem.disabled for that");
    settings_free(&f->s);
    settings_init(&f->s);
    settings(f, "{\"filesystem\": {\"denyRead\": [\"/./\"]}}");
    expect_error(f, -EINVAL,
                 "t.json:1:30: filesystem.denyRead[0]: '/' would hide the whole filesystem");
}

static void test_deny_write(void **state)
{
    struct fx *f = *state;
    const char *const yes[] = {
        "--bind R/home/proj R/home/proj", "--ro-bind R/home/proj/.env R/home/proj/.env",
        "--ro-bind R/home/proj/conf R/home/proj/conf",
        "--ro-bind R/home/proj/a.key R/home/proj/a.key --ro-bind R/home/proj/b.key", NULL};
    const char *const no[] = {
        "missing.txt",                        /* missing: skipped */
        "--ro-bind R/home/elsewhere",         /* outside every writable directory: no effect */
        "--ro-bind R/home/proj/conf/.bashrc", /* inside the read-only conf: covered */
        NULL};

    mkfile(f, "home/proj/.env");
    mkfile(f, "home/proj/conf/.bashrc");
    mkfile(f, "home/proj/a.key");
    mkfile(f, "home/proj/b.key");
    mkfile(f, "home/elsewhere");
    settings(f, "{\"filesystem\": {\"denyWrite\": [\".env\", \"missing.txt\", \"conf\", "
                "\"*.key\", \"~/elsewhere\"]}}");
    expect_has(f, yes, no);
}

static void test_deny_read_and_allow_read(void **state)
{
    struct fx *f = *state;

    mkfile(f, "home/.ssh/id_ed25519");
    mkfile(f, "home/.ssh/known_hosts");
    mkfile(f, "home/.aws/credentials");
    mkfile(f, "home/.netrc");
    mkfile(f, "home/public.txt");
    settings(f, "{\"filesystem\": {\"denyRead\": [\"~/.ssh\", \"~/.aws/credentials\", "
                "\"~/.netrc\", \"~/missing\"], \"allowRead\": [\"~/.ssh/known_hosts\", "
                "\"~/public.txt\", \"~/.netrc\"]}}");
    /* a directory: empty tmpfs (writable, discarded); a file: /dev/null;
     * allowRead inside a denied directory re-allows, elsewhere it is a no-op
     * (and on the very path of a denied file the deny wins) */
    expect(f, NS " " BASE " " DN " R/home/.aws/credentials " DN " R/home/.netrc "
                 "--tmpfs R/home/.ssh --ro-bind R/home/.ssh/known_hosts "
                 "R/home/.ssh/known_hosts --bind R/home/proj R/home/proj " PROJ_PROT(
                     "R/home/proj") " " TAIL);
}

static void test_deny_read_around_writable(void **state)
{
    struct fx *f = *state;

    mkfile(f, "home/.bashrc");
    mkfile(f, "home/proj/secrets/.bashrc");
    mkfile(f, "home/proj/secrets/key");
    mkfile(f, "home/proj/.env");
    settings(f, "{\"filesystem\": {\"denyRead\": [\"~\", \"secrets\", \".env\"]}}");
    /* home hidden, the project (writable, so readable) bound again inside it
     * with its protections, the project's own denials after it; nothing is
     * bound under the hidden secrets (secrets/.bashrc would leak) */
    expect(f,
           NS " " BASE " --tmpfs R/home --bind R/home/proj R/home/proj " PROJ_PROT_A(
               "R/home/proj") " " DN
                              " R/home/proj/.env " PROJ_PROT_B(
                                  "R/home/proj") " "
                                                 "--tmpfs R/home/proj/secrets " TAIL);
}

static void test_cwd_hidden(void **state)
{
    struct fx *f = *state;

    mkdir_(f, "home/other");
    settings(f, "{\"filesystem\": {\"denyRead\": [\"~\"], \"allowWrite\": [\"~/other\"]}}");
    expect_error(f, -EINVAL,
                 "t.json:1:30: filesystem.denyRead[0]: hides the working directory "
                 "'R/home/proj'; allow it with filesystem.allowRead or filesystem.allowWrite");
    settings(f, "{\"filesystem\": {\"allowRead\": [\".\"]}}");
    {
        const char *const yes[] = {"--tmpfs R/home --bind R/home/other R/home/other",
                                   "--ro-bind R/home/proj R/home/proj --chdir", NULL};
        expect_has(f, yes, NULL);
    }
}

static void test_protected_in_cwd(void **state)
{
    struct fx *f = *state;
    const char *const yes[] = {
        "--bind R/home/proj R/home/proj",
        "--ro-bind R/home/proj/.bashrc R/home/proj/.bashrc",
        "--ro-bind R/home/proj/.vscode R/home/proj/.vscode",
        "--bind R/home/proj/sub R/home/proj/sub --bind R/home/proj/sub/.git R/home/proj/sub/.git",
        "--ro-bind R/home/proj/sub/.mcp.json R/home/proj/sub/.mcp.json",
        NULL};
    const char *const no[] = {/* an explicit allowWrite inside a protected directory loses */
                              "--bind R/home/proj/.vscode", "--tmpfs R/home/proj/.bashrc",
                              /* nothing from node_modules */
                              "node_modules", NULL};

    mkfile(f, "home/proj/.bashrc");
    mkfile(f, "home/proj/.vscode/settings.json");
    mkfile(f, "home/proj/sub/.git/HEAD");
    mkfile(f, "home/proj/sub/.mcp.json");
    mkfile(f, "home/proj/node_modules/x/.bashrc");
    settings(f, "{\"filesystem\": {\"allowWrite\": [\".\", \".vscode\"]}}");
    expect_has(f, yes, no);
}

static void test_own_files_protected(void **state)
{
    struct fx *f = *state;
    char self[PATH_MAX + 64], cfg[PATH_MAX + 64];
    struct settings_error err;
    const char *json = "{\"filesystem\": {\"allowWrite\": [\".\"]}}";
    const char *const yes[] = {
        "--bind R/home/proj/build R/home/proj/build "
        "--ro-bind R/home/proj/build/sluice R/home/proj/build/sluice",
        "--bind R/home/proj/conf R/home/proj/conf "
        "--ro-bind R/home/proj/conf/sluice.json R/home/proj/conf/sluice.json",
        "--ro-bind R/home/proj/rel.json R/home/proj/rel.json", NULL};
    const char *const no[] = {"/usr/bin/bwrap R", "t.json", NULL};

    /* sluice's binary and its settings files inside the writable directory,
     * one named by an absolute path, one by a relative one */
    mkfile(f, "home/proj/build/sluice");
    mkfile(f, "home/proj/conf/sluice.json");
    mkfile(f, "home/proj/rel.json");
    snprintf(self, sizeof(self), "%s/build/sluice", f->cwd);
    snprintf(cfg, sizeof(cfg), "%s/conf/sluice.json", f->cwd);
    assert_int_equal(settings_apply_buffer(&f->s, cfg, json, strlen(json), &err), 0);
    assert_int_equal(settings_apply_buffer(&f->s, "rel.json", json, strlen(json), &err), 0);
    f->o.self_exe = self;
    expect_has(f, yes, no);
}

/* issue 25: sluice-inner, when the launcher found one, is what bwrap
 * starts (no "inner" argument), is read-only like sluice's own binary,
 * and may not be hidden */
static void test_inner_exe(void **state)
{
    struct fx *f = *state;
    char self[PATH_MAX + 64], inner[PATH_MAX + 64];
    const char *const yes[] = {
        "--ro-bind R/home/proj/build/sluice-inner R/home/proj/build/sluice-inner",
        "sluice-inner --fd 3 --limit-processes=8192 -- make test", NULL};
    const char *const no[] = {"sluice inner", NULL};
    struct sb_plan p;
    char err[1024] = "";

    mkfile(f, "home/proj/build/sluice");
    mkfile(f, "home/proj/build/sluice-inner");
    snprintf(self, sizeof(self), "%s/build/sluice", f->cwd);
    snprintf(inner, sizeof(inner), "%s/build/sluice-inner", f->cwd);
    f->o.self_exe = self;
    f->o.inner_exe = inner;
    f->o.inner_fd = 3;
    expect_has(f, yes, no);
    settings(f, "{\"filesystem\": {\"denyRead\": [\"build/sluice-inner\"]}}");
    memset(&p, 0, sizeof(p));
    assert_int_equal(sb_bwrap_build(&f->o, &p, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "hides sluice-inner"));
    assert_null(p.argv.v);
}

static void test_filesystem_disabled(void **state)
{
    struct fx *f = *state;

    mkfile(f, "home/.netrc");
    settings(f, "{\"filesystem\": {\"disabled\": true, \"denyRead\": [\"~/.netrc\"], "
                "\"allowWrite\": [\"~\"], \"denyWrite\": [\".git\"]}}");
    /* no write restrictions (and no protected files); read denials stay */
    expect(f, NS " --bind / / --dev /dev --proc /proc " SYSRO " --bind R/run/tmp /tmp " DN
                 " R/home/.netrc " TAIL);
}

static void test_no_secret_in_argv(void **state)
{
    struct fx *f = *state;
    struct sb_plan p;
    static const char secret[] = "ghp_S3cretValueThatMustNeverLeak0123456789";

    setenv("GITHUB_TOKEN", secret, 1);
    setenv("SLUICE_TEST_SECRET_PASSWORD", secret, 1);
    setenv("HTTP_PROXY",
           "http://user:"
           "S3cretValueThatMustNeverLeak@corp:8080",
           1);
    mkfile(f, "home/.ssh/id_rsa");
    settings(f, "{\"filesystem\": {\"denyRead\": [\"~/.ssh\"], \"allowWrite\": [\".\", \"~\"]},"
                " \"environment\": {\"allow\": [\"GITHUB_TOKEN\"]}}");
    build_ok(f, &p);
    for (size_t i = 0; i < p.argv.n; i++) {
        assert_null(strstr(p.argv.v[i], "S3cretValue"));
        assert_null(strstr(p.argv.v[i], "GITHUB_TOKEN"));
        assert_null(strstr(p.argv.v[i], "--setenv"));
    }
    sb_plan_free(&p);
    unsetenv("GITHUB_TOKEN");
    unsetenv("SLUICE_TEST_SECRET_PASSWORD");
    unsetenv("HTTP_PROXY");
}

static void test_cleanup(void **state)
{
    struct fx *f = *state;
    struct sb_plan p;
    char path[PATH_MAX * 2];
    struct stat st;
    size_t c, d;

    build_ok(f, &p);
    assert_true(p.created.n >= 5);
    /* the last two: plain mount points (the .claude family sits in between) */
    c = p.created.n - 2;
    d = p.created.n - 1;
    /* what bwrap makes: empty directories. Then, during the run, one got a
     * file (on the host), one was replaced by an empty file, one by a file
     * with data, one by a symlink */
    for (size_t i = 0; i < p.created.n; i++)
        assert_int_equal(mkdir(p.created.v[i], 0755), 0);
    snprintf(path, sizeof(path), "%s/kept", p.created.v[0]);
    assert_int_equal(close(open(path, O_CREAT | O_WRONLY, 0644)), 0);
    assert_int_equal(rmdir(p.created.v[1]), 0);
    assert_int_equal(close(open(p.created.v[1], O_CREAT | O_WRONLY, 0644)), 0);
    assert_int_equal(rmdir(p.created.v[c]), 0);
    {
        int fd = open(p.created.v[c], O_CREAT | O_WRONLY, 0644);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, "data", 4), 4);
        close(fd);
    }
    assert_int_equal(rmdir(p.created.v[d]), 0);
    assert_int_equal(symlink(".", p.created.v[d]), 0);

    sb_plan_cleanup(&p);
    assert_int_equal(lstat(p.created.v[0], &st), 0); /* non-empty directory: kept */
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(lstat(p.created.v[1], &st), -1); /* empty file: removed */
    assert_int_equal(lstat(p.created.v[c], &st), 0);  /* a file with data: kept */
    assert_int_equal(st.st_size, 4);
    assert_int_equal(lstat(p.created.v[d], &st), 0); /* a symlink: kept, not followed */
    assert_true(S_ISLNK(st.st_mode));
    for (size_t i = 2; i < c; i++) /* empty directories (.claude too): removed */
        assert_int_equal(lstat(p.created.v[i], &st), -1);
    /* nothing else was touched */
    snprintf(path, sizeof(path), "%s/.git/config", f->cwd);
    assert_int_equal(lstat(path, &st), 0);
    snprintf(path, sizeof(path), "%s/.git/hooks", f->cwd);
    assert_int_equal(lstat(path, &st), 0);
    sb_plan_cleanup(&p); /* again: nothing left to do */
    sb_plan_free(&p);

    /* a zeroed plan (a build that failed) */
    memset(&p, 0, sizeof(p));
    sb_plan_cleanup(&p);
    sb_plan_free(&p);
}

static void test_bad_options(void **state)
{
    struct fx *f = *state;
    char *empty[] = {NULL};

    f->o.cmd = empty;
    expect_error(f, -EINVAL,
                 "bwrap arguments: invalid options (bwrap, cwd, host tmpdir, sluice's path, "
                 "descriptor or command missing)");
    f->o.cmd = f->cmd;
    f->o.cwd = "relative";
    expect_error(f, -EINVAL,
                 "bwrap arguments: invalid options (bwrap, cwd, host tmpdir, sluice's path, "
                 "descriptor or command missing)");
}

/* ------------------------------------------------------------------------ */
/* The shipped profiles (conf/profiles/)                                      */

/* Applies conf/profiles/NAME.json (found from $SLUICE_TEST_DATA, set by
 * ctest); skips the test when run by hand without it. */
static void profile(struct fx *f, const char *name)
{
    const char *data = getenv("SLUICE_TEST_DATA");
    char p[PATH_MAX + 64];
    struct settings_error err;

    if (data == NULL)
        skip();
    snprintf(p, sizeof(p), "%s/../../conf/profiles/%s.json", data, name);
    if (settings_apply_file(&f->s, p, &err) != 0)
        fail_msg("%s: %s", p, err.msg);
}

/* 1 when a comes before b in the rendered line (both present). */
static void expect_order(struct fx *f, const char *a, const char *b)
{
    struct sb_plan p;
    char *got, *pa, *pb;

    build_ok(f, &p);
    got = render(f, &p.argv);
    pa = strstr(got, a);
    pb = strstr(got, b);
    if (pa == NULL || pb == NULL || pa >= pb)
        fail_msg("want '%s' before '%s' in:\n%s", a, b, got);
    free(got);
    sb_plan_free(&p);
}

/* strict-home: the home hidden, the working directory under it visible and
 * writable, .cache and .local/share bound back writable (with their own
 * protections and denials), only the allow-listed .config directories and
 * uv binaries readable, everything bound after the home's tmpfs. */
static void test_profile_strict_home(void **state)
{
    struct fx *f = *state;
    const char *const yes[] = {
        "--tmpfs R/home --bind R/home/.cache R/home/.cache ",
        "--ro-bind R/home/.config/gh R/home/.config/gh ",
        "--ro-bind R/home/.local/bin/uv R/home/.local/bin/uv ",
        "--bind R/home/.local/share R/home/.local/share ",
        "--tmpfs R/home/.local/share/applications ",
        "--bind R/home/proj R/home/proj ",
        NULL};
    const char *const no[] = {"--remount-ro R/home ", /* the hidden home is writable, discarded */
                              "--remount-ro R/home/.local/share/applications",
                              ".ssh",         "R/home/.config/other", "R/home/.config ",
                              "glab-cli",     "uvx",                  "R/home/.local/bin ",
                              "R/home/.gitconfig", NULL};

    mkfile(f, "home/.ssh/id_ed25519");
    mkfile(f, "home/.gitconfig");
    mkfile(f, "home/.cache/pip/http");
    mkfile(f, "home/.config/gh/hosts.yml");
    mkfile(f, "home/.config/other/token");
    mkfile(f, "home/.local/share/applications/x.desktop");
    mkfile(f, "home/.local/share/tool/data");
    mkfile(f, "home/.local/bin/uv");
    mkfile(f, "home/.local/bin/evil");
    profile(f, "strict-home");
    expect_has(f, yes, no);
    /* the protections inside the writable .cache come after it */
    expect_order(f, "--bind R/home/.cache R/home/.cache",
                 "--tmpfs R/home/.cache/.bashrc --remount-ro R/home/.cache/.bashrc");

    /* run from the home itself, the profile would hide the working directory */
    f->o.cwd = f->home;
    {
        char want[PATH_MAX + 256];
        snprintf(want, sizeof(want),
                 "%s/../../conf/profiles/strict-home.json:4:7: filesystem.denyRead[0]: hides the "
                 "working directory 'R/home'; allow it with filesystem.allowRead or "
                 "filesystem.allowWrite",
                 getenv("SLUICE_TEST_DATA"));
        expect_error(f, -EINVAL, want);
    }
}

/* workdir: the data roots hidden and a system path re-allowed inside one;
 * the working directory's hide-list globs expanded at start, relative to
 * it, at its top level only. */
static void test_profile_workdir(void **state)
{
    struct fx *f = *state;
    struct stat st;
    const char *const yes[] = {DN " R/home/proj/.env ",
                               DN " R/home/proj/.env.local ",
                               DN " R/home/proj/a.pem ",
                               DN " R/home/proj/b.pem ",
                               "--tmpfs R/home/proj/secrets ",
                               DN " R/home/proj/deploy.key ",
                               "--bind R/home/proj R/home/proj ",
                               NULL};
    const char *const no[] = {"readme", "sub/.env", "nomatch", "*", NULL};

    mkfile(f, "home/proj/.env");
    mkfile(f, "home/proj/.env.local");
    mkfile(f, "home/proj/a.pem");
    mkfile(f, "home/proj/b.pem");
    mkfile(f, "home/proj/deploy.key");
    mkfile(f, "home/proj/secrets/k");
    mkfile(f, "home/proj/sub/.env");
    mkfile(f, "home/proj/readme");
    profile(f, "workdir");
    expect_has(f, yes, no);
    if (stat("/var/lib/dpkg", &st) == 0) {
        const char *const var[] = {"--tmpfs /var --ro-bind /var/lib/dpkg /var/lib/dpkg ", NULL};
        expect_has(f, var, NULL);
    }
    if (stat("/home", &st) == 0 && S_ISDIR(st.st_mode)) {
        const char *const home[] = {"--tmpfs /home ", NULL};
        const char *const nohome[] = {"--remount-ro /home ", NULL};
        expect_has(f, home, nohome);
    }
}

/* denyRead globs relative to the working directory, directly. */
static void test_deny_read_relative_globs(void **state)
{
    struct fx *f = *state;
    const char *const yes[] = {DN " R/home/proj/x.pem ", "--tmpfs R/home/proj/secrets ",
                               DN " R/home/proj/sub/y.pem ", NULL};
    const char *const no[] = {"nomatch", "R/home/proj/secrets/", NULL};

    mkfile(f, "home/proj/x.pem");
    mkfile(f, "home/proj/sub/y.pem");
    mkfile(f, "home/proj/secrets/k.pem");
    settings(f, "{\"filesystem\": {\"denyRead\": [\"*.pem\", \"secrets/\", \"*/*.pem\", "
                "\"nomatch*\", \"secrets/*.pem\"]}}");
    /* secrets/k.pem matches two patterns but lies in the hidden secrets:
     * nothing more is mounted there */
    expect_has(f, yes, no);
}

/* A working directory the sandbox replaces (/dev, /proc) fails clearly
 * instead of bwrap failing to chdir into it. */
static void test_cwd_special(void **state)
{
    struct fx *f = *state;
    struct sb_plan p;
    char err[512] = "";

    memset(&p, 0, sizeof(p));
    f->o.cwd = "/dev/shm/work";
    assert_int_equal(sb_bwrap_build(&f->o, &p, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "the working directory '/dev/shm/work' is under /dev or /proc, which "
                             "the sandbox replaces with its own; run the command from another "
                             "directory");
    assert_null(p.argv.v);
    f->o.cwd = "/proc";
    assert_int_equal(sb_bwrap_build(&f->o, &p, err, sizeof(err)), -EINVAL);
    f->o.cwd = "/devices"; /* only /dev itself and below */
    build_ok(f, &p);
    sb_plan_free(&p);
}

/* issue 14: the run directories' parent is masked by an empty tmpfs after
 * every bind, so no allowWrite/allowRead can show another run's /tmp; the
 * sandbox.limits options reach inner. */
static void test_mask_and_limits(void **state)
{
    struct fx *f = *state;
    /* the mask is the last mount, after the bind that would show it */
    const char *const masked[] = {"--bind R/run R/run ", "--tmpfs R/run/sluice --chdir", NULL};
    const char *const limits[] = {
        "--limit-processes=100 --limit-memory-mib=512 --limit-open-files=256 -- make test", NULL};
    const char *const no_mask[] = {"sluice --chdir", NULL};
    char mask[PATH_MAX + 16], json[PATH_MAX + 64];

    snprintf(mask, sizeof(mask), "%s/run/sluice", f->root);
    mkdir_(f, "run/sluice");
    expect_has(f, NULL, no_mask);
    f->o.mask_dir = mask;
    snprintf(json, sizeof(json), "{\"filesystem\": {\"allowWrite\": [\".\", \"%s/run\"]}}",
             f->root);
    settings(f, json);
    expect_has(f, masked, NULL);
    settings(f, "{\"sandbox\": {\"limits\": {\"processes\": 100, \"memory\": 512, "
                "\"openFiles\": 256}}}");
    expect_has(f, limits, NULL);
}

/* allowNestedUserNamespaces (issue 21): as root the command gets a non-zero
 * uid (a nested user namespace may not map uid 0 without CAP_SETFCAP);
 * another user's sandbox leaves /proc uncovered (a nested --proc needs it).
 * A read-only regular file or directory on 0-2 is bound read-only and
 * reopened there by inner in every mode (rt-3 #5: Landlock has no right for
 * chmod, chown, utimes or setxattr through the host's writable mount). */
static void test_nested_userns(void **state)
{
    struct fx *f = *state;
    const char *const key_user[] = {"--unshare-user --cap-drop ALL --ro-bind / / --dev /dev "
                                    "--proc /proc --bind R/run/tmp /tmp",
                                    "--ro-bind-fd 4 /tmp/.sluice-fd-0 "
                                    "--ro-bind-fd 6 /tmp/.sluice-fd-2 --chdir",
                                    "--allow-user-namespaces --reopen-ro=0:0 --reopen-ro=2:17 "
                                    "--limit-processes=8192",
                                    NULL};
    const char *const key_user_no[] = {"--uid",          "/proc/sys",     "/proc/sysrq-trigger",
                                       "--ro-bind-fd 5", "--reopen-ro=1", NULL};
    const char *const key_root[] = {"--unshare-user --uid 1000 --cap-drop ALL",
                                    "--proc /proc " SYSRO " --bind R/run/tmp /tmp", NULL};
    const char *const key_root_no[] = {"--ro-bind-fd", "--reopen-ro", NULL};
    const char *const key_setuid_no[] = {"--uid", NULL};
    const char *const off[] = {"--proc /proc " SYSRO " --bind R/run/tmp /tmp",
                               "--ro-bind-fd 4 /tmp/.sluice-fd-0 "
                               "--ro-bind-fd 6 /tmp/.sluice-fd-2 --chdir",
                               "inner --fd 3 --reopen-ro=0:0 --reopen-ro=2:17 --limit", NULL};
    const char *const off_no[] = {"--uid", "--ro-bind-fd 5", "--reopen-ro=1",
                                  "--allow-user-namespaces", NULL};

    f->o.stdio_ro = 5; /* 0 and 2 */
    f->o.stdio_off[2] = 17;
    expect_has(f, off, off_no);
    /* a directory on 0 (rt-3): re-bound as the file on 2 is */
    f->o.stdio_dir = 1;
    expect_has(f, off, off_no);
    f->o.stdio_dir = 0;
    f->o.host_root = 1;
    expect_has(f, off, off_no);
    settings(f, "{\"allowNestedUserNamespaces\": true}");
    f->o.host_root = 0;
    expect_has(f, key_user, key_user_no);
    f->o.host_root = 1;
    f->o.stdio_ro = 0;
    expect_has(f, key_root, key_root_no);
    f->o.bwrap_setuid = 1;
    expect_has(f, NULL, key_setuid_no);
}


/* ------------------------------------------------------------------------ */
/* Golden: the whole plan (argv, created, ro_why, warnings or the error) for
 * a set of representative settings, one element a line, compared with
 * tests/sandbox/bwrap_argv.golden. SLUICE_GOLDEN_WRITE=1 rewrites the file
 * (only to record a deliberate change of the vector).                       */

/* s with every occurrence of the fixture's root written as R, on fp. */
static void put_rooted(FILE *fp, const struct fx *f, const char *s)
{
    size_t rl = strlen(f->root);
    const char *at;

    while ((at = strstr(s, f->root)) != NULL) {
        fwrite(s, 1, (size_t)(at - s), fp);
        fputc('R', fp);
        s = at + rl;
    }
    fputs(s, fp);
}

static void put_strv(FILE *fp, const struct fx *f, const char *label, const struct sb_strv *v)
{
    for (size_t i = 0; i < v->n; i++) {
        fprintf(fp, "%s ", label);
        put_rooted(fp, f, v->v[i]);
        fputc('\n', fp);
    }
}

static void golden_defaults(struct fx *f)
{
    (void)f;
}

static void golden_allow_write_protected(struct fx *f)
{
    mkfile(f, "home/proj/.bashrc");
    mkfile(f, "home/proj/.vscode/settings.json");
    mkfile(f, "home/proj/sub/.git/HEAD");
    mkfile(f, "home/proj/sub/.mcp.json");
    mkfile(f, "home/proj/.claude/settings.json");
    mkdir_(f, "home/cache");
    mkfile(f, "home/cache/.gitconfig");
    mkdir_(f, "home/proj/build-a");
    settings(f, "{\"filesystem\": {\"allowWrite\": [\".\", \".vscode\", \"~/cache\", "
                "\"build-?\", \"nomatch-*\", \"~/missing\", \"/dev/shm\"], "
                "\"createWrite\": [\"~/made/\", \"~/made.json\"], "
                "\"denyWrite\": [\".git/HEAD\", \"/proc/self\"]}}");
}

static void golden_deny_read(struct fx *f)
{
    mkfile(f, "home/.ssh/id_ed25519");
    mkfile(f, "home/.ssh/known_hosts");
    mkfile(f, "home/.aws/credentials");
    mkfile(f, "home/.netrc");
    mkfile(f, "home/proj/secrets/key");
    mkfile(f, "home/proj/.env");
    mkdir_(f, "home/.npm/_logs");
    settings(f, "{\"filesystem\": {\"denyRead\": [\"~/.ssh\", \"~/.aws/credentials\", "
                "\"~/.netrc\", \"~/missing\", \"secrets\", \".env\"], \"allowRead\": "
                "[\"~/.ssh/known_hosts\", \"~/.netrc\", {\"path\": \"~/gone\", "
                "\"literal\": true}]}}");
}

static void golden_deny_read_home(struct fx *f)
{
    mkfile(f, "home/.bashrc");
    mkdir_(f, "home/.npm/_logs");
    settings(f, "{\"filesystem\": {\"denyRead\": [\"~\"]}}");
}

static void golden_unix_sockets(struct fx *f)
{
    f->o.allow_unix_sockets = 1;
    f->o.inner_fd = 7;
    f->o.stdin_tty = 0;
    settings(f, "{\"network\": {\"allowLocalBinding\": true}}");
}

static void golden_nested_user(struct fx *f)
{
    settings(f, "{\"allowNestedUserNamespaces\": true, \"enableWeakerNestedSandbox\": true}");
    f->o.stdio_ro = 5;
    f->o.stdio_off[2] = 17;
}

static void golden_nested_root(struct fx *f)
{
    settings(f, "{\"allowNestedUserNamespaces\": true}");
    f->o.host_root = 1;
}

static void golden_nested_setuid(struct fx *f)
{
    settings(f, "{\"allowNestedUserNamespaces\": true}");
    f->o.host_root = 1;
    f->o.bwrap_setuid = 1;
}

static void golden_stdin_file(struct fx *f)
{
    f->o.stdio_ro = 1;
    f->o.stdio_off[0] = 42;
    f->o.host_root = 1;
}

static void golden_transparent(struct fx *f)
{
    static char resolv[PATH_MAX + 32];

    mkfile(f, "run/resolv.conf");
    snprintf(resolv, sizeof(resolv), "%s/run/resolv.conf", f->root);
    f->o.transparent = 1;
    f->o.resolv_conf = resolv;
    f->o.resolv_conf_dest = "/run/systemd/resolve/stub-resolv.conf";
    f->o.watch_writes = 1;
    f->o.guard_connect = 1;
    settings(f, "{\"network\": {\"transparent\": true}}");
}

static void golden_open_network(struct fx *f)
{
    /* the warning about it is recorded with the case */
    settings(f, "{\"network\": {\"isolate\": false}}");
    f->o.restrict_network = 0;
}

static void golden_mask_limits_tmp_self(struct fx *f)
{
    static char mask[PATH_MAX + 16], self[PATH_MAX + 32];
    char json[PATH_MAX + 64];

    mkdir_(f, "run/sluice");
    snprintf(mask, sizeof(mask), "%s/run/sluice", f->root);
    f->o.mask_dir = mask;
    snprintf(json, sizeof(json), "{\"filesystem\": {\"allowWrite\": [\".\", \"%s/run\"]}}",
             f->root);
    settings(f, json);
    settings(f, "{\"sandbox\": {\"limits\": {\"processes\": 100, \"memory\": 512, "
                "\"openFiles\": 256}}}");
    /* sluice's binary under the host's /tmp, inside a writable directory */
    mkfile(f, "home/proj/build/sluice");
    snprintf(self, sizeof(self), "%s/build/sluice", f->cwd);
    f->o.self_exe = self;
    /* run/tls_trust.c's binds: after the mask, before the own binary */
    static char dir[PATH_MAX + 32], key[PATH_MAX + 32];
    static const char *late[7];
    snprintf(dir, sizeof(dir), "%s/run/sluice/run.1/tls", f->root);
    snprintf(key, sizeof(key), "%s/home/ca.key", f->root);
    late[0] = dir, late[1] = dir, late[2] = "/dev/null", late[3] = key;
    late[4] = "odd", late[5] = NULL; /* a lone source is ignored */
    f->o.late_ro = late;
}

static void golden_disabled(struct fx *f)
{
    mkfile(f, "home/.netrc");
    settings(f, "{\"filesystem\": {\"disabled\": true, \"denyRead\": [\"~/.netrc\"], "
                "\"allowWrite\": [\"~\"], \"denyWrite\": [\".git\"]}}");
}

static void golden_cwd_hidden(struct fx *f)
{
    settings(f, "{\"filesystem\": {\"denyRead\": [\"~\"], \"allowWrite\": [\"~/other\"]}}");
}

static void golden_bad_tilde(struct fx *f)
{
    settings(f, "{\"filesystem\": {\"allowWrite\": [\"~user/x\"]}}");
}

static const struct {
    const char *name;
    void (*fn)(struct fx *f);
} golden_cases[] = {
    {"defaults", golden_defaults},
    {"allowWrite with protected names", golden_allow_write_protected},
    {"denyRead", golden_deny_read},
    {"denyRead home", golden_deny_read_home},
    {"allowUnixSockets", golden_unix_sockets},
    {"nested, user", golden_nested_user},
    {"nested, root", golden_nested_root},
    {"nested, setuid bwrap", golden_nested_setuid},
    {"read-only stdin file", golden_stdin_file},
    {"transparent", golden_transparent},
    {"isolate false", golden_open_network},
    {"mask, limits, own binary", golden_mask_limits_tmp_self},
    {"filesystem disabled", golden_disabled},
    {"working directory hidden", golden_cwd_hidden},
    {"bad tilde", golden_bad_tilde},
};

/* One case: its plan, or its error, with its warnings, on out. */
static void golden_case(FILE *out, size_t i)
{
    void *state = NULL;
    struct fx *f;
    struct sb_plan p;
    char err[1024] = "", *warn = NULL;
    size_t warnlen = 0;
    FILE *w;
    int rc;

    assert_int_equal(setup(&state), 0);
    f = state;
    golden_cases[i].fn(f);
    w = open_memstream(&warn, &warnlen);
    assert_non_null(w);
    f->o.warn = w;
    memset(&p, 0, sizeof(p));
    rc = sb_bwrap_build(&f->o, &p, err, sizeof(err));
    fclose(w);
    fprintf(out, "== %s: %d\n", golden_cases[i].name, rc);
    put_strv(out, f, "argv", &p.argv);
    put_strv(out, f, "created", &p.created);
    put_strv(out, f, "ro_why", &p.ro_why);
    if (warn[0] != '\0') {
        fputs("warn ", out);
        put_rooted(out, f, warn);
    }
    if (rc != 0) {
        fputs("error ", out);
        put_rooted(out, f, err);
        fputc('\n', out);
    }
    free(warn);
    sb_plan_free(&p);
    assert_int_equal(teardown(&state), 0);
}

static void test_golden(void **state)
{
    const char *data = getenv("SLUICE_TEST_DATA"), *write = getenv("SLUICE_GOLDEN_WRITE");
    char path[PATH_MAX + 64], *got = NULL, *want = NULL;
    size_t gotlen = 0, wantlen = 0;
    FILE *out, *fp;

    (void)state;
    if (data == NULL)
        skip();
    snprintf(path, sizeof(path), "%s/../sandbox/bwrap_argv.golden", data);
    out = open_memstream(&got, &gotlen);
    assert_non_null(out);
    for (size_t i = 0; i < sizeof(golden_cases) / sizeof(golden_cases[0]); i++)
        golden_case(out, i);
    fclose(out);
    if (write != NULL && strcmp(write, "1") == 0) {
        fp = fopen(path, "w");
        assert_non_null(fp);
        fputs(got, fp);
        assert_int_equal(fclose(fp), 0);
    }
    fp = fopen(path, "r");
    if (fp == NULL)
        fail_msg("%s: %s", path, strerror(errno));
    assert_int_equal(getdelim(&want, &wantlen, '\0', fp) >= 0, 1);
    fclose(fp);
    if (strcmp(got, want) != 0)
        print_error("--- got:\n%s\n--- want (%s):\n%s\n", got, path, want);
    assert_string_equal(got, want);
    free(got);
    free(want);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_minimal_sequence),
        T(test_flags),
        T(test_command_argv_verbatim),
        T(test_allow_write),
        T(test_allow_write_globs),
        T(test_allow_write_symlink_escape),
        T(test_symlinked_home),
        T(test_tilde_errors),
        T(test_home_variable),
    T(test_trailing_double_star),
    T(test_glob_no_match_warns),
    T(test_literal_entries),
    T(test_literal_missing_warns),
    T(test_root_refused),
        T(test_deny_write),
        T(test_deny_read_and_allow_read),
        T(test_deny_read_around_writable),
        T(test_cwd_hidden),
        T(test_protected_in_cwd),
        T(test_own_files_protected),
        T(test_inner_exe),
        T(test_filesystem_disabled),
        T(test_no_secret_in_argv),
        T(test_cleanup),
        T(test_bad_options),
        T(test_profile_strict_home),
        T(test_profile_workdir),
        T(test_deny_read_relative_globs),
        T(test_cwd_special),
        T(test_mask_and_limits),
        T(test_nested_userns),
        cmocka_unit_test(test_golden),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
