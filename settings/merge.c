/* settings/merge.c - merging one checked layer into the settings, driven by
 * the key table: each row's merge rule says what a later layer does to the
 * earlier value (replace, unite, harden), and the rows the layer set say
 * whether it does it. Every allocation happens first (reserve_*), so that
 * a failure leaves the settings as they were; the moves after it cannot
 * fail.
 */
#include "settings/settings-int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct merge {
    struct settings *s, *L;
    const struct key_set *set;
    int group[MG_COUNT]; /* the layer set a key of this group */
    size_t *table;       /* one hash table for the MERGE_MAP_UNION rows, in turn */
    size_t tsize;
};

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

static void move_string(char **dst, char **src)
{
    free(*dst);
    *dst = *src;
    *src = NULL;
}

static size_t hash_str(const char *s)
{
    size_t h = 1469598103934665603u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211u;
    return h;
}

/* Unites lr into sr, the later layer winning per key (capacity and the
 * hash table already reserved). */
static void map_union(struct settings_map *sr, struct settings_map *lr, size_t *table, size_t tsize)
{
    size_t mask = tsize - 1;

    if (lr->n == 0)
        return;
    memset(table, 0, tsize * sizeof(*table));
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
}

static void move_parent(struct settings *s, struct settings *L)
{
    free(s->network.parent_proxy.http);
    free(s->network.parent_proxy.https);
    free(s->network.parent_proxy.no_proxy);
    s->network.parent_proxy = L->network.parent_proxy;
    memset(&L->network.parent_proxy, 0, sizeof(L->network.parent_proxy));
}

/* ------------------------------------------------------------------------ */
/* Reserving                                                                 */

static int mark_groups(const struct key_def *d, const char *path, void *arg)
{
    struct merge *m = arg;

    (void)path;
    if (d->group != MG_NONE && settings__key_set_has(m->set, d))
        m->group[d->group] = 1;
    return 0;
}

static int reserve_row(const struct key_def *d, const char *path, void *arg)
{
    struct merge *m = arg;
    void *dst = (char *)m->s + d->off, *src = (char *)m->L + d->off;

    (void)path;
    if (d->merge == MERGE_LIST_UNION) {
        struct settings_list *a = dst, *b = src;
        return settings__list_reserve(a, a->n + b->n);
    }
    if (d->merge == MERGE_MAP_UNION) {
        struct settings_map *a = dst, *b = src;
        size_t need = 16;
        if (settings__map_reserve(a, a->n + b->n) < 0)
            return -ENOMEM;
        while (b->n > 0 && need < 2 * (a->n + b->n))
            need *= 2;
        if (b->n > 0 && need > m->tsize)
            m->tsize = need;
    }
    return 0;
}

/* The records of a layer that are not keys: notices, the managed file's
 * keys, the weakened boundary keys, the interned file names. */
static int reserve_records(struct settings *s, const struct settings *L)
{
    char **files;

    if (settings__list_reserve(&s->notices, s->notices.n + L->notices.n) < 0 ||
        settings__list_reserve(&s->managed_keys, s->managed_keys.n + L->managed_keys.n) < 0 ||
        settings__list_reserve(&s->weakened, s->weakened.n + L->weakened.n) < 0)
        return -ENOMEM;
    files = realloc(s->files, (s->nfiles + L->nfiles) * sizeof(*files) + 1);
    if (files == NULL)
        return -ENOMEM;
    s->files = files;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Moving (cannot fail)                                                      */

static int merge_row(const struct key_def *d, const char *path, void *arg)
{
    struct merge *m = arg;
    char *dst = (char *)m->s + d->off, *src = (char *)m->L + d->off;

    (void)path;
    if (d->merge == MERGE_LIST_UNION) {
        move_union((struct settings_list *)(void *)dst, (struct settings_list *)(void *)src);
        return 0;
    }
    if (d->merge == MERGE_MAP_UNION) {
        map_union((struct settings_map *)(void *)dst, (struct settings_map *)(void *)src, m->table,
                  m->tsize);
        return 0;
    }
    if (!settings__key_set_has(m->set, d) && !(d->group != MG_NONE && m->group[d->group]))
        return 0;
    switch (d->merge) {
    case MERGE_NONE:
    case MERGE_LIST_UNION:
    case MERGE_MAP_UNION:
        break;
    case MERGE_SCALAR:
        memcpy(dst, src, d->size);
        break;
    case MERGE_STRING:
        move_string((char **)(void *)dst, (char **)(void *)src);
        if (d->off2 != 0)
            move_string((char **)(void *)((char *)m->s + d->off2),
                        (char **)(void *)((char *)m->L + d->off2));
        break;
    case MERGE_LIST:
        move_replace((struct settings_list *)(void *)dst, (struct settings_list *)(void *)src);
        break;
    case MERGE_MAP:
        settings__map_free((struct settings_map *)(void *)dst);
        memcpy(dst, src, sizeof(struct settings_map));
        memset(src, 0, sizeof(struct settings_map));
        break;
    case MERGE_OR:
        *(int *)(void *)dst |= *(int *)(void *)src;
        break;
    case MERGE_LIST_SOME:
        if (((struct settings_list *)(void *)src)->n > 0)
            move_replace((struct settings_list *)(void *)dst, (struct settings_list *)(void *)src);
        break;
    case MERGE_SCALAR_SOME: {
        static const unsigned char zero[16];
        if (memcmp(src, zero, d->size) != 0)
            memcpy(dst, src, d->size);
        break;
    }
    case MERGE_PARENT:
        move_parent(m->s, m->L);
        break;
    }
    return 0;
}

/* A later layer that sets a boundary key decides it: an earlier weaker
 * value it replaces is no longer there to refuse. */
static void merge_weakened(struct settings *s, struct settings *L, const struct key_set *set)
{
    size_t k = 0;

    for (size_t i = 0; i < s->weakened.n; i++) {
        const struct key_def *d = settings__lock_row(s->weakened.items[i].index);
        if (d != NULL && settings__key_set_has(set, d))
            free(s->weakened.items[i].value);
        else
            s->weakened.items[k++] = s->weakened.items[i];
    }
    s->weakened.n = k;
    move_union(&s->weakened, &L->weakened);
}

static void merge_records(struct settings *s, struct settings *L, const struct key_set *set)
{
    move_union(&s->notices, &L->notices);
    merge_weakened(s, L, set);
    move_union(&s->managed_keys, &L->managed_keys);
    if (L->managed_file != NULL)
        s->managed_file = L->managed_file;
    /* the layer's file names now belong to s */
    memcpy(s->files + s->nfiles, L->files, L->nfiles * sizeof(*L->files));
    s->nfiles += L->nfiles;
    L->nfiles = 0;
}

/* Merges the layer L, which set the keys in set, into s. */
int settings__merge(struct settings *s, struct settings *L, const struct key_set *set)
{
    struct merge m = {.s = s, .L = L, .set = set};

    (void)settings__key_walk(mark_groups, &m);
    if (settings__key_walk(reserve_row, &m) != 0)
        return -ENOMEM;
    if (m.tsize > 0) {
        m.table = calloc(m.tsize, sizeof(*m.table));
        if (m.table == NULL)
            return -ENOMEM;
    }
    if (reserve_records(s, L) < 0) {
        free(m.table);
        return -ENOMEM;
    }
    /* From here on nothing fails. */
    (void)settings__key_walk(merge_row, &m);
    merge_records(s, L, set);
    free(m.table);
    return 0;
}
