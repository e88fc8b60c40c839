# tests/e2e/transparent-helpers/uxpath.py - Unix path connect()/bind() in a
# transparent run with allowAllUnixSockets (and allowLocalBinding, so bind()
# is notified too): sluice runs them itself, in the caller's mount
# namespace, root, working directory and credentials (transparent.c,
# unix_path_call). `host W SLUICE SETTINGS` sets the host side up in W (the
# sandbox's working directory) and runs `inside` in the sandbox; prints one
# line of NAME=RESULT.
import errno, os, socket, subprocess, sys


def res(f):
    try:
        f()
        return "ok"
    except OSError as x:
        return errno.errorcode.get(x.errno, str(x.errno))


def conn(path):
    s = socket.socket(socket.AF_UNIX)
    r = res(lambda: s.connect(path))
    s.close()
    return r


def listener(path):
    s = socket.socket(socket.AF_UNIX)
    s.bind(path)
    s.listen(8)
    return s


def inside(w, hostpath):
    out = []
    # the sandbox's private /tmp: not the host's
    t = listener("/tmp/in.sock")
    out.append("cwd=" + conn("ux.sock"))
    out.append("abs=" + conn(os.path.join(w, "ux.sock")))
    out.append("ro=" + conn("ro/ux.sock"))
    out.append("noperm=" + conn("noperm/ux.sock"))
    out.append("tmp=" + conn("/tmp/in.sock"))
    out.append("link=" + conn("uxlink"))
    out.append("host=" + conn(hostpath))
    os.chdir("uxd")
    out.append("rel=" + conn("ux2.sock"))
    out.append("dotdot=" + conn("../ux.sock"))
    os.chdir(w)
    # bwrap's init (PID 1) is out of the command's reach (Landlock's ptrace
    # scoping, where the kernel has it): sluice's helper must not follow
    # /proc/1/fd/0 or /proc/1/root for it either; /proc/self names no
    # process for the helper, never sluice's own descriptors
    own = res(lambda: os.close(os.open("/proc/1/fd/0", os.O_PATH)))
    via = conn("/proc/1/fd/0")
    out.append("p1fd=" + ("same" if (own == "EACCES") == (via == "EACCES") else own + "/" + via))
    own = res(lambda: os.stat("/proc/1/root/"))
    via = conn("/proc/1/root/tmp/in.sock")
    out.append("p1root=" + ("same" if (own == "EACCES") == (via == "EACCES") else own + "/" + via))
    out.append("pself=" + conn("/proc/self/fd/%d" % t.fileno()))
    # abstract names: the sandbox's network namespace, not the host's
    out.append("habs=" + conn("\0sluice-uxpath-host"))
    a = listener("\0sluice-uxpath-in")
    out.append("iabs=" + conn("\0sluice-uxpath-in"))
    a.close()
    os.umask(0o077)
    b = socket.socket(socket.AF_UNIX)
    out.append("bind=" + res(lambda: b.bind("b.sock")))
    st = os.stat("b.sock")
    out.append("bown=" + ("same" if (st.st_uid, st.st_gid) == (os.getuid(), os.getgid()) else "%d:%d" % (st.st_uid, st.st_gid)))
    out.append("bmode=%o" % (st.st_mode & 0o777))
    b.close()
    os.unlink("b.sock")
    b = socket.socket(socket.AF_UNIX)
    out.append("bro=" + res(lambda: b.bind("ro/b.sock")))
    b.close()
    b = socket.socket(socket.AF_UNIX)
    out.append("btmp=" + res(lambda: b.bind("/tmp/b.sock")))
    out.append("btmpthere=%d" % os.path.exists("/tmp/b.sock"))
    b.close()
    t.close()
    print(" ".join(out))


def host(w, sluice, settings, me):
    os.chdir(w)
    for d in ("ro", "noperm", "uxd"):
        os.makedirs(d, exist_ok=True)
    for p in ("ux.sock", "ro/ux.sock", "noperm/ux.sock", "uxd/ux2.sock", "uxlink", "b.sock"):
        if os.path.lexists(p):
            os.unlink(p)
    ls = [listener(p) for p in ("ux.sock", "ro/ux.sock", "noperm/ux.sock", "uxd/ux2.sock")]
    for p in ("ux.sock", "ro/ux.sock", "uxd/ux2.sock"):
        os.chmod(p, 0o777)
    os.chmod("noperm", 0)
    os.symlink("/tmp/in.sock", "uxlink")  # the sandbox's /tmp, not the host's
    hostdir = os.environ.get("T", "/tmp")
    hostpath = os.path.join(hostdir, "uxpath-host.sock")
    if os.path.lexists(hostpath):
        os.unlink(hostpath)
    ls.append(listener(hostpath))
    ls.append(listener("\0sluice-uxpath-host"))
    r = subprocess.run([sluice, "run", "--quiet", "--settings", settings, "--", "python3", me, "inside", w, hostpath],
                       capture_output=True, text=True)
    os.chmod("noperm", 0o700)
    print(r.stdout.strip() or r.stderr.strip(), "hosttmp=%d" % os.path.exists("/tmp/b.sock"))
    for s in ls:
        s.close()
    os.unlink(hostpath)


if __name__ == "__main__":
    if sys.argv[1] == "inside":
        inside(sys.argv[2], sys.argv[3])
    else:
        host(sys.argv[2], sys.argv[3], sys.argv[4], os.path.abspath(sys.argv[0]))
