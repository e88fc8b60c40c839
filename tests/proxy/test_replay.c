/* tests/proxy/test_replay.c - one line of the connection log read back
 * (proxy/replay_parse.c, for `sluice check --replay`): records written by
 * the log's own writer (proxy/log.c) in both formats, hostile values
 * included, read back to the same values; every kind of bad line refused
 * with its reason; other events skipped. */
#define _GNU_SOURCE /* open_memstream */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bridge/bridge.h"
#include "proxy/replay.h"
#include "proxy/server.h"

static char buf[REPLAY_LINE_MAX + 1];

static int parse(const char *line, struct replay_record *r, const char **why)
{
    *why = NULL;
    return replay_parse_line(line, strlen(line), buf, sizeof(buf), r, why);
}

/* The line proxy/log.c writes for rec (json: JSON, else logfmt), without
 * its newline; malloc'ed. */
static char *written(const struct connlog *rec, int json)
{
    struct proxy_log lg;
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);

    assert_non_null(f);
    assert_int_equal(proxy_log_open(&lg, NULL, json), 0);
    lg.f = f;
    proxy_log_record(&lg, rec);
    fclose(f);
    lg.f = stderr; /* not owned: proxy_log_close only flushes it */
    proxy_log_close(&lg);
    assert_true(len > 0 && out[len - 1] == '\n');
    out[len - 1] = '\0';
    return out;
}

static void round_trip(void **state)
{
    static const char hostile[] = "a \"quoted\" rule = \\ with\ttab\x01 and \x7f";
    struct connlog rec;
    struct replay_record r;
    const char *why;
    (void)state;

    memset(&rec, 0, sizeof(rec));
    rec.event = CONNLOG_DECISION;
    rec.id = 7;
    rec.client = "127.0.0.1:40112";
    rec.protocol = "http";
    rec.host = "example.com";
    rec.port = 8080;
    rec.method = "POST";
    rec.url = "http://example.com:8080/a b/\"c\"";
    rec.verdict = "would_deny";
    rec.rule = hostile;
    rec.source = "/etc/sluice/my settings.json:3";
    rec.reason = "";
    rec.addr = "127.0.0.1";
    rec.code = 200;
    for (int json = 0; json <= 1; json++) {
        char *line = written(&rec, json);
        assert_int_equal(parse(line, &r, &why), 1);
        assert_string_equal(r.protocol, "http");
        assert_string_equal(r.decision, "would_deny");
        assert_string_equal(r.host, "example.com");
        assert_int_equal(r.port, 8080);
        assert_string_equal(r.method, "POST");
        assert_string_equal(r.path, "/a b/\"c\"");
        assert_string_equal(r.rule, hostile);
        assert_string_equal(r.source, "/etc/sluice/my settings.json:3");
        assert_string_equal(r.addr, "127.0.0.1");
        free(line);
    }
    /* a close record is read and skipped; so is a server event */
    rec.event = CONNLOG_CLOSE;
    rec.end = "client closed";
    for (int json = 0; json <= 1; json++) {
        char *line = written(&rec, json);
        assert_int_equal(parse(line, &r, &why), 0);
        free(line);
    }
    assert_int_equal(
        parse("time=x level=info event=start message=\"listening http tcp:1\"", &r, &why), 0);
}

