/* settings/settings-int.h - internals shared by the settings module's files. */
#ifndef SLUICE_SETTINGS_INT_H
#define SLUICE_SETTINGS_INT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "settings/jsonpos.h"
#include "settings/settings.h"

#define SETTINGS_MANAGED_PATH "/etc/sluice/managed.json"
#define PATH_DEPTH_MAX 8
#define COUNT(t) (sizeof(t) / sizeof(t[0]))

struct key_def;

/* The rows of the key table a layer set (no limit on their number). */
struct key_set {
    const struct key_def **rows;
    size_t n, cap;
};

/* Parsing state for one layer. */
struct ctx {
    const char *name; /* settings file, interned in v */
    const char *dir;  /* its directory, for relative list files; NULL = cwd */
    const char *text; /* JSON text (after any BOM) */
    size_t len;
    struct settings *v; /* the scratch layer */
    struct key_set set; /* the keys it set */
    struct jsonpos_step path[PATH_DEPTH_MAX];
    size_t depth;
    struct settings_error *err;
    int managed; /* the managed file (settings_apply_managed) */
};

typedef int (*key_fn)(struct ctx *c, json_t *v, const struct key_def *d);

enum key_kind {
    KD_BOOL = 0,   /* int field */
    KD_UINT,       /* unsigned field, min..max */
    KD_STRLIST,    /* settings_list field */
    KD_OBJECT,     /* nested object with its own keys (sub) */
    KD_CUSTOM,     /* fn */
    KD_REFUSED,    /* not implemented: error */
    KD_CHECK_BOOL, /* accepted, checked, not stored */
    KD_CHECK_STRING,
    KD_CHECK_STRLIST,
    KD_CHECK_OBJECT, /* any content */
    KD_SECONDS,      /* number of seconds (fractions allowed) -> unsigned ms, min..max ms */
};

enum note_when { NOTE_NEVER = 0, NOTE_ALWAYS, NOTE_IF_SET /* true, or a non-empty array */ };

/* How a layer's value of a key meets the earlier layers' (merge.c). Unless
 * the rule says otherwise, it applies only when the layer set the key (or a
 * key of its group). */
enum merge_rule {
    MERGE_NONE = 0,    /* nothing stored, or stored through another row */
    MERGE_SCALAR,      /* int, unsigned or enum at off (size bytes): replaced */
    MERGE_STRING,      /* char * at off (and at off2 when set): replaced, the old freed */
    MERGE_LIST,        /* settings_list at off: replaced */
    MERGE_LIST_UNION,  /* settings_list at off: appended, whether or not the layer names
                          the key (a list file of another row may fill it) */
    MERGE_MAP,         /* settings_map at off: replaced */
    MERGE_MAP_UNION,   /* settings_map at off: united, the later layer wins per key */
    MERGE_OR,          /* hardening int at off: a later layer turns it on, never off */
    MERGE_LIST_SOME,   /* hardening settings_list at off: replaced by a non-empty one only */
    MERGE_SCALAR_SOME, /* hardening scalar at off: replaced by a non-zero value only */
    MERGE_PARENT,      /* network.parentProxy's struct: replaced, its strings freed */
};

/* Keys replaced together when a layer sets any of them: a list and the
 * list files that feed it. */
enum merge_group {
    MG_NONE = 0,
    MG_ALLOWED_DOMAINS, /* network.allowedDomains, network.allowedDomainsFiles */
    MG_ALLOW_READ,      /* filesystem.allowRead, allowReadFiles */
    MG_ALLOW_WRITE,     /* filesystem.allowWrite, createWrite, allowWriteFiles */
    MG_COUNT,
};

/* When a boundary key's value is the weaker one. */
enum weak_when {
    WEAK_ALWAYS = 0,  /* any value (a port, a program) */
    WEAK_IF_ZERO,     /* false (network.isolate, sandbox.enabled) */
    WEAK_IF_NONZERO,  /* true, or report mode */
    WEAK_IF_NONEMPTY, /* a non-empty list */
};

