#!/usr/bin/env bash
# tests/bench/counts.sh - what one tunnel costs `sluice proxy`, in counts that
# outside load does not move: system calls per tunnel (strace -c) and
# instructions per tunnel (valgrind --tool=callgrind), for a CONNECT tunnel, a
# SOCKS5 tunnel, a denied CONNECT, a plain keep-alive GET and (lane "tls")
# a tunnel that network.tlsTerminate terminates (tlsload.py: a TLS origin
# on 127.0.0.1, a client that verifies sluice's leaf, GET /100, close),
# each over a fixed number of jobs (loadgen --count), for one binary or two
# side by side (A/B, interleaved lane by lane). Loopback only.
#
#   bash tests/bench/counts.sh BUILD_DIR [BASELINE_SLUICE]
#   MODE=strace N=2000 bash tests/bench/counts.sh build build-base/sluice
#
# Knobs: MODE (both | strace | callgrind), N (jobs per strace lane, 2000),
# NCG (jobs per callgrind lane, 300), C (concurrent clients, 64), LANES
# (default "connect socks deny get"; "tls" too needs openssl and python3),
# NTLS (jobs of the tls lane, both modes: 40), TLS_THREADS (its client
# threads, 8), NICE (the nice level of everything, 19), KEEP=1 (keep the
# temporary directory).
#
# Per lane and binary it prints syscalls/job (and the top calls) or
# instructions/job (Ir, user space only: callgrind does not see the
# kernel). Callgrind's numbers are taken between `callgrind_control -z`
# (after a warm-up of 50 jobs) and `callgrind_control -d`, so start-up is
# not in them. The jobs run with --wait-eof against serve-echo
# --close-after 100, as proxy.sh's (b) and (e) do.
set -uo pipefail

BUILD=${1:?usage: counts.sh BUILD_DIR [BASELINE_SLUICE]}
A=$BUILD/sluice
B=${2:-}
LOADGEN=$BUILD/tests/bench/loadgen
MODE=${MODE:-both}
N=${N:-2000}
NCG=${NCG:-300}
NTLS=${NTLS:-40}
TLS_THREADS=${TLS_THREADS:-8}
C=${C:-64}
LANES=${LANES:-connect socks deny get}
NICE=(nice -n "${NICE:-19}")
T=$(mktemp -d /tmp/sluice-counts.XXXXXX)
PIDS=()

cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    wait 2>/dev/null
    [ -n "${KEEP:-}" ] && echo "kept $T" >&2 || rm -rf "$T"
}
trap cleanup EXIT

for f in "$A" "$LOADGEN" ${B:+"$B"}; do
    [ -x "$f" ] || { echo "counts.sh: $f: not found" >&2; exit 2; }
done

# origin KIND VAR ARGS...: starts a loadgen origin, sets VAR to its port.
origin() {
    local kind=$1 var=$2 port= i
    shift 2
    "${NICE[@]}" "$LOADGEN" "serve-$kind" tcp:127.0.0.1:0 "$@" > "$T/origin-$var" 2>&1 &
    PIDS+=($!)
    for i in $(seq 100); do
        port=$(sed -n 's/^listening tcp:127\.0\.0\.1:\([0-9]*\).*/\1/p' "$T/origin-$var")
        [ -n "$port" ] && break
        sleep 0.05
    done
    [ -n "$port" ] || { echo "counts.sh: origin $kind did not start" >&2; exit 1; }
    printf -v "$var" '%s' "$port"
}
origin echo ECHO --close-after 100
origin http HTTPO

cat > "$T/settings.json" <<EOF
{
  "network": {
    "allowedDomains": ["127.0.0.1:$ECHO", "127.0.0.1:$HTTPO"],
    "deniedDomains": ["denied.example"]
  },
  "proxy": { "limits": { "maxConnections": 20000 }, "timeouts": { "idle": 0 } }
}
EOF
export HOME=$T XDG_CONFIG_HOME=$T/xdg
SETTINGS=$T/settings.json

# The tls lane: sluice's CA, the origin's CA and its leaf for 127.0.0.1 (as
# tls.sh makes them), the origin, and settings with tlsTerminate.
case " $LANES " in
*" tls "*)
    P=$T/pki
    . "$(dirname "$0")/pki.sh"
    bench_pki "$P" || exit 2
    OP=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    "${NICE[@]}" python3 "$(dirname "$0")/tlsload.py" origin "$OP" "$P/origin.pem" "$P/origin.key" \
        2> "$T/tls-origin.err" &
    PIDS+=($!)
    cat > "$T/settings-tls.json" <<EOF
{
  "network": {
    "allowedDomains": ["127.0.0.1:$OP"],
    "tlsTerminate": { "caCertPath": "$P/sluiceca.pem", "caKeyPath": "$P/sluiceca.key",
                      "extraCaCertPaths": ["$P/originca.pem"], "maxTunnels": 65536 }
  },
  "proxy": { "limits": { "maxConnections": 20000 }, "timeouts": { "idle": 0 } }
}
EOF
    sleep 0.5
    ;;
esac

