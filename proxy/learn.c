/* proxy/learn.c - the smallest network.allowedDomains fragment that would
 * have allowed what a connection log saw (proxy/learn.h). Records come in
 * one by one (learn_add, from proxy/replay_parse.c's reader or a run's own
 * records); each distinct host:port is kept once, what report mode would
 * not lift is kept as a note instead, and learn_build groups the names by
 * registrable domain and port, makes the wildcards, sorts, writes the JSON
 * and checks it with the settings loader and the policy before returning
 * it. No I/O but the notes' stream. */
#include "proxy/learn.h"

#include "common/common.h"
#include "proxy/server.h"
#include "settings/settings.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#define LEARN_BUCKETS 4096
#define LEARN_ENTRY_MAX (POLICY_HOST_MAX + 16) /* "*.", brackets, ":65535" */

struct dest {
    struct dest *next;
    struct policy_host h;
    uint16_t port;
};

struct note {
    struct note *next;
    char *text;
    unsigned long count;
};

struct learn {
    struct dest *dests[LEARN_BUCKETS];
    struct note *notes[LEARN_BUCKETS];
    size_t ndests, nnotes;
    unsigned long decisions, dropped, unreadable, notes_dropped;
};

int learn_new(struct learn **out)
{
    *out = calloc(1, sizeof(**out));
    return *out != NULL ? 0 : -ENOMEM;
}

void learn_free(struct learn *l)
{
    if (l == NULL)
        return;
    for (size_t i = 0; i < LEARN_BUCKETS; i++) {
        for (struct dest *d = l->dests[i], *n; d != NULL; d = n) {
            n = d->next;
            free(d);
        }
        for (struct note *d = l->notes[i], *n; d != NULL; d = n) {
            n = d->next;
            free(d->text);
            free(d);
        }
    }
    free(l);
}

/* ---- collecting ---- */

static const char *host_port(const struct policy_host *h, uint16_t port, char *buf, size_t len)
{
    if (h->kind == POLICY_HOST_IPV6)
        snprintf(buf, len, "[%s]:%u", h->name, (unsigned)port);
    else
        snprintf(buf, len, "%s:%u", h->name, (unsigned)port);
    return buf;
}

static int note_add(struct learn *l, const char *text)
{
    struct note **b = &l->notes[replay_hash(text, strlen(text)) % LEARN_BUCKETS], *n;

    for (n = *b; n != NULL; n = n->next)
        if (strcmp(n->text, text) == 0) {
            n->count++;
            return 0;
        }
    if (l->nnotes >= LEARN_MAX_NOTES) {
        l->notes_dropped++;
        return 0;
    }
    n = calloc(1, sizeof(*n));
    if (n == NULL || (n->text = strdup(text)) == NULL) {
        free(n);
        return -ENOMEM;
    }
    n->count = 1;
    n->next = *b;
    *b = n;
    l->nnotes++;
    return 0;
}

static int dest_add(struct learn *l, const struct policy_host *h, uint16_t port)
{
    struct dest **b, *d;
    uint64_t k = replay_hash(h->name, h->len) ^ port;

    b = &l->dests[k % LEARN_BUCKETS];
    for (d = *b; d != NULL; d = d->next)
        if (d->port == port && strcmp(d->h.name, h->name) == 0)
            return 0;
    if (l->ndests >= LEARN_MAX_DESTS) {
        l->dropped++;
        return 0;
    }
    d = calloc(1, sizeof(*d));
    if (d == NULL)
        return -ENOMEM;
    d->h = *h;
    d->port = port;
    d->next = *b;
    *b = d;
    l->ndests++;
    return 0;
}

/* a string of the log (hostile bytes) as a note may show it */
static const char *shown(const char *s, char *buf, size_t len)
{
    return common_escape(s != NULL ? s : "", buf, len);
}

/* A decision a rule made (never lifted by an allow entry, or by report
 * mode when the rule is the managed file's or a request rule). */
static int note_rule(struct learn *l, const char *what, const struct replay_record *r, int allowed)
{
    char text[1400], rule[600], src[400];
    int rq = strstr(r->rule, "network.requestRules") != NULL;

    shown(r->rule, rule, sizeof(rule));
    shown(r->source, src, sizeof(src));
    if (allowed) /* report mode let a request rule's refusal through */
        snprintf(text, sizeof(text),
                 "%s: requests refused by %s (%s); the host is learned, network.requestRules "
                 "is not",
                 what, rule, src);
    else if (rq)
        snprintf(text, sizeof(text), "%s: refused by the request rule %s (%s); "
                 "network.requestRules is not learned", what, rule, src);
    else
        snprintf(text, sizeof(text),
                 "%s: denied by %s (%s); a deny rule wins over any allow entry", what, rule, src);
    return note_add(l, text);
}

