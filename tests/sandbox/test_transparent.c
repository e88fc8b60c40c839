/* tests/sandbox/test_transparent.c - transparent mode's host-side pieces
 * that need no sandbox (sandbox/transparent.c): the synthetic address table
 * (one address per name, mapped back exactly) and the resolver's answers
 * (tp_dns_answer) decided by a compiled policy. The connect() path is
 * covered end to end by tests/e2e/transparent.sh. */
#define _GNU_SOURCE
#include <setjmp.h> /* cmocka needs these first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sandbox/transparent.h"

/* ------------------------------------------------------------------------ */
/* names                                                                     */

static void test_names(void **state)
{
    struct tp_names n;
    struct policy_addr a;
    char buf[64];
    long i;

    (void)state;
    memset(&n, 0, sizeof(n));
    assert_int_equal(tp_names_add(&n, "a.test"), 0);
    assert_int_equal(tp_names_add(&n, "b.test"), 1);
    assert_int_equal(tp_names_add(&n, "a.test"), 0); /* same name, same address */
    assert_int_equal(tp_names_find(&n, "b.test"), 1);
    assert_int_equal(tp_names_find(&n, "c.test"), -1);

    tp_synthetic(0, 4, &a);
    assert_string_equal(policy_addr_str(&a, buf, sizeof(buf)), "198.18.0.1");
    assert_string_equal(tp_names_lookup(&n, &a), "a.test");
    tp_synthetic(1, 6, &a);
    assert_string_equal(policy_addr_str(&a, buf, sizeof(buf)), "fd53:6c75:6963:6500::2");
    assert_string_equal(tp_names_lookup(&n, &a), "b.test");

    /* addresses no name produced */
    tp_synthetic(2, 4, &a);
    assert_null(tp_names_lookup(&n, &a));
    assert_int_equal(policy_addr_parse("198.18.0.0", &a), 0);
    assert_null(tp_names_lookup(&n, &a));
    assert_int_equal(policy_addr_parse("198.20.0.1", &a), 0);
    assert_null(tp_names_lookup(&n, &a));
    assert_int_equal(policy_addr_parse("127.0.0.1", &a), 0);
    assert_null(tp_names_lookup(&n, &a));
    assert_int_equal(policy_addr_parse("fd53:6c75:6963:6500:1::1", &a), 0);
    assert_null(tp_names_lookup(&n, &a));
    assert_int_equal(policy_addr_parse("fd53:6c75:6963:6501::1", &a), 0);
    assert_null(tp_names_lookup(&n, &a));

    /* many names: each its own address, all mapped back (the table grows) */
    for (int k = 0; k < 5000; k++) {
        snprintf(buf, sizeof(buf), "n%d.test", k);
        i = tp_names_add(&n, buf);
        assert_int_equal(i, k + 2);
    }
    for (int k = 0; k < 5000; k += 97) {
        snprintf(buf, sizeof(buf), "n%d.test", k);
        tp_synthetic((size_t)k + 2, k % 2 ? 4 : 6, &a);
        assert_string_equal(tp_names_lookup(&n, &a), buf);
    }
    /* the end of the /15 */
    tp_synthetic(131069, 4, &a);
    assert_string_equal(policy_addr_str(&a, buf, sizeof(buf)), "198.19.255.254");
    tp_names_free(&n);
}

/* ------------------------------------------------------------------------ */
/* the resolver                                                              */

struct fixture {
    uv_loop_t loop;
    struct settings s;
    struct egress_env *egress;
    struct tp *tp;
    int denied_logged;
    char last_host[256];
    char dir[64];
};

static void on_log(void *ctx, const struct connlog *r)
{
    struct fixture *f = ctx;

    assert_string_equal(r->verdict, "deny");
    assert_string_equal(r->protocol, "dns");
    f->denied_logged++;
    snprintf(f->last_host, sizeof(f->last_host), "%s", r->host);
}

