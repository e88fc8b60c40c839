/* common/common.c - timestamps, escaping and peer names (common.h). */
#include "common/common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

/* The text of the second last formatted, per thread: a log writes many
 * lines within one second, and gmtime_r() and strftime() are most of a
 * timestamp's cost. */
static _Thread_local time_t ts_sec = (time_t)-1;
static _Thread_local char ts_base[COMMON_TIME_MAX];
static _Thread_local size_t ts_len;

const char *common_timestamp(char *buf, size_t len)
{
    struct timespec ts;
    struct tm tm;
    long ms;

    if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
        goto fail;
    if (ts.tv_sec != ts_sec) {
        ts_sec = (time_t)-1;
        if (gmtime_r(&ts.tv_sec, &tm) == NULL)
            goto fail;
        ts_len = strftime(ts_base, sizeof(ts_base), "%Y-%m-%dT%H:%M:%S", &tm);
        if (ts_len == 0)
            goto fail;
        ts_sec = ts.tv_sec;
    }
    if (len < ts_len + sizeof(".000Z"))
        goto fail;
    ms = ts.tv_nsec / 1000000L;
    memcpy(buf, ts_base, ts_len);
    buf[ts_len] = '.';
    buf[ts_len + 1] = (char)('0' + ms / 100);
    buf[ts_len + 2] = (char)('0' + ms / 10 % 10);
    buf[ts_len + 3] = (char)('0' + ms % 10);
    buf[ts_len + 4] = 'Z';
    buf[ts_len + 5] = '\0';
    return buf;
fail:
    snprintf(buf, len, "-");
    return buf;
}

const char *common_escape(const char *in, char *buf, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;

    if (len == 0)
        return buf;
    for (; *in != '\0' && o + 5 < len; in++) {
        unsigned char c = (unsigned char)*in;
        if (c < 0x20 || c >= 0x7f || c == '\\') {
            buf[o++] = '\\';
            buf[o++] = 'x';
            buf[o++] = hex[c >> 4];
            buf[o++] = hex[c & 15];
        } else {
            buf[o++] = (char)c;
        }
    }
    buf[o] = '\0';
    return buf;
}

/* 1 when c may stand in a value without quotes */
static int logfmt_plain(unsigned char c)
{
    return c > 0x20 && c != 0x7f && c != '"' && c != '=' && c != '\\';
}

size_t common_logfmt_value(char *out, const char *value)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p;
    size_t n = 0;

    /* one pass for the usual value, copied as it is checked */
    for (p = (const unsigned char *)value; *p != '\0' && logfmt_plain(*p); p++)
        out[n++] = (char)*p;
    if (*p == '\0' && n > 0)
        return n;
    n = 0;
    out[n++] = '"';
    for (p = (const unsigned char *)value; *p != '\0'; p++) {
        if (*p == '"' || *p == '\\') {
            out[n++] = '\\';
            out[n++] = (char)*p;
        } else if (*p < 0x20 || *p == 0x7f) {
            out[n++] = '\\';
            out[n++] = 'x';
            out[n++] = hex[*p >> 4];
            out[n++] = hex[*p & 15];
        } else {
            out[n++] = (char)*p;
        }
    }
    out[n++] = '"';
    return n;
}

size_t common_utoa(char *out, unsigned long long v)
{
    char rev[20];
    size_t n = 0, i;

    do {
        rev[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    for (i = 0; i < n; i++)
        out[i] = rev[n - 1 - i];
    return n;
}

size_t common_catn(char *buf, size_t cap, size_t at, const char *s, size_t n)
{
    const char *nul = memchr(s, '\0', n);

    if (nul != NULL)
        n = (size_t)(nul - s);
    if (n > cap - 1 - at)
        n = cap - 1 - at;
    memcpy(buf + at, s, n);
    buf[at + n] = '\0';
    return at + n;
}

size_t common_cat(char *buf, size_t cap, size_t at, const char *s)
{
    return common_catn(buf, cap, at, s, strlen(s));
}

size_t common_cat_u(char *buf, size_t cap, size_t at, unsigned long long v)
{
    char d[21];

    d[common_utoa(d, v)] = '\0';
    return common_cat(buf, cap, at, d);
}

/* "a.b.c.d" of an IPv4 address in network order into out (room for 16). */
static void ip4_text(const struct in_addr *in, char *out)
{
    const uint8_t *b = (const uint8_t *)&in->s_addr;
    size_t o = 0;

    for (int i = 0; i < 4; i++) {
        if (i > 0)
            out[o++] = '.';
        o += common_utoa(out + o, b[i]);
    }
    out[o] = '\0';
}

const char *common_peer_name(uv_stream_t *s, int is_pipe, char *buf, size_t len)
{
    struct sockaddr_storage ss;
    int sl = (int)sizeof(ss);
    char a[64];

    if (is_pipe) {
        snprintf(buf, len, "unix");
        return buf;
    }
    memset(&ss, 0, sizeof(ss));
    if (uv_tcp_getpeername((uv_tcp_t *)s, (struct sockaddr *)&ss, &sl) != 0) {
        snprintf(buf, len, "-");
        return buf;
    }
    if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)(const void *)&ss;
        uv_ip6_name(s6, a, sizeof(a));
        snprintf(buf, len, "[%s]:%u", a, (unsigned)ntohs(s6->sin6_port));
    } else if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)(const void *)&ss;
        size_t at;
        ip4_text(&s4->sin_addr, a); /* uv_ip4_name() and snprintf() cost ten times more */
        at = common_cat(buf, len, 0, a);
        at = common_cat(buf, len, at, ":");
        common_cat_u(buf, len, at, ntohs(s4->sin_port));
    } else {
        snprintf(buf, len, "-");
    }
    return buf;
}

int common_hex_digit(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int common_is_tchar(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c > 0 && c < 0x7f && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}
