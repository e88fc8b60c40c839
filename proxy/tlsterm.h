/* proxy/tlsterm.h - network.tlsTerminate in sluice proxy: the settings
 * check at load, the process-wide part (the CA from files, the leaf cache,
 * the count of terminated tunnels) and one loop's part (the server and
 * upstream contexts: one SSL_CTX pair per loop thread). */
#ifndef SLUICE_PROXY_TLSTERM_H
#define SLUICE_PROXY_TLSTERM_H

#include <stddef.h>

struct settings;
struct settings_error;
struct tls_leaves;
struct tls_server_ctx;
struct tls_client_ctx;

/* What sluice proxy refuses in network.tlsTerminate: no CA from files, and
 * what it does not implement yet (scope "needed"). 0, or -1 with a located
 * message in err. */
int proxy_tls_settings_check(const struct settings *s, struct settings_error *err);

/* Shared by every loop: made once at start from the settings. */
struct proxy_tls_shared {
    struct tls_leaves *leaves;
    char *cert_path, *key_path; /* as loaded, to refuse a reload that changes them */
    char **extra;               /* extraCaCertPaths */
    size_t nextra;
    size_t open; /* atomic: terminated tunnels open, process-wide (maxTunnels) */
    const char *warning; /* tls_ca_warning() of the CA (static), or NULL */
};

/* NULL *out when the settings do not give tlsTerminate. 0, or -1 with a
 * message in err. */
int proxy_tls_shared_new(const struct settings *s, struct proxy_tls_shared **out, char *err,
                         size_t errlen);
void proxy_tls_shared_free(struct proxy_tls_shared *sh);
/* 0 when settings s keep the CA and the upstream trust files of sh (a
 * reload cannot change them: they are loaded at start); -1 with err. */
int proxy_tls_reload_check(const struct proxy_tls_shared *sh, const struct settings *s,
                           struct settings_error *err);

/* One loop's contexts. */
struct proxy_tls {
    struct proxy_tls_shared *sh;
    struct tls_server_ctx *sctx;
    struct tls_client_ctx *cctx;
};
int proxy_tls_new(struct proxy_tls_shared *sh, struct proxy_tls **out, char *err, size_t errlen);
void proxy_tls_free(struct proxy_tls *t);

#endif
