# tests/e2e/aws-helpers/origin.py - the AWS stand-in for credentials_aws.sh:
# an HTTPS origin that verifies each request's SigV4 signature with the REAL
# secret (sigv4.py, from AWS's documentation), records the outcome, and
# answers 200 "verified" or 403 with the reason. Usage:
#   origin.py ADDR PORT CERT KEY RECDIR REAL_SECRET
import hashlib, http.server, os, re, ssl, sys, threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sigv4

addr, port, cert, key, rec, secret = sys.argv[1:7]


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def handle_one(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        path, _, query = self.path.partition("?")
        hs = list(self.headers.items())
        ok, kid, why = sigv4.verify(self.command, path, query, hs, body, secret)
        tok = self.headers.get("X-Amz-Security-Token", "")
        line = "REQ %s %s host=%s ok=%d why=%s key=%s tok=%s body=%d sha=%s raw=%s" % (
            self.command, path, self.headers.get("Host"), ok, why, kid, tok, len(body),
            hashlib.sha256(body).hexdigest(), re.sub(r"[^\x20-\x7e]", ".", body[:200].decode("latin-1")))
        with open(os.path.join(rec, "%d.%d" % (os.getpid(), threading.get_ident())), "a") as f:
            f.write(line + "\n")
            for k, v in hs:
                f.write("H %s: %s\n" % (k.lower(), v))
        out = ("verified\n" if ok else "SignatureDoesNotMatch: %s\n" % why).encode()
        self.send_response(200 if ok else 403)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_POST = do_PUT = handle_one


s = http.server.ThreadingHTTPServer((addr, int(port)), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
s.socket = ctx.wrap_socket(s.socket, server_side=True)
s.serve_forever()
