#!/usr/bin/env bash
# tests/e2e/verdict.sh - one verdict: `sluice check --resolve` and the live
# proxy must agree on every row of the check tables.
#
# Tables: tests/data/reference/decisions/*.{json,expect} (reference.sh runs
# them through `sluice check --expect`) and tests/data/check/*.{json,expect}
# (check.sh). Every target of every row is judged by `sluice check --resolve
# --json`, then sent through `sluice proxy` as an HTTP CONNECT, as a plain
# HTTP GET (absolute form) and as a SOCKS5 CONNECT; verdict-helpers/probe.py
# compares decision, rule and source, and a deny's reason. The proxy asks an
# exec handler that allows and records every question, so "ask" is visible;
# names are answered by a dnsmasq started here: resolve.records for the
# resolve table, 93.184.216.34 for every other name of the tables.
#
# Everything runs in a network namespace of its own with only loopback up
# (the script re-executes itself under `unshare -n`, or `unshare -rn`), so a
# dial to an answer outside 127.0.0.0/8 fails at once and never leaves the
# machine. Without a namespace the test is skipped (exit 77), never run on
# the host's network.
#
# usage: verdict.sh PATH/TO/sluice
set -uo pipefail
SLUICE=${1:?usage: verdict.sh PATH/TO/sluice}
case $SLUICE in /*) ;; *) SLUICE=$PWD/$SLUICE ;; esac
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

if [ -z "${SLUICE_VERDICT_NETNS:-}" ]; then
    for how in "unshare -n" "unshare -rn"; do
        if $how true 2>/dev/null; then
            SLUICE_VERDICT_NETNS=1 exec $how bash "$HERE/verdict.sh" "$SLUICE"
        fi
    done
    echo "# SKIP cannot make a network namespace (unshare -n, unshare -rn)"
    echo "0 passed, 0 failed"
    exit 77
fi
# loopback up (SIOCSIFFLAGS; no iproute2 needed), and nothing but loopback
if ! python3 - <<'PY'; then
import fcntl, socket, struct, sys
names = [n for _, n in socket.if_nameindex()]
if names != ["lo"]:
    print("not ok - the namespace has interfaces besides lo (%s); refusing to run" % names)
    sys.exit(1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
flags = struct.unpack("16sh", fcntl.ioctl(s, 0x8913, struct.pack("16sh", b"lo", 0)))[1]
fcntl.ioctl(s, 0x8914, struct.pack("16sh", b"lo", flags | 1))  # SIOCSIFFLAGS, IFF_UP
PY
    echo "not ok - cannot bring up loopback in the test's own namespace"
    echo "0 passed, 1 failed"
    exit 1
fi

. "$HERE/lib.sh"
REF=$(cd "$HERE/../data/reference/decisions" && pwd) || exit 2
CHK=$(cd "$HERE/../data/check" && pwd) || exit 2
PROBE="python3 $HERE/verdict-helpers/probe.py"
export VERDICT_ASK_LOG="$T/asked.log"
: > "$VERDICT_ASK_LOG"

# targets TABLE.expect: the targets of its rows, one a line
targets() { sed -e 's/#.*//' "$1" | awk 'NF >= 2 { print $2 }'; }

