/* run/transparent_int.h - transparent mode's own types and the calls
 * between its files: transparent.c (start, stop, routes), tp_call.c (a
 * connect()/bind() notification), tp_dial.c (dialing and the hand-over),
 * tp_unix.c (Unix paths), tp_peer.c (getpeername()) and tp_dns.c (names,
 * synthetic addresses, the sandbox's resolver). Private to those files;
 * run/transparent.h is the module's header. */
#ifndef SLUICE_RUN_TRANSPARENT_INT_H
#define SLUICE_RUN_TRANSPARENT_INT_H

#include "run/transparent.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

struct seccomp_notif;
struct seccomp_notif_resp;

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif
#ifndef SECCOMP_USER_NOTIF_FLAG_CONTINUE
#define SECCOMP_USER_NOTIF_FLAG_CONTINUE (1UL << 0)
#endif
#ifndef NS_GET_USERNS
#define NS_GET_USERNS 0xb701 /* _IO(0xb7, 0x1), <linux/nsfs.h> */
#endif
#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#endif
#ifndef SYS_landlock_restrict_self
#define SYS_landlock_restrict_self 446
#endif

/* The circular lists of struct tp (reqs, waits, dconns): HEAD's and X's
 * prev and next. */
#define TP_LIST_INIT(head) ((head)->next = (head)->prev = (head))
#define TP_LIST_PUSH(head, x)                                                                      \
    do {                                                                                           \
        (x)->next = (head)->next;                                                                  \
        (x)->prev = (head);                                                                        \
        (head)->next->prev = (x);                                                                  \
        (head)->next = (x);                                                                        \
    } while (0)
#define TP_LIST_UNLINK(x)                                                                          \
    do {                                                                                           \
        (x)->prev->next = (x)->next;                                                               \
        (x)->next->prev = (x)->prev;                                                               \
    } while (0)

#define DNS_TCP_MAX 65535u /* a DNS message over TCP, its length prefix aside */
#define TP_N_INT_OPTS 13   /* tp_dial.c's int_opts */

union tp_sa {
    struct sockaddr_in in4;
    struct sockaddr_in6 in6;
};

struct tp_req {
    struct tp *t;
    struct tp_req *prev, *next;
    uint64_t id;   /* seccomp notification id */
    int pid;       /* the calling thread (host pid namespace) */
    int target_fd; /* the descriptor number in the command */
    int orig;      /* our copy of the command's socket */
    int family;    /* its domain */
    int nonblock;  /* O_NONBLOCK on it when connect() was called */
    int mapped;    /* IPv6, not IPV6_V6ONLY: dialed from an IPv6 socket */
    struct egress_req *er;
    /* the connection base's id and log parts (frontend_conn_begin): id,
     * client "pid N", host, port and the decision's fields; its timer is
     * never used (no client stream to time) and it has no close record (no
     * relay: the command gets the socket) */
    struct frontend_conn fc;
    char host[POLICY_HOST_MAX + 1]; /* fc.host */
    union tp_sa asked; /* the address the command asked for, as getpeername gives it */
    uint8_t asked_len;
};

/* One connect() as the command made it. */
struct tp_call {
    int bind; /* 1: a bind() (network.allowLocalBinding), 0: a connect() */
    int fd;   /* its descriptor number */
    union {
        struct sockaddr sa;
        struct sockaddr_in in4;
        struct sockaddr_in6 in6;
        struct sockaddr_storage ss;
    } sa;
    size_t len; /* address length */
};

/* A socket sluice connected (by SO_COOKIE, never reused) and the address
 * its getpeername() gives: the one the command asked for. A ring: the
 * oldest of TP_PEERS is forgotten (its getpeername() then shows the address
 * dialed). */
#define TP_PEERS 1024
struct tp_peer {
    uint64_t cookie;
    union tp_sa sa;
    uint8_t len;
};

/* A connect() sluice runs for the command on its own copy of a socket of
 * the sandbox's namespace (tp_call.c run_here) whose handshake is
 * under way, for a caller that waits: answered once the socket is writable. */
struct tp_wait {
    struct tp *t;
    struct tp_wait *prev, *next;
    uint64_t id; /* seccomp notification id */
    int fd;      /* our copy of the command's socket */
    uv_poll_t poll;
};

struct dns_conn {
    uv_tcp_t tcp;
    uv_timer_t idle;
    struct tp *t;
    struct dns_conn *prev, *next;
    uint8_t buf[2 + DNS_TCP_MAX];
    size_t have;
    unsigned writes; /* answers queued and not yet completed */
    int closing, nclosed;
    int paused; /* reading stopped until the client takes its answers */
};

