#!/usr/bin/env python3
"""tests/e2e/run-helpers/probe.py - one escape attempt per invocation, run
inside `sluice run` by run_escape.sh. Prints one line:
    BLOCKED <errno name>   the attempt failed (the safe outcome)
    OPEN <detail>          the attempt succeeded (an escape)
    SKIP <why>             cannot be tried here
and exits 0 for BLOCKED, 1 for OPEN, 3 for SKIP.

    probe.py unix                     socket(AF_UNIX, SOCK_STREAM)
    probe.py unix-dgram               socket(AF_UNIX, SOCK_DGRAM)
    probe.py unix-highbit             syscall(socket, 0x100000001, 1, 0)
    probe.py unix-x32                 x32 ABI socket(AF_UNIX) (nr | 0x40000000)
    probe.py unix-i386                int 0x80 socket(AF_UNIX) (i386 nr 359)
    probe.py socketcall-i386          int 0x80 socketcall(SYS_SOCKET, AF_UNIX)
    probe.py pair-dgram-i386          int 0x80 socketpair(AF_UNIX, SOCK_DGRAM) (i386 nr 360)
    probe.py socketcall-pair-i386     int 0x80 socketcall(SYS_SOCKETPAIR, AF_UNIX, SOCK_DGRAM)
    probe.py io_uring                 io_uring_setup(1, &params)
    probe.py io_uring-enter           io_uring_enter(-1, ...)  (EPERM, not EBADF)
    probe.py io_uring-x32             io_uring_setup on the x32 ABI
    probe.py newuser                  unshare(CLONE_NEWUSER)
    probe.py newuser-clone            clone(CLONE_NEWUSER|SIGCHLD) (child exits at once)
    probe.py clone3                   clone3(NULL, 0): ENOSYS when filtered, EINVAL when not
    probe.py ptrace-init              PTRACE_ATTACH to pid 1 (bwrap, not under seccomp)
    probe.py mem-init                 open /proc/1/mem for writing
    probe.py raw                      socket(AF_INET, SOCK_RAW, ICMP)
    probe.py packet                   socket(AF_PACKET, SOCK_RAW)
    probe.py tcp HOST PORT            TCP connect
    probe.py udp-dns HOST PORT        a DNS query over UDP, waits 2 s for an answer
    probe.py abstract NAME            connect to the abstract unix socket \\0NAME
    probe.py unixpath PATH            connect to a unix socket file
    probe.py tiocsti FD               ioctl(FD, TIOCSTI, "x")
    probe.py tiocsti-high FD          the same with the command's upper 32 bits set
    probe.py tioclinux FD             ioctl(FD, TIOCLINUX, subcode 2)
    probe.py mount                    mount a tmpfs on the working directory
    probe.py pair-dgram PATH          socketpair(AF_UNIX, SOCK_DGRAM), then sendto(PATH)
                                      (issue 21: a host datagram socket, /dev/log-like)
    probe.py pair-routes DIR ABSNAME  socketpairs of every type (stream, dgram, seqpacket,
                                      raw), with SOCK_NONBLOCK|SOCK_CLOEXEC and with high
                                      bits in domain and type, each end tried on every
                                      route to DIR/hostd.sock (datagram), DIR/hosts.sock
                                      (stream), DIR/hostq.sock (seqpacket) and the
                                      abstract datagram socket \\0ABSNAME: sendto and
                                      sendmsg with the address, connect (then send), the
                                      same after connect(AF_UNSPEC), bind then listen.
                                      OPEN when a datagram pair was made or an address
                                      was reached (a seqpacket send lands on the peer:
                                      checked)
    probe.py pair-bind NAME           a pair of each type the filter lets through,
                                      connect(AF_UNSPEC), bound to ./NAME-s, -q or -d
                                      (short: under the bind rule); waits
                                      3 s for anything the host's sender
                                      (run_escape.sh) gets through to it
    probe.py inner SLUICE             run `SLUICE inner` over a socketpair of our own
                                      (--allow-unix-sockets, ports 0) and, in the
                                      command it execs, try socket(AF_UNIX)
    probe.py inner-exe SLUICE_INNER   the same with sluice-inner (issue 25)
"""
import ctypes, errno, mmap, os, signal, socket, struct, sys

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
AF_UNIX = 1


