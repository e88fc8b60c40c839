/* tests/sandbox/test_fswatch.c - the write report's pieces (sandbox/fswatch.c,
 * run/fswrite.c): the reason a path is read-only, read from a bwrap command line
 * (fsw_reason), and the filter with the host's handler: a forked child
 * under sb_seccomp_load with watch_writes hands its listener over and
 * makes calls; a read-only open is never notified, a write-intent open and
 * a mkdir are and run unchanged (CONTINUE), and a write below a read-only
 * mount (a tmpfs the child mounts read-only in a user and mount namespace of
 * its own; skipped where none can be made) is reported with its absolute
 * path. The run summary is covered by tests/e2e/fswrite.sh. */
#define _GNU_SOURCE
#include <setjmp.h> /* cmocka needs these first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "run/fswrite.h"
#include "sandbox/fswatch.h"
#include "sandbox/sandbox.h"

static void reason_cases(void **state)
{
    const char *v[] = {"bwrap",
                       "--ro-bind",
                       "/",
                       "/",
                       "--dev",
                       "/dev",
                       "--proc",
                       "/proc",
                       "--ro-bind",
                       "/proc/sys",
                       "/proc/sys",
                       "--bind",
                       "/h/tmp",
                       "/tmp",
                       "--bind",
                       "/w",
                       "/w",
                       "--ro-bind",
                       "/w/.bashrc",
                       "/w/.bashrc",
                       "--ro-bind",
                       "/w/.git/hooks",
                       "/w/.git/hooks",
                       "--ro-bind",
                       "/w/dw",
                       "/w/dw",
                       "--tmpfs",
                       "/w/.claude/commands",
                       "--remount-ro",
                       "/w/.claude/commands",
                       "--tmpfs", /* a placeholder for a missing .git */
                       "/w/sub/.git",
                       "--remount-ro",
                       "/w/sub/.git",
                       "--tmpfs", /* denyRead */
                       "/w/dr",
                       "--ro-bind", /* allowRead inside it */
                       "/w/dr/ar",
                       "/w/dr/ar",
                       "--ro-bind", /* sluice's own binary */
                       "/w/bin/sluice",
                       "/w/bin/sluice",
                       "--",
                       "sluice",
                       "inner",
                       "--ro-bind",
                       "/w/x",
                       "/w/x",
                       NULL};
    /* what sb_bwrap_build records beside the vector (plan.ro_why) */
    const char *why[] = {"/w/.bashrc",   "protected", "/w/.git/hooks", "protected",
                         "/w/dw",        "denyWrite", "/w/.claude/commands", "protected",
                         "/w/sub/.git",  "protected", "/w/dr/ar", "allowRead only", NULL};
    struct sb_strv a = {(char **)v, sizeof(v) / sizeof(v[0]) - 1, 0};
    struct sb_strv w = {(char **)why, sizeof(why) / sizeof(why[0]) - 1, 0};

    (void)state;
    assert_string_equal(fsw_reason(&a, &w, "/etc/passwd"), "read-only");
    assert_string_equal(fsw_reason(&a, &w, "/proc/sys/kernel/x"), "read-only");
    assert_string_equal(fsw_reason(&a, &w, "/w/.bashrc"), "protected");
    assert_string_equal(fsw_reason(&a, &w, "/w/.git/hooks/pre-commit"), "protected");
    assert_string_equal(fsw_reason(&a, &w, "/w/.claude/commands/c.md"), "protected");
    assert_string_equal(fsw_reason(&a, &w, "/w/dw"), "denyWrite");
    assert_string_equal(fsw_reason(&a, &w, "/w/dw/f"), "denyWrite");
    assert_string_equal(fsw_reason(&a, &w, "/w/dwx"), "read-only"); /* under /w, a writable bind */
    assert_string_equal(fsw_reason(&a, &w, "/w/x"), "read-only");   /* after "--": the command's */
    /* issue 21: these were all "denyWrite" */
    assert_string_equal(fsw_reason(&a, &w, "/w/sub/.git/config"), "protected");
    assert_string_equal(fsw_reason(&a, &w, "/w/dr/ar/f"), "allowRead only");
    assert_string_equal(fsw_reason(&a, &w, "/w/bin/sluice"), "read-only");
    /* without the plan's reasons: only what the names say */
    assert_string_equal(fsw_reason(&a, NULL, "/w/dw/f"), "read-only");
    assert_string_equal(fsw_reason(&a, NULL, "/w/.bashrc"), "protected");
}

struct seen {
    int notified, reported, checked;
    char path[4096], call[64];
};

static void on_report(void *ctx, const char *path, const char *call)
{
    struct seen *s = ctx;

    s->reported++;
    snprintf(s->path, sizeof(s->path), "%s", path);
    snprintf(s->call, sizeof(s->call), "%s", call);
}

