#!/usr/bin/env bash
# tests/e2e/socks_udp.sh - SOCKS5 UDP ASSOCIATE through `sluice proxy`
# (issue 26 deliverable 1): a Python client (socks_udp-client.py) sends
# datagrams to UDP echo servers on an allowed and a denied address, by name
# (a dnsmasq answers) and by address; a spoofed source, fragments, the end
# of the control connection and the idle timeout.
#
# Everything runs in a network namespace of the test's own (the script
# re-executes itself under `unshare -n`, or `unshare -rn`): the echo
# servers' addresses (10.9.0.1 allowed, 10.9.0.2 denied, 10.9.0.3 a second
# source) live on that namespace's loopback, so no datagram can leave the
# machine. Without a namespace the test is skipped (exit 77).
#
# usage: socks_udp.sh PATH/TO/sluice
set -uo pipefail
SLUICE=${1:?usage: socks_udp.sh PATH/TO/sluice}
case $SLUICE in /*) ;; *) SLUICE=$PWD/$SLUICE ;; esac
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

if [ -z "${SLUICE_SOCKS_UDP_NETNS:-}" ]; then
    for how in "unshare -n" "unshare -rn"; do
        if $how true 2>/dev/null; then
            SLUICE_SOCKS_UDP_NETNS=1 exec $how bash "$HERE/socks_udp.sh" "$SLUICE"
        fi
    done
    echo "# SKIP cannot make a network namespace (unshare -n, unshare -rn)"
    echo "0 passed, 0 failed"
    exit 77
fi
. "$HERE/lib.sh"
CLIENT="python3 $HERE/socks_udp-client.py"

# --- the namespace: loopback, holding the echo servers' addresses too ---------
names=$(python3 -c 'import socket; print(" ".join(n for _, n in socket.if_nameindex()))')
if [ "$names" != "lo" ]; then
    bad "the namespace has interfaces besides lo ($names); refusing to run"
    e2e_finish
    exit 1
fi
ip link set lo up && ip addr add 10.9.0.1/32 dev lo && ip addr add 10.9.0.2/32 dev lo &&
    ip addr add 10.9.0.3/32 dev lo && ip -6 addr add fd00:9::1/128 dev lo nodad &&
    ip addr add 169.254.169.254/32 dev lo && ip addr add 10.9.0.5/32 dev lo ||
    { bad "cannot set up the namespace's addresses"; e2e_finish; exit 1; }

# --- UDP echo servers: each logs what it received -----------------------------
EPORT=$(free_port)
for ip in 10.9.0.1 10.9.0.2 fd00:9::1; do
    python3 -c '
import socket, sys
s = socket.socket(socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], int(sys.argv[2])))
with open(sys.argv[3], "ab", buffering=0) as log:
    while True:
        data, peer = s.recvfrom(70000)
        log.write(data + b"\n")
        s.sendto(data, peer)
' "$ip" "$EPORT" "$T/echo-$ip.log" &
    PIDS+=($!)
done

# rt-11: victims on VPORT (loopback, metadata, the allowed and the denied
# address): nothing may ever be relayed to VPORT, their logs must stay empty
VPORT=$(free_port)
for ip in 127.0.0.1 ::1 169.254.169.254 10.9.0.1 10.9.0.2; do
    python3 -c '
import socket, sys
s = socket.socket(socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], int(sys.argv[2])))
with open(sys.argv[3], "ab", buffering=0) as log:
    while True:
        data, peer = s.recvfrom(70000)
        log.write(repr((peer, data[:60])).encode() + b"\n")
        s.sendto(data, peer)
' "$ip" "$VPORT" "$T/victim-$ip.log" &
    PIDS+=($!)
done

start_dnsmasq --local=/test/ \
    --host-record=lo.rt.test,127.0.0.1 --host-record=lo6.rt.test,::1 \
    --host-record=meta.rt.test,169.254.169.254 --host-record=zero.rt.test,0.0.0.0 \
    --host-record=mapped.rt.test,::ffff:127.0.0.1 --host-record=nat64.rt.test,64:ff9b::7f00:1 \
    --host-record=mixed.rt.test,127.0.0.1 --host-record=mixed.rt.test,10.9.0.1 \
    --host-record=ok.rt.test,10.9.0.1 --host-record=srv.rt.test,10.9.0.5 \
    --host-record=denyudp.rt.test,10.9.0.1 --host-record=deny-both.rt.test,10.9.0.1 \
    --host-record=localhost.rt.test,127.0.0.1 --host-record=other.test,10.9.0.1 \
    --cname=cn.rt.test,lo.rt.test \
    --host-record=echo.test,10.9.0.1 \
    --host-record=echo6.test,fd00:9::1 \
    --host-record=open.test,10.9.0.1 \
    --host-record=tcp-only.test,10.9.0.1 \
    --host-record=blocked.test,10.9.0.2 ||
    { bad "dnsmasq did not start" "$(cat "$T/dnsmasq.err")"; e2e_finish; exit 1; }

IDLE=3
cat > "$T/s.json" <<JSON
{"network": {"allowedDomains": ["udp:echo.test:$EPORT", "udp:10.9.0.1:$EPORT",
                                "udp:echo6.test:$EPORT", "udp:[fd00:9::1]:$EPORT",
                                "tcp-only.test", "10.9.0.2:$EPORT",
                                "udp:*.rt.test:*", "denyudp.rt.test", "udp:10.9.0.5:*"],
             "deniedDomains": ["blocked.test", "udp:denyudp.rt.test", "deny-both.rt.test"],
             "dnsServers": ["127.0.0.1:$DPORT"],
             "allowLocalBinding": true},
 "proxy": {"timeouts": {"idle": $IDLE}}}
JSON
APORT=$(free_port)
start_proxy main "$T/s.json" --http off --socks tcp:127.0.0.1:0 --admin tcp:127.0.0.1:$APORT
[ -n "$PORT" ] || { e2e_finish; exit 1; }

# client CASE ARGS...: runs one client case and turns its lines into results
client() {
    local line
    while IFS= read -r line; do
        case $line in
        ok\ *) ok "${line#ok }" ;;
        \#*) echo "$line" ;;
        *) bad "${line#bad }" ;;
        esac
    done < <($CLIENT "$PORT" "$@" 2>&1)
}

# one process runs every case (socks_udp-client.py case_suite): echo.test by
# name and 10.9.0.1 by address allowed; blocked.test (a deny rule),
# open.test (resolves, but no udp: rule names it), tcp-only.test (a TCP
# allow rule does not open UDP) and 10.9.0.2 (an IP rule without udp:
# neither) denied; a spoofed port and address (10.9.0.3), fragments, the
# end of the control connection, a reload that drops a rule, the idle timeout
client suite "$EPORT" "$IDLE" "$T/s.json" "$PROXY_PID" "$T/main.log"

# --- what the echo servers saw -------------------------------------------------
if [ -s "$T/echo-10.9.0.2.log" ]; then
    bad "the denied echo server received datagrams" "$(cat "$T/echo-10.9.0.2.log")"
else
    ok "the denied echo server received nothing"
fi
if grep -qaE 'spoof-|fragment-|after-close' "$T/echo-10.9.0.1.log"; then
    bad "a spoofed, fragmented or late datagram reached the echo server" \
        "$(cat "$T/echo-10.9.0.1.log")"
elif grep -qa 'hello-by-name' "$T/echo-10.9.0.1.log"; then
    ok "only whole datagrams from the client reached the allowed echo server"
else
    bad "the allowed echo server's log misses the datagrams" "$(cat "$T/echo-10.9.0.1.log")"
fi
if grep -q 'blocked.test' "$T/dnsmasq.log"; then
    bad "a name a deny rule denies was resolved"
else
    ok "a denied name was never resolved"
fi

# --- the log: a decision per destination, a close record per association ------
# each line is waited for (an association's close record is written a moment
# after its client closed: under ASan and load, later than a fixed 0.3 s)
LOG=$T/main.log
want_log() { # NAME REGEX
    if wait_for "$LOG" "$2" $((5 * SLOW)); then ok "log: $1"; else bad "log: $1" "$(grep socks5-udp "$LOG")"; fi
}
want_log "allowed name decided once per association" 'event=decision .*protocol=socks5-udp host=echo.test port='"$EPORT"' .*decision=allow .*rule="?.udp:echo.test:'"$EPORT"
want_log "denied by a deny rule, with its rule" 'protocol=socks5-udp host=blocked.test .*decision=deny .*rule="?.blocked.test.'
want_log "denied for want of a udp: rule, with a hint" 'protocol=socks5-udp host=tcp-only.test .*decision=deny .*no udp: rule allows UDP.*hint=.*udp:tcp-only.test:'"$EPORT"
want_log "close record counts datagrams and fragments" 'event=close .*protocol=socks5-udp .*datagrams up [1-9][0-9]* .*fragments 2'
want_log "close record counts spoofed datagrams" 'event=close .*protocol=socks5-udp .*spoofed 2'
want_log "close record counts denials" 'event=close .*protocol=socks5-udp .*denied [1-9]'
want_log "the idle association ended by the idle timeout" 'event=close .*protocol=socks5-udp .*end="?udp association idle'


# --- check ⇄ proxy: `sluice check --proxy --resolve udp:HOST:PORT` says what the
# relay decided for each destination (the first decision logged for it)
for h in echo.test blocked.test open.test tcp-only.test 10.9.0.1 10.9.0.2; do
    logged=$(grep -m1 "protocol=socks5-udp host=$h port=$EPORT " "$LOG" | sed -n 's/.* decision=\([a-z_]*\).*/\1/p')
    checked=$("$SLUICE" check --settings "$T/s.json" --proxy --resolve --json "udp:$h:$EPORT" 2>&1 |
        sed -n 's/.*"decision":"\([a-z_]*\)".*/\1/p')
    if [ -n "$logged" ] && [ "$logged" = "$checked" ]; then
        ok "check udp:$h:$EPORT says $checked, as the relay decided"
    else
        bad "check udp:$h:$EPORT says '$checked', the relay logged '$logged'"
    fi
