#!/usr/bin/env python3
"""silent_asker.py PATH OUT - an ask handler for `--ask socket:PATH` that
reads every question and never answers. OUT holds the number of questions
received so far (rewritten after each); OUT.q gets every question line."""
import os
import selectors
import socket
import sys

path, out = sys.argv[1], sys.argv[2]
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(path)
srv.listen(16)
sel = selectors.DefaultSelector()
sel.register(srv, selectors.EVENT_READ, None)
count = 0
bufs = {}


def report():
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % count)
    os.replace(tmp, out)


report()
while True:
    for key, _ in sel.select():
        if key.data is None:
            c, _ = srv.accept()
            bufs[c] = b""
            sel.register(c, selectors.EVENT_READ, c)
            continue
        c = key.data
        d = c.recv(65536)
        if not d:
            sel.unregister(c)
            del bufs[c]
            c.close()
            continue
        count += d.count(b"\n")
        with open(out + ".q", "ab") as f:
            f.write(d)
        report()
