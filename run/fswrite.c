/* run/fswrite.c - the write report's host side (issue 15): the handler
 * of the write syscalls inner's filter notifies (the filter's half, the
 * rules and the table of syscalls, is sandbox/fswatch.c). The listener is
 * run/notify.c's, which hands each of these syscalls here. For each one
 * the host:
 *   1. reads the path(s) from its memory (process_vm_readv), then checks the notification is
 *      still valid (SECCOMP_IOCTL_NOTIF_ID_VALID: PID is still the caller);
 *   2. makes the path absolute in the sandbox's view (the caller's cwd or
 *      dirfd through /proc/PID/cwd, /proc/PID/fd/N) and looks it up below
 *      the caller's root (/proc/PID/root, openat2 RESOLVE_IN_ROOT, so the
 *      sandbox's symlinks resolve as they do for the caller);
 *   3. decides whether the sandbox refuses the write: the target (or, when
 *      it does not exist yet, its parent directory) is on a read-only mount
 *      (fstatvfs ST_RDONLY). That is how bwrap enforces the filesystem
 *      policy (the read-only root, denyWrite, protected files, the
 *      read-only empty directories over absent protected paths);
 *   4. reports it if so, and always answers SECCOMP_USER_NOTIF_FLAG_CONTINUE:
 *      the kernel then runs the call as if there were no notification.
 *
 * CONTINUE is safe here (seccomp_unotify(2) warns against it for decisions)
 * because nothing is decided: enforcement stays with the mounts, and the
 * notification only reports (sandbox/fswatch.c says more). */
#define _GNU_SOURCE
#include "run/fswrite.h"
#include "run/notify.h"
#include "sandbox/fswatch.h"

#include "common/common.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <unistd.h>

#define FSW_PATH_MAX 4096
#define FSW_OPENAT2_TRIES 64 /* lookup(): tries while openat2 says EAGAIN */
#define FSW_X32_BIT 0x40000000 /* __X32_SYSCALL_BIT */

/* The calls[] entry of (arch, nr); a small cache in front of libseccomp's
 * table walk. NULL: not a write syscall. */
static const struct fsw_call *call_of(uint32_t arch, int nr)
{
    static struct {
        uint32_t arch;
        int nr;
        int idx; /* calls[] index + 1, or 0 none; slot unused when arch == 0 */
    } cache[128];
    size_t slot = ((size_t)arch * 31u + (size_t)(unsigned)nr) % 128u;
    size_t ncalls;
    const struct fsw_call *calls = sb_fswatch_calls(&ncalls), *found = NULL;
    char *name;

    if (cache[slot].arch == arch && cache[slot].nr == nr)
        return cache[slot].idx > 0 ? &calls[cache[slot].idx - 1] : NULL;
    /* x32 calls arrive with x86-64's audit arch and __X32_SYSCALL_BIT set:
     * named by libseccomp's x32 table (rt-7) */
    name = seccomp_syscall_resolve_num_arch(
        arch == SCMP_ARCH_X86_64 && (nr & FSW_X32_BIT) ? SCMP_ARCH_X32 : arch, nr);
    cache[slot].arch = arch;
    cache[slot].nr = nr;
    cache[slot].idx = 0;
    for (size_t i = 0; name != NULL && i < ncalls; i++) {
        if (strcmp(name, calls[i].name) == 0) {
            found = &calls[i];
            cache[slot].idx = (int)i + 1;
            break;
        }
    }
    free(name);
    return found;
}

ssize_t fsw_peek(int pid, uint64_t addr, void *buf, size_t len)
{
    struct iovec local = {buf, len};
    struct iovec remote = {(void *)(uintptr_t)addr, len};

    return process_vm_readv(pid, &local, 1, &remote, 1, 0);
}

/* A NUL-terminated string at ADDR in PID (page by page, so a string near
 * the end of a mapping reads). 0, or -1. */
