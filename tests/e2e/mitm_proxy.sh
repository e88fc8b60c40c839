#!/usr/bin/env bash
# tests/e2e/mitm_proxy.sh - network.mitmProxy (issue 23 deliverable 5, srt
# 0.0.83's {socketPath, domains}): a small MITM proxy in Python on a Unix
# socket (mitm-helpers/mitm_proxy.py) records what it receives and answers.
# A host matching domains goes to it (CONNECT, SOCKS5 and plain HTTP, in
# sluice proxy and sluice run); a host that does not goes direct; a denied
# host is denied before the external proxy sees anything; a missing socket
# or a refusal by the external proxy fails closed (502 with the reason, the
# origin never reached); mitmProxy beside tlsTerminate is refused at load.
#
# Everything runs in a private network namespace (unshare -n as root,
# unshare -c -n otherwise): the origin on 192.0.2.10 (TEST-NET-1 on that
# namespace's loopback device), names answered by a dnsmasq on 127.0.0.1
# (network.dnsServers). Nothing reaches the host's network. As root the
# cases run again as an unprivileged user (run-helpers/twice.sh).
set -uo pipefail
SLUICE=${1:?usage: mitm_proxy.sh PATH/TO/sluice}
case $SLUICE in /*) ;; *) SLUICE=$(cd "$(dirname "$SLUICE")" && pwd)/$(basename "$SLUICE") ;; esac
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ORIGIN=192.0.2.10

if [ -z "${SLUICE_MITM_NETNS:-}" ]; then
    if [ "$(id -u)" -eq 0 ]; then
        exec unshare -n env SLUICE_MITM_NETNS=1 bash "$0" "$SLUICE"
    fi
    exec unshare -c -n env SLUICE_MITM_NETNS=1 bash "$0" "$SLUICE"
fi

. "$HERE/lib.sh"
. "$HERE/run-helpers/twice.sh"

# proxy_case NAME WANT_BODY CURL_ARGS...: the body curl gets
proxy_case() {
    local name=$1 want=$2 out
    shift 2
    out=$(curl -sS --max-time 10 "$@" 2>&1)
    if [ "$out" = "$want" ]; then
        ok "$name"
    else
        bad "$name" "got: $out / want: $want / $(tail -3 "$T/mitm.log" 2>/dev/null)"
    fi
}

proxy_cases() {
    local S=$1 OP=$2 out n0
    start_proxy sl "$S" --http tcp:127.0.0.1:0 --socks tcp:127.0.0.1:0
    [ -n "$HPORT" ] || return 0
    proxy_case "plain HTTP to a matching host: an absolute-form request to the external proxy" \
        "MITM-HTTP http://a.mitm.test:$OP/p" -x "http://127.0.0.1:$HPORT" "http://a.mitm.test:$OP/p"
    proxy_case "CONNECT to a matching host: CONNECT to the external proxy, the tunnel through it" \
        "MITM-TUNNEL a.mitm.test:$OP /t" -p -x "http://127.0.0.1:$HPORT" "http://a.mitm.test:$OP/t"
    proxy_case "SOCKS5 CONNECT to a matching host: CONNECT to the external proxy" \
        "MITM-TUNNEL b.mitm.test:$OP /s" --socks5-hostname "127.0.0.1:$SPORT" "http://b.mitm.test:$OP/s"
    proxy_case "a host not matching domains goes direct" \
        "DIRECT" -x "http://127.0.0.1:$HPORT" "http://plain.test:$OP/d.txt"
    proxy_case "CONNECT to a host not matching domains goes direct" \
        "DIRECT" -p -x "http://127.0.0.1:$HPORT" "http://plain.test:$OP/d.txt"
    if grep -q 'event=decision .*host=a.mitm.test .*reason="via the mitmProxy unix:'"$T"'/mitm.sock"' "$T/sl.log"; then
        ok "the decision record names the mitmProxy socket the connection went through"
    else
        bad "the decision record and mitmProxy" "$(grep a.mitm.test "$T/sl.log" | head -2)"
    fi
    if grep -q 'plain.test' "$T/mitm.log"; then
        bad "the external proxy saw a host that does not match domains" "$(cat "$T/mitm.log")"
    else
        ok "the external proxy never saw the non-matching host"
    fi
    out=$(curl -s --max-time 10 -o /dev/null -w '%{http_code}' -x "http://127.0.0.1:$HPORT" \
        "http://bad.mitm.test:$OP/x" 2>&1)
    out=$out/$(curl -s --max-time 10 -o /dev/null -w '%{http_code}%{http_connect}' -p -x "http://127.0.0.1:$HPORT" \
        "http://bad.mitm.test:$OP/x" 2>&1)
    out=$out/$(curl -s --max-time 10 -o /dev/null -w '%{http_code}' -x "http://127.0.0.1:$HPORT" \
        "http://a.mitm.test:$((OP + 1))/x" 2>&1)
    if [[ $out == 403/000403/403 ]] && ! grep -q 'bad.mitm.test\|a.mitm.test:'$((OP + 1)) "$T/mitm.log"; then
        ok "a matching host the policy denies (deny list, port not allowed) is refused by sluice and never reaches the external proxy"
    else
        bad "denied matching host" "$out / $(cat "$T/mitm.log")"
    fi
    out=$(curl -s --max-time 10 -o "$T/body" -w '%{http_code}%{http_connect}' -p -x "http://127.0.0.1:$HPORT" \
        "http://refuse.mitm.test:$OP/x" 2>&1)
    out=$out/$(curl -sv --max-time 10 -o /dev/null -p -x "http://127.0.0.1:$HPORT" \
        "http://refuse.mitm.test:$OP/x" 2>&1 | tr -d '\r' | grep -i '^< ' | tr '\n' ' ')
    if [[ $out == 000502/*"HTTP/1.1 502"*"answered 403"* ]]; then
        ok "the external proxy's refusal is a 502 naming it"
    else
        bad "external proxy refusal" "$out / $(tail -3 "$T/mitm.log")"
    fi
    kill "$PROXY_PID" 2>/dev/null; wait "$PROXY_PID" 2>/dev/null

    # the socket missing: fail closed, never direct
    sed "s#$T/mitm.sock#$T/none.sock#" "$S" > "$T/none.json"
    start_proxy none "$T/none.json" --http tcp:127.0.0.1:0 --socks tcp:127.0.0.1:0
    [ -n "$HPORT" ] || return 0
    n0=$(grep -c 'GET ' "$T/origin.err")
    out=$(curl -s --max-time 10 -o "$T/b1" -w '%{http_code}' -x "http://127.0.0.1:$HPORT" \
        "http://a.mitm.test:$OP/d.txt" 2>&1)
    out=$out/$(curl -sv --max-time 10 -o /dev/null -p -x "http://127.0.0.1:$HPORT" \
        "http://a.mitm.test:$OP/d.txt" 2>&1 | tr -d '\r' | grep -i '^< ' | tr '\n' ' ')
    out=$out/$(curl -s --max-time 10 -o /dev/null -w '%{http_code}' --socks5-hostname "127.0.0.1:$SPORT" \
        "http://a.mitm.test:$OP/d.txt" 2>&1)
    if [[ $out == 502/*"HTTP/1.1 502"*"no such socket"*/000 ]] && [ "$(grep -c 'GET ' "$T/origin.err")" = "$n0" ] &&
        grep -q 'no such socket' "$T/b1"; then
        ok "a missing mitmProxy socket fails closed: 502 with the reason (SOCKS5: a failure reply), never direct"
    else
        bad "missing socket" "$out / $(cat "$T/b1") / $(tail -3 "$T/none.log")"
    fi
    kill "$PROXY_PID" 2>/dev/null; wait "$PROXY_PID" 2>/dev/null

    # beside tlsTerminate: refused at load, naming both keys
    printf '{"network": {"allowedDomains": ["a.example"],\n "mitmProxy": {"socketPath": "/x", "domains": ["a.example"]},\n "tlsTerminate": {"caCertPath": "/c", "caKeyPath": "/k"}}}\n' > "$T/both.json"
    out=$("$SLUICE" proxy --settings "$T/both.json" --http tcp:127.0.0.1:0 --socks off 2>&1)
    if [ $? -ne 0 ] && [[ $out == *"both.json:2:"*": network.mitmProxy: cannot be combined with network.tlsTerminate ("*"both.json:3:"* ]]; then
        ok "mitmProxy beside tlsTerminate is refused at load, naming both keys and places"
    else
        bad "mitmProxy beside tlsTerminate" "$out"
    fi
}

