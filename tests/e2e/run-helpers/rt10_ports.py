#!/usr/bin/env python3
"""tests/e2e/run-helpers/rt10_ports.py - the command of ports.sh's rt-10
run (--publish HP:SP, network.hostPorts [PS]). It works in the working
directory, in phases the host drives with files there:

 phase 1  it holds SP with everything but a TCP listener on 127.0.0.1: a
          UDP socket on 127.0.0.1:SP and a TCP listener on [::1]:SP only
          (v6only). It tries an AF_UNIX listener in the working directory.
          It writes its findings to p1 and waits for h1 (the host has tried
          HP). Then it reports whether anything arrived on those sockets.
 phase 2  a TCP server on 127.0.0.1:SP (bound after the run started): each
          connection is answered "peer=ADDR:PORT fds=..." unless its first
          bytes are FLOOD, which it never reads. Unpublished servers on
          0.0.0.0:SP2 and [::]:SP2+1. Tries to take the listed host port PS
          inside (0.0.0.0, [::] dual stack, [::1], with SO_REUSEADDR and
          SO_REUSEPORT); reaches PS through [::ffff:127.0.0.1]; floods PS
          (whose host server never reads) for 3 s and reports the bytes
          the kernel took. Writes p2 and waits for stop.
Every line it prints is KEY=VALUE.
"""
import os, socket, sys, threading, time

SP, SP2, PS = (int(a) for a in sys.argv[1:4])
out = open("rt10.out", "a", buffering=1)


def say(k, v):
    out.write("%s=%s\n" % (k, v))


def wait(name, secs=30):
    for _ in range(int(secs * 20)):
        if os.path.exists(name):
            return True
        time.sleep(0.05)
    return False


def fds():
    return ",".join(sorted(os.listdir("/proc/self/fd"), key=int))


# --- phase 1 ---------------------------------------------------------------
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.bind(("127.0.0.1", SP))
u.setblocking(False)
v6 = None
try:
    v6 = socket.socket(socket.AF_INET6)
    v6.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    v6.bind(("::1", SP))
    v6.listen()
    v6.setblocking(False)
    say("v6only", "listening")
except OSError as e:
    say("v6only", "none-%d" % e.errno)
try:
    x = socket.socket(socket.AF_UNIX)
    x.bind("rt10.sock")
    x.listen()
    say("unix", "listening")
except OSError as e:
    say("unix", "refused-%d" % e.errno)
say("fds1", fds())
open("p1", "w").close()
wait("h1")
got = []
try:
    got.append("udp:%r" % (u.recvfrom(100),))
except OSError:
    pass
if v6 is not None:
    try:
        got.append("v6:%r" % (v6.accept(),))
    except OSError:
        pass
say("phase1_arrived", ";".join(got) or "nothing")
u.close()
if v6 is not None:
    v6.close()

# --- phase 2 ---------------------------------------------------------------
srv = socket.socket()
srv.bind(("127.0.0.1", SP))
srv.listen(64)
held = []


def serve():
    while True:
        c, peer = srv.accept()
        c.settimeout(3)
        try:
            first = c.recv(5)
        except OSError:
            first = b""
        if first.startswith(b"FLOOD"):
            held.append(c)  # never read again
            continue
        c.sendall(("peer=%s:%d fds=%s\n" % (peer[0], peer[1], fds())).encode())
        c.close()


threading.Thread(target=serve, daemon=True).start()
others = []
for fam, addr, port in ((socket.AF_INET, "0.0.0.0", SP2), (socket.AF_INET6, "::", SP2 + 1)):
    try:
        s = socket.socket(fam)
        s.bind((addr, port))
        s.listen()
        others.append(s)
    except OSError as e:
        say("other_%s" % addr, "err-%d" % e.errno)

# the listed host port PS, taken inside
takes = []
for fam, addr, v6only in ((socket.AF_INET, "0.0.0.0", None), (socket.AF_INET6, "::", 0),
                          (socket.AF_INET6, "::", 1), (socket.AF_INET6, "::1", 1),
                          (socket.AF_INET, "127.0.0.1", None)):
    try:
        s = socket.socket(fam)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        if v6only is not None:
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, v6only)
        s.bind((addr, PS))
        s.listen()
        takes.append("%s/%s:bound" % (addr, v6only))
        others.append(s)
    except OSError as e:
        takes.append("%s/%s:%d" % (addr, v6only, e.errno))
say("take_ps", " ".join(takes))

# PS through a v4-mapped address on an IPv6 socket
try:
    s = socket.socket(socket.AF_INET6)
    s.settimeout(5)
    s.connect(("::ffff:127.0.0.1", PS))
    s.sendall(b"PING\n")
    say("mapped_ps", s.recv(100).decode("latin-1").strip() or "empty")
    s.close()
except OSError as e:
    say("mapped_ps", "err-%s" % e)

# a flood into PS, whose host server never reads
s = socket.create_connection(("127.0.0.1", PS), timeout=5)
s.sendall(b"FLOOD")
s.setblocking(False)
sent, buf, end = 5, b"x" * 65536, time.time() + 3
while time.time() < end:
    try:
        sent += s.send(buf)
    except BlockingIOError:
        time.sleep(0.01)
    except OSError as e:
        say("flood_err", e)
        break
say("flood_sent", sent)
held.append(s)
say("fds2", fds())
open("p2", "w").close()
wait("stop", 60)
