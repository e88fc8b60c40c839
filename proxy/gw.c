/* proxy/gw.c - the table of credentials.headers (gw.h). */
#define _GNU_SOURCE
#include "proxy/gw.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "proxy/creds.h"

/* Header names a and b (n bytes) are one for a server: in any case, and
 * with '_' for '-' (CGI and WSGI read X_Key and X-Key both as HTTP_X_KEY,
 * so a client's X_Key beside the X-Key set here would reach the
 * application as its own credential, rt-15). */
static int same_name(const char *a, const char *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int x = tolower((unsigned char)a[i]), y = tolower((unsigned char)b[i]);
        if (x != y && !((x == '_' || x == '-') && (y == '_' || y == '-')))
            return 0;
    }
    return 1;
}

size_t proxy_head_drop(char *head, size_t len, const char *name)
{
    size_t nl = strlen(name);
    char *p = memchr(head, '\n', len);

    while (p != NULL && p + 1 < head + len) {
        char *line = p + 1, *eol = memchr(line, '\n', (size_t)(head + len - line));
        size_t ll;
        if (eol == NULL)
            break;
        ll = (size_t)(eol + 1 - line);
        if (ll > nl && line[nl] == ':' && same_name(line, name, nl)) {
            memmove(line, eol + 1, (size_t)(head + len - (eol + 1)));
            len -= ll;
            continue; /* p stays: the next line is now at line */
        }
        p = eol;
    }
    return len;
}

int proxy_gw_head(const char *head, size_t len, const struct proxy_gw_line *lines, size_t n,
                  char **out, size_t *olen)
{
    size_t extra = 0, at;
    char *nb;

    if (len < 4 || memcmp(head + len - 4, "\r\n\r\n", 4) != 0)
        return -EINVAL;
    for (size_t i = 0; i < n; i++)
        extra += strlen(lines[i].name) + 2 + lines[i].prefix_len + lines[i].len + 2;
    nb = malloc(len + extra);
    if (nb == NULL)
        return -ENOMEM;
    memcpy(nb, head, len);
    for (size_t i = 0; i < n; i++)
        len = proxy_head_drop(nb, len, lines[i].name);
    len = proxy_head_drop(nb, len, "Accept-Encoding");
    at = len - 2; /* the last CRLF: the lines go before it */
    for (size_t i = 0; i < n; i++) {
        size_t hl = strlen(lines[i].name);
        memcpy(nb + at, lines[i].name, hl);
        memcpy(nb + at + hl, ": ", 2);
        at += hl + 2;
        memcpy(nb + at, lines[i].prefix, lines[i].prefix_len);
        at += lines[i].prefix_len;
        memcpy(nb + at, lines[i].value, lines[i].len);
        at += lines[i].len;
        memcpy(nb + at, "\r\n", 2);
        at += 2;
    }
    memcpy(nb + at, "\r\n", 2);
    *out = nb;
    *olen = at + 2;
    return 0;
}

struct proxy_gw_stats proxy_gw_stats;

uint64_t proxy_gw_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

size_t proxy_gw_trim(const uint8_t *buf, size_t len, size_t *start)
{
    size_t a = 0;

    while (a < len && (buf[a] == ' ' || buf[a] == '\t' || buf[a] == '\r' || buf[a] == '\n'))
        a++;
    while (len > a && (buf[len - 1] == ' ' || buf[len - 1] == '\t' || buf[len - 1] == '\r' ||
                       buf[len - 1] == '\n'))
        len--;
    *start = a;
    return len - a;
}

const char *proxy_gw_value_check(const uint8_t *v, size_t len)
{
    if (len == 0)
        return "it is empty";
    if (len < SUBST_LEN_MIN)
        return "it is shorter than 16 bytes (sluice masks values of 16 bytes or more in "
               "responses)";
    if (len > PROXY_GW_VALUE_MAX)
        return "it is longer than 8192 bytes";
    for (size_t i = 0; i < len; i++)
        if (!((v[i] >= 0x20 && v[i] < 0x7f) || v[i] == '\t'))
            return "it holds a byte that is not printable ASCII (a header value cannot carry it)";
    return NULL;
}

