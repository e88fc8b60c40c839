/* tests/fuzz/fuzz.h - shared by the harnesses (tests/fuzz/README.md).
 *
 * Each harness defines LLVMFuzzerTestOneInput; libFuzzer drives it in the
 * fuzz_* programs (SLUICE_FUZZ), replay.c drives it over a committed corpus
 * in the fuzz_*_replay programs that ctest runs. Invariants are checked with
 * FUZZ_CHECK, which prints what failed and aborts in both builds.
 */
#ifndef SLUICE_FUZZ_H
#define SLUICE_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #cond);         \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* A deterministic PRNG (xorshift64*) seeded from the input, so a replay makes
 * the same choices (chunk splits) as the fuzzing run that found the input. */
static inline uint64_t fuzz_hash(const uint8_t *d, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= d[i];
        h *= 0x100000001b3ull;
    }
    return h != 0 ? h : 1;
}

static inline uint64_t fuzz_rand(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1Dull;
}

/* A heap copy of exactly n bytes (1 if n is 0), so ASan sees any overread;
 * with nul, one more byte holding '\0' (for functions taking a C string). */
static inline char *fuzz_dup(const void *p, size_t n, int nul)
{
    char *b = malloc(n + (nul ? 1 : 0) + (n == 0 && !nul ? 1 : 0));
    if (b == NULL)
        abort();
    for (size_t i = 0; i < n; i++)
        b[i] = ((const char *)p)[i];
    if (nul)
        b[n] = '\0';
    return b;
}

/* A heap block of exactly n bytes (1 if n is 0), filled with a pattern. */
static inline char *fuzz_alloc(size_t n)
{
    char *b = malloc(n > 0 ? n : 1);
    if (b == NULL)
        abort();
    for (size_t i = 0; i < n; i++)
        b[i] = (char)0xA5;
    return b;
}

#endif
