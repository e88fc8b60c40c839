/* policy/parent.c - network.parentProxy: which upstream (corporate) proxy an
 * allowed connection leaves through, if any.
 *
 * The settings key (srt 0.0.83) is {http, https, noProxy}; without it the
 * HTTPS_PROXY / HTTP_PROXY / NO_PROXY variables (upper case first, then lower
 * case) of sluice's own environment are used, as the reference does. This
 * file parses and matches; bridge/parent.c dials (CONNECT to the parent).
 *
 * Proxy URL: [http://][USER[:PASSWORD]@]HOST[:PORT][/]; HOST a name, an IPv4
 * address or a bracketed IPv6 address; PORT defaults to 80 (as Go and curl
 * do for http://). USER and PASSWORD may be percent-encoded; they become a
 * Basic Proxy-Authorization header. https:// (TLS to the proxy) and socks
 * URLs are refused with a message: sluice speaks plain HTTP CONNECT to it.
 *
 * Which one: a plain-HTTP request (absolute-form, port 80 usually) uses
 * http, everything else (CONNECT, SOCKS) uses https; when only one is set it
 * serves both. Bypass (a direct connection): loopback always (127.0.0.0/8,
 * ::1, localhost, *.localhost), and NO_PROXY entries, comma or space
 * separated, with Go's semantics (net/http/httpproxy): "*" bypasses all; an
 * IP address matches that address; a CIDR matches the addresses in it; a
 * name matches itself and its subdomains ("example.com" matches
 * a.example.com), a leading "." or "*." matches subdomains only; a ":PORT"
 * on an entry is ignored (the reference ignores it).
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "policy/policy.h"

#define NP_MAX 256

enum np_kind { NP_ALL, NP_NAME, NP_SUFFIX, NP_CIDR };

struct np_entry {
    enum np_kind kind;
    char name[POLICY_HOST_MAX + 2]; /* NP_NAME: "example.com"; NP_SUFFIX: ".example.com" */
    struct policy_addr addr;
    unsigned prefix;
};

struct policy_parent {
    struct policy_parent_proxy http, https;
    struct np_entry *np;
    size_t nnp;
};

/* ------------------------------------------------------------------------ */

/* Percent-decodes s[0..n) into out (size outlen). -1 on a bad escape, a NUL
 * or a control byte, or when it does not fit. */
static int pct_decode(const char *s, size_t n, char *out, size_t outlen)
{
    size_t o = 0;

    for (size_t i = 0; i < n; i++) {
        int c = (unsigned char)s[i];
        if (c == '%') {
            int h, l;
            if (i + 2 >= n)
                return -1;
            h = common_hex_digit((unsigned char)s[i + 1]);
            l = common_hex_digit((unsigned char)s[i + 2]);
            if (h < 0 || l < 0)
                return -1;
            c = h * 16 + l;
            i += 2;
        }
        if (c < 0x20 || c == 0x7f || o + 1 >= outlen)
            return -1;
        out[o++] = (char)c;
    }
    out[o] = '\0';
    return 0;
}

static void base64(const unsigned char *in, size_t n, char *out)
{
    static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0, i = 0;

    for (; i + 2 < n; i += 3) {
        unsigned v = (unsigned)in[i] << 16 | (unsigned)in[i + 1] << 8 | in[i + 2];
        out[o++] = t[v >> 18 & 63];
        out[o++] = t[v >> 12 & 63];
        out[o++] = t[v >> 6 & 63];
        out[o++] = t[v & 63];
    }
    if (i < n) {
        unsigned v = (unsigned)in[i] << 16 | (i + 1 < n ? (unsigned)in[i + 1] << 8 : 0u);
        out[o++] = t[v >> 18 & 63];
        out[o++] = t[v >> 12 & 63];
        out[o++] = i + 1 < n ? t[v >> 6 & 63] : '=';
        out[o++] = '=';
    }
    out[o] = '\0';
}

