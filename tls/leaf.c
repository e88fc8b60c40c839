/* tls/leaf.c - leaf certificates and their cache (tls.h).
 *
 * One struct tls_leaves serves every loop: the CA, one ECDSA P-256 leaf key
 * made here (OpenSSL's DRBG, seeded from the OS random source; never derived
 * from the CA), the extensions every leaf shares (encoded once), and an LRU
 * cache of certificates keyed by the leaf name's canonical form (lower case;
 * an IP literal as inet_ntop writes it). A hash table (FNV-1a with a random
 * seed, chained) finds an entry; a doubly linked list keeps them in use
 * order; past the bound the least recently used one goes. Everything under
 * one mutex, held only for table work, never while signing.
 *
 * A cached X509 is shared: a connection takes a reference (X509_up_ref) and
 * an eviction drops only the cache's.
 */
#include <arpa/inet.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>

#include "tls/tls-int.h"

#define LEAF_DAYS_MAX 397 /* the CA/Browser Forum's cap */
#define CN_MAX 64         /* ub-common-name (RFC 5280) */

enum { EXT_BC, EXT_KU, EXT_EKU, EXT_SKI, EXT_AKI, EXT_N };

struct leaf {
    struct leaf *hnext;       /* hash chain */
    struct leaf *prev, *next; /* use order: head is the most recent */
    uint64_t hash;
    int64_t not_after; /* the leaf's end, seconds since the epoch */
    X509 *cert;        /* the cache's reference */
    char name[];
};

/* A name being minted (on the minting thread's stack). */
struct pending {
    struct pending *next;
    const char *name;
};

struct tls_leaves {
    atomic_int refs;
    struct tls_ca *ca;
    EVP_PKEY *key;
    X509_EXTENSION *ext[EXT_N];
    X509_PUBKEY *pub;      /* the leaf key's SubjectPublicKeyInfo, encoded once */
    EVP_MD_CTX *sign_tmpl; /* DigestSign with the CA key, initialised once */
    unsigned valid_days;
    int64_t renew_before; /* seconds before its end a leaf is minted again */
    uint64_t seed;
    unsigned char *ticket_keys; /* TLS_TICKET_KEYS bytes (OpenSSL's secure heap
                                   when the process set one up) */

    pthread_mutex_t lock; /* guards everything below */
    struct leaf **buckets;
    size_t nbuckets; /* a power of two */
    struct leaf *head, *tail;
    unsigned count, cap;
    struct pending *pending; /* names being minted */
    pthread_cond_t minted;   /* broadcast when a mint ends */
    struct tls_leaves_stats st;
};

struct tls_mint {
    struct tls_leaves *lv; /* a reference */
    X509 *cert;            /* the result, a reference; NULL when it failed */
    char name[TLS_LEAF_NAME_MAX];
};

int tls_leaf_name(const char *name, char out[TLS_LEAF_NAME_MAX])
{
    unsigned char addr[16];
    size_t alen, n;

    if (name == NULL)
        return UV_EINVAL;
    if (tls_ip_literal(name, addr, &alen))
        return inet_ntop(alen == 4 ? AF_INET : AF_INET6, addr, out, TLS_LEAF_NAME_MAX) != NULL
                   ? 0
                   : UV_EINVAL;
    n = strnlen(name, TLS_SNI_MAX + 1);
    if (n > TLS_SNI_MAX || !tls_name_valid(name))
        return UV_EINVAL;
    for (size_t i = 0; i <= n; i++)
        out[i] = name[i] >= 'A' && name[i] <= 'Z' ? (char)(name[i] - 'A' + 'a') : name[i];
    return 0;
}

static uint64_t name_hash(const struct tls_leaves *lv, const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull ^ lv->seed;

    for (; *s != '\0'; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ull;
    }
    return h ^ (h >> 29);
}

/* ------------------------------------------------------------------------ */
/* The cache (callers hold lv->lock)                                         */

