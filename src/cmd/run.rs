//! The main job: `dsh-exec [OPTIONS] -- COMMAND`.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Instant;

use dsh_exec_core::render::{
    render_after_stream, render_output, render_sandbox_notices, render_status_without_sandbox,
};
use dsh_exec_core::spec::OnTerminal;
use dsh_exec_core::{AbortSignals, Error, Started, exit, prepare, start};

use super::resolve_args;
use crate::cli::RunArgs;
use crate::output::{
    infrastructure_error, reset_after, say, status, stdout_shows, text_for_stdout, to_json,
    usage_error, use_color, warn_all, write_stdout_pieces,
};

/// A current-thread tokio runtime: one command needs no more, and it starts
/// faster than a multi-threaded one.
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, Error> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|source| Error::Runtime {
            what: "the async runtime",
            source,
        })
}

/// Runs the command of `args` and prints its result.
pub(crate) fn run(args: RunArgs) -> ExitCode {
    if args.interactive && !std::io::stdin().is_terminal() {
        return usage_error("--interactive needs a terminal on stdin");
    }
    let quiet = args.quiet;
    let events = args.events;
    if events {
        crate::output::EVENTS.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    let (spec, json, color) = match resolve_args(args) {
        Ok(r) => r,
        Err(code) => return code,
    };
    super::prune::auto_prune(&spec);
    let started = Instant::now();
    let outcome = runtime().and_then(|rt| {
        rt.block_on(async {
            let mut prepared = prepare(&spec)?;
            warn_all(&prepared.warnings());
            if events {
                prepared = prepared.events(std::sync::Arc::new(|event| {
                    crate::output::print_event(&event)
                }));
            }
            if spec.interactive && !quiet {
                say!("{}", interactive_banner(&spec, &prepared.writable_roots()));
            }
            let mut aborts = AbortSignals::install().map_err(|source| Error::Runtime {
                what: "the signal handlers",
                source,
            })?;
            match start(&spec, prepared, started)? {
                Started::Running(mut execution) => {
                    execution.run_until(None, &mut aborts).await?;
                    // The tree is gone; what is left is writing the
                    // result, which a reader that stopped reading could
                    // hold: an abort signal ends dsh-exec from there on.
                    // Under --events the end of the run already writes
                    // (the closing events, after waiting up to 2 s for the
                    // chunks to be taken), so from here.
                    if events {
                        dsh_exec_core::release_abort_signals();
                    }
                    Ok(execution.finish())
                }
                Started::NotRun(result) => Ok(*result),
            }
        })
    });
    let result = match outcome {
        Ok(r) => r,
        Err(e) => return infrastructure_error(&e, json),
    };
    dsh_exec_core::release_abort_signals();
    if spec.interactive {
        // The command had the terminal, so nothing read its output: what
        // the sandbox refused (and the flag that would allow it) is told on
        // stderr, before the marker.
        let terminal = std::io::stderr().is_terminal();
        let lines = render_sandbox_notices(&result, use_color(color) && terminal);
        let _ = std::io::Write::write_all(&mut std::io::stderr(), lines.as_bytes());
    }
    if json && spec.stream.is_some() {
        // The live copy went to stderr: the log it makes ends as the text
        // form does, with where the full streams are (or the kept output,
        // when the live copy fell behind), the notices and the marker, so
        // that a CI log never stops without saying how the run ended.
        // On a terminal after an attribute reset, as the text form's end:
        // the live output may have ended in a concealing escape.
        let terminal = std::io::stderr().is_terminal();
        let shown = if terminal {
            spec.on_terminal
        } else {
            OnTerminal::Exact
        };
        let end = render_after_stream(&result, use_color(color) && terminal, shown);
        // Judged on the kept output as shown: the live copy was shown the
        // same way, and a concealing escape at its end is in both.
        let reset = reset_after(&render_output(&result, shown), terminal);
        let _ =
            std::io::Write::write_all(&mut std::io::stderr(), format!("{reset}{end}").as_bytes());
    }
    if events {
        // Every event, `exit` last, is written.
        return status(result.exit_status());
    }
    let text: Vec<std::borrow::Cow<str>> = if json {
        vec![to_json(&result).into()]
    } else if spec.stream.is_some() {
        // The output was shown live: only where the full streams are (when
        // they outgrew their budgets), the notices and the marker follow;
        // on a terminal after an attribute reset (the live output may have
        // ended in a concealing escape).
        let shown = stdout_shows(spec.on_terminal);
        let reset = reset_after(
            &render_output(&result, shown),
            std::io::stdout().is_terminal(),
        );
        vec![
            format!(
                "{reset}{}",
                render_after_stream(&result, use_color(color), shown)
            )
            .into(),
        ]
    } else if spec.interactive {
        // The sandbox's lines went to stderr.
        vec![render_status_without_sandbox(&result, use_color(color)).into()]
    } else {
        text_for_stdout(&result, use_color(color), spec.on_terminal)
    };
    // A result that could not be written must not pass for the command's
    // exit status: the caller would take a lost result for a success.
    if let Err(e) = write_stdout_pieces(&text) {
        say!("dsh-exec: error: the result could not be written to stdout: {e}");
        return status(exit::INFRASTRUCTURE);
    }
    status(result.exit_status())
}

/// The one line `-i` prints on stderr before the shell starts: the mode, the
/// network policy and where the command may write.
fn interactive_banner(spec: &dsh_exec_core::Spec, writable: &[std::path::PathBuf]) -> String {
    let Some(policy) = &spec.sandbox else {
        return "dsh-exec: interactive, unconfined (no --sandbox); exit to leave".into();
    };
    let roots = if writable.is_empty() {
        "nothing".to_string()
    } else {
        writable
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    // A default says so, with the flag that opens the network: a human
    // trying a sandbox by hand should not wonder why a download fails.
    let network = match policy.network_default_of() {
        Some(mode) => format!(
            "{} (default for {mode}; --network allow opens it)",
            policy.network.value
        ),
        None => policy.network.value.to_string(),
    };
    format!(
        "dsh-exec: interactive, sandbox {}, network {network}; writable: {roots}; exit to leave",
        policy.mode.value
    )
}