done

# --- /metrics: the process's UDP counters ---------------------------------------
M=$(curl -s --max-time 5 "http://127.0.0.1:$APORT/metrics")
want_metric() { # NAME REGEX
    if grep -E -- "$2" <<< "$M" >/dev/null; then ok "metrics: $1"; else bad "metrics: $1" "$(grep sluice_udp <<< "$M")"; fi
}
want_metric "associations opened" '^sluice_udp_associations_total\{result="ok"\} (9|[1-9][0-9]+)$'
want_metric "none open after the last closed" '^sluice_udp_associations_active 0$'
want_metric "datagrams up and down" '^sluice_udp_datagrams_total\{direction="down"\} [1-9]'
want_metric "fragments dropped" '^sluice_udp_dropped_total\{reason="fragment"\} 2$'
want_metric "spoofed dropped" '^sluice_udp_dropped_total\{reason="spoofed"\} 2$'
want_metric "denied dropped" '^sluice_udp_dropped_total\{reason="denied"\} [1-9]'

# --- rt-11: adversarial cases against the same proxy (tests/e2e/rt-11-report.md)
# names that resolve to loopback/metadata/0.0.0.0/::1/mapped/NAT64 under an
# allowed udp:*.rt.test:* rule, literal forms, odd ATYP 3 bytes, malformed
# headers, a 64 KiB datagram, replies from hosts the client never reached,
# the source check, half-close and reset, DNS to unlisted resolvers, the
# association and destination bounds
client rt "$EPORT" "$VPORT" "$IDLE" "$DPORT"
if grep -q rtdnsprobe "$T/dnsmasq.log"; then
    bad "rt: a DNS query relayed through UDP ASSOCIATE reached sluice's own resolver"
