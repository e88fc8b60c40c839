#!/usr/bin/env bash
# tests/bench/proxy.sh - egress proxy benchmark: `sluice proxy` against a
# direct connection (the limit), tinyproxy (HTTP CONNECT and plain HTTP) and
# microsocks (SOCKS5), side by side in one run, on loopback only.
#
#   bash tests/bench/proxy.sh [BUILD_DIR] [--json PATH]     (default: build)
#   ROUNDS=1 BULK_BYTES=268435456 bash tests/bench/proxy.sh build-bench
#
# Needs BUILD_DIR/tests/bench/loadgen and BUILD_DIR/sluice (cmake --build
# BUILD_DIR --target sluice loadgen; SLUICE=PATH tests another binary),
# python3, and tinyproxy and microsocks (scripts/deps.sh; a missing one's
# rows are skipped). Run by hand, not by ctest; a default run takes about
# four minutes on 2 CPUs. Sections (tests/bench/README.md has the details):
#   (a) bulk through one tunnel: BULK_BYTES (1 GiB) up (client -> sink, until
#       the sink's EOF comes back) and down (source -> client), MiB/s
#   (b) tunnels/s at 1, 64 and 512 concurrent clients: connect, CONNECT or
#       SOCKS5 handshake, 100-byte echo, EOF, close; p50/p99 per tunnel. The
#       origin closes first (serve-echo --close-after 100, clients read to
#       EOF): with the client closing first, one client address and one
#       target run out of ephemeral ports at ~14k connections/s
#   (c) plain-HTTP keep-alive requests/s at 1 and 64 clients: absolute-form
#       GET through the proxy to loadgen's tiny origin (direct: origin form)
#   (d) PSS per idle tunnel: a fresh proxy, IDLE_N tunnels (each did one
#       100-byte echo) left idle, /proc/PID/smaps_rollup Pss before and
#       after, divided by N; N is cut so 2N fds fit under ulimit -Hn. sluice
#       runs here with its default limits (no maxConnections in the
#       settings) and a soft descriptor limit of 1024, so the tunnels open
#       only because it raises the limit and sizes maxConnections itself
#   (e) denied CONNECTs/s at 64 clients (a name the policy denies: 403, no
#       DNS, no dial), against direct open+echo+close at 64
#   (f) sluice CONNECT tunnels/s at c=64 with --workers 1 and --workers 2,
#       the proxy allowed on both CPUs: CPU us per tunnel (scaling
#       efficiency: 2 workers against 1) and the accepts of each worker.
#       Sections (a)-(e) run sluice with --workers 1 (a single loop)
#   (g) with BASELINE=PATH (another sluice binary, e.g. the single-loop build
#       of 6022450): its rows "baseline CONNECT" and "baseline SOCKS5" run in
#       (a)-(e) interleaved with sluice's, in the same rounds, and every line
#       of sluice CONNECT/SOCKS5 gets its ratio to the baseline's (LOSS when
#       more than 5% worse). The baseline runs without --workers (it may not
#       know it); its idle lane gets maxConnections 20000 and the hard
#       descriptor limit by hand (a build before issue 13 sizes neither)
# Each number has its ratio to direct and, for the proxies, the CPU time
# the proxy spent (utime+stime from /proc/PID/stat) per GB, per tunnel or
# per request. Rows run in ROUNDS interleaved rounds; a cell is the median.
#
# Placement: every proxy runs on CPU 0, the load generator and the origins on
# CPU 1 (taskset); NOPIN=1 runs everything unpinned. Logging: sluice logs
# every connection to a file (--log, as deployed; SLUICE_LOG=PATH), microsocks
# prints a line per connection to a file, tinyproxy runs at LogLevel Critical
# (TINYPROXY_LOGLEVEL; at Connect it fsync()s every line and is ~10x slower).
# Timings are reported, never asserted; the targets section marks misses.
#
# Output: the table on stdout, JSON to --json PATH (default $T/results.json,
# copied to ./bench-proxy.json); --report JSON prints a saved run's table.
# Knobs: BULK_BYTES (1073741824), RATE_SECONDS (2), ROUNDS (3), IDLE_N
# (10000), NOPIN, SLUICE, BASELINE, SLUICE_LOG, TINYPROXY_LOGLEVEL, KEEP=1
# (keep the temporary directory).
set -uo pipefail

