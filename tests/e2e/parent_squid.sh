#!/usr/bin/env bash
# tests/e2e/parent_squid.sh - network.parentProxy against a real corporate
# proxy: Debian's squid with its shipped configuration (/etc/squid/squid.conf,
# included unchanged; only where it keeps its pid and logs, and a resolver
# that cannot leave, are set beside it). A default squid refuses CONNECT to
# any port but 443, so plain HTTP must reach it as absolute-form requests,
# never as CONNECT host:80 (issue 21 item 14).
#
# Everything runs in a private network namespace (unshare -n as root,
# unshare -c -n otherwise): squid on its shipped 127.0.0.1:3128 there, the
# origin on 192.0.2.10 (TEST-NET-1, on that namespace's loopback device, so
# sluice does not take it for loopback and send it direct), sluice's proxy
# there too. Nothing reaches the host's network. As root, the cases run
# again as an unprivileged user (run-helpers/twice.sh), in the same
# namespace. Skips only when squid is not installed (scripts/deps.sh).
set -uo pipefail
SLUICE=${1:?usage: parent_squid.sh PATH/TO/sluice}
case $SLUICE in /*) ;; *) SLUICE=$(cd "$(dirname "$SLUICE")" && pwd)/$(basename "$SLUICE") ;; esac
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SQUID=$(command -v squid || echo /usr/sbin/squid)
ORIGIN=192.0.2.10

if [ -z "${SLUICE_SQUID_NETNS:-}" ]; then
    if [ ! -x "$SQUID" ]; then
        echo "ok - parentProxy against squid # SKIP squid is not installed (scripts/deps.sh installs it)"
        echo "0 passed, 0 failed"
        exit 0
    fi
    if [ "$(id -u)" -eq 0 ]; then
        exec unshare -n env SLUICE_SQUID_NETNS=1 bash "$0" "$SLUICE"
    fi
    exec unshare -c -n env SLUICE_SQUID_NETNS=1 bash "$0" "$SLUICE"
fi

. "$HERE/lib.sh"
. "$HERE/run-helpers/twice.sh"

squid_stop() {
    kill "$1" 2>/dev/null
    wait_exit "$1" 20 || { kill -9 "$1" 2>/dev/null; wait "$1" 2>/dev/null; }
    rm -f /dev/shm/"$SQNAME"-* 2>/dev/null
}

cases() {
    local SQ=$T/squid OP S out i sqpid
    # the namespace: loopback up, the origin's address on it (made once; the
    # unprivileged pass shares root's namespace)
    if ! ip -4 addr show dev lo 2>/dev/null | grep -q "inet $ORIGIN/"; then
        if ! ip link set lo up || ! ip addr add "$ORIGIN/32" dev lo; then
            bad "cannot set up the private network namespace"
            return 0
        fi
    fi
    if ip route get 1.1.1.1 >/dev/null 2>&1; then
        bad "this is not a private network namespace: it has a route out"
        return 0
    fi
    # squid drops to its user (proxy) when started as root: it must reach $SQ
    chmod 711 "$T"
    mkdir -p -m 777 "$SQ"
    cat > "$SQ/squid.conf" <<EOF
include /etc/squid/squid.conf
pid_filename $SQ/squid.pid
access_log stdio:$SQ/access.log
cache_log $SQ/cache.log
coredump_dir $SQ
dns_nameservers 127.0.0.1
shutdown_lifetime 0 seconds
EOF
    mkdir -p "$T/www"
    echo via-squid > "$T/www/p.txt"
    echo second > "$T/www/q.txt"
    OP=$(free_port)
    python3 -m http.server --bind "$ORIGIN" --directory "$T/www" "$OP" >"$T/origin.err" 2>&1 &
    PIDS+=($!)
    # its own service name: squid's shared memory segments (/dev/shm) are
    # named by it, and /dev/shm is the host's
    SQNAME=sluicetest$$
    "$SQUID" -N -n "$SQNAME" -f "$SQ/squid.conf" >"$SQ/squid.out" 2>&1 &
    sqpid=$!
    PIDS+=($sqpid)
    for i in $(seq 200); do
        curl -s -o /dev/null --max-time 2 --noproxy '*' "http://$ORIGIN:$OP/p.txt" &&
            curl -s -o /dev/null --max-time 2 -x http://127.0.0.1:3128 "http://$ORIGIN:$OP/p.txt" && break
        kill -0 "$sqpid" 2>/dev/null || break
        sleep 0.1
    done
    out=$(curl -sS --max-time 5 -x http://127.0.0.1:3128 "http://$ORIGIN:$OP/p.txt" 2>&1)
    if [ "$out" != via-squid ]; then
        bad "squid with its shipped configuration did not start or serve" \
            "$out / $(tail -n 5 "$SQ/squid.out" "$SQ/cache.log" 2>&1)"
        squid_stop "$sqpid"
        return 0
    fi
    : > "$SQ/access.log"

    S=$T/s.json
    cat > "$S" <<JSON
{"network": {"allowedDomains": ["$ORIGIN:$OP"],
             "parentProxy": {"http": "http://127.0.0.1:3128", "https": "http://127.0.0.1:3128"}}}
JSON
    start_proxy squid "$S" --http tcp:127.0.0.1:0 --socks off
    out=$(curl -sS --max-time 10 -x "http://127.0.0.1:$HPORT" "http://$ORIGIN:$OP/p.txt" 2>&1)
    if [ "$out" = via-squid ] && grep -q " GET http://$ORIGIN:$OP/p.txt " "$SQ/access.log" &&
        ! grep -q CONNECT "$SQ/access.log"; then
        ok "plain HTTP through squid as parentProxy: an absolute-form GET, no CONNECT"
    else
        bad "plain HTTP through squid" "$out / $(cat "$SQ/access.log") / $(tail -3 "$T/squid.log")"
    fi
    : > "$SQ/access.log"
    out=$(curl -sS --max-time 10 -x "http://127.0.0.1:$HPORT" "http://$ORIGIN:$OP/p.txt" \
        "http://$ORIGIN:$OP/q.txt" -I -o /dev/null -o /dev/null -w '%{http_code} ' 2>&1)
    if [ "$out" = "200 200 " ] && [ "$(grep -c " HEAD http://$ORIGIN:$OP/" "$SQ/access.log")" = 2 ]; then
        ok "two requests on one kept-alive client connection, both through squid"
    else
        bad "keep-alive through squid" "$out / $(cat "$SQ/access.log")"
    fi
    : > "$SQ/access.log"
    out=$(curl -sS --max-time 10 -x "http://127.0.0.1:$HPORT" -o /dev/null -w '%{http_code}' \
        "http://$ORIGIN:$((OP == 65535 ? OP - 1 : OP + 1))/p.txt" 2>&1)
    if [ "$out" = 403 ] && [ ! -s "$SQ/access.log" ]; then
        ok "a request the policy denies is refused by sluice and never reaches squid"
    else
        bad "denied request and squid" "$out / $(cat "$SQ/access.log")"
    fi
    kill "$PROXY_PID" 2>/dev/null; wait "$PROXY_PID" 2>/dev/null
    squid_stop "$sqpid"
}

e2e_twice cases "$HERE/parent_squid.sh" "$SLUICE"
e2e_finish
