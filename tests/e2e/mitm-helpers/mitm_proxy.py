#!/usr/bin/env python3
"""tests/e2e/mitm-helpers/mitm_proxy.py SOCKET LOG - a small stand-in for an
external MITM proxy on a Unix socket (network.mitmProxy): it records the
first line of every request it receives to LOG and answers.

- CONNECT HOST:PORT: "200" (for a host starting with "refuse.": "403"), then
  one HTTP request read inside the tunnel is answered with the body
  "MITM-TUNNEL HOST:PORT PATH".
- an absolute-form request (GET http://HOST:PORT/PATH): the body
  "MITM-HTTP URL", keep-alive.
"""
import os
import socket
import sys
import threading


def read_head(f):
    lines = []
    while True:
        line = f.readline()
        if not line:
            return None
        if line in (b"\r\n", b"\n"):
            return lines
        lines.append(line.decode("latin-1").rstrip("\r\n"))


def answer(conn, body, close):
    b = body.encode()
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n" %
                 (len(b), b"Connection: close\r\n" if close else b"") + b)


def serve(conn, log):
    f = conn.makefile("rb")
    try:
        while True:
            head = read_head(f)
            if not head:
                return
            with open(log, "a") as lf:
                lf.write(head[0] + "\n")
            method, target = head[0].split(" ")[:2]
            if method == "CONNECT":
                if target.startswith("refuse."):
                    conn.sendall(b"HTTP/1.1 403 Forbidden by the mitm\r\nContent-Length: 0\r\n\r\n")
                    return
                conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                inner = read_head(f)
                if inner:
                    with open(log, "a") as lf:
                        lf.write("  inner: " + inner[0] + "\n")
                    answer(conn, "MITM-TUNNEL %s %s" % (target, inner[0].split(" ")[1]), True)
                return
            answer(conn, "MITM-HTTP %s" % target, False)
    except (OSError, ValueError):
        pass
    finally:
        conn.close()


def main():
    path, log = sys.argv[1], sys.argv[2]
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    os.chmod(path, 0o666)
    s.listen(64)
    while True:
        c, _ = s.accept()
        threading.Thread(target=serve, args=(c, log), daemon=True).start()


main()
