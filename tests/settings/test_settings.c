/* tests/settings/test_settings.c - the settings loader and the JSON locator. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "settings/jsonpos.h"
#include "settings/settings.h"

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */

static char data_dir[1024]; /* tests/data/settings */
static char tmp_dir[256];   /* a private scratch directory */

static void path_in(char *buf, size_t size, const char *dir, const char *name)
{
    int n = snprintf(buf, size, "%s/%s", dir, name);
    assert_true(n > 0 && (size_t)n < size);
}

static void write_file(const char *path, const char *text, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

static void write_str(const char *path, const char *text)
{
    write_file(path, text, strlen(text));
}

static void write_tmp(const char *name, const char *text)
{
    char p[512];
    path_in(p, sizeof(p), tmp_dir, name);
    write_file(p, text, strlen(text));
}

static int apply(struct settings *s, const char *json, struct settings_error *err)
{
    memset(err->msg, 0, sizeof(err->msg));
    return settings_apply_buffer(s, "t.json", json, strlen(json), err);
}

/* Growable text for snapshots. */
struct buf {
    char *p;
    size_t n, cap;
};

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void buf_add(struct buf *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    for (;;) {
        size_t room = b->cap - b->n;
        va_start(ap, fmt);
        n = vsnprintf(b->p ? b->p + b->n : NULL, room, fmt, ap);
        va_end(ap);
        assert_true(n >= 0);
        if ((size_t)n < room) {
            b->n += (size_t)n;
            return;
        }
        b->cap = (b->cap + (size_t)n + 1) * 2;
        b->p = realloc(b->p, b->cap);
        assert_non_null(b->p);
    }
}

static void dump_list(struct buf *b, const char *name, const struct settings_list *l)
{
    buf_add(b, "%s(%zu):", name, l->n);
    for (size_t i = 0; i < l->n; i++) {
        const struct settings_item *it = &l->items[i];
        buf_add(b, " [%s @%s:%u:%u %s #%zu]", it->value, it->file, it->line, it->col, it->list,
                it->index);
    }
    buf_add(b, "\n");
}

static void dump_map(struct buf *b, const char *name, const struct settings_map *m)
{
    buf_add(b, "%s(%zu):", name, m->n);
    for (size_t i = 0; i < m->n; i++) {
        buf_add(b, " {%s=%s}", m->pairs[i].key, m->pairs[i].value ? m->pairs[i].value : "-");
        dump_list(b, "  list", &m->pairs[i].list);
    }
    buf_add(b, "\n");
}

/* Everything in a settings struct, as text (caller frees). */
static char *dump(const struct settings *s)
{
    struct buf b = {0};

    dump_list(&b, "allowed", &s->network.allowed_domains);
    dump_list(&b, "denied", &s->network.denied_domains);
    dump_map(&b, "reasons", &s->network.denied_domain_reasons);
    dump_list(&b, "resolved", &s->network.denied_resolved_addresses);
    dump_list(&b, "unix", &s->network.allow_unix_sockets);
    dump_list(&b, "dns", &s->network.dns_servers);
    dump_list(&b, "afiles", &s->network.allowed_domains_files);
    dump_list(&b, "dfiles", &s->network.denied_domains_files);
    dump_list(&b, "denyRead", &s->filesystem.deny_read);
    dump_list(&b, "allowRead", &s->filesystem.allow_read);
    dump_list(&b, "allowWrite", &s->filesystem.allow_write);
    dump_list(&b, "denyWrite", &s->filesystem.deny_write);
    dump_map(&b, "ignore", &s->ignore_violations);
    dump_list(&b, "safe", &s->git_safe_directories);
    dump_list(&b, "excluded", &s->sandbox.excluded_commands);
    dump_list(&b, "envAllow", &s->environment.allow);
    dump_list(&b, "envDeny", &s->environment.deny);
    dump_map(&b, "envSet", &s->environment.set);
    dump_list(&b, "pathAppend", &s->environment.path_append);
    dump_list(&b, "notices", &s->notices);
    buf_add(&b, "strict=%d all=%d allunix=%d local=%d http=%u socks=%u private=%d mode=%d\n",
            s->network.strict_allowlist, s->network.allow_all_domains,
            s->network.allow_all_unix_sockets, s->network.allow_local_binding,
            s->network.http_proxy_port, s->network.socks_proxy_port,
            (int)s->network.deny_private_addresses, (int)s->network.mode);
    buf_add(&b, "gitcfg=%d fsoff=%d nested=%d depth=%u bwrap=%s\n",
            s->filesystem.allow_git_config, s->filesystem.disabled,
            s->enable_weaker_nested_sandbox, s->mandatory_deny_search_depth,
            s->bwrap_path ? s->bwrap_path : "-");
    buf_add(&b, "sandbox=%d unsandboxed=%d inherit=%d\n", (int)s->sandbox.enabled,
            (int)s->sandbox.allow_unsandboxed_commands, s->environment.inherit);
    return b.p;
}

static void assert_item(const struct settings_item *it, const char *value, const char *file_suffix,
                        unsigned line, unsigned col, const char *list, size_t index)
{
    size_t fl = strlen(it->file), sl = strlen(file_suffix);

    assert_string_equal(it->value, value);
    assert_true(fl >= sl);
    assert_string_equal(it->file + fl - sl, file_suffix);
    assert_int_equal(it->line, line);
    assert_int_equal(it->col, col);
    assert_string_equal(it->list, list);
    assert_int_equal(it->index, index);
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Load times are printed for information only: timings are never asserted
 * in unit tests (shared, noisy machines); tests/bench/ measures speed. */

/* ------------------------------------------------------------------------ */
/* Defaults and the reference file                                           */

static void test_defaults(void **state)
{
    struct settings s;

    (void)state;
    settings_init(&s);
    assert_int_equal(s.network.mode, SETTINGS_MODE_ENFORCE);
    assert_int_equal(s.mandatory_deny_search_depth, 3);
    assert_int_equal(s.network.deny_private_addresses, SETTINGS_UNSET);
    assert_int_equal(s.network.allowed_domains.n, 0);
    assert_null(s.bwrap_path);
    settings_free(&s);
}

static void test_reference_file(void **state)
{
    struct settings s;
    struct settings_error err = {{0}};
    char p[1200];
    const struct settings_map *iv;

    (void)state;
    path_in(p, sizeof(p), data_dir, "srt-reference.json");
    settings_init(&s);
    assert_int_equal(settings_apply_file(&s, p, &err), 0);

    assert_int_equal(s.network.allowed_domains.n, 2);
    assert_item(&s.network.allowed_domains.items[0], "github.com", "srt-reference.json", 3, 24,
                "network.allowedDomains", 0);
    assert_item(&s.network.allowed_domains.items[1], "*.npmjs.org", "srt-reference.json", 3, 38,
                "network.allowedDomains", 1);
    assert_string_equal(s.network.allowed_domains.items[0].file, p);
    assert_int_equal(s.network.denied_domains.n, 1);
    assert_item(&s.network.denied_domains.items[0], "evil.com", "srt-reference.json", 4, 23,
                "network.deniedDomains", 0);
    assert_int_equal(s.network.allow_unix_sockets.n, 0);
    assert_int_equal(s.network.allow_local_binding, 0);
    assert_int_equal(s.filesystem.deny_read.n, 1);
    assert_item(&s.filesystem.deny_read.items[0], "~/.ssh", "srt-reference.json", 9, 18,
                "filesystem.denyRead", 0);
    assert_int_equal(s.filesystem.allow_write.n, 1);
    assert_string_equal(s.filesystem.allow_write.items[0].value, ".");
    assert_int_equal(s.filesystem.deny_write.n, 1);
    assert_string_equal(s.filesystem.deny_write.items[0].value, ".env");
    iv = &s.ignore_violations;
    assert_int_equal(iv->n, 1);
    assert_string_equal(iv->pairs[0].key, "*");
    assert_int_equal(iv->pairs[0].list.n, 1);
    assert_item(&iv->pairs[0].list.items[0], "/tmp", "srt-reference.json", 14, 11,
                "ignoreViolations", 0);
    assert_int_equal(s.enable_weaker_nested_sandbox, 0);
    assert_int_equal(s.mandatory_deny_search_depth, 3);
    assert_int_equal(s.notices.n, 0); /* an empty allowUnixSockets asks for nothing */
    assert_int_equal(s.nfiles, 1);
    settings_free(&s);
}

static void test_bom_and_all_keys(void **state)
{
    struct settings s;
    struct settings_error err = {{0}};
    const char *json =
        "\xEF\xBB\xBF{\"network\":{\"strictAllowlist\":true,\"allowAllDomains\":true,"
        "\"allowAllUnixSockets\":true,\"allowLocalBinding\":true,\"httpProxyPort\":3128,"
        "\"socksProxyPort\":1080,\"denyPrivateAddresses\":false,\"mode\":\"report\","
        "\"deniedResolvedAddresses\":[\"10.0.0.0/8\"],\"dnsServers\":[\"1.1.1.1\"],"
        "\"deniedDomainReasons\":{\"evil.com\":\"phishing\"}},"
        "\"filesystem\":{\"allowRead\":[\"~/.ssh/known_hosts\"],\"allowGitConfig\":true,"
        "\"disabled\":true},"
        "\"git\":{\"safeDirectories\":[\"/src\"]},\"bwrapPath\":\"/usr/bin/bwrap\","
        "\"enableWeakerNestedSandbox\":true,\"mandatoryDenySearchDepth\":10}";

    (void)state;
    settings_init(&s);
    assert_int_equal(apply(&s, json, &err), 0);
    assert_true(s.network.strict_allowlist);
    assert_true(s.network.allow_all_domains);
    assert_true(s.network.allow_all_unix_sockets);
    assert_true(s.network.allow_local_binding);
    assert_int_equal(s.network.http_proxy_port, 3128);
    assert_int_equal(s.network.socks_proxy_port, 1080);
    assert_int_equal(s.network.deny_private_addresses, SETTINGS_FALSE);
    assert_int_equal(s.network.mode, SETTINGS_MODE_REPORT);
    assert_int_equal(s.network.denied_resolved_addresses.n, 1);
    assert_int_equal(s.network.dns_servers.n, 1);
    assert_int_equal(s.network.denied_domain_reasons.n, 1);
    assert_string_equal(s.network.denied_domain_reasons.pairs[0].key, "evil.com");
    assert_string_equal(s.network.denied_domain_reasons.pairs[0].value, "phishing");
    assert_int_equal(s.filesystem.allow_read.n, 1);
    assert_true(s.filesystem.allow_git_config);
    assert_true(s.filesystem.disabled);
    assert_int_equal(s.git_safe_directories.n, 1);
    assert_string_equal(s.bwrap_path, "/usr/bin/bwrap");
    assert_true(s.enable_weaker_nested_sandbox);
    assert_int_equal(s.mandatory_deny_search_depth, 10);
    /* the BOM is not a column: the first key sits at line 1, column 2 */
    assert_int_equal(s.network.denied_resolved_addresses.items[0].line, 1);
    settings_free(&s);
}

/* ------------------------------------------------------------------------ */
/* Errors: exact messages                                                    */

static void test_misspelled_key_file(void **state)
{
    struct settings s;
    struct settings_error err = {{0}};
    char p[1200], want[1400];

    (void)state;
    path_in(p, sizeof(p), data_dir, "misspelled.json");
    settings_init(&s);
    assert_int_equal(settings_apply_file(&s, p, &err), -EINVAL);
    snprintf(want, sizeof(want),
             "%s:4:5: network.allowedDomain: unknown key 'allowedDomain' (did you mean "
             "'allowedDomains'?)",
             p);
    assert_string_equal(err.msg, want);
    assert_int_equal(s.network.allowed_domains.n, 0); /* nothing half-applied */
    settings_free(&s);
}

struct error_case {
    const char *json;
    const char *msg;
};

static const struct error_case error_cases[] = {
    /* syntax, reported where jansson stopped, at the start of the token */
    {"{\"network\": {\"mode\": \"enforce\",}}", "t.json:1:32: string or '}' expected near '}'"},
    {"{\n  \"a\": tru\n}", "t.json:2:8: invalid token near 'tru'"},
    {"", "t.json:1:1: unexpected token near end of file"},
    {"{\"network\": {}} x", "t.json:1:17: end of file expected near 'x'"},
    /* duplicate keys could hide a rule */
    {"{\"network\": {\"deniedDomains\": [\"a.com\"], \"deniedDomains\": []}}",
     "t.json:1:42: duplicate object key near '\"deniedDomains\"'"},
    /* top level */
    {"[\"github.com\"]", "t.json:1:1: (top level): expected an object, got an array"},
    {"  42", "t.json:1:3: (top level): expected an object, got an integer"},
    /* unknown keys, with and without a suggestion */
    {"{\"netwrok\": {}}",
     "t.json:1:2: netwrok: unknown key 'netwrok' (did you mean 'network'?)"},
    {"{\"frobnicate\": 1}", "t.json:1:2: frobnicate: unknown key 'frobnicate'"},
    {"{\"network\": {\"AllowedDomains\": []}}",
     "t.json:1:14: network.AllowedDomains: unknown key 'AllowedDomains' (did you mean "
     "'allowedDomains'?)"},
    {"{\"filesystem\": {\"denyReads\": []}}",
     "t.json:1:17: filesystem.denyReads: unknown key 'denyReads' (did you mean 'denyRead'?)"},
    {"{\"git\": {\"safeDirectory\": []}}",
     "t.json:1:10: git.safeDirectory: unknown key 'safeDirectory' (did you mean "
     "'safeDirectories'?)"},
    {"{\"ripgrep\": {\"cmd\": \"rg\"}}", "t.json:1:14: ripgrep.cmd: unknown key 'cmd'"},
    {"{\"seccomp\": {\"bpfPath\": \"x\"}}", "t.json:1:14: seccomp.bpfPath: unknown key 'bpfPath'"},
    {"{\"a\\u0000b\": 1}", "t.json:1:2: NUL byte in object key not supported near "
                             "'\"a\\u0000b\"'"},
    {"{\"a\\u0001b\": 1}", "t.json:1:2: [\"a\\x01b\"]: unknown key 'a\\x01b'"},
    /* wrong types name both */
    {"{\"network\": {\"allowedDomains\": \"github.com\"}}",
     "t.json:1:32: network.allowedDomains: expected an array of strings, got a string"},
    {"{\"network\": {\"allowedDomains\": [\"a.com\", 7, \"b.com\"]}}",
     "t.json:1:42: network.allowedDomains[1]: expected a string, got an integer"},
    {"{\"network\": {\"allowLocalBinding\": \"yes\"}}",
     "t.json:1:35: network.allowLocalBinding: expected a boolean, got a string"},
    {"{\"network\": {\"strictAllowlist\": null}}",
     "t.json:1:33: network.strictAllowlist: expected a boolean, got null"},
    {"{\"network\": 1}", "t.json:1:13: network: expected an object, got an integer"},
    {"{\"filesystem\": []}", "t.json:1:16: filesystem: expected an object, got an array"},
    {"{\"filesystem\": {\"denyRead\": [\"~/.ssh\", \"\"]}}",
     "t.json:1:40: filesystem.denyRead[1]: must not be an empty string"},
    {"{\"filesystem\": {\"allowWrite\": [[\".\"]]}}",
     "t.json:1:32: filesystem.allowWrite[0]: expected a path string or {\"path\": ..., "
     "\"literal\": true}, got an array"},
    {"{\"filesystem\": {\"denyRead\": [{\"path\": \"a\", \"glob\": true}]}}",
     "t.json:1:52: filesystem.denyRead[0].glob: unknown key in a path entry (only \"path\" "
     "and \"literal\")"},
    {"{\"javaAgentJarPath\": \"agent.jar\"}",
     "t.json:1:22: javaAgentJarPath: must be an absolute path, got \"agent.jar\""},
    {"{\"javaAgentJarPath\": \"/my jars/a.jar\"}",
     "t.json:1:22: javaAgentJarPath: \"/my jars/a.jar\" contains whitespace, which "
     "JAVA_TOOL_OPTIONS cannot carry; move the jar to a path without spaces"},
    {"{\"filesystem\": {\"denyRead\": [{\"literal\": true}]}}",
     "t.json:1:30: filesystem.denyRead[0]: a path entry written as an object needs \"path\""},
    {"{\"filesystem\": {\"denyRead\": [{\"path\": \"\"}]}}",
     "t.json:1:39: filesystem.denyRead[0].path: must not be an empty string"},
    {"{\"filesystem\": {\"denyRead\": [{\"path\": \"a\", \"literal\": 1}]}}",
     "t.json:1:55: filesystem.denyRead[0].literal: expected a boolean, got an integer"},
    {"{\"ignoreViolations\": {\"npm test\": \"/tmp\"}}",
     "t.json:1:35: ignoreViolations[\"npm test\"]: expected an array of strings, got a string"},
    {"{\"ignoreViolations\": {\"*\": [1]}}",
     "t.json:1:29: ignoreViolations[\"*\"][0]: expected a string, got an integer"},
    {"{\"ignoreViolations\": []}",
     "t.json:1:22: ignoreViolations: expected an object of command: [patterns], got an array"},
    {"{\"network\": {\"deniedDomainReasons\": {\"evil.com\": \"\"}}}",
     "t.json:1:50: network.deniedDomainReasons[\"evil.com\"]: must not be an empty string"},
    {"{\"network\": {\"deniedDomainReasons\": {\"evil.com\": true}}}",
     "t.json:1:50: network.deniedDomainReasons[\"evil.com\"]: expected a string, got a boolean"},
    {"{\"network\": {\"mode\": \"audit\"}}",
     "t.json:1:22: network.mode: expected \"enforce\" or \"report\", got \"audit\""},
    {"{\"network\": {\"mode\": 1}}",
     "t.json:1:22: network.mode: expected \"enforce\" or \"report\", got an integer"},
    {"{\"bwrapPath\": \"bwrap\"}", "t.json:1:15: bwrapPath: must be an absolute path, got \"bwrap\""},
    {"{\"windows\": true}", "t.json:1:13: windows: expected an object, got a boolean"},
    {"{\"socatPath\": 1}", "t.json:1:15: socatPath: expected a string, got an integer"},
    {"{\"ripgrep\": {\"args\": [\"-n\", false]}}",
     "t.json:1:29: ripgrep.args[1]: expected a string, got a boolean"},
    {"{\"allowPty\": \"true\"}", "t.json:1:14: allowPty: expected a boolean, got a string"},
    /* integers: type and range, the range in the message */
    {"{\"network\": {\"httpProxyPort\": 0}}",
     "t.json:1:31: network.httpProxyPort: must be in 1..65535, got 0"},
    {"{\"network\": {\"socksProxyPort\": 65536}}",
     "t.json:1:32: network.socksProxyPort: must be in 1..65535, got 65536"},
    {"{\"network\": {\"httpProxyPort\": -1}}",
     "t.json:1:31: network.httpProxyPort: must be in 1..65535, got -1"},
    {"{\"network\": {\"httpProxyPort\": \"3128\"}}",
     "t.json:1:31: network.httpProxyPort: expected an integer in 1..65535, got a string"},
    {"{\"network\": {\"httpProxyPort\": 3128.5}}",
     "t.json:1:31: network.httpProxyPort: expected an integer in 1..65535, got 3128.5"},
    {"{\"mandatoryDenySearchDepth\": 11}",
     "t.json:1:30: mandatoryDenySearchDepth: must be in 1..10, got 11"},
    {"{\"mandatoryDenySearchDepth\": 0}",
     "t.json:1:30: mandatoryDenySearchDepth: must be in 1..10, got 0"},
    {"{\"mandatoryDenySearchDepth\": 3.0}",
     "t.json:1:30: mandatoryDenySearchDepth: expected an integer in 1..10, got 3"},
    {"{\"mandatoryDenySearchDepth\": 99999999999}",
     "t.json:1:30: mandatoryDenySearchDepth: must be in 1..10, got 99999999999"},
    /* refused rather than silently dropped */
    /* network.tlsTerminate (issue 23): srt's schema */
    {"{\"network\": {\"tlsTerminate\": []}}",
     "t.json:1:30: network.tlsTerminate: expected an object, got an array"},
    {"{\"network\": {\"tlsTerminate\": {\"caCertPath\": \"/ca.pem\"}}}",
     "t.json:1:14: network.tlsTerminate: caCertPath and caKeyPath come together: caCertPath "
     "without caKeyPath"},
    {"{\"network\": {\"tlsTerminate\": {\"caKeyPath\": \"/ca.key\"}}}",
     "t.json:1:14: network.tlsTerminate: caCertPath and caKeyPath come together: caKeyPath "
     "without caCertPath"},
    {"{\"network\": {\"tlsTerminate\": {\"caCertPath\": \"\", \"caKeyPath\": \"/k\"}}}",
     "t.json:1:45: network.tlsTerminate.caCertPath: expected a path, got an empty string or a "
     "NUL byte"},
    {"{\"network\": {\"tlsTerminate\": {\"caCertPath\": 1, \"caKeyPath\": \"/k\"}}}",
     "t.json:1:45: network.tlsTerminate.caCertPath: expected a path string, got an integer"},
    {"{\"network\": {\"tlsTerminate\": {\"maxTunnels\": 0}}}",
     "t.json:1:45: network.tlsTerminate.maxTunnels: must be in 1..65536, got 0"},
    {"{\"network\": {\"tlsTerminate\": {\"maxTunnels\": 65537}}}",
     "t.json:1:45: network.tlsTerminate.maxTunnels: must be in 1..65536, got 65537"},
    {"{\"network\": {\"tlsTerminate\": {\"handshakeTimeoutMs\": 99}}}",
     "t.json:1:53: network.tlsTerminate.handshakeTimeoutMs: must be in 100..600000, got 99"},
    {"{\"network\": {\"tlsTerminate\": {\"handshakeTimeoutMs\": 600001}}}",
     "t.json:1:53: network.tlsTerminate.handshakeTimeoutMs: must be in 100..600000, got 600001"},
    {"{\"network\": {\"tlsTerminate\": {\"scope\": \"some\"}}}",
     "t.json:1:40: network.tlsTerminate.scope: expected \"all\" or \"needed\""},
    {"{\"network\": {\"tlsTerminate\": {\"excludeDomains\": \"a.com\"}}}",
     "t.json:1:49: network.tlsTerminate.excludeDomains: expected an array of strings, got a "
     "string"},
    {"{\"network\": {\"tlsTerminate\": {\"extraCaCertPaths\": [\"\"]}}}",
     "t.json:1:52: network.tlsTerminate.extraCaCertPaths[0]: must not be an empty string"},
    {"{\"network\": {\"tlsTerminate\": {\"mode\": 1}}}",
     "t.json:1:31: network.tlsTerminate.mode: unknown key 'mode'"},
    /* network.mitmProxy (srt 0.0.83): both keys, at least one domain */
    {"{\"network\": {\"mitmProxy\": {\"socketPath\": \"/x\"}}}",
     "t.json:1:14: network.mitmProxy: domains is required and holds at least one pattern "
     "(hosts sent to the external proxy)"},
    {"{\"network\": {\"mitmProxy\": {\"socketPath\": \"/x\", \"domains\": []}}}",
     "t.json:1:14: network.mitmProxy: domains is required and holds at least one pattern "
     "(hosts sent to the external proxy)"},
    {"{\"network\": {\"mitmProxy\": {\"domains\": [\"a.com\"]}}}",
     "t.json:1:14: network.mitmProxy: socketPath is required (the external proxy's Unix "
     "socket)"},
    {"{\"network\": {\"mitmProxy\": \"/x\"}}",
     "t.json:1:27: network.mitmProxy: expected an object, got a string"},
    {"{\"network\": {\"mitmProxy\": {\"socketPath\": \"\", \"domains\": [\"a.com\"]}}}",
     "t.json:1:42: network.mitmProxy.socketPath: expected a path, got an empty string or a NUL "
     "byte"},
    {"{\"network\": {\"mitmProxy\": {\"socketPath\": 3, \"domains\": [\"a.com\"]}}}",
     "t.json:1:42: network.mitmProxy.socketPath: expected a path string, got an integer"},
    {"{\"network\": {\"mitmProxy\": {\"socketPath\": \"/x\", \"domains\": [\"\"]}}}",
     "t.json:1:60: network.mitmProxy.domains[0]: must not be an empty string"},
    {"{\"network\": {\"mitmProxy\": {\"socketPath\": \"/x\", \"domains\": \"a.com\"}}}",
     "t.json:1:59: network.mitmProxy.domains: expected an array of strings, got a string"},
    {"{\"network\": {\"mitmProxy\": {\"socketPath\": \"/x\", \"domains\": [\"a.com\"], "
     "\"http\": 1}}}",
     "t.json:1:70: network.mitmProxy.http: unknown key 'http'"},
    {"{\"network\": {\"mitmProxy\": {\"socketPath\": \"/"
     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
     "aaaaaaaaaaaaaaaaa\", \"domains\": [\"a.com\"]}}}",
     "t.json:1:42: network.mitmProxy.socketPath: the socket path '/"
     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
     "aaaaaaaaaaaaaaaaa' is 109 bytes long; a Unix socket path holds at most 107"},
    {"{\"network\": {\"parentProxy\": \"http://p:3128\"}}",
     "t.json:1:29: network.parentProxy: expected an object {\"http\", \"https\", "
     "\"noProxy\"}, got a string"},
    {"{\"network\": {\"parentProxy\": {\"https\": \"https://p:3128\"}}}",
     "t.json:1:39: network.parentProxy.https: https:// parent proxies (TLS to the proxy) are "
     "not supported; give its plain http:// address"},
    {"{\"network\": {\"parentProxy\": {\"http\": \"http://p:99999\"}}}",
     "t.json:1:38: network.parentProxy.http: bad port in the proxy URL (1-65535)"},
    {"{\"network\": {\"parentProxy\": {\"http\": \"http://p:1\", \"noProxy\": \"a.com,/8\"}}}",
     "t.json:1:63: network.parentProxy.noProxy: bad noProxy entry: expected a host name "
     "(.suffix or *.suffix for subdomains), an IP address, a CIDR, or *"},
    {"{\"network\": {\"parentProxy\": {\"socks\": \"x\"}}}",
     "t.json:1:30: network.parentProxy.socks: unknown key 'socks' (parentProxy has http, https "
     "and noProxy)"},
    {"{\"network\": {\"filterRequest\": true}}",
     "t.json:1:14: network.filterRequest: 'network.filterRequest' is not supported by sluice: "
     "it is a callback of the JavaScript library, which a settings file cannot carry; decide "
     "per request with an ask handler (sluice run --ask exec:PROGRAM or socket:PATH)"},
    /* credentials (issue 24): srt's schema, each mistake where it is written */
    {"{\"credentials\": []}", "t.json:1:17: credentials: expected an object, got an array"},
    {"{\"credentials\": {\"awsPairs\": {}}}",
     "t.json:1:30: credentials.awsPairs: expected an array of pairs {accessKeyIdVar, "
     "secretAccessKeyVar, sessionTokenVar?}, got an object"},
    {"{\"credentials\": {\"awsPairs\": [{\"accessKeyIdVar\": \"K\"}]}}",
     "t.json:1:31: credentials.awsPairs[0]: a pair needs accessKeyIdVar and secretAccessKeyVar"},
    {"{\"credentials\": {\"awsPairs\": [{\"accessKeyIdVar\": \"K\", \"secretAccessKeyVar\": "
     "\"K\"}]}}",
     "t.json:1:77: credentials.awsPairs[0].secretAccessKeyVar: 'K' is already the pair's "
     "accessKeyIdVar"},
    {"{\"credentials\": {\"awsPairs\": [{\"accessKeyIdVar\": \"K-1\"}]}}",
     "t.json:1:50: credentials.awsPairs[0].accessKeyIdVar: 'K-1': not a variable name "
     "([A-Za-z_][A-Za-z0-9_]*)"},
    {"{\"credentials\": {\"awsPairs\": [{\"region\": \"x\"}]}}",
     "t.json:1:32: credentials.awsPairs[0].region: unknown key 'region' (a pair has "
     "accessKeyIdVar, secretAccessKeyVar and optionally sessionTokenVar and injectHosts)"},
    {"{\"credentials\": {\"awsPairs\": [{\"accessKeyIdVar\": \"K\", \"secretAccessKeyVar\": "
     "\"S\", \"injectHosts\": []}]}}",
     "t.json:1:97: credentials.awsPairs[0].injectHosts: must not be empty: a masked credential "
     "needs a host to be sent to (leave the member out for the hosts of network.allowedDomains)"},
    {"{\"credentials\": {\"awsPairs\": [{\"accessKeyIdVar\": \"K\", \"secretAccessKeyVar\": "
     "\"S\"}, {\"accessKeyIdVar\": \"S\", \"secretAccessKeyVar\": \"T\"}]}}",
     "t.json:1:83: credentials.awsPairs[1]: 'S' is already in pair 0"},
    /* credentials.headers (sluice proxy as a gateway): every refusal */
    {"{\"credentials\": {\"headers\": {}}}",
     "t.json:1:29: credentials.headers: expected an array of entries (an entry has hosts, name and value), got an object"},
    {"{\"credentials\": {\"headers\": [1]}}",
     "t.json:1:30: credentials.headers[0]: expected an entry object (an entry has hosts, name and value), got an integer"},
    {"{\"credentials\": {\"headers\": [{\"host\": [\"a.com\"]}]}}",
     "t.json:1:31: credentials.headers[0].host: unknown key 'host' (an entry has hosts, name and value)"},
    {"{\"credentials\": {\"headers\": [{\"name\": \"X-A\", \"value\": {\"env\": \"V\"}}]}}",
     "t.json:1:30: credentials.headers[0]: an entry needs hosts (an entry has hosts, name and value)"},
    {"{\"credentials\": {\"headers\": [{\"hosts\": [\"a.com\"], \"value\": {\"env\": \"V\"}}]}}",
     "t.json:1:30: credentials.headers[0]: an entry needs name (an entry has hosts, name and value)"},
    {"{\"credentials\": {\"headers\": [{\"hosts\": [\"a.com\"], \"name\": \"X-A\"}]}}",
     "t.json:1:30: credentials.headers[0]: an entry needs value (an entry has hosts, name and value)"},
    {"{\"credentials\": {\"headers\": [{\"hosts\": [\"a.com\"], \"name\": \"X A\", \"value\": {\"env\": \"V\"}}]}}",
     "t.json:1:59: credentials.headers[0].name: 'X A': not an HTTP header name (a token of at most 64 bytes)"},
    {"{\"credentials\": {\"headers\": [{\"hosts\": [\"a.com\"], \"name\": \"host\", \"value\": {\"env\": \"V\"}}]}}",
     "t.json:1:59: credentials.headers[0].name: 'host': the proxy frames or strips this header itself; it cannot be injected"},
    {"{\"credentials\": {\"headers\": [{\"hosts\": [\"a.com\"], \"name\": \"X-A\", \"value\": \"V\"}]}}",
     "t.json:1:75: credentials.headers[0].value: expected an object (a value is {\"file\": PATH} or {\"env\": NAME} or {\"exec\": [PROGRAM, ARG...], \"ttl\": SECONDS}, with optionally prefix, and timeout with exec), got a string"},
    {"{\"credentials\": {\"headers\": [{\"hosts\": [\"a.com\"], \"name\": \"X-A\", \"value\": {\"cmd\": \"x\"}}]}}",
     "t.json:1:76: credentials.headers[0].value.cmd: unknown key 'cmd' (a value is {\"file\": PATH} or {\"env\": NAME} or {\"exec\": [PROGRAM, ARG...], \"ttl\": SECONDS}, with optionally prefix, and timeout with exec)"},
    {"{\"credentials\": {\"headers\": [{\"hosts\": [\"a.com\"], \"name\": \"X-A\", \"value\": {\"env\": \"V\", \"file\": \"/f\"}}]}}",
     "t.json:1:75: credentials.headers[0].value: needs exactly one of file, env and exec (a value is {\"file\": PATH} or {\"env\": NAME} or {\"exec\": [PROGRAM, ARG...], \"ttl\": SECONDS}, with optionally prefix, and timeout with exec)"},
    {"{\"credentials\": {\"headers\": [{\"hosts\": [\"a.com\"], \"name\": \"X-A\", \"value\": {\"prefix\": \"B \"}}]}}",
     "t.json:1:75: credentials.headers[0].value: needs exactly one of file, env and exec (a value is {\"file\": PATH} or {\"env\": NAME} or {\"exec\": [PROGRAM, ARG...], \"ttl\": SECONDS}, with optionally prefix, and timeout with exec)"},
    {"{\"credentials\": {\"headers\": [{\"hosts\": [\"a.com\"], \"name\": \"X-A\", \"value\": {\"file\": \"tok\"}}]}}",
     "t.json:1:76: credentials.headers[0].value.file: must be an absolute path or start with ~/"},
    {"{\"credentials\": {\"headers\": [{\"hosts\": [\"a.com\"], \"name\": \"X-A\", \"value\": {\"env\": \"A-B\"}}]}}",
     "t.json:1:76: credentials.headers[0].value.env: not a variable name ([A-Za-z_][A-Za-z0-9_]*)"},
    {"{\"credentials\": {\"headers\": [{\"hosts\": [\"a.com\"], \"name\": \"X-A\", \"value\": {\"exec\": [], \"ttl\": 5}}]}}",
     "t.json:1:84: credentials.headers[0].value.exec: expected an array of 1 to 64 strings [PROGRAM, ARG...], got an empty array"},
    {"{\"credentials\": {\"headers\": [{\"hosts\": [\"a.com\"], \"name\": \"X-A\", \"value\": {\"exec\": [\"tok\"], \"ttl\": 5}}]}}",
     "t.json:1:85: credentials.headers[0].value.exec[0]: the program: an absolute path (no shell, no PATH search)"},
    {"{\"credentials\": {\"headers\": [{\"hosts\": [\"a.com\"], \"name\": \"X-A\", \"value\": {\"exec\": [\"/t\", 1], \"ttl\": 5}}]}}",
     "t.json:1:91: credentials.headers[0].value.exec[1]: expected a string without control characters"},
    {"{\"credentials\": {\"headers\": [{\"hosts\": [\"a.com\"], \"name\": \"X-A\", \"value\": {\"exec\": [\"/t\"]}}]}}",
     "t.json:1:75: credentials.headers[0].value: exec needs ttl: how many seconds its output may be used"},
    {"{\"credentials\": {\"headers\": [{\"hosts\": [\"a.com\"], \"name\": \"X-A\", \"value\": {\"file\": \"/f\", \"ttl\": 5}}]}}",
     "t.json:1:90: credentials.headers[0].value.ttl: applies with exec only (a file is read again on reload)"},
    {"{\"credentials\": {\"headers\": [{\"hosts\": [\"a.com\"], \"name\": \"X-A\", \"value\": {\"env\": \"V\", \"timeout\": 5}}]}}",
     "t.json:1:88: credentials.headers[0].value.timeout: applies with exec only"},
    {"{\"credentials\": {\"headers\": [{\"hosts\": [\"a.com\"], \"name\": \"X-A\", \"value\": {\"exec\": [\"/t\"], \"ttl\": 0}}]}}",
     "t.json:1:99: credentials.headers[0].value.ttl: must be 1 to 86400 seconds, got 0"},
    {"{\"credentials\": {\"headers\": [{\"hosts\": [\"a.com\"], \"name\": \"X-A\", \"value\": {\"exec\": [\"/t\"], \"ttl\": 5, \"timeout\": 0.01}}]}}",
     "t.json:1:113: credentials.headers[0].value.timeout: must be 0.1 to 300 seconds, got 0.01"},
    {"{\"credentials\": {\"headers\": [{\"hosts\": [\"a.com\"], \"name\": \"X-A\", \"value\": {\"env\": \"V\", \"prefix\": \"B\\n\"}}]}}",
     "t.json:1:98: credentials.headers[0].value.prefix: expected a string of at most 256 printable ASCII bytes"},
    {"{\"credentials\": {\"headers\": [{\"hosts\": [], \"name\": \"X-A\", \"value\": {\"env\": \"V\"}}]}}",
     "t.json:1:40: credentials.headers[0].hosts: must not be empty"},
    {"{\"credentials\": {\"headers\": [{\"hosts\": [\"*.com\"], \"name\": \"X-A\", \"value\": {\"env\": \"V\"}}]}}",
     "t.json:1:41: credentials.headers[0].hosts[0]: '*.com': wildcard over a public suffix (it would match every site under it)"},
    {"{\"credentials\": {\"sigv4\": {\"streaming\": \"allow\"}}}",
     "t.json:1:41: credentials.sigv4.streaming: expected \"deny\" or \"passthrough\""},
    {"{\"credentials\": {\"sigv4\": {\"chunked\": \"deny\"}}}",
     "t.json:1:28: credentials.sigv4.chunked: unknown key 'chunked' (sigv4 has streaming, "
     "presigned, sigv4a)"},
    {"{\"credentials\": {\"envVars\": [{\"name\": \"T\"}]}}",
     "t.json:1:30: credentials.envVars[0]: an entry needs a mode: \"deny\" or \"mask\""},
    {"{\"credentials\": {\"envVars\": [{\"name\": \"T\", \"mode\": \"hide\"}]}}",
     "t.json:1:52: credentials.envVars[0].mode: expected \"deny\" or \"mask\", got 'hide'"},
    {"{\"credentials\": {\"envVars\": [{\"path\": \"/x\", \"mode\": \"mask\"}]}}",
     "t.json:1:31: credentials.envVars[0].path: unknown key 'path' (an envVars entry names "
     "its variable: name)"},
    {"{\"credentials\": {\"envVars\": [{\"name\": \"A-B\", \"mode\": \"mask\"}]}}",
     "t.json:1:39: credentials.envVars[0].name: 'A-B': not a variable name "
     "([A-Za-z_][A-Za-z0-9_]*)"},
    {"{\"credentials\": {\"envVars\": [{\"name\": \"T\", \"mode\": \"mask\", \"injectHosts\": "
     "[]}]}}",
     "t.json:1:75: credentials.envVars[0].injectHosts: must not be empty: a masked "
     "credential needs a host to be sent to (leave the member out for the hosts of "
     "network.allowedDomains)"},
    {"{\"credentials\": {\"envVars\": [{\"name\": \"T\", \"mode\": \"mask\", \"injectHosts\": "
     "[\"exa mple.com\"]}]}}",
     "t.json:1:76: credentials.envVars[0].injectHosts[0]: 'exa mple.com': whitespace or "
     "control character in pattern"},
    {"{\"credentials\": {\"envVars\": [{\"name\": \"T\", \"mode\": \"deny\", \"injectHosts\": "
     "[\"a.com\"]}]}}",
     "t.json:1:60: credentials.envVars[0].injectHosts: applies to mode \"mask\" only (a "
     "denied credential is never sent)"},
    {"{\"credentials\": {\"envVars\": [{\"name\": \"T\", \"mode\": \"mask\", \"maskDuplicates\": "
     "true}]}}",
     "t.json:1:60: credentials.envVars[0].maskDuplicates: applies to files entries only"},
    {"{\"credentials\": {\"files\": [{\"path\": \"rel/x\", \"mode\": \"mask\"}]}}",
     "t.json:1:37: credentials.files[0].path: 'rel/x': must be an absolute path or start "
     "with ~/"},
    {"{\"credentials\": {\"files\": [{\"path\": \"/x\", \"mode\": \"mask\", \"extract\": "
     "\"tok\"}]}}",
     "t.json:1:70: credentials.files[0].extract: 'tok': needs a group: group 1 is the "
     "secret"},
    {"{\"credentials\": {\"files\": [{\"path\": \"/x\", \"mode\": \"mask\", \"extract\": \"(\"}]}}",
     "t.json:1:70: credentials.files[0].extract: '(': not a POSIX extended regular "
     "expression: Unmatched ( or \\("},
    {"{\"credentials\": {\"files\": [{\"path\": \"/x\", \"mode\": \"mask\", \"onExtractNoMatch\": "
     "\"warn\"}]}}",
     "t.json:1:59: credentials.files[0].onExtractNoMatch: applies with extract only"},
    {"{\"credentials\": {\"files\": [{\"path\": \"/x\", \"mode\": \"mask\", \"decode\": "
     "\"pem\"}]}}",
     "t.json:1:69: credentials.files[0].decode: expected \"jwt\", got 'pem'"},
    {"{\"credentials\": {\"files\": [{\"path\": \"/x\", \"mode\": \"mask\", \"maskClaims\": "
     "[\"sub\"]}]}}",
     "t.json:1:59: credentials.files[0].maskClaims: applies with \"decode\": \"jwt\" only"},
    {"{\"credentials\": {\"envVars\": [{\"name\": \"T\", \"mode\": \"mask\"}, {\"name\": \"T\", "
     "\"mode\": \"deny\"}]}}",
     "t.json:1:61: credentials.envVars[1]: 'T' is already entry 0"},
    {"{\"credentials\": {\"envVars\": [{\"name\": \"T\", \"mode\": \"mask\", \"secret\": 1}]}}",
     "t.json:1:60: credentials.envVars[0].secret: unknown key 'secret' (an entry has name "
     "or path, mode, and optionally extract, onExtractNoMatch, decode, maskClaims, "
     "maskDuplicates, injectHosts, require, requireHeader, value)"},
    /* value: a helper program (issue 24 item 4) */
#define EV "{\"credentials\": {\"envVars\": [{\"name\": \"T\", \"mode\": \"mask\", \"value\": "
    {EV "{\"exec\": [\"/bin/tok\"]}}]}}",
     "t.json:1:69: credentials.envVars[0].value: exec needs ttl: how many seconds its output may "
     "be used"},
    {EV "{\"exec\": [\"tok\"], \"ttl\": 60}}]}}",
     "t.json:1:79: credentials.envVars[0].value.exec[0]: the program: an absolute path (no "
     "shell, no PATH search)"},
    {EV "{\"file\": \"/x\"}}]}}",
     "t.json:1:70: credentials.envVars[0].value.file: an envVars entry's value is its variable "
     "on the host, or with value a helper program's output (exec); file and env are "
     "credentials.headers' sources"},
    {EV "{\"exec\": [\"/bin/tok\"], \"ttl\": 60, \"prefix\": \"Bearer \"}}]}}",
     "t.json:1:103: credentials.envVars[0].value.prefix: applies to credentials.headers only "
     "(the command writes the header with the placeholder itself)"},
    {EV "{\"ttl\": 60}}]}}",
     "t.json:1:69: credentials.envVars[0].value: needs exec: [PROGRAM, ARG...], the helper that "
     "prints the value"},
    {EV "{\"exec\": [\"/bin/tok\"], \"ttl\": 0}}]}}",
     "t.json:1:99: credentials.envVars[0].value.ttl: must be 1 to 86400 seconds, got 0"},
    {EV "\"/bin/tok\"}]}}",
     "t.json:1:69: credentials.envVars[0].value: expected an object {\"exec\": [PROGRAM, "
     "ARG...], \"ttl\": SECONDS, \"timeout\": SECONDS}, got a string"},
    {"{\"credentials\": {\"envVars\": [{\"name\": \"T\", \"mode\": \"deny\", \"value\": "
     "{\"exec\": [\"/bin/tok\"], \"ttl\": 60}}]}}",
     "t.json:1:60: credentials.envVars[0].value: applies to mode \"mask\" only (a denied "
     "variable has no value to fetch)"},
    {EV "{\"exec\": [\"/bin/tok\"], \"ttl\": 60}, \"extract\": \"t=(.*)\"}]}}",
     "t.json:1:104: credentials.envVars[0].extract: applies to a value read from the host's "
     "variable; with value the helper prints the secret itself"},
    {"{\"credentials\": {\"files\": [{\"path\": \"/x\", \"mode\": \"mask\", \"value\": "
     "{\"exec\": [\"/bin/tok\"], \"ttl\": 60}}]}}",
     "t.json:1:59: credentials.files[0].value: applies to envVars entries only (a masked "
     "file's fake copy is made once, from the file)"},
#undef EV
    /* require (issue 24 item 4) */
    {"{\"credentials\": {\"envVars\": [{\"name\": \"T\", \"mode\": \"mask\", \"require\": "
     "true}]}}",
     "t.json:1:60: credentials.envVars[0].require: needs explicit injectHosts (with the "
     "default, every host allowedDomains allows would need the placeholder)"},
    {"{\"credentials\": {\"envVars\": [{\"name\": \"T\", \"mode\": \"mask\", \"injectHosts\": "
     "[\"a.com\"], \"requireHeader\": \"X-Key\"}]}}",
     "t.json:1:86: credentials.envVars[0].requireHeader: applies with \"require\": true only"},
    {"{\"credentials\": {\"envVars\": [{\"name\": \"T\", \"mode\": \"deny\", \"require\": "
     "true}]}}",
     "t.json:1:60: credentials.envVars[0].require: applies to mode \"mask\" only"},
    {"{\"credentials\": {\"envVars\": [{\"name\": \"T\", \"mode\": \"mask\", \"injectHosts\": "
     "[\"a.com\"], \"require\": \"yes\"}]}}",
     "t.json:1:97: credentials.envVars[0].require: expected a boolean, got a string"},
    {"{\"credentials\": {\"envVars\": [{\"name\": \"T\", \"mode\": \"mask\", \"injectHosts\": "
     "[\"a.com\"], \"require\": true, \"requireHeader\": \"X Key\"}]}}",
     "t.json:1:120: credentials.envVars[0].requireHeader: 'X Key': not an HTTP header name (a "
     "token of at most 64 bytes)"},
    /* dnsServers */
    {"{\"network\": {\"dnsServers\": [\"1.1.1.1\", \"1.1.1\"]}}",
     "t.json:1:40: network.dnsServers[1]: invalid DNS server \"1.1.1\" (expected IP, IP:PORT, "
     "[IPv6]:PORT or IPv6, port 1..65535)"},
    {"{\"network\": {\"dnsServers\": [\"1.1.1.1:0\"]}}",
     "t.json:1:29: network.dnsServers[0]: invalid DNS server \"1.1.1.1:0\" (expected IP, "
     "IP:PORT, [IPv6]:PORT or IPv6, port 1..65535)"},
    {"{\"network\": {\"dnsServers\": [\"dns.google\"]}}",
     "t.json:1:29: network.dnsServers[0]: invalid DNS server \"dns.google\" (expected IP, "
     "IP:PORT, [IPv6]:PORT or IPv6, port 1..65535)"},
    /* publish and hostPorts (issue 26) */
    {"{\"network\": {\"publish\": [\"0:80\"]}}", "t.json:1:26: network.publish[0]: invalid published port \"0:80\" (HOST_PORT"
     " must be a port number 1..65535)"},
    {"{\"network\": {\"publish\": [\"8080:65536\"]}}", "t.json:1:26: network.publish[0]: invalid published port \"8080:65536\""
     " (SANDBOX_PORT must be a port number 1..65535)"},
    {"{\"network\": {\"publish\": [\"8080\"]}}", "t.json:1:26: network.publish[0]: invalid published port \"8080\" (expected"
     " [HOST_ADDR:]HOST_PORT:SANDBOX_PORT)"},
    {"{\"network\": {\"publish\": [\"localhost:8080:80\"]}}", "t.json:1:26: network.publish[0]: invalid published port"
     " \"localhost:8080:80\" (HOST_ADDR must be an IPv4 address or a bracketed IPv6 address ([::1]))"},
    {"{\"network\": {\"publish\": [\"::1:8080:80\"]}}", "t.json:1:26: network.publish[0]: invalid published port \"::1:8080:80\""
     " (HOST_ADDR must be an IPv4 address or a bracketed IPv6 address ([::1]))"},
    {"{\"network\": {\"publish\": [\"08080:80\"]}}", "t.json:1:26: network.publish[0]: invalid published port \"08080:80\""
     " (HOST_PORT must be a port number 1..65535)"},
    {"{\"network\": {\"publish\": [\"8080:3128\"]}}", "t.json:1:26: network.publish[0]: invalid published port \"8080:3128\""
     " (SANDBOX_PORT is one of sluice's own listeners in the sandbox (3128, 1080, 53))"},
    {"{\"network\": {\"publish\": [\"8080:80\", \"[::1]:8080:81\"]}}", "t.json:1:37: network.publish[1]: invalid published port \"[::1]:8080:81\""
     " (host port 8080 is already published by entry 0)"},
    {"{\"network\": {\"publish\": [\"\"]}}", "t.json:1:26: network.publish[0]: must not be an empty string"},
    {"{\"network\": {\"hostPorts\": [0]}}", "t.json:1:28: network.hostPorts[0]: must be in 1..65535, got 0"},
    {"{\"network\": {\"hostPorts\": [\"5432\"]}}", "t.json:1:28: network.hostPorts[0]: expected an integer in 1..65535, got a"
     " string"},
    {"{\"network\": {\"hostPorts\": [5432, 1080]}}", "t.json:1:34: network.hostPorts[1]: port 1080 is one of sluice's own"
     " listeners in the sandbox (3128, 1080, 53); it cannot be a host port"},
    {"{\"network\": {\"hostPorts\": [5432, 5432]}}", "t.json:1:34: network.hostPorts[1]: port 5432 is listed twice"},
    {"{\"network\": {\"hostPorts\": 5432}}", "t.json:1:27: network.hostPorts: expected an array of port numbers, got an"
     " integer"},
    /* multi-line, multi-byte, tabs: columns count characters, a tab is one */
    {"{\n\t\"network\": {\n\t\t\"mode\": 3\n\t}\n}",
     "t.json:3:11: network.mode: expected \"enforce\" or \"report\", got an integer"},
    {"{\n  \"network\": {\n    \"deniedDomains\": [\"\xC3\xA9x.com\", \"b.com\"],\n"
     "    \"allowedDomains\": [\n      \"ok.com\",\n      {}\n    ]\n  }\n}\n",
     "t.json:6:7: network.allowedDomains[1]: expected a string, got an object"},
    {"{\"network\": {\"deniedDomainReasons\": {\"\xC3\xA9.com\": \"x\", \"b\\u00e9.com\": 0}}}",
     "t.json:1:67: network.deniedDomainReasons[\"b\xC3\xA9.com\"]: expected a string, got an "
     "integer"},
    /* network.requestRules (issue 23): each mistake where it is written */
    {"{\"network\": {\"requestRules\": {}}}",
     "t.json:1:30: network.requestRules: expected an array of rules (a rule has host, method, "
     "path and action), got an object"},
    {"{\"network\": {\"requestRules\": [\"github.com\"]}}",
     "t.json:1:31: network.requestRules[0]: expected a rule object (a rule has host, method, "
     "path and action), got a string"},
    {"{\"network\": {\"requestRules\": [{\"host\": \"a.com\", \"action\": \"allow\", "
     "\"verb\": \"GET\"}]}}",
     "t.json:1:68: network.requestRules[0].verb: unknown key 'verb' (a rule has host, method, "
     "path and action)"},
    {"{\"network\": {\"requestRules\": [{\"action\": \"allow\"}]}}",
     "t.json:1:31: network.requestRules[0]: a rule needs a host (a pattern as in "
     "allowedDomains)"},
    {"{\"network\": {\"requestRules\": [{\"host\": \"a.com\"}]}}",
     "t.json:1:31: network.requestRules[0]: a rule needs an action: \"allow\" or \"deny\""},
    {"{\"network\": {\"requestRules\": [{\"host\": \"a.com\", \"action\": \"permit\"}]}}",
     "t.json:1:59: network.requestRules[0].action: expected \"allow\" or \"deny\""},
    {"{\"network\": {\"requestRules\": [{\"host\": \"*.com\", \"action\": \"allow\"}]}}",
     "t.json:1:40: network.requestRules[0].host: '*.com': wildcard over a public suffix (it "
     "would match every site under it)"},
    {"{\"network\": {\"requestRules\": [{\"host\": \"*\", \"action\": \"deny\"}]}}",
     "t.json:1:40: network.requestRules[0].host: '*': a bare '*' would put every host under "
     "request rules (and refuse every tunnel); name the hosts"},
    {"{\"network\": {\"requestRules\": [{\"host\": \"https://a.com/x\", \"action\": "
     "\"deny\"}]}}",
     "t.json:1:40: network.requestRules[0].host: 'https://a.com/x': a URL is not a pattern; "
     "write the host only (e.g. example.com)"},
    {"{\"network\": {\"requestRules\": [{\"host\": 7, \"action\": \"deny\"}]}}",
     "t.json:1:40: network.requestRules[0].host: expected a host pattern string, got an "
     "integer"},
    {"{\"network\": {\"requestRules\": [{\"host\": \"a.com\", \"method\": \"G ET\", "
     "\"action\": \"deny\"}]}}",
     "t.json:1:59: network.requestRules[0].method: \"G ET\": is not a method (an RFC 9110 "
     "token: letters, digits and !#$%&'*+-.^_`|~)"},
    {"{\"network\": {\"requestRules\": [{\"host\": \"a.com\", \"method\": [\"GET\", "
     "\"post\"], \"action\": \"deny\"}]}}",
     "t.json:1:67: network.requestRules[0].method[1]: \"post\": methods are case-sensitive "
     "(RFC 9110): write it in upper case"},
    {"{\"network\": {\"requestRules\": [{\"host\": \"a.com\", \"method\": [], \"action\": "
     "\"deny\"}]}}",
     "t.json:1:59: network.requestRules[0].method: must not be an empty array (leave the "
     "member out for any method)"},
    {"{\"network\": {\"requestRules\": [{\"host\": \"a.com\", \"method\": 1, \"action\": "
     "\"deny\"}]}}",
     "t.json:1:59: network.requestRules[0].method: expected a method or an array of them, got "
     "an integer"},
    {"{\"network\": {\"requestRules\": [{\"host\": \"a.com\", \"method\": [null], \"action\": "
     "\"deny\"}]}}",
     "t.json:1:60: network.requestRules[0].method[0]: expected a method, got null"},
    {"{\"network\": {\"requestRules\": [{\"host\": \"a.com\", \"path\": [], \"action\": "
     "\"deny\"}]}}",
     "t.json:1:57: network.requestRules[0].path: must not be an empty array (leave the member "
     "out for any path glob)"},
    {"{\"network\": {\"requestRules\": [{\"host\": \"a.com\", \"path\": \"ORG/**\", "
     "\"action\": \"deny\"}]}}",
     "t.json:1:57: network.requestRules[0].path: \"ORG/**\": not an origin-form path (it must "
     "start with '/')"},
    {"{\"network\": {\"requestRules\": [{\"host\": \"a.com\", \"path\": [\"/ok\", \"/a*\"], "
     "\"action\": \"deny\"}]}}",
     "t.json:1:65: network.requestRules[0].path[1]: \"/a*\": '*' and '**' must be whole "
     "segments ('/a/*/b', '/a/**')"},
    {"{\"network\": {\"requestRules\": [{\"host\": \"a.com\", \"path\": \"/a/../..\", "
     "\"action\": \"deny\"}]}}",
     "t.json:1:57: network.requestRules[0].path: \"/a/../..\": '..' climbs above the root"},
    {"{\"network\": {\"requestRules\": [{\"host\": \"a.com\", \"path\": \"/a?x=1\", "
     "\"action\": \"deny\"}]}}",
     "t.json:1:57: network.requestRules[0].path: \"/a?x=1\": a '?' (the query is never "
     "matched)"},
    {"{\"network\": {\"requestRules\": [{\"host\": \"a.com\", \"path\": \"/a%2fb\", "
     "\"action\": \"deny\"}]}}",
     "t.json:1:57: network.requestRules[0].path: \"/a%2fb\": an encoded '/' (%2F)"},
    {"{\"network\": {\"requestRules\": [{\"host\": \"a.com\", \"path\": \"/caf\\u00e9\", "
     "\"action\": \"deny\"}]}}",
     "t.json:1:57: network.requestRules[0].path: \"/caf\xC3\xA9\": a control byte, space or "
     "non-ASCII byte (percent-encode it)"},
    {"{\"network\": {\"requestRules\": [{\"host\": \"a.com\", \"method\": \"\", \"action\": "
     "\"deny\"}]}}",
     "t.json:1:59: network.requestRules[0].method: \"\": a method must not be empty"},
    {"{\"network\": {\"requestRules\": [{\"host\": \"\", \"action\": \"deny\"}]}}",
     "t.json:1:40: network.requestRules[0].host: '': empty pattern"},
};

static void test_errors(void **state)
{
    size_t bad = 0;

    (void)state;
    for (size_t i = 0; i < sizeof(error_cases) / sizeof(error_cases[0]); i++) {
        struct settings s;
        struct settings_error err;
        int rc;

        settings_init(&s);
        rc = apply(&s, error_cases[i].json, &err);
        if (rc != -EINVAL || strcmp(err.msg, error_cases[i].msg) != 0) {
            print_error("case %zu: rc %d\n  got:  %s\n  want: %s\n", i, rc, err.msg,
                        error_cases[i].msg);
            bad++;
        }
        settings_free(&s);
    }
    assert_int_equal(bad, 0);
}

/* ------------------------------------------------------------------------ */
/* Notices                                                                   */

struct notice_case {
    const char *json;
    const char *notice; /* NULL: none */
};

static const struct notice_case notice_cases[] = {
    {"{\"network\": {\"allowUnixSockets\": [\"/run/docker.sock\"]}}",
     "t.json:1:14: network.allowUnixSockets: macOS only in srt; on Linux sluice blocks Unix "
     "sockets with seccomp unless allowAllUnixSockets"},
    {"{\"network\": {\"allowUnixSockets\": []}}", NULL},
    {"{\"network\": {\"allowMachLookup\": [\"com.apple.x\"]}}",
     "t.json:1:14: network.allowMachLookup: not applicable on Linux, ignored"},
    {"{\"enableWeakerNetworkIsolation\": true}",
     "t.json:1:2: enableWeakerNetworkIsolation: not applicable on Linux, ignored"},
    {"{\"enableWeakerNetworkIsolation\": false}", NULL},
    {"{\"allowAppleEvents\": true}", "t.json:1:2: allowAppleEvents: not applicable on Linux, ignored"},
    {"{\"allowPty\": true}", "t.json:1:2: allowPty: not applicable on Linux, ignored"},
    {"{\"windows\": {\"anything\": [1, {\"goes\": null}]}}",
     "t.json:1:2: windows: not applicable on Linux, ignored"},
    {"{\"ripgrep\": {\"command\": \"rg\", \"args\": [\"--hidden\"], \"argv0\": \"rg\"}}",
     "t.json:1:2: ripgrep: not used by sluice, ignored (sluice walks directories natively)"},
    {"{\"seccomp\": {\"applyPath\": \"/x/apply-seccomp\", \"argv0\": \"a\"}}",
     "t.json:1:2: seccomp: not used by sluice, ignored (sluice applies its own seccomp filter)"},
    {"{\"socatPath\": \"/usr/bin/socat\"}",
     "t.json:1:2: socatPath: not used by sluice, ignored (sluice does not use socat)"},
    {"{\"filesystem\": {\"autoAllowSystemPaths\": true}}",
     "t.json:1:17: filesystem.autoAllowSystemPaths: ignored, sluice's allowRead re-allows "
     "inside denyRead"},
};

static void test_notices(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(notice_cases) / sizeof(notice_cases[0]); i++) {
        struct settings s;
        struct settings_error err;

        settings_init(&s);
        assert_int_equal(apply(&s, notice_cases[i].json, &err), 0);
        if (notice_cases[i].notice == NULL) {
            assert_int_equal(s.notices.n, 0);
        } else {
            if (s.notices.n != 1 || strcmp(s.notices.items[0].value, notice_cases[i].notice))
                print_error("case %zu: got %zu notices, first '%s'\n", i, s.notices.n,
                            s.notices.n ? s.notices.items[0].value : "");
            assert_int_equal(s.notices.n, 1);
            assert_string_equal(s.notices.items[0].value, notice_cases[i].notice);
        }
        settings_free(&s);
    }
}

static void test_unix_sockets_kept(void **state)
{
    struct settings s;
    struct settings_error err;

    (void)state;
    settings_init(&s);
    assert_int_equal(apply(&s, "{\"network\":{\"allowUnixSockets\":[\"/a.sock\",\"/b.sock\"]}}",
                           &err),
                     0);
    assert_int_equal(s.network.allow_unix_sockets.n, 2);
    assert_string_equal(s.network.allow_unix_sockets.items[1].value, "/b.sock");
    settings_free(&s);
}

/* ------------------------------------------------------------------------ */
/* dnsServers                                                                */

static void test_dns_servers_valid(void **state)
{
    static const char *const ok[] = {"1.1.1.1",  "9.9.9.9:53",     "[2001:db8::1]:5353",
                                     "2001:db8::1", "[::1]",       "127.0.0.1:65535"};
    static const char *const bad[] = {"1.1.1.1:",  "1.1.1.1:65536", "1.1.1.1:053", "[::1",
                                      "[::1]x",    "[1.2.3.4]:53",  "::1:53x",     "",
                                      "1.2.3.4:5:6", "localhost"};

    (void)state;
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        struct settings s;
        struct settings_error err;
        char json[256];

        snprintf(json, sizeof(json), "{\"network\":{\"dnsServers\":[\"%s\"]}}", ok[i]);
        settings_init(&s);
        if (apply(&s, json, &err) != 0)
            print_error("%s: %s\n", ok[i], err.msg);
        assert_int_equal(apply(&s, json, &err), 0);
        assert_string_equal(s.network.dns_servers.items[0].value, ok[i]);
        settings_free(&s);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct settings s;
        struct settings_error err;
        char json[256];

        snprintf(json, sizeof(json), "{\"network\":{\"dnsServers\":[\"%s\"]}}", bad[i]);
        settings_init(&s);
        if (apply(&s, json, &err) != -EINVAL)
            print_error("accepted '%s'\n", bad[i]);
        assert_int_equal(apply(&s, json, &err), -EINVAL);
        assert_non_null(strstr(err.msg, "invalid DNS server"));
        settings_free(&s);
    }
}

