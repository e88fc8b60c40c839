#!/usr/bin/env bash
# tests/e2e/run_escape.sh - `sluice run` against a hostile command: one
# table line per escape attempt (network, Unix sockets, io_uring, foreign
# ABIs, user namespaces, PID 1, protected files, renames, read denials via
# symlinks and /proc, secrets, terminal injection, leftover processes,
# nested sandboxes, `sluice inner` reused), each asserting the SAFE outcome,
# then host-side checks (protected files hashed before and after, no
# connection reached the host's sockets, no process left, no git
# redirection left). Run as root it runs every case again as an
# unprivileged user (run-helpers/twice.sh). Everything is on 127.0.0.1/::1.
# SLUICE_E2E_TRANSPARENT=1 runs every case with network.transparent (issue
# 17; ctest e2e_run_escape_transparent): the same safe outcomes, except that
# the allow-listed origin 127.0.0.1:$PA is then reached by a direct connect()
# (as through the proxy) and the sandbox has one more listener (its resolver).
#
# A case line:   c NAME EXPECT 'SNIPPET'
#   SNIPPET runs as `sluice run --settings $CSET -c SNIPPET` in $CWD with
#   ${CENV[@]} added to the environment (set per group below) and stdin
#   from /dev/null. EXPECT is the safe outcome:
#     ok     SNIPPET exits 0 (it checks its own safe condition)
#     fail   SNIPPET fails, but not with 125 (sluice failed) nor 126/127 (the
#            tool was missing): those are errors of the test, not a pass
#     probe  the first output line is "BLOCKED ..." (run-helpers/probe.py and
#            hijack_pid1.py); "SKIP ..." skips the case
#     refused  sluice itself refuses to run the case (exit 125)
#     xfail  a known gap: the escape still works; reported as "# TODO"
#            and not counted as a failure
set -uo pipefail
SLUICE=${1:?usage: run_escape.sh PATH/TO/sluice}
case $SLUICE in /*) ;; *) SLUICE=$(cd "$(dirname "$SLUICE")" && pwd)/$(basename "$SLUICE") ;; esac
INNER_EXE=$(dirname "$SLUICE")/sluice-inner
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/lib.sh"
. "$HERE/run-helpers/twice.sh"
# lib.sh: $T (HOME inside it), PIDS, free_port, start_dnsmasq, wait_for
# twice.sh: ok/bad/skip naming [root]/[user], e2e_twice

c() { # NAME EXPECT SNIPPET
    local name=$1 exp=$2 snip=$3 out rc first
    out=$(cd "$CWD" && env "${CENV[@]}" "$SLUICE" run --settings "$CSET" -c "$snip" 2>&1 </dev/null)
    rc=$?
    first=$(grep -m1 -E '^(BLOCKED|OPEN|SKIP)' <<< "$out" || true)
    case $exp in
    ok) if [ $rc -eq 0 ]; then ok "$name"; else bad "$name" "exit $rc (want 0)
$out"; fi ;;
    fail) if [ $rc -ne 0 ] && [ $rc -ne 125 ] && [ $rc -ne 126 ] && [ $rc -ne 127 ]; then ok "$name"
          else bad "$name" "exit $rc (want a failure other than 125, 126, 127)
$out"; fi ;;
    probe)
        case $first in
        BLOCKED*) ok "$name (${first#BLOCKED })" ;;
        SKIP*) skip "$name" "${first#SKIP }" ;;
        *) bad "$name" "exit $rc
$out" ;;
        esac ;;
    refused) if [ $rc -eq 125 ]; then ok "$name (refused)"
          else bad "$name" "exit $rc (want 125: sluice refuses to run)
$out"; fi ;;
    xfail)
        if [ $rc -eq 0 ]; then echo "not ok - [$WHO] $name # TODO known gap, still open"
        else echo "ok - [$WHO] $name # TODO was a known gap: now refused (exit $rc), make it 'fail'"; fi ;;
    esac
}

# Every path below DIR ("PATH TYPE MODE LINK-TARGET") and the sha256 of
# every file with a dot component (.git, .vscode, .bashrc, ...) as
# "PATH sha256 HASH": compared before and after the cases.
fingerprint() {
    (cd "$1" && find . \( -name probe.py -o -name rt3_fd.py -o -name hijack_pid1.py -o -name harden.py -o -name host.sock \) -prune -o \
        -printf '%p %y %m %l\n'
     cd "$1" && find . -type f -path '*/.*' -exec sha256sum {} + 2>/dev/null |
        awk '{ print $2, "sha256", $1 }') | LC_ALL=C sort
}
protected_only() { awk '$1 ~ /\/\.[^\/]/'; }

