# bash completion for sluice(1)                          -*- shell-script -*-
#
# Subcommands are listed here; each subcommand's options and what their
# arguments are (FILE, ENDPOINT, HANDLER, ...) are read from the installed
# binary's own `sluice help COMMAND`, so completion cannot drift from the
# options the code has.

_sluice_help_opts()
{
    # prints "OPTION ARG" per line (ARG empty for a flag); "-s, --settings FILE"
    # gives both -s and --settings the argument
    "$1" help "$2" 2>/dev/null | awk '
        /^[[:space:]]+-[a-zA-Z], --[a-z]/ {
            arg = ($3 ~ /^[A-Z][A-Z_:.]*$/) ? $3 : ""
            sub(/,$/, "", $1)
            print $1, arg
            print $2, arg
            next
        }
        {
            line = $0
            while (match(line, /(^|[[:space:],\[])(-[a-zA-Z]|--[a-z][a-z0-9-]*)([ =][A-Z][A-Z_:.]*)?/)) {
                opt = substr(line, RSTART, RLENGTH)
                sub(/^[[:space:],\[]/, "", opt)
                sub(/=/, " ", opt)
                print opt
                line = substr(line, RSTART + RLENGTH)
            }
        }'
}

_sluice()
{
    local cur prev words cword
    _init_completion -n = || return

    local bin=${words[0]}
    local cmds="run proxy check explain bridge connect help version"
    local cmd="" i
    for ((i = 1; i < cword; i++)); do
        case ${words[i]} in
        -*) ;;
        *) cmd=${words[i]}; break ;;
        esac
    done

    if [[ -z $cmd ]]; then
        COMPREPLY=($(compgen -W "$cmds --help --version" -- "$cur"))
        return
    fi
    case $cmd in
    help)
        [[ $cword -eq $((i + 1)) ]] && COMPREPLY=($(compgen -W "${cmds% help version}" -- "$cur"))
        return ;;
    version) return ;;
    esac

    local spec opt
    spec=$(_sluice_help_opts "$bin" "$cmd")

    if [[ $cmd == run ]]; then
        # options end at -- or at the first non-option: that is the command
        local j
        for ((j = i + 1; j < cword; j++)); do
            case ${words[j]} in
            --) _command_offset $((j + 1)); return ;;
            --*=*) ;;
            -*) [[ -n $(awk -v o="${words[j]}" '$1 == o { print $2; exit }' <<<"$spec") ]] &&
                    ((j++)) ;;
            *) _command_offset $j; return ;;
            esac
        done
    fi

    local argtype=""
    if [[ $cur == --*=* ]]; then
        opt=${cur%%=*}
        cur=${cur#*=}
        argtype=$(awk -v o="$opt" '$1 == o { print $2; exit }' <<<"$spec")
    elif [[ $prev == -* ]]; then
        argtype=$(awk -v o="$prev" '$1 == o { print $2; exit }' <<<"$spec")
    fi
    case $argtype in
    "") ;;
    FILE | PATH) _filedir; return ;;
    ENDPOINT | LISTEN | CONNECT)
        COMPREPLY=($(compgen -W "tcp:127.0.0.1: tcp:[::1]: unix: fd: off" -- "$cur"))
        [[ $cur == unix:* ]] && COMPREPLY=($(compgen -f -P unix: -- "${cur#unix:}"))
        compopt -o nospace
        return ;;
    HANDLER)
        COMPREPLY=($(compgen -W "tty exec: socket:" -- "$cur"))
        compopt -o nospace
        return ;;
    FORMAT)
        COMPREPLY=($(compgen -W "text json" -- "$cur"))
        return ;;
    *) return ;; # a number, a host, a string: nothing to offer
    esac

    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$(awk '{ print $1 }' <<<"$spec" | sort -u)" -- "$cur"))
        return
    fi
    case $cmd in
    bridge) COMPREPLY=($(compgen -W "tcp:127.0.0.1: tcp:[::1]: unix: fd:" -- "$cur")); compopt -o nospace ;;
    run) _command_offset $cword ;;
    esac
} &&
    complete -F _sluice sluice

# ex: filetype=sh
