/* sandbox/summary.c - what `sluice run` reports about the sandbox's
 * connections: the connection log (--log FILE, proxy/log.c's records), the summary of blocked
 * connections after the run (filtered by ignoreViolations, off with
 * --quiet), and the -d / SRT_DEBUG lines. */
#include "sandbox/launch-int.h"

#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void note_blocked(struct run *run, const struct connlog *r)
{
    char what[300];
    const char *reason = r->reason != NULL ? r->reason : "";

    if (r->port == 0) /* a name the sandbox's resolver refused (transparent mode) */
        snprintf(what, sizeof(what), "%s (dns)", r->host != NULL ? r->host : "?");
    else
        snprintf(what, sizeof(what), "%s:%u", r->host != NULL ? r->host : "?", (unsigned)r->port);
    run->blocked_total++;
    for (size_t i = 0; i < run->nblocked; i++) {
        if (strcmp(run->blocked[i].what, what) == 0 && strcmp(run->blocked[i].reason, reason) == 0) {
            run->blocked[i].count++;
            return;
        }
    }
    if (run->nblocked == RUN_MAX_BLOCKED) {
        run->blocked_dropped++;
        return;
    }
    run->blocked[run->nblocked].what = strdup(what);
    run->blocked[run->nblocked].reason = strdup(reason);
    if (run->blocked[run->nblocked].what == NULL || run->blocked[run->nblocked].reason == NULL) {
        free(run->blocked[run->nblocked].what);
        free(run->blocked[run->nblocked].reason);
        run->blocked_dropped++;
        return;
    }
    run->blocked[run->nblocked].count = 1;
    run->nblocked++;
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
}

/* ignoreViolations: {"*": [patterns], "command substring": [patterns]}. A
 * pattern hides a blocked destination when it is a substring of "host:port"
 * or an fnmatch(3) glob matching the host or "host:port". */
static int ignored(const struct run *run, const struct blocked *b)
{
    const struct settings_map *m = &run->settings->ignore_violations;
    char host[300];
    const char *colon;

    snprintf(host, sizeof(host), "%s", b->what);
    colon = strrchr(host, ':');
    if (colon != NULL)
        host[colon - host] = '\0';
    for (size_t i = 0; i < m->n; i++) {
        const struct settings_pair *p = &m->pairs[i];
        if (strcmp(p->key, "*") != 0 && (run->cmdline == NULL || strstr(run->cmdline, p->key) == NULL))
            continue;
        for (size_t j = 0; j < p->list.n; j++) {
            const char *pat = p->list.items[j].value;
            if (strcmp(pat, "*") == 0 || strstr(b->what, pat) != NULL ||
                fnmatch(pat, host, 0) == 0 || fnmatch(pat, b->what, 0) == 0)
                return 1;
        }
    }
    return 0;
}

void run_print_summary(struct run *run)
{
    unsigned shown = 0;
    int first = 1;

    if (run->o->quiet || run->blocked_total == 0)
        return;
    for (size_t i = 0; i < run->nblocked; i++)
        if (!ignored(run, &run->blocked[i]))
            shown += run->blocked[i].count;
    shown += run->blocked_dropped;
    if (shown == 0)
        return;
    fprintf(stderr, "sluice: blocked %u connection%s: ", shown, shown == 1 ? "" : "s");
    for (size_t i = 0; i < run->nblocked; i++) {
        const struct blocked *b = &run->blocked[i];
        if (ignored(run, b))
            continue;
        fprintf(stderr, "%s%s", first ? "" : ", ", b->what);
        if (b->reason[0] != '\0')
            fprintf(stderr, " (%s)", b->reason);
        if (b->count > 1)
            fprintf(stderr, " \u00d7%u", b->count);
        first = 0;
    }
    if (run->blocked_dropped > 0)
        fprintf(stderr, "%s%u more", first ? "" : ", ", run->blocked_dropped);
    fputc('\n', stderr);
}

void run_summary_free(struct run *run)
{
    for (size_t i = 0; i < run->nblocked; i++) {
        free(run->blocked[i].what);
        free(run->blocked[i].reason);
    }
    run->nblocked = 0;
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
