/* tls/conn.c - the per-loop contexts and the per-connection object (tls.h).
 *
 * A connection is an SSL with two memory BIOs: what the peer sent goes into
 * rbio (tls_conn_feed), what OpenSSL writes for the peer collects in wbio
 * (tls_conn_take_out). No socket, no OpenSSL type crosses tls.h. A memory
 * BIO keeps the largest buffer it ever held, so a BIO that held bytes is
 * replaced by a fresh one once it is empty: an idle connection holds no
 * buffers (with SSL_MODE_RELEASE_BUFFERS for OpenSSL's own).
 *
 * Client side: sessions the origins hand out are kept per host name (at
 * most SESSIONS_MAX, most recent first) and offered on the next connection
 * to that name; a TLS 1.3 ticket is offered once. A session exists only
 * after a handshake that verified the origin for that name, with this
 * context's roots.
 *
 * Server side: the ClientHello callback serves the connection's leaf from
 * the cache, or marks the connection NEED_LEAF and returns
 * SSL_CLIENT_HELLO_RETRY, which makes SSL_do_handshake return with
 * SSL_ERROR_WANT_CLIENT_HELLO_CB; nothing else runs on the connection until
 * tls_conn_resume() brings the leaf and calls SSL_do_handshake again, which
 * runs the callback again (now with the leaf). A failed mint makes that
 * second callback fail, so the client gets an internal_error alert.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include <openssl/buffer.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "tls/tls-int.h"

#define SESSIONS_MAX 128 /* upstream sessions kept per client context */
/* TLS 1.3 tickets kept per host: each is offered once, and an origin sends
 * several (OpenSSL's default is 2) so that connections opened at once can
 * each resume; with one kept, only the first of them did */
#define SESSIONS_PER_HOST 4

struct tls_server_ctx {
    SSL_CTX *ctx;
    struct tls_leaves *lv; /* a reference */
};

struct session {
    struct session *next;
    SSL_SESSION *sess; /* a reference */
    char host[TLS_LEAF_NAME_MAX];
};

struct tls_client_ctx {
    SSL_CTX *ctx;
    struct session *sessions; /* most recent first */
    unsigned nsessions;
};

struct tls_conn {
    SSL *ssl;
    struct tls_server_ctx *sctx; /* server side; NULL on the client side */
    struct tls_client_ctx *cctx; /* client side; NULL on the server side */
    enum tls_conn_state state;
    enum tls_alpn alpn;
    const char *reason; /* set once FAILED */
    X509 *leaf;         /* a minted leaf until the callback installs it */
    unsigned minting : 1, mint_failed : 1, rused : 1, wused : 1;
    char name[TLS_LEAF_NAME_MAX]; /* the leaf's name, or the origin's host */
};

static const unsigned char alpn_h11[] = "\x08http/1.1";

/* ------------------------------------------------------------------------ */
/* Reasons                                                                   */

static const char *verify_reason(long v)
{
    switch (v) {
    case X509_V_ERR_CERT_HAS_EXPIRED:
        return "certificate expired";
    case X509_V_ERR_CERT_NOT_YET_VALID:
        return "certificate not yet valid";
    case X509_V_ERR_HOSTNAME_MISMATCH:
        return "certificate name mismatch";
    case X509_V_ERR_IP_ADDRESS_MISMATCH:
        return "certificate IP address mismatch";
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
    case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
        return "unknown issuer";
    case X509_V_ERR_CERT_REVOKED:
        return "certificate revoked";
    case X509_V_ERR_INVALID_PURPOSE:
        return "certificate not for TLS servers";
    case X509_V_ERR_CERT_SIGNATURE_FAILURE:
        return "bad certificate signature";
    case X509_V_ERR_EE_KEY_TOO_SMALL:
    case X509_V_ERR_CA_KEY_TOO_SMALL:
    case X509_V_ERR_CA_MD_TOO_WEAK:
        return "certificate key or digest too weak";
    case X509_V_ERR_INVALID_CA:
        return "invalid CA in the chain";
    default:
        return "certificate verify failed";
    }
}