struct key_lock {
    unsigned order; /* from 1: its place in settings_boundary_key; 0: not a boundary key */
    enum weak_when weak;
    const char *path; /* "network.isolate" */
    const char *what; /* what its weaker value does */
};

/* One row of the key table (keys.c). */
struct key_def {
    const char *name;
    enum key_kind kind;
    size_t off;  /* field in struct settings */
    size_t size; /* its size, for scalars */
    size_t off2; /* MERGE_STRING: a second string moved with the first; 0: none */
    enum merge_rule merge;
    enum merge_group group;
    struct key_lock lock;
    const char *list; /* settings_item.list for KD_STRLIST */
    int nonempty;     /* KD_STRLIST: strings must not be empty */
    unsigned min, max;
    key_fn fn;
    const struct key_def *sub;
    size_t nsub;
    enum note_when note_when;
    const char *note;
};

/* Storage (store.c). */
int settings__list_reserve(struct settings_list *l, size_t want);
int settings__list_push(struct settings_list *l, char *value, const char *file, unsigned line,
                        unsigned col, const char *list, size_t index);
void settings__list_free(struct settings_list *l);
int settings__map_reserve(struct settings_map *m, size_t want);
void settings__pair_free(struct settings_pair *p);
void settings__map_free(struct settings_map *m);
int settings__map_put(struct settings_map *m, const char *key, const char *value);
const char *settings__intern(struct settings *s, const char *name);
int settings__read_all(const char *path, char **out, size_t *outlen);

/* A growing NUL-terminated text (value.c): settings__text_add appends N
 * bytes of S; 0 or -ENOMEM. The caller frees p. */
struct settings_text {
    char *p;
    size_t n, cap;
};
int settings__text_add(struct settings_text *b, const char *s, size_t n);

/* Where a value is, messages, plain values (value.c). */
void settings__quote(char *buf, size_t size, const char *s);
void settings__format_path(const struct ctx *c, char *buf, size_t size);
void settings__locate(const struct ctx *c, int at_key, struct jsonpos *pos);
/* Marks G given at the current key of C's layer. */
void settings__given(const struct ctx *c, struct settings_given *g);
__attribute__((format(printf, 3, 4))) int settings__fail(struct ctx *c, int at_key, const char *fmt,
                                                         ...);
int settings__fail_nomem(struct ctx *c);
/* An object of "key": "string" pairs into m (a later pair wins per key): a
 * non-object fails with "expected an object of WHAT, got TYPE"; each pair is
 * checked by check (0, or settings__fail's value) with the key pushed. */
int settings__string_map(struct ctx *c, json_t *v, struct settings_map *m, const char *what,
                         int (*check)(struct ctx *c, const char *key, json_t *e));
int settings__notice(struct ctx *c, const char *note);
const char *settings__type_name(const json_t *j);
void settings__push_key(struct ctx *c, const char *key);
void settings__push_index(struct ctx *c, size_t index);
void settings__pop(struct ctx *c);
size_t settings__edit_distance(const char *a, const char *b);
int settings__want_bool(struct ctx *c, json_t *v, int *out);
int settings__want_string(struct ctx *c, json_t *v);
int settings__want_uint(struct ctx *c, json_t *v, unsigned min, unsigned max, unsigned *out);
int settings__want_seconds(struct ctx *c, json_t *v, unsigned min, unsigned max, unsigned *out);
int settings__check_strlist(struct ctx *c, json_t *v, int nonempty);
int settings__take_strlist(struct ctx *c, json_t *v, struct settings_list *out, const char *list,
                           int nonempty);
int settings__check_each(struct ctx *c, json_t *v, int (*ok)(const char *), const char *what,
                         const char *expected);

/* The key table (keys.c). fn gets each row with its path ("network.mode"),
 * depth first; a walk stops at fn's first non-zero return, which it returns. */
typedef int (*settings__row_fn)(const struct key_def *d, const char *path, void *arg);
const struct key_def *settings__top_keys(size_t *n);
int settings__key_walk(settings__row_fn fn, void *arg);
const struct key_def *settings__key_at(const char *path);
const struct key_def *settings__lock_row(size_t i); /* boundary key i, or NULL */

