#!/usr/bin/env bash
# tests/e2e/gw_attack.sh - rt-15: attacks on credentials.headers, `sluice
# proxy` as a credential gateway (issue 24 item 4), by a client of the proxy
# and by whoever can write a settings file. Each case passes when the
# gateway holds: the value reaches only its entry's hosts, exactly once,
# never in the client's sight (echoed in any framing the proxy can mask),
# the client's own header of that name never reaches those hosts, a request
# that cannot get the header is refused and never sent, the proxy runs only
# the helper its operator named, and its memory, processes and logs stay
# clean. A case named "HOLE" failed when it was written
# (tests/e2e/rt-15-report.md).
#
# As root: a private network namespace (unshare -n); a hostile HTTPS origin
# on 127.0.0.10 (gw-helpers/origin.py) that records every request whole and
# echoes the credential it got in the form its path names; dnsmasq on
# 127.0.0.1 answers every *.test name with 127.0.0.10; raw requests are
# written by gw-helpers/client.py. The cases run as root, then as an
# unprivileged user (setpriv) with the proxy running as that user; the
# costly ones as root only. Nothing reaches the host's network. Skips when
# not root.
set -uo pipefail
SLUICE=${1:?usage: gw_attack.sh PATH/TO/sluice}
case $SLUICE in /*) ;; *) SLUICE=$(cd "$(dirname "$SLUICE")" && pwd)/$(basename "$SLUICE") ;; esac
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
O1=127.0.0.10

. "$HERE/netns.sh"
e2e_netns GA_NETNS "gw_attack" "$SLUICE"

. "$HERE/lib.sh"
e2e_who GA_CHILD
note() { echo "# rt note: [$WHO] $1"; }
PY=/usr/bin/python3

# The values, random per run (never printed by the checks): a file's (with
# '/' and '+', so encoded forms differ), a variable's, and the helper's.
RND=${GA_RND:-$(shuf -i 1000000000-9999999999 -n1)}
TOKF="gwF/${RND}+file/Tk+Q${RND}z"
TOKE="gwE-${RND}-env-variable-${RND}"
TOKH="gwH-${RND}-helper-output-${RND}"
TOKH2="gwH2-${RND}-helper-after-stderr"
export GWA_KEY="$TOKE"

# --- helpers ------------------------------------------------------------------
# call TARGET SNI: sends $T/req through the proxy (TARGET "-": plain HTTP),
# the answer in $T/resp
call() {
    "$PY" "$GH/client.py" "$HPORT" "$1" "$2" "$SH/sluiceca.pem" "$T/req" >"$T/resp" 2>"$T/client.err"
}
req() { printf "$@" > "$T/req"; }
# the origin's record of the requests since mark
mark() { REC0=$(wc -l < "$SH/rec/rec.log"); }
since() { tail -n +"$((REC0 + 1))" "$SH/rec/rec.log"; }
# no form of any value in FILE (leak.py); prints what it found
clean() { "$PY" "$GH/leak.py" "$1" "$TOKF" "$TOKE" "$TOKH" "$TOKH2"; }
status() { head -c 200 "$T/resp" | sed -n '1s/^HTTP\/1\.[01] \([0-9]*\).*/\1/p'; }
settings() { # FILE HEADERS-JSON [EXTRA-NETWORK-KEYS] [EXTRA-CREDENTIALS-KEYS]
    cat > "$1" <<JSON
{"network": {"allowedDomains": ["*.test", "$O1"], "dnsServers": ["127.0.0.1:$DPORT"],
  "denyPrivateAddresses": false${3:-},
  "tlsTerminate": {"caCertPath": "$SH/sluiceca.pem", "caKeyPath": "$SH/sluiceca.key",
                   "extraCaCertPaths": ["$SH/originca.pem"], "excludeDomains": ["raw.api.test"]}},
 "credentials": {${4:-}"headers": $2}}
JSON
}
# --- the cases (root, then the unprivileged user) ------------------------------
cases() {
    HEADERS='[{"hosts": ["api.test", "*.api.test"], "name": "Authorization",
       "value": {"file": "'"$SH/sec/token"'", "prefix": "Bearer "}},
      {"hosts": ["key.test"], "name": "X-Api-Key", "value": {"env": "GWA_KEY"}},
      {"hosts": ["helper.test"], "name": "X-Key",
       "value": {"exec": ["'"$SH/helper.sh"'"], "ttl": 600, "timeout": 5}}]'
    settings "$T/s.json" "$HEADERS"
    AP=$(free_port)
    start_proxy main "$T/s.json" --http tcp:127.0.0.1:0 --socks off --admin "tcp:127.0.0.1:$AP"
    [ -n "$HPORT" ] || return
    for i in $(seq 100); do
        [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$AP/readyz")" = 200 ] && break
        sleep 0.1
    done
    echo_cases
    host_cases
    header_cases
    hup_cases
    scan_cases
    kill "$PROXY_PID" 2>/dev/null
    helper_cases
    storm_cases
    trust_cases
    if [ -z "${GA_CHILD:-}" ]; then
        file_cases
        limit_cases
    fi
}

