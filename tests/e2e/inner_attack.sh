#!/usr/bin/env bash
# tests/e2e/inner_attack.sh - rt-16: red team of sluice-inner (the sandbox's
# first program, cli/inner_main.c, found by run/rundir.c run_find_inner),
# parallel runs of one user, and transparent mode's refusal of any bind()
# of port 53 (run/tp_call.c). As root and again as an unprivileged user
# (setpriv, sluicetest); the other-user cases in the root pass. Every case
# passes when the boundary holds; see tests/e2e/rt-16-report.md.
#
#   A. sluice-inner: the command writes, renames, ptraces, re-executes it;
#      the filter it loads is the one `sluice inner` loads; a sluice alone
#      in a writable directory: the command plants sluice-inner beside it
#      (absent, a link, a group-writable file) and the next run must not
#      start it (rt-16 finding 2); another user plants one in a sticky
#      directory; a broken one fails closed.
#   B. port 53 under --transparent: every bind() form (families, lengths,
#      AF_UNSPEC, v4-mapped, options, a flipped port, auto-bind, a passed-in
#      socket, io_uring, raw sockets); none may take port 53 or a query
#      sent to it (rt-16 finding 1); an i386 socketcall(SYS_BIND) when
#      gcc -m32 can build one.
#   C. parallel runs: seven at once (transparent, --report-writes,
#      --publish, --learn into one file, --control-fd), each sees and
#      reports only its own; a second --publish of a taken port fails alone;
#      one of three SIGKILLed: the others finish, nothing is left.
#   D. another user against root's runs: the run directory, a planted
#      XDG_RUNTIME_DIR.
#
# The script runs in a network namespace of its own (unshare -n): no packet
# can leave it; sluice's resolver is the e2e lib's dnsmasq on 127.0.0.1,
# which answers every *.test name with 10.77.0.9 (no route: dials fail).
#
# usage: inner_attack.sh PATH/TO/sluice   (sluice-inner beside it)
set -uo pipefail
SLUICE=${1:?usage: inner_attack.sh PATH/TO/sluice}
case $SLUICE in /*) ;; *) SLUICE=$PWD/$SLUICE ;; esac
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

if [ -z "${SLUICE_RT16_NETNS:-}" ]; then
    for how in "unshare -n" "unshare -rn"; do
        if $how true 2>/dev/null; then
            SLUICE_RT16_NETNS=1 exec $how bash "$HERE/inner_attack.sh" "$SLUICE"
        fi
    done
    echo "# SKIP cannot make a network namespace (unshare -n, unshare -rn)"
    echo "0 passed, 0 failed"
    exit 77
fi
. "$HERE/lib.sh"
INNER=$(dirname "$SLUICE")/sluice-inner
if [ ! -x "$INNER" ]; then
    echo "# SKIP no sluice-inner beside $SLUICE"
    echo "0 passed, 0 failed"
    exit 77
fi
ip link set lo up
start_dnsmasq --address=/test/10.77.0.9 ||
    { bad "dnsmasq did not start" "$(cat "$T/dnsmasq.err")"; e2e_finish; exit 1; }

settings() { # FILE EXTRA-KEYS
    cat > "$1" <<JSON
{"network": {"allowedDomains": ["example.com"], "allowLocalBinding": true,
             "dnsServers": ["127.0.0.1:$DPORT"]$2}}
JSON
    chmod 644 "$1"
}
settings "$T/plain.json" ""
settings "$T/tp.json" ', "transparent": true'
cat > "$T/tp0.json" <<JSON
{"network": {"transparent": true, "allowedDomains": ["example.com"], "dnsServers": ["127.0.0.1:$DPORT"]}}
JSON
echo '{"network": {"allowedDomains": ["ctl.test"], "allowLocalBinding": true, "dnsServers": ["127.0.0.1:'"$DPORT"'"]}}' > "$T/ctl.jsonl"
chmod 644 "$T/tp0.json" "$T/ctl.jsonl"

# an i386 program: socketcall(SYS_BIND) of AF_INET and AF_UNSPEC
# 0.0.0.0:53, bind(2) (nr 361) of AF_UNSPEC 0.0.0.0:53; exit 0 when all are
# refused with EADDRINUSE, 1/16/2 when one bound, 4/32/8 another error
cat > "$T/b32.c" <<'EOF'
static long sc(long nr, long a, long b, long c)
{
    long r;
    __asm__ volatile("int $0x80" : "=a"(r) : "a"(nr), "b"(a), "c"(b), "d"(c) : "memory");
    return r;
}
/* a UDP socket (socket(2), nr 359: socketcall(SYS_SOCKET) is refused
 * whole) with SO_REUSEADDR (setsockopt(2), nr 366) */
