#!/usr/bin/env python3
"""origin.py - a small HTTP/1.1 origin for tests/e2e/http.sh.

usage: origin.py NAME PORT LOG [--tls CERT KEY] [--host 127.0.0.1]

Keep-alive per HTTP/1.1, and it logs to LOG one line per accepted
connection ("conn NAME PEERPORT") and per request ("req NAME PEERPORT
METHOD TARGET host=HOST"), so the tests can count connections and see
exactly what reached it. Paths:
  /, /index.html      "hello from NAME\\n" (Content-Length)
  /big?n=N            N bytes of a fixed pattern (Content-Length)
  /bigchunked?n=N     the same, chunked in 64 KiB chunks
  /bigjunk?n=N        /big, then 64 bytes no request asked for (kept alive)
  /bigcut?n=N         Content-Length N, half of it, then close
  /chunked            a small chunked body with a trailer
  /eof                close-delimited body (no length), then close
  /echo               reads the body (length or chunked), answers "len=N sha256=HEX"
  /continue           like /echo, sends 100 Continue first when asked to
  /headers            the request head as it arrived, as the body
  /stall              reads the request, never answers
  /stall-body         Content-Length 100, sends 10 bytes, then nothing
  /reset              resets the connection without answering
  /early              413 without reading the body, then close
  /204, /304          no body, with a Content-Length header
  /ws                 101 Switching Protocols (Upgrade: websocket), then echoes bytes
  /drop-next          answers (kept alive), then closes the connection on the next request
                      without answering (a keep-alive race, as when a server times out)
Only the given loopback address is ever bound.
"""
import hashlib
import socket
import ssl
import struct
import sys
import threading
import time

LOCK = threading.Lock()


def log(f, line):
    with LOCK:
        f.write(line + "\n")
        f.flush()


def pattern(n):
    block = bytes(range(256)) * 256  # 64 KiB
    out = bytearray()
    while len(out) < n:
        out += block[: n - len(out)]
    return bytes(out)


def read_head(rf):
    lines = []
    while True:
        line = rf.readline(65537)
        if not line:
            return None
        if line in (b"\r\n", b"\n"):
            if not lines:
                continue
            return lines
        lines.append(line)


def read_body(rf, hdrs):
    te = hdrs.get("transfer-encoding", "").lower()
    if "chunked" in te:
        body = bytearray()
        while True:
            size_line = rf.readline(1024)
            if not size_line:
                raise EOFError("eof in chunk size")
            size = int(size_line.split(b";")[0].strip(), 16)
            if size == 0:
                while True:  # trailers
                    t = rf.readline(1024)
                    if not t:
                        raise EOFError("eof in trailers")
                    if t in (b"\r\n", b"\n"):
                        return bytes(body)
            data = rf.read(size)
            if len(data) < size:
                raise EOFError("eof in chunk")
            body += data
            rf.readline(8)
    n = int(hdrs.get("content-length", "0") or "0")
    data = rf.read(n)
    if len(data) < n:
        raise EOFError("eof in body")
    return data


def respond(sock, status, body=b"", headers=(), keep=True, length=True):
    head = "HTTP/1.1 %s\r\n" % status
    for h in headers:
        head += h + "\r\n"
    if length:
        head += "Content-Length: %d\r\n" % len(body)
    if not keep:
        head += "Connection: close\r\n"
    sock.sendall(head.encode() + b"\r\n" + body)


