/* tls/tls.h - TLS termination behind a thin interface over OpenSSL 3.
 *
 * Nothing outside tls/ includes an OpenSSL header: every type here is
 * opaque or plain C. Errors are 0 / negative UV_E* as in the rest of the
 * tree (style.md R3); where a human needs to know why, a function also
 * writes a one-line reason into err (lowercase, no trailing period, naming
 * the file when a file is at fault) or returns a static reason string.
 *
 * Parts:
 *   sniff.c   the ClientHello sniffer: a pure function over a tunnel's first
 *             bytes (is it TLS, which SNI, which ALPN protocols)
 *   ca.c      the CA: from files, or made per run with its key in memory
 *             only; the CA certificate and the trust bundle for the sandbox
 *   trust.c   the Java trust store for the sandbox (PKCS12)
 *   digest.c  SHA-256 and HMAC-SHA-256 (AWS SigV4 re-signing: proxy/sigv4.c)
 *   leaf.c    leaf certificates and their LRU cache (shared by every loop,
 *             thread-safe), minted off the event loop
 *   conn.c    the per-loop contexts (server and upstream client) and the
 *             per-connection object driven through memory buffers
 *
 * Threads: struct tls_ca and struct tls_leaves are shared by every loop
 * thread once made (the cache has its own lock); a struct tls_server_ctx,
 * struct tls_client_ctx and their struct tls_conn belong to one loop
 * thread. tls_mint_run() is the only call meant for a worker thread
 * (uv_queue_work's work callback). OpenSSL keeps state per thread (error
 * queue, random generators) that it frees when the thread ends, but not
 * for threads still running when its atexit cleanup has run: a process
 * that mints on libuv's worker threads calls uv_library_shutdown() before
 * it exits, or valgrind reports that state as lost.
 */
#ifndef SLUICE_TLS_H
#define SLUICE_TLS_H

#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------------------ */
/* ClientHello sniffer (sniff.c)                                             */
/*                                                                           */
/* tls_sniff() looks at every byte the client has sent so far (the caller    */
/* keeps them: they go to the TLS engine or on through an opaque tunnel) and */
/* says whether they are, or start, a TLS ClientHello. Pure and I/O-free     */
/* (style.md R11): the same bytes always give the same answer, however they  */
/* arrived, and a longer prefix never turns an answer other than NEED_MORE   */
/* into another one. It reassembles a ClientHello split over several         */
/* handshake records. Bounds: the ClientHello message is at most             */
/* TLS_HELLO_MAX bytes, and it must be complete within the first             */
/* TLS_SNIFF_MAX bytes of the stream, so a caller's buffer of TLS_SNIFF_MAX  */
/* is always enough; anything larger is MALFORMED.                           */

#define TLS_HELLO_MAX 16384 /* ClientHello body (what the handshake header counts) */
#define TLS_SNIFF_MAX 18432 /* stream bytes: the hello plus record headers */
#define TLS_SNI_MAX 253     /* longest SNI host name accepted as valid */
#define TLS_ALPN_TEXT_MAX 128 /* the offered ALPN list as text, for logs */

enum tls_sniff_result {
    TLS_SNIFF_NEED_MORE = 0,    /* a prefix of a ClientHello so far: read more */
    TLS_SNIFF_CLIENT_HELLO = 1, /* a whole ClientHello: hello filled */
    TLS_SNIFF_NOT_TLS = 2,      /* not a TLS handshake record: treat as opaque bytes */
    TLS_SNIFF_MALFORMED = 3,    /* a TLS handshake record, but no valid ClientHello
                                   within the bounds: hello->reason says why */
};

/* What a ClientHello offers. Filled by tls_sniff() for CLIENT_HELLO (and the
 * reason for MALFORMED); zeroed for the other results. */
