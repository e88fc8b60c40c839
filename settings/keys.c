/* settings/keys.c - THE key table: every key of a settings file, one row
 * each, nested as the JSON is. A row says how the key is read (kind, and
 * its validator for KD_CUSTOM), where it is stored (off), how a later layer
 * meets the earlier ones (merge, group: merge.c), whether it is a boundary
 * key only the managed file may weaken (lock), and any notice it gives.
 * apply.c reads a layer by it, merge.c merges by it, `sluice explain` and
 * the managed lock list its boundary keys, and the tests check the shipped
 * JSON Schema (and so sluice-settings(5)) against it.
 *
 * How to add a key: settings/settings.h.
 */
#include "settings/settings-int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define OFF(f) offsetof(struct settings, f)
#define SIZE(f) sizeof(((struct settings *)0)->f)
#define NOTE_LINUX "not applicable on Linux, ignored"
#define DAY_MS (24u * 3600u * 1000u)

/* Row makers for the common shapes; anything else is written out. */
#define REFUSED_SAY(n, msg)                                                                        \
    {                                                                                              \
        .name = n, .kind = KD_REFUSED, .note = msg                                                 \
    }
#define STRLIST(n, f, m, l, ne)                                                                    \
    {                                                                                              \
        .name = n, .kind = KD_STRLIST, .off = OFF(f), .merge = m, .list = l, .nonempty = ne        \
    }
#define BOOL(n, f)                                                                                 \
    {                                                                                              \
        .name = n, .kind = KD_BOOL, .off = OFF(f), .size = SIZE(f), .merge = MERGE_SCALAR          \
    }
#define UINT(n, f, lo, hi)                                                                         \
    {                                                                                              \
        .name = n, .kind = KD_UINT, .off = OFF(f), .size = SIZE(f), .merge = MERGE_SCALAR,         \
        .min = lo, .max = hi                                                                       \
    }
#define SECONDS(n, f, lo, hi)                                                                      \
    {                                                                                              \
        .name = n, .kind = KD_SECONDS, .off = OFF(f), .size = SIZE(f), .merge = MERGE_SCALAR,      \
        .min = lo, .max = hi                                                                       \
    }
#define CUSTOM(n, fun, f, m, l)                                                                    \
    {                                                                                              \
        .name = n, .kind = KD_CUSTOM, .fn = fun, .off = OFF(f), .size = SIZE(f), .merge = m,       \
        .list = l                                                                                  \
    }
#define CHECK_ONLY(n, k)                                                                           \
    {                                                                                              \
        .name = n, .kind = k                                                                       \
    }
#define OBJECT(n, t)                                                                               \
    {                                                                                              \
        .name = n, .kind = KD_OBJECT, .sub = t, .nsub = COUNT(t)                                   \
    }
/* A boundary key: its place in settings_boundary_key's list (from 1), when
 * its value is the weaker one, its path and what that value does. */
#define LOCK(order, weak, path, what) .lock = {order, weak, path, what}

/* clang-format off */
/* "network.tlsTerminate" (srt 0.0.83): the object's own row checks
 * caCertPath and caKeyPath come together, and records that it was given */
static const struct key_def tls_terminate_keys[] = {
    {.name = "caCertPath", .kind = KD_CUSTOM, .fn = settings__fn_tls_path,
     .off = OFF(network.tls_terminate.ca_cert_path),
     .off2 = OFF(network.tls_terminate.ca_key_path), .merge = MERGE_STRING},
    /* moved with caCertPath (off2): a layer names both or neither */
    {.name = "caKeyPath", .kind = KD_CUSTOM, .fn = settings__fn_tls_path,
     .off = OFF(network.tls_terminate.ca_key_path), .merge = MERGE_NONE},
    CUSTOM("excludeDomains", settings__fn_tls_exclude, network.tls_terminate.exclude_domains,
           MERGE_LIST, "network.tlsTerminate.excludeDomains"),
    CUSTOM("extraCaCertPaths", settings__fn_tls_extra, network.tls_terminate.extra_ca_cert_paths,
           MERGE_LIST, "network.tlsTerminate.extraCaCertPaths"),
    UINT("maxTunnels", network.tls_terminate.max_tunnels, 1, 65536),
    UINT("handshakeTimeoutMs", network.tls_terminate.handshake_timeout_ms, 100, 600000),
    CUSTOM("scope", settings__fn_tls_scope, network.tls_terminate.scope, MERGE_SCALAR, NULL),
};

