#!/usr/bin/env bash
# tests/bench/socks_udp.sh - UDP echo through SOCKS5 UDP ASSOCIATE of
# `sluice proxy` and through transparent UDP of `sluice run --transparent`,
# against direct, side by side in one run (issue 26; goal: >= 0.5x direct
# datagrams/s for each). Run by hand, not by ctest; numbers only on a quiet
# machine.
#
#   bash tests/bench/socks_udp.sh [BUILD_DIR]     (default: build)
#   N=20000 RUNS=3 WINDOW=16 bash tests/bench/socks_udp.sh build
#
# The script re-executes itself under `unshare -n` (or `unshare -rn`): the
# echo server lives in a second namespace of its own behind a veth pair, on
# 10.9.0.1 (an address that exists only there; the resolved-address guard
# refuses loopback to a sandbox, so transparent UDP needs a non-loopback
# origin), and no packet can reach a real address. LOOPBACK=1, or no way to
# make a namespace, runs the direct and SOCKS5 rows on 127.0.0.1 instead,
# without the transparent row.
#
# Rows: direct (client -> echo), socks5-udp (client -> relay -> echo),
# transparent-udp (the same client inside `sluice run --transparent`: its
# sendto() goes to the run's relay in the sandbox's namespace, which sends
# from the host's). Two tables: one datagram (64 bytes) in flight, where
# datagrams/s is round trips per second and p50/p99 their latency (a relay
# adds two hops and two wake-ups to each), and WINDOW (16) datagrams in
# flight, the rate a relay sustains (a lost datagram replaced after 50 ms). Every
# cell is the median of RUNS. CPU placement as bridge.sh: sluice on CPU 0,
# client and echo on CPU 1 (taskset); NOPIN=1 runs everything unpinned.
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ -z "${SLUICE_BENCH_NETNS:-}" ] && [ -z "${LOOPBACK:-}" ]; then
    for how in "unshare -n" "unshare -rn"; do
        if $how true 2>/dev/null; then
            SLUICE_BENCH_NETNS=1 exec $how bash "$HERE/socks_udp.sh" "$@"
        fi
    done
    echo "# no network namespace here (unshare -n, unshare -rn): loopback rows only" >&2
fi
B=${1:-build}
SLUICE=$(cd "$(dirname "$B/sluice")" && pwd)/sluice
CLIENT="$HERE/../e2e/socks_udp-client.py"
N=${N:-5000}
RUNS=${RUNS:-1}
[ -x "$SLUICE" ] || { echo "socks_udp.sh: $SLUICE missing (cmake --build $B --target sluice)" >&2; exit 2; }
RELAY_CPU=() LOAD_CPU=() PIN_IN=()
if [ -z "${NOPIN:-}" ] && command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
    RELAY_CPU=(taskset -c 0) LOAD_CPU=(taskset -c 1) PIN_IN=(taskset -c 1)
fi

T=$(mktemp -d /tmp/sluice-bench-udp.XXXXXX) || exit 2
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$T"' EXIT

EHOST=127.0.0.1 IN_ORIGINS=()
if [ -n "${SLUICE_BENCH_NETNS:-}" ]; then
    ip link set lo up || exit 2
    unshare -n sleep 100000 &
    OPID=$!
    PIDS+=($OPID)
    for _ in $(seq 50); do
        [ "$(readlink /proc/$OPID/ns/net)" != "$(readlink /proc/self/ns/net)" ] && break
        sleep 0.05
    done
    IN_ORIGINS=(nsenter -F -t "$OPID" -n)
    if ip link add bu-s type veth peer name bu-o netns "$OPID" 2>"$T/veth.err" &&
        ip link set bu-s up && ip addr add 10.9.0.254/24 dev bu-s &&
        "${IN_ORIGINS[@]}" ip link set lo up && "${IN_ORIGINS[@]}" ip link set bu-o up &&
        "${IN_ORIGINS[@]}" ip addr add 10.9.0.1/24 dev bu-o; then
        EHOST=10.9.0.1
    else
        echo "# no veth pair here ($(cat "$T/veth.err")): loopback rows only" >&2
        IN_ORIGINS=()
    fi
