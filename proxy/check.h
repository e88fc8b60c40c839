/* proxy/check.h - `sluice check`: what the proxy would decide for targets
 * (proxy/check.c). */
#ifndef SLUICE_PROXY_CHECK_H
#define SLUICE_PROXY_CHECK_H

#include <stddef.h>

struct settings;

struct check_opts {
    const char *const *targets; /* as given */
    size_t ntargets;
    const char *expect_path; /* --expect FILE, or NULL (then targets) */
    int json;
    int resolve;
    int config_test; /* --settings and no target: check_config */
    int transparent; /* --transparent / network.transparent: the resolver's answer too */
    const char *method; /* --method M for URL targets (default GET), or NULL */
};

/* Decides (and with resolve, resolves and guards) every target, or every
 * line of the expectation file, and prints the result. The exit status: 0,
 * 1 when an expectation failed, 2 for bad input (settings, targets,
 * expectation lines). */
int check_run(const struct check_opts *o, const struct settings *s);

/* The config test (proxy/checkconf.c): compiles the settings loaded from
 * path and prints a one-line summary (rules by kind, mode, unmatched
 * destinations, private addresses, default listeners). 0, or 2 after
 * printing the located error. */
int check_config(const struct settings *s, const char *path);

#endif