struct tls_hello {
    uint16_t version;    /* highest version offered: 0x0303 TLS 1.2, 0x0304 TLS 1.3 */
    int has_sni;         /* a server_name extension with a host_name was sent */
    int sni_bad;         /* it was sent but is no valid DNS name (NUL, bad bytes,
                            empty label, too long, an IP literal): sni is "" */
    char sni[TLS_SNI_MAX + 1]; /* the host name, ASCII lower case, NUL-terminated
                                  ("" when none or bad) */
    int alpn_offered;    /* an ALPN extension was sent */
    int alpn_http11;     /* ... offering "http/1.1" */
    int alpn_h2;         /* ... offering "h2" */
    unsigned alpn_count; /* how many protocol names it offered */
    char alpn[TLS_ALPN_TEXT_MAX]; /* the names comma-separated, bytes outside
                                     printable ASCII as '?', cut with "..." */
    size_t hello_len;    /* stream bytes up to the end of the record that
                            completes the ClientHello */
    const char *reason;  /* MALFORMED, or sni_bad: why, a static string */
};

enum tls_sniff_result tls_sniff(const uint8_t *data, size_t len, struct tls_hello *hello);

/* 1 when s (NUL-terminated) is a syntactically valid DNS host name as the
 * sniffer accepts one in SNI: 1..253 bytes, labels of 1..63 letters, digits,
 * '-' or '_', no trailing dot, not an IPv4 literal. */
int tls_name_valid(const char *s);

/* ------------------------------------------------------------------------ */
/* CA (ca.c)                                                                 */

struct tls_ca;

/* Loads the CA from a PEM certificate and a PEM private key (both paths, or
 * the call fails with UV_EINVAL). The certificate must be a CA
 * (basicConstraints CA:TRUE; keyCertSign when keyUsage is present), valid
 * now, and the key must be its key. An encrypted key is refused (no
 * prompt). Errors name the file: unreadable (its errno), not PEM, not a
 * CA, expired, key does not match. */
int tls_ca_load(const char *cert_path, const char *key_path, struct tls_ca **out, char *err,
                size_t errlen);

/* Makes a CA for this run: ECDSA P-256 key (in memory only, never written),
 * self-signed, CA:TRUE pathlen 0, keyUsage keyCertSign cRLSign, Subject
 * and Authority Key Identifiers, valid from an hour ago for valid_days
 * (1..3650; 0 means 365). */
int tls_ca_generate(unsigned valid_days, struct tls_ca **out, char *err, size_t errlen);

/* The CA certificate (never the key) as PEM into buf; returns its length
 * without the NUL, or UV_ENOBUFS when it does not fit with a NUL. */
int tls_ca_cert_pem(const struct tls_ca *ca, char *buf, size_t len);

/* Writes the CA certificate (never the key) as PEM to path, mode 0644,
 * replacing the file (not following a final symlink). */
int tls_ca_write_cert(const struct tls_ca *ca, const char *path, char *err, size_t errlen);

/* Writes the sandbox's trust bundle to path (mode 0644): the system roots
 * file roots_path (NULL: TLS_SYSTEM_ROOTS) followed by the CA certificate.
 * An unreadable roots file is an error naming it. */
#define TLS_SYSTEM_ROOTS "/etc/ssl/certs/ca-certificates.crt"
int tls_bundle_write(const struct tls_ca *ca, const char *roots_path, const char *path,
                     char *err, size_t errlen);

/* Writes a Java trust store to path (mode 0644; PKCS12, keystore type
 * "PKCS12"): the certificates of the system roots file roots_path (NULL:
 * TLS_SYSTEM_ROOTS) and the CA certificate (alias "sluice-run-ca"), each a
 * certificate bag with Oracle's trusted-key-usage attribute, which the JDK
 * needs to read a bag as a trusted entry; no key; an HMAC under password
 * (trust.c). */
int tls_truststore_write(const struct tls_ca *ca, const char *roots_path, const char *path,
                         const char *password, char *err, size_t errlen);

/* A CA from files that works but that strict verifiers refuse (no
 * keyUsage, no Subject Key Identifier): a sentence for the log, or NULL. */
const char *tls_ca_warning(const struct tls_ca *ca);

/* The CA's notAfter as seconds since the epoch. */
int64_t tls_ca_not_after(const struct tls_ca *ca);

