#!/usr/bin/env bash
# tests/e2e/casefold.sh - protected names in a case-folding directory
# (issue 21, item 13): there every spelling of a name is the same entry, so
# a missing .bashrc must not be creatable as .BASHRC, and an existing
# .BaShRc is the protected file. Needs root and a kernel with casefold
# support (tmpfs -o casefold, Linux 6.13+ built with CONFIG_UNICODE): it
# mounts one in a private mount namespace. Where either is missing it says
# why and skips (it does not fail).
set -uo pipefail
SLUICE=${1:?usage: casefold.sh PATH/TO/sluice}
case $SLUICE in /*) ;; *) SLUICE=$(cd "$(dirname "$SLUICE")" && pwd)/$(basename "$SLUICE") ;; esac
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

skip_all() {
    echo "ok - protected names in a case-folding directory # SKIP $1"
    echo "0 passed, 0 failed"
    exit 0
}

if [ -z "${SLUICE_CASEFOLD_NS:-}" ]; then
    [ "$(id -u)" -eq 0 ] || skip_all "needs root (a private mount namespace and a tmpfs mount)"
    unshare -m --propagation private true 2>/dev/null || skip_all "unshare -m does not work here"
    exec unshare -m --propagation private env SLUICE_CASEFOLD_NS=1 bash "$0" "$SLUICE"
fi

. "$HERE/lib.sh"
CF=$T/cf
mkdir -p "$CF"
trap 'umount "$CF" 2>/dev/null; e2e_cleanup' EXIT
if ! mount -t tmpfs -o casefold tmpfs "$CF" 2>"$T/mount.err"; then
    skip_all "this kernel cannot mount a case-folding tmpfs ($(head -c 200 "$T/mount.err" | tr '\n' ' ')); ext4 casefold: $( [ -e /sys/fs/ext4/features/casefold ] && echo available || echo absent)"
fi
W=$CF/w
mkdir "$W"
if ! chattr +F "$W" 2>"$T/chattr.err"; then
    skip_all "chattr +F on a casefold tmpfs failed: $(head -c 200 "$T/chattr.err")"
fi
touch "$W/.probe" && [ -e "$W/.PROBE" ] || skip_all "the directory does not fold case"
rm -f "$W/.probe"
export XDG_RUNTIME_DIR=$T/xdg
mkdir -m 700 "$XDG_RUNTIME_DIR"
echo '# the user file' >"$W/.BaShRc"

r() { (cd "$W" && "$SLUICE" run -q -c "$1" 2>&1 </dev/null); }

out=$(r 'echo evil > .ZSHRC')
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 125 ] && [ -z "$(find "$W" -maxdepth 1 -iname .zshrc -type f)" ] &&
    ok "a missing .zshrc cannot be created as .ZSHRC" || bad "created .ZSHRC" "exit $rc: $out; $(ls -la "$W")"
out=$(r 'echo evil >> .bashrc')
rc=$?
[ $rc -ne 0 ] && [ "$(cat "$W/.BaShRc")" = '# the user file' ] &&
    ok "an existing .BaShRc is read-only under every spelling" || bad ".BaShRc written" "exit $rc: $out; $(cat "$W/.BaShRc")"
out=$(r 'mkdir -p .GIT/hooks')
rc=$?
[ $rc -ne 0 ] && ok "a missing .git cannot be made as .GIT" || bad "made .GIT" "exit $rc: $out"
[ "$(ls -A "$W")" = ".BaShRc" ] && ok "nothing left in the directory" || bad "left" "$(ls -la "$W")"

# rt-5: Unicode spellings that utf8 case folding makes equal to an ASCII
# protected name (U+017F LATIN SMALL LETTER LONG S folds to "s"): the scan
# matches ASCII case only (strcasecmp), so an existing .baſhrc is not seen
# as .bashrc, yet bash's open(".bashrc") finds it. Untested on the rt-5
# machine (no casefold tmpfs nor ext4 casefold on its kernel).
W2=$CF/w2
mkdir "$W2" && chattr +F "$W2"
LS=$'\xc5\xbf'
printf '# the user file\n' >"$W2/.ba${LS}hrc"
out=$(cd "$W2" && "$SLUICE" run -q -c "echo evil >> .bashrc; echo evil >> .ba${LS}hrc" 2>&1 </dev/null)
[ "$(cat "$W2/.bashrc")" = '# the user file' ] &&
    ok "rt-5: an existing .ba<U+017F>hrc (folds to .bashrc) is read-only" ||
    bad "HOLE (rt-5): .ba<U+017F>hrc, which a case-folding directory finds as .bashrc, is writable" "$out; $(cat "$W2/.bashrc")"
out=$(cd "$W2" && "$SLUICE" run -q -c "printf x > .z${LS}hrc" 2>&1 </dev/null)
[ -z "$(find "$W2" -maxdepth 1 -iname '.z*hrc' -type f)" ] &&
    ok "rt-5: a missing .zshrc cannot be created as .z<U+017F>hrc" ||
    bad "HOLE (rt-5): created .z<U+017F>hrc, read as .zshrc" "$out; $(ls -la "$W2")"
e2e_finish
