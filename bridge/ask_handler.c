/* bridge/ask_handler.c - the three built-in ask handlers: tty, exec, socket.
 *
 * Files: this one has the items, the JSON, the socket handler, dispatch,
 * open and close; ask_tty.c the terminal, ask_exec.c the children;
 * ask_handler-int.h the structs and the ask__ functions they share.
 *
 * Every handler keeps the questions it owes an answer in one list (struct
 * ask_item, arrival order). An item leaves the list when it is answered
 * (item_answer: unlinked and freed first, then the broker is called, because
 * the broker runs waiter callbacks that may ask again, withdraw, or close the
 * broker or this handler) or withdrawn by the broker (timeout, broker close).
 * The handler struct is freed only from the last close callback, so it stays
 * valid for the rest of any stack that closed it.
 *
 * tty. /dev/tty is opened O_RDWR|O_NOCTTY|O_CLOEXEC and driven as a uv_pipe
 * (our own open file description, so O_NONBLOCK affects nobody else; a
 * uv_tty on /dev/tty would fall back to blocking writes). One prompt at a
 * time; the terminal is read only while a prompt is up, and pending input is
 * flushed before each prompt so that type-ahead meant for the sandboxed
 * program never answers a question. Prompts are started from a 0 ms timer:
 * never from inside a read callback (libuv clears the reading flag after an
 * EOF callback returns) nor from inside a broker call.
 *
 * exec. One child per question, at most ASK_EXEC_RUNNING at once (others
 * queue). stdin gets the question line and EOF; stderr is sluice's. The
 * answer is decided once the child has exited: killed by a signal or a
 * non-zero status denies whatever it printed; status 0 uses the first line of
 * stdout (newline- or EOF-terminated, at most ASK_EXEC_LINE_MAX bytes). Waiting
 * for the exit makes the result independent of the order in which libuv
 * reports the line and the exit. Output after the first line is read and
 * discarded. A withdrawn question kills its child (SIGKILL, the child only:
 * wrapper scripts should exec the real program) and the child is reaped
 * before its handles close. Jobs own three handles and are freed after the
 * third close callback.
 *
 * socket. One connection at a time, made on the first question and again on
 * the first question after a loss. Items remember the connection they were
 * sent on (or wait for); losing it denies exactly those. Writes copy the
 * line, so an item may go away while its write is in flight.
 *
 * SIGPIPE: writes to a child that exited or a peer that closed fail with
 * EPIPE; the process must ignore SIGPIPE (sluice does, for the relay too).
 */
#include "bridge/ask_handler-int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"

/* ------------------------------------------------------------------------ */
/* Items and lifetime                                                        */

void ask__handler_maybe_done(struct ask_handler *h)
{
    void (*done)(void *);
    void *arg;

    if (!h->closing || h->live > 0)
        return;
    done = h->done;
    arg = h->done_arg;
    free(h);
    if (done != NULL)
        done(arg);
}

/* Close callback for the handler's own handles (timer, tty pipe). */
void ask__on_handle_closed(uv_handle_t *hd)
{
    struct ask_handler *h = hd->data;

    h->live--;
    ask__handler_maybe_done(h);
}

void ask__item_link(struct ask_handler *h, struct ask_item *it)
{
    it->next = NULL;
    it->prev = h->tail;
    if (h->tail != NULL)
        h->tail->next = it;
    else
        h->head = it;
    h->tail = it;
}

void ask__item_unlink(struct ask_handler *h, struct ask_item *it)
{
    if (h->head == it)
        h->head = it->next;
    else
        it->prev->next = it->next;
    if (h->tail == it)
        h->tail = it->prev;
    else
        it->next->prev = it->prev;
    it->prev = it->next = NULL;
}

void ask__item_free(struct ask_item *it)
{
    free(it->text);
    free(it);
}

struct ask_item *ask__item_find(const struct ask_handler *h, uint64_t id)
{
    struct ask_item *it;

