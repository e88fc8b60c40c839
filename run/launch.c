/* run/launch.c - `sluice run`: the host side of the sandbox launcher
 * (design.md "The sandbox"). cli/run.c parses the options and loads the
 * settings; from there:
 *   1. the permission layers (sandbox.enabled, the bypass flag,
 *      excludedCommands) may run the command unsandboxed;
 *   2. host checks and a private run directory (0700) holding the sandbox's
 *      /tmp (run/reaper.c: also the reaper that cleans up after a SIGKILL);
 *   3. bwrap, spawned (run/spawn.c: posix_spawn) with the environment of
 *      sandbox/env.c and the argv of sandbox/bwrap.c, inheriting one end of
 *      a socketpair as fd 3; while it makes the sandbox (issue 25), this
 *      process compiles the seccomp filters and sends them to inner, and
 *      starts the proxy service;
 *   4. `sluice inner` (the first program inside) sends back the listening
 *      sockets it made in the sandbox's network namespace; the HTTP and
 *      SOCKS front ends of the proxy service (proxy/service.c) accept on them
 *      directly, in this process, so a connection from the sandbox reaches
 *      the policy with no relay hop (with network.httpProxyPort /
 *      socksProxyPort set, accepted connections are relayed to that
 *      external proxy instead); meanwhile inner seals itself
 *      (no_new_privs, Landlock, the filters) and hands over its seccomp
 *      listener when one is needed;
 *   5. 'G' tells inner to exec the command. Nothing of sluice keeps running
 *      inside. In transparent mode (run/launch_tp.c) the resolver's sockets
 *      are made before 'G' and the listener is served from it on;
 *   6. SIGINT/SIGTERM/SIGHUP/SIGQUIT are forwarded to the command (a pidfd
 *      from inner's SCM_CREDENTIALS), and the exit status is the command's:
 *      128+N when killed by signal N, never 0 for an interrupted run;
 *   7. afterwards: the summary of blocked connections (run/summary.c),
 *      the mount points bwrap created for protected files removed unless
 *      another live run still holds them (run/reaper.c), the run
 *      directory removed.
 * One loop; nothing here is shared between threads.
 */
#define _GNU_SOURCE
#include "run/launch-int.h"
#include "run/creds.h"
#include "run/tls_trust.h"
#include "run/fswrite.h"
#include "run/ports.h"

#include "common/common.h"
#include "proxy/proxy.h"
#include "socks/socks.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

/* inner's listeners; network.publish and hostPorts refuse them (settings/ports.c) */
#define RUN_HTTP_PORT SETTINGS_SANDBOX_HTTP_PORT
#define RUN_SOCKS_PORT SETTINGS_SANDBOX_SOCKS_PORT
#define RUN_HANDOFF_MS 30000u

extern char **environ;

/* ------------------------------------------------------------------------ */
/* External proxy: relay accepted connections to 127.0.0.1:PORT               */

static void on_connlog(void *ctx, const struct connlog *r)
{
    run_note_decision(ctx, r);
}

/* The relayed connections count against the service's limit too. */
static size_t forwarded_live(void *ctx)
{
    const struct run *run = ctx;
    size_t n = 0;

    if (run->fwd_http != NULL)
        n += forwarder_live(run->fwd_http);
    if (run->fwd_socks != NULL)
        n += forwarder_live(run->fwd_socks);
    return n + run_ports_live(run);
}

/* With an external proxy for kind, its connections are relayed there. */
/* The front ends' phase transitions, with -d / SRT_DEBUG. */
static void on_debug(void *ctx, const char *line)
{
    run_debug(ctx, "%s", line);
}

static int divert(void *ctx, enum proxy_fe_kind kind, struct listener *l)
{
    struct run *run = ctx;
    struct forwarder *fwd = kind == PROXY_FE_HTTP ? run->fwd_http : run->fwd_socks;

    if (fwd == NULL)
        return 0;
    forwarder_accept(fwd, l); /* applies the same limit */
    return 1;
}

/* One forwarder per external proxy port: 127.0.0.1:PORT on the host. */
static int start_forwarder(struct run *run, struct forwarder **out, unsigned port)
{
    struct forward_opts o;

    if (port == 0)
        return 0;
    memset(&o, 0, sizeof(o));
    o.connect.kind = ENDPOINT_TCP;
    o.connect.addr.family = 4;
    o.connect.addr.bytes[0] = 127;
    o.connect.addr.bytes[3] = 1;
    o.connect.port = (uint16_t)port;
    o.limit = &run->core.limit;
    o.idle_ms = run->settings->proxy.idle_timeout_ms;
    o.connect_ms = run->settings->proxy.dial_timeout_ms;
    o.log = run->log_on ? on_connlog : NULL;
    o.log_ctx = run;
    o.next_id = &run->next_id;
    return forwarder_new(out, &run->loop, &o);
}

