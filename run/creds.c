/* run/creds.c - "credentials" in `sluice run` (issue 24): what the sandbox
 * sees of each entry, and the table the proxy service swaps with.
 *
 * envVars: deny removes the variable; mask passes it as its placeholder,
 * even when its name is on the list of secret variables sluice strips (the
 * placeholder is not a secret). files: deny covers the file with /dev/null
 * (read-only, after every other mount); mask writes a fake copy (the
 * secret replaced by its placeholder) in the run directory's "cred" folder
 * (0700, files 0600) and binds it read-only over the real file. The secret
 * is the whole value (a file's trailing white space left out), or group 1
 * of extract (POSIX extended) in it; decode jwt keeps a token's header and
 * claims (maskClaims: those claims' values replaced too) and replaces its
 * signature, so the placeholder is a token of the same shape. A secret
 * shorter than 16 bytes is refused (its placeholder could be guessed), and
 * so is a masked file with more than one hard link, or one whose secret
 * appears elsewhere in it without maskDuplicates: the real value must not
 * stay readable. The real values stay in this process (made non-dumpable)
 * and are never printed: messages name the entry only.
 */
#define _GNU_SOURCE
#include "run/creds.h"

#include "proxy/creds.h"
#include "proxy/gw.h"
#include "proxy/gwrun.h"
#include "proxy/helper.h"
#include "run/launch-int.h"
#include "run/tls_trust.h"
#include "settings/settings.h"

#include <errno.h>
#include <fcntl.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#define CRED_DIR "cred"
#define CRED_FILE_MAX (1u << 20) /* a masked file is read whole */

struct run_env_cred {
    char *name;
    char *value; /* NAME's value inside (the placeholder in it), or NULL: removed */
};

struct run_creds {
    struct proxy_creds t;
    struct run_env_cred env[SUBST_MAX * 2];
    size_t nenv;
    char dir[RUN_PATH_MAX + 8];
    char *files[SUBST_MAX * 2]; /* owned strings of late (fakes and real paths) */
    size_t nfiles;
    const char **late; /* TLS's pairs, then ours, then NULL */
    /* envVars entries with value.exec (issue 24 item 4): their helpers'
     * table, its refreshes on the run's loop, and for its entry j the
     * settings item, the variable (env index) and the table entry */
    struct proxy_gw *gw;
    struct proxy_gwrun *gwrun;
    const struct settings_item *exec_it[PROXY_CREDS_MAX];
    size_t exec_env[PROXY_CREDS_MAX], exec_tab[PROXY_CREDS_MAX], nexec;
    char **helper_env; /* environ without the credentials' variables */
};

/* "ENTRY: what" on stderr, naming the entry and never its value. */
static int refuse(const struct settings_item *it, const char *what)
{
    fprintf(stderr, "sluice: run: %s:%u:%u: %s[%zu]: %s; the command was not run\n", it->file,
            it->line, it->col, it->list, it->index, what);
    return -1;
}

/* onExtractNoMatch "warn": says so, returns 0. */
static int warn_no_match(const struct settings_item *it, const char *what)
{
    fprintf(stderr,
            "sluice: warning: %s:%u:%u: %s[%zu]: extract does not match; %s "
            "(onExtractNoMatch \"warn\")\n",
            it->file, it->line, it->col, it->list, it->index, what);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The secret in a value                                                     */

static int b64url_val(uint8_t ch)
{
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    const char *p = ch != 0 ? strchr(a, ch) : NULL;

    return p != NULL ? (int)(p - a) : -1;
}

/* base64url without padding, in place of n chars at s (decoded into d). */
static size_t b64url_decode(const uint8_t *s, size_t n, uint8_t *d)
{
    size_t o = 0;
    unsigned acc = 0, bits = 0;

    for (size_t i = 0; i < n; i++) {
        int v = b64url_val(s[i]);
        if (v < 0)
            return (size_t)-1;
        acc = acc << 6 | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            d[o++] = (uint8_t)(acc >> bits);
        }
    }
    return o;
}

static size_t b64url_encode(const uint8_t *d, size_t n, uint8_t *s)
{
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    size_t o = 0;
    unsigned acc = 0, bits = 0;

    for (size_t i = 0; i < n; i++) {
        acc = acc << 8 | d[i];
        bits += 8;
        while (bits >= 6) {
            bits -= 6;
            s[o++] = (uint8_t)a[acc >> bits & 63];
        }
    }
    if (bits > 0)
        s[o++] = (uint8_t)a[acc << (6 - bits) & 63];
    return o;
}

/* One claim's string value in a JSON text, its letters and digits replaced
 * (the same classes, so the text and its encoding keep their length). */
