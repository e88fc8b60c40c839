/* proxy/subst.h - the credential substitution scanner (issue 24): finds
 * placeholders in bytes that arrive in pieces (a request head, a streamed
 * body) and swaps each for its real value, or the other way round for
 * responses. Pure code: no I/O, no event loop (tests/fuzz/fuzz_subst.c).
 *
 * A pair has the same length on both sides (a placeholder is the real
 * value's length), so a substitution never changes a length: buffers are
 * rewritten in place and Content-Length stays right. The one exception is
 * a refreshed value (issue 24 item 4: a helper's new value may be longer or
 * shorter than the placeholder made from the first): such a pair (tolen
 * set) is replaced only by the _emit functions, which hand the rewritten
 * bytes over in pieces; the in-place ones leave it and report it blocked.
 *
 * Matching is the same however the bytes are split: at each position the
 * scanner decides only once it has seen the longest pair's length of bytes
 * from it (or the end), and takes the longest pair that matches there.
 * While bytes could still start a pair they are held back (at most the
 * longest pair's length - 1), so a placeholder split across chunks or
 * reads is found whole; subst_finish releases them at the end.
 */
#ifndef SLUICE_PROXY_SUBST_H
#define SLUICE_PROXY_SUBST_H

#include <stddef.h>
#include <stdint.h>

#define SUBST_MAX 64        /* pairs in one set */
#define SUBST_LEN_MIN 16    /* shortest pair (shorter values are refused at load) */
#define SUBST_LEN_MAX 65536 /* longest pair */

struct subst_pair {
    const uint8_t *from; /* what is looked for */
    const uint8_t *to;   /* what replaces it (same length) */
    size_t len;
    size_t tolen; /* 0: len; else to's length (only the _emit functions replace it) */
};

struct subst_set {
    struct subst_pair pairs[SUBST_MAX];
    size_t n;
    size_t maxlen;
    uint8_t first[256]; /* 1 when some pair starts with the byte */
};

/* Builds a set (the pairs' bytes are not copied: they must outlive it).
 * 0, or -EINVAL for more than SUBST_MAX pairs or a length outside
 * SUBST_LEN_MIN..SUBST_LEN_MAX. A from may be given more than once (two
 * values' base64 forms can share the characters their bytes alone
 * decide): where it is found, the first of those pairs the stream allows
 * is the one replaced, and when it allows none, the first one is blocked. */
int subst_set_init(struct subst_set *s, const struct subst_pair *pairs, size_t n);

/* One stream's state. allow: bit k set when pair k is replaced in this
 * stream; a pair found without its bit is left as it is and its bit set in
 * blocked. replaced: the bits of the pairs replaced. */
struct subst_stream {
    const struct subst_set *set;
    uint64_t allow, replaced, blocked;
    uint8_t *carry; /* bytes held back, set->maxlen - 1 at most */
    size_t ncarry;
};

/* 0 or -ENOMEM. */
int subst_stream_init(struct subst_stream *st, const struct subst_set *s, uint64_t allow);
void subst_stream_free(struct subst_stream *st);

/* Feeds len bytes: writes the bytes that are decided, rewritten, to out
 * (room for st->ncarry + len bytes) and returns their number; the rest is
 * held back. */
size_t subst_feed(struct subst_stream *st, const uint8_t *in, size_t len, uint8_t *out);
/* The end of the stream: writes the bytes held back (rewritten) to out
 * (room for st->ncarry bytes) and returns their number. */
size_t subst_finish(struct subst_stream *st, uint8_t *out);

/* A whole buffer at once, in place (nothing held back). Returns the bits
 * replaced; *blocked gets the bits found and left (may be NULL). */
uint64_t subst_buffer(const struct subst_set *s, uint64_t allow, uint8_t *buf, size_t len,
                      uint64_t *blocked);

/* The same with pairs of another length (tolen): the decided bytes go to
 * emit in order, each run of bytes (same-length pairs replaced in place)
 * with pair -1, each such pair's to (tolen bytes) with its index. emit's
 * negative value stops the scan and is returned; else 0. work: room for
 * st->ncarry + len bytes (the input is copied there and rewritten). */
typedef int (*subst_emit_fn)(void *arg, const uint8_t *b, size_t n, int pair);
int subst_feed_emit(struct subst_stream *st, const uint8_t *in, size_t len, uint8_t *work,
                    subst_emit_fn emit, void *arg);
int subst_finish_emit(struct subst_stream *st, uint8_t *work, subst_emit_fn emit, void *arg);
/* A whole buffer (rewritten in place for the runs): *replaced and
 * *blocked get the bits. 0 or emit's negative value. */
int subst_buffer_emit(const struct subst_set *s, uint64_t allow, uint8_t *buf, size_t len,
                      uint64_t *replaced, uint64_t *blocked, subst_emit_fn emit, void *arg);

#endif
