#!/usr/bin/env bash
# tests/e2e/tpudp_attack.sh - rt-14: a hostile command against transparent
# UDP (`sluice run --transparent`, run/tp_udp.c): get a datagram or any
# packet out of the sandbox's namespace to a destination the policy does
# not allow, or to the host's own loopback services; reach a host resource
# through the relays or the raw ICMP socket; or break the run (memory,
# descriptors, a dead loop). As root and again as an unprivileged user
# (setpriv, sluicetest). Every case passes when the boundary holds; see
# tests/e2e/rt-14-report.md.
#
# Layout (transparent_udp.sh's): the script re-executes itself under
# `unshare -n` (or `unshare -rn`); the origins live in a second namespace
# behind a veth pair (10.9.0.0/24, fd00:9::/64, 169.254.169.254 as the
# "metadata" address); sluice's resolver is the e2e lib's dnsmasq on
# 127.0.0.1. Victims answer b"VICTIM " + what they got and log it: UDP and
# TCP on every address of this namespace (0.0.0.0 and [::], so its
# loopback, 127.0.0.53 and its own veth address 10.9.0.254) at the test's
# ports and 53, and on the origins' denied, metadata and resolver
# addresses. Every victim log must stay empty. No packet can reach a real
# address: the namespaces have no other interface.
#
# usage: tpudp_attack.sh PATH/TO/sluice
set -uo pipefail
SLUICE=${1:?usage: tpudp_attack.sh PATH/TO/sluice}
case $SLUICE in /*) ;; *) SLUICE=$PWD/$SLUICE ;; esac
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

if [ -z "${SLUICE_TPUA_NETNS:-}" ]; then
    for how in "unshare -n" "unshare -rn"; do
        if $how true 2>/dev/null; then
            SLUICE_TPUA_NETNS=1 exec $how bash "$HERE/tpudp_attack.sh" "$SLUICE"
        fi
    done
    echo "# SKIP cannot make a network namespace (unshare -n, unshare -rn)"
    echo "0 passed, 0 failed"
    exit 77
fi
. "$HERE/lib.sh"
PROBE=$HERE/transparent-helpers/tpudp_attack.py

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
in_origins() { nsenter -F -t "$OPID" -n "$@"; }
bg_origins() {
    (exec nsenter -F -t "$OPID" -n "$@") &
    PIDS+=($!)
}
for _ in $(seq 50); do
    [ "$(readlink /proc/$OPID/ns/net)" != "$(readlink /proc/self/ns/net)" ] && break
    sleep 0.05
done
if ! ip link add tpa-s type veth peer name tpa-o netns "$OPID" 2>"$T/veth.err"; then
    echo "# SKIP no veth pair here: $(cat "$T/veth.err")"
    e2e_finish
    exit 77
fi
ip link set tpa-s up && ip addr add 10.9.0.254/24 dev tpa-s &&
    ip -6 addr add fd00:9::fe/64 dev tpa-s nodad &&
    in_origins ip link set lo up && in_origins ip link set tpa-o up &&
    in_origins ip addr add 10.9.0.1/24 dev tpa-o && in_origins ip addr add 10.9.0.2/24 dev tpa-o &&
    in_origins ip addr add 10.9.0.53/24 dev tpa-o && in_origins ip addr add 10.9.0.55/24 dev tpa-o &&
    in_origins ip addr add 169.254.169.254/16 dev tpa-o &&
    in_origins ip -6 addr add fd00:9::1/64 dev tpa-o nodad &&
    in_origins ip -6 addr add fd00:9::2/64 dev tpa-o nodad ||
    { bad "cannot set up the veth pair's addresses"; e2e_finish; exit 1; }
# the host side reaches the metadata address over the veth (as a cloud VM would)
ip route add 169.254.0.0/16 dev tpa-s 2>/dev/null

EPORT=$((20000 + RANDOM % 10000))
VPORT=$((EPORT + 10001))
SPORT=$((EPORT + 10002))

# The allowed echo servers (10.9.0.1, [fd00:9::1]): plain echo, logged.
for ip in 10.9.0.1 fd00:9::1; do
    bg_origins python3 -c '
import socket, sys
s = socket.socket(socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], int(sys.argv[2])))
print("ready", flush=True)
with open(sys.argv[3], "ab", buffering=0) as log:
    while True:
        data, peer = s.recvfrom(70000)
        log.write(data[:60] + b"\n")
        s.sendto(data, peer)
' "$ip" "$EPORT" "$T/echo-$ip.log" > "$T/echo-$ip.out" 2>&1
done

# victims LOG PROTO:ADDR:PORT...: UDP and TCP servers that log what reaches
# them and answer b"VICTIM " + it. Binding failures are fatal (a victim not
# there proves nothing).
VICTIM='
import select, socket, sys
log = open(sys.argv[1], "ab", buffering=0)
socks = {}
for spec in sys.argv[2:]:
    proto, rest = spec.split(":", 1)
    addr, port = rest.rsplit(":", 1)
    fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM if proto == "u" else socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if fam == socket.AF_INET6:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    if proto == "u" and addr == "0.0.0.0":
        s.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
    s.bind((addr, int(port)))
    if proto == "t":
        s.listen(64)
    socks[s] = (proto, spec)
print("ready", flush=True)
while True:
    r, _, _ = select.select(list(socks), [], [])
    for s in r:
        proto, spec = socks[s]
        try:
            if proto == "u":
                data, peer = s.recvfrom(70000)
                log.write(("%s from %s: " % (spec, peer)).encode() + data[:60] + b"\n")
                s.sendto(b"VICTIM " + data[:100], peer)
            else:
                c, peer = s.accept()
                log.write(("%s TCP connection from %s\n" % (spec, peer)).encode())
                try:
                    c.send(b"VICTIM\n")
                except OSError:
                    pass
                c.close()
        except OSError:
            pass
'
HV=() OV=()
for p in "$VPORT" "$EPORT" 53; do
    for a in 0.0.0.0 ::; do HV+=("u:$a:$p" "t:$a:$p"); done
done
for a in 10.9.0.2 169.254.169.254 fd00:9::2; do
    for p in "$VPORT" "$EPORT" 53; do OV+=("u:$a:$p" "t:$a:$p"); done
done
# (not 10.9.0.1:VPORT: mix.g.test under udp:*.g.test:* may go there, as allowed)
OV+=("t:10.9.0.1:$EPORT" "u:10.9.0.53:5353" "u:10.9.0.53:$EPORT")
python3 -c "$VICTIM" "$T/victims-host.log" "${HV[@]}" > "$T/victims-host.out" 2>&1 &
PIDS+=($!)
bg_origins python3 -c "$VICTIM" "$T/victims-origins.log" "${OV[@]}" > "$T/victims-origins.out" 2>&1
# the "other resolver"
bg_origins "$(command -v dnsmasq || echo /usr/sbin/dnsmasq)" --no-daemon --no-resolv --no-hosts \
    --bind-interfaces --listen-address=10.9.0.53 --port=53 --log-queries \
    --log-facility="$T/other-dns.log" --host-record=echo.test,10.9.0.99 >"$T/other-dns.err" 2>&1
# a resolver with huge answers (udp:10.9.0.55:53 in dns.json): three
# datagrams of 65,000 bytes for each query
bg_origins python3 -c '
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("10.9.0.55", 53))
print("ready", flush=True)
while True:
    q, peer = s.recvfrom(70000)
    for i in range(3):
        s.sendto(q[:2] + b"\x81\x80" + bytes([i]) * 64996, peer)
' > "$T/bigdns.out" 2>&1
for f in echo-10.9.0.1 echo-fd00:9::1 victims-host victims-origins bigdns; do
    wait_for "$T/$f.out" ready 10 || { bad "$f did not start" "$(cat "$T/$f.out")"; e2e_finish; exit 1; }
done
# the other resolver logs its start once it is bound (dnsport's query to it
# is positive: sent before the bind, it would be refused)
wait_for "$T/other-dns.log" 'dnsmasq\[[0-9]+\]: started' $((10 * SLOW)) ||
    { bad "the other resolver did not start" "$(cat "$T/other-dns.err" "$T/other-dns.log" 2>/dev/null)"; e2e_finish; exit 1; }

# sluice's resolver: the guard's names under *.g.test (an addn-hosts file:
# several answers per name), any *.c.test name -> the allowed echo
cat > "$T/hosts" <<EOF
10.9.0.1 echo.test
fd00:9::1 echo.test
127.0.0.1 lo.g.test
::1 lo6.g.test
::ffff:127.0.0.1 mapped.g.test
169.254.169.254 meta.g.test
10.9.0.254 self.g.test
224.0.0.1 mc.g.test
255.255.255.255 bc.g.test
0.0.0.0 zero.g.test
127.0.0.1 mix.g.test
10.9.0.1 mix.g.test
10.9.0.1 open.test
10.9.0.2 blocked.test
EOF
start_dnsmasq --local=/test/ --addn-hosts="$T/hosts" --address=/c.test/10.9.0.1 ||
    { bad "dnsmasq did not start" "$(cat "$T/dnsmasq.err")"; e2e_finish; exit 1; }

# a black-hole upstream (reads, never answers) for the held-datagram flood
BH=$(free_port)
python3 - "$BH" "$T/bh.ready" <<'PY' 2>/dev/null &
import socket, sys
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("127.0.0.1", int(sys.argv[1])))
t = socket.socket(); t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); t.bind(("127.0.0.1", int(sys.argv[1]))); t.listen(128)
open(sys.argv[2], "w").close()
while True:
    u.recv(4096)
PY
PIDS+=($!)

RULES='"udp:*.g.test:*", "udp:*.c.test:*", "udp:echo.test:'$EPORT'", "udp:10.9.0.1:'$EPORT'", "udp:[fd00:9::1]:'$EPORT'"'
settings() { # FILE EXTRA-RULES EXTRA-KEYS DNS
    cat > "$1" <<JSON
{"network": {"transparent": true,
             "allowedDomains": [$RULES$2],
             "deniedDomains": ["blocked.test"],
             "dnsServers": ["${4:-127.0.0.1:$DPORT}"]$3}}
JSON
    chmod 644 "$1"
}
settings "$T/s.json" "" ""
settings "$T/dns.json" ', "udp:10.9.0.53:53", "udp:10.9.0.55:53"' ""
settings "$T/bind.json" "" ', "allowLocalBinding": true'
settings "$T/held.json" ', "udp:slow.test:'$SPORT'"' "" "127.0.0.1:$BH"

lines() { # LABEL FILE
    local line
    while IFS= read -r line; do
        case $line in
        ok\ *) ok "$1: ${line#ok }" ;;
        bad\ *) bad "$1: ${line#bad }" ;;
        note\ *) echo "# rt note: $1: ${line#note }" ;;
        esac
    done < "$2"
    grep -q '^ok ' "$2" || bad "$1: the probe did not run" "$(cat "$2" "${2%.out}.err" 2>/dev/null | tail -20)"
}

victims_clean() { # LABEL
    local f
    sleep 0.3
    for f in victims-host victims-origins; do
        if [ -s "$T/$f.log" ]; then
            bad "$1: a victim ($f) was reached" "$(sort "$T/$f.log" | uniq -c | head -30)"
        else
            ok "$1: no victim ($f) got a datagram or a connection"
        fi
        : > "$T/$f.log"
    done
}

# sample PID: the highest VmRSS (kB) and descriptor count of PID while it runs
sample() {
    local p=$1 r f t0=$SECONDS
    RSS=0 FDS=0
    while kill -0 "$p" 2>/dev/null; do
        r=$(awk '/^VmRSS/ {print $2}' "/proc/$p/status" 2>/dev/null)
        f=$(ls "/proc/$p/fd" 2>/dev/null | wc -l)
        [ -n "$r" ] && [ "$r" -gt "$RSS" ] && RSS=$r
        [ "$f" -gt "$FDS" ] && FDS=$f
        if [ $((SECONDS - t0)) -gt 150 ]; then kill "$p"; break; fi
        sleep 0.1
    done
    wait "$p"
}

run_section() { # WHO DIR [setpriv ARGS...]
    local who=$1 dir=$2 h logged checked rssmax=65536 n
    shift 2
    RUNAS=("$@")
    srun() { # SETTINGS NAME PROBE-ARGS... (foreground)
        local s=$1 name=$2
        shift 2
        (cd "$dir" && "${RUNAS[@]}" env HOME="$dir" XDG_RUNTIME_DIR="$dir/xdg" "$SLUICE" run \
            --settings "$s" --log "$dir/$name.log" -- python3 "$PROBE" "$@") \
            > "$dir/$name.out" 2> "$dir/$name.err"
    }
    sbg() { # the same in the background, sluice's pid in SPID (exec all the way)
        local s=$1 name=$2
        shift 2
        (cd "$dir" && exec "${RUNAS[@]}" env HOME="$dir" XDG_RUNTIME_DIR="$dir/xdg" "$SLUICE" run \
            --settings "$s" --log "$dir/$name.log" -- python3 "$PROBE" "$@") \
            > "$dir/$name.out" 2> "$dir/$name.err" &
        SPID=$!
    }
    if ! (cd "$dir" && "$@" env HOME="$dir" XDG_RUNTIME_DIR="$dir/xdg" "$SLUICE" run \
        --settings "$T/s.json" -- true) >"$dir/probe.out" 2>&1; then
        if grep -q 'transparent mode needs' "$dir/probe.out"; then
            echo "# SKIP sluice run --transparent as $who: $(tail -1 "$dir/probe.out")"
        else
            bad "sluice run --transparent as $who cannot start" "$(tail -5 "$dir/probe.out")"
        fi
        return
    fi
    grep -qa __asan_init "$SLUICE" && rssmax=$((rssmax * 3))
    : > "$T/victims-host.log"
    : > "$T/victims-origins.log"
    : > "$T/other-dns.log"

    # 1. the attacks: guard forms, literals, synthetic guesses, spoofing,
    # IP options, other protocols, routes, port 53
    srun "$T/s.json" attack attack "$EPORT" "$VPORT"
    lines "$who" "$dir/attack.out"
    victims_clean "$who: attacks"
    if grep -q 'query.*echo.test' "$T/other-dns.log"; then
        bad "$who: a DNS query reached the other resolver without a udp: rule" "$(cat "$T/other-dns.log")"
    else
        ok "$who: the other resolver saw no query"
    fi
    if grep -q 'query.*leak' "$T/dnsmasq.log"; then
        bad "$who: a query of the command reached sluice's own upstream directly" "$(grep leak "$T/dnsmasq.log")"
    fi
    grep -q 'Traceback' "$dir/attack.err" && bad "$who: the probe crashed" "$(tail -5 "$dir/attack.err")"

    # 1b. check <-> run: `sluice check --resolve udp:H:P` says what the relay decided
    for h in echo.test lo.g.test meta.g.test self.g.test mc.g.test zero.g.test mix.g.test \
        10.9.0.1 10.9.0.2 127.0.0.1 169.254.169.254 224.0.0.1 255.255.255.255 10.9.0.254; do
        for p in "$EPORT" "$VPORT"; do
            logged=$(grep -m1 "protocol=transparent-udp host=$h port=$p " "$dir/attack.log" |
                sed -n 's/.* decision=\([a-z_]*\).*/\1/p')
            [ -n "$logged" ] || continue
            checked=$("$SLUICE" check --settings "$T/s.json" --resolve --json "udp:$h:$p" 2>&1 |
                sed -n 's/.*"decision":"\([a-z_]*\)".*/\1/p')
            if [ "$logged" = "$checked" ]; then
                ok "$who: check udp:$h:$p says $checked, as the relay decided"
            else
                bad "$who: check udp:$h:$p says '$checked', the relay logged '$logged'"
            fi
        done
    done

    # 2. replies: other hosts and ports aim at sluice's host sockets of an
    # allowed flow (the kernel must take only the destination's datagrams)
    rm -f "$dir/flow-ready" "$dir/spoofed"
    : > "$T/echo-10.9.0.1.log"
    sbg "$T/s.json" replies replies "$EPORT" "$VPORT" "$dir"
    local rp=$SPID
    for _ in $(seq 300); do [ -e "$dir/flow-ready" ] && break; sleep 0.1; done
    if [ -e "$dir/flow-ready" ]; then
        python3 - "$EPORT" > "$T/hostports" <<'PY'
