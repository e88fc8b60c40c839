/* tests/tls/test_tls.c - tls/ (tls.h): the ClientHello sniffer, the CA,
 * leaves and their cache, the terminating and the upstream connection.
 *
 * Everything runs in memory: the peers are OpenSSL objects made here on
 * memory BIOs (never a socket), the certificates are made here with
 * OpenSSL's API into a temporary directory. The test includes OpenSSL; the
 * module's callers never do.
 *
 *   sniffer     real ClientHellos from OpenSSL clients (whole, every prefix,
 *               re-split into records of 1..N bytes) and hand-made hostile
 *               ones from a builder (bad SNI, bad lengths, duplicates,
 *               interleaved records, oversize), plus random bytes
 *   CA          per run (CA:TRUE, keyCertSign, P-256, self-signed, SKI=AKI),
 *               from files (good, mismatched key, not a CA, one file only,
 *               unreadable, encrypted key, expired, no PEM), the certificate
 *               file, the trust bundle, the Java trust store (PKCS12)
 *   leaves      the fields of a leaf for a name, 127.0.0.1 and ::1, verified
 *               by OpenSSL against the CA; the bound by the CA's notAfter;
 *               LRU eviction and the counters
 *   handshake   an OpenSSL client trusting the CA against tls_conn: cache
 *               miss -> mint on a libuv worker thread -> resume; plaintext
 *               both ways (1 MiB); the hit on the next handshake; ALPN
 *               (http/1.1, none, h2 only); close_notify; garbage
 *   upstream    tls_conn as a client against an OpenSSL server: good,
 *               expired, wrong name, unknown issuer, IP SAN, extra CA files
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include <cmocka.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/pkcs12.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "tls/tls.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

static char tmpdir[64];

static void path_in_tmp(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s/%s", tmpdir, name);
}

/* ------------------------------------------------------------------------ */
/* Certificates made by the test                                             */

struct certspec {
    const char *cn;
    const char *san;  /* "DNS:origin.test", "IP:127.0.0.1", or NULL */
    int ca;           /* CA:TRUE, keyUsage keyCertSign */
    int no_ca_ext;    /* no basicConstraints at all */
    long from, to;    /* validity, seconds from now */
    X509 *issuer;     /* NULL: self-signed */
    EVP_PKEY *issuer_key;
};

static EVP_PKEY *mkkey(void)
{
    EVP_PKEY *k = EVP_EC_gen("P-256");
    assert_non_null(k);
    return k;
}

static void add_ext(X509 *x, X509 *issuer, int nid, const char *v)
{
    X509V3_CTX ctx;
    X509_EXTENSION *e;

    X509V3_set_ctx(&ctx, issuer, x, NULL, NULL, 0);
    e = X509V3_EXT_conf_nid(NULL, &ctx, nid, v);
    assert_non_null(e);
    assert_int_equal(X509_add_ext(x, e, -1), 1);
    X509_EXTENSION_free(e);
}

static X509 *mkcert(const struct certspec *s, EVP_PKEY *key)
{
    static long serial = 1000;
    X509 *x = X509_new();
    X509 *iss;
    X509_NAME *n = X509_NAME_new();

    assert_non_null(x);
    assert_int_equal(X509_set_version(x, X509_VERSION_3), 1);
    ASN1_INTEGER_set(X509_get_serialNumber(x), serial++);
    X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)s->cn, -1, -1, 0);
    X509_set_subject_name(x, n);
    X509_NAME_free(n);
    iss = s->issuer != NULL ? s->issuer : x;
    X509_set_issuer_name(x, X509_get_subject_name(iss));
    X509_gmtime_adj(X509_getm_notBefore(x), s->from);
    X509_gmtime_adj(X509_getm_notAfter(x), s->to);
    X509_set_pubkey(x, key);
    add_ext(x, iss, NID_subject_key_identifier, "hash");
    if (s->ca) {
        add_ext(x, iss, NID_basic_constraints, "critical,CA:TRUE");
        add_ext(x, iss, NID_key_usage, "critical,keyCertSign,cRLSign");
    } else if (!s->no_ca_ext) {
        add_ext(x, iss, NID_basic_constraints, "critical,CA:FALSE");
        add_ext(x, iss, NID_ext_key_usage, "serverAuth");
    }
    if (s->issuer != NULL)
        add_ext(x, iss, NID_authority_key_identifier, "keyid:always");
    if (s->san != NULL)
        add_ext(x, iss, NID_subject_alt_name, s->san);
    assert_true(X509_sign(x, s->issuer_key != NULL ? s->issuer_key : key, EVP_sha256()) > 0);
    return x;
}

static void write_cert(X509 *x, const char *path)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(PEM_write_X509(f, x), 1);
    fclose(f);
}

static void write_key(EVP_PKEY *k, const char *path, const char *pass)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    if (pass != NULL)
        assert_int_equal(PEM_write_PrivateKey(f, k, EVP_aes_128_cbc(), (unsigned char *)pass,
                                              (int)strlen(pass), NULL, NULL),
                         1);
    else
        assert_int_equal(PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL), 1);
    fclose(f);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static X509 *pem_to_x509(const char *pem)
{
    BIO *b = BIO_new_mem_buf(pem, -1);
    X509 *x = PEM_read_bio_X509(b, NULL, NULL, NULL);
    BIO_free(b);
    assert_non_null(x);
    return x;
}

static X509 *ca_x509(const struct tls_ca *ca)
{
    char pem[16384];
    assert_true(tls_ca_cert_pem(ca, pem, sizeof(pem)) > 0);
    return pem_to_x509(pem);
}

static X509 *leaf_x509(struct tls_leaves *lv, const char *name)
{
    char pem[16384];
    assert_true(tls_leaves_cert_pem(lv, name, pem, sizeof(pem)) > 0);
    return pem_to_x509(pem);
}

/* ------------------------------------------------------------------------ */
/* ClientHellos from OpenSSL                                                 */

struct hello_opts {
    const char *sni;
    const unsigned char *alpn; /* wire format */
    unsigned alpn_len;
    int max_version; /* 0: default */
};

/* The first flight of an OpenSSL client: its ClientHello records. */
static size_t openssl_hello(const struct hello_opts *o, uint8_t *out, size_t cap)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    SSL *ssl = SSL_new(ctx);
    BIO *r = BIO_new(BIO_s_mem()), *w = BIO_new(BIO_s_mem());
    size_t n = 0;

    if (o->max_version != 0)
        SSL_set_max_proto_version(ssl, o->max_version);
    if (o->sni != NULL)
        SSL_set_tlsext_host_name(ssl, o->sni);
    if (o->alpn != NULL)
        assert_int_equal(SSL_set_alpn_protos(ssl, o->alpn, o->alpn_len), 0);
    SSL_set_bio(ssl, r, w);
    SSL_set_connect_state(ssl);
    assert_int_equal(SSL_do_handshake(ssl), -1);
    assert_int_equal(BIO_read_ex(w, out, cap, &n), 1);
    assert_true(n > 0 && n < cap);
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    return n;
}

/* Re-frames a stream of handshake records into records of at most k
 * payload bytes each. */
static size_t reframe(const uint8_t *in, size_t n, size_t k, uint8_t *out, size_t cap)
{
    uint8_t payload[65536];
    size_t plen = 0, off = 0, o = 0;

    while (off + 5 <= n) {
        size_t rl = (size_t)in[off + 3] << 8 | in[off + 4];
        memcpy(payload + plen, in + off + 5, rl);
        plen += rl;
        off += 5 + rl;
    }
    assert_int_equal(off, n);
    for (size_t i = 0; i < plen; i += k) {
        size_t c = plen - i < k ? plen - i : k;
        assert_true(o + 5 + c <= cap);
        out[o] = 22;
        out[o + 1] = 3;
        out[o + 2] = 1;
        out[o + 3] = (uint8_t)(c >> 8);
        out[o + 4] = (uint8_t)c;
        memcpy(out + o + 5, payload + i, c);
        o += 5 + c;
    }
    return o;
}

/* Every strict prefix is NEED_MORE, the whole is CLIENT_HELLO. */
static void sniff_all_prefixes(const uint8_t *d, size_t n)
{
    struct tls_hello h;

    for (size_t i = 0; i < n; i++)
        assert_int_equal(tls_sniff(d, i, &h), TLS_SNIFF_NEED_MORE);
    assert_int_equal(tls_sniff(d, n, &h), TLS_SNIFF_CLIENT_HELLO);
    assert_int_equal(h.hello_len, n);
}

static void test_sniff_openssl(void **state)
{
    static const unsigned char alpn[] = "\x02h2\x08http/1.1";
    struct hello_opts o = {"Example.COM", alpn, sizeof(alpn) - 1, 0};
    uint8_t buf[8192], re[65536], more[8192 + 16];
    struct tls_hello h;
    size_t n = openssl_hello(&o, buf, sizeof(buf)), m;

    assert_int_equal(tls_sniff(buf, n, &h), TLS_SNIFF_CLIENT_HELLO);
    assert_true(h.has_sni);
    assert_false(h.sni_bad);
    assert_string_equal(h.sni, "example.com");
    assert_true(h.alpn_offered);
    assert_true(h.alpn_h2);
    assert_true(h.alpn_http11);
    assert_int_equal(h.alpn_count, 2);
    assert_string_equal(h.alpn, "h2,http/1.1");
    assert_int_equal(h.version, 0x0304);
    assert_int_equal(h.hello_len, n);
    assert_null(h.reason);
    sniff_all_prefixes(buf, n);

    /* bytes after the hello (early data, the next flight) change nothing */
    memcpy(more, buf, n);
    memset(more + n, 0x17, 16);
    assert_int_equal(tls_sniff(more, n + 16, &h), TLS_SNIFF_CLIENT_HELLO);
    assert_int_equal(h.hello_len, n);

    /* the same hello in records of 1, 2, 7, 100 and 1000 bytes */
    static const size_t ks[] = {1, 2, 7, 100, 1000};
    for (size_t i = 0; i < NELEM(ks); i++) {
        m = reframe(buf, n, ks[i], re, sizeof(re));
        assert_int_equal(tls_sniff(re, m, &h), TLS_SNIFF_CLIENT_HELLO);
        assert_string_equal(h.sni, "example.com");
        assert_string_equal(h.alpn, "h2,http/1.1");
        if (ks[i] >= 7)
            sniff_all_prefixes(re, m);
    }
}

static void test_sniff_openssl_variants(void **state)
{
    static const unsigned char h2only[] = "\x02h2";
    uint8_t buf[8192];
    struct tls_hello h;
    struct hello_opts none = {NULL, NULL, 0, 0};
    struct hello_opts tls12 = {"a.example", NULL, 0, TLS1_2_VERSION};
    struct hello_opts grpc = {"grpc.example", h2only, 3, 0};
    size_t n;

    n = openssl_hello(&none, buf, sizeof(buf));
    assert_int_equal(tls_sniff(buf, n, &h), TLS_SNIFF_CLIENT_HELLO);
    assert_false(h.has_sni);
    assert_string_equal(h.sni, "");
    assert_false(h.alpn_offered);
    assert_int_equal(h.alpn_count, 0);

    n = openssl_hello(&tls12, buf, sizeof(buf));
    assert_int_equal(tls_sniff(buf, n, &h), TLS_SNIFF_CLIENT_HELLO);
    assert_int_equal(h.version, 0x0303);
    assert_string_equal(h.sni, "a.example");

    n = openssl_hello(&grpc, buf, sizeof(buf));
    assert_int_equal(tls_sniff(buf, n, &h), TLS_SNIFF_CLIENT_HELLO);
    assert_true(h.alpn_offered && h.alpn_h2);
    assert_false(h.alpn_http11);
}

static void test_sniff_not_tls(void **state)
{
    static const char *const rows[] = {
        "GET / HTTP/1.1\r\n", "SSH-2.0-OpenSSH_9.2\r\n", "\x16\x02\x00", "\x17\x03\x03\x00\x10",
        "\x80\x2e\x01\x03\x01", "\x15\x03\x01\x00\x02\x02\x28", "\x16\x04",
    };
    struct tls_hello h;

    for (size_t i = 0; i < NELEM(rows); i++) {
        assert_int_equal(tls_sniff((const uint8_t *)rows[i], strlen(rows[i]), &h),
                         TLS_SNIFF_NOT_TLS);
        assert_false(h.has_sni);
    }
    assert_int_equal(tls_sniff(NULL, 0, &h), TLS_SNIFF_NEED_MORE);
    assert_int_equal(tls_sniff((const uint8_t *)"\x16", 1, &h), TLS_SNIFF_NEED_MORE);
    assert_int_equal(tls_sniff((const uint8_t *)"\x16\x03", 2, &h), TLS_SNIFF_NEED_MORE);
}

/* ------------------------------------------------------------------------ */
/* Hand-made ClientHellos                                                    */

struct wbuf {
    uint8_t b[120000];
    size_t n;
};

