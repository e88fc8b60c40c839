/* proxy/http_int.h - what the files of the HTTP front end share: one client
 * connection, from accept to close (proxy/http_conn.c, http_request.c,
 * http_forward.c, http_tunnel.c, http_send.c).
 *
 * States (R7); each says what it owns besides the relay's three handles
 * (a = client, b = tunnel upstream, timer):
 *   HEAD     client reads into w->in; the head timer (from the first byte of
 *            a head, never extended) or the keep-alive idle timer; an idle
 *            kept upstream (w->up, read to notice its close)
 *   EGRESS   req (decision, ask, DNS, dial); the head is consumed, early
 *            bytes wait in w->in; client reads stopped for CONNECT, and for
 *            absolute-form once a byte is held (client_hold)
 *   FORWARD  an absolute-form exchange: w->up (busy), both llhttp parsers,
 *            queued writes both ways, the stall timer (idle_timeout_ms
 *            without progress); the response bytes of one upstream read
 *            gathered into one client write (w->ob, out_flush)
 *   TUNNEL   CONNECT, or an Upgrade after 101: the relay owns the bytes;
 *            w is freed (an idle tunnel holds only struct http_conn)
 *   SNIFF    a CONNECT to be terminated got its 200: client reads into w->in
 *            until tls_sniff decides; the dialed upstream socket waits in
 *            held_fd; the handshake timer (fc.timer); one tunnel counted
 *            against maxTunnels (tls_counted)
 *   TLS      terminated: the pump (tp, proxy/http_tls.c) reads the client
 *            and owns the TLS engine; w is freed; the requests run on an
 *            inner connection of their own, which reads and writes the
 *            plaintext through the pump (its client transport, cio: no
 *            socket of its own) and takes held_fd once the handshake is
 *            done (its first request's upstream: one dial per tunnel)
 *   LINGER   the last answer is queued, the write side shut down after it;
 *            reads are discarded until EOF or HTTP_LINGER_MS
 *   CLOSING  conn_close() ran: relay_close() issued, upstreams closing
 *
 * Memory is freed in two places only: an upstream connection (struct
 * http_up, own handle) in its close callback, the connection in the relay's
 * last close callback (on_relay_closed). Upstreams still closing then are
 * detached (u->c = NULL), so their late callbacks touch nothing else.
 * Writes to an upstream find the connection through u->c; writes to the
 * client or to b run before the relay's close callbacks complete, so their
 * c is always valid. Every callback that can arrive late checks CLOSING.
 */
#ifndef SLUICE_PROXY_HTTP_INT_H
#define SLUICE_PROXY_HTTP_INT_H

#include "proxy/proxy.h"

#include "bridge/bridge.h"
#include "proxy/gw.h"
#include "proxy/subst.h"
#include "policy/policy.h"

#include <llhttp.h>

#include "common/common.h"

#include <llhttp.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"

#define HTTP_IN_START 2048                   /* client input buffer at first (a head) */
#define HTTP_IN_MIN (16 * 1024)              /* ... grown up to this for bodies, at least */
#define HTTP_UIN_SIZE HTTP_RESPONSE_HEAD_MAX /* upstream input buffer */
#define HTTP_LINGER_MS 1000                  /* reading after a final answer before closing */
#define HTTP_RETRY_AFTER_S 1                 /* Retry-After on 503 */
#define HTTP_CRED_MAX 768                    /* decoded Basic credentials */
#define HTTP_OUT_BUFS 16                     /* pieces of response gathered for one write */
#define HTTP_OUT_HDRS 5                      /* chunk-size lines among them */

enum http_state {
    HTTP_ST_HEAD = 0,
    HTTP_ST_EGRESS,
    HTTP_ST_FORWARD,
    HTTP_ST_TUNNEL,
    HTTP_ST_SNIFF,
    HTTP_ST_TLS,
    HTTP_ST_LINGER,
    HTTP_ST_CLOSING,
};

enum http_timer {
    TIMER_NONE = 0,
    TIMER_HEAD,   /* HEAD: a request head must be complete by then */
    TIMER_IDLE,   /* HEAD: a kept connection with nothing to do */
    TIMER_STALL,  /* FORWARD: no progress either way for idle_timeout_ms */
    TIMER_FLUSH,  /* LINGER: the last answer is still being written; same rule */
    TIMER_LINGER, /* LINGER: our FIN is out; discarding reads */
};

/* Phases inside one connection (each changed only through its setter,
 * which logs the transition at debug level): */

