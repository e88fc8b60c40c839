/* tests/socks/test_socks_parser.c - the SOCKS5 wire parser (style.md R11, R14).
 *
 * Everything goes through one driver, drive(), that plays the session: it
 * feeds a byte stream in given chunks, acts on each result as a session
 * must (auth verdict after AUTH_DONE, stop after the request or an error)
 * and checks the parser's contract on every call:
 *   - *consumed <= the bytes given; NEED_MORE consumes every byte given;
 *   - results come in order: greeting, [auth], request;
 *   - no stage consumes more than its R8 cap, even while unfinished;
 *   - before socks5_auth_result() and after the end, a feed is refused
 *     (SOCKS5_ERR_STATE) and consumes nothing;
 *   - socks5_auth_result() wipes the credentials.
 * Each chunk is copied to a heap block of exactly its size, so under ASan
 * a read past the slice the parser was given is caught.
 *
 * Tables: valid conversations (built from a spec so 255-byte fields are easy)
 * and raw byte strings for the errors. Every row is run whole, byte by byte,
 * in 2000 random splittings, and truncated at every length; every failing
 * row is printed and the test fails once at the end. The random tests use a
 * fixed seed (printed on failure; SOCKS_TEST_SEED overrides it).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bridge/bridge.h"
#include "socks/socks.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))
#define S(lit) (const uint8_t *)(lit), (sizeof(lit) - 1) /* bytes, length of a literal */

#define STREAM_MAX 2048
#define SPLITS 2000
#define GARBAGE_RUNS 100000

/* ------------------------------------------------------------------------ */
/* PRNG (xorshift64*), seeded                                                */

static uint64_t rng_state;
static uint64_t rng_seed;

static void rng_init(void)
{
    const char *s = getenv("SOCKS_TEST_SEED");
    rng_seed = 0x5eed50c55ull;
    if (s != NULL && *s != '\0')
        rng_seed = strtoull(s, NULL, 0);
    rng_state = rng_seed != 0 ? rng_seed : 1;
}

static uint64_t rng_next(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}

/* Uniform enough in [0, n); 0 when n is 0. */
static size_t rng_below(size_t n)
{
    return n == 0 ? 0 : (size_t)(rng_next() % n);
}

/* ------------------------------------------------------------------------ */
/* Reporting                                                                 */

__attribute__((format(printf, 2, 3))) static void row_fail(const char *name, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    print_error("FAIL %s: %s\n", name, buf);
}

static const char *rname(enum socks5_result r)
{
    return socks5_result_str(r);
}

/* ------------------------------------------------------------------------ */
/* The driver                                                                */

#define MAX_EVENTS 4

struct outcome {
    enum socks5_result events[MAX_EVENTS]; /* every result other than NEED_MORE */
    size_t nevents;
    enum socks5_result final; /* the terminal result, or NEED_MORE if input ran out */
    size_t consumed;          /* bytes consumed in all */
    uint8_t method;
    size_t user_len, pass_len;
    uint8_t user[SOCKS5_FIELD_MAX], pass[SOCKS5_FIELD_MAX];
    int have_req;
    struct socks5_request req;
};

struct input {
    int auth_required;
    int auth_ok; /* the verdict the "session" gives after AUTH_DONE */
    const uint8_t *s;
    size_t len;
};

static const size_t stage_cap[3] = {SOCKS5_GREETING_MAX, SOCKS5_AUTH_MAX, SOCKS5_REQUEST_MAX};

#define DFAIL(...)                                                                                 \
    do {                                                                                           \
        snprintf(why, whylen, __VA_ARGS__);                                                        \
        rc = -1;                                                                                   \
        goto out;                                                                                  \
    } while (0)

/* A fed-again parser in a finished or waiting state must refuse and consume nothing. */
static int refuses(struct socks5_parser *p, const uint8_t *rest, size_t restlen)
{
    static const uint8_t dummy[3] = {5, 1, 0};
    size_t used = 777;
    enum socks5_result r;

    if (restlen == 0) {
        rest = dummy;
        restlen = sizeof dummy;
    }
    r = socks5_feed(p, rest, restlen, &used);
    if (r != SOCKS5_ERR_STATE || used != 0)
        return 0;
    r = socks5_feed(p, NULL, 0, &used); /* an empty feed too */
    return r == SOCKS5_ERR_STATE && used == 0;
}

/* Feeds in->s in the chunks given (their sum must be in->len). Returns 0 and
 * fills *o, or -1 with why set when the parser broke its contract. */
