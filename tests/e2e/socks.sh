#!/usr/bin/env bash
# tests/e2e/socks.sh - `sluice proxy --socks` end to end: real curl
# (--socks5-hostname and --socks5), raw SOCKS5 byte sequences for every
# reply code, authentication, the handshake timeout, reload and drain.
# Everything is on 127.0.0.1: a dnsmasq started here answers the names, a
# python http.server is the origin. Denied targets are never resolved nor
# dialed, which the dnsmasq and origin logs prove.
set -uo pipefail
SLUICE=${1:?usage: socks.sh PATH/TO/sluice}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/lib.sh"
RAW="python3 $HERE/rawsock.py"

# --- origin: python http.server on 127.0.0.1 ---------------------------------
mkdir -p "$T/www"
head -c 3000000 /dev/urandom > "$T/www/big.bin"
echo "hello from the origin" > "$T/www/index.html"
OPORT=$(free_port)
(cd "$T/www" && exec python3 -m http.server "$OPORT" --bind 127.0.0.1) 2>"$T/origin.log" &
PIDS+=($!)
CLOSED=$(free_port) # nothing listens there

# --- a UDP port that never answers (DNS timeouts) ------------------------------
HOLE=$(free_port)
python3 -c "import socket,time; s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); s.bind(('127.0.0.1',$HOLE)); time.sleep(600)" &
PIDS+=($!)

# --- dnsmasq ------------------------------------------------------------------
start_dnsmasq --local=/test/ \
    --server=/slow.example/127.0.0.1#$HOLE \
    --host-record=origin.test,127.0.0.1 \
    --host-record=also.test,127.0.0.1 \
    --host-record=meta.test,169.254.169.254 \
    --host-record=rebind.test,10.1.2.3 \
    --host-record=denied.test,127.0.0.1 ||
    { bad "dnsmasq did not start" "$(cat "$T/dnsmasq.err")"; e2e_finish; exit 1; }

for i in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$OPORT/" && break; sleep 0.1; done

write_settings() { # FILE EXTRA_JSON
    cat > "$1" <<JSON
{"network": {"allowedDomains": ["origin.test", "also.test", "*.test", "slow.example",
                                "127.0.0.1:$OPORT", "127.0.0.1:$CLOSED"],
             "deniedDomains": ["denied.test"],
             "dnsServers": ["127.0.0.1:$DPORT"]},
 "proxy": {"timeouts": {"handshake": 1, "dns": 1, "dial": 2}$2}}
JSON
}


# raw NAME WANT STEPS...: runs rawsock and compares its whole output
raw() {
    local name=$1 want=$2 got
    shift 2
    got=$($RAW "$PORT" "$@" 2>/dev/null)
    if [ "$got" = "$want" ]; then ok "$name"; else bad "$name" "want: $want
got:  $got"; fi
}


write_settings "$T/s.json" ""
start_proxy main "$T/s.json" --http off --socks tcp:127.0.0.1:0

GREET=050100
R_OK=05000001000000000000
rep() { printf '05%s0001000000000000' "$1"; }

# --- curl through the proxy ----------------------------------------------------
out=$(curl -s --max-time 10 --socks5-hostname "127.0.0.1:$PORT" "http://origin.test:$OPORT/index.html")
[ "$out" = "hello from the origin" ] && ok "curl --socks5-hostname fetches through an allowed name" || bad "curl --socks5-hostname" "$out"
out=$(curl -s --max-time 10 --socks5 "127.0.0.1:$PORT" "http://127.0.0.1:$OPORT/index.html")
[ "$out" = "hello from the origin" ] && ok "curl --socks5 (IPv4 address) fetches through an allowed IP rule" || bad "curl --socks5" "$out"
curl -s --max-time 20 --socks5-hostname "127.0.0.1:$PORT" "http://origin.test:$OPORT/big.bin" -o "$T/big.out"
cmp -s "$T/big.out" "$T/www/big.bin" && ok "3 MB download is byte-exact" || bad "3 MB download differs"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 --socks5-hostname "127.0.0.1:$PORT" -T "$T/www/big.bin" "http://origin.test:$OPORT/upload")
[ "$code" = "501" ] && ok "3 MB upload reaches the origin (501 from http.server for PUT)" || bad "upload through tunnel" "$code"
curl -s --max-time 10 --socks5-hostname "127.0.0.1:$PORT" "http://denied.test:$OPORT/" >/dev/null 2>&1
rc=$?
[ "$rc" = 97 ] && ok "curl: denied name fails with a SOCKS error (exit 97)" || bad "curl denied name exit" "$rc"

