/* run/tls_trust.c - TLS termination in `sluice run` (issue 23).
 *
 * The host-side proxy service terminates as `sluice proxy` does
 * (proxy/http_tls.c): this file gives it the CA and the leaf cache
 * (struct proxy_tls_shared) and its loop's contexts. The CA comes from
 * network.tlsTerminate.caCertPath/caKeyPath, or is made for this run
 * (tls_ca_generate: its key lives in this process's memory only and is
 * never written). Request rules without tlsTerminate turn termination on
 * for the hosts they name only (scope "needed", a CA made per run).
 *
 * Trust inside the sandbox, in the run directory's "tls" folder (0700,
 * its files 0600, like the run directory; the sandbox sees that folder
 * read-only at the same path, on the empty tmpfs that hides the run
 * directories): ca.pem, ca-bundle.pem (the system roots, then the CA:
 * nothing else) and java-truststore.p12 (the same certificates, for the
 * JVM). ca-bundle.pem is also bound read-only over each system bundle path
 * the host has (TRUST_PATHS), so a client that reads only the system store
 * (OpenSSL's default, Go, rustls with native roots) trusts the CA with no
 * variable. srt's eleven variables point at the bundle; JAVA_TOOL_OPTIONS
 * gets the trust store. A caKeyPath file is covered by /dev/null, bound
 * after every other mount, whatever the filesystem lists say; the launcher,
 * which holds the key, is made non-dumpable (PR_SET_DUMPABLE 0). */
#define _GNU_SOURCE
#include "run/tls_trust.h"

#include "proxy/tlsterm.h"
#include "run/launch-int.h"
#include "settings/settings.h"
#include "tls/tls.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#define TRUST_DIR "tls"
#define TRUST_STORE_PASSWORD "changeit" /* the JDK's customary one: the store is public */
#define TRUST_LATE_MAX 16               /* late_ro entries: 2 a bind, and the NULL */

/* System bundle paths: Debian and its family, Fedora and RHEL, macOS-style
 * and Alpine. Each that exists on the host shows the bundle inside. */
static const char *const TRUST_PATHS[] = {
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
};

/* srt 0.0.83's variables, each pointing at the bundle. */
static const char *const TRUST_VARS[] = {
    "NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE",    "CURL_CA_BUNDLE",    "REQUESTS_CA_BUNDLE",
    "PIP_CERT",            "GIT_SSL_CAINFO",   "AWS_CA_BUNDLE",     "CARGO_HTTP_CAINFO",
    "DENO_CERT",           "CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE", "NIX_SSL_CERT_FILE",
};

struct run_tls {
    struct proxy_tls_shared *sh;
    char dir[RUN_PATH_MAX + 8];     /* <run directory>/tls */
    char bundle[RUN_PATH_MAX + 32]; /* its ca-bundle.pem */
    char store[RUN_PATH_MAX + 32];  /* its java-truststore.p12 */
    char *sys[sizeof(TRUST_PATHS) / sizeof(TRUST_PATHS[0])]; /* resolved, distinct */
    size_t nsys;
    char *key_real; /* caKeyPath resolved, or NULL */
    const char *late[TRUST_LATE_MAX];
};

/* ------------------------------------------------------------------------ */
/* What run cannot do with termination                                       */

static int refuse(const struct settings *s, const char *what)
{
    const __typeof__(s->network.tls_terminate.given) *g = &s->network.tls_terminate.given;

    fprintf(stderr, "sluice: run: %s:%u:%u: network.tlsTerminate: %s; the command was not run\n",
            g->file, g->line, g->col, what);
    return -1;
}

static int check_settings(const struct run *run)
{
    const struct settings *s = run->settings;

    if (!s->network.isolate)
        return refuse(s, "network.isolate is false: the command uses the host's network "
                         "directly and no proxy sees its connections to terminate them; "
                         "remove one of the two keys");
    if (s->network.http_proxy_port != 0)
        return refuse(s, "network.httpProxyPort relays the sandbox's HTTP proxy connections "
                         "to your own proxy, so sluice cannot terminate them; remove one of "
                         "the two keys");
    if (s->network.transparent)
        return refuse(s, "transparent mode (network.transparent or --transparent) does not "
                         "terminate the connections it intercepts yet; remove one of the two "
                         "(request rules alone work with transparent mode: their hosts are "
                         "terminated through the proxy variables and refused to bare connect())");
    return 0;
}