static const char *ssl_reason(struct tls_conn *c, unsigned long e)
{
    int r = ERR_GET_LIB(e) == ERR_LIB_SSL ? ERR_GET_REASON(e) : 0;

    switch (r) {
    case SSL_R_CERTIFICATE_VERIFY_FAILED:
        return verify_reason(SSL_get_verify_result(c->ssl));
    case SSL_R_NO_SHARED_CIPHER:
        return "no shared cipher";
    case SSL_R_UNSUPPORTED_PROTOCOL:
    case SSL_R_VERSION_TOO_LOW:
    case SSL_R_TLSV1_ALERT_PROTOCOL_VERSION:
        return "unsupported protocol version";
    case SSL_R_WRONG_VERSION_NUMBER:
    case SSL_R_HTTP_REQUEST:
    case SSL_R_HTTPS_PROXY_REQUEST:
    case SSL_R_PACKET_LENGTH_TOO_LONG:
    case SSL_R_RECORD_LENGTH_MISMATCH:
        return "not TLS";
    case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
    case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN:
    case SSL_R_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE:
    case SSL_R_TLSV1_ALERT_DECRYPT_ERROR:
        return "the peer refused the certificate";
    case SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE:
        return "handshake failure alert from the peer";
    case SSL_R_CALLBACK_FAILED:
        return c->mint_failed ? "cannot mint the leaf" : "handshake callback failed";
    case SSL_R_UNEXPECTED_EOF_WHILE_READING:
        return "unexpected end of stream";
    case 0:
        return c->mint_failed ? "cannot mint the leaf" : "TLS error";
    default:
        if (r >= SSL_AD_REASON_OFFSET && r < SSL_AD_REASON_OFFSET + 256)
            return "alert from the peer";
        return "TLS protocol error";
    }
}

static int fail(struct tls_conn *c)
{
    if (c->state != TLS_CONN_FAILED) {
        c->reason = ssl_reason(c, ERR_peek_last_error());
        c->state = TLS_CONN_FAILED;
    }
    ERR_clear_error();
    return UV_EPROTO;
}

/* ------------------------------------------------------------------------ */
/* Server callbacks                                                          */

static int on_client_hello(SSL *ssl, int *al, void *arg)
{
    struct tls_conn *c = SSL_get_app_data(ssl);
    int ok;

    if (c->mint_failed) {
        *al = SSL_AD_INTERNAL_ERROR;
        return SSL_CLIENT_HELLO_ERROR;
    }
    if (c->leaf == NULL && SSL_get_certificate(ssl) != NULL)
        return SSL_CLIENT_HELLO_SUCCESS; /* the second ClientHello after a HelloRetryRequest */
    if (c->leaf == NULL)
        c->leaf = tls_leaves_lookup(c->sctx->lv, c->name);
    if (c->leaf == NULL) {
        c->state = TLS_CONN_NEED_LEAF;
        return SSL_CLIENT_HELLO_RETRY;
    }
    ok = SSL_use_cert_and_key(ssl, c->leaf, tls_leaves_key(c->sctx->lv), NULL, 1) == 1;
    X509_free(c->leaf); /* the SSL holds its own reference now */
    c->leaf = NULL;
    if (!ok) {
        *al = SSL_AD_INTERNAL_ERROR;
        return SSL_CLIENT_HELLO_ERROR;
    }
    return SSL_CLIENT_HELLO_SUCCESS;
}

/* http/1.1 when offered; otherwise nothing is selected and the connection
 * says TLS_ALPN_UNSERVED (the caller decides). */
