/* settings/store.c - lists, maps and interned file names of struct
 * settings; defaults (settings_init) and settings_free; reading a file.
 */
#include "settings/settings-int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* Lists, maps, files                                                        */

int settings__list_reserve(struct settings_list *l, size_t want)
{
    struct settings_item *p;
    size_t cap;

    if (want <= l->cap)
        return 0;
    cap = l->cap ? l->cap : 8;
    while (cap < want) {
        if (cap > SIZE_MAX / 2 / sizeof(*p))
            return -ENOMEM;
        cap *= 2;
    }
    p = realloc(l->items, cap * sizeof(*p));
    if (p == NULL)
        return -ENOMEM;
    l->items = p;
    l->cap = cap;
    return 0;
}

/* Appends an item taking ownership of value (freed on failure). */
int settings__list_push(struct settings_list *l, char *value, const char *file, unsigned line,
                        unsigned col, const char *list, size_t index)
{
    struct settings_item *it;

    if (l->n == SIZE_MAX || settings__list_reserve(l, l->n + 1) < 0) {
        free(value);
        return -ENOMEM;
    }
    it = &l->items[l->n++];
    it->value = value;
    it->file = file;
    it->line = line;
    it->col = col;
    it->list = list;
    it->index = index;
    it->literal = 0;
    it->managed = 0;
    return 0;
}

void settings__list_free(struct settings_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->items[i].value);
    free(l->items);
    memset(l, 0, sizeof(*l));
}

int settings__map_reserve(struct settings_map *m, size_t want)
{
    struct settings_pair *p;
    size_t cap;

    if (want <= m->cap)
        return 0;
    cap = m->cap ? m->cap : 8;
    while (cap < want) {
        if (cap > SIZE_MAX / 2 / sizeof(*p))
            return -ENOMEM;
        cap *= 2;
    }
    p = realloc(m->pairs, cap * sizeof(*p));
    if (p == NULL)
        return -ENOMEM;
    m->pairs = p;
    m->cap = cap;
    return 0;
}

void settings__pair_free(struct settings_pair *p)
{
    free(p->key);
    free(p->value);
    settings__list_free(&p->list);
}

void settings__map_free(struct settings_map *m)
{
    for (size_t i = 0; i < m->n; i++)
        settings__pair_free(&m->pairs[i]);
    free(m->pairs);
    memset(m, 0, sizeof(*m));
}

/* Appends the pair key -> value (copies). 0 or -ENOMEM. */
int settings__map_put(struct settings_map *m, const char *key, const char *value)
{
    struct settings_pair *p;

    if (settings__map_reserve(m, m->n + 1) < 0)
        return -ENOMEM;
    p = &m->pairs[m->n];
    memset(p, 0, sizeof(*p));
    p->key = strdup(key);
    p->value = strdup(value);
    if (p->key == NULL || p->value == NULL) {
        settings__pair_free(p);
        return -ENOMEM;
    }
    m->n++;
    return 0;
}

/* Returns the interned copy of name in s->files. */
const char *settings__intern(struct settings *s, const char *name)
{
    char **files;
    char *copy;

    for (size_t i = 0; i < s->nfiles; i++)
        if (strcmp(s->files[i], name) == 0)
            return s->files[i];
    copy = strdup(name);
    if (copy == NULL)
        return NULL;
    files = realloc(s->files, (s->nfiles + 1) * sizeof(*files));
    if (files == NULL) {
        free(copy);
        return NULL;
    }
    s->files = files;
    s->files[s->nfiles++] = copy;
    return copy;
}

void settings_init(struct settings *s)
{
    memset(s, 0, sizeof(*s));
    s->network.mode = SETTINGS_MODE_ENFORCE;
    s->network.isolate = 1;
    s->network.deny_private_addresses = SETTINGS_UNSET;
    s->network.tls_terminate.max_tunnels = 256;
    s->network.tls_terminate.handshake_timeout_ms = 10000;
    s->mandatory_deny_search_depth = 3;
    s->sandbox.enabled = SETTINGS_UNSET;
    s->sandbox.allow_unsandboxed_commands = SETTINGS_UNSET;
    s->environment.inherit = 1;
    s->sandbox.limits.processes = SETTINGS_DEFAULT_PROCESSES;
    s->proxy.head_timeout_ms = 10000;
    s->proxy.handshake_timeout_ms = 10000;
    s->proxy.ask_timeout_ms = 30000;
    s->proxy.dns_timeout_ms = 5000;
    s->proxy.dial_timeout_ms = 10000;
    s->proxy.idle_timeout_ms = 15 * 60 * 1000;
    s->proxy.drain_timeout_ms = 10000;
    s->proxy.max_connections = 0; /* follow the machine: proxy_max_connections() */
    s->proxy.max_pending_asks = 256;
    s->proxy.max_head_bytes = 8192;
}

