/* run/creds_trust.c - which settings files may hand a secret to the proxy
 * (issue 24 item 4).
 *
 * A "mask" entry makes sluice send a real secret of the host (a variable
 * of its environment, a file of its own) to the entry's hosts. A settings
 * file the sandboxed command could have written (a --settings file in the
 * project, a user file under a writable allowWrite root) could therefore
 * name AWS_SECRET_ACCESS_KEY, allow evil.example and have the real value
 * injected there, where without the entry the variable is simply
 * stripped. So a masking entry is accepted only from a file that no
 * sandbox could have written: not inside a place this run binds writable
 * (allowWrite, the working directory when it is writable, the private
 * /tmp's host directory, everything with filesystem.disabled), not under a
 * directory writable by others (/tmp, /var/tmp, /dev/shm: any sandbox that
 * may write there could have planted it), owned by root or by whoever runs
 * sluice, not writable by group or others, one link only. The same holds
 * for what widens where a trusted entry's value may go: the allowedDomains
 * entries (and list files) an entry without injectHosts is sent to,
 * allowPlaintextInject, with it the DNS servers (they decide where a plain
 * request goes), and the extra upstream CAs (tlsTerminate.extraCaCertPaths,
 * the settings file that names one and the CA file itself: a CA the
 * sandbox chose could read the upstream leg). A refusal names the file:line
 * and why; nothing is run. Deny entries only take away, and are accepted
 * from any layer.
 */
#define _GNU_SOURCE
#include "run/creds.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run/launch-int.h"
#include "settings/settings.h"

