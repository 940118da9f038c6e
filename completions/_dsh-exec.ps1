
using namespace System.Management.Automation
using namespace System.Management.Automation.Language

Register-ArgumentCompleter -Native -CommandName 'dsh-exec' -ScriptBlock {
    param($wordToComplete, $commandAst, $cursorPosition)

    $commandElements = $commandAst.CommandElements
    $command = @(
        'dsh-exec'
        for ($i = 1; $i -lt $commandElements.Count; $i++) {
            $element = $commandElements[$i]
            if ($element -isnot [StringConstantExpressionAst] -or
                $element.StringConstantType -ne [StringConstantType]::BareWord -or
                $element.Value.StartsWith('-') -or
                $element.Value -eq $wordToComplete) {
                break
        }
        $element.Value
    }) -join ';'

    $completions = @(switch ($command) {
        'dsh-exec' {
            [CompletionResult]::new('-C', '-C ', [CompletionResultType]::ParameterName, 'Working directory of the command [default: the current directory]')
            [CompletionResult]::new('--workdir', '--workdir', [CompletionResultType]::ParameterName, 'Working directory of the command [default: the current directory]')
            [CompletionResult]::new('-t', '-t', [CompletionResultType]::ParameterName, 'Deadline: 500ms, 30s, 2m, 1h30m, a number of seconds; 0 or none for no deadline [default: 10m]')
            [CompletionResult]::new('--timeout', '--timeout', [CompletionResultType]::ParameterName, 'Deadline: 500ms, 30s, 2m, 1h30m, a number of seconds; 0 or none for no deadline [default: 10m]')
            [CompletionResult]::new('--signal', '--signal', [CompletionResultType]::ParameterName, 'The first signal sent at the deadline or on an abort, as timeout -s: TERM, INT, HUP, KILL, USR1, ... or a number; SIGKILL follows after --kill-after [default: TERM]')
            [CompletionResult]::new('--idle-timeout', '--idle-timeout', [CompletionResultType]::ParameterName, 'End the run as at the deadline when stdout and stderr both stay silent this long while the command runs (exit 124, timeout_kind idle); 0 or none for no idle deadline [default: none]')
            [CompletionResult]::new('--kill-after', '--kill-after', [CompletionResultType]::ParameterName, 'Grace period between SIGTERM and SIGKILL [default: 2s]')
            [CompletionResult]::new('--stdout-max-bytes', '--stdout-max-bytes', [CompletionResultType]::ParameterName, 'Bytes of stdout kept (the tail, or what --keep says): 4096, 64K, 1.5M, 1MiB [default: 1MiB]')
            [CompletionResult]::new('--stderr-max-bytes', '--stderr-max-bytes', [CompletionResultType]::ParameterName, 'Bytes of stderr kept (the tail, or what --keep says) [default: 1MiB]')
            [CompletionResult]::new('--file-size-max', '--file-size-max', [CompletionResultType]::ParameterName, 'The largest file the command may write (RLIMIT_FSIZE, which it cannot raise): a write past it gets SIGXFSZ, which ends the writer (a shell reports 153); a program that ignores SIGXFSZ gets EFBIG instead [default: as inherited]')
            [CompletionResult]::new('--spill-max-bytes', '--spill-max-bytes', [CompletionResultType]::ParameterName, 'The most bytes one spill file holds (4GiB): past it the file stops growing, the tail keeps working, and the result says how many bytes were dropped [default: 4GiB]')
            [CompletionResult]::new('--memory-max', '--memory-max', [CompletionResultType]::ParameterName, 'The whole tree''s memory (cgroup memory.max; RAM, no swap on top): at the limit the kernel reclaims, then its OOM killer ends a process, and the run ends as ''[killed by the memory limit (SIZE)]''; none: unlimited, whatever the configuration file''s default [default: unlimited]')
            [CompletionResult]::new('--pids-max', '--pids-max', [CompletionResultType]::ParameterName, 'Processes and threads of the tree at once (cgroup pids.max): past it fork and thread creation fail with EAGAIN; none: unlimited [default: unlimited]')
            [CompletionResult]::new('--cpu-max', '--cpu-max', [CompletionResultType]::ParameterName, 'CPU time of the whole tree (user + system, all processes): once used, the tree gets --signal, then SIGKILL after --kill-after, as at the deadline; none: unlimited [default: unlimited]')
            [CompletionResult]::new('--limits', '--limits', [CompletionResultType]::ParameterName, 'strict: a limit that cannot be enforced here is an error (LIMIT_UNAVAILABLE, exit 125); best-effort: run without it, with a warning and a not_enforced fact [default: strict]')
            [CompletionResult]::new('--keep', '--keep', [CompletionResultType]::ParameterName, 'Which part of a stream that outgrew its budget is kept: tail, head, or head+tail (the first and last half, with a line between them saying how much was omitted and where the full stream is) [default: tail]')
            [CompletionResult]::new('--render', '--render', [CompletionResultType]::ParameterName, 'raw: the text as written (given, also to a terminal, which is otherwise shown control sequences escaped); plain: as a terminal would show it (carriage-return overwrites collapsed, backspaces applied, escape sequences removed, other control bytes shown as \xNN); the spill file stays exact [default: raw]')
            [CompletionResult]::new('--stdin-file', '--stdin-file', [CompletionResultType]::ParameterName, 'Feed this file to the command''s stdin (''-'': this process''s stdin) [default: closed]')
            [CompletionResult]::new('--stdin', '--stdin', [CompletionResultType]::ParameterName, 'closed: the command''s stdin reads end-of-file at once; pipe (with --background): it stays open, ''dsh-exec job write ID'' appends to it and ''job write ID --close'' closes it [default: closed]')
            [CompletionResult]::new('-e', '-e', [CompletionResultType]::ParameterName, 'Set KEY=VALUE in the child environment, or pass KEY through (even a scrubbed one)')
            [CompletionResult]::new('--env', '--env', [CompletionResultType]::ParameterName, 'Set KEY=VALUE in the child environment, or pass KEY through (even a scrubbed one)')
            [CompletionResult]::new('--env-policy', '--env-policy', [CompletionResultType]::ParameterName, 'Which of this process''s variables the command inherits [default: inherit]; --env applies on top')
            [CompletionResult]::new('--dsh-env', '--dsh-env', [CompletionResultType]::ParameterName, 'Set a managed DSH_KEY=VALUE entry, applied after every --env entry')
            [CompletionResult]::new('--spill-dir', '--spill-dir', [CompletionResultType]::ParameterName, 'Where the run''s private spill directory is created [default: STATE/spill, out of confined runs'' reach; $TMPDIR or /tmp if that cannot be made]')
            [CompletionResult]::new('-s', '-s', [CompletionResultType]::ParameterName, 'Confine the command: read-only, workspace-write or full-access (Linux Landlock)')
            [CompletionResult]::new('--sandbox', '--sandbox', [CompletionResultType]::ParameterName, 'Confine the command: read-only, workspace-write or full-access (Linux Landlock)')
            [CompletionResult]::new('--workspace-root', '--workspace-root', [CompletionResultType]::ParameterName, 'Root the command may write under in workspace-write [default: the workdir]')
            [CompletionResult]::new('--writable-root', '--writable-root', [CompletionResultType]::ParameterName, 'Another directory writable in workspace-write (repeatable; missing ones are skipped)')
            [CompletionResult]::new('--on-exit', '--on-exit', [CompletionResultType]::ParameterName, 'What happens to the transaction when the run ends: commit, discard, or keep it pending [default: keep]')
            [CompletionResult]::new('--allow-unix-socket', '--allow-unix-socket', [CompletionResultType]::ParameterName, 'A Unix socket outside the writable roots that a confined command may connect to (repeatable)')
            [CompletionResult]::new('--protect', '--protect', [CompletionResultType]::ParameterName, 'Keep PATH read-only inside the writable roots, besides .git/config, .git/hooks and the rest (repeatable)')
            [CompletionResult]::new('--allow-write', '--allow-write', [CompletionResultType]::ParameterName, 'In workspace-write, leave one protected file of editors and agents writable: PATH names an entry (.vscode, .idea, .claude, .codex, .cursor, .gemini, .mcp.json, .envrc, .direnv), relative to the workdir (repeatable)')
            [CompletionResult]::new('--deny-read', '--deny-read', [CompletionResultType]::ParameterName, 'Make PATH unreadable in the confining modes, besides ~/.ssh, ~/.aws and the rest of the default list (repeatable)')
            [CompletionResult]::new('--read-root', '--read-root', [CompletionResultType]::ParameterName, 'Read only PATH (repeatable), the workspace, the writable roots and the system''s directories: /usr, /bin, /sbin, /lib*, /etc, /proc, /sys and the ordinary devices')
            [CompletionResult]::new('--allow-read', '--allow-read', [CompletionResultType]::ParameterName, 'Lift one entry of the read deny list (or make PATH inside a denied directory readable) (repeatable)')
            [CompletionResult]::new('--network', '--network', [CompletionResultType]::ParameterName, 'IPv4/IPv6 networking [default: loopback in read-only and workspace-write, allow in full-access; config key network]: allow; deny (no IP sockets); loopback (TCP and UDP to and from 127.0.0.0/8 and ::1 only); allow=HOST[,HOST...] (loopback, and the listed hosts through a proxy of the run: example.org, *.example.org, 10.0.0.5, each with an optional :PORT, else ports 80 and 443; repeatable). Unix sockets work within the run; confined runs reach outside ones only with --allow-unix-socket')
            [CompletionResult]::new('--credential', '--credential', [CompletionResultType]::ParameterName, 'Declare a secret the command never gets: NAME=env:VAR, NAME=file:PATH or NAME=fd:N (repeatable; config key credentials). The proxy of --network allow= puts it into the requests an --inject rule names')
            [CompletionResult]::new('--inject', '--inject', [CompletionResultType]::ParameterName, 'Where a credential goes: HOST:PORT/PREFIX=bearer:NAME, basic:USER:NAME, header:FIELD:NAME or query:PARAM:NAME (:PORT and /PREFIX may be left out: port 443, every path; the host must be on --network allow=; repeatable; config key inject). TLS to HOST is ended by the proxy with a CA made for the run')
            [CompletionResult]::new('--credential-env', '--credential-env', [CompletionResultType]::ParameterName, 'Give the command a phantom of credential NAME in variable VAR, for tools that will not start without a key; the proxy swaps it for the real value where a rule allows and refuses it anywhere else (repeatable; config key credential_env)')
            [CompletionResult]::new('--upstream-ca', '--upstream-ca', [CompletionResultType]::ParameterName, 'Trust the CA certificates in FILE (PEM) for the proxy''s TLS to injection hosts, beside the system''s roots (repeatable; config key upstream_ca)')
            [CompletionResult]::new('--detach-after', '--detach-after', [CompletionResultType]::ParameterName, 'If the command still runs after this long, print its output so far and leave it running as a background job')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'Colour the notices and the marker; never (or NO_COLOR) also removes the command''s own colours on a terminal')
            [CompletionResult]::new('--pty', '--pty', [CompletionResultType]::ParameterName, 'With --background: run the command on a new pseudo-terminal (80x24), as its controlling terminal; its output is the terminal''s (stderr merged), ''job write'' types into it, ''job resize'' sets its size; TERM=xterm-256color unless -e says otherwise')
            [CompletionResult]::new('--no-temp-write', '--no-temp-write', [CompletionResultType]::ParameterName, 'Keep the temp directory read-only in workspace-write')
            [CompletionResult]::new('--allow-caches', '--allow-caches', [CompletionResultType]::ParameterName, 'Also make the package caches writable in workspace-write: cargo, npm, yarn, pip, uv, go, gradle and maven (those that exist, and those of the tools on PATH, made before the run and kept)')
            [CompletionResult]::new('--transaction', '--transaction', [CompletionResultType]::ParameterName, 'Run the workspace root and every --writable-root on an overlay: the command''s writes land in a private upper layer, the result lists every change, and `dsh-exec commit ID` or `dsh-exec discard ID` decides (implies --sandbox workspace-write; needs root)')
            [CompletionResult]::new('-i', '-i', [CompletionResultType]::ParameterName, 'Attach the command to this terminal, uncaptured (e.g. to try a sandbox by hand); without COMMAND, start $SHELL (else bash) as an interactive shell. At the end, what the sandbox refused goes to stderr, before the marker')
            [CompletionResult]::new('--interactive', '--interactive', [CompletionResultType]::ParameterName, 'Attach the command to this terminal, uncaptured (e.g. to try a sandbox by hand); without COMMAND, start $SHELL (else bash) as an interactive shell. At the end, what the sandbox refused goes to stderr, before the marker')
            [CompletionResult]::new('--background', '--background', [CompletionResultType]::ParameterName, 'Start the command as a background job and print its id (see `dsh-exec job`)')
            [CompletionResult]::new('--stream', '--stream', [CompletionResultType]::ParameterName, 'Show the output live as it is produced (to stderr with --json), capturing it as usual')
            [CompletionResult]::new('--output-files', '--output-files', [CompletionResultType]::ParameterName, 'Let the command write its stdout and stderr into unnamed files itself, not pipes: capture then costs what ''> FILE'' costs. As under ''> FILE'', a command that reopens /dev/stdout or /dev/stderr by path (''echo x > /dev/stderr'') truncates what it wrote, confined or not. Pipes stay where --file-size-max or --memory-max is set, where the spill directory''s file system has less free than --spill-max-bytes and 64 MiB, or where no unnamed file can be made (''explain'' says which)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'No notes on stderr (that stdin is not passed on, that a subcommand name ran as a command, the -i banner); warnings and errors stay')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'No notes on stderr (that stdin is not passed on, that a subcommand name ran as a command, the -i banner); warnings and errors stay')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print one JSON object instead of the rendered text')
            [CompletionResult]::new('--events', '--events', [CompletionResultType]::ParameterName, 'Print the run''s events as NDJSON on stdout, one JSON object a line, as they happen: start, stdout and stderr chunks (at most 20 a second each; base64 where not UTF-8), notice, denial, limit, and last exit with the whole result (as --json prints it)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('explain', 'explain', [CompletionResultType]::ParameterValue, 'Resolve and show the spec and child environment; run nothing')
            [CompletionResult]::new('mcp', 'mcp', [CompletionResultType]::ParameterValue, 'Serve the Model Context Protocol on stdio: tools run, start, read, write_stdin, wait, kill and list, and commit, discard and diff for transactions, under the policy these options fix (a call may ask for less, never for more)')
            [CompletionResult]::new('job', 'job', [CompletionResultType]::ParameterValue, 'Read, write to, resize, wait for, kill, list or prune background jobs')
            [CompletionResult]::new('prune', 'prune', [CompletionResultType]::ParameterValue, 'Remove this user''s spill directories that nothing has changed for a while (a week unless --older-than says otherwise)')
            [CompletionResult]::new('commit', 'commit', [CompletionResultType]::ParameterValue, 'Apply a transaction''s changes (from a run with --transaction) to the real roots; a path changed meanwhile in the real tree, or protected, is refused and named (exit 1 when any was)')
            [CompletionResult]::new('discard', 'discard', [CompletionResultType]::ParameterValue, 'Throw a transaction''s changes away; the real roots stay as they are')
            [CompletionResult]::new('diff', 'diff', [CompletionResultType]::ParameterValue, 'Show a transaction''s changes: a unified diff of text files, a line for each other change')
            [CompletionResult]::new('transaction', 'transaction', [CompletionResultType]::ParameterValue, 'List or prune the pending transactions (those of runs with --transaction not yet committed or discarded)')
            [CompletionResult]::new('parse-status', 'parse-status', [CompletionResultType]::ParameterValue, 'Read a rendered result (or a --json one) and print its status as JSON: exit_code, signal, and timed_out and aborted from the notices above the marker (exit 1 when the last line is no marker)')
            break
        }
        'dsh-exec;explain' {
            [CompletionResult]::new('-C', '-C ', [CompletionResultType]::ParameterName, 'Working directory of the command [default: the current directory]')
            [CompletionResult]::new('--workdir', '--workdir', [CompletionResultType]::ParameterName, 'Working directory of the command [default: the current directory]')
            [CompletionResult]::new('-t', '-t', [CompletionResultType]::ParameterName, 'Deadline: 500ms, 30s, 2m, 1h30m, a number of seconds; 0 or none for no deadline [default: 10m]')
            [CompletionResult]::new('--timeout', '--timeout', [CompletionResultType]::ParameterName, 'Deadline: 500ms, 30s, 2m, 1h30m, a number of seconds; 0 or none for no deadline [default: 10m]')
            [CompletionResult]::new('--signal', '--signal', [CompletionResultType]::ParameterName, 'The first signal sent at the deadline or on an abort, as timeout -s: TERM, INT, HUP, KILL, USR1, ... or a number; SIGKILL follows after --kill-after [default: TERM]')
            [CompletionResult]::new('--idle-timeout', '--idle-timeout', [CompletionResultType]::ParameterName, 'End the run as at the deadline when stdout and stderr both stay silent this long while the command runs (exit 124, timeout_kind idle); 0 or none for no idle deadline [default: none]')
            [CompletionResult]::new('--kill-after', '--kill-after', [CompletionResultType]::ParameterName, 'Grace period between SIGTERM and SIGKILL [default: 2s]')
            [CompletionResult]::new('--stdout-max-bytes', '--stdout-max-bytes', [CompletionResultType]::ParameterName, 'Bytes of stdout kept (the tail, or what --keep says): 4096, 64K, 1.5M, 1MiB [default: 1MiB]')
            [CompletionResult]::new('--stderr-max-bytes', '--stderr-max-bytes', [CompletionResultType]::ParameterName, 'Bytes of stderr kept (the tail, or what --keep says) [default: 1MiB]')
            [CompletionResult]::new('--file-size-max', '--file-size-max', [CompletionResultType]::ParameterName, 'The largest file the command may write (RLIMIT_FSIZE, which it cannot raise): a write past it gets SIGXFSZ, which ends the writer (a shell reports 153); a program that ignores SIGXFSZ gets EFBIG instead [default: as inherited]')
            [CompletionResult]::new('--spill-max-bytes', '--spill-max-bytes', [CompletionResultType]::ParameterName, 'The most bytes one spill file holds (4GiB): past it the file stops growing, the tail keeps working, and the result says how many bytes were dropped [default: 4GiB]')
            [CompletionResult]::new('--memory-max', '--memory-max', [CompletionResultType]::ParameterName, 'The whole tree''s memory (cgroup memory.max; RAM, no swap on top): at the limit the kernel reclaims, then its OOM killer ends a process, and the run ends as ''[killed by the memory limit (SIZE)]''; none: unlimited, whatever the configuration file''s default [default: unlimited]')
            [CompletionResult]::new('--pids-max', '--pids-max', [CompletionResultType]::ParameterName, 'Processes and threads of the tree at once (cgroup pids.max): past it fork and thread creation fail with EAGAIN; none: unlimited [default: unlimited]')
            [CompletionResult]::new('--cpu-max', '--cpu-max', [CompletionResultType]::ParameterName, 'CPU time of the whole tree (user + system, all processes): once used, the tree gets --signal, then SIGKILL after --kill-after, as at the deadline; none: unlimited [default: unlimited]')
            [CompletionResult]::new('--limits', '--limits', [CompletionResultType]::ParameterName, 'strict: a limit that cannot be enforced here is an error (LIMIT_UNAVAILABLE, exit 125); best-effort: run without it, with a warning and a not_enforced fact [default: strict]')
            [CompletionResult]::new('--keep', '--keep', [CompletionResultType]::ParameterName, 'Which part of a stream that outgrew its budget is kept: tail, head, or head+tail (the first and last half, with a line between them saying how much was omitted and where the full stream is) [default: tail]')
            [CompletionResult]::new('--render', '--render', [CompletionResultType]::ParameterName, 'raw: the text as written (given, also to a terminal, which is otherwise shown control sequences escaped); plain: as a terminal would show it (carriage-return overwrites collapsed, backspaces applied, escape sequences removed, other control bytes shown as \xNN); the spill file stays exact [default: raw]')
            [CompletionResult]::new('--stdin-file', '--stdin-file', [CompletionResultType]::ParameterName, 'Feed this file to the command''s stdin (''-'': this process''s stdin) [default: closed]')
            [CompletionResult]::new('--stdin', '--stdin', [CompletionResultType]::ParameterName, 'closed: the command''s stdin reads end-of-file at once; pipe (with --background): it stays open, ''dsh-exec job write ID'' appends to it and ''job write ID --close'' closes it [default: closed]')
            [CompletionResult]::new('-e', '-e', [CompletionResultType]::ParameterName, 'Set KEY=VALUE in the child environment, or pass KEY through (even a scrubbed one)')
            [CompletionResult]::new('--env', '--env', [CompletionResultType]::ParameterName, 'Set KEY=VALUE in the child environment, or pass KEY through (even a scrubbed one)')
            [CompletionResult]::new('--env-policy', '--env-policy', [CompletionResultType]::ParameterName, 'Which of this process''s variables the command inherits [default: inherit]; --env applies on top')
            [CompletionResult]::new('--dsh-env', '--dsh-env', [CompletionResultType]::ParameterName, 'Set a managed DSH_KEY=VALUE entry, applied after every --env entry')
            [CompletionResult]::new('--spill-dir', '--spill-dir', [CompletionResultType]::ParameterName, 'Where the run''s private spill directory is created [default: STATE/spill, out of confined runs'' reach; $TMPDIR or /tmp if that cannot be made]')
            [CompletionResult]::new('-s', '-s', [CompletionResultType]::ParameterName, 'Confine the command: read-only, workspace-write or full-access (Linux Landlock)')
            [CompletionResult]::new('--sandbox', '--sandbox', [CompletionResultType]::ParameterName, 'Confine the command: read-only, workspace-write or full-access (Linux Landlock)')
            [CompletionResult]::new('--workspace-root', '--workspace-root', [CompletionResultType]::ParameterName, 'Root the command may write under in workspace-write [default: the workdir]')
            [CompletionResult]::new('--writable-root', '--writable-root', [CompletionResultType]::ParameterName, 'Another directory writable in workspace-write (repeatable; missing ones are skipped)')
            [CompletionResult]::new('--on-exit', '--on-exit', [CompletionResultType]::ParameterName, 'What happens to the transaction when the run ends: commit, discard, or keep it pending [default: keep]')
            [CompletionResult]::new('--allow-unix-socket', '--allow-unix-socket', [CompletionResultType]::ParameterName, 'A Unix socket outside the writable roots that a confined command may connect to (repeatable)')
            [CompletionResult]::new('--protect', '--protect', [CompletionResultType]::ParameterName, 'Keep PATH read-only inside the writable roots, besides .git/config, .git/hooks and the rest (repeatable)')
            [CompletionResult]::new('--allow-write', '--allow-write', [CompletionResultType]::ParameterName, 'In workspace-write, leave one protected file of editors and agents writable: PATH names an entry (.vscode, .idea, .claude, .codex, .cursor, .gemini, .mcp.json, .envrc, .direnv), relative to the workdir (repeatable)')
            [CompletionResult]::new('--deny-read', '--deny-read', [CompletionResultType]::ParameterName, 'Make PATH unreadable in the confining modes, besides ~/.ssh, ~/.aws and the rest of the default list (repeatable)')
            [CompletionResult]::new('--read-root', '--read-root', [CompletionResultType]::ParameterName, 'Read only PATH (repeatable), the workspace, the writable roots and the system''s directories: /usr, /bin, /sbin, /lib*, /etc, /proc, /sys and the ordinary devices')
            [CompletionResult]::new('--allow-read', '--allow-read', [CompletionResultType]::ParameterName, 'Lift one entry of the read deny list (or make PATH inside a denied directory readable) (repeatable)')
            [CompletionResult]::new('--network', '--network', [CompletionResultType]::ParameterName, 'IPv4/IPv6 networking [default: loopback in read-only and workspace-write, allow in full-access; config key network]: allow; deny (no IP sockets); loopback (TCP and UDP to and from 127.0.0.0/8 and ::1 only); allow=HOST[,HOST...] (loopback, and the listed hosts through a proxy of the run: example.org, *.example.org, 10.0.0.5, each with an optional :PORT, else ports 80 and 443; repeatable). Unix sockets work within the run; confined runs reach outside ones only with --allow-unix-socket')
            [CompletionResult]::new('--credential', '--credential', [CompletionResultType]::ParameterName, 'Declare a secret the command never gets: NAME=env:VAR, NAME=file:PATH or NAME=fd:N (repeatable; config key credentials). The proxy of --network allow= puts it into the requests an --inject rule names')
            [CompletionResult]::new('--inject', '--inject', [CompletionResultType]::ParameterName, 'Where a credential goes: HOST:PORT/PREFIX=bearer:NAME, basic:USER:NAME, header:FIELD:NAME or query:PARAM:NAME (:PORT and /PREFIX may be left out: port 443, every path; the host must be on --network allow=; repeatable; config key inject). TLS to HOST is ended by the proxy with a CA made for the run')
            [CompletionResult]::new('--credential-env', '--credential-env', [CompletionResultType]::ParameterName, 'Give the command a phantom of credential NAME in variable VAR, for tools that will not start without a key; the proxy swaps it for the real value where a rule allows and refuses it anywhere else (repeatable; config key credential_env)')
            [CompletionResult]::new('--upstream-ca', '--upstream-ca', [CompletionResultType]::ParameterName, 'Trust the CA certificates in FILE (PEM) for the proxy''s TLS to injection hosts, beside the system''s roots (repeatable; config key upstream_ca)')
            [CompletionResult]::new('--detach-after', '--detach-after', [CompletionResultType]::ParameterName, 'If the command still runs after this long, print its output so far and leave it running as a background job')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'Colour the notices and the marker; never (or NO_COLOR) also removes the command''s own colours on a terminal')
            [CompletionResult]::new('--pty', '--pty', [CompletionResultType]::ParameterName, 'With --background: run the command on a new pseudo-terminal (80x24), as its controlling terminal; its output is the terminal''s (stderr merged), ''job write'' types into it, ''job resize'' sets its size; TERM=xterm-256color unless -e says otherwise')
            [CompletionResult]::new('--no-temp-write', '--no-temp-write', [CompletionResultType]::ParameterName, 'Keep the temp directory read-only in workspace-write')
            [CompletionResult]::new('--allow-caches', '--allow-caches', [CompletionResultType]::ParameterName, 'Also make the package caches writable in workspace-write: cargo, npm, yarn, pip, uv, go, gradle and maven (those that exist, and those of the tools on PATH, made before the run and kept)')
            [CompletionResult]::new('--transaction', '--transaction', [CompletionResultType]::ParameterName, 'Run the workspace root and every --writable-root on an overlay: the command''s writes land in a private upper layer, the result lists every change, and `dsh-exec commit ID` or `dsh-exec discard ID` decides (implies --sandbox workspace-write; needs root)')
            [CompletionResult]::new('-i', '-i', [CompletionResultType]::ParameterName, 'Attach the command to this terminal, uncaptured (e.g. to try a sandbox by hand); without COMMAND, start $SHELL (else bash) as an interactive shell. At the end, what the sandbox refused goes to stderr, before the marker')
            [CompletionResult]::new('--interactive', '--interactive', [CompletionResultType]::ParameterName, 'Attach the command to this terminal, uncaptured (e.g. to try a sandbox by hand); without COMMAND, start $SHELL (else bash) as an interactive shell. At the end, what the sandbox refused goes to stderr, before the marker')
            [CompletionResult]::new('--background', '--background', [CompletionResultType]::ParameterName, 'Start the command as a background job and print its id (see `dsh-exec job`)')
            [CompletionResult]::new('--stream', '--stream', [CompletionResultType]::ParameterName, 'Show the output live as it is produced (to stderr with --json), capturing it as usual')
            [CompletionResult]::new('--output-files', '--output-files', [CompletionResultType]::ParameterName, 'Let the command write its stdout and stderr into unnamed files itself, not pipes: capture then costs what ''> FILE'' costs. As under ''> FILE'', a command that reopens /dev/stdout or /dev/stderr by path (''echo x > /dev/stderr'') truncates what it wrote, confined or not. Pipes stay where --file-size-max or --memory-max is set, where the spill directory''s file system has less free than --spill-max-bytes and 64 MiB, or where no unnamed file can be made (''explain'' says which)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'No notes on stderr (that stdin is not passed on, that a subcommand name ran as a command, the -i banner); warnings and errors stay')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'No notes on stderr (that stdin is not passed on, that a subcommand name ran as a command, the -i banner); warnings and errors stay')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print one JSON object instead of the rendered text')
            [CompletionResult]::new('--events', '--events', [CompletionResultType]::ParameterName, 'Print the run''s events as NDJSON on stdout, one JSON object a line, as they happen: start, stdout and stderr chunks (at most 20 a second each; base64 where not UTF-8), notice, denial, limit, and last exit with the whole result (as --json prints it)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'dsh-exec;mcp' {
            [CompletionResult]::new('--max-parallel', '--max-parallel', [CompletionResultType]::ParameterName, 'How many `run` calls run at once; more wait for a slot, and say so in progress notifications')
            [CompletionResult]::new('--max-jobs', '--max-jobs', [CompletionResultType]::ParameterName, 'How many background jobs started by `start` may run at once; one more is a tool error')
            [CompletionResult]::new('-C', '-C ', [CompletionResultType]::ParameterName, 'Working directory of the command [default: the current directory]')
            [CompletionResult]::new('--workdir', '--workdir', [CompletionResultType]::ParameterName, 'Working directory of the command [default: the current directory]')
            [CompletionResult]::new('-t', '-t', [CompletionResultType]::ParameterName, 'Deadline: 500ms, 30s, 2m, 1h30m, a number of seconds; 0 or none for no deadline [default: 10m]')
            [CompletionResult]::new('--timeout', '--timeout', [CompletionResultType]::ParameterName, 'Deadline: 500ms, 30s, 2m, 1h30m, a number of seconds; 0 or none for no deadline [default: 10m]')
            [CompletionResult]::new('--signal', '--signal', [CompletionResultType]::ParameterName, 'The first signal sent at the deadline or on an abort, as timeout -s: TERM, INT, HUP, KILL, USR1, ... or a number; SIGKILL follows after --kill-after [default: TERM]')
            [CompletionResult]::new('--idle-timeout', '--idle-timeout', [CompletionResultType]::ParameterName, 'End the run as at the deadline when stdout and stderr both stay silent this long while the command runs (exit 124, timeout_kind idle); 0 or none for no idle deadline [default: none]')
            [CompletionResult]::new('--kill-after', '--kill-after', [CompletionResultType]::ParameterName, 'Grace period between SIGTERM and SIGKILL [default: 2s]')
            [CompletionResult]::new('--stdout-max-bytes', '--stdout-max-bytes', [CompletionResultType]::ParameterName, 'Bytes of stdout kept (the tail, or what --keep says): 4096, 64K, 1.5M, 1MiB [default: 1MiB]')
            [CompletionResult]::new('--stderr-max-bytes', '--stderr-max-bytes', [CompletionResultType]::ParameterName, 'Bytes of stderr kept (the tail, or what --keep says) [default: 1MiB]')
            [CompletionResult]::new('--file-size-max', '--file-size-max', [CompletionResultType]::ParameterName, 'The largest file the command may write (RLIMIT_FSIZE, which it cannot raise): a write past it gets SIGXFSZ, which ends the writer (a shell reports 153); a program that ignores SIGXFSZ gets EFBIG instead [default: as inherited]')
            [CompletionResult]::new('--spill-max-bytes', '--spill-max-bytes', [CompletionResultType]::ParameterName, 'The most bytes one spill file holds (4GiB): past it the file stops growing, the tail keeps working, and the result says how many bytes were dropped [default: 4GiB]')
            [CompletionResult]::new('--memory-max', '--memory-max', [CompletionResultType]::ParameterName, 'The whole tree''s memory (cgroup memory.max; RAM, no swap on top): at the limit the kernel reclaims, then its OOM killer ends a process, and the run ends as ''[killed by the memory limit (SIZE)]''; none: unlimited, whatever the configuration file''s default [default: unlimited]')
            [CompletionResult]::new('--pids-max', '--pids-max', [CompletionResultType]::ParameterName, 'Processes and threads of the tree at once (cgroup pids.max): past it fork and thread creation fail with EAGAIN; none: unlimited [default: unlimited]')
            [CompletionResult]::new('--cpu-max', '--cpu-max', [CompletionResultType]::ParameterName, 'CPU time of the whole tree (user + system, all processes): once used, the tree gets --signal, then SIGKILL after --kill-after, as at the deadline; none: unlimited [default: unlimited]')
            [CompletionResult]::new('--limits', '--limits', [CompletionResultType]::ParameterName, 'strict: a limit that cannot be enforced here is an error (LIMIT_UNAVAILABLE, exit 125); best-effort: run without it, with a warning and a not_enforced fact [default: strict]')
            [CompletionResult]::new('--keep', '--keep', [CompletionResultType]::ParameterName, 'Which part of a stream that outgrew its budget is kept: tail, head, or head+tail (the first and last half, with a line between them saying how much was omitted and where the full stream is) [default: tail]')
            [CompletionResult]::new('--render', '--render', [CompletionResultType]::ParameterName, 'raw: the text as written (given, also to a terminal, which is otherwise shown control sequences escaped); plain: as a terminal would show it (carriage-return overwrites collapsed, backspaces applied, escape sequences removed, other control bytes shown as \xNN); the spill file stays exact [default: raw]')
            [CompletionResult]::new('-e', '-e', [CompletionResultType]::ParameterName, 'Set KEY=VALUE in the child environment, or pass KEY through (even a scrubbed one)')
            [CompletionResult]::new('--env', '--env', [CompletionResultType]::ParameterName, 'Set KEY=VALUE in the child environment, or pass KEY through (even a scrubbed one)')
            [CompletionResult]::new('--env-policy', '--env-policy', [CompletionResultType]::ParameterName, 'Which of this process''s variables the command inherits [default: inherit]; --env applies on top')
            [CompletionResult]::new('--dsh-env', '--dsh-env', [CompletionResultType]::ParameterName, 'Set a managed DSH_KEY=VALUE entry, applied after every --env entry')
            [CompletionResult]::new('--spill-dir', '--spill-dir', [CompletionResultType]::ParameterName, 'Where the run''s private spill directory is created [default: STATE/spill, out of confined runs'' reach; $TMPDIR or /tmp if that cannot be made]')
            [CompletionResult]::new('-s', '-s', [CompletionResultType]::ParameterName, 'Confine the command: read-only, workspace-write or full-access (Linux Landlock)')
            [CompletionResult]::new('--sandbox', '--sandbox', [CompletionResultType]::ParameterName, 'Confine the command: read-only, workspace-write or full-access (Linux Landlock)')
            [CompletionResult]::new('--workspace-root', '--workspace-root', [CompletionResultType]::ParameterName, 'Root the command may write under in workspace-write [default: the workdir]')
            [CompletionResult]::new('--writable-root', '--writable-root', [CompletionResultType]::ParameterName, 'Another directory writable in workspace-write (repeatable; missing ones are skipped)')
            [CompletionResult]::new('--on-exit', '--on-exit', [CompletionResultType]::ParameterName, 'What happens to the transaction when the run ends: commit, discard, or keep it pending [default: keep]')
            [CompletionResult]::new('--allow-unix-socket', '--allow-unix-socket', [CompletionResultType]::ParameterName, 'A Unix socket outside the writable roots that a confined command may connect to (repeatable)')
            [CompletionResult]::new('--protect', '--protect', [CompletionResultType]::ParameterName, 'Keep PATH read-only inside the writable roots, besides .git/config, .git/hooks and the rest (repeatable)')
            [CompletionResult]::new('--allow-write', '--allow-write', [CompletionResultType]::ParameterName, 'In workspace-write, leave one protected file of editors and agents writable: PATH names an entry (.vscode, .idea, .claude, .codex, .cursor, .gemini, .mcp.json, .envrc, .direnv), relative to the workdir (repeatable)')
            [CompletionResult]::new('--deny-read', '--deny-read', [CompletionResultType]::ParameterName, 'Make PATH unreadable in the confining modes, besides ~/.ssh, ~/.aws and the rest of the default list (repeatable)')
            [CompletionResult]::new('--read-root', '--read-root', [CompletionResultType]::ParameterName, 'Read only PATH (repeatable), the workspace, the writable roots and the system''s directories: /usr, /bin, /sbin, /lib*, /etc, /proc, /sys and the ordinary devices')
            [CompletionResult]::new('--allow-read', '--allow-read', [CompletionResultType]::ParameterName, 'Lift one entry of the read deny list (or make PATH inside a denied directory readable) (repeatable)')
            [CompletionResult]::new('--network', '--network', [CompletionResultType]::ParameterName, 'IPv4/IPv6 networking [default: loopback in read-only and workspace-write, allow in full-access; config key network]: allow; deny (no IP sockets); loopback (TCP and UDP to and from 127.0.0.0/8 and ::1 only); allow=HOST[,HOST...] (loopback, and the listed hosts through a proxy of the run: example.org, *.example.org, 10.0.0.5, each with an optional :PORT, else ports 80 and 443; repeatable). Unix sockets work within the run; confined runs reach outside ones only with --allow-unix-socket')
            [CompletionResult]::new('--credential', '--credential', [CompletionResultType]::ParameterName, 'Declare a secret the command never gets: NAME=env:VAR, NAME=file:PATH or NAME=fd:N (repeatable; config key credentials). The proxy of --network allow= puts it into the requests an --inject rule names')
            [CompletionResult]::new('--inject', '--inject', [CompletionResultType]::ParameterName, 'Where a credential goes: HOST:PORT/PREFIX=bearer:NAME, basic:USER:NAME, header:FIELD:NAME or query:PARAM:NAME (:PORT and /PREFIX may be left out: port 443, every path; the host must be on --network allow=; repeatable; config key inject). TLS to HOST is ended by the proxy with a CA made for the run')
            [CompletionResult]::new('--credential-env', '--credential-env', [CompletionResultType]::ParameterName, 'Give the command a phantom of credential NAME in variable VAR, for tools that will not start without a key; the proxy swaps it for the real value where a rule allows and refuses it anywhere else (repeatable; config key credential_env)')
            [CompletionResult]::new('--upstream-ca', '--upstream-ca', [CompletionResultType]::ParameterName, 'Trust the CA certificates in FILE (PEM) for the proxy''s TLS to injection hosts, beside the system''s roots (repeatable; config key upstream_ca)')
            [CompletionResult]::new('--color', '--color', [CompletionResultType]::ParameterName, 'Colour the notices and the marker; never (or NO_COLOR) also removes the command''s own colours on a terminal')
            [CompletionResult]::new('--detach-after', '--detach-after', [CompletionResultType]::ParameterName, 'If the command still runs after this long, print its output so far and leave it running as a background job')
            [CompletionResult]::new('--stdin', '--stdin', [CompletionResultType]::ParameterName, 'closed: the command''s stdin reads end-of-file at once; pipe (with --background): it stays open, ''dsh-exec job write ID'' appends to it and ''job write ID --close'' closes it [default: closed]')
            [CompletionResult]::new('--stdin-file', '--stdin-file', [CompletionResultType]::ParameterName, 'Feed this file to the command''s stdin (''-'': this process''s stdin) [default: closed]')
            [CompletionResult]::new('--keep-jobs', '--keep-jobs', [CompletionResultType]::ParameterName, 'Leave the jobs the server started running when the client closes its stdin [default: they are killed and their trees swept]')
            [CompletionResult]::new('--no-temp-write', '--no-temp-write', [CompletionResultType]::ParameterName, 'Keep the temp directory read-only in workspace-write')
            [CompletionResult]::new('--allow-caches', '--allow-caches', [CompletionResultType]::ParameterName, 'Also make the package caches writable in workspace-write: cargo, npm, yarn, pip, uv, go, gradle and maven (those that exist, and those of the tools on PATH, made before the run and kept)')
            [CompletionResult]::new('--transaction', '--transaction', [CompletionResultType]::ParameterName, 'Run the workspace root and every --writable-root on an overlay: the command''s writes land in a private upper layer, the result lists every change, and `dsh-exec commit ID` or `dsh-exec discard ID` decides (implies --sandbox workspace-write; needs root)')
            [CompletionResult]::new('--output-files', '--output-files', [CompletionResultType]::ParameterName, 'Let the command write its stdout and stderr into unnamed files itself, not pipes: capture then costs what ''> FILE'' costs. As under ''> FILE'', a command that reopens /dev/stdout or /dev/stderr by path (''echo x > /dev/stderr'') truncates what it wrote, confined or not. Pipes stay where --file-size-max or --memory-max is set, where the spill directory''s file system has less free than --spill-max-bytes and 64 MiB, or where no unnamed file can be made (''explain'' says which)')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'No notes on stderr (that stdin is not passed on, that a subcommand name ran as a command, the -i banner); warnings and errors stay')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'No notes on stderr (that stdin is not passed on, that a subcommand name ran as a command, the -i banner); warnings and errors stay')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print one JSON object instead of the rendered text')
            [CompletionResult]::new('--events', '--events', [CompletionResultType]::ParameterName, 'Print the run''s events as NDJSON on stdout, one JSON object a line, as they happen: start, stdout and stderr chunks (at most 20 a second each; base64 where not UTF-8), notice, denial, limit, and last exit with the whole result (as --json prints it)')
            [CompletionResult]::new('--background', '--background', [CompletionResultType]::ParameterName, 'Start the command as a background job and print its id (see `dsh-exec job`)')
            [CompletionResult]::new('-i', '-i', [CompletionResultType]::ParameterName, 'Attach the command to this terminal, uncaptured (e.g. to try a sandbox by hand); without COMMAND, start $SHELL (else bash) as an interactive shell. At the end, what the sandbox refused goes to stderr, before the marker')
            [CompletionResult]::new('--interactive', '--interactive', [CompletionResultType]::ParameterName, 'Attach the command to this terminal, uncaptured (e.g. to try a sandbox by hand); without COMMAND, start $SHELL (else bash) as an interactive shell. At the end, what the sandbox refused goes to stderr, before the marker')
            [CompletionResult]::new('--stream', '--stream', [CompletionResultType]::ParameterName, 'Show the output live as it is produced (to stderr with --json), capturing it as usual')
            [CompletionResult]::new('--pty', '--pty', [CompletionResultType]::ParameterName, 'With --background: run the command on a new pseudo-terminal (80x24), as its controlling terminal; its output is the terminal''s (stderr merged), ''job write'' types into it, ''job resize'' sets its size; TERM=xterm-256color unless -e says otherwise')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'dsh-exec;job' {
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('read', 'read', [CompletionResultType]::ParameterValue, 'Print what the job wrote since the previous read, then `[running]` or its end')
            [CompletionResult]::new('wait', 'wait', [CompletionResultType]::ParameterValue, 'Wait for the job to end and print its result as a foreground run would')
            [CompletionResult]::new('write', 'write', [CompletionResultType]::ParameterValue, 'Append to the stdin of a job started with --stdin pipe (DATA with C escapes: \n, \t, \\, \xHH; or --file; ''-'' reads this process''s stdin), or close it; exit 1 if the job cannot take it')
            [CompletionResult]::new('resize', 'resize', [CompletionResultType]::ParameterValue, 'Set the window size of a --pty job''s terminal (the command gets SIGWINCH); exit 1 if the job has none')
            [CompletionResult]::new('kill', 'kill', [CompletionResultType]::ParameterValue, 'Kill the job''s whole tree (SIGTERM, grace, SIGKILL); exit 1 if it had ended')
            [CompletionResult]::new('list', 'list', [CompletionResultType]::ParameterValue, 'List this user''s jobs')
            [CompletionResult]::new('prune', 'prune', [CompletionResultType]::ParameterValue, 'Remove the directories of finished and lost jobs')
            break
        }
        'dsh-exec;job;read' {
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print one JSON object')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'dsh-exec;job;wait' {
            [CompletionResult]::new('-t', '-t', [CompletionResultType]::ParameterName, 'Give up after this long: print `[still running]` and exit 124')
            [CompletionResult]::new('--timeout', '--timeout', [CompletionResultType]::ParameterName, 'Give up after this long: print `[still running]` and exit 124')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print the result as one JSON object')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'dsh-exec;job;write' {
            [CompletionResult]::new('--file', '--file', [CompletionResultType]::ParameterName, 'Write this file''s bytes, as they are')
            [CompletionResult]::new('-t', '-t', [CompletionResultType]::ParameterName, 'Give up when the command has not read for this long [default: 10s]')
            [CompletionResult]::new('--timeout', '--timeout', [CompletionResultType]::ParameterName, 'Give up when the command has not read for this long [default: 10s]')
            [CompletionResult]::new('--close', '--close', [CompletionResultType]::ParameterName, 'Close the job''s stdin (after writing DATA or FILE, if given): the command reads end-of-file')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'dsh-exec;job;resize' {
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'dsh-exec;job;kill' {
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'dsh-exec;job;list' {
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print one JSON array')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'dsh-exec;job;prune' {
            [CompletionResult]::new('--spill', '--spill', [CompletionResultType]::ParameterName, 'Also remove their spill files')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'dsh-exec;prune' {
            [CompletionResult]::new('--older-than', '--older-than', [CompletionResultType]::ParameterName, 'Only those unchanged for this long')
            [CompletionResult]::new('--spill-dir', '--spill-dir', [CompletionResultType]::ParameterName, 'Look in DIR instead of the configured spill_dir, STATE/spill and the temp dir')
            [CompletionResult]::new('--spill', '--spill', [CompletionResultType]::ParameterName, 'Prune spill directories (what `prune` removes; required)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'dsh-exec;commit' {
            [CompletionResult]::new('--atomic', '--atomic', [CompletionResultType]::ParameterName, 'Apply nothing when any path would be refused')
            [CompletionResult]::new('--force', '--force', [CompletionResultType]::ParameterName, 'Also apply paths changed in the real tree after the transaction started (never protected paths or planted git metadata)')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print one JSON object')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'dsh-exec;discard' {
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'dsh-exec;diff' {
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'dsh-exec;transaction' {
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('list', 'list', [CompletionResultType]::ParameterValue, 'List the pending transactions: id, state (pending, running, lost), changes, working directory, command')
            [CompletionResult]::new('prune', 'prune', [CompletionResultType]::ParameterValue, 'Discard the pending transactions that started longer ago than --older-than (a week unless it says otherwise), those whose run was lost (its dsh-exec killed), and unrecorded ones left by a dsh-exec killed as it started (unchanged for a minute at least)')
            break
        }
        'dsh-exec;transaction;list' {
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print one JSON array')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'dsh-exec;transaction;prune' {
            [CompletionResult]::new('--older-than', '--older-than', [CompletionResultType]::ParameterName, 'Only those started at least this long ago')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'dsh-exec;parse-status' {
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
    })

    $completions.Where{ $_.CompletionText -like "$wordToComplete*" } |
        Sort-Object -Property ListItemText
}
