/* run/tls_trust.h - TLS termination in `sluice run` (issue 23): the run's
 * CA (from files, or made per run with its key in memory only), the
 * termination state of the proxy service, and the sandbox's trust in the
 * CA (a bundle at the system bundle paths, srt's variables, a Java trust
 * store, the CA key file hidden). Each step is one call from launch.c. */
#ifndef SLUICE_RUN_TLS_TRUST_H
#define SLUICE_RUN_TLS_TRUST_H

#include <stddef.h>

struct run;
struct sb_strv;

/* Before the plan (the run directory exists): nothing when the settings
 * give neither network.tlsTerminate nor network.requestRules. Else refuses
 * what run cannot do with termination (a message naming the key), turns
 * termination on for the ruled hosts only when request rules come without
 * tlsTerminate (scope "needed", a CA made per run), loads or makes the CA,
 * writes the bundle and the trust store in the run directory. 0, or -1
 * after a message on stderr. */
int run_tls_prepare(struct run *run);

/* The read-only binds for sb_bwrap_opts.late_ro (NULL when termination is
 * off). */
const char *const *run_tls_late_ro(const struct run *run);

/* After the environment is built (and its secret filter has run): srt's
 * variables point at the bundle, JAVA_TOOL_OPTIONS gets the trust store.
 * 0, or -1 with err. */
int run_tls_env(struct run *run, struct sb_strv *env, char *err, size_t errlen);

/* After the proxy service started: its loop's TLS contexts. 0 or -1 with
 * err. */
int run_tls_start(struct run *run, char *err, size_t errlen);

/* After the service is freed. */
void run_tls_free(struct run *run);

#endif
