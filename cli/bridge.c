/* cli/bridge.c - `sluice bridge`: a native socat replacement between unix
 * sockets and TCP.
 *
 *   sluice bridge [--max-conns N] [--idle SECONDS] [--connect-timeout SECONDS]
 *                 [--quiet] LISTEN CONNECT
 *
 * One process, one libuv loop, no fork per connection. Each accepted
 * connection is a struct bridge_conn embedding a relay (a = the client, of
 * the listener's kind; b = the upstream, of CONNECT's kind): accept, dial
 * CONNECT, adopt the socket as b, splice. A connection whose dial fails is
 * closed cleanly: what the client already sent is read and dropped and our
 * write half is shut down first, so the client sees an EOF rather than a
 * reset (closing a socket with unread data sends RST), and the socket is
 * closed when the client closes its side or after BRIDGE_LINGER_MS.
 *
 * Limits. With --max-conns N connections live (dialing or relaying) the
 * listener is paused: further clients wait in the kernel backlog and are
 * served as connections end.
 *
 * Logs (stderr): a startup line, and one line per connection when it ends:
 * time, id, peer, bytes each way, duration, how it ended.
 *
 * Exit status: 0 after SIGINT/SIGTERM (everything closed, loop closed), 1 if
 * LISTEN cannot be opened, 2 for bad arguments.
 */
#include "bridge/bridge.h"
#include "cli/cli.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

#include "policy/policy.h"

#define container_of(ptr, type, member) ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

#define BRIDGE_DEFAULT_MAX_CONNS 1024u
#define BRIDGE_MAX_MAX_CONNS 1000000u
#define BRIDGE_DEFAULT_CONNECT_MS 10000u
#define BRIDGE_LINGER_MS 1000u   /* how long a refused client gets to close first */
#define BRIDGE_OOM_RETRY_MS 100u /* accept retry after an allocation failure */

struct bridge;

/* One client connection. Owned by the bridge's list from accept to the
 * relay's last close callback, where it is logged and freed (R5). */
struct bridge_conn {
    struct relay relay; /* a = client, b = upstream, timer */
    struct bridge *br;
    struct bridge_conn *prev, *next;
    struct dialer *dialer; /* dialing; NULL once the callback ran or was cancelled */
    uv_shutdown_t shut;    /* dial failed: our FIN to the client */
    uint64_t id;
    int dial_status;   /* 0, or the UV_E* the dial failed with */
    int accept_status; /* 0, or the UV_E* listener_accept failed with */
    int stopped;       /* closed because sluice is shutting down */
    char peer[INET6_ADDRSTRLEN + 8];
};

struct bridge {
    uv_loop_t loop;
    uv_signal_t sigint, sigterm;
    uv_timer_t retry; /* OOM: offer the held connection again later */
    struct listener *l;
    struct endpoint listen_ep, connect_ep;
    struct dialer_target target;
    enum relay_kind b_kind;
    struct bridge_conn *conns;
    unsigned live, max_conns, idle_ms, connect_ms;
    uint64_t next_id;
    int quiet, stopping, paused;
};

void cli_bridge_usage(FILE *f)
{
    fputs("usage: sluice bridge [--max-conns N] [--idle SECONDS] [--connect-timeout SECONDS]\n"
          "                     [--quiet] LISTEN CONNECT\n"
          "\n"
          "Relays every connection accepted on LISTEN to CONNECT, both ways, in one process\n"
          "(a native replacement for 'socat UNIX-LISTEN:path,fork TCP:host:port').\n"
          "\n"
          "endpoints:\n"
          "  tcp:IPV4:PORT, tcp:[IPV6]:PORT  an IP address (no names); port 0 to LISTEN on any\n"
          "  unix:PATH                       a unix socket; LISTEN creates it with mode 0600\n"
          "                                  in a directory owned by you or root, replaces only\n"
          "                                  a stale socket and removes it on exit\n"
          "  fd:N, fd:NAME                   LISTEN only: an inherited listening socket, or the\n"
          "                                  one systemd passed as NAME (LISTEN_FDNAMES)\n"
          "\n"
          "options:\n"
          "  --max-conns N              connections at once; more wait to be accepted\n"
          "                             (default 1024)\n"
          "  --idle SECONDS             close a connection after SECONDS without a byte\n"
          "                             either way (default 0: never)\n"
          "  --connect-timeout SECONDS  give up connecting to CONNECT after SECONDS\n"
          "                             (default 10)\n"
          "  -q, --quiet                no startup line and no per-connection lines\n"
          "  -h, --help                 show this help\n"
          "\n"
          "Each connection is logged to stderr when it ends: time, id, peer, bytes\n"
          "client->upstream ('up') and upstream->client ('down'), duration and how it ended.\n"
          "SIGINT or SIGTERM closes the listener and every connection, then exits 0.\n"
          "\n"
          "exit status: 0 stopped by a signal, 1 cannot listen, 2 bad arguments\n",
          f);
}

