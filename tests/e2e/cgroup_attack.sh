#!/usr/bin/env bash
# tests/e2e/cgroup_attack.sh - rt-18: red team of root's pids cgroup
# (sandbox.limits.processes as root, sandbox/limits.c, run/spawn.c,
# run/launch.c limit_processes_*; since ac0f050 bwrap is born in the cgroup
# and pids.max is sealed to the limit plus bwrap's own before the go byte).
# Every case passes when the limit holds; see tests/e2e/rt-18-report.md.
#
#   A. the count: a limit of N gives a one-process command exactly N-1
#      forks, or N-1 threads, with and without --transparent; under sh -c
#      the shell is one of the N.
#   B. the launcher is never counted: none of its threads (the TLS worker
#      pool, started by a terminated CONNECT) and none of its other
#      children (reaper, transparent and port helpers) is in the cgroup.
#   C. the limit exhausted: sluice's own work still runs (transparent DNS,
#      an allowed and a denied connect, a published port) and the run ends.
#   D. the command against the cgroup's files: writes, mkdir, rmdir, a
#      cgroup mount all fail; pids.max and the count are unchanged.
#   E. the launcher killed (LD_PRELOAD, run-helpers/rt18_cgkill.c) with its
#      thread in the cgroup, and after bwrap's spawn before it moved back;
#      its move back refused; the seal refused: the command not run,
#      nothing left (rt-18 finding: the refused seal left the cgroup).
#   F. SIGKILL of the launcher 0-50 ms after its start: nothing left.
#   G. ten runs at once, limits 16 to 25: each gets its own limit.
#   H. the sweep: a dead launcher's empty cgroup goes, a live one's stays.
#   I. as a user (setpriv, sluicetest): no cgroup, RLIMIT_NPROC as before.
#
# The script runs in a network namespace of its own (unshare -n): no packet
# can leave it; sluice's resolver is the e2e lib's dnsmasq on 127.0.0.1.
#
# usage: cgroup_attack.sh PATH/TO/sluice   (sluice-inner beside it)
set -uo pipefail
SLUICE=${1:?usage: cgroup_attack.sh PATH/TO/sluice}
case $SLUICE in /*) ;; *) SLUICE=$PWD/$SLUICE ;; esac
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PIDS_ROOT=/sys/fs/cgroup/pids

skip_all() { echo "# SKIP $1"; echo "0 passed, 0 failed"; exit 77; }
[ "$(id -u)" = 0 ] || skip_all "not root (only root's runs use a pids cgroup)"
grep -qE "^[^ ]+ $PIDS_ROOT cgroup [^ ]*pids" /proc/mounts && grep -qE '^[0-9]+:([^:]*,)?pids(,[^:]*)?:' /proc/self/cgroup ||
    skip_all "no cgroup v1 pids hierarchy at $PIDS_ROOT"
command -v python3 >/dev/null || skip_all "no python3"
if [ -z "${SLUICE_RT18_NETNS:-}" ]; then
    unshare -n true 2>/dev/null || skip_all "cannot make a network namespace (unshare -n)"
    SLUICE_RT18_NETNS=1 exec unshare -n bash "$HERE/cgroup_attack.sh" "$SLUICE"
fi
. "$HERE/lib.sh"
chmod 755 "$T"
ip link set lo up
TOKEN=rt18-$$-$RANDOM
# this shell's pids cgroup: the launcher's, which must keep its threads
BASE=$(sed -nE 's/^[0-9]+:([^:]*,)?pids(,[^:]*)?:(.*)$/\3/p' /proc/self/cgroup)
BASE_DIR=$PIDS_ROOT${BASE%/}
[ "$BASE" = / ] && BASE_DIR=$PIDS_ROOT

start_dnsmasq --address=/test/127.0.0.1 ||
    { bad "dnsmasq did not start" "$(cat "$T/dnsmasq.err")"; e2e_finish; exit 1; }
# the sandbox has a /tmp of its own: what the command reads or writes is in
# its working directory, $W (bound)
W=$T/w
mkdir -p "$T/www" "$W"
echo hello > "$T/www/hello.txt"
PO=$(free_port)
python3 -m http.server --bind 127.0.0.1 --directory "$T/www" "$PO" > "$T/http.err" 2>&1 &
PIDS+=($!)
for i in $(seq 100); do
    curl -s --noproxy '*' "http://127.0.0.1:$PO/hello.txt" >/dev/null 2>&1 && break
    sleep 0.1
done

lim() { # FILE LIMIT [EXTRA-NETWORK-KEYS]
    cat > "$1" <<JSON
{"sandbox": {"limits": {"processes": $2}},
 "network": {"allowedDomains": ["origin.test", "127.0.0.1:$PO"], "deniedDomains": ["evil.test"],
             "dnsServers": ["127.0.0.1:$DPORT"]${3:-}}}
JSON
    chmod 644 "$1"
}
lim "$T/l20.json" 20
lim "$T/l16.json" 16
lim "$T/tp20.json" 20 ', "transparent": true'

# a one-process command: forks (children sleep) or threads until refused;
# prints the count; with a file argument, writes it when done, then waits
# for that file's removal before letting go (the test looks meanwhile)
cat > "$W/count.py" <<'EOF'
import os, sys, time, threading
what = sys.argv[1]
n, kids, ev = 0, [], threading.Event()
while n < 100000:
    try:
        if what == "fork":
            p = os.fork()
            if p == 0:
                time.sleep(120); os._exit(0)
            kids.append(p)
        else:
            threading.Thread(target=ev.wait).start()
    except (OSError, RuntimeError):
        break
    n += 1
print(what, n, flush=True)
ev.set()
for p in kids: os.kill(p, 9)
for p in kids: os.waitpid(p, 0)
EOF
chmod 644 "$W/count.py"

run_in() { # DIR SLUICE-ARGS...: the run from DIR, stdin from /dev/null
    local d=$1; shift
    (cd "$d" && exec "$SLUICE" run "$@" </dev/null)
}

# the launcher's pids cgroup and processes left: none for PID
leftover() { # PID...
    local p left=
    for p in "$@"; do
        ls -d "$PIDS_ROOT"/sluice-run."$p".* >/dev/null 2>&1 && left="$left cgroup of $p;"
    done
    pgrep -f "$TOKEN" >/dev/null && left="$left processes: $(pgrep -af "$TOKEN" | tr '\n' ' ')"
    printf '%s' "$left"
}
# waits (up to 15 s: the reapers wait for their sandboxes) until leftover is empty
wait_clean() {
    local i
    for i in $(seq 150); do
        [ -z "$(leftover "$@")" ] && return 0
        sleep 0.1
    done
    return 1
}

wait_for_file() { # FILE: up to 15 s
    local i
    for i in $(seq 300); do [ -e "$1" ] && return 0; sleep 0.05; done
    return 1
}

# === A. the count ===============================================================================
for how in "" --transparent; do
    set=$T/l20.json
    [ -n "$how" ] && set=$T/tp20.json
    for what in fork thread; do
        out=$(run_in "$W" --settings "$set" $how -- python3 "$W/count.py" $what 2>&1)
        [ "$out" = "$what 19" ] && ok "A: limit 20${how:+ $how}: exactly 19 ${what}s from a one-process command" ||
            bad "A: limit 20${how:+ $how}: ${what}s" "$out"
    done
done
out=$(run_in "$W" --settings "$T/l16.json" -c "python3 $W/count.py fork; : $TOKEN" 2>&1)
[ "$out" = "fork 14" ] && ok "A: limit 16 under sh -c: the shell and python, then exactly 14 forks" ||
    bad "A: limit 16 under sh -c" "$out"

# === B. the launcher is never counted ===========================================================
# TLS termination: a CONNECT to the origin whose ClientHello mints a leaf
# on libuv's worker pool (threads of the launcher started long after the
# spawn); transparent mode's DNS helper; a published port's helper. While
# the command waits, no thread of the launcher and no child of it but
# bwrap may be in the run's cgroup, and none of the cgroup's tasks may be a
# thread of the launcher.
launcher_apart() { # NAME SETTINGS MIN-THREADS
    local name=$1 set=$2 minth=$3 B cg threads mine= inner= kids bw k t nkids pp
    pp=$(free_port)
    rm -f "$W/b-ready"
    (cd "$W" && exec "$SLUICE" run --settings "$set" --publish "127.0.0.1:$pp:8000" -c "
        curl -sk --max-time 10 https://origin.test:$PO/ >/dev/null 2>&1
        getent hosts origin.test >/dev/null
        touch $W/b-ready; while [ -e $W/b-ready ]; do sleep 0.05; done; : $TOKEN" </dev/null > "$T/b.out" 2>&1) &
    B=$!
    if wait_for_file "$W/b-ready"; then
        cg=$(ls -d "$PIDS_ROOT"/sluice-run.$B.* 2>/dev/null | head -1)
        threads=$(ls /proc/$B/task | wc -l)
        for t in /proc/$B/task/*; do
            grep -qE "^[0-9]+:([^:]*,)?pids(,[^:]*)?:$BASE\$" "$t/cgroup" ||
                mine="$mine thread ${t##*/}: $(grep pids "$t/cgroup");"
        done
        kids=$(pgrep -P $B | tr '\n' ' ')
        bw=$(pgrep -P $B -x bwrap)
        for k in $kids; do
            [ "$k" = "$bw" ] && continue
            grep -qE "pids(,[^:]*)?:$BASE\$" /proc/$k/cgroup ||
                mine="$mine child $k ($(tr '\0' ' ' < /proc/$k/cmdline | cut -c1-60)): $(grep pids /proc/$k/cgroup);"
        done
        if [ -n "$cg" ]; then
            for t in $(cat "$cg/tasks"); do
                [ -d /proc/$B/task/$t ] && inner="$inner launcher thread $t;"
            done
        else inner="no cgroup for launcher $B"; fi
        nkids=$(wc -w <<< "$kids")
        if [ -z "$mine$inner" ] && [ "$threads" -ge "$minth" ] && [ "$nkids" -ge 3 ]; then
            ok "B: $name: none of the launcher's $threads threads nor its $((nkids - 1)) other children is in the run's cgroup"
        else
            bad "B: $name: the launcher counted in the command's cgroup" "threads $threads, children $kids (bwrap $bw);$mine$inner"
        fi
        rm -f "$W/b-ready"
    else
        bad "B: $name: the run did not come up" "$(cat "$T/b.out")"
        kill $B 2>/dev/null
    fi
    wait_exit $B 30 || { kill $B; wait $B; }
    wait_clean $B && ok "B: $name: the run ended, its cgroup removed" || bad "B: $name: debris" "$(leftover $B)"
}
lim "$T/tls.json" 20 ', "tlsTerminate": {}'
# libuv's pool: 4 threads unless UV_THREADPOOL_SIZE says otherwise
launcher_apart "TLS termination and --publish" "$T/tls.json" 2
launcher_apart "--transparent and --publish" "$T/tp20.json" 1