static void lru_unlink(struct tls_leaves *lv, struct leaf *e)
{
    if (e->prev != NULL)
        e->prev->next = e->next;
    else
        lv->head = e->next;
    if (e->next != NULL)
        e->next->prev = e->prev;
    else
        lv->tail = e->prev;
    e->prev = e->next = NULL;
}

static void lru_push(struct tls_leaves *lv, struct leaf *e)
{
    e->prev = NULL;
    e->next = lv->head;
    if (lv->head != NULL)
        lv->head->prev = e;
    lv->head = e;
    if (lv->tail == NULL)
        lv->tail = e;
}

static struct leaf *cache_find(struct tls_leaves *lv, const char *name, uint64_t h)
{
    struct leaf *e = lv->buckets[h & (lv->nbuckets - 1)];

    for (; e != NULL; e = e->hnext)
        if (e->hash == h && strcmp(e->name, name) == 0)
            return e;
    return NULL;
}

static void cache_remove(struct tls_leaves *lv, struct leaf *e)
{
    struct leaf **pp = &lv->buckets[e->hash & (lv->nbuckets - 1)];

    while (*pp != e)
        pp = &(*pp)->hnext;
    *pp = e->hnext;
    lru_unlink(lv, e);
    lv->count--;
    X509_free(e->cert);
    free(e);
}

/* Inserts name -> cert (the cache takes its own reference) unless an entry
 * is there already; returns the cached certificate with a reference for the
 * caller, or NULL on ENOMEM. */
static X509 *cache_insert(struct tls_leaves *lv, const char *name, X509 *cert,
                          int64_t not_after)
{
    uint64_t h = name_hash(lv, name);
    struct leaf *e = cache_find(lv, name, h);
    size_t n = strlen(name);

    if (e == NULL) {
        e = malloc(sizeof(*e) + n + 1);
        if (e == NULL)
            return NULL;
        memcpy(e->name, name, n + 1);
        e->hash = h;
        e->not_after = not_after;
        e->cert = cert;
        X509_up_ref(cert);
        e->hnext = lv->buckets[h & (lv->nbuckets - 1)];
        lv->buckets[h & (lv->nbuckets - 1)] = e;
        lv->count++;
        while (lv->count > lv->cap) {
            cache_remove(lv, lv->tail);
            lv->st.evictions++;
        }
    } else {
        lru_unlink(lv, e);
    }
    lru_push(lv, e);
    X509_up_ref(e->cert);
    return e->cert;
}

/* The cached leaf for name with a reference and moved to the front, or
 * NULL. A leaf that ends within renew_before is dropped (and NULL returned)
 * so it is minted again, unless the CA ends first: then a new one would end
 * at the same time. Under lv->lock. */
static X509 *cached(struct tls_leaves *lv, const char *name, uint64_t h)
{
    struct leaf *e = cache_find(lv, name, h);

    if (e == NULL)
        return NULL;
    if (e->not_after - (int64_t)time(NULL) <= lv->renew_before &&
        e->not_after < lv->ca->not_after) {
        cache_remove(lv, e);
        lv->st.renewals++;
        return NULL;
    }
    lru_unlink(lv, e);
    lru_push(lv, e);
    X509_up_ref(e->cert);
    return e->cert;
}

X509 *tls_leaves_lookup(struct tls_leaves *lv, const char *name)
{
    uint64_t h = name_hash(lv, name);
    X509 *x;

    pthread_mutex_lock(&lv->lock);
    x = cached(lv, name, h);
    if (x != NULL)
        lv->st.hits++;
    else
        lv->st.misses++;
    pthread_mutex_unlock(&lv->lock);
    return x;
}

EVP_PKEY *tls_leaves_key(struct tls_leaves *lv)
{
    return lv->key;
}

const unsigned char *tls_leaves_ticket_keys(const struct tls_leaves *lv)
{
    return lv->ticket_keys;
}

void tls_leaves_stats(struct tls_leaves *lv, struct tls_leaves_stats *st)
{
    pthread_mutex_lock(&lv->lock);
    *st = lv->st;
    st->cached = lv->count;
    pthread_mutex_unlock(&lv->lock);
}

