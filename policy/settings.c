/* policy/settings.c - the settings loader (design.md "Settings").
 *
 * One JSON file is one layer. A layer is parsed and checked into a scratch
 * struct settings; only when the whole file (and every list file it names)
 * is good is it merged into the caller's settings, by moves that cannot
 * fail. A bad file therefore never leaves settings half-applied.
 *
 * Every error reads "FILE:LINE:COLUMN: key.path: what is wrong". jansson
 * gives positions only for syntax errors; jsonpos.c finds the rest.
 */
#include "policy/policy.h"
#include "policy/jsonpos.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <ctype.h>
#include <sys/stat.h>
#include <unistd.h>

#define SETTINGS_MANAGED_PATH "/etc/sluice/managed.json"
#define PATH_DEPTH_MAX 8
#define COUNT(t) (sizeof(t) / sizeof(t[0]))

/* Which replace-type keys a layer sets. Deny-type lists have no flag: they
 * are united whether or not a layer names them. */
enum layer_flag {
    LF_ALLOWED_DOMAINS = 1u << 0, /* allowedDomains or allowedDomainsFiles */
    LF_STRICT = 1u << 1,
    LF_ALLOW_ALL = 1u << 2,
    LF_UNIX_SOCKETS = 1u << 3,
    LF_ALL_UNIX = 1u << 4,
    LF_LOCAL_BINDING = 1u << 5,
    LF_HTTP_PORT = 1u << 6,
    LF_SOCKS_PORT = 1u << 7,
    LF_DENY_PRIVATE = 1u << 8,
    LF_DNS = 1u << 9,
    LF_MODE = 1u << 10,
    LF_ALLOW_READ = 1u << 11,
    LF_ALLOW_WRITE = 1u << 12,
    LF_GIT_CONFIG = 1u << 13,
    LF_FS_DISABLED = 1u << 14,
    LF_IGNORE = 1u << 15,
    LF_NESTED = 1u << 16,
    LF_DEPTH = 1u << 17,
    LF_BWRAP = 1u << 18,
    LF_SAFE_DIRS = 1u << 19,
    LF_SANDBOX_ENABLED = 1u << 20,
    LF_UNSANDBOXED = 1u << 21,
    LF_EXCLUDED = 1u << 22,
    LF_ENV_ALLOW = 1u << 23,
    LF_ENV_INHERIT = 1u << 24,
    LF_ENV_PATH = 1u << 25,
    LF_NESTED_USERNS = 1u << 26,
    LF_JAVA_AGENT = 1u << 27,
    LF_PARENT = 1u << 28,
    LF_HTTP_OPTS = 1u << 29,
    LF_ISOLATE = 1u << 30,
    LF_TRANSPARENT = 1u << 31,
};

/* Which "proxy" keys a layer sets (struct ctx.pset). */
enum proxy_flag {
    PF_AUTH = 1u << 0,
    PF_HEAD = 1u << 1,
    PF_HANDSHAKE = 1u << 2,
    PF_ASK = 1u << 3,
    PF_DNS = 1u << 4,
    PF_DIAL = 1u << 5,
    PF_IDLE = 1u << 6,
    PF_DRAIN = 1u << 7,
    PF_MAX_CONNS = 1u << 8,
    PF_MAX_ASKS = 1u << 9,
    PF_MAX_HEAD = 1u << 10,
    /* sandbox.limits (issue 14): here, the layer flags are all taken */
    PF_LIM_PROCS = 1u << 20,
    PF_LIM_MEM = 1u << 21,
    PF_LIM_FILES = 1u << 22,
};

/* Parsing state for one layer. */
struct ctx {
    const char *name; /* settings file, interned in v */
    const char *dir;  /* its directory, for relative list files; NULL = cwd */
    const char *text; /* JSON text (after any BOM) */
    size_t len;
    struct settings *v; /* the scratch layer */
    unsigned set;       /* enum layer_flag bits */
    unsigned pset;      /* enum proxy_flag bits */
    struct jsonpos_step path[PATH_DEPTH_MAX];
    size_t depth;
    struct settings_error *err;
    int managed; /* the managed file (settings_apply_managed) */
};

struct key_def;
typedef int (*key_fn)(struct ctx *c, json_t *v, const struct key_def *d);

enum key_kind {
    KD_BOOL = 0,     /* int field */
    KD_UINT,         /* unsigned field, min..max */
    KD_STRLIST,      /* settings_list field */
    KD_OBJECT,       /* nested object with its own keys (sub) */
    KD_CUSTOM,       /* fn */
    KD_REFUSED,      /* not implemented: error */
    KD_CHECK_BOOL,   /* accepted, checked, not stored */
    KD_CHECK_STRING,
    KD_CHECK_STRLIST,
    KD_CHECK_OBJECT, /* any content */
    KD_SECONDS,      /* number of seconds (fractions allowed) -> unsigned ms, min..max ms */
};

enum note_when { NOTE_NEVER = 0, NOTE_ALWAYS, NOTE_IF_SET /* true, or a non-empty array */ };

struct key_def {
    const char *name;
    enum key_kind kind;
    size_t off;       /* field in struct settings */
    unsigned flag;    /* enum layer_flag set when present */
    unsigned pflag;   /* enum proxy_flag set when present */
    const char *list; /* settings_item.list for KD_STRLIST */
    int nonempty;     /* KD_STRLIST: strings must not be empty */
    unsigned min, max;
    key_fn fn;
    const struct key_def *sub;
    size_t nsub;
    enum note_when note_when;
    const char *note;
};

/* ------------------------------------------------------------------------ */
/* Lists, maps, files                                                        */

static int list_reserve(struct settings_list *l, size_t want)
{
    struct settings_item *p;
    size_t cap;

    if (want <= l->cap)
        return 0;
    cap = l->cap ? l->cap : 8;
    while (cap < want) {
        if (cap > SIZE_MAX / 2 / sizeof(*p))
            return -ENOMEM;
        cap *= 2;
    }
    p = realloc(l->items, cap * sizeof(*p));
    if (p == NULL)
        return -ENOMEM;
    l->items = p;
    l->cap = cap;
    return 0;
}

/* Appends an item taking ownership of value (freed on failure). */
static int list_push(struct settings_list *l, char *value, const char *file, unsigned line,
                     unsigned col, const char *list, size_t index)
{
    struct settings_item *it;

    if (l->n == SIZE_MAX || list_reserve(l, l->n + 1) < 0) {
        free(value);
        return -ENOMEM;
    }
    it = &l->items[l->n++];
    it->value = value;
    it->file = file;
    it->line = line;
    it->col = col;
    it->list = list;
    it->index = index;
    it->literal = 0;
    it->managed = 0;
    return 0;
}

static void list_free(struct settings_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->items[i].value);
    free(l->items);
    memset(l, 0, sizeof(*l));
}

static int map_reserve(struct settings_map *m, size_t want)
{
    struct settings_pair *p;
    size_t cap;

    if (want <= m->cap)
        return 0;
    cap = m->cap ? m->cap : 8;
    while (cap < want) {
        if (cap > SIZE_MAX / 2 / sizeof(*p))
            return -ENOMEM;
        cap *= 2;
    }
    p = realloc(m->pairs, cap * sizeof(*p));
    if (p == NULL)
        return -ENOMEM;
    m->pairs = p;
    m->cap = cap;
    return 0;
}

static void pair_free(struct settings_pair *p)
{
    free(p->key);
    free(p->value);
    list_free(&p->list);
}

static void map_free(struct settings_map *m)
{
    for (size_t i = 0; i < m->n; i++)
        pair_free(&m->pairs[i]);
    free(m->pairs);
    memset(m, 0, sizeof(*m));
}

/* Returns the interned copy of name in s->files. */
static const char *intern(struct settings *s, const char *name)
{
    char **files;
    char *copy;

    for (size_t i = 0; i < s->nfiles; i++)
        if (strcmp(s->files[i], name) == 0)
            return s->files[i];
    copy = strdup(name);
    if (copy == NULL)
        return NULL;
    files = realloc(s->files, (s->nfiles + 1) * sizeof(*files));
    if (files == NULL) {
        free(copy);
        return NULL;
    }
    s->files = files;
    s->files[s->nfiles++] = copy;
    return copy;
}

void settings_init(struct settings *s)
{
    memset(s, 0, sizeof(*s));
    s->network.mode = SETTINGS_MODE_ENFORCE;
    s->network.isolate = 1;
    s->network.deny_private_addresses = SETTINGS_UNSET;
    s->mandatory_deny_search_depth = 3;
    s->sandbox.enabled = SETTINGS_UNSET;
    s->sandbox.allow_unsandboxed_commands = SETTINGS_UNSET;
    s->environment.inherit = 1;
    s->sandbox.limits.processes = SETTINGS_DEFAULT_PROCESSES;
    s->proxy.head_timeout_ms = 10000;
    s->proxy.handshake_timeout_ms = 10000;
    s->proxy.ask_timeout_ms = 30000;
    s->proxy.dns_timeout_ms = 5000;
    s->proxy.dial_timeout_ms = 10000;
    s->proxy.idle_timeout_ms = 15 * 60 * 1000;
    s->proxy.drain_timeout_ms = 10000;
    s->proxy.max_connections = 0; /* follow the machine: proxy_max_connections() */
    s->proxy.max_pending_asks = 256;
    s->proxy.max_head_bytes = 8192;
}

void settings_free(struct settings *s)
{
    if (s == NULL)
        return;
    list_free(&s->network.allowed_domains);
    list_free(&s->network.denied_domains);
    map_free(&s->network.denied_domain_reasons);
    list_free(&s->network.denied_resolved_addresses);
    list_free(&s->network.allow_unix_sockets);
    list_free(&s->network.dns_servers);
    list_free(&s->network.allowed_domains_files);
    list_free(&s->network.denied_domains_files);
    list_free(&s->filesystem.deny_read);
    list_free(&s->filesystem.allow_read);
    list_free(&s->filesystem.allow_write);
    list_free(&s->filesystem.deny_write);
    list_free(&s->filesystem.create_write);
    map_free(&s->ignore_violations);
    free(s->bwrap_path);
    free(s->java_agent_jar_path);
    free(s->network.parent_proxy.http);
    free(s->network.parent_proxy.https);
    free(s->network.parent_proxy.no_proxy);
    list_free(&s->network.strip_response_headers);
    list_free(&s->git_safe_directories);
    list_free(&s->sandbox.excluded_commands);
    list_free(&s->environment.allow);
    list_free(&s->environment.deny);
    map_free(&s->environment.set);
    list_free(&s->environment.path_append);
    list_free(&s->notices);
    list_free(&s->managed_keys);
    list_free(&s->weakened);
    free(s->proxy.auth_username);
    free(s->proxy.auth_password);
    for (size_t i = 0; i < s->nfiles; i++)
        free(s->files[i]);
    free(s->files);
    settings_init(s);
}

