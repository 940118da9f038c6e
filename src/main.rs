//! The `dsh-exec` binary: parse the command line, call the core library,
//! print, exit with the mapped status. Everything else lives in
//! `dsh-exec-core`.

#![forbid(unsafe_code)]

mod cli;
mod cmd;
mod mcp_ids;
mod mcp_tools;
mod output;

use std::process::ExitCode;

use cli::Sub;

fn main() -> ExitCode {
    dsh_exec_core::init_process();
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if argv.get(1).is_some_and(|a| a == cmd::supervise::SUPERVISE) {
        return cmd::supervise::main(&argv);
    }
    let cli = match cli::parse(&argv) {
        Ok(cli) => cli,
        Err(e) => return output::clap_error(e),
    };
    if cli.subcommand.is_none() && !cli.run.quiet {
        subcommand_hint(&argv, &cli.run.command);
        if cli.run.stdin_file.is_none() && !cli.run.interactive {
            stdin_hint();
        }
    }
    match cli.subcommand {
        Some(Sub::Explain(args)) => cmd::explain::explain(*args),
        Some(Sub::Mcp(args)) => cmd::mcp::mcp(*args),
        Some(Sub::ParseStatus { file }) => cmd::parse_status::parse_status(file),
        Some(Sub::Commit {
            id,
            atomic,
            force,
            json,
        }) => cmd::transaction::commit(
            &id,
            dsh_exec_core::transaction::CommitOptions { atomic, force },
            json,
        ),
        Some(Sub::Discard { id }) => cmd::transaction::discard(&id),
        Some(Sub::Diff { id, paths }) => cmd::transaction::diff(&id, &paths),
        Some(Sub::Transaction(cli::TransactionCmd::List { json })) => cmd::transaction::list(json),
        Some(Sub::Transaction(cli::TransactionCmd::Prune { older_than })) => {
            cmd::transaction::prune(older_than)
        }
        Some(Sub::Job(job)) => cmd::job::job(job),
        Some(Sub::Prune {
            spill,
            older_than,
            spill_dir,
        }) => cmd::prune::prune(spill, older_than, spill_dir),
        None if cli.run.background => cmd::job::start_background(cli.run),
        None if cli.run.detach_after.is_some() => cmd::job::detach_run(cli.run),
        None => cmd::run::run(cli.run),
    }
}

/// The command's stdin is closed unless `--stdin-file` says otherwise, so
/// that nothing waits on an inherited pipe: when this process's own stdin
/// holds data, a note says it is not passed on.
fn stdin_hint() {
    if dsh_exec_core::stdin_holds_data() {
        output::say!(
            "dsh-exec: note: stdin is not passed to the command; use --stdin-file - (or --quiet)"
        );
    }
}

/// A subcommand name given after options (`dsh-exec --json explain ls`)
/// runs as a command, since a subcommand counts only as the very first
/// argument; unless a `--` right before it said so, a note on stderr says
/// what happened.
fn subcommand_hint(argv: &[std::ffi::OsString], command: &[String]) {
    const SUBCOMMANDS: [&str; 9] = [
        "explain",
        "job",
        "mcp",
        "parse-status",
        "prune",
        "commit",
        "discard",
        "diff",
        "transaction",
    ];
    let Some(first) = command.first() else { return };
    // `dsh-exec -- explain` means the command; `dsh-exec --json explain --
    // true` is the mistake (the `--` comes after the word).
    let meant = argv
        .iter()
        .skip_while(|a| *a != "--")
        .nth(1)
        .is_some_and(|a| a == first.as_str());
    if SUBCOMMANDS.contains(&first.as_str()) && !meant {
        output::say!(
            "dsh-exec: note: '{first}' ran as a command; subcommands come first: dsh-exec {first} ..."
        );
    }
}
