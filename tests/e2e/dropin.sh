#!/usr/bin/env bash
# tests/e2e/dropin.sh - issue 15: the reference runtime's settings used
# unchanged, and nothing accepted then silently ignored. Each case runs a
# real command under real bwrap and checks what it can actually do (as root,
# then as an unprivileged user through run-helpers/twice.sh). Everything is
# on 127.0.0.1 or inside the sandbox.
set -uo pipefail
SLUICE=${1:?usage: dropin.sh PATH/TO/sluice}
case $SLUICE in /*) ;; *) SLUICE=$(cd "$(dirname "$SLUICE")" && pwd)/$(basename "$SLUICE") ;; esac
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/lib.sh"
. "$HERE/run-helpers/twice.sh"

cases() {
    local W S=$T/s.json out rc err
    # the working directory outside /tmp (private in the sandbox), so the
    # cases can leave it read-only
    W=$(mktemp -d /var/tmp/sluice-dropin.XXXXXX) || { bad "mktemp /var/tmp"; return; }
    EXTRA_RM+=("$W")
    # the home too: under /tmp it would be invisible in the sandbox anyway
    # and a "hidden" check would prove nothing
    HOME=$(mktemp -d /var/tmp/sluice-dropin-home.XXXXXX) || { bad "mktemp home"; return; }
    EXTRA_RM+=("$HOME")
    chmod 755 "$HOME"
    export HOME XDG_CONFIG_HOME=$HOME/.config
    export XDG_RUNTIME_DIR=$T/xdg
    mkdir -p -m 700 "$XDG_RUNTIME_DIR"
    cd "$W" || return
    sr() { "$SLUICE" run --quiet --settings "$S" "$@"; }

    # --- $HOME in a path list is expanded, never skipped -------------------------------
    echo secret-rc > "$HOME/.bashrc"
    mkdir -p "$HOME/.aws"; echo key > "$HOME/.aws/credentials"
    printf '{}\n' > "$S"
    out=$(sr -- sh -c 'cat "$HOME/.bashrc"; cat "$HOME/.aws/credentials"' 2>&1)
    if grep -q secret-rc <<< "$out" && grep -q key <<< "$out"; then
        ok "control: without denyRead both files are readable"
    else bad "control: home files readable" "$out"; fi
    cat > "$S" <<'JSON'
{"filesystem": {"denyRead": ["$HOME/.bashrc", "${HOME}/.aws"]}}
JSON
    out=$(sr -- sh -c 'cat "$HOME/.bashrc"; cat "$HOME/.aws/credentials"' 2>&1); rc=$?
    case $out in
        *secret-rc*|*key*) bad "denyRead \$HOME/.bashrc and \${HOME}/.aws hide them" "exit $rc: $out" ;;
        *) ok "denyRead \$HOME/.bashrc and \${HOME}/.aws hide them" ;;
    esac
    printf '{"filesystem": {"denyRead": ["$SECRETS/x"]}}\n' > "$S"
    err=$(sr -- sh -c 'echo RAN' 2>&1); rc=$?
    if [ "$rc" -eq 125 ] && ! grep -q RAN <<< "$err" &&
        grep -qF "s.json:1:30: filesystem.denyRead[0]: '\$SECRETS/x': only \$HOME" <<< "$err"; then
        ok "an unknown \$VARIABLE in a path is an error naming the entry (125, not run)"
    else bad "unknown \$VARIABLE refused" "exit $rc: $err"; fi

    # --- a directory hidden by denyRead is writable inside, discarded after ----------------
    printf '{"filesystem": {"denyRead": ["~/.aws"]}}\n' > "$S"
    mkdir -p "$HOME/.npm/_logs"; echo old-log > "$HOME/.npm/_logs/old.log"
    err=$(sr -- sh -c 'echo cache > "$HOME/.aws/cache" && cat "$HOME/.aws/cache" && ls "$HOME/.aws" && echo l > "$HOME/.npm/_logs/new.log" && echo LOGGED' 2>&1); rc=$?
    if [ "$rc" -eq 0 ] && grep -q LOGGED <<< "$err" && ! grep -q credentials <<< "$err" &&
        [ ! -e "$HOME/.aws/cache" ] && [ ! -e "$HOME/.npm/_logs/new.log" ] && [ -f "$HOME/.npm/_logs/old.log" ]; then
        ok "a denyRead directory and ~/.npm/_logs are writable inside and discarded after the run"
    else bad "hidden directory writable and discarded" "exit $rc: $err"; fi

    # --- filesystem lists from files --------------------------------------------------------
    mkdir -p "$W/lists" "$W/data"; echo tok > "$W/data/a.token"; echo tok > "$W/data/b.token"; echo pub > "$W/data/readme"
    printf '# secrets\n$HOME/.bashrc   # the shell\n\n%s/data/*.token\n' "$W" > "$W/lists/deny.txt"
    printf '{"filesystem": {"denyReadFiles": ["lists/deny.txt"], "allowWrite": ["."]}}\n' > "$S"
    cp "$S" "$W/s.json"
    out=$(cd "$W" && "$SLUICE" run --quiet --settings s.json -- sh -c 'cat "$HOME/.bashrc" data/a.token data/b.token data/readme 2>/dev/null; echo x 2>/dev/null >> lists/deny.txt && echo WROTE' 2>/dev/null)
    if [ "$out" = pub ]; then
        ok "filesystem.denyReadFiles: paths, \$HOME and globs from a list file are hidden; the list file is read-only"
    else bad "denyReadFiles" "$out"; fi
    printf '/ok\n  $NOPE/x\n' > "$W/lists/bad.txt"
    printf '{"filesystem": {"denyReadFiles": ["lists/bad.txt"]}}\n' > "$W/s.json"
    err=$(cd "$W" && "$SLUICE" run --quiet --settings s.json -- true 2>&1); rc=$?
    if [ "$rc" -eq 125 ] && grep -qF "lists/bad.txt:2:3: filesystem.denyReadFiles[2]: '\$NOPE/x'" <<< "$err"; then
        ok "a bad entry in a list file is an error naming file:line:col"
    else bad "bad list entry location" "exit $rc: $err"; fi
    rm -f "$W/s.json"

    # --- a glob that matches nothing is warned about ------------------------------------
    printf '{"filesystem": {\n  "denyRead": ["nothing-here-*"]}}\n' > "$S"
    err=$(sr -- true 2>&1); rc=$?
    if [ "$rc" -eq 0 ] && grep -qF "warning: $S:2:16: filesystem.denyRead[0]: 'nothing-here-*' matches nothing" <<< "$err"; then
        ok "a glob matching nothing warns with file:line:col"
    else bad "glob matching nothing warns" "exit $rc: $err"; fi

    # --- DIR/** makes DIR writable, new files included ---------------------------------
    mkdir -p "$W/out/old"
    printf '{"filesystem": {"allowWrite": ["out/**"]}}\n' > "$S"
    err=$(sr -- sh -c 'echo new > out/new.txt && mkdir out/newdir && echo n > out/old/f' 2>&1); rc=$?
    if [ "$rc" -eq 0 ] && [ "$(cat "$W/out/new.txt" 2>/dev/null)" = new ] && [ -d "$W/out/newdir" ]; then
        ok "allowWrite out/** lets the command create new files in out"
    else bad "allowWrite out/**" "exit $rc: $err"; fi
    err=$(sr -- sh -c 'echo x > outside.txt' 2>&1); rc=$?
    if [ "$rc" -ne 0 ] && [ ! -e "$W/outside.txt" ]; then
        ok "... and the working directory itself stays read-only"
    else bad "working directory read-only with allowWrite out/**" "exit $rc: $err"; fi

    # --- git.safeDirectories reaches git ------------------------------------------------
    # a repository owned by someone else: git refuses it ("dubious ownership")
    # unless it is a safe directory. Only root can make one for the test.
    if [ "$(id -u)" -eq 0 ] && command -v git >/dev/null; then
        local G
        G=$(mktemp -d /var/tmp/sluice-dropin-git.XXXXXX) && EXTRA_RM+=("$G")
        chmod 755 "$G"; git -C "$G" init -q && chown -R 65534:65534 "$G"
        printf '{"filesystem": {"allowWrite": ["."]}}\n' > "$S"
        err=$(sr -- git -C "$G" status --short 2>&1); rc=$?
        if [ "$rc" -ne 0 ] && grep -q 'dubious ownership' <<< "$err"; then
            ok "control: git refuses a repository owned by another user"
        else bad "control: dubious ownership" "exit $rc: $err"; fi
        printf '{"filesystem": {"allowWrite": ["."]}, "git": {"safeDirectories": ["%s"]}}\n' "$G" > "$S"
        err=$(sr -- git -C "$G" status --short 2>&1); rc=$?
        if [ "$rc" -eq 0 ]; then
            ok "git.safeDirectories makes git accept that repository"
        else bad "git.safeDirectories" "exit $rc: $err"; fi
    fi

    # --- sluice explain says exactly what a command can do --------------------------------
    # default settings: what it lists as protected cannot be created at the top
    # of the working directory; the working directory is writable, the rest not
    local P names name fails=
    P=$(mktemp -d /var/tmp/sluice-dropin-explain.XXXXXX) && EXTRA_RM+=("$P")
    chmod 755 "$P"
    printf '{}\n' > "$S"
    out=$("$SLUICE" explain --settings "$S")
    names=$(sed -n 's/.*levels below it they are read-only: \(.*\)\. A \.git.*/\1/p' <<< "$out" | tr -d ',')
    if [ -z "$names" ] || ! grep -q '\.claude/commands/' <<< "$names" || ! grep -q '\.claude/agents/' <<< "$names"; then
        bad "explain lists the protected names, .claude/commands/ and .claude/agents/ among them" "$out"
    else
        ok "explain lists the protected names, .claude/commands/ and .claude/agents/ among them"
    fi
    for name in $names; do
        case $name in
            */) err=$(cd "$P" && sr -- sh -c "mkdir -p '$name' && echo x > '${name}evil'" 2>&1) ;;
            *) err=$(cd "$P" && sr -- sh -c "mkdir -p \"\$(dirname '$name')\"; echo x > '$name'" 2>&1) ;;
        esac
        [ -e "$P/${name}evil" ] || [ -f "$P/$name" ] && fails="$fails $name"
    done
    if [ -z "$fails" ]; then ok "each protected name explain lists cannot be created in the working directory"
    else bad "protected names created:$fails" "$err"; fi
    if [ ! -e "$P/.claude" ]; then ok "no .claude left behind in the project"
    else bad "a .claude was left behind" "$(ls -la "$P/.claude")"; fi
    err=$(cd "$P" && sr -- sh -c 'mkdir -p .claude && echo "{}" > .claude/settings.local.json' 2>&1); rc=$?
    if [ "$rc" -eq 0 ] && [ -f "$P/.claude/settings.local.json" ]; then ok "the rest of .claude stays writable"
    else bad "rest of .claude writable" "exit $rc: $err"; fi
    rm -rf "$P/.claude"
    if grep -q 'Write (everything else is read-only): the working directory' <<< "$out" &&
        (cd "$P" && sr -- sh -c 'echo y > w.txt') && [ -f "$P/w.txt" ] &&
        ! (cd "$P" && sr -- sh -c "echo y > '$W/not-here.txt'" 2>/dev/null) && [ ! -e "$W/not-here.txt" ]; then
        ok "explain: the working directory is writable and nothing else"
    else bad "explain write claim" "$out"; fi
    # filesystem.disabled: explain says everything is writable and nothing protected
    printf '{"filesystem": {"disabled": true}}\n' > "$S"
    out=$("$SLUICE" explain --settings "$S")
    if grep -q 'NO FILESYSTEM RESTRICTIONS' <<< "$out" && ! grep -q 'the working directory' <<< "$out" &&
        ! grep -q 'Protected:' <<< "$out"; then
        ok "explain under filesystem.disabled says nothing is restricted or protected"
    else bad "explain under filesystem.disabled" "$out"; fi
    err=$(cd "$P" && sr -- sh -c "echo x > .bashrc && echo y > '$W/elsewhere.txt'" 2>&1); rc=$?
    if [ "$rc" -eq 0 ] && [ -f "$P/.bashrc" ] && [ -f "$W/elsewhere.txt" ]; then
        ok "... and indeed a command writes .bashrc and outside the working directory"
    else bad "filesystem.disabled writes" "exit $rc: $err"; fi
    rm -f "$P/.bashrc" "$W/elsewhere.txt"
    printf '{"enableWeakerNestedSandbox": true}\n' > "$S"
    out=$("$SLUICE" explain --settings "$S")
    if grep -q 'WEAKER NESTED MODE' <<< "$out"; then ok "explain names the weaker nested mode"
    else bad "explain weaker nested mode" "$out"; fi

    # --- network.allowLocalBinding: servers refused unless set -------------------------
    local BIND='import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1); print("LISTENING")'
    printf '{}\n' > "$S"
    err=$(sr -- python3 -c "$BIND" 2>&1); rc=$?
    if [ "$rc" -ne 0 ] && grep -q 'PermissionError\|Operation not permitted' <<< "$err" &&
        grep -q 'and listen(), fail with EPERM' <<< "$("$SLUICE" explain --settings "$S")"; then
        ok "without allowLocalBinding a command cannot listen, and explain says so"
    else bad "bind refused without allowLocalBinding" "exit $rc: $err"; fi
    # glibc's netlink users bind a 12-byte sockaddr_nl: they keep working
    err=$(sr -- python3 -c 'import socket; print("IFS", [n for _, n in socket.if_nameindex()])' 2>&1)
    if grep -q "IFS.*'lo'" <<< "$err"; then ok "without allowLocalBinding if_nameindex (netlink bind) works"
    else bad "netlink bind refused without allowLocalBinding" "$err"; fi
    printf '{"network": {"allowLocalBinding": true}}\n' > "$S"
    err=$(sr -- python3 -c "$BIND" 2>&1); rc=$?
    if [ "$rc" -eq 0 ] && grep -q LISTENING <<< "$err" &&
        grep -q 'bind() and listen() are allowed' <<< "$("$SLUICE" explain --settings "$S")"; then
        ok "allowLocalBinding: true lets it listen on the sandbox's loopback, and explain says so"
    else bad "allowLocalBinding true" "exit $rc: $err"; fi

    # --- allowNestedUserNamespaces ------------------------------------------------------
    printf '{}\n' > "$S"
    err=$(sr -- unshare -U true 2>&1); rc=$?
    if [ "$rc" -ne 0 ]; then ok "no new user namespace by default ($err)"
    else bad "unshare -U worked without allowNestedUserNamespaces"; fi
    printf '{"allowNestedUserNamespaces": true}\n' > "$S"
    err=$(sr -- unshare -U true 2>&1); rc=$?
    if [ "$rc" -eq 0 ] && grep -q 'new user namespaces are allowed' <<< "$("$SLUICE" explain --settings "$S")"; then
        ok "allowNestedUserNamespaces: true lets the command make one, and explain says so"
    else bad "allowNestedUserNamespaces" "exit $rc: $err"; fi

    # --- the JVM reaches the proxy through JAVA_TOOL_OPTIONS ------------------------------
    if command -v java >/dev/null && command -v dnsmasq >/dev/null; then
        local PA
        mkdir -p "$T/www" && echo hello-java > "$T/www/hello.txt"
        PA=$(free_port)
        python3 -m http.server --bind 127.0.0.1 --directory "$T/www" "$PA" >"$T/www.err" 2>&1 &
        PIDS+=($!)
        start_dnsmasq --local=/test/ --host-record=origin.test,127.0.0.1
        wait_for_http() { local i; for i in $(seq 100); do curl -s --noproxy '*' "$1" >/dev/null && return 0; sleep 0.1; done; return 1; }
        wait_for_http "http://127.0.0.1:$PA/hello.txt"
        cat > "$W/Get.java" <<'JAVA'
