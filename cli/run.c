/* cli/run.c - `sluice run`: the sandbox launcher.
 *
 *   sluice run [--settings FILE] [--ask HANDLER] [--log FILE] [--quiet]
 *              [--dangerously-disable-sandbox] (-c STRING | [--] CMD ARGS...)
 *
 * The host side of design.md "The sandbox":
 *   1. settings, policy and the permission layers (sandbox.enabled, the
 *      bypass flag, excludedCommands); an error stops here with 125;
 *   2. a private run directory (0700) holding the sandbox's /tmp;
 *   3. bwrap, spawned with the environment of sandbox/env.c and the argv of
 *      sandbox/bwrap.c, inheriting one end of a socketpair as fd 3;
 *   4. `sluice inner` (the first program inside) sends back the listening
 *      sockets it made in the sandbox's network namespace; the HTTP and
 *      SOCKS front ends accept on them directly, in this process, so a
 *      connection from the sandbox reaches the policy with no relay hop
 *      (with network.httpProxyPort / socksProxyPort set, accepted
 *      connections are relayed to that external proxy instead);
 *   5. 'G' tells inner to seal itself (no_new_privs, seccomp) and exec the
 *      command. Nothing of sluice keeps running inside;
 *   6. SIGINT/SIGTERM/SIGHUP/SIGQUIT are forwarded to the command (a pidfd
 *      from inner's SCM_CREDENTIALS), and the exit status is the command's:
 *      128+N when killed by signal N, never 0 for an interrupted run;
 *   7. afterwards: a summary of blocked connections on stderr (filtered by
 *      ignoreViolations, off with --quiet), the mount points bwrap created
 *      for protected files removed, the run directory removed.
 *
 * Exit 125: sluice itself failed (settings, bwrap missing, no user
 * namespaces, ...); the command did not run.
 */
#define _GNU_SOURCE
#include "cli/cli.h"

#include "bridge/bridge.h"
#include "policy/policy.h"
#include "proxy/proxy.h"
#include "sandbox/sandbox.h"
#include "socks/socks.h"

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#define RUN_FAIL 125
#define RUN_INNER_FD 3
#define RUN_HTTP_PORT 3128u
#define RUN_SOCKS_PORT 1080u
#define RUN_HANDOFF_MS 30000u
#define RUN_MAX_BLOCKED 64 /* distinct entries kept for the summary */

#define container_of(ptr, type, member) ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

extern char **environ;

struct blocked {
    char *what;   /* "host:port" */
    char *reason; /* one line, may be "" */
    unsigned count;
};

struct run_listener {
    struct run *run;
    struct listener *l;
    enum sb_listener_kind kind;
};

/* A connection relayed to an external proxy (httpProxyPort/socksProxyPort). */
struct fwd_conn {
    struct relay relay;
    struct run *run;
    struct dialer *dialer;
    struct fwd_conn *prev, *next;
};

struct run {
    uv_loop_t loop;
    struct settings settings;
    const char *settings_path;
    const char *ask_spec;
    const char *log_path;
    FILE *log;
    int quiet;
    int bypass;
    struct resolver *resolver;
    struct ask_broker *broker;
    struct ask_handler *handler;
    struct egress_env *egress;
    struct frontend http_fe, socks_fe;
    struct run_listener ls[4];
    size_t nls;
    struct fwd_conn fwd; /* list head */
    uint64_t next_id;
    uv_process_t proc;
    int proc_started, proc_exited;
    int64_t exit_status;
    int term_signal;
    int cmd_pidfd;
    int interrupted; /* last forwarded signal */
    uv_signal_t sigs[4];
    size_t nsigs;
    char *cmdline; /* the command as one string, for excludedCommands */
    struct blocked blocked[RUN_MAX_BLOCKED];
    size_t nblocked;
    unsigned blocked_total;
    unsigned blocked_dropped; /* beyond RUN_MAX_BLOCKED distinct entries */
};

void cli_run_usage(FILE *f)
{
    fprintf(f,
            "usage: sluice run [OPTIONS] [--] CMD [ARGS...]\n"
            "       sluice run [OPTIONS] -c STRING\n"
            "\n"
            "Runs CMD under bubblewrap in a network namespace whose only way out is\n"
            "sluice's HTTP (127.0.0.1:3128) and SOCKS5 (127.0.0.1:1080) proxies, which\n"
            "apply the policy, with filesystem and syscall restrictions.\n"
            "\n"
            "  --settings FILE   settings file (also $SLUICE_SETTINGS)\n"
            "  --ask HANDLER     ask about destinations no rule decides: tty,\n"
            "                    exec:PROGRAM or socket:PATH (default: deny them)\n"
            "  --log FILE        write a decision line per request to FILE\n"
            "  --quiet           no summary of blocked connections after the run\n"
            "  --dangerously-disable-sandbox\n"
            "                    run CMD without the sandbox, only when the settings\n"
            "                    allow it (sandbox.allowUnsandboxedCommands)\n"
            "  -c STRING         run STRING with $SHELL -c (else /bin/sh)\n"
            "\n"
            "Options end at the first argument that is not one, or at --.\n"
            "Exit status: the command's; 128+N when it was killed by signal N;\n"
            "125 when sluice could not set up the sandbox (the command did not run).\n");
}

