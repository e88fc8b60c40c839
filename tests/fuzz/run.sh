#!/usr/bin/env bash
# tests/fuzz/run.sh [-j N] [--merge] [--only NAME[,NAME...]] [SECONDS]
#
# Builds the libFuzzer harnesses (clang, -DSLUICE_FUZZ=ON -DSLUICE_SANITIZE=ON)
# in $SLUICE_FUZZ_BUILD (default build-fuzz in the repository), then runs each
# fuzzer for SECONDS (default 60) on its committed corpus, one after the other
# (-j N or FUZZ_JOBS=N: N at once). New inputs go to a scratch directory in the
# build dir, never to the committed corpus; crashes go to
# BUILD/fuzz-out/NAME/artifacts/ and their paths are printed. At the end a
# table: executions, exec/s, coverage (cov: edges, ft: features from
# libFuzzer's last status line), corpus size, crashes. Exits 1 if any fuzzer
# crashed (or failed to run).
#   --merge   afterwards merge the new inputs that add coverage into the
#             committed corpus (libFuzzer -merge=1 -use_counters=0: new edges
#             only, which keeps the corpus small)
#   --only    run only these harnesses (http_head socks5 rules settings endpoint)
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BUILD=${SLUICE_FUZZ_BUILD:-$REPO/build-fuzz}
JOBS=${FUZZ_JOBS:-1}
MERGE=0
SECONDS_EACH=60
ALL="http_head socks5 rules settings endpoint"
ONLY=$ALL

usage() { sed -n '2,/^set -euo/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; exit 2; }
while [ $# -gt 0 ]; do
    case "$1" in
    -j) JOBS=${2:?-j needs a number}; shift 2 ;;
    -j*) JOBS=${1#-j}; shift ;;
    --merge) MERGE=1; shift ;;
    --only) ONLY=$(printf '%s' "${2:?--only needs names}" | tr ',' ' '); shift 2 ;;
    -h | --help) usage ;;
    [0-9]*) SECONDS_EACH=$1; shift ;;
    *) echo "run.sh: unknown argument '$1'" >&2; usage ;;
    esac
done
case "$JOBS" in '' | *[!0-9]* | 0) echo "run.sh: bad job count '$JOBS'" >&2; exit 2 ;; esac
for n in $ONLY; do
    case " $ALL " in *" $n "*) ;; *) echo "run.sh: no harness '$n' (have: $ALL)" >&2; exit 2 ;; esac
done

command -v clang >/dev/null || { echo "run.sh: clang is needed (apt-get install clang)" >&2; exit 2; }

# dictionary per harness (none for socks5)
dict_of() {
    case "$1" in
    http_head) echo "$HERE/http.dict" ;;
    rules) echo "$HERE/rules.dict" ;;
    settings) echo "$HERE/settings.dict" ;;
    endpoint) echo "$HERE/endpoint.dict" ;;
    *) echo "" ;;
    esac
}

PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
}
trap cleanup EXIT
trap 'echo "run.sh: interrupted" >&2; exit 130' INT TERM

echo "run.sh: configuring and building $BUILD"
CC=clang cmake -S "$REPO" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSLUICE_FUZZ=ON \
    -DSLUICE_SANITIZE=ON -DSLUICE_WERROR=ON >"$BUILD.configure.log" 2>&1 ||
    { cat "$BUILD.configure.log" >&2; exit 2; }
targets=()
for n in $ONLY; do targets+=(--target "fuzz_$n"); done
cmake --build "$BUILD" -j "${FUZZ_BUILD_JOBS:-2}" "${targets[@]}" >"$BUILD.build.log" 2>&1 ||
    { tail -40 "$BUILD.build.log" >&2; exit 2; }