/* Drops the caller's reference (struct tls_leaves holds its own). */
void tls_ca_free(struct tls_ca *ca);

/* ------------------------------------------------------------------------ */
/* Leaves and their cache (leaf.c)                                           */
/*                                                                           */
/* struct tls_leaves is shared by every loop: the CA, one leaf key (ECDSA    */
/* P-256 from OpenSSL's generator, which draws its seed from the OS random   */
/* source; never derived from the CA) and an LRU cache of leaf               */
/* certificates keyed by name, behind a mutex. Refcounted so a mint job may  */
/* outlive the connection that asked for it.                                 */
/*                                                                           */
/* A leaf for name (a DNS name, or an IPv4 or IPv6 literal without brackets) */
/* has SAN DNS:name or IP:addr, CN=name when it fits, serial from 159 random */
/* bits, validity from an hour ago to min(now + valid_days, CA notAfter),    */
/* basicConstraints CA:FALSE, keyUsage digitalSignature, EKU serverAuth,     */
/* a Subject Key Identifier and an Authority Key Identifier equal to the     */
/* CA's Subject Key Identifier.                                              */

#define TLS_CACHE_DEFAULT 2048
#define TLS_CACHE_MIN 16
#define TLS_CACHE_MAX (1u << 20)
#define TLS_LEAF_DAYS_DEFAULT 99

struct tls_leaves;

#define TLS_LEAF_RENEW_DEFAULT 3600

struct tls_leaves_opts {
    unsigned cache_size;   /* leaves kept, TLS_CACHE_MIN..TLS_CACHE_MAX; 0: default */
    unsigned valid_days;   /* leaf lifetime cap in days, 1..397; 0: default */
    unsigned renew_before; /* a cached leaf ending within this many seconds is
                              minted again (unless the CA ends first); 0: default */
};

/* Takes a reference on ca (freed with the last reference). */
int tls_leaves_new(struct tls_ca *ca, const struct tls_leaves_opts *o, struct tls_leaves **out,
                   char *err, size_t errlen);
struct tls_leaves *tls_leaves_ref(struct tls_leaves *lv);
void tls_leaves_unref(struct tls_leaves *lv);

struct tls_leaves_stats {
    uint64_t hits;   /* a handshake found its leaf in the cache */
    uint64_t misses; /* ... did not (a mint job was asked for) */
    uint64_t mints;  /* leaves minted */
    uint64_t mint_failures;
    uint64_t mint_waits; /* a mint waited for another thread minting the same name */
    uint64_t evictions;
    uint64_t renewals;   /* cached leaves dropped near their end */
    unsigned cached; /* leaves in the cache now */
};
void tls_leaves_stats(struct tls_leaves *lv, struct tls_leaves_stats *st);

/* Mints a leaf for name outside any handshake and caches it (for tests,
 * benchmarks and warming the cache). Thread-safe. */
int tls_leaves_mint(struct tls_leaves *lv, const char *name, char *err, size_t errlen);

/* The leaf for name as PEM, if cached (tests and debugging). */
int tls_leaves_cert_pem(struct tls_leaves *lv, const char *name, char *buf, size_t len);

/* ------------------------------------------------------------------------ */
/* Contexts (conn.c): one of each per loop thread                            */

struct tls_server_ctx;
struct tls_client_ctx;

/* The terminating side: TLS 1.2 and 1.3, no renegotiation, released buffers
 * when idle, ALPN http/1.1 only, a ClientHello callback that serves the
 * connection's leaf from the cache or pauses the handshake for a mint.
 * Takes a reference on lv. */
int tls_server_ctx_new(struct tls_leaves *lv, struct tls_server_ctx **out, char *err,
                       size_t errlen);
void tls_server_ctx_free(struct tls_server_ctx *ctx);

/* The upstream side: verifies the origin's chain against roots_path (NULL:
 * TLS_SYSTEM_ROOTS) plus every file in extra (PEM, one or more
 * certificates each; an unreadable or certificate-less file is an error
 * naming it), TLS 1.2 and 1.3, ALPN http/1.1. The sessions origins give
 * are kept per host name (at most 128) and offered on the next connection
 * to that name (a TLS 1.3 ticket once). */
