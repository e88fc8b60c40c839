#!/usr/bin/env bash
# tests/e2e/admin.sh - operating `sluice proxy`: the admin listener (--admin:
# /healthz, /readyz, Prometheus /metrics), the health path on the HTTP proxy
# port (--health-path), SIGHUP reloads (a good and a bad file) while a
# CONNECT tunnel and a SOCKS5 tunnel stay open, the SIGTERM drain (idle
# kept-alive clients closed at once, an answer in progress finished with
# Connection: close, tunnels running until they end or the drain time is up)
# and the connection limit (503 / SOCKS 0x01 at once, never a hang).
# Everything is on 127.0.0.1; dnsmasq started here answers the names. Timing
# checks use generous bounds only (a drain that must take "well under" the
# configured 30 s, never a tight figure).
set -uo pipefail
SLUICE=${1:?usage: admin.sh PATH/TO/sluice}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/lib.sh"
# lib.sh: $T, ok/bad, PIDS (killed at exit; KEEP=1 keeps $T), free_port,
# start_dnsmasq, start_proxy, wait_for, wait_exit, listen_port
RAW="python3 -u $HERE/http-helpers/raw.py"
RAWSOCK="python3 $HERE/rawsock.py"
ORIGIN="python3 $HERE/http-helpers/origin.py"
H11=' HTTP/1.1\r\nHost: x\r\n\r\n'

# --- helpers written here --------------------------------------------------------------
# peers.py echo PORT | slow PORT SECONDS: an echo server, or an HTTP origin
# that prints "req" for each request and answers it (keep-alive, "slow\n")
# after SECONDS.
cat > "$T/peers.py" <<'PY'
import socket, sys, threading, time

def serve_echo(c):
    while True:
        d = c.recv(65536)
        if not d:
            break
        c.sendall(d)
    c.close()

def serve_slow(c, delay):
    buf = b""
    while True:
        while b"\r\n\r\n" not in buf:
            d = c.recv(65536)
            if not d:
                c.close()
                return
            buf += d
        buf = buf[buf.index(b"\r\n\r\n") + 4:]
        print("req", flush=True)
        time.sleep(delay)
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nslow\n")

mode, port = sys.argv[1], int(sys.argv[2])
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port))
s.listen(128)
print("listening", flush=True)
while True:
    c, _ = s.accept()
    if mode == "echo":
        t = threading.Thread(target=serve_echo, args=(c,), daemon=True)
    else:
        t = threading.Thread(target=serve_slow, args=(c, float(sys.argv[3])), daemon=True)
    t.start()
PY
# tun.py CTL OUT: holds tunnels, driven by lines on the fifo CTL; one result
# line per command in OUT:
#   connect NAME PROXYPORT HOST PORT  -> "NAME open STATUS" (HTTP CONNECT)
#   socks NAME PROXYPORT HOST PORT    -> "NAME open REP" (SOCKS5 reply code)
#   ping NAME TEXT                    -> "NAME echo TEXT" or "NAME fail TEXT ..."
#   close NAME                        -> "NAME closed"
cat > "$T/tun.py" <<'PY'
import socket, struct, sys

ctl, out = sys.argv[1], sys.argv[2]
conns = {}
o = open(out, "a", buffering=1)

def say(s):
    o.write(s + "\n")
    o.flush()

def exact(s, n):
    b = b""
    while len(b) < n:
        d = s.recv(n - len(b))
        if not d:
            break
        b += d
    return b

for line in open(ctl):
    w = line.split()
    if not w:
        continue
    try:
        if w[0] == "connect":
            s = socket.create_connection(("127.0.0.1", int(w[2])), timeout=10)
            s.sendall(("CONNECT %s:%s HTTP/1.1\r\nHost: %s:%s\r\n\r\n" % (w[3], w[4], w[3], w[4])).encode())
            head = b""
            while b"\r\n\r\n" not in head:
                d = s.recv(1)
                if not d:
                    break
                head += d
            conns[w[1]] = s
            say("%s open %s" % (w[1], head.split(b" ")[1].decode() if head else "EOF"))
        elif w[0] == "socks":
            s = socket.create_connection(("127.0.0.1", int(w[2])), timeout=10)
            h = w[3].encode()
            s.sendall(b"\x05\x01\x00")
            exact(s, 2)
            s.sendall(b"\x05\x01\x00\x03" + bytes([len(h)]) + h + struct.pack(">H", int(w[4])))
            r = exact(s, 10)
            conns[w[1]] = s
            say("%s open %s" % (w[1], r[1] if len(r) > 1 else "EOF"))
        elif w[0] == "ping":
            s = conns[w[1]]
            data = w[2].encode()
            s.sendall(data)
            got = exact(s, len(data))
            say("%s %s %s %r" % (w[1], "echo" if got == data else "fail", w[2], got))
        elif w[0] == "close":
            conns.pop(w[1]).close()
            say("%s closed" % w[1])
    except Exception as e:
        say("%s error %s %s" % (w[1] if len(w) > 1 else w[0], w[2] if len(w) > 2 else "", type(e).__name__))