static int setup_json(void **state, const char *json)
{
    struct fixture *f = calloc(1, sizeof(*f));
    struct settings_error err;
    struct policy *p = NULL;
    char path[128];
    FILE *fp;

    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/sluice-test-tp.XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    setenv("XDG_CONFIG_HOME", f->dir, 1);
    setenv("HOME", f->dir, 1);
    snprintf(path, sizeof(path), "%s/s.json", f->dir);
    fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(json, fp);
    fclose(fp);
    settings_init(&f->s);
    memset(&err, 0, sizeof(err));
    assert_int_equal(settings_load(&f->s, path, &err), 0);
    assert_int_equal(policy_compile(&f->s, &p, &err), 0);
    unlink(path);
    assert_int_equal(uv_loop_init(&f->loop), 0);
    assert_int_equal(egress_env_new(&f->egress, &f->loop, p, NULL, NULL, 1000), 0);
    f->tp = tp_new_for_test(f->egress, on_log, f);
    assert_non_null(f->tp);
    *state = f;
    return 0;
}

static int setup(void **state)
{
    return setup_json(state, "{\"network\": {\"allowedDomains\": [\"ok.test\", \"twin.test\"],"
                             " \"deniedDomains\": [\"evil.test\", \"*.bad.test\", \"port.test:443\"]}}");
}

static int setup_report(void **state)
{
    return setup_json(state, "{\"network\": {\"deniedDomains\": [\"evil.test\"], \"mode\": \"report\"}}");
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    tp_free_for_test(f->tp);
    egress_env_free(f->egress);
    (void)uv_loop_close(&f->loop);
    settings_free(&f->s);
    rmdir(f->dir);
    free(f);
    return 0;
}

/* A query: id 0xbeef, RD, one question NAME TYPE class CLASS. */
static size_t query(uint8_t *q, const char *name, unsigned type, unsigned cls)
{
    size_t o = 12;
    const char *p = name;

    memset(q, 0, 12);
    q[0] = 0xbe;
    q[1] = 0xef;
    q[2] = 0x01;
    q[5] = 1;
    while (*p != '\0') {
        const char *dot = strchr(p, '.');
        size_t l = dot != NULL ? (size_t)(dot - p) : strlen(p);
        q[o++] = (uint8_t)l;
        memcpy(q + o, p, l);
        o += l;
        p += l;
        if (*p == '.')
            p++;
    }
    q[o++] = 0;
    q[o++] = (uint8_t)(type >> 8);
    q[o++] = (uint8_t)type;
    q[o++] = (uint8_t)(cls >> 8);
    q[o++] = (uint8_t)cls;
    return o;
}

struct answer {
    unsigned rcode, qd, an;
    uint8_t rdata[16];
    size_t rdlen;
};

static struct answer ask(struct fixture *f, const uint8_t *q, size_t qlen)
{
    uint8_t out[1024];
    struct answer a;
    size_t len = tp_dns_answer(f->tp, q, qlen, out, sizeof(out));

    memset(&a, 0, sizeof(a));
    assert_true(len >= 12);
    assert_int_equal(out[0], q[0]);
    assert_int_equal(out[1], q[1]);
    assert_true(out[2] & 0x80); /* QR */
    a.rcode = out[3] & 15;
    a.qd = (unsigned)out[4] << 8 | out[5];
    a.an = (unsigned)out[6] << 8 | out[7];
    if (a.an == 1) {
        /* question copied, then one answer: pointer, type, class, ttl, rdlength */
        size_t o = qlen;
        assert_int_equal(out[o], 0xC0);
        assert_int_equal(out[o + 1], 12);
        a.rdlen = (size_t)out[o + 10] << 8 | out[o + 11];
        assert_true(a.rdlen == 4 || a.rdlen == 16);
        assert_int_equal(len, o + 12 + a.rdlen);
        memcpy(a.rdata, out + o + 12, a.rdlen);
    }
    return a;
}

