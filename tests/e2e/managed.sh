#!/usr/bin/env bash
# tests/e2e/managed.sh - issue 21 item 8: when the managed file
# (/etc/sluice/managed.json) exists, only it may weaken the boundary; a user
# or project file that opens the host network (network.isolate false), turns
# on report mode, disables the sandbox or the filesystem policy, excludes
# commands or names external proxy ports is refused with its location, and
# `sluice explain` names the managed file and the keys it fixes. Without a
# managed file nothing changes.
#
# The managed file is put in place in a mount namespace of the test's own
# (`unshare -m`, with `-r` for the unprivileged pass): the host's /etc is
# bound aside, a tmpfs covers /etc with links back to every entry and
# /etc/sluice/managed.json; nothing outside the namespace sees it. Runs as
# root, then as an unprivileged user (run-helpers/twice.sh). No network.
set -uo pipefail
SLUICE=${1:?usage: managed.sh PATH/TO/sluice}
case $SLUICE in /*) ;; *) SLUICE=$(cd "$(dirname "$SLUICE")" && pwd)/$(basename "$SLUICE") ;; esac
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/lib.sh"
. "$HERE/run-helpers/twice.sh"

# with_managed FILE CMD...: CMD with FILE as /etc/sluice/managed.json. It
# execs unshare (which execs sh, which execs CMD): call it in a subshell,
# $(...) or with & (then $! is CMD itself, for kill).
with_managed() {
    local m=$1 r=
    shift
    [ "$(id -u)" -ne 0 ] && r=-r
    mkdir -p "$T/oldetc"
    exec unshare -m $r --propagation private sh -c '
        set -e
        o=$1 m=$2; shift 2
        mount --bind /etc "$o"
        mount -t tmpfs -o mode=755 tmpfs /etc
        for e in "$o"/* "$o"/.[!.]*; do
            if [ -e "$e" ] || [ -L "$e" ]; then ln -s "$e" /etc/; fi
        done
        rm -f /etc/sluice
        mkdir /etc/sluice
        case $m in
        DIR) mkdir /etc/sluice/managed.json ;;
        DANGLING) ln -s /nonexistent/managed.json /etc/sluice/managed.json ;;
        EMPTY) : > /etc/sluice/managed.json ;;
        *) cp "$m" /etc/sluice/managed.json ;;
        esac
        exec "$@"' sh "$T/oldetc" "$m" "$@"
}

# expect NAME WANT_STATUS REGEX CMD...: status and stdout+stderr
expect() {
    local name=$1 want=$2 re=$3 out st
    shift 3
    out=$("$@" 2>&1); st=$?
    if [ "$st" -ne "$want" ]; then bad "$name (exit $st, want $want)" "$out"; return; fi
    if ! grep -qE -- "$re" <<< "$out"; then bad "$name (output)" "$out"; return; fi
    ok "$name"
}

report_managed_deny() {
    local p code
    start_dnsmasq --address=/managed-deny.test/127.0.0.3 --address=/user-deny.test/127.0.0.3 ||
        { bad "report mode: dnsmasq did not start" "$(cat "$T/dnsmasq.err")"; return; }
    p=$(free_port)
    cat > "$T/listen.py" <<'PY'
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.3", int(sys.argv[1])))
s.listen(16)
print("ready", flush=True)
while True:
    c, _ = s.accept()
    h = c.recv(4096).split(b"\r\n")
    host = [l for l in h if l.lower().startswith(b"host:")]
    print("accepted", host[0].decode() if host else "?", flush=True)
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
    c.close()
PY
    python3 "$T/listen.py" "$p" > "$T/listen.out" 2>&1 &
    PIDS+=($!)
    wait_for "$T/listen.out" ready 5 || { bad "report mode: listener did not start" "$(cat "$T/listen.out")"; return; }
    printf '{"network": {"mode": "report", "deniedDomains": ["managed-deny.test"]}}\n' > "$T/report-managed.json"
    printf '{"network": {"dnsServers": ["127.0.0.1:%s"], "allowedDomains": ["127.0.0.3", "managed-deny.test"],\n  "deniedDomains": ["user-deny.test"]}}\n' \
        "$DPORT" > "$T/report-user.json"
    with_managed "$T/report-managed.json" "$SLUICE" proxy --settings "$T/report-user.json" \
        --log "$T/repm.log" --http tcp:127.0.0.1:0 --socks off 2>"$T/repm.err" &
    PROXY_PID=$!
    PIDS+=($PROXY_PID)
    wait_for "$T/repm.log" 'event=start' 10 ||
        { bad "report mode: proxy did not start" "$(cat "$T/repm.err")"; return; }
    HPORT=$(listen_port repm http)
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 --noproxy '' \
        -x "http://127.0.0.1:$HPORT" "http://managed-deny.test:$p/")
    [ "$code" = 403 ] && ! grep -q managed-deny "$T/listen.out" &&
        ok "report mode: a deny rule of the managed file still denies (403, not dialed)" ||
        bad "report mode: managed-deny.test got $code (want 403, not dialed)" \
            "$(grep managed-deny "$T/repm.log" "$T/listen.out")"
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 --noproxy '' \
        -x "http://127.0.0.1:$HPORT" "http://user-deny.test:$p/")
    [ "$code" = 200 ] && grep -qE 'user-deny\.test.*decision=would_deny' "$T/repm.log" &&
        ok "report mode: a user deny rule is reported (would_deny) and dialed" ||
        bad "report mode: user-deny.test got $code (want 200, would_deny)" "$(grep user-deny "$T/repm.log")"
    kill "$PROXY_PID" 2>/dev/null
}

# rt-4 (red team): routes around the lock and managed files that are not
# plain readable JSON objects
rt4_cases() {
    local M="$T/managed.json" P="$T/project.json" F="$T/fakebwrap" m out
    # bwrapPath names the program that builds the sandbox: a user or project
    # layer naming its own ran it on the host, in the host's namespaces,
    # with the managed file present (the sandbox was as good as disabled)
    printf '#!/bin/sh\necho FAKE-BWRAP-RAN > "%s.ran"\nexit 0\n' "$F" > "$F"
    chmod 755 "$F"
    rm -f "$F.ran"
    echo "{\"bwrapPath\": \"$F\"}" > "$P"
    out=$(with_managed "$M" "$SLUICE" run --settings "$P" -- true 2>&1)
    [ ! -e "$F.ran" ] && grep -q 'bwrapPath: refused: the managed file' <<< "$out" &&
        ok "managed file: a project bwrapPath is refused and the program it names never runs" ||
        bad "managed file: project bwrapPath ran $F outside the sandbox" "$out"
    # spelling tricks: a case variant is an unknown key, a duplicate key is
    # refused by the parser (the last one does not silently win)
    echo '{"network": {"Isolate": false}}' > "$P"
    expect "managed file: a case variant of a boundary key is refused" 125 "unknown key 'Isolate'" \
        with_managed "$M" "$SLUICE" run --settings "$P" -- true
    echo '{"network": {"isolate": false, "isolate": true}}' > "$P"
    expect "managed file: a duplicate boundary key is refused" 125 'duplicate object key' \
        with_managed "$M" "$SLUICE" run --settings "$P" -- true
    # a later layer that sets the key back clears the refusal, but an
    # earlier strict value never hides a later weaker one
    echo '{"network": {"isolate": true}}' > "$U"
    echo '{"network": {"isolate": false}}' > "$P"
    expect "managed file: a strict user layer does not cover a weaker project layer" 125 \
        'network\.isolate: refused' with_managed "$M" "$SLUICE" run --settings "$P" -- true
    rm -f "$U"
    # a --control-fd line is judged with the managed file too
    echo '{"network": {"isolate": false}}' > "$T/ctl.json"
    out=$(cd "$T" && with_managed "$M" "$SLUICE" run --control-fd 3 -- sh -c 'sleep 1; echo RAN' 3<"$T/ctl.json" 2>&1)
    grep -q 'control: .*network\.isolate: refused' <<< "$out" && grep -q RAN <<< "$out" &&
        ok "managed file: a --control-fd line opening the network is refused, the policy stays" ||
        bad "managed file: --control-fd isolate false" "$out"
    # the managed file must fail closed when it is there but not a readable
    # JSON object: a directory, empty, not JSON, not an object, a symlink to
    # nothing (an unmounted volume)
    echo '{bad' > "$T/m-bad.json"
    echo '[]' > "$T/m-arr.json"
    for m in DIR EMPTY DANGLING "$T/m-bad.json" "$T/m-arr.json"; do
        out=$(with_managed "$m" "$SLUICE" run -- sh -c 'echo RAN-WITHOUT-MANAGED' 2>&1); st=$?
        [ "$st" -eq 125 ] && ! grep -q RAN-WITHOUT-MANAGED <<< "$out" &&
            ok "managed file ${m##*/}: fails closed (125, the command does not run)" ||
            bad "managed file ${m##*/}: exit $st" "$out"
    done
    # a managed file the user cannot read (root's, mode 000): root only,
    # the user runs sluice inside the root-made mount namespace
    if [ "$(id -u)" = 0 ] && [ -n "${E2E_UID:-}" ]; then
        out=$(unshare -m --propagation private sh -c '
            set -e
            mkdir -p /etc/sluice
            mount -t tmpfs -o mode=755 tmpfs /etc/sluice
            echo "{}" > /etc/sluice/managed.json
            chmod 000 /etc/sluice/managed.json
            cd /
            exec setpriv --reuid="$1" --regid="$2" --clear-groups --inh-caps=-all env -u XDG_CONFIG_HOME -u SLUICE_SETTINGS HOME=/nonexistent "$3" run -- echo RAN-WITHOUT-MANAGED' \
            sh "$E2E_UID" "$E2E_GID" "$SLUICE" 2>&1); st=$?
        [ "$st" -eq 125 ] && grep -q 'managed.json: cannot open: Permission denied' <<< "$out" &&
            ! grep -q RAN-WITHOUT-MANAGED <<< "$out" &&
            ok "managed file unreadable by the user: fails closed (125)" ||
            bad "managed file unreadable by the user: exit $st" "$out"
    fi
    # a managed strictAllowlist with its own allowedDomains: a project layer
    # cannot add a name nor turn strictAllowlist off, and no ask handler is
    # consulted (strictAllowlist denies what no rule decides)
    echo '{"network": {"strictAllowlist": true, "allowedDomains": ["a.test"]}}' > "$T/m-strict.json"
    echo '{"network": {"allowedDomains": ["b.test"], "strictAllowlist": false}}' > "$P"
    out=$(with_managed "$T/m-strict.json" "$SLUICE" check --settings "$P" other.test:443 b.test:443 2>&1)
    [ "$(grep -c '^deny .*strictAllowlist is set' <<< "$out")" = 2 ] &&
        ok "managed strictAllowlist: a project layer cannot add names or lift it" ||
        bad "managed strictAllowlist" "$out"
    # keys that weaken the boundary and are NOT locked (a choice, listed in
    # the rt-4 report): they load from a project layer with a managed file
    for row in '{"filesystem": {"allowWrite": ["/"]}}' '{"environment": {"inherit": true}}' \
        '{"network": {"allowAllDomains": true}}' '{"network": {"denyPrivateAddresses": false}}' \
        '{"network": {"allowLocalBinding": true}}' '{"ignoreViolations": {"*": ["/"]}}' \
        '{"network": {"parentProxy": {"http": "http://127.0.0.1:9"}}}'; do
        echo "$row" > "$P"
        (with_managed "$M" "$SLUICE" explain --settings "$P") >/dev/null 2>&1 &&
            skip "managed file: not locked: $row" "a user or project layer may still set it" ||
            ok "managed file: locked: $row"
    done
}