static void wipe_value(struct proxy_gw_entry *e)
{
    if (e->value != NULL)
        explicit_bzero(e->value, e->len);
    free(e->value);
    free(e->mask);
    e->value = e->mask = NULL;
    e->len = 0;
}

/* The value v (len bytes, checked) and a new mask for it into e. 0 or
 * -ENOMEM / -EIO. */
static int put_value(struct proxy_gw_entry *e, const uint8_t *v, size_t len)
{
    uint8_t *nv = malloc(len), *nm = malloc(len);
    int tries = 0;

    if (nv == NULL || nm == NULL) {
        free(nv);
        free(nm);
        return -ENOMEM;
    }
    memcpy(nv, v, len);
    do {
        if (++tries > 8 || proxy_cred_placeholder(v, len, nm) < 0) {
            explicit_bzero(nv, len);
            free(nv);
            free(nm);
            return -EIO;
        }
    } while (memcmp(nm, v, len) == 0);
    wipe_value(e);
    e->value = nv;
    e->mask = nm;
    e->len = len;
    return 0;
}

/* A value file: at most PROXY_GW_READ_MAX bytes of a regular file (a
 * symlink is followed: a Kubernetes Secret's key is one). 0 with *buf
 * (owned), or -errno (-EFBIG: too big, -EINVAL: not a regular file). */
static int read_file(const char *path, uint8_t **buf, size_t *len)
{
    struct stat st;
    uint8_t *b;
    size_t n = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK), rc = 0;

    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) < 0)
        rc = -errno;
    else if (!S_ISREG(st.st_mode))
        rc = -EINVAL;
    else if (st.st_size > PROXY_GW_READ_MAX)
        rc = -EFBIG;
    b = rc == 0 ? malloc(PROXY_GW_READ_MAX + 1) : NULL;
    if (rc == 0 && b == NULL)
        rc = -ENOMEM;
    while (rc == 0) {
        ssize_t r = read(fd, b + n, PROXY_GW_READ_MAX + 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            rc = -errno;
        else if (r == 0)
            break;
        else if ((n += (size_t)r) > PROXY_GW_READ_MAX)
            rc = -EFBIG;
    }
    close(fd);
    if (rc < 0 && b != NULL) {
        explicit_bzero(b, n);
        free(b);
        return rc;
    }
    *buf = b;
    *len = n;
    return rc;
}

