/* tests/fuzz/fuzz_replay.c - one connection log line read back for `sluice
 * check --replay` (proxy/replay_parse.c).
 *
 * The input is one line (any bytes, NUL and newlines included). Checked:
 *   - replay_parse_line returns 1, 0 or -EINVAL, with a reason exactly when
 *     it refuses, and never reads or writes past the line or the buffer
 *     (the buffer is exactly len + 1 bytes: ASan sees an overrun);
 *   - a decision record has a protocol and a decision of the known sets, a
 *     host that normalises to the record's canonical host again, a port
 *     (1-65535; 0 only for protocol=dns), and a path starting with '/'
 *     exactly when protocol=http has both method and url;
 *   - written again by the connection log's own writer (proxy/log.c,
 *     logfmt), the record reads back to the same fields;
 *   - the record is judged by a fixed policy without a crash, as the replay
 *     judges it (policy_verdict_request, policy_dns_refused);
 *   - learned (proxy/learn.c, `check --learn`), alone and against the fixed
 *     policy as a base: the fragment builds, loads as settings and allows
 *     what it was made for (learn_build checks that itself and fails
 *     otherwise), and a non-public IP literal or a denial by a rule or the
 *     guard never becomes an entry.
 */
#define _GNU_SOURCE /* open_memstream */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bridge/bridge.h"
#include "fuzz.h"
#include "policy/policy.h"
#include "proxy/learn.h"
#include "proxy/replay.h"
#include "proxy/server.h"

static struct policy *pol;

static void build_policy(void)
{
    static const char json[] =
        "{\"network\": {\"allowedDomains\": [\"ruled.test\", \"*.example.com\", "
        "\"127.0.0.1:80\"],\n"
        " \"deniedDomains\": [\"evil.test\"],\n"
        " \"requestRules\": [{\"host\": \"ruled.test\", \"method\": \"GET\", \"path\": \"/a/**\", "
        "\"action\": \"allow\"}]}}\n";
    struct settings s;
    struct settings_error err;

    settings_init(&s);
    FUZZ_CHECK(settings_apply_buffer(&s, "fuzz.json", json, sizeof(json) - 1, &err) == 0);
    FUZZ_CHECK(policy_compile(&s, &pol, &err) == 0);
    settings_free(&s);
}

static int same(const char *a, const char *b)
{
    if (a == NULL || b == NULL)
        return a == b;
    return strcmp(a, b) == 0;
}

/* The record as proxy/log.c writes it, then read back. */
static void rewrite(const struct replay_record *r)
{
    struct connlog rec;
    struct proxy_log lg;
    struct replay_record r2;
    char *out = NULL, *buf2;
    size_t len = 0;
    const char *why = NULL;
    FILE *f;

    memset(&rec, 0, sizeof(rec));
    rec.event = CONNLOG_DECISION;
    rec.protocol = r->protocol;
    rec.host = r->host;
    rec.port = r->port;
    rec.method = r->method;
    rec.url = r->url;
    rec.verdict = r->decision;
    rec.rule = r->rule;
    rec.source = r->source;
    rec.addr = r->addr;
    rec.code = -1;
    f = open_memstream(&out, &len);
    FUZZ_CHECK(f != NULL);
    FUZZ_CHECK(proxy_log_open(&lg, NULL, 0) == 0);
    lg.f = f;
    proxy_log_record(&lg, &rec);
    fclose(f);
    lg.f = stderr;
    proxy_log_close(&lg);
    FUZZ_CHECK(len > 0 && out[len - 1] == '\n');
    buf2 = malloc(len);
    FUZZ_CHECK(buf2 != NULL);
    /* the writer leaves out an empty value: a record read with one (JSON
     * "rule":"") is compared with that in mind */
    if (replay_parse_line(out, len - 1, buf2, len, &r2, &why) != 1) {
        fprintf(stderr, "rewritten record not read back (%s): %s", why, out);
        abort();
    }
    FUZZ_CHECK(same(r2.protocol, r->protocol) && same(r2.decision, r->decision));
    FUZZ_CHECK(strcmp(r2.h.name, r->h.name) == 0 && r2.port == r->port);
    FUZZ_CHECK(same(r2.method, r->method) && same(r2.url, r->url));
#define SAME_OR_EMPTY(x) FUZZ_CHECK(same(r2.x, r->x) || (r2.x == NULL && r->x[0] == '\0'))
    SAME_OR_EMPTY(rule);
    SAME_OR_EMPTY(source);
    SAME_OR_EMPTY(addr);
#undef SAME_OR_EMPTY
    free(buf2);
    free(out);
}

