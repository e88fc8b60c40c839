# tests/e2e/aws-helpers/attack_client.py - runs in the sandbox for
# aws_attack.sh (rt-13): signs requests with the AWS placeholders it sees
# (sigv4.py) and writes them as raw bytes through the proxy sluice run sets
# (CONNECT, then TLS to the proxy's certificate), so it can send what a
# library would not: Expect without waiting, pipelined requests, chunked
# bodies with trailers, bodies cut short, many held bodies at once. It
# prints "STATUS <code>" for each final response (and "INTERIM <code>" for
# a 1xx), then the response body. Usage:
#   attack_client.py MODE URL [N SIZE_MIB]
# MODE: echo, expect, sigzero, sigupper, twice, bearer2, both, bodylie, hostlie,
# pipeline, trailer, clshort, retry, dots, exact64, chunkover, mem.
import datetime, hashlib, os, select, socket, ssl, sys, time, urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sigv4

mode, url = sys.argv[1], sys.argv[2]
u = urllib.parse.urlsplit(url)
HOST = u.hostname + ("" if u.port in (None, 443) else ":%d" % u.port)
KEY = os.environ["AWS_ACCESS_KEY_ID"]
SECRET = os.environ["AWS_SECRET_ACCESS_KEY"]
TOKEN = os.environ.get("AWS_SESSION_TOKEN")
AMZDATE = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
PROXY = urllib.parse.urlsplit(os.environ.get("HTTPS_PROXY") or os.environ["https_proxy"])