int learn_add(struct learn *l, const struct replay_record *r)
{
    char what[LEARN_ENTRY_MAX], text[800], a[300];
    int deny = strcmp(r->decision, "deny") == 0;

    l->decisions++;
    if (strcmp(r->protocol, "dns") == 0) { /* the connect() records carry the ports */
        if (!deny)
            return 0;
        snprintf(text, sizeof(text), "%s (dns): refused by the sandbox's resolver%s%s",
                 r->h.name, r->rule != NULL ? ": " : "", shown(r->rule, a, sizeof(a)));
        return note_add(l, text);
    }
    host_port(&r->h, r->port, what, sizeof(what));
    if (replay_protocol_udp(r->protocol)) { /* never a TCP entry for UDP traffic */
        snprintf(text, sizeof(text),
                 "%s (udp): UDP destinations are not learned; to allow it, add 'udp:%s' to "
                 "network.allowedDomains",
                 what, what);
        return note_add(l, text);
    }
    if (r->h.kind != POLICY_HOST_NAME) {
        enum policy_addr_class c = policy_addr_classify(&r->h.addr, NULL);
        if (c != POLICY_CLASS_PUBLIC) {
            snprintf(text, sizeof(text),
                     "%s: an address outside the public range (%s) is never learned", what,
                     policy_class_name(c));
            return note_add(l, text);
        }
    }
    if (deny && r->rule != NULL)
        return note_rule(l, what, r, 0);
    if (deny && r->addr != NULL) {
        snprintf(text, sizeof(text),
                 "%s: the address guard refused its answer %s, which report mode does not lift",
                 what, shown(r->addr, a, sizeof(a)));
        return note_add(l, text);
    }
    /* allowed, reported (would_deny), or denied with no rule deciding (no
     * rule, strictAllowlist, nobody to ask): an allow entry opens it */
    if (r->rule != NULL && strstr(r->rule, "network.requestRules") != NULL &&
        note_rule(l, what, r, 1) < 0)
        return -ENOMEM;
    return dest_add(l, &r->h, r->port);
}

int learn_add_connlog(struct learn *l, const struct connlog *r)
{
    static char line[REPLAY_LINE_MAX + 1], buf[REPLAY_LINE_MAX + 1];
    struct replay_record rec;
    const char *why = NULL;
    long n;

    if (r->event != CONNLOG_DECISION)
        return 0;
    n = proxy_log_render(r, line, sizeof(line));
    if (n < 0 || replay_parse_line(line, (size_t)n, buf, sizeof(buf), &rec, &why) != 1) {
        l->unreadable++;
        return -EINVAL;
    }
    if (learn_add(l, &rec) < 0) { /* out of memory: said by learn_build */
        l->dropped++;
        return -ENOMEM;
    }
    return 0;
}

/* ---- building ---- */

struct item {
    const struct dest *d;
    char reg[POLICY_HOST_MAX + 1]; /* registrable domain, or "" (an IP, or a suffix) */
};

struct entry {
    char host[POLICY_HOST_MAX + 3]; /* "*.DOMAIN", a name, an IP ("[v6]") */
    uint16_t port;
};

static int item_cmp(const void *a, const void *b)
{
    const struct item *x = a, *y = b;
    int c = strcmp(x->reg, y->reg);

    if (c != 0)
        return c;
    if (x->d->port != y->d->port)
        return x->d->port < y->d->port ? -1 : 1;
    return strcmp(x->d->h.name, y->d->h.name);
}

static int entry_cmp(const void *a, const void *b)
{
    const struct entry *x = a, *y = b;
    int c = strcmp(x->host, y->host);

    if (c != 0)
        return c;
    return x->port < y->port ? -1 : x->port > y->port;
}

static void entry_set(struct entry *e, const char *prefix, const struct policy_host *h,
                      const char *name, uint16_t port)
{
    if (h != NULL && h->kind == POLICY_HOST_IPV6)
        snprintf(e->host, sizeof(e->host), "[%s]", h->name);
    else
        snprintf(e->host, sizeof(e->host), "%s%s", prefix, h != NULL ? h->name : name);
    e->port = port;
}

