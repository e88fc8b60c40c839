#!/usr/bin/env python3
"""no_pidfd_getfd.py CMD ARGS... - runs CMD with pidfd_getfd(2) failing with
ENOSYS, as on a kernel before 5.6 or under valgrind 3.19: a seccomp filter
(no_new_privs first) that answers syscall 438 (pidfd_getfd on x86-64,
aarch64 and i386 alike) with ENOSYS and lets every other call through.
credentials.sh uses it to check that a settings conflict is told before a
missing kernel piece."""
import ctypes
import os
import struct
import sys

PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO, ENOSYS = 0x7FFF0000, 0x00050000, 38
NR_PIDFD_GETFD = 438
BPF_LD_W_ABS, BPF_JEQ_K, BPF_RET_K = 0x20, 0x15, 0x06

prog = [
    (BPF_LD_W_ABS, 0, 0, 0),                # seccomp_data.nr
    (BPF_JEQ_K, 0, 1, NR_PIDFD_GETFD),
    (BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | ENOSYS),
    (BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW),
]
buf = ctypes.create_string_buffer(b"".join(struct.pack("=HBBI", *i) for i in prog))


class Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


fprog = Fprog(len(prog), ctypes.addressof(buf))
libc = ctypes.CDLL(None, use_errno=True)
ul = ctypes.c_ulong
if libc.prctl(PR_SET_NO_NEW_PRIVS, ul(1), ul(0), ul(0), ul(0)) != 0 or \
        libc.prctl(PR_SET_SECCOMP, ul(SECCOMP_MODE_FILTER), ul(ctypes.addressof(fprog)), ul(0),
                   ul(0)) != 0:
    sys.exit("no_pidfd_getfd.py: seccomp: %s" % os.strerror(ctypes.get_errno()))
os.execvp(sys.argv[1], sys.argv[1:])
