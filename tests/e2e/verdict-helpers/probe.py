#!/usr/bin/env python3
"""probe.py - ask the live proxy what `sluice check --resolve` said, and compare.

usage: probe.py TABLE HTTP_PORT SOCKS_PORT ASK_LOG PROXY_LOG < check-json-lines

stdin holds the output of `sluice check --resolve --json TARGET...`, one JSON
object per target. Each target goes, as it was written in the table (the proxy
normalises it itself), through the proxy's HTTP CONNECT listener and its SOCKS5
listener (as CONNECT, and as a plain GET http://TARGET/ request), both on
127.0.0.1. The proxy runs with an ask handler that allows
and records every question (ASK_LOG), inside a network namespace with only
loopback, so a dial to anything but 127.0.0.1 fails at once and no traffic
leaves.

Each side is reduced to one outcome:
  deny     403 / SOCKS reply 2 (ruled out before or after asking)
  ask      asked, then let through to the dial
  allow    let through to the dial without asking
  dnsfail  the name did not resolve (check: a lookup failure; CONNECT 502
           dns_error; SOCKS reply 4)
  (let through: CONNECT 200, 502 or 504; GET 502 or 504; SOCKS 0, 3, 5, 6)
A row passes when all three agree, the proxy's decision record (PROXY_LOG,
text or JSON) names the rule check named in its `rule` field and the source
check named in its own `source` field (or neither when check named none) and, for a deny, the proxy's reason is the one check gave (the 403 body may follow it with "; " and the hint of what to change in the settings). Prints
one TAP line per row.
"""
import ipaddress
import json
import re
import socket
import sys
import time

TIMEOUT = 15.0
DNS_WORDS = ("NXDOMAIN", "NODATA", "DNS timeout", "DNS failure", "DNS lookup")


def split_target(t):
    """Host text and port of a check target (host, host:port, [v6], [v6]:port, bare v6)."""
    if t.startswith("["):
        end = t.index("]")
        host, rest = t[1:end], t[end + 1:]
        return host, int(rest[1:]) if rest.startswith(":") else 443, True
    if t.count(":") > 1:
        return t, 443, True
    if ":" in t:
        h, p = t.rsplit(":", 1)
        return h, int(p), False
    return t, 443, False


def ask_count(path):
    try:
        with open(path, "rb") as f:
            return f.read().count(b"\n")
    except FileNotFoundError:
        return 0


def logfmt_value(line, key):
    """The value of key in a logfmt line, or "" when the key is absent."""
    m = re.search(r'(?:^|\s)%s=("(?:[^"\\]|\\.)*"|\S*)' % re.escape(key), line)
    if m is None:
        return ""
    v = m.group(1)
    return json.loads(v) if v.startswith('"') else v


def log_size(path):
    try:
        with open(path, "rb") as f:
            return len(f.read())
    except FileNotFoundError:
        return 0


def decision_record(path, since):
    """The first decision record written to the proxy log after offset since:
    (the whole line, its rule text or "", its source or "")."""
    deadline = time.monotonic() + 5.0
    while True:
        with open(path, "rb") as f:
            f.seek(since)
            new = f.read()
        # only whole lines: a write that straddles a page boundary can be seen
        # half done, and a record cut before its rule= field reads as no rule
        new = new[:new.rfind(b"\n") + 1].decode("utf-8", "replace")
        for line in new.splitlines():
            if line.startswith("{"):
                try:
                    o = json.loads(line)
                except ValueError:
                    continue
                if o.get("event") == "decision":
                    return line, o.get("rule") or "", o.get("source") or ""
            elif "event=decision" in line:
                return line, logfmt_value(line, "rule"), logfmt_value(line, "source")
        if time.monotonic() > deadline:
            return None, "", ""
        time.sleep(0.02)


def recv_all(s, limit=65536):
    out = b""
    try:
        while len(out) < limit:
            chunk = s.recv(4096)
            if not chunk:
                break
            out += chunk
            if b"\r\n\r\n" in out:
                head, _, body = out.partition(b"\r\n\r\n")
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        if len(body) >= int(line.split(b":", 1)[1]):
                            return out
    except (socket.timeout, ConnectionResetError):
        pass
    return out