static int drive(const struct input *in, const size_t *chunks, size_t nchunks, struct outcome *o,
                 char *why, size_t whylen)
{
    struct socks5_parser p;
    size_t off = 0, total = 0, stage_start = 0;
    unsigned stage = 0; /* 0 greeting, 1 auth, 2 request */
    int terminal = 0, rc = 0;
    uint8_t *buf = NULL;

    memset(o, 0, sizeof(*o));
    o->final = SOCKS5_NEED_MORE;
    socks5_parser_init(&p, in->auth_required);

    for (size_t k = 0; k < nchunks && !terminal; k++) {
        size_t n = chunks[k], pos = 0;
        const uint8_t *d = NULL;

        if (n > in->len - off)
            DFAIL("test bug: chunks exceed the stream");
        if (n > 0) {
            buf = malloc(n);
            if (buf == NULL)
                DFAIL("out of memory");
            memcpy(buf, in->s + off, n);
            d = buf;
        }
        for (;;) {
            size_t used = 999999;
            enum socks5_result r = socks5_feed(&p, d != NULL ? d + pos : NULL, n - pos, &used);

            if (used > n - pos)
                DFAIL("at %zu: consumed %zu of %zu", off + pos, used, n - pos);
            pos += used;
            total += used;
            if (r == SOCKS5_NEED_MORE) {
                if (pos != n)
                    DFAIL("at %zu: NEED_MORE left %zu bytes unconsumed", off + pos, n - pos);
                break;
            }
            if (o->nevents == MAX_EVENTS)
                DFAIL("too many results");
            o->events[o->nevents++] = r;
            if (total - stage_start > stage_cap[stage])
                DFAIL("stage %u used %zu bytes, cap %zu", stage, total - stage_start,
                      stage_cap[stage]);
            if (r == SOCKS5_ERR_STATE)
                DFAIL("at %zu: ERR_STATE during a conversation", off + pos);
            if (r < 0) {
                if (r == SOCKS5_ERR_CMD) {
                    if (stage != 2)
                        DFAIL("ERR_CMD outside the request");
                    o->have_req = 1;
                    o->req = p.req;
                }
                terminal = 1;
            } else if (r == SOCKS5_GREETING_DONE) {
                if (stage != 0)
                    DFAIL("GREETING_DONE in stage %u", stage);
                o->method = p.method;
                if (p.method == SOCKS5_METHOD_NONE) {
                    terminal = 1;
                } else if (p.method == SOCKS5_METHOD_USERPASS && in->auth_required) {
                    stage = 1;
                } else if (p.method == SOCKS5_METHOD_NO_AUTH && !in->auth_required) {
                    stage = 2;
                } else {
                    DFAIL("method 0x%02x chosen with auth_required %d", p.method,
                          in->auth_required);
                }
            } else if (r == SOCKS5_AUTH_DONE) {
                if (stage != 1)
                    DFAIL("AUTH_DONE in stage %u", stage);
                if (p.user_len < 1 || p.user_len > SOCKS5_FIELD_MAX || p.pass_len < 1 ||
                    p.pass_len > SOCKS5_FIELD_MAX)
                    DFAIL("credential lengths %zu/%zu", p.user_len, p.pass_len);
                o->user_len = p.user_len;
                o->pass_len = p.pass_len;
                memcpy(o->user, p.user, p.user_len);
                memcpy(o->pass, p.pass, p.pass_len);
                /* The request must wait for the verdict. */
                if (!refuses(&p, d != NULL ? d + pos : NULL, n - pos))
                    DFAIL("fed before socks5_auth_result(), not refused");
                socks5_auth_result(&p, in->auth_ok);
                if (p.user_len != 0 || p.pass_len != 0)
                    DFAIL("credential lengths not cleared");
                for (size_t i = 0; i < SOCKS5_FIELD_MAX; i++)
                    if (p.user[i] != 0 || p.pass[i] != 0)
                        DFAIL("credentials not wiped at byte %zu", i);
                if (in->auth_ok)
                    stage = 2;
                else
                    terminal = 1;
            } else if (r == SOCKS5_REQUEST_DONE) {
                if (stage != 2)
                    DFAIL("REQUEST_DONE in stage %u", stage);
                if (p.req.cmd != SOCKS5_CMD_CONNECT)
                    DFAIL("REQUEST_DONE with command 0x%02x", p.req.cmd);
                o->have_req = 1;
                o->req = p.req;
                terminal = 1;
            } else {
                DFAIL("unknown result %d", (int)r);
            }
            stage_start = total;
            if (terminal) {
                o->final = r;
                if (!refuses(&p, d != NULL ? d + pos : NULL, n - pos))
                    DFAIL("fed after the end, not refused");
                break;
            }
            if (pos == n)
                break;
        }
        free(buf);
        buf = NULL;
        off += n;
    }
    if (!terminal && total - stage_start >= stage_cap[stage])
        DFAIL("unfinished stage %u holds %zu bytes, cap %zu", stage, total - stage_start,
              stage_cap[stage]);
    o->consumed = total;
out:
    free(buf);
    return rc;
}

/* Splits len into random chunks, sometimes empty, with a random granularity. */
static size_t random_chunks(size_t len, size_t *chunks, size_t cap)
{
    size_t n = 0, left = len;
    size_t gran = 1 + rng_below(rng_below(2) ? 8 : len + 1);

    while (left > 0 && n + 1 < cap) {
        size_t c = rng_below(gran + 1);
        if (c > left)
            c = left;
        chunks[n++] = c;
        left -= c;
    }
    if (left > 0 || n == 0)
        chunks[n++] = left;
    return n;
}

static size_t whole_chunks(size_t len, size_t *chunks)
{
    chunks[0] = len;
    return 1;
}

static size_t byte_chunks(size_t len, size_t *chunks)
{
    for (size_t i = 0; i < len; i++)
        chunks[i] = 1;
    return len;
}

/* 0 when equal, else why is set. */
static int outcome_cmp(const struct outcome *a, const struct outcome *b, char *why, size_t whylen)
{
    if (a->nevents != b->nevents) {
        snprintf(why, whylen, "%zu results vs %zu", a->nevents, b->nevents);
        return -1;
    }
    for (size_t i = 0; i < a->nevents; i++) {
        if (a->events[i] != b->events[i]) {
            snprintf(why, whylen, "result %zu: '%s' vs '%s'", i, rname(a->events[i]),
                     rname(b->events[i]));
            return -1;
        }
    }
    if (a->final != b->final) {
        snprintf(why, whylen, "final '%s' vs '%s'", rname(a->final), rname(b->final));
        return -1;
    }
    if (a->consumed != b->consumed) {
        snprintf(why, whylen, "consumed %zu vs %zu", a->consumed, b->consumed);
        return -1;
    }
    if (a->nevents > 0 && a->method != b->method) {
        snprintf(why, whylen, "method 0x%02x vs 0x%02x", a->method, b->method);
        return -1;
    }
    if (a->user_len != b->user_len || a->pass_len != b->pass_len ||
        memcmp(a->user, b->user, a->user_len) != 0 || memcmp(a->pass, b->pass, a->pass_len) != 0) {
        snprintf(why, whylen, "credentials differ");
        return -1;
    }
    if (a->have_req != b->have_req) {
        snprintf(why, whylen, "request parsed %d vs %d", a->have_req, b->have_req);
        return -1;
    }
    if (a->have_req) {
        const struct socks5_request *x = &a->req, *y = &b->req;
        if (x->cmd != y->cmd || x->atyp != y->atyp || x->addr_len != y->addr_len ||
            memcmp(x->addr, y->addr, x->addr_len) != 0 || x->port != y->port) {
            snprintf(why, whylen, "request cmd %u/%u atyp %u/%u len %zu/%zu port %u/%u or bytes",
                     x->cmd, y->cmd, x->atyp, y->atyp, x->addr_len, y->addr_len, x->port, y->port);
            return -1;
        }
    }
    return 0;
}

/* Runs one stream whole, byte by byte, `splits` random ways, and truncated
 * at every length shorter than what the whole run consumed; every run must
 * give *want (when not NULL) or the whole run's outcome. Prints and returns
 * the number of failures. */