    for (it = h->head; it != NULL; it = it->next)
        if (it->id == id)
            return it;
    return NULL;
}

/* Unlinks and frees it, then answers. The caller must not rely on any other
 * item pointer afterwards (the broker may re-enter the handler). reason must
 * not point into it. */
void ask__item_answer(struct ask_handler *h, struct ask_item *it, enum ask_decision d,
                      const char *reason)
{
    uint64_t id = it->id;

    ask__item_unlink(h, it);
    ask__item_free(it);
    (void)ask_broker_answer(h->broker, id, d, reason);
}

/* ------------------------------------------------------------------------ */
/* JSON                                                                      */

/* The question as one compact JSON object and "\n". NULL on failure. */
char *ask__question_json(const struct ask_question *q, size_t *len)
{
    json_t *o;
    size_t n;
    char *s = NULL;

    o = json_pack("{s:I,s:s,s:i,s:s,s:s}", "id", (json_int_t)q->id, "host", q->host, "port",
                  (int)q->port, "protocol", q->protocol, "client", q->client);
    if (o == NULL)
        return NULL;
    n = json_dumpb(o, NULL, 0, JSON_COMPACT | JSON_ENSURE_ASCII);
    if (n > 0)
        s = malloc(n + 1);
    if (s != NULL) {
        if (json_dumpb(o, s, n, JSON_COMPACT | JSON_ENSURE_ASCII) != n) {
            free(s);
            s = NULL;
        } else {
            s[n] = '\n';
            *len = n + 1;
        }
    }
    json_decref(o);
    return s;
}

/* Parses an answer object: "decision" (required), "reason" (string or null,
 * optional), "id" (positive integer; required when need_id). On success the
 * caller owns *root (reason points into it). 0 or UV_EINVAL. */
int ask__answer_json(const char *s, size_t len, int need_id, json_t **root, uint64_t *id,
                     int *has_id, enum ask_decision *d, const char **reason)
{
    json_error_t err;
    json_t *o, *v;

    o = json_loadb(s, len, JSON_REJECT_DUPLICATES, &err);
    if (!json_is_object(o))
        goto bad;
    v = json_object_get(o, "decision");
    if (!json_is_string(v) ||
        ask_decision_parse(json_string_value(v), json_string_length(v), d) < 0)
        goto bad;
    v = json_object_get(o, "reason");
    if (v != NULL && !json_is_null(v) && !json_is_string(v))
        goto bad;
    *reason = json_is_string(v) ? json_string_value(v) : NULL;
    v = json_object_get(o, "id");
    *has_id = v != NULL;
    if (v != NULL) {
        if (!json_is_integer(v) || json_integer_value(v) <= 0)
            goto bad;
        *id = (uint64_t)json_integer_value(v);
    } else if (need_id) {
        goto bad;
    }
    *root = o;
    return 0;
bad:
    json_decref(o);
    return UV_EINVAL;
}

/* Copies at most ASK_REASON_MAX bytes (the broker sanitises the rest). */
void ask__reason_copy(char dst[ASK_REASON_MAX + 1], const char *src, size_t len)
{
    if (len > ASK_REASON_MAX)
        len = ASK_REASON_MAX;
    memcpy(dst, src, len);
    dst[len] = '\0';
}

/* ------------------------------------------------------------------------ */
/* socket                                                                    */

static void on_conn_closed(uv_handle_t *hd)
{
    struct ask_conn *c = hd->data;
    struct ask_handler *h = c->h;

    free(c->buf);
    free(c);
    h->live--;
    ask__handler_maybe_done(h);
}

static void conn_close(struct ask_conn *c)
{
    if (c->state == CONN_CLOSING)
        return;
    c->state = CONN_CLOSING;
    if (c->h->sock.conn == c)
        c->h->sock.conn = NULL; /* the next question connects again */
    uv_close((uv_handle_t *)&c->pipe, on_conn_closed);
}

/* Drops the connection and denies every question sent on it or waiting for
 * it. Questions asked from the callbacks go to a new connection. */
