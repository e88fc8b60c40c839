#!/usr/bin/env bash
# tests/bench/socks_udp.sh - UDP echo through SOCKS5 UDP ASSOCIATE of
# `sluice proxy` against direct, side by side in one run (issue 26; goal:
# >= 0.5x direct datagrams/s). Run by hand, not by ctest; numbers only on a
# quiet machine. Only 127.0.0.1 (the echo server and the proxy both on
# loopback; the rule that allows it is udp:127.0.0.1:PORT).
#
#   bash tests/bench/socks_udp.sh [BUILD_DIR]     (default: build)
#   N=20000 RUNS=3 bash tests/bench/socks_udp.sh build
#
# Rows: direct (client -> echo), socks5-udp (client -> relay -> echo). One
# client, one datagram (64 bytes) in flight: datagrams/s is round trips per
# second, and p50/p99 their latency. Every cell is the median of RUNS.
# CPU placement as bridge.sh: sluice on CPU 0, client and echo on CPU 1
# (taskset); NOPIN=1 runs everything unpinned.
set -uo pipefail
B=${1:-build}
SLUICE=$(cd "$(dirname "$B/sluice")" && pwd)/sluice
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CLIENT="$HERE/../e2e/socks_udp-client.py"
N=${N:-5000}
RUNS=${RUNS:-1}
[ -x "$SLUICE" ] || { echo "socks_udp.sh: $SLUICE missing (cmake --build $B --target sluice)" >&2; exit 2; }
RELAY_CPU=() LOAD_CPU=()
if [ -z "${NOPIN:-}" ] && command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
    RELAY_CPU=(taskset -c 0) LOAD_CPU=(taskset -c 1)
fi

T=$(mktemp -d /tmp/sluice-bench-udp.XXXXXX) || exit 2
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$T"' EXIT
free_port() {
    python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

EPORT=$(free_port)
"${LOAD_CPU[@]}" python3 -c '
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", int(sys.argv[1])))
while True:
    d, p = s.recvfrom(70000)
    s.sendto(d, p)
' "$EPORT" &
PIDS+=($!)

cat > "$T/s.json" <<JSON
{"network": {"allowedDomains": ["udp:127.0.0.1:$EPORT"]}}
JSON
"${RELAY_CPU[@]}" "$SLUICE" proxy --settings "$T/s.json" --workers 1 --http off \
    --socks tcp:127.0.0.1:0 --log "$T/proxy.log" 2>"$T/proxy.err" &
PIDS+=($!)
SPORT=
for _ in $(seq 100); do
    SPORT=$(sed -n 's/.*socks5 tcp:127\.0\.0\.1:\([0-9]*\).*/\1/p' "$T/proxy.log" 2>/dev/null | head -1)
    [ -n "$SPORT" ] && break
    sleep 0.05
done
[ -n "$SPORT" ] || { echo "socks_udp.sh: the proxy did not start" >&2; cat "$T/proxy.err" >&2; exit 2; }

# row NAME PROXY_PORT|direct: the median of RUNS runs of N round trips
row() {
    local name=$1 via=$2 i
    for i in $(seq "$RUNS"); do
        "${LOAD_CPU[@]}" python3 "$CLIENT" "$via" bench 127.0.0.1 "$EPORT" "$N"
    done | sort -t' ' -k2 -n | awk -v n="$RUNS" -v name="$name" '
        { rate[NR] = $2; p50[NR] = $3; p99[NR] = $4 }
        END { m = int((n + 1) / 2); printf "%-12s %10s %8s %8s\n", name, rate[m], p50[m], p99[m] }'
}

printf '%-12s %10s %8s %8s\n' "path" "dgrams/s" "p50_us" "p99_us"
D=$(row direct direct)
S=$(row socks5-udp "$SPORT")
echo "$D"
echo "$S"
awk -v d="$(echo "$D" | awk '{print $2}')" -v s="$(echo "$S" | awk '{print $2}')" \
    'BEGIN { if (d > 0) printf "socks5-udp / direct: %.2fx (goal >= 0.5x)\n", s / d }'
