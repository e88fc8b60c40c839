/* tests/proxy/test_learn.c - the fragment builder of `check --learn` and
 * `run --learn` (proxy/learn.c): records read by the connection log's
 * reader (replay_parse_line) or taken from a run (learn_add_connlog) give
 * the exact fragment expected: the wildcard rule (2+ subdomains of one
 * registrable domain on one port, never over a public suffix, ICANN or
 * private), ports kept, duplicates merged, sorted whatever the order in;
 * what report mode does not lift (the guard, deny rules, non-public IP
 * literals, the resolver's refusals) noted and never allowed; a base
 * policy's allowed destinations left out; the file written atomically and
 * never through a symbolic link (proxy/learn_out.c). */
#define _GNU_SOURCE /* open_memstream */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "bridge/bridge.h"
#include "proxy/learn.h"
#include "settings/settings.h"

static char buf[REPLAY_LINE_MAX + 1];

/* one decision record, logfmt: "PROTO HOST PORT DECISION [k=v...]" */
static void add(struct learn *l, const char *proto, const char *host, unsigned port,
                const char *decision, const char *extra)
{
    char line[2048];
    struct replay_record r;
    const char *why = NULL;

    snprintf(line, sizeof(line), "time=t level=info event=decision id=1 protocol=%s host=%s%s%u "
             "decision=%s%s%s", proto, host, port != 0 ? " port=" : "", port, decision,
             extra != NULL ? " " : "", extra != NULL ? extra : "");
    if (port == 0) /* dns: no port key */
        snprintf(line, sizeof(line), "time=t level=info event=decision id=1 protocol=%s host=%s "
                 "decision=%s%s%s", proto, host, decision, extra != NULL ? " " : "",
                 extra != NULL ? extra : "");
    if (replay_parse_line(line, strlen(line), buf, sizeof(buf), &r, &why) != 1)
        fail_msg("not a record (%s): %s", why, line);
    assert_int_equal(learn_add(l, &r), 0);
}

static void conn(struct learn *l, const char *host, unsigned port)
{
    add(l, "connect", host, port, "would_deny", NULL);
}

/* The fragment with these entries (NULL-terminated), as learn_build writes it. */
static char *expected(const char *const *e)
{
    static char out[8192];
    size_t n = 0;

    n += (size_t)snprintf(out + n, sizeof(out) - n, "{\n  \"network\": {\n    \"allowedDomains\": [");
    for (size_t i = 0; e[i] != NULL; i++)
        n += (size_t)snprintf(out + n, sizeof(out) - n, "%s\n      \"%s\"", i > 0 ? "," : "", e[i]);
    snprintf(out + n, sizeof(out) - n, "%s]\n  }\n}\n", e[0] != NULL ? "\n    " : "");
    return out;
}

/* learn_build's fragment and notes; the caller frees both. */
static char *build(struct learn *l, const struct policy *base, char **notes,
                   struct learn_result *res)
{
    size_t len = 0;
    FILE *f;

    *notes = NULL;
    f = open_memstream(notes, &len);
    assert_non_null(f);
    assert_int_equal(learn_build(l, base, f, res), 0);
    fclose(f);
    assert_non_null(res->json);
    return res->json;
}

static void check(struct learn *l, const char *const *want, const char *notes_want)
{
    struct learn_result res;
    char *notes, *json = build(l, NULL, &notes, &res);

    assert_string_equal(json, expected(want));
    assert_string_equal(notes, notes_want);
    free(json);
    free(notes);
    learn_free(l);
}

static struct learn *fresh(void)
{
    struct learn *l = NULL;

    assert_int_equal(learn_new(&l), 0);
    return l;
}

