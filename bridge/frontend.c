/* bridge/frontend.c - what the SOCKS5 and HTTP front ends share: the list of
 * live connections and the credential check (peer names: common/). */
#include "bridge/bridge.h"

#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

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
