/* proxy/askrelay.h - one ask broker for every worker of `sluice proxy`
 * (proxy/askrelay.c). The worker side is the handler of a worker's own
 * broker: it posts each question to the main loop's mailbox; the main side
 * asks the one broker and posts the answer back to the worker's mailbox.
 * Depends on the mailbox only, not on the worker or the server. */
#ifndef SLUICE_PROXY_ASKRELAY_H
#define SLUICE_PROXY_ASKRELAY_H

#include "bridge/bridge.h"
#include "proxy/mailbox.h"

struct askrelay;
struct relay_wait;

/* Worker side (the worker's loop): the handler of broker b; questions go
 * to to_main tagged with w, their answers come back to reply. 0 or
 * UV_ENOMEM. */
int askrelay_new(struct ask_broker *b, struct mailbox *to_main, struct mailbox *reply,
                 struct proxy_worker *w, struct askrelay **out);
/* An answer from the main loop (MAIL_ANSWER) for the worker's broker. */
void askrelay_answer(struct askrelay *r, uint64_t id, int allow, const char *reason);
void askrelay_free(struct askrelay *r);

/* Main side (the main loop): the workers' questions waiting at the one
 * broker. */
struct askrelay_hub {
    struct relay_wait *waits;
};

/* A question from a worker (MAIL_ASK): asked of broker, or denied at once
 * when broker is NULL (none, or shutting down). */
void askrelay_main_ask(struct askrelay_hub *hub, struct ask_broker *broker, struct mail *m);
/* A withdrawal (MAIL_WITHDRAW). */
void askrelay_main_withdraw(struct askrelay_hub *hub, struct mail *m);
/* The worker is done: its questions are dropped. */
void askrelay_main_forget(struct askrelay_hub *hub, struct proxy_worker *w);

#endif
