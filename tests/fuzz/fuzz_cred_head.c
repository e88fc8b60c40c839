/* tests/fuzz/fuzz_cred_head.c - the request-head rewrite of credential
 * substitution (proxy_creds_head, proxy/creds.c): what a sandboxed client
 * sends as a head, with the placeholders and Basic credentials it likes.
 *
 * Input: a control byte (bits 0-1: the allow mask), then the head. Two
 * entries with fixed values and placeholders; the harness also splices a
 * placeholder, or the base64 of "u:" + placeholder, where the control
 * byte's bits 2-3 say, so the interesting cases are common.
 *
 * Checks: the head keeps its length; nothing changes with allow 0 (and
 * nothing is reported replaced); replaced bits are within allow and found
 * bits outside it; a second pass over the result replaces nothing (no
 * allowed placeholder is left, none is made); proxy_head_value returns a
 * span inside the head; proxy_creds_required (require) answers 0 or 1,
 * changes nothing, and never accepts one header for both entries. Every
 * call gets an exact-size heap copy.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "proxy/creds.h"

#define R1 "ghp_R3alT0kenValue0123456789abcdefXYZ"
#define F1 "abc_D4ecO5fgnPqstu9876543210zyxwvuABC"
#define R2 "second-real-value-ABCDEFGH"
#define F2 "zzzzzz-yyyy-xxxxx-QRSTUVWX"

static struct proxy_creds t;
static int ready;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const splice[] = {
        "", F1, "\r\nAuthorization: Basic dTphYmNfRDRlY081ZmduUHFzdHU5ODc2NTQzMjEwenl4d3Z1QUJD\r\n",
        F2};
    uint64_t allow, rep, blk, rep2, blk2;
    size_t n, sl, at;
    char *h, *w, *v;

    if (!ready) {
        FUZZ_CHECK(
            proxy_creds_add(&t, "A", 0, (const uint8_t *)R1, strlen(R1), (const uint8_t *)F1) == 0);
        FUZZ_CHECK(
            proxy_creds_add(&t, "B", 1, (const uint8_t *)R2, strlen(R2), (const uint8_t *)F2) == 0);
        FUZZ_CHECK(proxy_creds_seal(&t) == 0);
        ready = 1;
    }
    if (size < 1)
        return 0;
    allow = data[0] & 3u;
    sl = strlen(splice[(data[0] >> 2) & 3u]);
    n = size - 1 + sl;
    at = size > 1 ? data[1] % (size - 1) : 0;
    h = malloc(n + 1);
    w = malloc(n + 1);
    FUZZ_CHECK(h != NULL && w != NULL);
    memcpy(h, data + 1, at);
    memcpy(h + at, splice[(data[0] >> 2) & 3u], sl);
    memcpy(h + at + sl, data + 1 + at, size - 1 - at);

    memcpy(w, h, n);
    rep = proxy_creds_head(&t, 0, w, n, &blk);
    FUZZ_CHECK(rep == 0 && memcmp(w, h, n) == 0);
    rep = proxy_creds_head(&t, allow, w, n, &blk);
    FUZZ_CHECK((rep & ~allow) == 0 && (blk & allow) == 0);
    rep2 = proxy_creds_head(&t, allow, w, n, &blk2);
    FUZZ_CHECK(rep2 == 0);
    {
        size_t vl;
        v = proxy_head_value(w, n, "Authorization", &vl);
        FUZZ_CHECK(v == NULL || (v >= w && v + vl <= w + n));
    }
    /* require (proxy_creds_required): 0 or 1, the head untouched, never 1
     * without an Authorization header, and 1 for entry 0 only when entry
     * 1's check of the same header is 0 (one placeholder per header) */
    {
        int r0, r1;
        memcpy(w, h, n);
        r0 = proxy_creds_required(&t, 0, "Authorization", w, n);
        r1 = proxy_creds_required(&t, 1, "authorization", w, n);
        FUZZ_CHECK((r0 == 0 || r0 == 1) && (r1 == 0 || r1 == 1) && !(r0 && r1));
        FUZZ_CHECK(memcmp(w, h, n) == 0);
        FUZZ_CHECK(!(r0 || r1) || proxy_head_value(w, n, "Authorization", &(size_t){0}) != NULL);
    }
    free(h);
    free(w);
    return 0;
}
