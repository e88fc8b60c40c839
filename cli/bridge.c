/* cli/bridge.c - `sluice bridge`: a native socat replacement between unix
 * sockets and TCP. Its options, help and exit codes; the forwarder and the
 * command's life are bridge/forward.c and bridge/forward_cmd.c.
 *
 *   sluice bridge [--max-conns N] [--idle SECONDS] [--connect-timeout SECONDS]
 *                 [--quiet] LISTEN CONNECT
 *
 * Logs (stderr): a startup line, and one connection log record (README
 * "Connection log", text or JSON) per connection when it ends.
 */
#include "cli/cli.h"

#include "bridge/forward.h"
#include "common/common.h"
#include "proxy/server.h"

#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BRIDGE_DEFAULT_MAX_CONNS 1024u
#define BRIDGE_MAX_MAX_CONNS 1000000u
#define BRIDGE_DEFAULT_CONNECT_MS 10000u

void cli_bridge_usage(FILE *f)
{
    fputs("usage: sluice bridge [--max-conns N] [--idle SECONDS] [--connect-timeout SECONDS]\n"
          "                     [--quiet] LISTEN CONNECT\n"
          "\n"
          "Relays every connection accepted on LISTEN to CONNECT, both ways, in one process\n"
          "(a native replacement for 'socat UNIX-LISTEN:path,fork TCP:host:port').\n"
          "\n"
          "endpoints:\n"
          "  tcp:IPV4:PORT, tcp:[IPV6]:PORT  an IP address (no names); port 0 to LISTEN on any\n"
          "  unix:PATH                       a unix socket; LISTEN creates it with mode 0600\n"
          "                                  in a directory owned by you or root, replaces only\n"
          "                                  a stale socket and removes it on exit\n"
          "  fd:N, fd:NAME                   LISTEN only: an inherited listening socket, or the\n"
          "                                  one systemd passed as NAME (LISTEN_FDNAMES)\n"
          "\n"
          "options:\n"
          "  --max-conns N              connections at once; more wait to be accepted\n"
          "                             (default 1024)\n"
          "  --idle SECONDS             close a connection after SECONDS without a byte\n"
          "                             either way (default 0: never)\n"
          "  --connect-timeout SECONDS  give up connecting to CONNECT after SECONDS\n"
          "                             (default 10)\n"
          "  --log-format FORMAT        text (default) or json\n"
          "  -q, --quiet                no startup line and no per-connection lines\n"
          "  -h, --help                 show this help\n"
          "  -V, --version              print the version and exit\n"
          "\n"
          "Each connection is logged to stderr when it ends, as a connection log record\n"
          "(README \"Connection log\"): client, target, bytes_up (client->upstream),\n"
          "bytes_down, duration_ms and how it ended.\n"
          "SIGINT or SIGTERM closes the listener and every connection, then exits 0.\n"
          "\n"
          "exit status: 0 stopped by a signal, 1 cannot listen, 2 bad arguments\n",
          f);
}

/* One record per connection when it ends (proxy/log.c), on stderr. */
static void log_conn(void *ctx, const struct connlog *r)
{
    proxy_log_record(ctx, r);
}

/* ------------------------------------------------------------------------ */
/* Arguments                                                                 */

/* Seconds with up to three decimals ("10", "0.5", "1.250") to ms. */
static int parse_seconds(const char *s, unsigned *ms)
{
    unsigned long whole = 0, frac = 0;
    size_t i = 0, nfrac = 0;

    if (s[0] < '0' || s[0] > '9')
        return -1;
    for (; s[i] >= '0' && s[i] <= '9'; i++) {
        whole = whole * 10 + (unsigned long)(s[i] - '0');
        if (whole > 4000000ul)
            return -1;
    }
    if (s[i] == '.') {
        for (i++; s[i] >= '0' && s[i] <= '9'; i++) {
            if (++nfrac > 3)
                return -1;
            frac = frac * 10 + (unsigned long)(s[i] - '0');
        }
        if (nfrac == 0)
            return -1;
    }
    if (s[i] != '\0')
        return -1;
    for (; nfrac < 3; nfrac++)
        frac *= 10;
    *ms = (unsigned)(whole * 1000 + frac);
    return 0;
}

static int parse_count(const char *s, unsigned max, unsigned *out)
{
    unsigned long v = 0;
    size_t i;

    if (s[0] < '1' || s[0] > '9')
        return -1;
    for (i = 0; s[i] != '\0'; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (unsigned long)(s[i] - '0');
        if (v > max)
            return -1;
    }
    *out = (unsigned)v;
    return 0;
}

/* common_escape() into one of two rotating buffers, for error messages. */
static const char *esc(const char *s)
{
    static char bufs[2][256];
    static unsigned next;

    return common_escape(s, bufs[next++ % 2], sizeof(bufs[0]));
}

__attribute__((format(printf, 1, 2))) static int usage_error(const char *fmt, ...)
{
    va_list ap;

    fputs("sluice: bridge: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\n\n", stderr);
    cli_bridge_usage(stderr);
    return 2;
}

