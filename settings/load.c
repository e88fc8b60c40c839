/* settings/load.c - the settings loader (design.md "Settings"): files and
 * layers (user, explicit, managed), JSON parsing, the managed lock.
 *
 * One JSON file is one layer. A layer is parsed and checked into a scratch
 * struct settings; only when the whole file (and every list file it names)
 * is good is it merged into the caller's settings, by moves that cannot
 * fail. A bad file therefore never leaves settings half-applied.
 *
 * Every error reads "FILE:LINE:COLUMN: key.path: what is wrong". jansson
 * gives positions only for syntax errors; jsonpos.c finds the rest.
 */
#include "settings/settings-int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Column of jansson's error at the start of the token it names ("... near
 * 'TOKEN'"): jansson reports the column of the token's last character. */
static unsigned parse_error_col(const json_error_t *je)
{
    const char *near = strstr(je->text, " near '");
    size_t tl, chars = 0;
    int col = je->column;

    if (near != NULL) {
        near += 7;
        tl = strlen(near);
        if (tl >= 2 && near[tl - 1] == '\'') {
            for (size_t i = 0; i + 1 < tl; i++)
                chars += ((unsigned char)near[i] & 0xC0) != 0x80;
            if (chars > 0 && (size_t)col >= chars)
                col = col - (int)chars + 1;
        }
    }
    return col < 1 ? 1u : (unsigned)col;
}

/* Marks every network rule of the managed layer L as the managed file's
 * (report mode does not lift its deny rules). */
static void mark_managed(struct settings *L)
{
    struct settings_list *lists[] = {
        &L->network.allowed_domains,
        &L->network.denied_domains,
        &L->network.denied_resolved_addresses,
        &L->network.request_rules,
    };

    for (size_t i = 0; i < COUNT(lists); i++)
        for (size_t j = 0; j < lists[i]->n; j++)
            lists[i]->items[j].managed = 1;
}

/* With a managed file, the first boundary key an earlier layer weakened is
 * refused: -EINVAL with err set, else 0. */
static int refuse_weakened(const struct settings *s, const char *managed,
                           struct settings_error *err)
{
    const struct settings_item *it;
    const char *what = "";

    if (s->weakened.n == 0)
        return 0;
    it = &s->weakened.items[0];
    (void)settings_boundary_key(it->index, &what);
    snprintf(err->msg, sizeof(err->msg),
             "%s:%u:%u: %s: refused: the managed file %s exists, and only it may %s", it->file,
             it->line, it->col, it->value, managed, what);
    return -EINVAL;
}

/* The managed layer c, before it is merged into s: refuses what an earlier
 * layer weakened, marks its rules, and, unless it says otherwise, forbids
 * running commands unsandboxed (that weakens the boundary too: only the
 * managed file may allow it). */
static int lock_layer(const struct settings *s, struct ctx *c, const char *name)
{
    const struct key_def *unsandboxed = settings__key_at("sandbox.allowUnsandboxedCommands");
    int rc;

    rc = refuse_weakened(s, name, c->err);
    if (rc < 0)
        return rc;
    if (unsandboxed == NULL) { /* cannot happen: the row is in the table */
        snprintf(c->err->msg, sizeof(c->err->msg), "%s: no sandbox.allowUnsandboxedCommands key",
                 name);
        return -EINVAL;
    }
    mark_managed(c->v);
    c->v->managed_file = c->name;
    if (!settings__key_set_has(&c->set, unsandboxed)) {
        c->v->sandbox.allow_unsandboxed_commands = SETTINGS_FALSE;
        if (settings__key_set_add(&c->set, unsandboxed) < 0)
            return settings__fail_nomem(c);
    }
    return 0;
}

/* The layer c replaces a credentials list of s that holds mask entries:
 * noted in s->cred_replaced (before the merge, which cannot fail). */
static int note_cred_replace(struct settings *s, struct ctx *c)
{
    static const char *const paths[3] = {"credentials.envVars", "credentials.files",
                                         "credentials.awsPairs"};
    const struct settings_list *old[3] = {&s->credentials.env_vars, &s->credentials.files,
                                          &s->credentials.aws_pairs};

    for (size_t l = 0; l < 3; l++) {
        const struct key_def *d = settings__key_at(paths[l]);
        const char *f;
        int masked = 0;
        char *v;
        if (d == NULL || !settings__key_set_has(&c->set, d))
            continue;
        for (size_t i = 0; i < old[l]->n && !masked; i++) {
            struct settings_credential cr;
            masked = settings_credential_split(old[l]->items[i].value, &cr) == 0 && cr.mask;
        }
        if (!masked)
            continue;
        f = settings__intern(s, c->name);
        v = f != NULL ? strdup(paths[l]) : NULL;
        if (v == NULL || settings__list_push(&s->cred_replaced, v, f, c->v->credentials.given.line,
                                             c->v->credentials.given.col, paths[l], 0) < 0)
            return settings__fail_nomem(c);
    }
    return 0;
}

static int apply_layer(struct settings *s, const char *name, const char *text, size_t len,
                       struct settings_error *err, int managed)
{
    struct settings_error dummy;
    struct settings L;
    struct ctx c;
    json_error_t je;
    json_t *root = NULL;
    char *dir = NULL;
    const struct key_def *top;
    const char *slash;
    size_t ntop;
    int rc;