def blocked(e):
    print("BLOCKED " + (errno.errorcode.get(e, str(e)) if isinstance(e, int) else str(e)))
    sys.exit(0)


def opened(detail):
    print("OPEN " + detail)
    sys.exit(1)


def skip(why):
    print("SKIP " + why)
    sys.exit(3)


def sysc(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    return r, ctypes.get_errno()


def expect_fail(nr, *args, what=""):
    r, e = sysc(nr, *args)
    if r < 0:
        blocked(e)
    if what.startswith("fd"):
        os.close(r)
    opened("%s returned %d" % (what or nr, r))


def int80(nr, a=0, b=0, c=0, d=0):
    """Runs `int 0x80` (the i386 ABI) from this 64-bit process with eax=nr,
    ebx=a, ecx=b, edx=c, esi=d and returns eax, sign-extended."""
    code = bytes([0x53])                                   # push rbx
    code += b"\xb8" + struct.pack("<I", nr & 0xffffffff)   # mov eax, nr
    code += b"\xbb" + struct.pack("<I", a & 0xffffffff)    # mov ebx, a
    code += b"\xb9" + struct.pack("<I", b & 0xffffffff)    # mov ecx, b
    code += b"\xba" + struct.pack("<I", c & 0xffffffff)    # mov edx, c
    code += b"\xbe" + struct.pack("<I", d & 0xffffffff)    # mov esi, d (caller-saved)
    code += b"\xcd\x80"                                    # int 0x80
    code += b"\x48\x63\xc0"                                # movsxd rax, eax
    code += b"\x5b\xc3"                                    # pop rbx; ret
    m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    m.write(code)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
    f = ctypes.CFUNCTYPE(ctypes.c_long)(addr)
    return f()


def int80_safe(nr, a=0, b=0, c=0, d=0):
    """int80 in a forked child, so that a kernel without IA32 emulation (or
    booted with ia32_emulation=0), which answers `int 0x80` with SIGSEGV,
    makes the case a SKIP (the i386 ABI is closed there anyway) rather than
    a crash; SIGSYS (a seccomp kill) is BLOCKED."""
    rd, wr = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(rd)
        try:
            r = int80(nr, a, b, c, d)
            os.write(wr, struct.pack("<q", r))
        finally:
            os._exit(0)
    os.close(wr)
    data = os.read(rd, 8)
    os.close(rd)
    _, st = os.waitpid(pid, 0)
    if os.WIFSIGNALED(st):
        sig = os.WTERMSIG(st)
        if sig == signal.SIGSEGV:
            skip("the kernel has no IA32 emulation (int 0x80 raised SIGSEGV)")
        if sig == signal.SIGSYS:
            blocked(errno.ENOSYS)
        opened("int 0x80 child killed by signal %d" % sig)
    if len(data) != 8:
        skip("int 0x80 child returned nothing")
    return struct.unpack("<q", data)[0]


def low32_buffer(data):
    """A buffer below 4 GiB (i386 syscalls see 32-bit pointers)."""
    MAP_32BIT = 0x40
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    p = libc.mmap(None, 4096, 3, 0x22 | MAP_32BIT, -1, 0)
    if p is None or p == ctypes.c_void_p(-1).value:
        skip("no low mapping")
    ctypes.memmove(p, data, len(data))
    return p


def main():
    a = sys.argv[1:]
    what = a[0]
    if what in ("unix", "unix-dgram"):
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM if what == "unix" else socket.SOCK_DGRAM)
        except OSError as e:
            blocked(e.errno)
        opened("socket(AF_UNIX) = fd %d" % s.fileno())
    if what == "unix-highbit":
        expect_fail(41, 0x100000001, 1, 0, what="fd socket(0x100000001)")
    if what == "unix-x32":
        r, e = sysc(0x40000000 + 41, AF_UNIX, 1, 0)
        if r < 0:
            blocked(e)
        opened("x32 socket(AF_UNIX) = %d" % r)
    if what == "io_uring-x32":
        params = ctypes.create_string_buffer(120)
        r, e = sysc(0x40000000 + 425, 1, ctypes.addressof(params))
        if r < 0:
            blocked(e)
        opened("x32 io_uring_setup = %d" % r)
    if what == "unix-i386":
        try:
            r = int80_safe(359, AF_UNIX, 1, 0)
        except Exception as ex:
            skip("int 0x80: %s" % ex)
        if r < 0:
            blocked(-r)
        opened("i386 socket(AF_UNIX) = %d" % r)
    if what == "socketcall-i386":
        args = low32_buffer(struct.pack("<III", AF_UNIX, 1, 0))
        r = int80_safe(102, 1, args, 0)  # SYS_SOCKET
        if r < 0:
            blocked(-r)
        opened("i386 socketcall(SYS_SOCKET, AF_UNIX) = %d" % r)
    if what in ("pair-dgram-i386", "socketcall-pair-i386"):
        # issue 21: socketpair(AF_UNIX, SOCK_DGRAM) on the i386 ABI, the
        # direct syscall (nr 360) or socketcall(SYS_SOCKETPAIR)
        buf = low32_buffer(b"\0" * 64)
        ctypes.memmove(buf, struct.pack("<IIII", AF_UNIX, 2, 0, buf + 32), 16)
        if what == "pair-dgram-i386":
            r = int80_safe(360, AF_UNIX, 2, 0, buf + 32)
        else:
            r = int80_safe(102, 8, buf, 0)  # SYS_SOCKETPAIR
        if r < 0:
            blocked(-r)
        opened("i386 %s made a datagram pair" % what)
    if what == "io_uring":
        params = ctypes.create_string_buffer(120)
        expect_fail(425, 1, ctypes.addressof(params), what="fd io_uring_setup")
    if what == "io_uring-enter":
        r, e = sysc(426, 1000, 0, 0, 0, 0, 0)
        if r < 0 and e == errno.EPERM:
            blocked(e)
        opened("io_uring_enter reached the kernel: %s" % errno.errorcode.get(e, e))
    if what == "newuser":
        r = libc.unshare(0x10000000)
        if r < 0:
            blocked(ctypes.get_errno())
        opened("unshare(CLONE_NEWUSER) succeeded")
    if what == "newuser-clone":
        r, e = sysc(56, 0x10000000 | 17, 0, 0, 0, 0)  # clone(CLONE_NEWUSER|SIGCHLD)
        if r == 0:
            os._exit(0)
        if r < 0:
            blocked(e)
        os.waitpid(r, 0)
        opened("clone(CLONE_NEWUSER) made pid %d" % r)
    if what == "clone3":
        r, e = sysc(435, 0, 0)
        if r < 0 and e == errno.ENOSYS:
            blocked(e)
        opened("clone3 reached the kernel: %s" % errno.errorcode.get(e, e))
    if what == "ptrace-init":
        libc.ptrace.restype = ctypes.c_long
        r = libc.ptrace(16, 1, 0, 0)  # PTRACE_ATTACH
        if r < 0:
            blocked(ctypes.get_errno())
        libc.ptrace(17, 1, 0, 0)  # PTRACE_DETACH
        opened("PTRACE_ATTACH to pid 1 succeeded")
    if what == "mem-init":
        try:
            fd = os.open("/proc/1/mem", os.O_RDWR)
        except OSError as e:
            blocked(e.errno)
        os.close(fd)
        opened("/proc/1/mem opened read-write")
    if what == "raw":
        try:
            s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
        except OSError as e:
            blocked(e.errno)
        try:
            s.sendto(b"\x08\x00\xf7\xff\x00\x00\x00\x00", ("127.0.0.1", 0))
        except OSError as e:
            blocked(e.errno)
        opened("raw ICMP socket")
    if what == "packet":
        try:
            socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
        except OSError as e:
            blocked(e.errno)
        opened("AF_PACKET socket")
    if what == "tcp":
        fam = socket.AF_INET6 if ":" in a[1] else socket.AF_INET
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.settimeout(3)
        try:
            s.connect((a[1], int(a[2])))
        except (OSError, socket.timeout) as e:
            blocked(getattr(e, "errno", None) or "timeout")
        opened("connected to %s:%s" % (a[1], a[2]))
    if what == "udp-dns":
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(2)
        q = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0) + b"\x05probe\x04test\x00" + struct.pack(">HH", 1, 1)
        try:
            s.sendto(q, (a[1], int(a[2])))
            d = s.recv(512)
        except (OSError, socket.timeout) as e:
            blocked(getattr(e, "errno", None) or "timeout")
        opened("DNS answer of %d bytes" % len(d))
    if what in ("abstract", "unixpath"):
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        except OSError as e:
            blocked(e.errno)
        try:
            s.connect(("\0" + a[1]) if what == "abstract" else a[1])
        except OSError as e:
            blocked(e.errno)
        opened("connected to unix socket %s" % a[1])
    if what in ("tiocsti", "tiocsti-high", "tioclinux"):
        fd = int(a[1])
        if not os.isatty(fd):
            skip("fd %d is not a terminal" % fd)
        if what == "tioclinux":
            c = ctypes.c_char(2)
            r = libc.ioctl(fd, ctypes.c_ulong(0x541C), ctypes.byref(c))
        else:
            cmd = 0x5412 | (0x100000000 if what == "tiocsti-high" else 0)
            c = ctypes.c_char(b"#")
            r = libc.ioctl(fd, ctypes.c_ulong(cmd), ctypes.byref(c))
        e = ctypes.get_errno()
        if r < 0 and e == errno.EPERM:
            blocked(e)
        if r < 0:
            opened("%s reached the kernel (%s): not filtered" % (what, errno.errorcode.get(e, e)))
        opened("%s injected a character" % what)
    if what == "mount":
        libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_void_p]
        r = libc.mount(b"none", os.getcwd().encode(), b"tmpfs", 0, None)
        if r < 0:
            blocked(ctypes.get_errno())
        opened("mounted a tmpfs")
    if what in ("inner", "inner-exe"):
        # inner-exe: sluice-inner (issue 25), the same program without
        # the subcommand's name
        sub = ["inner"] if what == "inner" else []
        a_, b_ = socket.socketpair()
        pid = os.fork()
        if pid == 0:
            a_.close()
            os.dup2(b_.fileno(), 9)
            os.set_inheritable(9, True)
            os.execv(a[1], [a[1]] + sub + ["--fd", "9", "--allow-unix-sockets", "--http-port", "0",
                            "--socks-port", "0", "--", sys.executable, os.path.abspath(__file__), "unix"])
        b_.close()
        try:
            msg, anc, flags, addr = a_.recvmsg(16, socket.CMSG_SPACE(4 * 4))
        except OSError as e:
            msg = b""
        for lvl, typ, data in anc if msg else []:
            pass
        if msg:
            a_.send(b"G")
        a_.close()
        _, st = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(st)
        if not msg and code == 125:
            # inner could not even make its listeners (bind refused: the
            # sandbox's filter without network.allowLocalBinding): the
            # command never ran
            print("BLOCKED inner could not start (bind refused)")
            sys.exit(0)
        # the child printed its own verdict (BLOCKED/OPEN) when it got to run
        sys.exit(1 if code == 1 else 0)
    if what == "pair-dgram":
        try:
            x, y = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        except OSError as e:
            blocked(e.errno)
        try:
            x.sendto(b"ESCAPED pair-dgram", a[1])
        except OSError as e:
            blocked(e.errno)
        opened("a datagram reached %s" % a[1])
    if what == "pair-routes":
        pair_routes(a[1], a[2])
    if what == "pair-bind":
        pair_bind(a[1])
    skip("unknown probe " + what)


