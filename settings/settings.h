/* settings/settings.h - the settings of the whole suite: struct settings
 * and its loader (settings/load.c and the files beside it).
 *
 * Layers, applied in this order, each all-or-nothing: the user file, the
 * explicit file (--settings or $SLUICE_SETTINGS), command-line flags (set
 * by the caller on struct settings), the managed file. Strict: an unknown
 * key or a bad value is an error "FILE:LINE:COLUMN: key.path: what is
 * wrong". Pure code: no sockets, no event loop; the only I/O is reading
 * settings and list files. Errors are 0 / negative errno (R3).
 *
 * HOW TO ADD A KEY
 *   1. Add its field to struct settings (below), its default to
 *      settings_init and, when it owns memory, its release to settings_free
 *      (settings/store.c).
 *   2. Add one row to THE key table (settings/keys.c), in the table of its
 *      parent object: a row macro there for a plain boolean, integer,
 *      seconds or string list, or KD_CUSTOM with a validator for anything
 *      else; give it .off, its merge rule (enum merge_rule,
 *      settings/settings-int.h) and, for a boundary key, LOCK(order, weak,
 *      "path", "what its weaker value does").
 *   3. A KD_CUSTOM key: write its validator beside its topic's others
 *      (network.c, sandbox.c, proxy.c, listfile.c), declared in
 *      settings-int.h; it stores into settings__field(c, d).
 *   4. Describe it in conf/settings.schema.json and regenerate
 *      sluice-settings(5) (conf/man/gen-settings.py): test_settings fails
 *      while the table and the schema differ.
 * Nothing else: the merge, "which layer set this key", the managed lock
 * and explain's list of locked keys all follow the row.
 */
#ifndef SLUICE_SETTINGS_H
#define SLUICE_SETTINGS_H

#include <stddef.h>

/* One string from a settings file or list file, with where it came from. */
struct settings_item {
    char *value;
    const char *file; /* interned in struct settings; "<default>" for built-ins */
    unsigned line, col;
    const char *list; /* "network.allowedDomains", "network.allowedDomainsFiles", ... */
    size_t index;     /* index in that list (0-based); line number for list files */
    int literal;      /* a path entry written {"path": ..., "literal": true}: no ~,
                         $HOME or glob expansion */
    int managed;      /* from the managed file (or a list file it names) */
};

/* An object key that was given (even empty), and where: the last layer
 * that gave it, for messages that refuse it beside another key. */
struct settings_given {
    int set;
    const char *file; /* interned in struct settings */
    unsigned line, col;
};

struct settings_list {
    struct settings_item *items;
    size_t n, cap;
};

/* A key -> value string pair (deniedDomainReasons) or key -> list (ignoreViolations). */
struct settings_pair {
    char *key;
    char *value;              /* deniedDomainReasons */
    struct settings_list list; /* ignoreViolations */
};

struct settings_map {
    struct settings_pair *pairs;
    size_t n, cap;
};

enum settings_mode { SETTINGS_MODE_ENFORCE = 0, SETTINGS_MODE_REPORT };

/* A tri-state boolean: unset means "use the mode's default". */
enum settings_bool { SETTINGS_UNSET = -1, SETTINGS_FALSE = 0, SETTINGS_TRUE = 1 };