static void forms(void **state)
{
    struct replay_record r;
    const char *why;
    (void)state;

    /* IPv6 and numeric IPv4 spellings are normalised */
    assert_int_equal(parse("event=decision protocol=socks5 host=::ffff:127.0.0.1 port=1 "
                           "decision=deny",
                           &r, &why),
                     1);
    assert_int_equal(r.h.kind, POLICY_HOST_IPV4);
    assert_string_equal(r.h.name, "127.0.0.1");
    assert_null(r.path);
    /* a SOCKS5 UDP association's destination (issue 26) */
    assert_int_equal(parse("event=decision protocol=socks5-udp host=echo.test port=53 "
                           "decision=allow",
                           &r, &why),
                     1);
    assert_string_equal(r.protocol, "socks5-udp");
    assert_int_equal(r.port, 53);
    assert_true(replay_protocol_udp(r.protocol));
    /* a transparent UDP destination (sluice run --transparent, issue 26) */
    assert_int_equal(parse("event=decision protocol=transparent-udp host=echo.test port=443 "
                           "decision=deny",
                           &r, &why),
                     1);
    assert_string_equal(r.protocol, "transparent-udp");
    assert_int_equal(r.port, 443);
    assert_true(replay_protocol_udp(r.protocol));
    assert_int_equal(parse("event=decision protocol=transparent-udpx host=echo.test port=443 "
                           "decision=deny",
                           &r, &why),
                     -EINVAL);
    assert_int_equal(parse("event=decision protocol=transparent host=echo.test port=443 "
                           "decision=deny",
                           &r, &why),
                     1);
    assert_false(replay_protocol_udp(r.protocol));
    /* dns: no port */
    assert_int_equal(
        parse("event=decision protocol=dns host=evil.test decision=deny code=3", &r, &why), 1);
    assert_int_equal(r.port, 0);
    /* an empty path is "/" */
    assert_int_equal(parse("{\"event\":\"decision\",\"protocol\":\"http\",\"host\":\"a.test\","
                           "\"port\":80,\"method\":\"GET\",\"url\":\"http://a.test\","
                           "\"decision\":\"allow\",\"extra\":[1]}",
                           &r, &why),
                     1);
    assert_string_equal(r.path, "/");
    /* a request inside a tunnel sluice terminated (protocol=https, terminated=1) */
    assert_int_equal(parse("event=decision protocol=https host=a.test port=443 method=POST "
                           "url=https://a.test/o/r.git/git-receive-pack decision=deny "
                           "terminated=1",
                           &r, &why),
                     1);
    assert_string_equal(r.path, "/o/r.git/git-receive-pack");
    assert_string_equal(r.method, "POST");
    /* unknown keys are read and left */
    assert_int_equal(parse("event=decision protocol=connect host=a.test port=443 decision=allow "
                           "future_key=1",
                           &r, &why),
                     1);
}

