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

/* Which replace-type keys a layer sets. Deny-type lists have no flag: they
 * are united whether or not a layer names them. */
enum layer_flag {
    LF_ALLOWED_DOMAINS = 1u << 0, /* allowedDomains or allowedDomainsFiles */
    LF_STRICT = 1u << 1,
    LF_ALLOW_ALL = 1u << 2,
    LF_UNIX_SOCKETS = 1u << 3,
    LF_ALL_UNIX = 1u << 4,
    LF_LOCAL_BINDING = 1u << 5,
    LF_HTTP_PORT = 1u << 6,
    LF_SOCKS_PORT = 1u << 7,
    LF_DENY_PRIVATE = 1u << 8,
    LF_DNS = 1u << 9,
    LF_MODE = 1u << 10,
    LF_ALLOW_READ = 1u << 11,
    LF_ALLOW_WRITE = 1u << 12,
    LF_GIT_CONFIG = 1u << 13,
    LF_FS_DISABLED = 1u << 14,
    LF_IGNORE = 1u << 15,
    LF_NESTED = 1u << 16,
    LF_DEPTH = 1u << 17,
    LF_BWRAP = 1u << 18,
    LF_SAFE_DIRS = 1u << 19,
    LF_SANDBOX_ENABLED = 1u << 20,
    LF_UNSANDBOXED = 1u << 21,
    LF_EXCLUDED = 1u << 22,
    LF_ENV_ALLOW = 1u << 23,
    LF_ENV_INHERIT = 1u << 24,
    LF_ENV_PATH = 1u << 25,
    LF_NESTED_USERNS = 1u << 26,
    LF_JAVA_AGENT = 1u << 27,
    LF_PARENT = 1u << 28,
    LF_HTTP_OPTS = 1u << 29,
    LF_ISOLATE = 1u << 30,
    LF_TRANSPARENT = 1u << 31,
};

/* Which "proxy" keys a layer sets (struct ctx.pset). */
enum proxy_flag {
    PF_AUTH = 1u << 0,
    PF_HEAD = 1u << 1,
    PF_HANDSHAKE = 1u << 2,
    PF_ASK = 1u << 3,
    PF_DNS = 1u << 4,
    PF_DIAL = 1u << 5,
    PF_IDLE = 1u << 6,
    PF_DRAIN = 1u << 7,
    PF_MAX_CONNS = 1u << 8,
    PF_MAX_ASKS = 1u << 9,
    PF_MAX_HEAD = 1u << 10,
    /* sandbox.limits (issue 14): here, the layer flags are all taken */
    PF_LIM_PROCS = 1u << 20,
    PF_LIM_MEM = 1u << 21,
    PF_LIM_FILES = 1u << 22,
};

/* Parsing state for one layer. */
struct ctx {
    const char *name; /* settings file, interned in v */
    const char *dir;  /* its directory, for relative list files; NULL = cwd */
    const char *text; /* JSON text (after any BOM) */
    size_t len;
    struct settings *v; /* the scratch layer */
    unsigned set;       /* enum layer_flag bits */
    unsigned pset;      /* enum proxy_flag bits */
    struct jsonpos_step path[PATH_DEPTH_MAX];
    size_t depth;
    struct settings_error *err;
    int managed; /* the managed file (settings_apply_managed) */
};

struct key_def;
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

struct key_def {
    const char *name;
    enum key_kind kind;
    size_t off;       /* field in struct settings */
    unsigned flag;    /* enum layer_flag set when present */
    unsigned pflag;   /* enum proxy_flag set when present */
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
const char *settings__intern(struct settings *s, const char *name);
int settings__read_all(const char *path, char **out, size_t *outlen);

/* Where a value is, messages, plain values (value.c). */
void settings__quote(char *buf, size_t size, const char *s);
void settings__format_path(const struct ctx *c, char *buf, size_t size);
void settings__locate(const struct ctx *c, int at_key, struct jsonpos *pos);
__attribute__((format(printf, 3, 4))) int settings__fail(struct ctx *c, int at_key, const char *fmt,
                                                         ...);
int settings__fail_nomem(struct ctx *c);
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

/* The key table (keys.c). */
extern const struct key_def settings__top_keys[];
extern const size_t settings__ntop_keys;
unsigned settings__boundary_flag(size_t i);
void *settings__field(struct ctx *c, const struct key_def *d);
int settings__apply_object(struct ctx *c, json_t *obj, const struct key_def *defs, size_t ndefs);

/* Validators by topic (network.c, sandbox.c, listfile.c, proxy.c). */
int settings__fn_reasons(struct ctx *c, json_t *v, const struct key_def *d);
int settings__fn_deny_private(struct ctx *c, json_t *v, const struct key_def *d);
int settings__fn_mode(struct ctx *c, json_t *v, const struct key_def *d);
int settings__fn_parent(struct ctx *c, json_t *v, const struct key_def *d);
int settings__fn_ambiguous(struct ctx *c, json_t *v, const struct key_def *d);
int settings__fn_plaintext_set(struct ctx *c, json_t *v, const struct key_def *d);
int settings__fn_strip(struct ctx *c, json_t *v, const struct key_def *d);
int settings__fn_dns(struct ctx *c, json_t *v, const struct key_def *d);
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
int settings__merge(struct settings *s, struct settings *L, unsigned set, unsigned pset);

#endif