static void put(struct wbuf *w, const void *p, size_t n)
{
    assert_true(w->n + n <= sizeof(w->b));
    memcpy(w->b + w->n, p, n);
    w->n += n;
}

static void put8(struct wbuf *w, unsigned v)
{
    uint8_t b = (uint8_t)v;
    put(w, &b, 1);
}

static void put16(struct wbuf *w, unsigned v)
{
    put8(w, v >> 8);
    put8(w, v & 0xff);
}

/* An extension whose body is given whole. */
static void ext(struct wbuf *w, unsigned type, const void *body, size_t n)
{
    put16(w, type);
    put16(w, (unsigned)n);
    put(w, body, n);
}

/* A server_name extension body with one host_name of n bytes. */
static size_t sni_body(uint8_t *out, const void *name, size_t n)
{
    out[0] = (uint8_t)((n + 3) >> 8);
    out[1] = (uint8_t)(n + 3);
    out[2] = 0;
    out[3] = (uint8_t)(n >> 8);
    out[4] = (uint8_t)n;
    memcpy(out + 5, name, n);
    return n + 5;
}

/* A ClientHello body with the given extensions block (exts == NULL: none). */
static void hello_body(struct wbuf *w, const struct wbuf *exts)
{
    uint8_t random[32] = {0};

    put16(w, 0x0303);
    put(w, random, 32);
    put8(w, 0);    /* session id */
    put16(w, 2);   /* cipher suites */
    put16(w, 0x1301);
    put8(w, 1);    /* compression */
    put8(w, 0);
    if (exts != NULL) {
        put16(w, (unsigned)exts->n);
        put(w, exts->b, exts->n);
    }
}

/* Handshake header + body, framed in records of at most k bytes. */
static void frame(struct wbuf *out, unsigned hs_type, const struct wbuf *body, size_t k)
{
    static struct wbuf hs;

    hs.n = 0;
    put8(&hs, hs_type);
    put8(&hs, (unsigned)(body->n >> 16));
    put16(&hs, (unsigned)(body->n & 0xffff));
    put(&hs, body->b, body->n);
    out->n = 0;
    for (size_t i = 0; i < hs.n; i += k) {
        size_t c = hs.n - i < k ? hs.n - i : k;
        put8(out, 22);
        put16(out, 0x0301);
        put16(out, (unsigned)c);
        put(out, hs.b + i, c);
    }
}

static struct wbuf g_exts, g_body, g_rec;

/* Sniffs a hello whose extensions are g_exts. */
static enum tls_sniff_result sniff_exts(struct tls_hello *h)
{
    g_body.n = 0;
    hello_body(&g_body, &g_exts);
    frame(&g_rec, 1, &g_body, 16384);
    return tls_sniff(g_rec.b, g_rec.n, h);
}

static enum tls_sniff_result sniff_name(const void *name, size_t n, struct tls_hello *h)
{
    uint8_t body[600];

    g_exts.n = 0;
    ext(&g_exts, 0, body, sni_body(body, name, n));
    return sniff_exts(h);
}

static void test_sniff_sni(void **state)
{
    static const struct {
        const char *name;
        size_t len; /* 0: strlen */
        int bad;
        const char *want;
    } rows[] = {
        {"api.github.com", 0, 0, "api.github.com"},
        {"A-B_c.Example.ORG", 0, 0, "a-b_c.example.org"},
        {"x", 0, 0, "x"},
        {"evil.com\0.good.com", 18, 1, NULL},
        {"a..b", 0, 1, NULL},
        {".a.b", 0, 1, NULL},
        {"a.b.", 0, 1, NULL},
        {"a b.com", 0, 1, NULL},
        {"a/b.com", 0, 1, NULL},
        {"xn--bcher-kva.example", 0, 0, "xn--bcher-kva.example"},
        {"b\xc3\xbc" "cher.example", 0, 1, NULL},
        {"1.2.3.4", 0, 1, NULL},
        {"127.1", 0, 1, NULL},
        {"[::1]", 0, 1, NULL},
        {"::1", 0, 1, NULL},
        {"host:443", 0, 1, NULL},
    };
    struct tls_hello h;
    char label[70], longname[300];

    for (size_t i = 0; i < NELEM(rows); i++) {
        size_t n = rows[i].len != 0 ? rows[i].len : strlen(rows[i].name);
        assert_int_equal(sniff_name(rows[i].name, n, &h), TLS_SNIFF_CLIENT_HELLO);
        assert_true(h.has_sni);
        if (rows[i].bad != h.sni_bad)
            fail_msg("row %zu '%s': sni_bad %d", i, rows[i].name, h.sni_bad);
        if (rows[i].bad) {
            assert_string_equal(h.sni, "");
            assert_non_null(h.reason);
        } else {
            assert_string_equal(h.sni, rows[i].want);
            assert_null(h.reason);
        }
    }
    assert_int_equal(sniff_name("evil.com\0x", 10, &h), TLS_SNIFF_CLIENT_HELLO);
    assert_string_equal(h.reason, "NUL in SNI");

    /* a 63-byte label is fine, 64 is not */
    memset(label, 'a', 64);
    assert_int_equal(sniff_name(label, 63, &h), TLS_SNIFF_CLIENT_HELLO);
    assert_false(h.sni_bad);
    assert_int_equal(sniff_name(label, 64, &h), TLS_SNIFF_CLIENT_HELLO);
    assert_true(h.sni_bad);

    /* 253 bytes are fine, 254 are not */
    for (size_t i = 0; i < sizeof(longname); i++)
        longname[i] = i % 10 == 9 ? '.' : 'b';
    assert_int_equal(sniff_name(longname, 253, &h), TLS_SNIFF_CLIENT_HELLO);
    assert_false(h.sni_bad);
    assert_int_equal(strlen(h.sni), 253);
    assert_int_equal(sniff_name(longname, 254, &h), TLS_SNIFF_CLIENT_HELLO);
    assert_true(h.sni_bad);
    assert_string_equal(h.reason, "SNI too long");
    assert_int_equal(sniff_name(longname, 290, &h), TLS_SNIFF_CLIENT_HELLO);
    assert_true(h.sni_bad);

    assert_true(tls_name_valid("a.example"));
    assert_false(tls_name_valid(""));
    assert_false(tls_name_valid("10.0.0.1"));
    assert_false(tls_name_valid("a.example."));
}

static void test_sniff_hostile(void **state)
{
    struct tls_hello h;
    uint8_t body[600];
    size_t n;

    /* two host names */
    g_exts.n = 0;
    put16(&g_exts, 0);
    put16(&g_exts, 2 + 2 * 6);
    put16(&g_exts, 2 * 6);
    for (int i = 0; i < 2; i++) {
        put8(&g_exts, 0);
        put16(&g_exts, 3);
        put(&g_exts, "a.b", 3);
    }
    assert_int_equal(sniff_exts(&h), TLS_SNIFF_MALFORMED);
    assert_string_equal(h.reason, "two host names in server_name");

    /* another name type is skipped; a host name after it counts */
    g_exts.n = 0;
    put16(&g_exts, 0);
    put16(&g_exts, 2 + 6 + 6);
    put16(&g_exts, 12);
    put8(&g_exts, 7);
    put16(&g_exts, 3);
    put(&g_exts, "x.y", 3);
    put8(&g_exts, 0);
    put16(&g_exts, 3);
    put(&g_exts, "a.b", 3);
    assert_int_equal(sniff_exts(&h), TLS_SNIFF_CLIENT_HELLO);
    assert_string_equal(h.sni, "a.b");

    /* server_name list longer than its extension */
    n = sni_body(body, "a.b", 3);
    body[1] += 1;
    g_exts.n = 0;
    ext(&g_exts, 0, body, n);
    assert_int_equal(sniff_exts(&h), TLS_SNIFF_MALFORMED);

    /* name length past the list */
    n = sni_body(body, "a.b", 3);
    body[4] = 9;
    g_exts.n = 0;
    ext(&g_exts, 0, body, n);
    assert_int_equal(sniff_exts(&h), TLS_SNIFF_MALFORMED);

    /* duplicate extension */
    g_exts.n = 0;
    ext(&g_exts, 0, body, sni_body(body, "a.b", 3));
    ext(&g_exts, 0, body, sni_body(body, "c.d", 3));
    assert_int_equal(sniff_exts(&h), TLS_SNIFF_MALFORMED);
    assert_string_equal(h.reason, "duplicate extension");

    /* an extension running past the block */
    g_exts.n = 0;
    put16(&g_exts, 99);
    put16(&g_exts, 10);
    put(&g_exts, "abc", 3);
    assert_int_equal(sniff_exts(&h), TLS_SNIFF_MALFORMED);

    /* ALPN: an empty name, a list that overruns, a good h2-only list */
    g_exts.n = 0;
    ext(&g_exts, 16, "\x00\x03\x02h2\x00", 6);
    assert_int_equal(sniff_exts(&h), TLS_SNIFF_MALFORMED);
    g_exts.n = 0;
    ext(&g_exts, 16, "\x00\x09\x02h2", 5);
    assert_int_equal(sniff_exts(&h), TLS_SNIFF_MALFORMED);
    g_exts.n = 0;
    ext(&g_exts, 16, "\x00\x03\x02h2", 5);
    assert_int_equal(sniff_exts(&h), TLS_SNIFF_CLIENT_HELLO);
    assert_true(h.alpn_h2);
    assert_false(h.alpn_http11);
    assert_false(h.has_sni);
    /* non-printable protocol names are shown as '?' */
    g_exts.n = 0;
    ext(&g_exts, 16, "\x00\x04\x03\x01,z", 6);
    assert_int_equal(sniff_exts(&h), TLS_SNIFF_CLIENT_HELLO);
    assert_string_equal(h.alpn, "??z");

    /* supported_versions: odd length */
    g_exts.n = 0;
    ext(&g_exts, 43, "\x03\x03\x04\x03", 4);
    assert_int_equal(sniff_exts(&h), TLS_SNIFF_MALFORMED);

    /* no extensions at all is a valid (old) hello */
    g_body.n = 0;
    hello_body(&g_body, NULL);
    frame(&g_rec, 1, &g_body, 16384);
    assert_int_equal(tls_sniff(g_rec.b, g_rec.n, &h), TLS_SNIFF_CLIENT_HELLO);
    assert_false(h.has_sni);

    /* bytes after the extensions block inside the hello */
    g_exts.n = 0;
    g_body.n = 0;
    hello_body(&g_body, &g_exts);
    put8(&g_body, 0);
    frame(&g_rec, 1, &g_body, 16384);
    assert_int_equal(tls_sniff(g_rec.b, g_rec.n, &h), TLS_SNIFF_MALFORMED);

    /* a ServerHello where a ClientHello should be */
    frame(&g_rec, 2, &g_body, 16384);
    assert_int_equal(tls_sniff(g_rec.b, g_rec.n, &h), TLS_SNIFF_MALFORMED);
}

static void test_sniff_fields(void **state)
{
    static const struct {
        size_t off;    /* offset into the hello body */
        uint8_t value;
        const char *reason;
    } rows[] = {
        {0, 2, "bad ClientHello version"},
        {34, 33, "bad ClientHello session id"},
        {35, 0, "bad ClientHello cipher suites"}, /* suites length high byte: 0x0003 */
        {36, 3, "bad ClientHello cipher suites"},
        {39, 0, "bad ClientHello compression methods"},
    };
    struct tls_hello h;

    for (size_t i = 0; i < NELEM(rows); i++) {
        g_body.n = 0;
        hello_body(&g_body, NULL);
        g_body.b[rows[i].off] = rows[i].value;
        if (rows[i].off == 35)
            g_body.b[36] = 3;
        frame(&g_rec, 1, &g_body, 16384);
        assert_int_equal(tls_sniff(g_rec.b, g_rec.n, &h), TLS_SNIFF_MALFORMED);
        assert_string_equal(h.reason, rows[i].reason);
    }
}

