/* sandbox/explain.c - `sluice explain`: the restrictions `sluice run`
 * applies with these settings, in words a person (or an agent's system
 * prompt) can use, or as JSON: network, filesystem, Unix sockets and other
 * syscalls, environment, and the bypass policy (reference 001 §1-6).
 * cli/explain.c parses the options and loads the settings. */
#include "sandbox/explain.h"

#include "policy/policy.h"
#include "sandbox/sandbox.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_t *list_json(const struct settings_list *l)
{
    json_t *a = json_array();

    for (size_t i = 0; a != NULL && i < l->n; i++)
        json_array_append_new(a, json_string(l->items[i].value));
    return a;
}

static void list_text(FILE *f, const char *label, const struct settings_list *l, const char *none)
{
    fprintf(f, "  %s: ", label);
    if (l->n == 0) {
        fprintf(f, "%s\n", none);
        return;
    }
    for (size_t i = 0; i < l->n; i++)
        fprintf(f, "%s%s", i > 0 ? ", " : "", l->items[i].value);
    fputc('\n', f);
}

/* network.requestRules as JSON: [{host, action, methods, paths}] (an
 * empty list: any method / any path). */
static json_t *rules_json(const struct settings *s)
{
    json_t *a = json_array();

    for (size_t i = 0; a != NULL && i < s->network.request_rules.n; i++) {
        struct settings_request_rule r;
        json_t *ms = json_array(), *ps = json_array();
        const char *m;

        if (settings_request_rule_split(s->network.request_rules.items[i].value, &r) < 0) {
            json_decref(ms);
            json_decref(ps);
            continue;
        }
        for (m = r.methods; m < r.methods + r.methods_len;) {
            size_t left = (size_t)(r.methods + r.methods_len - m);
            const char *sp = memchr(m, ' ', left);
            size_t n = sp != NULL ? (size_t)(sp - m) : left;
            json_array_append_new(ms, json_stringn(m, n));
            m += n + 1;
        }
        for (size_t k = 0; k < r.npaths; k++)
            json_array_append_new(ps, json_stringn(r.paths[k], r.path_lens[k]));
        json_array_append_new(a, json_pack("{s:s%, s:s, s:o, s:o}", "host", r.host, r.host_len,
                                           "action", r.deny ? "deny" : "allow", "methods", ms,
                                           "paths", ps));
    }
    return a;
}

/* network.requestRules in words, one line a rule. */
static void rules_text(FILE *f, const struct settings *s)
{
    if (s->network.request_rules.n == 0)
        return;
    fprintf(f, "  - Request rules (network.requestRules): on the hosts they name, a request "
               "(plain http://, or https:// inside a TLS tunnel sluice terminates: in sluice run "
               "the rules turn termination on for their hosts) is allowed only when an allow "
               "rule matches its method and path and no deny rule does (paths compared after "
               "normalisation; ambiguous paths refused). Connections to those hosts whose "
               "requests sluice cannot see (SOCKS, direct, a tunnel not terminated) are "
               "refused.\n");
    for (size_t i = 0; i < s->network.request_rules.n; i++) {
        struct settings_request_rule r;
        if (settings_request_rule_split(s->network.request_rules.items[i].value, &r) < 0)
            continue;
        fprintf(f, "    - %s ", r.deny ? "deny" : "allow");
        if (r.methods_len == 0)
            fprintf(f, "any method");
        for (size_t k = 0; k < r.methods_len; k++) {
            if (r.methods[k] == ' ')
                fputs(", ", f);
            else
                fputc(r.methods[k], f);
        }
        fprintf(f, " on %.*s to ", (int)r.host_len, r.host);
        if (r.npaths == 0)
            fprintf(f, "any path");
        for (size_t k = 0; k < r.npaths; k++)
            fprintf(f, "%s%.*s", k > 0 ? ", " : "", (int)r.path_lens[k], r.paths[k]);
        fputc('\n', f);
    }
}

/* The managed file: which file, the keys it fixes, and the boundary keys
 * only it may weaken (the reference runtime's areSandboxSettingsLockedByPolicy). */
static json_t *managed_json(const struct settings *s)
{
    json_t *b = json_array(), *keys = list_json(&s->managed_keys);
    const char *k;

    /* without a managed file nothing is locked: an empty list, and b freed */
    for (size_t i = 0; b != NULL && s->managed_file != NULL &&
                       (k = settings_boundary_key(i, NULL)) != NULL;
         i++)
        json_array_append_new(b, json_string(k));
    return json_pack("{s:s?, s:b, s:o, s:o}", "file", s->managed_file, "locked",
                     s->managed_file != NULL, "keys", keys, "locked_keys", b);
}

