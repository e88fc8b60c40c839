#!/usr/bin/env python3
"""tests/e2e/run-helpers/inherit.py - issue 21, item 5: `sluice run` whose
stdin is a socket of the host's network (inetd, socket activation).

    inherit.py host MODE -- SLUICE run [ARGS...] -- python3 inherit.py inside SINK_PORT
        runs sluice with stdin made by MODE and prints "rc=N sink=N" after
        the command's own output, sink being how many connections reached
        a listener on the host's 127.0.0.1 that nothing allows. MODE:
          tcp        a connected TCP socket (blocking connect())
          tcp-reset  a non-blocking connect() waited for with poll() only
                     (the socket layer still says SS_CONNECTING), reset by
                     its peer 0.3 s after the handshake
          tcp-listen a listening TCP socket; udp  a UDP socket
          unix       a connected Unix stream socket (socketpair)
          unix-dgram a Unix datagram socket (socketpair)
    inherit.py inside SINK_PORT
        in the sandbox: tries to aim stdin at the sink (MSG_FASTOPEN twice,
        connect(AF_UNSPEC) then connect(), bind() + listen() on 0.0.0.0) and
        prints each step's errno name ("ok" where it succeeded)."""
import ctypes
import errno
import os
import socket
import struct
import subprocess
import sys
import threading
import time

FASTOPEN = getattr(socket, "MSG_FASTOPEN", 0x20000000)


def inside(sink):
    s = socket.socket(fileno=0)
    if s.family == socket.AF_UNIX:
        print("unix-ok")
        s.detach()
        return
    out = []

    def attempt(name, fn):
        try:
            fn()
            out.append("%s=ok" % name)
        except OSError as e:
            out.append("%s=%s" % (name, errno.errorcode.get(e.errno, e.errno)))

    s.settimeout(3)
    attempt("recv", lambda: s.recv(16))
    attempt("fastopen1", lambda: s.sendto(b"x", FASTOPEN, ("127.0.0.1", sink)))
    attempt("fastopen2", lambda: s.sendto(b"x", FASTOPEN, ("127.0.0.1", sink)))
    libc = ctypes.CDLL(None, use_errno=True)
    unspec = struct.pack("=H", socket.AF_UNSPEC) + bytes(14)
    rc = libc.connect(0, unspec, len(unspec))
    out.append("unspec=%s" % ("ok" if rc == 0 else errno.errorcode.get(ctypes.get_errno(), "?")))
    attempt("connect", lambda: s.connect(("127.0.0.1", sink)))
    attempt("fastopen3", lambda: s.sendto(b"x", FASTOPEN, ("127.0.0.1", sink)))
    attempt("bind", lambda: s.bind(("0.0.0.0", 0)))
    attempt("listen", lambda: s.listen(1))
    s.detach()
    print(" ".join(out))


def host(mode, argv):
    sink = socket.socket()
    sink.bind(("127.0.0.1", 0))
    sink.listen(16)
    sink_port = sink.getsockname()[1]
    hits = []
    threading.Thread(target=lambda: [hits.append(sink.accept()) for _ in iter(int, 1)],
                     daemon=True).start()
    origin = socket.socket()
    origin.bind(("127.0.0.1", 0))
    origin.listen(4)
    keep = []

    def serve(reset):
        c, _ = origin.accept()
        keep.append(c)
        if reset:
            time.sleep(0.3)
            c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            c.close()

    if mode in ("tcp", "tcp-reset"):
        threading.Thread(target=serve, args=(mode == "tcp-reset",), daemon=True).start()
        s = socket.socket()
        if mode == "tcp":
            s.connect(origin.getsockname())
        else:
            s.setblocking(False)
            s.connect_ex(origin.getsockname())
            import select
            select.select([], [s], [], 5)
            s.setblocking(True)
    elif mode == "tcp-listen":
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(1)
    elif mode == "udp":
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    elif mode == "unix":
        s, peer = socket.socketpair()
        keep.append(peer)
    else:
        s, peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        keep.append(peer)
    argv = [a.replace("SINK", str(sink_port)) for a in argv]
    r = subprocess.run(argv, stdin=s.fileno(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    time.sleep(0.2)
    print("%s rc=%d sink=%d" % (r.stdout.strip(), r.returncode, len(hits)))


if sys.argv[1] == "inside":
    inside(int(sys.argv[2]))
else:
    host(sys.argv[2], sys.argv[4:])
