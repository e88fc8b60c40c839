/* proxy/http_splice.c - a plain-HTTP response body moved from the upstream
 * socket to the client's with splice(2), for the bulk of a download
 * (issue 25: the forwarded GET at the speed of a CONNECT tunnel).
 *
 * The copy path (http_forward.c) reads the upstream into w->uin, runs
 * llhttp over it and writes the body pieces out: every byte crosses into
 * user space and back. Once a response's head has gone out and what is left
 * of its body is a Content-Length count of at least HTTP_SPLICE_MIN bytes
 * that nothing needs to see (no credential masking, no re-chunking, plain
 * sockets both ways: not a terminated tunnel's pumps), http_forward.c hands
 * exactly that many bytes to this file, which moves them
 * upstream -> pipe -> client in the kernel and then gives the exchange back
 * (http_forward_splice_done), as if llhttp had seen the body end. Bytes the
 * upstream sends beyond the count stay in its socket: the idle upstream's
 * read sees them and retires it, as on the copy path.
 *
 * The streams are not used meanwhile: the upstream's reads are stopped and
 * nothing is written to the client (its write queue is empty when this
 * starts, and the exchange writes nothing until the body is done), while
 * the client's reads (a pipelined request) go on through its stream. libuv
 * allows one watcher per descriptor, so, as the relay's splice path does,
 * this dup()s both sockets and watches the copies with a uv_poll_t each.
 *
 * Ends: the count reached and the pipe empty -> done (status 0); the
 * upstream's EOF or error before that -> what is in the pipe still goes to
 * the client, then http_forward_splice_done with the error (the exchange
 * ends as a cut body does on the copy path); a client error -> the
 * connection is closed. splice(2) unsupported on the very first call (no
 * byte taken): the copy path goes on (http_forward_splice_done with
 * UV_ENOSYS, nothing lost). http_conn_close aborts a splice in progress
 * (http_splice_abort); the state is freed in the last close callback, and
 * each duplicate descriptor is closed in its poll handle's.
 */
#define _GNU_SOURCE
#include "proxy/http_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define SPLICE_ROUNDS 16 /* pumps per readiness event, for fairness */

struct splice_watch {
    uv_poll_t poll;
    struct http_splice *sp;
    int fd;     /* the duplicate; -1 when none */
    int events; /* the poll's current mask, 0 when stopped */
    unsigned inited : 1;
};

struct http_splice {
    struct http_conn *c; /* NULL once aborted */
    struct splice_watch up, cl;
    struct relay_pipe_ends pipe;
    uint64_t left;  /* body bytes still to take from the upstream */
    size_t parked;  /* bytes in the pipe, not yet given to the client */
    int up_status;  /* the upstream's EOF or error, once met (0 before) */
    unsigned nclosing;
    unsigned moved : 1; /* a byte was taken from the upstream */
};

static void on_watch_close(uv_handle_t *h)
{
    struct splice_watch *wt = container_of(h, struct splice_watch, poll);
    struct http_splice *sp = wt->sp;

    if (wt->fd >= 0)
        close(wt->fd);
    wt->fd = -1;
    if (--sp->nclosing == 0) {
        if (sp->pipe.r >= 0)
            relay_pipe_give(&sp->pipe, sp->parked);
        free(sp);
    }
}

/* Stops both watchers, closes them and, in their callbacks, the duplicates
 * and the state. The connection no longer points to it. */
static void splice_free(struct http_splice *sp)
{
    struct splice_watch *wt[2] = {&sp->up, &sp->cl};

    if (sp->c != NULL && sp->c->w != NULL)
        sp->c->w->splice = NULL;
    sp->c = NULL;
    for (int i = 0; i < 2; i++) {
        if (wt[i]->inited) {
            sp->nclosing++;
            uv_close((uv_handle_t *)&wt[i]->poll, on_watch_close);
        } else if (wt[i]->fd >= 0) {
            close(wt[i]->fd);
            wt[i]->fd = -1;
        }
    }
    if (sp->nclosing == 0) {
        if (sp->pipe.r >= 0)
            relay_pipe_give(&sp->pipe, sp->parked);
        free(sp);
    }
}

void http_splice_abort(struct http_conn *c)
{
    if (c->w != NULL && c->w->splice != NULL)
        splice_free(c->w->splice);
}

/* The end: the exchange goes back to http_forward.c (status 0: the body is
 * complete; else the upstream's error, or UV_ENOSYS: go on copying). */
static void splice_end(struct http_splice *sp, int status)
{
    struct http_conn *c = sp->c;

    splice_free(sp);
    http_forward_splice_done(c, status);
}

static void splice_client_failed(struct http_splice *sp)
{
    struct http_conn *c = sp->c;

    splice_free(sp);
    http_conn_close(c, "client write failed");
}

static int watch_set(struct splice_watch *wt, int events);

/* Moves bytes until the upstream has none for now, the pipe is full and the
 * client refuses more, or the body is done. 1 when the splice ended (sp is
 * gone), else 0. */
