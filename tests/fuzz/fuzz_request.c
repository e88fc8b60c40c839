/* tests/fuzz/fuzz_request.c - request rules (policy/request.c): the path
 * normaliser, the glob check, the segment glob matcher and the narrowing
 * step of the verdict.
 *
 * The input is "GLOB\nMETHOD\nTARGET" (missing parts are empty; TARGET is
 * the rest, any bytes, NUL included). Checked:
 *   - policy_path_normalize(TARGET): on success the output starts with '/',
 *     is no longer than the input, holds only visible ASCII, no '//' before
 *     the end, no '.' or '..' segment, no '%2F'/'%5C'/'%00', no lower-case
 *     escape, and normalises to itself; the query never matters (TARGET and
 *     TARGET cut at its first '?' give the same path);
 *   - policy_path_glob_check(GLOB): accepted globs normalise, and their
 *     '*' are whole segments;
 *   - policy_path_glob_match(glob, path) against a reference matcher written
 *     here (recursive over segments, on short inputs);
 *   - a policy with rules for "ruled.test" decides (METHOD, TARGET) there:
 *     never ALLOW when the target does not normalise, ALLOW only when an
 *     allow rule's glob matches and the deny glob does not, and an
 *     unruled host's decision is the domain lists' whatever the request.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "policy/policy.h"

#define MAX_SEGS 24

static struct policy *pol;

static void build_policy(void)
{
    static const char json[] =
        "{\"network\": {\"allowedDomains\": [\"ruled.test\", \"plain.test\"],\n"
        " \"requestRules\": [\n"
        "  {\"host\": \"ruled.test\", \"method\": [\"GET\", \"POST\"], \"path\": [\"/a/**\", "
        "\"/*/x\"], \"action\": \"allow\"},\n"
        "  {\"host\": \"ruled.test\", \"path\": \"/a/secret/**\", \"action\": \"deny\"}\n"
        "]}}\n";
    struct settings s;
    struct settings_error err;

    settings_init(&s);
    FUZZ_CHECK(settings_apply_buffer(&s, "fuzz.json", json, sizeof(json) - 1, &err) == 0);
    FUZZ_CHECK(policy_compile(&s, &pol, &err) == 0);
    settings_free(&s);
}

/* ---- reference glob matcher: segments as arrays, plain recursion ---- */

struct segs {
    const char *s[MAX_SEGS];
    size_t n[MAX_SEGS];
    size_t count;
};

/* 0 when the path has more than MAX_SEGS segments */
static int split(const char *p, size_t len, struct segs *out)
{
    size_t i = 0;

    out->count = 0;
    while (i < len) { /* p[i] == '/' */
        size_t j = i + 1;
        while (j < len && p[j] != '/')
            j++;
        if (out->count == MAX_SEGS)
            return 0;
        out->s[out->count] = p + i + 1;
        out->n[out->count++] = j - i - 1;
        i = j;
    }
    return 1;
}

static int ref_match(const struct segs *g, size_t gi, const struct segs *p, size_t pi)
{
    if (gi == g->count)
        return pi == p->count;
    if (g->n[gi] == 2 && g->s[gi][0] == '*' && g->s[gi][1] == '*') {
        for (size_t k = pi; k <= p->count; k++)
            if (ref_match(g, gi + 1, p, k))
                return 1;
        return 0;
    }
    if (pi == p->count)
        return 0;
    if (!(g->n[gi] == 1 && g->s[gi][0] == '*') &&
        !(g->n[gi] == p->n[pi] && memcmp(g->s[gi], p->s[pi], g->n[gi]) == 0))
        return 0;
    return ref_match(g, gi + 1, p, pi + 1);
}

static void check_normalized(const char *in, size_t len, const char *out, size_t n)
{
    static char again[POLICY_PATH_MAX + 1];
    const char *why = NULL;
    size_t n2 = 0;

    FUZZ_CHECK(n >= 1 && n <= len && out[0] == '/' && strlen(out) == n);
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)out[i];
        FUZZ_CHECK(ch > 0x20 && ch < 0x7f && ch != '\\' && ch != '?' && ch != '#');
        if (ch == '/' && i + 1 < n)
            FUZZ_CHECK(out[i + 1] != '/');
        if (ch == '%') {
            FUZZ_CHECK(i + 2 < n);
            FUZZ_CHECK(!(out[i + 1] >= 'a' && out[i + 1] <= 'f'));
            FUZZ_CHECK(!(out[i + 2] >= 'a' && out[i + 2] <= 'f'));
            FUZZ_CHECK(memcmp(out + i, "%2F", 3) != 0 && memcmp(out + i, "%5C", 3) != 0 &&
                       memcmp(out + i, "%00", 3) != 0);
        }
        if (ch == '/') { /* no dot segment */
            size_t j = i + 1;
            while (j < n && out[j] != '/')
                j++;
            FUZZ_CHECK(!(j - i - 1 == 1 && out[i + 1] == '.'));
            FUZZ_CHECK(!(j - i - 1 == 2 && out[i + 1] == '.' && out[i + 2] == '.'));
        }
    }
    FUZZ_CHECK(policy_path_normalize(out, n, again, sizeof(again), &n2, &why) == 0);
    FUZZ_CHECK(n2 == n && memcmp(again, out, n) == 0);
    (void)in;
}