static void test_sniff_records(void **state)
{
    struct tls_hello h;
    uint8_t pad[16000];
    size_t n;

    memset(pad, 0, sizeof(pad));
    g_exts.n = 0;
    ext(&g_exts, 21, pad, 15000); /* padding */
    g_body.n = 0;
    hello_body(&g_body, &g_exts);

    /* a 15 KB hello in one record, in 100-byte records, in 1-byte records
     * (too many record headers: past TLS_SNIFF_MAX) */
    frame(&g_rec, 1, &g_body, 16384);
    assert_int_equal(tls_sniff(g_rec.b, g_rec.n, &h), TLS_SNIFF_CLIENT_HELLO);
    frame(&g_rec, 1, &g_body, 100);
    assert_int_equal(tls_sniff(g_rec.b, g_rec.n, &h), TLS_SNIFF_CLIENT_HELLO);
    n = g_rec.n;
    for (size_t i = 0; i < n; i += 997)
        assert_int_equal(tls_sniff(g_rec.b, i, &h), TLS_SNIFF_NEED_MORE);
    frame(&g_rec, 1, &g_body, 1);
    assert_true(g_rec.n > TLS_SNIFF_MAX);
    assert_int_equal(tls_sniff(g_rec.b, TLS_SNIFF_MAX - 1, &h), TLS_SNIFF_NEED_MORE);
    assert_int_equal(tls_sniff(g_rec.b, TLS_SNIFF_MAX, &h), TLS_SNIFF_MALFORMED);
    assert_string_equal(h.reason, "ClientHello too large");
    assert_int_equal(tls_sniff(g_rec.b, g_rec.n, &h), TLS_SNIFF_MALFORMED);

    /* a hello announcing more than TLS_HELLO_MAX: refused from its header */
    g_exts.n = 0;
    ext(&g_exts, 21, pad, 16000);
    ext(&g_exts, 22, pad, 1000);
    g_body.n = 0;
    hello_body(&g_body, &g_exts);
    assert_true(g_body.n > TLS_HELLO_MAX);
    frame(&g_rec, 1, &g_body, 16384);
    assert_int_equal(tls_sniff(g_rec.b, 9, &h), TLS_SNIFF_MALFORMED);
    assert_string_equal(h.reason, "ClientHello too large");

    /* record layer errors */
    g_body.n = 0;
    hello_body(&g_body, NULL);
    frame(&g_rec, 1, &g_body, 20);
    memcpy(pad, g_rec.b, g_rec.n);
    pad[25] = 0x17; /* second record: application data */
    assert_int_equal(tls_sniff(pad, g_rec.n, &h), TLS_SNIFF_MALFORMED);
    assert_string_equal(h.reason, "ClientHello interrupted by another record");
    memcpy(pad, g_rec.b, g_rec.n);
    pad[26] = 2; /* second record: version 2.x */
    assert_int_equal(tls_sniff(pad, g_rec.n, &h), TLS_SNIFF_MALFORMED);
    memcpy(pad, "\x16\x03\x01\x00\x00", 5); /* empty record */
    assert_int_equal(tls_sniff(pad, 5, &h), TLS_SNIFF_MALFORMED);
    memcpy(pad, "\x16\x03\x01\x40\x01", 5); /* 16385-byte record */
    assert_int_equal(tls_sniff(pad, 5, &h), TLS_SNIFF_MALFORMED);
    assert_string_equal(h.reason, "record too long");
}

/* Random bytes behind a handshake record header: never a crash, an answer
 * that is one of the four, and the same answer for every longer input
 * once it is not NEED_MORE. */
static void test_sniff_random(void **state)
{
    uint64_t s = 0x5eed7150ull;
    uint8_t buf[1100];
    struct tls_hello h;

    for (int run = 0; run < 20000; run++) {
        size_t n = 5 + (size_t)(s % 500);
        for (size_t i = 0; i < sizeof(buf); i++) {
            s ^= s >> 12;
            s ^= s << 25;
            s ^= s >> 27;
            buf[i] = (uint8_t)((s * 0x2545F4914F6CDD1Dull) >> 56);
        }
        buf[0] = 22;
        buf[1] = 3;
        buf[3] = (uint8_t)(run % 3);
        if (run % 2 == 0)
            buf[5] = 1;
        enum tls_sniff_result r = tls_sniff(buf, n, &h);
        assert_true(r <= TLS_SNIFF_MALFORMED);
        if (r == TLS_SNIFF_MALFORMED)
            assert_non_null(h.reason);
        /* an answer other than NEED_MORE stays the same with more bytes */
        if (r != TLS_SNIFF_NEED_MORE)
            assert_int_equal(tls_sniff(buf, sizeof(buf), &h), r);
    }
}

/* ------------------------------------------------------------------------ */
/* CA                                                                        */

static void test_ca_generate(void **state)
{
    struct tls_ca *ca = NULL;
    char err[256], path[128], pem[16384];
    X509 *x;
    EVP_PKEY *pub;
    struct stat st;
    FILE *f;
    size_t n;

    assert_int_equal(tls_ca_generate(0, &ca, err, sizeof(err)), 0);
    x = ca_x509(ca);
    assert_int_equal(X509_check_ca(x), 1);
    assert_true(X509_get_extension_flags(x) & EXFLAG_CA);
    assert_true(X509_get_key_usage(x) & KU_KEY_CERT_SIGN);
    assert_true(X509_get_extension_flags(x) & EXFLAG_SS);
    pub = X509_get0_pubkey(x);
    assert_int_equal(EVP_PKEY_get_id(pub), EVP_PKEY_EC);
    assert_int_equal(EVP_PKEY_get_bits(pub), 256);
    assert_int_equal(X509_verify(x, pub), 1);
    assert_non_null(X509_get0_subject_key_id(x));
    assert_int_equal(ASN1_OCTET_STRING_cmp(X509_get0_subject_key_id(x),
                                           X509_get0_authority_key_id(x)),
                     0);
    assert_true(X509_cmp_current_time(X509_get0_notBefore(x)) < 0);
    assert_true(X509_cmp_current_time(X509_get0_notAfter(x)) > 0);
    assert_true(tls_ca_not_after(ca) > (int64_t)time(NULL) + 364 * 86400);
    assert_null(tls_ca_warning(ca));
    X509_free(x);

    /* the certificate file: PEM, 0644, no key */
    path_in_tmp(path, sizeof(path), "ca.pem");
    assert_int_equal(tls_ca_write_cert(ca, path, err, sizeof(err)), 0);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0644);
    f = fopen(path, "r");
    n = fread(pem, 1, sizeof(pem) - 1, f);
    fclose(f);
    pem[n] = '\0';
    assert_non_null(strstr(pem, "-----BEGIN CERTIFICATE-----"));
    assert_null(strstr(pem, "PRIVATE"));
    x = pem_to_x509(pem);
    X509_free(x);

    assert_int_equal(tls_ca_generate(3651, &ca, err, sizeof(err)), UV_EINVAL);
    tls_ca_free(ca);
}

static void test_ca_bundle(void **state)
{
    struct tls_ca *ca = NULL;
    char err[256], roots[128], out[128], buf[65536], pem[8192];
    FILE *f;
    size_t n;

    assert_int_equal(tls_ca_generate(30, &ca, err, sizeof(err)), 0);
    assert_true(tls_ca_cert_pem(ca, pem, sizeof(pem)) > 0);
    path_in_tmp(roots, sizeof(roots), "roots.crt");
    path_in_tmp(out, sizeof(out), "bundle.crt");

    /* roots without a final newline: the CA still starts on its own line */
    write_text(roots, "ROOTS-A\nROOTS-B");
    assert_int_equal(tls_bundle_write(ca, roots, out, err, sizeof(err)), 0);
    f = fopen(out, "r");
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    assert_int_equal(strncmp(buf, "ROOTS-A\nROOTS-B\n", 16), 0);
    assert_string_equal(buf + 16, pem);

    write_text(roots, "ROOTS\n");
    assert_int_equal(tls_bundle_write(ca, roots, out, err, sizeof(err)), 0);
    f = fopen(out, "r");
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    assert_string_equal(buf + 6, pem);

    path_in_tmp(roots, sizeof(roots), "no-such-roots.crt");
    assert_int_equal(tls_bundle_write(ca, roots, out, err, sizeof(err)), UV_ENOENT);
    assert_non_null(strstr(err, "no-such-roots.crt"));

    /* the system roots, when this machine has them */
    if (access(TLS_SYSTEM_ROOTS, R_OK) == 0) {
        assert_int_equal(tls_bundle_write(ca, NULL, out, err, sizeof(err)), 0);
        f = fopen(out, "r");
        assert_true(fseek(f, 0, SEEK_END) == 0 && ftell(f) > (long)strlen(pem) + 1000);
        fclose(f);
    }
    tls_ca_free(ca);
}

/* Reads the PKCS12 trust store at path: the aliases of its certificate
 * bags (comma-separated into names) and how many of them carry the JDK's
 * trusted-key-usage attribute with value anyExtendedKeyUsage. */
static int read_store(const char *path, const char *pass, char *names, size_t nlen, int *trusted)
{
    FILE *f = fopen(path, "rb");
    PKCS12 *p12 = f != NULL ? d2i_PKCS12_fp(f, NULL) : NULL;
    STACK_OF(PKCS7) *safes;
    int nid = OBJ_txt2nid("2.16.840.1.113894.746875.1.1"), n = 0;

    if (f != NULL)
        fclose(f);
    *trusted = 0;
    names[0] = '\0';
    if (p12 == NULL || !PKCS12_verify_mac(p12, pass, -1)) {
        PKCS12_free(p12);
        return -1;
    }
    safes = PKCS12_unpack_authsafes(p12);
    for (int i = 0; safes != NULL && i < sk_PKCS7_num(safes); i++) {
        STACK_OF(PKCS12_SAFEBAG) *bags = PKCS12_unpack_p7data(sk_PKCS7_value(safes, i));
        for (int j = 0; bags != NULL && j < sk_PKCS12_SAFEBAG_num(bags); j++) {
            const PKCS12_SAFEBAG *bag = sk_PKCS12_SAFEBAG_value(bags, j);
            const ASN1_TYPE *t;
            char *alias = PKCS12_get_friendlyname((PKCS12_SAFEBAG *)bag);
            assert_int_equal(PKCS12_SAFEBAG_get_nid(bag), NID_certBag);
            t = nid != NID_undef ? PKCS12_get_attr_gen(PKCS12_SAFEBAG_get0_attrs(bag), nid) : NULL;
            if (t != NULL && t->type == V_ASN1_OBJECT &&
                OBJ_obj2nid(t->value.object) == NID_anyExtendedKeyUsage)
                (*trusted)++;
            snprintf(names + strlen(names), nlen - strlen(names), "%s%s", n++ > 0 ? "," : "",
                     alias != NULL ? alias : "?");
            OPENSSL_free(alias);
        }
        sk_PKCS12_SAFEBAG_pop_free(bags, PKCS12_SAFEBAG_free);
    }
    sk_PKCS7_pop_free(safes, PKCS7_free);
    PKCS12_free(p12);
    return n;
}

/* The Java trust store: the roots' certificates and the CA, each a trusted
 * certificate bag; text that is no certificate in the roots file skipped;
 * an unreadable roots file named; the MAC under the password only. */
static void test_truststore(void **state)
{
    struct tls_ca *ca = NULL, *r1 = NULL, *r2 = NULL;
    char err[256], roots[128], out[128], p1[4096], p2[4096], text[9000], names[256];
    int trusted;

    (void)state;
    assert_int_equal(tls_ca_generate(30, &ca, err, sizeof(err)), 0);
    assert_int_equal(tls_ca_generate(30, &r1, err, sizeof(err)), 0);
    assert_int_equal(tls_ca_generate(30, &r2, err, sizeof(err)), 0);
    assert_true(tls_ca_cert_pem(r1, p1, sizeof(p1)) > 0);
    assert_true(tls_ca_cert_pem(r2, p2, sizeof(p2)) > 0);
    path_in_tmp(roots, sizeof(roots), "store-roots.crt");
    path_in_tmp(out, sizeof(out), "store.p12");

    snprintf(text, sizeof(text), "# a comment\n%sjunk between\n%s-----BEGIN CERTIFICATE-----\nnot "
                                 "base64 at all\n",
             p1, p2);
    write_text(roots, text);
    assert_int_equal(tls_truststore_write(ca, roots, out, "pw", err, sizeof(err)), 0);
    assert_int_equal(read_store(out, "pw", names, sizeof(names), &trusted), 3);
    assert_string_equal(names, "root-0,root-1,sluice-run-ca");
    assert_int_equal(trusted, 3);
    assert_int_equal(read_store(out, "other", names, sizeof(names), &trusted), -1);

    /* no certificate in the roots: the CA alone */
    write_text(roots, "nothing here\n");
    assert_int_equal(tls_truststore_write(ca, roots, out, "pw", err, sizeof(err)), 0);
    assert_int_equal(read_store(out, "pw", names, sizeof(names), &trusted), 1);
    assert_string_equal(names, "sluice-run-ca");
    assert_int_equal(trusted, 1);

    path_in_tmp(roots, sizeof(roots), "no-such-store-roots.crt");
    assert_int_equal(tls_truststore_write(ca, roots, out, "pw", err, sizeof(err)), UV_ENOENT);
    assert_non_null(strstr(err, "no-such-store-roots.crt"));
    tls_ca_free(ca);
    tls_ca_free(r1);
    tls_ca_free(r2);
}

/* The files of a CA made here: cert, key, and variants. */
struct cafiles {
    char cert[128], key[128], other_key[128], leafcert[128], enc_key[128], expired[128],
        garbage[128];
};