struct settings {
    struct {
        struct settings_list allowed_domains;  /* allow rules (inline + list files) */
        struct settings_list denied_domains;   /* deny rules (inline + list files) */
        struct settings_map denied_domain_reasons;
        int strict_allowlist;
        int allow_all_domains;
        struct settings_list denied_resolved_addresses; /* IPs and CIDRs */
        struct settings_list allow_unix_sockets;        /* macOS only in srt; kept */
        int allow_all_unix_sockets;
        int transparent; /* network.transparent: seccomp-notify connect + DNS (issue 17) */
        int allow_local_binding;
        unsigned http_proxy_port;  /* 0 = unset */
        unsigned socks_proxy_port; /* 0 = unset */
        enum settings_bool deny_private_addresses;
        struct settings_list dns_servers; /* "IP" or "IP:PORT" / "[v6]:PORT" */
        /* issue 26: "[HOST_ADDR:]HOST_PORT:SANDBOX_PORT" (settings_publish_parse)
         * and host loopback ports reachable from the sandbox (decimal) */
        struct settings_list publish;
        struct settings_list host_ports;
        enum settings_mode mode;
        struct settings_list allowed_domains_files;
        struct settings_list denied_domains_files;
        struct {
            int set;         /* the key was given (else the environment's) */
            char *http;      /* proxy URLs, or NULL */
            char *https;
            char *no_proxy;  /* comma-separated, or NULL */
            const char *file; /* where it was given (set), for run/creds_trust.c */
            unsigned line, col;
        } parent_proxy;      /* network.parentProxy */
        /* request-level options for plain HTTP and tunnels (srt 0.0.83) */
        struct settings_list strip_response_headers; /* names removed from responses */
        int refuse_opaque_tunnels;                   /* CONNECT and SOCKS refused */
        int isolate; /* 1 (default): own network namespace; 0: the host's network */
        int require_host_match;                      /* Host != target: 421 */
        enum settings_ambiguous {
            SETTINGS_AMBIGUOUS_AS_SPELLED = 0,
            SETTINGS_AMBIGUOUS_REFUSE,
            SETTINGS_AMBIGUOUS_NORMALIZE,
        } ambiguous_request_target;
        /* network.requestRules (issue 23): one item per rule, its value the
         * rule in settings_request_rule's text form (below), its place the
         * rule's object; replaced by a later layer that sets the key */
        struct settings_list request_rules;
        /* network.tlsTerminate (srt 0.0.83's schema, plus scope) */
        struct {
            struct settings_given given;
            char *ca_cert_path;    /* both or neither (checked per layer) */
            char *ca_key_path;
            struct settings_list exclude_domains;    /* DomainPattern list */
            struct settings_list extra_ca_cert_paths; /* upstream trust besides the system's */
            unsigned max_tunnels;                     /* 1..65536, default 256 */
            unsigned handshake_timeout_ms;            /* 100..600000, default 10000 */
            enum settings_tls_scope {
                SETTINGS_TLS_SCOPE_ALL = 0, /* srt: every allowed host not excluded */
                SETTINGS_TLS_SCOPE_NEEDED,  /* only hosts with request rules or credentials */
            } scope;
        } tls_terminate;
        /* network.mitmProxy (srt 0.0.83): connections to hosts matching
         * domains (after the allow and deny lists) go to an external proxy
         * on a host Unix socket, as CONNECT or absolute-form HTTP; refused
         * together with tlsTerminate (policy compile) */
        struct {
            struct settings_given given;
            char *socket_path;           /* absolute (relative: to the settings file) */
            struct settings_list domains; /* DomainPattern list, at least one */
        } mitm_proxy;
        /* network.denyMessage (issue 26): replaces the hint of every denial
         * (the 403 body, the log's hint, the run summary); NULL: sluice's */
        char *deny_message;
    } network;
    struct {
        struct settings_list deny_read, allow_read, allow_write, deny_write;
        struct settings_list create_write; /* allowWrite, created when missing */
        int allow_git_config;
        int disabled;
    } filesystem;
    struct settings_map ignore_violations;
    int enable_weaker_nested_sandbox;
    int allow_nested_user_namespaces; /* lift the new-user-namespace seccomp rules */
    unsigned mandatory_deny_search_depth; /* default 3, 1..10 */
    char *bwrap_path;
    char *java_agent_jar_path; /* javaAgentJarPath: -javaagent: in JAVA_TOOL_OPTIONS */
    struct settings_list git_safe_directories;

    /* "sandbox" object (permission layers, reference 001 §1-6). */
    struct {
        enum settings_bool enabled;                    /* unset = true */
        enum settings_bool allow_unsandboxed_commands; /* unset = true */
        struct settings_list excluded_commands; /* "cmd", "prefix ", "prefix:*" */
        /* sandbox.limits (issue 14), applied to the command by `sluice
         * inner`; 0 = no limit of sluice's (the inherited one stays) */
        struct {
#define SETTINGS_DEFAULT_PROCESSES 8192u
            unsigned processes;  /* RLIMIT_NPROC in the sandbox; default 8192 */
            unsigned memory_mib; /* RLIMIT_AS per process, MiB; default 0 */
            unsigned open_files; /* RLIMIT_NOFILE per process; default 0 */
        } limits;
    } sandbox;

