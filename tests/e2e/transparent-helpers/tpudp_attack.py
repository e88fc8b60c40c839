#!/usr/bin/env python3
"""tests/e2e/transparent-helpers/tpudp_attack.py - runs INSIDE `sluice run
--transparent` (tests/e2e/tpudp_attack.sh, rt-14): a hostile command trying
to get a datagram (or any packet) out of the sandbox's namespace to a
destination the policy does not allow, or to the host's own loopback
services, through transparent UDP's relays (run/tp_udp.c).

The script outside owns the verdicts that matter: victim servers (on the
host's loopback, the host's own veth address, the origins' denied and
metadata addresses) log every datagram they get and must log nothing.
Here: "ok TEXT" / "bad TEXT" for what the command itself can see, and
"note TEXT" for facts that are reported, not judged.

usage: tpudp_attack.py MODE EPORT VPORT [ARGS]
  attack          guard forms by name and literal, synthetic guessing,
                  spoofed sources, IP options, other protocols, routes,
                  DNS to port 53 of loopback/host addresses
  replies DIR     an allowed flow held open while the script outside sends
                  to sluice's host sockets from other hosts and ports
  bind            (allowLocalBinding) binding relay ports beside the relays
  held NAME PORT  64 KiB datagrams to a name that never resolves, from many
                  sockets: held bytes and flows stay bounded
  flows N         N source ports to the allowed literal, then a flood of
                  64 KiB datagrams to the denied one: sluice keeps serving
  collide         two allowed names whose log hashes collide: both must be
                  logged (the script checks)
  dnsport         (udp:10.9.0.53:53 allowed) DNS to another port of that
                  resolver, DNS over TCP to resolvers
"""
import ctypes
import errno
import os
import socket
import struct
import sys
import threading
import time

ALLOWED, DENIED, HOSTADDR, META = "10.9.0.1", "10.9.0.2", "10.9.0.254", "169.254.169.254"
libc = ctypes.CDLL(None, use_errno=True)


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


def udp(fam=socket.AF_INET, timeout=1.0, proto=0):
    s = socket.socket(fam, socket.SOCK_DGRAM, proto)
    s.settimeout(timeout)
    return s


def fam_of(host):
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def learn(host, port):
    """connect() a throwaway UDP socket to host:port: the relay for port is
    made (tp_call.c), as any UDP client's connect() or getaddrinfo() would."""
    try:
        s = socket.socket(fam_of(host), socket.SOCK_DGRAM)
        s.connect((host, port))
        s.close()
    except OSError:
        pass


def outcome(s, timeout=0.4):
    """What came back on s: 'refused', 'nothing', or 'got DATA from PEER'."""
    s.settimeout(timeout)
    try:
        data, peer = s.recvfrom(70000)
        return "got %r from %s" % (data[:30], peer)
    except socket.timeout:
        return "nothing"
    except OSError as e:
        return "refused" if e.errno == errno.ECONNREFUSED else "error %s" % e


def try_send(host, port, payload, connect=True, proto=0, timeout=0.4):
    """Sends payload to host:port (connected or not): 'refused', 'nothing',
    'got ...', or the error of the call (what came back within TIMEOUT)."""
    try:
        s = udp(fam_of(host), proto=proto)
    except OSError as e:
        return "socket: %s" % errno.errorcode.get(e.errno, e)
    try:
        if host.startswith("255.") or host.startswith("224.") or host.startswith("239."):
            s.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
        if connect:
            s.connect((host, port))
            s.send(payload)
        else:
            learn(host, port)
            s.sendto(payload, (host, port))
        return outcome(s, timeout)
    except OSError as e:
        return "call: %s" % errno.errorcode.get(e.errno, e)
    finally:
        s.close()


def echo(host, port, payload):
    """try_send() for a datagram that must be echoed: UDP may drop and a
    loaded machine (ASan, CI, a flood running) is slow, so up to 4 tries,
    waiting 1, 2, 4, then 8 s. Its last outcome."""
    for t in (1.0, 2.0, 4.0, 8.0):
        r = try_send(host, port, payload, timeout=t)
        if got_reply(r):
            break
    return r


