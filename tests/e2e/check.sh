#!/usr/bin/env bash
# End-to-end tests of `sluice check`: the real binary, real settings files,
# real DNS answers from a dnsmasq started here on 127.0.0.1 (never any other
# address: the records below are only answers, no traffic goes to them).
set -uo pipefail
SLUICE=${1:?usage: check.sh PATH/TO/sluice}
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
DNSMASQ_PID=
cleanup() {
    [ -n "$DNSMASQ_PID" ] && kill "$DNSMASQ_PID" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT

# expect_run NAME WANT_STATUS WANT_REGEX CMD... : runs CMD, checks status and
# that stdout+stderr match the (grep -E) regex.
expect_run() {
    local name=$1 want=$2 re=$3; shift 3
    local out st
    out=$("$@" 2>&1); st=$?
    if [ "$st" -ne "$want" ]; then bad "$name (exit $st, want $want)" "$out"; return; fi
    if ! grep -qE -- "$re" <<< "$out"; then bad "$name (output)" "$out"; return; fi
    ok "$name"
}

# The tables live in tests/data/check (tests/e2e/verdict.sh runs them through
# the live proxy as well).
DATA=$(cd "$(dirname "${BASH_SOURCE[0]}")/../data/check" && pwd) || exit 2
cp "$DATA/basic.json" "$T/s.json"
S=(--settings "$T/s.json")

expect_run "allow exact, json"  0 '^\{"target":"github.com","host":"github.com","port":443,"decision":"allow","rule":"github.com","source":"[^"]*s.json:3"' "$SLUICE" check "${S[@]}" --json github.com
expect_run "apex not covered by wildcard" 0 '"decision":"ask"' "$SLUICE" check "${S[@]}" --json npmjs.org
expect_run "wildcard subdomain" 0 '"decision":"allow","rule":"\*.npmjs.org"' "$SLUICE" check "${S[@]}" --json a.b.npmjs.org
expect_run "deny beats allow" 0 '"decision":"deny","rule":"evil.npmjs.org"' "$SLUICE" check "${S[@]}" --json evil.npmjs.org
expect_run "port-limited deny with reason" 0 '"decision":"deny","rule":"\*:22".*"reason":"SSH is blocked"' "$SLUICE" check "${S[@]}" --json github.com:22
expect_run "port-limited allow other port" 0 '"decision":"ask"' "$SLUICE" check "${S[@]}" --json api.example.com:443
expect_run "port-limited allow" 0 '"decision":"allow"' "$SLUICE" check "${S[@]}" --json api.example.com:8443
expect_run "label boundary" 0 '"decision":"ask"' "$SLUICE" check "${S[@]}" --json badgithub.com github.com.evil.net
expect_run "decimal IPv4 spelling is loopback" 0 '"host":"127.0.0.1","port":443,"decision":"deny"' "$SLUICE" check "${S[@]}" --json 2130706433
expect_run "hex/short IPv4 spellings" 0 '"target":"0x7f.1","host":"127.0.0.1"' "$SLUICE" check "${S[@]}" --json 0x7f.1
expect_run "allowed loopback port" 0 '"host":"127.0.0.1","port":3000,"decision":"allow"' "$SLUICE" check "${S[@]}" --json 127.1:3000
expect_run "metadata denied without asking" 0 '"decision":"deny".*metadata' "$SLUICE" check "${S[@]}" --json 169.254.169.254:80
expect_run "mapped v6 judged as v4" 0 '"host":"169.254.169.254".*"decision":"deny"' "$SLUICE" check "${S[@]}" --json '[::ffff:169.254.169.254]:80'
expect_run "v6 CIDR allow" 0 '"host":"2001:db8::1","port":443,"decision":"allow"' "$SLUICE" check "${S[@]}" --json '[2001:DB8:0::1]'
expect_run "IP deny rule" 0 '"decision":"deny","rule":"198.51.100.7"' "$SLUICE" check "${S[@]}" --json 198.51.100.7
expect_run "IDNA canonical" 0 '"host":"xn--bcher-kva.example"' "$SLUICE" check "${S[@]}" --json 'BÜCHER.example.'
expect_run "text output names rule and source" 0 '^allow github.com:443  rule .github.com. \(network.allowedDomains\[0\], .*s.json:3\)' "$SLUICE" check "${S[@]}" github.com
expect_run "bad target exits 2" 2 "invalid target 'a..b'" "$SLUICE" check "${S[@]}" a..b
expect_run "bad port exits 2" 2 "invalid port" "$SLUICE" check "${S[@]}" github.com:0
expect_run "NUL-free control chars refused" 2 "control character" "$SLUICE" check "${S[@]}" "$(printf 'a\tb.com')"
expect_run "zone id refused" 2 "zone" "$SLUICE" check "${S[@]}" '[fe80::1%25eth0]'
expect_run "options after targets" 0 '^allow github.com:443' "$SLUICE" check github.com "${S[@]}"
expect_run "label starting with '-' refused" 2 "starts with '-'" "$SLUICE" check "${S[@]}" -- -x.com
expect_run "unknown option refused" 2 "unknown option '--jsn'" "$SLUICE" check "${S[@]}" --jsn github.com
# --settings without a target is the config test (issue 16): one summary line, exit 0;
# with neither, it is still a usage error
expect_run "--settings without targets: config test" 0 ': ok: [0-9]+ rules: allow' "$SLUICE" check "${S[@]}"
expect_run "no targets" 2 "no targets given" env -u SLUICE_SETTINGS "$SLUICE" check

# udp: rules (issue 26): only a udp: rule opens UDP, a plain deny rule denies it too
cat > "$T/u.json" <<'EOF2'
{"network": {"allowedDomains": ["github.com", "udp:dns.example:53", "udp:*.quic.example:*"],
 "deniedDomains": ["bad.quic.example", "udp:no.quic.example"]}}
EOF2
U=(--settings "$T/u.json")
expect_run "udp allowed by a udp: rule" 0 '^allow udp:dns.example:53  rule .udp:dns.example:53. \(network.allowedDomains\[1\]' "$SLUICE" check "${U[@]}" udp:dns.example:53
expect_run "udp: rule does not open tcp" 0 '^ask   dns.example:53' "$SLUICE" check "${U[@]}" dns.example:53
expect_run "tcp rule does not open udp" 0 '"transport":"udp","decision":"deny","rule":null,"source":null,"reason":"no udp: rule allows UDP to github.com:443"' "$SLUICE" check "${U[@]}" --json udp:github.com:443
expect_run "plain deny rule denies udp" 0 '^deny  udp:bad.quic.example:443  rule .bad.quic.example.' "$SLUICE" check "${U[@]}" udp:bad.quic.example:443
expect_run "udp: deny rule leaves tcp" 0 '^ask   no.quic.example:443' "$SLUICE" check "${U[@]}" no.quic.example:443
expect_run "udp target needs a port" 2 'a udp: target names its port' "$SLUICE" check "${U[@]}" udp:dns.example
printf 'allow udp:a.quic.example:443\ndeny udp:no.quic.example:443\ndeny udp:github.com:443\nallow github.com\n' > "$T/u.expect"
expect_run "udp targets in --expect" 0 '^4 passed, 0 failed$' "$SLUICE" check "${U[@]}" --expect "$T/u.expect"
expect_run "config test counts udp: rules apart" 0 'allow 3 \(2 names, 1 wildcards, 0 addresses; 2 udp\), deny 2 \(2 names, 0 wildcards, 0 addresses, 0 any; 1 udp\)' "$SLUICE" check "${U[@]}"
printf '{"network": {"allowedDomains": [\n  "udp:dns.example"]}}' > "$T/ubad.json"
expect_run "udp: rule without a port refused, located" 2 'ubad.json:2:3: network.allowedDomains\[0\]: .udp:dns.example.: a udp: rule names its port' "$SLUICE" check --settings "$T/ubad.json"

# Settings errors: FILE:LINE:COLUMN: key.path: message, exit 2.
cat > "$T/typo.json" <<'JSON'
{
  "network": {
    "allowedDomain": ["github.com"]
  }
}
JSON
expect_run "misspelled key located" 2 "typo.json:3:5: network.allowedDomain: unknown key" "$SLUICE" check --settings "$T/typo.json" github.com
printf '{"network": {"allowedDomains": ["ok.com", "*.com"]}}' > "$T/psl.json"
expect_run "public-suffix wildcard refused" 2 'psl.json:1:43: network.allowedDomains\[1\]' "$SLUICE" check --settings "$T/psl.json" github.com
printf '{"network": {"allowedDomains": "github.com"}}' > "$T/type.json"
expect_run "wrong type refused" 2 'type.json:1:[0-9]+: network.allowedDomains' "$SLUICE" check --settings "$T/type.json" github.com
printf '{"network": {"filterRequest": {}}}' > "$T/filter.json"
expect_run "unsupported key refused" 2 'network.filterRequest' "$SLUICE" check --settings "$T/filter.json" github.com
printf '{"network": {"mitmProxy": {"socketPath": "/x", "domains": ["a.example"]}, "tlsTerminate": {}}}' > "$T/mitm.json"
expect_run "mitmProxy beside tlsTerminate refused" 2 'mitm.json:1:14: network.mitmProxy: cannot be combined with network.tlsTerminate \(.*mitm.json:1:[0-9]+\)' "$SLUICE" check --settings "$T/mitm.json" github.com
expect_run "missing settings file" 2 'nope.json' "$SLUICE" check --settings "$T/nope.json" github.com
SLUICE_SETTINGS="$T/s.json" expect_run "SLUICE_SETTINGS honoured" 0 '"decision":"allow"' "$SLUICE" check --json github.com

# The reference runtime's settings file, used unchanged.
cat > "$T/srt.json" <<'JSON'
{
  "network": {
    "allowedDomains": ["github.com", "*.github.com", "lfs.github.com", "api.github.com", "npmjs.org", "*.npmjs.org"],
    "deniedDomains": ["malicious.com"],
    "allowUnixSockets": ["/var/run/docker.sock"],
    "allowLocalBinding": false
  },
  "filesystem": {
    "denyRead": ["~/.ssh"],
    "allowWrite": [".", "src/", "test/", "/tmp"],
    "denyWrite": [".env", "config/production.json"]
  },
  "ignoreViolations": {"*": ["/usr/bin", "/System"], "git push": ["/usr/bin/nc"]},
  "enableWeakerNestedSandbox": false
}
JSON
expect_run "srt settings file unchanged" 0 '"decision":"deny","rule":"malicious.com"' "$SLUICE" check --settings "$T/srt.json" --json malicious.com
expect_run "strictAllowlist denies unmatched" 0 '"decision":"deny"' \
    "$SLUICE" check --settings <(printf '{"network":{"allowedDomains":["a.com"],"strictAllowlist":true}}') --json b.com

# --expect
cp "$DATA/basic.expect" "$T/expect.txt"
expect_run "expect all pass" 0 '^7 passed, 0 failed$' "$SLUICE" check "${S[@]}" --expect "$T/expect.txt"
printf 'allow example.org\ndeny github.com\nallow github.com\n' > "$T/expect2.txt"
expect_run "expect mismatches" 1 'expect2.txt:1: expected allow example.org:443, got ask' "$SLUICE" check "${S[@]}" --expect "$T/expect2.txt"
expect_run "expect summary" 1 '^1 passed, 2 failed$' "$SLUICE" check "${S[@]}" --expect "$T/expect2.txt"
printf 'maybe github.com\n' > "$T/expect3.txt"
expect_run "malformed expectation" 2 'expect3.txt:1: expected' "$SLUICE" check "${S[@]}" --expect "$T/expect3.txt"

# --resolve against a local dnsmasq.
if ! command -v dnsmasq >/dev/null 2>&1 && [ ! -x /usr/sbin/dnsmasq ]; then
    bad "dnsmasq is not installed (scripts/deps.sh installs dnsmasq-base)"
else
    DNSMASQ=$(command -v dnsmasq || echo /usr/sbin/dnsmasq)
    mapfile -t RECORDS < <(grep -v '^#' "$DATA/resolve.records")
    for try in 1 2 3 4 5 6 7 8; do
        PORT=$((20000 + RANDOM % 40000))
        "$DNSMASQ" --no-daemon --no-resolv --no-hosts --bind-interfaces --listen-address=127.0.0.1 \
            --port="$PORT" --log-queries --log-facility="$T/dnsmasq.log" \
            "${RECORDS[@]}" 2>"$T/dnsmasq.err" &
        DNSMASQ_PID=$!
        dnsmasq_started "$DNSMASQ_PID" && break # lib.sh: logged its start
        kill "$DNSMASQ_PID" 2>/dev/null
        DNSMASQ_PID=
    done
    if [ -z "$DNSMASQ_PID" ]; then
        bad "dnsmasq did not start" "$(cat "$T/dnsmasq.err")"
    else
        sed "s/@DNS@/127.0.0.1:$PORT/" "$DATA/resolve.json" > "$T/r.json"
        R=(--settings "$T/r.json" --resolve --json)
        expect_run "resolve public allowed" 0 '"decision":"allow".*"addresses":\[\{"address":"93.184.216.34","class":"public","allowed":true' "$SLUICE" check "${R[@]}" pub.npmjs.org
        expect_run "resolve metadata refused by guard" 0 '"decision":"deny".*"class":"metadata","allowed":false' "$SLUICE" check "${R[@]}" meta.npmjs.org
        expect_run "resolve loopback refused" 0 '"decision":"deny".*"class":"loopback"' "$SLUICE" check "${R[@]}" loop.npmjs.org
        expect_run "resolve mixed keeps public only" 0 '"decision":"allow".*"10.0.0.1","class":"private","allowed":false.*"93.184.216.35","class":"public","allowed":true' "$SLUICE" check "${R[@]}" mixed.npmjs.org
        expect_run "resolve v6 documentation refused" 0 '"decision":"deny".*"2001:db8::10","class":"reserved"' "$SLUICE" check "${R[@]}" v6.npmjs.org
        expect_run "resolve NXDOMAIN denies" 0 '"decision":"deny".*NXDOMAIN' "$SLUICE" check "${R[@]}" nx.npmjs.org
        expect_run "resolve localhost to loopback allowed" 0 '"decision":"allow".*"127.0.0.1","class":"loopback","allowed":true' "$SLUICE" check "${R[@]}" localhost
        expect_run "denied name never resolved" 0 '"decision":"deny","rule":"bad.npmjs.org"' "$SLUICE" check "${R[@]}" bad.npmjs.org
        expect_run "resolve text output" 0 '93.184.216.34 +public +allowed' "$SLUICE" check --settings "$T/r.json" --resolve pub.npmjs.org
        expect_run "expect with resolve" 0 '^10 passed, 0 failed$' "$SLUICE" check --settings "$T/r.json" --resolve --expect "$DATA/resolve.expect"
        if ! grep -q 'query\[A\] pub.npmjs.org' "$T/dnsmasq.log" 2>/dev/null; then
            bad "dnsmasq query log missing (cannot prove the next check)" "$(cat "$T/dnsmasq.log" 2>/dev/null)"
        elif grep -q 'bad.npmjs.org' "$T/dnsmasq.log"; then
            bad "a denied name was sent to DNS"
        else
            ok "a denied name was never sent to DNS"
        fi
    fi
fi

e2e_finish
