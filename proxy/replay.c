/* proxy/replay.c - `sluice check --replay LOG`: reads a connection log
 * (proxy/replay_parse.c reads each line), groups its decision records by
 * (protocol, host, port[, method, path]) and the decision, rule and source
 * they were logged with, judges each group once with the proxy's verdict on
 * the policy being checked (policy_verdict_request: the rules, request rules
 * for plain-HTTP records, the guard on IP literals; policy_dns_refused for
 * protocol=dns), and prints every group whose decision changes. Names are
 * not resolved, so the address guard does not judge them: a record the log
 * shows denied by the guard (the rules let the name through) is counted,
 * not re-judged. cli/check.c parses the options and loads the settings. */
#include "proxy/check.h"
#include "proxy/replay.h"

#include "common/common.h"
#include "policy/policy.h"
#include "proxy/server.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REPLAY_MAX_ERRORS 20 /* bad lines reported before the reader gives up */
#define REPLAY_BUCKETS 4096

struct replay_group {
    struct replay_group *next;  /* hash chain */
    struct replay_group *onext; /* order first met */
    unsigned long count;
    char *key; /* the fields below, length-prefixed, compared whole */
    size_t keylen;
    char *protocol, *method, *path, *decision, *rule, *source; /* as logged */
    struct policy_host h;
    uint16_t port;
    int addr_seen; /* a record of the group names the address (guard) */
    /* the verdict now */
    struct policy_decision m; /* the rule match, finished with answers for --resolve */
    struct check_lookup *lk;  /* --resolve: the name's answers (shared), or NULL */
    const char *now;
    char now_rule[512], now_source[300], now_reason[400];
    int by_request; /* decided by request rules without one rule (no allow rule matched) */
    int skipped;    /* denied by the guard in the log, not re-judged */
};

struct replay {
    const char *path;
    struct replay_group *buckets[REPLAY_BUCKETS];
    struct replay_group *first, **last;
    size_t ngroups;
    unsigned long decisions, others;
    int resolve;
    char *key; /* while reading: a group's key is built here */
};

/* ---- reading ---- */

static int key_add(char *key, size_t *len, size_t cap, const char *s)
{
    size_t n = s != NULL ? strlen(s) : 0;
    uint32_t n32 = (uint32_t)n;

    if (*len + n + 5 > cap)
        return -1;
    key[(*len)++] = s != NULL ? 1 : 0; /* absent and empty differ */
    memcpy(key + *len, &n32, 4);
    *len += 4;
    memcpy(key + *len, s != NULL ? s : "", n);
    *len += n;
    return 0;
}

