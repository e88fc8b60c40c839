/* policy/policy.h - what sluice allows: rules, decisions, the address guard.
 *
 * Pure code: no sockets, no event loop, no I/O (settings/ reads the settings
 * and list files). Errors are 0 / negative errno (R3); verdicts are enums.
 */
#ifndef SLUICE_POLICY_H
#define SLUICE_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "settings/settings.h" /* struct settings, the loader: the layer below policy */

/* ------------------------------------------------------------------------ */
/* Hosts and addresses                                                       */

#define POLICY_HOST_MAX 253 /* longest canonical host, without NUL */

enum policy_host_kind {
    POLICY_HOST_NAME = 0, /* a DNS name, lower-case A-labels, no trailing dot */
    POLICY_HOST_IPV4,     /* canonical dotted quad */
    POLICY_HOST_IPV6,     /* canonical RFC 5952 text, no brackets */
};

/* An IP address: family is 4 or 6; a v4 address lives in bytes[0..3]. */
struct policy_addr {
    uint8_t family;
    uint8_t bytes[16];
};

/* A request host after normalisation (design.md "Policy semantics"). */
struct policy_host {
    enum policy_host_kind kind;
    struct policy_addr addr; /* set for IPV4 / IPV6 */
    size_t len;
    char name[POLICY_HOST_MAX + 1]; /* canonical text for every kind */
};

/* Normalises a raw host (as a client sent it; not NUL-terminated, may hold
 * any bytes). IPv6 may be bracketed or bare. Numeric IPv4 spellings become
 * the canonical address; IPv4-mapped IPv6 becomes IPv4. Returns 0, or
 * -EINVAL with *why set to a static description. */
int policy_host_normalize(const char *raw, size_t len, struct policy_host *out, const char **why);

/* Parses a check/CLI target: host, host:port, IPv4, [v6], [v6]:port. A bare
 * IPv6 address without brackets is accepted only when it has no port.
 * Returns 0 or -EINVAL with *why set. */
int policy_target_parse(const char *s, uint16_t default_port, struct policy_host *host,
                        uint16_t *port, const char **why);

/* Text of an address ("1.2.3.4" or "2001:db8::1"); buf needs 46 bytes. */
const char *policy_addr_str(const struct policy_addr *a, char *buf, size_t len);

/* Parses an IP address text (no brackets, no zone) into *a. 0 or -EINVAL. */
int policy_addr_parse(const char *s, struct policy_addr *a);

/* ------------------------------------------------------------------------ */
/* Rules and decisions (policy/match.c, policy/decide.c)                      */

enum policy_verdict { POLICY_DENY = 0, POLICY_ALLOW = 1, POLICY_ASK = 2 };

enum policy_rule_kind {
    POLICY_RULE_NAME = 0, /* example.com */
    POLICY_RULE_WILDCARD, /* *.example.com */
    POLICY_RULE_ANY,      /* *  (deniedDomains only) */
    POLICY_RULE_CIDR,     /* 203.0.113.7, [2001:db8::1], 10.0.0.0/8, [fc00::]/7 */
};

enum policy_list_id {
    POLICY_LIST_DENIED = 0,      /* network.deniedDomains (+ deniedDomainsFiles) */
    POLICY_LIST_ALLOWED,         /* network.allowedDomains (+ allowedDomainsFiles) */
    POLICY_LIST_RESOLVED_DENIED, /* network.deniedResolvedAddresses */
    POLICY_LIST_REQUEST,         /* network.requestRules: pattern is the whole rule as one
                                    line, "ACTION METHODS HOST PATHS" */
};

struct policy_rule {
    enum policy_rule_kind kind;
    enum policy_list_id list_id;
    const char *list;    /* key name, e.g. "network.allowedDomains" */
    size_t index;        /* index in that key, or line in a list file */
    const char *pattern; /* as written */
    const char *file;    /* source file */
    unsigned line, col;
    uint16_t port;       /* 0 = every port */
    const char *reason;  /* deniedDomainReasons entry, or NULL */
    int managed;         /* written by the managed file (or a list file it names) */
    int udp;             /* a "udp:" rule (policy/udp.c): judges UDP only */
    /* compiled form */
    struct policy_addr addr; /* CIDR network */
    unsigned prefix;         /* CIDR prefix length */
};

