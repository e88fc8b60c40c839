#!/usr/bin/env python3
"""tests/e2e/run-helpers/rt8_handoff.py SLUICE VARIANT - `sluice inner` on the
host with ports 0, driven over its socketpair as the launcher would (rt-8,
issue 25: the host's 'F' message). Prints "exit RC ran|not-run" and the
last line of inner's stderr.

    go        'G' only: inner builds its own filters and runs the command (control)
    trunc     'F', length 100, 10 bytes, EOF
    zero      'F', length 0
    over      'F', length 16 MiB (above INNER_FILTERS_MAX)
    garbled   'F', 64 bytes of noise, 'G'
    ones      'F', 1944 bytes of 0xff, 'G'
    badbyte   'X'
    eof       EOF before anything
    twof      'F' garbled twice
    allowall  'F' with two programs that allow everything, 'G': inner loads
              them and runs the command (the host decides; run inside the
              sandbox, the sandbox's own filters still apply: a filter only
              adds). CMD... after VARIANT replaces the command.
The safe outcome of every variant but go and allowall: exit 125, the
command not run."""
import os, socket, struct, subprocess, sys

sl, variant = sys.argv[1], sys.argv[2]
ALLOW = struct.pack("=HBBI", 0x06, 0, 0, 0x7FFF0000)  # BPF_RET|BPF_K SECCOMP_RET_ALLOW
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
a.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
marker = "/tmp/rt8-ran-%d" % os.getpid()
cmd = sys.argv[3:] or ["sh", "-c", "echo RAN; touch " + marker]
p = subprocess.Popen([sl, "inner", "--fd", str(b.fileno()), "--http-port", "0", "--socks-port", "0", "--"] + cmd,
                     pass_fds=[b.fileno()], stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
b.close()
msg, anc, _, _ = a.recvmsg(16, socket.CMSG_SPACE(16 * 4) + socket.CMSG_SPACE(64))
for lvl, typ, data in anc:
    if lvl == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
        for i in range(0, len(data) - len(data) % 4, 4):
            os.close(struct.unpack("i", data[i:i + 4])[0])
F = b"F"
try:
    if variant == "go":
        a.sendall(b"G")
    elif variant == "trunc":
        a.sendall(F + struct.pack("=I", 100) + b"x" * 10)
        a.shutdown(socket.SHUT_WR)
    elif variant == "zero":
        a.sendall(F + struct.pack("=I", 0) + b"G")
    elif variant == "over":
        a.sendall(F + struct.pack("=I", 16 << 20) + b"\0" * 4096)
        a.shutdown(socket.SHUT_WR)
    elif variant == "garbled":
        a.sendall(F + struct.pack("=I", 64) + os.urandom(64) + b"G")
    elif variant == "ones":
        a.sendall(F + struct.pack("=I", 1944) + b"\xff" * 1944 + b"G")
    elif variant == "badbyte":
        a.sendall(b"X")
    elif variant == "eof":
        a.shutdown(socket.SHUT_WR)
    elif variant == "allowall":
        one = struct.pack("=I", 1) + ALLOW
        a.sendall(F + struct.pack("=I", 2 * len(one)) + one + one + b"G")
    elif variant == "twof":
        a.sendall(F + struct.pack("=I", 64) + os.urandom(64) + F + struct.pack("=I", 64) + os.urandom(64) + b"G")
except OSError:
    pass
try:
    out, err = p.communicate(timeout=30)
except subprocess.TimeoutExpired:
    p.kill()
    out, err = p.communicate()
ran = b"RAN" in out or os.path.exists(marker)
if os.path.exists(marker):
    os.unlink(marker)
print("exit %d %s" % (p.returncode, "ran" if ran else "not-run"))
print((err.decode(errors="replace").strip().splitlines() or [""])[-1])
sys.stdout.write(out.decode(errors="replace").replace("RAN", "(ran)"))