public class Get {
    public static void main(String[] a) throws Exception {
        var c = (java.net.HttpURLConnection) new java.net.URL(a[0]).openConnection();
        System.out.print(new String(c.getInputStream().readAllBytes()));
    }
}
JAVA
        printf '{"network": {"allowedDomains": ["origin.test:%s", "127.0.0.1:%s"], "dnsServers": ["127.0.0.1:%s"]}, "javaAgentJarPath": "/nonexistent/agent.jar"}\n' "$PA" "$PA" "$DPORT" > "$S"
        out=$(sr -- sh -c 'echo "$JAVA_TOOL_OPTIONS"' 2>&1)
        if grep -q -- '-Dhttps.proxyHost=127.0.0.1' <<< "$out" && grep -q -- '-javaagent:/nonexistent/agent.jar' <<< "$out"; then
            ok "JAVA_TOOL_OPTIONS carries the proxy properties and -javaagent: for javaAgentJarPath"
        else bad "JAVA_TOOL_OPTIONS" "$out"; fi
        printf '{"network": {"allowedDomains": ["origin.test:%s", "127.0.0.1:%s"], "dnsServers": ["127.0.0.1:%s"]}, "filesystem": {"allowWrite": ["."]}}\n' "$PA" "$PA" "$DPORT" > "$S"
        out=$(sr -- java Get.java "http://origin.test:$PA/hello.txt" 2>&1); rc=$?
        if [ "$rc" -eq 0 ] && grep -q hello-java <<< "$out"; then
            ok "a Java program with no proxy code reaches an allowed host through sluice"
        else bad "java through the proxy" "exit $rc: $out"; fi
    fi

    # --- network.parentProxy: allowed requests leave through it, denied ones never reach it
    if command -v dnsmasq >/dev/null; then
        local PP PLOG PA2 NAME S2
        PLOG=$T/pp-requests.log; : > "$PLOG"
        python3 "$HERE/dropin-helpers/parent_proxy.py" "$T/parent.port" "$PLOG" 'corp user:s3cr=t' &
        PIDS+=($!)
        wait_for "$T/parent.port" . 10
        PP=$(cat "$T/parent.port")
        mkdir -p "$T/www2" && echo via-parent > "$T/www2/p.txt"
        PA2=$(free_port)
        python3 -m http.server --bind 127.0.0.1 --directory "$T/www2" "$PA2" >"$T/www2.err" 2>&1 &
        PIDS+=($!)
        for i in $(seq 100); do curl -s --noproxy '*' "http://127.0.0.1:$PA2/p.txt" >/dev/null && break; sleep 0.1; done
        start_dnsmasq --local=/test/ --host-record=origin.test,127.0.0.1 \
            --host-record=bypass.test,127.0.0.1 --host-record=denied.test,127.0.0.1
        S2=$T/parent.json
        cat > "$S2" <<JSON
{"network": {"allowedDomains": ["origin.test:$PA2", "bypass.test:$PA2", "127.0.0.1:$PA2"],
             "dnsServers": ["127.0.0.1:$DPORT"],
             "parentProxy": {"http": "http://corp%20user:s3cr%3Dt@127.0.0.1:$PP",
                             "https": "http://corp%20user:s3cr%3Dt@127.0.0.1:$PP",
                             "noProxy": "bypass.test,10.0.0.0/8"}}}
