/* settings/value.c - where a value is and what is wrong with it: the key
 * path, "FILE:LINE:COLUMN: key.path: message" errors and notices, and the
 * checks of plain values (booleans, integers, seconds, string lists).
 */
#include "settings/settings-int.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Messages                                                                  */

/* Writes s for a one-line message: printable ASCII and UTF-8 kept, control
 * bytes escaped, long strings cut. */
void settings__quote(char *buf, size_t size, const char *s)
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
void settings__format_path(const struct ctx *c, char *buf, size_t size)
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
            settings__quote(q, sizeof(q), st->key);
            n = snprintf(buf + o, size - o, "[\"%s\"]", q);
        }
        if (n < 0)
            break;
        o += (size_t)n;
    }
}

void settings__locate(const struct ctx *c, int at_key, struct jsonpos *pos)
{
    if (jsonpos_find(c->text, c->len, c->path, c->depth, at_key, pos) < 0) {
        pos->line = 1;
        pos->col = 1;
    }
}

int settings__text_add(struct settings_text *b, const char *s, size_t n)
{
    if (b->cap - b->n <= n) {
        size_t cap = (b->cap + n) * 2 + 64;
        char *np = realloc(b->p, cap);
        if (np == NULL)
            return -ENOMEM;
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
    return 0;
}

void settings__given(const struct ctx *c, struct settings_given *g)
{
    struct jsonpos pos;

    settings__locate(c, 1, &pos);
    g->set = 1;
    g->file = c->name;
    g->line = pos.line;
    g->col = pos.col;
}

/* Formats "FILE:LINE:COL: path: message" into out. */
__attribute__((format(printf, 5, 0))) static void vformat_at(const struct ctx *c,
                                                             const struct jsonpos *pos, char *out,
                                                             size_t size, const char *fmt,
                                                             va_list ap)
{
    char path[512];
    int n;

    settings__format_path(c, path, sizeof(path));
    n = snprintf(out, size, "%s:%u:%u: %s: ", c->name, pos->line, pos->col, path);
    if (n >= 0 && (size_t)n < size)
        vsnprintf(out + n, size - (size_t)n, fmt, ap);
}

/* Fails with a message located at the current path (its key if at_key). */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
int settings__fail(struct ctx *c, int at_key, const char *fmt, ...)
{
    struct jsonpos pos;
    va_list ap;

    settings__locate(c, at_key, &pos);
    va_start(ap, fmt);
    vformat_at(c, &pos, c->err->msg, sizeof(c->err->msg), fmt, ap);
    va_end(ap);
    return -EINVAL;
}

int settings__string_map(struct ctx *c, json_t *v, struct settings_map *m, const char *what,
                         int (*check)(struct ctx *c, const char *key, json_t *e))
{
    const char *key;
    json_t *e;

    if (!json_is_object(v))
        return settings__fail(c, 0, "expected an object of %s, got %s", what,
                              settings__type_name(v));
    json_object_foreach(v, key, e) {
        int rc;

        settings__push_key(c, key);
        rc = check(c, key, e);
        settings__pop(c);
        if (rc < 0)
            return rc;
        if (settings__map_put(m, key, json_string_value(e)) < 0)
            return settings__fail_nomem(c);
    }
    return 0;
}

int settings__fail_nomem(struct ctx *c)
{
    snprintf(c->err->msg, sizeof(c->err->msg), "%s: out of memory", c->name);
    return -ENOMEM;
}

/* Adds "FILE:LINE:COL: key: note" (located at the key) to the notices. */
int settings__notice(struct ctx *c, const char *note)
{
    struct jsonpos pos;
    char path[512], *msg;
    size_t size;

    settings__locate(c, 1, &pos);
    settings__format_path(c, path, sizeof(path));
    size = strlen(c->name) + strlen(path) + strlen(note) + 32;
    msg = malloc(size);
    if (msg == NULL)
        return settings__fail_nomem(c);
    snprintf(msg, size, "%s:%u:%u: %s: %s", c->name, pos.line, pos.col, path, note);
    if (settings__list_push(&c->v->notices, msg, c->name, pos.line, pos.col, "notices",
                            c->v->notices.n) < 0)
        return settings__fail_nomem(c);
    return 0;
}

const char *settings__type_name(const json_t *j)
{
    switch (json_typeof(j)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
        return "an integer";
    case JSON_REAL:
        return "a real number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    case JSON_NULL:
        return "null";
    }
    return "an unknown type";
}

/* The key tables nest at most 4 deep (ignoreViolations["cmd"][i]). */
void settings__push_key(struct ctx *c, const char *key)
{
    assert(c->depth < PATH_DEPTH_MAX);
    c->path[c->depth].key = key;
    c->path[c->depth].keylen = strlen(key);
    c->path[c->depth].index = 0;
    c->depth++;
}

void settings__push_index(struct ctx *c, size_t index)
{
    assert(c->depth < PATH_DEPTH_MAX);
    c->path[c->depth].key = NULL;
    c->path[c->depth].keylen = 0;
    c->path[c->depth].index = index;
    c->depth++;
}

void settings__pop(struct ctx *c)
{
    c->depth--;
}

/* Levenshtein distance, case-insensitive, for keys up to 64 bytes. */
size_t settings__edit_distance(const char *a, const char *b)
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

int settings__want_bool(struct ctx *c, json_t *v, int *out)
{
    if (!json_is_boolean(v))
        return settings__fail(c, 0, "expected a boolean, got %s", settings__type_name(v));
    *out = json_is_true(v);
    return 0;
}

int settings__want_string(struct ctx *c, json_t *v)
{
    if (!json_is_string(v))
        return settings__fail(c, 0, "expected a string, got %s", settings__type_name(v));
    return 0;
}

int settings__want_uint(struct ctx *c, json_t *v, unsigned min, unsigned max, unsigned *out)
{
    json_int_t n;

    if (json_is_real(v))
        return settings__fail(c, 0, "expected an integer in %u..%u, got %g", min, max,
                              json_real_value(v));
    if (!json_is_integer(v))
        return settings__fail(c, 0, "expected an integer in %u..%u, got %s", min, max,
                              settings__type_name(v));
    n = json_integer_value(v);
    if (n < (json_int_t)min || n > (json_int_t)max)
        return settings__fail(c, 0, "must be in %u..%u, got %" JSON_INTEGER_FORMAT, min, max, n);
    *out = (unsigned)n;
    return 0;
}

/* A duration in seconds (integer or fraction) stored as milliseconds in
 * min..max ms. */
int settings__want_seconds(struct ctx *c, json_t *v, unsigned min, unsigned max, unsigned *out)
{
    double sec, ms;

    if (!json_is_number(v))
        return settings__fail(c, 0, "expected a number of seconds, got %s", settings__type_name(v));
    sec = json_number_value(v);
    ms = sec * 1000.0;
    if (!(ms >= (double)min && ms <= (double)max)) {
        if (min == 0)
            return settings__fail(c, 0, "must be 0 (off) to %g seconds, got %g", max / 1000.0, sec);
        return settings__fail(c, 0, "must be %g to %g seconds, got %g", min / 1000.0, max / 1000.0,
                              sec);
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
        settings__push_key(c, key);
        if (strcmp(key, "path") == 0) {
            if (!json_is_string(m))
                rc = settings__fail(c, 0, "expected a string, got %s", settings__type_name(m));
            else if (json_string_length(m) == 0)
                rc = settings__fail(c, 0, "must not be an empty string");
        } else if (strcmp(key, "literal") == 0) {
            if (!json_is_boolean(m))
                rc = settings__fail(c, 0, "expected a boolean, got %s", settings__type_name(m));
        } else {
            rc =
                settings__fail(c, 0, "unknown key in a path entry (only \"path\" and \"literal\")");
        }
        settings__pop(c);
        if (rc < 0)
            return rc;
    }
    if (json_object_get(e, "path") == NULL)
        return settings__fail(c, 0, "a path entry written as an object needs \"path\"");
    return 0;
}

/* Checks that v is an array of strings (non-empty ones if asked; 2: path
 * entries, which may also be {"path", "literal"} objects). */
int settings__check_strlist(struct ctx *c, json_t *v, int nonempty)
{
    size_t i;
    json_t *e;

    if (!json_is_array(v))
        return settings__fail(c, 0, "expected an array of strings, got %s", settings__type_name(v));
    json_array_foreach(v, i, e) {
        int rc = 0;
        settings__push_index(c, i);
        if (nonempty == 2 && json_is_object(e))
            rc = check_path_object(c, e);
        else if (!json_is_string(e))
            rc = settings__fail(c, 0,
                                nonempty == 2
                                    ? "expected a path string or {\"path\": ..., \"literal\": "
                                      "true}, got %s"
                                    : "expected a string, got %s",
                                settings__type_name(e));
        else if (nonempty && json_string_length(e) == 0)
            rc = settings__fail(c, 0, "must not be an empty string");
        settings__pop(c);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Checks and appends an array of strings to out, each item located at its
 * opening quote; the positions of all elements come from one scan. */
int settings__take_strlist(struct ctx *c, json_t *v, struct settings_list *out, const char *list,
                           int nonempty)
{
    struct jsonpos *pos = NULL;
    size_t n, found = 0;
    int rc;

    rc = settings__check_strlist(c, v, nonempty);
    if (rc < 0)
        return rc;
    n = json_array_size(v);
    if (n == 0)
        return 0;
    pos = calloc(n, sizeof(*pos));
    if (pos == NULL || settings__list_reserve(out, out->n + n) < 0) {
        rc = settings__fail_nomem(c);
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
            rc = settings__fail_nomem(c);
            goto out;
        }
        rc = settings__list_push(out, val, c->name, pos[i].line, pos[i].col, list, i);
        if (rc < 0) {
            rc = settings__fail_nomem(c);
            goto out;
        }
        out->items[out->n - 1].literal = literal;
    }
out:
    free(pos);
    return rc;
}

/* Checks a string list, then each entry with ok(): the first refused one
 * fails as "invalid WHAT "ENTRY" (EXPECTED)", located at the entry. */
int settings__check_each(struct ctx *c, json_t *v, int (*ok)(const char *), const char *what,
                         const char *expected)
{
    size_t i;
    json_t *e;
    int rc;

    rc = settings__check_strlist(c, v, 0);
    if (rc < 0)
        return rc;
    json_array_foreach(v, i, e) {
        if (!ok(json_string_value(e))) {
            char q[128];
            settings__quote(q, sizeof(q), json_string_value(e));
            settings__push_index(c, i);
            rc = settings__fail(c, 0, "invalid %s \"%s\" (%s)", what, q, expected);
            settings__pop(c);
            return rc;
        }
    }
    return 0;
}