cases() {
    local W=$T/work W2=$T/empty W3=$T/wt PA P6='' DPORT AS HOSTPID TOKEN fp1 fp2 fp3 out rc i
    export XDG_RUNTIME_DIR=$T/xdg
    mkdir -p -m 700 "$XDG_RUNTIME_DIR"
    HOSTPID=$$ TOKEN=$$$RANDOM

    # --- the working directories ----------------------------------------------------------
    # W: a repository with every protected kind present, a nested repo, a
    # submodule git dir, and read-denied files; W2: empty (every protected
    # name missing); W3: a linked worktree of W (.git is a file).
    mkdir -p "$W" "$W2"
    git -c init.defaultBranch=main init -q "$W"
    git -C "$W" -c user.email=t@t -c user.name=t commit -q --allow-empty -m init
    echo 'echo real-hook' > "$W/.git/hooks/pre-commit"; chmod 755 "$W/.git/hooks/pre-commit"
    echo '# user bashrc' > "$W/.bashrc"
    # the same names in another case (issue 21): protected where they exist
    echo '# upper-case bashrc' > "$W/.BASHRC"
    mkdir -p "$W/.GIT/hooks" && echo 'echo upper-hook' > "$W/.GIT/hooks/pre-commit"
    mkdir -p "$W/.vscode" && echo '{"a": 1}' > "$W/.vscode/settings.json"
    echo '[submodule "m"]' > "$W/.gitmodules"
    git -c init.defaultBranch=main init -q "$W/sub"
    git init -q --bare "$W/.git/modules/m"
    echo TOPSECRET-file > "$W/secret.txt"
    mkdir -p "$W/secretdir" && echo TOPSECRET-dir > "$W/secretdir/s"
    git -C "$W" worktree add -q "$W3" -b wt 2>/dev/null || git -C "$W" worktree add "$W3" -b wt
    for d in "$W" "$W2" "$W3"; do cp "$HERE/run-helpers/probe.py" "$HERE/run-helpers/rt3_fd.py" "$HERE/run-helpers/hijack_pid1.py" "$HERE/run-helpers/harden.py" "$HERE/run-helpers/unix_rt.py" "$d/"; done

    # --- host services -----------------------------------------------------------------------
    mkdir -p "$T/www" && echo hello-origin > "$T/www/hello.txt"
    PA=$(free_port)
    python3 -m http.server --bind 127.0.0.1 --directory "$T/www" "$PA" >"$T/A.err" 2>&1 &
    PIDS+=($!)
    if python3 -c 'import socket; socket.socket(socket.AF_INET6).bind(("::1", 0))' 2>/dev/null; then
        P6=$(python3 -c 'import socket; s=socket.socket(socket.AF_INET6); s.bind(("::1",0)); print(s.getsockname()[1])')
        python3 -m http.server --bind ::1 --directory "$T/www" "$P6" >"$T/V6.err" 2>&1 &
        PIDS+=($!)
    fi
    start_dnsmasq --local=/test/ --host-record=probe.test,127.0.0.1
    [ -n "$DPORT" ] || { bad "dnsmasq did not start" "$(cat "$T/dnsmasq.err")"; DPORT=1; }
    # Unix sockets on the host: an abstract one and a file in the working
    # directory (visible inside); each connection is logged to unix.log
    AS=sluice-test-$TOKEN
    python3 - "$AS" "$W/host.sock" "$T/unix.log" <<'PY' 2>"$T/unix.err" &
import os, select, socket, sys
ls = []
for addr in ("\0" + sys.argv[1], sys.argv[2]):
    s = socket.socket(socket.AF_UNIX)
    s.bind(addr)
    s.listen(8)
    ls.append(s)
os.chmod(sys.argv[2], 0o777)
log = open(sys.argv[3], "a")
print("listening", file=log, flush=True)
while True:
    r, _, _ = select.select(ls, [], [])
    for s in r:
        c, _ = s.accept()
        print("CONNECTION on", repr(s.getsockname()), file=log, flush=True)
        c.close()
PY
    PIDS+=($!)
    for i in $(seq 100); do
        curl -s --noproxy '*' "http://127.0.0.1:$PA/hello.txt" >/dev/null && grep -q listening "$T/unix.log" 2>/dev/null && break
        sleep 0.1
    done
    for i in $(seq 50); do
        [ -z "$P6" ] || curl -s --noproxy '*' "http://[::1]:$P6/hello.txt" >/dev/null && break
        sleep 0.1
    done

    local TPV=false NL=2
    [ -n "${SLUICE_E2E_TRANSPARENT:-}" ] && TPV=true NL=3
    cat > "$T/s.json" <<JSON
{"network": {"allowedDomains": ["127.0.0.1:$PA"], "transparent": $TPV},
 "filesystem": {"denyRead": ["$W/secret.txt", "$W/secretdir"]}}
JSON
    cat > "$T/lb21.json" <<JSON
{"network": {"allowedDomains": ["127.0.0.1:$PA"], "allowLocalBinding": true, "transparent": $TPV}}
JSON
    cat > "$T/ulb21.json" <<JSON
{"network": {"allowedDomains": ["127.0.0.1:$PA"], "allowAllUnixSockets": true, "allowLocalBinding": true, "transparent": $TPV}}
JSON
    cat > "$T/unix.json" <<JSON
{"network": {"allowedDomains": ["127.0.0.1:$PA"], "allowAllUnixSockets": true, "transparent": $TPV}}
JSON
    fp1=$(fingerprint "$W") fp2=$(fingerprint "$W2") fp3=$(fingerprint "$W3")
    CWD=$W CSET=$T/s.json CENV=()
    # SLUICE_E2E_ONLY=rt3 (or rt7, rt8, issue21, issue21_unix, killcheck) runs only that group (no host-side checks)
    case ${SLUICE_E2E_ONLY:-} in
    rt3 | rt7 | rt8 | issue21 | issue21_unix) "$SLUICE_E2E_ONLY"; return ;;
    killcheck) killcheck_only; return ;;
    esac
    X="--max-time 5 -sS --noproxy '' -x http://127.0.0.1:3128"

    # === network: the only way out is the proxy ===============================================
    if [ $TPV = true ]; then
        c "transparent: the allow-listed origin is reached directly" ok "python3 probe.py tcp 127.0.0.1 $PA | grep -q ^OPEN"
    else
        c "direct TCP to the host's 127.0.0.1 origin"    probe "python3 probe.py tcp 127.0.0.1 $PA"
    fi
    c "direct TCP to the host's dnsmasq (tcp)"           probe "python3 probe.py tcp 127.0.0.1 $DPORT"
    c "direct TCP to another loopback address"           probe "python3 probe.py tcp 127.0.0.2 $PA"
    c "UDP DNS query to the host's dnsmasq"              probe "python3 probe.py udp-dns 127.0.0.1 $DPORT"
    c "raw ICMP socket"                                  probe "python3 probe.py raw"
    c "AF_PACKET socket"                                 probe "python3 probe.py packet"
    if [ -n "$P6" ]; then
        c "direct TCP to the host's [::1] origin"        probe "python3 probe.py tcp ::1 $P6"
    else skip "direct TCP to [::1]" "no IPv6 loopback on the host"; fi
    c "/proc/net/tcp shows only the sandbox's listeners" ok \
        "! grep -qi ':$(printf %04X "$PA") ' /proc/net/tcp /proc/net/tcp6 && [ \$(awk 'NR>1' /proc/net/tcp | wc -l) -le $NL ]"
    c "/proc/net/dev lists only lo"                      ok "[ \"\$(awk 'NR>2 {print \$1}' /proc/net/dev)\" = lo: ]"
    c "/proc/net/unix shows none of the host's sockets"  ok "! grep -q '$AS\\|host.sock' /proc/net/unix"
    c "host abstract unix socket (default)"              probe "python3 probe.py abstract $AS"
    c "host unix socket file in the working dir"         probe "python3 probe.py unixpath $W/host.sock"
    CSET=$T/unix.json
    c "host abstract unix socket, allowAllUnixSockets"   probe "python3 probe.py abstract $AS"
    CSET=$T/s.json
    c "the proxy refuses the host's dnsmasq port"        ok "[ \"\$(curl $X -o /dev/null -w '%{http_code}' http://127.0.0.1:$DPORT/)\" = 403 ]"
    c "SOCKS5 to a host loopback port not allowed"       fail "curl --max-time 5 -sS --noproxy '' -x socks5h://127.0.0.1:1080 http://127.0.0.1:$DPORT/"
    c "the proxy refuses [::1] (not on the allow list)"  ok "[ \"\$(curl $X -o /dev/null -w '%{http_code}' http://[::1]:${P6:-1}/)\" = 403 ]"

    # === Unix sockets, io_uring, ABIs, namespaces (seccomp) ======================================
    c "socket(AF_UNIX, SOCK_STREAM)"                     probe "python3 probe.py unix"
    c "socket(AF_UNIX, SOCK_DGRAM)"                      probe "python3 probe.py unix-dgram"
    c "socket(0x100000001) (high-bit domain)"            probe "python3 probe.py unix-highbit"
    c "x32 ABI socket(AF_UNIX)"                          probe "python3 probe.py unix-x32"
    c "i386 ABI (int 0x80) socket(AF_UNIX)"              probe "python3 probe.py unix-i386"
    c "i386 ABI (int 0x80) socketcall(SYS_SOCKET)"       probe "python3 probe.py socketcall-i386"
    c "io_uring_setup"                                   probe "python3 probe.py io_uring"
    c "io_uring_enter"                                   probe "python3 probe.py io_uring-enter"
    c "x32 ABI io_uring_setup"                           probe "python3 probe.py io_uring-x32"
    c "unshare(CLONE_NEWUSER)"                           probe "python3 probe.py newuser"
    c "clone(CLONE_NEWUSER)"                             probe "python3 probe.py newuser-clone"
    c "clone3 (ENOSYS: falls back to clone)"             probe "python3 probe.py clone3"
    c "unshare -U"                                       fail "unshare -U true"
    c "unshare -r -n (root in a new user ns)"            fail "unshare -r -n true"
    c "unshare -m"                                       fail "unshare -m true"
    c "mount(2) a tmpfs"                                 probe "python3 probe.py mount"
    c "bwrap inside the sandbox"                         fail "bwrap --ro-bind / / --unshare-net true"
    c "bwrap --unshare-user inside the sandbox"          fail "bwrap --ro-bind / / --unshare-user --unshare-net true"
    c "sluice run inside the sandbox never runs unsandboxed" ok \
        "out=\$('$SLUICE' run -c 'echo RAN' 2>&1); [ \$? -eq 125 ] && ! printf '%s' \"\$out\" | grep -q RAN"
    c "sluice bridge listening on a unix socket inside"  fail "'$SLUICE' bridge --quiet unix:./b.sock tcp:127.0.0.1:3128"
    c "sluice bridge relaying to a host unix socket"     fail "'$SLUICE' bridge --quiet tcp:127.0.0.1:5555 unix:$W/host.sock & sleep 0.3; curl --max-time 3 -sS --noproxy '*' http://127.0.0.1:5555/"
    c "sluice inner reused: the proxy ports are taken"   ok \
        "out=\$('$SLUICE' inner --fd 1 -- sh -c 'echo RAN' 2>&1); [ \$? -ne 0 ] && ! printf '%s' \"\$out\" | grep -q RAN"
    c "sluice inner reused with --allow-unix-sockets: seccomp stays" probe "python3 probe.py inner '$SLUICE'"
    # issue 25: sluice-inner, the program bwrap starts when it sits beside
    # sluice (a copy of sluice alone, as valgrind.sh makes, has none)
    if [ -x "$INNER_EXE" ]; then
        c "sluice-inner reused: the proxy ports are taken" ok \
            "out=\$('$INNER_EXE' --fd 1 -- sh -c 'echo RAN' 2>&1); [ \$? -ne 0 ] && ! printf '%s' \"\$out\" | grep -q RAN"
        c "sluice-inner reused with --allow-unix-sockets: seccomp stays" probe "python3 probe.py inner-exe '$INNER_EXE'"
        c "sluice-inner is read-only inside"             fail "cp /bin/true '$INNER_EXE'"
    fi

    # === PID 1 (bwrap's init, outside seccomp) and other processes ===============================
    c "PTRACE_ATTACH to PID 1"                           probe "python3 probe.py ptrace-init"
    c "open /proc/1/mem read-write"                      probe "python3 probe.py mem-init"
    c "drive PID 1 to connect to a host unix socket"     probe "python3 hijack_pid1.py $W/host.sock"
    c "kill -0 of a host process (other pid namespace)"  fail "kill -0 $HOSTPID"
    c "only the sandbox's processes are visible"         ok "[ \$(ls -d /proc/[0-9]* | wc -l) -lt 10 ]"
    c "strace of the command's own child works"          ok "! command -v strace >/dev/null || strace -f -o /dev/null true"

    # === read-only system, devices, /proc/sys ====================================================
    c "write /etc"                                       fail "echo x > /etc/sluice-escape"
    c "write /usr"                                       fail "touch /usr/sluice-escape"
    c "write /var/tmp (world-writable on the host)"      fail "touch /var/tmp/sluice-escape-$TOKEN"
    # a global sysctl, rewritten with its own value (harmless if it works):
    # root on the host is root for /proc/sys unless it is mounted read-only
    c "write a global sysctl (kernel.core_uses_pid)"     fail "v=\$(cat /proc/sys/kernel/core_uses_pid) && echo \$v > /proc/sys/kernel/core_uses_pid"
    c "write /proc/sysrq-trigger"                        fail "echo h > /proc/sysrq-trigger"
    c "no block devices in /dev"                         ok "[ -z \"\$(find /dev -type b 2>/dev/null)\" ]"
    c "mknod a block device"                             fail "mknod ./blk b 8 0"

    # === protected files (existing ones, in W) ===================================================
    c "append to an existing .bashrc"                    fail "echo evil >> .bashrc"
    c "replace .bashrc by rename"                        fail "echo evil > x && mv -f x .bashrc"
    c "remove .bashrc"                                   fail "rm -f .bashrc && [ ! -e .bashrc ]"
    c "symlink over .bashrc"                             fail "ln -sf /tmp/evil .bashrc && [ -L .bashrc ]"
    c "write through a symlink to .bashrc"               fail "ln -s .bashrc l1 && echo evil >> l1"
    c "hard link .git/config"                            fail "ln .git/config hl"
    c "mkdir .git/hooks/x"                               fail "mkdir .git/hooks/x"
    c "add a hook"                                       fail "printf '#!/bin/sh\necho pwned\n' > .git/hooks/post-checkout"
    c "change an existing hook"                          fail "echo evil >> .git/hooks/pre-commit"
    c "write through a symlink to .git/hooks"            fail "ln -s .git/hooks h && touch h/post-merge"
    c "write .git/config"                                fail "echo '[core] hooksPath = /tmp' >> .git/config"
    c "git config core.hooksPath"                        fail "git config core.hooksPath /tmp/evil"
    c "create .git/config.worktree"                      fail "echo '[core] fsmonitor = evil' > .git/config.worktree"
    c "mv .git away"                                     fail "mv .git x"
    c "mv .git x then mkdir -p .git/hooks"               fail "mv .git x 2>/dev/null; mkdir -p .git/hooks/evil"
    c "mv .git/hooks away"                               fail "mv .git/hooks .git/h2"
    c "mv .vscode away"                                  fail "mv .vscode x"
    c "write .vscode/settings.json"                      fail "echo '{}' > .vscode/settings.json"
    c "add .vscode/tasks.json"                           fail "echo '{}' > .vscode/tasks.json"
    c "create .mcp.json"                                 fail "echo '{}' > .mcp.json"
    c "create .idea/"                                    fail "mkdir -p .idea/x"
    c "write .gitmodules"                                fail "echo evil >> .gitmodules"
    c "nested repo: write sub/.git/hooks"                fail "touch sub/.git/hooks/pre-commit"
    c "nested repo: mv sub then recreate sub/.git/hooks" fail "mv sub s2 2>/dev/null; mkdir -p sub/.git/hooks/x"
    c "submodule git dir: add a hook"                    fail "touch .git/modules/m/hooks/post-checkout"
    c "another case: append to .BASHRC"                  fail "echo evil >> .BASHRC"
    c "another case: add a hook to .GIT/hooks"           fail "touch .GIT/hooks/post-checkout"
    c "another case: change .GIT/hooks/pre-commit"       fail "echo evil >> .GIT/hooks/pre-commit"
    c "another case: mv .GIT then recreate .GIT/hooks"   fail "mv .GIT x 2>/dev/null; mkdir -p .GIT/hooks/evil"
    c "submodule git dir: write its config"              fail "echo x >> .git/modules/m/config"
    c "create .git/commondir (inside: allowed, undone after)" ok "echo '$T/evilgit' > .git/commondir"
    c "change a linked worktree's commondir"           fail "echo '$T/evilgit' > .git/worktrees/wt/commondir"
    c "TMPDIR leftovers the host must still remove"      ok \
        "mkdir -p /tmp/d/e/f && touch /tmp/d/e/f/g && ln -s $W/.bashrc /tmp/link && mkfifo /tmp/fifo && chmod 000 /tmp/d/e/f /tmp/d/e /tmp/d"
    # HOME is the working directory: ~/.bashrc is the protected one
    CENV=(HOME="$W")
    c "HOME=cwd: append to ~/.bashrc"                    fail "echo evil >> ~/.bashrc"
    c "HOME=cwd: create ~/.profile"                      fail "echo evil > ~/.profile"
    CENV=()

    # === protected files that do not exist (W2) ==================================================
    CWD=$W2
    c "missing .bashrc: create it"                       fail "echo evil > .bashrc"
    c "missing .zshrc: symlink it elsewhere"             fail "ln -s /tmp/evil .zshrc && [ -L .zshrc ]"
    c "missing .git: git init"                           fail "git init -q . && [ -d .git/objects ]"
    c "missing .git: mkdir -p .git/hooks"                fail "mkdir -p .git/hooks"
    c "missing .mcp.json: create it"                     fail "echo '{}' > .mcp.json"
    c "missing .vscode: create it"                       fail "mkdir -p .vscode && touch .vscode/settings.json"
    c "missing .gitmodules: create it"                   fail "echo x > .gitmodules"
    c "missing .profile: rename onto it"                 fail "echo x > p && mv p .profile; r=\$?; rm -f p; exit \$r"
    c "missing .bash_profile: remove the mount point"    fail "rmdir .bash_profile"

    # === a linked worktree (W3: .git is a file) ===================================================
    CWD=$W3
    c "worktree: repoint the .git file"                  fail "echo 'gitdir: $T/evilgit' > .git"
    c "worktree: replace the .git file"                  fail "rm -f .git && echo 'gitdir: $T/evilgit' > .git"
    CWD=$W

    # === the working directory itself inside a protected directory ================================
    # The scan protects what lies below the writable root, not the root's own
    # place: sluice refuses (125) to run with the working directory inside
    # .git, .vscode or .idea.
    git init -q "$T/w4" && mkdir -p "$T/w4/.vscode"
    CWD=$T/w4/.git/hooks
    c "cwd is .git/hooks: add a hook"                    refused "echo evil > post-checkout"
    CWD=$T/w4/.vscode
    c "cwd is .vscode: add tasks.json"                   refused "echo '{}' > tasks.json"
    mkdir -p "$T/w4/.GIT/hooks"
    CWD=$T/w4/.GIT/hooks
    c "cwd is .GIT/hooks (another case): add a hook"     refused "echo evil > post-checkout"
    CWD=$W

    # === read denials =============================================================================
    c "denyRead file: direct"                            ok "! cat secret.txt 2>/dev/null | grep -q TOPSECRET"
    c "denyRead dir: direct"                             ok "! cat secretdir/s 2>/dev/null | grep -q TOPSECRET && [ -z \"\$(ls -A secretdir 2>/dev/null)\" ]"
    c "denyRead file: via a symlink"                     ok "ln -s secret.txt l2; ! cat l2 2>/dev/null | grep -q TOPSECRET"
    c "denyRead dir: via a symlink"                      ok "ln -s secretdir l3; ! cat l3/s 2>/dev/null | grep -q TOPSECRET"
    c "denyRead file: via an absolute symlink"           ok "ln -s $W/secret.txt l4; ! cat l4 2>/dev/null | grep -q TOPSECRET"
    c "denyRead file: via /proc/self/root"               ok "! cat /proc/self/root$W/secret.txt 2>/dev/null | grep -q TOPSECRET"
    c "denyRead dir: via /proc/self/root"                ok "! cat /proc/self/root$W/secretdir/s 2>/dev/null | grep -q TOPSECRET"
    c "denyRead file: via /proc/1/root"                  ok "! cat /proc/1/root$W/secret.txt 2>/dev/null | grep -q TOPSECRET"
    c "denyRead file: via /proc/self/cwd"                ok "! cat /proc/self/cwd/secret.txt 2>/dev/null | grep -q TOPSECRET"
    c "denyRead file: via a hard link"                   ok "ln secret.txt hl2 2>/dev/null; ! cat hl2 2>/dev/null | grep -q TOPSECRET"
    c "denyRead file: rename it away"                    ok "mv secret.txt s2 2>/dev/null; ! cat s2 2>/dev/null | grep -q TOPSECRET"
    c "denyRead dir: rename it away"                     ok "mv secretdir d2 2>/dev/null; ! cat d2/s 2>/dev/null | grep -q TOPSECRET"
    c "denyRead: grep -r the working directory"          ok "! grep -rqs TOPSECRET --exclude-dir=.git ."

    # === secrets ==================================================================================
    CENV=(GITHUB_TOKEN=s3cr3t-gh AWS_SECRET_ACCESS_KEY=s3cr3t-aws FOO_API_KEY=s3cr3t-foo
          MY_PASSWORD=s3cr3t-pw SSH_AUTH_SOCK=/tmp/s3cr3t-agent.sock)
    c "secrets absent from the environment"              ok "! env | grep -q 's3cr[3]t' && [ -z \"\${SSH_AUTH_SOCK:-}\" ] && [ -z \"\${GITHUB_TOKEN:-}\" ]"
    c "secrets absent from /proc/1/environ"              ok "! tr '\\0' '\\n' < /proc/1/environ | grep -q 's3cr[3]t'"
    c "secrets absent from every /proc/*/environ"        ok "! cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -q 's3cr[3]t'"
    c "secrets absent from /proc/1/cmdline"              ok "! tr '\\0' '\\n' < /proc/1/cmdline | grep -q 's3cr[3]t'"
    c "secrets absent from every /proc/*/cmdline"        ok "! cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' '\\n' | grep -q 's3cr[3]t'"
    CENV=()

    # === leftover processes ========================================================================
    c "background, setsid, nohup and double-forked children" ok \
        "sleep 3001.$TOKEN & disown; setsid sleep 3002.$TOKEN & nohup sleep 3003.$TOKEN >/dev/null 2>&1 &
         (trap '' TERM HUP; setsid -f sleep 3004.$TOKEN); true"
    sleep 0.3
    out=$(pgrep -af "sleep 300[1-4]\.$TOKEN" || true)
    [ -z "$out" ] && ok "no process of the sandbox outlives the run" || {
        bad "leftover processes on the host" "$out"
        pkill -f "sleep 300[1-4]\.$TOKEN" 2>/dev/null # only ours: the token is unique
    }

    # === terminal injection ============================================================================
    if command -v script >/dev/null 2>&1; then
        for p in tiocsti tiocsti-high tioclinux; do
            out=$(cd "$W" && SHELL=/bin/sh script -qec "'$SLUICE' run --settings '$CSET' -- python3 probe.py $p 0" /dev/null 2>&1 </dev/null | tr -d '\r')
            case $(grep -m1 -E '^(BLOCKED|OPEN|SKIP)' <<< "$out") in
            BLOCKED*) ok "$p on the terminal the command shares (script pty)" ;;
            SKIP*) skip "$p on a pty" "$(grep -m1 SKIP <<< "$out")" ;;
            *) bad "$p on a pty" "$out" ;;
            esac
        done
        out=$(cd "$W" && SHELL=/bin/sh script -qec "'$SLUICE' run --settings '$CSET' -c 'python3 -c \"open(\\\"/dev/tty\\\")\" && echo TTY-OPENED' </dev/null" /dev/null 2>&1 </dev/null | tr -d '\r')
        grep -q TTY-OPENED <<< "$out" && bad "stdin not a terminal: /dev/tty of the user's session" "$out" ||
            ok "stdin not a terminal: new session, /dev/tty of the user's session cannot be opened"
    else
        skip "TIOCSTI on a pty" "no script(1)"
    fi

    # === the summary line cannot inject escapes into the user's terminal ================================
    out=$(cd "$W" && "$SLUICE" run --settings "$CSET" -c "python3 - <<'PY'
import socket
for host in [b'\x1b]0;pwned\x07evil.test:80', b'evil\x1b[31m.test:80', b'ok.test:80\r\nsluice: fake']:
    try:
        s = socket.create_connection(('127.0.0.1', 3128)); s.sendall(b'CONNECT ' + host + b' HTTP/1.1\r\n\r\n'); s.recv(100)
    except OSError: pass
    name = host.split(b':')[0]
    try:
        s = socket.create_connection(('127.0.0.1', 1080)); s.sendall(b'\x05\x01\x00'); s.recv(2)
        s.sendall(b'\x05\x01\x00\x03' + bytes([len(name)]) + name + b'\x00\x50'); s.recv(10)
    except OSError: pass
PY" 2>&1 >/dev/null)
    if printf '%s' "$out" | LC_ALL=C grep -q $'[\x01-\x08\x0b-\x1f\x7f]'; then bad "control bytes reach the summary on stderr" "$(printf '%s' "$out" | od -c | head)"
    else ok "hostile host names put no control bytes on the user's terminal"; fi

    issue14
    # under valgrind (tests/valgrind.sh) the issue 21 groups are left out:
    # they test bwrap, Landlock and seccomp enforcement around a sluice the
    # normal and sanitizer suites run, and would take the script past its
    # time limit there
    if [ -n "${SLUICE_E2E_VALGRIND:-}" ]; then
        skip "issue 21 groups (issue21_unix, issue21, rt3)" "under valgrind"
    else
        issue21_unix
        issue21
        [ -n "${SLUICE_E2E_SKIP_RT3:-}" ] || rt3
        # rt7 runs every mode itself: once, in the default pass
        [ -n "${SLUICE_E2E_TRANSPARENT:-}" ] || rt7
        # rt8 runs every mode itself too
        [ -n "${SLUICE_E2E_TRANSPARENT:-}" ] || rt8
    fi

    # === host-side checks after everything =============================================================
    # the cases leave files of their own in W (x, l1..l4, h): only what is
    # protected (dot names, .git, .vscode) must be byte-identical
    out=$(diff <(printf '%s\n' "$fp1" | protected_only) <(fingerprint "$W" | protected_only) || true)
    [ -z "$out" ] && ok "host: every protected file and git directory in W is unchanged" ||
        bad "host: protected files changed" "$out"
    [ "$(fingerprint "$W2")" = "$fp2" ] && ok "host: the empty directory is as before (no protected name made, no mount point left)" ||
        bad "host: W2 changed" "$(diff <(printf '%s\n' "$fp2") <(fingerprint "$W2"))"
    [ "$(fingerprint "$W3")" = "$fp3" ] && ok "host: the worktree's .git file is unchanged" ||
        bad "host: W3 changed" "$(diff <(printf '%s\n' "$fp3") <(fingerprint "$W3"))"
    [ ! -e "$W/.git/commondir" ] && ok "host: the .git/commondir the command made was removed after the run" ||
        bad "host: .git/commondir left" "$(cat "$W/.git/commondir")"
    out=$(cd "$W" && "$SLUICE" run --settings "$CSET" -c "echo '$T/evilgit' > .git/commondir" 2>&1)
    if [ ! -e "$W/.git/commondir" ] && grep -q commondir <<< "$out"; then
        ok "host: a created .git/commondir is removed with a message"
    else bad "host: commondir check" "$out"; fi
    [ "$(grep -c CONNECTION "$T/unix.log")" = 0 ] && ok "host: no connection reached the host's unix sockets" ||
        bad "host: unix socket reached" "$(cat "$T/unix.log")"
    ! grep -q 'probe.test' "$T/dnsmasq.log" 2>/dev/null && ok "host: dnsmasq saw no query from the sandbox" ||
        bad "host: dnsmasq got a query" "$(grep probe.test "$T/dnsmasq.log")"
    [ ! -e "/var/tmp/sluice-escape-$TOKEN" ] && ok "host: nothing written to /var/tmp" ||
        { bad "host: /var/tmp written"; rm -f "/var/tmp/sluice-escape-$TOKEN"; }
    [ -z "$(ls -A "$XDG_RUNTIME_DIR")" ] && ok "host: every run directory (TMPDIR) was removed, 000 dirs and links included" ||
        bad "host: run directory left" "$(ls -laR "$XDG_RUNTIME_DIR" | head -20)"
    [ -f "$W/.bashrc" ] && [ ! -L "$W/.bashrc" ] && [ "$(cat "$W/.bashrc")" = '# user bashrc' ] &&
        ok "host: .bashrc survived the TMPDIR cleanup (symlink not followed)" || bad "host: .bashrc after cleanup"
}