PY
# promcheck.py: reads a Prometheus text exposition on stdin; prints what is
# wrong with it (nothing when it is well-formed for format 0.0.4).
cat > "$T/promcheck.py" <<'PY'
import re, sys
name = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
label = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*"'
sample = re.compile(r"^(%s)(\{%s(?:,%s)*\})? (-?[0-9]+(?:\.[0-9]+)?(?:e[+-]?[0-9]+)?|NaN|[+-]Inf)$" % (name, label, label))
types, helps, seen = {}, set(), set()
for n, line in enumerate(sys.stdin.read().split("\n"), 1):
    if line == "":
        continue
    m = re.match(r"^# (HELP|TYPE) (%s) (.+)$" % name, line)
    if m:
        if m.group(1) == "TYPE":
            if m.group(3) not in ("counter", "gauge", "histogram", "summary", "untyped"):
                print("%d: bad type %s" % (n, m.group(3)))
            if m.group(2) in types:
                print("%d: second TYPE for %s" % (n, m.group(2)))
            types[m.group(2)] = m.group(3)
        else:
            helps.add(m.group(2))
        continue
    if line.startswith("#"):
        print("%d: bad comment: %s" % (n, line))
        continue
    m = sample.match(line)
    if not m:
        print("%d: not 'name{labels} value': %s" % (n, line))
        continue
    base = m.group(1)
    for suffix in ("_bucket", "_sum", "_count"):  # a histogram's series
        if base.endswith(suffix) and types.get(base[:-len(suffix)]) == "histogram":
            base = base[:-len(suffix)]
    if base not in types:
        print("%d: %s without a TYPE line before it" % (n, m.group(1)))
    if base not in helps:
        print("%d: %s without a HELP line" % (n, m.group(1)))
    if types.get(m.group(1)) == "counter" and not m.group(1).endswith("_total"):
        print("%d: counter %s does not end in _total" % (n, m.group(1)))
    key = m.group(1) + (m.group(2) or "")
    if key in seen:
        print("%d: duplicate series %s" % (n, key))
    seen.add(key)
if not seen:
    print("no samples")
PY

# --- peers and names -----------------------------------------------------------------------------
PA=$(free_port); PE=$(free_port); PS=$(free_port); AP=$(free_port)
$ORIGIN A "$PA" "$T/A.log" 2>"$T/A.err" &
PIDS+=($!)
python3 "$T/peers.py" echo "$PE" > "$T/echo.out" 2>&1 &
PIDS+=($!)
python3 "$T/peers.py" slow "$PS" 3 > "$T/slow.out" 2>&1 &
PIDS+=($!)
start_dnsmasq --local=/test/ --host-record=origin.test,127.0.0.1 --host-record=echo.test,127.0.0.1 \
    --host-record=denied.test,127.0.0.1
[ -n "$DPORT" ] || { bad "dnsmasq did not start" "$(cat "$T/dnsmasq.err")"; e2e_finish; exit 1; }
wait_for "$T/A.log" listening; wait_for "$T/echo.out" listening; wait_for "$T/slow.out" listening