/* Request rules without tlsTerminate: termination of the ruled hosts only,
 * with a CA made for this run; messages point at the first rule. Transparent
 * mode goes with it: its connect()s to a ruled host are refused
 * (run/tp_call.c), the proxy's tunnels to it are terminated. */
static void implicit_termination(struct settings *s)
{
    const struct settings_item *first = &s->network.request_rules.items[0];
    __typeof__(s->network.tls_terminate) *t = &s->network.tls_terminate;

    t->given.set = 1;
    t->given.file = first->file;
    t->given.line = first->line;
    t->given.col = first->col;
    t->scope = SETTINGS_TLS_SCOPE_NEEDED;
}

/* ------------------------------------------------------------------------ */
/* The CA and the files                                                      */

/* The CA key file: resolved (the sandbox's view has the same tree), one
 * link only (another name would show it). 0 or -1 after a message. */
static int hide_key(struct run *run, struct run_tls *t)
{
    const struct settings *s = run->settings;
    const char *p = s->network.tls_terminate.ca_key_path;
    struct stat st;

    t->key_real = realpath(p, NULL);
    if (t->key_real == NULL || stat(t->key_real, &st) < 0) {
        fprintf(stderr, "sluice: run: network.tlsTerminate.caKeyPath '%s': %s; the command was "
                        "not run\n",
                p, strerror(errno));
        return -1;
    }
    if (!S_ISREG(st.st_mode) || st.st_nlink != 1)
        return refuse(s, S_ISREG(st.st_mode)
                             ? "caKeyPath has more than one hard link: sluice hides the "
                               "path it is given from the sandbox, and another name would "
                               "still show the key; give a key file with one link"
                             : "caKeyPath is not a regular file");
    return 0;
}

static int make_ca(struct run *run, struct run_tls *t, struct tls_ca **ca)
{
    const __typeof__(run->settings->network.tls_terminate) *tt = &run->settings->network.tls_terminate;
    char err[512];

    if (tt->ca_cert_path == NULL) {
        if (tls_ca_generate(0, ca, err, sizeof(err)) < 0)
            goto fail;
        run_debug(run, "tls: a CA made for this run (its key in memory only)");
        return 0;
    }
    if (hide_key(run, t) < 0)
        return -1;
    if (tls_ca_load(tt->ca_cert_path, tt->ca_key_path, ca, err, sizeof(err)) < 0)
        goto fail;
    if (tls_ca_warning(*ca) != NULL)
        fprintf(stderr, "sluice: warning: network.tlsTerminate: %s\n", tls_ca_warning(*ca));
    return 0;
fail:
    fprintf(stderr, "sluice: run: network.tlsTerminate: %s; the command was not run\n", err);
    return -1;
}

/* The system bundle paths the host has, resolved and without repeats; the
 * first is the roots the bundle is made of. */
static int find_system_paths(struct run_tls *t)
{
    for (size_t i = 0; i < sizeof(TRUST_PATHS) / sizeof(TRUST_PATHS[0]); i++) {
        char *r = realpath(TRUST_PATHS[i], NULL);
        struct stat st;
        int dup = 0;
        if (r == NULL || stat(r, &st) < 0 || !S_ISREG(st.st_mode)) {
            free(r);
            continue;
        }
        for (size_t j = 0; j < t->nsys && !dup; j++)
            dup = strcmp(t->sys[j], r) == 0;
        if (dup)
            free(r);
        else
            t->sys[t->nsys++] = r;
    }
    if (t->nsys > 0)
        return 0;
    fprintf(stderr, "sluice: run: network.tlsTerminate: no system CA bundle on this host (%s, "
                    "%s or %s): the sandbox's trust bundle is made of it; install the "
                    "ca-certificates package; the command was not run\n",
            TRUST_PATHS[0], TRUST_PATHS[1], TRUST_PATHS[2]);
    return -1;
}