# Echo origins: the value in every framing an answer can carry it in.
echo_cases() {
    local m out=
    for m in echo cases split drip close b64 trailer early redirect reason cookie long big; do
        mark
        req "GET /r/$m HTTP/1.1\r\nHost: api.test:$PA\r\nConnection: close\r\n\r\n"
        call "api.test:$PA" api.test
        if [ "$(since | grep -cF "n=1 creds=Authorization=Bearer $TOKF ")" = 1 ] &&
            out=$(clean "$T/resp") && grep -aq '^HTTP/1.1 \(200\|302\)' "$T/resp"; then
            ok "echo $m: the value went to api.test once and came back masked"
        else
            bad "echo $m: the value came back or did not go" "$out / $(since) / $(head -c 300 "$T/resp")"
        fi
    done
    mark
    req "GET /r/close HTTP/1.0\r\nHost: api.test:$PA\r\n\r\n"
    call "api.test:$PA" api.test
    if [ "$(since | grep -cF "n=1 creds=Authorization=Bearer $TOKF ")" = 1 ] &&
        out=$(clean "$T/resp") && grep -aq '^HTTP/1.1 200' "$T/resp"; then
        ok "echo close (HTTP/1.0 client, raw until close): masked to the end"
    else bad "echo close, HTTP/1.0" "$out"; fi
    for m in gzip tegzip fold; do
        mark
        req "GET /r/$m HTTP/1.1\r\nHost: api.test:$PA\r\nConnection: close\r\n\r\n"
        call "api.test:$PA" api.test
        if [ "$(since | grep -cF "n=1 creds=Authorization=Bearer $TOKF ")" = 1 ] &&
            out=$(clean "$T/resp") && ! grep -aqi "^content-encoding: gzip" "$T/resp"; then
            ok "echo $m: refused or masked, never the value ($(status))"
        else bad "echo $m" "$out / $(head -c 300 "$T/resp")"; fi
    done
    req "GET /r/forms HTTP/1.1\r\nHost: api.test:$PA\r\nConnection: close\r\n\r\n"
    call "api.test:$PA" api.test
    "$PY" "$GH/leak.py" --forms "$T/resp" "$TOKF" | grep '^note' | while read -r l; do
        note "echo forms (design limit, rt-12): $l"
    done
}

# Which host gets it: the CONNECT target, never a Host, an SNI or a URI.
host_cases() {
    local out=
    mark
    req "GET /r/sni HTTP/1.1\r\nHost: other.test:$PA\r\nAuthorization: Bearer own-token-of-the-client-1234\r\nConnection: close\r\n\r\n"
    call "other.test:$PA" api.test
    if since | grep -q "sni=other.test host=other.test:$PA .* creds=Authorization=Bearer own-token"; then
        ok "CONNECT other.test with SNI api.test: no value, the client's own header as it was, SNI other.test upstream"
    else bad "CONNECT other.test with SNI api.test" "$(since)"; fi
    mark
    req "GET /r/sni HTTP/1.1\r\nHost: api.test:$PA\r\nConnection: close\r\n\r\n"
    call "api.test:$PA" other.test
    if since | grep -q "^REQ sni=api.test host=api.test:$PA target=/r/sni n=1 creds=Authorization=Bearer $TOKF "; then
        ok "CONNECT api.test with SNI other.test: the value goes to api.test by name (SNI api.test upstream)"
    else bad "HOLE CONNECT api.test with SNI other.test: the value went to another name" "$(since)"; fi
    for t in "API.TEST.:$PA" "x.api.test:$PA"; do
        mark
        req "GET /r/sni HTTP/1.1\r\nHost: $t\r\nConnection: close\r\n\r\n"
        call "$t" -
        if since | grep -q "n=1 creds=Authorization=Bearer $TOKF " && clean "$T/resp" >/dev/null; then
            ok "CONNECT $t (case, trailing dot, a subdomain): injected once, masked"
        else bad "CONNECT $t" "$(since)"; fi
    done
    for t in "xapi.test:$PA" "api.test.other.test:$PA" "$O1:$PA"; do
        mark
        req "GET /r/echo HTTP/1.1\r\nHost: api.test:$PA\r\nConnection: close\r\n\r\n"
        call "$t" api.test
        if ! since | grep -qF "$TOKF" && clean "$T/resp" >/dev/null; then
            ok "CONNECT $t with Host api.test: no value"
        else bad "HOLE CONNECT $t: the value went out" "$(since)"; fi
    done
    # a host under the entry's pattern that is not terminated: refused, not relayed raw
    mark
    req "GET /r/echo HTTP/1.1\r\nHost: raw.api.test\r\nAuthorization: Bearer own-token-of-the-client-1234\r\nConnection: close\r\n\r\n"
    call "raw.api.test:$PA" raw.api.test
    if [ -z "$(since)" ] && grep -aq "CONNECT-REFUSED\|403" "$T/resp"; then
        ok "CONNECT raw.api.test (under *.api.test, excluded from termination): refused, nothing sent"
    else bad "HOLE excluded host under the pattern" "$(since) / $(head -c 200 "$T/resp")"; fi
    # not TLS inside the CONNECT: refused (the header cannot be set, nor the client's kept out)
    mark
    printf 'GET /r/echo HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer own-token-of-the-client-1234\r\nConnection: close\r\n\r\n' > "$T/req"
    "$PY" - "$HPORT" "api.test:$PH" "$T/req" > "$T/resp" 2>&1 <<'EOF'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (sys.argv[2], sys.argv[2])).encode())
s.sendall(open(sys.argv[3], "rb").read())
b = b""
try:
    while True:
        d = s.recv(65536)
        if not d:
            break
        b += d