    if (err == NULL)
        err = &dummy;
    memset(&L, 0, sizeof(L));
    memset(&c, 0, sizeof(c));
    c.err = err;
    c.v = &L;
    c.managed = managed;
    c.name = settings__intern(&L, name);
    if (c.name == NULL) {
        snprintf(err->msg, sizeof(err->msg), "%s: out of memory", name);
        rc = -ENOMEM;
        goto out;
    }
    slash = strrchr(name, '/');
    if (slash != NULL) {
        dir = strndup(name, slash == name ? 1 : (size_t)(slash - name));
        if (dir == NULL) {
            rc = settings__fail_nomem(&c);
            goto out;
        }
    }
    c.dir = dir;
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) {
        text += 3;
        len -= 3;
    }
    c.text = text;
    c.len = len;

    root = json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
    if (root == NULL) {
        snprintf(err->msg, sizeof(err->msg), "%s:%d:%u: %s", name, je.line < 1 ? 1 : je.line,
                 parse_error_col(&je), je.text);
        rc = -EINVAL;
        goto out;
    }
    if (!json_is_object(root)) {
        rc = settings__fail(&c, 0, "expected an object, got %s", settings__type_name(root));
        goto out;
    }
    top = settings__top_keys(&ntop);
    rc = settings__apply_object(&c, root, top, ntop);
    if (rc < 0)
        goto out;
    if (managed) {
        rc = lock_layer(s, &c, name);
        if (rc < 0)
            goto out;
    }
    rc = note_cred_replace(s, &c);
    if (rc < 0)
        goto out;
    rc = settings__merge(s, &L, &c.set);
    if (rc < 0)
        snprintf(err->msg, sizeof(err->msg), "%s: out of memory", name);
out:
    settings__key_set_free(&c.set);
    json_decref(root);
    free(dir);
    settings_free(&L);
    return rc;
}

int settings_apply_buffer(struct settings *s, const char *name, const char *text, size_t len,
                          struct settings_error *err)
{
    return apply_layer(s, name, text, len, err, 0);
}

static int apply_path(struct settings *s, const char *path, struct settings_error *err, int managed)
{
    char *buf = NULL;
    size_t len = 0;
    int rc;

    rc = settings__read_all(path, &buf, &len);
    if (rc == -ENOENT)
        return rc;
    if (rc < 0) {
        if (err != NULL)
            snprintf(err->msg, sizeof(err->msg), "%s: cannot open: %s", path, strerror(-rc));
        return rc;
    }
    rc = apply_layer(s, path, buf, len, err, managed);
    free(buf);
    return rc;
}

int settings_apply_file(struct settings *s, const char *path, struct settings_error *err)
{
    return apply_path(s, path, err, 0);
}

int settings_apply_managed(struct settings *s, const char *path, struct settings_error *err)
{
    struct settings_error dummy;
    const char *p = path != NULL ? path : SETTINGS_MANAGED_PATH;
    struct stat st;
    int rc = apply_path(s, p, err != NULL ? err : &dummy, 1);

    /* rt-4: a managed file that is a dangling symlink (its target on a
     * volume not mounted yet) exists: fail closed, not as if there were none */
    if (rc == -ENOENT && lstat(p, &st) == 0) {
        snprintf((err != NULL ? err : &dummy)->msg, sizeof(dummy.msg),
                 "%s: cannot open: %s (a symlink to nothing; the managed file must be readable)", p,
                 strerror(ENOENT));
        return -ENOENT;
    }
    return rc == -ENOENT ? 0 : rc;
}

static char *join(const char *a, const char *b)
{
    size_t n = strlen(a) + strlen(b) + 1;
    char *p = malloc(n);
    if (p != NULL)
        snprintf(p, n, "%s%s", a, b);
    return p;
}

int settings_load(struct settings *s, const char *explicit_path, struct settings_error *err)
{
    const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
    char *user = NULL, *srt = NULL;
    int rc = -ENOENT;

    /* XDG: a relative $XDG_CONFIG_HOME is ignored. */
    if (xdg == NULL || xdg[0] != '/')
        xdg = NULL;
    if (home != NULL && home[0] == '\0')
        home = NULL;
    if (xdg != NULL)
        user = join(xdg, "/sluice/settings.json");
    else if (home != NULL)
        user = join(home, "/.config/sluice/settings.json");
    if (home != NULL)
        srt = join(home, "/.srt-settings.json");
    if ((user == NULL && (xdg != NULL || home != NULL)) || (srt == NULL && home != NULL)) {
        if (err != NULL)
            snprintf(err->msg, sizeof(err->msg), "settings: out of memory");
        rc = -ENOMEM;
        goto out;
    }
    if (user != NULL)
        rc = settings_apply_file(s, user, err);
    if (rc == -ENOENT && srt != NULL)
        rc = settings_apply_file(s, srt, err);
    if (rc == -ENOENT)
        rc = 0;
    if (rc < 0)
        goto out;

    if (explicit_path == NULL) {
        const char *env = getenv("SLUICE_SETTINGS");
        if (env != NULL && env[0] != '\0')
            explicit_path = env;
    }
    if (explicit_path != NULL) {
        rc = settings_apply_file(s, explicit_path, err);
        if (rc == -ENOENT && err != NULL)
            snprintf(err->msg, sizeof(err->msg), "%s: cannot open: %s", explicit_path,
                     strerror(ENOENT));
    }
out:
    free(user);
    free(srt);
    return rc;
}
