# tests/e2e/run-helpers/twice.sh - sourced by run.sh and run_escape.sh after
# lib.sh. `e2e_twice CASES SCRIPT SLUICE` runs the function CASES here, then,
# when this is root, the whole SCRIPT again as an unprivileged user (the
# issue asks for both): a throwaway user (useradd -M sluicetest, reused when
# it exists; `nobody` when it cannot be made), entered with
#   setpriv --reuid=U --regid=G --clear-groups --inh-caps=-all
# The script and the binary are copied to a world-readable directory first
# when the user cannot reach them where they are. The child's results are
# printed (prefixed "[user]" by its own ok/bad) and added to this run's
# counts. When bwrap cannot make namespaces for that user here, a SKIP line
# says so and nothing is counted.
#
# ok/bad are redefined to name who ran the case: "ok - [root] name".
WHO=$(id -un 2>/dev/null || id -u)
[ -n "${SLUICE_E2E_CHILD:-}" ] && WHO=user
ok()  { pass=$((pass + 1)); echo "ok - [$WHO] $1"; }
bad() { fail=$((fail + 1)); echo "not ok - [$WHO] $1"; [ -n "${2:-}" ] && printf '%s\n' "$2" | sed 's/^/#   /'; }
skip() { echo "ok - [$WHO] $1 # SKIP ${2:-}"; }
E2E_SYSPATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

# as_user CMD...: CMD as the unprivileged user (root only)
as_user() {
    setpriv --reuid="$E2E_UID" --regid="$E2E_GID" --clear-groups --inh-caps=-all "$@"
}

e2e_pick_user() {
    E2E_UID= E2E_GID=
    if ! id sluicetest >/dev/null 2>&1; then
        useradd -M -s /usr/sbin/nologin sluicetest >/dev/null 2>&1 || useradd -M sluicetest >/dev/null 2>&1
    fi
    if id sluicetest >/dev/null 2>&1; then
        E2E_UID=$(id -u sluicetest) E2E_GID=$(id -g sluicetest)
    elif id nobody >/dev/null 2>&1; then
        E2E_UID=$(id -u nobody) E2E_GID=$(id -g nobody)
    fi
    [ -n "$E2E_UID" ]
}

e2e_twice() {
    local cases=$1 script=$2 sluice=$3 copy= child_script child_sluice line n m upath d
    "$cases"
    [ -n "${SLUICE_E2E_CHILD:-}" ] && return 0
    if [ "$(id -u)" -ne 0 ]; then
        echo "# not root: this run was the unprivileged one"
        return 0
    fi
    if ! command -v setpriv >/dev/null 2>&1 || ! e2e_pick_user; then
        echo "# SKIP unprivileged pass: no setpriv or no user to run as"
        return 0
    fi
    child_script=$script child_sluice=$sluice
    if ! as_user sh -c 'test -r "$1" && test -r "$2/lib.sh" && test -x "$3"' sh "$script" \
            "$(dirname "$script")" "$sluice" 2>/dev/null; then
        copy=$(mktemp -d /tmp/sluice-e2e-copy.XXXXXX) || return 1
        chmod 755 "$copy"
        mkdir "$copy/e2e"
        cp -r "$(dirname "$script")/." "$copy/e2e/"
        cp "$sluice" "$copy/sluice"
        chmod -R a+rX "$copy"
        child_script=$copy/e2e/$(basename "$script") child_sluice=$copy/sluice
        echo "# copied the scripts and the binary to $copy for uid $E2E_UID"
    fi
    if ! (cd / && as_user env PATH="$E2E_SYSPATH:$PATH" bwrap --ro-bind / / --dev /dev --proc /proc \
            --unshare-user --unshare-net --unshare-pid true) >"$T/userns.err" 2>&1; then
        echo "# SKIP unprivileged pass: bwrap cannot create namespaces for uid $E2E_UID here: $(head -c 300 "$T/userns.err")"
        [ -n "$copy" ] && rm -rf "$copy"
        return 0
    fi
    # PATH: the system directories, then those of ours the user can search
    # (an unsearchable one, like /root/..., makes execvp say EACCES)
    upath=$E2E_SYSPATH
    local IFS=:
    for d in $PATH; do
        case ":$upath:" in *":$d:"*) continue ;; esac
        as_user test -x "$d" 2>/dev/null && upath=$upath:$d
    done
    unset IFS
    echo "# --- the same cases as uid $E2E_UID (setpriv) ---"
    (cd / && as_user env SLUICE_E2E_CHILD=1 PATH="$upath" bash "$child_script" "$child_sluice") 2>&1 |
        tee "$T/child.out"
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$T/child.out" | tail -1)
    if [ -n "$line" ]; then
        n=${line%% passed*} m=${line#*passed, } m=${m%% failed}
        pass=$((pass + n)) fail=$((fail + m))
    else
        bad "the unprivileged pass did not finish" "$(tail -5 "$T/child.out")"
    fi
    [ -n "$copy" ] && rm -rf "$copy"
    return 0
}
