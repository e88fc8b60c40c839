/* run/launch_tp.c - the launcher's side of transparent mode (issue 17):
 * the hooks run/launch.c calls, kept here so that launch.c only has one
 * line per step. The mode itself is run/transparent.c and tp_dns.c.
 *
 *   run_tp_settings    before the host checks: --transparent folded into
 *                      the settings, and the settings that cannot go with
 *                      it (reported before any kernel piece is missing);
 *   run_tp_prepare     after the host checks: kernel pieces, the sandbox's
 *                      resolv.conf in the run directory (bound by bwrap.c);
 *   run_tp_before_go   inner is waiting: the sandbox's network namespace
 *                      identified, the resolver's sockets made in it;
 *   run_tp_after_go    inner sends the seccomp listener once its filter is
 *                      loaded: transparent.c starts serving it. */
#include "run/launch-int.h"
#include "run/ports.h"
#include "run/transparent.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Issue 21, item 5: stdin, stdout and stderr, when they are sockets of the
 * host's network (inherit.c). A TCP one makes the run a guarded one: its
 * connect()s (and allowed bind()s) are answered by transparent.c, without
 * the policy's dialing (no egress) when transparent mode is off. */
static int check_inherited(struct run *run)
{
    const char *why;
    int guard = 0;

    if (!run->settings->network.isolate)
        return 0; /* the command is in the host's network anyway */
    if (sb_inherit_check(run->settings->network.allow_all_unix_sockets, &guard, run->err,
                         sizeof(run->err)) < 0) {
        fprintf(stderr, "sluice: run: %s\n", run->err);
        return -1;
    }
    if (!guard || run->settings->network.transparent)
        return 0;
    why = tp_preflight();
    if (why != NULL) {
        fprintf(stderr,
                "sluice: run: a TCP socket of the host's network is among stdin, stdout and "
                "stderr, and keeping it from being aimed elsewhere needs %s, which this kernel "
                "lacks; the command was not run\n",
                why);
        return -1;
    }
    run->guard = 1;
    run_debug(run, "a TCP socket of the host's network is inherited: connect() is answered by "
                   "sluice");
    return 0;
}

int run_tp_settings(struct run *run)
{
    if (run->o->transparent)
        run->settings->network.transparent = 1;
    if (!run->settings->network.transparent)
        return 0;
    if (!run->settings->network.isolate) {
        fprintf(stderr, "sluice: run: network.transparent needs the sandbox's own network "
                        "namespace, and network.isolate is false; the command was not run\n");
        return -1;
    }
    if (run->settings->network.http_proxy_port != 0 ||
        run->settings->network.socks_proxy_port != 0) {
        fprintf(stderr, "sluice: run: network.transparent cannot be combined with "
                        "network.httpProxyPort/socksProxyPort (an external proxy); the command "
                        "was not run\n");
        return -1;
    }
    return 0;
}

int run_tp_prepare(struct run *run)
{
    const char *why;

    if (check_inherited(run) < 0)
        return -1;
    if (!run->settings->network.transparent)
        return 0;
    why = tp_preflight();
    if (why != NULL) {
        fprintf(stderr,
                "sluice: run: transparent mode needs %s, which this kernel lacks; the "
                "command was not run\n",
                why);
        return -1;
    }
    if (tp_resolv_conf(run->rundir, run->tp_resolv_file, sizeof(run->tp_resolv_file),
                       run->tp_resolv_dest, sizeof(run->tp_resolv_dest), run->err,
                       sizeof(run->err)) < 0) {
        fprintf(stderr, "sluice: run: %s; the command was not run\n", run->err);
        return -1;
    }
    run_debug(run, "transparent mode: resolv.conf bound at %s", run->tp_resolv_dest);
    return 0;
}

int run_tp_before_go(struct run *run)
{
    if (!run->settings->network.transparent && !run->guard)
        return 0;
    run->tp_routes = run->settings->network.transparent; /* transparent UDP (tp_udp.c) */
    if (tp_dns_sockets(run->h.cmd_pid, &run->tp_fds[0], &run->tp_fds[1], &run->tp_fds[2],
                       &run->tp_ns_dev, &run->tp_ns_ino, &run->tp_routes, run->err,
                       sizeof(run->err)) < 0) {
        fprintf(stderr, "sluice: run: %s; the command was not run\n", run->err);
        run_kill(run, SIGKILL);
        return -1;
    }
    if (run->settings->network.transparent)
        run_debug(run, "transparent UDP: %s",
                  run->tp_routes == 0 ? "off (the sandbox's namespace took no local route: "
                                        "datagrams fail as without it)"
                  : run->tp_routes & 2 ? "every address local in the sandbox (IPv4 and IPv6)"
                                       : "every IPv4 address local in the sandbox (no IPv6 route)");
    if (!run->settings->network.transparent) {
        /* guarded only: no resolver for the sandbox, port 53 stays free */
        for (int i = 0; i < 2; i++) {
            close(run->tp_fds[i]);
            run->tp_fds[i] = -1;
        }
    }
    return 0;
}

static void on_tp_log(void *ctx, const struct connlog *r)
{
    run_note_decision(ctx, r);
}

int run_tp_after_go(struct run *run)
{
    struct tp_opts to;

    if (!run->settings->network.transparent && !run->guard)
        return 0;
    memset(&to, 0, sizeof(to));
    to.loop = &run->loop;
    to.egress = run->settings->network.transparent ? run->core.egress : NULL; /* NULL: guard */
    to.notify = run->notify;
    to.cmd_pid = run->h.cmd_pid;
    to.ns_dev = run->tp_ns_dev;
    to.ns_ino = run->tp_ns_ino;
    to.dns_udp_fd = run->tp_fds[0];
    to.dns_tcp_fd = run->tp_fds[1];
    to.diag_fd = run->tp_fds[2];
    to.log = on_tp_log;
    to.log_ctx = run;
    to.next_id = &run->next_id;
    to.max_pending = run->settings->proxy.max_connections;
    to.allow_unix = run->settings->network.allow_all_unix_sockets;
    if (run->tp_routes != 0 && run->ports != NULL) { /* transparent UDP (tp_udp.c) */
        to.udp_nports = run_ports_udp_ports(run, to.udp_ports, TP_UDP_PORTS_MAX);
        to.udp_relay = run_ports_udp_relay;
        to.udp_relay_ctx = run->ports;
        to.udp_idle_ms = run->settings->proxy.idle_timeout_ms;
    }
    run->tp_fds[0] = run->tp_fds[1] = run->tp_fds[2] = -1; /* tp_start takes them */
    if (tp_start(&run->tp, &to, run->err, sizeof(run->err)) < 0) {
        fprintf(stderr, "sluice: run: %s; stopping the command\n", run->err);
        run_kill(run, SIGKILL);
        return -1;
    }
    run_debug(run, "%s for pid %d",
              run->guard ? "serving connect() (an inherited host socket)"
                         : "transparent mode: serving connect() and DNS",
              run->h.cmd_pid);
    return 0;
}

void run_tp_close(struct run *run)
{
    char line[400];

    if (run->tp != NULL) {
        tp_udp_summary(run->tp, line, sizeof(line));
        if (line[0] != '\0' && !run->o->quiet)
            fprintf(stderr, "sluice: %s\n", line);
    }
    tp_close(run->tp);
    run->tp = NULL;
}

void run_tp_free(struct run *run)
{
    for (int i = 0; i < 3; i++)
        if (run->tp_fds[i] >= 0)
            close(run->tp_fds[i]);
}