/* ------------------------------------------------------------------------ */
/* List files                                                                */

static void test_list_files(void **state)
{
    struct settings s;
    struct settings_error err = {{0}};
    char p[1200];
    const struct settings_list *a, *d;
    int rc;

    (void)state;
    path_in(p, sizeof(p), data_dir, "with-lists.json");
    settings_init(&s);
    rc = settings_apply_file(&s, p, &err);
    if (rc != 0)
        print_error("%s\n", err.msg);
    assert_int_equal(rc, 0);
    a = &s.network.allowed_domains;
    assert_int_equal(a->n, 4);
    assert_item(&a->items[0], "github.com", "with-lists.json", 3, 24, "network.allowedDomains", 0);
    assert_item(&a->items[1], "registry.npmjs.org", "settings/lists/allow.txt", 3, 1,
                "network.allowedDomainsFiles", 3);
    assert_item(&a->items[2], "*.pypi.org", "settings/lists/allow.txt", 4, 3,
                "network.allowedDomainsFiles", 4);
    assert_item(&a->items[3], "crates.io", "settings/lists/allow.txt", 6, 1,
                "network.allowedDomainsFiles", 6);
    d = &s.network.denied_domains;
    assert_int_equal(d->n, 1);
    assert_item(&d->items[0], "evil.example", "settings/lists/deny.txt", 1, 1,
                "network.deniedDomainsFiles", 1);
    /* the list files themselves are recorded where the JSON names them */
    assert_int_equal(s.network.allowed_domains_files.n, 1);
    assert_item(&s.network.allowed_domains_files.items[0], "lists/allow.txt", "with-lists.json",
                4, 29, "network.allowedDomainsFiles", 0);
    assert_int_equal(s.network.denied_domains_files.n, 1);
    /* interned: the items share one copy of each file name */
    assert_ptr_equal(a->items[1].file, a->items[3].file);
    assert_int_equal(s.nfiles, 3);
    settings_free(&s);
}

