/* bridge/listener.c - listening sockets for tcp:, unix: and fd: endpoints.
 *
 * Every kind ends the same way: a listening socket fd that a uv_tcp_t or
 * uv_pipe_t adopts (uv_tcp_open / uv_pipe_open) before uv_listen(). The
 * sockets are made with plain syscalls so that every error before that point
 * is reported synchronously with nothing to close, and so that libuv never
 * owns the unix socket's path (uv_pipe_bind() would make uv_close() unlink
 * the path unconditionally, even when the file there is no longer ours).
 *
 * Unix socket paths (security):
 *   - the parent directory (followed) must be owned by our euid or root, and
 *     not group- or other-writable unless it is sticky (like /tmp): otherwise
 *     someone else could swap the socket file under us;
 *   - the path itself is lstat()ed and never followed: a symlink is refused
 *     and left alone; a socket owned by us that nobody accepts on (connect:
 *     ECONNREFUSED) is stale and unlinked; a live socket, one owned by
 *     someone else, and anything else (file, directory, fifo) are refused;
 *   - bind() runs under umask 0177, so the file is 0600 from birth (no window
 *     in which others may connect); the mode is checked after bind and fixed
 *     with chmod() if a filesystem did otherwise;
 *   - listener_close() unlinks the path only if it is still the socket we
 *     created (same st_dev and st_ino).
 * umask() is process-wide: open unix listeners from one thread at a time.
 *
 * Pausing. libuv has no "stop accepting": when the connection callback does
 * not uv_accept(), libuv stops watching the socket and keeps the one
 * connection it took (accepted_fd) until uv_accept() is called. A paused
 * listener relies on that: the connection that arrives while paused is held,
 * everything after it waits in the kernel backlog, and listener_resume()
 * hands the held one to the callback, which re-arms the watcher.
 *
 * TCP_NODELAY. TCP listening sockets get TCP_NODELAY (best effort). Linux
 * copies a listener's socket options to the sockets it accepts, so every
 * accepted connection has it without a setsockopt() of its own;
 * listener_nodelay() tells the owner, which passes it on to the relay
 * (relay_side.nodelay).
 */
#define _DEFAULT_SOURCE /* SO_REUSEPORT */
#include "bridge/bridge.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "policy/policy.h"

#include "common/common.h"

#define LISTENER_BACKLOG 511

#ifndef S_ISVTX
#define S_ISVTX 01000 /* XSI, not in plain POSIX.1-2008 headers */
#endif

struct listener {
    union bridge_stream u;
    int kind; /* RELAY_TCP or RELAY_PIPE */
    listener_cb cb;
    void *arg;
    unsigned paused : 1;
    unsigned held : 1; /* libuv holds a connection the callback left */
    unsigned in_cb : 1;
    unsigned accepted : 1; /* listener_accept() ran during the callback */
    unsigned closing : 1;
    unsigned own_file : 1; /* path/dev/ino: the unix socket file we created */
    unsigned has_addr : 1;
    unsigned nodelay : 1;    /* the listening socket has TCP_NODELAY (accepted ones inherit it) */
    struct policy_addr addr; /* has_addr: the bound TCP address */
    uint16_t port;
    dev_t dev;
    ino_t ino;
    char path[ENDPOINT_PATH_MAX];
    void (*done)(void *arg);
    void *done_arg;
};

static int uv_errno(void)
{
    return -errno; /* libuv's UV_E* are negated errno values on Unix */
}

/* ------------------------------------------------------------------------ */
/* TCP                                                                       */

/* Sets TCP_NODELAY on a TCP listening socket, for the sockets it accepts:
 * 1 when they will have it (Linux: accept() copies it), else 0. */
static int listen_nodelay(int fd)
{
#ifdef __linux__
    int on = 1;

    return setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on)) == 0;
#else
    (void)fd;
    return 0;
#endif
}

