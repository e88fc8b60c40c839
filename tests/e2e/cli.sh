#!/usr/bin/env bash
# End-to-end tests of the command lines: one getopt_long parser in every
# subcommand (--opt=value and --opt value), -V/--version with the commit,
# exit codes in every --help, `sluice run` stopping at the first non-option,
# srt's flags (-s, -c, -d / SRT_DEBUG, --control-fd) and the binary called
# as `srt`. Only loopback listeners on port 0.
set -uo pipefail
SLUICE=${1:?usage: cli.sh PATH/TO/sluice}
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# expect_run NAME WANT_STATUS WANT_REGEX CMD... : status and stdout+stderr.
expect_run() {
    local name=$1 want=$2 re=$3; shift 3
    local out st
    out=$("$@" 2>&1); st=$?
    if [ "$st" -ne "$want" ]; then bad "$name (exit $st, want $want)" "$out"; return; fi
    if ! grep -qE -- "$re" <<< "$out"; then bad "$name (output)" "$out"; return; fi
    ok "$name"
}

echo '{"network": {"allowedDomains": ["example.com"]}}' > "$T/s.json"
echo '{"sandbox": {"enabled": false}}' > "$T/off.json"

# version
expect_run "-V prints version and commit" 0 '^sluice [0-9]+\.[0-9]+\.[0-9]+ \(commit ([0-9a-f]{7,}|unknown)\)$' "$SLUICE" -V
expect_run "--version" 0 '^sluice .*\(commit ' "$SLUICE" --version
for c in run proxy check explain bridge connect; do
    expect_run "$c -V" 0 '^sluice .*\(commit ' "$SLUICE" "$c" -V
    expect_run "$c --help lists exit codes" 0 '[Ee]xit status' "$SLUICE" "$c" --help
done

# -s FILE, the short --settings, for every subcommand that reads settings (issue 21)
expect_run "check -s F" 0 'allow' "$SLUICE" check -s "$T/s.json" example.com
expect_run "check -s F (config test)" 0 'allow' "$SLUICE" check -s "$T/s.json"
expect_run "explain -s F" 0 'example\.com' "$SLUICE" explain -s "$T/s.json"
expect_run "proxy -s F reads F" 2 "$T/missing.json" "$SLUICE" proxy -s "$T/missing.json"
# --opt=value and --opt value everywhere
expect_run "check --settings=F" 0 'decision: allow|allow' "$SLUICE" check --settings="$T/s.json" example.com
expect_run "check --settings F" 0 'allow' "$SLUICE" check --settings "$T/s.json" example.com
expect_run "check option after target" 0 '"decision":"allow"' "$SLUICE" check example.com --settings="$T/s.json" --json
expect_run "explain --settings=F --json" 0 '"network"' "$SLUICE" explain --settings="$T/s.json" --json
expect_run "proxy --log-format=bad" 2 "--log-format must be 'text' or 'json', got 'bad'" "$SLUICE" proxy --settings="$T/s.json" --log-format=bad
expect_run "proxy --http= bad endpoint" 2 "--http 'nope'" "$SLUICE" proxy --http=nope
expect_run "proxy unknown option" 2 "unknown option '--bogus'" "$SLUICE" proxy --bogus=1
expect_run "proxy missing value" 2 "option '--settings' needs a value" "$SLUICE" proxy --settings
expect_run "proxy --workers=65 refused" 2 "--workers '65': a number from 1 to 64" "$SLUICE" proxy --workers=65
expect_run "proxy --workers 0 refused" 2 "--workers '0': a number from 1 to 64" "$SLUICE" proxy --workers 0
expect_run "bridge --idle=x" 2 "invalid --idle 'x'" "$SLUICE" bridge --idle=x tcp:127.0.0.1:0 tcp:127.0.0.1:1

"$SLUICE" proxy --settings="$T/s.json" --http=tcp:127.0.0.1:0 --socks=off --log="$T/p.log" \
    --log-format=json --workers=2 2>"$T/p.err" &
