/* bridge/ask_tty.c - the tty ask handler: one prompt at a time on /dev/tty
 * (see ask_handler.c for the design). */
#include "bridge/ask_handler-int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "common/common.h"

static const char tty_none_reason[] = "no terminal to ask on (--ask tty)";

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
    ask__item_answer(h, it, d, reason);
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
    uv_close((uv_handle_t *)&h->tty.pipe, ask__on_handle_closed);
    /* Re-read the head: answers may re-enter (new asks are denied at once). */
    while ((it = h->head) != NULL)
        ask__item_answer(h, it, ASK_DENY, tty_none_reason);
}

void ask__tty_ask(struct ask_handler *h, const struct ask_question *q)
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
    ask__item_link(h, it);
    tty_schedule(h);
}

void ask__tty_withdraw(struct ask_handler *h, struct ask_item *it)
{
    int current = it == h->head && h->tty.prompting;

    ask__item_unlink(h, it);
    ask__item_free(it);
    if (current) {
        h->tty.prompting = 0;
        tty_stop_reading(h);
        tty_write(h, "timed out, denied\n");
        tty_schedule(h);
    }
}

int ask__tty_open(struct ask_handler *h)
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
        uv_close((uv_handle_t *)&h->tty.pipe, ask__on_handle_closed);
        return 0;
    }
    h->tty.ok = 1;
    return 0;
}