# === issue 21 item 2: Unix sockets through socketpair ===============================================
# socket(AF_UNIX) was refused, but socketpair(AF_UNIX, SOCK_DGRAM) then
# sendto(PATH) reached any host datagram socket the command could write to.
# The host's stand-ins live in V, a directory outside the writable paths
# (read-only inside, as /dev/log and /run/systemd/notify are): a datagram
# socket, a stream and a seqpacket listener, an abstract datagram socket;
# a sender keeps trying to reach any socket the sandbox binds to a short
# name (pb21-*) in the working directory. Everything they get is logged as
# CONNECTION to unix21.log, which must stay empty.
# (Named issue21 until rt-3, like the item-3 group below, whose definition
# replaced it: these cases did not run.)
issue21_unix() {
    local V=/var/tmp/sluice21-$TOKEN-$(id -u) AB=sluice21-$TOKEN-d i out hp
    mkdir -p -m 755 "$V"
    : > "$T/unix21.log"
    python3 - "$V" "$AB" "$W" "$T/unix21.log" <<'PY' 2>"$T/unix21.err" &
import os, select, socket, sys, time
d, ab, work, logp = sys.argv[1:5]
log = open(logp, "a")
def note(*a):
    print(*a, file=log, flush=True)
socks = {}
for name, t in (("hostd.sock", socket.SOCK_DGRAM), ("hosts.sock", socket.SOCK_STREAM), ("hostq.sock", socket.SOCK_SEQPACKET)):
    s = socket.socket(socket.AF_UNIX, t)
    s.bind(os.path.join(d, name))
    os.chmod(os.path.join(d, name), 0o777)
    if t != socket.SOCK_DGRAM:
        s.listen(8)
    socks[s] = name
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind("\0" + ab)
socks[s] = "@" + ab
# abstract listeners of the host's namespace (rt-2): a socket made in the
# sandbox cannot name them, an inherited one of the host's could
for suffix, t in (("-s", socket.SOCK_STREAM), ("-q", socket.SOCK_SEQPACKET)):
    s = socket.socket(socket.AF_UNIX, t)
    s.bind("\0" + ab + suffix)
    s.listen(8)
    socks[s] = "@" + ab + suffix
note("listening")
while True:
    r, _, _ = select.select(list(socks), [], [], 0.1)
    for s in r:
        if s.type == socket.SOCK_DGRAM:
            note("CONNECTION datagram on", socks[s], repr(s.recv(100)))
        else:
            c, _ = s.accept()
            note("CONNECTION on", socks[s])
            c.close()
    # the other way: the host reaching a socket the sandbox bound
    for n in os.listdir(work):
        if not n.startswith("pb21-"):
            continue
        p = os.path.join(work, n)
        for t in (socket.SOCK_DGRAM, socket.SOCK_STREAM, socket.SOCK_SEQPACKET):
            c = socket.socket(socket.AF_UNIX, t)
            c.setblocking(False)
            try:
                if t == socket.SOCK_DGRAM:
                    c.sendto(b"from-host", p)
                else:
                    c.connect(p)
                    c.send(b"from-host")
                note("CONNECTION the host reached", n, "as", t)
            except OSError:
                pass
            c.close()
PY
    hp=$!
    PIDS+=($hp)
    for i in $(seq 100); do grep -q listening "$T/unix21.log" 2>/dev/null && break; sleep 0.1; done
    grep -q listening "$T/unix21.log" || bad "issue 21: the host's unix sockets did not start" "$(cat "$T/unix21.err")"

    c "socketpair(AF_UNIX, SOCK_DGRAM), sendto a host datagram socket (read-only dir)" probe \
        "python3 probe.py pair-dgram $V/hostd.sock"
    c "socketpair of every type and flag: sendto/sendmsg/connect/AF_UNSPEC/bind to host sockets" probe \
        "python3 probe.py pair-routes $V $AB"
    c "a socketpair bound to a short name is not reached from the host" probe "python3 probe.py pair-bind pb21"
    # rt-2 (red team of item 2): pairs in every later state, descriptors of
    # PID 1, opening socket files, every socket file visible inside
    c "rt-2: stream/seqpacket pairs after peer close, shutdown, failed sends, AF_UNSPEC, SCM_RIGHTS: no route to host sockets" probe \
        "python3 unix_rt.py pair-dead $V $AB"
    CSET=$T/lb21.json
    c "rt-2: the same with allowLocalBinding (bind and listen allowed)" probe "python3 unix_rt.py pair-dead $V $AB"
    # (in transparent mode allowLocalBinding has the host answer bind(), which
    # refuses a Unix path: the route is closed before it opens)
    [ $TPV = true ] || c "rt-2: a pair bound to a short name is not reached from the host, allowLocalBinding" probe \
        "python3 probe.py pair-bind pb21"
    CSET=$T/s.json
    c "rt-2: pidfd_getfd() of PID 1's descriptors" probe "python3 unix_rt.py pid1-getfd"
    # with Unix sockets and binding allowed, transparent mode runs an abstract
    # connect() on the host (run_here): the accepting side's peer is sluice
    # (SO_PEERCRED pid 0); its SO_PEERPIDFD must give no handle on sluice
    CSET=$T/ulb21.json
    c "rt-2: SO_PEERPIDFD of an abstract connection gives no handle on a host process" probe \
        "python3 unix_rt.py peer-pidfd"
    CSET=$T/s.json
    c "rt-2: x32 ABI socketpair(AF_UNIX, SOCK_DGRAM)" probe "python3 unix_rt.py pair-x32"
    c "rt-2: open() of host socket files (ENXIO), O_PATH reopen" probe \
        "python3 unix_rt.py open-sock $V/hosts.sock $V/hostd.sock $V/hostq.sock $W/host.sock"
    c "rt-2: every socket file visible inside (D-Bus, systemd notify, /dev/log, the stand-ins) refuses a pair" probe \
        "python3 unix_rt.py host-sockets"
    c "i386 ABI (int 0x80) socketpair(AF_UNIX, SOCK_DGRAM)" probe "python3 probe.py pair-dgram-i386"
    c "i386 ABI (int 0x80) socketcall(SYS_SOCKETPAIR, AF_UNIX, SOCK_DGRAM)" probe "python3 probe.py socketcall-pair-i386"
    c "stream and seqpacket socketpairs keep working" ok "python3 -c '
import socket
for t in (socket.SOCK_STREAM, socket.SOCK_SEQPACKET, socket.SOCK_STREAM | socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC):
    a, b = socket.socketpair(socket.AF_UNIX, t)
    a.send(b\"ping\")
    assert b.recv(8) == b\"ping\"
'"
    CSET=$T/unix.json
    c "allowAllUnixSockets: socketpair(AF_UNIX, SOCK_DGRAM) is allowed" ok \
        "python3 -c 'import socket; a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM); a.send(b\"x\"); assert b.recv(4) == b\"x\"'"
    CSET=$T/s.json

    # a harness's socketpair as the command's stdin and stdout keeps working
    for t in STREAM SEQPACKET; do
        out=$(cd "$W" && python3 - "$SLUICE" "$CSET" "$t" <<'PY' 2>&1
import socket, subprocess, sys
a, b = socket.socketpair(socket.AF_UNIX, getattr(socket, "SOCK_" + sys.argv[3]))
p = subprocess.Popen([sys.argv[1], "run", "--settings", sys.argv[2], "--", "python3", "-c",
                      "import os; d = os.read(0, 64); os.write(1, b'got-' + d)"],
                     stdin=b, stdout=b, stderr=subprocess.PIPE)
b.close()
a.settimeout(60)
a.send(b"hi")
got = b""
try:
    while not got.startswith(b"got-hi"):
        d = a.recv(64)
        if not d:
            break
        got += d
except OSError as e:
    got += repr(e).encode()
rc = p.wait(60)
print(got.decode(errors="replace"), rc, p.stderr.read().decode(errors="replace").strip())
PY
)
        case $out in
        "got-hi 0"*) ok "a harness's $t socketpair as stdin and stdout keeps working" ;;
        *) bad "a harness's $t socketpair as stdio" "$out" ;;
        esac
    done

    # rt-2: the harness's pair as stdin is of the host's namespace (its
    # abstract names are the host's); once the harness closes its end,
    # nothing re-aims it (connect, sendto/sendmsg/sendmmsg, AF_UNSPEC, bind)
    for t in STREAM SEQPACKET; do
        out=$(cd "$W" && python3 - "$SLUICE" "$CSET" "$t" "$V" "$AB" <<'PY' 2>&1
import socket, subprocess, sys, time
a, b = socket.socketpair(socket.AF_UNIX, getattr(socket, "SOCK_" + sys.argv[3]))
p = subprocess.Popen([sys.argv[1], "run", "-q", "--settings", sys.argv[2], "--", "python3", "unix_rt.py", "stdin-aim",
                      sys.argv[4], sys.argv[5]], stdin=b, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
b.close()
time.sleep(1.5)
a.close()
print(p.communicate(timeout=120)[0].decode(errors="replace").strip(), "rc=%d" % p.returncode)
PY
)
        case $out in
        "BLOCKED "*" rc=0") ok "rt-2: a harness's $t pair as stdin, its host end closed, cannot be re-aimed ($out)" ;;
        *) bad "rt-2: a harness's $t pair as stdin re-aimed" "$out" ;;
        esac
    done

    sleep 0.3 # the host's sender polls every 0.1 s
    ! grep -q CONNECTION "$T/unix21.log" && ok "host: no datagram or connection reached the host's unix sockets, none the other way" ||
        bad "host: a unix socket was reached through a socketpair" "$(cat "$T/unix21.log")"
    # A Unix datagram socket the caller passes in as stdin could sendto() any
    # path without a new pair: the launcher's check of inherited descriptors
    # (issue 21 item 5) refuses such a run (exit 125) before the command runs.
    : > "$T/unix21.log"
    out=$(cd "$W" && python3 - "$SLUICE" "$CSET" "$V/hostd.sock" <<'PY' 2>&1
import socket, subprocess, sys
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
p = subprocess.run([sys.argv[1], "run", "--settings", sys.argv[2], "--", "python3", "-c",
                    "import socket, sys; socket.socket(fileno=0).sendto(b'ESCAPED stdin', sys.argv[1])",
                    sys.argv[3]], stdin=b, capture_output=True, timeout=60)
print(p.returncode, p.stderr.decode(errors="replace").strip())
PY
)
    sleep 0.3
    if ! grep -q CONNECTION "$T/unix21.log" && [ "${out%% *}" = 125 ]; then
        ok "a Unix datagram socket passed in as stdin is refused at start (125) and reaches no host socket"
    else
        bad "a Unix datagram socket passed in as stdin cannot sendto() a host socket" "$out; $(cat "$T/unix21.log")"
    fi
    kill "$hp" 2>/dev/null
    rm -rf "$V"
}

# SIGKILL of sluice run at several moments (issue 14), the reaper's clean-up;
# issue14's locals (V, K, CSET, ...) are in scope. SLUICE_E2E_ONLY=killcheck
# runs only these (killcheck_only), KILLCHECK_DELAYS the kill times (issue
# 25: "SIGKILL after 0.05s" left placeholders now and then: bwrap, killed
# with the launcher, left its first process making them after the reaper
# had cleaned; the reaper now waits for that process too, reaper.c).
killchecks() {
    # --- SIGKILL of sluice run leaves nothing in the project -------------------------------------------
    git -c init.defaultBranch=main init -q "$K"
    git -C "$K" -c user.email=t@t -c user.name=t commit -q --allow-empty -m init
    rm -f "$K/.git/config" # the worst case: git cannot read a .git/config directory
    mkdir -p -m 700 "$V/kx"
    killcheck() { # WHAT: the project and the run directories (an empty 0700 parent,
                  # XDG_RUNTIME_DIR/sluice, may stay), once the reaper is done
                  # (up to 30 s: on a loaded 2-core machine 10 s was not always
                  # enough for the reaper to see bwrap go and clean up; x SLOW)
        for ((i = 0; i < 600 * SLOW; i++)); do
            [ "$(ls -A "$K")" = .git ] && [ ! -e "$K/.git/config" ] && [ ! -e "$K/.git/config.worktree" ] &&
                [ -z "$(find "$V/kx" -mindepth 2 2>/dev/null)" ] && break
            sleep 0.05
        done
        clean=$(ls -A "$K" | tr '\n' ' ')
        out=$(git -C "$K" status --porcelain 2>&1) rc=$?
        if [ "$clean" = ".git " ] && [ $rc = 0 ] && [ -z "$out" ] && git -C "$K" fsck >/dev/null 2>&1 &&
            [ ! -e "$K/.git/config" ] && [ -z "$(find "$V/kx" -mindepth 2 2>/dev/null)" ]; then
            ok "SIGKILL $1: git status clean, git fsck ok, no placeholder or run directory left"
        else
            bad "SIGKILL $1: debris" "project: $clean; .git: $(ls -A "$K/.git" | tr '\n' ' '); status rc $rc: $out; rundirs: $(find "$V/kx" -mindepth 1 | tr '\n' ' ')"
            # (all of them, so that one failure is not counted again by every
            # later case: .claude holds the placeholders of its commands/
            # and agents/)
            for d in .bash_profile .bashrc .gitconfig .gitmodules .idea .mcp.json .profile .ripgreprc .vscode .zprofile .zshrc .git/config .git/config.worktree .claude/commands .claude/agents .claude; do
                rmdir "$K/$d" 2>/dev/null
            done
        fi
    }
    for d in ${KILLCHECK_DELAYS:-0 0.05 0.2 0.5 1.5}; do
        (cd "$K" && exec env XDG_RUNTIME_DIR=$V/kx "$SLUICE" run --settings "$CSET" -c 'sleep 30; : kill14') >/dev/null 2>&1 &
        pid=$!
        sleep $d
        kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
        killcheck "after ${d}s"
    done
    # the whole process group (an agent harness killing its job): the
    # reaper is in a session of its own
    (cd "$K" && exec setsid env XDG_RUNTIME_DIR=$V/kx "$SLUICE" run --settings "$CSET" -c 'sleep 30; : kill14') >/dev/null 2>&1 &
    pid=$!
    sleep 1
    kill -9 -- -$pid 2>/dev/null; wait $pid 2>/dev/null
    killcheck "of the process group"
    # launcher and reaper killed together: the next run sweeps
    (cd "$K" && exec env XDG_RUNTIME_DIR=$V/kx "$SLUICE" run --settings "$CSET" -c 'sleep 30; : kill14') >/dev/null 2>&1 &
    pid=$!
    sleep 1
    rpid=$(pgrep -P $pid -x sluice-reaper)
    kill -9 $pid $rpid 2>/dev/null; wait $pid 2>/dev/null
    sleep 0.5
    (cd "$K" && XDG_RUNTIME_DIR=$V/kx "$SLUICE" run --settings "$CSET" -c true) >/dev/null 2>&1
    killcheck "of launcher and reaper, then one more run (the sweep)"
}

killcheck_only() {
    local V=/var/tmp/sluice14k-$TOKEN-$(id -u) K=$T/killrepo d pid rpid i out rc clean
    mkdir -p -m 755 "$V"
    killchecks
    rm -rf "$V" "$K"
}

