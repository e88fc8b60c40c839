#!/usr/bin/env bash
# tests/soak/soak.sh - soak and fault test of `sluice proxy` (issue 6), on
# loopback only, bounded, stops by itself.
#
#   soak.sh [--quick] [--tunnels N] [--warmup W] [--seed S] [--concurrency C] SLUICE_BINARY
#
# Runs N tunnels (default 200000; --quick 20000) through the proxy's HTTP
# (CONNECT and absolute-form) and SOCKS5 listeners, each with a seeded random
# scenario: clients abort at every phase (before a byte, mid-head, mid-SOCKS
# handshake, while the ask, DNS or dial is pending, mid-relay, with FIN or
# RST), half-close either way, upstreams refuse, stall, reset at accept or
# mid-stream, SYNs go unanswered, DNS answers are dropped, late or NXDOMAIN,
# the ask handler allows, denies, answers late or never (world.py serves all
# of it; driver.py is the load and the accounting). Checks, each PASS/FAIL:
#   client  every tunnel saw what its scenario allows (echoes verified)
#   fds     the proxy's open descriptors back at the post-warm-up baseline
#   rss     RSS grew < 5% from the first to the last quarter of the run
#   log     one close record per connection, with the code the client saw
#   alive   afterwards the proxy still tunnels (CONNECT, SOCKS5) and
#           /healthz on the admin listener answers 200
#   exit    SIGTERM: exit status 0, nothing from a sanitizer on stderr
# The descriptor/RSS curve is printed and kept as samples.csv (KEEP=1 keeps
# the whole temporary directory: logs, settings, summary.json).
set -uo pipefail

usage() { echo "usage: soak.sh [--quick] [--tunnels N] [--warmup W] [--seed S] [--concurrency C] SLUICE_BINARY" >&2; exit 2; }
TUNNELS=200000 WARMUP= SEED=1 CONC=128 SLUICE=
while [ $# -gt 0 ]; do
    case $1 in
    --quick) TUNNELS=20000 ;;
    --tunnels) TUNNELS=${2:?}; shift ;;
    --warmup) WARMUP=${2:?}; shift ;;
    --seed) SEED=${2:?}; shift ;;
    --concurrency) CONC=${2:?}; shift ;;
    -h | --help) usage ;;
    -*) usage ;;
    *) SLUICE=$1 ;;
    esac
    shift
done
[ -n "$SLUICE" ] && [ -x "$SLUICE" ] || usage
case $TUNNELS$SEED$CONC$WARMUP in *[!0-9]*) usage ;; esac
# warm-up: 15% of the run, at least 3000, at most 10000 (the allocator and the relay's pipe
# pool reach their working size before the baseline is taken)
if [ -z "$WARMUP" ]; then
    WARMUP=$((TUNNELS * 15 / 100 > 10000 ? 10000 : TUNNELS * 15 / 100))
    [ "$WARMUP" -lt 3000 ] && WARMUP=3000