static void wildcards(void **state)
{
    struct learn *l = fresh();
    (void)state;

    /* two subdomains: a wildcard; the domain itself stays an entry */
    conn(l, "b.example.com", 443);
    conn(l, "a.example.com", 443);
    conn(l, "example.com", 443);
    /* one subdomain of another domain: exact */
    conn(l, "www.one.org", 443);
    /* deeper names count as subdomains of the registrable domain */
    conn(l, "x.y.deep.net", 443);
    conn(l, "z.deep.net", 443);
    /* a multi-label suffix: the wildcard is over the registrable domain */
    conn(l, "a.shop.co.uk", 443);
    conn(l, "b.shop.co.uk", 443);
    /* names that are registrable domains under a suffix: never *.co.uk */
    conn(l, "x.co.uk", 443);
    conn(l, "y.co.uk", 443);
    /* the private section too: user sites under github.io are their own */
    conn(l, "alice.github.io", 443);
    conn(l, "bob.github.io", 443);
    check(l,
          (const char *[]){"*.deep.net:443", "*.example.com:443", "*.shop.co.uk:443",
                           "alice.github.io:443", "bob.github.io:443", "example.com:443",
                           "www.one.org:443", "x.co.uk:443", "y.co.uk:443", NULL},
          "");
}

static void ports_and_dedupe(void **state)
{
    struct learn *l = fresh();
    (void)state;

    /* the same host on two ports: two entries, each with its port */
    conn(l, "api.svc.dev", 443);
    conn(l, "api.svc.dev", 8443);
    /* a wildcard per port: two names on 443, one on 80 */
    conn(l, "a.cdn.net", 443);
    conn(l, "b.cdn.net", 443);
    add(l, "http", "c.cdn.net", 80, "allow", "method=GET url=http://c.cdn.net/x");
    /* repeats, in any protocol or decision, are one destination */
    for (int i = 0; i < 3; i++) {
        conn(l, "a.cdn.net", 443);
        add(l, "socks5", "b.cdn.net", 443, "allow", NULL);
        add(l, "transparent", "api.svc.dev", 443, "allow", "addr=203.0.113.9");
    }
    /* IP literals in the public range: exact, v6 bracketed */
    conn(l, "8.8.8.8", 53);
    conn(l, "[2001:4860:4860::8888]", 443);
    check(l,
          (const char *[]){"*.cdn.net:443", "8.8.8.8:53", "[2001:4860:4860::8888]:443",
                           "api.svc.dev:443", "api.svc.dev:8443", "c.cdn.net:80", NULL},
          "");
}

/* the same records in two orders: the same bytes */
static void deterministic(void **state)
{
    static const char *const hosts[] = {"q.b.test", "p.b.test", "a.test", "z.c.test", "1.1.1.1"};
    struct learn_result r1, r2;
    struct learn *l1 = fresh(), *l2 = fresh();
    char *n1, *n2, *j1, *j2;
    (void)state;

    for (size_t i = 0; i < 5; i++) {
        conn(l1, hosts[i], (unsigned)(80 + i % 2));
        conn(l2, hosts[4 - i], (unsigned)(80 + (4 - i) % 2));
    }
    j1 = build(l1, NULL, &n1, &r1);
    j2 = build(l2, NULL, &n2, &r2);
    assert_string_equal(j1, j2);
    assert_int_equal(r1.entries, r2.entries);
    free(j1);
    free(j2);
    free(n1);
    free(n2);
    learn_free(l1);
    learn_free(l2);
}