def got_reply(r):
    return r.startswith("got ")


def leaked(r):
    """A victim answered (they answer b"VICTIM " + what they got)."""
    return "VICTIM" in r


def synthetic(name, fam=socket.AF_INET):
    return socket.getaddrinfo(name, 9, fam, socket.SOCK_DGRAM)[0][4][0]


def dns_query(name, qtype=1, flags=0x0100, extra=b"", arcount=0):
    q = struct.pack(">HHHHHH", 0x5151, flags, 1, 0, 0, arcount)
    for label in name.split("."):
        q += bytes([len(label)]) + label.encode()
    return q + b"\0" + struct.pack(">HH", qtype, 1) + extra


def dns_ask(server, name, port=53, qtype=1, raw=None, timeout=2.0, tries=3):
    """(rcode, answer count, reply source, reply) or (None, error, None, None).
    Asked again when nothing came (UDP may drop): TRIES times, waiting
    TIMEOUT, then twice and three times that; tries=1 where no answer is
    what a check wants."""
    for i in range(tries):
        s = udp(fam_of(server), timeout * (i + 1))
        try:
            learn(server, port)
            s.sendto(raw if raw is not None else dns_query(name, qtype), (server, port))
            d, peer = s.recvfrom(70000)
            break
        except socket.timeout as e:
            err = e
        except OSError as e:
            return None, str(e), None, None
        finally:
            s.close()
    else:
        return None, str(err), None, None
    if len(d) < 12:
        return None, "short %r" % d, peer, d
    return d[3] & 15, struct.unpack(">H", d[6:8])[0], peer, d


# ---- attack ---------------------------------------------------------------


def guard_names(eport, vport):
    """Names an allowed udp:*.g.test:* rule matches whose answers are the
    host's loopback, its own address, metadata, multicast, broadcast, 0.0.0.0:
    every datagram must be refused, nothing may come back."""
    for name, fam in (("lo.g.test", 4), ("lo6.g.test", 6), ("mapped.g.test", 6),
                      ("meta.g.test", 4), ("self.g.test", 4), ("mc.g.test", 4),
                      ("bc.g.test", 4), ("zero.g.test", 4), ("mix.g.test", 4)):
        f = socket.AF_INET if fam == 4 else socket.AF_INET6
        try:
            a = synthetic(name, f)
        except OSError as e:
            ok("%s does not resolve in the sandbox (%s)" % (name, e))
            continue
        for port in (vport, eport):
            r = try_send(a, port, b"leak-name-" + name.encode())
            if name == "mix.g.test":  # a loopback and an allowed answer: only the allowed one is used
                check(not leaked(r), "name %s (%s) port %d: never the loopback answer (%s)"
                      % (name, a, port, r), r)
            else:
                check(not got_reply(r), "name %s (%s) port %d: refused, no reply (%s)"
                      % (name, a, port, r), r)
    # localhost asked of the sandbox's resolver by DNS (not /etc/hosts)
    rc, an, _, d = dns_ask("127.0.0.1", "localhost")
    if rc == 0 and an:
        a = socket.inet_ntoa(d[-4:])
        r = try_send(a, vport, b"leak-localhost")
        check(not got_reply(r), "'localhost' by the sandbox resolver (%s): refused (%s)" % (a, r), r)
    else:
        ok("'localhost' gets no address from the sandbox's resolver (rcode %s)" % rc)


LITERALS4 = ["127.0.0.1", "127.0.0.2", "127.0.0.53", "0.0.0.0", HOSTADDR, META, "255.255.255.255",
             "10.9.0.255", "224.0.0.1", "239.1.2.3", DENIED, "198.18.0.0", "198.19.255.255",
             "100.64.0.1", "240.0.0.1"]