/* Reads a whole file. Returns 0 or -errno. */
static int read_all(const char *path, char **out, size_t *outlen)
{
    struct stat st;
    char *buf = NULL;
    size_t len = 0, cap = 0;
    int fd, rc = 0;

    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) < 0) {
        rc = -errno;
        goto out;
    }
    if (S_ISDIR(st.st_mode)) {
        rc = -EISDIR;
        goto out;
    }
    cap = S_ISREG(st.st_mode) && st.st_size > 0 ? (size_t)st.st_size + 1 : 4096;
    for (;;) {
        ssize_t n;
        if (len == cap) {
            char *nb;
            if (cap > SIZE_MAX / 2) {
                rc = -ENOMEM;
                goto out;
            }
            nb = realloc(buf, cap * 2);
            if (nb == NULL) {
                rc = -ENOMEM;
                goto out;
            }
            buf = nb;
            cap *= 2;
        } else if (buf == NULL) {
            buf = malloc(cap);
            if (buf == NULL) {
                rc = -ENOMEM;
                goto out;
            }
        }
        n = read(fd, buf + len, cap - len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            rc = -errno;
            goto out;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    if (buf == NULL) {
        buf = malloc(1);
        if (buf == NULL) {
            rc = -ENOMEM;
            goto out;
        }
    }
    *out = buf;
    *outlen = len;
    buf = NULL;
out:
    free(buf);
    close(fd);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Messages                                                                  */

/* Writes s for a one-line message: printable ASCII and UTF-8 kept, control
 * bytes escaped, long strings cut. */
static void quote(char *buf, size_t size, const char *s)
{
    size_t o = 0;
    const size_t limit = 80;

    for (size_t i = 0; s[i] != '\0' && o + 5 < size; i++) {
        unsigned char b = (unsigned char)s[i];
        if (i == limit) {
            snprintf(buf + o, size - o, "...");
            return;
        }
        if (b < 0x20 || b == 0x7f) {
            snprintf(buf + o, size - o, "\\x%02x", b);
            o += 4;
        } else {
            buf[o++] = (char)b;
        }
    }
    buf[o] = '\0';
}

static int is_ident(const char *k)
{
    if (*k == '\0')
        return 0;
    for (; *k; k++) {
        char ch = *k;
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '_' || ch == '*' || ch == '-'))
            return 0;
    }
    return 1;
}

/* "network.allowedDomains[2]", "ignoreViolations[\"npm test\"][0]". */
static void format_path(const struct ctx *c, char *buf, size_t size)
{
    size_t o = 0;

    buf[0] = '\0';
    if (c->depth == 0) {
        snprintf(buf, size, "(top level)");
        return;
    }
    for (size_t d = 0; d < c->depth && o < size; d++) {
        const struct jsonpos_step *st = &c->path[d];
        int n;
        if (st->key == NULL) {
            n = snprintf(buf + o, size - o, "[%zu]", st->index);
        } else if (is_ident(st->key) && !(d > 0 && strcmp(st->key, "*") == 0)) {
            n = snprintf(buf + o, size - o, "%s%s", d ? "." : "", st->key);
        } else {
            char q[128];
            quote(q, sizeof(q), st->key);
            n = snprintf(buf + o, size - o, "[\"%s\"]", q);
        }
        if (n < 0)
            break;
        o += (size_t)n;
    }
}

static void locate(const struct ctx *c, int at_key, struct jsonpos *pos)
{
    if (jsonpos_find(c->text, c->len, c->path, c->depth, at_key, pos) < 0) {
        pos->line = 1;
        pos->col = 1;
    }
}

/* Formats "FILE:LINE:COL: path: message" into out. */
__attribute__((format(printf, 5, 0))) static void vformat_at(const struct ctx *c, const struct jsonpos *pos, char *out, size_t size,
                       const char *fmt, va_list ap)
{
    char path[512];
    int n;

    format_path(c, path, sizeof(path));
    n = snprintf(out, size, "%s:%u:%u: %s: ", c->name, pos->line, pos->col, path);
    if (n >= 0 && (size_t)n < size)
        vsnprintf(out + n, size - (size_t)n, fmt, ap);
}

/* Fails with a message located at the current path (its key if at_key). */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static int fail(struct ctx *c, int at_key, const char *fmt, ...)
{
    struct jsonpos pos;
    va_list ap;

    locate(c, at_key, &pos);
    va_start(ap, fmt);
    vformat_at(c, &pos, c->err->msg, sizeof(c->err->msg), fmt, ap);
    va_end(ap);
    return -EINVAL;
}

static int fail_nomem(struct ctx *c)
{
    snprintf(c->err->msg, sizeof(c->err->msg), "%s: out of memory", c->name);
    return -ENOMEM;
}

/* Adds "FILE:LINE:COL: key: note" (located at the key) to the notices. */
static int notice(struct ctx *c, const char *note)
{
    struct jsonpos pos;
    char path[512], *msg;
    size_t size;

    locate(c, 1, &pos);
    format_path(c, path, sizeof(path));
    size = strlen(c->name) + strlen(path) + strlen(note) + 32;
    msg = malloc(size);
    if (msg == NULL)
        return fail_nomem(c);
    snprintf(msg, size, "%s:%u:%u: %s: %s", c->name, pos.line, pos.col, path, note);
    if (list_push(&c->v->notices, msg, c->name, pos.line, pos.col, "notices", c->v->notices.n) < 0)
        return fail_nomem(c);
    return 0;
}

static const char *type_name(const json_t *j)
{
    switch (json_typeof(j)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a real number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "an unknown type";
}

/* The key tables nest at most 4 deep (ignoreViolations["cmd"][i]). */
static void push_key(struct ctx *c, const char *key)
{
    assert(c->depth < PATH_DEPTH_MAX);
    c->path[c->depth].key = key;
    c->path[c->depth].keylen = strlen(key);
    c->path[c->depth].index = 0;
    c->depth++;
}

static void push_index(struct ctx *c, size_t index)
{
    assert(c->depth < PATH_DEPTH_MAX);
    c->path[c->depth].key = NULL;
    c->path[c->depth].keylen = 0;
    c->path[c->depth].index = index;
    c->depth++;
}

static void pop(struct ctx *c)
{
    c->depth--;
}

/* Levenshtein distance, case-insensitive, for keys up to 64 bytes. */
static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), row[65];

    if (la > 64 || lb > 64)
        return SIZE_MAX;
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            char ca = a[i - 1], cb = b[j - 1];
            size_t up = row[j], best;
            if (ca >= 'A' && ca <= 'Z')
                ca = (char)(ca - 'A' + 'a');
            if (cb >= 'A' && cb <= 'Z')
                cb = (char)(cb - 'A' + 'a');
            best = diag + (ca == cb ? 0 : 1);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            diag = up;
            row[j] = best;
        }
    }
    return row[lb];
}

/* ------------------------------------------------------------------------ */
/* Values                                                                    */

static int want_bool(struct ctx *c, json_t *v, int *out)
{
    if (!json_is_boolean(v))
        return fail(c, 0, "expected a boolean, got %s", type_name(v));
    *out = json_is_true(v);
    return 0;
}

static int want_string(struct ctx *c, json_t *v)
{
    if (!json_is_string(v))
        return fail(c, 0, "expected a string, got %s", type_name(v));
    return 0;
}

static int want_uint(struct ctx *c, json_t *v, unsigned min, unsigned max, unsigned *out)
{
    json_int_t n;

    if (json_is_real(v))
        return fail(c, 0, "expected an integer in %u..%u, got %g", min, max, json_real_value(v));
    if (!json_is_integer(v))
        return fail(c, 0, "expected an integer in %u..%u, got %s", min, max, type_name(v));
    n = json_integer_value(v);
    if (n < (json_int_t)min || n > (json_int_t)max)
        return fail(c, 0, "must be in %u..%u, got %" JSON_INTEGER_FORMAT, min, max, n);
    *out = (unsigned)n;
    return 0;
}

/* A duration in seconds (integer or fraction) stored as milliseconds in
 * min..max ms. */
static int want_seconds(struct ctx *c, json_t *v, unsigned min, unsigned max, unsigned *out)
{
    double sec, ms;

    if (!json_is_number(v))
        return fail(c, 0, "expected a number of seconds, got %s", type_name(v));
    sec = json_number_value(v);
    ms = sec * 1000.0;
    if (!(ms >= (double)min && ms <= (double)max)) {
        if (min == 0)
            return fail(c, 0, "must be 0 (off) to %g seconds, got %g", max / 1000.0, sec);
        return fail(c, 0, "must be %g to %g seconds, got %g", min / 1000.0, max / 1000.0, sec);
    }
    *out = (unsigned)(ms + 0.5);
    return 0;
}

/* A path entry written as an object, as the reference allows:
 * {"path": "NON-EMPTY", "literal": BOOL}; nothing else. */
static int check_path_object(struct ctx *c, json_t *e)
{
    const char *key;
    json_t *m;
    int rc = 0;

    json_object_foreach(e, key, m) {
        push_key(c, key);
        if (strcmp(key, "path") == 0) {
            if (!json_is_string(m))
                rc = fail(c, 0, "expected a string, got %s", type_name(m));
            else if (json_string_length(m) == 0)
                rc = fail(c, 0, "must not be an empty string");
        } else if (strcmp(key, "literal") == 0) {
            if (!json_is_boolean(m))
                rc = fail(c, 0, "expected a boolean, got %s", type_name(m));
        } else {
            rc = fail(c, 0, "unknown key in a path entry (only \"path\" and \"literal\")");
        }
        pop(c);
        if (rc < 0)
            return rc;
    }
    if (json_object_get(e, "path") == NULL)
        return fail(c, 0, "a path entry written as an object needs \"path\"");
    return 0;
}

/* Checks that v is an array of strings (non-empty ones if asked; 2: path
 * entries, which may also be {"path", "literal"} objects). */
