/* settings/keys.c - THE key table: every key of the settings file, its
 * type, where it is stored, how a later layer merges it, whether it is a
 * boundary key, and its validator; applying one layer's JSON by the table.
 */
#include "settings/settings-int.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* The boundary keys: with a managed file, only it may weaken them            */

struct boundary {
    unsigned flag;    /* enum layer_flag of the key */
    const char *key;  /* its path */
    const char *what; /* what its weaker value does */
};

static const struct boundary boundary_keys[] = {
    {LF_ISOLATE, "network.isolate", "open the host network (network.isolate false)"},
    {LF_MODE, "network.mode", "turn on report mode"},
    {LF_SANDBOX_ENABLED, "sandbox.enabled", "disable the sandbox"},
    {LF_UNSANDBOXED, "sandbox.allowUnsandboxedCommands", "allow commands to run unsandboxed"},
    {LF_FS_DISABLED, "filesystem.disabled", "disable the filesystem policy"},
    {LF_EXCLUDED, "sandbox.excludedCommands", "exclude commands from the sandbox"},
    {LF_HTTP_PORT, "network.httpProxyPort", "name an external HTTP proxy port"},
    {LF_SOCKS_PORT, "network.socksProxyPort", "name an external SOCKS proxy port"},
    /* rt-4: these weaken it as much: another program in bwrap's place runs
     * the command with no sandbox at all; host Unix sockets (a container
     * runtime's) are a way out; nested namespaces turn Landlock off */
    {LF_BWRAP, "bwrapPath", "choose the program that builds the sandbox (bwrapPath)"},
    {LF_ALL_UNIX, "network.allowAllUnixSockets", "allow every Unix socket"},
    {LF_NESTED_USERNS, "allowNestedUserNamespaces", "allow nested user namespaces"},
    {LF_NESTED, "enableWeakerNestedSandbox", "weaken the sandbox for nesting"},
};

const char *settings_boundary_key(size_t i, const char **what)
{
    if (i >= COUNT(boundary_keys))
        return NULL;
    if (what != NULL)
        *what = boundary_keys[i].what;
    return boundary_keys[i].key;
}

/* The boundary_keys entry of key d when the layer just set it to its weaker
 * value, else -1. */
static int weakens(const struct ctx *c, const struct key_def *d)
{
    const struct settings *v = c->v;
    int weak = 0;

    switch (d->flag) {
    case LF_ISOLATE:
        weak = !v->network.isolate;
        break;
    case LF_MODE:
        weak = v->network.mode == SETTINGS_MODE_REPORT;
        break;
    case LF_SANDBOX_ENABLED:
        weak = v->sandbox.enabled == SETTINGS_FALSE;
        break;
    case LF_UNSANDBOXED:
        weak = v->sandbox.allow_unsandboxed_commands == SETTINGS_TRUE;
        break;
    case LF_FS_DISABLED:
        weak = v->filesystem.disabled != 0;
        break;
    case LF_EXCLUDED:
        weak = v->sandbox.excluded_commands.n > 0;
        break;
    case LF_HTTP_PORT:
    case LF_SOCKS_PORT:
    case LF_BWRAP:
        weak = 1;
        break;
    case LF_ALL_UNIX:
        weak = v->network.allow_all_unix_sockets != 0;
        break;
    case LF_NESTED_USERNS:
        weak = v->allow_nested_user_namespaces != 0;
        break;
    case LF_NESTED:
        weak = v->enable_weaker_nested_sandbox != 0;
        break;
    default:
        return -1;
    }
    if (!weak)
        return -1;
    for (size_t i = 0; i < COUNT(boundary_keys); i++)
        if (boundary_keys[i].flag == d->flag)
            return (int)i;
    return -1;
}