struct policy; /* opaque compiled policy */

/* ------------------------------------------------------------------------ */
/* parent (corporate) proxy (policy/parent.c)                                */

struct policy_parent_proxy {
    int set;
    struct policy_host host; /* name or address of the parent */
    uint16_t port;
    char auth[400];          /* "Basic ..." from the URL's credentials, or "" */
    char shown[POLICY_HOST_MAX + 16]; /* "host:port" for logs (no credentials) */
    /* network.mitmProxy: the proxy listens on this host Unix socket (host
     * and port unused); "" for a TCP parent */
    char unix_path[108];
};

struct policy_parent;

/* Parses one proxy URL ([http://][USER[:PASS]@]HOST[:PORT][/]). 0, or
 * -EINVAL with *why set. */
int policy_parent_parse_url(const char *url, struct policy_parent_proxy *out, const char **why);
/* Checks a NO_PROXY list (comma/space separated). 0 or -EINVAL with *why. */
int policy_parent_check_noproxy(const char *list, const char **why);
/* From network.parentProxy, else from HTTP(S)_PROXY / NO_PROXY in env (may
 * be NULL). *out is NULL when there is no parent. */
int policy_parent_build(const struct settings *s, char *const *env, struct policy_parent **out,
                        struct settings_error *err);
void policy_parent_free(struct policy_parent *pp);
/* The parent to go through for host h (plain_http: an absolute-form HTTP
 * request), or NULL for a direct connection (loopback, NO_PROXY, none). */
const struct policy_parent_proxy *policy_parent_pick(const struct policy_parent *pp,
                                                     const struct policy_host *h, int plain_http);
/* The compiled policy's parent (NULL when none). */
const struct policy_parent *policy_parent(const struct policy *p);

/* Request-level options (network.stripResponseHeaders, refuseOpaqueTunnels,
 * requireHostMatch, ambiguousRequestTarget), compiled with the policy so a
 * reload or a --control-fd line changes them for new requests. */
struct policy_http_opts {
    int refuse_opaque_tunnels;
    int require_host_match;
    enum settings_ambiguous ambiguous;
    size_t nstrip;
    char **strip; /* lower-case header names */
};
const struct policy_http_opts *policy_http_opts(const struct policy *p);

/* network.tlsTerminate as compiled with the policy (policy/tls.c). */
struct policy_tls_exclude;
struct policy_tls_opts {
    int on;                /* the settings give tlsTerminate */
    unsigned max_tunnels;  /* terminated tunnels open at once, per process */
    unsigned handshake_ms; /* from the CONNECT's 200 to the end of the handshake */
    int scope_needed;      /* scope "needed": only hosts that need it (policy_tls_needed) */
    size_t nexclude;
    struct policy_tls_exclude *exclude; /* excludeDomains, compiled */
    /* network.mitmProxy, compiled here too (the two are refused together) */
    size_t nmitm;
    struct policy_tls_exclude *mitm; /* mitmProxy.domains; none: no mitmProxy */
    struct policy_parent_proxy mitm_pp;
};
const struct policy_tls_opts *policy_tls_opts(const struct policy *p);
/* 1 when host:port matches network.tlsTerminate.excludeDomains (patterns as
 * in allowedDomains: a name, *.name for the names below it, an address or
 * CIDR, each with an optional port). */
int policy_tls_excluded(const struct policy *p, const struct policy_host *h, uint16_t port);
/* 1 when host:port needs termination to be judged or served: it has request
 * rules, or (with tlsTerminate on) a masked credential's value goes there,
 * or (always) a credentials.headers entry's header. */
int policy_tls_needed(const struct policy *p, const struct policy_host *h, uint16_t port);
/* Why, for messages: "request rules (network.requestRules)", "credentials
 * (...)" or both (static text). */
const char *policy_tls_needed_why(const struct policy *p, const struct policy_host *h,
                                  uint16_t port);
