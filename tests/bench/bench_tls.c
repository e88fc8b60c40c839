/* tests/bench/bench_tls.c - tls/ in-process: mint time, handshakes per
 * second, server-side TLS CPU per handshake, memory per held connection,
 * bulk throughput.
 *
 *   bench_tls [SECONDS] [HELD]
 *
 * No socket: an OpenSSL client (verifying the leaf against the CA, as curl
 * would) talks to a tls_conn through memory buffers on this one thread.
 *   mint       tls_leaves_mint of distinct names: microseconds per leaf
 *   handshake  new client + new tls_conn, full TLS 1.3 handshake (leaf
 *              cached), one 100-byte request and response, both freed:
 *              handshakes/s on one core for client and server together, and
 *              the server's share (thread CPU time inside tls_conn_* calls)
 *   cold       the same with a new name each time (miss -> mint -> resume)
 *   held       HELD (default 2000) server connections kept after their
 *              handshake and one exchange, clients freed: heap bytes per
 *              connection (mallinfo2 delta)
 *   bulk       64 MiB each way through one connection: MB/s and the
 *              server's CPU per GiB, decrypting and encrypting
 *   upstream   tls_conn as the client of an OpenSSL origin (ECDSA leaf and
 *              its CA's chain), verifying it, a new name each time:
 *              handshakes/s and the upstream side's CPU each
 *   resumed    the same, one name: the origin's session is offered again
 *   held       heap per held upstream connection
 * Prints figures next to issue 23's goals (>= 650 new terminated tunnels/s
 * per core, <= 1.5 ms TLS CPU per tunnel, <= 48 KiB per live tunnel). The
 * figures for the whole proxy come from the proxy lane; these bound what
 * tls/ itself costs. Exits 0 whatever the figures (timings are reported,
 * never asserted).
 */
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "tls/tls.h"

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what)
{
    fprintf(stderr, "bench_tls: %s\n", what);
    ERR_print_errors_fp(stderr);
    exit(1);
}

static double server_cpu; /* seconds spent inside tls_conn_* */

#define SRV(call)                                                                                  \
    do {                                                                                           \
        double t0_ = cpu();                                                                        \
        call;                                                                                      \
        server_cpu += cpu() - t0_;                                                                 \
    } while (0)

struct client {
    SSL *ssl;
    BIO *in, *out;
};

static SSL_CTX *client_ctx(struct tls_ca *ca)
{
    char pem[16384];
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    BIO *b;
    X509 *x;

    if (ctx == NULL || tls_ca_cert_pem(ca, pem, sizeof(pem)) < 0)
        die("client context");
    b = BIO_new_mem_buf(pem, -1);
    x = PEM_read_bio_X509(b, NULL, NULL, NULL);
    X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx), x);
    X509_free(x);
    BIO_free(b);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_alpn_protos(ctx, (const unsigned char *)"\x08http/1.1", 9);
    return ctx;
}

/* An OpenSSL peer on memory BIOs: a client of name, or (name NULL) a server. */
static void client_new(struct client *c, SSL_CTX *ctx, const char *name)
{
    c->ssl = SSL_new(ctx);
    c->in = BIO_new(BIO_s_mem());
    c->out = BIO_new(BIO_s_mem());
    BIO_set_mem_eof_return(c->in, -1);
    BIO_set_mem_eof_return(c->out, -1);
    SSL_set_bio(c->ssl, c->in, c->out);
    if (name == NULL) {
        SSL_set_accept_state(c->ssl);
        return;
    }
    SSL_set_tlsext_host_name(c->ssl, name);
    SSL_set1_host(c->ssl, name);
    SSL_set_connect_state(c->ssl);
}

static uint8_t buf[65536];

/* Moves the client's output into the server. */
static void to_server(struct client *c, struct tls_conn *s)
{
    size_t n;

    while (BIO_read_ex(c->out, buf, sizeof(buf), &n) == 1 && n > 0)
        SRV(tls_conn_feed(s, buf, n));
}

static void to_client(struct client *c, struct tls_conn *s)
{
    size_t n;

    for (;;) {
        SRV(n = tls_conn_take_out(s, buf, sizeof(buf)));
        if (n == 0)
            break;
        BIO_write(c->in, buf, (int)n);
    }
}