pid=$!
PIDS+=($pid)
for i in $(seq $((200 * SLOW))); do
    grep -q '"event":"start"' "$T/p.log" 2>/dev/null && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
done
if grep -q '"event":"start".*socks5 off.*2 workers' "$T/p.log" 2>/dev/null; then
    ok "proxy takes --opt=value for every option"
else
    bad "proxy takes --opt=value for every option" "$(cat "$T/p.log" "$T/p.err" 2>/dev/null)"
fi
kill "$pid" 2>/dev/null
wait "$pid" 2>/dev/null

# run: options end at the first non-option (getopt "+"), unsandboxed here
expect_run "run --settings=F, options stop at the command" 0 '^-s x --settings y$' \
    "$SLUICE" run --settings="$T/off.json" echo -s x --settings y
expect_run "run -s F -c STRING" 7 'running without the sandbox' "$SLUICE" run -s "$T/off.json" -c 'exit 7'
expect_run "run -c then an argument" 125 "-c takes one string" "$SLUICE" run -s "$T/off.json" -c 'true' extra
expect_run "run unknown option" 125 "unknown option '--nope' \(the command goes after --\)" "$SLUICE" run --nope true
# -c: a SHELL that cannot be run is said, not silently replaced by /bin/sh
out=$(SHELL=/nonexistent/zsh "$SLUICE" run -c 'echo hi' 2>"$T/sh.err"); st=$?
[ "$st" = 0 ] && [ "$out" = hi ] &&
    grep -q "SHELL '/nonexistent/zsh' is not an executable absolute path; running -c with /bin/sh" "$T/sh.err" &&
    ok "run -c with SHELL naming a missing shell: /bin/sh, and a warning that says so" ||
    bad "run -c with a missing SHELL" "exit $st: $out / $(cat "$T/sh.err")"
# what --control-fd does is tested in dropin.sh; a descriptor that is not open fails closed
expect_run "run --control-fd N not open" 125 "--control-fd 9: cannot read it" "$SLUICE" run --control-fd 9 true 9<&-
expect_run "run --control-fd=1 invalid" 125 "--control-fd '1': must be a descriptor number >= 3" "$SLUICE" run --control-fd=1 true

# called as srt
mkdir -p "$T/bin"
ln -s "$(readlink -f "$SLUICE")" "$T/bin/srt"
expect_run "srt -V" 0 '^sluice .*\(commit ' "$T/bin/srt" -V
expect_run "srt -s F CMD == sluice run -s F CMD" 0 '^hello -d$' "$T/bin/srt" -s "$T/off.json" echo hello -d
expect_run "srt --help is run's" 0 'usage: sluice run' "$T/bin/srt" --help

# -d / SRT_DEBUG: [SandboxDebug] lines, only when asked (needs the sandbox)
if "$SLUICE" run -s "$T/s.json" true 2>"$T/nodebug.err"; then
    if grep -q 'SandboxDebug' "$T/nodebug.err"; then
        bad "no debug lines without -d" "$(cat "$T/nodebug.err")"
    else
        ok "no debug lines without -d"
    fi
    expect_run "run -d" 0 '^\[SandboxDebug\] bwrap ' "$SLUICE" run -d -s "$T/s.json" true
    expect_run "SRT_DEBUG=1" 0 '^\[SandboxDebug\] sandbox up' env SRT_DEBUG=1 "$SLUICE" run -s "$T/s.json" true
    expect_run "srt -d" 0 '^\[SandboxDebug\] ' "$T/bin/srt" -d -s "$T/s.json" true
    # the front ends log their phase transitions at debug level (a CONNECT
    # no rule allows: its head, then its verdict)
    expect_run "run -d: the HTTP front end's transitions" 0 '^\[SandboxDebug\] conn 1 connect: HEAD -> EGRESS$' \
        "$SLUICE" run -d -s "$T/s.json" -c 'curl -s -o /dev/null --noproxy "" -x "$HTTP_PROXY" https://denied.test/; true'
else
    echo "# skip: the sandbox cannot start here ($(head -1 "$T/nodebug.err"))"
fi

e2e_finish
