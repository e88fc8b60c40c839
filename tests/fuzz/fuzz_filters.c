/* tests/fuzz/fuzz_filters.c - the seccomp filter blob that `sluice run`'s
 * launcher sends `sluice inner` (issue 25; sb_seccomp_blob_parse in
 * sandbox/seccomp.c). Nothing is loaded: only the parse.
 *
 * Checked: a blob is taken only when it is exactly SB_SECCOMP_PROGS
 * programs, each a native uint32_t count of 1 to BPF_MAXINSNS followed by
 * that many instructions, and then each program holds its count and the
 * instructions byte for byte; a refusal holds nothing (no filter left to
 * free); nothing is read past the input (ASan in the fuzzing build).
 */
#include <errno.h>
#include <linux/filter.h>
#include <stdint.h>
#include <string.h>

#include "fuzz.h"
#include "sandbox/sandbox.h"

/* What the parse must decide, walked independently. */
static int well_formed(const uint8_t *d, size_t n)
{
    size_t off = 0;

    for (int i = 0; i < SB_SECCOMP_PROGS; i++) {
        uint32_t c;
        if (n - off < sizeof c)
            return 0;
        memcpy(&c, d + off, sizeof c);
        off += sizeof c;
        if (c == 0 || c > BPF_MAXINSNS || n - off < (size_t)c * sizeof(struct sock_filter))
            return 0;
        off += (size_t)c * sizeof(struct sock_filter);
    }
    return off == n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sock_fprog p[SB_SECCOMP_PROGS];
    int rc = sb_seccomp_blob_parse(data, size, p);

    FUZZ_CHECK(rc == 0 || rc == -EPROTO || rc == -ENOMEM);
    if (rc == -ENOMEM)
        return 0;
    FUZZ_CHECK((rc == 0) == well_formed(data, size));
    if (rc != 0) {
        for (int i = 0; i < SB_SECCOMP_PROGS; i++)
            FUZZ_CHECK(p[i].filter == NULL);
        return 0;
    }
    size_t off = 0;
    for (int i = 0; i < SB_SECCOMP_PROGS; i++) {
        uint32_t c;
        memcpy(&c, data + off, sizeof c);
        off += sizeof c;
        FUZZ_CHECK(p[i].len == c && p[i].filter != NULL);
        FUZZ_CHECK(memcmp(p[i].filter, data + off, (size_t)c * sizeof(struct sock_filter)) == 0);
        off += (size_t)c * sizeof(struct sock_filter);
    }
    sb_seccomp_blob_free(p);
    for (int i = 0; i < SB_SECCOMP_PROGS; i++)
        FUZZ_CHECK(p[i].filter == NULL);
    return 0;
}
