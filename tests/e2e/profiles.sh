#!/usr/bin/env bash
# tests/e2e/profiles.sh SLUICE - the shipped profiles (conf/profiles/*.json) run
# through `sluice run --settings`, each against the promises it makes.
#
# The fake home and working directory live under /var/tmp, not under $T: the
# sandbox's /tmp is private, so a home under /tmp would be invisible inside
# whatever the profile says and the "hidden" checks would prove nothing. A
# control run without a profile shows first that the files are visible.
set -u
SLUICE=${1:?usage: profiles.sh path/to/sluice}
HERE=$(cd "$(dirname "$0")" && pwd)
PROFILES=$(cd "$HERE/../../conf/profiles" && pwd)
. "$HERE/lib.sh"

P=$(mktemp -d /var/tmp/sluice-profiles.XXXXXX) || { echo "cannot create a directory under /var/tmp"; exit 2; }
P=$(cd "$P" && pwd -P)
trap 'e2e_cleanup; [ -n "${KEEP:-}" ] || rm -rf "$P"' EXIT
export HOME="$P/home" XDG_CONFIG_HOME="$P/home/.config"
W="$HOME/work" # the working directory, under the home (strict-home must keep it)

mkdir -p "$HOME/.ssh" "$HOME/.cache/tool" "$HOME/.config/gh" "$HOME/.config/glab-cli" \
    "$HOME/.config/other" "$HOME/.local/share/tool" "$HOME/.local/share/applications" \
    "$HOME/.local/bin" "$W/secrets" "$W/sub"
echo SSH-KEY-SECRET >"$HOME/.ssh/id_ed25519"
echo GITCONFIG-SECRET >"$HOME/.gitconfig"
echo cache-data >"$HOME/.cache/tool/c"
echo gh-hosts >"$HOME/.config/gh/hosts.yml"
echo glab-config >"$HOME/.config/glab-cli/config.yml"
echo OTHER-TOKEN-SECRET >"$HOME/.config/other/token"
echo share-data >"$HOME/.local/share/tool/data"
echo DESKTOP-ENTRY >"$HOME/.local/share/applications/x.desktop"
printf '#!/bin/sh\necho uv-ran\n' >"$HOME/.local/bin/uv"
printf '#!/bin/sh\necho EVIL-RAN\n' >"$HOME/.local/bin/ls"
chmod +x "$HOME/.local/bin/uv" "$HOME/.local/bin/ls"
echo DOTENV-SECRET >"$W/.env"
echo DOTENV-LOCAL-SECRET >"$W/.env.local"
echo PEM-SECRET >"$W/server.pem"
echo SECRETS-DIR-SECRET >"$W/secrets/k"
echo nested-env >"$W/sub/.env"
echo readme-text >"$W/readme"
cd "$W" || exit 2

# run PROFILE SCRIPT: the script under `sluice run --settings PROFILE -- sh -c`,
# stdout in OUT, stderr in ERR, status in RC. PROFILE "control" is a settings
# file that only makes the working directory writable.
echo '{"filesystem": {"allowWrite": ["."]}}' >"$P/control.json"
run() {
    local settings=$PROFILES/$1.json
    [ "$1" = control ] && settings=$P/control.json
    OUT=$("$SLUICE" run --quiet --settings "$settings" -- sh -c "$2" 2>"$P/err" </dev/null)
    RC=$?
    ERR=$(cat "$P/err")
}
# check NAME PROFILE SCRIPT EXPECTED: the script's stdout must be EXPECTED.
check() {
    run "$2" "$3"
    if [ "$RC" -eq 0 ] && [ "$OUT" = "$4" ]; then
        ok "$1"
    else
        bad "$1" "rc=$RC
want: $4
got:  $OUT
$ERR"
    fi
}
# shows FILE: its content, or "hidden" when it cannot be read (absent, an
# empty directory's file, /dev/null bound over it, or EACCES)
SHOW='show() { c=$(cat "$1" 2>/dev/null) && [ -n "$c" ] && echo "$c" || echo hidden; }; '

# ---------------------------------------------------------------- control
check "control: the home's files are visible without a profile" control \
    "$SHOW"'show ~/.ssh/id_ed25519; show ~/.config/other/token; show .env' \
    "SSH-KEY-SECRET
OTHER-TOKEN-SECRET
DOTENV-SECRET"

# ---------------------------------------------------------------- default
check "default: the working directory is writable" default \
    'echo made >made-by-default && cat made-by-default' "made"
[ "$(cat "$W/made-by-default" 2>/dev/null)" = made ] && ok "default: the write reached the host" ||
    bad "default: the write reached the host"
