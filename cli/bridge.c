/* cli/bridge.c - placeholder while the command is being written. */
#include "cli/cli.h"

void cli_bridge_usage(FILE *f)
{
    fputs("usage: sluice bridge ... (not available yet)\n", f);
}

int cli_bridge(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    cli_bridge_usage(stderr);
    return 2;
}