static void make_ca_files(struct cafiles *cf)
{
    EVP_PKEY *k = mkkey(), *k2 = mkkey();
    struct certspec ca = {"test CA", NULL, 1, 0, -3600, 86400 * 30, NULL, NULL};
    struct certspec leaf = {"not a ca", NULL, 0, 0, -3600, 86400 * 30, NULL, NULL};
    struct certspec old = {"old CA", NULL, 1, 0, -86400 * 30, -86400, NULL, NULL};
    X509 *x = mkcert(&ca, k), *l = mkcert(&leaf, k2), *o = mkcert(&old, k2);

    path_in_tmp(cf->cert, sizeof(cf->cert), "ca-cert.pem");
    path_in_tmp(cf->key, sizeof(cf->key), "ca-key.pem");
    path_in_tmp(cf->other_key, sizeof(cf->other_key), "other-key.pem");
    path_in_tmp(cf->leafcert, sizeof(cf->leafcert), "leaf-cert.pem");
    path_in_tmp(cf->enc_key, sizeof(cf->enc_key), "enc-key.pem");
    path_in_tmp(cf->expired, sizeof(cf->expired), "expired-ca.pem");
    path_in_tmp(cf->garbage, sizeof(cf->garbage), "garbage.pem");
    write_cert(x, cf->cert);
    write_key(k, cf->key, NULL);
    write_key(k2, cf->other_key, NULL);
    write_cert(l, cf->leafcert);
    write_key(k, cf->enc_key, "secret");
    write_cert(o, cf->expired);
    write_text(cf->garbage, "-----BEGIN CERTIFICATE-----\nnot base64 !!\n");
    X509_free(x);
    X509_free(l);
    X509_free(o);
    EVP_PKEY_free(k);
    EVP_PKEY_free(k2);
}

static void expect_load_error(const char *cert, const char *key, int rc, const char *word,
                              const char *file)
{
    struct tls_ca *ca = NULL;
    char err[512] = "";

    assert_int_equal(tls_ca_load(cert, key, &ca, err, sizeof(err)), rc);
    assert_null(ca);
    if (strstr(err, word) == NULL || (file != NULL && strstr(err, file) == NULL))
        fail_msg("error '%s' lacks '%s' or '%s'", err, word, file != NULL ? file : "");
}

static void test_ca_files(void **state)
{
    struct cafiles cf;
    struct tls_ca *ca = NULL;
    char err[512], missing[128];

    make_ca_files(&cf);
    assert_int_equal(tls_ca_load(cf.cert, cf.key, &ca, err, sizeof(err)), 0);
    assert_non_null(ca);
    tls_ca_free(ca);

    /* certificate and key in one file, named twice */
    char both[128], cmd[512];
    path_in_tmp(both, sizeof(both), "ca-both.pem");
    snprintf(cmd, sizeof(cmd), "cat '%s' '%s' > '%s'", cf.key, cf.cert, both);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(tls_ca_load(both, both, &ca, err, sizeof(err)), 0);
    tls_ca_free(ca);
    ca = NULL;

    expect_load_error(cf.cert, cf.other_key, UV_EINVAL, "is not the key of", cf.other_key);
    expect_load_error(cf.leafcert, cf.other_key, UV_EINVAL, "not a CA", cf.leafcert);
    expect_load_error(cf.cert, NULL, UV_EINVAL, "both", NULL);
    expect_load_error(NULL, cf.key, UV_EINVAL, "both", NULL);
    expect_load_error("", cf.key, UV_EINVAL, "both", NULL);
    path_in_tmp(missing, sizeof(missing), "missing.pem");
    expect_load_error(missing, cf.key, UV_ENOENT, "cannot read", missing);
    expect_load_error(cf.cert, missing, UV_ENOENT, "cannot read", missing);
    expect_load_error(tmpdir, cf.key, UV_EISDIR, "cannot read", tmpdir);
    expect_load_error(cf.cert, cf.enc_key, UV_EINVAL, "encrypted", cf.enc_key);
    expect_load_error(cf.expired, cf.other_key, UV_EINVAL, "expired", cf.expired);
    expect_load_error(cf.garbage, cf.key, UV_EINVAL, "no PEM certificate", cf.garbage);
    expect_load_error(cf.cert, cf.cert, UV_EINVAL, "no PEM private key", cf.cert);
    expect_load_error(cf.key, cf.key, UV_EINVAL, "no PEM certificate", cf.key);
}

/* ------------------------------------------------------------------------ */
/* Leaves                                                                    */

/* OpenSSL's verdict on leaf for name (host or IP) with the CA as the only
 * trust anchor: X509_V_OK or the error. */
static int verify_leaf(X509 *leaf, X509 *cax, const char *name, int is_ip, int strict)
{
    X509_STORE *st = X509_STORE_new();
    X509_STORE_CTX *ctx = X509_STORE_CTX_new();
    X509_VERIFY_PARAM *p;
    int rc;

    X509_STORE_add_cert(st, cax);
    X509_STORE_CTX_init(ctx, st, leaf, NULL);
    p = X509_STORE_CTX_get0_param(ctx);
    X509_VERIFY_PARAM_set_purpose(p, X509_PURPOSE_SSL_SERVER);
    if (strict) /* as Python 3.13 does */
        X509_VERIFY_PARAM_set_flags(p, X509_V_FLAG_X509_STRICT);
    if (is_ip)
        X509_VERIFY_PARAM_set1_ip_asc(p, name);
    else
        X509_VERIFY_PARAM_set1_host(p, name, 0);
    rc = X509_verify_cert(ctx) == 1 ? X509_V_OK : X509_STORE_CTX_get_error(ctx);
    X509_STORE_CTX_free(ctx);
    X509_STORE_free(st);
    return rc;
}

static void check_leaf(struct tls_ca *ca, struct tls_leaves *lv, const char *name, int is_ip)
{
    X509 *x = leaf_x509(lv, name), *cax = ca_x509(ca);
    GENERAL_NAMES *gens = X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL);
    const ASN1_INTEGER *serial = X509_get0_serialNumber(x);
    BIGNUM *bn = ASN1_INTEGER_to_BN(serial, NULL);
    unsigned char ip[16];
    int type;

    assert_non_null(gens);
    assert_int_equal(sk_GENERAL_NAME_num(gens), 1);
    ASN1_STRING *v = GENERAL_NAME_get0_value(sk_GENERAL_NAME_value(gens, 0), &type);
    if (is_ip) {
        assert_int_equal(type, GEN_IPADD);
        int len = strchr(name, ':') != NULL ? 16 : 4;
        assert_int_equal(ASN1_STRING_length(v), len);
        assert_int_equal(inet_pton(len == 4 ? AF_INET : AF_INET6, name, ip), 1);
        assert_memory_equal(ASN1_STRING_get0_data(v), ip, (size_t)len);
    } else {
        assert_int_equal(type, GEN_DNS);
        assert_string_equal((const char *)ASN1_STRING_get0_data(v), name);
    }
    GENERAL_NAMES_free(gens);

    assert_int_equal(X509_check_ca(x), 0);
    assert_true(X509_get_extended_key_usage(x) & XKU_SSL_SERVER);
    assert_non_null(X509_get0_subject_key_id(x));
    assert_int_equal(ASN1_OCTET_STRING_cmp(X509_get0_authority_key_id(x),
                                           X509_get0_subject_key_id(cax)),
                     0);
    assert_false(BN_is_negative(bn));
    assert_true(BN_num_bits(bn) > 64);
    BN_free(bn);
    assert_int_equal(EVP_PKEY_get_id(X509_get0_pubkey(x)), EVP_PKEY_EC);
    assert_int_equal(EVP_PKEY_get_bits(X509_get0_pubkey(x)), 256);
    /* never the CA's key */
    assert_int_not_equal(EVP_PKEY_eq(X509_get0_pubkey(x), X509_get0_pubkey(cax)), 1);
    /* from before now to at most the CA's end */
    assert_true(X509_cmp_current_time(X509_get0_notBefore(x)) < 0);
    assert_true(ASN1_TIME_compare(X509_get0_notAfter(x), X509_get0_notAfter(cax)) <= 0);
    assert_int_equal(verify_leaf(x, cax, name, is_ip, 0), X509_V_OK);
    /* strictly too, unless the CA itself is what strict verification refuses */
    assert_int_equal(verify_leaf(x, cax, name, is_ip, 1) == X509_V_OK, tls_ca_warning(ca) == NULL);
    X509_free(x);
    X509_free(cax);
}

static void test_leaves_fields(void **state)
{
    struct tls_ca *ca = NULL, *shortca = NULL;
    struct tls_leaves *lv = NULL, *lv2 = NULL;
    struct tls_leaves_stats st;
    char err[256];
    X509 *x, *y, *cax;
    int days = 0, secs = 0;

    assert_int_equal(tls_ca_generate(0, &ca, err, sizeof(err)), 0);
    assert_int_equal(tls_leaves_new(ca, NULL, &lv, err, sizeof(err)), 0);
    tls_ca_free(ca); /* the leaves hold their own reference */

    assert_int_equal(tls_leaves_mint(lv, "Origin.Example", err, sizeof(err)), 0);
    check_leaf(ca, lv, "origin.example", 0);
    assert_int_equal(tls_leaves_mint(lv, "127.0.0.1", err, sizeof(err)), 0);
    check_leaf(ca, lv, "127.0.0.1", 1);
    assert_int_equal(tls_leaves_mint(lv, "::1", err, sizeof(err)), 0);
    check_leaf(ca, lv, "::1", 1);
    /* an IPv6 literal's other spelling is the same leaf */
    assert_int_equal(tls_leaves_mint(lv, "0:0:0::1", err, sizeof(err)), 0);
    x = leaf_x509(lv, "::1");
    y = leaf_x509(lv, "0::0:1");
    assert_int_equal(X509_cmp(x, y), 0);
    X509_free(y);

    /* a long name: no CN, a critical SAN */
    char longname[254];
    for (size_t i = 0; i < 253; i++)
        longname[i] = i % 10 == 9 ? '.' : 'c';
    longname[253] = '\0';
    assert_int_equal(tls_leaves_mint(lv, longname, err, sizeof(err)), 0);
    check_leaf(ca, lv, longname, 0);

    /* 99 days by default */
    ASN1_TIME_diff(&days, &secs, NULL, X509_get0_notAfter(x));
    assert_true(days >= 98 && days <= 99);
    X509_free(x);

    static const char *const bad[] = {"", "a b", "x..y", "a.", "1.2.3", "[::1]", "h\xc3\xa9.x"};
    for (size_t i = 0; i < NELEM(bad); i++)
        assert_int_equal(tls_leaves_mint(lv, bad[i], err, sizeof(err)), UV_EINVAL);

    tls_leaves_stats(lv, &st);
    assert_int_equal(st.mints, 4);
    assert_int_equal(st.cached, 4);

    /* a CA that ends in 10 days bounds the leaf */
    assert_int_equal(tls_ca_generate(10, &shortca, err, sizeof(err)), 0);
    assert_int_equal(tls_leaves_new(shortca, NULL, &lv2, err, sizeof(err)), 0);
    assert_int_equal(tls_leaves_mint(lv2, "a.example", err, sizeof(err)), 0);
    x = leaf_x509(lv2, "a.example");
    cax = ca_x509(shortca);
    assert_int_equal(ASN1_TIME_compare(X509_get0_notAfter(x), X509_get0_notAfter(cax)), 0);
    X509_free(x);
    X509_free(cax);
    tls_leaves_unref(lv2);
    tls_ca_free(shortca);

    struct tls_leaves_opts o = {8, 0, 0};
    assert_int_equal(tls_leaves_new(ca, &o, &lv2, err, sizeof(err)), UV_EINVAL);
    o.cache_size = 16;
    o.valid_days = 398;
    assert_int_equal(tls_leaves_new(ca, &o, &lv2, err, sizeof(err)), UV_EINVAL);
    o.valid_days = 0;
    o.renew_before = 398 * 86400;
    assert_int_equal(tls_leaves_new(ca, &o, &lv2, err, sizeof(err)), UV_EINVAL);
    tls_leaves_unref(lv);
}

/* A CA from files (not made by tls/): leaves verify against it too. */
static void test_leaves_file_ca(void **state)
{
    struct cafiles cf;
    struct tls_ca *ca = NULL;
    struct tls_leaves *lv = NULL;
    char err[256];

    make_ca_files(&cf);
    assert_int_equal(tls_ca_load(cf.cert, cf.key, &ca, err, sizeof(err)), 0);
    assert_int_equal(tls_leaves_new(ca, NULL, &lv, err, sizeof(err)), 0);
    assert_int_equal(tls_leaves_mint(lv, "files.example", err, sizeof(err)), 0);
    check_leaf(ca, lv, "files.example", 0);
    tls_leaves_unref(lv);
    tls_ca_free(ca);
}

/* CAs made by the openssl command line, the way users make them: an
 * RSA-2048 CA with Debian's defaults (no keyUsage: accepted with a
 * warning, leaves verify but not strictly), one whose keyUsage lacks
 * keyCertSign (refused), one with keyCertSign (no warning, strict
 * verification passes). Skipped without the openssl command. */