except OSError:
    pass
sys.stdout.write(b.decode("latin-1"))
EOF
    if [ -z "$(since)" ]; then
        ok "CONNECT api.test with plain HTTP inside (not TLS): nothing reaches the origin"
    else bad "HOLE plain HTTP in a CONNECT to api.test" "$(since)"; fi
    # absolute-form and userinfo inside a tunnel to another host
    mark
    req "GET https://api.test:$PA/r/echo HTTP/1.1\r\nHost: api.test:$PA\r\nConnection: close\r\n\r\n"
    call "other.test:$PA" other.test
    if ! since | grep -qF "$TOKF" && clean "$T/resp" >/dev/null; then
        ok "absolute-form URI of api.test in a tunnel to other.test: no value ($(status))"
    else bad "HOLE absolute-form in another tunnel" "$(since)"; fi
    mark
    req "GET /r/echo HTTP/1.1\r\nHost: x@api.test\r\nConnection: close\r\n\r\n"
    call "other.test:$PA" other.test
    if ! since | grep -qF "$TOKF"; then
        ok "Host with userinfo (x@api.test) in a tunnel to other.test: no value ($(status))"
    else bad "HOLE Host with userinfo" "$(since)"; fi
    # pipelined, in both tunnels
    mark
    req "GET /r/a HTTP/1.1\r\nHost: api.test:$PA\r\n\r\nGET /r/b HTTP/1.1\r\nHost: api.test:$PA\r\nAuthorization: x\r\n\r\nGET /r/echo HTTP/1.1\r\nHost: api.test:$PA\r\n\r\nGET /r/c HTTP/1.0\r\n\r\n"
    call "api.test:$PA" api.test
    if [ "$(since | grep -cF "host=api.test:$PA target=/r/")" = 4 ] &&
        [ "$(since | grep -cF "n=1 creds=Authorization=Bearer $TOKF ")" = 4 ] && clean "$T/resp" >/dev/null; then
        ok "pipelined requests in a tunnel to api.test (one with its own Authorization, HTTP/1.0 without Host): the value once each"
    else bad "pipelined in api.test" "$(since)"; fi
    mark
    req "GET /r/a HTTP/1.1\r\nHost: other.test:$PA\r\n\r\nGET /r/b HTTP/1.1\r\nHost: api.test:$PA\r\nConnection: close\r\n\r\n"
    call "other.test:$PA" other.test
    if [ "$(since | grep -c "host=other.test:$PA .*n=0 creds=- ")" = 2 ] && ! since | grep -qF "$TOKF"; then
        ok "pipelined requests naming api.test in a tunnel to other.test: no value"
    else bad "pipelined in other.test" "$(since)"; fi
    # plain HTTP (allowPlaintextInject off): refused; to the IP with a Host: no value
    mark
    req "GET http://api.test:$PH/r/echo HTTP/1.1\r\nHost: api.test:$PH\r\nAuthorization: Bearer own-token-of-the-client-1234\r\nConnection: close\r\n\r\n"
    call - -
    if [ -z "$(since)" ] && [ "$(status)" = 403 ]; then
        ok "plain HTTP to api.test: 403, nothing sent"
    else bad "plain HTTP to api.test" "$(since) / $(head -c 200 "$T/resp")"; fi
    mark
    req "GET http://$O1:$PH/r/echo HTTP/1.1\r\nHost: api.test:$PA\r\nConnection: close\r\n\r\n"
    call - -
    if ! since | grep -qF "$TOKF"; then
        ok "plain HTTP to the origin's address with Host api.test: no value"
    else bad "HOLE plain HTTP by address" "$(since)"; fi
}