/* Records the current key (its path, located at the key) in l. */
static int record_key(struct ctx *c, struct settings_list *l, size_t index)
{
    struct jsonpos pos;
    char path[512], *v;

    settings__locate(c, 1, &pos);
    settings__format_path(c, path, sizeof(path));
    v = strdup(path);
    if (v == NULL || settings__list_push(l, v, c->name, pos.line, pos.col, "key", index) < 0)
        return settings__fail_nomem(c);
    return 0;
}

void *settings__field(struct ctx *c, const struct key_def *d)
{
    return (char *)c->v + d->off;
}

static int apply_key(struct ctx *c, json_t *v, const struct key_def *d)
{
    int rc = 0, b = 0, set = 0;

    switch (d->kind) {
    case KD_BOOL:
        rc = settings__want_bool(c, v, &b);
        if (rc == 0)
            *(int *)settings__field(c, d) = b;
        set = b;
        break;
    case KD_UINT:
        rc = settings__want_uint(c, v, d->min, d->max, (unsigned *)settings__field(c, d));
        break;
    case KD_STRLIST:
        rc = settings__take_strlist(c, v, (struct settings_list *)settings__field(c, d), d->list,
                                    d->nonempty);
        set = json_array_size(v) > 0;
        break;
    case KD_OBJECT:
        if (!json_is_object(v))
            return settings__fail(c, 0, "expected an object, got %s", settings__type_name(v));
        rc = settings__apply_object(c, v, d->sub, d->nsub);
        break;
    case KD_CUSTOM:
        rc = d->fn(c, v, d);
        break;
    case KD_REFUSED: {
        char path[512];
        settings__format_path(c, path, sizeof(path));
        if (d->note != NULL)
            return settings__fail(c, 1, "'%s' is not supported by sluice: %s", path, d->note);
        return settings__fail(
            c, 1,
            "'%s' is not implemented by sluice yet; remove it (sluice refuses rather "
            "than silently drop a rule)",
            path);
    }
    case KD_CHECK_BOOL:
        rc = settings__want_bool(c, v, &set);
        break;
    case KD_CHECK_STRING:
        rc = settings__want_string(c, v);
        break;
    case KD_CHECK_STRLIST:
        rc = settings__check_strlist(c, v, 0);
        set = json_array_size(v) > 0;
        break;
    case KD_CHECK_OBJECT:
        if (!json_is_object(v))
            return settings__fail(c, 0, "expected an object, got %s", settings__type_name(v));
        break;
    case KD_SECONDS:
        rc = settings__want_seconds(c, v, d->min, d->max, (unsigned *)settings__field(c, d));
        break;
    }
    if (rc < 0)
        return rc;
    c->set |= d->flag;
    c->pset |= d->pflag;
    if (d->kind != KD_OBJECT) {
        int weak = c->managed ? -1 : weakens(c, d);
        if (c->managed)
            rc = record_key(c, &c->v->managed_keys, 0);
        else if (weak >= 0)
            rc = record_key(c, &c->v->weakened, (size_t)weak);
        if (rc < 0)
            return rc;
    }
    if (d->note_when == NOTE_ALWAYS || (d->note_when == NOTE_IF_SET && set))
        rc = settings__notice(c, d->note);
    return rc;
}

