#!/usr/bin/env python3
"""tests/e2e/run-helpers/unix_rt.py - red-team probes of issue 21 item 2
(no host Unix socket reachable without allowAllUnixSockets), run inside
`sluice run` by run_escape.sh. Same output as probe.py: one line
"BLOCKED <detail>" (safe), "OPEN <detail>" (an escape), "SKIP <why>";
exit 0, 1, 3.

    unix_rt.py pair-dead DIR ABS      stream and seqpacket socketpairs (plain,
                                      SOCK_NONBLOCK|SOCK_CLOEXEC) in every later
                                      state: peer closed, shutdown(RDWR) on
                                      either side, a send that failed (EPIPE),
                                      connect(AF_UNSPEC), received over
                                      SCM_RIGHTS; each tries connect() to
                                      DIR/hosts.sock, DIR/hostq.sock and the
                                      same through an O_PATH descriptor
                                      (/proc/self/fd/N), sendto/sendmsg/sendmmsg
                                      to DIR/hostd.sock and \\0ABS, bind() to a
                                      short name then listen()
    unix_rt.py pid1-getfd             pidfd_open(1) then pidfd_getfd() of each of
                                      its descriptors 0..63 (bwrap's init)
    unix_rt.py open-sock PATH...      open() each socket file for reading and
                                      writing (ENXIO), and O_PATH then reopen
                                      /proc/self/fd/N
    unix_rt.py stdin-aim DIR ABS      stdin is a host's Unix stream or seqpacket
                                      socket (a harness's socketpair, in the
                                      host's network namespace, whose abstract
                                      names are the host's) whose peer the
                                      host closes: waits for the close, then
                                      the routes of pair-dead, plus connect()
                                      to the host's abstract listeners
                                      \0ABS-s (stream) and \0ABS-q (seqpacket)
    unix_rt.py pair-x32               x32 ABI socketpair(AF_UNIX, SOCK_DGRAM) (nr
                                      53 | 0x40000000), with and without flags
    unix_rt.py peer-pidfd             an abstract listener and a connect() to it
                                      (in transparent mode sluice runs that
                                      connect() itself, so the accepting side's
                                      peer is sluice on the host): SO_PEERPIDFD
                                      then pidfd_send_signal(0), pidfd_getfd, the
                                      PIDFD_GET_*_NAMESPACE ioctls; OPEN if any
                                      works on a process outside the sandbox
    unix_rt.py host-sockets           every socket file under /run, /var/run,
                                      /tmp, /dev (D-Bus, systemd notify and
                                      journal, /dev/log, ...): what a stream or
                                      seqpacket pair can do with it (connect,
                                      sendto); SKIP when there is none
"""
import ctypes, errno, os, socket, struct, sys

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


def en(e):
    return errno.errorcode.get(e, str(e))


def done(opened, tried):
    if opened:
        print("OPEN " + "; ".join(opened[:6]) + (" ... (%d in all)" % len(opened) if len(opened) > 6 else ""))
        sys.exit(1)
    print("BLOCKED %d attempts refused" % tried)
    sys.exit(0)


class sockaddr_un(ctypes.Structure):
    _fields_ = [("family", ctypes.c_ushort), ("path", ctypes.c_char * 108)]


class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


class msghdr(ctypes.Structure):
    _fields_ = [("name", ctypes.c_void_p), ("namelen", ctypes.c_uint), ("iov", ctypes.c_void_p),
                ("iovlen", ctypes.c_size_t), ("control", ctypes.c_void_p), ("controllen", ctypes.c_size_t),
                ("flags", ctypes.c_int)]


class mmsghdr(ctypes.Structure):
    _fields_ = [("hdr", msghdr), ("len", ctypes.c_uint)]


def sendmmsg(fd, path, data):
    sa = sockaddr_un()
    sa.family = socket.AF_UNIX
    raw = path.encode() if isinstance(path, str) else path
    ctypes.memmove(ctypes.addressof(sa) + 2, raw, len(raw))
    buf = ctypes.create_string_buffer(data)
    iov = iovec(ctypes.cast(buf, ctypes.c_void_p), len(data))
    m = mmsghdr()
    m.hdr.name = ctypes.addressof(sa)
    m.hdr.namelen = 2 + len(raw)
    m.hdr.iov = ctypes.addressof(iov)
    m.hdr.iovlen = 1
    r = libc.syscall(ctypes.c_long(307), ctypes.c_long(fd), ctypes.byref(m), ctypes.c_long(1),
                     ctypes.c_long(socket.MSG_DONTWAIT))
    if r < 0:
        raise OSError(ctypes.get_errno(), "sendmmsg")
    return r


