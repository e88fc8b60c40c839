#!/usr/bin/env bash
# tests/e2e/ask.sh - `sluice proxy --ask` end to end over SOCKS5: the exec
# handler (allow, deny with a reason, session cache, a crashing and a silent
# program), the socket handler (a supervising program on a Unix socket, and
# its loss), and tty without a terminal. Names resolve through a dnsmasq on
# 127.0.0.1; the only origin is a python http.server on 127.0.0.1.
set -uo pipefail
SLUICE=${1:?usage: ask.sh PATH/TO/sluice}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/lib.sh"
RAW="python3 $HERE/rawsock.py"

mkdir -p "$T/www"
echo "hello from the origin" > "$T/www/index.html"
OPORT=$(free_port)
(cd "$T/www" && exec python3 -m http.server "$OPORT" --bind 127.0.0.1) 2>"$T/origin.log" &
PIDS+=($!)

names=""
for n in allow1 deny session exit3 sleep ok1 ok2 no1 tty1 kill9; do names="$names --host-record=$n.example,127.0.0.1"; done
# shellcheck disable=SC2086
start_dnsmasq --local=/example/ $names ||
    { bad "dnsmasq did not start" "$(cat "$T/dnsmasq.err")"; e2e_finish; exit 1; }
for i in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$OPORT/" && break; sleep 0.1; done

cat > "$T/s.json" <<JSON
{"network": {"allowedDomains": ["127.0.0.1:$OPORT"], "deniedDomains": ["blocked.example"],
             "dnsServers": ["127.0.0.1:$DPORT"]},
 "proxy": {"timeouts": {"ask": 1}}}
JSON

reply_of() { $RAW "$PORT" s:050100 r:2 s:"$(connect_req "$1" "$OPORT")" r:10 2>/dev/null | sed -n 2p | cut -c3-4; }
expect_reply() { # NAME HOST WANT_CODE
    local got; got=$(reply_of "$2")
    [ "$got" = "$3" ] && ok "$1" || bad "$1" "reply code $got, want $3"
}

# --- exec ---------------------------------------------------------------------------
export ASK_HELPER_COUNT="$T/count" ASK_HELPER_LOG="$T/questions"
start_proxy exec "$T/s.json" --http off --socks tcp:127.0.0.1:0 --ask "exec:$HERE/ask-helpers/answer.sh"
out=$(curl -s --max-time 10 --socks5-hostname "127.0.0.1:$PORT" "http://allow1.example:$OPORT/index.html")
[ "$out" = "hello from the origin" ] && ok "exec: 'allow' lets an unmatched name through" || bad "exec allow" "$out"
grep -q '"host":"allow1.example","port":'"$OPORT"',"protocol":"socks5","client":"127.0.0.1:' "$T/questions" \
    && ok "exec: the question is canonical JSON with host, port, protocol, client" || bad "exec question" "$(cat "$T/questions")"
expect_reply "exec: 'deny too risky' denies (0x02)" deny.example 02
grep -q 'host=deny.example .*decision=deny .*reason="too risky"' "$T/exec.log" && ok "exec: the handler's reason is logged" || bad "exec reason" "$(grep deny.example "$T/exec.log")"
: > "$T/count"
expect_reply "exec: allow-session allows" session.example 00
expect_reply "exec: allow-session is cached" session.example 00
[ "$(wc -l < "$T/count")" = 1 ] && ok "exec: a session answer is asked once" || bad "session asked $(wc -l < "$T/count") times"
expect_reply "exec: a program exiting 3 denies" exit3.example 02
expect_reply "exec: a program killed by a signal denies" kill9.example 02
expect_reply "exec: a silent program denies at the ask timeout" sleep.example 02
grep -q 'host=sleep.example .*reason="no answer within 1 s"' "$T/exec.log" && ok "exec: timeout reason logged" || bad "timeout reason" "$(grep sleep.example "$T/exec.log")"
expect_reply "exec: a deny rule is never asked" blocked.example 02
grep -q blocked.example "$T/questions" && bad "blocked.example was asked" || ok "exec: denied names never reach the handler"
grep -q 'deny.example\|blocked.example\|exit3.example' "$T/dnsmasq.log" && bad "a denied name was resolved" "$(grep -E 'deny|blocked|exit3' "$T/dnsmasq.log")" || ok "names the handler denied were never resolved"
kill -TERM "$PROXY_PID"; wait "$PROXY_PID"; rc=$?
[ "$rc" = 0 ] && ok "exec: clean exit" || bad "exec proxy exit $rc" "$(cat "$T/exec.err")"

# --- socket -------------------------------------------------------------------------
cat > "$T/supervisor.py" <<'PY'
import json, os, socket, sys
path = sys.argv[1]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(path); s.listen(4)
c, _ = s.accept()
f = c.makefile("rwb", buffering=0)
for line in f:
    q = json.loads(line)
    with open(path + ".log", "a") as log:
        log.write(line.decode())
    if q["host"].startswith("no1"):
        c.close()   # a supervisor that dies mid-question
        sys.exit(0)
    d = "allow" if q["host"].startswith("ok") else "deny"
    f.write((json.dumps({"id": q["id"], "decision": d, "reason": "supervisor says " + d}) + "\n").encode())
PY
python3 "$T/supervisor.py" "$T/ask.sock" &
PIDS+=($!)
for i in $(seq 50); do [ -S "$T/ask.sock" ] && break; sleep 0.05; done
start_proxy sock "$T/s.json" --http off --socks tcp:127.0.0.1:0 --ask "socket:$T/ask.sock"
expect_reply "socket: supervisor allows" ok1.example 00
expect_reply "socket: supervisor denies" tty1.example 02
grep -q 'host=tty1.example .*reason="supervisor says deny"' "$T/sock.log" && ok "socket: reason logged" || bad "socket reason" "$(grep tty1 "$T/sock.log")"
expect_reply "socket: a supervisor that hangs up denies" no1.example 02
expect_reply "socket: with the supervisor gone, asks are denied" ok2.example 02
grep -q 'host=ok2.example .*reason="cannot connect to the ask socket' "$T/sock.log" && ok "socket: lost supervisor reason logged" || bad "lost supervisor" "$(grep ok2 "$T/sock.log")"
kill -TERM "$PROXY_PID"; wait "$PROXY_PID"

# --- tty without a terminal ------------------------------------------------------------
if command -v setsid >/dev/null; then
    cat > "$T/tty.sh" <<SH
exec "$SLUICE" proxy --settings "$T/s.json" --http off --socks tcp:127.0.0.1:0 --ask tty --log "$T/tty.log" 2>"$T/tty.err" </dev/null
SH
    setsid bash "$T/tty.sh" &
    PROXY_PID=$!; PIDS+=($PROXY_PID)
    for i in $(seq $((100 * SLOW))); do PORT=$(sed -n 's/.*socks5 tcp:127\.0\.0\.1:\([0-9]*\).*/\1/p' "$T/tty.log" 2>/dev/null | head -1); [ -n "$PORT" ] && break; sleep 0.05; done
    expect_reply "tty: no terminal denies" tty1.example 02
    grep -q 'no terminal' "$T/tty.err" "$T/tty.log" && ok "tty: says there is no terminal" || bad "tty message" "$(cat "$T/tty.err")"
    kill -TERM "$PROXY_PID" 2>/dev/null; wait "$PROXY_PID" 2>/dev/null
fi

e2e_finish