# === C. the limit exhausted: sluice's own work still runs =======================================
cat > "$W/exhaust.py" <<'EOF'
import os, sys, socket, time, threading
kids = []
while True:
    try:
        p = os.fork()
    except OSError:
        break
    if p == 0:
        time.sleep(120); os._exit(0)
    kids.append(p)
res = ["held %d" % len(kids)]
port = int(sys.argv[1])
for host in ("origin.test", "evil.test"):
    try:
        s = socket.create_connection((host, port), timeout=10)
        s.sendall(b"GET /hello.txt HTTP/1.0\r\nHost: x\r\n\r\n")
        d = b""
        while True:
            c = s.recv(4096)
            if not c: break
            d += c
        res.append(host + (":OK" if b"hello" in d else ":BAD"))
        s.close()
    except Exception as e:
        res.append(host + ":" + type(e).__name__)
try:
    threading.Thread(target=lambda: None).start(); res.append("thread:STARTED")
except RuntimeError:
    res.append("thread:refused")
if len(sys.argv) > 2:   # a server for the published port, in this process
    l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind(("127.0.0.1", 8000)); l.listen(4)
    open(sys.argv[2], "w").write(" ".join(res))
    l.settimeout(30)
    try:
        c, _ = l.accept(); c.settimeout(10)
        if c.recv(4) == b"ping": c.sendall(b"pong")
        c.close()
    except Exception as e:
        res.append("publish:" + type(e).__name__)