/* 1 when an allowed CONNECT (or SOCKS5 CONNECT) to host:port is to be
 * sniffed and terminated: tlsTerminate is on, the host is not in
 * excludeDomains, and under scope "needed" it needs termination. */
int policy_tls_terminates(const struct policy *p, const struct policy_host *h, uint16_t port);

/* network.mitmProxy (policy/tls.c): the external proxy on a Unix socket
 * (its unix_path set) that host:port goes to, or NULL when the host does
 * not match mitmProxy.domains (patterns as in allowedDomains). Asked after
 * the allow and deny lists allowed the host. */
const struct policy_parent_proxy *policy_mitm_pick(const struct policy *p,
                                                   const struct policy_host *h, uint16_t port);

/* Compiles settings into a policy. Every pattern is checked; the first bad
 * one fails the compile with a located message. Returns 0 or -EINVAL/-ENOMEM. */
int policy_compile(const struct settings *s, struct policy **out, struct settings_error *err);
void policy_free(struct policy *p);
/* One more owner of p (thread-safe; read-only sharing between event loops):
 * each policy_free() drops one, the last frees. Returns p. */
struct policy *policy_ref(struct policy *p);

/* Parses one pattern the way policy_compile does (for tests and tools).
 * in_denied: '*' and wildcards over a public suffix (*.co.uk) are accepted. On success fills kind/port/addr/prefix and
 * writes the canonical name part to name (size POLICY_HOST_MAX+1). */
int policy_pattern_parse(const char *pattern, int in_denied, struct policy_rule *r, char *name,
                         const char **why);

/* The registrable domain of a canonical name (lower-case A-labels), by the
 * public suffix list the wildcard check uses (ICANN and private sections;
 * an unlisted top-level label counts as a suffix): "b.example.co.uk" ->
 * "example.co.uk". 0 with it in out, or -ENOENT when the name is itself a
 * suffix (or no list is available), -ENOSPC when cap is too small. */
int policy_registrable_domain(const char *name, char *out, size_t cap);

/* The transport a destination is judged for (issue 26). A rule opens UDP
 * only when it says "udp:" (udp:PATTERN:PORT in allowedDomains, PORT may be
 * '*'); every other allow rule is TCP-only. A deny rule without "udp:"
 * denies both transports, a "udp:" deny rule UDP only; deny-first holds for
 * both. For UDP, no rule deciding is a denial (no ask, no allowAllDomains). */
enum policy_transport { POLICY_TCP = 0, POLICY_UDP = 1 };

/* Parses one network.allowedDomains / deniedDomains entry: a pattern
 * (policy_pattern_parse) or "udp:PATTERN[:PORT|:*]" (r->udp = 1; an allow
 * rule must name its port or '*', r->port 0 for '*'). Same arguments and
 * results as policy_pattern_parse. */
int policy_rule_parse(const char *value, int in_denied, struct policy_rule *r, char *name,
                      const char **why);

/* Where a decision came from. */
enum policy_origin {
    POLICY_BY_RULE = 0,     /* a deny or allow rule; rule != NULL */
    POLICY_BY_CLASS,        /* IP literal in a denied address class */
    POLICY_BY_ALLOW_ALL,    /* network.allowAllDomains */
    POLICY_BY_STRICT,       /* no rule, strictAllowlist */
    POLICY_BY_NO_RULE,      /* no rule decides: ask (or deny without a handler) */
    POLICY_BY_GUARD,        /* every resolved address was refused by the guard */
    POLICY_BY_REQUEST,      /* network.requestRules: a deny rule matched (rule), no allow rule
                               matched (rule NULL), an ambiguous target, or a connection
                               without a readable request to a host with rules */
};

struct policy_decision {
    enum policy_transport transport; /* what was judged (policy_decide: TCP) */
    enum policy_verdict verdict;
    enum policy_origin origin;
    const struct policy_rule *rule; /* NULL unless origin == POLICY_BY_RULE */
    char reason[256];               /* one line, printable ASCII */
};

/* ------------------------------------------------------------------------ */
/* Request rules (policy/request.c)                                          */

