/* socks/socks.h - the SOCKS5 front end (RFC 1928, RFC 1929).
 *
 * Two parts: the wire parser (socks/parser.c), pure code with no I/O, and
 * the session that drives it on a libuv connection (socks/session.c).
 */
#ifndef SLUICE_SOCKS_H
#define SLUICE_SOCKS_H

#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------------------ */
/* Parser (socks/parser.c)                                                   */
/*                                                                           */
/* Incremental and I/O-free (style.md R11): the caller feeds whatever slices */
/* it read; one read is never assumed to be one message. A connection goes   */
/* greeting -> [RFC 1929 user/pass] -> request, and socks5_feed() returns at */
/* the end of each stage with *consumed saying exactly how many bytes of     */
/* this call it used. Bytes it did not consume belong to the next stage (or, */
/* after the request, are early tunnel data the caller must keep, e.g. a TLS */
/* ClientHello).                                                             */
/*                                                                           */
/* The caller's loop:                                                        */
/*                                                                           */
/*   GREETING_DONE  write socks5_method_reply(p->method). If the method is   */
/*                  SOCKS5_METHOD_NONE close after the write; otherwise keep */
/*                  feeding (the parser is already in the next stage).       */
/*   AUTH_DONE      verify p->user / p->pass (frontend_auth_ok), then call   */
/*                  socks5_auth_result(p, ok) and write socks5_auth_reply(). */
/*                  Until socks5_auth_result() is called, socks5_feed()      */
/*                  consumes nothing and returns SOCKS5_ERR_STATE, so a      */
/*                  request can never be parsed before the auth verdict.     */
/*                  On ok == 0, close after the write.                       */
/*   REQUEST_DONE   p->req is the CONNECT request. The parser is finished:   */
/*                  every further byte is tunnel data.                       */
/*   < 0 (error)    write the socks5_error_reply() bytes (maybe none), then  */
/*                  close. The parser is finished.                           */
/*                                                                           */
/* Errors are detected at the first byte that proves the message bad, and    */
/* *consumed includes that byte. One exception: an unsupported command       */
/* (BIND, UDP ASSOCIATE, unknown) is reported only once the whole request    */
/* has been parsed and found well-formed (p->req is then filled, so the      */
/* caller can log the target). Hence a request with a bad command and a bad  */
/* RSV, ATYP or domain length gets the reply for the latter.                 */
/*                                                                           */
/* Bounds (R8): a greeting is at most SOCKS5_GREETING_MAX bytes, a user/pass */
/* message SOCKS5_AUTH_MAX, a request SOCKS5_REQUEST_MAX; every length byte  */
/* is at most 255, so the parser holds no more than that in fixed buffers.   */

#define SOCKS5_GREETING_MAX 257 /* VER NMETHODS METHODS[255] */
#define SOCKS5_AUTH_MAX 513     /* VER ULEN UNAME[255] PLEN PASSWD[255] */
#define SOCKS5_REQUEST_MAX 262  /* VER CMD RSV ATYP LEN DOMAIN[255] PORT[2] */
#define SOCKS5_FIELD_MAX 255    /* longest user, password or domain */
#define SOCKS5_REPLY_LEN 10     /* VER REP RSV ATYP(1) BND.ADDR[4] BND.PORT[2] */
#define SOCKS5_SOCKS4_REPLY_LEN 8

/* Authentication methods (RFC 1928 section 3). */
enum socks5_method {
    SOCKS5_METHOD_NO_AUTH = 0x00,
    SOCKS5_METHOD_USERPASS = 0x02, /* RFC 1929 */
    SOCKS5_METHOD_NONE = 0xFF,     /* no acceptable method */
};

/* Request commands (RFC 1928 section 4). Only CONNECT is served. */
enum socks5_cmd {
    SOCKS5_CMD_CONNECT = 0x01,
    SOCKS5_CMD_BIND = 0x02,
    SOCKS5_CMD_UDP_ASSOCIATE = 0x03,
};

/* Address types (RFC 1928 section 5). */
enum socks5_atyp {
    SOCKS5_ATYP_IPV4 = 0x01,
    SOCKS5_ATYP_DOMAIN = 0x03,
    SOCKS5_ATYP_IPV6 = 0x04,
};