def connect():
    s = socket.create_connection((PROXY.hostname, PROXY.port), timeout=120)
    s.sendall(("CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (u.hostname, u.port or 443, u.hostname, u.port or 443)).encode())
    b = b""
    while b"\r\n\r\n" not in b:
        d = s.recv(4096)
        if not d:
            raise SystemExit("CONNECT: closed")
        b += d
    if b" 200" not in b.split(b"\r\n")[0]:
        raise SystemExit("CONNECT: " + b.split(b"\r\n")[0].decode())
    ctx = ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
    return ctx.wrap_socket(s, server_hostname=u.hostname)


def signed(method, path, payload, extra=(), host=HOST, query="", payload_header=True):
    return sigv4.sign(method, host, path, query, list(extra), payload, KEY, SECRET, "us-east-1", "s3",
                      AMZDATE, TOKEN, payload_header=payload_header)


def head(method, path, hs, query=""):
    return ("%s %s HTTP/1.1\r\n" % (method, path + ("?" + query if query else "")) +
            "".join("%s: %s\r\n" % kv for kv in hs) + "\r\n").encode("latin-1")


class Reader:
    def __init__(self, s):
        self.s, self.buf = s, b""

    def fill(self, timeout=None):
        if timeout is not None:
            self.s.settimeout(timeout)
        d = self.s.recv(65536)
        self.s.settimeout(120)
        if not d:
            raise EOFError
        self.buf += d

    def response(self, timeout=None):
        """(status, headers dict, body); 1xx are returned too."""
        while b"\r\n\r\n" not in self.buf:
            self.fill(timeout)
        h, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = h.decode("latin-1").split("\r\n")
        st = int(lines[0].split()[1])
        hd = {}
        for l in lines[1:]:
            k, _, v = l.partition(":")
            hd.setdefault(k.strip().lower(), v.strip())
        if st < 200:
            return st, hd, b""
        if "chunked" in hd.get("transfer-encoding", ""):
            body = b""
            while True:
                while b"\r\n" not in self.buf:
                    self.fill()
                line, self.buf = self.buf.split(b"\r\n", 1)
                n = int(line.split(b";")[0], 16)
                while len(self.buf) < n + 2:
                    self.fill()
                body += self.buf[:n]
                self.buf = self.buf[n + 2:]
                if n == 0:
                    break
            return st, hd, body
        n = int(hd.get("content-length", "0"))
        while len(self.buf) < n:
            self.fill()
        body, self.buf = self.buf[:n], self.buf[n:]
        return st, hd, body

    def final(self, timeout=None):
        while True:
            st, hd, body = self.response(timeout)
            if st >= 200:
                return st, hd, body
            print("INTERIM %d" % st)


def show(st, hd, body):
    print("STATUS %d" % st)
    for k, v in hd.items():
        print("HDR %s: %s" % (k, v))
    print(body.decode("latin-1"))


def one(method, path, hs, body=b"", query=""):
    s = connect()
    s.sendall(head(method, path, hs, query) + body)
    show(*Reader(s).final())
    s.close()


def put_literal(path, body, extra=()):
    hs = signed("PUT", path, hashlib.sha256(body).hexdigest(), extra)
    return hs + [("Content-Length", str(len(body)))]


def answered(s, rd):
    """The proxy's answer when one (or the end) has come, else None. The
    socket may be readable with no answer: TLS 1.3 tickets."""
    r, _, _ = select.select([s], [], [], 0)
    if not r and not s.pending():
        return None
    s.settimeout(0.0)
    try:
        d = s.recv(65536)
    except (ssl.SSLWantReadError, BlockingIOError):
        return None
    except OSError as e:
        return ("closed", str(e))
    finally:
        s.settimeout(120)
    if not d:
        return ("closed", "EOF")
    rd.buf += d
    try:
        return rd.final(10)
    except (EOFError, OSError) as e:
        return ("closed", str(e))


def send_watching(s, rd, data, piece=1 << 20):
    """Sends data in pieces, stopping when the proxy answers (or closes)
    meanwhile: the answer, or None when all was sent."""
    for i in range(0, len(data), piece):
        r = answered(s, rd)
        if r is not None:
            return r
        try:
            s.sendall(data[i:i + piece])
        except OSError as e:
            try:
                return rd.final(5)
            except (EOFError, OSError):
                return ("closed", str(e))
    return None


path = u.path or "/"
if mode == "echo":
    one("GET", path, signed("GET", path, sigv4.EMPTY))
elif mode == "expect":
    body = os.urandom(100000)
    hs = put_literal(path, body) + [("Expect", "100-continue")]
    s = connect()
    rd = Reader(s)
    s.sendall(head("PUT", path, hs))
    t0 = time.time()
    try:
        st, hd, b = rd.response(15)  # "at once"; a loaded machine (ASan, CI) is slow
        print("FIRST %d after %.1f s" % (st, time.time() - t0))
    except (socket.timeout, TimeoutError):
        print("NO-CONTINUE after %.1f s" % (time.time() - t0))
    s.sendall(body)
    show(*rd.final())
elif mode in ("sigzero", "sigupper", "bearer2", "twice"):
    hs = signed("GET", path, sigv4.EMPTY)
    out = []
    for k, v in hs:
        if k == "Authorization":
            a, _, sig = v.rpartition("Signature=")
            if mode == "sigzero":
                v = a + "Signature=" + "0" * 64
            elif mode == "sigupper":
                v = a + "Signature=" + sig.upper()
        out.append((k, v))
        if k == "Authorization" and mode == "bearer2":
            out.append(("Authorization", "Bearer sandbox-own-token-0123456789"))
        if k == "Authorization" and mode == "twice":
            out.append((k, v))
    one("GET", path, out)
elif mode == "both":
    # a header signature and a presigned query (the placeholder key id in
    # X-Amz-Credential, a signature of zeros) in one request
    q = "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=%s&X-Amz-Date=%s&X-Amz-Expires=60" \
        "&X-Amz-SignedHeaders=host&X-Amz-Signature=%s" % (
            urllib.parse.quote("%s/%s/us-east-1/s3/aws4_request" % (KEY, AMZDATE[:8]), safe=""), AMZDATE, "0" * 64)
    one("GET", path, signed("GET", path, sigv4.EMPTY, query=q), query=q)
elif mode == "bodylie":
    body = b"A" * 1000
    hs = signed("PUT", path, hashlib.sha256(b"other").hexdigest())
    one("PUT", path, hs + [("Content-Length", str(len(body)))], body)
elif mode == "hostlie":
    other = "other.test" + HOST[len(u.hostname):]
    hs = signed("GET", path, sigv4.EMPTY, host=other)
    one("GET", path, hs)
elif mode == "pipeline":
    b1, b2 = os.urandom(200000), os.urandom(3000)
    s = connect()
    s.sendall(head("PUT", path + "1", put_literal(path + "1", b1)) + b1 +
              head("PUT", path + "2", put_literal(path + "2", b2)) + b2)
    rd = Reader(s)
    show(*rd.final())
    show(*rd.final())
elif mode == "trailer":
    body = os.urandom(70000)
    hs = signed("PUT", path, hashlib.sha256(body).hexdigest()) + [("Transfer-Encoding", "chunked"),
                                                                  ("Trailer", "x-amz-meta-t")]
    data = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 30000]), body[i:i + 30000])
                    for i in range(0, len(body), 30000))
    one("PUT", path, hs, data + b"0\r\nx-amz-meta-t: trailing\r\n\r\n")