/* base's verdict on a destination: 1 when its domain lists allow it (a
 * request rule only narrows what they allow, and is not learned), 0 when
 * not, -1 when a deny rule of base refuses it (noted), -ENOMEM. */
static int base_allows(struct learn *l, const struct policy *base, const struct dest *d)
{
    struct policy_guard_verdict gv[1];
    struct policy_decision m;
    struct policy_judgment j;
    char what[LEARN_ENTRY_MAX], text[1400];

    /* a request line without a method: the domain lists alone decide (as
     * for a tunnel sluice terminates), request rules only narrow them */
    static const struct policy_request domains_only = {NULL, 0, NULL, 0};

    policy_decide_request(base, &d->h, d->port, &domains_only, &m);
    policy_verdict_finish(base, &d->h, d->port, &m, NULL, 0, gv, &j);
    if (j.verdict == POLICY_ALLOW)
        return 1;
    if (j.origin == POLICY_BY_RULE && j.verdict == POLICY_DENY) {
        snprintf(text, sizeof(text),
                 "%s: the base settings deny it by %s (%s); an allow entry would not lift it",
                 host_port(&d->h, d->port, what, sizeof(what)), j.rule_text, j.source);
        return note_add(l, text) < 0 ? -ENOMEM : -1;
    }
    return 0;
}

/* The entries for items[0..n) (sorted by item_cmp): a wildcard per
 * registrable domain and port with LEARN_WILDCARD_MIN subdomains or more,
 * else each name. Returns how many entries were written to e. */
static size_t make_entries(const struct item *it, size_t n, struct entry *e, size_t *wild)
{
    size_t ne = 0, i = 0;

    while (i < n) {
        size_t j = i, subs = 0;
        while (j < n && strcmp(it[j].reg, it[i].reg) == 0 && it[j].d->port == it[i].d->port) {
            if (it[j].reg[0] != '\0' && strcmp(it[j].d->h.name, it[j].reg) != 0)
                subs++;
            j++;
        }
        if (subs >= LEARN_WILDCARD_MIN) {
            entry_set(&e[ne++], "*.", NULL, it[i].reg, it[i].d->port);
            (*wild)++;
            for (size_t k = i; k < j; k++) /* the domain itself: '*.' never covers it */
                if (strcmp(it[k].d->h.name, it[k].reg) == 0)
                    entry_set(&e[ne++], "", &it[k].d->h, NULL, it[k].d->port);
        } else {
            for (size_t k = i; k < j; k++)
                entry_set(&e[ne++], "", &it[k].d->h, NULL, it[k].d->port);
        }
        i = j;
    }
    return ne;
}

static char *fragment_json(const struct entry *e, size_t n)
{
    json_t *list = json_array(), *o;
    char text[LEARN_ENTRY_MAX + 8], *s, *out = NULL;

    for (size_t i = 0; i < n && list != NULL; i++) {
        snprintf(text, sizeof(text), "%s:%u", e[i].host, (unsigned)e[i].port);
        json_array_append_new(list, json_string(text));
    }
    o = json_pack("{s:{s:o}}", "network", "allowedDomains", list);
    if (o == NULL)
        return NULL;
    s = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
    json_decref(o);
    if (s != NULL && (out = malloc(strlen(s) + 2)) != NULL)
        snprintf(out, strlen(s) + 2, "%s\n", s);
    free(s);
    return out;
}

/* The fragment as `--settings` will read it: it loads, compiles, and
 * allows every destination it was made for. 0 or -EINVAL after a message. */
static int verify(const char *json, const struct item *it, size_t n)
{
    struct settings s;
    struct settings_error err;
    struct policy *p = NULL;
    int rc = -EINVAL;

    settings_init(&s);
    if (settings_apply_buffer(&s, "the learned fragment", json, strlen(json), &err) < 0 ||
        policy_compile(&s, &p, &err) < 0) {
        fprintf(stderr, "sluice: learn: internal error: %s\n", err.msg);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        struct policy_decision d;
        policy_decide(p, &it[i].d->h, it[i].d->port, &d);
        if (d.verdict != POLICY_ALLOW) {
            fprintf(stderr, "sluice: learn: internal error: the fragment does not allow %s:%u\n",
                    it[i].d->h.name, (unsigned)it[i].d->port);
            goto out;
        }
    }
    rc = 0;
out:
    policy_free(p);
    settings_free(&s);
    return rc;
}

static int note_cmp(const void *a, const void *b)
{
    return strcmp((*(const struct note *const *)a)->text, (*(const struct note *const *)b)->text);
}

