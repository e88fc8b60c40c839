# tests/bench/pki.sh - sourced by tls.sh and counts.sh: bench_pki DIR makes
# the TLS lane's PKI in DIR: sluiceca.{pem,key} (the CA sluice mints from),
# originca.{pem,key} and the origin's leaf origin.{pem,key} for 127.0.0.1
# (ECDSA P-256). Returns non-zero, with openssl's messages on stderr, when
# it cannot.
bench_pki() {
    local P=$1
    mkdir -p "$P" || return 1
    _bench_mkca() {
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 -subj "/CN=$3" \
            -keyout "$1/$2.key" -out "$1/$2.pem" -addext "basicConstraints=critical,CA:TRUE" \
            -addext "keyUsage=critical,keyCertSign,cRLSign" -addext "subjectKeyIdentifier=hash" 2>>"$1/err"
    }
    _bench_mkca "$P" sluiceca "bench sluice CA" && _bench_mkca "$P" originca "bench origin CA" &&
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 -subj "/CN=origin" \
            -CA "$P/originca.pem" -CAkey "$P/originca.key" -keyout "$P/origin.key" -out "$P/origin.pem" \
            -addext "subjectAltName=IP:127.0.0.1" -addext "basicConstraints=critical,CA:FALSE" \
            -addext "extendedKeyUsage=serverAuth" 2>>"$P/err" || { cat "$P/err" >&2; return 1; }
}