static size_t check_stream(const char *name, const struct input *in, const struct outcome *want,
                           size_t splits)
{
    static size_t chunks[STREAM_MAX * 2 + 8];
    struct outcome whole, o;
    char why[512];
    size_t fails = 0, n;

    n = whole_chunks(in->len, chunks);
    if (drive(in, chunks, n, &whole, why, sizeof why) != 0) {
        row_fail(name, "whole: %s", why);
        return 1;
    }
    if (want != NULL && outcome_cmp(&whole, want, why, sizeof why) != 0) {
        row_fail(name, "whole vs expected: %s", why);
        fails++;
    }

    n = byte_chunks(in->len, chunks);
    if (drive(in, chunks, n, &o, why, sizeof why) != 0) {
        row_fail(name, "byte by byte: %s", why);
        fails++;
    } else if (outcome_cmp(&o, &whole, why, sizeof why) != 0) {
        row_fail(name, "byte by byte vs whole: %s", why);
        fails++;
    }

    for (size_t it = 0; it < splits && fails == 0; it++) {
        n = random_chunks(in->len, chunks, NELEM(chunks));
        if (drive(in, chunks, n, &o, why, sizeof why) != 0) {
            row_fail(name, "split %zu (seed 0x%llx): %s", it, (unsigned long long)rng_seed, why);
            fails++;
        } else if (outcome_cmp(&o, &whole, why, sizeof why) != 0) {
            row_fail(name, "split %zu (seed 0x%llx) vs whole: %s", it, (unsigned long long)rng_seed,
                     why);
            fails++;
        }
    }

    /* Truncated: every prefix shorter than the consumed part ends in NEED_MORE
     * with every byte consumed, whole and byte by byte. */
    for (size_t k = 0; k < whole.consumed && fails == 0; k++) {
        struct input t = *in;
        t.len = k;
        for (int mode = 0; mode < 2; mode++) {
            n = mode == 0 ? whole_chunks(k, chunks) : byte_chunks(k, chunks);
            if (drive(&t, chunks, n, &o, why, sizeof why) != 0) {
                row_fail(name, "prefix %zu: %s", k, why);
                fails++;
            } else if (o.final != SOCKS5_NEED_MORE || o.consumed != k) {
                row_fail(name, "prefix %zu: final '%s', consumed %zu", k, rname(o.final),
                         o.consumed);
                fails++;
            }
        }
    }
    return fails;
}

/* ------------------------------------------------------------------------ */
/* Valid conversations                                                       */

static uint8_t methods255[255]; /* 254 unknown methods then USERPASS */
static uint8_t long255a[255], long255b[255], long255c[255];

struct conv {
    const char *name;
    const char *note;
    int auth_required;
    const uint8_t *methods;
    size_t nmethods;
    const uint8_t *user, *pass; /* sent when the method chosen is USERPASS */
    size_t ulen, plen;
    uint8_t cmd, atyp;
    const uint8_t *addr; /* raw: 4, 16 or the domain */
    size_t alen;
    uint16_t port;
    const uint8_t *early; /* after the request (or after a refused greeting) */
    size_t elen;
    uint8_t want_method;
    enum socks5_result want_final;
};

static const uint8_t ip4[4] = {93, 184, 216, 34};
static const uint8_t ip4zero[4] = {0, 0, 0, 0};
static const uint8_t ip6[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01};
static const uint8_t tls_hello[] = {0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03};
static const uint8_t m0[] = {0x00};
static const uint8_t m2[] = {0x02};
static const uint8_t m20[] = {0x02, 0x00};
static const uint8_t m02[] = {0x00, 0x02};
static const uint8_t m000[] = {0x00, 0x00, 0x00};
static const uint8_t m013x[] = {0x00, 0x01, 0x03, 0x80};
static const uint8_t m1ff[] = {0x01, 0xff};
static const uint8_t m2x[] = {0x80, 0x02, 0xfe};

#define DOM(lit) (const uint8_t *)(lit), (sizeof(lit) - 1)
#define EARLY(lit) (const uint8_t *)(lit), (sizeof(lit) - 1)
#define NOCRED NULL, NULL, 0, 0
#define CRED(u, p) (const uint8_t *)(u), (const uint8_t *)(p), sizeof(u) - 1, sizeof(p) - 1

