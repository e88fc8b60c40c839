/* run/ports.h - ports between the host and the sandbox (issue 26):
 * network.publish / --publish and network.hostPorts, for run/launch.c, and
 * the relay sockets of SOCKS5 UDP ASSOCIATE (made in the sandbox's network
 * namespace when a udp: rule exists). Each step 0, or -1 after a message on
 * stderr (and, once bwrap runs, bwrap killed); no-ops when none is set. */
#ifndef SLUICE_RUN_PORTS_H
#define SLUICE_RUN_PORTS_H

#include "run/launch-int.h"

#include <stddef.h>
#include <stdint.h>

/* Before bwrap: the entries checked, merged (the key, then --publish) and
 * a warning for each published address outside loopback. */
int run_ports_prepare(struct run *run);
/* inner is waiting (its pid known): the published ports' host listeners,
 * the helper in the sandbox's network namespace and the hostPorts
 * listeners there. A port that cannot be bound fails the run. */
int run_ports_before_go(struct run *run);
/* Transparent UDP (run/tp_udp.c, tp_opts.udp_relay): a relay socket for
 * PORT of FAMILY (AF_INET, AF_INET6) bound in the sandbox's network
 * namespace, made by the helper (or before the go byte for port 53 and the
 * udp: rules' ports); PORT 0: the raw ICMP socket tp_udp.c refuses
 * denied datagrams with. ARG is run->ports. A descriptor or -errno. */
int run_ports_udp_relay(void *arg, int family, unsigned port);
/* The ports of the relay sockets made before the go byte (at most MAX into
 * OUT): tp_udp.c serves them from the start, outside its bound on ports
 * learned later. */
size_t run_ports_udp_ports(const struct run *run, uint16_t *out, size_t max);
/* Connections live (the service's limit counts them). */
size_t run_ports_live(const struct run *run);
/* Closes the listeners and connections (close_all). */
void run_ports_close(struct run *run);
/* After the loop: the helper ended and waited for, memory freed. */
void run_ports_free(struct run *run);

#endif
