/* tests/fuzz/fuzz_gw_head.c - the request-head rewrite of credentials.headers
 * (proxy_gw_head, proxy_head_drop: proxy/gw.c): what a client sends as a
 * head, with the headers it likes under the names the gateway sets.
 *
 * Input: a control byte (bits 0-1: how many of three headers to set; bit 2:
 * end the head with CRLF CRLF, else as it comes), then the head.
 *
 * Checks: refused (-EINVAL) exactly when the head does not end in CRLF
 * CRLF, and then nothing is made; otherwise the result is the head with
 * every line of those names and of Accept-Encoding removed (after the first
 * line, in any case: checked against a reference walk of the input's
 * lines), less its last CRLF, then exactly one line "NAME: PREFIXVALUE\r\n"
 * per header in order, then CRLF; so each name's line appears exactly once
 * after the first line, whatever the client sent. Every call gets an
 * exact-size heap copy.
 */
#include <errno.h>
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fuzz.h"
#include "proxy/gw.h"

static const struct proxy_gw_line all[3] = {
    {"Authorization", "Bearer ", 7, (const uint8_t *)"tok_0123456789abcdef", 20},
    {"X-Key", "", 0, (const uint8_t *)"key-ABCDEFGHIJKLMNOP", 20},
    {"cookie", "s=", 2, (const uint8_t *)"0123456789012345678", 19},
};

/* a and b (n bytes) name one header: any case, '_' for '-' (rt-15) */
static int name_eq(const char *a, const char *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int x = tolower((unsigned char)a[i]), y = tolower((unsigned char)b[i]);
        x = x == '_' ? '-' : x;
        y = y == '_' ? '-' : y;
        if (x != y)
            return 0;
    }
    return 1;
}

/* The line at p (up to and with its '\n', or to end) is "name:..." in any
 * case (and '_' for '-'), for one of the n names or Accept-Encoding. */
static int dropped(const char *p, size_t ll, size_t n)
{
    for (size_t i = 0; i <= n; i++) {
        const char *name = i < n ? all[i].name : "Accept-Encoding";
        size_t nl = strlen(name);
        if (ll > nl && p[nl] == ':' && name_eq(p, name, nl))
            return 1;
    }
    return 0;
}

/* The reference: the input's lines after the first, those of the names
 * left out (a last piece without '\n' is kept as it is). */
static size_t reference(const char *h, size_t len, size_t n, char *out)
{
    const char *p = memchr(h, '\n', len), *end = h + len;
    size_t o;

    if (p == NULL) {
        memcpy(out, h, len);
        return len;
    }
    o = (size_t)(p + 1 - h);
    memcpy(out, h, o);
    for (p = p + 1; p < end;) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        size_t ll = eol != NULL ? (size_t)(eol + 1 - p) : (size_t)(end - p);
        if (eol == NULL || !dropped(p, ll, n)) {
            memcpy(out + o, p, ll);
            o += ll;
        }
        p += ll;
    }
    return o;
}

/* Lines "name:" (any case) after the first line of b. */
static size_t count_lines(const char *b, size_t len, const char *name)
{
    const char *p = memchr(b, '\n', len), *end = b + len;
    size_t nl = strlen(name), c = 0;

    while (p != NULL && p + 1 < end) {
        const char *line = p + 1, *eol = memchr(line, '\n', (size_t)(end - line));
        size_t ll = eol != NULL ? (size_t)(eol + 1 - line) : (size_t)(end - line);
        c += ll > nl && line[nl] == ':' && name_eq(line, name, nl);
        p = eol;
    }
    return c;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t n, len, olen = 0, rlen, at;
    char *h, *out = NULL, *ref;
    int rc, crlf;

    if (size < 1)
        return 0;
    n = data[0] & 3u;
    if (n > 3)
        n = 3;
    crlf = (data[0] & 4u) != 0;
    len = size - 1 + (crlf ? 4 : 0);
    h = malloc(len + 1);
    ref = malloc(len + 1);
    FUZZ_CHECK(h != NULL && ref != NULL);
    memcpy(h, data + 1, size - 1);
    if (crlf)
        memcpy(h + size - 1, "\r\n\r\n", 4);
    rc = proxy_gw_head(h, len, all, n, &out, &olen);
    if (len < 4 || memcmp(h + len - 4, "\r\n\r\n", 4) != 0) {
        FUZZ_CHECK(rc == -EINVAL && out == NULL);
        free(h);
        free(ref);
        return 0;
    }
    FUZZ_CHECK(rc == 0 && out != NULL);
    rlen = reference(h, len, n, ref);
    /* the reference keeps the input's end, so it ends in CRLF unless the
     * last line before it was dropped with its CRLF: the result is the
     * reference less its last 2 bytes, the lines, CRLF */
    FUZZ_CHECK(rlen >= 2 && olen >= rlen);
    FUZZ_CHECK(memcmp(out, ref, rlen - 2) == 0);
    at = rlen - 2;
    for (size_t i = 0; i < n; i++) {
        size_t hl = strlen(all[i].name);
        FUZZ_CHECK(at + hl + 2 + all[i].prefix_len + all[i].len + 2 <= olen);
        FUZZ_CHECK(memcmp(out + at, all[i].name, hl) == 0 && memcmp(out + at + hl, ": ", 2) == 0);
        at += hl + 2;
        FUZZ_CHECK(memcmp(out + at, all[i].prefix, all[i].prefix_len) == 0);
        at += all[i].prefix_len;
        FUZZ_CHECK(memcmp(out + at, all[i].value, all[i].len) == 0);
        at += all[i].len;
        FUZZ_CHECK(memcmp(out + at, "\r\n", 2) == 0);
        at += 2;
    }
    FUZZ_CHECK(at + 2 == olen && memcmp(out + at, "\r\n", 2) == 0);
    for (size_t i = 0; i < n; i++)
        FUZZ_CHECK(count_lines(out, olen, all[i].name) == 1);
    FUZZ_CHECK(count_lines(out, olen, "Accept-Encoding") == 0);
    free(out);
    free(h);
    free(ref);
    return 0;
}