# The client's own header of that name: every spelling is removed.
header_cases() {
    local h n body out=
    n=0
    for h in "authorization: own-token-of-the-client-1" "AUTHORIZATION: own-token-of-the-client-2\r\nAuthorization: own-token-of-the-client-3" \
        "Authorization:own-token-of-the-client-4" "Authorization:" "Authorization: $(head -c 30000 /dev/zero | tr '\0' a)"; do
        n=$((n + 1))
        mark
        req "GET /r/h$n HTTP/1.1\r\nHost: api.test:$PA\r\n$h\r\nConnection: close\r\n\r\n"
        call "api.test:$PA" api.test
        if { since | grep -q "n=1 creds=Authorization=Bearer $TOKF " ||
            { [ "$n" = 5 ] && [ -z "$(since)" ] && [ "$(status)" = 431 ]; }; } && ! since | grep -q own-token; then
            ok "client Authorization form $n: replaced by the value, once ($(status))"
        else bad "client Authorization form $n" "$(since | cut -c1-300) / $(status)"; fi
    done
    for h in "X_Api_Key: own-token-of-the-client-5" "x-api_key: own-token-of-the-client-6" "X-API-KEY: own-token-of-the-client-7"; do
        mark
        req "GET /r/u HTTP/1.1\r\nHost: key.test:$PA\r\n$h\r\nConnection: close\r\n\r\n"
        call "key.test:$PA" key.test
        if since | grep -q "n=1 creds=X-Api-Key=$TOKE " && ! since | grep -q own-token; then
            ok "client '${h%%:*}' to key.test (X-Api-Key): only the value arrives"
        else bad "HOLE client '${h%%:*}' reaches key.test beside X-Api-Key (CGI and WSGI read both as HTTP_X_API_KEY)" "$(since)"; fi
    done
    for h in "X-Api-Key : own" "X-Api-Key: a\r\n own-token-of-the-client-8" "X-Api-Key: a\0b"; do
        mark
        req "GET /r/u HTTP/1.1\r\nHost: key.test:$PA\r\n$h\r\nConnection: close\r\n\r\n"
        call "key.test:$PA" key.test
        if [ -z "$(since)" ] && [ "$(status)" = 400 ]; then
            ok "client header '$(printf '%q' "$h" | cut -c1-30)': 400, nothing sent"
        else bad "client header $(printf '%q' "$h")" "$(since) / $(status)"; fi
    done
    # a trailer of that name in a chunked body
    mark
    req "POST /r/t HTTP/1.1\r\nHost: key.test:$PA\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n4\r\nbody\r\n0\r\nX-Api-Key: own-token-of-the-client-9\r\nX_Api_Key: own-token-of-the-client-9\r\n\r\n"
    call "key.test:$PA" key.test
    if since | grep -q "n=1 creds=X-Api-Key=$TOKE trailers=- body=4"; then
        ok "a request trailer of that name: not passed on"
    else bad "HOLE a request trailer reaches key.test" "$(since)"; fi
    # smuggling: CL and TE, two CLs, a body that looks like a request
    for h in "Content-Length: 4\r\nTransfer-Encoding: chunked" "Content-Length: 4\r\nContent-Length: 5"; do
        mark
        req "POST /r/s HTTP/1.1\r\nHost: key.test:$PA\r\n$h\r\n\r\n0\r\n\r\nGET /r/smuggled HTTP/1.1\r\nHost: key.test:$PA\r\nX-Api-Key: own-token-of-the-client-10\r\n\r\n"
        call "key.test:$PA" key.test
        if [ -z "$(since)" ] && [ "$(status)" = 400 ]; then
            ok "ambiguous framing ($(printf '%b' "$h" | tr '\r\n' '  ' | cut -c1-40)): 400, nothing sent"
        else bad "HOLE ambiguous framing" "$(since)"; fi
    done
    mark
    body="GET /r/smuggled HTTP/1.1\r\nHost: key.test:$PA\r\nX-Api-Key: own-token-of-the-c\r\n\r\n"
    body=$(printf "$body"; echo .)
    body=${body%.}
    req "POST /r/s HTTP/1.1\r\nHost: key.test:$PA\r\nContent-Length: ${#body}\r\n\r\n%sGET /r/next HTTP/1.1\r\nHost: key.test:$PA\r\nConnection: close\r\n\r\n" "$body"
    call "key.test:$PA" key.test
    if [ "$(since | grep -c "n=1 creds=X-Api-Key=$TOKE ")" = 2 ] && ! since | grep -q smuggled; then
        ok "a body that looks like a request stays a body; the next request gets the value too"
    else bad "body framing" "$(since)"; fi
    # an Upgrade, and Upgrade without Connection: upgrade
    mark
    req "GET /r/ws HTTP/1.1\r\nHost: key.test:$PA\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
    call "key.test:$PA" key.test
    if [ -z "$(since)" ] && [ "$(status)" = 403 ]; then
        ok "an Upgrade to key.test: 403, nothing sent"
    else bad "Upgrade" "$(since) / $(status)"; fi
}

# SIGHUP while requests are in flight, and a reload to a value file that
# is a FIFO (it must fail at once, keeping the old value).
hup_cases() {
    local i n0 ok_n=0 pids=()
    mark
    for i in 1 2 3 4 5 6; do
        printf 'GET /r/hold HTTP/1.1\r\nHost: api.test:%s\r\nConnection: close\r\n\r\n' "$PA" > "$T/hreq$i"
        "$PY" "$GH/client.py" "$HPORT" "api.test:$PA" api.test "$SH/sluiceca.pem" "$T/hreq$i" > "$T/hresp$i" 2>&1 &
        pids+=($!)
    done
    sleep 0.3
    n0=$(grep -c 'event=reload ' "$T/main.log")
    for i in 1 2 3 4 5; do kill -HUP "$PROXY_PID"; sleep 0.2; done
    wait "${pids[@]}"
    for i in 1 2 3 4 5 6; do
        grep -aq '^held ' "$T/hresp$i" && clean "$T/hresp$i" >/dev/null && ok_n=$((ok_n + 1))
    done
    if [ "$ok_n" = 6 ] && [ "$(since | grep -cF "n=1 creds=Authorization=Bearer $TOKF ")" = 6 ] &&
        [ "$(grep -c 'event=reload ' "$T/main.log")" -gt "$n0" ] && kill -0 "$PROXY_PID"; then
        ok "5 SIGHUPs during 6 requests in flight: each answered, the value once each, masked"
    else bad "SIGHUP during requests" "$ok_n answered / $(since) / $(head -c 200 "$T/hresp1")"; fi
    if [ -z "${GA_CHILD:-}" ]; then
        mv "$SH/sec/token" "$SH/sec/token.keep" && mkfifo "$SH/sec/token"
        n0=$(grep -c 'event=reload_failed' "$T/main.log")
        kill -HUP "$PROXY_PID"
        wait_for "$T/main.log" "event=reload_failed .*value.file '$SH/sec/token': cannot read it: not a regular file" 10
        rm -f "$SH/sec/token" && mv "$SH/sec/token.keep" "$SH/sec/token"
        mark
        req "GET /r/echo HTTP/1.1\r\nHost: api.test:$PA\r\nConnection: close\r\n\r\n"
        call "api.test:$PA" api.test
        if [ "$(grep -c 'event=reload_failed' "$T/main.log")" -gt "$n0" ] &&
            since | grep -qF "n=1 creds=Authorization=Bearer $TOKF "; then
            ok "a reload whose value file became a FIFO fails at once (no hang), the old value stays"
        else bad "reload with a FIFO value file" "$(grep reload "$T/main.log" | tail -2) / $(since)"; fi
    fi
}

