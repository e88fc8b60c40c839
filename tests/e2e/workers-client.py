#!/usr/bin/env python3
"""tests/e2e/workers-client.py PROXY_PORT TARGET_PORT N [hold]

Opens N connections to the HTTP proxy at once (threads), each sends
CONNECT $TARGET_HOST (default 127.0.0.1):TARGET_PORT, reads the status line, sends 'ping' through
the tunnel and reads the echo. Prints the count of 200s and of echoes.
With 'hold', keeps every tunnel open until stdin closes (prints 'held'
once all are up)."""
import socket
import sys
import os
import threading

port, target, n = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
hold = len(sys.argv) > 4 and sys.argv[4] == "hold"
host = os.environ.get("TARGET_HOST", "127.0.0.1")
ok = [0, 0]
lock = threading.Lock()
socks = []


def one():
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=20)
        s.sendall(("CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (host, target, host, target)).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            b = s.recv(1)
            if not b:
                break
            head += b
        if not head.startswith(b"HTTP/1.1 200"):
            print("head: %r" % head[:120], file=sys.stderr)
        if head.startswith(b"HTTP/1.1 200"):
            with lock:
                ok[0] += 1
            s.sendall(b"ping")
            if s.recv(4) == b"ping":
                with lock:
                    ok[1] += 1
        if hold:
            with lock:
                socks.append(s)
        else:
            s.close()
    except OSError as e:
        print("error: %s" % e, file=sys.stderr)


ts = [threading.Thread(target=one) for _ in range(n)]
for t in ts:
    t.start()
for t in ts:
    t.join()
print("200=%d echo=%d" % (ok[0], ok[1]), flush=True)
if hold:
    print("held", flush=True)
    sys.stdin.read()
    for s in socks:
        s.close()
