/* sandbox/env.c - the environment of a sandboxed command.
 *
 * The same vector is bwrap's environment and, through bwrap and `inner`, the
 * command's: PID 1 inside is bwrap and its /proc/1/environ is readable from
 * inside, so nothing may be in it that the command must not see.
 *
 * Each host variable, first occurrence of a name only (a later duplicate is
 * dropped, as getenv(3) would never see it), is judged in this order:
 *   1. malformed (no '=' or an empty name): dropped;
 *   2. a variable sluice sets itself: dropped, sluice's own value is added
 *      below. SANDBOX_RUNTIME and TMPDIR always; when sluice provides
 *      proxies (a port is not 0) also every proxy variable of the host: any
 *      name ending in _PROXY in any case (HTTP_PROXY, no_proxy,
 *      npm_config_https_proxy, ...), CLOUDSDK_PROXY_* and GIT_SSH_COMMAND.
 *      They would point where the sandbox cannot go (and may carry proxy
 *      credentials); environment.allow does not re-admit them;
 *   3. environment.deny matches: dropped (deny lists are united across
 *      layers, so a managed deny wins over any allow);
 *   4. environment.allow matches: kept, even if on a list below;
 *   5. environment.inherit is false: dropped (only allowed names pass);
 *   6. on the built-in secret list (secret_globs, names compared
 *      upper-cased), a value that is a URL with credentials, or on the
 *      loader list (loader_names): dropped;
 *   7. kept.
 * A host variable named in environment.set is dropped (replaced), and so is
 * PATH when environment.pathAppend is not empty (rebuilt below).
 *
 * Then, in this order:
 *   - environment.set, in the order of the settings: NAME=VALUE, a VALUE of
 *     "~" or "~/..." taken under the host's $HOME (its first occurrence in
 *     host_env, trailing '/' dropped). A name environment.deny matches is
 *     not set (a managed deny wins); names sluice sets itself and the loader
 *     names, which the loader refuses, are skipped here too;
 *   - PATH, when environment.pathAppend is not empty: the base is the PATH
 *     set above, else the host's PATH if it passed the steps above, else
 *     "/usr/local/bin:/usr/bin:/bin"; every appended directory ("~"
 *     expanded as above) is removed from wherever it is in the base and
 *     added at the end, in list order, once. So the system directories are
 *     always searched first (reference 002: a program planted in
 *     ~/.local/bin cannot shadow a standard command). environment.deny
 *     matching PATH wins: no PATH at all;
 *   - sluice's own variables, each name exactly once.
 *
 * *out is replaced on success (it must be zeroed or hold an earlier vector)
 * and untouched on failure.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox/sandbox.h"

/* Built-in secret list: case-sensitive globs on the name ('*' is any run of
 * characters, possibly empty). A variable on it is dropped unless
 * environment.allow names it. Each entry names a credential (a token,
 * password, passphrase or key), a handle that uses one without revealing it
 * (an agent socket, a credential cache, a session), or credentials that CI
 * systems pass either inline or as a file (*_CREDENTIALS, which covers
 * GOOGLE_APPLICATION_CREDENTIALS). The suffix globs cover GITHUB_TOKEN,
 * GH_TOKEN, NPM_TOKEN, NODE_AUTH_TOKEN, HF_TOKEN, VAULT_TOKEN,
 * ANTHROPIC_API_KEY, OPENAI_API_KEY, *_API_KEY, *_SECRET_KEY, *_PRIVATE_KEY,
 * TWINE_PASSWORD and the like. Deliberately absent: KUBECONFIG, NETRC and
 * other plain paths to credential files (dropping the name does not hide the
 * file, which tools find at its default place anyway: hide it with
 * filesystem.denyRead), and a *_PWD glob (a name ending in PWD more often
 * holds a working directory than a password; MYSQL_PWD is listed by name). */