/* ------------------------------------------------------------------------ */
/* Minting                                                                   */

static int add_san(X509 *x, const char *name, int critical)
{
    unsigned char addr[16];
    size_t alen;
    GENERAL_NAMES *gens = sk_GENERAL_NAME_new_null();
    GENERAL_NAME *g = GENERAL_NAME_new();
    ASN1_STRING *s = NULL;
    int ok = 0;

    if (gens == NULL || g == NULL)
        goto out;
    if (tls_ip_literal(name, addr, &alen)) {
        s = ASN1_OCTET_STRING_new();
        if (s == NULL || ASN1_OCTET_STRING_set(s, addr, (int)alen) != 1)
            goto out;
        GENERAL_NAME_set0_value(g, GEN_IPADD, s);
    } else {
        s = ASN1_IA5STRING_new();
        if (s == NULL || ASN1_STRING_set(s, name, -1) != 1)
            goto out;
        GENERAL_NAME_set0_value(g, GEN_DNS, s);
    }
    s = NULL;
    if (sk_GENERAL_NAME_push(gens, g) <= 0)
        goto out;
    g = NULL;
    ok = X509_add1_ext_i2d(x, NID_subject_alt_name, gens, critical, X509V3_ADD_DEFAULT) == 1;
out:
    ASN1_STRING_free(s);
    GENERAL_NAME_free(g);
    GENERAL_NAMES_free(gens);
    return ok ? 0 : -1;
}

/* OpenSSL 3.0's X509_set_pubkey goes through the encoder framework (about
 * 300 us a call here), so the leaf key's SubjectPublicKeyInfo is encoded
 * once and its fields copied into each certificate. */
static int set_pubkey(X509 *x, const X509_PUBKEY *tmpl)
{
    ASN1_OBJECT *alg = NULL;
    const ASN1_OBJECT *pobj = NULL;
    const unsigned char *pk = NULL;
    const void *pval = NULL;
    X509_ALGOR *pa = NULL;
    void *val = NULL;
    unsigned char *enc;
    int pklen = 0, ptype = V_ASN1_UNDEF;

    if (X509_PUBKEY_get0_param(&alg, &pk, &pklen, &pa, tmpl) != 1 || pklen <= 0)
        return -1;
    X509_ALGOR_get0(&pobj, &ptype, &pval, pa);
    if (ptype == V_ASN1_OBJECT)
        val = OBJ_dup(pval);
    else if (ptype == V_ASN1_SEQUENCE)
        val = ASN1_STRING_dup(pval);
    else if (ptype != V_ASN1_UNDEF && ptype != V_ASN1_NULL)
        return -1;
    enc = OPENSSL_memdup(pk, (size_t)pklen);
    alg = OBJ_dup(alg);
    if ((val == NULL && pval != NULL && ptype != V_ASN1_NULL) || enc == NULL || alg == NULL ||
        X509_PUBKEY_set0_param(X509_get_X509_PUBKEY(x), alg, ptype, val, enc, pklen) != 1) {
        ASN1_OBJECT_free(alg);
        if (ptype == V_ASN1_OBJECT)
            ASN1_OBJECT_free(val);
        else
            ASN1_STRING_free(val);
        OPENSSL_free(enc);
        return -1;
    }
    return 0;
}

/* Signs x with a copy of the initialised DigestSign context (saves the
 * algorithm fetch per leaf). */
static int sign_leaf(struct tls_leaves *lv, X509 *x)
{
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    int ok;

    if (c == NULL)
        return -1;
    pthread_mutex_lock(&lv->lock);
    ok = EVP_MD_CTX_copy_ex(c, lv->sign_tmpl) == 1;
    pthread_mutex_unlock(&lv->lock);
    ok = ok && X509_sign_ctx(x, c) > 0;
    EVP_MD_CTX_free(c);
    return ok ? 0 : -1;
}