static void handshake(struct client *c, struct tls_conn *s)
{
    for (int round = 0; round < 20; round++) {
        int r = SSL_do_handshake(c->ssl);
        to_server(c, s);
        if (tls_conn_state(s) == TLS_CONN_NEED_LEAF) {
            struct tls_mint *m;
            SRV(m = tls_conn_mint_job(s); tls_mint_run(m); tls_conn_resume(s, m));
        }
        to_client(c, s);
        if (r == 1 && tls_conn_state(s) == TLS_CONN_OPEN)
            return;
        if (tls_conn_state(s) == TLS_CONN_FAILED)
            die(tls_conn_reason(s));
    }
    die("handshake did not finish");
}

/* One 100-byte request and response. */
static void exchange(struct client *c, struct tls_conn *s)
{
    static const char req[100] = "GET / HTTP/1.1\r\nHost: bench.example\r\n\r\n";
    size_t n, got;

    SSL_write_ex(c->ssl, req, sizeof(req), &n);
    to_server(c, s);
    SRV(tls_conn_read(s, buf, sizeof(buf), &got));
    if (got != sizeof(req))
        die("request lost");
    SRV(tls_conn_write(s, req, sizeof(req)));
    to_client(c, s);
    if (SSL_read_ex(c->ssl, buf, sizeof(buf), &n) != 1 || n != sizeof(req))
        die("response lost");
}

static void bench_handshakes(struct tls_server_ctx *sctx, SSL_CTX *cctx, double secs, int cold)
{
    double t0 = mono(), c0 = cpu(), el;
    unsigned long n = 0;
    char name[64] = "bench.example";

    server_cpu = 0;
    do {
        struct client c;
        struct tls_conn *s;
        if (cold)
            snprintf(name, sizeof(name), "cold%lu.bench.example", n);
        client_new(&c, cctx, name);
        SRV(s = tls_conn_server_new(sctx, name));
        handshake(&c, s);
        exchange(&c, s);
        SRV(tls_conn_free(s));
        SSL_free(c.ssl);
        n++;
    } while ((el = mono() - t0) < secs);
    printf("%-10s %8.0f handshakes/s (client+server, one core)   server %.3f ms CPU each"
           "   (%.2f s CPU total)\n",
           cold ? "cold" : "handshake", (double)n / el, server_cpu * 1e3 / (double)n,
           cpu() - c0);
}

static void bench_held(struct tls_server_ctx *sctx, SSL_CTX *cctx, unsigned held)
{
    struct tls_conn **conns = calloc(held, sizeof(*conns));
    struct mallinfo2 before, after;

    /* one connection first, so lazily made tables are not counted */
    struct client c;
    client_new(&c, cctx, "held.example");
    conns[0] = tls_conn_server_new(sctx, "held.example");
    handshake(&c, conns[0]);
    exchange(&c, conns[0]);
    SSL_free(c.ssl);
    malloc_trim(0);
    before = mallinfo2();
    for (unsigned i = 1; i < held; i++) {
        client_new(&c, cctx, "held.example");
        conns[i] = tls_conn_server_new(sctx, "held.example");
        handshake(&c, conns[i]);
        exchange(&c, conns[i]);
        SSL_free(c.ssl);
    }
    after = mallinfo2();
    printf("%-10s %8.0f bytes of heap per held connection (%u held, after one exchange)\n",
           "held", (double)(after.uordblks - before.uordblks) / (double)(held - 1), held);
    for (unsigned i = 0; i < held; i++)
        tls_conn_free(conns[i]);
    free(conns);
}

/* ------------------------------------------------------------------------ */
/* The upstream leg: tls_conn as the client, verifying an OpenSSL origin     */

static EVP_PKEY *origin_key;

