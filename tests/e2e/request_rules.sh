#!/usr/bin/env bash
# tests/e2e/request_rules.sh - network.requestRules end to end (issue 23):
# a real `sluice proxy`, a local origin on 127.0.0.1 and real curl. The
# names (github.com, plain.test) resolve through a dnsmasq started here to
# 127.0.0.1, never through the machine's resolver. The GitHub example of
# the issue: fetch from any repository, push only under github.com/ORG/**;
# denials by method and path (403 with Proxy-Status naming the rule, the
# origin never reached), ambiguous targets, every request of a kept-alive
# connection judged, report mode, a CONNECT and a SOCKS5 CONNECT to a host
# with rules refused (no TLS termination yet), and `sluice check URL
# --method M` agreeing with the live proxy on every case.
set -uo pipefail
SLUICE=${1:?usage: request_rules.sh PATH/TO/sluice}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/lib.sh"
ORIGIN="python3 $HERE/http-helpers/origin.py"

PA=$(free_port)
$ORIGIN A "$PA" "$T/A.log" 2>"$T/A.err" &
PIDS+=($!)
start_dnsmasq --local=/test/ --local=/github.com/ \
    --host-record=github.com,127.0.0.1 --host-record=plain.test,127.0.0.1
[ -n "$DPORT" ] || { bad "dnsmasq did not start" "$(cat "$T/dnsmasq.err")"; e2e_finish; exit 1; }
for i in $(seq 50); do grep -q listening "$T/A.log" 2>/dev/null && break; sleep 0.1; done

write_settings() { # FILE MODE
    cat > "$1" <<JSON
{"network": {"allowedDomains": ["github.com", "plain.test", "127.0.0.1:$PA"],
             "dnsServers": ["127.0.0.1:$DPORT"],
             "mode": "$2",
             "requestRules": [
               {"host": "github.com", "method": ["GET", "POST"],
                "path": ["/*/*/info/refs", "/*/*/git-upload-pack"], "action": "allow"},
               {"host": "github.com", "method": "POST", "path": "/ORG/**", "action": "allow"},
               {"host": "github.com", "path": "/ORG/secret/**", "action": "deny"},
               {"host": "github.com", "method": "DELETE", "action": "deny"}
             ]}}
JSON
}
write_settings "$T/enforce.json" enforce
write_settings "$T/report.json" report
start_proxy p "$T/enforce.json" --http tcp:127.0.0.1:0 --socks tcp:127.0.0.1:0
[ -n "$HPORT" ] || { e2e_finish; exit 1; }
G="http://github.com:$PA"

# live METHOD URL: the status the proxy gives (curl's %{http_code}); the
# response head in $T/head
live() {
    curl -s --path-as-is -o /dev/null -D "$T/head" -w '%{http_code}' -x "http://127.0.0.1:$HPORT" \
        -X "$1" --max-time 10 "$2"
}
# checked METHOD URL: what `sluice check` says (allow/deny/would_deny)
checked() {
    "$SLUICE" check -s "$1" --json -X "$2" "$3" | python3 -c 'import json,sys; print(json.load(sys.stdin)["decision"])'
}
reached() { grep -cF " $1 $2 " "$T/A.log"; } # METHOD TARGET: requests that reached the origin

# case NAME METHOD PATH WANT(allow|deny) [REASON-REGEX] [PATH-AT-THE-ORIGIN]
# (on a host with rules the path goes upstream as it was judged: normalised)
case_() {
    local name=$1 m=$2 path=$3 want=$4 re=${5:-} seen=${6:-$3} code before after c
    before=$(reached "$m" "$seen")
    code=$(live "$m" "$G$path")
    after=$(reached "$m" "$seen")
    c=$(checked "$T/enforce.json" "$m" "$G$path")
    if [ "$want" = allow ]; then
        if [ "$code" != 403 ] && [ "$after" -gt "$before" ]; then ok "$name: allowed ($code)"
        else bad "$name: allowed" "status $code, origin saw $before -> $after; $(cat "$T/head")"; fi
    else
        if [ "$code" = 403 ] && [ "$after" -eq "$before" ] && grep -qi '^Proxy-Status:' "$T/head"; then
            ok "$name: denied with 403 and Proxy-Status"
        else bad "$name: denied" "status $code, origin saw $before -> $after; $(cat "$T/head")"; fi
        if [ -n "$re" ]; then
            if grep -qiE "$re" "$T/head"; then ok "$name: the 403 says why"
            else bad "$name: the 403 says why" "want /$re/ in: $(cat "$T/head")"; fi
        fi
    fi
    if [ "$c" = "$want" ]; then ok "$name: sluice check agrees ($c)"
    else bad "$name: sluice check agrees" "check says $c, the proxy ${want}s"; fi
}

