/* proxy/creds.h - the credentials a proxy service swaps in (issue 24): one
 * table per run, made by `sluice run` (run/creds.c) from the masked
 * entries of "credentials", read by the HTTP front end (proxy/http_cred.c).
 *
 * Each entry has its name (a variable, or a file's path), the real value
 * and its placeholder: random bytes from the OS random source, of the real
 * value's length and shape (a digit stays a digit, a lower-case letter a
 * lower-case letter, an upper-case one upper-case, every other byte as it
 * is; a value with fewer than 16 letters and digits is replaced whole by
 * letters and digits), never equal to the value or to another entry's.
 * Two scanner sets: placeholder -> real (requests to the entry's hosts;
 * pair i is entry i) and real -> placeholder (responses from them: pair i
 * is entry i's value, pairs n + 3i .. n + 3i + 2 its base64 forms; see
 * proxy_creds_fake_bits). The real values live in
 * this process only (the run's launcher is not dumpable) and are wiped
 * when the table is freed; nothing here writes one anywhere.
 */
#ifndef SLUICE_PROXY_CREDS_H
#define SLUICE_PROXY_CREDS_H

#include <stddef.h>
#include <stdint.h>

#include "proxy/subst.h"

/* Entries at most: each has 4 pairs in to_fake (below), a refreshable one
 * 8 (its value before too). */
#define PROXY_CREDS_MAX (SUBST_MAX / 4)
/* The longest to_fake pair a refreshed value can bring (a value of
 * PROXY_GW_VALUE_MAX bytes, in base64): the set's maxlen is at least this
 * from the start, so that a stream's carry is never too short after a
 * refresh. */
#define PROXY_CREDS_REFRESH_MAXLEN (8192 / 3 * 4 + 8)

struct proxy_cred {
    char *name; /* variable name, or the path of a files entry */
    int file;
    uint8_t *real, *fake;
    size_t len;  /* the placeholder's length (and the value's, but for a refreshed one) */
    size_t rlen; /* the real value's */
    /* what the value becomes in responses: fake, or for a refreshed value
     * of another length a mask of rlen bytes (the shape of a placeholder) */
    uint8_t *rmask;
    /* a refreshable entry (a helper's value, issue 24 item 4): its value
     * is not used from expires on (monotonic ms, proxy_gw_now); gen counts
     * its values; old is the value before (masked in responses too) */
    int refresh;
    uint64_t expires;
    unsigned gen;
    uint8_t *old, *oldmask;
    size_t oldlen;
    uint8_t *b64old[3], *b64oldm[3];
    size_t b64oldlen[3];
    /* the base64 text that the value's bytes alone decide, at each of the
     * three alignments, of the real value and of the placeholder: an
     * origin that echoes the Basic credentials it got hands back base64 */
    uint8_t *b64real[3], *b64fake[3];
    size_t b64len[3];
    char aws_role; /* an awsPairs variable: 'K' key id, 'S' secret, 'T' token; else 0 */
};

/* credentials.awsPairs: the entries of one pair (-1: not set in the
 * environment, so not masked). Requests to the key id's hosts signed with
 * the key id's placeholder are re-signed with the real secret
 * (proxy/http_sigv4.c); the secret itself is never swapped into a request. */
struct proxy_aws {
    size_t pair; /* its index in awsPairs */
    int key, secret, token;
};

struct proxy_creds {
    struct proxy_cred e[PROXY_CREDS_MAX];
    size_t n;
    int plaintext; /* credentials.allowPlaintextInject */
    struct proxy_aws aws[PROXY_CREDS_MAX];
    size_t naws;
    /* credentials.sigv4: 1 passthrough (sent as signed, placeholders
     * swapped as anywhere), 0 deny (403) */
    int sigv4_streaming, sigv4_presigned, sigv4_sigv4a;
    struct subst_set to_real, to_fake;
    /* atomic: requests that carried entry i's placeholder to one of its
     * hosts (replaced), and to another host (left, logged) */
    uint64_t injected[SUBST_MAX], elsewhere[SUBST_MAX];
    uint64_t refused; /* atomic: requests refused (fail closed) */
};

/* A placeholder of fake_len = len bytes for real (see above) into fake.
 * 0, or -EIO when the random source fails. */
