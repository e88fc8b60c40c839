#!/usr/bin/env bash
# End-to-end tests of `sluice bridge`: the real binary between real sockets,
# in all four directions (tcp->unix, unix->tcp, tcp->tcp, unix->unix), with
# python3 echo origins and curl against python's http.server. Only
# 127.0.0.1 and unix sockets in the private temporary directory are used.
set -uo pipefail
SLUICE=${1:?usage: bridge.sh PATH/TO/sluice}
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
PIDS=()
cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
    rm -rf "$T"
}
trap cleanup EXIT

if ! command -v python3 >/dev/null; then
    echo "1..0 # SKIP python3 is needed for the origin servers"
    exit 0
fi

# ---- helpers ---------------------------------------------------------------

# Origin: echo server. echo.py tcp READYFILE (writes the port) | unix PATH READYFILE
cat > "$T/echo.py" <<'PY'
import os, socket, sys, threading
kind, where = sys.argv[1], sys.argv[2]
if kind == "tcp":
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    ready, info = sys.argv[3], str(s.getsockname()[1])
else:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(where)
    ready, info = sys.argv[3], where
s.listen(128)
with open(ready + ".tmp", "w") as f:
    f.write(info)
os.rename(ready + ".tmp", ready)
def serve(c):
    try:
        while True:
            d = c.recv(262144)
            if not d:
                break
            c.sendall(d)
        c.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
PY

# Clients. ENDPOINT is tcp:127.0.0.1:PORT or unix:PATH.
cat > "$T/client.py" <<'PY'
import socket, sys, threading, time
def conn(ep):
    if ep.startswith("unix:"):
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.connect(ep[5:])
    else:
        host, port = ep[4:].rsplit(":", 1)
        c = socket.create_connection((host, int(port)))
    return c
def read_all(c, out):
    while True:
        d = c.recv(262144)
        if not d:
            return
        out.append(d)
mode, ep = sys.argv[1], sys.argv[2]
if mode == "echo":  # send INFILE (half-close after), write what comes back to OUTFILE
    data = open(sys.argv[3], "rb").read()
    c = conn(ep)
    got = []
    t = threading.Thread(target=read_all, args=(c, got))
    t.start()
    c.sendall(data)
    c.shutdown(socket.SHUT_WR)
    t.join()
    open(sys.argv[4], "wb").write(b"".join(got))
elif mode == "refused":  # the upstream is down: what does the client see?
    c = conn(ep)
    try:
        c.sendall(b"hello")
        d = c.recv(100)
        print("EOF" if d == b"" else "DATA")
    except ConnectionResetError:
        print("RESET")
elif mode == "maxconns":  # N held connections, then one more
    n = int(sys.argv[3])
    held = []
    for i in range(n):
        c = conn(ep)
        c.sendall(b"ping%d" % i)
        c.settimeout(5)
        if c.recv(100) != b"ping%d" % i:
            print("held connection %d not served" % i); sys.exit(1)
        held.append(c)
    extra = conn(ep)  # connects (kernel backlog) but must not be served yet
    extra.sendall(b"extra")
    extra.settimeout(0.7)
    try:
        d = extra.recv(100)
        print("extra served while at the limit: %r" % d); sys.exit(1)
    except socket.timeout:
        pass
    held[0].close()
    extra.settimeout(5)
    t0 = time.time()
    d = extra.recv(100)
    print("extra served after a slot freed: %r in %.2fs" % (d, time.time() - t0))
    sys.exit(0 if d == b"extra" else 1)
elif mode == "hold":  # connect, prove the relay works, then wait for EOF
    c = conn(ep)
    c.sendall(b"x")
    c.settimeout(10)
    if c.recv(1) != b"x":
        sys.exit(1)
    print("relayed", flush=True)  # the connection is up: bridge.sh may stop the bridge now
    t0 = time.time()
    try:
        d = c.recv(100)
        print("closed after %.2fs: %s" % (time.time() - t0, "EOF" if d == b"" else "DATA"))
    except ConnectionResetError:
        print("closed after %.2fs: RESET" % (time.time() - t0))
PY

# wait_file PATH: up to 5 s.
wait_file() {
    local i
    for i in $(seq 1 100); do [ -e "$1" ] && return 0; sleep 0.05; done
    return 1
}

