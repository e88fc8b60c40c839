/* proxy/check.c - `sluice check`'s engine: what the proxy would decide for
 * each target (policy_verdict, the proxy's own verdict: the rule decision,
 * and with --resolve the resolved-address guard on every answer), printed as text or JSON, or compared with an
 * expectation file. No traffic is sent except DNS with --resolve.
 * cli/check.c parses the options and loads the settings. */
#include "proxy/check.h"

#include "bridge/bridge.h"
#include "common/common.h"
#include "proxy/server.h"
#include "policy/policy.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#define CHECK_DNS_TIMEOUT_MS 5000

struct check_item {
    const char *target; /* as given */
    const char *file;   /* expectation file, or NULL */
    unsigned line;
    enum policy_verdict expect;
    int valid;
    const char *why; /* parse error */
    struct policy_host host;
    uint16_t port;
    /* a URL target (http://, https://): the request it makes */
    int url;
    int udp;            /* a udp:HOST:PORT target: judged for UDP (policy/udp.c) */
    int tls;            /* https: a CONNECT tunnel, whose requests the proxy cannot read */
    int terminated;     /* ... unless network.tlsTerminate terminates it: judged inside */
    const char *method; /* --method, or GET */
    char *path;         /* the target as sent ("/path?query"), malloc'ed */
    struct policy_decision match; /* the one rule match (policy_decide) */
    struct policy_judgment d;     /* policy_verdict_finish of match */
    int would_deny;               /* report mode lets d's denial through (d.report_only) */
    /* --resolve */
    struct check_lookup lk;
    size_t naddrs;
    struct policy_guard_verdict gv[CHECK_MAX_ADDRS];
    size_t nallowed;
};

static const char *verdict_name(enum policy_verdict v)
{
    switch (v) {
    case POLICY_ALLOW:
        return "allow";
    case POLICY_DENY:
        return "deny";
    case POLICY_ASK:
        return "ask";
    }
    return "deny";
}

/* The decision as the proxy logs it: would_deny where report mode lets a
 * denial through (egress.c reads the same report_only of the same verdict) */
static const char *decision_name(const struct check_item *it)
{
    return it->would_deny ? "would_deny" : verdict_name(it->d.verdict);
}

const char *check_resolver_status_name(enum resolver_status st)
{
    switch (st) {
    case RESOLVER_OK:
        return "ok";
    case RESOLVER_NXDOMAIN:
        return "no such name (NXDOMAIN)";
    case RESOLVER_NODATA:
        return "no addresses (NODATA)";
    case RESOLVER_TIMEOUT:
        return "DNS timeout";
    case RESOLVER_FAIL:
        return "DNS failure";
    case RESOLVER_CANCELLED:
        return "DNS lookup cancelled";
    }
    return "DNS failure";
}

static void host_port(const struct check_item *it, char *buf, size_t len)
{
    const char *t = it->udp ? "udp:" : "";

    if (it->host.kind == POLICY_HOST_IPV6)
        snprintf(buf, len, "%s[%s]:%u", t, it->host.name, (unsigned)it->port);
    else
        snprintf(buf, len, "%s%s:%u", t, it->host.name, (unsigned)it->port);
}

/* A UDP target "udp:HOST:PORT" (the port is required). 0, 1 when s is
 * not one, or -EINVAL with *why. */
static int parse_udp(const char *s, struct check_item *it, const char **why)
{
    if (strncmp(s, "udp:", 4) != 0)
        return 1;
    if (policy_target_parse(s + 4, 0, &it->host, &it->port, why) < 0)
        return -EINVAL;
    if (it->port == 0) {
        *why = "a udp: target names its port (udp:HOST:PORT)";
        return -EINVAL;
    }
    it->udp = 1;
    return 0;
}

/* A URL target: "http[s]://AUTHORITY[/PATH][?QUERY][#FRAGMENT]" into the
 * host, port (80 or 443 by default) and the target as a client sends it
 * ("/" when there is no path; no fragment). 0, 1 when s is no URL, or
 * -EINVAL with *why. */
