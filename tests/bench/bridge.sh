#!/usr/bin/env bash
# tests/bench/bridge.sh - relay benchmark: sluice bridge against a direct
# connection (the limit) and against socat doing the same job, on loopback.
#
#   bash tests/bench/bridge.sh [BUILD_DIR]      (default: build)
#   BULK_SECONDS=3 RATE_SECONDS=4 bash tests/bench/bridge.sh build
#   RUNS=3 bash tests/bench/bridge.sh build     (each cell: median of 3 runs)
#   SLUICE_SPLICE=off bash tests/bench/bridge.sh build   (sluice's copy path)
#   BASE=/tmp/old RUNS=3 bash tests/bench/bridge.sh build (before/after: adds
#       rows for /tmp/old/sluice, measured in the same rounds as the others)
#
# Needs BUILD_DIR/sluice and BUILD_DIR/tests/bench/loadgen (cmake --build
# BUILD_DIR --target sluice loadgen) and socat (scripts/deps.sh). Run by hand,
# not by ctest; a default run takes about a minute. Rows:
#   direct            loadgen -> origin over tcp
#   sluice unix->tcp  loadgen -> unix socket -> sluice bridge -> tcp origin
#   sluice tcp->tcp   loadgen -> tcp -> sluice bridge -> tcp origin
#   base ...          the same through BASE/sluice (only with BASE=DIR)
#   socat unix->tcp   loadgen -> unix socket -> socat UNIX-LISTEN:..,fork TCP:.. -> origin
# Columns: bulk throughput (one connection sending to a sink, until the sink
# has read every byte), and connections/s with 1 and 64 concurrent clients
# (each: connect, write 100 bytes, read the 100-byte echo, close), each with
# its ratio to direct. sluice runs with --quiet (socat logs nothing either).
# Timings are reported, never asserted. Only 127.0.0.1 and unix sockets.
#
# CPU placement (as for the proxy benchmark): the relay under test runs on
# CPU 0 and the load generator and origins on CPU 1 (taskset), so on a
# 2-CPU machine the relay does not steal cycles from the endpoints it is
# compared against; NOPIN=1 runs everything unpinned.
#
# Noise: the numbers move a lot on a shared machine (a cross-CPU wakeup in a
# VM can cost tens of microseconds, and other jobs compete for the CPUs), so
# compare builds with RUNS=3 or more: every cell is then the median of RUNS
# measurements, taken in rounds (all rows, then again), so that a slow moment
# does not hit one row only; to compare two builds use BASE, so that both
# are measured in the same rounds rather than minutes apart. SLUICE_SPLICE
# (off, auto, always) is passed to sluice: how its relay moves bulk data
# (bridge/relay.c).
set -uo pipefail
B=${1:-build}
SLUICE=$B/sluice
LOADGEN=$B/tests/bench/loadgen
BULK_SECONDS=${BULK_SECONDS:-3}
RATE_SECONDS=${RATE_SECONDS:-4}
RUNS=${RUNS:-1}
BASE_SLUICE=${BASE:+$BASE/sluice}
for f in "$SLUICE" "$LOADGEN" ${BASE_SLUICE:+"$BASE_SLUICE"}; do
    [ -x "$f" ] || { echo "bridge.sh: $f missing (cmake --build $B --target sluice loadgen)" >&2; exit 2; }
done
RELAY_CPU=() LOAD_CPU=()
if [ -z "${NOPIN:-}" ] && command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
    RELAY_CPU=(taskset -c 0) LOAD_CPU=(taskset -c 1)
fi
HAVE_SOCAT=1
command -v socat >/dev/null || { HAVE_SOCAT=0; echo "bridge.sh: socat not installed, its row is skipped (scripts/deps.sh)" >&2; }

T=$(mktemp -d /tmp/sluice-bench.XXXXXX) || exit 2
PIDS=()
cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
    rm -rf "$T"
}
trap cleanup EXIT

# serve KIND VAR: starts a loadgen origin on a free loopback port; sets VAR
# to its endpoint (not in a subshell, so the pid lands in PIDS).
serve() {
    "${LOAD_CPU[@]}" "$LOADGEN" "serve-$1" tcp:127.0.0.1:0 > "$T/$2.out" 2>&1 & PIDS+=($!)
    local i
    for i in $(seq 1 100); do
        if [ -s "$T/$2.out" ]; then printf -v "$2" '%s' "$(awk '{print $2}' "$T/$2.out")"; return 0; fi
        sleep 0.05
    done
    echo "bridge.sh: origin $2 did not start" >&2; exit 1
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# wait_ready ENDPOINT: the unix socket exists / the tcp port accepts.
wait_ready() {
    local i
    for i in $(seq 1 100); do
        case $1 in
            unix:*) [ -S "${1#unix:}" ] && return 0 ;;
            tcp:*) (exec 3<>"/dev/tcp/127.0.0.1/${1##*:}") 2>/dev/null && return 0 ;;
        esac
        sleep 0.05
    done
    echo "bridge.sh: $1 did not come up" >&2; exit 1
}

