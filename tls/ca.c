/* tls/ca.c - the CA (tls.h): loaded from files or made per run, its
 * certificate as PEM, the sandbox's trust bundle; and the file and error
 * helpers tls/ shares (tls-int.h).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>

#include "tls/tls-int.h"
#include "common/common.h"

#define CA_DAYS_DEFAULT 365
#define CA_DAYS_MAX 3650

void tls_err(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (err != NULL && errlen > 0) {
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    ERR_clear_error();
}

int tls_ip_literal(const char *s, unsigned char addr[16], size_t *alen)
{
    unsigned char tmp[16];
    unsigned char *a = addr != NULL ? addr : tmp;

    if (inet_pton(AF_INET, s, a) == 1) {
        if (alen != NULL)
            *alen = 4;
        return 1;
    }
    if (inet_pton(AF_INET6, s, a) == 1) {
        if (alen != NULL)
            *alen = 16;
        return 1;
    }
    return 0;
}

int tls_read_file(const char *path, size_t max, char **buf, size_t *len)
{
    struct stat st;
    char *b = NULL;
    size_t n = 0;
    int fd, rc = 0;

    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) < 0) {
        rc = -errno;
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = S_ISDIR(st.st_mode) ? UV_EISDIR : UV_EINVAL;
        goto out;
    }
    if ((uintmax_t)st.st_size > max) {
        rc = UV_EFBIG;
        goto out;
    }
    b = malloc((size_t)st.st_size + 1);
    if (b == NULL) {
        rc = UV_ENOMEM;
        goto out;
    }
    while (n < (size_t)st.st_size) {
        ssize_t r = read(fd, b + n, (size_t)st.st_size - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = -errno;
            goto out;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    b[n] = '\0';
    *buf = b;
    *len = n;
    b = NULL;
out:
    free(b);
    close(fd);
    return rc;
}

int tls_write_file(const char *path, const char *a, size_t alen, const char *b, size_t blen)
{
    int fd, rc;

    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0644);
    if (fd < 0)
        return -errno;
    rc = fchmod(fd, 0644) < 0 ? -errno : 0;
    if (rc == 0)
        rc = common_write_all(fd, a, alen);
    if (rc == 0 && b != NULL)
        rc = common_write_all(fd, b, blen);
    if (close(fd) < 0 && rc == 0)
        rc = -errno;
    return rc;
}

int tls_serial_set(X509 *x)
{
    unsigned char r[20];
    BIGNUM *bn = NULL;
    int rc = UV_EIO;

    if (RAND_bytes(r, sizeof(r)) != 1)
        goto out;
    r[0] &= 0x7f; /* positive, at most 20 octets (RFC 5280 4.1.2.2) */
    r[0] |= 0x40; /* and never zero */
    bn = BN_bin2bn(r, sizeof(r), NULL);
    if (bn != NULL && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) != NULL)
        rc = 0;
out:
    BN_free(bn);
    return rc;
}

struct tls_ca *tls_ca_ref(struct tls_ca *ca)
{
    atomic_fetch_add(&ca->refs, 1);
    return ca;
}

void tls_ca_free(struct tls_ca *ca)
{
    if (ca == NULL || atomic_fetch_sub(&ca->refs, 1) != 1)
        return;
    X509_free(ca->cert);
    EVP_PKEY_free(ca->key);
    ASN1_OCTET_STRING_free(ca->kid);
    free(ca);
}

int64_t tls_ca_not_after(const struct tls_ca *ca)
{
    return ca->not_after;
}

const char *tls_ca_warning(const struct tls_ca *ca)
{
    uint32_t xf = X509_get_extension_flags(ca->cert);

    if (!(xf & EXFLAG_KUSAGE))
        return "the CA certificate has no keyUsage extension: clients that verify strictly "
               "(Python 3.13 and later by default) refuse the leaves it signs";
    if (X509_get0_subject_key_id(ca->cert) == NULL)
        return "the CA certificate has no Subject Key Identifier: clients that verify strictly "
               "(Python 3.13 and later by default) refuse the leaves it signs";
    return NULL;
}