static int open_tcp(const struct endpoint *ep, int *out, const char **why)
{
    struct sockaddr_storage ss;
    socklen_t sslen;
    int fd, on = 1, rc;

    endpoint_sockaddr(&ep->addr, ep->port, &ss, &sslen);
    fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        *why = "cannot create the socket";
        return uv_errno();
    }
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)) < 0) {
        *why = "cannot set SO_REUSEADDR";
        goto fail;
    }
    if (ep->reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof(on)) < 0) {
        *why = "cannot set SO_REUSEPORT";
        goto fail;
    }
    if (ss.ss_family == AF_INET6 &&
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof(on)) < 0) {
        *why = "cannot set IPV6_V6ONLY";
        goto fail;
    }
    if (bind(fd, (struct sockaddr *)&ss, sslen) < 0) {
        *why = errno == EADDRINUSE      ? "the address is already in use"
               : errno == EADDRNOTAVAIL ? "the address is not one of this host's"
               : errno == EACCES        ? "permission denied (a port below 1024?)"
                                        : "cannot bind";
        goto fail;
    }
    if (listen(fd, LISTENER_BACKLOG) < 0) {
        *why = "cannot listen";
        goto fail;
    }
    *out = fd;
    return 0;
fail:
    rc = uv_errno();
    close(fd);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Unix sockets                                                              */

/* The directory part of path ("." for a bare name, "/" for "/x"). */
static void parent_dir(const char *path, char *dir, size_t len)
{
    const char *slash = strrchr(path, '/');
    size_t n;

    if (slash == NULL) {
        memcpy(dir, ".", 2);
        return;
    }
    n = (size_t)(slash - path);
    if (n == 0)
        n = 1; /* "/x" */
    if (n >= len)
        n = len - 1;
    memcpy(dir, path, n);
    dir[n] = '\0';
}

static int check_parent(const char *path, const char **why)
{
    char dir[ENDPOINT_PATH_MAX];
    struct stat st;

    parent_dir(path, dir, sizeof(dir));
    if (stat(dir, &st) < 0) {
        int rc = uv_errno();
        *why = rc == UV_ENOENT ? "the socket's directory does not exist"
                               : "cannot stat the socket's directory";
        return rc;
    }
    if (!S_ISDIR(st.st_mode)) {
        *why = "the socket's parent is not a directory";
        return UV_ENOTDIR;
    }
    if (st.st_uid != geteuid() && st.st_uid != 0) {
        *why = "the socket's directory belongs to another user";
        return UV_EPERM;
    }
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (st.st_mode & S_ISVTX) == 0) {
        *why = "the socket's directory is writable by others and not sticky";
        return UV_EPERM;
    }
    return 0;
}

static void fill_sun(struct sockaddr_un *sun, const char *path)
{
    memset(sun, 0, sizeof(*sun));
    sun->sun_family = AF_UNIX;
    memcpy(sun->sun_path, path, strlen(path) + 1); /* fits: endpoint_parse */
}

/* Is someone accepting on the socket at path? 1 yes, 0 no (stale), < 0 we
 * cannot tell. Non-blocking, so a full backlog does not hang us (EAGAIN:
 * someone listens). */
static int socket_is_live(const char *path)
{
    struct sockaddr_un sun;
    int fd, rc;

    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return uv_errno();
    fill_sun(&sun, path);
    if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0 || errno == EAGAIN ||
        errno == EINPROGRESS)
        rc = 1;
    else if (errno == ECONNREFUSED)
        rc = 0;
    else
        rc = uv_errno();
    close(fd);
    return rc;
}

/* Makes room for the socket at path, or says why not. */
static int clear_path(const char *path, const char **why)
{
    struct stat st;
    int live;

    if (lstat(path, &st) < 0) {
        if (errno == ENOENT)
            return 0;
        *why = "cannot lstat the socket path";
        return uv_errno();
    }
    if (S_ISLNK(st.st_mode)) {
        *why = "a symlink is at the socket path (not followed, not removed)";
        return UV_EEXIST;
    }
    if (!S_ISSOCK(st.st_mode)) {
        *why = "a file that is not a socket is at the path (not removed)";
        return UV_EEXIST;
    }
    if (st.st_uid != geteuid()) {
        *why = "a socket owned by another user is at the path (not removed)";
        return UV_EEXIST;
    }
    live = socket_is_live(path);
    if (live > 0) {
        *why = "another process is listening on the socket";
        return UV_EADDRINUSE;
    }
    if (live < 0) {
        *why = "cannot tell whether the existing socket is in use (not removed)";
        return live;
    }
    if (unlink(path) < 0 && errno != ENOENT) {
        *why = "cannot remove the stale socket";
        return uv_errno();
    }
    return 0;
}