# relay TOOL LISTEN ORIGIN: starts sluice (or the BASE build's), or socat,
# from LISTEN to ORIGIN.
relay() {
    case $1 in
        sluice) "${RELAY_CPU[@]}" "$SLUICE" bridge --quiet "$2" "$3" & PIDS+=($!) ;;
        base) "${RELAY_CPU[@]}" "$BASE_SLUICE" bridge --quiet "$2" "$3" & PIDS+=($!) ;;
        socat)
            local l=$2 o=${3#tcp:}
            case $l in
                unix:*) l="UNIX-LISTEN:${l#unix:},fork" ;;
                tcp:*) l="TCP-LISTEN:${l##*:},bind=127.0.0.1,reuseaddr,fork" ;;
            esac
            "${RELAY_CPU[@]}" socat "$l" "TCP:$o" 2>/dev/null & PIDS+=($!) ;; # EPIPE noise when clients close
    esac
    wait_ready "$2"
}

field() { sed -n "s/.* $1=\([0-9.]*\).*/\1/p"; }

serve sink SINK
serve echo ECHO

# measure NAME SINK_EP ECHO_EP: one round of one row (appends to its lists).
declare -A MIB C1 C64 SINKS ECHOS
ROWS=()
measure() {
    local name=$1 sink=$2 echo=$3 out
    out=$("${LOAD_CPU[@]}" "$LOADGEN" bulk "$sink" --seconds "$BULK_SECONDS")
    MIB[$name]+=" $(printf '%s\n' "$out" | field mib_s)"
    out=$("${LOAD_CPU[@]}" "$LOADGEN" rate "$echo" --clients 1 --seconds "$RATE_SECONDS")
    C1[$name]+=" $(printf '%s\n' "$out" | field conn_s)"
    [ "$(printf '%s\n' "$out" | field errors)" = 0 ] || echo "bridge.sh: $name c=1: $out" >&2
    out=$("${LOAD_CPU[@]}" "$LOADGEN" rate "$echo" --clients 64 --seconds "$RATE_SECONDS")
    C64[$name]+=" $(printf '%s\n' "$out" | field conn_s)"
    [ "$(printf '%s\n' "$out" | field errors)" = 0 ] || echo "bridge.sh: $name c=64: $out" >&2
    echo "bridge.sh: $name done" >&2
}

# row NAME SINK_EP ECHO_EP
row() { ROWS+=("$1"); SINKS[$1]=$2; ECHOS[$1]=$3; }

row "direct" "$SINK" "$ECHO"

relay sluice "unix:$T/s-sink.sock" "$SINK"
relay sluice "unix:$T/s-echo.sock" "$ECHO"
row "sluice unix->tcp" "unix:$T/s-sink.sock" "unix:$T/s-echo.sock"

P1=$(free_port); P2=$(free_port)
relay sluice "tcp:127.0.0.1:$P1" "$SINK"
relay sluice "tcp:127.0.0.1:$P2" "$ECHO"
row "sluice tcp->tcp" "tcp:127.0.0.1:$P1" "tcp:127.0.0.1:$P2"

if [ -n "$BASE_SLUICE" ]; then
    relay base "unix:$T/b-sink.sock" "$SINK"
    relay base "unix:$T/b-echo.sock" "$ECHO"
    row "base unix->tcp" "unix:$T/b-sink.sock" "unix:$T/b-echo.sock"
    P3=$(free_port); P4=$(free_port)
    relay base "tcp:127.0.0.1:$P3" "$SINK"
    relay base "tcp:127.0.0.1:$P4" "$ECHO"
    row "base tcp->tcp" "tcp:127.0.0.1:$P3" "tcp:127.0.0.1:$P4"
fi

if [ "$HAVE_SOCAT" = 1 ]; then
    relay socat "unix:$T/x-sink.sock" "$SINK"
    relay socat "unix:$T/x-echo.sock" "$ECHO"
    row "socat unix->tcp" "unix:$T/x-sink.sock" "unix:$T/x-echo.sock"
fi

for run in $(seq 1 "$RUNS"); do
    for r in "${ROWS[@]}"; do
        measure "$r" "${SINKS[$r]}" "${ECHOS[$r]}"
    done
done

# median of a list of numbers
median() { printf '%s\n' $1 | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
for r in "${ROWS[@]}"; do
    MIB[$r]=$(median "${MIB[$r]}")
    C1[$r]=$(median "${C1[$r]}")
    C64[$r]=$(median "${C64[$r]}")
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }'; }

echo
echo "relay benchmark: $(nproc) CPUs, $(uname -r), bulk ${BULK_SECONDS}s, rate ${RATE_SECONDS}s per column, ${RELAY_CPU[*]:-unpinned} relay / ${LOAD_CPU[*]:-unpinned} load, median of $RUNS, SLUICE_SPLICE=${SLUICE_SPLICE:-default}"
printf '%-18s %10s %7s %12s %7s %12s %7s\n' path "MiB/s" ratio "conn/s c=1" ratio "conn/s c=64" ratio
for r in "${ROWS[@]}"; do
    printf '%-18s %10.1f %7s %12.0f %7s %12.0f %7s\n' "$r" "${MIB[$r]}" "$(ratio "${MIB[$r]}" "${MIB[direct]}")" \
        "${C1[$r]}" "$(ratio "${C1[$r]}" "${C1[direct]}")" "${C64[$r]}" "$(ratio "${C64[$r]}" "${C64[direct]}")"
done
echo "targets: sluice >= 0.80x direct throughput, >= 0.60x direct conn/s"