static void conn_fail(struct ask_conn *c, const char *reason)
{
    struct ask_handler *h = c->h;
    char why[256];
    struct ask_item *it;

    if (c->state == CONN_CLOSING)
        return;
    snprintf(why, sizeof(why), "%s", reason);
    conn_close(c);
    for (;;) {
        for (it = h->head; it != NULL && it->conn != c; it = it->next)
            ;
        if (it == NULL || h->closing)
            break;
        ask__item_answer(h, it, ASK_DENY, why);
    }
}

static void on_sock_written(uv_write_t *req, int status)
{
    struct ask_sock_write *w = container_of(req, struct ask_sock_write, req);
    struct ask_conn *c = w->c;

    free(w);
    if (status < 0 && status != UV_ECANCELED && c->state == CONN_OPEN && !c->h->closing) {
        char why[160];

        snprintf(why, sizeof(why), "cannot write to the ask socket: %s", uv_strerror(status));
        conn_fail(c, why);
    }
}

/* 0, or the connection failed (and it was denied with the rest). */
static int sock_send(struct ask_conn *c, struct ask_item *it)
{
    struct ask_sock_write *w;
    uv_buf_t buf;
    char why[160];
    int rc;

    w = malloc(sizeof(*w) + it->len);
    if (w == NULL) {
        rc = UV_ENOMEM;
        goto fail;
    }
    w->c = c;
    w->len = it->len;
    memcpy(w->data, it->text, it->len);
    buf = uv_buf_init(w->data, (unsigned)w->len);
    rc = uv_write(&w->req, (uv_stream_t *)&c->pipe, &buf, 1, on_sock_written);
    if (rc < 0) {
        free(w);
        goto fail;
    }
    it->sent = 1;
    return 0;
fail:
    snprintf(why, sizeof(why), "cannot write to the ask socket: %s", uv_strerror(rc));
    conn_fail(c, why);
    return rc;
}

/* One answer line. 0, or UV_EINVAL (malformed: the caller drops the line's
 * connection). */
static int sock_line(struct ask_conn *c, const char *s, size_t n)
{
    struct ask_handler *h = c->h;
    json_t *root = NULL;
    const char *reason = NULL;
    enum ask_decision d;
    struct ask_item *it;
    uint64_t id = 0;
    int has_id = 0;
    char why[ASK_REASON_MAX + 1];

    if (n > 0 && s[n - 1] == '\r')
        n--;
    if (n == 0)
        return 0; /* blank lines are allowed */
    if (ask__answer_json(s, n, 1, &root, &id, &has_id, &d, &reason) < 0)
        return UV_EINVAL;
    if (reason != NULL)
        ask__reason_copy(why, reason, strlen(reason));
    json_decref(root);
    it = ask__item_find(h, id);
    if (it == NULL || it->conn != c || !it->sent)
        return 0; /* timed out meanwhile, or never asked: ignore */
    ask__item_answer(h, it, d, reason != NULL ? why : NULL);
    return 0;
}

static void sock_alloc(uv_handle_t *hd, size_t suggested, uv_buf_t *buf)
{
    struct ask_conn *c = hd->data;

    (void)suggested;
    *buf = uv_buf_init(c->buf + c->len, (unsigned)(ASK_SOCK_LINE_MAX - c->len));
}

static void on_sock_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct ask_conn *c = container_of(s, struct ask_conn, pipe);
    size_t start = 0, i, end;
    char why[160];

    (void)buf;
    if (nread == 0 || c->state != CONN_OPEN)
        return;
    if (nread == UV_EOF) {
        conn_fail(c, "the ask socket closed the connection");
        return;
    }
    if (nread < 0) {
        snprintf(why, sizeof(why), "cannot read from the ask socket: %s", uv_strerror((int)nread));
        conn_fail(c, why);
        return;
    }
    i = c->len;
    end = c->len + (size_t)nread;
    c->len = end;
    for (; i < end; i++) {
        if (c->buf[i] != '\n')
            continue;
        if (sock_line(c, c->buf + start, i - start) < 0) {
            conn_fail(c, "the ask socket sent a malformed answer");
            return;
        }
        start = i + 1;
        /* The answer may have closed the handler or this connection. */
        if (c->state != CONN_OPEN || c->h->closing)
            return;
    }
    if (start > 0) {
        memmove(c->buf, c->buf + start, end - start);
        c->len = end - start;
    }
    if (c->len == ASK_SOCK_LINE_MAX)
        conn_fail(c, "the ask socket sent a line that is too long");
}

