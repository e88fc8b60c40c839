/* tls/digest.c - SHA-256 and HMAC-SHA-256 over OpenSSL 3's one-shot EVP
 * calls, for AWS SigV4 re-signing (proxy/sigv4.c). Pure: no state, no
 * I/O; the key material given is not kept. */
#include "tls/tls.h"

#include <uv.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

int tls_sha256(const void *data, size_t len, uint8_t out[TLS_SHA256_LEN])
{
    unsigned int n = 0;

    if (EVP_Digest(len > 0 ? data : "", len, out, &n, EVP_sha256(), NULL) != 1 ||
        n != TLS_SHA256_LEN)
        return UV_EIO;
    return 0;
}

int tls_hmac_sha256(const void *key, size_t klen, const void *data, size_t len,
                    uint8_t out[TLS_SHA256_LEN])
{
    unsigned int n = 0;

    if (klen > INT32_MAX)
        return UV_EINVAL;
    if (HMAC(EVP_sha256(), klen > 0 ? key : "", (int)klen,
             len > 0 ? (const unsigned char *)data : (const unsigned char *)"", len, out,
             &n) == NULL ||
        n != TLS_SHA256_LEN)
        return UV_EIO;
    return 0;
}
