/* tests/fuzz/fuzz_socks5.c - the SOCKS5 wire parser (socks/parser.c).
 *
 * The input is what a client sends on a SOCKS5 connection. It is played the
 * way socks/session.c plays it, with auth off, with auth on and the
 * credentials accepted, and with auth on and refused; each of those is fed
 * whole, byte by byte, in chunks whose sizes come from the input's own
 * bytes, and in two pseudo-random splittings (each chunk in an exact-size
 * heap block). Checked on every call, as tests/socks/test_socks_parser.c
 * does: *consumed <= given, NEED_MORE consumes all, stages in order, no
 * stage over its cap, a finished or waiting parser refuses and consumes
 * nothing, socks5_auth_result wipes the credentials, error replies have a
 * legal size. Then: the outcome (events, bytes consumed, method,
 * credentials, request) is the same for every splitting, and the request's
 * address goes through the session's host step (inet_ntop +
 * policy_host_normalize): an IPv4 or IPv6 address always normalises to
 * itself.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "policy/policy.h"
#include "socks/socks.h"

#define MAX_EVENTS 4

struct outcome {
    enum socks5_result events[MAX_EVENTS];
    size_t nevents;
    size_t consumed;
    uint8_t method;
    size_t user_len, pass_len;
    uint8_t user[SOCKS5_FIELD_MAX], pass[SOCKS5_FIELD_MAX];
    int have_req;
    struct socks5_request req;
};

static const size_t stage_cap[3] = {SOCKS5_GREETING_MAX, SOCKS5_AUTH_MAX, SOCKS5_REQUEST_MAX};

static void check_refuses(struct socks5_parser *p)
{
    static const uint8_t dummy[3] = {5, 1, 0};
    size_t used = 777;

    FUZZ_CHECK(socks5_feed(p, dummy, sizeof(dummy), &used) == SOCKS5_ERR_STATE && used == 0);
    used = 777;
    FUZZ_CHECK(socks5_feed(p, NULL, 0, &used) == SOCKS5_ERR_STATE && used == 0);
}

static int all_zero(const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (b[i] != 0)
            return 0;
    return 1;
}

/* The chunk sizes of plan over n bytes: 0 whole, 1 byte by byte, 2 from the
 * input's bytes, 3/4 pseudo-random. */
static size_t next_chunk(int plan, const uint8_t *d, size_t off, size_t n, uint64_t *rng)
{
    size_t left = n - off, c;

    switch (plan) {
    case 0:
        c = left;
        break;
    case 1:
        c = 1;
        break;
    case 2:
        c = 1 + d[off] % 17u;
        break;
    case 3:
        c = 1 + (size_t)(fuzz_rand(rng) % 9);
        break;
    default:
        c = 1 + (size_t)(fuzz_rand(rng) % 300);
        break;
    }
    return c < left ? c : left;
}

