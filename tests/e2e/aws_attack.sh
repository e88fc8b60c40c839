#!/usr/bin/env bash
# tests/e2e/aws_attack.sh - rt-13: attacks on AWS SigV4 re-signing
# (credentials.awsPairs, issue 24 deliverable 3) in `sluice run`. Each case
# passes when the boundary holds: the proxy signs with the real secret only
# what the sandbox signed with the placeholder secret, only for the pair's
# hosts, gives back neither the real key id, token nor a real signature,
# and a held body neither hangs a client nor lets the sandbox make the
# proxy hold unbounded memory. A case named "HOLE" failed when it was
# written (tests/e2e/rt-13-report.md).
#
# As root: a private network namespace (unshare -n) with an HTTPS origin on
# 127.0.0.10 (aws-helpers/attack_origin.py) that verifies every request's
# signature with the REAL secret, records it, reads chunked bodies and
# trailers, and echoes a request's headers back on /echo; dnsmasq on
# 127.0.0.1 answers the *.test names; s3.aws.test is the pair's host,
# other.test is not. The sandbox writes raw requests with
# aws-helpers/attack_client.py. The cases run as root, then as an
# unprivileged user (setpriv); the costly ones (64 MiB bodies, memory) as
# root only. Nothing reaches the host's network. Skips when not root.
# (Preamble, namespace and origin set-up follow credentials_aws.sh.)
set -uo pipefail
SLUICE=${1:?usage: aws_attack.sh PATH/TO/sluice}
case $SLUICE in /*) ;; *) SLUICE=$(cd "$(dirname "$SLUICE")" && pwd)/$(basename "$SLUICE") ;; esac
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
O1=127.0.0.10

. "$HERE/netns.sh"
e2e_netns AA_NETNS "aws_attack" "$SLUICE"

. "$HERE/lib.sh"
e2e_who AA_CHILD

# The real values, with random digits per run (never printed by the checks).
RND=${AA_RND:-$(shuf -i 1000000000-9999999999 -n1)}
KID=AKIAREAL${RND}XY
SEC=wJalrXUtnFEMI/K7MDENG+bPxRf${RND}CYEXKEY
TOK=IQoJb3JpZ2luX2VjEPT//////////wEaCXVzLWVhc3QtMSJHMEUCIQ${RND}AbCdEfGhIj+kLmN/oPq==

# The resident memory (KiB) of a process and its descendants that run
# sluice (their comm: the binary's name, cut to 15 bytes).
COMM=$(basename "$SLUICE" | cut -c1-15)
rss_tree() {
    local todo=$1 p sum=0 k
    while [ -n "$todo" ]; do
        set -- $todo
        p=$1; shift; todo="$* $(ps -o pid= --ppid "$p" 2>/dev/null | tr '\n' ' ')"
        todo=$(echo $todo)
        [ "$(cat /proc/"$p"/comm 2>/dev/null)" = "$COMM" ] || continue
        k=$(awk '/^VmRSS:/ {print $2}' /proc/"$p"/status 2>/dev/null)
        sum=$((sum + ${k:-0}))
    done
    echo "$sum"
}

cases() {
    local out rc log=$T/log.$WHO r sig m
    export XDG_RUNTIME_DIR=$T/xdg
    mkdir -p -m 700 "$XDG_RUNTIME_DIR"
    cd "$T" || return
    sr() { local s=$1; shift; AWS_ACCESS_KEY_ID=$KID AWS_SECRET_ACCESS_KEY=$SEC AWS_SESSION_TOKEN=$TOK \
        "$SLUICE" run --log "$log" --settings "$SJ/$s" -- "$@"; }
    ac() { sr s.json "$PY" "$SH/aws/attack_client.py" "$@"; }
    rec() { cat "$SH/rec/"* 2>/dev/null; }
    clear() { rm -f "$SH/rec/"*; }
    hide() { sed "s#$SEC#<SEC>#g; s#$KID#<KID>#g; s#$TOK#<TOK>#g"; }
    : > "$log"
    u=https://s3.aws.test:$PA

    # --- what comes back: an origin that echoes the request it got --------
    # the real key id and token are masked in the response; the real
    # signature the proxy made is not a masked value: it comes back as is,
    # a signature over a request the sandbox chose (any scope, any headers,
    # any x-amz-date) with the real secret, which anyone who knows the key id
    # can replay for 15 minutes from outside the sandbox
    clear
    out=$(ac echo "$u/bucket/echo" 2>&1)
    r=$(rec)
    sig=$(sed -n 's/^REQ .* ok=1 .* sig=\([0-9a-f]*\) .*/\1/p' <<<"$r" | head -1)
    if [ -n "$sig" ] && grep -q "^STATUS 200" <<<"$out" && grep -q "^Authorization: AWS4-HMAC-SHA256" <<<"$out" &&
        ! grep -qF -e "$KID" -e "$TOK" -e "$SEC" <<<"$out"; then
        ok "echo: an origin that echoes the request hands back neither the real key id nor the token (masked)"
    else bad "echo: key id / token masking" "$(hide <<<"$out$r" | head -20)"; fi
    if [ -n "$sig" ] && ! grep -qF "$sig" <<<"$out"; then
        ok "echo: the real signature the proxy made does not come back to the sandbox"
    else bad "HOLE sig-echo: the real signature the proxy made with the real secret comes back unmasked from an echoing injection host (a signing oracle for any request the sandbox chooses)" \
        "$(grep -F "$sig" <<<"$out" | hide | head -3)"; fi
    if [ -n "$sig" ] && ! grep -qF "$sig" "$log"; then
        ok "the real signature is not in sluice's log"
    else bad "the real signature in the log" "$(grep -cF "$sig" "$log")"; fi

    # --- the check against the placeholder secret --------------------------
    for m in "sigzero:a signature of zeros" "sigupper:the right signature in upper case" \
        "twice:the same AWS4 Authorization twice" \
        "bearer2:a second Authorization (Bearer) next to the signed one" \
        "both:a signed Authorization and a presigned query with the placeholder key id" \
        "bodylie:x-amz-content-sha256 that is not the hash of the body sent"; do
        clear
        out=$(ac "${m%%:*}" "$u/bucket/${m%%:*}" 2>&1)
        r=$(rec)
        if grep -q "^STATUS 4" <<<"$out" && ! grep -q "ok=1" <<<"$r" && ! grep -qF -e "$KID" -e "$TOK" <<<"$r"; then
            ok "${m%%:*}: ${m#*:}: refused ($(sed -n 's/^STATUS //p' <<<"$out" | head -1)), never sent with the real key id"
        else bad "${m%%:*}: ${m#*:}" "$(hide <<<"$out // $r" | head -8)"; fi
    done

    # a Host header that is not the CONNECT target: what the real secret
    # signs is the head that goes upstream (its Host is the CONNECT target)
    clear
    out=$(ac hostlie "$u/bucket/hostlie" 2>&1)
    r=$(rec)
    if { grep -q "^STATUS 200" <<<"$out" && grep -q "^REQ GET /bucket/hostlie host=s3.aws.test:$PA ok=1" <<<"$r"; } ||
        { grep -q "^STATUS 4" <<<"$out" && [ -z "$r" ]; }; then
        ok "hostlie: a request signed for Host other.test inside the s3.aws.test tunnel: signed with the real secret only for s3.aws.test ($(sed -n 1p <<<"$out"))"
    else bad "hostlie" "$(hide <<<"$out // $r" | head -8)"; fi
    if ! grep -q "host=other.test" <<<"$r"; then
        ok "hostlie: no Host other.test reaches the origin with a real signature"
    else bad "hostlie: Host other.test sent with a real signature" "$(hide <<<"$r" | head -3)"; fi

    # dot segments in the signed path: the origin verifies what it gets
    clear
    out=$(ac dots "$u/bucket/a/../dots.txt" 2>&1)
    r=$(rec)
    if { grep -q "^STATUS 200" <<<"$out" && grep -q "^REQ PUT .* ok=1" <<<"$r" && ! grep -q "ok=0" <<<"$r"; } ||
        { grep -q "^STATUS 4" <<<"$out" && [ -z "$r" ]; }; then
        ok "dots: a signed path with dot segments: verified as sent, or refused unsent ($(sed -n 1p <<<"$out"))"
    else bad "dots" "$(hide <<<"$out // $r" | head -8)"; fi

    # --- held bodies ------------------------------------------------------
    # Expect: 100-continue with a held head: the origin never sees the head
    # before the body, so its 100 Continue cannot come; a client that waits
    # for one must not wait for ever (curl and botocore wait 1 s, others
    # longer)
    clear
    out=$(ac expect "$u/bucket/expect.bin" 2>&1)
    r=$(rec)
    if grep -q "^FIRST 100 after" <<<"$out" && grep -q "^STATUS 200" <<<"$out" && grep -q "^REQ PUT /bucket/expect.bin .* ok=1" <<<"$r" &&
        ! grep -qi "^H expect:" <<<"$r"; then
        ok "expect: Expect: 100-continue on a held SigV4 PUT: 100 Continue at once, the body verifies at the origin"
    else bad "HOLE expect: Expect: 100-continue on a held SigV4 PUT: no 100 Continue comes (a client waits for ever or for its own timeout)" \
        "$(hide <<<"$out" | head -4)"; fi

    # pipelined requests after a held body
    clear
    out=$(ac pipeline "$u/bucket/pipe" 2>&1)
    r=$(rec)
    if [ "$(grep -c '^STATUS 200' <<<"$out")" = 2 ] && grep -q "^verified /bucket/pipe1" <<<"$out" &&
        [ "$(grep -o 'verified /bucket/pipe[12]' <<<"$out" | tr '\n' ' ')" = "verified /bucket/pipe1 verified /bucket/pipe2 " ] &&
        [ "$(grep -c '^REQ PUT /bucket/pipe[12] .* ok=1' <<<"$r")" = 2 ]; then
        ok "pipeline: two held SigV4 PUTs in one write: both verify at the origin, answered in order"
    else bad "pipeline" "$(hide <<<"$out // $r" | grep -v '^H ' | head -10)"; fi

    # a chunked body with a trailer
    clear
    out=$(ac trailer "$u/bucket/trailer" 2>&1)
    r=$(rec)
    if { grep -q "^STATUS 200" <<<"$out" && grep -q "^REQ PUT /bucket/trailer .* ok=1 .* body=70000 " <<<"$r"; } ||
        { grep -q "^STATUS 4" <<<"$out" && [ -z "$r" ]; }; then
        ok "trailer: a chunked held body with a trailer: verified at the origin, or refused unsent ($(sed -n 1p <<<"$out"); trailers $(sed -n 's/.* trailers=\([^ ]*\) .*/\1/p' <<<"$r"))"
    else bad "trailer" "$(hide <<<"$out // $r" | grep -v '^H ' | head -8)"; fi

    # a body cut short (Content-Length 1000, 500 sent, closed): nothing
    # is sent; the next request works
    clear
    out=$(ac clshort "$u/bucket/short" 2>&1)
    r=$(rec)
    if grep -q "^STATUS 200" <<<"$out" && ! grep -q "^REQ PUT /bucket/short " <<<"$r" &&
        grep -q "^REQ PUT /bucket/short.after .* ok=1" <<<"$r"; then
        ok "clshort: a held body cut short is never sent; the next request verifies"
    else bad "clshort" "$(hide <<<"$out // $r" | grep -v '^H ' | head -8)"; fi

    # the kept upstream closes while a head is held (the retry path)
    clear
    out=$(ac retry "$u/bucket/retry" 2>&1)
    r=$(rec)
    if [ "$(grep -c '^STATUS 200' <<<"$out")" = 2 ] && grep -q "^REQ PUT /bucket/retry/after .* ok=1" <<<"$r" ||
        { grep -q "^STATUS 200" <<<"$out" && grep -q "^STATUS 502" <<<"$out" && ! grep -q "^REQ PUT" <<<"$r"; }; then
        ok "retry: the kept upstream closed while a SigV4 head was held: $(grep '^STATUS' <<<"$out" | tail -1), $(grep -c '^REQ PUT .* ok=1' <<<"$r") verified PUT at the origin"
    else bad "retry: the kept upstream closed while a SigV4 head was held" "$(hide <<<"$out // $r" | grep -v '^H ' | head -8)"; fi

    [ "$WHO" = root ] || return 0
    # --- the costly ones, as root only ------------------------------------
    clear
    out=$(ac exact64 "$u/bucket/exact64" 2>&1)
    r=$(rec)
    if grep -q "^STATUS 200" <<<"$out" && grep -q "^REQ PUT /bucket/exact64 .* ok=1 .* body=67108864 " <<<"$r"; then
        ok "exact64: a body of exactly 64 MiB with a literal hash is held and verifies at the origin"
    else bad "exact64" "$(hide <<<"$out // $r" | grep -v '^H ' | head -8)"; fi

    clear
    out=$(ac chunkover "$u/bucket/chunkover" 2>&1)
    r=$(rec)
    if { grep -q "^STATUS 403" <<<"$out" && grep -q "over 64 MiB" <<<"$out" || grep -q "^CLOSED" <<<"$out"; } &&
        [ -z "$r" ] && grep -q "over 64 MiB" "$log"; then
        ok "chunkover: a chunked body of 64 MiB + 1 is refused when it crosses the limit and never sent ($(sed -n 1p <<<"$out"))"
    else bad "chunkover" "$(hide <<<"$out // $r" | grep -v '^H ' | head -8)"; fi

    # many connections, each holding a body it does not finish: the proxy's
    # memory must have a bound over all of them (8 x 48 MiB here)
    clear
    local mo=$T/mem.out peak=0 now k pid
    AWS_ACCESS_KEY_ID=$KID AWS_SECRET_ACCESS_KEY=$SEC AWS_SESSION_TOKEN=$TOK MEM_HOLD=6 \
        "$SLUICE" run --log "$log" --settings "$SJ/s.json" -- "$PY" "$SH/aws/attack_client.py" mem "$u/bucket/mem" 8 48 > "$mo" 2>&1 &
    pid=$!
    for k in $(seq 600); do
        now=$(rss_tree "$pid")
        [ "$now" -gt "$peak" ] && peak=$now
        grep -q "^HELD" "$mo" && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.2
    done
    sleep 1
    now=$(rss_tree "$pid")
    [ "$now" -gt "$peak" ] && peak=$now
    wait "$pid"
    echo "# mem: sluice's peak RSS $((peak / 1024)) MiB with 8 x 48 MiB held bodies; $(grep '^HELD' "$mo")"
    # under ASan the freed doublings of each body stay in its quarantine and
    # every byte has shadow: three times the room (transparent.sh does so too)
    local lim=300
    grep -qa __asan_init "$SLUICE" && lim=900
    if grep -q "^HELD" "$mo" && [ "$peak" -lt $((lim * 1024)) ] && ! grep -q "^REQ" <<<"$(rec)" &&
        grep -q "take all the room" "$log"; then
        ok "mem: 8 connections each holding 48 MiB: the proxy holds at most its total (peak RSS $((peak / 1024)) MiB), the rest refused (503)"
    else bad "HOLE mem: 8 connections each holding a 48 MiB body: no bound over all held bodies (peak RSS $((peak / 1024)) MiB)" \
        "$(grep -v '^$' "$mo" | head -12)"; fi
}