/* Seconds since the epoch of t, through its distance from now. */
static int64_t asn1_epoch(const ASN1_TIME *t)
{
    int days = 0, secs = 0;

    if (ASN1_TIME_diff(&days, &secs, NULL, t) != 1)
        return 0;
    return (int64_t)time(NULL) + (int64_t)days * 86400 + secs;
}

/* What every CA needs once cert and key are set: the key id leaves name as
 * their Authority Key Identifier, the digest, the end of validity. */
static int ca_finish(struct tls_ca *ca)
{
    const ASN1_OCTET_STRING *skid = X509_get0_subject_key_id(ca->cert);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned n = 0;
    int id = EVP_PKEY_get_id(ca->key);

    if (skid != NULL) {
        ca->kid = ASN1_OCTET_STRING_dup(skid);
    } else if (X509_pubkey_digest(ca->cert, EVP_sha1(), md, &n) == 1) {
        ca->kid = ASN1_OCTET_STRING_new();
        if (ca->kid != NULL && ASN1_OCTET_STRING_set(ca->kid, md, (int)n) != 1) {
            ASN1_OCTET_STRING_free(ca->kid);
            ca->kid = NULL;
        }
    }
    if (ca->kid == NULL)
        return UV_ENOMEM;
    ca->md = id == EVP_PKEY_ED25519 || id == EVP_PKEY_ED448 ? NULL : EVP_sha256();
    ca->not_after = asn1_epoch(X509_get0_notAfter(ca->cert));
    return 0;
}

/* PEM passphrase callback: never prompts; remembers it was asked. */
static int no_passphrase(char *buf, int size, int rwflag, void *u)
{
    *(int *)u = 1;
    return -1;
}

static int load_pem(const char *path, int is_key, X509 **cert, EVP_PKEY **key, char *err,
                    size_t errlen)
{
    const char *what = is_key ? "CA key" : "CA certificate";
    char *buf = NULL;
    size_t len = 0;
    BIO *bio = NULL;
    int rc, asked = 0;

    rc = tls_read_file(path, TLS_FILE_MAX, &buf, &len);
    if (rc < 0) {
        tls_err(err, errlen, "%s '%s': cannot read it: %s", what, path, uv_strerror(rc));
        goto out;
    }
    bio = BIO_new_mem_buf(buf, (int)len);
    if (bio == NULL) {
        rc = UV_ENOMEM;
        tls_err(err, errlen, "%s '%s': out of memory", what, path);
        goto out;
    }
    if (is_key)
        *key = PEM_read_bio_PrivateKey(bio, NULL, no_passphrase, &asked);
    else
        *cert = PEM_read_bio_X509(bio, NULL, NULL, NULL);
    if (is_key ? *key == NULL : *cert == NULL) {
        rc = UV_EINVAL;
        tls_err(err, errlen, "%s '%s': %s", what, path,
                asked ? "the key is encrypted (a passphrase is not supported)"
                : is_key ? "no PEM private key in it"
                         : "no PEM certificate in it");
    }
out:
    BIO_free(bio);
    if (buf != NULL)
        OPENSSL_cleanse(buf, len);
    free(buf);
    return rc;
}

/* The certificate must be a CA, able to sign certificates, valid now. */
static int check_ca_cert(X509 *cert, const char *path, char *err, size_t errlen)
{
    uint32_t xf = X509_get_extension_flags(cert);

    if (xf & EXFLAG_INVALID) {
        tls_err(err, errlen, "CA certificate '%s': it has invalid extensions", path);
        return UV_EINVAL;
    }
    if (!(xf & EXFLAG_CA)) {
        tls_err(err, errlen, "CA certificate '%s': not a CA (no basicConstraints CA:TRUE)", path);
        return UV_EINVAL;
    }
    if ((xf & EXFLAG_KUSAGE) && !(X509_get_key_usage(cert) & KU_KEY_CERT_SIGN)) {
        tls_err(err, errlen, "CA certificate '%s': its keyUsage lacks keyCertSign", path);
        return UV_EINVAL;
    }
    if (X509_cmp_current_time(X509_get0_notAfter(cert)) <= 0) {
        tls_err(err, errlen, "CA certificate '%s': it has expired", path);
        return UV_EINVAL;
    }
    if (X509_cmp_current_time(X509_get0_notBefore(cert)) >= 0) {
        tls_err(err, errlen, "CA certificate '%s': it is not valid yet", path);
        return UV_EINVAL;
    }
    return 0;
}

