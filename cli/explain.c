/* cli/explain.c - `sluice explain`: options, help and exit codes (the
 * explanation itself is sandbox/explain.c).
 *
 *   sluice explain [--settings FILE] [--json]
 *
 * Reads the same settings layers as `sluice run` and prints what a command
 * run there may and may not do: network, filesystem, Unix sockets and other
 * syscalls, environment, and the bypass policy (reference 001 §1-6).
 */
#include "cli/cli.h"

#include "policy/policy.h"
#include "sandbox/explain.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cli_explain_usage(FILE *f)
{
    fprintf(f, "usage: sluice explain [--settings FILE] [--json]\n"
               "\n"
               "Describes the restrictions `sluice run` applies with these settings:\n"
               "network, filesystem, Unix sockets and syscalls, environment, and when a\n"
               "command may run without the sandbox.\n"
               "\n"
               "  -s, --settings FILE\n"
               "                   settings file (also $SLUICE_SETTINGS)\n"
               "  --json           the same as one JSON object\n"
               "  -h, --help       show this help\n"
               "  -V, --version    print the version and exit\n"
               "\n"
               "exit status: 0 ok, 1 out of memory, 2 bad arguments or settings\n");
}

enum { OPT_SETTINGS = 256, OPT_JSON };

static const struct option explain_options[] = {
    {"settings", required_argument, NULL, OPT_SETTINGS},
    {"json", no_argument, NULL, OPT_JSON},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

int cli_explain(int argc, char **argv)
{
    struct settings s;
    const char *path = NULL;
    int json = 0, rc = 0, c;

    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":s:hV", explain_options, NULL)) != -1) {
        if (c == 's') /* -s FILE, as in run */
            c = OPT_SETTINGS;
        if (c == 'h') {
            cli_explain_usage(stdout);
            return 0;
        }
        if (c == 'V')
            return cli_version();
        if (c == OPT_JSON) {
            json = 1;
        } else if (c == OPT_SETTINGS) {
            path = optarg;
        } else {
            cli_bad_option("explain", c, argv, cli_explain_usage);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "sluice: explain: unexpected argument '%s'\n", argv[optind]);
        cli_explain_usage(stderr);
        return 2;
    }
    if (cli_load_settings(&s, path) < 0)
        return 2;
    rc = sb_explain(&s, json);
    settings_free(&s);
    return rc;
}