static void test_leaves_cli_ca(void **state)
{
    char cmd[1024], cert[128], key[128], bad[128], err[512];
    struct tls_ca *ca = NULL;
    struct tls_leaves *lv = NULL;

    if (system("openssl version >/dev/null 2>&1") != 0)
        skip();
    path_in_tmp(cert, sizeof(cert), "cli-ca.pem");
    path_in_tmp(key, sizeof(key), "cli-ca.key");
    path_in_tmp(bad, sizeof(bad), "cli-badku.pem");
    snprintf(cmd, sizeof(cmd),
             "openssl req -x509 -newkey rsa:2048 -nodes -keyout '%s' -out '%s' -days 2 "
             "-subj /CN=cli-ca >/dev/null 2>&1",
             key, cert);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(tls_ca_load(cert, key, &ca, err, sizeof(err)), 0);
    /* Debian's default v3_ca has no keyUsage: accepted, with a warning */
    assert_non_null(tls_ca_warning(ca));
    assert_non_null(strstr(tls_ca_warning(ca), "keyUsage"));
    assert_int_equal(tls_leaves_new(ca, NULL, &lv, err, sizeof(err)), 0);
    assert_int_equal(tls_leaves_mint(lv, "cli.example", err, sizeof(err)), 0);
    check_leaf(ca, lv, "cli.example", 0);
    assert_int_equal(tls_leaves_mint(lv, "10.1.2.3", err, sizeof(err)), 0);
    check_leaf(ca, lv, "10.1.2.3", 1);
    tls_leaves_unref(lv);
    tls_ca_free(ca);

    snprintf(cmd, sizeof(cmd),
             "openssl req -x509 -key '%s' -out '%s' -days 2 -subj /CN=cli-bad "
             "-addext keyUsage=critical,digitalSignature >/dev/null 2>&1",
             key, bad);
    assert_int_equal(system(cmd), 0);
    expect_load_error(bad, key, UV_EINVAL, "lacks keyCertSign", bad);

    /* with keyUsage keyCertSign: no warning, leaves pass strict verification */
    snprintf(cmd, sizeof(cmd),
             "openssl req -x509 -key '%s' -out '%s' -days 2 -subj /CN=cli-good "
             "-addext keyUsage=critical,keyCertSign,cRLSign >/dev/null 2>&1",
             key, cert);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(tls_ca_load(cert, key, &ca, err, sizeof(err)), 0);
    assert_null(tls_ca_warning(ca));
    assert_int_equal(tls_leaves_new(ca, NULL, &lv, err, sizeof(err)), 0);
    assert_int_equal(tls_leaves_mint(lv, "cli.example", err, sizeof(err)), 0);
    check_leaf(ca, lv, "cli.example", 0);
    tls_leaves_unref(lv);
    tls_ca_free(ca);
}

static void test_leaves_lru(void **state)
{
    struct tls_ca *ca = NULL;
    struct tls_leaves *lv = NULL;
    struct tls_leaves_opts o = {16, 0, 0};
    struct tls_leaves_stats st;
    char err[256], name[64], pem[8192];

    assert_int_equal(tls_ca_generate(0, &ca, err, sizeof(err)), 0);
    assert_int_equal(tls_leaves_new(ca, &o, &lv, err, sizeof(err)), 0);
    for (int i = 0; i < 16; i++) {
        snprintf(name, sizeof(name), "h%d.example", i);
        assert_int_equal(tls_leaves_mint(lv, name, err, sizeof(err)), 0);
    }
    /* minting a cached name again mints nothing and moves it to the front */
    assert_int_equal(tls_leaves_mint(lv, "h0.example", err, sizeof(err)), 0);
    tls_leaves_stats(lv, &st);
    assert_int_equal(st.mints, 16);
    for (int i = 16; i < 20; i++) {
        snprintf(name, sizeof(name), "h%d.example", i);
        assert_int_equal(tls_leaves_mint(lv, name, err, sizeof(err)), 0);
    }
    tls_leaves_stats(lv, &st);
    assert_int_equal(st.mints, 20);
    assert_int_equal(st.cached, 16);
    assert_int_equal(st.evictions, 4);
    /* h0 was used last of the first sixteen: kept; h1..h4 went */
    assert_true(tls_leaves_cert_pem(lv, "h0.example", pem, sizeof(pem)) > 0);
    for (int i = 1; i <= 4; i++) {
        snprintf(name, sizeof(name), "h%d.example", i);
        assert_int_equal(tls_leaves_cert_pem(lv, name, pem, sizeof(pem)), UV_ENOENT);
    }
    assert_true(tls_leaves_cert_pem(lv, "h5.example", pem, sizeof(pem)) > 0);
    assert_int_equal(tls_leaves_cert_pem(lv, "h5.example", pem, 10), UV_ENOBUFS);
    tls_leaves_unref(lv);
    tls_ca_free(ca);
}

/* Threads minting one name at once sign one leaf; the others wait for it
 * (MINT_ROUNDS names, each asked for by MINT_THREADS threads released by a
 * barrier). */
#define MINT_THREADS 8

#define MINT_ROUNDS 10

struct mint_arg {
    struct tls_leaves *lv;
    pthread_barrier_t *start;
    int rc;
};

static void *mint_thread(void *p)
{
    struct mint_arg *a = p;
    char name[64];

    a->rc = 0;
    for (int r = 0; r < MINT_ROUNDS; r++) {
        snprintf(name, sizeof(name), "burst%d.example", r);
        pthread_barrier_wait(a->start);
        if (tls_leaves_mint(a->lv, name, NULL, 0) < 0)
            a->rc = -1;
    }
    return NULL;
}

static void test_leaves_burst(void **state)
{
    struct tls_ca *ca = NULL;
    struct tls_leaves *lv = NULL;
    struct tls_leaves_stats st;
    pthread_t t[MINT_THREADS];
    struct mint_arg a[MINT_THREADS];
    pthread_barrier_t start;
    char err[256];

    assert_int_equal(tls_ca_generate(0, &ca, err, sizeof(err)), 0);
    assert_int_equal(tls_leaves_new(ca, NULL, &lv, err, sizeof(err)), 0);
    assert_int_equal(pthread_barrier_init(&start, NULL, MINT_THREADS), 0);
    for (int i = 0; i < MINT_THREADS; i++) {
        a[i] = (struct mint_arg){lv, &start, -1};
        assert_int_equal(pthread_create(&t[i], NULL, mint_thread, &a[i]), 0);
    }
    for (int i = 0; i < MINT_THREADS; i++) {
        assert_int_equal(pthread_join(t[i], NULL), 0);
        assert_int_equal(a[i].rc, 0);
    }
    pthread_barrier_destroy(&start);
    tls_leaves_stats(lv, &st);
    assert_int_equal(st.mints, MINT_ROUNDS);
    assert_int_equal(st.cached, MINT_ROUNDS);
    tls_leaves_unref(lv);
    tls_ca_free(ca);
}

/* ------------------------------------------------------------------------ */
/* An OpenSSL peer on memory BIOs, and a pump between it and a tls_conn      */

struct peer {
    SSL_CTX *ctx;
    SSL *ssl;
    BIO *in, *out; /* what it reads, what it wrote */
};

static void peer_init(struct peer *p, SSL_CTX *ctx, int server)
{
    p->ctx = ctx;
    p->ssl = SSL_new(ctx);
    p->in = BIO_new(BIO_s_mem());
    p->out = BIO_new(BIO_s_mem());
    BIO_set_mem_eof_return(p->in, -1);
    BIO_set_mem_eof_return(p->out, -1);
    SSL_set_bio(p->ssl, p->in, p->out);
    if (server)
        SSL_set_accept_state(p->ssl);
    else
        SSL_set_connect_state(p->ssl);
}

static void peer_free(struct peer *p)
{
    SSL_free(p->ssl);
    SSL_CTX_free(p->ctx);
}

/* What to do on NEED_LEAF: mint right here, or leave it to the caller. */
enum mint_mode { MINT_INLINE, MINT_STOP };

/* The most bytes pump() moves at once, each way (test_handshake_bytewise
 * sets 1). */
static size_t pump_chunk = 16384;

/* Moves bytes both ways and drives both handshakes until neither moves.
 * Returns the peer's SSL_do_handshake result (1 done). */
static int pump(struct peer *p, struct tls_conn *c, enum mint_mode mode)
{
    uint8_t buf[16384];
    size_t chunk = pump_chunk < sizeof(buf) ? pump_chunk : sizeof(buf);
    int pr = 0;

    for (int round = 0; round < 100; round++) {
        int moved = 0;
        size_t n;

        if (!SSL_is_init_finished(p->ssl)) {
            pr = SSL_do_handshake(p->ssl);
        } else {
            pr = 1;
            SSL_read_ex(p->ssl, buf, 0, &n); /* takes tickets and alerts */
        }
        while (BIO_read_ex(p->out, buf, chunk, &n) == 1 && n > 0) {
            tls_conn_feed(c, buf, n);
            moved = 1;
        }
        if (tls_conn_state(c) == TLS_CONN_NEED_LEAF) {
            if (mode == MINT_STOP)
                return pr;
            struct tls_mint *m = tls_conn_mint_job(c);
            assert_non_null(m);
            assert_null(tls_conn_mint_job(c)); /* one job at a time */
            tls_mint_run(m);
            tls_conn_resume(c, m);
            moved = 1;
        }
        while ((n = tls_conn_take_out(c, buf, chunk)) > 0) {
            assert_true(n <= chunk);
            assert_int_equal(BIO_write(p->in, buf, (int)n), (int)n);
            moved = 1;
        }
        if (!moved && (pr == 1 || SSL_get_error(p->ssl, pr) != SSL_ERROR_WANT_READ ||
                       tls_conn_state(c) != TLS_CONN_HANDSHAKE))
            break;
    }
    ERR_clear_error();
    return pr;
}

/* An OpenSSL client trusting the CA, checking name (or IP), with alpn. */
static void client_init(struct peer *p, struct tls_ca *ca, const char *name, int is_ip,
                        const unsigned char *alpn, unsigned alpn_len)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    X509 *cax = ca_x509(ca);

    X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx), cax);
    X509_free(cax);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    peer_init(p, ctx, 0);
    if (is_ip) {
        X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(p->ssl), name);
    } else {
        SSL_set_tlsext_host_name(p->ssl, name);
        SSL_set1_host(p->ssl, name);
    }
    if (alpn != NULL)
        SSL_set_alpn_protos(p->ssl, alpn, alpn_len);
}

/* Plaintext both ways: the client's message read by the server conn, and
 * the conn's reply read by the client; both of size n. */
static void exchange(struct peer *p, struct tls_conn *c, size_t n)
{
    uint8_t *msg = malloc(n), *got = malloc(n), buf[16384];
    size_t have = 0, k;

    for (size_t i = 0; i < n; i++)
        msg[i] = (uint8_t)(i * 7 + 3);
    assert_int_equal(SSL_write_ex(p->ssl, msg, n, &k), 1);
    while (BIO_read_ex(p->out, buf, sizeof(buf), &k) == 1 && k > 0) {
        assert_int_equal(tls_conn_feed(c, buf, k), 0);
        size_t g;
        do {
            assert_int_equal(tls_conn_read(c, got + have, n - have, &g), 0);
            have += g;
        } while (g > 0 && have < n);
    }
    assert_int_equal(have, n);
    assert_memory_equal(got, msg, n);

    for (size_t i = 0; i < n; i++)
        msg[i] = (uint8_t)(i * 13 + 1);
    assert_int_equal(tls_conn_write(c, msg, n), 0);
    assert_true(tls_conn_pending_out(c) > n);
    while ((k = tls_conn_take_out(c, buf, sizeof(buf))) > 0)
        assert_int_equal(BIO_write(p->in, buf, (int)k), (int)k);
    assert_int_equal(tls_conn_pending_out(c), 0);
    have = 0;
    while (have < n && SSL_read_ex(p->ssl, got + have, n - have, &k) == 1)
        have += k;
    assert_int_equal(have, n);
    assert_memory_equal(got, msg, n);
    free(msg);
    free(got);
}

struct fixture {
    struct tls_ca *ca;
    struct tls_leaves *lv;
    struct tls_server_ctx *sctx;
};

static void fixture_init(struct fixture *f)
{
    char err[256];

    assert_int_equal(tls_ca_generate(0, &f->ca, err, sizeof(err)), 0);
    assert_int_equal(tls_leaves_new(f->ca, NULL, &f->lv, err, sizeof(err)), 0);
    assert_int_equal(tls_server_ctx_new(f->lv, &f->sctx, err, sizeof(err)), 0);
}

static void fixture_free(struct fixture *f)
{
    tls_server_ctx_free(f->sctx);
    tls_leaves_unref(f->lv);
    tls_ca_free(f->ca);
}

