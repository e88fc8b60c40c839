/* cli/cli.h - subcommands of the sluice binary. Each returns the exit status. */
#ifndef SLUICE_CLI_H
#define SLUICE_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct settings;
struct policy;
struct policy_addr;

int cli_check(int argc, char **argv);
void cli_check_usage(FILE *f);

int cli_bridge(int argc, char **argv);
void cli_bridge_usage(FILE *f);

int cli_proxy(int argc, char **argv);
void cli_proxy_usage(FILE *f);

int cli_run(int argc, char **argv);
void cli_run_usage(FILE *f);

int cli_explain(int argc, char **argv);
void cli_explain_usage(FILE *f);

int cli_connect(int argc, char **argv);
void cli_connect_usage(FILE *f);

/* Loads the layered settings (user file, --settings / $SLUICE_SETTINGS,
 * managed file last) and prints notices to stderr. On error prints the
 * located message and returns -1 (the caller exits 2). */
int cli_load_settings(struct settings *s, const char *explicit_path);

/* Prints "sluice VERSION (commit COMMIT)" to stdout; returns 0. */
int cli_version(void);

/* getopt_long returned '?' (unknown option) or ':' (missing value): prints
 * "sluice: CMD: ..." naming the option, and the usage, to stderr. The
 * caller exits 2 (or 125 for run). */
void cli_bad_option(const char *cmd, int c, char **argv, void (*usage)(FILE *f));

#endif
