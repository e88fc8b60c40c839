/* socks/parser.c - the SOCKS5 wire parser (RFC 1928, RFC 1929), I/O-free.
 *
 * One byte-driven state machine over the three client messages. Fixed-size
 * fields (versions, lengths, port) are read one byte per step; variable ones
 * (methods, user, password, address) are copied in bulk, bounded both by the
 * bytes at hand and by their length byte, so no field can exceed
 * SOCKS5_FIELD_MAX and no message its R8 cap. The loop stops at the end of
 * each message, so bytes of the next stage (or early tunnel data after the
 * request) are never consumed by the wrong call.
 *
 * Peer bytes never reach an assert (R13): every input is a result.
 */
#include "socks/socks.h"

#include <string.h>

#define OFFERED_NO_AUTH 1u
#define OFFERED_USERPASS 2u

void socks5_parser_init(struct socks5_parser *p, int auth_required)
{
    memset(p, 0, sizeof(*p));
    p->state = SOCKS5_ST_GREET_VER;
    p->auth_required = auth_required != 0;
    p->method = SOCKS5_METHOD_NONE;
}

/* Stores over a secret so it does not linger in the parser; volatile so the
 * stores are not dropped as dead (explicit_bzero is not in C11/POSIX). */
static void wipe(uint8_t *buf, size_t len)
{
    volatile uint8_t *v = buf;
    for (size_t i = 0; i < len; i++)
        v[i] = 0;
}

static enum socks5_result fail(struct socks5_parser *p, enum socks5_result err)
{
    p->state = SOCKS5_ST_FAILED;
    return err;
}

/* Copies up to p->left bytes of src into dst at *dlen; returns how many. */
static size_t take(struct socks5_parser *p, uint8_t *dst, size_t *dlen, const uint8_t *src,
                   size_t avail)
{
    size_t n = p->left < avail ? p->left : avail;

    memcpy(dst + *dlen, src, n);
    *dlen += n;
    p->left -= n;
    return n;
}

/* Finished, or waiting for the auth verdict: feeding consumes nothing and
 * leaves the state as it is. */
static int finished(const struct socks5_parser *p)
{
    return p->state == SOCKS5_ST_AUTH_WAIT || p->state == SOCKS5_ST_DONE ||
           p->state == SOCKS5_ST_FAILED;
}

static enum socks5_result greeting_done(struct socks5_parser *p)
{
    if (p->auth_required) {
        p->method = (p->offered & OFFERED_USERPASS) ? SOCKS5_METHOD_USERPASS : SOCKS5_METHOD_NONE;
    } else {
        p->method = (p->offered & OFFERED_NO_AUTH) ? SOCKS5_METHOD_NO_AUTH : SOCKS5_METHOD_NONE;
    }
    if (p->method == SOCKS5_METHOD_USERPASS)
        p->state = SOCKS5_ST_AUTH_VER;
    else if (p->method == SOCKS5_METHOD_NO_AUTH)
        p->state = SOCKS5_ST_REQ_VER;
    else
        p->state = SOCKS5_ST_FAILED;
    return SOCKS5_GREETING_DONE;
}

static enum socks5_result request_done(struct socks5_parser *p)
{
    if (p->req.cmd != SOCKS5_CMD_CONNECT)
        return fail(p, SOCKS5_ERR_CMD);
    p->state = SOCKS5_ST_DONE;
    return SOCKS5_REQUEST_DONE;
}

/* One step of the greeting: VER NMETHODS METHODS[NMETHODS]. */
static enum socks5_result greet_step(struct socks5_parser *p, const uint8_t *data, size_t len,
                                     size_t *i)
{
    enum socks5_result rc = SOCKS5_NEED_MORE;
    uint8_t c = data[*i];

    switch (p->state) {
    case SOCKS5_ST_GREET_VER:
        (*i)++;
        if (c == 0x04)
            rc = fail(p, SOCKS5_ERR_SOCKS4);
        else if (c != 0x05)
            rc = fail(p, SOCKS5_ERR_VERSION);
        else
            p->state = SOCKS5_ST_GREET_NMETHODS;
        break;
    case SOCKS5_ST_GREET_NMETHODS:
        (*i)++;
        if (c == 0) {
            rc = fail(p, SOCKS5_ERR_NO_METHODS);
            break;
        }
        p->left = c;
        p->state = SOCKS5_ST_GREET_METHODS;
        break;
    case SOCKS5_ST_GREET_METHODS:
        (*i)++;
        if (c == SOCKS5_METHOD_NO_AUTH)
            p->offered |= OFFERED_NO_AUTH;
        else if (c == SOCKS5_METHOD_USERPASS)
            p->offered |= OFFERED_USERPASS;
        if (--p->left == 0)
            rc = greeting_done(p);
        break;
    default:
        break;
    }
    return rc;
}

