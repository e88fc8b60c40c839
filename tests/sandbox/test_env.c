/* tests/sandbox/test_env.c - the sandboxed command's environment (sandbox/env.c). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "policy/policy.h"
#include "sandbox/sandbox.h"

#define SELF "/usr/lib/sluice/sluice"

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */

static void load(struct settings *s, const char *json)
{
    struct settings_error err;

    settings_init(s);
    if (json != NULL && settings_apply_buffer(s, "t.json", json, strlen(json), &err) != 0) {
        print_error("%s\n", err.msg);
        fail();
    }
}

/* Builds with the default options (ports 3128/1080, TMPDIR=/tmp). */
static void build(const struct settings *s, const char *const *host, struct sb_strv *out)
{
    struct sb_env_opts o = {.s = s,
                            .host_env = (char *const *)host,
                            .http_port = 3128,
                            .socks_port = 1080,
                            .tmpdir = "/tmp",
                            .self_exe = SELF};
    char err[256] = "";

    memset(out, 0, sizeof(*out));
    if (sb_env_build(&o, out, err, sizeof(err)) != 0) {
        print_error("%s\n", err);
        fail();
    }
    assert_non_null(out->v);
    assert_null(out->v[out->n]);
}

/* The value of NAME in the vector, or NULL; fails when NAME is there twice. */
static const char *get(const struct sb_strv *a, const char *name)
{
    size_t nl = strlen(name);
    const char *found = NULL;

    for (size_t i = 0; i < a->n; i++) {
        if (strncmp(a->v[i], name, nl) == 0 && a->v[i][nl] == '=') {
            if (found != NULL) {
                print_error("%s twice\n", name);
                fail();
            }
            found = a->v[i] + nl + 1;
        }
    }
    return found;
}

/* Every name in the vector is unique and every entry is NAME=VALUE. */
static void assert_unique(const struct sb_strv *a)
{
    for (size_t i = 0; i < a->n; i++) {
        size_t li = strcspn(a->v[i], "=");
        assert_true(li > 0);
        assert_int_equal(a->v[i][li], '=');
        for (size_t j = i + 1; j < a->n; j++) {
            size_t lj = strcspn(a->v[j], "=");
            if (li == lj && memcmp(a->v[i], a->v[j], li) == 0) {
                print_error("duplicate name: '%s' and '%s'\n", a->v[i], a->v[j]);
                fail();
            }
        }
    }
}

/* sluice's own variables for ports 3128/1080, in order. */
static const char *const own_vars[] = {
    "SANDBOX_RUNTIME=1",
    "TMPDIR=/tmp",
    "NO_PROXY=localhost,127.0.0.1,::1,*.local,.local,169.254.0.0/16,10.0.0.0/8,172.16.0.0/12,"
    "192.168.0.0/16",
    "no_proxy=localhost,127.0.0.1,::1,*.local,.local,169.254.0.0/16,10.0.0.0/8,172.16.0.0/12,"
    "192.168.0.0/16",
    "HTTP_PROXY=http://127.0.0.1:3128",
    "HTTPS_PROXY=http://127.0.0.1:3128",
    "http_proxy=http://127.0.0.1:3128",
    "https_proxy=http://127.0.0.1:3128",
    "DOCKER_HTTP_PROXY=http://127.0.0.1:3128",
    "DOCKER_HTTPS_PROXY=http://127.0.0.1:3128",
    "CLOUDSDK_PROXY_TYPE=http",
    "CLOUDSDK_PROXY_ADDRESS=127.0.0.1",
    "CLOUDSDK_PROXY_PORT=3128",
    "GRPC_PROXY=http://127.0.0.1:3128",
    "grpc_proxy=http://127.0.0.1:3128",
    "RSYNC_PROXY=127.0.0.1:3128",
    "NODE_USE_ENV_PROXY=1",
    "GIT_SSH_COMMAND=ssh -o ProxyCommand='" SELF " connect %h %p'",
    "ALL_PROXY=socks5h://127.0.0.1:1080",
    "all_proxy=socks5h://127.0.0.1:1080",
    "FTP_PROXY=socks5h://127.0.0.1:1080",
    "ftp_proxy=socks5h://127.0.0.1:1080",
    "JAVA_TOOL_OPTIONS=-Dhttp.proxyHost=127.0.0.1 -Dhttp.proxyPort=3128 "
    "-Dhttps.proxyHost=127.0.0.1 -Dhttps.proxyPort=3128 "
    "-Dhttp.nonProxyHosts=localhost|127.0.0.1|[::1]",
};
#define NOWN (sizeof(own_vars) / sizeof(own_vars[0]))

