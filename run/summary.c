/* run/summary.c - what `sluice run` reports about the sandbox's
 * connections and refused writes: the connection log (--log FILE, proxy/log.c's records), the summary of blocked
 * connections after the run (filtered by ignoreViolations, off with
 * --quiet), and the -d / SRT_DEBUG lines. */
#include "run/launch-int.h"

#include "common/common.h"
#include "proxy/learn.h"

#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Adds WHAT (REASON) to a summary list, or counts it again. */
static void note(struct blocked *list, size_t *n, unsigned *total, unsigned *dropped,
                 const char *what, const char *reason)
{
    (*total)++;
    for (size_t i = 0; i < *n; i++) {
        if (strcmp(list[i].what, what) == 0 && strcmp(list[i].reason, reason) == 0) {
            list[i].count++;
            return;
        }
    }
    if (*n == RUN_MAX_BLOCKED) {
        (*dropped)++;
        return;
    }
    list[*n].what = strdup(what);
    list[*n].reason = strdup(reason);
    if (list[*n].what == NULL || list[*n].reason == NULL) {
        free(list[*n].what);
        free(list[*n].reason);
        (*dropped)++;
        return;
    }
    list[*n].count = 1;
    (*n)++;
}

static void note_blocked(struct run *run, const struct connlog *r)
{
    char what[300], why[900];
    const char *reason = r->reason != NULL ? r->reason : "";

    /* why, then what to add to allow it (issue 26): one entry, one line */
    if (r->hint != NULL && r->hint[0] != '\0') {
        snprintf(why, sizeof(why), "%.400s%s%.400s", reason, reason[0] != '\0' ? "; " : "",
                 r->hint);
        reason = why;
    }

    if (r->port == 0) /* a name the sandbox's resolver refused (transparent mode) */
        snprintf(what, sizeof(what), "%s (dns)", r->host != NULL ? r->host : "?");
    else
        snprintf(what, sizeof(what), "%s:%u", r->host != NULL ? r->host : "?", (unsigned)r->port);
    note(run->blocked, &run->nblocked, &run->blocked_total, &run->blocked_dropped, what, reason);
}

void run_note_write(struct run *run, const char *path, const char *reason, const char *call)
{
    if (run->o->debug) {
        static char esc[RUN_PATH_MAX * 4 + 1];
        run_debug(run, "write refused: %s (%s): %s", common_escape(path, esc, sizeof(esc)), reason,
                  call);
    }
    note(run->wblocked, &run->nwblocked, &run->wblocked_total, &run->wblocked_dropped, path,
         reason);
}

void run_note_decision(struct run *run, const struct connlog *r)
{
    if (r->event == CONNLOG_DECISION && r->verdict != NULL && strcmp(r->verdict, "deny") == 0)
        note_blocked(run, r);
    if (r->event == CONNLOG_DECISION)
        run_debug(run, "%s %s:%u: %s%s%s", r->protocol != NULL ? r->protocol : "-",
                  r->host != NULL ? r->host : "-", (unsigned)r->port,
                  r->verdict != NULL ? r->verdict : "-",
                  r->reason != NULL && r->reason[0] != '\0' ? ": " : "",
                  r->reason != NULL ? r->reason : "");
    if (run->log_on)
        proxy_log_record(&run->log, r);
    if (run->o->learn != NULL) /* run --learn: a record that does not read back is counted */
        (void)learn_add_connlog(run->o->learn, r);
}

/* The path as the summary shows it: $HOME as "~". */
static const char *shown_path(const char *path, char *buf, size_t len)
{
    const char *home = getenv("HOME");
    size_t hl = home != NULL ? strlen(home) : 0;

    if (hl > 1 && strncmp(path, home, hl) == 0 && (path[hl] == '/' || path[hl] == '\0')) {
        snprintf(buf, len, "~%s", path + hl);
        return buf;
    }
    return path;
}

/* ignoreViolations: {"*": [patterns], "command substring": [patterns]},
 * for the commands its keys name. A pattern hides an entry when it is "*",
 * a substring of what, or an fnmatch(3) glob matching what or alt. */
static int ignored_as(const struct run *run, const char *what, const char *alt)
{
    const struct settings_map *m = &run->settings->ignore_violations;

    for (size_t i = 0; i < m->n; i++) {
        const struct settings_pair *p = &m->pairs[i];
        if (strcmp(p->key, "*") != 0 && (run->cmdline == NULL || strstr(run->cmdline, p->key) == NULL))
            continue;
        for (size_t j = 0; j < p->list.n; j++) {
            const char *pat = p->list.items[j].value;
            if (strcmp(pat, "*") == 0 || strstr(what, pat) != NULL || fnmatch(pat, what, 0) == 0 ||
                fnmatch(pat, alt, 0) == 0)
                return 1;
        }
    }
    return 0;
}