static int mask_claim(uint8_t *j, size_t n, const char *claim, size_t cl)
{
    for (size_t i = 0; i + cl + 2 < n; i++) {
        size_t k;
        if (j[i] != '"' || memcmp(j + i + 1, claim, cl) != 0 || j[i + cl + 1] != '"')
            continue;
        k = i + cl + 2;
        while (k < n && (j[k] == ' ' || j[k] == '\t' || j[k] == '\n' || j[k] == '\r'))
            k++;
        if (k >= n || j[k++] != ':')
            continue;
        while (k < n && (j[k] == ' ' || j[k] == '\t' || j[k] == '\n' || j[k] == '\r'))
            k++;
        if (k < n && j[k] == '"') {
            size_t e = ++k;
            while (e < n && j[e] != '"')
                e += j[e] == '\\' ? 2 : 1;
            if (e > n)
                return -1;
            return proxy_cred_placeholder(j + k, e - k, j + k) < 0 ? -1 : 1;
        }
        return 0; /* a claim that is not a string stays */
    }
    return 0;
}

/* decode jwt: the fake token (header kept, claims kept or masked, the
 * signature replaced). 0, or -1 with *why. */
static int jwt_fake(const uint8_t *v, size_t len, const struct settings_credential *cr,
                    uint8_t *fake, const char **why)
{
    const uint8_t *d1 = memchr(v, '.', len), *d2;
    const char *rest = cr->rest, *claim;
    size_t cl, plen, dl;
    uint8_t *dec;

    d2 = d1 != NULL ? memchr(d1 + 1, '.', len - (size_t)(d1 + 1 - v)) : NULL;
    if (d1 == NULL || d2 == NULL || memchr(d2 + 1, '.', len - (size_t)(d2 + 1 - v)) != NULL) {
        *why = "decode jwt: the value is not a JWT (header.claims.signature)";
        return -1;
    }
    memcpy(fake, v, len);
    if (len - (size_t)(d2 + 1 - v) < SUBST_LEN_MIN) {
        *why = "decode jwt: the signature is shorter than 16 characters";
        return -1;
    }
    if (proxy_cred_placeholder(d2 + 1, len - (size_t)(d2 + 1 - v), fake + (d2 + 1 - v)) < 0)
        goto rnd;
    plen = (size_t)(d2 - d1 - 1);
    dec = malloc(plen + 4);
    if (dec == NULL)
        goto rnd;
    dl = b64url_decode(d1 + 1, plen, dec);
    if (dl == (size_t)-1) {
        free(dec);
        *why = "decode jwt: the claims are not base64url";
        return -1;
    }
    while (settings_credential_next(&rest, 'c', &claim, &cl)) {
        if (mask_claim(dec, dl, claim, cl) < 0) {
            free(dec);
            goto rnd;
        }
    }
    if (b64url_encode(dec, dl, fake + (d1 + 1 - v)) != plen) {
        free(dec);
        *why = "decode jwt: the claims' encoding is not canonical base64url";
        return -1;
    }
    free(dec);
    return 0;
rnd:
    *why = "the random source failed";
    return -1;
}

/* The secret's span in text (NUL-terminated, len bytes): group 1 of
 * extract, or the whole (a file's trailing white space left out). 1 with
 * *off, *n; 0 when extract does not match; -1 with *why. */
static int secret_span(const struct settings_credential *cr, const char *text, size_t len,
                       size_t *off, size_t *n, const char **why)
{
    regex_t re;
    regmatch_t m[2];
    char *pat;
    int rc;

    if (cr->extract_len == 0) {
        *off = 0;
        *n = len;
        while (cr->file && *n > 0 && strchr(" \t\r\n", text[*n - 1]) != NULL)
            (*n)--;
        return 1;
    }
    pat = strndup(cr->extract, cr->extract_len);
    if (pat == NULL || regcomp(&re, pat, REG_EXTENDED) != 0) {
        free(pat);
        *why = "extract: cannot compile the regular expression";
        return -1;
    }
    free(pat);
    rc = regexec(&re, text, 2, m, 0);
    regfree(&re);
    if (rc != 0 || m[1].rm_so < 0)
        return 0;
    *off = (size_t)m[1].rm_so;
    *n = (size_t)(m[1].rm_eo - m[1].rm_so);
    return 1;
}

