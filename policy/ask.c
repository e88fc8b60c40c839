/* policy/ask.c - the ask broker: one question per host:port, many waiters.
 *
 * Indexes. Outstanding questions are on three structures: a hash table by
 * key ("host:port", for coalescing), a hash table by id (for answers), and a
 * list in deadline order. Every question gets the same timeout, so appending
 * keeps the list sorted and one timer armed for the head serves all of
 * them. The broker has no event loop: it reads the time from its clock
 * (struct ask_clock), tells the clock when the head's deadline changed, and
 * the loop side (bridge/ask_timer.c) owns the timer, which calls
 * ask_broker_expire(). Session answers live in a third hash table
 * for the broker's lifetime, at most ASK_CACHE_MAX entries; a session answer
 * beyond that is delivered but not remembered (the next ask asks again).
 * Tables are chained, power-of-two sized, and grow at load factor 1; a failed
 * grow only makes chains longer, so inserting never fails.
 *
 * Delivery and re-entrancy. Waiter callbacks run from ask_broker_ask() (cache
 * hit, or a handler answering inside its ask call), ask_broker_answer(),
 * ask_broker_expire() and ask_broker_shutdown(). Before any callback runs, the question has
 * left every index (and a session answer is cached), so a callback sees a
 * consistent broker: it may ask again (the same key makes a new question, or
 * hits the cache), cancel any waiter, answer other questions, or close the
 * broker. The waiters of the question being delivered are popped one at a
 * time; a waiter is marked delivered (q == NULL) before its callback runs,
 * so cancelling it from its own callback is a no-op, and freed after. The
 * broker itself is freed only by ask_broker_free(), which the loop side
 * calls from its timer's close callback, so it stays valid for the rest of
 * any stack that closed it.
 *
 * Restriction: a waiter's callback must not cancel itself after it returned
 * (the waiter is freed), which the header already says: forget *w in cb.
 */
#include "policy/policy.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"

#define ASK_KEY_MAX (POLICY_HOST_MAX + 7) /* "host:65535" and NUL */
#define ASK_CACHE_MAX 65536               /* remembered session answers */
#define ASK_BUCKETS_MIN 16
#define ASK_BUCKETS_MAX ((size_t)1 << 20)

static const char ask_closing_reason[] = "sluice is shutting down";

/* ------------------------------------------------------------------------ */
/* Hash tables                                                               */

struct ask_hnode {
    struct ask_hnode *next;
    uint64_t hash;
};

struct ask_htab {
    struct ask_hnode **b;
    size_t nb; /* power of two */
    size_t n;
};

static uint64_t hash_bytes(const char *s, size_t len)
{
    uint64_t h = 0xcbf29ce484222325u; /* FNV-1a */
    size_t i;

    for (i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3u;
    }
    return h;
}

static uint64_t hash_id(uint64_t x)
{
    x ^= x >> 30; /* splitmix64 finaliser */
    x *= 0xbf58476d1ce4e5b9u;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebu;
    x ^= x >> 31;
    return x;
}

static int htab_init(struct ask_htab *t)
{
    t->b = calloc(ASK_BUCKETS_MIN, sizeof(struct ask_hnode *));
    if (t->b == NULL)
        return -ENOMEM;
    t->nb = ASK_BUCKETS_MIN;
    t->n = 0;
    return 0;
}

static void htab_grow(struct ask_htab *t)
{
    struct ask_hnode **nb, *n, *next;
    size_t i, size = t->nb * 2;

    if (size > ASK_BUCKETS_MAX)
        return;
    nb = calloc(size, sizeof(struct ask_hnode *));
    if (nb == NULL)
        return; /* longer chains, still correct */
    for (i = 0; i < t->nb; i++) {
        for (n = t->b[i]; n != NULL; n = next) {
            size_t j = (size_t)(n->hash & (size - 1));
            next = n->next;
            n->next = nb[j];
            nb[j] = n;
        }
    }
    free(t->b);
    t->b = nb;
    t->nb = size;
}