static void on_sock_connected(uv_connect_t *req, int status)
{
    struct ask_conn *c = container_of(req, struct ask_conn, creq);
    struct ask_handler *h = c->h;
    struct ask_item *it;
    char why[ASK_TARGET_MAX + 128];
    int rc;

    if (c->state != CONN_CONNECTING)
        return; /* closed meanwhile: UV_ECANCELED */
    if (status < 0) {
        snprintf(why, sizeof(why), "cannot connect to the ask socket: %s", uv_strerror(status));
        conn_fail(c, why);
        return;
    }
    c->state = CONN_OPEN;
    rc = uv_read_start((uv_stream_t *)&c->pipe, sock_alloc, on_sock_read);
    if (rc < 0) {
        snprintf(why, sizeof(why), "cannot read from the ask socket: %s", uv_strerror(rc));
        conn_fail(c, why);
        return;
    }
    /* Send what waited for the connection; a failure denies the rest. */
    for (it = h->head; it != NULL; it = it->next) {
        if (it->conn == c && !it->sent && sock_send(c, it) < 0)
            return;
    }
}

static struct ask_conn *sock_connect(struct ask_handler *h)
{
    struct ask_conn *c = calloc(1, sizeof(*c));

    if (c == NULL)
        return NULL;
    c->buf = malloc(ASK_SOCK_LINE_MAX);
    if (c->buf == NULL) {
        free(c);
        return NULL;
    }
    c->h = h;
    c->state = CONN_CONNECTING;
    uv_pipe_init(h->loop, &c->pipe, 0); /* cannot fail on Unix */
    c->pipe.data = c;
    h->live++;
    h->sock.conn = c;
    /* Errors (no such file, refused) arrive in the callback, on a later tick. */
    uv_pipe_connect(&c->creq, &c->pipe, h->target, on_sock_connected);
    return c;
}

static void sock_ask(struct ask_handler *h, const struct ask_question *q)
{
    struct ask_item *it = calloc(1, sizeof(*it));
    struct ask_conn *c;

    if (it == NULL || (it->text = ask__question_json(q, &it->len)) == NULL) {
        free(it);
        (void)ask_broker_answer(h->broker, q->id, ASK_DENY, "cannot encode the question");
        return;
    }
    c = h->sock.conn;
    if (c == NULL)
        c = sock_connect(h);
    if (c == NULL) {
        ask__item_free(it);
        (void)ask_broker_answer(h->broker, q->id, ASK_DENY, "out of memory");
        return;
    }
    it->id = q->id;
    it->conn = c;
    ask__item_link(h, it);
    if (c->state == CONN_OPEN)
        (void)sock_send(c, it); /* on failure it was denied */
}

/* ------------------------------------------------------------------------ */
/* Dispatch                                                                  */

static void handler_ask(void *ctx, const struct ask_question *q)
{
    struct ask_handler *h = ctx;

    if (h->closing) {
        (void)ask_broker_answer(h->broker, q->id, ASK_DENY, "the ask handler is closing");
        return;
    }
    switch (h->kind) {
    case ASK_KIND_TTY:
        ask__tty_ask(h, q);
        break;
    case ASK_KIND_EXEC:
        ask__exec_ask(h, q);
        break;
    case ASK_KIND_SOCKET:
        sock_ask(h, q);
        break;
    }
}

