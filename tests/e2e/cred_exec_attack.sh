#!/usr/bin/env bash
# tests/e2e/cred_exec_attack.sh - rt-17: attacks on refreshable credential
# values in `sluice run` (credentials.envVars value.exec: a helper program's
# value, refreshed before its ttl runs out) and on the plain-HTTP front
# end's splice(2) path for bulk response bodies (proxy/http_splice.c), by
# the sandboxed command, by whoever writes a settings file, and by a
# hostile origin. A case named "HOLE" failed when it was written
# (tests/e2e/rt-17-report.md).
#
# As root: a private network namespace (unshare -n); the origin
# (cred-exec-helpers/origin.py) on 127.0.0.10, HTTPS for the credential's
# host and raw plain HTTP for the splice cases; dnsmasq on 127.0.0.1
# answers every *.test name with 127.0.0.10. The helper prints
# rt17tok-RND-N-value (N its run), the same length every run, so a value
# never leaks as "another length" but only as itself; RND is random per
# run and never printed. The cases run as root, then as an unprivileged
# user (setpriv). Nothing reaches the host's network. Skips (77) when not
# root.
set -uo pipefail
SLUICE=${1:?usage: cred_exec_attack.sh PATH/TO/sluice}
case $SLUICE in /*) ;; *) SLUICE=$(cd "$(dirname "$SLUICE")" && pwd)/$(basename "$SLUICE") ;; esac
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
O1=127.0.0.10

. "$HERE/netns.sh"
e2e_netns CX_NETNS "cred_exec_attack" "$SLUICE"

. "$HERE/lib.sh"
e2e_who CX_CHILD
PY=/usr/bin/python3

RND=${CX_RND:-$(shuf -i 1000000000-9999999999 -n1)}
REAL=rt17env-${RND}-static-secret-value   # a plain masked variable's value
leaks() { grep -c -e "rt17tok-$RND" -e "$REAL" "$@" 2>/dev/null | awk -F: '{s += $NF} END {print s + 0}'; }
# no process of this run's markers left
left() { pgrep -f "rt17mark-$RND" >/dev/null 2>&1; }

# --- the sluice run cases -----------------------------------------------------
run_cases() {
    local W=${CX_T:-$T}/w.$WHO out rc log=$T/log.$WHO
    mkdir -p "$W" "$T/xdg"
    chmod 700 "$T/xdg"
    export XDG_RUNTIME_DIR=$T/xdg
    cd "$W" || return
    xr() { local f=$1; shift; HC=$T/hc.$WHO HRND=$RND TOKEN=$REAL "$SLUICE" run --log "$log" --settings "$SJ/$f" -- "$@"; }

    # 1. a response that started before two refreshes: the value its request
    # carried is no longer in the mask set; echoed in the response head it
    # would reach the sandbox (the body was cut, the head was not checked)
    rm -f "$T/hc.$WHO"
    out=$(xr x.json sh -c 'curl -sS --max-time 20 -D - -H "Authorization: Bearer $XTOK" "https://inj.test:'"$PA"'/slow?s=3"; echo; echo "rc=$?"' 2>&1)
    if [ "$(leaks <<<"$out")" = 0 ] && [ "$(cat "$T/hc.$WHO" 2>/dev/null || echo 0)" -ge 3 ]; then
        ok "HOLE a response head that outlived two refreshes never shows the value its request carried"
    else bad "response head across two refreshes" "runs=$(cat "$T/hc.$WHO" 2>/dev/null) $(sed "s/rt17tok-$RND/<REAL>/g" <<<"$out" | grep -v '^$' | head -8)"; fi
    # the same on a kept connection, each request judged at its own start:
    # requests after the refreshes get the current value, echoes masked
    out=$(xr x.json sh -c 'u=https://inj.test:'"$PA"'/echo; for i in 1 2 3 4 5 6; do set -- "$@" -H "Authorization: Bearer $XTOK" "$u?$i"; done
        i=0; while [ $i -lt 4 ]; do curl -sS --max-time 10 "$@"; sleep 0.6; i=$((i + 1)); done' 2>&1)
    if [ "$(leaks <<<"$out")" = 0 ] && [ "$(grep -c '^echo Bearer ' <<<"$out")" = 24 ]; then
        ok "kept connections across refreshes: 24 echoes, each masked"
    else bad "kept connections across refreshes" "$(sed "s/rt17tok-$RND/<REAL>/g" <<<"$out" | sort | uniq -c | head)"; fi

    # 2. the host's /proc in the sandbox (enableWeakerNestedSandbox): the
    # helper runs on the host, dumpable, with sluice's environment (the
    # masked variables' real values) and its value in a pipe
    rm -f "$T/hc.$WHO"
    out=$(HMODE=slow xr weak.json sh -c 'end=$(($(date +%s) + 5)); while [ "$(date +%s)" -lt "$end" ]; do
        for p in /proc/[0-9]*; do case "$(tr "\0" " " < $p/cmdline 2>/dev/null)" in *helper.sh*)
            echo "found $p"; tr "\0" "\n" < $p/environ 2>/dev/null | grep "^TOKEN="; timeout 2 cat $p/fd/1 2>/dev/null;; esac; done; done
        cat /proc/[0-9]*/environ 2>/dev/null | tr "\0" "\n" | grep "^TOKEN="' 2>&1); rc=$?
    # (the kernel refuses: the helper is in another user namespace, or has
    # capabilities the sandbox dropped; its command line is the settings')
    if [ "$(leaks <<<"$out")" = 0 ] && grep -q "^found " <<<"$out"; then
        ok "the host's /proc in the sandbox (enableWeakerNestedSandbox): the helper is seen, its environment and output pipe cannot be read"
    else bad "the helper's environment or output through the host's /proc (or not seen)" "rc=$rc $(sed "s/rt17tok-$RND/<REAL>/g; s/$REAL/<ENVREAL>/g" <<<"$out" | grep -v "cannot open" | head -5)"; fi

    # 3. the program named through a symlink the sandbox can change
    # (lnk -> W/l2 -> the trusted directory): checked once, but run at each
    # refresh by the name as written
    rm -rf "$W/l2" "$W/evil" "$T/pwned.$WHO"
    ln -s "$SJ/real" "$W/l2"
    out=$(EVIL=$T/pwned.$WHO xr lnk.json sh -c 'mkdir evil && printf "#!/bin/sh\ntouch %s\necho rt17evil-value-0123456789\n" "$EVIL" > evil/helper.sh &&
        chmod 755 evil/helper.sh && rm l2 && ln -s evil l2 && sleep 2.5; echo done' 2>&1); rc=$?
    if [ ! -e "$T/pwned.$WHO" ] && grep -q '^done' <<<"$out"; then
        ok "HOLE a symlink on the helper's path that the sandbox re-aims does not make the host run its program at the next refresh"
    else bad "helper path re-aimed by the sandbox: its program ran on the host" "rc=$rc exists=$([ -e "$T/pwned.$WHO" ] && echo yes) $(head -3 <<<"$out")"; fi

    # 4. a helper that starts a child keeping its stdout at a refresh: the
    # run ends meanwhile; nothing of it is left
    rm -f "$T/hc.$WHO"
    out=$(HMODE=fork xr x.json sh -c 'sleep 1.6; echo done' 2>&1); rc=$?
    # (killed ones may take a moment to go on a loaded machine: up to 5 s,
    # not a fixed 0.3; a child that survives lives 60 s)
    for i in $(seq 100); do left || break; sleep 0.05; done
    if [ "$rc" = 0 ] && ! left; then
        ok "a helper's child that keeps its stdout is killed with it when the run ends (no process left)"
    else bad "helper children left" "rc=$rc $(pgrep -af "rt17mark-$RND" | head -3)"; pkill -f "rt17mark-$RND"; fi

    # 5. an expired value (its helper failing from run 2 on) in the path,
    # the query and a header: 503, nothing sent with the placeholder
    rm -f "$T/hc.$WHO"
    out=$(HMODE=fail xr x.json sh -c 'sleep 2.2; u=https://inj.test:'"$PA"'/echo
        curl -sS --max-time 10 -w "%{http_code}\n" -o /dev/null "$u/p-$XTOK-'"$RND"'"
        curl -sS --max-time 10 -w "%{http_code}\n" -o /dev/null "$u?q=$XTOK&r='"$RND"'"
        curl -sS --max-time 10 -w "%{http_code}\n" -o /dev/null -H "X-K: $XTOK" "$u?h='"$RND"'"' 2>&1)
    sleep 0.2
    if [ "$(grep -c '^503$' <<<"$out")" = 3 ] && ! grep -q "$RND" "$SH/rec/lines" 2>/dev/null; then
        ok "an expired value's placeholder in the path, the query or a header: 503, never sent"
    else bad "expired value sent" "$(grep -v '^sluice: warning' <<<"$out" | head -4) $(grep -c "$RND" "$SH/rec/lines")"; fi

    # 6. a credential host's bulk response (plain HTTP with
    # allowPlaintextInject) echoing the value 300000 bytes in: it must not
    # take the splice path, which nothing masks
    rm -f "$W/body"
    out=$(xr x.json sh -c 'curl -sS --max-time 20 -H "Authorization: Bearer $XTOK" "http://inj.test:'"$PH"'/bigecho?n=700000" -o body; echo "rc=$?"' 2>&1)
    if grep -q '^rc=0' <<<"$out" && [ "$(stat -c %s "$W/body" 2>/dev/null)" = 700000 ] && [ "$(leaks "$W/body")" = 0 ] &&
        grep -q "Bearer " "$W/body"; then
        ok "a credential host's 700 KB body echoing the value is masked (not spliced), in the sandbox's proxy"
    else bad "credential host's bulk body" "$(head -3 <<<"$out") size=$(stat -c %s "$W/body" 2>/dev/null) leaks=$(leaks "$W/body")"; fi
    # the sandbox's own proxy splices a plain bulk body byte-exact
    out=$(xr x.json sh -c 'curl -sS --max-time 20 "http://other.test:'"$PH"'/big?n=3000000" | tr -d a | wc -c; curl -sS --max-time 20 -o /dev/null -w "%{size_download}\n" "http://other.test:'"$PH"'/big?n=3000000"' 2>&1)
    if [ "$(printf '%s\n' "$out" | tr -d ' ' | paste -sd,)" = "0,3000000" ]; then
        ok "the in-sandbox proxy: a 3 MB body to a host without credentials arrives whole"
    else bad "in-sandbox bulk body" "$out"; fi
    if [ "$(leaks "$log")" = 0 ]; then
        ok "no value in the run's log"
    else bad "value in the log" "$(leaks "$log")"; fi
    cd "$T" || return
}

# --- the splice cases, through `sluice proxy` ---------------------------------
splice_cases() {
    local A="http://$O1:$PH" out fds0 fds1
    start_proxy px.$WHO "$SJ/p.json" --http tcp:127.0.0.1:0 --socks off --workers 1
    [ -n "$HPORT" ] || return
    cx() { "$PY" "$GH/client.py" "$HPORT" "$@"; }
    H='HTTP/1.1\r\nHost: x\r\n\r\n'
    for kind in 204cl 304cl; do
        out=$(cx "GET $A/$kind $H" "GET $A/small $H")
        if [ "$(head -2 <<<"$out" | cut -d' ' -f2 | paste -sd,)" = "${kind%cl},200" ] && grep -q "^HTTP/1.1 200 OK 6$" <<<"$out"; then
            ok "a ${kind%cl} with Content-Length: 400000 has no body: the pipelined next answer is the next answer"
        else bad "${kind%cl} with a length" "$out"; fi
    done
    out=$(cx "HEAD $A/headbig $H" "GET $A/small $H")
    if [ "$(sed -n 2p <<<"$out")" = "HTTP/1.1 200 OK 6" ]; then
        ok "HEAD with Content-Length: 400000: no body taken, the next answer in order"
    else bad "HEAD with a bulk length" "$out"; fi
    for kind in cltte dupcl; do
        out=$(cx "GET $A/$kind $H" "GET $A/small $H")
        if ! grep -q "smuggle\| 7$" <<<"$out" && grep -q "^HTTP/1.1 502" <<<"$out"; then
            ok "ambiguous bulk framing ($kind): 502, nothing of it reaches the client as an answer"
        else bad "ambiguous framing $kind" "$out"; fi
    done
    out=$(cx "GET $A/early100?n=500000 $H" "GET $A/small $H")
    if grep -q "^HTTP/1.1 200 OK 500000$" <<<"$out" && grep -q "^HTTP/1.1 200 OK 6$" <<<"$out"; then
        ok "100 Continue before a bulk body, then a pipelined answer: both whole"
    else bad "1xx before a bulk body" "$out"; fi
    # a client that stops reading in the middle of a spliced body: the
    # stall timer (idle 2 s) still closes it
    out=$("$PY" - "$HPORT" "$A" <<'EOF'
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
s.connect(("127.0.0.1", int(sys.argv[1])))
s.sendall(("GET %s/big?n=200000000 HTTP/1.1\r\nHost: x\r\n\r\n" % sys.argv[2]).encode())
got = 0
while got < 600000:
    got += len(s.recv(65536))
time.sleep(6)
s.settimeout(15)
t0 = time.time()
try:
    while True:
        d = s.recv(1 << 20)
        if not d:
            break
        got += len(d)
    print("closed", got < 200000000)
except (socket.timeout, OSError) as e:
    print("error", type(e).__name__)
EOF
)
    if [ "$out" = "closed True" ] && wait_for "$T/px.$WHO.log" 'no progress for 2000 ms|stalled' 5; then
        ok "a client that stops reading a spliced body is closed by the stall timer"
    else bad "stall timer during a splice" "$out $(tail -2 "$T/px.$WHO.log")"; fi
    # descriptors across 150 aborted bulk downloads and 150 half-closing
    # clients (one worker: its pool keeps at most 8 empty pipes, 16
    # descriptors; a leak of one in twenty would pass that)
    sleep 0.3
    fds0=$(ls /proc/"$PROXY_PID"/fd | wc -l)
    "$PY" - "$HPORT" "$A" <<'EOF'
import socket, sys
for i in range(300):
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
    s.sendall(("GET %s/big?n=2000000 HTTP/1.1\r\nHost: x\r\n\r\n" % sys.argv[2]).encode())
    if i % 2:
        s.shutdown(socket.SHUT_WR)
    got = 0
    while got < 300000:
        d = s.recv(65536)
        if not d:
            break
        got += len(d)
    s.close()
EOF
    out=$(curl -sS --max-time 10 -x "http://127.0.0.1:$HPORT" "$A/small")
    # the last aborted connections close a moment after their clients went:
    # wait for the count (a leak keeps it up to the deadline), not 1 s
    fds1=$(fds_down "$PROXY_PID" $((fds0 + 16)) 10)
    if [ "$out" = "small" ] && [ "$fds1" -le $((fds0 + 16)) ]; then
        ok "300 aborted bulk downloads (half of them half-closed): no descriptor or pipe left ($fds0 -> $fds1)"
    else bad "descriptors after aborted downloads" "out=$out fds $fds0 -> $fds1 $(ls -l /proc/$PROXY_PID/fd | awk '{print $NF}' | sed 's/[0-9]//g' | sort | uniq -c)"; fi
    kill "$PROXY_PID" 2>/dev/null
    wait "$PROXY_PID" 2>/dev/null
    if ! grep -q "ERROR: AddressSanitizer\|runtime error:" "$T/px.$WHO.err" 2>/dev/null; then
        ok "the proxy's stderr has no sanitizer report"
    else bad "sanitizer report" "$(head -20 "$T/px.$WHO.err")"; fi
}

# --- set-up (root, once) ------------------------------------------------------
if [ -z "${CX_CHILD:-}" ]; then
    if ! ip link set lo up || ip route get 1.1.1.1 >/dev/null 2>&1; then
        bad "no private network namespace"; e2e_finish; exit
    fi
    SH=$(mktemp -d /var/tmp/sluice-cx.XXXXXX) && chmod 755 "$SH"
    SJ=$(mktemp -d /run/sluice-cx-json.XXXXXX) && chmod 755 "$SJ" || { bad "settings directory"; e2e_finish; exit; }
    trap 'e2e_cleanup; pkill -f "rt17mark-$RND"; rm -rf "$SH" "$SJ" ${UT:+"$UT"}' EXIT
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 -subj "/CN=cx CA" \
        -keyout "$SH/ca.key" -out "$SJ/ca.pem" -addext "basicConstraints=critical,CA:TRUE" \
        -addext "keyUsage=critical,keyCertSign,cRLSign" -addext "subjectKeyIdentifier=hash" 2>>"$SH/openssl.err" &&
        openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=inj.test" \
            -keyout "$SH/o.key" -out "$SH/o.csr" 2>>"$SH/openssl.err" &&
        openssl x509 -req -in "$SH/o.csr" -CA "$SJ/ca.pem" -CAkey "$SH/ca.key" -days 30 \
            -extfile <(printf 'subjectAltName=DNS:inj.test,DNS:other.test\nbasicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nauthorityKeyIdentifier=keyid\n') \
            -out "$SH/o.pem" 2>>"$SH/openssl.err" || { bad "certificates" "$(cat "$SH/openssl.err")"; e2e_finish; exit; }
    chmod 644 "$SJ/ca.pem" "$SH/o.pem" "$SH/o.key"
    mkdir -p "$SH/rec" && chmod 777 "$SH/rec"
    PA=$(free_port) PH=$(free_port)
    GH=$HERE/cred-exec-helpers
    "$PY" "$GH/origin.py" "$O1" "$PA" "$PH" "$SH/o.pem" "$SH/o.key" "$SH/rec" 2>"$SH/origin.err" &
    PIDS+=($!)
    for i in $(seq 100); do
        curl -s -o /dev/null --max-time 1 --cacert "$SJ/ca.pem" --resolve "inj.test:$PA:$O1" "https://inj.test:$PA/up" && break
        sleep 0.1
    done
    start_dnsmasq --address=/test/$O1 || { bad "dnsmasq did not start" "$(cat "$T/dnsmasq.err")"; e2e_finish; exit; }
    # the helper: run N prints rt17tok-RND-N-value (N in 4 digits); HMODE
    # slow: from run 2 on it takes 1.5 s; fork: from run 2 on it starts a
    # child that keeps its stdout; fail: from run 2 on it fails
    mkdir -p "$SJ/real"
    cat > "$SJ/real/helper.sh" <<'SH'
#!/bin/bash
n=$(cat "$HC" 2>/dev/null || echo 0); n=$((n + 1)); echo "$n" > "$HC" || exit 1
case "${HMODE:-}" in
slow) [ "$n" -ge 2 ] && sleep 1.5 ;;
fork) [ "$n" -ge 2 ] && { bash -c "exec -a rt17mark-$HRND sleep 60" & } ;;
fail) [ "$n" -ge 2 ] && exit 1 ;;
esac
printf 'rt17tok-%s-%04d-value\n' "$HRND" "$n"
SH
    chmod 755 "$SJ/real" "$SJ/real/helper.sh"
    ln -s "$SJ/real/helper.sh" "$SJ/helper.sh"
    base='"allowedDomains": ["*.test", "'"$O1"'"], "dnsServers": ["127.0.0.1:'"$DPORT"'"], "denyPrivateAddresses": false,
      "tlsTerminate": {"extraCaCertPaths": ["'"$SJ"'/ca.pem"]}'
    mk() { # FILE PROGRAM [TOP-LEVEL KEYS]
        cat > "$SJ/$1" <<JSON
{"network": {$base}, ${3:-}
 "credentials": {"allowPlaintextInject": true,
   "envVars": [{"name": "XTOK", "mode": "mask", "injectHosts": ["inj.test"],
                "value": {"exec": ["$2"], "ttl": 1, "timeout": 3}},
               {"name": "TOKEN", "mode": "mask", "injectHosts": ["inj.test"]}]}}
JSON
    }
    mk x.json "$SJ/real/helper.sh"
    mk weak.json "$SJ/real/helper.sh" '"enableWeakerNestedSandbox": true,'
    cat > "$SJ/p.json" <<JSON
{"network": {"allowedDomains": ["$O1"], "denyPrivateAddresses": false}, "proxy": {"timeouts": {"idle": 2}}}
JSON
    chmod 644 "$SJ"/*.json
fi

start=$SECONDS
if [ -n "${CX_CHILD:-}" ]; then
    SH=$CX_SH SJ=$CX_SJ PA=$CX_PA PH=$CX_PH DPORT=$CX_DPORT GH=$CX_GH
fi
# the symlinked program: SJ/lnk.WHO -> T/w.WHO/l2 (the sandbox's working
# directory) -> SJ/real; made by root (SJ is root's) before each pass
mklnk() {
    cat > "$SJ/lnk.$1.json" <<JSON
$(sed "s#\"$SJ/real/helper.sh\"#\"$SJ/lnk.$1/helper.sh\"#" "$SJ/x.json")
JSON
    chmod 644 "$SJ/lnk.$1.json"
}
if [ -z "${CX_CHILD:-}" ]; then
    rm -f "$SJ/lnk.root" && ln -s "$T/w.root/l2" "$SJ/lnk.root" && mklnk root
    cp "$SJ/lnk.root.json" "$SJ/lnk.json"
    run_cases
    splice_cases
else
    run_cases
    splice_cases
    e2e_finish
    exit
fi
# --- the same cases as an unprivileged user -----------------------------------
if command -v setpriv >/dev/null && { id sluicetest >/dev/null 2>&1 || useradd -M -s /usr/sbin/nologin sluicetest >/dev/null 2>&1; }; then
    U=$(id -u sluicetest) G=$(id -g sluicetest)
    UT=$(mktemp -d /tmp/sluice-cx-user.XXXXXX) && chown "$U:$G" "$UT"
    rm -f "$SJ/lnk.user" && ln -s "$UT/w.user/l2" "$SJ/lnk.user" && mklnk user
    cp "$SJ/lnk.user.json" "$SJ/lnk.json"
    cp "$SLUICE" "$SH/sluice" && chmod 755 "$SH/sluice"
    cp -r "$HERE" "$SH/e2e" && chmod -R a+rX "$SH/e2e"
    echo "# --- the same cases as uid $U (setpriv) ---"
    (cd / && setpriv --reuid="$U" --regid="$G" --clear-groups --inh-caps=-all \
        env CX_NETNS=1 CX_CHILD=1 CX_SH="$SH" CX_SJ="$SJ" CX_RND="$RND" CX_PA="$PA" CX_PH="$PH" \
        CX_DPORT="$DPORT" CX_GH="$SH/e2e/cred-exec-helpers" CX_T="$UT" PATH="/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin" \
        bash "$SH/e2e/cred_exec_attack.sh" "$SH/sluice") 2>&1 | tee "$T/child.out"
    rm -rf "$UT"
    e2e_add_counts "$T/child.out"
else
    echo "# SKIP the unprivileged pass: no setpriv or no user"
fi
echo "# cred_exec_attack.sh took $((SECONDS - start)) s"
e2e_finish
