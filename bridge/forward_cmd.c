/* bridge/forward_cmd.c - the life of `sluice bridge` (cli/bridge.c parses
 * its options): one loop, one listener, one forwarder (bridge/forward.c),
 * a start-up line, and SIGINT/SIGTERM closing the listener and every
 * connection before the loop ends. No fork per connection. */
#include "bridge/forward.h"

#include "common/common.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct bridge_srv {
    uv_loop_t loop;
    uv_signal_t sigint, sigterm;
    struct listener *l;
    struct forwarder *f;
    struct forward_cmd *cmd;
};

static const char *ep_text(const struct endpoint *ep, char *buf, size_t len)
{
    char raw[ENDPOINT_STR_MAX];

    return common_escape(endpoint_str(ep, raw, sizeof(raw)), buf, len);
}

static void on_accept(struct listener *l, void *arg)
{
    struct bridge_srv *b = arg;

    forwarder_accept(b->f, l);
}

static void on_handle_closed(uv_handle_t *h)
{
    (void)h;
}

static void on_signal(uv_signal_t *s, int signum)
{
    struct bridge_srv *b = s->data;
    size_t live = forwarder_live(b->f);

    if (!b->cmd->quiet)
        fprintf(stderr, "sluice: bridge: %s, closing %zu connection%s\n",
                signum == SIGINT ? "SIGINT" : "SIGTERM", live, live == 1 ? "" : "s");
    if (b->l == NULL)
        return;
    listener_close(b->l, NULL, NULL);
    b->l = NULL;
    forwarder_close(b->f, NULL, NULL);
    uv_close((uv_handle_t *)&b->sigint, on_handle_closed);
    uv_close((uv_handle_t *)&b->sigterm, on_handle_closed);
}

static void print_listening(const struct bridge_srv *b)
{
    const struct forward_cmd *cmd = b->cmd;
    char l[ENDPOINT_STR_MAX * 4], c[ENDPOINT_STR_MAX * 4], ip[64];
    struct policy_addr a;
    uint16_t port;

    if (cmd->quiet)
        return;
    ep_text(&cmd->listen, l, sizeof(l));
    if (listener_address(b->l, &a, &port) == 0) {
        policy_addr_str(&a, ip, sizeof(ip));
        snprintf(l, sizeof(l), a.family == 6 ? "tcp:[%s]:%u" : "tcp:%s:%u", ip, (unsigned)port);
        if (cmd->listen.kind == ENDPOINT_FD) {
            size_t n = strlen(l);
            snprintf(l + n, sizeof(l) - n, " (fd:%d)", cmd->listen.fd);
        }
    }
    ep_text(&cmd->fwd.connect, c, sizeof(c));
    fprintf(stderr, "sluice bridge: listening on %s, forwarding to %s (at most %u connections)\n",
            l, c, cmd->fwd.max_conns);
}

static void close_leftover(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

/* Opens the listener; 0, or 1 after a message. */
static int open_listener(struct bridge_srv *b)
{
    const char *why = NULL;
    char l[ENDPOINT_STR_MAX * 4];
    int rc = listener_open(&b->l, &b->loop, &b->cmd->listen, on_accept, b, &why);

    if (rc == 0)
        return 0;
    b->l = NULL;
    fprintf(stderr, "sluice: bridge: cannot listen on %s: %s (%s)\n",
            ep_text(&b->cmd->listen, l, sizeof(l)), why != NULL ? why : uv_strerror(rc),
            uv_err_name(rc));
    return 1;
}

int forward_cmd_run(struct forward_cmd *cmd)
{
    struct bridge_srv *b = calloc(1, sizeof(*b));
    struct sigaction sa;
    int rc, status = 0;

    if (b == NULL) {
        fputs("sluice: bridge: out of memory\n", stderr);
        return 1;
    }
    b->cmd = cmd;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_IGN; /* a peer that goes away must not kill us */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGPIPE, &sa, NULL);
    rc = uv_loop_init(&b->loop);
    if (rc < 0) {
        fprintf(stderr, "sluice: bridge: cannot start the event loop: %s\n", uv_strerror(rc));
        free(b);
        return 1;
    }
    rc = forwarder_new(&b->f, &b->loop, &cmd->fwd);
    if (rc < 0 || open_listener(b) != 0) {
        if (rc < 0)
            fprintf(stderr, "sluice: bridge: %s\n", uv_strerror(rc));
        else
            forwarder_close(b->f, NULL, NULL);
        uv_run(&b->loop, UV_RUN_DEFAULT); /* a listener libuv refused frees itself */
        uv_loop_close(&b->loop);
        free(b);
        return 1;
    }
    uv_signal_init(&b->loop, &b->sigint);
    uv_signal_init(&b->loop, &b->sigterm);
    b->sigint.data = b->sigterm.data = b;
    uv_signal_start(&b->sigint, on_signal, SIGINT);
    uv_signal_start(&b->sigterm, on_signal, SIGTERM);
    print_listening(b);

    uv_run(&b->loop, UV_RUN_DEFAULT);

    rc = uv_loop_close(&b->loop);
    if (rc != 0) {
        fprintf(stderr, "sluice: bridge: handles left open at exit (%s)\n", uv_err_name(rc));
        uv_walk(&b->loop, close_leftover, NULL);
        uv_run(&b->loop, UV_RUN_DEFAULT);
        uv_loop_close(&b->loop);
        status = 1;
    }
    relay_release_caches(); /* the buffers and pipes kept for the next connection */
    free(b);
    return status;
}
