/* run/creds.h - "credentials" in `sluice run` (issue 24; run/creds.c):
 * each step is one call from launch.c. */
#ifndef SLUICE_RUN_CREDS_H
#define SLUICE_RUN_CREDS_H

#include <stddef.h>

struct run;
struct sb_strv;
struct proxy_creds;

/* Before the host checks (after run_tp_settings): what the settings
 * cannot have in sluice run (header injection; masked entries where the
 * sandbox's connections bypass the proxy), reported before any missing
 * kernel piece. 0, or -1 after a message on stderr naming the entry. */
struct settings;
int run_creds_check(const struct settings *s);
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
/* After the plan is built (issue 24 item 4, run/creds_trust.c): every
 * masking entry, and what widens where its value may go (allowedDomains
 * when an entry has no injectHosts, tlsTerminate.extraCaCertPaths), comes
 * from a settings file the sandbox could not have written (outside the
 * plan's writable binds and directories writable by others, owned by root
 * or us, not writable by others, one link). 0, or -1 after a message
 * naming the file:line and why. */
int run_creds_trust(struct run *run);
/* The same for settings s and the writable places writable[0..n): 0, or
 * -1 with err. */
int run_creds_trust_check(const struct settings *s, const char *const *writable, size_t n,
                          char *err, size_t errlen);
/* One file: 0 when trusted, else -1 with why ("is inside '/w', which ..."). */
int run_settings_file_trusted(const char *path, const char *const *writable, size_t n, char *why,
                              size_t whylen);
/* After run_creds_trust (issue 24 item 4): each envVars entry with
 * value.exec runs its helper once (all at once, each with its timeout);
 * its output is the value, its placeholder the variable's. Any that fails
 * fails the run: 0, or -1 after a message naming the entry and why. */
int run_creds_exec(struct run *run);
/* After the proxy service started: the helpers run again on the run's loop
 * before their values expire, and each new value is swapped in. 0 or -1
 * (out of memory). */
int run_creds_start(struct run *run);
/* With the loop's other handles (close_all). */
void run_creds_close(struct run *run);
/* After the service is freed. */
void run_creds_free(struct run *run);

#endif
