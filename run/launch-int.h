/* run/launch-int.h - state of one `sluice run`, shared by
 * run/launch.c, run/rundir.c and run/summary.c. */
#ifndef SLUICE_SANDBOX_LAUNCH_INT_H
#define SLUICE_SANDBOX_LAUNCH_INT_H

#include "bridge/bridge.h"
#include "bridge/forward.h"
#include "bridge/limit.h"
#include "policy/policy.h"
#include "proxy/server.h"
#include "proxy/service.h"
#include "run/reaper.h"
#include "run/run.h"
#include "sandbox/sandbox.h"

#include <sys/stat.h>

#define RUN_MAX_BLOCKED 64 /* distinct entries kept for the summary */
#define RUN_PATH_MAX 4096
#define RUN_INNER_FD 3 /* inner's end of the socketpair, in bwrap and inner */
#define RUN_BWRAP_INFO_FD 7 /* bwrap's --info-fd, the reaper's pipe (above SB_STDIO_RO_PASS + 2) */
#define RUN_PHASES_MAX 20 /* -d: start-up phases kept (run_phase) */

struct blocked {
    char *what;   /* "host:port" */
    char *reason; /* one line, may be "" */
    unsigned count;
};

struct run;
struct run_ports;
struct seccomp_notif;
struct run_notify;
struct run_tls;
struct run_creds;

struct run {
    const struct sb_launch_opts *o;
    struct settings *settings;
    uv_loop_t loop;
    struct proxy_log log; /* --log FILE */
    int log_on;
    /* the proxy service on the sandbox's listeners (proxy/service.h): front
     * ends, limit (every listener: maxConnections + PROXY_OVERLOAD_SLACK),
     * resolver, ask broker, egress */
    struct proxy_service core;
    struct proxy_control *control; /* --control-fd, or NULL */
    /* httpProxyPort / socksProxyPort: accepted connections relayed there */
    struct forwarder *fwd_http, *fwd_socks;
    uint64_t next_id;
    /* bwrap (run/spawn.c): its pid once it runs, the pidfd its exit is
     * watched on (-1: SIGCHLD instead) */
    int bwrap_pid;
    int bwrap_pidfd;
    union {
        uv_poll_t poll;
        uv_signal_t sig;
    } bwrap_watch;
    int bwrap_watching;
    unsigned stdio_ro;  /* fds 0-2 handed to bwrap re-bound (bwrap.c) */
    unsigned stdio_dir; /* those of them that are directories */
    long long stdio_off[3];
    int stdio_back[3];  /* inner's descriptors of those that are regular files
                           (sb_handoff_recv_stdio), -1 when none */
    int proc_started, proc_exited;
    int64_t exit_status;
    int term_signal;
    int cmd_pidfd;
    int interrupted; /* last forwarded signal */
    uv_signal_t sigs[4];
    size_t nsigs;
    char **cmd;
    char *shell_argv[4];
    char *cmdline; /* the command as one string, for excludedCommands */
    struct blocked blocked[RUN_MAX_BLOCKED];
    size_t nblocked;
    unsigned blocked_total;
    unsigned blocked_dropped; /* beyond RUN_MAX_BLOCKED distinct entries */
    /* set-up */
    char self[RUN_PATH_MAX], cwd[RUN_PATH_MAX], bwrap_buf[RUN_PATH_MAX];
    char inner_buf[RUN_PATH_MAX], inner_spot[RUN_PATH_MAX];
    const char *inner; /* sluice-inner, or NULL (run_find_inner) */
    char rundir[RUN_PATH_MAX], hosttmp[RUN_PATH_MAX + 100], err[1200];
    char runmask[RUN_PATH_MAX];  /* issue 14: the run directories' parent (reaper.c) */
    struct sb_reaper reaper;     /* issue 14 */
    struct sb_holds holds;       /* rt-16: shared locks on what the sandbox stands on */
    struct sb_cgroup cgroup;     /* issue 14: root's pids limit (limits.c) */
    int cgroup_rc;               /* sb_cgroup_make's: 0 made, 1 not needed, -1 failed */
    struct sb_seccomp_opts seccomp; /* the filters inner loads (bwrap.c's flags) */
    int filters_sent;               /* compiled here and sent ('F'): inner seals
                                       itself before 'G', else after it */
    const char *bwrap;
    struct stat bwrap_st;
    struct sb_strv env;
    struct sb_plan plan;
    struct sb_handoff h;
    struct sb_gitwatch gw;
    int sp[2];
    int have_rundir, loop_ok;
    int rundir_lock; /* the run-directory parent, locked while planning (issue 21) */
    /* transparent mode (run/launch_tp.c); guard: a TCP socket of the
     * host's network inherited (inherit.c), connect() served without it */
    struct tp *tp;
    int guard;
    int tp_fds[3]; /* the resolver's UDP and TCP sockets, sock_diag; -1 */
    int tp_routes; /* transparent UDP: 1 the IPv4 local route is in, | 2 IPv6 (tp_dns.c) */
    dev_t tp_ns_dev;
    ino_t tp_ns_ino;
    char tp_resolv_file[RUN_PATH_MAX + 100], tp_resolv_dest[RUN_PATH_MAX];
    /* published ports and hostPorts (run/ports.c), or NULL */
    struct run_ports *ports;
    /* the seccomp listener's server (run/launch_notify.c, notify.c) */
    struct run_notify *notify;
    int notify_said; /* -d has said how many notifications it served */
    /* write denials (run/launch_fsw.c, fswrite.c) */
    int watch_writes;
    struct blocked wblocked[RUN_MAX_BLOCKED]; /* what: the path, reason: why */
    size_t nwblocked;
    unsigned wblocked_total, wblocked_dropped;
    /* TLS termination and the sandbox's trust in its CA (tls_trust.c), or NULL */
    struct run_tls *tls;
    /* credentials (creds.c), or NULL */
    struct run_creds *creds;
    /* -d: where the time went, phase by phase (run_phase) */
    int64_t phase_at; /* common_mono_us() of the previous mark */
    size_t nphases;
    const char *phase_name[RUN_PHASES_MAX];
    int64_t phase_us[RUN_PHASES_MAX];
};

