#!/usr/bin/env python3
"""tests/e2e/run-helpers/hijack_pid1.py SOCKET_PATH - run inside `sluice run`
by run_escape.sh: tries to use PID 1 of the sandbox (bwrap's init, which is
not under sluice's seccomp filter) to reach a Unix socket, the escape the
design removes the in-sandbox relay for. It attaches to PID 1 with ptrace
and makes it run socket(AF_UNIX) and connect(SOCKET_PATH) (x86-64 syscall
injection), then puts PID 1 back as it was.

Prints "BLOCKED <errno>" when PID 1 cannot be attached (the safe outcome,
exit 0), "OPEN <detail>" when the injected connect() reached the socket
(exit 1), "SKIP <why>" when the injection cannot be tried (exit 3)."""
import ctypes, errno, os, platform, struct, sys

if platform.machine() != "x86_64":
    print("SKIP syscall injection is written for x86-64")
    sys.exit(3)
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.restype = ctypes.c_long
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
PTRACE_PEEKTEXT, PTRACE_POKEDATA, PTRACE_GETREGS, PTRACE_SETREGS = 1, 5, 12, 13
PTRACE_SINGLESTEP, PTRACE_ATTACH, PTRACE_DETACH = 9, 16, 17


class Regs(ctypes.Structure):
    _fields_ = [(n, ctypes.c_ulonglong) for n in (
        "r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi orig_rax "
        "rip cs eflags rsp ss fs_base gs_base ds es fs gs").split()]


def pt(req, addr=0, data=0):
    ctypes.set_errno(0)
    r = libc.ptrace(req, 1, ctypes.c_void_p(addr), ctypes.c_void_p(data))
    e = ctypes.get_errno()
    if r == -1 and e != 0:
        raise OSError(e, "ptrace %d: %s" % (req, os.strerror(e)))
    return r


def main():
    path = sys.argv[1].encode()
    if libc.ptrace(PTRACE_ATTACH, 1, None, None) < 0:
        e = ctypes.get_errno()
        print("BLOCKED " + errno.errorcode.get(e, str(e)))
        sys.exit(0)
    os.waitpid(1, 0x40000000)  # __WALL
    saved = Regs()
    pt(PTRACE_GETREGS, 0, ctypes.addressof(saved))
    # PID 1 sits in a syscall: the two bytes before rip are `syscall` (0f 05)
    sc = saved.rip - 2
    word = pt(PTRACE_PEEKTEXT, sc) & 0xffff
    if word != 0x050f:
        pt(PTRACE_DETACH)
        print("SKIP pid 1 is not stopped right after a syscall instruction")
        sys.exit(3)

    def inject(nr, *args):
        r = Regs.from_buffer_copy(saved)
        r.rax, r.orig_rax, r.rip = nr, 0xffffffffffffffff, sc
        for name, v in zip(("rdi", "rsi", "rdx", "r10", "r8", "r9"), args):
            setattr(r, name, v & 0xffffffffffffffff)
        pt(PTRACE_SETREGS, 0, ctypes.addressof(r))
        pt(PTRACE_SINGLESTEP)
        os.waitpid(1, 0x40000000)
        out = Regs()
        pt(PTRACE_GETREGS, 0, ctypes.addressof(out))
        v = out.rax
        return v - (1 << 64) if v >= 1 << 63 else v

    # a sockaddr_un below PID 1's stack (well past the red zone)
    addr = (saved.rsp - 4096) & ~7
    sun = struct.pack("<H", 1) + path + b"\0"
    sun += b"\0" * (-len(sun) % 8)
    for i in range(0, len(sun), 8):
        pt(PTRACE_POKEDATA, addr + i, struct.unpack("<Q", sun[i:i + 8])[0])
    fd = inject(41, 1, 1, 0)  # socket(AF_UNIX, SOCK_STREAM, 0)
    rc = None
    if fd >= 0:
        rc = inject(42, fd, addr, 2 + len(path) + 1)  # connect
        inject(3, fd)  # close
    restore = Regs.from_buffer_copy(saved)
    if saved.orig_rax != 0xffffffffffffffff:  # re-run the syscall it was in
        restore.rip, restore.rax = sc, saved.orig_rax
    pt(PTRACE_SETREGS, 0, ctypes.addressof(restore))
    pt(PTRACE_DETACH)
    if fd < 0:
        print("BLOCKED pid 1 was attached but socket(AF_UNIX) there failed: %s" % errno.errorcode.get(-fd, fd))
        sys.exit(0)
    if rc == 0:
        print("OPEN pid 1 (attached with ptrace) connected to %s" % path.decode())
        sys.exit(1)
    print("OPEN pid 1 attached with ptrace and made an AF_UNIX socket (connect: %s)" % errno.errorcode.get(-rc, rc))
    sys.exit(1)


main()
