#!/usr/bin/env bash
# Fails when sluice's own C code calls a banned function (style.md R15).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
pattern='\b(strcpy|strcat|sprintf|vsprintf|gets|strtok|atoi|atol|strncpy|alloca)[[:space:]]*\('
if grep -rnE "$pattern" --include='*.c' --include='*.h' policy bridge proxy socks sandbox cli common tests 2>/dev/null \
    | grep -v '^\s*//' ; then
    echo "banned function used (see style.md R15)" >&2
    exit 1
fi
echo "no banned functions"
