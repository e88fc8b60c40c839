/* proxy/proxy.h - the HTTP proxy front end: CONNECT tunnels and absolute-form
 * forwarding (design.md "Wire behaviour").
 *
 * Two parts: the head validator (proxy/head.c, head_request.c,
 * head_write.c), pure code with no I/O that decides everything that can be
 * decided from the bytes of a request or response head and writes the
 * rewritten heads, and the session that drives it on a libuv connection
 * with llhttp framing the bodies (proxy/http_*.c, by phase: http_conn.c
 * the client connection and its head, http_request.c the request and its
 * verdict, http_forward.c forwarding and upstream reuse, http_tunnel.c
 * CONNECT and Upgrade, http_send.c the writes; shared: http_int.h).
 */
#ifndef SLUICE_PROXY_H
#define SLUICE_PROXY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <uv.h>

/* ------------------------------------------------------------------------ */
/* Head validator (proxy/head.c, head_request.c, head_write.c)              */
/*                                                                           */
/* A head is the bytes from the start line through the empty line that ends  */
/* it. It is first delimited with http_head_end() (strict CRLF: a bare LF, a */
/* CR not followed by LF or a NUL anywhere refuses it), then parsed whole:   */
/*   - start line with single spaces, HTTP/1.0 or HTTP/1.1 only (another     */
/*     well-formed version: 505; requests only);                             */
/*   - field names are tokens with the colon right after them; values are    */
/*     SP, HTAB, visible ASCII and obs-text; obs-fold, other control bytes  */
/*     and NUL are refused;                                                  */
/*   - framing: at most one Content-Length (decimal digits only), a          */
/*     Transfer-Encoding of exactly "chunked" (any other coding: 501 for a   */
/*     request, 502 for a response), never both, none in HTTP/1.0 requests. */
/* Requests must be CONNECT in authority form (host:port, [v6]:port) or     */
/* absolute-form http:// (https:// and other schemes, origin form, asterisk */
/* form: 400). The host is refused when it holds userinfo, '%' (percent-    */
/* encoding, zone ids), bytes outside letters, digits, '-', '.', '_' (or    */
/* hex digits, ':' and '.' inside brackets) or is empty; the port must be   */
/* 1-65535 in decimal without sign or leading zeros (as in policy patterns); */
/* absolute-form defaults to 80, CONNECT requires it. TRACE and methods      */
/* llhttp does not know for HTTP get 405.                                    */
/*                                                                           */
/* Every refusal is an HTTP status (400, 405, 431, 501, 505 for requests;    */
/* 502 for responses) with a static one-line reason.                         */

#define HTTP_HEAD_MAX_FIELDS 256           /* header lines in one head (more: 431 / 502) */
#define HTTP_CONN_TOKENS_MAX 32            /* tokens in Connection + Proxy-Connection */
#define HTTP_RESPONSE_HEAD_MAX (64 * 1024) /* largest upstream response head */

/* A slice of the head buffer the structures below were parsed from. */
struct http_span {
    uint32_t off, len;
};

struct http_field {
    struct http_span name, value;
    uint8_t drop; /* 1: not forwarded (hop-by-hop, named in Connection, Host, framing) */
};

enum http_find {
    HTTP_FIND_MORE = 0, /* no empty line yet: read more */
    HTTP_FIND_DONE = 1, /* *end is the head length, empty line included */
    HTTP_FIND_BAD = -1, /* bare LF, CR without LF, NUL: *why says which */
};

/* Finds the end of the head at the start of buf[0..len). *scan carries the
 * progress between calls on a growing buffer (start with 0; bytes before it
 * are not looked at again). */
enum http_find http_head_end(const char *buf, size_t len, size_t *scan, size_t *end,
                             const char **why);

enum http_method {
    HTTP_METHOD_GET = 0,
    HTTP_METHOD_HEAD,
    HTTP_METHOD_POST,
    HTTP_METHOD_PUT,
    HTTP_METHOD_DELETE,
    HTTP_METHOD_OPTIONS,
    HTTP_METHOD_PATCH,
    HTTP_METHOD_CONNECT,
    HTTP_METHOD_OTHER, /* another method llhttp parses in HTTP (WebDAV, PURGE, ...) */
};

