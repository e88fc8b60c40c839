#!/usr/bin/env bash
# tests/fuzz/seed.sh [CORPUS_DIR] - regenerates the seed inputs of the fuzz
# corpora (default: tests/fuzz/corpus), so their provenance is reproducible:
#   cap-*    real traffic: what curl sends to an HTTP or SOCKS proxy (plain,
#            POST, chunked upload, HEAD, CONNECT with a TLS ClientHello,
#            --proxytunnel, Basic auth, IPv6 literals, SOCKS5 with and without
#            credentials, SOCKS4), recorded by recorder.py on 127.0.0.1, and
#            the response heads of a real HTTP server (python3 -m http.server
#            on 127.0.0.1);
#   table-*, e2e-*, file-*: seed_tables.py (the unit tables, the e2e raw byte
#            strings, the settings files of the repository).
# Only 127.0.0.1 is contacted: every curl goes through the recorder as its
# proxy, and targets are names curl never resolves (through an HTTP proxy or
# socks5h) or IP literals. Files are overwritten, never deleted; the fuzzers'
# own finds (hash-named) are left alone.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
OUT=${1:-$HERE/corpus}
T=$(mktemp -d /tmp/sluice-seed.XXXXXX)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$T"
}
trap cleanup EXIT

mkdir -p "$OUT"/{http_head,socks5,rules,settings,endpoint}
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY all_proxy no_proxy NO_PROXY

wait_file() { # FILE: up to 10 s
    for _ in $(seq 100); do [ -s "$1" ] && return 0; sleep 0.1; done
    return 1
}

python3 "$HERE/recorder.py" "$T/port" "$T/rec" 1.0 &
PIDS+=($!)
wait_file "$T/port" || { echo "seed.sh: recorder did not start" >&2; exit 1; }
RP=$(cat "$T/port")
n=0
ncap=0

# cap KIND NAME CURL-ARGS...: runs curl against the recorder, files what it sent
cap() {
    local kind=$1 name=$2
    shift 2
    n=$((n + 1))
    curl -sS --max-time 5 -o /dev/null "$@" >/dev/null 2>&1 || true
    local f
    f=$(printf '%s/rec/conn-%03d.bin' "$T" "$n")
    if wait_file "$f"; then
        cp "$f" "$OUT/$kind/cap-$name"
        ncap=$((ncap + 1))
    else
        echo "seed.sh: no capture for $name" >&2
    fi
}

X=(-x "http://127.0.0.1:$RP")
printf 'hello from seed.sh\n' >"$T/body.txt"
head -c 3000 /dev/zero | tr '\0' 'z' >"$T/big.txt"

cap http_head curl-get "${X[@]}" "http://example.test/path?q=1&r=%41"
cap http_head curl-get-port "${X[@]}" "http://example.test:8080/"
cap http_head curl-head "${X[@]}" -I "http://example.test/"
cap http_head curl-post-form "${X[@]}" -d 'a=1&b=two' "http://example.test/form"
cap http_head curl-post-json "${X[@]}" -H 'Content-Type: application/json' -d '{"k":[1,2]}' "http://example.test/api"
cap http_head curl-put-expect "${X[@]}" -H 'Expect: 100-continue' -T "$T/big.txt" "http://example.test/upload"
cap http_head curl-chunked "${X[@]}" -H 'Transfer-Encoding: chunked' --data-binary @"$T/body.txt" "http://example.test/chunked"
cap http_head curl-http10 "${X[@]}" --http1.0 "http://example.test/"
cap http_head curl-proxy-auth "${X[@]}" -U 'user:p@ss w:rd' "http://example.test/"
cap http_head curl-ipv6 "${X[@]}" "http://[::1]:8080/v6"
cap http_head curl-ipv4 "${X[@]}" "http://127.0.0.1:81/x"
cap http_head curl-idn "${X[@]}" "http://xn--bcher-kva.example/"
cap http_head curl-ws-upgrade "${X[@]}" -H 'Upgrade: websocket' -H 'Connection: Upgrade' -H 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==' "http://example.test/ws"
cap http_head curl-headers "${X[@]}" -H 'X-Many: a' -H 'Accept-Encoding: gzip' -H 'Cookie: a=b; c=d' -A 'seed/1.0' -e 'http://ref.test/' "http://example.test/h"
cap http_head curl-connect-tls "${X[@]}" -k "https://example.test/"
cap http_head curl-proxytunnel "${X[@]}" -p "http://example.test:8080/tunnelled"
cap http_head curl-connect-auth "${X[@]}" -p -U 'u:p' "http://[2001:db8::1]:443/"

cap socks5 curl-socks5h "http://example.test/s" --proxy "socks5h://127.0.0.1:$RP"
cap socks5 curl-socks5h-auth "http://example.test/s" --proxy "socks5h://alice:s3cret@127.0.0.1:$RP"
cap socks5 curl-socks5-ipv4 "http://127.0.0.1:9/" --proxy "socks5://127.0.0.1:$RP"
cap socks5 curl-socks5-ipv6 "http://[::1]:9/" --proxy "socks5://127.0.0.1:$RP"
cap socks5 curl-socks5h-tls -k "https://example.test/" --proxy "socks5h://127.0.0.1:$RP"
cap socks5 curl-socks4 "http://127.0.0.1:9/" --proxy "socks4://127.0.0.1:$RP"
cap socks5 curl-socks4a "http://example.test/" --proxy "socks4a://127.0.0.1:$RP"

# real response heads: python's http.server on loopback
mkdir -p "$T/www"
printf 'index\n' >"$T/www/index.html"
python3 -m http.server --bind 127.0.0.1 --directory "$T/www" 0 >"$T/www.log" 2>&1 &
PIDS+=($!)
WP=
for _ in $(seq 100); do
    WP=$(sed -n 's/.*port \([0-9][0-9]*\).*/\1/p' "$T/www.log" | head -1)
    [ -n "$WP" ] && break
    sleep 0.1
done
if [ -n "$WP" ]; then
    for req in "GET /index.html" "HEAD /index.html" "GET /missing" "GET /"; do
        name=$(printf '%s' "$req" | tr ' /.' '---')
        python3 - "$WP" "$req" "$OUT/http_head/cap-resp$name" <<'EOF'
import socket, sys
port, req, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
s = socket.create_connection(("127.0.0.1", port), timeout=5)
s.sendall(("%s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n" % req).encode())
data = b""
while True:
    d = s.recv(65536)
    if not d:
        break
    data += d
method, target = req.split(" ")
# the request as a proxy client sends it, then the origin's answer
proxied = ("%s http://127.0.0.1:%d%s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" % (method, port, target))
open(out, "wb").write(data)
open(out + "-exchange", "wb").write(proxied.encode() + data)
EOF
        ncap=$((ncap + 2))
    done
else
    echo "seed.sh: http.server did not start; no response captures" >&2
fi

python3 "$HERE/seed_tables.py" "$REPO" "$OUT"
echo "seed.sh: $ncap captures; corpus sizes:"
for d in http_head socks5 rules settings endpoint; do
    printf '  %-10s %s files\n' "$d" "$(find "$OUT/$d" -type f | wc -l)"
done
