/* proxy/replay_parse.c - one line of the connection log read back (README
 * "Connection log"): logfmt as common_logfmt_value writes it (key=value separated
 * by one space; a value in double quotes when it is empty or holds a space,
 * '"', '=', '\' or a control byte; inside quotes '"' and '\' escaped and
 * control bytes written \xNN) or one JSON object per line. The input is
 * hostile (a log file anyone may hand to `sluice check --replay`): every
 * byte is checked, nothing is assumed about length beyond len, and a line
 * that is not exactly a record is refused with a reason. No I/O. */
#include "proxy/replay.h"

#include "common/common.h"

#include <errno.h>
#include <jansson.h>
#include <string.h>

#define REPLAY_MAX_FIELDS 32

/* The keys a replay reads; the others are checked for syntax and left. */
struct fields {
    const char *event, *protocol, *decision, *host, *method, *url, *rule, *source, *addr;
    const char *port_text; /* logfmt */
    long long port_num;    /* JSON */
    int has_port, port_is_num;
};

static const char **field_slot(struct fields *f, const char *key, size_t klen)
{
#define SLOT(name)                                                                                 \
    if (klen == sizeof(#name) - 1 && memcmp(key, #name, klen) == 0)                                \
        return &f->name;
    SLOT(event)
    SLOT(protocol)
    SLOT(decision)
    SLOT(host)
    SLOT(method)
    SLOT(url)
    SLOT(rule)
    SLOT(source)
    SLOT(addr)
#undef SLOT
    if (klen == 4 && memcmp(key, "port", 4) == 0)
        return &f->port_text;
    return NULL;
}

/* ---- logfmt ---- */

/* 1 when c may stand in an unquoted value (common_logfmt_value quotes the rest) */
static int bare_ok(unsigned char c)
{
    return c > 0x20 && c != 0x7f && c != '"' && c != '=' && c != '\\';
}

/* One value at line[*pos], decoded into out (room for it is guaranteed by
 * the caller: a value never decodes longer than it is written). */
static int logfmt_value(const char *line, size_t len, size_t *pos, char *out, const char **why)
{
    size_t i = *pos, o = 0;

    if (i < len && line[i] != '"') {
        while (i < len && line[i] != ' ') {
            if (!bare_ok((unsigned char)line[i])) {
                *why = "a byte that must be quoted in an unquoted value";
                return -EINVAL;
            }
            out[o++] = line[i++];
        }
        if (o == 0) {
            *why = "an empty value must be written \"\"";
            return -EINVAL;
        }
        out[o] = '\0';
        *pos = i;
        return 0;
    }
    if (i >= len) {
        *why = "a key without a value";
        return -EINVAL;
    }
    for (i++;; i++) {
        unsigned char c;
        if (i >= len) {
            *why = "a quoted value without its closing quote";
            return -EINVAL;
        }
        c = (unsigned char)line[i];
        if (c == '"')
            break;
        if (c < 0x20 || c == 0x7f) {
            *why = "a raw control byte in a quoted value";
            return -EINVAL;
        }
        if (c != '\\') {
            out[o++] = (char)c;
            continue;
        }
        if (i + 1 < len && (line[i + 1] == '"' || line[i + 1] == '\\')) {
            out[o++] = line[++i];
            continue;
        }
        if (i + 3 < len && line[i + 1] == 'x' &&
            common_hex_digit((unsigned char)line[i + 2]) >= 0 &&
            common_hex_digit((unsigned char)line[i + 3]) >= 0) {
            int v = common_hex_digit((unsigned char)line[i + 2]) * 16 +
                    common_hex_digit((unsigned char)line[i + 3]);
            if (v == 0) {
                *why = "a NUL byte (\\x00) in a value";
                return -EINVAL;
            }
            out[o++] = (char)v;
            i += 3;
            continue;
        }
        *why = "a bad escape in a quoted value (only \\\", \\\\ and \\xNN)";
        return -EINVAL;
    }
    i++; /* the closing quote */
    if (i < len && line[i] != ' ') {
        *why = "text after a quoted value";
        return -EINVAL;
    }
    out[o] = '\0';
    *pos = i;
    return 0;
}

static int parse_logfmt(const char *line, size_t len, char *buf, struct fields *f, const char **why)
{
    size_t pos = 0, used = 0, nkeys = 0;
    struct {
        size_t off, len;
    } keys[REPLAY_MAX_FIELDS];

    while (pos < len) {
        size_t k = pos, klen;
        const char **slot;
        if (pos > 0) {
            if (line[pos] != ' ' || pos + 1 >= len) {
                *why = "fields are separated by one space";
                return -EINVAL;
            }
            k = ++pos;
        }
        while (pos < len && ((line[pos] >= 'a' && line[pos] <= 'z') || line[pos] == '_'))
            pos++;
        klen = pos - k;
        if (klen == 0 || pos >= len || line[pos] != '=') {
            *why = "expected key=value (a key is lower-case letters and '_')";
            return -EINVAL;
        }
        for (size_t j = 0; j < nkeys; j++)
            if (keys[j].len == klen && memcmp(line + keys[j].off, line + k, klen) == 0) {
                *why = "a key given twice";
                return -EINVAL;
            }
        if (nkeys == REPLAY_MAX_FIELDS) {
            *why = "too many fields";
            return -EINVAL;
        }
        keys[nkeys].off = k;
        keys[nkeys++].len = klen;
        pos++; /* '=' */
        if (logfmt_value(line, len, &pos, buf + used, why) < 0)
            return -EINVAL;
        slot = field_slot(f, line + k, klen);
        if (slot != NULL)
            *slot = buf + used;
        used += strlen(buf + used) + 1;
    }
    if (f->port_text != NULL)
        f->has_port = 1;
    return 0;
}

/* ---- JSON ---- */

static int parse_json(const char *line, size_t len, char *buf, size_t cap, struct fields *f,
                      const char **why)
{
    json_error_t err;
    json_t *o = json_loadb(line, len, JSON_REJECT_DUPLICATES, &err), *v;
    const char *key;
    size_t used = 0;
    int rc = -EINVAL;

    if (o == NULL || !json_is_object(o)) {
        *why = o == NULL ? "not valid JSON (or a key given twice)" : "not a JSON object";
        goto out;
    }
    json_object_foreach(o, key, v)
    {
        const char **slot = field_slot(f, key, strlen(key));
        size_t n;
        if (strcmp(key, "port") == 0) {
            if (!json_is_integer(v)) {
                *why = "port is not a number";
                goto out;
            }
            f->port_num = json_integer_value(v);
            f->has_port = f->port_is_num = 1;
            continue;
        }
        if (slot == NULL)
            continue;
        if (!json_is_string(v)) {
            *why = "a field that must be a string is not";
            goto out;
        }
        n = json_string_length(v);
        if (memchr(json_string_value(v), '\0', n) != NULL || used + n + 1 > cap) {
            *why = "a string with a NUL byte, or too long";
            goto out;
        }
        memcpy(buf + used, json_string_value(v), n + 1);
        *slot = buf + used;
        used += n + 1;
    }
    rc = 0;
out:
    json_decref(o);
    return rc;
}

/* ---- the record ---- */

static int one_of(const char *s, const char *const *set)
{
    for (; *set != NULL; set++)
        if (strcmp(s, *set) == 0)
            return 1;
    return 0;
}

static int parse_port(const struct fields *f, uint16_t *port, const char **why)
{
    long long v = 0;

    if (f->port_is_num) {
        v = f->port_num;
    } else {
        const char *p = f->port_text;
        if (*p == '\0' || strlen(p) > 5 || (p[0] == '0' && p[1] != '\0')) {
            *why = "port is not a number from 0 to 65535";
            return -EINVAL;
        }
        for (; *p != '\0'; p++) {
            if (*p < '0' || *p > '9') {
                *why = "port is not a number from 0 to 65535";
                return -EINVAL;
            }
            v = v * 10 + (*p - '0');
        }
    }
    if (v < 0 || v > 65535) {
        *why = "port is not a number from 0 to 65535";
        return -EINVAL;
    }
    *port = (uint16_t)v;
    return 0;
}

/* The path of a logged URL: "http[s]://AUTHORITY[PATH]" (the proxy logs it
 * without its query); "/" when there is none. */
static int url_path(const char *url, int tls, const char **path, const char **why)
{
    const char *scheme = tls ? "https://" : "http://";
    size_t n = strlen(scheme);
    const char *a;

    if (strncmp(url, scheme, n) != 0) {
        *why = tls ? "url is not an https:// URL" : "url is not an http:// URL";
        return -EINVAL;
    }
    a = url + n;
    a += strcspn(a, "/?#");
    if (a == url + n) {
        *why = "url has no host";
        return -EINVAL;
    }
    *path = *a == '/' ? a : "/";
    return 0;
}

int replay_protocol_udp(const char *protocol)
{
    return strcmp(protocol, "socks5-udp") == 0 || strcmp(protocol, "transparent-udp") == 0;
}

static int check_record(const struct fields *f, struct replay_record *r, const char **why)
{
    static const char *const protocols[] = {"connect",     "http", "https",
                                            "socks5",      "socks5-udp",
                                            "transparent", "transparent-udp",
                                            "dns",         NULL};
    static const char *const decisions[] = {"allow", "deny", "would_deny", NULL};
    int dns;

    if (f->protocol == NULL || !one_of(f->protocol, protocols)) {
        *why = f->protocol == NULL
                   ? "a decision without a protocol"
                   : "an unknown protocol (connect, http, https, socks5, socks5-udp, "
                     "transparent, transparent-udp, dns)";
        return -EINVAL;
    }
    if (f->decision == NULL || !one_of(f->decision, decisions)) {
        *why = f->decision == NULL ? "a decision record without a decision"
                                   : "an unknown decision (allow, deny, would_deny)";
        return -EINVAL;
    }
    if (f->host == NULL) {
        *why = "a decision without a host";
        return -EINVAL;
    }
    if (policy_host_normalize(f->host, strlen(f->host), &r->h, why) < 0)
        return -EINVAL;
    dns = strcmp(f->protocol, "dns") == 0;
    r->port = 0;
    if (f->has_port && parse_port(f, &r->port, why) < 0)
        return -EINVAL;
    if (!dns && r->port == 0) {
        *why = "a decision without a port (1-65535)";
        return -EINVAL;
    }
    if (dns && r->port != 0) {
        *why = "a dns decision with a port";
        return -EINVAL;
    }
    if (dns && r->h.kind != POLICY_HOST_NAME) { /* the resolver judges names only */
        *why = "a dns decision for an IP address";
        return -EINVAL;
    }
    r->path = NULL;
    if ((f->method != NULL || f->url != NULL) && strcmp(f->protocol, "http") != 0 &&
        strcmp(f->protocol, "https") != 0) {
        *why = "method or url in a record that is not protocol=http or https";
        return -EINVAL;
    }
    if ((f->method == NULL) != (f->url == NULL)) {
        *why = "method without url, or url without method";
        return -EINVAL;
    }
    if (f->method != NULL) {
        const char *m = f->method;
        for (; *m != '\0' && common_is_tchar((unsigned char)*m); m++)
            ;
        if (*m != '\0' || m == f->method) {
            *why = "method is not a method (an RFC 9110 token)";
            return -EINVAL;
        }
    }
    if (f->url != NULL && url_path(f->url, strcmp(f->protocol, "https") == 0, &r->path, why) < 0)
        return -EINVAL;
    r->protocol = f->protocol;
    r->decision = f->decision;
    r->host = f->host;
    r->method = f->method;
    r->url = f->url;
    r->rule = f->rule;
    r->source = f->source;
    r->addr = f->addr;
    return 1;
}

int replay_parse_line(const char *line, size_t len, char *buf, size_t cap, struct replay_record *r,
                      const char **why)
{
    struct fields f;
    int rc;

    memset(&f, 0, sizeof(f));
    memset(r, 0, sizeof(*r));
    if (len == 0) {
        *why = "an empty line";
        return -EINVAL;
    }
    if (cap < len + 1) {
        *why = "line too long";
        return -EINVAL;
    }
    if (line[0] == '{')
        rc = parse_json(line, len, buf, cap, &f, why);
    else
        rc = parse_logfmt(line, len, buf, &f, why);
    if (rc < 0)
        return rc;
    if (f.event == NULL) {
        *why = "a record without an event";
        return -EINVAL;
    }
    if (strcmp(f.event, "decision") != 0)
        return 0;
    return check_record(&f, r, why);
}
