/* settings/rules.c - the validator of network.requestRules (issue 23): a
 * list of {"host": PATTERN, "method": M or [M...], "path": GLOB or
 * [GLOB...], "action": "allow" | "deny"}. Each rule is checked where it is
 * written (unknown member, missing host or action, a method that is not an
 * RFC 9110 token, a glob policy cannot use, a bad host pattern, an empty
 * list) and stored as one settings_item in the text form settings.h
 * describes, at the place of its object. The host pattern and the path
 * glob are judged by policy's grammar (settings_checks: policy/checks.c).
 */
#include "settings/settings-int.h"

#include "common/common.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define RULE_HINT "(a rule has host, method, path and action)"

/* A method token; a lower-case spelling of a standard method is refused
 * (methods are case-sensitive: "get" would never match a GET). */
static const char *method_why(const char *m)
{
    static const char *const standard[] = {"GET",     "HEAD",    "POST",  "PUT",  "DELETE",
                                           "CONNECT", "OPTIONS", "TRACE", "PATCH"};
    size_t n = strlen(m);

    if (n == 0)
        return "a method must not be empty";
    if (n > 32)
        return "a method is at most 32 characters";
    for (size_t i = 0; i < n; i++)
        if (!common_is_tchar((unsigned char)m[i]))
            return "is not a method (an RFC 9110 token: letters, digits and !#$%&'*+-.^_`|~)";
    for (size_t k = 0; k < sizeof(standard) / sizeof(standard[0]); k++) {
        const char *s = standard[k];
        size_t i;
        if (strlen(s) != n || strcmp(s, m) == 0)
            continue;
        for (i = 0; i < n; i++) {
            char ch = m[i] >= 'a' && m[i] <= 'z' ? (char)(m[i] - 'a' + 'A') : m[i];
            if (ch != s[i])
                break;
        }
        if (i == n)
            return "methods are case-sensitive (RFC 9110): write it in upper case";
    }
    return NULL;
}

/* A string or a non-empty array of strings, each passing ok (NULL or why),
 * appended to buf joined by sep. 0 or settings__fail's value. */