static long udp(void)
{
    int one = 1;
    long fd = sc(359, 2, 2, 0), r;
    __asm__ volatile("int $0x80"
                     : "=a"(r)
                     : "a"(366L), "b"(fd), "c"(1L), "d"(2L), "S"((long)&one), "D"(4L)
                     : "memory");
    return fd;
}
static long bits(long r, long bound, long other)
{
    return r == 0 ? bound : r != -98 ? other : 0;
}
void _start(void)
{
    unsigned char in4[16] = {2, 0, 0, 53}, unspec[16] = {0, 0, 0, 53};
    unsigned long a[3];
    long code = 0;
    a[0] = (unsigned long)udp(); a[1] = (unsigned long)in4; a[2] = 16;
    code |= bits(sc(102, 2, (long)a, 0), 1, 4);           /* socketcall(SYS_BIND) AF_INET */
    a[0] = (unsigned long)udp(); a[1] = (unsigned long)unspec;
    code |= bits(sc(102, 2, (long)a, 0), 16, 32);         /* socketcall(SYS_BIND) AF_UNSPEC */
    code |= bits(sc(361, udp(), (long)unspec, 16), 2, 8); /* bind(2) AF_UNSPEC */
    sc(1, code, 0, 0);
}
EOF
B32SRC=
if gcc -m32 -nostdlib -static -ffreestanding -fno-stack-protector -O1 -o "$T/b32" "$T/b32.c" 2>/dev/null; then
    B32SRC=$T/b32
fi

lines() { # LABEL FILE
    local line
    while IFS= read -r line; do
        case $line in
        ok\ *) ok "$1: ${line#ok }" ;;
        bad\ *) bad "$1: ${line#bad }" ;;
        note\ *) echo "# rt note: $1: ${line#note }" ;;
        esac
    done < "$2"
    grep -q '^ok ' "$2" || bad "$1: the probe did not run" "$(tail -20 "$2" "${2%.out}.err" 2>/dev/null)"
}

# every name below DIR with its type, mode, size and link target
tree() {
    (cd "$1" && { find . -path ./xdg -prune -o -type d -printf '%p d %m\n'
        find . -path ./xdg -prune -o ! -type d -printf '%p %y %m %s %l\n'; } | LC_ALL=C sort)
}

