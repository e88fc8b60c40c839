#!/usr/bin/env python3
r"""run.py - the table-driven adversarial suite against a running `sluice proxy`.

usage: run.py CONFIG.json TABLE.tsv...

CONFIG (written by adversarial.sh) names the proxy's HTTP and SOCKS5 ports
(and an optional second SOCKS5 port that requires RFC 1929 credentials), the
control port PO, the trap port PT, the dnsmasq query log, whether ::1 is
usable and whether off-host rows may run (only inside a private network
namespace, where nothing can leave the machine).

Every listener below is opened here and logs every accept with the first
bytes it receives:
  control  127.0.0.1:PO and [::1]:PO - allow-listed by IP:port; answers HTTP
  traps    127.0.0.1:PT, 127.0.0.2:PT, 127.0.0.2:PO, 127.0.0.3:PO,
           127.1.2.3:PO, [::1]:PT - no rule allows them
Names in dnsmasq resolve to these addresses, and IP-literal targets spell
them, so a target that sluice dialed by mistake shows up as an accept.

A table row (TSV, '#' comments, blank lines ignored):
  NAME  PROTO  TARGET-OR-BYTES  EXPECT  FLAGS
PROTO
  get      "GET http://TARGET/ HTTP/1.1" + Host: TARGET
  connect  "CONNECT TARGET HTTP/1.1" + Host: TARGET
  http     raw bytes on the HTTP port (\r \n \t \0 \\ \xHH escapes)
  sdomain  SOCKS5 greeting + CONNECT, ATYP domain; TARGET is HOST:PORT
           (the host part may hold escapes; the last ':' splits the port)
  sipv4    SOCKS5 CONNECT ATYP IPv4; TARGET is a.b.c.d:PORT
  sipv6    SOCKS5 CONNECT ATYP IPv6; TARGET is [v6]:PORT
  socks    raw hex bytes on the SOCKS5 port (greeting included)
  sauth    raw hex bytes on the SOCKS5 port that requires credentials
EXPECT
  http:   responses separated by ',', each a status or alternatives
          'a|b'; '+close' at the end: the connection must then be closed;
          'eof': closed without any response
  socks:  hex the reply must equal, or 'rXX' (method 00 accepted, then a
          10-byte reply with code XX), 'udp' (a UDP ASSOCIATE success naming
          a relay on 127.0.0.1), '|' for alternatives, '+close'
FLAGS (comma separated)
  dns        DNS queries are allowed for this row (an allowed name)
  ctl        exactly one connection must reach the control (and no trap)
  ctl2       two connections to the control
  early=TXT  TXT is sent right after the request; it must reach no trap
             (nor the control unless ctl)
  fwd~TXT    the control received TXT      fwd!TXT  it did not
  offhost    a mistaken dial would leave loopback: run only in a netns
  v6         needs ::1
Without 'dns' the row must cause no DNS query at all; without ctl no
listener may see a connection. Placeholders: {PO} {PT} {HP} {SP} {POH}
{PTH} (ports as 4 hex digits) {PO65536} {PO2E32} {PAD5000} {METHODS254} {LONG63}
{LONG64} {NAME253} {NAME254} {D255}.

Output: "ok - FAMILY: NAME" / "not ok - ..." per row, then the global
checks. Only 127.0.0.0/8 and ::1 are ever contacted.
"""
import json
import os
import re
import select
import socket
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "http-helpers"))
import raw  # noqa: E402  (its unescape: one escape syntax for every raw table)

CFG = json.load(open(sys.argv[1]))
PO, PT, HP, SP = CFG["po"], CFG["pt"], CFG["hp"], CFG["sp"]
V6 = CFG["v6"]
NETNS = CFG["netns"]

# ---------------------------------------------------------------------------
# listeners


class Rec:
    def __init__(self, role, local, peer):
        self.role, self.local, self.peer = role, local, peer
        self.data = b""


RECORDS = []
LOCK = threading.Lock()
CTL_ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\nConnection: close\r\n\r\ncontrol\n"


def request_complete(data):
    """A whole head and its Content-Length body (the control answers then)."""
    i = data.find(b"\r\n\r\n")
    if i < 0:
        return False
    m = re.search(rb"\r\ncontent-length: *([0-9]+)", data[:i], re.I)
    return len(data) >= i + 4 + (int(m.group(1)) if m else 0)