print(" ".join(res), flush=True)
for p in kids: os.kill(p, 9)
for p in kids: os.waitpid(p, 0)
EOF
chmod 644 "$W/exhaust.py"
out=$(cd "$W" && timeout 90 "$SLUICE" run --settings "$T/tp20.json" -q -- python3 "$W/exhaust.py" "$PO" 2>&1 </dev/null); rc=$?
[ $rc = 0 ] && [ "$out" = "held 19 origin.test:OK evil.test:gaierror thread:refused" ] &&
    ok "C: --transparent, all 20 tasks held: DNS answered, origin.test connected, evil.test refused, no thread, exit 0" ||
    bad "C: --transparent with the limit exhausted" "rc $rc: $out"
PP=$(free_port)
rm -f "$W/c-ready"
(cd "$W" && exec timeout 90 "$SLUICE" run --settings "$T/tp20.json" -q --publish "127.0.0.1:$PP:8000" -- \
    python3 "$W/exhaust.py" "$PO" "$W/c-ready" > "$T/c.out" 2>&1 </dev/null) &
C=$!
reply=
if wait_for_file "$W/c-ready"; then
    reply=$(python3 -c 'import socket, sys
for i in range(100):
    try:
        s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10); break
    except OSError:
        import time; time.sleep(0.1)
