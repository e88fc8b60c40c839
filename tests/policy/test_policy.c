/* tests/policy/test_policy.c - table-driven tests of the policy engine (style.md R12, R14).
 *
 * Areas: request normalisation, check targets, patterns, decisions, address
 * classes, the resolved-address guard, this host's addresses, compile errors,
 * and a 10,000-rule policy. Each area is one test that walks a static table,
 * prints every row that fails (with the row's note, if any) and fails once at
 * the end, so one run reports every broken row.
 *
 * Settings are built by hand: the struct is zeroed (the "no rules, enforce"
 * state of settings_init) and the lists filled here; the test owns and frees
 * every allocation itself, so it does not depend on the loader in
 * policy/settings.c. A row note starting with "ambig" marks a row whose
 * expectation is this file's reading of a point the spec leaves open.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "policy/policy.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))
#define DC (-1) /* "don't check" for an int column */

#define FILE_NAME "test-settings.json"
#define LIST_ALLOWED "network.allowedDomains"
#define LIST_DENIED "network.deniedDomains"
#define LIST_RDENIED "network.deniedResolvedAddresses"
#define LINE_ALLOWED 100u
#define LINE_DENIED 200u
#define LINE_RDENIED 300u
#define COL 7u

/* ------------------------------------------------------------------------ */
/* Reporting                                                                 */

static size_t rows_total;

/* Prints one failing row; the caller counts. */
__attribute__((format(printf, 3, 4))) static void row_fail(const char *area, size_t i,
                                                          const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    print_error("FAIL %s row %zu: %s\n", area, i, buf);
}

/* Printable form of raw bytes, for messages. */
static const char *esc(const char *s, size_t len, char *buf, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < len && o + 5 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f && c != '\\') {
            buf[o++] = (char)c;
        } else {
            o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", c);
        }
    }
    buf[o] = '\0';
    return buf;
}

static const char *nz(const char *s)
{
    return s ? s : "(null)";
}

static const char *verdict_name(int v)
{
    switch (v) {
    case POLICY_DENY: return "DENY";
    case POLICY_ALLOW: return "ALLOW";
    case POLICY_ASK: return "ASK";
    default: return "?";
    }
}

static const char *origin_name(int o)
{
    switch (o) {
    case POLICY_BY_RULE: return "RULE";
    case POLICY_BY_CLASS: return "CLASS";
    case POLICY_BY_ALLOW_ALL: return "ALLOW_ALL";
    case POLICY_BY_STRICT: return "STRICT";
    case POLICY_BY_NO_RULE: return "NO_RULE";
    case POLICY_BY_GUARD: return "GUARD";
    default: return "?";
    }
}

static const char *kind_name(int k)
{
    switch (k) {
    case POLICY_HOST_NAME: return "NAME";
    case POLICY_HOST_IPV4: return "IPV4";
    case POLICY_HOST_IPV6: return "IPV6";
    default: return "?";
    }
}

static const char *rkind_name(int k)
{
    switch (k) {
    case POLICY_RULE_NAME: return "NAME";
    case POLICY_RULE_WILDCARD: return "WILDCARD";
    case POLICY_RULE_ANY: return "ANY";
    case POLICY_RULE_CIDR: return "CIDR";
    default: return "?";
    }
}

static const char *cls_name(int c)
{
    static const char *const names[] = {
        "PUBLIC",    "PRIVATE",   "LOOPBACK", "UNSPECIFIED", "LINK_LOCAL", "MULTICAST",
        "BROADCAST", "RESERVED",  "METADATA", "THIS_HOST",   "PROXY",      "EMBEDDED",
        "LISTED",
    };
    if (c >= 0 && (size_t)c < NELEM(names))
        return names[c];
    return "?";
}

/* A decision reason must be one line of printable ASCII. */
static int reason_ok(const char *r, size_t cap)
{
    size_t n = strnlen(r, cap);
    if (n == 0 || n == cap)
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)r[i];
        if (c < 0x20 || c > 0x7e)
            return 0;
    }
    return 1;
}

static struct policy_addr addr_of(const char *s)
{
    struct policy_addr a;
    memset(&a, 0, sizeof a);
    if (policy_addr_parse(s, &a) != 0)
        fail_msg("test bug or engine bug: policy_addr_parse(\"%s\") failed", s);
    return a;
}

/* ------------------------------------------------------------------------ */
/* Policies built by hand                                                    */

struct cfg {
    const char *name;
    const char *allow[12];
    const char *deny[8];
    const char *rdeny[6];
    const char *reason_key[3];
    const char *reason_val[3];
    int strict, allow_all, deny_private;
};

enum {
    C_BASIC = 0,
    C_DENY_ALL,
    C_ORDER,
    C_ALLOW_ALL,
    C_STRICT,
    C_DENY_PRIV,
    C_EMPTY,
    C_GUARD,
    C_GUARD_PRIV,
    C_REASONS,
    C_CIDR0,
    C_COUNT
};

static const struct cfg cfgs[C_COUNT] = {
    [C_BASIC] = {
        .name = "basic",
        .allow = {"example.com", "*.example.org", "api.example.net:443", "10.0.0.0/8",
                  "[2001:db8:1::]/48", "127.0.0.1:3000", "8.8.8.8", "localhost", "bücher.de",
                  "[2606:4700::1111]:443", "Upper.Example.EDU"},
        .deny = {"bad.example.org", "*.evil.com", "*:22", "1.1.1.1"},
    },
    [C_DENY_ALL] = {
        .name = "deny-all",
        .allow = {"example.com", "10.0.0.0/8"},
        .deny = {"*"},
    },
    [C_ORDER] = {
        .name = "order",
        .allow = {"a.example.com", "*.example.io", "a.example.io", "*.a.example.io", "10.0.0.0/8",
                  "10.1.0.0/16", "10.1.2.3", "svc.example.net:443", "svc.example.net",
                  "[2001:db8:ff::2]", "*.port.example.net:8443", "*.port.example.net"},
        .deny = {"*.example.com", "a.example.com", "[2001:db8:ff::]/48", "[2001:db8:ff::1]"},
    },
    [C_ALLOW_ALL] = {
        .name = "allow-all",
        .deny = {"bad.com"},
        .allow_all = 1,
    },
    [C_STRICT] = {
        .name = "strict",
        .allow = {"ok.com"},
        .strict = 1,
    },
    [C_DENY_PRIV] = {
        .name = "deny-private",
        .allow = {"10.0.0.0/8"},
        .deny_private = 1,
    },
    [C_EMPTY] = {
        .name = "empty",
    },
    [C_GUARD] = {
        .name = "guard",
        .allow = {"example.com", "127.0.0.1", "127.0.0.2:3000", "127.0.0.5", "127.0.0.6",
                  "10.0.0.0/8", "[::1]:8080"},
        .deny = {"10.1.2.3", "8.8.4.4", "127.0.0.6"},
        .rdeny = {"93.184.216.0/24", "[2606:4700::]/32", "127.0.0.5",
                  /* unbracketed, as srt writes them */
                  "2a00:1450::/32", "2a01:4f8::1"},
    },
    [C_GUARD_PRIV] = {
        .name = "guard-deny-private",
        .allow = {"example.com", "10.0.0.0/8"},
        .deny_private = 1,
    },
    [C_REASONS] = {
        .name = "reasons",
        .deny = {"*.evil.com", "tracker.net", "bad.org:443", "ctl.org"},
        .reason_key = {"*.evil.com", "bad.org:443", "ctl.org"},
        .reason_val = {"blocked by the security team", "port 443 of bad.org is closed",
                       "multi\nline\r\treason\x01 with bytes \xc3\xbc"},
    },
    [C_CIDR0] = {
        .name = "cidr-0",
        .allow = {"[::]/0"},
        .deny = {"0.0.0.0/0:25"},
    },
};

struct built {
    struct settings s;
    struct policy *p;
    int tried;
    int rc;
    char err[1024];
};

static struct built built[C_COUNT];

static void list_add(struct settings_list *l, const char *value, const char *list, size_t index,
                     unsigned line)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        struct settings_item *items = realloc(l->items, cap * sizeof *items);
        assert_non_null(items);
        l->items = items;
        l->cap = cap;
    }
    struct settings_item *it = &l->items[l->n++];
    memset(it, 0, sizeof *it);
    it->value = strdup(value);
    assert_non_null(it->value);
    it->file = FILE_NAME;
    it->line = line;
    it->col = COL;
    it->list = list;
    it->index = index;
}

static void list_release(struct settings_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->items[i].value);
    free(l->items);
    memset(l, 0, sizeof *l);
}

static void map_add(struct settings_map *m, const char *key, const char *value)
{
    if (m->n == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 4;
        struct settings_pair *pairs = realloc(m->pairs, cap * sizeof *pairs);
        assert_non_null(pairs);
        m->pairs = pairs;
        m->cap = cap;
    }
    struct settings_pair *pr = &m->pairs[m->n++];
    memset(pr, 0, sizeof *pr);
    pr->key = strdup(key);
    pr->value = strdup(value);
    assert_non_null(pr->key);
    assert_non_null(pr->value);
}

static void map_release(struct settings_map *m)
{
    for (size_t i = 0; i < m->n; i++) {
        free(m->pairs[i].key);
        free(m->pairs[i].value);
        list_release(&m->pairs[i].list);
    }
    free(m->pairs);
    memset(m, 0, sizeof *m);
}

/* The zeroed struct is settings_init's "no network rules, mode enforce". */
static void settings_blank(struct settings *s)
{
    memset(s, 0, sizeof *s);
    s->network.mode = SETTINGS_MODE_ENFORCE;
    s->network.deny_private_addresses = SETTINGS_FALSE;
    s->mandatory_deny_search_depth = 3;
}

static void settings_from_cfg(struct settings *s, const struct cfg *c)
{
    settings_blank(s);
    for (size_t i = 0; i < NELEM(c->allow) && c->allow[i]; i++)
        list_add(&s->network.allowed_domains, c->allow[i], LIST_ALLOWED, i,
                 LINE_ALLOWED + (unsigned)i);
    for (size_t i = 0; i < NELEM(c->deny) && c->deny[i]; i++)
        list_add(&s->network.denied_domains, c->deny[i], LIST_DENIED, i,
                 LINE_DENIED + (unsigned)i);
    for (size_t i = 0; i < NELEM(c->rdeny) && c->rdeny[i]; i++)
        list_add(&s->network.denied_resolved_addresses, c->rdeny[i], LIST_RDENIED, i,
                 LINE_RDENIED + (unsigned)i);
    for (size_t i = 0; i < NELEM(c->reason_key) && c->reason_key[i]; i++)
        map_add(&s->network.denied_domain_reasons, c->reason_key[i], c->reason_val[i]);
    s->network.strict_allowlist = c->strict;
    s->network.allow_all_domains = c->allow_all;
    s->network.deny_private_addresses = c->deny_private ? SETTINGS_TRUE : SETTINGS_FALSE;
}

static void settings_release(struct settings *s)
{
    list_release(&s->network.allowed_domains);
    list_release(&s->network.denied_domains);
    list_release(&s->network.denied_resolved_addresses);
    map_release(&s->network.denied_domain_reasons);
}

/* Compiles cfgs[id] once; NULL (and a message) if the compile failed. */
static struct policy *get_policy(int id)
{
    struct built *b = &built[id];
    if (!b->tried) {
        struct settings_error err;
        memset(&err, 0, sizeof err);
        b->tried = 1;
        settings_from_cfg(&b->s, &cfgs[id]);
        b->rc = policy_compile(&b->s, &b->p, &err);
        if (b->rc != 0) {
            snprintf(b->err, sizeof b->err, "%s", err.msg);
            print_error("FAIL compile of config '%s': rc %d: %s\n", cfgs[id].name, b->rc, b->err);
            b->p = NULL;
        }
    }
    return b->p;
}