/* A request line: the method and the request target in origin form (the
 * path and query as sent; an absolute-form request's path part). Not
 * NUL-terminated. method NULL: a tunnel sluice terminates (TLS), decided by
 * the domain lists alone, since request rules judge each request inside it
 * (where rq NULL, a tunnel sluice cannot read, is refused on a ruled host). */
struct policy_request {
    const char *method;
    size_t method_len;
    const char *target;
    size_t target_len;
};

#define POLICY_PATH_MAX 8192 /* longest path judged; longer is ambiguous */

/* Normalises a request target for request rules: the query left out,
 * unreserved escapes decoded and the others upper-cased, dot segments
 * resolved. out needs len + 1 bytes (cap). 0, or -EINVAL with *why for an
 * ambiguous target (see policy/request.c). */
int policy_path_normalize(const char *in, size_t len, char *out, size_t cap, size_t *outlen,
                          const char **why);
/* Checks a rule's path glob (starts with '/', '*' and '**' whole segments,
 * normalises cleanly). 0 or -EINVAL with *why. */
int policy_path_glob_check(const char *glob, const char **why);
/* 1 when a normalised path matches a normalised glob. */
int policy_path_glob_match(const char *glob, size_t glen, const char *path, size_t plen);
size_t policy_request_rule_count(const struct policy *p);
/* 1 when some request rule names host:port (its requests are judged by
 * method and path), else 0. */
int policy_request_ruled(const struct policy *p, const struct policy_host *h, uint16_t port);

/* Credentials (policy/cred.c, issue 24): the masked entries of
 * "credentials", by name only (the values are never in the policy), in
 * settings order (envVars, then files, then awsPairs), then the entries of
 * credentials.headers (file POLICY_CRED_HEADER, named "headers[i]:NAME"). policy_cred_injects: 1 when entry
 * i's real value may be sent to host:port (its injectHosts; default the
 * hosts allowedDomains allows). policy_cred_host: 1 when some entry's may
 * (such a host needs termination: policy_tls_needed). */
size_t policy_cred_count(const struct policy *p);
const char *policy_cred_name(const struct policy *p, size_t i, int *file);
#define POLICY_CRED_HEADER 2 /* "file" of a credentials.headers entry ("headers[i]:NAME") */
int policy_cred_find(const struct policy *p, int file, const char *name);
/* Entry i's require: the header every request to its hosts must carry its
 * placeholder in (alone), or NULL when it has no require. */
const char *policy_cred_require(const struct policy *p, size_t i);
int policy_cred_injects(const struct policy *p, size_t i, const struct policy_host *h,
                        uint16_t port);
int policy_cred_host(const struct policy *p, const struct policy_host *h, uint16_t port);
/* 1 when some credentials.headers entry's hosts include host:port. */
int policy_cred_header_host(const struct policy *p, const struct policy_host *h, uint16_t port);

/* policy_decide with an optional request line: the domain lists decide,
 * then request rules narrow (rq NULL: a connection whose requests sluice
 * cannot read, refused on a host with request rules). policy_decide is
 * this with rq NULL. */
void policy_decide_request(const struct policy *p, const struct policy_host *h, uint16_t port,
                           const struct policy_request *rq, struct policy_decision *d);

/* The rule step of policy_verdict: decides a normalised request by its
 * rules. ASK means no rule decided and the caller may ask a handler; without
 * one the caller must treat it as DENY. This is the one rule match of a
 * decision: callers use policy_verdict, which adds the guard, or keep the
 * match and finish it with policy_verdict_finish once the answers are in. */
void policy_decide(const struct policy *p, const struct policy_host *h, uint16_t port,
                   struct policy_decision *d);

/* policy_decide for transport t (policy/udp.c for UDP): for POLICY_UDP the
 * deny rules of both kinds, then the "udp:" allow rules, an IP literal in a
 * denied class, and no rule deciding is DENY (origin POLICY_BY_NO_RULE).
 * policy_verdict_finish reads d->transport and guards the answers for it
 * (an IP rule opens an address for UDP only when it is a "udp:" rule). */
void policy_decide_transport(const struct policy *p, enum policy_transport t,
                             const struct policy_host *h, uint16_t port,
                             struct policy_decision *d);

