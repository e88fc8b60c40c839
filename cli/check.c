/* cli/check.c - `sluice check`: its options, help and exit codes. The
 * engine (decide, resolve, guard, print, expectations) is proxy/check.c.
 *
 *   sluice check [--settings FILE] [--json] [--resolve] [--transparent] [--proxy]
 *                [--method M] TARGET...
 *   sluice check [--settings FILE] [--resolve] [--proxy] --expect FILE
 *   sluice check --settings FILE [--proxy] (the config test, proxy/checkconf.c)
 *   sluice check [--settings FILE] [--json] [--resolve] [--proxy] --replay LOG
 *                (proxy/replay.c)
 *   sluice check [--settings BASE] [--proxy] --learn LOG [-o FILE] (proxy/learn.c)
 *
 * Options may come before or after targets; "--" ends them.
 */
#include "cli/cli.h"

#include "policy/policy.h"
#include "proxy/check.h"
#include "proxy/server.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cli_check_usage(FILE *f)
{
    fputs("usage: sluice check [--settings FILE] [--json] [--resolve] [--transparent] [--proxy]\n"
          "                    [--method M] TARGET...\n"
          "       sluice check [--settings FILE] [--resolve] [--proxy] --expect FILE\n"
          "       sluice check --settings FILE [--proxy]\n"
          "       sluice check [--settings FILE] [--json] [--resolve] [--proxy] --replay LOG\n"
          "       sluice check [--settings BASE] [--proxy] --learn LOG [-o FILE]\n"
          "\n"
          "Explains what the policy decides for each TARGET without sending traffic.\n"
          "With --settings and no TARGET, tests FILE (and its list files) and prints a\n"
          "one-line summary: rules by kind, mode, listeners (a config test).\n"
          "TARGET is host, host:port, an IPv4 literal, [v6] or [v6]:port (port 443 when omitted),\n"
          "or a URL (http://HOST[:PORT]/PATH, https://...): the request it makes, judged by\n"
          "network.requestRules too (an https:// URL as the CONNECT tunnel it travels in).\n"
          "\n"
          "  -s, --settings FILE\n"
          "                   settings file (default: $SLUICE_SETTINGS, then the user file)\n"
          "  --json           one JSON object per target: target, host, port, decision, rule,\n"
          "                   source, reason (and addresses with --resolve)\n"
          "  --resolve        also resolve names (network.dnsServers or /etc/resolv.conf) and\n"
          "                   judge every answer with the address guard\n"
          "  --transparent    also say what transparent mode's resolver answers for each\n"
          "                   name (on when network.transparent is true)\n"
          "  -X, --method M   the method of URL targets' requests (default GET)\n"
          "  --proxy          judge as `sluice proxy` would: its defaults (an unset\n"
          "                   network.denyPrivateAddresses is true); without it, as `run`\n"
          "  -h, --help       show this help\n"
          "  -V, --version    print the version and exit\n"
          "  --expect FILE    each line 'allow|deny|ask TARGET' or 'allow|deny|ask METHOD URL'\n"
          "                   ('#' comments); prints every\n"
          "                   mismatch and 'N passed, M failed'; exit 1 on a mismatch\n"
          "  --replay LOG     judge every decision record of a connection log (what\n"
          "                   sluice proxy --log or sluice run --log wrote: logfmt or\n"
          "                   JSON, '-' for stdin) with these settings and print each\n"
          "                   decision that changes, grouped, with counts, old and new\n"
          "                   rule; names are resolved only with --resolve; exit 1 when\n"
          "                   one changes\n"
          "  --learn LOG      write the smallest settings fragment (JSON, network.allowedDomains\n"
          "                   entries HOST:PORT, '*.DOMAIN:PORT' where several subdomains of\n"
          "                   one registrable domain were seen) that would have allowed the\n"
          "                   log's connections; what report mode would not lift (the address\n"
          "                   guard, deny rules, non-public IP literals) is listed on stderr,\n"
          "                   not allowed; with --settings BASE only what BASE does not allow\n"
          "  -o, --output FILE\n"
          "                   with --learn: write the fragment to FILE (atomically; never\n"
          "                   through a symbolic link) instead of stdout\n"
          "\n"
          "exit status: 0 ok (with --replay: nothing changes), 1 expectation mismatch (a\n"
          "decision changes), 2 bad settings, target, expectation or log line, or a\n"
          "learned fragment that cannot be written\n",
          f);
}

enum {
    OPT_SETTINGS = 256,
    OPT_JSON,
    OPT_RESOLVE,
    OPT_EXPECT,
    OPT_TRANSPARENT,
    OPT_PROXY,
    OPT_METHOD,
    OPT_REPLAY,
    OPT_LEARN,
    OPT_OUTPUT
};