# start_origin NAME tcp|unix: sets ORIGIN (an endpoint string).
start_origin() {
    local name=$1 kind=$2
    if [ "$kind" = tcp ]; then
        python3 "$T/echo.py" tcp - "$T/$name.ready" & PIDS+=($!)
        wait_file "$T/$name.ready" || { echo "origin $name did not start"; exit 1; }
        ORIGIN="tcp:127.0.0.1:$(cat "$T/$name.ready")"
    else
        python3 "$T/echo.py" unix "$T/$name.sock" "$T/$name.ready" & PIDS+=($!)
        wait_file "$T/$name.ready" || { echo "origin $name did not start"; exit 1; }
        ORIGIN="unix:$T/$name.sock"
    fi
}

# start_bridge NAME ARGS...: runs sluice bridge with stderr in $T/NAME.log,
# waits for the startup line, sets BRIDGE_PID and LISTEN (the bound endpoint).
start_bridge() {
    local name=$1 i; shift
    "$SLUICE" bridge "$@" 2> "$T/$name.log" & BRIDGE_PID=$!
    PIDS+=("$BRIDGE_PID")
    LISTEN=
    for i in $(seq 1 $((100 * SLOW))); do
        LISTEN=$(sed -n 's/^sluice bridge: listening on \([^ ,]*\),.*/\1/p' "$T/$name.log")
        [ -n "$LISTEN" ] && return 0
        kill -0 "$BRIDGE_PID" 2>/dev/null || break
        sleep 0.05
    done
    echo "bridge $name did not start:"; cat "$T/$name.log"
    return 1
}

# stop_bridge PID: SIGTERM, returns its exit status.
stop_bridge() {
    kill -TERM "$1" 2>/dev/null
    wait "$1"
}

# wait_log FILE REGEX: up to 5 s.
wait_log() {
    local i
    for i in $(seq 1 100); do grep -qE -- "$2" "$1" 2>/dev/null && return 0; sleep 0.05; done
    return 1
}

# expect_run NAME WANT_STATUS WANT_REGEX CMD...
expect_run() {
    local name=$1 want=$2 re=$3; shift 3
    local out st
    out=$("$@" 2>&1); st=$?
    if [ "$st" -ne "$want" ]; then bad "$name (exit $st, want $want)" "$out"; return; fi
    if ! grep -qE -- "$re" <<< "$out"; then bad "$name (output)" "$out"; return; fi
    ok "$name"
}

# 6 MiB of random bytes, sent both ways at once through the echo origins.
head -c $((6 * 1024 * 1024)) /dev/urandom > "$T/big.bin"

start_origin otcp tcp;  OTCP=$ORIGIN
start_origin ounix unix; OUNIX=$ORIGIN

# ---- the four directions, byte-exact ---------------------------------------

direction() {
    local name=$1 listen=$2 origin=$3
    start_bridge "$name" "$listen" "$origin" || { bad "$name: bridge starts"; return; }
    rm -f "$T/out.bin"
    if ! timeout 60 python3 "$T/client.py" echo "$LISTEN" "$T/big.bin" "$T/out.bin"; then
        bad "$name: 6 MiB echo through the bridge" "$(cat "$T/$name.log")"
    elif ! cmp -s "$T/big.bin" "$T/out.bin"; then
        bad "$name: 6 MiB echo is byte-exact" "$(ls -l "$T/big.bin" "$T/out.bin")"
    else
        ok "$name: 6 MiB echo both ways, byte-exact"
    fi
    if wait_log "$T/$name.log" '^time=[^ ]+ level=info event=close id=1 client=[^ ]+ protocol=forward host=[^ ]+ (port=[0-9]+ )?bytes_up=6291456 bytes_down=6291456 duration_ms=[0-9]+ end=done$'; then
        ok "$name: log line with bytes both ways and 'done'"
    else
        bad "$name: log line" "$(cat "$T/$name.log")"
    fi
    stop_bridge "$BRIDGE_PID"; local st=$?
    if [ "$st" -eq 0 ]; then ok "$name: SIGTERM exits 0"; else bad "$name: SIGTERM exit $st"; fi
}

