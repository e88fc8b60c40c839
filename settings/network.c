/* settings/network.c - validators of the "network" keys with rules of
 * their own: deniedDomainReasons, denyPrivateAddresses, mode, parentProxy,
 * ambiguousRequestTarget, allowPlaintextHeaderSet, stripResponseHeaders,
 * dnsServers, tlsTerminate.
 */
#include "settings/settings-int.h"

#include "common/common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/un.h>

/* ------------------------------------------------------------------------ */
/* Keys with their own rules                                                 */

static int reason_ok(struct ctx *c, const char *key, json_t *e)
{
    (void)key;
    if (!json_is_string(e))
        return settings__fail(c, 0, "expected a string, got %s", settings__type_name(e));
    if (json_string_length(e) == 0)
        return settings__fail(c, 0, "must not be an empty string");
    return 0;
}

int settings__fn_reasons(struct ctx *c, json_t *v, const struct key_def *d)
{
    (void)d;
    return settings__string_map(c, v, &c->v->network.denied_domain_reasons,
                                "domain: reason strings", reason_ok);
}

int settings__fn_mode(struct ctx *c, json_t *v, const struct key_def *d)
{
    const char *m;
    char q[128];

    (void)d;
    if (!json_is_string(v))
        return settings__fail(c, 0, "expected \"enforce\" or \"report\", got %s",
                              settings__type_name(v));
    m = json_string_value(v);
    if (strcmp(m, "enforce") == 0) {
        c->v->network.mode = SETTINGS_MODE_ENFORCE;
        return 0;
    }
    if (strcmp(m, "report") == 0) {
        c->v->network.mode = SETTINGS_MODE_REPORT;
        return 0;
    }
    settings__quote(q, sizeof(q), m);
    return settings__fail(c, 0, "expected \"enforce\" or \"report\", got \"%s\"", q);
}

static const struct settings_checks *checks;

void settings_set_checks(const struct settings_checks *c)
{
    checks = c;
}

#define NO_CHECK "cannot be checked: this program has no rule grammar (policy/checks.c)"

static int check_proxy_url(const char *url, const char **why)
{
    if (checks == NULL || checks->proxy_url == NULL) {
        *why = NO_CHECK;
        return -EINVAL;
    }
    return checks->proxy_url(url, why);
}

static int check_no_proxy(const char *list, const char **why)
{
    if (checks == NULL || checks->no_proxy == NULL) {
        *why = NO_CHECK;
        return -EINVAL;
    }
    return checks->no_proxy(list, why);
}

int settings__check_rule_host(const char *pattern, const char **why)
{
    if (checks == NULL || checks->rule_host == NULL) {
        *why = NO_CHECK;
        return -EINVAL;
    }
    return checks->rule_host(pattern, why);
}

int settings__check_rule_path(const char *glob, const char **why)
{
    if (checks == NULL || checks->rule_path == NULL) {
        *why = NO_CHECK;
        return -EINVAL;
    }
    return checks->rule_path(glob, why);
}

/* network.parentProxy: {http, https, noProxy}; URLs and the noProxy list
 * are checked here so a mistake is reported where it is written. noProxy
 * may be a string ("a.com,10.0.0.0/8") or an array of entries. */