/* Reply codes (RFC 1928 section 6). */
enum socks5_reply_code {
    SOCKS5_REP_SUCCEEDED = 0x00,
    SOCKS5_REP_GENERAL = 0x01,          /* general failure; also malformed requests */
    SOCKS5_REP_NOT_ALLOWED = 0x02,      /* connection not allowed by ruleset */
    SOCKS5_REP_NET_UNREACH = 0x03,      /* network unreachable */
    SOCKS5_REP_HOST_UNREACH = 0x04,     /* host unreachable (DNS failure too) */
    SOCKS5_REP_REFUSED = 0x05,          /* connection refused */
    SOCKS5_REP_TTL_EXPIRED = 0x06,      /* TTL expired: dial or DNS timeout */
    SOCKS5_REP_CMD_UNSUPPORTED = 0x07,  /* command not supported */
    SOCKS5_REP_ATYP_UNSUPPORTED = 0x08, /* address type not supported */
};

/* What socks5_feed() reports. Values >= 0 are progress, < 0 are errors; the
 * comment on each error is the reply socks5_error_reply() builds for it. */
enum socks5_result {
    SOCKS5_NEED_MORE = 0,     /* every byte given was consumed; feed more */
    SOCKS5_GREETING_DONE = 1, /* p->method chosen */
    SOCKS5_AUTH_DONE = 2,     /* p->user, p->pass ready; call socks5_auth_result() */
    SOCKS5_REQUEST_DONE = 3,  /* p->req is a CONNECT request */

    SOCKS5_ERR_SOCKS4 = -1,       /* first byte 0x04: SOCKS4 "rejected" {0,0x5B,0,0,0,0,0,0} */
    SOCKS5_ERR_VERSION = -2,      /* first byte not 4 or 5 (e.g. 'G'): nothing, close */
    SOCKS5_ERR_NO_METHODS = -3,   /* NMETHODS 0: {5,0xFF} */
    SOCKS5_ERR_AUTH_VERSION = -4, /* RFC 1929 VER not 1: {1,1} */
    SOCKS5_ERR_AUTH_EMPTY = -5,   /* ULEN or PLEN 0: {1,1} */
    SOCKS5_ERR_REQ_VERSION = -6,  /* request VER not 5: reply GENERAL */
    SOCKS5_ERR_REQ_RSV = -7,      /* request RSV not 0: reply GENERAL */
    SOCKS5_ERR_ATYP = -8,         /* ATYP not 1, 3 or 4: reply ATYP_UNSUPPORTED */
    SOCKS5_ERR_DOMAIN_EMPTY = -9, /* domain length 0: reply GENERAL */
    SOCKS5_ERR_CMD = -10,         /* BIND, UDP ASSOCIATE or unknown: reply CMD_UNSUPPORTED;
                                     p->req is filled */
    SOCKS5_ERR_STATE = -11,       /* fed while finished, failed or waiting for
                                     socks5_auth_result(): caller bug, nothing, close */
};

/* Parser states. Private to parser.c; here only so the struct can be embedded. */
enum socks5_state {
    SOCKS5_ST_GREET_VER = 0,
    SOCKS5_ST_GREET_NMETHODS,
    SOCKS5_ST_GREET_METHODS, /* left = methods still to read */
    SOCKS5_ST_AUTH_VER,
    SOCKS5_ST_AUTH_ULEN,
    SOCKS5_ST_AUTH_USER, /* left = user bytes still to read */
    SOCKS5_ST_AUTH_PLEN,
    SOCKS5_ST_AUTH_PASS,
    SOCKS5_ST_AUTH_WAIT, /* AUTH_DONE returned; waiting for socks5_auth_result() */
    SOCKS5_ST_REQ_VER,
    SOCKS5_ST_REQ_CMD,
    SOCKS5_ST_REQ_RSV,
    SOCKS5_ST_REQ_ATYP,
    SOCKS5_ST_REQ_DLEN,
    SOCKS5_ST_REQ_ADDR, /* left = address bytes still to read */
    SOCKS5_ST_REQ_PORT, /* left = port bytes still to read */
    SOCKS5_ST_DONE,     /* REQUEST_DONE returned */
    SOCKS5_ST_FAILED,   /* an error, method NONE, or auth refused */
};

/* A parsed request. The address is raw: the parser checks nothing in a
 * domain but its length (1..255), so it may hold NUL or any other byte and
 * is not NUL-terminated; the caller normalises it (policy_host_normalize).
 * Port 0 is passed through too: the caller must refuse it. */
