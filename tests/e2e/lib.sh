# tests/e2e/lib.sh - sourced by the end-to-end scripts: a private temporary
# directory in $T (user settings kept out of the way), TAP-style ok/bad
# reporting and the closing "N passed, M failed" line.
T=$(mktemp -d /tmp/sluice-e2e.XXXXXX) || exit 2
export HOME="$T/home" XDG_CONFIG_HOME="$T/home/.config"
unset SLUICE_SETTINGS
mkdir -p "$HOME"
# SLOW scales the waits for a sluice to start (start_proxy and the like):
# tests/valgrind.sh sets SLUICE_TEST_SLOW, as valgrind starts programs slowly.
# Only start-up waits use it, never a bound that a check is about.
SLOW=${SLUICE_TEST_SLOW:-1}

pass=0 fail=0
ok()  { pass=$((pass + 1)); echo "ok - $1"; }
bad() { fail=$((fail + 1)); echo "not ok - $1"; [ -n "${2:-}" ] && printf '%s\n' "$2" | sed 's/^/#   /'; }

# Prints the summary and returns non-zero when anything failed.
e2e_finish() {
    echo "$pass passed, $fail failed"
    [ "$fail" -eq 0 ]
}

# Background processes the script started; killed at exit with the temporary
# directory removed (KEEP=1 keeps it for a post-mortem). A script that sets
# its own EXIT trap replaces this one.
PIDS=()
e2e_cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    wait 2>/dev/null
    [ -n "${KEEP:-}" ] || rm -rf "$T"
}
trap e2e_cleanup EXIT

# A free TCP port on 127.0.0.1 (free when asked; the caller binds it soon).
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# start_dnsmasq ARGS...: dnsmasq on 127.0.0.1 at a free port, no upstream,
# queries logged to $T/dnsmasq.log; ARGS are its records. Sets DPORT (empty
# when it could not start, with the reason in $T/dnsmasq.err).
start_dnsmasq() {
    local dnsmasq p pid try
    dnsmasq=$(command -v dnsmasq || echo /usr/sbin/dnsmasq)
    DPORT=
    for try in 1 2 3 4 5 6 7 8; do
        p=$((20000 + RANDOM % 40000))
        "$dnsmasq" --no-daemon --no-resolv --no-hosts --bind-interfaces --listen-address=127.0.0.1 \
            --port="$p" --log-queries --log-facility="$T/dnsmasq.log" "$@" 2>"$T/dnsmasq.err" &
        pid=$!
        # ready once it logged its start (after it bound the port), not
        # after a fixed 0.3 s: a first query sent before the bind is refused,
        # and a dnsmasq slower than that to fail (port taken) looked started
        if dnsmasq_started "$pid"; then
            DPORT=$p
            PIDS+=($pid)
            return 0
        fi
        kill "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
    return 1
}

# dnsmasq_started PID: waits (10 s) for the dnsmasq PID to log its start in
# $T/dnsmasq.log; 1 when it exited first or at the deadline.
dnsmasq_started() {
    local i
    for ((i = 0; i < 200; i++)); do
        grep -q "dnsmasq\[$1\]: started" "$T/dnsmasq.log" 2>/dev/null && return 0
        kill -0 "$1" 2>/dev/null || return 1
        sleep 0.05
    done
    return 1
}

# start_proxy NAME SETTINGS [ARGS...]: `$SLUICE proxy` logging to $T/NAME.log
# (stderr in $T/NAME.err), waits for its start line. Sets PROXY_PID, HPORT
# and SPORT (the bound HTTP and SOCKS5 ports of tcp:127.0.0.1:0 listeners;
# empty when off) and PORT=$SPORT.
start_proxy() {
    local name=$1 settings=$2 i line
    shift 2
    "$SLUICE" proxy --settings "$settings" --log "$T/$name.log" "$@" 2>"$T/$name.err" &
    PROXY_PID=$!
    PIDS+=($PROXY_PID)
    line=
    for i in $(seq $((200 * SLOW))); do
        line=$(grep -m1 'event=start' "$T/$name.log" 2>/dev/null)
        [ -n "$line" ] && break
        kill -0 "$PROXY_PID" 2>/dev/null || break
        sleep 0.05
    done
    HPORT=$(printf '%s' "$line" | sed -n 's/.*http tcp:127\.0\.0\.1:\([0-9]*\).*/\1/p')
    SPORT=$(printf '%s' "$line" | sed -n 's/.*socks5 tcp:127\.0\.0\.1:\([0-9]*\).*/\1/p')
    PORT=$SPORT
    [ -n "$line" ] || bad "$name: proxy did not start" "$(cat "$T/$name.err" "$T/$name.log" 2>/dev/null)"
}