/* the request of the exchange in progress (FORWARD) */
enum http_req_phase {
    REQ_BODY = 0, /* body bytes still go up */
    REQ_DONE,     /* the whole request went upstream (or it had no body) */
};

/* the response of the exchange in progress (FORWARD) */
enum http_resp_phase {
    RESP_HEAD = 0, /* waiting for the final head (1xx heads pass) */
    RESP_BODY,     /* the head went to the client: the body is framed */
    RESP_DONE,     /* the whole response is read */
};

/* an upstream connection */
enum http_up_phase {
    UP_BUSY = 0, /* serving the exchange in progress */
    UP_IDLE,     /* kept between exchanges: read only to notice its close */
    UP_CLOSING,  /* uv_close() issued; freed in its close callback */
};

/* llhttp fed one head only, to cross-check head.c (llhttp callbacks only
 * record; http_forward.c) */
enum http_check_phase {
    CHECK_OFF = 0,
    CHECK_HEAD, /* the head is being fed */
    CHECK_DONE, /* llhttp reached message complete within the head */
};

/* Errors, one convention per layer:
 *   - I/O and buffers (http_send.c, upstream adoption, the llhttp head
 *     cross-check): 0 or a negative UV_E*; an llhttp callback cannot
 *     return one, so it keeps it in w->send_err for its caller;
 *   - the head validator (proxy/head*.c): 0 or the HTTP status to answer
 *     with, and a static reason (*why);
 *   - the session's steps (void, or 0 / -1 for the stages of one request
 *     head and a response head): a step that fails answers (http_refuse,
 *     http_reply_error: the status and reason go to the client only here)
 *     or ends the connection (http_conn_close with its end text) itself,
 *     and -1 tells its caller the state moved on.
 */

struct http_conn;
struct http_tls_pump;
struct http_splice;

/* An upstream connection for absolute-form requests, kept between requests
 * to the same canonical host:port. */
struct http_up {
    uv_tcp_t tcp;         /* never opened when tio is set */
    struct http_tls_pump *tio; /* a terminated tunnel's upstream: its transport, the
                                  TLS client pump on the origin socket; else NULL */
    struct http_conn *c;  /* NULL once the connection is freed */
    struct http_up *next; /* in c->closing_ups while closing */
    char host[POLICY_HOST_MAX + 1];
    uint16_t port;
    struct policy_addr addr;
    enum http_up_phase phase;
    unsigned reading : 1;
    unsigned parent : 1; /* connected to network.parentProxy for plain HTTP */
    char parent_auth[400]; /* that parent's Proxy-Authorization, or "" */
};

/* Request processing state; freed when the connection becomes a tunnel. */
struct http_work {
    llhttp_t reqp, resp;
    uv_shutdown_t shutdown_req;
    char *in; /* client bytes not yet consumed (a head, body, early or pipelined data) */
    size_t in_len, in_cap, in_max, scan; /* in_cap grows to in_max on demand */
    char *uin; /* upstream bytes not yet consumed (allocated during an exchange) */
    size_t uin_len, uscan;
    char *out; /* rewritten request head waiting for the upstream */
    size_t out_len;
    /* What goes to the client while one upstream read is processed (the
     * response head, body pieces pointing into uin, chunk framing), sent
     * with one write when the read is done (out_flush), or earlier when
     * something else is sent or the exchange ends. */
    uv_buf_t ob[HTTP_OUT_BUFS];
    unsigned nob, nhdr;
    char ohdr[HTTP_OUT_HDRS][20];
    char *ohead; /* the response head (owned) */
    struct http_up *up;
    /* the request line the verdict judges (plain HTTP): the method, then the
     * target as forwarded ("/path?query"), in one allocation */
    char *rq_buf;
    struct http_cred *cred; /* credential substitution of this exchange (http_cred.c) */
    struct http_splice *splice; /* the response body moving by splice(2) (http_splice.c) */
    uint64_t body_left;         /* a Content-Length response body: bytes still to come */
    size_t rq_method_len, rq_target_len;
    enum http_timer timer;
    uint64_t last_io;
    enum http_body req_body;
    enum http_req_phase req_phase;
    enum http_resp_phase resp_phase;
    enum http_check_phase check;
    int send_err;
    unsigned creading : 1;   /* client reads started by us */
    unsigned processing : 1; /* inside process_client() */
    unsigned wait_drain : 1; /* answers pile up unread: waiting for the client to read */
    unsigned is_connect : 1;
    unsigned is_head : 1;
    unsigned upgrade : 1;       /* the request asks for an Upgrade */
    unsigned client_keep : 1;   /* the client wants to keep the connection */
    unsigned client_11 : 1;     /* the client speaks HTTP/1.1 */
    unsigned resp_skip_body : 1;
    unsigned chunk_out : 1;   /* response body re-chunked for the client */
    unsigned close_after : 1; /* close the client after this response */
    unsigned up_keep : 1;     /* the upstream allows reuse after this response */
    unsigned up_junk : 1;     /* the upstream sent bytes after the response */
    unsigned up_eof : 1;
    unsigned up_werr : 1; /* writing upstream failed: the request body is dropped */
    unsigned reused : 1;  /* this exchange runs on a kept upstream connection */
    unsigned client_eof : 1;
    unsigned client_paused : 1; /* client reads stopped: upstream queue above high water */
    unsigned up_paused : 1;     /* upstream reads stopped: client queue above high water */
    unsigned body_counted : 1;  /* body_left counts this response's body */
    unsigned splice_wait : 1;   /* upstream reads stopped until the client's queue is
                                   empty, then the body goes by splice(2) */
};