import sys
port = int(sys.argv[1])
want4 = "0100090A:%04X" % port
want6 = "090000FD000000000000000001000000:%04X" % port  # fd00:9::1, four host-order words
for f, want in (("/proc/net/udp", want4), ("/proc/net/udp6", want6)):
    for line in open(f).read().splitlines()[1:]:
        x = line.split()
        if x[2] == want:
            print("6" if f.endswith("6") else "4", int(x[1].split(":")[1], 16))
PY
        n=$(wc -l < "$T/hostports")
        [ "$n" -ge 1 ] && ok "$who: sluice's host sockets of the allowed flows found ($n)" ||
            bad "$who: no host socket connected to the allowed echo found" "$(cat /proc/net/udp /proc/net/udp6)"
        in_origins python3 - "$T/hostports" "$EPORT" <<'PY'
import socket, sys
port = int(sys.argv[2])
for line in open(sys.argv[1]):
    fam, lport = line.split()
    lport = int(lport)
    if fam == "4":
        srcs, dst = [("10.9.0.2", port), ("10.9.0.2", 0), ("10.9.0.1", 0), ("10.9.0.53", 53),
                     ("169.254.169.254", port)], ("10.9.0.254", lport)
        af = socket.AF_INET
    else:
        srcs, dst = [("fd00:9::2", port), ("fd00:9::1", 0)], ("fd00:9::fe", lport)
        af = socket.AF_INET6
    for src in srcs:
        s = socket.socket(af, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        try:
            s.bind(src)
            for _ in range(3):
                s.sendto(b"spoof from %s" % str(src).encode(), dst)
        except OSError as e:
            print("spoofer:", src, e)
        s.close()
PY
        touch "$dir/spoofed"
    fi
    wait_exit "$rp" 30 || kill "$rp"
    lines "$who" "$dir/replies.out"

    # 3. binds beside the relays (network.allowLocalBinding)
    srun "$T/bind.json" bind bind "$EPORT" "$VPORT"
    lines "$who" "$dir/bind.out"

    # 4. DNS to a udp:-allowed resolver's other ports; TCP 53
    : > "$T/other-dns.log"
    srun "$T/dns.json" dnsport dnsport "$EPORT" "$VPORT"
    lines "$who" "$dir/dnsport.out"
    victims_clean "$who: DNS ports"

    # 5. log once per destination: two allowed names whose hash collides in
    # tp_udp.c's ring are both logged, two denied ones too
    srun "$T/s.json" collide collide "$EPORT" "$VPORT"
    lines "$who" "$dir/collide.out"
    for k in pair dpair; do
        read -r _ n1 n2 <<< "$(grep "^$k " "$dir/collide.out")"
        [ -n "${n2:-}" ] || { bad "$who: collide: no $k"; continue; }
        if grep -q "protocol=transparent-udp host=$n1 port=$EPORT " "$dir/collide.log" &&
            grep -q "protocol=transparent-udp host=$n2 port=$EPORT " "$dir/collide.log"; then
            ok "$who: log: both $k names ($n1, $n2) are logged"
        else
            bad "$who: log: the second of two $k names with one hash is not logged (rt-14 finding 1)" \
                "$(grep -E "host=($n1|$n2) " "$dir/collide.log")"
        fi
    done
    if grep -q "d[0-9]*\.n\.test" "$dir/collide.err"; then
        n=$(grep -o "d[0-9]*\.n\.test:$EPORT" "$dir/collide.err" | sort -u | wc -l)
        [ "$n" = 2 ] && ok "$who: both denied colliding names are in the blocked summary" ||
            bad "$who: the blocked summary names $n of the 2 denied colliding names" "$(grep -A5 blocked "$dir/collide.err")"
    fi
    victims_clean "$who: collisions"

    # 6. bounds: 64 KiB datagrams held for a name that never resolves
    sbg "$T/held.json" held held "$EPORT" "$VPORT" slow.test "$SPORT"
    sample "$SPID"
    if grep -q '^held .*dns=ok echo=ok' "$dir/held.out" && [ "$RSS" -le "$rssmax" ]; then
        ok "$who: 2400 datagrams of 64 KiB to a name that never resolves: RSS ${RSS} kB <= $rssmax, fds $FDS; $(grep '^held' "$dir/held.out")"
    else
        bad "$who: held datagrams" "RSS $RSS kB (max $rssmax), fds $FDS: $(cat "$dir/held.out"; tail -3 "$dir/held.err")"
    fi
    # 7. 3000 source ports to the allowed literal (256 flows), then a flood of
    # 64 KiB datagrams to the denied one while DNS and the echo are checked
    sbg "$T/s.json" flows flows "$EPORT" "$VPORT" 3000
    sample "$SPID"
    if grep -q '^flows .*dns=ok echo=ok' "$dir/flows.out" && [ "$FDS" -le 700 ] && [ "$RSS" -le "$rssmax" ]; then
        ok "$who: 3000 flows then a 64 KiB flood to a denied address: fds $FDS <= 700, RSS ${RSS} kB; $(grep '^flows' "$dir/flows.out")"
    else
        bad "$who: flows and flood" "fds $FDS (max 700), RSS $RSS kB: $(cat "$dir/flows.out"; tail -3 "$dir/flows.err")"
    fi
    grep -q 'flows evicted' "$dir/flows.err" && echo "# rt note: $who: $(grep -o 'transparent UDP:.*' "$dir/flows.err")"
    victims_clean "$who: floods"
}

mkdir -p -m 700 "$T/run-root" "$T/run-root/xdg"
run_section "$(id -un)" "$T/run-root"
# TPUA_NO_USER=1: the first pass only (while working on a case)
if [ -z "${TPUA_NO_USER:-}" ] && [ "$(id -u)" = 0 ] && [ "$(awk '{print $2}' /proc/self/uid_map)" = 0 ] &&
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