enum http_body {
    HTTP_BODY_NONE = 0, /* no body */
    HTTP_BODY_LENGTH,   /* Content-Length bytes */
    HTTP_BODY_CHUNKED,  /* chunked */
    HTTP_BODY_EOF,      /* responses only: until the upstream closes */
};

struct http_request {
    enum http_method method;
    struct http_span method_text;
    int minor;             /* HTTP/1.<minor>: 0 or 1 */
    struct http_span host; /* raw host, brackets of an IPv6 literal removed */
    int host_v6;           /* the host was bracketed */
    uint16_t port;
    struct http_span path; /* after the authority ("" / "?q" / "/p?q"); absolute-form only */
    enum http_body body;
    uint64_t content_length;
    unsigned keep_alive : 1;      /* HTTP/1.1 without "close" (HTTP/1.0 is never kept) */
    unsigned upgrade : 1;         /* Upgrade + Connection: upgrade, HTTP/1.1, no body */
    unsigned expect_continue : 1; /* Expect: 100-continue (forwarded as is) */
    unsigned has_auth : 1;        /* a Proxy-Authorization field (value in auth) */
    struct http_span auth;
    size_t nfields;
    struct http_field fields[HTTP_HEAD_MAX_FIELDS];
};

/* Parses and validates a request head of len bytes (as delimited by
 * http_head_end). Returns 0, or the status to answer with *why set. */
int http_request_parse(const char *head, size_t len, struct http_request *r, const char **why);

/* A request inside a terminated tunnel names a path (origin-form, or "*"
 * for OPTIONS); it goes to the tunnel's CONNECT target, whatever its Host
 * says. Rewrites the request line of head (len bytes, a whole head as
 * http_head_end delimits it) into absolute-form for authority ("host:port",
 * "[v6]:port"): "M /p HTTP/1.1" becomes "M http://authority/p HTTP/1.1",
 * "OPTIONS * ..." becomes "OPTIONS http://authority ...". The rest of the
 * head is copied unchanged, for http_request_parse to judge. Returns the new
 * length (at most cap bytes are written, so a value > cap means out was too
 * small), or 0 with *why set when the line is malformed or its target is
 * not a path (absolute-form, authority-form: another host). */
size_t http_target_for_tunnel(const char *head, size_t len, const char *authority, char *out,
                              size_t cap, const char **why);

/* Writes the head to send upstream for an absolute-form request:
 * "METHOD origin-form HTTP/1.1", "Host: authority", the fields not dropped,
 * the framing (Content-Length: N or Transfer-Encoding: chunked: bodies are
 * re-framed, never passed through blindly), then "Connection: Upgrade"
 * (upgrade requests) or "Connection: close" (close != 0). The origin form is
 * the path as given, "/" for an empty one ("*" for OPTIONS), "/?q" for a bare
 * query. Returns the length of the whole head; writes at most cap bytes, so
 * a return value > cap means out was too small. */
size_t http_request_build(const char *head, const struct http_request *r, const char *authority,
                          int close, char *out, size_t cap);

struct http_response {
    int minor;
    int status;              /* 100..999 */
    struct http_span reason; /* may be empty */
    enum http_body body;     /* NONE for 1xx, 204, 304 and answers to HEAD */
    uint64_t content_length;
    unsigned keep_alive : 1; /* the upstream connection may be reused after it */
    unsigned upgrade : 1;    /* 101 with Upgrade + Connection: upgrade */
    size_t nfields;
    struct http_field fields[HTTP_HEAD_MAX_FIELDS];
};

/* Parses and validates a response head; head_request: it answers a HEAD
 * request. Returns 0, or 502 with *why set. Content-Length is kept in the
 * fields (never dropped); Transfer-Encoding and the hop-by-hop fields are
 * dropped (Upgrade is kept on a 101 upgrade). */
int http_response_parse(const char *head, size_t len, int head_request, struct http_response *r,
                        const char **why);

