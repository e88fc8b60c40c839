#!/usr/bin/env bash
# tests/e2e/replay.sh - `sluice check --replay LOG --settings NEW` (issue 26,
# deliverable 3): a real `sluice proxy --log` records a real log (curl
# through its HTTP and SOCKS5 listeners to an origin on 127.0.0.1; names
# resolve through a dnsmasq started here to 127.0.0.1, never through the
# machine's resolver), once as logfmt and once as JSON lines; each log is
# replayed against a stricter and a looser settings file and the output is
# compared line by line with what must change; the same policy changes
# nothing (exit 0), and bad logs (a truncated line, bad quoting, a huge
# line, a record that is not one) give exit 2 with FILE:LINE.
set -uo pipefail
SLUICE=${1:?usage: replay.sh PATH/TO/sluice}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/lib.sh"
ORIGIN="python3 $HERE/http-helpers/origin.py"

PA=$(free_port)
$ORIGIN A "$PA" "$T/A.log" 2>"$T/A.err" &
PIDS+=($!)
start_dnsmasq --local=/test/ --host-record=a.test,127.0.0.1 --host-record=b.test,127.0.0.1 \
    --host-record=c.test,127.0.0.1 --host-record=e.test,127.0.0.2
[ -n "$DPORT" ] || { bad "dnsmasq did not start" "$(cat "$T/dnsmasq.err")"; e2e_finish; exit 1; }
for i in $(seq 50); do grep -q listening "$T/A.log" 2>/dev/null && break; sleep 0.1; done

# the policy the log is recorded under (line numbers matter: sources)
cat > "$T/old.json" <<JSON
{"network": {"dnsServers": ["127.0.0.1:$DPORT"],
  "allowedDomains": ["a.test", "b.test", "127.0.0.1:$PA", "e.test"],
  "deniedDomains": ["c.test"],
  "requestRules": [
    {"host": "a.test", "method": "GET", "path": "/pub/**", "action": "allow"}
  ]}}
JSON
# stricter: b.test denied, a.test's GETs only under /pub/y/
cat > "$T/strict.json" <<JSON
{"network": {"dnsServers": ["127.0.0.1:$DPORT"],
  "allowedDomains": ["a.test", "127.0.0.1:$PA", "e.test"],
  "deniedDomains": ["c.test", "b.test"],
  "requestRules": [
    {"host": "a.test", "method": "GET", "path": "/pub/y/**", "action": "allow"}
  ]}}
JSON
# looser: c.test and d.test allowed, POST under /pub/ too, and e.test's
# loopback address 127.0.0.2 (which the guard refused) allow-listed
cat > "$T/loose.json" <<JSON
{"network": {"dnsServers": ["127.0.0.1:$DPORT"],
  "allowedDomains": ["a.test", "b.test", "c.test", "d.test", "127.0.0.1:$PA", "e.test",
                     "127.0.0.2:$PA"],
  "requestRules": [
    {"host": "a.test", "method": ["GET", "POST"], "path": "/pub/**", "action": "allow"}
  ]}}
JSON

