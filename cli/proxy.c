/* cli/proxy.c - placeholder while the command is being written. */
#include "cli/cli.h"

void cli_proxy_usage(FILE *f)
{
    fputs("usage: sluice proxy ... (not available yet)\n", f);
}

int cli_proxy(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    cli_proxy_usage(stderr);
    return 2;
}
