#!/usr/bin/env python3
"""tests/bench/tlsload.py - the TLS lane's origin and clients (tls.sh).

  tlsload.py origin PORT CERT KEY
      a TLS origin on 127.0.0.1:PORT (threads): each request "GET /N" is
      answered with N bytes (Content-Length), keep-alive
  tlsload.py rate PROXY|- PORT CAFILE SECONDS THREADS [COUNT]
      new tunnels for SECONDS (or, with COUNT, exactly COUNT tunnels, for
      counts per tunnel: counts.sh) from THREADS threads: connect (to PROXY
      "127.0.0.1:P" with CONNECT 127.0.0.1:PORT, or "-" direct; PROXY may
      be a URL "http://USER:PASS@HOST:P", as srt's $https_proxy), TLS
      handshake verifying 127.0.0.1 against CAFILE, GET /100, read it,
      close; prints "tunnels N seconds S errors E"
  tlsload.py held PROXY|- PORT CAFILE N READYFILE
      N tunnels as above, from 8 threads, each kept open after its request
      (the TLS object is dropped without close_notify, the socket kept);
      writes "N ERRORS" to READYFILE, then waits for stdin to close
  tlsload.py bulk PROXY|- PORT CAFILE BYTES
      one tunnel, GET /BYTES, prints "bytes B seconds S"
  tlsload.py upload PROXY|- PORT CAFILE BYTES [TOKEN]
      one tunnel, POST /upload of BYTES (1 MiB pieces of "x", with TOKEN
      every 64 KiB when given), prints "bytes B seconds S origin count N"
      (N: how many times the origin saw its NEEDLE)
  tlsload.py origin PORT CERT KEY NEEDLE
      as above, and a POST's body is read and NEEDLE counted in it (across
      reads), the answer "count N"
Python's ssl module does the TLS (OpenSSL underneath, GIL released in
handshakes and reads).
"""
import base64
import os
import socket
import ssl
import sys
import threading
import time
import urllib.parse


def count_body(f, n, needle):
    """Reads n bytes from f: how many times needle is in them."""
    found, tail = 0, b""
    while n > 0:
        b = f.read(min(n, 1 << 20))
        if not b:
            break
        n -= len(b)
        if needle:
            buf = tail + b
            found += buf.count(needle)
            tail = buf[-(len(needle) - 1):] if len(needle) > 1 else b""
    return found


def origin(port, cert, key, needle=b""):
    threading.stack_size(256 * 1024)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(4096)
    chunk = b"x" * (1 << 20)

    def serve(c):
        try:
            s = ctx.wrap_socket(c, server_side=True)
            f = s.makefile("rb")
            while True:
                line = f.readline()
                if not line:
                    break
                heads = []
                while True:
                    h = f.readline()
                    if h in (b"\r\n", b"\n", b""):
                        break
                    heads.append(h)
                if line.startswith(b"POST"):
                    cl = 0
                    for hl in heads:
                        if hl.lower().startswith(b"content-length:"):
                            cl = int(hl.split(b":", 1)[1])
                    out = b"count %d" % count_body(f, cl, needle)
                    s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(out) + out)
                    continue
                n = int(line.split()[1][1:] or b"0")
                s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % n)
                view = memoryview(chunk)
                while n > 0:
                    k = min(n, len(chunk))
                    s.sendall(view[:k])
                    n -= k
        except (OSError, ValueError, ssl.SSLError):
            pass
        finally:
            c.close()

    while True:
        c, _ = ls.accept()
        threading.Thread(target=serve, args=(c,), daemon=True).start()


def client_ctx(cafile):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(cafile)
    return ctx


def proxy_addr(proxy):
    """PROXY: "HOST:PORT", or a URL "http://[USER:PASS@]HOST:PORT" (srt's
    $https_proxy, whose proxy wants Basic credentials) -> (host, port, auth
    header or b"")."""
    if "://" not in proxy:
        h, p = proxy.rsplit(":", 1)
        return h, int(p), b""
    u = urllib.parse.urlsplit(proxy)
    auth = b""
    if u.username is not None:
        cred = "%s:%s" % (urllib.parse.unquote(u.username), urllib.parse.unquote(u.password or ""))
        auth = b"Proxy-Authorization: Basic " + base64.b64encode(cred.encode()) + b"\r\n"
    return u.hostname, u.port, auth


def open_tunnel(ctx, proxy, port):
    if proxy == "-":
        s = socket.create_connection(("127.0.0.1", port))
    else:
        h, p, auth = proxy_addr(proxy)
        s = socket.create_connection((h, p))
        s.sendall(b"CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n%s\r\n" % (port, port, auth))
        head = b""
        while b"\r\n\r\n" not in head:
            b = s.recv(4096)
            if not b:
                raise OSError("proxy closed")
            head += b
        if not head.startswith(b"HTTP/1.1 200") and not head.startswith(b"HTTP/1.0 200"):
            raise OSError("proxy said " + head.split(b"\r\n")[0].decode())
    return ctx.wrap_socket(s, server_hostname="127.0.0.1")