static void managed_text(FILE *f, const struct settings *s)
{
    const char *k, *what;

    fprintf(f, "\nManaged settings\n");
    if (s->managed_file == NULL) {
        fprintf(f, "  - None: no managed file (/etc/sluice/managed.json); the settings above "
                   "are the user's and the project's.\n");
        return;
    }
    fprintf(f, "  - %s is applied last and locks the boundary: only it may ", s->managed_file);
    for (size_t i = 0; (k = settings_boundary_key(i, &what)) != NULL; i++)
        fprintf(f, "%s%s (%s)", i > 0 ? ", " : "", what, k);
    fprintf(f, "; a user or project file that tries is refused, and commands run unsandboxed "
               "only when it allows that.\n");
    list_text(f, "- Keys it fixes", &s->managed_keys, "none");
}

static int bypass_allowed(const struct settings *s)
{
    return s->sandbox.allow_unsandboxed_commands != SETTINGS_FALSE;
}

/* The seccomp filter these settings give `sluice run`. */
static struct sb_seccomp_opts seccomp_opts(const struct settings *s)
{
    struct sb_seccomp_opts so = {.allow_unix_sockets = s->network.allow_all_unix_sockets,
                                 .allow_local_binding = s->network.allow_local_binding,
                                 .allow_user_namespaces = s->allow_nested_user_namespaces,
                                 .transparent = s->network.transparent};
    return so;
}

static int print_json(const struct settings *s)
{
    struct sb_seccomp_opts so = seccomp_opts(s);
    const char *const *sc = sb_seccomp_describe(&so);
    json_t *o, *sys = json_array(), *prot = json_array();
    char *text;

    for (size_t i = 0; sc[i] != NULL; i++)
        json_array_append_new(sys, json_string(sc[i]));
    const char *const *protected_names = sb_protect_names();

    for (size_t i = 0; protected_names[i] != NULL && !s->filesystem.disabled; i++)
        if (!(s->filesystem.allow_git_config && strcmp(protected_names[i], ".git/config") == 0))
            json_array_append_new(prot, json_string(protected_names[i]));
    o = json_pack(
        "{s:b, s:{s:s, s:s, s:o, s:o, s:s, s:b, s:s, s:b}, s:{s:b, s:b, s:o, s:o, s:o, s:o, s:o, s:i, s:s},"
        " s:{s:b, s:o}, s:{s:b, s:o, s:o}, s:{s:b, s:b, s:o}}",
        "sandboxed", s->sandbox.enabled != SETTINGS_FALSE,
        "network",
        "http_proxy", "http://127.0.0.1:3128",
        "socks_proxy", "socks5h://127.0.0.1:1080",
        "allowed", list_json(&s->network.allowed_domains),
        "denied", list_json(&s->network.denied_domains),
        "unmatched", s->network.allow_all_domains ? "allowed" : "denied (or asked with --ask)",
        "deny_private_addresses", s->network.deny_private_addresses == SETTINGS_TRUE,
        "mode", s->network.mode == SETTINGS_MODE_REPORT ? "report" : "enforce",
        "direct_connections", !s->network.isolate,
        "filesystem",
        "restricted", !s->filesystem.disabled,
        "weaker_nested_proc", s->enable_weaker_nested_sandbox != 0,
        "deny_read", list_json(&s->filesystem.deny_read),
        "allow_read", list_json(&s->filesystem.allow_read),
        "allow_write", s->filesystem.disabled ? json_pack("[s]", "/") : list_json(&s->filesystem.allow_write),
        "deny_write", list_json(&s->filesystem.deny_write),
        "protected", prot,
        "protected_search_depth", (int)s->mandatory_deny_search_depth,
        "tmpdir", "/tmp (private, removed after the run)",
        "unix_sockets", "allowed", s->network.allow_all_unix_sockets != 0,
        "syscalls", sys,
        "environment", "inherit", s->environment.inherit != 0,
        "allow", list_json(&s->environment.allow),
        "deny", list_json(&s->environment.deny),
        "bypass", "allow_unsandboxed_commands", bypass_allowed(s),
        "dangerously_disable_sandbox_honoured", bypass_allowed(s),
        "excluded_commands", list_json(&s->sandbox.excluded_commands));
    if (o == NULL || json_object_set_new(o, "managed", managed_json(s)) < 0 ||
        json_object_set_new(json_object_get(o, "network"), "request_rules", rules_json(s)) < 0) {
        json_decref(o);
        fprintf(stderr, "sluice: explain: out of memory\n");
        return 1;
    }
    text = json_dumps(o, JSON_INDENT(2) | JSON_ENSURE_ASCII);
    json_decref(o);
    if (text == NULL)
        return 1;
    printf("%s\n", text);
    free(text);
    return 0;
}