static int send_fd(int sock, int fd)
{
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int))];
    } ctl;
    char byte = 'N';
    struct iovec iov = {&byte, 1};
    struct msghdr m = {0};
    struct cmsghdr *c;

    memset(&ctl, 0, sizeof(ctl));
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = ctl.buf;
    m.msg_controllen = sizeof(ctl.buf);
    c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof(int));
    return sendmsg(sock, &m, 0) == 1 ? 0 : -1;
}

static int recv_fd(int sock)
{
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int))];
    } ctl;
    char byte;
    struct iovec iov = {&byte, 1};
    struct msghdr m = {0};
    struct cmsghdr *c;
    int fd = -1;

    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = ctl.buf;
    m.msg_controllen = sizeof(ctl.buf);
    if (recvmsg(sock, &m, 0) != 1)
        return -1;
    c = CMSG_FIRSTHDR(&m);
    if (c == NULL || c->cmsg_type != SCM_RIGHTS)
        return -1;
    memcpy(&fd, CMSG_DATA(c), sizeof(int));
    return fd;
}

/* The child: MODE 0 plain calls in DIR, MODE 1 a write below DIR/ro, a
 * read-only tmpfs. Exit 0 when every call behaved as without the filter. */
static int child(int sock, const char *dir, int mode)
{
    struct sb_seccomp_opts so;
    char err[256], p[4200];
    int nfd = -1, fd;

    if (mode == 1) {
        snprintf(p, sizeof(p), "%s/ro", dir);
        if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0 ||
            mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
            mount("tmpfs", p, "tmpfs", MS_RDONLY, NULL) < 0)
            _exit(77);
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1UL, 0UL, 0UL, 0UL) < 0)
        _exit(3);
    memset(&so, 0, sizeof(so));
    so.allow_unix_sockets = 1;
    so.allow_local_binding = 1;
    so.watch_writes = 1;
    so.notify_fd = &nfd;
    if (sb_seccomp_load(&so, err, sizeof(err)) < 0) {
        fprintf(stderr, "%s\n", err);
        _exit(4);
    }
    if (send_fd(sock, nfd) < 0)
        _exit(5);
    close(nfd);
    if (mode == 1) {
        snprintf(p, sizeof(p), "%s/ro/new", dir);
        fd = open(p, O_WRONLY | O_CREAT, 0600);
        _exit(fd < 0 && errno == EROFS ? 0 : 6);
    }
    snprintf(p, sizeof(p), "%s/r", dir);
    fd = open(p, O_RDONLY); /* not notified */
    if (fd < 0)
        _exit(7);
    close(fd);
    (void)write(sock, "R", 1); /* the parent checks nothing came so far */
    if (read(sock, p, 1) != 1)
        _exit(8);
    snprintf(p, sizeof(p), "%s/w", dir);
    fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || write(fd, "x", 1) != 1)
        _exit(9);
    close(fd);
    snprintf(p, sizeof(p), "%s/d", dir);
    if (mkdir(p, 0700) < 0)
        _exit(10);
    _exit(0);
}

/* Serves the listener until the child exits; its exit code. */
static int serve(pid_t pid, int sock, struct seen *s)
{
    struct seccomp_notif *n;
    struct seccomp_notif_resp *r;
    int nfd = recv_fd(sock), status = 0, checked = 0;

    assert_true(seccomp_notify_alloc(&n, &r) == 0);
    for (;;) {
        struct pollfd pf[2] = {{nfd, POLLIN, 0}, {sock, POLLIN, 0}};
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid)
            break;
        if (nfd < 0 || poll(pf, 2, 100) <= 0)
            continue;
        if (pf[1].revents & POLLIN) {
            char c;
            if (read(sock, &c, 1) == 1 && c == 'R') {
                assert_int_equal(s->notified, 0); /* the read-only open was not notified */
                checked = 1;
                (void)write(sock, "G", 1);
            }
        }
        if (pf[0].revents & POLLIN) {
            memset(n, 0, sizeof(*n));
            if (seccomp_notify_receive(nfd, n) == 0) {
                s->notified++;
                if (!fsw_handle(nfd, n, on_report, s))
                    fail_msg("a notification fsw_handle did not take (nr %d)", n->data.nr);
            }
        }
        if (pf[0].revents & (POLLHUP | POLLERR)) {
            close(nfd);
            nfd = -1;
        }
    }
    if (nfd >= 0)
        close(nfd);
    seccomp_notify_free(n, r);
    s->checked = checked;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void run_child(int mode, struct seen *s, int *code, char *dir, size_t dlen)
{
    int sp[2];
    pid_t pid;
    char p[4200];

    snprintf(dir, dlen, "/tmp/sluice-test-fsw.XXXXXX");
    assert_non_null(mkdtemp(dir));
    snprintf(p, sizeof(p), "%s/r", dir);
    close(open(p, O_WRONLY | O_CREAT, 0600));
    snprintf(p, sizeof(p), "%s/ro", dir);
    assert_int_equal(mkdir(p, 0700), 0);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
    memset(s, 0, sizeof(*s));
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(sp[0]);
        child(sp[1], dir, mode);
    }
    close(sp[1]);
    *code = serve(pid, sp[0], s);
    close(sp[0]);
}

