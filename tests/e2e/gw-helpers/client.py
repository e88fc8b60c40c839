# tests/e2e/gw-helpers/client.py - the client of gw_attack.sh (rt-15): writes
# raw request bytes through sluice proxy, so it can send what curl would not
# (pipelined requests, odd Host lines, trailers, SNI that is not the CONNECT
# target), and prints every byte it gets back. Usage:
#   client.py PROXYPORT TARGET SNI CAFILE REQFILE
# TARGET: "-" sends REQFILE to the proxy as it is (plain HTTP), else
# HOST:PORT is CONNECTed to and REQFILE sent inside TLS with SNI ("-": no
# SNI; the certificate is checked against CAFILE, not the name). Reads until
# the connection ends or 20 s pass without a byte.
import socket, ssl, sys

pport, target, sni, ca, reqfile = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
req = open(reqfile, "rb").read()
s = socket.create_connection(("127.0.0.1", int(pport)), timeout=20)
out = sys.stdout.buffer
if target != "-":
    s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target, target)).encode())
    b = b""
    while b"\r\n\r\n" not in b:
        d = s.recv(4096)
        if not d:
            break
        b += d
    if not b.startswith(b"HTTP/1.1 200"):
        out.write(b"CONNECT-REFUSED " + b)
        sys.exit(0)
    ctx = ssl.create_default_context(cafile=ca)
    ctx.check_hostname = False
    s = ctx.wrap_socket(s, server_hostname=None if sni == "-" else sni)
s.sendall(req)
try:
    while True:
        d = s.recv(65536)
        if not d:
            break
        out.write(d)
        out.flush()
except (socket.timeout, ssl.SSLError, ConnectionError, OSError):
    pass
