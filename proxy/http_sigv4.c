/* proxy/http_sigv4.c - AWS SigV4 re-signing in the HTTP front end
 * (credentials.awsPairs, issue 24 deliverable 3), a step of http_cred.c.
 *
 * A request to the hosts of a pair's access key id whose Authorization is
 * AWS4-HMAC-SHA256 with the key id's placeholder was signed in the sandbox
 * with the placeholder secret. Its signature is checked with that
 * placeholder secret over the head as the client sent it (a request the
 * sandbox did not sign so is refused, never re-signed), then the head that
 * goes upstream (placeholders swapped, hop-by-hop headers and
 * Accept-Encoding gone) is signed again with the real secret: the same
 * scope, x-amz-date and URI form, the client's SignedHeaders less those
 * the proxy removed. The payload hash:
 *   - UNSIGNED-PAYLOAD, STREAMING-UNSIGNED-PAYLOAD-TRAILER (no chunk
 *     signatures), or no body: the head is re-signed at once and a body
 *     streams as any other (placeholders swapped in it);
 *   - a literal hash, or none (hashed by the signer): the body is needed,
 *     so the head is held and the body buffered (SIGV4_BODY_MAX, srt's 64
 *     MiB; a larger Content-Length is a 403 at once, a larger chunked body
 *     a 403 when it crosses the limit), checked against the client's hash, placeholders
 *     swapped, hashed again (a literal x-amz-content-sha256 rewritten),
 *     and sent with the re-signed head;
 *   - other STREAMING-* (chunk signatures), presigned URLs (X-Amz-Signature in
 *     the query with the placeholder key id) and SigV4a
 *     (AWS4-ECDSA-P256-SHA256): credentials.sigv4 streaming, presigned,
 *     sigv4a: "deny" (the default) is a 403 with the reason; "passthrough"
 *     sends them as signed (placeholders swapped as anywhere: the
 *     signature then fails at AWS, and no secret is used).
 * An AWS4 Authorization with another key id is not this step's: it goes as
 * it is (use require to refuse it).
 */
#define _GNU_SOURCE
#include "proxy/http_int.h"

#include "proxy/creds.h"
#include "proxy/sigv4.h"

#include <strings.h>

struct http_sigv4 {
    const struct proxy_aws *pair;
    char payload[SIGV4_HEX_LEN + 1]; /* the payload hash, or UNSIGNED-PAYLOAD */
    int form;                        /* the URI form the client's signature verified with */
    unsigned held : 1;               /* the head waits for the body */
    unsigned literal : 1;            /* x-amz-content-sha256 is a literal hash */
    unsigned too_big : 1;
    char *orig; /* held: the head as the client sent it */
    size_t orig_len;
    char *body; /* held: the body as the client sent it */
    size_t blen, bcap;
    /* the client's (placeholder) signature, and the real one that replaced
     * it once the head was re-signed: masked back in responses (rt-13) */
    char fake_sig[SIGV4_HEX_LEN + 1], real_sig[SIGV4_HEX_LEN + 1];
    unsigned resigned : 1;
};

/* The room of all the held bodies of the process at once (rt-13): each may
 * take SIGV4_BODY_MAX, and without a bound a sandbox that opens many
 * connections, each with a body it never finishes, makes the proxy hold
 * their sum. A body that would take the total over it is refused (503). */
#define SIGV4_HELD_TOTAL (4 * (size_t)SIGV4_BODY_MAX)
static size_t held_total; /* bcap of every held body, all workers */

static void drop_body(struct http_sigv4 *s)
{
    if (s->bcap > 0)
        __atomic_sub_fetch(&held_total, s->bcap, __ATOMIC_RELAXED);
    free(s->body);
    s->body = NULL;
    s->blen = s->bcap = 0;
}

void http_sigv4_free(struct http_sigv4 *s)
{
    if (s == NULL)
        return;
    free(s->orig);
    drop_body(s);
    free(s);
}

/* The value of header name in head (spaces around it left out). */
static const char *value_of(const char *head, size_t len, const char *name, size_t *vl)
{
    return proxy_head_value((char *)(uintptr_t)head, len, name, vl);
}

/* The pair whose key id placeholder is key (and whose key id goes to
 * this host), or NULL. */
static const struct proxy_aws *pair_of(const struct proxy_creds *t, uint64_t hosts, const char *key,
                                       size_t kl)
{
    for (size_t i = 0; i < t->naws; i++) {
        const struct proxy_aws *a = &t->aws[i];
        const struct proxy_cred *e;
        if (a->key < 0 || !(hosts & (UINT64_C(1) << a->key)))
            continue;
        e = &t->e[a->key];
        if (e->len == kl && memcmp(e->fake, key, kl) == 0)
            return a;
    }
    return NULL;
}