/* ------------------------------------------------------------------------ */
/* Decisions: the log and the blocked summary                                */

static void note_blocked(struct run *run, const struct connlog *r)
{
    char what[300];
    const char *reason = r->reason != NULL ? r->reason : "";

    snprintf(what, sizeof(what), "%s:%u", r->host != NULL ? r->host : "?", (unsigned)r->port);
    run->blocked_total++;
    for (size_t i = 0; i < run->nblocked; i++) {
        if (strcmp(run->blocked[i].what, what) == 0 && strcmp(run->blocked[i].reason, reason) == 0) {
            run->blocked[i].count++;
            return;
        }
    }
    if (run->nblocked == RUN_MAX_BLOCKED) {
        run->blocked_dropped++;
        return;
    }
    run->blocked[run->nblocked].what = strdup(what);
    run->blocked[run->nblocked].reason = strdup(reason);
    if (run->blocked[run->nblocked].what == NULL || run->blocked[run->nblocked].reason == NULL) {
        free(run->blocked[run->nblocked].what);
        free(run->blocked[run->nblocked].reason);
        run->blocked_dropped++;
        return;
    }
    run->blocked[run->nblocked].count = 1;
    run->nblocked++;
}

static void on_connlog(void *ctx, const struct connlog *r)
{
    struct run *run = ctx;

    if (r->event == CONNLOG_DECISION && r->verdict != NULL && strcmp(r->verdict, "deny") == 0)
        note_blocked(run, r);
    if (run->log == NULL)
        return;
    if (r->event == CONNLOG_DECISION) {
        fprintf(run->log, "id=%llu client=%s protocol=%s target=%s:%u decision=%s rule=\"%s\" "
                          "reason=\"%s\" addr=%s code=%d\n",
                (unsigned long long)r->id, r->client != NULL ? r->client : "-",
                r->protocol != NULL ? r->protocol : "-", r->host != NULL ? r->host : "-",
                (unsigned)r->port, r->verdict != NULL ? r->verdict : "-",
                r->rule != NULL ? r->rule : "", r->reason != NULL ? r->reason : "",
                r->addr != NULL && r->addr[0] != '\0' ? r->addr : "-", r->code);
    } else {
        fprintf(run->log, "id=%llu event=close up=%llu down=%llu ms=%llu end=%s\n",
                (unsigned long long)r->id, (unsigned long long)r->bytes_up,
                (unsigned long long)r->bytes_down, (unsigned long long)r->duration_ms,
                r->end != NULL ? r->end : "-");
    }
    fflush(run->log);
}

/* ignoreViolations: {"*": [patterns], "command substring": [patterns]}. A
 * pattern hides a blocked destination when it is a substring of "host:port"
 * or an fnmatch(3) glob matching the host or "host:port". */
static int ignored(const struct run *run, const struct blocked *b)
{
    const struct settings_map *m = &run->settings.ignore_violations;
    char host[300];
    const char *colon;

    snprintf(host, sizeof(host), "%s", b->what);
    colon = strrchr(host, ':');
    if (colon != NULL)
        host[colon - host] = '\0';
    for (size_t i = 0; i < m->n; i++) {
        const struct settings_pair *p = &m->pairs[i];
        if (strcmp(p->key, "*") != 0 && (run->cmdline == NULL || strstr(run->cmdline, p->key) == NULL))
            continue;
        for (size_t j = 0; j < p->list.n; j++) {
            const char *pat = p->list.items[j].value;
            if (strcmp(pat, "*") == 0 || strstr(b->what, pat) != NULL ||
                fnmatch(pat, host, 0) == 0 || fnmatch(pat, b->what, 0) == 0)
                return 1;
        }
    }
    return 0;
}

static void print_summary(struct run *run)
{
    unsigned shown = 0;
    int first = 1;

    if (run->quiet || run->blocked_total == 0)
        return;
    for (size_t i = 0; i < run->nblocked; i++)
        if (!ignored(run, &run->blocked[i]))
            shown += run->blocked[i].count;
    shown += run->blocked_dropped;
    if (shown == 0)
        return;
    fprintf(stderr, "sluice: blocked %u connection%s: ", shown, shown == 1 ? "" : "s");
    for (size_t i = 0; i < run->nblocked; i++) {
        const struct blocked *b = &run->blocked[i];
        if (ignored(run, b))
            continue;
        fprintf(stderr, "%s%s", first ? "" : ", ", b->what);
        if (b->reason[0] != '\0')
            fprintf(stderr, " (%s)", b->reason);
        if (b->count > 1)
            fprintf(stderr, " \u00d7%u", b->count);
        first = 0;
    }
    if (run->blocked_dropped > 0)
        fprintf(stderr, "%s%u more", first ? "" : ", ", run->blocked_dropped);
    fputc('\n', stderr);
}