int policy_parent_parse_url(const char *url, struct policy_parent_proxy *out, const char **why)
{
    const char *p = url, *at, *hostp, *end, *colon = NULL;
    char user[128], pass[128], cred[260], hostbuf[POLICY_HOST_MAX + 1];
    struct policy_host h;
    unsigned long port = 80;
    size_t hl;

    memset(out, 0, sizeof(*out));
    *why = NULL;
    if (strncmp(p, "http://", 7) == 0) {
        p += 7;
    } else if (strstr(p, "://") != NULL) {
        *why = strncmp(p, "https://", 8) == 0
                   ? "https:// parent proxies (TLS to the proxy) are not supported; give its "
                     "plain http:// address"
                   : "only http:// parent proxies are supported (sluice sends CONNECT to it)";
        return -EINVAL;
    }
    end = p + strcspn(p, "/?#");
    if (*end == '?' || *end == '#' || (*end == '/' && end[1] != '\0')) {
        *why = "a proxy URL has no path, query or fragment: write http://[USER:PASSWORD@]HOST:PORT";
        return -EINVAL;
    }
    at = memchr(p, '@', (size_t)(end - p));
    if (at != NULL) {
        const char *c = memchr(p, ':', (size_t)(at - p));
        if (pct_decode(p, (size_t)((c != NULL ? c : at) - p), user, sizeof(user)) < 0 ||
            (c != NULL && pct_decode(c + 1, (size_t)(at - c - 1), pass, sizeof(pass)) < 0)) {
            *why = "bad user or password in the proxy URL (percent-encode reserved characters)";
            return -EINVAL;
        }
        if (c == NULL)
            pass[0] = '\0';
        snprintf(cred, sizeof(cred), "%s:%s", user, pass);
        memcpy(out->auth, "Basic ", 6);
        base64((const unsigned char *)cred, strlen(cred), out->auth + 6);
        hostp = at + 1;
    } else {
        hostp = p;
    }
    if (*hostp == '[') {
        const char *close = memchr(hostp, ']', (size_t)(end - hostp));
        if (close == NULL) {
            *why = "unterminated '[' in the proxy address";
            return -EINVAL;
        }
        if (close + 1 < end && close[1] == ':')
            colon = close + 1;
        else if (close + 1 != end) {
            *why = "unexpected text after ']' in the proxy address";
            return -EINVAL;
        }
        hl = (size_t)(close + 1 - hostp);
    } else {
        colon = memchr(hostp, ':', (size_t)(end - hostp));
        hl = (size_t)((colon != NULL ? colon : end) - hostp);
    }
    if (colon != NULL) {
        char *e;
        errno = 0;
        port = strtoul(colon + 1, &e, 10);
        if (colon + 1 == end || e != end || errno != 0 || port < 1 || port > 65535 ||
            colon[1] == '0' || colon[1] == '+' || colon[1] == '-') {
            *why = "bad port in the proxy URL (1-65535)";
            return -EINVAL;
        }
    }
    if (hl == 0 || hl >= sizeof(hostbuf)) {
        *why = "no host in the proxy URL";
        return -EINVAL;
    }
    memcpy(hostbuf, hostp, hl);
    hostbuf[hl] = '\0';
    if (policy_host_normalize(hostbuf, hl, &h, why) < 0)
        return -EINVAL;
    out->set = 1;
    out->host = h;
    out->port = (uint16_t)port;
    if (h.kind == POLICY_HOST_IPV6)
        snprintf(out->shown, sizeof(out->shown), "[%s]:%lu", h.name, port);
    else
        snprintf(out->shown, sizeof(out->shown), "%s:%lu", h.name, port);
    return 0;
}