/* The placeholder of secret (len bytes) into fake. 0, or -1 with *why. */
static int make_fake(const struct settings_credential *cr, const uint8_t *secret, size_t len,
                     uint8_t *fake, const char **why)
{
    if (len < SUBST_LEN_MIN) {
        *why = "the secret is shorter than 16 bytes: its placeholder could be guessed, and a "
               "secret that short is refused";
        return -1;
    }
    if (len > SUBST_LEN_MAX) {
        *why = "the secret is longer than 65536 bytes";
        return -1;
    }
    if (cr->jwt)
        return jwt_fake(secret, len, cr, fake, why);
    if (proxy_cred_placeholder(secret, len, fake) < 0) {
        *why = "the random source failed";
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Entries                                                                   */

static int add_table(struct run_creds *rc, const struct settings_item *it,
                     const struct settings_credential *cr, const uint8_t *secret, size_t len,
                     const uint8_t *fake)
{
    char name[RUN_PATH_MAX];
    int e;

    snprintf(name, sizeof(name), "%.*s", (int)cr->name_len, cr->name);
    e = proxy_creds_add(&rc->t, name, cr->file, secret, len, fake);
    if (e == -EINVAL)
        return refuse(it, rc->t.n >= PROXY_CREDS_MAX ? "too many masked credentials (16 at most)"
                                                     : "its placeholder clashes with another "
                                                       "credential; run again");
    if (e < 0)
        return refuse(it, e == -EIO ? "the random source failed" : "out of memory");
    return 0;
}

static int env_entry(struct run_creds *rc, const struct settings_item *it,
                     const struct settings_credential *cr)
{
    struct run_env_cred *ev = &rc->env[rc->nenv];
    const char *val, *why = NULL;
    size_t off, n;
    uint8_t *fake;
    int m;

    if (rc->nenv >= sizeof(rc->env) / sizeof(rc->env[0]))
        return refuse(it, "too many envVars entries (128 at most)");
    ev->name = strndup(cr->name, cr->name_len);
    if (ev->name == NULL)
        return refuse(it, "out of memory");
    rc->nenv++;
    if (cr->mask && cr->exec) { /* its value comes from its helper: run_creds_exec */
        if (rc->nexec >= PROXY_CREDS_MAX)
            return refuse(it, "too many entries with value.exec (16 at most)");
        rc->exec_it[rc->nexec] = it;
        rc->exec_env[rc->nexec++] = rc->nenv - 1;
        return 0;
    }
    val = getenv(ev->name);
    if (!cr->mask || val == NULL)
        return 0; /* removed (deny, or nothing to mask) */
    m = secret_span(cr, val, strlen(val), &off, &n, &why);
    if (m < 0)
        return refuse(it, why);
    if (m == 0) {
        if (cr->on_no_match == SETTINGS_NOMATCH_ERROR)
            return refuse(it, "extract does not match the variable's value (onExtractNoMatch "
                              "\"error\")");
        if (cr->on_no_match == SETTINGS_NOMATCH_DENY)
            return 0;
        (void)warn_no_match(it, "the variable is passed as it is");
        ev->value = strdup(val);
        return ev->value != NULL ? 0 : refuse(it, "out of memory");
    }
    ev->value = strdup(val);
    fake = malloc(n + 1);
    if (ev->value == NULL || fake == NULL) {
        free(fake);
        return refuse(it, "out of memory");
    }
    if (make_fake(cr, (const uint8_t *)val + off, n, fake, &why) < 0 ||
        add_table(rc, it, cr, (const uint8_t *)val + off, n, fake) < 0) {
        free(fake);
        return why != NULL ? refuse(it, why) : -1;
    }
    memcpy(ev->value + off, fake, n);
    free(fake);
    return 0;
}

/* An awsPairs variable that an envVars entry names too (either mode). */
static int aws_twice(const struct run_creds *rc, const struct settings_item *it,
                     const struct settings_credential *cr)
{
    for (size_t i = 0; i < rc->nenv; i++)
        if (strlen(rc->env[i].name) == cr->name_len &&
            memcmp(rc->env[i].name, cr->name, cr->name_len) == 0)
            return refuse(it, "the variable is also an envVars entry: name it in one place");
    return 0;
}

/* An awsPairs variable just taken by env_entry: its role in the table. */
static int aws_role(struct run_creds *rc, const struct settings_item *it,
                    const struct settings_credential *cr)
{
    const char *rest = cr->rest, *r;
    const char *name = rc->env[rc->nenv - 1].name;
    size_t rl;

    if (!settings_credential_next(&rest, 'a', &r, &rl) || rl != 1)
        return refuse(it, "internal: an awsPairs variable without its role");
    if (rc->t.n == 0 || strcmp(rc->t.e[rc->t.n - 1].name, name) != 0)
        return 0; /* not set: nothing masked */
    if (proxy_creds_aws(&rc->t, rc->t.n - 1, it->index, r[0]) < 0)
        return refuse(it, "too many awsPairs");
    return 0;
}

static int add_late(struct run_creds *rc, const char *src, const char *dst)
{
    char *a = strdup(src), *b = strdup(dst);

    if (a == NULL || b == NULL || rc->nfiles + 2 > sizeof(rc->files) / sizeof(rc->files[0])) {
        free(a);
        free(b);
        return -1;
    }
    rc->files[rc->nfiles++] = a;
    rc->files[rc->nfiles++] = b;
    return 0;
}

/* The file's bytes (NUL-terminated), regular, one link, at most
 * CRED_FILE_MAX. 0, or -1 with *why. */
static int read_file(const char *path, char **out, size_t *len, const char **why)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    struct stat st;
    char *b = NULL;
    size_t n = 0;

    if (fd < 0 || fstat(fd, &st) < 0) {
        *why = "cannot open the file";
        goto fail;
    }
    if (!S_ISREG(st.st_mode) || st.st_nlink != 1 || st.st_size > (off_t)CRED_FILE_MAX) {
        *why = !S_ISREG(st.st_mode) ? "not a regular file"
               : st.st_nlink != 1
                   ? "the file has more than one hard link: another name would still show "
                     "the real value"
                   : "the file is larger than 1 MiB";
        goto fail;
    }
    b = malloc((size_t)st.st_size + 1);
    if (b == NULL) {
        *why = "out of memory";
        goto fail;
    }
    while (n < (size_t)st.st_size) {
        ssize_t r = read(fd, b + n, (size_t)st.st_size - n);
        if (r <= 0) {
            *why = "cannot read the file";
            goto fail;
        }
        n += (size_t)r;
    }
    b[n] = '\0';
    close(fd);
    *out = b;
    *len = n;
    return 0;
fail:
    if (fd >= 0)
        close(fd);
    free(b);
    return -1;
}

/* Every other occurrence of secret in b (not at off) replaced by fake;
 * without maskDuplicates one is refused. 0, or -1 with *why. */
static int duplicates(const struct settings_credential *cr, char *b, size_t len, size_t off,
                      size_t n, const uint8_t *secret, const uint8_t *fake, const char **why)
{
    for (size_t i = 0; i + n <= len; i++) {
        if (i == off || memcmp(b + i, secret, n) != 0)
            continue;
        if (!cr->mask_duplicates) {
            *why = "the secret appears more than once in the file: set maskDuplicates, or "
                   "the other copies would stay readable";
            return -1;
        }
        memcpy(b + i, fake, n);
        i += n - 1;
    }
    return 0;
}

static int write_fake(struct run_creds *rc, const char *b, size_t len, char *path, size_t cap)
{
    int fd;
    size_t o = 0;

    snprintf(path, cap, "%s/%zu", rc->dir, rc->nfiles);
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    while (o < len) {
        ssize_t w = write(fd, b + o, len - o);
        if (w <= 0) {
            close(fd);
            return -1;
        }
        o += (size_t)w;
    }
    return close(fd);
}

/* A masked file: its fake copy over it. */
static int mask_file(struct run_creds *rc, const struct settings_item *it,
                     const struct settings_credential *cr, const char *real)
{
    char *b = NULL, fpath[RUN_PATH_MAX + 32];
    const char *why = NULL;
    uint8_t *secret = NULL, *fake = NULL;
    size_t len, off, n;
    int m, ret = -1;

    if (read_file(real, &b, &len, &why) < 0)
        return refuse(it, why);
    m = secret_span(cr, b, len, &off, &n, &why);
    if (m <= 0) {
        if (m < 0 || cr->on_no_match == SETTINGS_NOMATCH_ERROR)
            ret = refuse(it, m < 0 ? why
                                   : "extract does not match the file (onExtractNoMatch "
                                     "\"error\")");
        else if (cr->on_no_match == SETTINGS_NOMATCH_DENY)
            ret = add_late(rc, "/dev/null", real) < 0 ? refuse(it, "out of memory") : 0;
        else
            ret = warn_no_match(it, "the file is shown as it is");
        goto out;
    }
    secret = malloc(n + 1);
    fake = malloc(n + 1);
    if (secret == NULL || fake == NULL) {
        ret = refuse(it, "out of memory");
        goto out;
    }
    memcpy(secret, b + off, n);
    if (make_fake(cr, secret, n, fake, &why) < 0 ||
        duplicates(cr, b, len, off, n, secret, fake, &why) < 0) {
        ret = refuse(it, why);
        goto out;
    }
    memcpy(b + off, fake, n);
    if (add_table(rc, it, cr, secret, n, fake) < 0)
        goto out;
    if (write_fake(rc, b, len, fpath, sizeof(fpath)) < 0 || add_late(rc, fpath, real) < 0) {
        ret = refuse(it, "cannot write its fake copy in the run directory");
        goto out;
    }
    ret = 0;
out:
    if (b != NULL)
        explicit_bzero(b, len);
    if (secret != NULL)
        explicit_bzero(secret, n);
    free(b);
    free(secret);
    free(fake);
    return ret;
}

static int file_entry(struct run_creds *rc, const struct settings_item *it,
                      const struct settings_credential *cr)
{
    char path[RUN_PATH_MAX], *real;
    const char *home = getenv("HOME");
    int ret;

    if (cr->name[0] == '~') {
        if (home == NULL || home[0] != '/')
            return refuse(it, "'~' needs $HOME");
        snprintf(path, sizeof(path), "%s%.*s", home, (int)cr->name_len - 1, cr->name + 1);
    } else {
        snprintf(path, sizeof(path), "%.*s", (int)cr->name_len, cr->name);
    }
    real = realpath(path, NULL);
    if (real == NULL) {
        if (errno == ENOENT && !cr->mask)
            return 0; /* nothing to hide */
        return refuse(it, errno == ENOENT ? "the file does not exist: nothing to mask"
                                          : "cannot resolve the path");
    }
    if (!cr->mask) {
        struct stat st;
        ret = stat(real, &st) < 0 || !S_ISREG(st.st_mode)
                  ? refuse(it, "not a regular file (deny hides files)")
              : add_late(rc, "/dev/null", real) < 0 ? refuse(it, "out of memory")
                                                    : 0;
    } else {
        ret = mask_file(rc, it, cr, real);
    }
    free(real);
    return ret;
}

/* ------------------------------------------------------------------------ */

static size_t count_entries(const struct settings *s)
{
    return s->credentials.env_vars.n + s->credentials.files.n + s->credentials.aws_pairs.n;
}

/* What the run cannot do with masked entries: each way the sandbox's
 * connections bypass the proxy that swaps the placeholders. 0 or -1 after
 * a message naming the entry and the key. */
static int check_mask(const struct settings *s)
{
    const struct settings_list *lists[3] = {&s->credentials.env_vars, &s->credentials.files,
                                            &s->credentials.aws_pairs};
    const char *why = !s->network.isolate ? "network.isolate is false: the command uses the "
                                            "host's network and no proxy sees its requests"
                      : s->network.transparent
                          ? "transparent mode (network.transparent or --transparent) connects "
                            "without the proxy that swaps placeholders"
                      : s->network.http_proxy_port != 0 || s->network.socks_proxy_port != 0
                          ? "network.httpProxyPort/socksProxyPort send the sandbox's "
                            "connections to your own proxy, which does not swap placeholders"
                      : s->network.mitm_proxy.given.set
                          ? "network.mitmProxy sends connections to an external proxy, which "
                            "would get the real values"
                          : NULL;

    if (why == NULL)
        return 0;
    for (size_t l = 0; l < 3; l++)
        for (size_t i = 0; i < lists[l]->n; i++) {
            struct settings_credential cr;
            if (settings_credential_split(lists[l]->items[i].value, &cr) == 0 && cr.mask)
                return refuse(&lists[l]->items[i], why);
        }
    return 0;
}

static int make_late(struct run *run, struct run_creds *rc)
{
    const char *const *tls = run_tls_late_ro(run);
    size_t nt = 0;

    while (tls != NULL && tls[nt] != NULL)
        nt++;
    rc->late = calloc(nt + rc->nfiles + 1, sizeof(*rc->late));
    if (rc->late == NULL)
        return -1;
    for (size_t i = 0; i < nt; i++)
        rc->late[i] = tls[i];
    for (size_t i = 0; i < rc->nfiles; i++)
        rc->late[nt + i] = rc->files[i];
    return 0;
}

int run_creds_check(const struct settings *s)
{
    if (s->credentials.headers.n > 0) {
        const struct settings_item *it = &s->credentials.headers.items[0];
        fprintf(stderr,
                "sluice: run: %s:%u:%u: %s[%zu]: refused by sluice run: header injection is "
                "sluice proxy's form, for a gateway whose clients hold no secret; in sluice run "
                "mask the variable instead (mode \"mask\", with require to keep the command "
                "from using a token of its own); the command was not run\n",
                it->file, it->line, it->col, it->list, it->index);
        return -1;
    }
    return count_entries(s) > 0 ? check_mask(s) : 0;
}

int run_creds_prepare(struct run *run)
{
    const struct settings *s = run->settings;
    struct run_creds *rc;
    int err;

    if (count_entries(s) == 0)
        return 0;
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0) {
        fprintf(stderr,
                "sluice: run: credentials: cannot make sluice non-dumpable: %s; the "
                "command was not run\n",
                strerror(errno));
        return -1;
    }
    rc = calloc(1, sizeof(*rc));
    if (rc == NULL) {
        fprintf(stderr, "sluice: run: out of memory\n");
        return -1;
    }
    run->creds = rc;
    rc->t.plaintext = s->credentials.plaintext.on;
    rc->t.sigv4_streaming = s->credentials.sigv4.streaming;
    rc->t.sigv4_presigned = s->credentials.sigv4.presigned;
    rc->t.sigv4_sigv4a = s->credentials.sigv4.sigv4a;
    snprintf(rc->dir, sizeof(rc->dir), "%s/" CRED_DIR, run->rundir);
    if (mkdir(rc->dir, 0700) < 0) {
        fprintf(stderr,
                "sluice: run: credentials: cannot create '%s': %s; the command was not "
                "run\n",
                rc->dir, strerror(errno));
        return -1;
    }
    for (size_t i = 0; i < s->credentials.env_vars.n; i++) {
        const struct settings_item *it = &s->credentials.env_vars.items[i];
        struct settings_credential cr;
        if (settings_credential_split(it->value, &cr) < 0 || env_entry(rc, it, &cr) < 0)
            return -1;
    }
    for (size_t i = 0; i < s->credentials.aws_pairs.n; i++) {
        const struct settings_item *it = &s->credentials.aws_pairs.items[i];
        struct settings_credential cr;
        if (settings_credential_split(it->value, &cr) < 0 || aws_twice(rc, it, &cr) < 0 ||
            env_entry(rc, it, &cr) < 0 || aws_role(rc, it, &cr) < 0)
            return -1;
    }
    for (size_t i = 0; i < s->credentials.files.n; i++) {
        const struct settings_item *it = &s->credentials.files.items[i];
        struct settings_credential cr;
        if (settings_credential_split(it->value, &cr) < 0 || file_entry(rc, it, &cr) < 0)
            return -1;
    }
    if (rc->nexec == 0 && (err = proxy_creds_seal(&rc->t)) < 0) {
        fprintf(stderr,
                "sluice: run: credentials: the substitution table could not be built (%s); the "
                "command was not run\n",
                strerror(-err));
        return -1;
    }
    if (make_late(run, rc) < 0) {
        fprintf(stderr, "sluice: run: credentials: out of memory; the command was not run\n");
        return -1;
    }
    run_debug(run, "credentials: %zu masked, %zu variable(s) and %zu file bind(s) changed", rc->t.n,
              rc->nenv, rc->nfiles / 2);
    return 0;
}