static int on_alpn(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                   const unsigned char *in, unsigned inlen, void *arg)
{
    struct tls_conn *c = SSL_get_app_data(ssl);
    unsigned i = 0;

    while (i < inlen) {
        unsigned n = in[i];
        if (n == 0 || n > inlen - i - 1)
            break;
        if (n + 1 == sizeof(alpn_h11) - 1 && memcmp(in + i, alpn_h11, n + 1) == 0) {
            *out = in + i + 1;
            *outlen = (unsigned char)n;
            c->alpn = TLS_ALPN_HTTP11;
            return SSL_TLSEXT_ERR_OK;
        }
        i += n + 1;
    }
    c->alpn = TLS_ALPN_UNSERVED;
    return SSL_TLSEXT_ERR_NOACK;
}

/* ------------------------------------------------------------------------ */
/* Contexts                                                                  */

static SSL_CTX *ctx_common(const SSL_METHOD *method)
{
    SSL_CTX *ctx = SSL_CTX_new(method);

    if (ctx == NULL)
        return NULL;
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
    if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    return ctx;
}

int tls_server_ctx_new(struct tls_leaves *lv, struct tls_server_ctx **out, char *err,
                       size_t errlen)
{
    struct tls_server_ctx *s = calloc(1, sizeof(*s));

    if (s == NULL)
        return UV_ENOMEM;
    s->ctx = ctx_common(TLS_server_method());
    if (s->ctx == NULL) {
        free(s);
        tls_err(err, errlen, "TLS: cannot make the server context");
        return UV_ENOMEM;
    }
    SSL_CTX_set_options(s->ctx, SSL_OP_CIPHER_SERVER_PREFERENCE);
    SSL_CTX_set_session_cache_mode(s->ctx, SSL_SESS_CACHE_OFF); /* tickets only */
    SSL_CTX_set_num_tickets(s->ctx, 1);
    /* every loop's context shares the ticket keys: a session resumes on any loop */
    if (SSL_CTX_set_tlsext_ticket_keys(s->ctx, (void *)tls_leaves_ticket_keys(lv),
                                       TLS_TICKET_KEYS) != 1) {
        SSL_CTX_free(s->ctx);
        free(s);
        tls_err(err, errlen, "TLS: cannot set the session ticket keys");
        return UV_EIO;
    }
    SSL_CTX_set_client_hello_cb(s->ctx, on_client_hello, NULL);
    SSL_CTX_set_alpn_select_cb(s->ctx, on_alpn, NULL);
    s->lv = tls_leaves_ref(lv);
    *out = s;
    return 0;
}

void tls_server_ctx_free(struct tls_server_ctx *s)
{
    if (s == NULL)
        return;
    SSL_CTX_free(s->ctx);
    tls_leaves_unref(s->lv);
    free(s);
}

/* ------------------------------------------------------------------------ */
/* Upstream sessions                                                         */

static void session_drop(struct tls_client_ctx *cc, struct session **pp)
{
    struct session *e = *pp;

    *pp = e->next;
    SSL_SESSION_free(e->sess);
    free(e);
    cc->nsessions--;
}

static struct session **session_find(struct tls_client_ctx *cc, const char *host)
{
    struct session **pp = &cc->sessions;

    while (*pp != NULL && strcmp((*pp)->host, host) != 0)
        pp = &(*pp)->next;
    return pp;
}

/* Drops the oldest of host's sessions when it has SESSIONS_PER_HOST. */
static void session_make_room(struct tls_client_ctx *cc, const char *host)
{
    struct session **pp, **oldest = NULL;
    unsigned n = 0;

    for (pp = &cc->sessions; *pp != NULL; pp = &(*pp)->next) {
        if (strcmp((*pp)->host, host) == 0) {
            oldest = pp;
            n++;
        }
    }
    if (n >= SESSIONS_PER_HOST)
        session_drop(cc, oldest);
}

/* OpenSSL's new-session callback: keeps a copy of sess for the
 * connection's host. A copy, because OpenSSL marks the connection's own
 * session not resumable when the connection is freed without a
 * close_notify sent, which is how most proxied connections end. A TLS 1.3
 * ticket is kept beside the host's others (up to SESSIONS_PER_HOST, each
 * used once); a TLS 1.2 session, reusable, replaces the host's newest. */