direction "tcp->unix" tcp:127.0.0.1:0 "$OUNIX"
direction "unix->tcp" "unix:$T/b-ut.sock" "$OTCP"
direction "tcp->tcp" tcp:127.0.0.1:0 "$OTCP"
direction "unix->unix" "unix:$T/b-uu.sock" "$OUNIX"
if [ ! -e "$T/b-ut.sock" ] && [ ! -e "$T/b-uu.sock" ]; then
    ok "unix listen sockets removed at exit"
else
    bad "unix listen sockets removed at exit" "$(ls -l "$T")"
fi

# Peers in the log: ip:port for tcp clients, "unix" for unix clients.
if grep -qE 'event=close id=1 client=127\.0\.0\.1:[0-9]+ ' "$T/tcp->tcp.log" && grep -qE 'event=close id=1 client=unix ' "$T/unix->tcp.log"; then
    ok "log names the peer (ip:port, or unix)"
else
    bad "log names the peer" "$(cat "$T/tcp->tcp.log" "$T/unix->tcp.log")"
fi

# ---- HTTP through the bridge with curl (download) --------------------------

mkdir -p "$T/www"
cp "$T/big.bin" "$T/www/big.bin"
python3 - "$T/http.ready" "$T/www" 2>/dev/null <<'PY' & PIDS+=($!)
import functools, http.server, os, sys
h = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[2])
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), h)
open(sys.argv[1] + ".tmp", "w").write(str(s.server_address[1]))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
s.serve_forever()
PY
if wait_file "$T/http.ready" && start_bridge http "unix:$T/http.sock" "tcp:127.0.0.1:$(cat "$T/http.ready")"; then
    if curl -sS --max-time 30 --unix-socket "$T/http.sock" -o "$T/dl.bin" http://origin/big.bin &&
        cmp -s "$T/big.bin" "$T/dl.bin"; then
        ok "curl --unix-socket through unix->tcp: 6 MiB download byte-exact"
    else
        bad "curl --unix-socket download" "$(cat "$T/http.log")"
    fi
    stop_bridge "$BRIDGE_PID" || bad "http bridge: SIGTERM exits 0"
else
    bad "http origin and bridge start"
fi

# ---- upstream down: a clean close for the client, a log line ---------------

FREE_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
start_bridge refused tcp:127.0.0.1:0 "tcp:127.0.0.1:$FREE_PORT"
expect_run "upstream refused: client sees EOF, not a reset" 0 '^EOF$' timeout 10 python3 "$T/client.py" refused "$LISTEN"
if wait_log "$T/refused.log" 'event=close id=1 client=127\.0\.0\.1:[0-9]+ protocol=forward host=127\.0\.0\.1 port=[0-9]+ bytes_up=0 bytes_down=0 duration_ms=[0-9]+ end="connect failed: ECONNREFUSED"$'; then
    ok "upstream refused: logged as 'connect failed: ECONNREFUSED'"
else
    bad "upstream refused: log line" "$(cat "$T/refused.log")"
fi
expect_run "bridge keeps serving after a refused dial" 0 '^EOF$' timeout 10 python3 "$T/client.py" refused "$LISTEN"
stop_bridge "$BRIDGE_PID" || bad "bridge $LISTEN: SIGTERM exits 0 (status $?)"

start_bridge refused-unix "unix:$T/b-ref.sock" "unix:$T/nobody.sock"
expect_run "unix upstream missing: client sees EOF" 0 '^EOF$' timeout 10 python3 "$T/client.py" refused "$LISTEN"
if wait_log "$T/refused-unix.log" 'client=unix .*end="connect failed: ENOENT"$'; then
    ok "unix upstream missing: logged as 'connect failed: ENOENT'"
else
    bad "unix upstream missing: log line" "$(cat "$T/refused-unix.log")"
fi
stop_bridge "$BRIDGE_PID" || bad "bridge $LISTEN: SIGTERM exits 0 (status $?)"

# ---- --max-conns ------------------------------------------------------------

start_bridge maxconns --max-conns 2 tcp:127.0.0.1:0 "$OTCP"
expect_run "--max-conns 2: the third waits until one ends, then is served" 0 "extra served after a slot freed: b'extra'" \
    timeout 20 python3 "$T/client.py" maxconns "$LISTEN" 2
stop_bridge "$BRIDGE_PID" || bad "bridge $LISTEN: SIGTERM exits 0 (status $?)"

