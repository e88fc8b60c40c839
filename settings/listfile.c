/* settings/listfile.c - list files (network.*DomainsFiles,
 * filesystem.*Files): one entry per line, '#' comments, each entry located
 * at its file, line and column.
 */
#include "settings/settings-int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Reads one list file into rules; c's path is at the JSON string naming it. */
static int read_list_file(struct ctx *c, const char *written, struct settings_list *rules,
                          const char *list)
{
    char *path = NULL, *buf = NULL;
    const char *fname;
    size_t len = 0, i = 0;
    unsigned line = 0;
    int rc;

    if (written[0] != '/' && c->dir != NULL) {
        size_t n = strlen(c->dir) + strlen(written) + 2;
        path = malloc(n);
        if (path == NULL)
            return settings__fail_nomem(c);
        snprintf(path, n, "%s/%s", c->dir, written);
    } else {
        path = strdup(written);
        if (path == NULL)
            return settings__fail_nomem(c);
    }
    rc = settings__read_all(path, &buf, &len);
    if (rc < 0) {
        char q[256];
        settings__quote(q, sizeof(q), path);
        rc = settings__fail(c, 0, "cannot read list file '%s': %s", q, strerror(-rc));
        goto out;
    }
    fname = settings__intern(c->v, path);
    if (fname == NULL) {
        rc = settings__fail_nomem(c);
        goto out;
    }
    if (len >= 3 && memcmp(buf, "\xEF\xBB\xBF", 3) == 0)
        i = 3;
    while (i < len) {
        const char *ln = buf + i, *nl, *end, *start;
        size_t llen;
        unsigned col = 1;
        char *val;

        nl = memchr(ln, '\n', len - i);
        llen = nl ? (size_t)(nl - ln) : len - i;
        i += llen + 1;
        line++;
        end = memchr(ln, '#', llen);
        if (end == NULL)
            end = ln + llen;
        start = ln;
        while (start < end && (*start == ' ' || *start == '\t' || *start == '\r' ||
                               *start == '\v' || *start == '\f'))
            start++;
        while (end > start && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r' ||
                               end[-1] == '\v' || end[-1] == '\f'))
            end--;
        if (start == end)
            continue;
        for (const char *p = ln; p < start; p++)
            col += ((unsigned char)*p & 0xC0) != 0x80;
        if (memchr(start, '\0', (size_t)(end - start)) != NULL) {
            char where[512];
            settings__format_path(c, where, sizeof(where));
            snprintf(c->err->msg, sizeof(c->err->msg), "%s:%u:%u: %s: NUL byte in pattern", fname,
                     line, col, where);
            rc = -EINVAL;
            goto out;
        }
        /* not strndup: buf is not NUL-terminated */
        val = malloc((size_t)(end - start) + 1);
        if (val != NULL) {
            memcpy(val, start, (size_t)(end - start));
            val[end - start] = '\0';
        }
        if (val == NULL || settings__list_push(rules, val, fname, line, col, list, line) < 0) {
            rc = settings__fail_nomem(c);
            goto out;
        }
    }
    rc = 0;
out:
    free(buf);
    free(path);
    return rc;
}

static int domain_files(struct ctx *c, json_t *v, const struct key_def *d,
                        struct settings_list *files, struct settings_list *rules,
                        const char *rules_list)
{
    size_t i;
    json_t *e;
    int rc;

    rc = settings__take_strlist(c, v, files, d->list, 1);
    if (rc < 0)
        return rc;
    json_array_foreach(v, i, e) {
        settings__push_index(c, i);
        rc = read_list_file(c, json_string_value(e), rules, rules_list);
        settings__pop(c);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int settings__fn_allowed_files(struct ctx *c, json_t *v, const struct key_def *d)
{
    return domain_files(c, v, d, &c->v->network.allowed_domains_files,
                        &c->v->network.allowed_domains, "network.allowedDomainsFiles");
}

int settings__fn_denied_files(struct ctx *c, json_t *v, const struct key_def *d)
{
    return domain_files(c, v, d, &c->v->network.denied_domains_files, &c->v->network.denied_domains,
                        "network.deniedDomainsFiles");
}

/* filesystem.{denyRead,allowRead,allowWrite,denyWrite}Files: list files
 * (one path per line, '#' comments, globs) appended to the list at d->off,
 * like network.allowedDomainsFiles; the files are protected in the sandbox
 * like every settings file. */
int settings__fn_fs_files(struct ctx *c, json_t *v, const struct key_def *d)
{
    struct settings_list names = {0};
    int rc = domain_files(c, v, d, &names, (struct settings_list *)settings__field(c, d), d->list);

    settings__list_free(&names);
    return rc;
}
