#!/usr/bin/env bash
# tests/e2e/gateway.sh - credentials.headers (issue 24 item 4): `sluice
# proxy` as a gateway whose clients hold no secret. A client (curl, through
# the proxy's HTTP port) to a local HTTPS origin that records what it gets
# (tlsTerminate with a CA from files made here): the header arrives with the
# file's value; one the client sent is replaced, never duplicated; other
# hosts get none; the value is masked in the responses and is in no log
# line, message or /metrics; SIGHUP after the file changed sends the new
# value; a reload whose file is gone keeps the old one and says why; a
# start with the file missing is refused naming the entry; plain HTTP and
# an Upgrade to such a host are refused; an exec helper's value, refreshed
# after its lifetime; a failing helper refuses the requests (503, with the
# reason) and /readyz says not ready; sluice run refuses the key by name.
#
# Everything runs in a private network namespace (unshare -n, as root): the
# origins on 127.0.0.10, dnsmasq on 127.0.0.1 answering the *.test names,
# sluice there too. Nothing reaches the host's network. Skips when not root.
set -uo pipefail
SLUICE=${1:?usage: gateway.sh PATH/TO/sluice}
case $SLUICE in /*) ;; *) SLUICE=$(cd "$(dirname "$SLUICE")" && pwd)/$(basename "$SLUICE") ;; esac
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
O1=127.0.0.10

if [ -z "${SLUICE_GW_NETNS:-}" ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "ok - gateway # SKIP needs root (a private network namespace)"
        echo "0 passed, 0 failed"
        exit 0
    fi
    exec unshare -n env SLUICE_GW_NETNS=1 bash "$0" "$SLUICE"
fi

. "$HERE/lib.sh"
PY=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null || command -v python3)

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
leaf() { # NAME CA SAN
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$1" \
        -keyout "$P/$1.key" -out "$P/$1.csr" 2>>"$P/openssl.err" &&
        openssl x509 -req -in "$P/$1.csr" -CA "$P/$2.pem" -CAkey "$P/$2.key" -CAcreateserial \
            -days 30 -out "$P/$1.pem" -extfile <(printf 'subjectAltName=%s\nbasicConstraints=critical,CA:FALSE\nextendedKeyUsage=serverAuth\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n' "$3") \
            2>>"$P/openssl.err"
}
if ! mkca sluiceca "sluice e2e CA" || ! mkca originca "origin e2e CA" ||
    ! leaf origin originca "DNS:api.test,DNS:other.test,DNS:helper.test,DNS:fail.test"; then
    bad "cannot make the test certificates" "$(tail -5 "$P/openssl.err")"
    e2e_finish
    exit
fi

# --- the origin: records every request, echoes its credentials ---------------
# one line per request in $T/rec.log: host, path, how many Authorization
# headers and their values, X-Key, Accept-Encoding; the answer echoes the
# Authorization values in a header and in the body (so masking shows)
cat > "$T/origin.py" <<'EOF'
import http.server, ssl, sys
addr, port, cert, key, rec = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        auths = self.headers.get_all("Authorization") or []
        xk = self.headers.get_all("X-Key") or []
        with open(rec, "a") as f:
            f.write("host=%s path=%s nauth=%d auth=%s xkey=%s ae=%s\n" % (
                self.headers.get("Host"), self.path, len(auths), "|".join(auths) or "-",
                "|".join(xk) or "-", self.headers.get("Accept-Encoding", "-")))
        body = ("echo auth=" + "|".join(auths) + " xkey=" + "|".join(xk) + "\n").encode()
        self.send_response(200)
        self.send_header("X-Echo", "|".join(auths) or "-")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
ctx = None
if cert != "-":
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
class S(http.server.ThreadingHTTPServer):
    daemon_threads = True
    def get_request(self):
        sock, a = self.socket.accept()
        if ctx is not None:
            sock = ctx.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, a
S((addr, port), H).serve_forever()
EOF
: > "$T/rec.log"
PA=$(free_port)
PH=$(free_port)
"$PY" "$T/origin.py" "$O1" "$PA" "$P/origin.pem" "$P/origin.key" "$T/rec.log" 2>>"$T/origins.err" &
PIDS+=($!)
"$PY" "$T/origin.py" "$O1" "$PH" - - "$T/rec.log" 2>>"$T/origins.err" &
PIDS+=($!)
for i in $(seq 100); do
    curl -s -o /dev/null --max-time 1 --cacert "$P/originca.pem" --resolve "api.test:$PA:$O1" \
        "https://api.test:$PA/ready" && break
    sleep 0.1
done
: > "$T/rec.log"

start_dnsmasq --address=/api.test/$O1 --address=/other.test/$O1 --address=/helper.test/$O1 \
    --address=/fail.test/$O1 || {
    bad "dnsmasq did not start" "$(cat "$T/dnsmasq.err")"
    e2e_finish
    exit
}

# --- the secrets: a file (as a Kubernetes Secret's key) and a helper ---------
RND=$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
TOK1="gw-file-token-one-$RND"
TOK2="gw-file-token-two-$RND"
mkdir -p "$T/sec"
printf '%s\n' "$TOK1" > "$T/sec/token"
cat > "$T/helper.sh" <<EOF
#!/bin/sh
# prints a new token each run; counts its runs and its arguments
n=\$(cat "$T/hcount" 2>/dev/null || echo 0)
n=\$((n + 1))
# (written whole, then renamed: the test reads them while the helper runs)
echo "\$n" > "$T/hcount.tmp" && mv "$T/hcount.tmp" "$T/hcount"
echo "\$*" > "$T/hargs.tmp" && mv "$T/hargs.tmp" "$T/hargs"
printf '  helper-token-%04d-%s\n' "\$n" "$RND"
EOF
chmod 755 "$T/helper.sh"

settings() { # FILE HEADERS-JSON [EXTRA-CREDENTIALS-KEYS]
    cat > "$1" <<JSON
{"network": {"allowedDomains": ["*.test", "$O1"], "dnsServers": ["127.0.0.1:$DPORT"],
  "denyPrivateAddresses": false,
  "tlsTerminate": {"caCertPath": "$P/sluiceca.pem", "caKeyPath": "$P/sluiceca.key",
                   "extraCaCertPaths": ["$P/originca.pem"]}},
 "credentials": {${3:-}"headers": $2}}
JSON
}
HEADERS='[{"hosts": ["api.test"], "name": "Authorization",
   "value": {"file": "'"$T/sec/token"'", "prefix": "Bearer "}},
  {"hosts": ["helper.test"], "name": "X-Key",
   "value": {"exec": ["'"$T/helper.sh"'", "one arg", "two"], "ttl": 2, "timeout": 5}}]'
settings "$T/s.json" "$HEADERS"

# --- refused at load ----------------------------------------------------------
settings "$T/bad-host.json" '[{"hosts": ["api.example"], "name": "X-A", "value": {"env": "HOME"}}]'
out=$("$SLUICE" proxy --settings "$T/bad-host.json" --http tcp:127.0.0.1:0 --socks off 2>&1)
rc=$?
if [ "$rc" -eq 2 ] && grep -q "bad-host.json:5:[0-9]*: credentials.headers\[0\]: hosts 'api.example' is not covered by network.allowedDomains" <<<"$out"; then
    ok "a header host allowedDomains does not allow is refused at load, naming file:line:column"
else
    bad "header host not allowed" "rc $rc: $out"
fi
settings "$T/missing.json" '[{"hosts": ["api.test"], "name": "X-A", "value": {"file": "'"$T/sec/nothere"'"}}]'
out=$("$SLUICE" proxy --settings "$T/missing.json" --http tcp:127.0.0.1:0 --socks off 2>&1)
rc=$?
if [ "$rc" -eq 2 ] && grep -q "missing.json:5:[0-9]*: credentials.headers\[0\]: value.file '$T/sec/nothere': cannot read it: No such file or directory" <<<"$out"; then
    ok "a start whose value file is missing is refused, naming the entry and the file"
else
    bad "missing value file at start" "rc $rc: $out"
fi
printf '{"network": {"allowedDomains": ["*.test"]}, "credentials": {"headers": [{"hosts": ["api.test"], "name": "Host", "value": {"env": "HOME"}}]}}\n' > "$T/host.json"
out=$("$SLUICE" proxy --settings "$T/host.json" --http tcp:127.0.0.1:0 --socks off 2>&1)
rc=$?
if [ "$rc" -eq 2 ] && grep -q "host.json:1:[0-9]*: credentials.headers\[0\].name: 'Host': the proxy frames or strips this header itself" <<<"$out"; then
    ok "a header the proxy frames itself (Host) is refused at load"
else
    bad "Host header" "rc $rc: $out"
fi
printf '{"network": {"allowedDomains": ["api.test"]}, "credentials": {"headers": [{"hosts": ["api.test"], "name": "X-A", "value": {"env": "HOME"}}]}}\n' > "$T/nottls.json"
out=$("$SLUICE" proxy --settings "$T/nottls.json" --http tcp:127.0.0.1:0 --socks off 2>&1)
rc=$?
if [ "$rc" -eq 2 ] && grep -q "nottls.json:1:[0-9]*: credentials.headers\[0\]: a header is injected inside terminated HTTPS: it needs network.tlsTerminate, or credentials.allowPlaintextInject" <<<"$out"; then
    ok "headers without tlsTerminate or allowPlaintextInject are refused at load"
else
    bad "headers without tlsTerminate" "rc $rc: $out"
fi
out=$(cd "$T" && "$SLUICE" run --settings "$T/s.json" -- true 2>&1)
rc=$?
if [ "$rc" -ne 0 ] && grep -q "s.json:[0-9]*:[0-9]*: credentials.headers\[0\]: refused by sluice run: header injection is sluice proxy's form" <<<"$out"; then
    ok "sluice run refuses credentials.headers by name"
else
    bad "sluice run with headers" "rc $rc: $out"
fi

# --- the gateway ----------------------------------------------------------------
AP=$(free_port)
start_proxy main "$T/s.json" --http tcp:127.0.0.1:0 --socks off --admin "tcp:127.0.0.1:$AP"
X="http://127.0.0.1:$HPORT"
if [ -z "$HPORT" ]; then
    e2e_finish
    exit
fi
for i in $(seq 100); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$AP/readyz")" = 200 ] && break
    sleep 0.1
done
get() { # URL [CURL-ARGS...]: the body, and the response head in $T/head
    local url=$1
    shift
    curl -sS --max-time 10 --cacert "$P/sluiceca.pem" -x "$X" -D "$T/head" "$@" "$url" 2>"$T/curl.err"
}
last() { tail -1 "$T/rec.log"; }

out=$(get "https://api.test:$PA/one")
if [ "$(last)" = "host=api.test:$PA path=/one nauth=1 auth=Bearer $TOK1 xkey=- ae=-" ]; then
    ok "the origin gets Authorization: Bearer + the file's value (trimmed), once"
else
    bad "header from the file" "$(last) / $(cat "$T/curl.err")"
fi
if ! grep -q "$TOK1" <<<"$out" && ! grep -q "$TOK1" "$T/head" &&
    grep -qE "^echo auth=Bearer [0-9A-Za-z-]{${#TOK1}} " <<<"$out" &&
    grep -qiE "^x-echo: Bearer [0-9A-Za-z-]{${#TOK1}}" "$T/head"; then
    ok "the value is masked in the response (head and body), by a mask of its length"
else
    bad "response masking" "$out / $(cat "$T/head")"
fi
out=$(get "https://api.test:$PA/two" -H "Authorization: Bearer client-own-token-0123456789" -H "Accept-Encoding: gzip")
if [ "$(last)" = "host=api.test:$PA path=/two nauth=1 auth=Bearer $TOK1 xkey=- ae=-" ]; then
    ok "a client's own Authorization is replaced, never duplicated (and Accept-Encoding dropped)"
else
    bad "replaced" "$(last)"
fi
out=$(get "https://api.test:$PA/three" -H "authorization: one" -H "AUTHORIZATION: two")
if [ "$(last)" = "host=api.test:$PA path=/three nauth=1 auth=Bearer $TOK1 xkey=- ae=-" ]; then
    ok "two client headers of that name in any case: replaced by one"
else
    bad "replaced (case, two)" "$(last)"
fi
out=$(get "https://other.test:$PA/other" -H "Authorization: Bearer client-own")
if [ "$(last)" = "host=other.test:$PA path=/other nauth=1 auth=Bearer client-own xkey=- ae=-" ]; then
    ok "another host gets no header (the client's own goes as it is)"
else
    bad "other host" "$(last)"
fi
out=$(get "https://other.test:$PA/other2" -H "Host: api.test:$PA")
if last | grep -q "path=/other2 nauth=0 auth=- " && [ "$(grep -c "$TOK1" "$T/rec.log")" -ge 3 ] &&
    ! last | grep -q "$TOK1"; then
    ok "a Host header naming api.test in a tunnel to other.test gets no header"
else
    bad "Host header naming the injection host" "$(last)"
fi
if wait_for "$T/main.log" "event=decision .*host=api\.test .*credential_header=headers\[0\]:Authorization" 5; then
    ok "the decision record names the header entry (credential_header=headers[0]:Authorization)"
else
    bad "decision record" "$(grep 'event=decision' "$T/main.log" | tail -3)"
fi

# plain HTTP to an injection host without allowPlaintextInject: refused
n0=$(wc -l < "$T/rec.log")
out=$(curl -sS --max-time 10 -x "$X" -w ' %{http_code}' "http://api.test:$PH/plain" 2>&1)
if grep -q "403" <<<"$out" && grep -q "credentials.allowPlaintextInject" <<<"$out" &&
    [ "$(wc -l < "$T/rec.log")" = "$n0" ]; then
    ok "plain HTTP to the host is refused (403, with the reason) and never sent"
else
    bad "plain HTTP" "$out / $(last)"
fi
# an Upgrade to it: refused
out=$(get "https://api.test:$PA/ws" -H "Upgrade: websocket" -H "Connection: Upgrade" -w ' %{http_code}')
if grep -q " 403" <<<"$out" && grep -q "Upgrade" <<<"$out" && [ "$(wc -l < "$T/rec.log")" = "$n0" ]; then
    ok "an Upgrade to the host is refused (403, with the reason)"
else
    bad "Upgrade" "$out"
fi

# --- reload --------------------------------------------------------------------
printf '%s\n' "$TOK2" > "$T/sec/token.new"
mv "$T/sec/token.new" "$T/sec/token"
nr=$(grep -c 'event=reload ' "$T/main.log")
kill -HUP "$PROXY_PID"
for i in $(seq 100); do [ "$(grep -c 'event=reload ' "$T/main.log")" -gt "$nr" ] && break; sleep 0.05; done
out=$(get "https://api.test:$PA/after-hup")
if [ "$(last)" = "host=api.test:$PA path=/after-hup nauth=1 auth=Bearer $TOK2 xkey=- ae=-" ]; then
    ok "SIGHUP after the file changed: the new value"
else
    bad "SIGHUP new value" "$(last) / $(grep reload "$T/main.log")"
fi
rm -f "$T/sec/token"
nf=$(grep -c 'event=reload_failed' "$T/main.log")
kill -HUP "$PROXY_PID"
for i in $(seq 100); do [ "$(grep -c 'event=reload_failed' "$T/main.log")" -gt "$nf" ] && break; sleep 0.05; done
if grep 'event=reload_failed' "$T/main.log" | tail -1 |
    grep -q "keeping the current policy: .*s.json:[0-9]*:[0-9]*: credentials.headers\[0\]: value.file '$T/sec/token': cannot read it: No such file or directory"; then
    ok "SIGHUP with the file gone: the reload fails, says why and keeps the old configuration"
else
    bad "reload with a missing file" "$(grep reload "$T/main.log" | tail -2)"
fi
out=$(get "https://api.test:$PA/after-rm")
if [ "$(last)" = "host=api.test:$PA path=/after-rm nauth=1 auth=Bearer $TOK2 xkey=- ae=-" ]; then
    ok "... and requests still get the last good value (never none, never empty)"
else
    bad "after a failed reload" "$(last)"
fi
printf '%s\n' "$TOK2" > "$T/sec/token"

# --- the helper ----------------------------------------------------------------
out=$(get "https://helper.test:$PA/h1")
h1=$(last | sed -n 's/.* xkey=\(helper-token-[0-9]*-[0-9a-f]*\) .*/\1/p')
if [ -n "$h1" ] && [ "$(cat "$T/hargs")" = "one arg two" ] && ! grep -q "$h1" <<<"$out"; then
    ok "an exec helper's output (trimmed) is the value (argv as given, no shell), masked in the response"