elif mode == "clshort":
    body = os.urandom(1000)
    s = connect()
    s.sendall(head("PUT", path, put_literal(path, body)) + body[:500])
    time.sleep(1)
    s.close()
    body = os.urandom(2000)
    one("PUT", path + ".after", put_literal(path + ".after", body), body)
elif mode == "retry":
    # a GET whose answer makes the origin close the kept connection 0.5 s
    # later, then on the same tunnel a held PUT whose body comes after 1 s:
    # the upstream closes while the head is held
    s = connect()
    rd = Reader(s)
    s.sendall(head("GET", path + "/closesoon", signed("GET", path + "/closesoon", sigv4.EMPTY)))
    show(*rd.final())
    time.sleep(0.1)
    body = os.urandom(100000)
    s.sendall(head("PUT", path + "/after", put_literal(path + "/after", body)))
    time.sleep(1.0)
    try:
        s.sendall(body)
        show(*rd.final(20))
    except (EOFError, OSError) as e:
        print("CLOSED %s" % e)
elif mode == "dots":
    body = b"dots"
    one("PUT", path, put_literal(path, body), body)
elif mode == "exact64":
    body = b"\0" * (64 << 20)
    one("PUT", path, put_literal(path, body), body)
elif mode == "chunkover":
    n = (64 << 20) + 1
    z = b"\0" * (1 << 20)
    h = hashlib.sha256()
    for _ in range(64):
        h.update(z)
    h.update(b"\0")
    hs = signed("PUT", path, h.hexdigest()) + [("Transfer-Encoding", "chunked")]
    s = connect()
    rd = Reader(s)
    s.sendall(head("PUT", path, hs))
    data = b"".join(b"100000\r\n" + z + b"\r\n" for _ in range(64)) + b"1\r\n\0\r\n0\r\n\r\n"
    r = send_watching(s, rd, data)
    if r is None:
        r = rd.final()
    if r[0] == "closed":
        print("CLOSED %s" % r[1])
    else:
        show(*r)
elif mode == "mem":
    # N connections, each a PUT whose literal-hash body of SIZE MiB is sent
    # but for its last byte: the proxy holds them all at once
    n, size = int(sys.argv[3]), int(sys.argv[4]) << 20
    chunk = b"\0" * size
    body = chunk + b"\0"
    dig = hashlib.sha256(body).hexdigest()
    conns, refused = [], 0
    for i in range(n):
        p = "%s%d" % (path, i)
        hs = signed("PUT", p, dig) + [("Content-Length", str(len(body)))]
        s = connect()
        rd = Reader(s)
        s.sendall(head("PUT", p, hs))
        r = send_watching(s, rd, chunk)
        if r is None:
            time.sleep(0.3)
            r = answered(s, rd)
        if r is not None:
            refused += 1
            print("CONN %d: %s" % (i, "closed" if r[0] == "closed" else "STATUS %d %s" % (r[0], r[2][:300].decode("latin-1"))))
        conns.append(s)
    print("HELD refused=%d" % refused, flush=True)
    time.sleep(float(os.environ.get("MEM_HOLD", "6")))
    for s in conns:
        s.close()
    print("DONE", flush=True)
else:
    raise SystemExit("unknown mode " + mode)