static void htab_insert(struct ask_htab *t, struct ask_hnode *n, uint64_t hash)
{
    size_t i;

    if (t->n >= t->nb)
        htab_grow(t);
    n->hash = hash;
    i = (size_t)(hash & (t->nb - 1));
    n->next = t->b[i];
    t->b[i] = n;
    t->n++;
}

static void htab_remove(struct ask_htab *t, struct ask_hnode *n)
{
    struct ask_hnode **pp = &t->b[n->hash & (t->nb - 1)];

    while (*pp != n)
        pp = &(*pp)->next;
    *pp = n->next;
    n->next = NULL;
    t->n--;
}

static struct ask_hnode *htab_first(const struct ask_htab *t, uint64_t hash)
{
    return t->b[hash & (t->nb - 1)];
}

/* ------------------------------------------------------------------------ */
/* Types                                                                     */

struct ask_q;

struct ask_wait {
    struct ask_q *q;              /* NULL once the answer is being delivered */
    struct ask_wait *prev, *next; /* q's waiters, in arrival order */
    ask_cb cb;
    void *arg;
};

/* An outstanding question. Owned by the indexes until it leaves them; then by
 * whoever delivers its answer (finish()), which frees it. */
struct ask_q {
    struct ask_hnode by_key, by_id;
    struct ask_q *prev, *next; /* b->head list, deadline order */
    uint64_t id;
    uint64_t deadline; /* on the clock's time (ms) */
    struct ask_wait *whead, *wtail;
    size_t keylen;
    char key[ASK_KEY_MAX];
};

/* A remembered session answer. */
struct ask_cached {
    struct ask_hnode node;
    int allow;
    char *reason; /* NULL or points into key[] after the key's NUL */
    size_t keylen;
    char key[]; /* key, NUL, [reason, NUL] */
};

struct ask_broker {
    struct ask_clock clock; /* time, and the timer for b->head's deadline */
    struct ask_handler_ops ops;
    void *ctx;
    unsigned timeout_ms;
    size_t max_pending;
    uint64_t next_id;
    struct ask_htab by_key, by_id, cache;
    struct ask_q *head, *tail; /* outstanding questions, deadline order */
    size_t npending;
    int closing;
    char timeout_reason[64];
};

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */

int ask_decision_parse(const char *s, size_t len, enum ask_decision *d)
{
    static const struct {
        const char *word;
        enum ask_decision d;
    } words[] = {
        {"allow", ASK_ALLOW},
        {"deny", ASK_DENY},
        {"allow-session", ASK_ALLOW_SESSION},
        {"deny-session", ASK_DENY_SESSION},
    };
    size_t i;

    if (s == NULL || d == NULL)
        return -EINVAL;
    for (i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
        if (strlen(words[i].word) == len && memcmp(words[i].word, s, len) == 0) {
            *d = words[i].d;
            return 0;
        }
    }
    return -EINVAL;
}

/* First line only; tab becomes a space, other control bytes and non-ASCII
 * become '?'; spaces trimmed at both ends; at most ASK_REASON_MAX bytes.
 * Returns out, or NULL when nothing is left. */
static const char *reason_clean(const char *in, char out[ASK_REASON_MAX + 1])
{
    size_t i, n = 0;

    if (in == NULL)
        return NULL;
    while (*in == ' ' || *in == '\t')
        in++;
    for (i = 0; in[i] != '\0' && in[i] != '\n' && in[i] != '\r' && n < ASK_REASON_MAX; i++) {
        unsigned char c = (unsigned char)in[i];

        if (c == '\t')
            out[n++] = ' ';
        else if (c >= 0x20 && c < 0x7f)
            out[n++] = (char)c;
        else
            out[n++] = '?';
    }
    while (n > 0 && out[n - 1] == ' ')
        n--;
    out[n] = '\0';
    return n > 0 ? out : NULL;
}