static int parse_url(const char *s, struct check_item *it, const char **why)
{
    char auth[POLICY_HOST_MAX + 16];
    const char *a, *end, *frag;
    size_t alen, plen;
    int tls;

    if (strncmp(s, "http://", 7) == 0)
        tls = 0;
    else if (strncmp(s, "https://", 8) == 0)
        tls = 1;
    else
        return 1;
    a = s + (tls ? 8 : 7);
    alen = strcspn(a, "/?#");
    if (memchr(a, '@', alen) != NULL) {
        *why = "a URL with credentials (user@host) is not a target";
        return -EINVAL;
    }
    if (alen == 0 || alen >= sizeof(auth)) {
        *why = "a URL needs a host";
        return -EINVAL;
    }
    memcpy(auth, a, alen);
    auth[alen] = '\0';
    if (policy_target_parse(auth, tls ? 443 : 80, &it->host, &it->port, why) < 0)
        return -EINVAL;
    end = a + alen;
    frag = strchr(end, '#');
    plen = frag != NULL ? (size_t)(frag - end) : strlen(end);
    it->path = malloc(plen + 2);
    if (it->path == NULL) {
        *why = "out of memory";
        return -EINVAL;
    }
    snprintf(it->path, plen + 2, "%s%.*s", plen == 0 || end[0] != '/' ? "/" : "", (int)plen, end);
    it->url = 1;
    it->tls = tls;
    return 0;
}

/* The target: host:port, and for a URL the request ("POST /a/b"). */
static void target_words(const struct check_item *it, char *buf, size_t len)
{
    size_t n;

    host_port(it, buf, len);
    n = strlen(buf);
    if (it->url)
        snprintf(buf + n, len - n, " %s %s%s", it->method, it->path,
                 it->terminated ? " (https: terminated, judged inside the tunnel)"
                 : it->tls      ? " (https: in a CONNECT tunnel)"
                                : "");
}

/* ---- resolution ---- */

static void on_resolved(void *arg, enum resolver_status st, const struct policy_addr *addrs,
                        size_t n)
{
    struct check_lookup *l = arg;

    l->st = st;
    if (n > CHECK_MAX_ADDRS)
        n = CHECK_MAX_ADDRS;
    if (n > 0)
        memcpy(l->addrs, addrs, n * sizeof(*addrs));
    l->n = n;
}

static void on_resolver_closed(void *arg)
{
    (void)arg;
}