static int on_new_session(SSL *ssl, SSL_SESSION *orig)
{
    struct tls_conn *c = SSL_get_app_data(ssl);
    struct tls_client_ctx *cc = c != NULL ? c->cctx : NULL;
    struct session **pp, *e;
    SSL_SESSION *sess;

    if (cc == NULL || !SSL_SESSION_is_resumable(orig) || (sess = SSL_SESSION_dup(orig)) == NULL)
        return 0;
    pp = session_find(cc, c->name);
    if (*pp != NULL && SSL_SESSION_get_protocol_version(sess) < TLS1_3_VERSION) {
        e = *pp;
        *pp = e->next;
        SSL_SESSION_free(e->sess);
    } else {
        session_make_room(cc, c->name);
        e = malloc(sizeof(*e));
        if (e == NULL) {
            SSL_SESSION_free(sess);
            return 0;
        }
        snprintf(e->host, sizeof(e->host), "%s", c->name);
        cc->nsessions++;
    }
    e->sess = sess;
    e->next = cc->sessions;
    cc->sessions = e;
    if (cc->nsessions > SESSIONS_MAX) {
        for (pp = &cc->sessions; (*pp)->next != NULL; pp = &(*pp)->next)
            ;
        session_drop(cc, pp);
    }
    return 0; /* OpenSSL keeps its own reference to orig */
}

/* Offers the kept session for the connection's host: a TLS 1.3 ticket
 * once (it leaves the cache), a TLS 1.2 session as a copy (the cache's
 * stays resumable however this connection ends). */
static void session_offer(struct tls_conn *c)
{
    struct session **pp = session_find(c->cctx, c->name);
    SSL_SESSION *s;
    int tls13;

    if (*pp == NULL)
        return;
    tls13 = SSL_SESSION_get_protocol_version((*pp)->sess) >= TLS1_3_VERSION;
    s = tls13 ? (*pp)->sess : SSL_SESSION_dup((*pp)->sess);
    if (s == NULL || !SSL_SESSION_is_resumable(s) || SSL_set_session(c->ssl, s) != 1)
        tls13 = 1; /* drop it */
    if (s != (*pp)->sess)
        SSL_SESSION_free(s);
    if (tls13)
        session_drop(c->cctx, pp);
    ERR_clear_error();
}

/* Adds every certificate of a PEM file to store; 0 certificates is an error. */
static int load_roots(X509_STORE *store, const char *path, char *err, size_t errlen)
{
    STACK_OF(X509_INFO) *infos = NULL;
    char *buf = NULL;
    size_t len = 0, n = 0;
    BIO *bio = NULL;
    int rc;

    rc = tls_read_file(path, TLS_FILE_MAX, &buf, &len);
    if (rc < 0) {
        tls_err(err, errlen, "CA file '%s': cannot read it: %s", path, uv_strerror(rc));
        return rc;
    }
    bio = BIO_new_mem_buf(buf, (int)len);
    infos = bio != NULL ? PEM_X509_INFO_read_bio(bio, NULL, NULL, NULL) : NULL;
    for (int i = 0; infos != NULL && i < sk_X509_INFO_num(infos); i++) {
        X509_INFO *xi = sk_X509_INFO_value(infos, i);
        if (xi->x509 != NULL && X509_STORE_add_cert(store, xi->x509) == 1)
            n++;
    }
    rc = 0;
    if (n == 0) {
        tls_err(err, errlen, "CA file '%s': no PEM certificate in it", path);
        rc = UV_EINVAL;
    }
    sk_X509_INFO_pop_free(infos, X509_INFO_free);
    BIO_free(bio);
    free(buf);
    ERR_clear_error();
    return rc;
}

int tls_client_ctx_new(const char *roots_path, const char *const *extra, size_t nextra,
                       struct tls_client_ctx **out, char *err, size_t errlen)
{
    struct tls_client_ctx *c = calloc(1, sizeof(*c));
    int rc = UV_ENOMEM;

