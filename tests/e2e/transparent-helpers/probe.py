#!/usr/bin/env python3
"""tests/e2e/transparent-helpers/probe.py - run inside `sluice run
--transparent` by transparent.sh. One subcommand per check; prints one
line of facts that the script compares."""
import ctypes
import errno
import os
import select
import socket
import struct
import sys
import threading
import time


def fetch(sock, host, path="/hello.txt"):
    sock.sendall(("GET %s HTTP/1.0\r\nHost: %s\r\n\r\n" % (path, host)).encode())
    sock.shutdown(socket.SHUT_WR)
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data.split(b"\r\n\r\n", 1)[-1].decode(errors="replace").strip()


def cmd_create(host, port):
    s = socket.create_connection((host, int(port)), timeout=10)
    print("body=%s" % fetch(s, host))


def cmd_thread(host, port):
    """getaddrinfo and connect() in a second thread (curl's resolver does
    both there): the host must find the thread's process."""
    out = []
    t = threading.Thread(target=lambda: out.append(socket.create_connection((host, int(port)), timeout=10)))
    t.start()
    t.join()
    print("body=%s" % fetch(out[0], host))


def cmd_x32(host, port):
    """connect() through the x32 ABI (x86-64 audit arch, __X32_SYSCALL_BIT
    on the number): judged like the native one."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    addr = socket.getaddrinfo(host, int(port), socket.AF_INET, socket.SOCK_STREAM)[0][4]
    sa = ctypes.create_string_buffer(struct.pack("=H", socket.AF_INET) + struct.pack(">H", addr[1]) +
                                     socket.inet_aton(addr[0]) + bytes(8), 16)
    s = socket.socket()
    r = libc.syscall(ctypes.c_long(0x40000000 | 42), ctypes.c_long(s.fileno()), sa, ctypes.c_long(16))
    if r != 0:
        print("x32 errno=%s" % errno.errorcode.get(ctypes.get_errno(), ctypes.get_errno()))
        return
    print("body=%s" % fetch(s, host))


def cmd_nonblock(host, port):
    addr = socket.getaddrinfo(host, int(port), socket.AF_INET, socket.SOCK_STREAM)[0][4]
    s = socket.socket()
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    s.setblocking(False)
    r = s.connect_ex(addr)
    _, w, _ = select.select([], [s], [], 10)
    err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    nodelay = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
    keep = s.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE)
    nb = (s.getblocking() is False)
    peer = "asked" if s.getpeername() == addr else "%r" % (s.getpeername(),)
    s.setblocking(True)
    body = fetch(s, host)
    print("connect=%s writable=%d so_error=%d nodelay=%d keepalive=%d nonblock=%d peer=%s body=%s"
          % (errno.errorcode.get(r, r), len(w), err, nodelay != 0, keep != 0, nb, peer, body))


def cmd_epoll(host, port):
    """Go's and libuv's order: non-blocking connect(), then the socket into
    an epoll set, EPOLLOUT, SO_ERROR."""
    addr = socket.getaddrinfo(host, int(port), socket.AF_UNSPEC, socket.SOCK_STREAM)[0]
    s = socket.socket(addr[0], socket.SOCK_STREAM)
    s.setblocking(False)
    r = s.connect_ex(addr[4])
    ep = select.epoll()
    ep.register(s.fileno(), select.EPOLLOUT)
    ev = ep.poll(10)
    err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    s.setblocking(True)
    print("connect=%s events=%d so_error=%d body=%s" % (errno.errorcode.get(r, r), len(ev), err, fetch(s, host)))


def cmd_reaim(host, port, other, refused):
    """The command may only hold sockets of the host's namespace that are
    connected to a vetted address. Try to aim one elsewhere (OTHER, which no
    rule allows) after shutdown(): sendto(MSG_FASTOPEN), connect(AF_UNSPEC)
    then connect, bind, listen. Then the same on the socket of a connect()
    that failed (REFUSED, allowed but closed): it must still be the
    sandbox's own. Prints each errno name ("ok" where a call succeeded)."""
    fastopen = getattr(socket, "MSG_FASTOPEN", 0x20000000)
    out = []

    def attempt(name, fn):
        try:
            fn()
            out.append("%s=ok" % name)
        except OSError as e:
            out.append("%s=%s" % (name, errno.errorcode.get(e.errno, e.errno)))

    s = socket.create_connection((host, int(port)), timeout=10)
    attempt("shutdown", lambda: s.shutdown(socket.SHUT_RDWR))
    attempt("fastopen", lambda: s.sendto(b"x", fastopen, ("127.0.0.1", int(other))))
    unspec = struct.pack("=H", socket.AF_UNSPEC) + bytes(14)
    libc = ctypes.CDLL(None, use_errno=True)
    rc = libc.connect(s.fileno(), unspec, len(unspec))
    out.append("unspec=%s" % ("ok" if rc == 0 else errno.errorcode.get(ctypes.get_errno(), "?")))
    attempt("bind", lambda: s.bind(("0.0.0.0", 0)))
    attempt("listen", lambda: s.listen(1))
    s.close()
    r = socket.socket()
    attempt("refused", lambda: r.connect(("127.0.0.1", int(refused))))
    attempt("fastopen2", lambda: r.sendto(b"x", fastopen, ("127.0.0.1", int(other))))
    r.close()
    print(" ".join(out))