LITERALS6 = ["::1", "::", "::ffff:127.0.0.1", "::ffff:10.9.0.2", "::ffff:169.254.169.254",
             "::127.0.0.1", "::a09:2", "64:ff9b::a09:2", "64:ff9b::7f00:1", "2002:a09:2::1",
             "2002:7f00:1::1", "fd00:9::2", "fe80::1", "ff02::1", "ff05::1:3", "fd00:9::fe"]


def guard_literals(eport, vport):
    for host in LITERALS4 + LITERALS6:
        for port, connect in ((vport, True), (eport, True), (vport, False)):
            if True:
                r = try_send(host, port, b"leak-literal", connect=connect)
                check(not got_reply(r), "literal %s port %d (%s): no reply (%s)" %
                      (host, port, "connect" if connect else "sendto", r), r)


def synthetic_guess(eport, vport):
    """Synthetic addresses never handed out (and those of other names): each
    is judged by the name it stands for, else refused as a private literal."""
    replies = {}
    for i in list(range(0, 40)) + [65535, 131070, 131071]:
        a = socket.inet_ntoa(struct.pack(">I", 0xC6120000 + i))
        r = try_send(a, eport, b"leak-synthetic", connect=False)
        if got_reply(r):
            replies[a] = r
    a6 = "fd53:6c75:6963:6500::%x" % 1
    r = try_send(a6, eport, b"leak-synthetic6")
    ok("synthetic guessing: replies from %d of 43 guessed addresses (the allowed names')"
       % len(replies))
    check(not leaked(r), "a guessed IPv6 synthetic address: no victim answered", r)
    bad_ones = [k for k, v in replies.items() if leaked(v)]
    check(not bad_ones, "no guessed synthetic address reached a victim", bad_ones)


class InPktinfo(ctypes.Structure):
    _fields_ = [("ifindex", ctypes.c_int), ("spec_dst", ctypes.c_uint32), ("addr", ctypes.c_uint32)]


def spoof(eport, vport):
    """Source and route tricks: IP_PKTINFO with another source, IP_TRANSPARENT,
    SO_BINDTODEVICE, IP source-route options (LSRR/SSRR), TTL 1, TOS."""
    learn(DENIED, eport)
    for src in (ALLOWED, HOSTADDR, "127.0.0.1"):
        s = udp()
        try:
            pi = struct.pack("=i4s4s", 0, socket.inet_aton(src), socket.inet_aton(src))
            s.sendmsg([b"leak-pktinfo"], [(socket.IPPROTO_IP, 8, pi)], 0,  # IP_PKTINFO
                      (DENIED, eport))
            r = outcome(s)
        except OSError as e:
            r = "call: %s" % e
        s.close()
        check(not got_reply(r), "sendmsg(IP_PKTINFO source %s) to the denied echo: no reply (%s)"
              % (src, r), r)
    s = udp()
    try:
        s.setsockopt(socket.SOL_IP, 19, 1)  # IP_TRANSPARENT
        bad("IP_TRANSPARENT is refused to the command (no CAP_NET_ADMIN)")
    except OSError as e:
        check(e.errno == errno.EPERM, "IP_TRANSPARENT refused (%s)" % errno.errorcode.get(e.errno), e)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, b"lo\0")
        s.sendto(b"leak-bindtodevice", (DENIED, eport))
        r = outcome(s)
    except OSError as e:
        r = "call: %s" % e
    s.close()
    check(not got_reply(r), "SO_BINDTODEVICE lo, sendto(denied): no reply (%s)" % r, r)
    # IP options: loose and strict source routes through the allowed address
    for kind, name in ((0x83, "LSRR"), (0x89, "SSRR")):
        for hops in ((ALLOWED,), (DENIED,), (ALLOWED, DENIED)):
            opt = bytes([kind, 3 + 4 * len(hops), 4]) + b"".join(socket.inet_aton(h) for h in hops)
            opt += b"\1" * (-len(opt) % 4)  # NOP padding
            for dst in (ALLOWED, DENIED):
                s = udp()
                try:
                    s.setsockopt(socket.IPPROTO_IP, socket.IP_OPTIONS, opt)
                    s.sendto(b"leak-" + name.encode(), (dst, eport))
                    r = outcome(s)
                except OSError as e:
                    r = "call: %s" % errno.errorcode.get(e.errno, e)
                s.close()
                # the relay judges the address the datagram was delivered to;
                # only the allowed echo may answer
                check(not leaked(r),
                      "%s via %s to %s: nothing from a denied host (%s)" % (name, ",".join(hops), dst, r), r)
    for opt, val in ((socket.IP_TTL, 1), (socket.IP_TOS, 0x10), (socket.IP_MULTICAST_LOOP, 0)):
        s = udp()
        try:
            s.setsockopt(socket.IPPROTO_IP, opt, val)
            s.sendto(b"leak-ttl", (DENIED, eport))
            r = outcome(s)
        except OSError as e:
            r = "call: %s" % e
        s.close()
        check(not got_reply(r), "IP option %d=%d, denied echo: no reply (%s)" % (opt, val, r), r)