/* x as a freshly parsed certificate: every cached field (the public key
 * OpenSSL decodes and the TLS code reads, extension flags) made from the
 * bytes a client will see. Frees x. */
static X509 *reparse(X509 *x)
{
    unsigned char *der = NULL;
    const unsigned char *p;
    int n = i2d_X509(x, &der);
    X509 *y = NULL;

    X509_free(x);
    if (n <= 0)
        return NULL;
    p = der;
    y = d2i_X509(NULL, &p, n);
    OPENSSL_free(der);
    return y;
}

static X509 *mint_cert(struct tls_leaves *lv, const char *name, int64_t *not_after, char *err,
                       size_t errlen)
{
    time_t now = time(NULL);
    int64_t end = (int64_t)now + (int64_t)lv->valid_days * 86400;
    X509 *x = X509_new();
    X509_NAME *subj = X509_NAME_new();
    int ok, has_cn = strlen(name) <= CN_MAX;

    if (end > lv->ca->not_after)
        end = lv->ca->not_after;
    if (end <= (int64_t)now) {
        X509_free(x);
        X509_NAME_free(subj);
        tls_err(err, errlen, "leaf '%s': the CA has expired", name);
        return NULL;
    }
    ok = x != NULL && subj != NULL && X509_set_version(x, X509_VERSION_3) == 1 &&
         tls_serial_set(x) == 0 &&
         X509_set_issuer_name(x, X509_get_subject_name(lv->ca->cert)) == 1 &&
         (!has_cn || X509_NAME_add_entry_by_txt(subj, "CN", MBSTRING_ASC,
                                                (const unsigned char *)name, -1, -1, 0) == 1) &&
         X509_set_subject_name(x, subj) == 1 &&
         ASN1_TIME_set(X509_getm_notBefore(x), now - 3600) != NULL &&
         ASN1_TIME_set(X509_getm_notAfter(x), (time_t)end) != NULL && set_pubkey(x, lv->pub) == 0;
    for (int i = 0; ok && i < EXT_N; i++)
        ok = X509_add_ext(x, lv->ext[i], -1) == 1;
    /* an empty subject needs a critical SAN (RFC 5280 4.2.1.6) */
    ok = ok && add_san(x, name, !has_cn) == 0 && sign_leaf(lv, x) == 0;
    X509_NAME_free(subj);
    if (ok) {
        x = reparse(x);
        ok = x != NULL;
    }
    if (!ok) {
        X509_free(x);
        tls_err(err, errlen, "leaf '%s': cannot make the certificate", name);
        return NULL;
    }
    ERR_clear_error();
    *not_after = end;
    return x;
}

static int in_flight(const struct tls_leaves *lv, const char *name)
{
    for (const struct pending *p = lv->pending; p != NULL; p = p->next)
        if (strcmp(p->name, name) == 0)
            return 1;
    return 0;
}

/* The leaf for a canonical name: cached, or minted and cached. A reference
 * for the caller, or NULL. One mint per name at a time: a second thread
 * asking for a name being minted waits for it (a burst of connections to a
 * new host signs one leaf, not one each); after a failed mint a waiter
 * tries itself. */
static X509 *get_or_mint(struct tls_leaves *lv, const char *name, char *err, size_t errlen)
{
    uint64_t h = name_hash(lv, name);
    struct pending me, **pp;
    X509 *x, *made;
    int64_t not_after = 0;

    pthread_mutex_lock(&lv->lock);
    while ((x = cached(lv, name, h)) == NULL && in_flight(lv, name)) {
        lv->st.mint_waits++;
        pthread_cond_wait(&lv->minted, &lv->lock);
    }
    if (x != NULL) {
        pthread_mutex_unlock(&lv->lock);
        return x; /* another connection minted it meanwhile */
    }
    me.name = name;
    me.next = lv->pending;
    lv->pending = &me;
    pthread_mutex_unlock(&lv->lock);

    made = mint_cert(lv, name, &not_after, err, errlen);

    pthread_mutex_lock(&lv->lock);
    for (pp = &lv->pending; *pp != &me; pp = &(*pp)->next)
        ;
    *pp = me.next;
    if (made == NULL) {
        lv->st.mint_failures++;
    } else {
        lv->st.mints++;
        x = cache_insert(lv, name, made, not_after);
    }
    pthread_cond_broadcast(&lv->minted);
    pthread_mutex_unlock(&lv->lock);
    X509_free(made);
    if (made != NULL && x == NULL)
        tls_err(err, errlen, "leaf '%s': out of memory", name);
    return x;
}

