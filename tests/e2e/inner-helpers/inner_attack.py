#!/usr/bin/env python3
"""tests/e2e/inner-helpers/inner_attack.py - runs INSIDE `sluice run`
(tests/e2e/inner_attack.sh, rt-16): a hostile command against sluice-inner,
the port-53 bind refusal of transparent mode, and other runs.
"ok TEXT" / "bad TEXT" for what the command itself can see, "note TEXT"
for facts reported, not judged, other lines for the script outside.

usage: inner_attack.py MODE [ARGS]
  first              the sandbox's first program (bwrap's argv after --)
  tamper INNER       write, chmod, remove, rename sluice-inner, its
                     directory and its parents; ptrace the first process
  plant DIR          put a program at DIR/sluice-inner (absent, a link, a
                     group-writable file): the next run must not start it
  reexec INNER       run sluice-inner again inside, asking for AF_UNIX
  syscalls           what the seccomp filter answers, one line per call
  fds                the descriptors and environment the command got
  bind53 LOCAL       bind() port 53 every way (LOCAL: allowLocalBinding)
  par N DIR          one of several parallel runs (see the script)
"""
import ctypes
import errno
import os
import socket
import struct
import subprocess
import sys
import threading
import time

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


def ok(m):
    print("ok", m, flush=True)


def bad(m, detail=""):
    print("bad", m + (": " + str(detail) if detail != "" else ""), flush=True)


def note(m):
    print("note", m, flush=True)


def check(cond, m, detail=""):
    if cond:
        ok(m)
    else:
        bad(m, detail)


def en(e):
    return errno.errorcode.get(e, str(e))


def first():
    argv = open("/proc/1/cmdline", "rb").read().split(b"\0")
    try:
        i = argv.index(b"--")
        print("first", argv[i + 1].decode(), argv[i + 2].decode(), flush=True)
    except (ValueError, IndexError):
        print("first ?", flush=True)


# ---- sluice-inner ---------------------------------------------------------------


def attempt(label, fn):
    try:
        fn()
        return "done"
    except OSError as e:
        return "refused " + en(e.errno)


def tamper(inner):
    d = os.path.dirname(inner)
    up = os.path.dirname(d)

    def write():
        with open(inner, "r+b") as f:
            f.write(b"\x7fELF-evil")

    def write_via_proc():
        fd = os.open(inner, os.O_PATH)
        try:
            with open("/proc/self/fd/%d" % fd, "r+b") as f:
                f.write(b"evil")
        finally:
            os.close(fd)

    def rename_over():
        evil = os.path.join(d, ".evil")
        try:
            with open(evil, "wb") as f:
                f.write(b"#!/bin/sh\nexit 3\n")
            os.rename(evil, inner)
        finally:
            try:
                os.unlink(evil)
            except OSError:
                pass

    def trunc():
        os.truncate(inner, 0)

    cases = [
        ("write", write), ("write through /proc/self/fd of an O_PATH", write_via_proc),
        ("truncate", trunc), ("chmod 0777", lambda: os.chmod(inner, 0o777)),
        ("unlink", lambda: os.unlink(inner)), ("rename", lambda: os.rename(inner, inner + ".old")),
        ("rename a file over it", rename_over),
        ("rename its directory", lambda: os.rename(d, d + ".old")),
        ("rename the directory above", lambda: os.rename(up, up + ".old")),
        ("utime", lambda: os.utime(inner, (0, 0))),
    ]
    for label, fn in cases:
        r = attempt(label, fn)
        check(r.startswith("refused"), "sluice-inner %s: %s" % (label, r), r)
    # the first process is inner's exec'd command (us, or our parent shell):
    # nothing of sluice-inner runs to ptrace; PTRACE_ATTACH to pid 1 (bwrap)
    PTRACE_ATTACH = 16
    r = libc.ptrace(PTRACE_ATTACH, 1, None, None)
    e = ctypes.get_errno()
    check(r != 0, "ptrace(PTRACE_ATTACH) of the sandbox's pid 1 (bwrap): %s" % ("attached" if r == 0 else en(e)))
    # its memory
    r = attempt("mem", lambda: open("/proc/1/mem", "r+b").close())
    check(r.startswith("refused"), "open /proc/1/mem for writing: %s" % r, r)


PLANT = b"#!/bin/sh\necho planted > \"$(dirname \"$0\")/../PLANTED\" 2>/dev/null\nexit 3\n"


