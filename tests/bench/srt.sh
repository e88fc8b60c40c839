#!/usr/bin/env bash
# tests/bench/srt.sh - installs the reference runtime, srt 0.0.83
# (@anthropic-ai/sandbox-runtime on the npm registry), for the benchmarks
# that compare with it side by side (run.sh's `srt -c true`, tls.sh's
# srt lane). Not a dependency of sluice and not used by the test suite.
#
#   bash tests/bench/srt.sh [PREFIX]      (default: /opt/srt-0.0.83)
#   export PATH=PREFIX/node_modules/.bin:$PATH
#
# srt needs node and npm (its package asks for node >= 22.12; the lanes
# here run on Debian's machine node 20 as well), and at run time ripgrep
# and socat, which it checks for before every command: as root this
# installs them from Debian, otherwise it prints the apt-get line.
set -euo pipefail
PREFIX=${1:-/opt/srt-0.0.83}
VERSION=0.0.83

for t in node npm; do
    command -v "$t" >/dev/null || { echo "srt.sh: $t is not installed" >&2; exit 2; }
done
missing=()
for p in ripgrep socat; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "srt.sh: srt needs: sudo apt-get install -y ${missing[*]}" >&2
        exit 2
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null
fi
mkdir -p "$PREFIX"
npm install --prefix "$PREFIX" --no-audit --no-fund --loglevel=error \
    "@anthropic-ai/sandbox-runtime@$VERSION" >/dev/null
got=$("$PREFIX/node_modules/.bin/srt" --version)
[ "$got" = "$VERSION" ] || { echo "srt.sh: installed srt says '$got', not $VERSION" >&2; exit 2; }
echo "srt $got in $PREFIX; use it with:"
echo "  export PATH=$PREFIX/node_modules/.bin:\$PATH"