def serve(conn, rec):
    conn.settimeout(10.0)  # the proxy's request bytes may come late under load
    try:
        while len(rec.data) < 65536:
            d = conn.recv(4096)
            if not d:
                break
            with LOCK:
                rec.data += d
            if rec.role.startswith("control") and request_complete(rec.data):
                conn.sendall(CTL_ANSWER)
                break
    except OSError:
        pass
    try:
        conn.close()
    except OSError:
        pass


def accept_loop(socks):
    while True:
        r, _, _ = select.select(list(socks), [], [])
        for s in r:
            try:
                conn, peer = s.accept()
            except OSError:
                continue
            rec = Rec(socks[s][0], socks[s][1], peer)
            with LOCK:
                RECORDS.append(rec)
            threading.Thread(target=serve, args=(conn, rec), daemon=True).start()


def open_listeners():
    socks = {}
    plan = [("control", "127.0.0.1", PO), ("trap", "127.0.0.1", PT), ("trap", "127.0.0.2", PT),
            ("trap", "127.0.0.2", PO), ("trap", "127.0.0.3", PO), ("trap", "127.1.2.3", PO)]
    if V6:
        plan += [("control6", "::1", PO), ("trap", "::1", PT)]
    for role, addr, port in plan:
        fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((addr, port))
        s.listen(64)
        socks[s] = (role, "%s:%d" % (addr, port))
    threading.Thread(target=accept_loop, args=(socks,), daemon=True).start()
    return socks


# ---------------------------------------------------------------------------
# helpers

def unescape(s):
    return raw.unescape(s, "utf-8")


def subst(s):
    rep = {
        "{PO}": str(PO), "{PT}": str(PT), "{HP}": str(HP), "{SP}": str(SP),
        "{PAD5000}": "p" * 5000, "{POH}": "%04x" % PO, "{PTH}": "%04x" % PT,
        "{METHODS254}": "01" * 254, "{PO65536}": str(PO + 65536), "{PO2E32}": str(PO + 2 ** 32), "{LONG63}": "a" * 63, "{LONG64}": "a" * 64,
        # 253 and 254 bytes, ending in .wild.test (allowed by *.wild.test)
        "{NAME253}": ("a" * 61 + ".") * 3 + "b" * (253 - 186 - 10) + ".wild.test",
        "{NAME254}": ("a" * 61 + ".") * 3 + "b" * (254 - 186 - 10) + ".wild.test",
        "{D255}": ("a" * 61 + ".") * 4 + "b" * (255 - 248 - 5) + ".test",
    }
    for k, v in rep.items():
        s = s.replace(k, v)
    return s


def esc(b):
    return "".join(chr(x) if 32 <= x < 127 and x != 92 else "\\x%02x" % x for x in b)


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.buf = b""
        self.eof = False

    def send(self, data):
        try:
            self.s.sendall(data)
            return True
        except OSError:
            return False

    def fill(self, timeout):
        if self.eof:
            return False
        self.s.settimeout(timeout)
        try:
            d = self.s.recv(65536)
        except socket.timeout:
            return False
        except OSError:
            self.eof = True
            return False
        if not d:
            self.eof = True
            return False
        self.buf += d
        return True

    def exact(self, n, timeout=10.0):
        end = time.monotonic() + timeout
        while len(self.buf) < n and time.monotonic() < end:
            if not self.fill(max(0.05, end - time.monotonic())) and self.eof:
                break
        d, self.buf = self.buf[:n], self.buf[n:]
        return d

    def line(self, timeout=10.0):
        end = time.monotonic() + timeout
        while b"\r\n" not in self.buf:
            if time.monotonic() >= end or (not self.fill(max(0.05, end - time.monotonic()))
                                           and self.eof):
                return None
        i = self.buf.index(b"\r\n")
        ln, self.buf = self.buf[:i], self.buf[i + 2:]
        return ln

    def closed(self, timeout=5.0):
        """True when the peer closes (extra bytes are dropped) within timeout."""
        end = time.monotonic() + timeout
        self.buf = b""
        while time.monotonic() < end:
            if not self.fill(max(0.05, end - time.monotonic())):
                if self.eof:
                    return True
        return False

    def close(self):
        try:
            self.s.close()
        except OSError:
            pass