/* Transparent mode's resolver (policy/dns.c): 1 when a name must be answered
 * NXDOMAIN, i.e. a port-less deny rule denies it on every port (never in
 * report mode, never for an IP literal); 0 when it gets an address and is
 * decided with its port at connect(). d: policy_verdict's judgment at
 * port 0 without answers. */
struct policy_judgment;
int policy_dns_refused(const struct policy *p, const struct policy_host *h,
                       struct policy_judgment *d);

/* Formats "FILE:LINE" of a rule into buf. */
const char *policy_rule_source(const struct policy_rule *r, char *buf, size_t len);

/* ------------------------------------------------------------------------ */
/* The resolved-address guard (policy/guard.c)                               */

enum policy_addr_class {
    POLICY_CLASS_PUBLIC = 0,
    POLICY_CLASS_PRIVATE,      /* RFC 1918, ULA fc00::/7, CGNAT 100.64/10, 198.18/15 (fake-IP
                                  resolvers use it), local-use NAT64 64:ff9b:1::/48 */
    POLICY_CLASS_LOOPBACK,     /* 127/8, ::1 */
    POLICY_CLASS_UNSPECIFIED,  /* 0.0.0.0/8, :: */
    POLICY_CLASS_LINK_LOCAL,   /* 169.254/16, fe80::/10 */
    POLICY_CLASS_MULTICAST,    /* 224/4, ff00::/8 */
    POLICY_CLASS_BROADCAST,    /* 255.255.255.255 */
    POLICY_CLASS_RESERVED,     /* 240/4, documentation ranges, 2001:2::/48, 100::/64 ... */
    POLICY_CLASS_METADATA,     /* cloud metadata endpoints */
    POLICY_CLASS_THIS_HOST,    /* one of this host's addresses (policy_set_local) */
    POLICY_CLASS_PROXY,        /* one of the proxy's own listeners */
    POLICY_CLASS_EMBEDDED,     /* IPv6 embedding a denied IPv4 (mapped, compat, NAT64, 6to4, Teredo) */
    POLICY_CLASS_LISTED,       /* an IP rule in deniedDomains or deniedResolvedAddresses */
};

const char *policy_class_name(enum policy_addr_class c);

/* Classifies an address on its own (no settings). For EMBEDDED, *inner (if
 * not NULL) receives the class of the embedded IPv4. */
enum policy_addr_class policy_addr_classify(const struct policy_addr *a,
                                            enum policy_addr_class *inner);

struct policy_guard_verdict {
    struct policy_addr addr;
    enum policy_addr_class cls;
    int allowed;                    /* 1: passes the guard */
    int dial;                       /* set by policy_verdict: 1 when this answer may be dialed
                                       for the request (allowed, and when report mode lets a
                                       denial through, not loopback only because the name is
                                       localhost); policy_guard leaves it 0 */
    const struct policy_rule *rule; /* deciding IP rule, if any */
    char why[400];
};

/* The guard step of policy_verdict: for a request and its resolved
 * addresses, fills out[i] for each addrs[i] and returns how many may be
 * dialed. Pure: no I/O. Callers use policy_verdict, which folds this into the
 * decision; this is public for the tests. */
size_t policy_guard(const struct policy *p, const struct policy_host *h, uint16_t port,
                    const struct policy_addr *addrs, size_t n, struct policy_guard_verdict *out);
/* policy_guard for transport t: for UDP the "udp:" deny IP rules refuse
 * too, and only "udp:" allow IP rules open an address. */
size_t policy_guard_transport(const struct policy *p, enum policy_transport t,
                              const struct policy_host *h, uint16_t port,
                              const struct policy_addr *addrs, size_t n,
                              struct policy_guard_verdict *out);

/* This host's own addresses and the proxy's own listeners (address + port,
 * port 0 = any), judged by the guard. Copies the arrays. 0 or -ENOMEM. */
int policy_set_local(struct policy *p, const struct policy_addr *self, size_t nself,
                     const struct policy_addr *listeners, const uint16_t *listener_ports,
                     size_t nlisteners);