case_ "fetch: info/refs of any repository" GET "/o/r.git/info/refs?service=git-upload-pack" allow
case_ "fetch: git-upload-pack of any repository" POST "/other/x.git/git-upload-pack" allow
case_ "push outside ORG" POST "/o/r.git/git-receive-pack" deny "no allow rule"
case_ "push under ORG" POST "/ORG/r.git/git-receive-pack" allow
case_ "a deny rule by path wins over an allow" POST "/ORG/secret/r.git/git-receive-pack" deny \
    "requestRules\[2\]|deny \* github.com /ORG/secret"
case_ "a deny rule by method" DELETE "/o/r.git/info/refs" deny "deny DELETE github.com"
case_ "a method no rule allows" PUT "/o/r.git/info/refs" deny "no allow rule"
case_ "dot segments are resolved before matching" POST "/ORG/../o/r.git/git-receive-pack" deny
case_ "encoded dots are resolved too" POST "/ORG/%2e%2e/o/r.git/git-receive-pack" deny
case_ "unreserved escapes are decoded, and sent decoded" POST "/%4FRG/r.git/git-receive-pack" allow "" \
    "/ORG/r.git/git-receive-pack"
case_ "dot segments inside are resolved, and sent resolved" POST "/ORG/./x/../r.git/git-receive-pack" \
    allow "" "/ORG/r.git/git-receive-pack"
case_ "escapes other than unreserved are kept, hex upper-cased" GET "/o/r%3a.git/info/refs?a=%2f" \
    allow "" "/o/r%3A.git/info/refs?a=%2f"
case_ "an encoded slash is ambiguous" GET "/o%2Fr/x.git/info/refs" deny "ambiguous"
case_ "an empty segment is ambiguous" POST "/ORG//r.git/git-receive-pack" deny "ambiguous"
case_ "'..' above the root is ambiguous" GET "/../o/r.git/info/refs" deny "ambiguous"
case_ "a trailing dot is ambiguous" POST "/ORG/secret./r.git/git-receive-pack" deny "ambiguous"
case_ "the query is not matched" GET "/o/r.git/info/refs?/ORG/secret/x" allow

# an expectation file with request lines: "VERDICT METHOD URL"
cat > "$T/expect.txt" <<EXP
allow $G/o/r.git/info/refs
deny POST $G/o/r.git/git-receive-pack
allow POST $G/ORG/r.git/git-receive-pack
deny DELETE $G/ORG/r.git
allow POST $G/o/r.git/git-receive-pack
EXP
out=$("$SLUICE" check -s "$T/enforce.json" --expect "$T/expect.txt")
rc=$?
if [ "$rc" = 1 ] && grep -q '^4 passed, 1 failed$' <<<"$out" &&
    grep -q "expect.txt:5: expected allow github.com:$PA POST /o/r.git/git-receive-pack, got deny" <<<"$out"; then
    ok "check --expect takes 'VERDICT METHOD URL' lines"
else
    bad "check --expect takes 'VERDICT METHOD URL' lines" "rc $rc: $out"
fi

