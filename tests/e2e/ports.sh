#!/usr/bin/env bash
# tests/e2e/ports.sh - ports between the host and the sandbox (issue 26):
# `sluice run --publish` / network.publish (a dev server inside, fetched
# from the host with curl) and network.hostPorts (a host loopback service
# reached from inside only when listed), with the attacks an outsider
# would try: an unpublished port, another host port through a listed one,
# sluice's own ports, bad strings, a port that cannot be bound, sockets
# left after the run, a connection flood. Run as root it runs every case
# again as an unprivileged user (run-helpers/twice.sh). Everything is on
# 127.0.0.1 and ::1, except one case that binds 0.0.0.0 inside a network
# namespace of its own (root only).
set -uo pipefail
SLUICE=${1:?usage: ports.sh PATH/TO/sluice}
case $SLUICE in /*) ;; *) SLUICE=$(cd "$(dirname "$SLUICE")" && pwd)/$(basename "$SLUICE") ;; esac
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/lib.sh"
. "$HERE/run-helpers/twice.sh"

# listening TCP sockets on PORT (host's namespace), as ss prints them
listeners_on() { ss -Hltn "sport = :$1" 2>/dev/null; }

# wait_file F [SECONDS]
wait_file() {
    local i
    for i in $(seq $((${2:-10} * 20 * SLOW))); do [ -e "$1" ] && return 0; sleep 0.05; done
    return 1
}

cases() {
    local W=$T/work S=$T/s.json PH PO HP HP2 SP SP2 out rc pid log n base fds
    export XDG_RUNTIME_DIR=$T/xdg
    mkdir -p -m 700 "$XDG_RUNTIME_DIR"
    if [ "${SLUICE_E2E_ONLY:-}" = rt10 ]; then # only the rt-10 group
        echo '{}' > "$S"
        rt10
        return
    fi
    mkdir -p "$W/www" "$T/host" "$T/other"
    cd "$W" || return
    echo sandbox-server > "$W/www/hello.txt"
    echo sandbox-secret > "$W/secret.txt"
    echo host-origin > "$T/host/hello.txt"
    echo other-origin > "$T/other/hello.txt"

    # host loopback services: PH (will be listed), PO (never listed)
    PH=$(free_port); PO=$(free_port)
    python3 -m http.server --bind 127.0.0.1 --directory "$T/host" "$PH" >/dev/null 2>&1 &
    PIDS+=($!)
    python3 -m http.server --bind 127.0.0.1 --directory "$T/other" "$PO" >/dev/null 2>&1 &
    PIDS+=($!)
    for i in $(seq 100); do
        curl -s --noproxy '*' "http://127.0.0.1:$PH/hello.txt" >/dev/null &&
            curl -s --noproxy '*' "http://127.0.0.1:$PO/hello.txt" >/dev/null && break
        sleep 0.1
    done
    echo '{}' > "$S"

    # --- publish: a dev server inside, fetched from the host ----------------------------
    HP=$(free_port); HP2=$(free_port); SP=18000; SP2=18001
    log=$T/pub.log
    rm -f ready stop
    # the command: the published server (www) and an unpublished one (the
    # working directory, with secret.txt), until the host says stop
    "$SLUICE" run --settings "$S" --log "$log" --publish "$HP:$SP" -- sh -c "
        python3 -m http.server --bind 127.0.0.1 --directory www $SP >/dev/null 2>&1 &
        python3 -m http.server --bind 127.0.0.1 --directory . $SP2 >/dev/null 2>&1 &
        for i in \$(seq 200); do
            curl -s --noproxy '*' http://127.0.0.1:$SP/hello.txt >/dev/null &&
                curl -s --noproxy '*' http://127.0.0.1:$SP2/secret.txt >/dev/null && break
            sleep 0.05
        done
        touch ready
        for i in \$(seq 400); do [ -e stop ] && break; sleep 0.05; done
        kill %1 %2" 2>"$T/pub.err" &
    pid=$!
    if wait_file ready 20; then
        out=$(curl -sS --max-time 5 --noproxy '*' "http://127.0.0.1:$HP/hello.txt" 2>&1)
        [ "$out" = sandbox-server ] && ok "publish: the sandbox's server is fetched from the host" ||
            bad "publish fetch" "$out $(cat "$T/pub.err")"
        out=$(curl -sS --max-time 5 --noproxy '*' -g "http://[::1]:$HP/hello.txt" 2>&1)
        case $out in sandbox-server) bad "publish: bound to 127.0.0.1 only, not ::1" "$out" ;;
        *) ok "publish: the default address is 127.0.0.1 (not ::1)" ;; esac
        out=$(listeners_on "$HP")
        if [ "$(printf '%s\n' "$out" | grep -c .)" = 1 ] && printf '%s' "$out" | grep -q "127.0.0.1:$HP"; then
            ok "publish: the host listener is 127.0.0.1:$HP and nothing else"
        else bad "publish: host listeners" "$out"; fi
        out=$(listeners_on "$SP2")$(listeners_on "$SP")
        [ -z "$out" ] && ok "publish: the sandbox's ports are not the host's (no listener on $SP or $SP2)" ||
            bad "sandbox ports on the host" "$out"
        out=$(curl -sS --max-time 3 --noproxy '*' "http://127.0.0.1:$SP2/secret.txt" 2>&1)
        case $out in *sandbox-secret*) bad "unpublished port reachable" "$out" ;;
        *) ok "publish: an unpublished sandbox port is unreachable from the host" ;; esac
        # the relay has one target: a request naming another port still
        # reaches SP (the dev server answers it, with its files)
        out=$(curl -sS --max-time 5 --noproxy '' -x "http://127.0.0.1:$HP" "http://127.0.0.1:$SP2/secret.txt" 2>&1)
        case $out in *sandbox-secret*) bad "publish: a proxy request reached another port" "$out" ;;
        *) ok "publish: a proxy-style request through it reaches only SANDBOX_PORT" ;; esac
        out=$(printf 'CONNECT 127.0.0.1:%s HTTP/1.1\r\nHost: x\r\n\r\nGET /secret.txt HTTP/1.0\r\n\r\n' "$SP2" |
            timeout 5 python3 -c '
import socket,sys
s=socket.create_connection(("127.0.0.1",int(sys.argv[1])),timeout=4)
s.sendall(sys.stdin.buffer.read()); s.shutdown(socket.SHUT_WR)
d=b""
while True:
    b=s.recv(65536)
    if not b: break
    d+=b
print(d.decode("latin-1"))' "$HP" 2>&1)
        case $out in *sandbox-secret*) bad "publish: CONNECT reached another port" "$out" ;;
        *) ok "publish: CONNECT through it is not followed" ;; esac
        # a flood from the host waits in the backlog: sluice's descriptors stay bounded
        fds=$(ls /proc/$pid/fd 2>/dev/null | wc -l)
        out=$(timeout 20 python3 - "$HP" "$pid" <<'PY'
import socket, sys, os, time
port, pid = int(sys.argv[1]), sys.argv[2]
socks = []
for i in range(600):
    try:
        s = socket.socket(); s.setblocking(False)
        s.connect_ex(("127.0.0.1", port)); socks.append(s)
    except OSError:
        break
time.sleep(1.5)
print(len(os.listdir("/proc/%s/fd" % pid)))
for s in socks: s.close()
PY
)
        # at most 256 relayed connections per published port (2 descriptors
        # each): the rest wait in the kernel's backlog
        if [ -n "$out" ] && [ "$out" -le $((fds + 2 * 256 + 8)) ]; then
            ok "publish: a 600-connection flood is bounded ($fds -> $out descriptors)"
        else bad "publish flood" "descriptors $fds -> $out"; fi
        sleep 0.5
        out=$(curl -sS --max-time 10 --noproxy '*' "http://127.0.0.1:$HP/hello.txt" 2>&1)
        [ "$out" = sandbox-server ] && ok "publish: served again after the flood" ||
            bad "publish after flood" "$out"
    else
        bad "publish: the sandbox's servers did not start" "$(cat "$T/pub.err")"
    fi
    touch stop
    wait_exit "$pid" 20 || { kill -9 "$pid"; bad "publish run did not end"; }
    grep -q "protocol=publish host=127.0.0.1 port=$SP .*end=done" "$log" &&
        ok "publish: each connection is logged (protocol=publish)" || bad "publish log" "$(cat "$log")"
    # the helper that made sockets in the sandbox's namespace is gone too
    out=$(PAT="$HP:$SP" python3 -c '
import glob, os
for f in glob.glob("/proc/[0-9]*/cmdline"):
    try:
        if os.environ["PAT"].encode() in open(f, "rb").read().split(b"\0"):
            print(f)
    except OSError:
        pass')
    [ -z "$out" ] && ok "publish: no process of the run is left (the namespace helper ended)" ||
        bad "process left after the run" "$out"
    out=$(listeners_on "$HP")
    [ -z "$out" ] && ok "publish: nothing listens on the host port after the run" ||
        bad "listener left after the run" "$out"
    out=$(curl -sS --max-time 3 --noproxy '*' "http://127.0.0.1:$HP/hello.txt" 2>&1)
    case $out in *sandbox-server*) bad "reachable after the run" "$out" ;;
    *) ok "publish: unreachable after the run" ;; esac

    # network.publish, [::1] and a second port, from the settings file
    cat > "$T/pub.json" <<JSON
{"network": {"publish": ["[::1]:$HP2:$SP"]}}
JSON
    if python3 -c 'import socket; s=socket.socket(socket.AF_INET6); s.bind(("::1",0))' 2>/dev/null; then
        rm -f ready stop
        "$SLUICE" run --settings "$T/pub.json" -- sh -c "
            python3 -m http.server --bind 127.0.0.1 --directory www $SP >/dev/null 2>&1 &
            for i in \$(seq 200); do curl -s --noproxy '*' http://127.0.0.1:$SP/ >/dev/null && break; sleep 0.05; done
            touch ready
            for i in \$(seq 400); do [ -e stop ] && break; sleep 0.05; done
            kill %1" 2>"$T/pub6.err" &
        pid=$!
        if wait_file ready 20; then
            out=$(curl -sS --max-time 5 --noproxy '*' -g "http://[::1]:$HP2/hello.txt" 2>&1)
            [ "$out" = sandbox-server ] && ok "network.publish [::1]:PORT:PORT is fetched over IPv6" ||
                bad "publish [::1]" "$out $(cat "$T/pub6.err")"
        else bad "publish [::1]: the server did not start" "$(cat "$T/pub6.err")"; fi
        touch stop
        wait_exit "$pid" 20 || kill -9 "$pid"
    else
        skip "network.publish [::1]" "no IPv6 loopback on this host"
    fi

    # --- bad strings and failures: exit 125, the command never ran -------------------------
    # refused NAME PATTERN SETTINGS [OPTION...]: `sluice run` exits 125 with
    # PATTERN (grep -E) on stderr and the command (touch ran) never ran
    refused() {
        local name=$1 pat=$2 set=$3 out rc
        shift 3
        rm -f ran
        out=$("$SLUICE" run --settings "$set" "$@" -- touch ran 2>&1); rc=$?
        if [ "$rc" = 125 ] && [ ! -e ran ] && grep -qE -- "$pat" <<<"$out"; then ok "$name"
        else bad "$name" "rc=$rc ran=$([ -e ran ] && echo yes) $out"; fi
        rm -f ran
    }
    for v in 0:80 65536:80 80:0 80:65536 8080 abc:80 localhost:8080:80 ::1:8080:80 080:80 \
             "8080:80 " 8080:3128 8080:1080 8080:53 "[::1]8080:80" ""; do
        refused "--publish '$v' is refused (125)" \
            "--publish '.*': (HOST_PORT|SANDBOX_PORT|HOST_ADDR|expected)" "$S" --publish "$v"
    done
    refused "a host port published twice is refused" "published twice" \
        "$S" --publish "$HP:80" --publish "127.0.0.2:$HP:81"
    echo "{\"network\": {\"publish\": [\"$HP:80\"]}}" > "$T/dup.json"
    refused "the same host port in network.publish and --publish is refused" "published twice" \
        "$T/dup.json" --publish "$HP:81"
    echo '{"network": {"publish": ["8080:80", "8080:81"]}}' > "$T/bad.json"
    refused "network.publish errors name FILE:LINE:COL and the entry" \
        'bad\.json:1:[0-9]+: network\.publish\[1\]' "$T/bad.json"
    # a host port that is taken: an error before the command starts
    refused "a host port that cannot be bound fails the run before the command" \
        "cannot publish sandbox port $SP on 127\\.0\\.0\\.1:$PH" "$S" --publish "$PH:$SP"
    for v in 3128 1080 53; do
        echo "{\"network\": {\"hostPorts\": [$v]}}" > "$T/own.json"
        refused "network.hostPorts [$v] (sluice's own port in the sandbox) is refused at load" \
            "own\\.json:1:.*sluice's own listeners" "$T/own.json"
    done
    for v in 0 65536 '"80"' 80.5; do
        echo "{\"network\": {\"hostPorts\": [$v]}}" > "$T/hpbad.json"
        refused "network.hostPorts [$v] is refused" 'hpbad\.json:1:.*network\.hostPorts\[0\]' "$T/hpbad.json"
    done
    echo "{\"network\": {\"hostPorts\": [$PH]}}" > "$T/hp1.json"
    echo "{\"network\": {\"hostPorts\": [$PH], \"publish\": [\"$PH:80\"]}}" > "$T/loop.json"
    refused "a host port both listed and published is refused" "also a published host port" "$T/loop.json"
    echo "{\"network\": {\"hostPorts\": [$PH], \"publish\": [\"[::1]:$PH:80\"]}}" > "$T/loop6.json"
    refused "... whatever address it is published on" "also a published host port" "$T/loop6.json"
    refused "a listed host port that is also a published SANDBOX_PORT is refused" \
        "also a published SANDBOX_PORT" "$T/hp1.json" --publish "$HP2:$PH"
    echo "{\"network\": {\"isolate\": false, \"hostPorts\": [$PH]}}" > "$T/iso.json"
    refused "network.hostPorts with network.isolate false is refused" "need the sandbox's own network" \
        "$T/iso.json"

    # an explicit address outside loopback: a warning (in a namespace of its own)
    if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null; then
        out=$(unshare -n sh -c "ip link set lo up; '$SLUICE' run --settings '$S' --publish 0.0.0.0:$HP:$SP -- true" 2>&1); rc=$?
        [ "$rc" = 0 ] && printf '%s' "$out" | grep -q "warning: sandbox port $SP is published on 0.0.0.0:$HP, outside the host's loopback" &&
            ok "a non-loopback HOST_ADDR is used only when written, with a warning" ||
            bad "non-loopback publish warning" "rc=$rc $out"
    else
        skip "non-loopback HOST_ADDR warning" "needs root for a network namespace of its own"
    fi

    # --- hostPorts: the host's loopback service, only when listed -----------------------------
    log=$T/hp.log
    cat > "$T/hp.json" <<JSON
{"network": {"hostPorts": [$PH]}}
JSON
    out=$("$SLUICE" run --settings "$T/hp.json" --log "$log" -- sh -c "
        curl -sS --max-time 5 --noproxy '*' http://127.0.0.1:$PH/hello.txt
        curl -sS --max-time 5 --noproxy '*' http://127.0.0.1:$PO/hello.txt 2>/dev/null || echo PO-unreachable
        curl -sS --max-time 5 --noproxy '' -x http://127.0.0.1:$PH http://127.0.0.1:$PO/hello.txt 2>/dev/null | grep -q other-origin && echo PO-via-PH
        ip -6 addr show dev lo 2>/dev/null | grep -q '::1' && { curl -sS --max-time 5 --noproxy '*' -g http://[::1]:$PH/hello.txt || echo v6-failed; }
        true" 2>"$T/hp.err")
    printf '%s\n' "$out" | grep -qx host-origin && ok "hostPorts: a listed host port is reached at 127.0.0.1:PORT inside" ||
        bad "hostPorts reach" "$out $(cat "$T/hp.err")"
    printf '%s\n' "$out" | grep -qx PO-unreachable && ok "hostPorts: an unlisted host port is unreachable" ||
        bad "hostPorts unlisted" "$out"
    printf '%s\n' "$out" | grep -q PO-via-PH && bad "hostPorts: another host port reached through a listed one" "$out" ||
        ok "hostPorts: a listed port leads only to host 127.0.0.1:PORT (no proxying to another)"
    printf '%s\n' "$out" | grep -q v6-failed && bad "hostPorts [::1]" "$out" || ok "hostPorts: [::1]:PORT too when the sandbox has IPv6"
    n=$(grep -c "protocol=hostport host=127.0.0.1 port=$PH " "$log" 2>/dev/null)
    grep -q "protocol=hostport" "$log" && ! grep "protocol=hostport" "$log" | grep -vq "host=127.0.0.1 port=$PH " &&
        ok "hostPorts: each connection is logged, every one to 127.0.0.1:$PH ($n)" || bad "hostPorts log" "$(cat "$log")"
    out=$("$SLUICE" run --settings "$S" -- sh -c "
        curl -sS --max-time 5 --noproxy '*' http://127.0.0.1:$PH/hello.txt 2>/dev/null || echo PH-unreachable" 2>&1)
    [ "$out" = PH-unreachable ] && ok "hostPorts: none unless listed" || bad "hostPorts default" "$out"
    # a host port is no domain rule: the proxies still refuse it
    out=$("$SLUICE" run --settings "$T/hp.json" -- sh -c "
        curl -sS --max-time 5 --noproxy '' -x http://127.0.0.1:3128 http://127.0.0.1:$PH/hello.txt 2>/dev/null | grep -q host-origin && echo via-proxy; true" 2>&1)
    case $out in *via-proxy*) bad "hostPorts opened the proxy to the port" "$out" ;;
    *) ok "hostPorts: listing a port adds no rule to the proxies" ;; esac
    # a flood from inside: sluice relays at most 256 at once to the host
    rm -f ready stop
    "$SLUICE" run --settings "$T/hp.json" -- python3 -c "
import socket, os, time
socks = []
for i in range(400):
    s = socket.socket(); s.setblocking(False)
    s.connect_ex(('127.0.0.1', $PH)); socks.append(s)
time.sleep(1.5)
open('ready', 'w').close()
for i in range(200):
    if os.path.exists('stop'): break
    time.sleep(0.05)
" 2>"$T/hpflood.err" &
    pid=$!
    if wait_file ready 20; then
        n=$(ls /proc/$pid/fd 2>/dev/null | wc -l)
        [ "$n" -gt 0 ] && [ "$n" -le $((40 + 2 * 256 + 8)) ] &&
            ok "hostPorts: a 400-connection flood from inside is bounded ($n descriptors)" ||
            bad "hostPorts flood" "$n descriptors $(cat "$T/hpflood.err")"
    else bad "hostPorts flood: the command did not start" "$(cat "$T/hpflood.err")"; fi
    touch stop
    wait_exit "$pid" 20 || kill -9 "$pid"
    out=$(curl -sS --max-time 5 --noproxy '*' "http://127.0.0.1:$PH/hello.txt" 2>&1)
    [ "$out" = host-origin ] && ok "hostPorts: the host service still answers after the flood" ||
        bad "host service after flood" "$out"
    # the command cannot take over a listed port inside (no SO_REUSEPORT),
    # even where it may bind
    cat > "$T/hpbind.json" <<JSON
{"network": {"hostPorts": [$PH], "allowLocalBinding": true}}
JSON
    out=$("$SLUICE" run --settings "$T/hpbind.json" -- python3 -c "
import socket
for fam, a in ((socket.AF_INET, '127.0.0.1'),):
    s = socket.socket(fam); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        s.bind((a, $PH)); s.listen(); print('bound')
    except OSError as e:
        print('refused', e.errno)
" 2>&1)
    case $out in refused*) ok "hostPorts: the command cannot bind the listed port beside sluice" ;;
    *) bad "hostPorts port taken over" "$out" ;; esac
    rt10
}