static void test_list_file_missing(void **state)
{
    struct settings s;
    struct settings_error err = {{0}};
    char p[1200], want[4000];

    (void)state;
    path_in(p, sizeof(p), data_dir, "missing-list.json");
    settings_init(&s);
    assert_int_equal(settings_apply_file(&s, p, &err), -EINVAL);
    snprintf(want, sizeof(want),
             "%s:5:7: network.deniedDomainsFiles[1]: cannot read list file "
             "'%s/lists/nope.txt': No such file or directory",
             p, data_dir);
    assert_string_equal(err.msg, want);
    /* the first list file was read fine, but nothing of the layer landed */
    assert_int_equal(s.network.denied_domains.n, 0);
    assert_int_equal(s.network.denied_domains_files.n, 0);
    assert_int_equal(s.nfiles, 0);
    settings_free(&s);
}

static void test_list_file_nul(void **state)
{
    struct settings s;
    struct settings_error err = {{0}};
    char lp[512], want[1200];

    (void)state;
    path_in(lp, sizeof(lp), tmp_dir, "nul.txt");
    write_file(lp, "ok.com\n  a.com\0.evil.com\n", 25);
    write_tmp("nul.json", "{\"network\":{\"allowedDomainsFiles\":[\"nul.txt\"]}}");
    path_in(want, sizeof(want), tmp_dir, "nul.json");
    settings_init(&s);
    assert_int_equal(settings_apply_file(&s, want, &err), -EINVAL);
    snprintf(want, sizeof(want), "%s:2:3: network.allowedDomainsFiles[0]: NUL byte in pattern",
             lp);
    assert_string_equal(err.msg, want);
    settings_free(&s);
}