def plant(d):
    spot = os.path.join(d, "sluice-inner")
    results = []
    # absent, a link or a group-writable file: each way to end with an
    # executable file of ours there

    def replace():
        if os.path.islink(spot) or os.path.isfile(spot):
            os.unlink(spot)
        elif os.path.isdir(spot):
            os.rmdir(spot)
        with open(spot, "wb") as f:
            f.write(PLANT)
        os.chmod(spot, 0o755)

    def in_place():
        with open(spot, "wb") as f:
            f.write(PLANT)
        os.chmod(spot, 0o755)

    def via_rename():
        tmp = os.path.join(d, ".si.tmp")
        with open(tmp, "wb") as f:
            f.write(PLANT)
        os.chmod(tmp, 0o755)
        os.rename(tmp, spot)

    def via_dir_swap():
        os.rename(d, d + ".old")
        os.mkdir(d)

    for label, fn in (("write in place", in_place), ("remove and create", replace),
                      ("rename over", via_rename), ("swap the directory", via_dir_swap)):
        r = attempt(label, fn)
        results.append(r)
        check(r.startswith("refused"), "plant sluice-inner beside sluice (%s): %s" % (label, r), r)
    for tmp in (os.path.join(d, ".si.tmp"),):
        try:
            os.unlink(tmp)
        except OSError:
            pass


def reexec(inner):
    a, b = socket.socketpair()
    code = ("import socket\n"
            "try:\n socket.socket(socket.AF_UNIX); print('UNIX-SOCKET')\n"
            "except OSError as e: print('refused', e.errno)\n")
    try:
        p = subprocess.run([inner, "--fd", str(b.fileno()), "--allow-unix-sockets", "--allow-local-binding",
                            "--", sys.executable, "-c", code], pass_fds=(b.fileno(),),
                           capture_output=True, timeout=30)
        out = (p.stdout + p.stderr).decode(errors="replace")
    except OSError as e:
        out = "cannot run: %s" % e
    check("UNIX-SOCKET" not in out,
          "sluice-inner run again with --allow-unix-sockets: no AF_UNIX socket (%s)" % out.strip()[-120:], out)
    try:
        socket.socket(socket.AF_UNIX)
        bad("AF_UNIX socket allowed in the sandbox after the re-exec")
    except OSError:
        ok("AF_UNIX still refused after the re-exec")


# ---- the filter ---------------------------------------------------------------------

NR = {"io_uring_setup": 425, "unshare": 272, "keyctl": 250, "add_key": 248, "bind": 49,
      "listen": 50, "socket": 41, "ptrace": 101, "personality": 135, "mount": 165,
      "setns": 308, "userfaultfd": 323, "perf_event_open": 298, "bpf": 321, "ioctl": 16,
      "kexec_load": 246, "init_module": 175, "open_by_handle_at": 304, "process_vm_writev": 311,
      "pidfd_getfd": 438, "memfd_secret": 447, "quotactl": 179, "swapon": 167, "acct": 163,
      "reboot": 169, "chroot": 161, "pivot_root": 155, "umount2": 166, "fsopen": 430,
      "move_mount": 429, "open_tree": 428, "clone3": 435, "seccomp": 317}


def sc(name, *args):
    cargs = [ctypes.c_long(a) if isinstance(a, int) else a for a in args]
    r = libc.syscall(ctypes.c_long(NR[name]), *cargs)
    e = ctypes.get_errno()
    if r >= 0 and name in ("socket", "io_uring_setup", "userfaultfd", "perf_event_open", "bpf", "fsopen",
                           "memfd_secret"):
        os.close(r)
    return "0" if r >= 0 else en(e)