int settings__apply_object(struct ctx *c, json_t *obj, const struct key_def *defs, size_t ndefs)
{
    const char *key;
    json_t *v;

    json_object_foreach(obj, key, v)
    {
        const struct key_def *d = NULL;
        int rc;

        for (size_t i = 0; i < ndefs; i++) {
            if (strcmp(defs[i].name, key) == 0) {
                d = &defs[i];
                break;
            }
        }
        settings__push_key(c, key);
        if (d == NULL) {
            const char *best = NULL;
            size_t bestd = SIZE_MAX;
            char q[128];

            for (size_t i = 0; i < ndefs; i++) {
                size_t dist = settings__edit_distance(key, defs[i].name);
                if (dist < bestd) {
                    bestd = dist;
                    best = defs[i].name;
                }
            }
            settings__quote(q, sizeof(q), key);
            /* close enough to be a typo: 1-2 edits, 3 for long keys */
            if (best != NULL && bestd <= (strlen(best) >= 12 ? 3u : 2u) &&
                bestd * 3 <= strlen(best))
                rc = settings__fail(c, 1, "unknown key '%s' (did you mean '%s'?)", q, best);
            else
                rc = settings__fail(c, 1, "unknown key '%s'", q);
        } else {
            rc = apply_key(c, v, d);
        }
        settings__pop(c);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The key tables                                                            */

#define OFF(f) offsetof(struct settings, f)
#define NOTE_LINUX "not applicable on Linux, ignored"
#define REFUSED(n)                                                                                 \
    {                                                                                              \
        .name = n, .kind = KD_REFUSED                                                              \
    }
#define REFUSED_SAY(n, msg)                                                                        \
    {                                                                                              \
        .name = n, .kind = KD_REFUSED, .note = msg                                                 \
    }
#define STRLIST(n, f, fl, l, ne)                                                                   \
    {                                                                                              \
        .name = n, .kind = KD_STRLIST, .off = OFF(f), .flag = fl, .list = l, .nonempty = ne        \
    }
#define BOOL(n, f, fl)                                                                             \
    {                                                                                              \
        .name = n, .kind = KD_BOOL, .off = OFF(f), .flag = fl                                      \
    }
#define UINT(n, f, fl, lo, hi)                                                                     \
    {                                                                                              \
        .name = n, .kind = KD_UINT, .off = OFF(f), .flag = fl, .min = lo, .max = hi                \
    }
#define CUSTOM(n, f, fl, l)                                                                        \
    {                                                                                              \
        .name = n, .kind = KD_CUSTOM, .fn = f, .flag = fl, .list = l                               \
    }
#define OBJECT(n, t)                                                                               \
    {                                                                                              \
        .name = n, .kind = KD_OBJECT, .sub = t, .nsub = sizeof(t) / sizeof(t[0])                   \
    }

static const struct key_def network_keys[] = {
    STRLIST("allowedDomains", network.allowed_domains, LF_ALLOWED_DOMAINS, "network.allowedDomains",
            0),
    STRLIST("deniedDomains", network.denied_domains, 0, "network.deniedDomains", 0),
    CUSTOM("deniedDomainReasons", settings__fn_reasons, 0, NULL),
    BOOL("strictAllowlist", network.strict_allowlist, LF_STRICT),
    BOOL("allowAllDomains", network.allow_all_domains, LF_ALLOW_ALL),
    STRLIST("deniedResolvedAddresses", network.denied_resolved_addresses, 0,
            "network.deniedResolvedAddresses", 0),
    {.name = "allowUnixSockets",
     .kind = KD_STRLIST,
     .off = OFF(network.allow_unix_sockets),
     .flag = LF_UNIX_SOCKETS,
     .list = "network.allowUnixSockets",
     .note_when = NOTE_IF_SET,
     .note = "macOS only in srt; on Linux sluice blocks Unix sockets with seccomp unless "
             "allowAllUnixSockets"},
    BOOL("allowAllUnixSockets", network.allow_all_unix_sockets, LF_ALL_UNIX),
    BOOL("transparent", network.transparent, LF_TRANSPARENT),
    BOOL("allowLocalBinding", network.allow_local_binding, LF_LOCAL_BINDING),
    UINT("httpProxyPort", network.http_proxy_port, LF_HTTP_PORT, 1, 65535),
    UINT("socksProxyPort", network.socks_proxy_port, LF_SOCKS_PORT, 1, 65535),
    {.name = "allowMachLookup",
     .kind = KD_CHECK_STRLIST,
     .note_when = NOTE_IF_SET,
     .note = NOTE_LINUX},
    CUSTOM("denyPrivateAddresses", settings__fn_deny_private, LF_DENY_PRIVATE, NULL),
    CUSTOM("dnsServers", settings__fn_dns, LF_DNS, "network.dnsServers"),
    CUSTOM("mode", settings__fn_mode, LF_MODE, NULL),
    CUSTOM("allowedDomainsFiles", settings__fn_allowed_files, LF_ALLOWED_DOMAINS,
           "network.allowedDomainsFiles"),
    CUSTOM("deniedDomainsFiles", settings__fn_denied_files, 0, "network.deniedDomainsFiles"),
    REFUSED_SAY("mitmProxy", "remove it; to send allowed traffic through another proxy, name it in "
                             "network.parentProxy (sluice sends CONNECT to it)"),
    REFUSED_SAY("tlsTerminate",
                "sluice does not decrypt TLS and decides by host and port; remove it, and "
                "inspect content in a proxy you control named in network.parentProxy"),
    CUSTOM("parentProxy", settings__fn_parent, LF_PARENT, NULL),
    CUSTOM("allowPlaintextHeaderSet", settings__fn_plaintext_set, 0, NULL),
    CUSTOM("stripResponseHeaders", settings__fn_strip, LF_HTTP_OPTS,
           "network.stripResponseHeaders"),
    BOOL("refuseOpaqueTunnels", network.refuse_opaque_tunnels, LF_HTTP_OPTS),
    BOOL("requireHostMatch", network.require_host_match, LF_HTTP_OPTS),
    BOOL("isolate", network.isolate, LF_ISOLATE),
    CUSTOM("ambiguousRequestTarget", settings__fn_ambiguous, LF_HTTP_OPTS, NULL),
    REFUSED_SAY("filterRequest",
                "it is a callback of the JavaScript library, which a settings file cannot "
                "carry; decide per request with an ask handler (sluice run --ask "
                "exec:PROGRAM or socket:PATH)"),
};

static const struct key_def filesystem_keys[] = {
    STRLIST("denyRead", filesystem.deny_read, 0, "filesystem.denyRead", 2),
    STRLIST("allowRead", filesystem.allow_read, LF_ALLOW_READ, "filesystem.allowRead", 2),
    STRLIST("allowWrite", filesystem.allow_write, LF_ALLOW_WRITE, "filesystem.allowWrite", 2),
    STRLIST("denyWrite", filesystem.deny_write, 0, "filesystem.denyWrite", 2),
    STRLIST("createWrite", filesystem.create_write, LF_ALLOW_WRITE, "filesystem.createWrite", 2),
    {.name = "denyReadFiles",
     .kind = KD_CUSTOM,
     .fn = settings__fn_fs_files,
     .off = OFF(filesystem.deny_read),
     .list = "filesystem.denyReadFiles"},
    {.name = "allowReadFiles",
     .kind = KD_CUSTOM,
     .fn = settings__fn_fs_files,
     .off = OFF(filesystem.allow_read),
     .flag = LF_ALLOW_READ,
     .list = "filesystem.allowReadFiles"},
    {.name = "allowWriteFiles",
     .kind = KD_CUSTOM,
     .fn = settings__fn_fs_files,
     .off = OFF(filesystem.allow_write),
     .flag = LF_ALLOW_WRITE,
     .list = "filesystem.allowWriteFiles"},
    {.name = "denyWriteFiles",
     .kind = KD_CUSTOM,
     .fn = settings__fn_fs_files,
     .off = OFF(filesystem.deny_write),
     .list = "filesystem.denyWriteFiles"},
    BOOL("allowGitConfig", filesystem.allow_git_config, LF_GIT_CONFIG),
    BOOL("disabled", filesystem.disabled, LF_FS_DISABLED),
    {.name = "autoAllowSystemPaths",
     .kind = KD_CHECK_BOOL,
     .note_when = NOTE_IF_SET,
     .note = "ignored, sluice's allowRead re-allows inside denyRead"},
};

static const struct key_def git_keys[] = {
    STRLIST("safeDirectories", git_safe_directories, LF_SAFE_DIRS, "git.safeDirectories", 0),
};

/* "sandbox.limits" (issue 14): strict ranges; see README "Resource limits" */
static const struct key_def sandbox_limit_keys[] = {
    {.name = "processes",
     .kind = KD_UINT,
     .off = OFF(sandbox.limits.processes),
     .pflag = PF_LIM_PROCS,
     .min = 16,
     .max = 4194304},
    {.name = "memory",
     .kind = KD_UINT,
     .off = OFF(sandbox.limits.memory_mib),
     .pflag = PF_LIM_MEM,
     .min = 64,
     .max = 1u << 26},
    {.name = "openFiles",
     .kind = KD_UINT,
     .off = OFF(sandbox.limits.open_files),
     .pflag = PF_LIM_FILES,
     .min = 64,
     .max = 1u << 24},
};

/* "sandbox": the permission layers of reference 001 (used by sluice run). */
static const struct key_def sandbox_keys[] = {
    OBJECT("limits", sandbox_limit_keys),
    {.name = "enabled",
     .kind = KD_CUSTOM,
     .fn = settings__fn_tribool,
     .off = OFF(sandbox.enabled),
     .flag = LF_SANDBOX_ENABLED},
    {.name = "allowUnsandboxedCommands",
     .kind = KD_CUSTOM,
     .fn = settings__fn_tribool,
     .off = OFF(sandbox.allow_unsandboxed_commands),
     .flag = LF_UNSANDBOXED},
    STRLIST("excludedCommands", sandbox.excluded_commands, LF_EXCLUDED, "sandbox.excludedCommands",
            1),
};

/* "environment": what of the host environment reaches a sandboxed command.
 * allow is an allow list (replaced by a later layer), deny a deny list
 * (united across layers). */
static const struct key_def environment_keys[] = {
    {.name = "allow",
     .kind = KD_CUSTOM,
     .fn = settings__fn_env_names,
     .off = OFF(environment.allow),
     .flag = LF_ENV_ALLOW,
     .list = "environment.allow"},
    {.name = "deny",
     .kind = KD_CUSTOM,
     .fn = settings__fn_env_names,
     .off = OFF(environment.deny),
     .list = "environment.deny"},
    BOOL("inherit", environment.inherit, LF_ENV_INHERIT),
    CUSTOM("set", settings__fn_env_set, 0, NULL),
    CUSTOM("pathAppend", settings__fn_path_append, LF_ENV_PATH, "environment.pathAppend"),
};

static const struct key_def ripgrep_keys[] = {
    {.name = "command", .kind = KD_CHECK_STRING},
    {.name = "args", .kind = KD_CHECK_STRLIST},
    {.name = "argv0", .kind = KD_CHECK_STRING},
};

static const struct key_def seccomp_keys[] = {
    {.name = "applyPath", .kind = KD_CHECK_STRING},
    {.name = "argv0", .kind = KD_CHECK_STRING},
};

#define SECONDS(n, f, pf, lo, hi)                                                                  \
    {                                                                                              \
        .name = n, .kind = KD_SECONDS, .off = OFF(f), .pflag = pf, .min = lo, .max = hi            \
    }
#define PUINT(n, f, pf, lo, hi)                                                                    \
    {                                                                                              \
        .name = n, .kind = KD_UINT, .off = OFF(f), .pflag = pf, .min = lo, .max = hi               \
    }
#define DAY_MS (24u * 3600u * 1000u)

static const struct key_def proxy_timeout_keys[] = {
    SECONDS("head", proxy.head_timeout_ms, PF_HEAD, 1, DAY_MS),
    SECONDS("handshake", proxy.handshake_timeout_ms, PF_HANDSHAKE, 1, DAY_MS),
    SECONDS("ask", proxy.ask_timeout_ms, PF_ASK, 1, DAY_MS),
    SECONDS("dns", proxy.dns_timeout_ms, PF_DNS, 1, DAY_MS),
    SECONDS("dial", proxy.dial_timeout_ms, PF_DIAL, 1, DAY_MS),
    SECONDS("idle", proxy.idle_timeout_ms, PF_IDLE, 0, DAY_MS),
    SECONDS("drain", proxy.drain_timeout_ms, PF_DRAIN, 0, DAY_MS),
};

static const struct key_def proxy_limit_keys[] = {
    PUINT("maxConnections", proxy.max_connections, PF_MAX_CONNS, 1, 1000000),
    PUINT("maxPendingAsks", proxy.max_pending_asks, PF_MAX_ASKS, 1, 100000),
    PUINT("maxHeadBytes", proxy.max_head_bytes, PF_MAX_HEAD, 1024, 1048576),
};

static const struct key_def proxy_keys[] = {
    {.name = "auth", .kind = KD_CUSTOM, .fn = settings__fn_auth, .pflag = PF_AUTH},
    OBJECT("timeouts", proxy_timeout_keys),
    OBJECT("limits", proxy_limit_keys),
};

const struct key_def settings__top_keys[] = {
    OBJECT("network", network_keys),
    OBJECT("filesystem", filesystem_keys),
    CUSTOM("ignoreViolations", settings__fn_ignore, LF_IGNORE, NULL),
    BOOL("enableWeakerNestedSandbox", enable_weaker_nested_sandbox, LF_NESTED),
    BOOL("allowNestedUserNamespaces", allow_nested_user_namespaces, LF_NESTED_USERNS),
    UINT("mandatoryDenySearchDepth", mandatory_deny_search_depth, LF_DEPTH, 1, 10),
    CUSTOM("bwrapPath", settings__fn_bwrap, LF_BWRAP, NULL),
    CUSTOM("javaAgentJarPath", settings__fn_java_agent, LF_JAVA_AGENT, NULL),
    OBJECT("git", git_keys),
    OBJECT("proxy", proxy_keys),
    OBJECT("sandbox", sandbox_keys),
    OBJECT("environment", environment_keys),
    {.name = "ripgrep",
     .kind = KD_OBJECT,
     .sub = ripgrep_keys,
     .nsub = COUNT(ripgrep_keys),
     .note_when = NOTE_ALWAYS,
     .note = "not used by sluice, ignored (sluice walks directories natively)"},
    {.name = "seccomp",
     .kind = KD_OBJECT,
     .sub = seccomp_keys,
     .nsub = COUNT(seccomp_keys),
     .note_when = NOTE_ALWAYS,
     .note = "not used by sluice, ignored (sluice applies its own seccomp filter)"},
    {.name = "socatPath",
     .kind = KD_CHECK_STRING,
     .note_when = NOTE_ALWAYS,
     .note = "not used by sluice, ignored (sluice does not use socat)"},
    {.name = "enableWeakerNetworkIsolation",
     .kind = KD_CHECK_BOOL,
     .note_when = NOTE_IF_SET,
     .note = NOTE_LINUX},
    {.name = "allowAppleEvents",
     .kind = KD_CHECK_BOOL,
     .note_when = NOTE_IF_SET,
     .note = NOTE_LINUX},
    {.name = "allowPty", .kind = KD_CHECK_BOOL, .note_when = NOTE_IF_SET, .note = NOTE_LINUX},
    {.name = "windows", .kind = KD_CHECK_OBJECT, .note_when = NOTE_ALWAYS, .note = NOTE_LINUX},
    REFUSED_SAY("credentials",
                "sluice neither masks nor injects credentials; keep secrets out of the "
                "sandbox with environment.deny and filesystem.denyRead (common secret "
                "variables are dropped by default), and let a proxy you control named in "
                "network.parentProxy add them"),
};

const size_t settings__ntop_keys = COUNT(settings__top_keys);

unsigned settings__boundary_flag(size_t i)
{
    return boundary_keys[i].flag;
}
