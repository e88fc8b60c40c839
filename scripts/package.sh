#!/usr/bin/env bash
# Build the Debian package of sluice with CPack.
#   scripts/package.sh [OUTDIR]    -> OUTDIR/sluice_VERSION_ARCH.deb (default build-pkg/)
# Configures its own build directory (build-pkg/) with the /usr prefix the
# package installs under, and without the test suite. Prints the .deb's path.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
bash "$top/scripts/deps.sh"

dir="$top/build-pkg"
out=$(mkdir -p "${1:-$dir}" && cd "${1:-$dir}" && pwd)
cmake -S "$top" -B "$dir" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
      -DSLUICE_TESTS=OFF -DSLUICE_WERROR="${SLUICE_WERROR:-OFF}" >/dev/null
cmake --build "$dir" -j "$(nproc)" >/dev/null || cmake --build "$dir" -j1
(cd "$dir" && cpack -G DEB -B "$out" >/dev/null)
rm -rf "$out/_CPack_Packages"
ls -1t "$out"/sluice_*.deb | head -n 1
