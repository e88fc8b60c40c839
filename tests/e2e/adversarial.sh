#!/usr/bin/env bash
# tests/e2e/adversarial.sh - the gathered bypass cases as one table-driven
# regression suite against `sluice proxy`: every numeric IPv4 spelling, IPv6
# forms that embed IPv4, name tricks (case, dots, IDNA homoglyphs, userinfo,
# control bytes, long names, wildcard edges), names that resolve to denied
# classes, request smuggling and request-line shapes, port tricks, and SOCKS5
# edge cases. Tables: tests/e2e/adversarial/*.tsv (one row per case); the
# runner: adversarial/run.py (see its header for the row format).
#
# How "nothing was dialed or resolved" is proven: run.py opens trap listeners
# on every loopback address and port a mistaken dial could reach (127.0.0.1,
# 127.0.0.2, 127.0.0.3, 127.1.2.3, ::1; the trap port PT and the control port
# PO) and logs every accept with its first bytes; dnsmasq (lib.sh) logs every
# query. After each row the new accepts and queries are checked against the
# row's flags; positive rows must reach the allow-listed control listener,
# so the suite cannot pass with broken traps or a broken DNS log.
#
# Where unprivileged user namespaces work, the whole suite runs in a private
# network namespace (only lo, nothing routes off the machine): rows whose
# mistaken dial would leave loopback (169.254.169.254, 10/8, NAT64, 6to4,
# Teredo, ...) run only there, and are skipped elsewhere. `sluice check`
# judges those targets in any case (adversarial/check.tsv).
set -uo pipefail
SLUICE=${1:?usage: adversarial.sh PATH/TO/sluice}
case $SLUICE in /*) ;; *) SLUICE=$(cd "$(dirname "$SLUICE")" && pwd)/$(basename "$SLUICE") ;; esac
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LO_UP='import fcntl, socket, struct
s = socket.socket()
f = struct.unpack("16sh", fcntl.ioctl(s, 0x8913, struct.pack("16sh", b"lo", 0)))[1]
fcntl.ioctl(s, 0x8914, struct.pack("16sh", b"lo", f | 1))'
if [ -z "${ADV_NETNS:-}" ] && [ "${ADV_NO_NETNS:-}" != 1 ] &&
    unshare -rn python3 -c "$LO_UP" 2>/dev/null; then
    exec env ADV_NETNS=1 unshare -rn bash "${BASH_SOURCE[0]}" "$SLUICE"
fi
NETNS=false
if [ "${ADV_NETNS:-}" = 1 ]; then
    python3 -c "$LO_UP" || { echo "not ok - cannot bring lo up in the network namespace"; exit 1; }
    NETNS=true
fi
. "$HERE/lib.sh"
# lib.sh: $T, ok/bad, PIDS (killed at exit), free_port, start_dnsmasq, start_proxy
start=$SECONDS
echo "# network namespace: $NETNS"

PO=$(free_port) PT=$(free_port) HP=$(free_port) SP=$(free_port)
V6=false
python3 -c "import socket; socket.socket(socket.AF_INET6).bind(('::1', $PO)); socket.socket(socket.AF_INET6).bind(('::1', $PT))" 2>/dev/null && V6=true

# --- DNS: every name the tables use, answers on loopback or (netns) elsewhere ---
W=wild.test
start_dnsmasq --local=/test/ --local=/localhost/ \
    --host-record=allowed.test,127.0.0.1 --host-record=portonly.test,127.0.0.1 \
    --host-record=denied.test,127.0.0.1 --host-record=x.blocked.$W,127.0.0.1 \
    --host-record=evil.test,127.0.0.2 --host-record=allowed.test.evil.test,127.0.0.2 \
    --host-record=a.$W,127.0.0.1 --host-record=b.a.$W,127.0.0.1 \
    --host-record=lo2.$W,127.0.0.2 --host-record=lo3.$W,127.0.0.3 --host-record=lo123.$W,127.1.2.3 \
    --host-record=zero.$W,0.0.0.0 --host-record=unspec6.$W,:: \
    --host-record=mapped1.$W,::ffff:127.0.0.1 --host-record=mapped2.$W,::ffff:127.0.0.2 \
    --host-record=mapped0.$W,::ffff:0.0.0.0 \
    --host-record=lo6.$W,::1 --host-record=mixed.$W,127.0.0.2 --host-record=mixed.$W,127.0.0.1 \
    --host-record=mixed3.$W,127.0.0.3 --host-record=mixed3.$W,127.0.0.1 \
    --host-record=compat.$W,::127.0.0.1 --host-record=nat64.$W,64:ff9b::7f00:1 \
    --host-record=sixtofour.$W,2002:7f00:1:: --host-record=teredo.$W,2001:0:4136:e378:8000:63bf:80ff:fffe \
    --host-record=meta.$W,169.254.169.254 --host-record=meta6.$W,fd00:ec2::254 \
    --host-record=metaecs.$W,169.254.170.2 --host-record=metaali.$W,100.100.100.200 \
    --host-record=private.$W,10.1.2.3 --host-record=cgnat.$W,100.64.0.1 \
    --host-record=ll.$W,169.254.1.1 --host-record=ll6.$W,fe80::1 \
    --host-record=mcast.$W,224.0.0.1 --host-record=bcast.$W,255.255.255.255 \
    --host-record=proxy.$W,127.0.0.1 \
    --host-record=localhost.$W,127.0.0.1 --host-record=siit.$W,::ffff:0:7f00:1 \
    --host-record=siitmeta.$W,::ffff:0:a9fe:a9fe \
    ${ADV_DNSMASQ_EXTRA:-}
[ -n "$DPORT" ] || { bad "dnsmasq did not start" "$(cat "$T/dnsmasq.err")"; e2e_finish; exit 1; }

# --- settings ----------------------------------------------------------------------
python3 - "$T/s.json" "$V6" "$PO" "$HP" "$SP" "$DPORT" "$W" <<'PY'
import json, sys
path, v6, po, hp, sp, dport, w = sys.argv[1:]
allow = ["allowed.test", "*." + w, "portonly.test:" + po, "127.0.0.1:" + po,
         "127.0.0.1:" + hp, "127.0.0.1:" + sp] + (["[::1]:" + po] if v6 == "true" else [])
s = {"network": {"allowedDomains": allow,
                 "deniedDomains": ["denied.test", "*.blocked." + w, "127.0.0.3"],
                 "dnsServers": ["127.0.0.1:" + dport], "denyPrivateAddresses": True},
     "proxy": {"timeouts": {"head": 2, "handshake": 2, "dns": 10, "dial": 10, "idle": 5},
               "limits": {"maxHeadBytes": 4096}}}
json.dump(s, open(path, "w"), indent=1)
PY
cat > "$T/a.json" <<JSON
{"network": {"allowedDomains": ["allowed.test", "127.0.0.1:$PO"], "deniedDomains": ["denied.test"],
             "dnsServers": ["127.0.0.1:$DPORT"]},
 "proxy": {"timeouts": {"handshake": 2, "dns": 10, "dial": 10},
           "auth": {"username": "alice", "password": "s3cret"}}}
JSON

start_proxy main "$T/s.json" --http "tcp:127.0.0.1:$HP" --socks "tcp:127.0.0.1:$SP"
[ "$HPORT" = "$HP" ] && [ "$SPORT" = "$SP" ] || { bad "proxy listeners" "$HPORT $SPORT"; e2e_finish; exit 1; }
start_proxy auth "$T/a.json" --http off --socks tcp:127.0.0.1:0
SPA=$SPORT
[ -n "$SPA" ] || { e2e_finish; exit 1; }

cat > "$T/cfg.json" <<JSON
{"po": $PO, "pt": $PT, "hp": $HP, "sp": $SP, "sp_auth": $SPA, "v6": $V6, "netns": $NETNS,
 "dnslog": "$T/dnsmasq.log", "sluice": "$SLUICE", "settings": "$T/s.json"}
JSON

# --- traffic rows ------------------------------------------------------------------------------
python3 "$HERE/adversarial/run.py" "$T/cfg.json" \
    "$HERE/adversarial/check.tsv" "$HERE/adversarial/ipv4.tsv" "$HERE/adversarial/ipv6.tsv" "$HERE/adversarial/names.tsv" \
    "$HERE/adversarial/resolved.tsv" "$HERE/adversarial/smuggling.tsv" \
    "$HERE/adversarial/ports.tsv" "$HERE/adversarial/socks.tsv" > "$T/run.out" 2>&1
rc=$?
cat "$T/run.out"
pass=$((pass + $(grep -c '^ok - ' "$T/run.out")))
fail=$((fail + $(grep -c '^not ok - ' "$T/run.out")))
[ "$rc" = 0 ] || grep -q '^not ok - ' "$T/run.out" || bad "run.py failed" "exit $rc"

# --- the proxy survived every row and its log has no allow for a denied row -------------------
out=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -x "http://127.0.0.1:$HP" "http://denied.test:$PO/")
[ "$out" = 403 ] && ok "the proxy still answers after every row" || bad "proxy after the rows" "$out $(tail -5 "$T/main.err")"
kill -0 "$PROXY_PID" 2>/dev/null && ok "the proxy is still running" || bad "proxy died" "$(tail -20 "$T/main.err")"
bad_allow=$(grep 'event=decision' "$T/main.log" | grep 'decision=allow' |
    grep -vE " host=(allowed\.test|127\.0\.0\.1|::1|portonly\.test|a\.wild\.test|mapped1\.wild\.test|lo6\.wild\.test|[a-z0-9._-]*\.wild\.test) " || true)
[ -z "$bad_allow" ] && ok "log: every allow decision is for an allow-listed target" || bad "log: unexpected allow" "$bad_allow"
if grep -aq $'[\x01-\x08\x0b-\x1f\x7f]' "$T/main.log"; then bad "log: control bytes from hostile targets reached the log" "$(grep -a $'[\x01-\x08\x0b-\x1f\x7f]' "$T/main.log" | od -c | head -5)"
else ok "log: no control bytes from hostile targets in the log"; fi
kill -TERM "$PROXY_PID"; wait "$PROXY_PID"; rc=$?
[ "$rc" = 0 ] && ok "SIGTERM: exit status 0" || bad "SIGTERM exit status" "$rc $(tail -20 "$T/main.err")"

echo "# adversarial.sh took $((SECONDS - start)) s"
e2e_finish