static int read_str(int pid, uint64_t addr, char *buf, size_t cap)
{
    size_t got = 0;
    const size_t page = 4096;

    while (got < cap) {
        size_t want = page - (size_t)((addr + got) % page);
        ssize_t n;

        if (want > cap - got)
            want = cap - got;
        n = fsw_peek(pid, addr + got, buf + got, want);
        if (n <= 0)
            return -1;
        if (memchr(buf + got, '\0', (size_t)n) != NULL)
            return 0;
        got += (size_t)n;
    }
    return -1; /* longer than PATH_MAX: the kernel refuses it (ENAMETOOLONG) */
}

/* Lexically tidies an absolute path in place: no "//", "." or "..". */
static void tidy(char *p)
{
    size_t len = strlen(p);
    char *buf = malloc(len + 2);
    size_t out = 0;
    const char *in = p;

    if (buf == NULL)
        return;
    while (*in != '\0') {
        const char *seg;
        size_t sl;

        while (*in == '/')
            in++;
        seg = in;
        while (*in != '\0' && *in != '/')
            in++;
        sl = (size_t)(in - seg);
        if (sl == 0 || (sl == 1 && seg[0] == '.'))
            continue;
        if (sl == 2 && seg[0] == '.' && seg[1] == '.') {
            while (out > 0 && buf[out - 1] != '/')
                out--;
            if (out > 0)
                out--; /* the '/' before the dropped segment */
            continue;
        }
        buf[out++] = '/';
        memcpy(buf + out, seg, sl);
        out += sl;
    }
    if (out == 0)
        buf[out++] = '/';
    buf[out] = '\0';
    memcpy(p, buf, out + 1); /* never longer than the input */
    free(buf);
}

/* The absolute path (sandbox's view) of PATH relative to DFD of PID. 0, or
 * -1 when it cannot be known (a dirfd that is not a directory). */
static int absolute(int pid, long dfd, const char *path, char *out, size_t cap)
{
    char link[64], base[FSW_PATH_MAX];
    ssize_t n;

    if (path[0] == '/') {
        if (strlen(path) >= cap)
            return -1;
        memcpy(out, path, strlen(path) + 1);
        return 0;
    }
    if (dfd == AT_FDCWD || dfd == -1)
        snprintf(link, sizeof(link), "/proc/%d/cwd", pid);
    else
        snprintf(link, sizeof(link), "/proc/%d/fd/%ld", pid, dfd);
    n = readlink(link, base, sizeof(base) - 1);
    if (n <= 0)
        return -1;
    base[n] = '\0';
    if (base[0] != '/')
        return -1; /* pipe:[...], anon_inode:... */
    if ((size_t)snprintf(out, cap, "%s%s%s", base, path[0] != '\0' ? "/" : "", path) >= cap)
        return -1;
    return 0;
}

static int lookup(int rootfd, const char *abs, int follow)
{
    struct open_how how;
    int fd;

    memset(&how, 0, sizeof(how));
    how.flags = (uint64_t)(O_PATH | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW));
    how.resolve = RESOLVE_IN_ROOT;
    /* EAGAIN: a ".." was resolved while a mount or rename happened anywhere
     * on the machine (openat2(2): the kernel cannot vouch that it stayed
     * below the root), and the call may simply be made again. Another
     * sandbox starting is enough: without the retry, a refused write through
     * "../" went unreported now and then on a busy machine */
    for (int tries = 0; tries < FSW_OPENAT2_TRIES; tries++) {
        fd = (int)syscall(SYS_openat2, rootfd, abs, &how, sizeof(how));
        if (fd >= 0 || errno != EAGAIN)
            break;
    }
    if (fd < 0 && errno == ENOSYS) {
        /* no openat2 (valgrind 3.19 does not know it): below the root
         * all the same, but an absolute symlink on the way resolves
         * against the host's root (the report may then be wrong) */
        fd = openat(rootfd, abs[0] == '/' ? abs + 1 : abs,
                    O_PATH | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW));
        if (fd < 0 && abs[0] == '/' && abs[1] == '\0')
            fd = dup(rootfd);
    }
    return fd;
}

static int on_ro_mount(int fd)
{
    struct statvfs sv;

    return fstatvfs(fd, &sv) == 0 && (sv.f_flag & ST_RDONLY) != 0;
}

