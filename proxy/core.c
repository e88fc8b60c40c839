/* proxy/core.c - the start-up helpers that `sluice proxy` and `sluice run`
 * share: the resolver, the descriptor and connection limits, and the
 * guard's view of this host's own addresses. The service of one loop that
 * uses them is proxy/service.c. */
#include "proxy/server.h"

#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>

int proxy_resolver_start(struct resolver **out, uv_loop_t *loop, const struct settings *s,
                         char *err, size_t errlen)
{
    const char **servers = NULL;
    size_t n = s->network.dns_servers.n;
    int rc;

    if (n > 0) {
        servers = calloc(n, sizeof(*servers));
        if (servers == NULL) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        for (size_t i = 0; i < n; i++)
            servers[i] = s->network.dns_servers.items[i].value;
    }
    rc = resolver_init(out, loop, servers, n, s->proxy.dns_timeout_ms);
    free(servers);
    if (rc < 0) {
        *out = NULL;
        snprintf(err, errlen, "cannot start the DNS resolver: %s", uv_strerror(rc));
        return -1;
    }
    return 0;
}

int proxy_ask_start(struct ask_broker **broker, struct ask_handler **handler, uv_loop_t *loop,
                    const struct settings *s, const char *spec, char *err, size_t errlen)
{
    const char *why = NULL;
    int rc;

    *broker = NULL;
    *handler = NULL;
    rc = ask_broker_new(broker, loop, s->proxy.ask_timeout_ms, s->proxy.max_pending_asks);
    if (rc == 0)
        rc = ask_handler_open(handler, loop, spec, *broker, &why);
    if (rc < 0) {
        *handler = NULL;
        snprintf(err, errlen, "--ask '%s': %s", spec, why != NULL ? why : uv_strerror(rc));
        return -1;
    }
    return 0;
}

void proxy_ask_close(struct ask_broker **broker, struct ask_handler **handler,
                     void (*done)(void *), void *arg)
{
    /* the broker first: its close withdraws every question, so the handler
     * never answers a freed broker (bridge.h, ask_handler_close) */
    if (*broker != NULL)
        ask_broker_close(*broker, done, arg);
    if (*handler != NULL)
        ask_handler_close(*handler, done, arg);
    *broker = NULL;
    *handler = NULL;
}

void proxy_settings_defaults(struct settings *s)
{
    if (s->network.deny_private_addresses == SETTINGS_UNSET)
        s->network.deny_private_addresses = SETTINGS_TRUE;
}

unsigned long proxy_raise_nofile(void)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return 1024;
    if (rl.rlim_cur < rl.rlim_max) {
        rlim_t want = rl.rlim_max;
        rl.rlim_cur = want;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            (void)getrlimit(RLIMIT_NOFILE, &rl);
    }
    if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > 1UL << 30)
        return 1UL << 30;
    return (unsigned long)rl.rlim_cur;
}

unsigned proxy_max_connections(const struct settings *s)
{
    struct rlimit rl;
    unsigned long nofile = 1024, n;

    if (s->proxy.max_connections != 0)
        return s->proxy.max_connections;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
        nofile = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > 1UL << 30 ? 1UL << 30
                                                                          : (unsigned long)rl.rlim_cur;
    n = nofile > 2 * PROXY_FD_HEADROOM ? (nofile - PROXY_FD_HEADROOM) / 2 : nofile / 4;
    if (n < 1)
        n = 1;
    if (n > 1000000)
        n = 1000000;
    return (unsigned)n;
}

/* This host's own addresses, so the guard can refuse them. */
void proxy_set_local(struct policy *p, const struct policy_addr *listeners, const uint16_t *ports,
                     size_t nlisteners)
{
    struct ifaddrs *ifa = NULL, *i;
    struct policy_addr self[64];
    size_t n = 0;

    if (getifaddrs(&ifa) < 0) {
        (void)policy_set_local(p, NULL, 0, listeners, ports, nlisteners);
        return;
    }
    for (i = ifa; i != NULL && n < 64; i = i->ifa_next) {
        if (i->ifa_addr == NULL)
            continue;
        memset(&self[n], 0, sizeof(self[n]));
        if (i->ifa_addr->sa_family == AF_INET) {
            const struct sockaddr_in *sin = (const struct sockaddr_in *)(const void *)i->ifa_addr;
            self[n].family = 4;
            memcpy(self[n].bytes, &sin->sin_addr, 4);
            n++;
        } else if (i->ifa_addr->sa_family == AF_INET6) {
            const struct sockaddr_in6 *s6 =
                (const struct sockaddr_in6 *)(const void *)i->ifa_addr;
            self[n].family = 6;
            memcpy(self[n].bytes, &s6->sin6_addr, 16);
            n++;
        }
    }
    freeifaddrs(ifa);
    (void)policy_set_local(p, self, n, listeners, ports, nlisteners);
}