else
    ok "rt: no DNS query through UDP ASSOCIATE reached the loopback resolver"
fi
if grep -qa -e 'rt-after-shutwr' -e 'rt-after-rst' -e 'rt-thief-first' "$T/echo-10.9.0.1.log"; then
    bad "rt: a datagram after the control connection ended, or a thief's, reached the echo server"
else
    ok "rt: no datagram after half-close/reset, and none of the thief's, reached the echo server"
fi
if grep -q 'other.test' "$T/dnsmasq.log"; then
    bad "rt: a name with a NUL byte was resolved as its prefix" "$(grep other.test "$T/dnsmasq.log")"
else
    ok "rt: a name with a NUL byte was never resolved as its prefix"
fi
# check ⇄ proxy for rt's names: the relay's logged decision is check's
for h in lo.rt.test lo6.rt.test meta.rt.test zero.rt.test mapped.rt.test nat64.rt.test \
    denyudp.rt.test deny-both.rt.test localhost 127.0.0.1 0.0.0.0 169.254.169.254; do
    logged=$(grep -m1 "protocol=socks5-udp host=$h port=$VPORT " "$LOG" | sed -n 's/.* decision=\([a-z_]*\).*/\1/p')
    checked=$("$SLUICE" check --settings "$T/s.json" --proxy --resolve --json "udp:$h:$VPORT" 2>&1 |
        sed -n 's/.*"decision":"\([a-z_]*\)".*/\1/p')
    if [ "$logged" = deny ] && [ "$checked" = deny ]; then
        ok "rt: udp:$h:$VPORT denied by the relay and by check"
    else
        bad "rt: udp:$h:$VPORT: check says '$checked', the relay logged '$logged'"
    fi