int settings__fn_parent(struct ctx *c, json_t *v, const struct key_def *d)
{
    const char *key, *why;
    struct jsonpos pos;
    json_t *m;
    int rc = 0;
    char *http = NULL, *https = NULL, *np = NULL;

    (void)d;
    if (!json_is_object(v))
        return settings__fail(c, 0, "expected an object {\"http\", \"https\", \"noProxy\"}, got %s",
                              settings__type_name(v));
    json_object_foreach(v, key, m) {
        settings__push_key(c, key);
        if (strcmp(key, "http") == 0 || strcmp(key, "https") == 0) {
            if (!json_is_string(m)) {
                rc = settings__fail(c, 0, "expected a proxy URL string, got %s",
                                    settings__type_name(m));
            } else if (check_proxy_url(json_string_value(m), &why) < 0) {
                rc = settings__fail(c, 0, "%s", why);
            } else {
                char **dst = key[4] == 's' ? &https : &http;
                free(*dst);
                *dst = strdup(json_string_value(m));
                if (*dst == NULL)
                    rc = settings__fail_nomem(c);
            }
        } else if (strcmp(key, "noProxy") == 0) {
            size_t i, len = 1;
            json_t *e;
            if (json_is_string(m)) {
                np = strdup(json_string_value(m));
            } else if (json_is_array(m)) {
                json_array_foreach(m, i, e) {
                    if (!json_is_string(e)) {
                        settings__push_index(c, i);
                        rc = settings__fail(c, 0, "expected a string, got %s",
                                            settings__type_name(e));
                        settings__pop(c);
                        break;
                    }
                    len += json_string_length(e) + 1;
                }
                if (rc == 0 && (np = calloc(1, len)) != NULL) {
                    size_t off = 0;
                    json_array_foreach(m, i, e) {
                        size_t n = json_string_length(e);
                        if (i > 0)
                            np[off++] = ',';
                        memcpy(np + off, json_string_value(e), n);
                        off += n;
                    }
                    np[off] = '\0';
                }
            } else {
                rc = settings__fail(c, 0, "expected a string or an array of strings, got %s",
                                    settings__type_name(m));
            }
            if (rc == 0 && np == NULL)
                rc = settings__fail_nomem(c);
            if (rc == 0 && check_no_proxy(np, &why) < 0)
                rc = settings__fail(c, 0, "%s", why);
        } else {
            rc = settings__fail(c, 1, "unknown key '%s' (parentProxy has http, https and noProxy)",
                                key);
        }
        settings__pop(c);
        if (rc < 0)
            break;
    }
    if (rc == 0 && http == NULL && https == NULL && np != NULL)
        rc = settings__fail(c, 0, "noProxy without http or https: name the parent proxy");
    if (rc < 0) {
        free(http);
        free(https);
        free(np);
        return rc;
    }
    free(c->v->network.parent_proxy.http);
    free(c->v->network.parent_proxy.https);
    free(c->v->network.parent_proxy.no_proxy);
    c->v->network.parent_proxy.http = http;
    c->v->network.parent_proxy.https = https;
    c->v->network.parent_proxy.no_proxy = np;
    c->v->network.parent_proxy.set = 1;
    settings__locate(c, 1, &pos);
    c->v->network.parent_proxy.file = c->name;
    c->v->network.parent_proxy.line = pos.line;
    c->v->network.parent_proxy.col = pos.col;
    return 0;
}

/* network.ambiguousRequestTarget: "refuse" | "asSpelled" | "normalize". */
int settings__fn_ambiguous(struct ctx *c, json_t *v, const struct key_def *d)
{
    const char *m;

    (void)d;
    if (!json_is_string(v))
        return settings__fail(c, 0, "expected \"refuse\", \"asSpelled\" or \"normalize\", got %s",
                              settings__type_name(v));
    m = json_string_value(v);
    if (strcmp(m, "refuse") == 0)
        c->v->network.ambiguous_request_target = SETTINGS_AMBIGUOUS_REFUSE;
    else if (strcmp(m, "asSpelled") == 0)
        c->v->network.ambiguous_request_target = SETTINGS_AMBIGUOUS_AS_SPELLED;
    else if (strcmp(m, "normalize") == 0)
        c->v->network.ambiguous_request_target = SETTINGS_AMBIGUOUS_NORMALIZE;
    else
        return settings__fail(c, 0, "expected \"refuse\", \"asSpelled\" or \"normalize\"");
    return 0;
}

/* network.denyMessage: one line of printable ASCII (it goes into 403
 * bodies, log lines and the terminal), 1 to 200 bytes. */
int settings__fn_deny_message(struct ctx *c, json_t *v, const struct key_def *d)
{
    const char *m;
    size_t n;

    (void)d;
    if (!json_is_string(v))
        return settings__fail(c, 0, "expected a string (one line), got %s", settings__type_name(v));
    m = json_string_value(v);
    n = json_string_length(v);
    if (n == 0 || n > 200)
        return settings__fail(c, 0, "expected 1 to 200 characters, got %zu", n);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)m[i] < 0x20 || (unsigned char)m[i] > 0x7e)
            return settings__fail(c, 0,
                                  "only printable ASCII on one line (it is sent in HTTP "
                                  "bodies and written to logs and terminals)");
    free(c->v->network.deny_message);
    c->v->network.deny_message = strdup(m);
    if (c->v->network.deny_message == NULL)
        return settings__fail_nomem(c);
    return 0;
}

/* network.allowPlaintextHeaderSet: lets filterRequest/credentials set
 * headers on plain HTTP in srt. sluice sets no header on a request (both
 * are refused), so true would promise something that cannot happen. */
