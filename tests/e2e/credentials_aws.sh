#!/usr/bin/env bash
# tests/e2e/credentials_aws.sh - credentials.awsPairs in `sluice run` (issue
# 24, deliverable 3): the sandbox holds placeholders of an AWS key id, secret
# and session token; a request it signs with them (SigV4) to the pair's hosts
# is checked with the placeholder secret and re-signed by the proxy with the
# real secret.
#
# As root: a private network namespace (unshare -n) with an HTTPS origin on
# 127.0.0.10 that verifies every request's signature with the REAL secret
# (aws-helpers/sigv4.py, written from AWS's documentation) and records the
# outcome; dnsmasq on 127.0.0.1 answers the *.test names. s3.aws.test and
# sts.aws.test are the pair's hosts (allowedDomains), other.test is not.
# The sandbox signs with aws-helpers/client.py (its own signer, or
# botocore's SigV4Auth when python has it). Checked: placeholders in the
# sandbox; GET, PUT with UNSIGNED-PAYLOAD, with a literal body hash (body
# held and buffered), with a placeholder in the body (swapped, hash
# rewritten), and a form POST hashed by the signer (STS's shape) all
# verify at the origin with the real key id, secret and token; a request
# not signed with the placeholder secret, or changed after signing, is
# refused (403) and never sent; streaming, presigned and SigV4a requests
# are refused by default and pass with sigv4 passthrough; a body over 64
# MiB is refused; a request to other.test keeps the fake signature; the
# real secret is found nowhere in the sandbox, nor in sluice's log. The
# cases run as root, then as an unprivileged user (setpriv). Skips when not
# root.
set -uo pipefail
SLUICE=${1:?usage: credentials_aws.sh PATH/TO/sluice}
case $SLUICE in /*) ;; *) SLUICE=$(cd "$(dirname "$SLUICE")" && pwd)/$(basename "$SLUICE") ;; esac
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
O1=127.0.0.10

. "$HERE/netns.sh"
e2e_netns AWS_NETNS "credentials_aws" "$SLUICE"

. "$HERE/lib.sh"
e2e_who AWS_CHILD

# The real values, with random digits per run (never printed by the checks).
RND=${AWS_RND:-$(shuf -i 1000000000-9999999999 -n1)}
KID=AKIAREAL${RND}XY
SEC=wJalrXUtnFEMI/K7MDENG+bPxRf${RND}CYEXKEY
TOK=IQoJb3JpZ2luX2VjEPT//////////wEaCXVzLWVhc3QtMSJHMEUCIQ${RND}AbCdEfGhIj+kLmN/oPq==

cases() {
    local out rc log=$T/log.$WHO r
    export XDG_RUNTIME_DIR=$T/xdg
    mkdir -p -m 700 "$XDG_RUNTIME_DIR"
    cd "$T" || return
    sr() { local s=$1; shift; AWS_ACCESS_KEY_ID=$KID AWS_SECRET_ACCESS_KEY=$SEC AWS_SESSION_TOKEN=$TOK \
        "$SLUICE" run --log "$log" --settings "$SJ/$s" -- "$@"; }
    cl() { sr s.json "$PY" "$SH/aws/client.py" "$@"; }
    rec() { cat "$SH/rec/"* 2>/dev/null; }
    clear() { rm -f "$SH/rec/"*; }
    : > "$log"

    # what the sandbox sees (placeholders are made afresh for each run)
    out=$(sr s.json sh -c 'printf "%s\n%s\n%s\n" "$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" "$AWS_SESSION_TOKEN"' 2>&1)
    FK=$(sed -n 1p <<<"$out") FS=$(sed -n 2p <<<"$out") FT=$(sed -n 3p <<<"$out")
    if [ "${#FK}" = "${#KID}" ] && [ "${#FS}" = "${#SEC}" ] && [ "${#FT}" = "${#TOK}" ] &&
        [ "$FK" != "$KID" ] && [ "$FS" != "$SEC" ] && [ "$FT" != "$TOK" ] &&
        ! grep -qF -e "$KID" -e "$SEC" -e "$TOK" <<<"$out"; then
        ok "the sandbox sees placeholders of the key id, secret and token, of their lengths"
    else bad "placeholders" "$(sed "s#$SEC#<SEC>#g; s#$KID#<KID>#g" <<<"$out")"; fi

    u=https://s3.aws.test:$PA
    # each shape verifies at the origin with the real key id, secret and token
    for m in "GET literal $u/bucket/key.txt" "PUT unsigned $u/bucket/u.bin" "PUT literal $u/bucket/l.bin" \
        "PUT trailer $u/bucket/t.bin" \
        "POST nohash https://sts.aws.test:$PA/" "POST botocore https://sts.aws.test:$PA/"; do
        set -- $m
        clear
        case $1 in
        GET) out=$(cl "$2" "$3" 2>&1) ;;
        PUT) out=$(cl "$2" "$3" "@$SH/body.bin" 2>&1) ;;
        POST) out=$(cl "$2" "$3" "Action=GetCallerIdentity&Version=2011-06-15" 2>&1) ;;
        esac
        r=$(rec)
        if grep -q "^STATUS 200" <<<"$out" && grep -q "^verified" <<<"$out" &&
            grep -q "^REQ $1 .* ok=1 why=ok key=$KID tok=$TOK " <<<"$r" &&
            { [ "$1" != PUT ] || grep -q "body=$(stat -c %s "$SH/body.bin") sha=$(sha256sum < "$SH/body.bin" | cut -c1-64)" <<<"$r"; } &&
            ! grep -qF -e "$FK" -e "$FT" -e "$SEC" <<<"$r"; then
            ok "$1 ($2, $(sed -n 's/^SIGNER //p' <<<"$out") signer) re-signed: the origin verifies it with the real key id, secret and token"
        else bad "$1 $2" "$(sed "s#$SEC#<SEC>#g" <<<"$out$r" | head -20)"; fi
    done

    # a placeholder in a body whose hash is signed: swapped, the hash rewritten
    clear
    out=$(sr s.json sh -c 'printf "key=%s\n" "$AWS_ACCESS_KEY_ID" > /tmp/b; "$0" "$1"/client.py literal '"$u"'/bucket/k.txt @/tmp/b' "$PY" "$SH/aws" 2>&1)
    r=$(rec)
    if grep -q "^STATUS 200" <<<"$out" && grep -q "^REQ PUT .* ok=1 why=ok .* raw=key=$KID\.$" <<<"$r"; then
        ok "a placeholder in a body with a literal hash: swapped, x-amz-content-sha256 rewritten, the signature verifies"
    else bad "body swap with a literal hash" "$(sed "s#$SEC#<SEC>#g" <<<"$out$r" | head -20)"; fi

    # refused, never sent: not signed with the placeholder secret; changed after signing
    for m in badsecret tamper; do
        clear
        out=$(cl "$m" "$u/bucket/x" 2>&1)
        if grep -q "^STATUS 403" <<<"$out" && grep -q "does not verify with the masked secret's placeholder" <<<"$out" &&
            [ -z "$(rec)" ] && grep -q "secret_placeholder=AWS_ACCESS_KEY_ID,AWS_SESSION_TOKEN" "$log" &&
            ! grep -q "secret_placeholder=[^ ]*AWS_SECRET_ACCESS_KEY" "$log"; then
            ok "a request $([ $m = badsecret ] && echo "signed with another secret" || echo "changed after signing") is refused (403, reason) and never sent; the log names the key id and token"
        else bad "$m" "$out $(rec | head -5)"; fi
    done

    # streaming, presigned, SigV4a: denied by default, passed with passthrough
    for m in streaming presigned sigv4a; do
        clear
        out=$(cl "$m" "$u/bucket/s" 2>&1)
        o2=$(AWS_ACCESS_KEY_ID=$KID AWS_SECRET_ACCESS_KEY=$SEC AWS_SESSION_TOKEN=$TOK \
            "$SLUICE" run --log "$log" --settings "$SJ/pass.json" -- "$PY" "$SH/aws/client.py" "$m" "$u/bucket/s" 2>&1)
        if grep -q "^STATUS 403" <<<"$out" && grep -q "credentials.sigv4.$m is \"deny\"" <<<"$out" &&
            grep -q "^STATUS 403" <<<"$o2" && grep -q "SignatureDoesNotMatch" <<<"$o2" &&
            [ "$(rec | grep -c '^REQ')" = 1 ]; then
            ok "$m: refused by default (403 naming credentials.sigv4.$m); with passthrough sent as signed (the origin rejects the fake signature)"
        else bad "$m" "$out // $o2 // $(rec | head -3)"; fi
    done

    # a body over 64 MiB (Content-Length): refused before it is read
    clear
    out=$(cl bigcl "$u/bucket/big" 2>&1)
    if grep -q "^STATUS 403" <<<"$out" && grep -q "over 64 MiB" <<<"$out" && [ -z "$(rec)" ]; then
        ok "a body over 64 MiB with a literal hash is refused (403) and never sent"
    else bad "over 64 MiB" "$(head -5 <<<"$out")"; fi

    # another host: the fake signature goes as it is, and fails there
    clear
    out=$(sr s.json sh -c 'echo "FK=$AWS_ACCESS_KEY_ID"; echo "FT=$AWS_SESSION_TOKEN"; "$0" "$1"/client.py literal "$2"' \
        "$PY" "$SH/aws" "https://other.test:$PA/bucket/key.txt" 2>&1)
    r=$(rec) FK=$(sed -n 's/^FK=//p' <<<"$out") FT=$(sed -n 's/^FT=//p' <<<"$out")
    if grep -q "^STATUS 403" <<<"$out" && grep -qF " ok=0 why=SignatureDoesNotMatch key=$FK tok=$FT " <<<"$r" &&
        ! grep -qF -e "$KID" -e "$TOK" <<<"$r" && grep -q "secret_placeholder=.*AWS_ACCESS_KEY_ID" "$log"; then
        ok "a request to other.test keeps the fake key id, token and signature (logged as secret_placeholder)"
    else bad "other.test" "$out $(head -3 <<<"$r") $(grep -o 'secret_placeholder=[^ ]*' "$log" | head -2)"; fi

    # no real value anywhere the sandbox can see, nor in the log: the
    # sandbox prints its environment, /proc entries and small files; the
    # search runs here (the sandbox is never given a real value to look for)
    sr s.json sh -c 'env; cat /proc/self/environ /proc/self/cmdline /proc/self/mountinfo
        find /tmp /var/tmp /run "$HOME" -xdev -type f -size -1M -readable -exec cat {} + 2>/dev/null' > "$T/seen.$WHO" 2>&1
    if grep -qax "AWS_SECRET_ACCESS_KEY=.\{${#SEC}\}" "$T/seen.$WHO" && ! grep -qaF -e "$SEC" -e "$KID" -e "$TOK" "$T/seen.$WHO" &&
        [ -s "$log" ] && ! grep -qF -e "$SEC" -e "$KID" -e "$TOK" "$log"; then
        ok "no real value (key id, secret, token) in the sandbox's environment, /proc entries or small files, nor in sluice's log"
    else bad "leak search" "$(grep -caF -e "$SEC" -e "$KID" -e "$TOK" "$T/seen.$WHO") lines in the sandbox, $(grep -cF -e "$SEC" -e "$KID" -e "$TOK" "$log") in the log"; fi
}

# --- the namespace, certificates, origin, dnsmasq (root only) -----------------
PY=/usr/bin/python3
if [ -z "${AWS_CHILD:-}" ]; then
    [ "$(command -v python3)" != "" ] && python3 -c 'import botocore' 2>/dev/null && PY=$(command -v python3)
    if ! ip link set lo up || ip route get 1.1.1.1 >/dev/null 2>&1; then
        bad "no private network namespace"; e2e_finish; exit
    fi
    SH=$(mktemp -d /var/tmp/sluice-aws.XXXXXX) && chmod 755 "$SH"
    SJ=$(mktemp -d /run/sluice-aws-json.XXXXXX) && chmod 755 "$SJ" || { bad "settings directory"; e2e_finish; exit; }
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
    head -c 300000 /dev/urandom > "$SH/body.bin" && chmod 644 "$SH/body.bin"
    PA=$(free_port)
    python3 "$SH/aws/origin.py" "$O1" "$PA" "$SH/o.pem" "$SH/o.key" "$SH/rec" "$SEC" 2>"$SH/origin.err" &
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
    pairs='"awsPairs": [{"accessKeyIdVar": "AWS_ACCESS_KEY_ID", "secretAccessKeyVar": "AWS_SECRET_ACCESS_KEY", "sessionTokenVar": "AWS_SESSION_TOKEN", "injectHosts": ["*.aws.test"]}]'
    # other.test is allowed, but the pair's hosts are *.aws.test only
    # (injectHosts on a pair is sluice's: srt's pairs go to allowedDomains)
    cat > "$SJ/s.json" <<JSON
{"network": {$base}, "credentials": {$pairs}}
JSON
    cat > "$SJ/pass.json" <<JSON
{"network": {$base}, "credentials": {$pairs, "sigv4": {"streaming": "passthrough", "presigned": "passthrough", "sigv4a": "passthrough"}}}
JSON
    chmod 644 "$SJ"/*.json
fi

start=$SECONDS
if [ -n "${AWS_CHILD:-}" ]; then
    SH=$AWS_SH SJ=$AWS_SJ PA=$AWS_PA DPORT=$AWS_DPORT
    cases
    e2e_finish
    exit
fi
cases
# --- the same cases as an unprivileged user -----------------------------------
if command -v setpriv >/dev/null && { id sluicetest >/dev/null 2>&1 || useradd -M -s /usr/sbin/nologin sluicetest >/dev/null 2>&1; }; then
    U=$(id -u sluicetest) G=$(id -g sluicetest)
    cp "$SLUICE" "$SH/sluice" && chmod 755 "$SH/sluice"
    cp -r "$HERE/credentials_aws.sh" "$HERE/lib.sh" "$HERE/netns.sh" "$SH/" && chmod a+rX "$SH"/*.sh
    echo "# --- the same cases as uid $U (setpriv) ---"
    (cd / && setpriv --reuid="$U" --regid="$G" --clear-groups --inh-caps=-all \
        env AWS_NETNS=1 AWS_CHILD=1 AWS_SH="$SH" AWS_SJ="$SJ" AWS_RND="$RND" AWS_PA="$PA" \
        AWS_DPORT="$DPORT" PATH="/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin" \
        bash "$SH/credentials_aws.sh" "$SH/sluice") 2>&1 | tee "$T/child.out"
    e2e_add_counts "$T/child.out"
else
    echo "# SKIP the unprivileged pass: no setpriv or no user"
fi
echo "# credentials_aws.sh took $((SECONDS - start)) s"
e2e_finish