static int open_unix(struct listener *l, const struct endpoint *ep, int *out, const char **why)
{
    struct sockaddr_un sun;
    struct stat st;
    size_t len = strlen(ep->path);
    mode_t old;
    int fd, rc, bound = 0;

    if (len == 0 || ep->path[len - 1] == '/') {
        *why = "the socket path names a directory";
        return UV_EINVAL;
    }
    rc = check_parent(ep->path, why);
    if (rc < 0)
        return rc;
    rc = clear_path(ep->path, why);
    if (rc < 0)
        return rc;

    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        *why = "cannot create the socket";
        return uv_errno();
    }
    fill_sun(&sun, ep->path);
    old = umask(0177);
    rc = bind(fd, (struct sockaddr *)&sun, (socklen_t)sizeof(sun));
    if (rc < 0)
        rc = uv_errno();
    umask(old);
    if (rc < 0) {
        *why = rc == UV_EADDRINUSE ? "something appeared at the socket path while binding"
                                   : "cannot bind";
        goto fail;
    }
    bound = 1;
    if (lstat(ep->path, &st) < 0 || !S_ISSOCK(st.st_mode)) {
        rc = UV_EIO;
        *why = "the socket file vanished after bind";
        bound = 0;
        goto fail;
    }
    if ((st.st_mode & 07777) != 0600 && chmod(ep->path, 0600) < 0) {
        rc = uv_errno();
        *why = "cannot make the socket file mode 0600";
        goto fail;
    }
    if (listen(fd, LISTENER_BACKLOG) < 0) {
        rc = uv_errno();
        *why = "cannot listen";
        goto fail;
    }
    memcpy(l->path, ep->path, len + 1);
    l->dev = st.st_dev;
    l->ino = st.st_ino;
    l->own_file = 1;
    *out = fd;
    return 0;
fail:
    if (bound)
        unlink(ep->path); /* ours: just bound, in a directory only we control */
    close(fd);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Inherited sockets                                                         */

static int check_fd(int fd, int *kind, const char **why)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(int);
    int v = 0;

    if (fd < 0 || fcntl(fd, F_GETFD) < 0) {
        *why = "the fd is not open";
        return UV_EBADF;
    }
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &len) < 0) {
        int rc = uv_errno();
        *why = rc == UV_ENOTSOCK ? "the fd is not a socket" : "cannot query the fd";
        return rc;
    }
    if (v != SOCK_STREAM) {
        *why = "the fd is not a stream socket";
        return UV_EINVAL;
    }
    len = sizeof(int);
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &len) < 0 || v == 0) {
        *why = "the fd is not a listening socket";
        return UV_EINVAL;
    }
    len = sizeof(ss);
    memset(&ss, 0, sizeof(ss));
    if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0) {
        *why = "cannot query the fd's address";
        return uv_errno();
    }
    if (ss.ss_family == AF_INET || ss.ss_family == AF_INET6) {
        *kind = RELAY_TCP;
    } else if (ss.ss_family == AF_UNIX) {
        *kind = RELAY_PIPE;
    } else {
        *why = "the fd's address family is not IPv4, IPv6 or unix";
        return UV_EAFNOSUPPORT;
    }
    /* systemd passes its sockets without close-on-exec. */
    if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
        *why = "cannot set close-on-exec on the fd";
        return uv_errno();
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The listener                                                              */

static void on_connection(uv_stream_t *server, int status)
{
    struct listener *l = container_of(server, struct listener, u.s);

    if (status < 0 || l->closing)
        return; /* accept() failed (EMFILE, ...): nothing was taken */
    if (l->paused) {
        l->held = 1; /* libuv keeps it and stops watching until uv_accept() */
        return;
    }
    l->in_cb = 1;
    l->accepted = 0;
    l->cb(l, l->arg);
    l->in_cb = 0;
    if (!l->accepted && !l->closing)
        l->held = 1; /* left unaccepted: held until listener_accept/resume */
}

static void save_address(struct listener *l)
{
    struct sockaddr_storage ss;
    int len = (int)sizeof(ss);

    memset(&ss, 0, sizeof(ss));
    if (l->kind != RELAY_TCP || uv_tcp_getsockname(&l->u.tcp, (struct sockaddr *)&ss, &len) != 0)
        return;
    memset(&l->addr, 0, sizeof(l->addr));
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)(const void *)&ss;
        l->addr.family = 4;
        memcpy(l->addr.bytes, &s4->sin_addr, 4);
        l->port = ntohs(s4->sin_port);
        l->has_addr = 1;
    } else if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)(const void *)&ss;
        l->addr.family = 6;
        memcpy(l->addr.bytes, &s6->sin6_addr, 16);
        l->port = ntohs(s6->sin6_port);
        l->has_addr = 1;
    }
}