write_settings() { # FILE [EXTRA_DENIED] [PROXY_JSON]
    cat > "$1" <<JSON
{"network": {"allowedDomains": ["origin.test", "echo.test", "127.0.0.1:$PA", "127.0.0.1:$PE",
                                "127.0.0.1:$PS", "127.0.0.1:$AP"],
             "deniedDomains": ["denied.test"${2:+, \"$2\"}],
             "dnsServers": ["127.0.0.1:$DPORT"]},
 "proxy": {"timeouts": {"head": 2, "dns": 2, "dial": 2, "idle": 60${3:+, $3}}}}
JSON
}

A="http://origin.test:$PA"
# metrics_get: the admin's /metrics into $T/metrics.txt; metric SERIES: a value from it
metrics_get() { curl -s --max-time 5 "http://127.0.0.1:$AP/metrics" > "$T/metrics.txt"; }
metric() { awk -v k="$1" '$1 == k { print $2; f = 1 } END { if (!f) print "none" }' "$T/metrics.txt"; }

# tunnels: tun.py reading the fifo $T/ctl (fd 7 keeps it open), results in $T/tun.out
start_tun() {
    rm -f "$T/ctl"; : > "$T/tun.out"
    mkfifo "$T/ctl"
    python3 "$T/tun.py" "$T/ctl" "$T/tun.out" 2>"$T/tun.err" &
    TUN_PID=$!
    PIDS+=($TUN_PID)
    exec 7>"$T/ctl"
}
stop_tun() { exec 7>&-; wait_exit "$TUN_PID" 5 || kill "$TUN_PID" 2>/dev/null; }
tun() { echo "$*" >&7; }
# tun_check NAME REGEX: the next result line matching REGEX appears (10 s at most)
tun_check() {
    if wait_for "$T/tun.out" "$2" 10; then ok "$1"; else bad "$1" "$(cat "$T/tun.out" "$T/tun.err")"; fi
}

# =========================================================================================
# 1. The admin listener
# =========================================================================================
write_settings "$T/s.json"
start_proxy main "$T/s.json" --http tcp:127.0.0.1:0 --socks tcp:127.0.0.1:0 \
    --admin "tcp:127.0.0.1:$AP" --health-path /hc
HP=$(listen_port main http); SP=$(listen_port main socks5)
[ -n "$HP" ] && [ -n "$SP" ] && [ "$(listen_port main admin)" = "$AP" ] \
    && ok "start line names the admin endpoint" || { bad "start line" "$(cat "$T/main.log" "$T/main.err")"; e2e_finish; exit 1; }
X="-s --max-time 10 -x http://127.0.0.1:$HP"

out=$(curl -s -i --max-time 5 "http://127.0.0.1:$AP/healthz" | tr -d '\r')
case "$out" in "HTTP/1.1 200 OK"*"Cache-Control: no-store"*$'\n\nok') ok "/healthz: 200 ok";; *) bad "/healthz" "$out";; esac
out=$(curl -s -w ' %{http_code}' --max-time 5 "http://127.0.0.1:$AP/readyz")
[ "$out" = "ready
 200" ] && ok "/readyz: 200 when serving" || bad "/readyz" "$out"
ct=$(curl -s -o "$T/metrics.txt" -w '%{http_code} %{content_type}' --max-time 5 "http://127.0.0.1:$AP/metrics")
[ "$ct" = "200 text/plain; version=0.0.4; charset=utf-8" ] && ok "/metrics: 200, text format 0.0.4" || bad "/metrics content type" "$ct"
probs=$(python3 "$T/promcheck.py" < "$T/metrics.txt")
[ -z "$probs" ] && ok "/metrics parses: HELP and TYPE for every metric, each sample 'name{labels} value'" || bad "/metrics format" "$probs"
badl=$(grep -v '^#' "$T/metrics.txt" | grep -vE '^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[a-zA-Z_][a-zA-Z0-9_]*="[^"]*"(,[a-zA-Z_][a-zA-Z0-9_]*="[^"]*")*\})? [0-9.e+-]+$')
[ -z "$badl" ] && ok "/metrics: every non-comment line matches name{labels} value" || bad "/metrics lines" "$badl"
missing=
for m in sluice_connections_total sluice_connections_active sluice_decisions_total sluice_bytes_total \
         sluice_reloads_total sluice_asks_pending sluice_overloaded_total sluice_build_info \
         process_start_time_seconds sluice_draining; do
    grep -q "^# TYPE $m " "$T/metrics.txt" || missing="$missing $m"
done
[ -z "$missing" ] && ok "/metrics has every documented metric" || bad "/metrics missing" "$missing"
grep -qE '^sluice_build_info\{version="[0-9]+\.[0-9]+\.[0-9]+[^"]*"\} 1$' "$T/metrics.txt" \
    && ok "/metrics: sluice_build_info{version} 1" || bad "build_info" "$(grep build_info "$T/metrics.txt")"
st=$(metric process_start_time_seconds); now=$(date +%s)
awk -v s="$st" -v n="$now" 'BEGIN { exit !(s > n - 600 && s <= n + 1) }' \
    && ok "/metrics: process_start_time_seconds is the start time" || bad "start time" "$st vs $now"

# counters move with traffic
h0=$(metric 'sluice_connections_total{protocol="http"}'); s0=$(metric 'sluice_connections_total{protocol="socks5"}')
a0=$(metric 'sluice_decisions_total{protocol="http",decision="allow"}')
d0=$(metric 'sluice_decisions_total{protocol="http",decision="deny"}')
c0=$(metric 'sluice_decisions_total{protocol="connect",decision="allow"}')
k0=$(metric 'sluice_decisions_total{protocol="socks5",decision="allow"}')
b0=$(metric 'sluice_bytes_total{direction="down"}'); u0=$(metric 'sluice_bytes_total{direction="up"}')
out=$(curl $X "$A/index.html"); [ "$out" = "hello from A" ] || bad "fetch through the proxy" "$out"
curl $X -o /dev/null "http://denied.test:$PA/"
out=$(curl $X -p "$A/index.html"); [ "$out" = "hello from A" ] || bad "CONNECT through the proxy" "$out"
out=$(curl -s --max-time 10 --socks5-hostname "127.0.0.1:$SP" "$A/index.html"); [ "$out" = "hello from A" ] || bad "SOCKS through the proxy" "$out"
gt() { awk -v a="$1" -v b="$2" -v d="${3:-1}" 'BEGIN { exit !(a != "none" && b != "none" && a - b >= d) }'; }
for i in $(seq $((50 * SLOW))); do # the close records of the four connections are in
    metrics_get
    gt "$(metric 'sluice_connections_total{protocol="http"}')" "$h0" 3 && gt "$(metric 'sluice_bytes_total{direction="down"}')" "$b0" 52 &&
        [ "$(metric 'sluice_connections_active{protocol="http"}')" = 0 ] && [ "$(metric 'sluice_connections_active{protocol="socks5"}')" = 0 ] && break
    sleep 0.1
done
gt "$(metric 'sluice_connections_total{protocol="http"}')" "$h0" 3 && gt "$(metric 'sluice_connections_total{protocol="socks5"}')" "$s0" 1 \
    && ok "sluice_connections_total{protocol} counts accepted connections" || bad "connections_total" "$(grep connections_total "$T/metrics.txt")"
gt "$(metric 'sluice_decisions_total{protocol="http",decision="allow"}')" "$a0" && gt "$(metric 'sluice_decisions_total{protocol="http",decision="deny"}')" "$d0" &&
    gt "$(metric 'sluice_decisions_total{protocol="connect",decision="allow"}')" "$c0" && gt "$(metric 'sluice_decisions_total{protocol="socks5",decision="allow"}')" "$k0" \
    && ok "sluice_decisions_total{protocol,decision} counts allow and deny per protocol" || bad "decisions_total" "$(grep decisions_total "$T/metrics.txt")"
gt "$(metric 'sluice_bytes_total{direction="down"}')" "$b0" 13 && gt "$(metric 'sluice_bytes_total{direction="up"}')" "$u0" 1 \
    && ok "sluice_bytes_total{direction} grows with closed connections" || bad "bytes_total" "$(grep bytes_total "$T/metrics.txt")"
$RAW "$HP" w:5 >/dev/null 2>&1 &
HOLDER=$!
for i in $(seq $((60 * SLOW))); do metrics_get; gt "$(metric 'sluice_connections_active{protocol="http"}')" 0 && break; sleep 0.05; done
gt "$(metric 'sluice_connections_active{protocol="http"}')" 0 && ok "sluice_connections_active shows an open connection" || bad "connections_active" "$(grep active "$T/metrics.txt")"
kill "$HOLDER" 2>/dev/null; wait "$HOLDER" 2>/dev/null

# the rest of the admin protocol
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$AP/nope")
[ "$code" = 404 ] && ok "admin: unknown path 404" || bad "admin 404" "$code"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$AP/healthz/x")
[ "$code" = 404 ] && ok "admin: /healthz/x 404 (exact paths)" || bad "admin exact path" "$code"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$AP/metrics?name=x")
[ "$code" = 200 ] && ok "admin: a query string is ignored" || bad "admin query" "$code"
out=$(curl -s -i -X POST --data x --max-time 5 "http://127.0.0.1:$AP/healthz" | tr -d '\r')
case "$out" in "HTTP/1.1 405 Method Not Allowed"*"Allow: GET"*) ok "admin: POST 405 with Allow: GET";; *) bad "admin POST" "$out";; esac
code=$(curl -s -o /dev/null -I -w '%{http_code}' --max-time 5 "http://127.0.0.1:$AP/healthz")
[ "$code" = 405 ] && ok "admin: HEAD 405 (GET only)" || bad "admin HEAD" "$code"
curl -s -v --max-time 5 "http://127.0.0.1:$AP/healthz" "http://127.0.0.1:$AP/readyz" > "$T/ka.out" 2>&1
grep -q 'Re-using existing connection' "$T/ka.out" && [ "$(grep -c '^< HTTP/1.1 200' "$T/ka.out")" = 2 ] \
    && ok "admin: keep-alive, two requests on one connection" || bad "admin keep-alive" "$(cat "$T/ka.out")"
