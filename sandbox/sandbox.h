/* sandbox/sandbox.h - enforcement around a command run by `sluice run`:
 * what confines it, built from the settings alone (the host side of a run,
 * which starts bwrap and serves the proxy, is run/).
 *
 * The parts, one file each, in the order of this header:
 *   strv.c     growable NULL-terminated string vectors (argv, envp)
 *   env.c      the command's environment: host env minus secrets, plus the
 *              proxy variables for every common tool
 *   protect.c  the protected-file scan (.bashrc, .git/hooks, ...) below the
 *              writable roots
 *   verify.c   the post-run git check: what the protections cannot block
 *              (a new commondir, a replaced protected link), seen afterwards
 *   bwrap.c    the bwrap argument builder: a pure function of the settings,
 *              the options below and the filesystem as it is now
 *   seccomp.c  the syscall filter loaded by `inner` just before exec, and
 *              its description for `sluice explain`
 *   landlock.c the Landlock domain `inner` enters before the filter
 *   limits.c   sandbox.limits: the rlimits `inner` sets last, and the pids
 *              cgroup a root launcher makes
 *   inherit.c  host sockets the command inherits on 0-2: settled, or refused
 *   inner.c    `sluice inner`: runs as the sandbox's first program, makes the
 *              proxy listeners in the sandbox's network namespace, hands
 *              them to the host over a socketpair (SCM_RIGHTS), seals itself
 *              with no_new_privs, Landlock and seccomp and execs the
 *              command; and the host's end of that handoff
 *
 * Errors are returned as -errno (or -1) with a one-line message in err that
 * names what was wrong and where; every failure is fatal to the run (fail
 * closed: the command never runs unsandboxed). */
#ifndef SLUICE_SANDBOX_H
#define SLUICE_SANDBOX_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "policy/policy.h"

/* ------------------------------------------------------------------------ */
/* string vectors (sandbox/strv.c)                                           */

struct sb_strv {
    char **v; /* v[n] == NULL whenever v != NULL */
    size_t n, cap;
};

