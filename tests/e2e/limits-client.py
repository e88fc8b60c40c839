#!/usr/bin/env python3
"""tests/e2e/limits-client.py HOST PORT HOLD TARGET_PORT [ADMIN_PORT]

The over-limit rule from a client's side: opens HOLD silent connections to
the proxy at HOST:PORT (each is accepted and waits for its request head),
then one more that sends a CONNECT; while all HOLD are held that one must
get no answer (the listener has stopped accepting); after one holder
closes it must be answered (accepting resumed). With ADMIN_PORT, /readyz
must say 'over the connection limit' while paused and 'ready' at the end.
Prints one line per step; exit 0 when every step held."""
import socket
import sys
import time

host, port, hold, target = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
admin = int(sys.argv[5]) if len(sys.argv) > 5 else None


def readyz():
    s = socket.create_connection(("127.0.0.1", admin), timeout=10)
    s.sendall(b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    data = b""
    while True:
        b = s.recv(4096)
        if not b:
            break
        data += b
    s.close()
    return data.decode("latin-1")


holders = []
for i in range(hold):
    holders.append(socket.create_connection((host, port), timeout=10))
ok = True
if admin is not None:
    for _ in range(200):
        r = readyz()
        if "over the connection limit" in r:
            break
        time.sleep(0.05)
    print("readyz while held: " + r.splitlines()[-1])
    ok = ok and "over the connection limit" in r
extra = socket.create_connection((host, port), timeout=10)
extra.sendall(("CONNECT 127.0.0.1:%s HTTP/1.1\r\nHost: 127.0.0.1:%s\r\n\r\n" % (target, target)).encode())
extra.settimeout(1.0)
try:
    got = extra.recv(100)
    print("answered while at the limit: %r" % got)
    ok = False
except socket.timeout:
    print("not answered while at the limit")
holders.pop().close()
extra.settimeout(20)
try:
    got = extra.recv(100)
except socket.timeout:
    got = b""
print("after one holder closed: %r" % got[:40])
ok = ok and got.startswith(b"HTTP/1.1 ")
for s in holders:
    s.close()
extra.close()
if admin is not None:
    for _ in range(200):
        r = readyz()
        if "ready" in r.splitlines()[-1] and "not" not in r.splitlines()[-1]:
            break
        time.sleep(0.05)
    print("readyz after: " + r.splitlines()[-1])
    ok = ok and r.splitlines()[-1] == "ready"
sys.exit(0 if ok else 1)
