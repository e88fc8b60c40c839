/* cli/main.c - the sluice binary: one executable, one subcommand per job. */
#include "cli/cli.h"
#include "sandbox/sandbox.h"

#include <stdio.h>
#include <string.h>

#include "cli/lsan.h"

struct subcommand {
    const char *name;
    int (*main)(int argc, char **argv);
    void (*usage)(FILE *f);
};

static const struct subcommand commands[] = {
    {"run", cli_run, cli_run_usage},
    {"proxy", cli_proxy, cli_proxy_usage},
    {"check", cli_check, cli_check_usage},
    {"explain", cli_explain, cli_explain_usage},
    {"bridge", cli_bridge, cli_bridge_usage},
    {"connect", cli_connect, cli_connect_usage},
    /* the in-sandbox helper of `sluice run`; not for direct use */
    {"inner", sb_inner_main, NULL},
};

static void usage(FILE *f)
{
    fputs("usage: sluice COMMAND [OPTIONS] [ARGS]\n"
          "\n"
          "commands:\n"
          "  run       run a command in the sandbox: network only through sluice's proxies\n"
          "  proxy     run the egress proxy (HTTP and SOCKS5) on the settings' policy\n"
          "  check     explain policy decisions for targets, or run a file of expectations\n"
          "  explain   describe the restrictions `sluice run` applies with these settings\n"
          "  bridge    relay connections between Unix sockets and TCP (replaces socat)\n"
          "  connect   tunnel stdin/stdout through an HTTP proxy (ssh ProxyCommand)\n"
          "  help      show this help, or 'sluice help COMMAND'\n"
          "  version   print the version and commit (also -V, --version)\n"
          "\n"
          "Run 'sluice COMMAND --help' for a command's options.\n"
          "Exit status: the command's; 2 for an unknown command.\n",
          f);
}

static const struct subcommand *find(const char *name)
{
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

/* Called as `srt` (a link or copy named srt): srt's command line, which is
 * `sluice run`'s. `srt inner` stays the in-sandbox helper, since the
 * sandbox starts our own binary by its path as `SELF inner`. */
static int called_as_srt(const char *argv0)
{
    const char *base = strrchr(argv0, '/');

    return strcmp(base != NULL ? base + 1 : argv0, "srt") == 0;
}

int main(int argc, char **argv)
{
    const struct subcommand *c;
    const char *cmd;

    if (argc >= 1 && called_as_srt(argv[0]) && !(argc >= 2 && strcmp(argv[1], "inner") == 0))
        return cli_run(argc, argv);

    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    cmd = argv[1];
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0)
        return cli_version();
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        c = argc > 2 ? find(argv[2]) : NULL;
        if (c != NULL && c->usage != NULL)
            c->usage(stdout);
        else
            usage(stdout);
        return 0;
    }
    c = find(cmd);
    if (c != NULL)
        return c->main(argc - 1, argv + 1);
    fprintf(stderr, "sluice: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
