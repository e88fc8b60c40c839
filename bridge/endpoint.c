/* bridge/endpoint.c - endpoint strings: tcp:ADDR:PORT, unix:PATH, fd:N, fd:NAME.
 *
 * Parsing is strict and says what was wrong, because endpoints come from
 * command lines and settings written by people:
 *   - tcp: takes literal addresses only, never a name (nothing here may
 *     resolve): a dotted quad (inet_pton's, so no 127.1, 0x7f.0.0.1 or 010.x)
 *     or a bracketed IPv6 address without a zone; the port is decimal without
 *     sign or leading zeros;
 *   - unix: takes any non-empty path that fits sun_path with its NUL;
 *   - fd: is for listeners only: a number, or the name of a socket passed by
 *     systemd socket activation (LISTEN_PID, LISTEN_FDS, LISTEN_FDNAMES, as in
 *     sd_listen_fds_with_names(3)); the environment is read, never changed.
 */
#include "bridge/bridge.h"

#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "policy/policy.h"

#define SD_LISTEN_FDS_START 3
#define FD_NAME_MAX 255 /* systemd's limit for FileDescriptorName= */

static const char *const expected_schemes = "(expected tcp:, unix: or fd:)";

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static int all_digits(const char *s, size_t len)
{
    size_t i;

    if (len == 0)
        return 0;
    for (i = 0; i < len; i++) {
        if (!is_digit(s[i]))
            return 0;
    }
    return 1;
}