# record NAME [ARGS...]: a proxy logging to $T/NAME.log, the traffic, then
# SIGTERM so the log is complete
record() {
    local name=$1 i line hp sp pid
    shift
    "$SLUICE" proxy --settings "$T/old.json" --log "$T/$name.log" --http tcp:127.0.0.1:0 \
        --socks tcp:127.0.0.1:0 "$@" 2>"$T/$name.err" &
    pid=$!
    PIDS+=($pid)
    line=
    for i in $(seq $((200 * SLOW))); do
        line=$(grep -m1 -E 'event=start|"event":"start"' "$T/$name.log" 2>/dev/null)
        [ -n "$line" ] && break
        sleep 0.05
    done
    hp=$(printf '%s' "$line" | sed -n 's/.*http tcp:127\.0\.0\.1:\([0-9]*\).*/\1/p')
    sp=$(printf '%s' "$line" | sed -n 's/.*socks5 tcp:127\.0\.0\.1:\([0-9]*\).*/\1/p')
    if [ -z "$hp" ] || [ -z "$sp" ]; then
        bad "$name: the proxy started" "$(cat "$T/$name.err" "$T/$name.log" 2>/dev/null)"
        return 1
    fi
    local X="-s -o /dev/null --max-time 10 -x http://127.0.0.1:$hp"
    curl $X "http://a.test:$PA/pub/x"
    curl $X "http://a.test:$PA/pub/x"
    curl $X -X POST "http://a.test:$PA/pub/x"
    curl $X "http://b.test:$PA/y"
    curl $X "http://c.test:$PA/z"
    curl $X "http://d.test:$PA/w"
    curl $X "http://127.0.0.1:$PA/ip"
    curl $X "http://e.test:$PA/guard"
    curl $X -p "http://b.test:$PA/tunnel"
    curl -s -o /dev/null --max-time 10 --socks5-hostname "127.0.0.1:$sp" "http://c.test:$PA/s"
    curl -s -o /dev/null --max-time 10 --socks5-hostname "127.0.0.1:$sp" "http://b.test:$PA/s"
    kill -TERM "$pid"
    wait_exit "$pid" 20 || bad "$name: the proxy stopped on SIGTERM"
    return 0
}
record text || { e2e_finish; exit 1; }
record json --log-format json || { e2e_finish; exit 1; }
ndec=$(grep -c 'event=decision' "$T/text.log")
if [ "$ndec" = 11 ] && [ "$(grep -c '"event":"decision"' "$T/json.log")" = 11 ]; then
    ok "both logs hold the 11 decisions"
else
    bad "both logs hold the 11 decisions" "$(cat "$T/text.log" "$T/json.log")"
fi
if grep 'host=e.test' "$T/text.log" | grep -q 'decision=deny.*addr=127.0.0.2'; then
    ok "the guard refused e.test's loopback answer in the log"
else
    bad "the guard refused e.test's loopback answer in the log" "$(grep e.test "$T/text.log")"
fi

# the deny messages of the recorded log (issue 26): each denial says what
# to add to the settings to allow it, and never a way around the proxy
hint_of() { # GREP-PATTERN: the hint= of the first decision record matching
    grep 'event=decision' "$T/text.log" | grep -E -- "$1" | head -1 | sed -n 's/.* hint="\([^"]*\)".*/\1/p'
}
hint_is() { # NAME PATTERN WANT
    local got
    got=$(hint_of "$2")
    [ "$got" = "$3" ] && ok "hint: $1" || bad "hint: $1" "got '$got', want '$3'"
}
hint_is "a name no rule allows: the allowedDomains entry" "host=d.test" \
    "to allow it, add 'd.test:$PA' to network.allowedDomains"
hint_is "a deny rule: which one to remove or narrow" "protocol=socks5 host=c.test" \
    "deny rules win over allow rules: to allow it, remove or narrow 'c.test' ($T/old.json:3)"
hint_is "the address the guard refused" "host=e.test" \
    "'e.test' resolved to an address the guard refuses; to allow that address, add '127.0.0.2:$PA' to network.allowedDomains"
if grep 'decision=allow' "$T/text.log" | grep -q 'hint='; then
    bad "an allowed record has no hint" "$(grep 'decision=allow' "$T/text.log" | grep hint=)"
else
    ok "an allowed record has no hint"
fi
if grep -qiE 'noproxy|no_proxy|unset .*proxy|without the proxy' "$T/text.log" "$T/json.log"; then
    bad "no hint suggests a way around the proxy" "$(grep -iE 'noproxy|no_proxy' "$T/text.log")"
else
    ok "no hint suggests a way around the proxy"
fi
if python3 - "$T/json.log" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
d = [r for r in recs if r.get("event") == "decision" and r.get("host") == "d.test"][0]
assert d["hint"].startswith("to allow it, add 'd.test:"), d
keys = list(d)
assert keys.index("reason") + 1 == keys.index("hint"), keys
post = [r for r in recs if r.get("event") == "decision" and r.get("method") == "POST"][0]
want = ('to allow it, add {"host": "a.test", "method": "POST", "path": "/pub/x", '
        '"action": "allow"} to network.requestRules')