/* ------------------------------------------------------------------------ */
/* Layering                                                                  */

static void test_layering(void **state)
{
    struct settings s;
    struct settings_error err;
    const char *user =
        "{\"network\":{\"allowedDomains\":[\"user.com\"],\"deniedDomains\":[\"bad1.com\"],"
        "\"deniedDomainReasons\":{\"bad1.com\":\"r1\",\"shared.com\":\"old\"},"
        "\"deniedResolvedAddresses\":[\"10.0.0.1\"],\"allowLocalBinding\":true,"
        "\"dnsServers\":[\"1.1.1.1\"]},"
        "\"filesystem\":{\"denyRead\":[\"~/.ssh\"],\"allowWrite\":[\".\"],"
        "\"denyWrite\":[\".env\"]},\"ignoreViolations\":{\"*\":[\"/a\"]},"
        "\"mandatoryDenySearchDepth\":5}";
    const char *project =
        "{\"network\":{\"allowedDomains\":[\"proj.com\",\"proj2.com\"],"
        "\"deniedDomains\":[\"bad2.com\"],\"deniedDomainReasons\":{\"shared.com\":\"new\"},"
        "\"deniedResolvedAddresses\":[\"10.0.0.2\"]},"
        "\"filesystem\":{\"denyRead\":[\"~/.aws\"],\"denyWrite\":[\".git\"]},"
        "\"ignoreViolations\":{\"npm\":[\"/b\"]}}";
    const char *managed = "{\"network\":{\"allowedDomains\":[],\"deniedDomains\":[\"bad3.com\"],"
                          "\"mode\":\"enforce\",\"httpProxyPort\":2222},"
                          "\"mandatoryDenySearchDepth\":2}";
    const struct settings_map *r;
    char mp[512];

    (void)state;
    settings_init(&s);
    assert_int_equal(settings_apply_buffer(&s, "user.json", user, strlen(user), &err), 0);
    assert_int_equal(settings_apply_buffer(&s, "proj.json", project, strlen(project), &err), 0);

    /* allow lists: replaced by the later layer */
    assert_int_equal(s.network.allowed_domains.n, 2);
    assert_string_equal(s.network.allowed_domains.items[0].value, "proj.com");
    assert_string_equal(s.network.allowed_domains.items[0].file, "proj.json");
    /* ... but kept when the later layer does not set them */
    assert_int_equal(s.filesystem.allow_write.n, 1);
    assert_int_equal(s.network.dns_servers.n, 1);
    assert_int_equal(s.network.allow_local_binding, 1);
    assert_int_equal(s.mandatory_deny_search_depth, 5);
    /* ignoreViolations is replaced as a whole */
    assert_int_equal(s.ignore_violations.n, 1);
    assert_string_equal(s.ignore_violations.pairs[0].key, "npm");
    /* deny lists: united, each item keeping its origin */
    assert_int_equal(s.network.denied_domains.n, 2);
    assert_string_equal(s.network.denied_domains.items[0].value, "bad1.com");
    assert_string_equal(s.network.denied_domains.items[0].file, "user.json");
    assert_string_equal(s.network.denied_domains.items[1].value, "bad2.com");
    assert_string_equal(s.network.denied_domains.items[1].file, "proj.json");
    assert_int_equal(s.network.denied_resolved_addresses.n, 2);
    assert_int_equal(s.filesystem.deny_read.n, 2);
    assert_int_equal(s.filesystem.deny_write.n, 2);
    /* reasons: merged, the later layer wins per key */
    r = &s.network.denied_domain_reasons;
    assert_int_equal(r->n, 2);
    for (size_t i = 0; i < r->n; i++) {
        if (strcmp(r->pairs[i].key, "shared.com") == 0)
            assert_string_equal(r->pairs[i].value, "new");
        else
            assert_string_equal(r->pairs[i].value, "r1");
    }

    /* command-line flags would go here; the managed file comes last and wins */
    path_in(mp, sizeof(mp), tmp_dir, "managed.json");
    write_file(mp, managed, strlen(managed));
    s.network.mode = SETTINGS_MODE_REPORT; /* as if set by a flag */
    assert_int_equal(settings_apply_managed(&s, mp, &err), 0);
    assert_int_equal(s.network.mode, SETTINGS_MODE_ENFORCE);
    assert_int_equal(s.network.http_proxy_port, 2222);
    assert_int_equal(s.mandatory_deny_search_depth, 2);
    assert_int_equal(s.network.allowed_domains.n, 0); /* managed emptied the allow list */
    assert_int_equal(s.network.denied_domains.n, 3);  /* deny still united */
    assert_string_equal(s.network.denied_domains.items[2].value, "bad3.com");
    /* a missing managed file is skipped */
    path_in(mp, sizeof(mp), tmp_dir, "no-managed.json");
    assert_int_equal(settings_apply_managed(&s, mp, &err), 0);
    assert_int_equal(s.network.denied_domains.n, 3);
    settings_free(&s);
}