static int pump(struct http_splice *sp)
{
    struct http_conn *c = sp->c;
    int client_blocked = 0, up_empty = 0;

    for (int round = 0; round < SPLICE_ROUNDS; round++) {
        int more = 0;
        ssize_t n;

        if (sp->left > 0 && sp->up_status == 0 && sp->parked < sp->pipe.cap) {
            size_t want = sp->pipe.cap - sp->parked;
            if ((uint64_t)want > sp->left)
                want = (size_t)sp->left;
            n = relay_splice_io(sp->up.fd, sp->pipe.w, want);
            if (n > 0) {
                sp->parked += (size_t)n;
                sp->left -= (uint64_t)n;
                sp->moved = 1;
                more = 1;
            } else if (n == 0) {
                sp->up_status = UV_EOF; /* cut short: the count said more */
            } else if (errno == EAGAIN) {
                up_empty = 1;
            } else if (errno != EINTR) {
                if (!sp->moved && (errno == EINVAL || errno == ENOSYS || errno == EPERM)) {
                    splice_end(sp, UV_ENOSYS); /* nothing taken: copy as before */
                    return 1;
                }
                sp->up_status = uv_translate_sys_error(errno);
            }
        }
        while (sp->parked > 0 && !client_blocked) {
            n = relay_splice_io(sp->pipe.r, sp->cl.fd, sp->parked);
            if (n > 0) {
                sp->parked -= (size_t)n;
                c->bytes_down += (uint64_t)n;
                c->w->last_io = uv_now(c->fc.f->loop);
                more = 1;
            } else if (n < 0 && errno == EAGAIN) {
                client_blocked = 1;
            } else if (n < 0 && errno == EINTR) {
                continue;
            } else {
                splice_client_failed(sp);
                return 1;
            }
        }
        if (sp->parked == 0 && (sp->left == 0 || sp->up_status != 0)) {
            splice_end(sp, sp->left == 0 ? 0 : sp->up_status);
            return 1;
        }
        if (!more || (up_empty && client_blocked))
            break;
        up_empty = 0;
    }
    /* wait: the upstream readable while the pipe has room and the body
     * goes on, the client writable while bytes are parked */
    if (watch_set(&sp->up, sp->left > 0 && sp->up_status == 0 && sp->parked < sp->pipe.cap
                               ? UV_READABLE
                               : 0) < 0 ||
        watch_set(&sp->cl, sp->parked > 0 ? UV_WRITABLE : 0) < 0) {
        splice_client_failed(sp);
        return 1;
    }
    return 0;
}

static void on_poll(uv_poll_t *h, int status, int events)
{
    struct splice_watch *wt = container_of(h, struct splice_watch, poll);
    struct http_splice *sp = wt->sp;

    (void)events;
    if (sp->c == NULL)
        return; /* cannot happen: aborted watchers are closed */
    if (status < 0)
        wt->events = 0; /* libuv stopped it (POLLERR): the next splice says why */
    (void)pump(sp);
}

static int watch_set(struct splice_watch *wt, int events)
{
    int rc = 0;

    if (events == wt->events)
        return 0;
    if (events == 0)
        rc = uv_poll_stop(&wt->poll);
    else
        rc = uv_poll_start(&wt->poll, events, on_poll);
    if (rc == 0)
        wt->events = events;
    return rc;
}

static int watch_init(struct http_splice *sp, struct splice_watch *wt, uv_loop_t *loop,
                      uv_stream_t *s)
{
    uv_os_fd_t fd;

    wt->sp = sp;
    wt->fd = -1;
    if (uv_fileno((uv_handle_t *)s, &fd) != 0)
        return UV_EINVAL;
    wt->fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    if (wt->fd < 0)
        return uv_translate_sys_error(errno);
    if (uv_poll_init(loop, &wt->poll, wt->fd) != 0)
        return UV_EINVAL;
    wt->inited = 1;
    return 0;
}

int http_splice_start(struct http_conn *c, uint64_t left)
{
    struct http_work *w = c->w;
    uv_loop_t *loop = c->fc.f->loop;
    struct http_splice *sp;
    int rc;

    if (relay_splice_default() == RELAY_SPLICE_OFF)
        return UV_ENOSYS;
    sp = calloc(1, sizeof(*sp));
    if (sp == NULL)
        return UV_ENOMEM;
    sp->c = c;
    sp->left = left;
    sp->pipe.r = sp->pipe.w = -1;
    sp->up.fd = sp->cl.fd = -1;
    w->splice = sp;
    rc = relay_pipe_take(&sp->pipe);
    if (rc == 0)
        rc = watch_init(sp, &sp->up, loop, (uv_stream_t *)&w->up->tcp);
    if (rc == 0)
        rc = watch_init(sp, &sp->cl, loop, relay_client(&c->relay));
    if (rc < 0) {
        splice_free(sp);
        return rc;
    }
    (void)pump(sp);
    return 0;
}

/* The rest of this response's body can go by splice(2): a Content-Length
 * body with at least HTTP_SPLICE_MIN bytes to come that nothing has to see
 * on the way (credential masking, re-chunking, the llhttp cross-check), a
 * request that is all sent, plain sockets both ways (not a terminated
 * tunnel's pumps). */
int http_splice_candidate(const struct http_conn *c)
{
    const struct http_work *w = c->w;

    return w->body_counted && w->body_left >= HTTP_SPLICE_MIN && w->resp_phase == RESP_BODY &&
           !w->chunk_out && w->check == CHECK_OFF && w->send_err == 0 &&
           w->req_phase == REQ_DONE && !http_cred_masked(c) && c->cio == NULL &&
           !c->terminated && w->up != NULL && w->up->tio == NULL && w->up->phase == UP_BUSY &&
           c->state == HTTP_ST_FORWARD;
}

/* The client's queue is empty: the body goes by splice(2), or, when that
 * cannot start, on the copy path as before. */
void http_splice_try(struct http_conn *c)
{
    struct http_work *w = c->w;

    if (w == NULL || !w->splice_wait)
        return;
    w->splice_wait = 0;
    if (c->state != HTTP_ST_FORWARD || w->up == NULL)
        return;
    if (!http_splice_candidate(c) || http_splice_start(c, w->body_left) < 0)
        http_up_read_start(c, w->up);
}