static int print_notes(const struct learn *l, FILE *f)
{
    const struct note **v = calloc(l->nnotes > 0 ? l->nnotes : 1, sizeof(*v));
    size_t n = 0;

    if (v == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < LEARN_BUCKETS; i++)
        for (const struct note *x = l->notes[i]; x != NULL; x = x->next)
            if (n < l->nnotes)
                v[n++] = x;
    qsort(v, n, sizeof(*v), note_cmp);
    for (size_t i = 0; i < n && f != NULL; i++) {
        fprintf(f, "sluice: not learned: %s", v[i]->text);
        if (v[i]->count > 1)
            fprintf(f, " (x%lu)", v[i]->count);
        fputc('\n', f);
    }
    free(v);
    return 0;
}

/* The destinations to learn, base's own left out, with their registrable
 * domains, sorted by item_cmp. */
static int collect(struct learn *l, const struct policy *base, struct item **out, size_t *n,
                   struct learn_result *res)
{
    struct item *it = calloc(l->ndests > 0 ? l->ndests : 1, sizeof(*it));

    *n = 0;
    if (it == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < LEARN_BUCKETS; i++)
        for (const struct dest *d = l->dests[i]; d != NULL; d = d->next) {
            int b = base != NULL ? base_allows(l, base, d) : 0;
            if (b == -ENOMEM) {
                free(it);
                return -ENOMEM;
            }
            if (b > 0)
                res->already++;
            if (b != 0)
                continue;
            it[*n].d = d;
            if (d->h.kind != POLICY_HOST_NAME ||
                policy_registrable_domain(d->h.name, it[*n].reg, sizeof(it[*n].reg)) < 0)
                it[*n].reg[0] = '\0';
            (*n)++;
        }
    qsort(it, *n, sizeof(*it), item_cmp);
    *out = it;
    return 0;
}

int learn_build(struct learn *l, const struct policy *base, FILE *notes, struct learn_result *res)
{
    struct item *it = NULL;
    struct entry *e = NULL;
    size_t n = 0, ne;
    int rc;

    memset(res, 0, sizeof(*res));
    rc = collect(l, base, &it, &n, res);
    if (rc < 0)
        goto out;
    rc = -ENOMEM;
    e = calloc(n > 0 ? n : 1, sizeof(*e));
    if (e == NULL)
        goto out;
    ne = make_entries(it, n, e, &res->wildcards);
    qsort(e, ne, sizeof(*e), entry_cmp);
    res->json = fragment_json(e, ne);
    if (res->json == NULL)
        goto out;
    rc = verify(res->json, it, n);
    if (rc < 0) {
        free(res->json);
        res->json = NULL;
        goto out;
    }
    rc = print_notes(l, notes);
    if (notes != NULL && l->unreadable > 0)
        fprintf(notes, "sluice: not learned: %lu records that did not read back as records of "
                       "the connection log\n", l->unreadable);
    if (notes != NULL && l->notes_dropped > 0)
        fprintf(notes, "sluice: not learned: %lu more records of other kinds (past %u notes)\n",
                l->notes_dropped, (unsigned)LEARN_MAX_NOTES);
    if (notes != NULL && l->dropped > 0)
        fprintf(notes, "sluice: not learned: %lu records past %u destinations: the fragment is "
                       "incomplete\n",
                l->dropped, (unsigned)LEARN_MAX_DESTS);
    res->entries = ne;
    res->dests = n;
    res->notes = l->nnotes + l->notes_dropped;
    res->decisions = l->decisions;
    res->dropped = l->dropped + l->unreadable;
out:
    free(it);
    free(e);
    return rc;
}

void learn_print_summary(const struct learn_result *res, const char *where, int with_base)
{
    fprintf(stderr,
            "sluice: learned %zu network.allowedDomains entr%s (%zu wildcard%s) for %zu "
            "destination%s from %lu decisions into %s",
            res->entries, res->entries == 1 ? "y" : "ies", res->wildcards,
            res->wildcards == 1 ? "" : "s", res->dests, res->dests == 1 ? "" : "s",
            res->decisions, where);
    if (with_base)
        fprintf(stderr, "; %zu already allowed", res->already);
    if (res->notes > 0)
        fprintf(stderr, "; %zu not learned (above)", res->notes);
    if (res->dropped > 0)
        fprintf(stderr, "; %lu records not learned: incomplete", res->dropped);
    fputc('\n', stderr);
}