# --- reply codes, raw -----------------------------------------------------------
raw "greeting no-auth" "0500" s:$GREET r:2
raw "allowed name: success reply with BND 0.0.0.0:0" "0500
$R_OK" s:$GREET r:2 s:$(connect_req origin.test "$OPORT") r:10
raw "deny rule: 0x02" "0500
$(rep 02)
EOF after 0 bytes: " s:$GREET r:2 s:$(connect_req denied.test 80) r:10 e
raw "no rule (unmatched name, no --ask): 0x02" "0500
$(rep 02)" s:$GREET r:2 s:$(connect_req example.org 443) r:10
raw "NXDOMAIN: 0x04" "0500
$(rep 04)" s:$GREET r:2 s:$(connect_req nx.test 80) r:10
raw "refused: 0x05" "0500
$(rep 05)" s:$GREET r:2 s:05010001"7f000001"$(printf %04x "$CLOSED") r:10
raw "DNS timeout: 0x06" "0500
$(rep 06)" s:$GREET r:2 s:$(connect_req slow.example 80) r:10
raw "BIND: 0x07" "0500
$(rep 07)" s:$GREET r:2 s:05020001"7f000001"0050 r:10
# UDP ASSOCIATE (issue 26; tests/e2e/socks_udp.sh relays datagrams): the
# reply names the relay on the listener's address; a source address other
# than the client's own is refused by ruleset
got=$($RAW "$PORT" s:$GREET r:2 s:05030001"00000000"0000 r:10 2>/dev/null | tr '\n' ' ')
[[ $got =~ ^0500\ 050000017f000001[0-9a-f]{4}\ $ ]] && ok "UDP ASSOCIATE: the relay's address on 127.0.0.1" || bad "UDP ASSOCIATE reply" "$got"
raw "UDP ASSOCIATE from another address: 0x02" "0500
$(rep 02)" s:$GREET r:2 s:05030001"0a000001"0000 r:10
raw "unknown address type: 0x08" "0500
$(rep 08)" s:$GREET r:2 s:05010005"7f000001"0050 r:10
raw "bad RSV: 0x01" "0500
$(rep 01)" s:$GREET r:2 s:05010101"7f000001"0050 r:10
raw "bad request version: 0x01" "0500
$(rep 01)" s:$GREET r:2 s:04010001"7f000001"0050 r:10
raw "port 0: 0x01" "0500
$(rep 01)" s:$GREET r:2 s:$(connect_req origin.test 0) r:10
raw "NUL in the name: 0x01" "0500
$(rep 01)" s:$GREET r:2 s:050100030b"6f726967696e0074657374"$(printf %04x "$OPORT")"" r:10
raw "empty domain: 0x01" "0500
$(rep 01)" s:$GREET r:2 s:0501000300$(printf %04x "$OPORT") r:10
raw "decimal IPv4 spelling judged as 127.0.0.1 (port not allowed): 0x02" "0500
$(rep 02)" s:$GREET r:2 s:$(connect_req 2130706433 80) r:10
raw "hex dotted spelling 0x7f.1 judged as 127.0.0.1: allowed port connects" "0500
$R_OK" s:$GREET r:2 s:$(connect_req 0x7f.1 "$OPORT") r:10
raw "mapped IPv6 ::ffff:169.254.169.254 judged as metadata: 0x02" "0500
$(rep 02)" s:$GREET r:2 s:05010004"00000000000000000000ffffa9fea9fe"0050 r:10
raw "metadata answer refused by the guard: 0x02" "0500
$(rep 02)" s:$GREET r:2 s:$(connect_req meta.test 80) r:10
raw "private answer refused (denyPrivateAddresses default in proxy mode): 0x02" "0500
$(rep 02)" s:$GREET r:2 s:$(connect_req rebind.test 80) r:10
raw "allowed name resolving to loopback at a port not allowed: 0x02" "0500
$(rep 02)" s:$GREET r:2 s:$(connect_req also.test 22) r:10
raw "SOCKS4 client gets a SOCKS4 rejection" "005b000000000000" s:04010050"7f000001"00 r:8
raw "SOCKS4a client gets a SOCKS4 rejection" "005b000000000000" s:04010050"00000001"00"6f726967696e2e7465737400" r:8
raw "HTTP on the SOCKS port: closed without a reply" "EOF after 0 bytes: " s:"474554202f20485454502f312e310d0a0d0a" e
raw "no methods: 0xFF" "05ff" s:0500 r:2
raw "only user/pass offered without credentials configured: 0xFF" "05ff" s:050102 r:2
raw "greeting byte by byte, then request in pieces" "0500
$R_OK" s:05 w:0.05 s:01 w:0.05 s:00 r:2 s:0501 w:0.05 s:0003 w:0.05 s:$(connect_req origin.test "$OPORT" | cut -c9-) r:10
raw "early data after the request is held until the dial and then forwarded" "0500${R_OK}
485454502f312e3020323030" s:${GREET}$(connect_req origin.test "$OPORT")"474554202f696e6465782e68746d6c20485454502f312e300d0a0d0a" r:12 r:12
got=$($RAW "$PORT" s:0501 e 2>/dev/null)
case "$got" in "EOF after 0 bytes:"*) ok "truncated greeting: closed at the handshake timeout ($got)";; *) bad "truncated greeting" "$got";; esac
got=$($RAW "$PORT" e 2>/dev/null)
case "$got" in "EOF after 0 bytes:"*) ok "silent client: closed at the handshake timeout";; *) bad "silent client" "$got";; esac

