#!/usr/bin/env python3
"""rt-9: probes of TLS termination in `sluice run`, from inside the sandbox.

rt9_tls.py PORT sni|rules: every probe prints one line "NAME: RESULT". A probe that
reaches /priv/p.txt of rules.test (refused by its request rule) prints its
body "private"; one that gets the run's CA to vouch for a name the policy
does not allow prints "MINTED NAME". The caller fails on either.

sni (under tlsTerminate for every host):
- sni-good:    CONNECT good.test, SNI good.test: vouched (the control)
- sni-other:   CONNECT good.test, SNI evil.example: is the leaf good for evil.example?
- sni-ip:      CONNECT 127.0.0.10 (an allowed IP), SNI evil.example: the same
- sni-ruled:   CONNECT good.test, SNI rules.test: the same for another allowed name
rules (rules.test has request rules; /priv is refused):
- ruled-sni:   CONNECT rules.test (ruled: terminated), SNI and Host good.test, GET /priv
- ruled-host:  CONNECT rules.test, SNI rules.test, Host good.test, GET /priv
- ruled-plain: CONNECT rules.test, plain HTTP (no TLS) GET /priv
- ruled-h2:    CONNECT rules.test, ALPN h2 only; then an HTTP/1.1 GET /priv
- socks-ruled: SOCKS5 to rules.test (name), TLS, GET /priv
- socks-ip-sni: SOCKS5 to 127.0.0.10, SNI rules.test, GET /priv with Host rules.test
- fronted:     CONNECT good.test (opaque), SNI and Host rules.test, GET /priv
  (these two only reported: the IP and good.test are allowed in their own
  right and not ruled, so the tunnel is opaque; request rules bind a name)
"""
import os
import socket
import ssl
import struct
import sys

if sys.argv[1] == "host":
    # rt9_tls.py host SLUICE KEY: with the host's /proc (enableWeakerNestedSandbox),
    # every visible process: its root and cwd towards KEY; the launcher
    # (cmdline "SLUICE run ..."): ptrace, process_vm_readv, pidfd_getfd, mem
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    sl, key = sys.argv[2], sys.argv[3]
    seen = launchers = 0
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        pid = int(d)
        if pid == os.getpid():
            continue
        seen += 1
        for p in ("/proc/%d/root%s" % (pid, key), "/proc/%d/cwd/%s" % (pid, os.path.basename(key))):
            try:
                if b"PRIVATE" in open(p, "rb").read():
                    print("READ " + p)
            except OSError:
                pass
        try:
            cmd = open("/proc/%d/cmdline" % pid, "rb").read().split(b"\0")
        except OSError:
            continue
        if cmd[0].decode(errors="replace") != sl or len(cmd) < 2 or cmd[1] != b"run":
            continue
        launchers += 1
        if libc.ptrace(16, pid, 0, 0) == 0:  # PTRACE_ATTACH
            print("PTRACE %d" % pid)
            libc.ptrace(17, pid, 0, 0)
        buf = ctypes.create_string_buffer(64)
        try:
            with open("/proc/%d/maps" % pid) as f:
                if f.read(1):
                    print("MAPS %d" % pid)
        except OSError:
            pass

        class iov(ctypes.Structure):
            _fields_ = [("b", ctypes.c_void_p), ("n", ctypes.c_size_t)]
        lo, re_ = iov(ctypes.addressof(buf), 64), iov(0x400000, 64)
        if libc.process_vm_readv(pid, ctypes.byref(lo), 1, ctypes.byref(re_), 1, 0) > 0:
            print("VM_READV %d" % pid)
        pfd = libc.syscall(434, pid, 0)  # pidfd_open
        if pfd >= 0:
            for fd in range(0, 64):
                got = libc.syscall(438, pfd, fd, 0)  # pidfd_getfd
                if got >= 0:
                    print("GETFD %d:%d" % (pid, fd))
                    os.close(got)
            os.close(pfd)
        try:
            f = open("/proc/%d/mem" % pid, "rb")
            print("MEM %d" % pid)
            f.close()
        except OSError:
            pass
    print("seen %d launchers %d" % (seen, launchers))
    sys.exit(0)

PORT = int(sys.argv[1])
BUNDLE = os.environ.get("SSL_CERT_FILE")