static X509 *origin_cert(X509 *issuer, EVP_PKEY *issuer_key, EVP_PKEY *key, const char *cn,
                         const char *san, int ca)
{
    X509 *x = X509_new();
    X509_NAME *n = X509_NAME_new();
    X509V3_CTX v;
    X509_EXTENSION *e;
    const char *exts[3][2] = {{"basicConstraints", ca ? "critical,CA:TRUE" : "CA:FALSE"},
                              {"subjectKeyIdentifier", "hash"},
                              {"subjectAltName", san}};

    X509_set_version(x, X509_VERSION_3);
    ASN1_INTEGER_set(X509_get_serialNumber(x), ca ? 1 : 2);
    X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
    X509_set_subject_name(x, n);
    X509_set_issuer_name(x, issuer != NULL ? X509_get_subject_name(issuer) : n);
    X509_NAME_free(n);
    X509_gmtime_adj(X509_getm_notBefore(x), -3600);
    X509_gmtime_adj(X509_getm_notAfter(x), 86400);
    X509_set_pubkey(x, key);
    X509V3_set_ctx(&v, issuer != NULL ? issuer : x, x, NULL, NULL, 0);
    for (int i = 0; i < (san != NULL ? 3 : 2); i++) {
        e = X509V3_EXT_nconf(NULL, &v, exts[i][0], exts[i][1]);
        if (e == NULL)
            die("origin certificate extension");
        X509_add_ext(x, e, -1);
        X509_EXTENSION_free(e);
    }
    if (X509_sign(x, issuer_key != NULL ? issuer_key : key, EVP_sha256()) <= 0)
        die("origin certificate");
    return x;
}

/* An origin context (leaf for origin.example from a CA of its own); the
 * CA goes to roots_path for the upstream context. */
static SSL_CTX *origin_ctx(const char *roots_path)
{
    EVP_PKEY *cak = EVP_EC_gen("P-256");
    X509 *ca, *leaf;
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    FILE *f;

    origin_key = EVP_EC_gen("P-256");
    ca = origin_cert(NULL, NULL, cak, "bench origin CA", NULL, 1);
    leaf = origin_cert(ca, cak, origin_key, "origin.example",
                       "DNS:origin.example,DNS:*.origin.example", 0);
    SSL_CTX_use_certificate(ctx, leaf);
    SSL_CTX_use_PrivateKey(ctx, origin_key);
    SSL_CTX_add1_chain_cert(ctx, ca);
    f = fopen(roots_path, "w");
    if (f == NULL || PEM_write_X509(f, ca) != 1)
        die("cannot write the origin CA");
    fclose(f);
    X509_free(ca);
    X509_free(leaf);
    EVP_PKEY_free(cak);
    return ctx;
}

static void bench_upstream(struct tls_client_ctx *cc, SSL_CTX *octx, double secs, int fresh)
{
    double t0 = mono(), el;
    unsigned long n = 0, resumed = 0;
    char host[64] = "origin.example";

    server_cpu = 0;
    do {
        struct client o;
        struct tls_conn *s;
        if (fresh) /* a name never seen: no session to offer */
            snprintf(host, sizeof(host), "h%lu.origin.example", n);
        client_new(&o, octx, NULL);
        SRV(s = tls_conn_client_new(cc, host); to_client(&o, s));
        handshake(&o, s);
        exchange(&o, s);
        resumed += (unsigned long)tls_conn_resumed(s);
        SRV(tls_conn_free(s));
        SSL_free(o.ssl);
        n++;
    } while ((el = mono() - t0) < secs);
    printf("%-10s %8.0f handshakes/s (origin+upstream, one core)  upstream %.3f ms CPU each"
           "   (%lu of %lu resumed)\n",
           fresh ? "upstream" : "resumed", (double)n / el, server_cpu * 1e3 / (double)n, resumed, n);
}

static void bench_upstream_held(struct tls_client_ctx *cc, SSL_CTX *octx, unsigned held)
{
    struct tls_conn **conns = calloc(held, sizeof(*conns));
    struct mallinfo2 before, after;
    struct client o;

    for (unsigned i = 0; i < held; i++) {
        if (i == 1) {
            malloc_trim(0);
            before = mallinfo2();
        }
        client_new(&o, octx, NULL);
        conns[i] = tls_conn_client_new(cc, "origin.example");
        to_client(&o, conns[i]);
        handshake(&o, conns[i]);
        exchange(&o, conns[i]);
        SSL_free(o.ssl);
    }
    after = mallinfo2();
    printf("%-10s %8.0f bytes of heap per held upstream connection (%u held)\n", "held",
           (double)(after.uordblks - before.uordblks) / (double)(held - 1), held);
    for (unsigned i = 0; i < held; i++)
        tls_conn_free(conns[i]);
    free(conns);
}