# report IN OUT: prints the table from IN (the results TSV of a run, or a
# saved JSON with --report) and writes the JSON to OUT (unless empty).
report() {
python3 - "$1" "$2" <<'PY'
import json, statistics, sys

res, out = sys.argv[1], sys.argv[2]

def num(val):
    try:
        v = float(val)
    except ValueError:
        return None
    return int(v) if v.is_integer() and "." not in val else v

# every run of every round; a cell is the median over the rounds (errors:
# the sum), derived values are computed per round, then the median taken
raw, meta, order = {}, {}, []
if res.endswith(".json"):  # --report: a saved run
    saved = json.load(open(res))
    raw, meta, order = saved["rounds"], saved["meta"], saved["order"]
else:
    for line in open(res):
        row, key, val = line.rstrip("\n").split("\t", 2)
        if row == "meta":
            meta[key] = val
            continue
        if row not in raw:
            raw[row] = {}
            order.append(row)
        raw[row].setdefault(key, []).append(num(val))
rows = {}
for row, kv in raw.items():
    m = rows[row] = {}
    for k, vals in kv.items():
        vals = [v for v in vals if v is not None]
        if vals:
            m[k] = sum(vals) if k.endswith("_errors") else statistics.median(vals)

def per_round(row, a, b, scale):
    """median over the rounds of a/b*scale"""
    xs, ys = raw.get(row, {}).get(a, []), raw.get(row, {}).get(b, [])
    q = [x / y * scale for x, y in zip(xs, ys) if x is not None and y]
    return round(statistics.median(q), 3) if q else None

def g(row, key):
    v = rows.get(row, {}).get(key)
    return v if isinstance(v, (int, float)) else None

def ratio(a, b):
    return a / b if a is not None and b else None

def fnum(v, fmt="{:.0f}"):
    return "-" if v is None else fmt.format(v)

def fr(v):
    return "-" if v is None else "{:.2f}x".format(v)

def cpu(r, key, fmt):
    """the proxy's CPU (utime+stime) per unit"""
    return fnum(g(r, key.format("cpu")), fmt)

D = "direct"
bb = float(meta["bulk_bytes"])
lines = []
P = lines.append
P("proxy benchmark {}: {} CPUs ({}), kernel {}, {}; {}".format(
    meta["date"], meta["nproc"], meta["cpu"], meta["kernel"], meta["pinning"], meta["sluice"]))
P("bulk {:.0f} MiB each way, {} s per rate run; median of {} rounds; steal {}%, load {}".format(
    bb / 1048576, meta["rate_seconds"], meta["rounds"], meta["steal_pct"], meta["loadavg"]))
# outside load on the proxy CPU: CPU 0 busy minus the proxy's own CPU, per
# run (for direct rows all of CPU 0's busy time); a cell is a median over the
# rounds, so it is disturbed only when its median run was
runs, cells = {}, []
for r, kv in raw.items():
    for k, busy in kv.items():
        if not k.endswith("_cpu0_s"):
            continue
        p = k[:-len("_cpu0_s")]
        own, secs = kv.get(p + "_cpu_s", [0] * len(busy)), kv.get(p + "_seconds", [])
        # runs under 0.5 s are left out: CPU time comes in 10 ms ticks
        o = [max(0.0, (b - (c or 0)) / t) for b, c, t in zip(busy, own, secs)
             if b is not None and t and t >= 0.5]
        for i, x in enumerate(o):
            runs.setdefault(i, []).append(x)
        if o:
            cells.append((statistics.median(o), r, p))
if runs:
    round_medians = ["{:.0f}%".format(100 * statistics.median(v)) for _, v in sorted(runs.items())]
    bad = sorted(c for c in cells if c[0] > 0.10)
    meta["outside_cpu0_round_medians_pct"] = round_medians
    meta["outside_cpu0_disturbed_cells"] = ["{} {}".format(c[1], c[2]) for c in bad]
    P("outside load on the proxy CPU (CPU 0 busy minus the proxy's own CPU), median per round: {}; "
      "cells whose median run had over 10%: {} of {}".format(", ".join(round_medians), len(bad), len(cells)))
    if bad:
        P("WARNING: other work shared the proxy CPU in these cells ({}); under it a single-threaded "
          "proxy gets one thread's share while thread-per-connection ones get one per connection: "
          "run again on a quiet machine".format(", ".join(meta["outside_cpu0_disturbed_cells"])))

# derived values, kept in the JSON too
for r, m in rows.items():
    for d in ("up", "down"):
        m[d + "_cpu_s_per_gb"] = per_round(r, d + "_cpu_s", d + "_bytes", 1e9)
        m[d + "_cpu0_s_per_gb"] = per_round(r, d + "_cpu0_s", d + "_bytes", 1e9)
        m[d + "_ratio"] = ratio(g(r, d + "_mib_s"), g(D, d + "_mib_s"))
    for p, k in (("c1", "conn_s"), ("c64", "conn_s"), ("c512", "conn_s"), ("http1", "req_s"),
                 ("http64", "req_s"), ("w64", "conn_s")):
        m[p + "_ratio"] = ratio(g(r, p + "_" + k), g(D, p + "_" + k))
        n = p + ("_reqs" if p.startswith("http") else "_conns")
        m[p + "_cpu_us_per_op"] = per_round(r, p + "_cpu_s", n, 1e6)
        m[p + "_cpu0_us_per_op"] = per_round(r, p + "_cpu0_s", n, 1e6)
    if g(r, "deny_conn_s") is not None:
        m["deny_ratio"] = ratio(g(r, "deny_conn_s"), g(D, "c64_conn_s"))
        m["deny_cpu_us_per_op"] = per_round(r, "deny_cpu_s", "deny_conns", 1e6)
        m["deny_cpu0_us_per_op"] = per_round(r, "deny_cpu0_s", "deny_conns", 1e6)
    if g(r, "idle_pss_after_kb") is not None and g(r, "idle_tunnels"):
        m["idle_pss_kib_per_tunnel"] = round(
            (g(r, "idle_pss_after_kb") - g(r, "idle_pss_before_kb")) / g(r, "idle_tunnels"), 2)

P("")
P("(a) bulk, one tunnel; proxy CPU (utime+stime) seconds per GB")
P("{:<22} {:>10} {:>6} {:>10} {:>6} {:>11} {:>11}".format(
    "", "up MiB/s", "ratio", "down MiB/s", "ratio", "CPU s/GB up", "CPU s/GB dn"))
for r in order:
    P("{:<22} {:>10} {:>6} {:>10} {:>6} {:>11} {:>11}".format(
        r, fnum(g(r, "up_mib_s")), fr(g(r, "up_ratio")), fnum(g(r, "down_mib_s")),
        fr(g(r, "down_ratio")), cpu(r, "up_{}_s_per_gb", "{:.2f}"),
        cpu(r, "down_{}_s_per_gb", "{:.2f}")))

P("")
P("(b) tunnels/s: open + 100-byte echo + close; p50/p99 per tunnel in us; proxy CPU (utime+stime) us per tunnel at c=64")
P("{:<22} {:>8} {:>6} {:>13} {:>8} {:>6} {:>13} {:>8} {:>6} {:>15} {:>11}".format(
    "", "c=1", "ratio", "p50/p99", "c=64", "ratio", "p50/p99", "c=512", "ratio", "p50/p99", "CPU c=64"))
for r in order:
    cells = []
    for c in ("c1", "c64", "c512"):
        cells += [fnum(g(r, c + "_conn_s")), fr(g(r, c + "_ratio")),
                  "{}/{}".format(fnum(g(r, c + "_p50_us")), fnum(g(r, c + "_p99_us")))]
    P("{:<22} {:>8} {:>6} {:>13} {:>8} {:>6} {:>13} {:>8} {:>6} {:>15} {:>11}".format(
        r, *cells, cpu(r, "c64_{}_us_per_op", "{:.1f}")))

P("")
P("(c) plain HTTP keep-alive GET, req/s; p50/p99 per request in us; TCP conns opened at c=64; proxy CPU us per request")
P("{:<22} {:>8} {:>6} {:>13} {:>8} {:>6} {:>13} {:>9} {:>11}".format(
    "", "c=1", "ratio", "p50/p99", "c=64", "ratio", "p50/p99", "conns", "CPU c=64"))
for r in order:
    if g(r, "http1_req_s") is None:
        continue
    cells = []
    for c in ("http1", "http64"):
        cells += [fnum(g(r, c + "_req_s")), fr(g(r, c + "_ratio")),
                  "{}/{}".format(fnum(g(r, c + "_p50_us")), fnum(g(r, c + "_p99_us")))]
    P("{:<22} {:>8} {:>6} {:>13} {:>8} {:>6} {:>13} {:>9} {:>11}".format(
        r, *cells, fnum(g(r, "http64_conns")), cpu(r, "http64_{}_us_per_op", "{:.1f}")))

P("")
P("(d) idle tunnels (fresh proxy; fd limit {}, {} requested)".format(meta["fd_limit"], meta["idle_requested"]))
P("{:<22} {:>7} {:>7} {:>14} {:>13} {:>12} {:>8} {:>8}".format(
    "", "N", "failed", "PSS before KiB", "PSS after KiB", "KiB/tunnel", "threads", "closed"))
for r in order:
    if g(r, "idle_n") is None:
        continue
    P("{:<22} {:>7} {:>7} {:>14} {:>13} {:>12} {:>8} {:>8}".format(
        r, fnum(g(r, "idle_tunnels")), fnum((g(r, "idle_errors") or 0) + (g(r, "idle_pending") or 0)),
        fnum(g(r, "idle_pss_before_kb")), fnum(g(r, "idle_pss_after_kb")),
        fnum(g(r, "idle_pss_kib_per_tunnel"), "{:.2f}"), fnum(g(r, "idle_proxy_threads")),
        fnum(g(r, "idle_closed_while_idle"))))

P("")
P("(f) sluice CONNECT tunnels/s at c=64 with --workers 1 and 2 (proxy on both CPUs, load on CPU 1)")
P("{:<24} {:>8} {:>13} {:>11} {:>10} {:>16}".format("", "c=64", "p50/p99", "CPU us/tun", "vs 1", "accepts w0/w1"))
w1 = g("sluice --workers 1", "w64_cpu_us_per_op")
for r in order:
    if g(r, "w64_conn_s") is None:
        continue
    cu = g(r, "w64_cpu_us_per_op")
    P("{:<24} {:>8} {:>13} {:>11} {:>10} {:>16}".format(
        r, fnum(g(r, "w64_conn_s")), "{}/{}".format(fnum(g(r, "w64_p50_us")), fnum(g(r, "w64_p99_us"))),
        fnum(cu, "{:.1f}"), fr(ratio(cu, w1)),
        "{}/{}".format(fnum(g(r, "w64_accepts_w0")), fnum(g(r, "w64_accepts_w1")))))

P("")
P("(e) denied CONNECT (403, no DNS, no dial), c=64; ratio to direct open+echo+close at c=64")
P("{:<22} {:>9} {:>6} {:>13} {:>11}".format("", "denials/s", "ratio", "p50/p99", "CPU us"))
for r in order:
    if r == D:
        P("{:<22} {:>9} {:>6} {:>13} {:>11}".format(
            r + " (open+echo)", fnum(g(r, "c64_conn_s")), "1.00x",
            "{}/{}".format(fnum(g(r, "c64_p50_us")), fnum(g(r, "c64_p99_us"))), "-"))
    elif g(r, "deny_conn_s") is not None:
        P("{:<22} {:>9} {:>6} {:>13} {:>11}".format(
            r, fnum(g(r, "deny_conn_s")), fr(g(r, "deny_ratio")),
            "{}/{}".format(fnum(g(r, "deny_p50_us")), fnum(g(r, "deny_p99_us"))),
            cpu(r, "deny_{}_us_per_op", "{:.1f}")))

# targets
checks = []
def check(name, value, goal, ok):
    checks.append({"target": name, "value": value, "goal": goal,
                   "pass": None if value is None else bool(ok)})
SC, SS, TP, MS = "sluice CONNECT", "sluice SOCKS5", "tinyproxy CONNECT", "microsocks SOCKS5"
for r in (SC, SS):
    for d in ("up", "down"):
        v = g(r, d + "_ratio")
        check("(a) {} bulk {} vs direct".format(r, d), v, ">= 0.80x", v is not None and v >= 0.8)
    v = g(r, "c64_ratio")
    check("(b) {} tunnels/s c=64 vs direct".format(r), v, ">= 0.60x", v is not None and v >= 0.6)
for c in ("http1", "http64"):
    v = g(SC, c + "_ratio")
    check("(c) sluice HTTP req/s {} vs direct".format("c=1" if c == "http1" else "c=64"), v,
          ">= 0.50x", v is not None and v >= 0.5)
for r in (SC, SS):
    v = g(r, "idle_pss_kib_per_tunnel")
    check("(d) {} PSS per idle tunnel (KiB)".format(r), v, "<= 4", v is not None and v <= 4)
v = g(SC, "deny_ratio")
check("(e) sluice denials/s vs direct open+echo+close", v, ">= 1.00x", v is not None and v >= 1.0)
# ahead of the peers on every line (higher is better, PSS lower)
pairs = [(SC, TP), (SS, MS)]
for s, o in pairs:
    if o not in rows:
        continue
    for key, label, higher in (("up_mib_s", "(a) up", 1), ("down_mib_s", "(a) down", 1),
                               ("c1_conn_s", "(b) c=1", 1), ("c64_conn_s", "(b) c=64", 1),
                               ("c512_conn_s", "(b) c=512", 1), ("http1_req_s", "(c) c=1", 1),
                               ("http64_req_s", "(c) c=64", 1), ("idle_pss_kib_per_tunnel", "(d)", 0),
                               ("deny_conn_s", "(e)", 1)):
        a, b = g(s, key), g(o, key)
        if a is None or b is None:
            continue
        check("{} {} ahead of {}".format(label, s, o), round(a / b, 2) if b else None,
              "> 1.00x" if higher else "< 1.00x", (a > b) if higher else (a < b))

# (g) every line of sluice's rows against the baseline's, in the same run
BL = (("sluice CONNECT", "baseline CONNECT"), ("sluice SOCKS5", "baseline SOCKS5"))
if any(b in rows for _, b in BL):
    P("")
    P("(g) sluice against the baseline ({}), same run; ratio > 1.00x is better for sluice, "
      "LOSS: more than 5% worse".format(meta.get("baseline", "?")))
    P("{:<16} {:<26} {:>12} {:>12} {:>7}".format("lane", "line", "sluice", "baseline", "ratio"))
    for s, b in BL:
        if b not in rows:
            continue
        for key, label, higher in (("up_mib_s", "(a) bulk up MiB/s", 1),
                                   ("down_mib_s", "(a) bulk down MiB/s", 1),
                                   ("c1_conn_s", "(b) tunnels/s c=1", 1),
                                   ("c64_conn_s", "(b) tunnels/s c=64", 1),
                                   ("c512_conn_s", "(b) tunnels/s c=512", 1),
                                   ("http1_req_s", "(c) HTTP req/s c=1", 1),
                                   ("http64_req_s", "(c) HTTP req/s c=64", 1),
                                   ("idle_pss_kib_per_tunnel", "(d) PSS KiB/idle tunnel", 0),
                                   ("deny_conn_s", "(e) denials/s c=64", 1)):
            a, c = g(s, key), g(b, key)
            if a is None or c is None:
                continue
            # the ratio is "how much better": higher/lower per the line's sense
            q = (a / c if c else None) if higher else (c / a if a else None)
            P("{:<16} {:<26} {:>12} {:>12} {:>7} {}".format(
                s.split(" ")[1], label, fnum(a, "{:.2f}" if key.startswith("idle") else "{:.0f}"),
                fnum(c, "{:.2f}" if key.startswith("idle") else "{:.0f}"),
                "-" if q is None else "{:.3f}x".format(q),
                "LOSS" if q is not None and q < 0.95 else ""))
            check("(g) {} {} vs baseline".format(s, label), round(q, 2) if q is not None else None,
                  ">= 0.95x", q is not None and q >= 0.95)

P("")
P("targets")
for c in checks:
    v = c["value"]
    P("  {:<4} {:<52} {:>8} (goal {})".format(
        "-" if c["pass"] is None else ("ok" if c["pass"] else "MISS"), c["target"],
        "-" if v is None else ("{:.2f}".format(v)), c["goal"]))

print("\n".join(lines))
for m in rows.values():
    for k in list(m):
        if isinstance(m[k], float):
            m[k] = round(m[k], 3)
if out:
    json.dump({"meta": meta, "rows": rows, "order": order, "targets": checks, "rounds": raw},
              open(out, "w"), indent=2)
PY
}