static void handler_withdraw(void *ctx, uint64_t id)
{
    struct ask_handler *h = ctx;
    struct ask_item *it = ask__item_find(h, id);

    if (it == NULL)
        return;
    switch (h->kind) {
    case ASK_KIND_TTY:
        ask__tty_withdraw(h, it);
        break;
    case ASK_KIND_EXEC:
        ask__exec_withdraw(h, it);
        break;
    case ASK_KIND_SOCKET:
        ask__item_unlink(h, it); /* an answer for it later is ignored */
        ask__item_free(it);
        break;
    }
}

static const struct ask_handler_ops handler_ops = {handler_ask, handler_withdraw};

int ask_handler_open(struct ask_handler **out, uv_loop_t *loop, const char *spec,
                     struct ask_broker *b, const char **why)
{
    static const char unknown[] = "unknown ask handler (want tty, exec:PROGRAM or socket:PATH)";
    struct ask_handler *h;
    enum ask_kind kind;
    const char *target = "";
    const char *dummy;

    if (why == NULL)
        why = &dummy;
    if (out == NULL || loop == NULL || spec == NULL || b == NULL) {
        *why = "missing argument";
        return UV_EINVAL;
    }
    if (strcmp(spec, "tty") == 0) {
        kind = ASK_KIND_TTY;
    } else if (strncmp(spec, "exec:", 5) == 0) {
        kind = ASK_KIND_EXEC;
        target = spec + 5;
        if (target[0] == '\0') {
            *why = "exec: needs a program";
            return UV_EINVAL;
        }
        if (strlen(target) >= ASK_TARGET_MAX) {
            *why = "exec: the program name is too long";
            return UV_EINVAL;
        }
        if (!ask__exec_findable(target)) {
            *why = "exec: the ask program was not found or is not executable";
            return UV_ENOENT;
        }
    } else if (strncmp(spec, "socket:", 7) == 0) {
        kind = ASK_KIND_SOCKET;
        target = spec + 7;
        if (target[0] == '\0') {
            *why = "socket: needs a path";
            return UV_EINVAL;
        }
        if (strlen(target) >= ENDPOINT_PATH_MAX) {
            *why = "socket: the path is too long (at most 107 bytes)";
            return UV_EINVAL;
        }
    } else {
        *why = unknown;
        return UV_EINVAL;
    }

    h = calloc(1, sizeof(*h));
    if (h == NULL) {
        *why = "out of memory";
        return UV_ENOMEM;
    }
    h->kind = kind;
    h->loop = loop;
    h->broker = b;
    snprintf(h->target, sizeof(h->target), "%s", target);
    uv_timer_init(loop, &h->timer); /* cannot fail on Unix */
    h->timer.data = h;
    h->live = 1;
    if (kind == ASK_KIND_TTY)
        (void)ask__tty_open(h); /* no terminal: questions are denied */
    ask_broker_set_handler(b, &handler_ops, h);
    *out = h;
    return 0;
}

void ask_handler_close(struct ask_handler *h, void (*done)(void *arg), void *arg)
{
    struct ask_item *it;
    struct ask_job *job, *next;

    if (h == NULL || h->closing)
        return;
    h->closing = 1;
    h->done = done;
    h->done_arg = arg;
    /* Nothing is answered from here on: the broker is closed (or closing). */
    while ((it = h->head) != NULL) {
        if (it->job != NULL)
            it->job->item = NULL;
        ask__item_unlink(h, it);
        ask__item_free(it);
    }
    for (job = h->exec.jobs; job != NULL; job = next) {
        next = job->next;
        job->item = NULL;
        ask__job_close(job);
    }
    if (h->sock.conn != NULL)
        conn_close(h->sock.conn);
    if (h->tty.ok) {
        h->tty.ok = 0;
        uv_close((uv_handle_t *)&h->tty.pipe, ask__on_handle_closed);
    }
    uv_close((uv_handle_t *)&h->timer, ask__on_handle_closed);
}