static const struct conv convs[] = {
    {"ipv4 + tls hello", NULL, 0, m0, 1, NOCRED, SOCKS5_CMD_CONNECT, SOCKS5_ATYP_IPV4, ip4, 4, 443,
     tls_hello, sizeof tls_hello, SOCKS5_METHOD_NO_AUTH, SOCKS5_REQUEST_DONE},
    {"no creds, 0x02 and 0x00 offered", "choose 0x00", 0, m20, 2, NOCRED, SOCKS5_CMD_CONNECT,
     SOCKS5_ATYP_IPV4, ip4, 4, 80, NULL, 0, SOCKS5_METHOD_NO_AUTH, SOCKS5_REQUEST_DONE},
    {"duplicate methods", NULL, 0, m000, 3, NOCRED, SOCKS5_CMD_CONNECT, SOCKS5_ATYP_IPV4, ip4, 4,
     80, EARLY("x"), SOCKS5_METHOD_NO_AUTH, SOCKS5_REQUEST_DONE},
    {"ipv6", NULL, 0, m0, 1, NOCRED, SOCKS5_CMD_CONNECT, SOCKS5_ATYP_IPV6, ip6, 16, 8443,
     EARLY("\x05\x01\x00"), SOCKS5_METHOD_NO_AUTH, SOCKS5_REQUEST_DONE},
    {"domain + http", NULL, 0, m0, 1, NOCRED, SOCKS5_CMD_CONNECT, SOCKS5_ATYP_DOMAIN,
     DOM("example.com"), 80, EARLY("GET / HTTP/1.1\r\nHost: example.com\r\n\r\n"),
     SOCKS5_METHOD_NO_AUTH, SOCKS5_REQUEST_DONE},
    {"domain with NUL and odd bytes", "raw, the caller normalises", 0, m0, 1, NOCRED,
     SOCKS5_CMD_CONNECT, SOCKS5_ATYP_DOMAIN,
     DOM("a\0b\xff\x01."
         "com\0"),
     443, NULL, 0, SOCKS5_METHOD_NO_AUTH, SOCKS5_REQUEST_DONE},
    {"domain of 1 byte", NULL, 0, m0, 1, NOCRED, SOCKS5_CMD_CONNECT, SOCKS5_ATYP_DOMAIN, DOM("a"),
     1, NULL, 0, SOCKS5_METHOD_NO_AUTH, SOCKS5_REQUEST_DONE},
    {"domain of 255 bytes", NULL, 0, m0, 1, NOCRED, SOCKS5_CMD_CONNECT, SOCKS5_ATYP_DOMAIN,
     long255a, 255, 443, tls_hello, sizeof tls_hello, SOCKS5_METHOD_NO_AUTH, SOCKS5_REQUEST_DONE},
    {"port 0", "passed through; the session must refuse it", 0, m0, 1, NOCRED, SOCKS5_CMD_CONNECT,
     SOCKS5_ATYP_IPV4, ip4, 4, 0, NULL, 0, SOCKS5_METHOD_NO_AUTH, SOCKS5_REQUEST_DONE},
    {"port 65535", NULL, 0, m0, 1, NOCRED, SOCKS5_CMD_CONNECT, SOCKS5_ATYP_DOMAIN, DOM("h"), 65535,
     NULL, 0, SOCKS5_METHOD_NO_AUTH, SOCKS5_REQUEST_DONE},
    {"port 0x0100", "byte order", 0, m0, 1, NOCRED, SOCKS5_CMD_CONNECT, SOCKS5_ATYP_IPV4, ip4, 4,
     256, NULL, 0, SOCKS5_METHOD_NO_AUTH, SOCKS5_REQUEST_DONE},
    {"user/pass", NULL, 1, m02, 2, CRED("alice", "s3cret"), SOCKS5_CMD_CONNECT, SOCKS5_ATYP_DOMAIN,
     DOM("example.org"), 443, tls_hello, sizeof tls_hello, SOCKS5_METHOD_USERPASS,
     SOCKS5_REQUEST_DONE},
    {"user/pass only offered", NULL, 1, m2, 1, CRED("u", "p"), SOCKS5_CMD_CONNECT, SOCKS5_ATYP_IPV6,
     ip6, 16, 22, EARLY("SSH-2.0-x\r\n"), SOCKS5_METHOD_USERPASS, SOCKS5_REQUEST_DONE},
    {"user/pass among unknown methods", NULL, 1, m2x, 3, CRED("a\0b", "\0\xff\0"),
     SOCKS5_CMD_CONNECT, SOCKS5_ATYP_IPV4, ip4, 4, 443, NULL, 0, SOCKS5_METHOD_USERPASS,
     SOCKS5_REQUEST_DONE},
    {"largest messages", "257 + 513 + 262 bytes", 1, methods255, 255, long255b, long255c, 255, 255,
     SOCKS5_CMD_CONNECT, SOCKS5_ATYP_DOMAIN, long255a, 255, 65535, tls_hello, sizeof tls_hello,
     SOCKS5_METHOD_USERPASS, SOCKS5_REQUEST_DONE},
    /* No acceptable method: GREETING_DONE with 0xFF; nothing after it is consumed. */
    {"no creds, only 0x02 offered", "-> 0xFF", 0, m2, 1, NOCRED, 0, 0, NULL, 0, 0,
     EARLY("\x01\x01u\x01p"), SOCKS5_METHOD_NONE, SOCKS5_GREETING_DONE},
    {"creds, only 0x00 offered", "-> 0xFF", 1, m0, 1, NOCRED, 0, 0, NULL, 0, 0,
     EARLY("\x05\x01\x00\x01\x01\x02\x03\x04\x00\x50"), SOCKS5_METHOD_NONE, SOCKS5_GREETING_DONE},
    {"creds, 0x00 and unknown offered", "-> 0xFF", 1, m013x, 4, NOCRED, 0, 0, NULL, 0, 0, NULL, 0,
     SOCKS5_METHOD_NONE, SOCKS5_GREETING_DONE},
    {"no creds, 0x01 and 0xFF offered", "-> 0xFF", 0, m1ff, 2, NOCRED, 0, 0, NULL, 0, 0,
     EARLY("zz"), SOCKS5_METHOD_NONE, SOCKS5_GREETING_DONE},
    /* Well-formed but unsupported commands: parsed whole, then refused (0x07). */
    {"BIND", "whole request parsed, then 0x07", 0, m0, 1, NOCRED, SOCKS5_CMD_BIND, SOCKS5_ATYP_IPV4,
     ip4, 4, 21, EARLY("more"), SOCKS5_METHOD_NO_AUTH, SOCKS5_ERR_CMD},
    {"UDP ASSOCIATE", NULL, 0, m0, 1, NOCRED, SOCKS5_CMD_UDP_ASSOCIATE, SOCKS5_ATYP_IPV4, ip4zero,
     4, 0, NULL, 0, SOCKS5_METHOD_NO_AUTH, SOCKS5_ERR_CMD},
    {"UDP ASSOCIATE, domain, after auth", NULL, 1, m2, 1, CRED("u", "p"), SOCKS5_CMD_UDP_ASSOCIATE,
     SOCKS5_ATYP_DOMAIN, DOM("example.com"), 53, EARLY("\x00"), SOCKS5_METHOD_USERPASS,
     SOCKS5_ERR_CMD},
    {"command 0x00", NULL, 0, m0, 1, NOCRED, 0x00, SOCKS5_ATYP_IPV6, ip6, 16, 1, NULL, 0,
     SOCKS5_METHOD_NO_AUTH, SOCKS5_ERR_CMD},
    {"command 0x09", NULL, 0, m0, 1, NOCRED, 0x09, SOCKS5_ATYP_DOMAIN, DOM("x.y"), 1, NULL, 0,
     SOCKS5_METHOD_NO_AUTH, SOCKS5_ERR_CMD},
    {"command 0xFF", NULL, 0, m0, 1, NOCRED, 0xff, SOCKS5_ATYP_IPV4, ip4, 4, 1, EARLY("\xff"),
     SOCKS5_METHOD_NO_AUTH, SOCKS5_ERR_CMD},
};

/* Builds the stream of a conversation and the outcome it must have. */
static size_t conv_build(const struct conv *c, uint8_t *s, struct outcome *want)
{
    size_t n = 0, used;

    memset(want, 0, sizeof(*want));
    s[n++] = 5;
    s[n++] = (uint8_t)c->nmethods;
    memcpy(s + n, c->methods, c->nmethods);
    n += c->nmethods;
    want->events[want->nevents++] = SOCKS5_GREETING_DONE;
    want->method = c->want_method;

    if (c->want_method == SOCKS5_METHOD_USERPASS) {
        s[n++] = 1;
        s[n++] = (uint8_t)c->ulen;
        memcpy(s + n, c->user, c->ulen);
        n += c->ulen;
        s[n++] = (uint8_t)c->plen;
        memcpy(s + n, c->pass, c->plen);
        n += c->plen;
        want->events[want->nevents++] = SOCKS5_AUTH_DONE;
        want->user_len = c->ulen;
        want->pass_len = c->plen;
        memcpy(want->user, c->user, c->ulen);
        memcpy(want->pass, c->pass, c->plen);
    }
    if (c->want_method != SOCKS5_METHOD_NONE) {
        s[n++] = 5;
        s[n++] = c->cmd;
        s[n++] = 0;
        s[n++] = c->atyp;
        if (c->atyp == SOCKS5_ATYP_DOMAIN)
            s[n++] = (uint8_t)c->alen;
        memcpy(s + n, c->addr, c->alen);
        n += c->alen;
        s[n++] = (uint8_t)(c->port >> 8);
        s[n++] = (uint8_t)(c->port & 0xff);
        want->events[want->nevents++] = c->want_final;
        want->have_req = 1;
        want->req.cmd = c->cmd;
        want->req.atyp = c->atyp;
        want->req.addr_len = c->alen;
        memcpy(want->req.addr, c->addr, c->alen);
        want->req.port = c->port;
    }
    want->final = c->want_final;
    used = n;
    want->consumed = used;
    if (c->elen > 0)
        memcpy(s + n, c->early, c->elen);
    return n + c->elen;
}

