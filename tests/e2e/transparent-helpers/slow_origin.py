#!/usr/bin/env python3
"""tests/e2e/transparent-helpers/slow_origin.py - an origin on the host's
127.0.0.1 whose handshakes complete on a SYN retransmit, and a sink that
records every connection it is given. Run by transparent.sh (issue 21,
item 1):

    slow_origin.py PORT SINK_PORT DIR

PORT listens with backlog 0 and one queued connection of its own (the
"filler"), so the kernel drops the first SYN of a client: sluice's dial
returns EINPROGRESS and the handshake completes on the retransmit, about a
second later. For round N the probe (in the sandbox, which shares DIR)
creates DIR/go.N just before its connect(); the origin waits 0.3 s (the
SYN is dropped by then), accepts the filler (room for the retransmit),
accepts the probe's connection and then, by the mode the probe wrote into
go.N: "early" resets it at once, "reply" sends "hello\\n" and resets it
1 s later, "close" sends it and closes 1 s later (FIN, then a reset answers the
probe's next bytes). A reset is a close() with SO_LINGER {1, 0}.

SINK_PORT accepts anything and writes "sink PEER\\n" to DIR/sink.log for each
connection: a probe that re-aims a handed-over socket there (no rule allows
it) shows up in the log. DIR/ready is made once both listen."""
import os
import socket
import struct
import sys
import threading
import time

port, sink_port, d = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]


def sink():
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", sink_port))
    s.listen(16)
    ready.set()
    while True:
        c, peer = s.accept()
        with open(os.path.join(d, "sink.log"), "a") as f:
            f.write("sink %s:%d\n" % peer)
        c.close()


def reset(c):
    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    c.close()


ready = threading.Event()
threading.Thread(target=sink, daemon=True).start()
ready.wait()
lst = socket.socket()
lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
lst.bind(("127.0.0.1", port))
lst.listen(0)
open(os.path.join(d, "ready"), "w").close()
n = 0
while True:
    filler = socket.create_connection(("127.0.0.1", port))
    go = os.path.join(d, "go.%d" % n)
    while not os.path.exists(go):
        time.sleep(0.02)
    time.sleep(0.3)
    mode = open(go).read().strip()
    a, _ = lst.accept()  # the filler's other end: room in the queue
    a.close()
    filler.close()
    c, _ = lst.accept()
    if mode in ("reply", "close"):
        c.sendall(b"hello\n")
        # time for sluice to hand the socket over on a loaded machine (at
        # least 3 handed-over rounds are wanted)
        time.sleep(1.0)
    if mode == "close":
        c.close()  # FIN; the probe's next bytes meet a closed socket: RST
    else:
        reset(c)
    n += 1