def syscalls():
    buf = ctypes.create_string_buffer(256)
    sin = struct.pack("=HH4s8s", socket.AF_INET, 0, b"\0" * 4, b"\0" * 8)
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    rows = [
        ("socket AF_UNIX", sc("socket", 1, 1, 0)),
        ("socket AF_UNIX|hi bits", sc("socket", 1 | (1 << 32), 1, 0)),
        ("socket AF_INET", sc("socket", 2, 1, 0)),
        ("socket AF_INET6", sc("socket", 10, 2, 0)),
        ("socket AF_NETLINK ROUTE", sc("socket", 16, 3, 0)),
        ("socket AF_NETLINK AUDIT", sc("socket", 16, 3, 9)),
        ("socket AF_PACKET", sc("socket", 17, 3, 0)),
        ("socket AF_VSOCK", sc("socket", 40, 1, 0)),
        ("socket AF_ALG", sc("socket", 38, 5, 0)),
        ("socket AF_KEY", sc("socket", 15, 3, 2)),
        ("socket AF_BLUETOOTH", sc("socket", 31, 1, 0)),
        ("io_uring_setup", sc("io_uring_setup", 1, buf)),
        ("unshare NEWUSER", sc("unshare", 0x10000000)),
        ("unshare NEWNET", sc("unshare", 0x40000000)),
        ("keyctl", sc("keyctl", 0, -3, 0)),
        ("add_key", sc("add_key", ctypes.c_char_p(b"user"), ctypes.c_char_p(b"x"), None, 0, -3)),
        ("bind AF_INET len16", sc("bind", s.fileno(), ctypes.c_char_p(sin), 16)),
        ("listen", sc("listen", s.fileno(), 1)),
        ("ioctl TIOCSTI", sc("ioctl", 0, 0x5412, buf)),
        ("ioctl TIOCLINUX", sc("ioctl", 0, 0x541C, buf)),
        ("personality READ_IMPLIES_EXEC", sc("personality", 0x0400000)),
        ("mount", sc("mount", None, None, None, 0, None)),
        ("setns", sc("setns", -1, 0)),
        ("userfaultfd", sc("userfaultfd", 0)),
        ("perf_event_open", sc("perf_event_open", None, 0, -1, -1, 0)),
        ("bpf", sc("bpf", 0, None, 0)),
        ("ptrace TRACEME", "n/a"),
        ("kexec_load", sc("kexec_load", 0, 0, None, 0)),
        ("open_by_handle_at", sc("open_by_handle_at", -1, None, 0)),
        ("process_vm_writev", sc("process_vm_writev", 0, None, 0, None, 0, 0)),
        ("fsopen", sc("fsopen", ctypes.c_char_p(b"tmpfs"), 0)),
        ("open_tree", sc("open_tree", -100, ctypes.c_char_p(b"/"), 0)),
        ("move_mount", sc("move_mount", -1, None, -1, None, 0)),
        ("chroot", sc("chroot", ctypes.c_char_p(b"/"))),
        ("seccomp GET_ACTION_AVAIL", sc("seccomp", 2, 0, buf)),
    ]
    s.close()
    st = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line)
    rows.append(("NoNewPrivs", st["NoNewPrivs"].strip()))
    rows.append(("Seccomp", st["Seccomp"].strip()))
    rows.append(("Seccomp_filters", st.get("Seccomp_filters", "?").strip()))
    rows.append(("CapEff", st["CapEff"].strip()))
    for name, r in rows:
        print("sys %s = %s" % (name, r), flush=True)
    ok("the filter table printed (%d rows)" % len(rows))


def fds():
    fl = sorted(int(x) for x in os.listdir("/proc/self/fd"))
    print("fds", " ".join(str(x) for x in fl), flush=True)
    print("env", " ".join(sorted(k for k in os.environ if "SLUICE" in k.upper() or k.startswith("RT16"))),
          flush=True)
    ok("descriptors and environment listed")


# ---- port 53 --------------------------------------------------------------------

SOL_SOCKET, SO_REUSEADDR, SO_REUSEPORT, SO_BINDTODEVICE = 1, 2, 15, 25


def sa4(fam, addr, port, n=16):
    return (struct.pack("=H", fam) + struct.pack(">H", port) + socket.inet_aton(addr) + b"\0" * 8)[:n]


def sa6(addr, port, n=28):
    return (struct.pack("=H", socket.AF_INET6) + struct.pack(">H", port) + b"\0" * 4 +
            socket.inet_pton(socket.AF_INET6, addr) + b"\0" * 4)[:n]


def query(name=b"rt16.test"):
    q = struct.pack(">HHHHHH", 0x5353, 0x0100, 1, 0, 0, 0)
    for label in name.split(b"."):
        q += bytes([len(label)]) + label
    return q + b"\0\0\1\0\1"


def raw_bind(fd, raw):
    buf = ctypes.create_string_buffer(raw, len(raw))
    r = libc.bind(fd, buf, len(raw))
    return 0 if r == 0 else ctypes.get_errno()