cases() {
    local U="$XDG_CONFIG_HOME/sluice/settings.json" M="$T/managed.json" P="$T/project.json" out
    mkdir -p "$(dirname "$U")"
    if ! (with_managed /dev/null true) 2>"$T/ns.err"; then
        skip "managed file cases" "cannot make a mount namespace here: $(head -c 200 "$T/ns.err")"
        return
    fi
    echo '{"network": {"deniedDomains": ["blocked.example"]}, "sandbox": {"allowUnsandboxedCommands": false}}' > "$M"
    echo '{}' > "$P"

    # the regression: a user file opening the host network ran the command
    # with no network policy at all
    echo '{"network": {"isolate": false}}' > "$U"
    expect "managed file: user network.isolate false refused, the command does not run" 125 \
        "settings\.json:1:14: network\.isolate: refused: the managed file /etc/sluice/managed\.json exists, and only it may open the host network" \
        with_managed "$M" "$SLUICE" run -- sh -c 'echo RAN-UNSANDBOXED'
    out=$(with_managed "$M" "$SLUICE" run -- sh -c 'echo RAN-UNSANDBOXED' 2>&1)
    grep -q RAN-UNSANDBOXED <<< "$out" && bad "managed file: the command ran anyway" "$out" ||
        ok "managed file: the command did not run"
    expect "managed file: explain refuses the user file instead of saying the network is open" 2 \
        'network\.isolate: refused' with_managed "$M" "$SLUICE" explain
    rm -f "$U"

    # every other boundary key, from a project file (--settings)
    local row key json
    for row in \
        'network.mode|{"network": {"mode": "report"}}' \
        'sandbox.enabled|{"sandbox": {"enabled": false}}' \
        'sandbox.allowUnsandboxedCommands|{"sandbox": {"allowUnsandboxedCommands": true}}' \
        'filesystem.disabled|{"filesystem": {"disabled": true}}' \
        'sandbox.excludedCommands|{"sandbox": {"excludedCommands": ["make"]}}' \
        'network.httpProxyPort|{"network": {"httpProxyPort": 3128}}' \
        'network.socksProxyPort|{"network": {"socksProxyPort": 1080}}' \
        'bwrapPath|{"bwrapPath": "/usr/bin/bwrap"}' \
        'network.allowAllUnixSockets|{"network": {"allowAllUnixSockets": true}}' \
        'allowNestedUserNamespaces|{"allowNestedUserNamespaces": true}' \
        'enableWeakerNestedSandbox|{"enableWeakerNestedSandbox": true}' \
        'network.hostPorts|{"network": {"hostPorts": [5432]}}' \
        'network.isolate|{"network": {"\u0069solate": false}}'; do
        key=${row%%|*} json=${row#*|}
        echo "$json" > "$P"
        expect "managed file: project $key refused" 125 \
            "project\.json:1:[0-9]+: ${key//./\\.}: refused: the managed file" \
            with_managed "$M" "$SLUICE" run --settings "$P" -- true
        # without the managed file the same file loads
        expect "no managed file: project $key accepted" 0 '"sandboxed"' \
            "$SLUICE" explain --settings "$P" --json
    done

    rt4_cases
    echo '{}' > "$P"

    # the managed file itself may weaken it; explain names it and its keys
    echo '{}' > "$P"
    expect "managed file: explain names the file and the locked keys" 0 \
        '/etc/sluice/managed\.json is applied last and locks the boundary: only it may open the host network' \
        with_managed "$M" "$SLUICE" explain --settings "$P"
    expect "managed file: explain lists the keys it fixes" 0 \
        'Keys it fixes: network\.deniedDomains, sandbox\.allowUnsandboxedCommands' \
        with_managed "$M" "$SLUICE" explain --settings "$P"
    out=$(with_managed "$M" "$SLUICE" explain --settings "$P" --json 2>&1)
    python3 -c 'import json, sys
m = json.loads(sys.argv[1])["managed"]
assert m["file"] == "/etc/sluice/managed.json" and m["locked"], m
assert "network.isolate" in m["locked_keys"] and "network.mode" in m["locked_keys"], m
assert m["keys"] == ["network.deniedDomains", "sandbox.allowUnsandboxedCommands"], m' "$out" 2>"$T/py.err" &&
        ok "managed file: explain --json names the file, its keys and the locked keys" ||
        bad "managed file: explain --json" "$out$(cat "$T/py.err")"
    # a managed file silent on allowUnsandboxedCommands: bypass is not honoured
    echo '{"network": {"deniedDomains": ["blocked.example"]}}' > "$T/silent.json"
    expect "managed file silent on allowUnsandboxedCommands: --dangerously-disable-sandbox not honoured" 0 \
        '"dangerously_disable_sandbox_honoured": false' \
        with_managed "$T/silent.json" "$SLUICE" explain --json
    echo '{"network": {"isolate": false, "mode": "report"}, "sandbox": {"allowUnsandboxedCommands": true}}' > "$T/open.json"
    expect "managed file: may open the network itself" 0 'THE NETWORK IS OPEN' \
        with_managed "$T/open.json" "$SLUICE" explain

    # report mode (set by the managed file) never lifts the managed file's
    # own deny rules (item 7): its denied name gets 403 and is not dialed,
    # while a name only the user's rules deny is reported and reached.
    # Loopback only: the names resolve (local dnsmasq) to 127.0.0.3, which
    # an IP rule allows.
    report_managed_deny

    # without a managed file nothing changes
    echo '{"network": {"isolate": false}}' > "$U"
    expect "no managed file: user network.isolate false still loads" 0 'THE NETWORK IS OPEN' \
        "$SLUICE" explain
    expect "no managed file: explain says there is none" 0 'Managed settings' "$SLUICE" explain
    rm -f "$U"
}

e2e_twice cases "$HERE/managed.sh" "$SLUICE"
e2e_finish