static void cleanup(const char *dir)
{
    char cmd[4200];

    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static void writes_notified_and_run(void **state)
{
    struct seen s;
    char dir[256];
    int code;

    (void)state;
    run_child(0, &s, &code, dir, sizeof(dir));
    assert_int_equal(code, 0);
    assert_int_equal(s.checked, 1);  /* nothing notified for the read-only open */
    assert_int_equal(s.notified, 2); /* the write-intent open and the mkdir */
    assert_int_equal(s.reported, 0); /* both on a writable mount */
    cleanup(dir);
}

static void read_only_mount_reported(void **state)
{
    struct seen s;
    char dir[256], want[300];
    int code;

    (void)state;
    run_child(1, &s, &code, dir, sizeof(dir));
    if (code == 77) {
        cleanup(dir);
        skip();
    }
    assert_int_equal(code, 0);
    assert_int_equal(s.reported, 1);
    snprintf(want, sizeof(want), "%s/ro/new", dir);
    assert_string_equal(s.path, want);
    assert_true(strncmp(s.call, "open", 4) == 0);
    cleanup(dir);
}

/* Issue 25: a listener already taken (a filter around sluice has it) is
 * found by inner as it loads its filter, with no probe child on the host:
 * with only the write report wanting one, the filter goes on without the
 * report's rules (1, no listener, and the host hears 'n': -EBUSY); when
 * connect() needs it (transparent mode), loading fails. Both the filter
 * inner builds and the one the host compiled. */
static int load_in_taken_chain(int transparent, int from_host)
{
    struct sb_seccomp_opts so;
    unsigned char *blob = NULL;
    size_t len = 0;
    char err[256];
    int nfd = -1, first = -1, rc;

    memset(&so, 0, sizeof(so));
    so.allow_unix_sockets = 1;
    so.watch_writes = 1;
    so.notify_fd = &first;
    if (prctl(PR_SET_NO_NEW_PRIVS, 1UL, 0UL, 0UL, 0UL) < 0 || sb_seccomp_load(&so, err, sizeof(err)) != 0)
        return 10;
    /* the first listener stays open (a closed one is detached and frees
     * the place); nobody answers it: nothing below makes a write call */
    so.transparent = transparent;
    so.notify_fd = &nfd;
    if (from_host && sb_seccomp_export(&so, &blob, &len, err, sizeof(err)) != 0)
        return 11;
    rc = from_host ? sb_seccomp_load_blob(&so, blob, len, err, sizeof(err))
                   : sb_seccomp_load(&so, err, sizeof(err));
    free(blob);
    if (transparent)
        return rc == -EBUSY ? 0 : 12;
    if (rc != 1 || nfd != -1)
        return 13;
    /* the rest of the filter is there: AF_VSOCK stays refused */
    if (socket(40 /* AF_VSOCK */, SOCK_STREAM, 0) >= 0 || errno != EPERM)
        return 14;
    return 0;
}

static void listener_taken_found_by_inner(void **state)
{
    (void)state;
    assert_null(fsw_preflight()); /* this kernel has it; no probe of the chain */
    for (int mode = 0; mode < 4; mode++) {
        int status = 0;
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0)
            _exit(load_in_taken_chain(mode & 1, mode >> 1));
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
        assert_true(WIFEXITED(status));
        if (WEXITSTATUS(status) != 0)
            fail_msg("transparent %d, from the host %d: step %d", mode & 1, mode >> 1,
                     WEXITSTATUS(status));
    }
}

/* The host's side of it: 'n' is -EBUSY with a message, and no descriptor. */
static void no_listener_message(void **state)
{
    char err[256];
    int sp[2];

    (void)state;
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
    assert_int_equal(write(sp[1], "n", 1), 1);
    assert_int_equal(sb_handoff_recv_notify(sp[0], 1000, err, sizeof(err)), -EBUSY);
    assert_non_null(strstr(err, "already has"));
    /* 'N' without a descriptor is still refused as a protocol error */
    assert_int_equal(write(sp[1], "N", 1), 1);
    assert_int_equal(sb_handoff_recv_notify(sp[0], 1000, err, sizeof(err)), -EPROTO);
    close(sp[0]);
    close(sp[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reason_cases),
        cmocka_unit_test(writes_notified_and_run),
        cmocka_unit_test(read_only_mount_reported),
        cmocka_unit_test(listener_taken_found_by_inner),
        cmocka_unit_test(no_listener_message),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