def protocols(eport, vport):
    """Other ways out: UDP-Lite, raw and packet sockets, ICMP echo sockets,
    SCTP, DCCP, TCP Fast Open's sendto() (no connect() to notify), netlink
    route changes, nested namespaces."""
    for host in (DENIED, "127.0.0.1", HOSTADDR):
        r = try_send(host, eport if host == DENIED else vport, b"leak-udplite", proto=136)
        check(not got_reply(r), "UDP-Lite to %s: nothing back (%s)" % (host, r), r)
    r = try_send(ALLOWED, eport, b"udplite-allowed", proto=136)
    check(not got_reply(r), "UDP-Lite is not relayed even to the allowed echo (%s)" % r, r)
    for fam, typ, proto, what in ((socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_UDP, "raw UDP"),
                                  (socket.AF_INET, socket.SOCK_RAW, 255, "IPPROTO_RAW"),
                                  (socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_UDP, "raw UDPv6"),
                                  (17, socket.SOCK_RAW, 0x0300, "AF_PACKET"),
                                  (socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP, "ICMP echo"),
                                  (socket.AF_INET6, socket.SOCK_DGRAM, socket.IPPROTO_ICMPV6, "ICMPv6 echo"),
                                  (socket.AF_INET, socket.SOCK_STREAM, 132, "SCTP"),
                                  (socket.AF_INET, socket.SOCK_SEQPACKET, 132, "SCTP seqpacket"),
                                  (socket.AF_INET, 6, 33, "DCCP"),
                                  (socket.AF_INET, socket.SOCK_STREAM, 262, "MPTCP")):
        try:
            s = socket.socket(fam, typ, proto)
        except OSError as e:
            ok("%s socket refused (%s)" % (what, errno.errorcode.get(e.errno, e)))
            continue
        s.settimeout(1.0)
        r = "made"
        try:
            if typ == socket.SOCK_RAW:
                s.sendto(b"\0" * 8 + b"leak-raw", (DENIED, 0))
            elif what.startswith("ICMP"):
                s.sendto(b"\x08\0\0\0\0\1\0\1leak-ping", (DENIED if fam == socket.AF_INET else "fd00:9::2", 0))
                r = outcome(s)
            else:
                s.connect((DENIED, eport))
                r = "connected"
        except OSError as e:
            r = "call: %s" % errno.errorcode.get(e.errno, e)
        s.close()
        check(not got_reply(r) and r != "connected", "%s: nothing out (%s)" % (what, r), r)
    # TCP Fast Open: sendto() with MSG_FASTOPEN connects without connect()
    for host, port in ((DENIED, eport), ("127.0.0.1", vport), (HOSTADDR, vport)):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(2)
        try:
            s.sendto(b"leak-tfo", 0x20000000, (host, port))  # MSG_FASTOPEN
            d = s.recv(100)
            r = "got %r" % d
        except OSError as e:
            r = "call: %s" % errno.errorcode.get(e.errno, e)
        s.close()
        check(not r.startswith("got"), "TCP Fast Open sendto %s:%d: refused (%s)" % (host, port, r), r)
    # route changes over rtnetlink: RTM_DELROUTE of local 0.0.0.0/0, RTM_NEWLINK
    try:
        nl = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
        nl.bind((0, 0))
        rtm = struct.pack("=BBBBBBBBI", socket.AF_INET, 0, 0, 0, 255, 0, 0, 2, 0)  # table local, RTN_LOCAL
        attr = struct.pack("=HHI", 8, 4, 1)  # RTA_OIF lo
        body = rtm + attr
        hdr = struct.pack("=IHHII", 16 + len(body), 25, 0x1 | 0x4, 1, 0)  # RTM_DELROUTE, REQUEST|ACK
        nl.send(hdr + body)
        d = nl.recv(4096)
        err = struct.unpack("=i", d[16:20])[0]
        check(err != 0, "RTM_DELROUTE of 'local 0.0.0.0/0' refused (%s)" % errno.errorcode.get(-err, err), err)
        link = struct.pack("=BBHiII", 0, 0, 0, 0, 0, 0)
        ifname = b"evil0\0"
        a1 = struct.pack("=HH", 4 + len(ifname), 3) + ifname + b"\0" * (-len(ifname) % 4)
        kind = b"dummy\0"
        info = struct.pack("=HH", 4 + len(kind), 1) + kind + b"\0" * (-len(kind) % 4)
        a2 = struct.pack("=HH", 4 + len(info), 18) + info
        body = link + a1 + a2
        hdr = struct.pack("=IHHII", 16 + len(body), 16, 0x1 | 0x4 | 0x400 | 0x200, 2, 0)
        nl.send(hdr + body)
        d = nl.recv(4096)
        err = struct.unpack("=i", d[16:20])[0]
        check(err != 0, "RTM_NEWLINK (a new interface) refused (%s)" % errno.errorcode.get(-err, err), err)
        nl.close()
    except OSError as e:
        ok("rtnetlink refused (%s)" % e)
    r = echo(ALLOWED, eport, b"after-netlink")
    check(r.startswith("got b'after-netlink'"), "the routes are intact: the allowed echo still answers", r)
    # a nested user and network namespace
    CLONE_NEWUSER, CLONE_NEWNET = 0x10000000, 0x40000000
    pid = os.fork()
    if pid == 0:
        rc = libc.unshare(CLONE_NEWUSER | CLONE_NEWNET)
        os._exit(0 if rc != 0 else 1)
    _, st = os.waitpid(pid, 0)
    check(os.WEXITSTATUS(st) == 0, "unshare(CLONE_NEWUSER|CLONE_NEWNET) refused", st)