# SOCKS5 helpers: the hex of a string, and of a domain CONNECT request.
hexname() { printf '%s' "$1" | od -An -tx1 | tr -d ' \n'; }
connect_req() { # HOST PORT
    local h
    h=$(hexname "$1")
    printf '05010003%02x%s%04x' $((${#h} / 2)) "$h" "$2"
}

# wait_for FILE REGEX [SECONDS]: waits (10 s unless told) until a line of FILE
# matches the extended regex. 0 when one did, 1 at the deadline.
wait_for() {
    local f=$1 re=$2 n=$(( ${3:-10} * 20 )) i
    for ((i = 0; i < n; i++)); do
        grep -qE -- "$re" "$f" 2>/dev/null && return 0
        sleep 0.05
    done
    return 1
}

# wait_more FILE REGEX N [SECONDS]: waits (10 s unless told) until more than N
# lines of FILE match the extended regex: for a line that an action logs again
# (a reload), N counted before the action. 0 when they did, 1 at the deadline.
wait_more() {
    local f=$1 re=$2 n0=$3 n=$(( ${4:-10} * 20 )) i
    for ((i = 0; i < n; i++)); do
        [ "$(grep -cE -- "$re" "$f" 2>/dev/null)" -gt "$n0" ] && return 0
        sleep 0.05
    done
    return 1
}

# fds_down PID MAX [SECONDS]: waits (10 s unless told) until process PID holds
# at most MAX descriptors (a closing connection's are released a moment after
# its client sees the end). Prints the last count; 0 when it got there.
fds_down() {
    local n=$(( ${3:-10} * 20 )) i c
    for ((i = 0; i < n; i++)); do
        c=$(ls "/proc/$1/fd" 2>/dev/null | wc -l)
        [ "$c" -le "$2" ] && { echo "$c"; return 0; }
        sleep 0.05
    done
    echo "$c"
    return 1
}

# wait_exit PID [SECONDS]: waits (10 s unless told) for a child of this shell
# to exit and sets WAIT_RC to its status. 1 (WAIT_RC empty) when it still
# runs at the deadline.
wait_exit() {
    local pid=$1 n=$(( ${2:-10} * 20 )) i
    WAIT_RC=
    for ((i = 0; i < n; i++)); do
        kill -0 "$pid" 2>/dev/null || { wait "$pid"; WAIT_RC=$?; return 0; }
        sleep 0.05
    done
    return 1
}

# listen_port NAME KIND: the port of the KIND (http, socks5, admin) listener
# on 127.0.0.1 in the start line of $T/NAME.log (start_proxy).
listen_port() {
    grep -m1 'event=start' "$T/$1.log" 2>/dev/null | sed -n "s/.* $2 tcp:127\.0\.0\.1:\([0-9]*\).*/\1/p"
}

# e2e_who CHILD_VAR: the scripts that run their cases as root, then again as
# an unprivileged user (a child run with CHILD_VAR set), mark every ok/bad
# line with [root] or [user] ($WHO).
e2e_who() {
    WHO=root
    [ -n "${!1:-}" ] && WHO=user
    ok()  { pass=$((pass + 1)); echo "ok - [$WHO] $1"; }
    bad() { fail=$((fail + 1)); echo "not ok - [$WHO] $1"; [ -n "${2:-}" ] && printf '%s\n' "$2" | sed 's/^/#   /'; }
}

# e2e_add_counts FILE: adds the "N passed, M failed" line FILE ends with (the
# unprivileged pass's output) to this script's counts; a bad check when the
# pass did not get that far.
e2e_add_counts() {
    local line n m
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$1" | tail -1)
    if [ -n "$line" ]; then
        n=${line%% passed*} m=${line#*passed, } m=${m%% failed}
        pass=$((pass + n)) fail=$((fail + m))
    else bad "the unprivileged pass did not finish" "$(tail -5 "$1")"; fi
}