/* A presigned URL made with a pair's placeholder key id: its query has
 * X-Amz-Credential=KEYID%2F... (or KEYID/...). */
static int presigned(const struct proxy_creds *t, uint64_t hosts, const char *head, size_t len)
{
    const char *eol = memchr(head, '\n', len), *q;

    if (eol == NULL || (q = memchr(head, '?', (size_t)(eol - head))) == NULL)
        return 0;
    for (const char *p = q; p != NULL && p < eol;) {
        p = memmem(p, (size_t)(eol - p), "X-Amz-Credential=", 17);
        if (p == NULL)
            break;
        if (p[-1] == '?' || p[-1] == '&') {
            const char *v = p + 17, *e = v;
            while (e < eol && *e != '%' && *e != '/' && *e != '&' && *e != ' ')
                e++;
            if (pair_of(t, hosts, v, (size_t)(e - v)) != NULL)
                return 1;
        }
        p += 17;
    }
    return 0;
}

/* The client's one Authorization made with a pair's key id placeholder:
 * 1 with *a and *pair, 0 for none, -1 with *why. */
static int find_signed(const struct proxy_creds *t, uint64_t hosts, const char *head, size_t len,
                       struct sigv4_auth *a, const struct proxy_aws **pair, const char **why)
{
    const char *p = head, *end = head + len;
    int found = 0;

    for (;;) {
        struct sigv4_auth x;
        const struct proxy_aws *px;
        const char *bad = NULL, *eol;
        size_t vl;
        enum sigv4_alg alg;
        const char *v = value_of(p, (size_t)(end - p), "Authorization", &vl);
        if (v == NULL)
            break;
        eol = memchr(v, '\n', (size_t)(end - v));
        p = eol != NULL ? eol : end;
        alg = sigv4_parse_auth(v, vl, &x, &bad);
        if (alg == SIGV4_ALG_NONE)
            continue;
        if (alg == SIGV4_ALG_BAD) {
            /* ours only if it names a placeholder key id somewhere */
            for (size_t i = 0; i < t->naws; i++)
                if (t->aws[i].key >= 0 && (hosts & (UINT64_C(1) << t->aws[i].key)) &&
                    memmem(v, vl, t->e[t->aws[i].key].fake, t->e[t->aws[i].key].len) != NULL) {
                    *why = "a malformed AWS4 Authorization with a masked key id";
                    return -1;
                }
            continue;
        }
        px = pair_of(t, hosts, x.key, x.key_len);
        if (px == NULL)
            continue;
        if (alg == SIGV4_ALG_ECDSA) {
            if (t->sigv4_sigv4a)
                continue; /* passthrough */
            *why = "a SigV4a (AWS4-ECDSA-P256-SHA256) request with a masked key id: "
                   "credentials.sigv4.sigv4a is \"deny\"";
            return -1;
        }
        if (found) {
            *why = "two AWS4 Authorization headers with a masked key id";
            return -1;
        }
        found = 1;
        *a = x;
        *pair = px;
    }
    return found;
}

static int lhex64(const char *v, size_t n)
{
    if (n != SIGV4_HEX_LEN)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((v[i] >= '0' && v[i] <= '9') || (v[i] >= 'a' && v[i] <= 'f')))
            return 0;
    return 1;
}

/* The payload rule from x-amz-content-sha256: 0 with s->payload and
 * s->literal set (or *buffer when the body must be hashed), 1 for a
 * streaming request that passes through, -1 with *why. */
static int payload_rule(const struct proxy_creds *t, struct http_sigv4 *s, const char *head,
                        size_t len, int body, int *buffer, const char **why)
{
    size_t vl;
    const char *v = value_of(head, len, "x-amz-content-sha256", &vl);

    *buffer = 0;
    /* aws-chunked with a trailing checksum and no chunk signatures (what
     * S3 clients send for uploads with checksums): nothing in the body is
     * signed, so the head is re-signed as for UNSIGNED-PAYLOAD */
    if (v != NULL && vl == 34 && memcmp(v, "STREAMING-UNSIGNED-PAYLOAD-TRAILER", 34) == 0) {
        memcpy(s->payload, v, vl);
        s->payload[vl] = '\0';
        return 0;
    }
    if (v != NULL && vl >= 10 && strncmp(v, "STREAMING-", 10) == 0) {
        if (t->sigv4_streaming)
            return 1;
        *why = "a streaming SigV4 request (x-amz-content-sha256: STREAMING-...) with a masked key "
               "id: credentials.sigv4.streaming is \"deny\"";
        return -1;
    }
    if (v != NULL && vl == 16 && memcmp(v, "UNSIGNED-PAYLOAD", 16) == 0) {
        memcpy(s->payload, v, vl);
        s->payload[vl] = '\0';
        return 0;
    }
    if (v != NULL && !lhex64(v, vl)) {
        *why = "an x-amz-content-sha256 that is neither a SHA-256 in hex nor UNSIGNED-PAYLOAD";
        return -1;
    }
    s->literal = v != NULL;
    if (!body) {
        memcpy(s->payload, v != NULL ? v : sigv4_empty_hash, SIGV4_HEX_LEN);
        s->payload[SIGV4_HEX_LEN] = '\0';
        return 0;
    }
    *buffer = 1;
    return 0;
}

