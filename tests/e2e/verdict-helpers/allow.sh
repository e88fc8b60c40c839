#!/bin/sh
# tests/e2e/verdict-helpers/allow.sh - an `--ask exec:PROGRAM` program that
# records each question (one JSON line) in $VERDICT_ASK_LOG and allows it
# once, so a request that needs asking goes on to the guard like an allowed
# one, and the log tells which requests were asked.
IFS= read -r q || true
printf '%s\n' "$q" >>"${VERDICT_ASK_LOG:?}"
echo allow