/* One step of the RFC 1929 sub-negotiation: VER ULEN UNAME[ULEN] PLEN
 * PASSWD[PLEN]. */
static enum socks5_result auth_step(struct socks5_parser *p, const uint8_t *data, size_t len,
                                    size_t *i)
{
    enum socks5_result rc = SOCKS5_NEED_MORE;
    uint8_t c = data[*i];

    switch (p->state) {
    case SOCKS5_ST_AUTH_VER:
        (*i)++;
        if (c != 0x01) {
            rc = fail(p, SOCKS5_ERR_AUTH_VERSION);
            break;
        }
        p->state = SOCKS5_ST_AUTH_ULEN;
        break;
    case SOCKS5_ST_AUTH_ULEN:
        (*i)++;
        if (c == 0) {
            rc = fail(p, SOCKS5_ERR_AUTH_EMPTY);
            break;
        }
        p->user_len = 0;
        p->left = c;
        p->state = SOCKS5_ST_AUTH_USER;
        break;
    case SOCKS5_ST_AUTH_USER:
        *i += take(p, p->user, &p->user_len, data + *i, len - *i);
        if (p->left == 0)
            p->state = SOCKS5_ST_AUTH_PLEN;
        break;
    case SOCKS5_ST_AUTH_PLEN:
        (*i)++;
        if (c == 0) {
            rc = fail(p, SOCKS5_ERR_AUTH_EMPTY);
            break;
        }
        p->pass_len = 0;
        p->left = c;
        p->state = SOCKS5_ST_AUTH_PASS;
        break;
    case SOCKS5_ST_AUTH_PASS:
        *i += take(p, p->pass, &p->pass_len, data + *i, len - *i);
        if (p->left == 0) {
            p->state = SOCKS5_ST_AUTH_WAIT;
            rc = SOCKS5_AUTH_DONE;
        }
        break;
    default:
        break;
    }
    return rc;
}

/* One step of the request: VER CMD RSV ATYP DST.ADDR DST.PORT. */
static enum socks5_result request_step(struct socks5_parser *p, const uint8_t *data, size_t len,
                                       size_t *i)
{
    enum socks5_result rc = SOCKS5_NEED_MORE;
    uint8_t c = data[*i];

    switch (p->state) {
    case SOCKS5_ST_REQ_VER:
        (*i)++;
        if (c != 0x05) {
            rc = fail(p, SOCKS5_ERR_REQ_VERSION);
            break;
        }
        p->state = SOCKS5_ST_REQ_CMD;
        break;
    case SOCKS5_ST_REQ_CMD:
        (*i)++;
        p->req.cmd = c; /* judged once the request is known to be well-formed */
        p->state = SOCKS5_ST_REQ_RSV;
        break;
    case SOCKS5_ST_REQ_RSV:
        (*i)++;
        if (c != 0x00) {
            rc = fail(p, SOCKS5_ERR_REQ_RSV);
            break;
        }
        p->state = SOCKS5_ST_REQ_ATYP;
        break;
    case SOCKS5_ST_REQ_ATYP:
        (*i)++;
        p->req.atyp = c;
        p->req.addr_len = 0;
        if (c == SOCKS5_ATYP_IPV4) {
            p->left = 4;
            p->state = SOCKS5_ST_REQ_ADDR;
        } else if (c == SOCKS5_ATYP_IPV6) {
            p->left = 16;
            p->state = SOCKS5_ST_REQ_ADDR;
        } else if (c == SOCKS5_ATYP_DOMAIN) {
            p->state = SOCKS5_ST_REQ_DLEN;
        } else {
            rc = fail(p, SOCKS5_ERR_ATYP);
        }
        break;
    case SOCKS5_ST_REQ_DLEN:
        (*i)++;
        if (c == 0) {
            rc = fail(p, SOCKS5_ERR_DOMAIN_EMPTY);
            break;
        }
        p->left = c;
        p->state = SOCKS5_ST_REQ_ADDR;
        break;
    case SOCKS5_ST_REQ_ADDR:
        *i += take(p, p->req.addr, &p->req.addr_len, data + *i, len - *i);
        if (p->left == 0) {
            p->req.port = 0;
            p->left = 2;
            p->state = SOCKS5_ST_REQ_PORT;
        }
        break;
    case SOCKS5_ST_REQ_PORT:
        (*i)++;
        p->req.port = (uint16_t)(((unsigned)p->req.port << 8) | c);
        if (--p->left == 0)
            rc = request_done(p);
        break;
    default:
        break;
    }
    return rc;
}