/* ------------------------------------------------------------------------ */
/* External proxy: relay accepted connections to 127.0.0.1:PORT               */

static void fwd_closed(struct relay *r)
{
    struct fwd_conn *c = container_of(r, struct fwd_conn, relay);

    c->prev->next = c->next;
    c->next->prev = c->prev;
    free(c);
}

static void fwd_dialed(void *arg, int status, int fd, size_t index)
{
    struct fwd_conn *c = arg;
    int rc;

    (void)index;
    c->dialer = NULL;
    if (status < 0) {
        relay_close(&c->relay, status);
        return;
    }
    rc = relay_open_b(&c->relay, fd); /* closes fd on error */
    if (rc == 0)
        rc = relay_start(&c->relay, c->run->settings.proxy.idle_timeout_ms);
    if (rc < 0)
        relay_close(&c->relay, rc);
}

static void fwd_accept(struct run *run, struct listener *l, unsigned port)
{
    struct fwd_conn *c = calloc(1, sizeof(*c));
    struct dialer_target t;
    int rc;

    if (c == NULL) {
        listener_pause(l); /* resumed by nothing: out of memory is the end */
        return;
    }
    c->run = run;
    c->next = run->fwd.next;
    c->prev = &run->fwd;
    run->fwd.next->prev = c;
    run->fwd.next = c;
    relay_init(&run->loop, &c->relay, (enum relay_kind)listener_kind(l), RELAY_TCP, fwd_closed, c);
    rc = listener_accept(l, &c->relay.a.u.s);
    if (rc < 0) {
        relay_close(&c->relay, rc);
        return;
    }
    memset(&t, 0, sizeof(t));
    t.addr.family = 4;
    t.addr.bytes[0] = 127;
    t.addr.bytes[3] = 1;
    t.port = (uint16_t)port;
    rc = dialer_start(&c->dialer, &run->loop, &t, 1, run->settings.proxy.dial_timeout_ms,
                      fwd_dialed, c);
    if (rc < 0) {
        c->dialer = NULL;
        relay_close(&c->relay, rc);
    }
}

/* ------------------------------------------------------------------------ */
/* Listeners                                                                 */

static void on_accept(struct listener *l, void *arg)
{
    struct run_listener *rl = arg;
    struct run *run = rl->run;
    struct frontend *fe = rl->kind == SB_L_HTTP ? &run->http_fe : &run->socks_fe;
    unsigned ext = rl->kind == SB_L_HTTP ? run->settings.network.http_proxy_port
                                         : run->settings.network.socks_proxy_port;
    int rc;

    if (ext != 0) {
        fwd_accept(run, l, ext);
        return;
    }
    rc = rl->kind == SB_L_HTTP
             ? http_session_accept(fe, l, fe->nconns >= run->settings.proxy.max_connections)
             : socks_session_accept(fe, l, fe->nconns >= run->settings.proxy.max_connections);
    (void)rc;
}

static void frontend_setup(struct run *run, struct frontend *fe)
{
    const struct settings *s = &run->settings;

    frontend_init(fe, &run->loop, &run->next_id);
    fe->egress = run->egress;
    fe->auth_user = NULL; /* the sandbox is the only client */
    fe->auth_pass = NULL;
    fe->handshake_timeout_ms = s->proxy.handshake_timeout_ms;
    fe->head_timeout_ms = s->proxy.head_timeout_ms;
    fe->idle_timeout_ms = s->proxy.idle_timeout_ms;
    fe->max_head_bytes = s->proxy.max_head_bytes;
    fe->max_conns = s->proxy.max_connections;
    fe->log = on_connlog;
    fe->log_ctx = run;
    fe->data = run;
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
    for (size_t i = 0; i < run->nls; i++) {
        listener_close(run->ls[i].l, NULL, NULL);
        run->ls[i].l = NULL;
    }
    frontend_close_all(&run->http_fe);
    frontend_close_all(&run->socks_fe);
    for (struct fwd_conn *c = run->fwd.next; c != &run->fwd; c = c->next) {
        if (c->dialer != NULL) {
            dialer_cancel(c->dialer);
            c->dialer = NULL;
        }
        relay_close(&c->relay, UV_ECANCELED);
    }
    for (size_t i = 0; i < run->nsigs; i++)
        uv_close((uv_handle_t *)&run->sigs[i], on_handle_closed);
    run->nsigs = 0;
    if (run->handler != NULL) {
        ask_handler_close(run->handler, NULL, NULL);
        run->handler = NULL;
    }
    if (run->broker != NULL) {
        ask_broker_close(run->broker, NULL, NULL);
        run->broker = NULL;
    }
    if (run->resolver != NULL) {
        resolver_close(run->resolver, NULL, NULL);
        run->resolver = NULL;
    }
}

