#!/usr/bin/env bash
# tests/package/man.sh SLUICE - the man pages: mandoc lint clean at warning
# level, sluice-settings(5) regenerated from the schema matches the committed
# page, and each subcommand's page names every option its --help has and no
# option it lacks.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
bin=$1
command -v mandoc >/dev/null || { echo "SKIP: mandoc missing (scripts/deps.sh installs it)"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }
man=$top/conf/man

for p in "$man"/*.[1-8]; do
    mandoc -T lint -W warning "$p" || fail "mandoc lint: $p"
done
python3 "$man/gen-settings.py" "$top/conf/settings.schema.json" | diff -u "$man/sluice-settings.5" - ||
    fail "conf/man/sluice-settings.5 is stale: run conf/man/gen-settings.py (see its header)"
# every key the loader accepts is in the page
grep -q 'Ic proxy.limits.maxConnections' "$man/sluice-settings.5" || fail "settings page lacks keys"

opts_help() { "$bin" help "$1" | grep -oE -- '--[a-z][a-z0-9-]+' | sort -u; }
opts_page() { mandoc -T ascii "$man/sluice-$1.1" | col -b | grep -oE -- '--[a-z][a-z0-9-]+' | sort -u; }
cmds=$("$bin" help | awk '/^commands:/{on=1; next} on && !NF {exit} on {print $1}' | grep -vx -e help -e version)
[ -n "$cmds" ] || fail "no commands in 'sluice help'"
for c in $cmds; do
    [ -f "$man/sluice-$c.1" ] || fail "no man page for '$c'"
    missing=$(comm -23 <(opts_help "$c") <(opts_page "$c"))
    [ -z "$missing" ] || fail "sluice-$c.1 lacks $(echo $missing)"
    extra=$(comm -13 <(opts_help "$c") <(opts_page "$c"))
    [ -z "$extra" ] || fail "sluice-$c.1 names options 'sluice $c --help' lacks: $(echo $extra)"
    grep -q '^\.Sh EXIT STATUS' "$man/sluice-$c.1" || fail "sluice-$c.1 has no EXIT STATUS"
done
echo "PASS: $(ls "$man"/*.[1-8] | wc -l) pages"
