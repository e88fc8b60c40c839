/* proxy/watch.c - `sluice proxy --watch`: reload when the settings change.
 *
 * inotify (uv_fs_event) on directories, not files: an editor that writes a
 * new file and renames it over the old one, and kubelet's ConfigMap update
 * (a new ..TIMESTAMP directory, then a rename of the ..data symlink over the
 * old one) replace the inode a file watch would be on. In each directory
 * only the names sluice reads, and kubelet's ..-prefixed names, count.
 * Events are debounced into one callback; the caller reloads and calls
 * watch_update, which watches the new set before it drops the old one, so no
 * change between the two is missed.
 */
#define _XOPEN_SOURCE 700 /* realpath */
#include "policy/policy.h"
#include "proxy/ops.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#define WATCH_MANAGED_PATH "/etc/sluice/managed.json" /* as policy/settings.c */

struct wdir {
    uv_fs_event_t ev;
    struct watch *w;
    char *dir;
    char **names;
    size_t nnames;
    int required; /* the settings file's directory (or its link target's) */
    struct wdir *next;
};

struct watch {
    uv_loop_t *loop;
    uv_timer_t debounce;
    unsigned debounce_ms;
    void (*cb)(void *ctx);
    void *ctx;
    char *settings_path;
    struct wdir *dirs;
    size_t ndirs;
    size_t closing; /* handles still closing after watch_close */
    void (*close_cb)(void *arg);
    void *close_arg;
};

static void wdir_free(struct wdir *d)
{
    for (size_t i = 0; i < d->nnames; i++)
        free(d->names[i]);
    free(d->names);
    free(d->dir);
    free(d);
}

static void on_debounced(uv_timer_t *t)
{
    struct watch *w = t->data;

    w->cb(w->ctx);
}

static void on_event(uv_fs_event_t *h, const char *name, int events, int status)
{
    struct wdir *d = h->data;
    struct watch *w = d->w;
    int relevant = name == NULL || status < 0 || strncmp(name, "..", 2) == 0;

    (void)events;
    for (size_t i = 0; !relevant && i < d->nnames; i++)
        relevant = strcmp(name, d->names[i]) == 0;
    if (relevant && w->close_cb == NULL)
        uv_timer_start(&w->debounce, on_debounced, w->debounce_ms, 0);
}

/* Adds name to the entry for dir in *list (creating it). 0 or -ENOMEM. */
static int add_name(struct wdir **list, const char *dir, const char *name)
{
    struct wdir *d;
    char **names;

    for (d = *list; d != NULL; d = d->next)
        if (strcmp(d->dir, dir) == 0)
            break;
    if (d == NULL) {
        d = calloc(1, sizeof(*d));
        if (d == NULL || (d->dir = strdup(dir)) == NULL) {
            free(d);
            return -ENOMEM;
        }
        d->next = *list;
        *list = d;
    }
    for (size_t i = 0; i < d->nnames; i++)
        if (strcmp(d->names[i], name) == 0)
            return 0;
    names = realloc(d->names, (d->nnames + 1) * sizeof(*names));
    if (names == NULL)
        return -ENOMEM;
    d->names = names;
    if ((d->names[d->nnames] = strdup(name)) == NULL)
        return -ENOMEM;
    d->nnames++;
    return 0;
}

/* The directory and name of path, and of its target when it is a link. */
static int add_path(struct wdir **list, const char *path)
{
    char buf[PATH_MAX], real[PATH_MAX];
    char *slash;
    int rc;

    if (path == NULL || path[0] == '\0' || path[0] == '<' || strlen(path) >= sizeof(buf))
        return 0;
    if (path[0] == '/') {
        snprintf(buf, sizeof(buf), "%s", path);
    } else {
        char cwd[PATH_MAX];
        if (getcwd(cwd, sizeof(cwd)) == NULL ||
            (size_t)snprintf(buf, sizeof(buf), "%s/%s", cwd, path) >= sizeof(buf))
            return 0;
    }
    slash = strrchr(buf, '/');
    *slash = '\0';
    rc = add_name(list, buf[0] != '\0' ? buf : "/", slash + 1);
    if (rc < 0)
        return rc;
    *slash = '/';
    if (realpath(buf, real) != NULL && strcmp(real, buf) != 0) {
        slash = strrchr(real, '/');
        *slash = '\0';
        rc = add_name(list, real[0] != '\0' ? real : "/", slash + 1);
    }
    return rc;
}

/* A directory dropped by watch_update. */
static void on_old_dir_closed(uv_handle_t *h)
{
    wdir_free(h->data);
}

static void close_dirs(struct wdir *d)
{
    while (d != NULL) {
        struct wdir *next = d->next;
        uv_close((uv_handle_t *)&d->ev, on_old_dir_closed);
        d = next;
    }
}

/* One of the handles watch_close closes: the last one frees w. */
static void release(struct watch *w)
{
    if (--w->closing == 0) {
        void (*cb)(void *) = w->close_cb;
        void *arg = w->close_arg;
        free(w->settings_path);
        free(w);
        cb(arg);
    }
}