static int check_strlist(struct ctx *c, json_t *v, int nonempty)
{
    size_t i;
    json_t *e;

    if (!json_is_array(v))
        return fail(c, 0, "expected an array of strings, got %s", type_name(v));
    json_array_foreach(v, i, e) {
        int rc = 0;
        push_index(c, i);
        if (nonempty == 2 && json_is_object(e))
            rc = check_path_object(c, e);
        else if (!json_is_string(e))
            rc = fail(c, 0,
                      nonempty == 2 ? "expected a path string or {\"path\": ..., \"literal\": "
                                      "true}, got %s"
                                    : "expected a string, got %s",
                      type_name(e));
        else if (nonempty && json_string_length(e) == 0)
            rc = fail(c, 0, "must not be an empty string");
        pop(c);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Checks and appends an array of strings to out, each item located at its
 * opening quote; the positions of all elements come from one scan. */
static int take_strlist(struct ctx *c, json_t *v, struct settings_list *out, const char *list,
                        int nonempty)
{
    struct jsonpos *pos = NULL;
    size_t n, found = 0;
    int rc;

    rc = check_strlist(c, v, nonempty);
    if (rc < 0)
        return rc;
    n = json_array_size(v);
    if (n == 0)
        return 0;
    pos = calloc(n, sizeof(*pos));
    if (pos == NULL || list_reserve(out, out->n + n) < 0) {
        rc = fail_nomem(c);
        goto out;
    }
    if (jsonpos_array(c->text, c->len, c->path, c->depth, pos, n, &found) < 0)
        found = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(v, i);
        int literal = json_is_object(e) && json_is_true(json_object_get(e, "literal"));
        char *val;

        if (json_is_object(e))
            e = json_object_get(e, "path");
        val = strdup(json_string_value(e));
        if (i >= found) { /* cannot happen for text jansson accepted */
            pos[i].line = 1;
            pos[i].col = 1;
        }
        if (val == NULL) {
            rc = fail_nomem(c);
            goto out;
        }
        rc = list_push(out, val, c->name, pos[i].line, pos[i].col, list, i);
        if (rc < 0) {
            rc = fail_nomem(c);
            goto out;
        }
        out->items[out->n - 1].literal = literal;
    }
out:
    free(pos);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* The boundary keys: with a managed file, only it may weaken them            */

struct boundary {
    unsigned flag;    /* enum layer_flag of the key */
    const char *key;  /* its path */
    const char *what; /* what its weaker value does */
};

static const struct boundary boundary_keys[] = {
    {LF_ISOLATE, "network.isolate", "open the host network (network.isolate false)"},
    {LF_MODE, "network.mode", "turn on report mode"},
    {LF_SANDBOX_ENABLED, "sandbox.enabled", "disable the sandbox"},
    {LF_UNSANDBOXED, "sandbox.allowUnsandboxedCommands", "allow commands to run unsandboxed"},
    {LF_FS_DISABLED, "filesystem.disabled", "disable the filesystem policy"},
    {LF_EXCLUDED, "sandbox.excludedCommands", "exclude commands from the sandbox"},
    {LF_HTTP_PORT, "network.httpProxyPort", "name an external HTTP proxy port"},
    {LF_SOCKS_PORT, "network.socksProxyPort", "name an external SOCKS proxy port"},
    /* rt-4: these weaken it as much: another program in bwrap's place runs
     * the command with no sandbox at all; host Unix sockets (a container
     * runtime's) are a way out; nested namespaces turn Landlock off */
    {LF_BWRAP, "bwrapPath", "choose the program that builds the sandbox (bwrapPath)"},
    {LF_ALL_UNIX, "network.allowAllUnixSockets", "allow every Unix socket"},
    {LF_NESTED_USERNS, "allowNestedUserNamespaces", "allow nested user namespaces"},
    {LF_NESTED, "enableWeakerNestedSandbox", "weaken the sandbox for nesting"},
};

const char *settings_boundary_key(size_t i, const char **what)
{
    if (i >= COUNT(boundary_keys))
        return NULL;
    if (what != NULL)
        *what = boundary_keys[i].what;
    return boundary_keys[i].key;
}

/* The boundary_keys entry of key d when the layer just set it to its weaker
 * value, else -1. */
static int weakens(const struct ctx *c, const struct key_def *d)
{
    const struct settings *v = c->v;
    int weak = 0;

    switch (d->flag) {
    case LF_ISOLATE:
        weak = !v->network.isolate;
        break;
    case LF_MODE:
        weak = v->network.mode == SETTINGS_MODE_REPORT;
        break;
    case LF_SANDBOX_ENABLED:
        weak = v->sandbox.enabled == SETTINGS_FALSE;
        break;
    case LF_UNSANDBOXED:
        weak = v->sandbox.allow_unsandboxed_commands == SETTINGS_TRUE;
        break;
    case LF_FS_DISABLED:
        weak = v->filesystem.disabled != 0;
        break;
    case LF_EXCLUDED:
        weak = v->sandbox.excluded_commands.n > 0;
        break;
    case LF_HTTP_PORT:
    case LF_SOCKS_PORT:
    case LF_BWRAP:
        weak = 1;
        break;
    case LF_ALL_UNIX:
        weak = v->network.allow_all_unix_sockets != 0;
        break;
    case LF_NESTED_USERNS:
        weak = v->allow_nested_user_namespaces != 0;
        break;
    case LF_NESTED:
        weak = v->enable_weaker_nested_sandbox != 0;
        break;
    default:
        return -1;
    }
    if (!weak)
        return -1;
    for (size_t i = 0; i < COUNT(boundary_keys); i++)
        if (boundary_keys[i].flag == d->flag)
            return (int)i;
    return -1;
}

/* Records the current key (its path, located at the key) in l. */
static int record_key(struct ctx *c, struct settings_list *l, size_t index)
{
    struct jsonpos pos;
    char path[512], *v;

    locate(c, 1, &pos);
    format_path(c, path, sizeof(path));
    v = strdup(path);
    if (v == NULL || list_push(l, v, c->name, pos.line, pos.col, "key", index) < 0)
        return fail_nomem(c);
    return 0;
}

static void *field(struct ctx *c, const struct key_def *d)
{
    return (char *)c->v + d->off;
}

static int apply_object(struct ctx *c, json_t *obj, const struct key_def *defs, size_t ndefs);

static int apply_key(struct ctx *c, json_t *v, const struct key_def *d)
{
    int rc = 0, b = 0, set = 0;

    switch (d->kind) {
    case KD_BOOL:
        rc = want_bool(c, v, &b);
        if (rc == 0)
            *(int *)field(c, d) = b;
        set = b;
        break;
    case KD_UINT:
        rc = want_uint(c, v, d->min, d->max, (unsigned *)field(c, d));
        break;
    case KD_STRLIST:
        rc = take_strlist(c, v, (struct settings_list *)field(c, d), d->list, d->nonempty);
        set = json_array_size(v) > 0;
        break;
    case KD_OBJECT:
        if (!json_is_object(v))
            return fail(c, 0, "expected an object, got %s", type_name(v));
        rc = apply_object(c, v, d->sub, d->nsub);
        break;
    case KD_CUSTOM:
        rc = d->fn(c, v, d);
        break;
    case KD_REFUSED: {
        char path[512];
        format_path(c, path, sizeof(path));
        if (d->note != NULL)
            return fail(c, 1, "'%s' is not supported by sluice: %s", path, d->note);
        return fail(c, 1,
                    "'%s' is not implemented by sluice yet; remove it (sluice refuses rather "
                    "than silently drop a rule)",
                    path);
    }
    case KD_CHECK_BOOL:
        rc = want_bool(c, v, &set);
        break;
    case KD_CHECK_STRING:
        rc = want_string(c, v);
        break;
    case KD_CHECK_STRLIST:
        rc = check_strlist(c, v, 0);
        set = json_array_size(v) > 0;
        break;
    case KD_CHECK_OBJECT:
        if (!json_is_object(v))
            return fail(c, 0, "expected an object, got %s", type_name(v));
        break;
    case KD_SECONDS:
        rc = want_seconds(c, v, d->min, d->max, (unsigned *)field(c, d));
        break;
    }
    if (rc < 0)
        return rc;
    c->set |= d->flag;
    c->pset |= d->pflag;
    if (d->kind != KD_OBJECT) {
        int weak = c->managed ? -1 : weakens(c, d);
        if (c->managed)
            rc = record_key(c, &c->v->managed_keys, 0);
        else if (weak >= 0)
            rc = record_key(c, &c->v->weakened, (size_t)weak);
        if (rc < 0)
            return rc;
    }
    if (d->note_when == NOTE_ALWAYS || (d->note_when == NOTE_IF_SET && set))
        rc = notice(c, d->note);
    return rc;
}

static int apply_object(struct ctx *c, json_t *obj, const struct key_def *defs, size_t ndefs)
{
    const char *key;
    json_t *v;

    json_object_foreach(obj, key, v) {
        const struct key_def *d = NULL;
        int rc;

        for (size_t i = 0; i < ndefs; i++) {
            if (strcmp(defs[i].name, key) == 0) {
                d = &defs[i];
                break;
            }
        }
        push_key(c, key);
        if (d == NULL) {
            const char *best = NULL;
            size_t bestd = SIZE_MAX;
            char q[128];

            for (size_t i = 0; i < ndefs; i++) {
                size_t dist = edit_distance(key, defs[i].name);
                if (dist < bestd) {
                    bestd = dist;
                    best = defs[i].name;
                }
            }
            quote(q, sizeof(q), key);
            /* close enough to be a typo: 1-2 edits, 3 for long keys */
            if (best != NULL && bestd <= (strlen(best) >= 12 ? 3u : 2u) &&
                bestd * 3 <= strlen(best))
                rc = fail(c, 1, "unknown key '%s' (did you mean '%s'?)", q, best);
            else
                rc = fail(c, 1, "unknown key '%s'", q);
        } else {
            rc = apply_key(c, v, d);
        }
        pop(c);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Keys with their own rules                                                 */

static int fn_reasons(struct ctx *c, json_t *v, const struct key_def *d)
{
    struct settings_map *m = &c->v->network.denied_domain_reasons;
    const char *key;
    json_t *e;

    (void)d;
    if (!json_is_object(v))
        return fail(c, 0, "expected an object of domain: reason strings, got %s", type_name(v));
    json_object_foreach(v, key, e) {
        struct settings_pair *p;
        int rc = 0;

        push_key(c, key);
        if (!json_is_string(e))
            rc = fail(c, 0, "expected a string, got %s", type_name(e));
        else if (json_string_length(e) == 0)
            rc = fail(c, 0, "must not be an empty string");
        else if (map_reserve(m, m->n + 1) < 0)
            rc = fail_nomem(c);
        pop(c);
        if (rc < 0)
            return rc;
        p = &m->pairs[m->n];
        memset(p, 0, sizeof(*p));
        p->key = strdup(key);
        p->value = strdup(json_string_value(e));
        if (p->key == NULL || p->value == NULL) {
            pair_free(p);
            return fail_nomem(c);
        }
        m->n++;
    }
    return 0;
}

static int fn_deny_private(struct ctx *c, json_t *v, const struct key_def *d)
{
    int b = 0, rc;

    (void)d;
    rc = want_bool(c, v, &b);
    if (rc == 0)
        c->v->network.deny_private_addresses = b ? SETTINGS_TRUE : SETTINGS_FALSE;
    return rc;
}

/* A tri-state boolean (enum settings_bool) at d->off. */
static int fn_tribool(struct ctx *c, json_t *v, const struct key_def *d)
{
    int b = 0, rc;

    rc = want_bool(c, v, &b);
    if (rc == 0)
        *(enum settings_bool *)field(c, d) = b ? SETTINGS_TRUE : SETTINGS_FALSE;
    return rc;
}

/* Checks a string list, then each entry with ok(): the first refused one
 * fails as "invalid WHAT "ENTRY" (EXPECTED)", located at the entry. */
static int check_each(struct ctx *c, json_t *v, int (*ok)(const char *), const char *what,
                      const char *expected)
{
    size_t i;
    json_t *e;
    int rc;

    rc = check_strlist(c, v, 0);
    if (rc < 0)
        return rc;
    json_array_foreach(v, i, e) {
        if (!ok(json_string_value(e))) {
            char q[128];
            quote(q, sizeof(q), json_string_value(e));
            push_index(c, i);
            rc = fail(c, 0, "invalid %s \"%s\" (%s)", what, q, expected);
            pop(c);
            return rc;
        }
    }
    return 0;
}

/* An environment variable name, or a glob of one with '*': letters, digits,
 * '_' and '*', not starting with a digit. */
static int env_name_ok(const char *s)
{
    if (s[0] == '\0' || (s[0] >= '0' && s[0] <= '9'))
        return 0;
    for (; *s; s++) {
        char ch = *s;
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '_' || ch == '*'))
            return 0;
    }
    return 1;
}

/* environment.allow / environment.deny: names or NAME_* globs. */
static int fn_env_names(struct ctx *c, json_t *v, const struct key_def *d)
{
    int rc = check_each(c, v, env_name_ok, "environment variable name",
                        "expected a name like HOME or a glob like AWS_*: letters, digits, '_' "
                        "and '*', not starting with a digit");
    if (rc < 0)
        return rc;
    return take_strlist(c, v, (struct settings_list *)field(c, d), d->list, 0);
}

/* A name sluice sets itself in the sandbox (sandbox/env.c), or a loader
 * variable that would run host-chosen code in `sluice inner` before its
 * seccomp filter: environment.set must not name it. Returns the reason, or
 * NULL when the name may be set. */
static const char *env_reserved(const char *name)
{
    static const char suffix[] = "_PROXY";
    size_t len = strlen(name), sl = sizeof(suffix) - 1;

    if (strcmp(name, "SANDBOX_RUNTIME") == 0 || strcmp(name, "TMPDIR") == 0 ||
        strcmp(name, "GIT_SSH_COMMAND") == 0 || strncmp(name, "CLOUDSDK_PROXY_", 15) == 0)
        return "is set by sluice itself";
    if (len >= sl) {
        size_t i;
        for (i = 0; i < sl; i++) {
            char ch = name[len - sl + i];
            if (ch >= 'a' && ch <= 'z')
                ch = (char)(ch - 'a' + 'A');
            if (ch != suffix[i])
                break;
        }
        if (i == sl)
            return "is a proxy variable, set by sluice itself";
    }
    if (strcmp(name, "LD_PRELOAD") == 0 || strcmp(name, "LD_AUDIT") == 0)
        return "would load host-chosen code into sluice's own `inner` before its seccomp "
               "filter";
    return NULL;
}

/* environment.set: {"NAME": "value"}; a later layer wins per name. */
static int fn_env_set(struct ctx *c, json_t *v, const struct key_def *d)
{
    struct settings_map *m = &c->v->environment.set;
    const char *key;
    json_t *e;

    (void)d;
    if (!json_is_object(v))
        return fail(c, 0, "expected an object of NAME: \"value\" strings, got %s", type_name(v));
    json_object_foreach(v, key, e) {
        struct settings_pair *p;
        const char *why;
        char q[128];
        int rc = 0;

        push_key(c, key);
        quote(q, sizeof(q), key);
        why = env_reserved(key);
        if (!env_name_ok(key) || strchr(key, '*') != NULL)
            rc = fail(c, 1,
                      "invalid environment variable name \"%s\" (letters, digits and '_', not "
                      "starting with a digit)",
                      q);
        else if (why != NULL)
            rc = fail(c, 1, "'%s' %s; it cannot be set", q, why);
        else if (!json_is_string(e))
            rc = fail(c, 0, "expected a string, got %s", type_name(e));
        else if (strlen(json_string_value(e)) != json_string_length(e))
            rc = fail(c, 0, "must not contain a NUL character");
        else if (map_reserve(m, m->n + 1) < 0)
            rc = fail_nomem(c);
        pop(c);
        if (rc < 0)
            return rc;
        p = &m->pairs[m->n];
        memset(p, 0, sizeof(*p));
        p->key = strdup(key);
        p->value = strdup(json_string_value(e));
        if (p->key == NULL || p->value == NULL) {
            pair_free(p);
            return fail_nomem(c);
        }
        m->n++;
    }
    return 0;
}

/* environment.pathAppend: absolute directories or "~" / "~/..." (expanded
 * when the environment is built), without ':' or control characters. */
static int fn_path_append(struct ctx *c, json_t *v, const struct key_def *d)
{
    size_t i;
    json_t *e;
    int rc;

    rc = check_strlist(c, v, 1);
    if (rc < 0)
        return rc;
    json_array_foreach(v, i, e) {
        const char *p = json_string_value(e);
        char q[128];

        rc = 0;
        quote(q, sizeof(q), p);
        push_index(c, i);
        if (!(p[0] == '/' || (p[0] == '~' && (p[1] == '\0' || p[1] == '/'))))
            rc = fail(c, 0,
                      "'%s' is not absolute: a PATH entry must start with '/', '~' or '~/' (a "
                      "relative one would run programs from wherever the command is)",
                      q);
        else if (strchr(p, ':') != NULL)
            rc = fail(c, 0, "'%s' contains ':', the PATH separator", q);
        for (const char *s = p; rc == 0 && *s; s++)
            if ((unsigned char)*s < 0x20 || *s == 0x7f)
                rc = fail(c, 0, "'%s' contains a control character", q);
        if (rc == 0 && strlen(p) != json_string_length(e))
            rc = fail(c, 0, "must not contain a NUL character");
        pop(c);
        if (rc < 0)
            return rc;
    }
    return take_strlist(c, v, &c->v->environment.path_append, d->list, 1);
}

static int fn_mode(struct ctx *c, json_t *v, const struct key_def *d)
{
    const char *m;
    char q[128];

    (void)d;
    if (!json_is_string(v))
        return fail(c, 0, "expected \"enforce\" or \"report\", got %s", type_name(v));
    m = json_string_value(v);
    if (strcmp(m, "enforce") == 0) {
        c->v->network.mode = SETTINGS_MODE_ENFORCE;
        return 0;
    }
    if (strcmp(m, "report") == 0) {
        c->v->network.mode = SETTINGS_MODE_REPORT;
        return 0;
    }
    quote(q, sizeof(q), m);
    return fail(c, 0, "expected \"enforce\" or \"report\", got \"%s\"", q);
}

/* An absolute path into *dst (replacing what was there). With no_space,
 * whitespace is refused too: javaAgentJarPath goes into JAVA_TOOL_OPTIONS
 * as -javaagent:PATH, which the JVM splits at spaces. */
static int set_abs_path(struct ctx *c, json_t *v, char **dst, int no_space)
{
    const char *p;
    char q[128];

    if (!json_is_string(v))
        return fail(c, 0, "expected a string, got %s", type_name(v));
    p = json_string_value(v);
    quote(q, sizeof(q), p);
    if (p[0] != '/')
        return fail(c, 0, "must be an absolute path, got \"%s\"", q);
    if (no_space && strpbrk(p, " \t\n\r\v\f") != NULL)
        return fail(c, 0,
                    "\"%s\" contains whitespace, which JAVA_TOOL_OPTIONS cannot carry; move "
                    "the jar to a path without spaces",
                    q);
    free(*dst);
    *dst = strdup(p);
    if (*dst == NULL)
        return fail_nomem(c);
    return 0;
}

static int fn_bwrap(struct ctx *c, json_t *v, const struct key_def *d)
{
    (void)d;
    return set_abs_path(c, v, &c->v->bwrap_path, 0);
}

/* javaAgentJarPath: an absolute path without whitespace. */
static int fn_java_agent(struct ctx *c, json_t *v, const struct key_def *d)
{
    (void)d;
    return set_abs_path(c, v, &c->v->java_agent_jar_path, 1);
}

/* network.parentProxy: {http, https, noProxy}; URLs and the noProxy list
 * are checked here so a mistake is reported where it is written. noProxy
 * may be a string ("a.com,10.0.0.0/8") or an array of entries. */
static int fn_parent(struct ctx *c, json_t *v, const struct key_def *d)
{
    const char *key, *why;
    json_t *m;
    int rc = 0;
    char *http = NULL, *https = NULL, *np = NULL;

    (void)d;
    if (!json_is_object(v))
        return fail(c, 0, "expected an object {\"http\", \"https\", \"noProxy\"}, got %s",
                    type_name(v));
    json_object_foreach(v, key, m) {
        push_key(c, key);
        if (strcmp(key, "http") == 0 || strcmp(key, "https") == 0) {
            struct policy_parent_proxy pp;
            if (!json_is_string(m)) {
                rc = fail(c, 0, "expected a proxy URL string, got %s", type_name(m));
            } else if (policy_parent_parse_url(json_string_value(m), &pp, &why) < 0) {
                rc = fail(c, 0, "%s", why);
            } else {
                char **dst = key[4] == 's' ? &https : &http;
                free(*dst);
                *dst = strdup(json_string_value(m));
                if (*dst == NULL)
                    rc = fail_nomem(c);
            }
        } else if (strcmp(key, "noProxy") == 0) {
            size_t i, len = 1;
            json_t *e;
            if (json_is_string(m)) {
                np = strdup(json_string_value(m));
            } else if (json_is_array(m)) {
                json_array_foreach(m, i, e) {
                    if (!json_is_string(e)) {
                        push_index(c, i);
                        rc = fail(c, 0, "expected a string, got %s", type_name(e));
                        pop(c);
                        break;
                    }
                    len += json_string_length(e) + 1;
                }
                if (rc == 0 && (np = calloc(1, len)) != NULL) {
                    size_t off = 0;
                    json_array_foreach(m, i, e) {
                        size_t n = json_string_length(e);
                        if (i > 0)
                            np[off++] = ',';
                        memcpy(np + off, json_string_value(e), n);
                        off += n;
                    }
                    np[off] = '\0';
                }
            } else {
                rc = fail(c, 0, "expected a string or an array of strings, got %s", type_name(m));
            }
            if (rc == 0 && np == NULL)
                rc = fail_nomem(c);
            if (rc == 0 && policy_parent_check_noproxy(np, &why) < 0)
                rc = fail(c, 0, "%s", why);
        } else {
            rc = fail(c, 1, "unknown key '%s' (parentProxy has http, https and noProxy)", key);
        }
        pop(c);
        if (rc < 0)
            break;
    }
    if (rc == 0 && http == NULL && https == NULL && np != NULL)
        rc = fail(c, 0, "noProxy without http or https: name the parent proxy");
    if (rc < 0) {
        free(http);
        free(https);
        free(np);
        return rc;
    }
    free(c->v->network.parent_proxy.http);
    free(c->v->network.parent_proxy.https);
    free(c->v->network.parent_proxy.no_proxy);
    c->v->network.parent_proxy.http = http;
    c->v->network.parent_proxy.https = https;
    c->v->network.parent_proxy.no_proxy = np;
    c->v->network.parent_proxy.set = 1;
    return 0;
}

/* network.ambiguousRequestTarget: "refuse" | "asSpelled" | "normalize". */
static int fn_ambiguous(struct ctx *c, json_t *v, const struct key_def *d)
{
    const char *m;

    (void)d;
    if (!json_is_string(v))
        return fail(c, 0, "expected \"refuse\", \"asSpelled\" or \"normalize\", got %s",
                    type_name(v));
    m = json_string_value(v);
    if (strcmp(m, "refuse") == 0)
        c->v->network.ambiguous_request_target = SETTINGS_AMBIGUOUS_REFUSE;
    else if (strcmp(m, "asSpelled") == 0)
        c->v->network.ambiguous_request_target = SETTINGS_AMBIGUOUS_AS_SPELLED;
    else if (strcmp(m, "normalize") == 0)
        c->v->network.ambiguous_request_target = SETTINGS_AMBIGUOUS_NORMALIZE;
    else
        return fail(c, 0, "expected \"refuse\", \"asSpelled\" or \"normalize\"");
    return 0;
}

/* network.allowPlaintextHeaderSet: lets filterRequest/credentials set
 * headers on plain HTTP in srt. sluice sets no header on a request (both
 * are refused), so true would promise something that cannot happen. */
static int fn_plaintext_set(struct ctx *c, json_t *v, const struct key_def *d)
{
    int b = 0, rc;

    (void)d;
    rc = want_bool(c, v, &b);
    if (rc == 0 && b)
        return fail(c, 0,
                    "true has no meaning in sluice: it never sets headers on requests "
                    "(filterRequest and credentials injection are not supported); remove it");
    return rc;
}

/* network.stripResponseHeaders: header names (tokens); the framing fields
 * cannot be stripped. */
static int fn_strip(struct ctx *c, json_t *v, const struct key_def *d)
{
    size_t i;
    json_t *e;
    int rc;

    rc = check_strlist(c, v, 1);
    if (rc < 0)
        return rc;
    json_array_foreach(v, i, e) {
        const char *n = json_string_value(e);
        const char *why = NULL;
        for (const char *q = n; *q != '\0' && why == NULL; q++)
            if (!(isalnum((unsigned char)*q) || strchr("!#$%&'*+-.^_`|~", *q) != NULL))
                why = "is not a header name (letters, digits and !#$%&'*+-.^_`|~)";
        if (why == NULL && (strcasecmp(n, "content-length") == 0 ||
                            strcasecmp(n, "transfer-encoding") == 0))
            why = "frames the body and cannot be stripped";
        if (why != NULL) {
            push_index(c, i);
            rc = fail(c, 0, "\"%s\" %s", n, why);
            pop(c);
            return rc;
        }
    }
    list_free(&c->v->network.strip_response_headers);
    return take_strlist(c, v, &c->v->network.strip_response_headers, d->list, 1);
}

/* "1..65535", digits only, no leading zero. */
static int parse_port(const char *s, size_t len)
{
    unsigned long v = 0;

    if (len == 0 || len > 5 || s[0] == '0')
        return 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return 0;
        v = v * 10 + (unsigned long)(s[i] - '0');
    }
    return v <= 65535;
}

/* IP, IP:PORT, [v6]:PORT, [v6] or bare v6. Returns 1 if valid. */
static int dns_server_ok(const char *s)
{
    struct policy_addr a;
    char host[64];
    const char *colon, *port = NULL;
    size_t hlen, ncolon = 0;
    int want_family;

    if (s[0] == '[') {
        const char *close = strchr(s, ']');
        if (close == NULL)
            return 0;
        hlen = (size_t)(close - s - 1);
        if (hlen >= sizeof(host))
            return 0;
        memcpy(host, s + 1, hlen);
        host[hlen] = '\0';
        if (close[1] == ':')
            port = close + 2;
        else if (close[1] != '\0')
            return 0;
        want_family = 6;
    } else {
        for (const char *p = s; *p; p++)
            ncolon += *p == ':';
        colon = strchr(s, ':');
        if (ncolon == 1) {
            hlen = (size_t)(colon - s);
            port = colon + 1;
            want_family = 4;
        } else {
            hlen = strlen(s);
            want_family = ncolon == 0 ? 4 : 6;
        }
        if (hlen >= sizeof(host))
            return 0;
        memcpy(host, s, hlen);
        host[hlen] = '\0';
    }
    if (port != NULL && !parse_port(port, strlen(port)))
        return 0;
    if (policy_addr_parse(host, &a) < 0 || a.family != want_family)
        return 0;
    return 1;
}

static int fn_dns(struct ctx *c, json_t *v, const struct key_def *d)
{
    int rc = check_each(c, v, dns_server_ok, "DNS server",
                        "expected IP, IP:PORT, [IPv6]:PORT or IPv6, port 1..65535");
    if (rc < 0)
        return rc;
    return take_strlist(c, v, &c->v->network.dns_servers, d->list, 0);
}

/* Reads one list file into rules; c's path is at the JSON string naming it. */
static int read_list_file(struct ctx *c, const char *written, struct settings_list *rules,
                          const char *list)
{
    char *path = NULL, *buf = NULL;
    const char *fname;
    size_t len = 0, i = 0;
    unsigned line = 0;
    int rc;

    if (written[0] != '/' && c->dir != NULL) {
        size_t n = strlen(c->dir) + strlen(written) + 2;
        path = malloc(n);
        if (path == NULL)
            return fail_nomem(c);
        snprintf(path, n, "%s/%s", c->dir, written);
    } else {
        path = strdup(written);
        if (path == NULL)
            return fail_nomem(c);
    }
    rc = read_all(path, &buf, &len);
    if (rc < 0) {
        char q[256];
        quote(q, sizeof(q), path);
        rc = fail(c, 0, "cannot read list file '%s': %s", q, strerror(-rc));
        goto out;
    }
    fname = intern(c->v, path);
    if (fname == NULL) {
        rc = fail_nomem(c);
        goto out;
    }
    if (len >= 3 && memcmp(buf, "\xEF\xBB\xBF", 3) == 0)
        i = 3;
    while (i < len) {
        const char *ln = buf + i, *nl, *end, *start;
        size_t llen;
        unsigned col = 1;
        char *val;

        nl = memchr(ln, '\n', len - i);
        llen = nl ? (size_t)(nl - ln) : len - i;
        i += llen + 1;
        line++;
        end = memchr(ln, '#', llen);
        if (end == NULL)
            end = ln + llen;
        start = ln;
        while (start < end && (*start == ' ' || *start == '\t' || *start == '\r' ||
                               *start == '\v' || *start == '\f'))
            start++;
        while (end > start && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r' ||
                               end[-1] == '\v' || end[-1] == '\f'))
            end--;
        if (start == end)
            continue;
        for (const char *p = ln; p < start; p++)
            col += ((unsigned char)*p & 0xC0) != 0x80;
        if (memchr(start, '\0', (size_t)(end - start)) != NULL) {
            char where[512];
            format_path(c, where, sizeof(where));
            snprintf(c->err->msg, sizeof(c->err->msg), "%s:%u:%u: %s: NUL byte in pattern",
                     fname, line, col, where);
            rc = -EINVAL;
            goto out;
        }
        /* not strndup: buf is not NUL-terminated */
        val = malloc((size_t)(end - start) + 1);
        if (val != NULL) {
            memcpy(val, start, (size_t)(end - start));
            val[end - start] = '\0';
        }
        if (val == NULL || list_push(rules, val, fname, line, col, list, line) < 0) {
            rc = fail_nomem(c);
            goto out;
        }
    }
    rc = 0;
out:
    free(buf);
    free(path);
    return rc;
}

