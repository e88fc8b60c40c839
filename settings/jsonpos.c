/* settings/jsonpos.c - locate values in JSON text that jansson accepted. */
#include "settings/jsonpos.h"

#include "common/common.h"

#include <errno.h>
#include <stdint.h>

struct scan {
    const unsigned char *p;
    size_t len;
    size_t i;
};

/* Turns byte offsets into line/column. Offsets must be asked for in
 * increasing order, so a whole document costs one pass. */
struct cursor {
    size_t off;
    unsigned line, col;
};

static void cursor_init(struct cursor *c)
{
    c->off = 0;
    c->line = 1;
    c->col = 1;
}

static void cursor_at(struct cursor *c, const unsigned char *p, size_t target, struct jsonpos *out)
{
    while (c->off < target) {
        unsigned char b = p[c->off++];
        if (b == '\n') {
            c->line++;
            c->col = 1;
        } else if ((b & 0xC0) != 0x80) {
            c->col++;
        }
    }
    out->line = c->line;
    out->col = c->col;
}

static void skip_ws(struct scan *s)
{
    while (s->i < s->len) {
        unsigned char b = s->p[s->i];
        if (b != ' ' && b != '\t' && b != '\n' && b != '\r')
            break;
        s->i++;
    }
}

static int peek(const struct scan *s)
{
    return s->i < s->len ? s->p[s->i] : -1;
}

/* At an opening quote: moves past the closing quote. */
static void skip_string(struct scan *s)
{
    s->i++;
    while (s->i < s->len) {
        unsigned char b = s->p[s->i++];
        if (b == '"')
            return;
        if (b == '\\' && s->i < s->len)
            s->i++;
    }
}

static void skip_value(struct scan *s)
{
    int c = peek(s);
    size_t depth = 0;

    if (c == '"') {
        skip_string(s);
        return;
    }
    if (c != '{' && c != '[') {
        while (s->i < s->len) {
            unsigned char b = s->p[s->i];
            if (b == ',' || b == ']' || b == '}' || b == ' ' || b == '\t' || b == '\n' ||
                b == '\r')
                break;
            s->i++;
        }
        return;
    }
    while (s->i < s->len) {
        unsigned char b = s->p[s->i];
        if (b == '"') {
            skip_string(s);
            continue;
        }
        s->i++;
        if (b == '{' || b == '[') {
            depth++;
        } else if (b == '}' || b == ']') {
            if (--depth == 0)
                return;
        }
    }
}

/* Reads the 4 hex digits after "\u"; -1 if malformed. */
static long read_hex4(struct scan *s)
{
    long v = 0;
    for (int k = 0; k < 4; k++) {
        int h = s->i < s->len ? common_hex_digit(s->p[s->i]) : -1;
        if (h < 0)
            return -1;
        v = v * 16 + h;
        s->i++;
    }
    return v;
}