int check_resolve(const struct settings *s, struct check_lookup *const *l, size_t n)
{
    uv_loop_t loop;
    struct resolver *r = NULL;
    const char **servers = NULL;
    size_t i;
    int rc;

    if (uv_loop_init(&loop) != 0)
        return -ENOMEM;
    if (s->network.dns_servers.n > 0) {
        servers = calloc(s->network.dns_servers.n, sizeof(*servers));
        if (servers == NULL) {
            uv_loop_close(&loop);
            return -ENOMEM;
        }
        for (i = 0; i < s->network.dns_servers.n; i++)
            servers[i] = s->network.dns_servers.items[i].value;
    }
    rc = resolver_init(&r, &loop, servers, s->network.dns_servers.n, CHECK_DNS_TIMEOUT_MS);
    free(servers);
    if (rc < 0) {
        fprintf(stderr, "sluice: check: cannot start the resolver: %s\n", uv_strerror(rc));
        uv_loop_close(&loop);
        return rc;
    }
    for (i = 0; i < n; i++) {
        struct resolver_query *q;
        l[i]->st = RESOLVER_FAIL;
        l[i]->n = 0;
        if (resolver_query(r, l[i]->name, on_resolved, l[i], &q) < 0)
            l[i]->st = RESOLVER_FAIL;
    }
    uv_run(&loop, UV_RUN_DEFAULT);
    resolver_close(r, on_resolver_closed, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    rc = uv_loop_close(&loop);
    return rc == 0 ? 0 : -EBUSY;
}

/* Resolves the names check --resolve judges: allowed or undecided ones. */
static int resolve_all(const struct settings *s, struct check_item *items, size_t n)
{
    struct check_lookup **l = calloc(n > 0 ? n : 1, sizeof(*l));
    size_t k = 0;
    int rc;

    if (l == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        struct check_item *it = &items[i];
        if (!it->valid || it->host.kind != POLICY_HOST_NAME || it->d.verdict == POLICY_DENY)
            continue;
        it->lk.name = it->host.name;
        l[k++] = &it->lk;
    }
    rc = check_resolve(s, l, k);
    free(l);
    return rc;
}

/* Writes a decision's reason, cut at its size: a reason is a one-line
 * summary, and a long host name may not fit (gcc's -Wformat-truncation knew
 * that and said so; here it is meant). */
static void set_reason(struct policy_judgment *d, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void set_reason(struct policy_judgment *d, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(d->reason, sizeof(d->reason), fmt, ap);
    va_end(ap);
}

/* The verdict finished with the answers from the match already made (an IP
 * literal is its own answer), as egress does. A
 * failed lookup is reported as a denial, as nothing could be dialed; the rule
 * that let the name through stays, as in the proxy's log. */
static void apply_guard(const struct policy *p, struct check_item *it)
{
    if (!it->valid || it->d.verdict == POLICY_DENY)
        return;
    if (it->host.kind == POLICY_HOST_NAME && it->lk.st != RESOLVER_OK) {
        it->d.verdict = POLICY_DENY;
        it->d.origin = POLICY_BY_GUARD;
        it->would_deny = 0;
        set_reason(&it->d, "%s for %s", check_resolver_status_name(it->lk.st), it->host.name);
        return;
    }
    policy_verdict_finish(p, &it->host, it->port, &it->match, it->lk.addrs, it->lk.n, it->gv,
                          &it->d);
    it->naddrs = it->d.naddrs;
    it->nallowed = it->d.nallowed;
    it->would_deny = it->d.report_only;
}

/* ---- output ---- */

static void print_text(const struct check_item *it, int resolve)
{
    char hp[POLICY_HOST_MAX + 200];
    const char *src = it->d.source;
    size_t i;

    target_words(it, hp, sizeof(hp));
    if (it->d.rule != NULL && it->d.rule->list_id == POLICY_LIST_REQUEST) {
        printf("%-5s %s  request rule '%s' (%s[%zu], %s): %s\n", decision_name(it), hp,
               it->d.rule->pattern, it->d.rule->list, it->d.rule->index, src, it->d.reason);
    } else if (it->d.rule != NULL) {
        if (strstr(it->d.rule->list, "Files") != NULL)
            printf("%-5s %s  rule '%s' (%s, %s): %s\n", decision_name(it), hp,
                   it->d.rule->pattern, it->d.rule->list, src, it->d.reason);
        else
            printf("%-5s %s  rule '%s' (%s[%zu], %s): %s\n", decision_name(it), hp,
                   it->d.rule->pattern, it->d.rule->list, it->d.rule->index, src, it->d.reason);
    } else {
        printf("%-5s %s  %s: %s\n", decision_name(it), hp,
               it->d.origin == POLICY_BY_REQUEST ? "request rules" : "no rule", it->d.reason);
    }
    if (!resolve)
        return;
    for (i = 0; i < it->naddrs; i++) {
        char ip[64];
        printf("      %-39s %-14s %s: %s\n", policy_addr_str(&it->gv[i].addr, ip, sizeof(ip)),
               policy_class_name(it->gv[i].cls), it->gv[i].allowed ? "allowed" : "denied",
               it->gv[i].why);
    }
}

static const char *transparent_dns(const struct policy *p, const struct check_item *it,
                                   struct policy_judgment *dd);

static void print_json(const struct check_item *it, int resolve, const struct policy *tp)
{
    json_t *o = json_object();
    char *s;
    size_t i;

    json_object_set_new(o, "target", json_string(it->target));
    json_object_set_new(o, "host", json_string(it->host.name));
    json_object_set_new(o, "port", json_integer(it->port));
    if (it->udp)
        json_object_set_new(o, "transport", json_string("udp"));
    if (it->url) {
        json_object_set_new(o, "method", json_string(it->method));
        json_object_set_new(o, "path", json_string(it->path));
        json_object_set_new(o, "tunnel", json_boolean(it->tls));
        json_object_set_new(o, "terminated", json_boolean(it->terminated));
    }
    json_object_set_new(o, "decision", json_string(decision_name(it)));
    if (it->d.rule != NULL) {
        json_object_set_new(o, "rule", json_string(it->d.rule->pattern));
        json_object_set_new(o, "source", json_string(it->d.source));
        json_object_set_new(o, "list", json_string(it->d.rule->list));
        json_object_set_new(o, "index", json_integer((json_int_t)it->d.rule->index));
    } else {
        json_object_set_new(o, "rule", json_null());
        json_object_set_new(o, "source", json_null());
    }
    json_object_set_new(o, "reason", json_string(it->d.reason));
    if (resolve && it->valid) {
        json_t *arr = json_array();
        for (i = 0; i < it->naddrs; i++) {
            char ip[64];
            json_t *a = json_object();
            json_object_set_new(a, "address",
                                json_string(policy_addr_str(&it->gv[i].addr, ip, sizeof(ip))));
            json_object_set_new(a, "class", json_string(policy_class_name(it->gv[i].cls)));
            json_object_set_new(a, "allowed", json_boolean(it->gv[i].allowed));
            json_object_set_new(a, "reason", json_string(it->gv[i].why));
            json_array_append_new(arr, a);
        }
        json_object_set_new(o, "addresses", arr);
    }
    if (tp != NULL) {
        struct policy_judgment dd;
        const char *dns = transparent_dns(tp, it, &dd);
        json_t *t = json_object();
        json_object_set_new(t, "dns", strcmp(dns, "ip") != 0 ? json_string(dns) : json_null());
        json_object_set_new(o, "transparent", t);
    }
    s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
    if (s != NULL) {
        puts(s);
        free(s);
    }
    json_decref(o);
}

/* ---- expectation files ---- */

static int parse_verdict(const char *w, size_t len, enum policy_verdict *v)
{
    if (len == 5 && memcmp(w, "allow", 5) == 0)
        *v = POLICY_ALLOW;
    else if (len == 4 && memcmp(w, "deny", 4) == 0)
        *v = POLICY_DENY;
    else if (len == 3 && memcmp(w, "ask", 3) == 0)
        *v = POLICY_ASK;
    else
        return -EINVAL;
    return 0;
}

/* Reads FILE into items; each non-comment line is "VERDICT TARGET". Lines
 * are kept in *bufp (targets point into it). Returns count or -1. */
/* The whole file, NUL-terminated (malloc'ed), or NULL after a message. */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    char *buf = NULL;
    size_t len = 0, cap = 0;

    if (f == NULL) {
        fprintf(stderr, "sluice: check: %s: cannot open: %s\n", path, strerror(errno));
        return NULL;
    }
    for (;;) {
        size_t got;
        if (cap - len < 4096) {
            char *nb = realloc(buf, cap ? cap * 2 : 8192);
            if (nb == NULL) {
                fclose(f);
                free(buf);
                fprintf(stderr, "sluice: check: out of memory\n");
                return NULL;
            }
            buf = nb;
            cap = cap ? cap * 2 : 8192;
        }
        got = fread(buf + len, 1, cap - len - 1, f);
        if (got == 0)
            break;
        len += got;
    }
    fclose(f);
    buf[len] = '\0';
    return buf;
}

/* Cuts a comment and surrounding blanks off line; splits the verdict word
 * off: *w and *wlen, the rest returned ("" when none). NULL: blank line. */
static char *split_line(char *line, char **w, size_t *wlen)
{
    char *hash = strchr(line, '#'), *end, *t;

    if (hash != NULL)
        *hash = '\0';
    end = line + strlen(line);
    while (end > line && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'))
        *--end = '\0';
    *w = line;
    while (**w == ' ' || **w == '\t')
        (*w)++;
    if (**w == '\0')
        return NULL;
    t = *w;
    while (*t != '\0' && *t != ' ' && *t != '\t')
        t++;
    *wlen = (size_t)(t - *w);
    while (*t == ' ' || *t == '\t')
        *t++ = '\0';
    return t;
}

/* 1 when s is a method: a non-empty RFC 9110 token. */
static int is_method(const char *s)
{
    if (*s == '\0')
        return 0;
    for (; *s != '\0'; s++)
        if (!common_is_tchar((unsigned char)*s))
            return 0;
    return 1;
}

/* "TARGET" or "METHOD URL" (a method token, then an http:// or https://
 * URL): *t becomes the target, *m the method (NULL when none). 0 or -1. */
static int split_method(char **t, const char **m)
{
    char *sp = strpbrk(*t, " \t"), *u;

    *m = NULL;
    if (sp == NULL)
        return 0;
    u = sp;
    while (*u == ' ' || *u == '\t')
        *u++ = '\0';
    if (*u == '\0' || strpbrk(u, " \t") != NULL ||
        (strncmp(u, "http://", 7) != 0 && strncmp(u, "https://", 8) != 0))
        return -1;
    if (!is_method(*t))
        return -1;
    *m = *t;
    *t = u;
    return 0;
}

static long read_expect(const char *path, char **bufp, struct check_item **itemsp)
{
    char *buf = slurp(path);
    struct check_item *items = NULL;
    size_t n = 0, ncap = 0;
    unsigned lineno = 0;
    char *line, *next;
    int bad = 0;

    if (buf == NULL)
        return -1;
    for (line = buf; line != NULL && *line != '\0'; line = next) {
        char *w, *t;
        size_t wlen = 0;
        enum policy_verdict v;
        const char *m = NULL;

        lineno++;
        next = strchr(line, '\n');
        if (next != NULL)
            *next++ = '\0';
        t = split_line(line, &w, &wlen);
        if (t == NULL)
            continue;
        if (parse_verdict(w, wlen, &v) < 0 || *t == '\0' || split_method(&t, &m) < 0) {
            fprintf(stderr,
                    "%s:%u: expected 'allow|deny|ask TARGET' or 'allow|deny|ask METHOD "
                    "URL'\n",
                    path, lineno);
            bad = 1;
            continue;
        }
        if (n == ncap) {
            struct check_item *ni = realloc(items, (ncap ? ncap * 2 : 64) * sizeof(*ni));
            if (ni == NULL) {
                fprintf(stderr, "sluice: check: out of memory\n");
                bad = 1;
                break;
            }
            items = ni;
            ncap = ncap ? ncap * 2 : 64;
        }
        memset(&items[n], 0, sizeof(items[n]));
        items[n].target = t;
        items[n].file = path;
        items[n].line = lineno;
        items[n].expect = v;
        items[n].method = m;
        n++;
    }
    if (bad) {
        free(items);
        free(buf);
        return -1;
    }
    *bufp = buf;
    *itemsp = items;
    return (long)n;
}

/* Parses every target and decides it by the rules; 1 when one is bad. A URL
 * target is decided as the proxy decides its request: an http:// one by its
 * method and path, an https:// one as the CONNECT tunnel it travels in, or,
 * when network.tlsTerminate terminates that tunnel, by its method and path
 * as the request inside it. */
static int decide_all(const struct policy *p, struct check_item *items, size_t n,
                      const char *method)
{
    int bad_target = 0;

    for (size_t i = 0; i < n; i++) {
        struct check_item *it = &items[i];
        struct policy_request rq;
        int u = parse_udp(it->target, it, &it->why);
        if (u > 0)
            u = parse_url(it->target, it, &it->why);
        if (u < 0 ||
            (u > 0 && policy_target_parse(it->target, 443, &it->host, &it->port, &it->why) < 0)) {
            char esc[1024];
            common_escape(it->target, esc, sizeof(esc));
            if (it->file != NULL)
                fprintf(stderr, "%s:%u: invalid target '%s': %s\n", it->file, it->line, esc,
                        it->why);
            else
                fprintf(stderr, "sluice: check: invalid target '%s': %s\n", esc, it->why);
            bad_target = 1;
            continue;
        }
        it->valid = 1;
        if (it->method == NULL) /* an expectation line may name its own */
            it->method = method != NULL ? method : "GET";
        rq.method = it->method;
        rq.method_len = strlen(it->method);
        rq.target = it->path;
        rq.target_len = it->path != NULL ? strlen(it->path) : 0;
        /* a tunnel the proxy terminates: its requests are judged as inside it */
        it->terminated = it->url && it->tls && policy_tls_terminates(p, &it->host, it->port);
        if (it->udp) /* SOCKS5 UDP ASSOCIATE's verdict for each datagram */
            policy_decide_transport(p, POLICY_UDP, &it->host, it->port, &it->match);
        else
            policy_decide_request(p, &it->host, it->port,
                                  it->url && (!it->tls || it->terminated) ? &rq : NULL,
                                  &it->match);
        policy_verdict_finish(p, &it->host, it->port, &it->match, NULL, 0, it->gv, &it->d);
        it->would_deny = it->d.report_only;
    }
    return bad_target;
}

/* Transparent mode (issue 17): what the sandbox's resolver answers for the
 * target, by the same policy_dns_refused it uses; the connect() itself is
 * decided as printed above (the same egress pipeline). "ip" for an IP
 * literal: no DNS. */
static const char *transparent_dns(const struct policy *p, const struct check_item *it,
                                   struct policy_judgment *dd)
{
    if (it->host.kind != POLICY_HOST_NAME)
        return "ip";
    return policy_dns_refused(p, &it->host, dd) ? "nxdomain" : "synthetic";
}

static void print_transparent(const struct policy *p, const struct check_item *it)
{
    struct policy_judgment dd;
    const char *dns = transparent_dns(p, it, &dd);

    if (strcmp(dns, "ip") == 0)
        printf("      transparent: connect() to this address is judged as the IP literal above\n");
    else if (strcmp(dns, "nxdomain") == 0)
        printf("      transparent: the sandbox's resolver answers NXDOMAIN (%s)\n", dd.reason);
    else
        printf("      transparent: the sandbox's resolver answers a synthetic address "
               "(198.18.0.0/15, fd53:6c75:6963:6500::/64) that maps back to %s; connect() to "
               "port %u is decided as above\n",
               it->host.name, (unsigned)it->port);
}

/* Prints every item (or every mismatch); the exit status. */
static int report(const struct check_opts *o, const struct policy *p,
                  const struct check_item *items, size_t n, int bad_target)
{
    size_t passed = 0, failed = 0;

    for (size_t i = 0; i < n; i++) {
        const struct check_item *it = &items[i];
        if (!it->valid)
            continue;
        if (o->expect_path != NULL) {
            char hp[POLICY_HOST_MAX + 200];
            if (it->d.verdict == it->expect) {
                passed++;
                continue;
            }
            failed++;
            target_words(it, hp, sizeof(hp));
            printf("%s:%u: expected %s %s, got %s: %s\n", it->file, it->line,
                   verdict_name(it->expect), hp, verdict_name(it->d.verdict), it->d.reason);
        } else if (o->json) {
            print_json(it, o->resolve, o->transparent ? p : NULL);
        } else {
            print_text(it, o->resolve);
            if (o->transparent && !it->udp)
                print_transparent(p, it);
        }
    }
    if (o->expect_path != NULL) {
        printf("%zu passed, %zu failed\n", passed, failed);
        return failed > 0 ? 1 : 0;
    }
    return bad_target ? 2 : 0;
}

int check_run(const struct check_opts *o, const struct settings *s)
{
    struct settings_error err;
    struct policy *p = NULL;
    struct check_item *items = NULL;
    char *expect_buf = NULL;
    size_t n = 0;
    int bad_target, rc = 2;

    if (policy_compile(s, &p, &err) < 0) {
        fprintf(stderr, "%s\n", err.msg);
        goto out;
    }
    if (o->expect_path != NULL) {
        long got = read_expect(o->expect_path, &expect_buf, &items);
        if (got < 0)
            goto out;
        n = (size_t)got;
    } else {
        n = o->ntargets;
        items = calloc(n, sizeof(*items));
        if (items == NULL) {
            fprintf(stderr, "sluice: check: out of memory\n");
            goto out;
        }
        for (size_t i = 0; i < n; i++)
            items[i].target = o->targets[i];
    }
    if (o->method != NULL) {
        int any_url = 0;
        if (!is_method(o->method)) {
            fprintf(stderr, "sluice: check: --method: not a method (an RFC 9110 token)\n");
            goto out;
        }
        for (size_t i = 0; i < n; i++)
            any_url |= strncmp(items[i].target, "http://", 7) == 0 ||
                       strncmp(items[i].target, "https://", 8) == 0;
        if (!any_url) {
            fprintf(stderr, "sluice: check: --method judges a request: give a URL target "
                            "(http://HOST/PATH or https://HOST/PATH)\n");
            goto out;
        }
    }
    bad_target = decide_all(p, items, n, o->method);
    if (o->expect_path != NULL && bad_target)
        goto out;
    if (o->resolve) {
        proxy_set_local(p, NULL, NULL, 0);
        if (resolve_all(s, items, n) < 0)
            goto out;
        for (size_t i = 0; i < n; i++)
            apply_guard(p, &items[i]);
    }
    rc = report(o, p, items, n, bad_target);
out:
    fflush(stdout);
    for (size_t i = 0; items != NULL && i < n; i++)
        free(items[i].path);
    free(items);
    free(expect_buf);
    policy_free(p);
    return rc;
}