static void on_exit_cb(uv_process_t *p, int64_t status, int term_signal)
{
    struct run *run = container_of(p, struct run, proc);

    run->proc_exited = 1;
    run->exit_status = status;
    run->term_signal = term_signal;
    uv_close((uv_handle_t *)p, on_handle_closed);
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
    if (run->proc_started && !run->proc_exited)
        (void)uv_process_kill(&run->proc, signum);
}

static const char *find_in_path(const char *name, char *buf, size_t len)
{
    const char *path = getenv("PATH");
    const char *p;

    if (strchr(name, '/') != NULL)
        return access(name, X_OK) == 0 ? name : NULL;
    if (path == NULL || path[0] == '\0')
        path = "/usr/local/bin:/usr/bin:/bin";
    for (p = path;;) {
        const char *e = strchr(p, ':');
        size_t n = e != NULL ? (size_t)(e - p) : strlen(p);
        if (n > 0 && (size_t)snprintf(buf, len, "%.*s/%s", (int)n, p, name) < len &&
            access(buf, X_OK) == 0)
            return buf;
        if (e == NULL)
            break;
        p = e + 1;
    }
    return NULL;
}

static int read_int_file(const char *path, long *out)
{
    FILE *f = fopen(path, "re");
    int ok;

    if (f == NULL)
        return -1;
    ok = fscanf(f, "%ld", out) == 1;
    fclose(f);
    return ok ? 0 : -1;
}