/* ------------------------------------------------------------------------ */
/* The process                                                               */

static int run_pidfd_open(int pid)
{
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, pid, 0);
#else
    (void)pid;
    errno = ENOSYS;
    return -1;
#endif
}

static int run_pidfd_signal(int pidfd, int sig)
{
#ifdef SYS_pidfd_send_signal
    return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
#else
    (void)pidfd;
    (void)sig;
    errno = ENOSYS;
    return -1;
#endif
}

static void on_handle_closed(uv_handle_t *h)
{
    (void)h;
}

static void close_all(struct run *run)
{
    proxy_service_close_listeners(&run->core);
    proxy_service_close_conns(&run->core);
    if (run->fwd_http != NULL)
        forwarder_close(run->fwd_http, NULL, NULL);
    if (run->fwd_socks != NULL)
        forwarder_close(run->fwd_socks, NULL, NULL);
    run->fwd_http = run->fwd_socks = NULL;
    run_ports_close(run);
    for (size_t i = 0; i < run->nsigs; i++)
        uv_close((uv_handle_t *)&run->sigs[i], on_handle_closed);
    run->nsigs = 0;
    run_tp_close(run);
    run_listener_close(run);
    proxy_service_close(&run->core, NULL, NULL);
    proxy_control_close(run->control);
    run->control = NULL;
    run_creds_close(run);
}

void run_bwrap_exited(struct run *run, int status, int term_signal)
{
    run->proc_exited = 1;
    run_phase(run, "command");
    run->exit_status = status;
    run->term_signal = term_signal;
    close_all(run);
}

static void on_signal(uv_signal_t *h, int signum)
{
    struct run *run = h->data;

    run->interrupted = signum;
    if (run->cmd_pidfd >= 0 && run_pidfd_signal(run->cmd_pidfd, signum) == 0)
        return;
    /* no pidfd (or the command is gone): signal bwrap, whose death takes
     * the sandbox with it (--die-with-parent) */
    run_kill(run, signum);
}

static int start_signals(struct run *run)
{
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
        uv_signal_init(&run->loop, &run->sigs[i]);
        run->sigs[i].data = run;
        run->nsigs = i + 1;
        if (uv_signal_start(&run->sigs[i], on_signal, sigs[i]) < 0)
            return -1;
    }
    return 0;
}

/* --control-fd (proxy/control.c): each valid line's policy replaces the
 * network policy for new connections; filesystem rules stay. */
static void on_control_policy(void *arg, struct policy *p)
{
    struct run *run = arg;

    proxy_set_local(p, NULL, NULL, 0);
    egress_env_set_policy(run->core.egress, p);
}

static int start_services(struct run *run, char *err, size_t errlen)
{
    const struct proxy_service_ask ask = {.spec = run->o->ask_spec};
    struct proxy_service_conf *conf;
    struct settings_error serr;
    struct policy *p = NULL;

    if (policy_compile(run->settings, &p, &serr) < 0) {
        snprintf(err, errlen, "%s", serr.msg);
        return -1;
    }
    proxy_set_local(p, NULL, NULL, 0);
    /* the sandbox is the only client: no proxy credentials */
    conf = proxy_service_conf_new(run->settings, p, 0);
    policy_free(p); /* conf has a reference */
    if (conf == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (proxy_service_start(&run->core, run->settings, conf, &ask, err, errlen) < 0 ||
        run_tls_start(run, err, errlen) < 0)
        return -1;
    run->core.creds = run_creds_table(run);
    if (run_creds_start(run) < 0) {
        snprintf(err, errlen, "credentials: out of memory");
        return -1;
    }
    if (run->o->control_fd >= 0) {
        int rc = proxy_control_open(&run->control, &run->loop, run->o->control_fd, NULL,
                                    on_control_policy, run, stderr);
        if (rc == 0)
            proxy_control_fix_credentials(run->control, run->settings);
        if (rc < 0) {
            snprintf(err, errlen, "--control-fd %d: cannot read it: %s", run->o->control_fd,
                     uv_strerror(rc));
            return -1;
        }
    }
    if (start_forwarder(run, &run->fwd_http, run->settings->network.http_proxy_port) < 0 ||
        start_forwarder(run, &run->fwd_socks, run->settings->network.socks_proxy_port) < 0) {
        snprintf(err, errlen, "cannot start the relay to the external proxy: out of memory");
        return -1;
    }
    return 0;
}

static int open_listeners(struct run *run, struct sb_handoff *h, char *err, size_t errlen)
{
    size_t nhttp = 0, nsocks = 0;

    for (size_t i = 0; i < h->n; i++) {
        struct endpoint ep;
        const char *why = NULL;
        int rc;

        memset(&ep, 0, sizeof(ep));
        ep.kind = ENDPOINT_FD;
        ep.fd = h->fds[i];
        rc = proxy_service_listen(&run->core,
                                  h->kind[i] == SB_L_HTTP ? PROXY_FE_HTTP : PROXY_FE_SOCKS, &ep,
                                  NULL, &why);
        if (rc < 0) {
            /* the listener did not take the fd: close it and the rest */
            for (size_t j = i; j < h->n; j++)
                close(h->fds[j]);
            snprintf(err, errlen, "cannot serve the sandbox's proxy socket: %s",
                     why != NULL ? why : uv_strerror(rc));
            return -1;
        }
        h->fds[i] = -1;
        if (h->kind[i] == SB_L_HTTP)
            nhttp++;
        else
            nsocks++;
    }
    if (nhttp == 0 || nsocks == 0) {
        snprintf(err, errlen, "the sandbox did not hand over both proxy sockets");
        return -1;
    }
    return 0;
}

static void walk_close(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, on_handle_closed);
}