def handle(name, sock, peer, logf):
    pid = peer[1]
    log(logf, "conn %s %d" % (name, pid))
    rf = sock.makefile("rb")
    drop_next = False
    try:
        while True:
            lines = read_head(rf)
            if lines is None:
                break
            reqline = lines[0].decode("latin-1").rstrip("\r\n")
            parts = reqline.split(" ")
            method, target, version = parts[0], parts[1], parts[2]
            hdrs = {}
            for ln in lines[1:]:
                k, _, v = ln.decode("latin-1").partition(":")
                hdrs[k.strip().lower()] = v.strip()
            log(logf, "req %s %d %s %s host=%s" % (name, pid, method, target, hdrs.get("host", "-")))
            keep = version == "HTTP/1.1" and "close" not in hdrs.get("connection", "").lower()
            path, _, query = target.partition("?")
            args = dict(kv.split("=", 1) for kv in query.split("&") if "=" in kv)
            head_only = method == "HEAD"
            if drop_next:
                log(logf, "dropped %s %d" % (name, pid))
                break

            if path in ("/", "/index.html"):
                body = ("hello from %s\n" % name).encode()
                respond(sock, "200 OK", b"" if head_only else body, keep=keep,
                        length=False, headers=["Content-Length: %d" % len(body)])
            elif path == "/big":
                body = pattern(int(args.get("n", "1000")))
                respond(sock, "200 OK", b"" if head_only else body, keep=keep, length=False,
                        headers=["Content-Length: %d" % len(body)])
            elif path == "/bigjunk":
                body = pattern(int(args.get("n", "1000")))
                sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body + b"J" * 64)
            elif path == "/bigcut":
                n = int(args.get("n", "1000"))
                sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % n + pattern(n)[:n // 2])
                break
            elif path == "/bigchunked":
                body = pattern(int(args.get("n", "1000")))
                sock.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
                for i in range(0, len(body), 65536):
                    c = body[i:i + 65536]
                    sock.sendall(b"%x\r\n" % len(c) + c + b"\r\n")
                sock.sendall(b"0\r\n\r\n")
            elif path == "/chunked":
                sock.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-T\r\n\r\n"
                             b"6;ext=1\r\nhello \r\n8\r\nchunked \r\n6\r\nworld\n\r\n0\r\nX-T: 1\r\n\r\n")
            elif path == "/eof":
                sock.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end\n")
                break
            elif path in ("/echo", "/continue"):
                if path == "/continue" and hdrs.get("expect", "").lower() == "100-continue":
                    sock.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
                body = read_body(rf, hdrs)
                log(logf, "body %s %d %d" % (name, pid, len(body)))
                out = ("len=%d sha256=%s\n" % (len(body), hashlib.sha256(body).hexdigest())).encode()
                respond(sock, "200 OK", out, keep=keep)
            elif path == "/headers":
                body = b"".join(lines)
                respond(sock, "200 OK", body, keep=keep)
            elif path == "/stall":
                time.sleep(30)
                break
            elif path == "/stall-body":
                sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789")
                time.sleep(30)
                break
            elif path == "/reset":
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                break
            elif path == "/early":
                respond(sock, "413 Content Too Large", b"too large\n", keep=False)
                break
            elif path == "/204":
                sock.sendall(b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n")
            elif path == "/304":
                sock.sendall(b"HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\nETag: \"x\"\r\n\r\n")
            elif path == "/drop-next":
                respond(sock, "200 OK", b"kept\n", keep=keep)
                drop_next = True
            elif path == "/ws":
                if hdrs.get("upgrade", "").lower() != "websocket":
                    respond(sock, "400 Bad Request", b"no upgrade\n", keep=False)
                    break
                sock.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                             b"Connection: Upgrade\r\nSec-WebSocket-Accept: test\r\n\r\nhi")
                while True:
                    data = rf.read1(65536)
                    if not data:
                        break
                    sock.sendall(data)
                break
            else:
                respond(sock, "404 Not Found", b"no such path\n", keep=keep)
            if not keep:
                break
    except (OSError, EOFError, ValueError, IndexError) as e:
        log(logf, "error %s %d %s" % (name, pid, e))
    finally:
        try:
            rf.close()
            sock.close()
        except OSError:
            pass
        log(logf, "closed %s %d" % (name, pid))


def main():
    name, port, logpath = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    tls = None
    host = "127.0.0.1"
    rest = sys.argv[4:]
    while rest:
        if rest[0] == "--tls":
            tls = (rest[1], rest[2])
            rest = rest[3:]
        elif rest[0] == "--host":
            host = rest[1]
            rest = rest[2:]
        else:
            sys.exit("bad option " + rest[0])
    assert host in ("127.0.0.1", "::1")
    logf = open(logpath, "a")
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    ls = socket.socket(fam, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((host, port))
    ls.listen(64)
    ctx = None
    if tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(tls[0], tls[1])
    log(logf, "listening %s %d" % (name, port))
    while True:
        s, peer = ls.accept()
        threading.Thread(target=serve, args=(name, s, peer, logf, ctx), daemon=True).start()


def serve(name, s, peer, logf, ctx):
    if ctx is not None:  # the handshake in this thread: a slow one blocks nobody else
        try:
            s.settimeout(10)
            s = ctx.wrap_socket(s, server_side=True)
            s.settimeout(None)
        except (OSError, ssl.SSLError) as e:
            log(logf, "tls-error %s %s" % (name, e))
            s.close()
            return
    handle(name, s, peer, logf)


if __name__ == "__main__":
    main()