/* ------------------------------------------------------------------------ */
/* Logging                                                                   */

/* Copies s with control, non-ASCII and backslash bytes escaped, so a path
 * cannot inject lines into logs or terminals. */
static const char *escaped(const char *in, char *buf, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;

    for (; *in != '\0' && o + 5 < len; in++) {
        unsigned char c = (unsigned char)*in;
        if (c < 0x20 || c >= 0x7f || c == '\\') {
            buf[o++] = '\\';
            buf[o++] = 'x';
            buf[o++] = hex[c >> 4];
            buf[o++] = hex[c & 15];
        } else {
            buf[o++] = (char)c;
        }
    }
    buf[o] = '\0';
    return buf;
}

static const char *ep_text(const struct endpoint *ep, char *buf, size_t len)
{
    char raw[ENDPOINT_STR_MAX];
    return escaped(endpoint_str(ep, raw, sizeof(raw)), buf, len);
}

/* "2025-01-31T12:34:56.789Z" */
static void timestamp(char *buf, size_t len)
{
    struct timespec ts;
    struct tm tm;
    char base[32];

    clock_gettime(CLOCK_REALTIME, &ts);
    if (gmtime_r(&ts.tv_sec, &tm) == NULL ||
        strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm) == 0) {
        snprintf(buf, len, "-");
        return;
    }
    snprintf(buf, len, "%s.%03ldZ", base, ts.tv_nsec / 1000000L);
}

static void log_conn(const struct bridge_conn *c)
{
    const struct relay *r = &c->relay;
    char when[48], how[96];
    uint64_t ms = uv_now(r->timer.loop) - r->started_ms;

    if (c->br->quiet)
        return;
    if (c->accept_status < 0)
        snprintf(how, sizeof(how), "accept failed: %s", uv_err_name(c->accept_status));
    else if (c->dial_status < 0)
        snprintf(how, sizeof(how), "connect failed: %s", uv_err_name(c->dial_status));
    else if (c->stopped && r->end == RELAY_END_OWNER)
        snprintf(how, sizeof(how), "closed at shutdown");
    else if (c->stopped)
        snprintf(how, sizeof(how), "closed at shutdown before connecting");
    else
        relay_end_text(r, how, sizeof(how));
    timestamp(when, sizeof(when));
    fprintf(stderr, "%s conn %llu from %s: %llu bytes up, %llu bytes down, %llu ms, %s\n", when,
            (unsigned long long)c->id, c->peer, (unsigned long long)r->a.nread,
            (unsigned long long)r->b.nread, (unsigned long long)ms, how);
}

/* ------------------------------------------------------------------------ */
/* Connections                                                               */

static void on_conn_closed(struct relay *r)
{
    struct bridge_conn *c = r->data;
    struct bridge *br = c->br;

    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        br->conns = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    log_conn(c);
    free(c);
    br->live--;
    if (br->paused && !br->stopping && br->live < br->max_conns) {
        br->paused = 0;
        listener_resume(br->l); /* may accept (on_accept) before it returns */
    }
}

/* Dial failed: drop what the client sends, close once it has closed. One
 * loop, so one sink serves every draining connection. */