/* run/summary.c */
void run_note_decision(struct run *run, const struct connlog *r);
void run_print_summary(struct run *run);
void run_summary_free(struct run *run);
/* A write the sandbox refused (fswrite.c's report). */
void run_note_write(struct run *run, const char *path, const char *reason, const char *call);
/* "[SandboxDebug] ..." on stderr when -d / SRT_DEBUG is on. */
void run_debug(const struct run *run, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The time since the previous mark (or since o->t0_us) was spent on NAME
 * (a string literal). run_debug_phases() prints them in one -d line. */
void run_phase(struct run *run, const char *name);
void run_debug_phases(const struct run *run);

/* run/spawn.c: bwrap started (posix_spawn) with the plan's argv and the
 * environment, inner's end of the socketpair (run->sp[1]) as fd 3; its
 * exit then calls run_bwrap_exited (launch.c) from the loop. 0, or -1 with
 * a message in err, or -2 with a message when bwrap was started and watched
 * but the run must be given up (abort_early in launch.c). run_kill signals bwrap while it has not been waited
 * for (its death takes the sandbox with it: --die-with-parent). */
int run_spawn_bwrap(struct run *run, char *err, size_t errlen);
void run_kill(struct run *run, int sig);
void run_bwrap_exited(struct run *run, int status, int term_signal);

/* run/launch_tp.c: transparent mode's steps; each 0, or -1 after a
 * message (and bwrap killed once it runs). No-ops when the mode is off. */
int run_tp_settings(struct run *run);
int run_tp_prepare(struct run *run);
int run_tp_before_go(struct run *run);
int run_tp_after_go(struct run *run);
void run_tp_close(struct run *run);
void run_tp_free(struct run *run);

/* run/launch_fsw.c: the write report's steps, same conventions.
 * prepare decides whether the run watches writes (not with --quiet, and
 * the kernel must have what it needs); after_go routes the write syscalls
 * to fswrite.c on the listener's server (after run_tp_after_go). */
int run_fsw_prepare(struct run *run);
int run_fsw_after_go(struct run *run);

/* run/launch_notify.c: the seccomp listener, same conventions. start
 * receives it (transparent mode, a guarded run or the write report) and
 * starts its server (notify.c), before 'G' and run_tp_after_go; close
 * stops it, after run_tp_close. */
int run_listener_start(struct run *run);
void run_listener_close(struct run *run);

/* run/rundir.c */
const char *run_find_in_path(const char *name, char *buf, size_t len);
/* sluice-inner for the sluice binary at SELF (cli/inner_main.c): beside
 * it, or for the installed binary the one in sluice's libexec directory;
 * an executable regular file that only root or SELF's owner can change.
 * BUF, or NULL: the sandbox starts `SELF inner`. */
const char *run_find_inner(const char *self, char *buf, size_t len);
/* Where run_find_inner looks beside SELF: BUF, or NULL when it does not. */
const char *run_inner_spot(const char *self, char *buf, size_t len);
/* Can bwrap make its namespaces here? A message naming the fix, or NULL. */
const char *run_namespaces_problem(int bwrap_setuid);
/* The run directory, its removal, the reaper and the sweep: reaper.c
 * (sb_rundir_make, sb_rundir_remove, sb_reaper_*). */
/* ".git", ".vscode" or ".idea" when one of them is a component of path. */
const char *run_protected_component(const char *path);
/* The working directory exists inside the sandbox. */
int run_cwd_visible(const struct sb_plan *plan, const char *cwd);
/* sandbox.excludedCommands matches the command line. */
int run_is_excluded(const struct settings *s, const char *cmd);
/* argv joined with single spaces (malloc'ed), or NULL. */
char *run_join_args(char *const *argv);

#endif
