#!/usr/bin/env bash
# Install what sluice needs to build and test, from Debian 12 packages only.
# As root: runs apt-get. Otherwise: prints the exact apt-get line and stops.
set -euo pipefail

pkgs=(
    build-essential cmake pkg-config
    libuv1-dev libc-ares-dev node-llhttp libjansson-dev libseccomp-dev
    libidn2-dev libpsl-dev publicsuffix libcmocka-dev libssl-dev
    bubblewrap curl dnsmasq-base socat netcat-openbsd python3 openssl tinyproxy microsocks
    clang libclang-rt-14-dev valgrind
    dpkg-dev file fakeroot lintian mandoc bash-completion yamllint prometheus systemd
    squid
)
# libssl-dev: OpenSSL 3 for TLS termination (tls/: the ClientHello callback
# that pauses a handshake for a leaf minted off the loop, the X.509 API for
# the CA and leaves, upstream verification); only tls/ includes its headers.
# squid: tests/e2e/parent_squid.sh checks network.parentProxy against a real
# corporate proxy with Debian's shipped configuration (in a private network
# namespace; the package's service is not what the test runs).
# Packaging and operability tests (tests/package/): dpkg-dev and file for
# CPack's dpkg-shlibdeps, lintian, mandoc (man page lint), bash-completion,
# yamllint, prometheus (promtool check metrics), systemd (systemd-analyze).
# kubectl comes from Debian's kubernetes-client unless one is already
# installed (another kubectl package owns /usr/bin/kubectl and would conflict).
if ! command -v kubectl >/dev/null 2>&1; then
    pkgs+=(kubernetes-client)
fi
# clang builds the ASan+UBSan suite and the libFuzzer harnesses (its fuzzer
# runtime is libclang-rt-14-dev); valgrind runs tests/valgrind.sh.

missing=()
for p in "${pkgs[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$p")
    fi
done

if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi

line="apt-get update && apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
    echo "sluice: missing packages: ${missing[*]}" >&2
    echo "sluice: run as root:  $line" >&2
    exit 1
fi

echo "sluice: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# squid's package starts its service on 127.0.0.1:3128 (and [::]:3128), the
# port `sluice proxy` listens on in the README; the tests run squid on their
# own, so a squid this script installed is stopped and not started at boot
# (one that was installed before is left alone)
for p in "${missing[@]}"; do
    if [ "$p" = squid ] && command -v systemctl >/dev/null 2>&1; then
        systemctl disable --now squid >/dev/null 2>&1 || true
    fi
done