def unspec(fd):
    return libc.connect(fd, ctypes.create_string_buffer(b"\0\0", 16), 16)


def states(t):
    """(label, me, keep) for a pair of type t in each later state"""
    for flags, fl in ((0, ""), (socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC, "+nb+cloexec")):
        name = {socket.SOCK_STREAM: "stream", socket.SOCK_SEQPACKET: "seqpacket"}[t] + fl
        a, b = socket.socketpair(socket.AF_UNIX, t | flags)
        b.close()
        yield name + "/peer-closed", a, []
        a, b = socket.socketpair(socket.AF_UNIX, t | flags)
        a.shutdown(socket.SHUT_RDWR)
        yield name + "/shutdown-self", a, [b]
        a, b = socket.socketpair(socket.AF_UNIX, t | flags)
        b.shutdown(socket.SHUT_RDWR)
        yield name + "/shutdown-peer", a, [b]
        a, b = socket.socketpair(socket.AF_UNIX, t | flags)
        b.close()
        for _ in range(3):
            try:
                a.send(b"x", socket.MSG_DONTWAIT | socket.MSG_NOSIGNAL)
            except OSError:
                pass
        yield name + "/peer-closed+failed-sends", a, []
        a, b = socket.socketpair(socket.AF_UNIX, t | flags)
        unspec(a.fileno())
        b.close()
        unspec(a.fileno())
        yield name + "/AF_UNSPEC", a, []
        # passed over SCM_RIGHTS within the sandbox, its peer closed on the way
        a, b = socket.socketpair(socket.AF_UNIX, t | flags)
        c1, c2 = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        socket.send_fds(c1, [b"f"], [a.fileno()])
        a.close()
        b.close()
        _, fds, _, _ = socket.recv_fds(c2, 8, 1)
        c1.close()
        c2.close()
        yield name + "/via-SCM_RIGHTS", socket.socket(fileno=fds[0]), []


def pair_dead(d, ab):
    streams = [os.path.join(d, "hosts.sock"), os.path.join(d, "hostq.sock")]
    dgrams = [os.path.join(d, "hostd.sock"), "\0" + ab]
    opaths = []
    for p in streams:
        try:
            opaths.append("/proc/self/fd/%d" % os.open(p, os.O_PATH))
        except OSError:
            pass
    opened, tried = [], 0
    for t in (socket.SOCK_STREAM, socket.SOCK_SEQPACKET):
        for label, me, keep in states(t):
            me.setblocking(False)
            for p in streams + opaths:
                tried += 1
                try:
                    me.connect(p)
                    opened.append("%s: connect(%s)" % (label, p))
                except OSError:
                    pass
            for p in dgrams + streams:
                for how in ("sendto", "sendmsg", "sendmmsg"):
                    tried += 1
                    try:
                        if how == "sendto":
                            me.sendto(b"ESCAPED " + how.encode(), socket.MSG_NOSIGNAL, p)
                        elif how == "sendmsg":
                            me.sendmsg([b"ESCAPED " + how.encode()], [], socket.MSG_NOSIGNAL, p)
                        else:
                            sendmmsg(me.fileno(), p, b"ESCAPED sendmmsg")
                        # it went somewhere; only a live peer may take it
                        if not keep:
                            opened.append("%s: %s(%s) succeeded" % (label, how, p.replace("\0", "@")))
                    except OSError:
                        pass
            tried += 1
            nm = "pd%d" % (tried % 1000)
            try:
                me.bind(nm)
                try:
                    me.listen(4)
                    opened.append("%s: listen() after bind(%s)" % (label, nm))
                except OSError:
                    pass
            except OSError:
                pass
            finally:
                try:
                    os.unlink(nm)
                except OSError:
                    pass
            me.close()
            for k in keep:
                k.close()
    done(opened, tried)


