#!/usr/bin/env bash
# tests/package/completion.sh SLUICE - bash completion completes
# subcommands, each subcommand's options (from its --help), option values
# and, for run, the command after the options.
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
bin=$1
bc=/usr/share/bash-completion/bash_completion
[ -f $bc ] || { echo "SKIP: bash-completion missing (scripts/deps.sh installs it)"; exit 77; }
export PATH="$(dirname "$bin"):$PATH"
cd "$top"
exec bash --norc -c '
source '"$bc"'
source '"$top"'/conf/completion/sluice.bash
rc=0
t() { # EXPECTED WORD... : EXPECTED must be among the completions
    local want=$1; shift
    COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
    COMPREPLY=(); _sluice 2>/dev/null
    if printf "%s\n" "${COMPREPLY[@]}" | grep -qxF -- "$want"; then echo "ok   [$*] -> $want"
    else echo "FAIL [$*] -> ${COMPREPLY[*]} (wanted $want)"; rc=1; fi
}
t proxy sluice pr
t check sluice ch
t bridge sluice help br
t --log-format sluice proxy --log-f
t --settings sluice check --se
t --expect sluice check --ex
t --max-conns sluice bridge --max
t json sluice proxy --log-format j
t unix: sluice proxy --http un
t exec: sluice run --ask ex
t --quiet sluice run --q
t sh sluice run --quiet s
t sh sluice run -- s
t conf sluice run -s con
t conf sluice proxy --settings con
t --watch sluice proxy --wa
for c in $(sluice help | awk "/^commands:/{on=1; next} on && !NF {exit} on {print \$1}"); do
    t "$c" sluice "$c"
done
exit $rc
'
