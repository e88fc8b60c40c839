/* cli/inner_main.c - sluice-inner: `sluice inner` as an executable of its
 * own, the first program bwrap starts in the sandbox of `sluice run`.
 *
 * Issue 25 (start-up): inner is the second start of sluice in every run,
 * and the sluice binary maps nine libraries (OpenSSL's libcrypto alone
 * costs about 4 ms of relocations and page faults per start on a VM).
 * This one is built from inner's own sources (sandbox/inner.c, seccomp.c,
 * fswatch.c, landlock.c, limits.c, common/sys.c) and links libc and
 * libseccomp only. It takes the same arguments and speaks the same
 * handoff as `sluice inner`, which stays: run/launch.c uses this file when
 * it sits beside the sluice binary or in sluice's libexec directory, and
 * `SELF inner` otherwise. */
#include "cli/lsan.h"
#include "cli/version.h"
#include "sandbox/sandbox.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    /* alone, as `sluice --version` is: its start costs (tests/bench/run.sh) */
    if (argc == 2 && strcmp(argv[1], "--version") == 0) {
        printf("sluice-inner %s (commit %s)\n", SLUICE_VERSION, SLUICE_COMMIT);
        return 0;
    }
    /* sb_inner_main's argv[0] is the subcommand's name, as in `sluice
     * inner ...`: argv[0] here plays that part */
    return sb_inner_main(argc, argv);
}