B=build JSON=
while [ $# -gt 0 ]; do
    case $1 in
        --report) report "${2:?--report needs a JSON file}" ""; exit ;;
        --json) JSON=${2:?--json needs a path}; shift 2 ;;
        --json=*) JSON=${1#--json=}; shift ;;
        -h|--help) sed -n '2,50p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "proxy.sh: unknown option $1" >&2; exit 2 ;;
        *) B=$1; shift ;;
    esac
done
SLUICE=${SLUICE:-$B/sluice}
LOADGEN=$B/tests/bench/loadgen
BULK_BYTES=${BULK_BYTES:-1073741824}
RATE_SECONDS=${RATE_SECONDS:-2}
ROUNDS=${ROUNDS:-3}
IDLE_N=${IDLE_N:-10000}
TINYPROXY_LOGLEVEL=${TINYPROXY_LOGLEVEL:-Critical}
BASELINE=${BASELINE:-}
[ -z "$BASELINE" ] || case $BASELINE in /*) ;; *) BASELINE=$PWD/$BASELINE ;; esac
for f in "$SLUICE" "$LOADGEN" ${BASELINE:+"$BASELINE"}; do
    [ -x "$f" ] || { echo "proxy.sh: $f missing (cmake --build $B --target sluice loadgen)" >&2; exit 2; }
done
command -v python3 >/dev/null || { echo "proxy.sh: python3 missing (scripts/deps.sh)" >&2; exit 2; }
PROXY_CPU=() LOAD_CPU=()
if [ -z "${NOPIN:-}" ] && command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
    PROXY_CPU=(taskset -c 0) LOAD_CPU=(taskset -c 1)
fi
HAVE_TINYPROXY=1 HAVE_MICROSOCKS=1
command -v tinyproxy >/dev/null || { HAVE_TINYPROXY=0; echo "proxy.sh: tinyproxy not installed, its rows are skipped (scripts/deps.sh)" >&2; }
command -v microsocks >/dev/null || { HAVE_MICROSOCKS=0; echo "proxy.sh: microsocks not installed, its rows are skipped (scripts/deps.sh)" >&2; }

# Every process holds 2 fds per idle tunnel in the proxy: raise the soft
# limit to the hard one and fit N under it (100 fds to spare).
ulimit -n "$(ulimit -Hn)" 2>/dev/null
FD_LIMIT=$(ulimit -n)
IDLE_FIT=$(( (FD_LIMIT - 100) / 2 ))
IDLE_COUNT=$(( IDLE_N < IDLE_FIT ? IDLE_N : IDLE_FIT ))

T=$(mktemp -d /tmp/sluice-bench.XXXXXX) || exit 2
export HOME="$T/home" XDG_CONFIG_HOME="$T/home/.config" # no user settings layer
unset SLUICE_SETTINGS
mkdir -p "$HOME"
SLUICE_LOG=${SLUICE_LOG:-$T/sluice.log}
PIDS=()
cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
    [ -n "${KEEP:-}" ] || rm -rf "$T"
}
trap cleanup EXIT
HZ=$(getconf CLK_TCK)
RES=$T/results.tsv
: > "$RES"
put() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >> "$RES"; }
log() { echo "proxy.sh: $*" >&2; }

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# wait_port PORT: until the loopback port accepts.
wait_port() {
    local i
    for i in $(seq 1 100); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.05
    done
    log "port $1 did not come up"; exit 1
}

# origin KIND VAR [ARGS]: a loadgen origin on a free loopback port; VAR gets
# its port (not in a subshell, so the pid lands in PIDS).
origin() {
    "${LOAD_CPU[@]}" "$LOADGEN" "serve-$1" tcp:127.0.0.1:0 "${@:3}" > "$T/$2.out" 2>&1 & PIDS+=($!)
    local i
    for i in $(seq 1 100); do
        if [ -s "$T/$2.out" ]; then printf -v "$2" '%s' "$(awk '{print $2}' "$T/$2.out" | sed 's/.*://')"; return 0; fi
        sleep 0.05
    done
    log "origin $1 did not start"; exit 1
}

# cpu_ticks PID: utime+stime of the whole process (all threads), in ticks.
cpu_ticks() {
    [ -n "$1" ] && [ -r "/proc/$1/stat" ] || return 0
    sed 's/.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'
}
pss_kb() { awk '/^Pss:/ { print $2 }' "/proc/$1/smaps_rollup"; }
# cpu0_busy: non-idle ticks of CPU 0 (user+nice+system+irq+softirq), the
# proxy's CPU when pinned; JSON only, a diagnostic for outside load there.
cpu0_busy() {
    [ ${#PROXY_CPU[@]} -gt 0 ] || return 0
    awk '$1 == "cpu0" { print $2 + $3 + $4 + $7 + $8 }' /proc/stat
}

# lg ARGS: loadgen on the load CPU.
lg() { "${LOAD_CPU[@]}" "$LOADGEN" "$@"; }

# run ROW PREFIX PID ARGS...: one loadgen run; every key=value it prints is
# stored as ROW PREFIX_key, plus PREFIX_cpu_s: the CPU seconds PID (the
# proxy; empty for direct) spent meanwhile (utime+stime, which the kernel
# scales to the scheduler's exact runtime), and PREFIX_cpu0_s: the busy
# seconds of CPU 0 meanwhile: the proxy plus whatever else ran there (for
# direct, only outside load), reported as the outside load on the proxy CPU.
run() {
    local row=$1 pre=$2 pid=$3 c0 c1 b0 b1 out kv
    shift 3
    c0=$(cpu_ticks "$pid") b0=$(cpu0_busy)
    out=$(lg "$@" 2>"$T/lg.err") || log "$row $pre: loadgen failed: $(cat "$T/lg.err")"
    c1=$(cpu_ticks "$pid") b1=$(cpu0_busy)
    for kv in $out; do
        case $kv in *=*) put "$row" "${pre}_${kv%%=*}" "${kv#*=}" ;; esac
    done
    [ -n "$c0" ] && [ -n "$c1" ] && put "$row" "${pre}_cpu_s" "$(awk -v a="$c0" -v b="$c1" -v hz="$HZ" 'BEGIN { printf "%.3f", (b - a) / hz }')"
    [ -n "$b0" ] && [ -n "$b1" ] && put "$row" "${pre}_cpu0_s" "$(awk -v a="$b0" -v b="$b1" -v hz="$HZ" 'BEGIN { printf "%.3f", (b - a) / hz }')"
    case $out in *" errors=0"*|bulk*) ;; *) log "$row $pre: $out" ;; esac
}

# ---------------------------------------------------------------------------
# Origins (CPU 1) and proxies (CPU 0)

# ECHO closes first once the 100 bytes went back (and the clients read to
# EOF): the TIME_WAIT states stay on the server side of every connection.
# With the client closing first, one client address and one target run out
# of the even half of the ephemeral ports at ~14k connections/s, which would
# cap every row alike. HOLD echoes until EOF, for the idle tunnels.
origin echo ECHO --close-after 100
origin echo HOLD
origin sink SINK
origin source SRC
origin http HTTPO

SETTINGS=$T/sluice.json
cat > "$SETTINGS" <<EOF
{
  "network": {
    "allowedDomains": ["127.0.0.1:$ECHO", "127.0.0.1:$HOLD", "127.0.0.1:$SINK", "127.0.0.1:$SRC", "127.0.0.1:$HTTPO"],
    "deniedDomains": ["denied.example"]
  },
  "proxy": {
    "limits": { "maxConnections": 20000 },
    "timeouts": { "idle": 0 }
  }
}
EOF
# the idle lane: sluice's defaults (maxConnections from the descriptor limit)
SETTINGS_DEFAULT=$T/sluice-default.json
python3 -c 'import json, sys; s = json.load(open(sys.argv[1])); del s["proxy"]["limits"]; json.dump(s, open(sys.argv[2], "w"))' \
    "$SETTINGS" "$SETTINGS_DEFAULT"

# start_sluice NAME [SETTINGS [SOFT_NOFILE [WORKERS [CPUS]]]]: sets SL_PID,
# SL_HTTP, SL_SOCKS and SL_ADMIN. One worker (a single loop) unless WORKERS;
# on the proxy CPU unless CPUS (a taskset list). SL_BIN=PATH runs another
# binary (the baseline) without --workers.
start_sluice() {
    local log=$SLUICE_LOG i line= settings=${2:-$SETTINGS} soft=${3:-$(ulimit -Sn)} workers=${4:-1}
    local cpu=("${PROXY_CPU[@]}") bin=${SL_BIN:-$SLUICE} wopt=(--workers "${4:-1}")
    [ "$bin" = "$SLUICE" ] || wopt=()
    [ -n "${5:-}" ] && [ ${#PROXY_CPU[@]} -gt 0 ] && cpu=(taskset -c "$5")
    [ "$1" = main ] || log=$T/sluice-$1.log
    ( ulimit -Sn "$soft"; exec "${cpu[@]}" "$bin" proxy --http tcp:127.0.0.1:0 --socks tcp:127.0.0.1:0 \
        --admin tcp:127.0.0.1:0 "${wopt[@]}" --settings "$settings" --log "$log" ) \
        2>"$T/sluice-$1.err" & SL_PID=$!
    PIDS+=($SL_PID)
    if [ "$log" = /dev/null ]; then # no start line to read: fixed ports
        log "SLUICE_LOG=/dev/null needs the start line; use a file"; exit 2
    fi
    for i in $(seq 200); do
        line=$(grep -m1 'event=start' "$log" 2>/dev/null)
        [ -n "$line" ] && break
        kill -0 "$SL_PID" 2>/dev/null || break
        sleep 0.05
    done
    SL_HTTP=$(printf '%s' "$line" | sed -n 's/.*http tcp:127\.0\.0\.1:\([0-9]*\).*/\1/p')
    SL_SOCKS=$(printf '%s' "$line" | sed -n 's/.*socks5 tcp:127\.0\.0\.1:\([0-9]*\).*/\1/p')
    SL_ADMIN=$(printf '%s' "$line" | sed -n 's/.* admin tcp:127\.0\.0\.1:\([0-9]*\).*/\1/p')
    [ -n "$SL_HTTP" ] && [ -n "$SL_SOCKS" ] || { log "sluice did not start: $(cat "$T/sluice-$1.err")"; exit 1; }
}

