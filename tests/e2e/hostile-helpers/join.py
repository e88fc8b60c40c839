#!/usr/bin/env python3
"""join.py - clients that join pending asks, then vanish with a reset.

usage: join.py HTTP_PORT SOCKS_PORT PROXY_PID BASE_FDS SF HOST...

For each HOST (a name whose question is pending with a handler that never
answers) one HTTP CONNECT and one SOCKS5 CONNECT to HOST:443: they join the
pending question (always possible) and wait. Once the proxy holds all of
them (its descriptor count, up to 10 x SF s) and 1 s more, every one of them
is closed with a reset (SO_LINGER 0), and the proxy's descriptor count is
watched until it is at most BASE_FDS again (10 x SF s at most). SF scales
the waits (2 in a sanitizer build).

Prints key=value lines: opened, answered (got an answer within the second:
should be none), fd_held (while they wait), teardown_s (-1: never), fd_after.
"""
import os
import select
import socket
import struct
import sys
import time


def nfds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def main():
    hport, sport, pid, base, sf = (int(x) for x in sys.argv[1:6])
    hosts = sys.argv[6:]
    conns, answered = [], 0
    for h in hosts:
        a = socket.create_connection(("127.0.0.1", hport), 5)
        a.sendall(("CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n" % (h, h)).encode())
        conns.append(a)
        b = socket.create_connection(("127.0.0.1", sport), 5)
        b.sendall(b"\x05\x01\x00")
        if b.recv(2) != b"\x05\x00":
            answered += 1
        b.sendall(b"\x05\x01\x00\x03" + bytes([len(h)]) + h.encode() + struct.pack(">H", 443))
        conns.append(b)
    # the last connections may still be in the accept queue: wait until the
    # proxy holds them all (a count that never gets there fails fd_held)
    t0 = time.monotonic()
    while nfds(pid) < base + len(conns) and time.monotonic() - t0 < 10 * sf:
        time.sleep(0.05)
    time.sleep(1.0)
    r, _, _ = select.select(conns, [], [], 0)
    answered += len(r)
    fd_held = nfds(pid)
    for s in conns:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
    t0, t_back = time.monotonic(), -1.0
    while time.monotonic() - t0 < 10 * sf:
        if nfds(pid) <= base:
            t_back = time.monotonic() - t0
            break
        time.sleep(0.05)
    for k, v in (("opened", len(conns)), ("answered", answered), ("fd_held", fd_held),
                 ("teardown_s", "%.2f" % t_back), ("fd_after", nfds(pid))):
        print("%s=%s" % (k, v))


if __name__ == "__main__":
    main()
