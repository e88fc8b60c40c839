/* tests/fuzz/replay.c - main() of the fuzz_*_replay programs: feeds every
 * file named (or found in a directory named, one level deep) to
 * LLVMFuzzerTestOneInput, the way ctest replays the committed corpora
 * (the c-ares ares-test-fuzz pattern). A directory that is missing or holds
 * no file fails the run: a replay of nothing is not a test.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

#define REPLAY_MAX (1u << 20) /* larger files are refused, not truncated */

/* 0 and *count incremented, or -1 (reported). */
static int replay_file(const char *path, size_t *count)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf;
    size_t n;

    if (f == NULL) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        return -1;
    }
    buf = malloc(REPLAY_MAX + 1);
    if (buf == NULL) {
        fclose(f);
        fprintf(stderr, "replay: out of memory\n");
        return -1;
    }
    n = fread(buf, 1, REPLAY_MAX + 1, f);
    if (ferror(f) || n > REPLAY_MAX) {
        fprintf(stderr, "replay: %s: %s\n", path, n > REPLAY_MAX ? "too large" : "read error");
        fclose(f);
        free(buf);
        return -1;
    }
    fclose(f);
    /* an exact-size copy: a harness reading past the input is caught by ASan */
    {
        uint8_t *exact = malloc(n > 0 ? n : 1);
        if (exact == NULL) {
            free(buf);
            return -1;
        }
        memcpy(exact, buf, n);
        free(buf);
        (void)LLVMFuzzerTestOneInput(exact, n);
        free(exact);
    }
    (*count)++;
    return 0;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every regular file directly in dir, in name order (reproducible runs). */
static int replay_dir(const char *dir, size_t *count)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char **names = NULL;
    size_t n = 0, cap = 0, before = *count;
    int rc = 0;

    if (d == NULL) {
        fprintf(stderr, "replay: %s: %s\n", dir, strerror(errno));
        return -1;
    }
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        if (n == cap) {
            char **nn = realloc(names, (cap = cap ? cap * 2 : 64) * sizeof(*names));
            if (nn == NULL) {
                rc = -1;
                break;
            }
            names = nn;
        }
        names[n] = malloc(strlen(dir) + strlen(e->d_name) + 2);
        if (names[n] == NULL) {
            rc = -1;
            break;
        }
        snprintf(names[n], strlen(dir) + strlen(e->d_name) + 2, "%s/%s", dir, e->d_name);
        n++;
    }
    closedir(d);
    if (rc == 0 && n > 0)
        qsort(names, n, sizeof(*names), cmp_names);
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if (rc == 0 && stat(names[i], &st) == 0 && S_ISREG(st.st_mode) &&
            replay_file(names[i], count) < 0)
            rc = -1;
        free(names[i]);
    }
    free(names);
    if (rc == 0 && *count == before) {
        fprintf(stderr, "replay: %s: no input files\n", dir);
        rc = -1;
    }
    return rc;
}

int main(int argc, char **argv)
{
    const char *name = strrchr(argv[0], '/') != NULL ? strrchr(argv[0], '/') + 1 : argv[0];
    size_t count = 0;
    int rc = 0;

    if (argc < 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR_OR_FILE...\n", name);
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
            rc = 1;
        } else if (S_ISDIR(st.st_mode) ? replay_dir(argv[i], &count) < 0
                                        : replay_file(argv[i], &count) < 0) {
            rc = 1;
        }
    }
    printf("%s: %zu inputs replayed\n", name, count);
    return rc;
}