# raw requests curl would not send: every status must be a refusal (400 from
# the head checks, 403 from the rules) and nothing may reach the origin
RAW="python3 $HERE/http-helpers/raw.py"
hostile() { # NAME TARGET-PATH [HOST-HEADER]
    local name=$1 path=$2 host=${3:-github.com:$PA} before after got
    before=$(grep -c '^req' "$T/A.log")
    got=$($RAW "$HPORT" "s:POST http://github.com:$PA$path HTTP/1.1\r\nHost: $host\r\nContent-Length: 0\r\n\r\n" c 2>&1 | head -1)
    after=$(grep -c '^req' "$T/A.log")
    case "$got" in
    400*|403*) [ "$after" -eq "$before" ] && ok "hostile: $name refused ($got)" ||
        bad "hostile: $name refused" "$got, but the origin saw it: $(tail -1 "$T/A.log")" ;;
    *) bad "hostile: $name refused" "got '$got'" ;;
    esac
}
hostile "raw UTF-8 in the path" '/ORG/\xc3\xa9/../../o/r.git/git-receive-pack'
hostile "an encoded NUL" '/ORG/%00/../../o/r.git/git-receive-pack'
hostile "a raw backslash" '/ORG\\..\\o/r.git/git-receive-pack'
hostile "an encoded backslash" '/ORG/%5C..%5Co/r.git/git-receive-pack'
hostile "an overlong UTF-8 dot-dot" '/ORG/%C0%AE%C0%AE/o/r.git/git-receive-pack'
hostile "a trailing-dot segment" '/ORG/secret./r.git/git-receive-pack'
hostile "a fragment" '/ORG/r.git/git-receive-pack#x'
hostile "a Host header naming another host (judged by the target)" '/o/r.git/git-receive-pack' \
    plain.test
out=$($RAW "$HPORT" \
    "s:GET $G/o/r.git/info/refs HTTP/1.1\r\nHost: github.com\r\n\r\n" c \
    "s:POST $G/o/r.git/git-receive-pack HTTP/1.1\r\nHost: github.com\r\nContent-Length: 0\r\n\r\n" c \
    "s:POST $G/ORG/r.git/git-receive-pack HTTP/1.1\r\nHost: github.com\r\nContent-Length: 0\r\n\r\n" c \
    "s:DELETE $G/ORG/r.git HTTP/1.1\r\nHost: github.com\r\n\r\n" c 2>&1 | tr '\n' ' ')
[ "$out" = "404 403 404 403 " ] && ok "one connection, four requests, each judged: $out" ||
    bad "one connection, four requests, each judged" "$out"

# a host without rules: the domain lists alone, the path sent as spelled
code=$(live POST "http://plain.test:$PA/anything/./at/%61ll")
if [ "$code" != 403 ] && [ "$(reached POST /anything/./at/%61ll)" = 1 ]; then
    ok "a host no rule names is decided by the domain lists ($code), its path sent as spelled"
else
    bad "a host no rule names is decided by the domain lists" "$code $(tail -2 "$T/A.log")"
fi

# keep-alive: both requests on one client connection; the second is judged
out=$(curl -s --path-as-is -o /dev/null -o /dev/null -w '%{http_code} %{num_connects}\n' -x "http://127.0.0.1:$HPORT" \
    -X POST "$G/ORG/r.git/git-receive-pack" "$G/o/r.git/git-receive-pack" --max-time 10)
if [ "$(printf '%s\n' "$out" | tr '\n' ' ')" = "404 1 403 0 " ]; then
    ok "keep-alive: the second request on the connection is judged on its own"
else
    bad "keep-alive: the second request on the connection is judged on its own" "$out"
fi

# CONNECT to a host with rules: refused, the reason says TLS termination
code=$(curl -s -o /dev/null -D "$T/chead" -w '%{http_connect}' -p -x "http://127.0.0.1:$HPORT" \
    --max-time 10 "$G/o/r.git/info/refs")
if [ "$code" = 403 ] && grep -qi 'TLS termination' "$T/chead"; then
    ok "CONNECT to a host with request rules: 403 naming TLS termination"
else
    bad "CONNECT to a host with request rules: 403 naming TLS termination" "$code $(cat "$T/chead")"