    /* "environment" object: what of the host environment reaches the command. */
    struct {
        struct settings_list allow; /* names or NAME_* globs passed even if secret */
        struct settings_list deny;  /* names or globs removed in addition */
        int inherit;                /* default 1; 0: pass only the allow list */
        struct settings_map set;    /* NAME -> value set in the command's environment;
                                       a value "~" or "~/..." is under $HOME */
        struct settings_list path_append; /* directories appended to PATH ("~" expanded) */
    } environment;

    /* "credentials" (issue 24, srt 0.0.83's schema): envVars and files
     * entries, one item each in settings_credential's text form (below),
     * each list replaced by a later layer that sets it */
    struct {
        struct {
            int set; /* the object was given (even empty) */
            const char *file;
            unsigned line, col;
        } given;
        struct settings_list env_vars;
        struct settings_list files;
        /* awsPairs: each pair's variables as mask entries in the text form
         * (2 or 3 items with the pair's index), each with one line "a" +
         * its role: "aK" access key id, "aS" secret key, "aT" session token */
        struct settings_list aws_pairs;
        struct {
            int streaming, presigned, sigv4a; /* 0 deny (default), 1 passthrough */
        } sigv4;
        /* headers (sluice proxy as a gateway): one item per entry in
         * settings_header's text form (below); replaced by a later layer */
        struct settings_list headers;
        struct {
            int on;           /* allowPlaintextInject */
            const char *file; /* where it was last set (run/creds_trust.c) */
            unsigned line, col;
        } plaintext;
    } credentials;

    /* sluice's own proxy settings ("proxy" object). Times in milliseconds. */
    struct {
        char *auth_username; /* NULL: no proxy authentication */
        char *auth_password;
        unsigned head_timeout_ms;      /* HTTP request head; default 10 s */
        unsigned handshake_timeout_ms; /* SOCKS5 greeting..request; default 10 s */
        unsigned ask_timeout_ms;       /* ask handler answer; default 30 s */
        unsigned dns_timeout_ms;       /* one lookup, retries included; default 5 s */
        unsigned dial_timeout_ms;      /* each connect attempt; default 10 s */
        unsigned idle_timeout_ms;      /* tunnel without traffic; 0 = none; default 15 min */
        unsigned drain_timeout_ms;     /* SIGTERM drain; default 10 s */
        unsigned max_connections;      /* 0 (default): from RLIMIT_NOFILE, proxy/core.c */
        unsigned max_pending_asks;     /* default 256 */
        unsigned max_head_bytes;       /* default 8192 */
    } proxy;

    /* Keys accepted but not applicable on Linux: one message each, for the
     * caller to print as a warning ("FILE:LINE:COL: key: not applicable ..."). */
    struct settings_list notices;

    /* The managed file, once applied (settings_apply_managed): its name and
     * every key it sets (value: the key path, e.g. "network.isolate"), for
     * `sluice explain`. While one exists only it may weaken the boundary
     * (settings_boundary_key). managed_file NULL: none. */
    const char *managed_file;
    struct settings_list managed_keys;

    /* internal: where a layer other than the managed file set a boundary key
     * to a weaker value (value: the key path; index: which key), refused when
     * a managed file is applied */
    struct settings_list weakened;

    /* internal: where a layer replaced credentials.envVars or .files while
     * the list held mask entries (value: the key path; file, line, col:
     * the replacing layer's "credentials"), for run/creds_trust.c: a file
     * the sandbox could have written may not unmask a secret */
    struct settings_list cred_replaced;

    /* internal: interned file names */
    char **files;
    size_t nfiles;
};

/* Error detail: "FILE:LINE:COLUMN: key.path: what is wrong". */
struct settings_error {
    char msg[1024];
};

/* Built-in defaults: no network rules, mode enforce, depth 3. */
void settings_init(struct settings *s);
void settings_free(struct settings *s);

/* Applies one JSON settings file on top of *s (layering: scalars and allow
 * lists replace, deny lists are united). Reads list files named by
 * network.*DomainsFiles. Returns 0, -ENOENT when the file does not exist
 * (err untouched), or -EINVAL / another -errno with err filled. */