assert post["hint"] == want, post
PY
then ok "hint: the JSON log carries it after reason; request rules: the allow rule to add"
else bad "hint: the JSON log carries it after reason; request rules: the allow rule to add" "$(grep -E 'd.test|POST' "$T/json.log")"; fi

# network.denyMessage replaces the hint: in the 403 body and the log
cat > "$T/msg.json" <<JSON
{"network": {"allowedDomains": ["127.0.0.1:$PA"], "denyMessage": "ask #egress on chat for an exception"}}
JSON
start_proxy msg "$T/msg.json" --http tcp:127.0.0.1:0
if [ -n "$HPORT" ]; then
    body=$(curl -s --max-time 10 -x "http://127.0.0.1:$HPORT" "http://127.0.0.9:$PA/x")
    if [ "$body" = "sluice: 127.0.0.9:$PA blocked: 127.0.0.9 is a loopback address and no rule allows it; ask #egress on chat for an exception" ]; then
        ok "denyMessage: the 403 body ends with it"
    else
        bad "denyMessage: the 403 body ends with it" "$body"
    fi
    wait_for "$T/msg.log" 'event=decision' 5
    grep -q 'hint="ask #egress on chat for an exception"' "$T/msg.log" &&
        ok "denyMessage: the log's hint is it" || bad "denyMessage: the log's hint is it" "$(cat "$T/msg.log")"
    kill "$PROXY_PID"
fi
out=$("$SLUICE" check --settings <(echo '{"network": {"denyMessage": "two\nlines"}}') a.test 2>&1)
rc=$?
[ "$rc" = 2 ] && grep -q 'network.denyMessage' <<<"$out" && ok "denyMessage: a second line is refused, naming the key" ||
    bad "denyMessage: a second line is refused, naming the key" "exit $rc: $out"

S="$T/old.json"
RA="'a.test' network.allowedDomains[0] ($S:2)"
RB="'b.test' network.allowedDomains[1] ($S:2)"
RC="'c.test' network.deniedDomains[0] ($S:3)"
ST="$T/strict.json" LO="$T/loose.json"
strict_want() {
    cat <<OUT
allow -> deny  http a.test:$PA GET /pub/x  x2  was: $RA  now: request rules: GET /pub/x matches no allow rule of network.requestRules for 'a.test' (first at $ST:5)
allow -> deny  http b.test:$PA GET /y  x1  was: $RB  now: 'b.test' network.deniedDomains[1] ($ST:3): denied by rule 'b.test'
allow -> deny  connect b.test:$PA  x1  was: $RB  now: 'b.test' network.deniedDomains[1] ($ST:3): denied by rule 'b.test'
allow -> deny  socks5 b.test:$PA  x1  was: $RB  now: 'b.test' network.deniedDomains[1] ($ST:3): denied by rule 'b.test'
5 of 11 decisions change: 5 allowed -> denied, 0 denied -> allowed, 0 allow <-> would_deny; 1 denied by the address guard, not judged without answers
OUT
}
loose_want() {
    cat <<OUT
deny -> allow  http a.test:$PA POST /pub/x  x1  was: no rule  now: 'a.test' network.allowedDomains[0] ($LO:2): allowed by rule 'a.test'; POST /pub/x allowed by request rule 'allow GET,POST a.test /pub/**'
deny -> allow  http c.test:$PA GET /z  x1  was: $RC  now: 'c.test' network.allowedDomains[2] ($LO:2): allowed by rule 'c.test'
deny -> allow  http d.test:$PA GET /w  x1  was: no rule  now: 'd.test' network.allowedDomains[3] ($LO:2): allowed by rule 'd.test'
deny -> allow  socks5 c.test:$PA  x1  was: $RC  now: 'c.test' network.allowedDomains[2] ($LO:2): allowed by rule 'c.test'
4 of 11 decisions change: 0 allowed -> denied, 4 denied -> allowed, 0 allow <-> would_deny; 1 denied by the address guard, not judged without answers
OUT
}
# --resolve: e.test is resolved now (through the dnsmasq) and its answer
# 127.0.0.2 judged by the guard: still refused under the stricter policy,
# allowed by its IP rule under the looser one
strict_resolve_want() {
    strict_want | sed 's/; 1 denied by the address guard, not judged without answers$//'
}
loose_resolve_want() { # d.test has no address now (NXDOMAIN): still denied
    loose_want | sed -n '1,2p'
    cat <<OUT
deny -> allow  http e.test:$PA GET /guard  x1  was: 'e.test' network.allowedDomains[3] ($S:2)  now: 'e.test' network.allowedDomains[5] ($LO:2): allowed by rule 'e.test'
OUT
    loose_want | sed -n '4p'
    echo "4 of 11 decisions change: 0 allowed -> denied, 4 denied -> allowed, 0 allow <-> would_deny"
}

