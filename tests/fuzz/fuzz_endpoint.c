/* tests/fuzz/fuzz_endpoint.c - the bridge endpoint parser (bridge/endpoint.c).
 *
 * The input is lines; each line is parsed for connecting and for listening.
 * Checked: a refusal has a message; whatever connecting accepts listening
 * accepts the same way; endpoint_str of an endpoint parses back to the same
 * endpoint (kind, address, port, path, fd), fits ENDPOINT_STR_MAX and is
 * truncated, never overrun, in a short buffer; a TCP endpoint's address
 * prints as policy_addr_str does, and its sockaddr (endpoint_sockaddr)
 * splits back to the same address and port (endpoint_sockaddr_split: an
 * IPv4-mapped IPv6 address as IPv4). The environment holds a systemd socket
 * activation (LISTEN_PID = this process, LISTEN_FDS=4, LISTEN_FDNAMES
 * "http:socks:http:admin"), so fd:NAME is parsed through to the lookup.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bridge/bridge.h"
#include "fuzz.h"
#include "policy/policy.h"

static int same_endpoint(const struct endpoint *a, const struct endpoint *b)
{
    if (a->kind != b->kind)
        return 0;
    switch (a->kind) {
    case ENDPOINT_TCP:
        return a->port == b->port && a->addr.family == b->addr.family &&
               memcmp(a->addr.bytes, b->addr.bytes, a->addr.family == 4 ? 4 : 16) == 0;
    case ENDPOINT_UNIX:
        return strcmp(a->path, b->path) == 0;
    case ENDPOINT_FD:
    default:
        return a->fd == b->fd;
    }
}

static void check_endpoint(const struct endpoint *ep, int for_listen)
{
    char buf[ENDPOINT_STR_MAX], addr[64];
    struct endpoint back;
    const char *why = NULL;
    size_t n;

    FUZZ_CHECK(ep->kind == ENDPOINT_TCP || ep->kind == ENDPOINT_UNIX || ep->kind == ENDPOINT_FD);
    if (ep->kind == ENDPOINT_TCP) {
        FUZZ_CHECK(ep->addr.family == 4 || ep->addr.family == 6);
        FUZZ_CHECK(for_listen || ep->port != 0);
    } else if (ep->kind == ENDPOINT_UNIX) {
        FUZZ_CHECK(memchr(ep->path, '\0', sizeof(ep->path)) != NULL && ep->path[0] != '\0');
    } else {
        FUZZ_CHECK(for_listen && ep->fd >= 0);
    }
    FUZZ_CHECK(endpoint_str(ep, buf, sizeof(buf)) == buf);
    n = strlen(buf);
    FUZZ_CHECK(n < sizeof(buf));
    if (endpoint_parse(buf, for_listen, &back, &why) != 0) {
        fprintf(stderr, "endpoint_str gave '%s', which does not parse: %s\n", buf, why);
        abort();
    }
    FUZZ_CHECK(same_endpoint(ep, &back));
    if (ep->kind == ENDPOINT_TCP) {
        static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        struct sockaddr_storage ss;
        struct policy_addr a;
        socklen_t len = 0;
        uint16_t port = 0;
        policy_addr_str(&ep->addr, addr, sizeof(addr));
        FUZZ_CHECK(strstr(buf, addr) != NULL);
        endpoint_sockaddr(&ep->addr, ep->port, &ss, &len);
        FUZZ_CHECK(len == (ep->addr.family == 4 ? sizeof(struct sockaddr_in)
                                                : sizeof(struct sockaddr_in6)));
        FUZZ_CHECK(endpoint_sockaddr_split((const struct sockaddr *)&ss, &a, &port) == 0);
        FUZZ_CHECK(port == ep->port);
        if (ep->addr.family == 6 && memcmp(ep->addr.bytes, mapped, 12) == 0)
            FUZZ_CHECK(a.family == 4 && memcmp(a.bytes, ep->addr.bytes + 12, 4) == 0);
        else
            FUZZ_CHECK(a.family == ep->addr.family &&
                       memcmp(a.bytes, ep->addr.bytes, a.family == 4 ? 4 : 16) == 0);
    }
    /* a short buffer: truncated and terminated, nothing written past it */
    for (size_t cap = 1; cap <= n; cap += 1 + cap / 2) {
        char *small = fuzz_alloc(cap);
        FUZZ_CHECK(endpoint_str(ep, small, cap) == small);
        FUZZ_CHECK(memchr(small, '\0', cap) != NULL);
        FUZZ_CHECK(strncmp(small, buf, strlen(small)) == 0);
        free(small);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int env_done;
    size_t off = 0;

    if (!env_done) {
        char pid[32];
        snprintf(pid, sizeof(pid), "%ld", (long)getpid());
        setenv("LISTEN_PID", pid, 1);
        setenv("LISTEN_FDS", "4", 1);
        setenv("LISTEN_FDNAMES", "http:socks:http:admin", 1);
        env_done = 1;
    }
    if (size > 64 * 1024)
        return 0;
    while (off < size) {
        const char *start = (const char *)data + off;
        const char *nl = memchr(start, '\n', size - off);
        size_t len = nl != NULL ? (size_t)(nl - start) : size - off;
        char *line = fuzz_dup(start, len, 1);
        struct endpoint ec, el;
        const char *why_c = NULL, *why_l = NULL;
        int rc_c, rc_l;

        off += len + (nl != NULL);
        memset(&ec, 0x77, sizeof(ec));
        memset(&el, 0x77, sizeof(el));
        rc_c = endpoint_parse(line, 0, &ec, &why_c);
        rc_l = endpoint_parse(line, 1, &el, &why_l);
        if (rc_c != 0)
            FUZZ_CHECK(rc_c < 0 && why_c != NULL && *why_c != '\0');
        if (rc_l != 0)
            FUZZ_CHECK(rc_l < 0 && why_l != NULL && *why_l != '\0');
        if (rc_c == 0) {
            FUZZ_CHECK(rc_l == 0 && same_endpoint(&ec, &el));
            check_endpoint(&ec, 0);
        }
        if (rc_l == 0)
            check_endpoint(&el, 1);
        FUZZ_CHECK(endpoint_parse(line, 0, &ec, NULL) == rc_c); /* why may be NULL */
        free(line);
    }
    return 0;
}
