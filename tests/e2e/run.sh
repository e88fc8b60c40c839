#!/usr/bin/env bash
# tests/e2e/run.sh - `sluice run` end to end, the functional side: exit
# statuses and signals, argument parsing, the proxies from inside the
# sandbox (HTTP absolute-form and CONNECT, SOCKS5h, `sluice connect`), the
# blocked-connections summary (--quiet, ignoreViolations), the filesystem
# (writable working directory, private TMPDIR removed after the run, the
# rest read-only, protected-file mount points not left behind), settings
# errors failing closed (125, the command never ran), missing bwrap, the
# permission layers (sandbox.enabled, --dangerously-disable-sandbox,
# excludedCommands), `sluice explain`, and `sluice bridge` inside a user's
# own bwrap. Run as root it runs every case again as an unprivileged user
# (run-helpers/twice.sh). Everything is on 127.0.0.1. The adversarial side
# is run_escape.sh.
set -uo pipefail
SLUICE=${1:?usage: run.sh PATH/TO/sluice}
case $SLUICE in /*) ;; *) SLUICE=$(cd "$(dirname "$SLUICE")" && pwd)/$(basename "$SLUICE") ;; esac
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/lib.sh"
. "$HERE/run-helpers/twice.sh"
# lib.sh: $T (HOME inside it), PIDS, free_port, wait_for, wait_exit
# twice.sh: ok/bad/skip naming [root]/[user], e2e_twice

cases() {
    local W=$T/work S=$T/s.json PA PB out rc err mark VT i pid
    export XDG_RUNTIME_DIR=$T/xdg # sluice's run directory goes here: checked empty after
    mkdir -p -m 700 "$XDG_RUNTIME_DIR"
    mkdir -p "$W" "$T/www"
    cd "$W" || return
    echo hello-origin > "$T/www/hello.txt"

    # --- origins ---------------------------------------------------------------------
    PA=$(free_port); PB=$(free_port)
    python3 -m http.server --bind 127.0.0.1 --directory "$T/www" "$PA" >"$T/A.err" 2>&1 &
    PIDS+=($!)
    python3 -m http.server --bind 127.0.0.1 --directory "$T/www" "$PB" >"$T/B.err" 2>&1 &
    PIDS+=($!)
    for i in $(seq 100); do
        curl -s --noproxy '*' "http://127.0.0.1:$PA/hello.txt" >/dev/null &&
            curl -s --noproxy '*' "http://127.0.0.1:$PB/hello.txt" >/dev/null && break
        sleep 0.1
    done
    cat > "$S" <<JSON
{"network": {"allowedDomains": ["127.0.0.1:$PA", "localhost:$PA"]}}
JSON
    sr() { "$SLUICE" run --settings "$S" "$@"; }
    rc_is() { # NAME WANT GOT [DETAIL]
        if [ "$3" = "$2" ]; then ok "$1"; else bad "$1" "want exit $2, got $3${4:+
$4}"; fi
    }
    X="--max-time 10 -sS --noproxy '' -x http://127.0.0.1:3128"

    # --- exit statuses -------------------------------------------------------------------
    sr -- true; rc_is "exit 0" 0 $?
    sr -c 'exit 3'; rc_is "exit 3 from -c" 3 $?
    sr -- sh -c 'exit 3'; rc_is "exit 3 from argv" 3 $?
    err=$(sr -- /nonexistent/cmd 2>&1); rc_is "command not found: 127" 127 $? "$err"
    err=$(sr -- no-such-command-here 2>&1); rc_is "command not on PATH: 127" 127 $? "$err"
    printf '#!/bin/sh\necho ran\n' > noexec; chmod 644 noexec
    err=$(sr -- ./noexec 2>&1); rc_is "command not executable: 126" 126 $? "$err"
    rm -f noexec
    sr -c 'kill -9 $$'; rc_is "killed by SIGKILL: 137" 137 $?
    sr -c 'kill -SEGV $$'; rc_is "killed by SIGSEGV: 139" 139 $?

    for sig in TERM:143 INT:130 HUP:129; do
        rm -f started
        "$SLUICE" run --settings "$S" -c 'touch started; exec sleep 30' &
        pid=$!
        for i in $(seq $((200 * SLOW))); do [ -e started ] && break; sleep 0.05; done
        sleep 0.2
        kill -"${sig%%:*}" "$pid"
        if wait_exit "$pid" $((10 * SLOW)); then
            rc_is "SIG${sig%%:*} to sluice is forwarded: exit ${sig#*:}" "${sig#*:}" "$WAIT_RC"
        else
            bad "SIG${sig%%:*} to sluice is forwarded" "still running after 10 s"
            kill -9 "$pid" 2>/dev/null
        fi
    done
    rm -f started
    # the command traps SIGTERM and exits 0: an interrupted run is never 0
    "$SLUICE" run --settings "$S" -c 'trap "exit 0" TERM; touch started; while :; do sleep 0.1; done' &
    pid=$!
    for i in $(seq $((200 * SLOW))); do [ -e started ] && break; sleep 0.05; done
    sleep 0.2
    kill -TERM "$pid"
    if wait_exit "$pid" $((10 * SLOW)); then
        [ "$WAIT_RC" -ne 0 ] && ok "interrupted run whose command exits 0 is not 0 ($WAIT_RC)" ||
            bad "interrupted run exit" "got 0"
    else bad "interrupted run exit" "still running"; kill -9 "$pid" 2>/dev/null; fi
    rm -f started

    # --- argument parsing ----------------------------------------------------------------
    printf '#!/bin/sh\necho "fake-shell:$*"\n' > fakesh; chmod 755 fakesh
    out=$(SHELL=$W/fakesh sr -c 'echo x'); [ "$out" = "fake-shell:-c echo x" ] &&
        ok "-c runs \$SHELL -c STRING" || bad "-c uses \$SHELL" "$out"
    out=$(SHELL=/nonexistent/shell sr -c 'echo via-sh'); [ "$out" = via-sh ] &&
        ok "-c falls back to /bin/sh when \$SHELL is unusable" || bad "-c /bin/sh fallback" "$out"
    out=$(sr ls -la 2>&1); rc=$?
    [ $rc -eq 0 ] && grep -q fakesh <<< "$out" && ok "sluice run ls -la: -la goes to ls" ||
        bad "sluice run ls -la" "rc=$rc $out"
    out=$(sr echo --quiet -c --settings x); [ "$out" = "--quiet -c --settings x" ] &&
        ok "options stop at the first non-option" || bad "options after the command" "$out"
    mkdir -p bin; printf '#!/bin/sh\necho "weird:$0:$*"\n' > bin/--weird; chmod 755 bin/--weird
    out=$(PATH=$W/bin:$PATH sr -- --weird --a b); [ "$out" = "weird:$W/bin/--weird:--a b" ] &&
        ok "sluice run -- --weird runs the command named --weird" || bad "-- --weird" "$out"
    rm -rf bin fakesh
    err=$(sr --no-such-option true 2>&1); rc=$?
    [ $rc -ne 0 ] && grep -q -- '--no-such-option' <<< "$err" &&
        ok "an unknown option is refused, named ($rc)" || bad "unknown option" "rc=$rc $err"

    # --- network through the proxies -------------------------------------------------------
    out=$(sr -c "curl $X http://127.0.0.1:$PA/hello.txt" 2>&1)
    [ "$out" = hello-origin ] && ok "curl -x (absolute-form) to an allowed origin" || bad "curl -x" "$out"
    out=$(sr -c "curl $X -p http://127.0.0.1:$PA/hello.txt" 2>&1)
    [ "$out" = hello-origin ] && ok "curl -p (CONNECT) to an allowed origin" || bad "curl -p" "$out"
    out=$(sr -c "curl --max-time 10 -sS --noproxy '' -x socks5h://127.0.0.1:1080 http://localhost:$PA/hello.txt" 2>&1)
    [ "$out" = hello-origin ] && ok "curl socks5h:// (name resolved on the host) to an allowed origin" ||
        bad "curl socks5h" "$out"
    out=$(sr -c "curl --max-time 10 -sS http://127.0.0.1:$PA/hello.txt; echo rc=\$?" 2>&1)
    grep -q 'rc=0' <<< "$out" && bad "NO_PROXY lists 127.0.0.1 (direct attempt)" "$out" ||
        ok "with the default NO_PROXY curl goes direct to 127.0.0.1 and fails"
    out=$(sr -c 'env' 2>&1)
    for v in HTTP_PROXY=http://127.0.0.1:3128 https_proxy=http://127.0.0.1:3128 \
             ALL_PROXY=socks5h://127.0.0.1:1080 SANDBOX_RUNTIME=1; do
        grep -qx -- "$v" <<< "$out" && ok "environment has $v" || bad "environment $v"
    done
    grep -E '^GIT_SSH_COMMAND=' <<< "$out" | grep -q 'connect' &&
        ok "GIT_SSH_COMMAND uses sluice connect" || bad "GIT_SSH_COMMAND" "$(grep GIT_SSH <<< "$out")"
    out=$(sr -c "printf 'GET /hello.txt HTTP/1.0\r\n\r\n' | '$SLUICE' connect 127.0.0.1 $PA" 2>&1)
    grep -q '^HTTP/1.0 200' <<< "$out" && grep -q hello-origin <<< "$out" &&
        ok "sluice connect inside the sandbox reaches an allowed origin" || bad "sluice connect inside" "$out"
    out=$(sr -c "printf 'GET /hello.txt HTTP/1.0\r\n\r\n' | '$SLUICE' connect 127.0.0.1 $PB; echo rc=\$?" 2>&1)
    grep -q hello-origin <<< "$out" && bad "sluice connect to a denied origin" "$out" ||
        ok "sluice connect to a denied origin gets nothing"

    # --- denied: 403 and the summary ----------------------------------------------------------
    out=$(sr -c "curl $X -o /dev/null -w '%{http_code}' http://127.0.0.1:$PB/hello.txt" 2>"$T/err")
    err=$(cat "$T/err")
    [ "$out" = 403 ] && ok "a denied origin gets 403" || bad "denied 403" "$out $err"
    grep -q "^sluice: blocked 1 connection: 127.0.0.1:$PB" <<< "$err" &&
        ok "the after-run summary names the blocked connection" || bad "blocked summary" "$err"
    grep -qF "to allow this address, add '127.0.0.1:$PB' to network.allowedDomains)" <<< "$err" &&
        ok "the summary says what to add to allow it" || bad "the summary's hint" "$err"
    grep -qiE 'noproxy|no_proxy|unset .*proxy' <<< "$err" &&
        bad "the summary never suggests a way around the proxy" "$err" ||
        ok "the summary never suggests a way around the proxy"
    out=$(sr -c "curl $X -o /dev/null http://127.0.0.1:$PB/a; curl $X -o /dev/null http://127.0.0.1:$PB/b; curl $X -p -o /dev/null http://127.0.0.1:$PB/b" 2>&1)
    grep -q "^sluice: blocked 3 connections: 127.0.0.1:$PB.*×3" <<< "$out" &&
        ok "the summary counts repeats (×3)" || bad "summary ×3" "$out"
    out=$(sr --quiet -c "curl $X -o /dev/null http://127.0.0.1:$PB/hello.txt" 2>&1)
    grep -q 'sluice: blocked' <<< "$out" && bad "--quiet" "$out" || ok "--quiet: no summary"
    cat > "$T/ign.json" <<JSON
{"network": {"allowedDomains": ["127.0.0.1:$PA"]}, "ignoreViolations": {"*": ["127.0.0.1:$PB"]}}
JSON
    out=$("$SLUICE" run --settings "$T/ign.json" -c "curl $X -o /dev/null http://127.0.0.1:$PB/hello.txt" 2>&1)
    grep -q 'sluice: blocked' <<< "$out" && bad "ignoreViolations *" "$out" ||
        ok "ignoreViolations {\"*\": [host:port]} hides it"
    cat > "$T/ign2.json" <<JSON
{"network": {"allowedDomains": ["127.0.0.1:$PA"]}, "ignoreViolations": {"othercmd": ["127.0.0.1:$PB"]}}
JSON
    out=$("$SLUICE" run --settings "$T/ign2.json" -c "curl $X -o /dev/null http://127.0.0.1:$PB/hello.txt" 2>&1)
    grep -q "sluice: blocked 1 connection: 127.0.0.1:$PB" <<< "$out" &&
        ok "ignoreViolations for another command does not hide it" || bad "ignoreViolations per command" "$out"
    sr --log "$T/run.log" -c "curl $X -o /dev/null http://127.0.0.1:$PA/hello.txt; curl $X -o /dev/null http://127.0.0.1:$PB/x" 2>/dev/null
    grep -q "event=decision .*host=127.0.0.1 port=$PA .*decision=allow" "$T/run.log" &&
        grep -q "level=warn event=decision .*host=127.0.0.1 port=$PB .*decision=deny" "$T/run.log" &&
        grep -q "event=close .*host=127.0.0.1 port=$PA .*bytes_down=[1-9][0-9]* duration_ms=[0-9]* end=" "$T/run.log" &&
        ok "--log writes a decision line per connection" || bad "--log" "$(cat "$T/run.log" 2>&1)"

    out=$(sr -c "curl --max-time 5 -sS --noproxy '*' http://127.0.0.1:$PA/hello.txt; echo rc=\$?" 2>&1)
    grep -q 'rc=7' <<< "$out" && ! grep -q hello-origin <<< "$out" &&
        ok "direct TCP to a host loopback port fails" || bad "direct TCP" "$out"

    # --- filesystem ----------------------------------------------------------------------------
    out=$(sr -c 'echo tmp-ok > "$TMPDIR/f" && cat "$TMPDIR/f" && echo x > /tmp/g && cat /tmp/g; echo "$TMPDIR"' 2>&1)
    [ "$(printf '%s' "$out" | head -2 | tr '\n' ' ')" = "tmp-ok x " ] && ok "TMPDIR and /tmp are writable" ||
        bad "TMPDIR writable" "$out"
    [ -z "$(ls -A "$XDG_RUNTIME_DIR")" ] && ok "the run directory (host side of TMPDIR) is gone after the run" ||
        bad "run directory left behind" "$(ls -la "$XDG_RUNTIME_DIR")"
    mark=tmp-marker-$$-$RANDOM
    sr -c "touch /tmp/$mark" 2>/dev/null
    [ ! -e "/tmp/$mark" ] && ok "/tmp inside is private (nothing on the host's /tmp)" ||
        { bad "/tmp private" "/tmp/$mark exists"; rm -f "/tmp/$mark"; }
    out=$(sr -c 'echo w > written && mkdir -p d/e && echo ok' 2>&1)
    [ "$out" = ok ] && [ "$(cat written 2>/dev/null)" = w ] && [ -d d/e ] &&
        ok "the working directory is writable (visible on the host)" || bad "cwd writable" "$out"
    rm -rf written d
    VT=$(mktemp -d /var/tmp/sluice-e2e.XXXXXX) && echo before > "$VT/f"
    EXTRA_RM+=("$VT")
    out=$(sr -c "echo x > '$VT/f'; echo rc=\$?; touch '$VT/new'; echo rc=\$?; touch /etc/sluice-e2e; echo rc=\$?; touch /usr/sluice-e2e; echo rc=\$?" 2>&1)
    if [ "$(grep -c 'rc=[1-9]' <<< "$out")" = 4 ] && [ "$(cat "$VT/f")" = before ] && [ ! -e "$VT/new" ]; then
        ok "host paths outside the working directory are read-only (/var/tmp, /etc, /usr)"
    else bad "read-only outside cwd" "$out"; fi
    cat > "$T/aw.json" <<JSON
{"filesystem": {"allowWrite": [".", "$VT"]}}
JSON
    out=$("$SLUICE" run --settings "$T/aw.json" -c "echo after > '$VT/f' && touch '$VT/new' && echo ok" 2>&1)
    [ "$out" = ok ] && [ "$(cat "$VT/f")" = after ] && ok "filesystem.allowWrite makes a path writable" ||
        bad "allowWrite" "$out"

    # protected-file mount points are removed after the run: the tree is as
    # before plus exactly what the command wrote
    mkdir -p "$T/pw/repo/.git/refs" "$T/pw/sub/deeper"
    echo '[core]' > "$T/pw/repo/.git/config"
    echo 'x' > "$T/pw/.bashrc"
    snap() { (cd "$T/pw" && find . -printf '%y %m %s %p\n' | sort); }
    before=$(snap)
    (cd "$T/pw" && "$SLUICE" run --settings "$S" -c 'ls -a >/dev/null; echo n > new.txt; mkdir newdir; echo m > repo/made.txt; ls -a repo/.git >/dev/null')
    rc=$?
    after=$(snap)
    want=$(printf '%s\n%s\n%s\n%s\n' "$before" "f 644 2 ./new.txt" "d 755 4096 ./newdir" "f 644 2 ./repo/made.txt" | sort)
    if [ $rc -eq 0 ] && [ "$after" = "$want" ]; then
        ok "no protected-file mount point is left behind (tree = before + what the command wrote)"
    else bad "tree after the run" "rc=$rc
$(diff <(printf '%s\n' "$want") <(printf '%s\n' "$after"))"; fi
    rm -rf "$T/pw"
    before=$(cd "$W" && find . | sort)
    sr -- true
    [ "$(cd "$W" && find . | sort)" = "$before" ] && ok "an empty working directory stays empty" ||
        bad "empty cwd after the run" "$(cd "$W" && find . | sort)"

    # root in another user's directory (s37 item 2): in bwrap's user
    # namespace root has no override over an inode of an unmapped owner, so
    # the protected names' placeholders, asked for by root's own override,
    # were mount points bwrap could not make ("bwrap: Can't mkdir
    # DIR/.bash_profile: Permission denied", 125, nothing run). Now a
    # directory the command cannot write gets none (it cannot create the
    # names either), and one it can write (group root, 775) keeps them.
    if [ "$(id -u)" = 0 ] && [ -z "${SLUICE_E2E_CHILD:-}" ] && e2e_pick_user; then
        local od=$T/other og=$T/otherg
        mkdir -p "$od" "$og" && chown "$E2E_UID:$E2E_GID" "$od" && chmod 755 "$od" &&
            chown "$E2E_UID:0" "$og" && chmod 775 "$og"
        out=$(cd "$od" && sr -c 'touch .bash_profile; echo a=$?; mkdir .git; echo b=$?; touch x; echo c=$?' 2>&1); rc=$?
        if [ $rc = 0 ] && [ "$(grep -c '^[abc]=1$' <<< "$out")" = 3 ] && [ -z "$(ls -A "$od")" ]; then
            ok "root in another user's 755 directory: the command runs, cannot create .bash_profile, .git or x there, nothing left"
        else bad "root in another user's directory" "rc=$rc $out
$(ls -lA "$od")"; fi
        out=$(cd "$og" && sr -c 'touch .bash_profile; echo a=$?; mkdir -p .git/hooks; echo b=$?; touch ok; echo c=$?' 2>&1); rc=$?
        if [ $rc = 0 ] && grep -q '^a=1$' <<< "$out" && grep -q '^b=1$' <<< "$out" && grep -q '^c=0$' <<< "$out" &&
            [ "$(ls -A "$og")" = ok ]; then
            ok "root in another user's directory it can write (group root, 775): .bash_profile and .git still cannot be made"
        else bad "root in another user's writable directory" "rc=$rc $out
$(ls -lA "$og")"; fi
        rm -rf "$od" "$og"
    fi

    # --- settings errors fail closed ------------------------------------------------------------
    printf '{"network": {"allowedDomains": []}, "nosuchkey": 1}\n' > "$T/bad1.json"
    printf '{"network": {"allowedDomains": [}\n' > "$T/bad2.json"
    printf '{"network": {"allowedDomains": "127.0.0.1"}}\n' > "$T/bad3.json"
    printf '{"network": {"allowedDomains": ["exa mple..com:99999"]}}\n' > "$T/bad4.json"
    printf '{"sandbox": {"enabled": "no"}}\n' > "$T/bad5.json"
    for b in "bad1:unknown key" "bad2:bad JSON" "bad3:wrong type" "bad4:invalid pattern" \
             "bad5:wrong type for sandbox.enabled" "missing:missing settings file"; do
        rm -f marker
        err=$("$SLUICE" run --settings "$T/${b%%:*}.json" -c 'touch marker' 2>&1); rc=$?
        if [ $rc -eq 125 ] && [ ! -e marker ]; then ok "settings error (${b#*:}): 125, the command did not run"
        else bad "settings error (${b#*:})" "rc=$rc marker=$([ -e marker ] && echo yes || echo no) $err"; fi
    done
    mkdir -p "$XDG_CONFIG_HOME/sluice"
    printf '{"network": {"allowedDomain": []}}\n' > "$XDG_CONFIG_HOME/sluice/settings.json"
    rm -f marker
    err=$("$SLUICE" run -c 'touch marker' 2>&1); rc=$?
    [ $rc -eq 125 ] && [ ! -e marker ] && ok "an error in the user settings file: 125, the command did not run" ||
        bad "user settings error" "rc=$rc $err"
    rm -f "$XDG_CONFIG_HOME/sluice/settings.json" marker
    err=$("$SLUICE" run --ask bogus: -c 'touch marker' 2>&1); rc=$?
    [ $rc -eq 125 ] && [ ! -e marker ] && ok "--ask with an unknown handler: 125, the command did not run" ||
        bad "--ask bogus" "rc=$rc $err"
    rm -f marker
    printf '{"bwrapPath": "/nonexistent/bwrap"}\n' > "$T/nobw.json"
    err=$("$SLUICE" run --settings "$T/nobw.json" -c 'touch marker' 2>&1); rc=$?
    if [ $rc -eq 125 ] && [ ! -e marker ] && grep -qi 'install' <<< "$err" &&
        grep -q 'bwrapPath' <<< "$err"; then
        ok "bwrap missing: 125 with a message naming the fix, the command did not run"
    else bad "bwrap missing" "rc=$rc $err"; fi
    printf '#!/bin/sh\nexit 1\n' > "$T/falsebwrap"; chmod 755 "$T/falsebwrap"
    printf '{"bwrapPath": "%s"}\n' "$T/falsebwrap" > "$T/fbw.json"
    err=$(cd "$W" && "$SLUICE" run --settings "$T/fbw.json" -c 'touch marker' 2>&1); rc=$?
    [ $rc -eq 125 ] && [ ! -e marker ] && ok "bwrap that fails at once: 125, the command did not run" ||
        bad "failing bwrap" "rc=$rc $err"
    rm -f marker

    # --- explain ------------------------------------------------------------------------------------
    out=$("$SLUICE" explain --settings "$S" 2>&1); rc=$?
    [ $rc -eq 0 ] && grep -q "127.0.0.1:$PA" <<< "$out" && grep -q "localhost:$PA" <<< "$out" &&
        ok "sluice explain names the allowed domains" || bad "explain" "rc=$rc $out"
    out=$("$SLUICE" explain --settings "$S" --json 2>&1); rc=$?
    [ $rc -eq 0 ] && printf '%s' "$out" | python3 -m json.tool >/dev/null 2>&1 && grep -q "127.0.0.1:$PA" <<< "$out" &&
        ok "sluice explain --json is valid JSON naming the allowed domains" || bad "explain --json" "rc=$rc $out"
    out=$("$SLUICE" explain --settings "$T/bad1.json" 2>&1); rc=$?
    [ $rc -ne 0 ] && ok "sluice explain refuses invalid settings ($rc)" || bad "explain with bad settings" "$out"

    # --- permission layers ----------------------------------------------------------------------------
    DIRECT="curl --max-time 5 -sS --noproxy '*' http://127.0.0.1:$PA/hello.txt"
    cat > "$T/off.json" <<JSON
{"network": {"allowedDomains": ["127.0.0.1:$PA"]}, "sandbox": {"enabled": false}}
JSON
    out=$("$SLUICE" run --settings "$T/off.json" -c "$DIRECT" 2>&1)
    grep -q hello-origin <<< "$out" && grep -q 'without the sandbox' <<< "$out" &&
        ok "sandbox.enabled false: runs unsandboxed (direct network works), said on stderr" || bad "sandbox.enabled false" "$out"
    out=$(sr --dangerously-disable-sandbox -c "$DIRECT" 2>&1)
    grep -q hello-origin <<< "$out" && ok "--dangerously-disable-sandbox honoured by default" ||
        bad "--dangerously-disable-sandbox" "$out"
    cat > "$T/nobypass.json" <<JSON
{"network": {"allowedDomains": ["127.0.0.1:$PA"]}, "sandbox": {"allowUnsandboxedCommands": false}}
JSON
    out=$("$SLUICE" run --settings "$T/nobypass.json" --dangerously-disable-sandbox -c "$DIRECT; echo rc=\$?" 2>&1)
    if ! grep -q hello-origin <<< "$out" && grep -q 'rc=7' <<< "$out" &&
        grep -q refused <<< "$out"; then
        ok "--dangerously-disable-sandbox refused when allowUnsandboxedCommands is false: runs sandboxed"
    else bad "bypass refused" "$out"; fi
    printf '#!/bin/sh\n%s\n' "$DIRECT" > direct.sh; chmod 755 direct.sh
    cat > "$T/excl.json" <<JSON
{"network": {"allowedDomains": ["127.0.0.1:$PA"]},
 "sandbox": {"excludedCommands": ["./direct.sh", "curl:*", "ech"]}}
JSON
    ex() { "$SLUICE" run --settings "$T/excl.json" "$@" 2>&1; }
    out=$(ex ./direct.sh); grep -q hello-origin <<< "$out" &&
        ok "excludedCommands: exact match runs unsandboxed" || bad "excluded exact" "$out"
    out=$(ex ./direct.sh arg); grep -q hello-origin <<< "$out" &&
        ok "excludedCommands: entry followed by a space and arguments runs unsandboxed" || bad "excluded prefix-space" "$out"
    out=$(ex -c "$DIRECT"); grep -q hello-origin <<< "$out" &&
        ok "excludedCommands: prefix:* runs unsandboxed" || bad "excluded prefix:*" "$out"
    cp direct.sh direct.shx
    out=$(ex ./direct.shx); grep -q hello-origin <<< "$out" && bad "excludedCommands: near miss" "$out" ||
        ok "excludedCommands: ./direct.shx (no space after the entry) stays sandboxed"
    out=$(ex echo hi; ex sh -c "echo \$SANDBOX_RUNTIME")
    [ "$out" = "$(printf 'hi\n1')" ] && ok "excludedCommands: 'ech' does not exclude 'echo', sh -c stays sandboxed" ||
        bad "excluded ech" "$out"
    rm -f direct.sh direct.shx

    # --- issue 25: which first program the sandbox starts ---------------------------------------------------
    # sluice-inner beside the binary, a regular file only its owner (or
    # root) may change; else `sluice inner`
    local inner_src si=$W/si
    inner_src=$(dirname "$SLUICE")/sluice-inner
    if [ -x "$inner_src" ]; then
        mkdir -p "$si" && cp "$SLUICE" "$si/sluice"
        # bwrap's program (the element after its "--"), or "inner" after sluice
        # (the argv also names $si/sluice-inner where a sandbox keeps it as it is)
        first() {
            (cd "$W" && "$si/sluice" run -d -- true 2>&1 | grep -o 'argv\[[0-9]*\] .*' |
                awk '$2 == "--" { getline a; if (a ~ /\/sluice$/) getline a; print a; exit }')
        }
        out=$(first)
        case $out in *"] inner") ok "no sluice-inner beside sluice: the sandbox starts sluice inner" ;;
                     *) bad "sluice inner without sluice-inner" "$out" ;; esac
        ln -s "$inner_src" "$si/sluice-inner"
        out=$(first)
        case $out in *"] inner") ok "a symbolic link named sluice-inner is not used" ;;
                     *) bad "sluice-inner symlink" "$out" ;; esac
        rm -f "$si/sluice-inner"; cp "$inner_src" "$si/sluice-inner"; chmod 775 "$si/sluice-inner"
        out=$(first)
        case $out in *"] inner") ok "a group-writable sluice-inner is not used" ;;
                     *) bad "sluice-inner group-writable" "$out" ;; esac
        chmod 755 "$si/sluice-inner"
        out=$(first)
        case $out in *"$si/sluice-inner") ok "sluice-inner beside sluice is the sandbox's first program" ;;
                     *) bad "sluice-inner used" "$out" ;; esac
        out=$(cd "$W" && "$si/sluice" run -- sh -c 'echo via-inner' 2>&1)
        [ "$out" = via-inner ] && ok "a command runs under sluice-inner" || bad "command under sluice-inner" "$out"
        rm -rf "$si"
    fi

    # --- sluice bridge inside a user's own bwrap ----------------------------------------------------------
    rm -f "$W/h.sock"
    "$SLUICE" proxy --settings "$S" --http "unix:$W/h.sock" --socks off --log "$T/uproxy.log" 2>"$T/uproxy.err" &
    pid=$!
    PIDS+=($pid)
    for i in $(seq $((100 * SLOW))); do [ -S "$W/h.sock" ] && break; sleep 0.05; done
    out=$(bwrap --ro-bind / / --dev /dev --proc /proc --unshare-net --unshare-pid --die-with-parent --bind "$W" "$W" \
        sh -c "'$SLUICE' bridge --quiet tcp:127.0.0.1:3128 unix:$W/h.sock & b=\$!
               curl --max-time 3 -sS --noproxy '*' http://127.0.0.1:$PA/hello.txt >/dev/null 2>&1 && echo DIRECT-REACHED
               for i in \$(seq 50); do
                   curl --max-time 10 -sS --noproxy '' -x http://127.0.0.1:3128 http://127.0.0.1:$PA/hello.txt 2>/dev/null && break
                   sleep 0.1
               done
               kill \$b" 2>&1)
    if [ "$out" = hello-origin ]; then
        ok "sluice bridge tcp:127.0.0.1:3128 unix:PATH inside a user's own bwrap reaches the host proxy"
    else bad "bridge inside bwrap" "$out $(cat "$T/uproxy.err")"; fi
    kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
    rm -f "$W/h.sock"
}

EXTRA_RM=()
trap 'e2e_cleanup; for d in "${EXTRA_RM[@]}"; do rm -rf "$d"; done' EXIT
start=$SECONDS
e2e_twice cases "$HERE/run.sh" "$SLUICE"
echo "# run.sh took $((SECONDS - start)) s"
e2e_finish