/* The vector ends with exactly own_vars; returns how many host entries precede. */
static size_t assert_own_tail(const struct sb_strv *a)
{
    size_t host;

    assert_true(a->n >= NOWN);
    host = a->n - NOWN;
    for (size_t i = 0; i < NOWN; i++)
        assert_string_equal(a->v[host + i], own_vars[i]);
    return host;
}

/* ------------------------------------------------------------------------ */
/* The secret list                                                           */

static void test_is_secret(void **state)
{
    static const struct {
        const char *name;
        int secret;
    } cases[] = {
        {"SSH_AUTH_SOCK", 1},
        {"GITHUB_TOKEN", 1},
        {"GH_TOKEN", 1},
        {"NPM_TOKEN", 1},
        {"NODE_AUTH_TOKEN", 1},
        {"ANTHROPIC_API_KEY", 1},
        {"OPENAI_API_KEY", 1},
        {"STRIPE_SECRET_KEY", 1},
        {"DEPLOY_PRIVATE_KEY", 1},
        {"CLIENT_SECRET", 1},
        {"DB_PASSWORD", 1},
        {"FTP_PASSWD", 1},
        {"SMTP_PASS", 1},
        {"GPG_PASSPHRASE", 1},
        {"AWS_ACCESS_KEY_ID", 1},
        {"AWS_SECRET_ACCESS_KEY", 1},
        {"AWS_PROFILE", 1},
        {"AZURE_CLIENT_SECRET", 1},
        {"AZURE_TENANT_ID", 1},
        {"GOOGLE_APPLICATION_CREDENTIALS", 1},
        {"DOCKER_AUTH_CONFIG", 1},
        {"SLACK_WEBHOOK_URL", 1},
        {"OP_SESSION_my", 1},
        {"KRB5CCNAME", 1},
        {"PGPASSWORD", 1},
        {"MYSQL_PWD", 1},
        {"DATABASE_URL", 1},
        {"_TOKEN", 1},
        /* not secrets */
        {"PATH", 0},
        {"HOME", 0},
        {"PWD", 0},
        {"OLDPWD", 0},
        {"TOKEN", 0}, /* the globs need the underscore */
        {"BYPASS", 0},
        {"KEYBOARD", 0},
        {"KEY_FILE", 0},
        {"KUBECONFIG", 0},   /* a path: the file is what to hide */
        {"github_token", 1}, /* upper-cased before matching (issue 14) */
        {"db_password", 1},
        {"Stripe_Secret_Key", 1},
        {"AWS_SECRETS", 1},
        {"MY_SECRET_ID", 1},
        {"WEATHER_APIKEY", 1},
        {"OPENAI_API_KEY_2", 1},
        {"SENTRY_DSN", 1},
        {"sentry_dsn", 1},
        {"NPM_CONFIG__AUTH", 1},
        {"SESSION_COOKIE", 1},
        {"SECRETARY", 0},
        {"AUTHOR", 0},
        {"GIT_AUTHOR_NAME", 0},
        {"DSN", 0},
        {"GITHUB_TOKEN_FILE", 0},
        {"SSH_AUTH_SOCKET", 0},
        {"AWS", 0},
        {"LD_PRELOAD", 0}, /* dropped by the loader list, not a secret */
        {"", 0},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (sb_env_is_secret(cases[i].name) != cases[i].secret)
            print_error("'%s': want %d\n", cases[i].name, cases[i].secret);
        assert_int_equal(sb_env_is_secret(cases[i].name), cases[i].secret);
    }
    assert_int_equal(sb_env_is_secret(NULL), 0);
}

/* ------------------------------------------------------------------------ */
/* sb_env_build                                                              */

static void test_secrets_dropped(void **state)
{
    const char *host[] = {"PATH=/usr/bin:/bin",
                          "HOME=/home/u",
                          "GITHUB_TOKEN=ghp_x",
                          "GH_TOKEN=g",
                          "NPM_TOKEN=n",
                          "ANTHROPIC_API_KEY=sk-ant",
                          "OPENAI_API_KEY=sk",
                          "AWS_ACCESS_KEY_ID=A",
                          "AWS_REGION=eu-west-1",
                          "AZURE_CLIENT_SECRET=z",
                          "GOOGLE_APPLICATION_CREDENTIALS=/k.json",
                          "DOCKER_AUTH_CONFIG={}",
                          "SSH_AUTH_SOCK=/run/user/1/ssh",
                          "DB_PASSWORD=p",
                          "SMTP_PASS=p",
                          "LD_PRELOAD=/lib/evil.so",
                          "LD_AUDIT=/lib/a.so",
                          "LD_LIBRARY_PATH=/opt/lib",
                          "KUBECONFIG=/home/u/.kube/config",
                          "github_token=lower",
                          "REDIS_URL=redis://:hunter2@cache:6379/0",
                          "REPO_URL=https://ghp_tok@github.com/o/r.git",
                          "MIRRORS=http://a.example/ ftp://u:pw@b.example/",
                          "HOMEPAGE_URL=https://example.com/a@b",
                          "UPSTREAM=git@github.com:o/r.git",
                          "TERM=xterm",
                          "EMPTY=",
                          NULL};
    static const char *const kept[] = {"PATH=/usr/bin:/bin",
                                       "HOME=/home/u",
                                       "LD_LIBRARY_PATH=/opt/lib",
                                       "KUBECONFIG=/home/u/.kube/config",
                                       "HOMEPAGE_URL=https://example.com/a@b",
                                       "UPSTREAM=git@github.com:o/r.git",
                                       "TERM=xterm",
                                       "EMPTY="};
    struct settings s;
    struct sb_strv a;
    size_t nhost;

    (void)state;
    load(&s, NULL);
    build(&s, host, &a);
    nhost = assert_own_tail(&a);
    /* exactly the non-secret host variables, in the host's order */
    assert_int_equal(nhost, sizeof(kept) / sizeof(kept[0]));
    for (size_t i = 0; i < nhost; i++)
        assert_string_equal(a.v[i], kept[i]);
    assert_unique(&a);
    sb_strv_free(&a);
    settings_free(&s);
}

