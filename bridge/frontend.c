/* bridge/frontend.c - what the front ends (HTTP, SOCKS5, the bridge
 * forwarder, transparent mode) share: the list of live connections, the
 * credential check (peer names: common/), and the connection base (struct
 * frontend_conn): id, peer, start time, its own timer, the log fields and
 * records, and the end of the close (the CLOSE record, leaving the list,
 * release, conn_ended). A front end with a client stream embeds struct
 * frontend_conn, calls frontend_conn_start() at accept and
 * common_peer_name() into c->client, fills the log fields as it decides
 * (frontend_conn_note() for an egress outcome, frontend_conn_emit() for the
 * DECISION record), closes the timer when the relay takes over, and calls
 * frontend_conn_relay_closed() from the relay's close callback. One
 * without a stream (transparent mode's connect(): no timer, no relay, no
 * close record) takes frontend_conn_begin() and frontend_conn_clear()
 * only. */
#include "bridge/bridge.h"

#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/common.h"

void frontend_init(struct frontend *f, uv_loop_t *loop, uint64_t *next_id)
{
    memset(f, 0, sizeof(*f));
    f->loop = loop;
    f->conns.prev = f->conns.next = &f->conns;
    f->next_id = next_id;
    f->handshake_timeout_ms = 10000;
    f->head_timeout_ms = 10000;
    f->max_head_bytes = 8192;
    f->max_conns = 1024;
}

void frontend_add(struct frontend *f, struct frontend_conn *c)
{
    c->next = &f->conns;
    c->prev = f->conns.prev;
    f->conns.prev->next = c;
    f->conns.prev = c;
    f->nconns++;
}

void frontend_remove(struct frontend *f, struct frontend_conn *c)
{
    if (c->next == NULL)
        return;
    c->prev->next = c->next;
    c->next->prev = c->prev;
    c->prev = c->next = NULL;
    f->nconns--;
}

void frontend_close_all(struct frontend *f)
{
    struct frontend_conn *c = f->conns.next;

    /* force_close never frees synchronously (libuv close callbacks run
     * later), so the list stays valid while we walk it */
    while (c != &f->conns) {
        struct frontend_conn *next = c->next;
        c->force_close(c);
        c = next;
    }
}

int frontend_secret_equal(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
    const volatile uint8_t *va = a, *vb = b;
    size_t n = alen > blen ? alen : blen;
    unsigned diff = 0;

    /* Over the longer length, the shorter side padded with zeros: the loop
     * runs the same number of times whether or where the contents differ.
     * The branches depend on lengths only. */
    for (size_t i = 0; i < n; i++) {
        unsigned x = i < alen ? va[i] : 0u;
        unsigned y = i < blen ? vb[i] : 0u;
        diff |= x ^ y;
    }
    /* The length check last, folded in without a branch of its own. */
    diff |= (unsigned)(alen != blen);
    return diff == 0;
}

int frontend_auth_ok(const struct frontend *f, const uint8_t *user, size_t ulen,
                     const uint8_t *pass, size_t plen)
{
    int u, p;

    if (f->auth_user == NULL || f->auth_pass == NULL)
        return 0;
    /* both compared, always: no early exit on a wrong user name */
    u = frontend_secret_equal(user, ulen, (const uint8_t *)f->auth_user, strlen(f->auth_user));
    p = frontend_secret_equal(pass, plen, (const uint8_t *)f->auth_pass, strlen(f->auth_pass));
    return u & p;
}

void frontend_bytes(const struct frontend *f, uint64_t *up, uint64_t *down)
{
    for (const struct frontend_conn *c = f->conns.next; c != &f->conns; c = c->next)
        if (c->bytes != NULL)
            c->bytes(c, up, down);
}

/* ------------------------------------------------------------------------ */
/* The connection base                                                       */

void frontend_conn_begin(struct frontend *f, struct frontend_conn *c, const char *protocol)
{
    c->f = f;
    c->code = -1;
    c->protocol = protocol;
    c->started_ms = uv_now(f->loop);
    /* workers share the counter; without one (transparent mode's tests) 0 */
    c->id = f->next_id != NULL ? __atomic_add_fetch(f->next_id, 1, __ATOMIC_RELAXED) : 0;
}

int frontend_conn_start(struct frontend *f, struct frontend_conn *c, const char *protocol)
{
    c->timer = malloc(sizeof(*c->timer));
    if (c->timer == NULL)
        return UV_ENOMEM;
    uv_timer_init(f->loop, c->timer);
    c->timer->data = c;
    frontend_add(f, c);
    frontend_conn_begin(f, c, protocol);
    return 0;
}

void frontend_conn_clear(struct frontend_conn *c)
{
    free(c->rule);
    free(c->source);
    free(c->url);
    free(c->reason);
    free(c->method);
    free(c->hint);
    free(c->secret);
    free(c->cred_header);
    if (c->end == c->end_own)
        c->end = NULL;
    free(c->end_own);
    c->rule = c->source = c->url = c->reason = c->method = c->end_own = c->hint = c->secret = NULL;
    c->cred_header = NULL;
}