/* Settings the policy was compiled from that its callers need. */
int policy_mode_report(const struct policy *p);
int policy_deny_private(const struct policy *p);
size_t policy_rule_count(const struct policy *p);

/* ------------------------------------------------------------------------ */
/* The verdict (policy/verdict.c)                                            */
/*                                                                           */
/* The one place a decision is composed: the rule decision (policy_decide:   */
/* deny and allow rules, IP literals in a denied class, allowAllDomains,     */
/* strictAllowlist, "ask") and the resolved-address guard (denied classes,   */
/* IP rules, the proxy's own listeners, localhost only to loopback). Egress, */
/* HTTP upstream reuse and `sluice check` all call it.                       */

struct policy_judgment {
    enum policy_transport transport; /* the match's (policy_decision.transport) */
    enum policy_verdict verdict;    /* the decision: ALLOW, DENY, or ASK (no rule decides:
                                       ask a handler; deny when none is configured) */
    enum policy_origin origin;      /* what decided; POLICY_BY_GUARD when every answer was
                                       refused */
    const struct policy_rule *rule; /* the deciding rule (for a guard refusal: the IP rule
                                       that refused the first answer, else the rule that
                                       allowed the name); NULL when none */
    char rule_text[512];            /* "'PATTERN' LIST[INDEX]" ("'PATTERN' LIST" for a
                                       list file), or "" */
    char source[300];               /* "FILE:LINE" where the rule is written, or "" */
    int report_only;                /* report mode (network.mode "report") lets this DENY
                                       (or ASK) through as would_deny: a deny rule,
                                       strictAllowlist, or no rule deciding. Never for the
                                       resolved-address guard (an IP literal in a denied
                                       class, answers the guard refuses, IP rules) nor for
                                       a deny rule the managed file wrote: those deny in
                                       report mode too. 0 for ALLOW and outside report
                                       mode. Even then only answers with gv[i].dial are
                                       dialed. */
    int guarded;                    /* 1 when answers were judged by the guard */
    enum policy_addr_class cls;     /* guarded: the class of the first answer that passed,
                                       or of the first one when none did */
    size_t naddrs;                  /* answers judged (gv[0..naddrs-1] filled) */
    size_t nallowed;                /* answers that pass the guard */
    size_t ndial;                   /* answers with gv[i].dial (<= nallowed) */
    char reason[400];               /* one line, printable ASCII */
};

/* Judges host:port (a normalised host): policy_decide (the one rule match)
 * then policy_verdict_finish. answers: the resolved addresses of a name, or
 * NULL when the name has not been resolved (a name is resolved only when
 * this returned ALLOW or ASK without answers). An IP literal is its own
 * answer: addrs is ignored and the literal is guarded (gv needs one slot).
 * With answers, gv (n slots, or 1 for a literal) receives each answer's
 * guard verdict, also when the rule decision is DENY (report mode dials
 * anyway and needs them); a decision of ALLOW or ASK becomes DENY (origin
 * POLICY_BY_GUARD) when no answer passes, also when n is 0. gv may be NULL
 * only when no answer is judged (a name with addrs NULL). Pure. */
void policy_verdict(const struct policy *p, const struct policy_host *h, uint16_t port,
                    const struct policy_addr *addrs, size_t n, struct policy_guard_verdict *gv,
                    struct policy_judgment *j);

/* policy_verdict for transport t (policy_decide_transport). */
void policy_verdict_transport(const struct policy *p, enum policy_transport t,
                              const struct policy_host *h, uint16_t port,
                              const struct policy_addr *addrs, size_t n,
                              struct policy_guard_verdict *gv, struct policy_judgment *j);

/* policy_verdict for a request line (policy_decide_request). */
void policy_verdict_request(const struct policy *p, const struct policy_host *h, uint16_t port,
                            const struct policy_request *rq, const struct policy_addr *addrs,
                            size_t n, struct policy_guard_verdict *gv, struct policy_judgment *j);

/* The verdict in two steps, for a caller that decides before it resolves
 * (egress, `sluice check --resolve`): m is policy_decide's match for the
 * same h and port, made once and kept; each call folds it with the answers
 * (as policy_verdict does) without matching the rules again. */