struct http_conn {
    struct relay relay;
    struct frontend_conn fc;
    struct http_work *w;
    struct http_up *closing_ups;
    struct egress_req *req;
    enum http_state state;
    uint64_t bytes_up, bytes_down; /* forwarded outside the relay */
    unsigned overloaded : 1;
    unsigned terminated : 1; /* an inner connection: requests from a terminated tunnel */
    unsigned tls_counted : 1; /* one of maxTunnels is this connection's */
    int held_fd;              /* SNIFF, TLS: the dialed upstream socket; an inner
                                 connection: the same, until its first request
                                 takes it (held_addr); else -1 */
    struct policy_addr held_addr;
    struct http_tls_pump *tp; /* TLS: the server pump; an inner connection in
                                 EGRESS: the upstream pump shaking hands, and
                                 after a 101 its pump until tunnel_go mates it */
    struct http_tls_pump *cio; /* an inner connection: its client transport (the
                                  outer's pump); NULL once detached. Any other
                                  connection uses its relay's client stream */
    /* the last request's target (fc.host points to its name once parsed,
     * fc.port is its port; the other log fields are in fc) */
    struct policy_host host;
};

extern _Thread_local char http_scratch[512]; /* discarded reads (linger, idle upstreams) */
extern const llhttp_settings_t http_req_settings, http_resp_settings;

/* http_conn.c */
void http_set_state(struct http_conn *c, enum http_state s);
void http_set_req(struct http_conn *c, enum http_req_phase p);
void http_set_resp(struct http_conn *c, enum http_resp_phase p);
void http_set_up(struct http_conn *c, struct http_up *u, enum http_up_phase p);
void http_set_reason(struct http_conn *c, const char *s);
const char *http_host_port(const struct http_conn *c, char *buf, size_t len);
void http_timer_set(struct http_conn *c, enum http_timer kind, uint64_t ms);
void http_up_close(struct http_conn *c, struct http_up *u);
void http_work_free(struct http_conn *c);
void http_conn_close(struct http_conn *c, const char *end);
void http_client_read_start(struct http_conn *c);
void http_client_read_stop(struct http_conn *c);
void http_client_hold(struct http_conn *c);
void http_consume_in(struct http_work *w, size_t n);
void http_close_gracefully(struct http_conn *c, const char *end);
void http_process_client(struct http_conn *c);
void http_client_alloc(struct http_conn *c, uv_buf_t *buf);
void http_client_got(struct http_conn *c, ssize_t nread);

/* http_forward.c */
int http_llhttp_check_head(struct http_conn *c, llhttp_t *p, const llhttp_settings_t *st,
                           llhttp_type_t type, const char *head, size_t len, enum http_body body,
                           uint64_t cl);
void http_up_read_start(struct http_conn *c, struct http_up *u);
int http_up_adopt(struct http_conn *c, int fd, const struct egress_outcome *o);
int http_up_adopt_tls(struct http_conn *c, struct http_tls_pump *p, const struct egress_outcome *o);
void http_up_alloc(struct http_up *u, uv_buf_t *buf);
void http_up_got(struct http_up *u, ssize_t nread);
size_t http_up_queued(struct http_up *u);
void http_feed_request_body(struct http_conn *c);
void http_start_exchange(struct http_conn *c);
int http_send_head(struct http_conn *c);
void http_forward_splice_done(struct http_conn *c, int status);

/* http_splice.c: a Content-Length response body of at least
 * HTTP_SPLICE_MIN bytes left moves upstream -> client by splice(2) (the
 * conditions: http_splice_candidate; http_splice_try starts it once the
 * client's queue is empty) */