fi
c=$("$SLUICE" check -s "$T/enforce.json" "github.com:$PA" | awk '{print $1}')
[ "$c" = deny ] && ok "sluice check github.com:PORT agrees (deny)" || bad "sluice check github.com:PORT agrees" "$c"
code=$(curl -s -o /dev/null -w '%{http_connect}' -p -x "http://127.0.0.1:$HPORT" --max-time 10 \
    "http://plain.test:$PA/")
[ "$code" = 200 ] && ok "CONNECT to a host without rules stays a tunnel" \
    || bad "CONNECT to a host without rules stays a tunnel" "$code"

# SOCKS5 CONNECT to a host with rules: refused (ruleset), the reason in the log
before=$(grep -c '^conn' "$T/A.log")
curl -s -o /dev/null --socks5-hostname "127.0.0.1:$SPORT" --max-time 10 "$G/o/r.git/info/refs"
rc=$?
after=$(grep -c '^conn' "$T/A.log")
if [ "$rc" -ne 0 ] && [ "$after" -eq "$before" ] && wait_for "$T/p.log" 'socks5.*TLS termination' $((5 * SLOW)); then
    ok "SOCKS5 CONNECT to a host with request rules refused, the reason logged"
else
    bad "SOCKS5 CONNECT to a host with request rules refused" "curl $rc, origin $before -> $after; $(grep socks5 "$T/p.log" | tail -3)"
fi

# the decision record names the rule
denies=$(grep -E 'event=decision.*decision=deny' "$T/p.log")
if grep -q "rule=\"'deny \* github.com /ORG/secret/\*\*' network.requestRules\[2\]\" source=$T/enforce.json:" <<<"$denies"; then
    ok "the decision record names the request rule"
else
    bad "the decision record names the request rule" "$(grep 'decision=deny' "$T/p.log" | head -5)"
fi

# report mode: what the rules deny passes as would_deny
kill "$PROXY_PID" 2>/dev/null; wait "$PROXY_PID" 2>/dev/null
start_proxy r "$T/report.json" --http tcp:127.0.0.1:0 --socks off
before=$(reached POST /o/r.git/git-receive-pack)
code=$(live POST "$G/o/r.git/git-receive-pack")
after=$(reached POST /o/r.git/git-receive-pack)
if [ "$code" != 403 ] && [ "$after" -gt "$before" ] && grep -q 'would_deny' "$T/r.log"; then
    ok "report mode: a request the rules deny passes, logged would_deny"
else
    bad "report mode: a request the rules deny passes, logged would_deny" "$code $before -> $after; $(tail -3 "$T/r.log")"
fi
c=$(checked "$T/report.json" POST "$G/o/r.git/git-receive-pack")
[ "$c" = would_deny ] && ok "report mode: sluice check says would_deny" || bad "report mode: sluice check says would_deny" "$c"

# the config test counts them, and a bad rule is refused where it is written
out=$("$SLUICE" check -s "$T/enforce.json")
grep -q ', 4 request rules;' <<<"$out" && ok "the config test counts the request rules" ||
    bad "the config test counts the request rules" "$out"
printf '{"network": {"requestRules": [\n  {"host": "a.test", "method": "get", "action": "deny"}]}}\n' > "$T/bad.json"
out=$("$SLUICE" check -s "$T/bad.json" 2>&1)
rc=$?
[ "$rc" = 2 ] && grep -q "bad.json:2:32: network.requestRules\[0\].method: \"get\": methods are case-sensitive" <<<"$out" &&
    ok "a bad rule is refused at FILE:LINE:COLUMN (exit 2)" || bad "a bad rule is refused at FILE:LINE:COLUMN" "rc $rc: $out"
out=$("$SLUICE" proxy --settings "$T/bad.json" --http tcp:127.0.0.1:0 --socks off 2>&1)
rc=$?
[ "$rc" != 0 ] && grep -q 'bad.json:2:32' <<<"$out" &&
    ok "sluice proxy refuses to start on a bad rule" || bad "sluice proxy refuses to start on a bad rule" "rc $rc: $out"