const char *const *run_creds_late_ro(const struct run *run)
{
    return run->creds != NULL ? run->creds->late : run_tls_late_ro(run);
}

struct proxy_creds *run_creds_table(const struct run *run)
{
    return run->creds != NULL && run->creds->t.n > 0 ? &run->creds->t : NULL;
}

int run_creds_env(struct run *run, struct sb_strv *env, char *err, size_t errlen)
{
    struct run_creds *rc = run->creds;

    if (rc == NULL)
        return 0;
    for (size_t i = 0; i < rc->nenv; i++) {
        const char *name = rc->env[i].name;
        size_t nl = strlen(name), k = 0;
        for (size_t j = 0; j < env->n; j++) {
            if (strncmp(env->v[j], name, nl) == 0 && env->v[j][nl] == '=')
                free(env->v[j]);
            else
                env->v[k++] = env->v[j];
        }
        env->n = k;
        env->v[k] = NULL;
        if (rc->env[i].value != NULL && sb_strv_pushf(env, "%s=%s", name, rc->env[i].value) < 0) {
            snprintf(err, errlen, "environment: out of memory");
            return -1;
        }
    }
    /* rt-12: a masked real value (of a variable or a file) inside any other
     * variable the command gets is replaced by its placeholder (the same
     * length), as maskDuplicates does in a file; the proxy swaps it back
     * for the entry's hosts */
    for (size_t j = 0; j < env->n; j++) {
        char *v = strchr(env->v[j], '=');
        size_t vl = v != NULL ? strlen(v + 1) : 0;
        for (size_t e = 0; v != NULL && e < rc->t.n; e++) {
            const struct proxy_cred *c = &rc->t.e[e];
            char *p = v + 1, *end = v + 1 + vl;
            while (c->rlen == c->len && (size_t)(end - p) >= c->len &&
                   (p = memmem(p, (size_t)(end - p), c->real, c->len)) != NULL) {
                memcpy(p, c->fake, c->len);
                p += c->len;
            }
        }
    }
    return 0;
}