int settings__fn_plaintext_set(struct ctx *c, json_t *v, const struct key_def *d)
{
    int b = 0, rc;

    (void)d;
    rc = settings__want_bool(c, v, &b);
    if (rc == 0 && b)
        return settings__fail(
            c, 0,
            "true has no meaning in sluice: it never sets headers on requests "
            "(filterRequest and credentials injection are not supported); remove it");
    return rc;
}

/* network.stripResponseHeaders: header names (tokens); the framing fields
 * cannot be stripped. */
int settings__fn_strip(struct ctx *c, json_t *v, const struct key_def *d)
{
    size_t i;
    json_t *e;
    int rc;

    rc = settings__check_strlist(c, v, 1);
    if (rc < 0)
        return rc;
    json_array_foreach(v, i, e) {
        const char *n = json_string_value(e);
        const char *why = NULL;
        for (const char *q = n; *q != '\0' && why == NULL; q++)
            if (!common_is_tchar((unsigned char)*q))
                why = "is not a header name (letters, digits and !#$%&'*+-.^_`|~)";
        if (why == NULL &&
            (strcasecmp(n, "content-length") == 0 || strcasecmp(n, "transfer-encoding") == 0))
            why = "frames the body and cannot be stripped";
        if (why != NULL) {
            settings__push_index(c, i);
            rc = settings__fail(c, 0, "\"%s\" %s", n, why);
            settings__pop(c);
            return rc;
        }
    }
    settings__list_free(&c->v->network.strip_response_headers);
    return settings__take_strlist(c, v, &c->v->network.strip_response_headers, d->list, 1);
}

/* "1..65535", digits only, no leading zero. */
static int parse_port(const char *s, size_t len)
{
    unsigned long v = 0;

    if (len == 0 || len > 5 || s[0] == '0')
        return 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return 0;
        v = v * 10 + (unsigned long)(s[i] - '0');
    }
    return v <= 65535;
}

/* IP, IP:PORT, [v6]:PORT, [v6] or bare v6. Returns 1 if valid. */
static int dns_server_ok(const char *s)
{
    unsigned char a[16];
    char host[64];
    const char *colon, *port = NULL;
    size_t hlen, ncolon = 0;
    int want_family;

    if (s[0] == '[') {
        const char *close = strchr(s, ']');
        if (close == NULL)
            return 0;
        hlen = (size_t)(close - s - 1);
        if (hlen >= sizeof(host))
            return 0;
        memcpy(host, s + 1, hlen);
        host[hlen] = '\0';
        if (close[1] == ':')
            port = close + 2;
        else if (close[1] != '\0')
            return 0;
        want_family = 6;
    } else {
        for (const char *p = s; *p; p++)
            ncolon += *p == ':';
        colon = strchr(s, ':');
        if (ncolon == 1) {
            hlen = (size_t)(colon - s);
            port = colon + 1;
            want_family = 4;
        } else {
            hlen = strlen(s);
            want_family = ncolon == 0 ? 4 : 6;
        }
        if (hlen >= sizeof(host))
            return 0;
        memcpy(host, s, hlen);
        host[hlen] = '\0';
    }
    if (port != NULL && !parse_port(port, strlen(port)))
        return 0;
    /* as policy_addr_parse: no zone id */
    if (want_family == 4)
        return inet_pton(AF_INET, host, a) == 1;
    return strchr(host, '%') == NULL && inet_pton(AF_INET6, host, a) == 1;
}

int settings__fn_dns(struct ctx *c, json_t *v, const struct key_def *d)
{
    int rc = settings__check_each(c, v, dns_server_ok, "DNS server",
                                  "expected IP, IP:PORT, [IPv6]:PORT or IPv6, port 1..65535");
    if (rc < 0)
        return rc;
    return settings__take_strlist(c, v, &c->v->network.dns_servers, d->list, 0);
}

/* ------------------------------------------------------------------------ */
/* network.tlsTerminate (srt 0.0.83)                                         */

/* A path in the object: a non-empty string; relative to the settings
 * file's directory (as list files are). */
static int tls_path_dup(struct ctx *c, json_t *v, char **out)
{
    const char *p;
    size_t n;

    if (!json_is_string(v))
        return settings__fail(c, 0, "expected a path string, got %s", settings__type_name(v));
    p = json_string_value(v);
    if (p[0] == '\0' || strlen(p) != json_string_length(v))
        return settings__fail(c, 0, "expected a path, got an empty string or a NUL byte");
    if (p[0] != '/' && c->dir != NULL) {
        n = strlen(c->dir) + strlen(p) + 2;
        *out = malloc(n);
        if (*out != NULL)
            snprintf(*out, n, "%s/%s", c->dir, p);
    } else {
        *out = strdup(p);
    }
    return *out == NULL ? settings__fail_nomem(c) : 0;
}