def steals(s, to):
    """Whether socket S, bound, gets a query sent to TO:53."""
    c = socket.socket(socket.AF_INET6 if ":" in to else socket.AF_INET, socket.SOCK_DGRAM)
    try:
        c.sendto(query(), (to, 53))
    except OSError:
        c.close()
        return False
    s.settimeout(1.0)
    try:
        s.recvfrom(4096)
        return True
    except OSError:
        return False
    finally:
        c.close()


def bind53(local):
    v6targets = {"::": "::1", "::1": "::1", "::ffff:127.0.0.1": "127.0.0.1", "::ffff:0.0.0.0": "10.77.0.2"}
    cases = []
    for typ, tn in ((socket.SOCK_DGRAM, "udp"), (socket.SOCK_STREAM, "tcp")):
        for addr in ("0.0.0.0", "127.0.0.1", "127.0.0.53", "10.77.0.1"):
            for n in (16, 20, 128):
                cases.append(("%s AF_INET %s:53 len %d" % (tn, addr, n), socket.AF_INET, typ,
                              sa4(socket.AF_INET, addr, 53, n) + b"\0" * max(0, n - 16), "127.0.0.1"))
        for n in (16, 28):
            cases.append(("%s AF_INET socket, AF_UNSPEC 0.0.0.0:53 len %d" % (tn, n), socket.AF_INET, typ,
                          sa4(socket.AF_UNSPEC, "0.0.0.0", 53, 16) + b"\0" * (n - 16), "10.77.0.2"))
        for addr, to in v6targets.items():
            for n in (24, 26, 27, 28, 64):
                cases.append(("%s AF_INET6 [%s]:53 len %d" % (tn, addr, n), socket.AF_INET6, typ,
                              sa6(addr, 53, min(n, 28)) + b"\0" * max(0, n - 28), to))
        cases.append(("%s AF_INET6 socket, AF_INET 0.0.0.0:53" % tn, socket.AF_INET6, typ,
                      sa4(socket.AF_INET, "0.0.0.0", 53, 28), "10.77.0.2"))
    got = []
    for label, fam, typ, raw, to in cases:
        for opts in ("reuseaddr", "reuseport", "bindtodevice", "v6only0"):
            if opts == "v6only0" and fam != socket.AF_INET6:
                continue
            s = socket.socket(fam, typ)
            try:
                s.setsockopt(SOL_SOCKET, SO_REUSEADDR, 1)
                if opts == "reuseport":
                    s.setsockopt(SOL_SOCKET, SO_REUSEPORT, 1)
                if opts == "bindtodevice":
                    try:
                        s.setsockopt(SOL_SOCKET, SO_BINDTODEVICE, b"lo")
                    except OSError:
                        pass
                if opts == "v6only0":
                    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
                e = raw_bind(s.fileno(), raw)
                if e == 0:
                    port = s.getsockname()[1]
                    stolen = typ == socket.SOCK_DGRAM and port == 53 and steals(s, to)
                    r = "bound %s%s" % (s.getsockname(), ", took a query sent to %s:53" % to if stolen else "")
                else:
                    r = "refused " + en(e)
            finally:
                s.close()
            got.append((label + " " + opts, r))
    nbound = 0
    for label, r in got:
        bound53 = r.startswith("bound") and ", 53" in r
        nbound += bound53
        if not local:
            check(r == "refused EPERM", "(no allowLocalBinding) bind %s: %s" % (label, r), r)
        else:
            check(not bound53, "bind %s: %s" % (label, r), r)
    if local:
        check(nbound == 0, "no socket of the command bound port 53 (%d cases)" % len(got))
        bind53_more()
    # sluice's resolver still answers, and to us
    try:
        a = socket.getaddrinfo("rt16.test", 80, socket.AF_INET)[0][4][0]
        ok("sluice's resolver still answers rt16.test (%s)" % a)
    except OSError as e:
        bad("rt16.test does not resolve after the binds", e)


