
use builtin;
use str;

set edit:completion:arg-completer[dsh-exec] = {|@words|
    fn spaces {|n|
        builtin:repeat $n ' ' | str:join ''
    }
    fn cand {|text desc|
        edit:complex-candidate $text &display=$text' '(spaces (- 14 (wcswidth $text)))$desc
    }
    var command = 'dsh-exec'
    for word $words[1..-1] {
        if (str:has-prefix $word '-') {
            break
        }
        set command = $command';'$word
    }
    var completions = [
        &'dsh-exec'= {
            cand -C 'Working directory of the command [default: the current directory]'
            cand --workdir 'Working directory of the command [default: the current directory]'
            cand -t 'Deadline: 500ms, 30s, 2m, 1h30m, a number of seconds; 0 or none for no deadline [default: 10m]'
            cand --timeout 'Deadline: 500ms, 30s, 2m, 1h30m, a number of seconds; 0 or none for no deadline [default: 10m]'
            cand --signal 'The first signal sent at the deadline or on an abort, as timeout -s: TERM, INT, HUP, KILL, USR1, ... or a number; SIGKILL follows after --kill-after [default: TERM]'
            cand --idle-timeout 'End the run as at the deadline when stdout and stderr both stay silent this long while the command runs (exit 124, timeout_kind idle); 0 or none for no idle deadline [default: none]'
            cand --kill-after 'Grace period between SIGTERM and SIGKILL [default: 2s]'
            cand --stdout-max-bytes 'Bytes of stdout kept (the tail, or what --keep says): 4096, 64K, 1.5M, 1MiB [default: 1MiB]'
            cand --stderr-max-bytes 'Bytes of stderr kept (the tail, or what --keep says) [default: 1MiB]'
            cand --file-size-max 'The largest file the command may write (RLIMIT_FSIZE, which it cannot raise): a write past it gets SIGXFSZ, which ends the writer (a shell reports 153); a program that ignores SIGXFSZ gets EFBIG instead [default: as inherited]'
            cand --spill-max-bytes 'The most bytes one spill file holds (4GiB): past it the file stops growing, the tail keeps working, and the result says how many bytes were dropped [default: 4GiB]'
            cand --memory-max 'The whole tree''s memory (cgroup memory.max; RAM, no swap on top): at the limit the kernel reclaims, then its OOM killer ends a process, and the run ends as ''[killed by the memory limit (SIZE)]''; none: unlimited, whatever the configuration file''s default [default: unlimited]'
            cand --pids-max 'Processes and threads of the tree at once (cgroup pids.max): past it fork and thread creation fail with EAGAIN; none: unlimited [default: unlimited]'
            cand --cpu-max 'CPU time of the whole tree (user + system, all processes): once used, the tree gets --signal, then SIGKILL after --kill-after, as at the deadline; none: unlimited [default: unlimited]'
            cand --limits 'strict: a limit that cannot be enforced here is an error (LIMIT_UNAVAILABLE, exit 125); best-effort: run without it, with a warning and a not_enforced fact [default: strict]'
            cand --keep 'Which part of a stream that outgrew its budget is kept: tail, head, or head+tail (the first and last half, with a line between them saying how much was omitted and where the full stream is) [default: tail]'
            cand --render 'raw: the text as written (given, also to a terminal, which is otherwise shown control sequences escaped); plain: as a terminal would show it (carriage-return overwrites collapsed, backspaces applied, escape sequences removed, other control bytes shown as \xNN); the spill file stays exact [default: raw]'
            cand --stdin-file 'Feed this file to the command''s stdin (''-'': this process''s stdin) [default: closed]'
            cand --stdin 'closed: the command''s stdin reads end-of-file at once; pipe (with --background): it stays open, ''dsh-exec job write ID'' appends to it and ''job write ID --close'' closes it [default: closed]'
            cand -e 'Set KEY=VALUE in the child environment, or pass KEY through (even a scrubbed one)'
            cand --env 'Set KEY=VALUE in the child environment, or pass KEY through (even a scrubbed one)'
            cand --env-policy 'Which of this process''s variables the command inherits [default: inherit]; --env applies on top'
            cand --dsh-env 'Set a managed DSH_KEY=VALUE entry, applied after every --env entry'
            cand --spill-dir 'Where the run''s private spill directory is created [default: STATE/spill, out of confined runs'' reach; $TMPDIR or /tmp if that cannot be made]'
            cand -s 'Confine the command: read-only, workspace-write or full-access (Linux Landlock)'
            cand --sandbox 'Confine the command: read-only, workspace-write or full-access (Linux Landlock)'
            cand --workspace-root 'Root the command may write under in workspace-write [default: the workdir]'
            cand --writable-root 'Another directory writable in workspace-write (repeatable; missing ones are skipped)'
            cand --on-exit 'What happens to the transaction when the run ends: commit, discard, or keep it pending [default: keep]'
            cand --allow-unix-socket 'A Unix socket outside the writable roots that a confined command may connect to (repeatable)'
            cand --protect 'Keep PATH read-only inside the writable roots, besides .git/config, .git/hooks and the rest (repeatable)'
            cand --allow-write 'In workspace-write, leave one protected file of editors and agents writable: PATH names an entry (.vscode, .idea, .claude, .codex, .cursor, .gemini, .mcp.json, .envrc, .direnv), relative to the workdir (repeatable)'
            cand --deny-read 'Make PATH unreadable in the confining modes, besides ~/.ssh, ~/.aws and the rest of the default list (repeatable)'
            cand --read-root 'Read only PATH (repeatable), the workspace, the writable roots and the system''s directories: /usr, /bin, /sbin, /lib*, /etc, /proc, /sys and the ordinary devices'
            cand --allow-read 'Lift one entry of the read deny list (or make PATH inside a denied directory readable) (repeatable)'
            cand --network 'IPv4/IPv6 networking [default: loopback in read-only and workspace-write, allow in full-access; config key network]: allow; deny (no IP sockets); loopback (TCP and UDP to and from 127.0.0.0/8 and ::1 only); allow=HOST[,HOST...] (loopback, and the listed hosts through a proxy of the run: example.org, *.example.org, 10.0.0.5, each with an optional :PORT, else ports 80 and 443; repeatable). Unix sockets work within the run; confined runs reach outside ones only with --allow-unix-socket'
            cand --detach-after 'If the command still runs after this long, print its output so far and leave it running as a background job'
            cand --color 'Colour the notices and the marker; never (or NO_COLOR) also removes the command''s own colours on a terminal'
            cand --pty 'With --background: run the command on a new pseudo-terminal (80x24), as its controlling terminal; its output is the terminal''s (stderr merged), ''job write'' types into it, ''job resize'' sets its size; TERM=xterm-256color unless -e says otherwise'
            cand --no-temp-write 'Keep the temp directory read-only in workspace-write'
            cand --allow-caches 'Also make the package caches writable in workspace-write: cargo, npm, yarn, pip, uv, go, gradle and maven (those that exist, and those of the tools on PATH, made before the run and kept)'
            cand --transaction 'Run the workspace root and every --writable-root on an overlay: the command''s writes land in a private upper layer, the result lists every change, and `dsh-exec commit ID` or `dsh-exec discard ID` decides (implies --sandbox workspace-write; needs root)'
            cand -i 'Attach the command to this terminal, uncaptured (e.g. to try a sandbox by hand); without COMMAND, start $SHELL (else bash) as an interactive shell. At the end, what the sandbox refused goes to stderr, before the marker'
            cand --interactive 'Attach the command to this terminal, uncaptured (e.g. to try a sandbox by hand); without COMMAND, start $SHELL (else bash) as an interactive shell. At the end, what the sandbox refused goes to stderr, before the marker'
            cand --background 'Start the command as a background job and print its id (see `dsh-exec job`)'
            cand --stream 'Show the output live as it is produced (to stderr with --json), capturing it as usual'
            cand --output-files 'Let the command write its stdout and stderr into unnamed files itself, not pipes: capture then costs what ''> FILE'' costs. As under ''> FILE'', a command that reopens /dev/stdout or /dev/stderr by path (''echo x > /dev/stderr'') truncates what it wrote, confined or not. Pipes stay where --file-size-max or --memory-max is set, where the spill directory''s file system has less free than --spill-max-bytes and 64 MiB, or where no unnamed file can be made (''explain'' says which)'
            cand -q 'No notes on stderr (that stdin is not passed on, that a subcommand name ran as a command, the -i banner); warnings and errors stay'
            cand --quiet 'No notes on stderr (that stdin is not passed on, that a subcommand name ran as a command, the -i banner); warnings and errors stay'
            cand --json 'Print one JSON object instead of the rendered text'
            cand --events 'Print the run''s events as NDJSON on stdout, one JSON object a line, as they happen: start, stdout and stderr chunks (at most 20 a second each; base64 where not UTF-8), notice, denial, limit, and last exit with the whole result (as --json prints it)'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
            cand explain 'Resolve and show the spec and child environment; run nothing'
            cand mcp 'Serve the Model Context Protocol on stdio: tools run, start, read, write_stdin, wait, kill and list, and commit, discard and diff for transactions, under the policy these options fix (a call may ask for less, never for more)'
            cand job 'Read, write to, resize, wait for, kill, list or prune background jobs'
            cand prune 'Remove this user''s spill directories that nothing has changed for a while (a week unless --older-than says otherwise)'
            cand commit 'Apply a transaction''s changes (from a run with --transaction) to the real roots; a path changed meanwhile in the real tree, or protected, is refused and named (exit 1 when any was)'
            cand discard 'Throw a transaction''s changes away; the real roots stay as they are'
            cand diff 'Show a transaction''s changes: a unified diff of text files, a line for each other change'
            cand transaction 'List or prune the pending transactions (those of runs with --transaction not yet committed or discarded)'
            cand parse-status 'Read a rendered result (or a --json one) and print its status as JSON: exit_code, signal, and timed_out and aborted from the notices above the marker (exit 1 when the last line is no marker)'
        }
        &'dsh-exec;explain'= {
            cand -C 'Working directory of the command [default: the current directory]'
            cand --workdir 'Working directory of the command [default: the current directory]'
            cand -t 'Deadline: 500ms, 30s, 2m, 1h30m, a number of seconds; 0 or none for no deadline [default: 10m]'
            cand --timeout 'Deadline: 500ms, 30s, 2m, 1h30m, a number of seconds; 0 or none for no deadline [default: 10m]'
            cand --signal 'The first signal sent at the deadline or on an abort, as timeout -s: TERM, INT, HUP, KILL, USR1, ... or a number; SIGKILL follows after --kill-after [default: TERM]'
            cand --idle-timeout 'End the run as at the deadline when stdout and stderr both stay silent this long while the command runs (exit 124, timeout_kind idle); 0 or none for no idle deadline [default: none]'
            cand --kill-after 'Grace period between SIGTERM and SIGKILL [default: 2s]'
            cand --stdout-max-bytes 'Bytes of stdout kept (the tail, or what --keep says): 4096, 64K, 1.5M, 1MiB [default: 1MiB]'
            cand --stderr-max-bytes 'Bytes of stderr kept (the tail, or what --keep says) [default: 1MiB]'
            cand --file-size-max 'The largest file the command may write (RLIMIT_FSIZE, which it cannot raise): a write past it gets SIGXFSZ, which ends the writer (a shell reports 153); a program that ignores SIGXFSZ gets EFBIG instead [default: as inherited]'
            cand --spill-max-bytes 'The most bytes one spill file holds (4GiB): past it the file stops growing, the tail keeps working, and the result says how many bytes were dropped [default: 4GiB]'
            cand --memory-max 'The whole tree''s memory (cgroup memory.max; RAM, no swap on top): at the limit the kernel reclaims, then its OOM killer ends a process, and the run ends as ''[killed by the memory limit (SIZE)]''; none: unlimited, whatever the configuration file''s default [default: unlimited]'
            cand --pids-max 'Processes and threads of the tree at once (cgroup pids.max): past it fork and thread creation fail with EAGAIN; none: unlimited [default: unlimited]'
            cand --cpu-max 'CPU time of the whole tree (user + system, all processes): once used, the tree gets --signal, then SIGKILL after --kill-after, as at the deadline; none: unlimited [default: unlimited]'
            cand --limits 'strict: a limit that cannot be enforced here is an error (LIMIT_UNAVAILABLE, exit 125); best-effort: run without it, with a warning and a not_enforced fact [default: strict]'
            cand --keep 'Which part of a stream that outgrew its budget is kept: tail, head, or head+tail (the first and last half, with a line between them saying how much was omitted and where the full stream is) [default: tail]'
            cand --render 'raw: the text as written (given, also to a terminal, which is otherwise shown control sequences escaped); plain: as a terminal would show it (carriage-return overwrites collapsed, backspaces applied, escape sequences removed, other control bytes shown as \xNN); the spill file stays exact [default: raw]'
            cand --stdin-file 'Feed this file to the command''s stdin (''-'': this process''s stdin) [default: closed]'
            cand --stdin 'closed: the command''s stdin reads end-of-file at once; pipe (with --background): it stays open, ''dsh-exec job write ID'' appends to it and ''job write ID --close'' closes it [default: closed]'
            cand -e 'Set KEY=VALUE in the child environment, or pass KEY through (even a scrubbed one)'
            cand --env 'Set KEY=VALUE in the child environment, or pass KEY through (even a scrubbed one)'
            cand --env-policy 'Which of this process''s variables the command inherits [default: inherit]; --env applies on top'
            cand --dsh-env 'Set a managed DSH_KEY=VALUE entry, applied after every --env entry'
            cand --spill-dir 'Where the run''s private spill directory is created [default: STATE/spill, out of confined runs'' reach; $TMPDIR or /tmp if that cannot be made]'
            cand -s 'Confine the command: read-only, workspace-write or full-access (Linux Landlock)'
            cand --sandbox 'Confine the command: read-only, workspace-write or full-access (Linux Landlock)'
            cand --workspace-root 'Root the command may write under in workspace-write [default: the workdir]'
            cand --writable-root 'Another directory writable in workspace-write (repeatable; missing ones are skipped)'
            cand --on-exit 'What happens to the transaction when the run ends: commit, discard, or keep it pending [default: keep]'
            cand --allow-unix-socket 'A Unix socket outside the writable roots that a confined command may connect to (repeatable)'
            cand --protect 'Keep PATH read-only inside the writable roots, besides .git/config, .git/hooks and the rest (repeatable)'
            cand --allow-write 'In workspace-write, leave one protected file of editors and agents writable: PATH names an entry (.vscode, .idea, .claude, .codex, .cursor, .gemini, .mcp.json, .envrc, .direnv), relative to the workdir (repeatable)'
            cand --deny-read 'Make PATH unreadable in the confining modes, besides ~/.ssh, ~/.aws and the rest of the default list (repeatable)'
            cand --read-root 'Read only PATH (repeatable), the workspace, the writable roots and the system''s directories: /usr, /bin, /sbin, /lib*, /etc, /proc, /sys and the ordinary devices'
            cand --allow-read 'Lift one entry of the read deny list (or make PATH inside a denied directory readable) (repeatable)'
            cand --network 'IPv4/IPv6 networking [default: loopback in read-only and workspace-write, allow in full-access; config key network]: allow; deny (no IP sockets); loopback (TCP and UDP to and from 127.0.0.0/8 and ::1 only); allow=HOST[,HOST...] (loopback, and the listed hosts through a proxy of the run: example.org, *.example.org, 10.0.0.5, each with an optional :PORT, else ports 80 and 443; repeatable). Unix sockets work within the run; confined runs reach outside ones only with --allow-unix-socket'
            cand --detach-after 'If the command still runs after this long, print its output so far and leave it running as a background job'
            cand --color 'Colour the notices and the marker; never (or NO_COLOR) also removes the command''s own colours on a terminal'
            cand --pty 'With --background: run the command on a new pseudo-terminal (80x24), as its controlling terminal; its output is the terminal''s (stderr merged), ''job write'' types into it, ''job resize'' sets its size; TERM=xterm-256color unless -e says otherwise'
            cand --no-temp-write 'Keep the temp directory read-only in workspace-write'
            cand --allow-caches 'Also make the package caches writable in workspace-write: cargo, npm, yarn, pip, uv, go, gradle and maven (those that exist, and those of the tools on PATH, made before the run and kept)'
            cand --transaction 'Run the workspace root and every --writable-root on an overlay: the command''s writes land in a private upper layer, the result lists every change, and `dsh-exec commit ID` or `dsh-exec discard ID` decides (implies --sandbox workspace-write; needs root)'
            cand -i 'Attach the command to this terminal, uncaptured (e.g. to try a sandbox by hand); without COMMAND, start $SHELL (else bash) as an interactive shell. At the end, what the sandbox refused goes to stderr, before the marker'
            cand --interactive 'Attach the command to this terminal, uncaptured (e.g. to try a sandbox by hand); without COMMAND, start $SHELL (else bash) as an interactive shell. At the end, what the sandbox refused goes to stderr, before the marker'
            cand --background 'Start the command as a background job and print its id (see `dsh-exec job`)'
            cand --stream 'Show the output live as it is produced (to stderr with --json), capturing it as usual'
            cand --output-files 'Let the command write its stdout and stderr into unnamed files itself, not pipes: capture then costs what ''> FILE'' costs. As under ''> FILE'', a command that reopens /dev/stdout or /dev/stderr by path (''echo x > /dev/stderr'') truncates what it wrote, confined or not. Pipes stay where --file-size-max or --memory-max is set, where the spill directory''s file system has less free than --spill-max-bytes and 64 MiB, or where no unnamed file can be made (''explain'' says which)'
            cand -q 'No notes on stderr (that stdin is not passed on, that a subcommand name ran as a command, the -i banner); warnings and errors stay'
            cand --quiet 'No notes on stderr (that stdin is not passed on, that a subcommand name ran as a command, the -i banner); warnings and errors stay'
            cand --json 'Print one JSON object instead of the rendered text'
            cand --events 'Print the run''s events as NDJSON on stdout, one JSON object a line, as they happen: start, stdout and stderr chunks (at most 20 a second each; base64 where not UTF-8), notice, denial, limit, and last exit with the whole result (as --json prints it)'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'dsh-exec;mcp'= {
            cand --max-parallel 'How many `run` calls run at once; more wait for a slot, and say so in progress notifications'
            cand --max-jobs 'How many background jobs started by `start` may run at once; one more is a tool error'
            cand -C 'Working directory of the command [default: the current directory]'
            cand --workdir 'Working directory of the command [default: the current directory]'
            cand -t 'Deadline: 500ms, 30s, 2m, 1h30m, a number of seconds; 0 or none for no deadline [default: 10m]'
            cand --timeout 'Deadline: 500ms, 30s, 2m, 1h30m, a number of seconds; 0 or none for no deadline [default: 10m]'
            cand --signal 'The first signal sent at the deadline or on an abort, as timeout -s: TERM, INT, HUP, KILL, USR1, ... or a number; SIGKILL follows after --kill-after [default: TERM]'
            cand --idle-timeout 'End the run as at the deadline when stdout and stderr both stay silent this long while the command runs (exit 124, timeout_kind idle); 0 or none for no idle deadline [default: none]'
            cand --kill-after 'Grace period between SIGTERM and SIGKILL [default: 2s]'
            cand --stdout-max-bytes 'Bytes of stdout kept (the tail, or what --keep says): 4096, 64K, 1.5M, 1MiB [default: 1MiB]'
            cand --stderr-max-bytes 'Bytes of stderr kept (the tail, or what --keep says) [default: 1MiB]'
            cand --file-size-max 'The largest file the command may write (RLIMIT_FSIZE, which it cannot raise): a write past it gets SIGXFSZ, which ends the writer (a shell reports 153); a program that ignores SIGXFSZ gets EFBIG instead [default: as inherited]'
            cand --spill-max-bytes 'The most bytes one spill file holds (4GiB): past it the file stops growing, the tail keeps working, and the result says how many bytes were dropped [default: 4GiB]'
            cand --memory-max 'The whole tree''s memory (cgroup memory.max; RAM, no swap on top): at the limit the kernel reclaims, then its OOM killer ends a process, and the run ends as ''[killed by the memory limit (SIZE)]''; none: unlimited, whatever the configuration file''s default [default: unlimited]'
            cand --pids-max 'Processes and threads of the tree at once (cgroup pids.max): past it fork and thread creation fail with EAGAIN; none: unlimited [default: unlimited]'
            cand --cpu-max 'CPU time of the whole tree (user + system, all processes): once used, the tree gets --signal, then SIGKILL after --kill-after, as at the deadline; none: unlimited [default: unlimited]'
            cand --limits 'strict: a limit that cannot be enforced here is an error (LIMIT_UNAVAILABLE, exit 125); best-effort: run without it, with a warning and a not_enforced fact [default: strict]'
            cand --keep 'Which part of a stream that outgrew its budget is kept: tail, head, or head+tail (the first and last half, with a line between them saying how much was omitted and where the full stream is) [default: tail]'
            cand --render 'raw: the text as written (given, also to a terminal, which is otherwise shown control sequences escaped); plain: as a terminal would show it (carriage-return overwrites collapsed, backspaces applied, escape sequences removed, other control bytes shown as \xNN); the spill file stays exact [default: raw]'
            cand -e 'Set KEY=VALUE in the child environment, or pass KEY through (even a scrubbed one)'
            cand --env 'Set KEY=VALUE in the child environment, or pass KEY through (even a scrubbed one)'
            cand --env-policy 'Which of this process''s variables the command inherits [default: inherit]; --env applies on top'
            cand --dsh-env 'Set a managed DSH_KEY=VALUE entry, applied after every --env entry'
            cand --spill-dir 'Where the run''s private spill directory is created [default: STATE/spill, out of confined runs'' reach; $TMPDIR or /tmp if that cannot be made]'
            cand -s 'Confine the command: read-only, workspace-write or full-access (Linux Landlock)'
            cand --sandbox 'Confine the command: read-only, workspace-write or full-access (Linux Landlock)'
            cand --workspace-root 'Root the command may write under in workspace-write [default: the workdir]'
            cand --writable-root 'Another directory writable in workspace-write (repeatable; missing ones are skipped)'
            cand --on-exit 'What happens to the transaction when the run ends: commit, discard, or keep it pending [default: keep]'
            cand --allow-unix-socket 'A Unix socket outside the writable roots that a confined command may connect to (repeatable)'
            cand --protect 'Keep PATH read-only inside the writable roots, besides .git/config, .git/hooks and the rest (repeatable)'
            cand --allow-write 'In workspace-write, leave one protected file of editors and agents writable: PATH names an entry (.vscode, .idea, .claude, .codex, .cursor, .gemini, .mcp.json, .envrc, .direnv), relative to the workdir (repeatable)'
            cand --deny-read 'Make PATH unreadable in the confining modes, besides ~/.ssh, ~/.aws and the rest of the default list (repeatable)'
            cand --read-root 'Read only PATH (repeatable), the workspace, the writable roots and the system''s directories: /usr, /bin, /sbin, /lib*, /etc, /proc, /sys and the ordinary devices'
            cand --allow-read 'Lift one entry of the read deny list (or make PATH inside a denied directory readable) (repeatable)'
            cand --network 'IPv4/IPv6 networking [default: loopback in read-only and workspace-write, allow in full-access; config key network]: allow; deny (no IP sockets); loopback (TCP and UDP to and from 127.0.0.0/8 and ::1 only); allow=HOST[,HOST...] (loopback, and the listed hosts through a proxy of the run: example.org, *.example.org, 10.0.0.5, each with an optional :PORT, else ports 80 and 443; repeatable). Unix sockets work within the run; confined runs reach outside ones only with --allow-unix-socket'
            cand --color 'Colour the notices and the marker; never (or NO_COLOR) also removes the command''s own colours on a terminal'
            cand --detach-after 'If the command still runs after this long, print its output so far and leave it running as a background job'
            cand --stdin 'closed: the command''s stdin reads end-of-file at once; pipe (with --background): it stays open, ''dsh-exec job write ID'' appends to it and ''job write ID --close'' closes it [default: closed]'
            cand --stdin-file 'Feed this file to the command''s stdin (''-'': this process''s stdin) [default: closed]'
            cand --keep-jobs 'Leave the jobs the server started running when the client closes its stdin [default: they are killed and their trees swept]'
            cand --no-temp-write 'Keep the temp directory read-only in workspace-write'
            cand --allow-caches 'Also make the package caches writable in workspace-write: cargo, npm, yarn, pip, uv, go, gradle and maven (those that exist, and those of the tools on PATH, made before the run and kept)'
            cand --transaction 'Run the workspace root and every --writable-root on an overlay: the command''s writes land in a private upper layer, the result lists every change, and `dsh-exec commit ID` or `dsh-exec discard ID` decides (implies --sandbox workspace-write; needs root)'
            cand --output-files 'Let the command write its stdout and stderr into unnamed files itself, not pipes: capture then costs what ''> FILE'' costs. As under ''> FILE'', a command that reopens /dev/stdout or /dev/stderr by path (''echo x > /dev/stderr'') truncates what it wrote, confined or not. Pipes stay where --file-size-max or --memory-max is set, where the spill directory''s file system has less free than --spill-max-bytes and 64 MiB, or where no unnamed file can be made (''explain'' says which)'
            cand -q 'No notes on stderr (that stdin is not passed on, that a subcommand name ran as a command, the -i banner); warnings and errors stay'
            cand --quiet 'No notes on stderr (that stdin is not passed on, that a subcommand name ran as a command, the -i banner); warnings and errors stay'
            cand --json 'Print one JSON object instead of the rendered text'
            cand --events 'Print the run''s events as NDJSON on stdout, one JSON object a line, as they happen: start, stdout and stderr chunks (at most 20 a second each; base64 where not UTF-8), notice, denial, limit, and last exit with the whole result (as --json prints it)'
            cand --background 'Start the command as a background job and print its id (see `dsh-exec job`)'
            cand -i 'Attach the command to this terminal, uncaptured (e.g. to try a sandbox by hand); without COMMAND, start $SHELL (else bash) as an interactive shell. At the end, what the sandbox refused goes to stderr, before the marker'
            cand --interactive 'Attach the command to this terminal, uncaptured (e.g. to try a sandbox by hand); without COMMAND, start $SHELL (else bash) as an interactive shell. At the end, what the sandbox refused goes to stderr, before the marker'
            cand --stream 'Show the output live as it is produced (to stderr with --json), capturing it as usual'
            cand --pty 'With --background: run the command on a new pseudo-terminal (80x24), as its controlling terminal; its output is the terminal''s (stderr merged), ''job write'' types into it, ''job resize'' sets its size; TERM=xterm-256color unless -e says otherwise'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'dsh-exec;job'= {
            cand -h 'Print help'
            cand --help 'Print help'
            cand read 'Print what the job wrote since the previous read, then `[running]` or its end'
            cand wait 'Wait for the job to end and print its result as a foreground run would'
            cand write 'Append to the stdin of a job started with --stdin pipe (DATA with C escapes: \n, \t, \\, \xHH; or --file; ''-'' reads this process''s stdin), or close it; exit 1 if the job cannot take it'
            cand resize 'Set the window size of a --pty job''s terminal (the command gets SIGWINCH); exit 1 if the job has none'
            cand kill 'Kill the job''s whole tree (SIGTERM, grace, SIGKILL); exit 1 if it had ended'
            cand list 'List this user''s jobs'
            cand prune 'Remove the directories of finished and lost jobs'
        }
        &'dsh-exec;job;read'= {
            cand --json 'Print one JSON object'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'dsh-exec;job;wait'= {
            cand -t 'Give up after this long: print `[still running]` and exit 124'
            cand --timeout 'Give up after this long: print `[still running]` and exit 124'
            cand --json 'Print the result as one JSON object'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'dsh-exec;job;write'= {
            cand --file 'Write this file''s bytes, as they are'
            cand -t 'Give up when the command has not read for this long [default: 10s]'
            cand --timeout 'Give up when the command has not read for this long [default: 10s]'
            cand --close 'Close the job''s stdin (after writing DATA or FILE, if given): the command reads end-of-file'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'dsh-exec;job;resize'= {
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'dsh-exec;job;kill'= {
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'dsh-exec;job;list'= {
            cand --json 'Print one JSON array'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'dsh-exec;job;prune'= {
            cand --spill 'Also remove their spill files'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'dsh-exec;prune'= {
            cand --older-than 'Only those unchanged for this long'
            cand --spill-dir 'Look in DIR instead of the configured spill_dir, STATE/spill and the temp dir'
            cand --spill 'Prune spill directories (what `prune` removes; required)'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'dsh-exec;commit'= {
            cand --atomic 'Apply nothing when any path would be refused'
            cand --force 'Also apply paths changed in the real tree after the transaction started (never protected paths or planted git metadata)'
            cand --json 'Print one JSON object'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'dsh-exec;discard'= {
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'dsh-exec;diff'= {
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'dsh-exec;transaction'= {
            cand -h 'Print help'
            cand --help 'Print help'
            cand list 'List the pending transactions: id, state (pending, running, lost), changes, working directory, command'
            cand prune 'Discard the pending transactions that started longer ago than --older-than (a week unless it says otherwise), those whose run was lost (its dsh-exec killed), and unrecorded ones left by a dsh-exec killed as it started (unchanged for a minute at least)'
        }
        &'dsh-exec;transaction;list'= {
            cand --json 'Print one JSON array'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'dsh-exec;transaction;prune'= {
            cand --older-than 'Only those started at least this long ago'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'dsh-exec;parse-status'= {
            cand -h 'Print help'
            cand --help 'Print help'
        }
    ]
    $completions[$command]
}
