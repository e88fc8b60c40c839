#!/usr/bin/env bash
# tests/e2e/adversarial_report.sh - issue 14 finding 6: with network.mode
# "report" sluice dials what it would deny, but never its own listeners.
# A listener on the wildcard address (tcp:0.0.0.0:P, tcp:[::]:P) is reached
# through every loopback address and every local one, however spelled:
# 127.0.0.1, 127.0.0.2, [::ffff:127.0.0.3], localhost, 0.0.0.0 and, for the
# dual-stack [::] listener, [::1]. For each, the request must be refused
# (403, not the proxy's own 400 for an origin-form request that came back to
# it), and the proxy must have accepted exactly one connection per request:
# a dial back into itself shows as a second connection in its log.
# Runs in a private network namespace (only lo) where unprivileged user
# namespaces work, else on the host's loopback (the wildcard listener then
# also listens on the host's other addresses; nothing is sent to them).
set -uo pipefail
SLUICE=${1:?usage: adversarial_report.sh PATH/TO/sluice}
case $SLUICE in /*) ;; *) SLUICE=$(cd "$(dirname "$SLUICE")" && pwd)/$(basename "$SLUICE") ;; esac
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LO_UP='import fcntl, socket, struct
s = socket.socket()
f = struct.unpack("16sh", fcntl.ioctl(s, 0x8913, struct.pack("16sh", b"lo", 0)))[1]
fcntl.ioctl(s, 0x8914, struct.pack("16sh", b"lo", f | 1))'
if [ -z "${ADV_NETNS:-}" ] && unshare -rn python3 -c "$LO_UP" 2>/dev/null; then
    exec env ADV_NETNS=1 unshare -rn bash "${BASH_SOURCE[0]}" "$SLUICE"
fi
[ "${ADV_NETNS:-}" = 1 ] && python3 -c "$LO_UP"
. "$HERE/lib.sh"

echo '{"network": {"mode": "report"}}' > "$T/report.json"
have6=false
python3 -c 'import socket; socket.socket(socket.AF_INET6).bind(("::1", 0))' 2>/dev/null && have6=true

# round LISTEN-ADDRESS N PROXY-ADDRESS TARGET...: one proxy on LISTEN:P,
# reached at PROXY-ADDRESS:P, one request per target
round() {
    local laddr=$1 name=rep$2 via=$3 p t code reqs=0 self
    shift 3
    p=$(free_port)
    "$SLUICE" proxy --settings "$T/report.json" --http "tcp:$laddr:$p" --socks off \
        --log "$T/$name.log" 2>"$T/$name.err" &
    PIDS+=($!)
    wait_for "$T/$name.log" 'event=start' 10 || { bad "$name: proxy did not start" "$(cat "$T/$name.err")"; return; }
    for t in "$@"; do
        reqs=$((reqs + 1))
        code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 --noproxy '' \
            -x "http://$via:$p" "http://$t:$p/")
        [ "$code" = 403 ] && ok "report mode, listener $laddr:P: http://$t:P/ refused (403)" ||
            bad "report mode, listener $laddr:P: http://$t:P/ got $code (want 403; 400 is the proxy answering itself)" \
                "$(tail -4 "$T/$name.log")"
    done
    wait_for "$T/$name.log" "id=$reqs .*event=close" 5
    sleep 0.2
    self=$(grep -c 'event=close' "$T/$name.log")
    [ "$self" = "$reqs" ] && ok "report mode, listener $laddr:P: $reqs connections for $reqs requests (no dial into itself)" ||
        bad "report mode, listener $laddr:P: $self connections for $reqs requests" "$(grep 'event=close' "$T/$name.log")"
}

round 0.0.0.0 4 127.0.0.1 127.0.0.1 127.0.0.2 '[::ffff:127.0.0.3]' localhost 0.0.0.0
if $have6; then
    # sluice's [::] listener may be v6-only: a v4 target counts as its own
    # listener all the same (the safe side)
    round '[::]' 6 '[::1]' 127.0.0.2 '[::1]' '[::ffff:127.0.0.1]' localhost
else
    echo "ok - [::] listener # SKIP no IPv6 loopback"
fi
# --- issue 21 item 7: report mode never lifts the resolved-address guard ----
# Names whose answers the guard refuses (loopback; in the private namespace
# also the metadata address and a private one) and loopback literals are
# refused (403) in report mode, with nothing dialed; a name only a deny rule
# refuses, answered with an address an IP rule allows, is still reported
# (would_deny) and reached. The metadata and private answers are tried only
# inside the private namespace (no route there: nothing leaves the machine).
guard_cases() {
    local p code n
    start_dnsmasq --address=/lo.test/127.0.0.2 --address=/lo-ok.test/127.0.0.3 \
        --address=/meta.test/169.254.169.254 --address=/priv.test/10.9.8.7 ||
        { bad "report mode guard: dnsmasq did not start" "$(cat "$T/dnsmasq.err")"; return; }
    p=$(free_port)
    cat > "$T/listen.py" <<'PY'
import socket, sys, threading
log = open(sys.argv[2], "a", buffering=1)
def serve(addr):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, int(sys.argv[1])))
    s.listen(16)
    while True:
        c, _ = s.accept()
        log.write(addr + "\n")
        c.recv(4096)
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
        c.close()
for a in ("127.0.0.2", "127.0.0.3"):
    threading.Thread(target=serve, args=(a,), daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
PY
    : > "$T/accepted"
    python3 "$T/listen.py" "$p" "$T/accepted" > "$T/listen.out" 2>&1 &
    PIDS+=($!)
    wait_for "$T/listen.out" ready 5 || { bad "report mode guard: listener did not start" "$(cat "$T/listen.out")"; return; }
    printf '{"network": {"mode": "report", "dnsServers": ["127.0.0.1:%s"],\n  "deniedDomains": ["lo-ok.test"], "allowedDomains": ["127.0.0.3"]}}\n' \
        "$DPORT" > "$T/guard.json"
    start_proxy guard "$T/guard.json" --http tcp:127.0.0.1:0 --socks off
    [ -n "$HPORT" ] || return
    set -- lo.test 127.0.0.2 localhost '[::ffff:127.0.0.2]'
    [ "${ADV_NETNS:-}" = 1 ] && set -- "$@" meta.test priv.test 169.254.169.254 10.9.8.7
    for t in "$@"; do
        code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 --noproxy '' \
            -x "http://127.0.0.1:$HPORT" "http://$t:$p/")
        [ "$code" = 403 ] && ok "report mode: http://$t:P/ refused by the guard (403)" ||
            bad "report mode: http://$t:P/ got $code (want 403: report mode must not lift the guard)" \
                "$(grep "$t" "$T/guard.log" | tail -2)"
    done
    n=$(grep -c . "$T/accepted")
    [ "$n" = 0 ] && ok "report mode: nothing the guard refuses was dialed" ||
        bad "report mode: the listener accepted $n connection(s) the guard refuses" "$(cat "$T/accepted")"
    grep -qE 'decision=would_deny' "$T/guard.log" &&
        bad "report mode: a guard refusal was logged would_deny" "$(grep would_deny "$T/guard.log")" ||
        ok "report mode: guard refusals are logged deny, not would_deny"
    # a rule's denial is still only reported
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 --noproxy '' \
        -x "http://127.0.0.1:$HPORT" "http://lo-ok.test:$p/")
    [ "$code" = 200 ] && grep -q 127.0.0.3 "$T/accepted" &&
        grep -qE 'lo-ok\.test.*decision=would_deny|decision=would_deny.*lo-ok\.test' "$T/guard.log" &&
        ok "report mode: a deny rule's denial is reported (would_deny) and dialed where the guard passes" ||
        bad "report mode: lo-ok.test got $code (want 200 and would_deny)" "$(grep lo-ok "$T/guard.log"; cat "$T/accepted")"
}
guard_cases
e2e_finish
