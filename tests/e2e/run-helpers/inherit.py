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
          mptcp-reset    a connected MPTCP socket (IPPROTO_MPTCP, SOCK_STREAM:
                     what systemd's SocketProtocol=mptcp hands a service),
                     reset by its peer 0.3 s after the handshake
          mptcp-accepted an accepted MPTCP socket (an MPTCP listener's,
                     inetd-style), its client resets it 0.3 s later
          udp-connected  a connected UDP socket
          tcp-listen-reuseport  a listening TCP socket in an SO_REUSEPORT
                     group (the host's own listener is its twin)
          stdout-udp stdin /dev/null, stdout a UDP socket
          high-fds   stdin /dev/null; a UDP socket on fd 7 and a listening
                     TCP socket on fd 8 (not stdio: the command must not get
                     them, nor may any process of the sandbox hold them)
          scm        stdin a connected Unix stream socket whose host end
                     then sends an unconnected TCP socket of the host's
                     network by SCM_RIGHTS (a cooperating host process)
          pidfd      stdin a pidfd of a host process that holds a TCP
                     socket on its fd 3 (pidfd_getfd from inside)
        (an MPTCP mode prints "SKIP ..." where the kernel has no MPTCP)
    inherit.py inside-fds SINK_PORT
        prints "fds=" and the command's descriptor numbers
    inherit.py inside-scm SINK_PORT
        receives a descriptor on stdin and tries connect() and
        sendto(MSG_FASTOPEN) to the sink with it
    inherit.py inside-swapunix SINK_PORT
        (allowAllUnixSockets) connect() to a Unix path on a Unix socket of
        the sandbox's while one thread dup2()s stdin (the host's TCP socket)
        onto its number and another flips the address to AF_UNSPEC; prints
        "swapunix escaped=N calls=M" and, on an escape, what
        sendto(MSG_FASTOPEN) to the sink answered
    inherit.py inside-pidfd SINK_PORT
        pidfd_getfd(stdin, 3) and, if that works, connect() to the sink
    inherit.py inside SINK_PORT
        in the sandbox: tries to aim stdin at the sink (MSG_FASTOPEN twice,
        connect(AF_UNSPEC) then connect(), bind() + listen() on 0.0.0.0, then
        the same through the i386 ABI (int 0x80: socketcall(SYS_CONNECT)
        and the direct connect with AF_UNSPEC, socketcall(SYS_SENDTO) with
        MSG_FASTOPEN) and the x32 one (connect(AF_UNSPEC))) and prints each
        step's errno name ("ok" where it succeeded; "nosys" where the
        kernel lacks the ABI)."""
import ctypes
import errno
import mmap
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

FASTOPEN = getattr(socket, "MSG_FASTOPEN", 0x20000000)


def int80(nr, a=0, b=0, c=0, d=0):
    """`int 0x80` (the i386 ABI) in a forked child (a kernel without IA32
    emulation answers SIGSEGV): eax=nr, ebx=a, ecx=b, edx=c, esi=d. The
    result (negative errno), or None without the ABI."""
    rd, wr = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(rd)
        try:
            code = bytes([0x53]) + b"\xb8" + struct.pack("<I", nr & 0xffffffff)
            code += b"\xbb" + struct.pack("<I", a & 0xffffffff) + b"\xb9" + struct.pack("<I", b & 0xffffffff)
            code += b"\xba" + struct.pack("<I", c & 0xffffffff) + b"\xbe" + struct.pack("<I", d & 0xffffffff)
            code += b"\xcd\x80\x48\x63\xc0\x5b\xc3"
            m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
            m.write(code)
            f = ctypes.CFUNCTYPE(ctypes.c_long)(ctypes.addressof(ctypes.c_char.from_buffer(m)))
            os.write(wr, struct.pack("<q", f()))
        finally:
            os._exit(0)
    os.close(wr)
    data = os.read(rd, 8)
    os.close(rd)
    os.waitpid(pid, 0)
    return struct.unpack("<q", data)[0] if len(data) == 8 else None


def low32(libc, data):
    """DATA copied to a mapping below 4 GiB (i386 pointers are 32 bits)."""
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                          ctypes.c_long]
    p = libc.mmap(None, 4096, 3, 0x22 | 0x40, -1, 0)  # MAP_PRIVATE|MAP_ANONYMOUS|MAP_32BIT
    ctypes.memmove(p, data, len(data))
    return p


def foreign_abis(libc, sink, out):
    """The re-aiming calls through the i386 and x32 ABIs, on fd 0."""
    def name(r):
        if r is None:
            return "nosys"
        return "ok" if r >= 0 else errno.errorcode.get(-r, str(-r))
    unspec = struct.pack("=H", socket.AF_UNSPEC) + bytes(14)
    sin = struct.pack("=H", socket.AF_INET) + struct.pack(">H", sink) + socket.inet_aton("127.0.0.1") + bytes(8)
    buf = low32(libc, unspec + sin + b"x" + bytes(64))
    p_unspec, p_sin, p_x, p_args = buf, buf + 16, buf + 32, buf + 40
    ctypes.memmove(p_args, struct.pack("<III", 0, p_unspec, 16), 12)
    out.append("i386-unspec=%s" % name(int80(102, 3, p_args)))        # socketcall(SYS_CONNECT)
    out.append("i386-direct-unspec=%s" % name(int80(362, 0, p_unspec, 16)))
    ctypes.memmove(p_args, struct.pack("<III", 0, p_sin, 16), 12)
    out.append("i386-connect=%s" % name(int80(102, 3, p_args)))
    ctypes.memmove(p_args, struct.pack("<IIIIII", 0, p_x, 1, FASTOPEN, p_sin, 16), 24)
    out.append("i386-fastopen5=%s" % name(int80(102, 11, p_args)))   # socketcall(SYS_SENDTO)
    out.append("i386-fastopen6=%s" % name(int80(102, 11, p_args)))
    libc.syscall.restype = ctypes.c_long
    r = libc.syscall(ctypes.c_long(0x40000000 | 42), ctypes.c_long(0), ctypes.c_void_p(p_unspec),
                     ctypes.c_long(16))
    e = ctypes.get_errno()
    out.append("x32-unspec=%s" % ("ok" if r == 0 else "nosys" if e == errno.ENOSYS else
                                  errno.errorcode.get(e, str(e))))


def inside(sink):
    print("ready", flush=True)  # the host resets its peer from here on
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
    foreign_abis(libc, sink, out)
    s.detach()
    print(" ".join(out))


HIGH_FDS = (57, 58)


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
    # a reset waits for the command to run (its first line, "ready"): sluice
    # looks at stdin before that, and a reset it saw first would make the
    # socket an unconnected one (refused, so no re-aiming left to try); on
    # a loaded machine 0.3 s after the handshake was not always later
    go = threading.Event()

    def serve(reset):
        c, _ = origin.accept()
        keep.append(c)
        if reset:
            go.wait(60)
            time.sleep(0.3)
            c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            c.close()

    if mode.startswith("mptcp"):
        try:
            socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262).close()
        except OSError as e:
            print("SKIP no MPTCP here (%s)" % e)
            return
    if mode == "mptcp-reset":
        threading.Thread(target=serve, args=(True,), daemon=True).start()
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)  # IPPROTO_MPTCP
        s.connect(origin.getsockname())
    elif mode == "mptcp-accepted":
        ml = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)
        ml.bind(("127.0.0.1", 0))
        ml.listen(4)
        cl = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)  # MPTCP both ends, or the
        cl.connect(ml.getsockname())  # listener hands out a plain TCP socket
        s, _ = ml.accept()
        ml.close()

        def reset_client():
            go.wait(60)
            time.sleep(0.3)
            cl.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            cl.close()
        threading.Thread(target=reset_client, daemon=True).start()
    elif mode in ("tcp", "tcp-reset"):
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
    elif mode == "unix-dgram":
        s, peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        keep.append(peer)
    elif mode == "udp-connected":
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.connect(("127.0.0.1", sink_port))
    elif mode == "tcp-listen-reuseport":
        twin = socket.socket()
        twin.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        twin.bind(("127.0.0.1", 0))
        twin.listen(4)
        keep.append(twin)
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        s.bind(twin.getsockname())
        s.listen(4)
    elif mode in ("stdout-udp", "high-fds"):
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        keep.append(u)
        if mode == "high-fds":
            lt = socket.socket()
            lt.bind(("127.0.0.1", 0))
            lt.listen(4)
            keep.append(lt)
            # numbers nothing else here holds (7 and 8 could be the sink's
            # or, opened before, stdin's own file, which dup2 would replace)
            os.dup2(u.fileno(), HIGH_FDS[0])
            os.dup2(lt.fileno(), HIGH_FDS[1])
        s = open(os.devnull, "rb")
    elif mode == "scm":
        s, peer = socket.socketpair()
        keep.append(peer)

        def give():
            time.sleep(1.0)  # after sluice looked at stdin
            t = socket.socket()
            peer.sendmsg([b"s"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", t.fileno()))])
            t.close()
        threading.Thread(target=give, daemon=True).start()
    elif mode == "pidfd":
        holder = subprocess.Popen([sys.executable, "-c", "import os, socket, time\n"
                                   "t = socket.socket(); os.dup2(t.fileno(), 3); time.sleep(60)"])
        keep.append(holder)
        time.sleep(0.3)
        fd = os.pidfd_open(holder.pid)
        s = open(fd, "rb", closefd=False)
    argv = [a.replace("SINK", str(sink_port)) for a in argv]
    if mode == "stdout-udp":
        r = subprocess.run(argv, stdin=s, stdout=u.fileno(), stderr=subprocess.PIPE, text=True)
        r.stdout = r.stderr
    elif mode == "high-fds":
        p = subprocess.Popen(argv, stdin=s, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             pass_fds=HIGH_FDS)
        first = p.stdout.readline().strip()  # the command runs (and waits) from here
        # no process of the sandbox (bwrap, its init, the command) holds them
        want = ("socket:[%d]" % os.fstat(u.fileno()).st_ino, "socket:[%d]" % os.fstat(lt.fileno()).st_ino)
        holders = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or int(pid) == os.getpid():
                continue
            try:
                comm = open("/proc/%s/comm" % pid).read().strip()
                for fd in os.listdir("/proc/%s/fd" % pid):
                    if os.readlink("/proc/%s/fd/%s" % (pid, fd)) in want and comm != "sluice":
                        holders.append(comm)
            except OSError:
                pass
        rest = p.communicate()[0]
        r = subprocess.CompletedProcess(argv, p.returncode, (first + " " + rest).strip())
        r.stdout += " holders=%s" % (",".join(holders) or "none")
    elif mode.endswith("-reset") or mode == "mptcp-accepted":
        p = subprocess.Popen(argv, stdin=s.fileno(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True)
        first = p.stdout.readline()
        if first.strip() == "ready":
            first = ""
        go.set()
        rest = p.communicate()[0]
        r = subprocess.CompletedProcess(argv, p.returncode, first + rest)
    else:
        r = subprocess.run(argv, stdin=s.fileno(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
    go.set()
    if r.stdout.startswith("ready\n"):
        r.stdout = r.stdout[len("ready\n"):]
    if mode == "pidfd":
        holder.kill()
    time.sleep(0.2)
    print("%s rc=%d sink=%d" % (r.stdout.strip(), r.returncode, len(hits)))


def inside_fds(sink):
    fds = sorted((int(f) for f in os.listdir("/proc/self/fd")), key=int)[:-1]  # less listdir's own
    print("fds=" + ",".join(map(str, fds)), flush=True)
    time.sleep(2)  # the host looks for its sockets in every process meanwhile


def inside_scm(sink):
    s = socket.socket(fileno=0)
    s.settimeout(10)
    try:
        _, anc, _, _ = s.recvmsg(1, socket.CMSG_SPACE(4))
        fd = struct.unpack("i", anc[0][2][:4])[0]
    except (OSError, IndexError) as e:
        print("scm-recv=%s" % e)
        return
    s.detach()
    t = socket.socket(fileno=fd)
    out = []
    for name, fn in (("connect", lambda: t.connect(("127.0.0.1", sink))),
                     ("fastopen", lambda: t.sendto(b"x", FASTOPEN, ("127.0.0.1", sink)))):
        try:
            fn()
            out.append("%s=ok" % name)
        except OSError as e:
            out.append("%s=%s" % (name, errno.errorcode.get(e.errno, e.errno)))
    print("scm " + " ".join(out))


def inside_swapunix(sink):
    libc = ctypes.CDLL(None, use_errno=True)
    path = b"/nonexistent-sluice-rt1.sock"
    buf = ctypes.create_string_buffer(struct.pack("=H", socket.AF_UNIX) + path + bytes(108 - len(path)), 110)
    fam_unix = ctypes.create_string_buffer(struct.pack("=H", socket.AF_UNIX), 2)
    fam_unspec = ctypes.create_string_buffer(struct.pack("=H", socket.AF_UNSPEC), 2)
    h = socket.socket(fileno=0)
    own = socket.socket(socket.AF_UNIX)
    target = os.dup(own.fileno())
    stop = [False]

    def flip_fd():
        while not stop[0]:
            os.dup2(0, target)
            os.dup2(own.fileno(), target)

    def flip_addr():
        while not stop[0]:
            ctypes.memmove(buf, fam_unspec, 2)
            ctypes.memmove(buf, fam_unix, 2)

    ts = [threading.Thread(target=flip_fd), threading.Thread(target=flip_addr)]
    for t in ts:
        t.start()
    calls = escaped = 0
    for _ in range(20000):
        libc.connect(target, buf, 110)
        calls += 1
        if h.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0] == 7:  # TCP_CLOSE: disconnected
            escaped += 1
            break
    stop[0] = True
    for t in ts:
        t.join()
    res = ""
    if escaped:
        try:
            h.sendto(b"x", FASTOPEN, ("127.0.0.1", sink))
            res = " fastopen=ok"
        except OSError as e:
            res = " fastopen=%s" % errno.errorcode.get(e.errno, e.errno)
    h.detach()
    print("swapunix escaped=%d calls=%d%s" % (escaped, calls, res))


def inside_pidfd(sink):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    fd = libc.syscall(ctypes.c_long(438), ctypes.c_long(0), ctypes.c_long(3), ctypes.c_long(0))
    if fd < 0:
        print("pidfd_getfd=%s" % errno.errorcode.get(ctypes.get_errno(), "?"))
        return
    t = socket.socket(fileno=fd)
    try:
        t.connect(("127.0.0.1", sink))
        print("pidfd_getfd=ok connect=ok")
    except OSError as e:
        print("pidfd_getfd=ok connect=%s" % errno.errorcode.get(e.errno, e.errno))


if sys.argv[1] == "inside":
    inside(int(sys.argv[2]))
elif sys.argv[1].startswith("inside-"):
    globals()["inside_" + sys.argv[1][7:]](int(sys.argv[2]))
else:
    host(sys.argv[2], sys.argv[4:])