static int exit_code(const struct run *run)
{
    int code;

    if (run->term_signal != 0)
        code = 128 + run->term_signal;
    else
        code = (int)run->exit_status;
    if (code == 0 && run->interrupted != 0)
        code = 128 + run->interrupted;
    return code;
}

/* The sandbox is off for this command: exec it as it is. Never returns
 * unless exec fails. */
static int exec_unsandboxed(char *const *cmd, const char *why)
{
    fprintf(stderr, "sluice: running without the sandbox: %s\n", why);
    execvp(cmd[0], cmd);
    fprintf(stderr, "sluice: run: %s: %s\n", cmd[0], strerror(errno));
    return errno == ENOENT ? 127 : 126;
}

static int bwrap_setuid(const struct run *run)
{
    return (run->bwrap_st.st_mode & S_ISUID) != 0 && run->bwrap_st.st_uid == 0;
}


/* ------------------------------------------------------------------------ */
/* The steps of a run                                                        */

/* The command as argv (-c STRING: $SHELL -c STRING) and as one line. */
static int prepare_cmd(struct run *run)
{
    if (run->o->cstr != NULL) {
        const char *sh = getenv("SHELL");
        if (sh != NULL && sh[0] != '\0' && (sh[0] != '/' || access(sh, X_OK) != 0)) {
            /* said, not silently swapped: the string may need that shell */
            char esc[256];
            fprintf(stderr,
                    "sluice: run: warning: SHELL '%s' is not an executable absolute path; "
                    "running -c with /bin/sh\n",
                    common_escape(sh, esc, sizeof(esc)));
            sh = NULL;
        }
        if (sh == NULL || sh[0] == '\0')
            sh = "/bin/sh";
        run->shell_argv[0] = (char *)sh;
        run->shell_argv[1] = (char *)"-c";
        run->shell_argv[2] = (char *)run->o->cstr;
        run->cmd = run->shell_argv;
        run->cmdline = strdup(run->o->cstr);
    } else {
        run->cmd = run->o->cmd;
        run->cmdline = run_join_args(run->cmd);
    }
    if (run->cmdline == NULL) {
        fprintf(stderr, "sluice: run: out of memory\n");
        return -1;
    }
    return 0;
}

/* The permission layers: -1 to go on sandboxed, else the exit status of
 * the unsandboxed exec that failed. */
static int permission_layers(struct run *run)
{
    const struct settings *s = run->settings;

    if (s->sandbox.enabled == SETTINGS_FALSE)
        return exec_unsandboxed(run->cmd, "sandbox.enabled is false in the settings");
    if (run->o->bypass) {
        if (s->sandbox.allow_unsandboxed_commands == SETTINGS_FALSE)
            fprintf(stderr, "sluice: run: --dangerously-disable-sandbox refused: "
                            "sandbox.allowUnsandboxedCommands is false; running sandboxed\n");
        else
            return exec_unsandboxed(run->cmd, "--dangerously-disable-sandbox");
    }
    if (run_is_excluded(s, run->cmdline)) {
        if (run->o->learn != NULL) { /* nothing would pass the policy to learn from */
            fprintf(stderr, "sluice: run: --learn: the command matches sandbox.excludedCommands "
                            "and would run unsandboxed, with no policy to learn from; not run\n");
            return SB_LAUNCH_FAIL;
        }
        return exec_unsandboxed(run->cmd, "the command matches sandbox.excludedCommands");
    }
    return -1;
}

/* What the sandbox needs from this host: our binary, the working directory,
 * bwrap, user namespaces, the run directory. 0 or -1 after a message. */