int tls_ca_load(const char *cert_path, const char *key_path, struct tls_ca **out, char *err,
                size_t errlen)
{
    struct tls_ca *ca = NULL;
    int rc;

    if (cert_path == NULL || key_path == NULL || *cert_path == '\0' || *key_path == '\0') {
        tls_err(err, errlen, "a CA from files needs both a certificate and a key file");
        return UV_EINVAL;
    }
    ca = calloc(1, sizeof(*ca));
    if (ca == NULL)
        return UV_ENOMEM;
    atomic_init(&ca->refs, 1);
    rc = load_pem(cert_path, 0, &ca->cert, NULL, err, errlen);
    if (rc == 0)
        rc = check_ca_cert(ca->cert, cert_path, err, errlen);
    if (rc == 0)
        rc = load_pem(key_path, 1, NULL, &ca->key, err, errlen);
    if (rc == 0 && X509_check_private_key(ca->cert, ca->key) != 1) {
        tls_err(err, errlen, "CA key '%s': it is not the key of the CA certificate '%s'",
                key_path, cert_path);
        rc = UV_EINVAL;
    }
    if (rc == 0 && (rc = ca_finish(ca)) < 0)
        tls_err(err, errlen, "CA: out of memory");
    if (rc < 0)
        goto out;
    *out = ca;
    ca = NULL;
out:
    tls_ca_free(ca);
    return rc;
}

static int add_ext(X509 *x, X509 *issuer, int nid, const char *value)
{
    X509V3_CTX ctx;
    X509_EXTENSION *ext;
    int ok;

    X509V3_set_ctx(&ctx, issuer, x, NULL, NULL, 0);
    ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    if (ext == NULL)
        return -1;
    ok = X509_add_ext(x, ext, -1);
    X509_EXTENSION_free(ext);
    return ok == 1 ? 0 : -1;
}

static X509 *make_ca_cert(EVP_PKEY *key, unsigned days)
{
    unsigned char r[4];
    char cn[64];
    X509 *x = X509_new();
    X509_NAME *name = X509_NAME_new();
    int ok = 0;

    if (x == NULL || name == NULL || RAND_bytes(r, sizeof(r)) != 1)
        goto out;
    snprintf(cn, sizeof(cn), "sluice per-run CA %02x%02x%02x%02x", r[0], r[1], r[2], r[3]);
    ok = X509_set_version(x, X509_VERSION_3) == 1 && tls_serial_set(x) == 0 &&
         X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, (const unsigned char *)"sluice", -1,
                                    -1, 0) == 1 &&
         X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1,
                                    0) == 1 &&
         X509_set_subject_name(x, name) == 1 && X509_set_issuer_name(x, name) == 1 &&
         X509_gmtime_adj(X509_getm_notBefore(x), -3600) != NULL &&
         X509_time_adj_ex(X509_getm_notAfter(x), (int)days, 0, NULL) != NULL &&
         X509_set_pubkey(x, key) == 1 &&
         add_ext(x, x, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") == 0 &&
         add_ext(x, x, NID_key_usage, "critical,keyCertSign,cRLSign,digitalSignature") == 0 &&
         add_ext(x, x, NID_subject_key_identifier, "hash") == 0 &&
         add_ext(x, x, NID_authority_key_identifier, "keyid:always") == 0 &&
         X509_sign(x, key, EVP_sha256()) > 0;
out:
    X509_NAME_free(name);
    if (!ok) {
        X509_free(x);
        x = NULL;
    }
    return x;
}

