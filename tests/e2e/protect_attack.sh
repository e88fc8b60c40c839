#!/usr/bin/env bash
# tests/e2e/protect_attack.sh - rt-19: red team of the protected names'
# placeholders since 65bd6bed (sb_could_create, sandbox/protect.c: a
# missing protected name gets a mount point only where the command could
# create it, asked as root without CAP_DAC_OVERRIDE for a directory whose
# owner and group are not both root's). Every case passes when no
# protected name can be made; see tests/e2e/rt-19-report.md.
#
#   A. root, ROOT owned root:OTHER mode 555 (the owner can chmod it): the
#      command's `chmod u+w .` then .bashrc, .git/hooks, .claude/commands
#      (rt-19 finding: 65bd6bed gave no mount point and all four were made;
#      now the run fails closed, 125, as before 65bd6bed).
#   B. as A for sluice-inner's spot (add_inner_spot): a sluice alone in
#      such a directory; a planted sluice-inner never starts next time.
#   C. root, a nested repository's .git owned root:OTHER 555 without hooks.
#   D. root, another user's directory where root may write only by a POSIX
#      ACL (user:root, group:root), by group root (setgid 2775), by the
#      sticky 1777 bits: mount points; protected names cannot be made,
#      other names can; nothing left.
#   E. root, OTHER:root 555 and OTHER:OTHER 755 (no write, no chmod): the
#      command runs and cannot make anything, with or without a nested user
#      namespace (allowNestedUserNamespaces: unshare -Ur regains no
#      override over an inode whose owner is not mapped).
#   F. root, the working directory reached through a symbolic link to A's.
#   G. as a user (setpriv, sluicetest), its own 555 directory: chmod then
#      .bashrc (an old gap: faccessat said no, no mount point); the mount
#      points are removed after the run although the directory is 555
#      (the reaper lends itself the owner's write bit), its mode kept;
#      and B for the user.
#
# The script runs in a network namespace of its own (unshare -n): nothing
# leaves it, and no name is resolved (dnsServers names a closed port).
#
# usage: protect_attack.sh PATH/TO/sluice   (sluice-inner beside it)
set -uo pipefail
SLUICE=${1:?usage: protect_attack.sh PATH/TO/sluice}
case $SLUICE in /*) ;; *) SLUICE=$PWD/$SLUICE ;; esac
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

skip_all() { echo "# SKIP $1"; echo "0 passed, 0 failed"; exit 77; }
[ "$(id -u)" = 0 ] || skip_all "not root (the cases need directories of other owners)"
command -v python3 >/dev/null || skip_all "no python3"
if [ -z "${SLUICE_RT19_NETNS:-}" ]; then
    unshare -n true 2>/dev/null || skip_all "cannot make a network namespace (unshare -n)"
    SLUICE_RT19_NETNS=1 exec unshare -n bash "$HERE/protect_attack.sh" "$SLUICE"
fi
. "$HERE/lib.sh"
. "$HERE/run-helpers/twice.sh"
chmod 755 "$T"
ip link set lo up
e2e_pick_user || skip_all "no unprivileged user"
U=$E2E_UID G=$E2E_GID
OG=$G # another group than root's
export XDG_RUNTIME_DIR=$T/xdg
mkdir -p -m 700 "$XDG_RUNTIME_DIR"
mkdir -p "$T/bin" "$T/uxdg" && cp "$SLUICE" "$(dirname "$SLUICE")/sluice-inner" "$T/bin/" &&
    chmod 755 "$T/bin" "$T/bin/"* && chown "$U:$G" "$T/uxdg" && chmod 700 "$T/uxdg"
printf '{"network": {"allowedDomains": [], "dnsServers": ["127.0.0.1:9"]}}\n' > "$T/s.json"
printf '{"network": {"allowedDomains": [], "dnsServers": ["127.0.0.1:9"]}, "allowNestedUserNamespaces": true}\n' > "$T/n.json"
chmod 644 "$T/s.json" "$T/n.json"

# srun root|user DIR SETTINGS SHELL-STRING [SLUICE]: out in $OUT, status in $RC
srun() {
    local who=$1 dir=$2 s=$3 cmd=$4 bin=${5:-$T/bin/sluice}
    if [ "$who" = user ]; then
        OUT=$(cd "$dir" && timeout 60 setpriv --reuid "$U" --regid "$G" --clear-groups \
            env HOME="$T" XDG_RUNTIME_DIR="$T/uxdg" "$bin" run --settings "$s" -c "$cmd" 2>&1)
    else
        OUT=$(cd "$dir" && timeout 60 "$bin" run --settings "$s" -c "$cmd" 2>&1)
    fi
    RC=$?
}
# the command tries every way in: a chmod first, then the names
TRY='chmod u+w . 2>/dev/null; echo evil > .bashrc; mkdir -p .git/hooks; mkdir -p .claude/commands; echo evil > .mcp.json; echo probe > plain; true'
# made DIR: which protected names the command left (files with content or
# directories with something in them; empty ones would be mount points)
made() {
    local d=$1
    [ -s "$d/.bashrc" ] && echo .bashrc
    [ -s "$d/.mcp.json" ] && echo .mcp.json
    [ -d "$d/.git/hooks" ] && echo .git/hooks
    [ -d "$d/.claude/commands" ] && echo .claude/commands
    true
}
# acl DIR TAG(user|group) ID: an ACL entry rwx for ID (and the mask), by xattr
acl() {
    python3 - "$1" "$2" "$3" <<'PY'
import os, struct, sys
d, tag, ident = sys.argv[1], sys.argv[2], int(sys.argv[3])
e = lambda t, p, i: struct.pack('<HHI', t, p, i)
ents = [e(1, 7, 0xffffffff)]
if tag == 'user': ents.append(e(2, 7, ident))
ents.append(e(4, 5, 0xffffffff))
if tag == 'group': ents.append(e(8, 7, ident))
ents += [e(0x10, 7, 0xffffffff), e(0x20, 5, 0xffffffff)]
os.setxattr(d, 'system.posix_acl_access', struct.pack('<I', 2) + b''.join(ents))
PY
}
mkd() { # DIR OWNER MODE
    mkdir -p "$1" && chown "$2" "$1" && chmod "$3" "$1"
}

# --- A. root:OTHER 555 -------------------------------------------------------------------------
A=$T/a
mkd "$A" "0:$OG" 555
srun root "$A" "$T/s.json" "$TRY"
m=$(made "$A")
if [ -z "$m" ] && [ "$(stat -c %a "$A")" = 555 ]; then
    ok "A: root:OTHER 555: no protected name made (exit $RC)"
else bad "A: root:OTHER 555: the command made: $m" "exit $RC $OUT
$(ls -lA "$A")"; fi
[ -z "$(ls -A "$A" | grep -v '^plain$')" ] && ok "A: nothing left but the command's own files" ||
    bad "A: left behind" "$(ls -lA "$A")"

# --- B. sluice-inner's spot in such a directory ---------------------------------------------------
B=$T/b
mkdir -p "$B" && cp "$T/bin/sluice" "$B/" && chown "0:$OG" "$B" && chmod 555 "$B"
PLANT='chmod u+w . 2>/dev/null; printf "#!/bin/sh\ntouch /proc/self/cwd/PLANTED\nexit 1\n" > sluice-inner && chmod 755 sluice-inner; true'
srun root "$B" "$T/s.json" "$PLANT" "$B/sluice"
srun root "$B" "$T/s.json" 'echo next' "$B/sluice"
if [ ! -e "$B/PLANTED" ] && [ ! -e "$B/sluice-inner" ]; then
    ok "B: root: no sluice-inner planted beside a sluice in a root:OTHER 555 directory"
else bad "B: root: a planted sluice-inner (ran: $([ -e "$B/PLANTED" ] && echo yes || echo no))" "$OUT"; fi

# --- C. a nested repository's .git owned root:OTHER 555, no hooks ------------------------------------
C=$T/c
mkdir -p "$C/sub/.git" && chown "0:$OG" "$C/sub/.git" && chmod 555 "$C/sub/.git"
srun root "$C" "$T/s.json" 'chmod u+w sub/.git 2>/dev/null; mkdir -p sub/.git/hooks; echo x > sub/.git/config; true'
if [ ! -e "$C/sub/.git/hooks" ] || [ -z "$(ls -A "$C/sub/.git/hooks")" ] && [ ! -s "$C/sub/.git/config" ] &&
    [ "$(stat -c %a "$C/sub/.git")" = 555 ]; then
    ok "C: a nested .git of root:OTHER 555: no hooks or config made (exit $RC)"
else bad "C: nested .git: the command made hooks or config" "exit $RC $OUT
$(ls -lA "$C/sub/.git")"; fi

# --- D. write by ACL, group root, sticky bits: mount points --------------------------------------
d_case() { # NAME DIR
    local n=$1 d=$2 before
    before=$(ls -A "$d")
    srun root "$d" "$T/s.json" "$TRY"
    m=$(made "$d")
    if [ "$RC" = 0 ] && [ -z "$m" ] && [ -f "$d/plain" ]; then
        ok "D: $n: the command runs, makes other names but no protected one"
    else bad "D: $n: exit $RC, made: $m" "$OUT
$(ls -lA "$d")"; fi
    [ "$(ls -A "$d" | grep -v '^plain$')" = "$before" ] && ok "D: $n: no mount point left" ||
        bad "D: $n: left behind" "$(ls -lA "$d")"
}
mkd "$T/d1" "$U:$G" 755 && acl "$T/d1" user 0 && d_case "ACL user:root:rwx on $U:$G 755" "$T/d1"
mkd "$T/d2" "$U:$G" 755 && acl "$T/d2" group 0 && d_case "ACL group:root:rwx on $U:$G 755" "$T/d2"
mkd "$T/d3" "$U:0" 2775 && d_case "$U:root setgid 2775" "$T/d3"
mkd "$T/d4" "$U:$G" 1777 && d_case "$U:$G sticky 1777" "$T/d4"

# --- E. no write, no chmod: runs, makes nothing ----------------------------------------------------
e_case() { # NAME DIR SETTINGS PREFIX
    srun root "$2" "$3" "$4$TRY"
    m=$(made "$2")
    if [ "$RC" = 0 ] && [ -z "$m" ] && [ -z "$(ls -A "$2")" ]; then
        ok "E: $1: the command runs and makes nothing"
    else bad "E: $1: exit $RC, made: $m" "$OUT
$(ls -lA "$2")"; fi
}
mkd "$T/e1" "$U:0" 555 && e_case "$U:root 555" "$T/e1" "$T/s.json" ""
mkd "$T/e2" "$U:$G" 755 && e_case "$U:$G 755" "$T/e2" "$T/s.json" ""
mkd "$T/e3" "$U:$G" 755
srun root "$T/e3" "$T/n.json" 'unshare -Ur true && echo nested-ok'
if grep -q nested-ok <<< "$OUT"; then
    srun root "$T/e3" "$T/n.json" "unshare -Ur sh -c 'id -u; $TRY'"
    m=$(made "$T/e3")
    if [ "$RC" = 0 ] && grep -qx 0 <<< "$OUT" && [ -z "$m" ] && [ -z "$(ls -A "$T/e3")" ]; then
        ok "E: $U:$G 755, the command as uid 0 of a nested user namespace (unshare -Ur): makes nothing"
    else bad "E: nested user namespace: exit $RC, made: $m" "$OUT
$(ls -lA "$T/e3")"; fi
else echo "# SKIP E: no nested user namespace in the sandbox: $(tail -2 <<< "$OUT")"; fi

# --- F. through a symbolic link ---------------------------------------------------------------------
mkd "$T/f" "0:$OG" 555 && ln -s "$T/f" "$T/flink"
srun root "$T/flink" "$T/s.json" "$TRY"
m=$(made "$T/f")
[ -z "$m" ] && [ -z "$(ls -A "$T/f" | grep -v '^plain$')" ] &&
    ok "F: root:OTHER 555 reached through a link: no protected name made (exit $RC)" ||
    bad "F: through a link, made: $m" "exit $RC $OUT
$(ls -lA "$T/f")"

# --- G. as a user: its own 555 directory -----------------------------------------------------------
mkd "$T/g" "$U:$G" 555
srun user "$T/g" "$T/s.json" "$TRY"
m=$(made "$T/g")
if [ "$RC" = 0 ] && [ -z "$m" ]; then
    ok "G: as the user: its own 555 directory: chmod, then no protected name made"
else bad "G: as the user: own 555: exit $RC, made: $m" "$OUT
$(ls -lA "$T/g")"; fi
mkd "$T/g2" "$U:$G" 555
srun user "$T/g2" "$T/s.json" 'echo ran'
[ "$RC" = 0 ] && [ -z "$(ls -A "$T/g2")" ] && [ "$(stat -c %a "$T/g2")" = 555 ] &&
    ok "G: as the user: own 555 directory: the mount points removed after the run, mode 555 kept" ||
    bad "G: as the user: own 555: exit $RC, left" "$OUT
$(stat -c %a "$T/g2") $(ls -lA "$T/g2")"
mkdir -p "$T/gb" && cp "$T/bin/sluice" "$T/gb/" && chown -R "$U:$G" "$T/gb" && chmod 555 "$T/gb"
srun user "$T/gb" "$T/s.json" "$PLANT" "$T/gb/sluice"
srun user "$T/gb" "$T/s.json" 'echo next' "$T/gb/sluice"
if [ ! -e "$T/gb/PLANTED" ] && [ ! -e "$T/gb/sluice-inner" ]; then
    ok "G: as the user: no sluice-inner planted beside a sluice in its own 555 directory"
else bad "G: as the user: a planted sluice-inner (ran: $([ -e "$T/gb/PLANTED" ] && echo yes || echo no))" "$OUT"; fi

chmod -R u+w "$T" 2>/dev/null
e2e_finish
