/* proxy/control.c - `--control-fd N`: new network policies while running.
 *
 * The reference's protocol (srt 0.0.83): the descriptor carries JSON lines,
 * each a complete settings document. A valid line replaces the network
 * policy (allowedDomains, deniedDomains, deniedDomainReasons,
 * deniedResolvedAddresses, parentProxy, the request-level keys, ...) for
 * connections that start from then on; connections already open keep the
 * policy they started with. An invalid line (bad JSON, an unknown key, a bad
 * pattern) is reported with its line number and ignored: the policy in force
 * stays. Filesystem rules are fixed when the sandbox starts and are not
 * changed by a line. The managed file (/etc/sluice/managed.json) is applied
 * over every line, as over every other layer, so a line cannot lift its
 * rules. End of file stops reading; the run goes on with the last policy.
 *
 * Any readable descriptor will do, as with the reference: a pipe, a FIFO or
 * a socket is polled on the loop; one that cannot be polled (a regular file,
 * /dev/null) is read to its end on libuv's thread pool, a line at a time as
 * it comes.
 *
 * The owner (the run launcher or the proxy server) supplies what to do with
 * a compiled policy (typically: note its own listeners in it and give it to
 * egress_env_set_policy()).
 */
#include "proxy/proxy.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/common.h"
#include "policy/policy.h"

#define CONTROL_LINE_MAX (4u << 20) /* one settings document */

struct proxy_control {
    uv_pipe_t pipe; /* polled descriptors; only initialised for a file */
    uv_fs_t req;    /* a descriptor that cannot be polled: read in turn */
    int fd;         /* that descriptor (the pipe owns a polled one) */
    int reading;    /* req in flight */
    int closed;     /* the pipe's close callback ran */
    proxy_control_policy_fn fn;
    void *arg;
    FILE *report;
    const char *managed; /* managed file path, NULL: the default */
    const struct settings *fixed; /* credentials fixed at start (run), or NULL */
    char *buf;
    size_t len, cap;
    unsigned line;
    int skipping; /* an overlong line: dropping bytes up to its newline */
    unsigned applied, refused;
    int eof;
};

static void destroy(struct proxy_control *c)
{
    if (c->fd >= 0)
        close(c->fd);
    free(c->buf);
    free(c);
}

static void on_closed(uv_handle_t *h)
{
    struct proxy_control *c = h->data;

    c->closed = 1;
    if (!c->reading) /* else on_fs_read frees it */
        destroy(c);
}

static int same_list(const struct settings_list *a, const struct settings_list *b)
{
    if (a->n != b->n)
        return 0;
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->items[i].value, b->items[i].value) != 0)
            return 0;
    return 1;
}

/* Credentials are fixed when the run starts, as the filesystem rules are
 * (issue 24): the table of real values, its order and the placeholders
 * the sandbox holds were made from them. A line without "credentials"
 * keeps them (compiled with the start's); a line with the same ones is
 * taken; a line that changes them is refused. 0, or -1 with err. */
static int fixed_credentials(const struct proxy_control *c, struct settings *s,
                             struct settings_error *err)
{
    const struct settings *f = c->fixed;

    if (f == NULL)
        return 0;
    if (!s->credentials.given.set) {
        if (s->credentials.env_vars.n == 0 && s->credentials.files.n == 0 &&
            s->credentials.aws_pairs.n == 0)
            return 0;
    } else if (same_list(&s->credentials.env_vars, &f->credentials.env_vars) &&
               same_list(&s->credentials.files, &f->credentials.files) &&
               same_list(&s->credentials.aws_pairs, &f->credentials.aws_pairs) &&
               memcmp(&s->credentials.sigv4, &f->credentials.sigv4, sizeof(s->credentials.sigv4)) ==
                   0 &&
               s->credentials.plaintext.on == f->credentials.plaintext.on) {
        return 0;
    }
    snprintf(err->msg, sizeof(err->msg),
             "%s:%u:%u: credentials: fixed when the run starts (the sandbox holds placeholders "
             "made from them); a line may leave the key out or repeat it as it was, not change it",
             s->credentials.given.file != NULL ? s->credentials.given.file : "control-fd",
             s->credentials.given.line, s->credentials.given.col);
    return -1;
}