static void check_decision(const char *method, size_t mlen, const char *target, size_t tlen,
                           int normalizes, const char *path, size_t plen)
{
    struct policy_host h;
    struct policy_request rq = {method, mlen, target, tlen};
    struct policy_decision d;
    const char *why;
    int get_or_post = (mlen == 3 && memcmp(method, "GET", 3) == 0) ||
                      (mlen == 4 && memcmp(method, "POST", 4) == 0);

    FUZZ_CHECK(policy_host_normalize("ruled.test", 10, &h, &why) == 0);
    policy_decide_request(pol, &h, 80, &rq, &d);
    FUZZ_CHECK(d.verdict == POLICY_ALLOW || d.verdict == POLICY_DENY);
    if (!normalizes) {
        FUZZ_CHECK(d.verdict == POLICY_DENY && d.origin == POLICY_BY_REQUEST);
    } else {
        int allow = get_or_post && (policy_path_glob_match("/a/**", 5, path, plen) ||
                                    policy_path_glob_match("/*/x", 4, path, plen));
        int deny = policy_path_glob_match("/a/secret/**", 12, path, plen);
        FUZZ_CHECK((d.verdict == POLICY_ALLOW) == (allow && !deny));
    }
    policy_decide_request(pol, &h, 80, NULL, &d); /* a tunnel to a ruled host */
    FUZZ_CHECK(d.verdict == POLICY_DENY && d.origin == POLICY_BY_REQUEST);
    FUZZ_CHECK(policy_host_normalize("plain.test", 10, &h, &why) == 0);
    policy_decide_request(pol, &h, 80, &rq, &d);
    FUZZ_CHECK(d.verdict == POLICY_ALLOW && d.origin == POLICY_BY_RULE);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *in = (const char *)data, *nl1, *nl2;
    size_t glen, mlen, tlen, plen = 0, gnlen = 0, cut;
    char *glob, *method, *target, *path, *gnorm = NULL;
    const char *why = NULL;
    int normalizes, rc;

    if (pol == NULL)
        build_policy();
    if (size > 3 * POLICY_PATH_MAX)
        return 0;
    nl1 = memchr(in, '\n', size);
    glen = nl1 != NULL ? (size_t)(nl1 - in) : size;
    nl2 = nl1 != NULL ? memchr(nl1 + 1, '\n', size - glen - 1) : NULL;
    mlen = nl1 == NULL ? 0 : nl2 != NULL ? (size_t)(nl2 - nl1 - 1) : size - glen - 1;
    tlen = nl2 != NULL ? size - (size_t)(nl2 + 1 - in) : 0;
    glob = fuzz_dup(in, glen, 1);
    method = fuzz_dup(nl1 != NULL ? nl1 + 1 : in, mlen, 0);
    target = fuzz_dup(nl2 != NULL ? nl2 + 1 : in, tlen, 0);
    path = fuzz_alloc(tlen + 1);

    /* the normaliser */
    normalizes = policy_path_normalize(target, tlen, path, tlen + 1, &plen, &why) == 0;
    if (normalizes)
        check_normalized(target, tlen, path, plen);
    else
        FUZZ_CHECK(why != NULL);
    cut = tlen;
    for (size_t i = 0; i < tlen; i++)
        if (target[i] == '?') {
            cut = i;
            break;
        }
    if (cut < tlen) { /* the query never matters */
        char *p2 = fuzz_alloc(cut + 1);
        size_t n2 = 0;
        int ok2 = policy_path_normalize(target, cut, p2, cut + 1, &n2, &why) == 0;
        FUZZ_CHECK(ok2 == normalizes);
        if (ok2)
            FUZZ_CHECK(n2 == plen && memcmp(p2, path, plen) == 0);
        free(p2);
    }

    /* the glob */
    if (strlen(glob) == glen) {
        rc = policy_path_glob_check(glob, &why);
        if (rc == 0) {
            gnorm = fuzz_alloc(glen + 1);
            FUZZ_CHECK(policy_path_normalize(glob, glen, gnorm, glen + 1, &gnlen, &why) == 0);
            for (size_t i = 0; i < gnlen; i++)
                if (gnorm[i] == '*')
                    FUZZ_CHECK((gnorm[i - 1] == '/' || gnorm[i - 1] == '*') &&
                               (i + 1 == gnlen || gnorm[i + 1] == '/' || gnorm[i + 1] == '*'));
        } else {
            FUZZ_CHECK(why != NULL);
        }
    }
    if (gnorm != NULL && normalizes) {
        struct segs g, p;
        int got = policy_path_glob_match(gnorm, gnlen, path, plen);
        if (split(gnorm, gnlen, &g) && split(path, plen, &p) && g.count <= 8)
            FUZZ_CHECK(got == ref_match(&g, 0, &p, 0));
    }

    check_decision(method, mlen, target, tlen, normalizes, path, plen);
    free(gnorm);
    free(glob);
    free(method);
    free(target);
    free(path);
    return 0;
}