static const struct option check_options[] = {
    {"settings", required_argument, NULL, OPT_SETTINGS},
    {"json", no_argument, NULL, OPT_JSON},
    {"resolve", no_argument, NULL, OPT_RESOLVE},
    {"transparent", no_argument, NULL, OPT_TRANSPARENT},
    {"proxy", no_argument, NULL, OPT_PROXY},
    {"method", required_argument, NULL, OPT_METHOD},
    {"expect", required_argument, NULL, OPT_EXPECT},
    {"replay", required_argument, NULL, OPT_REPLAY},
    {"learn", required_argument, NULL, OPT_LEARN},
    {"output", required_argument, NULL, OPT_OUTPUT},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

/* 0 with the options in o, or 1 + the exit status. */
static int parse_args(struct check_opts *o, const char **settings, int *as_proxy, int argc,
                      char **argv)
{
    int c;

    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":s:X:o:hV", check_options, NULL)) != -1) {
        if (c == 's') /* -s FILE, as in run */
            c = OPT_SETTINGS;
        if (c == 'X') /* -X M, as in curl */
            c = OPT_METHOD;
        if (c == 'o')
            c = OPT_OUTPUT;
        switch (c) {
        case OPT_SETTINGS:
            *settings = optarg;
            break;
        case OPT_JSON:
            o->json = 1;
            break;
        case OPT_RESOLVE:
            o->resolve = 1;
            break;
        case OPT_TRANSPARENT:
            o->transparent = 1;
            break;
        case OPT_PROXY:
            *as_proxy = 1;
            break;
        case OPT_METHOD:
            o->method = optarg;
            break;
        case OPT_EXPECT:
            o->expect_path = optarg;
            break;
        case OPT_REPLAY:
            o->replay_path = optarg;
            break;
        case OPT_LEARN:
            o->learn_path = optarg;
            break;
        case OPT_OUTPUT:
            o->output_path = optarg;
            break;
        case 'h':
            cli_check_usage(stdout);
            return 1;
        case 'V':
            return 1 + cli_version();
        default:
            cli_bad_option("check", c, argv, cli_check_usage);
            return 1 + 2;
        }
    }
    o->targets = (const char *const *)&argv[optind];
    o->ntargets = (size_t)(argc - optind);
    if (o->learn_path != NULL || o->output_path != NULL) {
        if (o->learn_path == NULL || o->replay_path != NULL || o->expect_path != NULL ||
            o->ntargets > 0 || o->method != NULL || o->transparent || o->json || o->resolve) {
            fprintf(stderr, "sluice: check: --learn LOG takes only --settings, --proxy and -o "
                            "FILE (and -o only goes with --learn)\n");
            return 1 + 2;
        }
        return 0;
    }
    if (o->replay_path != NULL) {
        if (o->expect_path != NULL || o->ntargets > 0 || o->method != NULL || o->transparent) {
            fprintf(stderr, "sluice: check: --replay LOG takes no targets, --expect, --method "
                            "or --transparent\n");
            return 1 + 2;
        }
        return 0;
    }
    if (o->expect_path != NULL && o->ntargets > 0) {
        fprintf(stderr, "sluice: check: give either --expect FILE or targets, not both\n");
        return 1 + 2;
    }
    if (o->expect_path == NULL && o->ntargets == 0 && *settings != NULL) {
        if (o->json || o->resolve) {
            fprintf(stderr, "sluice: check: --settings without a target is the config test: "
                            "no --json or --resolve\n");
            return 1 + 2;
        }
        o->config_test = 1; /* issue 16: the config test (proxy/checkconf.c) */
        return 0;
    }
    if (o->expect_path == NULL && o->ntargets == 0) {
        fprintf(stderr, "sluice: check: no targets given\n");
        cli_check_usage(stderr);
        return 1 + 2;
    }
    return 0;
}

int cli_check(int argc, char **argv)
{
    struct check_opts o;
    struct settings s;
    const char *settings_path = NULL;
    int as_proxy = 0, rc;

    memset(&o, 0, sizeof(o));
    rc = parse_args(&o, &settings_path, &as_proxy, argc, argv);
    if (rc != 0)
        return rc - 1;
    if (cli_load_settings(&s, settings_path) < 0)
        return 2;
    if (as_proxy)
        proxy_settings_defaults(&s);
    if (s.network.transparent && o.replay_path == NULL && o.learn_path == NULL)
        o.transparent = 1;
    if (o.learn_path != NULL)
        rc = check_learn(&o, &s, settings_path);
    else if (o.replay_path != NULL)
        rc = check_replay(&o, &s, settings_path);
    else
        rc = o.config_test ? check_config(&s, settings_path) : check_run(&o, &s);
    settings_free(&s);
    return rc;
}