static int setup_tables(void **state)
{
    (void)state;
    for (size_t i = 0; i < 255; i++) {
        methods255[i] = (uint8_t)(0x03 + i % 0xf0); /* 0x03..0xF2: none is 0x00 or 0x02 */
        long255a[i] = (uint8_t)('a' + i % 26);
        long255b[i] = (uint8_t)(i + 1);
        long255c[i] = (uint8_t)(255 - i);
    }
    methods255[254] = SOCKS5_METHOD_USERPASS;
    long255a[100] = '.';
    rng_init();
    return 0;
}

static void test_valid(void **state)
{
    static uint8_t s[STREAM_MAX];
    size_t fails = 0;
    (void)state;

    for (size_t i = 0; i < NELEM(convs); i++) {
        const struct conv *c = &convs[i];
        struct outcome want;
        struct input in = {c->auth_required, 1, s, 0};
        char name[160];

        in.len = conv_build(c, s, &want);
        snprintf(name, sizeof name, "valid '%s'%s%s", c->name, c->note ? " - " : "",
                 c->note ? c->note : "");
        fails += check_stream(name, &in, &want, SPLITS);
    }
    assert_int_equal(fails, 0);
}

/* The largest conversation really is at the R8 caps. */
static void test_caps(void **state)
{
    static uint8_t s[STREAM_MAX];
    struct outcome want;
    size_t len = 0;
    (void)state;

    memset(&want, 0, sizeof want);

    for (size_t i = 0; i < NELEM(convs); i++) {
        if (strcmp(convs[i].name, "largest messages") == 0) {
            len = conv_build(&convs[i], s, &want);
            break;
        }
    }
    assert_int_equal(want.consumed, SOCKS5_GREETING_MAX + SOCKS5_AUTH_MAX + SOCKS5_REQUEST_MAX);
    assert_true(len > want.consumed);
}

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */

#define GREET0 "\x05\x01\x00"                           /* no-auth greeting */
#define GREET2 "\x05\x01\x02"                           /* user/pass greeting */
#define AUTH_UP "\x01\x01u\x01p"                        /* user "u", password "p" */
#define REQ4 "\x05\x01\x00\x01\x01\x02\x03\x04\x00\x50" /* CONNECT 1.2.3.4:80 */

struct err_case {
    const char *name;
    int auth_required;
    const uint8_t *bytes;
    size_t len;
    enum socks5_result want;
    size_t want_consumed; /* up to and including the byte that proved the error */
    const uint8_t *reply; /* socks5_error_reply(want) */
    size_t reply_len;
};

#define R_NONE NULL, 0
#define R_SOCKS4 S("\x00\x5b\x00\x00\x00\x00\x00\x00")
#define R_NOMETHOD S("\x05\xff")
#define R_AUTHFAIL S("\x01\x01")
#define R_GENERAL S("\x05\x01\x00\x01\x00\x00\x00\x00\x00\x00")
#define R_CMD S("\x05\x07\x00\x01\x00\x00\x00\x00\x00\x00")
#define R_ATYP S("\x05\x08\x00\x01\x00\x00\x00\x00\x00\x00")

static const struct err_case errs[] = {
    /* Not SOCKS5 at all. */
    {"socks4 connect", 0,
     S("\x04\x01\x00\x50\x01\x02\x03\x04"
       "user\0"),
     SOCKS5_ERR_SOCKS4, 1, R_SOCKS4},
    {"socks4a connect", 0,
     S("\x04\x01\x00\x50\x00\x00\x00\x01"
       "\0host.example\0"),
     SOCKS5_ERR_SOCKS4, 1, R_SOCKS4},
    {"socks4 with creds configured", 1, S("\x04\x02\x00\x15\x01\x02\x03\x04\0"), SOCKS5_ERR_SOCKS4,
     1, R_SOCKS4},
    {"version 0x00", 0, S("\x00\x01\x00"), SOCKS5_ERR_VERSION, 1, R_NONE},
    {"version 0xFF", 0, S("\xff\x01\x00"), SOCKS5_ERR_VERSION, 1, R_NONE},
    {"version 0x01", 0, S("\x01\x01\x00"), SOCKS5_ERR_VERSION, 1, R_NONE},
    {"version 0x06", 0, S("\x06\x01\x00"), SOCKS5_ERR_VERSION, 1, R_NONE},
    {"http client (GET)", 0, S("GET / HTTP/1.1\r\nHost: example.com\r\n\r\n"), SOCKS5_ERR_VERSION,
     1, R_NONE},
    {"http client (CONNECT)", 1, S("CONNECT example.com:443 HTTP/1.1\r\n\r\n"), SOCKS5_ERR_VERSION,
     1, R_NONE},
    {"tls client", 0, S("\x16\x03\x01\x02\x00"), SOCKS5_ERR_VERSION, 1, R_NONE},
    /* Greeting. */
    {"NMETHODS 0", 0, S("\x05\x00" GREET0), SOCKS5_ERR_NO_METHODS, 2, R_NOMETHOD},
    {"NMETHODS 0, creds", 1, S("\x05\x00"), SOCKS5_ERR_NO_METHODS, 2, R_NOMETHOD},
    /* RFC 1929. */
    {"auth version 0x05", 1, S(GREET2 "\x05\x01u\x01p" REQ4), SOCKS5_ERR_AUTH_VERSION, 4,
     R_AUTHFAIL},
    {"auth version 0x00", 1, S(GREET2 "\x00\x01u\x01p"), SOCKS5_ERR_AUTH_VERSION, 4, R_AUTHFAIL},
    {"auth ULEN 0", 1, S(GREET2 "\x01\x00\x04pass"), SOCKS5_ERR_AUTH_EMPTY, 5, R_AUTHFAIL},
    {"auth PLEN 0", 1, S(GREET2 "\x01\x04user\x00" REQ4), SOCKS5_ERR_AUTH_EMPTY, 10, R_AUTHFAIL},
    /* Request. */
    {"request version 0x04", 0, S(GREET0 "\x04\x01\x00\x01\x01\x02\x03\x04\x00\x50"),
     SOCKS5_ERR_REQ_VERSION, 4, R_GENERAL},
    {"request version 0x01 after auth", 1, S(GREET2 AUTH_UP "\x01\x01\x00\x01\x01\x02\x03\x04"),
     SOCKS5_ERR_REQ_VERSION, 9, R_GENERAL},
    {"request RSV 0x01", 0, S(GREET0 "\x05\x01\x01\x01\x01\x02\x03\x04\x00\x50"),
     SOCKS5_ERR_REQ_RSV, 6, R_GENERAL},
    {"request RSV 0xFF", 0, S(GREET0 "\x05\x01\xff\x03\x01x\x00\x50"), SOCKS5_ERR_REQ_RSV, 6,
     R_GENERAL},
    {"ATYP 0x00", 0, S(GREET0 "\x05\x01\x00\x00\x01\x02\x03\x04\x00\x50"), SOCKS5_ERR_ATYP, 7,
     R_ATYP},
    {"ATYP 0x02", 0, S(GREET0 "\x05\x01\x00\x02\x01\x02\x03\x04\x00\x50"), SOCKS5_ERR_ATYP, 7,
     R_ATYP},
    {"ATYP 0x05", 0, S(GREET0 "\x05\x01\x00\x05\x01\x02\x03\x04\x00\x50"), SOCKS5_ERR_ATYP, 7,
     R_ATYP},
    {"ATYP 0xFF after auth", 1, S(GREET2 AUTH_UP "\x05\x01\x00\xff"), SOCKS5_ERR_ATYP, 12, R_ATYP},
    {"domain length 0", 0, S(GREET0 "\x05\x01\x00\x03\x00\x00\x50"), SOCKS5_ERR_DOMAIN_EMPTY, 8,
     R_GENERAL},
    /* Which error wins when there are two: the first malformed byte, and a
     * command is judged last. */
    {"BIND with RSV 0x01", 0, S(GREET0 "\x05\x02\x01\x01\x01\x02\x03\x04\x00\x50"),
     SOCKS5_ERR_REQ_RSV, 6, R_GENERAL},
    {"UDP with ATYP 0x02", 0, S(GREET0 "\x05\x03\x00\x02\x01\x02\x03\x04\x00\x50"), SOCKS5_ERR_ATYP,
     7, R_ATYP},
    {"unknown command, domain length 0", 0, S(GREET0 "\x05\x09\x00\x03\x00\x00\x50"),
     SOCKS5_ERR_DOMAIN_EMPTY, 8, R_GENERAL},
    {"BIND", 0,
     S(GREET0 "\x05\x02\x00\x01\x01\x02\x03\x04\x00\x15"
              "tail"),
     SOCKS5_ERR_CMD, 13, R_CMD},
};