int tls_leaves_mint(struct tls_leaves *lv, const char *name, char *err, size_t errlen)
{
    char key[TLS_LEAF_NAME_MAX];
    X509 *x;

    if (tls_leaf_name(name, key) < 0) {
        tls_err(err, errlen, "leaf: '%s' is no host name or IP address", name);
        return UV_EINVAL;
    }
    x = get_or_mint(lv, key, err, errlen);
    if (x == NULL)
        return UV_EIO;
    X509_free(x);
    return 0;
}

int tls_leaves_cert_pem(struct tls_leaves *lv, const char *name, char *buf, size_t len)
{
    char key[TLS_LEAF_NAME_MAX];
    struct leaf *e;
    int rc = UV_ENOENT;

    if (tls_leaf_name(name, key) < 0)
        return UV_EINVAL;
    pthread_mutex_lock(&lv->lock);
    e = cache_find(lv, key, name_hash(lv, key));
    if (e != NULL)
        rc = tls_x509_pem(e->cert, buf, len);
    pthread_mutex_unlock(&lv->lock);
    return rc;
}

struct tls_mint *tls_mint_new(struct tls_leaves *lv, const char *name)
{
    struct tls_mint *m = calloc(1, sizeof(*m));

    if (m == NULL)
        return NULL;
    m->lv = tls_leaves_ref(lv);
    snprintf(m->name, sizeof(m->name), "%s", name);
    return m;
}

void tls_mint_run(struct tls_mint *m)
{
    if (m->cert == NULL)
        m->cert = get_or_mint(m->lv, m->name, NULL, 0);
}

X509 *tls_mint_take(struct tls_mint *m)
{
    X509 *x = m->cert;

    m->cert = NULL;
    return x;
}

void tls_mint_free(struct tls_mint *m)
{
    if (m == NULL)
        return;
    X509_free(m->cert);
    tls_leaves_unref(m->lv);
    free(m);
}

/* ------------------------------------------------------------------------ */
/* Setup                                                                     */

/* The extensions every leaf carries, encoded once. */
static int make_exts(struct tls_leaves *lv)
{
    X509V3_CTX ctx;
    X509 *dummy = X509_new();
    AUTHORITY_KEYID *akid = AUTHORITY_KEYID_new();
    int ok = 0;

    if (dummy == NULL || akid == NULL || X509_set_pubkey(dummy, lv->key) != 1)
        goto out;
    X509V3_set_ctx(&ctx, NULL, dummy, NULL, NULL, 0);
    lv->ext[EXT_BC] = X509V3_EXT_conf_nid(NULL, NULL, NID_basic_constraints, "critical,CA:FALSE");
    lv->ext[EXT_KU] = X509V3_EXT_conf_nid(NULL, NULL, NID_key_usage, "critical,digitalSignature");
    lv->ext[EXT_EKU] = X509V3_EXT_conf_nid(NULL, NULL, NID_ext_key_usage, "serverAuth");
    lv->ext[EXT_SKI] = X509V3_EXT_conf_nid(NULL, &ctx, NID_subject_key_identifier, "hash");
    akid->keyid = ASN1_OCTET_STRING_dup(lv->ca->kid);
    if (akid->keyid != NULL)
        lv->ext[EXT_AKI] = X509V3_EXT_i2d(NID_authority_key_identifier, 0, akid);
    ok = 1;
    for (int i = 0; i < EXT_N; i++)
        ok = ok && lv->ext[i] != NULL;
out:
    AUTHORITY_KEYID_free(akid);
    X509_free(dummy);
    return ok ? 0 : UV_ENOMEM;
}

