/* settings/ports.c - ports between the host and the sandbox (issue 26):
 * network.publish ("[HOST_ADDR:]HOST_PORT:SANDBOX_PORT" strings, also
 * `sluice run --publish`) and network.hostPorts (port numbers). The one
 * parser of a publish string, used by the loader and by the command line.
 */
#include "settings/settings-int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Ports of sluice's own listeners inside the sandbox: the HTTP and SOCKS5
 * proxies and transparent mode's resolver. */
static const unsigned own_ports[] = {SETTINGS_SANDBOX_HTTP_PORT, SETTINGS_SANDBOX_SOCKS_PORT,
                                     SETTINGS_SANDBOX_DNS_PORT};

int settings_sandbox_own_port(unsigned port)
{
    for (size_t i = 0; i < sizeof(own_ports) / sizeof(own_ports[0]); i++)
        if (own_ports[i] == port)
            return 1;
    return 0;
}

/* Decimal 1..65535, no sign, no leading zero, exactly len bytes. */
static int port_of(const char *s, size_t len, unsigned short *out)
{
    unsigned v = 0;

    if (len == 0 || len > 5 || s[0] == '0')
        return -1;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    if (v > 65535)
        return -1;
    *out = (unsigned short)v;
    return 0;
}

/* HOST_ADDR (without the colon after it) into p: a dotted quad or a
 * bracketed IPv6 address without zone id. */
static int addr_of(const char *s, size_t len, struct settings_publish *p)
{
    char buf[64];

    if (len >= 2 && s[0] == '[' && s[len - 1] == ']') {
        if (len - 2 >= sizeof(buf))
            return -1;
        memcpy(buf, s + 1, len - 2);
        buf[len - 2] = '\0';
        p->family = 6;
        return strchr(buf, '%') == NULL && inet_pton(AF_INET6, buf, p->addr) == 1 ? 0 : -1;
    }
    if (len >= sizeof(buf) || memchr(s, ':', len) != NULL)
        return -1;
    memcpy(buf, s, len);
    buf[len] = '\0';
    p->family = 4;
    return inet_pton(AF_INET, buf, p->addr) == 1 ? 0 : -1;
}

int settings_publish_is_loopback(const struct settings_publish *p)
{
    static const unsigned char v6lo[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};

    if (p->family == 4)
        return p->addr[0] == 127;
    return memcmp(p->addr, v6lo, 16) == 0;
}

int settings_publish_parse(const char *s, struct settings_publish *p, const char **why)
{
    const char *last, *prev;
    size_t n = strlen(s);

    memset(p, 0, sizeof(*p));
    *why = "expected [HOST_ADDR:]HOST_PORT:SANDBOX_PORT";
    last = strrchr(s, ':');
    if (n == 0 || n > 80 || last == NULL)
        return -EINVAL;
    if (port_of(last + 1, n - (size_t)(last + 1 - s), &p->sandbox_port) < 0) {
        *why = "SANDBOX_PORT must be a port number 1..65535";
        return -EINVAL;
    }
    prev = last;
    while (prev > s && prev[-1] != ':')
        prev--;
    if (port_of(prev, (size_t)(last - prev), &p->host_port) < 0) {
        *why = "HOST_PORT must be a port number 1..65535";
        return -EINVAL;
    }
    if (prev == s) {
        p->family = 4;
        p->addr[0] = 127;
        p->addr[3] = 1;
    } else {
        p->explicit_addr = 1;
        if (prev - 1 == s || addr_of(s, (size_t)(prev - 1 - s), p) < 0) {
            *why = "HOST_ADDR must be an IPv4 address or a bracketed IPv6 address ([::1])";
            return -EINVAL;
        }
    }
    if (settings_sandbox_own_port(p->sandbox_port)) {
        *why = "SANDBOX_PORT is one of sluice's own listeners in the sandbox (3128, 1080, 53)";
        return -EINVAL;
    }
    return 0;
}

/* "network.publish": strings, each parsed, no host port twice. */
int settings__fn_publish(struct ctx *c, json_t *v, const struct key_def *d)
{
    struct settings_publish p, q;
    const char *why;
    size_t i, j;
    json_t *e;
    int rc = settings__check_strlist(c, v, 1);

    if (rc < 0)
        return rc;
    json_array_foreach(v, i, e)
    {
        char qs[128];
        const char *s = json_string_value(e);

        settings__quote(qs, sizeof(qs), s);
        if (settings_publish_parse(s, &p, &why) < 0) {
            settings__push_index(c, i);
            rc = settings__fail(c, 0, "invalid published port \"%s\" (%s)", qs, why);
            settings__pop(c);
            return rc;
        }
        for (j = 0; j < i; j++) {
            (void)settings_publish_parse(json_string_value(json_array_get(v, j)), &q, &why);
            if (q.host_port == p.host_port) {
                settings__push_index(c, i);
                rc = settings__fail(c, 0,
                                    "invalid published port \"%s\" (host port %u is "
                                    "already published by entry %zu)",
                                    qs, p.host_port, j);
                settings__pop(c);
                return rc;
            }
        }
    }
    return settings__take_strlist(c, v, (struct settings_list *)settings__field(c, d), d->list, 1);
}

/* "network.hostPorts": integers 1..65535, not sluice's own ports in the
 * sandbox, no duplicates; stored as decimal strings, each located where its
 * number is written (settings__take_strlist locates the key's array in the
 * text, whatever the values handed to it). */
int settings__fn_host_ports(struct ctx *c, json_t *v, const struct key_def *d)
{
    unsigned ports[64];
    json_t *e, *strs;
    size_t i;
    int rc = 0;

    if (!json_is_array(v))
        return settings__fail(c, 0, "expected an array of port numbers, got %s",
                              settings__type_name(v));
    if (json_array_size(v) > sizeof(ports) / sizeof(ports[0]))
        return settings__fail(c, 0, "at most %zu ports", sizeof(ports) / sizeof(ports[0]));
    json_array_foreach(v, i, e)
    {
        settings__push_index(c, i);
        rc = settings__want_uint(c, e, 1, 65535, &ports[i]);
        if (rc == 0 && settings_sandbox_own_port(ports[i]))
            rc = settings__fail(c, 0,
                                "port %u is one of sluice's own listeners in the sandbox "
                                "(3128, 1080, 53); it cannot be a host port",
                                ports[i]);
        for (size_t j = 0; rc == 0 && j < i; j++)
            if (ports[j] == ports[i])
                rc = settings__fail(c, 0, "port %u is listed twice", ports[i]);
        settings__pop(c);
        if (rc < 0)
            return rc;
    }
    strs = json_array();
    for (i = 0; strs != NULL && i < json_array_size(v); i++) {
        char num[8];
        snprintf(num, sizeof(num), "%u", ports[i]);
        if (json_array_append_new(strs, json_string(num)) < 0) {
            json_decref(strs);
            strs = NULL;
        }
    }
    if (strs == NULL)
        return settings__fail_nomem(c);
    rc = settings__take_strlist(c, strs, (struct settings_list *)settings__field(c, d), d->list, 1);
    json_decref(strs);
    return rc;
}