def raw_socketpair(domain, typ):
    sv = (ctypes.c_int * 2)()
    r = libc.syscall(ctypes.c_long(53), ctypes.c_long(domain), ctypes.c_long(typ), ctypes.c_long(0), sv)
    if r < 0:
        return None, ctypes.get_errno()
    return (socket.socket(fileno=sv[0]), socket.socket(fileno=sv[1])), 0


def pair_routes(d, absname):
    TYPES = {"stream": 1, "dgram": 2, "raw": 3, "seqpacket": 5}
    paths = [os.path.join(d, n) for n in ("hostd.sock", "hosts.sock", "hostq.sock")] + ["\0" + absname]
    reached, refused, made = [], [], []
    for tname, t in TYPES.items():
        for extra, dom in ((0, 1), (0o4000 | 0o2000000, 1), (0x100000000 | 0o2000000, 0x100000001)):
            label = "%s/%#x/%#x" % (tname, extra, dom)
            pair, e = raw_socketpair(dom, t | extra)
            if pair is None:
                refused.append("%s:%s" % (label, errno.errorcode.get(e, e)))
                continue
            made.append(label)
            if t in (2, 3):
                reached.append("%s: a datagram pair was made" % label)
            for me, peer in (pair, pair[::-1]):
                me.setblocking(False)
                peer.setblocking(False)
                for rnd in range(2):
                    for p in paths:
                        for how in ("sendto", "sendmsg", "connect"):
                            try:
                                if how == "sendto":
                                    me.sendto(b"ESCAPED " + how.encode(), p)
                                elif how == "sendmsg":
                                    me.sendmsg([b"ESCAPED " + how.encode()], [], 0, p)
                                else:
                                    me.connect(p)
                                    me.send(b"ESCAPED connect")
                            except OSError:
                                continue
                            # it went somewhere: fine only if it went to the peer
                            try:
                                peer.recv(64)
                            except OSError:
                                reached.append("%s: %s %s" % (label, how, p.replace("\0", "@")))
                    # disconnect, then the same again
                    libc.connect(me.fileno(), ctypes.create_string_buffer(b"\0\0", 16), 16)
                try:
                    me.bind("pr")
                    try:
                        me.listen(1)
                        reached.append("%s: listen after bind" % label)
                    except OSError:
                        pass
                except OSError:
                    pass
                finally:
                    try:
                        os.unlink("pr")
                    except OSError:
                        pass
            pair[0].close()
            pair[1].close()
    if reached:
        seen = []
        for r in reached:
            if r not in seen:
                seen.append(r)
        opened("; ".join(seen[:6]) + ("; ... (%d in all)" % len(seen) if len(seen) > 6 else ""))
    print("BLOCKED made %s; refused %s" % (",".join(sorted(set(m.split("/")[0] for m in made))) or "none",
                                          ",".join(sorted(set(r.split("/")[0] for r in refused))) or "none"))
    sys.exit(0)