static void test_handshake_names(void **state)
{
    static const unsigned char h11[] = "\x08http/1.1";
    static const struct {
        const char *name;
        int is_ip;
    } rows[] = {{"origin.example", 0}, {"127.0.0.1", 1}, {"::1", 1}};
    struct fixture f;
    struct tls_leaves_stats st;

    fixture_init(&f);
    for (size_t i = 0; i < NELEM(rows); i++) {
        for (int round = 0; round < 2; round++) {
            struct peer p;
            struct tls_conn *c = tls_conn_server_new(f.sctx, rows[i].name);
            assert_non_null(c);
            assert_int_equal(tls_conn_state(c), TLS_CONN_HANDSHAKE);
            client_init(&p, f.ca, rows[i].name, rows[i].is_ip, h11, sizeof(h11) - 1);
            assert_int_equal(pump(&p, c, MINT_INLINE), 1);
            assert_int_equal(SSL_get_verify_result(p.ssl), X509_V_OK);
            assert_int_equal(tls_conn_state(c), TLS_CONN_OPEN);
            assert_null(tls_conn_reason(c));
            assert_int_equal(tls_conn_alpn(c), TLS_ALPN_HTTP11);
            assert_string_equal(tls_conn_version(c), "TLSv1.3");
            if (rows[i].is_ip)
                assert_null(tls_conn_sni(c));
            else
                assert_string_equal(tls_conn_sni(c), rows[i].name);
            exchange(&p, c, round == 0 ? 1000 : 1 << 20);
            tls_leaves_stats(f.lv, &st);
            /* the first round of each name missed and minted, the second hit */
            assert_int_equal(st.mints, i + 1);
            assert_int_equal(st.misses, i + 1);
            assert_int_equal(st.hits, i + (size_t)round);
            tls_conn_free(c);
            peer_free(&p);
        }
    }
    fixture_free(&f);
}

/* The mint on a libuv worker thread, as the front end will do it. */
struct work {
    uv_work_t req;
    struct tls_mint *m;
    struct tls_conn *c; /* NULL once the connection is gone */
    int resumed;
};

static void work_run(uv_work_t *req)
{
    struct work *w = (struct work *)req;
    tls_mint_run(w->m);
}

static void work_done(uv_work_t *req, int status)
{
    struct work *w = (struct work *)req;

    assert_int_equal(status, 0);
    if (w->c == NULL) {
        tls_mint_free(w->m);
        return;
    }
    assert_int_equal(tls_conn_resume(w->c, w->m), 0);
    w->resumed = 1;
}

static void test_handshake_worker(void **state)
{
    struct fixture f;
    struct peer p;
    struct tls_conn *c, *gone;
    struct work w = {0}, w2 = {0};
    uv_loop_t loop;
    struct tls_leaves_stats st;

    fixture_init(&f);
    assert_int_equal(uv_loop_init(&loop), 0);
    c = tls_conn_server_new(f.sctx, "worker.example");
    client_init(&p, f.ca, "worker.example", 0, NULL, 0);
    assert_int_equal(pump(&p, c, MINT_STOP), -1);
    assert_int_equal(tls_conn_state(c), TLS_CONN_NEED_LEAF);
    /* while paused, more bytes are kept and nothing runs */
    assert_int_equal(tls_conn_feed(c, NULL, 0), 0);
    assert_int_equal(tls_conn_state(c), TLS_CONN_NEED_LEAF);
    w.m = tls_conn_mint_job(c);
    w.c = c;
    assert_non_null(w.m);

    /* a second connection whose job outlives it */
    gone = tls_conn_server_new(f.sctx, "gone.example");
    struct peer p2;
    client_init(&p2, f.ca, "gone.example", 0, NULL, 0);
    pump(&p2, gone, MINT_STOP);
    w2.m = tls_conn_mint_job(gone);
    assert_non_null(w2.m);
    tls_conn_free(gone);
    w2.c = NULL;
    peer_free(&p2);

    assert_int_equal(uv_queue_work(&loop, &w.req, work_run, work_done), 0);
    assert_int_equal(uv_queue_work(&loop, &w2.req, work_run, work_done), 0);
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_true(w.resumed);
    assert_int_equal(pump(&p, c, MINT_STOP), 1);
    assert_int_equal(tls_conn_state(c), TLS_CONN_OPEN);
    assert_int_equal(tls_conn_alpn(c), TLS_ALPN_NONE);
    exchange(&p, c, 5000);
    tls_leaves_stats(f.lv, &st);
    assert_int_equal(st.mints, 2);
    assert_int_equal(st.misses, 2);

    /* close_notify from the client: EOF; ours reaches the client */
    size_t got;
    uint8_t buf[4096];
    SSL_shutdown(p.ssl);
    while (BIO_read_ex(p.out, buf, sizeof(buf), &got) == 1 && got > 0)
        tls_conn_feed(c, buf, got);
    assert_int_equal(tls_conn_read(c, buf, sizeof(buf), &got), UV_EOF);
    assert_int_equal(tls_conn_state(c), TLS_CONN_CLOSED);
    /* half-close: the other half still carries a reply, then our close_notify */
    assert_int_equal(tls_conn_write(c, "bye", 3), 0);
    assert_int_equal(tls_conn_shutdown(c), 0);
    assert_int_equal(tls_conn_write(c, "late", 4), UV_EPIPE);
    while ((got = tls_conn_take_out(c, buf, sizeof(buf))) > 0)
        BIO_write(p.in, buf, (int)got);
    assert_int_equal(SSL_read_ex(p.ssl, buf, sizeof(buf), &got), 1);
    assert_int_equal(got, 3);
    assert_memory_equal(buf, "bye", 3);
    assert_int_equal(SSL_read_ex(p.ssl, buf, sizeof(buf), &got), 0);
    assert_int_equal(SSL_get_error(p.ssl, 0), SSL_ERROR_ZERO_RETURN);

    tls_conn_free(c);
    peer_free(&p);
    assert_int_equal(uv_loop_close(&loop), 0);
    fixture_free(&f);
}

static void test_handshake_alpn(void **state)
{
    static const struct {
        const unsigned char *alpn;
        unsigned len;
        enum tls_alpn want;
    } rows[] = {
        {(const unsigned char *)"\x02h2", 3, TLS_ALPN_UNSERVED},
        {(const unsigned char *)"\x02h2\x08http/1.1", 12, TLS_ALPN_HTTP11},
        {(const unsigned char *)"\x08http/1.0", 9, TLS_ALPN_UNSERVED},
        {NULL, 0, TLS_ALPN_NONE},
    };
    struct fixture f;

    fixture_init(&f);
    for (size_t i = 0; i < NELEM(rows); i++) {
        struct peer p;
        struct tls_conn *c = tls_conn_server_new(f.sctx, "alpn.example");
        const unsigned char *sel = NULL;
        unsigned sel_len = 0;

        client_init(&p, f.ca, "alpn.example", 0, rows[i].alpn, rows[i].len);
        assert_int_equal(pump(&p, c, MINT_INLINE), 1);
        assert_int_equal(tls_conn_alpn(c), rows[i].want);
        SSL_get0_alpn_selected(p.ssl, &sel, &sel_len);
        if (rows[i].want == TLS_ALPN_HTTP11) {
            assert_int_equal(sel_len, 8);
            assert_memory_equal(sel, "http/1.1", 8);
        } else {
            assert_int_equal(sel_len, 0);
        }
        tls_conn_free(c);
        peer_free(&p);
    }
    fixture_free(&f);
}