static void bench_bulk(struct tls_server_ctx *sctx, SSL_CTX *cctx)
{
    const size_t total = (size_t)64 << 20, chunk = 16384;
    static uint8_t data[16384];
    struct client c;
    struct tls_conn *s;
    size_t n, got;
    double t0;

    client_new(&c, cctx, "bulk.example");
    s = tls_conn_server_new(sctx, "bulk.example");
    handshake(&c, s);

    server_cpu = 0;
    t0 = mono();
    for (size_t done = 0; done < total; done += chunk) {
        SSL_write_ex(c.ssl, data, chunk, &n);
        to_server(&c, s);
        do
            SRV(tls_conn_read(s, buf, sizeof(buf), &got));
        while (got > 0);
    }
    printf("%-10s %8.0f MB/s client->server   server %.0f ms CPU per GiB (decrypt)\n", "bulk",
           (double)total / (mono() - t0) / 1e6, server_cpu * 1e3 * (double)(1u << 30) / (double)total);

    server_cpu = 0;
    t0 = mono();
    for (size_t done = 0; done < total; done += chunk) {
        SRV(tls_conn_write(s, data, chunk));
        to_client(&c, s);
        while (SSL_read_ex(c.ssl, buf, sizeof(buf), &n) == 1)
            ;
    }
    printf("%-10s %8.0f MB/s server->client   server %.0f ms CPU per GiB (encrypt)\n", "bulk",
           (double)total / (mono() - t0) / 1e6, server_cpu * 1e3 * (double)(1u << 30) / (double)total);
    ERR_clear_error();
    tls_conn_free(s);
    SSL_free(c.ssl);
}

int main(int argc, char **argv)
{
    double secs = argc > 1 ? strtod(argv[1], NULL) : 3.0;
    unsigned held = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 10) : 2000;
    struct tls_leaves_opts o = {TLS_CACHE_MAX, 0, 0};
    struct tls_ca *ca = NULL;
    struct tls_leaves *lv = NULL;
    struct tls_server_ctx *sctx = NULL;
    char err[256], name[64];
    SSL_CTX *cctx;
    double t0, c0;
    const int mints = 2000;

    if (secs <= 0 || held < 2)
        die("usage: bench_tls [SECONDS] [HELD >= 2]");
    if (tls_ca_generate(0, &ca, err, sizeof(err)) < 0 ||
        tls_leaves_new(ca, &o, &lv, err, sizeof(err)) < 0 ||
        tls_server_ctx_new(lv, &sctx, err, sizeof(err)) < 0)
        die(err);
    cctx = client_ctx(ca);

    t0 = mono();
    c0 = cpu();
    for (int i = 0; i < mints; i++) {
        snprintf(name, sizeof(name), "m%d.bench.example", i);
        if (tls_leaves_mint(lv, name, err, sizeof(err)) < 0)
            die(err);
    }
    printf("%-10s %8.1f us per leaf (%d leaves, %.1f us CPU each)\n", "mint",
           (mono() - t0) * 1e6 / mints, mints, (cpu() - c0) * 1e6 / mints);

    bench_handshakes(sctx, cctx, secs, 0);
    bench_handshakes(sctx, cctx, secs, 1);
    bench_held(sctx, cctx, held);
    bench_bulk(sctx, cctx);

    char roots[] = "/tmp/bench_tls_roots.XXXXXX";
    int fd = mkstemp(roots);
    struct tls_client_ctx *cc = NULL;
    SSL_CTX *octx;
    if (fd < 0)
        die("mkstemp");
    close(fd);
    octx = origin_ctx(roots);
    if (tls_client_ctx_new(roots, NULL, 0, &cc, err, sizeof(err)) < 0)
        die(err);
    unlink(roots);
    bench_upstream(cc, octx, secs, 1);
    bench_upstream(cc, octx, secs, 0);
    bench_upstream_held(cc, octx, held);
    tls_client_ctx_free(cc);
    SSL_CTX_free(octx);
    EVP_PKEY_free(origin_key);

    printf("goals (issue 23, whole proxy): >= 650 new terminated tunnels/s per core, "
           "<= 1.5 ms TLS CPU per tunnel, <= 48 KiB per live tunnel\n");

    SSL_CTX_free(cctx);
    tls_server_ctx_free(sctx);
    tls_leaves_unref(lv);
    tls_ca_free(ca);
    return 0;
}
