# tests/e2e/netns.sh - sourced (before lib.sh, which makes $T) by the
# scripts that run in a private network namespace of their own as root.
#
# e2e_netns VAR NAME ARGS...: unless VAR is set (this is the re-executed
# script), re-executes the script under `unshare -n` with VAR=1 and ARGS;
# when not root, prints NAME's skip line and exits 0 instead.
e2e_netns() {
    local var=$1 name=$2
    shift 2
    [ -n "${!var:-}" ] && return 0
    if [ "$(id -u)" -ne 0 ]; then
        echo "ok - $name # SKIP needs root (a private network namespace)"
        echo "0 passed, 0 failed"
        exit 0
    fi
    exec unshare -n env "$var=1" bash "$0" "$@"
}
