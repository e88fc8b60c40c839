/* bridge/ask_handler.c - the three built-in ask handlers: tty, exec, socket.
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
#include "bridge/bridge.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>
#include <uv.h>

#include <jansson.h>

#include "policy/policy.h"

#include "common/common.h"

#define ASK_EXEC_RUNNING 16                   /* children at once */
#define ASK_EXEC_LINE_MAX 4096                /* first line of a child's stdout */
#define ASK_SOCK_LINE_MAX ((size_t)64 * 1024) /* one answer line on the socket */
#define ASK_TTY_LINE_MAX 256                  /* one answer typed on the terminal */
#define ASK_TTY_ATTEMPTS 3                    /* invalid answers before a deny */
#define ASK_TARGET_MAX 4096                   /* PROGRAM or PATH */
#define ASK_PROMPT_FIELD 300                  /* each field of the prompt */

static const char tty_none_reason[] = "no terminal to ask on (--ask tty)";

enum ask_kind { ASK_KIND_TTY = 0, ASK_KIND_EXEC, ASK_KIND_SOCKET };

struct ask_job;
struct ask_conn;

/* A question the handler owes an answer. */
struct ask_item {
    struct ask_item *prev, *next; /* h->head list */
    uint64_t id;
    char *text; /* exec, socket: the JSON question and "\n"; tty: the prompt */
    size_t len;
    struct ask_job *job;   /* exec: its child, NULL while queued */
    struct ask_conn *conn; /* socket: the connection it was sent on or waits for */
    int sent;              /* socket: written to conn */
};

/* exec: what the first line of stdout turned out to be. */
enum job_line {
    JOB_LINE_READING = 0, /* no newline and no EOF yet */
    JOB_LINE_ANSWER,      /* a valid answer: d, reason */
    JOB_LINE_NONE,        /* EOF before any byte */
    JOB_LINE_MALFORMED,
    JOB_LINE_TOOLONG,
    JOB_LINE_ERROR, /* read error */
};

struct ask_job {
    struct ask_handler *h;
    struct ask_job *prev, *next; /* h->exec.jobs */
    struct ask_item *item;       /* NULL once answered or withdrawn */
    char *text;                  /* the question line, being written to stdin */
    uv_process_t proc;
    uv_pipe_t in, out;
    uv_write_t wreq;
    unsigned nclosed; /* close callbacks seen, of 3 */
    int exited;       /* exit callback ran (or spawn failed) */
    int killed;
    int decided;
    int64_t status;
    int term_signal;
    enum job_line line;
    enum ask_decision d;
    char reason[ASK_REASON_MAX + 1];
    int has_reason;
    size_t len;
    char buf[ASK_EXEC_LINE_MAX];
};

enum conn_state {
    CONN_CONNECTING = 0, /* owns: creq */
    CONN_OPEN,           /* reading; writes in flight */
    CONN_CLOSING,        /* uv_close issued; freed in its close callback */
};

struct ask_conn {
    struct ask_handler *h;
    enum conn_state state;
    uv_pipe_t pipe;
    uv_connect_t creq;
    size_t len;
    char *buf; /* ASK_SOCK_LINE_MAX, allocated with the connection */
};

struct ask_sock_write {
    uv_write_t req;
    struct ask_conn *c;
    size_t len;
    char data[];
};

struct ask_tty_write {
    uv_write_t req;
    struct ask_handler *h;
    size_t len;
    char data[];
};

struct ask_handler {
    enum ask_kind kind;
    uv_loop_t *loop;
    struct ask_broker *broker;
    uv_timer_t timer;             /* tty: deferred prompts; every kind: closes last */
    struct ask_item *head, *tail; /* questions owed an answer */
    unsigned live;                /* handles initialised and not yet closed */
    int closing;
    void (*done)(void *arg);
    void *done_arg;
    char target[ASK_TARGET_MAX]; /* exec: PROGRAM; socket: PATH */
    struct {
        int ok;        /* the pipe is open and usable */
        int prompting; /* h->head is on screen, reading */
        unsigned attempts;
        int overlong;
        size_t len;
        char line[ASK_TTY_LINE_MAX];
        char rbuf[ASK_TTY_LINE_MAX]; /* one read */
        uv_pipe_t pipe;
    } tty;
    struct {
        struct ask_job *jobs; /* spawned or closing */
        unsigned running;     /* jobs holding handles */
    } exec;
    struct {
        struct ask_conn *conn; /* current connection, NULL when none */
    } sock;
};