    if (c == NULL)
        return UV_ENOMEM;
    c->ctx = ctx_common(TLS_client_method());
    if (c->ctx == NULL) {
        tls_err(err, errlen, "TLS: cannot make the client context");
        goto out;
    }
    SSL_CTX_set_verify(c->ctx, SSL_VERIFY_PEER, NULL);
    /* a CA in the trust files is an anchor even when it is an intermediate
     * (an extraCaCertPaths entry for a corporate issuing CA), as curl and
     * Python 3.13 verify */
    X509_VERIFY_PARAM_set_flags(SSL_CTX_get0_param(c->ctx), X509_V_FLAG_PARTIAL_CHAIN);
    SSL_CTX_set_session_cache_mode(c->ctx,
                                   SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(c->ctx, on_new_session);
    if (SSL_CTX_set_alpn_protos(c->ctx, alpn_h11, sizeof(alpn_h11) - 1) != 0) {
        tls_err(err, errlen, "TLS: cannot set ALPN");
        goto out;
    }
    rc = load_roots(SSL_CTX_get_cert_store(c->ctx),
                    roots_path != NULL ? roots_path : TLS_SYSTEM_ROOTS, err, errlen);
    for (size_t i = 0; rc == 0 && i < nextra; i++)
        rc = load_roots(SSL_CTX_get_cert_store(c->ctx), extra[i], err, errlen);
    if (rc < 0)
        goto out;
    *out = c;
    c = NULL;
out:
    tls_client_ctx_free(c);
    return rc;
}

void tls_client_ctx_free(struct tls_client_ctx *c)
{
    if (c == NULL)
        return;
    while (c->sessions != NULL)
        session_drop(c, &c->sessions);
    SSL_CTX_free(c->ctx);
    free(c);
}

/* ------------------------------------------------------------------------ */
/* Connections                                                               */

/* A buffer of the memory BIOs: ciphertext only (the record layer's input
 * and output), so freed without BUF_MEM_free's OPENSSL_cleanse, which wiped
 * a 32 KiB read buffer on every drained read (2-3% of the proxy's CPU per
 * new terminated tunnel, more in bulk). */
static void buf_free(BUF_MEM *bm)
{
    if (bm == NULL)
        return;
    OPENSSL_free(bm->data);
    OPENSSL_free(bm);
}

/* A memory BIO's buffer taken out of it before it is freed (BIO_NOCLOSE:
 * BIO_s_mem(3)), for buf_free. */
static BUF_MEM *bio_detach(BIO *b)
{
    BUF_MEM *bm = NULL;

    if (b == NULL || BIO_get_mem_ptr(b, &bm) <= 0) {
        ERR_clear_error();
        return NULL;
    }
    (void)BIO_set_close(b, BIO_NOCLOSE);
    return bm;
}

/* The connection's read (or write) BIO replaced by B; the old one freed,
 * its buffer with buf_free. */
static void set_rbio(struct tls_conn *c, BIO *b)
{
    BUF_MEM *old = bio_detach(SSL_get_rbio(c->ssl));

    SSL_set0_rbio(c->ssl, b);
    buf_free(old);
}

static void set_wbio(struct tls_conn *c, BIO *b)
{
    BUF_MEM *old = bio_detach(SSL_get_wbio(c->ssl));

    SSL_set0_wbio(c->ssl, b); /* keeps the handshake's bbio */
    buf_free(old);
}

static BIO *new_bio(void)
{
    BIO *b = BIO_new(BIO_s_mem());

    if (b != NULL)
        BIO_set_mem_eof_return(b, -1); /* empty means "more later", never EOF */
    return b;
}

static struct tls_conn *conn_new(SSL_CTX *ctx, const char *name)
{
    struct tls_conn *c = calloc(1, sizeof(*c));
    BIO *r = NULL, *w = NULL;