def port53(eport, vport):
    """DNS to port 53 of loopback, the host's own address, metadata, 0.0.0.0,
    ::1 and a broadcast: answered by sluice's resolver, never relayed
    (the host's victim resolver on 127.0.0.53:53 must see nothing)."""
    for server in ("127.0.0.53", "127.0.0.1", "0.0.0.0", HOSTADDR, META, "::1", "::ffff:127.0.0.53",
                   "10.9.0.53", "fd00:9::2"):
        rc, an, peer, d = dns_ask(server, "echo.test")
        check(rc == 0 and an == 1, "DNS to %s:53 answered by sluice's resolver (rcode %s, %s answers, from %s)"
              % (server, rc, an, peer), (rc, an))
    # QR set (a response): dropped, never relayed or answered
    rc, an, peer, _ = dns_ask("10.9.0.53", "", raw=dns_query("echo.test", flags=0x8100), tries=1)
    check(rc is None, "a DNS response sent to port 53 is dropped (%s)" % an, an)
    # EDNS, a huge query, ANY/TXT for a denied name, a compression pointer
    opt = b"\0" + struct.pack(">HHIH", 41, 65535, 0, 0)
    rc, an, peer, d = dns_ask("10.9.0.53", "", raw=dns_query("echo.test", extra=opt, arcount=1))
    check(rc == 0 and d is not None and len(d) <= 1024, "EDNS query: a short plain answer (%s B)"
          % (len(d) if d else None), rc)
    rc, an, peer, d = dns_ask("10.9.0.53", "", raw=dns_query("echo.test") + b"\0" * 60000)
    check(rc is not None and len(d) <= 1024, "a 60 KB query gets at most 1 KB back", rc)
    for qt in (16, 255):
        rc, an, _, _ = dns_ask("10.9.0.53", "blocked.test", qtype=qt)
        check(rc == 3, "type %d for a denied name: NXDOMAIN" % qt, rc)
    rc, an, _, _ = dns_ask("10.9.0.53", "", raw=struct.pack(">HHHHHH", 1, 0x100, 1, 0, 0, 0) + b"\xc0\x0c\0\1\0\1")
    check(rc == 1, "a compression pointer in the question: FORMERR", rc)
    # TCP 53 to another resolver / loopback: judged as TCP (no rule: refused)
    for server in ("10.9.0.53", "127.0.0.53", HOSTADDR):
        try:
            c = socket.create_connection((server, 53), timeout=3)
            q = dns_query("echo.test")
            c.sendall(struct.pack(">H", len(q)) + q)
            d = c.recv(2)
            r = "answered %r" % d
            c.close()
        except OSError as e:
            r = "refused %s" % errno.errorcode.get(e.errno, e)
        check(r.startswith("refused"), "DNS over TCP to %s:53 refused (no TCP rule) (%s)" % (server, r), r)


