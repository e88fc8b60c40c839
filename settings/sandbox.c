/* settings/sandbox.c - validators of the keys the sandbox reads: the
 * environment object, sandbox tri-states, absolute paths (bwrapPath,
 * javaAgentJarPath), ignoreViolations.
 */
#include "settings/settings-int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* A tri-state boolean (enum settings_bool) at d->off. */
int settings__fn_tribool(struct ctx *c, json_t *v, const struct key_def *d)
{
    int b = 0, rc;

    rc = settings__want_bool(c, v, &b);
    if (rc == 0)
        *(enum settings_bool *)settings__field(c, d) = b ? SETTINGS_TRUE : SETTINGS_FALSE;
    return rc;
}

/* An environment variable name, or a glob of one with '*': letters, digits,
 * '_' and '*', not starting with a digit. */
static int env_name_ok(const char *s)
{
    if (s[0] == '\0' || (s[0] >= '0' && s[0] <= '9'))
        return 0;
    for (; *s; s++) {
        char ch = *s;
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '_' || ch == '*'))
            return 0;
    }
    return 1;
}

/* environment.allow / environment.deny: names or NAME_* globs. */
int settings__fn_env_names(struct ctx *c, json_t *v, const struct key_def *d)
{
    int rc =
        settings__check_each(c, v, env_name_ok, "environment variable name",
                             "expected a name like HOME or a glob like AWS_*: letters, digits, '_' "
                             "and '*', not starting with a digit");
    if (rc < 0)
        return rc;
    return settings__take_strlist(c, v, (struct settings_list *)settings__field(c, d), d->list, 0);
}

/* A name sluice sets itself in the sandbox (sandbox/env.c), or a loader
 * variable that would run host-chosen code in `sluice inner` before its
 * seccomp filter: environment.set must not name it. Returns the reason, or
 * NULL when the name may be set. */
static const char *env_reserved(const char *name)
{
    static const char suffix[] = "_PROXY";
    size_t len = strlen(name), sl = sizeof(suffix) - 1;

    if (strcmp(name, "SANDBOX_RUNTIME") == 0 || strcmp(name, "TMPDIR") == 0 ||
        strcmp(name, "GIT_SSH_COMMAND") == 0 || strncmp(name, "CLOUDSDK_PROXY_", 15) == 0)
        return "is set by sluice itself";
    if (len >= sl) {
        size_t i;
        for (i = 0; i < sl; i++) {
            char ch = name[len - sl + i];
            if (ch >= 'a' && ch <= 'z')
                ch = (char)(ch - 'a' + 'A');
            if (ch != suffix[i])
                break;
        }
        if (i == sl)
            return "is a proxy variable, set by sluice itself";
    }
    if (strcmp(name, "LD_PRELOAD") == 0 || strcmp(name, "LD_AUDIT") == 0)
        return "would load host-chosen code into sluice's own `inner` before its seccomp "
               "filter";
    return NULL;
}

/* environment.set: {"NAME": "value"}; a later layer wins per name. */
static int env_pair_ok(struct ctx *c, const char *key, json_t *e)
{
    const char *why = env_reserved(key);
    char q[128];

    settings__quote(q, sizeof(q), key);
    if (!env_name_ok(key) || strchr(key, '*') != NULL)
        return settings__fail(c, 1,
                              "invalid environment variable name \"%s\" (letters, digits and '_', "
                              "not starting with a digit)",
                              q);
    if (why != NULL)
        return settings__fail(c, 1, "'%s' %s; it cannot be set", q, why);
    if (!json_is_string(e))
        return settings__fail(c, 0, "expected a string, got %s", settings__type_name(e));
    if (strlen(json_string_value(e)) != json_string_length(e))
        return settings__fail(c, 0, "must not contain a NUL character");
    return 0;
}

int settings__fn_env_set(struct ctx *c, json_t *v, const struct key_def *d)
{
    (void)d;
    return settings__string_map(c, v, &c->v->environment.set, "NAME: \"value\" strings",
                                env_pair_ok);
}

