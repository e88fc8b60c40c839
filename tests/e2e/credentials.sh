#!/usr/bin/env bash
# tests/e2e/credentials.sh - "credentials" in `sluice run` (issue 24,
# deliverables 1, 2 and 5): the sandbox holds placeholders, the proxy swaps
# in the real values only for requests to each entry's injectHosts.
#
# As root: a private network namespace (unshare -n) with an HTTPS origin and
# a plain-HTTP origin on 127.0.0.10 that record every request they get
# (line, headers, body) and echo its Authorization back; dnsmasq on
# 127.0.0.1 answers the *.test names. inj.test is the credential's host,
# other.test is not, pin.inj.test is one of its hosts that tlsTerminate
# excludes. Checked: each substitution site (header, body split across
# chunks, path, query, Basic) arrives with the real value at inj.test and
# with the placeholder at other.test (named in the log as
# secret_placeholder); a response echoing the value comes back masked;
# fail-closed refusals (plain HTTP without allowPlaintextInject, an
# excluded host); a masked and a denied file; load-time refusals; and a
# search of the sandbox's environment, files and /proc and of sluice's log
# and messages finds no real value. The cases run as root, then again as an
# unprivileged user (setpriv) in the same namespace. Nothing reaches the
# host's network. Skips when not root.
set -uo pipefail
SLUICE=${1:?usage: credentials.sh PATH/TO/sluice}
case $SLUICE in /*) ;; *) SLUICE=$(cd "$(dirname "$SLUICE")" && pwd)/$(basename "$SLUICE") ;; esac
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
O1=127.0.0.10

. "$HERE/netns.sh"
e2e_netns CRED_NETNS "credentials" "$SLUICE"

. "$HERE/lib.sh"
e2e_who CRED_CHILD

# The secrets (never printed by the checks below: they compare and count),
# with 10 random digits per run, so that another script's copies of them
# (a red-team script beside this one) cannot be found by the leak search.
RND=${CRED_RND:-$(shuf -i 1000000000-9999999999 -n1)}
REAL=ghp_R3alT0kenValue${RND}abcdefXYZ
FREAL=file-secret-${RND}9f8e7d6c5b
DREAL=denied-file-content-never-seen-$RND
DUP=dupsecretvalue$RND
NOM=nomatch-secretish-$RND
b64u() { base64 -w0 | tr '+/' '-_' | tr -d '='; }
JWTH=$(printf '{"alg":"HS256","typ":"JWT"}' | b64u)
JWTP=$(printf '{"sub":"user-1234567890","exp":1999999999,"name":"Al"}' | b64u)
JWTS=Zm9vYmFyYmF6cXV4cXV1eHF1dXpxd${RND}enF1dXo
JWTV=$JWTH.$JWTP.$JWTS

# --- the cases (root, then the user: the state comes in CRED_*) ---------------
cases() {
    local S=$SJ/s.json out rc log=$T/log.$WHO rec
    export XDG_RUNTIME_DIR=$T/xdg
    mkdir -p -m 700 "$XDG_RUNTIME_DIR"
    cd "$T" || return
    sr() { TOKEN=$REAL GONE=$REAL JWT=$JWTV "$SLUICE" run --log "$log" --settings "$@"; }
    rec() { cat "$SH/rec/"* 2>/dev/null; }
    : > "$log"
    rm -f "$SH/rec/"*

    # what the sandbox sees: placeholders of the same length, never the values
    out=$(sr "$S" -- sh -c 'printf "%s\n" "$TOKEN"; printf "%s\n" "${GONE-unset}"; grep "^token = " '"$SH"'/tok.txt; (wc -c < '"$SH"'/denied.txt) 2>/dev/null || echo 0' 2>&1)
    P=$(sed -n 1p <<<"$out") FP=$(sed -n 3p <<<"$out" | sed 's/^token = //')
    if [ "${#P}" = "${#REAL}" ] && [ "$P" != "$REAL" ] && [ "${P:3:1}" = "_" ] &&
        [[ "$P" =~ ^[a-z]{3}_[A-Z][0-9][a-z]{2}[A-Z][0-9][a-z]{3}[A-Z][a-z]{4}[0-9]{10}[a-z]{6}[A-Z]{3}$ ]] &&
        [ "$(sed -n 2p <<<"$out")" = "unset" ] && [ "${#FP}" = "${#FREAL}" ] && [ "$FP" != "$FREAL" ] &&
        [ "$(sed -n 4p <<<"$out")" = "0" ] && ! grep -qF -e "$REAL" -e "$FREAL" -e "$DREAL" <<<"$out"; then
        ok "the sandbox sees placeholders of the values' length and shape (env var on the secret list, extract in a file); a denied variable is unset, a denied file empty"
    else bad "placeholders in the sandbox" "$(sed "s/$REAL/<REAL>/g; s/$FREAL/<FREAL>/g" <<<"$out")"; fi

    # maskDuplicates masks every copy; an extract without a match under
    # onExtractNoMatch "deny" hides the file
    out=$(sr "$S" -- sh -c 'cat '"$SH"'/dup.txt; (cat '"$SH"'/nomatch.txt) 2>/dev/null | wc -c' 2>&1)
    d1=$(sed -n 's/^key=//p' <<<"$out") d2=$(sed -n 's/^again: //p' <<<"$out")
    if [ "${#d1}" = "${#DUP}" ] && [ "$d1" = "$d2" ] && [ "$d1" != "$DUP" ] && ! grep -qF -e "$DUP" -e "$NOM" <<<"$out" &&
        [ "$(tail -1 <<<"$out")" = "0" ]; then
        ok "maskDuplicates masks every copy with one placeholder; onExtractNoMatch deny hides the file"
    else bad "maskDuplicates / onExtractNoMatch" "$(sed "s/$DUP/<DUP>/g; s/$NOM/<NOM>/g" <<<"$out")"; fi

    out=$(sr "$SJ/warn.json" -- cat "$SH/nomatch.txt" 2>&1); rc=$?
    [ "$rc" = 0 ] && grep -qF "$NOM" <<<"$out" && grep -q 'extract does not match; the file is shown as it is (onExtractNoMatch "warn")' <<<"$out" &&
        ok "onExtractNoMatch warn shows the file as it is, with a warning naming the entry" || bad "onExtractNoMatch warn" "rc $rc: $out"
    out=$(sr "$SJ/nomatcherr.json" -- true 2>&1); rc=$?
    [ "$rc" = 125 ] && grep -q 'credentials.files\[0\]: extract does not match the file (onExtractNoMatch "error")' <<<"$out" &&
        ok "an extract without a match refuses the run by default (125), naming the entry" || bad "onExtractNoMatch error" "rc $rc: $out"

    # each substitution site at the credential's host: real values arrive
    out=$(sr "$S" -- sh -c 'printf "P=%s\n" "$TOKEN"
        u=https://inj.test:'"$PA"'
        b=/tmp/body; head -c 65500 /dev/zero | tr "\0" a > $b; printf "%s" "$TOKEN" >> $b; head -c 70000 /dev/zero | tr "\0" b >> $b
        printf "%s" "$TOKEN" >> $b; printf "%s\n" "$(cat '"$SH"'/tok.txt)" >> $b
        curl -sS --max-time 10 -H "Authorization: Bearer $TOKEN" -H "X-Tok: $TOKEN" "$u/p/$TOKEN?q=$TOKEN" -o /tmp/r1 -D /tmp/h1
        curl -sS --max-time 10 -u "x-access-token:$TOKEN" "$u/basic" -o /tmp/r2
        curl -sS --max-time 10 --proxy socks5h://127.0.0.1:1080 -H "X-Socks: $TOKEN" "$u/socks" -o /dev/null
        curl -sS --max-time 10 -H "Transfer-Encoding: chunked" --data-binary @$b "$u/chunked" -o /dev/null
        curl -sS --max-time 10 --data-binary @$b "$u/cl" -o /dev/null
        cat /tmp/r1 /tmp/r2; grep -i "^x-echo" /tmp/h1' 2>&1)
    r=$(rec) P=$(sed -n 's/^P=//p' <<<"$out")
    n_real=$(grep -oF "$REAL" <<<"$r" | wc -l) n_p=$(grep -oF "$P" <<<"$r" | wc -l)
    n_freal=$(grep -oF "$FREAL" <<<"$r" | wc -l)
    if grep -q "^LINE GET /p/$REAL?q=$REAL " <<<"$r" && grep -q "^H authorization: Bearer $REAL" <<<"$r" &&
        grep -q "^H x-tok: $REAL" <<<"$r" && grep -q "^H x-socks: $REAL" <<<"$r" &&
        grep -q "^H authorization: Basic $(printf 'x-access-token:%s' "$REAL" | base64 -w0)" <<<"$r" &&
        grep -q "^BODY chunked .*real=2 fake=0" <<<"$r" && grep -q "^BODY cl .*real=2 fake=0" <<<"$r" &&
        [ "$n_p" = 0 ] && [ "$n_freal" -ge 2 ]; then
        ok "at inj.test (through the HTTP proxy and SOCKS5) the real value arrives in the path, the query, headers, Basic credentials and bodies (chunked and Content-Length, split across chunks and reads); no placeholder arrives"
    else bad "substitution at inj.test" "real=$n_real fake=$n_p freal=$n_freal $(sed "s/$REAL/<REAL>/g; s/$P/<P>/g" <<<"$r" | grep -v '^BODYDATA' | head -20)"; fi
    # the origin echoed the real value: the sandbox gets the placeholder back
    if grep -q "^echo Bearer $P" <<<"$out" && ! grep -qF "$REAL" <<<"$out" && grep -qi "^x-echo: Bearer $P" <<<"$out" &&
        [ "$(sed -n 's/^echo Basic //p' <<<"$out" | base64 -d 2>/dev/null | cut -c1-51)" = "x-access-token:${P:0:36}" ] &&
        ! grep -qF "$(printf 'x-access-token:%s' "$REAL" | base64 -w0 | cut -c20-40)" <<<"$out"; then
        ok "a response echoing the real value (header and body, literal and as Basic base64) reaches the sandbox with the placeholder"
    else bad "response masking" "$(sed "s/$REAL/<REAL>/g; s/$P/<P>/g" <<<"$out")"; fi

    # git over HTTPS behind Basic: the token in the URL, and from a credential helper
    out=$(sr "$S" -- sh -c 'git clone -q "https://x-access-token:$TOKEN@inj.test:'"$PA"'/repo.git" /tmp/a && cat /tmp/a/README
        git -c credential.helper="!f() { echo username=x-access-token; echo password=\$TOKEN; }; f" \
            clone -q "https://inj.test:'"$PA"'/repo.git" /tmp/b && cat /tmp/b/README
        git clone -q "https://x-access-token:$TOKEN@other.test:'"$PA"'/repo.git" /tmp/c 2>/dev/null || echo refused-elsewhere' 2>&1)
    if [ "$(grep -v '^sluice:' <<<"$out")" = "cloned with a masked token
cloned with a masked token
refused-elsewhere" ]; then
        ok "git clone with a masked token in the URL and through a credential helper (the origin checks the real Basic credentials); the same URL to other.test fails"
    else bad "git clone" "$(sed "s/$REAL/<REAL>/g" <<<"$out")"; fi

    # decode jwt: a token of the same shape (header kept, sub masked, the
    # signature replaced); the real token arrives at inj.test
    rm -f "$SH/rec/"*
    out=$(sr "$S" -- sh -c 'printf "J=%s\n" "$JWT"; curl -sS --max-time 10 -H "Authorization: Bearer $JWT" "https://inj.test:'"$PA"'/jwt" -o /dev/null' 2>&1)
    J=$(sed -n 's/^J=//p' <<<"$out") r=$(rec)
    jc=$(cut -d. -f2 <<<"$J" | tr '_-' '/+'); while [ $((${#jc} % 4)) != 0 ]; do jc="$jc="; done
    jc=$(base64 -d <<<"$jc" 2>/dev/null)
    if [ "${#J}" = "${#JWTV}" ] && [ "$(cut -d. -f1 <<<"$J")" = "$JWTH" ] && [ "$(cut -d. -f3 <<<"$J")" != "$JWTS" ] &&
        [[ "$jc" =~ ^\{\"sub\":\"[A-Za-z0-9]{15}\",\"exp\":1999999999,\"name\":\"Al\"\}$ ]] &&
        ! grep -q "user-1234567890" <<<"$jc" && grep -q "^H authorization: Bearer $JWTV$" <<<"$r"; then
        ok "decode jwt: the sandbox gets a token of the same shape (header and claims kept, sub masked, signature replaced); inj.test gets the real one"
    else bad "decode jwt" "J=$J claims=$jc $(grep authorization <<<"$r")"; fi

    # another host: placeholders untouched, named in the log, counted
    rm -f "$SH/rec/"*
    out=$(sr "$S" -- sh -c 'printf "P=%s\n" "$TOKEN"; u=https://other.test:'"$PA"'
        curl -sS --max-time 10 -H "Authorization: Bearer $TOKEN" "$u/x/$TOKEN?q=$TOKEN" -o /dev/null
        curl -sS --max-time 10 -u "x-access-token:$TOKEN" "$u/basic" -o /dev/null
        curl -sS --max-time 10 -H "Host: inj.test" -H "X-Tok: $TOKEN" "$u/hosthdr" -o /dev/null
        printf "%s" "$TOKEN" > /tmp/b; curl -sS --max-time 10 --data-binary @/tmp/b "$u/cl" -o /dev/null; echo done' 2>&1)
    r=$(rec) P=$(sed -n 's/^P=//p' <<<"$out")
    if grep -q "^H authorization: Bearer $P" <<<"$r" && ! grep -qF "$REAL" <<<"$r" &&
        grep -q "^LINE GET /x/$P?q=$P " <<<"$r" && grep -q "^H x-tok: $P" <<<"$r" &&
        grep -q "^H authorization: Basic $(printf 'x-access-token:%s' "$P" | base64 -w0)" <<<"$r" &&
        grep -q "^BODYDATA $P" <<<"$r" &&
        grep -q "secret_placeholder=TOKEN" "$log" && grep -q "placeholder of TOKEN went to a host outside" <<<"$out"; then
        ok "at other.test every site (path, query, header, Basic, body; also with a Host header naming inj.test) carries the placeholder untouched; the decision record names it (secret_placeholder=TOKEN) and the summary counts it"
    else bad "placeholder at another host" "$(sed "s/$REAL/<REAL>/g; s/$P/<P>/g" <<<"$r$out")"; fi

    # fail closed: plain HTTP to the credential's host, and a host excluded from termination
    rm -f "$SH/rec/"*
    out=$(sr "$S" -- sh -c 'printf "P=%s\n" "$TOKEN"; head -c 3000 /dev/zero | tr "\0" c > /tmp/pb; printf "%s" "$TOKEN" >> /tmp/pb
        curl -sS --max-time 10 -o /dev/null -w "%{http_code}\n" --data-binary @/tmp/pb http://inj.test:'"$PH"'/plainbody 2>/dev/null
        curl -sS --max-time 10 -o /dev/null -w "%{http_code}\n" -H "X-Tok: $TOKEN" http://inj.test:'"$PH"'/plain
        curl -sS --max-time 10 -o /dev/null -w "%{http_code}\n" http://inj.test:'"$PH"'/nothing
        curl -sS --max-time 10 -o /dev/null -w "%{http_code}\n" -H "X-Tok: $TOKEN" https://pin.inj.test:'"$PA"'/pinned' 2>&1)
    sleep 0.5
    r=$(rec) P=$(sed -n 's/^P=//p' <<<"$out") out=$(grep -v '^P=' <<<"$out")
    if [ "$(sed -n 2,3p <<<"$out")" = "403
200" ] && [ "$(head -1 <<<"$out")" != 200 ] && [ "$(grep -v '^curl:\|^sluice:' <<<"$out" | sed -n 4p)" = "000" ] &&
        ! grep -q "/plain \|/pinned" <<<"$r" && ! grep -qF "$P" <<<"$r" &&
        grep -q "/nothing" <<<"$r" && grep -q "credential placeholder in a plain-HTTP request" "$log"; then
        ok "fail closed: a placeholder in plain HTTP to its host is refused (in the head: 403, never sent; in the body: cut before it) and a CONNECT to a credential host excluded from termination is refused; plain HTTP without one passes"
    else bad "fail closed" "$(sed "s/$REAL/<REAL>/g; s/$P/<P>/g" <<<"$out
$r")"; fi

    # no leak: the sandbox's environment, files and /proc; sluice's log and
    # messages (the origin's records hold no real value at this point; the
    # user pass's copy of this script, which spells them, is left out)
    rm -f "$SH/rec/"*
    out=$(sr "$S" -- sh -c 'env; cat /proc/*/environ /proc/*/cmdline 2>/dev/null | tr "\0" "\n";
        find /tmp /var/tmp /run "$HOME" . -xdev -type f -size -2M ! -path "*/e2e/*" 2>/dev/null | head -2000 | xargs cat 2>/dev/null | tr -d "\0"
        cat /proc/self/mountinfo; ls -la /proc/1/fd 2>&1' 2>&1)
    all="$out
$(cat "$log")"
    if ! grep -qF -e "$REAL" -e "$FREAL" -e "$DREAL" -e "$JWTS" -e "$DUP" -e "$NOM" <<<"$all" && [ -s "$log" ]; then
        ok "no real value in the sandbox's environment, /proc (environ, cmdline, mountinfo), readable files, nor in sluice's log and messages"
    else bad "a real value leaked" "$(grep -nF -e "$REAL" -e "$FREAL" -e "$DREAL" <<<"$all" | cut -c1-200 | sed "s/$REAL/<REAL>/g" | head)"; fi

    # load-time refusals, naming the key (never accepted and ignored)
    out=$(TOKEN=short "$SLUICE" run --settings "$S" -- true 2>&1); rc=$?
    [ "$rc" = 125 ] && grep -q "credentials.envVars\[0\]: the secret is shorter than 16 bytes" <<<"$out" &&
        ok "a value shorter than 16 bytes is refused (125), naming the entry" || bad "short value" "rc $rc: $out"
    out=$(sr "$SJ/notls.json" -- true 2>&1); rc=$?
    [ "$rc" != 0 ] && grep -q 'credentials.envVars\[0\]: mode "mask" needs network.tlsTerminate' <<<"$out" &&
        ok "mask without tlsTerminate (nor allowPlaintextInject) is refused, naming the entry" || bad "mask without tlsTerminate" "rc $rc: $out"
    # the settings conflict is told before any kernel piece transparent mode
    # needs (valgrind 3.19 has no pidfd_getfd: this ran first there, and
    # was skipped), also on a kernel without pidfd_getfd (no_pidfd_getfd.py:
    # a seccomp filter answering it ENOSYS), by --transparent and by the key
    nopg() { TOKEN=$REAL GONE=$REAL JWT=$JWTV python3 "$HERE/cred-helpers/no_pidfd_getfd.py" "$SLUICE" run --log "$log" --settings "$@"; }
    out=$(nopg "$SJ/deny.json" --transparent -- true 2>&1); rc=$?
    [ "$rc" = 125 ] && grep -q 'transparent mode needs pidfd_getfd' <<<"$out" &&
        ok "without pidfd_getfd (seccomp filter) transparent mode is refused (125), naming it: the filter works" || bad "no pidfd_getfd" "rc $rc: $out"
    for how in "sr plain.json --transparent" "sr plain-tp.json" "nopg plain.json --transparent" "nopg plain-tp.json"; do
        set -- $how
        out=$($1 "$SJ/$2" ${3:-} -- true 2>&1); rc=$?
        [ "$rc" = 125 ] && grep -q "credentials.envVars\[0\]: transparent mode" <<<"$out" &&
            ! grep -q 'pidfd_getfd' <<<"$out" &&
            ok "mask with transparent mode is refused (125), the settings conflict told ($how): its connect()s bypass the proxy" ||
            bad "mask with transparent ($how)" "rc $rc: $out"
    done
    out=$(sr "$SJ/aws.json" -- true 2>&1); rc=$?
    [ "$rc" != 0 ] && grep -q "credentials.awsPairs\[0\]: .*the variable is also an envVars entry" <<<"$out" &&
        ok "a variable both in envVars and in awsPairs is refused, naming the pair (credentials_aws.sh tests awsPairs)" || bad "awsPairs" "rc $rc: $out"
    out=$(timeout 10 "$SLUICE" proxy --settings "$SJ/plain.json" --http tcp:127.0.0.1:0 --socks off 2>&1); rc=$?
    [ "$rc" != 0 ] && grep -q 'refused by sluice proxy: mode "mask"' <<<"$out" &&
        ok "sluice proxy refuses mask entries, saying why" || bad "sluice proxy" "rc $rc: $out"

    # issue 24 item 4: a masking entry only from a settings file the sandbox
    # could not have written. In the writable working directory: refused.
    cp "$S" ./proj.json && chmod 644 ./proj.json
    rm -f "$SH/rec/"*
    out=$(sr ./proj.json -- sh -c 'curl -sS --max-time 5 -H "X-Tok: $TOKEN" https://inj.test:'"$PA"'/proj' 2>&1); rc=$?
    [ "$rc" = 125 ] && grep -q "^sluice: run: ./proj.json:[0-9]*:[0-9]*: credentials.envVars\[0\]: refused: mode \"mask\" .* is inside '$T', which the sandboxed command may write" <<<"$out" &&
        [ -z "$(rec)" ] && ok "a --settings file in the writable working directory that masks a variable is refused (125, file:line and why); nothing is sent" ||
        bad "mask from the working directory" "rc $rc: $out"
    # the same entries in the user's file work
    rm -f "$SH/rec/"*
    out=$(XDG_CONFIG_HOME=$SJ/xdg TOKEN=$REAL GONE=$REAL JWT=$JWTV "$SLUICE" run -- sh -c 'printf "P=%s\n" "$TOKEN"; curl -sS --max-time 10 -H "X-Tok: $TOKEN" https://inj.test:'"$PA"'/userfile' 2>&1); rc=$?
    r=$(rec) P=$(sed -n 's/^P=//p' <<<"$out")
    [ "$rc" = 0 ] && grep -q "^H x-tok: $REAL" <<<"$r" && [ -n "$P" ] && [ "$P" != "$REAL" ] &&
        ok "the same entries in the user's settings file work (the real value arrives at inj.test)" ||
        bad "mask from the user's file" "rc $rc: $(sed "s/$REAL/<REAL>/g" <<<"$out$r")"
    # a file writable by others, or under /var/tmp: refused, saying why
    out=$(sr "$SJ/open.json" -- true 2>&1); rc=$?
    [ "$rc" = 125 ] && grep -q "open.json:[0-9]*:[0-9]*: credentials.envVars\[0\]: refused: .* is writable by others" <<<"$out" &&
        ok "a settings file writable by others may not mask (125)" || bad "mask from a file writable by others" "rc $rc: $out"
    out=$(sr "$SH/s.json" -- true 2>&1); rc=$?
    [ "$rc" = 125 ] && grep -q "s.json:[0-9]*:[0-9]*: credentials.envVars\[0\]: refused: .* is in '/var/tmp', which is writable by others" <<<"$out" &&
        ok "a settings file under /var/tmp may not mask (125)" || bad "mask from /var/tmp" "rc $rc: $out"
    # deny entries from the working directory's file are fine
    cp "$SJ/deny.json" ./deny.json
    out=$(sr ./deny.json -- sh -c 'printf "%s\n" "${GONE-unset}"' 2>&1); rc=$?
    [ "$rc" = 0 ] && [ "$(tail -1 <<<"$out")" = unset ] && ok "a deny entry from the working directory's file is accepted" ||
        bad "deny from the working directory" "rc $rc: $(sed "s/$REAL/<REAL>/g" <<<"$out")"
    # the user's entry without injectHosts goes where allowedDomains allows:
    # a project file may not widen that
    printf '{"network": {\n  "allowedDomains": ["evil.example", "inj.test"]}}\n' > ./widen.json
    out=$(XDG_CONFIG_HOME=$SJ/xdg2 TOKEN=$REAL "$SLUICE" run --settings ./widen.json -- true 2>&1); rc=$?
    [ "$rc" = 125 ] && grep -q "./widen.json:2:22: network.allowedDomains\[0\]: refused: an allowedDomains entry, while the masked credential at $SJ/xdg2/sluice/settings.json:[0-9]* has no injectHosts" <<<"$out" &&
        ok "a project file may not widen the hosts of a user's entry without injectHosts (125, naming the entry)" ||
        bad "widening allowedDomains" "rc $rc: $out"
    # nor replace the user's list of masks (TOKEN would reach the sandbox as it is)
    printf '{"credentials": {"envVars": [{"name": "GONE", "mode": "deny"}]}}\n' > ./unmask.json
    out=$(XDG_CONFIG_HOME=$SJ/xdg TOKEN=$REAL GONE=$REAL JWT=$JWTV "$SLUICE" run --settings ./unmask.json -- sh -c 'printf "%s\n" "$TOKEN"' 2>&1); rc=$?
    [ "$rc" = 125 ] && grep -q "./unmask.json:1:2: credentials.envVars: refused: it replaces an earlier file's list that held mask entries" <<<"$out" &&
        ! grep -qF "$REAL" <<<"$out" && ok "a project file may not replace the user's list of masked variables (125; the value never reaches the sandbox)" ||
        bad "replacing the user's masks" "rc $rc: $(sed "s/$REAL/<REAL>/g" <<<"$out")"
    # nor turn on plain-HTTP injection for the user's masked entries
    printf '{"credentials": {\n  "allowPlaintextInject": true}}\n' > ./pt.json
    out=$(XDG_CONFIG_HOME=$SJ/xdg TOKEN=$REAL GONE=$REAL JWT=$JWTV "$SLUICE" run --settings ./pt.json -- true 2>&1); rc=$?
    [ "$rc" = 125 ] && grep -q "./pt.json:2:27: credentials.allowPlaintextInject: refused: .* is inside '$T', which the sandboxed command may write" <<<"$out" &&
        ok "a project file may not turn on allowPlaintextInject beside the user's masked entries (125)" ||
        bad "allowPlaintextInject from the working directory" "rc $rc: $out"

    # require: requests to inj.test must carry the placeholder alone in Authorization
    rm -f "$SH/rec/"*
    out=$(sr "$SJ/req.json" -- sh -c 'u=https://inj.test:'"$PA"'; c() { curl -sS --max-time 10 -o /dev/null -w "%{http_code}\n" "$@"; }
        c -H "Authorization: Bearer $TOKEN" $u/req-bearer
        c -u "x-access-token:$TOKEN" $u/req-basic
        c -H "Authorization: Bearer ghp_theSandboxOwnToken0123456789abcdef" $u/req-own
        c -H "Authorization: Bearer $TOKEN" -H "Authorization: Bearer mine" $u/req-two
        c -H "X-Tok: $TOKEN" $u/req-none
        c https://other.test:'"$PA"'/req-other' 2>&1)
    r=$(rec)
    if [ "$(grep -v '^sluice:' <<<"$out")" = "200
200
403
403
403
200" ] && grep -q "^LINE GET /req-bearer " <<<"$r" && grep -q "^H authorization: Bearer $REAL" <<<"$r" &&
        grep -q "^LINE GET /req-basic " <<<"$r" && grep -q "^LINE GET /req-other " <<<"$r" &&
        ! grep -q "req-own\|req-two\|req-none" <<<"$r" &&
        grep -q "credential TOKEN has require: a request to its hosts must carry its placeholder, and nothing else, in the Authorization header" "$log"; then
        ok "require: inj.test gets requests whose Authorization is the placeholder alone (Bearer, Basic); one with the sandbox's own token, a second Authorization or none is refused (403, logged, never sent); other hosts are not affected"
    else bad "require" "$(sed "s/$REAL/<REAL>/g" <<<"$out
$r")"; fi

    # a WebSocket Upgrade to a credential host is refused (frames are not
    # read); non-TLS bytes in a tunnel to it are refused naming credentials
    rm -f "$SH/rec/"*
    out=$(sr "$S" -- sh -c 'c() { curl -sS --max-time 10 -o /dev/null -w "%{http_code}\n" "$@"; }
        c -H "Connection: Upgrade" -H "Upgrade: websocket" -H "Sec-WebSocket-Version: 13" -H "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==" https://inj.test:'"$PA"'/ws
        c -H "Connection: Upgrade" -H "Upgrade: websocket" -H "Sec-WebSocket-Version: 13" -H "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==" https://other.test:'"$PA"'/ws-other
        c -p http://inj.test:'"$PH"'/nottls 2>/dev/null' 2>&1)
    sleep 0.3
    r=$(rec)
    if [ "$(grep -v '^sluice:\|^curl:' <<<"$out" | head -2)" = "403
200" ] && ! grep -q "LINE GET /ws " <<<"$r" && grep -q "LINE GET /ws-other " <<<"$r" && ! grep -q "/nottls" <<<"$r" &&
        grep -q "an Upgrade (WebSocket) to a host a masked credential is sent to" "$log" &&
        grep -q "not TLS inside a tunnel to a host with credentials (a masked entry's injectHosts): never passed opaque" "$log"; then
        ok "a WebSocket Upgrade to a credential host is refused (403, never sent; other hosts pass), and non-TLS bytes in a tunnel to one are refused with a reason naming credentials"
    else bad "WebSocket / not TLS" "$out
$r
$(grep -i 'upgrade\|not TLS' "$log" | tail -3)"; fi
    exec_cases
}

# value.exec (issue 24 item 4): a helper program gives the value, counted
# in $HC (it prints exec-token-RND-N, longer from N=2 with HLONG, and fails
# from N=2 with HFAIL); ttl 1 s (SLOW s under valgrind, whose start-up
# alone took longer), so it runs again every 0.75 s.
exec_cases() {
    local log=$T/xlog.$WHO out r rc P X1 first
    local HC=$T/hcount.$WHO
    xr() { HC=$HC HRND=$RND XOTHER=xother-secret-$RND-abcdefgh "$SLUICE" run --log "$log" --settings "$@"; }
    : > "$log"; rm -f "$HC" "$SH/rec/"*
    # the value at start, then a refresh of another length: the sandbox
    # waits until the echo it gets back is no longer its placeholder's
    # length (the new value comes back as a mask of its own length)
    out=$(HLONG=1 xr "$SJ/exec.json" -- sh -c 'printf "P=%s\n" "$XTOK"; u=https://inj.test:'"$PA"'
        curl -sS --max-time 10 -H "Authorization: Bearer $XTOK" "$u/x1" -o /dev/null
        i=0; while [ $i -lt 40 ]; do
            e=$(curl -sS --max-time 10 -H "Authorization: Bearer $XTOK" "$u/x2")
            [ ${#e} -ne $((${#XTOK} + 12)) ] && break; i=$((i + 1)); sleep 0.5; done
        printf "%s" "$XTOK" > /tmp/b; head -c 70000 /dev/zero | tr "\0" a >> /tmp/b; printf "%s" "$XTOK" >> /tmp/b
        curl -sS --max-time 10 -u "x-access-token:$XTOK" "$u/x3" -o /dev/null
        curl -sS --max-time 10 -H "Transfer-Encoding: chunked" --data-binary @/tmp/b "$u/chunked-x" -o /dev/null
        curl -sS --max-time 10 --data-binary @/tmp/b "$u/cl-x" -o /dev/null 2>&1 || echo cl-cut
        env; cat /proc/*/environ /proc/*/cmdline 2>/dev/null | tr "\0" "\n"' 2>&1); rc=$?
    sleep 0.3
    r=$(rec) P=$(sed -n 's/^P=//p' <<<"$out")
    # (the first request may already carry a refreshed value on a slow
    # machine: the placeholder has the first value's length either way)
    X1=$(sed -n "s/^H authorization: Bearer \(exec-token-$RND-[0-9]*\(-longer-value-xx\)\{0,1\}\)\$/\1/p" <<<"$r" | head -1)
    first=exec-token-$RND-1
    if [ "$rc" = 0 ] && [ -n "$X1" ] && [ "${#P}" = "${#first}" ] && [ "$P" != "$X1" ] &&
        grep -q "^LINE GET /x1 " <<<"$r" && ! grep -qF "$P" <<<"$r"; then
        ok "value.exec: the helper's value is injected from the start; the sandbox holds a placeholder of its length, never sent"
    else bad "value.exec at start" "rc $rc P=$P X1=$X1 $(grep '^LINE\|^H auth' <<<"$r" | head)"; fi
    if grep -q "^H authorization: Bearer exec-token-$RND-[0-9]*-longer-value-xx" <<<"$r" &&
        grep -q "^H authorization: Basic " <<<"$r" &&
        sed -n 's/^H authorization: Basic //p' <<<"$r" | base64 -d 2>/dev/null | grep -q "^x-access-token:exec-token-$RND-[0-9]*-longer-value-xx$"; then
        ok "value.exec: after its ttl the helper's new value (another length) replaces the same placeholder in headers and Basic credentials"
    else bad "value.exec refresh" "$(grep '^LINE\|^H auth' <<<"$r" | head -12)"; fi
    # (the origin records the cut request's head with what body it got
    # before the close: none, the placeholder starts the body)
    if grep -q "^BODY chunked " <<<"$r" && ! grep -q "^BODY cl " <<<"$r" &&
        [ "$(grep '^BODYDATA' <<<"$r" | grep -o "exec-token-$RND-[0-9]*-longer-value-xx" | wc -l)" = 2 ]; then
        if grep -q "^cl-cut" <<<"$out" && grep -q "framed by Content-Length, while the credential's refreshed value has another length" "$log"; then
            ok "value.exec: a chunked body gets the longer value (its chunks resized); a Content-Length body with the placeholder is cut before it, with the reason in the log"
        else bad "value.exec Content-Length body" "$(grep -v '^[A-Z_]*=' <<<"$out" | tail -5) $(grep -c 'Content-Length, while' "$log")"; fi
    else bad "value.exec bodies" "$(grep '^LINE\|^BODY ' <<<"$r")"; fi
    if grep -q '^PATH=' "$HC.env" && grep -q "^HRND=$RND" "$HC.env" && ! grep -q '^XOTHER=' "$HC.env"; then
        ok "value.exec: the helper runs without the credentials' variables (another masked one's real value is not in its environment, readable in /proc)"
    else bad "value.exec helper environment" "$(grep -c '^XOTHER=' "$HC.env" 2>&1) $(grep -c '^PATH=' "$HC.env" 2>&1)"; fi
    if ! grep -qF "exec-token-$RND" <<<"$out" && ! grep -qF "exec-token-$RND" "$log" && [ -s "$log" ]; then
        ok "value.exec: no value in the sandbox's environment or /proc, in sluice's messages or its log"
    else bad "value.exec leak" "$(grep -c "exec-token-$RND" <<<"$out") $(grep -c "exec-token-$RND" "$log")"; fi
    # a helper that fails after its first value: once it expires, a request
    # that needs it is refused (503, named), never sent with the placeholder
    rm -f "$HC" "$SH/rec/"*
    # (the sandbox waits out the ttl, SLOW s, and 1.5 s more: under valgrind
    # a fixed 2.5 s relied on the start-up taking the other 2.5)
    out=$(HFAIL=1 xr "$SJ/exec.json" -- sh -c 'sleep '"$((SLOW + 1))"'.5; curl -sS --max-time 10 -w "\n%{http_code}\n" -H "Authorization: Bearer $XTOK" https://inj.test:'"$PA"'/expired' 2>&1)
    sleep 0.2
    if grep -q "^503$" <<<"$out" && grep -q "credential XTOK has no value: its lifetime (ttl) ran out" <<<"$out" &&
        ! grep -q "/expired" <<<"$(rec)" && grep -q "credential credentials.envVars\[0\]:XTOK: its helper failed: exit status 1" <<<"$out"; then
        ok "value.exec: an expired value (its helper failing) refuses the requests that need it (503 naming it), never sent; the failure is a warning naming the entry"
    else bad "value.exec expired" "$out"; fi
    # a helper that fails at start: the command does not run
    out=$(HC=/nonexistent/dir/c HRND=$RND "$SLUICE" run --settings "$SJ/exec.json" -- echo ran 2>&1); rc=$?
    if [ "$rc" = 125 ] && ! grep -q "^ran" <<<"$out" &&
        grep -q "exec.json:[0-9]*:[0-9]*: credentials.envVars\[0\]: its helper (value.exec) gave no value: exit status 1; the command was not run" <<<"$out"; then
        ok "value.exec: a helper that fails at start fails the run (125), naming the entry"
    else bad "value.exec failing at start" "rc $rc $out"; fi
    # from a file the sandbox could have written: refused, the helper never run
    rm -f "$HC"
    out=$(xr "$SJ/exec-open.json" -- echo ran 2>&1); rc=$?
    if [ "$rc" = 125 ] && [ ! -e "$HC" ] && ! grep -q "^ran" <<<"$out" &&
        grep -q "exec-open.json:[0-9]*:[0-9]*: credentials.envVars\[0\]: refused: value.exec (it runs a program on the host" <<<"$out"; then
        ok "value.exec from a settings file the sandbox could have written is refused (file:line, why) before anything runs"
    else bad "value.exec untrusted" "rc $rc $out"; fi
}

# --- set-up (root, once) ------------------------------------------------------
if [ -z "${CRED_CHILD:-}" ]; then
    if ! ip link set lo up || ip route get 1.1.1.1 >/dev/null 2>&1; then
        bad "no private network namespace"; e2e_finish; exit
    fi
    SH=$(mktemp -d /var/tmp/sluice-cred.XXXXXX) # visible inside (/tmp is private)
    chmod 755 "$SH"
    # the settings files: where no sandbox could have written them (issue
    # 24 item 4: /var/tmp is writable by others, so masking entries from a
    # file there are refused)
    SJ=$(mktemp -d /run/sluice-cred-json.XXXXXX) && chmod 755 "$SJ" || { bad "settings directory"; e2e_finish; exit; }
    trap 'e2e_cleanup; rm -rf "$SH" "$SJ"' EXIT
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 -subj "/CN=cred CA" \
        -keyout "$SH/ca.key" -out "$SH/ca.pem" -addext "basicConstraints=critical,CA:TRUE" \
        -addext "keyUsage=critical,keyCertSign,cRLSign" -addext "subjectKeyIdentifier=hash" 2>>"$SH/openssl.err" &&
        openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=inj.test" \
            -keyout "$SH/o.key" -out "$SH/o.csr" 2>>"$SH/openssl.err" &&
        openssl x509 -req -in "$SH/o.csr" -CA "$SH/ca.pem" -CAkey "$SH/ca.key" -days 30 \
            -extfile <(printf 'subjectAltName=DNS:inj.test,DNS:other.test,DNS:pin.inj.test\nbasicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nauthorityKeyIdentifier=keyid\n') \
            -out "$SH/o.pem" 2>>"$SH/openssl.err" || { bad "certificates" "$(cat "$SH/openssl.err")"; e2e_finish; exit; }
    chmod 644 "$SH"/*.pem "$SH/o.key"
    mkdir -p "$SH/rec" && chmod 777 "$SH/rec"
    printf '# a config file\ntoken = %s\nuser = me\n' "$FREAL" > "$SH/tok.txt"
    printf '%s\n' "$DREAL" > "$SH/denied.txt"
    printf 'key=%s\nagain: %s\n' "$DUP" "$DUP" > "$SH/dup.txt"
    printf 'nothing here %s\n' "$NOM" > "$SH/nomatch.txt"
    chmod 644 "$SH/tok.txt" "$SH/denied.txt" "$SH/dup.txt" "$SH/nomatch.txt"
    PA=$(free_port) PH=$(free_port)
    # The origin: records each request (line, headers, body with counts of
    # the real value and the placeholder seen in it), echoes Authorization.
    cat > "$SH/origin.py" <<'EOF'
import http.server, ssl, sys, os, threading, base64
addr, pa, ph, cert, key, rec, real, www = sys.argv[1:9]
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def handle_one(self):
        if self.path.startswith("/repo.git/"):
            return self.git()
        body = b""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while True:
                n = int(self.rfile.readline().strip(), 16)
                if n == 0:
                    self.rfile.readline(); break
                body += self.rfile.read(n); self.rfile.readline()
        elif self.headers.get("Content-Length"):
            body = self.rfile.read(int(self.headers["Content-Length"]))
        lines = ["LINE %s %s" % (self.command, self.path) + " " + self.request_version]
        lines += ["H %s: %s" % (k.lower(), v) for k, v in self.headers.items()]
        if body:
            kind = "chunked" if "chunked" in self.path else "cl"
            fake = os.environ.get("CRED_FAKE", "")
            lines.append("BODY %s len=%d real=%d fake=%d" % (kind, len(body), body.count(real.encode()), 0))
            lines.append("BODYDATA " + body.decode("latin-1"))
        with open(os.path.join(rec, "%d.%d" % (os.getpid(), threading.get_ident())), "a") as f:
            f.write("\n".join(lines) + "\n")
        auth = self.headers.get("Authorization", "")
        out = ("echo %s\n" % auth).encode()
        self.send_response(200)
        self.send_header("X-Echo", auth)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)
    def git(self):
        # dumb HTTP, behind Basic with the real token (as a forge would)
        want = "Basic " + base64.b64encode(("x-access-token:" + real).encode()).decode()
        f = os.path.join(www, self.path.split("?")[0].lstrip("/"))
        if self.headers.get("Authorization", "") != want:
            with open(os.path.join(rec, "git.%d" % threading.get_ident()), "a") as g:
                g.write("GIT 401 %s\n" % self.path)
            self.send_response(401); self.send_header("WWW-Authenticate", 'Basic realm="r"')
            self.send_header("Content-Length", "0"); self.end_headers(); return
        if not os.path.isfile(f):
            self.send_response(404); self.send_header("Content-Length", "0"); self.end_headers(); return
        data = open(f, "rb").read()
        self.send_response(200); self.send_header("Content-Length", str(len(data))); self.end_headers()
        self.wfile.write(data)
    do_GET = do_POST = do_PUT = handle_one
def serve(port, tls):
    s = http.server.ThreadingHTTPServer((addr, int(port)), H)
    if tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); ctx.load_cert_chain(cert, key)
        s.socket = ctx.wrap_socket(s.socket, server_side=True)
    s.serve_forever()
threading.Thread(target=serve, args=(ph, False), daemon=True).start()
serve(pa, True)
EOF
    git init -q "$SH/src" && echo "cloned with a masked token" > "$SH/src/README" &&
        git -C "$SH/src" add README && git -C "$SH/src" -c user.name=t -c user.email=t@t commit -qm c &&
        mkdir -p "$SH/www" && git clone -q --bare "$SH/src" "$SH/www/repo.git" &&
        git -C "$SH/www/repo.git" update-server-info || bad "git repository"
    python3 "$SH/origin.py" "$O1" "$PA" "$PH" "$SH/o.pem" "$SH/o.key" "$SH/rec" "$REAL" "$SH/www" 2>"$SH/origin.err" &
    PIDS+=($!)
    for i in $(seq 100); do
        curl -s -o /dev/null --max-time 1 --cacert "$SH/ca.pem" --resolve "inj.test:$PA:$O1" \
            "https://inj.test:$PA/up" && break
        sleep 0.1
    done
    rm -f "$SH/rec/"*
    start_dnsmasq --address=/inj.test/$O1 --address=/other.test/$O1 ||
        { bad "dnsmasq did not start" "$(cat "$T/dnsmasq.err")"; e2e_finish; exit; }
    base='"allowedDomains": ["*.test", "inj.test", "'"$O1"'"], "dnsServers": ["127.0.0.1:'"$DPORT"'"], "denyPrivateAddresses": false'
    creds='"envVars": [{"name": "TOKEN", "mode": "mask", "injectHosts": ["inj.test", "*.inj.test"]},
                   {"name": "GONE", "mode": "deny"},
                   {"name": "JWT", "mode": "mask", "decode": "jwt", "maskClaims": ["sub"], "injectHosts": ["inj.test"]}],
      "files": [{"path": "'"$SH"'/tok.txt", "mode": "mask", "extract": "token = ([a-z0-9-]+)",
                 "injectHosts": ["inj.test"]},
                {"path": "'"$SH"'/dup.txt", "mode": "mask", "extract": "key=([a-z0-9]+)",
                 "maskDuplicates": true, "injectHosts": ["inj.test"]},
                {"path": "'"$SH"'/nomatch.txt", "mode": "mask", "extract": "zzz=([0-9]+)",
                 "onExtractNoMatch": "deny", "injectHosts": ["inj.test"]},
                {"path": "'"$SH"'/denied.txt", "mode": "deny"}]'
    cat > "$SJ/s.json" <<JSON
{"network": {$base,
  "tlsTerminate": {"extraCaCertPaths": ["$SJ/ca.pem"], "excludeDomains": ["pin.inj.test"]}},
 "credentials": {$creds}}
JSON
    cat > "$SJ/notls.json" <<JSON
{"network": {$base}, "credentials": {$creds}}
JSON
    cat > "$SJ/plain.json" <<JSON
{"network": {$base}, "credentials": {"allowPlaintextInject": true, $creds}}
JSON
    cat > "$SJ/plain-tp.json" <<JSON
{"network": {$base, "transparent": true}, "credentials": {"allowPlaintextInject": true, $creds}}
JSON
    for m in warn error; do
        cat > "$SJ/$([ $m = warn ] && echo warn || echo nomatcherr).json" <<JSON
{"network": {$base, "tlsTerminate": {"extraCaCertPaths": ["$SJ/ca.pem"]}},
 "credentials": {"files": [{"path": "$SH/nomatch.txt", "mode": "mask", "extract": "zzz=([0-9]+)",
                            "onExtractNoMatch": "$m", "injectHosts": ["inj.test"]}]}}
JSON
    done
    cat > "$SJ/aws.json" <<JSON
{"network": {$base, "tlsTerminate": {}}, "credentials": {"envVars": [{"name": "TOKEN", "mode": "mask"}],
  "awsPairs": [{"accessKeyIdVar": "TOKEN", "secretAccessKeyVar": "GONE"}]}}
JSON
    cp "$SH/ca.pem" "$SJ/ca.pem"
    mkdir -p "$SJ/xdg/sluice" "$SJ/xdg2/sluice"
    cp "$SJ/s.json" "$SJ/xdg/sluice/settings.json"
    cat > "$SJ/xdg2/sluice/settings.json" <<JSON
{"network": {$base, "tlsTerminate": {"extraCaCertPaths": ["$SJ/ca.pem"]}},
 "credentials": {"envVars": [{"name": "TOKEN", "mode": "mask"}]}}
JSON
    printf '{"network": {%s, "tlsTerminate": {}}, "credentials": {"envVars": [{"name": "GONE", "mode": "deny"}]}}\n' "$base" > "$SJ/deny.json"
    cat > "$SJ/req.json" <<JSON
{"network": {$base, "tlsTerminate": {"extraCaCertPaths": ["$SJ/ca.pem"]}},
 "credentials": {"envVars": [{"name": "TOKEN", "mode": "mask", "injectHosts": ["inj.test"], "require": true}]}}
JSON
    cat > "$SJ/helper.sh" <<'SH'
#!/bin/sh
n=$(cat "$HC" 2>/dev/null || echo 0); n=$((n + 1)); echo "$n" > "$HC" || exit 1
env > "$HC.env"
[ -n "${HFAIL:-}" ] && [ "$n" -ge 2 ] && { echo "helper stderr: failing" >&2; exit 1; }
if [ -n "${HLONG:-}" ] && [ "$n" -ge 2 ]; then echo "exec-token-$HRND-$n-longer-value-xx"; else echo "exec-token-$HRND-$n"; fi
SH
    chmod 755 "$SJ/helper.sh"
    cat > "$SJ/exec.json" <<JSON
{"network": {$base, "tlsTerminate": {"extraCaCertPaths": ["$SJ/ca.pem"]}},
 "credentials": {"envVars": [{"name": "XTOK", "mode": "mask", "injectHosts": ["inj.test"],
                              "value": {"exec": ["$SJ/helper.sh"], "ttl": $SLOW, "timeout": 5}},
                             {"name": "XOTHER", "mode": "mask", "injectHosts": ["inj.test"]}]}}
JSON
    cp "$SJ/exec.json" "$SJ/exec-open.json"
    cp "$SJ/s.json" "$SJ/open.json" && cp "$SJ/s.json" "$SH/s.json"
    chmod 644 "$SJ"/*.json "$SJ"/xdg*/sluice/settings.json "$SH/s.json" && chmod 666 "$SJ/open.json" "$SJ/exec-open.json"