done
# udp: in deniedDomains denies UDP only; a deny rule without udp: both
want_check() { # TARGET DECISION
    local got
    got=$("$SLUICE" check --settings "$T/s.json" --json "$1" 2>&1 | sed -n 's/.*"decision":"\([a-z_]*\)".*/\1/p')
    if [ "$got" = "$2" ]; then ok "rt: check $1: $2"; else bad "rt: check $1: '$got', want $2"; fi
}
want_check denyudp.rt.test:443 allow
want_check udp:denyudp.rt.test:443 deny
want_check deny-both.rt.test:443 deny
want_check udp:deny-both.rt.test:443 deny
want_check udp:tcp-only.test:443 deny
want_check udp:ok.rt.test:443 allow

# --- IPv6: a second proxy on [::1] ----------------------------------------------
P6=$(python3 -c 'import socket; s=socket.socket(socket.AF_INET6); s.bind(("::1",0)); print(s.getsockname()[1])')
"$SLUICE" proxy --settings "$T/s.json" --log "$T/v6.log" --http off --socks "tcp:[::1]:$P6" 2>"$T/v6.err" &
PIDS+=($!)
for _ in $(seq $((100 * SLOW))); do grep -q 'event=start' "$T/v6.log" 2>/dev/null && break; sleep 0.05; done
while IFS= read -r line; do
    case $line in
    ok\ *) ok "${line#ok }" ;;
    *) bad "${line#bad }" ;;
    esac
done < <($CLIENT "$P6" v6 echo6.test "$EPORT" fd00:9::1 2>&1)

# --- rt-11: a name no udp: rule allows is never looked up (nor by check above)
if grep -q 'open.test' "$T/dnsmasq.log"; then
    bad "rt: a name no udp: rule allows (open.test) was resolved"
else
    ok "rt: a name no udp: rule allows was never resolved"
fi

# --- rt-11: report mode never lifts the guard for UDP ---------------------------
MAIN_PID=$PROXY_PID
cat > "$T/report.json" <<JSON
{"network": {"mode": "report", "dnsServers": ["127.0.0.1:$DPORT"]}}
JSON
start_proxy report "$T/report.json" --http off --socks tcp:127.0.0.1:0
if [ -n "$PORT" ]; then
    client rtreport "$EPORT" "$VPORT"
    if grep -q 'protocol=socks5-udp host=lo.rt.test .*decision=\(would_deny\|deny\)' "$T/report.log"; then
        ok "rt report mode: the loopback name is reported"
    else
        bad "rt report mode: the loopback name is not reported" "$(grep socks5-udp "$T/report.log" | head -5)"
    fi
    kill "$MAIN_PID" 2>/dev/null
fi

