# tests/e2e/cred-helpers/rawc.py - a raw HTTP client for cred_attack.sh,
# run inside the sandbox: the request bytes (stdin, with "\r\n" written as
# it is and the placeholder already in them) go to sluice's HTTP proxy as
# they are (`plain`), or inside a CONNECT tunnel to TARGET with TLS
# (`tls TARGET`). Prints what comes back until the peer closes or 4 s of
# silence.
import os, socket, ssl, sys, time
from urllib.parse import urlparse

mode = sys.argv[1]
u = urlparse(os.environ.get("HTTP_PROXY") or os.environ.get("http_proxy"))
s = socket.create_connection((u.hostname, u.port), timeout=4)
data = sys.stdin.buffer.read()
if mode == "tls":
    target = sys.argv[2]
    s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target, target)).encode())
    r = b""
    while b"\r\n\r\n" not in r:
        x = s.recv(1)
        if not x:
            break
        r += x
    sys.stdout.write("CONNECT-REPLY " + r.split(b"\r\n")[0].decode("latin-1") + "\n")
    ctx = ssl._create_unverified_context()
    s = ctx.wrap_socket(s, server_hostname=target.rsplit(":", 1)[0])
if len(sys.argv) > 3 and sys.argv[3] == "slow":  # one byte at a time
    for i in range(len(data)):
        s.sendall(data[i:i + 1])
        time.sleep(0.001)
else:
    s.sendall(data)
out = b""
try:
    while True:
        x = s.recv(65536)
        if not x:
            break
        out += x
except (socket.timeout, ssl.SSLError, OSError):
    pass
sys.stdout.write(out.decode("latin-1"))