int proxy_cred_placeholder(const uint8_t *real, size_t len, uint8_t *fake);
/* The base64 characters of (a zero bytes, v) that v's bytes alone decide
 * (each covers 6 bits inside v's): *out (owned), *olen. Masked beside the
 * value itself, at a = 0, 1, 2, so that an origin that echoes the value
 * base64-encoded, in any alignment, does not hand it back. 0 or -ENOMEM. */
int proxy_cred_b64_inner(const uint8_t *v, size_t len, unsigned a, uint8_t **out, size_t *olen);

/* Adds an entry (real copied; its placeholder made, or taken from fake
 * when fake is not NULL). 0, -EINVAL (too many entries, a length outside
 * SUBST_LEN_MIN..SUBST_LEN_MAX, a placeholder equal to a value), -ENOMEM,
 * -EIO. The sets are built by proxy_creds_seal. */
int proxy_creds_add(struct proxy_creds *t, const char *name, int file, const uint8_t *real,
                    size_t len, const uint8_t *fake);
/* Entry i (added last) is pair's variable of role 'K', 'S' or 'T'. 0 or
 * -EINVAL (too many pairs, a role given twice). */
int proxy_creds_aws(struct proxy_creds *t, size_t i, size_t pair, char role);
/* Builds the two scanner sets once every entry is in (again after a
 * refresh). 0, -EINVAL (too many pairs) or -ENOMEM. */
int proxy_creds_seal(struct proxy_creds *t);
/* Entry i (added last) is refreshable: its value expires at expires. */
void proxy_creds_refreshable(struct proxy_creds *t, size_t i, uint64_t expires);
/* Entry i (refreshable) takes a new value (real, rlen bytes, valid until
 * expires; mask: rlen bytes that replace it in responses when rlen is not
 * the placeholder's length); the value it had becomes old, the one before
 * is wiped, and the sets are built again. Only from the loop that serves
 * the table (sluice run has one): a stream reads the sets between its
 * calls. 0, -EINVAL or -ENOMEM (the table is as it was). */
int proxy_creds_refresh(struct proxy_creds *t, size_t i, const uint8_t *real, size_t rlen,
                        const uint8_t *mask, uint64_t expires);
/* The to_fake pairs of the entries in bits. */
uint64_t proxy_creds_fake_bits(const struct proxy_creds *t, uint64_t bits);
/* Wipes and frees the entries (t itself is the caller's). */
void proxy_creds_clear(struct proxy_creds *t);

/* proxy_creds_head for a head that may change length (a refreshed value
 * of another length than its placeholder): *head (malloc'd, *len bytes)
 * may be replaced by a new one. 0 with *replaced and *blocked, -ENOMEM,
 * or -E2BIG (the head would pass 1 MiB). */
int proxy_creds_head_grow(const struct proxy_creds *t, uint64_t allow, char **head, size_t *len,
                          uint64_t *replaced, uint64_t *blocked);
/* 1 when some entry's value has another length than its placeholder. */
int proxy_creds_resizes(const struct proxy_creds *t);

/* A request head (the request line, then header lines), in place: each
 * placeholder of an entry in allow replaced by its value, and so in the
 * decoded credentials of an "Authorization: Basic" header (strict base64,
 * re-encoded: the same length). Returns the bits replaced; *blocked (may
 * be NULL) gets the bits of the entries found and left. Pure. */
uint64_t proxy_creds_head(const struct proxy_creds *t, uint64_t allow, char *head, size_t len,
                          uint64_t *blocked);
/* The value of header name (any case) in a head after its first line,
 * spaces around it left out: a pointer into head and *vlen, or NULL. */
char *proxy_head_value(char *head, size_t len, const char *name, size_t *vlen);

/* require (issue 24 item 4): 1 when header name appears once in the head
 * and carries entry i's placeholder and nothing else: the placeholder
 * alone, after one scheme word ("Bearer P", "token P"), or as one side of
 * "Basic" credentials whose other side is shorter than SUBST_LEN_MIN (so
 * it is no credential of the client's own). Else 0. Pure. */
int proxy_creds_required(const struct proxy_creds *t, size_t i, const char *name, char *head,
                         size_t len);

/* sluice proxy: any "credentials" entry is refused (there is no sandbox to
 * mask for or hide from), with a located message. 0 or -1 with err. */
struct settings;
struct settings_error;
int proxy_creds_settings_check(const struct settings *s, struct settings_error *err);

#endif
