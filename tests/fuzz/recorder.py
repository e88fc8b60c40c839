#!/usr/bin/env python3
"""recorder.py - a loopback stand-in for a proxy that records what clients send.

usage: recorder.py PORTFILE OUTDIR [IDLE_SECONDS]

Listens on 127.0.0.1 (port 0; the port is written to PORTFILE), and for each
connection plays just enough of the proxy's part for the client to go on:
  - SOCKS5: picks user/pass if offered (else no auth), accepts any
    credentials, answers the request with success (BND 0.0.0.0:0);
  - SOCKS4: answers "granted";
  - HTTP: reads the head; CONNECT gets "200 Connection established";
    others have their body read (Content-Length or chunked) and get a small
    200 response (no body for HEAD); "Expect: 100-continue" gets a 100 first.
Everything the client sent on the connection is written to
OUTDIR/conn-N.bin when it closes or stays idle for IDLE_SECONDS. Only
127.0.0.1 is ever bound; nothing is ever contacted. Stops on SIGTERM.
"""
import os
import signal
import socket
import sys
import threading


class Conn:
    def __init__(self, sock, idle):
        self.s = sock
        self.s.settimeout(idle)
        self.buf = b""
        self.log = b""
        self.eof = False

    def fill(self):
        if self.eof:
            return False
        try:
            d = self.s.recv(65536)
        except (socket.timeout, ConnectionResetError):
            self.eof = True
            return False
        if not d:
            self.eof = True
            return False
        self.buf += d
        self.log += d
        return True

    def take(self, n):
        while len(self.buf) < n:
            if not self.fill():
                raise EOFError
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def until(self, sep):
        while sep not in self.buf:
            if not self.fill():
                raise EOFError
        i = self.buf.index(sep) + len(sep)
        out, self.buf = self.buf[:i], self.buf[i:]
        return out

    def drain(self):
        while self.fill():
            pass

    def send(self, b):
        try:
            self.s.sendall(b)
        except OSError:
            pass


def socks5(c):
    ver, n = c.take(2)
    methods = c.take(n)
    m = 2 if 2 in methods else 0
    c.send(bytes([5, m]))
    if m == 2:
        c.take(1)
        ulen = c.take(1)[0]
        c.take(ulen)
        plen = c.take(1)[0]
        c.take(plen)
        c.send(b"\x01\x00")
    _, cmd, _, atyp = c.take(4)
    if atyp == 1:
        c.take(4)
    elif atyp == 4:
        c.take(16)
    else:
        c.take(c.take(1)[0])
    c.take(2)
    c.send(b"\x05\x00\x00\x01\x00\x00\x00\x00\x00\x00")
    tunnel(c)


def socks4(c):
    c.take(8)
    c.until(b"\x00")
    c.send(b"\x00\x5a\x00\x00\x00\x00\x00\x00")
    tunnel(c)


def tunnel(c):
    """Bytes after a tunnel opened: answer a plain HTTP request inside, else just record."""
    try:
        head = c.until(b"\r\n\r\n")
    except EOFError:
        return
    http_rest(c, head)


def http_rest(c, head):
    lines = head.decode("latin-1").split("\r\n")
    method = lines[0].split(" ")[0]
    fields = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            fields[k.strip().lower()] = v.strip()
    if method == "CONNECT":
        c.send(b"HTTP/1.1 200 Connection established\r\n\r\n")
        tunnel(c)
        return
    if fields.get("expect", "").lower() == "100-continue":
        c.send(b"HTTP/1.1 100 Continue\r\n\r\n")
    if "content-length" in fields:
        c.take(int(fields["content-length"]))
    elif fields.get("transfer-encoding", "").lower() == "chunked":
        while True:
            size = int(c.until(b"\r\n").split(b";")[0], 16)
            if size == 0:
                c.until(b"\r\n")
                break
            c.take(size + 2)
    body = b"" if method == "HEAD" else b"ok\n"
    c.send(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n"
           b"Connection: close\r\n\r\n" + body)


def serve(sock, path, idle):
    c = Conn(sock, idle)
    try:
        if c.fill():
            first = c.buf[0]
            if first == 5:
                socks5(c)
            elif first == 4:
                socks4(c)
            else:
                http_rest(c, c.until(b"\r\n\r\n"))
        c.drain()
    except (EOFError, ValueError, IndexError, OSError):
        pass
    finally:
        sock.close()
        with open(path, "wb") as f:
            f.write(c.log)


def main():
    portfile, outdir = sys.argv[1], sys.argv[2]
    idle = float(sys.argv[3]) if len(sys.argv) > 3 else 1.0
    os.makedirs(outdir, exist_ok=True)
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(16)
    with open(portfile + ".tmp", "w") as f:
        f.write(str(ls.getsockname()[1]))
    os.rename(portfile + ".tmp", portfile)
    signal.signal(signal.SIGTERM, lambda *a: os._exit(0))
    n = 0
    while True:
        s, _ = ls.accept()
        n += 1
        threading.Thread(target=serve, args=(s, os.path.join(outdir, "conn-%03d.bin" % n), idle),
                         daemon=True).start()


if __name__ == "__main__":
    main()
