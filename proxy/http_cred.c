/* proxy/http_cred.c - credential substitution in the HTTP front end (issue
 * 24): a stage between the client and the upstream of every forwarded
 * request (plain HTTP, and each request inside a terminated tunnel).
 *
 * The host an entry's real value may go to is the request's judged host
 * (c->host: the CONNECT target inside a terminated tunnel, the absolute-
 * form authority otherwise; never a Host header alone), by the policy in
 * use (policy_cred_injects). For such a host, and only inside a terminated
 * tunnel or with credentials.allowPlaintextInject, the placeholder is
 * replaced in the head as it goes upstream (the request line's path and
 * query, every header value, and the decoded credentials of an
 * "Authorization: Basic" header, re-encoded) and in the streamed body
 * (unless it has a Content-Encoding). The head is rewritten in place: a
 * placeholder has its value's length, so nothing moves and Content-Length
 * stays right. A placeholder for an entry's host on a plain-HTTP request
 * without allowPlaintextInject is refused (fail closed: never sent); one
 * for another host is left as it is, and named in the decision record
 * (secret_placeholder=NAME) and counted. Responses from an entry's hosts
 * have its real value replaced by the placeholder (head and streamed body),
 * so an origin that echoes a request does not hand the value back; such a
 * request goes without Accept-Encoding, and an encoded response, which
 * could not be masked, is refused (502) (rt-12). An Upgrade (WebSocket) to an entry's host is
 * refused: the frames after a 101 are relayed unread. With require, a request to an entry's hosts
 * must carry its placeholder alone in the required header. What the verdict and the log see
 * (w->rq_buf, fc.url) is the request as the client sent it: placeholders, never a real value.
 * A request signed with an awsPairs key id's placeholder is re-signed with the real secret
 * (http_sigv4.c); that pair's secret is never swapped into a request.
 */
#define _GNU_SOURCE
#include "proxy/http_int.h"

#include "proxy/creds.h"
#include "proxy/gw.h"
#include "proxy/service.h"
#include "proxy/sigv4.h"

#include <strings.h>

struct http_cred {
    uint64_t allow;  /* entries replaced in this request */
    uint64_t refuse; /* entries whose placeholder here is refused (fail closed) */
    uint64_t hosts;  /* entries whose hosts include this one (responses masked) */
    uint64_t need;   /* of those, entries with require: their placeholder alone in a header */
    uint64_t stale;  /* of those, refreshable entries whose value expired: refused (503) */
    unsigned gen[PROXY_CREDS_MAX]; /* a refreshable entry's value count at the start */
    unsigned req_on : 1, resp_on : 1;
    unsigned cut : 1;        /* a refused placeholder in the body: the connection ends */
    unsigned held_subst : 1; /* SigV4 held body: placeholders swapped when it is whole */
    unsigned busy : 1;       /* cut: no room for a held body (503, not 403) */
    struct http_sigv4 *sv;   /* AWS SigV4 re-signing (http_sigv4.c), or NULL */
    /* the real signature of a re-signed request masked back to the
     * client's in the response (rt-13): a set of that one pair, and its
     * stream after resp's in the body */
    struct subst_set *sigset;
    struct subst_stream sig;
    unsigned sig_on : 1;
    const char *why; /* cut: why, for a 403 when nothing was answered yet */
    struct subst_stream req, resp;
    struct http_gw_req gw;        /* credentials.headers of this request (http_gw.c) */
    const struct subst_set *rset; /* what responses are masked with, or NULL: not masked */
    uint64_t rbits;
    uint8_t *scratch; /* request body output (sent at once) */
    size_t scap;
    uint8_t *arena; /* response body output, kept until http_out_flush */
    size_t alen, acap;
};

static struct proxy_creds *creds_of(const struct http_conn *c)
{
    const struct proxy_service *svc = c->fc.f->data;

    return svc != NULL && svc->creds != NULL && svc->creds->n > 0 ? svc->creds : NULL;
}

void http_cred_free(struct http_work *w)
{
    struct http_cred *k = w->cred;

    if (k == NULL)
        return;
    if (k->req_on)
        subst_stream_free(&k->req);
    if (k->resp_on)
        subst_stream_free(&k->resp);
    if (k->sig_on)
        subst_stream_free(&k->sig);
    free(k->sigset);
    http_sigv4_free(k->sv);
    http_gw_req_free(&k->gw);
    free(k->scratch);
    free(k->arena);
    free(k);
    w->cred = NULL;
}