static void test_allow_readmits(void **state)
{
    const char *host[] = {"GITHUB_TOKEN=ghp_x", "AWS_REGION=eu", "AWS_PROFILE=dev",
                          "LD_PRELOAD=/l.so",   "NPM_TOKEN=n",   "HTTP_PROXY=http://corp:8080",
                          "SANDBOX_RUNTIME=0",  "PATH=/bin",     NULL};
    struct settings s;
    struct sb_strv a;

    (void)state;
    load(&s, "{\"environment\": {\"allow\": [\"GITHUB_TOKEN\", \"AWS_*\", \"LD_PRELOAD\", "
             "\"HTTP_PROXY\", \"SANDBOX_RUNTIME\"]}}");
    build(&s, host, &a);
    assert_string_equal(get(&a, "GITHUB_TOKEN"), "ghp_x");
    assert_string_equal(get(&a, "AWS_REGION"), "eu");
    assert_string_equal(get(&a, "AWS_PROFILE"), "dev");
    assert_string_equal(get(&a, "LD_PRELOAD"), "/l.so");
    assert_null(get(&a, "NPM_TOKEN")); /* not allowed: still dropped */
    assert_string_equal(get(&a, "PATH"), "/bin");
    /* allow never re-admits a variable sluice sets itself */
    assert_string_equal(get(&a, "HTTP_PROXY"), "http://127.0.0.1:3128");
    assert_string_equal(get(&a, "SANDBOX_RUNTIME"), "1");
    assert_own_tail(&a);
    assert_unique(&a);
    sb_strv_free(&a);
    settings_free(&s);
}

static void test_deny_removes(void **state)
{
    const char *host[] = {"PATH=/bin",
                          "HOME=/home/u",
                          "XDG_RUNTIME_DIR=/run/user/1",
                          "XDG_CONFIG_HOME=/c",
                          "GITHUB_TOKEN=g",
                          "DISPLAY=:0",
                          "MYXDG_A=1",
                          NULL};
    struct settings s;
    struct settings_error err;
    struct sb_strv a;

    (void)state;
    /* deny wins over allow, and deny lists of two layers are united */
    load(&s, "{\"environment\": {\"deny\": [\"XDG_*\", \"GITHUB_TOKEN\"], "
             "\"allow\": [\"GITHUB_TOKEN\"]}}");
    assert_int_equal(
        settings_apply_buffer(&s, "u.json", "{\"environment\":{\"deny\":[\"DISPLAY\"]}}",
                              strlen("{\"environment\":{\"deny\":[\"DISPLAY\"]}}"), &err),
        0);
    build(&s, host, &a);
    assert_string_equal(get(&a, "PATH"), "/bin");
    assert_string_equal(get(&a, "HOME"), "/home/u");
    assert_null(get(&a, "XDG_RUNTIME_DIR"));
    assert_null(get(&a, "XDG_CONFIG_HOME"));
    assert_null(get(&a, "GITHUB_TOKEN"));
    assert_null(get(&a, "DISPLAY"));
    assert_string_equal(get(&a, "MYXDG_A"), "1"); /* globs are anchored */
    assert_int_equal(assert_own_tail(&a), 3);
    sb_strv_free(&a);
    settings_free(&s);

    /* deny does not remove what sluice sets */
    load(&s, "{\"environment\": {\"deny\": [\"*_PROXY\", \"*_proxy\", \"TMPDIR\", \"*\"]}}");
    build(&s, host, &a);
    assert_int_equal(assert_own_tail(&a), 0); /* '*': no host variable at all */
    sb_strv_free(&a);
    settings_free(&s);
}

