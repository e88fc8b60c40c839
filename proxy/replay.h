/* proxy/replay.h - `sluice check --replay LOG`: one line of a connection log
 * (README "Connection log", logfmt or JSON lines) read back as a record
 * (proxy/replay_parse.c, I/O-free, fuzzed by tests/fuzz/fuzz_replay.c), and
 * the replay of a log against a policy (proxy/replay.c). */
#ifndef SLUICE_PROXY_REPLAY_H
#define SLUICE_PROXY_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "policy/policy.h"

/* The longest log line read; a longer one is bad input (the proxy writes
 * lines of a few KB: url, rule, source and reason are bounded). */
#define REPLAY_LINE_MAX 65536

/* One decision record. The strings point into the caller's buffer, NULL
 * when the key is absent. */
struct replay_record {
    const char *protocol; /* connect, http, socks5, socks5-udp, transparent,
                             transparent-udp, dns */
    const char *decision; /* allow, deny, would_deny */
    const char *host;     /* as logged */
    const char *method;   /* http, https: the request method, or NULL */
    const char *url;      /* http: the URL without its query, or NULL */
    const char *rule;     /* the deciding rule as logged ("'PATTERN' LIST[INDEX]"), or NULL */
    const char *source;   /* FILE:LINE, or NULL */
    const char *addr;     /* the address dialed (or refused by the guard), or NULL */
    uint16_t port;        /* 0 for protocol=dns */
    struct policy_host h; /* host, normalised */
    const char *path;     /* http with method and url: the path of url ("/" when empty), or
                             NULL: the record is judged as a request (method, path) */
};

/* Parses one log line (without its newline; any bytes, len of them) into
 * *r, its strings decoded into buf (cap >= len + 1). Returns 1 for a
 * decision record, 0 for any other well-formed record (close, server
 * events: skipped), or -EINVAL with *why (one line, static) for a line that
 * is not a record of the connection log: bad syntax (quoting, escapes, a
 * duplicate key, a control byte), a missing or unknown event, protocol or
 * decision, a bad host or port, or a url that is not http://. */
int replay_parse_line(const char *line, size_t len, char *buf, size_t cap, struct replay_record *r,
                      const char **why);

/* 1 for a record of UDP traffic (socks5-udp, transparent-udp): judged
 * with the UDP verdict, never learned as a TCP entry. */
int replay_protocol_udp(const char *protocol);

/* FNV-1a over n bytes: the hash of replay's and learn's tables. */
uint64_t replay_hash(const char *s, size_t n);

/* Reads the connection log at path ("-": stdin) line by line and hands
 * each decision record to add (its strings valid during the call only).
 * Every bad line (up to 20) is reported on stderr as PATH:LINE: why, and
 * then no record after the first bad line is added. 0, or -1 after a bad
 * line, a read error, or add failing (a negative return: out of memory). */
typedef int (*replay_add_fn)(void *ctx, const struct replay_record *r);
int replay_read(const char *path, replay_add_fn add, void *ctx, unsigned long *decisions,
                unsigned long *others);

#endif
