/* sandbox/explain.h - `sluice explain` (sandbox/explain.c). */
#ifndef SLUICE_SANDBOX_EXPLAIN_H
#define SLUICE_SANDBOX_EXPLAIN_H

struct settings;

/* Prints on stdout what a command run by `sluice run` with settings s may
 * and may not do, as text or (json) one JSON object. 0, or 1 when out of
 * memory. */
int sb_explain(const struct settings *s, int json);

#endif