PORT=$AP
out=$($RAW "$AP" s:"GET /healthz$H11""GET /readyz$H11""GET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" c c c e)
[ "$out" = "200
200
404 close
EOF 0: " ] && ok "admin: pipelined requests answered in order; Connection: close honoured" || bad "admin pipelining" "$out"
out=$($RAW "$AP" s:"GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: a\0b\r\n\r\n" c e)
[ "$out" = "400 close
EOF 0: " ] && ok "admin: malformed request 400, closed" || bad "admin malformed" "$out"
out=$($RAW "$AP" s:"GET /healthz HTTP/1.1\r\nX-Pad: " b:20000 c e)
case "$out" in "431 close"*) ok "admin: oversized request 431, closed";; *) bad "admin oversized" "$out";; esac
out=$(curl -s -w ' %{http_code}' --max-time 5 -x "http://127.0.0.1:$AP" "$A/index.html?t=viaadmin")
[ "$out" = "not found
 404" ] && ok "admin never proxies: absolute-form request 404" || bad "admin as a proxy" "$out"
out=$($RAW "$AP" s:"CONNECT origin.test:$PA HTTP/1.1\r\n\r\nGET /?t=viaadmin HTTP/1.0\r\n\r\n" c e)
[ "$out" = "405 close
EOF 0: " ] && ok "admin never proxies: CONNECT 405, closed" || bad "admin CONNECT" "$out"
if grep -q "t=viaadmin" "$T/A.log"; then bad "the admin listener reached the origin" "$(grep viaadmin "$T/A.log")"
else ok "nothing reached an origin through the admin listener"; fi
out=$(curl -s -i --max-time 5 -x "http://127.0.0.1:$HP" "http://127.0.0.1:$AP/metrics" | tr -d '\r')
case "$out" in "HTTP/1.1 403 "*"error=destination_ip_prohibited"*"own listeners"*) ok "the proxy never dials its admin listener (allowed IP:port, still 403)";; *) bad "proxy to admin" "$out";; esac
$RAW "$AP" w:12 e > "$T/adm-idle.out" 2>&1 &
IDLE=$!
if wait_exit "$IDLE" 25 && grep -q '^EOF 0: ' "$T/adm-idle.out"; then ok "admin: a silent connection is closed (10 s timeout)"; else bad "admin idle" "$(cat "$T/adm-idle.out")"; fi

