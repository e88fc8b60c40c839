# tests/e2e/gw-helpers/origin.py - the hostile origin of gw_attack.sh
# (rt-15): an HTTPS (or plain, CERT "-") server that records every request
# it gets, whole, and answers by echoing the credential it got in the form
# its path names, as an API, an error page or a proxy in front of one
# might. It writes raw bytes (so it can split, fold, repeat and frame them
# as it likes). Usage:
#   origin.py ADDR PORT CERT KEY RECFILE
# RECFILE gets one line a request: "REQ sni= host= target= n= creds=
# trailers= body=", creds being every NAME=VALUE line whose name is one of
# the credential headers in any case and with "_" for "-", n their number. The echoed value ("V") is
# every value of the request's Authorization, X-Key and X-Api-Key headers
# after a "Bearer " prefix, joined by "|" (in the order sent).
import base64, gzip, json, os, socket, ssl, sys, threading, time, urllib.parse

addr, port, cert, key, rec = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
NAMES = ("authorization", "x-key", "x-api-key")
lock = threading.Lock()


def read_until(s, buf, sep):
    while sep not in buf:
        d = s.recv(65536)
        if not d:
            return None, buf
        buf += d
    i = buf.index(sep) + len(sep)
    return buf[:i], buf[i:]


def read_n(s, buf, n):
    while len(buf) < n:
        d = s.recv(65536)
        if not d:
            return None, buf
        buf += d
    return buf[:n], buf[n:]


def read_request(s, buf):
    head, buf = read_until(s, buf, b"\r\n\r\n")
    if head is None:
        return None, buf
    lines = head.decode("latin-1").split("\r\n")
    method, target = lines[0].split(" ")[0:2]
    hs = []
    for l in lines[1:]:
        if l:
            k, _, v = l.partition(":")
            hs.append([k, v.strip()])
    low = {k.lower(): v for k, v in hs}
    body, trailers = b"", []
    if "chunked" in low.get("transfer-encoding", "").lower():
        while True:
            ln, buf = read_until(s, buf, b"\r\n")
            if ln is None:
                return None, buf
            n = int(ln.split(b";")[0].strip() or b"0", 16)
            if n == 0:
                while True:
                    t, buf = read_until(s, buf, b"\r\n")
                    if t is None or t == b"\r\n":
                        break
                    trailers.append(t.decode("latin-1").strip())
                break
            d, buf = read_n(s, buf, n + 2)
            if d is None:
                return None, buf
            body += d[:-2]
    elif int(low.get("content-length", "0") or 0) > 0:
        body, buf = read_n(s, buf, int(low["content-length"]))
        if body is None:
            return None, buf
    return (method, target, hs, trailers, body), buf


def echoed(hs):
    out = []
    for k, v in hs:
        if k.lower().replace("_", "-") in NAMES:
            out.append(v[7:] if v.startswith("Bearer ") else v)
    return "|".join(out) or "-"


def chunked(parts):
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts if p) + b"0\r\n"