static int domain_files(struct ctx *c, json_t *v, const struct key_def *d,
                        struct settings_list *files, struct settings_list *rules,
                        const char *rules_list)
{
    size_t i;
    json_t *e;
    int rc;

    rc = take_strlist(c, v, files, d->list, 1);
    if (rc < 0)
        return rc;
    json_array_foreach(v, i, e) {
        push_index(c, i);
        rc = read_list_file(c, json_string_value(e), rules, rules_list);
        pop(c);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int fn_allowed_files(struct ctx *c, json_t *v, const struct key_def *d)
{
    return domain_files(c, v, d, &c->v->network.allowed_domains_files,
                        &c->v->network.allowed_domains, "network.allowedDomainsFiles");
}

static int fn_denied_files(struct ctx *c, json_t *v, const struct key_def *d)
{
    return domain_files(c, v, d, &c->v->network.denied_domains_files,
                        &c->v->network.denied_domains, "network.deniedDomainsFiles");
}

/* filesystem.{denyRead,allowRead,allowWrite,denyWrite}Files: list files
 * (one path per line, '#' comments, globs) appended to the list at d->off,
 * like network.allowedDomainsFiles; the files are protected in the sandbox
 * like every settings file. */
static int fn_fs_files(struct ctx *c, json_t *v, const struct key_def *d)
{
    struct settings_list names = {0};
    int rc = domain_files(c, v, d, &names, (struct settings_list *)field(c, d), d->list);

    list_free(&names);
    return rc;
}

static int fn_ignore(struct ctx *c, json_t *v, const struct key_def *d)
{
    struct settings_map *m = &c->v->ignore_violations;
    const char *key;
    json_t *e;

    (void)d;
    if (!json_is_object(v))
        return fail(c, 0, "expected an object of command: [patterns], got %s", type_name(v));
    json_object_foreach(v, key, e) {
        struct settings_pair *p;
        int rc;

        if (map_reserve(m, m->n + 1) < 0)
            return fail_nomem(c);
        p = &m->pairs[m->n];
        memset(p, 0, sizeof(*p));
        p->key = strdup(key);
        if (p->key == NULL)
            return fail_nomem(c);
        m->n++; /* owned by the map from here on */
        push_key(c, key);
        rc = take_strlist(c, e, &p->list, "ignoreViolations", 0);
        pop(c);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* proxy.auth: {"username": "...", "password": "..."}, both non-empty, at
 * most 255 bytes (RFC 1929), no control bytes; ':' not in the username
 * (HTTP Basic). */
static int auth_string(struct ctx *c, json_t *obj, const char *key, char **out)
{
    json_t *v = json_object_get(obj, key);
    const char *str;
    size_t len;
    int rc = 0;

    push_key(c, key);
    if (v == NULL) {
        pop(c);
        return fail(c, 0, "'%s' is required", key);
    }
    if (!json_is_string(v)) {
        rc = fail(c, 0, "expected a string, got %s", type_name(v));
        goto out;
    }
    str = json_string_value(v);
    len = json_string_length(v);
    if (len == 0 || len > 255) {
        rc = fail(c, 0, "must be 1 to 255 bytes long");
        goto out;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)str[i];
        if (ch < 0x20 || ch == 0x7f) {
            rc = fail(c, 0, "must not contain control characters");
            goto out;
        }
        if (ch == ':' && strcmp(key, "username") == 0) {
            rc = fail(c, 0, "must not contain ':' (HTTP Basic credentials)");
            goto out;
        }
    }
    free(*out);
    *out = strdup(str);
    if (*out == NULL)
        rc = fail_nomem(c);
out:
    pop(c);
    return rc;
}

static int fn_auth(struct ctx *c, json_t *v, const struct key_def *d)
{
    const char *key;
    json_t *e;
    int rc;

    (void)d;
    if (!json_is_object(v))
        return fail(c, 0, "expected an object {\"username\": ..., \"password\": ...}, got %s",
                    type_name(v));
    json_object_foreach(v, key, e) {
        if (strcmp(key, "username") != 0 && strcmp(key, "password") != 0) {
            char q[128];
            quote(q, sizeof(q), key);
            push_key(c, key);
            rc = fail(c, 1, "unknown key '%s' (expected 'username' and 'password')", q);
            pop(c);
            return rc;
        }
    }
    rc = auth_string(c, v, "username", &c->v->proxy.auth_username);
    if (rc == 0)
        rc = auth_string(c, v, "password", &c->v->proxy.auth_password);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* The key tables                                                            */

#define OFF(f) offsetof(struct settings, f)
#define NOTE_LINUX "not applicable on Linux, ignored"
#define REFUSED(n) {.name = n, .kind = KD_REFUSED}
#define REFUSED_SAY(n, msg) {.name = n, .kind = KD_REFUSED, .note = msg}
#define STRLIST(n, f, fl, l, ne) \
    {.name = n, .kind = KD_STRLIST, .off = OFF(f), .flag = fl, .list = l, .nonempty = ne}
#define BOOL(n, f, fl) {.name = n, .kind = KD_BOOL, .off = OFF(f), .flag = fl}
#define UINT(n, f, fl, lo, hi) {.name = n, .kind = KD_UINT, .off = OFF(f), .flag = fl, .min = lo, .max = hi}
#define CUSTOM(n, f, fl, l) {.name = n, .kind = KD_CUSTOM, .fn = f, .flag = fl, .list = l}
#define OBJECT(n, t) {.name = n, .kind = KD_OBJECT, .sub = t, .nsub = sizeof(t) / sizeof(t[0])}

static const struct key_def network_keys[] = {
    STRLIST("allowedDomains", network.allowed_domains, LF_ALLOWED_DOMAINS,
            "network.allowedDomains", 0),
    STRLIST("deniedDomains", network.denied_domains, 0, "network.deniedDomains", 0),
    CUSTOM("deniedDomainReasons", fn_reasons, 0, NULL),
    BOOL("strictAllowlist", network.strict_allowlist, LF_STRICT),
    BOOL("allowAllDomains", network.allow_all_domains, LF_ALLOW_ALL),
    STRLIST("deniedResolvedAddresses", network.denied_resolved_addresses, 0,
            "network.deniedResolvedAddresses", 0),
    {.name = "allowUnixSockets", .kind = KD_STRLIST, .off = OFF(network.allow_unix_sockets),
     .flag = LF_UNIX_SOCKETS, .list = "network.allowUnixSockets", .note_when = NOTE_IF_SET,
     .note = "macOS only in srt; on Linux sluice blocks Unix sockets with seccomp unless "
             "allowAllUnixSockets"},
    BOOL("allowAllUnixSockets", network.allow_all_unix_sockets, LF_ALL_UNIX),
    BOOL("transparent", network.transparent, LF_TRANSPARENT),
    BOOL("allowLocalBinding", network.allow_local_binding, LF_LOCAL_BINDING),
    UINT("httpProxyPort", network.http_proxy_port, LF_HTTP_PORT, 1, 65535),
    UINT("socksProxyPort", network.socks_proxy_port, LF_SOCKS_PORT, 1, 65535),
    {.name = "allowMachLookup", .kind = KD_CHECK_STRLIST, .note_when = NOTE_IF_SET,
     .note = NOTE_LINUX},
    CUSTOM("denyPrivateAddresses", fn_deny_private, LF_DENY_PRIVATE, NULL),
    CUSTOM("dnsServers", fn_dns, LF_DNS, "network.dnsServers"),
    CUSTOM("mode", fn_mode, LF_MODE, NULL),
    CUSTOM("allowedDomainsFiles", fn_allowed_files, LF_ALLOWED_DOMAINS,
           "network.allowedDomainsFiles"),
    CUSTOM("deniedDomainsFiles", fn_denied_files, 0, "network.deniedDomainsFiles"),
    REFUSED_SAY("mitmProxy",
                "remove it; to send allowed traffic through another proxy, name it in "
                "network.parentProxy (sluice sends CONNECT to it)"),
    REFUSED_SAY("tlsTerminate",
                "sluice does not decrypt TLS and decides by host and port; remove it, and "
                "inspect content in a proxy you control named in network.parentProxy"),
    CUSTOM("parentProxy", fn_parent, LF_PARENT, NULL),
    CUSTOM("allowPlaintextHeaderSet", fn_plaintext_set, 0, NULL),
    CUSTOM("stripResponseHeaders", fn_strip, LF_HTTP_OPTS, "network.stripResponseHeaders"),
    BOOL("refuseOpaqueTunnels", network.refuse_opaque_tunnels, LF_HTTP_OPTS),
    BOOL("requireHostMatch", network.require_host_match, LF_HTTP_OPTS),
    BOOL("isolate", network.isolate, LF_ISOLATE),
    CUSTOM("ambiguousRequestTarget", fn_ambiguous, LF_HTTP_OPTS, NULL),
    REFUSED_SAY("filterRequest",
                "it is a callback of the JavaScript library, which a settings file cannot "
                "carry; decide per request with an ask handler (sluice run --ask "
                "exec:PROGRAM or socket:PATH)"),
};

static const struct key_def filesystem_keys[] = {
    STRLIST("denyRead", filesystem.deny_read, 0, "filesystem.denyRead", 2),
    STRLIST("allowRead", filesystem.allow_read, LF_ALLOW_READ, "filesystem.allowRead", 2),
    STRLIST("allowWrite", filesystem.allow_write, LF_ALLOW_WRITE, "filesystem.allowWrite", 2),
    STRLIST("denyWrite", filesystem.deny_write, 0, "filesystem.denyWrite", 2),
    STRLIST("createWrite", filesystem.create_write, LF_ALLOW_WRITE, "filesystem.createWrite", 2),
    {.name = "denyReadFiles", .kind = KD_CUSTOM, .fn = fn_fs_files, .off = OFF(filesystem.deny_read),
     .list = "filesystem.denyReadFiles"},
    {.name = "allowReadFiles", .kind = KD_CUSTOM, .fn = fn_fs_files,
     .off = OFF(filesystem.allow_read), .flag = LF_ALLOW_READ, .list = "filesystem.allowReadFiles"},
    {.name = "allowWriteFiles", .kind = KD_CUSTOM, .fn = fn_fs_files,
     .off = OFF(filesystem.allow_write), .flag = LF_ALLOW_WRITE,
     .list = "filesystem.allowWriteFiles"},
    {.name = "denyWriteFiles", .kind = KD_CUSTOM, .fn = fn_fs_files,
     .off = OFF(filesystem.deny_write), .list = "filesystem.denyWriteFiles"},
    BOOL("allowGitConfig", filesystem.allow_git_config, LF_GIT_CONFIG),
    BOOL("disabled", filesystem.disabled, LF_FS_DISABLED),
    {.name = "autoAllowSystemPaths", .kind = KD_CHECK_BOOL, .note_when = NOTE_IF_SET,
     .note = "ignored, sluice's allowRead re-allows inside denyRead"},
};

static const struct key_def git_keys[] = {
    STRLIST("safeDirectories", git_safe_directories, LF_SAFE_DIRS, "git.safeDirectories", 0),
};

/* "sandbox.limits" (issue 14): strict ranges; see README "Resource limits" */
static const struct key_def sandbox_limit_keys[] = {
    {.name = "processes", .kind = KD_UINT, .off = OFF(sandbox.limits.processes),
     .pflag = PF_LIM_PROCS, .min = 16, .max = 4194304},
    {.name = "memory", .kind = KD_UINT, .off = OFF(sandbox.limits.memory_mib),
     .pflag = PF_LIM_MEM, .min = 64, .max = 1u << 26},
    {.name = "openFiles", .kind = KD_UINT, .off = OFF(sandbox.limits.open_files),
     .pflag = PF_LIM_FILES, .min = 64, .max = 1u << 24},
};

/* "sandbox": the permission layers of reference 001 (used by sluice run). */
static const struct key_def sandbox_keys[] = {
    OBJECT("limits", sandbox_limit_keys),
    {.name = "enabled", .kind = KD_CUSTOM, .fn = fn_tribool, .off = OFF(sandbox.enabled),
     .flag = LF_SANDBOX_ENABLED},
    {.name = "allowUnsandboxedCommands", .kind = KD_CUSTOM, .fn = fn_tribool,
     .off = OFF(sandbox.allow_unsandboxed_commands), .flag = LF_UNSANDBOXED},
    STRLIST("excludedCommands", sandbox.excluded_commands, LF_EXCLUDED,
            "sandbox.excludedCommands", 1),
};

/* "environment": what of the host environment reaches a sandboxed command.
 * allow is an allow list (replaced by a later layer), deny a deny list
 * (united across layers). */
static const struct key_def environment_keys[] = {
    {.name = "allow", .kind = KD_CUSTOM, .fn = fn_env_names, .off = OFF(environment.allow),
     .flag = LF_ENV_ALLOW, .list = "environment.allow"},
    {.name = "deny", .kind = KD_CUSTOM, .fn = fn_env_names, .off = OFF(environment.deny),
     .list = "environment.deny"},
    BOOL("inherit", environment.inherit, LF_ENV_INHERIT),
    CUSTOM("set", fn_env_set, 0, NULL),
    CUSTOM("pathAppend", fn_path_append, LF_ENV_PATH, "environment.pathAppend"),
};

static const struct key_def ripgrep_keys[] = {
    {.name = "command", .kind = KD_CHECK_STRING},
    {.name = "args", .kind = KD_CHECK_STRLIST},
    {.name = "argv0", .kind = KD_CHECK_STRING},
};

static const struct key_def seccomp_keys[] = {
    {.name = "applyPath", .kind = KD_CHECK_STRING},
    {.name = "argv0", .kind = KD_CHECK_STRING},
};

#define SECONDS(n, f, pf, lo, hi) \
    {.name = n, .kind = KD_SECONDS, .off = OFF(f), .pflag = pf, .min = lo, .max = hi}
#define PUINT(n, f, pf, lo, hi) {.name = n, .kind = KD_UINT, .off = OFF(f), .pflag = pf, .min = lo, .max = hi}
#define DAY_MS (24u * 3600u * 1000u)

static const struct key_def proxy_timeout_keys[] = {
    SECONDS("head", proxy.head_timeout_ms, PF_HEAD, 1, DAY_MS),
    SECONDS("handshake", proxy.handshake_timeout_ms, PF_HANDSHAKE, 1, DAY_MS),
    SECONDS("ask", proxy.ask_timeout_ms, PF_ASK, 1, DAY_MS),
    SECONDS("dns", proxy.dns_timeout_ms, PF_DNS, 1, DAY_MS),
    SECONDS("dial", proxy.dial_timeout_ms, PF_DIAL, 1, DAY_MS),
    SECONDS("idle", proxy.idle_timeout_ms, PF_IDLE, 0, DAY_MS),
    SECONDS("drain", proxy.drain_timeout_ms, PF_DRAIN, 0, DAY_MS),
};

static const struct key_def proxy_limit_keys[] = {
    PUINT("maxConnections", proxy.max_connections, PF_MAX_CONNS, 1, 1000000),
    PUINT("maxPendingAsks", proxy.max_pending_asks, PF_MAX_ASKS, 1, 100000),
    PUINT("maxHeadBytes", proxy.max_head_bytes, PF_MAX_HEAD, 1024, 1048576),
};

static const struct key_def proxy_keys[] = {
    {.name = "auth", .kind = KD_CUSTOM, .fn = fn_auth, .pflag = PF_AUTH},
    OBJECT("timeouts", proxy_timeout_keys),
    OBJECT("limits", proxy_limit_keys),
};

static const struct key_def top_keys[] = {
    OBJECT("network", network_keys),
    OBJECT("filesystem", filesystem_keys),
    CUSTOM("ignoreViolations", fn_ignore, LF_IGNORE, NULL),
    BOOL("enableWeakerNestedSandbox", enable_weaker_nested_sandbox, LF_NESTED),
    BOOL("allowNestedUserNamespaces", allow_nested_user_namespaces, LF_NESTED_USERNS),
    UINT("mandatoryDenySearchDepth", mandatory_deny_search_depth, LF_DEPTH, 1, 10),
    CUSTOM("bwrapPath", fn_bwrap, LF_BWRAP, NULL),
    CUSTOM("javaAgentJarPath", fn_java_agent, LF_JAVA_AGENT, NULL),
    OBJECT("git", git_keys),
    OBJECT("proxy", proxy_keys),
    OBJECT("sandbox", sandbox_keys),
    OBJECT("environment", environment_keys),
    {.name = "ripgrep", .kind = KD_OBJECT, .sub = ripgrep_keys, .nsub = COUNT(ripgrep_keys),
     .note_when = NOTE_ALWAYS,
     .note = "not used by sluice, ignored (sluice walks directories natively)"},
    {.name = "seccomp", .kind = KD_OBJECT, .sub = seccomp_keys, .nsub = COUNT(seccomp_keys),
     .note_when = NOTE_ALWAYS,
     .note = "not used by sluice, ignored (sluice applies its own seccomp filter)"},
    {.name = "socatPath", .kind = KD_CHECK_STRING, .note_when = NOTE_ALWAYS,
     .note = "not used by sluice, ignored (sluice does not use socat)"},
    {.name = "enableWeakerNetworkIsolation", .kind = KD_CHECK_BOOL, .note_when = NOTE_IF_SET,
     .note = NOTE_LINUX},
    {.name = "allowAppleEvents", .kind = KD_CHECK_BOOL, .note_when = NOTE_IF_SET,
     .note = NOTE_LINUX},
    {.name = "allowPty", .kind = KD_CHECK_BOOL, .note_when = NOTE_IF_SET, .note = NOTE_LINUX},
    {.name = "windows", .kind = KD_CHECK_OBJECT, .note_when = NOTE_ALWAYS, .note = NOTE_LINUX},
    REFUSED_SAY("credentials",
                "sluice neither masks nor injects credentials; keep secrets out of the "
                "sandbox with environment.deny and filesystem.denyRead (common secret "
                "variables are dropped by default), and let a proxy you control named in "
                "network.parentProxy add them"),
};

/* ------------------------------------------------------------------------ */
/* Merging a layer                                                           */

static int reserve_union(struct settings_list *dst, const struct settings_list *src)
{
    return list_reserve(dst, dst->n + src->n);
}

/* Moves src's items to the end of dst (capacity already reserved). */
static void move_union(struct settings_list *dst, struct settings_list *src)
{
    if (src->n > 0)
        memcpy(dst->items + dst->n, src->items, src->n * sizeof(*src->items));
    dst->n += src->n;
    src->n = 0;
}

static void move_replace(struct settings_list *dst, struct settings_list *src)
{
    list_free(dst);
    *dst = *src;
    memset(src, 0, sizeof(*src));
}

static size_t hash_str(const char *s)
{
    size_t h = 1469598103934665603u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211u;
    return h;
}

/* Merges the layer L into s. Every allocation happens before the first
 * change to s, so a failure leaves s as it was. */
static int merge(struct settings *s, struct settings *L, unsigned set, unsigned pset)
{
    struct settings_map *sr = &s->network.denied_domain_reasons;
    struct settings_map *lr = &L->network.denied_domain_reasons;
    size_t *table = NULL, tsize = 0;
    char **files;

    if (reserve_union(&s->network.denied_domains, &L->network.denied_domains) < 0 ||
        reserve_union(&s->network.denied_domains_files, &L->network.denied_domains_files) < 0 ||
        reserve_union(&s->network.denied_resolved_addresses,
                      &L->network.denied_resolved_addresses) < 0 ||
        reserve_union(&s->filesystem.deny_read, &L->filesystem.deny_read) < 0 ||
        reserve_union(&s->filesystem.deny_write, &L->filesystem.deny_write) < 0 ||
        reserve_union(&s->environment.deny, &L->environment.deny) < 0 ||
        reserve_union(&s->notices, &L->notices) < 0 || map_reserve(sr, sr->n + lr->n) < 0 ||
        reserve_union(&s->managed_keys, &L->managed_keys) < 0 ||
        reserve_union(&s->weakened, &L->weakened) < 0 ||
        map_reserve(&s->environment.set, s->environment.set.n + L->environment.set.n) < 0)
        return -ENOMEM;
    if (lr->n > 0) {
        tsize = 16;
        while (tsize < 2 * (sr->n + lr->n))
            tsize *= 2;
        table = calloc(tsize, sizeof(*table));
        if (table == NULL)
            return -ENOMEM;
    }
    files = realloc(s->files, (s->nfiles + L->nfiles) * sizeof(*files) + 1);
    if (files == NULL) {
        free(table);
        return -ENOMEM;
    }
    s->files = files;

    /* From here on nothing fails. */
    if (set & LF_ALLOWED_DOMAINS) {
        move_replace(&s->network.allowed_domains, &L->network.allowed_domains);
        move_replace(&s->network.allowed_domains_files, &L->network.allowed_domains_files);
    }
    move_union(&s->network.denied_domains, &L->network.denied_domains);
    move_union(&s->network.denied_domains_files, &L->network.denied_domains_files);
    move_union(&s->network.denied_resolved_addresses, &L->network.denied_resolved_addresses);
    move_union(&s->filesystem.deny_read, &L->filesystem.deny_read);
    move_union(&s->filesystem.deny_write, &L->filesystem.deny_write);
    move_union(&s->environment.deny, &L->environment.deny);
    move_union(&s->notices, &L->notices);
    /* a later layer that sets a boundary key decides it: an earlier weaker
     * value it replaces is no longer there to refuse */
    {
        size_t k = 0;
        for (size_t i = 0; i < s->weakened.n; i++) {
            if (set & boundary_keys[s->weakened.items[i].index].flag)
                free(s->weakened.items[i].value);
            else
                s->weakened.items[k++] = s->weakened.items[i];
        }
        s->weakened.n = k;
    }
    move_union(&s->weakened, &L->weakened);
    move_union(&s->managed_keys, &L->managed_keys);
    if (L->managed_file != NULL)
        s->managed_file = L->managed_file;
    if (set & LF_STRICT)
        s->network.strict_allowlist = L->network.strict_allowlist;
    if (set & LF_ALLOW_ALL)
        s->network.allow_all_domains = L->network.allow_all_domains;
    if (set & LF_UNIX_SOCKETS)
        move_replace(&s->network.allow_unix_sockets, &L->network.allow_unix_sockets);
    if (set & LF_ALL_UNIX)
        s->network.allow_all_unix_sockets = L->network.allow_all_unix_sockets;
    if (set & LF_TRANSPARENT)
        s->network.transparent = L->network.transparent;
    if (set & LF_LOCAL_BINDING)
        s->network.allow_local_binding = L->network.allow_local_binding;
    if (set & LF_HTTP_PORT)
        s->network.http_proxy_port = L->network.http_proxy_port;
    if (set & LF_SOCKS_PORT)
        s->network.socks_proxy_port = L->network.socks_proxy_port;
    if (set & LF_DENY_PRIVATE)
        s->network.deny_private_addresses = L->network.deny_private_addresses;
    if (set & LF_DNS)
        move_replace(&s->network.dns_servers, &L->network.dns_servers);
    if (set & LF_MODE)
        s->network.mode = L->network.mode;
    if (set & LF_ALLOW_READ)
        move_replace(&s->filesystem.allow_read, &L->filesystem.allow_read);
    if (set & LF_ALLOW_WRITE) {
        move_replace(&s->filesystem.allow_write, &L->filesystem.allow_write);
        move_replace(&s->filesystem.create_write, &L->filesystem.create_write);
    }
    if (set & LF_GIT_CONFIG)
        s->filesystem.allow_git_config = L->filesystem.allow_git_config;
    if (set & LF_FS_DISABLED)
        s->filesystem.disabled = L->filesystem.disabled;
    if (set & LF_IGNORE) {
        map_free(&s->ignore_violations);
        s->ignore_violations = L->ignore_violations;
        memset(&L->ignore_violations, 0, sizeof(L->ignore_violations));
    }
    if (set & LF_NESTED)
        s->enable_weaker_nested_sandbox = L->enable_weaker_nested_sandbox;
    if (set & LF_NESTED_USERNS)
        s->allow_nested_user_namespaces = L->allow_nested_user_namespaces;
    if (set & LF_DEPTH)
        s->mandatory_deny_search_depth = L->mandatory_deny_search_depth;
    if (set & LF_BWRAP) {
        free(s->bwrap_path);
        s->bwrap_path = L->bwrap_path;
        L->bwrap_path = NULL;
    }
    if (set & LF_ISOLATE)
        s->network.isolate = L->network.isolate;
    if (set & LF_HTTP_OPTS) {
        /* hardening: a later layer adds to it, never turns it off */
        if (L->network.strip_response_headers.n > 0)
            move_replace(&s->network.strip_response_headers,
                         &L->network.strip_response_headers);
        s->network.refuse_opaque_tunnels |= L->network.refuse_opaque_tunnels;
        s->network.require_host_match |= L->network.require_host_match;
        if (L->network.ambiguous_request_target != SETTINGS_AMBIGUOUS_AS_SPELLED)
            s->network.ambiguous_request_target = L->network.ambiguous_request_target;
    }
    if (set & LF_PARENT) {
        free(s->network.parent_proxy.http);
        free(s->network.parent_proxy.https);
        free(s->network.parent_proxy.no_proxy);
        s->network.parent_proxy = L->network.parent_proxy;
        memset(&L->network.parent_proxy, 0, sizeof(L->network.parent_proxy));
    }
    if (set & LF_JAVA_AGENT) {
        free(s->java_agent_jar_path);
        s->java_agent_jar_path = L->java_agent_jar_path;
        L->java_agent_jar_path = NULL;
    }
    if (set & LF_SAFE_DIRS)
        move_replace(&s->git_safe_directories, &L->git_safe_directories);
    if (set & LF_SANDBOX_ENABLED)
        s->sandbox.enabled = L->sandbox.enabled;
    if (set & LF_UNSANDBOXED)
        s->sandbox.allow_unsandboxed_commands = L->sandbox.allow_unsandboxed_commands;
    if (set & LF_EXCLUDED)
        move_replace(&s->sandbox.excluded_commands, &L->sandbox.excluded_commands);
    if (pset & PF_LIM_PROCS)
        s->sandbox.limits.processes = L->sandbox.limits.processes;
    if (pset & PF_LIM_MEM)
        s->sandbox.limits.memory_mib = L->sandbox.limits.memory_mib;
    if (pset & PF_LIM_FILES)
        s->sandbox.limits.open_files = L->sandbox.limits.open_files;
    if (set & LF_ENV_ALLOW)
        move_replace(&s->environment.allow, &L->environment.allow);
    if (set & LF_ENV_INHERIT)
        s->environment.inherit = L->environment.inherit;
    if (set & LF_ENV_PATH)
        move_replace(&s->environment.path_append, &L->environment.path_append);
    /* environment.set: united, the later layer wins per name */
    for (size_t i = 0; i < L->environment.set.n; i++) {
        struct settings_map *es = &s->environment.set;
        struct settings_pair *p = &L->environment.set.pairs[i];
        size_t j = 0;

        while (j < es->n && strcmp(es->pairs[j].key, p->key) != 0)
            j++;
        if (j < es->n) {
            free(es->pairs[j].value);
            es->pairs[j].value = p->value;
            free(p->key);
        } else {
            es->pairs[es->n++] = *p;
        }
        memset(p, 0, sizeof(*p));
    }
    L->environment.set.n = 0;
    if (pset & PF_AUTH) {
        free(s->proxy.auth_username);
        free(s->proxy.auth_password);
        s->proxy.auth_username = L->proxy.auth_username;
        s->proxy.auth_password = L->proxy.auth_password;
        L->proxy.auth_username = L->proxy.auth_password = NULL;
    }
#define TAKE(flag, f) \
    if (pset & (flag)) \
        s->proxy.f = L->proxy.f
    TAKE(PF_HEAD, head_timeout_ms);
    TAKE(PF_HANDSHAKE, handshake_timeout_ms);
    TAKE(PF_ASK, ask_timeout_ms);
    TAKE(PF_DNS, dns_timeout_ms);
    TAKE(PF_DIAL, dial_timeout_ms);
    TAKE(PF_IDLE, idle_timeout_ms);
    TAKE(PF_DRAIN, drain_timeout_ms);
    TAKE(PF_MAX_CONNS, max_connections);
    TAKE(PF_MAX_ASKS, max_pending_asks);
    TAKE(PF_MAX_HEAD, max_head_bytes);
#undef TAKE

    /* deniedDomainReasons: united, the later layer wins per domain. */
    if (table != NULL) {
        size_t mask = tsize - 1;
        for (size_t i = 0; i < sr->n; i++) {
            size_t h = hash_str(sr->pairs[i].key) & mask;
            while (table[h] != 0)
                h = (h + 1) & mask;
            table[h] = i + 1;
        }
        for (size_t i = 0; i < lr->n; i++) {
            struct settings_pair *p = &lr->pairs[i];
            size_t h = hash_str(p->key) & mask;
            while (table[h] != 0 && strcmp(sr->pairs[table[h] - 1].key, p->key) != 0)
                h = (h + 1) & mask;
            if (table[h] != 0) {
                struct settings_pair *q = &sr->pairs[table[h] - 1];
                free(q->value);
                q->value = p->value;
                free(p->key);
            } else {
                sr->pairs[sr->n] = *p;
                table[h] = ++sr->n;
            }
            memset(p, 0, sizeof(*p));
        }
        lr->n = 0;
        free(table);
    }

    /* The layer's file names now belong to s. */
    memcpy(s->files + s->nfiles, L->files, L->nfiles * sizeof(*files));
    s->nfiles += L->nfiles;
    L->nfiles = 0;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Entry points                                                              */

/* Column of jansson's error at the start of the token it names ("... near
 * 'TOKEN'"): jansson reports the column of the token's last character. */
static unsigned parse_error_col(const json_error_t *je)
{
    const char *near = strstr(je->text, " near '");
    size_t tl, chars = 0;
    int col = je->column;

    if (near != NULL) {
        near += 7;
        tl = strlen(near);
        if (tl >= 2 && near[tl - 1] == '\'') {
            for (size_t i = 0; i + 1 < tl; i++)
                chars += ((unsigned char)near[i] & 0xC0) != 0x80;
            if (chars > 0 && (size_t)col >= chars)
                col = col - (int)chars + 1;
        }
    }
    return col < 1 ? 1u : (unsigned)col;
}

/* Marks every network rule of the managed layer L as the managed file's
 * (report mode does not lift its deny rules). */
static void mark_managed(struct settings *L)
{
    struct settings_list *lists[] = {
        &L->network.allowed_domains,
        &L->network.denied_domains,
        &L->network.denied_resolved_addresses,
    };

    for (size_t i = 0; i < COUNT(lists); i++)
        for (size_t j = 0; j < lists[i]->n; j++)
            lists[i]->items[j].managed = 1;
}

/* With a managed file, the first boundary key an earlier layer weakened is
 * refused: -EINVAL with err set, else 0. */
static int refuse_weakened(const struct settings *s, const char *managed,
                           struct settings_error *err)
{
    const struct settings_item *it;

    if (s->weakened.n == 0)
        return 0;
    it = &s->weakened.items[0];
    snprintf(err->msg, sizeof(err->msg),
             "%s:%u:%u: %s: refused: the managed file %s exists, and only it may %s", it->file,
             it->line, it->col, it->value, managed, boundary_keys[it->index].what);
    return -EINVAL;
}

static int apply_layer(struct settings *s, const char *name, const char *text, size_t len,
                       struct settings_error *err, int managed)
{
    struct settings_error dummy;
    struct settings L;
    struct ctx c;
    json_error_t je;
    json_t *root = NULL;
    char *dir = NULL;
    const char *slash;
    int rc;

    if (err == NULL)
        err = &dummy;
    memset(&L, 0, sizeof(L));
    memset(&c, 0, sizeof(c));
    c.err = err;
    c.v = &L;
    c.managed = managed;
    c.name = intern(&L, name);
    if (c.name == NULL) {
        snprintf(err->msg, sizeof(err->msg), "%s: out of memory", name);
        rc = -ENOMEM;
        goto out;
    }
    slash = strrchr(name, '/');
    if (slash != NULL) {
        dir = strndup(name, slash == name ? 1 : (size_t)(slash - name));
        if (dir == NULL) {
            rc = fail_nomem(&c);
            goto out;
        }
    }
    c.dir = dir;
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) {
        text += 3;
        len -= 3;
    }
    c.text = text;
    c.len = len;

    root = json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
    if (root == NULL) {
        snprintf(err->msg, sizeof(err->msg), "%s:%d:%u: %s", name, je.line < 1 ? 1 : je.line,
                 parse_error_col(&je), je.text);
        rc = -EINVAL;
        goto out;
    }
    if (!json_is_object(root)) {
        rc = fail(&c, 0, "expected an object, got %s", type_name(root));
        goto out;
    }
    rc = apply_object(&c, root, top_keys, COUNT(top_keys));
    if (rc < 0)
        goto out;
    if (managed) {
        rc = refuse_weakened(s, name, err);
        if (rc < 0)
            goto out;
        mark_managed(&L);
        L.managed_file = c.name;
        /* running a command unsandboxed weakens the boundary too: only the
         * managed file may allow it */
        if (!(c.set & LF_UNSANDBOXED)) {
            L.sandbox.allow_unsandboxed_commands = SETTINGS_FALSE;
            c.set |= LF_UNSANDBOXED;
        }
    }
    rc = merge(s, &L, c.set, c.pset);
    if (rc < 0)
        snprintf(err->msg, sizeof(err->msg), "%s: out of memory", name);
out:
    json_decref(root);
    free(dir);
    settings_free(&L);
    return rc;
}

int settings_apply_buffer(struct settings *s, const char *name, const char *text, size_t len,
                          struct settings_error *err)
{
    return apply_layer(s, name, text, len, err, 0);
}

static int apply_path(struct settings *s, const char *path, struct settings_error *err,
                      int managed)
{
    char *buf = NULL;
    size_t len = 0;
    int rc;

    rc = read_all(path, &buf, &len);
    if (rc == -ENOENT)
        return rc;
    if (rc < 0) {
        if (err != NULL)
            snprintf(err->msg, sizeof(err->msg), "%s: cannot open: %s", path, strerror(-rc));
        return rc;
    }
    rc = apply_layer(s, path, buf, len, err, managed);
    free(buf);
    return rc;
}

int settings_apply_file(struct settings *s, const char *path, struct settings_error *err)
{
    return apply_path(s, path, err, 0);
}

int settings_apply_managed(struct settings *s, const char *path, struct settings_error *err)
{
    struct settings_error dummy;
    const char *p = path != NULL ? path : SETTINGS_MANAGED_PATH;
    struct stat st;
    int rc = apply_path(s, p, err != NULL ? err : &dummy, 1);

    /* rt-4: a managed file that is a dangling symlink (its target on a
     * volume not mounted yet) exists: fail closed, not as if there were none */
    if (rc == -ENOENT && lstat(p, &st) == 0) {
        snprintf((err != NULL ? err : &dummy)->msg, sizeof(dummy.msg),
                 "%s: cannot open: %s (a symlink to nothing; the managed file must be readable)",
                 p, strerror(ENOENT));
        return -ENOENT;
    }
    return rc == -ENOENT ? 0 : rc;
}

static char *join(const char *a, const char *b)
{
    size_t n = strlen(a) + strlen(b) + 1;
    char *p = malloc(n);
    if (p != NULL)
        snprintf(p, n, "%s%s", a, b);
    return p;
}

int settings_load(struct settings *s, const char *explicit_path, struct settings_error *err)
{
    const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
    char *user = NULL, *srt = NULL;
    int rc = -ENOENT;

    /* XDG: a relative $XDG_CONFIG_HOME is ignored. */
    if (xdg == NULL || xdg[0] != '/')
        xdg = NULL;
    if (home != NULL && home[0] == '\0')
        home = NULL;
    if (xdg != NULL)
        user = join(xdg, "/sluice/settings.json");
    else if (home != NULL)
        user = join(home, "/.config/sluice/settings.json");
    if (home != NULL)
        srt = join(home, "/.srt-settings.json");
    if ((user == NULL && (xdg != NULL || home != NULL)) || (srt == NULL && home != NULL)) {
        if (err != NULL)
            snprintf(err->msg, sizeof(err->msg), "settings: out of memory");
        rc = -ENOMEM;
        goto out;
    }
    if (user != NULL)
        rc = settings_apply_file(s, user, err);
    if (rc == -ENOENT && srt != NULL)
        rc = settings_apply_file(s, srt, err);
    if (rc == -ENOENT)
        rc = 0;
    if (rc < 0)
        goto out;

    if (explicit_path == NULL) {
        const char *env = getenv("SLUICE_SETTINGS");
        if (env != NULL && env[0] != '\0')
            explicit_path = env;
    }
    if (explicit_path != NULL) {
        rc = settings_apply_file(s, explicit_path, err);
        if (rc == -ENOENT && err != NULL)
            snprintf(err->msg, sizeof(err->msg), "%s: cannot open: %s", explicit_path,
                     strerror(ENOENT));
    }
out:
    free(user);
    free(srt);
    return rc;
}
