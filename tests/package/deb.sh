#!/usr/bin/env bash
# tests/package/deb.sh - the Debian package: scripts/package.sh builds it;
# its file list and metadata are what an operator needs; lintian reports no
# error; the binary unpacked from it (dpkg -x) tests the shipped settings.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
for t in dpkg-deb lintian; do
    command -v $t >/dev/null || { echo "SKIP: $t missing (scripts/deps.sh installs it)"; exit 77; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

deb=$(bash "$top/scripts/package.sh" "$tmp/out" 2>"$tmp/package.log") ||
    { cat "$tmp/package.log" >&2; fail "scripts/package.sh failed"; }
[ -f "$deb" ] || fail "no .deb from scripts/package.sh (got '$deb')"
echo "built $deb"

# metadata
version=$(sed -n 's/^project(sluice VERSION \([0-9.]*\).*/\1/p' "$top/CMakeLists.txt")
[ "$(dpkg-deb -f "$deb" Package)" = sluice ] || fail "Package is not sluice"
[ "$(dpkg-deb -f "$deb" Version)" = "$version" ] || fail "Version is not $version"
[ "$(dpkg-deb -f "$deb" Architecture)" = "$(dpkg --print-architecture)" ] || fail "Architecture"
depends=$(dpkg-deb -f "$deb" Depends)
for lib in bubblewrap libc6 libuv1 libc-ares2 libjansson4 libseccomp2 libidn2-0 libpsl5; do
    grep -qE "(^|, )$lib( |,|$)" <<<"$depends" || fail "Depends lacks $lib: $depends"
done
dpkg-deb -I "$deb" conffiles | grep -qx /etc/sluice/settings.json || fail "conffile /etc/sluice/settings.json"

# file list
dpkg-deb -c "$deb" | awk '{ print $NF }' | sed 's|^\./|/|' >"$tmp/files"
for f in /usr/bin/sluice /usr/libexec/sluice/sluice-inner /etc/sluice/settings.json \
         /usr/share/sluice/settings.json /usr/share/sluice/settings.schema.json \
         /usr/share/sluice/profiles/default.json /usr/share/sluice/profiles/workdir.json \
         /usr/share/sluice/profiles/strict-home.json \
         /usr/share/bash-completion/completions/sluice \
         /usr/lib/systemd/system/sluice-proxy.service /usr/lib/systemd/system/sluice-proxy.socket \
         /usr/lib/systemd/system/sluice-proxy-socks.socket \
         /usr/lib/systemd/system/sluice-proxy-admin.socket \
         /usr/share/doc/sluice/copyright /usr/share/doc/sluice/changelog.gz \
         /usr/share/man/man5/sluice-settings.5.gz; do
    grep -qx "$f" "$tmp/files" || fail "package lacks $f"
done
# lintian: no errors (warnings are listed, not fatal)
lintian --tag-display-limit 0 "$deb" >"$tmp/lintian" 2>&1 || true
cat "$tmp/lintian"
if grep -q '^E:' "$tmp/lintian"; then fail "lintian reports errors"; fi

# the unpacked binary runs and tests the shipped settings
dpkg-deb -x "$deb" "$tmp/root"
bin="$tmp/root/usr/bin/sluice"
"$bin" version | grep -q "$version" || fail "unpacked sluice does not print its version"
for s in "$tmp/root/etc/sluice/settings.json" "$tmp/root/usr/share/sluice/settings.json" \
         "$tmp/root/usr/share/sluice/profiles/"*.json; do
    out=$("$bin" check --settings "$s") || fail "sluice check --settings $s: exit $?: $out"
    [ "$(wc -l <<<"$out")" -eq 1 ] || fail "sluice check --settings $s: not one line: $out"
    echo "check $(basename "$s"): $out"
done
"$bin" check --settings "$tmp/root/etc/sluice/settings.json" github.com | grep -q allow ||
    fail "the shipped settings do not allow github.com"
# a man page for the binary and for every subcommand its help lists
for c in "" $("$bin" help | awk '/^commands:/{on=1; next} on && !NF {exit} on {print $1}' |
              grep -vx -e help -e version || true); do
    f=/usr/share/man/man1/sluice${c:+-$c}.1.gz
    grep -qx "$f" "$tmp/files" || fail "package lacks $f"
done
[ "$(grep -c '^/usr/share/man/man1/sluice.*\.1\.gz$' "$tmp/files")" -ge 7 ] || fail "man1 pages missing"

# every man page renders
for m in "$tmp"/root/usr/share/man/man*/*.gz; do
    zcat "$m" | mandoc -T lint -W warning || fail "mandoc: $m"
done
echo "PASS: $(wc -l <"$tmp/files") paths, Depends: $depends"
