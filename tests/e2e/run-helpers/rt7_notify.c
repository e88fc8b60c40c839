/* tests/e2e/run-helpers/rt7_notify.c - rt-7's attacker of the seccomp
 * listener's one server (run/notify.c) and its two modules (run/tp_call.c,
 * run/fswrite.c). Compiled on the host by run_escape.sh (rt7 group) and
 * run inside `sluice run`. x86-64 only (i386 through `int $0x80`, x32
 * through __X32_SYSCALL_BIT). Every line it prints is "TAG RESULT" where
 * RESULT is "ok" or an errno name; the shell script judges them.
 *
 *   abi RWDIR ROFILE PORT
 *       each write-intent and socket syscall on each ABI, once:
 *       native/x32/i386 open of a new file in RWDIR and of ROFILE for
 *       writing, and connect() to 127.0.0.1:PORT (native, x32, i386 direct
 *       362 and socketcall(SYS_CONNECT)), getpeername() on an unconnected
 *       socket (native, x32, i386 socketcall).
 *   flood THREADS ITERS RWDIR ROFILE PORT
 *       THREADS threads each ITERS times: connect() to 127.0.0.1:PORT, open
 *       ROFILE for writing, create+unlink a file in RWDIR, getpeername() on
 *       an unconnected socket; a tally per (op, result). A watchdog prints
 *       "HUNG" and exits 3 after 90 s (an unanswered notification).
 *   die ROUNDS RWDIR ROFILE PORT
 *       ROUNDS times: a child with 8 threads in the same calls, SIGKILLed
 *       after 0-2 ms (notifications whose caller died, pending or being
 *       answered); then one round of each call, which must be answered.
 *   swap SECS APORT DPORT
 *       a connect() to the allowed 127.0.0.1:APORT gives socket H (sluice's
 *       in transparent mode); for SECS seconds one thread dup2()s H and a
 *       fresh socket in turn onto one descriptor number and flips a shared
 *       sockaddr between APORT and DPORT (and AF_UNSPEC), while the main
 *       thread connect()s that number to the shared address and then tries
 *       sendto(MSG_FASTOPEN) to DPORT on it. Prints the counts; the judge
 *       is the host's listener on DPORT (it must accept nothing). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/net.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define X32 0x40000000L
#ifndef MSG_FASTOPEN
#define MSG_FASTOPEN 0x20000000
#endif

/* i386 system call numbers */
#define I386_OPEN 5
#define I386_SOCKETCALL 102
#define I386_CONNECT 362
#define I386_GETPEERNAME 368

static int have_int80 = -1;

/* low memory for i386 pointers: one 1 KiB slot per thread (LOW_SLOTS at
 * most; threads sharing a slot would overwrite each other's address and
 * argument block while sluice reads them, and a connect would name another
 * thread's descriptor) */
#define LOW_SLOTS 256
static char *low;

static long int80(long nr, long a, long b, long c)
{
    long ret;
    __asm__ volatile("int $0x80"
                     : "=a"(ret)
                     : "a"(nr), "b"(a), "c"(b), "d"(c)
                     : "memory", "r8", "r9", "r10", "r11");
    return ret;
}

/* int $0x80 works here (no SIGSEGV with ia32_emulation=0) */
static int int80_works(void)
{
    pid_t p;
    int st = 0;

    if (have_int80 >= 0)
        return have_int80;
    p = fork();
    if (p == 0)
        _exit(int80(20 /* getpid */, 0, 0, 0) > 0 ? 0 : 1);
    waitpid(p, &st, 0);
    have_int80 = WIFEXITED(st) && WEXITSTATUS(st) == 0;
    return have_int80;
}

static const char *res(long rc, int e)
{
    static __thread char buf[32];
    if (rc >= 0)
        return "ok";
    snprintf(buf, sizeof(buf), "%s", strerrorname_np(e) ? strerrorname_np(e) : "E?");
    return buf;
}