check "default: nothing outside the working directory is writable" default \
    'touch ~/outside 2>/dev/null && echo wrote || echo refused; touch /usr/x 2>/dev/null || echo refused' \
    "refused
refused"
if [ -d /etc/ssh/ssh_config.d ] && [ -n "$(ls -A /etc/ssh/ssh_config.d 2>/dev/null)" ]; then
    check "default: /etc/ssh/ssh_config.d is hidden (the reference's default denyRead)" default \
        'ls -A /etc/ssh/ssh_config.d | wc -l' "0"
fi
if command -v curl >/dev/null; then
    # a proxied request to any host is refused (403 from the in-sandbox proxy);
    # a direct connection to a listener on the host's loopback has no route
    OPORT=$(free_port)
    python3 -m http.server --bind 127.0.0.1 "$OPORT" >/dev/null 2>&1 &
    PIDS+=($!)
    for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$OPORT/" && break; sleep 0.1; done
    check "default: network denied (proxy answers 403; direct connection fails)" default \
        "curl -s -o /dev/null -w '%{http_code}\n' --max-time 10 http://example.com/;
         curl -s -o /dev/null --noproxy '*' --max-time 5 http://127.0.0.1:$OPORT/ && echo direct-ok || echo direct-failed" \
        "403
direct-failed"
else
    ok "default: network check skipped (no curl) # SKIP"
fi

# ---------------------------------------------------------------- strict-home
check "strict-home: ~/.ssh, ~/.gitconfig and ~/.config/other are invisible" strict-home \
    "$SHOW"'show ~/.ssh/id_ed25519; show ~/.gitconfig; show ~/.config/other/token; ls -A ~/.config' \
    "hidden
hidden
hidden
gh
glab-cli"
check "strict-home: ~/.cache and ~/.local/share are visible and writable" strict-home \
    "$SHOW"'show ~/.cache/tool/c; show ~/.local/share/tool/data;
     echo new-cache >~/.cache/new && echo new-share >~/.local/share/tool/new && echo wrote' \
    "cache-data