/* "network.mitmProxy" (srt 0.0.83): both keys required (the object's row) */
static const struct key_def mitm_proxy_keys[] = {
    {.name = "socketPath", .kind = KD_CUSTOM, .fn = settings__fn_mitm_socket,
     .off = OFF(network.mitm_proxy.socket_path), .merge = MERGE_STRING},
    CUSTOM("domains", settings__fn_tls_exclude, network.mitm_proxy.domains, MERGE_LIST,
           "network.mitmProxy.domains"),
};

static const struct key_def network_keys[] = {
    {.name = "allowedDomains", .kind = KD_STRLIST, .off = OFF(network.allowed_domains),
     .merge = MERGE_LIST, .group = MG_ALLOWED_DOMAINS, .list = "network.allowedDomains"},
    STRLIST("deniedDomains", network.denied_domains, MERGE_LIST_UNION, "network.deniedDomains", 0),
    CUSTOM("deniedDomainReasons", settings__fn_reasons, network.denied_domain_reasons,
           MERGE_MAP_UNION, NULL),
    BOOL("strictAllowlist", network.strict_allowlist),
    BOOL("allowAllDomains", network.allow_all_domains),
    STRLIST("deniedResolvedAddresses", network.denied_resolved_addresses, MERGE_LIST_UNION,
            "network.deniedResolvedAddresses", 0),
    {.name = "allowUnixSockets", .kind = KD_STRLIST, .off = OFF(network.allow_unix_sockets),
     .merge = MERGE_LIST, .list = "network.allowUnixSockets", .note_when = NOTE_IF_SET,
     .note = "macOS only in srt; on Linux sluice blocks Unix sockets with seccomp unless "
             "allowAllUnixSockets"},
    {.name = "allowAllUnixSockets", .kind = KD_BOOL, .off = OFF(network.allow_all_unix_sockets),
     .size = SIZE(network.allow_all_unix_sockets), .merge = MERGE_SCALAR,
     LOCK(10, WEAK_IF_NONZERO, "network.allowAllUnixSockets", "allow every Unix socket")},
    BOOL("transparent", network.transparent),
    BOOL("allowLocalBinding", network.allow_local_binding),
    {.name = "httpProxyPort", .kind = KD_UINT, .off = OFF(network.http_proxy_port),
     .size = SIZE(network.http_proxy_port), .merge = MERGE_SCALAR, .min = 1, .max = 65535,
     LOCK(7, WEAK_ALWAYS, "network.httpProxyPort", "name an external HTTP proxy port")},
    {.name = "socksProxyPort", .kind = KD_UINT, .off = OFF(network.socks_proxy_port),
     .size = SIZE(network.socks_proxy_port), .merge = MERGE_SCALAR, .min = 1, .max = 65535,
     LOCK(8, WEAK_ALWAYS, "network.socksProxyPort", "name an external SOCKS proxy port")},
    {.name = "allowMachLookup", .kind = KD_CHECK_STRLIST, .note_when = NOTE_IF_SET,
     .note = NOTE_LINUX},
    CUSTOM("denyPrivateAddresses", settings__fn_tribool, network.deny_private_addresses,
           MERGE_SCALAR, NULL),
    CUSTOM("dnsServers", settings__fn_dns, network.dns_servers, MERGE_LIST, "network.dnsServers"),
    /* issue 26: ports between the host and the sandbox (settings/ports.c) */
    CUSTOM("publish", settings__fn_publish, network.publish, MERGE_LIST, "network.publish"),
    {.name = "hostPorts", .kind = KD_CUSTOM, .fn = settings__fn_host_ports,
     .off = OFF(network.host_ports), .size = SIZE(network.host_ports), .merge = MERGE_LIST,
     .list = "network.hostPorts",
     LOCK(13, WEAK_IF_NONEMPTY, "network.hostPorts", "open host loopback ports to the sandbox")},
    {.name = "mode", .kind = KD_CUSTOM, .fn = settings__fn_mode, .off = OFF(network.mode),
     .size = SIZE(network.mode), .merge = MERGE_SCALAR,
     LOCK(2, WEAK_IF_NONZERO, "network.mode", "turn on report mode")},
    {.name = "allowedDomainsFiles", .kind = KD_CUSTOM, .fn = settings__fn_allowed_files,
     .off = OFF(network.allowed_domains_files), .merge = MERGE_LIST,
     .group = MG_ALLOWED_DOMAINS, .list = "network.allowedDomainsFiles"},
    CUSTOM("deniedDomainsFiles", settings__fn_denied_files, network.denied_domains_files,
           MERGE_LIST_UNION, "network.deniedDomainsFiles"),
    {.name = "mitmProxy", .kind = KD_OBJECT, .sub = mitm_proxy_keys,
     .nsub = COUNT(mitm_proxy_keys), .fn = settings__fn_mitm,
     .off = OFF(network.mitm_proxy.given), .size = SIZE(network.mitm_proxy.given),
     .merge = MERGE_SCALAR},
    {.name = "tlsTerminate", .kind = KD_OBJECT, .sub = tls_terminate_keys,
     .nsub = COUNT(tls_terminate_keys), .fn = settings__fn_tls_terminate,
     .off = OFF(network.tls_terminate.given), .size = SIZE(network.tls_terminate.given),
     .merge = MERGE_SCALAR},
    CUSTOM("parentProxy", settings__fn_parent, network.parent_proxy, MERGE_PARENT, NULL),
    {.name = "allowPlaintextHeaderSet", .kind = KD_CUSTOM, .fn = settings__fn_plaintext_set},
    CUSTOM("stripResponseHeaders", settings__fn_strip, network.strip_response_headers,
           MERGE_LIST_SOME, "network.stripResponseHeaders"),
    {.name = "refuseOpaqueTunnels", .kind = KD_BOOL, .off = OFF(network.refuse_opaque_tunnels),
     .size = SIZE(network.refuse_opaque_tunnels), .merge = MERGE_OR},
    {.name = "requireHostMatch", .kind = KD_BOOL, .off = OFF(network.require_host_match),
     .size = SIZE(network.require_host_match), .merge = MERGE_OR},
    {.name = "isolate", .kind = KD_BOOL, .off = OFF(network.isolate),
     .size = SIZE(network.isolate), .merge = MERGE_SCALAR,
     LOCK(1, WEAK_IF_ZERO, "network.isolate", "open the host network (network.isolate false)")},
    CUSTOM("ambiguousRequestTarget", settings__fn_ambiguous, network.ambiguous_request_target,
           MERGE_SCALAR_SOME, NULL),
    /* request rules (issue 23): replaced by a later layer, like allowedDomains */
    CUSTOM("requestRules", settings__fn_request_rules, network.request_rules, MERGE_LIST,
           "network.requestRules"),
    {.name = "denyMessage", .kind = KD_CUSTOM, .fn = settings__fn_deny_message,
     .off = OFF(network.deny_message), .merge = MERGE_STRING},
    REFUSED_SAY("filterRequest",
                "it is a callback of the JavaScript library, which a settings file cannot "
                "carry; decide per request with an ask handler (sluice run --ask "
                "exec:PROGRAM or socket:PATH)"),
};

