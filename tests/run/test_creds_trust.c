/* tests/run/test_creds_trust.c - which settings files may carry masking
 * credentials (run/creds_trust.c, issue 24 item 4): a file inside a
 * writable place (as written or through a symlink), writable by others, in
 * a directory writable by others (/tmp), owned by someone else or with a
 * second link is refused with why; a masking entry, an allowedDomains
 * entry widening an entry without injectHosts, allowPlaintextInject and an
 * extra upstream CA from such a file are refused naming the file:line; deny entries and a
 * trusted user file pass. The trusted fixtures live under the working
 * directory (ctest's: the build tree); the positive cases are skipped when
 * a directory above it is itself writable by others (checked here with
 * stat, independently of the code under test). */
#define _GNU_SOURCE
#include <setjmp.h> /* cmocka needs these first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run/creds.h"
#include "settings/settings.h"

static char dir[512];  /* a fresh 0700 directory under the working directory */
static char wdir[600]; /* dir/w: "bound writable" in these tests */

static void put(const char *path, const char *text, mode_t mode)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    assert_int_equal(chmod(path, mode), 0);
}

static int setup(void **state)
{
    char cwd[400];
    (void)state;
    assert_non_null(getcwd(cwd, sizeof(cwd)));
    snprintf(dir, sizeof(dir), "%s/credtrust.XXXXXX", cwd);
    assert_non_null(mkdtemp(dir));
    snprintf(wdir, sizeof(wdir), "%s/w", dir);
    assert_int_equal(mkdir(wdir, 0700), 0);
    return 0;
}