/* ------------------------------------------------------------------------ */
/* Items and lifetime                                                        */

static void on_handle_closed(uv_handle_t *hd);

static void handler_maybe_done(struct ask_handler *h)
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
static void on_handle_closed(uv_handle_t *hd)
{
    struct ask_handler *h = hd->data;

    h->live--;
    handler_maybe_done(h);
}

static void item_link(struct ask_handler *h, struct ask_item *it)
{
    it->next = NULL;
    it->prev = h->tail;
    if (h->tail != NULL)
        h->tail->next = it;
    else
        h->head = it;
    h->tail = it;
}

static void item_unlink(struct ask_handler *h, struct ask_item *it)
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

static void item_free(struct ask_item *it)
{
    free(it->text);
    free(it);
}

static struct ask_item *item_find(const struct ask_handler *h, uint64_t id)
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
static void item_answer(struct ask_handler *h, struct ask_item *it, enum ask_decision d,
                        const char *reason)
{
    uint64_t id = it->id;

    item_unlink(h, it);
    item_free(it);
    (void)ask_broker_answer(h->broker, id, d, reason);
}

/* ------------------------------------------------------------------------ */
/* JSON                                                                      */

/* The question as one compact JSON object and "\n". NULL on failure. */
static char *question_json(const struct ask_question *q, size_t *len)
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
static int answer_json(const char *s, size_t len, int need_id, json_t **root, uint64_t *id,
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
static void reason_copy(char dst[ASK_REASON_MAX + 1], const char *src, size_t len)
{
    if (len > ASK_REASON_MAX)
        len = ASK_REASON_MAX;
    memcpy(dst, src, len);
    dst[len] = '\0';
}

/* ------------------------------------------------------------------------ */
/* tty                                                                       */

static void tty_schedule(struct ask_handler *h);
static void tty_lost(struct ask_handler *h, int err);

static void on_tty_written(uv_write_t *req, int status)
{
    struct ask_tty_write *w = container_of(req, struct ask_tty_write, req);
    struct ask_handler *h = w->h;

    free(w);
    if (status < 0 && status != UV_ECANCELED && !h->closing)
        tty_lost(h, status);
}

static void tty_write(struct ask_handler *h, const char *s)
{
    size_t len = strlen(s);
    struct ask_tty_write *w;
    uv_buf_t buf;
    int rc;

    if (!h->tty.ok || len == 0)
        return;
    w = malloc(sizeof(*w) + len);
    if (w == NULL)
        return; /* the prompt is lost; the question will time out */
    w->h = h;
    w->len = len;
    memcpy(w->data, s, len);
    buf = uv_buf_init(w->data, (unsigned)len);
    rc = uv_write(&w->req, (uv_stream_t *)&h->tty.pipe, &buf, 1, on_tty_written);
    if (rc < 0) {
        free(w);
        tty_lost(h, rc);
    }
}

/* Printable ASCII only: the terminal must never get control bytes. */
static void tty_field(char *dst, size_t cap, const char *src)
{
    size_t i, n = 0;

    for (i = 0; src[i] != '\0' && n + 1 < cap; i++) {
        unsigned char c = (unsigned char)src[i];
        dst[n++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
    dst[n] = '\0';
}

static char *tty_prompt_text(const struct ask_question *q, size_t *len)
{
    char host[ASK_PROMPT_FIELD], client[ASK_PROMPT_FIELD], proto[ASK_PROMPT_FIELD], *s;
    int bracket = strchr(q->host, ':') != NULL;
    int n;

    tty_field(host, sizeof(host), q->host);
    tty_field(client, sizeof(client), q->client[0] != '\0' ? q->client : "unknown client");
    tty_field(proto, sizeof(proto), q->protocol[0] != '\0' ? q->protocol : "unknown");
    n = snprintf(NULL, 0,
                 "sluice: allow a connection to %s%s%s:%u from %s (%s)? "
                 "[y]es once, [n]o, [a]lways, [N]ever: ",
                 bracket ? "[" : "", host, bracket ? "]" : "", (unsigned)q->port, client, proto);
    if (n < 0)
        return NULL;
    s = malloc((size_t)n + 1);
    if (s == NULL)
        return NULL;
    snprintf(s, (size_t)n + 1,
             "sluice: allow a connection to %s%s%s:%u from %s (%s)? "
             "[y]es once, [n]o, [a]lways, [N]ever: ",
             bracket ? "[" : "", host, bracket ? "]" : "", (unsigned)q->port, client, proto);
    *len = (size_t)n;
    return s;
}

static void tty_alloc(uv_handle_t *hd, size_t suggested, uv_buf_t *buf)
{
    struct ask_handler *h = hd->data;

    (void)suggested;
    /* One line is handled per read and the rest dropped: a small buffer. */
    *buf = uv_buf_init(h->tty.rbuf, sizeof(h->tty.rbuf));
}

static void tty_stop_reading(struct ask_handler *h)
{
    if (h->tty.ok)
        uv_read_stop((uv_stream_t *)&h->tty.pipe);
}

/* The prompted question is decided: answer it, then prompt the next one. */
static void tty_decide(struct ask_handler *h, enum ask_decision d, const char *reason)
{
    struct ask_item *it = h->head;

    h->tty.prompting = 0;
    tty_stop_reading(h);
    if (it == NULL)
        return;
    tty_schedule(h);
    item_answer(h, it, d, reason);
}

/* One typed line: an answer decides; anything else repeats the prompt (an
 * empty line does not count as an attempt). */
static void tty_line(struct ask_handler *h, const char *s, size_t len)
{
    static const struct {
        const char *word;
        enum ask_decision d;
        const char *reason;
    } words[] = {
        {"y", ASK_ALLOW, NULL},
        {"Y", ASK_ALLOW, NULL},
        {"yes", ASK_ALLOW, NULL},
        {"n", ASK_DENY, "denied on the terminal"},
        {"no", ASK_DENY, "denied on the terminal"},
        {"a", ASK_ALLOW_SESSION, NULL},
        {"A", ASK_ALLOW_SESSION, NULL},
        {"always", ASK_ALLOW_SESSION, NULL},
        {"N", ASK_DENY_SESSION, "denied on the terminal for this session"},
        {"never", ASK_DENY_SESSION, "denied on the terminal for this session"},
    };
    size_t i;

    while (len > 0 && (s[0] == ' ' || s[0] == '\t')) {
        s++;
        len--;
    }
    while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t'))
        len--;
    if (!h->tty.overlong) {
        for (i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
            if (strlen(words[i].word) == len && memcmp(words[i].word, s, len) == 0) {
                tty_decide(h, words[i].d, words[i].reason);
                return;
            }
        }
    }
    if (len > 0 || h->tty.overlong)
        h->tty.attempts++;
    if (h->tty.attempts >= ASK_TTY_ATTEMPTS) {
        tty_write(h, "sluice: no valid answer, denied\n");
        tty_decide(h, ASK_DENY, "no valid answer on the terminal");
        return;
    }
    h->tty.len = 0;
    h->tty.overlong = 0;
    if (len > 0)
        tty_write(h, "sluice: please answer y (yes, once), n (no), a (always) or N (never)\n");
    if (h->head != NULL)
        tty_write(h, h->head->text);
}

static void on_tty_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct ask_handler *h = container_of(s, struct ask_handler, tty.pipe);
    size_t i;

    if (nread == 0 || h->closing)
        return;
    if (!h->tty.prompting || h->head == NULL) {
        tty_stop_reading(h);
        return;
    }
    if (nread == UV_EOF) {
        /* ^D at the start of a line; the terminal stays usable. */
        tty_write(h, "\n");
        tty_decide(h, ASK_DENY, "no answer on the terminal");
        return;
    }
    if (nread < 0) {
        tty_lost(h, (int)nread);
        return;
    }
    for (i = 0; i < (size_t)nread; i++) {
        char c = buf->base[i];

        if (c == '\n' || c == '\r') {
            tty_line(h, h->tty.line, h->tty.len);
            return; /* the rest of this read is dropped */
        }
        if (h->tty.len < sizeof(h->tty.line))
            h->tty.line[h->tty.len++] = c;
        else
            h->tty.overlong = 1;
    }
}

static void tty_prompt(struct ask_handler *h)
{
    int fd = -1;

    if (h->closing || !h->tty.ok || h->tty.prompting || h->head == NULL)
        return;
    h->tty.prompting = 1;
    h->tty.attempts = 0;
    h->tty.len = 0;
    h->tty.overlong = 0;
    if (uv_fileno((uv_handle_t *)&h->tty.pipe, &fd) == 0)
        (void)tcflush(fd, TCIFLUSH); /* type-ahead never answers a question */
    tty_write(h, h->head->text);
    if (h->tty.ok && uv_read_start((uv_stream_t *)&h->tty.pipe, tty_alloc, on_tty_read) < 0)
        tty_lost(h, UV_EIO);
}

static void on_tty_timer(uv_timer_t *t)
{
    struct ask_handler *h = container_of(t, struct ask_handler, timer);

    tty_prompt(h);
}

static void tty_schedule(struct ask_handler *h)
{
    if (!h->closing && h->tty.ok && !h->tty.prompting)
        uv_timer_start(&h->timer, on_tty_timer, 0, 0);
}

/* The terminal failed: close it and deny everything owed. */
static void tty_lost(struct ask_handler *h, int err)
{
    struct ask_item *it;

    if (!h->tty.ok)
        return;
    fprintf(stderr, "sluice: warning: --ask tty: terminal lost: %s; every ask is denied\n",
            uv_strerror(err));
    h->tty.ok = 0;
    h->tty.prompting = 0;
    uv_close((uv_handle_t *)&h->tty.pipe, on_handle_closed);
    /* Re-read the head: answers may re-enter (new asks are denied at once). */
    while ((it = h->head) != NULL)
        item_answer(h, it, ASK_DENY, tty_none_reason);
}

static void tty_ask(struct ask_handler *h, const struct ask_question *q)
{
    struct ask_item *it;

    if (!h->tty.ok) {
        (void)ask_broker_answer(h->broker, q->id, ASK_DENY, tty_none_reason);
        return;
    }
    it = calloc(1, sizeof(*it));
    if (it == NULL || (it->text = tty_prompt_text(q, &it->len)) == NULL) {
        free(it);
        (void)ask_broker_answer(h->broker, q->id, ASK_DENY, "out of memory");
        return;
    }
    it->id = q->id;
    item_link(h, it);
    tty_schedule(h);
}

static void tty_withdraw(struct ask_handler *h, struct ask_item *it)
{
    int current = it == h->head && h->tty.prompting;

    item_unlink(h, it);
    item_free(it);
    if (current) {
        h->tty.prompting = 0;
        tty_stop_reading(h);
        tty_write(h, "timed out, denied\n");
        tty_schedule(h);
    }
}

static int tty_open(struct ask_handler *h)
{
    int fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC), rc;

    if (fd < 0) {
        fprintf(stderr,
                "sluice: warning: --ask tty: cannot open /dev/tty: %s; every ask is denied\n",
                strerror(errno));
        return 0;
    }
    uv_pipe_init(h->loop, &h->tty.pipe, 0); /* cannot fail on Unix */
    h->tty.pipe.data = h;
    h->live++;
    rc = uv_pipe_open(&h->tty.pipe, fd);
    if (rc < 0) {
        fprintf(stderr,
                "sluice: warning: --ask tty: cannot use /dev/tty: %s; every ask is denied\n",
                uv_strerror(rc));
        close(fd);
        uv_close((uv_handle_t *)&h->tty.pipe, on_handle_closed);
        return 0;
    }
    h->tty.ok = 1;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* exec                                                                      */

static void exec_pump(struct ask_handler *h);

static void on_job_closed(uv_handle_t *hd)
{
    struct ask_job *job = hd->data;
    struct ask_handler *h = job->h;

    h->live--;
    if (++job->nclosed < 3)
        return;
    if (h->exec.jobs == job)
        h->exec.jobs = job->next;
    else
        job->prev->next = job->next;
    if (job->next != NULL)
        job->next->prev = job->prev;
    h->exec.running--;
    free(job->text);
    free(job);
    if (!h->closing)
        exec_pump(h);
    handler_maybe_done(h);
}

static void job_close_handle(uv_handle_t *hd)
{
    if (!uv_is_closing(hd))
        uv_close(hd, on_job_closed);
}

/* Ends a job: a running child is killed first and its handles are closed
 * once it has been reaped (the exit callback calls back here). */
static void job_close(struct ask_job *job)
{
    if (!job->exited) {
        if (!job->killed) {
            job->killed = 1;
            (void)uv_process_kill(&job->proc, SIGKILL);
        }
        return;
    }
    job_close_handle((uv_handle_t *)&job->in);
    job_close_handle((uv_handle_t *)&job->out);
    job_close_handle((uv_handle_t *)&job->proc);
}

/* A first line (without its newline) from the child. */
static void job_parse_line(struct ask_job *job, size_t n)
{
    const char *s = job->buf, *sp;
    json_t *root = NULL;
    const char *reason = NULL;
    uint64_t id = 0;
    int has_id = 0;

    if (n > 0 && s[n - 1] == '\r')
        n--;
    job->line = JOB_LINE_MALFORMED;
    if (n == 0 || memchr(s, '\0', n) != NULL)
        return;
    if (s[0] == '{') {
        if (answer_json(s, n, 0, &root, &id, &has_id, &job->d, &reason) < 0)
            return;
        if (!has_id || (job->item != NULL && id == job->item->id)) {
            job->line = JOB_LINE_ANSWER;
            if (reason != NULL) {
                reason_copy(job->reason, reason, strlen(reason));
                job->has_reason = 1;
            }
        }
        json_decref(root);
        return;
    }
    sp = memchr(s, ' ', n);
    if (ask_decision_parse(s, sp != NULL ? (size_t)(sp - s) : n, &job->d) < 0)
        return;
    job->line = JOB_LINE_ANSWER;
    if (sp != NULL && (size_t)(sp + 1 - s) < n) {
        reason_copy(job->reason, sp + 1, n - (size_t)(sp + 1 - s));
        job->has_reason = 1;
    }
}

/* Decides once the child has exited (and, for status 0, its line is known). */
static void job_check(struct ask_job *job)
{
    struct ask_handler *h = job->h;
    struct ask_item *it = job->item;
    char why[128];
    const char *reason = why;
    enum ask_decision d = ASK_DENY;

    if (it == NULL) { /* withdrawn, answered, or the handler is closing */
        if (job->exited)
            job_close(job);
        return;
    }
    if (!job->exited || job->decided)
        return;
    if (job->term_signal != 0) {
        snprintf(why, sizeof(why), "ask program killed by signal %d", job->term_signal);
    } else if (job->status != 0) {
        snprintf(why, sizeof(why), "ask program exited with status %lld", (long long)job->status);
    } else {
        switch (job->line) {
        case JOB_LINE_READING:
            return; /* wait for the newline or EOF */
        case JOB_LINE_ANSWER:
            d = job->d;
            reason = job->has_reason ? job->reason : NULL;
            break;
        case JOB_LINE_NONE:
            reason = "ask program gave no answer";
            break;
        case JOB_LINE_MALFORMED:
            reason = "ask program gave a malformed answer";
            break;
        case JOB_LINE_TOOLONG:
            reason = "ask program's answer is too long";
            break;
        case JOB_LINE_ERROR:
            reason = "cannot read the ask program's answer";
            break;
        }
    }
    job->decided = 1;
    job->item = NULL;
    it->job = NULL;
    job_close(job);
    item_answer(h, it, d, reason); /* reason is in job or on this stack */
}

static void on_job_exit(uv_process_t *p, int64_t status, int term_signal)
{
    struct ask_job *job = container_of(p, struct ask_job, proc);

    job->exited = 1;
    job->status = status;
    job->term_signal = term_signal;
    job_check(job);
}

static void job_alloc(uv_handle_t *hd, size_t suggested, uv_buf_t *buf)
{
    struct ask_job *job = hd->data;

    (void)suggested;
    if (job->line == JOB_LINE_READING)
        *buf = uv_buf_init(job->buf + job->len, (unsigned)(sizeof(job->buf) - job->len));
    else /* the line is parsed: discard into the whole buffer */
        *buf = uv_buf_init(job->buf, sizeof(job->buf));
}

static void on_job_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct ask_job *job = container_of(s, struct ask_job, out);
    const char *nl;

    (void)buf;
    if (nread == 0)
        return;
    if (nread < 0) {
        if (job->line == JOB_LINE_READING) {
            if (nread != UV_EOF)
                job->line = JOB_LINE_ERROR;
            else if (job->len > 0)
                job_parse_line(job, job->len); /* a last line without newline */
            else
                job->line = JOB_LINE_NONE;
        }
        job_close_handle((uv_handle_t *)&job->out);
        job_check(job);
        return;
    }
    if (job->line != JOB_LINE_READING)
        return; /* output after the first line is ignored */
    nl = memchr(job->buf + job->len, '\n', (size_t)nread);
    job->len += (size_t)nread;
    if (nl != NULL)
        job_parse_line(job, (size_t)(nl - job->buf));
    else if (job->len == sizeof(job->buf))
        job->line = JOB_LINE_TOOLONG;
    else
        return;
    job_check(job);
}

static void on_job_written(uv_write_t *req, int status)
{
    struct ask_job *job = container_of(req, struct ask_job, wreq);

    /* EPIPE: the child did not read its stdin; its exit decides. */
    (void)status;
    job_close_handle((uv_handle_t *)&job->in); /* EOF on the child's stdin */
}

/* Spawns the child for it. On failure the item is answered (deny). */
static void exec_start(struct ask_handler *h, struct ask_item *it)
{
    uv_process_options_t opts;
    uv_stdio_container_t stdio[3];
    char *args[2];
    struct ask_job *job;
    uv_buf_t buf;
    char why[160];
    int rc;

    job = calloc(1, sizeof(*job));
    if (job == NULL) {
        item_answer(h, it, ASK_DENY, "out of memory");
        return;
    }
    job->h = h;
    job->item = it;
    it->job = job;
    job->text = it->text; /* the write may outlive the item */
    it->text = NULL;
    uv_pipe_init(h->loop, &job->in, 0); /* cannot fail on Unix */
    uv_pipe_init(h->loop, &job->out, 0);
    job->in.data = job;
    job->out.data = job;
    job->next = h->exec.jobs;
    if (h->exec.jobs != NULL)
        h->exec.jobs->prev = job;
    h->exec.jobs = job;
    h->exec.running++;
    h->live += 3;

    memset(&opts, 0, sizeof(opts));
    memset(stdio, 0, sizeof(stdio));
    stdio[0].flags = UV_CREATE_PIPE | UV_READABLE_PIPE;
    stdio[0].data.stream = (uv_stream_t *)&job->in;
    stdio[1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
    stdio[1].data.stream = (uv_stream_t *)&job->out;
    stdio[2].flags = UV_INHERIT_FD;
    stdio[2].data.fd = STDERR_FILENO;
    args[0] = h->target;
    args[1] = NULL;
    opts.file = h->target; /* execvp: names without '/' are looked up in PATH */
    opts.args = args;
    opts.exit_cb = on_job_exit;
    opts.stdio = stdio;
    opts.stdio_count = 3;
    rc = uv_spawn(h->loop, &job->proc, &opts); /* initialises proc even on failure */
    job->proc.data = job;
    if (rc < 0) {
        job->exited = 1; /* nothing to reap */
        job->decided = 1;
        job->item = NULL;
        it->job = NULL;
        job_close(job);
        snprintf(why, sizeof(why), "cannot run the ask program: %s", uv_strerror(rc));
        item_answer(h, it, ASK_DENY, why);
        return;
    }
    buf = uv_buf_init(job->text, (unsigned)it->len);
    rc = uv_write(&job->wreq, (uv_stream_t *)&job->in, &buf, 1, on_job_written);
    if (rc < 0)
        job_close_handle((uv_handle_t *)&job->in);
    rc = uv_read_start((uv_stream_t *)&job->out, job_alloc, on_job_read);
    if (rc < 0) {
        job->line = JOB_LINE_ERROR;
        job_close_handle((uv_handle_t *)&job->out);
    }
}

/* Starts queued questions while there is room. */
static void exec_pump(struct ask_handler *h)
{
    while (!h->closing && h->exec.running < ASK_EXEC_RUNNING) {
        struct ask_item *it;

        for (it = h->head; it != NULL && it->job != NULL; it = it->next)
            ;
        if (it == NULL)
            return;
        exec_start(h, it); /* may answer it, and re-enter */
    }
}

static void exec_ask(struct ask_handler *h, const struct ask_question *q)
{
    struct ask_item *it = calloc(1, sizeof(*it));

    if (it == NULL || (it->text = question_json(q, &it->len)) == NULL) {
        free(it);
        (void)ask_broker_answer(h->broker, q->id, ASK_DENY, "cannot encode the question");
        return;
    }
    it->id = q->id;
    item_link(h, it);
    exec_pump(h);
}

static void exec_withdraw(struct ask_handler *h, struct ask_item *it)
{
    struct ask_job *job = it->job;

    item_unlink(h, it);
    item_free(it);
    if (job != NULL) {
        job->item = NULL;
        job_close(job); /* SIGKILL; handles close once it is reaped */
    }
}

/* Is PROGRAM something execvp could run? */
static int exec_findable(const char *prog)
{
    struct stat st;
    const char *path, *p;
    char buf[ASK_TARGET_MAX + 256];

    if (strchr(prog, '/') != NULL)
        return access(prog, X_OK) == 0 && stat(prog, &st) == 0 && S_ISREG(st.st_mode);
    path = getenv("PATH");
    if (path == NULL)
        path = "/bin:/usr/bin"; /* glibc execvp's default */
    for (p = path;; p++) {
        const char *end = strchr(p, ':');
        size_t dlen = end != NULL ? (size_t)(end - p) : strlen(p);
        int n;

        if (dlen == 0)
            n = snprintf(buf, sizeof(buf), "%s", prog);
        else
            n = snprintf(buf, sizeof(buf), "%.*s/%s", (int)dlen, p, prog);
        if (n > 0 && (size_t)n < sizeof(buf) && access(buf, X_OK) == 0 && stat(buf, &st) == 0 &&
            S_ISREG(st.st_mode))
            return 1;
        if (end == NULL)
            return 0;
        p = end;
    }
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
    handler_maybe_done(h);
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
        item_answer(h, it, ASK_DENY, why);
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
    if (answer_json(s, n, 1, &root, &id, &has_id, &d, &reason) < 0)
        return UV_EINVAL;
    if (reason != NULL)
        reason_copy(why, reason, strlen(reason));
    json_decref(root);
    it = item_find(h, id);
    if (it == NULL || it->conn != c || !it->sent)
        return 0; /* timed out meanwhile, or never asked: ignore */
    item_answer(h, it, d, reason != NULL ? why : NULL);
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

    if (it == NULL || (it->text = question_json(q, &it->len)) == NULL) {
        free(it);
        (void)ask_broker_answer(h->broker, q->id, ASK_DENY, "cannot encode the question");
        return;
    }
    c = h->sock.conn;
    if (c == NULL)
        c = sock_connect(h);
    if (c == NULL) {
        item_free(it);
        (void)ask_broker_answer(h->broker, q->id, ASK_DENY, "out of memory");
        return;
    }
    it->id = q->id;
    it->conn = c;
    item_link(h, it);
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
        tty_ask(h, q);
        break;
    case ASK_KIND_EXEC:
        exec_ask(h, q);
        break;
    case ASK_KIND_SOCKET:
        sock_ask(h, q);
        break;
    }
}

static void handler_withdraw(void *ctx, uint64_t id)
{
    struct ask_handler *h = ctx;
    struct ask_item *it = item_find(h, id);

    if (it == NULL)
        return;
    switch (h->kind) {
    case ASK_KIND_TTY:
        tty_withdraw(h, it);
        break;
    case ASK_KIND_EXEC:
        exec_withdraw(h, it);
        break;
    case ASK_KIND_SOCKET:
        item_unlink(h, it); /* an answer for it later is ignored */
        item_free(it);
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
        if (!exec_findable(target)) {
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
        (void)tty_open(h); /* no terminal: questions are denied */
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
        item_unlink(h, it);
        item_free(it);
    }
    for (job = h->exec.jobs; job != NULL; job = next) {
        next = job->next;
        job->item = NULL;
        job_close(job);
    }
    if (h->sock.conn != NULL)
        conn_close(h->sock.conn);
    if (h->tty.ok) {
        h->tty.ok = 0;
        uv_close((uv_handle_t *)&h->tty.pipe, on_handle_closed);
    }
    uv_close((uv_handle_t *)&h->timer, on_handle_closed);
}