int settings_apply_file(struct settings *s, const char *path, struct settings_error *err);

/* Same, from a buffer already in memory; name is used in messages. */
int settings_apply_buffer(struct settings *s, const char *name, const char *text, size_t len,
                          struct settings_error *err);

/* The file layers of design.md "Settings", on top of *s (normally fresh
 * from settings_init): the user file ($XDG_CONFIG_HOME/sluice/settings.json,
 * XDG default ~/.config; else ~/.srt-settings.json), then the explicit file
 * (explicit_path, or $SLUICE_SETTINGS when explicit_path is NULL). A missing
 * user file is skipped; a missing explicit file is an error ("FILE: cannot
 * open: ..."). Each file is all-or-nothing, but when the explicit file fails
 * the user file has already been applied: the caller must then discard *s.
 * The managed file is not applied here: see settings_apply_managed. */
int settings_load(struct settings *s, const char *explicit_path, struct settings_error *err);

/* Applies the managed file (path, or /etc/sluice/managed.json when NULL)
 * as the last layer, after command-line flags, so its keys win. A missing
 * managed file is skipped (returns 0). Deliberately no environment override:
 * a user must not be able to point sluice at another managed file. */
int settings_apply_managed(struct settings *s, const char *path, struct settings_error *err);

/* The boundary keys: the settings that weaken the boundary between the
 * command and the host (open the host network, report mode, no sandbox, no
 * filesystem policy, excluded commands, external proxy ports). When a
 * managed file exists, a user or project layer (or a --control-fd line) that
 * sets one of them to its weaker value is refused by settings_apply_managed
 * ("FILE:LINE:COL: KEY: refused: ..."), and sandbox.allowUnsandboxedCommands
 * is false unless the managed file sets it. Entry i (from 0) is the key path
 * ("network.isolate") with *what ("open the host network"); NULL past the
 * last. */
const char *settings_boundary_key(size_t i, const char **what);

/* Ports between the host and the sandbox (settings/ports.c, issue 26). */
#define SETTINGS_SANDBOX_HTTP_PORT 3128u /* sluice's listeners in the sandbox */
#define SETTINGS_SANDBOX_SOCKS_PORT 1080u
#define SETTINGS_SANDBOX_DNS_PORT 53u /* transparent mode's resolver */

struct settings_publish {
    int family;              /* 4 or 6 */
    unsigned char addr[16];  /* HOST_ADDR; 127.0.0.1 when not given */
    int explicit_addr;       /* HOST_ADDR was written */
    unsigned short host_port, sandbox_port;
};

/* 1 when port is one of sluice's own listeners in the sandbox. */
int settings_sandbox_own_port(unsigned port);
/* Parses "[HOST_ADDR:]HOST_PORT:SANDBOX_PORT" (HOST_ADDR: a dotted quad or
 * [IPv6]; ports 1..65535 without sign or leading zeros; SANDBOX_PORT not
 * one of sluice's own). 0, or -EINVAL with *why a static message. */
int settings_publish_parse(const char *s, struct settings_publish *p, const char **why);
/* HOST_ADDR is 127.0.0.0/8 or ::1. */
int settings_publish_is_loopback(const struct settings_publish *p);

/* The key table's keys, depth first, objects before their keys: writes the
 * path of entry i ("network.allowedDomains", "proxy.timeouts.head") into buf
 * and returns buf; NULL past the last. For tests that hold the JSON Schema
 * (and so sluice-settings(5)) to the table. */
const char *settings_key_path(size_t i, char *buf, size_t len);

/* Checks of values the loader cannot judge itself because they need the
 * host and rule grammar, which is policy's (design.md: settings <- policy):
 * the parent proxy's URLs and its noProxy list. policy installs them
 * (policy/checks.c) before main runs; each returns 0, or -EINVAL with *why
 * set. While none is installed a key that needs one is refused, so a value
 * is never taken unchecked. */
struct settings_checks {
    int (*proxy_url)(const char *url, const char **why);  /* network.parentProxy.http(s) */
    int (*no_proxy)(const char *list, const char **why);  /* network.parentProxy.noProxy */
    int (*rule_host)(const char *pattern, const char **why); /* network.requestRules[].host */
    int (*rule_path)(const char *glob, const char **why);    /* network.requestRules[].path */
};

