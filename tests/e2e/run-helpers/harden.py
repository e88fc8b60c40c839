#!/usr/bin/env python3
"""tests/e2e/run-helpers/harden.py - issue 14's escape attempts, one per
invocation, run inside `sluice run` by run_escape.sh. Prints one line, as
probe.py does:
    BLOCKED <errno name>   refused (the safe outcome)
    OPEN <detail>          it worked (an escape)
    SKIP <why>
and exits 0 / 1 / 3.

    harden.py keyring NAME     read the key NAME the caller put in its session
                               keyring, or add one there (keyctl/add_key)
    harden.py fifo PATH        open the host FIFO PATH for writing and write
    harden.py chardev PATH     open the character device PATH for writing
    harden.py family N [TYPE [PROTO]]
                               socket(N, TYPE, PROTO): BLOCKED only with EPERM
                               (the filter's answer); any other failure is
                               OPEN as well, since a kernel that merely lacks
                               the family today may have it tomorrow
"""
import ctypes, errno, os, sys

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
SYS_socket, SYS_add_key, SYS_request_key, SYS_keyctl = 41, 248, 249, 250
KEY_SPEC_SESSION_KEYRING = -3
KEYCTL_READ = 11


def out(kind, detail, code):
    print(kind + " " + detail)
    sys.exit(code)


def ename(e):
    return errno.errorcode.get(e, str(e))


def sysc(nr, *args):
    conv = [ctypes.c_char_p(a) if isinstance(a, bytes) else ctypes.c_long(a) for a in args]
    r = libc.syscall(ctypes.c_long(nr), *conv)
    return r, ctypes.get_errno()


def main():
    a = sys.argv[1:]
    what = a[0]
    if what == "keyring":
        name = a[1].encode()
        kid, e = sysc(SYS_request_key, b"user", name, 0, 0)
        if kid >= 0:
            buf = ctypes.create_string_buffer(256)
            n = libc.syscall(ctypes.c_long(SYS_keyctl), ctypes.c_long(KEYCTL_READ),
                             ctypes.c_long(kid), buf, ctypes.c_long(256))
            out("OPEN", "read the caller's key: %r" % buf.raw[:max(n, 0)], 1)
        r, e2 = sysc(SYS_add_key, b"user", b"sluice-from-sandbox", b"x", 1, KEY_SPEC_SESSION_KEYRING)
        if r >= 0:
            out("OPEN", "added a key to the session keyring (request_key: %s)" % ename(e), 1)
        r, e3 = sysc(SYS_keyctl, 0, KEY_SPEC_SESSION_KEYRING, 0)  # GET_KEYRING_ID
        if r >= 0:
            out("OPEN", "keyctl works (session keyring %d)" % r, 1)
        out("BLOCKED", "%s %s %s" % (ename(e), ename(e2), ename(e3)), 0)
    if what in ("fifo", "chardev"):
        try:
            fd = os.open(a[1], os.O_WRONLY | os.O_NONBLOCK)
        except OSError as ex:
            if what == "fifo" and ex.errno == errno.ENXIO:
                out("SKIP", "no reader on the FIFO", 3)
            out("BLOCKED", ename(ex.errno), 0)
        try:
            os.write(fd, b"ESCAPED-VIA-" + what.upper().encode() + b"\n")
        except OSError as ex:
            out("OPEN", "opened for writing (write: %s)" % ename(ex.errno), 1)
        out("OPEN", "wrote to " + a[1], 1)
    if what == "family":
        fam = int(a[1], 0)
        typ = int(a[2], 0) if len(a) > 2 else 1
        proto = int(a[3], 0) if len(a) > 3 else 0
        r, e = sysc(SYS_socket, fam, typ, proto)
        if r >= 0:
            os.close(r)
            out("OPEN", "socket(%d, %d, %d) = fd %d" % (fam, typ, proto, r), 1)
        if e == errno.EPERM:
            out("BLOCKED", "EPERM", 0)
        out("OPEN", "socket(%d, %d, %d) failed with %s, not the filter's EPERM" % (fam, typ, proto, ename(e)), 1)
    out("SKIP", "unknown probe " + what, 3)


main()
