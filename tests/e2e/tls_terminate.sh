#!/usr/bin/env bash
# tests/e2e/tls_terminate.sh - network.tlsTerminate in sluice proxy (issue
# 23): a CA from files made here, HTTPS origins with their own CA (openssl
# CLI, python3 http.server + ssl), curl through the proxy.
#
# Everything runs in a private network namespace (unshare -n, as root): the
# origins on 127.0.0.10 and 127.0.0.11 there (denyPrivateAddresses false),
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

# --- the namespace ----------------------------------------------------------
if ! ip link set lo up; then
    bad "cannot set up the private network namespace"
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
    ! leaf good originca "DNS:good.test,DNS:excl.test,DNS:rules.test,DNS:many.test" -days 30 ||
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
    def __init__(self, *a, **k):
        super().__init__(*a, directory=root, **k)
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
s = http.server.ThreadingHTTPServer((addr, port), H)
if cert != "-":
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    s.socket = ctx.wrap_socket(s.socket, server_side=True)
s.serve_forever()
EOF
start_origin() { # ADDR PORT CERT KEY
    python3 "$T/origin.py" "$1" "$2" "$3" "$4" "$T/www" 2>>"$T/origins.err" &
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
for i in $(seq 100); do
    curl -s -o /dev/null --max-time 1 --cacert "$P/originca.pem" --resolve "good.test:$PA:$O1" \
        "https://good.test:$PA/hello.txt" && break
    sleep 0.1
done

start_dnsmasq --address=/good.test/$O1 --address=/excl.test/$O1 --address=/wrong.test/$O1 \
    --address=/rules.test/$O1 --address=/pinned.test/$O1 --address=/many.test/$O1 --address=/expired.test/$O2 --address=/unknown.test/$O2 || {
    bad "dnsmasq did not start" "$(cat "$T/dnsmasq.err")"
    e2e_finish
    exit
}

settings() { # FILE EXTRA-TLS-KEYS
    cat > "$1" <<JSON
{"network": {"allowedDomains": ["*.test", "$O1", "$O2"], "dnsServers": ["127.0.0.1:$DPORT"],
  "denyPrivateAddresses": false, "requireHostMatch": true,
  "requestRules": [
    {"host": "rules.test", "method": "GET", "path": "/pub/**", "action": "allow"},
    {"host": "rules.test", "method": "POST", "path": "/ORG/*", "action": "allow"},
    {"host": "rules.test", "path": "/pub/secret/**", "action": "deny"},
    {"host": "pinned.test", "action": "allow"}],
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
start_proxy main "$T/s.json" --http tcp:127.0.0.1:0 --socks off --admin "tcp:127.0.0.1:$AP"
X="http://127.0.0.1:$HPORT"
if [ -z "$HPORT" ]; then
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
out=$(python3 "$T/sni.py" "$HPORT" "good.test:$PA" "evil.test" "$P/sluiceca.pem" - 2>&1)
if grep -qx "SAN good.test" <<<"$out"; then
    ok "an SNI naming another host: the leaf is still for the CONNECT target"
else
    bad "leaf by CONNECT target" "$out"
fi
# an h2-only client (sluice serves http/1.1 only): on a host that needs no
# termination it passes opaque (the origin's own certificate reaches it) ...
out=$(python3 "$T/sni.py" "$HPORT" "good.test:$PA" "good.test" "$P/originca.pem" h2 2>&1)
if grep -q "^SAN good.test,excl.test,rules.test,many.test$" <<<"$out"; then
    ok "an h2-only ClientHello to a host without request rules passes opaque (origin's certificate)"
else
    bad "h2-only ClientHello, no rules" "$out"
fi
# ... and on a host with request rules it is refused, with the reason logged
out=$(python3 "$T/sni.py" "$HPORT" "rules.test:$PA" "rules.test" "$P/sluiceca.pem" h2 2>&1)
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
    curl -sS --max-time 20 --cacert "$P/sluiceca.pem" -x "$X" "https://many.test:$PA/hello.txt" \
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
# a ruled host in excludeDomains cannot be terminated: its CONNECT is refused
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 --cacert "$P/originca.pem" -x "$X" "https://pinned.test:$PA/hello.txt" 2>&1)
if [ "$code" = 000 ] && grep -q "host=pinned.test.*decision=deny.*has request rules" "$T/main.log"; then
    ok "a host with request rules that is not terminated (excludeDomains) is refused, never opaque"
else
    bad "ruled host in excludeDomains" "$code $(grep pinned.test "$T/main.log" | tail -2)"
fi
# non-TLS bytes to a ruled host: refused, never passed opaque
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 -p -x "$X" "http://rules.test:$PH/plain.txt" 2>&1)
if [ "$code" != 200 ] && grep -q "not TLS inside a tunnel to a host with request rules" "$T/main.log"; then
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

# --- handshake timeout: a silent client is closed ----------------------------
kill "$PROXY_PID" 2>/dev/null
settings "$T/s2.json" ', "handshakeTimeoutMs": 300'
start_proxy second "$T/s2.json" --http tcp:127.0.0.1:0 --socks off
X="http://127.0.0.1:$HPORT"
out=$(python3 - "$HPORT" "$PA" <<'EOF'
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"CONNECT good.test:%s HTTP/1.1\r\nHost: good.test\r\n\r\n" % sys.argv[2].encode())
head = s.recv(1000)
s.settimeout(5)
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

# --- maxTunnels: 503 too-many-tunnels while one is held -----------------------
# Its own proxy with the default handshake timeout: the held tunnel's first
# handshake mints a leaf, which under valgrind or ASan on a loaded machine can
# take longer than the 300 ms above.
kill "$PROXY_PID" 2>/dev/null
settings "$T/s3.json" ', "maxTunnels": 1'
start_proxy third "$T/s3.json" --http tcp:127.0.0.1:0 --socks off
X="http://127.0.0.1:$HPORT"
python3 - "$HPORT" "$PA" "$P/sluiceca.pem" > "$T/hold.out" 2>&1 <<'EOF' &
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
kill "$HOLD" 2>/dev/null
wait "$HOLD" 2>/dev/null
# the slot comes back once it closed
out=""
for i in $(seq 30); do
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
