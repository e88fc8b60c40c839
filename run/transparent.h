/* run/transparent.h - transparent mode, host side, run/'s own header:
 * connect(), bind() and getpeername() interception through seccomp user
 * notification (transparent.c, tp_call.c, tp_dial.c, tp_unix.c,
 * tp_peer.c), the synthetic address table and the sandbox's resolver
 * (tp_dns.c). */
#ifndef SLUICE_RUN_TRANSPARENT_H
#define SLUICE_RUN_TRANSPARENT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <uv.h>

#include "bridge/bridge.h"
#include "policy/policy.h"

/* Names the resolver answered for; index i has the synthetic addresses
 * 198.18.0.0 + i + 1 and fd53:6c75:6963:6500::(i + 1). */
struct tp_names {
    char **v;
    size_t n, cap;
    uint32_t *slots; /* open addressing: index + 1, 0 empty */
    size_t scap;
};

/* The index of NAME (canonical), adding it if new; -ENOSPC when the range is
 * used up, -ENOMEM. */
long tp_names_add(struct tp_names *n, const char *name);
long tp_names_find(const struct tp_names *n, const char *name);
/* The name whose synthetic address A is, or NULL. */
const char *tp_names_lookup(const struct tp_names *n, const struct policy_addr *a);
void tp_synthetic(size_t index, int family, struct policy_addr *a);
void tp_names_free(struct tp_names *n);

/* The resolver's verdict on a name is policy_dns_refused (policy.h), which
 * `sluice check --transparent` prints too. */

struct tp;
struct run_notify;

/* The answer to one DNS query (UDP payload, or a TCP message without its
 * length); 0 to drop it. cap >= 512. Exposed for tests and fuzzing. */
size_t tp_dns_answer(struct tp *t, const uint8_t *q, size_t qlen, uint8_t *out, size_t cap);

#define TP_UDP_PORTS_MAX 32 /* transparent UDP: ports with a relay from the start */

struct tp_opts {
    uv_loop_t *loop;
    struct egress_env *egress; /* the run's verdict -> ask -> resolve -> guard -> dial;
                                  NULL: a guarded run (inherit.c), no dialing */
    struct run_notify *notify; /* the seccomp listener's server (notify.c):
                                  tp_start routes its syscalls there */
    int cmd_pid;               /* the command, in the host's pid namespace */
    dev_t ns_dev;              /* the sandbox's network namespace (tp_dns_sockets) */
    ino_t ns_ino;
    int dns_udp_fd; /* the resolver's sockets in the sandbox (taken), -1 none */
    int dns_tcp_fd;
    int diag_fd;    /* sock_diag socket in the sandbox (taken), -1 none */
    connlog_fn log; /* decision records (protocol "transparent" / "dns") */
    void *log_ctx;
    uint64_t *next_id;  /* connection ids, shared with the proxies */
    size_t max_pending; /* connect()s in flight at most (EAGAIN beyond); 0: 1024 */
    int allow_unix;     /* network.allowAllUnixSockets: a Unix path connect()/bind()
                           is the kernel's (CONTINUE), else refused */
    /* transparent UDP (tp_udp.c): a relay socket bound to PORT of FAMILY in
     * the sandbox's namespace (run_ports_udp_relay), or -errno; NULL: off
     * (the local routes are not in) */
    int (*udp_relay)(void *ctx, int family, unsigned port);
    void *udp_relay_ctx;
    uint64_t udp_idle_ms; /* a flow's idle time before it is closed; 0: 120 s */
    /* ports served from the start (53, the udp: rules' ports), outside the
     * bound on ports learned later */
    uint16_t udp_ports[TP_UDP_PORTS_MAX];
    size_t udp_nports;
};

/* Transparent UDP's counters as one line ("" when it carried nothing), for
 * the end of the run. */
void tp_udp_summary(const struct tp *t, char *buf, size_t len);

/* NULL, or the piece of the kernel transparent mode needs and lacks. */
const char *tp_preflight(void);

/* Starts serving. Takes the descriptors in every case. On failure *out may
 * still be set (call tp_close) and err says why. */
int tp_start(struct tp **out, const struct tp_opts *o, char *err, size_t errlen);

/* Refuses pending connect()s (ECONNREFUSED), closes everything; memory goes
 * when the loop has run the close callbacks. NULL is a no-op. */
void tp_close(struct tp *t);

/* Writes DIR/resolv.conf naming 127.0.0.1 as the only server, and finds
 * where it must be bound in the sandbox (what /etc/resolv.conf resolves to).
 * 0, or -errno with err set. */
int tp_resolv_conf(const char *dir, char *file, size_t flen, char *dest, size_t dlen, char *err,
                   size_t errlen);

/* Makes the resolver's UDP and TCP sockets on 127.0.0.1:53 (and a
 * sock_diag netlink socket, *diag, to see what listens there) in the network
 * namespace of CMD_PID (the sandbox's): a forked helper joins the user
 * namespace that owns it and binds there, so nothing inside the sandbox
 * ever holds a capability. Also identifies that namespace (*ns_dev, *ns_ino;
 * while inner still waits, so a command that ends at once cannot race it).
 * *routes: in, 1 to make every address local there (transparent UDP,
 * tp_udp.c); out, 1 when the IPv4 route is in, | 2 the IPv6 one, 0 none.
 * 0, or -errno with err naming the failed step. */
int tp_dns_sockets(int cmd_pid, int *udp, int *tcp, int *diag, dev_t *ns_dev, ino_t *ns_ino,
                   int *routes, char *err, size_t errlen);

/* For tests: a table-only context whose tp_dns_answer decides with egress's
 * policy. */
struct tp *tp_new_for_test(uv_loop_t *loop, struct egress_env *egress, connlog_fn log, void *ctx);
void tp_free_for_test(struct tp *t);
const struct tp_names *tp_names_of(const struct tp *t);

#endif