s.settimeout(15); s.sendall(b"ping"); print(s.recv(4).decode())' "$PP" 2>&1)
fi
wait $C; rc=$?
[ $rc = 0 ] && [ "$reply" = pong ] && grep -q '^held 19 origin.test:OK' "$T/c.out" &&
    ok "C: --publish with all 20 tasks held: the host's connection reached the command's server" ||
    bad "C: --publish with the limit exhausted" "rc $rc, reply '$reply': $(cat "$T/c.out")"

# === D. the command against the cgroup's files =================================================
cat > "$W/files.py" <<'EOF'
import ctypes, errno, glob, os, sys
got = []
def tryit(what, f):
    try:
        f(); got.append("DONE " + what)
    except OSError as e:
        pass
root = "/sys/fs/cgroup/pids"
for d in [root] + glob.glob(root + "/sluice-run.*"):
    for name in ("pids.max", "tasks", "cgroup.procs", "notify_on_release", "release_agent", "cgroup.clone_children"):
        p = os.path.join(d, name)
        if os.path.exists(p):
            tryit("write " + p, lambda p=p: open(p, "w").write("0" if "tasks" in p or "procs" in p else "max"))
    tryit("mkdir " + d, lambda d=d: os.mkdir(d + "/x"))
    if d != root:
        tryit("rmdir " + d, lambda d=d: os.rmdir(d))
libc = ctypes.CDLL(None, use_errno=True)
os.makedirs("/tmp/cg", exist_ok=True)
for fs, opt in ((b"cgroup", b"pids"), (b"cgroup2", None)):
    if libc.mount(fs, b"/tmp/cg", fs, 0, opt) == 0:
        got.append("DONE mount " + fs.decode())
