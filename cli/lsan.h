/* cli/lsan.h - LeakSanitizer settings of sluice's executables (sluice and
 * sluice-inner); included once by each one's main file. */
#ifndef SLUICE_CLI_LSAN_H
#define SLUICE_CLI_LSAN_H

/* ASan builds (scripts/test.sh --sanitize): LeakSanitizer reports blocks
 * libseccomp keeps after seccomp_release() in `sluice inner` when the exec
 * of the command fails (indirect only, 28 blocks, since the set-user-ID
 * filter made inner load two filters); they are the library's, not ours */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SLUICE_LSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define SLUICE_LSAN 1
#endif
#ifdef SLUICE_LSAN
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:libseccomp.so\n";
}
/* and without the "Suppressions used" table on stderr, which tests read */
const char *__lsan_default_options(void);
const char *__lsan_default_options(void)
{
    return "print_suppressions=0";
}
#endif

#endif
