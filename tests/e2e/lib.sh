# tests/e2e/lib.sh - sourced by the end-to-end scripts: a private temporary
# directory in $T (user settings kept out of the way), TAP-style ok/bad
# reporting and the closing "N passed, M failed" line.
T=$(mktemp -d /tmp/sluice-e2e.XXXXXX) || exit 2
export HOME="$T/home" XDG_CONFIG_HOME="$T/home/.config"
unset SLUICE_SETTINGS
mkdir -p "$HOME"

pass=0 fail=0
ok()  { pass=$((pass + 1)); echo "ok - $1"; }
bad() { fail=$((fail + 1)); echo "not ok - $1"; [ -n "${2:-}" ] && printf '%s\n' "$2" | sed 's/^/#   /'; }

# Prints the summary and returns non-zero when anything failed.
e2e_finish() {
    echo "$pass passed, $fail failed"
    [ "$fail" -eq 0 ]
}