int tls_ca_generate(unsigned valid_days, struct tls_ca **out, char *err, size_t errlen)
{
    struct tls_ca *ca = NULL;
    int rc = UV_EIO;

    if (valid_days == 0)
        valid_days = CA_DAYS_DEFAULT;
    if (valid_days > CA_DAYS_MAX) {
        tls_err(err, errlen, "CA: validity of %u days is over %u", valid_days, CA_DAYS_MAX);
        return UV_EINVAL;
    }
    ca = calloc(1, sizeof(*ca));
    if (ca == NULL)
        return UV_ENOMEM;
    atomic_init(&ca->refs, 1);
    ca->key = EVP_EC_gen("P-256");
    if (ca->key == NULL) {
        tls_err(err, errlen, "CA: cannot make an ECDSA P-256 key");
        goto out;
    }
    ca->cert = make_ca_cert(ca->key, valid_days);
    if (ca->cert == NULL) {
        tls_err(err, errlen, "CA: cannot make the certificate");
        goto out;
    }
    rc = ca_finish(ca);
    if (rc < 0) {
        tls_err(err, errlen, "CA: out of memory");
        goto out;
    }
    *out = ca;
    ca = NULL;
out:
    tls_ca_free(ca);
    return rc;
}

int tls_x509_pem(X509 *x, char *buf, size_t len)
{
    BIO *bio = BIO_new(BIO_s_mem());
    char *data;
    long n;
    int rc = UV_ENOMEM;

    if (bio == NULL || PEM_write_bio_X509(bio, x) != 1)
        goto out;
    n = BIO_get_mem_data(bio, &data);
    if (n <= 0 || (size_t)n >= len || n > INT32_MAX) {
        rc = UV_ENOBUFS;
        goto out;
    }
    memcpy(buf, data, (size_t)n);
    buf[n] = '\0';
    rc = (int)n;
out:
    BIO_free(bio);
    ERR_clear_error();
    return rc;
}

int tls_ca_cert_pem(const struct tls_ca *ca, char *buf, size_t len)
{
    return tls_x509_pem(ca->cert, buf, len);
}

#define PEM_CERT_MAX 16384

int tls_ca_write_cert(const struct tls_ca *ca, const char *path, char *err, size_t errlen)
{
    char pem[PEM_CERT_MAX];
    int n = tls_ca_cert_pem(ca, pem, sizeof(pem)), rc;

    if (n < 0) {
        tls_err(err, errlen, "CA certificate: cannot encode it: %s", uv_strerror(n));
        return n;
    }
    rc = tls_write_file(path, pem, (size_t)n, NULL, 0);
    if (rc < 0)
        tls_err(err, errlen, "CA certificate '%s': cannot write it: %s", path, uv_strerror(rc));
    return rc;
}

int tls_bundle_write(const struct tls_ca *ca, const char *roots_path, const char *path,
                     char *err, size_t errlen)
{
    char pem[PEM_CERT_MAX + 1];
    char *roots = NULL;
    size_t rlen = 0;
    int n, rc;

    if (roots_path == NULL)
        roots_path = TLS_SYSTEM_ROOTS;
    pem[0] = '\n';
    n = tls_ca_cert_pem(ca, pem + 1, sizeof(pem) - 1);
    if (n < 0) {
        tls_err(err, errlen, "trust bundle: cannot encode the CA certificate: %s",
                uv_strerror(n));
        return n;
    }
    rc = tls_read_file(roots_path, TLS_FILE_MAX, &roots, &rlen);
    if (rc < 0) {
        tls_err(err, errlen, "trust bundle: cannot read the system roots '%s': %s", roots_path,
                uv_strerror(rc));
        return rc;
    }
    /* a roots file without a final newline still gets the CA on a line of its own */
    int nl = rlen > 0 && roots[rlen - 1] != '\n';
    rc = tls_write_file(path, roots, rlen, nl ? pem : pem + 1, (size_t)n + (nl ? 1u : 0u));
    if (rc < 0)
        tls_err(err, errlen, "trust bundle '%s': cannot write it: %s", path, uv_strerror(rc));
    free(roots);
    return rc;
}
