/* cli/common.c - helpers shared by subcommands. */
#include "cli/cli.h"
#include "policy/policy.h"

#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

int cli_load_settings(struct settings *s, const char *explicit_path)
{
    struct settings_error err;
    size_t i;

    settings_init(s);
    if (settings_load(s, explicit_path, &err) < 0 || settings_apply_managed(s, NULL, &err) < 0) {
        fprintf(stderr, "%s\n", err.msg);
        settings_free(s);
        settings_init(s);
        return -1;
    }
    for (i = 0; i < s->notices.n; i++)
        fprintf(stderr, "sluice: warning: %s\n", s->notices.items[i].value);
    return 0;
}

/* This host's own addresses, so the guard can refuse them. */
void cli_set_local(struct policy *p, const struct policy_addr *listeners, const uint16_t *ports,
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
