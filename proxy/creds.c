/* proxy/creds.c - the credential table of a run (creds.h). */
#define _GNU_SOURCE
#include "proxy/creds.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/random.h>

#include "settings/settings.h"

static int fill_random(uint8_t *b, size_t n)
{
    while (n > 0) {
        ssize_t r = getrandom(b, n, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -EIO;
        b += r;
        n -= (size_t)r;
    }
    return 0;
}

/* An unbiased pick in 0..n-1 from random bytes. */
static int pick(unsigned n, unsigned *out)
{
    uint8_t b;
    unsigned limit = 256u - 256u % n;

    do {
        if (fill_random(&b, 1) < 0)
            return -EIO;
    } while (b >= limit);
    *out = b % n;
    return 0;
}

static int class_of(uint8_t c)
{
    if (c >= '0' && c <= '9')
        return 1;
    if (c >= 'a' && c <= 'z')
        return 2;
    if (c >= 'A' && c <= 'Z')
        return 3;
    return 0;
}

int proxy_cred_placeholder(const uint8_t *real, size_t len, uint8_t *fake)
{
    static const char alnum[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    size_t nalnum = 0;

    for (size_t i = 0; i < len; i++)
        nalnum += class_of(real[i]) != 0;
    for (size_t i = 0; i < len; i++) {
        int k = nalnum >= SUBST_LEN_MIN ? class_of(real[i]) : 4;
        unsigned r;
        if (k == 0) {
            fake[i] = real[i];
            continue;
        }
        if (pick(k == 1 ? 10 : k == 4 ? 62 : 26, &r) < 0)
            return -EIO;
        if (k == 4)
            fake[i] = (uint8_t)alnum[r];
        else
            fake[i] = (uint8_t)((k == 1 ? 48u : k == 2 ? 97u : 65u) + r); /* '0' 'a' 'A' */
    }
    return 0;
}

static int clashes(const struct proxy_creds *t, const uint8_t *fake, size_t len)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->e[i].len == len &&
            (memcmp(t->e[i].fake, fake, len) == 0 || memcmp(t->e[i].real, fake, len) == 0))
            return 1;
    return 0;
}

int proxy_creds_add(struct proxy_creds *t, const char *name, int file, const uint8_t *real,
                    size_t len, const uint8_t *fake)
{
    struct proxy_cred *e;

    if (t->n >= SUBST_MAX || len < SUBST_LEN_MIN || len > SUBST_LEN_MAX)
        return -EINVAL;
    e = &t->e[t->n];
    memset(e, 0, sizeof(*e));
    e->name = strdup(name);
    e->real = malloc(len);
    e->fake = malloc(len);
    if (e->name == NULL || e->real == NULL || e->fake == NULL)
        goto nomem;
    memcpy(e->real, real, len);
    e->len = len;
    if (fake != NULL) {
        memcpy(e->fake, fake, len);
    } else {
        int tries = 0;
        do {
            if (proxy_cred_placeholder(real, len, e->fake) < 0 || ++tries > 8) {
                explicit_bzero(e->real, len);
                free(e->real);
                free(e->fake);
                free(e->name);
                return tries > 8 ? -EINVAL : -EIO;
            }
        } while (memcmp(e->fake, real, len) == 0 || clashes(t, e->fake, len));
    }
    if (memcmp(e->fake, real, len) == 0 || clashes(t, e->fake, len) || clashes(t, real, len)) {
        explicit_bzero(e->real, len);
        free(e->real);
        free(e->fake);
        free(e->name);
        return -EINVAL;
    }
    t->n++;
    return 0;
nomem:
    free(e->name);
    free(e->real);
    free(e->fake);
    return -ENOMEM;
}

int proxy_creds_seal(struct proxy_creds *t)
{
    struct subst_pair a[SUBST_MAX], b[SUBST_MAX];

    for (size_t i = 0; i < t->n; i++) {
        a[i] = (struct subst_pair){t->e[i].fake, t->e[i].real, t->e[i].len};
        b[i] = (struct subst_pair){t->e[i].real, t->e[i].fake, t->e[i].len};
    }
    if (subst_set_init(&t->to_real, a, t->n) < 0 || subst_set_init(&t->to_fake, b, t->n) < 0)
        return -EINVAL;
    return 0;
}

void proxy_creds_clear(struct proxy_creds *t)
{
    for (size_t i = 0; i < t->n; i++) {
        explicit_bzero(t->e[i].real, t->e[i].len);
        free(t->e[i].real);
        free(t->e[i].fake);
        free(t->e[i].name);
    }
    explicit_bzero(t, sizeof(*t));
}

int proxy_creds_settings_check(const struct settings *s, struct settings_error *err)
{
    const struct settings_list *lists[2] = {&s->credentials.env_vars, &s->credentials.files};

    for (size_t l = 0; l < 2; l++)
        for (size_t i = 0; i < lists[l]->n; i++) {
            const struct settings_item *it = &lists[l]->items[i];
            struct settings_credential cr;
            if (settings_credential_split(it->value, &cr) < 0)
                continue;
            snprintf(err->msg, sizeof(err->msg), "%s:%u:%u: %s[%zu]: refused by sluice proxy: %s",
                     it->file, it->line, it->col, it->list, it->index,
                     cr.mask ? "mode \"mask\" hands a sandbox a placeholder, and sluice proxy "
                               "has no sandbox to mask (its clients hold their own secrets); "
                               "use credentials with sluice run"
                             : "mode \"deny\" hides a secret from a sandbox, and sluice proxy "
                               "has no sandbox; use credentials with sluice run");
            return -1;
        }
    return 0;
}
