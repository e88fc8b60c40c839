#!/usr/bin/env python3
"""A tiny parent (corporate) proxy for tests/e2e/dropin.sh.

usage: parent_proxy.py PORTFILE LOGFILE [USER:PASSWORD]

Listens on 127.0.0.1 (port 0; the port is written to PORTFILE), accepts
CONNECT and absolute-form plain HTTP (as a corporate proxy does), and logs
one line per request to LOGFILE:
    CONNECT host:port auth=ok|missing|bad
    GET http://host:port/path auth=ok|missing|bad
With USER:PASSWORD it answers 407 unless Proxy-Authorization is Basic with
those credentials. A connection always goes to 127.0.0.1:PORT whatever the
host (the names in the tests exist only for sluice's resolver), so
everything stays on loopback. A plain HTTP request is passed on in origin
form without Proxy-Authorization, one request per connection.
"""
import base64
import socket
import sys
import threading


def pipe(a, b):
    try:
        while True:
            d = a.recv(65536)
            if not d:
                break
            b.sendall(d)
    except OSError:
        pass
    finally:
        try:
            b.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def handle(c, log, want):
    try:
        head = b""
        while b"\r\n\r\n" not in head:
            d = c.recv(4096)
            if not d:
                return
            head += d
            if len(head) > 65536:
                return
        text = head.split(b"\r\n\r\n", 1)[0].decode("latin-1")
        lines = text.split("\r\n")
        method, target = lines[0].split(" ")[:2]
        auth = "missing"
        for h in lines[1:]:
            k, _, v = h.partition(":")
            if k.strip().lower() == "proxy-authorization":
                v = v.strip()
                ok = want is not None and v == "Basic " + base64.b64encode(want.encode()).decode()
                auth = "ok" if ok else "bad"
        with open(log, "a") as f:
            f.write("%s %s auth=%s\n" % (method, target, auth))
        if method != "CONNECT" and not target.startswith("http://"):
            c.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
            return
        if want is not None and auth != "ok":
            c.sendall(b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                      b"Proxy-Authenticate: Basic realm=\"test\"\r\nContent-Length: 0\r\n\r\n")
            return
        if method != "CONNECT":
            authority, _, path = target[len("http://"):].partition("/")
            port = int(authority.rsplit(":", 1)[1]) if ":" in authority else 80
            fields = [h for h in lines[1:]
                      if h.partition(":")[0].strip().lower() not in ("proxy-authorization", "connection")]
            out = "\r\n".join(["%s /%s HTTP/1.1" % (method, path)] + fields +
                               ["Connection: close", "", ""]).encode("latin-1")
            u = socket.create_connection(("127.0.0.1", port), timeout=10)
            u.settimeout(None)
            u.sendall(out + head.split(b"\r\n\r\n", 1)[1])
            pipe(u, c)
            u.close()
            return
        port = int(target.rsplit(":", 1)[1])
        u = socket.create_connection(("127.0.0.1", port), timeout=10)
        u.settimeout(None)
        c.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        t = threading.Thread(target=pipe, args=(u, c), daemon=True)
        t.start()
        pipe(c, u)
        t.join(30)
        u.close()
    except (OSError, ValueError, IndexError):
        pass
    finally:
        c.close()


def main():
    portfile, log = sys.argv[1], sys.argv[2]
    want = sys.argv[3] if len(sys.argv) > 3 else None
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    s.listen(64)
    with open(portfile + ".tmp", "w") as f:
        f.write(str(s.getsockname()[1]))
    import os
    os.rename(portfile + ".tmp", portfile)
    while True:
        c, _ = s.accept()
        threading.Thread(target=handle, args=(c, log, want), daemon=True).start()


main()
