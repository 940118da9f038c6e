_dsh__exec() {
    local i cur prev opts cmd
    COMPREPLY=()
    if [[ "${BASH_VERSINFO[0]}" -ge 4 ]]; then
        cur="$2"
    else
        cur="${COMP_WORDS[COMP_CWORD]}"
    fi
    prev="$3"
    cmd=""
    opts=""

    for i in "${COMP_WORDS[@]:0:COMP_CWORD}"
    do
        case "${cmd},${i}" in
            ",$1")
                cmd="dsh__exec"
                ;;
            dsh__exec,commit)
                cmd="dsh__exec__subcmd__commit"
                ;;
            dsh__exec,diff)
                cmd="dsh__exec__subcmd__diff"
                ;;
            dsh__exec,discard)
                cmd="dsh__exec__subcmd__discard"
                ;;
            dsh__exec,explain)
                cmd="dsh__exec__subcmd__explain"
                ;;
            dsh__exec,job)
                cmd="dsh__exec__subcmd__job"
                ;;
            dsh__exec,mcp)
                cmd="dsh__exec__subcmd__mcp"
                ;;
            dsh__exec,parse-status)
                cmd="dsh__exec__subcmd__parse__subcmd__status"
                ;;
            dsh__exec,prune)
                cmd="dsh__exec__subcmd__prune"
                ;;
            dsh__exec,transaction)
                cmd="dsh__exec__subcmd__transaction"
                ;;
            dsh__exec__subcmd__job,kill)
                cmd="dsh__exec__subcmd__job__subcmd__kill"
                ;;
            dsh__exec__subcmd__job,list)
                cmd="dsh__exec__subcmd__job__subcmd__list"
                ;;
            dsh__exec__subcmd__job,prune)
                cmd="dsh__exec__subcmd__job__subcmd__prune"
                ;;
            dsh__exec__subcmd__job,read)
                cmd="dsh__exec__subcmd__job__subcmd__read"
                ;;
            dsh__exec__subcmd__job,resize)
                cmd="dsh__exec__subcmd__job__subcmd__resize"
                ;;
            dsh__exec__subcmd__job,wait)
                cmd="dsh__exec__subcmd__job__subcmd__wait"
                ;;
            dsh__exec__subcmd__job,write)
                cmd="dsh__exec__subcmd__job__subcmd__write"
                ;;
            dsh__exec__subcmd__transaction,list)
                cmd="dsh__exec__subcmd__transaction__subcmd__list"
                ;;
            dsh__exec__subcmd__transaction,prune)
                cmd="dsh__exec__subcmd__transaction__subcmd__prune"
                ;;
            *)
                ;;
        esac
    done

    case "${cmd}" in
        dsh__exec)
            opts="-C -t -e -s -i -q -h -V --workdir --timeout --signal --idle-timeout --kill-after --stdout-max-bytes --stderr-max-bytes --file-size-max --spill-max-bytes --memory-max --pids-max --cpu-max --limits --keep --render --stdin-file --stdin --pty --env --env-policy --dsh-env --spill-dir --sandbox --workspace-root --writable-root --no-temp-write --allow-caches --transaction --on-exit --allow-unix-socket --protect --allow-write --deny-read --read-root --allow-read --network --credential --inject --credential-env --upstream-ca --interactive --background --detach-after --stream --output-files --quiet --json --events --color --help --version explain mcp job prune commit discard diff transaction parse-status"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 1 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --workdir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -C)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -t)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --signal)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --idle-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kill-after)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --stdout-max-bytes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --stderr-max-bytes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --file-size-max)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --spill-max-bytes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --memory-max)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --pids-max)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cpu-max)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --limits)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --keep)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --render)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --stdin-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --stdin)
                    COMPREPLY=($(compgen -W "closed pipe" -- "${cur}"))
                    return 0
                    ;;
                --env)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -e)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --env-policy)
                    COMPREPLY=($(compgen -W "inherit core none" -- "${cur}"))
                    return 0
                    ;;
                --dsh-env)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --spill-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --sandbox)
                    COMPREPLY=($(compgen -W "read-only workspace-write full-access" -- "${cur}"))
                    return 0
                    ;;
                -s)
                    COMPREPLY=($(compgen -W "read-only workspace-write full-access" -- "${cur}"))
                    return 0
                    ;;
                --workspace-root)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --writable-root)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --on-exit)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --allow-unix-socket)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --protect)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --allow-write)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --deny-read)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --read-root)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --allow-read)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --network)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --credential)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --inject)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --credential-env)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --upstream-ca)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --detach-after)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --color)
                    COMPREPLY=($(compgen -W "auto always never" -- "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        dsh__exec__subcmd__commit)
            opts="-h --atomic --force --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        dsh__exec__subcmd__diff)
            opts="-h --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        dsh__exec__subcmd__discard)
            opts="-h --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        dsh__exec__subcmd__explain)
            opts="-C -t -e -s -i -q -h --workdir --timeout --signal --idle-timeout --kill-after --stdout-max-bytes --stderr-max-bytes --file-size-max --spill-max-bytes --memory-max --pids-max --cpu-max --limits --keep --render --stdin-file --stdin --pty --env --env-policy --dsh-env --spill-dir --sandbox --workspace-root --writable-root --no-temp-write --allow-caches --transaction --on-exit --allow-unix-socket --protect --allow-write --deny-read --read-root --allow-read --network --credential --inject --credential-env --upstream-ca --interactive --background --detach-after --stream --output-files --quiet --json --events --color --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --workdir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -C)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -t)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --signal)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --idle-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kill-after)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --stdout-max-bytes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --stderr-max-bytes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --file-size-max)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --spill-max-bytes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --memory-max)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --pids-max)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cpu-max)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --limits)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --keep)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --render)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --stdin-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --stdin)
                    COMPREPLY=($(compgen -W "closed pipe" -- "${cur}"))
                    return 0
                    ;;
                --env)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -e)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --env-policy)
                    COMPREPLY=($(compgen -W "inherit core none" -- "${cur}"))
                    return 0
                    ;;
                --dsh-env)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --spill-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --sandbox)
                    COMPREPLY=($(compgen -W "read-only workspace-write full-access" -- "${cur}"))
                    return 0
                    ;;
                -s)
                    COMPREPLY=($(compgen -W "read-only workspace-write full-access" -- "${cur}"))
                    return 0
                    ;;
                --workspace-root)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --writable-root)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --on-exit)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --allow-unix-socket)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --protect)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --allow-write)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --deny-read)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --read-root)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --allow-read)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --network)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --credential)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --inject)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --credential-env)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --upstream-ca)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --detach-after)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --color)
                    COMPREPLY=($(compgen -W "auto always never" -- "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        dsh__exec__subcmd__job)
            opts="-h --help read wait write resize kill list prune"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        dsh__exec__subcmd__job__subcmd__kill)
            opts="-h --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        dsh__exec__subcmd__job__subcmd__list)
            opts="-h --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        dsh__exec__subcmd__job__subcmd__prune)
            opts="-h --spill --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        dsh__exec__subcmd__job__subcmd__read)
            opts="-h --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        dsh__exec__subcmd__job__subcmd__resize)
            opts="-h --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        dsh__exec__subcmd__job__subcmd__wait)
            opts="-t -h --timeout --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -t)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        dsh__exec__subcmd__job__subcmd__write)
            opts="-t -h --file --close --timeout --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -t)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        dsh__exec__subcmd__mcp)
            opts="-C -t -e -s -q -i -h --keep-jobs --max-parallel --max-jobs --workdir --timeout --signal --idle-timeout --kill-after --stdout-max-bytes --stderr-max-bytes --file-size-max --spill-max-bytes --memory-max --pids-max --cpu-max --limits --keep --render --env --env-policy --dsh-env --spill-dir --sandbox --workspace-root --writable-root --no-temp-write --allow-caches --transaction --on-exit --allow-unix-socket --protect --allow-write --deny-read --read-root --allow-read --network --credential --inject --credential-env --upstream-ca --output-files --quiet --json --events --color --background --detach-after --interactive --stream --pty --stdin --stdin-file --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --max-parallel)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-jobs)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --workdir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -C)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -t)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --signal)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --idle-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kill-after)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --stdout-max-bytes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --stderr-max-bytes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --file-size-max)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --spill-max-bytes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --memory-max)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --pids-max)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cpu-max)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --limits)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --keep)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --render)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --env)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -e)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --env-policy)
                    COMPREPLY=($(compgen -W "inherit core none" -- "${cur}"))
                    return 0
                    ;;
                --dsh-env)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --spill-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --sandbox)
                    COMPREPLY=($(compgen -W "read-only workspace-write full-access" -- "${cur}"))
                    return 0
                    ;;
                -s)
                    COMPREPLY=($(compgen -W "read-only workspace-write full-access" -- "${cur}"))
                    return 0
                    ;;
                --workspace-root)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --writable-root)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --on-exit)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --allow-unix-socket)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --protect)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --allow-write)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --deny-read)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --read-root)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --allow-read)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --network)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --credential)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --inject)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --credential-env)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --upstream-ca)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --color)
                    COMPREPLY=($(compgen -W "auto always never" -- "${cur}"))
                    return 0
                    ;;
                --detach-after)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --stdin)
                    COMPREPLY=($(compgen -W "closed pipe" -- "${cur}"))
                    return 0
                    ;;
                --stdin-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        dsh__exec__subcmd__parse__subcmd__status)
            opts="-h --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        dsh__exec__subcmd__prune)
            opts="-h --spill --older-than --spill-dir --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --older-than)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --spill-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        dsh__exec__subcmd__transaction)
            opts="-h --help list prune"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        dsh__exec__subcmd__transaction__subcmd__list)
            opts="-h --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        dsh__exec__subcmd__transaction__subcmd__prune)
            opts="-h --older-than --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --older-than)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
    esac
}

if [[ "${BASH_VERSINFO[0]}" -eq 4 && "${BASH_VERSINFO[1]}" -ge 4 || "${BASH_VERSINFO[0]}" -gt 4 ]]; then
    complete -F _dsh__exec -o nosort -o bashdefault -o default dsh-exec
else
    complete -F _dsh__exec -o bashdefault -o default dsh-exec
fi