int tls_client_ctx_new(const char *roots_path, const char *const *extra, size_t nextra,
                       struct tls_client_ctx **out, char *err, size_t errlen);
void tls_client_ctx_free(struct tls_client_ctx *ctx);

/* ------------------------------------------------------------------------ */
/* Connections (conn.c)                                                      */
/*                                                                           */
/* A connection never touches a socket: the caller feeds the peer's bytes in */
/* (tls_conn_feed), sends what tls_conn_take_out gives back, reads and       */
/* writes plaintext. After every call, the caller sends any pending output   */
/* (tls_conn_pending_out) and reads any plaintext the call made available.   */
/* Backpressure is the caller's (R8): stop reading the socket while          */
/* tls_conn_pending_out() or the plaintext consumer is above its mark.       */
/*                                                                           */
/* Server side, handshake with a cache miss:                                 */
/*   tls_conn_feed(c, ...)            state TLS_CONN_NEED_LEAF               */
/*   m = tls_conn_mint_job(c)         (on the loop)                          */
/*   uv_queue_work: tls_mint_run(m)   (on a worker thread)                   */
/*   tls_conn_resume(c, m)            (back on the loop; takes m) and the    */
/*                                    handshake goes on                      */
/* When the connection dies while the job runs, the after-work callback      */
/* calls tls_mint_free(m) instead. While paused, tls_conn_feed keeps what it */
/* is given without reading it, so the caller stops reading the socket until */
/* the resume (R8). The handshake timeout is the caller's (it has the        */
/* timers): tls_conn_state() tells where the handshake is.                   */

struct tls_conn;
struct tls_mint;

enum tls_conn_state {
    TLS_CONN_HANDSHAKE = 0, /* handshake under way: feed more, send output */
    TLS_CONN_NEED_LEAF,     /* server paused for a leaf: mint it, then resume */
    TLS_CONN_OPEN,          /* handshake done: plaintext flows */
    TLS_CONN_CLOSED,        /* the peer sent close_notify: no more plaintext in */
    TLS_CONN_FAILED,        /* fatal error: tls_conn_reason() says why; send the
                               pending output (an alert) and close */
};

/* ALPN outcome on the server side. */
enum tls_alpn {
    TLS_ALPN_NONE = 0,    /* the client offered no ALPN */
    TLS_ALPN_HTTP11,      /* http/1.1 selected */
    TLS_ALPN_UNSERVED,    /* the client offered ALPN but not http/1.1 (an h2-only
                             client): nothing selected, the caller decides */
};

/* leaf_name: the name the leaf is for (a DNS name or an IP literal without
 * brackets), the caller's choice (the CONNECT target, or a validated SNI).
 * Returns NULL on ENOMEM or an invalid name. */
struct tls_conn *tls_conn_server_new(struct tls_server_ctx *ctx, const char *leaf_name);

/* host: the origin's name (sent as SNI and checked against the certificate)
 * or an IP literal without brackets (checked against SAN IP, no SNI).
 * Starts the handshake: send tls_conn_take_out()'s bytes (the ClientHello). */
struct tls_conn *tls_conn_client_new(struct tls_client_ctx *ctx, const char *host);

void tls_conn_free(struct tls_conn *c);

/* The peer's bytes. Drives the handshake while it is not done. 0, or
 * UV_EPROTO once the connection failed (see tls_conn_reason), UV_ENOMEM. */
int tls_conn_feed(struct tls_conn *c, const void *data, size_t len);

enum tls_conn_state tls_conn_state(const struct tls_conn *c);

/* Why the connection failed: a short static string ("certificate expired",
 * "certificate name mismatch", "unknown issuer", "no shared cipher", ...),
 * or NULL while it has not. */
const char *tls_conn_reason(const struct tls_conn *c);