/* A blocked destination "host:port": also matched by its host alone. A
 * refused write: also matched by its path in the "~/..." form. */
static int ignored(const struct run *run, const struct blocked *b, int write)
{
    char buf[RUN_PATH_MAX + 2];
    char host[300];
    const char *colon;

    if (write)
        return ignored_as(run, b->what, shown_path(b->what, buf, sizeof(buf)));
    snprintf(host, sizeof(host), "%s", b->what);
    colon = strrchr(host, ':');
    if (colon != NULL)
        host[colon - host] = '\0';
    return ignored_as(run, b->what, host);
}

/* One summary line: "sluice: blocked 3 connections: evil.example:443 (no
 * rule matches) ×2, ..." or "sluice: blocked 3 writes: /etc/passwd
 * (read-only) ×2, ~/.bashrc (protected)" (the writes the sandbox refused,
 * run/fswrite.c): one entry per destination or path and reason, in the
 * order first met, less what ignoreViolations hides. */
static void print_blocked(const struct run *run, const struct blocked *list, size_t n,
                          unsigned total, unsigned dropped, int write)
{
    static char esc[RUN_PATH_MAX * 4 + 1];
    char buf[RUN_PATH_MAX + 2];
    const char *noun = write ? "write" : "connection";
    unsigned shown = 0;
    int first = 1;

    if (total == 0)
        return;
    for (size_t i = 0; i < n; i++)
        if (!ignored(run, &list[i], write))
            shown += list[i].count;
    shown += dropped;
    if (shown == 0)
        return;
    fprintf(stderr, "sluice: blocked %u %s%s: ", shown, noun, shown == 1 ? "" : "s");
    for (size_t i = 0; i < n; i++) {
        const struct blocked *b = &list[i];
        if (ignored(run, b, write))
            continue;
        if (write) /* the command chose the path: no control bytes reach the terminal */
            fprintf(stderr, "%s%s (%s)", first ? "" : ", ",
                    common_escape(shown_path(b->what, buf, sizeof(buf)), esc, sizeof(esc)),
                    b->reason);
        else if (b->reason[0] != '\0')
            fprintf(stderr, "%s%s (%s)", first ? "" : ", ", b->what, b->reason);
        else
            fprintf(stderr, "%s%s", first ? "" : ", ", b->what);
        if (b->count > 1)
            fprintf(stderr, " \u00d7%u", b->count);
        first = 0;
    }
    if (dropped > 0)
        fprintf(stderr, "%s%u more", first ? "" : ", ", dropped);
    fputc('\n', stderr);
}

void run_print_summary(struct run *run)
{
    if (run->o->quiet)
        return;
    print_blocked(run, run->blocked, run->nblocked, run->blocked_total, run->blocked_dropped, 0);
    print_blocked(run, run->wblocked, run->nwblocked, run->wblocked_total, run->wblocked_dropped,
                  1);
}

void run_summary_free(struct run *run)
{
    for (size_t i = 0; i < run->nblocked; i++) {
        free(run->blocked[i].what);
        free(run->blocked[i].reason);
    }
    run->nblocked = 0;
    for (size_t i = 0; i < run->nwblocked; i++) {
        free(run->wblocked[i].what);
        free(run->wblocked[i].reason);
    }
    run->nwblocked = 0;
}

void run_debug(const struct run *run, const char *fmt, ...)
{
    va_list ap;

    if (!run->o->debug)
        return;
    fputs("[SandboxDebug] ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

void run_phase(struct run *run, const char *name)
{
    int64_t now = common_mono_us();

    if (run->phase_at == 0)
        run->phase_at = run->o->t0_us != 0 ? run->o->t0_us : now;
    if (run->nphases < RUN_PHASES_MAX) {
        run->phase_name[run->nphases] = name;
        run->phase_us[run->nphases] = now - run->phase_at;
        run->nphases++;
    }
    run->phase_at = now;
}

void run_debug_phases(const struct run *run)
{
    char line[1024];
    size_t off = 0;
    int64_t total = 0;

    if (!run->o->debug || run->nphases == 0)
        return;
    for (size_t i = 0; i < run->nphases; i++) {
        int n = snprintf(line + off, sizeof(line) - off, "%s%s %.2f", i > 0 ? ", " : "",
                         run->phase_name[i], (double)run->phase_us[i] / 1000.0);
        if (n < 0 || (size_t)n >= sizeof(line) - off)
            break;
        off += (size_t)n;
        total += run->phase_us[i];
    }
    run_debug(run, "time (ms): %s; total %.2f", line, (double)total / 1000.0);
}
