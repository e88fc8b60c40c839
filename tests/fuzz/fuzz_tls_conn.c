/* tests/fuzz/fuzz_tls_conn.c - a tls_conn fed hostile bytes (tls/conn.c).
 *
 * The first byte picks the side and the chunk size; the rest is what the
 * peer sends.
 *   server (even): a terminating connection for "fuzz.example" reads the
 *     bytes as a client's (a ClientHello, then whatever follows); when it
 *     asks for a leaf the mint job runs at once and the handshake resumes.
 *   client (odd): an upstream connection to "fuzz.example" has sent its
 *     ClientHello and reads the bytes as the origin's answer.
 * The bytes go in chunks of 1..64 bytes (or all at once), every second
 * chunk through the copy-free input (tls_in_new, tls_conn_feed_in); after
 * every chunk the output is drained (more than 200 bytes pending: all of it
 * at once with tls_conn_take_out_buf, then in pieces of 100 bytes) and
 * plaintext read and, once open, answered. Checked on every step: the state only moves
 * forward (HANDSHAKE/NEED_LEAF -> OPEN -> CLOSED, any -> FAILED, never
 * back), FAILED always has a reason and nothing else does, tls_conn_feed
 * fails exactly when the connection has failed, a mint job exists exactly
 * in NEED_LEAF, no plaintext before OPEN, take_out never returns more than
 * asked nor more than pending, take_out_buf exactly what is pending. The CA, leaves and contexts are made once
 * per process (the leaf is minted once, then cached).
 *
 * Seeds (corpus/tls_conn/): ClientHellos of Python's ssl (server side),
 * an origin's first flight (client side).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "fuzz.h"
#include "tls/tls.h"

static struct tls_ca *ca;
static struct tls_leaves *lv;
static struct tls_server_ctx *sctx;
static struct tls_client_ctx *cctx;

static void init_once(void)
{
    char err[256], path[] = "/tmp/fuzz_tls_conn.XXXXXX";
    int fd;

    if (sctx != NULL)
        return;
    fd = mkstemp(path);
    FUZZ_CHECK(fd >= 0);
    close(fd);
    FUZZ_CHECK(tls_ca_generate(1, &ca, err, sizeof(err)) == 0);
    FUZZ_CHECK(tls_leaves_new(ca, NULL, &lv, err, sizeof(err)) == 0);
    FUZZ_CHECK(tls_server_ctx_new(lv, &sctx, err, sizeof(err)) == 0);
    FUZZ_CHECK(tls_ca_write_cert(ca, path, err, sizeof(err)) == 0);
    FUZZ_CHECK(tls_client_ctx_new(path, NULL, 0, &cctx, err, sizeof(err)) == 0);
    unlink(path);
}

static int rank(enum tls_conn_state s)
{
    switch (s) {
    case TLS_CONN_HANDSHAKE:
    case TLS_CONN_NEED_LEAF:
        return 0;
    case TLS_CONN_OPEN:
        return 1;
    case TLS_CONN_CLOSED:
        return 2;
    default:
        return 3;
    }
}

static void check_state(struct tls_conn *c, enum tls_conn_state *last)
{
    enum tls_conn_state s = tls_conn_state(c);

    FUZZ_CHECK(rank(s) >= rank(*last));
    FUZZ_CHECK((s == TLS_CONN_FAILED) == (tls_conn_reason(c) != NULL));
    *last = s;
}

/* Drains the output and the plaintext; answers plaintext once open. */
static void drain(struct tls_conn *c, enum tls_conn_state *last)
{
    uint8_t buf[4096];
    size_t n, got, pending = tls_conn_pending_out(c);

    if (pending > 200) {
        char *d = NULL;
        size_t len = 0;
        struct tls_out *o = tls_conn_take_out_buf(c, &d, &len);
        FUZZ_CHECK(o != NULL && d != NULL && len == pending);
        FUZZ_CHECK(tls_conn_pending_out(c) == 0);
        tls_out_free(o);
    }
    for (;;) {
        pending = tls_conn_pending_out(c);
        n = tls_conn_take_out(c, buf, 100);
        FUZZ_CHECK(n <= 100 && n <= pending);
        if (n == 0)
            break;
    }
    for (int i = 0; i < 64; i++) {
        int rc = tls_conn_read(c, buf, sizeof(buf), &got);
        check_state(c, last);
        FUZZ_CHECK(got <= sizeof(buf));
        if (rc < 0 || got == 0) {
            FUZZ_CHECK(rc == 0 || rc == UV_EOF || rc == UV_EPROTO);
            FUZZ_CHECK(rc != UV_EPROTO || *last == TLS_CONN_FAILED);
            FUZZ_CHECK(rc != UV_EOF || *last == TLS_CONN_CLOSED);
            break;
        }
        FUZZ_CHECK(*last == TLS_CONN_OPEN);
        FUZZ_CHECK(tls_conn_write(c, buf, got) == 0);
    }
    check_state(c, last);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    enum tls_conn_state last = TLS_CONN_HANDSHAKE;
    struct tls_conn *c;
    size_t chunk, off = 1;
    unsigned k = 0;
    int server;

    if (size < 1)
        return 0;
    init_once();
    server = (data[0] & 1) == 0;
    chunk = (data[0] >> 1) == 0 ? size : (size_t)(data[0] >> 1) % 64 + 1;
    c = server ? tls_conn_server_new(sctx, "fuzz.example") : tls_conn_client_new(cctx, "fuzz.example");
    FUZZ_CHECK(c != NULL);
    if (!server)
        FUZZ_CHECK(tls_conn_pending_out(c) > 0); /* the ClientHello */
    drain(c, &last);
    while (off < size) {
        size_t n = size - off < chunk ? size - off : chunk;
        int rc;
        if (k++ % 2 == 1) { /* the engine takes the buffer */
            char *d = NULL;
            struct tls_in *in = tls_in_new(n, &d);
            FUZZ_CHECK(in != NULL && d != NULL);
            memcpy(d, data + off, n);
            rc = tls_conn_feed_in(c, in, n);
        } else {
            char *piece = fuzz_dup(data + off, n, 0);
            rc = tls_conn_feed(c, piece, n);
            free(piece);
        }
        off += n;
        check_state(c, &last);
        FUZZ_CHECK((rc == UV_EPROTO) == (last == TLS_CONN_FAILED));
        FUZZ_CHECK(rc == 0 || rc == UV_EPROTO);
        if (last == TLS_CONN_NEED_LEAF) {
            struct tls_mint *m = tls_conn_mint_job(c);
            FUZZ_CHECK(m != NULL && server);
            FUZZ_CHECK(tls_conn_mint_job(c) == NULL);
            tls_mint_run(m);
            rc = tls_conn_resume(c, m);
            check_state(c, &last);
            FUZZ_CHECK((rc == UV_EPROTO) == (last == TLS_CONN_FAILED));
            FUZZ_CHECK(last != TLS_CONN_NEED_LEAF);
        } else {
            FUZZ_CHECK(tls_conn_mint_job(c) == NULL);
        }
        drain(c, &last);
        if (last == TLS_CONN_FAILED)
            break;
    }
    if (last == TLS_CONN_OPEN)
        FUZZ_CHECK(tls_conn_shutdown(c) == 0);
    tls_conn_free(c);
    return 0;
}
