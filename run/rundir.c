/* run/rundir.c - what `sluice run` checks on the host before it starts
 * bwrap (bwrap in PATH, user namespaces, the working directory, the
 * permission layers' excludedCommands). The private run directory is
 * run/reaper.c's. */
#define _GNU_SOURCE
#include "run/launch-int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

const char *run_find_in_path(const char *name, char *buf, size_t len)
{
    const char *path = getenv("PATH");
    const char *p;

    if (strchr(name, '/') != NULL)
        return access(name, X_OK) == 0 ? name : NULL;
    if (path == NULL || path[0] == '\0')
        path = "/usr/local/bin:/usr/bin:/bin";
    for (p = path;;) {
        const char *e = strchr(p, ':');
        size_t n = e != NULL ? (size_t)(e - p) : strlen(p);
        if (n > 0 && (size_t)snprintf(buf, len, "%.*s/%s", (int)n, p, name) < len &&
            access(buf, X_OK) == 0)
            return buf;
        if (e == NULL)
            break;
        p = e + 1;
    }
    return NULL;
}

/* PATH is an executable regular file, not a symbolic link (which could
 * name any program of root's), that only root or OWNER may change (its
 * owner one of them; no write bit for group or others). */
static int trusted_exe(const char *path, uid_t owner)
{
    struct stat st;

    return lstat(path, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0022) == 0 &&
           (st.st_uid == 0 || st.st_uid == owner) && access(path, X_OK) == 0;
}

const char *run_inner_spot(const char *self, char *buf, size_t len)
{
    const char *slash = strrchr(self, '/');

    if (slash == NULL ||
        (size_t)snprintf(buf, len, "%.*s/sluice-inner", (int)(slash - self), self) >= len)
        return NULL;
    return buf;
}

const char *run_find_inner(const char *self, char *buf, size_t len)
{
    const char *slash = strrchr(self, '/');
    size_t dir = slash != NULL ? (size_t)(slash - self) : 0;
    struct stat st;

    if (slash == NULL || stat(self, &st) != 0)
        return NULL;
    /* beside the binary: a build tree, or a package that puts both in
     * one directory; the same owner as sluice's own file (a sandbox keeps
     * this name as it is: sb_bwrap_opts.inner_spot) */
    if (run_inner_spot(self, buf, len) != NULL && trusted_exe(buf, st.st_uid))
        return buf;
#if defined(SLUICE_BINDIR) && defined(SLUICE_LIBEXECDIR)
    /* the installed pair: only for the installed sluice, so that a copy
     * elsewhere never meets an inner of another version */
    if (strlen(SLUICE_BINDIR) == dir && strncmp(self, SLUICE_BINDIR, dir) == 0 &&
        (size_t)snprintf(buf, len, "%s/sluice/sluice-inner", SLUICE_LIBEXECDIR) < len &&
        trusted_exe(buf, 0))
        return buf;
#endif
    return NULL;
}

static int read_int_file(const char *path, long *out)
{
    FILE *f = fopen(path, "re");
    int ok;

    if (f == NULL)
        return -1;
    ok = fscanf(f, "%ld", out) == 1;
    fclose(f);
    return ok ? 0 : -1;
}

const char *run_namespaces_problem(int bwrap_setuid)
{
    long v;

    if (bwrap_setuid)
        return NULL;
    if (read_int_file("/proc/sys/user/max_user_namespaces", &v) == 0 && v == 0)
        return "user namespaces are disabled (user.max_user_namespaces = 0): enable them with "
               "'sysctl -w user.max_user_namespaces=15000', or make bwrap setuid root";
    if (geteuid() != 0 && read_int_file("/proc/sys/kernel/unprivileged_userns_clone", &v) == 0 &&
        v == 0)
        return "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone = 0): "
               "enable them with 'sysctl -w kernel.unprivileged_userns_clone=1', or make bwrap "
               "setuid root";
    if (geteuid() != 0 &&
        read_int_file("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", &v) == 0 && v == 1)
        return "AppArmor restricts unprivileged user namespaces "
               "(kernel.apparmor_restrict_unprivileged_userns = 1): add an AppArmor profile "
               "for bwrap or set the sysctl to 0";
    return NULL;
}

/* The run directory is made, removed and swept by run/reaper.c
 * (issue 14: private to its run, nothing left after a SIGKILL). */

/* ------------------------------------------------------------------------ */
/* Permission layers                                                         */

int run_is_excluded(const struct settings *s, const char *cmd)
{
    for (size_t i = 0; i < s->sandbox.excluded_commands.n; i++) {
        const char *e = s->sandbox.excluded_commands.items[i].value;
        size_t n = strlen(e);
        if (strcmp(cmd, e) == 0)
            return 1;
        if (strncmp(cmd, e, n) == 0 && cmd[n] == ' ')
            return 1;
        if (n >= 2 && strcmp(e + n - 2, ":*") == 0 && strncmp(cmd, e, n - 2) == 0)
            return 1;
    }
    return 0;
}

char *run_join_args(char *const *argv)
{
    size_t n = 1;
    char *s, *p;

    for (size_t i = 0; argv[i] != NULL; i++)
        n += strlen(argv[i]) + 1;
    s = malloc(n);
    if (s == NULL)
        return NULL;
    p = s;
    for (size_t i = 0; argv[i] != NULL; i++) {
        size_t l = strlen(argv[i]);
        if (i > 0)
            *p++ = ' ';
        memcpy(p, argv[i], l);
        p += l;
    }
    *p = '\0';
    return s;
}

/* ".git", ".vscode" or ".idea" when one of them, in any case, is a
 * component of PATH (issue 21): a
 * writable root there would make hooks or editor tasks writable (the
 * protected-file scan looks below a root, not at where it is). */
const char *run_protected_component(const char *path)
{
    static const char *const names[] = {".git", ".vscode", ".idea"};

    for (const char *p = path; p != NULL && *p != '\0'; p = strchr(p + 1, '/')) {
        const char *c = *p == '/' ? p + 1 : p;
        size_t n = strcspn(c, "/");
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
            if (n == strlen(names[i]) && strncasecmp(c, names[i], n) == 0)
                return names[i];
    }
    return NULL;
}

/* The working directory exists inside unless it is under the private /tmp
 * and no bind of the plan (after the /tmp one) covers it. */
int run_cwd_visible(const struct sb_plan *plan, const char *cwd)
{
    if (strcmp(cwd, "/tmp") != 0 && strncmp(cwd, "/tmp/", 5) != 0)
        return 1;
    for (size_t i = 0; i + 2 < plan->argv.n; i++) {
        const char *op = plan->argv.v[i], *dest = plan->argv.v[i + 2];
        size_t n = strlen(dest);
        if (strcmp(op, "--") == 0)
            break;
        if (strcmp(op, "--bind") != 0 && strcmp(op, "--ro-bind") != 0)
            continue;
        if (strcmp(dest, "/tmp") == 0 || strcmp(dest, "/") == 0)
            continue;
        if (strncmp(cwd, dest, n) == 0 && (cwd[n] == '\0' || cwd[n] == '/'))
            return 1;
    }
    return 0;
}