start_bridge maxconns1 --max-conns=1 "unix:$T/b-max.sock" "$OUNIX"
expect_run "--max-conns=1 on a unix listener" 0 "extra served after a slot freed: b'extra'" \
    timeout 20 python3 "$T/client.py" maxconns "$LISTEN" 1
stop_bridge "$BRIDGE_PID" || bad "bridge $LISTEN: SIGTERM exits 0 (status $?)"

# ---- idle timeout and shutdown with live connections -----------------------

start_bridge idle --idle 0.5 tcp:127.0.0.1:0 "$OTCP"
expect_run "--idle 0.5 closes a silent connection" 0 '^closed after 0\.[4-9][0-9]s: EOF$|^closed after 1\.[0-9]+s: EOF$' \
    timeout 10 python3 "$T/client.py" hold "$LISTEN"
if wait_log "$T/idle.log" 'duration_ms=[0-9]+ end="idle timeout"$'; then ok "idle timeout logged"; else bad "idle timeout logged" "$(cat "$T/idle.log")"; fi
stop_bridge "$BRIDGE_PID" || bad "bridge $LISTEN: SIGTERM exits 0 (status $?)"

start_bridge shutdown "unix:$T/b-stop.sock" "$OTCP"
timeout 10 python3 "$T/client.py" hold "$LISTEN" > "$T/hold.out" 2>&1 & HOLD=$!
# the bridge is stopped once the connection is relaying (not after a fixed
# sleep, which under valgrind can come before the client got through)
wait_log "$T/shutdown.log" 'listening' && wait_for "$T/hold.out" '^relayed$' $((5 * SLOW))
kill -INT "$BRIDGE_PID"; wait "$BRIDGE_PID"; st=$?
wait "$HOLD"
if [ "$st" -eq 0 ] && grep -q 'closed after' "$T/hold.out" && grep -q 'SIGINT, closing 1 connection$' "$T/shutdown.log" &&
    grep -qE 'event=close id=1 client=unix .*bytes_up=1 bytes_down=1 duration_ms=[0-9]+ end="closed at shutdown"$' "$T/shutdown.log" &&
    [ ! -e "$T/b-stop.sock" ]; then
    ok "SIGINT with a live connection: closes it, removes the socket, exits 0"
else
    bad "SIGINT with a live connection (exit $st)" "$(cat "$T/shutdown.log" "$T/hold.out"; ls -l "$T")"
fi

# ---- unix listen path safety -----------------------------------------------

ln -s "$T/target.sock" "$T/link.sock"
expect_run "symlink at the listen path refused" 1 "cannot listen on unix:$T/link.sock: a symlink is at the socket path.*EEXIST" \
    "$SLUICE" bridge "unix:$T/link.sock" "$OTCP"
if [ -L "$T/link.sock" ] && [ "$(readlink "$T/link.sock")" = "$T/target.sock" ] && [ ! -e "$T/target.sock" ]; then
    ok "symlink left intact and not followed"
else
    bad "symlink left intact and not followed" "$(ls -l "$T")"
fi

start_bridge live "unix:$T/b-live.sock" "$OTCP"
expect_run "a live socket at the listen path is refused" 1 "another process is listening.*EADDRINUSE" \
    "$SLUICE" bridge "unix:$T/b-live.sock" "$OTCP"
kill -KILL "$BRIDGE_PID"; wait "$BRIDGE_PID" 2>/dev/null
if [ -S "$T/b-live.sock" ] && start_bridge stale "unix:$T/b-live.sock" "$OTCP"; then
    rm -f "$T/out.bin"
    printf 'stale' > "$T/small.bin"
    timeout 10 python3 "$T/client.py" echo "$LISTEN" "$T/small.bin" "$T/out.bin"
    if cmp -s "$T/small.bin" "$T/out.bin"; then ok "a stale socket (owner killed) is replaced"; else bad "stale socket replaced" "$(cat "$T/stale.log")"; fi
    stop_bridge "$BRIDGE_PID" || bad "bridge $LISTEN: SIGTERM exits 0 (status $?)"
else
    bad "stale socket replaced" "$(cat "$T/stale.log" 2>/dev/null)"
fi

printf 'data' > "$T/file.sock"
expect_run "a regular file at the listen path is refused" 1 "not a socket.*EEXIST" "$SLUICE" bridge "unix:$T/file.sock" "$OTCP"
[ "$(cat "$T/file.sock")" = data ] && ok "the regular file is left alone" || bad "the regular file is left alone"

