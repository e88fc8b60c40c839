#!/usr/bin/env bash
# Reference cases: pattern validation and decisions taken from the tests of the
# reference runtime (@anthropic-ai/sandbox-runtime), run against `sluice check`.
# Where sluice deliberately differs, the data files carry sluice's outcome and a
# note starting "differs from srt:".
#
#   tests/data/reference/patterns.tsv        VERDICT<TAB>LIST<TAB>PATTERN<TAB>NOTE
#   tests/data/reference/decisions/X.json    settings, judged with X.expect
#   tests/data/reference/invalid-targets.tsv TARGET (printf %b escapes)<TAB>NOTE
#
# usage: reference.sh PATH/TO/sluice
set -uo pipefail
SLUICE=${1:?usage: reference.sh PATH/TO/sluice}
case $SLUICE in /*) ;; *) SLUICE=$PWD/$SLUICE ;; esac
DATA=$(cd "$(dirname "${BASH_SOURCE[0]}")/../data/reference" && pwd) || exit 2
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
trap 'rm -rf "$T"' EXIT

json_escape() {
    local s=$1
    s=${s//\\/\\\\}
    s=${s//\"/\\\"}
    printf '%s' "$s"
}

# --- 1. pattern validation -------------------------------------------------
# Each pattern alone in its list; the string sits on line 4, its opening quote
# in column 7, which is where a refusal must point.
n=0
while IFS= read -r line || [ -n "$line" ]; do
    n=$((n + 1))
    case $line in ''|'#'*) continue ;; esac
    verdict=${line%%$'\t'*}; rest=${line#*$'\t'}
    list=${rest%%$'\t'*};    rest=${rest#*$'\t'}
    pattern=${rest%%$'\t'*}; note=${rest#*$'\t'}
    name="patterns.tsv:$n $verdict $list '$pattern' ($note)"
    case $list in
        allowed) key=allowedDomains ;;
        denied)  key=deniedDomains ;;
        *) bad "$name" "bad list column '$list'"; continue ;;
    esac
    f="$T/pattern-$n.json"
    printf '{\n  "network": {\n    "%s": [\n      "%s"\n    ]\n  }\n}\n' "$key" "$(json_escape "$pattern")" > "$f"
    out=$("$SLUICE" check --settings "$f" example.org 2>"$T/err"); st=$?
    err=$(cat "$T/err")
    case $verdict in
        accept)
            if [ "$st" -eq 0 ]; then ok "$name"; else bad "$name (exit $st, want 0)" "$out$err"; fi ;;
        reject)
            where="$f:4:7: network.$key[0]"
            if [ "$st" -ne 2 ]; then
                bad "$name (exit $st, want 2)" "$out$err"
            elif ! grep -qF -- "$where" "$T/err"; then
                bad "$name (stderr does not name $where)" "$err"
            else
                ok "$name"
            fi ;;
        *) bad "$name" "bad verdict column '$verdict'" ;;
    esac
done < "$DATA/patterns.tsv"

# --- 2. decisions ------------------------------------------------------------
for exp in "$DATA"/decisions/*.expect; do
    base=${exp%.expect}
    name="decisions/$(basename "$base")"
    if [ ! -f "$base.json" ]; then bad "$name" "missing $base.json"; continue; fi
    want=$(grep -cvE '^[[:space:]]*(#|$)' "$exp")
    out=$("$SLUICE" check --settings "$base.json" --expect "$exp" 2>&1); st=$?
    if [ "$st" -ne 0 ]; then
        bad "$name (exit $st, want 0)" "$out"
    elif ! printf '%s\n' "$out" | tail -n 1 | grep -qx -- "$want passed, 0 failed"; then
        bad "$name (want '$want passed, 0 failed')" "$out"
    else
        ok "$name ($want expectations)"
    fi
done

# --- 3. malformed request hosts ------------------------------------------------
printf '{"network": {"allowedDomains": ["*.allowed.com"]}}\n' > "$T/invalid.json"
# Control: the same settings do allow a well-formed host under the wildcard.
out=$("$SLUICE" check --settings "$T/invalid.json" a.b.allowed.com 2>&1); st=$?
if [ "$st" -eq 0 ] && grep -q '^allow ' <<< "$out"; then
    ok "invalid-targets control: a.b.allowed.com allowed"
else
    bad "invalid-targets control: a.b.allowed.com allowed (exit $st)" "$out"
fi
n=0
while IFS= read -r line || [ -n "$line" ]; do
    n=$((n + 1))
    case $line in '#'*) continue ;; esac
    [ -z "$line" ] && continue
    raw=${line%%$'\t'*}; note=${line#*$'\t'}
    target=$(printf '%b' "$raw")
    name="invalid-targets.tsv:$n '$(printf '%.60s' "$raw")' refused ($note)"
    out=$("$SLUICE" check --settings "$T/invalid.json" -- "$target" 2>"$T/err"); st=$?
    if [ "$st" -ne 2 ]; then
        bad "$name (exit $st, want 2)" "$out$(cat "$T/err")"
    elif [ -n "$out" ]; then
        bad "$name (a verdict was printed)" "$out"
    elif ! grep -q 'invalid target' "$T/err"; then
        bad "$name (no 'invalid target' message)" "$(cat "$T/err")"
    else
        ok "$name"
    fi
done < "$DATA/invalid-targets.tsv"

e2e_finish
