/* sandbox/inherit.c - sockets of the host's network among the descriptors
 * the command inherits (issue 21, item 5; design.md "The boundary: what the
 * command may hold"). inner closes every inherited descriptor but stdin,
 * stdout and stderr, which are the command's; an inetd-style or
 * socket-activated caller makes one of them a socket of the host's network
 * namespace, which keeps that namespace wherever it goes. The launcher
 * looks at the three once, before bwrap starts:
 *
 *   - a TCP socket with a peer is taken to the socket layer's connected
 *     state (sb_tcp_settle): from there sendto(MSG_FASTOPEN) answers
 *     EISCONN and listen() EINVAL whatever its peer does. What could take
 *     it back, connect(AF_UNSPEC), is refused by the host: such a run has
 *     connect() (and bind(), where network.allowLocalBinding allows it)
 *     answered by the host as transparent mode has (transparent.c), which
 *     refuses both on a socket of the host's namespace. Only such a run
 *     pays for those notifications;
 *     Only TCP itself (SO_PROTOCOL IPPROTO_TCP): a connected MPTCP socket
 *     (IPPROTO_MPTCP, also SOCK_STREAM; systemd's SocketProtocol=mptcp)
 *     reset by its peer answers a first sendto(MSG_FASTOPEN) with EISCONN
 *     and is then unconnected: a second one connects it anywhere from the
 *     host's namespace, with no connect() to notify. It is refused with
 *     the rest below;
 *   - a connected Unix stream or seqpacket socket cannot be aimed
 *     elsewhere (connect() answers EISCONN or EINVAL, sendto() ignores or
 *     refuses an address) and is left alone;
 *   - anything else that could reach or be reached from the host's network
 *     (UDP, a listening or unconnected TCP socket, a Unix datagram,
 *     listening or unconnected socket unless network.allowAllUnixSockets,
 *     netlink, packet, ...) cannot be made safe without a notification on
 *     every send: the run is refused. */
#define _GNU_SOURCE
#include "sandbox/sandbox.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

int sb_tcp_settle(int fd)
{
    struct sockaddr_storage peer;
    socklen_t len = sizeof(peer);

    if (getpeername(fd, (struct sockaddr *)&peer, &len) < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&peer, len) == 0 || errno == EISCONN)
        return 0;
    return errno == EALREADY ? -ECONNABORTED : -errno; /* EALREADY: still in SYN_SENT */
}

static const char *const std_name[3] = {"stdin", "stdout", "stderr"};

int sb_inherit_check(int allow_unix, int *guard, char *err, size_t errlen)
{
    *guard = 0;
    for (int fd = 0; fd < 3; fd++) {
        struct stat st;
        struct sockaddr_storage peer;
        socklen_t len;
        int domain = 0, type = 0, protocol = -1, listening = 0, connected;
        const char *what;

        if (fstat(fd, &st) < 0 || !S_ISSOCK(st.st_mode))
            continue;
        len = sizeof(domain);
        (void)getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len);
        len = sizeof(type);
        (void)getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len);
        len = sizeof(protocol);
        (void)getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &protocol, &len);
        len = sizeof(listening);
        (void)getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len);
        len = sizeof(peer);
        connected = getpeername(fd, (struct sockaddr *)&peer, &len) == 0;
        if (domain == AF_UNIX) {
            if (allow_unix || (connected && !listening && type != SOCK_DGRAM))
                continue;
            what = type == SOCK_DGRAM ? "a Unix datagram socket"
                   : listening        ? "a listening Unix socket"
                                      : "an unconnected Unix socket";
        } else if ((domain == AF_INET || domain == AF_INET6) && type == SOCK_STREAM &&
                   protocol == IPPROTO_TCP && !listening && connected) {
            int rc = sb_tcp_settle(fd);
            if (rc == 0) {
                *guard = 1;
                continue;
            }
            snprintf(err, errlen,
                     "%s is a TCP socket of the host's network that cannot be "
                     "settled as connected (%s); the command was not run",
                     std_name[fd], strerror(-rc));
            return -EPERM;
        } else if (domain == AF_INET || domain == AF_INET6) {
            what = type != SOCK_STREAM       ? "a UDP or raw socket"
                   : protocol != IPPROTO_TCP ? "a stream socket that is not TCP (MPTCP, SCTP)"
                   : listening               ? "a listening TCP socket"
                                             : "an unconnected TCP socket";
        } else {
            what = "a socket";
        }
        snprintf(err, errlen,
                 "%s is %s of the host's network, which the command could aim "
                 "anywhere; the command was not run",
                 std_name[fd], what);
        return -EPERM;
    }
    return 0;
}
