#!/usr/bin/env python3
"""tests/e2e/socks_udp-client.py - a SOCKS5 UDP ASSOCIATE client (RFC 1928
section 7) for tests/e2e/socks_udp.sh and tests/bench/socks_udp.sh.

    socks_udp-client.py PROXY_PORT CASE [ARGS...]

Prints one line per check, "ok NAME" or "bad NAME: why"; exits 0.
Cases (ALLOWED_IP, DENIED_IP: the echo servers' addresses, EPORT their port):
    allowed NAME EPORT ALLOWED_IP   a datagram to NAME (ATYP 3) comes back
    literal ALLOWED_IP EPORT        a datagram to the address (ATYP 1) comes back
    denied HOST EPORT               no answer (HOST a name or an IPv4 address)
    spoofed ALLOWED_IP EPORT OTHER_SRC  from another port, then another address: dropped
    fragment ALLOWED_IP EPORT       FRAG=1 dropped, FRAG=0 after it answered
    closes ALLOWED_IP EPORT         after the TCP connection closes, nothing comes back
    idle IDLE_S                     the proxy closes an idle association's TCP connection
    bench HOST EPORT N              N round trips: prints "rate DGRAMS_PER_S p50_US p99_US"
    reload ALLOWED_IP EPORT SETTINGS PID LOG  a reload dropping the rule denies the next datagram
    suite EPORT IDLE_S [SETTINGS PID LOG]  the cases above as socks_udp.sh runs them, in one process
    runsuite EPORT                  the cases socks_udp.sh runs inside sluice run's sandbox
    v6 NAME EPORT IPV6              (PROXY_PORT on [::1]) by name and by address over IPv6
"""
import re
import socket
import struct
import sys
import time


def associate(port, src=("0.0.0.0", 0)):
    """The control connection and the relay's (address, port)."""
    t = socket.create_connection(("127.0.0.1", port), timeout=5)
    t.sendall(b"\x05\x01\x00")
    if t.recv(2) != b"\x05\x00":
        raise RuntimeError("method refused")
    t.sendall(b"\x05\x03\x00\x01" + socket.inet_aton(src[0]) + struct.pack(">H", src[1]))
    r = b""
    while len(r) < 10:
        got = t.recv(10 - len(r))
        if not got:
            raise RuntimeError("no reply")
        r += got
    if r[1] != 0:
        raise RuntimeError("reply code %d" % r[1])
    if r[3] != 1:
        raise RuntimeError("reply ATYP %d" % r[3])
    return t, (socket.inet_ntoa(r[4:8]), struct.unpack(">H", r[8:10])[0])


def header(host, port, frag=0):
    try:
        a = socket.inet_aton(host)
        if host.count(".") != 3:
            raise OSError
        return b"\x00\x00" + bytes([frag]) + b"\x01" + a + struct.pack(">H", port)
    except OSError:
        h = host.encode()
        return b"\x00\x00" + bytes([frag]) + b"\x03" + bytes([len(h)]) + h + struct.pack(">H", port)


def udp_sock(bind=None, timeout=0.6):
    """A UDP socket; bound only when asked (inside sluice run's sandbox a
    bind() is refused without network.allowLocalBinding; sendto binds)."""
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    if bind is not None:
        u.bind(bind)
    u.settimeout(timeout)
    return u


def recv_or_none(u):
    try:
        return u.recvfrom(70000)
    except (socket.timeout, ConnectionRefusedError):
        return None


def say(ok, name, why=""):
    print(("ok %s" % name) if ok else ("bad %s: %s" % (name, why)))
    sys.stdout.flush()


def round_trip(u, relay, host, port, payload, tries=3):
    """Sends payload to host:port through the relay; the reply or None."""
    for _ in range(tries):
        u.sendto(header(host, port) + payload, relay)
        got = recv_or_none(u)
        if got is not None:
            return got[0]
    return None


def case_allowed(pport, name, eport, ip):
    t, relay = associate(pport)
    u = udp_sock()
    payload = b"hello-by-name-%d" % time.monotonic_ns()
    got = round_trip(u, relay, name, int(eport), payload)
    want = header(ip, int(eport)) + payload
    say(got == want, "an allowed name (ATYP 3) is resolved and its echo comes back wrapped",
        repr(got))
    t.close()