uint64_t replay_hash(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static char *dup_or_null(const char *s)
{
    return s != NULL ? strdup(s) : NULL;
}

static void group_free(struct replay_group *g)
{
    free(g->key);
    free(g->protocol);
    free(g->method);
    free(g->path);
    free(g->decision);
    free(g->rule);
    free(g->source);
    free(g);
}

/* Counts the record in its group, made when new. 0 or -ENOMEM. */
static int add_record(struct replay *rp, const struct replay_record *r, char *key, size_t cap)
{
    char port[8];
    size_t klen = 0;
    struct replay_group *g, **b;

    snprintf(port, sizeof(port), "%u", (unsigned)r->port);
    if (key_add(key, &klen, cap, r->protocol) < 0 || key_add(key, &klen, cap, r->h.name) < 0 ||
        key_add(key, &klen, cap, port) < 0 || key_add(key, &klen, cap, r->method) < 0 ||
        key_add(key, &klen, cap, r->path) < 0 || key_add(key, &klen, cap, r->decision) < 0 ||
        key_add(key, &klen, cap, r->rule) < 0 || key_add(key, &klen, cap, r->source) < 0)
        return -ENOMEM; /* cannot happen: cap is twice the line */
    b = &rp->buckets[replay_hash(key, klen) % REPLAY_BUCKETS];
    for (g = *b; g != NULL; g = g->next)
        if (g->keylen == klen && memcmp(g->key, key, klen) == 0)
            break;
    if (g == NULL) {
        g = calloc(1, sizeof(*g));
        if (g == NULL)
            return -ENOMEM;
        g->key = malloc(klen);
        g->protocol = strdup(r->protocol);
        g->decision = strdup(r->decision);
        g->method = dup_or_null(r->method);
        g->path = dup_or_null(r->path);
        g->rule = dup_or_null(r->rule);
        g->source = dup_or_null(r->source);
        if (g->key == NULL || g->protocol == NULL || g->decision == NULL ||
            (r->method != NULL && g->method == NULL) || (r->path != NULL && g->path == NULL) ||
            (r->rule != NULL && g->rule == NULL) || (r->source != NULL && g->source == NULL)) {
            group_free(g);
            return -ENOMEM;
        }
        memcpy(g->key, key, klen);
        g->keylen = klen;
        g->h = r->h;
        g->port = r->port;
        g->next = *b;
        *b = g;
        *rp->last = g;
        rp->last = &g->onext;
        rp->ngroups++;
    }
    g->count++;
    if (r->addr != NULL)
        g->addr_seen = 1;
    return 0;
}

/* One line into line (NUL-terminated, *len bytes): 1, 0 at the end of the
 * file, 2 for a last line without its newline (the log was cut: every
 * record ends with one), or -1 for a line longer than REPLAY_LINE_MAX (read
 * past, not kept). */
static int read_line(FILE *f, char *line, size_t *len)
{
    size_t n = 0;
    int c, over = 0;

    while ((c = getc_unlocked(f)) != EOF && c != '\n') {
        if (n < REPLAY_LINE_MAX)
            line[n++] = (char)c;
        else
            over = 1;
    }
    line[n] = '\0';
    *len = n;
    if (over)
        return -1;
    if (c == EOF)
        return n == 0 ? 0 : 2;
    return 1;
}

/* replay.h: reads every decision record of path ("-": stdin) into add. */
int replay_read(const char *path, replay_add_fn add, void *ctx, unsigned long *decisions,
                unsigned long *others)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    char *line = malloc(REPLAY_LINE_MAX + 1), *buf = malloc(REPLAY_LINE_MAX + 1);
    unsigned long lineno = 0;
    unsigned nbad = 0;
    int rc = -1, got;

    if (f == NULL) {
        fprintf(stderr, "sluice: check: %s: cannot open: %s\n", path, strerror(errno));
        goto out;
    }
    if (line == NULL || buf == NULL) {
        fprintf(stderr, "sluice: check: out of memory\n");
        goto out;
    }
    while (nbad < REPLAY_MAX_ERRORS) {
        struct replay_record r;
        const char *why = NULL;
        size_t len;
        int kind;
        got = read_line(f, line, &len);
        if (got == 0)
            break;
        lineno++;
        if (got < 0) {
            fprintf(stderr, "%s:%lu: a line longer than %u bytes\n", path, lineno,
                    (unsigned)REPLAY_LINE_MAX);
            nbad++;
            continue;
        }
        if (len == 0 && got == 1)
            continue; /* a blank line says nothing */
        kind = replay_parse_line(line, len, buf, REPLAY_LINE_MAX + 1, &r, &why);
        if (kind < 0 || got == 2) {
            fprintf(stderr, "%s:%lu: %s%s%s\n", path, lineno,
                    kind < 0 ? "not a connection log record: " : "", kind < 0 ? why : "",
                    got != 2   ? ""
                    : kind < 0 ? " (the last line, without its newline: the log was cut)"
                               : "the last line has no newline: the log was cut");
            nbad++;
        } else if (kind == 0) {
            (*others)++;
        } else if (nbad == 0) {
            (*decisions)++;
            if (add(ctx, &r) < 0) {
                fprintf(stderr, "sluice: check: out of memory\n");
                goto out;
            }
        }
    }
    if (ferror(f)) {
        fprintf(stderr, "sluice: check: %s: read error\n", path);
        goto out;
    }
    if (nbad >= REPLAY_MAX_ERRORS)
        fprintf(stderr, "%s: %u bad lines, stopped reading\n", path, nbad);
    rc = nbad > 0 ? -1 : 0;
out:
    if (f != NULL && f != stdin)
        fclose(f);
    free(line);
    free(buf);
    return rc;
}

static int add_to_groups(void *ctx, const struct replay_record *r)
{
    struct replay *rp = ctx;

    return add_record(rp, r, rp->key, 2 * REPLAY_LINE_MAX + 64);
}

/* Reads the log into groups. 0, or -1 after reporting FILE:LINE of every
 * bad line (up to REPLAY_MAX_ERRORS) or a read error. */
