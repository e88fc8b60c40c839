#!/usr/bin/env bash
# Fails when sluice's own C code outgrows the sizes a reader can hold
# (issue 22): a function over 120 lines (from the line of its opening brace
# in column 0 to its closing one), a C file over 1,500 lines, or a file of the
# HTTP front end (proxy/http*.c, proxy/head*.c) over 800. Tests are exempt.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
max_fn=120 max_file=1500 max_http=800
bad=0
files=()
for d in common settings policy bridge tls socks proxy sandbox run cli; do
    [ -d "$d" ] || continue
    while IFS= read -r f; do files+=("$f"); done < <(find "$d" -name '*.c' | sort)
done
for f in "${files[@]}"; do
    n=$(wc -l < "$f")
    lim=$max_file
    case $f in proxy/http*.c|proxy/head*.c) lim=$max_http ;; esac
    if [ "$n" -gt "$lim" ]; then
        echo "$f: $n lines (limit $lim)" >&2
        bad=1
    fi
done
long=$(awk -v max=$max_fn '
    FNR == 1 { s = 0 }
    /^\{/ { s = FNR; name = prev }
    /^\}/ { if (s && FNR - s + 1 > max) printf "%s:%d: %s: %d lines (limit %d)\n", FILENAME, s, name, FNR - s + 1, max; s = 0 }
    { prev = $0 }' "${files[@]}")
if [ -n "$long" ]; then
    echo "$long" >&2
    bad=1
fi
[ $bad -eq 0 ] && echo "sizes within limits (${#files[@]} files)"
exit $bad