/* "a, b, c": the values of l. */
static void join_text(FILE *f, const struct settings_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        fprintf(f, "%s%s", i > 0 ? ", " : "", l->items[i].value);
}

/* The parent proxy allowed connections leave through, if any. */
static void parent_text(FILE *f, const struct settings *s)
{
    struct policy *p = NULL;
    struct settings_error e;
    const struct policy_parent *pp;
    struct policy_host any;
    const char *why;

    if (policy_compile(s, &p, &e) != 0)
        return;
    pp = policy_parent(p);
    if (pp != NULL && policy_host_normalize("example.com", 11, &any, &why) == 0 &&
        policy_parent_pick(pp, &any, 0) != NULL)
        fprintf(f, "  - Allowed connections leave through the parent proxy %s "
                   "(%s), except loopback%s.\n",
                policy_parent_pick(pp, &any, 0)->shown,
                s->network.parent_proxy.set ? "network.parentProxy"
                                            : "HTTPS_PROXY of sluice's environment",
                !s->network.parent_proxy.set ? " and NO_PROXY entries"
                : s->network.parent_proxy.no_proxy != NULL
                    ? " and network.parentProxy.noProxy entries"
                    : "");
    policy_free(p);
}

static void network_text(FILE *f, const struct settings *s)
{
    fprintf(f, "Network\n");
    if (!s->network.isolate) {
        fprintf(f, "  - THE NETWORK IS OPEN (network.isolate is false): commands use the "
                   "host's network directly; no allow or deny list, address guard or log "
                   "applies to them.\n");
        return;
    }
    fprintf(f, "  - No direct network access: the only way out is the HTTP proxy at "
               "http://127.0.0.1:3128 and the SOCKS5 proxy at socks5h://127.0.0.1:1080 "
               "(HTTP_PROXY, HTTPS_PROXY, ALL_PROXY and friends are set).\n");
    list_text(f, "- Allowed destinations", &s->network.allowed_domains, "none");
    list_text(f, "- Denied destinations (checked first)", &s->network.denied_domains, "none");
    fprintf(f, "  - Anything else: %s.\n",
            s->network.allow_all_domains ? "allowed (network.allowAllDomains)"
                                         : "denied (or asked, when run with --ask)");
    /* issue 26 (run/ports.c) */
    if (s->network.host_ports.n > 0)
        list_text(f, "- Host loopback ports reachable inside at 127.0.0.1:PORT (network.hostPorts)",
                  &s->network.host_ports, "none");
    if (s->network.publish.n > 0)
        list_text(f, "- Sandbox ports published to the host, [HOST_ADDR:]HOST_PORT:SANDBOX_PORT "
                     "(network.publish; --publish adds more)",
                  &s->network.publish, "none");
    if (s->network.deny_private_addresses == SETTINGS_TRUE)
        fprintf(f, "  - Names that resolve to private, loopback or link-local addresses are "
                   "refused.\n");
    if (s->network.mode == SETTINGS_MODE_REPORT)
        fprintf(f, "  - REPORT MODE: the rules' denials are only logged (would_deny); the "
                   "resolved-address guard (loopback, link-local, metadata, private when "
                   "refused, IP rules) and the managed file's deny rules still block.\n");
    if (s->network.refuse_opaque_tunnels)
        fprintf(f, "  - Tunnels are refused (network.refuseOpaqueTunnels): no HTTPS through the "
                   "proxy (CONNECT gets 403) and no SOCKS; only plain http:// requests.\n");
    if (s->network.require_host_match)
        fprintf(f, "  - A plain HTTP request whose Host header names another host is refused "
                   "(421).\n");
    rules_text(f, s);
    parent_text(f, s);
}

/* filesystem.disabled: what is left. */
static void open_filesystem_text(FILE *f, const struct settings *s)
{
    fprintf(f, "  - NO FILESYSTEM RESTRICTIONS (filesystem.disabled): the command can read "
               "and write everything the user running it can on the host");
    if (s->filesystem.deny_read.n > 0) {
        fprintf(f, ", except these paths, which are hidden: ");
        join_text(f, &s->filesystem.deny_read);
    }
    fprintf(f, ". No file is protected: shell start-up files, git hooks and settings can "
               "be changed.\n");
    if (s->filesystem.allow_read.n > 0)
        list_text(f, "- Visible again inside those", &s->filesystem.allow_read, "none");
    fprintf(f, "  - /tmp is private to the run and removed after it; /dev%s the "
               "sandbox's own, /proc/sys is read-only.\n",
            s->enable_weaker_nested_sandbox ? " is" : " and /proc are");
}

