/* tests/fuzz/fuzz_settings.c - the settings loader (settings/,
 * jsonpos.c) and the policy compiler.
 *
 * The input is a settings file, optionally followed by a NUL byte and the
 * text of a list file. The harness is linked with -Wl,--wrap=open, so the
 * list files the settings name (network.*DomainsFiles) are never read from
 * the disk: while the loader runs, opening any path whose name holds
 * "missing" fails with ENOENT and any other path gives a pipe holding the
 * list text (or ENOENT when the input has none). Nothing outside the input
 * is read, and a name like /dev/zero cannot stall the fuzzer.
 *
 * Checked: settings_apply_buffer returns 0 or a negative errno with a
 * located, NUL-terminated message; a file is all or nothing (applying it
 * again on top works the same way, as layered files do); every notice has
 * a text; policy_compile either succeeds or fails with a message; a
 * compiled policy decides a few requests; settings_free / policy_free leave
 * nothing behind (LeakSanitizer runs in the fuzz build).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "policy/policy.h"

#define LIST_MAX 16384 /* fits a pipe's buffer: written before it is read */

int __real_open(const char *path, int flags, ...);
int __wrap_open(const char *path, int flags, ...);

static int intercept;         /* 1 while the loader runs */
static const char *list_text; /* NULL: no list file in the input */
static size_t list_len;

int __wrap_open(const char *path, int flags, ...)
{
    int fds[2];

    if (!intercept) {
        mode_t mode = 0;
        if (flags & O_CREAT) {
            va_list ap;
            va_start(ap, flags);
            mode = (mode_t)va_arg(ap, int);
            va_end(ap);
        }
        return __real_open(path, flags, mode);
    }
    if (list_text == NULL || strstr(path, "missing") != NULL) {
        errno = ENOENT;
        return -1;
    }
    if (pipe(fds) != 0)
        return -1;
    if (list_len > 0 && write(fds[1], list_text, list_len) != (ssize_t)list_len) {
        close(fds[0]);
        close(fds[1]);
        errno = EIO;
        return -1;
    }
    close(fds[1]);
    return fds[0];
}

static void check_error(int rc, const struct settings_error *err)
{
    FUZZ_CHECK(rc < 0);
    FUZZ_CHECK(memchr(err->msg, '\0', sizeof(err->msg)) != NULL);
    FUZZ_CHECK(err->msg[0] != '\0');
}

static void check_list(const struct settings_list *l)
{
    FUZZ_CHECK(l->n <= l->cap);
    for (size_t i = 0; i < l->n; i++)
        FUZZ_CHECK(l->items[i].value != NULL && l->items[i].file != NULL);
}

static void decide_some(const struct policy *p)
{
    static const char *const targets[] = {"example.com", "a.example.com:80", "127.0.0.1:22",
                                          "[::1]:443",   "10.1.2.3",         "xn--bcher-kva.de"};
    static struct policy_host h;
    struct policy_decision d;
    const char *why = NULL;
    uint16_t port = 0;

    for (size_t i = 0; i < sizeof(targets) / sizeof(targets[0]); i++) {
        FUZZ_CHECK(policy_target_parse(targets[i], 443, &h, &port, &why) == 0);
        policy_decide(p, &h, port, &d);
        FUZZ_CHECK(d.verdict == POLICY_DENY || d.verdict == POLICY_ALLOW ||
                   d.verdict == POLICY_ASK);
        FUZZ_CHECK(memchr(d.reason, '\0', sizeof(d.reason)) != NULL);
        FUZZ_CHECK(d.origin != POLICY_BY_RULE || d.rule != NULL);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct settings s;
    static struct settings_error err;
    const char *nul = memchr(data, '\0', size);
    size_t jlen = nul != NULL ? (size_t)(nul - (const char *)data) : size;
    struct policy *p = NULL;
    char *json;
    int rc;

    if (size > 256 * 1024)
        return 0;
    list_text = NULL;
    list_len = 0;
    if (nul != NULL) {
        list_len = size - jlen - 1;
        if (list_len > LIST_MAX)
            return 0;
        list_text = nul + 1;
    }
    json = fuzz_dup(data, jlen, 0);

    settings_init(&s);
    memset(&err, 0, sizeof(err));
    intercept = 1;
    rc = settings_apply_buffer(&s, "/fuzz/settings.json", json, jlen, &err);
    intercept = 0;
    if (rc != 0) {
        check_error(rc, &err);
        /* all or nothing: the failed file left the defaults */
        FUZZ_CHECK(s.network.allowed_domains.n == 0 && s.network.denied_domains.n == 0);
        settings_free(&s);
        free(json);
        return 0;
    }
    check_list(&s.network.allowed_domains);
    check_list(&s.network.denied_domains);
    check_list(&s.network.denied_resolved_addresses);
    check_list(&s.network.dns_servers);
    check_list(&s.notices);
    FUZZ_CHECK(s.mandatory_deny_search_depth >= 1 && s.mandatory_deny_search_depth <= 10);

    /* a second layer: the same file again */
    {
        size_t nallow = s.network.allowed_domains.n;
        memset(&err, 0, sizeof(err));
        intercept = 1;
        rc = settings_apply_buffer(&s, "/fuzz/project.json", json, jlen, &err);
        intercept = 0;
        if (rc != 0)
            check_error(rc, &err);
        else
            FUZZ_CHECK(s.network.allowed_domains.n == nallow); /* allow lists replace */
    }

    memset(&err, 0, sizeof(err));
    rc = policy_compile(&s, &p, &err);
    if (rc != 0) {
        check_error(rc, &err);
    } else {
        FUZZ_CHECK(p != NULL);
        decide_some(p);
        policy_free(p);
    }
    settings_free(&s);
    free(json);
    return 0;
}