static int write_files(struct run *run, struct run_tls *t, const struct tls_ca *ca)
{
    char ca_pem[RUN_PATH_MAX + 32], err[RUN_PATH_MAX + 600];

    snprintf(t->dir, sizeof(t->dir), "%s/" TRUST_DIR, run->rundir);
    snprintf(t->bundle, sizeof(t->bundle), "%s/ca-bundle.pem", t->dir);
    snprintf(t->store, sizeof(t->store), "%s/java-truststore.p12", t->dir);
    snprintf(ca_pem, sizeof(ca_pem), "%s/ca.pem", t->dir);
    if (mkdir(t->dir, 0700) < 0) {
        snprintf(err, sizeof(err), "cannot create '%s': %s", t->dir, strerror(errno));
        goto fail;
    }
    if (tls_ca_write_cert(ca, ca_pem, err, sizeof(err)) < 0 ||
        tls_bundle_write(ca, t->sys[0], t->bundle, err, sizeof(err)) < 0 ||
        tls_truststore_write(ca, t->sys[0], t->store, TRUST_STORE_PASSWORD, err, sizeof(err)) <
            0)
        goto fail;
    /* private like the run directory: the sandbox reads them as their owner */
    if (chmod(ca_pem, 0600) < 0 || chmod(t->bundle, 0600) < 0 || chmod(t->store, 0600) < 0) {
        snprintf(err, sizeof(err), "chmod in '%s': %s", t->dir, strerror(errno));
        goto fail;
    }
    return 0;
fail:
    fprintf(stderr, "sluice: run: network.tlsTerminate: %s; the command was not run\n", err);
    return -1;
}

/* The read-only binds, after every other mount: the folder at its own path
 * (on the tmpfs over the run directories), the bundle over each system
 * path, /dev/null over the CA key. */
static void late_binds(struct run_tls *t)
{
    size_t n = 0;

    t->late[n++] = t->dir;
    t->late[n++] = t->dir;
    for (size_t i = 0; i < t->nsys; i++) {
        t->late[n++] = t->bundle;
        t->late[n++] = t->sys[i];
    }
    if (t->key_real != NULL) {
        t->late[n++] = "/dev/null";
        t->late[n++] = t->key_real;
    }
    t->late[n] = NULL;
}

static int make_shared(struct run *run, struct run_tls *t, struct tls_ca *ca)
{
    const struct settings_list *ex = &run->settings->network.tls_terminate.extra_ca_cert_paths;
    struct proxy_tls_shared *sh = calloc(1, sizeof(*sh));
    char err[512] = "out of memory";

    if (sh == NULL || (sh->extra = calloc(ex->n + 1, sizeof(char *))) == NULL)
        goto fail;
    for (size_t i = 0; i < ex->n; i++) {
        if ((sh->extra[i] = strdup(ex->items[i].value)) == NULL)
            goto fail;
        sh->nextra++;
    }
    if (tls_leaves_new(ca, NULL, &sh->leaves, err, sizeof(err)) < 0)
        goto fail;
    sh->warning = tls_ca_warning(ca);
    t->sh = sh;
    return 0;
fail:
    proxy_tls_shared_free(sh);
    fprintf(stderr, "sluice: run: network.tlsTerminate: %s; the command was not run\n", err);
    return -1;
}

int run_tls_prepare(struct run *run)
{
    struct settings *s = run->settings;
    struct run_tls *t;
    struct tls_ca *ca = NULL;
    int rc = -1;

    if (!s->network.tls_terminate.given.set) {
        /* no proxy of sluice's sees the connections with isolate false or
         * httpProxyPort: request rules keep what they do there */
        if (s->network.request_rules.n == 0 || !s->network.isolate ||
            s->network.http_proxy_port != 0)
            return 0;
        implicit_termination(s);
    } else if (check_settings(run) < 0) {
        return -1;
    }
    /* the CA key lives in this process from here on: not dumpable, so no
     * process without CAP_SYS_PTRACE reads its memory through /proc, even
     * one of the same uid that sees the host's /proc
     * (enableWeakerNestedSandbox binds it in) */
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0) {
        fprintf(stderr, "sluice: run: network.tlsTerminate: cannot make sluice non-dumpable: %s; "
                        "the command was not run\n",
                strerror(errno));
        return -1;
    }
    t = calloc(1, sizeof(*t));
    if (t == NULL) {
        fprintf(stderr, "sluice: run: out of memory\n");
        return -1;
    }
    run->tls = t;
    if (make_ca(run, t, &ca) < 0 || find_system_paths(t) < 0 || write_files(run, t, ca) < 0 ||
        make_shared(run, t, ca) < 0)
        goto out;
    late_binds(t);
    run_debug(run, "tls: termination on (%s), trust bundle %s",
              s->network.tls_terminate.scope == SETTINGS_TLS_SCOPE_NEEDED
                  ? "hosts with request rules only"
                  : "every allowed host not in excludeDomains",
              t->bundle);
    run_debug(run, "tls: SOCKS5 connections are not terminated: they stay opaque tunnels, and "
                   "a SOCKS5 CONNECT to a host with request rules is refused");
    rc = 0;
