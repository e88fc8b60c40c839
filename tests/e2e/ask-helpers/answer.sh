#!/bin/sh
# tests/e2e/ask-helpers/answer.sh - an `--ask exec:PROGRAM` program for tests.
#
# Reads the question (one JSON line on stdin) and answers by the host's
# first label, so one program covers every case:
#   allow*, many*  allow                      deny      deny too risky
#   session        allow-session              json      {"decision":"deny-session",...}
#   jsonid         {"id":<id>,"decision":"allow"}   jsonbadid  the same with a wrong id
#   exit3          exit 3, no output          kill9     killed by SIGKILL
#   garbage        maybe later                noline    allow without a newline
#   late           allow, then exit 1         long      5000 bytes, no newline
#   empty          no output, exit 0          more      allow, then 200 KB more
#   sleep          never answers (exec sleep 60)
#   anything else  deny
# Environment (all optional): ASK_HELPER_LOG gets each question line,
# ASK_HELPER_COUNT one line per run.
IFS= read -r q || true
[ -n "${ASK_HELPER_LOG:-}" ] && printf '%s\n' "$q" >>"$ASK_HELPER_LOG"
[ -n "${ASK_HELPER_COUNT:-}" ] && echo run >>"$ASK_HELPER_COUNT"
host=${q#*\"host\":\"}
host=${host%%\"*}
id=${q#*\"id\":}
id=${id%%,*}
case $host in
allow*.* | many*.*) echo allow ;;
deny.*) echo "deny too risky" ;;
session.*) echo allow-session ;;
json.*) echo '{"decision":"deny-session","reason":"json says no"}' ;;
jsonid.*) echo "{\"id\":$id,\"decision\":\"allow\",\"reason\":null}" ;;
jsonbadid.*) echo "{\"id\":$((id + 1000)),\"decision\":\"allow\"}" ;;
exit3.*) exit 3 ;;
kill9.*) kill -9 $$ ;;
garbage.*) echo "maybe later" ;;
noline.*) printf allow ;;
late.*)
    echo allow
    exit 1
    ;;
long.*) head -c 5000 /dev/zero | tr '\0' a ;;
empty.*) ;;
more.*)
    echo allow
    head -c 200000 /dev/zero
    ;;
sleep.*) exec sleep 60 ;;
*) echo deny ;;
esac
exit 0
