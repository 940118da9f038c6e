# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_dsh_exec_global_optspecs
    string join \n C/workdir= t/timeout= signal= idle-timeout= kill-after= stdout-max-bytes= stderr-max-bytes= file-size-max= spill-max-bytes= memory-max= pids-max= cpu-max= limits= keep= render= stdin-file= stdin= pty e/env= env-policy= dsh-env= spill-dir= s/sandbox= workspace-root= writable-root= no-temp-write allow-caches transaction on-exit= allow-unix-socket= protect= allow-write= deny-read= read-root= allow-read= network= credential= inject= credential-env= upstream-ca= i/interactive background detach-after= stream output-files q/quiet json events color= h/help V/version
end

function __fish_dsh_exec_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_dsh_exec_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_dsh_exec_using_subcommand
    set -l cmd (__fish_dsh_exec_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -s C -l workdir -d 'Working directory of the command [default: the current directory]' -r -F
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -s t -l timeout -d 'Deadline: 500ms, 30s, 2m, 1h30m, a number of seconds; 0 or none for no deadline [default: 10m]' -r
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -l signal -d 'The first signal sent at the deadline or on an abort, as timeout -s: TERM, INT, HUP, KILL, USR1, ... or a number; SIGKILL follows after --kill-after [default: TERM]' -r
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -l idle-timeout -d 'End the run as at the deadline when stdout and stderr both stay silent this long while the command runs (exit 124, timeout_kind idle); 0 or none for no idle deadline [default: none]' -r
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -l kill-after -d 'Grace period between SIGTERM and SIGKILL [default: 2s]' -r
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -l stdout-max-bytes -d 'Bytes of stdout kept (the tail, or what --keep says): 4096, 64K, 1.5M, 1MiB [default: 1MiB]' -r
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -l stderr-max-bytes -d 'Bytes of stderr kept (the tail, or what --keep says) [default: 1MiB]' -r
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -l file-size-max -d 'The largest file the command may write (RLIMIT_FSIZE, which it cannot raise): a write past it gets SIGXFSZ, which ends the writer (a shell reports 153); a program that ignores SIGXFSZ gets EFBIG instead [default: as inherited]' -r
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -l spill-max-bytes -d 'The most bytes one spill file holds (4GiB): past it the file stops growing, the tail keeps working, and the result says how many bytes were dropped [default: 4GiB]' -r
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -l memory-max -d 'The whole tree\'s memory (cgroup memory.max; RAM, no swap on top): at the limit the kernel reclaims, then its OOM killer ends a process, and the run ends as \'[killed by the memory limit (SIZE)]\'; none: unlimited, whatever the configuration file\'s default [default: unlimited]' -r
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -l pids-max -d 'Processes and threads of the tree at once (cgroup pids.max): past it fork and thread creation fail with EAGAIN; none: unlimited [default: unlimited]' -r
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -l cpu-max -d 'CPU time of the whole tree (user + system, all processes): once used, the tree gets --signal, then SIGKILL after --kill-after, as at the deadline; none: unlimited [default: unlimited]' -r
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -l limits -d 'strict: a limit that cannot be enforced here is an error (LIMIT_UNAVAILABLE, exit 125); best-effort: run without it, with a warning and a not_enforced fact [default: strict]' -r
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -l keep -d 'Which part of a stream that outgrew its budget is kept: tail, head, or head+tail (the first and last half, with a line between them saying how much was omitted and where the full stream is) [default: tail]' -r
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -l render -d 'raw: the text as written (given, also to a terminal, which is otherwise shown control sequences escaped); plain: as a terminal would show it (carriage-return overwrites collapsed, backspaces applied, escape sequences removed, other control bytes shown as \\xNN); the spill file stays exact [default: raw]' -r
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -l stdin-file -d 'Feed this file to the command\'s stdin (\'-\': this process\'s stdin) [default: closed]' -r -F
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -l stdin -d 'closed: the command\'s stdin reads end-of-file at once; pipe (with --background): it stays open, \'dsh-exec job write ID\' appends to it and \'job write ID --close\' closes it [default: closed]' -r -f -a "closed\t''
pipe\t''"
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -s e -l env -d 'Set KEY=VALUE in the child environment, or pass KEY through (even a scrubbed one)' -r
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -l env-policy -d 'Which of this process\'s variables the command inherits [default: inherit]; --env applies on top' -r -f -a "inherit\t'this process\'s environment minus what is plainly a secret'
core\t'only PATH, HOME, USER, LOGNAME, SHELL, LANG, LC_*, TZ, TMPDIR and TERM'
none\t'nothing of this process\'s'"
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -l dsh-env -d 'Set a managed DSH_KEY=VALUE entry, applied after every --env entry' -r
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -l spill-dir -d 'Where the run\'s private spill directory is created [default: STATE/spill, out of confined runs\' reach; $TMPDIR or /tmp if that cannot be made]' -r -F
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -s s -l sandbox -d 'Confine the command: read-only, workspace-write or full-access (Linux Landlock)' -r -f -a "read-only\t'Read and execute anything but the read deny list; write nothing but a few devices and a private scratch TMPDIR'
workspace-write\t'Also write under the workspace root, writable roots and the temp dir'
full-access\t'No confinement'"
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -l workspace-root -d 'Root the command may write under in workspace-write [default: the workdir]' -r -F
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -l writable-root -d 'Another directory writable in workspace-write (repeatable; missing ones are skipped)' -r -F
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -l on-exit -d 'What happens to the transaction when the run ends: commit, discard, or keep it pending [default: keep]' -r
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -l allow-unix-socket -d 'A Unix socket outside the writable roots that a confined command may connect to (repeatable)' -r -F
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -l protect -d 'Keep PATH read-only inside the writable roots, besides .git/config, .git/hooks and the rest (repeatable)' -r -F
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -l allow-write -d 'In workspace-write, leave one protected file of editors and agents writable: PATH names an entry (.vscode, .idea, .claude, .codex, .cursor, .gemini, .mcp.json, .envrc, .direnv), relative to the workdir (repeatable)' -r -F
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -l deny-read -d 'Make PATH unreadable in the confining modes, besides ~/.ssh, ~/.aws and the rest of the default list (repeatable)' -r -F
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -l read-root -d 'Read only PATH (repeatable), the workspace, the writable roots and the system\'s directories: /usr, /bin, /sbin, /lib*, /etc, /proc, /sys and the ordinary devices' -r -F
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -l allow-read -d 'Lift one entry of the read deny list (or make PATH inside a denied directory readable) (repeatable)' -r -F
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -l network -d 'IPv4/IPv6 networking [default: loopback in read-only and workspace-write, allow in full-access; config key network]: allow; deny (no IP sockets); loopback (TCP and UDP to and from 127.0.0.0/8 and ::1 only); allow=HOST[,HOST...] (loopback, and the listed hosts through a proxy of the run: example.org, *.example.org, 10.0.0.5, each with an optional :PORT, else ports 80 and 443; repeatable). Unix sockets work within the run; confined runs reach outside ones only with --allow-unix-socket' -r
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -l credential -d 'Declare a secret the command never gets: NAME=env:VAR, NAME=file:PATH or NAME=fd:N (repeatable; config key credentials). The proxy of --network allow= puts it into the requests an --inject rule names' -r
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -l inject -d 'Where a credential goes: HOST:PORT/PREFIX=bearer:NAME, basic:USER:NAME, header:FIELD:NAME or query:PARAM:NAME (:PORT and /PREFIX may be left out: port 443, every path; the host must be on --network allow=; repeatable; config key inject). TLS to HOST is ended by the proxy with a CA made for the run' -r
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -l credential-env -d 'Give the command a phantom of credential NAME in variable VAR, for tools that will not start without a key; the proxy swaps it for the real value where a rule allows and refuses it anywhere else (repeatable; config key credential_env)' -r
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -l upstream-ca -d 'Trust the CA certificates in FILE (PEM) for the proxy\'s TLS to injection hosts, beside the system\'s roots (repeatable; config key upstream_ca)' -r -F
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -l detach-after -d 'If the command still runs after this long, print its output so far and leave it running as a background job' -r
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -l color -d 'Colour the notices and the marker; never (or NO_COLOR) also removes the command\'s own colours on a terminal' -r -f -a "auto\t'On a terminal (or with CLICOLOR_FORCE), unless NO_COLOR is set'
always\t'Always colour'
never\t'Never colour'"
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -l pty -d 'With --background: run the command on a new pseudo-terminal (80x24), as its controlling terminal; its output is the terminal\'s (stderr merged), \'job write\' types into it, \'job resize\' sets its size; TERM=xterm-256color unless -e says otherwise'
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -l no-temp-write -d 'Keep the temp directory read-only in workspace-write'
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -l allow-caches -d 'Also make the package caches writable in workspace-write: cargo, npm, yarn, pip, uv, go, gradle and maven (those that exist, and those of the tools on PATH, made before the run and kept)'
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -l transaction -d 'Run the workspace root and every --writable-root on an overlay: the command\'s writes land in a private upper layer, the result lists every change, and `dsh-exec commit ID` or `dsh-exec discard ID` decides (implies --sandbox workspace-write; needs root)'
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -s i -l interactive -d 'Attach the command to this terminal, uncaptured (e.g. to try a sandbox by hand); without COMMAND, start $SHELL (else bash) as an interactive shell. At the end, what the sandbox refused goes to stderr, before the marker'
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -l background -d 'Start the command as a background job and print its id (see `dsh-exec job`)'
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -l stream -d 'Show the output live as it is produced (to stderr with --json), capturing it as usual'
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -l output-files -d 'Let the command write its stdout and stderr into unnamed files itself, not pipes: capture then costs what \'> FILE\' costs. As under \'> FILE\', a command that reopens /dev/stdout or /dev/stderr by path (\'echo x > /dev/stderr\') truncates what it wrote, confined or not. Pipes stay where --file-size-max or --memory-max is set, where the spill directory\'s file system has less free than --spill-max-bytes and 64 MiB, or where no unnamed file can be made (\'explain\' says which)'
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -s q -l quiet -d 'No notes on stderr (that stdin is not passed on, that a subcommand name ran as a command, the -i banner); warnings and errors stay'
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -l json -d 'Print one JSON object instead of the rendered text'
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -l events -d 'Print the run\'s events as NDJSON on stdout, one JSON object a line, as they happen: start, stdout and stderr chunks (at most 20 a second each; base64 where not UTF-8), notice, denial, limit, and last exit with the whole result (as --json prints it)'
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -s V -l version -d 'Print version'
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -a "explain" -d 'Resolve and show the spec and child environment; run nothing'
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -a "mcp" -d 'Serve the Model Context Protocol on stdio: tools run, start, read, write_stdin, wait, kill and list, and commit, discard and diff for transactions, under the policy these options fix (a call may ask for less, never for more)'
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -a "job" -d 'Read, write to, resize, wait for, kill, list or prune background jobs'
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -a "prune" -d 'Remove this user\'s spill directories that nothing has changed for a while (a week unless --older-than says otherwise)'
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -a "commit" -d 'Apply a transaction\'s changes (from a run with --transaction) to the real roots; a path changed meanwhile in the real tree, or protected, is refused and named (exit 1 when any was)'
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -a "discard" -d 'Throw a transaction\'s changes away; the real roots stay as they are'
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -a "diff" -d 'Show a transaction\'s changes: a unified diff of text files, a line for each other change'
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -a "transaction" -d 'List or prune the pending transactions (those of runs with --transaction not yet committed or discarded)'
complete -c dsh-exec -n "__fish_dsh_exec_needs_command" -a "parse-status" -d 'Read a rendered result (or a --json one) and print its status as JSON: exit_code, signal, and timed_out and aborted from the notices above the marker (exit 1 when the last line is no marker)'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand explain" -s C -l workdir -d 'Working directory of the command [default: the current directory]' -r -F
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand explain" -s t -l timeout -d 'Deadline: 500ms, 30s, 2m, 1h30m, a number of seconds; 0 or none for no deadline [default: 10m]' -r
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand explain" -l signal -d 'The first signal sent at the deadline or on an abort, as timeout -s: TERM, INT, HUP, KILL, USR1, ... or a number; SIGKILL follows after --kill-after [default: TERM]' -r
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand explain" -l idle-timeout -d 'End the run as at the deadline when stdout and stderr both stay silent this long while the command runs (exit 124, timeout_kind idle); 0 or none for no idle deadline [default: none]' -r
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand explain" -l kill-after -d 'Grace period between SIGTERM and SIGKILL [default: 2s]' -r
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand explain" -l stdout-max-bytes -d 'Bytes of stdout kept (the tail, or what --keep says): 4096, 64K, 1.5M, 1MiB [default: 1MiB]' -r
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand explain" -l stderr-max-bytes -d 'Bytes of stderr kept (the tail, or what --keep says) [default: 1MiB]' -r
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand explain" -l file-size-max -d 'The largest file the command may write (RLIMIT_FSIZE, which it cannot raise): a write past it gets SIGXFSZ, which ends the writer (a shell reports 153); a program that ignores SIGXFSZ gets EFBIG instead [default: as inherited]' -r
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand explain" -l spill-max-bytes -d 'The most bytes one spill file holds (4GiB): past it the file stops growing, the tail keeps working, and the result says how many bytes were dropped [default: 4GiB]' -r
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand explain" -l memory-max -d 'The whole tree\'s memory (cgroup memory.max; RAM, no swap on top): at the limit the kernel reclaims, then its OOM killer ends a process, and the run ends as \'[killed by the memory limit (SIZE)]\'; none: unlimited, whatever the configuration file\'s default [default: unlimited]' -r
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand explain" -l pids-max -d 'Processes and threads of the tree at once (cgroup pids.max): past it fork and thread creation fail with EAGAIN; none: unlimited [default: unlimited]' -r
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand explain" -l cpu-max -d 'CPU time of the whole tree (user + system, all processes): once used, the tree gets --signal, then SIGKILL after --kill-after, as at the deadline; none: unlimited [default: unlimited]' -r
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand explain" -l limits -d 'strict: a limit that cannot be enforced here is an error (LIMIT_UNAVAILABLE, exit 125); best-effort: run without it, with a warning and a not_enforced fact [default: strict]' -r
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand explain" -l keep -d 'Which part of a stream that outgrew its budget is kept: tail, head, or head+tail (the first and last half, with a line between them saying how much was omitted and where the full stream is) [default: tail]' -r
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand explain" -l render -d 'raw: the text as written (given, also to a terminal, which is otherwise shown control sequences escaped); plain: as a terminal would show it (carriage-return overwrites collapsed, backspaces applied, escape sequences removed, other control bytes shown as \\xNN); the spill file stays exact [default: raw]' -r
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand explain" -l stdin-file -d 'Feed this file to the command\'s stdin (\'-\': this process\'s stdin) [default: closed]' -r -F
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand explain" -l stdin -d 'closed: the command\'s stdin reads end-of-file at once; pipe (with --background): it stays open, \'dsh-exec job write ID\' appends to it and \'job write ID --close\' closes it [default: closed]' -r -f -a "closed\t''
pipe\t''"
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand explain" -s e -l env -d 'Set KEY=VALUE in the child environment, or pass KEY through (even a scrubbed one)' -r
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand explain" -l env-policy -d 'Which of this process\'s variables the command inherits [default: inherit]; --env applies on top' -r -f -a "inherit\t'this process\'s environment minus what is plainly a secret'
core\t'only PATH, HOME, USER, LOGNAME, SHELL, LANG, LC_*, TZ, TMPDIR and TERM'
none\t'nothing of this process\'s'"
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand explain" -l dsh-env -d 'Set a managed DSH_KEY=VALUE entry, applied after every --env entry' -r
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand explain" -l spill-dir -d 'Where the run\'s private spill directory is created [default: STATE/spill, out of confined runs\' reach; $TMPDIR or /tmp if that cannot be made]' -r -F
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand explain" -s s -l sandbox -d 'Confine the command: read-only, workspace-write or full-access (Linux Landlock)' -r -f -a "read-only\t'Read and execute anything but the read deny list; write nothing but a few devices and a private scratch TMPDIR'
workspace-write\t'Also write under the workspace root, writable roots and the temp dir'
full-access\t'No confinement'"
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand explain" -l workspace-root -d 'Root the command may write under in workspace-write [default: the workdir]' -r -F
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand explain" -l writable-root -d 'Another directory writable in workspace-write (repeatable; missing ones are skipped)' -r -F
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand explain" -l on-exit -d 'What happens to the transaction when the run ends: commit, discard, or keep it pending [default: keep]' -r
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand explain" -l allow-unix-socket -d 'A Unix socket outside the writable roots that a confined command may connect to (repeatable)' -r -F
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand explain" -l protect -d 'Keep PATH read-only inside the writable roots, besides .git/config, .git/hooks and the rest (repeatable)' -r -F
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand explain" -l allow-write -d 'In workspace-write, leave one protected file of editors and agents writable: PATH names an entry (.vscode, .idea, .claude, .codex, .cursor, .gemini, .mcp.json, .envrc, .direnv), relative to the workdir (repeatable)' -r -F
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand explain" -l deny-read -d 'Make PATH unreadable in the confining modes, besides ~/.ssh, ~/.aws and the rest of the default list (repeatable)' -r -F
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand explain" -l read-root -d 'Read only PATH (repeatable), the workspace, the writable roots and the system\'s directories: /usr, /bin, /sbin, /lib*, /etc, /proc, /sys and the ordinary devices' -r -F
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand explain" -l allow-read -d 'Lift one entry of the read deny list (or make PATH inside a denied directory readable) (repeatable)' -r -F
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand explain" -l network -d 'IPv4/IPv6 networking [default: loopback in read-only and workspace-write, allow in full-access; config key network]: allow; deny (no IP sockets); loopback (TCP and UDP to and from 127.0.0.0/8 and ::1 only); allow=HOST[,HOST...] (loopback, and the listed hosts through a proxy of the run: example.org, *.example.org, 10.0.0.5, each with an optional :PORT, else ports 80 and 443; repeatable). Unix sockets work within the run; confined runs reach outside ones only with --allow-unix-socket' -r
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand explain" -l credential -d 'Declare a secret the command never gets: NAME=env:VAR, NAME=file:PATH or NAME=fd:N (repeatable; config key credentials). The proxy of --network allow= puts it into the requests an --inject rule names' -r
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand explain" -l inject -d 'Where a credential goes: HOST:PORT/PREFIX=bearer:NAME, basic:USER:NAME, header:FIELD:NAME or query:PARAM:NAME (:PORT and /PREFIX may be left out: port 443, every path; the host must be on --network allow=; repeatable; config key inject). TLS to HOST is ended by the proxy with a CA made for the run' -r
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand explain" -l credential-env -d 'Give the command a phantom of credential NAME in variable VAR, for tools that will not start without a key; the proxy swaps it for the real value where a rule allows and refuses it anywhere else (repeatable; config key credential_env)' -r
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand explain" -l upstream-ca -d 'Trust the CA certificates in FILE (PEM) for the proxy\'s TLS to injection hosts, beside the system\'s roots (repeatable; config key upstream_ca)' -r -F
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand explain" -l detach-after -d 'If the command still runs after this long, print its output so far and leave it running as a background job' -r
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand explain" -l color -d 'Colour the notices and the marker; never (or NO_COLOR) also removes the command\'s own colours on a terminal' -r -f -a "auto\t'On a terminal (or with CLICOLOR_FORCE), unless NO_COLOR is set'
always\t'Always colour'
never\t'Never colour'"
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand explain" -l pty -d 'With --background: run the command on a new pseudo-terminal (80x24), as its controlling terminal; its output is the terminal\'s (stderr merged), \'job write\' types into it, \'job resize\' sets its size; TERM=xterm-256color unless -e says otherwise'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand explain" -l no-temp-write -d 'Keep the temp directory read-only in workspace-write'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand explain" -l allow-caches -d 'Also make the package caches writable in workspace-write: cargo, npm, yarn, pip, uv, go, gradle and maven (those that exist, and those of the tools on PATH, made before the run and kept)'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand explain" -l transaction -d 'Run the workspace root and every --writable-root on an overlay: the command\'s writes land in a private upper layer, the result lists every change, and `dsh-exec commit ID` or `dsh-exec discard ID` decides (implies --sandbox workspace-write; needs root)'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand explain" -s i -l interactive -d 'Attach the command to this terminal, uncaptured (e.g. to try a sandbox by hand); without COMMAND, start $SHELL (else bash) as an interactive shell. At the end, what the sandbox refused goes to stderr, before the marker'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand explain" -l background -d 'Start the command as a background job and print its id (see `dsh-exec job`)'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand explain" -l stream -d 'Show the output live as it is produced (to stderr with --json), capturing it as usual'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand explain" -l output-files -d 'Let the command write its stdout and stderr into unnamed files itself, not pipes: capture then costs what \'> FILE\' costs. As under \'> FILE\', a command that reopens /dev/stdout or /dev/stderr by path (\'echo x > /dev/stderr\') truncates what it wrote, confined or not. Pipes stay where --file-size-max or --memory-max is set, where the spill directory\'s file system has less free than --spill-max-bytes and 64 MiB, or where no unnamed file can be made (\'explain\' says which)'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand explain" -s q -l quiet -d 'No notes on stderr (that stdin is not passed on, that a subcommand name ran as a command, the -i banner); warnings and errors stay'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand explain" -l json -d 'Print one JSON object instead of the rendered text'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand explain" -l events -d 'Print the run\'s events as NDJSON on stdout, one JSON object a line, as they happen: start, stdout and stderr chunks (at most 20 a second each; base64 where not UTF-8), notice, denial, limit, and last exit with the whole result (as --json prints it)'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand explain" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand mcp" -l max-parallel -d 'How many `run` calls run at once; more wait for a slot, and say so in progress notifications' -r
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand mcp" -l max-jobs -d 'How many background jobs started by `start` may run at once; one more is a tool error' -r
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand mcp" -s C -l workdir -d 'Working directory of the command [default: the current directory]' -r -F
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand mcp" -s t -l timeout -d 'Deadline: 500ms, 30s, 2m, 1h30m, a number of seconds; 0 or none for no deadline [default: 10m]' -r
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand mcp" -l signal -d 'The first signal sent at the deadline or on an abort, as timeout -s: TERM, INT, HUP, KILL, USR1, ... or a number; SIGKILL follows after --kill-after [default: TERM]' -r
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand mcp" -l idle-timeout -d 'End the run as at the deadline when stdout and stderr both stay silent this long while the command runs (exit 124, timeout_kind idle); 0 or none for no idle deadline [default: none]' -r
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand mcp" -l kill-after -d 'Grace period between SIGTERM and SIGKILL [default: 2s]' -r
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand mcp" -l stdout-max-bytes -d 'Bytes of stdout kept (the tail, or what --keep says): 4096, 64K, 1.5M, 1MiB [default: 1MiB]' -r
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand mcp" -l stderr-max-bytes -d 'Bytes of stderr kept (the tail, or what --keep says) [default: 1MiB]' -r
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand mcp" -l file-size-max -d 'The largest file the command may write (RLIMIT_FSIZE, which it cannot raise): a write past it gets SIGXFSZ, which ends the writer (a shell reports 153); a program that ignores SIGXFSZ gets EFBIG instead [default: as inherited]' -r
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand mcp" -l spill-max-bytes -d 'The most bytes one spill file holds (4GiB): past it the file stops growing, the tail keeps working, and the result says how many bytes were dropped [default: 4GiB]' -r
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand mcp" -l memory-max -d 'The whole tree\'s memory (cgroup memory.max; RAM, no swap on top): at the limit the kernel reclaims, then its OOM killer ends a process, and the run ends as \'[killed by the memory limit (SIZE)]\'; none: unlimited, whatever the configuration file\'s default [default: unlimited]' -r
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand mcp" -l pids-max -d 'Processes and threads of the tree at once (cgroup pids.max): past it fork and thread creation fail with EAGAIN; none: unlimited [default: unlimited]' -r
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand mcp" -l cpu-max -d 'CPU time of the whole tree (user + system, all processes): once used, the tree gets --signal, then SIGKILL after --kill-after, as at the deadline; none: unlimited [default: unlimited]' -r
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand mcp" -l limits -d 'strict: a limit that cannot be enforced here is an error (LIMIT_UNAVAILABLE, exit 125); best-effort: run without it, with a warning and a not_enforced fact [default: strict]' -r
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand mcp" -l keep -d 'Which part of a stream that outgrew its budget is kept: tail, head, or head+tail (the first and last half, with a line between them saying how much was omitted and where the full stream is) [default: tail]' -r
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand mcp" -l render -d 'raw: the text as written (given, also to a terminal, which is otherwise shown control sequences escaped); plain: as a terminal would show it (carriage-return overwrites collapsed, backspaces applied, escape sequences removed, other control bytes shown as \\xNN); the spill file stays exact [default: raw]' -r
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand mcp" -s e -l env -d 'Set KEY=VALUE in the child environment, or pass KEY through (even a scrubbed one)' -r
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand mcp" -l env-policy -d 'Which of this process\'s variables the command inherits [default: inherit]; --env applies on top' -r -f -a "inherit\t'this process\'s environment minus what is plainly a secret'
core\t'only PATH, HOME, USER, LOGNAME, SHELL, LANG, LC_*, TZ, TMPDIR and TERM'
none\t'nothing of this process\'s'"
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand mcp" -l dsh-env -d 'Set a managed DSH_KEY=VALUE entry, applied after every --env entry' -r
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand mcp" -l spill-dir -d 'Where the run\'s private spill directory is created [default: STATE/spill, out of confined runs\' reach; $TMPDIR or /tmp if that cannot be made]' -r -F
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand mcp" -s s -l sandbox -d 'Confine the command: read-only, workspace-write or full-access (Linux Landlock)' -r -f -a "read-only\t'Read and execute anything but the read deny list; write nothing but a few devices and a private scratch TMPDIR'
workspace-write\t'Also write under the workspace root, writable roots and the temp dir'
full-access\t'No confinement'"
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand mcp" -l workspace-root -d 'Root the command may write under in workspace-write [default: the workdir]' -r -F
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand mcp" -l writable-root -d 'Another directory writable in workspace-write (repeatable; missing ones are skipped)' -r -F
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand mcp" -l on-exit -d 'What happens to the transaction when the run ends: commit, discard, or keep it pending [default: keep]' -r
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand mcp" -l allow-unix-socket -d 'A Unix socket outside the writable roots that a confined command may connect to (repeatable)' -r -F
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand mcp" -l protect -d 'Keep PATH read-only inside the writable roots, besides .git/config, .git/hooks and the rest (repeatable)' -r -F
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand mcp" -l allow-write -d 'In workspace-write, leave one protected file of editors and agents writable: PATH names an entry (.vscode, .idea, .claude, .codex, .cursor, .gemini, .mcp.json, .envrc, .direnv), relative to the workdir (repeatable)' -r -F
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand mcp" -l deny-read -d 'Make PATH unreadable in the confining modes, besides ~/.ssh, ~/.aws and the rest of the default list (repeatable)' -r -F
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand mcp" -l read-root -d 'Read only PATH (repeatable), the workspace, the writable roots and the system\'s directories: /usr, /bin, /sbin, /lib*, /etc, /proc, /sys and the ordinary devices' -r -F
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand mcp" -l allow-read -d 'Lift one entry of the read deny list (or make PATH inside a denied directory readable) (repeatable)' -r -F
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand mcp" -l network -d 'IPv4/IPv6 networking [default: loopback in read-only and workspace-write, allow in full-access; config key network]: allow; deny (no IP sockets); loopback (TCP and UDP to and from 127.0.0.0/8 and ::1 only); allow=HOST[,HOST...] (loopback, and the listed hosts through a proxy of the run: example.org, *.example.org, 10.0.0.5, each with an optional :PORT, else ports 80 and 443; repeatable). Unix sockets work within the run; confined runs reach outside ones only with --allow-unix-socket' -r
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand mcp" -l credential -d 'Declare a secret the command never gets: NAME=env:VAR, NAME=file:PATH or NAME=fd:N (repeatable; config key credentials). The proxy of --network allow= puts it into the requests an --inject rule names' -r
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand mcp" -l inject -d 'Where a credential goes: HOST:PORT/PREFIX=bearer:NAME, basic:USER:NAME, header:FIELD:NAME or query:PARAM:NAME (:PORT and /PREFIX may be left out: port 443, every path; the host must be on --network allow=; repeatable; config key inject). TLS to HOST is ended by the proxy with a CA made for the run' -r
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand mcp" -l credential-env -d 'Give the command a phantom of credential NAME in variable VAR, for tools that will not start without a key; the proxy swaps it for the real value where a rule allows and refuses it anywhere else (repeatable; config key credential_env)' -r
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand mcp" -l upstream-ca -d 'Trust the CA certificates in FILE (PEM) for the proxy\'s TLS to injection hosts, beside the system\'s roots (repeatable; config key upstream_ca)' -r -F
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand mcp" -l color -d 'Colour the notices and the marker; never (or NO_COLOR) also removes the command\'s own colours on a terminal' -r -f -a "auto\t'On a terminal (or with CLICOLOR_FORCE), unless NO_COLOR is set'
always\t'Always colour'
never\t'Never colour'"
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand mcp" -l detach-after -d 'If the command still runs after this long, print its output so far and leave it running as a background job' -r
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand mcp" -l stdin -d 'closed: the command\'s stdin reads end-of-file at once; pipe (with --background): it stays open, \'dsh-exec job write ID\' appends to it and \'job write ID --close\' closes it [default: closed]' -r -f -a "closed\t''
pipe\t''"
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand mcp" -l stdin-file -d 'Feed this file to the command\'s stdin (\'-\': this process\'s stdin) [default: closed]' -r -F
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand mcp" -l keep-jobs -d 'Leave the jobs the server started running when the client closes its stdin [default: they are killed and their trees swept]'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand mcp" -l no-temp-write -d 'Keep the temp directory read-only in workspace-write'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand mcp" -l allow-caches -d 'Also make the package caches writable in workspace-write: cargo, npm, yarn, pip, uv, go, gradle and maven (those that exist, and those of the tools on PATH, made before the run and kept)'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand mcp" -l transaction -d 'Run the workspace root and every --writable-root on an overlay: the command\'s writes land in a private upper layer, the result lists every change, and `dsh-exec commit ID` or `dsh-exec discard ID` decides (implies --sandbox workspace-write; needs root)'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand mcp" -l output-files -d 'Let the command write its stdout and stderr into unnamed files itself, not pipes: capture then costs what \'> FILE\' costs. As under \'> FILE\', a command that reopens /dev/stdout or /dev/stderr by path (\'echo x > /dev/stderr\') truncates what it wrote, confined or not. Pipes stay where --file-size-max or --memory-max is set, where the spill directory\'s file system has less free than --spill-max-bytes and 64 MiB, or where no unnamed file can be made (\'explain\' says which)'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand mcp" -s q -l quiet -d 'No notes on stderr (that stdin is not passed on, that a subcommand name ran as a command, the -i banner); warnings and errors stay'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand mcp" -l json -d 'Print one JSON object instead of the rendered text'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand mcp" -l events -d 'Print the run\'s events as NDJSON on stdout, one JSON object a line, as they happen: start, stdout and stderr chunks (at most 20 a second each; base64 where not UTF-8), notice, denial, limit, and last exit with the whole result (as --json prints it)'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand mcp" -l background -d 'Start the command as a background job and print its id (see `dsh-exec job`)'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand mcp" -s i -l interactive -d 'Attach the command to this terminal, uncaptured (e.g. to try a sandbox by hand); without COMMAND, start $SHELL (else bash) as an interactive shell. At the end, what the sandbox refused goes to stderr, before the marker'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand mcp" -l stream -d 'Show the output live as it is produced (to stderr with --json), capturing it as usual'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand mcp" -l pty -d 'With --background: run the command on a new pseudo-terminal (80x24), as its controlling terminal; its output is the terminal\'s (stderr merged), \'job write\' types into it, \'job resize\' sets its size; TERM=xterm-256color unless -e says otherwise'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand mcp" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand job; and not __fish_seen_subcommand_from read wait write resize kill list prune" -s h -l help -d 'Print help'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand job; and not __fish_seen_subcommand_from read wait write resize kill list prune" -f -a "read" -d 'Print what the job wrote since the previous read, then `[running]` or its end'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand job; and not __fish_seen_subcommand_from read wait write resize kill list prune" -f -a "wait" -d 'Wait for the job to end and print its result as a foreground run would'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand job; and not __fish_seen_subcommand_from read wait write resize kill list prune" -f -a "write" -d 'Append to the stdin of a job started with --stdin pipe (DATA with C escapes: \\n, \\t, \\\\, \\xHH; or --file; \'-\' reads this process\'s stdin), or close it; exit 1 if the job cannot take it'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand job; and not __fish_seen_subcommand_from read wait write resize kill list prune" -f -a "resize" -d 'Set the window size of a --pty job\'s terminal (the command gets SIGWINCH); exit 1 if the job has none'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand job; and not __fish_seen_subcommand_from read wait write resize kill list prune" -f -a "kill" -d 'Kill the job\'s whole tree (SIGTERM, grace, SIGKILL); exit 1 if it had ended'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand job; and not __fish_seen_subcommand_from read wait write resize kill list prune" -f -a "list" -d 'List this user\'s jobs'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand job; and not __fish_seen_subcommand_from read wait write resize kill list prune" -f -a "prune" -d 'Remove the directories of finished and lost jobs'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand job; and __fish_seen_subcommand_from read" -l json -d 'Print one JSON object'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand job; and __fish_seen_subcommand_from read" -s h -l help -d 'Print help'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand job; and __fish_seen_subcommand_from wait" -s t -l timeout -d 'Give up after this long: print `[still running]` and exit 124' -r
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand job; and __fish_seen_subcommand_from wait" -l json -d 'Print the result as one JSON object'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand job; and __fish_seen_subcommand_from wait" -s h -l help -d 'Print help'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand job; and __fish_seen_subcommand_from write" -l file -d 'Write this file\'s bytes, as they are' -r -F
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand job; and __fish_seen_subcommand_from write" -s t -l timeout -d 'Give up when the command has not read for this long [default: 10s]' -r
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand job; and __fish_seen_subcommand_from write" -l close -d 'Close the job\'s stdin (after writing DATA or FILE, if given): the command reads end-of-file'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand job; and __fish_seen_subcommand_from write" -s h -l help -d 'Print help'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand job; and __fish_seen_subcommand_from resize" -s h -l help -d 'Print help'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand job; and __fish_seen_subcommand_from kill" -s h -l help -d 'Print help'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand job; and __fish_seen_subcommand_from list" -l json -d 'Print one JSON array'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand job; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand job; and __fish_seen_subcommand_from prune" -l spill -d 'Also remove their spill files'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand job; and __fish_seen_subcommand_from prune" -s h -l help -d 'Print help'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand prune" -l older-than -d 'Only those unchanged for this long' -r
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand prune" -l spill-dir -d 'Look in DIR instead of the configured spill_dir, STATE/spill and the temp dir' -r -F
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand prune" -l spill -d 'Prune spill directories (what `prune` removes; required)'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand prune" -s h -l help -d 'Print help'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand commit" -l atomic -d 'Apply nothing when any path would be refused'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand commit" -l force -d 'Also apply paths changed in the real tree after the transaction started (never protected paths or planted git metadata)'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand commit" -l json -d 'Print one JSON object'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand commit" -s h -l help -d 'Print help'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand discard" -s h -l help -d 'Print help'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand diff" -s h -l help -d 'Print help'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand transaction; and not __fish_seen_subcommand_from list prune" -s h -l help -d 'Print help'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand transaction; and not __fish_seen_subcommand_from list prune" -f -a "list" -d 'List the pending transactions: id, state (pending, running, lost), changes, working directory, command'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand transaction; and not __fish_seen_subcommand_from list prune" -f -a "prune" -d 'Discard the pending transactions that started longer ago than --older-than (a week unless it says otherwise), those whose run was lost (its dsh-exec killed), and unrecorded ones left by a dsh-exec killed as it started (unchanged for a minute at least)'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand transaction; and __fish_seen_subcommand_from list" -l json -d 'Print one JSON array'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand transaction; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand transaction; and __fish_seen_subcommand_from prune" -l older-than -d 'Only those started at least this long ago' -r
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand transaction; and __fish_seen_subcommand_from prune" -s h -l help -d 'Print help'
complete -c dsh-exec -n "__fish_dsh_exec_using_subcommand parse-status" -s h -l help -d 'Print help'
