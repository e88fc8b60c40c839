#!/usr/bin/env bash
# tests/e2e/tls_terminate.sh - network.tlsTerminate in sluice proxy (issue
# 23): a CA from files made here, HTTPS origins with their own CA (openssl
# CLI, python3 http.server + ssl), curl and small python clients through
# the proxy's HTTP and SOCKS5 ports.
#
# Everything runs in a private network namespace (unshare -n, as root): the
# origins on 127.0.0.10 and 127.0.0.11 there (denyPrivateAddresses false),
# far.test on 192.0.2.10 (TEST-NET-1 on that namespace's lo, so that sluice
# does not take it for loopback: network.parentProxy is used for it), the
# parent proxy of dropin.sh on 127.0.0.1,
# dnsmasq on 127.0.0.1 answering the *.test names, sluice there too. Nothing reaches the host's network. Skips when not root.
set -uo pipefail
SLUICE=${1:?usage: tls_terminate.sh PATH/TO/sluice}
case $SLUICE in /*) ;; *) SLUICE=$(cd "$(dirname "$SLUICE")" && pwd)/$(basename "$SLUICE") ;; esac
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
O1=127.0.0.10
O2=127.0.0.11

if [ -z "${SLUICE_TLS_NETNS:-}" ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "ok - tlsTerminate # SKIP needs root (a private network namespace)"
        echo "0 passed, 0 failed"
        exit 0
    fi
    exec unshare -n env SLUICE_TLS_NETNS=1 bash "$0" "$SLUICE"
fi

. "$HERE/lib.sh"
# the interpreter itself, once: a version manager's python3 shim costs about
# two seconds a start on a loaded machine, and this test starts many
PY=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null || command -v python3)

# --- the namespace ----------------------------------------------------------
if ! ip link set lo up; then
    bad "cannot set up the private network namespace"
    e2e_finish
    exit
fi
O3=192.0.2.10
if ! ip addr add "$O3/32" dev lo; then
    bad "cannot add $O3 to the namespace's loopback device"
    e2e_finish
    exit
fi
if ip route get 1.1.1.1 >/dev/null 2>&1; then
    bad "this is not a private network namespace: it has a route out"
    e2e_finish
    exit
fi

# --- certificates (openssl CLI) ---------------------------------------------
P=$T/pki
mkdir -p "$P"
mkca() { # NAME CN
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
        -subj "/CN=$2" -keyout "$P/$1.key" -out "$P/$1.pem" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
        -addext "subjectKeyIdentifier=hash" 2>>"$P/openssl.err"
}
# leaf NAME CA SAN [ca-options...]: a leaf signed by CA with `openssl ca`
# (which takes -startdate/-enddate, for the expired one)
leaf() {
    local name=$1 ca=$2 san=$3
    shift 3
    mkdir -p "$P/db-$name"
    : > "$P/db-$name/index.txt"
    cat > "$P/$name.cnf" <<EOF
[ca]
default_ca = c
[c]
database = $P/db-$name/index.txt
new_certs_dir = $P/db-$name
serial = $P/db-$name/serial
default_md = sha256
policy = p
copy_extensions = none
x509_extensions = ext
unique_subject = no
[p]
commonName = supplied
[ext]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = $san
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
EOF
    openssl rand -hex 8 > "$P/db-$name/serial"
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$name" \
        -keyout "$P/$name.key" -out "$P/$name.csr" 2>>"$P/openssl.err" &&
        openssl ca -batch -config "$P/$name.cnf" -cert "$P/$ca.pem" -keyfile "$P/$ca.key" \
            -in "$P/$name.csr" -out "$P/$name.pem" -notext "$@" 2>>"$P/openssl.err" >/dev/null
}
if ! mkca sluiceca "sluice e2e CA" || ! mkca originca "origin e2e CA" || ! mkca strayca "stray CA" ||
    ! leaf good originca "DNS:good.test,DNS:excl.test,DNS:rules.test,DNS:many.test,DNS:far.test" -days 30 ||
    ! leaf expired originca "DNS:expired.test" -startdate 20200101000000Z -enddate 20200201000000Z ||
    ! leaf stray strayca "DNS:unknown.test" -days 30; then
    bad "cannot make the test certificates" "$(tail -5 "$P/openssl.err")"
    e2e_finish
    exit
fi

# --- origins ------------------------------------------------------------------
mkdir -p "$T/www"
echo "hello from the origin" > "$T/www/hello.txt"
echo "plain origin" > "$T/www/plain.txt"
mkdir -p "$T/www/pub/secret" "$T/www/priv"
echo "public file" > "$T/www/pub/a.txt"
echo "secret file" > "$T/www/pub/secret/s.txt"
echo "private file" > "$T/www/priv/p.txt"
cat > "$T/origin.py" <<'EOF'
import http.server, ssl, sys
addr, port, cert, key, root = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
class H(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = float(sys.argv[6]) if len(sys.argv) > 6 else None  # an idle connection's life
    def __init__(self, *a, **k):
        super().__init__(*a, directory=root, **k)
    def do_GET(self):
        if self.headers.get("Upgrade", "").lower() != "websocket":
            return super().do_GET()
        # a WebSocket-like echo: 101, then every byte back as it came
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
        self.end_headers()
        self.wfile.flush()
        while True:
            b = self.connection.recv(4096)
            if not b:
                break
            self.connection.sendall(b)
        self.close_connection = True
    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(n)
        out = b"posted " + self.path.encode() + b" " + body + b"\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)
    def log_message(self, *a):
        pass
ctx = None
if cert != "-":
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
accepts = 0
class S(http.server.ThreadingHTTPServer):
    daemon_threads = True
    def get_request(self):
        # TCP accepts counted (ROOT/../accepts.PORT); the TLS handshake is
        # the handler thread's, so an idle connection blocks nobody
        global accepts
        sock, a = self.socket.accept()
        accepts += 1
        with open("%s/../accepts.%d" % (root, port), "w") as f:
            f.write(str(accepts))
        if ctx is not None:
            sock = ctx.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, a
S((addr, port), H).serve_forever()
EOF
start_origin() { # ADDR PORT CERT KEY [IDLE-TIMEOUT-S]
    "$PY" "$T/origin.py" "$1" "$2" "$3" "$4" "$T/www" ${5:+"$5"} 2>>"$T/origins.err" &
    PIDS+=($!)
}
PA=$(free_port)
PB=$(free_port)
PC=$(free_port)
PH=$(free_port)
start_origin "$O1" "$PA" "$P/good.pem" "$P/good.key"
start_origin "$O2" "$PB" "$P/expired.pem" "$P/expired.key"
start_origin "$O2" "$PC" "$P/stray.pem" "$P/stray.key"
start_origin "$O1" "$PH" - -
PD=$(free_port)
start_origin "$O1" "$PD" "$P/good.pem" "$P/good.key" # accepts counted: one test each
PE=$(free_port)
start_origin "$O1" "$PE" "$P/good.pem" "$P/good.key" 0.3 # closes a connection idle 0.3 s
PF=$(free_port)
start_origin 0.0.0.0 "$PF" "$P/good.pem" "$P/good.key" # far.test ($O3), behind the parent
for i in $(seq 100); do
    curl -s -o /dev/null --max-time 1 --cacert "$P/originca.pem" --resolve "good.test:$PA:$O1" \
        "https://good.test:$PA/hello.txt" && break
    sleep 0.1
done

start_dnsmasq --address=/good.test/$O1 --address=/excl.test/$O1 --address=/wrong.test/$O1 \
    --address=/rules.test/$O1 --address=/pinned.test/$O1 --address=/many.test/$O1 --address=/far.test/$O3 --address=/expired.test/$O2 --address=/unknown.test/$O2 || {
    bad "dnsmasq did not start" "$(cat "$T/dnsmasq.err")"
    e2e_finish
    exit
}

# cl.py MODE PROXY-PORT HOST PORT CA WHAT: one tunnel through the proxy
# (MODE connect: HTTP CONNECT; socks: SOCKS5 with a domain name), then WHAT:
# "ws PATH" (TLS, an Upgrade: websocket request, two echoes), "get PATH"
# (TLS, one GET), "late PATH" (the same a second after the handshake),
# "plain PATH" (one GET without TLS), "hold" (TLS, then wait). Prints the proxy's answer, then what came back, one line each.
cat > "$T/cl.py" <<'EOF'
import socket, ssl, sys, time
mode, pport, host, port, ca, what = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5], sys.argv[6]
s = socket.create_connection(("127.0.0.1", pport), timeout=10)
if mode == "connect":
    s.sendall(b"CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (host.encode(), port, host.encode(), port))
    r = b""
    while b"\r\n\r\n" not in r:
        b = s.recv(1)
        if not b:
            break
        r += b
    print(r.split(b"\r\n")[0].decode(), flush=True)
else:
    s.sendall(b"\x05\x01\x00")
    s.recv(2)
    s.sendall(b"\x05\x01\x00\x03" + bytes([len(host)]) + host.encode() + port.to_bytes(2, "big"))
    r = s.recv(10)
    print("socks reply", r[1] if len(r) > 1 else "none", flush=True)
    if len(r) < 2 or r[1] != 0:
        sys.exit(0)
kind, _, path = what.partition(" ")
try:
    if kind != "plain":
        ctx = ssl.create_default_context(cafile=ca)
        s = ctx.wrap_socket(s, server_hostname=host)
        print("issuer", dict(x[0] for x in s.getpeercert()["issuer"])["commonName"], flush=True)
    if kind == "hold":
        print("held", flush=True)
        time.sleep(3600)
    if kind == "late":
        time.sleep(1)
    req = "GET %s HTTP/1.1\r\nHost: %s:%d\r\n" % (path, host, port)
    if kind == "ws":
        req += ("Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n")
    else:
        req += "Connection: close\r\n"
    s.sendall((req + "\r\n").encode())
    r = b""
    while b"\r\n\r\n" not in r:
        b = s.recv(4096)
        if not b:
            break
        r += b
    head, _, rest = r.partition(b"\r\n\r\n")
    print(head.split(b"\r\n")[0].decode(), flush=True)
    if kind == "ws" and b" 101 " in head.split(b"\r\n")[0]:
        for m in (b"ping-1", b"ping-2 longer"):
            s.sendall(m)
            got = rest
            while len(got) < len(m):
                b = s.recv(4096)
                if not b:
                    break
                got += b
            rest = b""
            print("echo", got.decode(), flush=True)
    elif kind != "ws":
        while True:
            b = s.recv(4096)
            if not b:
                break
            rest += b
        print("body", rest.decode().strip(), flush=True)
except (ssl.SSLError, OSError) as e:
    print("failed", type(e).__name__, flush=True)
EOF
# the parent proxy of dropin.sh (it sends every CONNECT to 127.0.0.1:PORT,
# where the far.test origin listens too), its CONNECTs in $T/parent.log
: > "$T/parent.log"
"$PY" "$HERE/dropin-helpers/parent_proxy.py" "$T/parent.port" "$T/parent.log" 2>>"$T/parent.err" &
PIDS+=($!)
for i in $(seq 100); do [ -s "$T/parent.port" ] && break; sleep 0.05; done
PP=$(cat "$T/parent.port" 2>/dev/null)

settings() { # FILE EXTRA-TLS-KEYS [EXTRA-NETWORK-KEYS]
    cat > "$1" <<JSON
{"network": {"allowedDomains": ["*.test", "$O1", "$O2", "$O3"], "dnsServers": ["127.0.0.1:$DPORT"],
  "denyPrivateAddresses": false, "requireHostMatch": true,${3:-}
  "requestRules": [
    {"host": "rules.test", "method": "GET", "path": "/pub/**", "action": "allow"},
    {"host": "rules.test", "method": "POST", "path": "/ORG/*", "action": "allow"},
    {"host": "rules.test", "path": "/pub/secret/**", "action": "deny"},
    {"host": "pinned.test", "action": "allow"},
    {"host": "far.test", "action": "allow"}],
  "tlsTerminate": {"caCertPath": "$P/sluiceca.pem", "caKeyPath": "$P/sluiceca.key",
                   "extraCaCertPaths": ["$P/originca.pem"],
                   "excludeDomains": ["excl.test", "pinned.test"]$2}}}
JSON
}

# --- the proxy refuses tlsTerminate without a CA from files -----------------
printf '{"network": {"allowedDomains": ["*.test"],\n "tlsTerminate": {}}}\n' > "$T/noca.json"
out=$("$SLUICE" proxy --settings "$T/noca.json" --http tcp:127.0.0.1:0 --socks off 2>&1)
rc=$?
if [ "$rc" -ne 0 ] && grep -q "noca.json:2:2: network.tlsTerminate: sluice proxy needs a CA from files" <<<"$out"; then
    ok "sluice proxy refuses tlsTerminate without caCertPath/caKeyPath, naming where"
else
    bad "tlsTerminate without a CA" "rc $rc: $out"
fi

# --- sluice run terminates (run_tls.sh), but refuses what it cannot do -------
printf '{"network": {"allowedDomains": ["*.test"], "httpProxyPort": 9,\n "tlsTerminate": {}}}\n' > "$T/relay.json"
out=$("$SLUICE" run --settings "$T/relay.json" -- true 2>&1)
rc=$?
if [ "$rc" -ne 0 ] && grep -q "relay.json:2:2: network.tlsTerminate: network.httpProxyPort relays" <<<"$out"; then
    ok "sluice run refuses tlsTerminate with httpProxyPort, naming where (never accepted and ignored)"
else
    bad "sluice run with tlsTerminate and httpProxyPort" "rc $rc: $out"
fi

settings "$T/s.json" ""
AP=$(free_port)
start_proxy main "$T/s.json" --http tcp:127.0.0.1:0 --socks tcp:127.0.0.1:0 --admin "tcp:127.0.0.1:$AP"
X="http://127.0.0.1:$HPORT"
if [ -z "$HPORT" ] || [ -z "$SPORT" ]; then
    bad "the proxy did not start" "$(cat "$T/main.err")"
    e2e_finish
    exit
fi

# --- terminated: the origin's body, sluice's leaf ----------------------------
out=$(curl -sS -v --max-time 10 --cacert "$P/sluiceca.pem" -x "$X" "https://good.test:$PA/hello.txt?token=secret" 2>"$T/c1.err")
if [ "$out" = "hello from the origin" ] && grep -q "issuer: CN=sluice e2e CA" "$T/c1.err"; then
    ok "terminated: curl gets the origin's body and sluice's leaf (issuer: the sluice CA)"
else
    bad "terminated" "$out / $(grep -i 'issuer\|error\|HTTP/' "$T/c1.err") / $(tail -3 "$T/main.log")"
fi
# (records read into variables: no 'grep | grep -q' under pipefail, whose
# first grep may die of SIGPIPE)
# the close record may come after curl has its answer (valgrind: SLOW)
wait_for "$T/main.log" 'event=close .*terminated=1' $((5 * SLOW)) || true
term=$(grep "terminated=1" "$T/main.log")
tdec=$(grep "event=decision" <<<"$term")
tclose=$(grep "event=close" <<<"$term")
if grep -q 'url="\?https://good.test:'"$PA"'/hello.txt"\? ' <<<"$tdec" && grep -q "method=GET" <<<"$tdec" &&
    grep -q "code=200" <<<"$tclose" && ! grep -q "token=secret" "$T/main.log"; then
    ok "the log: terminated=1 with method, path (query left out) and status"
else
    bad "terminated log records" "$(grep terminated "$T/main.log" | tail -4)"
fi
# keep-alive: two requests in one terminated tunnel
out=$(curl -sS --max-time 10 --cacert "$P/sluiceca.pem" -x "$X" "https://good.test:$PA/hello.txt" "https://good.test:$PA/plain.txt" 2>&1)
if [ "$out" = "hello from the origin
plain origin" ]; then
    ok "two requests in one terminated tunnel"
else
    bad "two requests in one terminated tunnel" "$out"
fi
# a POST with a body
out=$(curl -sS --max-time 10 --cacert "$P/sluiceca.pem" -x "$X" -d 'a=1' "https://good.test:$PA/form" 2>&1)
if [ "$out" = "posted /form a=1" ]; then
    ok "a POST body through a terminated tunnel"
else
    bad "POST through a terminated tunnel" "$out"
fi

# --- the leaf is named by the CONNECT target, never by the SNI ---------------
cat > "$T/sni.py" <<'EOF'
import socket, ssl, sys
port, target, sni, ca, alpn = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
s = socket.create_connection(("127.0.0.1", port))
s.sendall(b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target.encode(), target.encode()))
print(s.recv(1000).split(b"\r\n")[0].decode())
ctx = ssl.create_default_context(cafile=ca)
ctx.check_hostname = False
if alpn != "-":
    ctx.set_alpn_protocols(alpn.split(","))
try:
    t = ctx.wrap_socket(s, server_hostname=sni)
    print("SAN", ",".join(v for k, v in t.getpeercert()["subjectAltName"]))
except (ssl.SSLError, OSError) as e:
    print("handshake failed", type(e).__name__)
EOF
out=$("$PY" "$T/sni.py" "$HPORT" "good.test:$PA" "evil.test" "$P/sluiceca.pem" - 2>&1)
if grep -qx "SAN good.test" <<<"$out"; then
    ok "an SNI naming another host: the leaf is still for the CONNECT target"
else
    bad "leaf by CONNECT target" "$out"
fi
# an h2-only client (sluice serves http/1.1 only): on a host that needs no
# termination it passes opaque (the origin's own certificate reaches it) ...
out=$("$PY" "$T/sni.py" "$HPORT" "good.test:$PA" "good.test" "$P/originca.pem" h2 2>&1)
if grep -q "^SAN good.test,excl.test,rules.test,many.test,far.test$" <<<"$out"; then
    ok "an h2-only ClientHello to a host without request rules passes opaque (origin's certificate)"
else
    bad "h2-only ClientHello, no rules" "$out"
fi
# ... and on a host with request rules it is refused, with the reason logged
out=$("$PY" "$T/sni.py" "$HPORT" "rules.test:$PA" "rules.test" "$P/sluiceca.pem" h2 2>&1)
if grep -q "handshake failed" <<<"$out" &&
    grep -q 'reason="the client offers only ALPN h2, which sluice does not serve' "$T/main.log"; then
    ok "an h2-only ClientHello to a host with request rules is refused with a reason in the log"
else
    bad "h2-only ClientHello, rules" "$out / $(grep ALPN "$T/main.log")"
fi

# --- request-level keys inside the tunnel: requireHostMatch ------------------
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 --cacert "$P/sluiceca.pem" -x "$X" \
    -H "Host: excl.test:$PA" "https://good.test:$PA/hello.txt" 2>&1)
if [ "$code" = 421 ]; then
    ok "requireHostMatch inside a terminated tunnel: a Host other than the CONNECT target gets 421"
else
    bad "requireHostMatch inside the tunnel" "$code"
fi

# --- concurrent first handshakes for one name (one mint, the others wait) ---
many=()
for i in $(seq 24); do
    curl -sS --max-time $((20 * SLOW)) --cacert "$P/sluiceca.pem" -x "$X" "https://many.test:$PA/hello.txt" \
        > "$T/many.$i" 2>&1 &
    many+=($!)
done
wait "${many[@]}"
wait_ok=0
for i in $(seq 24); do
    [ "$(cat "$T/many.$i")" = "hello from the origin" ] && wait_ok=$((wait_ok + 1))
done
if [ "$wait_ok" = 24 ]; then
    ok "24 concurrent terminated tunnels to a name not yet minted all get the origin's body"
else
    bad "concurrent first handshakes" "$wait_ok of 24; $(cat "$T"/many.* | sort | uniq -c)"
fi

# --- metrics ------------------------------------------------------------------
m=$(curl -sS --max-time 5 "http://127.0.0.1:$AP/metrics" 2>&1)
if grep -q '^sluice_tls_tunnels_open 0$' <<<"$m" && grep -q '^sluice_tls_leaves_total{result="minted"} [1-9]' <<<"$m" &&
    grep -q '^sluice_tls_leaves_total{result="hit"} [1-9]' <<<"$m" &&
    grep -q '^sluice_decisions_total{protocol="https",decision="allow"} [1-9]' <<<"$m"; then
    ok "metrics: terminated tunnels open, leaf cache hits and mints, https decisions"
else
    bad "tls metrics" "$(grep -E 'tls|https' <<<"$m")"
fi

# --- SOCKS5 CONNECT: sniffed and terminated like HTTP CONNECT ----------------
out=$(curl -sS -v --max-time 10 --cacert "$P/sluiceca.pem" --socks5-hostname "127.0.0.1:$SPORT" \
    "https://good.test:$PA/hello.txt" 2>"$T/s1.err")
if [ "$out" = "hello from the origin" ] && grep -q "issuer: CN=sluice e2e CA" "$T/s1.err"; then
    ok "SOCKS5 terminated: curl gets the origin's body and sluice's leaf"
else
    bad "SOCKS5 terminated" "$out / $(grep -i 'issuer\|error' "$T/s1.err") / $(tail -3 "$T/main.log")"
fi
out=$(curl -sS --max-time 10 --socks5-hostname "127.0.0.1:$SPORT" "http://good.test:$PH/plain.txt" 2>&1)
if [ "$out" = "plain origin" ]; then
    ok "SOCKS5: non-TLS bytes to a host without request rules stay an opaque tunnel"
else
    bad "SOCKS5 non-TLS opaque" "$out"
fi
out=$("$PY" "$T/cl.py" socks "$SPORT" rules.test "$PA" "$P/sluiceca.pem" "get /pub/a.txt" 2>&1)
out2=$("$PY" "$T/cl.py" socks "$SPORT" rules.test "$PA" "$P/sluiceca.pem" "get /priv/p.txt" 2>&1)
if grep -q "^HTTP/1.1 200" <<<"$out" && grep -q "^body public file$" <<<"$out" &&
    grep -q "^HTTP/1.1 403" <<<"$out2"; then
    ok "SOCKS5 to a host with request rules: terminated, its requests judged (200 and 403)"
else
    bad "SOCKS5 request rules" "$out / $out2"
fi
out=$("$PY" "$T/cl.py" socks "$SPORT" rules.test "$PH" - "plain /plain.txt" 2>&1)
# (the reason is in the close record, which may follow the client's EOF)
if ! grep -q "^body plain origin" <<<"$out" &&
    wait_for "$T/main.log" "protocol=socks5 host=rules.test port=$PH .*not TLS inside a tunnel to a host with request rules" $((5 * SLOW)); then
    ok "SOCKS5: non-TLS bytes to a host with request rules are refused with a reason"
else
    bad "SOCKS5 non-TLS to a ruled host" "$out / $(grep 'not TLS' "$T/main.log" | tail -2)"
fi

# --- one dial per terminated tunnel (accepts counted at the origin) ----------
for mode in connect socks; do
    port=$HPORT
    [ "$mode" = socks ] && port=$SPORT
    before=$(cat "$T/accepts.$PD" 2>/dev/null || echo 0)
    out=$("$PY" "$T/cl.py" "$mode" "$port" good.test "$PD" "$P/sluiceca.pem" "get /hello.txt" 2>&1)
    after=$(cat "$T/accepts.$PD" 2>/dev/null || echo 0)
    if grep -q "^body hello from the origin$" <<<"$out" && [ $((after - before)) = 1 ]; then
        ok "$mode: a terminated tunnel with one request dials its origin once"
    else
        bad "$mode: one dial per terminated tunnel" "accepts $before -> $after; $out"
    fi
done

# the socket the CONNECT dialed, closed by the origin before the first
# request (idle 1 s, the origin's limit 0.3 s): that request dials anew
before=$(cat "$T/accepts.$PE" 2>/dev/null || echo 0)
out=$("$PY" "$T/cl.py" connect "$HPORT" good.test "$PE" "$P/sluiceca.pem" "late /hello.txt" 2>&1)
after=$(cat "$T/accepts.$PE" 2>/dev/null || echo 0)
if grep -q "^body hello from the origin$" <<<"$out" && [ $((after - before)) = 2 ]; then
    ok "a first request after the origin closed the tunnel's idle socket dials anew (no 502)"
else
    bad "held socket closed by the origin" "accepts $before -> $after; $out"
fi

# --- WebSocket upgrades inside terminated tunnels ------------------------------
ws_case() { # NAME MODE PORT HOST PATH WANT-STATUS
    local out
    out=$("$PY" "$T/cl.py" "$2" "$3" "$4" "$PA" "$P/sluiceca.pem" "ws $5" 2>&1)
    if [ "$6" = 101 ]; then
        if grep -q "^HTTP/1.1 101 " <<<"$out" && grep -q "^echo ping-1$" <<<"$out" &&
            grep -q "^echo ping-2 longer$" <<<"$out"; then
            ok "$1: 101, then bytes both ways"
        else
            bad "$1" "$out / $(tail -2 "$T/main.log")"
        fi
    elif grep -q "^HTTP/1.1 $6 " <<<"$out"; then
        ok "$1: $6"
    else
        bad "$1" "$out"
    fi
}
ws_case "WebSocket in a terminated CONNECT tunnel" connect "$HPORT" good.test /ws 101
ws_case "WebSocket in a terminated SOCKS5 tunnel" socks "$SPORT" good.test /ws 101
ws_case "WebSocket to a ruled host, allowed path" connect "$HPORT" rules.test /pub/ws 101
ws_case "WebSocket to a ruled host, path no rule allows (request rules judge the upgrade)" connect "$HPORT" rules.test /priv/ws 403

# --- request rules inside the tunnel -------------------------------------------
rr() { # METHOD PATH: the status through a terminated tunnel to rules.test
    curl -s -o "$T/rr.out" -w '%{http_code}' --max-time 10 --cacert "$P/sluiceca.pem" -x "$X" \
        --path-as-is -X "$1" ${3:+-d "$3"} "https://rules.test:$PA$2" 2>&1
}
rr_case() { # NAME METHOD PATH WANT [BODY]
    local code
    code=$(rr "$2" "$3" "${5:-}")
    if [ "$code" = "$4" ]; then ok "request rules in a terminated tunnel: $1 ($2 $3: $4)"; else bad "request rules: $1" "$code $(cat "$T/rr.out")"; fi
}
rr_case "an allowed GET" GET /pub/a.txt 200
rr_case "a GET outside the allowed paths" GET /priv/p.txt 403
rr_case "a denied path under an allowed one" GET /pub/secret/s.txt 403
rr_case "a method no rule allows" DELETE /pub/a.txt 403
rr_case "an allowed POST" POST /ORG/repo 200 x=1
rr_case "a POST outside its path" POST /OTHER/repo 403 x=1
rr_case "a dot segment climbing out of the allowed path" GET /pub/../priv/p.txt 403
if grep -q "request rule '" "$T/rr.out" 2>/dev/null || grep -q "network.requestRules" "$T/rr.out"; then
    ok "the 403 inside the tunnel names the request rules"
else
    bad "403 names the rule" "$(cat "$T/rr.out")"
fi
# sluice check judges an https:// URL to a terminated host as the request
# inside the tunnel, as the proxy does (not as an unreadable tunnel)
out=$("$SLUICE" check --settings "$T/s.json" "https://rules.test:$PA/pub/a.txt" "https://rules.test:$PA/priv/p.txt" 2>&1)
if grep -q "^allow rules.test:$PA GET /pub/a.txt (https: terminated, judged inside the tunnel)" <<<"$out" &&
    grep -q "^deny  rules.test:$PA GET /priv/p.txt (https: terminated.*matches no allow rule" <<<"$out"; then
    ok "sluice check judges https:// URLs to a terminated host by method and path, as the proxy"
else
    bad "sluice check with tlsTerminate" "$out"
fi
# a ruled host in excludeDomains cannot be terminated: its CONNECT is refused
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 --cacert "$P/originca.pem" -x "$X" "https://pinned.test:$PA/hello.txt" 2>&1)
if [ "$code" = 000 ] && wait_for "$T/main.log" "host=pinned.test.*decision=deny.*has request rules" $((5 * SLOW)); then
    ok "a host with request rules that is not terminated (excludeDomains) is refused, never opaque"
else
    bad "ruled host in excludeDomains" "$code $(grep pinned.test "$T/main.log" | tail -2)"
fi
# non-TLS bytes to a ruled host: refused, never passed opaque
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 -p -x "$X" "http://rules.test:$PH/plain.txt" 2>&1)
if [ "$code" != 200 ] &&
    wait_for "$T/main.log" "protocol=connect host=rules.test port=$PH .*not TLS inside a tunnel to a host with request rules" $((5 * SLOW)); then
    ok "non-TLS bytes in a CONNECT to a host with request rules are refused"
else
    bad "non-TLS to a ruled host" "$code"
fi

# --- excludeDomains: the origin's own certificate ----------------------------
out=$(curl -sS -v --max-time 10 --cacert "$P/originca.pem" -x "$X" "https://excl.test:$PA/hello.txt" 2>"$T/c2.err")
if [ "$out" = "hello from the origin" ] && grep -q "issuer: CN=origin e2e CA" "$T/c2.err"; then
    ok "excludeDomains: an opaque tunnel, curl sees the origin's own certificate"
else
    bad "excludeDomains" "$out / $(grep -i 'issuer\|error' "$T/c2.err")"
fi

# --- not TLS after CONNECT: an opaque tunnel ---------------------------------
out=$(curl -sS --max-time 10 -p -x "$X" "http://good.test:$PH/plain.txt" 2>&1)
if [ "$out" = "plain origin" ]; then
    ok "non-TLS bytes after CONNECT stay an opaque tunnel"
else
    bad "non-TLS bytes after CONNECT" "$out"
fi

# --- bad origin certificates: 502 with the reason ----------------------------
bad_cert() { # NAME URL WANT
    local code body
    body=$(curl -sS --max-time 10 --cacert "$P/sluiceca.pem" -x "$X" -w '\n%{http_code}' "$2" 2>&1)
    code=${body##*$'\n'}
    if [ "$code" = 502 ] && grep -qi "$3" <<<"$body"; then
        ok "$1: 502 naming the failure ($3)"
    else
        bad "$1" "$body"
    fi
}
bad_cert "an expired origin certificate" "https://expired.test:$PB/hello.txt" "expired"
bad_cert "an origin certificate for another name" "https://wrong.test:$PA/hello.txt" "mismatch\|name"
bad_cert "an origin certificate from an unknown issuer" "https://unknown.test:$PC/hello.txt" "issuer"
if grep -q 'reason="TLS with the origin failed' "$T/main.log"; then
    ok "the bad certificates are logged with their reason"
else
    bad "bad certificate log" "$(tail -5 "$T/main.log")"
fi

# --- handshake metrics, and the exposition passes promtool --------------------
m=$(curl -sS --max-time 5 "http://127.0.0.1:$AP/metrics" 2>&1)
if grep -q '^sluice_tls_handshakes_total{side="client"} [1-9]' <<<"$m" &&
    grep -q '^sluice_tls_handshakes_total{side="origin"} [1-9]' <<<"$m" &&
    grep -q '^sluice_tls_handshake_failures_total{side="origin",reason="verify"} [3-9]' <<<"$m" &&
    grep -q '^sluice_tls_handshake_failures_total{side="client",reason="alpn"} [1-9]' <<<"$m" &&
    grep -q '^sluice_tls_handshake_failures_total{side="client",reason="bad_hello"} [1-9]' <<<"$m"; then
    ok "metrics: handshakes by side, failures by side and reason (verify, alpn, bad_hello)"
else
    bad "handshake metrics" "$(grep handshake <<<"$m")"
fi
if command -v promtool >/dev/null 2>&1; then
    if pt=$(promtool check metrics <<<"$m" 2>&1); then
        ok "promtool check metrics passes with the TLS metrics"
    else
        bad "promtool check metrics" "$pt"
    fi
fi

# --- handshake timeout: a silent client is closed ----------------------------
kill "$PROXY_PID" 2>/dev/null
# The timeout is long enough for a leaf minted under valgrind or ASan on a
# loaded machine (the scope and parentProxy cases below use this proxy too).
HS_MS=$((1000 * SLOW))
settings "$T/s2.json" ', "handshakeTimeoutMs": '"$HS_MS"', "scope": "needed"' \
    "
  \"parentProxy\": {\"https\": \"http://127.0.0.1:$PP\", \"noProxy\": \"good.test,rules.test\"},"
start_proxy second "$T/s2.json" --http tcp:127.0.0.1:0 --socks off
X="http://127.0.0.1:$HPORT"
out=$("$PY" - "$HPORT" "$PA" "$HS_MS" <<'EOF'
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"CONNECT rules.test:%s HTTP/1.1\r\nHost: rules.test\r\n\r\n" % sys.argv[2].encode())
head = s.recv(1000)
s.settimeout(int(sys.argv[3]) / 1000 + 5)
t = time.monotonic()
try:
    rest = s.recv(1000)
    print(head.split(b"\r\n")[0].decode(), "closed" if rest == b"" else "data", round(time.monotonic() - t, 1))
except socket.timeout:
    print(head.split(b"\r\n")[0].decode(), "still open")
EOF
)
case $out in
"HTTP/1.1 200 Connection Established closed "*)
    if grep -q "handshake timeout" "$T/second.log"; then
        ok "handshakeTimeoutMs: a client silent after the 200 is closed ($out)"
    else
        bad "handshake timeout log" "$(tail -3 "$T/second.log")"
    fi ;;
*) bad "handshake timeout" "$out" ;;
esac

# --- scope "needed": only hosts with request rules are terminated -------------
out=$(curl -sS -v --max-time 10 --cacert "$P/originca.pem" -x "$X" "https://good.test:$PA/hello.txt" 2>"$T/n1.err")
if [ "$out" = "hello from the origin" ] && grep -q "issuer: CN=origin e2e CA" "$T/n1.err" &&
    ! grep -q "good.test.*terminated=1" "$T/second.log"; then
    ok "scope needed: a host without request rules stays opaque (the origin's certificate)"
else
    bad "scope needed, no rules" "$out / $(grep -i 'issuer\|error' "$T/n1.err")"
fi
out=$(curl -sS -v --max-time 10 --cacert "$P/sluiceca.pem" -x "$X" "https://rules.test:$PA/pub/a.txt" 2>"$T/n2.err")
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 --cacert "$P/sluiceca.pem" -x "$X" "https://rules.test:$PA/priv/p.txt" 2>&1)
if [ "$out" = "public file" ] && grep -q "issuer: CN=sluice e2e CA" "$T/n2.err" && [ "$code" = 403 ]; then
    ok "scope needed: a host with request rules is terminated and judged (200, 403)"
else
    bad "scope needed, rules" "$out $code / $(grep -i 'issuer\|error' "$T/n2.err")"
fi

# --- parentProxy on the terminated leg ------------------------------------------
: > "$T/parent.log"
out=$(curl -sS -v --max-time 10 --cacert "$P/sluiceca.pem" -x "$X" "https://far.test:$PF/hello.txt" "https://far.test:$PF/plain.txt" 2>"$T/p1.err")
np=$(grep -c "^CONNECT " "$T/parent.log")
if [ "$out" = "hello from the origin
plain origin" ] && grep -q "issuer: CN=sluice e2e CA" "$T/p1.err" && [ "$np" = 1 ]; then
    ok "parentProxy: a terminated tunnel's upstream leg goes through the parent (one CONNECT for two requests)"
else
    bad "parentProxy on the terminated leg" "$out / parent: $(cat "$T/parent.log") / $(grep -i 'issuer\|error' "$T/p1.err") / $(grep far.test "$T/second.log" | tail -3)"
fi

# --- maxTunnels: 503 too-many-tunnels while one is held -----------------------
# Its own proxy with the default handshake timeout: the held tunnel's first
# handshake mints a leaf, which under valgrind or ASan on a loaded machine can
# take longer than a short handshake timeout.
kill "$PROXY_PID" 2>/dev/null
settings "$T/s3.json" ', "maxTunnels": 1'
start_proxy third "$T/s3.json" --http tcp:127.0.0.1:0 --socks tcp:127.0.0.1:0
X="http://127.0.0.1:$HPORT"
"$PY" - "$HPORT" "$PA" "$P/sluiceca.pem" > "$T/hold.out" 2>&1 <<'EOF' &
import socket, ssl, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"CONNECT good.test:%s HTTP/1.1\r\nHost: good.test\r\n\r\n" % sys.argv[2].encode())
s.recv(1000)
ctx = ssl.create_default_context(cafile=sys.argv[3])
t = ctx.wrap_socket(s, server_hostname="good.test")
print("held", flush=True)
time.sleep(3600)  # until the test kills it
EOF
HOLD=$!
for i in $(seq $((100 * SLOW))); do grep -q held "$T/hold.out" && break; sleep 0.1; done
curl -sS -v --max-time 10 --cacert "$P/sluiceca.pem" -x "$X" "https://good.test:$PA/hello.txt" >/dev/null 2>"$T/c3.err"
if grep -q "< HTTP/1.1 503" "$T/c3.err" && grep -qi "< X-Proxy-Error: too-many-tunnels" "$T/c3.err"; then
    ok "maxTunnels 1 with one held: 503 with X-Proxy-Error: too-many-tunnels"
else
    bad "maxTunnels" "$(cat "$T/hold.out") / $(grep '^<' "$T/c3.err")"
fi
out=$("$PY" "$T/cl.py" socks "$SPORT" good.test "$PA" "$P/sluiceca.pem" "get /hello.txt" 2>&1)
if [ "$out" = "socks reply 1" ]; then
    ok "maxTunnels 1 with one held: a SOCKS5 CONNECT gets a general-failure reply (1)"
else
    bad "maxTunnels over SOCKS5" "$out"
fi
kill "$HOLD" 2>/dev/null
wait "$HOLD" 2>/dev/null
# the slot comes back once it closed
out=""
for i in $(seq $((30 * SLOW))); do
    out=$(curl -sS --max-time 10 --cacert "$P/sluiceca.pem" -x "$X" "https://good.test:$PA/hello.txt" 2>&1)
    [ "$out" = "hello from the origin" ] && break
    sleep 0.1
done
if [ "$out" = "hello from the origin" ]; then
    ok "maxTunnels: the slot is free again once the held tunnel closed"
else
    bad "maxTunnels slot not released" "$out"
fi

e2e_finish