int http_sigv4_head(struct http_conn *c, const struct proxy_creds *t, uint64_t hosts,
                    struct http_sigv4 **out, const char **why)
{
    struct http_work *w = c->w;
    const char *head = w->in, *e;
    struct sigv4_auth a;
    const struct proxy_aws *pair = NULL;
    struct http_sigv4 *s;
    size_t len, vl;
    int rc, buffer;

    *out = NULL;
    if (t->naws == 0)
        return 0;
    e = memmem(w->in, w->in_len, "\r\n\r\n", 4);
    if (e == NULL)
        return 0; /* cannot happen: the head is complete */
    len = (size_t)(e + 4 - head);
    if (presigned(t, hosts, head, len)) {
        if (t->sigv4_presigned)
            return 0;
        *why = "a presigned SigV4 URL made with a masked key id: credentials.sigv4.presigned is "
               "\"deny\"";
        return -1;
    }
    rc = find_signed(t, hosts, head, len, &a, &pair, why);
    if (rc <= 0)
        return rc;
    if (pair->secret < 0) {
        *why = "an AWS request signed with a masked key id whose pair's secret variable is not "
               "set: nothing to re-sign it with";
        return -1;
    }
    s = calloc(1, sizeof(*s));
    if (s == NULL)
        return UV_ENOMEM;
    s->pair = pair;
    memcpy(s->fake_sig, a.sig, SIGV4_HEX_LEN);
    rc = payload_rule(t, s, head, len, w->req_body != HTTP_BODY_NONE, &buffer, why);
    if (rc != 0) {
        free(s);
        return rc > 0 ? 0 : -1;
    }
    if (buffer) {
        const char *cl = value_of(w->out, w->out_len, "Content-Length", &vl);
        if (cl != NULL && (vl > 9 || strtoull(cl, NULL, 10) > SIGV4_BODY_MAX)) {
            free(s);
            *why = "an AWS request signed with a masked key id whose body is over 64 MiB: sluice "
                   "buffers at most that to hash it";
            return -1;
        }
        s->orig = malloc(len);
        if (s->orig == NULL) {
            free(s);
            return UV_ENOMEM;
        }
        memcpy(s->orig, head, len);
        s->orig_len = len;
        s->held = 1;
        *out = s;
        return 0;
    }
    s->form =
        sigv4_verify(head, len, &a, s->payload, t->e[pair->secret].fake, t->e[pair->secret].len);
    if (s->form < 0) {
        free(s);
        *why = "its AWS signature does not verify with the masked secret's placeholder: it was not "
               "signed in the sandbox with the pair, so sluice does not sign it";
        return -1;
    }
    *out = s;
    return 0;
}

/* w->out re-signed with the real secret. 0, or -1 with *why. */
static int resign_out(struct http_conn *c, const struct proxy_creds *t, struct http_sigv4 *s,
                      const char **why)
{
    struct http_work *w = c->w;
    const struct proxy_cred *sec = &t->e[s->pair->secret];
    char *nh = NULL;
    size_t nl = 0;
    int rc = sigv4_resign(w->out, w->out_len, (unsigned)s->form, s->payload, sec->real, sec->len,
                          &nh, &nl);

    if (rc < 0) {
        *why = rc == UV_ENOMEM ? "out of memory"
               : rc == UV_ENOENT
                   ? "a header the AWS signature needs (host, x-amz-date) is not sent upstream"
                   : "the request head cannot be re-signed";
        return -1;
    }
    free(w->out);
    w->out = nh;
    w->out_len = nl;
    /* the real signature, to be masked in the response (rt-13) */
    {
        size_t vl;
        const char *v = value_of(nh, nl, "Authorization", &vl);
        const char *sg = v != NULL ? memmem(v, vl, "Signature=", 10) : NULL;
        if (sg != NULL && (size_t)(v + vl - sg) >= 10 + SIGV4_HEX_LEN) {
            memcpy(s->real_sig, sg + 10, SIGV4_HEX_LEN);
            s->resigned = 1;
        }
    }
    return 0;
}