static const struct key_def filesystem_keys[] = {
    STRLIST("denyRead", filesystem.deny_read, MERGE_LIST_UNION, "filesystem.denyRead", 2),
    {.name = "allowRead", .kind = KD_STRLIST, .off = OFF(filesystem.allow_read),
     .merge = MERGE_LIST, .group = MG_ALLOW_READ, .list = "filesystem.allowRead", .nonempty = 2},
    {.name = "allowWrite", .kind = KD_STRLIST, .off = OFF(filesystem.allow_write),
     .merge = MERGE_LIST, .group = MG_ALLOW_WRITE, .list = "filesystem.allowWrite",
     .nonempty = 2},
    STRLIST("denyWrite", filesystem.deny_write, MERGE_LIST_UNION, "filesystem.denyWrite", 2),
    {.name = "createWrite", .kind = KD_STRLIST, .off = OFF(filesystem.create_write),
     .merge = MERGE_LIST, .group = MG_ALLOW_WRITE, .list = "filesystem.createWrite",
     .nonempty = 2},
    /* list files: their entries go to the list at off, which its own row merges */
    {.name = "denyReadFiles", .kind = KD_CUSTOM, .fn = settings__fn_fs_files,
     .off = OFF(filesystem.deny_read), .list = "filesystem.denyReadFiles"},
    {.name = "allowReadFiles", .kind = KD_CUSTOM, .fn = settings__fn_fs_files,
     .off = OFF(filesystem.allow_read), .group = MG_ALLOW_READ,
     .list = "filesystem.allowReadFiles"},
    {.name = "allowWriteFiles", .kind = KD_CUSTOM, .fn = settings__fn_fs_files,
     .off = OFF(filesystem.allow_write), .group = MG_ALLOW_WRITE,
     .list = "filesystem.allowWriteFiles"},
    {.name = "denyWriteFiles", .kind = KD_CUSTOM, .fn = settings__fn_fs_files,
     .off = OFF(filesystem.deny_write), .list = "filesystem.denyWriteFiles"},
    BOOL("allowGitConfig", filesystem.allow_git_config),
    {.name = "disabled", .kind = KD_BOOL, .off = OFF(filesystem.disabled),
     .size = SIZE(filesystem.disabled), .merge = MERGE_SCALAR,
     LOCK(5, WEAK_IF_NONZERO, "filesystem.disabled", "disable the filesystem policy")},
    {.name = "autoAllowSystemPaths", .kind = KD_CHECK_BOOL, .note_when = NOTE_IF_SET,
     .note = "ignored, sluice's allowRead re-allows inside denyRead"},
};

