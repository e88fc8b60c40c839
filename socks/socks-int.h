/* socks/socks-int.h - between the SOCKS5 session and its UDP associations. */
#ifndef SLUICE_SOCKS_INT_H
#define SLUICE_SOCKS_INT_H

#include "socks/socks.h"

#include <uv.h>

struct frontend_conn;
struct socks_udp;

/* Called when the association ends by itself (idle timeout, a socket
 * error): the owner closes the control connection (and with it calls
 * socks_udp_close). why is static text. */
typedef void (*socks_udp_ended_cb)(void *arg, const char *why);

/* Opens an association for the control connection ctl (a TCP stream whose
 * peer is the client) of fc, after the UDP ASSOCIATE request req: a relay
 * socket bound on ctl's local address, port 0. On success returns 0 and
 * writes the reply (BND.ADDR/PORT) to reply, its length to *reply_len. On
 * failure returns < 0 with *code the SOCKS5 reply code to send and *why a
 * static reason; nothing is left open. fc is used for log records until
 * socks_udp_close(). */
int socks_udp_open(struct socks_udp **out, struct frontend_conn *fc, uv_tcp_t *ctl,
                   const struct socks5_request *req, socks_udp_ended_cb ended, void *arg,
                   uint8_t reply[SOCKS5_UDP_REPLY_HDR_MAX], size_t *reply_len, uint8_t *code,
                   const char **why);

/* Payload bytes relayed each way so far. */
void socks_udp_bytes(const struct socks_udp *u, uint64_t *up, uint64_t *down);

/* Ends the association (idempotent for the owner: call once): writes a
 * one-line summary (datagrams and bytes each way, denials, drops) to
 * summary, forgets fc and the callback, closes its sockets; the memory goes
 * when the last handle has closed. */
void socks_udp_close(struct socks_udp *u, char *summary, size_t len);

#endif