/* One NO_PROXY entry (already trimmed, non-empty). */
static int np_parse(const char *s, size_t n, struct np_entry *e)
{
    char buf[POLICY_HOST_MAX + 8];
    struct policy_rule r;
    char name[POLICY_HOST_MAX + 1];
    const char *why;
    size_t i;

    memset(e, 0, sizeof(*e));
    if (n == 1 && s[0] == '*') {
        e->kind = NP_ALL;
        return 0;
    }
    if (n >= sizeof(buf))
        return -1;
    memcpy(buf, s, n);
    buf[n] = '\0';
    /* an address or CIDR (IPv6 bracketed or not), port ignored */
    if (strchr(buf, '/') != NULL || strchr(buf, ':') != NULL || isdigit((unsigned char)buf[0]) ||
        buf[0] == '[') {
        char tmp[POLICY_HOST_MAX + 16];
        const char *c1 = strchr(buf, ':');
        char *slash = strchr(buf, '/');
        if (buf[0] != '[' && c1 != NULL && strchr(c1 + 1, ':') != NULL) {
            /* bare IPv6, maybe a CIDR */
            if (slash != NULL)
                snprintf(tmp, sizeof(tmp), "[%.*s]%s", (int)(slash - buf), buf, slash);
            else
                snprintf(tmp, sizeof(tmp), "[%s]", buf);
        } else {
            snprintf(tmp, sizeof(tmp), "%s", buf);
            if (tmp[0] == '[') { /* "[v6]:port" or "[v6]/len" */
                char *close = strchr(tmp, ']');
                if (close != NULL && close[1] == ':')
                    close[1] = '\0';
            } else if (c1 != NULL) {
                tmp[c1 - buf] = '\0'; /* "1.2.3.4:80" or "host:80" */
            }
        }
        if (policy_pattern_parse(tmp, 0, &r, name, &why) == 0 && r.kind == POLICY_RULE_CIDR) {
            e->kind = NP_CIDR;
            e->addr = r.addr;
            e->prefix = r.prefix;
            return 0;
        }
        if (strchr(buf, '/') != NULL || buf[0] == '[')
            return -1;
        if (c1 != NULL) /* a name with a port: drop the port */
            buf[c1 - buf] = '\0';
    }
    if (buf[0] == '*' && buf[1] == '.')
        memmove(buf, buf + 1, strlen(buf)); /* "*.x" is ".x" */
    for (i = 0; buf[i] != '\0'; i++)
        buf[i] = (char)tolower((unsigned char)buf[i]);
    while (i > 1 && buf[i - 1] == '.')
        buf[--i] = '\0';
    if (buf[0] == '\0' || strcmp(buf, ".") == 0)
        return -1;
    e->kind = buf[0] == '.' ? NP_SUFFIX : NP_NAME;
    snprintf(e->name, sizeof(e->name), "%s", buf);
    return 0;
}

int policy_parent_check_noproxy(const char *list, const char **why)
{
    const char *s = list;

    *why = NULL;
    while (*s != '\0') {
        size_t n;
        struct np_entry e;
        s += strspn(s, ", \t");
        n = strcspn(s, ", \t");
        if (n > 0 && np_parse(s, n, &e) < 0) {
            *why = "bad noProxy entry: expected a host name (.suffix or *.suffix for subdomains), "
                   "an IP address, a CIDR, or *";
            return -EINVAL;
        }
        s += n;
    }
    return 0;
}

static int cidr_has(const struct np_entry *e, const struct policy_addr *a)
{
    unsigned bits = e->prefix, full = bits / 8, rest = bits % 8;

    if (a->family != e->addr.family)
        return 0;
    if (memcmp(a->bytes, e->addr.bytes, full) != 0)
        return 0;
    if (rest == 0)
        return 1;
    return ((a->bytes[full] ^ e->addr.bytes[full]) & (0xff << (8 - rest)) & 0xff) == 0;
}

static const char *first_env(char *const *env, const char *a, const char *b)
{
    const char *found_b = NULL;
    size_t la = strlen(a), lb = strlen(b);

    for (size_t i = 0; env != NULL && env[i] != NULL; i++) {
        if (strncmp(env[i], a, la) == 0 && env[i][la] == '=' && env[i][la + 1] != '\0')
            return env[i] + la + 1;
        if (found_b == NULL && strncmp(env[i], b, lb) == 0 && env[i][lb] == '=' &&
            env[i][lb + 1] != '\0')
            found_b = env[i] + lb + 1;
    }
    return found_b;
}