# start_tinyproxy NAME: sets TP_PID and TP_PORT.
start_tinyproxy() {
    TP_PORT=$(free_port)
    printf '^denied\\.example$\n' > "$T/tinyproxy.filter"
    cat > "$T/tinyproxy-$1.conf" <<EOF
Port $TP_PORT
Listen 127.0.0.1
Timeout 600
MaxClients 20000
Allow 127.0.0.1
ConnectPort $ECHO
ConnectPort $HOLD
ConnectPort $SINK
ConnectPort $SRC
Syslog Off
LogFile "$T/tinyproxy-$1.log"
LogLevel $TINYPROXY_LOGLEVEL
Filter "$T/tinyproxy.filter"
FilterType ere
FilterDefaultDeny No
EOF
    "${PROXY_CPU[@]}" tinyproxy -d -c "$T/tinyproxy-$1.conf" > "$T/tinyproxy-$1.err" 2>&1 & TP_PID=$!
    PIDS+=($TP_PID)
    wait_port "$TP_PORT"
}

# start_microsocks NAME: sets MS_PID and MS_PORT.
start_microsocks() {
    MS_PORT=$(free_port)
    "${PROXY_CPU[@]}" microsocks -i 127.0.0.1 -p "$MS_PORT" > "$T/microsocks-$1.log" 2>&1 & MS_PID=$!
    PIDS+=($MS_PID)
    wait_port "$MS_PORT"
}