# --- the health path on the proxy port -------------------------------------------------------
PORT=$HP
out=$($RAW "$HP" s:"GET /hc$H11" r)
[ "$out" = "< HTTP/1.1 200 OK
< Content-Type: text/plain; charset=us-ascii
< Cache-Control: no-store
< Content-Length: 3
< Connection: keep-alive
< body 3: ok\\n" ] && ok "--health-path: origin-form GET of the path on the proxy port answers 200 ok" || bad "health path" "$out"
out=$($RAW "$HP" s:"GET /hc$H11" c s:"GET /hc HTTP/1.0\r\n\r\n" c e)
[ "$out" = "200
200 close
EOF 0: " ] && ok "--health-path: kept alive for HTTP/1.1, closed for HTTP/1.0" || bad "health path keep-alive" "$out"
out=$($RAW "$HP" s:"GET /hc$H11" c s:"GET $A/index.html$H11" c)
[ "$out" = "200
200" ] && ok "--health-path: proxying goes on after it on the same connection" || bad "health then proxy" "$out"
for req in "GET /hc?x=1$H11" "GET /hcx$H11" "GET /other$H11" "HEAD /hc$H11" "POST /hc HTTP/1.1\r\nContent-Length: 0\r\n\r\n"; do
    out=$($RAW "$HP" s:"$req" c e)
    [ "$out" = "400 close
EOF 0: " ] || { bad "health path: other origin-form requests 400" "$req: $out"; break; }
done
[ "$out" = "400 close
EOF 0: " ] && ok "--health-path: every other origin-form request stays 400"
out=$($RAW "$HP" s:"GET /hc HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello" c e)
[ "$out" = "400 close
EOF 0: " ] && ok "--health-path: a health request with a body is refused (400)" || bad "health with body" "$out"
out=$($RAW "$HP" s:"GET /hc HTTP/1.1\r\nX-A: 1\r\n 2\r\n\r\n" c e)
[ "$out" = "400 close
EOF 0: " ] && ok "--health-path: malformed fields refused (obs-fold 400)" || bad "health obs-fold" "$out"

kill -TERM "$PROXY_PID"; wait_exit "$PROXY_PID" 20; rc=$WAIT_RC
[ "$rc" = 0 ] && ok "SIGTERM with an admin listener: exit 0" || bad "main exit" "$rc $(cat "$T/main.err")"

# --- admin on a unix socket; option errors ---------------------------------------------------------
mkdir -m 700 "$T/run"
start_proxy unix "$T/s.json" --http off --socks tcp:127.0.0.1:0 --admin "unix:$T/run/admin.sock"
out=$(curl -s --max-time 5 --unix-socket "$T/run/admin.sock" http://sluice/healthz)
[ "$out" = ok ] && ok "--admin unix:PATH serves /healthz" || bad "admin unix" "$out $(cat "$T/unix.err")"
[ "$(stat -c %a "$T/run/admin.sock" 2>/dev/null)" = 600 ] && ok "--admin unix socket is 0600" || bad "admin socket mode" "$(stat -c %a "$T/run/admin.sock")"
kill -TERM "$PROXY_PID"; wait_exit "$PROXY_PID" 20
[ "$WAIT_RC" = 0 ] && [ ! -e "$T/run/admin.sock" ] && ok "unix admin socket removed at exit" || bad "unix admin exit" "$WAIT_RC"
"$SLUICE" proxy --settings "$T/s.json" --admin tcp:localhost:1 >/dev/null 2>"$T/opt.err"; rc=$?
[ "$rc" = 2 ] && grep -q -- "--admin 'tcp:localhost:1'" "$T/opt.err" && ok "--admin with a host name: exit 2 with the reason" || bad "--admin error" "$rc $(cat "$T/opt.err")"
"$SLUICE" proxy --settings "$T/s.json" --health-path healthz >/dev/null 2>"$T/opt.err"; rc=$?
[ "$rc" = 2 ] && grep -q "must start with '/'" "$T/opt.err" && ok "--health-path without '/': exit 2" || bad "--health-path error" "$rc $(cat "$T/opt.err")"
"$SLUICE" proxy --help | grep -q -- '--admin ENDPOINT' && "$SLUICE" proxy --help | grep -q -- '--health-path PATH' \
    && ok "--help lists --admin and --health-path" || bad "--help"

# =========================================================================================
# 2. SIGHUP while a CONNECT tunnel and a SOCKS5 tunnel are open
# =========================================================================================
write_settings "$T/r.json"
start_proxy reload "$T/r.json" --http tcp:127.0.0.1:0 --socks tcp:127.0.0.1:0 --admin "tcp:127.0.0.1:$AP"
HP=$(listen_port reload http); SP=$(listen_port reload socks5)
start_tun
tun connect c1 "$HP" echo.test "$PE"; tun_check "CONNECT tunnel open" '^c1 open 200$'
tun socks s1 "$SP" echo.test "$PE"; tun_check "SOCKS5 tunnel open" '^s1 open 0$'
tun ping c1 before; tun ping s1 before
tun_check "CONNECT tunnel relays" '^c1 echo before ' ; tun_check "SOCKS5 tunnel relays" '^s1 echo before '

write_settings "$T/r.json" echo.test # the good file: echo.test is now denied
kill -HUP "$PROXY_PID"
wait_for "$T/reload.log" 'event=reload ' && ok "SIGHUP (good file): reload logged" || bad "reload not logged" "$(cat "$T/reload.log")"
tun ping c1 good; tun ping s1 good
tun_check "good reload: the open CONNECT tunnel keeps relaying (under the old policy)" '^c1 echo good '
tun_check "good reload: the open SOCKS5 tunnel keeps relaying" '^s1 echo good '
PORT=$HP
out=$($RAW "$HP" s:"CONNECT echo.test:$PE HTTP/1.1\r\n\r\n" c)
[ "$out" = "403 close" ] && ok "good reload: a new CONNECT gets the new policy (403)" || bad "new CONNECT after reload" "$out"
out=$($RAWSOCK "$SP" s:050100 r:2 s:$(connect_req echo.test "$PE") r:10 2>/dev/null)
[ "$out" = "0500
05020001000000000000" ] && ok "good reload: a new SOCKS5 request gets the new policy (0x02)" || bad "new SOCKS after reload" "$out"
out=$(curl -s --max-time 10 -x "http://127.0.0.1:$HP" "$A/index.html")
[ "$out" = "hello from A" ] && ok "good reload: what stays allowed is served" || bad "allowed after reload" "$out"
metrics_get
[ "$(metric 'sluice_reloads_total{result="ok"}')" = 1 ] && [ "$(metric 'sluice_reloads_total{result="error"}')" = 0 ] \
    && ok "sluice_reloads_total{result=\"ok\"} counts the reload" || bad "reloads ok" "$(grep reloads "$T/metrics.txt")"

printf '{"network": {\n  "allowedDomains": ["origin.test",\n}\n' > "$T/r.json" # the bad file
kill -HUP "$PROXY_PID"
if wait_for "$T/reload.log" 'event=reload_failed'; then
    line=$(grep 'event=reload_failed' "$T/reload.log")
    case "$line" in *"keeping the current policy"*"$T/r.json:"[0-9]*:[0-9]*) ok "SIGHUP (bad file): reload_failed logged with the file error (file:line:column)";;
        *"keeping the current policy"*"$T/r.json:"[0-9]*:[0-9]*:*) ok "SIGHUP (bad file): reload_failed logged with the file error (file:line:column)";;
        *) bad "reload_failed message" "$line";; esac
else bad "reload_failed not logged" "$(cat "$T/reload.log")"; fi
tun ping c1 bad; tun ping s1 bad
tun_check "bad reload: the open CONNECT tunnel keeps relaying" '^c1 echo bad '
tun_check "bad reload: the open SOCKS5 tunnel keeps relaying" '^s1 echo bad '
out=$($RAW "$HP" s:"CONNECT echo.test:$PE HTTP/1.1\r\n\r\n" c)
[ "$out" = "403 close" ] && ok "bad reload: the policy of the last good file stays (echo.test still denied)" || bad "policy after bad reload" "$out"
out=$($RAW "$HP" s:"CONNECT 127.0.0.1:$PE HTTP/1.1\r\n\r\n" c)
[ "$out" = "200" ] && ok "bad reload: ... and its allow rules still allow" || bad "allow after bad reload" "$out"
metrics_get
[ "$(metric 'sluice_reloads_total{result="error"}')" = 1 ] && ok "sluice_reloads_total{result=\"error\"} counts the failure" || bad "reloads error" "$(grep reloads "$T/metrics.txt")"
out=$(curl -s -w ' %{http_code}' --max-time 5 "http://127.0.0.1:$AP/readyz")
[ "$out" = "ready
 200" ] && ok "/readyz stays 200 after a failed reload (the old policy serves)" || bad "readyz after bad reload" "$out"
tun close c1; tun close s1; tun_check "tunnels closed" '^s1 closed'
stop_tun
kill -TERM "$PROXY_PID"; wait_exit "$PROXY_PID" 20
[ "$WAIT_RC" = 0 ] && ok "reload proxy: exit 0" || bad "reload proxy exit" "$WAIT_RC $(cat "$T/reload.err")"

# =========================================================================================
# 3. SIGTERM drain: drain time 30 s, idle timeout 60 s
# =========================================================================================
write_settings "$T/d.json" "" '"drain": 30'
start_proxy drain "$T/d.json" --http tcp:127.0.0.1:0 --socks tcp:127.0.0.1:0 --admin "tcp:127.0.0.1:$AP"
HP=$(listen_port drain http); SP=$(listen_port drain socks5)
start_tun
tun connect c1 "$HP" echo.test "$PE"; tun_check "drain: CONNECT tunnel open" '^c1 open 200$'
tun socks s1 "$SP" echo.test "$PE"; tun_check "drain: SOCKS5 tunnel open" '^s1 open 0$'
# an idle kept-alive client: one answer, then it waits for EOF (up to 50 s,
# under the idle timeout of 60 s: on a loaded machine under valgrind the
# steps before the SIGTERM took more than raw.py's default 8 s)
$RAW "$HP" s:"GET $A/index.html$H11" c e:50 > "$T/idle.out" 2>&1 &
IDLE=$!
wait_for "$T/idle.out" '^200$' || bad "idle client got no answer" "$(cat "$T/idle.out")"
# a client whose answer is in progress when the drain begins (the origin answers after 3 s)
$RAW "$HP" s:"GET http://127.0.0.1:$PS/$H11" c e:50 > "$T/busy.out" 2>&1 &
BUSY=$!
wait_for "$T/slow.out" '^req' || bad "the slow origin saw no request" "$(cat "$T/slow.out")"
t0=$(date +%s)
kill -TERM "$PROXY_PID"
wait_for "$T/drain.log" 'event=drain ' || bad "drain not logged"
if wait_exit "$IDLE" $((9 * SLOW)) && [ "$(cat "$T/idle.out")" = "200
EOF 0: " ]; then
    ok "SIGTERM: an idle kept-alive client is closed at once (not at the 60 s idle timeout)"
else bad "idle client at drain" "$(cat "$T/idle.out")"; fi
if wait_exit "$BUSY" $((9 * SLOW)) && [ "$(cat "$T/busy.out")" = "200 close
EOF 0: " ]; then
    ok "SIGTERM: an answer in progress completes with Connection: close, then the connection closes"
else bad "busy client at drain" "$(cat "$T/busy.out")"; fi
out=$(curl -s -w ' %{http_code}' --max-time 5 "http://127.0.0.1:$AP/readyz")
[ "$out" = "not ready: draining
 503" ] && ok "/readyz: 503 while draining" || bad "readyz draining" "$out"
metrics_get
[ "$(metric sluice_draining)" = 1 ] && ok "sluice_draining 1 while draining" || bad "sluice_draining" "$(metric sluice_draining)"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -x "http://127.0.0.1:$HP" "$A/index.html")
[ "$code" = 000 ] && ok "SIGTERM: no new connections are accepted" || bad "accepting while draining" "$code"
tun ping c1 drain1; tun ping s1 drain1
tun_check "SIGTERM: the CONNECT tunnel keeps relaying while draining" '^c1 echo drain1 '
tun_check "SIGTERM: the SOCKS5 tunnel keeps relaying while draining" '^s1 echo drain1 '
sleep 1
tun ping c1 drain2; tun_check "SIGTERM: ... and still later" '^c1 echo drain2 '
kill -0 "$PROXY_PID" 2>/dev/null && ok "SIGTERM: the proxy waits for the open tunnels" || bad "proxy exited with tunnels open"
tun close c1; tun close s1; tun_check "drain: tunnels closed by the clients" '^s1 closed'
if wait_exit "$PROXY_PID" 15; then
    took=$(( $(date +%s) - t0 ))
    [ "$WAIT_RC" = 0 ] && ok "SIGTERM: exit 0 once the last tunnel ended (${took} s, drain time 30 s)" || bad "drain exit status" "$WAIT_RC $(cat "$T/drain.err")"
else bad "SIGTERM: still running 15 s after the last tunnel closed"; kill -9 "$PROXY_PID"; fi
stop_tun
grep -q 'end=drained' "$T/drain.log" && ok "log: the idle connection's close line says end=drained" || bad "log end=drained" "$(grep event=close "$T/drain.log")"
grep -q 'event=stopped' "$T/drain.log" && ok "log: stopped" || bad "log stopped"

# --- the drain time is up: tunnels are cut, exit 0 -------------------------------------------
write_settings "$T/d1.json" "" '"drain": 1'
start_proxy drain1 "$T/d1.json" --http tcp:127.0.0.1:0 --socks off
HP=$(listen_port drain1 http)
start_tun
tun connect c1 "$HP" echo.test "$PE"; tun_check "drain 1 s: tunnel open" '^c1 open 200$'
kill -TERM "$PROXY_PID"
if wait_exit "$PROXY_PID" 15; then
    [ "$WAIT_RC" = 0 ] && ok "drain time up: the tunnel is closed, exit 0" || bad "drain timeout exit" "$WAIT_RC"
else bad "drain time up: still running after 15 s (drain 1 s)"; kill -9 "$PROXY_PID"; fi
grep -q 'event=drain_timeout' "$T/drain1.log" && ok "log: drain_timeout" || bad "log drain_timeout" "$(cat "$T/drain1.log")"
tun ping c1 late; tun_check "drain time up: the tunnel no longer relays" '^c1 (fail|error) late'
stop_tun

# =========================================================================================
# 4. The connection limit: maxConnections 2
# =========================================================================================
cat > "$T/l.json" <<JSON
{"network": {"allowedDomains": ["origin.test", "127.0.0.1:$PA"], "dnsServers": ["127.0.0.1:$DPORT"]},
 "proxy": {"limits": {"maxConnections": 2}}}
JSON
start_proxy limit "$T/l.json" --http tcp:127.0.0.1:0 --socks tcp:127.0.0.1:0 --admin "tcp:127.0.0.1:$AP"
HP=$(listen_port limit http); SP=$(listen_port limit socks5)
# two holders, killed below once the checks at the limit are done (they
# held 8 s, which a loaded machine under valgrind outlasted)
$RAW "$HP" w:120 >/dev/null 2>&1 &
H1=$!
$RAWSOCK "$SP" w:120 >/dev/null 2>&1 &
H2=$!
for i in $(seq $((100 * SLOW))); do # both holders are in
    metrics_get
    [ "$(metric 'sluice_connections_active{protocol="http"}')" = 1 ] &&
        [ "$(metric 'sluice_connections_active{protocol="socks5"}')" = 1 ] && break
    sleep 0.05
done
for i in 1 2 3 4 5; do
    curl -s -i --max-time 5 -x "http://127.0.0.1:$HP" "$A/index.html" > "$T/over$i.out" 2>&1 &
done
good=0
for i in 1 2 3 4 5; do
    for j in $(seq $((100 * SLOW))); do [ -s "$T/over$i.out" ] && grep -q '^Connection: close' "$T/over$i.out" && break; sleep 0.05; done
    tr -d '\r' < "$T/over$i.out" | grep -q '^HTTP/1.1 503 Service Unavailable$' && tr -d '\r' < "$T/over$i.out" | grep -q '^Retry-After: 1$' && good=$((good + 1))
done
[ "$good" = 5 ] && ok "over maxConnections: five concurrent requests each get 503 with Retry-After, none hangs" || bad "limit 503" "$good of 5: $(cat "$T"/over*.out)"
out=$($RAWSOCK "$SP" s:050100 r:2 s:$(connect_req origin.test "$PA") r:10 e 2>/dev/null)
[ "$out" = "0500
05010001000000000000
EOF after 0 bytes: " ] && ok "over maxConnections: SOCKS5 gets 0x01 and is closed" || bad "limit socks" "$out"
metrics_get
ov=$(metric sluice_overloaded_total)
[ "$ov" != none ] && [ "$ov" -ge 6 ] && ok "sluice_overloaded_total counts the refused connections ($ov)" || bad "overloaded_total" "$ov"
out=$(curl -s -w ' %{http_code}' --max-time 5 "http://127.0.0.1:$AP/healthz")
[ "$out" = "ok
 200" ] && ok "the admin listener answers while the proxy is at its limit" || bad "admin at limit" "$out"
kill "$H1" "$H2" 2>/dev/null; wait "$H1" "$H2" 2>/dev/null
for i in $(seq $((100 * SLOW))); do # the holders' connections are gone
    metrics_get
    [ "$(metric 'sluice_connections_active{protocol="http"}')" = 0 ] &&
        [ "$(metric 'sluice_connections_active{protocol="socks5"}')" = 0 ] && break
    sleep 0.05
done
out=$(curl -s --max-time 5 -x "http://127.0.0.1:$HP" "$A/index.html")
[ "$out" = "hello from A" ] && ok "below the limit again: served" || bad "after the limit" "$out"
kill -TERM "$PROXY_PID"; wait_exit "$PROXY_PID" 20
[ "$WAIT_RC" = 0 ] && ok "limit proxy: exit 0" || bad "limit proxy exit" "$WAIT_RC"

e2e_finish