OUTDIR=$BUILD/fuzz-out
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# run_one NAME: one fuzzer; its log and status in OUTDIR/NAME/
run_one() {
    local n=$1 d=$OUTDIR/$1 dict
    rm -rf "$d/new" "$d/artifacts" "$d/log" "$d/status"
    mkdir -p "$d/new" "$d/artifacts"
    dict=$(dict_of "$n")
    local args=(-max_total_time="$SECONDS_EACH" -print_final_stats=1 -timeout=10
        -rss_limit_mb=2560 -artifact_prefix="$d/artifacts/")
    [ -n "$dict" ] && args+=(-dict="$dict")
    local rc=0
    # the fuzzer stops at max_total_time; the outer timeout only guards a hang
    timeout -k 10 $((SECONDS_EACH + 300)) "$BUILD/tests/fuzz/fuzz_$n" "${args[@]}" \
        "$d/new" "$HERE/corpus/$n" >"$d/log" 2>&1 || rc=$?
    echo "$rc" >"$d/status"
}

echo "run.sh: $SECONDS_EACH s per harness, $JOBS at once: $ONLY"
running=0
for n in $ONLY; do
    echo "run.sh: fuzz_$n ..."
    run_one "$n" &
    PIDS+=($!)
    running=$((running + 1))
    if [ "$running" -ge "$JOBS" ]; then
        wait -n || true
        running=$((running - 1))
    fi
done
wait || true
PIDS=()

fail=0
printf '\n%-10s %12s %9s %7s %8s %8s %8s  %s\n' harness executions exec/s cov ft corpus crashes status
for n in $ONLY; do
    d=$OUTDIR/$n
    log=$d/log
    st=$(cat "$d/status" 2>/dev/null || echo "?")
    last=$(grep -E '^#[0-9]+' "$log" | grep 'cov:' | tail -1 || true)
    cov=$(printf '%s' "$last" | sed -n 's/.*cov: \([0-9]*\).*/\1/p')
    ft=$(printf '%s' "$last" | sed -n 's/.* ft: \([0-9]*\).*/\1/p')
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    eps=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    corpus=$(($(find "$HERE/corpus/$n" -type f | wc -l) + $(find "$d/new" -type f | wc -l)))
    crashes=$(find "$d/artifacts" -type f | wc -l)
    status=ok
    if [ "$st" != 0 ] || [ "$crashes" -gt 0 ]; then
        status="FAILED (exit $st)"
        fail=1
    fi
    printf '%-10s %12s %9s %7s %8s %8s %8s  %s\n' "$n" "${execs:-?}" "${eps:-?}" "${cov:-?}" \
        "${ft:-?}" "$corpus" "$crashes" "$status"
done
echo "(corpus: committed + new this run; logs and new inputs in $OUTDIR/NAME/)"

for n in $ONLY; do
    for a in "$OUTDIR/$n"/artifacts/*; do
        [ -e "$a" ] || continue
        echo "crash: $a"
        echo "  reproduce: $BUILD/tests/fuzz/fuzz_$n $a"
        echo "  keep it:   cp $a $HERE/corpus/$n/crash-WHAT (after the fix)"
    done
    if [ "$(cat "$OUTDIR/$n/status" 2>/dev/null)" != 0 ]; then
        echo "--- fuzz_$n: last lines of $OUTDIR/$n/log"
        grep -v '^#[0-9]' "$OUTDIR/$n/log" | tail -25
    fi
done

if [ "$MERGE" = 1 ]; then
    for n in $ONLY; do
        before=$(find "$HERE/corpus/$n" -type f | wc -l)
        timeout -k 10 600 "$BUILD/tests/fuzz/fuzz_$n" -merge=1 -use_counters=0 "$HERE/corpus/$n" "$OUTDIR/$n/new" \
            >"$OUTDIR/$n/merge.log" 2>&1 || { echo "run.sh: merge of $n failed (see $OUTDIR/$n/merge.log)" >&2; fail=1; }
        after=$(find "$HERE/corpus/$n" -type f | wc -l)
        echo "merge: $n $before -> $after files"
    done
fi
exit "$fail"