static void test_inherit_false(void **state)
{
    const char *host[] = {
        "PATH=/bin", "HOME=/home/u", "LANG=C.UTF-8", "GITHUB_TOKEN=g", "TERM=xterm", "LC_ALL=C",
        NULL};
    struct settings s;
    struct sb_strv a;

    (void)state;
    load(&s, "{\"environment\": {\"inherit\": false, \"allow\": [\"PATH\", \"LC_*\", "
             "\"GITHUB_TOKEN\", \"NOT_SET\"], \"deny\": [\"LC_ALL\"]}}");
    build(&s, host, &a);
    assert_int_equal(assert_own_tail(&a), 2);
    assert_string_equal(a.v[0], "PATH=/bin");
    assert_string_equal(a.v[1], "GITHUB_TOKEN=g");
    assert_null(get(&a, "HOME"));
    assert_null(get(&a, "LC_ALL"));
    sb_strv_free(&a);
    settings_free(&s);

    /* nothing allowed: only sluice's own variables */
    load(&s, "{\"environment\": {\"inherit\": false}}");
    build(&s, host, &a);
    assert_int_equal(assert_own_tail(&a), 0);
    sb_strv_free(&a);
    settings_free(&s);
}

static void test_proxy_vars_once(void **state)
{
    const char *host[] = {"HTTP_PROXY=http://user:pw@corp:8080",
                          "http_proxy=http://corp:8080",
                          "HTTPS_PROXY=http://corp:8080",
                          "Https_Proxy=http://corp:8080",
                          "NO_PROXY=internal",
                          "no_proxy=internal",
                          "ALL_PROXY=socks5://corp:1",
                          "FTP_PROXY=x",
                          "RSYNC_PROXY=x",
                          "GRPC_PROXY=x",
                          "DOCKER_HTTP_PROXY=x",
                          "CLOUDSDK_PROXY_TYPE=socks5",
                          "CLOUDSDK_PROXY_USERNAME=u",
                          "GIT_SSH_COMMAND=ssh -i key",
                          "NODE_USE_ENV_PROXY=0",
                          "npm_config_https_proxy=http://corp:8080",
                          "SOCKS_PROXY=x",
                          "SANDBOX_RUNTIME=0",
                          "TMPDIR=/var/tmp",
                          "PATH=/bin",
                          "PROXY=keep",
                          "PROXYCHAINS_CONF_FILE=/etc/p.conf",
                          NULL};
    struct settings s;
    struct sb_strv a;

    (void)state;
    load(&s, NULL);
    build(&s, host, &a);
    /* the host's proxy settings are gone; each of sluice's is there once */
    assert_int_equal(assert_own_tail(&a), 3);
    assert_string_equal(a.v[0], "PATH=/bin");
    assert_string_equal(a.v[1], "PROXY=keep");
    assert_string_equal(a.v[2], "PROXYCHAINS_CONF_FILE=/etc/p.conf");
    for (size_t i = 0; i < a.n; i++)
        assert_null(strstr(a.v[i], "corp"));
    assert_unique(&a);
    sb_strv_free(&a);
    settings_free(&s);
}

static void test_duplicates_and_malformed(void **state)
{
    const char *host[] = {"PATH=/first", "=novalue", "NOEQUALS",       "PATH=/second",   "A=1",
                          "A=2",         "B==x",     "GITHUB_TOKEN=1", "GITHUB_TOKEN=2", NULL};
    struct settings s;
    struct sb_strv a;

    (void)state;
    load(&s, "{\"environment\": {\"allow\": [\"GITHUB_TOKEN\"]}}");
    build(&s, host, &a);
    /* first occurrence wins, as for getenv(3); entries without a name go */
    assert_int_equal(assert_own_tail(&a), 4);
    assert_string_equal(a.v[0], "PATH=/first");
    assert_string_equal(a.v[1], "A=1");
    assert_string_equal(a.v[2], "B==x");
    assert_string_equal(a.v[3], "GITHUB_TOKEN=1");
    assert_unique(&a);
    sb_strv_free(&a);
    settings_free(&s);
}

static void test_many_variables(void **state)
{
    enum { N = 5000 };
    char **host = calloc(2 * N + 1, sizeof(*host));
    struct settings s;
    struct sb_strv a;

    (void)state;
    assert_non_null(host);
    for (size_t i = 0; i < 2 * N; i++) {
        host[i] = malloc(32);
        assert_non_null(host[i]);
        snprintf(host[i], 32, "V%zu=%zu", i % N, i);
    }
    load(&s, NULL);
    build(&s, (const char *const *)host, &a);
    assert_int_equal(assert_own_tail(&a), N);
    assert_string_equal(a.v[N - 1], "V4999=4999");
    sb_strv_free(&a);
    settings_free(&s);
    for (size_t i = 0; i < 2 * N; i++)
        free(host[i]);
    free(host);
}