static int host_checks(struct run *run)
{
    const char *bw = run->settings->bwrap_path != NULL ? run->settings->bwrap_path : "bwrap";
    const char *why;
    ssize_t n;

#if !defined(__x86_64__) && !defined(__aarch64__)
    fprintf(stderr, "sluice: run: unsupported architecture: the seccomp filter is built for "
                    "x86-64 and aarch64 only; the command was not run\n");
    return -1;
#endif
    n = readlink("/proc/self/exe", run->self, sizeof(run->self) - 1);
    if (n <= 0 || (size_t)n >= sizeof(run->self) - 1) {
        fprintf(stderr, "sluice: run: cannot find my own binary (/proc/self/exe): %s\n",
                strerror(errno));
        return -1;
    }
    run->self[n] = '\0';
    run->inner = run_find_inner(run->self, run->inner_buf, sizeof(run->inner_buf));
    if (getcwd(run->cwd, sizeof(run->cwd)) == NULL) {
        fprintf(stderr, "sluice: run: cannot read the working directory: %s\n", strerror(errno));
        return -1;
    }
    run->bwrap = run_find_in_path(bw, run->bwrap_buf, sizeof(run->bwrap_buf));
    if (run->bwrap == NULL) {
        fprintf(stderr, "sluice: run: bubblewrap not found (%s): install it (Debian: apt-get "
                        "install bubblewrap) or set bwrapPath; the command was not run\n",
                run->settings->bwrap_path != NULL ? run->settings->bwrap_path : "bwrap in PATH");
        return -1;
    }
    if (stat(run->bwrap, &run->bwrap_st) < 0) {
        fprintf(stderr, "sluice: run: %s: %s\n", run->bwrap, strerror(errno));
        return -1;
    }
    why = run_namespaces_problem(bwrap_setuid(run));
    if (why != NULL) {
        fprintf(stderr, "sluice: run: %s; the command was not run\n", why);
        return -1;
    }
    run_phase(run, "host");
    if (sb_rundir_make(run->rundir, sizeof(run->rundir), run->hosttmp, sizeof(run->hosttmp),
                       run->runmask, sizeof(run->runmask), &run->reaper, run->err,
                       sizeof(run->err)) < 0) {
        fprintf(stderr, "sluice: run: %s; the command was not run\n", run->err);
        return -1;
    }
    run->have_rundir = 1;
    run_phase(run, "rundir");
    run_debug(run, "bwrap %s, run directory %s", run->bwrap, run->rundir);
    return 0;
}

/* Bit N set when descriptor N (0-2) is one bwrap re-binds read-only
 * (bwrap.c), with its offset in off[N]: a regular file or a directory
 * opened read-only, in every mode (rt-3 #5): through the host's writable
 * mount the command could chmod, chown, utimes or setxattr it (Landlock has
 * no right for these), unlink, rename and make entries in a directory, and
 * without Landlock's file rules (allowNestedUserNamespaces, or a kernel
 * without Landlock) reopen the file for writing. A file no longer linked
 * anywhere (deleted, a memfd: bwrap cannot bind it) is left as it is where
 * Landlock's file rules stop reopening it for writing: its metadata is no
 * host file's; without them the run fails rather than hand it over
 * writable. Directories also get their bit in *dirs. */
static unsigned stdio_read_only(const struct settings *s, long long off[3], unsigned *dirs)
{
    unsigned m = 0;
    int landlock_files = !s->allow_nested_user_namespaces && sb_landlock_abi() > 0;

    *dirs = 0;
    for (int fd = 0; fd <= 2; fd++) {
        struct stat st;
        int fl = fcntl(fd, F_GETFL);
        off_t o;
        if (fl < 0 || (fl & O_ACCMODE) != O_RDONLY || fstat(fd, &st) < 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            off[fd] = 0;
            m |= 1U << fd;
            *dirs |= 1U << fd;
            continue;
        }
        if (!S_ISREG(st.st_mode) || (st.st_nlink == 0 && landlock_files))
            continue;
        o = lseek(fd, 0, SEEK_CUR);
        off[fd] = o > 0 ? (long long)o : 0;
        m |= 1U << fd;
    }
    return m;
}

/* The command read the re-bound copy of a regular file on 0-2 through a
 * description of its own, which inner handed back (stdio_back): the
 * caller's offset goes to where the command left it, so that the next
 * reader of the caller's descriptor goes on from there, as it would
 * without the re-bind. */
static void stdio_restore_offsets(struct run *run)
{
    for (int fd = 0; fd <= 2; fd++) {
        off_t o;
        if (run->stdio_back[fd] < 0)
            continue;
        o = lseek(run->stdio_back[fd], 0, SEEK_CUR);
        /* only where the command moved it: 0-2 may be one description
         * (`2<&0`), re-bound as three, and the copy the command did not
         * read must not put the caller's offset back (rt-6) */
        if (o >= 0 && (long long)o != run->stdio_off[fd] && lseek(fd, o, SEEK_SET) < 0)
            run_debug(run, "restoring the offset of fd %d: %s", fd, strerror(errno));
        close(run->stdio_back[fd]);
        run->stdio_back[fd] = -1;
    }
}

