#!/usr/bin/env python3
"""rt-9: a command under `sluice run --learn FILE` that attacks what is learned
and where FILE is written. Runs inside the sandbox (report mode).

rt9_learn.py names: CONNECT (HTTP proxy) and SOCKS5 CONNECT with odd names:
  wildcards, quotes, commas, JSON, NUL, newlines, ports inside the name,
  upper case, a trailing dot, IP literals in odd spellings, IPv4-mapped
  IPv6, zone ids, public suffixes, names under a private public suffix
  (github.io); prints each reply's first line.
rt9_learn.py swapdir DIR VICTIM: DIR (FILE's folder) renamed to DIR.moved,
  a symbolic link to VICTIM (a folder of the host) put in its place
rt9_learn.py symlink FILE VICTIM: FILE replaced by a symbolic link to VICTIM
rt9_learn.py fifo FILE: FILE replaced by a FIFO
rt9_learn.py dir FILE: FILE replaced by a folder with a file in it
"""
import os
import socket
import struct
import sys

HTTP_NAMES = [
    "*.vcs.test:8080", 'a".evil.test:8080', "e.test,*:8080", 'z.test"]},"x":{"y:8080',
    "GIT.VCS.TEST:8080", "git.vcs.test.:8080", "%2a.vcs.test:8080", "a..b.test:8080",
    "-x.test:8080", "*:8080", ".test:8080", "x.test:0", "x.test:99999", "a.test:8080 b",
    "x.github.io:8080", "y.github.io:8080", "a.co.uk:8080", "b.co.uk:8080", "co.uk:8080",
    "127.1:8080", "2130706433:8080", "0x7f.1:8080", "[::1]:8080", "[::ffff:127.0.0.1]:8080",
    "[::ffff:10.203.0.2]:8080", "[fe80::1%25lo]:8080", "10.203.0.2.:8080", "git.vcs.test:8080:1",
]
SOCKS_NAMES = [
    b"*.vcs.test", b'a".b.test', b"a\x00.b.test", b"q.w.test:443", b"e.test\n", b"*",
    b"p.q.test,*.r.test", b'z.test"]}', b"UPPER.CO.UK", b"\xff.test", b"0177.0.0.1", b"[::1]",
]


def http(name):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=5)
    s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (name, name)).encode("latin-1"))
    r = s.recv(200).split(b"\r\n")[0]
    s.close()
    return r.decode("latin-1")


def socks(name):
    s = socket.create_connection(("127.0.0.1", 1080), timeout=5)
    s.sendall(b"\x05\x01\x00")
    s.recv(2)
    s.sendall(b"\x05\x01\x00\x03" + bytes([len(name)]) + name + struct.pack(">H", 8080))
    r = s.recv(10)
    s.close()
    return "SOCKS %d" % r[1] if len(r) > 1 else "closed"


def main():
    a = sys.argv[1:]
    if a[0] == "names":
        for n in HTTP_NAMES:
            try:
                print(repr(n), http(n))
            except OSError as e:
                print(repr(n), "ERR", e)
        for n in SOCKS_NAMES:
            try:
                print(repr(n), socks(n))
            except OSError as e:
                print(repr(n), "ERR", e)
    elif a[0] == "swapdir":
        os.rename(a[1], a[1] + ".moved")
        os.symlink(a[2], a[1])
    elif a[0] == "symlink":
        os.unlink(a[1]) if os.path.lexists(a[1]) else None
        os.symlink(a[2], a[1])
    elif a[0] == "fifo":
        os.unlink(a[1]) if os.path.lexists(a[1]) else None
        os.mkfifo(a[1])
    elif a[0] == "dir":
        os.unlink(a[1]) if os.path.lexists(a[1]) else None
        os.mkdir(a[1])
        open(os.path.join(a[1], "keep"), "w").write("keep\n")
    print("done", a[0], flush=True)


main()