TABLES=()
for exp in "$REF"/*.expect "$CHK"/*.expect; do TABLES+=("${exp%.expect}"); done

# --- 1. canonical names of every table, for the default DNS records ---------
mapfile -t RECORDS < <(grep -v '^#' "$CHK/resolve.records")
declare -A special=() seen=()
for r in "${RECORDS[@]}"; do
    case $r in --host-record=*) n=${r#--host-record=}; special[${n%%,*}]=1 ;; esac
done
while IFS= read -r t; do special[$t]=1; done < <(targets "$CHK/resolve.expect")
DEFAULTS=()
nrows=0
for base in "${TABLES[@]}"; do
    mapfile -t tg < <(targets "$base.expect")
    nrows=$((nrows + ${#tg[@]}))
    [ "${#tg[@]}" -gt 0 ] || continue
    while IFS= read -r h; do
        case $h in *:* | *[!0-9.]*) ;; *) continue ;; esac # an IPv4 literal
        case $h in *:*) continue ;; esac                  # an IPv6 literal
        [ -n "${special[$h]:-}" ] || [ -n "${seen[$h]:-}" ] && continue
        seen[$h]=1
        DEFAULTS+=("--host-record=$h,93.184.216.34")
    done < <("$SLUICE" check --settings "$base.json" --json -- "${tg[@]}" 2>/dev/null |
             python3 -c 'import json,sys; [print(json.loads(l)["host"]) for l in sys.stdin if l.strip()]')
done
[ "$nrows" -gt 50 ] && ok "tables hold $nrows rows" || bad "only $nrows rows found in the tables"

# section 3's name with only a private answer
DEFAULTS+=("--host-record=private.verdict.test,10.9.8.7")
start_dnsmasq "${RECORDS[@]}" "${DEFAULTS[@]}" ||
    { bad "dnsmasq did not start" "$(cat "$T/dnsmasq.err")"; e2e_finish; exit 1; }

# --- 2. each table: check, then the proxy -------------------------------------
probed=0
: > "$T/all.probe"
for base in "${TABLES[@]}"; do
    name=$(basename "$(dirname "$base")")/$(basename "$base")
    mapfile -t tg < <(targets "$base.expect")
    [ "${#tg[@]}" -gt 0 ] || continue
    settings="$T/$(basename "$base").json"
    # the table's settings, with this test's DNS server and timeouts; an unset
    # denyPrivateAddresses is made explicit (false, check's reading), because
    # `sluice proxy` alone would default it to true
    python3 - "$base.json" "$settings" "127.0.0.1:$DPORT" <<'PY' || { bad "$name: settings"; continue; }
import json, sys
s = json.load(open(sys.argv[1]))
net = s.setdefault("network", {})
net["dnsServers"] = [sys.argv[3]]
net.setdefault("denyPrivateAddresses", False)
s.setdefault("proxy", {}).setdefault("timeouts", {}).update({"dns": 3, "dial": 3})
json.dump(s, open(sys.argv[2], "w"), indent=2)
PY
    if ! "$SLUICE" check --settings "$settings" --resolve --json -- "${tg[@]}" > "$T/check.jsonl" 2> "$T/check.err"; then
        bad "$name: sluice check --resolve failed" "$(cat "$T/check.err")"
        continue
    fi
    if [ "$(grep -c . "$T/check.jsonl")" -ne "${#tg[@]}" ]; then
        bad "$name: check answered $(grep -c . "$T/check.jsonl") of ${#tg[@]} targets"
        continue
    fi
    start_proxy "proxy-$(basename "$base")" "$settings" --http tcp:127.0.0.1:0 \
        --socks tcp:127.0.0.1:0 --ask "exec:$HERE/verdict-helpers/allow.sh"
    if [ -z "$HPORT" ] || [ -z "$SPORT" ]; then
        kill "$PROXY_PID" 2>/dev/null
        continue
    fi
    $PROBE "$name" "$HPORT" "$SPORT" "$VERDICT_ASK_LOG" "$T/proxy-$(basename "$base").log" \
        < "$T/check.jsonl" > "$T/probe.out" 2>&1
    while IFS= read -r line; do
        echo "$line"
        case $line in
            "ok - "*) pass=$((pass + 1)); probed=$((probed + 1)) ;;
            "not ok - "*) fail=$((fail + 1)); probed=$((probed + 1)) ;;
            *) bad "$name: probe: $line" ;;
        esac
    done < "$T/probe.out"
    cat "$T/probe.out" >> "$T/all.probe"
    kill "$PROXY_PID" 2>/dev/null
    wait "$PROXY_PID" 2>/dev/null
done

# --- 3. check --proxy: the proxy's defaults ------------------------------------
# settings that leave network.denyPrivateAddresses unset: `sluice proxy` denies
# private addresses, plain `sluice check` (run's reading) allows them, and
# `sluice check --proxy` must agree with the live proxy again
PRIV=(10.1.2.3:80 192.168.7.7 "[fd00::7]:443" private.verdict.test 172.16.0.9:8080)
printf '{"network": {"allowAllDomains": true, "dnsServers": ["127.0.0.1:%s"]},\n "proxy": {"timeouts": {"dns": 3, "dial": 3}}}\n' \
    "$DPORT" > "$T/private.json"
if "$SLUICE" check --settings "$T/private.json" --resolve --json -- "${PRIV[@]}" > "$T/plain.jsonl" 2> "$T/plain.err" &&
   "$SLUICE" check --settings "$T/private.json" --resolve --json --proxy -- "${PRIV[@]}" > "$T/asproxy.jsonl" 2> "$T/asproxy.err"; then
    for t in "${PRIV[@]}"; do
        a=$(grep -F "\"target\":\"$t\"" "$T/plain.jsonl" | python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["decision"])')
        b=$(grep -F "\"target\":\"$t\"" "$T/asproxy.jsonl" | python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["decision"])')
        [ "$a" = allow ] && [ "$b" = deny ] && ok "check: $t allowed as run reads it, denied with --proxy" ||
            bad "check: $t: without --proxy '$a' (want allow), with --proxy '$b' (want deny)"
    done
    start_proxy proxy-private "$T/private.json" --http tcp:127.0.0.1:0 --socks tcp:127.0.0.1:0
    if [ -n "$HPORT" ] && [ -n "$SPORT" ]; then
        # with --proxy every row agrees with the live proxy ...
        if $PROBE "check --proxy" "$HPORT" "$SPORT" "$VERDICT_ASK_LOG" "$T/proxy-private.log" \
            < "$T/asproxy.jsonl" > "$T/asproxy.probe" 2>&1; then
            ok "check --proxy agrees with the live proxy on ${#PRIV[@]} private-address rows"
        else
            bad "check --proxy disagrees with the live proxy" "$(cat "$T/asproxy.probe")"
        fi
        # ... and without it none does (the difference this option exists for)
        $PROBE "check" "$HPORT" "$SPORT" "$VERDICT_ASK_LOG" "$T/proxy-private.log" \
            < "$T/plain.jsonl" > "$T/plain.probe" 2>&1
        n=$(grep -c '^not ok' "$T/plain.probe")
        [ "$n" -eq "${#PRIV[@]}" ] && ok "plain check disagrees with the proxy on all ${#PRIV[@]} rows" ||
            bad "plain check disagrees on $n of ${#PRIV[@]} private-address rows" "$(cat "$T/plain.probe")"
    fi
    kill "$PROXY_PID" 2>/dev/null
    wait "$PROXY_PID" 2>/dev/null
else
    bad "check --resolve on the private-address settings failed" "$(cat "$T/plain.err" "$T/asproxy.err")"
fi

# every row was probed, and the rows cover every outcome
[ "$probed" -eq "$nrows" ] && ok "all $nrows rows probed" || bad "probed $probed of $nrows rows"
for o in allow deny ask dnsfail; do
    n=$(grep -c -- "^ok - .* -> $o (" "$T/all.probe")
    [ "$n" -gt 0 ] && ok "$n rows agree on '$o'" || bad "no row agrees on '$o': the tables no longer cover it"
done
e2e_finish