static void on_drain_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    static char sink[64 * 1024];

    (void)h;
    (void)suggested;
    *buf = uv_buf_init(sink, sizeof(sink));
}

static void on_drain_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct relay *r = container_of(s, struct relay, a.u.s);
    struct bridge_conn *c = r->data;

    (void)buf;
    if (nread < 0)
        relay_close(r, c->dial_status); /* EOF or error: the client is gone */
}

static void on_drain_shutdown(uv_shutdown_t *req, int status)
{
    (void)req;
    (void)status; /* UV_ECANCELED when closed first; nothing else to do */
}

static void on_linger_timeout(uv_timer_t *t)
{
    struct relay *r = container_of(t, struct relay, timer);
    struct bridge_conn *c = r->data;
    relay_close(r, c->dial_status);
}

static void close_refused(struct bridge_conn *c)
{
    uv_stream_t *a = &c->relay.a.u.s;

    if (c->br->stopping || uv_read_start(a, on_drain_alloc, on_drain_read) != 0 ||
        uv_shutdown(&c->shut, a, on_drain_shutdown) != 0) {
        relay_close(&c->relay, c->dial_status);
        return;
    }
    uv_timer_start(&c->relay.timer, on_linger_timeout, BRIDGE_LINGER_MS, 0);
}

static void on_dialed(void *arg, int status, int fd, size_t index)
{
    struct bridge_conn *c = arg;
    int rc;

    (void)index;
    c->dialer = NULL;
    if (status < 0) {
        c->dial_status = status;
        close_refused(c);
        return;
    }
    rc = relay_open_b(&c->relay, fd); /* closes fd on error */
    if (rc == 0)
        rc = relay_start(&c->relay, c->br->idle_ms);
    if (rc < 0)
        relay_close(&c->relay, rc);
}

static void peer_name(struct bridge_conn *c)
{
    struct sockaddr_storage ss;
    int len = (int)sizeof(ss);
    char ip[INET6_ADDRSTRLEN];
    struct policy_addr a;

    snprintf(c->peer, sizeof(c->peer), "unix");
    if (c->relay.a.u.h.type != UV_TCP)
        return;
    memset(&ss, 0, sizeof(ss));
    if (uv_tcp_getpeername(&c->relay.a.u.tcp, (struct sockaddr *)&ss, &len) != 0) {
        snprintf(c->peer, sizeof(c->peer), "?");
        return;
    }
    memset(&a, 0, sizeof(a));
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)(const void *)&ss;
        a.family = 4;
        memcpy(a.bytes, &s4->sin_addr, 4);
        snprintf(c->peer, sizeof(c->peer), "%s:%u", policy_addr_str(&a, ip, sizeof(ip)),
                 (unsigned)ntohs(s4->sin_port));
    } else if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)(const void *)&ss;
        a.family = 6;
        memcpy(a.bytes, &s6->sin6_addr, 16);
        snprintf(c->peer, sizeof(c->peer), "[%s]:%u", policy_addr_str(&a, ip, sizeof(ip)),
                 (unsigned)ntohs(s6->sin6_port));
    }
}

static void on_retry(uv_timer_t *t)
{
    struct bridge *br = container_of(t, struct bridge, retry);

    if (!br->stopping && br->paused && br->live < br->max_conns) {
        br->paused = 0;
        listener_resume(br->l);
    }
}