static const char *const secret_globs[] = {
    "SSH_AUTH_SOCK",  /* ssh-agent: signs with keys the command cannot read */
    "GPG_AGENT_INFO", /* gpg-agent, likewise */
    "KRB5CCNAME",     /* Kerberos credential cache */
    "*_TOKEN",
    "*_SECRET",
    "*_PASSWORD",
    "*_PASSWD",
    "*_PASS", /* SMTP_PASS, DB_PASS: a password under a short name */
    "*_PASSPHRASE",
    "*_KEY",
    "*_CREDENTIALS",
    "*_WEBHOOK_URL", /* a Slack or Discord webhook URL is a bearer secret */
    "AWS_*",         /* every AWS variable: keys, session tokens, profiles */
    "AZURE_*",
    "OP_SESSION_*", /* 1Password CLI sessions */
    "DOCKER_AUTH_CONFIG",
    "PGPASSWORD",
    "MYSQL_PWD",
    "DATABASE_URL", /* usually postgres://user:password@host/db */
    /* issue 14: what a secret scanner flags besides */
    "*_SECRET*",   /* *_SECRETS, *_SECRET_ACCESS_KEY, *_SECRET_ID */
    "*_APIKEY",
    "*_API_KEY*",  /* *_API_KEY_ID, *_API_KEYS */
    "*_DSN",       /* SENTRY_DSN: https://KEY@host/project */
    "*_AUTH",      /* NPM_CONFIG__AUTH, *_BASIC_AUTH */
    "*_COOKIE",
};
/* The names are compared upper-cased: github_token, db_password and
 * npm_config__auth are the same secrets. A variable whose VALUE is a URL
 * with a password in it (scheme://user:password@host) is dropped whatever
 * its name, and so is one named *_URL or *_URI with any user part
 * (https://TOKEN@github.com): see url_has_credentials(). */

/* Dynamic-loader variables that make every program (sluice's own `inner`
 * first, before its seccomp filter is loaded) run host-chosen code: dropped
 * unless environment.allow names them. LD_LIBRARY_PATH is kept: it only
 * changes where libraries are looked up, and toolchains need it. */
static const char *const loader_names[] = {
    "LD_PRELOAD",
    "LD_AUDIT",
};

/* NO_PROXY / no_proxy: reference 000's list. Inside the network namespace a
 * direct connection to these fails; the list only keeps tools from sending
 * local names to the proxy. */
#define SB_NO_PROXY                                                                                \
    "localhost,127.0.0.1,::1,*.local,.local,169.254.0.0/16,10.0.0.0/8,172.16.0.0/12,"              \
    "192.168.0.0/16"

/* The listeners `inner` makes inside the namespace. */
#define SB_PROXY_HOST "127.0.0.1"

/* '*' matches any run of characters; everything else matches itself. */
static int glob_match(const char *pat, const char *name, size_t len)
{
    const char *star = NULL;
    size_t i = 0, back = 0;

    while (i < len) {
        if (*pat == '*') {
            star = pat++;
            back = i;
        } else if (*pat != '\0' && *pat == name[i]) {
            pat++;
            i++;
        } else if (star != NULL) {
            pat = star + 1;
            i = ++back;
        } else {
            return 0;
        }
    }
    while (*pat == '*')
        pat++;
    return *pat == '\0';
}

static int match_table(const char *const *t, size_t n, const char *name, size_t len)
{
    for (size_t i = 0; i < n; i++)
        if (glob_match(t[i], name, len))
            return 1;
    return 0;
}

static int match_list(const struct settings_list *l, const char *name, size_t len)
{
    for (size_t i = 0; i < l->n; i++)
        if (glob_match(l->items[i].value, name, len))
            return 1;
    return 0;
}

#define COUNT(t) (sizeof(t) / sizeof((t)[0]))

/* The secret list, on NAME upper-cased (a name too long for the buffer is
 * compared as it is, and also with its first 255 bytes upper-cased). */