/* environment.pathAppend: absolute directories or "~" / "~/..." (expanded
 * when the environment is built), without ':' or control characters. */
int settings__fn_path_append(struct ctx *c, json_t *v, const struct key_def *d)
{
    size_t i;
    json_t *e;
    int rc;

    rc = settings__check_strlist(c, v, 1);
    if (rc < 0)
        return rc;
    json_array_foreach(v, i, e) {
        const char *p = json_string_value(e);
        char q[128];

        rc = 0;
        settings__quote(q, sizeof(q), p);
        settings__push_index(c, i);
        if (!(p[0] == '/' || (p[0] == '~' && (p[1] == '\0' || p[1] == '/'))))
            rc = settings__fail(
                c, 0,
                "'%s' is not absolute: a PATH entry must start with '/', '~' or '~/' (a "
                "relative one would run programs from wherever the command is)",
                q);
        else if (strchr(p, ':') != NULL)
            rc = settings__fail(c, 0, "'%s' contains ':', the PATH separator", q);
        for (const char *s = p; rc == 0 && *s; s++)
            if ((unsigned char)*s < 0x20 || *s == 0x7f)
                rc = settings__fail(c, 0, "'%s' contains a control character", q);
        if (rc == 0 && strlen(p) != json_string_length(e))
            rc = settings__fail(c, 0, "must not contain a NUL character");
        settings__pop(c);
        if (rc < 0)
            return rc;
    }
    return settings__take_strlist(c, v, &c->v->environment.path_append, d->list, 1);
}

/* An absolute path into *dst (replacing what was there). With no_space,
 * whitespace is refused too: javaAgentJarPath goes into JAVA_TOOL_OPTIONS
 * as -javaagent:PATH, which the JVM splits at spaces. */
static int set_abs_path(struct ctx *c, json_t *v, char **dst, int no_space)
{
    const char *p;
    char q[128];

    if (!json_is_string(v))
        return settings__fail(c, 0, "expected a string, got %s", settings__type_name(v));
    p = json_string_value(v);
    settings__quote(q, sizeof(q), p);
    if (p[0] != '/')
        return settings__fail(c, 0, "must be an absolute path, got \"%s\"", q);
    if (no_space && strpbrk(p, " \t\n\r\v\f") != NULL)
        return settings__fail(
            c, 0,
            "\"%s\" contains whitespace, which JAVA_TOOL_OPTIONS cannot carry; move "
            "the jar to a path without spaces",
            q);
    free(*dst);
    *dst = strdup(p);
    if (*dst == NULL)
        return settings__fail_nomem(c);
    return 0;
}

int settings__fn_bwrap(struct ctx *c, json_t *v, const struct key_def *d)
{
    (void)d;
    return set_abs_path(c, v, &c->v->bwrap_path, 0);
}

/* javaAgentJarPath: an absolute path without whitespace. */
int settings__fn_java_agent(struct ctx *c, json_t *v, const struct key_def *d)
{
    (void)d;
    return set_abs_path(c, v, &c->v->java_agent_jar_path, 1);
}

int settings__fn_ignore(struct ctx *c, json_t *v, const struct key_def *d)
{
    struct settings_map *m = &c->v->ignore_violations;
    const char *key;
    json_t *e;

    (void)d;
    if (!json_is_object(v))
        return settings__fail(c, 0, "expected an object of command: [patterns], got %s",
                              settings__type_name(v));
    json_object_foreach(v, key, e) {
        struct settings_pair *p;
        int rc;

        if (settings__map_reserve(m, m->n + 1) < 0)
            return settings__fail_nomem(c);
        p = &m->pairs[m->n];
        memset(p, 0, sizeof(*p));
        p->key = strdup(key);
        if (p->key == NULL)
            return settings__fail_nomem(c);
        m->n++; /* owned by the map from here on */
        settings__push_key(c, key);
        rc = settings__take_strlist(c, e, &p->list, "ignoreViolations", 0);
        settings__pop(c);
        if (rc < 0)
            return rc;
    }
    return 0;
}