#define HTTP_OUT_CHUNKED 0x1 /* add Transfer-Encoding: chunked (body re-chunked) */
#define HTTP_OUT_CLOSE 0x2   /* add Connection: close */
#define HTTP_OUT_UPGRADE 0x4 /* add Connection: Upgrade (a 101 being tunnelled) */

/* Writes the response head for the client: "HTTP/1.1 status reason", the
 * fields not dropped, then what flags ask for. Same return as
 * http_request_build. */
size_t http_response_build(const char *head, const struct http_response *r, unsigned flags,
                           char *out, size_t cap);

/* A response sluice writes itself. */
struct http_reply {
    int status;
    const char *phrase;     /* NULL: the standard phrase; sanitised, at most 120 bytes */
    const char *error;      /* RFC 9209 error type ("http_request_denied"), or NULL */
    const char *details;    /* Proxy-Status details, or NULL; sanitised */
    const char *rcode;      /* dns_error rcode ("NXDOMAIN"), or NULL */
    const char *body;       /* one line, or NULL for "<status> <phrase>"; sanitised */
    unsigned retry_after;   /* seconds; 0: no Retry-After */
    const char *x_error;    /* X-Proxy-Error: this token ("too-many-tunnels"), or NULL */
    unsigned blocked : 1;   /* X-Proxy-Error: blocked-by-allowlist */
    unsigned close : 1;     /* Connection: close */
    unsigned challenge : 1; /* Proxy-Authenticate: Basic realm="sluice" */
    unsigned allow : 1;     /* Allow: (with 405) */
};

#define HTTP_REPLY_MAX 2048 /* any http_reply_build() output fits */

/* Writes the whole response (head and a one-line text/plain body). Text from
 * outside (reasons, details) is reduced to printable ASCII. Returns the
 * length (<= HTTP_REPLY_MAX) or 0 if cap is too small. */
size_t http_reply_build(const struct http_reply *r, char *out, size_t cap);

/* The standard reason phrase of a status ("Bad Request"), "Unknown" else. */
const char *http_status_phrase(int status);

/* Decodes a Proxy-Authorization value "Basic <base64 of user:pass>" (scheme
 * case-insensitive, strict base64 with padding). The decoded bytes go to
 * out (cap bytes); user is out[0..*ulen), the password out[*ulen + 1 ..
 * *ulen + 1 + *plen). 0, or -1 (another scheme, bad base64, no ':', too
 * long). The caller wipes out afterwards. */
int http_basic_decode(const char *value, size_t len, uint8_t *out, size_t cap, size_t *ulen,
                      size_t *plen);

/* end of head validator */

/* ------------------------------------------------------------------------ */
/* Session (proxy/http_*.c)                                                  */
/*                                                                           */
/* One client connection on a libuv loop, serving requests in order:        */
/*   CONNECT     egress (bridge.h: policy, ask, DNS, guard, dial), then      */
/*               "HTTP/1.1 200 Connection Established", the bytes the client */
/*               sent after the head (held until the dial succeeded), and    */
/*               the relay. A failed tunnel forwards nothing and closes.     */
/*   http://...  decided per request (a kept upstream connection is reused   */
/*               only for the same canonical host:port and only when the     */
/*               policy still allows it by rule and the guard still passes   */
/*               its address), rewritten to origin form with Host set to the */
/*               target's authority, hop-by-hop fields dropped, bodies       */
/*               framed by llhttp both ways and re-framed (chunked stays     */
/*               chunked; a close-delimited response is re-chunked for       */
/*               HTTP/1.1 clients), 1xx forwarded to HTTP/1.1 clients, an    */
/*               Upgrade tunnelled after 101. One request at a time:         */
/*               pipelined requests wait in the buffer.                      */
/* Answers of its own: 400 malformed, 403 policy / ask / guard (with        */
/* Proxy-Status, X-Proxy-Error: blocked-by-allowlist and the reason as the   */
/* status phrase), 405, 407 (with Proxy-Authenticate) when proxy.auth is set */
/* and the Basic credentials are missing or wrong, 408 a head not complete   */
/* within f->head_timeout_ms, 431, 501, 502 DNS failure / refused /          */
/* unreachable / bad or missing upstream response, 503 over the connection   */
/* limit (Retry-After), 504 DNS, dial or response timeout, 505. After an     */
/* answer the connection is kept only when the request was read whole.      */
/* Health path: when f->health_path is set, a request whose line is exactly  */
/* "GET <health_path> HTTP/1.x" is answered "200 OK" with the body "ok" (503 */
/* "draining" while draining), without authentication, policy or a decision  */
/* line, once its fields pass the same checks as any request's and it has no */
/* body; every other origin-form request stays 400.                          */
/* Timers: f->head_timeout_ms for each request head (from its first byte,    */
/* never extended by more bytes), f->idle_timeout_ms for tunnels, idle kept  */
/* connections and upstreams that stop moving mid-exchange.                 */