/* Plays the session over d[0..n). */
static void drive(int auth_required, int auth_ok, const uint8_t *d, size_t n, int plan,
                  uint64_t seed, struct outcome *o)
{
    struct socks5_parser p;
    uint64_t rng = seed;
    size_t off = 0, stage_used = 0;
    int stage = 0, finished = 0;

    memset(o, 0, sizeof(*o));
    socks5_parser_init(&p, auth_required);
    while (off < n && !finished) {
        size_t clen = next_chunk(plan, d, off, n, &rng), coff = 0;
        uint8_t *chunk = (uint8_t *)fuzz_dup(d + off, clen, 0);

        while (coff < clen && !finished) {
            size_t used = 9999;
            enum socks5_result r = socks5_feed(&p, chunk + coff, clen - coff, &used);

            FUZZ_CHECK(used <= clen - coff);
            FUZZ_CHECK(socks5_result_str(r) != NULL);
            if (r == SOCKS5_NEED_MORE)
                FUZZ_CHECK(used == clen - coff);
            coff += used;
            o->consumed += used;
            stage_used += used;
            FUZZ_CHECK(stage_used <= stage_cap[stage]);
            if (r == SOCKS5_NEED_MORE)
                continue;
            FUZZ_CHECK(o->nevents < MAX_EVENTS);
            o->events[o->nevents++] = r;
            stage_used = 0;
            if (r < 0) {
                uint8_t out[SOCKS5_REPLY_LEN];
                size_t rl = socks5_error_reply(r, out);
                FUZZ_CHECK(rl == 0 || rl == 2 || rl == SOCKS5_SOCKS4_REPLY_LEN ||
                           rl == SOCKS5_REPLY_LEN);
                FUZZ_CHECK(r >= SOCKS5_ERR_CMD); /* ERR_STATE only from misuse */
                if (r == SOCKS5_ERR_CMD) {
                    o->have_req = 1;
                    o->req = p.req;
                }
                finished = 1;
            } else if (r == SOCKS5_GREETING_DONE) {
                FUZZ_CHECK(stage == 0);
                o->method = p.method;
                if (p.method == SOCKS5_METHOD_NONE) {
                    finished = 1;
                } else if (p.method == SOCKS5_METHOD_USERPASS) {
                    FUZZ_CHECK(auth_required);
                    stage = 1;
                } else {
                    FUZZ_CHECK(p.method == SOCKS5_METHOD_NO_AUTH && !auth_required);
                    stage = 2;
                }
            } else if (r == SOCKS5_AUTH_DONE) {
                FUZZ_CHECK(stage == 1 && auth_required);
                FUZZ_CHECK(p.user_len >= 1 && p.user_len <= SOCKS5_FIELD_MAX);
                FUZZ_CHECK(p.pass_len >= 1 && p.pass_len <= SOCKS5_FIELD_MAX);
                o->user_len = p.user_len;
                o->pass_len = p.pass_len;
                memcpy(o->user, p.user, p.user_len);
                memcpy(o->pass, p.pass, p.pass_len);
                check_refuses(&p); /* no request before the verdict */
                socks5_auth_result(&p, auth_ok);
                FUZZ_CHECK(p.user_len == 0 && p.pass_len == 0);
                FUZZ_CHECK(all_zero(p.user, sizeof(p.user)) && all_zero(p.pass, sizeof(p.pass)));
                if (!auth_ok)
                    finished = 1;
                stage = 2;
            } else {
                FUZZ_CHECK(r == SOCKS5_REQUEST_DONE && stage == 2);
                FUZZ_CHECK(p.req.cmd == SOCKS5_CMD_CONNECT);
                o->have_req = 1;
                o->req = p.req;
                finished = 1;
            }
        }
        free(chunk);
        off += coff;
        if (coff < clen)
            break; /* stopped mid-chunk: the rest is the caller's */
    }
    if (finished)
        check_refuses(&p);
    if (o->have_req) {
        const struct socks5_request *q = &o->req;
        FUZZ_CHECK(q->atyp == SOCKS5_ATYP_IPV4 || q->atyp == SOCKS5_ATYP_IPV6 ||
                   q->atyp == SOCKS5_ATYP_DOMAIN);
        if (q->atyp == SOCKS5_ATYP_IPV4)
            FUZZ_CHECK(q->addr_len == 4);
        else if (q->atyp == SOCKS5_ATYP_IPV6)
            FUZZ_CHECK(q->addr_len == 16);
        else
            FUZZ_CHECK(q->addr_len >= 1 && q->addr_len <= SOCKS5_FIELD_MAX);
    }
}

static int same(const struct outcome *a, const struct outcome *b)
{
    if (a->nevents != b->nevents || a->consumed != b->consumed || a->method != b->method ||
        a->user_len != b->user_len || a->pass_len != b->pass_len || a->have_req != b->have_req)
        return 0;
    if (memcmp(a->events, b->events, a->nevents * sizeof(a->events[0])) != 0 ||
        memcmp(a->user, b->user, a->user_len) != 0 || memcmp(a->pass, b->pass, a->pass_len) != 0)
        return 0;
    if (a->have_req &&
        (a->req.cmd != b->req.cmd || a->req.atyp != b->req.atyp ||
         a->req.addr_len != b->req.addr_len || a->req.port != b->req.port ||
         memcmp(a->req.addr, b->req.addr, a->req.addr_len) != 0))
        return 0;
    return 1;
}