/* The environment and bwrap's arguments. 0 or -1 after a message. */
static int build_plan(struct run *run)
{
    run->stdio_ro = stdio_read_only(run->settings, run->stdio_off, &run->stdio_dir);
    struct sb_env_opts eo = {
        .s = run->settings,
        .host_env = environ,
        .http_port = RUN_HTTP_PORT,
        .socks_port = RUN_SOCKS_PORT,
        .tmpdir = "/tmp",
        .self_exe = run->self,
    };
    struct sb_bwrap_opts bo = {
        .s = run->settings,
        .bwrap = run->bwrap,
        .bwrap_setuid = bwrap_setuid(run),
        .stdin_tty = isatty(0),
        .host_root = geteuid() == 0,
        .stdio_ro = run->stdio_ro,
        .stdio_dir = run->stdio_dir,
        .restrict_network = 1,
        .cwd = run->cwd,
        .home = getenv("HOME"),
        .host_tmpdir = run->hosttmp,
        .self_exe = run->self,
        .inner_exe = run->inner,
        .inner_spot = run_inner_spot(run->self, run->inner_spot, sizeof(run->inner_spot)),
        .inner_fd = RUN_INNER_FD,
        .info_fd = run->reaper.info_fd >= 0 ? RUN_BWRAP_INFO_FD : -1,
        .allow_unix_sockets = run->settings->network.allow_all_unix_sockets,
        .mask_dir = run->runmask,
        .transparent = run->settings->network.transparent,
        .watch_writes = run->watch_writes,
        .guard_connect = run->guard,
        .debug = run->o->debug,
        .resolv_conf = run->tp_resolv_file,
        .resolv_conf_dest = run->tp_resolv_dest,
        .cmd = run->cmd,
        .late_ro = run_creds_late_ro(run),
    };

    memcpy(bo.stdio_off, run->stdio_off, sizeof(bo.stdio_off));
    sb_bwrap_seccomp_opts(&bo, &run->seccomp);
    fsw_file_rules(!run->settings->allow_nested_user_namespaces);
    /* issue 21: from the protected-file scan until the record names the
     * mount points this run stands on, no other run may remove one */
    run->rundir_lock = sb_rundir_lock(run->rundir, run->err, sizeof(run->err));
    if (run->rundir_lock < 0) {
        fprintf(stderr, "sluice: run: %s; the command was not run\n", run->err);
        return -1;
    }
    if (sb_env_build(&eo, &run->env, run->err, sizeof(run->err)) < 0 ||
        run_tls_env(run, &run->env, run->err, sizeof(run->err)) < 0 ||
        run_creds_env(run, &run->env, run->err, sizeof(run->err)) < 0 ||
        sb_bwrap_build(&bo, &run->plan, run->err, sizeof(run->err)) < 0) {
        fprintf(stderr, "sluice: run: %s; the command was not run\n", run->err);
        return -1;
    }
    for (size_t i = 0; run->o->debug && i < run->plan.argv.n; i++)
        run_debug(run, "bwrap argv[%zu] %s", i, run->plan.argv.v[i]);
    return 0;
}

/* The working directory must be visible inside and not in a protected
 * directory; protected links are watched; the log opened. */
static int check_cwd_and_log(struct run *run)
{
    const char *bad = run_protected_component(run->cwd);

    if (bad != NULL) {
        fprintf(stderr,
                "sluice: run: the working directory '%s' is inside a protected '%s' "
                "directory, which the sandbox must keep read-only: run from the project "
                "directory instead; the command was not run\n",
                run->cwd, bad);
        return -1;
    }
    if (!run_cwd_visible(&run->plan, run->cwd)) {
        fprintf(stderr,
                "sluice: run: the working directory '%s' is under /tmp, which is private to the "
                "sandbox, and filesystem.allowWrite does not include it: add it (or \".\") to "
                "filesystem.allowWrite, or run from elsewhere; the command was not run\n",
                run->cwd);
        return -1;
    }
    /* what the plan's scans found (issue 25: one walk); with the
     * filesystem rules off there was none, and the working directory is
     * walked as before */
    if ((run->settings->filesystem.disabled
             ? sb_gitwatch_begin(run->cwd, run->settings->mandatory_deny_search_depth, &run->gw,
                                 run->err, sizeof(run->err))
             : sb_gitwatch_list(&run->plan.watch, &run->gw, run->err, sizeof(run->err))) < 0) {
        fprintf(stderr, "sluice: run: %s; the command was not run\n", run->err);
        return -1;
    }
    /* rt-16: what this sandbox stands on stays while it runs, whatever
     * parent another run's directory has */
    (void)sb_rundir_hold(&run->plan, &run->holds);
    /* issue 14: the mount points bwrap will make, for the reaper and the
     * sweep (before bwrap starts) */
    if (sb_reaper_record(run->rundir, &run->plan, run->err, sizeof(run->err)) < 0) {
        fprintf(stderr, "sluice: run: %s; the command was not run\n", run->err);
        return -1;
    }
    sb_rundir_unlock(run->rundir_lock);
    run->rundir_lock = -1;
    if (run->o->log_path != NULL) {
        if (proxy_log_open(&run->log, run->o->log_path, run->o->log_json) < 0) {
            fprintf(stderr, "sluice: run: cannot open log file '%s': %s\n", run->o->log_path,
                    strerror(errno));
            return -1;
        }
        run->log_on = 1;
    }
    return 0;
}