# === issue 14: keyrings, FIFOs, socket families, private run directories, crash debris, limits ======
# Each of these failed on main at 6022450 (see the issue); a few controls
# (netlink route, the default limit) show what must keep working.
issue14() {
    local V=/var/tmp/sluice14-$TOKEN-$(id -u) KEY=sluice14-$TOKEN K=$T/killrepo d pid rpid i out rc clean
    mkdir -p -m 755 "$V"

    # --- keyrings: the caller's session keyring holds a key -------------------------------------
    python3 - "$KEY" <<'PY' >/dev/null 2>&1
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True); libc.syscall.restype = ctypes.c_long
libc.syscall(ctypes.c_long(248), b"user", sys.argv[1].encode(), b"TOPSECRET-key", ctypes.c_long(13), ctypes.c_long(-3))
PY
    c "keyring: read the caller's session key, add a key, keyctl" probe "python3 harden.py keyring $KEY"

    # --- host FIFOs and device nodes outside the writable paths ---------------------------------
    # a reader on the host for each attempt (it ends at the first writer's
    # close); the sandbox side never blocks: O_NONBLOCK, or timeout
    mkfifo "$V/fifo" && chmod 666 "$V/fifo"
    : > "$T/fifo.got"
    fifo_reader() { (timeout 10 cat "$V/fifo" >> "$T/fifo.got" 2>/dev/null &); sleep 0.3; }
    fifo_release() { timeout 2 sh -c ": > '$V/fifo'" 2>/dev/null; sleep 0.2; }
    fifo_reader
    c "host FIFO outside the writable paths: open for writing" probe "python3 harden.py fifo $V/fifo"
    fifo_release; fifo_reader
    c "shell redirect into a host FIFO fails"           fail "timeout 5 sh -c 'echo ESCAPED > $V/fifo' && exit 0; [ \$? != 124 ] && exit 1; exit 0"
    fifo_release
    [ ! -s "$T/fifo.got" ] && ok "host: the FIFO's reader got nothing" || bad "host: the FIFO's reader got data" "$(cat "$T/fifo.got")"
    if [ "$(id -u)" = 0 ] && mknod "$V/null" c 1 3 2>/dev/null; then
        c "host character device outside the writable paths" probe "python3 harden.py chardev $V/null"
    else skip "host character device" "mknod needs root"; fi
    c "a FIFO inside the writable paths keeps working"  ok "mkfifo ./f14 && (cat ./f14 > /dev/null &) && echo x > ./f14; rm -f ./f14"
    c "a FIFO in the private /tmp keeps working"        ok "mkfifo /tmp/f14 && (cat /tmp/f14 > /dev/null &) && echo x > /tmp/f14"
    c "echo > /dev/stderr and /dev/tty-less redirects work" ok "echo x > /dev/stderr && echo y > /dev/null && : > ./w14 && rm ./w14"

    # --- socket families --------------------------------------------------------------------------
    c "socket(AF_VSOCK)"                                probe "python3 harden.py family 40 1"
    c "socket(AF_PACKET)"                               probe "python3 harden.py family 17 2"
    c "socket(AF_BLUETOOTH)"                            probe "python3 harden.py family 31 1"
    c "socket(AF_ALG)"                                  probe "python3 harden.py family 38 5"
    c "socket(AF_KEY)"                                  probe "python3 harden.py family 15 3 2"
    c "socket(AF_UNSPEC)"                               probe "python3 harden.py family 0 1"
    c "socket(64) (above AF_MAX)"                       probe "python3 harden.py family 64 1"
    c "socket(0x7fffffff)"                              probe "python3 harden.py family 0x7fffffff 1"
    c "socket(AF_NETLINK, NETLINK_AUDIT)"               probe "python3 harden.py family 16 3 9"
    c "socket(AF_NETLINK, NETLINK_KOBJECT_UEVENT)"      probe "python3 harden.py family 16 2 15"
    # (only the socket: glibc's netlink users also bind(), which
    # network.allowLocalBinding decides)
    c "socket(AF_NETLINK, NETLINK_ROUTE) is allowed"    ok "python3 -c 'import socket; socket.socket(16, 3, 0)'"
    CSET=$T/unix.json
    c "allowAllUnixSockets: socket(AF_VSOCK) still refused" probe "python3 harden.py family 40 1"
    c "allowAllUnixSockets: i386 socketcall(SYS_SOCKET) refused" probe "python3 probe.py socketcall-i386"
    CSET=$T/s.json

    # --- secrets: lower-case names, scanner names, URLs with credentials ---------------------------
    CENV=(github_token=s3cr3t-lc MY_SECRET_ID=s3cr3t-sid SENTRY_DSN=https://s3cr3t@o1.ingest.test/1
          REDIS_URL=redis://:s3cr3t@cache:6379/0 MIRROR=ftp://u:s3cr3t@mirror.test/ WEATHER_APIKEY=s3cr3t-wk)
    c "secrets: lower-case, *_SECRET*, *_DSN, *_APIKEY, URLs with passwords" ok "! env | grep -q 's3cr[3]t'"
    CENV=(github_token=s3cr3t-lc)
    printf '{"environment": {"allow": ["github_token"]}}' > "$T/envallow.json"
    out=$(cd "$W" && env "${CENV[@]}" "$SLUICE" run --settings "$T/envallow.json" -c 'printf %s "$github_token"' 2>&1)
    [ "$out" = s3cr3t-lc ] && ok "environment.allow re-admits a secret name" || bad "environment.allow" "$out"
    CENV=()

    # --- the run directory is private to its run ---------------------------------------------------
    mkdir -p -m 700 "$V/xdg"
    (cd "$W" && XDG_RUNTIME_DIR=$V/xdg "$SLUICE" run --settings "$CSET" -c "echo RUNDIR-SECRET-$TOKEN > /tmp/a14; sleep 8" >/dev/null 2>&1 &)
    for i in $(seq $((100 * SLOW))); do [ -n "$(find "$V/xdg" -name a14 2>/dev/null)" ] && break; sleep 0.05; done
    [ -n "$(find "$V/xdg" -name a14 2>/dev/null)" ] || bad "run A did not start" ""
    CENV=(XDG_RUNTIME_DIR=$V/xdg)
    c "another run cannot read run A's /tmp (XDG_RUNTIME_DIR)" ok "! grep -rqs RUNDIR-SECRET-$TOKEN $V/xdg /tmp"
    CENV=()
    # even with the run directories' parent named in allowWrite (a
    # settings file cannot make them visible: the mask comes after every
    # bind). Not "/tmp" itself: its protected-file scan would reach into
    # other users' test trees there.
    printf '{"filesystem": {"allowWrite": [".", "%s"]}, "network": {"allowedDomains": ["127.0.0.1:%s"]}}' "$V/xdg" "$PA" > "$T/xdgw.json"
    out=$(cd "$W" && XDG_RUNTIME_DIR=$V/xdg "$SLUICE" run --settings "$T/xdgw.json" -c "grep -rls RUNDIR-SECRET-$TOKEN $V/xdg /tmp 2>/dev/null; true" 2>&1)
    [ -z "$out" ] && ok "another run with allowWrite on XDG_RUNTIME_DIR cannot read run A's /tmp" || bad "run A's /tmp readable" "$out"
    for i in $(seq $((250 * SLOW))); do [ -z "$(ls -A "$V/xdg")" ] && break; sleep 0.05; done
    [ -z "$(ls -A "$V/xdg")" ] && ok "host: run A's directory removed" || bad "host: run A left" "$(ls -laR "$V/xdg" | head)"

    killchecks

    # --- resource limits ---------------------------------------------------------------------------------
    printf '{"sandbox": {"limits": {"processes": 64, "openFiles": 128, "memory": 2048}}, "network": {"allowedDomains": ["127.0.0.1:%s"]}}' "$PA" > "$T/lim.json"
    out=$(cd "$W" && "$SLUICE" run --settings "$T/lim.json" -- python3 -c '
import os, resource, sys, time
n, err = 0, ""
try:
    for i in range(300):
        if os.fork() == 0:
            time.sleep(2); os._exit(0)
        n += 1
except OSError as e:
    err = e.strerror
print(n, resource.getrlimit(resource.RLIMIT_NOFILE)[0], resource.getrlimit(resource.RLIMIT_AS)[0] >> 20, err)' 2>&1)
    set -- $out
    if grep -q 'sandbox.limits.processes cannot be enforced' <<< "$out"; then
        skip "sandbox.limits: fork bomb" "root and no usable pids cgroup here (refused, 125): $(grep -m1 'cannot be enforced' <<< "$out")"
    elif [ "${1:-300}" -lt 64 ] && [ "${2:-}" = 128 ] && [ "${3:-}" = 2048 ] && grep -q 'Resource temporarily unavailable' <<< "$out"; then
        ok "sandbox.limits: fork bomb stopped at ${1} processes (EAGAIN), openFiles 128, memory 2048 MiB"
    else bad "sandbox.limits not applied" "$out"; fi
    out=$(cd "$W" && "$SLUICE" run --settings "$CSET" -- python3 -c 'import resource; print(resource.getrlimit(resource.RLIMIT_NPROC)[0])' 2>&1)
    [ "$out" = 8192 ] && ok "sandbox.limits.processes defaults to 8192" || bad "default process limit" "$out"
    printf '{"sandbox": {"limits": {"processes": 2}}}' > "$T/lim-bad.json"
    out=$(cd "$W" && "$SLUICE" run --settings "$T/lim-bad.json" -c true 2>&1); rc=$?
    [ $rc = 125 ] && grep -q 'sandbox.limits.processes' <<< "$out" && ok "sandbox.limits.processes 2 refused with a message naming it" ||
        bad "bad limit accepted" "rc $rc: $out"

    # --- issue 21, item 5: stdin a socket of the host's network (inetd, socket activation) ---------------
    # (not under valgrind: valgrind 3.19 has no pidfd_getfd, so a guarded
    # run is refused there, as transparent mode is; the normal and sanitizer
    # suites run these)
    if [ -n "${SLUICE_E2E_VALGRIND:-}" ]; then
        skip "inherited host sockets" "under valgrind (no pidfd_getfd in valgrind 3.19)"
    else
    cp "$HERE/run-helpers/inherit.py" "$W/inherit.py"
    printf '{"network": {"allowLocalBinding": true, "transparent": %s}}' "${TPV:-false}" > "$T/inherit.json"
    for m in tcp tcp-reset; do
        out=$(cd "$W" && python3 inherit.py host "$m" -- "$SLUICE" run --settings "$T/inherit.json" -- \
            python3 inherit.py inside SINK 2>&1)
        case $out in
        *"unspec=EPERM connect=EPERM"*" rc=0 sink=0")
            grep -qE '(fastopen[0-9]|unspec|connect|bind|listen)=ok' <<< "$out" &&
                bad "inherited host TCP socket ($m) re-aimed" "$out" ||
                ok "an inherited TCP socket of the host ($m) cannot be re-aimed (MSG_FASTOPEN, AF_UNSPEC, connect, bind, listen; i386 and x32 where the kernel has them)" ;;
        *) bad "inherited host TCP socket ($m)" "$out" ;;
        esac
    done
    # rt-1: an MPTCP socket is SOCK_STREAM over AF_INET too, but not TCP:
    # reset by its peer, a first sendto(MSG_FASTOPEN) answers EISCONN and
    # unconnects it, a second connects it to the sink from the host's
    # namespace (no connect() to notify). Was "guarded" like TCP; refused now.
    for m in mptcp-reset mptcp-accepted; do
        out=$(cd "$W" && python3 inherit.py host "$m" -- "$SLUICE" run --settings "$T/inherit.json" -- \
            python3 inherit.py inside SINK 2>&1)
        case $out in
        SKIP*) skip "stdin a $m socket of the host" "${out#SKIP }" ;;
        *"stream socket that is not TCP"*" rc=125 sink=0") ok "stdin a $m socket of the host: refused (125)" ;;
        *) bad "stdin a $m socket of the host: not refused, or the sink was reached" "$out" ;;
        esac
    done
    for m in udp tcp-listen unix-dgram; do
        out=$(cd "$W" && python3 inherit.py host "$m" -- "$SLUICE" run --settings "$T/inherit.json" -- \
            python3 inherit.py inside SINK 2>&1)
        grep -q "of the host's network, which the command could aim anywhere; the command was not run rc=125 sink=0" <<< "$out" &&
            ok "stdin a $m socket of the host: refused (125)" || bad "stdin a $m socket of the host" "$out"
    done
    # rt-1 H2 (a guarded run has transparent mode's code path): with
    # allowAllUnixSockets a connect() to a Unix path was handed back to the
    # kernel (CONTINUE). One thread dup2()s the inherited host TCP socket
    # onto the number of the Unix socket sluice checked, another flips the
    # address to AF_UNSPEC: the host's socket was disconnected and
    # sendto(MSG_FASTOPEN) connected it to the sink from the host's
    # namespace. sluice now runs the call itself on the socket it checked
    # (run/transparent.c, unix_path_call).
    printf '{"network": {"allowAllUnixSockets": true, "transparent": %s}}' "${TPV:-false}" > "$T/inherit-unix.json"
    out=$(cd "$W" && python3 inherit.py host tcp -- "$SLUICE" run --settings "$T/inherit-unix.json" -- \
        python3 inherit.py inside-swapunix SINK 2>&1)
    [ "$out" = "swapunix escaped=0 calls=20000 rc=0 sink=0" ] &&
        ok "allowAllUnixSockets: a Unix-path connect() racing dup2() + AF_UNSPEC never disconnects an inherited host TCP socket" ||
        bad "allowAllUnixSockets: a Unix-path connect() raced with dup2() + AF_UNSPEC disconnects the inherited host TCP socket, which then reaches the host's network" "$out"
    # rt-1: more of the host's sockets on stdio, each refused before anything runs
    for m in udp-connected tcp-listen-reuseport stdout-udp; do
        out=$(cd "$W" && python3 inherit.py host "$m" -- "$SLUICE" run --settings "$T/inherit.json" -- \
            python3 inherit.py inside SINK 2>&1)
        grep -q "of the host's network, which the command could aim anywhere; the command was not run rc=125 sink=0" <<< "$out" &&
            ok "$m socket of the host on stdio: refused (125)" || bad "$m socket of the host on stdio" "$out"
    done
    # sockets of the host's network on descriptors other than 0-2: inner
    # closes them, and no process of the sandbox (bwrap's init included,
    # which the command could reach with pidfd_getfd were it not for
    # Landlock) holds them while the command runs
    out=$(cd "$W" && python3 inherit.py host high-fds -- "$SLUICE" run --settings "$T/inherit.json" -- \
        python3 inherit.py inside-fds SINK 2>&1)
    [ "$out" = "fds=0,1,2 holders=none rc=0 sink=0" ] &&
        ok "host sockets on fds 57 and 58: the command gets none, no sandbox process holds them" ||
        bad "host sockets on fds other than 0-2" "$out"
    # a pidfd of a host process on stdin: pidfd_getfd() of its socket is a
    # ptrace-mode access out of the sandbox's Landlock domain
    out=$(cd "$W" && python3 inherit.py host pidfd -- "$SLUICE" run --settings "$T/inherit.json" -- \
        python3 inherit.py inside-pidfd SINK 2>&1)
    case $out in
    "pidfd_getfd=EPERM rc=0 sink=0") ok "stdin a pidfd of a host process: pidfd_getfd() of its socket refused" ;;
    *"sink=0"*Landlock*|*Landlock*"sink=0") skip "pidfd on stdin" "no Landlock here: $out" ;;
    *) bad "stdin a pidfd of a host process: its socket taken" "$out" ;;
    esac
    # Out of scope, recorded: a connected Unix stream socket on stdin is
    # left alone (libuv's stdio), so a cooperating host process at its other
    # end can pass the command any descriptor later, a socket of the host's
    # network included, and nothing guards that one (connect() is not even
    # notified without transparent mode; with it, sendto(MSG_FASTOPEN) on
    # an unconnected one needs no connect()). Whoever hands the command
    # sockets of the host's network has opened the network to it, as a proxy
    # of its own would; sluice cannot see descriptors passed after the start.
    out=$(cd "$W" && python3 inherit.py host scm -- "$SLUICE" run --settings "$T/inherit.json" -- \
        python3 inherit.py inside-scm SINK 2>&1)
    case $out in
    *"sink=0") echo "ok - [$WHO] a host socket passed later over a Unix stdin by a host process reaches nothing # TODO out of scope, now closed? ($out)" ;;
    *) echo "not ok - [$WHO] a host socket passed later over a Unix stdin by a cooperating host process reaches the host's network # TODO out of scope (the host process granted it): $out" ;;
    esac
    out=$(cd "$W" && python3 inherit.py host unix -- "$SLUICE" run --settings "$T/inherit.json" -- \
        python3 inherit.py inside SINK 2>&1)
    [ "$out" = "unix-ok rc=0 sink=0" ] && ok "stdin a connected Unix stream socket (libuv's stdio): runs as before" ||
        bad "stdin a Unix stream socketpair" "$out"
    out=$(cd "$W" && "$SLUICE" run -d --settings "$T/inherit.json" -- true 2>&1 </dev/null)
    grep -q 'inherit\|guard-connect' <<< "$out" && bad "connect() notified with no host socket inherited" "$out" ||
        ok "no host socket inherited: connect() is not notified (no --guard-connect)"
    fi

    # --- host-side -----------------------------------------------------------------------------------------
    python3 - <<'PY' && ok "host: no key added to the caller's session keyring" || bad "host: the sandbox added a key to the caller's session keyring"
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True); libc.syscall.restype = ctypes.c_long
r = libc.syscall(ctypes.c_long(249), b"user", b"sluice-from-sandbox", None, ctypes.c_long(0))
sys.exit(0 if r < 0 else 1)
PY
    rm -rf "$V"
}

