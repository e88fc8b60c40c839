/* cli/main.c - the sluice binary: one executable, one subcommand per job. */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

#ifndef SLUICE_VERSION
#define SLUICE_VERSION "0.1.0"
#endif

static void usage(FILE *f)
{
    fputs("usage: sluice COMMAND [OPTIONS] [ARGS]\n"
          "\n"
          "commands:\n"
          "  check     explain policy decisions for targets, or run a file of expectations\n"
          "  help      show this help, or 'sluice help COMMAND'\n"
          "  version   print the version\n"
          "\n"
          "Run 'sluice COMMAND --help' for a command's options.\n",
          f);
}

int main(int argc, char **argv)
{
    const char *cmd;

    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    cmd = argv[1];
    if (strcmp(cmd, "check") == 0)
        return cli_check(argc - 1, argv + 1);
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        printf("sluice %s\n", SLUICE_VERSION);
        return 0;
    }
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        if (argc > 2 && strcmp(argv[2], "check") == 0) {
            cli_check_usage(stdout);
            return 0;
        }
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "sluice: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