/* -errno (int 0x80) to a result */
static const char *res80(long rc)
{
    return rc >= 0 ? "ok" : res(-1, (int)-rc);
}

static struct sockaddr_in lo_addr(int port)
{
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

static void setup_low(void)
{
    low = mmap(NULL, (size_t)LOW_SLOTS * 1024, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
    if (low == MAP_FAILED) {
        perror("mmap");
        exit(2);
    }
}

/* i386 helpers: strings and blocks copied to low memory (per thread slot) */
static char *low_slot(int slot)
{
    return low + (size_t)(slot % LOW_SLOTS) * 1024;
}

static long i386_open(int slot, const char *path, int flags)
{
    char *p = low_slot(slot);
    snprintf(p, 512, "%s", path);
    return int80(I386_OPEN, (long)(uintptr_t)p, flags, 0644);
}

static long i386_connect(int slot, int fd, int port, int via_socketcall)
{
    char *p = low_slot(slot) + 512;
    struct sockaddr_in a = lo_addr(port);
    uint32_t *blk = (uint32_t *)(p + 64);
    memcpy(p, &a, sizeof(a));
    if (!via_socketcall)
        return int80(I386_CONNECT, fd, (long)(uintptr_t)p, sizeof(a));
    blk[0] = (uint32_t)fd;
    blk[1] = (uint32_t)(uintptr_t)p;
    blk[2] = sizeof(a);
    return int80(I386_SOCKETCALL, SYS_CONNECT, (long)(uintptr_t)blk, 0);
}

static long i386_getpeername(int slot, int fd, int via_socketcall)
{
    char *p = low_slot(slot) + 768;
    uint32_t *len = (uint32_t *)(p + 128);
    uint32_t *blk = (uint32_t *)(p + 160);
    *len = 128;
    if (!via_socketcall)
        return int80(I386_GETPEERNAME, fd, (long)(uintptr_t)p, (long)(uintptr_t)len);
    blk[0] = (uint32_t)fd;
    blk[1] = (uint32_t)(uintptr_t)p;
    blk[2] = (uint32_t)(uintptr_t)len;
    return int80(I386_SOCKETCALL, SYS_GETPEERNAME, (long)(uintptr_t)blk, 0);
}

static int cmd_abi(const char *rw, const char *ro, int port)
{
    char path[512];
    long rc;
    int s, e;
    struct sockaddr_in a = lo_addr(port);
    struct sockaddr_storage ss;
    socklen_t sl;

    /* files */
    snprintf(path, sizeof(path), "%s/rt7-native", rw);
    rc = open(path, O_WRONLY | O_CREAT, 0644);
    printf("open-rw-native %s\n", res(rc, errno));
    if (rc >= 0)
        close((int)rc);
    rc = open(ro, O_WRONLY);
    printf("open-ro-native %s\n", res(rc, errno));
    snprintf(path, sizeof(path), "%s/rt7-x32", rw);
    rc = syscall(X32 | SYS_openat, AT_FDCWD, path, O_WRONLY | O_CREAT, 0644);
    printf("open-rw-x32 %s\n", res(rc, errno));
    if (rc >= 0)
        close((int)rc);
    rc = syscall(X32 | SYS_openat, AT_FDCWD, ro, O_WRONLY, 0);
    printf("open-ro-x32 %s\n", res(rc, errno));
    snprintf(path, sizeof(path), "%s/rt7-x32m", rw);
    rc = syscall(X32 | SYS_mkdir, path, 0755);
    printf("mkdir-rw-x32 %s\n", res(rc, errno));
    if (int80_works()) {
        snprintf(path, sizeof(path), "%s/rt7-i386", rw);
        rc = i386_open(0, path, O_WRONLY | O_CREAT);
        printf("open-rw-i386 %s\n", res80(rc));
        if (rc >= 0)
            close((int)rc);
        rc = i386_open(0, ro, O_WRONLY);
        printf("open-ro-i386 %s\n", res80(rc));
    } else {
        printf("open-rw-i386 SKIP\nopen-ro-i386 SKIP\n");
    }
    /* connect() to the port on every ABI */
    s = socket(AF_INET, SOCK_STREAM, 0);
    rc = connect(s, (struct sockaddr *)&a, sizeof(a));
    printf("connect-native %s\n", res(rc, errno));
    close(s);
    s = socket(AF_INET, SOCK_STREAM, 0);
    rc = syscall(X32 | SYS_connect, s, &a, sizeof(a));
    printf("connect-x32 %s\n", res(rc, errno));
    close(s);
    if (int80_works()) {
        s = socket(AF_INET, SOCK_STREAM, 0);
        rc = i386_connect(0, s, port, 0);
        printf("connect-i386 %s\n", res80(rc));
        close(s);
        s = socket(AF_INET, SOCK_STREAM, 0);
        rc = i386_connect(0, s, port, 1);
        printf("connect-i386-socketcall %s\n", res80(rc));
        close(s);
    } else {
        printf("connect-i386 SKIP\nconnect-i386-socketcall SKIP\n");
    }
    /* getpeername() on an unconnected socket: ENOTCONN on every ABI */
    s = socket(AF_INET, SOCK_STREAM, 0);
    sl = sizeof(ss);
    rc = getpeername(s, (struct sockaddr *)&ss, &sl);
    e = errno;
    printf("getpeername-native %s\n", res(rc, e));
    sl = sizeof(ss);
    rc = syscall(X32 | SYS_getpeername, s, &ss, &sl);
    printf("getpeername-x32 %s\n", res(rc, errno));
    if (int80_works()) {
        printf("getpeername-i386 %s\n", res80(i386_getpeername(0, s, 0)));
        printf("getpeername-i386-socketcall %s\n", res80(i386_getpeername(0, s, 1)));
    } else {
        printf("getpeername-i386 SKIP\ngetpeername-i386-socketcall SKIP\n");
    }
    close(s);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* flood and die: the same mix of calls from many threads                    */

enum { OP_CONNECT, OP_CONNECT_I386, OP_OPEN_RO, OP_OPEN_RW, OP_UNLINK, OP_PEER, NOPS };
static const char *op_name[NOPS] = {"connect", "connect-i386", "open-ro",
                                    "open-rw", "unlink",       "getpeername"};
#define NERR 160
static atomic_long tally[NOPS][NERR]; /* [op][0: ok, else errno] */

struct mix {
    int id, iters, port;
    const char *rw, *ro;
};

static void count(int op, long rc, int e)
{
    atomic_fetch_add(&tally[op][rc >= 0 ? 0 : (e > 0 && e < NERR ? e : NERR - 1)], 1);
}

static void *mix_thread(void *arg)
{
    struct mix *m = arg;
    struct sockaddr_in a = lo_addr(m->port);
    char path[512];

    for (int i = 0; i < m->iters; i++) {
        long rc;
        int s = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);

        rc = connect(s, (struct sockaddr *)&a, sizeof(a));
        count(OP_CONNECT, rc, errno);
        close(s);
        if (have_int80 == 1 && (i & 3) == 0) {
            s = socket(AF_INET, SOCK_STREAM, 0);
            rc = i386_connect(m->id, s, m->port, i & 4);
            count(OP_CONNECT_I386, rc < 0 ? -1 : rc, (int)-rc);
            close(s);
        }
        rc = open(m->ro, O_WRONLY);
        count(OP_OPEN_RO, rc, errno);
        if (rc >= 0)
            close((int)rc);
        snprintf(path, sizeof(path), "%s/f-%d-%d", m->rw, m->id, i);
        rc = open(path, O_WRONLY | O_CREAT, 0644);
        count(OP_OPEN_RW, rc, errno);
        if (rc >= 0)
            close((int)rc);
        rc = unlink(path);
        count(OP_UNLINK, rc, errno);
        s = socket(AF_INET, SOCK_STREAM, 0);
        rc = getpeername(s, (struct sockaddr *)&ss, &sl);
        count(OP_PEER, rc, errno);
        close(s);
    }
    return NULL;
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "HUNG: a call was never answered\n";
    (void)!write(1, msg, sizeof(msg) - 1);
    _exit(3);
}

static void print_tally(void)
{
    for (int op = 0; op < NOPS; op++)
        for (int e = 0; e < NERR; e++) {
            long n = atomic_load(&tally[op][e]);
            if (n > 0)
                printf("%s %s %ld\n", op_name[op], e == 0 ? "ok" : res(-1, e), n);
        }
}

static int run_mix(int nthreads, int iters, const char *rw, const char *ro, int port)
{
    pthread_t *th = calloc((size_t)nthreads, sizeof(*th));
    struct mix *m = calloc((size_t)nthreads, sizeof(*m));
    int started = 0;

    for (int i = 0; i < nthreads; i++) {
        m[i] = (struct mix){i, iters, port, rw, ro};
        if (pthread_create(&th[i], NULL, mix_thread, &m[i]) != 0)
            break;
        started++;
    }
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    free(th);
    free(m);
    return started;
}

static int cmd_flood(int nthreads, int iters, const char *rw, const char *ro, int port)
{
    int started;

    if (nthreads > LOW_SLOTS) {
        fprintf(stderr, "flood: at most %d threads (one low-memory slot each)\n", LOW_SLOTS);
        return 2;
    }
    signal(SIGALRM, on_alarm);
    alarm(90);
    (void)int80_works();
    started = run_mix(nthreads, iters, rw, ro, port);
    alarm(0);
    printf("threads %d\n", started);
    print_tally();
    return 0;
}

static int cmd_die(int rounds, const char *rw, const char *ro, int port)
{
    struct timespec ts;
    int killed = 0;

    signal(SIGALRM, on_alarm);
    alarm(120);
    (void)int80_works();
    for (int r = 0; r < rounds; r++) {
        pid_t p = fork();
        if (p == 0) {
            run_mix(8, 1000000, rw, ro, port);
            _exit(0);
        }
        ts.tv_sec = 0;
        ts.tv_nsec = (long)(r % 3) * 1000000L;
        nanosleep(&ts, NULL);
        if (kill(p, SIGKILL) == 0)
            killed++;
        waitpid(p, NULL, 0);
    }
    /* after them all, one more of each, answered */
    memset(tally, 0, sizeof(tally));
    run_mix(4, 3, rw, ro, port);
    alarm(0);
    printf("killed %d\n", killed);
    print_tally();
    return 0;
}

/* ------------------------------------------------------------------------ */
/* swap                                                                      */

static struct sockaddr_in shared_sa;
static atomic_int stop_swap;
static int swap_fd = 100, host_fd = -1, aport_g, dport_g;

static void *swapper(void *arg)
{
    unsigned k = 0;
    (void)arg;
    while (!atomic_load(&stop_swap)) {
        int f;
        k++;
        if (k & 1) {
            if (host_fd >= 0)
                dup2(host_fd, swap_fd);
        } else {
            f = socket(AF_INET, SOCK_STREAM, 0);
            if (f >= 0) {
                dup2(f, swap_fd);
                close(f);
            }
        }
        switch (k % 3) {
        case 0:
            shared_sa.sin_family = AF_INET;
            shared_sa.sin_port = htons((uint16_t)aport_g);
            break;
        case 1:
            shared_sa.sin_family = AF_INET;
            shared_sa.sin_port = htons((uint16_t)dport_g);
            break;
        default:
            shared_sa.sin_family = AF_UNSPEC;
            break;
        }
    }
    return NULL;
}

static int cmd_swap(int secs, int aport, int dport)
{
    struct sockaddr_in a = lo_addr(aport), d = lo_addr(dport);
    pthread_t th;
    time_t end;
    long tries = 0, connected = 0, unspec_ok = 0, fastopen_ok = 0;
    int h;

    aport_g = aport;
    dport_g = dport;
    shared_sa = lo_addr(aport);
    signal(SIGALRM, on_alarm);
    alarm((unsigned)secs + 60);
    h = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(h, (struct sockaddr *)&a, sizeof(a)) == 0)
        host_fd = h;
    printf("first-connect %s\n", host_fd >= 0 ? "ok" : res(-1, errno));
    if (host_fd < 0) {
        /* not transparent mode: a TCP socket of the host's on stdin (a
         * guarded run) is the one to swap in */
        int type = 0;
        socklen_t tl = sizeof(type);
        close(h);
        if (getsockopt(0, SOL_SOCKET, SO_TYPE, &type, &tl) == 0 && type == SOCK_STREAM)
            host_fd = 0;
        printf("stdin-socket %s\n", host_fd == 0 ? "yes" : "no");
    }
    pthread_create(&th, NULL, swapper, NULL);
    end = time(NULL) + secs;
    while (time(NULL) < end) {
        struct sockaddr_in copy;
        long rc;
        tries++;
        rc = connect(swap_fd, (struct sockaddr *)&shared_sa, sizeof(shared_sa));
        memcpy(&copy, &shared_sa, sizeof(copy));
        (void)copy;
        if (rc == 0)
            connected++;
        /* a disconnect, then a send that connects */
        {
            struct sockaddr un = {.sa_family = AF_UNSPEC};
            if (connect(swap_fd, &un, sizeof(un)) == 0)
                unspec_ok++;
        }
        rc = sendto(swap_fd, "x", 1, MSG_FASTOPEN | MSG_DONTWAIT | MSG_NOSIGNAL,
                    (struct sockaddr *)&d, sizeof(d));
        if (rc >= 0 || errno == EINPROGRESS)
            fastopen_ok++;
    }
    atomic_store(&stop_swap, 1);
    pthread_join(th, NULL);
    alarm(0);
    if (host_fd >= 0) {
        /* H itself, no race: a disconnect and a send that connects */
        struct sockaddr un = {.sa_family = AF_UNSPEC};
        long rc = connect(host_fd, &un, sizeof(un));
        printf("unspec-host %s\n", res(rc, errno));
        rc = sendto(host_fd, "x", 1, MSG_FASTOPEN | MSG_DONTWAIT | MSG_NOSIGNAL,
                    (struct sockaddr *)&d, sizeof(d));
        printf("fastopen-host %s\n", rc >= 0 || errno == EINPROGRESS ? "ok" : res(-1, errno));
    }
    printf("swap tries=%ld connected=%ld unspec_ok=%ld fastopen_sent=%ld\n", tries, connected,
           unspec_ok, fastopen_ok);
    return 0;
}

/* A whole decimal number argument; anything else ends the program (2). */
static int num(const char *s)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < -2147483647L || v > 2147483647L) {
        fprintf(stderr, "rt7_notify: not a number: '%s'\n", s);
        exit(2);
    }
    return (int)v;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    setup_low();
    if (argc == 5 && strcmp(argv[1], "abi") == 0)
        return cmd_abi(argv[2], argv[3], num(argv[4]));
    if (argc == 7 && strcmp(argv[1], "flood") == 0)
        return cmd_flood(num(argv[2]), num(argv[3]), argv[4], argv[5], num(argv[6]));
    if (argc == 6 && strcmp(argv[1], "die") == 0)
        return cmd_die(num(argv[2]), argv[3], argv[4], num(argv[5]));
    if (argc == 5 && strcmp(argv[1], "swap") == 0)
        return cmd_swap(num(argv[2]), num(argv[3]), num(argv[4]));
    fprintf(stderr, "usage: see the comment at the top of rt7_notify.c\n");
    return 2;
}