struct frontend;
struct listener;

/* Accepts one pending connection from l and serves it. overloaded: the
 * front end is over its connection limit: the first request head is read and
 * answered 503 with Retry-After, then the connection closes. 0 or UV_E*
 * (nothing to serve). */
int http_session_accept(struct frontend *f, struct listener *l, int overloaded);

/* Drain (SIGTERM): sets f->draining and closes at once the connections that
 * wait between requests (kept alive, nothing unanswered read; answers still
 * queued go out first, then the FIN). From then on every answer carries
 * "Connection: close" and its connection closes after it (a response whose
 * head went out before the drain began ends the connection after its body);
 * tunnels (CONNECT, Upgrade) are not touched: the owner closes them with
 * frontend_close_all() when its drain time is up. */
void http_frontend_drain(struct frontend *f);
/* frontend.tls_adopt of the SOCKS5 front end (proxy/http_tls.c). */
struct frontend_tls_adopt;
int http_tls_adopt(struct frontend *f, const struct frontend_tls_adopt *a);

/* end of session */

/* ------------------------------------------------------------------------ */
/* request-level options (proxy/reqopts.c)                                   */

struct policy_host;

/* 1 when the path of an absolute-form target is ambiguous (dot segments,
 * also %2e-encoded; a backslash; %2f or %5c). */
int reqopt_target_ambiguous(const char *path, size_t len);
/* The normalised path (unreserved %XX decoded, dot segments removed, query
 * kept) into out; -1 when it cannot be (an encoded separator) or out (cap
 * >= len + 2) is too small. */
int reqopt_normalize(const char *path, size_t len, char *out, size_t cap, size_t *outlen);
/* 1 when a Host field names another host or port than target:port. */
int reqopt_host_mismatch(const char *head, const struct http_request *rq,
                         const struct policy_host *target, uint16_t port);
/* Marks the response fields named in names (lower case) as dropped. */
void reqopt_strip(const char *head, struct http_response *rs, char *const *names, size_t n);

/* ------------------------------------------------------------------------ */
/* --control-fd (proxy/control.c)                                            */

struct proxy_control;
struct policy;

/* Called with each policy compiled from a valid line; takes ownership. */
typedef void (*proxy_control_policy_fn)(void *arg, struct policy *p);

/* Reads JSON lines from fd (>= 3; the control owns and closes it), each a
 * complete settings document with the managed file (managed, NULL: the
 * default path) applied over it: valid ones are compiled and handed to fn,
 * invalid ones reported on report (may be NULL) and ignored. Stops at end
 * of file. Any readable descriptor: one that cannot be polled (a regular
 * file, /dev/null) is read on the thread pool. 0, or UV_E* (UV_EBADF: not
 * open; UV_EINVAL...). */
int proxy_control_open(struct proxy_control **out, uv_loop_t *loop, int fd, const char *managed,
                       proxy_control_policy_fn fn, void *arg, FILE *report);
/* Stops and frees (from a close callback: run the loop once more). */
void proxy_control_close(struct proxy_control *c);
/* sluice run: credentials fixed at start from FIXED (which outlives c): a
 * line without "credentials" is compiled with FIXED's, a line with other
 * ones is refused. */
struct settings;
void proxy_control_fix_credentials(struct proxy_control *c, const struct settings *fixed);
/* Lines applied and refused so far. */
void proxy_control_counts(const struct proxy_control *c, unsigned *applied, unsigned *refused);

#endif