/* socks/session.c request_host(), then what must hold of the result. */
static void check_host(const struct socks5_request *q)
{
    static struct policy_host h, h2;
    char text[INET6_ADDRSTRLEN];
    const char *why = NULL;
    int rc;

    switch (q->atyp) {
    case SOCKS5_ATYP_IPV4:
        FUZZ_CHECK(inet_ntop(AF_INET, q->addr, text, sizeof(text)) != NULL);
        rc = policy_host_normalize(text, strlen(text), &h, &why);
        FUZZ_CHECK(rc == 0 && h.kind == POLICY_HOST_IPV4 && strcmp(h.name, text) == 0);
        FUZZ_CHECK(h.addr.family == 4 && memcmp(h.addr.bytes, q->addr, 4) == 0);
        break;
    case SOCKS5_ATYP_IPV6:
        FUZZ_CHECK(inet_ntop(AF_INET6, q->addr, text, sizeof(text)) != NULL);
        rc = policy_host_normalize(text, strlen(text), &h, &why);
        FUZZ_CHECK(rc == 0);
        if (h.kind == POLICY_HOST_IPV6)
            FUZZ_CHECK(h.addr.family == 6 && memcmp(h.addr.bytes, q->addr, 16) == 0);
        else
            FUZZ_CHECK(h.kind == POLICY_HOST_IPV4 && memcmp(h.addr.bytes, q->addr + 12, 4) == 0);
        break;
    default:
        rc = policy_host_normalize((const char *)q->addr, q->addr_len, &h, &why);
        if (rc != 0) {
            FUZZ_CHECK(why != NULL);
            return;
        }
        break;
    }
    FUZZ_CHECK(h.len == strlen(h.name) && h.len > 0 && h.len <= POLICY_HOST_MAX);
    FUZZ_CHECK(policy_host_normalize(h.name, h.len, &h2, &why) == 0);
    FUZZ_CHECK(h2.kind == h.kind && strcmp(h2.name, h.name) == 0);
}

static void check_replies(void)
{
    uint8_t out[SOCKS5_REPLY_LEN];

    for (int c = SOCKS5_REP_SUCCEEDED; c <= SOCKS5_REP_ATYP_UNSUPPORTED; c++) {
        FUZZ_CHECK(socks5_reply(out, (enum socks5_reply_code)c) == SOCKS5_REPLY_LEN);
        FUZZ_CHECK(out[0] == 5 && out[1] == c && out[2] == 0 && out[3] == SOCKS5_ATYP_IPV4);
        FUZZ_CHECK(all_zero(out + 4, 6)); /* 0.0.0.0:0, never an internal address */
    }
    FUZZ_CHECK(socks5_method_reply(out, SOCKS5_METHOD_NONE) == 2 && out[0] == 5 && out[1] == 0xFF);
    FUZZ_CHECK(socks5_auth_reply(out, 1) == 2 && out[0] == 1 && out[1] == 0);
    FUZZ_CHECK(socks5_auth_reply(out, 0) == 2 && out[0] == 1 && out[1] == 1);
    FUZZ_CHECK(socks5_socks4_reject(out) == SOCKS5_SOCKS4_REPLY_LEN && out[1] == 0x5B);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const int modes[3][2] = {{0, 1}, {1, 1}, {1, 0}};
    struct outcome first, o;
    uint64_t seed = fuzz_hash(data, size);

    if (size > 4096)
        return 0;
    for (int m = 0; m < 3; m++) {
        drive(modes[m][0], modes[m][1], data, size, 0, seed, &first);
        for (int plan = 1; plan <= 4; plan++) {
            drive(modes[m][0], modes[m][1], data, size, plan, seed + (uint64_t)plan, &o);
            if (!same(&first, &o)) {
                fprintf(stderr, "auth %d/%d: splitting %d gives another outcome\n", modes[m][0],
                        modes[m][1], plan);
                abort();
            }
        }
        if (first.have_req)
            check_host(&first.req);
    }
    check_replies();
    return 0;
}
