/* bridge/ask_handler-int.h - what the ask handler's files share:
 * ask_handler.c (items, JSON, the socket handler, dispatch, open and close),
 * ask_tty.c (the terminal) and ask_exec.c (one child per question). See
 * ask_handler.c for the design. */
#ifndef SLUICE_BRIDGE_ASK_HANDLER_INT_H
#define SLUICE_BRIDGE_ASK_HANDLER_INT_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include <jansson.h>

#include "bridge/bridge.h"
#include "policy/policy.h"

#include "common/common.h"

#define ASK_EXEC_RUNNING 16                   /* children at once */
#define ASK_EXEC_LINE_MAX 4096                /* first line of a child's stdout */
#define ASK_SOCK_LINE_MAX ((size_t)64 * 1024) /* one answer line on the socket */
#define ASK_TTY_LINE_MAX 256                  /* one answer typed on the terminal */
#define ASK_TTY_ATTEMPTS 3                    /* invalid answers before a deny */
#define ASK_TARGET_MAX 4096                   /* PROGRAM or PATH */
#define ASK_PROMPT_FIELD 300                  /* each field of the prompt */

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

/* ask_handler.c */
char *ask__question_json(const struct ask_question *q, size_t *len);
int ask__answer_json(const char *s, size_t len, int need_id, json_t **root, uint64_t *id,
                     int *has_id, enum ask_decision *d, const char **reason);
struct ask_item *ask__item_find(const struct ask_handler *h, uint64_t id);
void ask__handler_maybe_done(struct ask_handler *h);
void ask__item_answer(struct ask_handler *h, struct ask_item *it, enum ask_decision d,
                      const char *reason);
void ask__item_free(struct ask_item *it);
void ask__item_link(struct ask_handler *h, struct ask_item *it);
void ask__item_unlink(struct ask_handler *h, struct ask_item *it);
void ask__on_handle_closed(uv_handle_t *hd);
void ask__reason_copy(char dst[ASK_REASON_MAX + 1], const char *src, size_t len);

/* ask_tty.c */
int ask__tty_open(struct ask_handler *h);
void ask__tty_ask(struct ask_handler *h, const struct ask_question *q);
void ask__tty_withdraw(struct ask_handler *h, struct ask_item *it);

/* ask_exec.c */
int ask__exec_findable(const char *prog);
void ask__exec_ask(struct ask_handler *h, const struct ask_question *q);
void ask__exec_withdraw(struct ask_handler *h, struct ask_item *it);
void ask__job_close(struct ask_job *job);

#endif