static size_t utf8_encode(uint32_t cp, unsigned char out[4])
{
    if (cp < 0x80) {
        out[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (unsigned char)(0xC0 | (cp >> 6));
        out[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (unsigned char)(0xE0 | (cp >> 12));
        out[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (unsigned char)(0xF0 | (cp >> 18));
    out[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* At an opening quote: decodes the string, compares it with key and moves
 * past the closing quote. Returns 1 on equality. */
static int string_equals(struct scan *s, const char *key, size_t keylen)
{
    const unsigned char *k = (const unsigned char *)key;
    size_t kpos = 0;
    int same = 1;

    s->i++;
    while (s->i < s->len) {
        unsigned char b = s->p[s->i++];
        unsigned char buf[4];
        size_t n = 1;

        if (b == '"')
            return same && kpos == keylen;
        buf[0] = b;
        if (b == '\\' && s->i < s->len) {
            unsigned char e = s->p[s->i++];
            switch (e) {
            case 'b': buf[0] = '\b'; break;
            case 'f': buf[0] = '\f'; break;
            case 'n': buf[0] = '\n'; break;
            case 'r': buf[0] = '\r'; break;
            case 't': buf[0] = '\t'; break;
            case 'u': {
                long cp = read_hex4(s);
                if (cp < 0) {
                    same = 0;
                    continue;
                }
                if (cp >= 0xD800 && cp <= 0xDBFF && s->i + 1 < s->len && s->p[s->i] == '\\' &&
                    s->p[s->i + 1] == 'u') {
                    size_t save = s->i;
                    long lo;
                    s->i += 2;
                    lo = read_hex4(s);
                    if (lo >= 0xDC00 && lo <= 0xDFFF)
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    else
                        s->i = save;
                }
                n = utf8_encode((uint32_t)cp, buf);
                break;
            }
            default: buf[0] = e; break; /* \" \\ \/ */
            }
        }
        for (size_t j = 0; j < n; j++) {
            if (same && kpos < keylen && k[kpos] == buf[j])
                kpos++;
            else
                same = 0;
        }
    }
    return 0;
}

/* Skips the value at s and the ',' after it: 0, or -ENOENT when no ','
 * follows (the end of the object or array). */
static int next_member(struct scan *s)
{
    skip_value(s);
    skip_ws(s);
    if (peek(s) != ',')
        return -ENOENT;
    s->i++;
    return 0;
}

/* Walks path from the top-level value. On success s->i is at the value
 * (or, with at_key, *keyoff holds the last key's opening quote). */
static int walk(struct scan *s, const struct jsonpos_step *path, size_t depth, size_t *keyoff)
{
    skip_ws(s);
    for (size_t d = 0; d < depth; d++) {
        const struct jsonpos_step *st = &path[d];
        int found = 0;

        if (st->key != NULL) {
            if (peek(s) != '{')
                return -ENOENT;
            s->i++;
            for (;;) {
                size_t kstart;
                int match;

                skip_ws(s);
                if (peek(s) != '"')
                    return -ENOENT; /* '}' or garbage: not here */
                kstart = s->i;
                match = string_equals(s, st->key, st->keylen);
                skip_ws(s);
                if (peek(s) != ':')
                    return -ENOENT;
                s->i++;
                skip_ws(s);
                if (match) {
                    *keyoff = kstart;
                    found = 1;
                    break;
                }
                if (next_member(s) < 0)
                    return -ENOENT;
            }
        } else {
            size_t idx = 0;
            if (peek(s) != '[')
                return -ENOENT;
            s->i++;
            for (;;) {
                skip_ws(s);
                if (peek(s) == ']' || peek(s) < 0)
                    return -ENOENT;
                if (idx == st->index) {
                    found = 1;
                    break;
                }
                if (next_member(s) < 0)
                    return -ENOENT;
                idx++;
            }
        }
        if (!found)
            return -ENOENT;
    }
    return s->i < s->len ? 0 : -ENOENT;
}

int jsonpos_find(const char *text, size_t len, const struct jsonpos_step *path, size_t depth,
                 int at_key, struct jsonpos *out)
{
    struct scan s = {(const unsigned char *)text, len, 0};
    struct cursor c;
    size_t keyoff = 0;
    int rc;

    rc = walk(&s, path, depth, &keyoff);
    if (rc < 0)
        return rc;
    cursor_init(&c);
    if (at_key && depth > 0 && path[depth - 1].key != NULL)
        cursor_at(&c, s.p, keyoff, out);
    else
        cursor_at(&c, s.p, s.i, out);
    return 0;
}

int jsonpos_array(const char *text, size_t len, const struct jsonpos_step *path, size_t depth,
                  struct jsonpos *out, size_t n, size_t *found)
{
    struct scan s = {(const unsigned char *)text, len, 0};
    struct cursor c;
    size_t keyoff = 0, k = 0;
    int rc;

    rc = walk(&s, path, depth, &keyoff);
    if (rc < 0)
        return rc;
    if (peek(&s) != '[')
        return -ENOENT;
    s.i++;
    cursor_init(&c);
    while (k < n) {
        skip_ws(&s);
        if (peek(&s) == ']' || peek(&s) < 0)
            break;
        cursor_at(&c, s.p, s.i, &out[k++]);
        skip_value(&s);
        skip_ws(&s);
        if (peek(&s) != ',')
            break;
        s.i++;
    }
    *found = k;
    return 0;
}
