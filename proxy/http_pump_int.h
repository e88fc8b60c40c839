/* proxy/http_pump_int.h - what the two files of the TLS pump share:
 * proxy/http_tlspump.c (lifetime, the raw socket, the handshake, ending)
 * and proxy/http_tlsio.c (the pump as a connection's transport: plaintext
 * to and from the inner connection, the upstream or the other pump). */
#ifndef SLUICE_PROXY_HTTP_PUMP_INT_H
#define SLUICE_PROXY_HTTP_PUMP_INT_H

#include "proxy/http_int.h"

#define PUMP_CHUNK 16384
#define PUMP_IN 32768 /* a raw read: two full TLS records */
#define PUMP_LINGER_MS 1000 /* after our close_notify, before the socket is closed */
#define PUMP_GATHER_MIN 4096 /* pieces shorter than this are gathered into one record */

extern _Thread_local char http_pump_buf[PUMP_CHUNK]; /* each read is consumed at once */

enum pump_mode {
    PUMP_SERVER = 0, /* the client's TLS, terminated here */
    PUMP_CLIENT,     /* the origin's TLS, verified here */
};

struct http_tls_pump {
    enum pump_mode mode;
    uv_loop_t *loop;
    struct http_conn *c; /* server: the outer connection; client: the inner one
                            while the handshake runs; NULL when gone or handed over */
    struct http_conn *in; /* server: the inner connection the plaintext is for */
    struct http_up *up;   /* client: the upstream connection the plaintext is for */
    struct tls_conn *tc;
    struct proxy_tls *t; /* the loop's (metrics), or NULL */
    uv_tcp_t raw;        /* client: the origin socket (server: c's client stream) */
    struct http_tls_pump *mate; /* back to back after an Upgrade with TLS on both
                                   sides: the other pump (server <-> client) */
    uv_timer_t timer;    /* client: handshake; server: a deferred delivery, the idle
                            timeout in a tunnel; both: the linger after close_notify */
    uv_work_t work;
    struct tls_mint *mint;
    struct tls_in *rin;       /* the buffer of the raw read under way */
    struct egress_outcome *o; /* client: what http_up_adopt needs */
    const char *why;          /* how the pump ended, for the inner connection */
    uint64_t last_io;         /* server in a tunnel: for idle_ms */
    unsigned idle_ms;
    unsigned handshake_ms;
    unsigned handles; /* open libuv handles */
    unsigned pending; /* writes and shutdowns not called back */
    unsigned minting : 1, open : 1, closing : 1, raw_on : 1;
    unsigned raw_reading : 1, raw_eof : 1, ending : 1;
    unsigned in_reading : 1, in_eof : 1; /* the reader (in or up) reads; saw EOF */
};

struct pump_obuf { /* TLS records for the raw stream, in the engine's buffer */
    uv_write_t req;
    struct http_tls_pump *p;
    struct tls_out *o;
};

/* http_tlspump.c */
void http_pump_maybe_free(struct http_tls_pump *p);
uv_stream_t *http_pump_raw(struct http_tls_pump *p);
int http_pump_flush(struct http_tls_pump *p);
void http_pump_end(struct http_tls_pump *p, const char *end);
void http_pump_plain_done(struct http_tls_pump *p);
void http_pump_on_timer(uv_timer_t *t);
void http_pump_raw_start(struct http_tls_pump *p);
void http_pump_raw_stop(struct http_tls_pump *p);

/* http_tlsio.c: the engine's plaintext to whoever takes it */
void http_pump_plain_out(struct http_tls_pump *p);

#endif