# explain says it in words, and as JSON
text=$("$SLUICE" explain -s "$T/enforce.json")
if grep -q 'allow GET, POST on github.com to /\*/\*/info/refs' <<<"$text" &&
    grep -q 'deny DELETE on github.com to any path' <<<"$text"; then
    ok "explain lists the request rules"
else
    bad "explain lists the request rules" "$(printf '%s\n' "$text" | head -20)"
fi
n=$("$SLUICE" explain -s "$T/enforce.json" --json |
    python3 -c 'import json,sys; print(len(json.load(sys.stdin)["network"]["request_rules"]))')
[ "$n" = 4 ] && ok "explain --json has the 4 rules" || bad "explain --json has the 4 rules" "$n"

# sluice run --transparent: a direct connect() to a host with rules is refused
# with the reason; through the HTTP proxy the rules judge each request
# (skipped where sluice run cannot make a sandbox)
if timeout 30 "$SLUICE" run -s "$T/enforce.json" -- true >/dev/null 2>&1; then
    sed 's/"mode": "enforce"/"mode": "enforce", "transparent": true/' "$T/enforce.json" > "$T/tp.json"
    out=$(timeout 60 "$SLUICE" run -s "$T/tp.json" -- sh -c "
        curl -s -o /dev/null -w 'direct=%{http_code}\n' --noproxy '*' --max-time 5 $G/o/r.git/info/refs
        curl -s -o /dev/null -w 'plain=%{http_code}\n' --noproxy '*' --max-time 5 http://plain.test:$PA/x
        curl -s -o /dev/null -w 'proxied=%{http_code}\n' --max-time 5 $G/o/r.git/info/refs
        curl -s -o /dev/null -w 'push=%{http_code}\n' --max-time 5 -X POST $G/o/r.git/git-receive-pack" 2>&1)
    if grep -q 'transparent mode needs' <<<"$out"; then
        echo "ok - # SKIP run --transparent: $(printf '%s' "$out" | head -1)" # valgrind lacks pidfd_getfd
    elif grep -q '^direct=000$' <<<"$out" && grep -q '^plain=404$' <<<"$out" &&
        grep -q '^proxied=404$' <<<"$out" && grep -q '^push=403$' <<<"$out" &&
        grep -q 'need TLS termination' <<<"$out"; then
        ok "run --transparent: connect() to a host with rules refused with the reason, proxied requests judged"
    else
        bad "run --transparent: connect() to a host with rules refused with the reason, proxied requests judged" "$out"
    fi
else
    echo "ok - # SKIP run --transparent: sluice run cannot make a sandbox here"
fi

# SIGHUP reloads the rules: push outside ORG denied, then allowed by a new rule
kill "$PROXY_PID" 2>/dev/null; wait "$PROXY_PID" 2>/dev/null
cp "$T/enforce.json" "$T/reload.json"
start_proxy h "$T/reload.json" --http tcp:127.0.0.1:0 --socks off
code1=$(live POST "$G/o/r.git/git-receive-pack")
sed 's|"path": "/ORG/\*\*"|"path": ["/ORG/**", "/o/**"]|' "$T/enforce.json" > "$T/reload.json.new"
mv "$T/reload.json.new" "$T/reload.json"
kill -HUP "$PROXY_PID"
wait_for "$T/h.log" 'event=reload ' 10
code2=$(live POST "$G/o/r.git/git-receive-pack")
[ "$code1" = 403 ] && [ "$code2" = 404 ] && ok "SIGHUP reloads the request rules ($code1 -> $code2)" ||
    bad "SIGHUP reloads the request rules" "$code1 -> $code2; $(grep reload "$T/h.log")"

# nothing was resolved through anything but the dnsmasq started here
grep -q 'github.com' "$T/dnsmasq.log" && ok "github.com was resolved by the local dnsmasq" \
    || bad "github.com was resolved by the local dnsmasq" "$(tail -5 "$T/dnsmasq.log")"
e2e_finish