JSON
        start_proxy parent "$S2"
        # plain HTTP goes to the parent in absolute form, not as CONNECT host:80 (a
        # default Squid refuses CONNECT to other ports than 443; parent_squid.sh), with
        # the parent's credentials, never the client's (curl -U sends its own)
        out=$(curl -sS --max-time 10 -U client:pw -x "http://127.0.0.1:$HPORT" "http://origin.test:$PA2/p.txt" 2>&1)
        [ "$out" = via-parent ] && [ "$(cat "$PLOG")" = "GET http://origin.test:$PA2/p.txt auth=ok" ] &&
            ok "parentProxy: plain HTTP leaves through the parent (absolute form, Basic credentials from the URL)" ||
            bad "parentProxy plain HTTP" "$out / $(cat "$PLOG")"
        : > "$PLOG"
        out=$(curl -sS --max-time 10 -p -x "http://127.0.0.1:$HPORT" "http://origin.test:$PA2/p.txt" 2>&1)
        [ "$out" = via-parent ] && [ "$(grep -c "CONNECT origin.test:$PA2 auth=ok" "$PLOG")" = 1 ] &&
            ok "parentProxy: a CONNECT tunnel leaves through the parent" || bad "parentProxy CONNECT" "$out / $(cat "$PLOG")"
        : > "$PLOG"
        out=$(curl -sS --max-time 10 --socks5-hostname "127.0.0.1:$SPORT" "http://origin.test:$PA2/p.txt" 2>&1)
        [ "$out" = via-parent ] && [ "$(grep -c "CONNECT origin.test:$PA2 auth=ok" "$PLOG")" = 1 ] &&
            ok "parentProxy: a SOCKS5 connection leaves through the parent" || bad "parentProxy SOCKS" "$out / $(cat "$PLOG")"
        : > "$PLOG"
        out=$(curl -sS --max-time 10 -x "http://127.0.0.1:$HPORT" -o /dev/null -w '%{http_code}' "http://denied.test:$PA2/p.txt" 2>&1)
        out2=$(curl -sS --max-time 10 -p -x "http://127.0.0.1:$HPORT" "http://evil.test:$PA2/p.txt" 2>&1)
        if [ "$out" = 403 ] && [ ! -s "$PLOG" ]; then
            ok "parentProxy: a denied request is refused by sluice and never reaches the parent"
        else bad "denied request and the parent" "$out $out2 / $(cat "$PLOG")"; fi
        out=$(curl -sS --max-time 10 -x "http://127.0.0.1:$HPORT" "http://bypass.test:$PA2/p.txt" 2>&1)
        out2=$(curl -sS --max-time 10 -x "http://127.0.0.1:$HPORT" "http://127.0.0.1:$PA2/p.txt" 2>&1)
        if [ "$out" = via-parent ] && [ "$out2" = via-parent ] && [ ! -s "$PLOG" ]; then
            ok "parentProxy: noProxy names and loopback go direct"
        else bad "noProxy / loopback bypass" "$out $out2 / $(cat "$PLOG")"; fi
        grep -q 'via the parent proxy 127.0.0.1' "$T/parent.log" &&
            ok "parentProxy: sluice's log names the parent for the requests it routed" ||
            bad "log names the parent" "$(tail -5 "$T/parent.log")"
        kill "$PROXY_PID" 2>/dev/null; wait "$PROXY_PID" 2>/dev/null

        # wrong credentials: the parent's 407 becomes sluice's 502, with the reason
        sed -i 's/s3cr%3Dt/wrong/g' "$S2"
        start_proxy parent2 "$S2"
        out=$(curl -sS --max-time 10 -x "http://127.0.0.1:$HPORT" -D - -o /dev/null "http://origin.test:$PA2/p.txt" 2>&1)
        # the reason is in the connection's close record, which may be written
        # after curl has its answer (valgrind: SLOW)
        if grep -q '^HTTP/1.1 502' <<< "$out" && wait_for "$T/parent2.log" 407 $((5 * SLOW)); then
            ok "parentProxy: the parent's refusal (407) is a 502 with its reason"
        else bad "parent 407" "$out / $(tail -3 "$T/parent2.log")"; fi
        kill "$PROXY_PID" 2>/dev/null; wait "$PROXY_PID" 2>/dev/null

        # no parentProxy key: HTTPS_PROXY / NO_PROXY of sluice's environment
        : > "$PLOG"
        printf '{"network": {"allowedDomains": ["origin.test:%s", "bypass.test:%s", "127.0.0.1:%s"], "dnsServers": ["127.0.0.1:%s"]}}\n' "$PA2" "$PA2" "$PA2" "$DPORT" > "$S2"
        HTTPS_PROXY="http://corp%20user:s3cr%3Dt@127.0.0.1:$PP" NO_PROXY=bypass.test start_proxy parent3 "$S2"
        out=$(curl -sS --max-time 10 -p -x "http://127.0.0.1:$HPORT" "http://origin.test:$PA2/p.txt" 2>&1)
        out2=$(curl -sS --max-time 10 -p -x "http://127.0.0.1:$HPORT" "http://bypass.test:$PA2/p.txt" 2>&1)
        if [ "$out" = via-parent ] && [ "$out2" = via-parent ] && [ "$(cat "$PLOG")" = "CONNECT origin.test:$PA2 auth=ok" ]; then
            ok "parentProxy: without the key, HTTPS_PROXY and NO_PROXY of sluice's environment are used"
        else bad "env fallback" "$out $out2 / $(cat "$PLOG")"; fi
        kill "$PROXY_PID" 2>/dev/null; wait "$PROXY_PID" 2>/dev/null

        # from inside the sandbox
        : > "$PLOG"
        cat > "$S" <<JSON
{"network": {"allowedDomains": ["origin.test:$PA2", "127.0.0.1:$PA2"], "dnsServers": ["127.0.0.1:$DPORT"],
             "parentProxy": {"https": "http://corp%20user:s3cr%3Dt@127.0.0.1:$PP"}}}