else
    bad "helper value" "$(last) / args $(cat "$T/hargs" 2>/dev/null) / $out"
fi
sleep 2.5
out=$(get "https://helper.test:$PA/h2")
h2=$(last | sed -n 's/.* xkey=\(helper-token-[0-9]*-[0-9a-f]*\) .*/\1/p')
if [ -n "$h2" ] && [ "$h2" != "$h1" ] && [ "$(cat "$T/hcount")" -ge 2 ] &&
    grep -q "event=credential_helper .*headers\[1\]:X-Key: its helper gave a new value" "$T/main.log"; then
    ok "after its lifetime (ttl 2 s) the helper's value is a new one (refreshed, logged by entry)"
else
    bad "helper refresh" "h1 $h1 h2 $h2 count $(cat "$T/hcount") / $(grep credential_helper "$T/main.log" | tail -2)"
fi

# --- nothing leaks: logs, messages, metrics -------------------------------------
curl -s --max-time 5 "http://127.0.0.1:$AP/metrics" > "$T/metrics.txt"
leak=
for v in "$TOK1" "$TOK2" "helper-token-"; do
    grep -l -- "$v" "$T/main.log" "$T/main.err" "$T/metrics.txt" "$T/curl.err" 2>/dev/null && leak="$leak $v"
done
if [ -z "$leak" ] && [ -s "$T/metrics.txt" ] && grep -q "credential_header=" "$T/main.log"; then
    ok "no value in the log, the proxy's messages or /metrics"