out:
    tls_ca_free(ca); /* the leaves hold their own reference */
    return rc;
}

const char *const *run_tls_late_ro(const struct run *run)
{
    return run->tls != NULL ? run->tls->late : NULL;
}

/* ------------------------------------------------------------------------ */
/* The environment                                                           */

/* The index of NAME=... in env, or env->n. */
static size_t env_find(const struct sb_strv *env, const char *name)
{
    size_t n = strlen(name);

    for (size_t i = 0; i < env->n; i++)
        if (strncmp(env->v[i], name, n) == 0 && env->v[i][n] == '=')
            return i;
    return env->n;
}

/* NAME=value (after old and a space, when old is not NULL), replacing any
 * value env has. */
static int env_set(struct sb_strv *env, const char *name, const char *value, const char *old)
{
    size_t i = env_find(env, name);
    struct sb_strv one = {0};
    int rc;

    rc = sb_strv_pushf(&one, "%s=%s%s%s", name, old != NULL ? old : "",
                       old != NULL && old[0] != '\0' ? " " : "", value);
    if (rc < 0)
        return rc;
    if (i < env->n) {
        free(env->v[i]);
        env->v[i] = one.v[0];
        one.v[0] = NULL;
        one.n = 0;
        sb_strv_free(&one);
        return 0;
    }
    rc = sb_strv_push(env, one.v[0]);
    sb_strv_free(&one);
    return rc;
}

int run_tls_env(struct run *run, struct sb_strv *env, char *err, size_t errlen)
{
    const struct run_tls *t = run->tls;
    char java[RUN_PATH_MAX + 160];
    char *old = NULL;
    size_t j;
    int rc = 0;

    if (t == NULL)
        return 0;
    for (size_t i = 0; rc == 0 && i < sizeof(TRUST_VARS) / sizeof(TRUST_VARS[0]); i++)
        rc = env_set(env, TRUST_VARS[i], t->bundle, NULL);
    /* after the host's (filtered) options and the proxy properties: a later
     * -D wins */
    snprintf(java, sizeof(java),
             "-Djavax.net.ssl.trustStore=%s -Djavax.net.ssl.trustStoreType=PKCS12 "
             "-Djavax.net.ssl.trustStorePassword=" TRUST_STORE_PASSWORD,
             t->store);
    j = env_find(env, "JAVA_TOOL_OPTIONS");
    if (rc == 0 && j < env->n && (old = strdup(env->v[j] + sizeof("JAVA_TOOL_OPTIONS"))) == NULL)
        rc = -ENOMEM;
    if (rc == 0)
        rc = env_set(env, "JAVA_TOOL_OPTIONS", java, old);
    free(old);
    if (rc < 0)
        snprintf(err, errlen, "environment: out of memory");
    return rc;
}

/* ------------------------------------------------------------------------ */
/* The proxy service's side                                                  */

int run_tls_start(struct run *run, char *err, size_t errlen)
{
    if (run->tls == NULL)
        return 0;
    return proxy_tls_new(run->tls->sh, &run->core.tls, err, errlen);
}

void run_tls_free(struct run *run)
{
    struct run_tls *t = run->tls;

    proxy_tls_free(run->core.tls);
    run->core.tls = NULL;
    if (t == NULL)
        return;
    proxy_tls_shared_free(t->sh);
    for (size_t i = 0; i < t->nsys; i++)
        free(t->sys[i]);
    free(t->key_real);
    free(t);
    run->tls = NULL;
}