JSON
        out=$(sr -- sh -c "curl -sS --max-time 10 http://origin.test:$PA2/p.txt; curl -sS --max-time 10 -o /dev/null -w ' %{http_code}' http://denied.test:$PA2/p.txt" 2>&1)
        if [ "$out" = "via-parent
 403" ] && [ "$(cat "$PLOG")" = "GET http://origin.test:$PA2/p.txt auth=ok" ]; then
            ok "parentProxy from sluice run: the allowed request went through the parent, the denied one did not"
        else bad "parentProxy in sluice run" "$out / $(cat "$PLOG")"; fi
    fi

    # --- request-level keys: requireHostMatch, ambiguousRequestTarget, stripResponseHeaders,
    #     refuseOpaqueTunnels, allowPlaintextHeaderSet
    local PO S3 out2
    mkdir -p "$T/www3" && echo req-opts > "$T/www3/p.txt"
    PO=$(free_port)
    python3 -m http.server --bind 127.0.0.1 --directory "$T/www3" "$PO" >"$T/www3.err" 2>&1 &
    PIDS+=($!)
    for i in $(seq 100); do curl -s --noproxy '*' "http://127.0.0.1:$PO/p.txt" >/dev/null && break; sleep 0.1; done
    S3=$T/reqopts.json
    printf '{"network": {"allowedDomains": ["127.0.0.1:%s"], "requireHostMatch": true, "ambiguousRequestTarget": "refuse", "stripResponseHeaders": ["Server", "x-nothing"]}}\n' "$PO" > "$S3"
    start_proxy reqopts "$S3"
    out=$(curl -sS --max-time 10 -x "http://127.0.0.1:$HPORT" -o /dev/null -w '%{http_code}' -H 'Host: other.example' "http://127.0.0.1:$PO/p.txt" 2>&1)
    out2=$(curl -sS --max-time 10 -x "http://127.0.0.1:$HPORT" -D - "http://127.0.0.1:$PO/p.txt" 2>&1)
    if [ "$out" = 421 ] && grep -q req-opts <<< "$out2"; then
        ok "requireHostMatch: a Host header naming another host gets 421; a matching request passes"
    else bad "requireHostMatch" "$out / $out2"; fi
    if ! grep -qi '^Server:' <<< "$out2" && grep -qi '^Date:' <<< "$out2"; then
        ok "stripResponseHeaders: the named header is removed from the response, the others stay"
    else bad "stripResponseHeaders" "$out2"; fi
    out=$(curl -sS --max-time 10 --path-as-is -x "http://127.0.0.1:$HPORT" -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PO/x/../p.txt" 2>&1)
    out2=$(curl -sS --max-time 10 -x "http://127.0.0.1:$HPORT" -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PO/a%2Fb" 2>&1)
    if [ "$out" = 400 ] && [ "$out2" = 400 ] && ! grep -q '/x/\.\./p.txt' "$T/www3.err"; then
        ok "ambiguousRequestTarget refuse: dot segments and encoded slashes get 400, nothing reaches the origin"
    else bad "ambiguousRequestTarget refuse" "$out $out2 / $(cat "$T/www3.err")"; fi
    kill "$PROXY_PID" 2>/dev/null; wait "$PROXY_PID" 2>/dev/null
    printf '{"network": {"allowedDomains": ["127.0.0.1:%s"], "ambiguousRequestTarget": "normalize", "refuseOpaqueTunnels": true}}\n' "$PO" > "$S3"
    start_proxy reqopts2 "$S3"
    out=$(curl -sS --max-time 10 --path-as-is -x "http://127.0.0.1:$HPORT" "http://127.0.0.1:$PO/x/%2e%2E/y/../p.txt" 2>&1)
    if [ "$out" = req-opts ] && grep -q '"GET /p.txt HTTP/1.1"' "$T/www3.err"; then
        ok "ambiguousRequestTarget normalize: the origin receives /p.txt"
    else bad "ambiguousRequestTarget normalize" "$out / $(tail -3 "$T/www3.err")"; fi
    out=$(curl -sS --max-time 10 -p -x "http://127.0.0.1:$HPORT" "http://127.0.0.1:$PO/p.txt" 2>&1)
    out2=$(curl -sS --max-time 10 --socks5-hostname "127.0.0.1:$SPORT" "http://127.0.0.1:$PO/p.txt" 2>&1)
    if grep -q '403' <<< "$out" && ! grep -q req-opts <<< "$out$out2" &&
        grep -q 'refuseOpaqueTunnels' "$T/reqopts2.log"; then
        ok "refuseOpaqueTunnels: CONNECT and SOCKS are refused (plain HTTP still served)"
    else bad "refuseOpaqueTunnels" "$out / $out2"; fi
    kill "$PROXY_PID" 2>/dev/null; wait "$PROXY_PID" 2>/dev/null
    printf '{"network": {"allowPlaintextHeaderSet": true}}\n' > "$S3"
    err=$("$SLUICE" check --settings "$S3" example.com 2>&1); rc=$?
    if [ "$rc" -eq 2 ] && grep -q 'allowPlaintextHeaderSet: true has no meaning in sluice' <<< "$err"; then
        ok "allowPlaintextHeaderSet: true is refused with a reason (false is accepted)"
    else bad "allowPlaintextHeaderSet" "exit $rc: $err"; fi

    # --- network.isolate false: host network for trusted commands, said loudly -----------------
    printf '{"network": {"isolate": false}}\n' > "$S"
    out=$(sr -- sh -c "curl -sS --max-time 5 --noproxy '*' http://127.0.0.1:$PO/p.txt; echo \"[\${HTTP_PROXY:-}]\"; echo x > '$HOME/outside' 2>/dev/null || echo ro" 2>"$T/iso.err"); rc=$?
    if [ "$out" = "req-opts
[]
ro" ] && grep -q 'WARNING: network.isolate is false' "$T/iso.err" &&
        grep -q 'THE NETWORK IS OPEN' <<< "$("$SLUICE" explain --settings "$S")"; then
        ok "network.isolate false: direct host network, no proxy variables, a loud warning; the filesystem stays read-only"
    else bad "network.isolate false" "exit $rc: $out / $(cat "$T/iso.err")"; fi
    printf '{}\n' > "$S"
    out=$(sr -- sh -c "curl -sS --max-time 5 --noproxy '*' http://127.0.0.1:$PO/p.txt || echo blocked" 2>/dev/null)
    if [ "$out" = blocked ]; then ok "control: with the default the same direct connection fails"
    else bad "control: isolate default" "$out"; fi

    # --- --control-fd: new network lists at once, bad lines reported and ignored ------------
    local FIFO=$T/control.fifo CA CB
    mkdir -p "$T/wwwc" && echo ctl > "$T/wwwc/c.txt"
    CA=$(free_port); CB=$(free_port)
    python3 -m http.server --bind 127.0.0.1 --directory "$T/wwwc" "$CA" >/dev/null 2>&1 &
    PIDS+=($!)
    python3 -m http.server --bind 127.0.0.1 --directory "$T/wwwc" "$CB" >/dev/null 2>&1 &
    PIDS+=($!)
    for i in $(seq 100); do curl -s --noproxy '*' "http://127.0.0.1:$CB/c.txt" >/dev/null && curl -s --noproxy '*' "http://127.0.0.1:$CA/c.txt" >/dev/null && break; sleep 0.1; done
    mkfifo "$FIFO"
    rm -f "$W/ready" "$W/go"
    printf '{"network": {"allowedDomains": ["127.0.0.1:%s"]}, "filesystem": {"allowWrite": ["."]}}\n' "$CA" > "$S"
    ( cd "$W" && "$SLUICE" run --quiet --settings "$S" --control-fd 3 -- sh -c "
        g() { curl -s --max-time 10 --noproxy '' -x http://127.0.0.1:3128 -o /dev/null -w '%{http_code}' http://127.0.0.1:\$1/c.txt; }
        echo \"before \$(g $CA) \$(g $CB)\"; : > ready
        while [ ! -e go ]; do sleep 0.05; done
        echo \"after \$(g $CA) \$(g $CB)\"" 3<"$FIFO" >"$T/ctl.out" 2>"$T/ctl.err" ) &
    local CPID=$!
    exec 7>"$FIFO"
    for i in $(seq 400); do [ -e "$W/ready" ] && break; sleep 0.05; done
    printf '{"network": {"allowedDomains": ["127.0.0.1:%s"]}}\n{"network": {"allowedDomain": []}}\n' "$CB" >&7
    # lines are read in order: once line 2 is reported, line 1 is in force
    wait_for "$T/ctl.err" 'control-fd line 2' 20
    : > "$W/go"
    exec 7>&-
    wait "$CPID"; rc=$?
    if [ "$rc" -eq 0 ] && [ "$(cat "$T/ctl.out")" = "before 200 403
after 403 200" ] && grep -q 'control-fd line 2:.*unknown key' "$T/ctl.err"; then
        ok "--control-fd: a valid line replaces the allow list for new connections; an invalid one is reported and ignored"
    else bad "--control-fd" "exit $rc: $(cat "$T/ctl.out" "$T/ctl.err")"; fi
    rm -f "$W/ready" "$W/go" "$FIFO"
    # a descriptor that cannot be polled is read to its end (it aborted sluice):
    # a regular file whose line opens CB, and /dev/null
    printf '{"network": {"allowedDomains": ["127.0.0.1:%s"]}}\n' "$CB" > "$T/ctl.txt"
    printf '{"network": {"allowedDomains": ["127.0.0.1:%s"]}}\n' "$CA" > "$S"
    out=$(cd "$W" && "$SLUICE" run --quiet --settings "$S" --control-fd 3 -- sh -c "
        for i in \$(seq 100); do
            c=\$(curl -s --max-time 10 --noproxy '' -x http://127.0.0.1:3128 -o /dev/null -w '%{http_code}' http://127.0.0.1:$CB/c.txt)
            [ \"\$c\" = 200 ] && break; sleep 0.1
        done; echo \$c" 3<"$T/ctl.txt" 2>"$T/ctl.err"); rc=$?
    if [ "$rc" -eq 0 ] && [ "$out" = 200 ]; then
        ok "--control-fd on a regular file: its lines are read and applied"
    else bad "--control-fd on a regular file" "exit $rc: $out $(cat "$T/ctl.err")"; fi
    out=$(cd "$W" && "$SLUICE" run --quiet --settings "$S" --control-fd 3 -- echo ran 3</dev/null 2>&1); rc=$?
    if [ "$rc" -eq 0 ] && [ "$out" = ran ]; then ok "--control-fd on /dev/null: read, empty, the run goes on"
    else bad "--control-fd on /dev/null" "exit $rc: $out"; fi

    # --- {"path", "literal": true} -----------------------------------------------------
    mkdir -p "$W/lit*" "$W/litx"
    printf '{"filesystem": {"allowWrite": [{"path": "lit*", "literal": true}]}}\n' > "$S"
    err=$(sr -- sh -c 'echo a > "lit*/a"; echo b > litx/b' 2>&1); rc=$?
    if [ -f "$W/lit*/a" ] && [ ! -e "$W/litx/b" ]; then
        ok "a literal path entry is not a glob"
    else bad "literal path entry" "exit $rc: $err"; fi
}

EXTRA_RM=()
trap 'e2e_cleanup; for d in "${EXTRA_RM[@]}"; do rm -rf "$d"; done' EXIT
e2e_twice cases "$HERE/dropin.sh" "$SLUICE"
e2e_finish