print(" | ".join(got) or "all refused", flush=True)
EOF
chmod 644 "$W/files.py"
out=$(run_in "$W" --settings "$T/l20.json" -c "python3 $W/files.py; python3 $W/count.py fork; : $TOKEN" 2>&1)
[ "$out" = "all refused
fork 18" ] && ok "D: writes to every pids cgroup file it sees, mkdir, rmdir, mounts refused; the limit unchanged" ||
    bad "HOLE D: the command changed its cgroup" "$out"

# with allowNestedUserNamespaces (clone3 and new user namespaces allowed):
# a child cloned straight into a pids cgroup (clone3 CLONE_INTO_CGROUP),
# a pids hierarchy mounted from a user and cgroup namespace of its own
# (where its root could raise pids.max): all refused, the limit unchanged
cat > "$W/nested.py" <<'EOF'
import ctypes, glob, os, struct, subprocess
libc = ctypes.CDLL(None, use_errno=True)
got = []
for d in ["/sys/fs/cgroup/pids"] + glob.glob("/sys/fs/cgroup/pids/sluice-run.*"):
    try:
        fd = os.open(d, os.O_DIRECTORY | os.O_PATH)
    except OSError:
        continue
    # struct clone_args: flags, pidfd, child_tid, parent_tid, exit_signal,
    # stack, stack_size, tls, set_tid, set_tid_size, cgroup
    args = ctypes.create_string_buffer(struct.pack("11Q", 0x200000000, 0, 0, 0, 17, 0, 0, 0, 0, 0, fd), 88)
    pid = libc.syscall(435, args, ctypes.c_size_t(88))
    if pid == 0:
        os._exit(0)
    if pid > 0:
        os.waitpid(pid, 0); got.append("CLONED into " + d)
    os.close(fd)
os.makedirs("/tmp/cgm", exist_ok=True)
# the control: the namespaces are made (a tmpfs mounts in them)
r = subprocess.run(["unshare", "-Ucm", "--map-root-user", "sh", "-c",
                    "mount -t tmpfs none /tmp/cgm && umount /tmp/cgm && echo namespaces made; "
                    "for o in pids none,name=rt18; do mount -t cgroup -o $o none /tmp/cgm 2>/dev/null && "
                    "echo MOUNTED $o && echo max > /tmp/cgm/pids.max && echo RAISED; done; "
                    "mount -t cgroup2 none /tmp/cgm 2>/dev/null && echo MOUNTED cgroup2; true"],
                   capture_output=True, text=True)
got += [l for l in r.stdout.split("\n") if l]
print(" | ".join(got), flush=True)
EOF
chmod 644 "$W/nested.py"
cat > "$T/nest.json" <<JSON
{"allowNestedUserNamespaces": true, "sandbox": {"limits": {"processes": 20}}}
JSON
if command -v unshare >/dev/null; then
    out=$(run_in "$W" --settings "$T/nest.json" -c "python3 $W/nested.py; python3 $W/count.py fork; : $TOKEN" 2>&1 | grep -v 'warning: allowNestedUserNamespaces')
    [ "$out" = "namespaces made
fork 18" ] && ok "D: allowNestedUserNamespaces: clone3 into a pids cgroup, a pids hierarchy mounted in namespaces of its own: refused; the limit unchanged" ||
        bad "HOLE D: allowNestedUserNamespaces: the command reached its cgroup" "$out"
fi

# === E. the launcher killed or refused at exact moments (LD_PRELOAD) ===========================
if command -v gcc >/dev/null 2>&1 &&
    gcc -O1 -shared -fPIC -o "$T/cgkill.so" "$HERE/run-helpers/rt18_cgkill.c" 2>"$T/cc.err"; then
    # noleave three times: the bwrap child left blocked before the fix (finding 2)
    # depended on how far bwrap had got when it was killed (1 run in 10 here)
    for m in joined:137 spawned:137 noseal:125 noleave:125 noleave:125 noleave:125; do
        mode=${m%%:*} want=${m#*:}
        rm -f "$W/e-ran"
        (cd "$W" && RT18_CG=$mode LD_PRELOAD=$T/cgkill.so exec "$SLUICE" run --settings "$T/l20.json" \
            -c "touch $W/e-ran; sleep 30; : $TOKEN" </dev/null > "$T/e.out" 2>&1) 2>/dev/null &
        E=$!
        wait $E 2>/dev/null; rc=$?
        # a launcher that ends on its own has removed its cgroup before
        # it exits; a killed one leaves it to its reaper; one whose thread
        # could not move back cannot remove it (its thread is in it): the
        # next run's sweep does
        left=
        case $mode in
        noseal) left=$(leftover $E) ;;
        noleave) run_in "$W" --settings "$T/l20.json" -- true >/dev/null 2>&1 ;;
        esac
        if [ $rc = "$want" ] && [ ! -e "$W/e-ran" ] && [ -z "$left" ] && wait_clean $E; then
            ok "E: $mode: exit $rc, the command not run, no cgroup or process left"
        else
            bad "HOLE E: $mode" "exit $rc (want $want); ran: $(ls "$W/e-ran" 2>&1); left: $left $(leftover $E); $(cat "$T/e.out")"
        fi
    done
    # the default limit (8192) is best effort: a refused seal lets the
    # command run (in the cgroup, unsealed), and the cgroup goes with the run
    echo '{}' > "$T/nolim.json"
    rm -f "$W/e-ran"
    (cd "$W" && RT18_CG=noseal LD_PRELOAD=$T/cgkill.so exec "$SLUICE" run --settings "$T/nolim.json" \
        -c "touch $W/e-ran; : $TOKEN" </dev/null > "$T/e.out" 2>&1) &
    E=$!
    wait $E; rc=$?
    left=$(leftover $E) out=$(cat "$T/e.out")
    [ $rc = 0 ] && [ -e "$W/e-ran" ] && [ -z "$left" ] &&
        ok "E: noseal with the default limit: the command ran, its cgroup removed with the run" ||
        bad "HOLE E: noseal with the default limit" "exit $rc; ran: $(ls "$W/e-ran" 2>&1); left: $left; $out"
else
    bad "E: cannot build the LD_PRELOAD helper" "$(cat "$T/cc.err")"
fi

# === F. SIGKILL of the launcher 0-50 ms after its start ========================================
for d in 0 0.002 0.005 0.01 0.015 0.02 0.03 0.05; do
    (cd "$W" && exec "$SLUICE" run --settings "$T/l20.json" -c "sleep 30; : $TOKEN" </dev/null >/dev/null 2>&1) &
    F=$!
    sleep $d
    kill -9 $F 2>/dev/null; wait $F 2>/dev/null
    wait_clean $F && ok "F: SIGKILL after ${d}s: no cgroup or process left" ||
        bad "HOLE F: SIGKILL after ${d}s: debris" "$(leftover $F)"
done

# and while the command holds every task of its limit (each child asleep)
lim "$T/l64.json" 64
rm -f "$W/f-ready"
(cd "$W" && exec "$SLUICE" run --settings "$T/l64.json" -c "python3 -c '
import os, time
n = 0
while True:
    try:
        p = os.fork()
    except OSError:
        break
    if p == 0:
        time.sleep(120); os._exit(0)
    n += 1
open(\"$W/f-ready\", \"w\").write(str(n))
time.sleep(120)'; : $TOKEN" </dev/null >/dev/null 2>&1) &
F=$!
if wait_for_file "$W/f-ready"; then
    sleep 0.2
    held=$(cat "$W/f-ready")
    kill -9 $F 2>/dev/null; wait $F 2>/dev/null
    wait_clean $F && ok "F: SIGKILL with all 64 tasks held ($held forks): no cgroup or process left" ||
        bad "HOLE F: SIGKILL with the limit exhausted: debris" "$(leftover $F)"
else
    kill -9 $F 2>/dev/null; wait $F 2>/dev/null
    bad "F: the run at its limit did not come up"
fi

# === G. ten runs at once, each its own limit ==================================================
gp=()
for n in $(seq 16 25); do
    lim "$T/g$n.json" $n
    (cd "$W" && exec "$SLUICE" run --settings "$T/g$n.json" -- python3 "$W/count.py" fork </dev/null > "$T/g$n.out" 2>&1) &
    gp+=($!)
done
wrong=
for p in "${gp[@]}"; do wait $p; done
for n in $(seq 16 25); do
    [ "$(cat "$T/g$n.out")" = "fork $((n - 1))" ] || wrong="$wrong limit $n: $(cat "$T/g$n.out");"
done
[ -z "$wrong" ] && ok "G: ten runs at once with limits 16 to 25: each got exactly its own limit" ||
    bad "G: parallel runs disturbed each other's limits" "$wrong"
wait_clean "${gp[@]}" && ok "G: the ten runs left no cgroup" || bad "G: debris" "$(leftover "${gp[@]}")"

# === H. the sweep ===============================================================================
# a dead launcher (pid of a finished shell) with an empty cgroup: the next
# run's sweep removes it; a live one's (this shell's, its start time) stays
sh -c 'exit 0' & dead=$!; wait $dead
live_start=$(awk '{print $22}' /proc/$$/stat)
mkdir "$PIDS_ROOT/sluice-run.$dead.1" "$PIDS_ROOT/sluice-run.$$.$live_start" 2>/dev/null
run_in "$W" --settings "$T/l20.json" -- true >/dev/null 2>&1
if [ ! -d "$PIDS_ROOT/sluice-run.$dead.1" ] && [ -d "$PIDS_ROOT/sluice-run.$$.$live_start" ]; then
    ok "H: the next run's sweep removed a dead launcher's cgroup and kept a live one's"
else
    bad "H: the sweep" "dead: $(ls -d "$PIDS_ROOT/sluice-run.$dead.1" 2>&1); live: $(ls -d "$PIDS_ROOT/sluice-run.$$.$live_start" 2>&1)"
fi
rmdir "$PIDS_ROOT/sluice-run.$dead.1" "$PIDS_ROOT/sluice-run.$$.$live_start" 2>/dev/null

# === I. as a user: no cgroup, RLIMIT_NPROC as before ===========================================
if id sluicetest >/dev/null 2>&1; then
    U=$SLUICE
    if ! setpriv --reuid=sluicetest --regid=sluicetest --clear-groups test -x "$SLUICE"; then
        mkdir -p "$T/ubin" && cp "$SLUICE" "$(dirname "$SLUICE")/sluice-inner" "$T/ubin/" && U=$T/ubin/sluice
    fi
    mkdir -p -m 777 "$T/uw" "$T/uhome"
    cp "$W/count.py" "$T/uw/"
    rm -f "$T/uw/u-ready"
    (cd "$T/uw" && exec setpriv --reuid=sluicetest --regid=sluicetest --clear-groups --inh-caps=-all \
        env HOME="$T/uhome" XDG_CONFIG_HOME="$T/uhome/.config" XDG_RUNTIME_DIR= "$U" run --settings "$T/l20.json" \
        -c "touch $T/uw/u-ready; python3 $T/uw/count.py fork; while [ -e $T/uw/u-ready ]; do sleep 0.05; done; : $TOKEN" </dev/null > "$T/u.out" 2>&1) &
    UP=$!
    if wait_for_file "$T/uw/u-ready"; then
        L=$(pgrep -P $UP -f "run --settings" || echo $UP)
        ls -d "$PIDS_ROOT"/sluice-run.$L.* >/dev/null 2>&1 && ucg="a cgroup for the user's run" || ucg=
        rm -f "$T/uw/u-ready"
    else ucg="did not start"; fi
    wait $UP
    # RLIMIT_NPROC counts the user's tasks in the sandbox's user namespace:
    # bwrap's pid 1, sh and python besides the forks
    [ -z "$ucg" ] && [ "$(cat "$T/u.out")" = "fork 17" ] &&
        ok "I: as a user: no pids cgroup, RLIMIT_NPROC 20 (pid 1, sh, python and 17 forks)" ||
        bad "I: as a user" "$ucg; $(cat "$T/u.out")"
else
    echo "ok - I: as a user # SKIP no sluicetest user"
fi

e2e_finish