static int same_endpoint(const struct endpoint *a, const struct endpoint *b)
{
    if (a->kind != b->kind)
        return 0;
    if (a->kind == ENDPOINT_UNIX)
        return strcmp(a->path, b->path) == 0;
    if (a->kind == ENDPOINT_TCP)
        return a->port != 0 && a->port == b->port && a->addr.family == b->addr.family &&
               memcmp(a->addr.bytes, b->addr.bytes, 16) == 0;
    return 0;
}

enum { OPT_MAX_CONNS = 256, OPT_IDLE, OPT_CONNECT_TIMEOUT, OPT_LOG_FORMAT };

static const struct option bridge_options[] = {
    {"max-conns", required_argument, NULL, OPT_MAX_CONNS},
    {"idle", required_argument, NULL, OPT_IDLE},
    {"connect-timeout", required_argument, NULL, OPT_CONNECT_TIMEOUT},
    {"log-format", required_argument, NULL, OPT_LOG_FORMAT},
    {"quiet", no_argument, NULL, 'q'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

/* One option: 0, or 1 + the exit status. */
static int bridge_option(struct forward_cmd *cmd, int c, char **argv, int *json)
{
    const char *v = optarg;
    char *arg = argv[optind - 1];

    switch (c) {
    case 'h':
        cli_bridge_usage(stdout);
        return 1;
    case 'V':
        return 1 + cli_version();
    case 'q':
        cmd->quiet = 1;
        cmd->fwd.log = NULL;
        return 0;
    case OPT_LOG_FORMAT:
        if (strcmp(v, "json") != 0 && strcmp(v, "text") != 0)
            return 1 + usage_error("--log-format must be 'text' or 'json', got '%s'", esc(v));
        *json = strcmp(v, "json") == 0;
        return 0;
    case OPT_MAX_CONNS:
        if (parse_count(v, BRIDGE_MAX_MAX_CONNS, &cmd->fwd.max_conns) < 0)
            return 1 + usage_error("invalid --max-conns '%s' (a number from 1 to 1000000)",
                                   esc(v));
        return 0;
    case OPT_IDLE:
        if (parse_seconds(v, &cmd->fwd.idle_ms) < 0)
            return 1 + usage_error("invalid --idle '%s' (seconds, e.g. 300 or 0.5; 0 = off)",
                                   esc(v));
        return 0;
    case OPT_CONNECT_TIMEOUT:
        if (parse_seconds(v, &cmd->fwd.connect_ms) < 0 || cmd->fwd.connect_ms == 0)
            return 1 + usage_error(
                           "invalid --connect-timeout '%s' (seconds > 0, e.g. 10 or 0.5)", esc(v));
        return 0;
    case ':':
        return 1 + usage_error("option '%s' needs a value", esc(arg));
    }
    if (optopt != 0 && strncmp(arg, "--", 2) != 0) {
        char s[3] = {'-', (char)optopt, '\0'};
        return 1 + usage_error("unknown option '%s'", esc(s));
    }
    arg[strcspn(arg, "=")] = '\0';
    return 1 + usage_error("unknown option '%s'", esc(arg));
}

/* Parses argv into cmd. 0, or 1 + the exit status (message printed). */
static int parse_args(struct forward_cmd *cmd, int argc, char **argv, int *json)
{
    const char *why = NULL;
    int c, rc;

    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":qhV", bridge_options, NULL)) != -1) {
        rc = bridge_option(cmd, c, argv, json);
        if (rc != 0)
            return rc;
    }
    if (argc - optind > 2)
        return 1 + usage_error("unexpected argument '%s'", esc(argv[optind + 2]));
    if (argc - optind < 2)
        return 1 + usage_error("%s", optind == argc ? "missing LISTEN and CONNECT endpoints"
                                                    : "missing CONNECT endpoint");
    if (endpoint_parse(argv[optind], 1, &cmd->listen, &why) < 0)
        return 1 + usage_error("invalid LISTEN endpoint '%s': %s", esc(argv[optind]), why);
    if (endpoint_parse(argv[optind + 1], 0, &cmd->fwd.connect, &why) < 0)
        return 1 + usage_error("invalid CONNECT endpoint '%s': %s", esc(argv[optind + 1]), why);
    if (same_endpoint(&cmd->listen, &cmd->fwd.connect))
        return 1 + usage_error("LISTEN and CONNECT are the same endpoint '%s'",
                               esc(argv[optind]));
    return 0;
}

int cli_bridge(int argc, char **argv)
{
    struct forward_cmd cmd;
    struct proxy_log log;
    int rc, json = 0;

    memset(&cmd, 0, sizeof(cmd));
    cmd.fwd.max_conns = BRIDGE_DEFAULT_MAX_CONNS;
    cmd.fwd.connect_ms = BRIDGE_DEFAULT_CONNECT_MS;
    cmd.fwd.log = log_conn;
    cmd.fwd.log_ctx = &log;
    rc = parse_args(&cmd, argc, argv, &json);
    if (rc != 0)
        return rc - 1;
    (void)proxy_log_open(&log, NULL, json); /* stderr: cannot fail */
    rc = forward_cmd_run(&cmd);
    proxy_log_close(&log);
    return rc;
}
