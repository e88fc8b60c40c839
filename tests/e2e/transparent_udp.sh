#!/usr/bin/env bash
# tests/e2e/transparent_udp.sh - transparent UDP in `sluice run --transparent`
# (issue 26 deliverable 1, second bullet; run/tp_udp.c): UDP connect(),
# sendto() and sendmsg() judged by name like TCP, DNS to another resolver
# answered by sluice's, every re-aim attempt reaching only what the policy
# allows, a port scan from inside bounded. As root and again as an
# unprivileged user (setpriv, sluicetest).
#
# Everything runs in network namespaces of the test's own: the script
# re-executes itself under `unshare -n` (or `unshare -rn`), and the origins
# live in a second namespace behind a veth pair (10.9.0.0/24, fd00:9::/64,
# addresses that exist only there): UDP echo servers on 10.9.0.1 (allowed),
# 10.9.0.2 (denied) and [fd00:9::1], and a dnsmasq on 10.9.0.53:53 (the
# "other resolver"). sluice's own resolver is the e2e lib's dnsmasq on
# 127.0.0.1 (network.dnsServers). No packet can reach a real address: the
# namespaces have no other interface. The client is
# transparent-helpers/udp_probe.py, inside the sandbox.
#
# usage: transparent_udp.sh PATH/TO/sluice
set -uo pipefail
SLUICE=${1:?usage: transparent_udp.sh PATH/TO/sluice}
case $SLUICE in /*) ;; *) SLUICE=$PWD/$SLUICE ;; esac
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

if [ -z "${SLUICE_TPUDP_NETNS:-}" ]; then
    for how in "unshare -n" "unshare -rn"; do
        if $how true 2>/dev/null; then
            SLUICE_TPUDP_NETNS=1 exec $how bash "$HERE/transparent_udp.sh" "$SLUICE"
        fi
    done
    echo "# SKIP cannot make a network namespace (unshare -n, unshare -rn)"
    echo "0 passed, 0 failed"
    exit 77
fi
. "$HERE/lib.sh"
PROBE=$HERE/transparent-helpers/udp_probe.py

names=$(python3 -c 'import socket; print(" ".join(n for _, n in socket.if_nameindex()))')
if [ "$names" != "lo" ]; then
    bad "the namespace has interfaces besides lo ($names); refusing to run"
    e2e_finish
    exit 1
fi
ip link set lo up

# --- the origins' namespace, behind a veth pair -------------------------------
unshare -n sleep 100000 &
OPID=$!
PIDS+=($OPID)
# in_origins CMD...: runs CMD in the origins' namespace; bg_origins CMD...:
# the same in the background, its PID (the program's: exec, nsenter -F) in
# PIDS for the cleanup
in_origins() { nsenter -F -t "$OPID" -n "$@"; }
bg_origins() {
    (exec nsenter -F -t "$OPID" -n "$@") &
    PIDS+=($!)
}
for _ in $(seq 50); do
    [ "$(readlink /proc/$OPID/ns/net)" != "$(readlink /proc/self/ns/net)" ] && break
    sleep 0.05
done
if ! ip link add tpu-s type veth peer name tpu-o netns "$OPID" 2>"$T/veth.err"; then
    echo "# SKIP no veth pair here: $(cat "$T/veth.err")"
    e2e_finish
    exit 77
fi
ip link set tpu-s up && ip addr add 10.9.0.254/24 dev tpu-s &&
    ip -6 addr add fd00:9::fe/64 dev tpu-s nodad &&
    in_origins ip link set lo up && in_origins ip link set tpu-o up &&
    in_origins ip addr add 10.9.0.1/24 dev tpu-o && in_origins ip addr add 10.9.0.2/24 dev tpu-o &&
    in_origins ip addr add 10.9.0.53/24 dev tpu-o &&
    in_origins ip -6 addr add fd00:9::1/64 dev tpu-o nodad ||
    { bad "cannot set up the veth pair's addresses"; e2e_finish; exit 1; }

# UDP echo servers: each logs what it received, one line per datagram
EPORT=$((20000 + RANDOM % 20000))
for ip in 10.9.0.1 10.9.0.2 fd00:9::1; do
    bg_origins python3 -c '
import socket, sys
s = socket.socket(socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], int(sys.argv[2])))
print("ready", flush=True)
with open(sys.argv[3], "ab", buffering=0) as log:
    while True:
        data, peer = s.recvfrom(70000)
        log.write(data + b"\n")
        s.sendto(data, peer)
' "$ip" "$EPORT" "$T/echo-$ip.log" > "$T/echo-$ip.out" 2>&1
done
# the "other resolver", answering echo.test with an address of its own
bg_origins "$(command -v dnsmasq || echo /usr/sbin/dnsmasq)" --no-daemon --no-resolv --no-hosts \
    --bind-interfaces --listen-address=10.9.0.53 --port=53 --log-queries \
    --log-facility="$T/other-dns.log" --host-record=echo.test,10.9.0.99 >"$T/other-dns.err" 2>&1
for ip in 10.9.0.1 10.9.0.2 fd00:9::1; do
    wait_for "$T/echo-$ip.out" ready 10 || { bad "echo server $ip" "$(cat "$T/echo-$ip.out")"; e2e_finish; exit 1; }
done
# the other resolver logs its start once it is bound (dnsrelay's query to it
# is positive: sent before the bind, it would be refused)
wait_for "$T/other-dns.log" 'dnsmasq\[[0-9]+\]: started' $((10 * SLOW)) ||
    { bad "the other resolver did not start" "$(cat "$T/other-dns.err" "$T/other-dns.log" 2>/dev/null)"; e2e_finish; exit 1; }

start_dnsmasq --local=/test/ \
    --host-record=echo.test,10.9.0.1 \
    --host-record=echo6.test,fd00:9::1 \
    --host-record=open.test,10.9.0.1 \
    --host-record=blocked.test,10.9.0.2 ||
    { bad "dnsmasq did not start" "$(cat "$T/dnsmasq.err")"; e2e_finish; exit 1; }

RULES='"udp:echo.test:'$EPORT'", "udp:echo6.test:'$EPORT'", "udp:10.9.0.1:'$EPORT'", "udp:[fd00:9::1]:'$EPORT'"'
cat > "$T/s.json" <<JSON
{"network": {"transparent": true,
             "allowedDomains": [$RULES],
             "deniedDomains": ["blocked.test"],
             "dnsServers": ["127.0.0.1:$DPORT"]}}
JSON
cat > "$T/s2.json" <<JSON
{"network": {"transparent": true,
             "allowedDomains": [$RULES, "udp:10.9.0.53:53"],
             "deniedDomains": ["blocked.test"],
             "dnsServers": ["127.0.0.1:$DPORT"]}}
JSON
chmod 644 "$T/s.json" "$T/s2.json"

# lines LABEL FILE: the probe's "ok"/"bad" lines as results
lines() {
    local line
    while IFS= read -r line; do
        case $line in
        ok\ *) ok "$1: ${line#ok }" ;;
        bad\ *) bad "$1: ${line#bad }" ;;
        esac
    done < "$2"
    grep -q '^ok ' "$2" || bad "$1: the probe did not run" "$(cat "$2" "${2%.out}.err" 2>/dev/null | tail -20)"
}

# run_section WHO DIR [setpriv ARGS...]
run_section() {
    local who=$1 dir=$2 n refused LOG
    shift 2
    sluice_run() { # SETTINGS NAME PROBE-ARGS...
        local s=$1 name=$2
        shift 2
        (cd "$dir" && "${RUNAS[@]}" env HOME="$dir" XDG_RUNTIME_DIR="$dir/xdg" "$SLUICE" run \
            --settings "$s" --log "$dir/$name.log" -- python3 "$PROBE" "$@") \
            > "$dir/$name.out" 2> "$dir/$name.err"
    }
    RUNAS=("$@")
    if ! (cd "$dir" && "$@" env HOME="$dir" XDG_RUNTIME_DIR="$dir/xdg" "$SLUICE" run \
        --settings "$T/s.json" -- true) >"$dir/probe.out" 2>&1; then
        if grep -q 'transparent mode needs' "$dir/probe.out"; then
            echo "# SKIP sluice run --transparent as $who: $(tail -1 "$dir/probe.out")"
        else
            bad "sluice run --transparent as $who cannot start" "$(tail -5 "$dir/probe.out")"
        fi
        return
    fi
    : > "$T/echo-10.9.0.1.log"
    : > "$T/echo-10.9.0.2.log"
    : > "$T/other-dns.log"

    # 1. the suite: allowed, denied, DNS, every re-aim attempt
    sluice_run "$T/s.json" suite suite "$EPORT"
    lines "$who" "$dir/suite.out"
    sleep 0.5
    if [ -s "$T/echo-10.9.0.2.log" ]; then
        bad "$who: the denied echo server received datagrams" "$(sort "$T/echo-10.9.0.2.log" | uniq -c)"
    else
        ok "$who: the denied echo server received nothing (sendto, connect, AF_UNSPEC, re-connect, sendmsg, sendmmsg, racing threads)"
    fi
    if grep -qa 'race-after' "$T/echo-10.9.0.1.log" && grep -qa by-name "$T/echo-10.9.0.1.log"; then
        ok "$who: the allowed echo server received the allowed datagrams"
    else
        bad "$who: the allowed echo server's log misses datagrams" "$(sort "$T/echo-10.9.0.1.log" | uniq -c)"
    fi
    if grep -q 'query.*echo.test' "$T/other-dns.log"; then
        bad "$who: a query to the other resolver left the sandbox without a udp: rule" "$(cat "$T/other-dns.log")"
    else
        ok "$who: the other resolver saw no query (sluice's resolver answered)"
    fi
    LOG=$dir/suite.log
    want() { # NAME REGEX
        if grep -E -- "$2" "$LOG" >/dev/null; then ok "$who: log: $1"; else bad "$who: log: $1" "$(grep transparent-udp "$LOG")"; fi
    }
    want "an allowed name's decision" 'event=decision .*protocol=transparent-udp host=echo.test port='"$EPORT"' .*decision=allow .*rule="?.udp:echo.test:'"$EPORT"
    want "an allowed literal's decision" 'protocol=transparent-udp host=10.9.0.1 port='"$EPORT"' .*decision=allow'
    want "a name no udp: rule allows, denied with a hint" 'protocol=transparent-udp host=open.test port='"$EPORT"' .*decision=deny .*no udp: rule allows UDP.*hint=.*udp:open.test:'"$EPORT"
    want "a denied literal" 'protocol=transparent-udp host=10.9.0.2 port='"$EPORT"' .*decision=deny'
    n=$(grep -c "protocol=transparent-udp host=echo.test port=$EPORT " "$LOG")
    [ "$n" = 1 ] && ok "$who: log: the allowed name logged once (two sockets sent to it)" ||
        bad "$who: log: the allowed name logged $n times"
    n=$(grep -c "protocol=transparent-udp host=10.9.0.2 port=$EPORT " "$LOG")
    [ "$n" = 1 ] && ok "$who: log: the denied destination logged once (re-aim attempts and all)" ||
        bad "$who: log: the denied destination logged $n times"
    grep -q "sluice: transparent UDP: .*datagrams up [1-9]" "$dir/suite.err" &&
        ok "$who: the end-of-run summary counts transparent UDP" ||
        bad "$who: no transparent UDP summary" "$(tail -5 "$dir/suite.err")"
    grep -q "sluice: blocked .*10.9.0.2:$EPORT" "$dir/suite.err" &&
        ok "$who: the blocked summary names the denied destination" ||
        bad "$who: the blocked summary misses 10.9.0.2:$EPORT" "$(tail -5 "$dir/suite.err")"

    # 2. a udp: rule that allows the other resolver: the query reaches it
    : > "$T/other-dns.log"
    sluice_run "$T/s2.json" dnsrelay dnsrelay "$EPORT"
    lines "$who" "$dir/dnsrelay.out"
    grep -q 'query.*echo.test' "$T/other-dns.log" &&
        ok "$who: with udp:10.9.0.53:53 the other resolver answered" ||
        bad "$who: the allowed resolver saw no query" "$(cat "$dir/dnsrelay.err" | tail -5)"

    # 3. a port scan from inside: relays bounded
    sluice_run "$T/s.json" scan scan "$EPORT" 30000 200
    lines "$who" "$dir/scan.out"
    # "N relay ports (F from the start, R refused)": at most 64 learned
    n=$(sed -n 's/.*, \([0-9]*\) relay ports (\([0-9]*\) from the start, \([0-9]*\) refused).*/\1 \2 \3/p' "$dir/scan.err")
    read -r n fixed refused <<< "$n"
    if [ -n "$n" ] && [ $((n - fixed)) -le 64 ] && [ "${refused:-0}" -gt 0 ]; then
        ok "$who: a scan of 200 ports made $((n - fixed)) relays beyond the $fixed from the start, $refused ports refused"
    else
        bad "$who: the relays were not bounded (${n:-?} relays, ${refused:-?} refused)" "$(tail -3 "$dir/scan.err")"
    fi
}

mkdir -p -m 700 "$T/run-root" "$T/run-root/xdg"
run_section "$(id -un)" "$T/run-root"
# as root: again as an unprivileged user (the helpers join a user namespace then)
if [ "$(id -u)" = 0 ] && [ "$(cat /proc/self/uid_map | awk '{print $2}')" = 0 ] &&
    command -v setpriv >/dev/null &&
    { id sluicetest >/dev/null 2>&1 || useradd -M sluicetest >/dev/null 2>&1; }; then
    U=$(id -u sluicetest) G=$(id -g sluicetest)
    chmod 711 "$T"
    mkdir -p "$T/run-user/xdg" && chown -R "$U:$G" "$T/run-user" && chmod 700 "$T/run-user/xdg"
    if setpriv --reuid="$U" --regid="$G" --clear-groups test -r "$PROBE" -a -x "$SLUICE"; then
        run_section user "$T/run-user" setpriv --reuid="$U" --regid="$G" --clear-groups --inh-caps=-all
    else
        echo "# SKIP sluice run as a user: the probe or the binary is not readable by sluicetest"
    fi
fi
e2e_finish