# replay NAME LOG SETTINGS WANT-RC WANT-FUNCTION [ARGS...]
replay() {
    local name=$1 log=$2 set=$3 want_rc=$4 want=$5 how out rc
    shift 5
    how="without resolving names [(]no address guard for names[)]"
    [ "$#" -gt 0 ] && how="names resolved now and every answer judged by the address guard"
    out=$("$SLUICE" check --settings "$set" --replay "$log" "$@" 2>"$T/replay.err")
    rc=$?
    if [ "$rc" = "$want_rc" ]; then ok "$name: exit $rc"
    else bad "$name: exit $want_rc" "exit $rc: $out $(cat "$T/replay.err")"; fi
    if head -1 <<<"$out" | grep -qE "^replay of $log against $set: 11 decisions in 10 groups, [0-9]+ other records skipped; judged by the rules, $how\$"; then
        ok "$name: the header says what was judged, and how"
    else
        bad "$name: the header" "$(head -1 <<<"$out")"
    fi
    if diff <(tail -n +2 <<<"$out") <($want) >"$T/diff"; then ok "$name: exactly the changes"
    else bad "$name: exactly the changes" "$(cat "$T/diff")"; fi
}
replay "text log, stricter" "$T/text.log" "$T/strict.json" 1 strict_want
replay "json log, stricter" "$T/json.log" "$T/strict.json" 1 strict_want
replay "text log, looser" "$T/text.log" "$T/loose.json" 1 loose_want
replay "json log, looser" "$T/json.log" "$T/loose.json" 1 loose_want
replay "text log, stricter, --resolve" "$T/text.log" "$T/strict.json" 1 strict_resolve_want --resolve
replay "json log, looser, --resolve" "$T/json.log" "$T/loose.json" 1 loose_resolve_want --resolve

# the policy the log was recorded under changes nothing: exit 0, no change line
for f in text json; do
    out=$("$SLUICE" check --settings "$T/old.json" --replay "$T/$f.log" 2>&1)
    rc=$?
    if [ "$rc" = 0 ] && [ "$(tail -n +2 <<<"$out")" = "0 of 11 decisions change: 0 allowed -> denied, 0 denied -> allowed, 0 allow <-> would_deny; 1 denied by the address guard, not judged without answers" ]; then
        ok "$f log, the same policy: nothing changes, exit 0"
    else
        bad "$f log, the same policy: nothing changes, exit 0" "exit $rc: $out"
    fi
done

# --json: one object per changed group, then the summary; the same for both logs
for f in text json; do
    "$SLUICE" check --settings "$T/strict.json" --json --replay "$T/$f.log" >"$T/$f.out"
    echo "rc=$?" >>"$T/$f.out"
done
if python3 - "$T/text.out" "$PA" <<'PY'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
assert lines[-1] == "rc=1", lines[-1]
objs = [json.loads(l) for l in lines[:-1]]
first = objs[0]
assert first["change"] == "allowed->denied" and first["protocol"] == "http", first
assert first["host"] == "a.test" and first["port"] == int(sys.argv[2]), first
assert first["method"] == "GET" and first["path"] == "/pub/x" and first["count"] == 2, first
assert first["old"]["decision"] == "allow" and first["old"]["rule"] == "'a.test' network.allowedDomains[0]", first
assert first["new"]["decision"] == "deny" and first["new"]["rule"] is None, first
s = objs[-1]["summary"]
assert s["decisions"] == 11 and s["groups"] == 10 and s["guard_not_judged"] == 1 and s["changed"] == 5 and s["changed_groups"] == 4, s
assert s["allowed_to_denied"] == 5 and s["denied_to_allowed"] == 0 and s["resolve"] is False, s
assert len(objs) == 5, objs
PY
then ok "--json: the changes and the summary"
else bad "--json: the changes and the summary" "$(cat "$T/text.out")"; fi
if diff "$T/text.out" "$T/json.out" >/dev/null; then ok "--json: the text log and the JSON log replay the same"
else bad "--json: the text log and the JSON log replay the same" "$(diff "$T/text.out" "$T/json.out")"; fi