def answer(s, method, target, hs, sni):
    path, _, query = target.partition("?")
    v = echoed(hs).encode("latin-1")
    vs = v.decode("latin-1")
    mode = path.rsplit("/", 1)[-1]
    host = dict((k.lower(), x) for k, x in hs).get("host", "")
    ok = b"HTTP/1.1 200 OK\r\n"

    def send(body, extra=b"", status=ok):
        s.sendall(status + extra + b"Content-Length: %d\r\n\r\n" % len(body) + body)

    if mode == "echo":  # every header back, in the head and the body
        body = "".join("%s: %s\n" % (k, x) for k, x in hs).encode("latin-1")
        send(body, b"".join(b"X-Echo-%d: %s\r\n" % (i, x.encode("latin-1")) for i, (k, x) in enumerate(hs)))
    elif mode == "cases":  # the value under header names in odd cases, repeated
        send(b"ok\n", b"x-echo: " + v + b"\r\nX-ECHO: " + v + b"\r\nX-Echo: " + v + v + b"\r\n")
    elif mode == "split":  # chunked, the value cut in chunks of every size
        parts = []
        for k in range(1, len(v) + 1):
            parts.append(b"<")
            parts += [v[i:i + k] for i in range(0, len(v), k)]
            parts.append(b">")
        s.sendall(ok + b"Transfer-Encoding: chunked\r\n\r\n")
        for p in parts:  # one TLS record each
            s.sendall(b"%x\r\n%s\r\n" % (len(p), p))
        s.sendall(b"0\r\n\r\n")
    elif mode == "drip":  # Content-Length, a byte a write
        body = b"a" + v + b"b" + v + v + b"c"
        s.sendall(ok + b"Content-Length: %d\r\n\r\n" % len(body))
        for i in range(len(body)):
            s.sendall(body[i:i + 1])
    elif mode == "close":  # no length: the body ends at close, the value last
        body = b"x" * 5 + v
        s.sendall(ok + b"Connection: close\r\n\r\n")
        for i in range(0, len(body), 7):
            s.sendall(body[i:i + 7])
        return False
    elif mode == "b64":  # base64 forms: alone, at each alignment, of the whole header
        forms = [base64.b64encode(v), base64.b64encode(b"x" + v), base64.b64encode(b"xy" + v),
                 base64.urlsafe_b64encode(v), base64.b64encode(b"Bearer " + v)]
        send(b"\n".join(forms) + b"\n", b"X-B64: " + forms[0] + b"\r\n")
    elif mode == "trailer":  # chunked with the value in a trailer
        s.sendall(ok + b"Transfer-Encoding: chunked\r\nTrailer: X-T\r\n\r\n" + chunked([b"body"]) +
                  b"X-T: " + v + b"\r\n\r\n")
    elif mode == "early":  # 103 and 100 with the value, then the answer
        s.sendall(b"HTTP/1.1 103 Early Hints\r\nLink: </" + v + b">; rel=preload\r\nX-E: " + v +
                  b"\r\n\r\nHTTP/1.1 100 Continue\r\nX-C: " + v + b"\r\n\r\n")
        send(b"ok\n")
    elif mode == "redirect":  # to another host, the value in the URL
        loc = b"https://other.test/steal?t=" + urllib.parse.quote(vs, safe="").encode() + b"&r=" + v
        send(b"moved\n", b"Location: " + loc + b"\r\nRefresh: 0; url=" + v + b"\r\n",
             b"HTTP/1.1 302 Found\r\n")
    elif mode == "reason":  # the value in the status line's reason
        send(b"ok\n", status=b"HTTP/1.1 200 " + v + b"\r\n")
    elif mode == "gzip":  # Content-Encoding: the proxy cannot mask it
        body = gzip.compress(b"echo " + v + b"\n")
        send(body, b"Content-Encoding: gzip\r\nX-V: " + v + b"\r\n")
    elif mode == "tegzip":  # a transfer coding other than chunked
        body = gzip.compress(b"echo " + v + b"\n")
        s.sendall(ok + b"Transfer-Encoding: gzip, chunked\r\n\r\n" + chunked([body]) + b"\r\n")
    elif mode == "fold":  # obs-fold in the answer, the value on the folded line
        s.sendall(ok + b"X-F: a\r\n " + v + b"\r\nContent-Length: 3\r\n\r\nok\n")
    elif mode == "long":  # a head line with the value many times, and many lines
        send(b"ok\n", b"X-L: " + b",".join([v] * 200) + b"\r\n" +
             b"".join(b"X-M%d: %s\r\n" % (i, v) for i in range(100)))
    elif mode == "cookie":
        send(b"ok\n", b"Set-Cookie: t=" + v + b"; Path=/\r\nWWW-Authenticate: Bearer error=\"" + v + b"\"\r\n")
    elif mode == "big":  # 4 MiB of body with the value every 4093 bytes
        filler = b"z" * (4093 - len(v) % 4093) if len(v) < 4093 else b"z"
        unit = v + filler
        body = unit * ((4 << 20) // len(unit))
        send(body)
    elif mode == "forms":  # forms rt-12 found unmasked for placeholders (design limits)
        send(("pct=%s\nplus=%s\njson=%s\nhex=%s\nupper=%s\n" % (
            urllib.parse.quote(vs, safe=""), vs.replace(" ", "+"), json.dumps(vs).replace("/", "\\/"),
            v.hex(), vs.upper())).encode())
    elif mode == "sni":  # what the origin saw: the TLS name and the Host
        send(("sni=%s host=%s v=%s\n" % (sni, host, vs)).encode("latin-1"))
    elif mode == "hold":  # answers slowly (a request in flight during a reload)
        time.sleep(2)
        send(b"held " + v + b"\n")
    else:
        send(b"ok\n")
    return True


def serve(conn, ctx):
    sni = ["-"]
    try:
        if ctx is not None:
            c2 = ctx.wrap_socket(conn, server_side=True)
            sni[0] = getattr(c2, "sni_seen", "-")
            conn = c2
        conn.settimeout(30)
        buf = b""
        while True:
            r, buf = read_request(conn, buf)
            if r is None:
                break
            method, target, hs, trailers, body = r
            creds = [k + "=" + x for k, x in hs if k.lower().replace("_", "-") in NAMES]
            with lock, open(rec, "a") as f:
                f.write("REQ sni=%s host=%s target=%s n=%d creds=%s trailers=%s body=%d\n" % (
                    sni[0], dict((k.lower(), x) for k, x in hs).get("host", "-"), target, len(creds),
                    "|".join(creds) or "-", "|".join(trailers) or "-", len(body)))
            if not answer(conn, method, target, hs, sni[0]):
                break
            if any(k.lower() == "connection" and "close" in x.lower() for k, x in hs):
                break
    except Exception:
        pass
    finally:
        try:
            conn.close()
        except Exception:
            pass


ctx = None
if cert != "-":
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)

    def on_sni(sslobj, name, c):
        sslobj.sni_seen = name or "-"
    ctx.sni_callback = on_sni
ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind((addr, port))
ls.listen(128)
while True:
    c, _ = ls.accept()
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    threading.Thread(target=serve, args=(c, ctx), daemon=True).start()