int policy_parent_build(const struct settings *s, char *const *env, struct policy_parent **out,
                        struct settings_error *err)
{
    const char *http, *https, *np, *why = NULL, *what;
    struct policy_parent *pp;
    int from_env = !s->network.parent_proxy.set;

    *out = NULL;
    if (from_env) {
        http = first_env(env, "HTTP_PROXY", "http_proxy");
        https = first_env(env, "HTTPS_PROXY", "https_proxy");
        np = first_env(env, "NO_PROXY", "no_proxy");
    } else {
        http = s->network.parent_proxy.http;
        https = s->network.parent_proxy.https;
        np = s->network.parent_proxy.no_proxy;
    }
    if (http == NULL && https == NULL)
        return 0;
    pp = calloc(1, sizeof(*pp));
    if (pp == NULL)
        return -ENOMEM;
    what = from_env ? "HTTP_PROXY in sluice's environment" : "network.parentProxy.http";
    if (http != NULL && policy_parent_parse_url(http, &pp->http, &why) < 0)
        goto bad;
    what = from_env ? "HTTPS_PROXY in sluice's environment" : "network.parentProxy.https";
    if (https != NULL && policy_parent_parse_url(https, &pp->https, &why) < 0)
        goto bad;
    if (!pp->http.set)
        pp->http = pp->https;
    if (!pp->https.set)
        pp->https = pp->http;
    what = from_env ? "NO_PROXY in sluice's environment" : "network.parentProxy.noProxy";
    if (np != NULL) {
        const char *q = np;
        if (policy_parent_check_noproxy(np, &why) < 0)
            goto bad;
        pp->np = calloc(NP_MAX, sizeof(*pp->np));
        if (pp->np == NULL) {
            policy_parent_free(pp);
            return -ENOMEM;
        }
        while (*q != '\0' && pp->nnp < NP_MAX) {
            size_t n;
            q += strspn(q, ", \t");
            n = strcspn(q, ", \t");
            if (n > 0 && np_parse(q, n, &pp->np[pp->nnp]) == 0)
                pp->nnp++;
            q += n;
        }
    }
    *out = pp;
    return 0;
bad:
    if (err != NULL)
        snprintf(err->msg, sizeof(err->msg), "%s: %s", what, why != NULL ? why : "invalid");
    policy_parent_free(pp);
    return -EINVAL;
}

void policy_parent_free(struct policy_parent *pp)
{
    if (pp == NULL)
        return;
    free(pp->np);
    free(pp);
}

static int is_loopback(const struct policy_host *h)
{
    size_t n = strlen(h->name);

    if (h->kind == POLICY_HOST_IPV4)
        return h->addr.bytes[0] == 127;
    if (h->kind == POLICY_HOST_IPV6) {
        static const uint8_t one[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
        return memcmp(h->addr.bytes, one, 16) == 0;
    }
    return strcmp(h->name, "localhost") == 0 ||
           (n > 10 && strcmp(h->name + n - 10, ".localhost") == 0);
}

const struct policy_parent_proxy *policy_parent_pick(const struct policy_parent *pp,
                                                     const struct policy_host *h, int plain_http)
{
    size_t hn;

    if (pp == NULL || is_loopback(h))
        return NULL;
    hn = strlen(h->name);
    for (size_t i = 0; i < pp->nnp; i++) {
        const struct np_entry *e = &pp->np[i];
        size_t en = strlen(e->name);
        switch (e->kind) {
        case NP_ALL:
            return NULL;
        case NP_CIDR:
            if (h->kind != POLICY_HOST_NAME && cidr_has(e, &h->addr))
                return NULL;
            break;
        case NP_NAME:
            if (h->kind == POLICY_HOST_NAME &&
                (strcmp(h->name, e->name) == 0 ||
                 (hn > en && h->name[hn - en - 1] == '.' && strcmp(h->name + hn - en, e->name) == 0)))
                return NULL;
            break;
        case NP_SUFFIX:
            if (h->kind == POLICY_HOST_NAME && hn > en && strcmp(h->name + hn - en, e->name) == 0)
                return NULL;
            break;
        }
    }
    return plain_http ? &pp->http : &pp->https;
}