static void test_errors(void **state)
{
    size_t fails = 0;
    (void)state;

    for (size_t i = 0; i < NELEM(errs); i++) {
        const struct err_case *e = &errs[i];
        struct input in = {e->auth_required, 1, e->bytes, e->len};
        struct outcome whole;
        size_t chunk[1] = {e->len};
        uint8_t reply[SOCKS5_REPLY_LEN];
        size_t rlen;
        char name[160], why[512];

        snprintf(name, sizeof name, "error '%s'", e->name);
        if (drive(&in, chunk, 1, &whole, why, sizeof why) != 0) {
            row_fail(name, "%s", why);
            fails++;
            continue;
        }
        if (whole.final != e->want || whole.consumed != e->want_consumed) {
            row_fail(name, "got '%s' after %zu bytes, want '%s' after %zu", rname(whole.final),
                     whole.consumed, rname(e->want), e->want_consumed);
            fails++;
        }
        memset(reply, 0xAA, sizeof reply);
        rlen = socks5_error_reply(whole.final, reply);
        if (rlen != e->reply_len || (rlen > 0 && memcmp(reply, e->reply, rlen) != 0)) {
            row_fail(name, "reply of %zu bytes, want %zu (or bytes differ)", rlen, e->reply_len);
            fails++;
        }
        fails += check_stream(name, &in, &whole, SPLITS);
    }
    assert_int_equal(fails, 0);
}

/* ------------------------------------------------------------------------ */
/* Auth and state handling                                                   */

static void test_auth_flow(void **state)
{
    static const uint8_t stream[] = GREET2 "\x01\x05"
                                           "alice\x06"
                                           "s3cret" REQ4 "early";
    struct socks5_parser p;
    size_t used, off = 0;
    (void)state;

    /* Refused credentials: nothing after the auth message is consumed. */
    {
        struct input in = {1, 0, stream, sizeof stream - 1};
        struct outcome o;
        char why[256];
        size_t chunk[1] = {in.len};
        assert_int_equal(drive(&in, chunk, 1, &o, why, sizeof why), 0);
        assert_int_equal(o.final, SOCKS5_AUTH_DONE);
        assert_int_equal(o.consumed, 3 + 1 + 1 + 5 + 1 + 6);
        assert_int_equal(o.have_req, 0);
        assert_int_equal(check_stream("auth refused", &in, &o, 200), 0);
    }

    /* By hand: the request waits for socks5_auth_result(). */
    socks5_parser_init(&p, 1);
    assert_int_equal(socks5_feed(&p, stream, sizeof stream - 1, &used), SOCKS5_GREETING_DONE);
    assert_int_equal(used, 3);
    assert_int_equal(p.method, SOCKS5_METHOD_USERPASS);
    off += used;
    assert_int_equal(socks5_feed(&p, stream + off, sizeof stream - 1 - off, &used),
                     SOCKS5_AUTH_DONE);
    assert_int_equal(used, 14);
    off += used;
    assert_int_equal(p.user_len, 5);
    assert_memory_equal(p.user, "alice", 5);
    assert_int_equal(p.pass_len, 6);
    assert_memory_equal(p.pass, "s3cret", 6);
    assert_true(frontend_secret_equal(p.user, p.user_len, (const uint8_t *)"alice", 5));
    assert_false(frontend_secret_equal(p.pass, p.pass_len, (const uint8_t *)"s3cre", 5));
    for (int i = 0; i < 3; i++) {
        used = 42;
        assert_int_equal(socks5_feed(&p, stream + off, sizeof stream - 1 - off, &used),
                         SOCKS5_ERR_STATE);
        assert_int_equal(used, 0);
    }
    socks5_auth_result(&p, 1);
    assert_int_equal(p.user_len, 0);
    assert_int_equal(p.pass_len, 0);
    assert_int_equal(socks5_feed(&p, stream + off, sizeof stream - 1 - off, &used),
                     SOCKS5_REQUEST_DONE);
    assert_int_equal(used, 10);
    off += used;
    assert_memory_equal(stream + off, "early", 5);
    assert_int_equal(p.req.cmd, SOCKS5_CMD_CONNECT);
    assert_int_equal(p.req.atyp, SOCKS5_ATYP_IPV4);
    assert_int_equal(p.req.addr_len, 4);
    assert_memory_equal(p.req.addr, "\x01\x02\x03\x04", 4);
    assert_int_equal(p.req.port, 80);
    /* Finished: refuses, consumes nothing. */
    used = 42;
    assert_int_equal(socks5_feed(&p, stream + off, 5, &used), SOCKS5_ERR_STATE);
    assert_int_equal(used, 0);
    used = 42;
    assert_int_equal(socks5_feed(&p, NULL, 0, &used), SOCKS5_ERR_STATE);
    assert_int_equal(used, 0);

    /* socks5_auth_result() out of turn fails the parser. */
    socks5_parser_init(&p, 0);
    socks5_auth_result(&p, 1);
    used = 42;
    assert_int_equal(socks5_feed(&p, (const uint8_t *)GREET0, 3, &used), SOCKS5_ERR_STATE);
    assert_int_equal(used, 0);

    /* An empty feed on a fresh parser is NEED_MORE. */
    socks5_parser_init(&p, 0);
    used = 42;
    assert_int_equal(socks5_feed(&p, NULL, 0, &used), SOCKS5_NEED_MORE);
    assert_int_equal(used, 0);
}