static int is_secret_name(const char *name, size_t len)
{
    char up[256];
    size_t n = len < sizeof(up) ? len : sizeof(up);

    for (size_t i = 0; i < n; i++)
        up[i] = (name[i] >= 'a' && name[i] <= 'z') ? (char)(name[i] - 'a' + 'A') : name[i];
    if (match_table(secret_globs, COUNT(secret_globs), up, n))
        return 1;
    return len > n && match_table(secret_globs, COUNT(secret_globs), name, len);
}

/* 1 when NAME (LEN bytes) ends with SUFFIX (upper case), in any ASCII case. */
static int has_suffix_ci(const char *name, size_t len, const char *suffix)
{
    size_t sl = strlen(suffix);

    if (len < sl)
        return 0;
    for (size_t i = 0; i < sl; i++) {
        char ch = name[len - sl + i];
        if (ch >= 'a' && ch <= 'z')
            ch = (char)(ch - 'a' + 'A');
        if (ch != suffix[i])
            return 0;
    }
    return 1;
}

/* 1 when VALUE holds "SCHEME://USERINFO@" with a password (a ':' in
 * USERINFO), or with any USERINFO when any_user (a *_URL or *_URI name:
 * https://TOKEN@host is how tokens ride in URLs). Every "://" in the value
 * is looked at (a list of URLs). */
static int url_has_credentials(const char *value, int any_user)
{
    for (const char *p = strstr(value, "://"); p != NULL; p = strstr(p + 1, "://")) {
        const char *a = p + 3;
        size_t alen = strcspn(a, "/?#\\ \t,;");
        const char *at = memchr(a, '@', alen);
        if (at == NULL || at == a)
            continue;
        if (any_user || memchr(a, ':', (size_t)(at - a)) != NULL)
            return 1;
    }
    return 0;
}

/* Step 6 for NAME=VALUE (E), NAME being LEN bytes. */
static int is_secret_var(const char *e, size_t len)
{
    const char *value = e[len] == '=' ? e + len + 1 : "";

    if (is_secret_name(e, len))
        return 1;
    return url_has_credentials(value, has_suffix_ci(e, len, "_URL") ||
                                          has_suffix_ci(e, len, "_URI"));
}

int sb_env_is_secret(const char *name)
{
    if (name == NULL)
        return 0;
    return is_secret_name(name, strlen(name));
}

static int is_loader(const char *name, size_t len)
{
    return match_table(loader_names, COUNT(loader_names), name, len);
}

/* A host variable sluice replaces with its own (step 2). */
static int is_owned(const char *name, size_t len, int proxies)
{
    if (glob_match("SANDBOX_RUNTIME", name, len) || glob_match("TMPDIR", name, len))
        return 1;
    if (!proxies)
        return 0;
    return has_suffix_ci(name, len, "_PROXY") || glob_match("CLOUDSDK_PROXY_*", name, len) ||
           glob_match("GIT_SSH_COMMAND", name, len);
}

/* ------------------------------------------------------------------------ */
/* A set of names seen, for first-occurrence-wins                            */

struct name_set {
    const char **name; /* points into the host environment */
    size_t *len;
    size_t size; /* power of two */
};

static size_t name_hash(const char *s, size_t len)
{
    size_t h = 1469598103934665603u;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211u;
    return h;
}

static int name_set_init(struct name_set *ns, size_t n)
{
    size_t size = 16;

    while (size < 2 * n + 1) {
        if (size > SIZE_MAX / 4 / sizeof(size_t))
            return -ENOMEM;
        size *= 2;
    }
    ns->name = calloc(size, sizeof(*ns->name));
    ns->len = calloc(size, sizeof(*ns->len));
    ns->size = size;
    if (ns->name == NULL || ns->len == NULL)
        return -ENOMEM;
    return 0;
}

static void name_set_free(struct name_set *ns)
{
    free(ns->name);
    free(ns->len);
}