static int limit_processes_make(struct run *run);

/* A failure between bwrap's start and inner's listeners. bwrap's child
 * waits for its parent to write its uid map and only then asks to die
 * with it (PR_SET_PDEATHSIG): bwrap killed before that leaves the child
 * waiting forever, holding the command's stdin, stdout and stderr. So the
 * sandbox is let come up (or bwrap end) first; inner, which never gets
 * the go byte, goes with it. */
static void abort_early(struct run *run)
{
    struct sb_handoff h;
    char err[256];

    memset(&h, 0, sizeof(h));
    if (sb_handoff_recv(run->sp[0], RUN_HANDOFF_MS, &h, err, sizeof(err)) == 0) {
        int pidfd = h.cmd_pid > 0 ? run_pidfd_open(h.cmd_pid) : -1;
        for (size_t i = 0; i < h.n; i++)
            close(h.fds[i]);
        /* inner first: bwrap then ends as after any command */
        if (pidfd >= 0 && run_pidfd_signal(pidfd, SIGKILL) == 0) {
            close(pidfd);
            return;
        }
        if (pidfd >= 0)
            close(pidfd);
    }
    run_kill(run, SIGKILL);
}

/* The loop, the socketpair to inner and bwrap; then, while bwrap makes
 * the sandbox, the proxy service (inner waits for the go byte, which comes
 * only once the service serves its listeners). */
static int spawn_sandbox(struct run *run)
{
    const struct proxy_service_hooks hooks = {
        .ctx = run,
        .log = on_connlog,
        .extra_live = forwarded_live,
        .divert = divert,
        .debug = run->o->debug ? on_debug : NULL,
    };
    int one = 1, rc;

    if (uv_loop_init(&run->loop) != 0) {
        fprintf(stderr, "sluice: run: cannot create the event loop\n");
        return -1;
    }
    run->loop_ok = 1;
    /* close_all() walks the front ends' connection lists: valid (empty)
     * from here on, even when start_services() fails before starting them */
    proxy_service_init(&run->core, &run->loop, &run->next_id, NULL, &hooks);
    signal(SIGPIPE, SIG_IGN);
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, run->sp) < 0 ||
        setsockopt(run->sp[0], SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) < 0) {
        fprintf(stderr, "sluice: run: socketpair: %s\n", strerror(errno));
        return -1;
    }
    if (limit_processes_make(run) < 0)
        return -1;
    rc = run_spawn_bwrap(run, run->err, sizeof(run->err));
    if (rc < 0) {
        fprintf(stderr, "sluice: run: %s; the command was not run\n", run->err);
        if (rc == -2)
            abort_early(run);
        return -1;
    }
    run_phase(run, "spawn");
    close(run->sp[1]);
    run->sp[1] = -1;
    rc = sb_handoff_send_filters(run->sp[0], &run->seccomp, run->err, sizeof(run->err));
    run->filters_sent = rc == 0;
    if (rc == 1)
        run_debug(run, "inner builds the seccomp filters itself: %s", run->err);
    /* a bwrap that is gone already (EPIPE) is the handoff's to report */
    if (rc < 0 && rc != -EPIPE && rc != -ECONNRESET) {
        fprintf(stderr, "sluice: run: %s; the command was not run\n", run->err);
        abort_early(run);
        return -1;
    }
    run_phase(run, "filters");
    if (start_services(run, run->err, sizeof(run->err)) < 0) {
        fprintf(stderr, "sluice: run: %s; the command was not run\n", run->err);
        abort_early(run);
        return -1;
    }
    run_phase(run, "services");
    return 0;
}

/* issue 14: root is exempt from RLIMIT_NPROC: the command runs in a pids
 * cgroup (limits.c). Where none can be used the default limit is best
 * effort, and a limit set in the settings is refused (it would be
 * ignored). The cgroup is made before bwrap starts and bwrap is born in it
 * where the kernel lets a thread move itself (run_spawn_bwrap; issue 25:
 * moving a pid in costs an RCU grace period), else inner is moved in once
 * its pid is known; either way pids.max is set for the command before the
 * go byte. Each 0, or -1 after a message. */