static void test_ports_and_tmpdir(void **state)
{
    const char *host[] = {"HTTP_PROXY=http://corp:8080", "GIT_SSH_COMMAND=ssh -v",
                          "TMPDIR=/var/tmp", "SANDBOX_RUNTIME=7", NULL};
    struct settings s;
    struct sb_strv a = {0};
    struct sb_env_opts o = {.host_env = (char *const *)host, .self_exe = SELF};
    char err[256];

    (void)state;
    load(&s, NULL);
    o.s = &s;

    /* no proxies (network not restricted): the host's proxy settings stay */
    assert_int_equal(sb_env_build(&o, &a, err, sizeof(err)), 0);
    assert_int_equal(a.n, 3);
    assert_string_equal(a.v[0], "HTTP_PROXY=http://corp:8080");
    assert_string_equal(a.v[1], "GIT_SSH_COMMAND=ssh -v");
    assert_string_equal(a.v[2], "SANDBOX_RUNTIME=1"); /* no TMPDIR: tmpdir is NULL */
    sb_strv_free(&a);

    /* other ports */
    o.http_port = 8080;
    o.socks_port = 1081;
    o.tmpdir = "/tmp/x";
    assert_int_equal(sb_env_build(&o, &a, err, sizeof(err)), 0);
    assert_string_equal(get(&a, "TMPDIR"), "/tmp/x");
    assert_string_equal(get(&a, "HTTPS_PROXY"), "http://127.0.0.1:8080");
    assert_string_equal(get(&a, "RSYNC_PROXY"), "127.0.0.1:8080");
    assert_string_equal(get(&a, "CLOUDSDK_PROXY_PORT"), "8080");
    assert_string_equal(get(&a, "all_proxy"), "socks5h://127.0.0.1:1081");
    assert_string_equal(get(&a, "GIT_SSH_COMMAND"),
                        "ssh -o ProxyCommand='" SELF " connect --proxy 127.0.0.1:8080 %h %p'");
    assert_unique(&a);
    sb_strv_free(&a);

    /* only SOCKS: no HTTP variables, no GIT_SSH_COMMAND (it needs CONNECT) */
    o.http_port = 0;
    assert_int_equal(sb_env_build(&o, &a, err, sizeof(err)), 0);
    assert_null(get(&a, "HTTP_PROXY"));
    assert_null(get(&a, "GIT_SSH_COMMAND"));
    assert_non_null(get(&a, "NO_PROXY"));
    assert_string_equal(get(&a, "ALL_PROXY"), "socks5h://127.0.0.1:1081");
    sb_strv_free(&a);

    /* bad options: an error, *out untouched */
    o.http_port = 70000;
    assert_int_equal(sb_env_build(&o, &a, err, sizeof(err)), -EINVAL);
    assert_null(a.v);
    o.http_port = 3128;
    o.self_exe = "/opt/slu\nice";
    assert_int_equal(sb_env_build(&o, &a, err, sizeof(err)), -EINVAL);
    assert_null(a.v);
    assert_non_null(strstr(err, "GIT_SSH_COMMAND"));
    settings_free(&s);
}

/* Runs /bin/sh -c 'eval "set -- $X"; printf "%s\n" "$@"' with X=text and
 * returns the words (one per line) in buf. */