stop() { kill "$1" 2>/dev/null; wait "$1" 2>/dev/null; }

if [ -n "$BASELINE" ]; then
    SL_BIN=$BASELINE start_sluice base
    BASE_PID=$SL_PID BASE_HTTP=$SL_HTTP BASE_SOCKS=$SL_SOCKS
fi
start_sluice main
[ "$HAVE_TINYPROXY" = 1 ] && start_tinyproxy main
[ "$HAVE_MICROSOCKS" = 1 ] && start_microsocks main

# Rows: NAME|PID|ENDPOINT|VIA KIND (empty: direct)
ROWS=("direct||tcp:127.0.0.1:$ECHO|" "sluice CONNECT|$SL_PID|tcp:127.0.0.1:$SL_HTTP|http"
      "sluice SOCKS5|$SL_PID|tcp:127.0.0.1:$SL_SOCKS|socks5")
[ -n "$BASELINE" ] && ROWS+=("baseline CONNECT|$BASE_PID|tcp:127.0.0.1:$BASE_HTTP|http"
                             "baseline SOCKS5|$BASE_PID|tcp:127.0.0.1:$BASE_SOCKS|socks5")
[ "$HAVE_TINYPROXY" = 1 ] && ROWS+=("tinyproxy CONNECT|$TP_PID|tcp:127.0.0.1:$TP_PORT|http")
[ "$HAVE_MICROSOCKS" = 1 ] && ROWS+=("microsocks SOCKS5|$MS_PID|tcp:127.0.0.1:$MS_PORT|socks5")