else
    bad "a value leaked" "$leak"
fi
mi=$(awk '$1 == "sluice_credential_headers_total{result=\"injected\"}" { print $2 }' "$T/metrics.txt")
mr=$(awk '$1 == "sluice_credential_headers_total{result=\"refused\"}" { print $2 }' "$T/metrics.txt")
mh=$(awk '$1 == "sluice_credential_helper_runs_total{result=\"ok\"}" { print $2 }' "$T/metrics.txt")
if [ "${mi:-0}" -ge 7 ] && [ "${mr:-0}" -ge 2 ] && [ "${mh:-0}" -ge 2 ] &&
    grep -q '^sluice_credential_headers_unready 0$' "$T/metrics.txt"; then
    ok "/metrics counts injected ($mi) and refused ($mr) requests and helper runs ($mh)"
else
    bad "metrics" "$(grep sluice_credential "$T/metrics.txt")"
fi

# --- a failing helper: refused with the reason; not ready -------------------------
settings "$T/fail.json" '[{"hosts": ["fail.test"], "name": "X-Key", "value": {"exec": ["/bin/false"], "ttl": 2}}]'
AP2=$(free_port)
start_proxy fail "$T/fail.json" --http tcp:127.0.0.1:0 --socks off --admin "tcp:127.0.0.1:$AP2"
wait_for "$T/fail.log" "event=credential_helper_failed" 5
XF="http://127.0.0.1:$HPORT"
n0=$(wc -l < "$T/rec.log")
out=$(curl -sS --max-time 10 --cacert "$P/sluiceca.pem" -x "$XF" -w ' %{http_code}' "https://fail.test:$PA/f" 2>&1)
rz=$(curl -s -w ' %{http_code}' --max-time 5 "http://127.0.0.1:$AP2/readyz")
if grep -q " 503$" <<<"$out" &&
    grep -q "credentials.headers entry headers\[0\]:X-Key has no value: its helper failed: exit status 1" <<<"$out" &&
    [ "$(wc -l < "$T/rec.log")" = "$n0" ] && grep -q " 503$" <<<"$rz" &&
    grep -q "event=credential_helper_failed .*headers\[0\]:X-Key: its helper failed: exit status 1" "$T/fail.log"; then
    ok "a failing helper: 503 with the reason, never sent; /readyz not ready; logged by entry"