# Hostile helper programs: a value with CR LF or NUL, a huge or empty
# output, a non-zero exit after a good output, one that hangs, one whose
# child keeps its stdout open, one that floods stderr.
# the pids of processes whose command line has $1, running for 4 s or more
old_procs() {
    local p e
    for p in $(pgrep -f "$1"); do
        e=$(ps -o etimes= -p "$p" 2>/dev/null)
        [ "${e:-0}" -ge 4 ] && echo "$p"
    done
}
helper_cases() {
    local i h out n0 hstart
    local hs=(crlf nul big empty exit hang fork err)
    local hd='[' sep=
    for i in "${!hs[@]}"; do
        hd="$hd$sep"'{"hosts": ["h'"$((i + 1))"'.test"], "name": "X-Key", "value": {"exec": ["'"$SH/h-${hs[$i]}.sh"'"], "ttl": 600, "timeout": 1}}'
        sep=,
    done
    settings "$T/h.json" "$hd]"
    start_proxy helpers "$T/h.json" --http tcp:127.0.0.1:0 --socks off
    hstart=$SECONDS
    [ -n "$HPORT" ] || return
    wait_for "$T/helpers.log" "headers\[7\]:X-Key: its helper gave a new value" 10
    for i in 0 1 2 3 4 5 6; do
        wait_for "$T/helpers.log" "event=credential_helper_failed .*headers\[$i\]:X-Key" 10
    done
    for i in 0 1 2 3 4 5 6; do
        h=${hs[$i]}
        mark
        req "GET /r/echo HTTP/1.1\r\nHost: h$((i + 1)).test:$PA\r\nConnection: close\r\n\r\n"
        call "h$((i + 1)).test:$PA" "h$((i + 1)).test"
        if [ "$(status)" = 503 ] && [ -z "$(since)" ] &&
            grep -aq "credentials.headers entry headers\[$i\]:X-Key has no value: its helper failed" "$T/resp" &&
            ! grep -aq "Injected\|gwH" "$T/resp" "$T/helpers.log"; then
            ok "helper $h: no value; the request is a 503 with the reason, never sent"
        else bad "helper $h" "$(status) / $(since) / $(grep -a "headers\[$i\]" "$T/helpers.log" | tail -1)"; fi
    done
    # a failed helper runs again (1 s, 2 s, 4 s...): one run may be under
    # way; none may be older than its timeout (1 s) and some slack
    while [ $((SECONDS - hstart)) -lt 6 ]; do sleep 0.2; done
    if [ -z "$(old_procs "sleep 1000.$RND")" ]; then
        ok "helper hang: killed at its timeout (no process older than it)"
    else bad "helper hang: still running after its timeout" "$(old_procs "sleep 1000.$RND")"; fi
    if [ -z "$(old_procs "sleep 1001.$RND")" ]; then
        ok "helper fork: the child that kept its stdout open is killed with it (none older than the timeout)"
    else bad "HOLE helper fork: its child that kept stdout open outlives the timeout, one more each retry" \
        "$(old_procs "sleep 1001.$RND" | wc -l) left"; fi
    mark
    req "GET /r/echo HTTP/1.1\r\nHost: h8.test:$PA\r\nConnection: close\r\n\r\n"
    call "h8.test:$PA" h8.test
    if since | grep -qF "n=1 creds=X-Key=$TOKH2 " && clean "$T/resp" >/dev/null; then
        ok "helper err (5 MB on stderr): its value is used, masked"
    else bad "helper err" "$(since) / $(grep -a 'headers\[7\]' "$T/helpers.log" | tail -2)"; fi
    kill "$PROXY_PID" 2>/dev/null
    wait_exit "$PROXY_PID" 10
    sleep 0.2
    if ! pgrep -f "sleep 100[01].$RND" >/dev/null; then
        ok "after the proxy stops, no helper process is left"
    else bad "helpers left after the proxy stopped" "$(pgrep -af "sleep 100[01].$RND" | wc -l)"; fi
    pkill -f "sleep 100[01].$RND" 2>/dev/null
}