def http_response(c, head_only=False):
    """Reads one response: its status (int), or None at EOF/timeout."""
    while True:
        st = c.line()
        if st is None:
            return None
        h = {}
        while True:
            ln = c.line()
            if ln is None:
                return None
            if ln == b"":
                break
            k, _, v = ln.partition(b":")
            h[k.strip().lower()] = v.strip()
        try:
            code = int(st.split(b" ")[1])
        except (IndexError, ValueError):
            return -1
        if 100 <= code < 200 and code != 101:
            continue
        if head_only or code in (101, 204, 304):
            return code
        if b"chunked" in h.get(b"transfer-encoding", b"").lower():
            while True:
                sz = c.line()
                if sz is None:
                    return code
                n = int(sz.split(b";")[0], 16)
                if n == 0:
                    while True:
                        t = c.line()
                        if t is None or t == b"":
                            break
                    return code
                c.exact(n)
                c.line()
        if b"content-length" in h:
            c.exact(int(h[b"content-length"]))
            return code
        # close-delimited
        c.closed(10.0)
        return code


# ---------------------------------------------------------------------------
# rows

def socks_addr(proto, target):
    host, _, port = target.rpartition(":")
    port = int(port)
    if proto == "sdomain":
        h = unescape(host)
        return b"\x03" + bytes([len(h)]) + h + struct.pack(">H", port)
    if proto == "sipv4":
        return b"\x01" + socket.inet_pton(socket.AF_INET, host) + struct.pack(">H", port)
    return b"\x04" + socket.inet_pton(socket.AF_INET6, host.strip("[]")) + struct.pack(">H", port)


def run_http(req, expect, early):
    close = expect.endswith("+close")
    want = expect[:-6] if close else expect
    c = Conn(HP)
    c.send(req + early)
    got = []
    if want == "eof":
        ok = c.closed(15.0)
        c.close()
        return ok, "closed" if ok else "not closed"
    for alts in want.split(","):
        code = http_response(c)
        got.append(str(code) if code is not None else "none")
        if code is None or str(code) not in alts.split("|"):
            c.close()
            return False, "responses " + ",".join(got)
    if close and not c.closed(10.0):
        c.close()
        return False, "responses %s, connection left open" % ",".join(got)
    c.close()
    return True, ",".join(got) + (" close" if close else "")


def run_socks(port, data, expect, early):
    close = "+close" in expect
    alts = []
    for a in expect.replace("+close", "").split("|"):
        if re.fullmatch(r"r[0-9a-f]{2}", a):
            a = "0500" + "05" + a[1:] + "0001000000000000"
        elif a == "udp":
            a = "udp" + "0" * 21  # 12 bytes read, matched by the pattern below
        alts.append("" if a == "eof" else a)
    c = Conn(port)
    c.send(data + early)
    n = max(len(a) for a in alts) // 2
    got = c.exact(n, 10.0).hex()
    # "udp": a UDP ASSOCIATE success naming the relay on 127.0.0.1, any port
    ok = got in alts or (any(a.startswith("udp") for a in alts) and
                         re.fullmatch(r"0500050000017f000001[0-9a-f]{4}", got) is not None)
    if ok and close and not c.closed(10.0):
        c.close()
        return False, "reply %s, connection left open" % got
    c.close()
    return ok, "reply " + (got or "none (closed)")