T0=$(date +%s)
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
STEAL0=$(awk '/^cpu / { print $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat)
# one_test TEST ROW PID ENDPOINT KIND: one measurement of one row.
one_test() {
    local t=$1 row=$2 pid=$3 ep=$4 kind=$5 c
    case $t in
        up|down)
            local origin=$SINK extra=()
            [ "$t" = down ] && origin=$SRC extra=(--download)
            if [ -z "$kind" ]; then
                run "$row" "$t" "" bulk "tcp:127.0.0.1:$origin" --bytes "$BULK_BYTES" "${extra[@]}"
            else
                run "$row" "$t" "$pid" bulk "$ep" --proxy "$kind" --target "127.0.0.1:$origin" \
                    --bytes "$BULK_BYTES" "${extra[@]}"
            fi ;;
        c1|c64|c512) # (b) open + 100-byte echo + EOF + close
            c=${t#c}
            if [ -z "$kind" ]; then
                run "$row" "$t" "" rate "$ep" --clients "$c" --seconds "$RATE_SECONDS" --latency --wait-eof
            else
                run "$row" "$t" "$pid" rate "$ep" --proxy "$kind" --target "127.0.0.1:$ECHO" \
                    --clients "$c" --seconds "$RATE_SECONDS" --latency --wait-eof
            fi ;;
        http1|http64) # (c) HTTP proxies and direct only
            c=${t#http}
            if [ -z "$kind" ]; then
                run "$row" "$t" "" http "tcp:127.0.0.1:$HTTPO" --target "127.0.0.1:$HTTPO" \
                    --clients "$c" --seconds "$RATE_SECONDS"
            elif [ "$kind" = http ]; then
                run "$row" "$t" "$pid" http "$ep" --proxy http --target "127.0.0.1:$HTTPO" \
                    --clients "$c" --seconds "$RATE_SECONDS"
            fi ;;
        deny) # (e) HTTP proxies only; direct's reference is c64
            [ "$kind" = http ] && run "$row" deny "$pid" rate "$ep" --proxy http \
                --target "denied.example:$ECHO" --expect-deny --clients 64 --seconds "$RATE_SECONDS" \
                --latency --wait-eof ;;
    esac
}
# Interleaved: every test runs for all rows back to back, round after round,
# so a burst of outside load hits one cell of each row, not one row.
for round in $(seq 1 "$ROUNDS"); do
    for t in up down c1 c64 c512 http1 http64 deny; do
        for spec in "${ROWS[@]}"; do
            IFS='|' read -r row pid ep kind <<< "$spec"
            one_test "$t" "$row" "$pid" "$ep" "$kind"
        done
    done
    log "round $round/$ROUNDS done ($(( $(date +%s) - T0 ))s)"