static int file_rules = -1; /* fsw_file_rules; -1: as the kernel allows */

void fsw_file_rules(int on)
{
    file_rules = on ? -1 : 0;
}

/* Does inner's Landlock domain (landlock.c) apply here? It refuses opening
 * a FIFO or device node for writing outside the writable mounts, which a
 * read-only mount alone allows; not with allowNestedUserNamespaces. */
static int landlock_on(void)
{
    if (file_rules < 0)
        file_rules = sb_landlock_abi() >= 1;
    return file_rules;
}

/* Is ST one of PID's standard descriptors opened for writing (which the
 * domain leaves writable: what the user handed the command)? */
static int is_stdio(int pid, const struct stat *st)
{
    for (int i = 0; i < 3; i++) {
        char name[64], line[128];
        struct stat fst;
        unsigned long flags = 0;
        FILE *f;

        snprintf(name, sizeof(name), "/proc/%d/fd/%d", pid, i);
        if (stat(name, &fst) != 0 || fst.st_dev != st->st_dev || fst.st_ino != st->st_ino)
            continue;
        snprintf(name, sizeof(name), "/proc/%d/fdinfo/%d", pid, i);
        f = fopen(name, "re");
        if (f == NULL)
            continue;
        while (fgets(line, sizeof(line), f) != NULL)
            if (sscanf(line, "flags: %lo", &flags) == 1)
                break;
        fclose(f);
        if ((flags & O_ACCMODE) != O_RDONLY)
            return 1;
    }
    return 0;
}

/* Would the sandbox refuse this write to ABS? */
static int refused(int pid, int rootfd, const char *abs, enum fsw_kind kind, uint64_t oflags)
{
    int follow = kind == FSW_OPEN || kind == FSW_CHANGE;
    int fd = lookup(rootfd, abs, follow);
    char parent[FSW_PATH_MAX];
    char *slash;
    int ro;

    if (fd >= 0) {
        struct stat st;
        int special = fstat(fd, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode) &&
                      !S_ISLNK(st.st_mode);

        ro = on_ro_mount(fd);
        close(fd);
        if (kind == FSW_CREATE)
            return 0; /* EEXIST, whatever the mount */
        if (kind == FSW_OPEN) {
            /* O_CREAT alone opens an existing file read-only */
            if ((oflags & (O_WRONLY | O_RDWR | O_TRUNC)) == 0)
                return 0;
            /* a device or FIFO opens for writing on a read-only mount; the
             * Landlock domain refuses it there unless it is the command's
             * own stdin, stdout or stderr */
            if (special)
                return ro && landlock_on() && !is_stdio(pid, &st);
        }
        return ro;
    }
    if (errno != ENOENT || kind == FSW_CHANGE || kind == FSW_REMOVE ||
        (kind == FSW_OPEN && (oflags & O_CREAT) == 0))
        return 0; /* the call fails on its own */
    if (strlen(abs) >= sizeof(parent))
        return 0;
    memcpy(parent, abs, strlen(abs) + 1);
    slash = strrchr(parent, '/');
    if (slash == NULL)
        return 0;
    if (slash == parent)
        slash[1] = '\0';
    else
        *slash = '\0';
    fd = lookup(rootfd, parent, 1);
    if (fd < 0)
        return 0;
    ro = on_ro_mount(fd);
    close(fd);
    return ro;
}

static void respond_continue(int notify_fd, uint64_t id)
{
    struct seccomp_notif_resp resp;

    memset(&resp, 0, sizeof(resp));
    resp.id = id;
    resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
    /* ENOENT: the caller is gone (a signal, or it was killed) */
    (void)ioctl(notify_fd, SECCOMP_IOCTL_NOTIF_SEND, &resp);
}

/* One path of the call: read, made absolute, judged, reported. */
struct one {
    long dfd;
    uint64_t addr;
    enum fsw_kind kind;
    char path[FSW_PATH_MAX];
    int have;
};

/* Reads the call's paths (and openat2's flags) from the caller's memory.
 * 0, or -1 when its memory cannot be read. */