/* path (absolute, normalised) is root or below it. */
static int under(const char *path, const char *root)
{
    size_t n = strlen(root);

    while (n > 1 && root[n - 1] == '/')
        n--;
    if (n == 1 && root[0] == '/')
        return 1;
    return strncmp(path, root, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* Inside one of the writable places (as written, and resolved). */
static const char *in_writable(const char *path, const char *const *writable, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char real[PATH_MAX];
        if (under(path, writable[i]))
            return writable[i];
        if (realpath(writable[i], real) != NULL && under(path, real))
            return writable[i];
    }
    return NULL;
}

/* Owned by root or by us, not writable by group or others. */
static int owner_ok(const struct stat *st)
{
    return (st->st_uid == 0 || st->st_uid == geteuid()) && (st->st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

int run_settings_file_trusted(const char *path, const char *const *writable, size_t n, char *why,
                              size_t whylen)
{
    char abs[PATH_MAX], real[PATH_MAX], cwd[PATH_MAX];
    const char *w;
    struct stat st;

    abs[0] = '\0';
    if (path[0] == '/' && strlen(path) < sizeof(abs))
        memcpy(abs, path, strlen(path) + 1);
    else if (getcwd(cwd, sizeof(cwd)) != NULL && strlen(cwd) + strlen(path) + 2 <= sizeof(abs)) {
        size_t cl = strlen(cwd);
        memcpy(abs, cwd, cl);
        abs[cl] = '/';
        memcpy(abs + cl + 1, path, strlen(path) + 1);
    }
    if (realpath(path, real) == NULL) {
        snprintf(why, whylen, "cannot be resolved (%s)", strerror(errno));
        return -1;
    }
    if ((w = in_writable(real, writable, n)) != NULL ||
        (abs[0] != '\0' && (w = in_writable(abs, writable, n)) != NULL)) {
        snprintf(why, whylen, "is inside '%s', which the sandboxed command may write", w);
        return -1;
    }
    if (stat(real, &st) < 0) {
        snprintf(why, whylen, "cannot be checked (%s)", strerror(errno));
        return -1;
    }
    if (!S_ISREG(st.st_mode) || st.st_nlink != 1) {
        snprintf(why, whylen,
                 "is not a regular file with one link (another name could be "
                 "writable)");
        return -1;
    }
    if (!owner_ok(&st)) {
        snprintf(why, whylen, "is writable by others (owned by uid %u, mode %04o)",
                 (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
        return -1;
    }
    /* each directory above it: nobody else may replace it */
    for (char *slash = strrchr(real, '/'); slash != NULL; slash = strrchr(real, '/')) {
        *slash = '\0';
        const char *dir = real[0] != '\0' ? real : "/";
        if (stat(dir, &st) < 0 || !owner_ok(&st)) {
            snprintf(why, whylen,
                     "is in '%s', which is writable by others (any sandbox that may "
                     "write there could have put it there)",
                     dir);
            return -1;
        }
        if (real[0] == '\0')
            break;
    }
    return 0;
}

static int refuse(const struct settings_item *it, const char *what, const char *why, char *err,
                  size_t errlen)
{
    snprintf(err, errlen,
             "%s:%u:%u: %s[%zu]: refused: %s is accepted only from a settings file the sandbox "
             "could not have written (the user's or the managed file), and %s %s",
             it->file, it->line, it->col, it->list != NULL ? it->list : "credentials", it->index,
             what, it->file, why);
    return -1;
}

/* value.exec's program: not inside a writable place, owned by root or us
 * and not writable by others, nor any directory above it; one link when it
 * is ours (another name could be in a place the sandbox writes). A
 * program the sandbox could replace would run on the host. */
static int exec_trusted(const struct settings_item *it, const struct settings_credential *cr,
                        const char *const *writable, size_t n, char *err, size_t errlen)
{
    char prog[PATH_MAX], why[PATH_MAX + 160];
    const char *rest = cr->rest, *p;
    size_t pl;
    struct stat st;
    int rc;

    if (!settings_credential_next(&rest, 'x', &p, &pl) || pl == 0 || pl >= sizeof(prog) ||
        p[0] != '/') {
        snprintf(err, errlen, "%s:%u:%u: %s[%zu].value.exec: refused: the program must be an "
                              "absolute path",
                 it->file, it->line, it->col, it->list, it->index);
        return -1;
    }
    memcpy(prog, p, pl);
    prog[pl] = '\0';
    rc = run_settings_file_trusted(prog, writable, n, why, sizeof(why));
    if (rc < 0 && strstr(why, "one link") != NULL && stat(prog, &st) == 0 && st.st_uid == 0 &&
        geteuid() != 0)
        rc = 0; /* root's: no name of it is writable by us, hence by the sandbox */
    if (rc < 0) {
        snprintf(err, errlen,
                 "%s:%u:%u: %s[%zu].value.exec: refused: the helper program '%s' %s (a program "
                 "the sandbox could replace would run on the host)",
                 it->file, it->line, it->col, it->list, it->index, prog, why);
        return -1;
    }
    return 0;
}

static int item_trusted(const struct settings_item *it, const char *const *writable, size_t n,
                        char *why, size_t whylen)
{
    if (it->file == NULL || strcmp(it->file, "<default>") == 0)
        return 0;
    return run_settings_file_trusted(it->file, writable, n, why, whylen);
}

/* With plain-HTTP injection (allowPlaintextInject): the key itself, the DNS
 * servers and the parent proxy decide who reads the real value. */
static int check_plaintext(const struct settings *s, const char *const *writable, size_t n,
                           char *err, size_t errlen)
{
    char why[PATH_MAX + 160];

    if (s->credentials.plaintext.on && s->credentials.plaintext.file != NULL) {
        const struct settings_item at = {.file = s->credentials.plaintext.file,
                                         .line = s->credentials.plaintext.line,
                                         .col = s->credentials.plaintext.col,
                                         .list = "credentials.allowPlaintextInject"};
        if (item_trusted(&at, writable, n, why, sizeof(why)) < 0) {
            snprintf(err, errlen,
                     "%s:%u:%u: credentials.allowPlaintextInject: refused: with masked "
                     "credentials, sending real values over plain HTTP is accepted only from a "
                     "settings file the sandbox could not have written, and %s %s",
                     at.file, at.line, at.col, at.file, why);
            return -1;
        }
    }
    for (size_t i = 0; s->credentials.plaintext.on && i < s->network.dns_servers.n; i++) {
        const struct settings_item *it = &s->network.dns_servers.items[i];
        if (item_trusted(it, writable, n, why, sizeof(why)) < 0)
            return refuse(it,
                          "with masked credentials sent over plain HTTP "
                          "(allowPlaintextInject), a DNS server (it decides where the value goes)",
                          why, err, errlen);
    }
    if (s->credentials.plaintext.on && s->network.parent_proxy.set &&
        s->network.parent_proxy.http != NULL && s->network.parent_proxy.file != NULL) {
        const struct settings_item at = {.file = s->network.parent_proxy.file,
                                         .line = s->network.parent_proxy.line,
                                         .col = s->network.parent_proxy.col};
        if (item_trusted(&at, writable, n, why, sizeof(why)) < 0) {
            snprintf(err, errlen,
                     "%s:%u:%u: network.parentProxy: refused: with masked credentials sent over "
                     "plain HTTP (allowPlaintextInject), a parent proxy (it reads plain requests) "
                     "is accepted only from a settings file the sandbox could not have written, "
                     "and %s %s",
                     at.file, at.line, at.col, at.file, why);
            return -1;
        }
    }
    return 0;
}

int run_creds_trust_check(const struct settings *s, const char *const *writable, size_t n,
                          char *err, size_t errlen)
{
    const struct settings_list *lists[3] = {&s->credentials.env_vars, &s->credentials.files,
                                            &s->credentials.aws_pairs};
    const struct settings_item *widened = NULL; /* a masked entry without injectHosts */
    char why[PATH_MAX + 160];
    size_t masked = 0;

    for (size_t l = 0; l < 3; l++)
        for (size_t i = 0; i < lists[l]->n; i++) {
            const struct settings_item *it = &lists[l]->items[i];
            struct settings_credential cr;
            const char *rest, *h;
            size_t hl;
            if (settings_credential_split(it->value, &cr) < 0 || !cr.mask)
                continue;
            masked++;
            if (item_trusted(it, writable, n, why, sizeof(why)) < 0)
                return refuse(it,
                              cr.exec ? "value.exec (it runs a program on the host and sends "
                                        "its output out)"
                                      : "mode \"mask\" (it sends a real secret of the host out)",
                              why, err, errlen);
            if (cr.exec && exec_trusted(it, &cr, writable, n, err, errlen) < 0)
                return -1;
            rest = cr.rest;
            if (widened == NULL && !settings_credential_next(&rest, 'h', &h, &hl))
                widened = it;
        }
    for (size_t i = 0; i < s->cred_replaced.n; i++) {
        const struct settings_item *it = &s->cred_replaced.items[i];
        if (item_trusted(it, writable, n, why, sizeof(why)) < 0) {
            snprintf(err, errlen,
                     "%s:%u:%u: %s: refused: it replaces an earlier file's list that held mask "
                     "entries (the secret would reach the sandbox unmasked); only a settings file "
                     "the sandbox could not have written may do that, and %s %s",
                     it->file, it->line, it->col, it->value, it->file, why);
            return -1;
        }
    }
    if (masked == 0)
        return 0;
    for (size_t i = 0; widened != NULL && i < s->network.allowed_domains.n; i++) {
        const struct settings_item *it = &s->network.allowed_domains.items[i];
        if (item_trusted(it, writable, n, why, sizeof(why)) < 0) {
            char what[PATH_MAX + 200];
            snprintf(what, sizeof(what),
                     "an allowedDomains entry, while the masked credential at %s:%u has no "
                     "injectHosts (its value goes to every host allowedDomains allows: give it "
                     "injectHosts),",
                     widened->file, widened->line);
            return refuse(it, what, why, err, errlen);
        }
    }
    if (check_plaintext(s, writable, n, err, errlen) < 0)
        return -1;
    for (size_t i = 0; i < s->network.tls_terminate.extra_ca_cert_paths.n; i++) {
        const struct settings_item *it = &s->network.tls_terminate.extra_ca_cert_paths.items[i];
        const char *what = "with masked credentials, an extra upstream CA (a CA the sandbox "
                           "chose could read the real value on its way out)";
        if (item_trusted(it, writable, n, why, sizeof(why)) < 0)
            return refuse(it, what, why, err, errlen);
        if (run_settings_file_trusted(it->value, writable, n, why, sizeof(why)) < 0) {
            snprintf(err, errlen, "%s:%u:%u: %s[%zu]: refused: %s: the CA file '%s' %s", it->file,
                     it->line, it->col, it->list, it->index, what, it->value, why);
            return -1;
        }
    }
    return 0;
}

int run_creds_trust(struct run *run)
{
    const char **w = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;

    for (size_t i = 0; i + 1 < run->plan.argv.n; i++) {
        const char *op = run->plan.argv.v[i];
        if (strcmp(op, "--") == 0)
            break;
        if (strcmp(op, "--bind") != 0 && strcmp(op, "--bind-try") != 0 &&
            strcmp(op, "--dev-bind") != 0 && strcmp(op, "--dev-bind-try") != 0)
            continue;
        if (n == cap) {
            const char **nw = realloc(w, (cap = cap * 2 + 8) * sizeof(*w));
            if (nw == NULL) {
                fprintf(stderr, "sluice: run: out of memory; the command was not run\n");
                free(w);
                return -1;
            }
            w = nw;
        }
        w[n++] = run->plan.argv.v[i + 1];
    }
    if (run_creds_trust_check(run->settings, w, n, run->err, sizeof(run->err)) < 0) {
        fprintf(stderr, "sluice: run: %s; the command was not run\n", run->err);
        rc = -1;
    }
    free(w);
    return rc;
}