done
LOAD1=$(cut -d' ' -f1-3 /proc/loadavg) # before the idle threads of (d) inflate it
STEAL1=$(awk '/^cpu / { print $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat)

# (d) idle tunnels: one fresh proxy at a time.
# idle_run ROW PID PORT KIND: PSS before/after IDLE_COUNT tunnels.
idle_run() {
    local row=$1 pid=$2 port=$3 kind=$4 before after i lpid fds
    sleep 0.5
    before=$(pss_kb "$pid")
    "${LOAD_CPU[@]}" "$LOADGEN" idle "tcp:127.0.0.1:$port" --proxy "$kind" --target "127.0.0.1:$HOLD" \
        --count "$IDLE_COUNT" --parallel 128 --size 100 > "$T/idle.out" 2>"$T/idle.err" & lpid=$!
    for i in $(seq 1 1200); do
        grep -q '^idle tunnels=' "$T/idle.out" 2>/dev/null && break
        kill -0 "$lpid" 2>/dev/null || break
        sleep 0.1
    done
    sleep 1 # let the proxy finish what the last echoes started
    after=$(pss_kb "$pid")
    fds=$(ls "/proc/$pid/fd" | wc -l)
    put "$row" idle_proxy_threads "$(awk '/^Threads:/ { print $2 }' "/proc/$pid/status")"
    kill "$lpid" 2>/dev/null; wait "$lpid" 2>/dev/null
    put "$row" idle_n "$IDLE_COUNT"
    put "$row" idle_pss_before_kb "$before"
    put "$row" idle_pss_after_kb "$after"
    put "$row" idle_proxy_fds "$fds"
    for kv in $(cat "$T/idle.out"); do
        case $kv in tunnels=*|errors=*|pending=*|seconds=*|closed_while_idle=*) put "$row" "idle_${kv%%=*}" "${kv#*=}" ;; esac
    done
    grep -q '^idle tunnels=' "$T/idle.out" || log "$row idle: $(cat "$T/idle.err")"
    log "$row idle done: $(head -1 "$T/idle.out")"
}
stop "$SL_PID"
[ -n "$BASELINE" ] && stop "$BASE_PID"
[ "$HAVE_TINYPROXY" = 1 ] && stop "$TP_PID"
[ "$HAVE_MICROSOCKS" = 1 ] && stop "$MS_PID"
start_sluice idle "$SETTINGS_DEFAULT" 1024
idle_run "sluice CONNECT" "$SL_PID" "$SL_HTTP" http
put "sluice CONNECT" idle_max_connections "$(grep -m1 -o 'maxConnections [0-9]*' "$T/sluice-idle.log" | cut -d' ' -f2)"
stop "$SL_PID"
start_sluice idle2 "$SETTINGS_DEFAULT" 1024
idle_run "sluice SOCKS5" "$SL_PID" "$SL_SOCKS" socks5
stop "$SL_PID"
if [ -n "$BASELINE" ]; then
    SL_BIN=$BASELINE start_sluice base-idle "$SETTINGS" "$(ulimit -Hn)"
    idle_run "baseline CONNECT" "$SL_PID" "$SL_HTTP" http
    stop "$SL_PID"
    SL_BIN=$BASELINE start_sluice base-idle2 "$SETTINGS" "$(ulimit -Hn)"
    idle_run "baseline SOCKS5" "$SL_PID" "$SL_SOCKS" socks5
    stop "$SL_PID"