section() { # WHO DIR [setpriv ARGS...]
    local who=$1 dir=$2 first h1 h2 n i
    shift 2
    RUNAS=("$@")
    # BIN RUNARGS... -- PROBE ARGS: a run in DIR (the working directory,
    # writable), output in DIR/$NAME.out and .err
    srun() { # NAME BIN SETTINGS [RUN OPTIONS] -- PROBE-ARGS...
        local name=$1 bin=$2 s=$3
        shift 3
        local opts=()
        while [ $# -gt 0 ] && [ "$1" != -- ]; do opts+=("$1"); shift; done
        shift
        (cd "$dir" && "${RUNAS[@]}" env HOME="$dir" XDG_RUNTIME_DIR="$dir/xdg" RT16_XDG="$dir/xdg" \
            "$bin" run --settings "$s" "${opts[@]}" -- python3 "$PROBE" "$@") \
            > "$dir/$name.out" 2> "$dir/$name.err"
        RC=$?
    }
    mkdir -p "$dir/bin" "$dir/solo" "$dir/link" "$dir/gw" "$dir/broken" "$dir/xdg"
    cp "$SLUICE" "$INNER" "$dir/bin/"
    cp "$SLUICE" "$dir/solo/"
    cp "$SLUICE" "$dir/link/"
    ln -s /bin/true "$dir/link/sluice-inner"
    cp "$SLUICE" "$dir/gw/" && cp /bin/true "$dir/gw/sluice-inner" && chmod 775 "$dir/gw/sluice-inner"
    cp "$SLUICE" "$dir/broken/" && printf '#!/bin/sh\nexit 0\n' > "$dir/broken/sluice-inner" &&
        chmod 755 "$dir/broken/sluice-inner"
    chmod 700 "$dir/xdg"
    # the probe and the i386 program in the working directory (the
    # sandbox's /tmp is its own; the user can read them there)
    cp "$HERE/inner-helpers/inner_attack.py" "$dir/probe.py"
    PROBE=$dir/probe.py B32=
    [ -n "$B32SRC" ] && cp "$B32SRC" "$dir/b32" && B32=$dir/b32
    [ ${#RUNAS[@]} -gt 0 ] && chown -R "$U:$G" "$dir"
    if ! (cd "$dir" && "${RUNAS[@]}" env HOME="$dir" XDG_RUNTIME_DIR="$dir/xdg" "$dir/bin/sluice" run \
        --settings "$T/plain.json" -- true) > "$dir/start.out" 2>&1; then
        bad "$who: sluice run cannot start" "$(tail -5 "$dir/start.out")"
        return
    fi

    # --- A. sluice-inner -----------------------------------------------------
    srun first "$dir/bin/sluice" "$T/plain.json" -- first
    first=$(sed -n 's/^first //p' "$dir/first.out")
    [ "$first" = "$dir/bin/sluice-inner --fd" ] && ok "$who: sluice-inner beside sluice is the sandbox's first program" ||
        bad "$who: the first program is '$first', not $dir/bin/sluice-inner" "$(cat "$dir/first.err")"
    h1=$(sha256sum "$dir/bin/sluice-inner" | cut -c1-64)
    srun tamper "$dir/bin/sluice" "$T/plain.json" -- tamper "$dir/bin/sluice-inner"
    lines "$who: A" "$dir/tamper.out"
    h2=$(sha256sum "$dir/bin/sluice-inner" 2>/dev/null | cut -c1-64)
    [ "$h1" = "$h2" ] && [ -z "$(ls -A "$dir/bin" | grep -v '^sluice$\|^sluice-inner$')" ] &&
        ok "$who: sluice-inner and its directory are what they were after the run" ||
        bad "$who: sluice-inner or its directory changed" "$(ls -la "$dir/bin")"
    srun reexec "$dir/bin/sluice" "$T/plain.json" -- reexec "$dir/bin/sluice-inner"
    lines "$who: A" "$dir/reexec.out"
    # the filter: the same answers with sluice-inner and with `sluice inner`
    for s in plain tp0; do
        srun "sys-inner-$s" "$dir/bin/sluice" "$T/$s.json" -- syscalls
        srun "sys-self-$s" "$dir/solo/sluice" "$T/$s.json" -- syscalls
        if [ "$(grep -c '^sys ' "$dir/sys-inner-$s.out")" -gt 30 ] &&
            diff <(grep '^sys ' "$dir/sys-inner-$s.out") <(grep '^sys ' "$dir/sys-self-$s.out") > "$T/sys.diff"; then
            ok "$who: $s: sluice-inner's filter answers $(grep -c '^sys ' "$dir/sys-inner-$s.out") calls as \`sluice inner\`'s does"
        else
            bad "$who: $s: the filters differ" "$(cat "$T/sys.diff" "$dir/sys-inner-$s.err" | head -20)"
        fi
        grep -q '^sys socket AF_UNIX = EPERM' "$dir/sys-inner-$s.out" &&
            grep -q '^sys io_uring_setup = EPERM' "$dir/sys-inner-$s.out" &&
            grep -q '^sys NoNewPrivs = 1' "$dir/sys-inner-$s.out" &&
            ok "$who: $s: sluice-inner's filter refuses AF_UNIX and io_uring, no_new_privs set" ||
            bad "$who: $s: sluice-inner's filter" "$(grep '^sys' "$dir/sys-inner-$s.out" | head -12)"
    done
    # descriptors: one the caller left open never reaches the command
    (cd "$dir" && "${RUNAS[@]}" env HOME="$dir" XDG_RUNTIME_DIR="$dir/xdg" "$dir/bin/sluice" run \
        --settings "$T/plain.json" -- python3 "$PROBE" fds) > "$dir/fds.out" 2> "$dir/fds.err" 9< "$PROBE"
    [ "$(sed -n 's/^fds //p' "$dir/fds.out")" = "0 1 2 3" ] && ok "$who: the command holds fds 0-2 only (9 of the caller closed)" ||
        bad "$who: the command's descriptors" "$(cat "$dir/fds.out" "$dir/fds.err")"
    echo "# rt note: $who: SLUICE* variables the command sees: '$(sed -n 's/^env //p' "$dir/fds.out")'"

    # planted: sluice alone (solo), beside a link (link), beside a
    # group-writable file (gw): the command tries to leave an executable
    # sluice-inner of its own there; the next run must not start it
    for k in solo link gw; do
        h1=$(tree "$dir/$k")
        srun "plant-$k" "$dir/$k/sluice" "$T/plain.json" -- plant "$dir/$k"
        lines "$who: A: $k" "$dir/plant-$k.out"
        h2=$(tree "$dir/$k")
        [ "$h1" = "$h2" ] && ok "$who: $k: the directory of sluice is what it was after the run" ||
            bad "$who: $k: the directory of sluice changed" "$(diff <(echo "$h1") <(echo "$h2"))"
        srun "next-$k" "$dir/$k/sluice" "$T/plain.json" -- first
        first=$(sed -n 's/^first //p' "$dir/next-$k.out")
        if [ "$RC" = 0 ] && [ "$first" = "$dir/$k/sluice inner" ] && [ ! -e "$dir/PLANTED" ]; then
            ok "$who: $k: the next run starts \`sluice inner\`, not a planted sluice-inner"
        else
            bad "$who: $k: the next run started '$first' (exit $RC)" "$(cat "$dir/PLANTED" "$dir/next-$k.err" 2>/dev/null | tail -3)"
        fi
        rm -f "$dir/PLANTED"
    done
    # a broken sluice-inner of the user's (no handoff): fails closed
    srun broken "$dir/broken/sluice" "$T/plain.json" -- first
    [ "$RC" = 125 ] && ! grep -q '^first' "$dir/broken.out" &&
        ok "$who: a sluice-inner that exits at once: exit 125, the command never ran" ||
        bad "$who: broken sluice-inner: exit $RC" "$(cat "$dir/broken.out" "$dir/broken.err" | tail -3)"

    # --- B. port 53 ------------------------------------------------------------
    srun bind53 "$dir/bin/sluice" "$T/tp.json" -- bind53 1
    if grep -q 'transparent mode needs' "$dir/bind53.err"; then
        echo "# SKIP $who: --transparent: $(tail -1 "$dir/bind53.err")"
    else
        lines "$who: B" "$dir/bind53.out"
        srun bind53-0 "$dir/bin/sluice" "$T/tp0.json" -- bind53 0
        lines "$who: B (no allowLocalBinding)" "$dir/bind53-0.out"
        if [ -n "$B32" ]; then
            (cd "$dir" && "${RUNAS[@]}" env HOME="$dir" XDG_RUNTIME_DIR="$dir/xdg" "$dir/bin/sluice" run \
                --settings "$T/tp.json" -- "$B32") > "$dir/b32.out" 2>&1
            n=$?
            [ "$n" = 0 ] && ok "$who: B: i386 socketcall(SYS_BIND) AF_INET and AF_UNSPEC 0.0.0.0:53, bind(2) AF_UNSPEC:53: EADDRINUSE" ||
                bad "$who: B: i386 binds of port 53: status $n (1/16/2: bound, 4/32/8: another error)" "$(tail -3 "$dir/b32.out")"
        else
            echo "# SKIP $who: B: no i386 program (gcc -m32 cannot build one here)"
        fi
    fi

    # --- C. parallel runs ------------------------------------------------------
    local P1 P2 pids=() before after
    P1=$(free_port) P2=$(free_port)
    before=$(tree "$dir")
    mkdir -p "$dir/par" && [ ${#RUNAS[@]} -gt 0 ] && chown "$U:$G" "$dir/par"
    rm -f "$dir/par/go" "$dir/learn.json"
    parrun() { # N SETTINGS [RUN OPTIONS] (background)
        local n=$1 s=$2
        shift 2
        (cd "$dir" && exec "${RUNAS[@]}" env HOME="$dir" XDG_RUNTIME_DIR="$dir/xdg" RT16_XDG="$dir/xdg" \
            RT16_PUB="${PUB:-}" RT16_NAME="${NAME:-deny$n.test}" "$dir/bin/sluice" run --settings "$s" \
            --log "$dir/par$n.log" "$@" -- python3 "$PROBE" par "$n" "$dir/par") \
            > "$dir/par$n.out" 2> "$dir/par$n.err" 5< "$T/ctl.jsonl" &
        pids+=($!)
    }
    PUB=1 parrun 1 "$T/tp.json" --report-writes --publish "$P1:8000"
    PUB=1 parrun 2 "$T/tp.json" --report-writes --publish "$P2:8000"
    parrun 3 "$T/tp.json" --report-writes
    parrun 4 "$T/plain.json" --learn "$dir/learn.json"
    parrun 5 "$T/plain.json" --learn "$dir/learn.json"
    NAME=ctl.test parrun 6 "$T/plain.json" --control-fd 5
    NAME=ctl.test parrun 7 "$T/plain.json"
    # all up (each has printed its CONNECT answer), then a second publish
    # of P1, then GO
    for i in $(seq 600); do
        [ "$(cat "$dir"/par[1-7].out 2>/dev/null | grep -c '^connect ')" -ge 7 ] && break
        sleep 0.1
    done
    (cd "$dir" && "${RUNAS[@]}" env HOME="$dir" XDG_RUNTIME_DIR="$dir/xdg" "$dir/bin/sluice" run \
        --settings "$T/plain.json" --publish "$P1:8000" -- true) > "$dir/pub-again.out" 2>&1
    n=$?
    [ "$n" = 125 ] && ok "$who: C: a second run publishing taken port $P1: exit 125 ($(tail -1 "$dir/pub-again.out" | cut -c1-90))" ||
        bad "$who: C: a second --publish of a taken port: exit $n" "$(tail -3 "$dir/pub-again.out")"
    touch "$dir/par/go"
    for p in 1 2; do
        eval "h1=\$P$p"
        h2=$(python3 -c 'import socket,sys; c=socket.create_connection(("127.0.0.1",int(sys.argv[1])),timeout=20); c.settimeout(20); print(c.recv(100).decode().strip())' "$h1" 2>&1)
        [ "$h2" = "run $p" ] && ok "$who: C: published port $h1 reaches run $p's server, no other" ||
            bad "$who: C: published port $h1 answered '$h2', not 'run $p'"
    done
    for i in "${!pids[@]}"; do
        wait_exit "${pids[$i]}" 90 || kill "${pids[$i]}"
        [ "${WAIT_RC:-x}" = 0 ] || bad "$who: C: run $((i + 1)) exit ${WAIT_RC:-timeout}" "$(tail -3 "$dir/par$((i + 1)).err")"
    done
    for n in 1 2 3 4 5 6 7; do
        lines "$who: C" "$dir/par$n.out"
        h2=$(cat "$dir/par$n.err" "$dir/par$n.log" 2>/dev/null | grep -o 'deny[0-9]\.test\|rt16-par-[0-9]' | grep -v "deny$n\.test\|rt16-par-$n" | sort -u | tr '\n' ' ')
        [ -z "$h2" ] && ok "$who: C: run $n's summary and log name only its own destinations and writes" ||
            bad "$who: C: run $n reports another run's: $h2"
    done
    for n in 1 2 3; do
        grep -q "blocked 1 write: /etc/rt16-par-$n" "$dir/par$n.err" &&
            grep -q "blocked 1 connection: deny$n.test:443" "$dir/par$n.err" &&
            ok "$who: C: run $n reports its own refused write and connection" ||
            bad "$who: C: run $n's report" "$(cat "$dir/par$n.err")"
    done
    h2=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(" ".join(d["network"]["allowedDomains"]))' "$dir/learn.json" 2>&1)
    case $h2 in
    deny4.test:443 | deny5.test:443) ok "$who: C: two --learn runs into one file: one whole policy ($h2)" ;;
    *) bad "$who: C: the shared --learn file" "$h2 $(cat "$dir/learn.json")" ;;
    esac
    grep -q '^connect HTTP/1.1 403' "$dir/par6.out" && h2=403 || h2=other
    grep -q '^connect HTTP/1.1 403' "$dir/par7.out" && [ "$h2" = other ] &&
        ok "$who: C: --control-fd of one run opened ctl.test for it alone" ||
        bad "$who: C: control-fd" "$(grep '^connect' "$dir/par6.out" "$dir/par7.out")"
    # one of three killed with SIGKILL: the others finish; nothing left
    rm -f "$dir/par/go"
    pids=()
    for n in 1 2 3; do parrun "$n" "$T/tp.json"; done
    for i in $(seq 600); do
        [ "$(cat "$dir"/par[1-3].out 2>/dev/null | grep -c '^connect ')" -ge 3 ] && break
        sleep 0.1
    done
    kill -KILL "${pids[1]}"
    wait "${pids[1]}" 2>/dev/null
    touch "$dir/par/go"
    for i in 0 2; do
        wait_exit "${pids[$i]}" 90 || kill "${pids[$i]}"
        [ "${WAIT_RC:-x}" = 0 ] && grep -q "^ok run $((i + 1)): its 127.0.0.1:8000 answered as itself" "$dir/par$((i + 1)).out" &&
            ok "$who: C: run $((i + 1)) finished while run 2 was killed with SIGKILL" ||
            bad "$who: C: run $((i + 1)) after run 2's SIGKILL: exit ${WAIT_RC:-timeout}" "$(tail -3 "$dir/par$((i + 1)).out" "$dir/par$((i + 1)).err")"
    done
    # two runs in the project whose run directories have different parents
    # (XDG_RUNTIME_DIR): the first ends while the second's sandbox stands on
    # its placeholders; the second's command then writes the protected names
    mkdir -p -m 700 "$dir/xdg2" && [ ${#RUNAS[@]} -gt 0 ] && chown "$U:$G" "$dir/xdg2"
    (cd "$dir" && exec "${RUNAS[@]}" env HOME="$dir" XDG_RUNTIME_DIR="$dir/xdg" "$dir/bin/sluice" run \
        --settings "$T/plain.json" -- python3 -c 'import time; time.sleep(3)') > "$dir/crossA.out" 2>&1 &
    n=$!
    for i in $(seq 100); do [ -e "$dir/.bash_profile" ] && break; sleep 0.05; done
    (cd "$dir" && exec "${RUNAS[@]}" env HOME="$dir" XDG_RUNTIME_DIR="$dir/xdg2" "$dir/bin/sluice" run \
        --settings "$T/plain.json" -- python3 "$PROBE" cross "$dir/par") > "$dir/crossB.out" 2> "$dir/crossB.err" &
    i=$!
    wait_exit "$n" 60 || kill "$n"
    touch "$dir/par/a-done"
    wait_exit "$i" 60 || kill "$i"
    lines "$who: C" "$dir/crossB.out"
    # a later run in the first parent sweeps what the first left for it
    srun after "$dir/bin/sluice" "$T/tp.json" -- first
    [ "$RC" = 0 ] && ok "$who: C: a run after the killed one works" || bad "$who: C: the next run: exit $RC" "$(tail -3 "$dir/after.err")"
    for i in $(seq 150); do
        [ -z "$(ls -A "$dir/xdg/sluice" "$dir/xdg2/sluice" 2>/dev/null)" ] && break
        sleep 0.1
    done
    [ -z "$(ls -A "$dir/xdg/sluice" "$dir/xdg2/sluice" 2>/dev/null)" ] && ok "$who: C: no run directory left" ||
        bad "$who: C: run directories left" "$(ls -la "$dir/xdg/sluice" "$dir/xdg2/sluice")"
    after=$(tree "$dir" | grep -v '\.\(out\|err\|log\)\b\|^\./learn\.json\|^\./par\b\|^\./par/\|^\./xdg2\b')
    before=$(echo "$before" | grep -v '\.\(out\|err\|log\)\b\|^\./learn\.json\|^\./par\b\|^\./par/')
    [ "$before" = "$after" ] && ok "$who: C: the working directory holds nothing the runs made (placeholders gone)" ||
        bad "$who: C: left in the working directory" "$(diff <(echo "$before") <(echo "$after") | head)"
}

mkdir -p -m 700 "$T/run-root"
U= G=
section "$(id -un)" "$T/run-root"
if [ "$(id -u)" = 0 ] && [ "$(awk '{print $2}' /proc/self/uid_map)" = 0 ] && command -v setpriv >/dev/null &&
    { id sluicetest >/dev/null 2>&1 || useradd -M sluicetest >/dev/null 2>&1; }; then
    U=$(id -u sluicetest) G=$(id -g sluicetest)
    AS=(setpriv --reuid="$U" --regid="$G" --clear-groups --inh-caps=-all)
    chmod 711 "$T"
    # --- D. another user against root's runs (and A's sticky directory) ----
    mkdir -p -m 1777 "$T/sticky" && cp "$SLUICE" "$T/sticky/sluice"
    if "${AS[@]}" sh -c 'printf "#!/bin/sh\necho planted > \"$1/PLANTED\"\nexit 3\n" > "$1/sticky/sluice-inner" && chmod 755 "$1/sticky/sluice-inner"' sh "$T"; then
        (cd "$T/run-root" && env HOME="$T/run-root" XDG_RUNTIME_DIR="$T/run-root/xdg" "$T/sticky/sluice" run \
            --settings "$T/plain.json" -- python3 "$T/run-root/probe.py" first) > "$T/sticky.out" 2>&1
        [ "$(sed -n 's/^first //p' "$T/sticky.out")" = "$T/sticky/sluice inner" ] && [ ! -e "$T/PLANTED" ] &&
            ok "D: another user's sluice-inner beside root's sluice in a sticky directory is never started" ||
            bad "D: sticky directory" "$(cat "$T/sticky.out" "$T/PLANTED" 2>/dev/null | tail -3)"
    fi
    "${AS[@]}" ln "$T/sticky/sluice" "$T/sticky/sluice-hl" 2>/dev/null &&
        echo "# rt note: D: the other user could hard-link root's sluice (fs.protected_hardlinks=0)" ||
        echo "# rt note: D: fs.protected_hardlinks stops the other user hard-linking root's files"
    rm -rf "$T/sticky"
    # a root run alive; the other user looks for its run directory
    (cd "$T/run-root" && exec env HOME="$T/run-root" XDG_RUNTIME_DIR="$T/run-root/xdg" "$SLUICE" run \
        --settings "$T/plain.json" -- sleep 5) > /dev/null 2>&1 &
    n=$!
    for i in $(seq 100); do [ -n "$(ls -A "$T/run-root/xdg/sluice" 2>/dev/null)" ] && break; sleep 0.05; done
    if "${AS[@]}" ls "$T/run-root/xdg/sluice" >/dev/null 2>&1 || "${AS[@]}" ls /run/sluice >/dev/null 2>&1; then
        bad "D: another user lists root's run directories"
    else
        ok "D: another user cannot list root's run directories (XDG and /run/sluice)"
    fi
    kill "$n" 2>/dev/null
    wait "$n" 2>/dev/null
    # root given an XDG_RUNTIME_DIR that the other user owns: not used
    mkdir -p "$T/evil" && chown "$U:$G" "$T/evil" && chmod 777 "$T/evil"
    (cd "$T/run-root" && env HOME="$T/run-root" XDG_RUNTIME_DIR="$T/evil" "$SLUICE" run \
        --settings "$T/plain.json" -- true) > "$T/evil.out" 2>&1
    n=$?
    [ "$n" = 0 ] && [ -z "$(ls -A "$T/evil")" ] &&
        ok "D: root's run with another user's XDG_RUNTIME_DIR works and makes nothing there" ||
        bad "D: another user's XDG_RUNTIME_DIR: exit $n, made: $(ls -A "$T/evil")" "$(tail -3 "$T/evil.out")"
    # the unprivileged pass
    mkdir -p "$T/run-user" && chown "$U:$G" "$T/run-user" && chmod 700 "$T/run-user"
    [ -z "${RT16_NO_USER:-}" ] && section user "$T/run-user" "${AS[@]}"
fi
e2e_finish