# bad logs: exit 2, FILE:LINE: why, nothing on stdout
badlog() { # NAME FILE LINE REGEX
    local name=$1 f=$2 line=$3 re=$4 out err rc
    out=$("$SLUICE" check --settings "$T/strict.json" --replay "$f" 2>"$T/bad.err")
    rc=$?
    err=$(cat "$T/bad.err")
    if [ "$rc" = 2 ] && [ -z "$out" ] && grep -qE "^$f:$line: .*$re" <<<"$err"; then
        ok "bad log: $name: exit 2 with FILE:LINE"
    else
        bad "bad log: $name: exit 2 with FILE:LINE" "exit $rc; stdout: $out; stderr: $err"
    fi
}
n=$(wc -l <"$T/text.log")
{ head -n 3 "$T/text.log"; sed -n 4p "$T/text.log" | cut -c1-150 | tr -d '\n'; } >"$T/trunc.log"
badlog "a truncated line (logfmt)" "$T/trunc.log" 4 "closing quote|a byte that must be quoted|key without a value|expected key=value|without"
{ head -n 3 "$T/text.log"; sed -n 4p "$T/text.log" | sed 's/ code=.*//' | tr -d '\n'; } >"$T/cut.log"
badlog "a line cut between fields" "$T/cut.log" 4 "no newline"
{ head -n 3 "$T/json.log"; sed -n 4p "$T/json.log" | cut -c1-80 | tr -d '\n'; } >"$T/trunc.json"
badlog "a truncated line (JSON)" "$T/trunc.json" 4 "not valid JSON"
{ head -n 2 "$T/text.log"; echo 'event=decision protocol=connect host=a.test port=443 decision=allow rule="a x" source=a"b'; } >"$T/quote.log"
badlog "bad quoting" "$T/quote.log" 3 "must be quoted"
{ head -n 1 "$T/text.log"; echo 'event=decision protocol=connect host=a.test port=443 decision=allow rule="a\qb"'; } >"$T/esc.log"
badlog "a bad escape" "$T/esc.log" 2 "bad escape"
{ head -n 5 "$T/text.log"; python3 -c 'print("event=decision protocol=connect host=a.test port=443 reason=" + "x" * 70000)'; tail -n 2 "$T/text.log"; } >"$T/huge.log"
badlog "a huge line" "$T/huge.log" 6 "longer than 65536 bytes"
{ head -n 1 "$T/text.log"; echo 'event=decision protocol=gopher host=a.test port=70 decision=allow'; } >"$T/proto.log"
badlog "an unknown protocol" "$T/proto.log" 2 "unknown protocol"
{ echo 'event=decision protocol=connect host=a..test port=443 decision=allow'; } >"$T/host.log"
badlog "a bad host" "$T/host.log" 1 ""
{ echo 'event=decision protocol=connect host=a.test port=65536 decision=allow'; } >"$T/port.log"
badlog "a bad port" "$T/port.log" 1 "port"
printf 'event=decision protocol=connect host=a.test\x00 port=443 decision=allow\n' >"$T/nul.log"
badlog "a NUL byte" "$T/nul.log" 1 ""
out=$("$SLUICE" check --settings "$T/strict.json" --replay "$T/missing.log" 2>&1)
rc=$?
[ "$rc" = 2 ] && grep -q "missing.log: cannot open" <<<"$out" && ok "a missing log: exit 2" ||
    bad "a missing log: exit 2" "exit $rc: $out"

e2e_finish