static int limit_refused(struct run *run)
{
    fprintf(stderr,
            "sluice: run: sandbox.limits.processes cannot be enforced: root is exempt from "
            "RLIMIT_NPROC and no pids cgroup could be used%s%s%s; the command was not run\n",
            run->err[0] != '\0' ? " (" : "", run->err, run->err[0] != '\0' ? ")" : "");
    return -1;
}

static int enforced(const struct run *run)
{
    return getuid() == 0 && run->settings->sandbox.limits.processes != SETTINGS_DEFAULT_PROCESSES;
}

static int limit_processes_make(struct run *run)
{
    run->err[0] = '\0';
    run->cgroup_rc = sb_cgroup_make(&run->cgroup, run->settings->sandbox.limits.processes,
                                    run->err, sizeof(run->err));
    if (run->cgroup_rc != 0 && enforced(run))
        return limit_refused(run);
    return 0;
}

static int limit_processes_enter(struct run *run)
{
    if (run->cgroup_rc != 0)
        return 0;
    run->err[0] = '\0';
    if ((!run->cgroup.joined &&
         (run->h.cmd_pid <= 0 ||
          sb_cgroup_enter(&run->cgroup, run->h.cmd_pid, run->err, sizeof(run->err)) < 0)) ||
        sb_cgroup_seal(&run->cgroup, run->settings->sandbox.limits.processes, run->err,
                       sizeof(run->err)) < 0) {
        if (run->h.cmd_pid <= 0 && run->err[0] == '\0')
            snprintf(run->err, sizeof(run->err), "limits: the sandbox's pid is unknown");
        /* not removed here: bwrap may be in it (born there, or inner
         * moved in), and rmdir fails while it is (rt-18: a refused seal
         * left the cgroup behind); cleanup() removes it once bwrap is
         * gone, and a run that goes on (the default limit, best effort)
         * keeps it */
        run->cgroup_rc = -1;
        return enforced(run) ? limit_refused(run) : 0;
    }
    run_debug(run, "pids cgroup %s (%s)", run->cgroup.path,
              run->cgroup.joined ? "bwrap born in it" : "inner moved in");
    return 0;
}

/* What inner hands over as it seals itself (the stdio it re-binds, the
 * seccomp listener): before the go byte when the host sent it the filters
 * (sb_handoff_send_filters; it loads them while the host does its own
 * part), after it when inner builds them itself. */
static int before_go(struct run *run)
{
    if ((run->stdio_ro & ~run->stdio_dir) != 0 &&
        sb_handoff_recv_stdio(run->sp[0], RUN_HANDOFF_MS, run->stdio_ro & ~run->stdio_dir,
                              run->stdio_back, run->err, sizeof(run->err)) < 0) {
        fprintf(stderr, "sluice: run: the sandbox did not start (%s)\n", run->err);
        run_kill(run, SIGKILL);
        return -1;
    }
    return run_listener_start(run);
}

/* inner's listeners in, signals watched, 'G' out: the command starts. */
static int handoff(struct run *run)
{
    const char *fail = NULL;

    if (sb_handoff_recv(run->sp[0], RUN_HANDOFF_MS, &run->h, run->err, sizeof(run->err)) < 0) {
        fprintf(stderr, "sluice: run: the sandbox did not start (%s); the command was not run\n",
                run->err);
        run_kill(run, SIGKILL);
        return -1;
    }
    run_phase(run, "sandbox up");
    if (open_listeners(run, &run->h, run->err, sizeof(run->err)) < 0) {
        fprintf(stderr, "sluice: run: %s; the command was not run\n", run->err);
        run_kill(run, SIGKILL);
        return -1;
    }
    run_debug(run, "sandbox up: %zu proxy listeners, command pid %d", run->core.nls,
              (int)run->h.cmd_pid);
    if (run->h.cmd_pid > 0)
        run->cmd_pidfd = run_pidfd_open(run->h.cmd_pid);
    if (limit_processes_enter(run) < 0) {
        run_kill(run, SIGKILL);
        return -1;
    }
    /* with the host's filters inner seals itself before the go byte, else
     * (the old order) after it */
    if (run_tp_before_go(run) < 0 || run_ports_before_go(run) < 0 || (run->filters_sent && before_go(run) < 0))
        return -1;
    run_phase(run, "sealed");
    if (start_signals(run) < 0)
        fail = "sluice: run: cannot watch signals\n";
    else if (write(run->sp[0], "G", 1) != 1)
        fail = "sluice: run: the sandbox went away before the command started\n";
    if (fail != NULL) {
        fputs(fail, stderr);
        run_kill(run, SIGKILL);
        return -1;
    }
    run_phase(run, "go");
    if ((!run->filters_sent && before_go(run) < 0) || run_tp_after_go(run) < 0 ||
        run_fsw_after_go(run) < 0)
        return -1;
    close(run->sp[0]);
    run->sp[0] = -1;
    return 0;
}