fi
if [ "$HAVE_TINYPROXY" = 1 ]; then
    start_tinyproxy idle
    idle_run "tinyproxy CONNECT" "$TP_PID" "$TP_PORT" http
    stop "$TP_PID"
fi
if [ "$HAVE_MICROSOCKS" = 1 ]; then
    start_microsocks idle
    idle_run "microsocks SOCKS5" "$MS_PID" "$MS_PORT" socks5
    stop "$MS_PID"
fi
# (f) --workers 1 vs 2: the proxy may use both CPUs (the load generator
# stays on CPU 1), ROUNDS runs each; accepts per worker from /metrics.
for W in 1 2; do
    start_sluice "w$W" "$SETTINGS" "$(ulimit -Sn)" "$W" 0,1
    for round in $(seq 1 "$ROUNDS"); do
        run "sluice --workers $W" w64 "$SL_PID" rate "tcp:127.0.0.1:$SL_HTTP" --proxy http \
            --target "127.0.0.1:$ECHO" --clients 64 --seconds "$RATE_SECONDS" --latency --wait-eof
    done
    for w in $(seq 0 $((W - 1))); do
        put "sluice --workers $W" "w64_accepts_w$w" "$(curl -s "http://127.0.0.1:$SL_ADMIN/metrics" |
            awk -v k="sluice_worker_connections_total{worker=\"$w\"}" '$1 == k { print $2 }')"
    done
    stop "$SL_PID"
done
log "all done ($(( $(date +%s) - T0 ))s)"

# ---------------------------------------------------------------------------
# Report

put meta date "$(date +%F)"
put meta nproc "$(nproc)"
put meta kernel "$(uname -r)"
put meta cpu "$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
put meta pinning "${PROXY_CPU[*]:-unpinned} proxy / ${LOAD_CPU[*]:-unpinned} load"
put meta bulk_bytes "$BULK_BYTES"
put meta rate_seconds "$RATE_SECONDS"
put meta rounds "$ROUNDS"
put meta fd_limit "$FD_LIMIT"
put meta idle_requested "$IDLE_N"
put meta tinyproxy_loglevel "$TINYPROXY_LOGLEVEL"
put meta steal_pct "$(awk -v a="$STEAL0" -v b="$STEAL1" 'BEGIN { split(a, x, " "); split(b, y, " "); if (y[2] > x[2]) printf "%.1f", 100 * (y[1] - x[1]) / (y[2] - x[2]); else print 0 }')"
put meta loadavg "before: $LOAD0; after the rounds: $LOAD1"
put meta sluice_log "$([ "$SLUICE_LOG" = /dev/null ] && echo /dev/null || echo file)"
put meta tinyproxy "$(tinyproxy -v 2>/dev/null | head -1)"
put meta microsocks "$(dpkg-query -W -f='${Version}' microsocks 2>/dev/null)"
put meta sluice "$("$SLUICE" --version 2>/dev/null | head -1) ($SLUICE)"
[ -n "$BASELINE" ] && put meta baseline "$("$BASELINE" --version 2>/dev/null | head -1) ($BASELINE)"

OUT=${JSON:-$T/results.json}
report "$RES" "$OUT"
rc=$?
if [ -z "$JSON" ] && [ "$rc" = 0 ]; then
    cp "$OUT" ./bench-proxy.json && log "JSON: ./bench-proxy.json"
else
    [ "$rc" = 0 ] && log "JSON: $OUT"
fi
exit "$rc"