/* "credentials" (issue 24, srt 0.0.83): entries checked in settings/creds.c,
 * judged against the domain lists and tlsTerminate by policy/cred.c */
static const struct key_def credentials_keys[] = {
    CUSTOM("envVars", settings__fn_cred_entries, credentials.env_vars, MERGE_LIST,
           "credentials.envVars"),
    CUSTOM("files", settings__fn_cred_entries, credentials.files, MERGE_LIST, "credentials.files"),
    CUSTOM("allowPlaintextInject", settings__fn_plaintext_inject, credentials.plaintext,
           MERGE_SCALAR, NULL),
    CUSTOM("awsPairs", settings__fn_aws_pairs, credentials.aws_pairs, MERGE_LIST,
           "credentials.awsPairs"),
    CUSTOM("sigv4", settings__fn_sigv4, credentials.sigv4, MERGE_SCALAR, NULL),
    CUSTOM("headers", settings__fn_cred_headers, credentials.headers, MERGE_LIST,
           "credentials.headers"),
};

static const struct key_def git_keys[] = {
    STRLIST("safeDirectories", git_safe_directories, MERGE_LIST, "git.safeDirectories", 0),
};

/* "sandbox.limits" (issue 14): strict ranges; see README "Resource limits" */
static const struct key_def sandbox_limit_keys[] = {
    UINT("processes", sandbox.limits.processes, 16, 4194304),
    UINT("memory", sandbox.limits.memory_mib, 64, 1u << 26),
    UINT("openFiles", sandbox.limits.open_files, 64, 1u << 24),
};

/* "sandbox": the permission layers of reference 001 (used by sluice run). */
static const struct key_def sandbox_keys[] = {
    OBJECT("limits", sandbox_limit_keys),
    {.name = "enabled", .kind = KD_CUSTOM, .fn = settings__fn_tribool,
     .off = OFF(sandbox.enabled), .size = SIZE(sandbox.enabled), .merge = MERGE_SCALAR,
     LOCK(3, WEAK_IF_ZERO, "sandbox.enabled", "disable the sandbox")},
    {.name = "allowUnsandboxedCommands", .kind = KD_CUSTOM, .fn = settings__fn_tribool,
     .off = OFF(sandbox.allow_unsandboxed_commands),
     .size = SIZE(sandbox.allow_unsandboxed_commands), .merge = MERGE_SCALAR,
     LOCK(4, WEAK_IF_NONZERO, "sandbox.allowUnsandboxedCommands",
          "allow commands to run unsandboxed")},
    {.name = "excludedCommands", .kind = KD_STRLIST, .off = OFF(sandbox.excluded_commands),
     .merge = MERGE_LIST, .list = "sandbox.excludedCommands", .nonempty = 1,
     LOCK(6, WEAK_IF_NONEMPTY, "sandbox.excludedCommands", "exclude commands from the sandbox")},
};

/* "environment": what of the host environment reaches a sandboxed command.
 * allow is an allow list (replaced by a later layer), deny a deny list
 * (united across layers). */
static const struct key_def environment_keys[] = {
    CUSTOM("allow", settings__fn_env_names, environment.allow, MERGE_LIST, "environment.allow"),
    CUSTOM("deny", settings__fn_env_names, environment.deny, MERGE_LIST_UNION,
           "environment.deny"),
    BOOL("inherit", environment.inherit),
    CUSTOM("set", settings__fn_env_set, environment.set, MERGE_MAP_UNION, NULL),
    CUSTOM("pathAppend", settings__fn_path_append, environment.path_append, MERGE_LIST,
           "environment.pathAppend"),
};

