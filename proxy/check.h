/* proxy/check.h - `sluice check`: what the proxy would decide for targets
 * (proxy/check.c). */
#ifndef SLUICE_PROXY_CHECK_H
#define SLUICE_PROXY_CHECK_H

#include <stddef.h>

#include "bridge/bridge.h" /* enum resolver_status */
#include "policy/policy.h"

#define CHECK_MAX_ADDRS 32

struct check_opts {
    const char *const *targets; /* as given */
    size_t ntargets;
    const char *expect_path; /* --expect FILE, or NULL (then targets) */
    int json;
    int resolve;
    int config_test; /* --settings and no target: check_config */
    int transparent; /* --transparent / network.transparent: the resolver's answer too */
    const char *method;      /* --method M for URL targets (default GET), or NULL */
    const char *replay_path; /* --replay LOG ("-": stdin), or NULL */
    const char *learn_path;  /* --learn LOG ("-": stdin), or NULL */
    const char *output_path; /* -o FILE with --learn, or NULL (stdout) */
};

/* One name to resolve for --resolve, and its answers. */
struct check_lookup {
    const char *name;
    enum resolver_status st; /* RESOLVER_FAIL until answered */
    struct policy_addr addrs[CHECK_MAX_ADDRS];
    size_t n;
};

/* Resolves each l[i]->name once through c-ares (network.dnsServers, else
 * /etc/resolv.conf), as check --resolve and check --replay --resolve do,
 * and waits for every answer. 0, or a negative errno after a message. */
int check_resolve(const struct settings *s, struct check_lookup *const *l, size_t n);
const char *check_resolver_status_name(enum resolver_status st);

/* Decides (and with resolve, resolves and guards) every target, or every
 * line of the expectation file, and prints the result. The exit status: 0,
 * 1 when an expectation failed, 2 for bad input (settings, targets,
 * expectation lines). */
int check_run(const struct check_opts *o, const struct settings *s);

/* `sluice check --replay LOG` (proxy/replay.c): judges every decision
 * record of the connection log LOG with the policy of s (loaded from
 * settings_path, NULL for the default files) and prints the decisions that
 * change. 0 when none changes, 1 when one does, 2 for bad settings or a bad
 * log (every bad line reported as LOG:LINE: why; nothing else printed). */
int check_replay(const struct check_opts *o, const struct settings *s, const char *settings_path);

/* `sluice check --learn LOG` (proxy/learn_out.c, proxy/learn.c): the
 * smallest network.allowedDomains fragment that would have allowed the
 * log's decisions, on stdout or written atomically to o->output_path; with
 * an explicit settings file (settings_path not NULL) only what s does not
 * allow already. What is not learned is said on stderr. 0, or 2 for bad
 * settings, a bad log or a file that cannot be written. */
int check_learn(const struct check_opts *o, const struct settings *s, const char *settings_path);

/* The config test (proxy/checkconf.c): compiles the settings loaded from
 * path and prints a one-line summary (rules by kind, mode, unmatched
 * destinations, private addresses, default listeners). 0, or 2 after
 * printing the located error. */
int check_config(const struct settings *s, const char *path);

#endif