static int read_args(int pid, const struct seccomp_notif *n, const struct fsw_call *c,
                     struct one *p, uint64_t *oflags)
{
    int any = 0;

    memset(p, 0, 2 * sizeof(*p));
    for (int i = 0; i < 2; i++) {
        int di = i == 0 ? c->dfd : c->dfd2, pi = i == 0 ? c->path : c->path2;
        if (pi < 0)
            continue;
        p[i].dfd = di < 0 ? AT_FDCWD : (long)(int)n->data.args[di];
        p[i].kind = (enum fsw_kind)(i == 0 ? c->kind : c->kind2);
        p[i].addr = n->data.args[pi];
        if (p[i].addr == 0) /* utimensat(fd, NULL, ...): the descriptor itself */
            p[i].have = 1;
        else
            p[i].have = read_str(pid, p[i].addr, p[i].path, sizeof(p[i].path)) == 0;
        any |= p[i].have;
    }
    *oflags = 0;
    if (c->flags >= 0) {
        *oflags = n->data.args[c->flags];
    } else if (c->flags == -2) { /* openat2: struct open_how, flags first */
        uint64_t f;
        if (fsw_peek(pid, n->data.args[2], &f, sizeof(f)) != (ssize_t)sizeof(f))
            return -1;
        *oflags = f;
    } else if (c->kind == FSW_OPEN) {
        *oflags = O_CREAT | O_WRONLY | O_TRUNC;
    }
    return any ? 0 : -1;
}