void policy_verdict_finish(const struct policy *p, const struct policy_host *h, uint16_t port,
                           const struct policy_decision *m, const struct policy_addr *addrs,
                           size_t n, struct policy_guard_verdict *gv, struct policy_judgment *j);

/* For tests: every rule match (policy_decide) on p adds one to *counter
 * from now on (NULL stops counting). Not thread-safe; set before use. */
void policy_count_matches(struct policy *p, unsigned long *counter);

/* The hint a denial ends with (policy/hint.c, issue 26): in one short line
 * of printable ASCII, what a user would change in the settings to allow
 * h:port (port 0: a name, as transparent mode's resolver refuses it) - the
 * entry to add to network.allowedDomains or network.requestRules, the deny
 * rule that wins, or the managed file that set it - never a way around the
 * proxy; network.denyMessage replaces it. rq: the request judged, or NULL;
 * refused: the first answer the guard refused, or NULL. Returns buf. */
const char *policy_deny_hint(const struct policy *p, const struct policy_host *h, uint16_t port,
                             const struct policy_request *rq, const struct policy_judgment *j,
                             const struct policy_addr *refused, char *buf, size_t len);
/* network.denyMessage, or NULL. */
const char *policy_deny_message(const struct policy *p);

/* Formats a rule as policy_judgment.rule_text does (without its source:
 * policy_rule_source() gives that). */
const char *policy_rule_format(const struct policy_rule *r, char *buf, size_t len);

/* ------------------------------------------------------------------------ */
/* The ask broker (policy/ask.c)                                             */
/*                                                                           */
/* When no rule decides (POLICY_ASK) and a handler is configured, the        */
/* connection waits while the broker asks the handler. Questions for the     */
/* same host:port are coalesced: asked once, every waiter gets the answer.   */
/* Session answers are cached for that exact host:port. A question not       */
/* answered within timeout_ms is denied; at most max_pending questions are   */
/* outstanding (further distinct questions are denied at once). No event    */
/* loop: the broker reads the time from its clock and says when its next    */
/* deadline changed; the loop side (bridge/ask_timer.c: ask_broker_new,     */
/* ask_broker_close) owns the timer. Used from one thread; not thread-safe. */
/* Errors are 0 / negative errno (UV_E* on the loop side, the same values). */

struct ask_broker;
struct ask_wait;

enum ask_decision {
    ASK_DENY = 0,
    ASK_ALLOW,
    ASK_DENY_SESSION,
    ASK_ALLOW_SESSION,
};

#define ASK_REASON_MAX 200 /* a reason is one line of printable ASCII, truncated */

/* What the handler is asked. Strings are valid during the handler call only. */
struct ask_question {
    uint64_t id;          /* unique per question, > 0 */
    const char *host;     /* canonical host (policy_host.name) */
    uint16_t port;
    const char *protocol; /* "http", "connect", "socks5" */
    const char *client;   /* the first waiter's client ("127.0.0.1:40000", "unix", ...) */
};

/* The handler side. ask is called once per question; the handler answers
 * with ask_broker_answer(), from inside the call or later from the loop.
 * withdraw (may be NULL) tells it a question ended without its answer
 * (timeout, broker closing) so it can drop a prompt; the question is already
 * gone (answering it returns -ENOENT). ask_broker_set_handler copies the
 * struct. Answering runs waiter callbacks, which may re-enter the handler
 * (ask, withdraw) before ask_broker_answer returns: a handler must have its
 * own state consistent before it answers. */
struct ask_handler_ops {
    void (*ask)(void *ctx, const struct ask_question *q);
    void (*withdraw)(void *ctx, uint64_t id);
};

/* allow: 1 or 0. reason: NULL or a sanitised one-line reason (the
 * handler's, or the broker's own: "no answer within 30 s", "sluice is
 * shutting down"), valid during the call. A cache hit gives the reason the
 * session answer came with. */
typedef void (*ask_cb)(void *arg, int allow, const char *reason);

/* The broker's time. now: milliseconds on a monotonic clock (deadlines are
 * now() + timeout_ms). changed (may be NULL): the earliest deadline changed
 * (a first question, the head answered or expired); the clock reads it with
 * ask_broker_next_deadline() and calls ask_broker_expire() when it is due.
 * Neither is called once the broker is shutting down. */
