/* proxy/tlsterm.c - network.tlsTerminate in sluice proxy: the load check,
 * the CA and leaf cache shared by the workers, each loop's contexts. */
#include "proxy/tlsterm.h"

#include "settings/settings.h"
#include "tls/tls.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

int proxy_tls_settings_check(const struct settings *s, struct settings_error *err)
{
    const __typeof__(s->network.tls_terminate) *t = &s->network.tls_terminate;

    if (!t->given.set)
        return 0;
    if (t->ca_cert_path == NULL) {
        snprintf(err->msg, sizeof(err->msg),
                 "%s:%u:%u: network.tlsTerminate: sluice proxy needs a CA from files: give "
                 "caCertPath and caKeyPath (a CA made per run is for sluice run, whose clients "
                 "are given its certificate)",
                 t->given.file, t->given.line, t->given.col);
        return -1;
    }
    return 0;
}

void proxy_tls_shared_free(struct proxy_tls_shared *sh)
{
    if (sh == NULL)
        return;
    tls_leaves_unref(sh->leaves);
    for (size_t i = 0; i < sh->nextra; i++)
        free(sh->extra[i]);
    free(sh->extra);
    free(sh->cert_path);
    free(sh->key_path);
    free(sh);
}

int proxy_tls_shared_new(const struct settings *s, struct proxy_tls_shared **out, char *err,
                         size_t errlen)
{
    const struct settings_list *ex = &s->network.tls_terminate.extra_ca_cert_paths;
    struct proxy_tls_shared *sh;
    struct tls_ca *ca = NULL;
    int rc = -1;

    *out = NULL;
    if (!s->network.tls_terminate.given.set)
        return 0;
    sh = calloc(1, sizeof(*sh));
    if (sh == NULL || (sh->extra = calloc(ex->n + 1, sizeof(char *))) == NULL)
        goto nomem;
    sh->cert_path = strdup(s->network.tls_terminate.ca_cert_path);
    sh->key_path = strdup(s->network.tls_terminate.ca_key_path);
    if (sh->cert_path == NULL || sh->key_path == NULL)
        goto nomem;
    for (size_t i = 0; i < ex->n; i++) {
        if ((sh->extra[i] = strdup(ex->items[i].value)) == NULL)
            goto nomem;
        sh->nextra++;
    }
    if (tls_ca_load(sh->cert_path, sh->key_path, &ca, err, errlen) < 0)
        goto out;
    if (tls_leaves_new(ca, NULL, &sh->leaves, err, errlen) < 0)
        goto out;
    sh->warning = tls_ca_warning(ca);
    *out = sh;
    sh = NULL;
    rc = 0;
    goto out;
nomem:
    snprintf(err, errlen, "out of memory");
out:
    tls_ca_free(ca);
    proxy_tls_shared_free(sh);
    return rc;
}

static int same_str(const char *a, const char *b)
{
    return (a == NULL && b == NULL) || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

int proxy_tls_reload_check(const struct proxy_tls_shared *sh, const struct settings *s,
                           struct settings_error *err)
{
    const __typeof__(s->network.tls_terminate) *t = &s->network.tls_terminate;
    int same = (sh == NULL) == !t->given.set;

    if (same && sh != NULL) {
        same = same_str(sh->cert_path, t->ca_cert_path) && same_str(sh->key_path, t->ca_key_path) &&
               sh->nextra == t->extra_ca_cert_paths.n;
        for (size_t i = 0; same && i < sh->nextra; i++)
            same = strcmp(sh->extra[i], t->extra_ca_cert_paths.items[i].value) == 0;
    }
    if (same)
        return 0;
    snprintf(err->msg, sizeof(err->msg),
             "network.tlsTerminate: turning TLS termination on or off, its CA files and "
             "extraCaCertPaths take effect at start only: restart sluice proxy");
    return -1;
}

void proxy_tls_free(struct proxy_tls *t)
{
    if (t == NULL)
        return;
    tls_server_ctx_free(t->sctx);
    tls_client_ctx_free(t->cctx);
    free(t);
}

int proxy_tls_new(struct proxy_tls_shared *sh, struct proxy_tls **out, char *err, size_t errlen)
{
    struct proxy_tls *t = calloc(1, sizeof(*t));

    *out = NULL;
    if (t == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    t->sh = sh;
    if (tls_server_ctx_new(sh->leaves, &t->sctx, err, errlen) < 0 ||
        tls_client_ctx_new(NULL, (const char *const *)sh->extra, sh->nextra, &t->cctx, err,
                           errlen) < 0) {
        proxy_tls_free(t);
        return -1;
    }
    *out = t;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Handshake metrics                                                         */

const char *const proxy_tls_fail_names[PROXY_TLS_F_N] = {
    "timeout", "bad_hello", "alpn", "cert_refused", "alert",
    "verify", "closed", "connect", "protocol", "internal",
};
const char *const proxy_tls_side_names[PROXY_TLS_SIDES] = {"client", "origin"};

enum proxy_tls_fail proxy_tls_fail_of(const char *reason)
{
    static const struct {
        const char *text; /* a part of the reason */
        enum proxy_tls_fail f;
    } map[] = {
        {"no TLS handshake within", PROXY_TLS_F_TIMEOUT},
        {"ClientHello", PROXY_TLS_F_BAD_HELLO},
        {"not TLS", PROXY_TLS_F_BAD_HELLO},
        {"ALPN", PROXY_TLS_F_ALPN},
        {"refused the certificate", PROXY_TLS_F_CERT_REFUSED},
        {"alert", PROXY_TLS_F_ALERT},
        {"certificate", PROXY_TLS_F_VERIFY},
        {"issuer", PROXY_TLS_F_VERIFY},
        {"invalid CA", PROXY_TLS_F_VERIFY},
        {"closed", PROXY_TLS_F_CLOSED},
        {"end of stream", PROXY_TLS_F_CLOSED},
        {"cannot connect", PROXY_TLS_F_CONNECT},
        {"mint", PROXY_TLS_F_INTERNAL},
        {"out of memory", PROXY_TLS_F_INTERNAL},
        {"socket pair", PROXY_TLS_F_INTERNAL},
    };

    if (reason == NULL)
        return PROXY_TLS_F_PROTOCOL;
    /* "cannot mint the leaf" names no certificate, but check it first all
     * the same: a mint failure is sluice's own */
    if (strstr(reason, "cannot mint") != NULL)
        return PROXY_TLS_F_INTERNAL;
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if (strstr(reason, map[i].text) != NULL)
            return map[i].f;
    return PROXY_TLS_F_PROTOCOL;
}

void proxy_tls_count(struct proxy_tls *t, enum proxy_tls_side side, const char *reason)
{
    if (t == NULL)
        return;
    if (reason == NULL)
        __atomic_fetch_add(&t->sh->handshakes[side], 1, __ATOMIC_RELAXED);
    else
        __atomic_fetch_add(&t->sh->failures[side][proxy_tls_fail_of(reason)], 1,
                           __ATOMIC_RELAXED);
}
