#!/usr/bin/env bash
# tests/package/config_test.sh SLUICE - `sluice check --settings F` with no
# target: one summary line and exit 0 for good settings (list files
# included), the located error and exit 2 for bad ones.
set -uo pipefail
bin=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export HOME=$tmp XDG_CONFIG_HOME=$tmp/xdg
printf 'example.org\n*.example.net # a comment\n\n10.0.0.0/8:443\n' >"$tmp/allow.txt"
cat >"$tmp/good.json" <<'J'
{"network": {"allowedDomains": ["github.com", "*.github.com", "203.0.113.7:443"],
             "allowedDomainsFiles": ["allow.txt"],
             "deniedDomains": ["*:22", "gist.github.com"], "mode": "report",
             "strictAllowlist": true}}
J
out=$("$bin" check --settings "$tmp/good.json") || fail "exit $? for good settings: $out"
echo "$out"
[ "$(wc -l <<<"$out")" -eq 1 ] || fail "not one line"
for want in "ok:" "allow 6 (2 names, 2 wildcards, 2 addresses)" "deny 2 (1 names, 0 wildcards, 0 addresses, 1 any)" \
            "1 list files" "mode report" "unmatched denied (strictAllowlist)" "listeners http tcp:127.0.0.1:3128"; do
    grep -qF "$want" <<<"$out" || fail "summary lacks '$want'"
done
# bad: a bad pattern in a list file, a missing list file, a typo in a key, JSON
printf 'ok.example\n*.com\n' >"$tmp/bad.txt"
echo '{"network": {"deniedDomainsFiles": ["bad.txt"]}}' >"$tmp/bad1.json"
echo '{"network": {"allowedDomainsFiles": ["missing.txt"]}}' >"$tmp/bad2.json"
echo '{"network": {"allowedDomain": []}}' >"$tmp/bad3.json"
echo '{"network": ' >"$tmp/bad4.json"
for f in bad1 bad2 bad3 bad4 nonexistent; do
    err=$("$bin" check --settings "$tmp/$f.json" 2>&1 >/dev/null); rc=$?
    [ $rc -eq 2 ] || fail "$f: exit $rc, wanted 2"
    grep -q "$f\|bad.txt\|missing.txt" <<<"$err" || fail "$f: error does not say where: $err"
    echo "$f -> 2: $err"
done
# no --settings and no target is still a usage error
"$bin" check >/dev/null 2>&1; [ $? -eq 2 ] || fail "'sluice check' alone must exit 2"
echo PASS