static void on_accept(struct listener *l, void *arg)
{
    struct bridge *br = arg;
    struct bridge_conn *c;
    int rc;

    if (br->stopping)
        return;
    c = calloc(1, sizeof(*c));
    if (c == NULL) {
        /* Leave it to the kernel and libuv (held) and try again shortly. */
        fprintf(stderr, "sluice: bridge: out of memory, not accepting for a moment\n");
        listener_pause(l);
        br->paused = 1;
        uv_timer_start(&br->retry, on_retry, BRIDGE_OOM_RETRY_MS, 0);
        return;
    }
    c->br = br;
    c->id = ++br->next_id;
    c->next = br->conns;
    if (br->conns != NULL)
        br->conns->prev = c;
    br->conns = c;
    br->live++;
    relay_init(&br->loop, &c->relay, (enum relay_kind)listener_kind(l), br->b_kind, on_conn_closed,
               c);
    if (br->live >= br->max_conns) {
        listener_pause(l);
        br->paused = 1;
    }

    rc = listener_accept(l, &c->relay.a.u.s);
    if (rc < 0) {
        snprintf(c->peer, sizeof(c->peer), "?");
        c->accept_status = rc;
        relay_close(&c->relay, rc);
        return;
    }
    if (!br->quiet)
        peer_name(c); /* only the log line needs it: a getpeername() saved */
    rc = dialer_start(&c->dialer, &br->loop, &br->target, 1, br->connect_ms, on_dialed, c);
    if (rc < 0) {
        c->dialer = NULL;
        c->dial_status = rc;
        close_refused(c);
    }
}

/* ------------------------------------------------------------------------ */
/* Shutdown                                                                  */

static void on_handle_closed(uv_handle_t *h)
{
    (void)h;
}

static void bridge_stop(struct bridge *br)
{
    struct bridge_conn *c;

    if (br->stopping)
        return;
    br->stopping = 1;
    listener_close(br->l, NULL, NULL);
    br->l = NULL;
    for (c = br->conns; c != NULL; c = c->next) {
        if (c->dialer != NULL) {
            dialer_cancel(c->dialer);
            c->dialer = NULL;
        }
        c->stopped = c->dial_status == 0 && c->accept_status == 0 && !c->relay.closing;
        relay_close(&c->relay, UV_ECANCELED);
    }
    uv_close((uv_handle_t *)&br->sigint, on_handle_closed);
    uv_close((uv_handle_t *)&br->sigterm, on_handle_closed);
    uv_close((uv_handle_t *)&br->retry, on_handle_closed);
}

static void on_signal(uv_signal_t *s, int signum)
{
    struct bridge *br = s->data;

    if (!br->quiet)
        fprintf(stderr, "sluice: bridge: %s, closing %u connection%s\n",
                signum == SIGINT ? "SIGINT" : "SIGTERM", br->live, br->live == 1 ? "" : "s");
    bridge_stop(br);
}

/* ------------------------------------------------------------------------ */
/* Arguments                                                                 */

/* Seconds with up to three decimals ("10", "0.5", "1.250") to ms. */
static int parse_seconds(const char *s, unsigned *ms)
{
    unsigned long whole = 0, frac = 0;
    size_t i = 0, nfrac = 0;

    if (s[0] < '0' || s[0] > '9')
        return -1;
    for (; s[i] >= '0' && s[i] <= '9'; i++) {
        whole = whole * 10 + (unsigned long)(s[i] - '0');
        if (whole > 4000000ul)
            return -1;
    }
    if (s[i] == '.') {
        for (i++; s[i] >= '0' && s[i] <= '9'; i++) {
            if (++nfrac > 3)
                return -1;
            frac = frac * 10 + (unsigned long)(s[i] - '0');
        }
        if (nfrac == 0)
            return -1;
    }
    if (s[i] != '\0')
        return -1;
    for (; nfrac < 3; nfrac++)
        frac *= 10;
    *ms = (unsigned)(whole * 1000 + frac);
    return 0;
}

static int parse_count(const char *s, unsigned max, unsigned *out)
{
    unsigned long v = 0;
    size_t i;

    if (s[0] < '1' || s[0] > '9')
        return -1;
    for (i = 0; s[i] != '\0'; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (unsigned long)(s[i] - '0');
        if (v > max)
            return -1;
    }
    *out = (unsigned)v;
    return 0;
}

/* escaped() into one of two rotating buffers, for error messages. */
static const char *esc(const char *s)
{
    static char bufs[2][256];
    static unsigned next;

    return escaped(s, bufs[next++ % 2], sizeof(bufs[0]));
}

