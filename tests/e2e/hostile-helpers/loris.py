#!/usr/bin/env python3
"""loris.py - idle and slow-loris sockets against the HTTP and SOCKS5 ports.

usage: loris.py HTTP_PORT SOCKS_PORT N READY_FILE LO HI DEADLINE

Opens N sockets to each port: N/2 that send nothing (idle) and N/2 that send
one byte of a request that never completes every second (slow). For HTTP the
slow bytes are a request head that never ends ("GET http://..." then one
long header); for SOCKS5 a greeting announcing 255 methods. Connects are
non-blocking and paced; once every socket is connected, "ready CONNECTED" is
written to READY_FILE. Then each socket is watched until the proxy cuts it
(first bytes from it, EOF or an error: the time of the cut is the first of
those) or DEADLINE seconds have passed.

Prints one line per group (http-idle, http-slow, socks-idle, socks-slow):
  GROUP n=.. connected=.. cut=.. open=.. early=.. late=.. min=.. max=.. sent_min=.. r408=..
where the cut time of a socket is measured from its connect() call (the
proxy accepts it after that, so a cut before the timeout is a real one); early counts
cuts before LO seconds, late cuts after HI seconds (open sockets are not
counted as late), sent_min is the fewest bytes a slow socket got to send
before its cut, r408 the sockets whose first bytes were an HTTP 408.
"""
import errno
import selectors
import socket
import sys
import time

HTTP_SLOW = b"GET http://slow.test/ HTTP/1.1\r\nHost: slow.test\r\nX-Slow: " + b"a" * 4000
SOCKS_SLOW = b"\x05\xff" + bytes(range(255))


class Sock:
    __slots__ = ("s", "group", "payload", "sent", "t_conn", "t_cut", "first", "connected", "dead")

    def __init__(self, s, group, payload):
        self.s, self.group, self.payload = s, group, payload
        self.sent = 0
        self.t_conn = self.t_cut = None
        self.first = b""
        self.connected = False
        self.dead = False


def main():
    hport, sport, n = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    ready, lo, hi, deadline = sys.argv[4], float(sys.argv[5]), float(sys.argv[6]), float(sys.argv[7])
    sel = selectors.DefaultSelector()
    socks = []
    groups = [("http-idle", hport, None), ("http-slow", hport, HTTP_SLOW),
              ("socks-idle", sport, None), ("socks-slow", sport, SOCKS_SLOW)]
    start = time.monotonic()
    # interleave the groups so that each is spread over the connect period
    for i in range(n // 2):
        for name, port, payload in groups:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            k = Sock(s, name, payload)
            k.t_conn = time.monotonic()  # the proxy accepts after this
            err = s.connect_ex(("127.0.0.1", port))
            if err not in (0, errno.EINPROGRESS):
                k.dead = True
                s.close()
            else:
                sel.register(s, selectors.EVENT_WRITE, k)
            socks.append(k)
        if i % 50 == 49:  # pace the connects a little: the accept backlog is finite
            poll(sel, 0.01)

    # wait for the connects
    t_end = time.monotonic() + 30
    pending = sum(1 for k in socks if not k.dead)
    while pending > 0 and time.monotonic() < t_end:
        for key, ev in sel.select(0.5):
            k = key.data
            if k.connected:
                handle_read(sel, k)
                continue
            err = k.s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            pending -= 1
            if err != 0:
                k.dead = True
                sel.unregister(k.s)
                k.s.close()
                continue
            k.connected = True
            sel.modify(k.s, selectors.EVENT_READ, k)
            if k.payload is not None:
                send_one(sel, k)
    connected = sum(1 for k in socks if k.connected)
    with open(ready, "w") as f:
        f.write("ready %d %.2f\n" % (connected, time.monotonic() - start))

    # trickle and watch
    t_stop = time.monotonic() + deadline
    next_tick = time.monotonic() + 1.0
    while time.monotonic() < t_stop:
        if all(k.t_cut is not None or not k.connected for k in socks):
            break
        now = time.monotonic()
        if now >= next_tick:
            next_tick = now + 1.0
            for k in socks:
                if k.payload is not None and k.connected and k.t_cut is None:
                    send_one(sel, k)
        for key, ev in sel.select(max(0.0, min(0.2, next_tick - time.monotonic()))):
            handle_read(sel, key.data)

    for name, _, payload in groups:
        g = [k for k in socks if k.group == name]
        con = [k for k in g if k.connected]
        cut = [k for k in con if k.t_cut is not None]
        d = [k.t_cut - k.t_conn for k in cut]
        sent = [k.sent for k in cut] if payload is not None else [0]
        print("%s n=%d connected=%d cut=%d open=%d early=%d late=%d min=%.2f max=%.2f sent_min=%d r408=%d" % (
            name, len(g), len(con), len(cut), len(con) - len(cut),
            sum(1 for x in d if x < lo), sum(1 for x in d if x > hi),
            min(d) if d else -1, max(d) if d else -1, min(sent) if sent else 0,
            sum(1 for k in cut if k.first.startswith(b"HTTP/1.1 408 "))))
    for k in socks:
        k.s.close()


def poll(sel, t):
    # during the connect phase only completion matters; it is collected later
    time.sleep(t)


def send_one(sel, k):
    if k.sent >= len(k.payload):
        return
    try:
        k.sent += k.s.send(k.payload[k.sent:k.sent + 1])
    except OSError:
        cut(sel, k)


def handle_read(sel, k):
    try:
        d = k.s.recv(4096)
    except BlockingIOError:
        return
    except OSError:
        d = b""
    if d:
        if not k.first:
            k.first = d
    cut(sel, k)


def cut(sel, k):
    if k.t_cut is None:
        k.t_cut = time.monotonic()
        try:
            sel.unregister(k.s)
        except (KeyError, ValueError):
            pass


if __name__ == "__main__":
    main()