/* Decimal without sign or leading zeros, at most max. 0 or -1. */
static int parse_decimal(const char *s, size_t len, unsigned long max, unsigned long *out)
{
    unsigned long v = 0;
    size_t i;

    if (!all_digits(s, len) || (len > 1 && s[0] == '0'))
        return -1;
    for (i = 0; i < len; i++) {
        unsigned long d = (unsigned long)(s[i] - '0');
        if (v > (max - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

/* RFC 3986: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ). "127.0.0.1:80" and
 * "[::1]:80" are endpoints without a scheme, not ones with a strange one. */
static int looks_like_scheme(const char *s, size_t len)
{
    size_t i;

    if (len == 0 || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z')))
        return 0;
    for (i = 1; i < len; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) || c == '+' ||
              c == '-' || c == '.'))
            return 0;
    }
    /* A dotted name before the colon is a host ("localhost.localdomain:80"). */
    return memchr(s, '.', len) == NULL;
}

/* The message for an unknown scheme names it. Per-thread storage, so *why
 * stays valid until this thread's next endpoint_parse(). */
static const char *unknown_scheme(const char *s, size_t len)
{
    static _Thread_local char msg[96];
    char name[24];
    size_t i, n = 0;

    for (i = 0; i < len && n + 4 < sizeof(name); i++) {
        unsigned char c = (unsigned char)s[i];
        name[n++] = (c > 0x20 && c < 0x7f && c != '\'') ? (char)c : '?';
    }
    if (i < len) {
        name[n++] = '.';
        name[n++] = '.';
        name[n++] = '.';
    }
    name[n] = '\0';
    snprintf(msg, sizeof(msg), "unknown scheme '%s' %s", name, expected_schemes);
    return msg;
}

/* Why a host text is not a dotted quad: names and other IPv4 spellings get
 * their own message. */
static const char *bad_v4_reason(const char *h, size_t len)
{
    size_t i, last = 0;
    int alpha = 0;

    for (i = 0; i < len; i++) {
        char c = h[i];
        if (c == '.')
            last = i + 1;
        else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
            alpha = 1;
        else if (!is_digit(c) && c != '-' && c != '_')
            return "invalid IPv4 address";
    }
    /* A last label of digits or 0x... is a numeric spelling (127.1, 0x7f.1,
     * 2130706433, 010.0.0.1), anything else with letters is a name. */
    if (all_digits(h + last, len - last) ||
        (len - last > 2 && h[last] == '0' && (h[last + 1] == 'x' || h[last + 1] == 'X')))
        return "invalid IPv4 address (a dotted quad like 127.0.0.1 is expected)";
    if (alpha)
        return "hostnames are not accepted, use an IP address";
    return "invalid IPv4 address";
}

static int parse_port(const char *p, int for_listen, uint16_t *port, const char **why)
{
    size_t len = strlen(p);
    unsigned long v;

    if (len == 0) {
        *why = "missing port";
        return UV_EINVAL;
    }
    if (!all_digits(p, len)) {
        *why = "invalid port (a decimal number is expected)";
        return UV_EINVAL;
    }
    if (len > 1 && p[0] == '0') {
        *why = "port has leading zeros";
        return UV_EINVAL;
    }
    if (parse_decimal(p, len, 65535, &v) < 0) {
        *why = for_listen ? "port out of range 0-65535" : "port out of range 1-65535";
        return UV_EINVAL;
    }
    if (v == 0 && !for_listen) {
        *why = "port 0 is only valid for listening (port out of range 1-65535)";
        return UV_EINVAL;
    }
    *port = (uint16_t)v;
    return 0;
}

static int parse_tcp(const char *s, int for_listen, struct endpoint *ep, const char **why)
{
    char host[64];
    const char *h, *port;
    size_t hlen;

    if (s[0] == '\0') {
        *why = "missing address and port";
        return UV_EINVAL;
    }
    if (s[0] == '[') {
        const char *rb = strchr(s, ']');
        if (rb == NULL) {
            *why = "missing ']' after the IPv6 address";
            return UV_EINVAL;
        }
        h = s + 1;
        hlen = (size_t)(rb - h);
        if (rb[1] == '\0') {
            *why = "missing port";
            return UV_EINVAL;
        }
        if (rb[1] != ':') {
            *why = "unexpected text after ']' (expected :PORT)";
            return UV_EINVAL;
        }
        port = rb + 2;
        if (hlen == 0) {
            *why = "missing address";
            return UV_EINVAL;
        }
        if (memchr(h, '%', hlen) != NULL) {
            *why = "zone ids are not accepted";
            return UV_EINVAL;
        }
        if (hlen >= sizeof(host)) {
            *why = "invalid IPv6 address";
            return UV_EINVAL;
        }
        memcpy(host, h, hlen);
        host[hlen] = '\0';
        if (policy_addr_parse(host, &ep->addr) < 0) {
            *why = "invalid IPv6 address";
            return UV_EINVAL;
        }
        if (ep->addr.family != 6) {
            *why = "an IPv4 address must not be in brackets";
            return UV_EINVAL;
        }
    } else {
        const char *colon = strchr(s, ':');
        if (colon != NULL && strchr(colon + 1, ':') != NULL) {
            *why = "an IPv6 address must be in brackets, e.g. tcp:[::1]:80";
            return UV_EINVAL;
        }
        hlen = colon != NULL ? (size_t)(colon - s) : strlen(s);
        port = colon != NULL ? colon + 1 : NULL;
        if (hlen == 0) {
            *why = "missing address";
            return UV_EINVAL;
        }
        if (hlen >= sizeof(host)) {
            *why = bad_v4_reason(s, hlen);
            return UV_EINVAL;
        }
        memcpy(host, s, hlen);
        host[hlen] = '\0';
        if (policy_addr_parse(host, &ep->addr) < 0 || ep->addr.family != 4) {
            *why = bad_v4_reason(host, hlen);
            return UV_EINVAL;
        }
        if (port == NULL) {
            *why = "missing port";
            return UV_EINVAL;
        }
    }
    ep->kind = ENDPOINT_TCP;
    return parse_port(port, for_listen, &ep->port, why);
}

static int parse_unix(const char *s, struct endpoint *ep, const char **why)
{
    size_t len = strlen(s);

    if (len == 0) {
        *why = "missing unix socket path";
        return UV_EINVAL;
    }
    if (len >= sizeof(ep->path)) {
        *why = "unix socket path too long (at most 107 bytes)";
        return UV_EINVAL;
    }
    ep->kind = ENDPOINT_UNIX;
    memcpy(ep->path, s, len + 1);
    return 0;
}

/* fd:NAME: the socket systemd passed under that name. */
static int lookup_fd_name(const char *name, int *fd, const char **why)
{
    const char *pid_s = getenv("LISTEN_PID"), *fds_s = getenv("LISTEN_FDS");
    const char *names = getenv("LISTEN_FDNAMES"), *p;
    unsigned long pid, nfds, i;
    size_t nlen = strlen(name);
    int found = -1;

    if (pid_s == NULL || fds_s == NULL) {
        *why = "no socket activation: fd:NAME needs LISTEN_PID and LISTEN_FDS from systemd";
        return UV_EINVAL;
    }
    if (parse_decimal(pid_s, strlen(pid_s), ULONG_MAX, &pid) < 0 ||
        pid != (unsigned long)getpid()) {
        *why = "LISTEN_PID is not this process (the sockets were passed to another one)";
        return UV_EINVAL;
    }
    if (parse_decimal(fds_s, strlen(fds_s), (unsigned long)(INT_MAX - SD_LISTEN_FDS_START), &nfds) <
        0) {
        *why = "LISTEN_FDS is not a number";
        return UV_EINVAL;
    }
    if (names == NULL) {
        *why = "no LISTEN_FDNAMES in the environment to look the name up in";
        return UV_EINVAL;
    }
    for (i = 0, p = names; i < nfds; i++) {
        const char *end = strchr(p, ':');
        size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
        if (len == nlen && memcmp(p, name, nlen) == 0) {
            if (found >= 0) {
                *why = "several LISTEN_FDS sockets have that name";
                return UV_EINVAL;
            }
            found = SD_LISTEN_FDS_START + (int)i;
        }
        if (end == NULL)
            break;
        p = end + 1;
    }
    if (found < 0) {
        *why = "no socket of that name in LISTEN_FDNAMES";
        return UV_EINVAL;
    }
    *fd = found;
    return 0;
}

static int parse_fd(const char *s, int for_listen, struct endpoint *ep, const char **why)
{
    size_t len = strlen(s);
    unsigned long v;

    if (!for_listen) {
        *why = "fd: endpoints can only be listened on, not connected to";
        return UV_EINVAL;
    }
    if (len == 0) {
        *why = "missing fd number or name";
        return UV_EINVAL;
    }
    if ((s[0] == '-' || s[0] == '+') && all_digits(s + 1, len - 1)) {
        *why = "fd number must be a decimal number >= 0 without sign";
        return UV_EINVAL;
    }
    if (all_digits(s, len)) {
        if (len > 1 && s[0] == '0') {
            *why = "fd number has leading zeros";
            return UV_EINVAL;
        }
        if (parse_decimal(s, len, INT_MAX, &v) < 0) {
            *why = "fd number out of range";
            return UV_EINVAL;
        }
        ep->fd = (int)v;
    } else {
        if (len > FD_NAME_MAX || strchr(s, ':') != NULL) {
            *why = "invalid fd name (at most 255 characters, no ':')";
            return UV_EINVAL;
        }
        if (lookup_fd_name(s, &ep->fd, why) < 0)
            return UV_EINVAL;
    }
    ep->kind = ENDPOINT_FD;
    return 0;
}

int endpoint_parse(const char *s, int for_listen, struct endpoint *ep, const char **why)
{
    struct endpoint tmp;
    const char *colon, *dummy;
    int rc;

    if (why == NULL)
        why = &dummy;
    if (s == NULL || s[0] == '\0') {
        *why = "empty endpoint";
        return UV_EINVAL;
    }
    memset(&tmp, 0, sizeof(tmp));
    tmp.fd = -1;
    colon = strchr(s, ':');
    if (colon == NULL) {
        *why = "missing scheme (expected tcp:ADDR:PORT, unix:PATH or fd:N)";
        return UV_EINVAL;
    }
    if (colon - s == 3 && memcmp(s, "tcp", 3) == 0)
        rc = parse_tcp(colon + 1, for_listen, &tmp, why);
    else if (colon - s == 4 && memcmp(s, "unix", 4) == 0)
        rc = parse_unix(colon + 1, &tmp, why);
    else if (colon - s == 2 && memcmp(s, "fd", 2) == 0)
        rc = parse_fd(colon + 1, for_listen, &tmp, why);
    else if (!looks_like_scheme(s, (size_t)(colon - s)))
        *why = "missing scheme (expected tcp:ADDR:PORT, unix:PATH or fd:N)", rc = UV_EINVAL;
    else
        *why = unknown_scheme(s, (size_t)(colon - s)), rc = UV_EINVAL;
    if (rc < 0)
        return rc;
    *ep = tmp;
    return 0;
}

const char *endpoint_str(const struct endpoint *ep, char *buf, size_t len)
{
    char ip[64];

    if (len == 0)
        return buf;
    switch (ep->kind) {
    case ENDPOINT_TCP:
        policy_addr_str(&ep->addr, ip, sizeof(ip));
        if (ep->addr.family == 6)
            snprintf(buf, len, "tcp:[%s]:%u", ip, (unsigned)ep->port);
        else
            snprintf(buf, len, "tcp:%s:%u", ip, (unsigned)ep->port);
        break;
    case ENDPOINT_UNIX:
        snprintf(buf, len, "unix:%s", ep->path);
        break;
    case ENDPOINT_FD:
        snprintf(buf, len, "fd:%d", ep->fd);
        break;
    default:
        buf[0] = '\0';
        break;
    }
    return buf;
}

void endpoint_sockaddr(const struct policy_addr *a, uint16_t port, struct sockaddr_storage *ss,
                       socklen_t *len)
{
    memset(ss, 0, sizeof(*ss));
    if (a->family == 6) {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)(void *)ss;
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons(port);
        memcpy(&s6->sin6_addr, a->bytes, 16);
        if (len != NULL)
            *len = (socklen_t)sizeof(*s6);
    } else {
        struct sockaddr_in *s4 = (struct sockaddr_in *)(void *)ss;
        s4->sin_family = AF_INET;
        s4->sin_port = htons(port);
        memcpy(&s4->sin_addr, a->bytes, 4);
        if (len != NULL)
            *len = (socklen_t)sizeof(*s4);
    }
}

int endpoint_sockaddr_split(const struct sockaddr *sa, struct policy_addr *a, uint16_t *port)
{
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

    memset(a, 0, sizeof(*a));
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)(const void *)sa;
        a->family = 4;
        memcpy(a->bytes, &s4->sin_addr, 4);
        *port = ntohs(s4->sin_port);
        return 0;
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)(const void *)sa;
        if (memcmp(s6->sin6_addr.s6_addr, mapped, 12) == 0) {
            a->family = 4;
            memcpy(a->bytes, s6->sin6_addr.s6_addr + 12, 4);
        } else {
            a->family = 6;
            memcpy(a->bytes, s6->sin6_addr.s6_addr, 16);
        }
        *port = ntohs(s6->sin6_port);
        return 0;
    }
    return -1;
}