static void protected_text(FILE *f, const struct settings *s)
{
    const char *const *protected_names = sb_protect_names();

    fprintf(f, "  - Protected: at the top of each writable directory these cannot be "
               "created, changed, renamed or replaced, and where they already exist up to "
               "%u levels below it they are read-only: ",
            s->mandatory_deny_search_depth);
    for (size_t i = 0, first = 1; protected_names[i] != NULL; i++) {
        if (s->filesystem.allow_git_config && strcmp(protected_names[i], ".git/config") == 0)
            continue;
        fprintf(f, "%s%s", first ? "" : ", ", protected_names[i]);
        first = 0;
    }
    fprintf(f, ". A .git that does not exist at the top of a writable directory cannot be "
               "created there (no `git init`). Existing ones are matched in any case (.BASHRC, "
               ".GIT/hooks).\n");
}

static void filesystem_text(FILE *f, const struct settings *s)
{
    fprintf(f, "\nFilesystem\n");
    if (s->filesystem.disabled) {
        open_filesystem_text(f, s);
    } else {
        fprintf(f, "  - Read: everything, except denyRead paths");
        if (s->filesystem.deny_read.n > 0) {
            fprintf(f, " (");
            join_text(f, &s->filesystem.deny_read);
            fprintf(f, "; a hidden directory appears empty and what the command writes there "
                       "is discarded after the run, a hidden file cannot be opened: Permission "
                       "denied)");
        }
        fprintf(f, ".\n");
        if (s->filesystem.allow_read.n > 0)
            list_text(f, "- Re-allowed for reading inside those", &s->filesystem.allow_read,
                      "none");
        list_text(f, "- Write (everything else is read-only)", &s->filesystem.allow_write,
                  "the working directory");
        fprintf(f, "  - Also writable: /tmp and $TMPDIR (private to the run, removed after "
                   "it).\n");
        if (s->filesystem.deny_write.n > 0)
            list_text(f, "- Never writable", &s->filesystem.deny_write, "none");
        protected_text(f, s);
    }
    if (s->enable_weaker_nested_sandbox)
        fprintf(f, "  - WEAKER NESTED MODE (enableWeakerNestedSandbox): /proc is the host's, "
                   "not the sandbox's own: every process on the host and its command line are "
                   "visible, and the environment and open files of processes of the same user "
                   "may be readable.\n");
}

static void environment_text(FILE *f, const struct settings *s)
{
    fprintf(f, "\nEnvironment\n");
    if (s->environment.inherit)
        fprintf(f, "  - The host environment is passed, except SSH_AUTH_SOCK and secrets "
                   "(*_TOKEN, *_SECRET, *_PASSWORD, *_KEY, AWS_*, ...)");
    else
        fprintf(f, "  - Only environment.allow variables are passed from the host");
    if (s->environment.deny.n > 0) {
        fprintf(f, "; also removed: ");
        join_text(f, &s->environment.deny);
    }
    fprintf(f, ".\n  - SANDBOX_RUNTIME=1 is set; git over ssh goes through `sluice connect`.\n");
}

static void bypass_text(FILE *f, const struct settings *s)
{
    fprintf(f, "\nRunning without the sandbox\n");
    if (bypass_allowed(s))
        fprintf(f, "  - Allowed on request: `sluice run --dangerously-disable-sandbox` runs a "
                   "command unsandboxed (sandbox.allowUnsandboxedCommands). Use it only when a "
                   "command fails because of these restrictions and the user agrees.\n");
    else
        fprintf(f, "  - Not allowed: every command must run sandboxed; "
                   "--dangerously-disable-sandbox is refused by policy. If a command fails "
                   "because of the sandbox, ask the user to adjust the settings.\n");
    if (s->sandbox.excluded_commands.n > 0)
        list_text(f, "- Commands that always run unsandboxed (sandbox.excludedCommands)",
                  &s->sandbox.excluded_commands, "none");
}

static void print_text(const struct settings *s)
{
    struct sb_seccomp_opts so = seccomp_opts(s);
    const char *const *sc = sb_seccomp_describe(&so);
    FILE *f = stdout;

    if (s->sandbox.enabled == SETTINGS_FALSE)
        fprintf(f, "The sandbox is OFF (sandbox.enabled is false): commands run with no "
                   "restrictions.\n\n");
    fprintf(f, "Commands run in a sandbox with these restrictions:\n\n");
    network_text(f, s);
    filesystem_text(f, s);
    fprintf(f, "\nUnix sockets and syscalls\n");
    for (size_t i = 0; sc[i] != NULL; i++)
        fprintf(f, "  - %s\n", sc[i]);
    environment_text(f, s);
    bypass_text(f, s);
    managed_text(f, s);
}

int sb_explain(const struct settings *s, int json)
{
    if (json)
        return print_json(s);
    print_text(s);
    return 0;
}