static void guard_cases(void **state)
{
    struct learn *l = fresh();
    (void)state;

    /* the guard refused the answer: report mode does not lift it */
    add(l, "connect", "meta.test", 80, "deny", "addr=169.254.169.254");
    add(l, "http", "lo.test", 8080, "deny",
        "method=GET url=http://lo.test:8080/ addr=127.0.0.1");
    /* a deny rule (here the managed file's): an allow entry cannot lift it */
    add(l, "connect", "evil.test", 443, "deny",
        "rule=\"'evil.test' network.deniedDomains[0]\" source=/etc/sluice/managed.json:3");
    /* non-public literals, whatever the decision */
    conn(l, "10.1.2.3", 80);
    conn(l, "127.0.0.1", 3000);
    add(l, "connect", "169.254.169.254", 80, "deny", NULL);
    conn(l, "[fd00::1]", 443);
    conn(l, "[::1]", 443);
    conn(l, "100.64.0.1", 443);
    /* a name the sandbox's resolver refused; an allowed one says nothing */
    add(l, "dns", "bad.test", 0, "deny", "rule=\"'bad.test' network.deniedDomains[1]\"");
    add(l, "dns", "good.test", 0, "allow", NULL);
    /* a request rule's refusal report mode let through: the host is
     * learned, the request rule is not */
    add(l, "http", "git.example", 80, "would_deny",
        "method=POST url=http://git.example/push rule=\"'deny POST git.example /**' "
        "network.requestRules[0]\" source=s.json:4");
    /* denied with no rule deciding (an enforce-mode log): learned */
    add(l, "connect", "new.example", 443, "deny", NULL);
    check(l, (const char *[]){"git.example:80", "new.example:443", NULL},
          "sluice: not learned: 10.1.2.3:80: an address outside the public range (private) is "
          "never learned\n"
          "sluice: not learned: 100.64.0.1:443: an address outside the public range (private) "
          "is never learned\n"
          "sluice: not learned: 127.0.0.1:3000: an address outside the public range (loopback) "
          "is never learned\n"
          "sluice: not learned: 169.254.169.254:80: an address outside the public range "
          "(metadata) is never learned\n"
          "sluice: not learned: [::1]:443: an address outside the public range (loopback) is "
          "never learned\n"
          "sluice: not learned: [fd00::1]:443: an address outside the public range (private) "
          "is never learned\n"
          "sluice: not learned: bad.test (dns): refused by the sandbox's resolver: 'bad.test' "
          "network.deniedDomains[1]\n"
          "sluice: not learned: evil.test:443: denied by 'evil.test' network.deniedDomains[0] "
          "(/etc/sluice/managed.json:3); a deny rule wins over any allow entry\n"
          "sluice: not learned: git.example:80: requests refused by 'deny POST git.example /**' "
          "network.requestRules[0] (s.json:4); the host is learned, network.requestRules is "
          "not\n"
          "sluice: not learned: lo.test:8080: the address guard refused its answer 127.0.0.1, "
          "which report mode does not lift\n"
          "sluice: not learned: meta.test:80: the address guard refused its answer "
          "169.254.169.254, which report mode does not lift\n");
}

static struct policy *compile(const char *json)
{
    struct settings s;
    struct settings_error err;
    struct policy *p = NULL;

    settings_init(&s);
    if (settings_apply_buffer(&s, "base.json", json, strlen(json), &err) < 0 ||
        policy_compile(&s, &p, &err) < 0)
        fail_msg("%s", err.msg);
    settings_free(&s);
    return p;
}

static void with_base(void **state)
{
    struct policy *base = compile("{\"network\": {\"allowedDomains\": [\"*.have.test\", "
                                  "\"one.test:443\"],\n \"deniedDomains\": [\"no.test\"],\n"
                                  " \"requestRules\": [{\"host\": \"one.test\", \"method\": "
                                  "\"GET\", \"action\": \"allow\"}]}}");
    struct learn *l = fresh();
    struct learn_result res;
    char *notes, *json;
    (void)state;

    conn(l, "a.have.test", 443);   /* allowed by base: left out */
    conn(l, "b.have.test", 8080);  /* every port: left out */
    conn(l, "one.test", 443);      /* allowed, request rules narrow it: left out */
    conn(l, "one.test", 80);       /* another port: learned */
    conn(l, "no.test", 443);       /* base's deny rule: noted */
    conn(l, "x.new.test", 443);
    conn(l, "y.new.test", 443);
    json = build(l, base, &notes, &res);
    assert_string_equal(json, expected((const char *[]){"*.new.test:443", "one.test:80", NULL}));
    assert_string_equal(notes, "sluice: not learned: no.test:443: the base settings deny it by "
                               "'no.test' network.deniedDomains[0] (base.json:2); an allow entry "
                               "would not lift it\n");
    assert_int_equal(res.already, 3);
    assert_int_equal(res.entries, 2);
    assert_int_equal(res.wildcards, 1);
    assert_int_equal(res.dests, 3);
    assert_int_equal(res.notes, 1);
    free(json);
    free(notes);
    learn_free(l);
    policy_free(base);
}