void run_creds_summary(const struct run *run)
{
    const struct run_creds *rc = run->creds;

    if (rc == NULL || run->o->quiet)
        return;
    for (size_t i = 0; i < rc->t.n; i++) {
        uint64_t e = __atomic_load_n(&rc->t.elsewhere[i], __ATOMIC_RELAXED);
        if (e > 0)
            fprintf(stderr,
                    "sluice: credentials: the placeholder of %s went to a host outside its "
                    "injectHosts %llu time(s), left as it was (see secret_placeholder in the "
                    "log)\n",
                    rc->t.e[i].name, (unsigned long long)e);
    }
    if (rc->t.refused > 0)
        fprintf(stderr,
                "sluice: credentials: %llu request(s) refused: a placeholder in plain "
                "HTTP to its host without credentials.allowPlaintextInject\n",
                (unsigned long long)rc->t.refused);
}

void run_creds_free(struct run *run)
{
    struct run_creds *rc = run->creds;

    if (rc == NULL)
        return;
    proxy_gw_unref(rc->gw);
    proxy_helper_set_env(NULL);
    free(rc->helper_env);
    run->core.creds = NULL;
    proxy_creds_clear(&rc->t);
    for (size_t i = 0; i < rc->nenv; i++) {
        free(rc->env[i].name);
        if (rc->env[i].value != NULL)
            explicit_bzero(rc->env[i].value, strlen(rc->env[i].value));
        free(rc->env[i].value);
    }
    for (size_t i = 0; i < rc->nfiles; i++)
        free(rc->files[i]);
    free(rc->late);
    free(rc);
    run->creds = NULL;
}