/* Issue 21 item 8: with a managed file, only it may weaken the boundary. */
struct lock_row {
    const char *json; /* the user layer (t.json) */
    const char *key;  /* refused key, or NULL: accepted */
    unsigned col;     /* column of the refused key */
};

static const struct lock_row lock_rows[] = {
    {"{\"network\": {\"isolate\": false}}", "network.isolate", 14},
    {"{\"network\": {\"mode\": \"report\"}}", "network.mode", 14},
    {"{\"sandbox\": {\"enabled\": false}}", "sandbox.enabled", 14},
    {"{\"sandbox\": {\"allowUnsandboxedCommands\": true}}", "sandbox.allowUnsandboxedCommands",
     14},
    {"{\"filesystem\": {\"disabled\": true}}", "filesystem.disabled", 17},
    {"{\"sandbox\": {\"excludedCommands\": [\"docker\"]}}", "sandbox.excludedCommands", 14},
    {"{\"network\": {\"httpProxyPort\": 3128}}", "network.httpProxyPort", 14},
    {"{\"network\": {\"socksProxyPort\": 1080}}", "network.socksProxyPort", 14},
    /* rt-4: as strong a weakening as the keys above */
    {"{\"bwrapPath\": \"/tmp/not-bwrap\"}", "bwrapPath", 2},
    {"{\"network\": {\"allowAllUnixSockets\": true}}", "network.allowAllUnixSockets", 14},
    {"{\"allowNestedUserNamespaces\": true}", "allowNestedUserNamespaces", 2},
    {"{\"enableWeakerNestedSandbox\": true}", "enableWeakerNestedSandbox", 2},
    /* issue 26: host loopback ports opened to the sandbox */
    {"{\"network\": {\"hostPorts\": [5432]}}", "network.hostPorts", 14},
    {"{\"network\": {\"hostPorts\": [], \"publish\": [\"8080:80\"]}}", NULL, 0},
    {"{\"network\": {\"allowAllUnixSockets\": false}, \"allowNestedUserNamespaces\": false, "
     "\"enableWeakerNestedSandbox\": false}",
     NULL, 0},
    /* the same keys at their strict values are fine */
    {"{\"network\": {\"isolate\": true, \"mode\": \"enforce\"}, \"sandbox\": {\"enabled\": "
     "true, \"allowUnsandboxedCommands\": false, \"excludedCommands\": []}, \"filesystem\": "
     "{\"disabled\": false}}",
     NULL, 0},
    /* and so is everything else */
    {"{\"network\": {\"allowedDomains\": [\"a.com\"], \"deniedDomains\": [\"b.com\"]}}", NULL,
     0},
};

static void test_managed_lock(void **state)
{
    struct settings s;
    struct settings_error err;
    char mp[512], none[512], want[1024];
    int nfail = 0;

    (void)state;
    path_in(mp, sizeof(mp), tmp_dir, "lock-managed.json");
    write_str(mp, "{\"network\": {\"deniedDomains\": [\"managed.example\"]}}");
    path_in(none, sizeof(none), tmp_dir, "lock-no-managed.json");
    for (size_t i = 0; i < sizeof(lock_rows) / sizeof(lock_rows[0]); i++) {
        const struct lock_row *r = &lock_rows[i];
        int rc;

        settings_init(&s);
        assert_int_equal(apply(&s, r->json, &err), 0);
        memset(err.msg, 0, sizeof(err.msg));
        rc = settings_apply_managed(&s, mp, &err);
        if (r->key == NULL && rc != 0) {
            print_error("lock row %zu: refused: %s\n", i, err.msg);
            nfail++;
        } else if (r->key != NULL) {
            snprintf(want, sizeof(want), "t.json:1:%u: %s: refused: the managed file %s exists",
                     r->col, r->key, mp);
            if (rc != -EINVAL || strncmp(err.msg, want, strlen(want)) != 0) {
                print_error("lock row %zu: rc %d '%s', want '%s...'\n", i, rc, err.msg, want);
                nfail++;
            }
        }
        settings_free(&s);
        /* without a managed file nothing changes */
        settings_init(&s);
        assert_int_equal(apply(&s, r->json, &err), 0);
        if (settings_apply_managed(&s, none, &err) != 0 || s.managed_file != NULL ||
            s.sandbox.allow_unsandboxed_commands == SETTINGS_FALSE) {
            if (strstr(r->json, "\"allowUnsandboxedCommands\": false") == NULL) {
                print_error("lock row %zu: changed without a managed file\n", i);
                nfail++;
            }
        }
        settings_free(&s);
    }
    if (nfail)
        fail_msg("%d lock row(s) failed", nfail);

    /* a later layer that sets the key back decides it */
    settings_init(&s);
    assert_int_equal(apply(&s, "{\"network\": {\"isolate\": false}}", &err), 0);
    assert_int_equal(apply(&s, "{\"network\": {\"isolate\": true}}", &err), 0);
    assert_int_equal(settings_apply_managed(&s, mp, &err), 0);
    assert_int_equal(s.network.isolate, 1);
    /* the managed file is named, with its keys; its rules are marked */
    assert_non_null(s.managed_file);
    assert_string_equal(s.managed_file, mp);
    assert_int_equal(s.managed_keys.n, 1);
    assert_string_equal(s.managed_keys.items[0].value, "network.deniedDomains");
    assert_int_equal(s.network.denied_domains.n, 1);
    assert_int_equal(s.network.denied_domains.items[0].managed, 1);
    /* running unsandboxed is the managed file's to allow */
    assert_int_equal(s.sandbox.allow_unsandboxed_commands, SETTINGS_FALSE);
    settings_free(&s);

    /* the managed file itself may weaken the boundary */
    write_str(mp, "{\"network\": {\"isolate\": false, \"mode\": \"report\"}, \"sandbox\": "
                  "{\"allowUnsandboxedCommands\": true}}");
    settings_init(&s);
    assert_int_equal(apply(&s, "{\"network\": {\"deniedDomains\": [\"user.example\"]}}", &err), 0);
    assert_int_equal(settings_apply_managed(&s, mp, &err), 0);
    assert_int_equal(s.network.isolate, 0);
    assert_int_equal(s.network.mode, SETTINGS_MODE_REPORT);
    assert_int_equal(s.sandbox.allow_unsandboxed_commands, SETTINGS_TRUE);
    assert_int_equal(s.managed_keys.n, 3);
    assert_int_equal(s.network.denied_domains.items[0].managed, 0); /* the user's rule */
    settings_free(&s);
}

static void test_layering_files_replace_inline(void **state)
{
    struct settings s;
    struct settings_error err;
    char p[512];

    (void)state;
    write_tmp("allow-only.txt", "listed.com\n");
    settings_init(&s);
    assert_int_equal(apply(&s, "{\"network\":{\"allowedDomains\":[\"inline.com\"]}}", &err), 0);
    write_tmp("files.json", "{\"network\":{\"allowedDomainsFiles\":[\"allow-only.txt\"]}}");
    path_in(p, sizeof(p), tmp_dir, "files.json");
    assert_int_equal(settings_apply_file(&s, p, &err), 0);
    /* a layer with only allowedDomainsFiles replaces earlier inline allow rules */
    assert_int_equal(s.network.allowed_domains.n, 1);
    assert_string_equal(s.network.allowed_domains.items[0].value, "listed.com");
    /* and a later inline-only layer drops the earlier list files */
    assert_int_equal(apply(&s, "{\"network\":{\"allowedDomains\":[\"x.com\"]}}", &err), 0);
    assert_int_equal(s.network.allowed_domains.n, 1);
    assert_int_equal(s.network.allowed_domains_files.n, 0);
    settings_free(&s);
}

static void test_error_leaves_settings_unchanged(void **state)
{
    static const char *const bad[] = {
        /* fails late, after several lists, reasons and notices were taken */
        "{\"network\":{\"allowedDomains\":[\"z.com\"],\"deniedDomains\":[\"y.com\"],"
        "\"deniedDomainReasons\":{\"a.com\":\"zzz\"},\"allowMachLookup\":[\"x\"],"
        "\"httpProxyPort\":9},\"filesystem\":{\"denyRead\":[\"/q\"]},"
        "\"ignoreViolations\":{\"q\":[\"/q\"]},\"bwrapPath\":\"/q\","
        "\"mandatoryDenySearchDepth\":12}",
        "{\"network\":{\"deniedDomains\":[\"y.com\"],\"deniedDomainsFiles\":[\"nope.txt\"]}}",
        "{\"network\":{\"deniedDomains\":[\"y.com\"]},\"credentials\":{\"envVars\":[{\"name\":"
        "\"T\",\"mode\":\"mask\"}],\"sigv4\":{\"sigv4a\":1}}}",
        "{\"network\":{\"deniedDomains\":[\"y.com\"],\"deniedDomains\":[]}}",
        /* the sandbox and environment objects, failing on their last key */
        ("{\"sandbox\":{\"enabled\":false,\"excludedCommands\":[\"npm\"]},"
         "\"environment\":{\"allow\":[\"X\"],\"deny\":[\"Y\"],\"inherit\":false,"
         "\"denied\":[]}}"),
        "{\"environment\":{\"deny\":[\"Y\"],\"allow\":[\"A-B\"]}}",
        ("{\"environment\":{\"set\":{\"A\":\"1\",\"B\":\"~/x\"},\"pathAppend\":[\"/opt/bin\"],"
         "\"deny\":[\"Y\"]},\"filesystem\":{\"denyRead\":[\"/q\"]},\"bogus\":1}"),
        "{\"environment\":{\"set\":{\"A\":\"1\",\"HTTPS_PROXY\":\"x\"}}}",
    };
    struct settings s;
    struct settings_error err;
    char *before;

    (void)state;
    settings_init(&s);
    assert_int_equal(apply(&s,
                           "{\"network\":{\"allowedDomains\":[\"a.com\"],\"deniedDomains\":"
                           "[\"b.com\"],\"deniedDomainReasons\":{\"a.com\":\"r\"},"
                           "\"allowMachLookup\":[\"m\"]},\"ignoreViolations\":{\"*\":[\"/t\"]},"
                           "\"bwrapPath\":\"/usr/bin/bwrap\"}",
                           &err),
                     0);
    before = dump(&s);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char *after;
        assert_int_equal(apply(&s, bad[i], &err), -EINVAL);
        after = dump(&s);
        assert_string_equal(after, before);
        free(after);
    }
    free(before);
    settings_free(&s);
}

/* ------------------------------------------------------------------------ */
/* settings_load                                                             */

static void test_load(void **state)
{
    struct settings s;
    struct settings_error err;
    char xdg[512], home[512], p[700], want[1200];

    (void)state;
    path_in(xdg, sizeof(xdg), tmp_dir, "xdg");
    path_in(home, sizeof(home), tmp_dir, "home");
    path_in(p, sizeof(p), xdg, "");
    assert_int_equal(mkdir(xdg, 0700), 0);
    assert_int_equal(mkdir(home, 0700), 0);
    path_in(p, sizeof(p), xdg, "sluice");
    assert_int_equal(mkdir(p, 0700), 0);
    setenv("HOME", home, 1);
    unsetenv("SLUICE_SETTINGS");

    /* nothing at all: defaults */
    unsetenv("XDG_CONFIG_HOME");
    settings_init(&s);
    assert_int_equal(settings_load(&s, NULL, &err), 0);
    assert_int_equal(s.network.denied_domains.n, 0);
    settings_free(&s);

    /* only ~/.srt-settings.json */
    path_in(p, sizeof(p), home, ".srt-settings.json");
    write_str(p, "{\"network\":{\"deniedDomains\":[\"srt.com\"]}}");
    settings_init(&s);
    assert_int_equal(settings_load(&s, NULL, &err), 0);
    assert_int_equal(s.network.denied_domains.n, 1);
    assert_string_equal(s.network.denied_domains.items[0].file, p);
    settings_free(&s);

    /* the XDG file, when present, is the user file (srt's is then ignored) */
    setenv("XDG_CONFIG_HOME", xdg, 1);
    path_in(p, sizeof(p), xdg, "sluice/settings.json");
    write_str(p, "{\"network\":{\"deniedDomains\":[\"xdg.com\"]}}");
    settings_init(&s);
    assert_int_equal(settings_load(&s, NULL, &err), 0);
    assert_int_equal(s.network.denied_domains.n, 1);
    assert_string_equal(s.network.denied_domains.items[0].value, "xdg.com");
    settings_free(&s);

    /* $SLUICE_SETTINGS, then an explicit path that wins over it */
    write_tmp("env.json", "{\"network\":{\"deniedDomains\":[\"env.com\"]}}");
    write_tmp("cli.json", "{\"network\":{\"deniedDomains\":[\"cli.com\"]}}");
    path_in(p, sizeof(p), tmp_dir, "env.json");
    setenv("SLUICE_SETTINGS", p, 1);
    settings_init(&s);
    assert_int_equal(settings_load(&s, NULL, &err), 0);
    assert_int_equal(s.network.denied_domains.n, 2);
    assert_string_equal(s.network.denied_domains.items[1].value, "env.com");
    settings_free(&s);
    path_in(p, sizeof(p), tmp_dir, "cli.json");
    settings_init(&s);
    assert_int_equal(settings_load(&s, p, &err), 0);
    assert_int_equal(s.network.denied_domains.n, 2);
    assert_string_equal(s.network.denied_domains.items[1].value, "cli.com");
    settings_free(&s);

    /* a missing explicit file is an error */
    path_in(p, sizeof(p), tmp_dir, "absent.json");
    settings_init(&s);
    assert_int_equal(settings_load(&s, p, &err), -ENOENT);
    snprintf(want, sizeof(want), "%s: cannot open: No such file or directory", p);
    assert_string_equal(err.msg, want);
    settings_free(&s);

    /* a broken user file fails the load */
    path_in(p, sizeof(p), xdg, "sluice/settings.json");
    write_str(p, "{\"network\":{\"deniedDomain\":[]}}");
    unsetenv("SLUICE_SETTINGS");
    settings_init(&s);
    assert_int_equal(settings_load(&s, NULL, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "did you mean 'deniedDomains'?"));
    settings_free(&s);
    unsetenv("XDG_CONFIG_HOME");
}

/* ------------------------------------------------------------------------ */
/* Scale                                                                     */

#define BIG_N 100000

