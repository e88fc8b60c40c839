#!/usr/bin/env bash
# tests/e2e/rundir.sh - where `sluice run` keeps its run directory when
# XDG_RUNTIME_DIR is not set (issue 21, item 6): never in a place another
# user could make first and so block every run, and never through a
# directory or link someone else made.
#   root: /tmp/sluice-0 made first by another user: runs still work (in
#     /run/sluice, removed after), /tmp/sluice-0 untouched;
#   user: /tmp/sluice-UID made first by someone else while logind's
#     /run/user/UID exists: runs work there, /tmp/sluice-UID untouched;
#   user: /tmp/sluice-UID a link to a directory of the user's, no
#     /run/user/UID: refused with a message (125), nothing made through it;
#   user: nothing in the way: /tmp/sluice-UID, removed after the run.
# Needs root: it runs in a mount namespace of its own with private tmpfs on
# /tmp and /run, so nothing it plants is seen by anything else on the
# machine. Skipped (not failed) without root or without unshare -m.
set -uo pipefail
SLUICE=${1:?usage: rundir.sh PATH/TO/sluice}
case $SLUICE in /*) ;; *) SLUICE=$(cd "$(dirname "$SLUICE")" && pwd)/$(basename "$SLUICE") ;; esac
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

if [ -z "${SLUICE_RUNDIR_NS:-}" ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "ok - run directory placement # SKIP needs root (a private mount namespace)"
        echo "0 passed, 0 failed"
        exit 0
    fi
    if ! unshare -m --propagation private true 2>/dev/null; then
        echo "ok - run directory placement # SKIP unshare -m does not work here"
        echo "0 passed, 0 failed"
        exit 0
    fi
    exec unshare -m --propagation private env SLUICE_RUNDIR_NS=1 bash "$0" "$SLUICE"
fi

# in the private mount namespace: fresh /tmp and /run (the binary is kept
# open: it may be under /tmp)
exec 3<"$SLUICE"
mount -t tmpfs -o mode=1777 tmpfs /tmp || { echo "not ok - tmpfs on /tmp"; exit 1; }
mount -t tmpfs -o mode=755 tmpfs /run || { echo "not ok - tmpfs on /run"; exit 1; }
mkdir -m 755 /run/user
. "$HERE/lib.sh"
. "$HERE/run-helpers/twice.sh"
unset XDG_RUNTIME_DIR
chmod 755 "$T"
cat <&3 >"$T/sluice" && chmod 755 "$T/sluice"
exec 3<&-
SLUICE=$T/sluice
e2e_pick_user || { echo "ok - # SKIP no unprivileged user"; e2e_finish; exit 0; }
U=$E2E_UID
mkdir -p "$T/work" "$T/rwork" && chown "$U:$E2E_GID" "$T/work"
# as_user in the working directory, with no XDG_RUNTIME_DIR
urun() { (cd "$T/work" && as_user env -u XDG_RUNTIME_DIR HOME="$T/work" PATH="$E2E_SYSPATH" "$SLUICE" run -q "$@" 2>&1 </dev/null); }
rrun() { (cd "$T/rwork" && env -u XDG_RUNTIME_DIR "$SLUICE" run -q "$@" 2>&1 </dev/null); }

# --- root, /tmp/sluice-0 made first by another user -------------------------------------------
WHO=root
as_user mkdir -m 700 /tmp/sluice-0
out=$(rrun -c 'echo in-sandbox')
rc=$?
[ $rc -eq 0 ] && [ "$out" = in-sandbox ] && ok "another user's /tmp/sluice-0 does not block root's runs" ||
    bad "root's run with another user's /tmp/sluice-0" "exit $rc: $out"
[ "$(stat -c '%u %a' /tmp/sluice-0)" = "$U 700" ] && [ -z "$(ls -A /tmp/sluice-0)" ] &&
    ok "the other user's /tmp/sluice-0 is untouched" || bad "/tmp/sluice-0 touched" "$(ls -la /tmp/sluice-0)"
[ ! -e /run/sluice ] && ok "root's run directory (/run/sluice) is gone after the run" ||
    bad "/run/sluice left" "$(ls -la /run/sluice)"
rmdir /tmp/sluice-0
# and as a link to a directory of root's: never followed
mkdir -m 700 "$T/rootdir"
as_user ln -s "$T/rootdir" /tmp/sluice-0
out=$(rrun -c true)
rc=$?
[ $rc -eq 0 ] && [ -z "$(ls -A "$T/rootdir")" ] && ok "a link at /tmp/sluice-0 is not followed" ||
    bad "root's run with a link at /tmp/sluice-0" "exit $rc: $out; $(ls -la "$T/rootdir")"
rm -f /tmp/sluice-0

# --- the user ------------------------------------------------------------------------------------
WHO=user
# someone else's /tmp/sluice-UID, logind's /run/user/UID there
mkdir -m 755 "/tmp/sluice-$U"
mkdir -m 700 "/run/user/$U" && chown "$U:$E2E_GID" "/run/user/$U"
out=$(urun -c 'echo in-sandbox')
rc=$?
[ $rc -eq 0 ] && [ "$out" = in-sandbox ] &&
    ok "another user's /tmp/sluice-UID does not block the user's runs when /run/user/UID exists" ||
    bad "the user's run with another's /tmp/sluice-UID" "exit $rc: $out"
[ -z "$(ls -A "/tmp/sluice-$U")" ] && [ "$(stat -c %u "/tmp/sluice-$U")" = 0 ] &&
    ok "the other /tmp/sluice-UID is untouched" || bad "/tmp/sluice-UID touched" "$(ls -la "/tmp/sluice-$U")"
[ -z "$(ls -A "/run/user/$U")" ] && ok "the run directory in /run/user/UID is gone after the run" ||
    bad "left in /run/user/UID" "$(ls -laR "/run/user/$U")"
rmdir "/run/user/$U" "/tmp/sluice-$U"

# no /run/user/UID, and /tmp/sluice-UID a link to a directory of the user's
mkdir -m 700 "$T/victim" && chown "$U:$E2E_GID" "$T/victim"
ln -s "$T/victim" "/tmp/sluice-$U"
out=$(urun -c true)
rc=$?
[ $rc -eq 125 ] && grep -q "is not a directory of uid $U with mode 0700" <<<"$out" &&
    ok "a link at /tmp/sluice-UID is refused with a message (exit 125)" ||
    bad "the user's run with a link at /tmp/sluice-UID" "exit $rc: $out"
[ -z "$(ls -A "$T/victim")" ] && ok "nothing was made through the link" ||
    bad "made through the link" "$(ls -la "$T/victim")"
rm -f "/tmp/sluice-$U"

# nothing in the way: /tmp/sluice-UID, gone after the run
out=$(urun -c true)
rc=$?
[ $rc -eq 0 ] && [ ! -e "/tmp/sluice-$U" ] && ok "/tmp/sluice-UID is used and removed after the run" ||
    bad "the user's run in /tmp/sluice-UID" "exit $rc: $out; $(ls -la "/tmp/sluice-$U" 2>&1)"

# rt-5 (red team): more of item 6
# the user's own /tmp/sluice-UID, but group/world-writable: refused
mkdir -m 700 "/tmp/sluice-$U" && chown "$U:$E2E_GID" "/tmp/sluice-$U" && chmod 777 "/tmp/sluice-$U"
out=$(urun -c true)
rc=$?
[ $rc -eq 125 ] && [ -z "$(ls -A "/tmp/sluice-$U")" ] && ok "rt-5: the user's own /tmp/sluice-UID with mode 0777 is refused (exit 125)" ||
    bad "rt-5: the user's run with a 0777 /tmp/sluice-UID" "exit $rc: $out; $(ls -la "/tmp/sluice-$U")"
rm -rf "/tmp/sluice-$U"
# XDG_RUNTIME_DIR pointing to someone else's directory (root's 0777 one, and a link to it)
mkdir -m 777 "$T/rootxdg"
ln -s "$T/rootxdg" "$T/work/xdglink"
for x in "$T/rootxdg" "$T/work/xdglink"; do
    out=$(cd "$T/work" && as_user env XDG_RUNTIME_DIR="$x" HOME="$T/work" PATH="$E2E_SYSPATH" "$SLUICE" run -q -c 'echo in-sandbox' 2>&1 </dev/null)
    rc=$?
    [ $rc -eq 0 ] && [ "$out" = in-sandbox ] && [ -z "$(ls -A "$T/rootxdg")" ] && [ ! -e "/tmp/sluice-$U" ] &&
        ok "rt-5: XDG_RUNTIME_DIR=$x (root's, world-writable) is not used; the run works elsewhere and cleans up" ||
        bad "rt-5: XDG_RUNTIME_DIR=$x" "exit $rc: $out; $(ls -la "$T/rootxdg")"
done
rm -f "$T/work/xdglink"
# XDG_RUNTIME_DIR of the user's own but world-writable (not 0700): others
# could swap its sluice/ between two uses of the path, so it is not used
mkdir -m 700 "$T/userxdg" && chown "$U:$E2E_GID" "$T/userxdg" && chmod 777 "$T/userxdg"
out=$(cd "$T/work" && as_user env XDG_RUNTIME_DIR="$T/userxdg" HOME="$T/work" PATH="$E2E_SYSPATH" "$SLUICE" run -q -c 'echo in-sandbox' 2>&1 </dev/null)
rc=$?
[ $rc -eq 0 ] && [ "$out" = in-sandbox ] && [ -z "$(ls -A "$T/userxdg")" ] && [ ! -e "/tmp/sluice-$U" ] &&
    ok "the user's own world-writable XDG_RUNTIME_DIR is not used; the run works elsewhere and cleans up" ||
    bad "the user's world-writable XDG_RUNTIME_DIR" "exit $rc: $out; $(ls -la "$T/userxdg")"
rm -rf "$T/userxdg"

e2e_finish