static void cleanup(struct run *run)
{
    int tls;

    if (run->loop_ok) {
        if (run->proc_started && !run->proc_exited) {
            /* error path: wait for bwrap to go */
            while (!run->proc_exited && uv_run(&run->loop, UV_RUN_ONCE) != 0)
                ;
        }
        close_all(run);
        uv_walk(&run->loop, walk_close, NULL);
        uv_run(&run->loop, UV_RUN_DEFAULT);
        (void)uv_loop_close(&run->loop);
        run_phase(run, "loop closed");
    }
    if (run->bwrap_pidfd >= 0)
        close(run->bwrap_pidfd);
    stdio_restore_offsets(run);
    for (int i = 0; i < 2; i++)
        if (run->sp[i] >= 0)
            close(run->sp[i]);
    if (run->cmd_pidfd >= 0)
        close(run->cmd_pidfd);
    for (size_t i = 0; i < run->h.n; i++)
        if (run->h.fds[i] >= 0)
            close(run->h.fds[i]);
    if (run->proc_started) {
        run_print_summary(run);
        run_creds_summary(run);
        (void)sb_gitwatch_end(&run->gw, stderr);
    }
    sb_gitwatch_free(&run->gw);
    /* the mount points bwrap made go with the run directory, by its record
     * and only when no other live run holds them (issue 21) */
    sb_rundir_unlock(run->rundir_lock);
    run->rundir_lock = -1;
    sb_plan_free(&run->plan);
    run_phase(run, "summary");
    sb_rundir_release(&run->holds); /* before our own clean-up tries them */
    if (run->have_rundir)
        sb_rundir_remove(run->rundir);
    run_phase(run, "run directory removed");
    sb_cgroup_remove(&run->cgroup);
    run_phase(run, "cgroup removed");
    sb_reaper_finish(&run->reaper);
    run_phase(run, "reaper done");
    sb_strv_free(&run->env);
    run_tp_free(run);
    run_ports_free(run);
    proxy_service_free(&run->core);
    tls = run->tls != NULL;
    run_tls_free(run);
    run_creds_free(run);
    run_summary_free(run);
    if (run->log_on)
        proxy_log_close(&run->log);
    free(run->cmdline);
    if (tls)
        uv_library_shutdown(); /* the mint threads end before OpenSSL's atexit (tls.h) */
    run_phase(run, "freed");
    run_debug_phases(run);
}

int sb_launch(const struct sb_launch_opts *o, struct settings *s)
{
    struct run *run = calloc(1, sizeof(*run));
    int code = SB_LAUNCH_FAIL, rc;

    if (run == NULL) {
        fprintf(stderr, "sluice: run: out of memory\n");
        return SB_LAUNCH_FAIL;
    }
    run->o = o;
    run->settings = s;
    run->cmd_pidfd = -1;
    run->bwrap_pidfd = -1;
    run->sp[0] = run->sp[1] = -1;
    run->reaper.pid = run->reaper.fd = run->reaper.info_fd = -1;
    run->rundir_lock = -1;
    run->tp_fds[0] = run->tp_fds[1] = run->tp_fds[2] = -1;
    run->stdio_back[0] = run->stdio_back[1] = run->stdio_back[2] = -1;
    /* --control-fd must be open now, before the run opens descriptors of
     * its own (one of which could otherwise take its number) */
    if (o->control_fd >= 0 && fcntl(o->control_fd, F_SETFD, FD_CLOEXEC) < 0) {
        fprintf(stderr, "sluice: run: --control-fd %d: cannot read it: %s; the command was "
                        "not run\n",
                o->control_fd, strerror(errno));
        goto out;
    }
    if (prepare_cmd(run) < 0)
        goto out;
    rc = permission_layers(run);
    if (rc >= 0) {
        code = rc;
        goto out;
    }
    run_phase(run, "settings");
    /* settings conflicts first: they need no kernel feature to be told */
    if (run_tp_settings(run) < 0 || run_creds_check(run->settings) < 0 || host_checks(run) < 0 ||
        run_tp_prepare(run) < 0 || run_ports_prepare(run) < 0 ||
        run_fsw_prepare(run) < 0 || run_tls_prepare(run) < 0 ||
        run_creds_prepare(run) < 0)
        goto out;
    run_phase(run, "prepare");
    if (build_plan(run) < 0 || run_creds_trust(run) < 0 || run_creds_exec(run) < 0)
        goto out;
    run_phase(run, "plan");
    if (check_cwd_and_log(run) < 0)
        goto out;
    run_phase(run, "record");
    if (spawn_sandbox(run) < 0 || handoff(run) < 0)
        goto out;
    /* serve until the command (bwrap) exits */
    uv_run(&run->loop, UV_RUN_DEFAULT);
    code = exit_code(run);
out:
    cleanup(run);
    free(run);
    return code;
}