static void judge(const struct replay_record *r)
{
    struct policy_guard_verdict gv[1];
    struct policy_judgment j;
    struct policy_request rq;

    if (strcmp(r->protocol, "dns") == 0) {
        (void)policy_dns_refused(pol, &r->h, &j);
        return;
    }
    if (r->path != NULL) {
        rq.method = r->method;
        rq.method_len = strlen(r->method);
        rq.target = r->path;
        rq.target_len = strlen(r->path);
    }
    if (replay_protocol_udp(r->protocol))
        policy_verdict_transport(pol, POLICY_UDP, &r->h, r->port, NULL, 0, gv, &j);
    else
        policy_verdict_request(pol, &r->h, r->port, r->path != NULL ? &rq : NULL, NULL, 0, gv,
                               &j);
    FUZZ_CHECK(j.verdict == POLICY_ALLOW || j.verdict == POLICY_DENY || j.verdict == POLICY_ASK);
}

static void learn(const struct replay_record *r, const struct policy *base)
{
    struct learn *l = NULL;
    struct learn_result res;
    int lifted;

    FUZZ_CHECK(learn_new(&l) == 0);
    FUZZ_CHECK(learn_add(l, r) == 0);
    FUZZ_CHECK(learn_build(l, base, NULL, &res) == 0);
    lifted = strcmp(r->protocol, "dns") != 0 && !replay_protocol_udp(r->protocol) &&
             (r->h.kind == POLICY_HOST_NAME ||
              policy_addr_classify(&r->h.addr, NULL) == POLICY_CLASS_PUBLIC) &&
             (strcmp(r->decision, "deny") != 0 || (r->rule == NULL && r->addr == NULL));
    FUZZ_CHECK(res.entries <= 1);
    if (!lifted || base != NULL)
        FUZZ_CHECK(lifted || res.entries == 0);
    else
        FUZZ_CHECK(res.entries == 1 && strstr(res.json, r->h.name) != NULL);
    free(res.json);
    learn_free(l);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct replay_record r;
    struct policy_host h2;
    const char *why = NULL;
    char *line, *buf;
    int rc;

    if (pol == NULL)
        build_policy();
    if (size > REPLAY_LINE_MAX)
        return 0;
    /* exactly the bytes, in a block of their own: ASan sees any overrun */
    line = malloc(size > 0 ? size : 1);
    buf = malloc(size + 1);
    FUZZ_CHECK(line != NULL && buf != NULL);
    if (size > 0)
        memcpy(line, data, size);
    rc = replay_parse_line(line, size, buf, size + 1, &r, &why);
    FUZZ_CHECK(rc == 1 || rc == 0 || rc == -EINVAL);
    FUZZ_CHECK((rc == -EINVAL) == (why != NULL));
    if (rc == 1) {
        int dns = strcmp(r.protocol, "dns") == 0;
        FUZZ_CHECK(r.decision != NULL && r.host != NULL);
        FUZZ_CHECK(strcmp(r.decision, "allow") == 0 || strcmp(r.decision, "deny") == 0 ||
                   strcmp(r.decision, "would_deny") == 0);
        FUZZ_CHECK(dns ? r.port == 0 : r.port != 0);
        FUZZ_CHECK(policy_host_normalize(r.h.name, r.h.len, &h2, &why) == 0);
        FUZZ_CHECK(strcmp(h2.name, r.h.name) == 0);
        FUZZ_CHECK((r.path != NULL) == (r.method != NULL && r.url != NULL));
        FUZZ_CHECK(r.path == NULL || (r.path[0] == '/' && strcmp(r.protocol, "http") == 0));
        rewrite(&r);
        judge(&r);
        learn(&r, NULL);
        learn(&r, pol);
    }
    free(line);
    free(buf);
    return 0;
}