def case_literal(pport, ip, eport):
    t, relay = associate(pport)
    u = udp_sock()
    payload = b"hello-by-address"
    got = round_trip(u, relay, ip, int(eport), payload)
    say(got == header(ip, int(eport)) + payload, "an allowed address (ATYP 1) echoes", repr(got))
    t.close()


def case_denied(pport, host, eport):
    t, relay = associate(pport)
    u = udp_sock()
    got = round_trip(u, relay, host, int(eport), b"denied-" + host.encode(), tries=2)
    say(got is None, "a denied destination (%s) gets nothing back" % host, repr(got))
    # the control connection stays up: an allowed datagram is not what failed
    t.settimeout(0.2)
    try:
        alive = t.recv(1) != b""
    except socket.timeout:
        alive = True
    say(alive, "a denied datagram does not end the association")
    t.close()


def case_spoofed(pport, ip, eport, other):
    t, relay = associate(pport)
    u = udp_sock()
    first = round_trip(u, relay, ip, int(eport), b"learn-port")
    say(first is not None, "the first datagram teaches the client's port")
    v = udp_sock()  # same address, another port
    v.sendto(header(ip, int(eport)) + b"spoof-port", relay)
    say(recv_or_none(v) is None and recv_or_none(u) is None,
        "a datagram from another port of the client is dropped")
    w = udp_sock((other, 0))  # another address of this namespace
    w.sendto(header(ip, int(eport)) + b"spoof-addr", relay)
    say(recv_or_none(w) is None and recv_or_none(u) is None,
        "a datagram from another address is dropped")
    t.close()


def case_fragment(pport, ip, eport):
    t, relay = associate(pport)
    u = udp_sock()
    u.sendto(header(ip, int(eport), frag=1) + b"fragment-1", relay)
    say(recv_or_none(u) is None, "a fragment (FRAG=1) is dropped")
    u.sendto(header(ip, int(eport), frag=0x81) + b"fragment-last", relay)
    say(recv_or_none(u) is None, "a last fragment (FRAG=0x81) is dropped")
    got = round_trip(u, relay, ip, int(eport), b"whole")
    say(got is not None, "a whole datagram after them still echoes")
    t.close()


def case_closes(pport, ip, eport):
    t, relay = associate(pport)
    u = udp_sock()
    say(round_trip(u, relay, ip, int(eport), b"before-close") is not None,
        "echo before the TCP connection closes")
    t.close()
    time.sleep(0.5)
    u.sendto(header(ip, int(eport)) + b"after-close", relay)
    say(recv_or_none(u) is None, "nothing after the TCP connection closed")


def case_idle(pport, idle_s):
    t, relay = associate(pport)
    t.settimeout(float(idle_s) + 5)
    start = time.monotonic()
    try:
        got = t.recv(1)
    except socket.timeout:
        got = None
    took = time.monotonic() - start
    say(got == b"", "an idle association's TCP connection is closed by the proxy",
        "got %r after %.1f s" % (got, took))