struct socks5_request {
    uint8_t cmd;     /* enum socks5_cmd (any byte for SOCKS5_ERR_CMD) */
    uint8_t atyp;    /* enum socks5_atyp */
    size_t addr_len; /* 4 (IPv4), 16 (IPv6), 1..255 (domain) */
    uint8_t addr[SOCKS5_FIELD_MAX];
    uint16_t port; /* host byte order */
};

/* Embeddable (R2): no allocation; the struct holds everything. Callers read
 * only the fields marked public. */
struct socks5_parser {
    /* public, after the result named */
    uint8_t method;            /* GREETING_DONE: enum socks5_method */
    size_t user_len, pass_len; /* AUTH_DONE, until socks5_auth_result() */
    uint8_t user[SOCKS5_FIELD_MAX];
    uint8_t pass[SOCKS5_FIELD_MAX];
    struct socks5_request req; /* REQUEST_DONE (and SOCKS5_ERR_CMD) */

    /* private */
    enum socks5_state state;
    int auth_required; /* credentials configured: only USERPASS is acceptable */
    unsigned offered;  /* methods seen in the greeting (bit flags) */
    size_t left;       /* bytes still to read in the current field */
};

/* auth_required: 1 when credentials are configured, so the client must use
 * RFC 1929 (a greeting offering only NO_AUTH gets METHOD_NONE); 0 when not,
 * so only NO_AUTH is acceptable (a greeting offering only USERPASS gets
 * METHOD_NONE). */
void socks5_parser_init(struct socks5_parser *p, int auth_required);

/* Parses up to len bytes of data (data may be NULL when len is 0). Always
 * writes *consumed (<= len). NEED_MORE means all len bytes were consumed.
 * Any other result stops at the end of the message (or at the bad byte) and
 * the rest of data is untouched. */
enum socks5_result socks5_feed(struct socks5_parser *p, const uint8_t *data, size_t len,
                               size_t *consumed);

/* After SOCKS5_AUTH_DONE: ok = 1 the credentials were accepted, the parser
 * moves on to the request; ok = 0 the parser is finished (FAILED). Both wipe
 * p->user and p->pass. Called in any other state, it fails the parser, so
 * the next socks5_feed() returns SOCKS5_ERR_STATE. */
void socks5_auth_result(struct socks5_parser *p, int ok);

/* Replies. Each builds the bytes to write and returns how many. */

/* {5, method}: 2. */
size_t socks5_method_reply(uint8_t out[2], uint8_t method);

/* RFC 1929 {1, 0} when ok, {1, 1} when not: 2. */
size_t socks5_auth_reply(uint8_t out[2], int ok);

/* {5, code, 0, ATYP_IPV4, 0,0,0,0, 0,0}: SOCKS5_REPLY_LEN. BND.ADDR is
 * always 0.0.0.0:0, on success too, so no internal address ever leaks. */
size_t socks5_reply(uint8_t out[SOCKS5_REPLY_LEN], enum socks5_reply_code code);

/* SOCKS4 "request rejected or failed" {0, 0x5B, 0,0, 0,0,0,0}:
 * SOCKS5_SOCKS4_REPLY_LEN. */
size_t socks5_socks4_reject(uint8_t out[SOCKS5_SOCKS4_REPLY_LEN]);

/* The reply for an error result, a pure function of it (see enum
 * socks5_result): 0 (send nothing), 2, 8 or 10 bytes. 0 for a result >= 0. */
size_t socks5_error_reply(enum socks5_result err, uint8_t out[SOCKS5_REPLY_LEN]);

/* Short lower-case text for logs ("not a socks greeting", ...). */
const char *socks5_result_str(enum socks5_result r);

/* ------------------------------------------------------------------------ */
/* UDP ASSOCIATE datagrams (socks/parser.c, RFC 1928 section 7)              */
/*                                                                           */
/* Every datagram between the client and the relay starts with               */
/*   RSV(2)=0 FRAG(1) ATYP(1) DST.ADDR DST.PORT(2)                           */
/* socks5_udp_parse() reads that header from one whole datagram (hostile     */
/* bytes, pure, no allocation): RSV must be 0, ATYP 1, 3 or 4, a domain 1..255 */
/* bytes (raw, unchecked: the caller normalises it), the datagram at least   */
/* as long as its header. FRAG is reported, not judged: the caller drops a   */
/* fragment (FRAG != 0; sluice does no reassembly) and counts it.            */