fi

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
T=$(mktemp -d /tmp/sluice-soak.XXXXXX) || exit 2
export HOME="$T/home" XDG_CONFIG_HOME="$T/home/.config"
unset SLUICE_SETTINGS
mkdir -p "$HOME"
WORLD_PID= PROXY_PID=
cleanup() {
    [ -n "$PROXY_PID" ] && kill "$PROXY_PID" 2>/dev/null
    [ -n "$WORLD_PID" ] && kill "$WORLD_PID" 2>/dev/null
    wait 2>/dev/null
    if [ -n "${KEEP:-}" ]; then echo "kept $T"; else rm -rf "$T"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

pass=0 fail=0
ok()  { pass=$((pass + 1)); echo "PASS $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; [ -n "${2:-}" ] && printf '%s\n' "$2" | sed 's/^/    /'; }
finish() {
    echo "soak: $pass passed, $fail failed ($(( $(date +%s) - START ))s, $TUNNELS tunnels, seed $SEED)"
    [ "$fail" -eq 0 ]
    exit $?
}
START=$(date +%s)
# the proxy keeps up to CONC client sockets, as many upstreams, and more
ulimit -n 65536 2>/dev/null || ulimit -n 8192 2>/dev/null || true

# --- the world: upstreams, DNS, the ask supervisor -----------------------------------
python3 "$HERE/world.py" "$T/ports.json" "$T/ask.sock" 2>"$T/world.err" &
WORLD_PID=$!
for _ in $(seq 100); do [ -s "$T/ports.json" ] && break; sleep 0.1; done
[ -s "$T/ports.json" ] || { bad "world did not start" "$(cat "$T/world.err")"; finish; }
port() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$T/ports.json" "$1"; }
SVC=$(port svc) RSTACC=$(port rstacc) REFUSED=$(port refused) HOLE=$(port blackhole) DNS=$(port dns)

# Names: *.ok.soak, *.drop.soak (DNS never answers), *.nx.soak (NXDOMAIN),
# *.slow.soak (answered early or too late) are allowed; *.denied.soak is
# denied; *.ask.soak goes to the ask handler. Every name resolves to
# 127.0.0.1, which the guard passes only for the allow-listed ports.
cat >"$T/settings.json" <<JSON
{"network": {"allowedDomains": ["*.ok.soak", "*.drop.soak", "*.nx.soak", "*.slow.soak",
                                "127.0.0.1:$SVC", "127.0.0.1:$RSTACC", "127.0.0.1:$REFUSED",
                                "127.0.0.1:$HOLE"],
             "deniedDomains": ["*.denied.soak"],
             "dnsServers": ["127.0.0.1:$DNS"]},
 "proxy": {"timeouts": {"head": 1, "handshake": 1, "ask": 1.5, "dns": 1, "dial": 1,
                        "idle": 2, "drain": 2},
           "limits": {"maxConnections": 4096, "maxPendingAsks": 4096}}}
JSON

# --- the proxy -----------------------------------------------------------------------
# Under AddressSanitizer freed memory sits in a quarantine (256 MB by default)
# and RSS climbs until it is full: a 1 MB one (full within the warm-up) keeps
# the RSS check meaningful.
# A normal build ignores the variable.
export ASAN_OPTIONS="quarantine_size_mb=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
# Two event loops (--workers 2), so the threads' hand-offs are soaked too.
WORKERS=${SOAK_WORKERS:-2}
"$SLUICE" proxy --settings "$T/settings.json" --workers "$WORKERS" --http tcp:127.0.0.1:0 \
    --socks tcp:127.0.0.1:0 --admin tcp:127.0.0.1:0 --ask "socket:$T/ask.sock" --log "$T/proxy.log" --log-format json \
    2>"$T/proxy.err" &
PROXY_PID=$!
line=
for _ in $(seq 200); do
    line=$(grep -m1 '"event":"start"' "$T/proxy.log" 2>/dev/null) && break
    kill -0 "$PROXY_PID" 2>/dev/null || break
    sleep 0.05
done
lport() { printf '%s' "$line" | sed -n "s/.*$1 tcp:127\.0\.0\.1:\([0-9]*\).*/\1/p"; }
HPORT=$(lport http) SPORT=$(lport socks5) APORT=$(lport admin)
if [ -z "$HPORT" ] || [ -z "$SPORT" ] || [ -z "$APORT" ]; then
    bad "proxy did not start" "$(cat "$T/proxy.err" "$T/proxy.log" 2>/dev/null)"
    finish
fi
echo "soak: $TUNNELS tunnels (+$WARMUP warm-up), seed $SEED, concurrency $CONC; proxy pid $PROXY_PID" \
    "http $HPORT socks5 $SPORT admin $APORT; temp $T"

# --- the load and its checks ---------------------------------------------------------
python3 "$HERE/driver.py" --http "$HPORT" --socks "$SPORT" --ports "$T/ports.json" \
    --pid "$PROXY_PID" --workers "$WORKERS" --log "$T/proxy.log" --tunnels "$TUNNELS" --warmup "$WARMUP" \
    --seed "$SEED" --concurrency "$CONC" --csv "$T/samples.csv" --summary "$T/summary.json" \
    >"$T/driver.out" 2>&1
drc=$?
cat "$T/driver.out"
pass=$((pass + $(grep -c '^PASS' "$T/driver.out")))
fail=$((fail + $(grep -c '^FAIL' "$T/driver.out")))
[ "$drc" -eq 0 ] || [ "$(grep -c '^FAIL' "$T/driver.out")" -gt 0 ] || bad "driver failed (status $drc)"

# --- still alive -----------------------------------------------------------------------
alive=$(python3 - "$HPORT" "$SPORT" "$SVC" <<'PY' 2>&1
import socket, struct, sys
h, s, svc = map(int, sys.argv[1:4])
def tunnel(port, req, n):
    c = socket.create_connection(("127.0.0.1", port), timeout=10)
    c.sendall(req)
    head = b""
    while len(head) < n if n else b"\r\n\r\n" not in head:
        d = c.recv(1)
        if not d:
            raise SystemExit("closed during the reply: %r" % head)
        head += d
    c.sendall(b"E\nping")
    got = b""
    while len(got) < 4:
        d = c.recv(4)
        if not d:
            break
        got += d
    c.close()
    return head, got
name = b"alive.ok.soak"
hd, got = tunnel(h, b"CONNECT %s:%d HTTP/1.1\r\nHost: x\r\n\r\n" % (name, svc), 0)
print("connect", hd.split(b"\r\n")[0].decode(), got.decode())
req = b"\x05\x01\x00\x05\x01\x00\x03" + bytes([len(name)]) + name + struct.pack("!H", svc)
hd, got = tunnel(s, req, 12)
print("socks5 rep=%d" % hd[3], got.decode())
PY
)
health=$(curl -s -m 10 "http://127.0.0.1:$APORT/healthz" 2>&1)
if printf '%s' "$alive" | grep -q '^connect HTTP/1.1 200 .* ping$' &&
    printf '%s' "$alive" | grep -q '^socks5 rep=0 ping$' && [ "$health" = ok ]; then
    ok "alive: CONNECT and SOCKS5 tunnels echo, /healthz says ok"
else
    bad "alive: the proxy no longer answers" "$alive
healthz: $health"
fi

# --- clean exit ----------------------------------------------------------------------
kill -TERM "$PROXY_PID"
rc=
for _ in $(seq 300); do
    kill -0 "$PROXY_PID" 2>/dev/null || { wait "$PROXY_PID"; rc=$?; break; }
    sleep 0.05
done
PROXY_PID_DONE=$PROXY_PID
PROXY_PID=
if [ -z "$rc" ]; then
    kill -KILL "$PROXY_PID_DONE" 2>/dev/null
    bad "exit: no exit within 15 s of SIGTERM"
elif [ "$rc" -ne 0 ]; then
    bad "exit: status $rc after SIGTERM" "$(tail -20 "$T/proxy.err")"
elif grep -qE 'Sanitizer|runtime error:|LeakSanitizer' "$T/proxy.err"; then
    bad "exit: sanitizer report" "$(grep -m5 -E 'Sanitizer|runtime error:' "$T/proxy.err")"
else
    ok "exit: status 0 after SIGTERM, stderr clean"
fi
[ -n "${KEEP:-}" ] || echo "(samples.csv and summary.json are removed at exit; KEEP=1 keeps them)"
finish