else
    bad "failing helper" "$out / readyz $rz / $(grep credential "$T/fail.log" | tail -2)"
fi

# --- --watch: a change of the value file reloads (a Secret's update) ----------
mkdir -p "$T/sec2"
printf '%s\n' "$TOK1" > "$T/sec2/token"
settings "$T/watch.json" '[{"hosts": ["api.test"], "name": "Authorization", "value": {"file": "'"$T/sec2/token"'"}}]'
start_proxy watch "$T/watch.json" --http tcp:127.0.0.1:0 --socks off --watch
X="http://127.0.0.1:$HPORT"
get "https://api.test:$PA/w1" >/dev/null
w1=$(last)
printf '%s\n' "$TOK2" > "$T/sec2/token.new"
mv "$T/sec2/token.new" "$T/sec2/token"
wait_for "$T/watch.log" "event=reload " 10
get "https://api.test:$PA/w2" >/dev/null
if [ "$w1" = "host=api.test:$PA path=/w1 nauth=1 auth=$TOK1 xkey=- ae=-" ] &&
    [ "$(last)" = "host=api.test:$PA path=/w2 nauth=1 auth=$TOK2 xkey=- ae=-" ]; then
    ok "--watch: replacing the value file reloads it (no prefix: the value alone)"
else
    bad "--watch" "$w1 / $(last) / $(grep reload "$T/watch.log")"
fi

e2e_finish