static int read_log(struct replay *rp)
{
    int rc;

    rp->key = malloc(2 * REPLAY_LINE_MAX + 64);
    if (rp->key == NULL) {
        fprintf(stderr, "sluice: check: out of memory\n");
        return -1;
    }
    rc = replay_read(rp->path, add_to_groups, rp, &rp->decisions, &rp->others);
    free(rp->key);
    rp->key = NULL;
    return rc;
}

/* ---- judging ---- */

static const char *verdict_word(const struct policy_judgment *j)
{
    if (j->report_only)
        return "would_deny";
    switch (j->verdict) {
    case POLICY_ALLOW:
        return "allow";
    case POLICY_ASK:
        return "ask";
    case POLICY_DENY:
        break;
    }
    return "deny";
}

static int allowed(const char *decision)
{
    return strcmp(decision, "allow") == 0 || strcmp(decision, "would_deny") == 0;
}

static void set_now(struct replay_group *g, const struct policy_judgment *j)
{
    g->now = verdict_word(j);
    g->by_request = j->origin == POLICY_BY_REQUEST;
    snprintf(g->now_rule, sizeof(g->now_rule), "%s", j->rule_text);
    snprintf(g->now_source, sizeof(g->now_source), "%s", j->source);
    snprintf(g->now_reason, sizeof(g->now_reason), "%s", j->reason);
}

/* The group's decision now by the rules, by the verdict `sluice check` and
 * the proxy use (an IP literal is its own answer and guarded). */
static void judge(const struct policy *p, struct replay_group *g, int resolve)
{
    struct policy_guard_verdict gv[1];
    struct policy_judgment j;

    if (strcmp(g->protocol, "dns") == 0) {
        /* what transparent mode's resolver does with the name */
        int refused = policy_dns_refused(p, &g->h, &j);
        set_now(g, &j);
        g->now = refused ? "deny" : "allow";
        if (!refused)
            snprintf(g->now_reason, sizeof(g->now_reason),
                     "the sandbox's resolver answers '%s'; each connect() is judged by its port",
                     g->h.name);
        return;
    }
    struct policy_request rq, *rqp = NULL;
    if (g->path != NULL) {
        rq.method = g->method;
        rq.method_len = strlen(g->method);
        rq.target = g->path;
        rq.target_len = strlen(g->path);
        rqp = &rq;
    }
    if (replay_protocol_udp(g->protocol)) /* a UDP datagram's destination */
        policy_decide_transport(p, POLICY_UDP, &g->h, g->port, &g->m);
    else
        policy_decide_request(p, &g->h, g->port, rqp, &g->m);
    policy_verdict_finish(p, &g->h, g->port, &g->m, NULL, 0, gv, &j);
    set_now(g, &j);
    /* without answers, a name the rules let through and the guard refused
     * (the record names the refused address, or the allow rule that let the
     * name through) cannot be judged again */
    g->skipped =
        !resolve && strcmp(g->decision, "deny") == 0 && g->h.kind == POLICY_HOST_NAME &&
        allowed(g->now) &&
        (g->addr_seen || (g->rule != NULL && strstr(g->rule, " network.allowedDomains") != NULL));
}

/* --resolve: the rule match finished with the name's answers, as egress
 * does; a failed lookup denies (nothing could be dialed). */
static void judge_answers(const struct policy *p, struct replay_group *g)
{
    struct policy_guard_verdict gv[CHECK_MAX_ADDRS];
    struct policy_judgment j;

    if (g->lk->st != RESOLVER_OK) {
        g->now = "deny";
        snprintf(g->now_reason, sizeof(g->now_reason), "%s for %s",
                 check_resolver_status_name(g->lk->st), g->h.name);
        return;
    }
    policy_verdict_finish(p, &g->h, g->port, &g->m, g->lk->addrs, g->lk->n, gv, &j);
    set_now(g, &j);
}

/* --resolve: each name judged allowed or undecided by the rules is resolved
 * once, and its groups judged with the answers. 0 or negative errno. */
