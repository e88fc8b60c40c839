/* proxy/learn.h - learning a policy from what a run did (issue 26,
 * deliverable 3): `sluice check --learn LOG` and `sluice run --learn FILE`.
 * The decision records of a connection log (proxy/replay_parse.c reads each
 * one; a run's records are rendered by proxy/log.c and read back the same
 * way) become the smallest network.allowedDomains fragment that would have
 * allowed them (proxy/learn.c), written atomically (proxy/learn_out.c). */
#ifndef SLUICE_PROXY_LEARN_H
#define SLUICE_PROXY_LEARN_H

#include <stddef.h>
#include <stdio.h>

#include "bridge/bridge.h" /* struct connlog */
#include "policy/policy.h"
#include "proxy/replay.h"

#define LEARN_MAX_DESTS 100000 /* distinct host:port kept; more are counted, not learned */
#define LEARN_MAX_NOTES 1000   /* distinct "not learned" notes kept; more are counted */
#define LEARN_WILDCARD_MIN 2   /* subdomains of one registrable domain (on one port) that
                                  make a wildcard */

struct learn;

int learn_new(struct learn **out);
void learn_free(struct learn *l);

/* One decision record. What report mode would not lift is kept as a note,
 * never as a destination: a non-public IP literal (any class but public),
 * a denial by a rule (a deny rule, a managed one, a request rule) or by the
 * address guard (the record names the refused address), a name
 * transparent mode's resolver refused. 0 or -ENOMEM. */
int learn_add(struct learn *l, const struct replay_record *r);

/* A record of a run's connection log (run --learn): rendered as proxy/log.c
 * writes it and read back by replay_parse_line, so a run learns exactly
 * what `check --learn` learns from its log. Close records are skipped. 0,
 * -EINVAL for a record that does not read back (counted and reported by
 * learn_build), or -ENOMEM. */
int learn_add_connlog(struct learn *l, const struct connlog *r);

struct learn_result {
    char *json;             /* the fragment (malloc'd, ends with a newline) */
    size_t entries;         /* network.allowedDomains entries written */
    size_t wildcards;       /* of which '*.DOMAIN:PORT' */
    size_t dests;           /* distinct destinations they allow */
    size_t already;         /* destinations base already allows: left out */
    size_t notes;           /* distinct destinations not learned (noted) */
    unsigned long decisions; /* decision records read */
    unsigned long dropped;  /* records beyond the limits or unreadable: not learned */
};

/* Builds the fragment: {"network": {"allowedDomains": [...]}}, entries
 * sorted, each HOST:PORT (a pattern without a port covers every port),
 * '*.DOMAIN:PORT' where LEARN_WILDCARD_MIN or more subdomains of one
 * registrable domain were seen on that port (never over a public suffix).
 * base (NULL: none): destinations it allows are left out, and those a deny
 * rule of base refuses are noted. The fragment is checked before it is
 * returned: it loads as a settings file and allows every destination it
 * was made for. Notes go to notes (sorted, one a line). 0, or -ENOMEM, or
 * -EINVAL after a message (the check failed: a bug). */
int learn_build(struct learn *l, const struct policy *base, FILE *notes, struct learn_result *res);

/* Where a fragment is written: FILE's directory, opened before a run so
 * that the command cannot choose another one, and its name in it. */
struct learn_out {
    int dirfd;
    char name[256];
    const char *path; /* as given, for messages */
};

/* Opens path's directory and checks that path is not a symbolic link or
 * anything but a regular file. 0, or -1 after a message on stderr. */
int learn_out_open(struct learn_out *o, const char *path);
/* Writes text to a temporary file in the directory (mode 0644 less the
 * umask), syncs it and renames it over the name: readers see the old file
 * or the whole new one. A symbolic link or a non-regular file at the name
 * is refused. 0, or -1 after a message. */
int learn_out_write(struct learn_out *o, const char *text);
void learn_out_close(struct learn_out *o);

/* The one-line summary both front ends print on stderr. */
void learn_print_summary(const struct learn_result *res, const char *where, int with_base);

#endif