__attribute__((format(printf, 1, 2))) static int usage_error(const char *fmt, ...)
{
    va_list ap;

    fputs("sluice: bridge: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\n\n", stderr);
    cli_bridge_usage(stderr);
    return 2;
}

/* Does opt (e.g. "--idle") match arg as "--idle" or "--idle=..."? Sets *val
 * to the inline value or the next argument. 1 matched, 0 no, -1 no value. */
static int take_opt(const char *opt, int argc, char **argv, int *i, const char **val)
{
    size_t n = strlen(opt);
    const char *arg = argv[*i];

    if (strncmp(arg, opt, n) != 0)
        return 0;
    if (arg[n] == '=') {
        *val = arg + n + 1;
        return 1;
    }
    if (arg[n] != '\0')
        return 0;
    if (*i + 1 >= argc)
        return -1;
    *val = argv[++*i];
    return 1;
}

static int same_endpoint(const struct endpoint *a, const struct endpoint *b)
{
    if (a->kind != b->kind)
        return 0;
    if (a->kind == ENDPOINT_UNIX)
        return strcmp(a->path, b->path) == 0;
    if (a->kind == ENDPOINT_TCP)
        return a->port != 0 && a->port == b->port && a->addr.family == b->addr.family &&
               memcmp(a->addr.bytes, b->addr.bytes, 16) == 0;
    return 0;
}

/* Parses argv into br. 0, 1 for --help (printed), or 2 (message printed). */
static int parse_args(struct bridge *br, int argc, char **argv)
{
    const char *pos[2] = {NULL, NULL}, *why = NULL, *val = NULL;
    size_t npos = 0;
    int i, m, only_pos = 0;

    br->max_conns = BRIDGE_DEFAULT_MAX_CONNS;
    br->connect_ms = BRIDGE_DEFAULT_CONNECT_MS;
    br->idle_ms = 0;
    for (i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (only_pos || arg[0] != '-' || arg[1] == '\0') {
            if (npos == 2)
                return usage_error("unexpected argument '%s'", esc(arg));
            pos[npos++] = arg;
            continue;
        }
        if (strcmp(arg, "--") == 0) {
            only_pos = 1;
        } else if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            cli_bridge_usage(stdout);
            return 1;
        } else if (strcmp(arg, "-q") == 0 || strcmp(arg, "--quiet") == 0) {
            br->quiet = 1;
        } else if ((m = take_opt("--max-conns", argc, argv, &i, &val)) != 0) {
            if (m < 0)
                return usage_error("option '%s' needs a value", esc(arg));
            if (parse_count(val, BRIDGE_MAX_MAX_CONNS, &br->max_conns) < 0)
                return usage_error("invalid --max-conns '%s' (a number from 1 to 1000000)",
                                   esc(val));
        } else if ((m = take_opt("--idle", argc, argv, &i, &val)) != 0) {
            if (m < 0)
                return usage_error("option '%s' needs a value", esc(arg));
            if (parse_seconds(val, &br->idle_ms) < 0)
                return usage_error("invalid --idle '%s' (seconds, e.g. 300 or 0.5; 0 = off)",
                                   esc(val));
        } else if ((m = take_opt("--connect-timeout", argc, argv, &i, &val)) != 0) {
            if (m < 0)
                return usage_error("option '%s' needs a value", esc(arg));
            if (parse_seconds(val, &br->connect_ms) < 0 || br->connect_ms == 0)
                return usage_error("invalid --connect-timeout '%s' (seconds > 0, e.g. 10 or 0.5)",
                                   esc(val));
        } else {
            return usage_error("unknown option '%s'", esc(arg));
        }
    }
    if (npos < 2)
        return usage_error("%s", npos == 0 ? "missing LISTEN and CONNECT endpoints"
                                           : "missing CONNECT endpoint");
    if (endpoint_parse(pos[0], 1, &br->listen_ep, &why) < 0)
        return usage_error("invalid LISTEN endpoint '%s': %s", esc(pos[0]), why);
    if (endpoint_parse(pos[1], 0, &br->connect_ep, &why) < 0)
        return usage_error("invalid CONNECT endpoint '%s': %s", esc(pos[1]), why);
    if (same_endpoint(&br->listen_ep, &br->connect_ep))
        return usage_error("LISTEN and CONNECT are the same endpoint '%s'", esc(pos[0]));
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The command                                                               */