/* Can bwrap make its namespaces here? A message naming the fix, or NULL. */
static const char *namespaces_problem(int bwrap_setuid)
{
    long v;

    if (bwrap_setuid)
        return NULL;
    if (read_int_file("/proc/sys/user/max_user_namespaces", &v) == 0 && v == 0)
        return "user namespaces are disabled (user.max_user_namespaces = 0): enable them with "
               "'sysctl -w user.max_user_namespaces=15000', or make bwrap setuid root";
    if (geteuid() != 0 && read_int_file("/proc/sys/kernel/unprivileged_userns_clone", &v) == 0 &&
        v == 0)
        return "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone = 0): "
               "enable them with 'sysctl -w kernel.unprivileged_userns_clone=1', or make bwrap "
               "setuid root";
    if (geteuid() != 0 &&
        read_int_file("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", &v) == 0 && v == 1)
        return "AppArmor restricts unprivileged user namespaces "
               "(kernel.apparmor_restrict_unprivileged_userns = 1): add an AppArmor profile "
               "for bwrap or set the sysctl to 0";
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Run directory                                                             */

/* The run directory, its reaper and the sweep of dead runs' leftovers are
 * in sandbox/reaper.c (issue 14). */

/* ------------------------------------------------------------------------ */
/* Permission layers                                                         */

static int is_excluded(const struct settings *s, const char *cmd)
{
    for (size_t i = 0; i < s->sandbox.excluded_commands.n; i++) {
        const char *e = s->sandbox.excluded_commands.items[i].value;
        size_t n = strlen(e);
        if (strcmp(cmd, e) == 0)
            return 1;
        if (strncmp(cmd, e, n) == 0 && cmd[n] == ' ')
            return 1;
        if (n >= 2 && strcmp(e + n - 2, ":*") == 0 && strncmp(cmd, e, n - 2) == 0)
            return 1;
    }
    return 0;
}

static char *join_args(char *const *argv)
{
    size_t n = 1;
    char *s, *p;

    for (size_t i = 0; argv[i] != NULL; i++)
        n += strlen(argv[i]) + 1;
    s = malloc(n);
    if (s == NULL)
        return NULL;
    p = s;
    for (size_t i = 0; argv[i] != NULL; i++) {
        size_t l = strlen(argv[i]);
        if (i > 0)
            *p++ = ' ';
        memcpy(p, argv[i], l);
        p += l;
    }
    *p = '\0';
    return s;
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

/* ".git", ".vscode" or ".idea" when one of them is a component of PATH: a
 * writable root there would make hooks or editor tasks writable (the
 * protected-file scan looks below a root, not at where it is). */
static const char *protected_component(const char *path)
{
    static const char *const names[] = {".git", ".vscode", ".idea"};

    for (const char *p = path; p != NULL && *p != '\0'; p = strchr(p + 1, '/')) {
        const char *c = *p == '/' ? p + 1 : p;
        size_t n = strcspn(c, "/");
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
            if (n == strlen(names[i]) && strncmp(c, names[i], n) == 0)
                return names[i];
    }
    return NULL;
}

/* The working directory exists inside unless it is under the private /tmp
 * and no bind of the plan (after the /tmp one) covers it. */
static int cwd_visible(const struct sb_plan *plan, const char *cwd)
{
    if (strcmp(cwd, "/tmp") != 0 && strncmp(cwd, "/tmp/", 5) != 0)
        return 1;
    for (size_t i = 0; i + 2 < plan->argv.n; i++) {
        const char *op = plan->argv.v[i], *dest = plan->argv.v[i + 2];
        size_t n = strlen(dest);
        if (strcmp(op, "--") == 0)
            break;
        if (strcmp(op, "--bind") != 0 && strcmp(op, "--ro-bind") != 0)
            continue;
        if (strcmp(dest, "/tmp") == 0 || strcmp(dest, "/") == 0)
            continue;
        if (strncmp(cwd, dest, n) == 0 && (cwd[n] == '\0' || cwd[n] == '/'))
            return 1;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Main                                                                      */

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

static int start_services(struct run *run, char *err, size_t errlen)
{
    struct settings_error serr;
    struct policy *p = NULL;
    const char **servers = NULL;
    int rc;

    if (policy_compile(&run->settings, &p, &serr) < 0) {
        snprintf(err, errlen, "%s", serr.msg);
        return -1;
    }
    cli_set_local(p, NULL, NULL, 0);
    if (run->settings.network.dns_servers.n > 0) {
        servers = calloc(run->settings.network.dns_servers.n, sizeof(*servers));
        if (servers == NULL) {
            policy_free(p);
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        for (size_t i = 0; i < run->settings.network.dns_servers.n; i++)
            servers[i] = run->settings.network.dns_servers.items[i].value;
    }
    rc = resolver_init(&run->resolver, &run->loop, servers, run->settings.network.dns_servers.n,
                       run->settings.proxy.dns_timeout_ms);
    free(servers);
    if (rc < 0) {
        run->resolver = NULL;
        policy_free(p);
        snprintf(err, errlen, "cannot start the DNS resolver: %s", uv_strerror(rc));
        return -1;
    }
    if (run->ask_spec != NULL) {
        const char *why = NULL;
        rc = ask_broker_new(&run->broker, &run->loop, run->settings.proxy.ask_timeout_ms,
                            run->settings.proxy.max_pending_asks);
        if (rc == 0)
            rc = ask_handler_open(&run->handler, &run->loop, run->ask_spec, run->broker, &why);
        if (rc < 0) {
            policy_free(p);
            snprintf(err, errlen, "--ask '%s': %s", run->ask_spec,
                     why != NULL ? why : uv_strerror(rc));
            return -1;
        }
    }
    rc = egress_env_new(&run->egress, &run->loop, p, run->resolver, run->broker,
                        run->settings.proxy.dial_timeout_ms);
    if (rc < 0) {
        policy_free(p);
        snprintf(err, errlen, "cannot start the proxies: %s", uv_strerror(rc));
        return -1;
    }
    frontend_setup(run, &run->http_fe);
    frontend_setup(run, &run->socks_fe);
    return 0;
}

static int open_listeners(struct run *run, struct sb_handoff *h, char *err, size_t errlen)
{
    size_t nhttp = 0, nsocks = 0;

    for (size_t i = 0; i < h->n; i++) {
        struct endpoint ep;
        const char *why = NULL;
        struct run_listener *rl = &run->ls[run->nls];
        int rc;

        memset(&ep, 0, sizeof(ep));
        ep.kind = ENDPOINT_FD;
        ep.fd = h->fds[i];
        rl->run = run;
        rl->kind = h->kind[i];
        rc = listener_open(&rl->l, &run->loop, &ep, on_accept, rl, &why);
        if (rc < 0) {
            /* the listener did not take the fd: close it and the rest */
            for (size_t j = i; j < h->n; j++)
                close(h->fds[j]);
            snprintf(err, errlen, "cannot serve the sandbox's proxy socket: %s",
                     why != NULL ? why : uv_strerror(rc));
            return -1;
        }
        h->fds[i] = -1;
        run->nls++;
        if (rl->kind == SB_L_HTTP)
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

static int parse_args(struct run *run, int argc, char **argv, char ***cmd, const char **cstr)
{
    int i;

    for (i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (strcmp(o, "--") == 0) {
            i++;
            break;
        }
        if (o[0] != '-' || o[1] == '\0')
            break;
        if (strcmp(o, "-h") == 0 || strcmp(o, "--help") == 0) {
            cli_run_usage(stdout);
            return 0;
        }
        if (strcmp(o, "--quiet") == 0 || strcmp(o, "-q") == 0) {
            run->quiet = 1;
            continue;
        }
        if (strcmp(o, "--dangerously-disable-sandbox") == 0) {
            run->bypass = 1;
            continue;
        }
        if (strcmp(o, "--settings") == 0 || strcmp(o, "--ask") == 0 || strcmp(o, "--log") == 0 ||
            strcmp(o, "-c") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "sluice: run: %s needs a value\n", o);
                return 2;
            }
            if (strcmp(o, "--settings") == 0)
                run->settings_path = argv[++i];
            else if (strcmp(o, "--ask") == 0)
                run->ask_spec = argv[++i];
            else if (strcmp(o, "--log") == 0)
                run->log_path = argv[++i];
            else {
                *cstr = argv[++i];
                if (i + 1 < argc) {
                    fprintf(stderr, "sluice: run: -c takes one string; unexpected '%s' after it\n",
                            argv[i + 1]);
                    return 2;
                }
                return -1;
            }
            continue;
        }
        fprintf(stderr, "sluice: run: unknown option '%s' (the command goes after --)\n", o);
        cli_run_usage(stderr);
        return 2;
    }
    if (i >= argc) {
        fprintf(stderr, "sluice: run: no command given\n");
        cli_run_usage(stderr);
        return 2;
    }
    *cmd = &argv[i];
    return -1;
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

int cli_run(int argc, char **argv)
{
    struct run *run = calloc(1, sizeof(*run));
    char **cmd = NULL;
    const char *cstr = NULL;
    char *shell_argv[4] = {NULL, NULL, NULL, NULL};
    char self[4096], cwd[4096], bwrap_buf[4096], rundir[4096], hosttmp[4200], err[1200];
    char runmask[4096];
    struct sb_reaper reaper = {-1, -1};
    static struct sb_cgroup cgroup;
    const char *bwrap;
    struct sb_strv env = {0};
    struct sb_plan plan;
    struct sb_handoff h;
    struct sb_gitwatch gw;
    struct stat st;
    int sp[2] = {-1, -1};
    int code = RUN_FAIL, rc, have_rundir = 0, loop_ok = 0, one = 1;
    ssize_t n;

    memset(&plan, 0, sizeof(plan));
    memset(&h, 0, sizeof(h));
    memset(&gw, 0, sizeof(gw));
    if (run == NULL) {
        fprintf(stderr, "sluice: run: out of memory\n");
        return RUN_FAIL;
    }
    run->cmd_pidfd = -1;
    run->fwd.next = run->fwd.prev = &run->fwd;
    settings_init(&run->settings);

    rc = parse_args(run, argc, argv, &cmd, &cstr);
    if (rc >= 0) {
        code = rc == 0 ? 0 : RUN_FAIL;
        goto out;
    }
    if (cstr != NULL) {
        const char *sh = getenv("SHELL");
        if (sh == NULL || sh[0] != '/' || access(sh, X_OK) != 0)
            sh = "/bin/sh";
        shell_argv[0] = (char *)sh;
        shell_argv[1] = (char *)"-c";
        shell_argv[2] = (char *)cstr;
        cmd = shell_argv;
        run->cmdline = strdup(cstr);
    } else {
        run->cmdline = join_args(cmd);
    }
    if (run->cmdline == NULL) {
        fprintf(stderr, "sluice: run: out of memory\n");
        goto out;
    }

    /* 1. settings and the permission layers */
    if (cli_load_settings(&run->settings, run->settings_path) < 0) {
        fprintf(stderr, "sluice: run: not running the command: the settings are invalid\n");
        goto out;
    }
    if (run->settings.sandbox.enabled == SETTINGS_FALSE) {
        code = exec_unsandboxed(cmd, "sandbox.enabled is false in the settings");
        goto out;
    }
    if (run->bypass) {
        if (run->settings.sandbox.allow_unsandboxed_commands == SETTINGS_FALSE) {
            fprintf(stderr, "sluice: run: --dangerously-disable-sandbox refused: "
                            "sandbox.allowUnsandboxedCommands is false; running sandboxed\n");
        } else {
            code = exec_unsandboxed(cmd, "--dangerously-disable-sandbox");
            goto out;
        }
    }
    if (is_excluded(&run->settings, run->cmdline)) {
        code = exec_unsandboxed(cmd, "the command matches sandbox.excludedCommands");
        goto out;
    }

    /* 2. what the sandbox needs from this host */
#if !defined(__x86_64__) && !defined(__aarch64__)
    fprintf(stderr, "sluice: run: unsupported architecture: the seccomp filter is built for "
                    "x86-64 and aarch64 only; the command was not run\n");
    goto out;
#endif
    n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0 || (size_t)n >= sizeof(self) - 1) {
        fprintf(stderr, "sluice: run: cannot find my own binary (/proc/self/exe): %s\n",
                strerror(errno));
        goto out;
    }
    self[n] = '\0';
    if (getcwd(cwd, sizeof(cwd)) == NULL) {
        fprintf(stderr, "sluice: run: cannot read the working directory: %s\n", strerror(errno));
        goto out;
    }
    bwrap = find_in_path(run->settings.bwrap_path != NULL ? run->settings.bwrap_path : "bwrap",
                         bwrap_buf, sizeof(bwrap_buf));
    if (bwrap == NULL) {
        fprintf(stderr, "sluice: run: bubblewrap not found (%s): install it (Debian: apt-get "
                        "install bubblewrap) or set bwrapPath; the command was not run\n",
                run->settings.bwrap_path != NULL ? run->settings.bwrap_path : "bwrap in PATH");
        goto out;
    }
    if (stat(bwrap, &st) < 0) {
        fprintf(stderr, "sluice: run: %s: %s\n", bwrap, strerror(errno));
        goto out;
    }
    {
        const char *why = namespaces_problem((st.st_mode & S_ISUID) != 0 && st.st_uid == 0);
        if (why != NULL) {
            fprintf(stderr, "sluice: run: %s; the command was not run\n", why);
            goto out;
        }
    }
    if (sb_rundir_make(rundir, sizeof(rundir), hosttmp, sizeof(hosttmp), runmask,
                       sizeof(runmask), err, sizeof(err)) < 0) {
        fprintf(stderr, "sluice: run: %s; the command was not run\n", err);
        goto out;
    }
    have_rundir = 1;

    /* 3. environment and bwrap's arguments */
    {
        struct sb_env_opts eo = {
            .s = &run->settings,
            .host_env = environ,
            .http_port = RUN_HTTP_PORT,
            .socks_port = RUN_SOCKS_PORT,
            .tmpdir = "/tmp",
            .self_exe = self,
        };
        struct sb_bwrap_opts bo = {
            .s = &run->settings,
            .bwrap = bwrap,
            .bwrap_setuid = (st.st_mode & S_ISUID) != 0 && st.st_uid == 0,
            .stdin_tty = isatty(0),
            .restrict_network = 1,
            .cwd = cwd,
            .home = getenv("HOME"),
            .host_tmpdir = hosttmp,
            .self_exe = self,
            .inner_fd = RUN_INNER_FD,
            .allow_unix_sockets = run->settings.network.allow_all_unix_sockets,
            .mask_dir = runmask,
            .cmd = cmd,
        };
        if (sb_env_build(&eo, &env, err, sizeof(err)) < 0 ||
            sb_bwrap_build(&bo, &plan, err, sizeof(err)) < 0) {
            fprintf(stderr, "sluice: run: %s; the command was not run\n", err);
            goto out;
        }
    }
    {
        const char *bad = protected_component(cwd);
        if (bad != NULL) {
            fprintf(stderr,
                    "sluice: run: the working directory '%s' is inside a protected '%s' "
                    "directory, which the sandbox must keep read-only: run from the project "
                    "directory instead; the command was not run\n",
                    cwd, bad);
            goto out;
        }
    }
    if (!cwd_visible(&plan, cwd)) {
        fprintf(stderr,
                "sluice: run: the working directory '%s' is under /tmp, which is private to the "
                "sandbox, and filesystem.allowWrite does not include it: add it (or \".\") to "
                "filesystem.allowWrite, or run from elsewhere; the command was not run\n",
                cwd);
        goto out;
    }
    if (sb_gitwatch_begin(cwd, run->settings.mandatory_deny_search_depth, &gw, err,
                          sizeof(err)) < 0) {
        fprintf(stderr, "sluice: run: %s; the command was not run\n", err);
        goto out;
    }
    if (sb_reaper_start(&reaper, rundir, &plan, err, sizeof(err)) < 0) {
        fprintf(stderr, "sluice: run: %s; the command was not run\n", err);
        goto out;
    }
    if (run->log_path != NULL) {
        run->log = fopen(run->log_path, "ae");
        if (run->log == NULL) {
            fprintf(stderr, "sluice: run: cannot open log file '%s': %s\n", run->log_path,
                    strerror(errno));
            goto out;
        }
    }

    /* 4. spawn bwrap with inner's end of the socketpair as fd 3 */
    if (uv_loop_init(&run->loop) != 0) {
        fprintf(stderr, "sluice: run: cannot create the event loop\n");
        goto out;
    }
    loop_ok = 1;
    /* close_all() walks the front ends' connection lists: valid (empty)
     * from here on, even when start_services() fails before setting them up */
    frontend_init(&run->http_fe, &run->loop, &run->next_id);
    frontend_init(&run->socks_fe, &run->loop, &run->next_id);
    signal(SIGPIPE, SIG_IGN);
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0 ||
        setsockopt(sp[0], SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) < 0) {
        fprintf(stderr, "sluice: run: socketpair: %s\n", strerror(errno));
        goto out;
    }
    if (start_services(run, err, sizeof(err)) < 0) {
        fprintf(stderr, "sluice: run: %s; the command was not run\n", err);
        goto out;
    }
    {
        uv_stdio_container_t stdio[RUN_INNER_FD + 1];
        uv_process_options_t po;

        memset(&po, 0, sizeof(po));
        for (int i = 0; i < 3; i++) {
            stdio[i].flags = UV_INHERIT_FD;
            stdio[i].data.fd = i;
        }
        stdio[RUN_INNER_FD].flags = UV_INHERIT_FD;
        stdio[RUN_INNER_FD].data.fd = sp[1];
        po.file = plan.argv.v[0];
        po.args = plan.argv.v;
        po.env = env.v;
        po.stdio = stdio;
        po.stdio_count = RUN_INNER_FD + 1;
        po.exit_cb = on_exit_cb;
        rc = uv_spawn(&run->loop, &run->proc, &po);
        if (rc < 0) {
            fprintf(stderr, "sluice: run: cannot start %s: %s; the command was not run\n",
                    plan.argv.v[0], uv_strerror(rc));
            uv_close((uv_handle_t *)&run->proc, on_handle_closed);
            goto out;
        }
        run->proc_started = 1;
        sb_reaper_watch(&reaper, run->proc.pid);
    }
    close(sp[1]);
    sp[1] = -1;

    /* 5. inner's listeners */
    if (sb_handoff_recv(sp[0], RUN_HANDOFF_MS, &h, err, sizeof(err)) < 0) {
        fprintf(stderr, "sluice: run: the sandbox did not start (%s); the command was not run\n",
                err);
        (void)uv_process_kill(&run->proc, SIGKILL);
        goto out;
    }
    if (open_listeners(run, &h, err, sizeof(err)) < 0) {
        fprintf(stderr, "sluice: run: %s; the command was not run\n", err);
        (void)uv_process_kill(&run->proc, SIGKILL);
        goto out;
    }
    if (h.cmd_pid > 0)
        run->cmd_pidfd = run_pidfd_open(h.cmd_pid);
    if (start_signals(run) < 0) {
        fprintf(stderr, "sluice: run: cannot watch signals\n");
        (void)uv_process_kill(&run->proc, SIGKILL);
        goto out;
    }
    /* issue 14: root is exempt from RLIMIT_NPROC: a pids cgroup instead
     * (limits.c); where none can be used the default limit is best effort,
     * and a limit set in the settings is refused (it would be ignored) */
    err[0] = '\0';
    rc = sb_cgroup_make(&cgroup, run->settings.sandbox.limits.processes, err, sizeof(err));
    if (rc == 0 && (h.cmd_pid <= 0 || sb_cgroup_enter(&cgroup, h.cmd_pid, err, sizeof(err)) < 0)) {
        if (h.cmd_pid <= 0)
            snprintf(err, sizeof(err), "limits: the sandbox's pid is unknown");
        sb_cgroup_remove(&cgroup);
        rc = -1;
    }
    if (rc != 0 && getuid() == 0 &&
        run->settings.sandbox.limits.processes != SETTINGS_DEFAULT_PROCESSES) {
        fprintf(stderr,
                "sluice: run: sandbox.limits.processes cannot be enforced: root is exempt from "
                "RLIMIT_NPROC and no pids cgroup could be used%s%s%s; the command was not run\n",
                err[0] != '\0' ? " (" : "", err, err[0] != '\0' ? ")" : "");
        (void)uv_process_kill(&run->proc, SIGKILL);
        goto out;
    }
    if (write(sp[0], "G", 1) != 1) {
        fprintf(stderr, "sluice: run: the sandbox went away before the command started\n");
        (void)uv_process_kill(&run->proc, SIGKILL);
        goto out;
    }
    close(sp[0]);
    sp[0] = -1;

    /* 6. serve until the command (bwrap) exits */
    uv_run(&run->loop, UV_RUN_DEFAULT);
    code = exit_code(run);

out:
    if (loop_ok) {
        if (run->proc_started && !run->proc_exited) {
            /* error path: wait for bwrap to go */
            while (!run->proc_exited && uv_run(&run->loop, UV_RUN_ONCE) != 0)
                ;
        }
        close_all(run);
        uv_walk(&run->loop, walk_close, NULL);
        uv_run(&run->loop, UV_RUN_DEFAULT);
        (void)uv_loop_close(&run->loop);
    }
    if (sp[0] >= 0)
        close(sp[0]);
    if (sp[1] >= 0)
        close(sp[1]);
    if (run->cmd_pidfd >= 0)
        close(run->cmd_pidfd);
    for (size_t i = 0; i < h.n; i++)
        if (h.fds[i] >= 0)
            close(h.fds[i]);
    if (run->proc_started)
        print_summary(run);
    if (run->proc_started)
        (void)sb_gitwatch_end(&gw, stderr);
    sb_gitwatch_free(&gw);
    sb_plan_cleanup(&plan);
    sb_plan_free(&plan);
    if (have_rundir)
        sb_rundir_remove(rundir);
    sb_cgroup_remove(&cgroup);
    sb_reaper_finish(&reaper);
    sb_strv_free(&env);
    egress_env_free(run->egress);
    for (size_t i = 0; i < run->nblocked; i++) {
        free(run->blocked[i].what);
        free(run->blocked[i].reason);
    }
    if (run->log != NULL)
        fclose(run->log);
    free(run->cmdline);
    settings_free(&run->settings);
    free(run);
    return code;
}