/* ------------------------------------------------------------------------ */
/* Heads                                                                     */

/* The names of the entries in bits, "A,B", into the log record. */
static void note_names(struct http_conn *c, const struct proxy_creds *t, uint64_t bits)
{
    char buf[512];
    size_t o = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < t->n && o < sizeof(buf); i++)
        if (bits & (UINT64_C(1) << i)) {
            int w = snprintf(buf + o, sizeof(buf) - o, "%s%s", o > 0 ? "," : "", t->e[i].name);
            if (w < 0)
                break;
            o += (size_t)w;
        }
    frontend_conn_set_text(&c->fc.secret, buf);
}

static void count(struct proxy_creds *t, uint64_t *ctr, uint64_t bits)
{
    for (size_t i = 0; i < t->n; i++)
        if (bits & (UINT64_C(1) << i))
            __atomic_add_fetch(&ctr[i], 1, __ATOMIC_RELAXED);
}

/* Which entries go to this request's host, and how. */
static void judge(const struct http_conn *c, const struct proxy_creds *t, struct http_cred *k)
{
    const struct policy *pol = egress_env_policy(c->fc.f->egress);
    int transport = c->terminated || t->plaintext;
    uint64_t now = proxy_gw_now();

    for (size_t i = 0; i < t->n; i++) {
        int idx = policy_cred_find(pol, t->e[i].file, t->e[i].name);
        if (idx < 0 || !policy_cred_injects(pol, (size_t)idx, &c->host, c->fc.port))
            continue;
        k->hosts |= UINT64_C(1) << i;
        k->gen[i] = t->e[i].gen;
        if (t->e[i].refresh && now >= t->e[i].expires) {
            k->stale |= UINT64_C(1) << i; /* never sent with the placeholder: refused */
            if (policy_cred_require(pol, (size_t)idx) != NULL)
                k->need |= UINT64_C(1) << i;
            continue;
        }
        if (t->e[i].aws_role == 'S')
            continue; /* an AWS secret key is only signed with (http_sigv4.c), never sent */
        if (policy_cred_require(pol, (size_t)idx) != NULL)
            k->need |= UINT64_C(1) << i;
        if (transport)
            k->allow |= UINT64_C(1) << i;
        else
            k->refuse |= UINT64_C(1) << i;
    }
}

/* A Content-Encoding other than identity in any of the head's
 * Content-Encoding lines (rt-12: not only the first). */
static int has_encoding(char *head, size_t len)
{
    char *p = head, *end = head + len;

    for (;;) {
        size_t vl;
        char *v = proxy_head_value(p, (size_t)(end - p), "Content-Encoding", &vl);
        char *eol;
        if (v == NULL)
            return 0;
        if (vl > 0 && !(vl == 8 && strncasecmp(v, "identity", 8) == 0))
            return 1;
        eol = memchr(v, '\n', (size_t)(end - v));
        if (eol == NULL)
            return 0;
        p = eol; /* proxy_head_value skips its first line */
    }
}

/* require (issue 24 item 4): every entry in k->need must have its
 * placeholder alone in its header (before anything is replaced), else the
 * request is refused: the sandbox may not use a credential of its own with
 * that API. 0, or -1 after the 403. */
static int required(struct http_conn *c, struct proxy_creds *t, struct http_cred *k)
{
    const struct policy *pol = egress_env_policy(c->fc.f->egress);
    struct http_work *w = c->w;

    for (size_t i = 0; i < t->n; i++) {
        const char *hdr;
        char why[400];
        int idx;
        if (!(k->need & (UINT64_C(1) << i)))
            continue;
        idx = policy_cred_find(pol, t->e[i].file, t->e[i].name);
        hdr = idx >= 0 ? policy_cred_require(pol, (size_t)idx) : NULL;
        if (hdr == NULL || proxy_creds_required(t, i, hdr, w->out, w->out_len))
            continue;
        note_names(c, t, UINT64_C(1) << i);
        __atomic_add_fetch(&t->refused, 1, __ATOMIC_RELAXED);
        snprintf(why, sizeof(why),
                 "credential %s has require: a request to its hosts must carry its placeholder, "
                 "and nothing else, in the %s header; the request was not sent",
                 t->e[i].name, hdr);
        http_refuse(c, 403, why, 1, "credential required");
        return -1;
    }
    return 0;
}

