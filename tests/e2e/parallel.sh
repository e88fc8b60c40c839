#!/usr/bin/env bash
# tests/e2e/parallel.sh - many `sluice run` at once in one git repository
# (issue 21, item 9): LOOPS loops side by side, each running
# `sluice run -q -c true` ROUNDS times in the same working directory, while
# one more loop starts runs and kills their launcher with SIGKILL at a
# random moment (before the sandbox, during its start, while the command
# runs). Every run that was not killed must exit 0, and afterwards the
# working tree is byte for byte what it was (every path, type, mode and
# file hash, .git included), `git status --porcelain --ignored` is empty and
# no run directory is left. Run as root it runs again as an unprivileged
# user (run-helpers/twice.sh).
#
# SLUICE_PARALLEL_LOOPS (8) and SLUICE_PARALLEL_ROUNDS (12 here, so ctest
# stays short; the issue's full check is ROUNDS=200) and
# SLUICE_PARALLEL_KILLS (12) set the sizes.
set -uo pipefail
SLUICE=${1:?usage: parallel.sh PATH/TO/sluice}
case $SLUICE in /*) ;; *) SLUICE=$(cd "$(dirname "$SLUICE")" && pwd)/$(basename "$SLUICE") ;; esac
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/lib.sh"
. "$HERE/run-helpers/twice.sh"

LOOPS=${SLUICE_PARALLEL_LOOPS:-8}
ROUNDS=${SLUICE_PARALLEL_ROUNDS:-12}
KILLS=${SLUICE_PARALLEL_KILLS:-12}

# Every path below DIR with its type and mode, and every file's hash.
fingerprint() {
    (cd "$1" && find . -printf '%p %y %m %s %l\n' && find . -type f -exec sha256sum {} + |
        awk '{ print $2, "sha256", $1 }') | LC_ALL=C sort
}

# loop N: ROUNDS runs; a failed one leaves its status and output in $T/fail.N.I
run_loop() {
    local n=$1 i out rc
    for ((i = 0; i < ROUNDS; i++)); do
        out=$(cd "$W" && "$SLUICE" run -q -c true 2>&1 </dev/null)
        rc=$?
        [ $rc -eq 0 ] || printf 'exit %s: %s\n' "$rc" "$out" >"$T/fail.$n.$i"
    done
}

# KILLS runs whose launcher is killed with SIGKILL after 0 to 0.6 s
kill_loop() {
    local i pid
    for ((i = 0; i < KILLS; i++)); do
        (cd "$W" && exec "$SLUICE" run -q -c 'sleep 5') >/dev/null 2>&1 </dev/null &
        pid=$!
        sleep "0.$((RANDOM % 7))$((RANDOM % 10))"
        kill -KILL "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
}

# Waits (bounded) until the killed runs' reapers have cleaned up: nothing
# left in the run-directory parent. Not a check of how long it takes.
wait_clean() {
    local i
    for ((i = 0; i < 300; i++)); do
        [ -z "$(ls -A "$XDG_RUNTIME_DIR" 2>/dev/null)" ] && return 0
        sleep 0.1
    done
    return 1
}

cases() {
    local W=$T/repo fp1 fp2 n st nfail
    export XDG_RUNTIME_DIR=$T/xdg
    mkdir -p -m 700 "$XDG_RUNTIME_DIR"
    mkdir -p "$W"
    git -c init.defaultBranch=main init -q "$W"
    echo 'hello' >"$W/README"
    mkdir -p "$W/src" && echo 'int main(void) { return 0; }' >"$W/src/main.c"
    git -C "$W" add -A
    git -C "$W" -c user.email=t@t -c user.name=t commit -q -m init
    git -C "$W" status --porcelain --ignored >/dev/null # the index settled before the fingerprint
    fp1=$(fingerprint "$W")

    rm -f "$T"/fail.*
    for ((n = 0; n < LOOPS; n++)); do
        run_loop "$n" &
        PIDS+=($!)
    done
    kill_loop &
    PIDS+=($!)
    wait
    PIDS=()

    nfail=$(find "$T" -maxdepth 1 -name 'fail.*' | wc -l)
    [ "$nfail" -eq 0 ] && ok "$((LOOPS * ROUNDS)) runs in $LOOPS parallel loops (and $KILLS killed with SIGKILL): every one exited 0" ||
        bad "$nfail of $((LOOPS * ROUNDS)) parallel runs failed" "$(cat "$T"/fail.* | sort | uniq -c | sort -rn | head -8)"
    wait_clean
    [ -z "$(ls -A "$XDG_RUNTIME_DIR")" ] && ok "no run directory left" ||
        bad "run directories left" "$(ls -laR "$XDG_RUNTIME_DIR" | head -20)"
    fp2=$(fingerprint "$W")
    [ "$fp1" = "$fp2" ] && ok "the working tree is byte for byte what it was" ||
        bad "the working tree changed" "$(diff <(echo "$fp1") <(echo "$fp2") | head -20)"
    st=$(git -C "$W" status --porcelain --ignored 2>&1)
    [ -z "$st" ] && ok "git status --porcelain --ignored is empty" || bad "git status" "$st"
}

e2e_twice cases "$HERE/parallel.sh" "$SLUICE"
e2e_finish
