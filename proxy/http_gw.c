/* proxy/http_gw.c - credentials.headers in the HTTP front end (issue 24
 * item 4): `sluice proxy` as a gateway whose clients hold no secret. For a
 * request whose judged host (c->host: the CONNECT target inside a
 * terminated tunnel, the absolute-form authority otherwise; never a Host
 * header alone) is in an entry's hosts, the header goes upstream with the
 * entry's current value (gw.h): every line of that name the client sent is
 * removed first, so it is replaced, never duplicated. The first entry in
 * settings order wins for a header name. Fail closed: an Upgrade to such a
 * host, a plain-HTTP request to one without allowPlaintextInject, and an
 * entry with no value (its helper failed, its lifetime ran out) are
 * refused with a reason and never sent, neither without the header nor
 * with an empty one. The request asks for no encoding (Accept-Encoding
 * dropped), so that the value can be masked in the response (http_cred.c
 * runs the mask set built here over the head and the streamed body). The
 * decision record names the entries (credential_header=headers[0]:NAME);
 * the value is in no log line, message or metric.
 */
#define _GNU_SOURCE
#include "proxy/http_int.h"

#include "proxy/creds.h"
#include "proxy/gw.h"
#include "proxy/service.h"

#include <errno.h>
#include <strings.h>

struct proxy_gw *http_gw_of(const struct http_conn *c)
{
    const struct proxy_service *svc = c->fc.f->data;

    return svc != NULL && svc->conf != NULL ? svc->conf->gw : NULL;
}

void http_gw_req_free(struct http_gw_req *r)
{
    for (size_t i = 0; i < r->nb64; i++) {
        explicit_bzero(r->b64[i], r->b64len[i]);
        free(r->b64[i]);
    }
    for (size_t i = 0; i < r->n; i++)
        proxy_gw_snap_free(&r->snaps[i]);
    free(r->snaps);
    memset(r, 0, sizeof(*r));
}

/* The entries whose hosts include this request's (one per header name,
 * the first in order), as bits; their labels into the decision record. */
static uint64_t chosen(struct http_conn *c, struct proxy_gw *g)
{
    const struct policy *pol = egress_env_policy(c->fc.f->egress);
    uint64_t bits = 0;
    char names[512];
    size_t o = 0;

    names[0] = '\0';
    for (size_t i = 0; i < g->n && i < 64; i++) {
        int idx = policy_cred_find(pol, POLICY_CRED_HEADER, g->e[i].label), dup = 0;
        if (idx < 0 || !policy_cred_injects(pol, (size_t)idx, &c->host, c->fc.port))
            continue;
        for (size_t k = 0; k < i && !dup; k++)
            dup = (bits & (UINT64_C(1) << k)) && strcasecmp(g->e[k].header, g->e[i].header) == 0;
        if (dup)
            continue;
        bits |= UINT64_C(1) << i;
        if (o < sizeof(names)) {
            int w = snprintf(names + o, sizeof(names) - o, "%s%s", o > 0 ? "," : "", g->e[i].label);
            if (w > 0)
                o += (size_t)w;
        }
    }
    if (bits != 0)
        frontend_conn_set_text(&c->fc.cred_header, names);
    return bits;
}

static int refuse(struct http_conn *c, struct proxy_gw *g, int status, const char *why)
{
    (void)g;
    __atomic_add_fetch(&proxy_gw_stats.refused, 1, __ATOMIC_RELAXED);
    http_refuse(c, status, why, 1, "credential refused");
    return -1;
}

/* w->out with the snapshots' headers set (proxy_gw_head). 0 or UV_ENOMEM /
 * UV_EINVAL (no CRLF CRLF end). */
static int set_lines(struct http_work *w, struct proxy_gw *g, uint64_t bits,
                     const struct http_gw_req *r)
{
    struct proxy_gw_line lines[64];
    size_t n = 0;
    char *nb;
    size_t nl;
    int rc;

    for (size_t i = 0; i < g->n && i < 64; i++)
        if (bits & (UINT64_C(1) << i)) {
            lines[n] = (struct proxy_gw_line){g->e[i].header, g->e[i].prefix, g->e[i].prefix_len,
                                              r->snaps[n].value, r->snaps[n].len};
            n++;
        }
    rc = proxy_gw_head(w->out, w->out_len, lines, n, &nb, &nl);
    if (rc < 0)
        return rc == -ENOMEM ? UV_ENOMEM : UV_EINVAL;
    free(w->out);
    w->out = nb;
    w->out_len = nl;
    return 0;
}