static size_t make_key(const char *host, size_t hostlen, uint16_t port, char key[ASK_KEY_MAX])
{
    int n;

    memcpy(key, host, hostlen);
    n = snprintf(key + hostlen, ASK_KEY_MAX - hostlen, ":%u", (unsigned)port);
    return hostlen + (size_t)n;
}

static struct ask_cached *cache_find(const struct ask_broker *b, const char *key, size_t keylen,
                                     uint64_t hash)
{
    struct ask_hnode *n;

    for (n = htab_first(&b->cache, hash); n != NULL; n = n->next) {
        struct ask_cached *c = container_of(n, struct ask_cached, node);
        if (n->hash == hash && c->keylen == keylen && memcmp(c->key, key, keylen) == 0)
            return c;
    }
    return NULL;
}

/* Remembers a session answer (best effort: no memory or a full cache only
 * means the next ask for this key asks again). */
static void cache_put(struct ask_broker *b, const struct ask_q *q, int allow, const char *reason)
{
    uint64_t hash = hash_bytes(q->key, q->keylen);
    size_t rlen = reason != NULL ? strlen(reason) + 1 : 0;
    struct ask_cached *c = cache_find(b, q->key, q->keylen, hash);

    if (c != NULL) /* cannot happen: a cached key is never asked */
        return;
    if (b->cache.n >= ASK_CACHE_MAX)
        return;
    c = malloc(sizeof(*c) + q->keylen + 1 + rlen);
    if (c == NULL)
        return;
    c->allow = allow;
    c->keylen = q->keylen;
    memcpy(c->key, q->key, q->keylen);
    c->key[q->keylen] = '\0';
    c->reason = NULL;
    if (reason != NULL) {
        c->reason = c->key + q->keylen + 1;
        memcpy(c->reason, reason, rlen);
    }
    htab_insert(&b->cache, &c->node, hash);
}

static struct ask_q *pending_by_key(const struct ask_broker *b, const char *key, size_t keylen,
                                    uint64_t hash)
{
    struct ask_hnode *n;

    for (n = htab_first(&b->by_key, hash); n != NULL; n = n->next) {
        struct ask_q *q = container_of(n, struct ask_q, by_key);
        if (n->hash == hash && q->keylen == keylen && memcmp(q->key, key, keylen) == 0)
            return q;
    }
    return NULL;
}

static struct ask_q *pending_by_id(const struct ask_broker *b, uint64_t id)
{
    uint64_t hash = hash_id(id);
    struct ask_hnode *n;

