/* proxy/mailbox.h - the cross-thread mailbox of `sluice proxy --workers N`:
 * a queue of messages for one loop, woken by a uv_async_t, pushed to from
 * any thread under its mutex. The main loop has one (questions from the
 * workers' ask relays, workers done); each worker has one (new
 * configuration, stop, close all, nudge, answers). Used by proxy/server.c,
 * proxy/worker.c and proxy/askrelay.c, which depend on it and not on each
 * other. A message names its worker only as a tag (struct proxy_worker is
 * opaque here). */
#ifndef SLUICE_PROXY_MAILBOX_H
#define SLUICE_PROXY_MAILBOX_H

#include <stdint.h>
#include <uv.h>

struct proxy_worker;
struct proxy_service_conf;

enum mail_kind {
    MAIL_CONF,      /* main -> worker: conf */
    MAIL_STOP,      /* main -> worker: drain */
    MAIL_CLOSE_ALL, /* main -> worker: the drain time is up */
    MAIL_NUDGE,     /* main/worker -> worker: a connection ended elsewhere */
    MAIL_ANSWER,    /* main -> worker: answer to question id */
    MAIL_ASK,       /* worker -> main: question id (answer to reply) */
    MAIL_WITHDRAW,  /* worker -> main: question id ended */
    MAIL_DONE,      /* worker -> main: everything closed */
};

struct mailbox;

struct mail {
    struct mail *next;
    enum mail_kind kind;
    struct proxy_worker *w;          /* the worker it is from or for (a tag) */
    struct mailbox *reply;           /* MAIL_ASK: where the answer goes */
    struct proxy_service_conf *conf; /* MAIL_CONF: owned by the message */
    uint64_t id;
    int allow;
    uint16_t port;
    char *host, *protocol, *client, *reason;
};

struct mailbox {
    uv_mutex_t mu;
    uv_async_t async;
    struct mail *head, *tail;
    int closed; /* the async is closing: nothing more is queued */
};

/* A message of kind for (or from) worker w; NULL when out of memory. */
struct mail *mail_new(enum mail_kind kind, struct proxy_worker *w);
/* Frees m, its strings and its configuration. NULL is fine. */
void mail_free(struct mail *m);

/* On loop's thread: cb runs there with async.data = data. 0 or UV_E*. */
int mailbox_init(struct mailbox *q, uv_loop_t *loop, uv_async_cb cb, void *data);
/* From any thread: queues m; 0, or UV_EINVAL for NULL and UV_ECANCELED
 * when the mailbox is closed (m is then freed). */
int mailbox_post(struct mailbox *q, struct mail *m);
/* Takes every queued message (a list, oldest first). */
struct mail *mailbox_take(struct mailbox *q);
/* Closes the async (on its loop's thread); posts are refused from now on. */
void mailbox_close(struct mailbox *q);
/* Frees what is left and the mutex, once nobody can post any more. */
void mailbox_destroy(struct mailbox *q);
/* Frees a list of messages (from mailbox_take). */
void mail_free_list(struct mail *m);

#endif
