/* cli/run.c - `sluice run` (and the binary called as `srt`): its options,
 * help and exit codes. The launcher itself is run/launch.c.
 *
 *   sluice run [-s FILE] [--ask HANDLER] [--log FILE] [-q] [-d]
 *              [--report-writes] [--publish [HOST_ADDR:]HOST_PORT:SANDBOX_PORT]...
 *              [--control-fd N] [--dangerously-disable-sandbox] [--learn FILE]
 *              (-c STRING | [--] CMD ARGS...)
 *
 * Options end at the first argument that is not one ("+" in getopt's
 * option string), so `sluice run curl -sS URL` gives -sS to curl.
 */
#include "cli/cli.h"
#include "common/common.h"

#include "policy/policy.h"
#include "proxy/learn.h"
#include "run/run.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cli_run_usage(FILE *f)
{
    fprintf(f,
            "usage: sluice run [OPTIONS] [--] CMD [ARGS...]\n"
            "       sluice run [OPTIONS] -c STRING\n"
            "       srt [OPTIONS] CMD [ARGS...]   (the same, when called as srt)\n"
            "\n"
            "Runs CMD under bubblewrap in a network namespace whose only way out is\n"
            "sluice's HTTP (127.0.0.1:3128) and SOCKS5 (127.0.0.1:1080) proxies, which\n"
            "apply the policy, with filesystem and syscall restrictions.\n"
            "\n"
            "  -s, --settings FILE  settings file (also $SLUICE_SETTINGS)\n"
            "  --ask HANDLER        ask about destinations no rule decides: tty,\n"
            "                       exec:PROGRAM or socket:PATH (default: deny them)\n"
            "  --log FILE           append the connection log to FILE (README:\n"
            "                       \"Connection log\")\n"
            "  --log-format FORMAT  text (default) or json\n"
            "  -q, --quiet          no summary of blocked connections and refused\n"
            "                       writes after the run (writes are then not watched)\n"
            "  --report-writes      watch write system calls and list the writes the\n"
            "                       sandbox refused after the run; off by default: every\n"
            "                       write-intent call then costs a round trip to sluice\n"
            "                       (README: \"Refused writes\")\n"
            "  -d, --debug          [SandboxDebug] lines on stderr (also SRT_DEBUG=1)\n"
            "  --transparent        judge every TCP connect() and answer DNS in the\n"
            "                       sandbox (network.transparent), for programs that\n"
            "                       ignore proxy variables\n"
            "  --publish [HOST_ADDR:]HOST_PORT:SANDBOX_PORT\n"
            "                       relay HOST_ADDR:HOST_PORT on the host (default\n"
            "                       127.0.0.1) to 127.0.0.1:SANDBOX_PORT in the sandbox, for\n"
            "                       a server the command starts (repeatable; also\n"
            "                       network.publish); IPv6 in brackets\n"
            "  --control-fd N       read JSON lines on descriptor N, each a complete\n"
            "                       settings document: a valid one replaces the network\n"
            "                       policy for new connections, an invalid one is\n"
            "                       reported and ignored; filesystem rules stay\n"
            "  --dangerously-disable-sandbox\n"
            "                       run CMD without the sandbox, only when the settings\n"
            "                       allow it (sandbox.allowUnsandboxedCommands)\n"
            "  --learn FILE         run CMD in report mode (network.mode \"report\") and\n"
            "                       write to FILE, after it, the smallest settings file\n"
            "                       (network.allowedDomains) that allows what it reached,\n"
            "                       for review and --settings FILE (README: \"Learning\n"
            "                       a policy\"); not with --ask or --control-fd\n"
            "  -c STRING            run STRING with $SHELL -c (else /bin/sh, said when SHELL\n"
            "                       is set but is no executable absolute path)\n"
            "  -h, --help           show this help\n"
            "  -V, --version        print the version and exit\n"
            "\n"
            "Options end at the first argument that is not one, or at --.\n"
            "Exit status: the command's; 128+N when it was killed by signal N;\n"
            "126/127 when an unsandboxed command cannot be run / is not found;\n"
            "125 when sluice could not set up the sandbox or the options or settings\n"
            "are bad (the command did not run).\n");
}