static void test_dns_answers(void **state)
{
    struct fixture *f = *state;
    uint8_t q[600];
    struct answer a;
    size_t n;

    n = query(q, "ok.test", 1, 1);
    a = ask(f, q, n);
    assert_int_equal(a.rcode, 0);
    assert_int_equal(a.an, 1);
    assert_memory_equal(a.rdata, "\xc6\x12\x00\x01", 4);
    n = query(q, "OK.Test.", 28, 1); /* case and a trailing dot: the same name */
    a = ask(f, q, n);
    assert_int_equal(a.an, 1);
    assert_memory_equal(a.rdata, "\xfd\x53\x6c\x75\x69\x63\x65\x00\0\0\0\0\0\0\0\x01", 16);
    n = query(q, "twin.test", 1, 1);
    a = ask(f, q, n);
    assert_memory_equal(a.rdata, "\xc6\x12\x00\x02", 4);
    /* a name no rule decides gets an address too: the port decides later */
    n = query(q, "unknown.test", 1, 1);
    a = ask(f, q, n);
    assert_int_equal(a.an, 1);
    /* a rule for one port: not refused at the resolver */
    n = query(q, "port.test", 1, 1);
    a = ask(f, q, n);
    assert_int_equal(a.rcode, 0);
    assert_int_equal(a.an, 1);
    assert_int_equal(f->denied_logged, 0);
    /* other types: empty NOERROR */
    n = query(q, "ok.test", 15, 1);
    a = ask(f, q, n);
    assert_int_equal(a.rcode, 0);
    assert_int_equal(a.an, 0);
    assert_int_equal(a.qd, 1);
    /* class CH: NOTIMP */
    n = query(q, "ok.test", 1, 3);
    a = ask(f, q, n);
    assert_int_equal(a.rcode, 4);
}

static void test_dns_denied(void **state)
{
    struct fixture *f = *state;
    uint8_t q[600];
    struct answer a;
    size_t n;

    n = query(q, "evil.test", 1, 1);
    a = ask(f, q, n);
    assert_int_equal(a.rcode, 3);
    assert_int_equal(a.an, 0);
    assert_int_equal(f->denied_logged, 1);
    assert_string_equal(f->last_host, "evil.test");
    n = query(q, "deep.x.bad.test", 28, 1);
    a = ask(f, q, n);
    assert_int_equal(a.rcode, 3);
    assert_int_equal(f->denied_logged, 2);
    n = query(q, "evil.test", 16, 1); /* any type */
    a = ask(f, q, n);
    assert_int_equal(a.rcode, 3);
    /* an IP literal as a name, a bad name */
    n = query(q, "127.0.0.1", 1, 1);
    a = ask(f, q, n);
    assert_int_equal(a.rcode, 3);
    assert_int_equal(a.an, 0);
}

static void test_dns_malformed(void **state)
{
    struct fixture *f = *state;
    uint8_t q[600], out[1024];
    struct answer a;
    size_t n;

    n = query(q, "ok.test", 1, 1);
    /* a response is dropped; so is anything shorter than a header */
    q[2] |= 0x80;
    assert_int_equal(tp_dns_answer(f->tp, q, n, out, sizeof(out)), 0);
    q[2] &= 0x7f;
    assert_int_equal(tp_dns_answer(f->tp, q, 11, out, sizeof(out)), 0);
    /* opcode STATUS: NOTIMP */
    q[2] = (uint8_t)(2 << 3);
    a = ask(f, q, n);
    assert_int_equal(a.rcode, 4);
    q[2] = 1;
    /* two questions: FORMERR */
    q[5] = 2;
    a = ask(f, q, n);
    assert_int_equal(a.rcode, 1);
    q[5] = 1;
    /* cut inside the name, inside the type */
    for (size_t cut = 12; cut < n; cut++) {
        a = ask(f, q, cut);
        assert_int_equal(a.rcode, 1);
        assert_int_equal(a.an, 0);
    }
    /* a compression pointer in the question */
    q[12] = 0xC0;
    a = ask(f, q, n);
    assert_int_equal(a.rcode, 1);
    /* a name longer than 253 */
    {
        char name[400];
        memset(name, 0, sizeof(name));
        for (int i = 0; i < 5; i++)
            strcat(name, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.");
        strcat(name, "test");
        n = query(q, name, 1, 1);
        a = ask(f, q, n);
        assert_int_equal(a.rcode, 1);
    }
    /* the root: NOERROR, no answer */
    n = query(q, "", 1, 1);
    a = ask(f, q, n);
    assert_int_equal(a.rcode, 0);
    assert_int_equal(a.an, 0);
}

static void test_dns_report_mode(void **state)
{
    struct fixture *f = *state;
    uint8_t q[600];
    struct answer a;
    size_t n = query(q, "evil.test", 1, 1);

    /* report mode denies nothing: the name gets an address, the connect is
     * flagged would_deny by the egress pipeline */
    a = ask(f, q, n);
    assert_int_equal(a.rcode, 0);
    assert_int_equal(a.an, 1);
    assert_int_equal(f->denied_logged, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test_setup_teardown(test_dns_answers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dns_denied, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dns_malformed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dns_report_mode, setup_report, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