/* policy_compile of S, with the start's credentials when C fixes them and
 * the line left them out. */
static int compile_line(const struct proxy_control *c, struct settings *s, struct policy **p,
                        struct settings_error *err)
{
    int rc;

    if (c->fixed == NULL || s->credentials.given.set)
        return policy_compile(s, p, err);
    {
        /* borrowed for the compile only (it copies what it keeps) */
        __typeof__(s->credentials) mine = s->credentials;
        s->credentials = c->fixed->credentials;
        rc = policy_compile(s, p, err);
        s->credentials = mine;
    }
    return rc;
}

static void one_line(struct proxy_control *c, const char *text, size_t len)
{
    struct settings s;
    struct settings_error err;
    struct policy *p = NULL;
    char name[48];

    while (len > 0 && (text[len - 1] == '\r' || text[len - 1] == ' ' || text[len - 1] == '\t'))
        len--;
    if (len == 0)
        return;
    snprintf(name, sizeof(name), "control-fd line %u", c->line);
    settings_init(&s);
    if (settings_apply_buffer(&s, name, text, len, &err) != 0 ||
        settings_apply_managed(&s, c->managed, &err) < 0 || fixed_credentials(c, &s, &err) < 0 ||
        compile_line(c, &s, &p, &err) < 0) {
        c->refused++;
        if (c->report != NULL)
            fprintf(c->report, "sluice: control: %s; ignored, the current policy stays\n",
                    err.msg);
        settings_free(&s);
        return;
    }
    settings_free(&s);
    c->applied++;
    c->fn(c->arg, p);
}

/* Room for the next read at c->buf + c->len (possibly none: out of memory). */
static uv_buf_t room(struct proxy_control *c)
{
    if (c->cap - c->len < 65536) {
        size_t ncap = c->cap ? c->cap * 2 : 65536;
        char *nb;
        if (ncap > CONTROL_LINE_MAX + 65536)
            ncap = CONTROL_LINE_MAX + 65536;
        nb = ncap > c->cap ? realloc(c->buf, ncap) : NULL;
        if (nb != NULL) {
            c->buf = nb;
            c->cap = ncap;
        }
    }
    return uv_buf_init(c->buf + c->len, (unsigned)(c->cap - c->len));
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    *buf = room(h->data);
}

/* End of input (UV_EOF) or a read error: the last line, then no more. */
static void finish(struct proxy_control *c, int err)
{
    if (err != UV_EOF && c->report != NULL)
        fprintf(c->report, "sluice: control: reading the control descriptor: %s\n",
                uv_strerror(err));
    if (c->len > 0 && !c->skipping) { /* a last line without a newline */
        c->line++;
        one_line(c, c->buf, c->len);
    }
    c->len = 0;
    c->eof = 1;
}

/* n new bytes at c->buf + c->len: every complete line is applied. */
static void take(struct proxy_control *c, size_t n)
{
    size_t start = 0;

    c->len += n;
    for (size_t i = c->len - n; i < c->len; i++) {
        if (c->buf[i] != '\n')
            continue;
        c->line++;
        if (!c->skipping)
            one_line(c, c->buf + start, i - start);
        c->skipping = 0;
        start = i + 1;
    }
    memmove(c->buf, c->buf + start, c->len - start);
    c->len -= start;
    if (c->len > CONTROL_LINE_MAX) {
        if (!c->skipping && c->report != NULL)
            fprintf(c->report,
                    "sluice: control: line %u is longer than %u bytes; ignored\n", c->line + 1,
                    CONTROL_LINE_MAX);
        c->skipping = 1;
        c->refused++;
        c->len = 0;
    }
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
    struct proxy_control *c = st->data;

    (void)buf;
    if (n < 0) {
        finish(c, (int)n);
        uv_read_stop(st); /* the handle stays until proxy_control_close() */
        return;
    }
    take(c, (size_t)n);
}