static int located(struct settings_error *err, const struct settings_item *it, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int located(struct settings_error *err, const struct settings_item *it, const char *fmt, ...)
{
    va_list ap;
    int w = snprintf(err->msg, sizeof(err->msg), "%s:%u:%u: %s[%zu]: ", it->file, it->line, it->col,
                     it->list != NULL ? it->list : "credentials.headers", it->index);

    if (w > 0 && (size_t)w < sizeof(err->msg)) {
        va_start(ap, fmt);
        vsnprintf(err->msg + w, sizeof(err->msg) - (size_t)w, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* Nobody but root and us may write st (a directory may be writable by
 * others with the sticky bit: nobody else can replace what is ours in it),
 * or it is on a read-only mount (a Kubernetes ConfigMap). */
static int owned_ok(const char *path, const struct stat *st, int dir)
{
    struct statvfs vfs;

    if ((st->st_uid == 0 || st->st_uid == geteuid()) &&
        ((st->st_mode & (S_IWGRP | S_IWOTH)) == 0 || (dir && (st->st_mode & S_ISVTX))))
        return 1;
    return statvfs(path, &vfs) == 0 && (vfs.f_flag & ST_RDONLY);
}

/* NULL when nobody but root and us could have written path, nor replaced
 * it (every directory above it too), else why not (in buf). */
static const char *private_file(const char *path, char *buf, size_t len)
{
    char real[PATH_MAX];
    struct stat st;

    if (realpath(path, real) == NULL || stat(real, &st) < 0) {
        snprintf(buf, len, "'%s' cannot be checked (%s)", path, strerror(errno));
        return buf;
    }
    if (!owned_ok(real, &st, 0)) {
        snprintf(buf, len, "'%s' is writable by others (owned by uid %u, mode %04o)", real,
                 (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
        return buf;
    }
    for (char *slash = strrchr(real, '/'); slash != NULL; slash = strrchr(real, '/')) {
        const char *dir = real;
        *slash = '\0';
        if (real[0] == '\0')
            dir = "/";
        if (stat(dir, &st) < 0 || !owned_ok(dir, &st, 1)) {
            snprintf(buf, len, "'%s' is in '%s', which others may write", path, dir);
            return buf;
        }
        if (real[0] == '\0')
            break;
    }
    return NULL;
}

int proxy_gw_trusted(const struct settings *s, struct settings_error *err)
{
    const struct settings_list *l = &s->credentials.headers;
    char why[PATH_MAX + 120], prog[PATH_MAX];

    for (size_t i = 0; i < l->n; i++) {
        const struct settings_item *it = &l->items[i];
        struct settings_header h;
        const char *rest, *a;
        size_t al;
        if (settings_header_split(it->value, &h) < 0)
            return located(err, it, "internal: unreadable entry");
        if (it->file != NULL && private_file(it->file, why, sizeof(why)) != NULL)
            return located(err, it,
                           "refused: a header's value source (a helper program, a file or a "
                           "variable of the proxy) is accepted only from a settings file no "
                           "other user could have written, and %s",
                           why);
        rest = h.rest;
        if (h.kind != SETTINGS_HDR_EXEC || !settings_credential_next(&rest, 'x', &a, &al))
            continue;
        snprintf(prog, sizeof(prog), "%.*s", (int)al, a);
        if (private_file(prog, why, sizeof(why)) != NULL)
            return located(err, it, "refused: value.exec: the helper program %s", why);
    }
    return 0;
}

/* A file or env entry's value, read now. 0, -1 with err, or -ENOMEM. */
static int load_value(struct proxy_gw_entry *e, const struct settings_header *h,
                      const struct settings_item *it, struct settings_error *err)
{
    char src[4200];
    const char *why, *home = getenv("HOME");
    uint8_t *buf = NULL;
    size_t len = 0, start = 0, n;
    int rc;

    if (h->source[0] == '~' && (home == NULL || home[0] != '/'))
        return located(err, it, "value.file: HOME is not an absolute path");
    if (h->source[0] == '~')
        snprintf(src, sizeof(src), "%s%.*s", home, (int)h->source_len - 1, h->source + 1);
    else
        snprintf(src, sizeof(src), "%.*s", (int)h->source_len, h->source);
    if (h->kind == SETTINGS_HDR_ENV) {
        const char *v = getenv(src);
        if (v == NULL)
            return located(err, it, "value.env '%s': %s", src,
                           "not set in sluice's environment: refused (a header is never sent "
                           "without its value)");
        n = proxy_gw_trim((const uint8_t *)v, strlen(v), &start);
        why = proxy_gw_value_check((const uint8_t *)v + start, n);
        if (why != NULL)
            return located(err, it, "value.env '%s': refused: %s", src, why);
        return put_value(e, (const uint8_t *)v + start, n) == -ENOMEM ? -ENOMEM : 0;
    }
    rc = read_file(src, &buf, &len);
    if (rc < 0)
        return located(err, it, "value.file '%s': cannot read it: %s", src,
                       rc == -EFBIG    ? "larger than 65536 bytes"
                       : rc == -EINVAL ? "not a regular file"
                                       : strerror(-rc));
    n = proxy_gw_trim(buf, len, &start);
    why = proxy_gw_value_check(buf + start, n);
    if (why == NULL && put_value(e, buf + start, n) < 0)
        why = "out of memory";
    explicit_bzero(buf, len);
    free(buf);
    if (why != NULL)
        return located(err, it, "value.file '%s': refused: %s", src, why);
    return 0;
}

/* The fixed parts of entry i from h. 0 or -ENOMEM. */
static int fill_entry(struct proxy_gw_entry *e, size_t i, const struct settings_header *h)
{
    const char *rest = h->rest, *s;
    size_t l, argc = 0, k = 0;

    if (asprintf(&e->label, "headers[%zu]:%.*s", i, (int)h->name_len, h->name) < 0) {
        e->label = NULL;
        return -ENOMEM;
    }
    e->header = strndup(h->name, h->name_len);
    e->prefix = strndup(h->prefix, h->prefix_len);
    e->prefix_len = h->prefix_len;
    e->kind = h->kind;
    e->ttl_ms = h->ttl_ms;
    e->timeout_ms = h->timeout_ms;
    if (e->header == NULL || e->prefix == NULL)
        return -ENOMEM;
    snprintf(e->why, sizeof(e->why), "its helper has not given a value yet");
    if (h->kind != SETTINGS_HDR_EXEC)
        return 0;
    while (settings_credential_next(&rest, 'x', &s, &l))
        argc++;
    e->argv = calloc(argc + 1, sizeof(*e->argv));
    if (e->argv == NULL)
        return -ENOMEM;
    rest = h->rest;
    while (settings_credential_next(&rest, 'x', &s, &l))
        if ((e->argv[k++] = strndup(s, l)) == NULL)
            return -ENOMEM;
    return 0;
}

static void free_table(struct proxy_gw *g)
{
    for (size_t i = 0; i < g->n; i++) {
        struct proxy_gw_entry *e = &g->e[i];
        wipe_value(e);
        free(e->label);
        free(e->header);
        free(e->prefix);
        for (size_t k = 0; e->argv != NULL && e->argv[k] != NULL; k++)
            free(e->argv[k]);
        free(e->argv);
    }
    free(g->e);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

int proxy_gw_new(const struct settings *s, uint64_t now, struct proxy_gw **out,
                 struct settings_error *err)
{
    const struct settings_list *l = &s->credentials.headers;
    struct proxy_gw *g;
    int rc = 0;

    *out = NULL;
    if (l->n == 0)
        return 0;
    if (l->n > PROXY_GW_MAX) /* the front end tracks entries in 64 bits */
        return located(err, &l->items[PROXY_GW_MAX], "refused: at most %d entries",
                       PROXY_GW_MAX);
    g = calloc(1, sizeof(*g));
    if (g == NULL)
        return -ENOMEM;
    g->e = calloc(l->n, sizeof(*g->e));
    if (g->e == NULL || pthread_mutex_init(&g->mu, NULL) != 0) {
        free(g->e);
        free(g);
        return -ENOMEM;
    }
    g->refs = 1;
    g->plaintext = s->credentials.plaintext.on;
    for (size_t i = 0; i < l->n && rc == 0; i++) {
        struct settings_header h;
        g->n = i + 1;
        if (settings_header_split(l->items[i].value, &h) < 0) {
            rc = located(err, &l->items[i], "internal: unreadable entry");
            break;
        }
        rc = fill_entry(&g->e[i], i, &h);
        if (rc == 0 && h.kind != SETTINGS_HDR_EXEC)
            rc = load_value(&g->e[i], &h, &l->items[i], err);
        g->e[i].refresh_at = now;
    }
    if (rc < 0) {
        free_table(g);
        return rc;
    }
    *out = g;
    return 0;
}

int proxy_gw_new_exec(size_t n, struct proxy_gw **out)
{
    struct proxy_gw *g = calloc(1, sizeof(*g));

    *out = NULL;
    if (g == NULL)
        return -ENOMEM;
    g->e = calloc(n > 0 ? n : 1, sizeof(*g->e));
    if (g->e == NULL || pthread_mutex_init(&g->mu, NULL) != 0) {
        free(g->e);
        free(g);
        return -ENOMEM;
    }
    g->refs = 1;
    g->n = n;
    *out = g;
    return 0;
}

int proxy_gw_fill_exec(struct proxy_gw *g, size_t i, const char *label,
                       const struct settings_header *h)
{
    struct proxy_gw_entry *e = &g->e[i];

    if (fill_entry(e, i, h) < 0)
        return -ENOMEM;
    free(e->label);
    e->label = strdup(label);
    e->refresh_at = UINT64_MAX; /* run once by the caller first (run/creds.c) */
    return e->label != NULL ? 0 : -ENOMEM;
}

static int same_exec(const struct proxy_gw_entry *a, const struct proxy_gw_entry *b)
{
    size_t k = 0;

    if (a->kind != SETTINGS_HDR_EXEC || b->kind != SETTINGS_HDR_EXEC || a->ttl_ms != b->ttl_ms ||
        strcasecmp(a->header, b->header) != 0)
        return 0;
    for (; a->argv[k] != NULL && b->argv[k] != NULL; k++)
        if (strcmp(a->argv[k], b->argv[k]) != 0)
            return 0;
    return a->argv[k] == NULL && b->argv[k] == NULL;
}

long proxy_gw_adopt(struct proxy_gw *nw, const struct proxy_gw *old, size_t i)
{
    long found = -1;

    if (nw == NULL || old == NULL || i >= old->n)
        return -1;
    pthread_mutex_lock(&nw->mu);
    for (size_t k = 0; k < nw->n && found < 0; k++)
        if (!nw->e[k].running && same_exec(&nw->e[k], &old->e[i])) {
            nw->e[k].running = 1;
            found = (long)k;
        }
    pthread_mutex_unlock(&nw->mu);
    return found;
}

void proxy_gw_carry(struct proxy_gw *nw, struct proxy_gw *old)
{
    if (nw == NULL || old == NULL)
        return;
    pthread_mutex_lock(&old->mu);
    pthread_mutex_lock(&nw->mu);
    for (size_t i = 0; i < nw->n; i++)
        for (size_t j = 0; j < old->n; j++) {
            struct proxy_gw_entry *a = &nw->e[i], *b = &old->e[j];
            if (!same_exec(a, b) || b->value == NULL)
                continue;
            if (put_value(a, b->value, b->len) == 0) {
                memcpy(a->mask, b->mask, b->len);
                a->expires = b->expires;
                a->refresh_at = b->refresh_at;
                memcpy(a->why, b->why, sizeof(a->why));
            }
            break;
        }
    pthread_mutex_unlock(&nw->mu);
    pthread_mutex_unlock(&old->mu);
}

struct proxy_gw *proxy_gw_ref(struct proxy_gw *g)
{
    if (g != NULL)
        __atomic_add_fetch(&g->refs, 1, __ATOMIC_RELAXED);
    return g;
}

void proxy_gw_unref(struct proxy_gw *g)
{
    if (g != NULL && __atomic_sub_fetch(&g->refs, 1, __ATOMIC_ACQ_REL) == 0)
        free_table(g);
}

const char *proxy_gw_helper_done(struct proxy_gw *g, size_t i, uint64_t now, int ok,
                                 const uint8_t *out, size_t len, const char *why)
{
    struct proxy_gw_entry *e;
    size_t start = 0, n = 0;

    if (g == NULL || i >= g->n)
        return "no such entry";
    e = &g->e[i];
    if (ok) {
        n = proxy_gw_trim(out, len, &start);
        why = proxy_gw_value_check(out + start, n);
        if (why != NULL)
            ok = 0;
    }
    pthread_mutex_lock(&g->mu);
    e->running = 0;
    if (ok && put_value(e, out + start, n) < 0) {
        ok = 0;
        why = "out of memory";
    }
    if (ok) {
        uint64_t early = e->ttl_ms / 4 < 60000 ? e->ttl_ms / 4 : 60000;
        e->expires = now + e->ttl_ms;
        e->refresh_at = now + e->ttl_ms - early; /* before it runs out */
        e->fails = 0;
    } else {
        unsigned shift = e->fails < 5 ? e->fails : 5;
        uint64_t retry = (uint64_t)PROXY_GW_RETRY_MS << shift;
        e->fails++;
        e->refresh_at = now + (retry < PROXY_GW_RETRY_MAX_MS ? retry : PROXY_GW_RETRY_MAX_MS);
        if (why == NULL)
            why = "?";
        snprintf(e->why, sizeof(e->why), "its helper failed: %s", why);
    }
    pthread_mutex_unlock(&g->mu);
    __atomic_add_fetch(ok ? &proxy_gw_stats.helper_ok : &proxy_gw_stats.helper_failed, 1,
                       __ATOMIC_RELAXED);
    return ok ? NULL : why;
}

int proxy_gw_get(struct proxy_gw *g, size_t i, uint64_t now, struct proxy_gw_snap *s, char *why,
                 size_t whylen)
{
    struct proxy_gw_entry *e = &g->e[i];
    int rc = -1;

    memset(s, 0, sizeof(*s));
    pthread_mutex_lock(&g->mu);
    if (e->value == NULL) {
        snprintf(why, whylen, "%s", e->why);
    } else if (e->kind == SETTINGS_HDR_EXEC && now >= e->expires) {
        snprintf(why, whylen, "its value's lifetime (ttl) ran out and %s",
                 e->fails > 0 ? e->why : "its helper has not given a new one yet");
    } else {
        s->value = malloc(e->len);
        s->mask = malloc(e->len);
        if (s->value != NULL && s->mask != NULL) {
            memcpy(s->value, e->value, e->len);
            memcpy(s->mask, e->mask, e->len);
            s->len = e->len;
            rc = 0;
        } else {
            snprintf(why, whylen, "out of memory");
        }
    }
    pthread_mutex_unlock(&g->mu);
    if (rc < 0)
        proxy_gw_snap_free(s);
    return rc;
}

void proxy_gw_snap_free(struct proxy_gw_snap *s)
{
    if (s->value != NULL)
        explicit_bzero(s->value, s->len);
    free(s->value);
    free(s->mask);
    memset(s, 0, sizeof(*s));
}

long proxy_gw_due(struct proxy_gw *g, uint64_t now, uint64_t *next)
{
    long found = -1;

    *next = UINT64_MAX;
    if (g == NULL)
        return -1;
    pthread_mutex_lock(&g->mu);
    for (size_t i = 0; i < g->n; i++) {
        struct proxy_gw_entry *e = &g->e[i];
        if (e->kind != SETTINGS_HDR_EXEC || e->running)
            continue;
        if (found < 0 && e->refresh_at <= now) {
            e->running = 1;
            found = (long)i;
        } else if (e->refresh_at < *next) {
            *next = e->refresh_at;
        }
    }
    pthread_mutex_unlock(&g->mu);
    return found;
}

const char *proxy_gw_unready(struct proxy_gw *g, uint64_t now)
{
    const char *label = NULL;

    if (g == NULL)
        return NULL;
    pthread_mutex_lock(&g->mu);
    for (size_t i = 0; i < g->n && label == NULL; i++) {
        const struct proxy_gw_entry *e = &g->e[i];
        if (e->value == NULL || (e->kind == SETTINGS_HDR_EXEC && now >= e->expires))
            label = e->label;
    }
    pthread_mutex_unlock(&g->mu);
    return label;
}
