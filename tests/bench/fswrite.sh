#!/usr/bin/env bash
# tests/bench/fswrite.sh - the cost of the write report (sandbox/fswatch.c):
# write-heavy commands under `sluice run` with the report (the default) and
# without it (--quiet, which loads no write rules), interleaved, ROUNDS
# rounds, the median wall time and CPU time (user + system of sluice, bwrap
# and the command) of each. CPU time is the steadier number on a loaded
# machine. Run by hand; nothing is asserted.
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
for ((r = 0; r < ROUNDS; r++)); do
    for mode in watch quiet; do
        q=; [ $mode = quiet ] && q=--quiet
        rm -rf out; mkdir out
        run untar-$mode "$SLUICE" run $q -- tar xf t.tar -C out
        rm -rf clone
        run clone-$mode "$SLUICE" run $q -- git clone -q --no-hardlinks src clone
    done
done
printf '%-22s %12s %12s %7s %12s %12s %7s\n' "command ($FILES files)" "wall report" "wall quiet" "ratio" \
    "cpu report" "cpu quiet" "ratio"
for c in untar clone; do
    w=$(tr ' ' '\n' <<< "${T[$c-watch]}" | grep . | median)
    q=$(tr ' ' '\n' <<< "${T[$c-quiet]}" | grep . | median)
    cw=$(tr ' ' '\n' <<< "${C[$c-watch]}" | grep . | median)
    cq=$(tr ' ' '\n' <<< "${C[$c-quiet]}" | grep . | median)
    printf '%-22s %10sms %10sms %7s %10sms %10sms %7s\n' "$c" "$w" "$q" \
        "$(awk -v a="$w" -v b="$q" 'BEGIN {printf "%.2f", a / b}')" "$cw" "$cq" \
        "$(awk -v a="$cw" -v b="$cq" 'BEGIN {printf "%.2f", a / b}')"
done
echo "# medians of $ROUNDS interleaved rounds; load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# wall: $(for k in "${!T[@]}"; do printf '%s=[%s] ' "$k" "${T[$k]% }"; done)"
echo "# cpu:  $(for k in "${!C[@]}"; do printf '%s=[%s] ' "$k" "${C[$k]% }"; done)"