static int one_or_more(struct ctx *c, json_t *v, const char *what,
                       const char *(*ok)(struct ctx *c, const char *s), struct settings_text *b, char sep,
                       size_t *count)
{
    size_t i, n = json_is_array(v) ? json_array_size(v) : 1;
    json_t *e;

    if (!json_is_string(v) && !json_is_array(v))
        return settings__fail(c, 0, "expected a %s or an array of them, got %s", what,
                              settings__type_name(v));
    if (n == 0)
        return settings__fail(c, 0, "must not be an empty array (leave the member out for any %s)",
                              what);
    if (n > SETTINGS_RULE_FIELDS_MAX - 3)
        return settings__fail(c, 0, "at most %d entries", SETTINGS_RULE_FIELDS_MAX - 3);
    for (i = 0; i < n; i++) {
        const char *why;
        int rc;
        e = json_is_array(v) ? json_array_get(v, i) : v;
        if (json_is_array(v))
            settings__push_index(c, i);
        if (!json_is_string(e)) {
            rc = settings__fail(c, 0, "expected a %s, got %s", what, settings__type_name(e));
        } else if ((why = ok(c, json_string_value(e))) != NULL) {
            char q[128];
            settings__quote(q, sizeof(q), json_string_value(e));
            rc = settings__fail(c, 0, "\"%s\": %s", q, why);
        } else if ((*count > 0 && settings__text_add(b, &sep, 1) < 0) ||
                   settings__text_add(b, json_string_value(e), json_string_length(e)) < 0) {
            rc = settings__fail_nomem(c);
        } else {
            rc = 0;
            ++*count;
        }
        if (json_is_array(v))
            settings__pop(c);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static const char *method_ok(struct ctx *c, const char *m)
{
    (void)c;
    return method_why(m);
}

static const char *path_ok(struct ctx *c, const char *g)
{
    const char *why = NULL;

    (void)c;
    if (strlen(g) > 4096)
        return "a path glob is at most 4096 bytes";
    if (settings__check_rule_path(g, &why) < 0)
        return why != NULL ? why : "not a path glob";
    return NULL;
}

/* The members of one rule into its text form. */
static int one_rule(struct ctx *c, json_t *o, struct settings_text *b)
{
    json_t *host = NULL, *method = NULL, *path = NULL, *action = NULL, *m;
    struct settings_text methods = {0}, paths = {0};
    size_t nm = 0, np = 0;
    const char *key, *why = NULL;
    int rc = 0, deny = 0;

    if (!json_is_object(o))
        return settings__fail(c, 0, "expected a rule object " RULE_HINT ", got %s",
                              settings__type_name(o));
    json_object_foreach(o, key, m) {
        json_t **slot = strcmp(key, "host") == 0     ? &host
                        : strcmp(key, "method") == 0 ? &method
                        : strcmp(key, "path") == 0   ? &path
                        : strcmp(key, "action") == 0 ? &action
                                                     : NULL;
        if (slot == NULL) {
            settings__push_key(c, key);
            rc = settings__fail(c, 1, "unknown key '%s' " RULE_HINT, key);
            settings__pop(c);
            return rc;
        }
        *slot = m;
    }
    if (host == NULL)
        return settings__fail(c, 0, "a rule needs a host (a pattern as in allowedDomains)");
    if (action == NULL)
        return settings__fail(c, 0, "a rule needs an action: \"allow\" or \"deny\"");
    settings__push_key(c, "host");
    if (!json_is_string(host))
        rc = settings__fail(c, 0, "expected a host pattern string, got %s",
                            settings__type_name(host));
    else if (settings__check_rule_host(json_string_value(host), &why) < 0)
        rc = settings__fail(c, 0, "'%s': %s", json_string_value(host),
                            why != NULL ? why : "invalid pattern");
    settings__pop(c);
    if (rc < 0)
        return rc;
    settings__push_key(c, "action");
    if (json_is_string(action) && strcmp(json_string_value(action), "deny") == 0)
        deny = 1;
    else if (!json_is_string(action) || strcmp(json_string_value(action), "allow") != 0)
        rc = settings__fail(c, 0, "expected \"allow\" or \"deny\"");
    settings__pop(c);
    if (rc == 0 && method != NULL) {
        settings__push_key(c, "method");
        rc = one_or_more(c, method, "method", method_ok, &methods, ' ', &nm);
        settings__pop(c);
    }
    if (rc == 0 && path != NULL) {
        settings__push_key(c, "path");
        rc = one_or_more(c, path, "path glob", path_ok, &paths, '\n', &np);
        settings__pop(c);
    }
    if (rc == 0) {
        const char *a = deny ? "deny\n" : "allow\n";
        if (settings__text_add(b, a, strlen(a)) < 0 ||
            settings__text_add(b, json_string_value(host), json_string_length(host)) < 0 ||
            settings__text_add(b, "\n", 1) < 0 || (nm > 0 && settings__text_add(b, methods.p, methods.n) < 0) ||
            (np > 0 && (settings__text_add(b, "\n", 1) < 0 || settings__text_add(b, paths.p, paths.n) < 0)))
            rc = settings__fail_nomem(c);
    }
    free(methods.p);
    free(paths.p);
    return rc;
}

int settings__fn_request_rules(struct ctx *c, json_t *v, const struct key_def *d)
{
    struct settings_list *out = &c->v->network.request_rules;
    struct jsonpos *pos = NULL;
    size_t i, n, found = 0;
    int rc = 0;

    if (!json_is_array(v))
        return settings__fail(c, 0, "expected an array of rules " RULE_HINT ", got %s",
                              settings__type_name(v));
    n = json_array_size(v);
    settings__list_free(out);
    if (n == 0)
        return 0;
    pos = calloc(n, sizeof(*pos));
    if (pos == NULL)
        return settings__fail_nomem(c);
    if (jsonpos_array(c->text, c->len, c->path, c->depth, pos, n, &found) < 0)
        found = 0;
    for (i = 0; i < n && rc == 0; i++) {
        struct settings_text b = {0};
        settings__push_index(c, i);
        rc = one_rule(c, json_array_get(v, i), &b);
        settings__pop(c);
        if (rc == 0 && b.p == NULL)
            rc = settings__fail_nomem(c);
        if (rc == 0) {
            unsigned line = i < found ? pos[i].line : 1, col = i < found ? pos[i].col : 1;
            if (settings__list_push(out, b.p, c->name, line, col, d->list, i) < 0)
                rc = settings__fail_nomem(c); /* list_push freed b.p */
            b.p = NULL;
        }
        free(b.p);
    }
    free(pos);
    return rc;
}

/* ------------------------------------------------------------------------ */

int settings_request_rule_split(const char *text, struct settings_request_rule *r)
{
    const char *p = text, *nl;
    size_t k = 0;

    memset(r, 0, sizeof(*r));
    for (;; k++) {
        size_t len;
        nl = strchr(p, '\n');
        len = nl != NULL ? (size_t)(nl - p) : strlen(p);
        if (k == 0) {
            if (len == 4 && memcmp(p, "deny", 4) == 0)
                r->deny = 1;
            else if (!(len == 5 && memcmp(p, "allow", 5) == 0))
                return -EINVAL;
        } else if (k == 1) {
            r->host = p;
            r->host_len = len;
        } else if (k == 2) {
            r->methods = p;
            r->methods_len = len;
        } else {
            if (r->npaths == SETTINGS_RULE_FIELDS_MAX - 3)
                return -EINVAL;
            r->paths[r->npaths] = p;
            r->path_lens[r->npaths++] = len;
        }
        if (nl == NULL)
            break;
        p = nl + 1;
    }
    return k >= 2 && r->host_len > 0 ? 0 : -EINVAL;
}