/* ------------------------------------------------------------------------ */
/* value.exec: a helper's value (issue 24 item 4)                            */

struct first_run {
    struct proxy_gw *g;
    size_t i;
    char why[200];
};

static void first_done(void *arg, int ok, const uint8_t *out, size_t len, const char *why)
{
    struct first_run *f = arg;
    const char *failed = proxy_gw_helper_done(f->g, f->i, proxy_gw_now(), ok, out, len, why);

    if (failed != NULL)
        snprintf(f->why, sizeof(f->why), "%s", failed);
}

/* Each helper once, at the same time, on a loop of their own: a helper
 * that fails leaves its why in f[j].why. 0, or -1 out of memory. */
static int first_runs(struct run_creds *rc, struct first_run *f)
{
    uv_loop_t loop;

    if (uv_loop_init(&loop) != 0)
        return -1;
    for (size_t j = 0; j < rc->nexec; j++) {
        const struct proxy_gw_entry *e = &rc->gw->e[j];
        struct proxy_helper *h;
        int err;
        f[j].g = rc->gw;
        f[j].i = j;
        err = proxy_helper_start(&loop, e->argv, e->timeout_ms, PROXY_GW_READ_MAX, first_done,
                                 &f[j], &h);
        if (err < 0)
            snprintf(f[j].why, sizeof(f[j].why), "it cannot be started: %s", strerror(-err));
    }
    uv_run(&loop, UV_RUN_DEFAULT);
    return uv_loop_close(&loop) == 0 ? 0 : -1;
}

