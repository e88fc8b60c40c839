# tests/e2e/aws-helpers/attack_origin.py - the AWS stand-in for aws_attack.sh
# (rt-13): like origin.py (verifies each request's SigV4 signature with the
# REAL secret, sigv4.py, and records the outcome) and also reads chunked
# bodies and their trailers, records the signature it got (sig=), and on a
# path ending in /echo answers the request's headers back: in the body, and
# the Authorization in an X-Echo-Auth header (an origin that echoes what it
# gets, as some APIs and error pages do); on a path ending in /closesoon it
# closes the kept connection 0.5 s after its answer. Usage:
#   attack_origin.py ADDR PORT CERT KEY RECDIR REAL_SECRET
import hashlib, http.server, os, re, ssl, sys, threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sigv4

addr, port, cert, key, rec, secret = sys.argv[1:7]


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def read_body(self):
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            parts, trailers = [], []
            while True:
                n = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if n == 0:
                    while True:
                        t = self.rfile.readline()
                        if t in (b"\r\n", b"\n", b""):
                            break
                        trailers.append(t.decode("latin-1").strip())
                    break
                parts.append(self.rfile.read(n))
                self.rfile.readline()
            return b"".join(parts), trailers
        n = int(self.headers.get("Content-Length") or 0)
        return (self.rfile.read(n) if n else b""), []

    def handle_one(self):
        body, trailers = self.read_body()
        path, _, query = self.path.partition("?")
        hs = list(self.headers.items())
        ok, kid, why = sigv4.verify(self.command, path, query, hs, body, secret)
        tok = self.headers.get("X-Amz-Security-Token", "")
        auth = self.headers.get("Authorization", "")
        m = re.search(r"Signature=([0-9a-f]+)", auth)
        line = "REQ %s %s host=%s ok=%d why=%s key=%s tok=%s body=%d sha=%s sig=%s trailers=%s raw=%s" % (
            self.command, path, self.headers.get("Host"), ok, why, kid, tok, len(body),
            hashlib.sha256(body).hexdigest(), m.group(1) if m else "-", "|".join(trailers) or "-",
            re.sub(r"[^\x20-\x7e]", ".", body[:100].decode("latin-1")))
        with open(os.path.join(rec, "%d.%d" % (os.getpid(), threading.get_ident())), "a") as f:
            f.write(line + "\n")
            for k, v in hs:
                f.write("H %s: %s\n" % (k.lower(), v))
        if path.endswith("/echo"):
            out = "".join("%s: %s\n" % (k, v) for k, v in hs).encode("latin-1")
        else:
            out = ("verified %s\n" % path if ok else "SignatureDoesNotMatch: %s\n" % why).encode()
        self.send_response(200 if ok else 403)
        if path.endswith("/echo"):
            self.send_header("X-Echo-Auth", auth)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)
        if path.endswith("/closesoon"):
            # a kept connection the origin closes while idle, a little later
            # (the proxy may have taken it for its next request meanwhile)
            self.wfile.flush()
            threading.Timer(0.5, lambda c=self.connection: c.shutdown(2)).start()

    do_GET = do_POST = do_PUT = handle_one


s = http.server.ThreadingHTTPServer((addr, int(port)), H)
s.daemon_threads = True
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
s.socket = ctx.wrap_socket(s.socket, server_side=True)
s.serve_forever()