#define HTTP_SPLICE_MIN (256 * 1024)
int http_splice_candidate(const struct http_conn *c);
void http_splice_try(struct http_conn *c);
int http_splice_start(struct http_conn *c, uint64_t left);
void http_splice_abort(struct http_conn *c);

/* http_request.c */
void http_next_request(struct http_conn *c);
void http_answer(struct http_conn *c, const struct http_reply *r, const char *end);
void http_refuse(struct http_conn *c, int status, const char *why, int close, const char *end);
void http_reply_overloaded(struct http_conn *c);
void http_reply_error(struct http_conn *c, int status, const char *error, const char *details,
                      int close, const char *end);
void http_start_egress(struct http_conn *c);
void http_handle_head(struct http_conn *c, size_t end);

/* http_send.c */
int http_stream_send(struct http_conn *c, struct http_up *up, uv_stream_t *s, const uv_buf_t *bufs,
                     unsigned n, uv_write_cb cb);
void http_on_up_write(uv_write_t *req, int status);
void http_on_b_write(uv_write_t *req, int status);
int http_out_flush(struct http_conn *c);
void http_out_add(struct http_work *w, const char *base, size_t len);
int http_client_send(struct http_conn *c, const uv_buf_t *bufs, unsigned n);
size_t http_client_queued(struct http_conn *c);
void http_client_drained(struct http_conn *c);
void http_up_drained(struct http_up *u);
int http_up_send(struct http_conn *c, struct http_up *u, const uv_buf_t *bufs, unsigned n);
int http_send_body(struct http_conn *c, struct http_up *u, int chunked, const char *at, size_t len);
int http_send_last_chunk(struct http_conn *c, struct http_up *u);

/* http_tunnel.c */
void http_tunnel_start(struct http_conn *c, int fd);
void http_tunnel_opaque(struct http_conn *c, int fd);
void http_upgrade_start(struct http_conn *c, const struct http_response *rs, size_t end);

/* http_cred.c: credential substitution (issue 24). http_cred_request:
 * after the upstream head is built (w->out), before egress: 0 to go on,
 * -1 after a refusal. The body and response hooks return 1 when they sent
 * the bytes themselves, 0 when the caller sends them as they are, or UV_E*.
 * http_cred_cut: a refused placeholder in the body, the connection must
 * end. http_cred_flushed: from http_out_flush (the arena is free).
 * http_cred_response_head: masks the head; -1 for an encoded response
 * from a credential host (its body cannot be masked: refused when there
 * is one). http_cred_masked: the exchange is
 * with a credential host (its responses must be masked: no upgrade).
 * http_cred_outlived: its request started two refreshes of a value ago (the
 * value it carried is masked no more: the response, head or body, is cut
 * and sets the reason). */
struct http_cred;
int http_cred_request(struct http_conn *c);
int http_cred_body_up(struct http_conn *c, const char *at, size_t len);
int http_cred_body_up_end(struct http_conn *c);
int http_cred_cut(const struct http_conn *c);
int http_cred_masked(const struct http_conn *c);
int http_cred_outlived(struct http_conn *c);
int http_cred_response_head(struct http_conn *c, char *head, size_t len);
int http_cred_body_down(struct http_conn *c, const char *at, size_t len);
int http_cred_body_down_end(struct http_conn *c);
void http_cred_flushed(struct http_work *w);
void http_cred_free(struct http_work *w);
/* http_cred_refusal: why a cut request was cut, for a 403 while nothing
 * was answered (NULL: end the connection). http_cred_held: the head waits
 * for the body (SigV4), http_start_exchange does not send it. */
const char *http_cred_refusal(const struct http_conn *c);
/* The status of that answer: 403, or 503 when the proxy was too busy to
 * hold a SigV4 body (rt-13). */
int http_cred_refusal_status(const struct http_conn *c);
int http_cred_held(const struct http_conn *c);

/* http_sigv4.c: AWS SigV4 re-signing for credentials.awsPairs (issue 24),
 * steps of http_cred.c. Each returns 0, or -1 with *why (a static
 * reason: the caller answers 403), or UV_E* (UV_ENOMEM: out of memory).
 * http_sigv4_head: before placeholders are swapped, on the client's head
 * (w->in): *out NULL when the request is not one to re-sign. sign: after
 * the swap, re-signs w->out (not when held). body: a piece of a held body
 * (-1: over the limit; UV_EBUSY: the held bodies of all connections would
 * take more than their total, rt-13). check: a held request's whole body checked against
 * the client's signature; *body is it, for the swap in place. release:
 * re-signs w->out and sends it and the body upstream. */