/* One base64 form (proxy_cred_b64_inner) of v at alignment a, owned by r.
 * NULL when memory ran out. */
static const uint8_t *b64_form(struct http_gw_req *r, const uint8_t *v, size_t len, unsigned a,
                               size_t *olen)
{
    uint8_t *o;

    if (proxy_cred_b64_inner(v, len, a, &o, olen) < 0)
        return NULL;
    r->b64[r->nb64] = o;
    r->b64len[r->nb64++] = *olen;
    return o;
}

/* The response mask set: each value (once) to its mask, and its base64
 * forms at the three alignments to the mask's, as for placeholders (rt-15:
 * an origin that echoes the value base64-encoded must not hand it back).
 * 0, UV_ENOMEM, or UV_E2BIG: more values than one set holds (a value left
 * out would come back unmasked: the caller refuses the request). */
static int mask_set(struct http_gw_req *r)
{
    struct subst_pair pairs[SUBST_MAX];
    size_t n = 0;

    for (size_t i = 0; i < r->n; i++) {
        const struct proxy_gw_snap *sn = &r->snaps[i];
        int dup = 0;
        for (size_t k = 0; k < n && !dup; k++)
            dup = pairs[k].len == sn->len && memcmp(pairs[k].from, sn->value, sn->len) == 0;
        if (dup)
            continue;
        if (n + 4 > SUBST_MAX)
            return UV_E2BIG;
        pairs[n++] = (struct subst_pair){sn->value, sn->mask, sn->len, 0};
        for (unsigned a = 0; a < 3; a++) {
            size_t lv, lm;
            const uint8_t *fv = b64_form(r, sn->value, sn->len, a, &lv);
            const uint8_t *fm = fv != NULL ? b64_form(r, sn->mask, sn->len, a, &lm) : NULL;
            if (fm == NULL)
                return UV_ENOMEM;
            pairs[n++] = (struct subst_pair){fv, fm, lv, 0};
        }
    }
    return subst_set_init(&r->set, pairs, n) < 0 ? UV_ENOMEM : 0;
}

int http_gw_request(struct http_conn *c, struct proxy_gw *g, struct http_gw_req *r)
{
    struct http_work *w = c->w;
    uint64_t bits = chosen(c, g), now;
    char why[400], miss[260];
    size_t n = 0;
    int rc;

    if (bits == 0)
        return 0;
    if (w->upgrade)
        return refuse(c, g, 403,
                      "an Upgrade (WebSocket) to a host credentials.headers injects into: "
                      "sluice does not read the frames after it (the value could not be masked "
                      "in them); the request was not sent");
    if (!c->terminated && !g->plaintext)
        return refuse(c, g, 403,
                      "a plain-HTTP request to a host credentials.headers injects into: the "
                      "header is set only inside terminated HTTPS unless "
                      "credentials.allowPlaintextInject; the request was not sent");
    for (uint64_t b = bits; b != 0; b &= b - 1)
        n++;
    r->snaps = calloc(n, sizeof(*r->snaps));
    if (r->snaps == NULL) {
        http_conn_close(c, "out of memory");
        return -1;
    }
    now = proxy_gw_now();
    for (size_t i = 0; i < g->n && i < 64; i++) {
        if (!(bits & (UINT64_C(1) << i)))
            continue;
        if (proxy_gw_get(g, i, now, &r->snaps[r->n], miss, sizeof(miss)) < 0) {
            snprintf(why, sizeof(why),
                     "credentials.headers entry %s has no value: %s; the request was not sent",
                     g->e[i].label, miss);
            return refuse(c, g, 503, why);
        }
        r->n++;
    }
    rc = set_lines(w, g, bits, r);
    if (rc == 0)
        rc = mask_set(r);
    if (rc == UV_E2BIG)
        return refuse(c, g, 503,
                      "more than 16 credentials.headers values for this host: sluice could not "
                      "mask them all in the response; the request was not sent");
    if (rc < 0) {
        http_conn_close(c, rc == UV_ENOMEM ? "out of memory" : "internal: a head without its end");
        return -1;
    }
    __atomic_add_fetch(&proxy_gw_stats.injected, 1, __ATOMIC_RELAXED);
    return 1;
}