const char *frontend_conn_end_fmt(struct frontend_conn *c, const char *fmt, ...)
{
    char text[160];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    frontend_conn_set_text(&c->end_own, text);
    c->end = c->end_own != NULL ? c->end_own : "error";
    return c->end;
}

void frontend_conn_set_text(char **dst, const char *s)
{
    free(*dst);
    *dst = NULL;
    if (s != NULL && s[0] != '\0') {
        size_t n = strlen(s);
        *dst = malloc(n + 1);
        if (*dst != NULL)
            memcpy(*dst, s, n + 1);
    }
}

void frontend_conn_note(struct frontend_conn *c, const struct egress_outcome *o)
{
    common_cat(c->verdict, sizeof(c->verdict), 0, o->verdict);
    frontend_conn_set_text(&c->rule, o->rule);
    frontend_conn_set_text(&c->source, o->source);
    frontend_conn_set_text(&c->reason, o->reason);
    frontend_conn_set_text(&c->hint, o->result == EGRESS_DENIED ? o->hint : NULL);
    memset(&c->addr, 0, sizeof(c->addr));
    if (o->have_addr)
        c->addr = o->addr;
}

void frontend_conn_emit(struct frontend_conn *c, enum connlog_event ev)
{
    struct connlog rec;
    uint64_t now = uv_now(c->f->loop), up = 0, down = 0;
    char addr[48] = "";

    if (c->f->log == NULL)
        return;
    if (c->bytes != NULL)
        c->bytes(c, &up, &down);
    memset(&rec, 0, sizeof(rec));
    rec.event = ev;
    rec.id = c->id;
    rec.client = c->client;
    rec.protocol = c->protocol;
    rec.host = c->host;
    rec.port = c->port;
    rec.verdict = c->verdict[0] != '\0' ? c->verdict : NULL;
    rec.rule = c->rule != NULL ? c->rule : "";
    rec.source = c->source;
    rec.reason = c->reason != NULL ? c->reason : "";
    if (c->addr.family != 0)
        policy_addr_str(&c->addr, addr, sizeof(addr));
    rec.addr = addr;
    rec.code = c->code;
    rec.bytes_up = up;
    rec.bytes_down = down;
    rec.duration_ms = now >= c->started_ms ? now - c->started_ms : 0;
    rec.end = c->end != NULL ? c->end : "closed";
    rec.method = c->method;
    rec.url = c->url;
    rec.terminated = c->terminated;
    rec.hint = c->hint;
    rec.secret_placeholder = c->secret;
    rec.credential_header = c->cred_header;
    c->f->log(c->f->log_ctx, &rec);
}

void frontend_conn_debug(const struct frontend_conn *c, const char *fmt, ...)
{
    char line[256];
    va_list ap;
    int n;

    if (c->f->debug == NULL)
        return;
    n = snprintf(line, sizeof(line), "conn %llu %s: ", (unsigned long long)c->id, c->protocol);
    if (n < 0 || (size_t)n >= sizeof(line))
        return;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
    va_end(ap);
    c->f->debug(c->f->debug_ctx, line);
}

/* The last step, once the relay and the timer are both closed. */
static void conn_finish(struct frontend_conn *c)
{
    struct frontend *f = c->f;

    frontend_conn_emit(c, CONNLOG_CLOSE);
    frontend_remove(f, c);
    frontend_conn_clear(c);
    c->release(c);
    if (f->conn_ended != NULL)
        f->conn_ended(f);
}

static void on_timer_closed(uv_handle_t *h)
{
    struct frontend_conn *c = h->data;

    free(h);
    c->timer = NULL;
    c->timer_closed = 1;
    if (c->relay_closed)
        conn_finish(c);
}

void frontend_conn_timer_set(struct frontend_conn *c, uv_timer_cb cb, uint64_t ms)
{
    if (c->timer == NULL || c->timer_closing)
        return;
    if (cb == NULL)
        uv_timer_stop(c->timer);
    else
        uv_timer_start(c->timer, cb, ms, 0);
}

void frontend_conn_timer_close(struct frontend_conn *c)
{
    if (c->timer_closing)
        return;
    c->timer_closing = 1;
    uv_close((uv_handle_t *)c->timer, on_timer_closed);
}

void frontend_conn_relay_closed(struct frontend_conn *c, const struct relay *r)
{
    if (r->end == RELAY_END_NONE || r->end == RELAY_END_OWNER)
        ; /* the owner's own end stands */
    else if (r->status < 0 && r->end != RELAY_END_IDLE)
        frontend_conn_end_fmt(c, "%s: %s", relay_end_str(r->end), uv_err_name(r->status));
    else
        c->end = relay_end_str(r->end); /* static text: no copy */
    c->relay_closed = 1;
    frontend_conn_timer_close(c);
    if (c->timer_closed)
        conn_finish(c);
}
