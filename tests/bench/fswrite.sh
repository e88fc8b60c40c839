#!/usr/bin/env bash
# tests/bench/fswrite.sh - the cost of the write report (sandbox/fswatch.c):
# write-heavy commands under `sluice run` with the report (--report-writes),
# as run by default (the report off since issue 25) and with --quiet (no
# summary at all), interleaved, ROUNDS rounds, the median wall time and CPU
# time (user + system of sluice, bwrap and the command) of each, and each
# over the quiet run (issue 25's goal: the default <= 1.1x the quiet run's
# CPU). CPU time is the steadier number on a loaded machine. Run by hand;
# nothing is asserted.
#   bash tests/bench/fswrite.sh build/sluice
# FILES (default 10000) small files in the tarball; the git row clones a
# local repository of that many files (git clone --no-hardlinks).
set -euo pipefail
SLUICE=${1:?usage: fswrite.sh PATH/TO/sluice}
case $SLUICE in /*) ;; *) SLUICE=$(cd "$(dirname "$SLUICE")" && pwd)/$(basename "$SLUICE") ;; esac
FILES=${FILES:-10000} ROUNDS=${ROUNDS:-5}
D=$(mktemp -d "${TMPDIR:-/tmp}/sluice-bench-fsw.XXXXXX")
trap 'rm -rf "$D"' EXIT
W=$D/work
mkdir -p "$W/src"
cd "$W/src"
for ((i = 0; i < FILES; i++)); do
    [ $((i % 100)) -eq 0 ] && mkdir -p "d$((i / 100))"
    echo "$i" > "d$((i / 100))/f$i"
done
cd "$W"
tar cf t.tar src
git -C src init -q && git -C src add -A && git -C src -c gc.auto=0 -c maintenance.auto=false -c user.email=b@b -c user.name=b commit -qm b  # no background gc deleting loose objects while clone copies them
# run NAME CMD...: appends wall and CPU ms to T[NAME] and C[NAME]
run() {
    local name=$1 t
    shift
    t=$( { TIMEFORMAT='%R %U %S'; time "$@" >/dev/null 2>&1; } 2>&1)
    read -r wall usr sys <<< "$t"
    T[$name]+="$(awk -v w="$wall" 'BEGIN {printf "%d", w * 1000}') "
    C[$name]+="$(awk -v u="$usr" -v s="$sys" 'BEGIN {printf "%d", (u + s) * 1000}') "
}
median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
declare -A T C
MODES="report default quiet"
for ((r = 0; r < ROUNDS; r++)); do
    for mode in $MODES; do
        case $mode in report) q=--report-writes ;; default) q= ;; quiet) q=--quiet ;; esac
        rm -rf out; mkdir out
        run untar-$mode "$SLUICE" run $q -- tar xf t.tar -C out
        rm -rf clone
        run clone-$mode "$SLUICE" run $q -- git clone -q --no-hardlinks src clone
    done
done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", (b > 0 ? a / b : 0)}'; }
printf '%-16s %-8s %10s %10s %11s %11s\n' "command ($FILES)" mode "wall ms" "cpu ms" "wall/quiet" "cpu/quiet"
for c in untar clone; do
    wq=$(tr ' ' '\n' <<< "${T[$c-quiet]}" | grep . | median)
    cq=$(tr ' ' '\n' <<< "${C[$c-quiet]}" | grep . | median)
    for mode in $MODES; do
        w=$(tr ' ' '\n' <<< "${T[$c-$mode]}" | grep . | median)
        cp=$(tr ' ' '\n' <<< "${C[$c-$mode]}" | grep . | median)
        printf '%-16s %-8s %10s %10s %11s %11s\n' "$c" "$mode" "$w" "$cp" "$(ratio "$w" "$wq")" \
            "$(ratio "$cp" "$cq")"
    done
done
echo "# goal (issue 25): default cpu/quiet <= 1.10"
echo "# medians of $ROUNDS interleaved rounds; load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# wall: $(for k in "${!T[@]}"; do printf '%s=[%s] ' "$k" "${T[$k]% }"; done)"
echo "# cpu:  $(for k in "${!C[@]}"; do printf '%s=[%s] ' "$k" "${C[$k]% }"; done)"