/* Entry j's first value into the table, its placeholder into the
 * variable. 0, or -1 after refuse. */
static int exec_value(struct run_creds *rc, size_t j, const struct first_run *f)
{
    const struct settings_item *it = rc->exec_it[j];
    struct settings_credential cr;
    struct proxy_gw_snap snap;
    char why[300], miss[260];
    const char *fwhy = NULL;
    uint8_t *fake;
    int ret;

    if (settings_credential_split(it->value, &cr) < 0)
        return refuse(it, "internal: an unreadable entry");
    if (proxy_gw_get(rc->gw, j, proxy_gw_now(), &snap, miss, sizeof(miss)) < 0) {
        snprintf(why, sizeof(why), "its helper (value.exec) gave no value: %s",
                 f->why[0] != '\0' ? f->why : miss);
        return refuse(it, why);
    }
    fake = malloc(snap.len + 1);
    if (fake == NULL) {
        proxy_gw_snap_free(&snap);
        return refuse(it, "out of memory");
    }
    fake[snap.len] = '\0'; /* strndup below reads a string (rt-17: ASan's strict checks) */
    ret = make_fake(&cr, snap.value, snap.len, fake, &fwhy) < 0 ? refuse(it, fwhy)
                                                                : add_table(rc, it, &cr, snap.value,
                                                                            snap.len, fake);
    if (ret == 0) {
        rc->exec_tab[j] = rc->t.n - 1;
        proxy_creds_refreshable(&rc->t, rc->t.n - 1, rc->gw->e[j].expires);
        rc->env[rc->exec_env[j]].value = strndup((const char *)fake, snap.len);
        if (rc->env[rc->exec_env[j]].value == NULL)
            ret = refuse(it, "out of memory");
    }
    free(fake);
    proxy_gw_snap_free(&snap);
    return ret;
}

/* rt-17: the helper runs by the path the trust check resolved and judged
 * (run_creds_trust, just before: no sandbox of this run yet), never by the
 * name as written, whose symlinks could lead through a place the sandbox
 * re-aims before a refresh. 0 or -1. */
static int exec_resolve(struct proxy_gw_entry *e)
{
    char *real = realpath(e->argv[0], NULL);

    if (real == NULL)
        return -1;
    free(e->argv[0]);
    e->argv[0] = real;
    return 0;
}

/* The helpers' environment: the host's without any variable a credentials
 * entry names (the real values of the masked ones, the denied ones): a
 * helper is an ordinary dumpable process, so its /proc/PID/environ is
 * readable by its user (rt-17). The strings stay environ's. 0 or -1. */
static int named_by(const struct settings *s, const char *var, size_t len)
{
    const struct settings_list *lists[2] = {&s->credentials.env_vars, &s->credentials.aws_pairs};

    for (int l = 0; l < 2; l++)
        for (size_t i = 0; i < lists[l]->n; i++) {
            struct settings_credential cr;
            if (settings_credential_split(lists[l]->items[i].value, &cr) < 0 ||
                (cr.name_len == len && memcmp(cr.name, var, len) == 0))
                return 1; /* an unreadable entry: left out too */
        }
    return 0;
}