# A reload storm while a slow helper runs: one run at a time, not one per
# reload; and 40 requests at once while it has no value: all 503 at once.
# The helper gives its value once the test opens its gate ($T/gate), not
# after a time: on a loaded machine 40 clients took longer than a sleep.
storm_cases() {
    local i n pids=() c503=0 cans=0
    rm -f "$T/gate"
    settings "$T/slow.json" '[{"hosts": ["slow.test"], "name": "X-Key", "value": {"exec": ["'"$SH/h-slow.sh"'", "'"$T/gate"'"], "ttl": 600, "timeout": 120}}]'
    start_proxy slow "$T/slow.json" --http tcp:127.0.0.1:0 --socks off
    [ -n "$HPORT" ] || return
    for i in $(seq 20); do kill -HUP "$PROXY_PID"; sleep 0.05; done
    wait_for "$T/slow.log" "event=reload .*" 5
    sleep 0.5
    n=$(pgrep -f "sleep 0.2$RND" | wc -l)
    printf 'GET /r/echo HTTP/1.1\r\nHost: slow.test:%s\r\nConnection: close\r\n\r\n' "$PA" > "$T/sreq"
    for i in $(seq 40); do
        "$PY" "$GH/client.py" "$HPORT" "slow.test:$PA" slow.test "$SH/sluiceca.pem" "$T/sreq" > "$T/sresp$i" 2>&1 &
        pids+=($!)
    done
    wait "${pids[@]}"
    for i in $(seq 40); do grep -aq '^HTTP/1.1 503' "$T/sresp$i" && c503=$((c503 + 1)); done
    for i in $(seq 40); do grep -aq '^HTTP/1.1 \(503\|200\)' "$T/sresp$i" && cans=$((cans + 1)); done
    if [ "$n" -le 1 ]; then
        ok "20 SIGHUPs while a slow helper runs: $n run at a time"
    else bad "HOLE 20 SIGHUPs while a slow helper runs: $n runs at once (one more per reload)"; fi
    if [ "$cans" = 40 ] && [ "$c503" = 40 ]; then
        ok "40 requests at once while the helper has no value: each answered at once with a 503"
    else bad "requests while the helper has no value" "$c503 503s, $cans answered / $(head -c 200 "$T/sresp1")"; fi
    touch "$T/gate"
    wait_for "$T/slow.log" "event=credential_helper .*headers\[0\]:X-Key: its helper gave a new value" 10
    mark
    req "GET /r/echo HTTP/1.1\r\nHost: slow.test:$PA\r\nConnection: close\r\n\r\n"
    call "slow.test:$PA" slow.test
    if since | grep -qF "n=1 creds=X-Key=$TOKH "; then
        ok "after the storm the slow helper's value arrives and is used"
    else bad "slow helper after the storm" "$(since) / $(grep credential_helper "$T/slow.log" | tail -2)"; fi
    kill "$PROXY_PID" 2>/dev/null
    wait_exit "$PROXY_PID" 10
    pkill -f "sleep 0.2$RND" 2>/dev/null
}

# Who may name a helper, a value file or a variable: only a settings file
# nobody else could have written. Each refused file names a helper that
# leaves a mark when it runs.
trust_cases() {
    local f out rc
    local hd='[{"hosts": ["api.test"], "name": "X-Key", "value": {"exec": ["'"$SH/h-mark.sh"'", "'"$T/marked"'"], "ttl": 600}}]'
    rm -f "$T/marked"
    if [ -z "${GA_CHILD:-}" ]; then
        mkdir -p "$SH/tr" "$SH/tr777" "$SH/tr1777"
        chmod 755 "$SH/tr"; chmod 777 "$SH/tr777"; chmod 1777 "$SH/tr1777"
        settings "$SH/tr/w666.json" "$hd" && chmod 666 "$SH/tr/w666.json"
        settings "$SH/tr/other.json" "$hd" && chown sluicetest "$SH/tr/other.json" && chmod 644 "$SH/tr/other.json"
        settings "$SH/tr777/s.json" "$hd" && chmod 644 "$SH/tr777/s.json"
        set -- "$SH/tr/w666.json" "$SH/tr/other.json" "$SH/tr777/s.json"
    else
        settings "$T/w666.json" "$hd" && chmod 666 "$T/w666.json"
        set -- "$T/w666.json"
    fi
    for f in "$@"; do
        out=$(timeout 5 "$SLUICE" proxy --settings "$f" --http tcp:127.0.0.1:0 --socks off 2>&1)
        rc=$?
        if [ "$rc" = 2 ] && grep -q "credentials.headers\[0\]: refused" <<<"$out" && [ ! -e "$T/marked" ]; then
            ok "a helper named by $(basename "$(dirname "$f")")/$(basename "$f") (others could write it): refused, not run"
        else bad "HOLE a helper named by $f (others could write it) runs as the proxy" "rc $rc marked $([ -e "$T/marked" ] && echo yes) / $(head -c 300 <<<"$out")"; fi
        rm -f "$T/marked"
    done
    if [ -z "${GA_CHILD:-}" ]; then
        settings "$SH/tr1777/s.json" "$hd" && chmod 644 "$SH/tr1777/s.json"
        out=$(timeout 20 "$SLUICE" check --settings "$SH/tr1777/s.json" 2>&1)
        rc=$?
        if [ "$rc" = 0 ]; then
            ok "a settings file of root's in a sticky directory (as /tmp) is accepted"
        else bad "a settings file in a sticky directory refused" "$out"; fi
    fi
}