enum {
    OPT_ASK = 256,
    OPT_LOG,
    OPT_LOG_FORMAT,
    OPT_BYPASS,
    OPT_CONTROL_FD,
    OPT_TRANSPARENT,
    OPT_REPORT_WRITES,
    OPT_LEARN,
    OPT_PUBLISH
};

#define RUN_MAX_PUBLISH 64

static const struct option run_options[] = {
    {"settings", required_argument, NULL, 's'},
    {"ask", required_argument, NULL, OPT_ASK},
    {"log", required_argument, NULL, OPT_LOG},
    {"log-format", required_argument, NULL, OPT_LOG_FORMAT},
    {"quiet", no_argument, NULL, 'q'},
    {"debug", no_argument, NULL, 'd'},
    {"control-fd", required_argument, NULL, OPT_CONTROL_FD},
    {"dangerously-disable-sandbox", no_argument, NULL, OPT_BYPASS},
    {"transparent", no_argument, NULL, OPT_TRANSPARENT},
    {"report-writes", no_argument, NULL, OPT_REPORT_WRITES},
    {"learn", required_argument, NULL, OPT_LEARN},
    {"publish", required_argument, NULL, OPT_PUBLISH},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

/* SRT_DEBUG set to anything but "", "0" or "false". */
static int env_debug(void)
{
    const char *v = getenv("SRT_DEBUG");

    return v != NULL && v[0] != '\0' && strcmp(v, "0") != 0 && strcmp(v, "false") != 0;
}

static int parse_fd(const char *v, int *out)
{
    char *end;
    long n;

    errno = 0;
    n = strtol(v, &end, 10);
    if (errno != 0 || end == v || *end != '\0' || n < 3 || n > 65535) {
        fprintf(stderr, "sluice: run: --control-fd '%s': must be a descriptor number >= 3\n", v);
        return -1;
    }
    *out = (int)n;
    return 0;
}

/* --publish VALUE: checked now, kept for the launcher (its place in argv). */
static int add_publish(struct sb_launch_opts *o, char *v)
{
    static char *values[RUN_MAX_PUBLISH];
    struct settings_publish p;
    const char *why;

    if (settings_publish_parse(v, &p, &why) < 0) {
        fprintf(stderr, "sluice: run: --publish '%s': %s\n", v, why);
        return 1 + SB_LAUNCH_FAIL;
    }
    if (o->npublish == RUN_MAX_PUBLISH) {
        fprintf(stderr, "sluice: run: --publish: at most %d\n", RUN_MAX_PUBLISH);
        return 1 + SB_LAUNCH_FAIL;
    }
    values[o->npublish++] = v;
    o->publish = values;
    return 0;
}

/* One option into o: 0 to go on, else 1 + the exit status. */
static int run_option(struct sb_launch_opts *o, const char **settings, const char **learn, int c,
                      char **argv)
{
    switch (c) {
    case 's':
        *settings = optarg;
        return 0;
    case OPT_LEARN:
        *learn = optarg;
        return 0;
    case OPT_ASK:
        o->ask_spec = optarg;
        return 0;
    case OPT_LOG:
        o->log_path = optarg;
        return 0;
    case OPT_LOG_FORMAT:
        if (strcmp(optarg, "json") == 0 || strcmp(optarg, "text") == 0) {
            o->log_json = strcmp(optarg, "json") == 0;
            return 0;
        }
        fprintf(stderr, "sluice: run: --log-format must be 'text' or 'json', got '%s'\n", optarg);
        return 1 + SB_LAUNCH_FAIL;
    case 'q':
        o->quiet = 1;
        return 0;
    case 'd':
        o->debug = 1;
        return 0;
    case OPT_BYPASS:
        o->bypass = 1;
        return 0;
    case OPT_TRANSPARENT:
        o->transparent = 1;
        return 0;
    case OPT_REPORT_WRITES:
        o->report_writes = 1;
        return 0;
    case OPT_PUBLISH:
        return add_publish(o, optarg);
    case OPT_CONTROL_FD:
        return parse_fd(optarg, &o->control_fd) < 0 ? 1 + SB_LAUNCH_FAIL : 0;
    case 'c':
        o->cstr = optarg;
        return 0;
    case 'h':
        cli_run_usage(stdout);
        return 1;
    case 'V':
        return 1 + cli_version();
    }
    cli_bad_option("run", c, argv, cli_run_usage);
    return 1 + SB_LAUNCH_FAIL;
}

/* 0 with the command in o, or 1 + the exit status. */
static int parse_args(struct sb_launch_opts *o, const char **settings, const char **learn,
                      int argc, char **argv)
{
    int c, rc;

    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+:s:c:qdhV", run_options, NULL)) != -1) {
        rc = run_option(o, settings, learn, c, argv);
        if (rc != 0)
            return rc;
    }
    if (o->cstr != NULL) {
        if (optind < argc) {
            fprintf(stderr, "sluice: run: -c takes one string; unexpected '%s' after it\n",
                    argv[optind]);
            return 1 + SB_LAUNCH_FAIL;
        }
        return 0;
    }
    if (optind >= argc) {
        fprintf(stderr, "sluice: run: no command given\n");
        cli_run_usage(stderr);
        return 1 + SB_LAUNCH_FAIL;
    }
    o->cmd = &argv[optind];
    return 0;
}

