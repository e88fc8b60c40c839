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
    uint64_t received; /* run_notify_received() at the end */
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
        j->received = run_notify_received(j->nt);
        run_notify_close(j->nt);
        j->nt = NULL;
        uv_close((uv_handle_t *)t, NULL);
    }
}

/* rt-7: routes that share getppid()'s slot in the route table (hash
 * arch*31+nr % 256): other ABIs' numbers, the same ABI's number + 256 and
 * with __X32_SYSCALL_BIT (x32 calls arrive with x86-64's arch), routed
 * before and after it. None may be handed getppid()'s notification. */
static int misrouted;

static int on_decoy(void *ctx, int notify_fd, const struct seccomp_notif *n)
{
    (void)ctx;
    (void)notify_fd;
    (void)n;
    misrouted++;
    return 0; /* the fallback answers */
}

static size_t slot_of(uint32_t arch, int nr)
{
    return ((size_t)arch * 31u + (size_t)(unsigned)nr) % 256u; /* notify.c's */
}

static void route_decoys(struct run_notify *nt, int after)
{
    static const uint32_t arches[] = {SCMP_ARCH_X86, SCMP_ARCH_X32, SCMP_ARCH_AARCH64,
                                      SCMP_ARCH_ARM, SCMP_ARCH_X86_64};
    uint32_t native = seccomp_arch_native();
    size_t want = slot_of(native, SCMP_SYS(getppid));

    for (size_t a = 0; a < sizeof(arches) / sizeof(arches[0]); a++)
        for (int j = after; j < 6; j += 2) {
            /* the nr that lands arches[a] on getppid's slot, + 256 j */
            int nr = (int)((want + 256u * 64u - (size_t)arches[a] * 31u % 256u) % 256u) + 256 * j;
            if (arches[a] == native && nr == SCMP_SYS(getppid))
                continue;
            assert_int_equal(slot_of(arches[a], nr), want);
            assert_int_equal(run_notify_route(nt, arches[a], nr, on_decoy, &misrouted), 0);
        }
    /* the same arch, the x32 bit: the same slot */
    assert_int_equal(run_notify_route(nt, native, SCMP_SYS(getppid) | 0x40000000 | (after << 20),
                                      on_decoy, &misrouted),
                     0);
}

static void serve_with(struct job *j, int fallback, int decoys)
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
    misrouted = 0;
    if (decoys)
        route_decoys(j->nt, 0);
    assert_int_equal(
        run_notify_route(j->nt, seccomp_arch_native(), SCMP_SYS(getppid), on_getppid, j), 0);
    if (decoys)
        route_decoys(j->nt, 1);
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
    assert_int_equal(j->received, 3); /* routed or not, each is counted (-d) */
    assert_int_equal(run_notify_received(NULL), 0);
    assert_int_equal(j->e[0], EDOM); /* the route's answer */
    assert_int_equal(misrouted, 0);
}

static void serve(struct job *j, int fallback)
{
    serve_with(j, fallback, 0);
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

static void test_colliding_routes(void **state)
{
    struct job j;

    (void)state;
    serve_with(&j, EPERM, 1);
    assert_int_equal(j.e[1], EPERM); /* unrouted: the fallback, not a decoy */
    assert_int_equal(j.e[2], EPERM);
}

/* rt-7: the table holds 256 routes; the 257th is refused (UV_ENOSPC), a
 * route already there can still be changed; arch 0 and a negative number
 * (a name the ABI lacks: libseccomp's i386 connect is -103) are ignored. */
static void test_full_table(void **state)
{
    uv_loop_t loop;
    struct run_notify *nt;
    char err[128];
    int efd[2];

    (void)state;
    assert_int_equal(pipe2(efd, O_CLOEXEC), 0); /* pollable; not a listener */
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(run_notify_start(&nt, &loop, efd[0], EPERM, "test", err, sizeof(err)), 0);
    for (int i = 0; i < 256; i++)
        assert_int_equal(run_notify_route(nt, SCMP_ARCH_X86_64, i * 7, on_decoy, &misrouted), 0);
    assert_int_equal(run_notify_route(nt, SCMP_ARCH_X86, 5, on_decoy, &misrouted), UV_ENOSPC);
    assert_int_equal(run_notify_route(nt, SCMP_ARCH_X86_64, 7, on_decoy, NULL), 0);
    assert_int_equal(run_notify_route(nt, 0, 1, on_decoy, NULL), 0); /* ignored */
    assert_int_equal(run_notify_route(nt, SCMP_ARCH_X86_64, -103, on_decoy, NULL), 0);
    run_notify_unroute(nt, &misrouted);
    run_notify_close(nt);
    (void)uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
    close(efd[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_routed_then_refused),
        cmocka_unit_test(test_routed_then_continued),
        cmocka_unit_test(test_colliding_routes),
        cmocka_unit_test(test_full_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