def get(t, n):
    t.sendall(b"GET /%d HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" % n)
    buf = b""
    while b"\r\n\r\n" not in buf:
        b = t.recv(65536)
        if not b:
            raise OSError("closed")
        buf += b
    head, body = buf.split(b"\r\n\r\n", 1)
    want = n - len(body)
    if want <= 0:
        return
    mv = memoryview(bytearray(min(want, 1 << 20)))
    while want > 0:
        k = t.recv_into(mv, min(want, len(mv)))
        if k == 0:
            raise OSError("short body")
        want -= k


def rate(proxy, port, cafile, seconds, threads, count=0):
    ctx = client_ctx(cafile)
    end = time.monotonic() + seconds
    counts = [0] * threads
    errors = [0] * threads
    budget = [count]
    lock = threading.Lock()

    def take():
        if count == 0:
            return time.monotonic() < end
        with lock:
            budget[0] -= 1
            return budget[0] >= 0

    def run(i):
        while take():
            try:
                t = open_tunnel(ctx, proxy, port)
                get(t, 100)
                t.close()
                counts[i] += 1
            except (OSError, ssl.SSLError) as e:
                errors[i] += 1
                if errors[i] == 1:
                    print("error: %s" % e, file=sys.stderr)
                time.sleep(0.01)

    t0 = time.monotonic()
    ths = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    print("tunnels %d seconds %.3f errors %d" % (sum(counts), time.monotonic() - t0, sum(errors)))


def held(proxy, port, cafile, n, ready, threads=8):
    """Opened from THREADS threads at once: one after the other, a tunnel's
    CONNECT, two handshakes and GET take ~40 ms here, and 10,000 of them
    outlasted tls.sh's wait."""
    ctx = client_ctx(cafile)
    fds = []
    errors = [0]
    budget = [n]
    lock = threading.Lock()

    def run():
        while True:
            with lock:
                if budget[0] <= 0 or errors[0] > 20:
                    return
                budget[0] -= 1
            try:
                t = open_tunnel(ctx, proxy, port)
                get(t, 100)
                fd = os.dup(t.fileno())
                t.close()  # frees the TLS object; no close_notify, the dup stays open
                with lock:
                    fds.append(fd)
            except (OSError, ssl.SSLError) as e:
                with lock:
                    errors[0] += 1
                    if errors[0] == 1:
                        print("error: %s" % e, file=sys.stderr)

    ths = [threading.Thread(target=run) for _ in range(threads)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    with open(ready, "w") as f:
        f.write("%d %d\n" % (len(fds), errors[0]))
    sys.stdin.read()
    for fd in fds:
        os.close(fd)


def bulk(proxy, port, cafile, nbytes):
    ctx = client_ctx(cafile)
    t = open_tunnel(ctx, proxy, port)
    t0 = time.monotonic()
    get(t, nbytes)
    print("bytes %d seconds %.3f" % (nbytes, time.monotonic() - t0))
    t.close()


def upload(proxy, port, cafile, nbytes, token):
    ctx = client_ctx(cafile)
    t = open_tunnel(ctx, proxy, port)
    chunk = bytearray(b"x" * (1 << 20))
    tok = token.encode()
    if tok:
        for off in range(0, len(chunk) - len(tok), 65536):
            chunk[off:off + len(tok)] = tok
    view = memoryview(chunk)
    t0 = time.monotonic()
    t.sendall(b"POST /upload HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Length: %d\r\n\r\n"
              % (port, nbytes))
    n = nbytes
    while n > 0:
        k = min(n, len(chunk))
        t.sendall(view[:k])
        n -= k
    buf = b""
    while b"\r\n\r\n" not in buf:
        b = t.recv(65536)
        if not b:
            raise OSError("closed")
        buf += b
    head, body = buf.split(b"\r\n\r\n", 1)
    cl = 0
    for hl in head.split(b"\r\n")[1:]:
        if hl.lower().startswith(b"content-length:"):
            cl = int(hl.split(b":", 1)[1])
    while len(body) < cl:
        b = t.recv(65536)
        if not b:
            break
        body += b
    print("bytes %d seconds %.3f origin %s" % (nbytes, time.monotonic() - t0, body.decode().strip()))
    t.close()


def main():
    a = sys.argv
    if a[1] == "origin":
        origin(int(a[2]), a[3], a[4], a[5].encode() if len(a) > 5 else b"")
    elif a[1] == "rate":
        rate(a[2], int(a[3]), a[4], float(a[5]), int(a[6]), int(a[7]) if len(a) > 7 else 0)
    elif a[1] == "held":
        held(a[2], int(a[3]), a[4], int(a[5]), a[6])
    elif a[1] == "bulk":
        bulk(a[2], int(a[3]), a[4], int(a[5]))
    elif a[1] == "upload":
        upload(a[2], int(a[3]), a[4], int(a[5]), a[6] if len(a) > 6 else "")
    else:
        sys.exit(__doc__)


main()