static size_t pow2_at_least(size_t n)
{
    size_t p = 16;

    while (p < n)
        p <<= 1;
    return p;
}

int tls_leaves_new(struct tls_ca *ca, const struct tls_leaves_opts *o, struct tls_leaves **out,
                   char *err, size_t errlen)
{
    struct tls_leaves *lv;
    unsigned cap = o != NULL && o->cache_size != 0 ? o->cache_size : TLS_CACHE_DEFAULT;
    unsigned days = o != NULL && o->valid_days != 0 ? o->valid_days : TLS_LEAF_DAYS_DEFAULT;
    unsigned renew = o != NULL && o->renew_before != 0 ? o->renew_before : TLS_LEAF_RENEW_DEFAULT;
    int rc = UV_ENOMEM;

    if (cap < TLS_CACHE_MIN || cap > TLS_CACHE_MAX || days > LEAF_DAYS_MAX ||
        renew > LEAF_DAYS_MAX * 86400u) {
        tls_err(err, errlen,
                "leaves: cache size %u (%u..%u), validity %u days (1..%u) or renewal %u s "
                "out of range",
                cap, TLS_CACHE_MIN, TLS_CACHE_MAX, days, LEAF_DAYS_MAX, renew);
        return UV_EINVAL;
    }
    lv = calloc(1, sizeof(*lv));
    if (lv == NULL)
        return UV_ENOMEM;
    atomic_init(&lv->refs, 1);
    pthread_mutex_init(&lv->lock, NULL);
    pthread_cond_init(&lv->minted, NULL);
    lv->ca = tls_ca_ref(ca);
    lv->cap = cap;
    lv->valid_days = days;
    lv->renew_before = renew;
    lv->nbuckets = pow2_at_least((size_t)cap * 2);
    lv->buckets = calloc(lv->nbuckets, sizeof(*lv->buckets));
    if (lv->buckets == NULL || RAND_bytes((unsigned char *)&lv->seed, sizeof(lv->seed)) != 1 ||
        (lv->ticket_keys = OPENSSL_secure_malloc(TLS_TICKET_KEYS)) == NULL ||
        RAND_priv_bytes(lv->ticket_keys, TLS_TICKET_KEYS) != 1)
        goto fail;
    lv->key = EVP_EC_gen("P-256");
    lv->sign_tmpl = EVP_MD_CTX_new();
    if (lv->key == NULL || lv->sign_tmpl == NULL || make_exts(lv) < 0 ||
        X509_PUBKEY_set(&lv->pub, lv->key) != 1 ||
        EVP_DigestSignInit(lv->sign_tmpl, NULL, lv->ca->md, NULL, lv->ca->key) != 1)
        goto fail;
    *out = lv;
    ERR_clear_error();
    return 0;
fail:
    tls_err(err, errlen, "leaves: cannot make the leaf key or extensions");
    tls_leaves_unref(lv);
    return rc;
}

struct tls_leaves *tls_leaves_ref(struct tls_leaves *lv)
{
    atomic_fetch_add(&lv->refs, 1);
    return lv;
}

void tls_leaves_unref(struct tls_leaves *lv)
{
    if (lv == NULL || atomic_fetch_sub(&lv->refs, 1) != 1)
        return;
    while (lv->head != NULL)
        cache_remove(lv, lv->head);
    free(lv->buckets);
    for (int i = 0; i < EXT_N; i++)
        X509_EXTENSION_free(lv->ext[i]);
    EVP_PKEY_free(lv->key);
    X509_PUBKEY_free(lv->pub);
    EVP_MD_CTX_free(lv->sign_tmpl);
    tls_ca_free(lv->ca);
    OPENSSL_secure_clear_free(lv->ticket_keys, TLS_TICKET_KEYS);
    pthread_cond_destroy(&lv->minted);
    pthread_mutex_destroy(&lv->lock);
    free(lv);
}