def run_check(target, expect):
    """`sluice check --json TARGET`: EXPECT is the decision (allow, deny, ask)
    or 'refused' (exit 2, the target is invalid)."""
    import subprocess
    p = subprocess.run([CFG["sluice"], "check", "--settings", CFG["settings"], "--json", "--",
                        unescape(target).decode("utf-8", "surrogateescape")],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
    out = p.stdout.decode(errors="replace").strip()
    if expect == "refused":
        return p.returncode == 2, "exit %d: %s" % (p.returncode, out)
    m = re.search(r'"decision":"([a-z]+)"', out)
    got = m.group(1) if m else "?"
    return p.returncode == 0 and got in expect.split("|"), "exit %d: %s" % (p.returncode, out)


def build(proto, target):
    t = subst(target)
    if proto == "get":
        tb = unescape(t)
        return b"GET http://" + tb + b"/ HTTP/1.1\r\nHost: " + tb + b"\r\n\r\n"
    if proto == "connect":
        tb = unescape(t)
        return b"CONNECT " + tb + b" HTTP/1.1\r\nHost: " + tb + b"\r\n\r\n"
    if proto == "http":
        return unescape(t)
    if proto in ("sdomain", "sipv4", "sipv6"):
        return b"\x05\x01\x00" + b"\x05\x01\x00" + socks_addr(proto, t)
    if proto in ("socks", "sauth"):
        return bytes.fromhex(t.replace(" ", ""))
    if proto == "check":
        return b""
    raise ValueError("unknown proto " + proto)


def dns_size():
    try:
        return os.path.getsize(CFG["dnslog"])
    except OSError:
        return 0


def dns_new(since):
    with open(CFG["dnslog"], "rb") as f:
        f.seek(since)
        return [ln.decode(errors="replace") for ln in f.read().splitlines()
                if b"query[" in ln]


class Tally:
    def __init__(self):
        self.passed = self.failed = self.skipped = 0
        self.families = {}

    def ok(self, name):
        self.passed += 1
        print("ok - " + name, flush=True)

    def bad(self, name, why):
        self.failed += 1
        print("not ok - " + name, flush=True)
        for ln in why.splitlines():
            print("#   " + ln, flush=True)

    def skip(self, name, why):
        self.skipped += 1
        print("ok - %s # SKIP %s" % (name, why), flush=True)


TALLY = Tally()
EARLY_TOKENS = []


def run_row(family, name, proto, target, expect, flags):
    label = "%s: %s" % (family, name)
    fl = [f for f in flags.split(",") if f and f != "-"]
    if "offhost" in fl and not NETNS:
        TALLY.skip(label, "a mistaken dial would leave loopback; runs only in a network namespace")
        return
    if "v6" in fl and not V6:
        TALLY.skip(label, "no ::1 here")
        return
    early = b""
    want_ctl = 0
    for f in fl:
        if f.startswith("early="):
            early = unescape(subst(f[6:]))
            EARLY_TOKENS.append(early)
        elif f == "ctl":
            want_ctl = 1
        elif f == "ctl2":
            want_ctl = 2
        elif f == "ctl?":
            want_ctl = -1
    try:
        data = build(proto, target)
    except ValueError as e:
        TALLY.bad(label, "bad row: %s" % e)
        return
    with LOCK:
        nrec = len(RECORDS)
    dsz = dns_size()
    if proto == "check":
        okr, detail = run_check(subst(target), expect)
    elif proto in ("get", "connect", "http"):
        okr, detail = run_http(data, expect, early)
    else:
        port = CFG["sp_auth"] if proto == "sauth" else SP
        okr, detail = run_socks(port, data, expect, early)
    # a mistaken dial happens before the answer; give stragglers a moment
    time.sleep(0.05)
    # a tunnel's answer can come before accept_loop's thread (the GIL, a
    # loaded machine) has recorded the control's connection: wait for the
    # connections a row wants (10 s at most); more than wanted still fails
    if want_ctl > 0:
        end = time.monotonic() + 10
        while time.monotonic() < end:
            with LOCK:
                n = sum(1 for r in RECORDS[nrec:] if r.role.startswith("control"))
            if n >= want_ctl:
                break
            time.sleep(0.05)
    with LOCK:
        recs = RECORDS[nrec:]
        datas = [(r.role, r.local, bytes(r.data)) for r in recs]
    # wait for the control's request bytes to arrive (forward checks)
    if want_ctl and any(f.startswith("fwd") for f in fl):
        end = time.monotonic() + 3
        while time.monotonic() < end:
            with LOCK:
                datas = [(r.role, r.local, bytes(r.data)) for r in RECORDS[nrec:]]
            if all(request_complete(d) for role, _, d in datas if role.startswith("control")):
                break
            time.sleep(0.05)
    problems = []
    if not okr:
        problems.append("outcome: want %s, got %s" % (expect, detail))
    ctl = [d for d in datas if d[0].startswith("control")]
    traps = [d for d in datas if d[0] == "trap"]
    if traps:
        problems.append("DIALED a trap: " + "; ".join("%s got %s" % (l, esc(d[:80])) for _, l, d in traps))
    if want_ctl == -1:
        if len(ctl) > 1 or (len(ctl) == 1 and not okr):
            problems.append("%d connection(s) reached the control, want at most one" % len(ctl))
    elif len(ctl) != want_ctl:
        problems.append("%d connection(s) reached the control, want %d" % (len(ctl), want_ctl))
    if early and want_ctl <= 0:
        for _, l, d in datas:
            if early in d:
                problems.append("early data reached " + l)
    for f in fl:
        if f.startswith("fwd~") or f.startswith("fwd!"):
            txt = unescape(subst(f[4:]))
            seen = any(txt in d for _, _, d in ctl)
            if f[3] == "~" and not seen:
                problems.append("control did not receive %r: %s" % (txt, [esc(d[:200]) for _, _, d in ctl]))
            if f[3] == "!" and seen:
                problems.append("control received %r" % txt)
    if "dns" not in fl and "dns?" not in fl:
        q = dns_new(dsz)
        if q:
            problems.append("RESOLVED: " + "; ".join(x.split(": ", 1)[-1] for x in q))
    if problems:
        TALLY.bad(label, "\n".join(problems))
    else:
        TALLY.ok(label)
    TALLY.families[family] = TALLY.families.get(family, 0) + 1


def main():
    open_listeners()
    # self-test: every listener logs an accept and its bytes
    with LOCK:
        n0 = len(RECORDS)
    plan = [("127.0.0.1", PO), ("127.0.0.1", PT), ("127.0.0.2", PT), ("127.0.0.2", PO),
            ("127.0.0.3", PO), ("127.1.2.3", PO)] + ([("::1", PO), ("::1", PT)] if V6 else [])
    for a, p in plan:
        s = socket.create_connection((a, p), timeout=5)
        s.sendall(b"selftest\r\n\r\n")
        s.close()
    end = time.monotonic() + 5
    while time.monotonic() < end:
        with LOCK:
            done = len(RECORDS) - n0 == len(plan) and all(b"selftest" in r.data for r in RECORDS[n0:])
        if done:
            break
        time.sleep(0.05)
    if done:
        TALLY.ok("setup: all %d listeners log accepts and bytes" % len(plan))
    else:
        TALLY.bad("setup: listeners", "not every listener logged its self-test connection")
    with LOCK:
        del RECORDS[:]
    for path in sys.argv[2:]:
        family = os.path.splitext(os.path.basename(path))[0]
        for lineno, ln in enumerate(open(path, encoding="utf-8"), 1):
            ln = ln.rstrip("\n")
            if not ln.strip() or ln.lstrip().startswith("#"):
                continue
            cols = [c for c in re.split(r"\t+| {2,}", ln.strip()) if c != ""]
            if len(cols) == 4:
                cols.append("-")
            if len(cols) != 5:
                TALLY.bad("%s:%d" % (path, lineno), "want 5 tab-separated columns: %r" % ln)
                continue
            run_row(family, *cols)
    # global: after a pause, every connection seen belongs to a control row
    time.sleep(0.5)
    with LOCK:
        traps = [r for r in RECORDS if r.role == "trap"]
        leaked = [r for r in RECORDS for t in EARLY_TOKENS if t and t in r.data and r.role == "trap"]
    if traps:
        TALLY.bad("global: no trap listener saw a connection during the whole run",
                  "\n".join("%s from %s: %s" % (r.local, r.peer, esc(r.data[:80])) for r in traps))
    else:
        TALLY.ok("global: no trap listener saw a connection during the whole run")
    if leaked:
        TALLY.bad("global: early bytes of denied requests reached no listener", str(len(leaked)))
    else:
        TALLY.ok("global: early bytes of denied requests reached no listener")
    fams = ", ".join("%s %d" % kv for kv in TALLY.families.items())
    print("# rows per family: " + fams)
    print("# run.py: %d passed, %d failed, %d skipped" % (TALLY.passed, TALLY.failed, TALLY.skipped))
    sys.exit(1 if TALLY.failed else 0)


if __name__ == "__main__":
    main()
