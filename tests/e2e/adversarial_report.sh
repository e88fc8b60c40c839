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
    # every request's close logged (the workers log them in any order, so
    # the last id's close does not mean all are in), then a moment for a
    # straggler (a dial into itself) to be counted too
    wait_for "$T/$name.log" "id=$reqs .*event=close" $((5 * SLOW))
    wait_more "$T/$name.log" 'event=close' $((reqs - 1)) $((10 * SLOW))
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

# --- rt-4 (red team): item 7 through every front end and spelling ----------
# Raw clients (no curl normalisation of the host): absolute-form GET,
# CONNECT, SOCKS5 with a name, an IPv4 and an IPv6 address. Targets: IPv4
# loopback in every spelling, IPv6 forms embedding it (mapped, compatible,
# NAT64, 6to4, Teredo), names answering AAAA with such forms, the proxy's
# own listener by name. All must be refused with nothing dialed and no
# would_deny; `sluice check --proxy` must give the proxy's verdict.
rt4_client() { # MODE PROXYPORT HOST PORT -> prints the HTTP status or socks reply code
    python3 - "$@" <<'PY'
import socket, struct, sys, ipaddress
mode, pp, host, port = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
s = socket.create_connection(("127.0.0.1", pp), timeout=5)
try:
    if mode in ("abs", "connect"):
        h = "[%s]" % host if ":" in host else host
        if mode == "abs":
            s.sendall(("GET http://%s:%d/ HTTP/1.1\r\nHost: %s:%d\r\nConnection: close\r\n\r\n" % (h, port, h, port)).encode())
        else:
            s.sendall(("CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (h, port, h, port)).encode())
        print(s.recv(4096).split(b" ")[1].decode())
    else:
        s.sendall(b"\x05\x01\x00"); s.recv(2)
        if mode == "socks4":
            a = b"\x01" + ipaddress.IPv4Address(host).packed
        elif mode == "socks6":
            a = b"\x04" + ipaddress.IPv6Address(host).packed
        else:
            a = b"\x03" + bytes([len(host)]) + host.encode()
        s.sendall(b"\x05\x01\x00" + a + struct.pack(">H", port))
        r = s.recv(4096)
        print("socks%d" % r[1])
except Exception as e:
    print("error:%s" % e)
PY
}
rt4_cases() {
    local p code n t m want got
    p=$(free_port)
    start_dnsmasq --address=/v6map.test/::ffff:127.0.0.2 --address=/nat64.test/64:ff9b::7f00:2 \
        --address=/sixto4.test/2002:7f00:2:: --address=/self.test/127.0.0.1 \
        --address=/lo2.test/127.0.0.2 ||
        { bad "rt-4: dnsmasq did not start" "$(cat "$T/dnsmasq.err")"; return; }
    : > "$T/accepted"
    python3 "$T/listen.py" "$p" "$T/accepted" > "$T/listen4.out" 2>&1 &
    PIDS+=($!)
    wait_for "$T/listen4.out" ready 5 || { bad "rt-4: listener did not start" "$(cat "$T/listen4.out")"; return; }
    printf '{"network": {"mode": "report", "dnsServers": ["127.0.0.1:%s"], "deniedDomains": ["*.test"],\n  "denyPrivateAddresses": true}}\n' \
        "$DPORT" > "$T/rt4.json"
    start_proxy rt4 "$T/rt4.json" --http tcp:127.0.0.1:0 --socks tcp:127.0.0.1:0
    [ -n "$HPORT" ] && [ -n "$SPORT" ] || return
    for t in 127.0.0.2 2130706434 0x7f.2 127.2 0177.0.0.2 0x7f000002 '::ffff:127.0.0.2' \
        '::127.0.0.2' '64:ff9b::7f00:2' '2002:7f00:2::' '2001:0:4136:e378:8000:63bf:80ff:fffd' \
        '::ffff:7f00:2' lo2.test v6map.test nat64.test sixto4.test localhost; do
        for m in abs connect; do
            code=$(rt4_client $m "$HPORT" "$t" "$p")
            case $code in 2*) bad "rt-4 report mode: $m $t:P got $code (the guard was lifted)" \
                "$(tail -3 "$T/rt4.log")" ;;
            *) ok "rt-4 report mode: $m $t:P refused ($code)" ;; esac
        done
        case $t in
        *.test | localhost) m=socksname ;;
        *:*) m=socks6 ;;
        [0-9]*.[0-9]*.[0-9]*.[0-9]*) m=socks4 ;;
        *) m= ;;
        esac
        if [ -n "$m" ]; then
            code=$(rt4_client $m "$SPORT" "$t" "$p")
            [ "$code" != socks0 ] && ok "rt-4 report mode: $m $t:P refused ($code)" ||
                bad "rt-4 report mode: $m $t:P succeeded (the guard was lifted)" "$(tail -3 "$T/rt4.log")"
        fi
    done
    # the proxy's own listeners, by a name answering 127.0.0.1
    for m in abs connect; do
        code=$(rt4_client $m "$HPORT" self.test "$HPORT")
        [ "$code" = 403 ] && ok "rt-4 report mode: $m self.test:HPORT (its own listener) refused" ||
            bad "rt-4 report mode: $m self.test:HPORT got $code (want 403)" "$(tail -3 "$T/rt4.log")"
    done
    code=$(rt4_client socksname "$SPORT" self.test "$SPORT")
    [ "$code" != socks0 ] && ok "rt-4 report mode: socks self.test:SPORT refused ($code)" ||
        bad "rt-4 report mode: socks self.test:SPORT reached its own listener"
    n=$(grep -c . "$T/accepted")
    [ "$n" = 0 ] && ok "rt-4 report mode: nothing the guard refuses was dialed" ||
        bad "rt-4 report mode: $n connection(s) the guard refuses were dialed" "$(cat "$T/accepted")"
    grep -q 'decision=would_deny' "$T/rt4.log" &&
        bad "rt-4 report mode: a guard refusal was logged would_deny" "$(grep would_deny "$T/rt4.log" | head -3)" ||
        ok "rt-4 report mode: guard refusals logged deny, not would_deny"
    # sluice check --proxy must say what the proxy does. The proxy reports
    # a user deny rule's denial (would_deny) and dials; check says "deny"
    # with no word of report mode (rt-4 finding); it now says would_deny,
    # as the proxy logs, from the same policy_report_only.
    printf '{"network": {"mode": "report", "deniedDomains": ["lo-ok.test"], "allowedDomains": ["127.0.0.3"]}}\n' > "$T/rt4chk.json"
    got=$("$SLUICE" check --proxy --json --settings "$T/rt4chk.json" lo-ok.test:80 2>&1)
    grep -qE '"decision": ?"would_deny"' <<< "$got" &&
        ok "rt-4: sluice check gives the proxy's report-mode verdict for a user deny rule" ||
        bad "rt-4: sluice check says deny where the report-mode proxy dials (would_deny)" "$got"
    got=$("$SLUICE" check --proxy --json --settings "$T/rt4chk.json" 127.0.0.2:80 '[::ffff:127.0.0.2]:80' 2130706434:80 2>&1)
    [ "$(grep -c '"decision":"deny"' <<< "$got")" = 3 ] &&
        ok "rt-4: sluice check --proxy denies the guarded literals in report mode" ||
        bad "rt-4: sluice check --proxy on guarded literals" "$got"
    kill "$PROXY_PID" 2>/dev/null
}
rt4_cases
e2e_finish