share-data
wrote"
[ "$(cat "$HOME/.cache/new" "$HOME/.local/share/tool/new" 2>/dev/null)" = "new-cache
new-share" ] && ok "strict-home: writes to ~/.cache and ~/.local/share reached the host" ||
    bad "strict-home: writes to ~/.cache and ~/.local/share reached the host"
check "strict-home: ~/.local/share/applications is masked" strict-home \
    "$SHOW"'show ~/.local/share/applications/x.desktop' "hidden"
check "strict-home: ~/.config/gh and ~/.config/glab-cli are readable, not writable" strict-home \
    "$SHOW"'show ~/.config/gh/hosts.yml; show ~/.config/glab-cli/config.yml;
     echo x >~/.config/gh/hosts.yml 2>/dev/null && echo wrote || echo refused' \
    "gh-hosts
glab-config
refused"
check "strict-home: the working directory under the home is visible and writable" strict-home \
    'cat readme && echo w >made-by-strict && cat made-by-strict && pwd' \
    "readme-text
w
$W"
check "strict-home: the rest of the home is writable inside, as in the shell sandboxes" strict-home \
    'touch ~/new && mkdir -p ~/.local/state/tool ~/.npm/_logs && echo s >~/.local/state/tool/s &&
     echo l >~/.npm/_logs/l.log && echo b >~/.local/bin/mine && echo wrote' "wrote"
if [ ! -e "$HOME/new" ] && [ ! -e "$HOME/.local/state" ] && [ ! -e "$HOME/.npm" ] &&
    [ ! -e "$HOME/.local/bin/mine" ]; then
    ok "strict-home: ... and what was written there is discarded after the run"
else
    bad "strict-home: writes to the hidden home reached the host" "$(ls -la "$HOME" "$HOME/.local/bin")"
fi
check "strict-home: ~/.ssh stays hidden even after a write into the hidden home" strict-home \
    "$SHOW"'echo x >~/.ssh/new 2>/dev/null; show ~/.ssh/id_ed25519' "hidden"
# the host's PATH has ~/.local/bin first (as Debian's ~/.profile does): it
# must end up last, and only uv of it is visible
OLDPATH=$PATH
export PATH="$HOME/.local/bin:$PATH:$HOME/.local/bin"
check "strict-home: PATH ends with ~/.local/bin (appended, moved from the front)" strict-home \
    'case "$PATH" in "$HOME/.local/bin:"*) echo first;; *":$HOME/.local/bin") echo last;; *) echo "$PATH";; esac;
     echo "$PATH" | tr : "\n" | grep -c "^$HOME/.local/bin\$"' \
    "last
1"
export PATH=$OLDPATH
check "strict-home: uv runs from ~/.local/bin, a planted ls does not" strict-home \
    'uv; ls -d / ; test -e ~/.local/bin/ls && echo planted-visible || echo planted-hidden' \
    "uv-ran
/
planted-hidden"
check "strict-home: GIT_CONFIG_SYSTEM=/dev/null" strict-home 'echo "$GIT_CONFIG_SYSTEM"' "/dev/null"
if command -v git >/dev/null; then
    check "strict-home: git reads no system config" strict-home \
        'git config --system --list >/dev/null 2>&1; git config --show-origin --list --system 2>/dev/null | wc -l' "0"
fi

# ---------------------------------------------------------------- agent
# wrapping an agent itself: its own credentials kept, others dropped; ~/.claude
# and ~/.claude.json writable (created when missing); git's global config off,
# its safe settings from the environment
rm -rf "$HOME/.claude" "$HOME/.claude.json"
ANTHROPIC_API_KEY=sk-ant-test CLAUDE_CODE_OAUTH_TOKEN=oauth-test CLAUDE_CONFIG_FLAG=1 \
    GITHUB_TOKEN=ghp-SECRET AWS_SECRET_ACCESS_KEY=AWS-SECRET \
    check "agent: its own credentials are kept, other secrets are not" agent \
    'echo "$ANTHROPIC_API_KEY $CLAUDE_CODE_OAUTH_TOKEN $CLAUDE_CONFIG_FLAG [${GITHUB_TOKEN:-}${AWS_SECRET_ACCESS_KEY:-}]"' \
    "sk-ant-test oauth-test 1 []"
check "agent: ~/.claude and ~/.claude.json exist and are writable" agent \
    'echo s >~/.claude/settings.json && echo "{}" >~/.claude.json && echo wrote' "wrote"
[ "$(cat "$HOME/.claude/settings.json" "$HOME/.claude.json" 2>/dev/null)" = "s
{}" ] && ok "agent: writes to ~/.claude and ~/.claude.json reached the host" ||
    bad "agent: writes to ~/.claude and ~/.claude.json reached the host"
if command -v git >/dev/null; then
    # GIT_CONFIG_GLOBAL named a file nothing created (issue 21): now one that exists
    check "agent: git's global config is /dev/null, its safe settings come from the environment, ~/.gitconfig is hidden" agent \
        'echo "$GIT_CONFIG_GLOBAL"; test -e "$GIT_CONFIG_GLOBAL" && echo exists;
         git config --get protocol.ext.allow; git config --get core.fsmonitor;
         cat ~/.gitconfig 2>/dev/null || echo gitconfig-hidden' \
        "/dev/null
exists
never
false
gitconfig-hidden"
fi
check "agent: ~/.ssh is hidden" agent "$SHOW"'show ~/.ssh/id_ed25519' "hidden"

# ---------------------------------------------------------------- workdir
check "workdir: .env, .env.local, *.pem and secrets/ in the working directory are hidden" workdir \
    "$SHOW"'show .env; show .env.local; show server.pem; show secrets/k; ls -A secrets | wc -l' \
    "hidden
hidden
hidden
hidden
0"
check "workdir: the rest of the working directory is readable and writable" workdir \
    'cat readme sub/.env && echo w >made-by-workdir && cat made-by-workdir' \
    "readme-text
nested-env
w"
check "workdir: system paths are readable" workdir \
    'test -x /usr/bin/env && head -c0 /etc/os-release && echo readable' "readable"
if [ -r /var/lib/dpkg/status ]; then
    check "workdir: /var/lib/dpkg is re-allowed inside the hidden /var" workdir \
        'head -c 8 /var/lib/dpkg/status >/dev/null && echo readable' "readable"
fi
if [ -d /var/log ] && [ -n "$(ls -A /var/log 2>/dev/null)" ]; then
    check "workdir: /var/log is hidden" workdir 'ls -A /var/log 2>/dev/null | wc -l' "0"
fi
check "workdir: the home (under a hidden data root) is invisible" workdir \
    "$SHOW"'show ~/.ssh/id_ed25519; show ~/.config/gh/hosts.yml' \
    "hidden
hidden"
for d in /home /root /srv /opt /mnt; do
    if [ -d "$d" ] && [ -n "$(ls -A "$d" 2>/dev/null)" ]; then
        check "workdir: $d is hidden" workdir "ls -A $d 2>/dev/null | wc -l" "0"
    fi
done

# every profile loads and runs a plain command
for p in "$PROFILES"/*.json; do
    name=$(basename "$p" .json)
    check "$name: loads and runs true" "$name" 'echo ran' "ran"
done

e2e_finish