    if (c == NULL)
        return NULL;
    snprintf(c->name, sizeof(c->name), "%s", name);
    c->ssl = SSL_new(ctx);
    r = new_bio();
    w = new_bio();
    if (c->ssl == NULL || r == NULL || w == NULL) {
        BIO_free(r);
        BIO_free(w);
        tls_conn_free(c);
        ERR_clear_error();
        return NULL;
    }
    SSL_set_bio(c->ssl, r, w);
    SSL_set_app_data(c->ssl, c);
    return c;
}

/* Drives the handshake while it is under way. */
static int step(struct tls_conn *c)
{
    int r, e;

    if (c->state != TLS_CONN_HANDSHAKE)
        return c->state == TLS_CONN_FAILED ? UV_EPROTO : 0;
    ERR_clear_error();
    r = SSL_do_handshake(c->ssl);
    if (r == 1) {
        c->state = TLS_CONN_OPEN;
        return 0;
    }
    e = SSL_get_error(c->ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
        return 0;
    if (e == SSL_ERROR_WANT_CLIENT_HELLO_CB) {
        c->state = TLS_CONN_NEED_LEAF;
        return 0;
    }
    return fail(c);
}

struct tls_conn *tls_conn_server_new(struct tls_server_ctx *ctx, const char *leaf_name)
{
    char key[TLS_LEAF_NAME_MAX];
    struct tls_conn *c;

    if (tls_leaf_name(leaf_name, key) < 0)
        return NULL;
    c = conn_new(ctx->ctx, key);
    if (c == NULL)
        return NULL;
    c->sctx = ctx;
    SSL_set_accept_state(c->ssl);
    return c;
}

struct tls_conn *tls_conn_client_new(struct tls_client_ctx *ctx, const char *host)
{
    struct tls_conn *c;
    int ok;

    if (host == NULL || (!tls_ip_literal(host, NULL, NULL) && !tls_name_valid(host)))
        return NULL;
    c = conn_new(ctx->ctx, host);
    if (c == NULL)
        return NULL;
    c->cctx = ctx;
    if (tls_ip_literal(host, NULL, NULL)) {
        ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->ssl), host) == 1;
    } else {
        SSL_set_hostflags(c->ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
        ok = SSL_set_tlsext_host_name(c->ssl, host) == 1 && SSL_set1_host(c->ssl, host) == 1;
    }
    if (!ok) {
        tls_conn_free(c);
        ERR_clear_error();
        return NULL;
    }
    session_offer(c);
    SSL_set_connect_state(c->ssl);
    step(c); /* writes the ClientHello */
    return c;
}

void tls_conn_free(struct tls_conn *c)
{
    BUF_MEM *r, *w;

    if (c == NULL)
        return;
    r = c->ssl != NULL ? bio_detach(SSL_get_rbio(c->ssl)) : NULL;
    w = c->ssl != NULL ? bio_detach(SSL_get_wbio(c->ssl)) : NULL;
    SSL_free(c->ssl);
    buf_free(r);
    buf_free(w);
    X509_free(c->leaf);
    free(c);
}

/* A memory BIO that held bytes is swapped for a fresh one once it is
 * empty, and the record layer's read and write buffers are freed when they
 * hold nothing (SSL_MODE_RELEASE_BUFFERS alone keeps the read buffer after
 * a post-handshake message such as a session ticket, and the write buffer
 * after a close_notify: 16.7 and 5.2 KiB of every held terminated tunnel),
 * so an idle connection holds no buffer. */
static void release_idle(struct tls_conn *c)
{
    BIO *b;

    (void)SSL_free_buffers(c->ssl); /* 0 while either holds bytes: kept */

    if (c->rused && BIO_ctrl_pending(SSL_get_rbio(c->ssl)) == 0 && (b = new_bio()) != NULL) {
        set_rbio(c, b);
        c->rused = 0;
    }
    if (c->wused && BIO_ctrl_pending(SSL_get_wbio(c->ssl)) == 0 && (b = new_bio()) != NULL) {
        set_wbio(c, b);
        c->wused = 0;
    }
}

static void note_out(struct tls_conn *c)
{
    if (BIO_ctrl_pending(SSL_get_wbio(c->ssl)) > 0)
        c->wused = 1;
}

int tls_conn_feed(struct tls_conn *c, const void *data, size_t len)
{
    size_t done = 0;
    int rc;

    if (c->state == TLS_CONN_FAILED)
        return UV_EPROTO;
    while (done < len) {
        size_t n = len - done < INT32_MAX ? len - done : INT32_MAX;
        if (BIO_write(SSL_get_rbio(c->ssl), (const char *)data + done, (int)n) != (int)n) {
            ERR_clear_error();
            return UV_ENOMEM;
        }
        done += n;
    }
    if (len > 0)
        c->rused = 1;
    rc = step(c);
    note_out(c);
    return rc;
}

enum tls_conn_state tls_conn_state(const struct tls_conn *c)
{
    return c->state;
}

const char *tls_conn_reason(const struct tls_conn *c)
{
    return c->state == TLS_CONN_FAILED ? c->reason : NULL;
}

struct tls_mint *tls_conn_mint_job(struct tls_conn *c)
{
    struct tls_mint *m;

