/* proxy/tlsterm.h - network.tlsTerminate in sluice proxy: the settings
 * check at load, the process-wide part (the CA from files, the leaf cache,
 * the count of terminated tunnels) and one loop's part (the server and
 * upstream contexts: one SSL_CTX pair per loop thread). */
#ifndef SLUICE_PROXY_TLSTERM_H
#define SLUICE_PROXY_TLSTERM_H

#include <stddef.h>
#include <stdint.h>

struct settings;
struct settings_error;
struct tls_leaves;
struct tls_server_ctx;
struct tls_client_ctx;

/* What sluice proxy refuses in network.tlsTerminate: no CA from files (a
 * per-run CA is for sluice run). 0, or -1 with a located message in err. */
int proxy_tls_settings_check(const struct settings *s, struct settings_error *err);

/* Handshake metrics: the side, and a small fixed set of failure reasons
 * (the labels of sluice_tls_handshake_failures_total). */
enum proxy_tls_side { PROXY_TLS_CLIENT = 0, PROXY_TLS_ORIGIN, PROXY_TLS_SIDES };
enum proxy_tls_fail {
    PROXY_TLS_F_TIMEOUT = 0, /* no handshake within handshakeTimeoutMs */
    PROXY_TLS_F_BAD_HELLO,   /* malformed, oversized or not TLS */
    PROXY_TLS_F_ALPN,        /* no ALPN protocol sluice serves */
    PROXY_TLS_F_CERT_REFUSED, /* the peer refused our certificate (unknown_ca, ...) */
    PROXY_TLS_F_ALERT,       /* another alert from the peer */
    PROXY_TLS_F_VERIFY,      /* the origin's certificate failed verification */
    PROXY_TLS_F_CLOSED,      /* the peer closed during the handshake */
    PROXY_TLS_F_CONNECT,     /* the origin could not be reached */
    PROXY_TLS_F_PROTOCOL,    /* versions, ciphers, anything else in TLS */
    PROXY_TLS_F_INTERNAL,    /* sluice's side: a mint, memory, sockets */
    PROXY_TLS_F_N,
};
extern const char *const proxy_tls_fail_names[PROXY_TLS_F_N];
extern const char *const proxy_tls_side_names[PROXY_TLS_SIDES];
/* The reason label of a failure text (the texts of tls_conn_reason() and
 * of the front end's own failures). Pure. */
enum proxy_tls_fail proxy_tls_fail_of(const char *reason);

/* Shared by every loop: made once at start from the settings. */
struct proxy_tls_shared {
    struct tls_leaves *leaves;
    char *cert_path, *key_path; /* as loaded, to refuse a reload that changes them */
    char **extra;               /* extraCaCertPaths */
    size_t nextra;
    size_t open; /* atomic: terminated tunnels open, process-wide (maxTunnels) */
    /* atomic: handshakes done and failed, by side (and reason) */
    uint64_t handshakes[PROXY_TLS_SIDES];
    uint64_t failures[PROXY_TLS_SIDES][PROXY_TLS_F_N];
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
/* Counts a handshake done (reason NULL) or failed on side, on t (NULL: not
 * counted). Any thread. */
void proxy_tls_count(struct proxy_tls *t, enum proxy_tls_side side, const char *reason);
int proxy_tls_new(struct proxy_tls_shared *sh, struct proxy_tls **out, char *err, size_t errlen);
void proxy_tls_free(struct proxy_tls *t);

#endif