def cmd_reaim_pending(host, port, other):
    """A non-blocking connect() to an allowed origin whose handshake cannot
    finish (its accept queue is full): whatever connect() answers, the
    socket must not be one of the host's still in SYN_SENT, which
    shutdown() would take back to unconnected for sendto(MSG_FASTOPEN) to
    aim anywhere."""
    fastopen = getattr(socket, "MSG_FASTOPEN", 0x20000000)
    s = socket.socket()
    s.setblocking(False)
    r = s.connect_ex((host, int(port)))
    out = ["connect=%s" % errno.errorcode.get(r, r)]
    for name, fn in (("shutdown", lambda: s.shutdown(socket.SHUT_RDWR)),
                     ("fastopen", lambda: s.sendto(b"x", fastopen, ("127.0.0.1", int(other))))):
        try:
            fn()
            out.append("%s=ok" % name)
        except OSError as e:
            out.append("%s=%s" % (name, errno.errorcode.get(e.errno, e.errno)))
    print(" ".join(out))


def cmd_v6(host, port):
    """An IPv6 socket to the name's synthetic IPv6 address, an IPv4 upstream:
    the socket stays IPv6 (the upstream as ::ffff:a.b.c.d), and an IPv6
    option set before connect() is still there."""
    addr = socket.getaddrinfo(host, int(port), socket.AF_INET6, socket.SOCK_STREAM)[0][4]
    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_TCLASS, 0x20)
    s.connect(addr)
    dom = s.getsockopt(socket.SOL_SOCKET, socket.SO_DOMAIN)
    tclass = s.getsockopt(socket.IPPROTO_IPV6, socket.IPV6_TCLASS)
    peer = s.getpeername()
    print("asked=%s domain=%s peer=%s tclass=%d body=%s"
          % (addr[0].split(":")[0], "AF_INET6" if dom == socket.AF_INET6 else dom,
             "asked" if peer[:2] == addr[:2] else "%r" % (peer,), tclass, fetch(s, host)))


def cmd_peername(host, port):
    """getpeername() on sockets sluice connected gives the address asked
    for, from Python and from C (a short buffer: cut, the full length
    reported; a bad pointer: EFAULT), on a dup too; on a socket sluice did
    not connect (a socketpair, an unconnected one) the kernel's answer."""
    libc = ctypes.CDLL(None, use_errno=True)
    addr = socket.getaddrinfo(host, int(port), socket.AF_INET, socket.SOCK_STREAM)[0][4]
    s = socket.create_connection(addr, timeout=10)
    out = ["asked=%s" % ("synthetic" if addr[0].startswith("198.1") else addr[0])]
    out.append("peer=%s" % ("asked" if s.getpeername() == addr else repr(s.getpeername())))
    d = socket.socket(fileno=os.dup(s.fileno()))
    out.append("dup=%s" % ("asked" if d.getpeername() == addr else repr(d.getpeername())))
    buf = ctypes.create_string_buffer(16)
    ln = ctypes.c_uint32(4)
    rc = libc.getpeername(s.fileno(), buf, ctypes.byref(ln))
    out.append("short=rc%d,len%d,family%d" % (rc, ln.value, struct.unpack("=H", buf.raw[:2])[0]))
    ln = ctypes.c_uint32(16)
    rc = libc.getpeername(s.fileno(), ctypes.c_void_p(8), ctypes.byref(ln))
    out.append("badptr=%s" % (errno.errorcode.get(ctypes.get_errno(), "?") if rc < 0 else "ok"))
    a, b = socket.socketpair()
    out.append("unix=%r" % (a.getpeername(),))
    try:
        socket.socket().getpeername()
        out.append("unconnected=ok")
    except OSError as e:
        out.append("unconnected=%s" % errno.errorcode.get(e.errno, e.errno))
    print(" ".join(out))