def stdin_aim(d, ab):
    import select, time
    me = socket.socket(fileno=0)
    me.setblocking(False)
    end = time.monotonic() + 10
    while time.monotonic() < end:  # the host closes its end: EOF
        select.select([me], [], [], 0.5)
        try:
            if me.recv(64) == b"":
                break
        except BlockingIOError:
            continue
        except OSError:
            break
    streams = [os.path.join(d, "hosts.sock"), os.path.join(d, "hostq.sock"), "\0" + ab + "-s", "\0" + ab + "-q"]
    dgrams = [os.path.join(d, "hostd.sock"), "\0" + ab]
    opened, tried = [], 0
    for rnd in range(2):
        for _ in range(2):
            try:
                me.send(b"x", socket.MSG_NOSIGNAL)
            except OSError:
                pass
        for p in streams:
            tried += 1
            try:
                me.connect(p)
                opened.append("connect(%s)" % p.replace("\0", "@"))
            except OSError:
                pass
        for p in dgrams + streams:
            for how in ("sendto", "sendmsg", "sendmmsg"):
                tried += 1
                try:
                    if how == "sendto":
                        me.sendto(b"ESCAPED stdin " + how.encode(), socket.MSG_NOSIGNAL, p)
                    elif how == "sendmsg":
                        me.sendmsg([b"ESCAPED stdin " + how.encode()], [], socket.MSG_NOSIGNAL, p)
                    else:
                        sendmmsg(me.fileno(), p, b"ESCAPED stdin sendmmsg")
                    opened.append("%s(%s) succeeded" % (how, p.replace("\0", "@")))
                except OSError:
                    pass
        unspec(me.fileno())
    tried += 1
    try:
        me.bind("\0" + ab + "-in")  # an abstract name in the host's namespace
        try:
            me.listen(4)
            opened.append("listen() on an abstract name of the host's namespace")
        except OSError:
            pass
    except OSError:
        pass
    me.detach()
    done(opened, tried)


def pair_x32():
    sv = (ctypes.c_int * 2)()
    errs = set()
    for typ in (2, 3, 2 | 0o4000 | 0o2000000, 0x100000002):
        r = libc.syscall(ctypes.c_long(0x40000000 + 53), ctypes.c_long(1), ctypes.c_long(typ), ctypes.c_long(0), sv)
        if r >= 0:
            print("OPEN x32 socketpair(AF_UNIX, %#x) made fds %d,%d" % (typ, sv[0], sv[1]))
            sys.exit(1)
        errs.add(en(ctypes.get_errno()))
    print("BLOCKED x32 datagram socketpair: %s" % ",".join(sorted(errs)))
    sys.exit(0)