struct tp {
    uv_loop_t *loop;
    struct egress_env *egress;
    connlog_fn log;
    void *log_ctx;
    uint64_t *next_id;
    struct frontend fe; /* loop, log and id counter for the requests' fc (tp_frontend_init) */
    struct run_notify *notify;    /* the listener's server (notify.c), tp_opts.notify */
    int notify_fd;                /* its descriptor, for answers, ADDFD and ID_VALID */
    int diag_fd;                  /* sock_diag netlink socket in the sandbox's namespace */
    int optdef[2][TP_N_INT_OPTS]; /* a fresh TCP socket's options: [v4/v6][int_opts] */
    int self_pid;
    dev_t ns_dev; /* the sandbox's network namespace */
    ino_t ns_ino;
    uint64_t ns_cookie; /* and its SO_NETNS_COOKIE, 0 when unknown */
    int pid;            /* the command's pid */
    /* the last calling process (a thread group leader): its pidfd, its
     * /proc/PID/fdinfo and the last file read there (number cache_infonum),
     * kept while it makes calls (getfd, remote_cloexec) */
    int cache_pid, cache_pidfd, cache_fdinfo, cache_info, cache_infonum;
    uv_udp_t udp;
    int udp_open;
    uv_tcp_t tcp;
    int tcp_open;
    int handles; /* open handles; tp is freed when the last closes */
    int closing;
    struct seccomp_notif *notif;
    struct seccomp_notif_resp *resp;
    struct tp_req reqs;   /* list head */
    struct tp_wait waits; /* list head (only prev/next used) */
    size_t npending, max_pending;
    int allow_unix;         /* tp_opts.allow_unix */
    struct dns_conn dconns; /* list head (only prev/next used) */
    unsigned ndconns;       /* open DNS-over-TCP connections */
    int nr_connect[3];      /* per ABI below, -1 unknown */
    int nr_bind[3];
    int nr_getpeername[3];
    struct tp_peer peers[TP_PEERS];
    size_t peer_next;
    uint32_t arch[3];
    int nr_socketcall; /* i386 */
    struct tp_names names;
    struct tp_udp *udpr; /* transparent UDP (tp_udp.c), NULL when off */
};

/* transparent.c: answers notification ID with ERROR (an errno), or lets
 * the kernel run the call (CONT). */
void tp_respond(struct tp *t, uint64_t id, int error, int cont);

/* tp_call.c: notification N of a syscall tp_start routed here (notify.c),
 * always answered: 1. */
int tp_handle(void *ctx, int notify_fd, const struct seccomp_notif *n);
/* A copy of descriptor FD of thread PID's process, or -1 with errno. */
int tp_getfd(struct tp *t, int pid, int fd);
void tp_cache_drop(struct tp *t);
/* Answers W's connect() with ERROR and drops W. */
void tp_wait_end(struct tp_wait *w, int error);

/* tp_dial.c: the requests' front end, from t->loop, log, log_ctx and
 * next_id (once they are set). */
void tp_frontend_init(struct tp *t);
/* A fresh TCP socket's options, [v4/v6][int_opts]. */
void tp_read_defaults(int (*def)[TP_N_INT_OPTS]);
/* Judges and dials DST:PORT for the call; answers it once done. Takes
 * ORIG. */
void tp_start_request(struct tp *t, const struct seccomp_notif *n, const struct tp_call *c,
                      int orig, int domain, const struct policy_addr *dst, uint16_t port);
void tp_req_free(struct tp_req *r);

/* tp_unix.c: a Unix path connect()/bind() run as the caller; takes ORIG,
 * answers N. */
void tp_unix_path_call(struct tp *t, const struct seccomp_notif *n, int orig,
                       const struct tp_call *c);

/* tp_peer.c: 1 when N was a getpeername() (answered), 0 when not one. */
int tp_peer_call(struct tp *t, const struct seccomp_notif *n);

/* tp_udp.c: transparent UDP's relays and flows. Starts it, the relays of
 * port 53 and of PORTS made (one that cannot be made stays closed): 0 or
 * -ENOMEM. */
int tp_udp_start(struct tp *t, int (*make)(void *ctx, int family, unsigned port), void *ctx,
                 uint64_t idle_ms, const uint16_t *ports, size_t nports);
void tp_udp_close(struct tp *t);
/* A relay serves PORT (made now, unless TPU_MAX_PORTS learned ports are in
 * use; the ports served from the start do not count): 0, or
 * -1 when it does not (off, the bound reached, the helper failed). */
int tp_udp_port(struct tp *t, uint16_t port);

/* tp_dns.c: the resolver's servers, on t->udp and t->tcp */
void tp_dns_udp_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
void tp_dns_udp_recv(uv_udp_t *u, ssize_t n, const uv_buf_t *buf, const struct sockaddr *from,
                     unsigned flags);
void tp_dns_tcp_accept(uv_stream_t *l, int status);
void tp_dns_conn_close(struct dns_conn *c);

#endif