static void test_big_json_array(void **state)
{
    struct buf b = {0};
    struct settings s;
    struct settings_error err;
    char p[512];
    double ms = 0;

    (void)state;
    buf_add(&b, "{\n  \"network\": {\n    \"deniedDomains\": [\"first.com\"],\n"
                "    \"allowedDomains\": [");
    for (unsigned i = 0; i < BIG_N; i++)
        buf_add(&b, "%s\"host%u.example.com\"", i ? ", " : "", i);
    buf_add(&b, "],\n    \"deniedResolvedAddresses\": [\"10.0.0.1\"]\n  }\n}\n");
    path_in(p, sizeof(p), tmp_dir, "big.json");
    write_file(p, b.p, b.n);
    free(b.p);

    /* best of three, so a busy machine does not fail the test */
    for (int run = 0; run < 3; run++) {
        double t0;
        if (run > 0)
            settings_free(&s);
        settings_init(&s);
        t0 = now_ms();
        assert_int_equal(settings_apply_file(&s, p, &err), 0);
        if (run == 0 || now_ms() - t0 < ms)
            ms = now_ms() - t0;
    }
    print_message("    100k-element JSON array: %.1f ms\n", ms);
    print_message("loaded in %.1f ms (informational)\n", ms);
    assert_int_equal(s.network.allowed_domains.n, BIG_N);
    /* positions from the single scan: line 4, after '    "allowedDomains": [' */
    assert_item(&s.network.allowed_domains.items[0], "host0.example.com", "big.json", 4, 24,
                "network.allowedDomains", 0);
    assert_item(&s.network.allowed_domains.items[1], "host1.example.com", "big.json", 4, 45,
                "network.allowedDomains", 1);
    assert_string_equal(s.network.allowed_domains.items[BIG_N - 1].value,
                        "host99999.example.com");
    assert_int_equal(s.network.denied_resolved_addresses.items[0].line, 5);
    settings_free(&s);
}

static void test_big_list_file(void **state)
{
    struct buf b = {0};
    struct settings s;
    struct settings_error err;
    char p[512];
    double ms = 0;

    (void)state;
    buf_add(&b, "# big list\n");
    for (unsigned i = 0; i < BIG_N; i++)
        buf_add(&b, "  deny%u.example.net  # %u\n", i, i);
    path_in(p, sizeof(p), tmp_dir, "big.txt");
    write_file(p, b.p, b.n);
    free(b.p);
    write_tmp("big-list.json", "{\"network\":{\"deniedDomainsFiles\":[\"big.txt\"]}}");
    path_in(p, sizeof(p), tmp_dir, "big-list.json");

    /* best of three, so a busy machine does not fail the test */
    for (int run = 0; run < 3; run++) {
        double t0;
        if (run > 0)
            settings_free(&s);
        settings_init(&s);
        t0 = now_ms();
        assert_int_equal(settings_apply_file(&s, p, &err), 0);
        if (run == 0 || now_ms() - t0 < ms)
            ms = now_ms() - t0;
    }
    print_message("    100k-line list file: %.1f ms\n", ms);
    print_message("loaded in %.1f ms (informational)\n", ms);
    assert_int_equal(s.network.denied_domains.n, BIG_N);
    assert_item(&s.network.denied_domains.items[BIG_N - 1], "deny99999.example.net", "big.txt",
                BIG_N + 1, 3, "network.deniedDomainsFiles", BIG_N + 1);
    settings_free(&s);
}

/* ------------------------------------------------------------------------ */
/* The locator on its own                                                    */

static void test_jsonpos(void **state)
{
    /* keys with escapes, values after multi-byte characters, nesting */
    const char *t = "{\"x\": [1, {\"a\": \"}\"}], \"caf\\u00e9\": {\"\\ud83d\\ude00\": 1,\n"
                    "  \"\xC3\xA9\\\"q\": [ true , \"s\\\"]\", [ ] ]}}";
    struct jsonpos_step cafe[] = {{"caf\xC3\xA9", 5, 0}, {"\xF0\x9F\x98\x80", 4, 0}};
    struct jsonpos_step q[] = {{"caf\xC3\xA9", 5, 0}, {"\xC3\xA9\"q", 4, 0}, {NULL, 0, 2}};
    struct jsonpos_step qa[] = {{"caf\xC3\xA9", 5, 0}, {"\xC3\xA9\"q", 4, 0}};
    struct jsonpos_step x1a[] = {{"x", 1, 0}, {NULL, 0, 1}, {"a", 1, 0}};
    struct jsonpos_step none[] = {{"caf", 3, 0}};
    struct jsonpos_step past[] = {{"x", 1, 0}, {NULL, 0, 2}};
    struct jsonpos pos, arr[4] = {{0, 0}, {0, 0}, {0, 0}, {99, 99}};
    size_t found = 0, len = strlen(t);

    (void)state;
    assert_int_equal(jsonpos_find(t, len, NULL, 0, 0, &pos), 0);
    assert_int_equal(pos.line, 1);
    assert_int_equal(pos.col, 1);
    assert_int_equal(jsonpos_find(t, len, cafe, 2, 0, &pos), 0);
    assert_int_equal(pos.line, 1);
    assert_int_equal(pos.col, 54);
    assert_int_equal(jsonpos_find(t, len, cafe, 2, 1, &pos), 0);
    assert_int_equal(pos.col, 38);
    assert_int_equal(jsonpos_find(t, len, x1a, 3, 0, &pos), 0);
    assert_int_equal(pos.col, 17);
    assert_int_equal(jsonpos_find(t, len, q, 3, 0, &pos), 0);
    assert_int_equal(pos.line, 2);
    assert_int_equal(pos.col, 28);
    assert_int_equal(jsonpos_find(t, len, none, 1, 0, &pos), -ENOENT);
    assert_int_equal(jsonpos_find(t, len, past, 2, 0, &pos), -ENOENT);
    assert_int_equal(jsonpos_array(t, len, qa, 2, arr, 4, &found), 0);
    assert_int_equal(found, 3);
    assert_int_equal(arr[0].col, 13);
    assert_int_equal(arr[1].col, 20);
    assert_int_equal(arr[2].col, 28);
    assert_int_equal(arr[3].line, 99); /* untouched */
    assert_int_equal(jsonpos_array(t, len, cafe, 2, arr, 4, &found), -ENOENT);
    /* truncated text never reads past the end */
    for (size_t cut = 0; cut < len; cut++) {
        (void)jsonpos_find(t, cut, q, 3, 0, &pos);
        (void)jsonpos_array(t, cut, qa, 2, arr, 3, &found);
    }
}

/* ------------------------------------------------------------------------ */
/* proxy: auth, timeouts, limits                                             */

static void test_proxy_keys(void **state)
{
    struct settings s;
    struct settings_error err;
    static const struct {
        const char *json, *msg;
    } bad[] = {
        {"{\"proxy\": {\"auth\": {\"username\": \"u\"}}}",
         "t.json:1:20: proxy.auth: 'password' is required"},
        {"{\"proxy\": {\"auth\": {\"username\": \"a:b\", \"password\": \"p\"}}}",
         "t.json:1:33: proxy.auth.username: must not contain ':' (HTTP Basic credentials)"},
        {"{\"proxy\": {\"auth\": {\"username\": \"u\", \"password\": \"\"}}}",
         "t.json:1:50: proxy.auth.password: must be 1 to 255 bytes long"},
        {"{\"proxy\": {\"auth\": {\"user\": \"u\", \"password\": \"p\"}}}",
         "t.json:1:21: proxy.auth.user: unknown key 'user' (expected 'username' and 'password')"},
        {"{\"proxy\": {\"timeouts\": {\"dns\": 0}}}",
         "t.json:1:32: proxy.timeouts.dns: must be 0.001 to 86400 seconds, got 0"},
        {"{\"proxy\": {\"timeouts\": {\"idle\": -1}}}",
         "t.json:1:33: proxy.timeouts.idle: must be 0 (off) to 86400 seconds, got -1"},
        {"{\"proxy\": {\"timeouts\": {\"ask\": \"30s\"}}}",
         "t.json:1:32: proxy.timeouts.ask: expected a number of seconds, got a string"},
        {"{\"proxy\": {\"limits\": {\"maxHeadBytes\": 100}}}",
         "t.json:1:39: proxy.limits.maxHeadBytes: must be in 1024..1048576, got 100"},
        {"{\"proxy\": {\"timeout\": {}}}",
         "t.json:1:12: proxy.timeout: unknown key 'timeout' (did you mean 'timeouts'?)"},
    };
    size_t nbad = 0;

    (void)state;
    settings_init(&s);
    assert_null(s.proxy.auth_username);
    assert_int_equal(s.proxy.ask_timeout_ms, 30000);
    assert_int_equal(s.proxy.idle_timeout_ms, 900000);
    assert_int_equal(s.proxy.max_head_bytes, 8192);
    assert_int_equal(apply(&s,
                           "{\"proxy\": {\"auth\": {\"username\": \"u\", \"password\": \"p w\"},"
                           " \"timeouts\": {\"dns\": 1.5, \"idle\": 0},"
                           " \"limits\": {\"maxConnections\": 7}}}",
                           &err),
                     0);
    assert_string_equal(s.proxy.auth_username, "u");
    assert_string_equal(s.proxy.auth_password, "p w");
    assert_int_equal(s.proxy.dns_timeout_ms, 1500);
    assert_int_equal(s.proxy.idle_timeout_ms, 0);
    assert_int_equal(s.proxy.max_connections, 7);
    /* a later layer replaces only the keys it names */
    assert_int_equal(apply(&s, "{\"proxy\": {\"timeouts\": {\"ask\": 2}}}", &err), 0);
    assert_int_equal(s.proxy.ask_timeout_ms, 2000);
    assert_int_equal(s.proxy.dns_timeout_ms, 1500);
    assert_int_equal(s.proxy.max_connections, 7);
    assert_string_equal(s.proxy.auth_username, "u");
    settings_free(&s);

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int rc;
        settings_init(&s);
        rc = apply(&s, bad[i].json, &err);
        if (rc != -EINVAL || strcmp(err.msg, bad[i].msg) != 0) {
            print_error("case %zu: rc %d\n  got:  %s\n  want: %s\n", i, rc, err.msg, bad[i].msg);
            nbad++;
        }
        assert_null(s.proxy.auth_username);
        settings_free(&s);
    }
    assert_int_equal(nbad, 0);
}

/* ------------------------------------------------------------------------ */
/* sandbox and environment                                                   */

static void test_sandbox_environment_keys(void **state)
{
    struct settings s;
    struct settings_error err;
    static const struct {
        const char *json, *msg;
    } bad[] = {
        {"{\"environment\": {\"allow\": [\"HOME\", \"1BAD\"]}}",
         "t.json:1:36: environment.allow[1]: invalid environment variable name \"1BAD\" "
         "(expected a name like HOME or a glob like AWS_*: letters, digits, '_' and '*', not "
         "starting with a digit)"},
        {"{\"environment\": {\"deny\": [\"A-B\"]}}",
         "t.json:1:27: environment.deny[0]: invalid environment variable name \"A-B\" "
         "(expected a name like HOME or a glob like AWS_*: letters, digits, '_' and '*', not "
         "starting with a digit)"},
        {"{\"environment\": {\"deny\": [\"\"]}}",
         "t.json:1:27: environment.deny[0]: invalid environment variable name \"\" "
         "(expected a name like HOME or a glob like AWS_*: letters, digits, '_' and '*', not "
         "starting with a digit)"},
        {"{\"environment\": {\"deny\": [\"A=B\"]}}",
         "t.json:1:27: environment.deny[0]: invalid environment variable name \"A=B\" "
         "(expected a name like HOME or a glob like AWS_*: letters, digits, '_' and '*', not "
         "starting with a digit)"},
        {"{\"environment\": {\"allow\": \"HOME\"}}",
         "t.json:1:27: environment.allow: expected an array of strings, got a string"},
        {"{\"environment\": {\"allow\": [3]}}",
         "t.json:1:28: environment.allow[0]: expected a string, got an integer"},
        {"{\"environment\": {\"inherit\": \"no\"}}",
         "t.json:1:29: environment.inherit: expected a boolean, got a string"},
        {"{\"environment\": {\"inherits\": false}}",
         "t.json:1:18: environment.inherits: unknown key 'inherits' (did you mean 'inherit'?)"},
        {"{\"environment\": []}", "t.json:1:17: environment: expected an object, got an array"},
        {"{\"sandbox\": {\"enabled\": 1}}",
         "t.json:1:25: sandbox.enabled: expected a boolean, got an integer"},
        {"{\"sandbox\": {\"allowUnsandboxedCommands\": null}}",
         "t.json:1:42: sandbox.allowUnsandboxedCommands: expected a boolean, got null"},
        {"{\"sandbox\": {\"excludedCommands\": [\"npm\", \"\"]}}",
         "t.json:1:42: sandbox.excludedCommands[1]: must not be an empty string"},
        {"{\"sandbox\": {\"excludeCommands\": []}}",
         "t.json:1:14: sandbox.excludeCommands: unknown key 'excludeCommands' (did you mean "
         "'excludedCommands'?)"},
        {"{\"sandbox\": {\"autoAllowBashIfSandboxed\": true}}",
         "t.json:1:14: sandbox.autoAllowBashIfSandboxed: unknown key 'autoAllowBashIfSandboxed'"},
    };
    size_t nbad = 0;

    (void)state;
    /* defaults */
    settings_init(&s);
    assert_int_equal(s.sandbox.enabled, SETTINGS_UNSET);
    assert_int_equal(s.sandbox.allow_unsandboxed_commands, SETTINGS_UNSET);
    assert_int_equal(s.sandbox.excluded_commands.n, 0);
    assert_int_equal(s.environment.inherit, 1);
    assert_int_equal(s.environment.allow.n, 0);
    assert_int_equal(s.environment.deny.n, 0);

    /* every key, located */
    assert_int_equal(apply(&s,
                           "{\"sandbox\": {\"enabled\": true, \"allowUnsandboxedCommands\": "
                           "false,\n \"excludedCommands\": [\"npm run test\", \"docker:*\"]},\n"
                           " \"environment\": {\"allow\": [\"GITHUB_TOKEN\", \"MY_*\", \"*\"],"
                           " \"deny\": [\"_X9\", \"**_A\"], \"inherit\": false}}",
                           &err),
                     0);
    assert_int_equal(s.sandbox.enabled, SETTINGS_TRUE);
    assert_int_equal(s.sandbox.allow_unsandboxed_commands, SETTINGS_FALSE);
    assert_int_equal(s.sandbox.excluded_commands.n, 2);
    assert_item(&s.sandbox.excluded_commands.items[0], "npm run test", "t.json", 2, 23,
                "sandbox.excludedCommands", 0);
    assert_item(&s.sandbox.excluded_commands.items[1], "docker:*", "t.json", 2, 39,
                "sandbox.excludedCommands", 1);
    assert_int_equal(s.environment.allow.n, 3);
    assert_item(&s.environment.allow.items[0], "GITHUB_TOKEN", "t.json", 3, 28,
                "environment.allow", 0);
    assert_string_equal(s.environment.allow.items[1].value, "MY_*");
    assert_string_equal(s.environment.allow.items[2].value, "*");
    assert_int_equal(s.environment.deny.n, 2);
    assert_item(&s.environment.deny.items[1], "**_A", "t.json", 3, 74, "environment.deny", 1);
    assert_int_equal(s.environment.inherit, 0);
    assert_int_equal(s.notices.n, 0);

    /* layering: scalars and the allow-type lists replace when set, deny unites */
    assert_int_equal(apply(&s,
                           "{\"sandbox\": {\"excludedCommands\": [\"make\"]},"
                           " \"environment\": {\"deny\": [\"AWS_*\"], \"allow\": []}}",
                           &err),
                     0);
    assert_int_equal(s.sandbox.enabled, SETTINGS_TRUE);
    assert_int_equal(s.sandbox.allow_unsandboxed_commands, SETTINGS_FALSE);
    assert_int_equal(s.sandbox.excluded_commands.n, 1);
    assert_string_equal(s.sandbox.excluded_commands.items[0].value, "make");
    assert_int_equal(s.environment.allow.n, 0); /* an empty allow list replaces too */
    assert_int_equal(s.environment.deny.n, 3);
    assert_string_equal(s.environment.deny.items[0].value, "_X9");
    assert_string_equal(s.environment.deny.items[2].value, "AWS_*");
    assert_int_equal(s.environment.inherit, 0); /* not named: kept */
    assert_int_equal(apply(&s,
                           "{\"sandbox\": {\"enabled\": false}, \"environment\": "
                           "{\"inherit\": true, \"deny\": []}}",
                           &err),
                     0);
    assert_int_equal(s.sandbox.enabled, SETTINGS_FALSE);
    assert_int_equal(s.sandbox.excluded_commands.n, 1); /* not named: kept */
    assert_int_equal(s.environment.inherit, 1);
    assert_int_equal(s.environment.deny.n, 3); /* an empty deny list removes nothing */
    settings_free(&s);

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int rc;
        settings_init(&s);
        rc = apply(&s, bad[i].json, &err);
        if (rc != -EINVAL || strcmp(err.msg, bad[i].msg) != 0) {
            print_error("case %zu: rc %d\n  got:  %s\n  want: %s\n", i, rc, err.msg, bad[i].msg);
            nbad++;
        }
        assert_int_equal(s.environment.deny.n, 0);
        assert_int_equal(s.sandbox.enabled, SETTINGS_UNSET);
        settings_free(&s);
    }
    assert_int_equal(nbad, 0);
}