static void empty(void **state)
{
    (void)state;
    check(fresh(), (const char *[]){NULL}, "");
}

/* a run's records (run --learn): rendered and read back; close records
 * skipped; a record that does not read back counted, not learned */
static void from_connlog(void **state)
{
    struct learn *l = fresh();
    struct learn_result res;
    struct connlog rec;
    char *notes, *json;
    (void)state;

    memset(&rec, 0, sizeof(rec));
    rec.event = CONNLOG_DECISION;
    rec.protocol = "connect";
    rec.host = "pkg.example";
    rec.port = 443;
    rec.verdict = "would_deny";
    rec.reason = "no rule matches";
    rec.code = 200;
    assert_int_equal(learn_add_connlog(l, &rec), 0);
    rec.event = CONNLOG_CLOSE;
    rec.host = "closed.example";
    assert_int_equal(learn_add_connlog(l, &rec), 0);
    rec.event = CONNLOG_DECISION;
    rec.host = "bad host"; /* not a host: does not read back */
    assert_int_equal(learn_add_connlog(l, &rec), -EINVAL);
    json = build(l, NULL, &notes, &res);
    assert_string_equal(json, expected((const char *[]){"pkg.example:443", NULL}));
    assert_non_null(strstr(notes, "1 records that did not read back"));
    assert_int_equal(res.dropped, 1);
    assert_int_equal(res.decisions, 1);
    free(json);
    free(notes);
    learn_free(l);
}

static void out_file(void **state)
{
    char dir[] = "/tmp/test_learn.XXXXXX", path[256], link[256], got[64];
    struct learn_out o;
    struct stat st;
    mode_t old = umask(027);
    int fd;
    ssize_t n;
    (void)state;

    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/f.json", dir);
    snprintf(link, sizeof(link), "%s/l.json", dir);
    assert_int_equal(learn_out_open(&o, path), 0);
    assert_int_equal(learn_out_write(&o, "one\n"), 0);
    assert_int_equal(learn_out_write(&o, "two\n"), 0); /* replaced */
    learn_out_close(&o);
    fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    n = read(fd, got, sizeof(got) - 1);
    close(fd);
    assert_int_equal(n, 4);
    got[n] = '\0';
    assert_string_equal(got, "two\n");
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0640); /* 0644 less the umask */
    /* a symbolic link at FILE: refused when opened, and when it appears later */
    assert_int_equal(symlink(path, link), 0);
    assert_int_equal(learn_out_open(&o, link), -1);
    unlink(link);
    assert_int_equal(learn_out_open(&o, link), 0);
    assert_int_equal(symlink(path, link), 0);
    assert_int_equal(learn_out_write(&o, "three\n"), -1);
    learn_out_close(&o);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_size, 4); /* the link's target untouched */
    /* a directory at FILE, a name that is no file name */
    assert_int_equal(learn_out_open(&o, dir), -1);
    snprintf(path, sizeof(path), "%s/", dir);
    assert_int_equal(learn_out_open(&o, path), -1);
    assert_int_equal(learn_out_open(&o, "/nonexistent-dir/f.json"), -1);
    unlink(link);
    snprintf(path, sizeof(path), "%s/f.json", dir);
    unlink(path);
    assert_int_equal(rmdir(dir), 0); /* no temporary file left behind */
    umask(old);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(wildcards),     cmocka_unit_test(ports_and_dedupe),
        cmocka_unit_test(deterministic), cmocka_unit_test(guard_cases),
        cmocka_unit_test(with_base),     cmocka_unit_test(empty),
        cmocka_unit_test(from_connlog),  cmocka_unit_test(out_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
