/* tests/run/test_notify.c - the seccomp listener's one server
 * (run/notify.c), in process: a thread loads a filter that notifies
 * getppid() and getpgid(), hands the listener over (the descriptor table
 * is shared) and makes three calls while the main thread serves the
 * listener on a libuv loop. getppid() is routed to a handler that refuses
 * it with EDOM and unroutes itself; the second getppid() and getpgid()
 * (never routed) get the fallback answer: EPERM, or the kernel's own with
 * fallback 0 (CONTINUE). The poll stops at POLLHUP once the thread is gone. */
#define _GNU_SOURCE
#include <setjmp.h> /* cmocka needs these first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <seccomp.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <uv.h>

#include "run/notify.h"

struct job {
    int pipe[2]; /* the thread sends the listener's descriptor */
    long r[3];   /* getppid(), getppid(), getpgid(0) */
    int e[3];    /* their errno, 0 on success */
    atomic_int done;
    int routed; /* notifications the handler answered */
    struct run_notify *nt;
    uv_timer_t tick;
    int ticks;
};

static void *worker(void *arg)
{
    struct job *j = arg;
    scmp_filter_ctx ctx;
    long nr[3] = {SYS_getppid, SYS_getppid, SYS_getpgid};
    int fd = -1;

    /* libseccomp keeps the first listener's descriptor process-wide and
     * asks for no new one while it has it: forget it (ours is a dup) */
    (void)seccomp_reset(NULL, SCMP_ACT_ALLOW);
    ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (ctx != NULL && prctl(PR_SET_NO_NEW_PRIVS, 1UL, 0UL, 0UL, 0UL) == 0 &&
        seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(getppid), 0) == 0 &&
        seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(getpgid), 0) == 0 && seccomp_load(ctx) == 0)
        fd = fcntl(seccomp_notify_fd(ctx), F_DUPFD_CLOEXEC, 3);
    if (ctx != NULL)
        seccomp_release(ctx);
    if (write(j->pipe[1], &fd, sizeof(fd)) != (ssize_t)sizeof(fd) || fd < 0) {
        atomic_store(&j->done, 1);
        return NULL;
    }
    for (int i = 0; i < 3; i++) {
        errno = 0;
        j->r[i] = syscall(nr[i], 0L);
        j->e[i] = j->r[i] < 0 ? errno : 0;
    }
    atomic_store(&j->done, 1);
    return NULL;
}

static int on_getppid(void *ctx, int notify_fd, const struct seccomp_notif *n)
{
    struct job *j = ctx;
    struct seccomp_notif_resp *resp = NULL;
    struct seccomp_notif *unused = NULL;

    assert_int_equal(seccomp_notify_alloc(&unused, &resp), 0);
    memset(resp, 0, sizeof(*resp));
    resp->id = n->id;
    resp->error = -EDOM;
    (void)seccomp_notify_respond(notify_fd, resp);
    seccomp_notify_free(unused, resp);
    j->routed++;
    run_notify_unroute(j->nt, j); /* the next one gets the fallback */
    return 1;
}

static void on_tick(uv_timer_t *t)
{
    struct job *j = t->data;

    if (atomic_load(&j->done) || ++j->ticks > 500) { /* 10 s watchdog */
        run_notify_close(j->nt);
        j->nt = NULL;
        uv_close((uv_handle_t *)t, NULL);
    }
}

static void serve(struct job *j, int fallback)
{
    uv_loop_t loop;
    pthread_t th;
    char err[256];
    int fd = -1;

    memset(j, 0, sizeof(*j));
    assert_int_equal(pipe2(j->pipe, O_CLOEXEC), 0);
    assert_int_equal(pthread_create(&th, NULL, worker, j), 0);
    assert_int_equal(read(j->pipe[0], &fd, sizeof(fd)), (ssize_t)sizeof(fd));
    assert_true(fd >= 0);
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(run_notify_start(&j->nt, &loop, fd, fallback, "test", err, sizeof(err)), 0);
    assert_int_equal(
        run_notify_route(j->nt, seccomp_arch_native(), SCMP_SYS(getppid), on_getppid, j), 0);
    assert_int_equal(uv_timer_init(&loop, &j->tick), 0);
    j->tick.data = j;
    assert_int_equal(uv_timer_start(&j->tick, on_tick, 20, 20), 0);
    (void)uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(uv_loop_close(&loop), 0);
    close(j->pipe[0]);
    close(j->pipe[1]);
    assert_true(j->ticks <= 500);
    assert_int_equal(j->routed, 1);
    assert_int_equal(j->e[0], EDOM); /* the route's answer */
}

static void test_routed_then_refused(void **state)
{
    struct job j;

    (void)state;
    serve(&j, EPERM);
    assert_int_equal(j.e[1], EPERM); /* unrouted: the fallback */
    assert_int_equal(j.e[2], EPERM); /* never routed */
}

static void test_routed_then_continued(void **state)
{
    struct job j;

    (void)state;
    serve(&j, 0);
    assert_int_equal(j.e[1], 0); /* CONTINUE: the kernel's getppid() */
    assert_int_equal(j.r[1], (long)getppid());
    assert_int_equal(j.e[2], 0);
    assert_int_equal(j.r[2], (long)getpgid(0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_routed_then_refused),
        cmocka_unit_test(test_routed_then_continued),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