/* 1 when the name was already in the set; otherwise adds it and returns 0. */
static int name_set_add(struct name_set *ns, const char *name, size_t len)
{
    size_t mask = ns->size - 1, h = name_hash(name, len) & mask;

    while (ns->name[h] != NULL) {
        if (ns->len[h] == len && memcmp(ns->name[h], name, len) == 0)
            return 1;
        h = (h + 1) & mask;
    }
    ns->name[h] = name;
    ns->len[h] = len;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* GIT_SSH_COMMAND                                                           */

/* Appends s to buf for a POSIX shell: as is when it is made of characters
 * no shell treats specially, else in single quotes (' written as '\''). */
static int shell_quote(char *buf, size_t size, size_t *o, const char *s)
{
    int plain = s[0] != '\0';

    for (const char *p = s; *p && plain; p++) {
        char ch = *p;
        plain = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                strchr("@%+=:,./_-", ch) != NULL;
    }
    if (plain) {
        size_t n = strlen(s);
        if (*o + n >= size)
            return -ENAMETOOLONG;
        memcpy(buf + *o, s, n);
        *o += n;
        buf[*o] = '\0';
        return 0;
    }
    if (*o + 1 >= size)
        return -ENAMETOOLONG;
    buf[(*o)++] = '\'';
    for (const char *p = s; *p; p++) {
        if (*p == '\'') {
            if (*o + 4 >= size)
                return -ENAMETOOLONG;
            memcpy(buf + *o, "'\\''", 4);
            *o += 4;
        } else {
            if (*o + 1 >= size)
                return -ENAMETOOLONG;
            buf[(*o)++] = *p;
        }
    }
    if (*o + 1 >= size)
        return -ENAMETOOLONG;
    buf[(*o)++] = '\'';
    buf[*o] = '\0';
    return 0;
}

/* ssh -o ProxyCommand='SELF connect [--proxy 127.0.0.1:PORT] %h %p'.
 *
 * git runs GIT_SSH_COMMAND with sh -c; ssh expands %-tokens in the
 * ProxyCommand and runs the result with $SHELL -c "exec ...". So SELF gets
 * '%' doubled (ssh), is quoted for the inner shell, and the whole
 * ProxyCommand is quoted again for git's shell. `sluice connect` defaults to
 * the proxy at 127.0.0.1:3128. */
static int git_ssh_command(const char *self, unsigned http_port, char **out)
{
    size_t n = strlen(self), o = 0, size;
    char *pself = NULL, *inner = NULL, *cmd = NULL;
    int rc = -ENOMEM;

    for (size_t i = 0; i < n; i++)
        if ((unsigned char)self[i] < 0x20 || self[i] == 0x7f)
            return -EINVAL;
    if (n > 4096)
        return -ENAMETOOLONG;
    pself = malloc(2 * n + 1);
    if (pself == NULL)
        goto out;
    for (size_t i = 0; i < n; i++) {
        pself[o++] = self[i];
        if (self[i] == '%')
            pself[o++] = '%';
    }
    pself[o] = '\0';

    size = 4 * o + 128; /* quoting at most quadruples; the rest is short */
    inner = malloc(size);
    cmd = malloc(4 * size + 64);
    if (inner == NULL || cmd == NULL)
        goto out;
    o = 0;
    inner[0] = '\0';
    rc = shell_quote(inner, size, &o, pself);
    if (rc < 0)
        goto out;
    if (http_port == 3128)
        snprintf(inner + o, size - o, " connect %%h %%p");
    else
        snprintf(inner + o, size - o, " connect --proxy %s:%u %%h %%p", SB_PROXY_HOST, http_port);

    o = (size_t)snprintf(cmd, 4 * size + 64, "ssh -o ProxyCommand=");
    rc = shell_quote(cmd, 4 * size + 64, &o, inner);
    if (rc < 0)
        goto out;
    *out = cmd;
    cmd = NULL;
    rc = 0;
out:
    free(pself);
    free(inner);
    free(cmd);
    return rc;
}

/* ------------------------------------------------------------------------ */

static int push_var(struct sb_strv *a, const char *name, const char *value)
{
    return sb_strv_pushf(a, "%s=%s", name, value);
}

/* Sluice's own variables (reference 000 "Complete Environment Variable
 * List", with three corrections: gRPC only speaks to http:// proxies
 * (grpc_proxy=socks5h:// makes it give up on proxies altogether), rsync's
 * RSYNC_PROXY is an HTTP CONNECT proxy, and gcloud's proxy types are http,
 * http_no_tunnel, socks4 and socks5, not https). */
static int add_own(const struct sb_env_opts *o, struct sb_strv *a, char *err, size_t errlen)
{
    char http[64], socks[64], port[16];
    char *ssh = NULL;
    int rc = 0;

    snprintf(http, sizeof(http), "http://%s:%u", SB_PROXY_HOST, o->http_port);
    snprintf(socks, sizeof(socks), "socks5h://%s:%u", SB_PROXY_HOST, o->socks_port);
    snprintf(port, sizeof(port), "%u", o->http_port);

    if (o->http_port != 0) {
        rc = git_ssh_command(o->self_exe, o->http_port, &ssh);
        if (rc < 0) {
            snprintf(err, errlen, "environment: cannot build GIT_SSH_COMMAND from '%s': %s",
                     o->self_exe, rc == -EINVAL ? "control character in the path" : strerror(-rc));
            return rc;
        }
    }

#define PUSH(n, v)                                                                                 \
    do {                                                                                           \
        if (rc == 0)                                                                               \
            rc = push_var(a, n, v);                                                                \
    } while (0)
    PUSH("SANDBOX_RUNTIME", "1");
    if (o->tmpdir != NULL)
        PUSH("TMPDIR", o->tmpdir);
    if (o->http_port != 0 || o->socks_port != 0) {
        PUSH("NO_PROXY", SB_NO_PROXY);
        PUSH("no_proxy", SB_NO_PROXY);
    }
    if (o->http_port != 0) {
        char rsync[48];
        snprintf(rsync, sizeof(rsync), "%s:%u", SB_PROXY_HOST, o->http_port);
        PUSH("HTTP_PROXY", http);
        PUSH("HTTPS_PROXY", http);
        PUSH("http_proxy", http);
        PUSH("https_proxy", http);
        PUSH("DOCKER_HTTP_PROXY", http);
        PUSH("DOCKER_HTTPS_PROXY", http);
        PUSH("CLOUDSDK_PROXY_TYPE", "http");
        PUSH("CLOUDSDK_PROXY_ADDRESS", SB_PROXY_HOST);
        PUSH("CLOUDSDK_PROXY_PORT", port);
        PUSH("GRPC_PROXY", http);
        PUSH("grpc_proxy", http);
        PUSH("RSYNC_PROXY", rsync);
        PUSH("NODE_USE_ENV_PROXY", "1");
        PUSH("GIT_SSH_COMMAND", ssh);
    }
    if (o->socks_port != 0) {
        PUSH("ALL_PROXY", socks);
        PUSH("all_proxy", socks);
        PUSH("FTP_PROXY", socks);
        PUSH("ftp_proxy", socks);
    }
#undef PUSH
    free(ssh);
    if (rc < 0)
        snprintf(err, errlen, "environment: out of memory");
    return rc;
}

/* JAVA_TOOL_OPTIONS: the JVM ignores HTTP_PROXY, so its proxy system
 * properties go here (after the host's own options, when they passed the
 * filters: a later -D wins), and -javaagent:PATH for javaAgentJarPath. */
static int add_java(const struct sb_env_opts *o, const char *host_value, struct sb_strv *a,
                    char *err, size_t errlen)
{
    const char *agent = o->s->java_agent_jar_path;
    char props[256] = "";
    int rc;

    if (o->http_port != 0)
        snprintf(props, sizeof(props),
                 "-Dhttp.proxyHost=%s -Dhttp.proxyPort=%u -Dhttps.proxyHost=%s "
                 "-Dhttps.proxyPort=%u -Dhttp.nonProxyHosts=localhost|127.0.0.1|[::1]",
                 SB_PROXY_HOST, o->http_port, SB_PROXY_HOST, o->http_port);
    if (props[0] == '\0' && agent == NULL) {
        if (host_value == NULL)
            return 0;
        rc = push_var(a, "JAVA_TOOL_OPTIONS", host_value);
    } else {
        rc = sb_strv_pushf(a, "JAVA_TOOL_OPTIONS=%s%s%s%s%s%s",
                           host_value != NULL ? host_value : "",
                           host_value != NULL && host_value[0] != '\0' ? " " : "", props,
                           props[0] != '\0' && agent != NULL ? " " : "",
                           agent != NULL ? "-javaagent:" : "", agent != NULL ? agent : "");
    }
    if (rc < 0)
        snprintf(err, errlen, "environment: out of memory");
    return rc;
}

/* ------------------------------------------------------------------------ */
/* environment.set and environment.pathAppend                                */

#define SB_DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin"

static int is_named(const struct settings_map *m, const char *name, size_t len)
{
    for (size_t i = 0; i < m->n; i++)
        if (strlen(m->pairs[i].key) == len && memcmp(m->pairs[i].key, name, len) == 0)
            return 1;
    return 0;
}

/* "~" and "~/..." under home (NULL: not set); anything else as is. Returns a
 * new string, or NULL with err filled. */
static char *expand_home(const char *v, const char *home, const char *what, char *err,
                         size_t errlen)
{
    size_t hl;
    char *r;

    if (!(v[0] == '~' && (v[1] == '\0' || v[1] == '/'))) {
        r = strdup(v);
        if (r == NULL)
            snprintf(err, errlen, "environment: out of memory");
        return r;
    }
    if (home == NULL || home[0] != '/') {
        snprintf(err, errlen, "%s: '%s' needs $HOME, which is not set to an absolute path", what,
                 v);
        return NULL;
    }
    hl = strlen(home);
    while (hl > 1 && home[hl - 1] == '/')
        hl--;
    if (hl == 1 && v[1] == '/')
        hl = 0; /* HOME=/: "~/x" is "/x" */
    r = malloc(hl + strlen(v + 1) + 1);
    if (r == NULL) {
        snprintf(err, errlen, "environment: out of memory");
        return NULL;
    }
    memcpy(r, home, hl);
    memcpy(r + hl, v + 1, strlen(v + 1) + 1);
    return r;
}

/* PATH=BASE with each of dirs moved to the end (see the top). */
static int build_path(const char *base, const struct sb_strv *dirs, struct sb_strv *a, char *err,
                      size_t errlen)
{
    size_t size = strlen("PATH=") + strlen(base) + 1, o;
    char *buf;
    const char *s = base;
    int first = 1, rc;

    for (size_t i = 0; i < dirs->n; i++)
        size += strlen(dirs->v[i]) + 1;
    buf = malloc(size);
    if (buf == NULL) {
        snprintf(err, errlen, "environment: out of memory");
        return -ENOMEM;
    }
    memcpy(buf, "PATH=", 5);
    o = 5;
    for (;;) {
        size_t n = strcspn(s, ":");
        int drop = 0;

        for (size_t i = 0; i < dirs->n && !drop; i++)
            drop = strlen(dirs->v[i]) == n && memcmp(dirs->v[i], s, n) == 0;
        if (!drop) {
            if (!first)
                buf[o++] = ':';
            memcpy(buf + o, s, n);
            o += n;
            first = 0;
        }
        if (s[n] == '\0')
            break;
        s += n + 1;
    }
    for (size_t i = 0; i < dirs->n; i++) {
        int dup = 0;
        for (size_t j = 0; j < i && !dup; j++)
            dup = strcmp(dirs->v[i], dirs->v[j]) == 0;
        if (dup)
            continue;
        if (!first)
            buf[o++] = ':';
        size_t n = strlen(dirs->v[i]);
        memcpy(buf + o, dirs->v[i], n);
        o += n;
        first = 0;
    }
    buf[o] = '\0';
    rc = sb_strv_push(a, buf);
    free(buf);
    if (rc < 0)
        snprintf(err, errlen, "environment: out of memory");
    return rc;
}

/* Appends environment.set and the rebuilt PATH to a. host_path is the host's
 * PATH value when it passed the filters (NULL otherwise). */
static int add_settings(const struct settings *s, const char *home, const char *host_path,
                        struct sb_strv *a, char *err, size_t errlen)
{
    const struct settings_map *m = &s->environment.set;
    const struct settings_list *pl = &s->environment.path_append;
    struct sb_strv dirs = {0};
    char *set_path = NULL;
    int rc = 0;

    for (size_t i = 0; i < m->n && rc == 0; i++) {
        const char *name = m->pairs[i].key;
        size_t len = strlen(name);
        char what[160], *v;

        if (len == 0 || match_list(&s->environment.deny, name, len) || is_owned(name, len, 1) ||
            is_loader(name, len))
            continue;
        snprintf(what, sizeof(what), "environment.set.%s", name);
        v = expand_home(m->pairs[i].value, home, what, err, errlen);
        if (v == NULL) {
            rc = -EINVAL;
            break;
        }
        if (pl->n > 0 && strcmp(name, "PATH") == 0) {
            free(set_path);
            set_path = v;
            continue;
        }
        rc = push_var(a, name, v);
        free(v);
        if (rc < 0)
            snprintf(err, errlen, "environment: out of memory");
    }
    if (rc == 0 && pl->n > 0 && !match_list(&s->environment.deny, "PATH", 4)) {
        for (size_t i = 0; i < pl->n && rc == 0; i++) {
            const struct settings_item *it = &pl->items[i];
            char what[600], *v;

            snprintf(what, sizeof(what), "%s:%u:%u: %s[%zu]", it->file, it->line, it->col,
                     it->list, it->index);
            v = expand_home(it->value, home, what, err, errlen);
            if (v == NULL) {
                rc = -EINVAL;
                break;
            }
            rc = sb_strv_push(&dirs, v);
            free(v);
            if (rc < 0)
                snprintf(err, errlen, "environment: out of memory");
        }
        if (rc == 0)
            rc = build_path(set_path != NULL    ? set_path
                            : host_path != NULL ? host_path
                                                : SB_DEFAULT_PATH,
                            &dirs, a, err, errlen);
    }
    free(set_path);
    sb_strv_free(&dirs);
    return rc;
}

/* git.safeDirectories: each entry becomes a safe.directory through git's
 * environment configuration (GIT_CONFIG_COUNT, GIT_CONFIG_KEY_n,
 * GIT_CONFIG_VALUE_n, git 2.31+), after any such entries passed from the
 * host, so git inside the sandbox trusts those repositories ("dubious
 * ownership" otherwise, e.g. a repository owned by another user). "~" and
 * "~/..." expand with $HOME. */
static int add_git_safe(const struct settings *s, const char *home, struct sb_strv *a,
                        char *err, size_t errlen)
{
    const struct settings_list *l = &s->git_safe_directories;
    unsigned long base = 0;
    int rc = 0;

    if (l->n == 0)
        return 0;
    for (size_t i = 0; i < a->n; i++) {
        if (strncmp(a->v[i], "GIT_CONFIG_COUNT=", 17) == 0) {
            char *end;
            errno = 0;
            base = strtoul(a->v[i] + 17, &end, 10);
            if (errno != 0 || *end != '\0' || base > 10000)
                base = 0;
            free(a->v[i]);
            memmove(&a->v[i], &a->v[i + 1], (a->n - i) * sizeof(*a->v)); /* with the NULL */
            a->n--;
            break;
        }
    }
    for (size_t i = 0; i < l->n && rc == 0; i++) {
        const struct settings_item *it = &l->items[i];
        char what[600], *v;

        snprintf(what, sizeof(what), "%s:%u:%u: %s[%zu]", it->file, it->line, it->col, it->list,
                 it->index);
        v = expand_home(it->value, home, what, err, errlen);
        if (v == NULL)
            return -EINVAL;
        rc = sb_strv_pushf(a, "GIT_CONFIG_KEY_%lu=safe.directory", base + i);
        if (rc == 0)
            rc = sb_strv_pushf(a, "GIT_CONFIG_VALUE_%lu=%s", base + i, v);
        free(v);
    }
    if (rc == 0)
        rc = sb_strv_pushf(a, "GIT_CONFIG_COUNT=%lu", base + l->n);
    if (rc < 0)
        snprintf(err, errlen, "environment: out of memory");
    return rc;
}

int sb_env_build(const struct sb_env_opts *o, struct sb_strv *out, char *err, size_t errlen)
{
    static char *const empty[] = {NULL};
    char *const *env = o->host_env != NULL ? o->host_env : empty;
    const struct settings *s = o->s;
    struct sb_strv a = {0};
    struct name_set seen = {0};
    size_t n = 0;
    struct sb_env_opts own;
    int proxies;
    const char *home = NULL, *host_path = NULL, *host_java = NULL;
    int rc;

    if (s == NULL || o->http_port > 65535 || o->socks_port > 65535 ||
        (o->http_port != 0 && o->self_exe == NULL)) {
        snprintf(err, errlen, "environment: invalid options (settings, ports or sluice's path)");
        return -EINVAL;
    }
    /* network.isolate false: the command has the host's network, so no
     * proxy variables point it at listeners it does not have */
    own = *o;
    if (!s->network.isolate)
        own.http_port = own.socks_port = 0;
    o = &own;
    proxies = o->http_port != 0 || o->socks_port != 0;
    while (env[n] != NULL)
        n++;
    rc = name_set_init(&seen, n);
    if (rc < 0) {
        snprintf(err, errlen, "environment: out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        const char *e = env[i];
        size_t len = strcspn(e, "=");

        if (len == 0 || e[len] != '=')
            continue;
        if (name_set_add(&seen, e, len))
            continue;
        if (len == 4 && memcmp(e, "HOME", 4) == 0)
            home = e + 5; /* for "~" in environment.set and pathAppend */
        if (is_owned(e, len, proxies))
            continue;
        if (is_named(&s->environment.set, e, len))
            continue;
        if (match_list(&s->environment.deny, e, len))
            continue;
        if (!match_list(&s->environment.allow, e, len)) {
            if (!s->environment.inherit)
                continue;
            if (is_secret_var(e, len) || is_loader(e, len))
                continue;
        }
        if (s->environment.path_append.n > 0 && len == 4 && memcmp(e, "PATH", 4) == 0) {
            host_path = e + 5;
            continue;
        }
        if (len == 17 && memcmp(e, "JAVA_TOOL_OPTIONS", 17) == 0) {
            host_java = e + 18; /* merged with sluice's below */
            continue;
        }
        rc = sb_strv_push(&a, e);
        if (rc < 0) {
            snprintf(err, errlen, "environment: out of memory");
            goto out;
        }
    }
    rc = add_settings(s, home, host_path, &a, err, errlen);
    if (rc < 0)
        goto out;
    rc = add_git_safe(s, home, &a, err, errlen);
    if (rc < 0)
        goto out;
    rc = add_own(o, &a, err, errlen);
    if (rc < 0)
        goto out;
    rc = add_java(o, host_java, &a, err, errlen);
    if (rc < 0)
        goto out;
    sb_strv_free(out);
    *out = a;
    memset(&a, 0, sizeof(a));
out:
    name_set_free(&seen);
    sb_strv_free(&a);
    return rc;
}