int sb_strv_push(struct sb_strv *a, const char *s);
int sb_strv_pushf(struct sb_strv *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void sb_strv_free(struct sb_strv *a);

/* Tree order of absolute paths: '/' sorts before every other byte, so a
 * path comes right before its descendants (parents first, subtrees kept
 * together). strcmp-style result. Used to order mounts and scan results. */
int sb_path_cmp(const char *a, const char *b);

/* ------------------------------------------------------------------------ */
/* environment (sandbox/env.c)                                               */

struct sb_env_opts {
    const struct settings *s;
    char *const *host_env;  /* normally environ */
    unsigned http_port;     /* inside the sandbox, on 127.0.0.1: 3128 */
    unsigned socks_port;    /* 1080 */
    const char *tmpdir;     /* TMPDIR as seen inside */
    const char *self_exe;   /* sluice's path (same inside: / is bound read-only) */
};

/* The command's environment (and bwrap's: PID 1 inside is bwrap, its environ
 * is readable there, so nothing secret may be in it). */
int sb_env_build(const struct sb_env_opts *o, struct sb_strv *out, char *err, size_t errlen);

/* 1 when NAME (without "=VALUE") is on the built-in secret list. */
int sb_env_is_secret(const char *name);

/* ------------------------------------------------------------------------ */
/* protected files (sandbox/protect.c)                                       */

enum sb_prot_kind {
    SB_PROT_FILE = 0, /* existing file: bound read-only over itself */
    SB_PROT_DIR,      /* existing directory: bound read-only over itself */
    SB_PROT_ABSENT,   /* first missing component of a protected path: an
                         empty read-only directory (tmpfs, remounted
                         read-only) is mounted there, so it cannot be
                         created; bwrap makes the mount point on the host,
                         which sluice removes after the run */
    SB_PROT_PIN,      /* existing directory holding protected paths (.git):
                         bound read-write over itself, so it is a mount point
                         that cannot be renamed away and recreated */
    SB_PROT_LINK,     /* a protected name that is a symbolic link: no mount
                         can cover it (mounts follow links), so nothing is
                         bound there; the post-run check (verify.c) puts it
                         back if the command replaced it. Its target, when
                         inside ROOT, is listed as FILE or DIR as well */
    SB_PROT_MKDIR,    /* a missing directory holding ABSENT entries
                         (ROOT/.claude for .claude/commands and
                         .claude/agents): no mount; bwrap creates it on the
                         host as the parent of their mount points, writable
                         as its parent is; sluice removes it after the run
                         when it is still empty */
};

/* The protected names as a person reads them ("DIR/" for directories),
 * NULL-terminated: what the scan protects in each directory it visits. */
const char *const *sb_protect_names(void);

struct sb_prot {
    char *path; /* absolute */
    enum sb_prot_kind kind;
};

struct sb_prot_list {
    struct sb_prot *v;
    size_t n, cap;
};

/* Walks ROOT to DEPTH levels (skipping node_modules, never following
 * symlinks) and appends what must be protected inside it. */
int sb_protect_scan(const char *root, unsigned depth, int allow_git_config,
                    struct sb_prot_list *out, char *err, size_t errlen);
void sb_prot_list_free(struct sb_prot_list *l);
/* Whether the sandboxed command could make an entry in the directory PATH
 * (relative to dfd): its permissions without capabilities; as root, with
 * sluice's own override only where bwrap's user namespace maps the
 * directory's owner and group; always where it owns the directory (it can
 * chmod it writable) unless that is read-only or immutable. A missing
 * protected name needs a placeholder only there (protect.c). */
int sb_could_create(int dfd, const char *path);

/* ------------------------------------------------------------------------ */
/* post-run git check (sandbox/verify.c)                                      */

struct sb_gitwatch_item {
    char *path;    /* G/commondir, a .git pointer file, or a protected link */
    int state;     /* 1 existed (content kept), 0 absent, -1 unreadable,
                      2 a symbolic link (content is its target) */
    char *content;
    size_t len;
    int resolved;  /* links: its target existed before the run */
};

struct sb_gitwatch {
    struct sb_gitwatch_item *v;
    size_t n, cap;
};

/* Notes every git directory's commondir (and .git pointer file) below ROOT,
 * to DEPTH levels, and every protected name that is a symbolic link, before
 * the run. */
int sb_gitwatch_begin(const char *root, unsigned depth, struct sb_gitwatch *w, char *err,
                      size_t errlen);
/* After the run: undoes creations and changes of those files, one line per
 * repair on report (may be NULL). Returns the number repaired. */
size_t sb_gitwatch_end(struct sb_gitwatch *w, FILE *report);
void sb_gitwatch_free(struct sb_gitwatch *w);
/* issue 25: the same from what the plan's scans found (sb_plan.watch):
 * the writable roots, where alone the command can change anything, and
 * no second walk. */
int sb_gitwatch_list(const struct sb_prot_list *l, struct sb_gitwatch *w, char *err,
                     size_t errlen);
/* Appends a copy of P to L when the post-run check watches such an entry
 * (bwrap.c, as it reads each scan). 0 or -ENOMEM. */
int sb_gitwatch_keep(struct sb_prot_list *l, const struct sb_prot *p);

/* ------------------------------------------------------------------------ */
/* bwrap argument builder (sandbox/bwrap.c)                                  */

/* allowNestedUserNamespaces as root: the command's uid in the sandbox */
#define SB_NESTED_UID "1000"
/* allowNestedUserNamespaces: where a read-only regular file on fd N is
 * bound read-only for inner to reopen (in the private /tmp); the launcher
 * hands bwrap that file on descriptor SB_STDIO_RO_PASS + N (bwrap binds it
 * and closes it) and /dev/null as N itself, so that bwrap's init, PID 1,
 * holds no descriptor of the host's writable mount of it */
#define SB_STDIO_RO_FMT "/tmp/.sluice-fd-%d"
#define SB_STDIO_RO_PASS 4

struct sb_bwrap_opts {
    const struct settings *s;
    const char *bwrap;       /* bwrap's path */
    int bwrap_setuid;        /* 1: no --unshare-user */
    int stdin_tty;           /* 0: --new-session */
    int host_root;           /* sluice runs as uid 0 */
    unsigned stdio_ro;       /* bit N: fd N (0-2) is a regular file or a
                                directory opened read-only, re-bound
                                read-only in every mode */
    long long stdio_off[3];  /* its offset */
    unsigned stdio_dir;      /* bit N: fd N (0-2) is a directory (bits
                                also in stdio_ro) */
    int restrict_network;    /* 1: --unshare-net */
    const char *cwd;         /* absolute, resolved */
    const char *home;        /* $HOME, for ~ in path lists; may be NULL */
    const char *host_tmpdir; /* private writable dir on the host (in the run
                                directory), bound at /tmp inside */
    const char *self_exe;    /* sluice's path */
    const char *inner_exe;   /* sluice-inner's path (issue 25: a start with
                                libc and libseccomp only), or NULL: the
                                sandbox starts `self_exe inner` */
    const char *inner_spot;  /* where sluice looks for sluice-inner beside
                                itself (run_find_inner), or NULL: kept as it
                                is in the sandbox (bwrap.c add_inner_spot) */
    int inner_fd;            /* the socketpair end `inner` inherits */
    int info_fd;             /* > 2: bwrap's --info-fd (its first process's pid,
                                for the reaper); else none */
    int allow_unix_sockets;  /* passed to inner (seccomp) */
    const char *mask_dir;    /* NULL, or a host directory hidden by an empty
                                tmpfs (the parent of every run directory) */
    int transparent;         /* network.transparent: inner gets --transparent */
    int watch_writes;        /* inner gets --watch-writes (write denials reported) */
    int guard_connect;       /* inner gets --guard-connect (sb_inherit_check) */
    int debug;               /* inner gets --debug (its phases on stderr) */
    const char *resolv_conf;      /* transparent: host file bound read-only at */
    const char *resolv_conf_dest; /* this path (what /etc/resolv.conf resolves to) */
    const char *const *late_ro; /* NULL, or pairs (host source, sandbox path),
                                   NULL-terminated: bound read-only after
                                   every other mount (the run directories'
                                   mask included), so no filesystem list
                                   shows what they cover (run/tls_trust.c) */
    char *const *cmd;        /* the command's argv, NULL-terminated */
    FILE *warn;              /* warnings (a glob matching nothing); NULL: stderr */
};

struct sb_plan {
    struct sb_strv argv;    /* bwrap ... -- SELF inner --fd N [...] -- CMD... */
    struct sb_strv created; /* host paths bwrap will create as mount points,
                               deepest last: removed after the run */
    struct sb_strv ro_why;  /* pairs: the destination of each read-only mount
                               the settings made, and why ("protected",
                               "denyWrite", "allowRead only"), for the write
                               report (fsw_reason) */
    struct sb_prot_list watch; /* what the protected-file scans found that
                                  no mount covers and the post-run check
                                  watches (sb_gitwatch_list): git
                                  directories, .git files, commondir files,
                                  protected links */
};

int sb_bwrap_build(const struct sb_bwrap_opts *o, struct sb_plan *p, char *err, size_t errlen);
struct sb_seccomp_opts;
/* The filter options inner gets from the argv sb_bwrap_build writes for O
 * (so that filters the host compiles match inner's flags). */
void sb_bwrap_seccomp_opts(const struct sb_bwrap_opts *o, struct sb_seccomp_opts *so);
/* Removes the mount points listed in p->created that are still what bwrap
 * made (an empty regular file or an empty directory), deepest first. */
void sb_plan_cleanup(const struct sb_plan *p);
void sb_plan_free(struct sb_plan *p);

/* ------------------------------------------------------------------------ */
/* seccomp (sandbox/seccomp.c)                                               */

struct sb_seccomp_opts {
    int allow_unix_sockets;  /* network.allowAllUnixSockets */
    int allow_local_binding; /* network.allowLocalBinding: else bind/listen EPERM */
    int allow_user_namespaces; /* allowNestedUserNamespaces: no CLONE_NEWUSER rules */
    int transparent;           /* network.transparent: connect() -> SCMP_ACT_NOTIFY */
    int watch_writes;          /* write-intent syscalls -> SCMP_ACT_NOTIFY (fswatch.c) */
    int guard_connect;         /* a host socket inherited: connect() (and an allowed
                                  bind()) -> SCMP_ACT_NOTIFY, as in transparent mode */
    int *notify_fd;            /* transparent or watch_writes: receives the listener */
};

/* Builds and loads the filter into the calling thread (no_new_privs must be
 * set already). After it: socket(AF_UNIX) -> EPERM (unless allowed; the
 * domain compared masked to 32 bits), io_uring_* -> EPERM, unshare/clone
 * with CLONE_NEWUSER -> EPERM, clone3 -> ENOSYS (both lifted by
 * allow_user_namespaces), bind/listen -> EPERM (unless allow_local_binding),
 * ioctl TIOCSTI/TIOCLINUX ->
 * EPERM, on every ABI the kernel runs (x86-64: native, x32, i386 including
 * socketcall); other architectures killed. */
int sb_seccomp_load(const struct sb_seccomp_opts *o, char *err, size_t errlen);
/* (issue 25) Both return 1 instead of 0 when the filter chain already has
 * a listener (a sandbox of this kind around sluice) and only the write
 * report wanted one: the filter is loaded without the report's rules and
 * *o->notify_fd is -1. */

/* issue 25: the same two filters (the set-user-ID one, then the main one)
 * compiled by the host into *blob (malloc'ed, *len bytes), which inner
 * loads with sb_seccomp_load_blob instead of building them itself: the
 * host does it while bwrap makes the sandbox. A filter can only add
 * restrictions to the ones in force, so a blob from anyone but sluice's
 * launcher (a command reusing `sluice inner`) weakens nothing. 0, or a
 * negative error with err set. */
int sb_seccomp_export(const struct sb_seccomp_opts *o, unsigned char **blob, size_t *len,
                      char *err, size_t errlen);
int sb_seccomp_load_blob(const struct sb_seccomp_opts *o, const unsigned char *blob, size_t len,
                         char *err, size_t errlen);
/* The blob's programs (SB_SECCOMP_PROGS of them, each 1 to BPF_MAXINSNS
 * instructions, nothing after the last) into PROGS, each filter malloc'ed
 * (sb_seccomp_blob_free). 0, -EPROTO for anything else, -ENOMEM. The
 * kernel checks the instructions when they are loaded. */
#define SB_SECCOMP_PROGS 2
struct sock_fprog;
int sb_seccomp_blob_parse(const unsigned char *blob, size_t len, struct sock_fprog *progs);
void sb_seccomp_blob_free(struct sock_fprog *progs);

/* The ABIs the filter covers (libseccomp SCMP_ARCH_*), the native one
 * first: *n of them. Transparent mode reads the notifications of each. */
const uint32_t *sb_seccomp_arches(size_t *n);

/* One line per rule, for `sluice explain` and the README. */
const char *const *sb_seccomp_describe(const struct sb_seccomp_opts *o);

/* ------------------------------------------------------------------------ */
/* Landlock (sandbox/landlock.c)                                             */

/* Puts the calling thread (no_new_privs set) in a Landlock domain where
 * files may be opened for writing only beneath the sandbox's writable mounts
 * and on those of fds 0-2 opened for writing. NESTED (allowNestedUserNamespaces):
 * a domain that restricts no filesystem access (which would forbid mount(2)
 * to a nested sandbox), only for the ptrace scoping. 0 done, 1 the kernel
 * has no Landlock, or (NESTED) none without filesystem rights (nothing done),
 * -1 with a message in err. */
int sb_landlock_confine(int nested, char *err, size_t errlen);
/* The kernel's Landlock ABI version; 0 without Landlock. */
int sb_landlock_abi(void);

/* ------------------------------------------------------------------------ */
/* resource limits (sandbox/limits.c)                                        */

struct sb_limits {
    unsigned long processes;  /* 0: unchanged */
    unsigned long memory_mib; /* 0: unchanged */
    unsigned long open_files; /* 0: unchanged */
};

/* One `inner` option "--limit-processes=N", "--limit-memory-mib=N" or
 * "--limit-open-files=N" into L; -1 with a message in why. */
int sb_limits_parse_arg(struct sb_limits *l, const char *opt, char *why, size_t whylen);
/* Sets the rlimits (soft and hard, never above the inherited hard one);
 * -1 with a message in err. */
int sb_limits_apply(const struct sb_limits *l, char *err, size_t errlen);

/* Host side, for a root launcher only (the kernel exempts uid 0 from
 * RLIMIT_NPROC): a pids cgroup with pids.max = PIDS_MAX. 0 made, 1 not
 * needed or not available (path empty), -1 with a message in err. */
struct sb_cgroup {
    char path[4352];
    int joined; /* bwrap was born in it (sb_cgroup_join) */
};
/* pids.max until sb_cgroup_seal: the launcher's thread, bwrap, its pid 1
 * and inner, with room to spare */
#define SB_CGROUP_SPAWN_ROOM 8
int sb_cgroup_make(struct sb_cgroup *cg, unsigned long pids_max, char *err, size_t errlen);
/* The calling thread moves itself in (cgroup v1's `tasks`), to spawn bwrap
 * there, and back out (an error in err). join: 0, or -1 (then use
 * sb_cgroup_enter); leave: 0, or -1 with the thread still in it (the
 * cgroup is then left to the next run's sweep: path emptied). */
int sb_cgroup_join(struct sb_cgroup *cg);
int sb_cgroup_leave(struct sb_cgroup *cg, char *err, size_t errlen);
/* After a join, before the command starts: pids.max = PIDS_MAX plus what
 * bwrap holds besides inner. 0 or -1 with a message. */
int sb_cgroup_seal(const struct sb_cgroup *cg, unsigned long pids_max, char *err, size_t errlen);
/* Without a join: moves PID (inner, before the command starts) into it. */
int sb_cgroup_enter(const struct sb_cgroup *cg, int pid, char *err, size_t errlen);
void sb_cgroup_remove(struct sb_cgroup *cg);
/* Removes empty sluice-run.PID.START cgroups whose launcher ALIVE says is
 * gone, waiting up to WAIT_MS for a busy one to empty. */
void sb_cgroup_sweep(int (*alive)(long pid, unsigned long long start), unsigned wait_ms);

/* ------------------------------------------------------------------------ */
/* inherited host sockets (sandbox/inherit.c)                                */

/* Takes a TCP socket with a peer from SS_CONNECTING to SS_CONNECTED (a
 * second connect() to its own peer), where no call but connect(AF_UNSPEC)
 * takes it back to unconnected. 0, or -errno (no peer any more). */
int sb_tcp_settle(int fd);

/* Looks at stdin, stdout and stderr, which the command inherits, for
 * sockets of the host's network (the launcher's own are the host's):
 * connected TCP ones are settled (sb_tcp_settle) and set *guard (the run
 * must have connect() answered by the host); connected Unix stream and
 * seqpacket ones are fine; any other is refused (a Unix one unless
 * ALLOW_UNIX). 0, or -EPERM with a sentence in err. */
int sb_inherit_check(int allow_unix, int *guard, char *err, size_t errlen);

/* ------------------------------------------------------------------------ */
/* inner (sandbox/inner.c) and the host's end of the handoff                 */

/* `sluice inner --fd N [--allow-unix-sockets] [--allow-local-binding]
 * [--allow-user-namespaces] [--transparent] [--watch-writes]
 * [--guard-connect] [--http-port P] [--socks-port P] [--reopen-ro=FD:OFF]...
 * [--limit-processes=N] [--limit-memory-mib=N] [--limit-open-files=N]
 * -- CMD ARGS...` (the syntax bwrap.c writes, parsed with getopt_long):
 * never returns on success (execs CMD); 125 on error with a message on
 * stderr, 127/126 when CMD cannot be executed. */
int sb_inner_main(int argc, char **argv);

enum sb_listener_kind { SB_L_HTTP = 0, SB_L_SOCKS = 1 };

struct sb_handoff {
    int fds[4];                    /* listening sockets, -1 when absent */
    enum sb_listener_kind kind[4];
    size_t n;
    int cmd_pid;                   /* the command's pid in the host's pid
                                      namespace (SCM_CREDENTIALS), 0 if unknown */
};

/* Host side: receives inner's one message on SOCK (blocking, with a timeout
 * in ms). Every fd is CLOEXEC. */
int sb_handoff_recv(int sock, unsigned timeout_ms, struct sb_handoff *h, char *err, size_t errlen);

/* Host side, issue 25: the seccomp filters for O compiled here
 * (sb_seccomp_export) and sent to inner ('F', a native uint32_t length,
 * the blob), which loads them instead of building its own, and then hands
 * over what follows below before the go byte, not after it. A host that
 * sends only the go byte gets the old order. 0 sent; 1 when they could not
 * be compiled here (err says why; libseccomp under valgrind, which lacks
 * seccomp(2)): nothing was sent, and inner builds them after 'G', in the
 * old order; or a negative error of the send with err set. */
int sb_handoff_send_filters(int sock, const struct sb_seccomp_opts *o, char *err, size_t errlen);

/* Transparent mode, host side: after the go byte, inner sends the seccomp
 * listener descriptor (kind 'N'). Returns it (CLOEXEC) or -errno with err
 * set. The descriptor is checked to be a seccomp notification fd. -EBUSY:
 * inner has none (kind 'n'): a filter around sluice holds the chain's one
 * listener, and inner loaded its filter without the write report's rules
 * (it does so only when the report alone wanted one). */
int sb_handoff_recv_notify(int sock, unsigned timeout_ms, char *err, size_t errlen);

/* Host side, after the go byte when inner was given --reopen-ro for
 * regular files (bit N of WANT for fd N): inner sends its descriptors of
 * them (each the caller's file, opened on the read-only re-bind), which
 * land in fds[N] (CLOEXEC). 0, or -errno with err set and nothing held. */
int sb_handoff_recv_stdio(int sock, unsigned timeout_ms, unsigned want, int fds[3], char *err,
                          size_t errlen);

#endif