    for (n = htab_first(&b->by_id, hash); n != NULL; n = n->next) {
        struct ask_q *q = container_of(n, struct ask_q, by_id);
        if (q->id == id)
            return q;
    }
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Deadlines                                                                 */

/* The head's deadline changed: the clock re-arms its timer. */
static void deadline_changed(struct ask_broker *b)
{
    if (b->closing || b->clock.changed == NULL)
        return;
    b->clock.changed(b->clock.ctx);
}

/* Takes q off every index; the caller then owns it (finish() frees it). */
static void unindex(struct ask_broker *b, struct ask_q *q)
{
    int was_head = b->head == q;

    htab_remove(&b->by_key, &q->by_key);
    htab_remove(&b->by_id, &q->by_id);
    if (b->head == q)
        b->head = q->next;
    else
        q->prev->next = q->next;
    if (b->tail == q)
        b->tail = q->prev;
    else
        q->next->prev = q->prev;
    q->prev = q->next = NULL;
    b->npending--;
    if (was_head)
        deadline_changed(b);
}

static void wait_append(struct ask_q *q, struct ask_wait *w)
{
    w->q = q;
    w->next = NULL;
    w->prev = q->wtail;
    if (q->wtail != NULL)
        q->wtail->next = w;
    else
        q->whead = w;
    q->wtail = w;
}

static void wait_unlink(struct ask_q *q, struct ask_wait *w)
{
    if (q->whead == w)
        q->whead = w->next;
    else
        w->prev->next = w->next;
    if (q->wtail == w)
        q->wtail = w->prev;
    else
        w->next->prev = w->prev;
    w->prev = w->next = NULL;
}

/* Gives every waiter of an unindexed question the answer, then frees it.
 * Callbacks may cancel the waiters still queued (they are unlinked and
 * freed, so the loop never sees them) or do anything else to the broker. */
static void finish(struct ask_q *q, int allow, const char *reason)
{
    struct ask_wait *w;

    while ((w = q->whead) != NULL) {
        wait_unlink(q, w);
        w->q = NULL;
        w->cb(w->arg, allow, reason);
        free(w);
    }
    free(q);
}

int ask_broker_next_deadline(const struct ask_broker *b, uint64_t *at)
{
    if (b == NULL || b->closing || b->head == NULL)
        return 0;
    *at = b->head->deadline;
    return 1;
}

void ask_broker_expire(struct ask_broker *b, uint64_t now)
{
    /* Re-read the head each time: callbacks may ask, answer or close. */
    while (!b->closing && b->head != NULL && b->head->deadline <= now) {
        struct ask_q *q = b->head;

        unindex(b, q);
        if (b->ops.withdraw != NULL)
            b->ops.withdraw(b->ctx, q->id);
        finish(q, 0, b->timeout_reason);
    }
    deadline_changed(b);
}

/* ------------------------------------------------------------------------ */
/* API                                                                       */

int ask_broker_open(struct ask_broker **out, const struct ask_clock *clock, unsigned timeout_ms,
                    size_t max_pending)
{
    struct ask_broker *b;
    int rc;

    if (out == NULL || clock == NULL || clock->now == NULL || timeout_ms == 0 || max_pending == 0)
        return -EINVAL;
    b = calloc(1, sizeof(*b));
    if (b == NULL)
        return -ENOMEM;
    rc = htab_init(&b->by_key);
    if (rc == 0)
        rc = htab_init(&b->by_id);
    if (rc == 0)
        rc = htab_init(&b->cache);
    if (rc < 0)
        goto out;
    b->clock = *clock;
    b->timeout_ms = timeout_ms;
    b->max_pending = max_pending;
    b->next_id = 1;
    if (timeout_ms % 1000 == 0)
        snprintf(b->timeout_reason, sizeof(b->timeout_reason), "no answer within %u s",
                 timeout_ms / 1000);
    else
        snprintf(b->timeout_reason, sizeof(b->timeout_reason), "no answer within %u ms",
                 timeout_ms);
    *out = b;
    b = NULL;
out:
    if (b != NULL) {
        free(b->by_key.b);
        free(b->by_id.b);
        free(b->cache.b);
        free(b);
    }
    return rc;
}

void ask_broker_set_handler(struct ask_broker *b, const struct ask_handler_ops *ops, void *ctx)
{
    if (b == NULL)
        return;
    if (ops != NULL)
        b->ops = *ops;
    else
        memset(&b->ops, 0, sizeof(b->ops));
    b->ctx = ctx;
}

int ask_broker_ask(struct ask_broker *b, const char *host, uint16_t port, const char *protocol,
                   const char *client, ask_cb cb, void *arg, struct ask_wait **w)
{
    struct ask_question question;
    struct ask_cached *c;
    struct ask_wait *nw;
    struct ask_q *q;
    char key[ASK_KEY_MAX];
    size_t hostlen, keylen;
    uint64_t hash;

    if (b == NULL || host == NULL || cb == NULL || w == NULL)
        return -EINVAL;
    hostlen = strlen(host);
    if (hostlen == 0 || hostlen > POLICY_HOST_MAX)
        return -EINVAL;
    if (b->closing)
        return -ECANCELED;
    if (b->ops.ask == NULL)
        return -ENOENT;

    keylen = make_key(host, hostlen, port, key);
    hash = hash_bytes(key, keylen);
    c = cache_find(b, key, keylen, hash);
    if (c != NULL) {
        *w = NULL;
        cb(arg, c->allow, c->reason);
        return 0;
    }

    nw = calloc(1, sizeof(*nw));
    if (nw == NULL)
        return -ENOMEM;
    nw->cb = cb;
    nw->arg = arg;

    q = pending_by_key(b, key, keylen, hash);
    if (q == NULL) {
        if (b->npending >= b->max_pending) {
            free(nw);
            return -EBUSY;
        }
        q = calloc(1, sizeof(*q));
        if (q == NULL) {
            free(nw);
            return -ENOMEM;
        }
        q->id = b->next_id++;
        q->deadline = b->clock.now(b->clock.ctx) + b->timeout_ms;
        q->keylen = keylen;
        memcpy(q->key, key, keylen + 1);
        htab_insert(&b->by_key, &q->by_key, hash);
        htab_insert(&b->by_id, &q->by_id, hash_id(q->id));
        q->prev = b->tail;
        if (b->tail != NULL)
            b->tail->next = q;
        else
            b->head = q;
        b->tail = q;
        b->npending++;
        if (b->head == q)
            deadline_changed(b);

        wait_append(q, nw);
        *w = nw;

        /* The strings are the caller's: valid for the whole call even if the
         * handler answers (and q is freed) inside it. */
        question.id = q->id;
        question.host = host;
        question.port = port;
        question.protocol = protocol != NULL ? protocol : "";
        question.client = client != NULL ? client : "";
        b->ops.ask(b->ctx, &question);
        return 0;
    }

    wait_append(q, nw); /* q may have no waiters left: all cancelled */
    *w = nw;
    return 0;
}

void ask_wait_cancel(struct ask_wait *w)
{
    if (w == NULL || w->q == NULL)
        return; /* NULL, or its callback is running right now */
    wait_unlink(w->q, w);
    free(w);
}

int ask_broker_answer(struct ask_broker *b, uint64_t id, enum ask_decision d, const char *reason)
{
    char buf[ASK_REASON_MAX + 1];
    const char *r;
    struct ask_q *q;
    int allow;

    if (b == NULL)
        return -EINVAL;
    if (d != ASK_DENY && d != ASK_ALLOW && d != ASK_DENY_SESSION && d != ASK_ALLOW_SESSION)
        return -EINVAL;
    q = pending_by_id(b, id);
    if (q == NULL)
        return -ENOENT;
    r = reason_clean(reason, buf);
    allow = d == ASK_ALLOW || d == ASK_ALLOW_SESSION;
    unindex(b, q);
    if (d == ASK_ALLOW_SESSION || d == ASK_DENY_SESSION)
        cache_put(b, q, allow, r);
    finish(q, allow, r);
    return 0;
}

size_t ask_broker_pending(const struct ask_broker *b)
{
    return b != NULL ? b->npending : 0;
}

static void htab_free_cache(struct ask_htab *t)
{
    struct ask_hnode *n, *next;
    size_t i;

    for (i = 0; i < t->nb; i++) {
        for (n = t->b[i]; n != NULL; n = next) {
            next = n->next;
            free(container_of(n, struct ask_cached, node));
        }
    }
    free(t->b);
}

void *ask_broker_clock_ctx(const struct ask_broker *b)
{
    return b->clock.ctx;
}

int ask_broker_closing(const struct ask_broker *b)
{
    return b->closing;
}

void ask_broker_shutdown(struct ask_broker *b)
{
    if (b == NULL || b->closing)
        return;
    b->closing = 1;
    while (b->head != NULL) {
        struct ask_q *q = b->head;

        unindex(b, q);
        if (b->ops.withdraw != NULL)
            b->ops.withdraw(b->ctx, q->id);
        finish(q, 0, ask_closing_reason);
    }
}

void ask_broker_free(struct ask_broker *b)
{
    if (b == NULL)
        return;
    ask_broker_shutdown(b);
    htab_free_cache(&b->cache);
    free(b->by_key.b); /* empty: shutdown delivered every question */
    free(b->by_id.b);
    free(b);
}