def cmd_refused(host, port):
    try:
        socket.create_connection((host, int(port)), timeout=10)
        print("connected")
    except OSError as e:
        print("errno=%s" % errno.errorcode.get(e.errno, e.errno))


def cmd_dns(name, qtype, proto):
    qt = {"A": 1, "AAAA": 28, "MX": 15, "TXT": 16}[qtype]
    q = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
    for label in name.split("."):
        q += bytes([len(label)]) + label.encode()
    q += b"\0" + struct.pack(">HH", qt, 1)
    if proto == "udp":
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(5)
        s.sendto(q, ("127.0.0.1", 53))
        r = s.recv(4096)
    else:
        s = socket.create_connection(("127.0.0.1", 53), timeout=5)
        s.sendall(struct.pack(">H", len(q)) + q)
        n = struct.unpack(">H", s.recv(2))[0]
        r = b""
        while len(r) < n:
            r += s.recv(n - len(r))
    rid, flags, qd, an = struct.unpack(">HHHH", r[:8])
    print("id=%x rcode=%d answers=%d" % (rid, flags & 15, an))


def dns_query(name, qid=0x1234):
    q = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    for label in name.split("."):
        q += bytes([len(label)]) + label.encode()
    return q + b"\0" + struct.pack(">HH", 1, 1)


