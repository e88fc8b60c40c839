#!/usr/bin/env bash
# tests/e2e/learn.sh - learning a policy (issue 26, deliverable 3): a run in
# report mode (`sluice run --learn FILE`) of `git clone` from a dumb-HTTP
# origin, `pip download` from a simple index whose wheel lives on a second
# name of the same domain, and `npm install` from a small registry (when
# npm is here); the fragment it writes is compared whole; then the same
# commands WITHOUT report mode under `--settings FILE` succeed, the same
# commands without it fail, and a host not seen is still denied.
# `sluice check --learn` on the run's --log gives the same fragment.
#
# Everything runs in private network namespaces: this script's own (made
# with `unshare -n` as root, `unshare -rn` otherwise), where sluice and a
# dnsmasq on 127.0.0.1 run, and the origins' (a veth pair between the two,
# 10.203.0.0/24): their addresses must not be this host's own, which the
# guard refuses. Names resolve only through that dnsmasq.
set -uo pipefail
SLUICE=${1:?usage: learn.sh PATH/TO/sluice}
case $SLUICE in /*) ;; *) SLUICE=$(cd "$(dirname "$SLUICE")" && pwd)/$(basename "$SLUICE") ;; esac
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

if [ -z "${SLUICE_LEARN_NETNS:-}" ]; then
    if [ "$(id -u)" -eq 0 ]; then
        exec unshare -n env SLUICE_LEARN_NETNS=1 bash "${BASH_SOURCE[0]}" "$SLUICE"
    fi
    unshare -rn true 2>/dev/null || { echo "ok - learn # SKIP no private network namespace"; exit 77; }
    exec unshare -rn env SLUICE_LEARN_NETNS=1 SLUICE_LEARN_USERNS=1 bash "${BASH_SOURCE[0]}" "$SLUICE"
fi
. "$HERE/lib.sh"

fail_setup() { bad "$1" "${2:-}"; e2e_finish; exit 1; }
# the interpreter itself, not a version manager's shim (pyenv's costs a
# second a call on a loaded machine)
PY=$(python3 -c 'import sys; print(sys.executable)')

# --- the namespaces ---------------------------------------------------------
ip link set lo up || fail_setup "lo up in the private namespace"
if ip route get 1.1.1.1 >/dev/null 2>&1; then
    fail_setup "this is not a private network namespace: it has a route out"
fi
unshare -n sleep 600 &
ONS=$!
PIDS+=($ONS)
# the origins' namespace exists once unshare has made it (its namespace is
# not ours), not after a fixed 0.1 s: before that, "netns $ONS" named this
# namespace and the veth peer landed here (as in transparent_udp.sh)
for _ in $(seq 200); do
    [ "$(readlink /proc/$ONS/ns/net)" != "$(readlink /proc/self/ns/net)" ] && break
    sleep 0.05
done
in_origin() { nsenter -t "$ONS" -n "$@"; }
ip link add vlearn0 type veth peer name vlearn1 netns "$ONS" &&
    ip addr add 10.203.0.1/24 dev vlearn0 && ip link set vlearn0 up &&
    in_origin ip link set lo up &&
    in_origin ip addr add 10.203.0.2/24 dev vlearn1 &&
    in_origin ip addr add 10.203.0.3/24 dev vlearn1 &&
    in_origin ip addr add 10.203.0.4/24 dev vlearn1 &&
    in_origin ip link set vlearn1 up || fail_setup "the origins' namespace and its veth pair"

# --- the origins ------------------------------------------------------------
W=$T/www
mkdir -p "$W/git" "$W/pkgs/simple/learnpkg" "$W/npm/learnpkg/-"
# git: a bare repository served as files (dumb HTTP)
(
    cd "$T" && git init -q -b main src && cd src &&
        echo learned > README && git add README &&
        git -c user.name=t -c user.email=t@t commit -q -m one &&
        git clone -q --bare . "$W/git/repo.git" && cd "$W/git/repo.git" && git update-server-info
) || fail_setup "the git repository"
# pip: a wheel made here, its index on pypi.pkgs.test, the file on files.pkgs.test
"$PY" - "$W/pkgs" <<'PY' || fail_setup "the wheel"
import base64, hashlib, sys, zipfile
d = sys.argv[1]
name = "learnpkg-1.0-py3-none-any.whl"
files = {
    "learnpkg/__init__.py": b"VALUE = 1\n",
    "learnpkg-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: learnpkg\nVersion: 1.0\n",
    "learnpkg-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: learn.sh\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
rec = ""
for n, b in files.items():
    h = base64.urlsafe_b64encode(hashlib.sha256(b).digest()).rstrip(b"=").decode()
    rec += "%s,sha256=%s,%d\n" % (n, h, len(b))
rec += "learnpkg-1.0.dist-info/RECORD,,\n"
with zipfile.ZipFile(d + "/" + name, "w") as z:
    for n, b in files.items():
        z.writestr(n, b)
    z.writestr("learnpkg-1.0.dist-info/RECORD", rec)
sha = hashlib.sha256(open(d + "/" + name, "rb").read()).hexdigest()
open(d + "/simple/learnpkg/index.html", "w").write(
    '<html><body><a href="http://files.pkgs.test:8080/%s#sha256=%s">%s</a></body></html>\n'
    % (name, sha, name))
PY
# npm: a package document and its tarball
(
    mkdir -p "$T/npmsrc/package" && cd "$T/npmsrc" &&
        printf '{"name": "learnpkg", "version": "1.0.0", "main": "index.js"}\n' > package/package.json &&
        echo 'module.exports = 1;' > package/index.js &&
        tar czf "$W/npm/learnpkg/-/learnpkg-1.0.0.tgz" package
) || fail_setup "the npm tarball"
"$PY" - "$W/npm" <<'PY' || fail_setup "the npm package document"
import base64, hashlib, json, sys
d = sys.argv[1]
b = open(d + "/learnpkg/-/learnpkg-1.0.0.tgz", "rb").read()
doc = {"name": "learnpkg", "dist-tags": {"latest": "1.0.0"}, "versions": {"1.0.0": {
    "name": "learnpkg", "version": "1.0.0", "main": "index.js",
    "dist": {"tarball": "http://registry.npm.test:8080/learnpkg/-/learnpkg-1.0.0.tgz",
             "shasum": hashlib.sha1(b).hexdigest(),
             "integrity": "sha512-" + base64.b64encode(hashlib.sha512(b).digest()).decode()}}}}
open(d + "/learnpkg/_doc.json", "w").write(json.dumps(doc))
PY
cat > "$T/origin.py" <<'PY'
# origin.py ADDR DIR [ADDR DIR...]: the files of each DIR on its ADDR:8080;
# a directory with _doc.json is that document (the npm registry's package URL)
import functools, http.server, os, sys, threading
class H(http.server.SimpleHTTPRequestHandler):
    def send_head(self):
        p = self.translate_path(self.path)
        if os.path.isdir(p) and os.path.exists(os.path.join(p, "_doc.json")):
            b = open(os.path.join(p, "_doc.json"), "rb").read()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(b)))
            self.end_headers()
            self.wfile.write(b)
            return None
        return super().send_head()
    def log_message(self, fmt, *a):
        sys.stderr.write("%s %s\n" % (self.headers.get("Host"), fmt % a))
args = sys.argv[1:]
for i in range(0, len(args), 2):
    h = functools.partial(H, directory=args[i + 1])
    s = http.server.ThreadingHTTPServer((args[i], 8080), h)
    threading.Thread(target=s.serve_forever, daemon=True).start()
print("listening", flush=True)
threading.Event().wait()
PY
# exec: the PID the cleanup kills is the server's (a function in a
# background subshell left it running after the test)
(exec nsenter -t "$ONS" -n "$PY" "$T/origin.py" 10.203.0.2 "$W/git" 10.203.0.3 "$W/pkgs" \
    10.203.0.4 "$W/npm") >"$T/origin.out" 2>"$T/origin.err" &
PIDS+=($!)
wait_for "$T/origin.out" listening 20 || fail_setup "the origins" "$(cat "$T/origin.err")"
start_dnsmasq --local=/test/ --host-record=git.vcs.test,10.203.0.2 \
    --host-record=pypi.pkgs.test,10.203.0.3 --host-record=files.pkgs.test,10.203.0.3 \
    --host-record=registry.npm.test,10.203.0.4 --host-record=other.vcs.test,10.203.0.2 \
    --host-record=loop.vcs.test,127.0.0.1
[ -n "$DPORT" ] || fail_setup "dnsmasq" "$(cat "$T/dnsmasq.err")"

# the user's settings: only the resolver (the learned file is --settings)
mkdir -p "$XDG_CONFIG_HOME/sluice"
printf '{"network": {"dnsServers": ["127.0.0.1:%s"]}}\n' "$DPORT" > "$XDG_CONFIG_HOME/sluice/settings.json"

HAVE_NPM=false
command -v npm >/dev/null 2>&1 && HAVE_NPM=true
# the commands, each leaving a mark in the working directory
cat > "$T/cmds.sh" <<SH
git clone -q http://git.vcs.test:8080/repo.git clone && echo ok > git.ok
$PY -m pip download -q --no-deps --no-cache-dir --disable-pip-version-check --retries 0 \
    --index-url http://pypi.pkgs.test:8080/simple/ --trusted-host pypi.pkgs.test \
    --trusted-host files.pkgs.test -d pipdir learnpkg && echo ok > pip.ok
if $HAVE_NPM; then
    npm_config_cache=\$PWD/.npmcache npm install --no-audit --no-fund --no-update-notifier --fetch-retries=0 \
        --loglevel=error --registry http://registry.npm.test:8080/ learnpkg >npm.out 2>&1 &&
        [ -f node_modules/learnpkg/index.js ] && echo ok > npm.ok
fi
exit 0
SH
marks() { # DIR: the tools that left their mark
    local m out=
    for m in git pip npm; do [ -f "$1/$m.ok" ] && out="$out $m"; done
    echo "${out# }"
}
WANT_MARKS="git pip"
$HAVE_NPM && WANT_MARKS="git pip npm"

# --- learn: report mode, the commands, and two the guard refuses -------------
# (the sandbox has a /tmp of its own: the script goes in each working directory)
for d in w1 w2 w3; do mkdir -p "$T/$d" && cp "$T/cmds.sh" "$T/$d/"; done
(cd "$T/w1" && "$SLUICE" run --learn "$T/learned.json" --log "$T/learn.log" -- sh -c \
    'sh ./cmds.sh; curl -s -o /dev/null --max-time 5 http://loop.vcs.test:8080/;
     curl -s -o /dev/null --max-time 5 --noproxy "" http://10.203.0.2:8080/; exit 0') \
    >"$T/learn.out" 2>"$T/learn.err"
rc=$?
[ "$rc" = 0 ] && ok "run --learn: the run exits 0" || bad "run --learn: the run exits 0 (got $rc)" "$(cat "$T/learn.err")"
got=$(marks "$T/w1")
[ "$got" = "$WANT_MARKS" ] && ok "run --learn: in report mode, $WANT_MARKS worked" ||
    bad "run --learn: in report mode, $WANT_MARKS worked (got '$got')" "$(cat "$T/learn.err" "$T/w1/npm.out" 2>/dev/null | tail -20)"
want='{
  "network": {
    "allowedDomains": [
      "*.pkgs.test:8080",
      "git.vcs.test:8080"'
$HAVE_NPM && want="$want"',
      "registry.npm.test:8080"'
want="$want"'
    ]
  }
}'
if [ "$(cat "$T/learned.json" 2>/dev/null)" = "$want" ]; then
    ok "run --learn: the fragment (sorted, ports kept, *.pkgs.test for its two names)"
else
    bad "run --learn: the fragment" "$(printf 'got:\n%s\nwant:\n%s\n' "$(cat "$T/learned.json" 2>/dev/null)" "$want")"
fi
mode=$(stat -c %a "$T/learned.json" 2>/dev/null)
[ "$mode" = 644 ] && ok "run --learn: the file is mode 644 (umask 022)" || bad "run --learn: mode $mode, want 644"
grep -q "^sluice: not learned: loop.vcs.test:8080: the address guard refused its answer 127.0.0.1" "$T/learn.err" &&
    ok "run --learn: the guard's refusal (a loopback answer) is noted, not learned" ||
    bad "run --learn: the guard's refusal is noted" "$(cat "$T/learn.err")"
grep -q "^sluice: not learned: 10.203.0.2:8080: an address outside the public range (private)" "$T/learn.err" &&
    ok "run --learn: a private IP literal is noted, not learned" ||
    bad "run --learn: a private IP literal is noted" "$(cat "$T/learn.err")"
grep -qE "^sluice: learned [0-9]+ network.allowedDomains entries .* into $T/learned.json" "$T/learn.err" &&
    ok "run --learn: one summary line" || bad "run --learn: one summary line" "$(cat "$T/learn.err")"

# check --learn on the run's log: the same fragment
"$SLUICE" check --learn "$T/learn.log" >"$T/check.json" 2>"$T/check.err"
cmp -s "$T/check.json" "$T/learned.json" && ok "check --learn LOG: the same fragment as the run" ||
    bad "check --learn LOG: the same fragment as the run" "$(diff "$T/check.json" "$T/learned.json"; cat "$T/check.err")"
# with --settings BASE: only what BASE does not allow
printf '{"network": {"dnsServers": ["127.0.0.1:%s"], "allowedDomains": ["git.vcs.test:8080"]}}\n' "$DPORT" > "$T/base.json"
"$SLUICE" check --learn "$T/learn.log" --settings "$T/base.json" >"$T/check2.json" 2>"$T/check2.err"
if ! grep -q git.vcs.test "$T/check2.json" && grep -q '"\*.pkgs.test:8080"' "$T/check2.json" &&
        grep -q '1 already allowed' "$T/check2.err"; then
    ok "check --learn --settings BASE: what BASE allows is left out"
else
    bad "check --learn --settings BASE: what BASE allows is left out" "$(cat "$T/check2.json" "$T/check2.err")"
fi

# --- enforce: the fragment allows exactly those runs ----------------------------
(cd "$T/w2" && "$SLUICE" run -s "$T/learned.json" --log "$T/enforce.log" --log-format json -- sh ./cmds.sh) \
    >"$T/enforce.out" 2>"$T/enforce.err"
got=$(marks "$T/w2")
[ "$got" = "$WANT_MARKS" ] && ok "enforce mode under the fragment: $WANT_MARKS work" ||
    bad "enforce mode under the fragment: $WANT_MARKS work (got '$got')" "$(cat "$T/enforce.err" "$T/w2/npm.out" 2>/dev/null | tail -20)"
if grep -q 'would_deny' "$T/enforce.log"; then
    bad "enforce mode: nothing reported as would_deny" "$(grep would_deny "$T/enforce.log")"
else
    ok "enforce mode: no would_deny (the run was not in report mode)"
fi
# its log, JSON lines, learned again: the same fragment (allowed records count)
"$SLUICE" check --learn "$T/enforce.log" >"$T/check3.json" 2>"$T/check3.err"
cmp -s "$T/check3.json" "$T/learned.json" && ok "check --learn on the enforce run's JSON log: the same fragment" ||
    bad "check --learn on the enforce run's JSON log: the same fragment" "$(diff "$T/check3.json" "$T/learned.json"; cat "$T/check3.err")"
(cd "$T/w3" && "$SLUICE" run -- sh ./cmds.sh) >"$T/none.out" 2>"$T/none.err"
got=$(marks "$T/w3")
[ -z "$got" ] && ok "without the fragment: none of them works" ||
    bad "without the fragment: none of them works (got '$got')" "$(cat "$T/none.err")"
code=$(cd "$T/w2" && "$SLUICE" run -s "$T/learned.json" -q -- curl -s -o /dev/null -w '%{http_code}' \
    --max-time 5 http://other.vcs.test:8080/repo.git/HEAD 2>/dev/null)
[ "$code" = 403 ] && ok "a host not seen (other.vcs.test) is still denied (403)" ||
    bad "a host not seen (other.vcs.test) is still denied (got $code)"
code=$(cd "$T/w2" && "$SLUICE" run -s "$T/learned.json" -q -- curl -s -o /dev/null -w '%{http_code}' \
    --max-time 5 http://pypi.pkgs.test:8081/ 2>/dev/null)
[ "$code" = 403 ] && ok "a port not seen (pypi.pkgs.test:8081) is still denied (403)" ||
    bad "a port not seen (pypi.pkgs.test:8081) is still denied (got $code)"

# --- the file: never through a symbolic link ------------------------------------
ln -s "$T/victim" "$T/link.json"
(cd "$T/w2" && "$SLUICE" run --learn "$T/link.json" -- true) 2>"$T/link.err"
rc=$?
[ "$rc" = 125 ] && [ ! -e "$T/victim" ] && grep -q 'a symbolic link' "$T/link.err" &&
    ok "run --learn refuses a symbolic link at FILE (125, before the run)" ||
    bad "run --learn refuses a symbolic link at FILE (rc $rc)" "$(cat "$T/link.err")"
(cd "$T/w2" && "$SLUICE" run --learn "$T/x.json" --ask tty -- true) 2>"$T/ask.err"
rc=$?
[ "$rc" = 125 ] && grep -q -- '--ask' "$T/ask.err" && ok "run --learn refuses --ask (125)" ||
    bad "run --learn refuses --ask (rc $rc)" "$(cat "$T/ask.err")"

# --- rt-9: what the command can do to the fragment and to FILE -----------------
# (run-helpers/rt9_learn.py) names with wildcards, quotes, JSON, NUL, ports,
# odd IP spellings, public suffixes and a private suffix (github.io): only
# plain names are learned, each as itself, never a wildcard over a suffix
rt9_files() { # TAG DIR RUN...: the FILE attacks, with RUN as the launcher (sluice or `as DIR sluice`)
    local tag=$1 d=$2 rc
    shift 2
    mkdir -p "$d/victimdir" "$d/w/out" && printf 'VICTIM\n' > "$d/victim"
    cp "$HERE/run-helpers/rt9_learn.py" "$d/w/"
    [ -n "${RT9_OWNER:-}" ] && chown -R "$RT9_OWNER" "$d"
    # FILE's folder renamed and replaced by a link to a host folder, after the open
    "$@" run --learn "$d/w/out/b.json" -- python3 rt9_learn.py swapdir out "$d/victimdir" >"$T/rt9b.out" 2>&1
    [ -z "$(ls -A "$d/victimdir")" ] && [ -L "$d/w/out" ] &&
        ok "rt9 $tag: FILE's folder swapped for a link during the run: nothing written in the link's target" ||
        bad "rt9 $tag: FILE's folder swapped for a link" "$(ls -la "$d/victimdir" "$d/w" "$d/w/out.moved" 2>&1; cat "$T/rt9b.out")"
    rm -f "$d/w/out"; mkdir -p "$d/w/out"
    [ -n "${RT9_OWNER:-}" ] && chown "$RT9_OWNER" "$d/w/out"
    # FILE replaced by a link to a host file
    echo '{}' > "$d/w/out/c.json"
    "$@" run --learn "$d/w/out/c.json" -- python3 rt9_learn.py symlink out/c.json "$d/victim" >"$T/rt9c.out" 2>&1; rc=$?
    [ "$(cat "$d/victim")" = VICTIM ] && [ "$rc" != 0 ] && grep -q "a symbolic link now; not written" "$T/rt9c.out" &&
        ok "rt9 $tag: FILE replaced by a symbolic link during the run: not written through it (rc $rc)" ||
        bad "rt9 $tag: FILE replaced by a symbolic link" "rc $rc: $(cat "$d/victim" "$T/rt9c.out")"
    # FILE replaced by a FIFO: no hang
    "$@" run --learn "$d/w/out/d.json" -- python3 rt9_learn.py fifo out/d.json >"$T/rt9d.out" 2>&1 &
    local p=$! w
    (sleep 60; kill -9 "$p") 2>/dev/null &
    w=$!
    wait "$p"; rc=$?
    kill "$w" 2>/dev/null; wait "$w" 2>/dev/null
    [ "$rc" = 1 ] && [ -p "$d/w/out/d.json" ] && grep -q "not a regular file now; not written" "$T/rt9d.out" &&
        ok "rt9 $tag: FILE replaced by a FIFO: refused, no hang (rc 1)" || bad "rt9 $tag: FILE replaced by a FIFO" "rc $rc: $(cat "$T/rt9d.out")"
    # FILE replaced by a folder
    "$@" run --learn "$d/w/out/f.json" -- python3 rt9_learn.py dir out/f.json >"$T/rt9f.out" 2>&1; rc=$?
    [ "$rc" = 1 ] && [ "$(cat "$d/w/out/f.json/keep" 2>/dev/null)" = keep ] &&
        ok "rt9 $tag: FILE replaced by a folder: refused, the folder untouched (rc 1)" || bad "rt9 $tag: FILE replaced by a folder" "rc $rc: $(cat "$T/rt9f.out")"
    # FILE a hard link of another file (made before the run): replaced, the other file untouched
    ln -f "$d/victim" "$d/w/out/e.json"
    "$@" run --learn "$d/w/out/e.json" -- true >"$T/rt9e.out" 2>&1; rc=$?
    [ "$rc" = 0 ] && [ "$(cat "$d/victim")" = VICTIM ] && grep -q allowedDomains "$d/w/out/e.json" &&
        ok "rt9 $tag: FILE a hard link of another file: the file replaced, the other untouched" ||
        bad "rt9 $tag: FILE a hard link" "rc $rc: $(cat "$d/victim" "$T/rt9e.out")"
}
mkdir -p "$T/rt9/w"
cp "$HERE/run-helpers/rt9_learn.py" "$T/rt9/w/"
(cd "$T/rt9/w" && "$SLUICE" run --learn "$T/rt9/names.json" -- python3 rt9_learn.py names) >"$T/rt9a.out" 2>&1
rc=$?
want='{
  "network": {
    "allowedDomains": [
      "a.co.uk:8080",
      "b.co.uk:8080",
      "co.uk:8080",
      "git.vcs.test:8080",
      "upper.co.uk:8080",
      "x.github.io:8080",
      "y.github.io:8080"
    ]
  }
}'
if [ "$rc" = 0 ] && [ "$(cat "$T/rt9/names.json" 2>/dev/null)" = "$want" ] && grep -q "^done names" "$T/rt9a.out"; then
    ok "rt9: odd names learn only plain names (no wildcard, no JSON, no IP of a non-public class, no *.github.io or *.co.uk)"
else
    bad "rt9: odd names in the fragment (rc $rc)" "$(cat "$T/rt9/names.json" "$T/rt9a.out" 2>/dev/null)"
fi
cd "$T/rt9/w" && rt9_files root "$T/rt9" "$SLUICE"
cd "$T" || exit 1

# --- the same as an unprivileged user (root only): git alone, to stay short ---
user_pass() {
    local U G dir sl
    command -v setpriv >/dev/null 2>&1 || { echo "ok - [user] learn # SKIP no setpriv"; return; }
    id sluicetest >/dev/null 2>&1 || useradd -M -s /usr/sbin/nologin sluicetest >/dev/null 2>&1
    U=$(id -u sluicetest 2>/dev/null || id -u nobody) G=$(id -g sluicetest 2>/dev/null || id -g nobody)
    dir=$(mktemp -d /tmp/sluice-learn-user.XXXXXX) || return
    chmod 755 "$dir"
    cp "$SLUICE" "$dir/sluice" && chmod 755 "$dir/sluice"
    mkdir -p "$dir/cfg/sluice" "$dir/u1" "$dir/u2"
    cp "$XDG_CONFIG_HOME/sluice/settings.json" "$dir/cfg/sluice/"
    chown -R "$U:$G" "$dir/u1" "$dir/u2"
    chmod -R a+rX "$dir"
    chown "$U:$G" "$dir"
    as() { (cd "$dir/$1" && shift && setpriv --reuid="$U" --regid="$G" --clear-groups --inh-caps=-all \
        env HOME="$dir" XDG_CONFIG_HOME="$dir/cfg" "$@"); }
    as u1 "$dir/sluice" run --learn "$dir/learned.json" -- git clone -q http://git.vcs.test:8080/repo.git c \
        >"$T/user1.out" 2>"$T/user1.err"
    if [ -f "$dir/u1/c/README" ] && [ "$(grep -c '"' "$dir/learned.json" 2>/dev/null)" = 3 ] &&
            grep -q '"git.vcs.test:8080"' "$dir/learned.json"; then
        ok "[user] run --learn: git clone in report mode, the fragment is git.vcs.test:8080"
    else
        bad "[user] run --learn: git clone in report mode" "$(cat "$T/user1.err" "$dir/learned.json" 2>/dev/null)"
    fi
    as u2 "$dir/sluice" run -s "$dir/learned.json" -- git clone -q http://git.vcs.test:8080/repo.git c \
        >"$T/user2.out" 2>"$T/user2.err"
    [ -f "$dir/u2/c/README" ] && ok "[user] enforce mode under the fragment: git clone works" ||
        bad "[user] enforce mode under the fragment: git clone works" "$(cat "$T/user2.err")"
    RT9_OWNER="$U:$G" rt9_files "[user]" "$dir/rt9" as rt9/w "$dir/sluice"
    rm -rf "$dir"
}
[ "$(id -u)" -eq 0 ] && [ -z "${SLUICE_LEARN_USERNS:-}" ] && user_pass

e2e_finish
