/* settings/apply.c - reading one layer's JSON by the key table: each key
 * found, checked and stored into the scratch layer, what it sets recorded
 * (the rows it set, for the merge; the boundary keys it weakens, for the
 * managed lock; every key of the managed file, for `sluice explain`).
 */
#include "settings/settings-int.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Which keys a layer set                                                    */

int settings__key_set_add(struct key_set *ks, const struct key_def *d)
{
    if (settings__key_set_has(ks, d))
        return 0;
    if (ks->n == ks->cap) {
        size_t cap = ks->cap ? 2 * ks->cap : 32;
        const struct key_def **rows = realloc(ks->rows, cap * sizeof(*rows));
        if (rows == NULL)
            return -ENOMEM;
        ks->rows = rows;
        ks->cap = cap;
    }
    ks->rows[ks->n++] = d;
    return 0;
}

int settings__key_set_has(const struct key_set *ks, const struct key_def *d)
{
    for (size_t i = 0; i < ks->n; i++)
        if (ks->rows[i] == d)
            return 1;
    return 0;
}

void settings__key_set_free(struct key_set *ks)
{
    free(ks->rows);
    memset(ks, 0, sizeof(*ks));
}

/* ------------------------------------------------------------------------ */
/* The boundary keys: with a managed file, only it may weaken them            */

/* The boundary key index (settings_boundary_key) of row d when the layer
 * just set it to its weaker value, else -1. */
static int weakens(const struct ctx *c, const struct key_def *d)
{
    const unsigned char *f = (const unsigned char *)c->v + d->off;
    int zero = 1;

    if (d->lock.order == 0)
        return -1;
    for (size_t i = 0; i < d->size; i++)
        zero &= f[i] == 0;
    switch (d->lock.weak) {
    case WEAK_ALWAYS:
        break;
    case WEAK_IF_ZERO:
        if (!zero)
            return -1;
        break;
    case WEAK_IF_NONZERO:
        if (zero)
            return -1;
        break;
    case WEAK_IF_NONEMPTY:
        if (((const struct settings_list *)(const void *)f)->n == 0)
            return -1;
        break;
    }
    return (int)d->lock.order - 1;
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
        if (rc == 0 && d->fn != NULL) /* the object as a whole (network.tlsTerminate) */
            rc = d->fn(c, v, d);
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
    rc = settings__key_set_add(&c->set, d);
    if (rc < 0)
        return settings__fail_nomem(c);
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

    json_object_foreach(obj, key, v) {
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
