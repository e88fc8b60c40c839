#!/usr/bin/env bash
# tests/e2e/transparent.sh - `sluice run --transparent` (network.transparent)
# end to end: every TCP connect() in the sandbox judged by the policy and
# connected by sluice (seccomp user notification + ADDFD), the sandbox's
# resolver (synthetic address per name), as root and (run-helpers/twice.sh)
# as an unprivileged user. Origins are python http.servers on the host's
# 127.0.0.1, allow-listed as IP literals as the other e2e tests do; the e2e
# lib's dnsmasq is sluice's upstream resolver (network.dnsServers) and answers
# 127.0.0.1 for every test name, so the names share one address and can only
# be told apart by name. Nothing leaves 127.0.0.1.
set -uo pipefail
SLUICE=${1:?usage: transparent.sh PATH/TO/sluice}
case $SLUICE in /*) ;; *) SLUICE=$(cd "$(dirname "$SLUICE")" && pwd)/$(basename "$SLUICE") ;; esac
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/lib.sh"
. "$HERE/run-helpers/twice.sh"
PROBE=$HERE/transparent-helpers/probe.py

# rt-4 (red team), issue 21 item 7 in transparent mode: report mode never
# lifts the guard. Names (own dnsmasq) answering 127.0.0.2 and
# ::ffff:127.0.0.2 and the literal 127.0.0.2, all under a report-mode deny
# rule, must not be connected; a listener on 127.0.0.2 must accept nothing.
rt4_report_transparent() {
    local p out n
    start_dnsmasq --address=/rt4-lo.test/127.0.0.2 --address=/rt4-map.test/::ffff:127.0.0.2 ||
        { bad "rt-4 transparent report: dnsmasq did not start" "$(cat "$T/dnsmasq.err")"; return; }
    p=$(free_port)
    : > "$T/rt4-accepted"
    python3 -c 'import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.2", int(sys.argv[1]))); s.listen(8); print("ready", flush=True)
while True:
    c, _ = s.accept(); open(sys.argv[2], "a").write("accepted\n"); c.close()' "$p" "$T/rt4-accepted" \
        > "$T/rt4-listen.out" 2>&1 &
    PIDS+=($!)
    wait_for "$T/rt4-listen.out" ready 5 || { bad "rt-4 transparent report: listener" "$(cat "$T/rt4-listen.out")"; return; }
    printf '{"network": {"mode": "report", "transparent": true, "dnsServers": ["127.0.0.1:%s"],\n  "deniedDomains": ["*.test"]}}\n' \
        "$DPORT" > "$T/rt4-tp.json"
    out=$("$SLUICE" run -q --settings "$T/rt4-tp.json" -- python3 -c '
import socket, sys
for h in ("rt4-lo.test", "rt4-map.test", "127.0.0.2"):
    for fam in (socket.AF_INET, socket.AF_INET6):
        try:
            ai = socket.getaddrinfo(h, int(sys.argv[1]), fam, socket.SOCK_STREAM)
        except Exception:
            continue
        for a in ai:
            s = socket.socket(a[0], socket.SOCK_STREAM); s.settimeout(3)
            try:
                s.connect(a[4]); print(h, "CONNECTED")
            except Exception as e:
                print(h, "refused", e)' "$p" 2>&1)
    sleep 0.3
    n=$(grep -c accepted "$T/rt4-accepted")
    ! grep -q CONNECTED <<< "$out" && [ "$n" = 0 ] &&
        ok "rt-4 transparent report mode: names and literals the guard refuses are not connected" ||
        bad "rt-4 transparent report mode: the guard was lifted ($n accepted)" "$out"
}

cases() {
    local W=$T/work S=$T/s.json S2=$T/s2.json PA PB out err rc i
    export XDG_RUNTIME_DIR=$T/xdg
    mkdir -p -m 700 "$XDG_RUNTIME_DIR"
    mkdir -p "$W" "$T/www"
    cd "$W" || return
    # the probe runs inside the sandbox, whose /tmp is private: a checkout
    # under /tmp (CI's clone) is out of its sight, the working directory not
    cp "$HERE/transparent-helpers/probe.py" "$W/probe.py" || return
    PROBE=$W/probe.py
    echo hello-origin > "$T/www/hello.txt"
    truncate -s 256M "$T/www/big.bin" # sparse: page cache only

    # the kernel pieces: a run that cannot have them must refuse, not degrade
    out=$("$SLUICE" run --transparent -- true 2>&1); rc=$?
    if [ $rc -ne 0 ]; then
        if grep -q 'transparent mode needs' <<< "$out"; then
            skip "transparent mode" "this kernel lacks a piece (refused, as it must): $out"
            return 0
        fi
    fi

    PA=$(free_port); PB=$(free_port)
    python3 -m http.server --bind 127.0.0.1 --directory "$T/www" "$PA" >"$T/A.err" 2>&1 &
    PIDS+=($!)
    python3 -m http.server --bind 127.0.0.1 --directory "$T/www" "$PB" >"$T/B.err" 2>&1 &
    PIDS+=($!)
    for i in $(seq 100); do
        curl -s --noproxy '*' "http://127.0.0.1:$PA/hello.txt" >/dev/null &&
            curl -s --noproxy '*' "http://127.0.0.1:$PB/hello.txt" >/dev/null && break
        sleep 0.1
    done
    # a git daemon for git:// (allow-listed like the origins)
    GPORT=
    if [ -x /usr/lib/git-core/git-daemon ] || git daemon -h >/dev/null 2>&1 || [ $? -eq 129 ]; then
        mkdir -p "$T/git"
        if git init -q --bare "$T/git/repo.git" && git -C "$T/git/repo.git" symbolic-ref HEAD refs/heads/main &&
            git init -q "$T/gitw" && git -C "$T/gitw" -c user.email=t@t -c user.name=t commit -q --allow-empty -m init &&
            git -C "$T/gitw" push -q "$T/git/repo.git" HEAD:refs/heads/main; then
            GPORT=$(free_port)
            git daemon --reuseaddr --base-path="$T/git" --export-all --listen=127.0.0.1 --port="$GPORT" "$T/git" \
                >"$T/gitd.err" 2>&1 &
            PIDS+=($!)
            for i in $(seq 100); do
                git ls-remote "git://127.0.0.1:$GPORT/repo.git" >/dev/null 2>&1 && break
                sleep 0.1
            done
        fi
    fi
    : > "$T/B.err" # from here on, any request line in it is a connection that got through
    start_dnsmasq --address=/origin.test/127.0.0.1 --address=/twin.test/127.0.0.1 \
        --address=/evil.test/127.0.0.1 --address=/other.test/127.0.0.1
    if [ -z "$DPORT" ]; then
        bad "dnsmasq did not start" "$(cat "$T/dnsmasq.err")"
        return 0
    fi
    cat > "$S" <<JSON
{"network": {"allowedDomains": ["origin.test", "127.0.0.1:$PA", "127.0.0.1:${GPORT:-1}"],
             "deniedDomains": ["evil.test"], "dnsServers": ["127.0.0.1:$DPORT"], "transparent": true}}
JSON
    cat > "$S2" <<JSON
{"network": {"allowedDomains": ["origin.test", "127.0.0.1:$PA"], "dnsServers": ["127.0.0.1:$DPORT"]}}
JSON
    echo '{"network": {"isolate": false}}' > "$T/noiso.json"
    echo '{"network": {"transparent": true, "allowAllUnixSockets": true}}' > "$T/unix.json"
    sr() { "$SLUICE" run --settings "$S" "$@"; }

    # --- the resolver ----------------------------------------------------------------------
    out=$(sr -- cat /etc/resolv.conf 2>&1)
    [ "$(grep -c '^nameserver' <<< "$out")" = 1 ] && grep -q '^nameserver 127.0.0.1$' <<< "$out" &&
        ok "resolv.conf in the sandbox names only the sandbox's resolver" || bad "resolv.conf" "$out"
    out=$(sr -- getent ahostsv4 origin.test 2>&1)
    grep -q '^198\.1[89]\.' <<< "$out" && ok "getent: an allowed name gets a synthetic 198.18/15 address" ||
        bad "getent ahostsv4 origin.test" "$out"
    out=$(sr -- getent ahostsv6 origin.test 2>&1)
    grep -q '^fd53:6c75:6963:6500::' <<< "$out" && ok "getent: AAAA from fd53:6c75:6963:6500::/64" ||
        bad "getent ahostsv6 origin.test" "$out"
    out=$(sr -c 'getent ahostsv4 origin.test | head -1; getent ahostsv4 twin.test | head -1' 2>&1)
    [ "$(awk '{print $1}' <<< "$out" | sort -u | wc -l)" = 2 ] &&
        ok "two names get two addresses" || bad "distinct synthetic addresses" "$out"
    out=$(sr -c 'getent hosts evil.test; echo rc=$?' 2>&1)
    grep -q 'rc=2' <<< "$out" && grep -q 'evil.test (dns)' <<< "$out" &&
        ok "a denied name: NXDOMAIN, and in the blocked summary" || bad "denied name NXDOMAIN" "$out"
    grep -q 'evil.test' "$T/dnsmasq.log" && bad "a denied name was resolved upstream" "$(grep evil "$T/dnsmasq.log")" ||
        ok "a denied name is never sent upstream"
    for p in udp tcp; do
        out=$(sr -- python3 "$PROBE" dns origin.test A $p 2>&1)
        [ "$out" = "id=1234 rcode=0 answers=1" ] && ok "DNS over $p: A answered" || bad "DNS $p A" "$out"
    done
    out=$(sr -- python3 "$PROBE" dns origin.test MX udp 2>&1)
    [ "$out" = "id=1234 rcode=0 answers=0" ] && ok "DNS: MX gets an empty NOERROR" || bad "DNS MX" "$out"
    out=$(sr -- python3 "$PROBE" dns evil.test AAAA tcp 2>&1)
    grep -q "rcode=3 answers=0" <<< "$out" && ok "DNS over tcp: a denied name is NXDOMAIN" || bad "DNS tcp NXDOMAIN" "$out"
    # a client that pipelines queries and never reads its answers (and floods
    # UDP) must not grow sluice on the host: it stops being read while its
    # answers are unsent. a million made the old one grow by about 1 GiB.
    # In a sanitizer build ASan's quarantine would keep up to 256 MiB of
    # freed answers resident (170 MB; 40 MB with asan_options' 16 MiB); the
    # normal build stays near 4 MB.
    rm -f "$W/flood" "$W/flood.done"
    ASAN_OPTIONS=$(asan_options) "$SLUICE" run --settings "$S" --quiet -- python3 "$PROBE" dnsflood origin.test 1000000 "$W/flood" > "$T/flood.out" 2>&1 &
    local fpid=$! rss
    for i in $(seq 1200); do [ -e "$W/flood" ] && break; kill -0 $fpid 2>/dev/null || break; sleep 0.1; done
    rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$fpid/status" 2>/dev/null)
    touch "$W/flood.done"
    wait $fpid
    if [ ! -e "$W/flood" ] || [ -z "$rss" ]; then
        bad "DNS flood: the probe did not finish flooding" "$(cat "$T/flood.out")"
    elif [ "$rss" -lt 131072 ]; then
        ok "DNS flood ($(cat "$W/flood")): sluice's host RSS stays bounded (${rss} kB)"
    else
        bad "DNS flood: sluice's host RSS grew to ${rss} kB ($(cat "$W/flood"))" "$(cat "$T/flood.out")"
    fi
    out=$(sr -- python3 "$PROBE" dnsconns origin.test 80 2>&1)
    [ "$out" = "first=answered last=closed" ] &&
        ok "DNS over tcp: connections beyond the cap are closed, the others still answer" ||
        bad "DNS tcp connection cap" "$out"

    # --- connections by name ---------------------------------------------------------------
    out=$(sr -- curl --max-time 10 -sS --noproxy '*' "http://origin.test:$PA/hello.txt" 2>&1)
    [ "$out" = hello-origin ] && ok "curl --noproxy '*' to an allowed name" || bad "curl --noproxy" "$out"
    out=$(sr -- python3 "$PROBE" create origin.test "$PA" 2>&1)
    [ "$out" = body=hello-origin ] && ok "python socket.create_connection to an allowed name" ||
        bad "create_connection" "$out"
    out=$(sr -- python3 "$PROBE" thread origin.test "$PA" 2>&1)
    [ "$out" = body=hello-origin ] && ok "connect() from a thread other than the main one" ||
        bad "connect from a thread" "$out"
    out=$(sr -- python3 "$PROBE" epoll origin.test "$PA" 2>&1)
    [ "$out" = "connect=EINPROGRESS events=1 so_error=0 body=hello-origin" ] &&
        ok "non-blocking connect, then epoll (Go's and libuv's order)" || bad "epoll after connect" "$out"
    out=$(sr -- curl --max-time 60 -sS --noproxy '*' -o /dev/null -w '%{http_code} %{size_download}' \
        "http://origin.test:$PA/big.bin" 2>&1)
    [ "$out" = "200 268435456" ] && ok "a 256 MiB download on the connection sluice handed over: every byte" ||
        bad "256 MiB download" "$out"
    out=$(sr -- python3 "$PROBE" x32 origin.test "$PA" 2>&1)
    [ "$out" = body=hello-origin ] && ok "connect() through the x32 ABI is judged like the native one" ||
        bad "x32 connect" "$out"
    out=$(sr -- python3 "$PROBE" x32 twin.test "$PA" 2>&1)
    grep -q "^x32 errno=ECONNREFUSED" <<< "$out" && ok "x32 connect() to a name the policy refuses: ECONNREFUSED" ||
        bad "x32 refused" "$out"
    out=$(sr -- python3 "$PROBE" v6 origin.test "$PA" 2>&1)
    [ "$out" = "asked=fd53 domain=AF_INET6 peer=asked tclass=32 body=hello-origin" ] &&
        ok "an IPv6 socket stays IPv6 with an IPv4 upstream (::ffff:), its IPv6 options kept" ||
        bad "IPv6 socket, IPv4 upstream" "$out"
    out=$(sr -- python3 "$PROBE" peername origin.test "$PA" 2>&1)
    [ "$out" = "asked=synthetic peer=asked dup=asked short=rc0,len16,family2 badptr=EFAULT unix='' unconnected=ENOTCONN" ] &&
        ok "getpeername() gives the address asked for (a dup too; cut to a short buffer; EFAULT; others the kernel's)" ||
        bad "getpeername" "$out"
    out=$(sr -- python3 "$PROBE" nonblock origin.test "$PA" 2>&1)
    [ "$out" = "connect=EINPROGRESS writable=1 so_error=0 nodelay=1 keepalive=1 nonblock=1 peer=asked body=hello-origin" ] &&
        ok "non-blocking connect: EINPROGRESS, poll, SO_ERROR 0, options kept, shutdown" ||
        bad "non-blocking connect" "$out"
    # the command only ever holds host sockets that are connected to a
    # vetted address: none can be aimed elsewhere (the origin on $PB, which
    # no rule allows, must see nothing: checked at the end)
    PR=$(free_port)
    echo "{\"network\": {\"allowedDomains\": [\"127.0.0.1:$PA\", \"127.0.0.1:$PR\"], \"transparent\": true}}" > "$T/reaim.json"
    out=$("$SLUICE" run --settings "$T/reaim.json" -- python3 "$PROBE" reaim 127.0.0.1 "$PA" "$PB" "$PR" 2>&1)
    case $out in
    "shutdown=ok fastopen="*" unspec=EPERM bind="*" listen="*" refused=ECONNREFUSED fastopen2="*)
        if grep -qE 'fastopen=ok|bind=ok|listen=ok|fastopen2=ok' <<< "$out"; then
            bad "a connected socket re-aimed" "$out"
        else
            ok "a socket sluice handed over cannot be re-aimed (shutdown, MSG_FASTOPEN, AF_UNSPEC, bind, listen; after a refused connect): $out"
        fi ;;
    *) bad "re-aiming a handed-over socket" "$out" ;;
    esac
    # ... nor can one whose handshake is under way: an origin whose accept
    # queue is full (backlog 0, one connection queued) drops the SYN
    PC=$(free_port)
    python3 -c '
import socket, sys, time
l = socket.socket(); l.bind(("127.0.0.1", int(sys.argv[1]))); l.listen(0)
filler = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
open(sys.argv[2], "w").close()
time.sleep(600)
' "$PC" "$T/hang.ready" >"$T/hang.err" 2>&1 &
    PIDS+=($!)
    for i in $(seq 100); do [ -e "$T/hang.ready" ] && break; sleep 0.05; done
    echo "{\"network\": {\"allowedDomains\": [\"127.0.0.1:$PC\"], \"transparent\": true}, \"proxy\": {\"timeouts\": {\"dial\": 1.5}}}" > "$T/hang.json"
    out=$("$SLUICE" run --settings "$T/hang.json" -- python3 "$PROBE" reaim_pending 127.0.0.1 "$PC" "$PB" 2>&1)
    case $out in
    "connect=ETIMEDOUT shutdown="*" fastopen="*)
        grep -q 'fastopen=ok' <<< "$out" && bad "a half-open socket re-aimed" "$out" ||
            ok "a non-blocking connect() whose handshake hangs never hands over a half-open socket: $out" ;;
    *) bad "non-blocking connect() to a hanging origin" "$out $(cat "$T/hang.err")" ;;
    esac
    # issue 21, item 1: a handshake that ends on a SYN retransmit (the dial
    # saw EINPROGRESS), then the origin's reset at each phase; nothing the
    # command does with the socket may reach the sink (no rule allows it)
    # or listen on the host's 0.0.0.0. slow_origin.py and the probe share
    # the working directory ($W).
    PS=$(free_port); PK=$(free_port); PL=$(free_port)
    rm -f "$W"/go.* "$W/ready" "$W/sink.log"
    python3 "$HERE/transparent-helpers/slow_origin.py" "$PS" "$PK" "$W" >"$T/slow.err" 2>&1 &
    PIDS+=($!)
    for i in $(seq 100); do [ -e "$W/ready" ] && break; sleep 0.05; done
    echo "{\"network\": {\"allowedDomains\": [\"127.0.0.1:$PS\"], \"transparent\": true, \"allowLocalBinding\": true}}" > "$T/reset.json"
    out=$("$SLUICE" run --quiet --settings "$T/reset.json" -- python3 "$PROBE" reaim_reset 127.0.0.1 "$PS" "$PK" "$PL" 2>&1)
    # a round whose reset came before the handover fails its connect()
    # (ECONNRESET) and leaves the command its own socket, which may do as
    # it likes inside; a handed-over one must refuse every step
    handed=$(grep -E '^round=[0-9]+ [a-z]+ [a-z]+ connect=(ok|EINPROGRESS/0) ' <<< "$out")
    if [ "$(grep -c 'fastopen1=EISCONN' <<< "$handed")" -ge 3 ] &&
        ! grep -qE '(fastopen[0-9]|unspec|tfo_connect|bind|listen)=ok' <<< "$handed" && [ ! -s "$W/sink.log" ]; then
        ok "a handed-over socket whose handshake ended on a SYN retransmit, reset at each phase, cannot be re-aimed (MSG_FASTOPEN, AF_UNSPEC, TCP_FASTOPEN_CONNECT, bind, listen)"
    else
        bad "re-aiming a handed-over socket after a reset" "$out
sink: $(cat "$W/sink.log" 2>/dev/null) $(cat "$T/slow.err")"
    fi
    # ... nor by a connect(AF_UNSPEC) the kernel would run on a number
    # another thread swaps a handed-over socket onto (the host runs what it
    # checked; CONTINUE let 14 of 2000 through here)
    out=$(sr --quiet -- python3 "$PROBE" swap 127.0.0.1 "$PA" "$PK" 1500 2>&1)
    if [ "$out" = "swap escaped=0 calls=1500" ] && [ ! -s "$W/sink.log" ]; then
        ok "connect(AF_UNSPEC) racing a dup2() of a handed-over socket never disconnects it"
    else
        bad "AF_UNSPEC racing dup2" "$out
sink: $(cat "$W/sink.log" 2>/dev/null)"
    fi
    # rt-1 (red team of issue 21 item 1): an origin that resets every
    # connection 1 s after its hello (time for sluice to hand it over on a
    # loaded machine: the reset must hit a handed-over socket); a handed-over socket so reset must
    # refuse the options that would loosen it (TCP_REPAIR, IP_TRANSPARENT)
    # and every way of aiming it at the sink with or without allowLocalBinding:
    # sendmsg/sendmmsg with MSG_FASTOPEN and an address, TCP_FASTOPEN_CONNECT
    # then write, connect, AF_UNSPEC, bind on the host's 0.0.0.0, listen,
    # accept, and the same from a forked child and a process that got it by
    # SCM_RIGHTS. Options that cannot re-aim it (IP_FREEBIND, SO_BINDTODEVICE,
    # SO_REUSE*, TCP_FASTOPEN_CONNECT itself) may succeed.
    PX=$(free_port); PY=$(free_port)
    python3 -c '
import socket, struct, sys, threading, time
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("127.0.0.1", int(sys.argv[1]))); l.listen(16)
open(sys.argv[2], "w").close()
def serve(c):
    c.sendall(b"hello\n"); time.sleep(1.0)
    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)); c.close()
while True:
    c, _ = l.accept(); threading.Thread(target=serve, args=(c,), daemon=True).start()
' "$PX" "$T/rst.ready" >"$T/rst.err" 2>&1 &
    PIDS+=($!)
    for i in $(seq 100); do [ -e "$T/rst.ready" ] && break; sleep 0.05; done
    for lb in true false; do
        echo "{\"network\": {\"allowedDomains\": [\"127.0.0.1:$PX\"], \"transparent\": true, \"allowLocalBinding\": $lb}}" > "$T/rst.json"
        out=$("$SLUICE" run --quiet --settings "$T/rst.json" -- python3 "$PROBE" reaim_opts 127.0.0.1 "$PX" "$PK" "$PY" 2>&1)
        if grep -q 'opt_repair=EPERM opt_transparent=EPERM .*sendmsg_fo1=EISCONN sendmsg_fo2=EISCONN sendmmsg_fo1=EISCONN sendmmsg_fo2=EISCONN .*connect=EPERM unspec=EPERM bind=E[A-Z]* listen=E[A-Z]* accept=EINVAL fork=held scm_rights=held$' <<< "$out" &&
            ! grep -qE '(^| )(sendmsg_fo[0-9]|sendmmsg_fo[0-9]|tfo_write[0-9]|connect|unspec|bind|listen|accept)=ok' <<< "$out" && [ ! -s "$W/sink.log" ]; then
            ok "a handed-over socket reset by its peer: no option, send path, fork or SCM_RIGHTS re-aims it (allowLocalBinding $lb)"
        else
            bad "a handed-over, reset socket re-aimed (allowLocalBinding $lb)" "$out
sink: $(cat "$W/sink.log" 2>/dev/null)"
        fi
    done
    # ... nor does a bind() (allowLocalBinding: run by sluice) on a number
    # another thread swaps a handed-over, reset (so unbound) socket onto
    echo "{\"network\": {\"allowedDomains\": [\"127.0.0.1:$PX\"], \"transparent\": true, \"allowLocalBinding\": true}}" > "$T/rst.json"
    out=$("$SLUICE" run --quiet --settings "$T/rst.json" -- python3 "$PROBE" swap_bind 127.0.0.1 "$PX" "$PY" 1500 2>&1)
    [ "$out" = "swap_bind escaped=0 calls=1500" ] &&
        ok "bind() racing a dup2() of a handed-over, reset socket never binds it in the host's namespace" ||
        bad "bind racing dup2" "$out"
    # rt-1 H2: with allowAllUnixSockets a connect() to a Unix path was handed
    # back to the kernel (CONTINUE), which looked the number and the address
    # up again. A thread that dup2()s a handed-over socket onto the number of
    # the Unix socket sluice checked, while another flips the address to
    # AF_UNSPEC, disconnected the host's socket; sendto(MSG_FASTOPEN) then
    # connected it to the sink from the host's namespace (won within a few
    # thousand calls, from Python). sluice now runs the call itself on the
    # socket it checked (transparent.c, unix_path_call).
    echo "{\"network\": {\"allowedDomains\": [\"127.0.0.1:$PA\"], \"transparent\": true, \"allowAllUnixSockets\": true}}" > "$T/swapu.json"
    : > "$W/sink.log"
    out=$("$SLUICE" run --quiet --settings "$T/swapu.json" -- python3 "$PROBE" swap_unix 127.0.0.1 "$PA" "$PK" 20000 2>&1)
    if [ "$out" = "swap_unix escaped=0 calls=20000" ] && [ ! -s "$W/sink.log" ]; then
        ok "allowAllUnixSockets: connect() to a Unix path racing a dup2() and an AF_UNSPEC rewrite never disconnects a handed-over socket"
    else
        bad "allowAllUnixSockets: a Unix-path connect() raced with dup2() + AF_UNSPEC disconnects a handed-over socket, which then reaches the host's network" "$out
sink: $(cat "$W/sink.log" 2>/dev/null)"
    fi
    : > "$W/sink.log"
    if command -v nc >/dev/null 2>&1; then
        out=$(sr -c "printf 'GET /hello.txt HTTP/1.0\r\n\r\n' | nc -q 5 origin.test $PA 2>&1 | tail -1")
        [ "$out" = hello-origin ] && ok "nc to an allowed name" || bad "nc" "$out"
    else
        skip "nc to an allowed name" "nc is not installed"
    fi
    if command -v socat >/dev/null 2>&1; then
        out=$(sr -c "printf 'GET /hello.txt HTTP/1.0\r\n\r\n' | socat -t 5 - TCP:origin.test:$PA 2>&1 | tail -1")
        [ "$out" = hello-origin ] && ok "socat TCP: to an allowed name" || bad "socat" "$out"
    else
        skip "socat to an allowed name" "socat is not installed"
    fi
    if command -v node >/dev/null 2>&1; then
        out=$(sr -- node -e "require('http').get('http://origin.test:$PA/hello.txt', r => { let b = ''; r.on('data', d => b += d); r.on('end', () => console.log(r.statusCode + ' ' + b.trim())); }).on('error', e => console.log('error ' + e.code))" 2>&1)
        [ "$out" = "200 hello-origin" ] && ok "node http.get (libuv, threaded getaddrinfo) to an allowed name" ||
            bad "node" "$out"
    else
        skip "node http.get" "node is not installed"
    fi
    if [ -n "$GPORT" ]; then
        out=$(sr -- git ls-remote "git://origin.test:$GPORT/repo.git" 2>&1)
        grep -q 'refs/heads/main' <<< "$out" && ok "git ls-remote over git:// to an allowed name" ||
            bad "git://" "$out"
    else
        skip "git over git://" "git daemon is not available"
    fi
    out=$(sr -- sh -c "curl --max-time 10 -sS --noproxy '*' http://twin.test:$PA/hello.txt; echo rc=\$?" 2>&1)
    grep -q 'rc=7' <<< "$out" && grep -q "twin.test:$PA" <<< "$out" &&
        ok "same address, other name: refused by name and reported" || bad "twin.test refused" "$out"
    out=$(sr -- python3 "$PROBE" refused twin.test "$PA" 2>&1)
    grep -q 'errno=ECONNREFUSED' <<< "$out" && ok "a denied connect() fails with ECONNREFUSED" ||
        bad "denied errno" "$out"
    out=$(sr -- sh -c "curl --max-time 10 -sS --noproxy '*' http://evil.test:$PA/hello.txt; echo rc=\$?" 2>&1)
    grep -q 'rc=6' <<< "$out" && ok "curl to a denied name fails to resolve" || bad "curl evil.test" "$out"

    # --- IP literals ------------------------------------------------------------------------
    out=$(sr -- python3 "$PROBE" create 127.0.0.1 "$PA" 2>&1)
    [ "$out" = body=hello-origin ] && ok "an allow-listed IP literal is reached" || bad "IP literal allowed" "$out"
    out=$(sr -- python3 "$PROBE" refused 127.0.0.1 "$PB" 2>&1)
    grep -q 'errno=ECONNREFUSED' <<< "$out" && grep -q "127.0.0.1:$PB" <<< "$out" &&
        ok "an IP literal no rule allows is refused and reported" || bad "IP literal refused" "$out"
    out=$(sr -- python3 "$PROBE" refused 198.18.200.7 "$PA" 2>&1)
    grep -q 'errno=ECONNREFUSED' <<< "$out" && ok "a synthetic address no name produced is an IP literal (refused)" ||
        bad "unused synthetic address" "$out"

    # --- what must keep working -------------------------------------------------------------
    out=$(sr -- curl --max-time 10 -sS -x http://127.0.0.1:3128 "http://origin.test:$PA/hello.txt" 2>&1)
    [ "$out" = hello-origin ] && ok "the proxy listeners still work" || bad "proxy listener" "$out"
    # a server of the command's own (bind() and listen() need network.allowLocalBinding)
    cat > "$T/bind.json" <<JSON
{"network": {"allowLocalBinding": true, "transparent": true, "dnsServers": ["127.0.0.1:$DPORT"]}}
JSON
    out=$("$SLUICE" run --settings "$T/bind.json" -- python3 "$PROBE" own_server 2>&1)
    [ "$out" = own=ping ] && ok "the command's own loopback server is reached inside" || bad "own server" "$out"
    out=$("$SLUICE" run --settings "$T/noiso.json" --transparent -- true 2>&1); rc=$?
    [ $rc -eq 125 ] && grep -q 'network.isolate is false' <<< "$out" &&
        ok "transparent mode refuses network.isolate false (no namespace of its own)" ||
        bad "transparent without isolate" "rc=$rc $out"
    out=$("$SLUICE" run --settings "$S2" --transparent -- curl --max-time 10 -sS --noproxy '*' "http://origin.test:$PA/hello.txt" 2>&1)
    [ "$out" = hello-origin ] && ok "sluice run --transparent (flag, setting off)" || bad "--transparent flag" "$out"
    out=$("$SLUICE" run --settings "$S2" -- sh -c "curl --max-time 10 -sS --noproxy '*' http://origin.test:$PA/hello.txt; echo rc=\$?" 2>&1)
    grep -q 'rc=6' <<< "$out" && ok "without transparent mode nothing changes (no resolver)" || bad "off by default" "$out"
    sr --log "$T/run.log" -- curl --max-time 10 -sS --noproxy '*' "http://origin.test:$PA/hello.txt" >/dev/null 2>&1
    grep -q "protocol=transparent host=origin.test port=$PA decision=allow" "$T/run.log" &&
        ok "the log has the transparent decision" || bad "log line" "$(cat "$T/run.log")"

    # connect()s in flight are bounded by proxy.limits.maxConnections. The
    # third connect() must come while the first two still wait: the ask
    # timeout (3 s, 8 s in a sanitizer build or under SLOW) bounds the time
    # from their questions to it
    local ASK_TO=3
    { grep -qa __asan_init "$SLUICE" || [ "$SLOW" -gt 1 ]; } && ASK_TO=8
    cat > "$T/lim.json" <<JSON
{"network": {"dnsServers": ["127.0.0.1:$DPORT"], "transparent": true},
 "proxy": {"limits": {"maxConnections": 2}, "timeouts": {"ask": $ASK_TO}}}
JSON
    printf '#!/bin/sh\ntouch "%s/asked.$$"\nexec sleep 30\n' "$W" > "$T/never.sh"
    chmod 755 "$T/never.sh"
    rm -f "$W"/asked.*
    out=$("$SLUICE" run --settings "$T/lim.json" --ask "exec:$T/never.sh" -- python3 "$PROBE" limit other.test 1001 1002 1003 2>&1)
    grep -q '^limit third=EAGAIN first=ECONNREFUSED second=ECONNREFUSED' <<< "$out" &&
        ok "connect()s in flight beyond maxConnections fail at once with EAGAIN" || bad "in-flight limit" "$out"
    rm -f "$W"/asked.*

    # --- sluice check explains it (same verdict functions) ------------------------------------
    out=$("$SLUICE" check --settings "$S" evil.test:80 "origin.test:$PA" "twin.test:$PA" "127.0.0.1:$PB" 2>&1)
    grep -A1 '^deny  evil.test:80' <<< "$out" | grep -q "resolver answers NXDOMAIN" &&
        grep -A1 "^allow origin.test:$PA" <<< "$out" | grep -q 'synthetic address' &&
        grep -A1 "^ask   twin.test:$PA" <<< "$out" | grep -q 'synthetic address' &&
        grep -A1 "127.0.0.1:$PB" <<< "$out" | grep -q 'IP literal' &&
        ok "sluice check explains the transparent decisions" || bad "check" "$out"
    out=$("$SLUICE" check --settings "$S" --json evil.test 2>&1)
    grep -q '"transparent":{"dns":"nxdomain"}' <<< "$out" && ok "sluice check --json: transparent.dns" ||
        bad "check --json" "$out"

    # --- no new way out ---------------------------------------------------------------------
    out=$(sr -- grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb)' /proc/self/status 2>&1)
    [ "$(grep -c ':[[:space:]]*0000000000000000$' <<< "$out")" = 5 ] &&
        ok "the command holds no capability (bounding and ambient sets empty)" || bad "capabilities" "$out"
    out=$(sr -- python3 "$PROBE" fds 2>&1)
    [ "$out" = seccomp_fds=0 ] && ok "no seccomp listener in the command's descriptors" || bad "notify fd leak" "$out"
    out=$(sr -q -- python3 "$PROBE" udp 2>&1)
    # transparent UDP (issue 26, tests/e2e/transparent_udp.sh): without a
    # udp: rule a datagram is refused (port unreachable from sluice's relay)
    [ "$out" = udp=ECONNREFUSED ] && ok "UDP without a udp: rule is refused ($out)" || bad "UDP" "$out"
    # Without allowAllUnixSockets a datagram socketpair is refused by the
    # seccomp filter (issue 21 item 2), so it cannot be aimed at a host
    # datagram socket by path; with it, the user allowed Unix sockets and the
    # connect() to a path in the working directory works (run by sluice in
    # the command's view, never CONTINUE)
    out=$(cd "$W" && python3 -c '
import socket, subprocess, sys, os
d = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); d.bind("d.sock"); os.chmod("d.sock", 0o777)
code = ("import socket, errno\n"
        "try:\n a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)\n"
        "except OSError as e: print(\"pair=%s\" % errno.errorcode[e.errno]); raise SystemExit\n"
        "try:\n a.connect(\"d.sock\"); a.send(b\"x\"); print(\"dgram=ok\")\n"
        "except OSError as e: print(\"dgram=%s\" % errno.errorcode[e.errno])\n")
for st in sys.argv[2:]:
    r = subprocess.run([sys.argv[1], "run", "--settings", st, "--", "python3", "-c", code],
                       capture_output=True, text=True)
    print(r.stdout.strip(), end=" ")
d.settimeout(5)
try: print("got=%s" % d.recv(8).decode(), end="")
except OSError: print("got=none", end="")
os.unlink("d.sock")' "$SLUICE" "$S" "$T/unix.json" 2>&1)
    [ "$out" = "pair=EPERM dgram=ok got=x" ] &&
        ok "a datagram socketpair is refused without allowAllUnixSockets; with it, its connect() to a Unix path in the working directory works" ||
        bad "socketpair dgram connect to a host path" "$out"
    # allowAllUnixSockets (and allowLocalBinding, so bind() is notified): a
    # Unix path connect()/bind() is run by sluice on the socket it checked,
    # in the command's mount namespace, root, working directory, ids and
    # umask, without capabilities (uxpath.py): a socket in the working
    # directory, by a relative and an absolute path and after chdir; in a
    # denyWrite (read-only) directory (connect works, bind EROFS); in a
    # directory of mode 000 (EACCES, as the command: root in the sandbox has
    # no capability either); in the sandbox's private /tmp, by path and by a
    # symlink in the working directory (the host's /tmp has no such socket);
    # a host path outside the sandbox's view (ENOENT); /proc/1/fd/0 and
    # /proc/1/root as refused to the command (Landlock), /proc/self (names
    # no process for sluice's helper: ENOENT); abstract names are the
    # sandbox's network namespace's (a host one is ECONNREFUSED); bind()
    # makes the file as the command, with its umask, in its /tmp only
    cp "$HERE/transparent-helpers/uxpath.py" "$W/uxpath.py"
    echo "{\"network\": {\"transparent\": true, \"allowAllUnixSockets\": true, \"allowLocalBinding\": true}, \"filesystem\": {\"denyWrite\": [\"$W/ro\"]}}" > "$T/uxp.json"
    out=$(cd "$W" && T=$T python3 uxpath.py host "$W" "$SLUICE" "$T/uxp.json" 2>&1)
    [ "$out" = "cwd=ok abs=ok ro=ok noperm=EACCES tmp=ok link=ok host=ENOENT rel=ok dotdot=ok p1fd=same p1root=same pself=ENOENT habs=ECONNREFUSED iabs=ok bind=ok bown=same bmode=700 bro=EROFS btmp=ok btmpthere=1 hosttmp=0" ] &&
        ok "allowAllUnixSockets: Unix path connect()/bind() run by sluice in the command's view and with its permissions" ||
        bad "Unix path connect()/bind() in the command's view" "$out"
    rm -rf "$W/ro" "$W/noperm" "$W/uxd" "$W/uxlink" "$W/ux.sock" "$W/uxpath.py"
    out=$(python3 -c '
import socket, subprocess, sys
s = socket.socket()
r = subprocess.run(sys.argv[1:], stdin=s.fileno(), capture_output=True, text=True)
print(r.stdout.strip(), r.stderr.strip(), "rc=%d" % r.returncode)' "$SLUICE" run --settings "$S" -- python3 "$PROBE" fd0 "$PB" 2>&1)
    grep -q "stdin is an unconnected TCP socket of the host's network.* rc=125" <<< "$out" &&
        ok "stdin an unconnected TCP socket of the host: refused before anything runs" ||
        bad "host socket as stdin" "$out"
    # issue 21, item 5: a connected one, still SS_CONNECTING and then reset
    cp "$HERE/run-helpers/inherit.py" "$W/inherit.py"
    out=$(python3 "$W/inherit.py" host tcp-reset -- "$SLUICE" run --settings "$S" -- \
        python3 "$W/inherit.py" inside SINK 2>&1)
    case $out in
    *"unspec=EPERM connect=EPERM"*" rc=0 sink=0")
        grep -qE '(fastopen[0-9]|unspec|connect|bind|listen)=ok' <<< "$out" &&
            bad "inherited host TCP socket re-aimed" "$out" ||
            ok "an inherited TCP socket of the host, reset, cannot be re-aimed in transparent mode" ;;
    *) bad "inherited host TCP socket in transparent mode" "$out" ;;
    esac
    out=$(sr --quiet -- python3 "$PROBE" race "$PA" "$PB" 300 2>&1)
    grep -q '^race ok=' <<< "$out" && ok "connect() on an address rewritten by another thread: $out" ||
        bad "race" "$out"
    dns_flood_cases
    if grep -q 'GET' "$T/B.err"; then
        bad "a connection reached the origin no rule allows" "$(cat "$T/B.err")"
    else
        ok "the origin no rule allows saw no connection"
    fi
    rt4_report_transparent
}

# rt-2 (red team of issue 21 item 4): a hostile client of the sandbox's
# resolver. Each flood runs inside (transparent-helpers/dns_flood.py) while
# the host samples the `sluice run` process's VmRSS and open descriptors
# every 0.1 s; the resolver must still answer over UDP and TCP, an
# allow-listed connect() must still be answered during the flood, sluice
# must exit 0 within the time given, and memory and descriptors stay under
# the bounds (64 TCP connections: a few more descriptors than that; memory:
# 64 receive buffers of 64 KiB and 32 queued answers each, or the
# 131,070-name table of the "names" flood).
# dns_flood NAME SETTINGS RSS_MAX_KB FD_MAX ARGS...
# In a sanitizer build the bound is three times as large, with ASan's
# quarantine cut to 16 MiB (asan_options): shadow memory and redzones (the
# pipelining flood: 55 MB there, 10 MB in the normal build; without the cut,
# 400 MB of freed answers stayed resident).
dns_flood() {
    local name=$1 set=$2 rssmax=$3 fdmax=$4 p r f rss=0 fds=0 t0=$SECONDS out rc
    shift 4
    grep -qa __asan_init "$SLUICE" && rssmax=$((rssmax * 3))
    (cd "$W" && ASAN_OPTIONS=$(asan_options) exec "$SLUICE" run -q --settings "$set" -- python3 dns_flood.py "$@") >"$T/flood.out" 2>&1 &
    p=$!
    while kill -0 "$p" 2>/dev/null; do
        r=$(awk '/^VmRSS/ {print $2}' "/proc/$p/status" 2>/dev/null)
        f=$(ls "/proc/$p/fd" 2>/dev/null | wc -l)
        [ -n "$r" ] && [ "$r" -gt "$rss" ] && rss=$r
        [ "$f" -gt "$fds" ] && fds=$f
        if [ $((SECONDS - t0)) -gt 120 ]; then kill "$p"; break; fi
        sleep 0.1
    done
    wait "$p"; rc=$?
    out=$(cat "$T/flood.out")
    if [ $rc = 0 ] && grep -q '^ALIVE .*connect=ok' <<< "$out" && [ "$rss" -le "$rssmax" ] && [ "$fds" -le "$fdmax" ]; then
        ok "rt-2: resolver flood ($name): sluice RSS ${rss} kB <= $rssmax, fds $fds <= $fdmax, exits 0; $out"
    else
        bad "rt-2: resolver flood ($name)" "rc=$rc rss=${rss}kB (max $rssmax) fds=$fds (max $fdmax): $out"
    fi
}

dns_flood_cases() {
    local bh BH SU i
    cp "$HERE/transparent-helpers/dns_flood.py" "$W/dns_flood.py"
    dns_flood "UDP, one name, 256 source ports, answers never read" "$S" 32768 100 udp 30000 "127.0.0.1:$PA"
    dns_flood "UDP, 140,000 distinct 250-byte names (the whole table)" "$S" 65536 100 names 140000 250 "127.0.0.1:$PA"
    dns_flood "TCP, 64 connections pipelining 2000 queries, never reading" "$S" 32768 100 pipeline 64 2000 "127.0.0.1:$PA"
    dns_flood "TCP, 300 connections half-closed after a query" "$S" 32768 100 halfclose 300 "127.0.0.1:$PA"
    dns_flood "TCP slowloris, 100 connections holding one byte of a length prefix" "$S" 32768 100 slowloris 100 "127.0.0.1:$PA"
    dns_flood "TCP, 100 connections with 65535-byte garbage and another length prefix" "$S" 32768 100 huge 100 "127.0.0.1:$PA"
    dns_flood "malformed messages over UDP and TCP" "$S" 32768 100 malformed 20000 "127.0.0.1:$PA"
    # an upstream (network.dnsServers) that never answers: connect()s to a
    # name wait on it, the resolver and other connect()s must not
    BH=$(free_port)
    rm -f "$T/bh.ready"
    python3 - "$BH" "$T/bh.ready" <<'PY' 2>/dev/null &
import socket, sys, time
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("127.0.0.1", int(sys.argv[1])))
t = socket.socket(); t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); t.bind(("127.0.0.1", int(sys.argv[1]))); t.listen(128)
open(sys.argv[2], "w").close()
while True:
    u.recv(4096)  # read and never answer
PY
    bh=$!
    PIDS+=($bh)
    for i in $(seq 50); do [ -e "$T/bh.ready" ] && break; sleep 0.1; done
    SU=$T/slowup.json
    cat > "$SU" <<JSON
{"network": {"allowedDomains": ["slow.test", "127.0.0.1:$PA"], "dnsServers": ["127.0.0.1:$BH"], "transparent": true}}
JSON
    dns_flood "20 connect()s waiting on an upstream that never answers" "$SU" 32768 100 slowup 20 slow.test "127.0.0.1:$PA"
    grep -q 'waiting=20 ' "$T/flood.out" || bad "rt-2: the slow-upstream flood did not hold its connect()s waiting" "$(cat "$T/flood.out")"
    kill "$bh" 2>/dev/null
}

# ASAN_OPTIONS for a run whose memory a case bounds: in a sanitizer build,
# ASan's quarantine (256 MiB of freed blocks kept resident by default) is
# cut to 16 MiB; otherwise the caller's options as they are.
asan_options() {
    local ao=${ASAN_OPTIONS:-}
    grep -qa __asan_init "$SLUICE" && ao="${ao:+$ao:}quarantine_size_mb=16"
    printf '%s' "$ao"
}

e2e_twice cases "$HERE/transparent.sh" "$SLUICE"
e2e_finish