static int helper_env(struct run_creds *rc, const struct settings *s)
{
    size_t n = 0, k = 0;

    while (environ[n] != NULL)
        n++;
    rc->helper_env = calloc(n + 1, sizeof(*rc->helper_env));
    if (rc->helper_env == NULL)
        return -1;
    for (size_t i = 0; i < n; i++) {
        const char *eq = strchr(environ[i], '=');
        if (!named_by(s, environ[i], eq != NULL ? (size_t)(eq - environ[i]) : strlen(environ[i])))
            rc->helper_env[k++] = environ[i];
    }
    proxy_helper_set_env(rc->helper_env);
    return 0;
}

int run_creds_exec(struct run *run)
{
    struct run_creds *rc = run->creds;
    struct first_run f[PROXY_CREDS_MAX];
    int err;

    if (rc == NULL || rc->nexec == 0)
        return 0;
    memset(f, 0, sizeof(f));
    if (proxy_gw_new_exec(rc->nexec, &rc->gw) < 0)
        return refuse(rc->exec_it[0], "out of memory");
    for (size_t j = 0; j < rc->nexec; j++) {
        const struct settings_item *it = rc->exec_it[j];
        struct settings_credential cr;
        struct settings_header h = {0};
        char label[200];
        if (settings_credential_split(it->value, &cr) < 0)
            return refuse(it, "internal: an unreadable entry");
        h.name = cr.name;
        h.name_len = cr.name_len;
        h.kind = SETTINGS_HDR_EXEC;
        h.source = h.prefix = "";
        h.ttl_ms = cr.ttl_ms;
        h.timeout_ms = cr.timeout_ms;
        h.rest = cr.rest;
        snprintf(label, sizeof(label), "%s[%zu]:%.*s", it->list, it->index, (int)cr.name_len,
                 cr.name);
        if (proxy_gw_fill_exec(rc->gw, j, label, &h) < 0)
            return refuse(it, "out of memory");
        if (exec_resolve(&rc->gw->e[j]) < 0)
            return refuse(it, "its program (value.exec) cannot be resolved");
    }
    if (helper_env(rc, run->settings) < 0)
        return refuse(rc->exec_it[0], "out of memory");
    run_debug(run, "credentials: running %zu helper(s) (value.exec)", rc->nexec);
    if (first_runs(rc, f) < 0)
        return refuse(rc->exec_it[0], "its helper could not be run: out of memory");
    for (size_t j = 0; j < rc->nexec; j++)
        if (exec_value(rc, j, &f[j]) < 0)
            return -1;
    if ((err = proxy_creds_seal(&rc->t)) < 0) {
        fprintf(stderr,
                "sluice: run: credentials: the substitution table could not be built (%s); the "
                "command was not run\n",
                err == -EINVAL ? "too many masked values: an entry with value.exec counts twice"
                               : strerror(-err));
        return -1;
    }
    /* the environment was built with the plan, before the trust check that
     * had to pass before any helper ran: the placeholders go in now */
    if (run_creds_env(run, &run->env, run->err, sizeof(run->err)) < 0) {
        fprintf(stderr, "sluice: run: %s; the command was not run\n", run->err);
        return -1;
    }
    return 0;
}

static void exec_log(void *ctx, const char *level, const char *event, const char *msg)
{
    const struct run *run = ctx;

    (void)event;
    if (strcmp(level, "error") == 0)
        fprintf(stderr, "sluice: warning: %s\n", msg);
    else
        run_debug(run, "%s", msg);
}

/* A helper's new value, swapped into the table (from the run's loop: the
 * proxy reads the table between its callbacks on that loop). */
static void exec_new_value(void *ctx, struct proxy_gw *g, size_t i)
{
    struct run *run = ctx;
    struct run_creds *rc = run->creds;
    struct proxy_gw_snap snap;
    char why[260];

    if (rc == NULL || g != rc->gw || i >= rc->nexec)
        return;
    if (proxy_gw_get(g, i, proxy_gw_now(), &snap, why, sizeof(why)) < 0)
        return;
    if (proxy_creds_refresh(&rc->t, rc->exec_tab[i], snap.value, snap.len, snap.mask,
                            g->e[i].expires) < 0)
        fprintf(stderr,
                "sluice: warning: credential %s: its new value could not be taken (out of "
                "memory); the last one is used until it expires\n",
                g->e[i].label);
    proxy_gw_snap_free(&snap);
}

int run_creds_start(struct run *run)
{
    struct run_creds *rc = run->creds;

    if (rc == NULL || rc->gw == NULL)
        return 0;
    rc->gwrun = proxy_gwrun_new(&run->loop, exec_log, run);
    if (rc->gwrun == NULL)
        return -1;
    proxy_gwrun_on_value(rc->gwrun, exec_new_value);
    proxy_gwrun_set(rc->gwrun, rc->gw);
    return 0;
}

void run_creds_close(struct run *run)
{
    if (run->creds != NULL && run->creds->gwrun != NULL) {
        proxy_gwrun_close(run->creds->gwrun);
        run->creds->gwrun = NULL;
    }
}
