/* settings/merge.c - merging one checked layer into the settings, by moves
 * that cannot fail once the memory is reserved.
 */
#include "settings/settings-int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Merging a layer                                                           */

static int reserve_union(struct settings_list *dst, const struct settings_list *src)
{
    return settings__list_reserve(dst, dst->n + src->n);
}

/* Moves src's items to the end of dst (capacity already reserved). */
static void move_union(struct settings_list *dst, struct settings_list *src)
{
    if (src->n > 0)
        memcpy(dst->items + dst->n, src->items, src->n * sizeof(*src->items));
    dst->n += src->n;
    src->n = 0;
}

static void move_replace(struct settings_list *dst, struct settings_list *src)
{
    settings__list_free(dst);
    *dst = *src;
    memset(src, 0, sizeof(*src));
}

static size_t hash_str(const char *s)
{
    size_t h = 1469598103934665603u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211u;
    return h;
}

/* Merges the layer L into s. Every allocation happens before the first
 * change to s, so a failure leaves s as it was. */
int settings__merge(struct settings *s, struct settings *L, unsigned set, unsigned pset)
{
    struct settings_map *sr = &s->network.denied_domain_reasons;
    struct settings_map *lr = &L->network.denied_domain_reasons;
    size_t *table = NULL, tsize = 0;
    char **files;

    if (reserve_union(&s->network.denied_domains, &L->network.denied_domains) < 0 ||
        reserve_union(&s->network.denied_domains_files, &L->network.denied_domains_files) < 0 ||
        reserve_union(&s->network.denied_resolved_addresses,
                      &L->network.denied_resolved_addresses) < 0 ||
        reserve_union(&s->filesystem.deny_read, &L->filesystem.deny_read) < 0 ||
        reserve_union(&s->filesystem.deny_write, &L->filesystem.deny_write) < 0 ||
        reserve_union(&s->environment.deny, &L->environment.deny) < 0 ||
        reserve_union(&s->notices, &L->notices) < 0 ||
        settings__map_reserve(sr, sr->n + lr->n) < 0 ||
        reserve_union(&s->managed_keys, &L->managed_keys) < 0 ||
        reserve_union(&s->weakened, &L->weakened) < 0 ||
        settings__map_reserve(&s->environment.set, s->environment.set.n + L->environment.set.n) < 0)
        return -ENOMEM;
    if (lr->n > 0) {
        tsize = 16;
        while (tsize < 2 * (sr->n + lr->n))
            tsize *= 2;
        table = calloc(tsize, sizeof(*table));
        if (table == NULL)
            return -ENOMEM;
    }
    files = realloc(s->files, (s->nfiles + L->nfiles) * sizeof(*files) + 1);
    if (files == NULL) {
        free(table);
        return -ENOMEM;
    }
    s->files = files;

    /* From here on nothing fails. */
    if (set & LF_ALLOWED_DOMAINS) {
        move_replace(&s->network.allowed_domains, &L->network.allowed_domains);
        move_replace(&s->network.allowed_domains_files, &L->network.allowed_domains_files);
    }
    move_union(&s->network.denied_domains, &L->network.denied_domains);
    move_union(&s->network.denied_domains_files, &L->network.denied_domains_files);
    move_union(&s->network.denied_resolved_addresses, &L->network.denied_resolved_addresses);
    move_union(&s->filesystem.deny_read, &L->filesystem.deny_read);
    move_union(&s->filesystem.deny_write, &L->filesystem.deny_write);
    move_union(&s->environment.deny, &L->environment.deny);
    move_union(&s->notices, &L->notices);
    /* a later layer that sets a boundary key decides it: an earlier weaker
     * value it replaces is no longer there to refuse */
    {
        size_t k = 0;
        for (size_t i = 0; i < s->weakened.n; i++) {
            if (set & settings__boundary_flag(s->weakened.items[i].index))
                free(s->weakened.items[i].value);
            else
                s->weakened.items[k++] = s->weakened.items[i];
        }
        s->weakened.n = k;
    }
    move_union(&s->weakened, &L->weakened);
    move_union(&s->managed_keys, &L->managed_keys);
    if (L->managed_file != NULL)
        s->managed_file = L->managed_file;
    if (set & LF_STRICT)
        s->network.strict_allowlist = L->network.strict_allowlist;
    if (set & LF_ALLOW_ALL)
        s->network.allow_all_domains = L->network.allow_all_domains;
    if (set & LF_UNIX_SOCKETS)
        move_replace(&s->network.allow_unix_sockets, &L->network.allow_unix_sockets);
    if (set & LF_ALL_UNIX)
        s->network.allow_all_unix_sockets = L->network.allow_all_unix_sockets;
    if (set & LF_TRANSPARENT)
        s->network.transparent = L->network.transparent;
    if (set & LF_LOCAL_BINDING)
        s->network.allow_local_binding = L->network.allow_local_binding;
    if (set & LF_HTTP_PORT)
        s->network.http_proxy_port = L->network.http_proxy_port;
    if (set & LF_SOCKS_PORT)
        s->network.socks_proxy_port = L->network.socks_proxy_port;
    if (set & LF_DENY_PRIVATE)
        s->network.deny_private_addresses = L->network.deny_private_addresses;
    if (set & LF_DNS)
        move_replace(&s->network.dns_servers, &L->network.dns_servers);
    if (set & LF_MODE)
        s->network.mode = L->network.mode;
    if (set & LF_ALLOW_READ)
        move_replace(&s->filesystem.allow_read, &L->filesystem.allow_read);
    if (set & LF_ALLOW_WRITE) {
        move_replace(&s->filesystem.allow_write, &L->filesystem.allow_write);
        move_replace(&s->filesystem.create_write, &L->filesystem.create_write);
    }
    if (set & LF_GIT_CONFIG)
        s->filesystem.allow_git_config = L->filesystem.allow_git_config;
    if (set & LF_FS_DISABLED)
        s->filesystem.disabled = L->filesystem.disabled;
    if (set & LF_IGNORE) {
        settings__map_free(&s->ignore_violations);
        s->ignore_violations = L->ignore_violations;
        memset(&L->ignore_violations, 0, sizeof(L->ignore_violations));
    }
    if (set & LF_NESTED)
        s->enable_weaker_nested_sandbox = L->enable_weaker_nested_sandbox;
    if (set & LF_NESTED_USERNS)
        s->allow_nested_user_namespaces = L->allow_nested_user_namespaces;
    if (set & LF_DEPTH)
        s->mandatory_deny_search_depth = L->mandatory_deny_search_depth;
    if (set & LF_BWRAP) {
        free(s->bwrap_path);
        s->bwrap_path = L->bwrap_path;
        L->bwrap_path = NULL;
    }
    if (set & LF_ISOLATE)
        s->network.isolate = L->network.isolate;
    if (set & LF_HTTP_OPTS) {
        /* hardening: a later layer adds to it, never turns it off */
        if (L->network.strip_response_headers.n > 0)
            move_replace(&s->network.strip_response_headers, &L->network.strip_response_headers);
        s->network.refuse_opaque_tunnels |= L->network.refuse_opaque_tunnels;
        s->network.require_host_match |= L->network.require_host_match;
        if (L->network.ambiguous_request_target != SETTINGS_AMBIGUOUS_AS_SPELLED)
            s->network.ambiguous_request_target = L->network.ambiguous_request_target;
    }
    if (set & LF_PARENT) {
        free(s->network.parent_proxy.http);
        free(s->network.parent_proxy.https);
        free(s->network.parent_proxy.no_proxy);
        s->network.parent_proxy = L->network.parent_proxy;
        memset(&L->network.parent_proxy, 0, sizeof(L->network.parent_proxy));
    }
    if (set & LF_JAVA_AGENT) {
        free(s->java_agent_jar_path);
        s->java_agent_jar_path = L->java_agent_jar_path;
        L->java_agent_jar_path = NULL;
    }
    if (set & LF_SAFE_DIRS)
        move_replace(&s->git_safe_directories, &L->git_safe_directories);
    if (set & LF_SANDBOX_ENABLED)
        s->sandbox.enabled = L->sandbox.enabled;
    if (set & LF_UNSANDBOXED)
        s->sandbox.allow_unsandboxed_commands = L->sandbox.allow_unsandboxed_commands;
    if (set & LF_EXCLUDED)
        move_replace(&s->sandbox.excluded_commands, &L->sandbox.excluded_commands);
    if (pset & PF_LIM_PROCS)
        s->sandbox.limits.processes = L->sandbox.limits.processes;
    if (pset & PF_LIM_MEM)
        s->sandbox.limits.memory_mib = L->sandbox.limits.memory_mib;
    if (pset & PF_LIM_FILES)
        s->sandbox.limits.open_files = L->sandbox.limits.open_files;
    if (set & LF_ENV_ALLOW)
        move_replace(&s->environment.allow, &L->environment.allow);
    if (set & LF_ENV_INHERIT)
        s->environment.inherit = L->environment.inherit;
    if (set & LF_ENV_PATH)
        move_replace(&s->environment.path_append, &L->environment.path_append);
    /* environment.set: united, the later layer wins per name */
    for (size_t i = 0; i < L->environment.set.n; i++) {
        struct settings_map *es = &s->environment.set;
        struct settings_pair *p = &L->environment.set.pairs[i];
        size_t j = 0;

        while (j < es->n && strcmp(es->pairs[j].key, p->key) != 0)
            j++;
        if (j < es->n) {
            free(es->pairs[j].value);
            es->pairs[j].value = p->value;
            free(p->key);
        } else {
            es->pairs[es->n++] = *p;
        }
        memset(p, 0, sizeof(*p));
    }
    L->environment.set.n = 0;
    if (pset & PF_AUTH) {
        free(s->proxy.auth_username);
        free(s->proxy.auth_password);
        s->proxy.auth_username = L->proxy.auth_username;
        s->proxy.auth_password = L->proxy.auth_password;
        L->proxy.auth_username = L->proxy.auth_password = NULL;
    }
#define TAKE(flag, f)                                                                              \
    if (pset & (flag))                                                                             \
    s->proxy.f = L->proxy.f
    TAKE(PF_HEAD, head_timeout_ms);
    TAKE(PF_HANDSHAKE, handshake_timeout_ms);
    TAKE(PF_ASK, ask_timeout_ms);
    TAKE(PF_DNS, dns_timeout_ms);
    TAKE(PF_DIAL, dial_timeout_ms);
    TAKE(PF_IDLE, idle_timeout_ms);
    TAKE(PF_DRAIN, drain_timeout_ms);
    TAKE(PF_MAX_CONNS, max_connections);
    TAKE(PF_MAX_ASKS, max_pending_asks);
    TAKE(PF_MAX_HEAD, max_head_bytes);
#undef TAKE

    /* deniedDomainReasons: united, the later layer wins per domain. */
    if (table != NULL) {
        size_t mask = tsize - 1;
        for (size_t i = 0; i < sr->n; i++) {
            size_t h = hash_str(sr->pairs[i].key) & mask;
            while (table[h] != 0)
                h = (h + 1) & mask;
            table[h] = i + 1;
        }
        for (size_t i = 0; i < lr->n; i++) {
            struct settings_pair *p = &lr->pairs[i];
            size_t h = hash_str(p->key) & mask;
            while (table[h] != 0 && strcmp(sr->pairs[table[h] - 1].key, p->key) != 0)
                h = (h + 1) & mask;
            if (table[h] != 0) {
                struct settings_pair *q = &sr->pairs[table[h] - 1];
                free(q->value);
                q->value = p->value;
                free(p->key);
            } else {
                sr->pairs[sr->n] = *p;
                table[h] = ++sr->n;
            }
            memset(p, 0, sizeof(*p));
        }
        lr->n = 0;
        free(table);
    }

    /* The layer's file names now belong to s. */
    memcpy(s->files + s->nfiles, L->files, L->nfiles * sizeof(*files));
    s->nfiles += L->nfiles;
    L->nfiles = 0;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Entry points                                                              */