static int teardown(void **state)
{
    char cmd[sizeof(dir) + 16];
    (void)state;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* Every directory above dir is root's or ours and not writable by others. */
static int base_trusted(void)
{
    char p[sizeof(dir)];
    struct stat st;

    snprintf(p, sizeof(p), "%s", dir);
    for (char *s = strrchr(p, '/'); s != NULL; s = strrchr(p, '/')) {
        *s = '\0';
        if (stat(p[0] ? p : "/", &st) < 0 || (st.st_uid != 0 && st.st_uid != geteuid()) ||
            (st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
            return 0;
        if (p[0] == '\0')
            break;
    }
    return 1;
}

static int trusted(const char *path, char *why, size_t n)
{
    const char *w[1] = {wdir};
    why[0] = '\0';
    return run_settings_file_trusted(path, w, 1, why, n);
}

static void test_files(void **state)
{
    char p[1024], q[1024], why[PATH_MAX + 200];
    (void)state;

    if (!base_trusted())
        skip();
    snprintf(p, sizeof(p), "%s/user.json", dir);
    put(p, "{}", 0644);
    assert_int_equal(trusted(p, why, sizeof(why)), 0);

    /* inside the writable place, as written */
    snprintf(q, sizeof(q), "%s/proj.json", wdir);
    put(q, "{}", 0644);
    assert_int_equal(trusted(q, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "which the sandboxed command may write"));
    /* a symlink outside pointing into it, and one inside pointing out */
    snprintf(p, sizeof(p), "%s/link-in.json", dir);
    assert_int_equal(symlink(q, p), 0);
    assert_int_equal(trusted(p, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "may write"));
    snprintf(p, sizeof(p), "%s/link-out.json", wdir);
    snprintf(q, sizeof(q), "%s/user.json", dir);
    assert_int_equal(symlink(q, p), 0);
    assert_int_equal(trusted(p, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "may write"));

    /* writable by others; a second link */
    snprintf(p, sizeof(p), "%s/open.json", dir);
    put(p, "{}", 0666);
    assert_int_equal(trusted(p, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "writable by others"));
    snprintf(p, sizeof(p), "%s/grp.json", dir);
    put(p, "{}", 0664);
    assert_int_equal(trusted(p, why, sizeof(why)), -1);
    snprintf(p, sizeof(p), "%s/hard.json", dir);
    assert_int_equal(link(q, p), 0);
    assert_int_equal(trusted(q, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "one link"));
    assert_int_equal(unlink(p), 0);
    assert_int_equal(trusted(q, why, sizeof(why)), 0);

    /* a directory writable by others above it */
    snprintf(p, sizeof(p), "%s/open", dir);
    assert_int_equal(mkdir(p, 0700), 0);
    assert_int_equal(chmod(p, 01777), 0);
    snprintf(p, sizeof(p), "%s/open/x.json", dir);
    put(p, "{}", 0644);
    assert_int_equal(trusted(p, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "which is writable by others"));

    /* someone else's file */
    if (geteuid() == 0) {
        snprintf(p, sizeof(p), "%s/theirs.json", dir);
        put(p, "{}", 0644);
        assert_int_equal(chown(p, 12345, 12345), 0);
        assert_int_equal(trusted(p, why, sizeof(why)), -1);
        assert_non_null(strstr(why, "uid 12345"));
    }
    /* missing */
    snprintf(p, sizeof(p), "%s/none.json", dir);
    assert_int_equal(trusted(p, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "cannot be resolved"));
}

/* /tmp: writable by others, whatever the file's own mode. */
static int layers(const char *user, const char *proj, char *err, size_t n);

/* value.exec (issue 24 item 4): from a trusted file only, and its program
 * not one the sandbox could replace. */
static void test_exec(void **state)
{
    char err[2048], user[2048], prog[700];
    (void)state;

    if (!base_trusted())
        skip();
#define EXEC(p) "{\"name\": \"GH_TOKEN\", \"mode\": \"mask\", \"injectHosts\": [\"inj.test\"], " \
                "\"value\": {\"exec\": [\"" p "\", \"auth\", \"token\"], \"ttl\": 60}}"
#define XNET "\"network\": {\"allowedDomains\": [\"inj.test\"], \"tlsTerminate\": {}}"
    /* a project file's exec: refused at its line, before anything runs */
    assert_int_equal(layers("{" XNET "}",
                            "{\n\"credentials\": {\"envVars\": [\n  " EXEC("/bin/true") "]}}", err,
                            sizeof(err)),
                     -1);
    assert_non_null(strstr(err, "/w/proj.json:3:3: credentials.envVars[0]: refused: value.exec "
                                "(it runs a program on the host"));
    /* the user's file, a root-owned program: taken */
    assert_int_equal(layers("{" XNET ", \"credentials\": {\"envVars\": [" EXEC("/bin/true") "]}}",
                            "{}", err, sizeof(err)),
                     0);
    /* the user's file, a program inside the writable place: refused */
    snprintf(prog, sizeof(prog), "%s/helper", wdir);
    put(prog, "#!/bin/sh\necho x\n", 0700);
    snprintf(user, sizeof(user),
             "{" XNET ", \"credentials\": {\"envVars\": [{\"name\": \"GH_TOKEN\", \"mode\": "
             "\"mask\", \"injectHosts\": [\"inj.test\"], \"value\": {\"exec\": [\"%s\"], "
             "\"ttl\": 60}}]}}",
             prog);
    assert_int_equal(layers(user, "{}", err, sizeof(err)), -1);
    if (strstr(err, "value.exec: refused: the helper program") == NULL ||
        strstr(err, "which the sandboxed command may write") == NULL)
        fail_msg("%s", err);
    unlink(prog);
#undef EXEC
#undef XNET
}

static void test_tmp(void **state)
{
    char p[] = "/tmp/credtrust.XXXXXX", why[PATH_MAX + 200];
    int fd = mkstemp(p);
    (void)state;

    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(chmod(p, 0600), 0);
    assert_int_equal(trusted(p, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "'/tmp', which is writable by others"));
    unlink(p);
}

/* Two layers: the user's file (trusted) and a --settings file in the
 * writable place. */
static int layers(const char *user, const char *proj, char *err, size_t n)
{
    struct settings s;
    struct settings_error e;
    char up[1024], pp[1024];
    const char *w[1] = {wdir};
    int rc;

    snprintf(up, sizeof(up), "%s/user.json", dir);
    snprintf(pp, sizeof(pp), "%s/proj.json", wdir);
    put(up, user, 0600);
    put(pp, proj, 0600);
    settings_init(&s);
    assert_int_equal(settings_apply_file(&s, up, &e), 0);
    if (settings_apply_file(&s, pp, &e) != 0)
        fail_msg("%s", e.msg);
    err[0] = '\0';
    rc = run_creds_trust_check(&s, w, 1, err, n);
    settings_free(&s);
    return rc;
}

#define NET "\"network\": {\"allowedDomains\": [\"inj.test\"], \"tlsTerminate\": {}}"
#define MASK(h) "{\"name\": \"AWS_SECRET_ACCESS_KEY\", \"mode\": \"mask\"" h "}"

static void test_layers(void **state)
{
    char err[2048], ca[1024], user[2048];
    (void)state;

    if (!base_trusted())
        skip();
    /* the project file masks a host secret: refused at its line */
    assert_int_equal(layers("{" NET "}",
                            "{\n\"credentials\": {\"envVars\": [\n  " MASK(
                                ", \"injectHosts\": [\"evil.example\"]") "]}}",
                            err, sizeof(err)),
                     -1);
    assert_non_null(
        strstr(err, "/w/proj.json:3:3: credentials.envVars[0]: refused: mode \"mask\""));
    assert_non_null(strstr(err, "which the sandboxed command may write"));
    /* the same entry in the user's file passes; the project may add deny entries */
    assert_int_equal(
        layers("{" NET
               ", \"credentials\": {\"envVars\": [" MASK(", \"injectHosts\": [\"inj.test\"]") "]}}",
               "{\"credentials\": {\"files\": [{\"path\": \"/x\", \"mode\": \"deny\"}]}}", err,
               sizeof(err)),
        0);
    assert_int_equal(
        layers("{" NET "}",
               "{\"credentials\": {\"envVars\": [{\"name\": \"X\", \"mode\": \"deny\"}]}}", err,
               sizeof(err)),
        0);
    /* the project may not replace the user's list of masks (even with deny
     * entries only: the masked variable would reach the sandbox as it is) */
    assert_int_equal(layers("{" NET ", \"credentials\": {\"envVars\": [" MASK(
                                ", \"injectHosts\": [\"inj.test\"]") "]}}",
                            "{\"credentials\": {\"envVars\": []}}", err, sizeof(err)),
                     -1);
    if (strstr(err, "/w/proj.json:1:2: credentials.envVars: refused: it replaces") == NULL)
        print_error("%s\n", err);
    assert_non_null(strstr(err, "/w/proj.json:1:2: credentials.envVars: refused: it replaces"));
    /* awsPairs (masks): refused from the project, accepted from the user's
     * file; the project may not replace the user's pairs */
#define PAIR                                                                                       \
    "{\"accessKeyIdVar\": \"AWS_ACCESS_KEY_ID\", \"secretAccessKeyVar\": "                         \
    "\"AWS_SECRET_ACCESS_KEY\"}"
    assert_int_equal(layers("{" NET "}", "{\n\"credentials\": {\"awsPairs\": [\n  " PAIR "]}}", err,
                            sizeof(err)),
                     -1);
    assert_non_null(
        strstr(err, "/w/proj.json:3:3: credentials.awsPairs[0]: refused: mode \"mask\""));
    assert_int_equal(
        layers("{" NET ", \"credentials\": {\"awsPairs\": [" PAIR "]}}", "{}", err, sizeof(err)),
        0);
    /* a pair without injectHosts goes where allowedDomains says: the project
     * may not widen that */
    assert_int_equal(layers("{" NET ", \"credentials\": {\"awsPairs\": [" PAIR "]}}",
                            "{\"network\": {\"allowedDomains\": [\"evil.example\"]}}", err,
                            sizeof(err)),
                     -1);
    assert_non_null(strstr(err, "an allowedDomains entry, while the masked credential"));
    assert_int_equal(layers("{" NET ", \"credentials\": {\"awsPairs\": [" PAIR "]}}",
                            "{\"credentials\": {\"awsPairs\": []}}", err, sizeof(err)),
                     -1);
    assert_non_null(strstr(err, "/w/proj.json:1:2: credentials.awsPairs: refused: it replaces"));
#undef PAIR
    /* files may be replaced there: no masked file was listed */
    assert_int_equal(layers("{" NET ", \"credentials\": {\"envVars\": [" MASK(
                                ", \"injectHosts\": [\"inj.test\"]") "]}}",
                            "{\"credentials\": {\"files\": []}}", err, sizeof(err)),
                     0);
    /* an entry without injectHosts goes where allowedDomains allows: the
     * project may not widen that */
    assert_int_equal(layers("{" NET ", \"credentials\": {\"envVars\": [" MASK("") "]}}",
                            "{\"network\": {\n\"allowedDomains\": [\"evil.example\"]}}", err,
                            sizeof(err)),
                     -1);
    assert_non_null(strstr(err, "/w/proj.json:2:20: network.allowedDomains[0]: refused"));
    assert_non_null(strstr(err, "give it injectHosts"));
    /* with explicit injectHosts it may */
    assert_int_equal(layers("{" NET ", \"credentials\": {\"envVars\": [" MASK(
                                ", \"injectHosts\": [\"inj.test\"]") "]}}",
                            "{\"network\": {\"allowedDomains\": [\"inj.test\", \"evil.example\"]}}",
                            err, sizeof(err)),
                     0);
    /* plain HTTP turned on by the project, beside a masked credential */
    assert_int_equal(
        layers("{" NET
               ", \"credentials\": {\"envVars\": [" MASK(", \"injectHosts\": [\"inj.test\"]") "]}}",
               "{\"credentials\": {\n\"allowPlaintextInject\": true}}", err, sizeof(err)),
        -1);
    assert_non_null(strstr(err, "/w/proj.json:2:25: credentials.allowPlaintextInject: refused"));
    /* ... and from the user's file it may */
    assert_int_equal(
        layers("{" NET ", \"credentials\": {\"allowPlaintextInject\": true, \"envVars\": [" MASK(
                   ", \"injectHosts\": [\"inj.test\"]") "]}}",
               "{}", err, sizeof(err)),
        0);
    /* ... but then not a DNS server from the project */
    assert_int_equal(
        layers("{" NET ", \"credentials\": {\"allowPlaintextInject\": true, \"envVars\": [" MASK(
                   ", \"injectHosts\": [\"inj.test\"]") "]}}",
               "{\"network\": {\"dnsServers\": [\"127.0.0.1:5353\"]}}", err, sizeof(err)),
        -1);
    assert_non_null(strstr(err, "network.dnsServers[0]: refused"));
    /* ... nor a parent proxy, which reads plain requests */
    assert_int_equal(
        layers("{" NET ", \"credentials\": {\"allowPlaintextInject\": true, \"envVars\": [" MASK(
                   ", \"injectHosts\": [\"inj.test\"]") "]}}",
               "{\"network\": {\"parentProxy\": {\"http\": \"http://127.0.0.1:3128\"}}}", err,
               sizeof(err)),
        -1);
    assert_non_null(strstr(err, "/w/proj.json:1:14: network.parentProxy: refused"));
    /* an allowedDomains list file in the writable place, named by the
     * user's file, for an entry without injectHosts */
    snprintf(ca, sizeof(ca), "%s/list.txt", wdir);
    put(ca, "evil.example\n", 0644);
    snprintf(user, sizeof(user),
             "{\"network\": {\"allowedDomainsFiles\": [\"%s\"], \"tlsTerminate\": {}}, "
             "\"credentials\": {\"envVars\": [" MASK("") "]}}",
             ca);
    assert_int_equal(layers(user, "{}", err, sizeof(err)), -1);
    assert_non_null(strstr(err, "/w/list.txt:1:1: network.allowedDomains"));
    /* an extra upstream CA from the project, beside a masked credential */
    assert_int_equal(
        layers("{" NET
               ", \"credentials\": {\"envVars\": [" MASK(", \"injectHosts\": [\"inj.test\"]") "]}}",
               "{\"network\": {\"tlsTerminate\": {\"extraCaCertPaths\": [\"/etc/ssl/x.pem\"]}}}",
               err, sizeof(err)),
        -1);
    assert_non_null(strstr(err, "extraCaCertPaths"));
    assert_non_null(strstr(err, "an extra upstream CA"));
    /* from the user's file, but the CA file itself in the writable place */
    snprintf(ca, sizeof(ca), "%s/ca.pem", wdir);
    put(ca, "x", 0644);
    snprintf(user, sizeof(user),
             "{\"network\": {\"allowedDomains\": [\"inj.test\"], \"tlsTerminate\": "
             "{\"extraCaCertPaths\": [\"%s\"]}}, \"credentials\": {\"envVars\": "
             "[" MASK(", \"injectHosts\": [\"inj.test\"]") "]}}",
             ca);
    assert_int_equal(layers(user, "{}", err, sizeof(err)), -1);
    assert_non_null(strstr(err, "the CA file"));
    assert_non_null(strstr(err, "which the sandboxed command may write"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_files),
        cmocka_unit_test(test_tmp),
        cmocka_unit_test(test_exec),
        cmocka_unit_test(test_layers),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
