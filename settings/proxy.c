/* settings/proxy.c - validators of sluice's own "proxy" object: proxy.auth.
 */
#include "settings/settings-int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* proxy.auth: {"username": "...", "password": "..."}, both non-empty, at
 * most 255 bytes (RFC 1929), no control bytes; ':' not in the username
 * (HTTP Basic). */
static int auth_string(struct ctx *c, json_t *obj, const char *key, char **out)
{
    json_t *v = json_object_get(obj, key);
    const char *str;
    size_t len;
    int rc = 0;

    settings__push_key(c, key);
    if (v == NULL) {
        settings__pop(c);
        return settings__fail(c, 0, "'%s' is required", key);
    }
    if (!json_is_string(v)) {
        rc = settings__fail(c, 0, "expected a string, got %s", settings__type_name(v));
        goto out;
    }
    str = json_string_value(v);
    len = json_string_length(v);
    if (len == 0 || len > 255) {
        rc = settings__fail(c, 0, "must be 1 to 255 bytes long");
        goto out;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)str[i];
        if (ch < 0x20 || ch == 0x7f) {
            rc = settings__fail(c, 0, "must not contain control characters");
            goto out;
        }
        if (ch == ':' && strcmp(key, "username") == 0) {
            rc = settings__fail(c, 0, "must not contain ':' (HTTP Basic credentials)");
            goto out;
        }
    }
    free(*out);
    *out = strdup(str);
    if (*out == NULL)
        rc = settings__fail_nomem(c);
out:
    settings__pop(c);
    return rc;
}

int settings__fn_auth(struct ctx *c, json_t *v, const struct key_def *d)
{
    const char *key;
    json_t *e;
    int rc;

    (void)d;
    if (!json_is_object(v))
        return settings__fail(c, 0,
                              "expected an object {\"username\": ..., \"password\": ...}, got %s",
                              settings__type_name(v));
    json_object_foreach(v, key, e) {
        if (strcmp(key, "username") != 0 && strcmp(key, "password") != 0) {
            char q[128];
            settings__quote(q, sizeof(q), key);
            settings__push_key(c, key);
            rc = settings__fail(c, 1, "unknown key '%s' (expected 'username' and 'password')", q);
            settings__pop(c);
            return rc;
        }
    }
    rc = auth_string(c, v, "username", &c->v->proxy.auth_username);
    if (rc == 0)
        rc = auth_string(c, v, "password", &c->v->proxy.auth_password);
    return rc;
}
