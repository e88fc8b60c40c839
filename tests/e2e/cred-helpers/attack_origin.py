# tests/e2e/cred-helpers/attack_origin.py - the origins of cred_attack.sh.
# One HTTPS and one plain-HTTP server per address (inj.test and other.test
# get different addresses, so a record says which host really got a
# request). Every request is recorded ("ADDR LINE ...", headers, body);
# some paths answer with the request's X-Tok header (or query) echoed back
# in a form other than the literal one, as real origins do: gzip, URL
# (un)quoting, JSON "\/", hex, base64 with line breaks, split in halves,
# a chunked trailer, a 101 Switching Protocols with the value in a header
# and after it, a redirect.
import base64, binascii, gzip, http.server, os, ssl, sys, threading, urllib.parse
addr, pa, ph, cert, key, rec = sys.argv[1:7]


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def body(self):
        b = b""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while True:
                n = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if n == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                b += self.rfile.read(n)
                self.rfile.readline()
        elif self.headers.get("Content-Length"):
            b = self.rfile.read(int(self.headers["Content-Length"]))
        return b

    def record(self, body):
        lines = ["%s LINE %s %s %s" % (addr, self.command, self.path, self.request_version)]
        lines += ["%s H %s: %s" % (addr, k.lower(), v) for k, v in self.headers.items()]
        if body:
            lines.append("%s BODYDATA %s" % (addr, body.decode("latin-1")))
        with open(os.path.join(rec, "%s.%d.%d" % (addr, os.getpid(), threading.get_ident())), "a") as f:
            f.write("\n".join(lines) + "\n")

    def send(self, code, data, hdrs=()):
        self.send_response(code)
        for k, v in hdrs:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def handle_one(self):
        body = self.body()
        self.record(body)
        path, _, query = self.path.partition("?")
        tok = self.headers.get("X-Tok", "")
        if path == "/gz":
            data = ("echo %s\n" % tok).encode()
            if "gzip" in self.headers.get("Accept-Encoding", ""):
                return self.send(200, gzip.compress(data), [("Content-Encoding", "gzip")])
            return self.send(200, data)
        if path == "/qplus":  # a form's value, decoded: '+' becomes ' '
            return self.send(200, ("q=%s\n" % urllib.parse.unquote_plus(query)).encode())
        if path == "/qpct":  # the value percent-encoded (as in a URL it builds)
            return self.send(200, ("u=%s\n" % urllib.parse.quote(tok, safe="")).encode())
        if path == "/jsonslash":  # PHP's json_encode writes '/' as '\/'
            return self.send(200, ('{"t":"%s"}\n' % tok.replace("/", "\\/")).encode())
        if path == "/hex":
            return self.send(200, ("h=%s\n" % binascii.hexlify(tok.encode()).decode()).encode())
        if path == "/b64nl":  # base64 broken into lines (MIME, GitHub's contents API)
            b = base64.b64encode(tok.encode()).decode()
            return self.send(200, ("\n".join(b[i:i + 10] for i in range(0, len(b), 10)) + "\n").encode())
        if path == "/halves":
            h = len(tok) // 2
            return self.send(200, ('{"a":"%s","b":"%s"}\n' % (tok[:h], tok[h:])).encode())
        if path == "/gzraw":  # gzip whatever the client asked
            return self.send(200, gzip.compress(("echo %s\n" % tok).encode()), [("Content-Encoding", "gzip")])
        if path == "/gz204":  # no body, but an encoding and the value in a header
            self.send_response(204)
            self.send_header("Content-Encoding", "gzip")
            self.send_header("X-Echo", tok)
            self.end_headers()
            return
        if path == "/trailer":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Trailer", "X-Echo")
            self.end_headers()
            self.wfile.write(b"5\r\nhello\r\n0\r\nX-Echo: " + tok.encode() + b"\r\n\r\n")
            return
        if path == "/ws":
            if self.headers.get("Upgrade", "") == "":
                return self.send(426, b"upgrade\n")
            self.send_response(101)
            self.send_header("Connection", "Upgrade")
            self.send_header("Upgrade", self.headers["Upgrade"])
            self.send_header("X-Echo", tok)
            self.end_headers()
            self.wfile.write(("frame %s\n" % tok).encode())
            self.wfile.flush()
            self.close_connection = True
            return
        if path == "/store":  # a paste, gist, issue comment: kept as sent
            with open(os.path.join(rec, "..", "store", "paste"), "wb") as f:
                f.write(body)
            return self.send(201, b"stored\n")
        if path == "/load":  # ... and read back (from any host sharing the store)
            with open(os.path.join(rec, "..", "store", "paste"), "rb") as f:
                return self.send(200, f.read())
        if path.startswith("/drop"):  # no answer at all: the proxy's own error page
            self.close_connection = True
            self.connection.shutdown(2)
            return
        if path == "/redir":
            return self.send(302, b"", [("Location", "https://other.test/?t=" + tok)])
        out = ("echo %s\n" % tok).encode()
        self.send(200, out, [("X-Echo", tok)])

    do_GET = do_POST = do_PUT = handle_one


def serve(port, tls):
    s = http.server.ThreadingHTTPServer((addr, int(port)), H)
    if tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        s.socket = ctx.wrap_socket(s.socket, server_side=True)
    s.serve_forever()


threading.Thread(target=serve, args=(ph, False), daemon=True).start()
serve(pa, True)