mkdir -m 0777 "$T/open"; chmod 0777 "$T/open"
expect_run "a world-writable, non-sticky directory is refused" 1 "writable by others" "$SLUICE" bridge "unix:$T/open/b.sock" "$OTCP"

# ---- arguments ---------------------------------------------------------------

expect_run "help bridge" 0 '^usage: sluice bridge' "$SLUICE" help bridge
expect_run "bridge --help" 0 '^usage: sluice bridge' "$SLUICE" bridge --help
expect_run "no endpoints" 2 'missing LISTEN and CONNECT' "$SLUICE" bridge
expect_run "one endpoint" 2 'missing CONNECT endpoint' "$SLUICE" bridge tcp:127.0.0.1:0
expect_run "three endpoints" 2 "unexpected argument 'unix:/c'" "$SLUICE" bridge tcp:127.0.0.1:0 unix:/b unix:/c
expect_run "missing port" 2 "invalid CONNECT endpoint 'tcp:127.0.0.1': missing port" "$SLUICE" bridge tcp:127.0.0.1:0 tcp:127.0.0.1
expect_run "port out of range" 2 "port out of range 1-65535" "$SLUICE" bridge tcp:127.0.0.1:0 tcp:127.0.0.1:70000
expect_run "hostname refused" 2 "hostnames are not accepted, use an IP address" "$SLUICE" bridge tcp:127.0.0.1:0 tcp:localhost:80
expect_run "unknown scheme" 2 "unknown scheme 'udp' \(expected tcp:, unix: or fd:\)" "$SLUICE" bridge udp:127.0.0.1:53 tcp:127.0.0.1:80
expect_run "fd: as CONNECT refused" 2 "invalid CONNECT endpoint 'fd:3': fd: endpoints can only be listened on" "$SLUICE" bridge tcp:127.0.0.1:0 fd:3
expect_run "usage printed on bad arguments" 2 '^usage: sluice bridge' "$SLUICE" bridge --max-conns 0 tcp:127.0.0.1:0 tcp:127.0.0.1:80
expect_run "--max-conns 0 refused" 2 "invalid --max-conns '0'" "$SLUICE" bridge --max-conns 0 tcp:127.0.0.1:0 tcp:127.0.0.1:80
expect_run "--connect-timeout 0 refused" 2 "invalid --connect-timeout '0'" "$SLUICE" bridge --connect-timeout 0 tcp:127.0.0.1:0 tcp:127.0.0.1:80
expect_run "--idle abc refused" 2 "invalid --idle 'abc'" "$SLUICE" bridge --idle abc tcp:127.0.0.1:0 tcp:127.0.0.1:80
expect_run "option without value" 2 "option '--idle' needs a value" "$SLUICE" bridge tcp:127.0.0.1:0 tcp:127.0.0.1:80 --idle
expect_run "unknown option" 2 "unknown option '--fork'" "$SLUICE" bridge --fork tcp:127.0.0.1:0 tcp:127.0.0.1:80
expect_run "same endpoint both sides" 2 "same endpoint" "$SLUICE" bridge "unix:$T/same.sock" "unix:$T/same.sock"
expect_run "control bytes escaped in messages" 2 "unknown option '--a\\\\x1b\[31m'" "$SLUICE" bridge "$(printf -- '--a\033[31m')" tcp:127.0.0.1:0 tcp:127.0.0.1:80
expect_run "listen failure names the endpoint" 1 "cannot listen on tcp:192.0.2.1:4000: the address is not one of this host's \(EADDRNOTAVAIL\)" \
    "$SLUICE" bridge tcp:192.0.2.1:4000 tcp:127.0.0.1:80

# Under ASan/UBSan a report goes to the bridge's stderr, i.e. these logs.
if grep -lE 'AddressSanitizer|LeakSanitizer|runtime error:' "$T"/*.log >/dev/null 2>&1; then
    bad "no sanitizer reports in the bridge logs" "$(grep -hE -A20 'AddressSanitizer|LeakSanitizer|runtime error:' "$T"/*.log | head -60)"
else
    ok "no sanitizer reports in the bridge logs"
fi

e2e_finish
