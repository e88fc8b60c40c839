#!/usr/bin/env bash
# End-to-end tests of the one over-limit rule (bridge/limit.h) in `sluice
# proxy` and `sluice run`: with maxConnections 1 the front ends refuse
# quickly up to 64 beyond it, then stop accepting; a connection that ends
# resumes accepting (limits-client.py). `sluice bridge`'s --max-conns resume
# is in bridge.sh. Also: the default maxConnections follows the descriptor
# limit, which sluice raises to the hard limit, shown at start and in
# /metrics. Loopback only.
set -uo pipefail
SLUICE=${1:?usage: limits.sh PATH/TO/sluice}
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
CLIENT=$(dirname "${BASH_SOURCE[0]}")/limits-client.py
HOLD=65 # maxConnections 1 + PROXY_OVERLOAD_SLACK 64

OPORT=$(free_port)
python3 -c '
import socket, sys, threading
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(64)
while True:
    c, _ = s.accept()
    threading.Thread(target=lambda c: (c.recv(100), c.close()), args=(c,), daemon=True).start()
' "$OPORT" & PIDS+=($!)

cat > "$T/one.json" <<JSON
{"network": {"allowedDomains": ["127.0.0.1:$OPORT"], "denyPrivateAddresses": false},
 "proxy": {"limits": {"maxConnections": 1}}}
JSON
cat > "$T/default.json" <<JSON
{"network": {"allowedDomains": ["127.0.0.1:$OPORT"], "denyPrivateAddresses": false}}
JSON

# --- proxy -------------------------------------------------------------------------------------
start_proxy one "$T/one.json" --http tcp:127.0.0.1:0 --socks tcp:127.0.0.1:0 --admin tcp:127.0.0.1:0
APORT=$(grep -m1 'event=start' "$T/one.log" | sed -n 's/.* admin tcp:127\.0\.0\.1:\([0-9]*\).*/\1/p')
if out=$(timeout 60 python3 "$CLIENT" 127.0.0.1 "$HPORT" "$HOLD" "$OPORT" "$APORT" 2>&1); then
    ok "proxy: stops accepting at the limit, resumes when a connection ends"
else
    bad "proxy: stop and resume at the limit" "$out"
fi
curl -s "http://127.0.0.1:$APORT/metrics" > "$T/m1.txt"
grep -q '^sluice_connections_max 1$' "$T/m1.txt" && ok "proxy: /metrics shows maxConnections 1" ||
    bad "sluice_connections_max" "$(grep connections_max "$T/m1.txt")"
kill -TERM "$PROXY_PID"; wait "$PROXY_PID"

# --- default maxConnections: from the descriptor limit, raised to the hard limit -------------
HARD=$(ulimit -Hn)
( ulimit -Sn 256 2>/dev/null; exec "$SLUICE" proxy --settings "$T/default.json" --http tcp:127.0.0.1:0 \
    --socks off --admin tcp:127.0.0.1:0 --log "$T/def.log" 2>"$T/def.err" ) & DPID=$!
PIDS+=($DPID)
for i in $(seq $((200 * SLOW))); do grep -q 'event=start' "$T/def.log" 2>/dev/null && break; sleep 0.05; done
line=$(grep -m1 'event=start' "$T/def.log")
if [ "$HARD" = unlimited ]; then HARD=1073741824; fi
D=$(sed -n 's/.*descriptors \([0-9]*\).*/\1/p' <<< "$line")
if [ "$D" != "$HARD" ] && readlink "/proc/$DPID/exe" 2>/dev/null | grep -q valgrind; then
    echo "# under valgrind, which keeps the soft limit: descriptors $D, not the hard $HARD"
    HARD=$D
fi
want=$(( HARD > 128 ? (HARD - 64) / 2 : HARD / 4 )); [ "$want" -gt 1000000 ] && want=1000000
if grep -q "maxConnections $want (from the descriptor limit), descriptors $HARD" <<< "$line"; then
    ok "default maxConnections $want follows the raised descriptor limit $HARD (start line)"
else
    bad "default maxConnections in the start line (want $want, $HARD)" "$line"
fi
APORT=$(sed -n 's/.* admin tcp:127\.0\.0\.1:\([0-9]*\).*/\1/p' <<< "$line")
curl -s "http://127.0.0.1:$APORT/metrics" > "$T/m2.txt"
grep -q "^sluice_connections_max $want$" "$T/m2.txt" && grep -q "^process_max_fds $HARD$" "$T/m2.txt" &&
    ok "default maxConnections and the descriptor limit in /metrics" ||
    bad "metrics of the default limit" "$(grep -E 'connections_max|max_fds' "$T/m2.txt")"
kill -TERM "$DPID"; wait "$DPID"

# --- run ---------------------------------------------------------------------------------------
if "$SLUICE" run --settings "$T/one.json" true 2>"$T/run0.err"; then
    # the client runs inside the sandbox, whose /tmp is private: it runs from
    # a copy in the working directory (a checkout under /tmp is hidden there)
    mkdir -p "$T/runwd" && cp "$CLIENT" "$T/runwd/limits-client.py"
    if out=$(cd "$T/runwd" && timeout 90 "$SLUICE" run --settings "$T/one.json" -- \
            python3 ./limits-client.py 127.0.0.1 3128 "$HOLD" "$OPORT" 2>&1); then
        ok "run: stops accepting at the limit, resumes when a connection ends"
    else
        bad "run: stop and resume at the limit" "$out"
    fi
else
    echo "# skip: the sandbox cannot start here ($(head -1 "$T/run0.err"))"
fi

e2e_finish