/* network.requestRules: the text form of one checked rule, the value of its
 * settings_item: lines separated by '\n' (no field can hold one):
 *   "allow" or "deny"
 *   the host pattern
 *   the methods, separated by ' ' ("" = any method)
 *   one line per path glob (none = any path)
 * settings_request_rule_split() reads it back. */
#define SETTINGS_RULE_FIELDS_MAX 66 /* action, host, methods, up to 63 paths */
struct settings_request_rule {
    int deny;
    const char *host;
    size_t host_len;
    const char *methods; /* space-separated, "" = any */
    size_t methods_len;
    const char *paths[SETTINGS_RULE_FIELDS_MAX - 3];
    size_t path_lens[SETTINGS_RULE_FIELDS_MAX - 3];
    size_t npaths; /* 0 = any path */
};
/* Splits a rule's text form (spans point into text). 0 or -EINVAL. */
int settings_request_rule_split(const char *text, struct settings_request_rule *r);
void settings_set_checks(const struct settings_checks *checks);
/* credentials.envVars / credentials.files: the text form of one checked
 * entry, lines separated by '\n' (no field can hold one):
 *   "env" or "file"; the variable name or path; "deny" or "mask";
 *   the extract regex ("" none); "warn", "deny" or "error" (onExtractNoMatch,
 *   default "error"); "jwt" or "" (decode); "1" or "0" (maskDuplicates);
 *   then one line per maskClaims claim ("c" + claim) and per injectHosts
 *   pattern ("h" + pattern; none = the hosts of network.allowedDomains),
 *   and with require one line "r" + the header that must carry the
 *   placeholder (requireHeader, default Authorization); an awsPairs
 *   variable has one line "a" + its role (K, S or T); an envVars mask
 *   entry with value (a helper program, issue 24 item 4) has one line
 *   "x" + argument per exec argument (the program first), one line "t" +
 *   its ttl in ms and one line "o" + its timeout in ms.
 * settings_credential_split() reads it back (spans point into text);
 * settings_credential_next() walks the rest's lines of one tag. */
enum settings_nomatch { SETTINGS_NOMATCH_ERROR = 0, SETTINGS_NOMATCH_WARN, SETTINGS_NOMATCH_DENY };
struct settings_credential {
    int file; /* a files entry (name is its path) */
    int mask; /* mode mask (else deny) */
    const char *name;
    size_t name_len;
    const char *extract; /* "" = the whole value */
    size_t extract_len;
    enum settings_nomatch on_no_match;
    int jwt;
    int mask_duplicates;
    int exec;                 /* value: a helper program ("x" lines) */
    unsigned ttl_ms, timeout_ms; /* with exec */
    const char *rest; /* the claim and host lines */
};
int settings_credential_split(const char *text, struct settings_credential *r);
/* The next line of rest tagged tag ('c' claim, 'h' host, 'r' require): 1 with *s, *len
 * and *rest moved past it, 0 at the end. */
int settings_credential_next(const char **rest, char tag, const char **s, size_t *len);
/* credentials.headers: the text form of one checked entry, lines:
 *   "hdr"; the header name; "file", "env" or "exec"; the path or variable
 *   name ("" for exec); the prefix ("" none); ttl in ms (exec, else 0);
 *   timeout in ms (exec, else 0); then one line "h" + pattern per host and
 *   one line "x" + argument per exec argument (the program first).
 * settings_header_split() reads it back (spans point into text); the "h"
 * and "x" lines are walked with settings_credential_next(). */
enum settings_hdr_kind { SETTINGS_HDR_FILE = 0, SETTINGS_HDR_ENV, SETTINGS_HDR_EXEC };
struct settings_header {
    const char *name;
    size_t name_len;
    enum settings_hdr_kind kind;
    const char *source; /* file path or variable name */
    size_t source_len;
    const char *prefix;
    size_t prefix_len;
    unsigned ttl_ms, timeout_ms;
    const char *rest; /* the host and argument lines */
};
int settings_header_split(const char *text, struct settings_header *r);

#endif