static int resolve_groups(const struct settings *s, const struct policy *p, struct replay *rp)
{
    struct check_lookup **l = calloc(rp->ngroups > 0 ? rp->ngroups : 1, sizeof(*l));
    size_t n = 0;
    int rc = -ENOMEM;

    if (l == NULL)
        return rc;
    for (struct replay_group *g = rp->first; g != NULL; g = g->onext) {
        if (strcmp(g->protocol, "dns") == 0 || g->h.kind != POLICY_HOST_NAME ||
            strcmp(g->now, "deny") == 0)
            continue;
        for (size_t i = 0; i < n && g->lk == NULL; i++)
            if (strcmp(l[i]->name, g->h.name) == 0)
                g->lk = l[i];
        if (g->lk != NULL)
            continue;
        g->lk = calloc(1, sizeof(*g->lk));
        if (g->lk == NULL)
            goto out;
        g->lk->name = g->h.name;
        l[n++] = g->lk;
    }
    rc = check_resolve(s, l, n);
    if (rc < 0)
        goto out;
    for (struct replay_group *g = rp->first; g != NULL; g = g->onext)
        if (g->lk != NULL)
            judge_answers(p, g);
out:
    for (size_t i = 0; i < n; i++) /* owned here; groups only point */
        free(l[i]);
    for (struct replay_group *g = rp->first; g != NULL; g = g->onext)
        g->lk = NULL;
    free(l);
    return rc;
}

/* 1 when the decision changes: an "ask" now (no rule decides; denied unless
 * an ask handler answers) is no change from a logged deny. */
static int changed(const struct replay_group *g)
{
    if (g->skipped || strcmp(g->decision, g->now) == 0)
        return 0;
    return !(strcmp(g->decision, "deny") == 0 && strcmp(g->now, "ask") == 0);
}

static const char *change_kind(const struct replay_group *g)
{
    int was = allowed(g->decision), is = allowed(g->now);

    if (was && !is)
        return "allowed->denied";
    if (!was && is)
        return "denied->allowed";
    return "report-mode";
}

/* ---- output ---- */

static void print_change_text(const struct replay_group *g)
{
    static char e1[4 * REPLAY_LINE_MAX + 1], e2[4 * 1024 + 1], e3[4 * 1024 + 1];
    char target[POLICY_HOST_MAX + 16];

    if (strcmp(g->protocol, "dns") == 0)
        snprintf(target, sizeof(target), "%s (dns)", g->h.name);
    else if (g->h.kind == POLICY_HOST_IPV6)
        snprintf(target, sizeof(target), "[%s]:%u", g->h.name, (unsigned)g->port);
    else
        snprintf(target, sizeof(target), "%s:%u", g->h.name, (unsigned)g->port);
    printf("%s -> %s  %s %s", g->decision, g->now, g->protocol, target);
    if (g->path != NULL)
        printf(" %s %s", common_escape(g->method, e2, sizeof(e2)),
               common_escape(g->path, e1, sizeof(e1)));
    printf("  x%lu  was: ", g->count);
    if (g->rule != NULL)
        printf("%s", common_escape(g->rule, e1, sizeof(e1)));
    else
        printf("no rule");
    if (g->source != NULL)
        printf(" (%s)", common_escape(g->source, e3, sizeof(e3)));
    printf("  now: %s", g->now_rule[0] != '\0' ? g->now_rule
                        : g->by_request        ? "request rules"
                                               : "no rule");
    if (g->now_source[0] != '\0')
        printf(" (%s)", g->now_source);
    printf(": %s\n", g->now_reason);
}

/* A string of the log (any bytes but NUL) as JSON: escaped as the text
 * output escapes it, so the output is ASCII whatever the log held. */
static void set_str_or_null(json_t *o, const char *key, const char *v)
{
    static char e[4 * REPLAY_LINE_MAX + 1];

    json_object_set_new(o, key,
                        v != NULL && v[0] != '\0' ? json_string(common_escape(v, e, sizeof(e)))
                                                  : json_null());
}

static void print_change_json(const struct replay_group *g)
{
    json_t *o = json_object(), *was = json_object(), *now = json_object();
    char *s;

    json_object_set_new(o, "change", json_string(change_kind(g)));
    json_object_set_new(o, "protocol", json_string(g->protocol));
    json_object_set_new(o, "host", json_string(g->h.name));
    json_object_set_new(o, "port", json_integer(g->port));
    if (g->path != NULL) {
        set_str_or_null(o, "method", g->method);
        set_str_or_null(o, "path", g->path);
    }
    json_object_set_new(o, "count", json_integer((json_int_t)g->count));
    json_object_set_new(was, "decision", json_string(g->decision));
    set_str_or_null(was, "rule", g->rule);
    set_str_or_null(was, "source", g->source);
    json_object_set_new(o, "old", was);
    json_object_set_new(now, "decision", json_string(g->now));
    set_str_or_null(now, "rule", g->now_rule);
    set_str_or_null(now, "source", g->now_source);
    json_object_set_new(now, "reason", json_string(g->now_reason));
    json_object_set_new(o, "new", now);
    s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
    if (s != NULL)
        puts(s);
    free(s);
    json_decref(o);
}