/* environment.set and environment.pathAppend */
static void test_environment_set_path(void **state)
{
    struct settings s;
    struct settings_error err;
    static const struct {
        const char *json, *msg;
    } bad[] = {
        {"{\"environment\": {\"set\": []}}",
         "t.json:1:25: environment.set: expected an object of NAME: \"value\" strings, got an "
         "array"},
        {"{\"environment\": {\"set\": {\"A\": 1}}}",
         "t.json:1:31: environment.set.A: expected a string, got an integer"},
        {"{\"environment\": {\"set\": {\"A\": null}}}",
         "t.json:1:31: environment.set.A: expected a string, got null"},
        {"{\"environment\": {\"set\": {\"1A\": \"x\"}}}",
         "t.json:1:26: environment.set.1A: invalid environment variable name \"1A\" (letters, "
         "digits and '_', not starting with a digit)"},
        {"{\"environment\": {\"set\": {\"A*\": \"x\"}}}",
         "t.json:1:26: environment.set.A*: invalid environment variable name \"A*\" (letters, "
         "digits and '_', not starting with a digit)"},
        {"{\"environment\": {\"set\": {\"A=B\": \"x\"}}}",
         "t.json:1:26: environment.set[\"A=B\"]: invalid environment variable name \"A=B\" "
         "(letters, digits and '_', not starting with a digit)"},
        {"{\"environment\": {\"set\": {\"\": \"x\"}}}",
         "t.json:1:26: environment.set[\"\"]: invalid environment variable name \"\" (letters, "
         "digits and '_', not starting with a digit)"},
        {"{\"environment\": {\"set\": {\"A\": \"x\\u0000y\"}}}",
         /* refused by the parser already */
         "t.json:1:31: \\u0000 is not allowed without JSON_ALLOW_NUL near '\"x\\u0000y\"'"},
        {"{\"environment\": {\"set\": {\"https_proxy\": \"http://evil:1\"}}}",
         "t.json:1:26: environment.set.https_proxy: 'https_proxy' is a proxy variable, set by "
         "sluice itself; it cannot be set"},
        {"{\"environment\": {\"set\": {\"NO_PROXY\": \"*\"}}}",
         "t.json:1:26: environment.set.NO_PROXY: 'NO_PROXY' is a proxy variable, set by sluice "
         "itself; it cannot be set"},
        {"{\"environment\": {\"set\": {\"GIT_SSH_COMMAND\": \"ssh\"}}}",
         "t.json:1:26: environment.set.GIT_SSH_COMMAND: 'GIT_SSH_COMMAND' is set by sluice "
         "itself; it cannot be set"},
        {"{\"environment\": {\"set\": {\"TMPDIR\": \"/x\"}}}",
         "t.json:1:26: environment.set.TMPDIR: 'TMPDIR' is set by sluice itself; it cannot be "
         "set"},
        {"{\"environment\": {\"set\": {\"SANDBOX_RUNTIME\": \"0\"}}}",
         "t.json:1:26: environment.set.SANDBOX_RUNTIME: 'SANDBOX_RUNTIME' is set by sluice "
         "itself; it cannot be set"},
        {"{\"environment\": {\"set\": {\"CLOUDSDK_PROXY_TYPE\": \"socks5\"}}}",
         "t.json:1:26: environment.set.CLOUDSDK_PROXY_TYPE: 'CLOUDSDK_PROXY_TYPE' is set by "
         "sluice itself; it cannot be set"},
        {"{\"environment\": {\"set\": {\"LD_PRELOAD\": \"/x.so\"}}}",
         "t.json:1:26: environment.set.LD_PRELOAD: 'LD_PRELOAD' would load host-chosen code "
         "into sluice's own `inner` before its seccomp filter; it cannot be set"},
        {"{\"environment\": {\"pathAppend\": \"/x\"}}",
         "t.json:1:32: environment.pathAppend: expected an array of strings, got a string"},
        {"{\"environment\": {\"pathAppend\": [\"\"]}}",
         "t.json:1:33: environment.pathAppend[0]: must not be an empty string"},
        {"{\"environment\": {\"pathAppend\": [\"/ok\", \"bin\"]}}",
         "t.json:1:40: environment.pathAppend[1]: 'bin' is not absolute: a PATH entry must "
         "start with '/', '~' or '~/' (a relative one would run programs from wherever the "
         "command is)"},
        {"{\"environment\": {\"pathAppend\": [\"~user/bin\"]}}",
         "t.json:1:33: environment.pathAppend[0]: '~user/bin' is not absolute: a PATH entry "
         "must start with '/', '~' or '~/' (a relative one would run programs from wherever "
         "the command is)"},
        {"{\"environment\": {\"pathAppend\": [\"/a:/b\"]}}",
         "t.json:1:33: environment.pathAppend[0]: '/a:/b' contains ':', the PATH separator"},
        {"{\"environment\": {\"pathAppend\": [\"/a\\nb\"]}}",
         "t.json:1:33: environment.pathAppend[0]: '/a\\x0ab' contains a control character"},
        {"{\"environment\": {\"sets\": {}}}",
         "t.json:1:18: environment.sets: unknown key 'sets' (did you mean 'set'?)"},
    };
    size_t nbad = 0;

    (void)state;
    settings_init(&s);
    assert_int_equal(s.environment.set.n, 0);
    assert_int_equal(s.environment.path_append.n, 0);

    assert_int_equal(apply(&s,
                           "{\"environment\": {\"set\": {\"GIT_CONFIG_SYSTEM\": \"/dev/null\",\n"
                           " \"CACHE\": \"~/.cache\", \"EMPTY\": \"\", \"PATH\": \"/usr/bin\"},\n"
                           " \"pathAppend\": [\"~/.local/bin\", \"/opt/tool/bin\", \"~\"]}}",
                           &err),
                     0);
    assert_int_equal(s.environment.set.n, 4);
    assert_string_equal(s.environment.set.pairs[0].key, "GIT_CONFIG_SYSTEM");
    assert_string_equal(s.environment.set.pairs[0].value, "/dev/null");
    assert_string_equal(s.environment.set.pairs[1].value, "~/.cache"); /* expanded later */
    assert_string_equal(s.environment.set.pairs[2].value, "");
    assert_string_equal(s.environment.set.pairs[3].key, "PATH");
    assert_int_equal(s.environment.path_append.n, 3);
    assert_item(&s.environment.path_append.items[0], "~/.local/bin", "t.json", 3, 17,
                "environment.pathAppend", 0);
    assert_string_equal(s.environment.path_append.items[2].value, "~");

    /* layering: set is united (the later layer wins per name), pathAppend
     * replaced when named */
    assert_int_equal(apply(&s,
                           "{\"environment\": {\"set\": {\"CACHE\": \"/var/cache\", "
                           "\"NEW\": \"n\"}}}",
                           &err),
                     0);
    assert_int_equal(s.environment.set.n, 5);
    assert_string_equal(s.environment.set.pairs[1].key, "CACHE");
    assert_string_equal(s.environment.set.pairs[1].value, "/var/cache");
    assert_string_equal(s.environment.set.pairs[4].key, "NEW");
    assert_int_equal(s.environment.path_append.n, 3);
    assert_int_equal(apply(&s, "{\"environment\": {\"pathAppend\": [\"/x\"], \"set\": {}}}",
                           &err),
                     0);
    assert_int_equal(s.environment.path_append.n, 1);
    assert_string_equal(s.environment.path_append.items[0].value, "/x");
    assert_int_equal(s.environment.set.n, 5);
    assert_int_equal(apply(&s, "{\"environment\": {\"pathAppend\": []}}", &err), 0);
    assert_int_equal(s.environment.path_append.n, 0);
    settings_free(&s);

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int rc;
        settings_init(&s);
        rc = apply(&s, bad[i].json, &err);
        if (rc != -EINVAL || strcmp(err.msg, bad[i].msg) != 0) {
            print_error("case %zu: rc %d\n  got:  %s\n  want: %s\n", i, rc, err.msg, bad[i].msg);
            nbad++;
        }
        assert_int_equal(s.environment.set.n, 0);
        assert_int_equal(s.environment.path_append.n, 0);
        settings_free(&s);
    }
    assert_int_equal(nbad, 0);
}

/* ------------------------------------------------------------------------ */
/* The shipped JSON Schema names exactly keys the loader knows               */

static void check_schema_keys(json_t *props, const char *parent, const char *grand,
                              size_t *count)
{
    const char *key;
    json_t *def;

    json_object_foreach(props, key, def) {
        struct settings s;
        struct settings_error err;
        json_t *sub = json_object_get(def, "properties");
        char json[512];
        int rc;

        if (grand != NULL)
            snprintf(json, sizeof(json), "{\"%s\": {\"%s\": {\"%s\": null}}}", grand, parent,
                     key);
        else if (parent != NULL)
            snprintf(json, sizeof(json), "{\"%s\": {\"%s\": null}}", parent, key);
        else
            snprintf(json, sizeof(json), "{\"%s\": null}", key);
        settings_init(&s);
        rc = apply(&s, json, &err);
        /* null is the wrong type for every key: an error, but never "unknown" */
        if (rc != -EINVAL || strstr(err.msg, "unknown key") != NULL)
            print_error("schema key %s: rc %d: %s\n", json, rc, err.msg);
        assert_int_equal(rc, -EINVAL);
        assert_null(strstr(err.msg, "unknown key"));
        settings_free(&s);
        (*count)++;
        if (sub != NULL && parent == NULL)
            check_schema_keys(sub, key, NULL, count);
        else if (sub != NULL && grand == NULL)
            check_schema_keys(sub, key, parent, count);
    }
}

/* network.transparent (issue 17): a bool, false by default, replaced by a
 * later layer like the other booleans. */
/* network.tlsTerminate (issue 23): srt's defaults; the object is recorded
 * even when empty; caCertPath and caKeyPath move together; a later layer
 * without the object keeps it. */
static void test_tls_terminate_key(void **state)
{
    struct settings s;
    struct settings_error err;

    (void)state;
    settings_init(&s);
    assert_int_equal(s.network.tls_terminate.given.set, 0);
    assert_int_equal(s.network.tls_terminate.max_tunnels, 256);
    assert_int_equal(s.network.tls_terminate.handshake_timeout_ms, 10000);
    assert_int_equal(apply(&s, "{\"network\": {\"tlsTerminate\": {}}}", &err), 0);
    assert_int_equal(s.network.tls_terminate.given.set, 1);
    assert_int_equal(s.network.tls_terminate.given.line, 1);
    assert_int_equal(s.network.tls_terminate.given.col, 14);
    assert_null(s.network.tls_terminate.ca_cert_path);
    assert_int_equal(apply(&s,
                           "{\"network\": {\"tlsTerminate\": {\"caCertPath\": \"/c.pem\", "
                           "\"caKeyPath\": \"/k.pem\", \"maxTunnels\": 1, \"scope\": \"needed\", "
                           "\"excludeDomains\": [\"*.pinned.example\"], "
                           "\"extraCaCertPaths\": [\"/o.pem\"], \"handshakeTimeoutMs\": 100}}}",
                           &err),
                     0);
    assert_string_equal(s.network.tls_terminate.ca_cert_path, "/c.pem");
    assert_string_equal(s.network.tls_terminate.ca_key_path, "/k.pem");
    assert_int_equal(s.network.tls_terminate.max_tunnels, 1);
    assert_int_equal(s.network.tls_terminate.handshake_timeout_ms, 100);
    assert_int_equal(s.network.tls_terminate.scope, SETTINGS_TLS_SCOPE_NEEDED);
    assert_int_equal(s.network.tls_terminate.exclude_domains.n, 1);
    assert_string_equal(s.network.tls_terminate.exclude_domains.items[0].value,
                        "*.pinned.example");
    assert_string_equal(s.network.tls_terminate.extra_ca_cert_paths.items[0].value, "/o.pem");
    /* a layer without the key keeps it; one with new paths replaces both */
    assert_int_equal(apply(&s, "{\"network\": {\"allowedDomains\": []}}", &err), 0);
    assert_int_equal(s.network.tls_terminate.given.set, 1);
    assert_int_equal(apply(&s,
                           "{\"network\": {\"tlsTerminate\": {\"caCertPath\": \"/c2.pem\", "
                           "\"caKeyPath\": \"/k2.pem\"}}}",
                           &err),
                     0);
    assert_string_equal(s.network.tls_terminate.ca_cert_path, "/c2.pem");
    assert_string_equal(s.network.tls_terminate.ca_key_path, "/k2.pem");
    settings_free(&s);
}

/* network.mitmProxy (srt 0.0.83): recorded with where it was given; a
 * relative socket path resolves against the settings file's directory; a
 * later layer replaces both keys. */
/* credentials.headers: the text form reads back (kind, source, prefix,
 * ttl and timeout in ms, hosts, exec's argv in order); a later layer that
 * sets headers replaces them. */
static void test_cred_headers_key(void **state)
{
    struct settings s;
    struct settings_error err;
    struct settings_header h;
    const char *rest, *v;
    size_t vl;

    (void)state;
    settings_init(&s);
    assert_int_equal(
        apply(&s,
              "{\"credentials\": {\"headers\": [{\"hosts\": [\"api.a.test\", \"*.b.test:8443\"], "
              "\"name\": \"Authorization\", \"value\": {\"file\": \"/run/s/tok\", \"prefix\": "
              "\"Bearer \"}}, {\"hosts\": [\"c.test\"], \"name\": \"X-Key\", \"value\": {\"exec\": "
              "[\"/usr/bin/h\", \"a b\", \"\"], \"ttl\": 300, \"timeout\": 2.5}}, {\"hosts\": "
              "[\"d.test\"], \"name\": \"X-Env\", \"value\": {\"env\": \"TOK\"}}]}}",
              &err),
        0);
    assert_int_equal(s.credentials.headers.n, 3);
    assert_int_equal(settings_header_split(s.credentials.headers.items[0].value, &h), 0);
    assert_int_equal(h.name_len, 13);
    assert_memory_equal(h.name, "Authorization", 13);
    assert_int_equal(h.kind, SETTINGS_HDR_FILE);
    assert_memory_equal(h.source, "/run/s/tok", h.source_len);
    assert_int_equal(h.prefix_len, 7);
    assert_memory_equal(h.prefix, "Bearer ", 7);
    assert_int_equal(h.ttl_ms, 0);
    rest = h.rest;
    assert_int_equal(settings_credential_next(&rest, 'h', &v, &vl), 1);
    assert_memory_equal(v, "api.a.test", vl);
    assert_int_equal(settings_credential_next(&rest, 'h', &v, &vl), 1);
    assert_memory_equal(v, "*.b.test:8443", vl);
    assert_int_equal(settings_credential_next(&rest, 'h', &v, &vl), 0);
    assert_int_equal(settings_header_split(s.credentials.headers.items[1].value, &h), 0);
    assert_int_equal(h.kind, SETTINGS_HDR_EXEC);
    assert_int_equal(h.source_len, 0);
    assert_int_equal(h.prefix_len, 0);
    assert_int_equal(h.ttl_ms, 300000);
    assert_int_equal(h.timeout_ms, 2500);
    rest = h.rest;
    assert_int_equal(settings_credential_next(&rest, 'x', &v, &vl), 1);
    assert_memory_equal(v, "/usr/bin/h", vl);
    assert_int_equal(settings_credential_next(&rest, 'x', &v, &vl), 1);
    assert_memory_equal(v, "a b", vl);
    assert_int_equal(settings_credential_next(&rest, 'x', &v, &vl), 1);
    assert_int_equal(vl, 0);
    assert_int_equal(settings_credential_next(&rest, 'x', &v, &vl), 0);
    assert_int_equal(settings_header_split(s.credentials.headers.items[2].value, &h), 0);
    assert_int_equal(h.kind, SETTINGS_HDR_ENV);
    assert_memory_equal(h.source, "TOK", 3);
    assert_int_equal(h.timeout_ms, 0);
    assert_string_equal(s.credentials.headers.items[1].list, "credentials.headers");
    assert_int_equal(s.credentials.headers.items[1].index, 1);
    /* a later layer replaces the list */
    assert_int_equal(apply(&s,
                           "{\"credentials\": {\"headers\": [{\"hosts\": [\"e.test\"], \"name\": "
                           "\"X-E\", \"value\": {\"env\": \"E\"}}]}}",
                           &err),
                     0);
    assert_int_equal(s.credentials.headers.n, 1);
    assert_int_equal(apply(&s, "{\"credentials\": {\"headers\": []}}", &err), 0);
    assert_int_equal(s.credentials.headers.n, 0);
    settings_free(&s);
}

/* credentials (issue 24): the text form reads back; a later layer that
 * sets envVars replaces them and keeps files; allowPlaintextInject is a
 * scalar; the object is recorded where it was given. */