# Value files that are not one (read at start: refused, never a hang).
file_cases() {
    local f out rc
    mkdir -p "$SH/vf" && mkfifo "$SH/vf/fifo" 2>/dev/null
    head -c 100000 /dev/zero | tr '\0' a > "$SH/vf/huge"
    printf 'gwV-aaaaaaaaaaaaaaaa\r\nX-Injected: yes\n' > "$SH/vf/crlf"
    for f in "$SH/vf/fifo" /proc/self/environ "$SH/vf" /dev/zero "$SH/vf/huge" "$SH/vf/crlf"; do
        settings "$T/vf.json" '[{"hosts": ["api.test"], "name": "X-Key", "value": {"file": "'"$f"'"}}]'
        out=$(timeout 20 "$SLUICE" check --settings "$T/vf.json" 2>&1)
        rc=$?
        if [ "$rc" != 0 ] && [ "$rc" != 124 ] && grep -q "credentials.headers\[0\]: value.file '$f': \(cannot read it\|refused\)" <<<"$out" &&
            ! grep -q "Injected\|aaaaaaaaaaaaaaaa" <<<"$out"; then
            ok "value file $f: refused at load, not read as a value ($(sed -n 's/.*value.file [^:]*: //p' <<<"$out" | cut -c1-50))"
        else bad "value file $f" "rc $rc / $out"; fi
    done
}

# More entries than the proxy tracks per request, and many values for one host.
limit_cases() {
    local i hd sep out rc
    hd='[' sep=
    for i in $(seq 0 63); do
        hd="$hd$sep"'{"hosts": ["fill.test"], "name": "X-F'"$i"'", "value": {"env": "GWA_KEY"}}'
        sep=,
    done
    hd="$hd"',{"hosts": ["many.test"], "name": "Authorization", "value": {"env": "GWA_KEY"}}]'
    settings "$T/many.json" "$hd"
    out=$(timeout 10 "$SLUICE" check --settings "$T/many.json" 2>&1)
    if [ $? = 2 ] && grep -q "many.json:[0-9]*:[0-9]*: credentials.headers\[64\]: refused: at most 64 entries" <<<"$out"; then
        ok "65 entries: refused at load, naming the limit"
    else
        start_proxy many "$T/many.json" --http tcp:127.0.0.1:0 --socks off
        mark
        req "GET /r/echo HTTP/1.1\r\nHost: many.test:$PA\r\nAuthorization: own-token-of-the-client-11\r\nConnection: close\r\n\r\n"
        call "many.test:$PA" many.test
        if since | grep -qF "n=1 creds=Authorization=$TOKE "; then
            ok "entry 64 (the 65th): its header is set"
        else bad "HOLE entry 64 (the 65th) is ignored: the client's own header reaches its host" "$(since)"; fi
        kill "$PROXY_PID" 2>/dev/null
    fi
    mkdir -p "$SH/mv"
    hd='[' sep=
    for i in $(seq 0 19); do
        printf 'gwM-%s-value-number-%02d\n' "$RND" "$i" > "$SH/mv/v$i"
        hd="$hd$sep"'{"hosts": ["many.test"], "name": "X-M'"$i"'", "value": {"file": "'"$SH/mv/v$i"'"}}'
        sep=,
    done
    settings "$T/mv.json" "$hd]"
    start_proxy mv "$T/mv.json" --http tcp:127.0.0.1:0 --socks off
    [ -n "$HPORT" ] || return
    mark
    req "GET /r/echo HTTP/1.1\r\nHost: many.test:$PA\r\nConnection: close\r\n\r\n"
    call "many.test:$PA" many.test
    out=$(grep -ac "gwM-$RND" "$T/resp")
    if [ "$out" = 0 ] && { [ "$(since | grep -o 'X-M[0-9]*' | wc -l)" = 0 ] || grep -aq '^HTTP/1.1 200' "$T/resp"; }; then
        ok "20 values for one host echoed: none comes back ($(status))"
    else bad "HOLE 20 values for one host: $out lines of the response hold a value" "$(head -c 300 "$T/resp")"; fi
    kill "$PROXY_PID" 2>/dev/null
}

# The values in nothing the proxy writes: its log, its messages, /metrics,
# /healthz, /readyz, sluice check's output.
scan_cases() {
    local f out=
    curl -s --max-time 5 "http://127.0.0.1:$AP/metrics" > "$T/metrics.txt"
    curl -s --max-time 5 "http://127.0.0.1:$AP/healthz" >> "$T/metrics.txt"
    curl -s --max-time 5 "http://127.0.0.1:$AP/readyz" >> "$T/metrics.txt"
    "$SLUICE" check --settings "$T/s.json" >> "$T/metrics.txt" 2>&1
    "$SLUICE" check --settings "$T/s.json" api.test key.test:443 helper.test >> "$T/metrics.txt" 2>&1
    for f in "$T/main.log" "$T/main.err" "$T/metrics.txt"; do
        if out=$(clean "$f"); then
            ok "no value in $(basename "$f")"
        else bad "a value in $(basename "$f")" "$out"; fi
    done
}