/* --learn FILE: what report mode is forced over, and the run's other
 * options and settings, must let the policy see every connection. 0 with
 * report mode on, or -1 after a message. */
static int learn_prepare(const struct sb_launch_opts *o, struct settings *s)
{
    const char *why = NULL;

    if (o->ask_spec != NULL)
        why = "--ask: report mode asks nobody (it lets through what no rule decides)";
    else if (o->control_fd >= 0)
        why = "--control-fd: a settings line would replace the report mode the run learns in";
    else if (o->bypass || s->sandbox.enabled == SETTINGS_FALSE)
        why = "the command would run unsandboxed, with no policy to learn from";
    else if (!s->network.isolate)
        why = "network.isolate is false: the command uses the host's network, not the policy";
    else if (s->network.http_proxy_port != 0 || s->network.socks_proxy_port != 0)
        why = "network.httpProxyPort/socksProxyPort: an external proxy decides, not sluice";
    else if (s->managed_file != NULL && s->network.mode != SETTINGS_MODE_REPORT)
        why = "the managed settings exist and only they may set network.mode to \"report\"";
    if (why != NULL) {
        fprintf(stderr, "sluice: run: --learn: %s; not run\n", why);
        return -1;
    }
    s->network.mode = SETTINGS_MODE_REPORT;
    return 0;
}

/* After a --learn run: the fragment into out. 0 or -1 after a message. */
static int learn_finish(struct learn *l, struct learn_out *out)
{
    struct learn_result res;
    int rc = -1;

    if (learn_build(l, NULL, stderr, &res) == 0 && learn_out_write(out, res.json) == 0) {
        learn_print_summary(&res, out->path, 0);
        rc = 0;
    }
    free(res.json);
    return rc;
}

int cli_run(int argc, char **argv)
{
    struct sb_launch_opts o;
    struct settings s;
    const char *settings_path = NULL, *learn_path = NULL;
    struct learn_out out = {.dirfd = -1};
    int rc;

    memset(&o, 0, sizeof(o));
    o.t0_us = common_mono_us();
    o.control_fd = -1;
    o.debug = env_debug();
    rc = parse_args(&o, &settings_path, &learn_path, argc, argv);
    if (rc != 0)
        return rc - 1;
    if (cli_load_settings(&s, settings_path) < 0) {
        fprintf(stderr, "sluice: run: not running the command: the settings are invalid\n");
        return SB_LAUNCH_FAIL;
    }
    if (learn_path != NULL) {
        if (learn_prepare(&o, &s) < 0 || learn_out_open(&out, learn_path) < 0 ||
            learn_new(&o.learn) < 0) {
            learn_out_close(&out);
            settings_free(&s);
            return SB_LAUNCH_FAIL;
        }
    }
    rc = sb_launch(&o, &s);
    if (o.learn != NULL && rc != SB_LAUNCH_FAIL && learn_finish(o.learn, &out) < 0 && rc == 0)
        rc = 1; /* the command succeeded, its fragment could not be written */
    learn_free(o.learn);
    learn_out_close(&out);
    settings_free(&s);
    return rc;
}