struct http_sigv4;
struct proxy_creds;
int http_sigv4_head(struct http_conn *c, const struct proxy_creds *t, uint64_t hosts,
                    struct http_sigv4 **out, const char **why);
int http_sigv4_sign(struct http_conn *c, const struct proxy_creds *t, struct http_sigv4 *s,
                    const char **why);
int http_sigv4_held(const struct http_sigv4 *s);
int http_sigv4_body(struct http_sigv4 *s, const char *at, size_t len);
int http_sigv4_check(const struct proxy_creds *t, struct http_sigv4 *s, char **body, size_t *blen,
                     const char **why);
int http_sigv4_release(struct http_conn *c, const struct proxy_creds *t, struct http_sigv4 *s,
                       const char **why);
void http_sigv4_free(struct http_sigv4 *s);
/* After the re-signing: the real signature (64 hex digits) and the
 * client's placeholder one it replaced, for the response to mask the real
 * one back (an origin that echoes the request must not hand the sandbox a
 * signature made with the real secret, rt-13); 0 when none. */
int http_sigv4_sigs(const struct http_sigv4 *s, const char **real, const char **fake);

/* http_gw.c: credentials.headers (sluice proxy as a gateway). http_gw_request:
 * from http_cred_request, on w->out: 0 nothing to inject, 1 injected (r
 * holds the values' copies and the response mask set), -1 after a refusal. */
struct http_gw_req {
    struct proxy_gw_snap *snaps;
    size_t n;
    struct subst_set set; /* value -> mask, for the response */
    /* the base64 forms in set (value's, mask's), owned; wiped when freed */
    uint8_t *b64[2 * SUBST_MAX];
    size_t b64len[2 * SUBST_MAX], nb64;
};
struct proxy_gw *http_gw_of(const struct http_conn *c);
int http_gw_request(struct http_conn *c, struct proxy_gw *g, struct http_gw_req *r);
void http_gw_req_free(struct http_gw_req *r);

/* http_tls.c: network.tlsTerminate in the HTTP front end */
int http_tls_wanted(const struct http_conn *c);
void http_tls_connect(struct http_conn *c, int fd);
void http_tls_sniff(struct http_conn *c);
void http_tls_conn_closing(struct http_conn *c);
int http_tls_head(struct http_conn *c, size_t *end);
void http_tls_upstream(struct http_conn *c, const struct egress_outcome *o);
void http_tls_upstream_fd(struct http_conn *c, int fd, const struct policy_addr *addr);
void http_tls_dial_failed(struct http_conn *c);
int http_session_open_terminated(struct frontend *f, struct http_tls_pump *p,
                                 struct http_conn *outer);
struct http_conn *http_session_adopt(struct frontend *f, const struct frontend_tls_adopt *a);

/* http_tlspump.c: the transport of terminated tunnels */
struct tls_conn;
void http_pump_server(struct http_conn *c, struct tls_conn *tc);
void http_pump_client(struct http_conn *c, struct tls_conn *tc, const struct egress_outcome *o,
                      unsigned handshake_ms);
void http_pump_close(struct http_tls_pump *p);
/* ... as an inner connection's client transport: plaintext into
 * http_client_alloc's buffer and out through http_client_got while reading
 * (started on the next loop turn, as a socket's would be); sends encrypted at
 * once (http_client_drained once the socket's queue is below the low water);
 * detach when the connection closes (close_notify, then the pump ends) */
void http_pump_attach(struct http_tls_pump *p, struct http_conn *in);
void http_pump_detach(struct http_tls_pump *p, struct http_conn *in);
int http_pump_read_start(struct http_tls_pump *p);
void http_pump_read_stop(struct http_tls_pump *p);
int http_pump_send(struct http_tls_pump *p, const uv_buf_t *bufs, unsigned n);
size_t http_pump_queued(struct http_tls_pump *p);
/* ... as an upstream's transport, the same way (http_up_alloc, http_up_got,
 * http_up_drained) */
void http_pump_attach_up(struct http_tls_pump *p, struct http_up *u);
void http_pump_detach_up(struct http_tls_pump *p, struct http_up *u);
/* ... two of them back to back: an Upgrade inside a terminated tunnel */
void http_pump_take_up(struct http_tls_pump *p, struct http_up *u, struct http_conn *in);
int http_pump_mate(struct http_tls_pump *p, struct http_conn *in, unsigned idle_ms);

#endif