def pair_bind(name):
    import select, time
    socks = []
    for tname, t, suffix in (("stream", 1, "s"), ("seqpacket", 5, "q"), ("dgram", 2, "d")):
        try:
            x, y = socket.socketpair(socket.AF_UNIX, t)
        except OSError:
            continue
        # disconnected first (a datagram pair then takes any sender), and
        # a short name: a path of 14 bytes or more is under the bind rule
        libc.connect(x.fileno(), ctypes.create_string_buffer(b"\0\0", 16), 16)
        path = "%s-%s" % (name, suffix)
        try:
            x.bind(path)
        except OSError as e:
            opened("bind(%s) of a %s pair failed (%s): the case cannot try this route"
                   % (path, tname, errno.errorcode.get(e.errno, e.errno)))
        try:
            x.listen(1)
        except OSError:
            pass
        socks.append((tname, x, y, path))
    if not socks:
        blocked("no pair could be bound")
    got = []
    end = time.monotonic() + 3
    while time.monotonic() < end and not got:
        r, _, _ = select.select([s[1] for s in socks], [], [], 0.2)
        for tname, x, y, path in socks:
            if x in r:
                try:
                    got.append("%s: %r" % (tname, x.recv(64)))
                except OSError:
                    pass
    for tname, x, y, path in socks:
        os.unlink(path)
    if got:
        opened("the host reached a bound pair: " + "; ".join(got))
    blocked("nothing arrived on %s" % ",".join(s[0] for s in socks))


if __name__ == "__main__":
    main()