def bind53_more():
    # 1. a port flipped between 53 and 5353 by another thread while bind()
    # runs: the host must bind the address it judged (a copy), never 53
    raw = ctypes.create_string_buffer(sa4(socket.AF_INET, "127.0.0.1", 5353), 16)
    stop = threading.Event()

    def flip():
        p53, p5353 = struct.pack(">H", 53), struct.pack(">H", 5353)
        while not stop.is_set():
            ctypes.memmove(ctypes.addressof(raw) + 2, p53, 2)
            ctypes.memmove(ctypes.addressof(raw) + 2, p5353, 2)

    th = threading.Thread(target=flip)
    th.start()
    hits = tries = bound = 0
    t0 = time.monotonic()
    while tries < 3000 and time.monotonic() - t0 < 15:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(SOL_SOCKET, SO_REUSEADDR, 1)
        if libc.bind(s.fileno(), raw, 16) == 0:
            bound += 1
            hits += s.getsockname()[1] == 53
        tries += 1
        s.close()
    stop.set()
    th.join()
    check(hits == 0, "bind with the port flipped 53<->5353 by another thread: %d of %d binds took 53 (%d bound 5353)"
          % (hits, tries, bound))
    # 2. auto-bind: sendto, connect and listen on unbound sockets take an
    # ephemeral port, never 53
    ports = []
    for _ in range(50):
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        u.sendto(b"x", ("127.0.0.1", 9))
        ports.append(u.getsockname()[1])
        u.close()
        u = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        u.connect(("::1", 9))
        ports.append(u.getsockname()[1])
        u.close()
    t = socket.socket()
    t.listen(1)
    ports.append(t.getsockname()[1])
    t.close()
    check(53 not in ports, "sendto/connect/listen auto-bind: never port 53 (%d ports, lowest %d)" % (len(ports), min(ports)))
    r = attempt("range", lambda: open("/proc/sys/net/ipv4/ip_local_port_range", "w").write("53 53\n"))
    check(r.startswith("refused"), "ip_local_port_range (to make auto-bind pick 53): %s" % r, r)
    # 3. a socket made by a child and passed in (SCM_RIGHTS), then bound
    a, b = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        socket.send_fds(b, [b"s"], [s.fileno()])
        os._exit(0)
    _, fdl, _, _ = socket.recv_fds(a, 10, 1)
    os.waitpid(pid, 0)
    s = socket.socket(fileno=fdl[0])
    s.setsockopt(SOL_SOCKET, SO_REUSEADDR, 1)
    e = raw_bind(s.fileno(), sa4(socket.AF_UNSPEC, "0.0.0.0", 53))
    check(e != 0, "a socket passed in over SCM_RIGHTS, bound AF_UNSPEC 0.0.0.0:53: %s" % ("bound" if e == 0 else en(e)))
    s.close()
    # socketpair sockets: AF_UNIX, no port to take (and no AF_UNIX pair
    # without allowAllUnixSockets)
    e = raw_bind(a.fileno(), struct.pack("=H", socket.AF_UNIX) + b"\0rt16-53")
    note("bind an abstract name on a socketpair socket: %s" % ("bound" if e == 0 else en(e)))
    a.close()
    b.close()
    # 4. io_uring (IORING_OP_BIND on Linux 6.11+) and raw sockets (sniffing)
    r = sc("io_uring_setup", 4, ctypes.create_string_buffer(256))
    check(r != "0", "io_uring_setup: %s" % r, r)
    for proto in (socket.IPPROTO_UDP, socket.IPPROTO_RAW):
        r = attempt("raw", lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, proto).close())
        check(r.startswith("refused"), "a raw socket (proto %d) to read the resolver's datagrams: %s" % (proto, r), r)
    r = attempt("packet", lambda: socket.socket(17, socket.SOCK_RAW, 0).close())
    check(r.startswith("refused"), "an AF_PACKET socket on lo: %s" % r, r)


# ---- parallel runs -----------------------------------------------------------------