def attack(eport, vport):
    for case in (guard_names, guard_literals, synthetic_guess, spoof, protocols, port53):
        try:
            case(eport, vport)
        except Exception as e:
            bad("case %s raised %s: %s" % (case.__name__, type(e).__name__, e))
    r = echo(ALLOWED, eport, b"alive-after-attack")
    check(r.startswith("got b'alive-after-attack'"), "the allowed echo still answers after the attacks", r)


# ---- replies: other hosts aim at sluice's host sockets ----------------------


def replies(eport, vport, d):
    s = udp(timeout=3)
    s.connect((ALLOWED, eport))
    s.send(b"hold-flow")
    # one datagram each, waited for long (a loaded machine is slow): a
    # second try's late echo would count as a stray datagram below
    first = outcome(s, 10)
    check(first.startswith("got b'hold-flow'"), "an allowed flow is up", first)
    v6 = udp(socket.AF_INET6, 3)
    try:
        v6.connect(("fd00:9::1", eport))
        v6.send(b"hold-flow6")
        f6 = outcome(v6, 10)
    except OSError as e:
        f6 = str(e)
    check(f6.startswith("got b'hold-flow6'"), "an allowed IPv6 flow is up", f6)
    open(os.path.join(d, "flow-ready"), "w").close()
    for _ in range(1200):  # 60 s: the script outside is slow on a loaded machine
        if os.path.exists(os.path.join(d, "spoofed")):
            break
        time.sleep(0.05)
    else:
        bad("the script outside never sent its spoofed datagrams")
    got = []
    for sock in (s, v6):
        sock.settimeout(1.5)
        try:
            while True:
                data, peer = sock.recvfrom(70000)
                got.append((data[:30], peer))
        except OSError:
            pass
    check(not got, "no datagram from another host or port reached the command", got)
    s.send(b"still")
    r = outcome(s, 10)
    check(r.startswith("got b'still'"), "the flow still works afterwards", r)


# ---- bind (allowLocalBinding) -------------------------------------------------