fi

start=$SECONDS
if [ -n "${CRED_CHILD:-}" ]; then
    SH=$CRED_SH SJ=$CRED_SJ PA=$CRED_PA PH=$CRED_PH DPORT=$CRED_DPORT
    cases
    e2e_finish
    exit
fi
cases
# --- the same cases as an unprivileged user -----------------------------------
if command -v setpriv >/dev/null && { id sluicetest >/dev/null 2>&1 || useradd -M -s /usr/sbin/nologin sluicetest >/dev/null 2>&1; }; then
    U=$(id -u sluicetest) G=$(id -g sluicetest)
    cp "$SLUICE" "$SH/sluice" && chmod 755 "$SH/sluice"
    cp -r "$HERE" "$SH/e2e" && chmod -R a+rX "$SH/e2e"
    echo "# --- the same cases as uid $U (setpriv) ---"
    (cd / && setpriv --reuid="$U" --regid="$G" --clear-groups --inh-caps=-all \
        env CRED_NETNS=1 CRED_CHILD=1 CRED_SH="$SH" CRED_SJ="$SJ" CRED_RND="$RND" CRED_PA="$PA" CRED_PH="$PH" \
        CRED_DPORT="$DPORT" PATH="/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin" \
        bash "$SH/e2e/credentials.sh" "$SH/sluice") 2>&1 | tee "$T/child.out"
    e2e_add_counts "$T/child.out"
else
    echo "# SKIP the unprivileged pass: no setpriv or no user"
fi
echo "# credentials.sh took $((SECONDS - start)) s"
e2e_finish