static const struct key_def ripgrep_keys[] = {
    CHECK_ONLY("command", KD_CHECK_STRING),
    CHECK_ONLY("args", KD_CHECK_STRLIST),
    CHECK_ONLY("argv0", KD_CHECK_STRING),
};

static const struct key_def seccomp_keys[] = {
    CHECK_ONLY("applyPath", KD_CHECK_STRING),
    CHECK_ONLY("argv0", KD_CHECK_STRING),
};

static const struct key_def proxy_timeout_keys[] = {
    SECONDS("head", proxy.head_timeout_ms, 1, DAY_MS),
    SECONDS("handshake", proxy.handshake_timeout_ms, 1, DAY_MS),
    SECONDS("ask", proxy.ask_timeout_ms, 1, DAY_MS),
    SECONDS("dns", proxy.dns_timeout_ms, 1, DAY_MS),
    SECONDS("dial", proxy.dial_timeout_ms, 1, DAY_MS),
    SECONDS("idle", proxy.idle_timeout_ms, 0, DAY_MS),
    SECONDS("drain", proxy.drain_timeout_ms, 0, DAY_MS),
};

static const struct key_def proxy_limit_keys[] = {
    UINT("maxConnections", proxy.max_connections, 1, 1000000),
    UINT("maxPendingAsks", proxy.max_pending_asks, 1, 100000),
    UINT("maxHeadBytes", proxy.max_head_bytes, 1024, 1048576),
};

static const struct key_def proxy_keys[] = {
    /* username and password are replaced together */
    {.name = "auth", .kind = KD_CUSTOM, .fn = settings__fn_auth, .off = OFF(proxy.auth_username),
     .off2 = OFF(proxy.auth_password), .merge = MERGE_STRING},
    OBJECT("timeouts", proxy_timeout_keys),
    OBJECT("limits", proxy_limit_keys),
};

static const struct key_def top_keys[] = {
    OBJECT("network", network_keys),
    OBJECT("filesystem", filesystem_keys),
    CUSTOM("ignoreViolations", settings__fn_ignore, ignore_violations, MERGE_MAP, NULL),
    {.name = "enableWeakerNestedSandbox", .kind = KD_BOOL,
     .off = OFF(enable_weaker_nested_sandbox), .size = SIZE(enable_weaker_nested_sandbox),
     .merge = MERGE_SCALAR,
     LOCK(12, WEAK_IF_NONZERO, "enableWeakerNestedSandbox", "weaken the sandbox for nesting")},
    {.name = "allowNestedUserNamespaces", .kind = KD_BOOL,
     .off = OFF(allow_nested_user_namespaces), .size = SIZE(allow_nested_user_namespaces),
     .merge = MERGE_SCALAR,
     LOCK(11, WEAK_IF_NONZERO, "allowNestedUserNamespaces", "allow nested user namespaces")},
    UINT("mandatoryDenySearchDepth", mandatory_deny_search_depth, 1, 10),
    /* rt-4: bwrapPath, allowAllUnixSockets and the nesting keys weaken the
     * boundary as much as the others: another program in bwrap's place runs
     * the command with no sandbox at all; host Unix sockets (a container
     * runtime's) are a way out; nested namespaces turn Landlock off */
    {.name = "bwrapPath", .kind = KD_CUSTOM, .fn = settings__fn_bwrap, .off = OFF(bwrap_path),
     .merge = MERGE_STRING,
     LOCK(9, WEAK_ALWAYS, "bwrapPath", "choose the program that builds the sandbox (bwrapPath)")},
    {.name = "javaAgentJarPath", .kind = KD_CUSTOM, .fn = settings__fn_java_agent,
     .off = OFF(java_agent_jar_path), .merge = MERGE_STRING},
    OBJECT("git", git_keys),
    OBJECT("proxy", proxy_keys),
    OBJECT("sandbox", sandbox_keys),
    OBJECT("environment", environment_keys),
    {.name = "ripgrep", .kind = KD_OBJECT, .sub = ripgrep_keys, .nsub = COUNT(ripgrep_keys),
     .note_when = NOTE_ALWAYS,
     .note = "not used by sluice, ignored (sluice walks directories natively)"},
    {.name = "seccomp", .kind = KD_OBJECT, .sub = seccomp_keys, .nsub = COUNT(seccomp_keys),
     .note_when = NOTE_ALWAYS,
     .note = "not used by sluice, ignored (sluice applies its own seccomp filter)"},
    {.name = "socatPath", .kind = KD_CHECK_STRING, .note_when = NOTE_ALWAYS,
     .note = "not used by sluice, ignored (sluice does not use socat)"},
    {.name = "enableWeakerNetworkIsolation", .kind = KD_CHECK_BOOL, .note_when = NOTE_IF_SET,
     .note = NOTE_LINUX},
    {.name = "allowAppleEvents", .kind = KD_CHECK_BOOL, .note_when = NOTE_IF_SET,
     .note = NOTE_LINUX},
    {.name = "allowPty", .kind = KD_CHECK_BOOL, .note_when = NOTE_IF_SET, .note = NOTE_LINUX},
    {.name = "windows", .kind = KD_CHECK_OBJECT, .note_when = NOTE_ALWAYS, .note = NOTE_LINUX},
    {.name = "credentials", .kind = KD_OBJECT, .sub = credentials_keys,
     .nsub = COUNT(credentials_keys), .fn = settings__fn_credentials,
     .off = OFF(credentials.given), .size = SIZE(credentials.given), .merge = MERGE_SCALAR},
};
/* clang-format on */

