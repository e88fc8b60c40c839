#!/usr/bin/env bash
# Build sluice and run the whole test suite; prints ctest's summary.
#   scripts/test.sh              normal build (build/)
#   scripts/test.sh --sanitize   ASan + UBSan build (build-asan/), leak detection on
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
bash "$top/scripts/build.sh" "$@"
dir="$top/build"
if [ "${1:-}" = "--sanitize" ]; then
    dir="$top/build-asan"
    export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
fi
cd "$dir"
ctest --output-on-failure -j "$(nproc)"
