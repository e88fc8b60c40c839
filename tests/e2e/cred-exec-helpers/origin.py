# tests/e2e/cred-exec-helpers/origin.py - rt-17's hostile origin, on ADDR:
# HTTPS on PA (http.server): /echo answers at once with the Authorization it
# got in a header and the body; /slow?s=S answers the same after S seconds
# (a response that outlives refreshes). Plain HTTP on PH (raw sockets, kept
# connections): /big?n=N, /bigecho?n=N (the Authorization it got 300000
# bytes into an N-byte Content-Length body), /204cl, /304cl and HEAD
# /headbig (a Content-Length of 400000 and no body, as HTTP says), /cltte
# (Content-Length with chunked), /dupcl (two lengths), /early100 (100
# Continue, then a bulk body), /small. Every request line goes to REC/lines.
import http.server, os, socket, ssl, sys, threading, time, urllib.parse

addr, pa, ph, cert, key, rec = sys.argv[1:7]
lock = threading.Lock()


def record(line):
    with lock, open(os.path.join(rec, "lines"), "a") as f:
        f.write(line + "\n")


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_GET(self):
        u = urllib.parse.urlparse(self.path)
        q = urllib.parse.parse_qs(u.query)
        record("TLS %s %s" % (self.command, self.path))
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            self.rfile.read(n)
        if u.path == "/slow":
            time.sleep(float(q.get("s", ["3"])[0]))
        auth = self.headers.get("Authorization", "")
        out = ("echo %s\n" % auth).encode()
        self.send_response(200)
        self.send_header("X-Echo", auth)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_POST = do_GET


def serve_tls():
    s = http.server.ThreadingHTTPServer((addr, int(pa)), H)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    s.socket = ctx.wrap_socket(s.socket, server_side=True)
    s.serve_forever()


def answer(method, target, headers):
    u = urllib.parse.urlparse(target)
    q = urllib.parse.parse_qs(u.query)
    n = int(q.get("n", ["400000"])[0])
    p = u.path
    if p == "/big":
        return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % n + b"a" * n
    if p == "/bigecho":
        auth = headers.get("authorization", "").encode()
        body = b"b" * 300000 + auth + b"b" * (n - 300000 - len(auth))
        return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    if p == "/204cl":
        return b"HTTP/1.1 204 No Content\r\nContent-Length: 400000\r\n\r\n"
    if p == "/304cl":
        return b"HTTP/1.1 304 Not Modified\r\nContent-Length: 400000\r\n\r\n"
    if p == "/headbig":
        return b"HTTP/1.1 200 OK\r\nContent-Length: 400000\r\n\r\n" + (b"" if method == "HEAD" else b"h" * 400000)
    if p == "/cltte":
        return (b"HTTP/1.1 200 OK\r\nContent-Length: 400000\r\nTransfer-Encoding: chunked\r\n\r\n"
                b"5\r\nSMUGG\r\n0\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\nsmuggle")
    if p == "/dupcl":
        return (b"HTTP/1.1 200 OK\r\nContent-Length: 400000\r\nContent-Length: 7\r\n\r\nsmuggle"
                + b"d" * 400000)
    if p == "/early100":
        return b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % n + b"e" * n
    return b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsmall\n"


def plain_conn(s):
    buf = b""
    try:
        while True:
            while b"\r\n\r\n" not in buf:
                d = s.recv(65536)
                if not d:
                    return
                buf += d
            head, buf = buf.split(b"\r\n\r\n", 1)
            lines = head.decode("latin-1").split("\r\n")
            method, target = lines[0].split(" ")[:2]
            headers = {}
            for l in lines[1:]:
                k, _, v = l.partition(":")
                headers[k.strip().lower()] = v.strip()
            record("PLAIN %s %s" % (method, target))
            s.sendall(answer(method, target, headers))
    except OSError:
        pass
    finally:
        s.close()


def serve_plain():
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((addr, int(ph)))
    ls.listen(64)
    while True:
        c, _ = ls.accept()
        threading.Thread(target=plain_conn, args=(c,), daemon=True).start()


threading.Thread(target=serve_plain, daemon=True).start()
serve_tls()