static void test_credentials_key(void **state)
{
    struct settings s;
    struct settings_error err;
    struct settings_credential cr;
    const char *rest, *v;
    size_t vl;

    (void)state;
    settings_init(&s);
    assert_int_equal(
        apply(&s,
              "{\"credentials\": {\"allowPlaintextInject\": true, \"envVars\": [{\"name\": "
              "\"GH\", \"mode\": \"mask\", \"injectHosts\": [\"github.com\", \"*.x.com\"], "
              "\"require\": true, \"requireHeader\": \"X-Api-Key\"}], "
              "\"files\": [{\"path\": \"~/.tok\", \"mode\": \"mask\", \"extract\": "
              "\"t=(.*)\", \"onExtractNoMatch\": \"deny\", \"decode\": \"jwt\", "
              "\"maskClaims\": [\"sub\", \"a b\"], \"maskDuplicates\": true}]}}",
              &err),
        0);
    assert_int_equal(s.credentials.given.set, 1);
    assert_int_equal(s.credentials.plaintext.on, 1);
    assert_int_equal(s.credentials.env_vars.n, 1);
    assert_int_equal(settings_credential_split(s.credentials.env_vars.items[0].value, &cr), 0);
    assert_true(!cr.file && cr.mask && cr.name_len == 2 && memcmp(cr.name, "GH", 2) == 0);
    assert_true(cr.extract_len == 0 && !cr.jwt && !cr.mask_duplicates);
    assert_int_equal(cr.on_no_match, SETTINGS_NOMATCH_ERROR);
    rest = cr.rest;
    assert_int_equal(settings_credential_next(&rest, 'h', &v, &vl), 1);
    assert_true(vl == 10 && memcmp(v, "github.com", 10) == 0);
    assert_int_equal(settings_credential_next(&rest, 'h', &v, &vl), 1);
    assert_true(vl == 7 && memcmp(v, "*.x.com", 7) == 0);
    assert_int_equal(settings_credential_next(&rest, 'h', &v, &vl), 0);
    rest = cr.rest;
    assert_int_equal(settings_credential_next(&rest, 'r', &v, &vl), 1);
    assert_true(vl == 9 && memcmp(v, "X-Api-Key", 9) == 0);
    assert_int_equal(settings_credential_split(s.credentials.files.items[0].value, &cr), 0);
    assert_true(cr.file && cr.mask && cr.jwt && cr.mask_duplicates);
    assert_true(cr.extract_len == 6 && memcmp(cr.extract, "t=(.*)", 6) == 0);
    assert_int_equal(cr.on_no_match, SETTINGS_NOMATCH_DENY);
    rest = cr.rest;
    assert_int_equal(settings_credential_next(&rest, 'c', &v, &vl), 1);
    assert_true(vl == 3 && memcmp(v, "sub", 3) == 0);
    assert_int_equal(settings_credential_next(&rest, 'c', &v, &vl), 1);
    assert_true(vl == 3 && memcmp(v, "a b", 3) == 0);
    assert_int_equal(settings_credential_next(&rest, 'h', &v, &vl), 0);
    /* a later layer: envVars replaced, files kept */
    assert_int_equal(apply(&s, "{\"credentials\": {\"envVars\": [{\"name\": \"A\", \"mode\": "
                               "\"deny\"}, {\"name\": \"B\", \"mode\": \"deny\"}]}}",
                           &err),
                     0);
    assert_int_equal(s.credentials.env_vars.n, 2);
    assert_int_equal(s.credentials.files.n, 1);
    assert_int_equal(s.credentials.plaintext.on, 1);
    assert_int_equal(settings_credential_split(s.credentials.env_vars.items[1].value, &cr), 0);
    assert_true(!cr.mask && cr.name_len == 1 && cr.name[0] == 'B' && !cr.exec);
    /* value: a helper program (issue 24 item 4) */
    assert_int_equal(apply(&s, "{\"credentials\": {\"envVars\": [{\"name\": \"GH\", \"mode\": "
                               "\"mask\", \"value\": {\"exec\": [\"/usr/bin/gh\", \"auth\", "
                               "\"token\"], \"ttl\": 3600, \"timeout\": 2.5}, \"injectHosts\": "
                               "[\"api.github.com\"]}]}}",
                           &err),
                     0);
    assert_int_equal(settings_credential_split(s.credentials.env_vars.items[0].value, &cr), 0);
    assert_true(cr.mask && cr.exec && cr.ttl_ms == 3600000 && cr.timeout_ms == 2500);
    rest = cr.rest;
    assert_int_equal(settings_credential_next(&rest, 'x', &v, &vl), 1);
    assert_true(vl == 11 && memcmp(v, "/usr/bin/gh", 11) == 0);
    assert_int_equal(settings_credential_next(&rest, 'x', &v, &vl), 1);
    assert_int_equal(settings_credential_next(&rest, 'x', &v, &vl), 1);
    assert_true(vl == 5 && memcmp(v, "token", 5) == 0);
    assert_int_equal(settings_credential_next(&rest, 'x', &v, &vl), 0);
    rest = cr.rest;
    assert_int_equal(settings_credential_next(&rest, 'h', &v, &vl), 1);
    assert_true(vl == 14 && memcmp(v, "api.github.com", 14) == 0);
    settings_free(&s);
}

static void test_mitm_proxy_key(void **state)
{
    struct settings s;
    struct settings_error err;

    (void)state;
    settings_init(&s);
    assert_int_equal(s.network.mitm_proxy.given.set, 0);
    assert_int_equal(apply(&s,
                           "{\"network\": {\"mitmProxy\": {\"socketPath\": \"/run/m.sock\", "
                           "\"domains\": [\"*.corp.example\", \"api.example.com:443\"]}}}",
                           &err),
                     0);
    assert_int_equal(s.network.mitm_proxy.given.set, 1);
    assert_int_equal(s.network.mitm_proxy.given.line, 1);
    assert_int_equal(s.network.mitm_proxy.given.col, 14);
    assert_string_equal(s.network.mitm_proxy.socket_path, "/run/m.sock");
    assert_int_equal(s.network.mitm_proxy.domains.n, 2);
    assert_string_equal(s.network.mitm_proxy.domains.items[1].value, "api.example.com:443");
    assert_int_equal(apply(&s, "{\"network\": {\"allowedDomains\": []}}", &err), 0);
    assert_int_equal(s.network.mitm_proxy.given.set, 1);
    assert_int_equal(apply(&s,
                           "{\"network\": {\"mitmProxy\": {\"socketPath\": \"/m2\", "
                           "\"domains\": [\"b.example\"]}}}",
                           &err),
                     0);
    assert_string_equal(s.network.mitm_proxy.socket_path, "/m2");
    assert_int_equal(s.network.mitm_proxy.domains.n, 1);
    settings_free(&s);
}

static void test_transparent_key(void **state)
{
    struct settings s;
    struct settings_error err;

    (void)state;
    settings_init(&s);
    assert_int_equal(s.network.transparent, 0);
    assert_int_equal(apply(&s, "{\"network\": {\"transparent\": true}}", &err), 0);
    assert_int_equal(s.network.transparent, 1);
    assert_int_equal(apply(&s, "{\"network\": {\"allowedDomains\": []}}", &err), 0);
    assert_int_equal(s.network.transparent, 1); /* a layer without the key keeps it */
    assert_int_equal(apply(&s, "{\"network\": {\"transparent\": false}}", &err), 0);
    assert_int_equal(s.network.transparent, 0);
    assert_int_equal(apply(&s, "{\"network\": {\"transparent\": \"yes\"}}", &err), -EINVAL);
    assert_non_null(strstr(err.msg, "transparent"));
    settings_free(&s);
}

/* network.requestRules (issue 23): each rule is one item at its object,
 * in the text form of settings.h; a later layer that sets the key replaces
 * the rules, one that does not keeps them. */
static void test_request_rules_key(void **state)
{
    static const char one[] =
        "{\"network\": {\"requestRules\": [\n"
        "  {\"host\": \"github.com\", \"method\": [\"GET\", \"POST\"],\n"
        "   \"path\": [\"/*/*/info/refs\", \"/ORG/**\"], \"action\": \"allow\"},\n"
        "  {\"action\": \"deny\", \"host\": \"*.example.com:8080\"}\n"
        "]}}";
    struct settings s;
    struct settings_error err;
    struct settings_request_rule r;

    (void)state;
    settings_init(&s);
    assert_int_equal(apply(&s, one, &err), 0);
    assert_int_equal(s.network.request_rules.n, 2);
    assert_string_equal(s.network.request_rules.items[0].value,
                        "allow\ngithub.com\nGET POST\n/*/*/info/refs\n/ORG/**");
    assert_int_equal(s.network.request_rules.items[0].line, 2);
    assert_int_equal(s.network.request_rules.items[0].col, 3);
    assert_string_equal(s.network.request_rules.items[0].list, "network.requestRules");
    assert_string_equal(s.network.request_rules.items[1].value, "deny\n*.example.com:8080\n");
    assert_int_equal(s.network.request_rules.items[1].index, 1);
    assert_int_equal(settings_request_rule_split(s.network.request_rules.items[0].value, &r), 0);
    assert_int_equal(r.deny, 0);
    assert_int_equal(r.host_len, 10);
    assert_int_equal(r.methods_len, 8);
    assert_int_equal(r.npaths, 2);
    assert_int_equal(r.path_lens[1], 7);
    assert_int_equal(settings_request_rule_split(s.network.request_rules.items[1].value, &r), 0);
    assert_int_equal(r.deny, 1);
    assert_int_equal(r.methods_len, 0);
    assert_int_equal(r.npaths, 0);
    assert_int_equal(settings_request_rule_split("permit\na.com\n", &r), -EINVAL);
    assert_int_equal(settings_request_rule_split("allow", &r), -EINVAL);
    /* a layer without the key keeps them; one with it replaces them */
    assert_int_equal(apply(&s, "{\"network\": {\"allowedDomains\": []}}", &err), 0);
    assert_int_equal(s.network.request_rules.n, 2);
    assert_int_equal(apply(&s,
                           "{\"network\": {\"requestRules\": [{\"host\": \"a.com\", "
                           "\"action\": \"deny\", \"method\": \"PUT\"}]}}",
                           &err),
                     0);
    assert_int_equal(s.network.request_rules.n, 1);
    assert_string_equal(s.network.request_rules.items[0].value, "deny\na.com\nPUT");
    /* a bad layer changes nothing */
    assert_int_equal(apply(&s,
                           "{\"network\": {\"requestRules\": [{\"host\": \"b.com\", "
                           "\"action\": \"deny\"}, {\"host\": \"c.com\"}]}}",
                           &err),
                     -EINVAL);
    assert_int_equal(s.network.request_rules.n, 1);
    assert_int_equal(apply(&s, "{\"network\": {\"requestRules\": []}}", &err), 0);
    assert_int_equal(s.network.request_rules.n, 0);
    settings_free(&s);
}

/* network.denyMessage (issue 26): one line of printable ASCII, 1 to 200
 * bytes, replaced by a later layer; anything else is refused, located. */
static void test_deny_message_key(void **state)
{
    static const char *const bad[] = {
        "{\"network\": {\"denyMessage\": \"\"}}",
        "{\"network\": {\"denyMessage\": 1}}",
        "{\"network\": {\"denyMessage\": null}}",
        "{\"network\": {\"denyMessage\": \"two\\nlines\"}}",
        "{\"network\": {\"denyMessage\": \"tab\\there\"}}",
        "{\"network\": {\"denyMessage\": \"caf\\u00e9\"}}",
        "{\"network\": {\"denyMessage\": \"del\\u007f\"}}",
    };
    struct settings s;
    struct settings_error err;
    char big[300];
    (void)state;

    settings_init(&s);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(apply(&s, bad[i], &err), -EINVAL);
        if (strstr(err.msg, "network.denyMessage") == NULL)
            fail_msg("case %zu: '%s' does not name the key", i, err.msg);
        assert_null(s.network.deny_message);
    }
    snprintf(big, sizeof(big), "{\"network\": {\"denyMessage\": \"%0201d\"}}", 0);
    assert_int_equal(apply(&s, big, &err), -EINVAL);
    assert_int_equal(apply(&s, "{\"network\": {\"denyMessage\": \"ask #infra\"}}", &err), 0);
    assert_string_equal(s.network.deny_message, "ask #infra");
    assert_int_equal(apply(&s, "{\"network\": {\"denyMessage\": \"see go/egress\"}}", &err), 0);
    assert_string_equal(s.network.deny_message, "see go/egress");
    settings_free(&s);
}

/* The schema's key at path ("network.allowedDomains"), or NULL. */
static json_t *schema_key(json_t *schema, const char *path)
{
    json_t *node = schema;
    char part[128];

    while (node != NULL && *path != '\0') {
        size_t n = strcspn(path, ".");
        snprintf(part, sizeof(part), "%.*s", (int)n, path);
        node = json_object_get(json_object_get(node, "properties"), part);
        path += n + (path[n] == '.');
    }
    return node;
}

/* Every key of the loader's key table is in the shipped schema (the other
 * way round, check_schema_keys: the loader knows each key of the schema,
 * also those a validator reads, such as network.parentProxy.http). */
static void check_table_in_schema(json_t *schema)
{
    char path[128];
    size_t i = 0;

    for (; settings_key_path(i, path, sizeof(path)) != NULL; i++) {
        if (schema_key(schema, path) == NULL)
            print_error("key table: %s is not in conf/settings.schema.json\n", path);
        assert_non_null(schema_key(schema, path));
    }
    assert_true(i >= 91); /* the table is walked whole */
}

static void test_schema_matches_loader(void **state)
{
    json_error_t je;
    json_t *schema;
    char p[1200];
    size_t count = 0;

    (void)state;
    path_in(p, sizeof(p), data_dir, "../../../conf/settings.schema.json");
    schema = json_load_file(p, 0, &je);
    if (schema == NULL)
        print_error("%s:%d: %s\n", p, je.line, je.text);
    assert_non_null(schema);
    assert_string_equal(json_string_value(json_object_get(schema, "$schema")),
                        "https://json-schema.org/draft/2020-12/schema");
    check_schema_keys(json_object_get(schema, "properties"), NULL, NULL, &count);
    assert_int_equal(count, 118); /* 20 top-level keys, 68 nested, 30 at the third level */
    check_table_in_schema(schema);
    json_decref(schema);
}

/* ------------------------------------------------------------------------ */

static void rm_tree(const char *dir)
{
    static const char *const names[] = {
        "nul.txt", "nul.json", "managed.json", "allow-only.txt", "files.json", "env.json",
        "cli.json", "big.json", "big.txt", "big-list.json", "xdg/sluice/settings.json",
        "home/.srt-settings.json", "xdg/sluice", "xdg", "home"};
    char p[700];

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        path_in(p, sizeof(p), dir, names[i]);
        if (unlink(p) < 0)
            (void)rmdir(p);
    }
    (void)rmdir(dir);
}

int main(void)
{
    const char *data = getenv("SLUICE_TEST_DATA");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_reference_file),
        cmocka_unit_test(test_bom_and_all_keys),
        cmocka_unit_test(test_misspelled_key_file),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_notices),
        cmocka_unit_test(test_unix_sockets_kept),
        cmocka_unit_test(test_dns_servers_valid),
        cmocka_unit_test(test_list_files),
        cmocka_unit_test(test_list_file_missing),
        cmocka_unit_test(test_list_file_nul),
        cmocka_unit_test(test_layering),
        cmocka_unit_test(test_managed_lock),
        cmocka_unit_test(test_layering_files_replace_inline),
        cmocka_unit_test(test_error_leaves_settings_unchanged),
        cmocka_unit_test(test_load),
        cmocka_unit_test(test_big_json_array),
        cmocka_unit_test(test_big_list_file),
        cmocka_unit_test(test_jsonpos),
        cmocka_unit_test(test_proxy_keys),
        cmocka_unit_test(test_sandbox_environment_keys),
        cmocka_unit_test(test_environment_set_path),
        cmocka_unit_test(test_schema_matches_loader),
        cmocka_unit_test(test_mitm_proxy_key),
        cmocka_unit_test(test_credentials_key),
        cmocka_unit_test(test_cred_headers_key),
        cmocka_unit_test(test_transparent_key),
        cmocka_unit_test(test_tls_terminate_key),
        cmocka_unit_test(test_request_rules_key),
        cmocka_unit_test(test_deny_message_key),
    };
    int rc;

    if (data != NULL) {
        snprintf(data_dir, sizeof(data_dir), "%s/settings", data);
    } else { /* run by hand: tests/data next to this source file */
        const char *f = __FILE__, *cut = strstr(f, "/settings/test_settings.c");
        int n = cut ? (int)(cut - f) : 1;
        snprintf(data_dir, sizeof(data_dir), "%.*s/data/settings", n, cut ? f : ".");
    }
    snprintf(tmp_dir, sizeof(tmp_dir), "/tmp/sluice-test-settings-XXXXXX");
    if (mkdtemp(tmp_dir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    rm_tree(tmp_dir);
    return rc;
}