/* ------------------------------------------------------------------------ */
/* Replies                                                                   */

static void test_replies(void **state)
{
    uint8_t out[SOCKS5_REPLY_LEN];
    static const struct {
        enum socks5_result r;
        size_t len;
        const uint8_t *bytes;
    } table[] = {
        {SOCKS5_NEED_MORE, 0, NULL},
        {SOCKS5_GREETING_DONE, 0, NULL},
        {SOCKS5_AUTH_DONE, 0, NULL},
        {SOCKS5_REQUEST_DONE, 0, NULL},
        {SOCKS5_ERR_SOCKS4, 8, (const uint8_t *)"\x00\x5b\x00\x00\x00\x00\x00\x00"},
        {SOCKS5_ERR_VERSION, 0, NULL},
        {SOCKS5_ERR_NO_METHODS, 2, (const uint8_t *)"\x05\xff"},
        {SOCKS5_ERR_AUTH_VERSION, 2, (const uint8_t *)"\x01\x01"},
        {SOCKS5_ERR_AUTH_EMPTY, 2, (const uint8_t *)"\x01\x01"},
        {SOCKS5_ERR_REQ_VERSION, 10, (const uint8_t *)"\x05\x01\x00\x01\x00\x00\x00\x00\x00\x00"},
        {SOCKS5_ERR_REQ_RSV, 10, (const uint8_t *)"\x05\x01\x00\x01\x00\x00\x00\x00\x00\x00"},
        {SOCKS5_ERR_ATYP, 10, (const uint8_t *)"\x05\x08\x00\x01\x00\x00\x00\x00\x00\x00"},
        {SOCKS5_ERR_DOMAIN_EMPTY, 10, (const uint8_t *)"\x05\x01\x00\x01\x00\x00\x00\x00\x00\x00"},
        {SOCKS5_ERR_CMD, 10, (const uint8_t *)"\x05\x07\x00\x01\x00\x00\x00\x00\x00\x00"},
        {SOCKS5_ERR_STATE, 0, NULL},
    };
    size_t fails = 0;
    (void)state;

    for (size_t i = 0; i < NELEM(table); i++) {
        const char *s = socks5_result_str(table[i].r);
        size_t n;
        memset(out, 0xAA, sizeof out);
        n = socks5_error_reply(table[i].r, out);
        if (n != table[i].len || (n > 0 && memcmp(out, table[i].bytes, n) != 0)) {
            row_fail("error reply", "'%s': %zu bytes, want %zu (or bytes differ)", s, n,
                     table[i].len);
            fails++;
        }
        if (s == NULL || strcmp(s, "unknown") == 0) {
            row_fail("result text", "result %d has no text", (int)table[i].r);
            fails++;
        }
    }
    assert_int_equal(fails, 0);

    for (unsigned code = SOCKS5_REP_SUCCEEDED; code <= SOCKS5_REP_ATYP_UNSUPPORTED; code++) {
        uint8_t want[SOCKS5_REPLY_LEN] = {5, (uint8_t)code, 0, 1, 0, 0, 0, 0, 0, 0};
        memset(out, 0xAA, sizeof out);
        assert_int_equal(socks5_reply(out, (enum socks5_reply_code)code), SOCKS5_REPLY_LEN);
        assert_memory_equal(out, want, SOCKS5_REPLY_LEN);
    }
    assert_int_equal(SOCKS5_REP_NOT_ALLOWED, 2);
    assert_int_equal(SOCKS5_REP_HOST_UNREACH, 4);
    assert_int_equal(SOCKS5_REP_REFUSED, 5);
    assert_int_equal(SOCKS5_REP_TTL_EXPIRED, 6);
    assert_int_equal(SOCKS5_REP_CMD_UNSUPPORTED, 7);
    assert_int_equal(SOCKS5_REP_ATYP_UNSUPPORTED, 8);

    memset(out, 0xAA, sizeof out);
    assert_int_equal(socks5_socks4_reject(out), 8);
    assert_memory_equal(out, "\x00\x5b\x00\x00\x00\x00\x00\x00", 8);
    assert_int_equal(socks5_method_reply(out, SOCKS5_METHOD_NO_AUTH), 2);
    assert_memory_equal(out, "\x05\x00", 2);
    assert_int_equal(socks5_method_reply(out, SOCKS5_METHOD_USERPASS), 2);
    assert_memory_equal(out, "\x05\x02", 2);
    assert_int_equal(socks5_method_reply(out, SOCKS5_METHOD_NONE), 2);
    assert_memory_equal(out, "\x05\xff", 2);
    assert_int_equal(socks5_auth_reply(out, 1), 2);
    assert_memory_equal(out, "\x01\x00", 2);
    assert_int_equal(socks5_auth_reply(out, 0), 2);
    assert_memory_equal(out, "\x01\x01", 2);
}

/* ------------------------------------------------------------------------ */
/* frontend_secret_equal                                                         */