def bind_cases(eport, vport):
    learn(ALLOWED, eport)
    for addr, reuse in ((("0.0.0.0", eport), False), (("0.0.0.0", eport), True),
                        (("10.9.0.1", eport), True), (("::", eport), True)):
        s = socket.socket(fam_of(addr[0]), socket.SOCK_DGRAM)
        if reuse:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        try:
            s.bind(addr)
            r = "bound"
        except OSError as e:
            r = errno.errorcode.get(e.errno, str(e))
        s.close()
        check(r != "bound", "bind %s beside the relay of port %d (reuse=%s): refused (%s)"
              % (addr, eport, reuse, r), r)
    # port 53: its relay has SO_REUSEADDR (to share 53 with the resolver on
    # 127.0.0.1); sluice refuses any bind() of port 53 in the sandbox
    # (tp_call.c run_here), so no socket of the command binds beside them
    for addr in (("0.0.0.0", 53), ("10.77.0.1", 53), ("127.0.0.1", 53), ("::", 53)):
        s = socket.socket(socket.AF_INET6 if ":" in addr[0] else socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(addr)
            s.settimeout(1)
            c = udp()
            c.sendto(dns_query("echo.test"), (addr[0] if addr[0] != "0.0.0.0" else "10.77.0.2", 53))
            try:
                data, _ = s.recvfrom(4096)
                r = "bound, and it took a query sent to %s:53" % addr[0]
            except OSError:
                r = "bound, took nothing"
            c.close()
        except OSError as e:
            r = "refused %s" % errno.errorcode.get(e.errno, e)
        s.close()
        check(r.startswith("refused"),
              "bind %s:%d with SO_REUSEADDR beside the port-53 relay/resolver: %s" % (addr[0], addr[1], r), r)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.bind(("0.0.0.0", 80))
        r = "bound"
    except OSError as e:
        r = errno.errorcode.get(e.errno, str(e))
    s.close()
    note("bind 0.0.0.0:80 (a privileged port) as uid %d: %s" % (os.getuid(), r))
    r = echo(ALLOWED, eport, b"alive-after-bind")
    check(r.startswith("got b'alive-after-bind'"), "the allowed echo still answers after the binds", r)


# ---- bounds -------------------------------------------------------------------


def alive(eport):
    rc, an, _, _ = dns_ask("127.0.0.1", "alive.test")
    r = echo(ALLOWED, eport, b"alive")
    return "dns=%s echo=%s" % ("ok" if rc == 0 else rc, "ok" if r.startswith("got b'alive'") else r)


def held(eport, vport, name, port):
    """64 KiB datagrams to NAME (whose resolution never ends: the script's
    black-hole upstream) from 600 sockets, 4 each: every new flow holds
    datagrams while the name resolves (4 per flow, 256 KiB in all, 256
    flows)."""
    a = synthetic(name)
    learn(a, port)
    big = b"h" * 65000
    sent = 0
    for i in range(600):
        s = udp()
        s.setblocking(False)
        for _ in range(4):
            try:
                s.sendto(big, (a, port))
                sent += 1
            except OSError:
                pass
        s.close()
    time.sleep(2)
    print("held sent=%d %s" % (sent, alive(eport)), flush=True)


def flows(eport, vport, n):
    sent = 0
    for i in range(n):
        s = udp()
        s.setblocking(False)
        try:
            s.sendto(b"f%d" % i, (ALLOWED, eport))
            sent += 1
        except OSError:
            pass
        s.close()
    # and a flood of 64 KiB datagrams to the denied echo while the checks run
    stop = []

    def flood():
        s = udp()
        s.setblocking(False)
        big = b"d" * 65000
        while not stop:
            try:
                s.sendto(big, (DENIED, eport))
            except OSError:
                time.sleep(0.001)

    learn(DENIED, eport)
    th = threading.Thread(target=flood, daemon=True)
    th.start()
    time.sleep(2)
    a = alive(eport)
    stop.append(1)
    th.join()
    time.sleep(1)
    print("flows sent=%d %s" % (sent, a), flush=True)


# ---- collide: log dedupe by hash -----------------------------------------------


def dest_hash(name, port, allowed):
    x = (2166136261 ^ port ^ (0x10000 if allowed else 0)) & 0xFFFFFFFF
    for b in name.encode():
        x = ((x ^ b) * 16777619) & 0xFFFFFFFF
    return x | 1


def collide(eport, vport):
    """Two names under the allowed udp:*.c.test:* whose 32-bit hash in
    run/tp_udp.c's "logged once" ring is the same: the second destination
    must be logged too (and every datagram still reaches only 10.9.0.1)."""
    seen = {}
    pair = None
    i = 0
    while pair is None and i < 400000:
        n = "h%d.c.test" % i
        h = dest_hash(n, eport, True)
        if h in seen:
            pair = (seen[h], n)
        seen[h] = n
        i += 1
    if pair is None:
        bad("no colliding pair found")
        return
    print("pair %s %s" % pair, flush=True)
    for n in pair:
        a = synthetic(n)
        r = echo(a, eport, b"collide-" + n.encode())
        check(r.startswith("got b'collide-"), "allowed name %s (%s): echoed" % (n, a), r)
    # a denied pair (no udp: rule for *.n.test): the second denial is hidden too
    seen = {}
    pair = None
    i = 0
    while pair is None and i < 400000:
        n = "d%d.n.test" % i
        h = dest_hash(n, eport, False)
        if h in seen:
            pair = (seen[h], n)
        seen[h] = n
        i += 1
    print("dpair %s %s" % pair, flush=True)
    for n in pair:
        a = synthetic(n)
        r = try_send(a, eport, b"collide-" + n.encode())
        check(not got_reply(r), "denied name %s: refused (%s)" % (n, r), r)


# ---- dnsport ----------------------------------------------------------------


def dnsport(eport, vport):
    rc, an, peer, _ = dns_ask("10.9.0.53", "echo.test")
    check(rc == 0 and peer == ("10.9.0.53", 53), "udp:10.9.0.53:53: the query reaches that resolver", (rc, peer))
    for port in (5353, 54, 52):
        rc, an, peer, _ = dns_ask("10.9.0.53", "echo.test", port=port, tries=1)
        check(rc is None, "DNS to 10.9.0.53:%d (not the allowed port): no answer (%s)" % (port, an), an)
    # huge answers from an allowed resolver: 65,000-byte datagrams come back
    # whole. UDP may drop some of the three on a loaded machine (two such
    # datagrams fill a default receive buffer, here or at the relay), so the
    # check is that whatever arrives is whole and that something arrives
    # (up to three queries), not that nothing is lost.
    sizes = []
    for attempt in range(3):
        s = udp(timeout=3)
        try:
            s.connect(("10.9.0.55", 53))
            s.send(dns_query("big.test"))
            for _ in range(3):
                sizes.append(len(s.recv(70000)))
        except OSError as e:
            sizes.append(str(e))
        s.close()
        if 65000 in sizes:
            break
    got = [n for n in sizes if isinstance(n, int)]
    check(got and all(n == 65000 for n in got),
          "an allowed resolver's 65,000-byte answers come back whole (none cut, at least one)", sizes)
    rc, an, peer, _ = dns_ask("10.9.0.54", "echo.test")
    check(rc == 0 and peer == ("10.9.0.54", 53), "DNS to 10.9.0.54:53: sluice's resolver", (rc, peer))


def main():
    mode, eport, vport = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    if mode == "attack":
        attack(eport, vport)
    elif mode == "replies":
        replies(eport, vport, sys.argv[4])
    elif mode == "bind":
        bind_cases(eport, vport)
    elif mode == "held":
        held(eport, vport, sys.argv[4], int(sys.argv[5]))
    elif mode == "flows":
        flows(eport, vport, int(sys.argv[4]))
    elif mode == "collide":
        collide(eport, vport)
    elif mode == "dnsport":
        dnsport(eport, vport)


if __name__ == "__main__":
    main()
