#!/usr/bin/env bash
# tests/e2e/fswrite.sh - the write denials in `sluice run --report-writes`'s
# summary (issue 15, sandbox/fswatch.c; off by default since issue 25, and
# then no write reaches the host while the sandbox refuses the same): writes to a read-only path, a protected file and a
# denyWrite path are reported with their reason and counted; writes to the
# working directory and /tmp, reads, an O_CREAT open of an existing file and
# writes to /dev/null are not; ignoreViolations hides entries (for every
# command or by command); --quiet prints nothing; a command that writes
# nothing forbidden prints no write line; the write line and the connection
# line both appear; transparent mode and the write report share the one
# seccomp listener. Run as root it runs every case again as an unprivileged
# user (run-helpers/twice.sh).
set -uo pipefail
SLUICE=${1:?usage: fswrite.sh PATH/TO/sluice}
case $SLUICE in /*) ;; *) SLUICE=$(cd "$(dirname "$SLUICE")" && pwd)/$(basename "$SLUICE") ;; esac
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/lib.sh"
. "$HERE/run-helpers/twice.sh"

cases() {
    local W=$T/work S=$T/s.json out line P n
    export XDG_RUNTIME_DIR=$T/xdg
    mkdir -p -m 700 "$XDG_RUNTIME_DIR"
    mkdir -p "$W/dw" "$W/.git/hooks" "$W/sub"
    cd "$W" || return
    touch .bashrc dw/f
    cat > "$S" <<JSON
{"filesystem": {"denyWrite": ["$W/dw"]}}
JSON
    sr() { "$SLUICE" run --report-writes --settings "$S" "$@"; }
    wline() { grep '^sluice: blocked [0-9]* write' <<< "$1"; }

    # --- reported, with the reason ------------------------------------------------------
    out=$(sr -- sh -c 'echo x > /etc/passwd; echo y >> /etc/passwd; mkdir /usr/sluice-fsw-dir' 2>&1)
    line=$(wline "$out")
    [ "$line" = "sluice: blocked 3 writes: /etc/passwd (read-only) ×2, /usr/sluice-fsw-dir (read-only)" ] &&
        ok "read-only root: open for writing twice, mkdir; counted (×2)" || bad "read-only" "$out"
    out=$(sr -- sh -c 'echo a >> .bashrc; touch .git/hooks/pre-commit' 2>&1)
    line=$(wline "$out")
    [ "$line" = "sluice: blocked 2 writes: $W/.bashrc (protected), $W/.git/hooks/pre-commit (protected)" ] &&
        ok "protected files in the working directory" || bad "protected" "$out"
    out=$(sr -- sh -c 'echo b > dw/f; cd sub && touch ../dw/new' 2>&1)
    line=$(wline "$out")
    [ "$line" = "sluice: blocked 2 writes: $W/dw/f (denyWrite), $W/dw/new (denyWrite)" ] &&
        ok "denyWrite: an existing file, a new one through a relative path with .." || bad "denyWrite" "$out"
    # read-only for other reasons than denyWrite, and said so (both were "(denyWrite)"):
    # allowRead inside a denied directory, and the placeholder for a missing .git
    mkdir -p "$W/dr/ar" "$W/nogit"
    cat > "$T/s3.json" <<JSON
{"filesystem": {"denyRead": ["$W/dr"], "allowRead": ["$W/dr/ar"]}}
JSON
    out=$(cd nogit && "$SLUICE" run --report-writes --settings "$T/s3.json" -- sh -c 'echo x > ../dr/ar/f; echo x > .git/config' 2>&1)
    line=$(wline "$out")
    [ "$line" = "sluice: blocked 2 writes: $W/dr/ar/f (allowRead only), $W/nogit/.git/config (protected)" ] &&
        ok "allowRead and a missing .git's placeholder are not called denyWrite" || bad "allowRead / .git labels" "$out"
    # a denyRead file: what README and explain say is what the command gets
    echo secret > "$W/sec.txt"
    printf '{"filesystem": {"denyRead": ["%s/sec.txt"]}}\n' "$W" > "$T/s4.json"
    out=$("$SLUICE" run --settings "$T/s4.json" -- sh -c 'cat sec.txt; echo rc=$?' 2>&1)
    if grep -q 'sec.txt: Permission denied' <<< "$out" && grep -q '^rc=1$' <<< "$out" &&
        grep -q 'a hidden file cannot be opened: Permission denied' <<< "$("$SLUICE" explain --settings "$T/s4.json")"; then
        ok "a denyRead file cannot be opened (EACCES), as explain says"
    else bad "denyRead file and explain" "$out / $("$SLUICE" explain --settings "$T/s4.json" | grep -i hidden)"; fi
    out=$(sr -- sh -c 'rm -f /etc/hostname; mv /etc/hosts /etc/hosts.x; ln -s a dw/l; truncate -s 0 dw/f;
                       chmod 600 .bashrc; rmdir /usr/share 2>/dev/null' 2>&1)
    line=$(wline "$out")
    [ "$line" = "sluice: blocked 6 writes: /etc/hostname (read-only), /etc/hosts (read-only), $W/dw/l (denyWrite), $W/dw/f (denyWrite), $W/.bashrc (protected), /usr/share (read-only)" ] &&
        ok "unlink, rename, symlink, truncate, chmod, rmdir" || bad "other syscalls" "$out"
    # $T (and $HOME in it) is under /tmp, which the sandbox replaces: a home
    # inside the working directory, with a protected file
    mkdir -p "$W/home"
    touch "$W/home/.bashrc"
    out=$(HOME=$W/home sr -- sh -c 'echo x >> "$HOME/.bashrc"' 2>&1)
    line=$(wline "$out")
    [ "$line" = "sluice: blocked 1 write: ~/.bashrc (protected)" ] &&
        ok "a path under \$HOME is shown as ~/..." || bad "home" "$out"

    out=$(sr -- sh -c 'echo x > "/etc/a$(printf "\033")[31mb"' 2>&1)
    line=$(wline "$out")
    [ "$line" = 'sluice: blocked 1 write: /etc/a\x1b[31mb (read-only)' ] &&
        ok "a control byte in the path is escaped (\\x1b)" || bad "escape" "$(printf '%q' "$out")"

    # a FIFO on a read-only path: the open for writing is refused by the
    # Landlock domain (landlock.c), not by the mount; timeout in case it is not
    F=/var/tmp/sluice-fsw-fifo.$$.$WHO
    rm -f "$F"
    if mkfifo "$F" 2>/dev/null; then
        out=$(sr -- timeout 5 sh -c "echo x > $F" 2>&1)
        if grep -qi "landlock" <<< "$out"; then
            skip "a host FIFO outside the writable paths" "no Landlock here"
        else
            [ "$(wline "$out")" = "sluice: blocked 1 write: $F (read-only)" ] &&
                ok "a host FIFO outside the writable paths (Landlock refuses it)" || bad "fifo" "$out"
        fi
        rm -f "$F"
    else skip "a host FIFO outside the writable paths" "cannot mkfifo in /var/tmp"; fi

    # --- not reported --------------------------------------------------------------------
    out=$(sr -- sh -c 'echo x > here.txt; mkdir -p sub/d; mv here.txt sub/d/; rm -r sub/d; echo t > /tmp/t;
                       cat /etc/passwd > /dev/null; echo n > /dev/null; echo e > /dev/stderr;
                       python3 -c "import os; os.close(os.open(\"/etc/passwd\", os.O_RDONLY | os.O_CREAT))"' 2>&1)
    [ -z "$(wline "$out")" ] &&
        ok "writes to the working directory and /tmp, reads, O_CREAT of an existing file, /dev/null: no write line" ||
        bad "false positives" "$out"
    out=$(sr -- true 2>&1)
    [ -z "$out" ] && ok "a command that writes nothing prints nothing" || bad "nothing" "$out"

    # --- off by default (issue 25): no notification for writes, the same refusals ------
    out=$("$SLUICE" run -d --settings "$S" -- sh -c 'echo x > /etc/passwd || echo refused1; mkdir /usr/sluice-fsw-off || echo refused2;
                                                  echo b > dw/f || echo refused3; echo ok > here2.txt && cat here2.txt' 2>&1)
    if [ -z "$(wline "$out")" ] && grep -q '^refused1$' <<< "$out" && grep -q '^refused2$' <<< "$out" &&
        grep -q '^refused3$' <<< "$out" && grep -q '^ok$' <<< "$out" && [ ! -e /usr/sluice-fsw-off ] &&
        grep -q '^\[SandboxDebug\] write report: off (--report-writes turns it on)$' <<< "$out" &&
        grep -q '^\[SandboxDebug\] seccomp notifications: none (no listener)$' <<< "$out"; then
        ok "without --report-writes: no listener, no write line, refused writes still refused"
    else bad "report off by default" "$out"; fi
    out=$(sr -d -- sh -c 'echo x > /etc/passwd; echo ok > here2.txt' 2>&1)
    n=$(sed -n 's/^\[SandboxDebug\] seccomp notifications: \([0-9]*\)$/\1/p' <<< "$out")
    if grep -q '^\[SandboxDebug\] write report: on (--report-writes)$' <<< "$out" && [ "${n:-0}" -ge 2 ] &&
        [ "$(wline "$out")" = "sluice: blocked 1 write: /etc/passwd (read-only)" ]; then
        ok "with --report-writes: -d counts the notifications ($n)"
    else bad "report on: the counter" "$out"; fi
    out=$("$SLUICE" run -d --transparent --settings "$S" -- sh -c 'echo x > /etc/passwd || echo refused1; echo ok > here2.txt' 2>&1)
    if grep -q "transparent mode needs" <<< "$out"; then
        skip "transparent mode without --report-writes" "the kernel lacks a piece"
    elif [ -z "$(wline "$out")" ] && grep -q '^refused1$' <<< "$out" &&
        grep -q '^\[SandboxDebug\] seccomp notifications: 0$' <<< "$out"; then
        ok "transparent mode without --report-writes: the listener hears no write"
    else bad "transparent, report off" "$out"; fi
    rm -f here2.txt

    # --- filters -------------------------------------------------------------------------
    out=$(sr --quiet -- sh -c 'echo x > /etc/passwd' 2>&1)
    grep -q 'sluice: blocked' <<< "$out" && bad "--quiet" "$out" || ok "--quiet: no write line"
    cat > "$T/ign.json" <<JSON
{"filesystem": {"denyWrite": ["$W/dw"]}, "ignoreViolations": {"*": ["/etc/passwd", "*/dw/*"]}}
JSON
    out=$("$SLUICE" run --report-writes --settings "$T/ign.json" -- sh -c 'echo x > /etc/passwd; echo y > dw/f; mkdir /usr/zz' 2>&1)
    line=$(wline "$out")
    [ "$line" = "sluice: blocked 1 write: /usr/zz (read-only)" ] &&
        ok "ignoreViolations \"*\": a substring and a glob hide their writes" || bad "ignore *" "$out"
    cat > "$T/ign2.json" <<JSON
{"ignoreViolations": {"sluice-fsw-marker": ["/etc"]}}
JSON
    out=$("$SLUICE" run --report-writes --settings "$T/ign2.json" -- sh -c 'echo x > /etc/passwd # sluice-fsw-marker' 2>&1)
    [ -z "$(wline "$out")" ] && ok "ignoreViolations by command hides the write for that command" ||
        bad "ignore by command" "$out"
    out=$("$SLUICE" run --report-writes --settings "$T/ign2.json" -- sh -c 'echo x > /etc/passwd' 2>&1)
    [ "$(wline "$out")" = "sluice: blocked 1 write: /etc/passwd (read-only)" ] &&
        ok "... and not for another command" || bad "ignore other command" "$out"
    cat > "$T/ign3.json" <<JSON
{"ignoreViolations": {"*": ["~/.bash*"]}}
JSON
    out=$(HOME=$W/home "$SLUICE" run --report-writes --settings "$T/ign3.json" -- sh -c 'echo x >> "$HOME/.bashrc"; echo $?' 2>&1)
    [ "$out" = "$(printf 'sh: 1: cannot create %s/home/.bashrc: Read-only file system\n2' "$W")" ] &&
        ok "ignoreViolations: a ~/ glob" || bad "ignore ~" "$out"

    # --- with the connection line --------------------------------------------------------
    P=$(free_port)
    out=$(sr -- sh -c "curl -s --max-time 10 --noproxy '' -x http://127.0.0.1:3128 http://127.0.0.1:$P/ >/dev/null; echo x > /etc/passwd" 2>&1)
    if grep -q "^sluice: blocked 1 connection: 127.0.0.1:$P" <<< "$out" &&
        [ "$(wline "$out")" = "sluice: blocked 1 write: /etc/passwd (read-only)" ]; then
        ok "the connection line and the write line, each on its own"
    else bad "both lines" "$out"; fi

    # --- transparent mode: one listener serves connect() and the writes ----------------
    out=$(sr --transparent -- sh -c 'echo x > /etc/passwd; echo ok > t.txt; cat t.txt' 2>&1)
    if grep -q "transparent mode needs" <<< "$out"; then
        skip "transparent mode with the write report" "the kernel lacks a piece"
    elif grep -q '^ok$' <<< "$out" && [ "$(wline "$out")" = "sluice: blocked 1 write: /etc/passwd (read-only)" ]; then
        ok "transparent mode and the write report share the seccomp listener"
    else bad "transparent + writes" "$out"; fi
    cd "$T" || return
}

trap 'e2e_cleanup' EXIT
e2e_twice cases "$HERE/fswrite.sh" "$SLUICE"
e2e_finish