# === issue 21: an inherited descriptor is usable only in its own mode =====================
# Each failed on main at 2f98e0d (the Landlock domain allowed writes on the
# files of fds 0-2 whatever their open mode, and /proc/self/fd/N reaches the
# host's writable mount of the file); the controls show what keeps working.
issue21() {
    local V=/var/tmp/sluice21-$TOKEN-$(id -u) out rc
    mkdir -p -m 755 "$V"

    # si NAME EXPECT SNIPPET: SNIPPET with a read-only FILE outside the
    # writable paths on stdin (`< FILE`); the safe outcome is EXPECT (as c)
    # and FILE unchanged afterwards
    si() {
        local name=$1 exp=$2 snip=$3
        printf 'original\n' > "$V/in"
        out=$(cd "$W" && "$SLUICE" run --settings "$CSET" -c "$snip" 2>&1 < "$V/in"); rc=$?
        if [ "$(cat "$V/in")" != original ]; then
            bad "$name" "FILE changed to '$(head -c 100 "$V/in")' (exit $rc)
$out"
        elif [ $exp = fail ] && { [ $rc -eq 0 ] || [ $rc -ge 125 ]; }; then
            bad "$name" "exit $rc (want a failure other than 125, 126, 127)
$out"
        elif [ $exp = ok ] && [ $rc -ne 0 ]; then
            bad "$name" "exit $rc (want 0)
$out"
        else ok "$name"; fi
    }
    si "stdin < FILE: echo x > /proc/self/fd/0"            fail "echo x > /proc/self/fd/0"
    si "stdin < FILE: echo x >> /dev/stdin"                 fail "echo x >> /dev/stdin"
    si "stdin < FILE: truncate with : > /proc/self/fd/0"    fail ": > /proc/self/fd/0"
    si "stdin < FILE: echo x > /dev/fd/0"                   fail "echo x > /dev/fd/0"
    si "stdin < FILE: open(/proc/self/fd/0, O_RDWR)"        fail "python3 -c 'import os; os.open(\"/proc/self/fd/0\", os.O_RDWR)'"
    si "stdin < FILE: open(/proc/self/fd/0, O_WRONLY|O_TRUNC)" fail "python3 -c 'import os; os.open(\"/proc/self/fd/0\", os.O_WRONLY | os.O_TRUNC)'"
    si "stdin < FILE: write through PID 1's copy (/proc/1/fd/0)" fail "echo x > /proc/1/fd/0"
    si "stdin < FILE: a direct write by its path"           fail "echo x > $V/in"
    si "stdin < FILE: reading it works (also by reopening)" ok "[ \"\$(cat)\" = original ] && [ \"\$(cat /proc/self/fd/0)\" = original ] && [ \"\$(cat /dev/stdin)\" = original ]"
    # a host FIFO given read-only on stdin cannot be opened for writing
    # (on 2f98e0d the rule for fd 0 allowed it), and the summary lists the
    # refusal (it left out every FIFO that was one of fds 0-2)
    mkfifo "$V/fifo"
    ( exec 3<>"$V/fifo"; sleep 8 ) & # a writer, so that `< FIFO` does not block
    local holder=$!
    out=$(cd "$W" && "$SLUICE" run --report-writes --settings "$CSET" -c "timeout 3 sh -c 'echo ESCAPED > $V/fifo'" 2>&1 < "$V/fifo"); rc=$?
    kill $holder 2>/dev/null; wait $holder 2>/dev/null
    if [ $rc -ne 0 ] && [ $rc -lt 124 ] && grep -q "blocked 1 write: $V/fifo (read-only)" <<< "$out"; then
        ok "stdin < host FIFO: opening the FIFO for writing is refused, and the summary lists it"
    else bad "stdin < host FIFO opened for writing" "exit $rc: $out"; fi
    # controls: what the caller opened for writing stays writable, also by path
    rm -f "$V/out" "$V/err"
    out=$(cd "$W" && "$SLUICE" run --settings "$CSET" -c 'echo o1 > /dev/stdout; echo o2 >> /proc/self/fd/1; echo e1 > /dev/stderr; echo e2 >> /dev/fd/2' </dev/null 2>"$V/err" >"$V/out"); rc=$?
    if [ $rc = 0 ] && [ "$(cat "$V/out")" = "o1
o2" ] && [ "$(grep -v '^sluice:' "$V/err")" = "e1
e2" ]; then
        ok "stdout > FILE and stderr > FILE outside the writable paths: reopening them for writing works"
    else bad "stdout/stderr files reopened for writing" "exit $rc; out: $(cat "$V/out"); err: $(cat "$V/err")"; fi
    printf 'original\n' > "$V/in"
    out=$(cd "$W" && "$SLUICE" run --settings "$CSET" -c 'echo rw > /proc/self/fd/0' 2>&1 <> "$V/in"); rc=$?
    [ $rc = 0 ] && [ "$(cat "$V/in")" = rw ] && ok "stdin <> FILE (opened read-write by the caller): reopening it for writing works" ||
        bad "stdin <> FILE reopened for writing" "exit $rc: $out; FILE: $(cat "$V/in")"
    out=$(cd "$W" && echo piped | "$SLUICE" run --settings "$CSET" -c 'cat; echo p1 > /proc/self/fd/1; echo p2 > /dev/stdout' 2>/dev/null | cat); rc=$?
    [ "$out" = "piped
p1
p2" ] && ok "pipes on stdin and stdout keep working, also reopened" || bad "pipes" "exit $rc: $out"
    if command -v script >/dev/null 2>&1; then
        out=$(cd "$W" && SHELL=/bin/sh script -qec "'$SLUICE' run --settings '$CSET' -c 'echo T1 > /proc/self/fd/0 && echo T2 > /dev/stdout && echo T3 > /dev/stderr && echo TTY-DONE'" /dev/null 2>&1 </dev/null | tr -d '\r')
        grep -q TTY-DONE <<< "$out" && ok "a terminal on stdin, stdout, stderr keeps working, also reopened" ||
            bad "terminal reopened" "$out"
    else skip "terminal reopened" "no script(1)"; fi

    # --- item 11: allowNestedUserNamespaces lets a nested sandbox run ---------------------------
    # (failed on 2f98e0d: as a user 'Failed to make / slave' (the Landlock
    # domain forbids mount), as root 'setting up uid map' (uid 0 maps only
    # with CAP_SETFCAP)); item 3 and the ptrace scoping hold under the key
    local cset=$CSET NP='--proc /proc'
    [ "$(id -u)" = 0 ] && NP='--bind /proc /proc' # as root /proc/sys stays read-only over it
    printf '{"allowNestedUserNamespaces": true, "network": {"allowedDomains": ["127.0.0.1:%s"], "transparent": %s}}' "$PA" "$TPV" > "$T/nest.json"
    CSET=$T/nest.json
    c "nested: bwrap --unshare-user inside (allowNestedUserNamespaces)" ok \
        "bwrap --ro-bind / / --dev /dev --unshare-user --unshare-pid --unshare-net true"
    c "nested: bwrap --unshare-user $NP inside, the command runs" ok \
        "[ \"\$(bwrap --ro-bind / / --dev /dev $NP --tmpfs /tmp --unshare-user --unshare-pid --unshare-net sh -c 'touch /tmp/x && echo NESTED')\" = NESTED ]"
    c "nested: unshare -r -n (root in a new user ns)"   ok "unshare -r -n true"
    c "nested: PTRACE_ATTACH to PID 1"                  probe "python3 probe.py ptrace-init"
    c "nested: open /proc/1/mem read-write"             probe "python3 probe.py mem-init"
    c "nested: write /etc"                              fail "echo x > /etc/sluice-escape"
    c "nested: still no network but the proxy"          probe "python3 probe.py tcp 127.0.0.2 $PA"
    si "nested: stdin < FILE: echo x > /proc/self/fd/0"  fail "echo x > /proc/self/fd/0"
    si "nested: stdin < FILE: : > /dev/stdin"            fail ": > /dev/stdin"
    si "nested: stdin < FILE: open(/proc/self/fd/0, O_RDWR)" fail "python3 -c 'import os; os.open(\"/proc/self/fd/0\", os.O_RDWR)'"
    si "nested: stdin < FILE: in a nested bwrap, echo x > /proc/self/fd/0" fail "bwrap --ro-bind / / --dev /dev --unshare-user --unshare-net sh -c 'echo x > /proc/self/fd/0'"
    si "nested: stdin < FILE: write through PID 1's copy" fail "echo x > /proc/1/fd/0"
    si "nested: stdin < FILE: reading it works, from its offset" ok "[ \"\$(cat)\" = original ] && [ \"\$(cat /proc/self/fd/0)\" = original ]"
    # on a kernel without Landlock scopes only seccomp guards PID 1: bwrap's
    # processes must not hold the host's descriptor of FILE (they get /dev/null)
    printf 'original\n' > "$V/in"
    (cd "$W" && exec "$SLUICE" run --settings "$CSET" -c "sleep 20.$TOKEN" < "$V/in" >/dev/null 2>&1) &
    local runpid=$! p holders=
    for i in $(seq $((200 * SLOW))); do pgrep -f "^sleep 20\.$TOKEN" >/dev/null && break; sleep 0.05; done
    for p in /proc/[0-9]*; do
        [ "$(readlink "$p/fd/0" 2>/dev/null)" = "$V/in" ] && holders="$holders $(cat "$p/comm" 2>/dev/null)"
    done
    pkill -f "^sleep 20\.$TOKEN"; wait $runpid 2>/dev/null
    [ "$holders" = " sluice" ] && ok "nested: stdin < FILE: only sluice on the host holds FILE's original descriptor (bwrap's init gets /dev/null)" ||
        bad "nested: who holds stdin FILE" "holders:$holders"
    printf 'l1\nl2\n' > "$V/in2"
    out=$(cd "$W" && { read -r _; "$SLUICE" run --settings "$CSET" -c cat 2>/dev/null; } < "$V/in2")
    [ "$out" = l2 ] && ok "nested: stdin < FILE, reopened, starts at the caller's offset" || bad "nested: stdin offset" "$out"
    out=$(cd "$W" && "$SLUICE" run --settings "$CSET" -c 'echo o1 > /dev/stdout; echo e1 >> /proc/self/fd/2' </dev/null 2>"$V/err" >"$V/out"); rc=$?
    [ $rc = 0 ] && [ "$(cat "$V/out")" = o1 ] && grep -q '^e1$' "$V/err" && grep -q 'allowNestedUserNamespaces: no Landlock filesystem rules' "$V/err" &&
        ok "nested: stdout/stderr files stay writable when reopened, and the run says what is off" ||
        bad "nested: stdout/stderr or the warning" "exit $rc; out: $(cat "$V/out"); err: $(cat "$V/err")"
    out=$("$SLUICE" explain --settings "$CSET" 2>&1)
    grep -q 'OFF with allowNestedUserNamespaces: the Landlock filesystem rules' <<< "$out" &&
        ok "nested: explain states which protection is off under the key" || bad "nested: explain" "$out"
    CSET=$cset
    rm -rf "$V"
}

# === rt-3 red team: issue 21 items 3 and 11, attacked from outside ======================
# Every way to change a file or directory handed over READ-ONLY on a
# descriptor (tests/e2e/run-helpers/rt3_fd.py: reopen by path, O_PATH,
# F_SETFL, mmap, truncate, chmod/chown/utimes/setxattr through the fd and
# the magic link, hard links, open_by_handle_at; and for a directory on
# stdin every *at() call), in default mode, with filesystem.allowWrite,
# and with allowNestedUserNamespaces (network.transparent under
# SLUICE_E2E_TRANSPARENT); then what a nested user namespace can do to the
# outer sandbox. Cases named "HOLE (rt-3)" failed on d805e96: see
# tests/e2e/rt-3-report.md for the reproducer and the cause of each.
rt3() {
    local V=/var/tmp/sluice-rt3-$TOKEN-$(id -u) cset=$CSET set fd st1 st2 line res what
    mkdir -p -m 755 "$V"
    mkdir -p "$V/aw" # a writable path next to the read-only FILE and DIR
    printf '{"network": {"allowedDomains": ["127.0.0.1:%s"], "transparent": %s}, "filesystem": {"allowWrite": ["%s", "%s/aw"]}}' \
        "$PA" "$TPV" "$W" "$V" > "$T/rt3aw.json"
    printf '{"allowNestedUserNamespaces": true, "network": {"allowedDomains": ["127.0.0.1:%s"], "transparent": %s}}' "$PA" "$TPV" > "$T/rt3nest.json"
    rt3_stat() { (cd "$1" && find . -printf '%p %y %m %s %u %g %T@ %C@\n' | LC_ALL=C sort; find . -type f -exec sha256sum {} +) 2>/dev/null; }
    # rt3_report TAG OUTFILE: one case per line of rt3_fd.py
    rt3_report() {
        [ -s "$2" ] || { bad "$1: rt3_fd.py printed nothing" "$(cat "$2" 2>/dev/null)"; return; }
        while IFS= read -r line; do
            what=${line#* }; what=${what%%:*}
            case $line in
            held*) ok "$1: $what (${line##*: })" ;;
            OPEN*) bad "HOLE (rt-3) $1: $what" "$line" ;;
            esac
        done < "$2"
    }
    for set in s rt3aw rt3nest; do
        CSET=$T/$set.json
        # a read-only regular FILE outside the writable paths on fd 0, 1 and 2
        for fd in 0 1 2; do
            rm -rf "$V/f" && mkdir -m 755 "$V/f" && printf 'original\n' > "$V/f/file" && chmod 644 "$V/f/file"
            touch -d '2020-01-01 00:00:00' "$V/f/file"
            st1=$(rt3_stat "$V/f"); rm -f "$W/rt3.out"
            case $fd in
            0) (cd "$W" && "$SLUICE" run --settings "$CSET" -c "python3 rt3_fd.py file 0 rt3.out" < "$V/f/file" >/dev/null 2>&1) ;;
            1) (cd "$W" && "$SLUICE" run --settings "$CSET" -c "python3 rt3_fd.py file 1 rt3.out" 1< "$V/f/file" </dev/null 2>/dev/null) ;;
            2) (cd "$W" && "$SLUICE" run --settings "$CSET" -c "python3 rt3_fd.py file 2 rt3.out" 2< "$V/f/file" </dev/null >/dev/null) ;;
            esac
            rt3_report "rt3 [$set] fd $fd < FILE" "$W/rt3.out"
            st2=$(rt3_stat "$V/f")
            [ "$st1" = "$st2" ] && ok "rt3 [$set] fd $fd < FILE: FILE byte-identical, metadata unchanged" ||
                bad "HOLE (rt-3) rt3 [$set] fd $fd < FILE: FILE or its metadata changed" "$(diff <(echo "$st1") <(echo "$st2"))"
            rm -f "$W/rt3-hardlink" "$W/rt3-link2"
        done
        # a read-only DIRECTORY outside the writable paths on stdin (and stdout)
        for fd in 0 1; do
            rm -rf "$V/d" && mkdir -m 755 "$V/d" && touch "$V/d/victim" "$V/d/victim2" "$V/d/victim3"
            touch -d '2020-01-01 00:00:00' "$V/d"
            st1=$(rt3_stat "$V/d"); rm -f "$W/rt3.out"
            case $fd in
            0) (cd "$W" && "$SLUICE" run --settings "$CSET" -c "exec 3<&0 </dev/null; python3 rt3_fd.py dir 3 rt3.out" < "$V/d" >/dev/null 2>&1) ;;
            1) (cd "$W" && "$SLUICE" run --settings "$CSET" -c "exec 3<&1 >/dev/null; python3 rt3_fd.py dir 3 rt3.out" 1< "$V/d" </dev/null 2>/dev/null) ;;
            esac
            rt3_report "rt3 [$set] fd $fd < DIR" "$W/rt3.out"
            st2=$(rt3_stat "$V/d")
            [ "$st1" = "$st2" ] && ok "rt3 [$set] fd $fd < DIR: the directory and its files unchanged" ||
                bad "HOLE (rt-3) rt3 [$set] fd $fd < DIR: the directory changed" "$(diff <(echo "$st1") <(echo "$st2"))"
        done
        # descriptors >= 3 the caller passes are closed before the command runs
        printf 'original\n' > "$V/f3"; : > "$V/f8"
        out=$(cd "$W" && "$SLUICE" run --settings "$CSET" -c 'for n in 5 7 8 9; do [ -e /proc/self/fd/$n ] && echo "OPEN fd $n"; done; exit 0' \
            7< "$V/f3" 8> "$V/f8" 9< "$V" 5<> "$V/f3" 2>&1 </dev/null)
        if ! grep -q OPEN <<< "$out" && [ "$(cat "$V/f3")" = original ]; then ok "rt3 [$set] fds 5, 7, 8, 9 of the caller are closed in the sandbox"
        else bad "rt3 [$set] fds >= 3 reach the command" "$out"; fi
    done

    # --- item 11: what a nested user namespace can do to the outer sandbox -----------------------
    CSET=$T/rt3nest.json
    printf 'original\n' > "$V/in"
    c "rt3 nested: control: unshare -r -m works under the key"          ok   "unshare -r -m true"
    c "rt3 nested: remount / read-write in a nested userns"              fail "unshare -r -m sh -c 'mount -o remount,rw / && touch /etc/rt3-escape'"
    c "rt3 nested: remount / read-write with bind"                       fail "unshare -r -m sh -c 'mount -o remount,bind,rw / && touch /etc/rt3-escape'"
    c "rt3 nested: remount .bashrc's read-only bind read-write"          fail "unshare -r -m sh -c 'mount -o remount,bind,rw \$PWD/.bashrc && echo x >> \$PWD/.bashrc'"
    c "rt3 nested: umount .bashrc's bind to reach the file below"        fail "unshare -r -m sh -c 'umount \$PWD/.bashrc && echo x >> \$PWD/.bashrc'"
    c "rt3 nested: umount -l .git, then write .git/hooks"                fail "unshare -r -m sh -c 'umount -l \$PWD/.git && mkdir -p \$PWD/.git/hooks && echo x > \$PWD/.git/hooks/pre-commit'"
    c "rt3 nested: bind a writable dir over .git/hooks, write through it" fail "unshare -r -m sh -c 'mkdir -p h && mount --bind h \$PWD/.git/hooks && echo x > \$PWD/.git/hooks/pre-commit' && grep -q x .git/hooks/pre-commit"
    c "rt3 nested: mount a procfs of the sandbox's pid namespace"         fail "unshare -r -m sh -c 'mount -t proc proc /tmp && ls /tmp/1/root/'"
    c "rt3 nested: a new pid ns's fresh /proc shows no outer process"     fail "unshare -r -m -p -f --mount-proc sh -c 'cat /proc/[0-9]*/comm | grep -qx -e bwrap -e sluice -e python3'"
    c "rt3 nested: write /proc/sys from a nested userns"                 fail "unshare -r sh -c 'echo 1 > /proc/sys/kernel/sysrq'"
    c "rt3 nested: setns into PID 1's mount namespace"                   fail "nsenter -t 1 -m true"
    c "rt3 nested: map uid 0 of the parent (become its root)"            fail "unshare --map-user=0 --map-group=0 sh -c 'touch /etc/rt3-escape'"
    c "rt3 nested: a new netns with its own lo reaches no host port"     fail "unshare -r -n sh -c 'ip link set lo up 2>/dev/null; python3 probe.py tcp 127.0.0.2 $PA | grep -q ^OPEN'"
    c "rt3 nested: PTRACE_ATTACH to PID 1 from a nested userns"          fail "unshare -r sh -c 'python3 probe.py ptrace-init | grep -q ^OPEN'"
    si() {
        local name=$1 snip=$2
        printf 'original\n' > "$V/in"; chmod 644 "$V/in"; touch -d '2020-01-01 00:00:00' "$V/in"
        st1=$(stat -c '%s %a %Y %Z' "$V/in")
        out=$(cd "$W" && "$SLUICE" run --settings "$CSET" -c "$snip" 2>&1 < "$V/in")
        if [ "$(cat "$V/in")" = original ] && [ "$(stat -c '%s %a %Y %Z' "$V/in")" = "$st1" ]; then ok "$name"
        else bad "$name" "FILE: '$(head -c 100 "$V/in")' $(stat -c '%s %a %Y %Z' "$V/in") (was $st1)
$out"; fi
    }
    si "rt3 nested: stdin copy: remount /tmp/.sluice-fd-0 read-write, write" "unshare -r -m sh -c 'f=\$(readlink /proc/self/fd/0); mount -o remount,bind,rw \"\$f\"; echo x > \"\$f\"'"
    si "rt3 nested: stdin copy: umount it, write what is below"             "unshare -r -m sh -c 'f=\$(readlink /proc/self/fd/0); umount \"\$f\"; echo x > \"\$f\"'"
    si "rt3 nested: stdin copy: truncate /proc/self/fd/0 in a nested userns" "unshare -r -m truncate -s 0 /proc/self/fd/0"
    si "rt3 nested: stdin copy: chmod /proc/self/fd/0 in a nested userns"    "unshare -r -m chmod 600 /proc/self/fd/0"
    si "rt3 nested: stdin copy: truncate -s 0 /proc/self/fd/0"            "truncate -s 0 /proc/self/fd/0"
    CSET=$cset
    si "rt3 default: stdin FILE: truncate -s 0 /proc/self/fd/0 (HOLE (rt-3) on d805e96, fixed)" "truncate -s 0 /proc/self/fd/0"
    si "rt3 default: stdin FILE: chmod 600 /proc/self/fd/0 (HOLE (rt-3) #5 on 2f98e0d, fixed)" "chmod 600 /proc/self/fd/0"
    si "rt3 default: stdin FILE: touch /proc/self/fd/0 (HOLE (rt-3) #5 on 2f98e0d, fixed)"     "touch /proc/self/fd/0"
    si "rt3 default: stdin FILE: python3 os.chmod(0, 0o600) (fchmod)"       "python3 -c 'import os; os.chmod(0, 0o600)'"
    # the re-bound copy is read through inner's own description: the launcher
    # moves the caller's offset to where the command left it
    printf 'l1\nl2\nl3\n' > "$V/in3"
    out=$(cd "$W" && { "$SLUICE" run --settings "$CSET" -- head -n1 2>/dev/null; "$SLUICE" run --settings "$CSET" -- head -n1 2>/dev/null; cat; } < "$V/in3" | tr '\n' ' ')
    [ "$out" = "l1 l2 l3 " ] && ok "rt3 default: stdin FILE re-bound: the next reader goes on where the command stopped" ||
        bad "rt3 default: stdin FILE: the caller's offset after the run" "$out"
    out=$(cd "$W" && { read -r _; "$SLUICE" run --settings "$CSET" -c 'head -n1; readlink /proc/self/fd/0' 2>/dev/null; cat; } < "$V/in3" | tr '\n' ' ')
    [ "$out" = "l2 /tmp/.sluice-fd-0 l3 " ] && ok "rt3 default: stdin FILE is re-bound read-only and read from the caller's offset" ||
        bad "rt3 default: stdin FILE: re-bind or offset" "$out"
    # a file linked nowhere (deleted) cannot be bound: with Landlock's file
    # rules on it is handed over as it is, and the command runs
    printf 'gone\n' > "$V/del"
    out=$(cd "$W" && { rm -f "$V/del"; "$SLUICE" run --settings "$CSET" -- cat 2>&1; } < "$V/del")
    [ "$out" = gone ] && ok "rt3 default: stdin FILE deleted before the run: the command reads it" ||
        bad "rt3 default: stdin FILE deleted before the run" "$out"

    # rt-3 hole 6: as root the command (uid 0, or uid 1000 under the key) is
    # host root in the writable directory; no route may leave a set-user-ID
    # or set-group-ID program there (as a user it would be one of that user,
    # harmless, and refused all the same: one rule set)
    cat > "$W/rt3_suid.py" <<'PY'