run_cases() {
    local S=$1 OP=$2 out
    cd "$T" || return 0
    if ! "$SLUICE" run --settings "$S" -- true >"$T/run0.out" 2>&1; then
        skip "sluice run with mitmProxy" "sluice run cannot run here: $(tail -2 "$T/run0.out")"
        return 0
    fi
    out=$("$SLUICE" run --settings "$S" -- curl -sS --max-time 10 "http://a.mitm.test:$OP/r" 2>&1)
    if [ "$out" = "MITM-HTTP http://a.mitm.test:$OP/r" ]; then
        ok "sluice run: plain HTTP to a matching host goes to the external proxy on the host"
    else
        bad "sluice run plain HTTP" "$out"
    fi
    out=$("$SLUICE" run --settings "$S" -- curl -sS --max-time 10 -p "http://c.mitm.test:$OP/rt" 2>&1)
    if [ "$out" = "MITM-TUNNEL c.mitm.test:$OP /rt" ]; then
        ok "sluice run: CONNECT to a matching host goes to the external proxy"
    else
        bad "sluice run CONNECT" "$out"
    fi
    out=$("$SLUICE" run --settings "$S" -- curl -sS --max-time 10 "http://plain.test:$OP/d.txt" 2>&1)
    if [ "$out" = DIRECT ]; then
        ok "sluice run: a host not matching domains goes direct"
    else
        bad "sluice run direct" "$out"
    fi
    # transparent mode: a connect() to a matching host is refused (its
    # socket would be the host's Unix socket, handed to the command)
    sed 's/"deniedDomains"/"transparent": true, "deniedDomains"/' "$S" > "$T/tp.json"
    : > "$T/mitm.log"
    out=$("$SLUICE" run --settings "$T/tp.json" --log "$T/tp.log" -- curl -sS --max-time 10 --noproxy '*' \
        "http://a.mitm.test:$OP/tp" 2>&1)
    if grep -q 'transparent mode needs' <<<"$out"; then
        skip "sluice run --transparent and mitmProxy" "this kernel lacks a piece: $out"
    elif [[ $out != *MITM* && $out != *DIRECT* ]] && [ ! -s "$T/mitm.log" ] &&
        grep -q "matches network.mitmProxy.domains, whose proxy is a Unix socket on the host" "$T/tp.log"; then
        ok "sluice run --transparent: a connect() to a matching host is refused with the reason, never direct"
    else
        bad "sluice run --transparent and mitmProxy" "$out / $(grep -h a.mitm.test "$T/tp.log" | head -2)"
    fi
    out=$("$SLUICE" run --settings "$S" -- sh -c 'if [ -S "$1" ]; then echo visible; else echo hidden; fi' sh "$T/mitm.sock" 2>&1)
    if [ "$out" = hidden ] && [ -S "$T/mitm.sock" ]; then
        ok "sluice run: the mitmProxy socket is not visible in the sandbox"
    else
        bad "sluice run: the socket in the sandbox" "$out"
    fi
}

