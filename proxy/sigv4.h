/* proxy/sigv4.h - AWS Signature Version 4 for credentials.awsPairs (issue
 * 24, deliverable 3): the parser of an "Authorization: AWS4-HMAC-SHA256"
 * header, the canonical request of a request head as AWS's documentation
 * defines it, and the signature under a secret. Pure: no I/O, no event
 * loop, no state (tests/proxy/test_sigv4.c with AWS's published test suite,
 * tests/fuzz/fuzz_sigv4.c); SHA-256 and HMAC come from tls/ (tls_sha256,
 * tls_hmac_sha256).
 *
 * The sandbox signs with the placeholders of a pair (the fake key id and
 * the fake secret); the proxy checks that signature with the fake secret
 * over the head as the client sent it, then signs the head that actually
 * goes upstream (placeholders replaced, hop-by-hop headers gone) with the
 * real secret. How a client builds the canonical URI differs (S3 encodes the
 * path once, other services twice, some normalise dot segments), so the
 * check tries each known form (SIGV4_URI_*) and the form that verifies is
 * the one used to re-sign.
 *
 * A head here is the request line and the header lines, each ending in
 * CRLF (a final empty line may follow); the request target may be in
 * origin form or absolute form (its scheme and authority are skipped).
 */
#ifndef SLUICE_PROXY_SIGV4_H
#define SLUICE_PROXY_SIGV4_H

#include <stddef.h>
#include <stdint.h>

#define SIGV4_BODY_MAX (64u << 20) /* a body buffered to hash it (srt: larger is a 403) */
#define SIGV4_HEX_LEN 64           /* a SHA-256 in lower-case hex */
#define SIGV4_KEYID_MAX 128
#define SIGV4_SIGNED_MAX 2048 /* the SignedHeaders list */

/* The payload hash of an empty body. */
extern const char sigv4_empty_hash[SIGV4_HEX_LEN + 1];

/* What an Authorization value is. */
enum sigv4_alg {
    SIGV4_ALG_NONE = 0, /* not AWS's: no AWS4- scheme */
    SIGV4_ALG_HMAC,     /* AWS4-HMAC-SHA256: parsed into struct sigv4_auth */
    SIGV4_ALG_ECDSA,    /* AWS4-ECDSA-P256-SHA256 (SigV4a): Credential parsed only */
    SIGV4_ALG_BAD,      /* an AWS4- scheme, malformed: why says how */
};

/* The parts of an Authorization value (pointers into it). */
struct sigv4_auth {
    const char *key; /* access key id */
    size_t key_len;
    const char *scope; /* date/region/service/aws4_request */
    size_t scope_len;
    const char *date; /* 8 digits, the scope's first part */
    const char *region, *service;
    size_t region_len, service_len;
    const char *signed_h; /* SignedHeaders: lower-case names, ';', ascending */
    size_t signed_len;
    const char *sig; /* 64 lower-case hex digits */
};

/* Parses an Authorization header value (spaces around it left out). The
 * three parameters Credential, SignedHeaders and Signature, each once, in
 * any order, separated by ',' and optional spaces; SignedHeaders sorted,
 * without duplicates, naming host. *why (may be NULL) gets a static reason
 * for SIGV4_ALG_BAD. */
enum sigv4_alg sigv4_parse_auth(const char *v, size_t len, struct sigv4_auth *a, const char **why);

/* The ways of making the canonical URI from the path as sent (bits). */
#define SIGV4_URI_RAW 0u   /* the path's bytes as they are (already encoded) */
#define SIGV4_URI_ONCE 1u  /* each byte decoded, then encoded once (S3) */
#define SIGV4_URI_TWICE 2u /* the path as sent encoded again (other services) */
#define SIGV4_URI_DOTS 4u  /* with dot segments removed first (RFC 3986 5.2.4) */
#define SIGV4_URI_FORMS 6  /* RAW, ONCE, TWICE, each with and without DOTS */

/* The signature (64 hex digits and a NUL into sig) of the head under the
 * secret, for the scope and signed headers of a, the URI form, and the
 * payload hash (64 hex digits, or UNSIGNED-PAYLOAD and the like: the value
 * that stands last in the canonical request). A signed header the head
 * does not have is UV_ENOENT unless drop is set, when it is left out of the
 * list: the list used goes into list (room for SIGV4_SIGNED_MAX + 1).
 * The head must have an x-amz-date header that starts with the scope's
 * date (else UV_EINVAL). 0, UV_EINVAL, UV_ENOENT, UV_ENOMEM, UV_EIO. */
int sigv4_sign(const char *head, size_t len, const struct sigv4_auth *a, unsigned form,
               const char *payload, const uint8_t *secret, size_t slen, int drop,
               char list[SIGV4_SIGNED_MAX + 1], char sig[SIGV4_HEX_LEN + 1]);

/* The URI form (SIGV4_URI_*) under which head's signature a->sig verifies
 * with the secret, or -1 when none does (or a part is missing). */
int sigv4_verify(const char *head, size_t len, const struct sigv4_auth *a, const char *payload,
                 const uint8_t *secret, size_t slen);

/* A new head (malloc'd into *out, *olen) like head with its Authorization
 * header re-signed with the secret: the key id as the head's own
 * Authorization names it, the URI form given, the signed headers the
 * client listed that the head still has (host and x-amz-date must remain),
 * and payload. Every other byte is as it was. 0, UV_EINVAL (no AWS4-HMAC
 * Authorization, or two), UV_ENOENT, UV_ENOMEM, UV_EIO. */
int sigv4_resign(const char *head, size_t len, unsigned form, const char *payload,
                 const uint8_t *secret, size_t slen, char **out, size_t *olen);

/* The lower-case hex SHA-256 of len bytes into hex (65 bytes). 0 or UV_EIO. */
int sigv4_hash_hex(const void *data, size_t len, char hex[SIGV4_HEX_LEN + 1]);

#endif