static void on_close_free(uv_handle_t *h)
{
    free(container_of(h, struct listener, u.h));
}

static void unlink_own_file(struct listener *l)
{
    struct stat st;

    if (!l->own_file)
        return;
    l->own_file = 0;
    if (lstat(l->path, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_dev == l->dev &&
        st.st_ino == l->ino)
        unlink(l->path);
}

int listener_open(struct listener **out, uv_loop_t *loop, const struct endpoint *ep, listener_cb cb,
                  void *arg, const char **why)
{
    struct listener *l;
    const char *dummy;
    int fd = -1, rc, adopted;

    if (why == NULL)
        why = &dummy;
    *why = NULL;
    if (cb == NULL) {
        *why = "no callback";
        return UV_EINVAL;
    }
    l = calloc(1, sizeof(*l));
    if (l == NULL) {
        *why = "out of memory";
        return UV_ENOMEM;
    }
    l->cb = cb;
    l->arg = arg;
    switch (ep->kind) {
    case ENDPOINT_TCP:
        l->kind = RELAY_TCP;
        rc = open_tcp(ep, &fd, why);
        break;
    case ENDPOINT_UNIX:
        l->kind = RELAY_PIPE;
        rc = open_unix(l, ep, &fd, why);
        break;
    case ENDPOINT_FD:
        fd = ep->fd;
        rc = check_fd(fd, &l->kind, why);
        break;
    default:
        *why = "unknown endpoint kind";
        rc = UV_EINVAL;
        break;
    }
    if (rc < 0) {
        free(l);
        return rc;
    }

    /* From here the fd is adopted by a handle, and failures close it. These
     * calls do not fail for a fresh listening socket. */
    if (l->kind == RELAY_TCP) {
        (void)uv_tcp_init(loop, &l->u.tcp);
        rc = uv_tcp_open(&l->u.tcp, fd);
    } else {
        (void)uv_pipe_init(loop, &l->u.pipe, 0);
        rc = uv_pipe_open(&l->u.pipe, fd);
    }
    adopted = rc == 0;
    if (rc == 0 && l->kind == RELAY_TCP && listen_nodelay(fd))
        l->nodelay = 1;
    if (rc == 0)
        rc = uv_listen(&l->u.s, ep->kind == ENDPOINT_FD ? SOMAXCONN : LISTENER_BACKLOG,
                       on_connection);
    if (rc < 0) {
        *why = "libuv cannot listen on the socket";
        unlink_own_file(l);
        if (!adopted && ep->kind != ENDPOINT_FD)
            close(fd);
        uv_close(&l->u.h, on_close_free); /* frees l: the caller runs the loop */
        return rc;
    }
    save_address(l);
    *out = l;
    return 0;
}

int listener_fd(const struct listener *l)
{
    uv_os_fd_t fd;

    if (uv_fileno(&l->u.h, &fd) != 0)
        return -1;
    return fd;
}

int listener_kind(const struct listener *l)
{
    return l->kind;
}

int listener_nodelay(const struct listener *l)
{
    return l->nodelay;
}

int listener_accept(struct listener *l, uv_stream_t *client)
{
    int rc;

    if (l->closing)
        return UV_ECANCELED;
    rc = uv_accept(&l->u.s, client);
    if (rc == 0) {
        l->held = 0;
        if (l->in_cb)
            l->accepted = 1;
    }
    return rc;
}

void listener_pause(struct listener *l)
{
    l->paused = 1;
}

void listener_resume(struct listener *l)
{
    if (!l->paused || l->closing)
        return;
    l->paused = 0;
    if (l->held && !l->in_cb) {
        /* Hand the held connection over; accepting it re-arms the watcher. */
        l->held = 0;
        on_connection(&l->u.s, 0);
    }
}

int listener_address(const struct listener *l, struct policy_addr *a, uint16_t *port)
{
    if (!l->has_addr)
        return UV_EINVAL;
    *a = l->addr;
    *port = l->port;
    return 0;
}

static void on_close(uv_handle_t *h)
{
    struct listener *l = container_of(h, struct listener, u.h);

    if (l->done != NULL)
        l->done(l->done_arg);
    free(l);
}

void listener_close(struct listener *l, void (*done)(void *arg), void *arg)
{
    if (l == NULL || l->closing)
        return;
    l->closing = 1;
    l->done = done;
    l->done_arg = arg;
    unlink_own_file(l); /* first, so nobody new finds a dying socket */
    uv_close(&l->u.h, on_close);
}