fi
EPORT=$((20000 + RANDOM % 20000))
"${IN_ORIGINS[@]}" "${LOAD_CPU[@]}" python3 -c '
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[2], int(sys.argv[1])))
print("ready", flush=True)
while True:
    d, p = s.recvfrom(70000)
    s.sendto(d, p)
' "$EPORT" "$EHOST" > "$T/echo.out" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do
    grep -q ready "$T/echo.out" 2>/dev/null && break
    sleep 0.05
done
grep -q ready "$T/echo.out" || { echo "socks_udp.sh: the echo server did not start" >&2; cat "$T/echo.out" >&2; exit 2; }

cat > "$T/s.json" <<JSON
{"network": {"allowedDomains": ["udp:$EHOST:$EPORT"]}}
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

# the transparent row's settings: the literal rule only (no name is resolved;
# dnsServers a port nothing answers on, never the machine's resolver)
cat > "$T/t.json" <<JSON
{"network": {"transparent": true, "allowedDomains": ["udp:$EHOST:$EPORT"],
             "dnsServers": ["127.0.0.1:9"]}}
JSON
chmod 644 "$T/t.json"

# one NAME PROXY_PORT|direct|transparent WINDOW: one run of N round trips
# (WINDOW 0: one datagram in flight, else that many)
one() {
    case $2 in
    transparent)
        (cd "$T" && HOME=$T "${RELAY_CPU[@]}" "$SLUICE" run --settings "$T/t.json" \
            -- "${PIN_IN[@]}" python3 "$CLIENT" direct bench "$EHOST" "$EPORT" "$N" "$3") 2>>"$T/run.err" ;;
    *) "${LOAD_CPU[@]}" python3 "$CLIENT" "$2" bench "$EHOST" "$EPORT" "$N" "$3" ;;
    esac
}
# row NAME PROXY_PORT|direct|transparent WINDOW: the median of RUNS runs
row() {
    local name=$1 via=$2 win=$3 i
    for i in $(seq "$RUNS"); do
        one "$name" "$via" "$win" | grep '^rate '
    done | sort -t' ' -k2 -n | awk -v name="$name" '
        { rate[NR] = $2; p50[NR] = $3; p99[NR] = $4 }
        END { if (NR == 0) { printf "%-16s\n", name; exit }
              m = int((NR + 1) / 2); printf "%-16s %10s %8s %8s\n", name, rate[m], p50[m], p99[m] }'
}
ratio() { # NAME ROW DIRECT_ROW
    awk -v d="$(echo "$3" | awk '{print $2}')" -v s="$(echo "$2" | awk '{print $2}')" -v n="$1" \
        'BEGIN { if (d > 0 && s != "") printf "%s / direct: %.2fx (goal >= 0.5x)\n", n, s / d }'
}
# table WINDOW: the three rows and their ratios
table() {
    local D S P win=$1
    if [ "$win" = 0 ]; then
        echo "# one datagram in flight: round trips/s (the relay's latency)"
    else
        echo "# $win datagrams in flight: datagrams/s (the relay's rate; the python echo may be the limit)"
    fi
    printf '%-16s %10s %8s %8s\n' "path ($EHOST)" "dgrams/s" "p50_us" "p99_us"
    D=$(row direct direct "$win")
    S=$(row socks5-udp "$SPORT" "$win")
    P=
    if [ "$EHOST" != 127.0.0.1 ]; then
        P=$(row transparent-udp transparent "$win")
    fi
    echo "$D"
    echo "$S"
    if [ -z "$P" ]; then
        [ "$EHOST" = 127.0.0.1 ] && echo "transparent-udp  (not run: needs the namespace and veth pair)"
    elif [ "$(echo "$P" | awk '{print $2}')" = "" ]; then
        echo "transparent-udp  (sluice run failed: $(tail -2 "$T/run.err" | tr '\n' ' '))"
        P=
    else
        echo "$P"
    fi
    ratio socks5-udp "$S" "$D"
    [ -n "$P" ] && ratio transparent-udp "$P" "$D"
    return 0
}

table 0
table "${WINDOW:-16}"
exit 0