    if (c->sctx == NULL || c->state != TLS_CONN_NEED_LEAF || c->minting)
        return NULL;
    m = tls_mint_new(c->sctx->lv, c->name);
    if (m != NULL)
        c->minting = 1;
    return m;
}

int tls_conn_resume(struct tls_conn *c, struct tls_mint *m)
{
    X509 *x = tls_mint_take(m);
    int rc;

    tls_mint_free(m);
    if (c->state != TLS_CONN_NEED_LEAF) {
        X509_free(x);
        return c->state == TLS_CONN_FAILED ? UV_EPROTO : UV_EINVAL;
    }
    c->minting = 0;
    X509_free(c->leaf);
    c->leaf = x;
    c->mint_failed = x == NULL;
    c->state = TLS_CONN_HANDSHAKE;
    rc = step(c);
    note_out(c);
    return rc;
}

int tls_conn_read(struct tls_conn *c, void *buf, size_t len, size_t *got)
{
    size_t n = 0;
    int e;

    *got = 0;
    switch (c->state) {
    case TLS_CONN_FAILED:
        return UV_EPROTO;
    case TLS_CONN_CLOSED:
        return UV_EOF;
    case TLS_CONN_OPEN:
        break;
    default:
        return 0;
    }
    ERR_clear_error();
    if (SSL_read_ex(c->ssl, buf, len, &n) == 1) {
        *got = n;
        note_out(c); /* a KeyUpdate or ticket may have been answered */
        return 0;
    }
    e = SSL_get_error(c->ssl, 0);
    note_out(c);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        release_idle(c);
        return 0;
    }
    if (e == SSL_ERROR_ZERO_RETURN) {
        c->state = TLS_CONN_CLOSED;
        return UV_EOF;
    }
    return fail(c);
}

int tls_conn_write(struct tls_conn *c, const void *buf, size_t len)
{
    size_t n = 0;

    if (c->state != TLS_CONN_OPEN && c->state != TLS_CONN_CLOSED)
        return c->state == TLS_CONN_FAILED ? UV_EPROTO : UV_ENOTCONN;
    if (SSL_get_shutdown(c->ssl) & SSL_SENT_SHUTDOWN)
        return UV_EPIPE;
    if (len == 0)
        return 0;
    ERR_clear_error();
    if (SSL_write_ex(c->ssl, buf, len, &n) != 1 || n != len)
        return fail(c);
    note_out(c);
    return 0;
}

int tls_conn_shutdown(struct tls_conn *c)
{
    if (c->state != TLS_CONN_OPEN && c->state != TLS_CONN_CLOSED)
        return c->state == TLS_CONN_FAILED ? UV_EPROTO : UV_ENOTCONN;
    ERR_clear_error();
    if (SSL_shutdown(c->ssl) < 0) {
        int e = SSL_get_error(c->ssl, -1);
        if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
            return fail(c);
    }
    ERR_clear_error();
    note_out(c);
    (void)SSL_free_buffers(c->ssl); /* the close_notify is in the BIO now */
    return 0;
}

