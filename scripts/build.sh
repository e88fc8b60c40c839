#!/usr/bin/env bash
# Build sluice (installing missing Debian packages first).
#   scripts/build.sh              -> build/       (release with debug info)
#   scripts/build.sh --sanitize   -> build-asan/  (ASan + UBSan)
# Set SLUICE_WERROR=ON to turn warnings into errors (CI does).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
bash "$top/scripts/deps.sh"

dir="$top/build"
opts=(-DSLUICE_WERROR="${SLUICE_WERROR:-OFF}")
if [ "${1:-}" = "--sanitize" ]; then
    dir="$top/build-asan"
    opts+=(-DSLUICE_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug)
    if command -v clang >/dev/null 2>&1; then
        opts+=(-DCMAKE_C_COMPILER=clang)
    fi
fi
cmake -S "$top" -B "$dir" "${opts[@]}" >/dev/null
cmake --build "$dir" -j "$(nproc)" >/dev/null || cmake --build "$dir" -j1