/* ------------------------------------------------------------------------ */
/* Walking the table                                                         */

static int walk_rows(const struct key_def *defs, size_t n, char *path, size_t plen, size_t cap,
                     settings__row_fn fn, void *arg)
{
    for (size_t i = 0; i < n; i++) {
        const struct key_def *d = &defs[i];
        int w = snprintf(path + plen, cap - plen, "%s%s", plen > 0 ? "." : "", d->name);
        int rc;

        if (w < 0 || plen + (size_t)w >= cap)
            return -ENAMETOOLONG;
        rc = fn(d, path, arg);
        if (rc == 0 && d->kind == KD_OBJECT)
            rc = walk_rows(d->sub, d->nsub, path, plen + (size_t)w, cap, fn, arg);
        path[plen] = '\0';
        if (rc != 0)
            return rc;
    }
    return 0;
}

const struct key_def *settings__top_keys(size_t *n)
{
    *n = COUNT(top_keys);
    return top_keys;
}

int settings__key_walk(settings__row_fn fn, void *arg)
{
    char path[128] = "";

    return walk_rows(top_keys, COUNT(top_keys), path, 0, sizeof(path), fn, arg);
}

struct find {
    size_t i;         /* settings_key_path: rows still to skip */
    const char *path; /* settings__key_at: the path wanted */
    unsigned order;   /* settings__lock_row: the boundary key wanted */
    const struct key_def *row;
    char *buf;
    size_t len;
};

static int find_nth(const struct key_def *d, const char *path, void *arg)
{
    struct find *f = arg;

    if (f->i-- > 0)
        return 0;
    snprintf(f->buf, f->len, "%s", path);
    f->row = d;
    return 1;
}

static int find_path(const struct key_def *d, const char *path, void *arg)
{
    struct find *f = arg;

    if (strcmp(path, f->path) != 0)
        return 0;
    f->row = d;
    return 1;
}

static int find_lock(const struct key_def *d, const char *path, void *arg)
{
    struct find *f = arg;

    (void)path;
    if (d->lock.order != f->order)
        return 0;
    f->row = d;
    return 1;
}

const char *settings_key_path(size_t i, char *buf, size_t len)
{
    struct find f = {.i = i, .buf = buf, .len = len};

    if (len == 0 || settings__key_walk(find_nth, &f) != 1)
        return NULL;
    return buf;
}

const struct key_def *settings__key_at(const char *path)
{
    struct find f = {.path = path};

    return settings__key_walk(find_path, &f) == 1 ? f.row : NULL;
}

const struct key_def *settings__lock_row(size_t i)
{
    struct find f = {.order = (unsigned)i + 1};

    if (i >= 1000 || settings__key_walk(find_lock, &f) != 1)
        return NULL;
    return f.row;
}

const char *settings_boundary_key(size_t i, const char **what)
{
    const struct key_def *d = settings__lock_row(i);

    if (d == NULL)
        return NULL;
    if (what != NULL)
        *what = d->lock.what;
    return d->lock.path;
}