# start BIN NAME [WRAPPER...]: starts the proxy (one worker), sets SP (the
# proxy's pid, the wrapper's when there is one), HP and SOP (its ports).
start() {
    local bin=$1 name=$2 line= i wopt=(--workers 1)
    shift 2
    "$bin" proxy --help 2>&1 | grep -q -- --workers || wopt=()
    "${NICE[@]}" "$@" "$bin" proxy --http tcp:127.0.0.1:0 --socks tcp:127.0.0.1:0 "${wopt[@]}" \
        --settings "$SETTINGS" --log "$T/$name.log" > "$T/$name.err" 2>&1 &
    SP=$!
    PIDS+=($SP)
    for i in $(seq 600); do
        line=$(grep -m1 'event=start' "$T/$name.log" 2>/dev/null)
        [ -n "$line" ] && break
        kill -0 "$SP" 2>/dev/null || break
        sleep 0.05
    done
    HP=$(printf '%s' "$line" | sed -n 's/.*http tcp:127\.0\.0\.1:\([0-9]*\).*/\1/p')
    SOP=$(printf '%s' "$line" | sed -n 's/.*socks5 tcp:127\.0\.0\.1:\([0-9]*\).*/\1/p')
    [ -n "$HP" ] && [ -n "$SOP" ] || { echo "counts.sh: $name did not start: $(cat "$T/$name.err")" >&2; exit 1; }
}

stop() { kill "$1" 2>/dev/null; wait "$1" 2>/dev/null; }

# load LANE COUNT: one loadgen run of COUNT jobs of LANE against HP/SOP.
load() {
    local lane=$1 n=$2 out
    case $lane in
    connect) out=$("${NICE[@]}" "$LOADGEN" rate "tcp:127.0.0.1:$HP" --proxy http --target "127.0.0.1:$ECHO" \
                 --clients "$C" --count "$n" --wait-eof --threads 1) ;;
    socks) out=$("${NICE[@]}" "$LOADGEN" rate "tcp:127.0.0.1:$SOP" --proxy socks5 --target "127.0.0.1:$ECHO" \
                 --clients "$C" --count "$n" --wait-eof --threads 1) ;;
    deny) out=$("${NICE[@]}" "$LOADGEN" rate "tcp:127.0.0.1:$HP" --proxy http --target "denied.example:$ECHO" \
                 --expect-deny --clients "$C" --count "$n" --wait-eof --threads 1) ;;
    get) out=$("${NICE[@]}" "$LOADGEN" http "tcp:127.0.0.1:$HP" --proxy http --target "127.0.0.1:$HTTPO" \
                 --clients "$C" --count "$n" --threads 1) ;;
    tls) out=$("${NICE[@]}" python3 "$(dirname "$0")/tlsload.py" rate "127.0.0.1:$HP" "$OP" "$P/sluiceca.pem" \
                 3600 "$TLS_THREADS" "$n" 2>&1)
         case $out in *" errors 0"*) out="$out errors=0" ;; esac ;;
    esac
    case $out in *" errors=0"*) ;; *) echo "counts.sh: $lane: $out" >&2 ;; esac
}

# strace_lane BIN NAME LANE: syscalls per job.
strace_lane() {
    local bin=$1 name=$2 lane=$3 sp N=$N
    [ "$lane" = tls ] && N=$NTLS
    start "$bin" "$name-$lane"
    load "$lane" "$([ "$lane" = tls ] && echo 5 || echo 50)" # warm-up
    strace -c -f -q -p "$SP" -o "$T/$name-$lane.strace" & sp=$!
    sleep 0.5
    load "$lane" "$N"
    sleep 0.2
    kill -INT "$sp"; wait "$sp" 2>/dev/null
    stop "$SP"
    awk -v n="$N" '$NF == "total" { printf "%.2f", $4 / n }' "$T/$name-$lane.strace" > "$T/tot"
    printf '%-8s %-5s syscalls/job %7s  ' "$lane" "$name" "$(cat "$T/tot")"
    awk -v n="$N" '$1 ~ /^[0-9.]+$/ && $NF != "total" { printf "%.3f %s\n", $4 / n, $NF }' \
        "$T/$name-$lane.strace" | sort -rn | head -12 | awk '{ printf " %s %s", $2, $1 } END { print "" }'
}

# callgrind_lane BIN NAME LANE: instructions (Ir) per job.
callgrind_lane() {
    local bin=$1 name=$2 lane=$3 out ir NCG=$NCG
    [ "$lane" = tls ] && NCG=$NTLS
    out=$T/cg-$name-$lane
    start "$bin" "cg-$name-$lane" valgrind --tool=callgrind --callgrind-out-file="$out.%p" -q
    load "$lane" "$([ "$lane" = tls ] && echo 5 || echo 50)" # warm-up
    callgrind_control -z "$SP" > /dev/null 2>&1
    load "$lane" "$NCG"
    callgrind_control -d "$SP" > /dev/null 2>&1
    sleep 0.5
    stop "$SP"
    # the dump after -d is the second file (.1); its totals are the jobs only
    ir=$(grep -h '^totals:' "$out".*.1 2>/dev/null | awk '{ s += $2 } END { print s + 0 }')
    awk -v ir="$ir" -v n="$NCG" -v who="$name" -v lane="$lane" \
        'BEGIN { printf "%-8s %-8s Ir/job %10.0f\n", lane, who, ir / n }'
    ls "$out".*.1 2>/dev/null | head -1 > "$T/cg-last-$name-$lane"
}

for lane in $LANES; do
    SETTINGS=$T/settings.json
    [ "$lane" = tls ] && SETTINGS=$T/settings-tls.json
    if [ "$MODE" != callgrind ]; then
        [ -n "$B" ] && strace_lane "$B" base "$lane"
        strace_lane "$A" cur "$lane"
    fi
    if [ "$MODE" != strace ]; then
        [ -n "$B" ] && callgrind_lane "$B" base "$lane"
        callgrind_lane "$A" cur "$lane"
    fi
done
if [ -n "${KEEP:-}" ]; then
    ls "$T"/cg-*.1 2>/dev/null
fi
