/* run/creds.h - "credentials" in `sluice run` (issue 24; run/creds.c):
 * each step is one call from launch.c. */
#ifndef SLUICE_RUN_CREDS_H
#define SLUICE_RUN_CREDS_H

#include <stddef.h>

struct run;
struct sb_strv;
struct proxy_creds;

/* After run_tls_prepare (the run directory exists): reads each entry's
 * value, makes the placeholders, the fake files and the table. Nothing
 * without entries. 0, or -1 after a message on stderr naming the entry. */
int run_creds_prepare(struct run *run);
/* The read-only binds for sb_bwrap_opts.late_ro: TLS's, then the fake
 * files and the denied ones' /dev/null. */
const char *const *run_creds_late_ro(const struct run *run);
/* After the environment is built (its secret filter has run): denied and
 * masked variables removed, masked ones added back as their placeholder.
 * 0, or -1 with err. */
int run_creds_env(struct run *run, struct sb_strv *env, char *err, size_t errlen);
/* The table for the proxy service, or NULL. */
struct proxy_creds *run_creds_table(const struct run *run);
/* At the end: placeholders sent elsewhere and refusals, by name. */
void run_creds_summary(const struct run *run);
/* After the service is freed. */
void run_creds_free(struct run *run);

#endif
