#!/usr/bin/env bash
# tests/e2e/run_tls.sh - TLS termination in `sluice run` (issue 23): the
# host-side proxy terminates with a CA made per run (or one from files),
# and the sandbox trusts it with no option: the bundle over the system
# bundle path, srt's variables, a Java trust store.
#
# As root: a private network namespace (unshare -n) with HTTPS origins on
# 127.0.0.10 (their own CA, made here with the openssl CLI) and dnsmasq on
# 127.0.0.1 answering the *.test names; the cases run as root, then again as
# an unprivileged user (setpriv) in the same namespace. Nothing reaches the
# host's network. Skips when not root.
set -uo pipefail
SLUICE=${1:?usage: run_tls.sh PATH/TO/sluice}
case $SLUICE in /*) ;; *) SLUICE=$(cd "$(dirname "$SLUICE")" && pwd)/$(basename "$SLUICE") ;; esac
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
O1=127.0.0.10

. "$HERE/netns.sh"
e2e_netns RUNTLS_NETNS "run tlsTerminate" "$SLUICE"

. "$HERE/lib.sh"
e2e_who RUNTLS_CHILD
skip() { echo "ok - [$WHO] $1 # SKIP ${2:-}"; }

# --- the cases (root, then the user: the state comes in RUNTLS_*) -------------
cases() {
    local S=$SH/s.json R=$SH/rules.json F=$SH/files.json out rc
    export XDG_RUNTIME_DIR=$T/xdg
    mkdir -p -m 700 "$XDG_RUNTIME_DIR"
    cd "$T" || return
    sr() { "$SLUICE" run --settings "$@"; }

    # curl WITHOUT --cacert: the bundle over /etc/ssl/certs and CURL_CA_BUNDLE
    out=$(sr "$S" -- sh -c 'curl -sS -v --max-time 10 https://good.test:'"$PA"'/hello.txt 2>/tmp/e; cat; grep -i "issuer:" /tmp/e' </dev/null 2>&1)
    if grep -q "^hello from the origin" <<<"$out" && grep -q "issuer: O=sluice; CN=sluice per-run CA" <<<"$out"; then
        ok "curl without --cacert reaches the origin through termination (issuer: the run's CA)"
    else bad "curl through termination" "$out"; fi
    out=$(sr "$S" -- sh -c 'unset CURL_CA_BUNDLE SSL_CERT_FILE; curl -sS --max-time 10 https://good.test:'"$PA"'/hello.txt' 2>&1)
    [ "$out" = "hello from the origin" ] && ok "curl with no variable trusts it through the system bundle path" ||
        bad "system bundle path" "$out"
    out=$(sr "$S" -- python3 -c 'import urllib.request; print(urllib.request.urlopen("https://good.test:'"$PA"'/hello.txt", timeout=10).read().decode().strip())' 2>&1)
    [ "$out" = "hello from the origin" ] && ok "python3 urllib trusts the run's CA" || bad "python3 urllib" "$out"
    out=$(sr "$S" -- openssl s_client -proxy 127.0.0.1:3128 -connect "good.test:$PA" -servername good.test \
        -verify_return_error -brief </dev/null 2>&1)
    grep -q "Verification: OK" <<<"$out" && ok "openssl s_client (default store) verifies the leaf" ||
        bad "openssl s_client" "$out"
    if command -v node >/dev/null; then
        # node 20's fetch does not read HTTPS_PROXY: a CONNECT by hand, then
        # node's own TLS with its roots plus NODE_EXTRA_CA_CERTS
        out=$(sr "$S" -- node -e '
const http = require("http"), tls = require("tls");
http.request({host: "127.0.0.1", port: 3128, method: "CONNECT", path: "good.test:'"$PA"'"}).on("connect", (res, sock) => {
  const t = tls.connect({socket: sock, servername: "good.test"}, () => {
    t.write("GET /hello.txt HTTP/1.1\r\nHost: good.test\r\nConnection: close\r\n\r\n");
  });
  let b = ""; t.on("data", d => b += d); t.on("end", () => console.log(b.split("\r\n\r\n")[1].trim()));
  t.on("error", e => console.log("ERR " + e.message));
}).end();' 2>&1)
        [ "$out" = "hello from the origin" ] && ok "node's TLS trusts the run's CA (NODE_EXTRA_CA_CERTS)" ||
            bad "node" "$out"
    else skip "node" "node is not installed"; fi
    out=$(sr "$S" -- sh -c 'git clone -q https://good.test:'"$PA"'/repo.git /tmp/c && cat /tmp/c/README' 2>&1)
    [ "$out" = "cloned over https" ] && ok "git clone over HTTPS (dumb HTTP) through termination" ||
        bad "git clone" "$out"
    # git's smart HTTP (the origin runs git http-backend): clone, commit and
    # push back, each pass to its own branch; the origin's log shows both
    # services were used, and the pushed commit is in its repository
    local n0 got
    n0=$(cat "$SH/smart.log" 2>/dev/null | wc -l)
    out=$(sr "$S" -- sh -c 'git clone -q https://good.test:'"$PA"'/smart/push.git /tmp/s && cd /tmp/s &&
        echo '"$WHO"' > W && git add W && git -c user.name=t -c user.email=t@t commit -qm '"$WHO"' &&
        git push -q origin HEAD:refs/heads/'"$WHO"' && cat README' 2>&1)
    got=$(tail -n +"$((n0 + 1))" "$SH/smart.log" 2>/dev/null)
    if [ "$out" = "cloned over https" ] && grep -q "^POST /smart/push.git/git-upload-pack 200" <<<"$got" &&
        grep -q "^POST /smart/push.git/git-receive-pack 200" <<<"$got" &&
        [ "$(git -c safe.directory='*' --git-dir="$SH/www/push.git" show "$WHO:W" 2>&1)" = "$WHO" ]; then
        ok "git clone and push over smart HTTP (git http-backend) through termination"
    else bad "git smart HTTP" "$out / origin saw: $got"; fi
    if python3 -m pip --version >/dev/null 2>&1; then
        out=$(sr "$S" -- sh -c 'cd /tmp && python3 -m pip download -q --no-deps --no-cache-dir \
            --disable-pip-version-check --retries 0 --index-url https://good.test:'"$PA"'/simple/ \
            -d /tmp/p tlspkg && ls /tmp/p' 2>&1)
        [ "$out" = "tlspkg-1.0-py3-none-any.whl" ] &&
            ok "pip download from an HTTPS index through termination (PIP_CERT)" || bad "pip download" "$out"
    else skip "pip download" "python3 has no pip"; fi
    if command -v java >/dev/null && command -v keytool >/dev/null; then
        out=$(sr "$S" -- sh -c 'keytool -list -storetype PKCS12 -storepass changeit -keystore "$(echo "$JAVA_TOOL_OPTIONS" | sed "s/.*trustStore=\([^ ]*\).*/\1/")" 2>&1 | grep -i "sluice-run-ca"' 2>&1)
        grep -q "sluice-run-ca.*trustedCertEntry" <<<"$out" && ok "keytool sees the CA as a trusted entry of the trust store" ||
            bad "keytool" "$out"
        cat > "$T/J.java" <<EOF