/* The entries in bits that are an awsPairs key id or token (what a
 * SigV4 refusal names: the secret's placeholder is never in a request). */
static uint64_t aws_sent(const struct proxy_creds *t, uint64_t bits)
{
    uint64_t out = 0;

    for (size_t i = 0; i < t->n; i++)
        if ((bits & (UINT64_C(1) << i)) && (t->e[i].aws_role == 'K' || t->e[i].aws_role == 'T'))
            out |= UINT64_C(1) << i;
    return out;
}

/* rc < 0 from a SigV4 step: a 403 naming the pair's key id (or the
 * connection ends when memory ran out). -1, or 0 for rc >= 0. */
static int sigv4_refused(struct http_conn *c, struct proxy_creds *t, struct http_cred *k, int rc,
                         const char *why)
{
    char msg[400];

    if (rc >= 0)
        return 0;
    if (rc == UV_ENOMEM || why == NULL) {
        http_conn_close(c, "out of memory");
        return -1;
    }
    note_names(c, t, aws_sent(t, k->hosts));
    __atomic_add_fetch(&t->refused, 1, __ATOMIC_RELAXED);
    snprintf(msg, sizeof(msg), "credentials.awsPairs: %s; the request was not sent", why);
    http_refuse(c, 403, msg, 1, "credential refused");
    return -1;
}

static int sigv4_head(struct http_conn *c, struct proxy_creds *t, struct http_cred *k)
{
    const char *why = NULL;
    int rc = http_sigv4_head(c, t, k->hosts, &k->sv, &why);

    return sigv4_refused(c, t, k, rc, why);
}

/* A held SigV4 head goes upstream only with its body, so the origin's
 * 100 Continue cannot come before the body: a client that sent Expect:
 * 100-continue would wait out its own timeout for it, or for ever (rt-13).
 * sluice answers 100 Continue itself and sends no Expect upstream (the body
 * goes with the head; a signed Expect leaves SignedHeaders when the head is
 * re-signed, as any header the proxy removes). 0, or -1 after the
 * connection was closed. */
static int held_continue(struct http_conn *c)
{
    static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
    struct http_work *w = c->w;
    size_t vl;
    const char *v = proxy_head_value(w->out, w->out_len, "Expect", &vl);
    int want;
    uv_buf_t b;

    if (v == NULL)
        return 0;
    want = w->client_11 && vl == 12 && strncasecmp(v, "100-continue", 12) == 0;
    w->out_len = proxy_head_drop(w->out, w->out_len, "Expect");
    if (!want)
        return 0;
    b = uv_buf_init((char *)(uintptr_t)cont, sizeof(cont) - 1);
    if (http_client_send(c, &b, 1) < 0) {
        http_conn_close(c, "client write failed");
        return -1;
    }
    c->bytes_down += sizeof(cont) - 1;
    return 0;
}

/* The head's placeholders swapped (its length may change: a refreshed
 * value); a placeholder of an entry whose value expired refuses the
 * request (503, as a gateway entry without a value). 0, or -1 after the
 * refusal. */
static int head_subst(struct http_conn *c, struct proxy_creds *t, struct http_cred *k,
                      uint64_t *rep, uint64_t *blk)
{
    struct http_work *w = c->w;
    char why[400];
    int rc = proxy_creds_head_grow(t, k->allow, &w->out, &w->out_len, rep, blk);

    if (rc == -ENOMEM) {
        http_conn_close(c, "out of memory");
        return -1;
    }
    if (rc < 0) {
        __atomic_add_fetch(&t->refused, 1, __ATOMIC_RELAXED);
        http_refuse(c, 431, "with the credentials' values in it the request head would pass "
                            "1 MiB; the request was not sent", 1, "credential refused");
        return -1;
    }
    for (size_t i = 0; i < t->n; i++) {
        if (!(*blk & k->stale & (UINT64_C(1) << i)))
            continue;
        note_names(c, t, UINT64_C(1) << i);
        __atomic_add_fetch(&t->refused, 1, __ATOMIC_RELAXED);
        snprintf(why, sizeof(why),
                 "credential %s has no value: its lifetime (ttl) ran out and its helper has not "
                 "given a new one; the request was not sent",
                 t->e[i].name);
        http_refuse(c, 503, why, 1, "credential refused");
        return -1;
    }
    return 0;
}