int settings__fn_tls_path(struct ctx *c, json_t *v, const struct key_def *d)
{
    char **dst = (char **)settings__field(c, d), *p = NULL;
    int rc = tls_path_dup(c, v, &p);

    if (rc < 0)
        return rc;
    free(*dst);
    *dst = p;
    return 0;
}

/* excludeDomains: patterns as in allowedDomains, each checked (and located)
 * by the policy compile as allowedDomains' are. */
int settings__fn_tls_exclude(struct ctx *c, json_t *v, const struct key_def *d)
{
    return settings__take_strlist(c, v, (struct settings_list *)settings__field(c, d), d->list,
                                  1);
}

int settings__fn_tls_extra(struct ctx *c, json_t *v, const struct key_def *d)
{
    struct settings_list *l = settings__field(c, d);
    int rc = settings__take_strlist(c, v, l, d->list, 1);

    /* relative paths resolve against the settings file's directory */
    for (size_t i = 0; rc == 0 && i < l->n; i++) {
        char *p = l->items[i].value, *abs;
        size_t n;
        if (p[0] == '/' || c->dir == NULL)
            continue;
        n = strlen(c->dir) + strlen(p) + 2;
        abs = malloc(n);
        if (abs == NULL)
            return settings__fail_nomem(c);
        snprintf(abs, n, "%s/%s", c->dir, p);
        free(p);
        l->items[i].value = abs;
    }
    return rc;
}

int settings__fn_tls_scope(struct ctx *c, json_t *v, const struct key_def *d)
{
    const char *m;

    (void)d;
    if (!json_is_string(v))
        return settings__fail(c, 0, "expected \"all\" or \"needed\", got %s",
                              settings__type_name(v));
    m = json_string_value(v);
    if (strcmp(m, "all") == 0)
        c->v->network.tls_terminate.scope = SETTINGS_TLS_SCOPE_ALL;
    else if (strcmp(m, "needed") == 0)
        c->v->network.tls_terminate.scope = SETTINGS_TLS_SCOPE_NEEDED;
    else
        return settings__fail(c, 0, "expected \"all\" or \"needed\"");
    return 0;
}

/* The object as a whole, after its keys: caCertPath and caKeyPath come
 * together or not at all (srt), and the object was given. */
int settings__fn_tls_terminate(struct ctx *c, json_t *v, const struct key_def *d)
{
    int cert = json_object_get(v, "caCertPath") != NULL;
    int key = json_object_get(v, "caKeyPath") != NULL;

    if (cert != key)
        return settings__fail(c, 1, "caCertPath and caKeyPath come together: %s without %s",
                              cert ? "caCertPath" : "caKeyPath", cert ? "caKeyPath" : "caCertPath");
    (void)d;
    settings__given(c, &c->v->network.tls_terminate.given);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* network.mitmProxy (srt 0.0.83)                                            */

/* socketPath: a path as tlsTerminate's (relative to the settings file's
 * directory), short enough for a sockaddr_un. */
int settings__fn_mitm_socket(struct ctx *c, json_t *v, const struct key_def *d)
{
    char **dst = (char **)settings__field(c, d), *p = NULL;
    int rc = tls_path_dup(c, v, &p);

    if (rc < 0)
        return rc;
    if (strlen(p) >= sizeof(((struct sockaddr_un *)NULL)->sun_path)) {
        rc = settings__fail(c, 0, "the socket path '%.200s' is %zu bytes long; a Unix socket "
                            "path holds at most %zu", p, strlen(p),
                            sizeof(((struct sockaddr_un *)NULL)->sun_path) - 1);
        free(p);
        return rc;
    }
    free(*dst);
    *dst = p;
    return 0;
}

/* The object as a whole, after its keys: both are required (srt's schema),
 * domains holds at least one pattern; where it was given, for the message
 * that refuses it beside tlsTerminate. */
int settings__fn_mitm(struct ctx *c, json_t *v, const struct key_def *d)
{
    json_t *dom = json_object_get(v, "domains");

    (void)d;
    if (json_object_get(v, "socketPath") == NULL)
        return settings__fail(c, 1, "socketPath is required (the external proxy's Unix "
                                    "socket)");
    if (dom == NULL || json_array_size(dom) == 0)
        return settings__fail(c, 1, "domains is required and holds at least one pattern "
                                    "(hosts sent to the external proxy)");
    settings__given(c, &c->v->network.mitm_proxy.given);
    return 0;
}
