#!/usr/bin/env python3
r"""raw.py - speak raw HTTP/1.x to a loopback proxy and print what comes back.

usage: raw.py PORT STEP...
  s:TEXT     send TEXT; escapes \r \n \t \0 \\ and \xHH are decoded
  b:N        send N bytes of 'x'
  r          read one response and print it: "< STATUS-LINE", "< Name: value"
             per field, then "< body N: ESCAPED" (length, chunked, or until
             EOF when neither; none for 1xx, 204, 304)
  rh         the same for an answer to HEAD (never a body)
  c          read one response, print only its status code (and "close" when
             it says Connection: close)
  rl         read one response, print "STATUS LENGTH SHA256-OF-BODY"
  x:N        read exactly N bytes, print them escaped
  e          read until EOF (8 s at most): "EOF N: ESCAPED", or "TIMEOUT ..."
  e:SECS     the same, SECS at most
             / "RESET ..." when that is how it ended
  w:SECONDS  sleep
  shut       shut down the write side
Only 127.0.0.1 is contacted.
"""
import hashlib
import socket
import sys
import time


def unescape(s, encoding="latin-1"):
    """Bytes from a step's text: \\r \\n \\t \\0 \\\\ and \\xHH are escapes;
    other characters are encoded with ENCODING (adversarial/run.py: utf-8)."""
    out = bytearray()
    i = 0
    while i < len(s):
        ch = s[i]
        if ch == "\\" and i + 1 < len(s):
            n = s[i + 1]
            if n == "r":
                out += b"\r"
            elif n == "n":
                out += b"\n"
            elif n == "t":
                out += b"\t"
            elif n == "0":
                out += b"\0"
            elif n == "\\":
                out += b"\\"
            elif n == "x":
                out.append(int(s[i + 2:i + 4], 16))
                i += 2
            else:
                out += b"\\" + n.encode()
            i += 2
            continue
        out += ch.encode(encoding)
        i += 1
    return bytes(out)


def esc(b):
    out = []
    for x in b:
        if x == 13:
            out.append("\\r")
        elif x == 10:
            out.append("\\n")
        elif 32 <= x < 127 and x != 92:
            out.append(chr(x))
        else:
            out.append("\\x%02x" % x)
    return "".join(out)


class Reader:
    def __init__(self, s):
        self.s = s
        self.buf = b""
        self.err = None

    def fill(self, timeout=10.0):
        self.s.settimeout(timeout)
        try:
            d = self.s.recv(65536)
        except socket.timeout:
            self.err = "TIMEOUT"
            return False
        except ConnectionResetError:
            self.err = "RESET"
            return False
        if not d:
            self.err = "EOF"
            return False
        self.buf += d
        return True

    def line(self):
        while b"\r\n" not in self.buf:
            if not self.fill():
                return None
        i = self.buf.index(b"\r\n")
        ln, self.buf = self.buf[:i], self.buf[i + 2:]
        return ln

    def exact(self, n):
        while len(self.buf) < n:
            if not self.fill():
                break
        d, self.buf = self.buf[:n], self.buf[n:]
        return d

    def until_eof(self, timeout=8.0):
        self.err = None
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if not self.fill(max(0.05, end - time.monotonic())):
                break
        d, self.buf = self.buf, b""
        return d


def read_response(rd, head_only):
    """Returns (status line, [fields], body or None, error)."""
    while True:
        st = rd.line()
        if st is None:
            return None, [], None, rd.err
        fields = []
        while True:
            ln = rd.line()
            if ln is None:
                return st, fields, None, rd.err
            if ln == b"":
                break
            fields.append(ln)
        code = int(st.split(b" ")[1])
        h = {}
        for f in fields:
            k, _, v = f.partition(b":")
            h[k.strip().lower()] = v.strip()
        if code < 200 and code != 101:
            print("< " + esc(st))
            for f in fields:
                print("< " + esc(f))
            continue
        if head_only or code in (101, 204, 304):
            return st, fields, b"", None
        if b"chunked" in h.get(b"transfer-encoding", b"").lower():
            body = b""
            while True:
                sz = rd.line()
                if sz is None:
                    return st, fields, body, rd.err
                n = int(sz.split(b";")[0], 16)
                if n == 0:
                    while True:
                        t = rd.line()
                        if t is None or t == b"":
                            break
                    return st, fields, body, None
                body += rd.exact(n)
                rd.line()
        if b"content-length" in h:
            n = int(h[b"content-length"])
            body = rd.exact(n)
            return st, fields, body, (rd.err if len(body) < n else None)
        return st, fields, rd.until_eof(), None


def main():
    port = int(sys.argv[1])
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    rd = Reader(s)
    for step in sys.argv[2:]:
        if step.startswith("s:"):
            try:
                s.sendall(unescape(step[2:]))
            except (BrokenPipeError, ConnectionResetError):
                print("send failed")
        elif step.startswith("b:"):
            try:
                s.sendall(b"x" * int(step[2:]))
            except (BrokenPipeError, ConnectionResetError):
                print("send failed")
        elif step in ("r", "rh", "c", "rl"):
            st, fields, body, err = read_response(rd, step == "rh")
            if st is None:
                print("no response (%s)" % err)
                continue
            if step == "rl":
                print("%s %d %s%s" % (st.split(b" ")[1].decode(), len(body or b""),
                                      hashlib.sha256(body or b"").hexdigest(),
                                      " (" + err + ")" if err else ""))
                continue
            if step == "c":
                close = any(f.lower() == b"connection: close" for f in fields)
                print(st.split(b" ")[1].decode() + (" close" if close else ""))
                continue
            print("< " + esc(st))
            for f in fields:
                print("< " + esc(f))
            print("< body %d: %s%s" % (len(body or b""), esc(body or b""),
                                       " (" + err + ")" if err else ""))
        elif step.startswith("x:"):
            print(esc(rd.exact(int(step[2:]))))
        elif step == "e" or step.startswith("e:"):
            d = rd.until_eof(float(step[2:]) if step != "e" else 8.0)
            print("%s %d: %s" % (rd.err or "TIMEOUT", len(d), esc(d)))
        elif step.startswith("w:"):
            time.sleep(float(step[2:]))
        elif step == "shut":
            s.shutdown(socket.SHUT_WR)
        else:
            sys.exit("bad step " + step)
    s.close()


if __name__ == "__main__":
    main()