# --- the namespace, certificates, origin, dnsmasq (root only) -----------------
if [ -z "${GA_CHILD:-}" ]; then
    if ! ip link set lo up || ip route get 1.1.1.1 >/dev/null 2>&1; then
        bad "no private network namespace"; e2e_finish; exit
    fi
    SH=$(mktemp -d /run/sluice-gwatk.XXXXXX) && chmod 755 "$SH" || { bad "shared directory"; e2e_finish; exit; }
    trap 'e2e_cleanup; rm -rf "$SH"' EXIT
    mkca() { # NAME CN
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
            -subj "/CN=$2" -keyout "$SH/$1.key" -out "$SH/$1.pem" \
            -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
            -addext "subjectKeyIdentifier=hash" 2>>"$SH/openssl.err"
    }
    SANS="DNS:api.test,DNS:x.api.test,DNS:raw.api.test,DNS:other.test,DNS:key.test,DNS:helper.test,DNS:xapi.test,DNS:api.test.other.test,DNS:many.test,DNS:h1.test,DNS:h2.test,DNS:h3.test,DNS:h4.test,DNS:h5.test,DNS:h6.test,DNS:h7.test,DNS:h8.test,DNS:slow.test,IP:$O1"
    mkca sluiceca "sluice gw_attack CA" && mkca originca "origin gw_attack CA" &&
        openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=origin" \
            -keyout "$SH/o.key" -out "$SH/o.csr" 2>>"$SH/openssl.err" &&
        openssl x509 -req -in "$SH/o.csr" -CA "$SH/originca.pem" -CAkey "$SH/originca.key" -days 30 \
            -extfile <(printf 'subjectAltName=%s\nbasicConstraints=critical,CA:FALSE\nextendedKeyUsage=serverAuth\n' "$SANS") \
            -out "$SH/o.pem" 2>>"$SH/openssl.err" || { bad "certificates" "$(cat "$SH/openssl.err")"; e2e_finish; exit; }
    chmod 644 "$SH"/*.pem "$SH"/*.key
    mkdir -p "$SH/rec" "$SH/gh" "$SH/sec" && chmod 777 "$SH/rec"
    cp "$HERE/gw-helpers/"*.py "$SH/gh/" && chmod -R a+rX "$SH/gh"
    : > "$SH/rec/rec.log" && chmod 666 "$SH/rec/rec.log"
    PA=$(free_port)
    PH=$(free_port)
    "$PY" "$SH/gh/origin.py" "$O1" "$PA" "$SH/o.pem" "$SH/o.key" "$SH/rec/rec.log" 2>"$SH/origin.err" &
    PIDS+=($!)
    "$PY" "$SH/gh/origin.py" "$O1" "$PH" - - "$SH/rec/rec.log" 2>"$SH/origin-plain.err" &
    PIDS+=($!)
    for i in $(seq 100); do
        curl -s -o /dev/null --max-time 1 --cacert "$SH/originca.pem" --resolve "api.test:$PA:$O1" \
            "https://api.test:$PA/up" && break
        sleep 0.1
    done
    : > "$SH/rec/rec.log"
    start_dnsmasq --address=/test/$O1 || { bad "dnsmasq did not start" "$(cat "$T/dnsmasq.err")"; e2e_finish; exit; }
    printf '  %s  \n' "$TOKF" > "$SH/sec/token"
    chmod 644 "$SH/sec/token"
    cat > "$SH/helper.sh" <<EOF
#!/bin/sh
printf '%s\n' "$TOKH"
EOF
    chmod 755 "$SH/helper.sh"
    hw() { printf '#!/bin/sh\n%s\n' "$2" > "$SH/h-$1.sh"; chmod 755 "$SH/h-$1.sh"; }
    hw crlf "printf 'gwH-aaaaaaaaaaaaaaaa\\r\\nX-Injected: yes\\n'"
    hw nul "printf 'gwH-aaaaaaaaaaaaaaaa\\000bbbbbbbbbbbbbbbbbbbbb\\n'"
    hw big "head -c 1048576 /dev/zero | tr '\\000' a"
    hw empty "exit 0"
    hw exit "printf '%s\\n' '$TOKH'; exit 3"
    hw hang "exec sleep 1000.$RND"
    hw fork "sleep 1001.$RND & printf '%s\\n' '$TOKH'"
    hw err "head -c 5000000 /dev/zero >&2; printf '%s\\n' '$TOKH2'"
    hw slow "while [ ! -e \"\$1\" ]; do sleep 0.2$RND; done; printf '%s\\n' '$TOKH'"
    hw mark 'touch "$1"; echo gwK-marked-helper-value-0000'
fi
[ -n "${GA_CHILD:-}" ] && SH=$GA_SH
GH=$SH/gh

start=$SECONDS
if [ -n "${GA_CHILD:-}" ]; then
    SH=$GA_SH PA=$GA_PA PH=$GA_PH DPORT=$GA_DPORT GH=$GA_SH/gh
    cases
    e2e_finish
    exit
fi
cases
echo "# root pass: $((SECONDS - start)) s"
# --- the same cases as an unprivileged user -----------------------------------
if [ -z "${GA_NO_USER:-}" ] && command -v setpriv >/dev/null && { id sluicetest >/dev/null 2>&1 || useradd -M -s /usr/sbin/nologin sluicetest >/dev/null 2>&1; }; then
    U=$(id -u sluicetest) G=$(id -g sluicetest)
    cp "$SLUICE" "$SH/sluice" && chmod 755 "$SH/sluice"
    cp "$HERE/gw_attack.sh" "$HERE/lib.sh" "$SH/" && chmod a+rX "$SH"/*.sh
    echo "# --- the same cases as uid $U (setpriv) ---"
    (cd / && setpriv --reuid="$U" --regid="$G" --clear-groups --inh-caps=-all \
        env GA_NETNS=1 GA_CHILD=1 GA_SH="$SH" GA_RND="$RND" GA_PA="$PA" GA_PH="$PH" \
        GA_DPORT="$DPORT" PATH="/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin" \
        bash "$SH/gw_attack.sh" "$SH/sluice") 2>&1 | tee "$T/child.out"
    e2e_add_counts "$T/child.out"
else
    echo "# SKIP the unprivileged pass: no setpriv or no user"
fi
echo "# wall time: $((SECONDS - start)) s"
e2e_finish