static void on_final_dir_closed(uv_handle_t *h)
{
    struct wdir *d = h->data;
    struct watch *w = d->w;

    wdir_free(d);
    release(w);
}

static void on_timer_closed(uv_handle_t *h)
{
    release(h->data);
}

/* credentials.headers' value files (a Kubernetes Secret's key is a link
 * into a ..TIMESTAMP directory, swapped like a ConfigMap's). */
static int add_value_files(struct wdir **list, const struct settings *s)
{
    const char *home = getenv("HOME");
    int rc = 0;

    for (size_t i = 0; rc == 0 && s != NULL && i < s->credentials.headers.n; i++) {
        struct settings_header h;
        char path[PATH_MAX];
        if (settings_header_split(s->credentials.headers.items[i].value, &h) < 0 ||
            h.kind != SETTINGS_HDR_FILE)
            continue;
        if (h.source[0] == '~' && home != NULL)
            snprintf(path, sizeof(path), "%s%.*s", home, (int)h.source_len - 1, h.source + 1);
        else
            snprintf(path, sizeof(path), "%.*s", (int)h.source_len, h.source);
        if (path[0] == '/')
            rc = add_path(list, path);
    }
    return rc;
}

int watch_update(struct watch *w, const struct settings *s)
{
    struct wdir *list = NULL, *d, **pp;
    size_t n = 0;
    int rc = 0;

    rc = add_path(&list, w->settings_path);
    for (d = list; d != NULL; d = d->next)
        d->required = 1;
    for (size_t i = 0; rc == 0 && s != NULL && i < s->nfiles; i++)
        rc = add_path(&list, s->files[i]);
    if (rc == 0)
        rc = add_path(&list, WATCH_MANAGED_PATH);
    if (rc == 0)
        rc = add_value_files(&list, s);
    /* start the new watches; a directory that does not exist (no managed
     * file, a list file's directory gone) is skipped, but not the settings
     * file's own: then the old watches stay and the caller hears of it */
    for (pp = &list; rc == 0 && (d = *pp) != NULL;) {
        d->w = w;
        uv_fs_event_init(w->loop, &d->ev);
        d->ev.data = d;
        int st = uv_fs_event_start(&d->ev, on_event, d->dir, 0);
        if (st < 0 && d->required)
            rc = st;
        if (st < 0) {
            *pp = d->next;
            d->next = NULL;
            uv_close((uv_handle_t *)&d->ev, on_old_dir_closed);
            continue;
        }
        n++;
        pp = &d->next;
    }
    if (rc < 0) {
        /* entries from pp on were never started: free them; the started
         * ones before pp close first */
        while ((d = *pp) != NULL) {
            *pp = d->next;
            wdir_free(d);
        }
        close_dirs(list);
        return rc;
    }
    if (n == 0) {
        close_dirs(list);
        return -ENOENT;
    }
    close_dirs(w->dirs);
    w->dirs = list;
    w->ndirs = n;
    return 0;
}

int watch_start(struct watch **out, uv_loop_t *loop, const char *settings_path,
                const struct settings *s, unsigned debounce_ms, void (*cb)(void *ctx), void *ctx,
                const char **why)
{
    struct watch *w;
    int rc;

    *out = NULL;
    if (settings_path == NULL) {
        *why = "--watch needs the settings file named by --settings or $SLUICE_SETTINGS";
        return -EINVAL;
    }
    w = calloc(1, sizeof(*w));
    if (w == NULL || (w->settings_path = strdup(settings_path)) == NULL) {
        free(w);
        *why = "out of memory";
        return -ENOMEM;
    }
    w->loop = loop;
    w->debounce_ms = debounce_ms;
    w->cb = cb;
    w->ctx = ctx;
    uv_timer_init(loop, &w->debounce);
    w->debounce.data = w;
    rc = watch_update(w, s);
    if (rc < 0) {
        *why = rc == -ENOMEM ? "out of memory" : "cannot watch the settings file's directory";
        watch_close(w, NULL, NULL);
        return rc;
    }
    *out = w;
    return 0;
}

size_t watch_dirs(const struct watch *w)
{
    return w != NULL ? w->ndirs : 0;
}

static void noop(void *arg)
{
    (void)arg;
}

void watch_close(struct watch *w, void (*cb)(void *arg), void *arg)
{
    struct wdir *d, *next;

    if (w == NULL) {
        if (cb != NULL)
            cb(arg);
        return;
    }
    w->close_cb = cb != NULL ? cb : noop;
    w->close_arg = arg;
    w->closing = 1; /* the debounce timer */
    for (d = w->dirs; d != NULL; d = d->next)
        w->closing++;
    for (d = w->dirs; d != NULL; d = next) {
        next = d->next;
        uv_close((uv_handle_t *)&d->ev, on_final_dir_closed);
    }
    w->dirs = NULL;
    w->ndirs = 0;
    uv_close((uv_handle_t *)&w->debounce, on_timer_closed);
}