def case_bench(pport, host, eport, n):
    t, relay = associate(pport) if pport != "direct" else (None, None)
    u = udp_sock(timeout=2.0)
    lat = []
    payload = b"x" * 64
    start = time.monotonic()
    for _ in range(int(n)):
        t0 = time.monotonic_ns()
        if relay is None:
            u.sendto(payload, (host, int(eport)))
        else:
            u.sendto(header(host, int(eport)) + payload, relay)
        if recv_or_none(u) is None:
            continue
        lat.append(time.monotonic_ns() - t0)
    took = time.monotonic() - start
    lat.sort()
    if not lat:
        print("rate 0 0 0")
        return
    print("rate %.0f %d %d" % (len(lat) / took, lat[len(lat) // 2] // 1000,
                               lat[min(len(lat) - 1, len(lat) * 99 // 100)] // 1000))
    if t is not None:
        t.close()


def case_reload(pport, ip, eport, settings, pid, log):
    """A reload that drops the rule: the same association's next datagram
    to that destination is judged again, and denied. The settings file is
    put back (and reloaded) at the end."""
    import os
    import signal

    def reload(text):
        with open(log) as f:
            before = f.read().count("event=reload ")
        with open(settings, "w") as f:
            f.write(text)
        os.kill(int(pid), signal.SIGHUP)
        for _ in range(100):
            with open(log) as f:
                if f.read().count("event=reload ") > before:
                    time.sleep(0.3)  # the workers take the new policy from their mailbox
                    return True
            time.sleep(0.05)
        return False

    with open(settings) as f:
        old = f.read()
    t, relay = associate(pport)
    u = udp_sock()
    say(round_trip(u, relay, ip, int(eport), b"before-reload") is not None,
        "echo before a reload")
    stricter = re.sub(r'"udp:%s:%s",\s*' % (re.escape(ip), eport), "", old)
    say(stricter != old and reload(stricter), "the reload dropping udp:10.9.0.1 was applied")
    u.sendto(header(ip, int(eport)) + b"after-reload", relay)
    say(recv_or_none(u) is None, "after the reload the same association's datagram is denied")
    t.close()
    reload(old)


def case_v6(pport6, name, eport, ip6):
    """Over IPv6: the control connection to [::1], the relay on ::1, a
    destination by name (AAAA) and by address (ATYP 4)."""
    t = socket.create_connection(("::1", int(pport6)), timeout=5)
    t.sendall(b"\x05\x01\x00")
    t.recv(2)
    t.sendall(b"\x05\x03\x00\x04" + b"\x00" * 16 + b"\x00\x00")
    r = t.recv(22)
    say(len(r) == 22 and r[:4] == b"\x05\x00\x00\x04" and r[4:20] == socket.inet_pton(
        socket.AF_INET6, "::1"), "IPv6: the reply names a relay on ::1", r.hex())
    relay = ("::1", struct.unpack(">H", r[20:22])[0])
    u = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    u.settimeout(0.6)
    want = (b"\x00\x00\x00\x04" + socket.inet_pton(socket.AF_INET6, ip6) +
            struct.pack(">H", int(eport)))
    for how, hdr in (("name", header(name, int(eport))), ("address", want)):
        got = None
        for _ in range(3):
            u.sendto(hdr + b"v6-" + how.encode(), relay)
            got = recv_or_none(u)
            if got is not None:
                break
        say(got is not None and got[0] == want + b"v6-" + how.encode(),
            "IPv6: a destination by %s echoes, wrapped with ATYP 4" % how, repr(got))
    t.close()


def case_suite(pport, eport, idle_s, settings=None, pid=None, log=None):
    """Every case of socks_udp.sh in one process (a Python start costs
    seconds on a loaded machine)."""
    case_allowed(pport, "echo.test", eport, "10.9.0.1")
    case_literal(pport, "10.9.0.1", eport)
    for host in ("blocked.test", "open.test", "tcp-only.test", "10.9.0.2"):
        case_denied(pport, host, eport)
    case_spoofed(pport, "10.9.0.1", eport, "10.9.0.3")
    case_fragment(pport, "10.9.0.1", eport)
    case_closes(pport, "10.9.0.1", eport)
    if settings is not None:
        case_reload(pport, "10.9.0.1", eport, settings, pid, log)
    case_idle(pport, idle_s)


def case_runsuite(pport, eport):
    """What socks_udp.sh checks from inside sluice run's sandbox."""
    case_allowed(pport, "echo.test", eport, "10.9.0.1")
    case_literal(pport, "10.9.0.1", eport)
    case_denied(pport, "blocked.test", eport)
    case_denied(pport, "tcp-only.test", eport)
    case_fragment(pport, "10.9.0.1", eport)


def main():
    pport, case, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    cases = {"allowed": case_allowed, "literal": case_literal, "denied": case_denied,
             "spoofed": case_spoofed, "fragment": case_fragment, "closes": case_closes,
             "idle": case_idle, "bench": case_bench, "suite": case_suite,
             "runsuite": case_runsuite, "reload": case_reload, "v6": case_v6}
    try:
        cases[case](pport if pport == "direct" else int(pport), *args)
    except Exception as e:  # a failure to associate is a failed check
        say(False, case, "%s: %s" % (type(e).__name__, e))


if __name__ == "__main__":
    main()