int tls_conn_has_input(const struct tls_conn *c)
{
    return SSL_has_pending(c->ssl) || BIO_ctrl_pending(SSL_get_rbio(c->ssl)) > 0;
}

size_t tls_conn_pending_out(const struct tls_conn *c)
{
    return BIO_ctrl_pending(SSL_get_wbio(c->ssl));
}

/* The write BIO's buffer changes hands (BIO_NOCLOSE keeps it when the BIO
 * is freed: BIO_s_mem(3)); a fresh BIO takes its place. */
struct tls_out *tls_conn_take_out_buf(struct tls_conn *c, char **data, size_t *len)
{
    BIO *old = SSL_get_wbio(c->ssl), *fresh;
    BUF_MEM *bm = NULL;

    if (BIO_ctrl_pending(old) == 0 || (fresh = new_bio()) == NULL)
        return NULL;
    if (BIO_get_mem_ptr(old, &bm) <= 0 || bm == NULL || bm->length == 0) {
        BIO_free(fresh);
        ERR_clear_error();
        return NULL;
    }
    (void)BIO_set_close(old, BIO_NOCLOSE);
    SSL_set0_wbio(c->ssl, fresh); /* frees old, not bm; keeps the handshake's bbio */
    c->wused = 0;
    *data = bm->data;
    *len = bm->length;
    return (struct tls_out *)bm;
}

void tls_out_free(struct tls_out *o)
{
    buf_free((BUF_MEM *)o);
}

struct tls_in *tls_in_new(size_t size, char **data)
{
    BUF_MEM *bm = BUF_MEM_new();

    if (bm == NULL)
        return NULL;
    bm->data = OPENSSL_malloc(size);
    if (bm->data == NULL) {
        buf_free(bm);
        return NULL;
    }
    bm->max = size;
    bm->length = 0;
    *data = bm->data;
    return (struct tls_in *)bm;
}

void tls_in_free(struct tls_in *in)
{
    buf_free((BUF_MEM *)in);
}

/* An empty read BIO is replaced by one over in's buffer (BIO_set_mem_buf,
 * BIO_s_mem(3)); else the bytes are appended as tls_conn_feed does. */
int tls_conn_feed_in(struct tls_conn *c, struct tls_in *in, size_t len)
{
    BUF_MEM *bm = (BUF_MEM *)in;
    BIO *b;
    int rc;

    if (len > bm->max) {
        buf_free(bm);
        return UV_EINVAL;
    }
    if (c->state == TLS_CONN_FAILED || len == 0 || BIO_ctrl_pending(SSL_get_rbio(c->ssl)) > 0 ||
        (b = BIO_new(BIO_s_mem())) == NULL) {
        rc = tls_conn_feed(c, bm->data, len); /* UV_EPROTO once failed */
        buf_free(bm);
        return rc;
    }
    bm->length = len;
    BIO_set_mem_buf(b, bm, BIO_CLOSE); /* b owns bm from now on */
    BIO_set_mem_eof_return(b, -1);
    set_rbio(c, b); /* the old one is empty */
    c->rused = 1;
    rc = step(c);
    note_out(c);
    return rc;
}

size_t tls_conn_take_out(struct tls_conn *c, void *buf, size_t len)
{
    size_t n = 0;

    if (len == 0 || BIO_read_ex(SSL_get_wbio(c->ssl), buf, len, &n) != 1)
        n = 0;
    ERR_clear_error();
    if (n > 0)
        release_idle(c);
    return n;
}

enum tls_alpn tls_conn_alpn(const struct tls_conn *c)
{
    return c->alpn;
}

const char *tls_conn_version(const struct tls_conn *c)
{
    return SSL_get_version(c->ssl);
}

int tls_conn_resumed(const struct tls_conn *c)
{
    return SSL_session_reused(c->ssl);
}

const char *tls_conn_sni(const struct tls_conn *c)
{
    return c->sctx != NULL ? SSL_get_servername(c->ssl, TLSEXT_NAMETYPE_host_name) : NULL;
}