# --- rt-10 (tests/e2e/rt-10-report.md): the namespace helper, the port races,
# backpressure both ways, two runs on one host port, SIGKILL of sluice. One
# run (run-helpers/rt10_ports.py drives the command's side in phases).
# rss PID: VmRSS in kB
rss() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null; }
# host_try TARGET...: one line per TARGET. PORT or PORT/6: connect to
# 127.0.0.1 (or [::1]), send, print what came back (or the error);
# flood/PORT/SECONDS: send FLOOD and then what the kernel takes (nobody
# reads on the far side), print the bytes sent. One python: its start-up is
# slow on a loaded machine.
host_try() {
    timeout 30 "$PY" - "$@" <<'PY'
import socket, sys, time
for t in sys.argv[1:]:
    a = t.split("/")
    try:
        if a[0] == "flood":
            s = socket.create_connection(("127.0.0.1", int(a[1])), timeout=5)
            s.sendall(b"FLOOD"); s.setblocking(False)
            sent, buf, end = 5, b"x" * 65536, time.time() + float(a[2])
            while time.time() < end:
                try:
                    sent += s.send(buf)
                except BlockingIOError:
                    time.sleep(0.01)
            print(sent, flush=True)
            continue
        fam = socket.AF_INET6 if a[1:] == ["6"] else socket.AF_INET
        s = socket.socket(fam); s.settimeout(4)
        s.connect(("::1" if fam == socket.AF_INET6 else "127.0.0.1", int(a[0])))
        s.sendall(b"hello\n")
        print(s.recv(300).decode("latin-1").strip().split(" ")[0] or "EOF", flush=True)
    except OSError as e:
        print("error", e.errno if e.errno is not None else e, flush=True)
PY
}

