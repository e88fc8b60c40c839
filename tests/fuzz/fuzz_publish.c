/* tests/fuzz/fuzz_publish.c - the published-port parser
 * (settings_publish_parse, settings/ports.c: `sluice run --publish` and
 * network.publish).
 *
 * The input is lines; each is parsed. Checked: a refusal has a message; an
 * accepted string has ports 1..65535, a SANDBOX_PORT that is not one of
 * sluice's own, family 4 or 6, 127.0.0.1 when no address was written; its
 * canonical text ("A:H:S", "[A]:H:S" or "H:S") parses back to the same
 * value, and the input was at most 80 bytes.
 */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "settings/settings.h"

static int same(const struct settings_publish *a, const struct settings_publish *b)
{
    return a->family == b->family && a->explicit_addr == b->explicit_addr &&
           a->host_port == b->host_port && a->sandbox_port == b->sandbox_port &&
           memcmp(a->addr, b->addr, a->family == 4 ? 4 : 16) == 0;
}

static void check(const char *line, const struct settings_publish *p)
{
    static const unsigned char lo[4] = {127, 0, 0, 1};
    struct settings_publish back;
    char a[INET6_ADDRSTRLEN], text[128];
    const char *why = NULL;

    FUZZ_CHECK(strlen(line) <= 80);
    FUZZ_CHECK(p->host_port != 0 && p->sandbox_port != 0);
    FUZZ_CHECK(!settings_sandbox_own_port(p->sandbox_port));
    FUZZ_CHECK(p->family == 4 || p->family == 6);
    if (!p->explicit_addr) {
        FUZZ_CHECK(p->family == 4 && memcmp(p->addr, lo, 4) == 0);
        FUZZ_CHECK(settings_publish_is_loopback(p));
        snprintf(text, sizeof(text), "%u:%u", p->host_port, p->sandbox_port);
    } else {
        FUZZ_CHECK(inet_ntop(p->family == 4 ? AF_INET : AF_INET6, p->addr, a, sizeof(a)) != NULL);
        snprintf(text, sizeof(text), p->family == 4 ? "%s:%u:%u" : "[%s]:%u:%u", a, p->host_port,
                 p->sandbox_port);
    }
    if (settings_publish_parse(text, &back, &why) != 0) {
        fprintf(stderr, "'%s' gave '%s', which does not parse: %s\n", line, text, why);
        abort();
    }
    FUZZ_CHECK(same(p, &back));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t off = 0;

    if (size > 64 * 1024)
        return 0;
    while (off < size) {
        const char *start = (const char *)data + off;
        const char *nl = memchr(start, '\n', size - off);
        size_t len = nl != NULL ? (size_t)(nl - start) : size - off;
        char *line = fuzz_dup(start, len, 1);
        struct settings_publish p;
        const char *why = NULL;
        int rc;

        off += len + (nl != NULL);
        memset(&p, 0x77, sizeof(p));
        rc = settings_publish_parse(line, &p, &why);
        if (rc != 0)
            FUZZ_CHECK(rc < 0 && why != NULL && *why != '\0');
        else
            check(line, &p);
        free(line);
    }
    return 0;
}
