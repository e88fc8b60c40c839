/* tests/fuzz/fuzz_sigv4.c - the AWS SigV4 Authorization parser and the
 * canonical request of a head (proxy/sigv4.c): what a sandboxed client
 * sends as an Authorization value and as a head signed with its
 * placeholder secret.
 *
 * Input: a control byte (bit 0: the rest is a whole head, else an
 * Authorization value), then the bytes. Every call gets an exact-size heap
 * copy.
 *
 * Checks, for a value: sigv4_parse_auth returns one of its four answers; a
 * parsed value's spans lie inside it, the date is 8 digits and the
 * signature 64 hex digits; a BAD answer has a reason. For a head: its one
 * AWS4-HMAC-SHA256 Authorization (if any) is re-signed with a secret;
 * re-signing the result with the same secret gives the same bytes, with
 * another secret other bytes of the same length.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "proxy/sigv4.h"

#define S1 "fakefakefakefakefakefakefakefakefakefake"
#define S2 "realREALrealREALrealREALrealREALrealREAL"

static int inside(const char *p, size_t n, const char *v, size_t len)
{
    return p >= v && p + n <= v + len;
}

static void value(const char *v, size_t len)
{
    struct sigv4_auth a;
    const char *why = NULL;
    enum sigv4_alg r = sigv4_parse_auth(v, len, &a, &why);

    FUZZ_CHECK(r == SIGV4_ALG_NONE || r == SIGV4_ALG_HMAC || r == SIGV4_ALG_ECDSA ||
               r == SIGV4_ALG_BAD);
    if (r == SIGV4_ALG_BAD)
        FUZZ_CHECK(why != NULL);
    if (r != SIGV4_ALG_HMAC && r != SIGV4_ALG_ECDSA)
        return;
    FUZZ_CHECK(inside(a.key, a.key_len, v, len) && a.key_len > 0);
    FUZZ_CHECK(inside(a.scope, a.scope_len, v, len) && inside(a.date, 8, v, len));
    FUZZ_CHECK(inside(a.signed_h, a.signed_len, v, len));
    for (size_t i = 0; i < 8; i++)
        FUZZ_CHECK(a.date[i] >= '0' && a.date[i] <= '9');
    if (r == SIGV4_ALG_HMAC) {
        FUZZ_CHECK(inside(a.sig, SIGV4_HEX_LEN, v, len));
        for (size_t i = 0; i < SIGV4_HEX_LEN; i++)
            FUZZ_CHECK((a.sig[i] >= '0' && a.sig[i] <= '9') ||
                       (a.sig[i] >= 'a' && a.sig[i] <= 'f'));
    }
}

static void head(const char *h, size_t len, unsigned form)
{
    char *out = NULL, *again = NULL;
    size_t olen = 0, alen = 0;

    if (sigv4_resign(h, len, form, "UNSIGNED-PAYLOAD", (const uint8_t *)S1, strlen(S1), &out,
                     &olen) < 0) {
        FUZZ_CHECK(out == NULL);
        return;
    }
    /* idempotent under the same secret; another secret gives other bytes */
    FUZZ_CHECK(sigv4_resign(out, olen, form, "UNSIGNED-PAYLOAD", (const uint8_t *)S1, strlen(S1),
                            &again, &alen) == 0);
    FUZZ_CHECK(alen == olen && memcmp(again, out, olen) == 0);
    free(again);
    again = NULL;
    FUZZ_CHECK(sigv4_resign(out, olen, form, "UNSIGNED-PAYLOAD", (const uint8_t *)S2, strlen(S2),
                            &again, &alen) == 0);
    FUZZ_CHECK(alen == olen && memcmp(again, out, olen) != 0);
    free(out);
    free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *c;

    if (size < 1 || size > 65536)
        return 0;
    c = malloc(size - 1 > 0 ? size - 1 : 1);
    if (c == NULL)
        return 0;
    memcpy(c, data + 1, size - 1);
    if (data[0] & 1)
        head(c, size - 1, (unsigned)(data[0] >> 1) & 7u);
    else
        value(c, size - 1);
    free(c);
    return 0;
}