struct ask_clock {
    uint64_t (*now)(void *ctx);
    void (*changed)(void *ctx);
    void *ctx;
};

/* A broker on clock (copied). 0, -EINVAL (timeout_ms or max_pending 0, no
 * now), -ENOMEM. */
int ask_broker_open(struct ask_broker **out, const struct ask_clock *clock, unsigned timeout_ms,
                    size_t max_pending);

/* 1 and *at = the earliest deadline of an outstanding question; 0 when
 * none (or shutting down). */
int ask_broker_next_deadline(const struct ask_broker *b, uint64_t *at);

/* Denies every question whose deadline is at or before now ("no answer
 * within N s"; the handler's withdraw is called first), then tells the
 * clock the next deadline. */
void ask_broker_expire(struct ask_broker *b, uint64_t now);

/* The clock's ctx, and whether ask_broker_shutdown() has been called. */
void *ask_broker_clock_ctx(const struct ask_broker *b);
int ask_broker_closing(const struct ask_broker *b);

/* Shuts the broker down: the handler's withdraw is called for each question
 * and every waiter gets a deny ("sluice is shutting down") from inside this
 * call; later asks fail with -ECANCELED. Idempotent. May be called from any
 * waiter callback or handler call. */
void ask_broker_shutdown(struct ask_broker *b);

/* Shuts down (if not yet) and frees b. Not from inside one of its callbacks:
 * the loop side frees it from a close callback (ask_broker_close). */
void ask_broker_free(struct ask_broker *b);

/* Installs the handler (before the first ask); ops NULL removes it. */
void ask_broker_set_handler(struct ask_broker *b, const struct ask_handler_ops *ops, void *ctx);

/* Asks about host:port (exact: no other port, no other name shares the
 * answer) for one waiting connection. protocol and client may be NULL ("").
 * Returns 0 when cb will be called exactly once: possibly before this returns
 * (a session-cache hit, or a handler that answers inside its call) so *w is
 * written first and the caller must set its own state before calling and
 * clear its copy of *w in cb. On a cache hit *w is NULL. Returns -EBUSY
 * when max_pending distinct questions are already outstanding (joining an
 * outstanding question is always possible), -ENOENT when no handler is
 * set, -ECANCELED when the broker is closing, -EINVAL (host empty or
 * longer than POLICY_HOST_MAX), -ENOMEM; then cb is never called (the
 * caller denies).
 * cb may do anything to the broker: ask (even the same host:port), cancel
 * other waiters, answer, close. It must not use its waiter after returning. */
int ask_broker_ask(struct ask_broker *b, const char *host, uint16_t port, const char *protocol,
                   const char *client, ask_cb cb, void *arg, struct ask_wait **w);

/* Detaches a waiter whose cb has not run (its connection closed): cb is never
 * called. The question stays asked for the other waiters (and for the session
 * cache), even when none is left. NULL, or a waiter whose cb is running, is a
 * no-op. */
void ask_wait_cancel(struct ask_wait *w);

/* The handler's answer to question id. reason may be NULL; it is sanitised:
 * first line only (up to CR or LF), tab -> space, other control bytes and
 * non-ASCII bytes -> '?', spaces trimmed, truncated to ASK_REASON_MAX bytes;
 * nothing left -> NULL. Session answers are remembered (with their reason)
 * for the broker's lifetime, up to 65536 host:port keys (beyond that they
 * apply to the waiters present only). Returns 0, -ENOENT when no such
 * question is pending (already answered, timed out, withdrawn), -EINVAL
 * for a bad decision. */
int ask_broker_answer(struct ask_broker *b, uint64_t id, enum ask_decision d, const char *reason);

/* Questions outstanding (distinct host:port). */
size_t ask_broker_pending(const struct ask_broker *b);

/* Parses an answer word: "allow", "deny", "allow-session", "deny-session"
 * (exact, lower-case). 0 or -EINVAL. */
int ask_decision_parse(const char *s, size_t len, enum ask_decision *d);

#endif
