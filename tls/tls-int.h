/* tls/tls-int.h - what tls/'s files share; never included outside tls/. */
#ifndef SLUICE_TLS_INT_H
#define SLUICE_TLS_INT_H

#include <stdarg.h>
#include <stdatomic.h>

#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "tls/tls.h"

#define TLS_FILE_MAX ((size_t)4 << 20) /* a PEM file read whole: CA, key, roots */
#define TLS_LEAF_NAME_MAX (TLS_SNI_MAX + 1) /* a canonical leaf name with its NUL */

struct tls_ca {
    atomic_int refs;
    X509 *cert;
    EVP_PKEY *key;
    ASN1_OCTET_STRING *kid; /* its Subject Key Identifier (or the key's SHA-1) */
    const EVP_MD *md;       /* what leaves are signed with (NULL for Ed25519/Ed448) */
    int64_t not_after;
};

/* ca.c */
struct tls_ca *tls_ca_ref(struct tls_ca *ca);
int tls_read_file(const char *path, size_t max, char **buf, size_t *len);
/* Writes buf to path (mode 0644, O_NOFOLLOW, replacing it). */
int tls_write_file(const char *path, const char *a, size_t alen, const char *b, size_t blen);
/* x as PEM into buf: its length without the NUL, or UV_ENOBUFS, UV_ENOMEM. */
int tls_x509_pem(X509 *x, char *buf, size_t len);
/* A serial number of 159 random bits (positive, never zero). */
int tls_serial_set(X509 *x);
/* snprintf into err (when err is not NULL), then drops OpenSSL's error queue. */
void tls_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* 1 when s is an IPv4 or IPv6 literal (no brackets); bytes into addr (4 or
 * 16) and *alen when addr is not NULL. */
int tls_ip_literal(const char *s, unsigned char addr[16], size_t *alen);

/* leaf.c: the canonical form of a leaf name (lower case; an IP literal as
 * inet_ntop writes it), or UV_EINVAL when it is neither a valid host name
 * nor an IP literal. */
int tls_leaf_name(const char *name, char out[TLS_LEAF_NAME_MAX]);
/* A job minting the leaf for a canonical name (takes a reference on lv). */
struct tls_mint *tls_mint_new(struct tls_leaves *lv, const char *name);
/* The cached leaf for name with a reference taken (X509_free it),
 * or NULL (a miss, counted). */
X509 *tls_leaves_lookup(struct tls_leaves *lv, const char *name);
EVP_PKEY *tls_leaves_key(struct tls_leaves *lv);
/* The session ticket keys every server context of lv uses (random, made
 * with lv): TLS_TICKET_KEYS bytes. */
#define TLS_TICKET_KEYS 80
const unsigned char *tls_leaves_ticket_keys(const struct tls_leaves *lv);
/* The mint job's leaf with a reference taken, or NULL when it failed. */
X509 *tls_mint_take(struct tls_mint *m);

#endif