static void shell_words(const char *text, char *buf, size_t size)
{
    int fd[2];
    pid_t pid;
    size_t o = 0;
    int status;

    assert_int_equal(pipe(fd), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        close(fd[1]);
        setenv("X", text, 1);
        execl("/bin/sh", "sh", "-c", "eval \"set -- $X\" && printf '%s\\n' \"$@\"", (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    for (;;) {
        ssize_t n = read(fd[0], buf + o, size - 1 - o);
        if (n <= 0)
            break;
        o += (size_t)n;
    }
    buf[o] = '\0';
    close(fd[0]);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* ssh's %-expansion of a ProxyCommand (%h, %p, %%). */
static void percent_expand(const char *in, char *out, size_t size)
{
    size_t o = 0;

    for (; *in && o + 16 < size; in++) {
        if (in[0] == '%' && in[1] == 'h') {
            o += (size_t)snprintf(out + o, size - o, "github.com");
            in++;
        } else if (in[0] == '%' && in[1] == 'p') {
            o += (size_t)snprintf(out + o, size - o, "22");
            in++;
        } else if (in[0] == '%' && in[1] == '%') {
            out[o++] = '%';
            in++;
        } else {
            out[o++] = *in;
        }
    }
    out[o] = '\0';
}

/* GIT_SSH_COMMAND survives git's shell, ssh's %-expansion and ssh's shell
 * with any path for sluice. */
static void test_git_ssh_command_quoting(void **state)
{
    static const char *const selves[] = {
        "/usr/bin/sluice", "/opt/my tools/sluice",         "/home/o'brien/bin/sluice",
        "/x/100%/sl$uice", "/a/`b`/\"c\"/\\d;e&f|g*h?[i]", "/tmp/%h%p/sluice",
    };
    const char *host[] = {NULL};
    struct settings s;

    (void)state;
    load(&s, NULL);
    for (size_t i = 0; i < sizeof(selves) / sizeof(selves[0]); i++) {
        struct sb_env_opts o = {.s = &s,
                                .host_env = (char *const *)host,
                                .http_port = 3129,
                                .socks_port = 1080,
                                .self_exe = selves[i]};
        struct sb_strv a = {0};
        char err[256], words[4096], pc[4096], inner[4096], want[4096];
        const char *cmd;

        assert_int_equal(sb_env_build(&o, &a, err, sizeof(err)), 0);
        cmd = get(&a, "GIT_SSH_COMMAND");
        assert_non_null(cmd);
        /* git: sh -c "$GIT_SSH_COMMAND ..." */
        shell_words(cmd, words, sizeof(words));
        assert_true(strncmp(words, "ssh\n-o\nProxyCommand=", 20) == 0);
        snprintf(pc, sizeof(pc), "%s", words + 20);
        assert_int_equal(pc[strlen(pc) - 1], '\n');
        pc[strlen(pc) - 1] = '\0';
        assert_null(strchr(pc, '\n')); /* one word */
        /* ssh: %-expansion, then $SHELL -c "exec ..." */
        percent_expand(pc, inner, sizeof(inner));
        shell_words(inner, words, sizeof(words));
        snprintf(want, sizeof(want), "%s\nconnect\n--proxy\n127.0.0.1:3129\ngithub.com\n22\n",
                 selves[i]);
        if (strcmp(words, want) != 0)
            print_error("self '%s': GIT_SSH_COMMAND=%s\n", selves[i], cmd);
        assert_string_equal(words, want);
        sb_strv_free(&a);
    }
    settings_free(&s);
}

/* ------------------------------------------------------------------------ */
/* environment.set and environment.pathAppend                                */

static void build_err(const struct settings *s, const char *const *host, const char *want)
{
    struct sb_env_opts o = {.s = s,
                            .host_env = (char *const *)host,
                            .http_port = 3128,
                            .socks_port = 1080,
                            .tmpdir = "/tmp",
                            .self_exe = SELF};
    struct sb_strv out = {0};
    char err[512] = "";

    assert_int_equal(sb_env_build(&o, &out, err, sizeof(err)), -EINVAL);
    assert_null(out.v);
    assert_string_equal(err, want);
}

/* git.safeDirectories reaches git as safe.directory entries, after any
 * GIT_CONFIG_* entries of the host; ~ expands. */
static void test_git_safe_directories(void **state)
{
    const char *host[] = {"HOME=/home/u", "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=core.pager",
                          "GIT_CONFIG_VALUE_0=cat", NULL};
    const char *none[] = {"HOME=/home/u", NULL};
    struct settings s;
    struct sb_strv a;

    (void)state;
    load(&s, "{\"git\": {\"safeDirectories\": [\"/srv/repo\", \"~/src/*\", \"*\"]}}");
    build(&s, host, &a);
    assert_unique(&a);
    assert_string_equal(get(&a, "GIT_CONFIG_COUNT"), "4");
    assert_string_equal(get(&a, "GIT_CONFIG_KEY_0"), "core.pager");
    assert_string_equal(get(&a, "GIT_CONFIG_KEY_1"), "safe.directory");
    assert_string_equal(get(&a, "GIT_CONFIG_VALUE_1"), "/srv/repo");
    assert_string_equal(get(&a, "GIT_CONFIG_KEY_2"), "safe.directory");
    assert_string_equal(get(&a, "GIT_CONFIG_VALUE_2"), "/home/u/src/*");
    assert_string_equal(get(&a, "GIT_CONFIG_VALUE_3"), "*");
    sb_strv_free(&a);
    build(&s, none, &a);
    assert_string_equal(get(&a, "GIT_CONFIG_COUNT"), "3");
    assert_string_equal(get(&a, "GIT_CONFIG_VALUE_0"), "/srv/repo");
    sb_strv_free(&a);
    settings_free(&s);

    /* none configured: nothing added */
    load(&s, NULL);
    build(&s, none, &a);
    assert_null(get(&a, "GIT_CONFIG_COUNT"));
    sb_strv_free(&a);
    settings_free(&s);
}

/* JAVA_TOOL_OPTIONS: the host's options first, then the proxy properties,
 * then -javaagent: for javaAgentJarPath. */
static void test_java_tool_options(void **state)
{
    const char *host[] = {"JAVA_TOOL_OPTIONS=-Xmx1g", NULL};
    struct settings s;
    struct sb_strv a;

    (void)state;
    load(&s, "{\"javaAgentJarPath\": \"/opt/agent/proxy.jar\"}");
    build(&s, host, &a);
    assert_unique(&a);
    assert_string_equal(get(&a, "JAVA_TOOL_OPTIONS"),
                        "-Xmx1g -Dhttp.proxyHost=127.0.0.1 -Dhttp.proxyPort=3128 "
                        "-Dhttps.proxyHost=127.0.0.1 -Dhttps.proxyPort=3128 "
                        "-Dhttp.nonProxyHosts=localhost|127.0.0.1|[::1] "
                        "-javaagent:/opt/agent/proxy.jar");
    sb_strv_free(&a);
    settings_free(&s);
}

static void test_set(void **state)
{
    const char *host[] = {"PATH=/bin",  "HOME=/home/u/", "GIT_CONFIG_SYSTEM=/etc/gitconfig",
                          "LANG=C",     "HOME=/other",   "EDITOR=vi",
                          NULL};
    struct settings s;
    struct sb_strv a;
    size_t nh;

    (void)state;
    load(&s, "{\"environment\": {\"set\": {\"GIT_CONFIG_SYSTEM\": \"/dev/null\", "
             "\"XDG_CACHE_HOME\": \"~/.cache\", \"H\": \"~\", \"LIT\": \"~user/x\", "
             "\"EMPTY\": \"\", \"EDITOR\": \"nano\"}}}");
    build(&s, host, &a);
    assert_unique(&a);
    nh = assert_own_tail(&a);
    /* host variables first (the replaced ones dropped), then the set ones in
     * settings order, then sluice's own */
    assert_int_equal(nh, 3 + 6);
    assert_string_equal(a.v[0], "PATH=/bin");
    assert_string_equal(a.v[1], "HOME=/home/u/");
    assert_string_equal(a.v[2], "LANG=C");
    assert_string_equal(a.v[3], "GIT_CONFIG_SYSTEM=/dev/null");
    assert_string_equal(a.v[4], "XDG_CACHE_HOME=/home/u/.cache"); /* first HOME, '/' dropped */
    assert_string_equal(a.v[5], "H=/home/u");
    assert_string_equal(a.v[6], "LIT=~user/x"); /* only "~" and "~/" expand */
    assert_string_equal(a.v[7], "EMPTY=");
    assert_string_equal(a.v[8], "EDITOR=nano");
    sb_strv_free(&a);
    settings_free(&s);

    /* set is explicit: it is added with inherit false and for secret-looking
     * names; a deny (of any layer) wins over it */
    load(&s, "{\"environment\": {\"inherit\": false, \"deny\": [\"BLOCKED_*\"], \"set\": "
             "{\"API_TOKEN\": \"public-demo\", \"BLOCKED_X\": \"1\", \"A\": \"b\"}}}");
    build(&s, host, &a);
    assert_int_equal(assert_own_tail(&a), 2);
    assert_string_equal(a.v[0], "API_TOKEN=public-demo");
    assert_string_equal(a.v[1], "A=b");
    sb_strv_free(&a);
    settings_free(&s);

    /* HOME=/ : "~/x" is "/x" */
    {
        const char *root[] = {"HOME=/", NULL};
        load(&s, "{\"environment\": {\"set\": {\"X\": \"~/x\", \"Y\": \"~\"}}}");
        build(&s, root, &a);
        assert_string_equal(get(&a, "X"), "/x");
        assert_string_equal(get(&a, "Y"), "/");
        sb_strv_free(&a);
        settings_free(&s);
    }

    /* "~" without an absolute HOME fails the run */
    {
        const char *nohome[] = {"PATH=/bin", NULL};
        const char *relhome[] = {"HOME=rel", NULL};
        load(&s, "{\"environment\": {\"set\": {\"X\": \"~/x\"}}}");
        build_err(&s, nohome,
                  "environment.set.X: '~/x' needs $HOME, which is not set to an absolute path");
        build_err(&s, relhome,
                  "environment.set.X: '~/x' needs $HOME, which is not set to an absolute path");
        settings_free(&s);
    }

    /* names sluice sets are refused by the loader; should one reach the
     * builder anyway, sluice's value is the only one */
    {
        struct settings_pair pairs[] = {{.key = (char *)"HTTP_PROXY", .value = (char *)"x"},
                                        {.key = (char *)"TMPDIR", .value = (char *)"/x"},
                                        {.key = (char *)"LD_PRELOAD", .value = (char *)"/x.so"},
                                        {.key = (char *)"OK", .value = (char *)"1"}};
        settings_init(&s);
        s.environment.set.pairs = pairs;
        s.environment.set.n = 4;
        build(&s, host, &a);
        assert_unique(&a);
        assert_string_equal(get(&a, "HTTP_PROXY"), "http://127.0.0.1:3128");
        assert_string_equal(get(&a, "TMPDIR"), "/tmp");
        assert_null(get(&a, "LD_PRELOAD"));
        assert_string_equal(get(&a, "OK"), "1");
        sb_strv_free(&a);
    }
}

static void test_path_append(void **state)
{
    const char *host[] = {"HOME=/home/u",
                          "PATH=/home/u/.local/bin:/usr/local/bin:/usr/bin::/bin:/home/u/.local/bin",
                          NULL};
    struct settings s;
    struct sb_strv a;

    (void)state;
    /* moved to the end even when the host had it first; empty entries kept;
     * each appended once, in order */
    load(&s, "{\"environment\": {\"pathAppend\": [\"~/.local/bin\", \"/opt/x/bin\", "
             "\"~/.local/bin\"]}}");
    build(&s, host, &a);
    assert_unique(&a);
    assert_int_equal(assert_own_tail(&a), 2);
    assert_string_equal(a.v[0], "HOME=/home/u");
    assert_string_equal(a.v[1], "PATH=/usr/local/bin:/usr/bin::/bin:/home/u/.local/bin:/opt/x/bin");
    sb_strv_free(&a);
    settings_free(&s);

    /* no host PATH: the default base */
    {
        const char *nopath[] = {"HOME=/home/u", NULL};
        load(&s, "{\"environment\": {\"pathAppend\": [\"~/.local/bin\"]}}");
        build(&s, nopath, &a);
        assert_string_equal(get(&a, "PATH"), "/usr/local/bin:/usr/bin:/bin:/home/u/.local/bin");
        sb_strv_free(&a);
        settings_free(&s);
    }
    /* inherit false without PATH allowed: the default base too */
    load(&s, "{\"environment\": {\"inherit\": false, \"pathAppend\": [\"/x\"]}}");
    build(&s, host, &a);
    assert_int_equal(assert_own_tail(&a), 1);
    assert_string_equal(a.v[0], "PATH=/usr/local/bin:/usr/bin:/bin:/x");
    sb_strv_free(&a);
    settings_free(&s);

    /* environment.set PATH is the base */
    load(&s, "{\"environment\": {\"set\": {\"PATH\": \"~/bin:/usr/bin\"}, "
             "\"pathAppend\": [\"/x\"]}}");
    build(&s, host, &a);
    assert_unique(&a);
    assert_string_equal(get(&a, "PATH"), "/home/u/bin:/usr/bin:/x");
    sb_strv_free(&a);
    settings_free(&s);

    /* without pathAppend, a set PATH is taken as is (only a leading "~" expands) */
    load(&s, "{\"environment\": {\"set\": {\"PATH\": \"/a:~/b\"}}}");
    build(&s, host, &a);
    assert_string_equal(get(&a, "PATH"), "/a:~/b");
    sb_strv_free(&a);
    settings_free(&s);

    /* only the appended directory, base empty */
    {
        const char *only[] = {"HOME=/home/u", "PATH=/home/u/.local/bin", NULL};
        load(&s, "{\"environment\": {\"pathAppend\": [\"~/.local/bin\"]}}");
        build(&s, only, &a);
        assert_string_equal(get(&a, "PATH"), "/home/u/.local/bin");
        sb_strv_free(&a);
        settings_free(&s);
    }

    /* a deny of PATH wins: no PATH */
    load(&s, "{\"environment\": {\"deny\": [\"PATH\"], \"pathAppend\": [\"/x\"]}}");
    build(&s, host, &a);
    assert_null(get(&a, "PATH"));
    sb_strv_free(&a);
    settings_free(&s);

    /* "~" without HOME: the error names the settings entry */
    {
        const char *nohome[] = {"PATH=/bin", NULL};
        load(&s, "{\"environment\": {\"pathAppend\": [\"/ok\", \"~/.local/bin\"]}}");
        build_err(&s, nohome,
                  "t.json:1:40: environment.pathAppend[1]: '~/.local/bin' needs $HOME, which is "
                  "not set to an absolute path");
        settings_free(&s);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_is_secret),
        cmocka_unit_test(test_secrets_dropped),
        cmocka_unit_test(test_allow_readmits),
        cmocka_unit_test(test_deny_removes),
        cmocka_unit_test(test_inherit_false),
        cmocka_unit_test(test_proxy_vars_once),
        cmocka_unit_test(test_duplicates_and_malformed),
        cmocka_unit_test(test_many_variables),
        cmocka_unit_test(test_ports_and_tmpdir),
        cmocka_unit_test(test_git_ssh_command_quoting),
        cmocka_unit_test(test_set),
        cmocka_unit_test(test_java_tool_options),
        cmocka_unit_test(test_git_safe_directories),
        cmocka_unit_test(test_path_append),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