void settings_free(struct settings *s)
{
    if (s == NULL)
        return;
    settings__list_free(&s->network.allowed_domains);
    settings__list_free(&s->network.denied_domains);
    settings__map_free(&s->network.denied_domain_reasons);
    settings__list_free(&s->network.denied_resolved_addresses);
    settings__list_free(&s->network.allow_unix_sockets);
    settings__list_free(&s->network.dns_servers);
    settings__list_free(&s->network.publish);
    settings__list_free(&s->network.host_ports);
    settings__list_free(&s->network.allowed_domains_files);
    settings__list_free(&s->network.denied_domains_files);
    settings__list_free(&s->filesystem.deny_read);
    settings__list_free(&s->filesystem.allow_read);
    settings__list_free(&s->filesystem.allow_write);
    settings__list_free(&s->filesystem.deny_write);
    settings__list_free(&s->filesystem.create_write);
    settings__map_free(&s->ignore_violations);
    free(s->bwrap_path);
    free(s->java_agent_jar_path);
    free(s->network.tls_terminate.ca_cert_path);
    free(s->network.tls_terminate.ca_key_path);
    settings__list_free(&s->network.tls_terminate.exclude_domains);
    settings__list_free(&s->network.tls_terminate.extra_ca_cert_paths);
    free(s->network.mitm_proxy.socket_path);
    settings__list_free(&s->network.mitm_proxy.domains);
    free(s->network.parent_proxy.http);
    free(s->network.parent_proxy.https);
    free(s->network.parent_proxy.no_proxy);
    settings__list_free(&s->network.strip_response_headers);
    settings__list_free(&s->network.request_rules);
    settings__list_free(&s->credentials.env_vars);
    settings__list_free(&s->credentials.files);
    settings__list_free(&s->credentials.aws_pairs);
    settings__list_free(&s->credentials.headers);
    free(s->network.deny_message);
    settings__list_free(&s->git_safe_directories);
    settings__list_free(&s->sandbox.excluded_commands);
    settings__list_free(&s->environment.allow);
    settings__list_free(&s->environment.deny);
    settings__map_free(&s->environment.set);
    settings__list_free(&s->environment.path_append);
    settings__list_free(&s->notices);
    settings__list_free(&s->managed_keys);
    settings__list_free(&s->weakened);
    settings__list_free(&s->cred_replaced);
    free(s->proxy.auth_username);
    free(s->proxy.auth_password);
    for (size_t i = 0; i < s->nfiles; i++)
        free(s->files[i]);
    free(s->files);
    settings_init(s);
}

/* Reads a whole file. Returns 0 or -errno. */
int settings__read_all(const char *path, char **out, size_t *outlen)
{
    struct stat st;
    char *buf = NULL;
    size_t len = 0, cap = 0;
    int fd, rc = 0;

    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) < 0) {
        rc = -errno;
        goto out;
    }
    if (S_ISDIR(st.st_mode)) {
        rc = -EISDIR;
        goto out;
    }
    cap = S_ISREG(st.st_mode) && st.st_size > 0 ? (size_t)st.st_size + 1 : 4096;
    for (;;) {
        ssize_t n;
        if (len == cap) {
            char *nb;
            if (cap > SIZE_MAX / 2) {
                rc = -ENOMEM;
                goto out;
            }
            nb = realloc(buf, cap * 2);
            if (nb == NULL) {
                rc = -ENOMEM;
                goto out;
            }
            buf = nb;
            cap *= 2;
        } else if (buf == NULL) {
            buf = malloc(cap);
            if (buf == NULL) {
                rc = -ENOMEM;
                goto out;
            }
        }
        n = read(fd, buf + len, cap - len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            rc = -errno;
            goto out;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    if (buf == NULL) {
        buf = malloc(1);
        if (buf == NULL) {
            rc = -ENOMEM;
            goto out;
        }
    }
    *out = buf;
    *outlen = len;
    buf = NULL;
out:
    free(buf);
    close(fd);
    return rc;
}