def cmd_dnsflood(name, count, marker):
    """Pipelines COUNT queries over TCP to the sandbox's resolver and never
    reads an answer, floods UDP likewise, then writes MARKER and waits (the
    connection held open, answers unread) until MARKER.done appears."""
    q = dns_query(name)
    batch = (struct.pack(">H", len(q)) + q) * 1000
    count = int(count)
    s = socket.create_connection(("127.0.0.1", 53), timeout=5)
    s.setblocking(False)
    sent = 0
    buf = b""
    while sent < count:
        if not buf:
            buf = batch
            sent += 1000
        try:
            n = s.send(buf)
            buf = buf[n:]
        except BlockingIOError:
            # held back: the resolver stopped reading (or is slow); wait a
            # while for room, and stop flooding if none comes
            if not select.select([], [s], [], 3)[1]:
                break
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.setblocking(False)
    for _ in range(count // 10):
        try:
            u.sendto(q, ("127.0.0.1", 53))
        except (BlockingIOError, OSError):
            pass
    with open(marker, "w") as f:
        f.write("sent=%d\n" % sent)
    for _ in range(1200):
        if os.path.exists(marker + ".done"):
            break
        time.sleep(0.1)
    print("flooded")


def cmd_dnsconns(name, n):
    """Opens N DNS-over-TCP connections and keeps them; reports whether the
    first still answers and whether the last was refused (closed at once)."""
    q = dns_query(name)
    conns = [socket.create_connection(("127.0.0.1", 53), timeout=5) for _ in range(int(n))]
    def ask(s):
        try:
            s.sendall(struct.pack(">H", len(q)) + q)
            h = s.recv(2)
            return "answered" if len(h) == 2 else "closed"
        except OSError:
            return "closed"
    print("first=%s last=%s" % (ask(conns[0]), ask(conns[-1])))


def cmd_own_server():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    c = socket.create_connection(("127.0.0.1", port), timeout=5)
    a, _ = srv.accept()
    c.sendall(b"ping")
    print("own=%s" % a.recv(4).decode())


def cmd_fd0(port):
    """stdin is a TCP socket made in the host's namespace."""
    s = socket.socket(fileno=0)
    try:
        s.connect(("127.0.0.1", int(port)))
        print("fd0=connected")
    except OSError as e:
        print("fd0=%s" % errno.errorcode.get(e.errno, e.errno))
    s.detach()


def cmd_udp():
    """UDP to an address no udp: rule allows (TEST-NET-1, never routed):
    transparent UDP's relay refuses it with port unreachable, so the
    connected socket's next call fails (ECONNREFUSED); "udp=echo" would
    mean a reply came back."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(3)
    try:
        s.connect(("192.0.2.1", 9))
        s.send(b"x")
        s.recv(10)
        print("udp=echo")
    except socket.timeout:
        print("udp=timeout")
    except OSError as e:
        print("udp=%s" % errno.errorcode.get(e.errno, e.errno))


def cmd_race(good, bad, rounds):
    """connect() on a sockaddr another thread rewrites between an allowed
    port and a denied one: the host reads it once and dials what it read."""
    libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(16)
    ports = [struct.pack(">H", int(good)), struct.pack(">H", int(bad))]
    struct.pack_into(">HH4s", buf, 0, socket.AF_INET, int(good), socket.inet_aton("127.0.0.1"))
    buf[0:2] = struct.pack("=H", socket.AF_INET)
    stop = [False]

    def flip():
        i = 0
        while not stop[0]:
            buf[2:4] = ports[i & 1]
            i += 1

    t = threading.Thread(target=flip)
    t.start()
    ok = refused = 0
    for _ in range(int(rounds)):
        s = socket.socket()
        if libc.connect(s.fileno(), buf, 16) == 0:
            ok += 1
        else:
            refused += 1
        s.close()
    stop[0] = True
    t.join()
    print("race ok=%d refused=%d" % (ok, refused))


def cmd_limit(host, p1, p2, p3):
    """Two connect()s wait for an ask handler that never answers (it leaves
    a file asked.PID in the working directory for each question); with
    proxy.limits.maxConnections 2 the third fails at once with EAGAIN."""
    import glob
    import time
    res = {}

    def conn(p):
        try:
            socket.create_connection((host, int(p)), timeout=60)
            res[p] = "connected"
        except OSError as e:
            res[p] = errno.errorcode.get(e.errno, e.errno)

    ts = [threading.Thread(target=conn, args=(p,)) for p in (p1, p2)]
    for t in ts:
        t.start()
    for _ in range(600):
        if len(glob.glob("asked.*")) >= 2:
            break
        time.sleep(0.05)
    conn(p3)
    for t in ts:
        t.join()
    print("limit third=%s first=%s second=%s" % (res[p3], res[p1], res[p2]))


def cmd_fds():
    names = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            names.append(os.readlink("/proc/self/fd/" + fd))
        except OSError:
            pass
    print("seccomp_fds=%d" % sum("seccomp" in n for n in names))


def cmd_reaim_reset(host, port, sink, bindport):
    """Issue 21, item 1: a socket sluice handed over after a handshake that
    ended on a SYN retransmit (slow_origin.py), then reset by the origin
    at each phase, must not be aimed anywhere: sendto(MSG_FASTOPEN) twice
    (the first used to take it from SS_CONNECTING to unconnected, the
    second to connect it from the host's namespace), connect(AF_UNSPEC),
    TCP_FASTOPEN_CONNECT + connect, bind() + listen() on the host's
    0.0.0.0. One line per round: each step's errno name, "ok" where it
    succeeded."""
    fastopen = getattr(socket, "MSG_FASTOPEN", 0x20000000)
    libc = ctypes.CDLL(None, use_errno=True)
    unspec = struct.pack("=H", socket.AF_UNSPEC) + bytes(14)
    rounds = (("reply", True, "fastopen"), ("reply", False, "fastopen"), ("early", True, "fastopen"),
              ("early", False, "fastopen"), ("reply", True, "listen"), ("early", False, "listen"),
              ("close", True, "fastopen"), ("close", False, "listen"))
    for i, (mode, blocking, plan) in enumerate(rounds):
        out = ["round=%d" % i, mode, "blocking" if blocking else "nonblocking"]

        def attempt(name, fn):
            try:
                fn()
                out.append("%s=ok" % name)
            except OSError as e:
                out.append("%s=%s" % (name, errno.errorcode.get(e.errno, e.errno)))

        with open("go.tmp", "w") as f:
            f.write(mode)
        os.rename("go.tmp", "go.%d" % i)
        s = socket.socket()
        if blocking:
            attempt("connect", lambda: s.connect((host, int(port))))
        else:
            s.setblocking(False)
            r = s.connect_ex((host, int(port)))
            select.select([], [s], [], 10)
            out.append("connect=%s/%s" % (errno.errorcode.get(r, r),
                                          errno.errorcode.get(s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR), 0)))
            s.setblocking(True)
        s.settimeout(5)
        if mode in ("reply", "close"):
            attempt("read", lambda: s.recv(16))
        for _ in range(200):  # until the reset arrives
            try:
                s.send(b"x")
            except OSError as e:
                out.append("send=%s" % errno.errorcode.get(e.errno, e.errno))
                break
            time.sleep(0.05)
        attempt("fastopen1", lambda: s.sendto(b"x", fastopen, ("127.0.0.1", int(sink))))
        if plan == "listen":
            attempt("bind", lambda: s.bind(("0.0.0.0", int(bindport))))
            attempt("listen", lambda: s.listen(1))
        attempt("fastopen2", lambda: s.sendto(b"x", fastopen, ("127.0.0.1", int(sink))))
        rc = libc.connect(s.fileno(), unspec, len(unspec))
        out.append("unspec=%s" % ("ok" if rc == 0 else errno.errorcode.get(ctypes.get_errno(), "?")))
        attempt("fastopen3", lambda: s.sendto(b"x", fastopen, ("127.0.0.1", int(sink))))
        attempt("tfo_connect", lambda: (s.setsockopt(socket.IPPROTO_TCP, 30, 1),
                                        s.connect(("127.0.0.1", int(sink)))))
        if plan != "listen":
            attempt("bind", lambda: s.bind(("0.0.0.0", int(bindport))))
            attempt("listen", lambda: s.listen(1))
        s.close()
        print(" ".join(out))
        sys.stdout.flush()


def cmd_swap(host, port, sink, rounds):
    """Issue 21, item 1 (the TOCTOU rule): connect(AF_UNSPEC) on a socket of
    the sandbox's own while another thread keeps dup2()ing a socket sluice
    handed over (connected to HOST:PORT) onto the same number. The host
    checks the socket and must run the call on what it checked: were the
    kernel to run it (CONTINUE) on the swapped-in socket, that socket would
    be disconnected and sendto(MSG_FASTOPEN) would aim it at SINK from the
    host's namespace. Prints how often the handed-over socket could be
    re-aimed (escaped=0 is right) and how many calls ran."""
    fastopen = getattr(socket, "MSG_FASTOPEN", 0x20000000)
    libc = ctypes.CDLL(None, use_errno=True)
    unspec = ctypes.create_string_buffer(struct.pack("=H", socket.AF_UNSPEC) + bytes(14), 16)
    h = socket.create_connection((host, int(port)), timeout=10)
    own = socket.socket()
    target = os.dup(own.fileno())
    stop = [False]

    def flip():
        while not stop[0]:
            os.dup2(h.fileno(), target)
            os.dup2(own.fileno(), target)

    t = threading.Thread(target=flip)
    t.start()
    calls = escaped = 0
    for _ in range(int(rounds)):
        libc.connect(target, unspec, 16)
        calls += 1
        try:
            h.sendto(b"x", fastopen, ("127.0.0.1", int(sink)))
            escaped += 1
        except BlockingIOError:
            escaped += 1
        except OSError:
            pass
    stop[0] = True
    t.join()
    print("swap escaped=%d calls=%d" % (escaped, calls))


def wait_reset(s):
    """Reads and sends on S until its peer's reset (or FIN) ends it."""
    s.settimeout(5)
    try:
        s.recv(16)
    except OSError:
        pass
    for _ in range(200):
        try:
            s.send(b"x")
        except OSError:
            return
        time.sleep(0.05)


def cmd_reaim_opts(host, port, sink, bindport):
    """rt-1: a handed-over socket reset by its peer (the origin on HOST:PORT
    resets every connection 1 s after its hello), then the socket options
    that could loosen it (TCP_REPAIR, IP_TRANSPARENT, IP_FREEBIND,
    SO_BINDTODEVICE, SO_REUSEADDR/SO_REUSEPORT) and every send path with an
    address: sendmsg and sendmmsg with MSG_FASTOPEN, TCP_FASTOPEN_CONNECT then
    a plain write, connect(), bind() on the host's 0.0.0.0:BINDPORT, listen(),
    accept(). Then a forked child and a process that got the socket by
    SCM_RIGHTS try connect(AF_UNSPEC) and MSG_FASTOPEN. Prints each step's
    errno name ("ok" where it succeeded)."""
    fastopen = getattr(socket, "MSG_FASTOPEN", 0x20000000)
    libc = ctypes.CDLL(None, use_errno=True)
    unspec = ctypes.create_string_buffer(struct.pack("=H", socket.AF_UNSPEC) + bytes(14), 16)
    sin = struct.pack("=H", socket.AF_INET) + struct.pack(">H", int(sink)) + socket.inet_aton("127.0.0.1") + bytes(8)
    out = []

    def attempt(name, fn):
        try:
            fn()
            out.append("%s=ok" % name)
        except OSError as e:
            out.append("%s=%s" % (name, errno.errorcode.get(e.errno, e.errno)))

    def cattempt(name, rc):
        out.append("%s=%s" % (name, "ok" if rc >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")))

    s = socket.create_connection((host, int(port)), timeout=10)
    wait_reset(s)
    s.setblocking(True)
    attempt("opt_repair", lambda: s.setsockopt(socket.IPPROTO_TCP, 19, 1))          # TCP_REPAIR
    attempt("opt_transparent", lambda: s.setsockopt(socket.SOL_IP, 19, 1))          # IP_TRANSPARENT
    attempt("opt_freebind", lambda: s.setsockopt(socket.SOL_IP, 15, 1))             # IP_FREEBIND
    attempt("opt_bindtodevice", lambda: s.setsockopt(socket.SOL_SOCKET, 25, b"lo\0"))
    attempt("opt_reuse", lambda: (s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1),
                                  s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)))
    for i in (1, 2):
        attempt("sendmsg_fo%d" % i, lambda: s.sendmsg([b"x"], [], fastopen, ("127.0.0.1", int(sink))))

    class iovec(ctypes.Structure):
        _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]

    class msghdr(ctypes.Structure):
        _fields_ = [("name", ctypes.c_void_p), ("namelen", ctypes.c_uint), ("iov", ctypes.POINTER(iovec)),
                    ("iovlen", ctypes.c_size_t), ("control", ctypes.c_void_p), ("controllen", ctypes.c_size_t),
                    ("flags", ctypes.c_int)]

    class mmsghdr(ctypes.Structure):
        _fields_ = [("hdr", msghdr), ("len", ctypes.c_uint)]

    data = ctypes.create_string_buffer(b"x")
    name = ctypes.create_string_buffer(sin, 16)
    iov = iovec(ctypes.cast(data, ctypes.c_void_p), 1)
    msgs = (mmsghdr * 2)()
    for m in msgs:
        m.hdr = msghdr(ctypes.cast(name, ctypes.c_void_p), 16, ctypes.pointer(iov), 1, None, 0, 0)
    for i in (1, 2):
        cattempt("sendmmsg_fo%d" % i, libc.sendmmsg(s.fileno(), msgs, 2, fastopen))
    attempt("tfo_opt", lambda: s.setsockopt(socket.IPPROTO_TCP, 30, 1))              # TCP_FASTOPEN_CONNECT
    for i in (1, 2):
        attempt("tfo_write%d" % i, lambda: s.send(b"x"))
    attempt("connect", lambda: s.connect(("127.0.0.1", int(sink))))
    cattempt("unspec", libc.connect(s.fileno(), unspec, 16))
    attempt("bind", lambda: s.bind(("0.0.0.0", int(bindport))))
    attempt("listen", lambda: s.listen(1))
    s.setblocking(False)
    attempt("accept", lambda: s.accept())
    s.setblocking(True)
    # a forked child (same filter) and a process it passes the socket to
    pid = os.fork()
    if pid == 0:
        r = libc.connect(s.fileno(), unspec, 16)
        e = 0 if r == 0 else ctypes.get_errno()
        try:
            s.sendto(b"x", fastopen, ("127.0.0.1", int(sink)))
            f = 0
        except OSError as ex:
            f = ex.errno
        os._exit(0 if (r != 0 and f != 0) else 1)
    _, st = os.waitpid(pid, 0)
    out.append("fork=%s" % ("held" if os.WEXITSTATUS(st) == 0 else "ESCAPED"))
    a, b = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        a.close()
        msg, anc, _, _ = b.recvmsg(1, socket.CMSG_SPACE(4))
        fd = struct.unpack("i", anc[0][2][:4])[0]
        r = libc.connect(fd, unspec, 16)
        g = socket.socket(fileno=fd)
        try:
            for _ in (1, 2):
                g.sendto(b"x", fastopen, ("127.0.0.1", int(sink)))
            f = 0
        except OSError as ex:
            f = ex.errno
        os._exit(0 if (r != 0 and f != 0) else 1)
    b.close()
    a.sendmsg([b"s"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", s.fileno()))])
    _, st = os.waitpid(pid, 0)
    out.append("scm_rights=%s" % ("held" if os.WEXITSTATUS(st) == 0 else "ESCAPED"))
    s.close()
    print(" ".join(out))


def cmd_swap_bind(host, port, bindport, rounds):
    """rt-1: bind() (allowLocalBinding: run by sluice) on a socket of the
    sandbox's own while another thread keeps dup2()ing a handed-over socket,
    reset by its peer (so unbound: a bind() would take a port of the host's
    namespace), onto the same number. Prints how often the handed-over
    socket ended up bound to 0.0.0.0:BINDPORT (escaped=0 is right)."""
    libc = ctypes.CDLL(None, use_errno=True)
    sin = ctypes.create_string_buffer(struct.pack("=H", socket.AF_INET) + struct.pack(">H", int(bindport)) +
                                      bytes(12), 16)
    h = socket.create_connection((host, int(port)), timeout=10)
    wait_reset(h)
    own = socket.socket()
    target = os.dup(own.fileno())
    stop = [False]

    def flip():
        while not stop[0]:
            os.dup2(h.fileno(), target)
            os.dup2(own.fileno(), target)

    t = threading.Thread(target=flip)
    t.start()
    calls = escaped = 0
    for _ in range(int(rounds)):
        libc.bind(target, sin, 16)
        calls += 1
        if h.getsockname()[0] == "0.0.0.0":
            escaped += 1
            break
    stop[0] = True
    t.join()
    print("swap_bind escaped=%d calls=%d" % (escaped, calls))


def cmd_swap_unix(host, port, sink, rounds):
    """rt-1: the documented exception. With allowAllUnixSockets a connect()
    to a Unix socket path is handed back to the kernel (CONTINUE), which
    looks the descriptor number and the address up again. One thread keeps
    dup2()ing a socket sluice handed over (connected to HOST:PORT) onto the
    number of a Unix socket of the sandbox's, another keeps flipping the
    address between a path and AF_UNSPEC: a round where sluice saw the Unix
    socket and a path, and the kernel then ran the call on the handed-over
    socket with AF_UNSPEC, disconnects it, and sendto(MSG_FASTOPEN) aims it
    at SINK from the host's namespace. Prints "swap_unix escaped=N calls=M"
    (0 is right; the README says this stays open)."""
    fastopen = getattr(socket, "MSG_FASTOPEN", 0x20000000)
    libc = ctypes.CDLL(None, use_errno=True)
    path = b"/nonexistent-sluice-rt1.sock"
    unix = struct.pack("=H", socket.AF_UNIX) + path + bytes(108 - len(path))
    buf = ctypes.create_string_buffer(unix, 110)
    fam_unix = ctypes.create_string_buffer(struct.pack("=H", socket.AF_UNIX), 2)
    fam_unspec = ctypes.create_string_buffer(struct.pack("=H", socket.AF_UNSPEC), 2)
    h = socket.create_connection((host, int(port)), timeout=10)
    own = socket.socket(socket.AF_UNIX)
    target = os.dup(own.fileno())
    stop = [False]

    def flip_fd():
        while not stop[0]:
            os.dup2(h.fileno(), target)
            os.dup2(own.fileno(), target)

    def flip_addr():
        while not stop[0]:
            ctypes.memmove(buf, fam_unspec, 2)
            ctypes.memmove(buf, fam_unix, 2)

    ts = [threading.Thread(target=flip_fd), threading.Thread(target=flip_addr)]
    for t in ts:
        t.start()
    calls = escaped = 0
    for _ in range(int(rounds)):
        libc.connect(target, buf, 110)
        calls += 1
        # TCP_INFO's tcpi_state (getpeername() is answered by sluice)
        if h.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0] == 7:  # TCP_CLOSE
            escaped += 1
            break
    stop[0] = True
    for t in ts:
        t.join()
    res = ""
    if escaped:
        try:
            h.sendto(b"x", fastopen, ("127.0.0.1", int(sink)))
            res = " fastopen=ok"
        except OSError as e:
            res = " fastopen=%s" % errno.errorcode.get(e.errno, e.errno)
    print("swap_unix escaped=%d calls=%d%s" % (escaped, calls, res))


getattr(sys.modules[__name__], "cmd_" + sys.argv[1])(*sys.argv[2:])
