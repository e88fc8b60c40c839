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
          "  proxy     run the egress proxy (HTTP and SOCKS5) on the settings' policy\n"
          "  check     explain policy decisions for targets, or run a file of expectations\n"
          "  bridge    relay connections between Unix sockets and TCP (replaces socat)\n"
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
    if (strcmp(cmd, "bridge") == 0)
        return cli_bridge(argc - 1, argv + 1);
    if (strcmp(cmd, "proxy") == 0)
        return cli_proxy(argc - 1, argv + 1);
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        printf("sluice %s\n", SLUICE_VERSION);
        return 0;
    }
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        if (argc > 2 && strcmp(argv[2], "check") == 0) {
            cli_check_usage(stdout);
            return 0;
        }
        if (argc > 2 && strcmp(argv[2], "bridge") == 0) {
            cli_bridge_usage(stdout);
            return 0;
        }
        if (argc > 2 && strcmp(argv[2], "proxy") == 0) {
            cli_proxy_usage(stdout);
            return 0;
        }
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "sluice: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
