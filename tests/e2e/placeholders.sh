#!/usr/bin/env bash
# tests/e2e/placeholders.sh - rt-5 (red team, issue 21 items 6 and 9):
# a sandboxed command attacks the clean-up of the empty mount points
# ("placeholders") another run made, and the run-directory parent and its
# lock. Each case asserts the SAFE outcome; a case marked "HOLE (rt-5)"
# fails while the hole is open. Run as root it runs again as an
# unprivileged user (run-helpers/twice.sh).
set -uo pipefail
SLUICE=${1:?usage: placeholders.sh PATH/TO/sluice}
case $SLUICE in /*) ;; *) SLUICE=$(cd "$(dirname "$SLUICE")" && pwd)/$(basename "$SLUICE") ;; esac
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/lib.sh"
. "$HERE/run-helpers/twice.sh"

# wait_file PATH [TENTHS]: until PATH exists (bounded)
wait_file() {
    local i
    for ((i = 0; i < ${2:-100}; i++)); do
        [ -e "$1" ] && return 0
        sleep 0.1
    done
    return 1
}

cases() {
    local W=$T/proj A O out rc bpid apid
    export XDG_RUNTIME_DIR=$T/xdg
    mkdir -p -m 700 "$XDG_RUNTIME_DIR"

    # 1. HOLE (rt-5): run A works in PROJ/node_modules/pkg, run B in PROJ.
    # A's placeholders (PROJ/node_modules/pkg/.bashrc, .git, .vscode, ...)
    # are not in B's scan (node_modules is skipped, as is anything deeper
    # than mandatoryDenySearchDepth), so nothing above them is pinned in
    # B's sandbox and B's record does not hold them. B's command renames
    # node_modules away and puts a symbolic link to a directory outside in
    # its place; A's clean-up (sb_rundir_remove -> sweep -> clean_dead ->
    # remove_placeholder: lstat/unlink/rmdir by full path) follows the link
    # and removes the empty file and the empty directory there.
    # Reproducer by hand:
    #   mkdir -p P/node_modules/pkg O/pkg/.vscode; : > O/pkg/.bashrc
    #   (cd P/node_modules/pkg && sluice run -c 'sleep 3') &
    #   sleep 1; (cd P && sluice run -c 'mv node_modules nm2; ln -s O node_modules')
    #   wait; ls -a O/pkg     # .bashrc and .vscode are gone
    A=$W/node_modules/pkg O=$T/outside
    mkdir -p "$A" "$O/pkg/.vscode"
    : >"$O/pkg/.bashrc"
    echo keep >"$O/pkg/.profile" # not empty: must survive in any case
    (cd "$A" && exec "$SLUICE" run -q -c 'sleep 4') >"$T/a.out" 2>&1 </dev/null &
    apid=$!
    if wait_file "$A/.bashrc" 50; then
        out=$(cd "$W" && "$SLUICE" run -q -c "mv node_modules nm2 && ln -s '$O' node_modules && echo moved" 2>&1 </dev/null)
        rc=$?
        wait $apid
        if [ $rc -ne 0 ]; then
            ok "placeholders: B cannot move away the directory above A's placeholders (exit $rc: $out)"
        elif [ -f "$O/pkg/.bashrc" ] && [ -d "$O/pkg/.vscode" ]; then
            ok "placeholders: A's clean-up does not follow a link B put above its placeholders"
        else
            bad "HOLE (rt-5): A's clean-up follows a symbolic link that a parallel run B's command put in place of a directory above A's placeholders, and removes an empty file/directory outside the project" \
                "$(ls -la "$O/pkg" 2>&1)"
        fi
        # the placeholders A made are now in nm2, left behind
        left=$(cd "$W" && find nm2 -mindepth 2 2>/dev/null)
        # Known gap (rt-5 1b, not counted): A's clean-up looks for its
        # placeholders where it made them; a parallel run's command that
        # moved a directory above them leaves them, empty, where it moved
        # them (clutter in a tree that command could write anyway; nothing
        # outside the project is touched, case above)
        if [ -z "$left" ]; then
            echo "ok - nothing of A left behind after B moved its directory # TODO was a known gap: now closed, make it a case"
        else
            echo "not ok - A's placeholders are left behind when a parallel run moved the directory above them # TODO known gap, still open"
        fi
    else
        bad "placeholders: run A never made its placeholder .bashrc" "$(cat "$T/a.out")"
        wait $apid
    fi
    rm -rf "$W" "$O"

    # 2. the run-directory parent and its lock are out of the command's
    # reach: the sandbox sees an empty tmpfs there, and a command holding
    # a flock on what it sees does not block another run
    mkdir -p "$W"
    out=$(cd "$W" && "$SLUICE" run -q -c 'ls -A "$XDG_RUNTIME_DIR/sluice" 2>/dev/null | wc -l' 2>&1 </dev/null)
    [ "$out" = 0 ] && ok "rundir: the command sees nothing of the run-directory parent" ||
        bad "rundir: the command sees the run-directory parent" "$out"
    (cd "$W" && exec "$SLUICE" run -q -c 'd=$XDG_RUNTIME_DIR/sluice; mkdir -p "$d" 2>/dev/null; exec flock "$d" sleep 6 2>/dev/null || exec flock "$XDG_RUNTIME_DIR" sleep 6') >/dev/null 2>&1 </dev/null &
    bpid=$!
    sleep 1
    out=$(cd "$W" && timeout 20 "$SLUICE" run -q -c 'echo second' 2>&1 </dev/null)
    [ "$out" = second ] && ok "rundir: a command holding a flock on what it sees as the run directory does not block another run" ||
        bad "rundir: another run blocked or failed while a command holds a flock" "$out"
    wait $bpid

    # 3. a fake run record planted in the working tree (outside PARENT)
    # is never read: a file named like a record naming a host file
    mkdir -p "$W/run.1.1.x" "$O"
    : >"$O/victim"
    printf 'sluice-run 1 1 1 0 0\n%s\0' "$O/victim" >"$W/run.1.1.x/sluice-run"
    (cd "$W" && "$SLUICE" run -q -c true) </dev/null >/dev/null 2>&1
    [ -e "$O/victim" ] && ok "rundir: a fake run record in the working tree is not acted on" ||
        bad "rundir: a fake run record in the working tree removed a host file"
    rm -rf "$W" "$O"

    # 4. item 13: a .GIT file (a "gitdir:" pointer, upper case), and a
    # .bashrc that is a link to a file inside the project: neither writable
    mkdir -p "$W/x"
    echo 'gitdir: /nowhere' >"$W/.GIT"
    echo '# rc' >"$W/x/real"
    ln -s x/real "$W/.bashrc"
    out=$(cd "$W" && "$SLUICE" run -q -c 'echo "gitdir: /tmp/evil" > .GIT; echo evil >> .bashrc; echo evil >> x/real; rm -f .GIT .bashrc' 2>&1 </dev/null)
    [ "$(cat "$W/.GIT")" = 'gitdir: /nowhere' ] && ok "item 13: a .GIT gitdir file is read-only" ||
        bad "item 13: .GIT written" "$out; $(cat "$W/.GIT")"
    [ "$(cat "$W/x/real")" = '# rc' ] && ok "item 13: the target of a .bashrc link inside the project is read-only" ||
        bad "item 13: written through the .bashrc link" "$out; $(cat "$W/x/real")"
    rm -rf "$W"
}

e2e_twice cases "$HERE/placeholders.sh" "$SLUICE"
e2e_finish