# --- nothing resolved or dialed for denied targets -----------------------------
if grep -q 'denied.test' "$T/dnsmasq.log"; then bad "denied.test was resolved" "$(grep denied.test "$T/dnsmasq.log")"; else ok "denied name never reached DNS"; fi
if grep -q 'example.org' "$T/dnsmasq.log"; then bad "unmatched name was resolved"; else ok "unmatched name never reached DNS"; fi

# --- the log ---------------------------------------------------------------------
grep -q "event=decision id=[0-9]* client=127.0.0.1:[0-9]* protocol=socks5 host=denied.test port=80 decision=deny rule=\"'denied.test' network.deniedDomains\[0\]" "$T/main.log" \
    && ok "log: decision line names the deny rule" || bad "log decision line" "$(grep denied.test "$T/main.log")"
grep -q "event=close .*protocol=socks5 host=origin.test port=$OPORT decision=allow .*addr=127.0.0.1 code=0 bytes_up=[0-9]* bytes_down=[1-9][0-9]* duration_ms=[0-9]* end=done" "$T/main.log" \
    && ok "log: close line with bytes, duration and how it ended" || bad "log close line" "$(grep 'event=close' "$T/main.log" | head -3)"
grep -q 'end="handshake timeout"' "$T/main.log" && ok "log: handshake timeout recorded" || bad "log handshake timeout"

# --- reload (SIGHUP) -----------------------------------------------------------------
write_settings "$T/s.json" ""
sed -i 's/"deniedDomains": \["denied.test"\]/"deniedDomains": ["denied.test", "origin.test"]/' "$T/s.json"
# each check waits for the reload's own log line, not a fixed time (under
# valgrind a reload can take longer than 0.3 s)
n0=$(grep -c 'event=reload ' "$T/main.log")
kill -HUP "$PROXY_PID"
wait_more "$T/main.log" 'event=reload ' "$n0" $((5 * SLOW)) || bad "SIGHUP: no reload line" "$(tail -3 "$T/main.log")"
raw "after SIGHUP the new deny rule applies" "0500
$(rep 02)" s:$GREET r:2 s:$(connect_req origin.test "$OPORT") r:10
echo '{"network": {"allowedDomains": [' > "$T/s.json"
kill -HUP "$PROXY_PID"
wait_for "$T/main.log" 'event=reload_failed' $((5 * SLOW)) && ok "a bad file on SIGHUP is logged" || bad "reload_failed not logged"
raw "a bad file keeps the previous policy" "0500
$(rep 02)" s:$GREET r:2 s:$(connect_req origin.test "$OPORT") r:10
raw "a bad file keeps the previous policy (allowed still allowed)" "0500
$R_OK" s:$GREET r:2 s:$(connect_req also.test "$OPORT") r:10

# --- drain (SIGTERM) ---------------------------------------------------------------------
PYTHONUNBUFFERED=1 $RAW "$PORT" s:$GREET r:2 s:$(connect_req also.test "$OPORT") r:10 w:1 s:"474554202f696e6465782e68746d6c20485454502f312e300d0a0d0a" r:12 > "$T/drain.out" 2>&1 &
DRAIN_CLIENT=$!
# SIGTERM once the tunnel is up (its CONNECT reply read), while the client
# waits before it sends its request: not after a fixed sleep, which under
# valgrind can come before the client has even connected
wait_for "$T/drain.out" '^05000001' $((5 * SLOW))
kill -TERM "$PROXY_PID"
wait "$DRAIN_CLIENT"
wait "$PROXY_PID"; rc=$?
[ "$rc" = 0 ] && ok "SIGTERM: exit status 0" || bad "SIGTERM exit status" "$rc $(cat "$T/main.err")"
[ "$(sed -n 3p "$T/drain.out")" = "485454502f312e3020323030" ] && ok "SIGTERM: an open tunnel finishes its exchange while draining" || bad "drain" "$(cat "$T/drain.out")"

# --- authentication ------------------------------------------------------------------------
write_settings "$T/a.json" ', "auth": {"username": "alice", "password": "s3cret pw"}'
start_proxy auth "$T/a.json" --http off --socks tcp:127.0.0.1:0
raw "auth configured: no-auth only is refused" "05ff" s:$GREET r:2
raw "auth: wrong password refused" "0502
0101" s:050102 r:2 s:0105$(hexname alice)09$(hexname "s3cret px") r:2
raw "auth: right credentials, then CONNECT" "0502
0100
$R_OK" s:050102 r:2 s:0105$(hexname alice)09$(hexname "s3cret pw") r:2 s:$(connect_req origin.test "$OPORT") r:10
out=$(curl -s --max-time 10 --socks5-hostname "127.0.0.1:$PORT" --proxy-user 'alice:s3cret pw' "http://origin.test:$OPORT/index.html")
[ "$out" = "hello from the origin" ] && ok "curl with --proxy-user through RFC 1929" || bad "curl proxy-user" "$out"
if grep -q 's3cret' "$T/auth.log" "$T/auth.err"; then bad "the password appears in the log"; else ok "credentials never logged"; fi

e2e_finish
