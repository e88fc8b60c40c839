#!/usr/bin/env bash
# tests/package/systemd.sh SLUICE - systemd-analyze verify on the shipped
# units (ExecStart pointed at the built binary), with no complaint at all:
# verify exits 0 on unknown keys and bad values, so any output fails.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
command -v systemd-analyze >/dev/null || { echo "SKIP: no systemd-analyze"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
for u in "$top"/conf/systemd/*; do
    sed "s|/usr/bin/sluice|$bin|g" "$u" >"$tmp/$(basename "$u")"
    n=$((n + 1))
done
out=$(cd "$tmp" && SYSTEMD_LOG_LEVEL=notice systemd-analyze verify --man=no ./*.service ./*.socket 2>&1) ||
    { echo "$out"; echo "FAIL: systemd-analyze verify"; exit 1; }
if [ -n "$out" ]; then echo "$out"; echo "FAIL: systemd-analyze verify complained"; exit 1; fi
# the sandboxing stays tight: systemd's own exposure score, 0 (best) to 10
sec=$(cd "$tmp" && systemd-analyze security --offline=true --threshold=20 ./sluice-proxy.service 2>&1) ||
    { echo "$sec" | grep -E '✗|Overall'; echo "FAIL: exposure above 2.0"; exit 1; }
echo "$sec" | grep Overall
grep -q '^Type=notify' "$tmp/sluice-proxy.service"
grep -q '^WatchdogSec=' "$tmp/sluice-proxy.service"
for name in http socks admin; do
    grep -lq "^FileDescriptorName=$name\$" "$tmp"/*.socket || { echo "FAIL: no socket named $name"; exit 1; }
    grep -q -- "fd:$name" "$tmp/sluice-proxy.service" || { echo "FAIL: service does not use fd:$name"; exit 1; }
done
echo "PASS: $n units"