def peer_pidfd():
    L = socket.socket(socket.AF_UNIX)
    L.bind("\0sluice-rt2-peer-%d" % os.getpid())
    L.listen(4)
    c = socket.socket(socket.AF_UNIX)
    c.connect(L.getsockname())
    a, _ = L.accept()
    pid, uid, gid = struct.unpack("3i", a.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
    try:
        fd = a.getsockopt(socket.SOL_SOCKET, 77)  # SO_PEERPIDFD (6.5)
    except OSError as e:
        print("BLOCKED SO_PEERPIDFD: %s (peer pid %d)" % (en(e.errno), pid))
        sys.exit(0)
    opened, res = [], []
    if pid != 0:  # the peer is in our pid namespace: the command itself
        print("BLOCKED the peer is a process of the sandbox (pid %d): nothing of the host's" % pid)
        sys.exit(0)
    r = libc.syscall(ctypes.c_long(424), ctypes.c_long(fd), ctypes.c_long(0), None, ctypes.c_long(0))
    (opened if r == 0 else res).append("pidfd_send_signal=%s" % ("ok" if r == 0 else en(ctypes.get_errno())))
    r = libc.syscall(ctypes.c_long(438), ctypes.c_long(fd), ctypes.c_long(0), ctypes.c_long(0))
    (opened if r >= 0 else res).append("pidfd_getfd=%s" % ("ok" if r >= 0 else en(ctypes.get_errno())))
    for nr, name in ((4, "net"), (9, "user"), (3, "mnt"), (5, "pid"), (1, "cgroup")):
        r = libc.ioctl(fd, 0xFF00 | nr, 0)
        (opened if r >= 0 else res).append("get_%s_ns=%s" % (name, os.readlink("/proc/self/fd/%d" % r) if r >= 0
                                                             else en(ctypes.get_errno())))
    if opened:
        print("OPEN a pidfd of sluice on the host (peer uid %d): %s" % (uid, " ".join(opened)))
        sys.exit(1)
    print("BLOCKED peer pid 0 (outside), uid %d: %s" % (uid, " ".join(res)))
    sys.exit(0)


def pid1_getfd():
    pf = libc.syscall(ctypes.c_long(434), ctypes.c_long(1), ctypes.c_long(0))
    if pf < 0:
        print("BLOCKED pidfd_open(1): %s" % en(ctypes.get_errno()))
        sys.exit(0)
    opened, tried, errs = [], 0, set()
    for fd in range(64):
        tried += 1
        r = libc.syscall(ctypes.c_long(438), ctypes.c_long(pf), ctypes.c_long(fd), ctypes.c_long(0))
        if r >= 0:
            opened.append("pidfd_getfd(1, %d) = %s" % (fd, os.readlink("/proc/self/fd/%d" % r)))
        else:
            errs.add(en(ctypes.get_errno()))
    if not opened:
        print("BLOCKED pidfd_getfd of pid 1: %s" % ",".join(sorted(errs)))
        sys.exit(0)
    done(opened, tried)


def open_sock(paths):
    opened, tried, errs = [], 0, set()
    for p in paths:
        for fl in (os.O_RDONLY, os.O_WRONLY, os.O_RDWR, os.O_RDWR | os.O_NONBLOCK):
            tried += 1
            try:
                fd = os.open(p, fl)
                opened.append("open(%s, %#o) = fd %d" % (p, fl, fd))
            except OSError as e:
                errs.add(en(e.errno))
        try:
            op = os.open(p, os.O_PATH)
            tried += 1
            try:
                fd = os.open("/proc/self/fd/%d" % op, os.O_RDWR)
                opened.append("reopen of O_PATH %s = fd %d" % (p, fd))
            except OSError as e:
                errs.add(en(e.errno))
        except OSError as e:
            errs.add(en(e.errno))
    if not opened:
        print("BLOCKED %d opens: %s" % (tried, ",".join(sorted(errs))))
        sys.exit(0)
    done(opened, tried)


def host_sockets():
    import stat
    found = []
    for root in ("/run", "/var/run", "/tmp", "/var/tmp", "/dev", "/var/lib"):
        for dp, dn, fn in os.walk(root):
            if dp.count("/") > 5:
                dn[:] = []
            for f in fn:
                p = os.path.join(dp, f)
                try:
                    if stat.S_ISSOCK(os.lstat(p).st_mode):
                        found.append(p)
                except OSError:
                    pass
    found = sorted(set(found))[:200]
    if not found:
        print("SKIP no socket file visible inside (no D-Bus, systemd notify or /dev/log on this host)")
        sys.exit(3)
    opened, tried = [], 0
    for p in found:
        for t in (socket.SOCK_STREAM, socket.SOCK_SEQPACKET):
            a, b = socket.socketpair(socket.AF_UNIX, t)
            a.setblocking(False)
            b.close()
            tried += 2
            try:
                a.connect(p)
                opened.append("connect(%s)" % p)
            except OSError:
                pass
            try:
                a.sendto(b"READY=1", socket.MSG_NOSIGNAL, p)
                opened.append("sendto(%s)" % p)
            except OSError:
                pass
            a.close()
    if not opened:
        print("BLOCKED %d socket files (%s): %d attempts refused" % (len(found), ",".join(found[:4]), tried))
        sys.exit(0)
    done(opened, tried)


def main():
    a = sys.argv[1:]
    if a[0] == "pair-dead":
        pair_dead(a[1], a[2])
    if a[0] == "stdin-aim":
        stdin_aim(a[1], a[2])
    if a[0] == "pair-x32":
        pair_x32()
    if a[0] == "peer-pidfd":
        peer_pidfd()
    if a[0] == "pid1-getfd":
        pid1_getfd()
    if a[0] == "open-sock":
        open_sock(a[1:])
    if a[0] == "host-sockets":
        host_sockets()
    print("SKIP unknown probe " + a[0])
    sys.exit(3)


if __name__ == "__main__":
    main()
