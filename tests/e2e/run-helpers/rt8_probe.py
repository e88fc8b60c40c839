#!/usr/bin/env python3
"""tests/e2e/run-helpers/rt8_probe.py - rt-8 (issue 25, start-up at the
floor) probes, run inside `sluice run` by run_escape.sh's rt8 group. Each
prints its findings and exits 0 when the boundary holds, 1 when it does not.

    rt8_probe.py fds [EXTRA...]   the command's descriptors are 0-2 (and the
                                  EXTRA ones), and no process of the sandbox
                                  holds a socket other than the command's
                                  stdio (the handoff socketpair, the reaper's
                                  or --info-fd pipe must not be reachable)
    rt8_probe.py signals          no signal ignored or blocked in the command
                                  (this probe, exec'd by inner: but for
                                  SIGPIPE and SIGXFSZ, which python ignores)
                                  or in PID 1 (bwrap's init blocks SIGCHLD
                                  only, as on main)
    rt8_probe.py state            umask and rlimits, printed for the host to compare
    rt8_probe.py mounts           every mount syscall fails, and no mount that
                                  mountinfo says is read-only can be written
                                  (issue 25: Landlock no longer opens those)
"""
import ctypes, errno, os, sys

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


def sysc(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return r, ctypes.get_errno()


def own_fds():
    out = []
    for n in os.listdir("/proc/self/fd"):
        try:
            os.readlink("/proc/self/fd/" + n)
        except OSError:
            continue  # listdir's own descriptor, closed by now
        out.append(int(n))
    return sorted(out)


def fds(extra):
    bad = []
    mine = own_fds()
    for n in mine:
        try:
            tgt = os.readlink("/proc/self/fd/%d" % n)
        except OSError as e:
            tgt = "?" + str(e)
        print("fd %d -> %s" % (n, tgt))
        if n > 2 and str(n) not in extra:
            bad.append("fd %d -> %s" % (n, tgt))
    # every other process of the sandbox (PID 1 is bwrap's init)
    for p in os.listdir("/proc"):
        if not p.isdigit() or int(p) == os.getpid():
            continue
        try:
            ents = os.listdir("/proc/%s/fd" % p)
        except OSError:
            continue
        for n in ents:
            try:
                tgt = os.readlink("/proc/%s/fd/%s" % (p, n))
            except OSError:
                continue
            print("pid %s fd %s -> %s" % (p, n, tgt))
            if tgt.startswith(("socket:", "pipe:", "anon_inode:[pidfd]")) and int(n) > 2:
                bad.append("pid %s fd %s -> %s" % (p, n, tgt))
    for b in bad:
        print("HOLE", b)
    return 1 if bad else 0


def status(pid):
    out = {}
    with open("/proc/%s/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return out


PY_OWN_IGN = (1 << (13 - 1)) | (1 << (25 - 1))  # python ignores SIGPIPE and SIGXFSZ itself


def signals():
    rc = 0
    me, init = status("self"), status("1")
    print("self SigIgn %s SigBlk %s; pid 1 SigIgn %s SigBlk %s" % (me["SigIgn"], me["SigBlk"], init["SigIgn"], init["SigBlk"]))
    if int(me["SigIgn"], 16) & ~PY_OWN_IGN or int(me["SigBlk"], 16):
        print("HOLE the command starts with signals ignored or blocked")
        rc = 1
    if int(init["SigIgn"], 16) or int(init["SigBlk"], 16) & ~(1 << 16):
        print("HOLE PID 1 ignores or blocks more than SIGCHLD")
        rc = 1
    return rc


def state():
    import resource
    u = os.umask(0)
    os.umask(u)
    print("umask %04o" % u)
    for name in sorted(n for n in dir(resource) if n.startswith("RLIMIT_")):
        print("%s %s" % (name, resource.getrlimit(getattr(resource, name))))
    return 0


# x86-64 numbers (the sandbox is x86-64 in CI; other machines print SKIP lines)
MOUNT_CALLS = [
    ("mount", 165, lambda: (b"none", b"/tmp", b"tmpfs", 0, None)),
    ("umount2", 166, lambda: (b"/tmp", 2)),  # MNT_DETACH
    ("pivot_root", 155, lambda: (b".", b".")),
    ("open_tree", 428, lambda: (-100, b"/usr", 1 | 0x80000)),  # OPEN_TREE_CLONE|CLOEXEC
    ("move_mount", 429, lambda: (-100, b"/usr", -100, b"/tmp", 0)),
    ("fsopen", 430, lambda: (b"tmpfs", 1)),
    ("fspick", 433, lambda: (-100, b"/usr", 1)),
    ("mount_setattr", 442, None),
]


class MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


def mounts():
    rc = 0
    if os.uname().machine != "x86_64":
        print("SKIP not x86-64")
        return 0
    for name, nr, args in MOUNT_CALLS:
        if nr == 442:
            a = MountAttr(0, 1, 0, 0)  # clear MOUNT_ATTR_RDONLY on /usr, recursively
            r, e = sysc(nr, -100, b"/usr", 0x8000, ctypes.byref(a), ctypes.sizeof(a))
        else:
            r, e = sysc(nr, *args())
        if r >= 0:
            print("HOLE %s succeeded (%d)" % (name, r))
            rc = 1
            if name in ("open_tree", "fspick", "fsopen"):
                os.close(r)
        else:
            print("%s: %s" % (name, errno.errorcode.get(e, e)))
    # every mount mountinfo says is read-only: nothing can be made or written at its top
    ro = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            pre, _, post = line.partition(" - ")
            fl = pre.split()
            sb = post.split()
            mp = fl[4].encode().decode("unicode_escape")
            if fl[5].split(",")[0] == "ro" or (len(sb) >= 3 and sb[2].split(",")[0] == "ro"):
                ro.append(mp)
    tried = 0
    for mp in ro:
        try:
            if not os.statvfs(mp).f_flag & os.ST_RDONLY:
                continue  # hidden below a writable mount: the path reaches that one
        except OSError:
            continue
        for path in (mp, "/proc/self/root" + mp):
            try:
                if os.path.isdir(path):
                    t = os.path.join(path, ".rt8-%d" % os.getpid())
                    fd = os.open(t, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                    os.close(fd)
                    os.unlink(t)
                    print("HOLE created a file in the read-only mount %s" % path)
                    rc = 1
                elif os.path.isfile(path):
                    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
                    os.close(fd)
                    print("HOLE opened the read-only mount %s for writing" % path)
                    rc = 1
                tried += 1
            except OSError:
                tried += 1
    print("read-only mounts: %d, writes tried: %d" % (len(ro), tried))
    if not ro:
        print("HOLE no read-only mount seen (the probe is broken)")
        rc = 1
    return rc


def main():
    what = sys.argv[1]
    if what == "fds":
        return fds(sys.argv[2:])
    if what == "signals":
        return signals()
    if what == "state":
        return state()
    if what == "mounts":
        return mounts()
    print("usage")
    return 2


sys.exit(main())