static void test_auth_equal(void **state)
{
    static uint8_t big1[255], big2[255];
    static const struct {
        const char *note;
        const uint8_t *a;
        size_t alen;
        const uint8_t *b;
        size_t blen;
        int want;
    } table[] = {
        {"equal", S("secret"), S("secret"), 1},
        {"both empty", S(""), S(""), 1},
        {"both NULL, empty", NULL, 0, NULL, 0, 1},
        {"empty vs one", S(""), S("a"), 0},
        {"one vs NULL", S("a"), NULL, 0, 0},
        {"prefix", S("secre"), S("secret"), 0},
        {"prefix, other side", S("secret"), S("secre"), 0},
        {"last byte", S("secret"), S("secreT"), 0},
        {"first byte", S("secret"), S("Secret"), 0},
        {"same length, all differ", S("abc"), S("xyz"), 0},
        {"NUL padding is not equality", S("ab\0"), S("ab"), 0},
        {"NUL padding, other side", S("ab"), S("ab\0"), 0},
        {"embedded NUL, equal", S("a\0b"), S("a\0b"), 1},
        {"embedded NUL, differ", S("a\0b"), S("a\0c"), 0},
        {"high bytes", S("\xff\xfe"), S("\xff\xfe"), 1},
        {"255 equal", big1, 255, big1, 255, 1},
        {"255, last differs", big1, 255, big2, 255, 0},
        {"255 vs 254", big1, 255, big1, 254, 0},
    };
    size_t fails = 0;
    (void)state;

    for (size_t i = 0; i < sizeof big1; i++)
        big1[i] = big2[i] = (uint8_t)(i * 7 + 1);
    big2[254] ^= 0x80;

    for (size_t i = 0; i < NELEM(table); i++) {
        int got = frontend_secret_equal(table[i].a, table[i].alen, table[i].b, table[i].blen);
        int rev = frontend_secret_equal(table[i].b, table[i].blen, table[i].a, table[i].alen);
        if (got != table[i].want || rev != table[i].want) {
            row_fail("auth_equal", "'%s': got %d / %d reversed, want %d", table[i].note, got, rev,
                     table[i].want);
            fails++;
        }
    }
    assert_int_equal(fails, 0);
}

/* ------------------------------------------------------------------------ */
/* Garbage                                                                   */

/* 100k inputs: pure noise, noise behind a SOCKS5 first byte, and valid
 * conversations with bytes flipped, cut or appended. Each is fed in random
 * splits (the driver checks the contract on every call), must end in
 * NEED_MORE, a DONE result or an error, and must give the same outcome as
 * the whole-buffer run. */
static void test_garbage(void **state)
{
    static uint8_t s[STREAM_MAX];
    static size_t chunks[STREAM_MAX * 2 + 8];
    size_t fails = 0, ends[5] = {0};
    (void)state;

    for (size_t it = 0; it < GARBAGE_RUNS && fails < 5; it++) {
        struct input in = {(int)rng_below(2), (int)rng_below(2), s, 0};
        struct outcome whole, o;
        char why[512], name[96];
        size_t mode = rng_below(3), n;

        if (mode == 0) {
            in.len = rng_below(700);
            for (size_t i = 0; i < in.len; i++)
                s[i] = (uint8_t)rng_next();
        } else if (mode == 1) {
            in.len = 1 + rng_below(700);
            for (size_t i = 0; i < in.len; i++)
                s[i] = (uint8_t)(rng_below(4) == 0 ? rng_below(6) : rng_next());
            s[0] = 5;
        } else {
            const struct conv *c = &convs[rng_below(NELEM(convs))];
            size_t flips = rng_below(5);
            in.len = conv_build(c, s, &whole);
            in.auth_required = rng_below(8) == 0 ? !c->auth_required : c->auth_required;
            for (size_t f = 0; f < flips && in.len > 0; f++)
                s[rng_below(in.len)] = (uint8_t)rng_next();
            if (rng_below(4) == 0)
                in.len = rng_below(in.len + 1);
            else if (rng_below(4) == 0)
                while (in.len < STREAM_MAX && rng_below(50) != 0)
                    s[in.len++] = (uint8_t)rng_next();
        }
        snprintf(name, sizeof name, "garbage %zu (mode %zu, seed 0x%llx)", it, mode,
                 (unsigned long long)rng_seed);

        n = whole_chunks(in.len, chunks);
        if (drive(&in, chunks, n, &whole, why, sizeof why) != 0) {
            row_fail(name, "whole: %s", why);
            fails++;
            continue;
        }
        n = random_chunks(in.len, chunks, NELEM(chunks));
        if (drive(&in, chunks, n, &o, why, sizeof why) != 0) {
            row_fail(name, "split: %s", why);
            fails++;
            continue;
        }
        if (outcome_cmp(&o, &whole, why, sizeof why) != 0) {
            row_fail(name, "split vs whole: %s", why);
            fails++;
            continue;
        }
        switch (o.final) {
        case SOCKS5_NEED_MORE:
            ends[0]++;
            if (o.consumed != in.len) {
                row_fail(name, "NEED_MORE after %zu of %zu bytes", o.consumed, in.len);
                fails++;
            }
            break;
        case SOCKS5_GREETING_DONE:
        case SOCKS5_AUTH_DONE:
            ends[1]++;
            break;
        case SOCKS5_REQUEST_DONE:
            ends[2]++;
            break;
        case SOCKS5_ERR_SOCKS4:
        case SOCKS5_ERR_VERSION:
        case SOCKS5_ERR_NO_METHODS:
        case SOCKS5_ERR_AUTH_VERSION:
        case SOCKS5_ERR_AUTH_EMPTY:
        case SOCKS5_ERR_REQ_VERSION:
        case SOCKS5_ERR_REQ_RSV:
        case SOCKS5_ERR_ATYP:
        case SOCKS5_ERR_DOMAIN_EMPTY:
        case SOCKS5_ERR_CMD: {
            uint8_t reply[SOCKS5_REPLY_LEN];
            size_t rl = socks5_error_reply(o.final, reply);
            ends[3]++;
            if (rl != 0 && rl != 2 && rl != 8 && rl != 10) {
                row_fail(name, "reply of %zu bytes", rl);
                fails++;
            }
            break;
        }
        case SOCKS5_ERR_STATE:
        default:
            ends[4]++;
            row_fail(name, "ended in '%s'", rname(o.final));
            fails++;
            break;
        }
    }
    print_message("garbage: %zu need-more, %zu refused greeting/auth, %zu requests, %zu errors\n",
                  ends[0], ends[1], ends[2], ends[3]);
    assert_int_equal(fails, 0);
    /* The generator must reach every ending, or the test proves little. */
    assert_true(ends[0] > 0 && ends[1] > 0 && ends[2] > 0 && ends[3] > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid),   cmocka_unit_test(test_caps),
        cmocka_unit_test(test_errors),  cmocka_unit_test(test_auth_flow),
        cmocka_unit_test(test_replies), cmocka_unit_test(test_auth_equal),
        cmocka_unit_test(test_garbage),
    };
    return cmocka_run_group_tests(tests, setup_tables, NULL);
}