/* A client that expects another name refuses the leaf; garbage is no TLS. */
static void test_handshake_failures(void **state)
{
    static const char http[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    struct fixture f;
    struct peer p;
    struct tls_conn *c;
    uint8_t buf[256];

    fixture_init(&f);
    c = tls_conn_server_new(f.sctx, "served.example");
    client_init(&p, f.ca, "wanted.example", 0, NULL, 0);
    assert_int_not_equal(pump(&p, c, MINT_INLINE), 1);
    assert_int_equal(SSL_get_verify_result(p.ssl), X509_V_ERR_HOSTNAME_MISMATCH);
    assert_int_equal(tls_conn_state(c), TLS_CONN_FAILED);
    assert_string_equal(tls_conn_reason(c), "the peer refused the certificate");
    assert_int_equal(tls_conn_feed(c, "x", 1), UV_EPROTO);
    assert_int_equal(tls_conn_write(c, "x", 1), UV_EPROTO);
    tls_conn_free(c);
    peer_free(&p);

    c = tls_conn_server_new(f.sctx, "served.example");
    assert_int_equal(tls_conn_feed(c, http, sizeof(http) - 1), UV_EPROTO);
    assert_int_equal(tls_conn_state(c), TLS_CONN_FAILED);
    assert_string_equal(tls_conn_reason(c), "not TLS");
    size_t got;
    assert_int_equal(tls_conn_read(c, buf, sizeof(buf), &got), UV_EPROTO);
    tls_conn_free(c);

    /* writing before the handshake is refused; invalid leaf names too */
    c = tls_conn_server_new(f.sctx, "served.example");
    assert_int_equal(tls_conn_write(c, "x", 1), UV_ENOTCONN);
    assert_int_equal(tls_conn_shutdown(c), UV_ENOTCONN);
    assert_null(tls_conn_mint_job(c));
    tls_conn_free(c);
    assert_null(tls_conn_server_new(f.sctx, "bad name"));
    assert_null(tls_conn_server_new(f.sctx, ""));
    assert_null(tls_conn_server_new(f.sctx, NULL));
    fixture_free(&f);
}

/* The terminating side fed one byte at a time and drained one byte at a
 * time: the same handshake, both directions, server and upstream side. */
static void test_handshake_bytewise(void **state)
{
    struct fixture f;
    struct peer p;
    struct tls_conn *c;

    fixture_init(&f);
    pump_chunk = 1;
    c = tls_conn_server_new(f.sctx, "bytes.example");
    client_init(&p, f.ca, "bytes.example", 0, (const unsigned char *)"\x08http/1.1", 9);
    assert_int_equal(pump(&p, c, MINT_INLINE), 1);
    assert_int_equal(tls_conn_state(c), TLS_CONN_OPEN);
    assert_int_equal(tls_conn_alpn(c), TLS_ALPN_HTTP11);
    pump_chunk = 16384;
    exchange(&p, c, 3000);
    tls_conn_free(c);
    peer_free(&p);
    fixture_free(&f);
}

/* The copy-free paths the proxy's pump uses: input read into a buffer the
 * engine takes (tls_in_new, tls_conn_feed_in: zero copy into an empty read
 * BIO, a copy behind unread bytes, a refusal past the buffer's size) and
 * output handed over whole (tls_conn_take_out_buf); tls_conn_has_input
 * while a record is incomplete. */
static void test_conn_zero_copy(void **state)
{
    enum { N = 40000 };
    uint8_t *msg = malloc(N), *got = malloc(N);
    struct fixture f;
    struct peer p;
    struct tls_conn *c;
    struct tls_in *in;
    struct tls_out *o;
    size_t have = 0, k, len = 0, sent = 0, wl;
    char *data = NULL;
    uint8_t *wire;

    (void)state;
    fixture_init(&f);
    c = tls_conn_server_new(f.sctx, "zero.example");
    client_init(&p, f.ca, "zero.example", 0, (const unsigned char *)"\x08http/1.1", 9);
    assert_int_equal(pump(&p, c, MINT_INLINE), 1);
    assert_int_equal(tls_conn_state(c), TLS_CONN_OPEN);
    assert_false(tls_conn_has_input(c));
    assert_null(tls_conn_take_out_buf(c, &data, &len)); /* nothing pending */

    /* the client's N bytes: 100 bytes first (an empty BIO takes the buffer),
     * the rest behind them (copied), in pieces of up to 20000 */
    for (size_t i = 0; i < N; i++)
        msg[i] = (uint8_t)(i * 7 + 3);
    assert_int_equal(SSL_write_ex(p.ssl, msg, N, &k), 1);
    wl = BIO_ctrl_pending(p.out);
    assert_true(wl > N);
    wire = malloc(wl);
    assert_int_equal(BIO_read_ex(p.out, wire, wl, &k), 1);
    assert_int_equal(k, wl);
    while (sent < wl) {
        size_t n = sent == 0 ? 100 : wl - sent;
        if (n > 20000)
            n = 20000;
        in = tls_in_new(20000, &data);
        assert_non_null(in);
        memcpy(data, wire + sent, n);
        assert_int_equal(tls_conn_feed_in(c, in, n), 0);
        if (sent == 0)
            assert_true(tls_conn_has_input(c)); /* part of a record */
        sent += n;
        for (size_t g = 1; g > 0 && have < N;) {
            assert_int_equal(tls_conn_read(c, got + have, N - have, &g), 0);
            have += g;
        }
    }
    free(wire);
    assert_int_equal(have, N);
    assert_memory_equal(got, msg, N);
    assert_false(tls_conn_has_input(c));
    in = tls_in_new(16, &data);
    assert_int_equal(tls_conn_feed_in(c, in, 17), UV_EINVAL); /* freed all the same */
    tls_in_free(tls_in_new(16, &data));                       /* unused */

    /* N bytes back, handed over in one buffer */
    for (size_t i = 0; i < N; i++)
        msg[i] = (uint8_t)(i * 13 + 1);
    assert_int_equal(tls_conn_write(c, msg, N), 0);
    k = tls_conn_pending_out(c);
    o = tls_conn_take_out_buf(c, &data, &len);
    assert_non_null(o);
    assert_int_equal(len, k);
    assert_int_equal(tls_conn_pending_out(c), 0);
    assert_int_equal(BIO_write(p.in, data, (int)len), (int)len);
    tls_out_free(o);
    have = 0;
    while (have < N && SSL_read_ex(p.ssl, got + have, N - have, &k) == 1)
        have += k;
    assert_int_equal(have, N);
    assert_memory_equal(got, msg, N);
    exchange(&p, c, 3000); /* the fresh BIOs work on */
    tls_conn_free(c);
    peer_free(&p);
    fixture_free(&f);
    free(msg);
    free(got);
}

/* A cached leaf near its end is minted again; one bounded by the CA's end
 * is not (a new one would end at the same time). */
static void test_leaves_renew(void **state)
{
    struct tls_ca *ca = NULL, *shortca = NULL;
    struct tls_leaves *lv = NULL;
    struct tls_leaves_opts o = {0, 10, 20 * 86400}; /* 10-day leaves, renewed 20 days early */
    struct tls_leaves_stats st;
    struct fixture f;
    struct peer p;
    struct tls_conn *c;
    char err[256];

    assert_int_equal(tls_ca_generate(0, &ca, err, sizeof(err)), 0);
    assert_int_equal(tls_leaves_new(ca, &o, &lv, err, sizeof(err)), 0);
    assert_int_equal(tls_leaves_mint(lv, "renew.example", err, sizeof(err)), 0);
    assert_int_equal(tls_leaves_mint(lv, "renew.example", err, sizeof(err)), 0);
    tls_leaves_stats(lv, &st);
    assert_int_equal(st.mints, 2);
    assert_int_equal(st.renewals, 1);

    /* in a handshake: a miss, a mint, and the connection gets the new leaf */
    f.ca = ca;
    f.lv = lv;
    assert_int_equal(tls_server_ctx_new(lv, &f.sctx, err, sizeof(err)), 0);
    c = tls_conn_server_new(f.sctx, "renew.example");
    client_init(&p, ca, "renew.example", 0, NULL, 0);
    assert_int_equal(pump(&p, c, MINT_INLINE), 1);
    tls_leaves_stats(lv, &st);
    assert_int_equal(st.mints, 3);
    assert_int_equal(st.renewals, 2);
    assert_int_equal(st.hits, 0);
    tls_conn_free(c);
    peer_free(&p);
    fixture_free(&f); /* frees lv and ca */

    /* a CA ending in 2 days bounds the leaf: kept however early renewal is */
    assert_int_equal(tls_ca_generate(2, &shortca, err, sizeof(err)), 0);
    lv = NULL;
    assert_int_equal(tls_leaves_new(shortca, &o, &lv, err, sizeof(err)), 0);
    assert_int_equal(tls_leaves_mint(lv, "renew.example", err, sizeof(err)), 0);
    assert_int_equal(tls_leaves_mint(lv, "renew.example", err, sizeof(err)), 0);
    tls_leaves_stats(lv, &st);
    assert_int_equal(st.mints, 1);
    assert_int_equal(st.renewals, 0);
    tls_leaves_unref(lv);
    tls_ca_free(shortca);
}

/* A mint that produced nothing (a job resumed without running stands in
 * for a failed one): the client gets an internal_error alert, the
 * connection says why. */
static void test_handshake_mint_failed(void **state)
{
    struct fixture f;
    struct peer p;
    struct tls_conn *c;
    struct tls_mint *m;
    uint8_t buf[4096];
    size_t n;

    fixture_init(&f);
    c = tls_conn_server_new(f.sctx, "nomint.example");
    client_init(&p, f.ca, "nomint.example", 0, NULL, 0);
    pump(&p, c, MINT_STOP);
    assert_int_equal(tls_conn_state(c), TLS_CONN_NEED_LEAF);
    m = tls_conn_mint_job(c);
    assert_non_null(m);
    assert_int_equal(tls_conn_resume(c, m), UV_EPROTO);
    assert_int_equal(tls_conn_state(c), TLS_CONN_FAILED);
    assert_string_equal(tls_conn_reason(c), "cannot mint the leaf");
    while ((n = tls_conn_take_out(c, buf, sizeof(buf))) > 0)
        BIO_write(p.in, buf, (int)n);
    assert_int_equal(SSL_do_handshake(p.ssl), -1);
    assert_int_equal(ERR_GET_REASON(ERR_peek_last_error()), SSL_R_TLSV1_ALERT_INTERNAL_ERROR);
    ERR_clear_error();

    tls_conn_free(c);
    peer_free(&p);
    fixture_free(&f);
}

/* A session (TLS 1.3 ticket) from one loop's context resumes on another's
 * made from the same leaves. */
static void test_handshake_resume(void **state)
{
    struct fixture f;
    struct peer p, q;
    struct tls_conn *c, *d;
    SSL_SESSION *sess;

    fixture_init(&f);
    c = tls_conn_server_new(f.sctx, "resume.example");
    client_init(&p, f.ca, "resume.example", 0, NULL, 0);
    SSL_CTX_set_session_cache_mode(p.ctx, SSL_SESS_CACHE_CLIENT);
    assert_int_equal(pump(&p, c, MINT_INLINE), 1);
    exchange(&p, c, 100); /* the client reads the ticket */
    sess = SSL_get1_session(p.ssl);
    assert_non_null(sess);
    assert_true(SSL_SESSION_is_resumable(sess));

    /* on another loop's context of the same leaves (shared ticket keys) */
    struct tls_server_ctx *other = NULL;
    char err[256];
    assert_int_equal(tls_server_ctx_new(f.lv, &other, err, sizeof(err)), 0);
    d = tls_conn_server_new(other, "resume.example");
    client_init(&q, f.ca, "resume.example", 0, NULL, 0);
    SSL_set_session(q.ssl, sess);
    assert_int_equal(pump(&q, d, MINT_INLINE), 1);
    assert_true(tls_conn_resumed(d));
    assert_true(SSL_session_reused(q.ssl));
    exchange(&q, d, 100);
    SSL_SESSION_free(sess);
    tls_conn_free(c);
    tls_conn_free(d);
    tls_server_ctx_free(other);
    peer_free(&p);
    peer_free(&q);
    fixture_free(&f);
}

/* The sniffer reads what our own upstream client sends. */
static void test_sniff_own_client(void **state)
{
    struct tls_client_ctx *cc = NULL;
    struct tls_conn *c;
    struct tls_hello h;
    char err[256], roots[128];
    uint8_t buf[8192];
    size_t n;
    struct tls_ca *ca = NULL;

    assert_int_equal(tls_ca_generate(0, &ca, err, sizeof(err)), 0);
    path_in_tmp(roots, sizeof(roots), "own-roots.pem");
    assert_int_equal(tls_ca_write_cert(ca, roots, err, sizeof(err)), 0);
    assert_int_equal(tls_client_ctx_new(roots, NULL, 0, &cc, err, sizeof(err)), 0);
    c = tls_conn_client_new(cc, "Up.Example");
    assert_non_null(c);
    n = tls_conn_take_out(c, buf, sizeof(buf));
    assert_int_equal(tls_sniff(buf, n, &h), TLS_SNIFF_CLIENT_HELLO);
    assert_string_equal(h.sni, "up.example");
    assert_string_equal(h.alpn, "http/1.1");
    tls_conn_free(c);

    c = tls_conn_client_new(cc, "127.0.0.1");
    n = tls_conn_take_out(c, buf, sizeof(buf));
    assert_int_equal(tls_sniff(buf, n, &h), TLS_SNIFF_CLIENT_HELLO);
    assert_false(h.has_sni); /* no SNI for an IP literal */
    tls_conn_free(c);
    assert_null(tls_conn_client_new(cc, "bad host"));
    tls_client_ctx_free(cc);
    tls_ca_free(ca);
}

/* ------------------------------------------------------------------------ */
/* Upstream                                                                  */

struct origin_pki {
    EVP_PKEY *ca_key, *other_key, *key;
    X509 *ca, *other_ca;
    char ca_file[128], other_file[128];
};

static void origin_pki_init(struct origin_pki *o)
{
    struct certspec ca = {"origin CA", NULL, 1, 0, -3600, 86400 * 30, NULL, NULL};
    struct certspec other = {"other CA", NULL, 1, 0, -3600, 86400 * 30, NULL, NULL};

    o->ca_key = mkkey();
    o->other_key = mkkey();
    o->key = mkkey();
    o->ca = mkcert(&ca, o->ca_key);
    o->other_ca = mkcert(&other, o->other_key);
    path_in_tmp(o->ca_file, sizeof(o->ca_file), "origin-ca.pem");
    path_in_tmp(o->other_file, sizeof(o->other_file), "other-ca.pem");
    write_cert(o->ca, o->ca_file);
    write_cert(o->other_ca, o->other_file);
}

static void origin_pki_free(struct origin_pki *o)
{
    X509_free(o->ca);
    X509_free(o->other_ca);
    EVP_PKEY_free(o->ca_key);
    EVP_PKEY_free(o->other_key);
    EVP_PKEY_free(o->key);
}

static char origin_saw_sni[256];
static int origin_saw_h11;

static int origin_sni_cb(SSL *ssl, int *al, void *arg)
{
    const char *n = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
    snprintf(origin_saw_sni, sizeof(origin_saw_sni), "%s", n != NULL ? n : "");
    return SSL_TLSEXT_ERR_OK;
}

static int origin_alpn_cb(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                          const unsigned char *in, unsigned inlen, void *arg)
{
    origin_saw_h11 = inlen == 9 && memcmp(in, "\x08http/1.1", 9) == 0;
    *out = in + 1;
    *outlen = in[0];
    return SSL_TLSEXT_ERR_OK;
}

/* An origin serving a certificate for san, issued by issuer (or self). */
static void origin_init(struct peer *p, struct origin_pki *o, const char *san, long from, long to,
                        int by_other)
{
    struct certspec s = {"origin", san, 0, 0, from, to, by_other ? o->other_ca : o->ca,
                         by_other ? o->other_key : o->ca_key};
    X509 *x = mkcert(&s, o->key);
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());

    assert_int_equal(SSL_CTX_use_certificate(ctx, x), 1);
    assert_int_equal(SSL_CTX_use_PrivateKey(ctx, o->key), 1);
    SSL_CTX_set_tlsext_servername_callback(ctx, origin_sni_cb);
    SSL_CTX_set_alpn_select_cb(ctx, origin_alpn_cb, NULL);
    X509_free(x);
    peer_init(p, ctx, 1);
    origin_saw_sni[0] = '\0';
    origin_saw_h11 = 0;
}

static void test_upstream(void **state)
{
    static const struct {
        const char *host, *san;
        long from, to;
        int by_other;
        const char *reason; /* NULL: verified */
    } rows[] = {
        {"origin.example", "DNS:origin.example", -3600, 86400, 0, NULL},
        {"a.wild.example", "DNS:*.wild.example", -3600, 86400, 0, NULL},
        {"origin.example", "DNS:origin.example", -86400 * 10, -86400, 0, "certificate expired"},
        {"origin.example", "DNS:origin.example", 86400, 86400 * 10, 0,
         "certificate not yet valid"},
        {"origin.example", "DNS:other.example", -3600, 86400, 0, "certificate name mismatch"},
        {"origin.example", "DNS:origin.example", -3600, 86400, 1, "unknown issuer"},
        {"127.0.0.1", "IP:127.0.0.1", -3600, 86400, 0, NULL},
        {"::1", "IP:::1", -3600, 86400, 0, NULL},
        {"127.0.0.2", "IP:127.0.0.1", -3600, 86400, 0, "certificate IP address mismatch"},
        {"127.0.0.1", "DNS:127.0.0.1", -3600, 86400, 0, "certificate IP address mismatch"},
    };
    struct origin_pki o;
    struct tls_client_ctx *cc = NULL;
    char err[256];

    origin_pki_init(&o);
    assert_int_equal(tls_client_ctx_new(o.ca_file, NULL, 0, &cc, err, sizeof(err)), 0);
    for (size_t i = 0; i < NELEM(rows); i++) {
        struct peer p;
        struct tls_conn *c = tls_conn_client_new(cc, rows[i].host);
        assert_non_null(c);
        origin_init(&p, &o, rows[i].san, rows[i].from, rows[i].to, rows[i].by_other);
        pump(&p, c, MINT_STOP);
        if (rows[i].reason == NULL) {
            if (tls_conn_state(c) != TLS_CONN_OPEN)
                fail_msg("row %zu: %s", i, tls_conn_reason(c));
            assert_true(origin_saw_h11);
            assert_string_equal(origin_saw_sni, strchr(rows[i].host, ':') != NULL ||
                                                        rows[i].host[0] == '1'
                                                    ? ""
                                                    : rows[i].host);
            /* plaintext the other way round: our client writes, the origin reads */
            uint8_t buf[64];
            size_t n;
            assert_int_equal(tls_conn_write(c, "hello", 5), 0);
            while ((n = tls_conn_take_out(c, buf, sizeof(buf))) > 0)
                BIO_write(p.in, buf, (int)n);
            assert_int_equal(SSL_read_ex(p.ssl, buf, sizeof(buf), &n), 1);
            assert_int_equal(n, 5);
            assert_memory_equal(buf, "hello", 5);
        } else {
            assert_int_equal(tls_conn_state(c), TLS_CONN_FAILED);
            if (strcmp(tls_conn_reason(c), rows[i].reason) != 0)
                fail_msg("row %zu: reason '%s', want '%s'", i, tls_conn_reason(c),
                         rows[i].reason);
            /* the origin never completes its handshake */
            assert_false(SSL_is_init_finished(p.ssl));
        }
        tls_conn_free(c);
        peer_free(&p);
    }
    tls_client_ctx_free(cc);
    origin_pki_free(&o);
}