import ctypes, errno, os, shutil, subprocess, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def tried(what, fn):
    try:
        fn()
        print("done " + what)
    except (OSError, subprocess.CalledProcessError) as e:
        print("refused " + what + ": " + str(e))
def creat_tmpfile(mode):
    fd = os.open(".", os.O_TMPFILE | os.O_WRONLY, mode)
    os.link("/proc/self/fd/%d" % fd, "tmpfile")
def openat2():
    how = (ctypes.c_uint64 * 3)(os.O_WRONLY | os.O_CREAT, 0o4755, 0)
    r = libc.syscall(437, -100, b"openat2", ctypes.byref(how), ctypes.c_size_t(24))
    if r < 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
def sh(cmd):
    subprocess.run(cmd, shell=True, check=True, stderr=subprocess.DEVNULL)
src = next((p for p in ("/usr/bin/passwd", "/usr/bin/su", "/bin/su", "/usr/bin/mount")
            if os.path.exists(p) and os.stat(p).st_mode & 0o4000), None)
os.makedirs(sys.argv[1], exist_ok=True)
os.chdir(sys.argv[1])
tried("chmod 4755", lambda: sh("cp /bin/true a && chmod 4755 a"))
tried("chmod 2755", lambda: sh("cp /bin/true b && chmod 2755 b"))
tried("chmod u+s,g+s", lambda: sh("cp /bin/true c && chmod u+s,g+s c"))
tried("install -m 4755", lambda: sh("install -m 4755 /bin/true d"))
tried("open(O_CREAT, 04755)", lambda: os.close(os.open("e", os.O_CREAT | os.O_WRONLY, 0o4755)))
tried("open(O_CREAT, 02755)", lambda: os.close(os.open("e2", os.O_CREAT | os.O_WRONLY, 0o2755)))
tried("open(O_TMPFILE, 04755) + link", lambda: creat_tmpfile(0o4755))
tried("mknod(S_IFREG|06755)", lambda: os.mknod("f", 0o100000 | 0o6755))
tried("openat2(O_CREAT, 04755)", openat2)
tried("fchmod 4755", lambda: (open("g", "w").close(), os.chmod(os.open("g", os.O_RDONLY), 0o4755)))
if src is not None:
    tried("cp -p " + src, lambda: sh("cp -p %s h" % src))
    tried("tar -p of " + src, lambda: sh("tar -C %s -cf - %s | tar -xpf -" % (os.path.dirname(src), os.path.basename(src))))
    tried("ln " + src, lambda: os.link(src, "i"))
    tried("rename " + src, lambda: os.rename(src, "j"))
PY
    for set in s rt3nest; do
        rm -rf "$W/rt3-m"
        out=$(cd "$W" && "$SLUICE" run --settings "$T/$set.json" -c 'python3 rt3_suid.py rt3-m' </dev/null 2>&1)
        left=$(find "$W/rt3-m" -perm /6000 2>/dev/null)
        if [ -z "$left" ] && grep -q 'refused chmod 4755' <<< "$out" && [ -e "$W/rt3-m/a" ]; then
            ok "rt3 [$set]: no set-user-ID/set-group-ID program can be left in the writable directory (chmod, fchmod, install, open, O_TMPFILE, mknod, openat2, cp -p, tar -p, ln, rename)"
        else
            bad "rt3 [$set]: the command leaves a set-user-ID/set-group-ID program in the writable directory" "$(ls -ln $left 2>&1)
