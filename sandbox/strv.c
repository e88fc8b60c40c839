/* sandbox/strv.c - growable NULL-terminated string vectors, and path order. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox/sandbox.h"

static int strv_take(struct sb_strv *a, char *s)
{
    if (a->n + 2 > a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 16;
        char **v = realloc(a->v, cap * sizeof *v);
        if (v == NULL) {
            free(s);
            return -ENOMEM;
        }
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = s;
    a->v[a->n] = NULL;
    return 0;
}

int sb_strv_push(struct sb_strv *a, const char *s)
{
    char *d = strdup(s);
    if (d == NULL)
        return -ENOMEM;
    return strv_take(a, d);
}

int sb_strv_pushf(struct sb_strv *a, const char *fmt, ...)
{
    va_list ap;
    char *s = NULL;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return -EINVAL;
    s = malloc((size_t)n + 1);
    if (s == NULL)
        return -ENOMEM;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return strv_take(a, s);
}

void sb_strv_free(struct sb_strv *a)
{
    for (size_t i = 0; i < a->n; i++)
        free(a->v[i]);
    free(a->v);
    a->v = NULL;
    a->n = a->cap = 0;
}

int sb_path_cmp(const char *a, const char *b)
{
    for (size_t i = 0;; i++) {
        int ca = a[i] == '/' ? 1 : a[i] == '\0' ? 0 : (unsigned char)a[i] + 1;
        int cb = b[i] == '/' ? 1 : b[i] == '\0' ? 0 : (unsigned char)b[i] + 1;
        if (ca != cb)
            return ca < cb ? -1 : 1;
        if (ca == 0)
            return 0;
    }
}
