/* proxy/gw.h - credentials.headers: the headers `sluice proxy` sets on the
 * requests to their hosts, as a gateway whose clients hold no secret at all
 * (issue 24 item 4). One table per load of the settings (start, SIGHUP,
 * --watch), shared by every worker (refcounted; each service's conf holds
 * a reference, proxy/service.h), swapped with the policy that names its
 * entries ("headers[i]:NAME", policy/cred.c).
 *
 * A value comes from an environment variable or a file of the proxy (read
 * when the table is made: a reload reads the file again, and a file that
 * is missing or unreadable fails the reload, which keeps the old table),
 * or from a helper program (proxy/helper.c, run by proxy/gwrun.c on the
 * main loop) whose trimmed output is used for its ttl and refreshed before
 * it runs out. A value is 16 to PROXY_GW_VALUE_MAX bytes of printable ASCII
 * (spaces and tabs inside); anything else is no value. Each value has a
 * mask of its length (random, the shape of a placeholder) that replaces it
 * in the responses of its hosts. Values are wiped when freed and never
 * written anywhere; messages name the entry, never the value.
 *
 * Locking: the value fields of the entries change under mu (a helper's
 * result, on the main thread); the rest is fixed once made.
 */
#ifndef SLUICE_PROXY_GW_H
#define SLUICE_PROXY_GW_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "settings/settings.h"

#define PROXY_GW_MAX 64           /* entries (the front end tracks them in 64 bits) */
#define PROXY_GW_VALUE_MAX 8192     /* bytes of a value (a file or output may hold more space) */
#define PROXY_GW_READ_MAX 65536     /* bytes read from a value file or a helper */
#define PROXY_GW_RETRY_MS 1000      /* a failed helper runs again after this, doubling ... */
#define PROXY_GW_RETRY_MAX_MS 30000 /* ... up to this */

struct proxy_gw_entry {
    char *label;  /* "headers[i]:NAME": its name in the policy and the log */
    char *header; /* NAME */
    char *prefix; /* "" or what goes before the value */
    size_t prefix_len;
    enum settings_hdr_kind kind;
    char **argv; /* exec: NULL-terminated; else NULL */
    unsigned ttl_ms, timeout_ms;
    /* under mu */
    uint8_t *value, *mask; /* NULL: no value (why says why) */
    size_t len;
    uint64_t expires;    /* exec: monotonic ms from which the value is not used */
    uint64_t refresh_at; /* exec: when the helper runs next */
    unsigned fails;      /* exec: failed runs in a row */
    int running;         /* exec: a run is under way */
    char why[240];
};

struct proxy_gw {
    unsigned refs; /* atomic */
    pthread_mutex_t mu;
    struct proxy_gw_entry *e;
    size_t n;
    int plaintext; /* credentials.allowPlaintextInject: plain HTTP gets the headers too */
};

/* Process-wide counts for /metrics (atomic): requests given headers,
 * requests refused (no value, plain HTTP, an Upgrade), helper runs that
 * gave a value and that failed. */
struct proxy_gw_stats {
    uint64_t injected, refused, helper_ok, helper_failed;
};
extern struct proxy_gw_stats proxy_gw_stats;

/* A copy of one entry's value and mask, owned by a request. */
struct proxy_gw_snap {
    uint8_t *value, *mask;
    size_t len;
};

/* The table of s's credentials.headers (NULL in *out when there are none),
 * file and env values read now (at `now`, monotonic ms). 0, or -1 with a
 * located message in err (a file that cannot be read, a value that is not
 * one: the message never holds the value; more than PROXY_GW_MAX entries),
 * or -ENOMEM. */
int proxy_gw_new(const struct settings *s, uint64_t now, struct proxy_gw **out,
                 struct settings_error *err);
/* A table of n exec entries for `sluice run`'s masked variables whose
 * value comes from a helper (issue 24 item 4; run/creds.c), filled by
 * proxy_gw_fill_exec: entry i from h (kind exec, its "x" lines), named
 * label. 0 or -ENOMEM. */