#define SOCKS5_UDP_HDR_MAX 262     /* RSV RSV FRAG ATYP LEN DOMAIN[255] PORT[2] */
#define SOCKS5_UDP_REPLY_HDR_MAX 22 /* RSV RSV FRAG ATYP(4) ADDR[16] PORT[2] */

enum socks5_udp_result {
    SOCKS5_UDP_OK = 0,
    SOCKS5_UDP_ERR_SHORT = -1,        /* ends inside its header */
    SOCKS5_UDP_ERR_RSV = -2,          /* RSV not 0 */
    SOCKS5_UDP_ERR_ATYP = -3,         /* ATYP not 1, 3 or 4 */
    SOCKS5_UDP_ERR_DOMAIN_EMPTY = -4, /* domain length 0 */
};

struct socks5_udp_header {
    uint8_t frag;               /* 0: a whole datagram */
    struct socks5_request dst;  /* cmd 0; atyp, addr, port as in a request */
    size_t header_len;          /* the payload starts here (<= the datagram's length) */
};

/* Parses the header of one datagram of len bytes. SOCKS5_UDP_OK with *h
 * filled, or an error (then *h is unspecified). */
enum socks5_udp_result socks5_udp_parse(const uint8_t *d, size_t len, struct socks5_udp_header *h);

/* The header of a datagram to the client: RSV 0, FRAG 0, ATYP 1 (family 4,
 * addr 4 bytes) or 4 (family 6, 16 bytes), the address and port. Returns
 * 10 or 22, or 0 for another family. */
size_t socks5_udp_header_build(uint8_t out[SOCKS5_UDP_REPLY_HDR_MAX], int family,
                               const uint8_t *addr, uint16_t port);

/* A reply to UDP ASSOCIATE naming the relay's address (BND.ADDR/PORT): code
 * SUCCEEDED, ATYP 1 or 4. Returns 10 or 22, 0 for another family. */
size_t socks5_reply_bound(uint8_t out[SOCKS5_UDP_REPLY_HDR_MAX], int family, const uint8_t *addr,
                          uint16_t port);

/* Short lower-case text for logs. */
const char *socks5_udp_result_str(enum socks5_udp_result r);

/* end of parser */

/* ------------------------------------------------------------------------ */
/* Session (socks/session.c)                                                 */
/*                                                                           */
/* One SOCKS5 client connection on a libuv loop: handshake (with             */
/* f->handshake_timeout_ms), then the egress path (bridge.h: policy, ask,    */
/* DNS, guard, dial), then the reply, then the relay. No reply is written    */
/* and no byte forwarded before the decision and the dial are done. A domain */
/* that spells an IP address is judged as that address; a name that does    */
/* not normalise gets reply 0x01 (malformed). Reply codes: 0x02 policy, ask  */
/* or guard; 0x04 DNS failure or unreachable; 0x05 refused; 0x06 DNS or dial */
/* timeout; 0x07 BIND (UDP ASSOCIATE: socks/udp.c); 0x08 address type; 0x01 */
/* port 0, over the connection limit, internal error. BND.ADDR 0.0.0.0:0.    */

struct frontend;
struct listener;

/* Accepts one pending connection from l and serves it. overloaded: the
 * front end is over its connection limit: the handshake is read and the
 * request answered 0x01 at once. 0 or UV_E* (nothing to serve). */
int socks_session_accept(struct frontend *f, struct listener *l, int overloaded);

/* UDP ASSOCIATE (socks/udp.c): counters of every association of the
 * process (all workers), for /metrics. */
struct socks_udp_stats {
    uint64_t associations;   /* opened */
    uint64_t active;         /* open now */
    uint64_t refused;        /* requests refused (limit, address, family, error) */
    uint64_t dgrams_up, bytes_up;     /* client -> destination, payload bytes */
    uint64_t dgrams_down, bytes_down; /* destination -> client, payload bytes */
    uint64_t denied;         /* datagrams to a destination the policy denied */
    uint64_t fragments;      /* datagrams with FRAG != 0, dropped */
    uint64_t spoofed;        /* datagrams from another source than the client's, dropped */
    uint64_t malformed;      /* bad headers, dropped */
    uint64_t dropped;        /* no room (destinations cap, pending, send would block) */
    uint64_t unsolicited;    /* datagrams from a peer this client did not send to */
};
void socks_udp_stats(struct socks_udp_stats *out);

/* end of session */

#endif