def connect_proxy(target):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=8)
    s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target, target)).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        b = s.recv(1)
        if not b:
            break
        head += b
    if not head.startswith(b"HTTP/1.1 200") and not head.startswith(b"HTTP/1.0 200"):
        s.close()
        raise OSError("CONNECT: " + head.split(b"\r\n")[0].decode("latin-1"))
    return s


def connect_socks(host):
    s = socket.create_connection(("127.0.0.1", 1080), timeout=8)
    s.sendall(b"\x05\x01\x00")
    s.recv(2)
    if host[0].isdigit():
        s.sendall(b"\x05\x01\x00\x01" + socket.inet_aton(host) + struct.pack(">H", PORT))
    else:
        n = host.encode()
        s.sendall(b"\x05\x01\x00\x03" + bytes([len(n)]) + n + struct.pack(">H", PORT))
    r = s.recv(10)
    if len(r) < 2 or r[1] != 0:
        s.close()
        raise OSError("SOCKS reply %r" % (r[:2],))
    return s


def loose(alpn=None):
    c = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    c.check_hostname = False
    c.verify_mode = ssl.CERT_NONE
    if alpn:
        c.set_alpn_protocols(alpn)
    return c


def get(t, path, host):
    t.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (path, host)).encode())
    data = b""
    try:
        while len(data) < 4096:
            b = t.recv(4096)
            if not b:
                break
            data += b
    except (OSError, ssl.SSLError):
        pass
    status = data.split(b"\r\n")[0].decode("latin-1") or "(nothing)"
    body = data.split(b"\r\n\r\n", 1)[1].decode("latin-1").strip() if b"\r\n\r\n" in data else ""
    return "%s %s" % (status, "private" if body == "private" else "body:%d" % len(body))


def probe(name, f):
    try:
        print("%s: %s" % (name, f()), flush=True)
    except Exception as e:  # refused, reset, handshake failure: the boundary held
        print("%s: refused (%s)" % (name, str(e).splitlines()[0][:120] if str(e) else type(e).__name__),
              flush=True)


def sni_minted(target, sni):
    c = ssl.create_default_context(cafile=BUNDLE)
    s = connect_proxy(target)
    try:
        t = c.wrap_socket(s, server_hostname=sni)
    except ssl.SSLCertVerificationError as e:
        return "not vouched (%s)" % e.verify_message
    t.close()
    return "vouched " + sni if sni == target.split(":")[0] else "MINTED " + sni


def ruled(sni, host):
    t = loose().wrap_socket(connect_proxy("rules.test:%d" % PORT), server_hostname=sni)
    return get(t, "/priv/p.txt", host)


def ruled_plain():
    s = connect_proxy("rules.test:%d" % PORT)
    return get(s, "/priv/p.txt", "rules.test")


def ruled_h2():
    t = loose(["h2"]).wrap_socket(connect_proxy("rules.test:%d" % PORT), server_hostname="rules.test")
    return "alpn=%s %s" % (t.selected_alpn_protocol(), get(t, "/priv/p.txt", "rules.test"))


def socks(host, sni):
    t = loose().wrap_socket(connect_socks(host), server_hostname=sni)
    return get(t, "/priv/p.txt", sni)


if sys.argv[2] == "sni":
    probe("sni-good", lambda: sni_minted("good.test:%d" % PORT, "good.test"))
    probe("sni-other", lambda: sni_minted("good.test:%d" % PORT, "evil.example"))
    probe("sni-ip", lambda: sni_minted("127.0.0.10:%d" % PORT, "evil.example"))
    probe("sni-ruled", lambda: sni_minted("good.test:%d" % PORT, "rules.test"))
    sys.exit(0)
probe("ruled-sni", lambda: ruled("good.test", "good.test"))
probe("ruled-host", lambda: ruled("rules.test", "good.test"))
probe("ruled-plain", ruled_plain)
probe("ruled-h2", ruled_h2)
probe("socks-ruled", lambda: socks("rules.test", "rules.test"))
probe("socks-ip-sni", lambda: socks("127.0.0.10", "rules.test"))
probe("fronted", lambda: get(loose().wrap_socket(connect_proxy("good.test:%d" % PORT),
                                                  server_hostname="rules.test"),
                              "/priv/p.txt", "rules.test"))