# --- the namespace, certificates, origin, dnsmasq (root only) -----------------
PY=/usr/bin/python3
if [ -z "${AA_CHILD:-}" ]; then
    if ! ip link set lo up || ip route get 1.1.1.1 >/dev/null 2>&1; then
        bad "no private network namespace"; e2e_finish; exit
    fi
    SH=$(mktemp -d /var/tmp/sluice-awsatk.XXXXXX) && chmod 755 "$SH"
    SJ=$(mktemp -d /run/sluice-awsatk-json.XXXXXX) && chmod 755 "$SJ" || { bad "settings directory"; e2e_finish; exit; }
    trap 'e2e_cleanup; rm -rf "$SH" "$SJ"' EXIT
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 -subj "/CN=aws CA" \
        -keyout "$SH/ca.key" -out "$SH/ca.pem" -addext "basicConstraints=critical,CA:TRUE" \
        -addext "keyUsage=critical,keyCertSign,cRLSign" -addext "subjectKeyIdentifier=hash" 2>>"$SH/openssl.err" &&
        openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=s3.aws.test" \
            -keyout "$SH/o.key" -out "$SH/o.csr" 2>>"$SH/openssl.err" &&
        openssl x509 -req -in "$SH/o.csr" -CA "$SH/ca.pem" -CAkey "$SH/ca.key" -days 30 \
            -extfile <(printf 'subjectAltName=DNS:s3.aws.test,DNS:sts.aws.test,DNS:other.test\nbasicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nauthorityKeyIdentifier=keyid\n') \
            -out "$SH/o.pem" 2>>"$SH/openssl.err" || { bad "certificates" "$(cat "$SH/openssl.err")"; e2e_finish; exit; }
    chmod 644 "$SH"/*.pem "$SH/o.key"
    mkdir -p "$SH/rec" "$SH/aws" && chmod 777 "$SH/rec"
    cp "$HERE/aws-helpers/"*.py "$SH/aws/" && chmod -R a+rX "$SH/aws"
    PA=$(free_port)
    python3 "$SH/aws/attack_origin.py" "$O1" "$PA" "$SH/o.pem" "$SH/o.key" "$SH/rec" "$SEC" 2>"$SH/origin.err" &
    PIDS+=($!)
    for i in $(seq 100); do
        curl -s -o /dev/null --max-time 1 --cacert "$SH/ca.pem" --resolve "s3.aws.test:$PA:$O1" \
            "https://s3.aws.test:$PA/up" && break
        sleep 0.1
    done
    rm -f "$SH/rec/"*
    start_dnsmasq --address=/aws.test/$O1 --address=/other.test/$O1 ||
        { bad "dnsmasq did not start" "$(cat "$T/dnsmasq.err")"; e2e_finish; exit; }
    cp "$SH/ca.pem" "$SJ/ca.pem"
    base='"allowedDomains": ["*.aws.test", "other.test", "'"$O1"'"], "dnsServers": ["127.0.0.1:'"$DPORT"'"], "denyPrivateAddresses": false, "tlsTerminate": {"extraCaCertPaths": ["'"$SJ"'/ca.pem"]}'
    pairs='"awsPairs": [{"accessKeyIdVar": "AWS_ACCESS_KEY_ID", "secretAccessKeyVar": "AWS_SECRET_ACCESS_KEY", "sessionTokenVar": "AWS_SESSION_TOKEN", "injectHosts": ["s3.aws.test"]}]'
    cat > "$SJ/s.json" <<JSON
{"network": {$base}, "credentials": {$pairs}}
JSON
    chmod 644 "$SJ"/*.json
fi

start=$SECONDS
if [ -n "${AA_CHILD:-}" ]; then
    SH=$AA_SH SJ=$AA_SJ PA=$AA_PA DPORT=$AA_DPORT
    cases
    e2e_finish
    exit
fi
cases
# --- the same cases as an unprivileged user -----------------------------------
if command -v setpriv >/dev/null && { id sluicetest >/dev/null 2>&1 || useradd -M -s /usr/sbin/nologin sluicetest >/dev/null 2>&1; }; then
    U=$(id -u sluicetest) G=$(id -g sluicetest)
    cp "$SLUICE" "$SH/sluice" && chmod 755 "$SH/sluice"
    cp -r "$HERE/aws_attack.sh" "$HERE/lib.sh" "$HERE/netns.sh" "$SH/" && chmod a+rX "$SH"/*.sh
    echo "# --- the same cases as uid $U (setpriv) ---"
    (cd / && setpriv --reuid="$U" --regid="$G" --clear-groups --inh-caps=-all \
        env AA_NETNS=1 AA_CHILD=1 AA_SH="$SH" AA_SJ="$SJ" AA_RND="$RND" AA_PA="$PA" \
        AA_DPORT="$DPORT" PATH="/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin" \
        bash "$SH/aws_attack.sh" "$SH/sluice") 2>&1 | tee "$T/child.out"
    e2e_add_counts "$T/child.out"
else
    echo "# SKIP the unprivileged pass: no setpriv or no user"
fi
echo "# aws_attack.sh took $((SECONDS - start)) s"
e2e_finish
