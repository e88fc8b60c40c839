#!/usr/bin/env bash
# tests/bench/ports.sh - ports between the host and the sandbox (issue 26)
# against a direct connection and against `sluice bridge` (the goal: the
# bridge's speed), on loopback.
#
#   bash tests/bench/ports.sh [BUILD_DIR]      (default: build)
#   BULK_SECONDS=3 RATE_SECONDS=4 RUNS=3 bash tests/bench/ports.sh build
#
# Needs BUILD_DIR/sluice and BUILD_DIR/tests/bench/loadgen, bwrap, and a
# working `sluice run` here. Run by hand, not by ctest. Rows:
#   direct          loadgen -> origin on the host
#   bridge tcp->tcp loadgen -> sluice bridge -> origin on the host
#   publish         loadgen on the host -> --publish HOST_PORT -> origin inside
#                   the sandbox (127.0.0.1:SANDBOX_PORT of its namespace)
#   hostport        loadgen inside the sandbox -> 127.0.0.1:PORT (network.hostPorts)
#                   -> origin on the host
# Columns as tests/bench/bridge.sh: bulk MiB/s (one connection to a sink),
# connections/s with 1 and 64 clients (connect, 100 bytes, echo, close), each
# with its ratio to direct. Every cell is the median of RUNS. Timings are
# reported, never asserted. Only 127.0.0.1.
#
# CPU placement as bridge.sh: the relay (sluice) on CPU 0, the load generator
# and the origins on CPU 1 (taskset; the sandbox's processes are moved there
# with taskset inside the command); NOPIN=1 runs everything unpinned.
set -uo pipefail
B=${1:-build}
SLUICE=$(cd "$(dirname "$B/sluice")" && pwd)/sluice
LOADGEN=$(cd "$(dirname "$B/tests/bench/loadgen")" && pwd)/loadgen
BULK_SECONDS=${BULK_SECONDS:-3}
RATE_SECONDS=${RATE_SECONDS:-4}
RUNS=${RUNS:-1}
for f in "$SLUICE" "$LOADGEN"; do
    [ -x "$f" ] || { echo "ports.sh: $f missing (cmake --build $B --target sluice loadgen)" >&2; exit 2; }
done
RELAY_CPU=() LOAD_CPU=() IN_CPU=""
if [ -z "${NOPIN:-}" ] && command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
    RELAY_CPU=(taskset -c 0) LOAD_CPU=(taskset -c 1) IN_CPU="taskset -c 1"
fi

T=$(mktemp -d /tmp/sluice-bench-ports.XXXXXX) || exit 2
PIDS=()
cleanup() {
    local p
    touch "$T/work/stop" 2>/dev/null
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
    rm -rf "$T"
}
trap cleanup EXIT
export HOME=$T/home XDG_CONFIG_HOME=$T/home/.config XDG_RUNTIME_DIR=$T/xdg
mkdir -p "$HOME" "$T/work" && mkdir -m 700 "$XDG_RUNTIME_DIR"
cd "$T/work" || exit 2
echo '{}' > "$T/s.json"

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
wait_port() {
    local i
    for i in $(seq 1 200); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.05; done
    echo "ports.sh: port $1 did not come up" >&2; exit 1
}
field() { sed -n "s/.* $1=\([0-9.]*\).*/\1/p"; }

# host origins at fixed free ports
SINK_P=$(free_port); ECHO_P=$(free_port)
"${LOAD_CPU[@]}" "$LOADGEN" serve-sink "tcp:127.0.0.1:$SINK_P" >/dev/null 2>&1 & PIDS+=($!)
"${LOAD_CPU[@]}" "$LOADGEN" serve-echo "tcp:127.0.0.1:$ECHO_P" >/dev/null 2>&1 & PIDS+=($!)
wait_port "$SINK_P"; wait_port "$ECHO_P"

# bridge
BS=$(free_port); BE=$(free_port)
"${RELAY_CPU[@]}" "$SLUICE" bridge --quiet "tcp:127.0.0.1:$BS" "tcp:127.0.0.1:$SINK_P" & PIDS+=($!)
"${RELAY_CPU[@]}" "$SLUICE" bridge --quiet "tcp:127.0.0.1:$BE" "tcp:127.0.0.1:$ECHO_P" & PIDS+=($!)
wait_port "$BS"; wait_port "$BE"