public class J { public static void main(String[] a) throws Exception {
  var c = (javax.net.ssl.HttpsURLConnection) new java.net.URL("https://good.test:$PA/hello.txt").openConnection();
  System.out.println(new String(c.getInputStream().readAllBytes()).trim()); } }
EOF
        out=$(sr "$S" -- java "$T/J.java" 2>&1 | grep -v "^Picked up JAVA_TOOL_OPTIONS")
        [ "$out" = "hello from the origin" ] && ok "java HttpsURLConnection trusts the run's CA (JAVA_TOOL_OPTIONS)" ||
            bad "java" "$out"
    else skip "java" "no java/keytool"; fi

    # excludeDomains: opaque, the origin's own certificate
    out=$(sr "$S" -- sh -c 'curl -sS -v --max-time 10 --cacert '"$SH"'/originca.pem https://excl.test:'"$PA"'/hello.txt 2>/tmp/e; cat; grep -i "issuer:" /tmp/e' 2>&1)
    grep -q "^hello from the origin" <<<"$out" && grep -q "issuer: CN=origin e2e CA" <<<"$out" &&
        ok "excludeDomains stays opaque (the origin's certificate reaches the client)" ||
        bad "excludeDomains" "$out"

    # the variables, after the secret filter
    out=$(sr "$S" -- sh -c 'for v in NODE_EXTRA_CA_CERTS SSL_CERT_FILE CURL_CA_BUNDLE REQUESTS_CA_BUNDLE PIP_CERT GIT_SSL_CAINFO AWS_CA_BUNDLE CARGO_HTTP_CAINFO DENO_CERT CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE NIX_SSL_CERT_FILE; do eval "f=\${$v:-}"; [ -n "$f" ] && [ -r "$f" ] && grep -q "BEGIN CERTIFICATE" "$f" || echo "missing $v"; done; echo "$JAVA_TOOL_OPTIONS"' 2>&1)
    if ! grep -q missing <<<"$out" && grep -q -- "-Dkeep=1 .*-Djavax.net.ssl.trustStore=" <<<"$out"; then
        ok "srt's 11 variables point at the bundle (AWS_CA_BUNDLE kept), JAVA_TOOL_OPTIONS appended to"
    else bad "variables" "$out"; fi

    # attacks on the bundle
    out=$(sr "$S" -- sh -c 'f=$SSL_CERT_FILE; for t in "$f" /etc/ssl/certs/ca-certificates.crt; do
        (echo x >> "$t") 2>/dev/null && echo "WROTE $t"; rm -f "$t" 2>/dev/null && echo "REMOVED $t"
        mv "$t" "$t.x" 2>/dev/null && echo "MOVED $t"; done
        d=$(dirname "$f"); rm -rf "$d" 2>/dev/null; [ -r "$f" ] || echo GONE
        touch "$d/new" 2>/dev/null && echo "CREATED in $d"
        g=run; for p in /proc/[0-9]*; do tr "\0" " " < $p/cmdline 2>/dev/null | grep -q "$g --settings" && echo "SEES HOST $p"; done
        echo done' 2>&1)
    [ "$out" = done ] && ok "the command cannot write, remove or replace the bundle, nor see the host launcher in /proc" ||
        bad "bundle attacks" "$out"
    # enableWeakerNestedSandbox binds the host's /proc in: the launcher, which
    # holds the per-run CA key, is not dumpable, so its memory, environment
    # and descriptors stay closed to the command even with the same uid
    out=$(sr "$SH/weak.json" -- sh -c 'n=0; for p in /proc/[0-9]*; do c=$(tr "\0" " " 2>/dev/null < $p/cmdline)
        case "$c" in "'"$SLUICE"' run "*) n=$((n+1))
            cat $p/environ >/dev/null 2>&1 && echo "ENVIRON $p"; cat $p/maps >/dev/null 2>&1 && echo "MAPS $p"
            for f in $p/fd/*; do head -c0 $f </dev/null >/dev/null 2>&1 && echo "FD $f"; done;; esac; done; echo "launchers $n"' 2>&1)
    out=$(grep -v "cannot open /proc/[0-9]*/cmdline" <<<"$out")
    [ "$out" != "${out#launchers }" ] && [ "$out" != "launchers 0" ] &&
        ok "with the host's /proc (enableWeakerNestedSandbox) the launcher's memory map, environment and descriptors stay closed" ||
        bad "launcher through the host's /proc" "$out"
    # rt-9: the same with ptrace, process_vm_readv, pidfd_getfd and /proc/PID/mem
    # on the launcher, and a caKeyPath (CA from files) through /proc/PID/root
    # and /proc/PID/cwd of every host process it sees (this script's own among them)
    sed 's|^{|{"enableWeakerNestedSandbox": true, |' "$F" > "$T/weakf.json"
    out=$( (cd "$KD" && sr "$T/weakf.json" -- python3 "$SH/rt9_tls.py" host "$SLUICE" "$KD/ca.key") 2>&1)
    printf "%s\n" "$out" | grep -v "^seen " | sed "s/^/#   /"
    if grep -q "^seen [1-9][0-9]* launchers [1-9]" <<<"$out" && ! grep -q "^READ \|^PTRACE\|^MAPS\|^VM_READV\|^GETFD\|^MEM" <<<"$out"; then
        ok "rt9: host /proc (enableWeakerNestedSandbox): no ptrace, process_vm_readv, pidfd_getfd or mem of the launcher; caKeyPath not read through any /proc/PID/root or cwd ($(grep -o 'seen.*' <<<"$out"))"
    else bad "rt9: host /proc and the launcher, caKeyPath via /proc/PID/root" "$out"; fi
    cmp -s /etc/ssl/certs/ca-certificates.crt "$SH/roots.before" && ok "the host's system bundle is untouched" ||
        bad "host bundle changed"

    # no per-run CA key on disk: the run directory while the command runs
    sr "$S" -d -- sh -c 'touch /tmp/started; sleep 2' 2>"$T/d.err" &
    local pid=$! rd= i
    for i in $(seq 40); do
        rd=$(sed -n 's/.*bwrap .*, run directory \([^ ]*\)$/\1/p' "$T/d.err" | head -1)
        [ -n "$rd" ] && [ -e "$rd/tmp/started" ] && break # the command runs
        sleep 0.05
    done
    out=$( [ -n "$rd" ] && grep -rl "PRIVATE KEY" "$rd" 2>/dev/null; [ -n "$rd" ] && find "$rd/tls" -type f ! -perm 600)
    if [ -n "$rd" ] && [ -e "$rd/tls/ca-bundle.pem" ] && [ -z "$out" ]; then
        ok "no CA key in the run directory; its trust files are 0600"
    else bad "run directory" "rd=$rd: $out $(head -5 "$T/d.err")"; fi
    wait "$pid"
    [ -n "$rd" ] && [ ! -e "$rd" ] && ok "the run directory is gone after the run" || bad "run directory left" "$rd"

    # rt-9: two runs at once in one directory: each its own run directory and
    # CA; neither sees, writes or swaps the other's trust files
    sr "$S" -- sh -c 'echo "$SSL_CERT_FILE" > b.path; openssl x509 -noout -fingerprint -in "${SSL_CERT_FILE%/*}/ca.pem" > b.fp; sleep 3' 2>/dev/null &
    local bpid=$!
    for i in $(seq 60); do [ -s "$T/b.fp" ] && break; sleep 0.05; done
    out=$(sr "$S" -- sh -c 'b=$(cat b.path); a=$SSL_CERT_FILE; [ "$a" != "$b" ] || echo SAME
        ls "${b%/*}" 2>/dev/null && echo "SEES $b"; (echo x >> "$b") 2>/dev/null && echo "WROTE $b"
        ls "${a%/tls/*}" | grep -v "^tls$" | head -3
        cat /etc/ssl/certs/ca-certificates.crt | openssl x509 -noout -fingerprint 2>/dev/null >/dev/null
        openssl x509 -noout -fingerprint -in "${a%/*}/ca.pem" | cmp -s - b.fp && echo "SAME CA"
        curl -sS --max-time 10 https://good.test:'"$PA"'/hello.txt' 2>&1)
    wait "$bpid"
    [ "$out" = "hello from the origin" ] && [ -s "$T/b.fp" ] &&
        ok "rt9: two runs at once in one directory: each its own run directory and CA, the other's out of sight" ||
        bad "rt9: two runs at once" "$out"
    rm -f "$T/b.path" "$T/b.fp"

    # request rules without tlsTerminate: the ruled host is terminated (the
    # upstream leg trusts the system roots only, which do not know the
    # origin's CA: 502 for the allowed request), the others stay opaque;
    # then with tlsTerminate {scope: "needed", extraCaCertPaths}
    rules_probe() {
        sr "$1" -- sh -c 'for p in /pub/a.txt /priv/p.txt /pub/secret/s.txt; do curl -s -o /dev/null -w "%{http_code} " --max-time 10 https://rules.test:'"$PA"'$p; done
        curl -s -o /dev/null -w "%{http_code} " -X POST -d x --max-time 10 https://rules.test:'"$PA"'/pub/a.txt
        curl -s -o /dev/null -w "%{http_code}" --max-time 10 https://good.test:'"$PA"'/hello.txt; echo
        curl -sS --max-time 10 --cacert '"$SH"'/originca.pem https://good.test:'"$PA"'/hello.txt
        curl -s --max-time 10 https://rules.test:'"$PA"'/pub/a.txt | head -c 300; echo' 2>&1
    }
    out=$(rules_probe "$R")
    [ "$(head -2 <<<"$out")" = "502 403 403 403 000
hello from the origin" ] && grep -q "unknown issuer\|certificate" <<<"$out" &&
        ok "request rules without tlsTerminate: terminated (CA per run), deny by method and path inside HTTPS; other hosts opaque" ||
        bad "request rules in run" "$out"
    out=$(rules_probe "$SH/needed.json")
    [ "$(head -3 <<<"$out")" = "200 403 403 403 000
hello from the origin
public" ] && ok "request rules with tlsTerminate scope needed: allow and deny by method and path; other hosts opaque" ||
        bad "request rules, scope needed" "$out"

    # rt-9: the name the leaf is made for, and the ruled host failing closed
    # (run-helpers/rt9_tls.py): SNI other than the CONNECT target, SNI
    # against an IP target, a ruled host reached with another SNI or Host,
    # without TLS, with ALPN h2 only, and through SOCKS5; one run per policy
    out=$(sr "$S" -- python3 "$SH/rt9_tls.py" "$PA" sni 2>&1)
    printf "%s\n" "$out" | sed "s/^/#   /"
    if grep -q "^sni-good: vouched good.test" <<<"$out" && [ "$(grep -c '^sni-[a-z]*: not vouched\|^sni-[a-z]*: refused' <<<"$out")" = 3 ] &&
            ! grep -q MINTED <<<"$out"; then
        ok "rt9: the run's CA vouches for the CONNECT target only: not for another SNI (a name, against an IP target, another allowed name)"
    else bad "rt9: leaves for the SNI" "$out"; fi
    for pol in "$SH/needed.json" "$R"; do
        out=$(sr "$pol" -- python3 "$SH/rt9_tls.py" "$PA" rules 2>&1)
        printf "%s\n" "$out" | sed "s/^/#   /"
        if [ "$(grep -c '^[a-z0-9-]*: ' <<<"$out")" = 7 ] && ! grep -v '^socks-ip-sni: \|^fronted: ' <<<"$out" | grep -q "private"; then
            ok "rt9 ($(basename "$pol")): the ruled host refuses /priv with another SNI or Host, without TLS, with ALPN h2 only, and through SOCKS5"
        else bad "rt9 ($(basename "$pol")): the ruled host fails closed" "$out"; fi
    done
    # rt-9: request rules in --transparent mode (the command's own connect):
    # the ruled host's refused path is never reached
    out=$(sr "$R" --transparent -- sh -c 'curl -s --noproxy "*" --max-time 10 -k https://rules.test:'"$PA"'/priv/p.txt; echo " rc=$?"' 2>&1); rc=$?
    ! grep -q "^private" <<<"$out" && ok "rt9: request rules with --transparent: /priv of the ruled host not reached (rc $rc)" ||
        bad "rt9: request rules with --transparent" "rc $rc: $out"

    # a CA from files: its key is unreadable inside, whatever allowRead says
    out=$(sr "$F" -- sh -c 'c=$(cat '"$KD"'/ca.key 2>/dev/null | wc -c); echo "key $c"; grep -c "BEGIN CERTIFICATE" '"$KD"'/ca.pem
        k='"$KD"'/ca.key; ln $k /tmp/k 2>/dev/null && echo LINKED; ln $k '"$KD"'/k2 2>/dev/null && echo LINKED2
        mv $k $k.x 2>/dev/null && echo MOVED; rm -f $k 2>/dev/null && echo REMOVED; cat /tmp/k '"$KD"'/k2 $k.x 2>/dev/null | grep -q PRIVATE && echo READ
        curl -sS -v --max-time 10 https://good.test:'"$PA"'/hello.txt 2>/tmp/e; grep -i "issuer:" /tmp/e' 2>&1)
    [ "$(head -1 <<<"$out")" = "key 0" ] && grep -q "issuer: CN=run e2e CA" <<<"$out" && grep -q "^hello from the origin" <<<"$out" &&
        ! grep -q "LINKED\|MOVED\|REMOVED\|READ" <<<"$out" && grep -q "PRIVATE KEY" "$KD/ca.key" &&
        ok "caKeyPath is unreadable in the sandbox (allowRead and allowWrite name its folder; no link, move or removal); the CA from files signs" ||
        bad "caKeyPath" "$out"
    rm -f "$KD/k2" "$KD/ca.key.x"
    # rt-9: caKeyPath spelled another way ("DIR//./ca.key"), read by every
    # other spelling: the plain path, "..", /proc/self/root, a fresh symlink
    sed "s|\"$KD/ca.key\"|\"$KD//./ca.key\"|" "$F" > "$T/spelled.json"
    out=$(sr "$T/spelled.json" -- sh -c 'k='"$KD"'/ca.key; d='"$KD"'; ln -s $k /tmp/sl 2>/dev/null
        for p in $k $d/../${d##*/}/ca.key /proc/self/root$k /proc/1/root$k /tmp/sl $d//./ca.key; do
            grep -q PRIVATE $p 2>/dev/null && echo "READ $p"; done
        curl -sS --max-time 10 https://good.test:'"$PA"'/hello.txt' 2>&1)
    grep -q "caKeyPath\": \"$KD//./ca.key\"" "$T/spelled.json" && [ "$out" = "hello from the origin" ] &&
        ok "rt9: caKeyPath spelled DIR//./ca.key: no spelling of it reads the key inside; the CA signs" ||
        bad "rt9: caKeyPath spelled another way" "$out"
    # what run cannot terminate is refused, naming the key (never accepted and ignored)
    printf '{"network": {"allowedDomains": ["x.test"], "isolate": false,\n "tlsTerminate": {}}}\n' > "$T/open.json"
    out=$(sr "$T/open.json" -- true 2>&1); rc=$?
    [ "$rc" = 125 ] && grep -q "open.json:2:2: network.tlsTerminate: network.isolate is false" <<<"$out" &&
        ok "tlsTerminate with isolate false is refused (125), naming where" || bad "isolate false" "rc $rc: $out"
    out=$(sr "$S" --transparent -- true 2>&1); rc=$?
    [ "$rc" = 125 ] && grep -q "network.tlsTerminate: transparent mode" <<<"$out" &&
        ok "tlsTerminate with --transparent is refused (125), naming the key" || bad "transparent" "rc $rc: $out"
    # a key with a second name is refused: only the named path is hidden
    mkdir -p "$T/hl" && cp "$KD/ca.pem" "$KD/ca.key" "$T/hl/" && ln "$T/hl/ca.key" "$T/hl/ca.key2"
    sed "s|$KD/ca|$T/hl/ca|g" "$F" > "$T/hl.json"
    out=$(sr "$T/hl.json" -- true 2>&1); rc=$?
    [ "$rc" = 125 ] && grep -q "network.tlsTerminate: caKeyPath has more than one hard link" <<<"$out" &&
        ok "a caKeyPath with two hard links is refused (125), naming the key" || bad "hard-linked key" "rc $rc: $out"
}

# --- set-up (root, once) ------------------------------------------------------
if [ -z "${RUNTLS_CHILD:-}" ]; then
    if ! ip link set lo up || ip route get 1.1.1.1 >/dev/null 2>&1; then
        bad "no private network namespace"; e2e_finish; exit
    fi
    SH=$(mktemp -d /var/tmp/sluice-runtls.XXXXXX) # visible inside (/tmp is private)
    KD=$(mktemp -d /var/tmp/sluice-runtls-key.XXXXXX) # visible inside (/tmp is private)
    chmod 755 "$SH" "$KD"
    trap 'e2e_cleanup; rm -rf "$SH" "$KD"' EXIT
    mkca() { # DIR NAME CN
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 -subj "/CN=$3" \
            -keyout "$1/$2.key" -out "$1/$2.pem" -addext "basicConstraints=critical,CA:TRUE" \
            -addext "keyUsage=critical,keyCertSign,cRLSign" -addext "subjectKeyIdentifier=hash" 2>>"$SH/openssl.err"
    }
    mkca "$SH" originca "origin e2e CA" && mkca "$KD" ca "run e2e CA" &&
        openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=good.test" \
            -keyout "$SH/good.key" -out "$SH/good.csr" 2>>"$SH/openssl.err" &&
        openssl x509 -req -in "$SH/good.csr" -CA "$SH/originca.pem" -CAkey "$SH/originca.key" -days 30 \
            -extfile <(printf 'subjectAltName=DNS:good.test,DNS:excl.test,DNS:rules.test\nbasicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nauthorityKeyIdentifier=keyid\n') \
            -out "$SH/good.pem" 2>>"$SH/openssl.err" || { bad "certificates" "$(cat "$SH/openssl.err")"; e2e_finish; exit; }
    chmod 644 "$SH"/*.pem "$KD/ca.pem"
    cp /etc/ssl/certs/ca-certificates.crt "$SH/roots.before"
    W=$SH/www
    mkdir -p "$W/pub/secret" "$W/priv"
    echo "hello from the origin" > "$W/hello.txt"
    echo "public" > "$W/pub/a.txt"; echo "secret" > "$W/pub/secret/s.txt"; echo "private" > "$W/priv/p.txt"
    git init -q "$SH/src" && echo "cloned over https" > "$SH/src/README" &&
        git -C "$SH/src" add README && git -C "$SH/src" -c user.name=t -c user.email=t@t commit -qm c &&
        git clone -q --bare "$SH/src" "$W/repo.git" && git -C "$W/repo.git" update-server-info &&
        git clone -q --bare "$SH/src" "$W/push.git" && git -C "$W/push.git" config http.receivepack true &&
        chmod -R a+rwX "$W/push.git" || bad "git repository"
    # pip: a wheel and its simple index, both on the origin (HTTPS)
    mkdir -p "$W/simple/tlspkg"
    python3 - "$W" <<'PY' || bad "the wheel"
import base64, hashlib, sys, zipfile
d = sys.argv[1]
name = "tlspkg-1.0-py3-none-any.whl"
files = {
    "tlspkg/__init__.py": b"VALUE = 1\n",
    "tlspkg-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: tlspkg\nVersion: 1.0\n",
    "tlspkg-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: run_tls.sh\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
rec = ""
for n, b in files.items():
    h = base64.urlsafe_b64encode(hashlib.sha256(b).digest()).rstrip(b"=").decode()
    rec += "%s,sha256=%s,%d\n" % (n, h, len(b))
rec += "tlspkg-1.0.dist-info/RECORD,,\n"
with zipfile.ZipFile(d + "/" + name, "w") as z:
    for n, b in files.items():
        z.writestr(n, b)
    z.writestr("tlspkg-1.0.dist-info/RECORD", rec)
sha = hashlib.sha256(open(d + "/" + name, "rb").read()).hexdigest()
open(d + "/simple/tlspkg/index.html", "w").write(
    '<html><body><a href="/%s#sha256=%s">%s</a></body></html>\n' % (name, sha, name))
PY
    PA=$(free_port)
    python3 - "$O1" "$PA" "$SH/good.pem" "$SH/good.key" "$W" 2>"$SH/origin.err" <<'EOF' &
import http.server, ssl, sys, functools, os, subprocess, urllib.parse
addr, port, cert, key, root = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
class H(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a): pass
    # /smart/...: git's smart HTTP through git http-backend (CGI), each
    # request noted in smart.log
    def smart(self):
        u = urllib.parse.urlsplit(self.path)
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        env = dict(os.environ, GIT_PROJECT_ROOT=root, GIT_HTTP_EXPORT_ALL="1",
                   PATH_INFO=u.path[len("/smart"):], QUERY_STRING=u.query,
                   REQUEST_METHOD=self.command, CONTENT_TYPE=self.headers.get("Content-Type", ""),
                   CONTENT_LENGTH=str(len(body)), REMOTE_USER="e2e", REMOTE_ADDR="127.0.0.1")
        if self.headers.get("Content-Encoding"):
            env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
        out = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True).stdout
        head, _, data = out.partition(b"\r\n\r\n")
        status, hdrs = 200, []
        for line in head.decode("latin-1").split("\r\n"):
            k, _, v = line.partition(":")
            if k.lower() == "status":
                status = int(v.split()[0])
            elif k:
                hdrs.append((k, v.strip()))
        with open(root + "/../smart.log", "a") as f:
            f.write("%s %s %d\n" % (self.command, u.path, status))
        self.send_response(status)
        for k, v in hdrs:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def do_GET(self):
        if self.path.startswith("/smart/"):
            return self.smart()
        return super().do_GET()
    def do_POST(self):
        if self.path.startswith("/smart/"):
            return self.smart()
        self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()
s = http.server.ThreadingHTTPServer((addr, port), functools.partial(H, directory=root))
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); ctx.load_cert_chain(cert, key)
s.socket = ctx.wrap_socket(s.socket, server_side=True)
s.serve_forever()
EOF
    PIDS+=($!)
    for i in $(seq 100); do
        curl -s -o /dev/null --max-time 1 --cacert "$SH/originca.pem" --resolve "good.test:$PA:$O1" \
            "https://good.test:$PA/hello.txt" && break
        sleep 0.1
    done
    start_dnsmasq --address=/good.test/$O1 --address=/excl.test/$O1 --address=/rules.test/$O1 ||
        { bad "dnsmasq did not start" "$(cat "$T/dnsmasq.err")"; e2e_finish; exit; }
    base='"allowedDomains": ["*.test", "'"$O1"'"], "dnsServers": ["127.0.0.1:'"$DPORT"'"], "denyPrivateAddresses": false'
    cat > "$SH/s.json" <<JSON
{"network": {$base,
  "tlsTerminate": {"extraCaCertPaths": ["$SH/originca.pem"], "excludeDomains": ["excl.test"]}}}
JSON
    cat > "$SH/rules.json" <<JSON
{"network": {$base,
  "requestRules": [{"host": "rules.test", "method": "GET", "path": "/pub/**", "action": "allow"},
                   {"host": "rules.test", "path": "/pub/secret/**", "action": "deny"}]}}
JSON
    cat > "$SH/needed.json" <<JSON
{"network": {$base,
  "requestRules": [{"host": "rules.test", "method": "GET", "path": "/pub/**", "action": "allow"},
                   {"host": "rules.test", "path": "/pub/secret/**", "action": "deny"}],
  "tlsTerminate": {"scope": "needed", "extraCaCertPaths": ["$SH/originca.pem"]}}}
JSON
    cat > "$SH/weak.json" <<JSON
{"enableWeakerNestedSandbox": true, "network": {$base, "tlsTerminate": {}}}
JSON
    chmod 644 "$SH"/*.json
    cp "$HERE/run-helpers/rt9_tls.py" "$SH/" && chmod 644 "$SH/rt9_tls.py"
    export JAVA_TOOL_OPTIONS=-Dkeep=1 AWS_CA_BUNDLE=/host/aws.pem
fi
# the CA from files: each pass its own copy of the key (readable by whoever runs)
write_files_settings() { # KEYDIR
    cat > "$SH/files.json" <<JSON
{"network": {$base,
  "tlsTerminate": {"caCertPath": "$1/ca.pem", "caKeyPath": "$1/ca.key",
                   "extraCaCertPaths": ["$SH/originca.pem"]}},
 "filesystem": {"allowRead": ["$1", "$1/ca.key"], "allowWrite": ["$1", "."]}}
JSON
}

start=$SECONDS
if [ -n "${RUNTLS_CHILD:-}" ]; then
    SH=$RUNTLS_SH KD=$RUNTLS_KD PA=$RUNTLS_PA DPORT=$RUNTLS_DPORT base=$RUNTLS_BASE
    cases
    e2e_finish
    exit
fi
write_files_settings "$KD"
cases
# --- the same cases as an unprivileged user -----------------------------------
if command -v setpriv >/dev/null && { id sluicetest >/dev/null 2>&1 || useradd -M -s /usr/sbin/nologin sluicetest >/dev/null 2>&1; }; then
    U=$(id -u sluicetest) G=$(id -g sluicetest)
    cp "$SLUICE" "$SH/sluice" && chmod 755 "$SH/sluice"
    cp -r "$HERE" "$SH/e2e" && chmod -R a+rX "$SH/e2e"
    UKD=$(mktemp -d /var/tmp/sluice-runtls-ukey.XXXXXX)
    trap 'e2e_cleanup; rm -rf "$SH" "$KD" "$UKD"' EXIT
    cp "$KD/ca.pem" "$KD/ca.key" "$UKD/" && chown -R "$U:$G" "$UKD" && chmod 700 "$UKD"
    chmod 711 "$UKD"
    write_files_settings "$UKD"
    chmod 644 "$SH/files.json"
    echo "# --- the same cases as uid $U (setpriv) ---"
    (cd / && setpriv --reuid="$U" --regid="$G" --clear-groups --inh-caps=-all \
        env RUNTLS_NETNS=1 RUNTLS_CHILD=1 RUNTLS_SH="$SH" RUNTLS_KD="$UKD" RUNTLS_PA="$PA" \
        RUNTLS_DPORT="$DPORT" RUNTLS_BASE="$base" PATH="/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin" \
        bash "$SH/e2e/run_tls.sh" "$SH/sluice") 2>&1 | tee "$T/child.out"
    e2e_add_counts "$T/child.out"
else
    echo "# SKIP the unprivileged pass: no setpriv or no user"
fi
echo "# run_tls.sh took $((SECONDS - start)) s"
e2e_finish
