#!/usr/bin/env python3
"""stall.py - bulk data into a peer that never reads, through the proxy.

usage: stall.py MODE PROXY_PID HTTP_PORT SOCKS_PORT UPSTREAM_PORT MB STALL CLOSE TEARDOWN

MODE (the writer -> the peer that never reads):
  connect-up   client -> upstream through an HTTP CONNECT tunnel
  socks-up     client -> upstream through a SOCKS5 tunnel
  post-up      client -> upstream: an absolute-form POST with an MB body
  connect-down upstream -> client through an HTTP CONNECT tunnel
  socks-down   upstream -> client through a SOCKS5 tunnel
  get-down     upstream -> client: the answer to an absolute-form GET, MB body

The upstream listens on 127.0.0.1:UPSTREAM_PORT. The side that never reads
has a 4 KiB SO_RCVBUF. The writer writes non-blocking, 64 KiB at a time,
until MB MiB are written or no write made progress for STALL seconds. The
proxy's VmRSS is sampled every 50 ms from before the connection is made to
the stall. Then the client is closed (CLOSE: "fin", a plain close, or
"rst", SO_LINGER 0) and the proxy's descriptor count is watched for up to
TEARDOWN seconds until it is back to what it was before.

Prints key=value lines: written (bytes the writer got accepted), rss_base,
rss_peak, rss_stall (KiB), fd_base, fd_busy (during the stall), fd_after,
teardown_s (seconds until fds were back at fd_base, -1 if never), handshake.
"""
import select
import socket
import struct
import sys
import threading
import time

CHUNK = b"\0" * 65536


def rss(pid):
    with open("/proc/%d/status" % pid) as f:
        for ln in f:
            if ln.startswith("VmRSS:"):
                return int(ln.split()[1])
    return -1


def nfds(pid):
    import os
    return len(os.listdir("/proc/%d/fd" % pid))


class Sampler(threading.Thread):
    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.peak, self.stop = pid, 0, threading.Event()

    def run(self):
        while not self.stop.is_set():
            try:
                self.peak = max(self.peak, rss(self.pid))
            except OSError:
                pass
            time.sleep(0.05)


def recv_until(s, marker, limit=65536):
    buf = b""
    while marker not in buf:
        d = s.recv(1)  # byte by byte: nothing after the marker is consumed
        if not d:
            raise OSError("EOF before %r (got %r)" % (marker, buf))
        buf += d
        if len(buf) > limit:
            raise OSError("no %r in %d bytes" % (marker, limit))
    return buf


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        d = s.recv(n - len(buf))
        if not d:
            raise OSError("EOF after %r" % buf)
        buf += d
    return buf


def pump(s, total, stall):
    """Writes up to total bytes to s non-blocking; stops after stall seconds
    without progress. Returns the bytes written."""
    s.setblocking(False)
    written, last = 0, time.monotonic()
    while written < total:
        try:
            n = s.send(CHUNK[:min(len(CHUNK), total - written)])
            written += n
            last = time.monotonic()
            continue
        except BlockingIOError:
            pass
        except OSError:
            break
        left = stall - (time.monotonic() - last)
        if left <= 0:
            break
        select.select([], [s], [], min(left, 0.2))
    return written


def main():
    mode, pid = sys.argv[1], int(sys.argv[2])
    hport, sport, uport = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    total, stall = int(sys.argv[6]) * 1024 * 1024, float(sys.argv[7])
    close, teardown = sys.argv[8], float(sys.argv[9])
    up_writes = mode.endswith("-down")

    lst = socket.socket()
    lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if not up_writes:
        lst.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # inherited by accepted sockets
    lst.bind(("127.0.0.1", uport))
    lst.listen(4)
    lst.settimeout(10)

    time.sleep(0.2)
    fd_base, rss_base = nfds(pid), rss(pid)
    samp = Sampler(pid)
    samp.start()

    c = socket.socket()
    if up_writes:
        c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    c.settimeout(10)
    hs = "ok"
    try:
        if mode.startswith("socks"):
            c.connect(("127.0.0.1", sport))
            c.sendall(b"\x05\x01\x00")
            recv_exact(c, 2)
            c.sendall(b"\x05\x01\x00\x01" + socket.inet_aton("127.0.0.1") + struct.pack(">H", uport))
            rep = recv_exact(c, 10)
            if rep[1] != 0:
                hs = "socks reply %d" % rep[1]
        else:
            c.connect(("127.0.0.1", hport))
            auth = "127.0.0.1:%d" % uport
            if mode.startswith("connect"):
                c.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (auth, auth)).encode())
                head = recv_until(c, b"\r\n\r\n")
                if not head.startswith(b"HTTP/1.1 200"):
                    hs = "connect answer %r" % head[:40]
            elif mode == "post-up":
                c.sendall(("POST http://%s/sink HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n\r\n"
                           % (auth, auth, total)).encode())
            else:
                c.sendall(("GET http://%s/big HTTP/1.1\r\nHost: %s\r\n\r\n" % (auth, auth)).encode())
        u, _ = lst.accept()
    except OSError as e:
        hs = "failed: %s" % e
    print("handshake=%s" % hs.replace(" ", "_"))
    if hs != "ok":
        sys.exit(1)

    if up_writes:
        if mode == "get-down":
            u.settimeout(10)
            recv_until(u, b"\r\n\r\n")
            u.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                      b"Content-Length: %d\r\n\r\n" % total)
        written = pump(u, total, stall)
    else:
        written = pump(c, total, stall)
    fd_busy, rss_stall = nfds(pid), rss(pid)
    samp.stop.set()
    samp.join()

    if close == "rst":
        c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    t0 = time.monotonic()
    c.close()
    t_back = -1.0
    while time.monotonic() - t0 < teardown:
        if nfds(pid) <= fd_base:
            t_back = time.monotonic() - t0
            break
        time.sleep(0.05)
    fd_after = nfds(pid)
    u.close()
    lst.close()
    for k, v in (("written", written), ("rss_base", rss_base), ("rss_peak", max(samp.peak, rss_stall)),
                 ("rss_stall", rss_stall), ("fd_base", fd_base), ("fd_busy", fd_busy),
                 ("fd_after", fd_after), ("teardown_s", "%.2f" % t_back)):
        print("%s=%s" % (k, v))


if __name__ == "__main__":
    main()