/* Server side, state NEED_LEAF: the job that mints the missing leaf (NULL
 * in any other state, while the connection's job is out, or on ENOMEM).
 * The job holds no pointer to the connection, so it may outlive it. */
struct tls_mint *tls_conn_mint_job(struct tls_conn *c);
/* Thread-safe, blocking: mints and caches the leaf (the job keeps it). */
void tls_mint_run(struct tls_mint *m);
/* Hands the job's leaf to the connection (m must be c's own job), frees
 * the job and goes on with the handshake. 0, or UV_EPROTO when the mint
 * failed (the client gets an internal_error alert) or the handshake did,
 * UV_EINVAL when c was not waiting for a leaf. */
int tls_conn_resume(struct tls_conn *c, struct tls_mint *m);
/* Frees a job whose connection is gone. */
void tls_mint_free(struct tls_mint *m);

/* Plaintext the peer sent: writes up to len bytes into buf and sets *got
 * (0 when none is ready: feed more). 0, UV_EOF after close_notify, or
 * UV_EPROTO. */
int tls_conn_read(struct tls_conn *c, void *buf, size_t len, size_t *got);

/* Encrypts len bytes for the peer (all of them, or an error); the records
 * go to the pending output. In state OPEN, and CLOSED (the peer closed its
 * half: a response may still go out); before: UV_ENOTCONN, after a
 * failure UV_EPROTO, after tls_conn_shutdown UV_EPIPE. */
int tls_conn_write(struct tls_conn *c, const void *buf, size_t len);

/* Queues a close_notify for the peer. */
int tls_conn_shutdown(struct tls_conn *c);

/* 1 when the engine holds input not yet turned into plaintext (a record,
 * or part of one, fed and not read): a reader that stopped and starts again
 * calls tls_conn_read() before it waits for the socket. */
int tls_conn_has_input(const struct tls_conn *c);

/* Bytes waiting to be sent to the peer, and taking them (returns how many
 * were copied into buf). */
size_t tls_conn_pending_out(const struct tls_conn *c);
size_t tls_conn_take_out(struct tls_conn *c, void *buf, size_t len);

/* The same without a copy: all the pending output as one buffer (*data,
 * *len) the caller owns until tls_out_free(); NULL when there is none (or
 * on ENOMEM: tls_conn_take_out still works). */
struct tls_out;
struct tls_out *tls_conn_take_out_buf(struct tls_conn *c, char **data, size_t *len);
void tls_out_free(struct tls_out *o);

/* Input without a copy: a buffer of size bytes (*data) to read the peer's
 * bytes into, then given to the engine with tls_conn_feed_in (len of them
 * filled; it takes the buffer whatever it returns; when earlier input is
 * still unread it copies, as tls_conn_feed does; UV_EINVAL when len is
 * more than size), or freed unused with tls_in_free. NULL on ENOMEM. */
struct tls_in;
struct tls_in *tls_in_new(size_t size, char **data);
void tls_in_free(struct tls_in *in);
int tls_conn_feed_in(struct tls_conn *c, struct tls_in *in, size_t len);

/* After the handshake: the negotiated ALPN (server side), the protocol
 * version ("TLSv1.3"), whether the session was resumed, and (server side)
 * the SNI the client sent or NULL. */
enum tls_alpn tls_conn_alpn(const struct tls_conn *c);
const char *tls_conn_version(const struct tls_conn *c);
int tls_conn_resumed(const struct tls_conn *c);
const char *tls_conn_sni(const struct tls_conn *c);

/* ------------------------------------------------------------------------ */
/* Digests (digest.c): pure, any thread                                      */

#define TLS_SHA256_LEN 32

/* SHA-256 of len bytes (data may be NULL when len is 0). 0 or UV_EIO. */
int tls_sha256(const void *data, size_t len, uint8_t out[TLS_SHA256_LEN]);
/* HMAC-SHA-256 of data under key. 0, UV_EINVAL (a key over 2 GiB) or
 * UV_EIO. */
int tls_hmac_sha256(const void *key, size_t klen, const void *data, size_t len,
                    uint8_t out[TLS_SHA256_LEN]);

#endif