enum socks5_result socks5_feed(struct socks5_parser *p, const uint8_t *data, size_t len,
                               size_t *consumed)
{
    enum socks5_result rc = SOCKS5_NEED_MORE;
    size_t i = 0;

    if (finished(p)) {
        *consumed = 0;
        return SOCKS5_ERR_STATE;
    }
    while (i < len && rc == SOCKS5_NEED_MORE) {
        switch (p->state) {
        case SOCKS5_ST_GREET_VER:
        case SOCKS5_ST_GREET_NMETHODS:
        case SOCKS5_ST_GREET_METHODS:
            rc = greet_step(p, data, len, &i);
            break;
        case SOCKS5_ST_AUTH_VER:
        case SOCKS5_ST_AUTH_ULEN:
        case SOCKS5_ST_AUTH_USER:
        case SOCKS5_ST_AUTH_PLEN:
        case SOCKS5_ST_AUTH_PASS:
            rc = auth_step(p, data, len, &i);
            break;
        case SOCKS5_ST_REQ_VER:
        case SOCKS5_ST_REQ_CMD:
        case SOCKS5_ST_REQ_RSV:
        case SOCKS5_ST_REQ_ATYP:
        case SOCKS5_ST_REQ_DLEN:
        case SOCKS5_ST_REQ_ADDR:
        case SOCKS5_ST_REQ_PORT:
            rc = request_step(p, data, len, &i);
            break;
        case SOCKS5_ST_AUTH_WAIT:
        case SOCKS5_ST_DONE:
        case SOCKS5_ST_FAILED:
        default:
            /* Unreachable: checked above, and every step into these states
             * also ends the loop. */
            *consumed = 0;
            return SOCKS5_ERR_STATE;
        }
    }
    *consumed = i;
    return rc;
}

void socks5_auth_result(struct socks5_parser *p, int ok)
{
    wipe(p->user, sizeof(p->user));
    wipe(p->pass, sizeof(p->pass));
    p->user_len = 0;
    p->pass_len = 0;
    if (p->state == SOCKS5_ST_AUTH_WAIT && ok)
        p->state = SOCKS5_ST_REQ_VER;
    else
        p->state = SOCKS5_ST_FAILED;
}

size_t socks5_method_reply(uint8_t out[2], uint8_t method)
{
    out[0] = 0x05;
    out[1] = method;
    return 2;
}

size_t socks5_auth_reply(uint8_t out[2], int ok)
{
    out[0] = 0x01; /* RFC 1929 sub-negotiation version */
    out[1] = ok ? 0x00 : 0x01;
    return 2;
}

size_t socks5_reply(uint8_t out[SOCKS5_REPLY_LEN], enum socks5_reply_code code)
{
    memset(out, 0, SOCKS5_REPLY_LEN);
    out[0] = 0x05;
    out[1] = (uint8_t)code;
    out[3] = SOCKS5_ATYP_IPV4; /* BND.ADDR 0.0.0.0, BND.PORT 0 */
    return SOCKS5_REPLY_LEN;
}

size_t socks5_socks4_reject(uint8_t out[SOCKS5_SOCKS4_REPLY_LEN])
{
    memset(out, 0, SOCKS5_SOCKS4_REPLY_LEN);
    out[1] = 0x5B; /* request rejected or failed */
    return SOCKS5_SOCKS4_REPLY_LEN;
}

size_t socks5_error_reply(enum socks5_result err, uint8_t out[SOCKS5_REPLY_LEN])
{
    switch (err) {
    case SOCKS5_ERR_SOCKS4:
        return socks5_socks4_reject(out);
    case SOCKS5_ERR_NO_METHODS:
        return socks5_method_reply(out, SOCKS5_METHOD_NONE);
    case SOCKS5_ERR_AUTH_VERSION:
    case SOCKS5_ERR_AUTH_EMPTY:
        return socks5_auth_reply(out, 0);
    case SOCKS5_ERR_REQ_VERSION:
    case SOCKS5_ERR_REQ_RSV:
    case SOCKS5_ERR_DOMAIN_EMPTY:
        return socks5_reply(out, SOCKS5_REP_GENERAL);
    case SOCKS5_ERR_ATYP:
        return socks5_reply(out, SOCKS5_REP_ATYP_UNSUPPORTED);
    case SOCKS5_ERR_CMD:
        return socks5_reply(out, SOCKS5_REP_CMD_UNSUPPORTED);
    case SOCKS5_ERR_VERSION: /* not a SOCKS client: it would not understand a reply */
    case SOCKS5_ERR_STATE:
    case SOCKS5_NEED_MORE:
    case SOCKS5_GREETING_DONE:
    case SOCKS5_AUTH_DONE:
    case SOCKS5_REQUEST_DONE:
    default:
        return 0;
    }
}