/* One connection to the origin: handshake, then the origin's "hi" read
 * through the connection (which takes the origin's tickets with it).
 * Returns whether the session was resumed. */
static int upstream_once(struct tls_client_ctx *cc, SSL_CTX *octx, const char *host)
{
    struct peer p;
    struct tls_conn *c = tls_conn_client_new(cc, host);
    uint8_t buf[64];
    size_t n, got;
    int resumed;

    assert_non_null(c);
    SSL_CTX_up_ref(octx);
    peer_init(&p, octx, 1);
    pump(&p, c, MINT_STOP);
    if (tls_conn_state(c) != TLS_CONN_OPEN)
        fail_msg("%s: %s", host, tls_conn_reason(c));
    assert_int_equal(SSL_write_ex(p.ssl, "hi", 2, &n), 1);
    while (BIO_read_ex(p.out, buf, sizeof(buf), &n) == 1 && n > 0)
        assert_int_equal(tls_conn_feed(c, buf, n), 0);
    assert_int_equal(tls_conn_read(c, buf, sizeof(buf), &got), 0);
    assert_int_equal(got, 2);
    resumed = tls_conn_resumed(c);
    assert_int_equal(resumed, SSL_session_reused(p.ssl));
    tls_conn_free(c);
    peer_free(&p);
    return resumed;
}

/* The upstream leg offers the session an origin gave for the same name:
 * a TLS 1.3 ticket once, a TLS 1.2 session again and again; never for
 * another name. */
static void test_upstream_resume(void **state)
{
    struct origin_pki o;
    struct tls_client_ctx *cc = NULL;
    struct peer p;
    char err[256];

    origin_pki_init(&o);
    assert_int_equal(tls_client_ctx_new(o.ca_file, NULL, 0, &cc, err, sizeof(err)), 0);
    origin_init(&p, &o, "DNS:origin.example,DNS:b.example", -3600, 86400, 0);
    SSL_CTX_set_num_tickets(p.ctx, 1);
    assert_false(upstream_once(cc, p.ctx, "origin.example"));
    assert_true(upstream_once(cc, p.ctx, "origin.example"));
    assert_true(upstream_once(cc, p.ctx, "origin.example")); /* the resumed one's ticket */
    assert_false(upstream_once(cc, p.ctx, "b.example"));
    assert_true(upstream_once(cc, p.ctx, "b.example"));
    /* an origin that issues no ticket: nothing to resume */
    SSL_CTX_set_num_tickets(p.ctx, 0);
    assert_true(upstream_once(cc, p.ctx, "origin.example"));
    assert_false(upstream_once(cc, p.ctx, "origin.example"));
    peer_free(&p);

    /* TLS 1.2: the same session again */
    origin_init(&p, &o, "DNS:origin.example", -3600, 86400, 0);
    SSL_CTX_set_max_proto_version(p.ctx, TLS1_2_VERSION);
    tls_client_ctx_free(cc);
    cc = NULL;
    assert_int_equal(tls_client_ctx_new(o.ca_file, NULL, 0, &cc, err, sizeof(err)), 0);
    assert_false(upstream_once(cc, p.ctx, "origin.example"));
    assert_true(upstream_once(cc, p.ctx, "origin.example"));
    assert_true(upstream_once(cc, p.ctx, "origin.example"));
    peer_free(&p);
    tls_client_ctx_free(cc);
    origin_pki_free(&o);
}

/* Opens four connections to host at once (each offered what the cache
 * holds), then completes their handshakes with the origin octx, without
 * reading on (so no new tickets); resumed[i] says which resumed. */
static void four_at_once(struct tls_client_ctx *cc, SSL_CTX *octx, const char *host,
                         int resumed[4])
{
    struct tls_conn *cs[4];
    struct peer ps[4];

    for (int i = 0; i < 4; i++) {
        cs[i] = tls_conn_client_new(cc, host);
        assert_non_null(cs[i]);
    }
    for (int i = 0; i < 4; i++) {
        SSL_CTX_up_ref(octx);
        peer_init(&ps[i], octx, 1);
        pump(&ps[i], cs[i], MINT_STOP);
        assert_int_equal(tls_conn_state(cs[i]), TLS_CONN_OPEN);
        resumed[i] = tls_conn_resumed(cs[i]);
        assert_int_equal(resumed[i], SSL_session_reused(ps[i].ssl));
        tls_conn_free(cs[i]);
        peer_free(&ps[i]);
    }
}

/* An origin's TLS 1.3 tickets are kept side by side (each is offered once):
 * connections opened at once to one name each resume, up to the tickets
 * kept; with one ticket kept per name only the first did. */
static void test_upstream_resume_concurrent(void **state)
{
    struct origin_pki o;
    struct tls_client_ctx *cc = NULL;
    struct peer p;
    char err[256];
    int r[4];

    (void)state;
    origin_pki_init(&o);
    assert_int_equal(tls_client_ctx_new(o.ca_file, NULL, 0, &cc, err, sizeof(err)), 0);
    origin_init(&p, &o, "DNS:origin.example", -3600, 86400, 0);
    SSL_CTX_set_num_tickets(p.ctx, 3);
    assert_false(upstream_once(cc, p.ctx, "origin.example")); /* three tickets */
    four_at_once(cc, p.ctx, "origin.example", r); /* three to offer: the fourth is full */
    assert_true(r[0] && r[1] && r[2]);
    assert_false(r[3]);
    /* at most SESSIONS_PER_HOST (4) of one name are kept */
    SSL_CTX_set_num_tickets(p.ctx, 6);
    assert_false(upstream_once(cc, p.ctx, "origin.example")); /* none left: full */
    four_at_once(cc, p.ctx, "origin.example", r);
    assert_true(r[0] && r[1] && r[2] && r[3]);
    assert_false(upstream_once(cc, p.ctx, "origin.example")); /* the other two were not kept */
    peer_free(&p);
    tls_client_ctx_free(cc);
    origin_pki_free(&o);
}

static void test_upstream_extra(void **state)
{
    struct origin_pki o;
    struct tls_client_ctx *cc = NULL;
    struct tls_conn *c;
    struct peer p;
    char err[256], missing[128], empty[128];
    const char *extra[2];

    origin_pki_init(&o);
    /* roots that do not know the origin's CA, plus an extra file that does */
    extra[0] = o.ca_file;
    assert_int_equal(tls_client_ctx_new(o.other_file, extra, 1, &cc, err, sizeof(err)), 0);
    c = tls_conn_client_new(cc, "origin.example");
    origin_init(&p, &o, "DNS:origin.example", -3600, 86400, 0);
    pump(&p, c, MINT_STOP);
    assert_int_equal(tls_conn_state(c), TLS_CONN_OPEN);
    tls_conn_free(c);
    peer_free(&p);
    tls_client_ctx_free(cc);
    cc = NULL;

    /* an intermediate CA as the extra file (its root unknown): an anchor */
    {
        struct certspec is = {"issuing CA", NULL, 1, 0, -3600, 86400, o.ca, o.ca_key};
        EVP_PKEY *ik = mkkey();
        X509 *inter = mkcert(&is, ik);
        struct certspec ls = {"origin", "DNS:origin.example", 0, 0, -3600, 86400, inter, ik};
        X509 *leaf = mkcert(&ls, o.key);
        char inter_file[128];
        SSL_CTX *octx = SSL_CTX_new(TLS_server_method());

        path_in_tmp(inter_file, sizeof(inter_file), "issuing-ca.pem");
        write_cert(inter, inter_file);
        assert_int_equal(SSL_CTX_use_certificate(octx, leaf), 1);
        assert_int_equal(SSL_CTX_use_PrivateKey(octx, o.key), 1);
        extra[0] = inter_file;
        assert_int_equal(tls_client_ctx_new(o.other_file, extra, 1, &cc, err, sizeof(err)), 0);
        c = tls_conn_client_new(cc, "origin.example");
        peer_init(&p, octx, 1);
        pump(&p, c, MINT_STOP);
        if (tls_conn_state(c) != TLS_CONN_OPEN)
            fail_msg("intermediate anchor: %s", tls_conn_reason(c));
        tls_conn_free(c);
        peer_free(&p);
        tls_client_ctx_free(cc);
        cc = NULL;
        X509_free(inter);
        X509_free(leaf);
        EVP_PKEY_free(ik);
    }

    /* without the extra file: unknown issuer */
    assert_int_equal(tls_client_ctx_new(o.other_file, NULL, 0, &cc, err, sizeof(err)), 0);
    c = tls_conn_client_new(cc, "origin.example");
    origin_init(&p, &o, "DNS:origin.example", -3600, 86400, 0);
    pump(&p, c, MINT_STOP);
    assert_string_equal(tls_conn_reason(c), "unknown issuer");
    tls_conn_free(c);
    peer_free(&p);
    tls_client_ctx_free(cc);
    cc = NULL;

    path_in_tmp(missing, sizeof(missing), "no-extra.pem");
    extra[1] = missing;
    assert_int_equal(tls_client_ctx_new(o.other_file, extra, 2, &cc, err, sizeof(err)),
                     UV_ENOENT);
    assert_null(cc);
    assert_non_null(strstr(err, missing));
    path_in_tmp(empty, sizeof(empty), "empty-extra.pem");
    write_text(empty, "no certificates here\n");
    extra[1] = empty;
    assert_int_equal(tls_client_ctx_new(o.other_file, extra, 2, &cc, err, sizeof(err)),
                     UV_EINVAL);
    assert_non_null(strstr(err, empty));
    assert_non_null(strstr(err, "no PEM certificate"));

    if (access(TLS_SYSTEM_ROOTS, R_OK) == 0) {
        assert_int_equal(tls_client_ctx_new(NULL, NULL, 0, &cc, err, sizeof(err)), 0);
        tls_client_ctx_free(cc);
    }
    origin_pki_free(&o);
}

/* ------------------------------------------------------------------------ */

static int group_setup(void **state)
{
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/sluice-test-tls.XXXXXX");
    return mkdtemp(tmpdir) != NULL ? 0 : -1;
}

static int group_teardown(void **state)
{
    char cmd[128];

    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sniff_openssl),
        cmocka_unit_test(test_sniff_openssl_variants),
        cmocka_unit_test(test_sniff_not_tls),
        cmocka_unit_test(test_sniff_sni),
        cmocka_unit_test(test_sniff_hostile),
        cmocka_unit_test(test_sniff_fields),
        cmocka_unit_test(test_sniff_records),
        cmocka_unit_test(test_sniff_random),
        cmocka_unit_test(test_sniff_own_client),
        cmocka_unit_test(test_ca_generate),
        cmocka_unit_test(test_ca_bundle),
        cmocka_unit_test(test_truststore),
        cmocka_unit_test(test_ca_files),
        cmocka_unit_test(test_leaves_fields),
        cmocka_unit_test(test_leaves_file_ca),
        cmocka_unit_test(test_leaves_cli_ca),
        cmocka_unit_test(test_leaves_lru),
        cmocka_unit_test(test_leaves_renew),
        cmocka_unit_test(test_leaves_burst),
        cmocka_unit_test(test_handshake_names),
        cmocka_unit_test(test_handshake_worker),
        cmocka_unit_test(test_handshake_alpn),
        cmocka_unit_test(test_handshake_failures),
        cmocka_unit_test(test_handshake_bytewise),
        cmocka_unit_test(test_conn_zero_copy),
        cmocka_unit_test(test_handshake_mint_failed),
        cmocka_unit_test(test_handshake_resume),
        cmocka_unit_test(test_upstream),
        cmocka_unit_test(test_upstream_resume),
        cmocka_unit_test(test_upstream_resume_concurrent),
        cmocka_unit_test(test_upstream_extra),
    };
    int rc = cmocka_run_group_tests(tests, group_setup, group_teardown);

    /* joins libuv's worker threads while OpenSSL can still free their
     * per-thread state (see tls.h, Threads) */
    uv_library_shutdown();
    return rc;
}