cases() {
    local OP S i
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
    if ! start_dnsmasq --address=/mitm.test/$ORIGIN --address=/plain.test/$ORIGIN; then
        bad "dnsmasq did not start" "$(cat "$T/dnsmasq.err")"
        return 0
    fi
    mkdir -p "$T/www"
    echo DIRECT > "$T/www/d.txt"
    OP=$(python3 -c 'import random; print(random.randint(20000, 60000))')
    python3 -m http.server --bind "$ORIGIN" --directory "$T/www" "$OP" >"$T/origin.err" 2>&1 &
    PIDS+=($!)
    python3 "$HERE/mitm-helpers/mitm_proxy.py" "$T/mitm.sock" "$T/mitm.log" 2>"$T/mitm.err" &
    PIDS+=($!)
    for i in $(seq 100); do
        [ -S "$T/mitm.sock" ] && curl -s -o /dev/null --max-time 1 --noproxy '*' "http://$ORIGIN:$OP/d.txt" && break
        sleep 0.1
    done
    S=$T/s.json
    cat > "$S" <<JSON
{"network": {"allowedDomains": ["*.mitm.test:$OP", "plain.test:$OP", "$ORIGIN:$OP"],
             "deniedDomains": ["bad.mitm.test"],
             "dnsServers": ["127.0.0.1:$DPORT"],
             "mitmProxy": {"socketPath": "$T/mitm.sock", "domains": ["*.mitm.test"]}}}
JSON
    proxy_cases "$S" "$OP"
    run_cases "$S" "$OP"
}

e2e_twice cases "$HERE/mitm_proxy.sh" "$SLUICE"
e2e_finish
