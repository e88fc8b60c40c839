# tests/e2e/cred-exec-helpers/client.py PORT REQUESTS... - sends the
# requests (\r\n spelled out) back to back on one connection to the proxy
# on 127.0.0.1:PORT, reads until the proxy closes or 6 s pass without a
# byte, and prints each response's status line and body length as the
# client sees them (Content-Length framing), then "closed" or "timeout".
import socket, sys

s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall("".join(sys.argv[2:]).replace("\\r\\n", "\r\n").encode())
s.settimeout(6)
buf = b""
end = "closed"
while True:
    try:
        d = s.recv(1 << 20)
    except socket.timeout:
        end = "timeout"
        break
    except OSError:
        break
    if not d:
        break
    buf += d
reqs = [r for r in "".join(sys.argv[2:]).split("\\r\\n\\r\\n") if r]
methods = [r.split(" ")[0] for r in reqs]
i = 0
while buf:
    h, sep, rest = buf.partition(b"\r\n\r\n")
    if not sep:
        print("partial head %d" % len(buf))
        break
    lines = h.decode("latin-1").split("\r\n")
    st = lines[0]
    code = int(st.split(" ")[1]) if len(st.split(" ")) > 1 and st.split(" ")[1].isdigit() else 0
    n = 0
    for l in lines[1:]:
        if l.lower().startswith("content-length:"):
            n = int(l.split(":")[1])
    meth = methods[i] if i < len(methods) else "?"
    if code < 200 or code in (204, 304) or meth == "HEAD":
        n = 0
    if code >= 200:
        i += 1
    print("%s %d" % (st, min(n, len(rest))))
    buf = rest[n:]
print(end)