static int group_teardown(void **state)
{
    (void)state;
    for (size_t i = 0; i < C_COUNT; i++) {
        if (built[i].p)
            policy_free(built[i].p);
        if (built[i].tried)
            settings_release(&built[i].s);
        memset(&built[i], 0, sizeof built[i]);
    }
    print_message("table rows checked: %zu\n", rows_total);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Normalisation                                                             */

struct norm_row {
    const char *raw;
    size_t len; /* 0: strlen(raw) */
    int ok;
    int kind;
    const char *canon; /* NULL: don't check */
    const char *note;
};

#define N_NAME(raw, canon) {raw, 0, 1, POLICY_HOST_NAME, canon, NULL}
#define N_V4(raw, canon) {raw, 0, 1, POLICY_HOST_IPV4, canon, NULL}
#define N_V6(raw, canon) {raw, 0, 1, POLICY_HOST_IPV6, canon, NULL}
#define N_BAD(raw) {raw, 0, 0, 0, NULL, NULL}

#define L63 "abcdefghij" "abcdefghij" "abcdefghij" "abcdefghij" "abcdefghij" "abcdefghij" "abc"
/* 4 labels of 63 + 3 dots = 255; cut to build 253 / 254 */
#define L61 "abcdefghij" "abcdefghij" "abcdefghij" "abcdefghij" "abcdefghij" "abcdefghij" "a"
#define NAME253 L63 "." L63 "." L63 "." L61               /* 63*3+61+3 = 253 */
#define NAME254 L63 "." L63 "." L63 "." L61 "b"           /* 254 */

static const struct norm_row norm_rows[] = {
    N_NAME("example.com", "example.com"),
    N_NAME("Example.COM", "example.com"),
    N_NAME("EXAMPLE.COM.", "example.com"),
    N_BAD("example.com.."),
    N_BAD(""),
    N_BAD("."),
    N_BAD(".a"),
    N_BAD("a..b"),
    N_BAD(".example.com"),
    N_NAME("a_b-c.example.com", "a_b-c.example.com"),
    N_NAME("localhost", "localhost"),
    N_NAME("bücher.de", "xn--bcher-kva.de"),
    N_NAME("BÜCHER.de", "xn--bcher-kva.de"),
    N_NAME("ÉXAMPLE.com", "xn--xample-9ua.com"),
    N_NAME("XN--BCHER-KVA.DE", "xn--bcher-kva.de"),
    N_NAME("münchen.de.", "xn--mnchen-3ya.de"),
    N_BAD("xn--zz.com"),
    N_BAD("xn--99999999999.com"),
    {"XN--ZZ.com", 0, 0, 0, NULL, "invalid A-label in upper case must be checked too"},
    {"Xn--zz.com", 0, 0, 0, NULL, "invalid A-label in mixed case must be checked too"},
    {"XN--99999999999.com", 0, 0, 0, NULL, "invalid A-label (overflow) in upper case"},
    {"\xef\xbc\x91\xef\xbc\x92\xef\xbc\x97.\xef\xbc\x90.\xef\xbc\x90.\xef\xbc\x91", 0, 1,
     POLICY_HOST_IPV4, "127.0.0.1", "fullwidth digits map to 127.0.0.1 under IDNA: an IP, never a NAME"},
    {"xn--a.com", 0, 0, 0, NULL, "xn--a decodes to U+0080 (a control char): invalid A-label"},
    N_BAD("b\xc3.com"), /* truncated UTF-8 */
    N_NAME(NAME253, NAME253),
    {NAME253 ".", 0, 1, POLICY_HOST_NAME, NAME253, "253 bytes plus the one trailing dot"},
    N_BAD(NAME254),
    N_NAME(L63 ".com", L63 ".com"),
    N_BAD(L63 "x.com"),
    {"a.com\0.evil.com", 15, 0, 0, NULL, "embedded NUL with explicit length"},
    {"a.com\0", 6, 0, 0, NULL, "trailing NUL counted in length"},
    {"example.com", 7, 1, POLICY_HOST_NAME, "example", "length shorter than the string"},
    N_BAD("exa mple.com"),
    N_BAD(" example.com"),
    N_BAD("example.com "),
    N_BAD("example.com\t"),
    N_BAD("example.com\n"),
    N_BAD("exa\x01mple.com"),
    N_BAD("exa\x7fmple.com"),
    N_BAD("exa%2emple.com"),
    N_BAD("a/b.com"),
    N_BAD("user@example.com"),
    N_BAD("example.com:80"),
    N_BAD("*.example.com"),
    N_BAD("*"),
    N_BAD("exa!mple.com"),
    /* numeric IPv4 spellings */
    N_V4("127.0.0.1", "127.0.0.1"),
    N_V4("2130706433", "127.0.0.1"),
    N_V4("0x7f.1", "127.0.0.1"),
    N_V4("127.1", "127.0.0.1"),
    N_V4("0177.0.0.1", "127.0.0.1"),
    N_V4("0x7f000001", "127.0.0.1"),
    N_V4("0X7F000001", "127.0.0.1"),
    N_V4("127.0.0.1.", "127.0.0.1"),
    N_V4("0x7f.0x0.0x0.0x1", "127.0.0.1"),
    N_V4("01.02.03.04", "1.2.3.4"),
    N_V4("1.2.3", "1.2.0.3"),
    N_V4("1.65535", "1.0.255.255"),
    N_V4("1.2.65535", "1.2.255.255"),
    N_V4("0", "0.0.0.0"),
    N_V4("0.0.0.0", "0.0.0.0"),
    N_V4("4294967295", "255.255.255.255"),
    N_V4("0xffffffff", "255.255.255.255"),
    N_V4("255.255.255.255", "255.255.255.255"),
    N_V4("134744072", "8.8.8.8"),
    N_V4("0252.0376.0251.0376", "170.254.169.254"),
    N_V4("169.254.43518", "169.254.169.254"),
    N_BAD("256.1.1.1"),
    N_BAD("1.2.3.256"),
    N_BAD("1.256.3.4"),
    N_BAD("4294967296"),
    N_BAD("0x100000000"),
    N_BAD("1.16777216"),
    N_BAD("1.2.65536"),
    N_BAD("08.1.1.1"),
    N_BAD("1.2.3.08"),
    N_BAD("1.2.3.09"),
    {"0x1g", 0, 1, POLICY_HOST_NAME, "0x1g",
     "ambig: last label is not a number (WHATWG 'ends in a number'), so a NAME"},
    {"0x.1.1.1", 0, 0, 0, NULL, "ambig: brief marks it '?'; glibc inet_aton reads 0x as 0"},
    N_BAD("1.2.3.4.5"),
    N_BAD("1..2.3"),
    {"example.123", 0, 0, 0, NULL, "last label numeric: whole host must be an IPv4 number"},
    N_NAME("1.2.3.example", "1.2.3.example"),
    N_NAME("0x7f.com", "0x7f.com"),
    N_NAME("127.0.0.1.nip.io", "127.0.0.1.nip.io"),
    /* IPv6 */
    N_V6("[::1]", "::1"),
    N_V6("::1", "::1"),
    N_V6("[::]", "::"),
    N_V6("[2001:DB8:0:0::1]", "2001:db8::1"),
    N_V6("2001:0db8:0000:0000:0000:0000:0000:0001", "2001:db8::1"),
    N_V6("[2001:db8:0:0:1:0:0:1]", "2001:db8::1:0:0:1"),
    N_V6("[2001:db8:0:1:1:1:1:1]", "2001:db8:0:1:1:1:1:1"),
    N_V6("[2001:0:0:1:0:0:0:1]", "2001:0:0:1::1"),
    N_V6("[FE80::ABCD]", "fe80::abcd"),
    N_BAD("fe80::1%eth0"),
    N_BAD("[fe80::1%25eth0]"),
    N_BAD("[fe80::1%eth0]"),
    N_V4("::ffff:127.0.0.1", "127.0.0.1"),
    N_V4("[::ffff:127.0.0.1]", "127.0.0.1"),
    N_V4("::ffff:7f00:1", "127.0.0.1"),
    N_V4("[::FFFF:A9FE:A9FE]", "169.254.169.254"),
    {"[::127.0.0.1]", 0, 1, POLICY_HOST_IPV6, NULL, "compat form stays IPv6 (only mapped -> v4)"},
    {"[::1\0]", 6, 0, 0, NULL, "NUL inside brackets"},
    {"[::1\0.evil.com]", 15, 0, 0, NULL, "NUL inside brackets, text after it"},
    N_BAD("[::1"),
    N_BAD("::1]"),
    N_BAD("[]"),
    N_BAD("[example.com]"),
    N_BAD("1::2::3"),
    N_BAD("[::1]:80"),
    N_BAD("[1:2:3:4:5:6:7:8:9]"),
    N_BAD("[12345::1]"),
};

static void test_normalize(void **state)
{
    (void)state;
    int nfail = 0;
    for (size_t i = 0; i < NELEM(norm_rows); i++) {
        const struct norm_row *r = &norm_rows[i];
        size_t len = r->len ? r->len : strlen(r->raw);
        char shown[600];
        esc(r->raw, len, shown, sizeof shown);
        struct policy_host h;
        memset(&h, 0x5a, sizeof h);
        const char *why = NULL;
        int rc = policy_host_normalize(r->raw, len, &h, &why);
        rows_total++;
        if (r->ok) {
            if (rc != 0) {
                row_fail("normalize", i, "'%s': rc %d (%s), want ok %s '%s'%s%s", shown, rc,
                         nz(why), kind_name(r->kind), nz(r->canon), r->note ? " -- " : "",
                         r->note ? r->note : "");
                nfail++;
                continue;
            }
            int bad = (int)h.kind != r->kind;
            if (r->canon && (strcmp(h.name, r->canon) != 0 || h.len != strlen(r->canon)))
                bad = 1;
            if (h.kind == POLICY_HOST_IPV4 && h.addr.family != 4)
                bad = 1;
            if (h.kind == POLICY_HOST_IPV6 && h.addr.family != 6)
                bad = 1;
            if (bad) {
                row_fail("normalize", i,
                         "'%s': got %s '%s' (len %zu, family %u), want %s '%s'%s%s", shown,
                         kind_name((int)h.kind), h.name, h.len, h.addr.family, kind_name(r->kind),
                         nz(r->canon), r->note ? " -- " : "", r->note ? r->note : "");
                nfail++;
            }
        } else {
            if (rc != -EINVAL || why == NULL || why[0] == '\0') {
                row_fail("normalize", i, "'%s': rc %d why '%s' (got %s '%s'), want -EINVAL with a "
                         "reason%s%s", shown, rc, nz(why),
                         rc == 0 ? kind_name((int)h.kind) : "-", rc == 0 ? h.name : "",
                         r->note ? " -- " : "", r->note ? r->note : "");
                nfail++;
            }
        }
    }
    if (nfail)
        fail_msg("%d normalize row(s) failed", nfail);
}

/* ------------------------------------------------------------------------ */
/* Check targets                                                             */

struct target_row {
    const char *s;
    uint16_t defport;
    int ok;
    int kind;
    const char *name;
    uint16_t port;
    const char *note;
};

#define T_OK(s, dp, kind, name, port) {s, dp, 1, kind, name, port, NULL}
#define T_BAD(s) {s, 443, 0, 0, NULL, 0, NULL}

static const struct target_row target_rows[] = {
    T_OK("example.com", 443, POLICY_HOST_NAME, "example.com", 443),
    T_OK("example.com", 80, POLICY_HOST_NAME, "example.com", 80),
    T_OK("example.com:8080", 443, POLICY_HOST_NAME, "example.com", 8080),
    T_OK("Example.COM.:443", 80, POLICY_HOST_NAME, "example.com", 443),
    T_OK("example.com:1", 443, POLICY_HOST_NAME, "example.com", 1),
    T_OK("example.com:65535", 443, POLICY_HOST_NAME, "example.com", 65535),
    T_OK("[::1]:443", 80, POLICY_HOST_IPV6, "::1", 443),
    T_OK("[::1]", 80, POLICY_HOST_IPV6, "::1", 80),
    T_OK("::1", 80, POLICY_HOST_IPV6, "::1", 80),
    T_OK("2001:db8::1", 80, POLICY_HOST_IPV6, "2001:db8::1", 80),
    T_OK("[2001:DB8::1]:8443", 80, POLICY_HOST_IPV6, "2001:db8::1", 8443),
    T_OK("1.2.3.4:80", 443, POLICY_HOST_IPV4, "1.2.3.4", 80),
    T_OK("1.2.3.4", 443, POLICY_HOST_IPV4, "1.2.3.4", 443),
    T_OK("2130706433:80", 443, POLICY_HOST_IPV4, "127.0.0.1", 80),
    T_OK("[::ffff:127.0.0.1]:80", 443, POLICY_HOST_IPV4, "127.0.0.1", 80),
    T_OK("bücher.de:443", 80, POLICY_HOST_NAME, "xn--bcher-kva.de", 443),
    T_BAD("example.com:0"),
    T_BAD("example.com:65536"),
    T_BAD("example.com:+80"),
    T_BAD("example.com:-1"),
    T_BAD("example.com:080"),
    T_BAD("example.com:80a"),
    T_BAD("example.com: 80"),
    T_BAD("example.com:99999999999999999999"),
    T_BAD("example.com:"),
    T_BAD("host:"),
    T_BAD(":80"),
    T_BAD(""),
    T_BAD("[::1"),
    T_BAD("[::1]:"),
    T_BAD("[::1]80"),
    T_BAD("[::1]:0"),
    T_BAD("user@host"),
    T_BAD("user@host:80"),
    T_BAD("example.com:80:80"),
    T_BAD("[fe80::1%25eth0]:80"),
    T_BAD("256.1.1.1:80"),
    T_BAD("a..b:80"),
};

static void test_target_parse(void **state)
{
    (void)state;
    int nfail = 0;
    for (size_t i = 0; i < NELEM(target_rows); i++) {
        const struct target_row *r = &target_rows[i];
        struct policy_host h;
        memset(&h, 0, sizeof h);
        uint16_t port = 7;
        const char *why = NULL;
        int rc = policy_target_parse(r->s, r->defport, &h, &port, &why);
        rows_total++;
        if (r->ok) {
            if (rc != 0 || (int)h.kind != r->kind || strcmp(h.name, r->name) != 0 ||
                port != r->port) {
                row_fail("target", i, "'%s' (default %u): rc %d (%s) %s '%s' port %u, want %s '%s' "
                         "port %u", r->s, r->defport, rc, nz(why), kind_name((int)h.kind),
                         rc == 0 ? h.name : "", port, kind_name(r->kind), r->name, r->port);
                nfail++;
            }
        } else if (rc != -EINVAL || why == NULL) {
            row_fail("target", i, "'%s': rc %d (got %s '%s' port %u), want -EINVAL", r->s, rc,
                     kind_name((int)h.kind), rc == 0 ? h.name : "", port);
            nfail++;
        }
    }
    if (nfail)
        fail_msg("%d target row(s) failed", nfail);
}

/* ------------------------------------------------------------------------ */
/* Patterns                                                                  */

struct pattern_row {
    const char *pattern;
    int in_denied;
    int ok;
    int kind;
    const char *name; /* NAME / WILDCARD; for CIDR the network address text */
    uint16_t port;
    unsigned prefix;
    const char *note;
};

#define P_NAME(p, d, name, port) {p, d, 1, POLICY_RULE_NAME, name, port, 0, NULL}
#define P_WILD(p, d, name, port) {p, d, 1, POLICY_RULE_WILDCARD, name, port, 0, NULL}
#define P_CIDR(p, d, net, prefix, port) {p, d, 1, POLICY_RULE_CIDR, net, port, prefix, NULL}
#define P_BAD(p, d) {p, d, 0, 0, NULL, 0, 0, NULL}

static const struct pattern_row pattern_rows[] = {
    P_NAME("example.com", 0, "example.com", 0),
    P_NAME("example.com", 1, "example.com", 0),
    P_NAME("Example.COM", 0, "example.com", 0),
    P_NAME("example.com:443", 0, "example.com", 443),
    P_NAME("example.com:1", 0, "example.com", 1),
    P_NAME("example.com:65535", 0, "example.com", 65535),
    P_NAME("localhost", 0, "localhost", 0),
    P_NAME("bücher.de", 0, "xn--bcher-kva.de", 0),
    P_NAME("xn--bcher-kva.de", 0, "xn--bcher-kva.de", 0),
    P_NAME("a_b.example.com", 0, "a_b.example.com", 0),
    P_NAME("1.2.3.example", 0, "1.2.3.example", 0),
    P_WILD("*.example.com", 0, "example.com", 0),
    P_WILD("*.Example.COM", 1, "example.com", 0),
    P_WILD("*.example.com:8443", 0, "example.com", 8443),
    P_WILD("*.example.co.uk", 0, "example.co.uk", 0),
    P_WILD("*.bücher.de", 0, "xn--bcher-kva.de", 0),
    {"*", 1, 1, POLICY_RULE_ANY, NULL, 0, 0, NULL},
    {"*:22", 1, 1, POLICY_RULE_ANY, NULL, 22, 0, NULL},
    P_BAD("*", 0),
    P_BAD("*:22", 0),
    P_CIDR("203.0.113.7", 0, "203.0.113.7", 32, 0),
    P_CIDR("127.0.0.1:3000", 0, "127.0.0.1", 32, 3000),
    P_CIDR("10.0.0.0/8", 0, "10.0.0.0", 8, 0),
    P_CIDR("192.168.0.0/16", 1, "192.168.0.0", 16, 0),
    P_CIDR("10.1.2.3/32", 0, "10.1.2.3", 32, 0),
    P_CIDR("[2001:db8::1]", 0, "2001:db8::1", 128, 0),
    P_CIDR("[2001:DB8:0::1]", 1, "2001:db8::1", 128, 0),
    P_CIDR("[fc00::]/7", 0, "fc00::", 7, 0),
    P_CIDR("[2001:db8::]/32", 1, "2001:db8::", 32, 0),
    P_CIDR("[2001:db8::1]:443", 0, "2001:db8::1", 128, 443),
    P_CIDR("[::1]", 0, "::1", 128, 0),
    P_BAD("", 0),
    P_BAD("", 1),
    P_BAD("a..b", 0),
    P_BAD(".example.com", 0),
    P_BAD("example..com", 1),
    P_BAD("*.com", 0),
    P_BAD("*.com", 1),
    P_BAD("*.co.uk", 0),
    P_WILD("*.co.uk", 1, "co.uk", 0), /* a deny rule may cover a public suffix (srt loads it) */
    P_WILD("*.co.uk:22", 1, "co.uk", 22),
    P_BAD("*.uk", 1),
    P_BAD("*example.com", 0),
    P_BAD("ex*ample.com", 0),
    P_BAD("*.*.example.com", 0),
    P_BAD("a.*.example.com", 1),
    P_BAD("example.*", 1),
    P_BAD("**.example.com", 0),
    P_BAD("*.", 1),
    P_BAD("*.example.com*", 0),
    P_BAD("example.com:0", 0),
    P_BAD("example.com:65536", 0),
    P_BAD("example.com:080", 0),
    P_BAD("example.com:", 0),
    P_BAD("example.com:http", 0),
    P_BAD("example.com:+443", 0),
    P_BAD("*.example.com:0", 1),
    P_BAD("2001:db8::1", 0),
    P_BAD("::1", 1),
    P_BAD("[fe80::1%eth0]", 0),
    P_BAD("[fe80::1%25eth0]", 1),
    P_BAD("http://example.com", 0),
    P_BAD("example.com/path", 0),
    P_BAD("exa mple.com", 0),
    P_BAD("user@example.com", 0),
    P_BAD("example.com%2f", 0),
    P_BAD("xn--zz.com", 0),
    P_BAD("XN--ZZ.com", 0),
    P_BAD("*.\xd1\x80\xd1\x84", 0), /* *.рф */
    P_BAD("*.xn--p1ai", 1),
    P_WILD("*.localhost", 0, "localhost", 0),
    P_CIDR("0.0.0.0/0", 1, "0.0.0.0", 0, 0),
    P_CIDR("[::]/0", 0, "::", 0, 0),
    P_CIDR("10.0.0.0/8:443", 0, "10.0.0.0", 8, 443),
    P_BAD("10.0.0.0/33", 0),
    P_BAD("10.0.0.0/-1", 0),
    P_BAD("10.0.0.0/", 0),
    P_BAD("10.0.0.0/8/8", 0),
    P_BAD("[::]/129", 0),
    P_BAD("[fc00::/7]", 0),
    P_BAD("256.0.0.1", 0),
    {"10.0.0.1/8", 0, 0, 0, NULL, 0, 0, "host bits set: lead's choice is reject"},
    {"[2001:db8::1]/32", 0, 0, 0, NULL, 0, 0, "host bits set (v6), by analogy with 10.0.0.1/8"},
};

static void test_pattern_parse(void **state)
{
    (void)state;
    int nfail = 0;
    for (size_t i = 0; i < NELEM(pattern_rows); i++) {
        const struct pattern_row *r = &pattern_rows[i];
        struct policy_rule rule;
        memset(&rule, 0, sizeof rule);
        char name[POLICY_HOST_MAX + 1];
        memset(name, 0, sizeof name);
        const char *why = NULL;
        int rc = policy_pattern_parse(r->pattern, r->in_denied, &rule, name, &why);
        rows_total++;
        const char *where = r->in_denied ? "denied" : "allowed";
        if (!r->ok) {
            if (rc != -EINVAL || why == NULL || why[0] == '\0') {
                row_fail("pattern", i, "'%s' in %s: rc %d (kind %s name '%s' port %u), want "
                         "-EINVAL with a reason%s%s", r->pattern, where, rc,
                         rkind_name((int)rule.kind), name, rule.port, r->note ? " -- " : "",
                         r->note ? r->note : "");
                nfail++;
            }
            continue;
        }
        if (rc != 0) {
            row_fail("pattern", i, "'%s' in %s: rc %d (%s), want ok %s", r->pattern, where, rc,
                     nz(why), rkind_name(r->kind));
            nfail++;
            continue;
        }
        char got[POLICY_HOST_MAX + 80] = "";
        int bad = (int)rule.kind != r->kind || rule.port != r->port;
        if (r->kind == POLICY_RULE_NAME || r->kind == POLICY_RULE_WILDCARD) {
            snprintf(got, sizeof got, "%s", name);
            bad |= strcmp(name, r->name) != 0;
        } else if (r->kind == POLICY_RULE_CIDR) {
            char buf[64];
            snprintf(got, sizeof got, "%s/%u", policy_addr_str(&rule.addr, buf, sizeof buf),
                     rule.prefix);
            bad |= strcmp(buf, r->name) != 0 || rule.prefix != r->prefix;
            bad |= rule.addr.family != (strchr(r->name, ':') ? 6 : 4);
        }
        if (bad) {
            row_fail("pattern", i, "'%s' in %s: got %s '%s' port %u, want %s '%s'/%u port %u",
                     r->pattern, where, rkind_name((int)rule.kind), got, rule.port,
                     rkind_name(r->kind), nz(r->name), r->prefix, r->port);
            nfail++;
        }
    }
    if (nfail)
        fail_msg("%d pattern row(s) failed", nfail);
}

/* ------------------------------------------------------------------------ */
/* Decisions                                                                 */

struct decide_row {
    int cfg;
    const char *host;
    uint16_t port;
    int verdict;
    int origin; /* DC: don't check */
    int list;   /* for origin RULE: POLICY_LIST_DENIED / POLICY_LIST_ALLOWED */
    int index;
    const char *note;
};

#define D_ALLOW(c, h, port, idx) {c, h, port, POLICY_ALLOW, POLICY_BY_RULE, POLICY_LIST_ALLOWED, idx, NULL}
#define D_DENY(c, h, port, idx) {c, h, port, POLICY_DENY, POLICY_BY_RULE, POLICY_LIST_DENIED, idx, NULL}
#define D_ASK(c, h, port) {c, h, port, POLICY_ASK, POLICY_BY_NO_RULE, 0, 0, NULL}
#define D_CLASS(c, h, port) {c, h, port, POLICY_DENY, POLICY_BY_CLASS, 0, 0, NULL}

static const struct decide_row decide_rows[] = {
    /* names: exact, wildcard, anchoring */
    D_ALLOW(C_BASIC, "example.com", 443, 0),
    D_ALLOW(C_BASIC, "EXAMPLE.com.", 80, 0),
    D_ASK(C_BASIC, "www.example.com", 443),
    D_ASK(C_BASIC, "badexample.com", 443),
    D_ASK(C_BASIC, "example.com.evil.net", 443),
    D_ASK(C_BASIC, "example.co", 443),
    D_ALLOW(C_BASIC, "a.example.org", 443, 1),
    D_ALLOW(C_BASIC, "a.b.example.org", 443, 1),
    D_ALLOW(C_BASIC, "x.bad.example.org", 443, 1),
    D_ASK(C_BASIC, "example.org", 443),
    D_ASK(C_BASIC, "notexample.org", 443),
    D_ASK(C_BASIC, "a.example.org.evil.net", 443),
    D_DENY(C_BASIC, "bad.example.org", 443, 0),
    D_DENY(C_BASIC, "BAD.example.org.", 443, 0),
    D_ALLOW(C_BASIC, "api.example.net", 443, 2),
    D_ASK(C_BASIC, "api.example.net", 80),
    D_ASK(C_BASIC, "x.api.example.net", 443),
    D_DENY(C_BASIC, "x.evil.com", 443, 1),
    D_DENY(C_BASIC, "a.b.evil.com", 80, 1),
    D_ASK(C_BASIC, "evil.com", 443),
    D_ASK(C_BASIC, "notevil.com", 443),
    D_ALLOW(C_BASIC, "localhost", 80, 7),
    D_ALLOW(C_BASIC, "bücher.de", 443, 8),
    D_ALLOW(C_BASIC, "BÜCHER.DE.", 443, 8),
    D_ALLOW(C_BASIC, "xn--bcher-kva.de", 443, 8),
    D_ALLOW(C_BASIC, "upper.example.edu", 443, 10),
    /* "*:22": every host on port 22; deny before allow; lowest index */
    D_DENY(C_BASIC, "example.com", 22, 2),
    D_DENY(C_BASIC, "bad.example.org", 22, 0),
    D_DENY(C_BASIC, "x.evil.com", 22, 1),
    D_DENY(C_BASIC, "8.8.8.8", 22, 2),
    D_DENY(C_BASIC, "1.1.1.1", 22, 2),
    D_DENY(C_BASIC, "[2001:db8:1::5]", 22, 2),
    D_DENY(C_BASIC, "unknown.test", 22, 2),
    /* IP literals and IP rules */
    D_ALLOW(C_BASIC, "10.255.1.2", 443, 3),
    D_ALLOW(C_BASIC, "10.0.0.0", 443, 3),
    D_ALLOW(C_BASIC, "0xa000001", 443, 3),
    D_ALLOW(C_BASIC, "012.0.0.1", 443, 3),
    D_ALLOW(C_BASIC, "10.1", 443, 3),
    D_ASK(C_BASIC, "11.0.0.1", 443),
    D_ASK(C_BASIC, "9.255.255.255", 443),
    D_ALLOW(C_BASIC, "127.0.0.1", 3000, 5),
    D_ALLOW(C_BASIC, "2130706433", 3000, 5),
    D_ALLOW(C_BASIC, "[::ffff:127.0.0.1]", 3000, 5),
    D_CLASS(C_BASIC, "127.0.0.1", 3001),
    D_CLASS(C_BASIC, "127.0.0.1", 80),
    {C_BASIC, "localhost", 3000, POLICY_ALLOW, POLICY_BY_RULE, POLICY_LIST_ALLOWED, 7,
     "name rule 'localhost' (an IP rule never matches a name)"},
    D_ALLOW(C_BASIC, "8.8.8.8", 443, 6),
    D_ALLOW(C_BASIC, "134744072", 443, 6),
    D_ALLOW(C_BASIC, "8.8.8.8.", 443, 6),
    D_DENY(C_BASIC, "1.1.1.1", 443, 3),
    D_DENY(C_BASIC, "0x01010101", 443, 3),
    D_ALLOW(C_BASIC, "[2001:db8:1::5]", 443, 4),
    D_ALLOW(C_BASIC, "[2001:db8:1:ffff:ffff:ffff:ffff:ffff]", 443, 4),
    D_CLASS(C_BASIC, "[2001:db8:2::1]", 443),
    D_ALLOW(C_BASIC, "[2606:4700::1111]", 443, 9),
    D_ALLOW(C_BASIC, "2606:4700:0::1111", 443, 9),
    D_ASK(C_BASIC, "[2606:4700::1111]", 80),
    D_ASK(C_BASIC, "[2606:4700::1112]", 443),
    /* denied classes for IP literals: deny without asking */
    D_CLASS(C_BASIC, "127.0.0.2", 443),
    D_CLASS(C_BASIC, "127.1", 443),
    D_CLASS(C_BASIC, "0177.0.0.1", 443),
    D_CLASS(C_BASIC, "169.254.169.254", 80),
    D_CLASS(C_BASIC, "169.254.1.1", 80),
    D_CLASS(C_BASIC, "0.0.0.0", 80),
    D_CLASS(C_BASIC, "0", 80),
    D_CLASS(C_BASIC, "224.0.0.1", 80),
    D_CLASS(C_BASIC, "255.255.255.255", 80),
    D_CLASS(C_BASIC, "240.0.0.1", 80),
    D_CLASS(C_BASIC, "192.0.2.1", 80),
    {C_BASIC, "198.18.0.1", 80, POLICY_ASK, POLICY_BY_NO_RULE, 0, 0,
     "198.18/15 is private (fake-IP resolvers): asked, not denied by class"},
    D_CLASS(C_BASIC, "203.0.113.7", 80),
    D_CLASS(C_BASIC, "100.100.100.200", 80),
    D_CLASS(C_BASIC, "[::1]", 80),
    D_CLASS(C_BASIC, "::", 80),
    D_CLASS(C_BASIC, "[fe80::1]", 80),
    D_CLASS(C_BASIC, "[ff02::1]", 80),
    D_CLASS(C_BASIC, "[fd00:ec2::254]", 80),
    D_CLASS(C_BASIC, "[::ffff:169.254.169.254]", 80),
    D_CLASS(C_BASIC, "[64:ff9b::7f00:1]", 80),
    D_CLASS(C_BASIC, "[64:ff9b::a9fe:a9fe]", 80),
    D_CLASS(C_BASIC, "[2002:7f00:1::]", 80),
    D_CLASS(C_BASIC, "[::127.0.0.1]", 80),
    D_CLASS(C_BASIC, "[2001:0:808:808::80ff:fffe]", 80),
    /* private and public literals: ask */
    D_ASK(C_BASIC, "192.168.1.1", 443),
    D_ASK(C_BASIC, "172.16.0.1", 443),
    D_ASK(C_BASIC, "172.31.255.255", 443),
    D_ASK(C_BASIC, "172.15.255.255", 443),
    D_ASK(C_BASIC, "100.64.0.1", 443),
    D_ASK(C_BASIC, "[fd12::1]", 443),
    D_ASK(C_BASIC, "93.184.216.34", 443),
    D_ASK(C_BASIC, "[2a00:1450:4001::1]", 443),
    /* name rules never match IP literals (and vice versa) */
    D_CLASS(C_BASIC, "127.0.0.1", 8080),
    /* "*" in deniedDomains: every host, IP literals included, by rule */
    D_DENY(C_DENY_ALL, "example.com", 443, 0),
    D_DENY(C_DENY_ALL, "anything.test", 80, 0),
    D_DENY(C_DENY_ALL, "10.1.1.1", 443, 0),
    D_DENY(C_DENY_ALL, "8.8.8.8", 443, 0),
    D_DENY(C_DENY_ALL, "[::1]", 443, 0),
    D_DENY(C_DENY_ALL, "[2606:4700::1111]", 443, 0),
    D_DENY(C_DENY_ALL, "169.254.169.254", 80, 0),
    /* deny beats allow regardless of specificity; lowest index in a list */
    D_DENY(C_ORDER, "a.example.com", 443, 0),
    D_DENY(C_ORDER, "b.example.com", 443, 0),
    D_ASK(C_ORDER, "example.com", 443),
    D_ALLOW(C_ORDER, "a.example.io", 443, 1),
    D_ALLOW(C_ORDER, "b.a.example.io", 443, 1),
    D_ASK(C_ORDER, "example.io", 443),
    D_ALLOW(C_ORDER, "10.1.2.3", 443, 4),
    D_ALLOW(C_ORDER, "10.1.9.9", 443, 4),
    D_ALLOW(C_ORDER, "svc.example.net", 443, 7),
    D_ALLOW(C_ORDER, "svc.example.net", 80, 8),
    D_ALLOW(C_ORDER, "a.port.example.net", 8443, 10),
    D_ALLOW(C_ORDER, "a.b.port.example.net", 80, 11),
    D_ASK(C_ORDER, "port.example.net", 8443),
    D_DENY(C_ORDER, "[2001:db8:ff::1]", 443, 2),
    D_DENY(C_ORDER, "[2001:db8:ff::2]", 443, 2),
    D_CLASS(C_ORDER, "[2001:db8:fe::1]", 443),
    /* allowAllDomains */
    {C_ALLOW_ALL, "random.org", 443, POLICY_ALLOW, POLICY_BY_ALLOW_ALL, 0, 0, NULL},
    {C_ALLOW_ALL, "8.8.8.8", 443, POLICY_ALLOW, POLICY_BY_ALLOW_ALL, 0, 0, NULL},
    D_DENY(C_ALLOW_ALL, "bad.com", 443, 0),
    {C_ALLOW_ALL, "x.bad.com", 443, POLICY_ALLOW, POLICY_BY_ALLOW_ALL, 0, 0, NULL},
    {C_ALLOW_ALL, "127.0.0.1", 80, POLICY_DENY, POLICY_BY_CLASS, 0, 0,
     "denied class beats allowAllDomains: nobody opens loopback by accident"},
    {C_ALLOW_ALL, "169.254.169.254", 80, POLICY_DENY, POLICY_BY_CLASS, 0, 0,
     "denied class beats allowAllDomains: metadata"},
    {C_ALLOW_ALL, "192.168.1.1", 80, POLICY_ALLOW, POLICY_BY_ALLOW_ALL, 0, 0,
     "ambig: private literal with allowAllDomains (brief says only 'ASK unless denyPrivate')"},
    /* strictAllowlist */
    D_ALLOW(C_STRICT, "ok.com", 443, 0),
    {C_STRICT, "other.com", 443, POLICY_DENY, POLICY_BY_STRICT, 0, 0, NULL},
    {C_STRICT, "sub.ok.com", 443, POLICY_DENY, POLICY_BY_STRICT, 0, 0, NULL},
    {C_STRICT, "8.8.8.8", 443, POLICY_DENY, POLICY_BY_STRICT, 0, 0, NULL},
    {C_STRICT, "127.0.0.1", 443, POLICY_DENY, POLICY_BY_CLASS, 0, 0,
     "class check comes before strict in the brief's order"},
    {C_STRICT, "192.168.1.1", 443, POLICY_DENY, DC, 0, 0,
     "ambig: origin STRICT or CLASS for a private literal"},
    /* denyPrivateAddresses */
    D_ALLOW(C_DENY_PRIV, "10.1.1.1", 443, 0),
    D_CLASS(C_DENY_PRIV, "192.168.1.1", 443),
    D_CLASS(C_DENY_PRIV, "172.16.5.4", 443),
    D_CLASS(C_DENY_PRIV, "100.64.0.1", 443),
    D_CLASS(C_DENY_PRIV, "[fd00::1]", 443),
    D_ASK(C_DENY_PRIV, "8.8.8.8", 443),
    D_ASK(C_DENY_PRIV, "172.32.0.1", 443),
    D_ASK(C_DENY_PRIV, "example.com", 443),
    /* no rules at all */
    D_ASK(C_EMPTY, "example.com", 443),
    D_ASK(C_EMPTY, "8.8.8.8", 443),
    D_ASK(C_EMPTY, "10.0.0.1", 443),
    D_CLASS(C_EMPTY, "127.0.0.1", 443),
    D_CLASS(C_EMPTY, "2130706433", 443),
    D_CLASS(C_EMPTY, "0x7f.1", 443),
    /* deniedResolvedAddresses and NAT64 forms for IP literal requests */
    {C_GUARD, "93.184.216.34", 443, POLICY_DENY, DC, 0, 0,
     "ambig: literal in deniedResolvedAddresses; ASK would let a handler open it"},
    {C_BASIC, "[64:ff9b::101:101]", 443, POLICY_DENY, DC, 0, 0,
     "ambig: NAT64 form of deny-listed 1.1.1.1"},
    /* /0 prefixes */
    D_DENY(C_CIDR0, "8.8.8.8", 25, 0),
    D_DENY(C_CIDR0, "10.1.1.1", 25, 0),
    D_ASK(C_CIDR0, "8.8.8.8", 80),
    D_CLASS(C_CIDR0, "127.0.0.1", 80),
    D_ALLOW(C_CIDR0, "[2606:4700::1]", 80, 0),
    D_ALLOW(C_CIDR0, "[::1]", 80, 0),
    D_ASK(C_CIDR0, "example.com", 25),
    /* reasons config: deny rules */
    D_DENY(C_REASONS, "a.evil.com", 443, 0),
    D_DENY(C_REASONS, "tracker.net", 443, 1),
    D_DENY(C_REASONS, "bad.org", 443, 2),
    D_ASK(C_REASONS, "bad.org", 80),
    D_DENY(C_REASONS, "ctl.org", 443, 3),
};

static const char *cfg_pattern(int cfg, int list, int index)
{
    const struct cfg *c = &cfgs[cfg];
    if (index < 0)
        return NULL;
    if (list == POLICY_LIST_ALLOWED && (size_t)index < NELEM(c->allow))
        return c->allow[index];
    if (list == POLICY_LIST_DENIED && (size_t)index < NELEM(c->deny))
        return c->deny[index];
    if (list == POLICY_LIST_RESOLVED_DENIED && (size_t)index < NELEM(c->rdeny))
        return c->rdeny[index];
    return NULL;
}

static const char *list_short(int l)
{
    return l == POLICY_LIST_DENIED ? "denied" : l == POLICY_LIST_ALLOWED ? "allowed" : "resolved";
}

/* Checks one decision against a row; returns 1 on mismatch (after printing). */
static int check_decision(const char *area, size_t i, const struct decide_row *r,
                          const struct policy_decision *d)
{
    char want[200], got[300];
    int bad = (int)d->verdict != r->verdict;
    if (r->origin != DC)
        bad |= (int)d->origin != r->origin;
    if (d->origin == POLICY_BY_RULE) {
        if (!d->rule) {
            bad = 1;
        } else if (r->origin == POLICY_BY_RULE) {
            const char *pat = cfg_pattern(r->cfg, r->list, r->index);
            bad |= (int)d->rule->list_id != r->list || d->rule->index != (size_t)r->index;
            bad |= !d->rule->pattern || !pat || strcmp(d->rule->pattern, pat) != 0;
        }
    } else if (d->rule) {
        bad = 1; /* rule != NULL only for origin RULE */
    }
    int reason_bad = !reason_ok(d->reason, sizeof d->reason);
    if (!bad && !reason_bad)
        return 0;
    snprintf(want, sizeof want, "%s by %s", verdict_name(r->verdict),
             r->origin == DC ? "(any)" : origin_name(r->origin));
    if (r->origin == POLICY_BY_RULE)
        snprintf(want + strlen(want), sizeof want - strlen(want), " %s[%d] '%s'",
                 list_short(r->list), r->index, nz(cfg_pattern(r->cfg, r->list, r->index)));
    snprintf(got, sizeof got, "%s by %s", verdict_name((int)d->verdict),
             origin_name((int)d->origin));
    if (d->rule)
        snprintf(got + strlen(got), sizeof got - strlen(got), " %s[%zu] '%s'",
                 list_short((int)d->rule->list_id), d->rule->index, nz(d->rule->pattern));
    else if (d->origin == POLICY_BY_RULE)
        snprintf(got + strlen(got), sizeof got - strlen(got), " rule NULL");
    char rs[300];
    esc(d->reason, strnlen(d->reason, sizeof d->reason), rs, sizeof rs);
    row_fail(area, i, "[%s] %s:%u: got %s, want %s%s; reason '%s'%s%s", cfgs[r->cfg].name,
             r->host, r->port, got, want, reason_bad ? " (reason not one printable line)" : "",
             rs, r->note ? " -- " : "", r->note ? r->note : "");
    return 1;
}

static void test_decide(void **state)
{
    (void)state;
    int nfail = 0;
    for (size_t i = 0; i < NELEM(decide_rows); i++) {
        const struct decide_row *r = &decide_rows[i];
        rows_total++;
        struct policy *p = get_policy(r->cfg);
        if (!p) {
            row_fail("decide", i, "[%s] %s: config did not compile", cfgs[r->cfg].name, r->host);
            nfail++;
            continue;
        }
        struct policy_host h;
        const char *why = NULL;
        if (policy_host_normalize(r->host, strlen(r->host), &h, &why) != 0) {
            row_fail("decide", i, "[%s] %s: normalize failed: %s", cfgs[r->cfg].name, r->host,
                     nz(why));
            nfail++;
            continue;
        }
        struct policy_decision d;
        memset(&d, 0x5a, sizeof d);
        policy_decide(p, &h, r->port, &d);
        nfail += check_decision("decide", i, r, &d);
    }
    if (nfail)
        fail_msg("%d decide row(s) failed", nfail);
}

/* deniedDomainReasons: keyed by the exact pattern string. */
struct reason_row {
    const char *host;
    uint16_t port;
    const char *contains; /* NULL: must not contain any configured reason */
};

static const struct reason_row reason_rows[] = {
    {"a.evil.com", 443, "blocked by the security team"},
    {"b.c.evil.com", 80, "blocked by the security team"},
    {"bad.org", 443, "port 443 of bad.org is closed"},
    {"tracker.net", 443, NULL},
    {"ctl.org", 443, "multi"},
};

static void test_reasons(void **state)
{
    (void)state;
    int nfail = 0;
    struct policy *p = get_policy(C_REASONS);
    if (!p)
        fail_msg("reasons config did not compile");
    for (size_t i = 0; i < NELEM(reason_rows); i++) {
        const struct reason_row *r = &reason_rows[i];
        rows_total++;
        struct policy_host h;
        const char *why = NULL;
        assert_int_equal(policy_host_normalize(r->host, strlen(r->host), &h, &why), 0);
        struct policy_decision d;
        memset(&d, 0, sizeof d);
        policy_decide(p, &h, r->port, &d);
        char rs[300];
        esc(d.reason, strnlen(d.reason, sizeof d.reason), rs, sizeof rs);
        int bad = d.verdict != POLICY_DENY || !reason_ok(d.reason, sizeof d.reason);
        if (r->contains)
            bad |= strstr(d.reason, r->contains) == NULL;
        else
            bad |= strstr(d.reason, "blocked by") != NULL || strstr(d.reason, "closed") != NULL;
        if (bad) {
            row_fail("reason", i, "%s:%u: %s reason '%s', want DENY with a printable line %s '%s'",
                     r->host, r->port, verdict_name((int)d.verdict), rs,
                     r->contains ? "containing" : "without", r->contains ? r->contains : "...");
            nfail++;
        }
        if (d.rule && r->contains && (!d.rule->reason || !strstr(d.rule->reason, r->contains))) {
            row_fail("reason", i, "%s: rule->reason '%s' does not hold '%s'", r->host,
                     nz(d.rule->reason), r->contains);
            nfail++;
        }
    }
    if (nfail)
        fail_msg("%d reason row(s) failed", nfail);
}

/* ------------------------------------------------------------------------ */
/* Address classes                                                           */

struct class_row {
    const char *addr;
    int cls;
    int inner; /* DC: don't check */
    const char *note;
};

#define K(a, c) {a, POLICY_CLASS_##c, DC, NULL}
#define KE(a, in) {a, POLICY_CLASS_EMBEDDED, POLICY_CLASS_##in, NULL}

static const struct class_row class_rows[] = {
    K("8.8.8.8", PUBLIC),
    K("1.1.1.1", PUBLIC),
    K("93.184.216.34", PUBLIC),
    K("0.0.0.0", UNSPECIFIED),
    K("0.1.2.3", UNSPECIFIED),
    K("0.255.255.255", UNSPECIFIED),
    K("1.0.0.0", PUBLIC),
    K("9.255.255.255", PUBLIC),
    K("10.0.0.0", PRIVATE),
    K("10.255.255.255", PRIVATE),
    K("11.0.0.0", PUBLIC),
    K("100.63.255.255", PUBLIC),
    K("100.64.0.0", PRIVATE),
    K("100.127.255.255", PRIVATE),
    K("100.128.0.0", PUBLIC),
    K("100.100.100.200", METADATA),
    K("126.255.255.255", PUBLIC),
    K("127.0.0.0", LOOPBACK),
    K("127.0.0.1", LOOPBACK),
    K("127.255.255.255", LOOPBACK),
    K("128.0.0.0", PUBLIC),
    K("169.253.255.255", PUBLIC),
    K("169.254.0.0", LINK_LOCAL),
    K("169.254.1.1", LINK_LOCAL),
    K("169.254.169.254", METADATA),
    K("169.254.255.255", LINK_LOCAL),
    K("169.255.0.0", PUBLIC),
    K("172.15.255.255", PUBLIC),
    K("172.16.0.0", PRIVATE),
    K("172.31.255.255", PRIVATE),
    K("172.32.0.0", PUBLIC),
    K("192.167.255.255", PUBLIC),
    K("192.168.0.0", PRIVATE),
    K("192.168.255.255", PRIVATE),
    K("192.169.0.0", PUBLIC),
    K("192.0.2.1", RESERVED),
    K("198.51.100.1", RESERVED),
    K("203.0.113.7", RESERVED),
    K("198.17.255.255", PUBLIC),
    {"198.18.0.0", POLICY_CLASS_PRIVATE, DC, "benchmark range: private (fake-IP resolvers)"},
    {"198.19.255.255", POLICY_CLASS_PRIVATE, DC, "benchmark range: private (fake-IP resolvers)"},
    {"198.20.0.0", POLICY_CLASS_PUBLIC, DC, "just past 198.18/15"},
    K("198.20.0.0", PUBLIC),
    K("223.255.255.255", PUBLIC),
    K("224.0.0.0", MULTICAST),
    K("224.0.0.1", MULTICAST),
    K("239.255.255.255", MULTICAST),
    K("240.0.0.0", RESERVED),
    K("255.255.255.254", RESERVED),
    K("255.255.255.255", BROADCAST),
    K("::", UNSPECIFIED),
    K("::1", LOOPBACK),
    K("fe80::1", LINK_LOCAL),
    K("febf:ffff::1", LINK_LOCAL),
    K("ff02::1", MULTICAST),
    K("ff0e::101", MULTICAST),
    K("fc00::1", PRIVATE),
    K("fd00::1", PRIVATE),
    K("fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", PRIVATE),
    K("fd00:ec2::254", METADATA),
    K("2001:db8::1", RESERVED),
    K("2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", RESERVED),
    K("2001:4860:4860::8888", PUBLIC),
    K("2606:4700::1111", PUBLIC),
    K("2a00:1450:4001::1", PUBLIC),
    {"64:ff9b:1::1", POLICY_CLASS_EMBEDDED, DC, "local-use NAT64 embedding 0.0.0.1"},
    {"64:ff9b:1::808:808", POLICY_CLASS_PRIVATE, DC, "local-use NAT64 is a site's own network"},
    {"2001:2::1", POLICY_CLASS_RESERVED, DC, "IPv6 benchmark range"},
    {"2001:2::1", POLICY_CLASS_RESERVED, DC, "benchmark 2001:2::/48 ('benchmark ranges')"},
    KE("::ffff:127.0.0.1", LOOPBACK),
    KE("::ffff:169.254.169.254", METADATA),
    KE("::ffff:0.0.0.0", UNSPECIFIED),
    KE("::ffff:0:7f00:1", LOOPBACK),     /* SIIT (RFC 7915) ::ffff:0:a.b.c.d */
    KE("::ffff:0:a9fe:a9fe", METADATA),
    KE("::127.0.0.1", LOOPBACK),
    KE("64:ff9b::7f00:1", LOOPBACK),
    KE("64:ff9b::a9fe:a9fe", METADATA),
    KE("2002:7f00:1::", LOOPBACK),
    KE("2002:a9fe:a9fe::", METADATA),
    KE("2002:a9fe:a9fe:1:2:3:4:5", METADATA),
    {"2001:0:808:808::80ff:fffe", POLICY_CLASS_EMBEDDED, POLICY_CLASS_LOOPBACK,
     "Teredo, client 127.0.0.1 (obfuscated)"},
};

static void test_classify(void **state)
{
    (void)state;
    int nfail = 0;
    for (size_t i = 0; i < NELEM(class_rows); i++) {
        const struct class_row *r = &class_rows[i];
        rows_total++;
        struct policy_addr a;
        memset(&a, 0, sizeof a);
        if (policy_addr_parse(r->addr, &a) != 0) {
            row_fail("classify", i, "%s: policy_addr_parse failed", r->addr);
            nfail++;
            continue;
        }
        enum policy_addr_class inner = (enum policy_addr_class)99;
        enum policy_addr_class c = policy_addr_classify(&a, &inner);
        int bad = (int)c != r->cls;
        if (r->inner != DC)
            bad |= (int)inner != r->inner;
        if (bad) {
            row_fail("classify", i, "%s: got %s (inner %s), want %s (inner %s)%s%s", r->addr,
                     cls_name((int)c), cls_name((int)inner), cls_name(r->cls),
                     r->inner == DC ? "any" : cls_name(r->inner), r->note ? " -- " : "",
                     r->note ? r->note : "");
            nfail++;
        }
        const char *cn = policy_class_name(c);
        if (!cn || !cn[0]) {
            row_fail("classify", i, "%s: policy_class_name empty", r->addr);
            nfail++;
        }
    }
    if (nfail)
        fail_msg("%d classify row(s) failed", nfail);
}

/* policy_addr_parse / policy_addr_str */
struct addr_row {
    const char *in;
    int ok;
    int family;
    const char *out;
};

static const struct addr_row addr_rows[] = {
    {"1.2.3.4", 1, 4, "1.2.3.4"},
    {"0.0.0.0", 1, 4, "0.0.0.0"},
    {"255.255.255.255", 1, 4, "255.255.255.255"},
    {"::", 1, 6, "::"},
    {"::1", 1, 6, "::1"},
    {"2001:DB8::1", 1, 6, "2001:db8::1"},
    {"2001:db8:0:0:1:0:0:1", 1, 6, "2001:db8::1:0:0:1"},
    {"0:0:0:0:0:0:0:1", 1, 6, "::1"},
    {"2001:db8:0:1:1:1:1:1", 1, 6, "2001:db8:0:1:1:1:1:1"},
    {"fe80:0:0:0:0:0:0:0", 1, 6, "fe80::"},
    {"1.2.3.256", 0, 0, NULL},
    {"[::1]", 0, 0, NULL},
    {"fe80::1%eth0", 0, 0, NULL},
    {"", 0, 0, NULL},
    {"example.com", 0, 0, NULL},
};

static void test_addr_text(void **state)
{
    (void)state;
    int nfail = 0;
    for (size_t i = 0; i < NELEM(addr_rows); i++) {
        const struct addr_row *r = &addr_rows[i];
        rows_total++;
        struct policy_addr a;
        memset(&a, 0, sizeof a);
        int rc = policy_addr_parse(r->in, &a);
        char buf[64] = "";
        if (r->ok) {
            if (rc != 0 || a.family != r->family ||
                strcmp(policy_addr_str(&a, buf, sizeof buf), r->out) != 0) {
                row_fail("addr", i, "'%s': rc %d family %u text '%s', want family %d '%s'", r->in,
                         rc, a.family, buf, r->family, r->out);
                nfail++;
            }
        } else if (rc != -EINVAL) {
            row_fail("addr", i, "'%s': rc %d, want -EINVAL", r->in, rc);
            nfail++;
        }
    }
    if (nfail)
        fail_msg("%d addr row(s) failed", nfail);
}

/* ------------------------------------------------------------------------ */
/* The resolved-address guard                                                */

struct guard_row {
    int cfg;
    const char *host; /* the (allowed) request name */
    uint16_t port;
    const char *addr;
    int allowed;
    int cls; /* DC: don't check */
    const char *note;
};

#define G_OK(c, h, p, a, k) {c, h, p, a, 1, POLICY_CLASS_##k, NULL}
#define G_NO(c, h, p, a, k) {c, h, p, a, 0, POLICY_CLASS_##k, NULL}
#define G_NO_(c, h, p, a) {c, h, p, a, 0, DC, NULL}

static const struct guard_row guard_rows[] = {
    G_OK(C_GUARD, "example.com", 443, "93.184.215.14", PUBLIC),
    G_OK(C_GUARD, "example.com", 443, "8.8.8.8", PUBLIC),
    G_OK(C_GUARD, "example.com", 443, "2606:4701::1", PUBLIC),
    G_OK(C_GUARD, "example.com", 443, "2001:4860:4860::8888", PUBLIC),
    /* deny IP rules and deniedResolvedAddresses, even for public addresses */
    G_NO_(C_GUARD, "example.com", 443, "8.8.4.4"),
    G_NO_(C_GUARD, "example.com", 443, "93.184.216.34"),
    G_NO_(C_GUARD, "example.com", 443, "93.184.216.255"),
    G_NO_(C_GUARD, "example.com", 443, "2606:4700::1111"),
    G_NO_(C_GUARD, "example.com", 443, "2a00:1450:4001::1"),
    G_NO_(C_GUARD, "example.com", 443, "2a01:4f8::1"),
    G_OK(C_GUARD, "example.com", 443, "2a01:4f8::2", PUBLIC),
    /* allow IP rules open a denied class; deny still wins */
    G_OK(C_GUARD, "example.com", 443, "127.0.0.1", LOOPBACK),
    G_NO(C_GUARD, "example.com", 443, "127.0.0.3", LOOPBACK),
    G_OK(C_GUARD, "example.com", 3000, "127.0.0.2", LOOPBACK),
    G_NO(C_GUARD, "example.com", 3001, "127.0.0.2", LOOPBACK),
    G_NO(C_GUARD, "example.com", 443, "127.0.0.2", LOOPBACK),
    G_OK(C_GUARD, "example.com", 8080, "::1", LOOPBACK),
    G_NO(C_GUARD, "example.com", 8081, "::1", LOOPBACK),
    {C_GUARD, "example.com", 443, "127.0.0.5", 0, DC, "deniedResolvedAddresses beats allow"},
    {C_GUARD, "example.com", 443, "127.0.0.6", 0, DC, "deny IP rule beats allow IP rule"},
    {C_GUARD, "example.com", 443, "10.1.2.3", 0, DC, "deny IP rule beats allow CIDR"},
    G_OK(C_GUARD, "example.com", 443, "10.1.2.4", PRIVATE),
    /* default denied classes */
    G_NO(C_GUARD, "example.com", 80, "169.254.169.254", METADATA),
    G_NO(C_GUARD, "example.com", 80, "100.100.100.200", METADATA),
    G_NO(C_GUARD, "example.com", 80, "fd00:ec2::254", METADATA),
    G_NO(C_GUARD, "example.com", 80, "169.254.1.1", LINK_LOCAL),
    G_NO(C_GUARD, "example.com", 80, "fe80::1", LINK_LOCAL),
    G_NO(C_GUARD, "example.com", 80, "0.0.0.0", UNSPECIFIED),
    G_NO(C_GUARD, "example.com", 80, "::", UNSPECIFIED),
    G_NO(C_GUARD, "example.com", 80, "224.0.0.1", MULTICAST),
    G_NO(C_GUARD, "example.com", 80, "ff02::1", MULTICAST),
    G_NO(C_GUARD, "example.com", 80, "255.255.255.255", BROADCAST),
    G_NO(C_GUARD, "example.com", 80, "240.0.0.1", RESERVED),
    G_NO(C_GUARD, "example.com", 80, "2001:db8::1", RESERVED),
    G_NO(C_GUARD, "example.com", 80, "127.8.8.8", LOOPBACK),
    /* private: allowed for names by default */
    G_OK(C_GUARD, "example.com", 443, "192.168.1.1", PRIVATE),
    G_OK(C_GUARD, "example.com", 443, "172.16.0.1", PRIVATE),
    G_OK(C_GUARD, "example.com", 443, "100.64.0.1", PRIVATE),
    G_OK(C_GUARD, "example.com", 443, "fd12::1", PRIVATE),
    /* IPv6 embedding a denied IPv4 */
    {C_GUARD, "example.com", 443, "::ffff:127.0.0.1", 1, POLICY_CLASS_LOOPBACK,
     "a mapped answer is dialed as IPv4: judged as 127.0.0.1, which is allow-listed here"},
    {C_GUARD, "example.com", 443, "::ffff:169.254.169.254", 0, POLICY_CLASS_METADATA,
     "a mapped answer is judged as its IPv4"},
    G_NO_(C_GUARD, "example.com", 443, "::ffff:127.0.0.3"),
    {C_GUARD, "example.com", 443, "::ffff:8.8.4.4", 0, DC, "mapped form of a deny-listed IP"},
    {C_GUARD, "example.com", 443, "64:ff9b::808:404", 0, DC,
     "ambig: NAT64 form of deny-listed 8.8.4.4 (DNS64 networks)"},
    G_NO(C_GUARD, "example.com", 443, "64:ff9b::a9fe:a9fe", EMBEDDED),
    G_NO(C_GUARD, "example.com", 443, "64:ff9b::7f00:1", EMBEDDED),
    G_NO(C_GUARD, "example.com", 443, "2002:a9fe:a9fe::", EMBEDDED),
    G_NO(C_GUARD, "example.com", 443, "2002:7f00:1::1", EMBEDDED),
    G_NO(C_GUARD, "example.com", 443, "::127.0.0.1", EMBEDDED),
    G_NO(C_GUARD, "example.com", 443, "2001:0:808:808::80ff:fffe", EMBEDDED),
    {C_GUARD, "example.com", 443, "64:ff9b::808:808", 1, DC,
     "NAT64 of a public IPv4 embeds nothing denied"},
    /* localhost and *.localhost resolve only to loopback */
    G_OK(C_GUARD, "localhost", 80, "127.0.0.1", LOOPBACK),
    G_OK(C_GUARD, "localhost", 80, "127.0.0.9", LOOPBACK),
    G_OK(C_GUARD, "localhost", 80, "::1", LOOPBACK),
    G_OK(C_GUARD, "x.localhost", 80, "127.0.0.9", LOOPBACK),
    G_OK(C_GUARD, "LOCALHOST.", 80, "127.0.0.9", LOOPBACK),
    G_NO(C_GUARD, "localhost", 80, "8.8.8.8", PUBLIC),
    G_NO(C_GUARD, "localhost", 80, "192.168.1.1", PRIVATE),
    G_NO(C_GUARD, "x.localhost", 80, "93.184.215.14", PUBLIC),
    G_NO(C_GUARD, "localhost", 80, "169.254.169.254", METADATA),
    {C_GUARD, "localhost", 80, "10.1.1.1", 0, DC,
     "ambig: 'localhost may resolve only to loopback' vs allow CIDR 10.0.0.0/8"},
    G_NO(C_GUARD, "notlocalhost", 80, "127.0.0.9", LOOPBACK),
    G_NO(C_GUARD, "localhost.example.com", 80, "127.0.0.9", LOOPBACK),
    /* denyPrivateAddresses */
    G_NO(C_GUARD_PRIV, "example.com", 443, "192.168.1.1", PRIVATE),
    G_NO(C_GUARD_PRIV, "example.com", 443, "172.16.0.1", PRIVATE),
    G_NO(C_GUARD_PRIV, "example.com", 443, "100.64.0.1", PRIVATE),
    G_NO(C_GUARD_PRIV, "example.com", 443, "fd12::1", PRIVATE),
    G_OK(C_GUARD_PRIV, "example.com", 443, "10.2.2.2", PRIVATE),
    G_OK(C_GUARD_PRIV, "example.com", 443, "8.8.8.8", PUBLIC),
    G_NO(C_GUARD_PRIV, "example.com", 443, "127.0.0.1", LOOPBACK),
};

static int check_guard_one(const char *area, size_t i, struct policy *p, const char *cfgname,
                           const char *host, uint16_t port, const char *addr, int allowed, int cls,
                           const char *note)
{
    struct policy_host h;
    const char *why = NULL;
    if (policy_host_normalize(host, strlen(host), &h, &why) != 0) {
        row_fail(area, i, "[%s] %s: normalize failed: %s", cfgname, host, nz(why));
        return 1;
    }
    struct policy_addr a = addr_of(addr);
    struct policy_guard_verdict out;
    memset(&out, 0x5a, sizeof out);
    size_t n = policy_guard(p, &h, port, &a, 1, &out);
    int bad = (out.allowed != 0) != (allowed != 0) || n != (allowed ? 1u : 0u);
    if (cls != DC)
        bad |= (int)out.cls != cls;
    bad |= memcmp(&out.addr, &a, sizeof a) != 0;
    if (!bad)
        return 0;
    char why_s[200];
    esc(out.why, strnlen(out.why, sizeof out.why), why_s, sizeof why_s);
    row_fail(area, i, "[%s] %s:%u -> %s: got %s (n %zu) class %s why '%s', want %s class %s%s%s",
             cfgname, host, port, addr, out.allowed ? "allowed" : "denied", n,
             cls_name((int)out.cls), why_s, allowed ? "allowed" : "denied",
             cls == DC ? "any" : cls_name(cls), note ? " -- " : "", note ? note : "");
    return 1;
}

static void test_guard(void **state)
{
    (void)state;
    int nfail = 0;
    for (size_t i = 0; i < NELEM(guard_rows); i++) {
        const struct guard_row *r = &guard_rows[i];
        rows_total++;
        struct policy *p = get_policy(r->cfg);
        if (!p) {
            row_fail("guard", i, "[%s]: config did not compile", cfgs[r->cfg].name);
            nfail++;
            continue;
        }
        nfail += check_guard_one("guard", i, p, cfgs[r->cfg].name, r->host, r->port, r->addr,
                                 r->allowed, r->cls, r->note);
    }
    if (nfail)
        fail_msg("%d guard row(s) failed", nfail);
}

/* Several answers at once: the count and each verdict in order. */
static void test_guard_many(void **state)
{
    (void)state;
    static const char *const addrs_s[] = {"8.8.8.8", "127.0.0.3", "192.168.7.7",
                                          "169.254.169.254", "2606:4701::1", "::ffff:127.0.0.3"};
    static const int want_default[] = {1, 0, 1, 0, 1, 0};
    static const int want_priv[] = {1, 0, 0, 0, 1, 0};
    struct policy_addr addrs[NELEM(addrs_s)];
    struct policy_guard_verdict out[NELEM(addrs_s)];
    for (size_t i = 0; i < NELEM(addrs_s); i++)
        addrs[i] = addr_of(addrs_s[i]);
    struct policy_host h;
    const char *why = NULL;
    assert_int_equal(policy_host_normalize("example.com", 11, &h, &why), 0);
    int nfail = 0;
    for (int pass = 0; pass < 2; pass++) {
        struct policy *p = get_policy(pass ? C_GUARD_PRIV : C_GUARD);
        assert_non_null(p);
        const int *want = pass ? want_priv : want_default;
        size_t nwant = 0;
        memset(out, 0, sizeof out);
        size_t n = policy_guard(p, &h, 443, addrs, NELEM(addrs), out);
        for (size_t i = 0; i < NELEM(addrs_s); i++) {
            rows_total++;
            nwant += (size_t)want[i];
            if ((out[i].allowed != 0) != want[i] || memcmp(&out[i].addr, &addrs[i],
                                                           sizeof addrs[i]) != 0) {
                row_fail("guard-many", i, "[%s] %s: got %s, want %s", pass ? "deny-private" : "guard",
                         addrs_s[i], out[i].allowed ? "allowed" : "denied",
                         want[i] ? "allowed" : "denied");
                nfail++;
            }
        }
        if (n != nwant) {
            row_fail("guard-many", 99, "[%s] count %zu, want %zu", pass ? "deny-private" : "guard",
                     n, nwant);
            nfail++;
        }
    }
    if (nfail)
        fail_msg("%d guard-many check(s) failed", nfail);
}

/* policy_set_local: this host's addresses and the proxy's listeners. */
static void test_set_local(void **state)
{
    (void)state;
    struct settings s;
    static const struct cfg c = {.name = "local", .allow = {"example.com"}};
    settings_from_cfg(&s, &c);
    struct policy *p = NULL;
    struct settings_error err;
    memset(&err, 0, sizeof err);
    int rc = policy_compile(&s, &p, &err);
    if (rc != 0) {
        settings_release(&s);
        fail_msg("compile: %d %s", rc, err.msg);
    }
    struct policy_addr self[3] = {addr_of("192.168.1.10"), addr_of("81.2.69.142"),
                                  addr_of("2a01:4f8::10")};
    struct policy_addr lis[3] = {addr_of("127.0.0.1"), addr_of("10.0.0.5"),
                                 addr_of("81.2.69.160")};
    uint16_t lports[3] = {3128, 1080, 0};
    assert_int_equal(policy_set_local(p, self, 3, lis, lports, 3), 0);

    static const struct guard_row rows[] = {
        G_NO(0, "example.com", 443, "192.168.1.10", THIS_HOST),
        G_NO(0, "example.com", 443, "81.2.69.142", THIS_HOST),
        G_NO(0, "example.com", 443, "2a01:4f8::10", THIS_HOST),
        G_OK(0, "example.com", 443, "81.2.69.143", PUBLIC),
        G_OK(0, "example.com", 443, "192.168.1.11", PRIVATE),
        G_NO(0, "example.com", 1080, "10.0.0.5", PROXY),
        G_OK(0, "example.com", 80, "10.0.0.5", PRIVATE),
        G_NO(0, "example.com", 9, "81.2.69.160", PROXY),
        G_NO(0, "example.com", 443, "81.2.69.160", PROXY),
        {0, "example.com", 3128, "127.0.0.1", 0, DC, "loopback and a listener: denied either way"},
    };
    int nfail = 0;
    for (size_t i = 0; i < NELEM(rows); i++) {
        rows_total++;
        nfail += check_guard_one("set-local", i, p, "local", rows[i].host, rows[i].port,
                                 rows[i].addr, rows[i].allowed, rows[i].cls, rows[i].note);
    }
    /* IP literal requests to this host / a listener: a denied class, no ask */
    static const struct {
        const char *host;
        uint16_t port;
        int verdict;
    } lit[] = {
        {"81.2.69.142", 443, POLICY_DENY},
        {"[2a01:4f8::10]", 443, POLICY_DENY},
        {"10.0.0.5", 1080, POLICY_DENY},
        {"10.0.0.5", 80, POLICY_ASK},
        {"81.2.69.143", 443, POLICY_ASK},
    };
    for (size_t i = 0; i < NELEM(lit); i++) {
        rows_total++;
        struct policy_host h;
        const char *why = NULL;
        assert_int_equal(policy_host_normalize(lit[i].host, strlen(lit[i].host), &h, &why), 0);
        struct policy_decision d;
        memset(&d, 0, sizeof d);
        policy_decide(p, &h, lit[i].port, &d);
        if ((int)d.verdict != lit[i].verdict) {
            row_fail("set-local-literal", i, "%s:%u: got %s by %s, want %s (by CLASS when DENY) -- "
                     "spec: 'this host's addresses, the proxy's own listeners' are denied classes",
                     lit[i].host, lit[i].port, verdict_name((int)d.verdict),
                     origin_name((int)d.origin), verdict_name(lit[i].verdict));
            nfail++;
        }
    }
    policy_free(p);
    settings_release(&s);
    if (nfail)
        fail_msg("%d set-local row(s) failed", nfail);
}

/* ------------------------------------------------------------------------ */
/* Compile: errors are located; rules carry their source                     */

struct compile_row {
    int list; /* POLICY_LIST_* */
    const char *value;
    int ok;
};

static const struct compile_row compile_rows[] = {
    {POLICY_LIST_ALLOWED, "example.com", 1},
    {POLICY_LIST_ALLOWED, "*", 0},
    {POLICY_LIST_DENIED, "*", 1},
    {POLICY_LIST_ALLOWED, "*.com", 0},
    {POLICY_LIST_DENIED, "*.co.uk", 1},
    {POLICY_LIST_ALLOWED, "*.co.uk", 0},
    {POLICY_LIST_DENIED, "*.com", 0},
    {POLICY_LIST_ALLOWED, "a..b", 0},
    {POLICY_LIST_DENIED, "example.com:080", 0},
    {POLICY_LIST_ALLOWED, "2001:db8::1", 0},
    {POLICY_LIST_RESOLVED_DENIED, "10.0.0.0/8", 1},
    {POLICY_LIST_RESOLVED_DENIED, "[fd00::]/8", 1},
    {POLICY_LIST_RESOLVED_DENIED, "203.0.113.7", 1},
    {POLICY_LIST_RESOLVED_DENIED, "example.com", 0},
    {POLICY_LIST_RESOLVED_DENIED, "*", 0},
    {POLICY_LIST_RESOLVED_DENIED, "10.0.0.0/33", 0},
    {POLICY_LIST_RESOLVED_DENIED, "10.0.0.1:80", 0},
};

/* network.tlsTerminate.excludeDomains: patterns as in allowedDomains, a bad
 * one fails the compile with its place; matching by name, wildcard (names
 * below only), address, CIDR and port. */
static void test_tls_exclude(void **state)
{
    static const struct {
        const char *host;
        uint16_t port;
        int excluded;
    } rows[] = {
        {"pinned.example", 443, 1},     {"a.pinned.example", 443, 0},
        {"x.mtls.example", 443, 1},     {"a.b.mtls.example", 8443, 1},
        {"mtls.example", 443, 0},       {"other.example", 443, 0},
        {"203.0.113.9", 443, 1},        {"203.0.114.1", 443, 0},
        {"port.example", 8443, 1},      {"port.example", 443, 0},
        {"2001:db8::5", 443, 1},        {"evilpinned.example", 443, 0},
    };
    struct settings s;
    struct settings_error err;
    struct policy *p = NULL;
    struct policy_host h;
    const char *why;

    (void)state;
    settings_blank(&s);
    s.network.tls_terminate.given.set = 1;
    s.network.tls_terminate.max_tunnels = 7;
    s.network.tls_terminate.handshake_timeout_ms = 500;
    list_add(&s.network.tls_terminate.exclude_domains, "pinned.example", "x", 0, 3);
    list_add(&s.network.tls_terminate.exclude_domains, "*.mtls.example", "x", 1, 4);
    list_add(&s.network.tls_terminate.exclude_domains, "203.0.113.0/24", "x", 2, 5);
    list_add(&s.network.tls_terminate.exclude_domains, "port.example:8443", "x", 3, 6);
    list_add(&s.network.tls_terminate.exclude_domains, "[2001:db8::]/32", "x", 4, 7);
    memset(&err, 0, sizeof(err));
    assert_int_equal(policy_compile(&s, &p, &err), 0);
    assert_int_equal(policy_tls_opts(p)->on, 1);
    assert_int_equal(policy_tls_opts(p)->max_tunnels, 7);
    assert_int_equal(policy_tls_opts(p)->handshake_ms, 500);
    for (size_t i = 0; i < NELEM(rows); i++) {
        assert_int_equal(policy_host_normalize(rows[i].host, strlen(rows[i].host), &h, &why), 0);
        if (policy_tls_excluded(p, &h, rows[i].port) != rows[i].excluded)
            print_error("row %zu: %s:%u\n", i, rows[i].host, (unsigned)rows[i].port);
        assert_int_equal(policy_tls_excluded(p, &h, rows[i].port), rows[i].excluded);
    }
    policy_free(p);
    settings_free(&s);
    /* a bad pattern: the compile fails, naming its place */
    settings_blank(&s);
    list_add(&s.network.tls_terminate.exclude_domains, "ok.example", "network.tlsTerminate.excludeDomains", 0, 3);
    list_add(&s.network.tls_terminate.exclude_domains, "*", "network.tlsTerminate.excludeDomains", 1, 4);
    p = NULL;
    assert_int_equal(policy_compile(&s, &p, &err), -EINVAL);
    assert_null(p);
    assert_non_null(strstr(err.msg, FILE_NAME ":4:"));
    assert_non_null(strstr(err.msg, "network.tlsTerminate.excludeDomains[1]: '*'"));
    settings_free(&s);
}

/* network.mitmProxy: its domains pick the Unix-socket proxy (patterns as in
 * allowedDomains); refused beside tlsTerminate, naming both places. */
static void test_mitm_pick(void **state)
{
    static const struct {
        const char *host;
        uint16_t port;
        int hit;
    } rows[] = {
        {"a.corp.example", 443, 1}, {"corp.example", 443, 0},  {"api.example", 443, 1},
        {"api.example", 80, 0},     {"other.example", 443, 0}, {"198.51.100.7", 80, 1},
    };
    struct settings s;
    struct settings_error err;
    struct policy *p = NULL;
    struct policy_host h;
    const struct policy_parent_proxy *pp;
    const char *why;

    (void)state;
    settings_blank(&s);
    s.network.mitm_proxy.given.set = 1;
    s.network.mitm_proxy.given.file = "m.json";
    s.network.mitm_proxy.given.line = 2;
    s.network.mitm_proxy.given.col = 5;
    s.network.mitm_proxy.socket_path = strdup("/run/mitm.sock");
    list_add(&s.network.mitm_proxy.domains, "*.corp.example", "network.mitmProxy.domains", 0, 3);
    list_add(&s.network.mitm_proxy.domains, "api.example:443", "network.mitmProxy.domains", 1, 4);
    list_add(&s.network.mitm_proxy.domains, "198.51.100.0/24", "network.mitmProxy.domains", 2, 5);
    memset(&err, 0, sizeof(err));
    assert_int_equal(policy_compile(&s, &p, &err), 0);
    for (size_t i = 0; i < NELEM(rows); i++) {
        assert_int_equal(policy_host_normalize(rows[i].host, strlen(rows[i].host), &h, &why), 0);
        pp = policy_mitm_pick(p, &h, rows[i].port);
        if ((pp != NULL) != rows[i].hit)
            print_error("row %zu: %s:%u\n", i, rows[i].host, (unsigned)rows[i].port);
        assert_int_equal(pp != NULL, rows[i].hit);
        if (pp != NULL) {
            assert_string_equal(pp->unix_path, "/run/mitm.sock");
            assert_string_equal(pp->shown, "unix:/run/mitm.sock");
        }
    }
    policy_free(p);
    /* beside tlsTerminate: refused, naming both keys and places */
    s.network.tls_terminate.given.set = 1;
    s.network.tls_terminate.given.file = "t.json";
    s.network.tls_terminate.given.line = 9;
    s.network.tls_terminate.given.col = 3;
    p = NULL;
    assert_int_equal(policy_compile(&s, &p, &err), -EINVAL);
    assert_null(p);
    assert_non_null(strstr(err.msg, "m.json:2:5: network.mitmProxy: cannot be combined with "
                                    "network.tlsTerminate (t.json:9:3)"));
    s.network.tls_terminate.given.set = 0;
    /* a bad pattern fails the compile with its place */
    list_add(&s.network.mitm_proxy.domains, "*", "network.mitmProxy.domains", 3, 6);
    assert_int_equal(policy_compile(&s, &p, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "network.mitmProxy.domains[3]: '*'"));
    settings_free(&s);
}

static void test_compile_errors(void **state)
{
    (void)state;
    int nfail = 0;
    for (size_t i = 0; i < NELEM(compile_rows); i++) {
        const struct compile_row *r = &compile_rows[i];
        rows_total++;
        struct settings s;
        settings_blank(&s);
        /* two good entries first, the row's entry third (index 2) */
        struct settings_list *l;
        const char *lname;
        unsigned line0;
        const char *good = "192.0.2.0/24";
        if (r->list == POLICY_LIST_ALLOWED) {
            l = &s.network.allowed_domains, lname = LIST_ALLOWED, line0 = LINE_ALLOWED;
            good = "ok.example.com";
        } else if (r->list == POLICY_LIST_DENIED) {
            l = &s.network.denied_domains, lname = LIST_DENIED, line0 = LINE_DENIED;
            good = "ok.example.com";
        } else {
            l = &s.network.denied_resolved_addresses, lname = LIST_RDENIED, line0 = LINE_RDENIED;
        }
        list_add(l, good, lname, 0, line0);
        list_add(l, good, lname, 1, line0 + 1);
        list_add(l, r->value, lname, 2, line0 + 2);
        struct policy *p = NULL;
        struct settings_error err;
        memset(&err, 0, sizeof err);
        int rc = policy_compile(&s, &p, &err);
        char loc[64];
        snprintf(loc, sizeof loc, "%s:%u:%u", FILE_NAME, line0 + 2, COL);
        if (r->ok) {
            if (rc != 0) {
                row_fail("compile", i, "%s '%s': rc %d '%s', want ok", lname, r->value, rc, err.msg);
                nfail++;
            } else if (r->list != POLICY_LIST_RESOLVED_DENIED && policy_rule_count(p) != 3) {
                row_fail("compile", i, "%s '%s': rule count %zu, want 3", lname, r->value,
                         policy_rule_count(p));
                nfail++;
            }
        } else if (rc != -EINVAL || strstr(err.msg, loc) == NULL || strstr(err.msg, lname) == NULL) {
            row_fail("compile", i, "%s '%s': rc %d msg '%s', want -EINVAL and a message with '%s' "
                     "and '%s'", lname, r->value, rc, err.msg, loc, lname);
            nfail++;
        }
        if (rc == 0)
            policy_free(p);
        settings_release(&s);
    }
    if (nfail)
        fail_msg("%d compile row(s) failed", nfail);
}

static void test_rule_source(void **state)
{
    (void)state;
    struct policy *p = get_policy(C_BASIC);
    assert_non_null(p);
    struct policy_host h;
    const char *why = NULL;
    assert_int_equal(policy_host_normalize("a.example.org", 13, &h, &why), 0);
    struct policy_decision d;
    policy_decide(p, &h, 443, &d);
    assert_int_equal(d.origin, POLICY_BY_RULE);
    assert_non_null(d.rule);
    assert_int_equal(d.rule->kind, POLICY_RULE_WILDCARD);
    assert_int_equal(d.rule->list_id, POLICY_LIST_ALLOWED);
    assert_string_equal(d.rule->list, LIST_ALLOWED);
    assert_string_equal(d.rule->pattern, "*.example.org");
    assert_string_equal(d.rule->file, FILE_NAME);
    assert_int_equal(d.rule->line, LINE_ALLOWED + 1);
    assert_int_equal(d.rule->col, COL);
    assert_int_equal(d.rule->index, 1);
    char buf[128];
    const char *src = policy_rule_source(d.rule, buf, sizeof buf);
    assert_non_null(src);
    assert_non_null(strstr(src, FILE_NAME ":101"));
    assert_int_equal(policy_rule_count(p), 15);
    assert_int_equal(policy_deny_private(p), 0);
    assert_int_equal(policy_mode_report(p), 0);
    struct policy *pp = get_policy(C_DENY_PRIV);
    assert_non_null(pp);
    assert_int_equal(policy_deny_private(pp), 1);
    rows_total++;
}

/* Names at the length limits: 127 labels of one byte (253 bytes). */
static void test_long_names(void **state)
{
    (void)state;
    struct policy *p = get_policy(C_BASIC);
    assert_non_null(p);
    char host[300];
    int nfail = 0;
    static const struct {
        size_t ones;        /* leading "a." labels */
        const char *tail;
        int ok;
        int verdict;
    } rows[] = {
        {126, "a", 1, POLICY_ASK},               /* 253 bytes, 127 labels */
        {127, "a", 0, 0},                        /* 255 bytes */
        {121, "example.org", 1, POLICY_ALLOW},   /* 253 bytes, wildcard *.example.org */
        {122, "example.org", 0, 0},              /* 255 bytes */
        {121, "evil.com.x", 1, POLICY_ASK},      /* 252 bytes */
        {121, "x.evil.com", 1, POLICY_DENY},     /* 252 bytes, wildcard *.evil.com */
    };
    for (size_t i = 0; i < NELEM(rows); i++) {
        size_t n = 0;
        for (size_t k = 0; k < rows[i].ones; k++) {
            host[n++] = 'a';
            host[n++] = '.';
        }
        size_t tl = strlen(rows[i].tail);
        memcpy(host + n, rows[i].tail, tl + 1);
        n += tl;
        rows_total++;
        int want_ok = rows[i].ok && n <= POLICY_HOST_MAX;
        struct policy_host h;
        const char *why = NULL;
        int rc = policy_host_normalize(host, n, &h, &why);
        if ((rc == 0) != want_ok) {
            row_fail("long-names", i, "%zu bytes: rc %d (%s), want %s", n, rc, nz(why),
                     want_ok ? "ok" : "-EINVAL");
            nfail++;
            continue;
        }
        if (rc != 0)
            continue;
        struct policy_decision d;
        policy_decide(p, &h, 443, &d);
        if ((int)d.verdict != rows[i].verdict) {
            row_fail("long-names", i, "%zu bytes: %s, want %s", n, verdict_name((int)d.verdict),
                     verdict_name(rows[i].verdict));
            nfail++;
        }
    }
    if (nfail)
        fail_msg("%d long-name row(s) failed", nfail);
}

/* ------------------------------------------------------------------------ */
/* 10,000 rules                                                              */

#define MANY_NAMES 5000
#define MANY_WILD 2500
#define MANY_CIDR 2000
#define MANY_PORT 500 /* allowed total 10000 */
#define MANY_DENY 1000

static void test_many_rules(void **state)
{
    (void)state;
    struct settings s;
    settings_blank(&s);
    char v[128];
    size_t ai = 0;
    for (int i = 0; i < MANY_NAMES; i++, ai++) {
        snprintf(v, sizeof v, "h%d.example.com", i);
        list_add(&s.network.allowed_domains, v, LIST_ALLOWED, ai, (unsigned)ai + 1);
    }
    for (int i = 0; i < MANY_WILD; i++, ai++) {
        snprintf(v, sizeof v, "*.w%d.example.net", i);
        list_add(&s.network.allowed_domains, v, LIST_ALLOWED, ai, (unsigned)ai + 1);
    }
    for (int i = 0; i < MANY_CIDR; i++, ai++) {
        snprintf(v, sizeof v, "10.%d.%d.0/24", i / 256, i % 256);
        list_add(&s.network.allowed_domains, v, LIST_ALLOWED, ai, (unsigned)ai + 1);
    }
    for (int i = 0; i < MANY_PORT; i++, ai++) {
        snprintf(v, sizeof v, "p%d.example.org:%d", i, 1000 + i);
        list_add(&s.network.allowed_domains, v, LIST_ALLOWED, ai, (unsigned)ai + 1);
    }
    for (int i = 0; i < MANY_DENY; i++) {
        if (i % 2)
            snprintf(v, sizeof v, "*.d%d.example.com", i);
        else
            snprintf(v, sizeof v, "h%d.example.com", i); /* also allowed: deny wins */
        list_add(&s.network.denied_domains, v, LIST_DENIED, (size_t)i, (unsigned)i + 1);
    }
    struct policy *p = NULL;
    struct settings_error err;
    memset(&err, 0, sizeof err);
    int rc = policy_compile(&s, &p, &err);
    if (rc != 0) {
        settings_release(&s);
        fail_msg("compile of 11000 rules: %d %s", rc, err.msg);
    }
    int nfail = 0;
    if (policy_rule_count(p) != ai + MANY_DENY) {
        row_fail("many", 0, "rule count %zu, want %zu", policy_rule_count(p), ai + MANY_DENY);
        nfail++;
    }
    struct policy_host h;
    const char *why = NULL;
    struct policy_decision d;
#define MANY_EXPECT(hostfmt, hostarg, port_, verdict_, list_, index_)                              \
    do {                                                                                           \
        char hb[128];                                                                              \
        snprintf(hb, sizeof hb, hostfmt, hostarg);                                                 \
        rows_total++;                                                                              \
        if (policy_host_normalize(hb, strlen(hb), &h, &why) != 0) {                                \
            row_fail("many", 0, "%s: normalize failed", hb);                                       \
            nfail++;                                                                               \
            break;                                                                                 \
        }                                                                                          \
        memset(&d, 0, sizeof d);                                                                   \
        policy_decide(p, &h, port_, &d);                                                           \
        int bad_ = (int)d.verdict != (verdict_);                                                   \
        if ((list_) >= 0)                                                                          \
            bad_ |= !d.rule || (int)d.rule->list_id != (list_) ||                                  \
                    d.rule->index != (size_t)(index_);                                             \
        if (bad_ && nfail < 40)                                                                    \
            row_fail("many", 0, "%s:%u: got %s rule %s[%zu], want %s %s[%d]", hb,                  \
                     (unsigned)(port_), verdict_name((int)d.verdict),                              \
                     d.rule ? list_short((int)d.rule->list_id) : "-",                              \
                     d.rule ? d.rule->index : 0, verdict_name(verdict_),                           \
                     (list_) >= 0 ? list_short(list_) : "-", (int)(index_));                      \
        nfail += bad_;                                                                             \
    } while (0)

    for (int i = 0; i < MANY_NAMES; i++) {
        if (i < MANY_DENY && i % 2 == 0)
            MANY_EXPECT("h%d.example.com", i, 443, POLICY_DENY, POLICY_LIST_DENIED, i);
        else
            MANY_EXPECT("h%d.example.com", i, 443, POLICY_ALLOW, POLICY_LIST_ALLOWED, i);
    }
    for (int i = 0; i < MANY_WILD; i++) {
        MANY_EXPECT("x.y.w%d.example.net", i, 443, POLICY_ALLOW, POLICY_LIST_ALLOWED,
                    MANY_NAMES + i);
        if (i % 97 == 0)
            MANY_EXPECT("w%d.example.net", i, 443, POLICY_ASK, -1, 0);
    }
    for (int i = 0; i < MANY_CIDR; i++) {
        char ip[32];
        snprintf(ip, sizeof ip, "10.%d.%d.%d", i / 256, i % 256, (i * 7) % 256);
        MANY_EXPECT("%s", ip, 443, POLICY_ALLOW, POLICY_LIST_ALLOWED, MANY_NAMES + MANY_WILD + i);
    }
    MANY_EXPECT("%s", "10.7.209.1", 443, POLICY_ASK, -1, 0); /* 7*256+209 = 2001: not listed */
    MANY_EXPECT("%s", "10.200.0.1", 443, POLICY_ASK, -1, 0);
    for (int i = 0; i < MANY_PORT; i++) {
        MANY_EXPECT("p%d.example.org", i, (uint16_t)(1000 + i), POLICY_ALLOW, POLICY_LIST_ALLOWED,
                    MANY_NAMES + MANY_WILD + MANY_CIDR + i);
        if (i % 50 == 0)
            MANY_EXPECT("p%d.example.org", i, (uint16_t)(1001 + i), POLICY_ASK, -1, 0);
    }
    for (int i = 1; i < MANY_DENY; i += 2)
        MANY_EXPECT("a.d%d.example.com", i, 443, POLICY_DENY, POLICY_LIST_DENIED, i);
    MANY_EXPECT("%s", "h5000.example.com", 443, POLICY_ASK, -1, 0);
    MANY_EXPECT("%s", "d1.example.com", 443, POLICY_ASK, -1, 0);
    MANY_EXPECT("%s", "xh1.example.com", 443, POLICY_ASK, -1, 0);
#undef MANY_EXPECT
    policy_free(p);
    settings_release(&s);
    if (nfail)
        fail_msg("%d many-rules check(s) failed", nfail);
}

/* network.parentProxy: URL parsing, which parent, and NO_PROXY (Go's
 * semantics: suffixes, CIDRs, "*", ports ignored); loopback always direct. */
static const char *pick(const struct policy_parent *pp, const char *host, int plain)
{
    static char buf[300];
    struct policy_host h;
    const char *why;
    const struct policy_parent_proxy *p;

    assert_int_equal(policy_host_normalize(host, strlen(host), &h, &why), 0);
    p = policy_parent_pick(pp, &h, plain);
    snprintf(buf, sizeof(buf), "%s", p == NULL ? "direct" : p->shown);
    return buf;
}

static void test_parent_proxy(void **state)
{
    struct policy_parent_proxy u;
    struct policy_parent *pp = NULL;
    struct settings s;
    struct settings_error err;
    const char *why;
    static const char json[] =
        "{\"network\": {\"parentProxy\": {\"http\": \"http://plain.corp:8080\", "
        "\"https\": \"http://us%40r:p%3Ass@[2001:db8::1]:3128/\", "
        "\"noProxy\": [\"internal.example\", \".svc.local\", \"*.k8s\", \"10.0.0.0/8\", "
        "\"192.0.2.7:443\", \"fd00::/8\"]}}}";
    char *env_none[] = {NULL};
    char *env[] = {(char *)"https_proxy=http://low:1", (char *)"HTTPS_PROXY=http://up:2",
                   (char *)"no_proxy=*", NULL};

    (void)state;
    assert_int_equal(policy_parent_parse_url("proxy.corp", &u, &why), 0);
    assert_string_equal(u.shown, "proxy.corp:80");
    assert_string_equal(u.auth, "");
    assert_int_equal(policy_parent_parse_url("http://a:b@10.1.2.3:3128", &u, &why), 0);
    assert_string_equal(u.shown, "10.1.2.3:3128");
    assert_string_equal(u.auth, "Basic YTpi");
    assert_int_equal(policy_parent_parse_url("https://p:1", &u, &why), -EINVAL);
    assert_int_equal(policy_parent_parse_url("socks5://p:1", &u, &why), -EINVAL);
    assert_int_equal(policy_parent_parse_url("http://p:0", &u, &why), -EINVAL);
    assert_int_equal(policy_parent_parse_url("http://p:1/path", &u, &why), -EINVAL);
    assert_int_equal(policy_parent_parse_url("http://:1", &u, &why), -EINVAL);

    settings_init(&s);
    assert_int_equal(settings_apply_buffer(&s, "t.json", json, strlen(json), &err), 0);
    assert_int_equal(policy_parent_build(&s, env_none, &pp, &err), 0);
    assert_non_null(pp);
    assert_string_equal(pick(pp, "example.com", 1), "plain.corp:8080");
    assert_string_equal(pick(pp, "example.com", 0), "[2001:db8::1]:3128");
    /* loopback always direct */
    assert_string_equal(pick(pp, "127.0.0.1", 0), "direct");
    assert_string_equal(pick(pp, "127.9.9.9", 0), "direct");
    assert_string_equal(pick(pp, "[::1]", 0), "direct");
    assert_string_equal(pick(pp, "localhost", 0), "direct");
    assert_string_equal(pick(pp, "a.localhost", 0), "direct");
    /* a name matches itself and its subdomains; .x and *.x subdomains only */
    assert_string_equal(pick(pp, "internal.example", 0), "direct");
    assert_string_equal(pick(pp, "a.b.internal.example", 0), "direct");
    assert_string_equal(pick(pp, "xinternal.example", 0), "[2001:db8::1]:3128");
    assert_string_equal(pick(pp, "svc.local", 0), "[2001:db8::1]:3128");
    assert_string_equal(pick(pp, "db.svc.local", 0), "direct");
    assert_string_equal(pick(pp, "k8s", 0), "[2001:db8::1]:3128");
    assert_string_equal(pick(pp, "api.k8s", 0), "direct");
    /* CIDRs and addresses (port ignored) match addresses, never names */
    assert_string_equal(pick(pp, "10.20.30.40", 0), "direct");
    assert_string_equal(pick(pp, "11.0.0.1", 0), "[2001:db8::1]:3128");
    assert_string_equal(pick(pp, "192.0.2.7", 0), "direct");
    assert_string_equal(pick(pp, "[fd12::1]", 0), "direct");
    policy_parent_free(pp);
    pp = NULL;
    settings_free(&s);

    /* no key: the environment, upper case first; NO_PROXY=* bypasses all */
    settings_init(&s);
    assert_int_equal(policy_parent_build(&s, env, &pp, &err), 0);
    assert_non_null(pp);
    assert_string_equal(pick(pp, "example.com", 0), "direct");
    policy_parent_free(pp);
    pp = NULL;
    env[2] = NULL;
    assert_int_equal(policy_parent_build(&s, env, &pp, &err), 0);
    assert_string_equal(pick(pp, "example.com", 0), "up:2");
    assert_string_equal(pick(pp, "example.com", 1), "up:2"); /* https serves both */
    policy_parent_free(pp);
    pp = NULL;
    env[1] = (char *)"HTTPS_PROXY=https://tls:1";
    assert_int_equal(policy_parent_build(&s, env, &pp, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "HTTPS_PROXY in sluice's environment: https://"));
    assert_int_equal(policy_parent_build(&s, env_none, &pp, &err), 0);
    assert_null(pp);
    settings_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_normalize),     cmocka_unit_test(test_target_parse),
        cmocka_unit_test(test_pattern_parse), cmocka_unit_test(test_addr_text),
        cmocka_unit_test(test_classify),      cmocka_unit_test(test_decide),
        cmocka_unit_test(test_reasons),       cmocka_unit_test(test_guard),
        cmocka_unit_test(test_guard_many),    cmocka_unit_test(test_set_local),
        cmocka_unit_test(test_compile_errors), cmocka_unit_test(test_rule_source),
        cmocka_unit_test(test_long_names),    cmocka_unit_test(test_many_rules),
        cmocka_unit_test(test_parent_proxy),
        cmocka_unit_test(test_tls_exclude),
        cmocka_unit_test(test_mitm_pick),
    };
    return cmocka_run_group_tests(tests, NULL, group_teardown);
}
