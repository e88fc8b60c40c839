/* cli/connect.c - `sluice connect`: options, help and exit codes of the
 * netcat-like ssh ProxyCommand (the tunnel is bridge/connect.c).
 *
 *   sluice connect [--proxy HOST:PORT] HOST PORT
 *
 * Opens a tunnel to HOST:PORT with an HTTP CONNECT through the proxy
 * (default 127.0.0.1:3128, the in-sandbox HTTP proxy of `sluice run`; also
 * $SLUICE_CONNECT_PROXY) and copies stdin to it and it to stdout until both
 * directions have ended. ssh uses it as `-o ProxyCommand='sluice connect %h
 * %p'`, which is how GIT_SSH_COMMAND inside the sandbox reaches a git host.
 *
 * Exit status: 0 when the tunnel ran and ended; 1 when the proxy refused
 * (its status line is printed) or the connection failed; 2 for bad usage.
 */
#include "cli/cli.h"

#include "bridge/connect.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

void cli_connect_usage(FILE *f)
{
    fprintf(f, "usage: sluice connect [--proxy ADDR:PORT] HOST PORT\n"
               "\n"
               "Tunnels stdin/stdout to HOST:PORT through an HTTP proxy with CONNECT\n"
               "(default 127.0.0.1:3128, or $SLUICE_CONNECT_PROXY). For ssh:\n"
               "  ssh -o ProxyCommand='sluice connect %%h %%p' git@example.com\n"
               "\n"
               "  --proxy ADDR:PORT  the proxy (or unix:PATH)\n"
               "  -h, --help         show this help\n"
               "  -V, --version      print the version and exit\n"
               "\n"
               "exit status: 0 the tunnel ended, 1 the proxy refused or failed, 2 bad\n"
               "arguments\n");
}

enum { OPT_PROXY = 256 };

static const struct option connect_options[] = {
    {"proxy", required_argument, NULL, OPT_PROXY},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

int cli_connect(int argc, char **argv)
{
    const char *proxy = getenv("SLUICE_CONNECT_PROXY");
    int i, c;

    if (proxy == NULL || proxy[0] == '\0')
        proxy = "127.0.0.1:3128";
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+:hV", connect_options, NULL)) != -1) {
        if (c == 'h') {
            cli_connect_usage(stdout);
            return 0;
        }
        if (c == 'V')
            return cli_version();
        if (c != OPT_PROXY) {
            cli_bad_option("connect", c, argv, cli_connect_usage);
            return 2;
        }
        proxy = optarg;
    }
    i = optind;
    if (argc - i != 2) {
        cli_connect_usage(stderr);
        return 2;
    }
    return connect_run(proxy, argv[i], argv[i + 1]);
}
