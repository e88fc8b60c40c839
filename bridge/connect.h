/* bridge/connect.h - `sluice connect`'s tunnel (bridge/connect.c). */
#ifndef SLUICE_BRIDGE_CONNECT_H
#define SLUICE_BRIDGE_CONNECT_H

/* Tunnels stdin/stdout to host:port_s through the HTTP proxy at proxy
 * ("ADDR:PORT", "tcp:..." or "unix:PATH") with CONNECT. The exit status: 0
 * when the tunnel ran and ended, 1 when the proxy refused (its status line
 * is printed) or the connection failed, 2 for a bad host or port. */
int connect_run(const char *proxy, const char *host, const char *port_s);

#endif