$out"
        fi
        grep -q '^refused openat2(O_CREAT, 04755): \[Errno 38\]' <<< "$out" && ok "rt3 [$set]: openat2 fails with ENOSYS" ||
            bad "rt3 [$set]: openat2 does not fail with ENOSYS" "$out"
        # what must keep working: plain modes, and S_ISGID on a new directory
        if out=$(cd "$W" && "$SLUICE" run --settings "$T/$set.json" -c \
            "cp /bin/true rt3-plain && chmod 755 rt3-plain && python3 -c 'import os; os.mkdir(\"rt3-sgid-dir\", 0o2775)'" </dev/null 2>&1) &&
            [ -d "$W/rt3-sgid-dir" ]; then ok "rt3 [$set]: chmod 755 and mkdir(02775) still work"
        else bad "rt3 [$set]: chmod 755 or mkdir(02775) fails" "$out"; fi
        rm -rf "$W/rt3-plain" "$W/rt3-sgid-dir"
        rm -rf "$W/rt3-m"
    done
    rm -f "$W/rt3_suid.py"
    # === rt-6: the re-bound stdio file and the hand-off channel back to the host ===
    # rt6_run NAME SNIPPET EXPECT-OUTPUT: stdin is $V/in6 (l1 l2 l3), mode
    # 644, old times, no xattr; the file must be unchanged after the run
    rt6_file() { printf 'l1\nl2\nl3\n' > "$V/in6"; chmod 644 "$V/in6"; touch -d '2020-01-01 00:00:00' "$V/in6"; }
    rt6_same() { [ "$(cat "$V/in6")" = "$(printf 'l1\nl2\nl3')" ] && [ "$(stat -c '%s %a %Y %Z' "$V/in6")" = "$st1" ] &&
        python3 -c 'import os, sys; sys.exit(1 if os.listxattr(sys.argv[1]) else 0)' "$V/in6"; }
    for set in s rt3nest; do
        CSET=$T/$set.json
        rt6_file; st1=$(stat -c '%s %a %Y %Z' "$V/in6")
        out=$(cd "$W" && "$SLUICE" run --settings "$CSET" -c "python3 -c 'import os
for f in (lambda: os.setxattr(0, \"user.rt6\", b\"1\"), lambda: os.setxattr(\"/proc/self/fd/0\", \"user.rt6\", b\"1\"),
          lambda: os.utime(0, (0, 0)), lambda: os.chmod(\"/proc/self/fd/0\", 0o600), lambda: os.chown(0, 0, 0)):
    try: f(); print(\"OPEN\")
    except OSError as e: pass'" 2>&1 < "$V/in6")
        if rt6_same && ! grep -q OPEN <<< "$out"; then ok "rt6 [$set]: setxattr, utime, chmod, chown of the read-only stdin FILE all fail"
        else bad "HOLE (rt-6) rt6 [$set]: the read-only stdin FILE's metadata changed" "$(stat -c '%s %a %Y %Z' "$V/in6") (was $st1) $out"; fi
        # the hand-off socket (inner's fd) must not reach the command, nor
        # bwrap's init's descriptors
        rt6_file; st1=$(stat -c '%s %a %Y %Z' "$V/in6")
        out=$(cd "$W" && "$SLUICE" run --settings "$CSET" -c 'for f in /proc/self/fd/*; do case $(readlink "$f") in socket:*) echo "OPEN $f";; esac; done
            ls -l /proc/1/fd/ 2>/dev/null | grep socket: && echo OPEN-pid1; python3 -c "
import os, socket
for n in range(3, 64):
    try: s = socket.socket(fileno=os.dup(n)); print(\"OPEN socket\", n)
    except OSError: pass"; true' 2>&1 < "$V/in6")
        if rt6_same && ! grep -q OPEN <<< "$out"; then ok "rt6 [$set]: with a re-bound stdin FILE the command holds no socket (the hand-off one stays inner's)"
        else bad "HOLE (rt-6) rt6 [$set]: the command holds a socket" "$out"; fi
        # it cannot remove, rename, unmount or write the bind, nor make the
        # host move anything but the caller's offset: a huge one is its own
        rt6_file; st1=$(stat -c '%s %a %Y %Z' "$V/in6")
        out=$(cd "$W" && { "$SLUICE" run --settings "$CSET" -c '! rm -f /tmp/.sluice-fd-0 && ! mv /tmp/.sluice-fd-0 /tmp/x && ! umount /tmp/.sluice-fd-0 &&
            ! sh -c "echo x > /tmp/.sluice-fd-0" && ! sh -c ": > /tmp/.sluice-fd-0" && python3 -c "import os; os.lseek(0, 1 << 40, 0)"' 2>/dev/null
            echo "rc=$?"; python3 -c 'import os; print(os.lseek(0, 0, 1))'; cat; } < "$V/in6" | tr '\n' ' ')
        if rt6_same && [ "$out" = "rc=0 $((1 << 40)) " ]; then ok "rt6 [$set]: the bind of the stdin FILE cannot be removed, renamed, unmounted or written; a seek past its end only moves the caller's offset"
        else bad "HOLE (rt-6) rt6 [$set]: the bind of the stdin FILE or the offset" "$out"; fi
        # one description on 0 and 2 (2<&0) is re-bound as two: the copy the
        # command did not read must not put the caller's offset back
        rt6_file
        out=$(cd "$W" && { "$SLUICE" run --settings "$CSET" -- head -n1 2<&0; cat; } < "$V/in6" | tr '\n' ' ')
        [ "$out" = "l1 l2 l3 " ] && ok "rt6 [$set]: stdin FILE also on fd 2 (2<&0): the next reader goes on after the command (HOLE (rt-6) on ea420bd, fixed)" ||
            bad "HOLE (rt-6) rt6 [$set]: stdin FILE also on fd 2: the caller's offset went back" "$out"
    done
    CSET=$cset
    # names with a newline and ':', a FIFO, /dev/null, a memfd, a directory
    f=$V/$'in a:b\nc'; printf 'odd\n' > "$f"
    out=$(cd "$W" && "$SLUICE" run --settings "$CSET" -c 'cat; readlink /proc/self/fd/0' 2>&1 < "$f" | tr '\n' ' ')
    [ "$out" = "odd /tmp/.sluice-fd-0 " ] && ok "rt6: a stdin FILE named with a newline and ':' is re-bound and read" || bad "rt6: stdin FILE with an odd name" "$out"
    mkfifo "$V/ff6"; (printf 'fifo\n' > "$V/ff6" &)
    out=$(cd "$W" && "$SLUICE" run --settings "$CSET" -c 'cat' 2>&1 < "$V/ff6")
    [ "$out" = fifo ] && ok "rt6: a FIFO on stdin is read (not re-bound)" || bad "rt6: a FIFO on stdin" "$out"
    out=$(cd "$W" && "$SLUICE" run --settings "$CSET" -c 'cat; echo ok' 2>&1 < /dev/null)
    [ "$out" = ok ] && ok "rt6: /dev/null on stdin" || bad "rt6: /dev/null on stdin" "$out"
    out=$(cd "$W" && python3 -c 'import os, subprocess, sys
m = os.memfd_create("rt6"); os.write(m, b"memfd\n"); os.lseek(m, 0, 0)
sys.exit(subprocess.run(sys.argv[1:], stdin=m).returncode)' "$SLUICE" run --settings "$CSET" -c 'cat' 2>&1)
    [ "$out" = memfd ] && ok "rt6: a memfd on stdin is read" || bad "rt6: a memfd on stdin" "$out"
    mkdir -p "$V/d6"; : > "$V/d6/keep"
    out=$(cd "$W" && "$SLUICE" run --settings "$CSET" -c 'ls /proc/self/fd/0/; rm -f /proc/self/fd/0/keep; touch /proc/self/fd/0/new; true' 2>/dev/null < "$V/d6")
    [ "$out" = keep ] && [ -e "$V/d6/keep" ] && [ ! -e "$V/d6/new" ] && ok "rt6: a directory on stdin is listed, and stays as it was" ||
        bad "rt6: a directory on stdin" "$out; $(ls "$V/d6")"
    # parallel runs each read their own file at the same /tmp/.sluice-fd-0
    printf 'A\n' > "$V/pa"; printf 'B\n' > "$V/pb"
    (cd "$W" && "$SLUICE" run --settings "$CSET" -c 'sleep 1; cat' < "$V/pa" > "$V/pa.out" 2>&1) & pa=$!
    (cd "$W" && "$SLUICE" run --settings "$CSET" -c 'sleep 1; cat' < "$V/pb" > "$V/pb.out" 2>&1) & pb=$!
    wait "$pa" "$pb"
    [ "$(cat "$V/pa.out")" = A ] && [ "$(cat "$V/pb.out")" = B ] && ok "rt6: two runs at once each read their own stdin FILE" ||
        bad "rt6: parallel runs" "$(cat "$V/pa.out" "$V/pb.out")"
    # allowWrite /tmp binds the host's /tmp over the private one: bwrap then
    # makes the mount point /tmp/.sluice-fd-0 in the HOST's /tmp, and leaves
    # it there (a later run's command can plant a directory or symlink at
    # it). Root only: a fresh /tmp in a mount namespace of its own.
    if [ "$(id -u)" = 0 ]; then
        printf '{"filesystem": {"allowWrite": ["/tmp"]}, "network": {"transparent": %s}}' "$TPV" > "$V/tmp6.json"
        out=$(cd "$V" && HOME=$V unshare -m sh -c 'mount --make-rprivate / && mount -t tmpfs rt6 /tmp && chmod 1777 /tmp &&
            "$1" run --settings "$2/tmp6.json" -c "cat" < "$2/pa" && ls -A /tmp | grep "^\.sluice-fd"' sh "$SLUICE" "$V" 2>&1)
        # known gap (rt-6 2, not counted): recorded for the closing note
        if [ "$out" = A ]; then
            echo "ok - [$WHO] rt6: allowWrite /tmp: no /tmp/.sluice-fd-0 is left in the host's /tmp # TODO was a known gap: now closed, make it a case"
        else
            echo "not ok - [$WHO] rt6: allowWrite /tmp: the run leaves its mount point in the host's /tmp # TODO known gap, still open"
        fi
    fi

    # as root the command (uid 0, or uid 1000 under the key) is host root in
    # the writable directory: can it leave a set-user-ID root program there?
    if [ "$(id -u)" = 0 ]; then
        for set in s rt3nest; do
            rm -f "$W/rt3-suid" "$W/rt3-sgid"
            (cd "$W" && "$SLUICE" run --settings "$T/$set.json" -c 'cp /bin/true rt3-suid; chmod 4755 rt3-suid; cp /bin/true rt3-sgid; chmod 2755 rt3-sgid' </dev/null >/dev/null 2>&1)
            if [ -u "$W/rt3-suid" ] || [ -g "$W/rt3-sgid" ]; then
                bad "HOLE (rt-3) rt3 [$set] as root: the command leaves a set-user-ID/set-group-ID root program in the writable directory" "$(ls -ln "$W/rt3-suid" "$W/rt3-sgid")"
            else ok "rt3 [$set] as root: no set-user-ID root program can be left in the writable directory"; fi
            rm -f "$W/rt3-suid" "$W/rt3-sgid"
        done
    fi
    # the key's warning, and without the key nothing changed
    out=$(cd "$W" && "$SLUICE" run --settings "$T/rt3nest.json" -c true 2>&1 </dev/null)
    grep -q 'allowNestedUserNamespaces: no Landlock filesystem rules' <<< "$out" && ok "rt3 nested: the run prints its warning" || bad "rt3 nested: no warning" "$out"
    c "rt3 default: nested bwrap --unshare-user still refused"  fail "bwrap --ro-bind / / --dev /dev --unshare-user --unshare-net true"
    c "rt3 default: unshare -r still refused"                    fail "unshare -r true"
    mkfifo "$V/ff" # ENXIO (no reader) means the open passed the permission checks
    c "rt3 default: a host FIFO under the read-only root cannot be opened for writing" fail \
        "python3 -c 'import os, errno
try: os.open(\"$V/ff\", os.O_WRONLY | os.O_NONBLOCK)
except OSError as e: raise SystemExit(0 if e.errno == errno.ENXIO else 1)'"
    rm -rf "$V" "$W/rt3.out"
}

# rt-7 (red team of issue 22, "Make room before TLS"): the one server of the
# seccomp listener (run/notify.c) and its routes to transparent mode
# (run/tp_call.c) and the write report (run/fswrite.c), in every mode
# combination that has a listener: the write report alone, transparent mode
# (+ the report), a guarded run (a host TCP socket on stdin, inner
# --guard-connect; + the report), all three. The attacker is a small C
# program (run-helpers/rt7_notify.c, compiled here) that makes the calls on
# the native, x32 and i386 ABIs (i386: SKIP where int $0x80 is off). The
# judges: each call's result equals the same call's result outside sluice
# (a write to a read-only path: EROFS; never the fallback's EPERM), no
# connect() succeeds to a host listener no rule allows and that listener
# accepts nothing, no thread hangs (a watchdog in the attacker), and the
# write report counts every refused write. SLUICE_E2E_ONLY=rt7 runs only
# this group.
rt7() {
    local V=/var/tmp/sluice-rt7-$TOKEN-$(id -u) PD m q set stdin out base line tag got want n acc rc cmd
    local -A modes
    if ! command -v gcc >/dev/null 2>&1; then skip "rt7: the notification server" "no gcc to build the attacker"; return; fi
    mkdir -p -m 755 "$V" && mkdir -p "$V/rw" "$V/dw" "$V/base/rw" && echo x > "$V/dw/f" && echo x > "$V/base/ro"
    if ! gcc -O1 -pthread -o "$V/rt7_notify" "$HERE/run-helpers/rt7_notify.c" 2>"$T/rt7-cc.err" ||
        ! gcc -O1 -shared -fPIC -o "$V/nosync.so" "$HERE/run-helpers/rt7_nosync.c" 2>>"$T/rt7-cc.err"; then
        bad "rt7: the attacker did not build" "$(cat "$T/rt7-cc.err")"; return
    fi
    # a host listener no rule allows: every connection it accepts is a hole
    PD=$(free_port)
    : > "$T/rt7-acc"
    python3 -c 'import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(128); print("ready", flush=True)
while True:
    c, a = s.accept(); open(sys.argv[2], "a").write("accepted %r\n" % (a,)); c.close()' "$PD" "$T/rt7-acc" \
        > "$T/rt7-listen.out" 2>&1 &
    PIDS+=($!)
    wait_for "$T/rt7-listen.out" ready 5 || { bad "rt7: listener" "$(cat "$T/rt7-listen.out")"; return; }
    for m in false true; do
        printf '{"network": {"allowedDomains": ["127.0.0.1:%s"], "transparent": %s}, "filesystem": {"denyWrite": ["%s/dw"]}}\n' \
            "$PA" "$m" "$V" > "$T/rt7-$m.json"
    done
    # MODE -> "report settings stdin": --report-writes turns the write
    # report on (off by default since issue 25; -q keeps it off); stdin
    # "tcp" is a connection to the allowed origin (a guarded run)
    modes=([report]="--report-writes false null" [transparent+report]="--report-writes true null"
           [transparent]="-q true null" [guard]="-q false tcp" [guard+report]="--report-writes false tcp"
           [all three]="--report-writes true tcp")
    # rt7_run MODE ARGS...: the attacker under sluice in MODE; output in $out, exit in $rc
    rt7_run() {
        local mode=$1 q s i
        shift
        read -r q s i <<< "${modes[$mode]}"
        if [ "$i" = tcp ]; then
            out=$(cd "$V" && "$SLUICE" run $q --settings "$T/rt7-$s.json" -- ./rt7_notify "$@" 2>&1 < "/dev/tcp/127.0.0.1/$PA")
        else
            out=$(cd "$V" && "$SLUICE" run $q --settings "$T/rt7-$s.json" -- ./rt7_notify "$@" 2>&1 </dev/null)
        fi
        rc=$?
    }
    # the guarded modes are guarded (a host TCP socket on stdin is seen)
    out=$(cd "$V" && "$SLUICE" run -d -q --settings "$T/rt7-false.json" -- true 2>&1 < "/dev/tcp/127.0.0.1/$PA")
    grep -q 'connect() is answered by sluice' <<< "$out" && ok "rt7: a TCP socket on stdin makes a guarded run" ||
        bad "rt7: the guarded run is not guarded" "$out"

    # 1. each call on each ABI, once, in each mode, against its result outside sluice
    base=$(cd "$V/base" && ../rt7_notify abi rw ro "$(free_port)" 2>&1) # a port nothing listens on
    for m in report transparent+report transparent guard guard+report "all three"; do
        rt7_run "$m" abi rw dw/f "$PD"
        n=0
        while read -r tag got; do
            [ -n "$tag" ] || continue
            case $tag in sluice:*) continue ;; esac
            want=$(awk -v t="$tag" '$1 == t { print $2 }' <<< "$base")
            case $tag in
            open-ro-*) [ "$want" = ok ] && want=EROFS ;;
            # nothing listens on PD in the sandbox's namespace, and no rule
            # allows it: refused (ENOSYS: an ABI this kernel lacks, when
            # the kernel runs the call itself)
            connect-*) [ "$want" = ENOSYS ] && [ "$got" = ENOSYS ] || want=ECONNREFUSED ;;
            esac
            if [ "$got" = SKIP ]; then continue; fi
            n=$((n + 1))
            if [ "$got" = ok ] && [ "${tag%%-*}" = connect ]; then
                bad "HOLE (rt-7) rt7 [$m]: $tag to a port no rule allows succeeded" "$out"
                n=-999
            elif [ "$got" != "$want" ]; then
                bad "HOLE (rt-7) rt7 [$m]: $tag answered $got, outside sluice $want (the wrong module or the fallback answered it)" "$out"
                n=-999
            fi
        done <<< "$out"
        [ $rc = 0 ] && [ $n -ge 9 ] && ok "rt7 [$m]: $n calls on the native, x32 (and i386) ABIs answered as outside sluice" ||
            { [ $n -ge 0 ] && bad "rt7 [$m]: abi run (exit $rc, $n calls)" "$out"; }
        case $m in *report* | "all three")
            grep -q "^sluice: blocked [0-9]* writes\?: $V/dw/f (denyWrite)" <<< "$out" &&
                ok "rt7 [$m]: the refused write is reported" || bad "rt7 [$m]: the refused write is not reported" "$out" ;;
        esac
    done

    # 2. a flood: 150 threads x 20 rounds of connect(), a refused open, a
    # create and an unlink, getpeername() (more callers waiting at once than
    # the server's batch of 64); nothing hangs, every answer is the
    # kernel's or the policy's, every refused write is counted
    for m in report transparent+report "all three" guard; do
        rt7_run "$m" flood 150 20 rw dw/f "$PD"
        if [ $rc = 0 ] && grep -q '^threads 150$' <<< "$out" && ! grep -q HUNG <<< "$out" &&
            [ -z "$(grep -E '^connect' <<< "$out" | grep -v '^connect[^ ]* ECONNREFUSED ')" ] &&
            [ "$(grep -cE '^(open-ro EROFS|open-rw ok|unlink ok|getpeername ENOTCONN) 3000$' <<< "$out")" = 4 ] &&
            [ "$(grep -cE '^(open-ro|open-rw|unlink|getpeername) ' <<< "$out")" = 4 ]; then
            ok "rt7 [$m]: 150 threads x 20 rounds of each call: all answered, none by the wrong module"
        else
            bad "HOLE (rt-7) rt7 [$m]: flood (exit $rc)" "$out"
        fi
        case $m in *report* | "all three")
            grep -q "^sluice: blocked 3000 writes: $V/dw/f (denyWrite) ×3000$" <<< "$out" &&
                ok "rt7 [$m]: flood: all 3000 refused writes reported" || bad "rt7 [$m]: flood: the write count" "$(grep '^sluice:' <<< "$out")" ;;
        esac
    done

    # 3. callers that die: 60 children with 8 threads each in the same
    # calls, SIGKILLed 0-2 ms in; then each call once more, answered
    for m in transparent+report "all three"; do
        rt7_run "$m" die 60 rw dw/f "$PD"
        if [ $rc = 0 ] && grep -q '^killed 60$' <<< "$out" && ! grep -q HUNG <<< "$out" &&
            [ -z "$(grep -E '^connect' <<< "$out" | grep -v '^connect[^ ]* ECONNREFUSED ')" ] &&
            [ "$(grep -cE '^(open-ro EROFS|open-rw ok|unlink ok|getpeername ENOTCONN) 12$' <<< "$out")" = 4 ]; then
            ok "rt7 [$m]: 60 callers killed mid-call; the server still answers every call after them"
        else
            bad "HOLE (rt-7) rt7 [$m]: callers that die (exit $rc)" "$out"
        fi
    done

    # 4. TOCTOU: one thread dup2()s a host socket (sluice's, or the inherited
    # one) and a fresh one onto a number and flips the address (allowed,
    # refused, AF_UNSPEC) while another connect()s it and tries
    # sendto(MSG_FASTOPEN) to the refused port
    for m in transparent+report "all three" guard; do
        rt7_run "$m" swap 3 "$PA" "$PD"
        if [ $rc = 0 ] && grep -q '^swap tries=' <<< "$out" && ! grep -q HUNG <<< "$out" &&
            ! grep -qE '^(unspec-host|fastopen-host) ok' <<< "$out" && grep -q '^unspec-host ' <<< "$out"; then
            ok "rt7 [$m]: a host socket and the address swapped under connect(): $(grep '^swap' <<< "$out")"
        else
            bad "HOLE (rt-7) rt7 [$m]: swap under connect() (exit $rc)" "$out"
        fi
    done

    # 5. calls after the command is gone: a daemon (setsid) keeps calling
    # connect() and open() after the command exits; it must be gone with
    # the run, and no call of it may have got through
    rm -f "$V/bg.log"
    out=$(cd "$V" && "$SLUICE" run --settings "$T/rt7-true.json" -- sh -c \
        'setsid sh -c "i=0; while [ \$i -lt 200 ]; do ./rt7_notify abi rw dw/f '"$PD"' >> bg.log 2>&1; i=\$((i+1)); done" </dev/null >/dev/null 2>&1 & sleep 0.3; exit 0' 2>&1 </dev/null)
    sleep 1
    n=$(wc -l < "$V/bg.log" 2>/dev/null || echo 0)
    sleep 1
    if [ "$(wc -l < "$V/bg.log" 2>/dev/null || echo 0)" = "$n" ] && ! grep -qE '^connect-[^ ]* ok' "$V/bg.log" 2>/dev/null &&
        ! pgrep -f "rt7_notify abi rw dw/f $PD" >/dev/null; then
        ok "rt7: a daemon left calling after the command exits is gone with the run ($n lines before)"
    else
        bad "HOLE (rt-7) rt7: a daemon outlived the run or got a call through" "$(tail -5 "$V/bg.log"; pgrep -af rt7_notify)"
    fi

    # 6. SYNC_WAKE_UP refused (a kernel before 6.6): an LD_PRELOAD makes
    # SECCOMP_IOCTL_NOTIF_SET_FLAGS fail with EINVAL; every call still answered
    rm -f "$V/nosync.log"
    out=$(cd "$V" && RT7_NOSYNC_LOG=$V/nosync.log LD_PRELOAD=$V/nosync.so "$SLUICE" run --settings "$T/rt7-true.json" -- \
        ./rt7_notify flood 16 20 rw dw/f "$PD" 2>&1 < "/dev/tcp/127.0.0.1/$PA"); rc=$?
    if [ -s "$V/nosync.log" ] && [ $rc = 0 ] && ! grep -q HUNG <<< "$out" && ! grep -q '^connect ok' <<< "$out" &&
        [ "$(grep -cE '^(open-ro EROFS|open-rw ok|unlink ok|getpeername ENOTCONN) 320$' <<< "$out")" = 4 ]; then
        ok "rt7: SYNC_WAKE_UP refused (EINVAL, as before Linux 6.6): the server answers as before"
    else
        bad "rt7: without SYNC_WAKE_UP (exit $rc, shim hit: $(wc -l < "$V/nosync.log" 2>/dev/null))" "$out"
    fi

    acc=$(cat "$T/rt7-acc")
    [ -z "$acc" ] && ok "rt7: the host listener no rule allows accepted nothing" ||
        bad "HOLE (rt-7) rt7: connections reached the host listener no rule allows" "$acc"
    rm -rf "$V"
}

# === rt-8 (issue 25, start-up at the floor) =========================================================
# bwrap is started with posix_spawn, the seccomp filters are compiled on the
# host and sent to inner ('F'), Landlock skips the mounts mountinfo says are
# read-only, the reaper hears bwrap's pid at once. Probes in
# run-helpers/rt8_probe.py (descriptors, signals, umask and rlimits, mount
# calls and writes to read-only mounts), rt8_handoff.py (`sluice inner`
# driven with bad 'F' messages) and rt8_noexport.c (an LD_PRELOAD that makes
# the launcher fail to compile the filters: inner builds its own). Each
# case passes when the boundary holds. SLUICE_E2E_ONLY=rt8 runs only this
# group.
rt8() {
    local V=/var/tmp/sluice-rt8-$TOKEN-$(id -u) m s out rc host in pr a b v d pid pids K2 i n
    mkdir -p -m 755 "$V"
    cp "$HERE/run-helpers/rt8_probe.py" "$HERE/run-helpers/rt8_handoff.py" "$HERE/run-helpers/probe.py" "$V/"
    cat > "$V/plain.json" <<JSON
{"network": {"allowedDomains": ["127.0.0.1:$PA"]}}
JSON
    cat > "$V/tp.json" <<JSON
{"network": {"allowedDomains": ["127.0.0.1:$PA"], "transparent": true}}
JSON
    cat > "$V/lb.json" <<JSON
{"network": {"allowedDomains": ["127.0.0.1:$PA"], "allowLocalBinding": true}}
JSON
    # rt8_run MODE CMD...: CMD under sluice in MODE (plain, transparent,
    # control: --control-fd 5, sock: a TCP socket on stdin, a guarded run);
    # output in $out, exit in $rc
    rt8_run() {
        local mode=$1; shift
        case $mode in
        plain) out=$(cd "$V" && "$SLUICE" run -q --settings "$V/plain.json" -- "$@" 2>&1 </dev/null) ;;
        transparent) out=$(cd "$V" && "$SLUICE" run -q --settings "$V/tp.json" -- "$@" 2>&1 </dev/null) ;;
        control) out=$(cd "$V" && "$SLUICE" run -q --settings "$V/plain.json" --control-fd 5 -- "$@" 2>&1 </dev/null 5</dev/null) ;;
        sock) out=$(cd "$V" && "$SLUICE" run -q --settings "$V/plain.json" -- "$@" 2>&1 < "/dev/tcp/127.0.0.1/$PA") ;;
        extrafds) # the caller's own descriptors 7 (bwrap's --info-fd number), 8, 9
            out=$(cd "$V" && "$SLUICE" run -q --settings "$V/plain.json" -- "$@" 2>&1 </dev/null 7<>/dev/null 8>>"$V/x8" 9</etc/hostname) ;;
        rofile) # a read-only regular file on stdin (bwrap re-binds it: SB_STDIO_RO_PASS)
            echo orig > "$V/ro.txt"
            out=$(cd "$V" && "$SLUICE" run -q --settings "$V/plain.json" -- "$@" 2>&1 <"$V/ro.txt") ;;
        callersig) # a caller that blocks TERM, CHLD, INT, USR1 and ignores HUP,
                   # INT, TERM, PIPE, USR2 (main's launcher hung here: libuv
                   # never heard SIGCHLD; the pidfd watch does not need it)
            out=$(cd "$V" && timeout -s KILL 60 python3 -c '
import os, signal, sys
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGCHLD, signal.SIGINT, signal.SIGUSR1})
for s in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM, signal.SIGPIPE, signal.SIGUSR2):
    signal.signal(s, signal.SIG_IGN)