struct tally {
    unsigned long records, groups, to_denied, to_allowed, report, skipped;
};

static void print_summary(const struct replay *rp, const struct tally *t, int json)
{
    if (json) {
        json_t *o = json_object(), *sum = json_object();
        char *s;
        json_object_set_new(sum, "decisions", json_integer((json_int_t)rp->decisions));
        json_object_set_new(sum, "groups", json_integer((json_int_t)rp->ngroups));
        json_object_set_new(sum, "skipped", json_integer((json_int_t)rp->others));
        json_object_set_new(sum, "changed", json_integer((json_int_t)t->records));
        json_object_set_new(sum, "changed_groups", json_integer((json_int_t)t->groups));
        json_object_set_new(sum, "allowed_to_denied", json_integer((json_int_t)t->to_denied));
        json_object_set_new(sum, "denied_to_allowed", json_integer((json_int_t)t->to_allowed));
        json_object_set_new(sum, "report_mode", json_integer((json_int_t)t->report));
        json_object_set_new(sum, "guard_not_judged", json_integer((json_int_t)t->skipped));
        json_object_set_new(sum, "resolve", json_boolean(rp->resolve));
        json_object_set_new(o, "summary", sum);
        s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (s != NULL)
            puts(s);
        free(s);
        json_decref(o);
        return;
    }
    printf("%lu of %lu decisions change: %lu allowed -> denied, %lu denied -> allowed, "
           "%lu allow <-> would_deny",
           t->records, rp->decisions, t->to_denied, t->to_allowed, t->report);
    if (t->skipped > 0)
        printf("; %lu denied by the address guard, not judged without answers", t->skipped);
    printf("\n");
}

int check_replay(const struct check_opts *o, const struct settings *s, const char *settings_path)
{
    struct replay rp;
    struct settings_error err;
    struct policy *p = NULL;
    struct tally t;
    int rc = 2;

    memset(&rp, 0, sizeof(rp));
    memset(&t, 0, sizeof(t));
    rp.path = o->replay_path;
    rp.last = &rp.first;
    if (policy_compile(s, &p, &err) < 0) {
        fprintf(stderr, "%s\n", err.msg);
        goto out;
    }
    if (read_log(&rp) < 0)
        goto out;
    rp.resolve = o->resolve;
    for (struct replay_group *g = rp.first; g != NULL; g = g->onext)
        judge(p, g, o->resolve);
    if (o->resolve) {
        proxy_set_local(p, NULL, NULL, 0); /* as check --resolve */
        if (resolve_groups(s, p, &rp) < 0)
            goto out;
    }
    if (!o->json)
        printf("replay of %s against %s: %lu decisions in %zu groups, %lu other records "
               "skipped; judged by the rules, %s\n",
               rp.path, settings_path != NULL ? settings_path : "the default settings",
               rp.decisions, rp.ngroups, rp.others,
               o->resolve ? "names resolved now and every answer judged by the address guard"
                          : "without resolving names (no address guard for names)");
    for (struct replay_group *g = rp.first; g != NULL; g = g->onext) {
        if (g->skipped) {
            t.skipped += g->count;
            continue;
        }
        if (!changed(g))
            continue;
        t.groups++;
        t.records += g->count;
        if (strcmp(change_kind(g), "allowed->denied") == 0)
            t.to_denied += g->count;
        else if (strcmp(change_kind(g), "denied->allowed") == 0)
            t.to_allowed += g->count;
        else
            t.report += g->count;
        if (o->json)
            print_change_json(g);
        else
            print_change_text(g);
    }
    print_summary(&rp, &t, o->json);
    rc = t.groups > 0 ? 1 : 0;
out:
    fflush(stdout);
    for (struct replay_group *g = rp.first, *n; g != NULL; g = n) {
        n = g->onext;
        group_free(g);
    }
    policy_free(p);
    return rc;
}