int proxy_gw_new_exec(size_t n, struct proxy_gw **out);
int proxy_gw_fill_exec(struct proxy_gw *g, size_t i, const char *label,
                       const struct settings_header *h);
/* An entry names what the proxy runs and which of its secrets go where, so
 * it is accepted only from a settings file nobody but root and the proxy's
 * user could have written or replaced (the file and every directory above
 * it, a sticky one aside, or a read-only mount), and its helper program
 * likewise (issue 24 item 4; rt-15: a settings file another user may write
 * would make the proxy run their program, or send its files and variables
 * to their hosts). Called before proxy_gw_new by the proxy and its config
 * test. 0, or -1 with a located message in err. */
int proxy_gw_trusted(const struct settings *s, struct settings_error *err);
/* exec entries of nw take the value, lifetime and schedule of an entry of
 * old with the same header, argv and ttl (a reload does not drop them). */
void proxy_gw_carry(struct proxy_gw *nw, struct proxy_gw *old);
/* A helper run of old's entry i under way goes on for nw's first entry with
 * the same header, argv and ttl that is not running (marked running now):
 * its index, or -1 when nw has none (the run is then stopped), so a reload
 * storm does not start one run per reload (rt-15). */
long proxy_gw_adopt(struct proxy_gw *nw, const struct proxy_gw *old, size_t i);
struct proxy_gw *proxy_gw_ref(struct proxy_gw *g);
void proxy_gw_unref(struct proxy_gw *g);

/* Trims spaces, tabs, CR and LF at both ends of buf (len bytes) in place:
 * the new length (the value starts at *start). */
size_t proxy_gw_trim(const uint8_t *buf, size_t len, size_t *start);
/* NULL when v (len bytes, trimmed) may be a value, else why not. */
const char *proxy_gw_value_check(const uint8_t *v, size_t len);

/* A helper run of entry i ended at now: ok with its output (trimmed and
 * checked here), or failed with why. The old value stays until it
 * expires. NULL when the output is the new value, else why not (why, or
 * why the output is no value). */
const char *proxy_gw_helper_done(struct proxy_gw *g, size_t i, uint64_t now, int ok,
                                 const uint8_t *out, size_t len, const char *why);
/* Entry i's value at now: 0 with a copy in *s (proxy_gw_snap_free), or -1
 * with why (no value yet, the helper failed, its value expired). */
int proxy_gw_get(struct proxy_gw *g, size_t i, uint64_t now, struct proxy_gw_snap *s, char *why,
                 size_t whylen);
void proxy_gw_snap_free(struct proxy_gw_snap *s);
/* The first exec entry due at now, marked running: its index, or -1 with
 * *next (UINT64_MAX: none) the earliest time one is due. */
long proxy_gw_due(struct proxy_gw *g, uint64_t now, uint64_t *next);
/* NULL when every entry has a value at now, else the label of one that has
 * none (for /readyz). */
const char *proxy_gw_unready(struct proxy_gw *g, uint64_t now);

/* Every "name:" line (any case) of a head after its first line removed,
 * in place: the new length. Pure. */
size_t proxy_head_drop(char *head, size_t len, const char *name);

/* A header to set: name, then prefix and value. */
struct proxy_gw_line {
    const char *name;
    const char *prefix;
    size_t prefix_len;
    const uint8_t *value;
    size_t len;
};
/* head (len bytes, a request head that ends in CRLF CRLF) with every line
 * of each of the n lines' names removed (proxy_head_drop) and the lines
 * "NAME: PREFIXVALUE" added before its end, and every Accept-Encoding
 * line removed (the response must be maskable): a new head in *out
 * (owned) of *olen bytes. 0, -EINVAL (no CRLF CRLF end) or -ENOMEM. Pure
 * (tests/fuzz/fuzz_gw_head.c). */
int proxy_gw_head(const char *head, size_t len, const struct proxy_gw_line *lines, size_t n,
                  char **out, size_t *olen);

/* CLOCK_MONOTONIC in ms. */
uint64_t proxy_gw_now(void);

#endif