static void print_listening(const struct bridge *br)
{
    char l[ENDPOINT_STR_MAX * 4], c[ENDPOINT_STR_MAX * 4], ip[INET6_ADDRSTRLEN];
    struct policy_addr a;
    uint16_t port;

    if (br->quiet)
        return;
    ep_text(&br->listen_ep, l, sizeof(l));
    if (listener_address(br->l, &a, &port) == 0) {
        policy_addr_str(&a, ip, sizeof(ip));
        snprintf(l, sizeof(l), a.family == 6 ? "tcp:[%s]:%u" : "tcp:%s:%u", ip, (unsigned)port);
        if (br->listen_ep.kind == ENDPOINT_FD) {
            size_t n = strlen(l);
            snprintf(l + n, sizeof(l) - n, " (fd:%d)", br->listen_ep.fd);
        }
    }
    ep_text(&br->connect_ep, c, sizeof(c));
    fprintf(stderr, "sluice bridge: listening on %s, forwarding to %s (at most %u connections)\n",
            l, c, br->max_conns);
}

static void close_leftover(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

int cli_bridge(int argc, char **argv)
{
    struct bridge *br;
    struct sigaction sa;
    const char *why = NULL;
    char l[ENDPOINT_STR_MAX * 4];
    int rc, status = 0;

    br = calloc(1, sizeof(*br));
    if (br == NULL) {
        fputs("sluice: bridge: out of memory\n", stderr);
        return 1;
    }
    rc = parse_args(br, argc, argv);
    if (rc != 0) {
        free(br);
        return rc == 1 ? 0 : 2;
    }
    if (br->connect_ep.kind == ENDPOINT_UNIX) {
        br->target.is_unix = 1;
        br->target.path = br->connect_ep.path;
        br->b_kind = RELAY_PIPE;
    } else {
        br->target.addr = br->connect_ep.addr;
        br->target.port = br->connect_ep.port;
        br->b_kind = RELAY_TCP;
    }

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_IGN; /* a peer that goes away must not kill us */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGPIPE, &sa, NULL);

    rc = uv_loop_init(&br->loop);
    if (rc < 0) {
        fprintf(stderr, "sluice: bridge: cannot start the event loop: %s\n", uv_strerror(rc));
        free(br);
        return 1;
    }
    rc = listener_open(&br->l, &br->loop, &br->listen_ep, on_accept, br, &why);
    if (rc < 0) {
        fprintf(stderr, "sluice: bridge: cannot listen on %s: %s (%s)\n",
                ep_text(&br->listen_ep, l, sizeof(l)), why != NULL ? why : uv_strerror(rc),
                uv_err_name(rc));
        uv_run(&br->loop, UV_RUN_DEFAULT); /* a listener libuv refused frees itself */
        uv_loop_close(&br->loop);
        free(br);
        return 1;
    }
    uv_signal_init(&br->loop, &br->sigint);
    uv_signal_init(&br->loop, &br->sigterm);
    uv_timer_init(&br->loop, &br->retry);
    br->sigint.data = br;
    br->sigterm.data = br;
    uv_signal_start(&br->sigint, on_signal, SIGINT);
    uv_signal_start(&br->sigterm, on_signal, SIGTERM);
    print_listening(br);

    uv_run(&br->loop, UV_RUN_DEFAULT);

    rc = uv_loop_close(&br->loop);
    if (rc != 0) {
        fprintf(stderr, "sluice: bridge: handles left open at exit (%s)\n", uv_err_name(rc));
        uv_walk(&br->loop, close_leftover, NULL);
        uv_run(&br->loop, UV_RUN_DEFAULT);
        uv_loop_close(&br->loop);
        status = 1;
    }
    relay_release_caches(); /* the buffers and pipes kept for the next connection */
    free(br);
    return status;
}