def par(n, d):
    """One of several runs at once: its own servers on fixed ports of its
    own namespace, its name resolved, a denied CONNECT of its own, a write
    refused, then the files the script checks; waits for GO in D."""
    marks = []
    srv = []
    for fam, addr in ((socket.AF_INET, "127.0.0.1"),):
        for typ in (socket.SOCK_DGRAM, socket.SOCK_STREAM):
            s = socket.socket(fam, typ)
            s.setsockopt(SOL_SOCKET, SO_REUSEADDR, 1)
            try:
                s.bind((addr, 8000))
                if typ == socket.SOCK_STREAM:
                    s.listen(8)
                srv.append(s)
            except OSError as e:
                marks.append("bind %s: %s" % (typ, en(e.errno)))
    check(len(srv) == 2, "run %s: its own 127.0.0.1:8000 (UDP and TCP) in its namespace" % n, marks)
    # the run directory parent and other runs: nothing to see
    xdg = os.environ.get("RT16_XDG", "")
    if xdg:
        try:
            seen = os.listdir(os.path.join(xdg, "sluice"))
        except OSError as e:
            seen = ["(%s)" % en(e.errno)]
        check(all(x.startswith("(") for x in seen) or seen == [],
              "run %s: the run directories' parent shows nothing (%s)" % (n, seen), seen)
    others = [p for p in os.listdir("/proc") if p.isdigit() and int(p) > 1]
    cmds = []
    for p in others:
        try:
            cmds.append(open("/proc/%s/cmdline" % p, "rb").read().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:
            pass
    check(not any(("par %s " % m) in c for c in cmds for m in range(1, 9) if str(m) != n),
          "run %s: no other run's process in its /proc" % n, cmds)
    # a denied CONNECT of its own through the proxy: in its own summary only
    name = os.environ.get("RT16_NAME", "deny%s.test" % n).encode()
    try:
        c = socket.create_connection(("127.0.0.1", 3128), timeout=10)
        c.sendall(b"CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n" % (name, name))
        line = c.recv(100).split(b"\r\n")[0].decode(errors="replace")
        c.close()
    except OSError as e:
        line = str(e)
    print("connect", line, flush=True)
    # a refused write of its own
    try:
        open("/etc/rt16-par-%s" % n, "w").close()
        bad("run %s: wrote /etc" % n)
    except OSError:
        pass
    # wait for the script's GO (all runs up at once), then answer on our
    # servers once: the script checks each run answers with its own number
    go = os.path.join(d, "go")
    t0 = time.monotonic()
    while not os.path.exists(go) and time.monotonic() - t0 < 60:
        time.sleep(0.05)
    u = srv[0] if srv else None
    if u is not None:
        c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        c.sendto(b"ping", ("127.0.0.1", 8000))
        u.settimeout(5)
        try:
            data, peer = u.recvfrom(100)
            u.sendto(b"run " + n.encode(), peer)
            r, _ = c.recvfrom(100)
            check(r == b"run " + n.encode(), "run %s: its 127.0.0.1:8000 answered as itself (%r)" % (n, r), r)
        except OSError as e:
            bad("run %s: its own UDP server did not answer" % n, e)
    # a published port (--publish HOST:8000): one connection, answered
    if os.environ.get("RT16_PUB") and len(srv) == 2:
        srv[1].settimeout(30)
        try:
            c, _ = srv[1].accept()
            c.sendall(b"run " + n.encode() + b"\n")
            c.close()
        except OSError as e:
            bad("run %s: no connection through its published port" % n, e)
    ok("run %s done" % n)


def cross(d):
    """The second of two runs in one project whose run directories have
    different parents: once the first has ended (D/a-done), write the
    protected names its placeholders stood for."""
    t0 = time.monotonic()
    while not os.path.exists(os.path.join(d, "a-done")) and time.monotonic() - t0 < 60:
        time.sleep(0.05)
    check(os.path.exists(os.path.join(d, "a-done")), "cross: the first run ended while this one ran")
    for name in (".bash_profile", ".bashrc", ".profile", ".zshrc", ".mcp.json", ".gitconfig",
                 ".ripgreprc", ".vscode/tasks.json", ".idea/workspace.xml", ".claude/agents/x.md",
                 ".claude/commands/x.md"):
        def write(name=name):
            if os.path.dirname(name):
                os.makedirs(os.path.dirname(name), exist_ok=True)
            with open(name, "w") as f:
                f.write("evil\n")
        r = attempt(name, write)
        check(r.startswith("refused"), "cross: write %s after the other run ended: %s" % (name, r), r)


def main():
    mode = sys.argv[1]
    if mode == "first":
        first()
    elif mode == "tamper":
        tamper(sys.argv[2])
    elif mode == "plant":
        plant(sys.argv[2])
    elif mode == "reexec":
        reexec(sys.argv[2])
    elif mode == "syscalls":
        syscalls()
    elif mode == "fds":
        fds()
    elif mode == "bind53":
        bind53(sys.argv[2] == "1")
    elif mode == "cross":
        cross(sys.argv[2])
    elif mode == "par":
        par(sys.argv[2], sys.argv[3])


if __name__ == "__main__":
    main()
