/* cli/proxy.c - `sluice proxy`: its options, help and exit codes. The
 * service itself is proxy/server.c. */
#include "cli/cli.h"

#include "proxy/server.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HEALTH_PATH_MAX 200

void cli_proxy_usage(FILE *f)
{
    fputs("usage: sluice proxy [OPTIONS]\n"
          "\n"
          "Runs the egress proxy: HTTP (CONNECT and absolute-form) and SOCKS5 on the\n"
          "settings' policy. Unmatched destinations are denied unless --ask is given;\n"
          "private addresses are denied unless network.denyPrivateAddresses is false.\n"
          "\n"
          "options:\n"
          "  -s, --settings FILE   settings file (also $SLUICE_SETTINGS)\n"
          "  --http ENDPOINT       HTTP proxy listener, or 'off' (default tcp:127.0.0.1:3128)\n"
          "  --socks ENDPOINT      SOCKS5 listener, or 'off' (default tcp:127.0.0.1:1080)\n"
          "  --ask HANDLER         ask about unmatched destinations: tty, exec:PROGRAM,\n"
          "                        socket:PATH\n"
          "  --admin ENDPOINT      admin listener: GET /healthz, /readyz, /metrics\n"
          "                        (Prometheus), or 'off' (the default)\n"
          "  --health-path PATH    answer 'GET PATH' (origin form) on the HTTP proxy port\n"
          "                        with 200 ok, e.g. /healthz (default: none, 400)\n"
          "  --log FILE            append the connection log to FILE (default stderr)\n"
          "  --log-format FORMAT   text (default) or json\n"
          "  --watch               reload when the settings file or a list file changes\n"
          "                        (also a ConfigMap-style swap of their directory)\n"
          "  --workers N           event loops in threads, 1-64 (default: the online\n"
          "                        CPUs); 1 is a single loop\n"
          "  -h, --help            show this help\n"
          "  -V, --version         print the version and exit\n"
          "\n"
          "Endpoints: tcp:IP:PORT, tcp:[IPv6]:PORT, unix:PATH, fd:N (an inherited\n"
          "listening socket) or fd:NAME (systemd LISTEN_FDNAMES).\n"
          "Signals: SIGHUP reopens the log and reloads the settings; SIGUSR1 reopens the\n"
          "log; SIGTERM/SIGINT drain and exit; SIGUSR2, SIGPIPE and SIGALRM are ignored.\n"
          "With NOTIFY_SOCKET set, speaks the systemd notify protocol (Type=notify).\n"
          "\n"
          "exit status: 0 stopped by SIGTERM/SIGINT after the drain, 1 cannot listen or\n"
          "start, 2 bad arguments, settings or ask handler\n",
          f);
}

static int parse_endpoint_opt(struct endpoint *ep, int *on, const char *opt, const char *val)
{
    const char *why = NULL;

    if (strcmp(val, "off") == 0) {
        *on = 0;
        return 0;
    }
    if (endpoint_parse(val, 1, ep, &why) < 0) {
        fprintf(stderr, "sluice: proxy: %s '%s': %s\n", opt, val, why);
        return -1;
    }
    *on = 1;
    return 0;
}

/* A health path: '/' then visible ASCII, no '?' or '#'. NULL or why. */
static const char *health_path_error(const char *p)
{
    size_t n = strlen(p);

    if (p[0] != '/')
        return "must start with '/'";
    if (n > HEALTH_PATH_MAX)
        return "too long";
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)p[i];
        if (ch <= 0x20 || ch >= 0x7f || ch == '?' || ch == '#')
            return "only visible ASCII without '?' and '#'";
    }
    return NULL;
}

enum {
    OPT_SETTINGS = 256,
    OPT_HTTP,
    OPT_SOCKS,
    OPT_ASK,
    OPT_ADMIN,
    OPT_HEALTH,
    OPT_LOG,
    OPT_FMT,
    OPT_WORKERS,
    OPT_WATCH,
};

static const struct option proxy_options[] = {
    {"settings", required_argument, NULL, OPT_SETTINGS},
    {"http", required_argument, NULL, OPT_HTTP},
    {"socks", required_argument, NULL, OPT_SOCKS},
    {"ask", required_argument, NULL, OPT_ASK},
    {"admin", required_argument, NULL, OPT_ADMIN},
    {"health-path", required_argument, NULL, OPT_HEALTH},
    {"log", required_argument, NULL, OPT_LOG},
    {"log-format", required_argument, NULL, OPT_FMT},
    {"watch", no_argument, NULL, OPT_WATCH},
    {"workers", required_argument, NULL, OPT_WORKERS},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

/* One option into o: 0, or the exit status (2 for a bad value). */
static int proxy_option(struct proxy_opts *o, int c, const char *v)
{
    const char *why;

    switch (c) {
    case OPT_SETTINGS:
        o->settings_path = v;
        return 0;
    case OPT_HTTP:
        return parse_endpoint_opt(&o->http, &o->http_on, "--http", v) < 0 ? 2 : 0;
    case OPT_SOCKS:
        return parse_endpoint_opt(&o->socks, &o->socks_on, "--socks", v) < 0 ? 2 : 0;
    case OPT_ADMIN:
        return parse_endpoint_opt(&o->admin, &o->admin_on, "--admin", v) < 0 ? 2 : 0;
    case OPT_ASK:
        o->ask_spec = v;
        return 0;
    case OPT_HEALTH:
        why = health_path_error(v);
        if (why != NULL) {
            fprintf(stderr, "sluice: proxy: --health-path '%s': %s\n", v, why);
            return 2;
        }
        o->health_path = v;
        return 0;
    case OPT_LOG:
        o->log_path = v;
        return 0;
    case OPT_WATCH:
        o->watch = 1;
        return 0;
    case OPT_WORKERS: {
        char *end;
        unsigned long n = strtoul(v, &end, 10);
        if (v[0] < '1' || v[0] > '9' || *end != '\0' || n > 64) {
            fprintf(stderr, "sluice: proxy: --workers '%s': a number from 1 to 64\n", v);
            return 2;
        }
        o->workers = (unsigned)n;
        return 0;
    }
    case OPT_FMT:
        if (strcmp(v, "json") == 0 || strcmp(v, "text") == 0) {
            o->json = strcmp(v, "json") == 0;
            return 0;
        }
        fprintf(stderr, "sluice: proxy: --log-format must be 'text' or 'json', got '%s'\n", v);
        return 2;
    }
    return 2;
}

int cli_proxy(int argc, char **argv)
{
    struct proxy_opts o;
    int c, rc;

    proxy_opts_init(&o);
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":s:hV", proxy_options, NULL)) != -1) {
        if (c == 's') /* -s FILE, as in run */
            c = OPT_SETTINGS;
        if (c == 'h') {
            cli_proxy_usage(stdout);
            return 0;
        }
        if (c == 'V')
            return cli_version();
        if (c == '?' || c == ':') {
            cli_bad_option("proxy", c, argv, cli_proxy_usage);
            return 2;
        }
        rc = proxy_option(&o, c, optarg);
        if (rc != 0)
            return rc;
    }
    if (optind < argc) {
        fprintf(stderr, "sluice: proxy: unexpected argument '%s'\n", argv[optind]);
        cli_proxy_usage(stderr);
        return 2;
    }
    return proxy_server_run(&o);
}