static void inspect(int notify_fd, const struct seccomp_notif *n, const struct fsw_call *c,
                    fsw_report_fn report, void *ctx)
{
    struct one p[2];
    char rootname[64], abs[FSW_PATH_MAX * 2];
    uint64_t oflags = 0;
    int rootfd;

    if (read_args((int)n->pid, n, c, p, &oflags) < 0)
        return;
    /* what we read is what the caller passed only if it is still waiting */
    if (ioctl(notify_fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &n->id) != 0)
        return;
    if (c->flags == -2 && (oflags & (O_WRONLY | O_RDWR | O_CREAT | O_TRUNC)) == 0)
        return;
    snprintf(rootname, sizeof(rootname), "/proc/%u/root", (unsigned)n->pid);
    rootfd = open(rootname, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (rootfd < 0)
        return;
    for (int i = 0; i < 2; i++) {
        if (!p[i].have || absolute((int)n->pid, p[i].dfd, p[i].path, abs, sizeof(abs)) < 0)
            continue;
        if (refused((int)n->pid, rootfd, abs, p[i].kind, oflags)) {
            tidy(abs);
            report(ctx, abs, c->name);
            break; /* one report per call */
        }
    }
    close(rootfd);
}

int fsw_handle(int notify_fd, const struct seccomp_notif *n, fsw_report_fn report, void *ctx)
{
    const struct fsw_call *c = call_of(n->data.arch, n->data.nr);

    if (c == NULL)
        return 0;
    inspect(notify_fd, n, c, report, ctx);
    respond_continue(notify_fd, n->id);
    return 1;
}

int fsw_route(struct run_notify *nt, int (*fn)(void *, int, const struct seccomp_notif *),
              void *ctx)
{
    size_t narch, ncalls;
    const uint32_t *arches = sb_seccomp_arches(&narch); /* the filter's */
    const struct fsw_call *calls = sb_fswatch_calls(&ncalls);
    int rc = 0;

    /* x32's calls arrive with x86-64's audit arch (SCMP_ARCH_X32 is a
     * libseccomp token no notification carries) and their own numbers
     * (__X32_SYSCALL_BIT): routed under x86-64's arch (rt-7: under
     * SCMP_ARCH_X32 they got the fallback, EPERM in transparent mode) */
    for (size_t a = 0; a < narch && rc == 0; a++)
        for (size_t i = 0; i < ncalls && rc == 0; i++)
            rc = run_notify_route(nt, arches[a] == SCMP_ARCH_X32 ? SCMP_ARCH_X86_64 : arches[a],
                                  seccomp_syscall_resolve_name_arch(arches[a], calls[i].name), fn,
                                  ctx);
    return rc;
}

/* ------------------------------------------------------------------------ */

static int is_protected(const char *dest)
{
    const char *const *names = sb_protect_names();
    size_t dl = strlen(dest);

    for (size_t i = 0; names[i] != NULL; i++) {
        size_t nl = strlen(names[i]);
        if (nl > 0 && names[i][nl - 1] == '/')
            nl--;
        /* DEST ends with "/NAME" */
        if (dl > nl && dest[dl - nl - 1] == '/' && strncmp(dest + dl - nl, names[i], nl) == 0)
            return 1;
    }
    return 0;
}

static int covers(const char *dest, const char *path)
{
    size_t dl = strlen(dest);

    if (strcmp(dest, "/") == 0)
        return 1;
    return strncmp(dest, path, dl) == 0 && (path[dl] == '\0' || path[dl] == '/');
}

const char *fsw_reason(const struct sb_strv *argv, const struct sb_strv *ro_why,
                       const char *path)
{
    const char *dest = NULL;
    int ro = 1; /* the covering mount is read-only */

    for (size_t i = 0; argv != NULL && i < argv->n && argv->v[i] != NULL; i++) {
        const char *a = argv->v[i];
        const char *d = NULL;
        int r = 0;

        if (strcmp(a, "--") == 0)
            break;
        if ((strcmp(a, "--ro-bind") == 0 || strcmp(a, "--ro-bind-try") == 0 ||
             strcmp(a, "--bind") == 0 || strcmp(a, "--bind-try") == 0 ||
             strcmp(a, "--dev-bind") == 0) &&
            i + 2 < argv->n) {
            d = argv->v[i + 2];
            r = strncmp(a, "--ro-", 5) == 0;
            i += 2;
        } else if ((strcmp(a, "--tmpfs") == 0 || strcmp(a, "--dev") == 0 ||
                    strcmp(a, "--proc") == 0 || strcmp(a, "--remount-ro") == 0) &&
                   i + 1 < argv->n) {
            d = argv->v[i + 1];
            r = strcmp(a, "--remount-ro") == 0;
            i += 1;
        }
        if (d != NULL && covers(d, path)) {
            dest = d;
            ro = r;
        }
    }
    /* a writable mount covers it: refused by something below (a read-only
     * mount of the host's, bwrap's /proc): call it read-only */
    if (dest == NULL || !ro || strcmp(dest, "/") == 0 || strncmp(dest, "/proc", 5) == 0 ||
        strncmp(dest, "/sys", 4) == 0)
        return "read-only";
    for (size_t i = 0; ro_why != NULL && i + 1 < ro_why->n; i += 2)
        if (strcmp(ro_why->v[i], dest) == 0)
            return ro_why->v[i + 1];
    if (is_protected(dest))
        return "protected";
    return "read-only"; /* a bind of sluice's own (its binary, resolv.conf) */
}

const char *fsw_preflight(void)
{
    struct utsname u;
    unsigned maj = 0, min = 0;

    if (uname(&u) == 0 && sscanf(u.release, "%u.%u", &maj, &min) == 2 &&
        (maj < 5 || (maj == 5 && min < 6)))
        return "seccomp user notification with SECCOMP_USER_NOTIF_FLAG_CONTINUE and openat2 "
               "(Linux 5.6+)";
    {
        /* libseccomp sizes its buffers with seccomp(SECCOMP_GET_NOTIF_SIZES)
         * (Linux 5.0; missing under valgrind 3.19) */
        struct seccomp_notif *n = NULL;
        struct seccomp_notif_resp *r = NULL;
        if (seccomp_notify_alloc(&n, &r) < 0)
            return "seccomp(SECCOMP_GET_NOTIF_SIZES)";
        seccomp_notify_free(n, r);
    }
    /* a listener already taken by a filter around sluice (the kernel
     * allows one per filter chain) is found by inner as it loads its
     * filter, which then leaves the report out (issue 25: no probe child
     * before every run) */
    return NULL;
}