int http_sigv4_sigs(const struct http_sigv4 *s, const char **real, const char **fake)
{
    if (s == NULL || !s->resigned)
        return 0;
    *real = s->real_sig;
    *fake = s->fake_sig;
    return 1;
}

int http_sigv4_sign(struct http_conn *c, const struct proxy_creds *t, struct http_sigv4 *s,
                    const char **why)
{
    if (s == NULL || s->held)
        return 0;
    return resign_out(c, t, s, why);
}

int http_sigv4_held(const struct http_sigv4 *s)
{
    return s != NULL && s->held;
}

int http_sigv4_body(struct http_sigv4 *s, const char *at, size_t len)
{
    if (s->too_big)
        return -1;
    if (len > SIGV4_BODY_MAX - s->blen) {
        s->too_big = 1;
        drop_body(s);
        return -1;
    }
    if (s->blen + len > s->bcap) {
        size_t cap = s->bcap > 0 ? s->bcap : 65536;
        char *nb;
        while (cap < s->blen + len)
            cap *= 2;
        if (cap > SIGV4_BODY_MAX)
            cap = SIGV4_BODY_MAX;
        if (__atomic_add_fetch(&held_total, cap - s->bcap, __ATOMIC_RELAXED) > SIGV4_HELD_TOTAL) {
            __atomic_sub_fetch(&held_total, cap - s->bcap, __ATOMIC_RELAXED);
            s->too_big = 1;
            drop_body(s);
            return UV_EBUSY;
        }
        nb = realloc(s->body, cap);
        if (nb == NULL) {
            __atomic_sub_fetch(&held_total, cap - s->bcap, __ATOMIC_RELAXED);
            return UV_ENOMEM;
        }
        s->body = nb;
        s->bcap = cap;
    }
    memcpy(s->body + s->blen, at, len);
    s->blen += len;
    return 0;
}

int http_sigv4_check(const struct proxy_creds *t, struct http_sigv4 *s, char **body, size_t *blen,
                     const char **why)
{
    const struct proxy_cred *sec = &t->e[s->pair->secret];
    struct sigv4_auth a;
    const struct proxy_aws *pair = NULL;
    char h[SIGV4_HEX_LEN + 1];
    size_t vl;
    const char *v;

    if (s->too_big) {
        *why = "an AWS request signed with a masked key id whose body is over 64 MiB: sluice "
               "buffers at most that to hash it";
        return -1;
    }
    if (sigv4_hash_hex(s->body, s->blen, h) < 0) {
        *why = "the body cannot be hashed";
        return -1;
    }
    v = value_of(s->orig, s->orig_len, "x-amz-content-sha256", &vl);
    if (s->literal && (v == NULL || vl != SIGV4_HEX_LEN || memcmp(v, h, vl) != 0)) {
        *why = "x-amz-content-sha256 is not the hash of the body sent";
        return -1;
    }
    memcpy(s->payload, h, sizeof(h));
    if (find_signed(t, UINT64_MAX, s->orig, s->orig_len, &a, &pair, why) <= 0 || pair != s->pair) {
        *why = "internal: the held head lost its signature";
        return -1;
    }
    s->form = sigv4_verify(s->orig, s->orig_len, &a, s->payload, sec->fake, sec->len);
    if (s->form < 0) {
        *why = "its AWS signature does not verify with the masked secret's placeholder: it was not "
               "signed in the sandbox with the pair, so sluice does not sign it";
        return -1;
    }
    *body = s->body;
    *blen = s->blen;
    return 0;
}

int http_sigv4_release(struct http_conn *c, const struct proxy_creds *t, struct http_sigv4 *s,
                       const char **why)
{
    struct http_work *w = c->w;
    size_t vl;
    char *v;
    int rc;

    if (sigv4_hash_hex(s->body, s->blen, s->payload) < 0) {
        *why = "the body cannot be hashed";
        return -1;
    }
    v = proxy_head_value(w->out, w->out_len, "x-amz-content-sha256", &vl);
    if (s->literal && v != NULL && vl == SIGV4_HEX_LEN)
        memcpy(v, s->payload, SIGV4_HEX_LEN); /* the body changed: its hash with it */
    if (resign_out(c, t, s, why) < 0)
        return -1;
    rc = http_send_head(c);
    if (rc == 0 && s->blen > 0)
        rc = http_send_body(c, w->up, w->req_body == HTTP_BODY_CHUNKED, s->body, s->blen);
    s->held = 0;
    return rc < 0 ? UV_EPIPE : 0;
}