def via_http(port, host, tport, v6, connect):
    authority = ("[%s]" % host if v6 else host) + ":%d" % tport
    if connect:
        req = "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (authority, authority)
    else:
        req = "GET http://%s/ HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (
            authority, authority)
    s = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
    s.sendall(req.encode("utf-8"))
    data = recv_all(s)
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    status = head.split(b"\r\n", 1)[0].split(b" ")
    code = int(status[1]) if len(status) > 1 and status[1].isdigit() else 0
    body = body.decode("utf-8", "replace").strip()
    reason = ""
    if code == 403 and " blocked: " in body:
        reason = body.split(" blocked: ", 1)[1]
    if code == 403:
        return "deny", reason, "403"
    if code == 502 and b"dns_error" in head:
        return "dnsfail", "", "502 dns_error"
    if code in (200, 502, 504):
        return "pass", "", str(code)
    return "error", body, str(code)


def via_socks(port, host, tport):
    s = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
    s.sendall(b"\x05\x01\x00")
    greet = s.recv(2)
    if greet != b"\x05\x00":
        s.close()
        return "error", "greeting " + greet.hex(), greet.hex()
    try:
        ip = ipaddress.ip_address(host)
        atyp = b"\x01" if ip.version == 4 else b"\x04"
        addr = ip.packed
        # a non-canonical spelling ("0x7f.1") goes as a name, as a client would send it
        if str(ip) != host:
            raise ValueError
    except ValueError:
        name = host.encode("utf-8")
        atyp, addr = b"\x03", bytes([len(name)]) + name
    s.sendall(b"\x05\x01\x00" + atyp + addr + tport.to_bytes(2, "big"))
    rep = b""
    try:
        while len(rep) < 2:
            chunk = s.recv(2 - len(rep))
            if not chunk:
                break
            rep += chunk
    except (socket.timeout, ConnectionResetError):
        pass
    s.close()
    if len(rep) < 2:
        return "error", "no reply", rep.hex()
    code = rep[1]
    if code == 2:
        return "deny", "", "rep 2"
    if code == 4:  # in this namespace nothing is host-unreachable but a name
        return "dnsfail", "", "rep 4"
    if code in (0, 3, 5, 6):
        return "pass", "", "rep %d" % code
    return "error", "", "rep %d" % code


def main():
    table, hport, sport, asklog, plog = (sys.argv[1], int(sys.argv[2]), int(sys.argv[3]),
                                         sys.argv[4], sys.argv[5])
    bad = 0
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        c = json.loads(line)
        target = c["target"]
        want = c["decision"]
        if want == "deny" and any(w in c["reason"] for w in DNS_WORDS) and c.get("addresses") == []:
            want = "dnsfail"
        host, tport, v6 = split_target(target)
        got = {}
        problems = []
        for side in ("connect", "http", "socks"):
            before = ask_count(asklog)
            logpos = log_size(plog)
            try:
                if side != "socks":
                    out, reason, raw = via_http(hport, host, tport, v6, side == "connect")
                else:
                    out, reason, raw = via_socks(sport, host, tport)
            except OSError as e:
                out, reason, raw = "error", str(e), "-"
            asked = ask_count(asklog) > before
            if out == "pass":
                out = "ask" if asked else "allow"
            got[side] = (out, reason, raw, asked)
            record, rule, source = decision_record(plog, logpos)
            if record is None:
                problems.append("%s: no decision record in the proxy log" % side)
            elif c["rule"] is None and (rule != "" or source != ""):
                problems.append("%s rule %r source %r, check: no rule" % (side, rule, source))
            elif c["rule"] is not None and ("'%s'" % c["rule"] not in rule or
                                            source != c["source"] or c["source"] in rule):
                problems.append("%s rule %r source %r, check: rule %r source %r" % (
                    side, rule, source, c["rule"], c["source"]))
        for side, (out, reason, raw, asked) in got.items():
            if out != want:
                problems.append("%s=%s (%s%s)" % (side, out, raw, ", asked" if asked else ""))
            elif (want == "deny" and side != "socks" and reason != c["reason"] and
                  not reason.startswith(c["reason"] + "; ")):
                problems.append("%s reason %r, check reason %r" % (side, reason, c["reason"]))
        name = "%s: %s -> %s" % (table, target, want)
        if problems:
            bad += 1
            print("not ok - %s: %s" % (name, "; ".join(problems)))
        else:
            print("ok - %s (connect %s, http %s, socks %s)" % (name, got["connect"][2],
                                                               got["http"][2], got["socks"][2]))
    sys.stdout.flush()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