os.execvp(sys.argv[1], sys.argv[1:])' "$SLUICE" run -q --settings "$V/plain.json" -- "$@" 2>&1 </dev/null) ;;
        esac
        rc=$?
    }

    # --- what the command inherits: descriptors, signals (a HOLE on s29-start,
    # fixed in run/spawn.c: glibc's 32 and 33 were ignored), umask, rlimits
    for m in plain transparent control sock extrafds rofile callersig; do
        rt8_run $m python3 rt8_probe.py fds
        [ $rc = 0 ] && ok "rt8 [$m]: the command holds fds 0-2 only; no sandbox process holds a socket, pipe or pidfd above 2" ||
            bad "HOLE (rt-8) rt8 [$m]: descriptors beyond 0-2 reach the sandbox" "$out"
        rt8_run $m python3 rt8_probe.py signals
        [ $rc = 0 ] && ok "rt8 [$m]: no signal ignored or blocked in the command; PID 1 blocks SIGCHLD only" ||
            bad "HOLE (rt-8) rt8 [$m]: signal dispositions inherited by the sandbox" "$out"
    done
    host=$(cd "$V" && umask 027 && python3 rt8_probe.py state | grep -v RLIMIT_NPROC)
    out=$(cd "$V" && umask 027 && "$SLUICE" run -q --settings "$V/plain.json" -- python3 rt8_probe.py state 2>&1 </dev/null)
    in=$(grep -v RLIMIT_NPROC <<< "$out")
    [ "$host" = "$in" ] && ok "rt8: umask and rlimits (but sandbox.limits' processes) are the caller's" ||
        bad "rt8: umask or rlimits differ from the caller's" "$(diff <(printf '%s\n' "$host") <(printf '%s\n' "$in"))"

    # --- Landlock skips read-only mounts: the mount calls and writes to them
    for m in plain transparent; do
        rt8_run $m python3 rt8_probe.py mounts
        [ $rc = 0 ] && ok "rt8 [$m]: mount, open_tree, move_mount, fsopen, fspick, mount_setattr fail; no read-only mount written ($(grep '^read-only' <<< "$out"))" ||
            bad "HOLE (rt-8) rt8 [$m]: a read-only mount made writable or written" "$out"
    done

    # --- the filters: inner's own (the launcher cannot compile them) and
    # the host's answer every probe alike
    if command -v gcc >/dev/null 2>&1 && gcc -O1 -shared -fPIC -o "$V/noexport.so" "$HERE/run-helpers/rt8_noexport.c" 2>"$V/cc.err"; then
        for m in plain transparent; do
            s=$V/plain.json; [ $m = transparent ] && s=$V/tp.json
            out=$(cd "$V" && RT8_NOEXPORT_LOG=$V/ne.log LD_PRELOAD=$V/noexport.so "$SLUICE" run -d --settings "$s" -- true 2>&1 </dev/null)
            grep -q 'filters built' <<< "$out" && ok "rt8 [$m]: with the launcher's export refused, inner builds the filters" ||
                { bad "rt8 [$m]: the fallback was not taken" "$out"; continue; }
            # the write report's filter and (transparent) connect()'s notify rules, from inner's filters
            out=$(cd "$V" && LD_PRELOAD=$V/noexport.so "$SLUICE" run --report-writes --settings "$s" -c "touch /etc/rt8-$TOKEN; python3 probe.py tcp 127.0.0.1 $PA" 2>&1 </dev/null)
            grep -q "blocked 1 write.*/etc/rt8-$TOKEN" <<< "$out" && ok "rt8 [$m]: inner's filters: the refused write is reported" ||
                bad "rt8 [$m]: inner's filters: the refused write is not reported" "$out"
            if [ $m = transparent ]; then
                grep -q '^OPEN' <<< "$out" && ok "rt8 [$m]: inner's filters: the allow-listed origin is reached by a direct connect()" ||
                    bad "rt8 [$m]: inner's filters: the allow-listed origin is not reached" "$out"
            else
                if grep -q '^BLOCKED' <<< "$out"; then ok "rt8 [$m]: inner's filters: a direct connect() to the origin is blocked"
                elif grep -q '^OPEN' <<< "$out"; then bad "HOLE (rt-8) rt8 [$m]: inner's filters: a direct connect() reached the origin" "$out"
                else bad "rt8 [$m]: inner's filters: the direct connect() did not run" "$out"; fi
            fi
            for pr in unix unix-dgram unix-highbit unix-x32 unix-i386 socketcall-i386 io_uring io_uring-enter io_uring-x32 newuser newuser-clone clone3 mount raw packet "tcp 127.0.0.2 $PA"; do
                a=$(cd "$V" && "$SLUICE" run -q --settings "$s" -- python3 probe.py $pr 2>&1 </dev/null | grep -m1 -E '^(BLOCKED|OPEN|SKIP)')
                b=$(cd "$V" && LD_PRELOAD=$V/noexport.so "$SLUICE" run -q --settings "$s" -- python3 probe.py $pr 2>&1 </dev/null | grep -m1 -E '^(BLOCKED|OPEN|SKIP)')
                case $a/$b in
                BLOCKED*/BLOCKED*) [ "$a" = "$b" ] && ok "rt8 [$m]: $pr: $a, from the host's filters and from inner's" ||
                    bad "rt8 [$m]: $pr: the host's filters answer '$a', inner's '$b'" ;;
                SKIP*/SKIP*) skip "rt8 [$m]: $pr" "${a#SKIP }" ;;
                *) bad "HOLE (rt-8) rt8 [$m]: $pr: host's filters '$a', inner's '$b'" ;;
                esac
            done
        done
    else
        skip "rt8: inner's own filters against the host's" "no gcc for the LD_PRELOAD"
    fi

    # --- bad 'F' messages: inner exits 125, the command never runs
    for v in trunc zero over garbled ones badbyte eof twof; do
        out=$(cd "$V" && python3 rt8_handoff.py "$SLUICE" $v 2>&1)
        [ "$(head -1 <<< "$out")" = "exit 125 not-run" ] && ok "rt8: inner given '$v' exits 125, the command not run" ||
            bad "HOLE (rt-8) rt8: inner given '$v'" "$out"
    done
    out=$(cd "$V" && python3 rt8_handoff.py "$SLUICE" go 2>&1)
    [ "$(head -1 <<< "$out")" = "exit 0 ran" ] && ok "rt8: (control) inner given 'G' only runs the command" ||
        bad "rt8: the handoff driver does not work" "$out"
    # the command runs inner and sends filters that allow everything: the
    # sandbox's own stay in force
    for pr in unix unix-x32 io_uring newuser mount; do
        out=$(cd "$V" && "$SLUICE" run -q --settings "$V/lb.json" -- python3 rt8_handoff.py "$SLUICE" allowall python3 probe.py $pr 2>&1 </dev/null)
        case $(grep -m1 -E '^(BLOCKED|OPEN|SKIP)' <<< "$out") in
        BLOCKED*) ok "rt8: inner reused with an allow-all 'F': $pr still blocked" ;;
        SKIP*) skip "rt8: inner reused with an allow-all 'F': $pr" "$out" ;;
        *) bad "HOLE (rt-8) rt8: inner reused with an allow-all 'F': $pr" "$out" ;;
        esac
    done

    # --- root's limit that cannot be enforced: refused with the command not
    # run and nothing left, before bwrap starts (the cgroup cannot be made)
    # and after (made, but neither bwrap born in it nor inner moved in: the
    # launcher's kill path)
    if [ "$(id -u)" = 0 ] && command -v gcc >/dev/null 2>&1 &&
        gcc -O1 -shared -fPIC -o "$V/nocg.so" "$HERE/run-helpers/rt8_nocgroup.c" 2>"$V/cc.err"; then
        mkdir -p "$V/late"
        echo '{"sandbox": {"limits": {"processes": 100}}}' > "$V/lim.json"
        for late in "" 1; do
            rm -f "$V/late-ran"
            out=$(cd "$V/late" && RT8_NOCG_LATE=$late LD_PRELOAD=$V/nocg.so "$SLUICE" run --settings "$V/lim.json" -c "touch $V/late-ran; : rt8late-$TOKEN" 2>&1 </dev/null); rc=$?
            # what the kill path leaves to the reaper goes a moment after
            # the launcher's exit: wait for it (10 s x SLOW), not 0.5 s
            for ((i = 0; i < 200 * SLOW; i++)); do
                [ -z "$(ls -A "$V/late")" ] && ! pgrep -f "rt8late-$TOKEN" >/dev/null && break
                sleep 0.05
            done
            what=${late:+"after bwrap's start"}
            what=${what:-"before bwrap's start"}
            if [ $rc = 125 ] && [ ! -e "$V/late-ran" ] && [ -z "$(ls -A "$V/late")" ] && ! pgrep -f "rt8late-$TOKEN" >/dev/null &&
                grep -q 'sandbox.limits.processes cannot be enforced' <<< "$out"; then
                ok "rt8: the pids cgroup refused $what: exit 125, the command not run, nothing left"
            else
                bad "HOLE (rt-8) rt8: a pids cgroup refused $what" "exit $rc; ran: $(ls "$V/late-ran" 2>&1); left: $(ls -A "$V/late"); $out"
            fi
        done
    fi

    # --- SIGKILL of the launcher early (0 to 200 ms), and two runs at once
    # in one directory: no placeholder, run directory, cgroup or process left
    K2=$T/rt8kill
    git -c init.defaultBranch=main init -q "$K2"
    git -C "$K2" -c user.email=t@t -c user.name=t commit -q --allow-empty -m init
    mkdir -p -m 700 "$V/kx"
    rt8_cgroups() { # PIDS...: the sluice-run cgroups of those launchers still there
        local pid
        for pid in "$@"; do
            ls -d /sys/fs/cgroup/pids/sluice-run.$pid.* /sys/fs/cgroup/sluice-run.$pid.* 2>/dev/null | grep -q . &&
                printf ' cgroup of %s;' "$pid"
        done
    }
    rt8_clean() { # WHAT PIDS...: nothing left once the reapers are done
        local what=$1 left; shift
        # the reapers remove the cgroups too: waited for with the rest
        # (30 s x SLOW)
        for ((i = 0; i < 600 * SLOW; i++)); do
            [ "$(ls -A "$K2")" = .git ] && [ -z "$(find "$V/kx" -mindepth 2 2>/dev/null)" ] &&
                ! pgrep -f "rt8kill-$TOKEN" >/dev/null && [ -z "$(rt8_cgroups "$@")" ] && break
            sleep 0.05
        done
        left=$(rt8_cgroups "$@")
        [ "$(ls -A "$K2")" = .git ] || left="$left project: $(ls -A "$K2" | tr '\n' ' ');"
        [ -z "$(find "$V/kx" -mindepth 2 2>/dev/null)" ] || left="$left rundirs: $(find "$V/kx" -mindepth 1 | tr '\n' ' ');"
        pgrep -f "rt8kill-$TOKEN" >/dev/null && left="$left processes: $(pgrep -af "rt8kill-$TOKEN" | tr '\n' ' ')"
        git -C "$K2" status --porcelain 2>&1 | grep -q . && left="$left git status: $(git -C "$K2" status --porcelain 2>&1)"
        if [ -z "$left" ]; then ok "rt8: $what: nothing left"
        else
            bad "HOLE (rt-8) rt8: $what: debris" "$left"
            pkill -9 -f "rt8kill-$TOKEN" 2>/dev/null # only ours: the token is unique
            for d in .bash_profile .bashrc .gitconfig .gitmodules .idea .mcp.json .profile .ripgreprc .vscode .zprofile .zshrc .claude/commands .claude/agents .claude; do
                rmdir "$K2/$d" 2>/dev/null
            done
        fi
    }
    for d in 0 0.001 0.005 0.02 0.05 0.2; do
        (cd "$K2" && exec env XDG_RUNTIME_DIR=$V/kx "$SLUICE" run --settings "$V/plain.json" -c "sleep 30; : rt8kill-$TOKEN") >/dev/null 2>&1 &
        pid=$!
        sleep $d
        kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
        rt8_clean "SIGKILL of the launcher after ${d}s" $pid
    done
    # many early kills (a bwrap killed while its first process waited for
    # its word left that process blocked forever on an eventfd, now and
    # then: 1 in 60 as uid 1001; the reaper now kills it, reaper.c)
    pids=
    for i in $(seq 30); do
        (cd "$K2" && exec env XDG_RUNTIME_DIR=$V/kx "$SLUICE" run -q --settings "$V/plain.json" -c "sleep 30; : rt8kill-$TOKEN") >/dev/null 2>&1 </dev/null &
        pid=$!
        sleep 0.0$((i % 3 + 1))
        kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
        pids="$pids $pid"
    done
    rt8_clean "30 SIGKILLs of the launcher 10-30 ms after start (no first process left waiting)" $pids
    # two runs at once in one directory: one killed early, the other runs on
    # and writes its file; then both at once to the end
    for d in 0.01 0.1; do
        (cd "$K2" && exec env XDG_RUNTIME_DIR=$V/kx "$SLUICE" run --settings "$V/plain.json" -c "sleep 30; : rt8kill-$TOKEN") >/dev/null 2>&1 &
        a=$!
        out=$(cd "$K2" && XDG_RUNTIME_DIR=$V/kx "$SLUICE" run -q --settings "$V/plain.json" -c "sleep 0.5; [ -d .git ] && [ -e .bashrc ] && echo kept > rt8-out.txt; : rt8kill-$TOKEN" 2>&1 </dev/null &
              sleep $d; kill -9 $a 2>/dev/null; wait) ; rc=$?
        wait $a 2>/dev/null
        if [ "$(cat "$K2/rt8-out.txt" 2>/dev/null)" = kept ]; then
            ok "rt8: two runs in one directory, one SIGKILLed after ${d}s: the other saw its placeholders and wrote its file"
        else
            bad "HOLE (rt-8) rt8: two runs in one directory, one SIGKILLed after ${d}s: the other was disturbed" "$out; $(ls -A "$K2")"
        fi
        rm -f "$K2/rt8-out.txt"
        rt8_clean "two runs in one directory, one SIGKILLed after ${d}s" $a
    done
    pids=
    for i in 1 2 3; do
        (cd "$K2" && exec env XDG_RUNTIME_DIR=$V/kx "$SLUICE" run -q --settings "$V/plain.json" -c "echo $i > rt8-$i.txt; : rt8kill-$TOKEN") >"$V/par$i.out" 2>&1 </dev/null &
        pids="$pids $!"
    done
    n=0
    for pid in $pids; do wait $pid && n=$((n + 1)); done
    [ $n = 3 ] && [ "$(cat "$K2"/rt8-[123].txt 2>/dev/null | tr -d '\n')" = 123 ] &&
        ok "rt8: three runs at once in one directory all succeed" ||
        bad "rt8: three runs at once in one directory" "$n of 3; $(cat "$V"/par*.out)"
    rm -f "$K2"/rt8-[123].txt
    rt8_clean "three runs at once in one directory" $pids
    rm -rf "$V" "$K2"
}

start=$SECONDS
e2e_twice cases "$HERE/run_escape.sh" "$SLUICE"
echo "# run_escape.sh took $((SECONDS - start)) s"
e2e_finish