const char *socks5_result_str(enum socks5_result r)
{
    switch (r) {
    case SOCKS5_NEED_MORE:
        return "need more";
    case SOCKS5_GREETING_DONE:
        return "greeting done";
    case SOCKS5_AUTH_DONE:
        return "auth done";
    case SOCKS5_REQUEST_DONE:
        return "request done";
    case SOCKS5_ERR_SOCKS4:
        return "socks4 client";
    case SOCKS5_ERR_VERSION:
        return "not a socks greeting";
    case SOCKS5_ERR_NO_METHODS:
        return "greeting offers no methods";
    case SOCKS5_ERR_AUTH_VERSION:
        return "bad user/pass version";
    case SOCKS5_ERR_AUTH_EMPTY:
        return "empty user name or password";
    case SOCKS5_ERR_REQ_VERSION:
        return "bad request version";
    case SOCKS5_ERR_REQ_RSV:
        return "nonzero reserved byte in request";
    case SOCKS5_ERR_ATYP:
        return "unsupported address type";
    case SOCKS5_ERR_DOMAIN_EMPTY:
        return "empty domain name";
    case SOCKS5_ERR_CMD:
        return "unsupported command";
    case SOCKS5_ERR_STATE:
        return "parser not expecting data";
    }
    return "unknown";
}

/* ------------------------------------------------------------------------ */
/* UDP ASSOCIATE datagrams (RFC 1928 section 7)                              */

enum socks5_udp_result socks5_udp_parse(const uint8_t *d, size_t len, struct socks5_udp_header *h)
{
    size_t alen, off;

    if (len < 4)
        return SOCKS5_UDP_ERR_SHORT;
    if (d[0] != 0 || d[1] != 0)
        return SOCKS5_UDP_ERR_RSV;
    h->frag = d[2];
    h->dst.cmd = 0;
    h->dst.atyp = d[3];
    switch (d[3]) {
    case SOCKS5_ATYP_IPV4:
        alen = 4;
        off = 4;
        break;
    case SOCKS5_ATYP_IPV6:
        alen = 16;
        off = 4;
        break;
    case SOCKS5_ATYP_DOMAIN:
        if (len < 5)
            return SOCKS5_UDP_ERR_SHORT;
        alen = d[4];
        if (alen == 0)
            return SOCKS5_UDP_ERR_DOMAIN_EMPTY;
        off = 5;
        break;
    default:
        return SOCKS5_UDP_ERR_ATYP;
    }
    if (len - off < alen + 2)
        return SOCKS5_UDP_ERR_SHORT;
    memcpy(h->dst.addr, d + off, alen);
    h->dst.addr_len = alen;
    h->dst.port = (uint16_t)((d[off + alen] << 8) | d[off + alen + 1]);
    h->header_len = off + alen + 2;
    return SOCKS5_UDP_OK;
}

/* VER/RSV/FRAG-like prefix, then ATYP, address and port. */
static size_t addr_block(uint8_t *out, uint8_t b0, uint8_t b1, uint8_t b2, int family,
                         const uint8_t *addr, uint16_t port)
{
    size_t alen = family == 4 ? 4 : family == 6 ? 16 : 0;

    if (alen == 0)
        return 0;
    out[0] = b0;
    out[1] = b1;
    out[2] = b2;
    out[3] = family == 4 ? SOCKS5_ATYP_IPV4 : SOCKS5_ATYP_IPV6;
    memcpy(out + 4, addr, alen);
    out[4 + alen] = (uint8_t)(port >> 8);
    out[5 + alen] = (uint8_t)(port & 0xff);
    return 6 + alen;
}

size_t socks5_udp_header_build(uint8_t out[SOCKS5_UDP_REPLY_HDR_MAX], int family,
                               const uint8_t *addr, uint16_t port)
{
    return addr_block(out, 0, 0, 0, family, addr, port);
}

size_t socks5_reply_bound(uint8_t out[SOCKS5_UDP_REPLY_HDR_MAX], int family, const uint8_t *addr,
                          uint16_t port)
{
    return addr_block(out, 0x05, SOCKS5_REP_SUCCEEDED, 0, family, addr, port);
}

const char *socks5_udp_result_str(enum socks5_udp_result r)
{
    switch (r) {
    case SOCKS5_UDP_OK:
        return "ok";
    case SOCKS5_UDP_ERR_SHORT:
        return "datagram shorter than its header";
    case SOCKS5_UDP_ERR_RSV:
        return "nonzero reserved bytes in datagram header";
    case SOCKS5_UDP_ERR_ATYP:
        return "unsupported address type in datagram header";
    case SOCKS5_UDP_ERR_DOMAIN_EMPTY:
        return "empty domain name in datagram header";
    }
    return "unknown";
}