# --- sluice run: UDP ASSOCIATE from inside the sandbox ---------------------------
# The sandbox's SOCKS5 listener (127.0.0.1:1080 there) answers with a relay
# socket made in the sandbox's own network namespace (run/ports.c's helper):
# the echo comes back only if the client, which reaches nothing but its own
# namespace, can send to it. The rest as above, from the host side.
kill "$PROXY_PID" 2>/dev/null
# run_section WHO DIR [setpriv ARGS...]: the client inside sluice run, as WHO
# (root, or an unprivileged user through setpriv), working in DIR
run_section() {
    local who=$1 dir=$2 line
    shift 2
    if ! (cd "$dir" && "$@" env HOME="$dir" XDG_RUNTIME_DIR="$dir/xdg" "$SLUICE" run \
        --settings "$T/s.json" -- true) >"$dir/probe.out" 2>&1; then
        echo "# SKIP sluice run as $who: cannot start a sandbox here: $(tail -1 "$dir/probe.out")"
        return
    fi
    : > "$T/echo-10.9.0.1.log"
    (cd "$dir" && "$@" env HOME="$dir" XDG_RUNTIME_DIR="$dir/xdg" "$SLUICE" run \
        --settings "$T/s.json" --log "$dir/run.log" -- \
        python3 "$HERE/socks_udp-client.py" 1080 runsuite "$EPORT" "$VPORT") > "$dir/run.out" 2>&1
    while IFS= read -r line; do
        case $line in
        ok\ *) ok "sluice run ($who): ${line#ok }" ;;
        bad\ *) bad "sluice run ($who): ${line#bad }" ;;
        \#*) echo "$line" ;;
        esac
    done < "$dir/run.out"
    grep -q '^ok ' "$dir/run.out" || bad "sluice run ($who): the client did not run" "$(cat "$dir/run.out")"
    LOG=$dir/run.log
    want_log "sluice run ($who): the allowed name's decision" 'protocol=socks5-udp host=echo.test port='"$EPORT"' .*decision=allow'
    want_log "sluice run ($who): the denied name's decision" 'protocol=socks5-udp host=blocked.test .*decision=deny'
    if grep -qa fragment- "$T/echo-10.9.0.1.log"; then
        bad "sluice run ($who): a fragment reached the echo server"
    else
        ok "sluice run ($who): fragments stay in the sandbox"
    fi
}
mkdir -p -m 700 "$T/run-root" "$T/run-root/xdg"
run_section "$(id -un)" "$T/run-root"
# as root: again as an unprivileged user (the helper joins a user namespace then);
# not when this "root" is a user's mapped uid under unshare -rn (uid 1001 is
# not mapped there: the first pass above was that user already)
if [ "$(id -u)" = 0 ] && [ "$(awk 'NR == 1 { print $2 }' /proc/self/uid_map)" = 0 ] &&
    command -v setpriv >/dev/null &&
    { id sluicetest >/dev/null 2>&1 || useradd -M sluicetest >/dev/null 2>&1; }; then
    U=$(id -u sluicetest) G=$(id -g sluicetest)
    chmod 711 "$T"
    chmod 644 "$T/s.json"
    mkdir -p "$T/run-user/xdg" && chown -R "$U:$G" "$T/run-user" && chmod 700 "$T/run-user/xdg"
    if setpriv --reuid="$U" --regid="$G" --clear-groups test -r "$HERE/socks_udp-client.py" -a -x "$SLUICE"; then
        run_section user "$T/run-user" setpriv --reuid="$U" --regid="$G" --clear-groups --inh-caps=-all
    else
        echo "# SKIP sluice run as a user: the client or the binary is not readable by sluicetest"
    fi
fi
# --- rt-11: the victims on VPORT heard nothing, from the proxy or from sluice run
for ip in 127.0.0.1 ::1 169.254.169.254 10.9.0.1 10.9.0.2; do
    if [ -s "$T/victim-$ip.log" ]; then
        bad "rt: the victim on $ip:$VPORT received datagrams" "$(head -20 "$T/victim-$ip.log")"
    else
        ok "rt: the victim on $ip:$VPORT received nothing"
    fi
done
e2e_finish