int http_cred_request(struct http_conn *c)
{
    struct http_work *w = c->w;
    struct proxy_creds *t = creds_of(c);
    struct proxy_gw *g = http_gw_of(c);
    struct http_cred *k;
    uint64_t rep, blk = 0;
    const char *swhy = NULL;

    http_cred_free(w);
    if ((t == NULL && g == NULL) || w->is_connect || w->out == NULL)
        return 0;
    k = calloc(1, sizeof(*k));
    if (k == NULL) {
        http_conn_close(c, "out of memory");
        return -1;
    }
    w->cred = k;
    if (g != NULL) {
        int rc = http_gw_request(c, g, &k->gw);
        if (rc < 0)
            return -1;
        if (rc > 0) {
            k->rset = &k->gw.set;
            k->rbits = k->gw.set.n >= 64 ? UINT64_MAX : (UINT64_C(1) << k->gw.set.n) - 1;
        }
        if (t == NULL)
            return 0;
    }
    judge(c, t, k);
    if (k->hosts != 0) {
        k->rset = &t->to_fake;
        k->rbits = proxy_creds_fake_bits(t, k->hosts);
    }
    if (w->upgrade && k->hosts != 0) {
        /* after a 101 the bytes are relayed as they are: placeholders in
         * frames would go unswapped, and a value the origin echoes in a
         * frame would reach the sandbox unmasked */
        note_names(c, t, k->hosts);
        __atomic_add_fetch(&t->refused, 1, __ATOMIC_RELAXED);
        http_refuse(c, 403,
                    "an Upgrade (WebSocket) to a host a masked credential is sent to: sluice does "
                    "not read the frames after it (placeholders there would not be swapped, nor "
                    "an echoed value masked); the request was not sent",
                    1, "credential refused");
        return -1;
    }
    if (k->need != 0 && required(c, t, k) < 0)
        return -1;
    if (k->hosts != 0 && sigv4_head(c, t, k) < 0)
        return -1;
    /* rt-12: the response from a credential host is masked only when it is
     * not encoded, so such a request asks for no encoding (an origin that
     * encodes anyway is refused: http_cred_response_head) */
    if (k->hosts != 0)
        w->out_len = proxy_head_drop(w->out, w->out_len, "Accept-Encoding");
    if (head_subst(c, t, k, &rep, &blk) < 0)
        return -1;
    if (blk & k->refuse) {
        char why[300];
        note_names(c, t, blk & k->refuse);
        __atomic_add_fetch(&t->refused, 1, __ATOMIC_RELAXED);
        snprintf(why, sizeof(why),
                 "a credential placeholder in a plain-HTTP request to its host: sluice swaps it "
                 "only inside terminated HTTPS unless credentials.allowPlaintextInject; the "
                 "request was not sent");
        http_refuse(c, 403, why, 1, "credential refused");
        return -1;
    }
    if (blk != 0) {
        note_names(c, t, blk);
        count(t, t->elsewhere, blk);
    }
    count(t, t->injected, rep);
    if (k->sv != NULL) {
        int rc = http_sigv4_sign(c, t, k->sv, &swhy);
        if (sigv4_refused(c, t, k, rc, swhy) < 0)
            return -1;
    }
    if (http_sigv4_held(k->sv)) {
        k->held_subst = !has_encoding(w->out, w->out_len);
        return held_continue(c);
    }
    if (w->req_body != HTTP_BODY_NONE && !has_encoding(w->out, w->out_len)) {
        if (subst_stream_init(&k->req, &t->to_real, k->allow) < 0) {
            http_conn_close(c, "out of memory");
            return -1;
        }
        k->req_on = 1;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Request bodies                                                            */

static int send_up(struct http_conn *c, const uint8_t *b, size_t n)
{
    struct http_work *w = c->w;

    if (n == 0)
        return 0; /* never a chunk of 0: that would end the body */
    return http_send_body(c, w->up, w->req_body == HTTP_BODY_CHUNKED, (const char *)b, n);
}

/* One piece of a request body from the scanner: sent, unless a refused
 * placeholder is in it (plain HTTP, an expired value), or it is a
 * refreshed value of another length in a body framed by Content-Length
 * (its length would be wrong): then the request is cut before it. */
struct up_ctx {
    struct http_conn *c;
    struct http_cred *k;
};

static int up_emit(void *arg, const uint8_t *b, size_t n, int pair)
{
    struct up_ctx *u = arg;
    struct http_cred *k = u->k;
    const char *why = NULL;

    if (k->req.blocked & k->refuse)
        why = "a credential placeholder in a plain-HTTP request body to its host "
              "(credentials.allowPlaintextInject is off): the request was cut before it";
    else if (k->req.blocked & k->stale)
        why = "a credential placeholder in a request body while its value is expired (its "
              "helper has not given a new one): the request was cut before it";
    else if (pair >= 0 && u->c->w->req_body != HTTP_BODY_CHUNKED)
        why = "a credential placeholder in a request body framed by Content-Length, while the "
              "credential's refreshed value has another length than its placeholder (the body's "
              "length would be wrong): the request was cut before it; send the value in a "
              "header, or the body chunked";
    if (why != NULL) {
        http_set_reason(u->c, why);
        k->cut = 1;
        return UV_ECANCELED;
    }
    return send_up(u->c, b, n) < 0 ? UV_EPIPE : 0;
}

/* After the stream found placeholders: counted and named (a cut one was
 * refused by up_emit). */
static void body_found(struct http_conn *c, struct proxy_creds *t, struct http_cred *k,
                       uint64_t seen_blk, uint64_t seen_rep)
{
    uint64_t nb = k->req.blocked & ~seen_blk, nr = k->req.replaced & ~seen_rep;

    count(t, t->injected, nr);
    if (nb == 0)
        return;
    note_names(c, t, k->req.blocked);
    if (k->cut) {
        __atomic_add_fetch(&t->refused, 1, __ATOMIC_RELAXED);
        return;
    }
    count(t, t->elsewhere, nb);
}

int http_cred_body_up(struct http_conn *c, const char *at, size_t len)
{
    struct http_work *w = c->w;
    struct http_cred *k = w->cred;
    struct proxy_creds *t = creds_of(c);
    struct up_ctx u = {c, k};
    uint64_t blk, rep;
    size_t need;
    int rc;

    if (k != NULL && t != NULL && http_sigv4_held(k->sv)) {
        rc = k->cut ? 0 : http_sigv4_body(k->sv, at, len);
        if (rc == UV_ENOMEM)
            return rc;
        if (rc < 0) {
            k->cut = 1;
            k->busy = rc == UV_EBUSY;
            k->why = k->busy ? "credentials.awsPairs: sluice holds the bodies of AWS requests "
                               "signed with a masked key id to hash them, and the bodies held "
                               "now take all the room it allows (256 MiB): try again later; "
                               "the request was not sent"
                             : "credentials.awsPairs: an AWS request signed with a masked key id "
                               "whose body is over 64 MiB: sluice buffers at most that to hash "
                               "it; the request was not sent";
            http_set_reason(c, k->why);
        }
        return 1;
    }
    if (k == NULL || !k->req_on || t == NULL)
        return 0;
    if (k->cut)
        return 1;
    need = k->req.ncarry + len;
    if (need > k->scap) {
        uint8_t *nb = realloc(k->scratch, need);
        if (nb == NULL)
            return UV_ENOMEM;
        k->scratch = nb;
        k->scap = need;
    }
    blk = k->req.blocked;
    rep = k->req.replaced;
    rc = subst_feed_emit(&k->req, (const uint8_t *)at, len, k->scratch, up_emit, &u);
    body_found(c, t, k, blk, rep);
    return rc < 0 && !k->cut ? rc : 1;
}

/* The held body of a SigV4 request: checked against the client's
 * signature, placeholders swapped, then sent after the re-signed head. */
static int sigv4_release(struct http_conn *c, struct proxy_creds *t, struct http_cred *k)
{
    const char *why = NULL;
    char *body;
    size_t blen;
    uint64_t rep = 0, blk = 0;

    if (k->cut)
        return 0;
    if (http_sigv4_check(t, k->sv, &body, &blen, &why) < 0) {
        static _Thread_local char msg[400];
        snprintf(msg, sizeof(msg), "credentials.awsPairs: %s; the request was not sent", why);
        note_names(c, t, aws_sent(t, k->hosts));
        __atomic_add_fetch(&t->refused, 1, __ATOMIC_RELAXED);
        k->cut = 1;
        k->why = msg;
        http_set_reason(c, msg);
        return 0;
    }
    if (k->held_subst)
        rep = subst_buffer(&t->to_real, k->allow, (uint8_t *)body, blen, &blk);
    count(t, t->injected, rep);
    if (blk != 0) {
        note_names(c, t, blk);
        if (blk & (k->refuse | k->stale | k->allow)) { /* allowed and left: another length */
            __atomic_add_fetch(&t->refused, 1, __ATOMIC_RELAXED);
            k->cut = 1;
            k->why = blk & k->refuse
                         ? "a credential placeholder in a plain-HTTP request body to its host "
                           "(credentials.allowPlaintextInject is off); the request was not sent"
                         : "a credential placeholder in a signed body whose value is expired or "
                           "has another length than its placeholder; the request was not sent";
            http_set_reason(c, k->why);
            return 0;
        }
        count(t, t->elsewhere, blk);
    }
    if (http_sigv4_release(c, t, k->sv, &why) < 0) {
        if (why != NULL) {
            k->cut = 1;
            k->why = why;
            http_set_reason(c, why);
            return 0;
        }
        return UV_EPIPE;
    }
    return 0;
}

int http_cred_body_up_end(struct http_conn *c)
{
    struct http_cred *k = c->w->cred;
    struct proxy_creds *t = creds_of(c);
    struct up_ctx u = {c, k};
    uint64_t blk, rep;
    int rc;

    if (k != NULL && t != NULL && http_sigv4_held(k->sv))
        return sigv4_release(c, t, k);
    if (k == NULL || !k->req_on || t == NULL || k->req.ncarry == 0 || k->cut)
        return 0;
    if (k->req.ncarry > k->scap)
        return UV_EINVAL; /* cannot happen: the carry came from a feed */
    blk = k->req.blocked;
    rep = k->req.replaced;
    rc = subst_finish_emit(&k->req, k->scratch, up_emit, &u);
    body_found(c, t, k, blk, rep);
    return rc < 0 && !k->cut ? rc : 0; /* cut: http_cred_cut */
}

int http_cred_cut(const struct http_conn *c)
{
    return c->w != NULL && c->w->cred != NULL && c->w->cred->cut;
}

const char *http_cred_refusal(const struct http_conn *c)
{
    return http_cred_cut(c) ? c->w->cred->why : NULL;
}

int http_cred_refusal_status(const struct http_conn *c)
{
    return http_cred_cut(c) && c->w->cred->busy ? 503 : 403;
}

int http_cred_held(const struct http_conn *c)
{
    return c->w != NULL && c->w->cred != NULL && http_sigv4_held(c->w->cred->sv);
}

/* ------------------------------------------------------------------------ */
/* Responses                                                                 */

/* The set that masks the real signature of a re-signed request back to
 * the client's (rt-13), made at the first response head; NULL when the
 * request was not re-signed (or memory ran out: then the head and body
 * are only masked for the real values). */
static const struct subst_set *sig_set(struct http_cred *k)
{
    struct subst_pair p = {0}; /* tolen 0: the same length */
    const char *real, *fake;

    if (k->sigset != NULL || !http_sigv4_sigs(k->sv, &real, &fake))
        return k->sigset;
    p.from = (const uint8_t *)real;
    p.to = (const uint8_t *)fake;
    p.len = SIGV4_HEX_LEN;
    k->sigset = malloc(sizeof(*k->sigset));
    if (k->sigset != NULL && subst_set_init(k->sigset, &p, 1) < 0) {
        free(k->sigset);
        k->sigset = NULL;
    }
    return k->sigset;
}

int http_cred_response_head(struct http_conn *c, char *head, size_t len)
{
    struct http_cred *k = c->w->cred;
    const struct subst_set *ss;

    if (k == NULL || k->rset == NULL)
        return 0;
    (void)subst_buffer(k->rset, k->rbits, (uint8_t *)head, len, NULL);
    ss = sig_set(k);
    if (ss != NULL)
        (void)subst_buffer(ss, 1, (uint8_t *)head, len, NULL);
    if (k->resp_on) {
        subst_stream_free(&k->resp);
        k->resp_on = 0;
    }
    if (k->sig_on) {
        subst_stream_free(&k->sig);
        k->sig_on = 0;
    }
    /* rt-12: an encoded body (gzip...) cannot be masked: it would hand an
     * echoed real value back, so the caller refuses it (fail closed) when
     * the response has a body; the head is masked either way */
    if (has_encoding(head, len))
        return -1;
    if (subst_stream_init(&k->resp, k->rset, k->rbits) == 0)
        k->resp_on = 1;
    if (k->resp_on && ss != NULL && subst_stream_init(&k->sig, ss, 1) == 0)
        k->sig_on = 1;
    return 0;
}

int http_cred_masked(const struct http_conn *c)
{
    return c->w != NULL && c->w->cred != NULL && c->w->cred->rset != NULL;
}

void http_cred_flushed(struct http_work *w)
{
    if (w->cred != NULL)
        w->cred->alen = 0;
}

/* n bytes of room in the arena: what was gathered is flushed first when it
 * is full (its pieces point into it). 0 or UV_E*. */
static int arena_room(struct http_conn *c, struct http_cred *k, size_t n)
{
    struct http_work *w = c->w;
    int rc;

    if (w->nob + 3 > HTTP_OUT_BUFS || w->nhdr + 1 > HTTP_OUT_HDRS || k->alen + n > k->acap) {
        rc = http_out_flush(c); /* resets alen */
        if (rc < 0)
            return rc;
    }
    if (k->alen + n > k->acap) {
        size_t cap = k->alen + n > 2 * k->acap ? k->alen + n : 2 * k->acap;
        uint8_t *na = realloc(k->arena, cap); /* nothing points into it now */
        if (na == NULL)
            return UV_ENOMEM;
        k->arena = na;
        k->acap = cap;
    }
    return 0;
}

/* Sends the n bytes at skip bytes into the arena's free part; the arena
 * keeps skip + n bytes. */
static int send_down(struct http_conn *c, struct http_cred *k, size_t skip, size_t n)
{
    int rc;

    if (n == 0) {
        k->alen += skip;
        return 0;
    }
    rc = http_send_body(c, NULL, c->w->chunk_out, (const char *)k->arena + k->alen + skip, n);
    k->alen += skip + n;
    return rc;
}

/* The n bytes resp wrote at the arena's free part through the signature
 * stream when there is one (written after them): sent. */
static int sig_down(struct http_conn *c, struct http_cred *k, size_t n, int end)
{
    uint8_t *mid = k->arena + k->alen;
    size_t m;

    if (!k->sig_on)
        return send_down(c, k, 0, n);
    m = subst_feed(&k->sig, mid, n, mid + n);
    if (end)
        m += subst_finish(&k->sig, mid + n + m);
    return send_down(c, k, n, m);
}

/* A response whose request started before the value that is now old: the
 * value it could echo is masked no more (two refreshes since), so it is
 * cut (fail closed). 1 when so. */
static int outlived(struct http_conn *c, const struct http_cred *k)
{
    const struct proxy_creds *t = creds_of(c);

    for (size_t i = 0; t != NULL && i < t->n; i++)
        if ((k->hosts & (UINT64_C(1) << i)) && t->e[i].refresh && t->e[i].gen - k->gen[i] >= 2) {
            http_set_reason(c, "the response outlived two refreshes of a credential's value: "
                               "the value its request could have sent is masked no more; cut");
            return 1;
        }
    return 0;
}

int http_cred_outlived(struct http_conn *c)
{
    return c->w != NULL && c->w->cred != NULL && c->w->cred->rset != NULL &&
           outlived(c, c->w->cred);
}

int http_cred_body_down(struct http_conn *c, const char *at, size_t len)
{
    struct http_cred *k = c->w->cred;
    size_t need;
    int rc;

    if (k == NULL || !k->resp_on)
        return 0;
    if (outlived(c, k))
        return UV_ECANCELED;
    need = k->resp.ncarry + len;
    if (k->sig_on)
        need += k->sig.ncarry + k->resp.ncarry + len;
    rc = arena_room(c, k, need);
    if (rc < 0)
        return rc;
    rc = sig_down(c, k, subst_feed(&k->resp, (const uint8_t *)at, len, k->arena + k->alen), 0);
    return rc < 0 ? rc : 1;
}

int http_cred_body_down_end(struct http_conn *c)
{
    struct http_cred *k = c->w->cred;
    size_t need;
    int rc;

    if (k == NULL || !k->resp_on || (k->resp.ncarry == 0 && !(k->sig_on && k->sig.ncarry > 0)))
        return 0;
    need = k->resp.ncarry;
    if (k->sig_on)
        need += k->sig.ncarry + k->resp.ncarry;
    rc = arena_room(c, k, need);
    if (rc < 0)
        return rc;
    return sig_down(c, k, subst_finish(&k->resp, k->arena + k->alen), 1);
}
