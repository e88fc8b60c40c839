/* tls/trust.c - the Java trust store of the sandbox (issue 23): a PKCS12
 * file of certificate bags only (no key), each carrying Oracle's
 * trusted-key-usage attribute (OID 2.16.840.1.113894.746875.1.1, value
 * anyExtendedKeyUsage), which is what makes the JDK's PKCS12 key store
 * read a certificate bag as a trusted-certificate entry (`openssl pkcs12
 * -export -jdktrust anyExtendedKeyUsage` in OpenSSL 3.2 writes the same;
 * Debian's OpenSSL 3.0 has no such option, so it is built here with the
 * 3.0 API). The bags: the system roots, then the CA, each named by its
 * friendlyName (Java's alias). Unencrypted bags (public certificates) and
 * an HMAC under a password the caller gives (Java checks it when
 * javax.net.ssl.trustStorePassword is set). */
#include "tls/tls-int.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/objects.h>
#include <openssl/pem.h>
#include <openssl/pkcs12.h>
#include <openssl/x509.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#define ORACLE_TRUSTED_KEY_USAGE "2.16.840.1.113894.746875.1.1"
#define TRUST_ROOTS_MAX 4096 /* certificates taken from the roots file */

/* One certificate bag with its alias and the trusted-key-usage attribute. */
static int add_bag(STACK_OF(PKCS12_SAFEBAG) **bags, X509 *x, const char *alias, int trust_nid,
                   const ASN1_OBJECT *any_eku)
{
    PKCS12_SAFEBAG *bag = PKCS12_add_cert(bags, x);

    if (bag == NULL || !PKCS12_add_friendlyname_asc(bag, alias, -1))
        return UV_ENOMEM;
    /* len -1: the value is the ASN1_OBJECT itself (X509_ATTRIBUTE_set1_data) */
    if (!PKCS12_add1_attr_by_NID(bag, trust_nid, V_ASN1_OBJECT, (const unsigned char *)any_eku,
                                 -1))
        return UV_ENOMEM;
    return 0;
}

/* The next CERTIFICATE block of b, or NULL at the end. PEM_read_bio and
 * d2i_X509 rather than PEM_read_bio_X509, whose OpenSSL 3.0 decoder
 * framework costs about half a millisecond a certificate (a system roots
 * file has some 150); a block that is not a certificate is skipped. */
static X509 *next_cert(BIO *b)
{
    char *name = NULL, *header = NULL;
    unsigned char *data = NULL;
    long len = 0;
    X509 *x = NULL;

    while (x == NULL && PEM_read_bio(b, &name, &header, &data, &len) == 1) {
        const unsigned char *p = data;
        if (strcmp(name, PEM_STRING_X509) == 0 || strcmp(name, PEM_STRING_X509_OLD) == 0 ||
            strcmp(name, PEM_STRING_X509_TRUSTED) == 0)
            x = d2i_X509(NULL, &p, len);
        OPENSSL_free(name);
        OPENSSL_free(header);
        OPENSSL_free(data);
        name = header = NULL;
        data = NULL;
    }
    return x;
}

/* Every certificate of the PEM file roots_path as a bag ("root-N"). */
static int add_roots(STACK_OF(PKCS12_SAFEBAG) **bags, const char *roots_path, int trust_nid,
                     const ASN1_OBJECT *any_eku, char *err, size_t errlen)
{
    char *buf = NULL;
    size_t len = 0;
    BIO *b;
    X509 *x;
    unsigned n = 0;
    int rc;

    rc = tls_read_file(roots_path, TLS_FILE_MAX, &buf, &len);
    if (rc < 0) {
        tls_err(err, errlen, "trust store: cannot read the system roots '%s': %s", roots_path,
                uv_strerror(rc));
        return rc;
    }
    b = BIO_new_mem_buf(buf, (int)len);
    if (b == NULL) {
        free(buf);
        tls_err(err, errlen, "trust store: out of memory");
        return UV_ENOMEM;
    }
    while (rc == 0 && n < TRUST_ROOTS_MAX && (x = next_cert(b)) != NULL) {
        char alias[32];
        snprintf(alias, sizeof(alias), "root-%u", n++);
        rc = add_bag(bags, x, alias, trust_nid, any_eku);
        X509_free(x);
    }
    BIO_free(b);
    free(buf);
    if (rc < 0)
        tls_err(err, errlen, "trust store: out of memory");
    ERR_clear_error(); /* the end of the file leaves an error queued */
    return rc;
}

static int write_p12(PKCS12 *p12, const char *path, char *err, size_t errlen)
{
    unsigned char *der = NULL;
    int n = i2d_PKCS12(p12, &der), rc;

    if (n <= 0) {
        tls_err(err, errlen, "trust store: cannot encode it");
        return UV_ENOMEM;
    }
    rc = tls_write_file(path, (const char *)der, (size_t)n, NULL, 0);
    OPENSSL_free(der);
    if (rc < 0)
        tls_err(err, errlen, "trust store '%s': cannot write it: %s", path, uv_strerror(rc));
    return rc;
}

int tls_truststore_write(const struct tls_ca *ca, const char *roots_path, const char *path,
                         const char *password, char *err, size_t errlen)
{
    STACK_OF(PKCS12_SAFEBAG) *bags = NULL;
    STACK_OF(PKCS7) *safes = NULL;
    PKCS12 *p12 = NULL;
    ASN1_OBJECT *any_eku = OBJ_nid2obj(NID_anyExtendedKeyUsage);
    int trust_nid = OBJ_txt2nid(ORACLE_TRUSTED_KEY_USAGE), rc = UV_ENOMEM;

    if (trust_nid == NID_undef) /* OpenSSL 3.0 does not know it: make it known */
        trust_nid = OBJ_create(ORACLE_TRUSTED_KEY_USAGE, "oracle-jdk-trustedkeyusage",
                               "Trusted key usage (Oracle)");
    if (trust_nid == NID_undef || any_eku == NULL) {
        tls_err(err, errlen, "trust store: cannot register the trusted-key-usage OID");
        return UV_ENOMEM;
    }
    if (roots_path == NULL)
        roots_path = TLS_SYSTEM_ROOTS;
    rc = add_roots(&bags, roots_path, trust_nid, any_eku, err, errlen);
    if (rc < 0)
        goto out;
    rc = UV_ENOMEM;
    if (add_bag(&bags, ca->cert, "sluice-run-ca", trust_nid, any_eku) < 0 ||
        PKCS12_add_safe(&safes, bags, -1, 0, NULL) == 0 || /* -1: plain data, no encryption */
        (p12 = PKCS12_add_safes(safes, 0)) == NULL ||
        !PKCS12_set_mac(p12, password, -1, NULL, 0, PKCS12_DEFAULT_ITER, EVP_sha256())) {
        tls_err(err, errlen, "trust store: cannot build it");
        goto out;
    }
    rc = write_p12(p12, path, err, errlen);
out:
    PKCS12_free(p12);
    sk_PKCS7_pop_free(safes, PKCS7_free);
    sk_PKCS12_SAFEBAG_pop_free(bags, PKCS12_SAFEBAG_free);
    return rc;
}