rt10() {
    local PY PS HP3 SP=18010 SP2=18020 spid helper cmdpid out rc r0 r1 sent kv i
    local W=$T/rt10 MB=$((64 * 1024 * 1024))
    mkdir -p "$W" && chmod 777 "$W"
    cd "$W" || return
    rm -f p1 p2 h1 stop rt10.out
    # the listed host port: answers PING with PONG, never reads after FLOOD
    # python itself (not a shim: a pyenv shim costs seconds a start) and two
    # free ports, from one start
    read -r PY PS HP3 < <(python3 -c '
import socket, sys
a, b = socket.socket(), socket.socket()
a.bind(("127.0.0.1", 0)); b.bind(("127.0.0.1", 0))
print(sys.executable, a.getsockname()[1], b.getsockname()[1])')
    "$PY" - "$PS" >/dev/null 2>&1 <<'PY' &
import socket, sys, threading
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", int(sys.argv[1]))); srv.listen(64)
held = []
def one(c):
    d = c.recv(5)
    if d.startswith(b"PING"):
        c.sendall(b"PONG\n"); c.close()
    else:
        held.append(c)
while True:
    c, _ = srv.accept()
    threading.Thread(target=one, args=(c,), daemon=True).start()
PY
    PIDS+=($!)
    echo "{\"network\": {\"hostPorts\": [$PS]}}" > "$T/rt10.json"
    "$SLUICE" run --settings "$T/rt10.json" --log "$T/rt10.log" --publish "$HP3:$SP" -- \
        "$PY" "$HERE/run-helpers/rt10_ports.py" "$SP" "$SP2" "$PS" 2>"$T/rt10.err" &
    spid=$!
    kv() { sed -n "s/^$1=//p" "$W/rt10.out" 2>/dev/null | tail -1; }
    if ! wait_file "$W/p1" 20; then
        bad "rt10: the command did not start" "$(cat "$T/rt10.err")"
        kill -9 "$spid"; wait "$spid" 2>/dev/null; return
    fi
    # the helper: sluice's child that is neither bwrap nor the reaper
    helper=
    cmdpid=$(pgrep -f "^[^ ]*python3 [^ ]*rt10_ports.py $SP $SP2 $PS" | head -1)
    for i in $(cat /proc/"$spid"/task/*/children 2>/dev/null); do
        [ "$(cat /proc/$i/comm 2>/dev/null)" = sluice ] && helper=$i
    done
    if [ -n "$helper" ] && [ -n "$cmdpid" ]; then
        local me=$(readlink /proc/self/ns/pid)
        out="nspid=$(awk '/^NSpid:/ {print NF - 1}' /proc/$helper/status)"
        out="$out cmd_pidns=$([ "$(readlink /proc/$cmdpid/ns/pid)" = "$me" ] && echo host || echo other)"
        if [ "$(id -u)" = 0 ]; then
            # root reads it: one descriptor (3, the socket to sluice), the
            # host's pid and mount namespaces, the sandbox's network
            out="$out fds=$(ls /proc/$helper/fd | tr '\n' ' ')"
            out="$out pidns=$([ "$(readlink /proc/$helper/ns/pid)" = "$me" ] && echo host || echo other)"
            out="$out mntns=$([ "$(readlink /proc/$helper/ns/mnt)" = "$(readlink /proc/self/ns/mnt)" ] && echo host || echo other)"
            out="$out netns=$([ "$(readlink /proc/$helper/ns/net)" = "$(readlink /proc/$cmdpid/ns/net)" ] && echo sandbox || echo other)"
            [ "$out" = "nspid=1 cmd_pidns=other fds=3  pidns=host mntns=host netns=sandbox" ]
        else
            # non-dumpable: not even its own uid on the host may look inside
            out="$out fds=$(ls /proc/$helper/fd 2>&1 | grep -c 'Permission denied')"
            [ "$out" = "nspid=1 cmd_pidns=other fds=1" ]
        fi &&
            ok "rt10: the namespace helper holds only its socket to sluice, is non-dumpable and outside the command's pid and mount namespaces (the command cannot name, signal, ptrace or read it)" ||
            bad "rt10: the namespace helper" "$out"
    else
        bad "rt10: no namespace helper found" "helper=$helper cmd=$cmdpid"
    fi
    # phase 1: SP is held by a UDP socket and a [::1]-only listener
    out=$(host_try "$HP3")
    case $out in peer=*|*udp*) bad "rt10: a published connection reached a socket that is not a TCP listener on 127.0.0.1:SP" "$out" ;;
    *) ok "rt10: with SP held by UDP and a [::1]-only listener, the published port leads nowhere ($out)" ;; esac
    r0=$(rss "$spid")
    touch h1
    wait_file p2 20 || bad "rt10: phase 2 did not start" "$(cat rt10.out "$T/rt10.err")"
    [ "$(kv phase1_arrived)" = nothing ] &&
        ok "rt10: nothing arrived on the command's UDP or [::1] sockets" ||
        bad "rt10: phase 1 arrivals" "$(kv phase1_arrived)"
    case $(kv unix) in refused-*) ok "rt10: publish's allowLocalBinding gives no Unix socket server ($(kv unix))" ;;
    *) bad "rt10: the command listens on a Unix socket in its working directory" "$(kv unix)" ;; esac
    # phase 2: a server bound after the run started gets connections; the
    # peer it sees is the sandbox's loopback, not the host client
    # a second run publishing the same host port: refused before its command;
    # the batch below shows the first still serves
    out=$("$SLUICE" run --settings "$S" --publish "$HP3:$SP" -- touch "$W/ran2" 2>&1); rc=$?
    if [ "$rc" = 125 ] && [ ! -e "$W/ran2" ] && grep -q "cannot publish sandbox port $SP on 127.0.0.1:$HP3" <<<"$out"; then
        ok "rt10: a second run publishing the same host port is refused (125)"
    else bad "rt10: two runs on one host port" "rc=$rc $out"; fi
    # all from one python: SP (publish), SP2 and SP2+1 (not published, on
    # 0.0.0.0 and [::]), then a publish flood
    out=$(host_try "$HP3" "$SP2" $((SP2 + 1)) $((SP2 + 1))/6 "flood/$HP3/2")
    r1=$(rss "$spid")
    local pubflood=$(sed -n 5p <<<"$out")
    case $(sed -n 1p <<<"$out") in "peer=127.0.0.1:"*) ok "rt10: a server bound after the start is served (the second run did not disturb it); its peer is 127.0.0.1 in the sandbox" ;;
    *) bad "rt10: publish after a rebind" "$out" ;; esac
    case $(sed -n 2,4p <<<"$out") in *peer=*) bad "rt10: an unpublished 0.0.0.0/[::] server of the sandbox is reachable from the host" "$out" ;;
    *) ok "rt10: the command's 0.0.0.0 and [::] servers are not reachable from the host ($(sed -n 2,4p <<<"$out" | tr '\n' /))" ;; esac
    out=$(kv take_ps)
    case $out in *"0.0.0.0/None:bound"*|*"::/0:bound"*|*"::1/1:bound"*|*"127.0.0.1/None:bound"*)
        bad "rt10: the command took the listed host port inside" "$out" ;;
    *) ok "rt10: the listed host port cannot be taken inside (0.0.0.0, [::] dual stack, [::1], 127.0.0.1, with SO_REUSEADDR|SO_REUSEPORT): $out" ;; esac
    [ "$(kv mapped_ps)" = PONG ] && [ -z "$(grep "protocol=hostport" "$T/rt10.log" | grep -v "host=127.0.0.1 port=$PS ")" ] &&
        ok "rt10: [::ffff:127.0.0.1]:PS leads to the host's 127.0.0.1:PS and nowhere else" ||
        bad "rt10: v4-mapped hostPorts" "$(kv mapped_ps) $(grep protocol=hostport "$T/rt10.log")"
    sent=$(kv flood_sent)
    out=$pubflood
    if [ -n "$sent" ] && [ "$sent" -lt $MB ] && [ -n "$out" ] && [ "$out" -lt $MB ] &&
        [ -n "$r0" ] && [ -n "$r1" ] && [ $((r1 - r0)) -lt 32768 ]; then
        ok "rt10: backpressure both ways: a reader that never reads holds the writer (hostPorts $sent B, publish $out B, sluice RSS ${r0}k -> ${r1}k)"
    else bad "rt10: backpressure" "hostPorts sent=$sent publish sent=$out rss=$r0 -> $r1"; fi
    # SIGKILL of sluice: no listener, no helper, no command left
    kill -9 "$spid"
    wait "$spid" 2>/dev/null
    for i in $(seq 100); do
        [ ! -e "/proc/$helper" ] && [ ! -e "/proc/$cmdpid" ] && [ -z "$(listeners_on "$HP3")" ] && break
        sleep 0.05
    done
    out="helper=$([ -e "/proc/$helper" ] && echo alive) cmd=$([ -e "/proc/$cmdpid" ] && echo alive) listener=$(listeners_on "$HP3")"
    [ "$out" = "helper= cmd= listener=" ] &&
        ok "rt10: SIGKILL of sluice leaves no helper, no command and no listener on the host port" ||
        bad "rt10: left after SIGKILL of sluice" "$out"
    touch stop
    cd "$T" || true
}

trap 'e2e_cleanup' EXIT
start=$SECONDS
e2e_twice cases "$HERE/ports.sh" "$SLUICE"
echo "# ports.sh took $((SECONDS - start)) s"
e2e_finish