static void bad_lines(void **state)
{
    static const struct {
        const char *line, *why;
    } cases[] = {
        {"event=decision protocol=connect host=a.test port=443 decision=allow rule=\"x",
         "closing quote"},
        {"event=decision protocol=connect host=a.test port=443 decision=allow rule=\"x\"y",
         "text after a quoted value"},
        {"event=decision protocol=connect host=a.test port=443 decision=allow rule=a\"b",
         "must be quoted"},
        {"event=decision protocol=connect host=a.test port=443 decision=allow rule=\"a\\qb\"",
         "bad escape"},
        {"event=decision protocol=connect host=a.test port=443 decision=allow rule=\"a\\x0\"",
         "bad escape"},
        {"event=decision protocol=connect host=a.test port=443 decision=allow rule=\"a\\x00\"",
         "NUL"},
        {"event=decision protocol=connect host=a.test port=443 decision=allow rule=\"a\tb\"",
         "control byte"},
        {"event=decision protocol=connect host=a.test port=443 decision=allow rule=",
         "key without a value"},
        {"event=decision  protocol=connect host=a.test port=443 decision=allow", "key=value"},
        {"event=decision protocol=connect host=a.test port=443 decision=allow ", "one space"},
        {"event=decision protocol=connect host=a.test host=b.test port=443 decision=allow",
         "twice"},
        {"Event=decision", "key=value"},
        {"event", "key=value"},
        {"protocol=connect host=a.test port=443 decision=allow", "without an event"},
        {"event=decision host=a.test port=443 decision=allow", "without a protocol"},
        {"event=decision protocol=gopher host=a.test port=443 decision=allow", "unknown protocol"},
        {"event=decision protocol=connect host=a.test port=443", "without a decision"},
        {"event=decision protocol=connect host=a.test port=443 decision=ask", "unknown decision"},
        {"event=decision protocol=connect port=443 decision=allow", "without a host"},
        {"event=decision protocol=connect host=a..test port=443 decision=allow", ""},
        {"event=decision protocol=connect host=a.test decision=allow", "without a port"},
        {"event=decision protocol=connect host=a.test port=0 decision=allow", "without a port"},
        {"event=decision protocol=connect host=a.test port=65536 decision=allow", "port"},
        {"event=decision protocol=connect host=a.test port=0443 decision=allow", "port"},
        {"event=decision protocol=connect host=a.test port=-1 decision=allow", "port"},
        {"event=decision protocol=dns host=a.test port=53 decision=deny", "dns decision with"},
        /* found by fuzz_replay: policy_dns_refused is for names only */
        {"event=decision protocol=dns host=1 decision=deny", "dns decision for an IP"},
        {"event=decision protocol=dns host=[::1] decision=deny", "dns decision for an IP"},
        {"event=decision protocol=connect host=a.test port=1 method=GET url=http://a.test/ "
         "decision=allow",
         "not protocol=http"},
        {"event=decision protocol=http host=a.test port=80 method=GET decision=allow",
         "without url"},
        {"event=decision protocol=http host=a.test port=80 method=\"\" url=http://a.test/ "
         "decision=allow",
         "not a method"},
        {"event=decision protocol=http host=a.test port=80 method=\"G T\" url=http://a.test/ "
         "decision=allow",
         "not a method"},
        {"event=decision protocol=http host=a.test port=80 method=GET url=ftp://a.test/ "
         "decision=allow",
         "http://"},
        {"event=decision protocol=https host=a.test port=443 method=GET url=http://a.test/ "
         "decision=allow",
         "https://"},
        {"event=decision protocol=http host=a.test port=80 method=GET url=https://a.test/ "
         "decision=allow",
         "http://"},
        {"event=decision protocol=http host=a.test port=80 method=GET url=http:///x "
         "decision=allow",
         "no host"},
        {"{\"event\":\"decision\",\"protocol\":\"connect\",\"host\":\"a.test\",\"port\":443,"
         "\"decision\":\"allow\"",
         "not valid JSON"},
        {"{\"event\":\"decision\",\"event\":\"close\"}", "not valid JSON"},
        {"[1]", "key=value"},
        {"{\"event\":\"decision\",\"protocol\":\"connect\",\"host\":\"a.test\",\"port\":\"443\","
         "\"decision\":\"allow\"}",
         "port is not a number"},
        {"{\"event\":\"decision\",\"protocol\":\"connect\",\"host\":\"a.test\",\"port\":1e3,"
         "\"decision\":\"allow\"}",
         "port is not a number"},
        {"{\"event\":\"decision\",\"protocol\":\"connect\",\"host\":\"a.test\",\"port\":443,"
         "\"decision\":true}",
         "must be a string"},
        {"{\"event\":\"decision\",\"protocol\":\"connect\",\"host\":\"a\\u0000.test\","
         "\"port\":443,\"decision\":\"allow\"}",
         "not valid JSON"},
        {"{} trailing", "not valid JSON"},
    };
    struct replay_record r;
    const char *why;
    (void)state;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int rc = parse(cases[i].line, &r, &why);
        if (rc != -EINVAL || why == NULL || strstr(why, cases[i].why) == NULL)
            fail_msg("case %zu '%s': rc %d, why '%s', want '%s'", i, cases[i].line, rc,
                     why != NULL ? why : "(null)", cases[i].why);
    }
    /* a NUL byte inside the line, and a line longer than the buffer */
    assert_int_equal(replay_parse_line("event=decision\0x", 16, buf, sizeof(buf), &r, &why),
                     -EINVAL);
    assert_int_equal(replay_parse_line("event=decision", 14, buf, 14, &r, &why), -EINVAL);
    assert_int_equal(replay_parse_line("", 0, buf, sizeof(buf), &r, &why), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(round_trip),
        cmocka_unit_test(forms),
        cmocka_unit_test(bad_lines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
