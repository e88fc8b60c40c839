/* common/common.c - timestamps, escaping and peer names (common.h). */
#include "common/common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

const char *common_timestamp(char *buf, size_t len)
{
    struct timespec ts;
    struct tm tm;
    char base[COMMON_TIME_MAX];

    if (clock_gettime(CLOCK_REALTIME, &ts) != 0 || gmtime_r(&ts.tv_sec, &tm) == NULL ||
        strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm) == 0) {
        snprintf(buf, len, "-");
        return buf;
    }
    snprintf(buf, len, "%s.%03ldZ", base, ts.tv_nsec / 1000000L);
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

void common_logfmt(FILE *f, int first, const char *key, const char *value)
{
    int quote = 0;

    if (value == NULL)
        return;
    if (value[0] == '\0')
        quote = 1;
    for (const char *p = value; *p; p++)
        if (*p == ' ' || *p == '"' || *p == '=' || *p == '\\' || (unsigned char)*p < 0x20 ||
            (unsigned char)*p == 0x7f)
            quote = 1;
    if (!quote) {
        fprintf(f, "%s%s=%s", first ? "" : " ", key, value);
        return;
    }
    fprintf(f, "%s%s=\"", first ? "" : " ", key);
    for (const char *p = value; *p; p++) {
        unsigned char ch = (unsigned char)*p;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20 || ch == 0x7f)
            fprintf(f, "\\x%02x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
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
        uv_ip4_name(s4, a, sizeof(a));
        snprintf(buf, len, "%s:%u", a, (unsigned)ntohs(s4->sin_port));
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

int64_t common_mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t common_mono_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int common_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;

    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -errno;
        if (w == 0)
            return -EIO;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}
