/* policy/policy-int.h - internals shared by the policy module's files. */
#ifndef SLUICE_POLICY_INT_H
#define SLUICE_POLICY_INT_H

#include <stddef.h>
#include <stdint.h>

#include "policy/policy.h"

#define POLICY_NO_RULE UINT32_MAX

/* Open-addressing hash table from a byte key to the head of a chain of rule
 * indices (rules sharing the key, in index order, linked via policy.chain). */
struct ptab_slot {
    uint64_t hash;
    const uint8_t *key; /* NULL: empty slot */
    uint32_t keylen;
    uint32_t head;
    uint32_t tail;
    uint16_t head_port; /* port of the head rule (0 = every port) */
    uint8_t single;     /* the chain holds one rule */
};

struct ptab {
    struct ptab_slot *slots;
    size_t cap; /* power of two, 0 when empty */
    size_t n;
    uint64_t label_mask; /* bit k: a key with k labels (63: 63 or more) */
};

/* CIDR rules of one family: one hash table per prefix length present, looked
 * up from the longest length down; cost is bounded by the number of distinct
 * lengths (at most 33 or 129), independent of the number of rules. */
struct pcidr {
    struct ptab bylen[129];
    uint8_t lens[129]; /* prefix lengths present, longest first */
    size_t nlens;
};

struct pchunk;

struct policy {
    struct policy_parent *parent; /* network.parentProxy or the environment's; NULL: none */
    struct policy_http_opts http;
    struct policy_tls_opts tls; /* network.tlsTerminate (tls.c) */
    struct policy_rule *rules;
    uint32_t *chain; /* next rule index with the same key, or POLICY_NO_RULE */
    size_t nrules, caprules;

    struct ptab deny_exact, deny_wild, allow_exact, allow_wild;
    uint32_t deny_any; /* chain of '*' rules */
    uint32_t deny_any_tail;
    struct pcidr deny_cidr[2], allow_cidr[2], rdeny_cidr[2]; /* [0] v4, [1] v6 */

    int allow_all, strict, deny_private, report;
    char *deny_message; /* network.denyMessage, or NULL */

    struct policy_addr *self;
    size_t nself;
    struct policy_addr *listeners;
    uint16_t *listener_ports;
    size_t nlisteners;

    struct policy_req_rule *req; /* network.requestRules (request.c) */
    size_t nreq;
    int req_managed; /* written by the managed file: report mode does not lift them */

    struct policy_udp *udp; /* the "udp:" rules' tables (udp.c); NULL: none */
    struct policy_cred *cred; /* credentials' masked entries (cred.c) */
    size_t ncred;

    struct pchunk *arena;
    unsigned long *match_count; /* policy_count_matches (tests); NULL: not counted */
    unsigned refs; /* policy_ref / policy_free, atomic: workers share one policy */
};

const char *policy__article(enum policy_addr_class c);
int policy__parse_port(const char *s, size_t len, uint16_t *port);
int policy__v6_is_mapped(const uint8_t *b);
int policy__tls_compile(struct policy *p, const struct settings *s, struct settings_error *err);
void policy__tls_free(struct policy *p);
uint64_t policy__hash(const uint8_t *key, size_t len);
uint32_t policy__ptab_first(const struct policy *p, const struct ptab *t, const uint8_t *key,
                            size_t len, uint64_t h, uint16_t port);
uint32_t policy__cidr_match(const struct policy *p, const struct pcidr *c,
                            const struct policy_addr *a, uint16_t port);
uint32_t policy__chain_first(const struct policy *p, uint32_t head, uint16_t port);
int policy__embedded_v4(const uint8_t *b, uint8_t v4[4]);
uint32_t policy__ip_denied(const struct policy *p, const struct policy_addr *a, uint16_t port);
int policy__addr_denied_class(enum policy_addr_class c, int deny_private);
enum policy_addr_class policy__local_class(const struct policy *p, const struct policy_addr *a,
                                           uint16_t port);

/* One rule's host pattern (name: its canonical name part) against a
 * request host and port, as the domain matcher matches it. */
int policy__rule_host_match(const struct policy_rule *r, const char *name, size_t nlen,
                            const struct policy_host *h, uint16_t port);

/* The tables (match.c), for udp.c. */
int policy__ptab_add(struct policy *p, struct ptab *t, const uint8_t *key, size_t len,
                     uint32_t idx);
void policy__ptab_free(struct ptab *t);
int policy__cidr_add(struct policy *p, struct pcidr *c, const struct policy_rule *r, uint32_t idx);
void policy__cidr_free(struct pcidr *c);
/* Lowest-index rule of a name table pair matching h (exact, or a wildcard
 * over a proper suffix), or POLICY_NO_RULE. */
uint32_t policy__name_match(const struct policy *p, const struct ptab *exact,
                            const struct ptab *wild, const struct policy_host *h, uint16_t port);
/* Fills d for rule idx deciding v (its reason, deniedDomainReasons). */
void policy__decide_rule(const struct policy *p, uint32_t idx, enum policy_verdict v,
                         struct policy_decision *d);

/* An IP literal no rule decided: 1 with d filled (DENY, POLICY_BY_CLASS)
 * when its class is denied, else 0. */
int policy__decide_class(const struct policy *p, const struct policy_host *h, uint16_t port,
                         struct policy_decision *d);

/* "udp:" rules (udp.c). */
struct policy_udp;
int policy__udp_add(struct policy *p, const struct policy_rule *r, const char *name, uint32_t idx);
void policy__udp_free(struct policy *p);
/* The lowest "udp:" deny IP rule matching a (or the IPv4 it embeds), and
 * the lowest "udp:" allow IP rule matching a; POLICY_NO_RULE when none. */
uint32_t policy__udp_ip_denied(const struct policy *p, const struct policy_addr *a, uint16_t port);
uint32_t policy__udp_ip_allowed(const struct policy *p, const struct policy_addr *a,
                                uint16_t port);
/* Credentials (cred.c). */
struct policy_cred;
int policy__cred_compile(struct policy *p, const struct settings *s, struct settings_error *err);
void policy__cred_free(struct policy *p);

/* Request rules (request.c). */
struct policy_req_rule;
int policy__request_compile(struct policy *p, const struct settings *s, struct settings_error *err);
void policy__request_free(struct policy *p);
int policy__request_managed(const struct policy *p);
/* Narrows the domain lists' decision d for a request (rq NULL: a
 * connection whose requests sluice cannot read). */
void policy__request_narrow(const struct policy *p, const struct policy_host *h, uint16_t port,
                            const struct policy_request *rq, struct policy_decision *d);

#endif
