#!/usr/bin/env python3
# tests/e2e/run-helpers/rt3_fd.py - red-team rt-3 (issue 21 item 3): every
# way to change a file or directory the command was given READ-ONLY on a
# descriptor, other than writing to it through that descriptor.
#   rt3_fd.py file N   N is a read-only regular file (or FIFO/device)
#   rt3_fd.py dir N    N is a read-only directory
#   a third argument: a file to print to instead of stdout
# Prints one line per attack: "OPEN NAME: how" when the attack changed
# something (a hole) or "held NAME: errno" when it was refused. Exit 0.
import ctypes
import mmap
import os
import sys

mode, fd = sys.argv[1], int(sys.argv[2])
if len(sys.argv) > 3:  # the results go there (when fd 1 is the one attacked)
    sys.stdout = open(sys.argv[3], "w")
P = "/proc/self/fd/%d" % fd
libc = ctypes.CDLL(None, use_errno=True)


def t(name, f):
    try:
        r = f()
        print("OPEN %s: %s" % (name, r if r else "done"))
    except OSError as e:
        print("held %s: %s" % (name, e.strerror))
    except Exception as e:  # noqa: BLE001 - the attack failed otherwise
        print("held %s: %s" % (name, type(e).__name__))
    sys.stdout.flush()


def reopen(path, flags):
    w = os.open(path, flags)
    os.close(w)


def mmap_write():
    m = mmap.mmap(fd, 0, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    m[0:1] = b"X"
    m.flush()


def setfl_write():
    import fcntl
    fcntl.fcntl(fd, fcntl.F_SETFL, os.O_RDWR | os.O_APPEND)
    os.write(fd, b"X")


def opath_reopen():
    o = os.open(P, os.O_PATH)
    reopen("/proc/self/fd/%d" % o, os.O_WRONLY | os.O_APPEND)


def link_then_write():
    os.link(P, "rt3-hardlink", follow_symlinks=True)
    w = os.open("rt3-hardlink", os.O_WRONLY | os.O_APPEND)
    os.write(w, b"X")


def handle_open():
    # name_to_handle_at(fd, "", handle, &mnt, AT_EMPTY_PATH), then
    # open_by_handle_at(fd, handle, O_RDWR)
    buf = ctypes.create_string_buffer(8 + 128)
    ctypes.c_uint.from_buffer(buf).value = 128
    mnt = ctypes.c_int()
    if libc.name_to_handle_at(fd, b"", buf, ctypes.byref(mnt), 0x1000) < 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    w = libc.open_by_handle_at(fd, buf, os.O_RDWR if mode == "file" else os.O_RDONLY)
    if w < 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    if mode == "file":
        os.write(w, b"X")


def linkat_empty():
    # linkat(fd, "", AT_FDCWD, "rt3-link2", AT_EMPTY_PATH)
    if libc.linkat(fd, b"", -100, b"rt3-link2", 0x1000) < 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    w = os.open("rt3-link2", os.O_WRONLY | os.O_APPEND)
    os.write(w, b"X")


if mode == "file":
    t("reopen /proc/self/fd/N O_WRONLY", lambda: reopen(P, os.O_WRONLY | os.O_APPEND))
    t("reopen /proc/1/fd/N O_WRONLY", lambda: reopen("/proc/1/fd/%d" % fd, os.O_WRONLY | os.O_APPEND))
    t("reopen /dev/fd/N O_RDWR", lambda: reopen("/dev/fd/%d" % fd, os.O_RDWR))
    t("reopen through an O_PATH descriptor", opath_reopen)
    t("fcntl F_SETFL O_RDWR then write", setfl_write)
    t("mmap PROT_WRITE MAP_SHARED", mmap_write)
    t("ftruncate", lambda: os.truncate(fd, 0))
    t("truncate /proc/self/fd/N", lambda: os.truncate(P, 0))
    t("fchmod", lambda: os.chmod(fd, 0o600))
    t("chmod /proc/self/fd/N", lambda: os.chmod(P, 0o606))
    t("fchown to itself", lambda: os.chown(fd, os.getuid(), os.getgid()))
    t("futimens", lambda: os.utime(fd, (0, 0)))
    t("utimensat /proc/self/fd/N (touch)", lambda: os.utime(P, None))
    t("fsetxattr user.rt3", lambda: os.setxattr(fd, "user.rt3", b"1"))
    t("setxattr /proc/self/fd/N user.rt3", lambda: os.setxattr(P, "user.rt3b", b"1"))
    t("link /proc/self/fd/N into the writable dir, then write", link_then_write)
    t("linkat(AT_EMPTY_PATH) into the writable dir, then write", linkat_empty)
    t("open_by_handle_at O_RDWR", handle_open)
else:
    def mk(name):
        w = os.open(name, os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd)
        os.write(w, b"X")
    t("openat(dirfd, O_CREAT) and write", lambda: mk("rt3-new"))
    t("open /proc/self/fd/N/NAME O_CREAT", lambda: os.close(os.open(P + "/rt3-new2", os.O_CREAT | os.O_WRONLY, 0o644)))
    t("mkdirat", lambda: os.mkdir("rt3-dir", dir_fd=fd))
    t("symlinkat", lambda: os.symlink("/etc/passwd", "rt3-ln", dir_fd=fd))
    t("mkfifoat", lambda: os.mkfifo("rt3-fifo", dir_fd=fd))
    t("unlinkat an existing file", lambda: os.unlink("victim", dir_fd=fd))
    t("renameat an existing file", lambda: os.rename("victim2", "rt3-moved", src_dir_fd=fd, dst_dir_fd=fd))
    t("open an existing file O_WRONLY by dirfd", lambda: reopen(P + "/victim3", os.O_WRONLY | os.O_APPEND))
    t("fchmod the directory", lambda: os.chmod(fd, 0o777))
    t("utimensat the directory", lambda: os.utime(fd, (0, 0)))
    t("fsetxattr the directory", lambda: os.setxattr(fd, "user.rt3", b"1"))
    t("open_by_handle_at", handle_open)