/* Applying a layer by the table (apply.c). */
int settings__key_set_add(struct key_set *ks, const struct key_def *d);
int settings__key_set_has(const struct key_set *ks, const struct key_def *d);
void settings__key_set_free(struct key_set *ks);
void *settings__field(struct ctx *c, const struct key_def *d);
int settings__apply_object(struct ctx *c, json_t *obj, const struct key_def *defs, size_t ndefs);

/* Validators by topic (network.c, sandbox.c, listfile.c, proxy.c). */
int settings__fn_reasons(struct ctx *c, json_t *v, const struct key_def *d);
int settings__fn_mode(struct ctx *c, json_t *v, const struct key_def *d);
int settings__fn_parent(struct ctx *c, json_t *v, const struct key_def *d);
int settings__fn_ambiguous(struct ctx *c, json_t *v, const struct key_def *d);
int settings__fn_tls_terminate(struct ctx *c, json_t *v, const struct key_def *d);
int settings__fn_tls_path(struct ctx *c, json_t *v, const struct key_def *d);
int settings__fn_tls_exclude(struct ctx *c, json_t *v, const struct key_def *d);
int settings__fn_tls_extra(struct ctx *c, json_t *v, const struct key_def *d);
int settings__fn_tls_scope(struct ctx *c, json_t *v, const struct key_def *d);
int settings__fn_mitm(struct ctx *c, json_t *v, const struct key_def *d);
int settings__fn_mitm_socket(struct ctx *c, json_t *v, const struct key_def *d);
int settings__fn_deny_message(struct ctx *c, json_t *v, const struct key_def *d);
int settings__fn_plaintext_set(struct ctx *c, json_t *v, const struct key_def *d);
int settings__fn_strip(struct ctx *c, json_t *v, const struct key_def *d);
int settings__fn_request_rules(struct ctx *c, json_t *v, const struct key_def *d);
int settings__check_rule_host(const char *pattern, const char **why);
int settings__check_rule_path(const char *glob, const char **why);
int settings__fn_dns(struct ctx *c, json_t *v, const struct key_def *d);
int settings__fn_credentials(struct ctx *c, json_t *v, const struct key_def *d);  /* creds.c */
int settings__fn_cred_entries(struct ctx *c, json_t *v, const struct key_def *d); /* creds.c */
int settings__fn_plaintext_inject(struct ctx *c, json_t *v, const struct key_def *d); /* creds.c */
int settings__fn_aws_pairs(struct ctx *c, json_t *v, const struct key_def *d);       /* creds.c */
int settings__fn_sigv4(struct ctx *c, json_t *v, const struct key_def *d);           /* creds.c */
int settings__fn_cred_headers(struct ctx *c, json_t *v, const struct key_def *d);    /* creds.c */
int settings__fn_publish(struct ctx *c, json_t *v, const struct key_def *d);      /* ports.c */
int settings__fn_host_ports(struct ctx *c, json_t *v, const struct key_def *d);   /* ports.c */
int settings__fn_tribool(struct ctx *c, json_t *v, const struct key_def *d);
int settings__fn_env_names(struct ctx *c, json_t *v, const struct key_def *d);
int settings__fn_env_set(struct ctx *c, json_t *v, const struct key_def *d);
int settings__fn_path_append(struct ctx *c, json_t *v, const struct key_def *d);
int settings__fn_bwrap(struct ctx *c, json_t *v, const struct key_def *d);
int settings__fn_java_agent(struct ctx *c, json_t *v, const struct key_def *d);
int settings__fn_ignore(struct ctx *c, json_t *v, const struct key_def *d);
int settings__fn_allowed_files(struct ctx *c, json_t *v, const struct key_def *d);
int settings__fn_denied_files(struct ctx *c, json_t *v, const struct key_def *d);
int settings__fn_fs_files(struct ctx *c, json_t *v, const struct key_def *d);
int settings__fn_auth(struct ctx *c, json_t *v, const struct key_def *d);

/* Merging a checked layer (merge.c). */
int settings__merge(struct settings *s, struct settings *L, const struct key_set *set);

#endif