static int read_file(struct proxy_control *c);

static void on_fs_read(uv_fs_t *req)
{
    struct proxy_control *c = container_of(req, struct proxy_control, req);
    ssize_t n = req->result;
    int rc;

    uv_fs_req_cleanup(req);
    c->reading = 0;
    if (c->closed) {
        destroy(c);
        return;
    }
    if (uv_is_closing((uv_handle_t *)&c->pipe))
        return; /* on_closed frees it */
    if (n <= 0) {
        finish(c, n == 0 ? UV_EOF : (int)n);
        return;
    }
    take(c, (size_t)n);
    rc = read_file(c);
    if (rc < 0)
        finish(c, rc);
}

static int read_file(struct proxy_control *c)
{
    uv_buf_t b = room(c);
    int rc;

    if (b.len == 0)
        return UV_ENOMEM;
    /* offset -1: from where the descriptor stands, as read(2) */
    rc = uv_fs_read(c->pipe.loop, &c->req, c->fd, &b, 1, -1, on_fs_read);
    if (rc == 0)
        c->reading = 1;
    return rc;
}

/* 1 if fd can be watched by epoll (a pipe, FIFO, socket, tty), 0 if not
 * (a regular file, /dev/null: EPERM), or a negative UV_E* error. */
static int pollable(int fd)
{
    struct epoll_event ev;
    struct stat st;
    int ep, rc;

    if (fstat(fd, &st) < 0)
        return UV_EBADF;
    if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))
        return 0;
    ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        return -errno;
    memset(&ev, 0, sizeof(ev));
    ev.events = EPOLLIN;
    rc = epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
    rc = rc == 0 ? 1 : errno == EPERM ? 0 : -errno;
    close(ep);
    return rc;
}

int proxy_control_open(struct proxy_control **out, uv_loop_t *loop, int fd, const char *managed,
                       proxy_control_policy_fn fn, void *arg, FILE *report)
{
    struct proxy_control *c;
    int rc, poll;

    if (fd < 3 || fn == NULL)
        return UV_EINVAL;
    /* never inherited by bwrap or the command */
    if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
        return UV_EBADF;
    c = calloc(1, sizeof(*c));
    if (c == NULL)
        return UV_ENOMEM;
    c->fn = fn;
    c->arg = arg;
    c->report = report;
    c->managed = managed;
    c->fd = -1;
    rc = pollable(fd);
    if (rc < 0) {
        free(c);
        return rc;
    }
    poll = rc;
    rc = uv_pipe_init(loop, &c->pipe, 0);
    if (rc < 0) {
        free(c);
        return rc;
    }
    c->pipe.data = c;
    if (poll) {
        rc = uv_pipe_open(&c->pipe, fd);
        if (rc == 0)
            rc = uv_read_start((uv_stream_t *)&c->pipe, on_alloc, on_read);
    } else {
        c->fd = fd;
        rc = read_file(c);
        if (rc < 0)
            c->fd = -1; /* the caller still owns it */
    }
    if (rc < 0) {
        uv_close((uv_handle_t *)&c->pipe, on_closed);
        return rc;
    }
    *out = c;
    return 0;
}

void proxy_control_close(struct proxy_control *c)
{
    if (c == NULL || uv_is_closing((uv_handle_t *)&c->pipe))
        return;
    uv_close((uv_handle_t *)&c->pipe, on_closed);
}

void proxy_control_fix_credentials(struct proxy_control *c, const struct settings *fixed)
{
    c->fixed = fixed;
}

void proxy_control_counts(const struct proxy_control *c, unsigned *applied, unsigned *refused)
{
    *applied = c->applied;
    *refused = c->refused;
}