# publish: origins inside the sandbox on 18501/18502, published on PS/PE
PS=$(free_port); PE=$(free_port)
"${RELAY_CPU[@]}" "$SLUICE" run --quiet --settings "$T/s.json" --publish "$PS:18501" --publish "$PE:18502" -- sh -c "
    $IN_CPU '$LOADGEN' serve-sink tcp:127.0.0.1:18501 >/dev/null 2>&1 &
    $IN_CPU '$LOADGEN' serve-echo tcp:127.0.0.1:18502 >/dev/null 2>&1 &
    while [ ! -e stop ]; do sleep 0.2; done; kill %1 %2" 2>"$T/pub.err" & PIDS+=($!)
for i in $(seq 1 200); do
    out=$("$LOADGEN" rate "tcp:127.0.0.1:$PE" --clients 1 --seconds 0.2 2>/dev/null | field errors)
    [ "$out" = 0 ] && break
    sleep 0.1
done

# hostport: the load generator inside, the host's origins listed
cat > "$T/hp.json" <<JSON
{"network": {"hostPorts": [$SINK_P, $ECHO_P]}}
JSON

declare -A MIB C1 C64
ROWS=("direct" "bridge tcp->tcp" "publish" "hostport")
one() { # NAME SINK_PORT ECHO_PORT [inside]
    local name=$1 out
    if [ "${4:-}" = inside ]; then
        out=$("${RELAY_CPU[@]}" "$SLUICE" run --quiet --settings "$T/hp.json" -- sh -c "
            $IN_CPU '$LOADGEN' bulk tcp:127.0.0.1:$2 --seconds $BULK_SECONDS
            $IN_CPU '$LOADGEN' rate tcp:127.0.0.1:$3 --clients 1 --seconds $RATE_SECONDS
            $IN_CPU '$LOADGEN' rate tcp:127.0.0.1:$3 --clients 64 --seconds $RATE_SECONDS" 2>&1)
        MIB[$name]+=" $(printf '%s\n' "$out" | field mib_s | head -1)"
        C1[$name]+=" $(printf '%s\n' "$out" | field conn_s | sed -n 1p)"
        C64[$name]+=" $(printf '%s\n' "$out" | field conn_s | sed -n 2p)"
    else
        out=$("${LOAD_CPU[@]}" "$LOADGEN" bulk "tcp:127.0.0.1:$2" --seconds "$BULK_SECONDS")
        MIB[$name]+=" $(printf '%s\n' "$out" | field mib_s)"
        out=$("${LOAD_CPU[@]}" "$LOADGEN" rate "tcp:127.0.0.1:$3" --clients 1 --seconds "$RATE_SECONDS")
        C1[$name]+=" $(printf '%s\n' "$out" | field conn_s)"
        out=$("${LOAD_CPU[@]}" "$LOADGEN" rate "tcp:127.0.0.1:$3" --clients 64 --seconds "$RATE_SECONDS")
        C64[$name]+=" $(printf '%s\n' "$out" | field conn_s)"
    fi
    echo "ports.sh: $name done" >&2
}
for run in $(seq 1 "$RUNS"); do
    one "direct" "$SINK_P" "$ECHO_P"
    one "bridge tcp->tcp" "$BS" "$BE"
    one "publish" "$PS" "$PE"
    one "hostport" "$SINK_P" "$ECHO_P" inside
done

median() { printf '%s\n' $1 | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
for r in "${ROWS[@]}"; do
    MIB[$r]=$(median "${MIB[$r]}"); C1[$r]=$(median "${C1[$r]}"); C64[$r]=$(median "${C64[$r]}")
done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }'; }
echo
echo "ports benchmark: $(nproc) CPUs, $(uname -r), bulk ${BULK_SECONDS}s, rate ${RATE_SECONDS}s per column, ${RELAY_CPU[*]:-unpinned} relay / ${LOAD_CPU[*]:-unpinned} load, median of $RUNS"
printf '%-18s %10s %7s %12s %7s %12s %7s\n' path "MiB/s" ratio "conn/s c=1" ratio "conn/s c=64" ratio
for r in "${ROWS[@]}"; do
    printf '%-18s %10.1f %7s %12.0f %7s %12.0f %7s\n' "$r" "${MIB[$r]:-0}" "$(ratio "${MIB[$r]:-0}" "${MIB[direct]}")" \
        "${C1[$r]:-0}" "$(ratio "${C1[$r]:-0}" "${C1[direct]}")" "${C64[$r]:-0}" "$(ratio "${C64[$r]:-0}" "${C64[direct]}")"
done
echo "goal (issue 26): publish and hostport as the bridge (bridge.sh's targets: >= 0.80x direct throughput, >= 0.60x direct conn/s)"
