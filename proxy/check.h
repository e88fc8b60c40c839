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
};

/* Decides (and with resolve, resolves and guards) every target, or every
 * line of the expectation file, and prints the result. The exit status: 0,
 * 1 when an expectation failed, 2 for bad input (settings, targets,
 * expectation lines). */
int check_run(const struct check_opts *o, const struct settings *s);

#endif
