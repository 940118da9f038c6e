//! Printing: one-line errors and warnings on stderr, results on stdout, and
//! the exit statuses of usage and infrastructure failures.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use clap::error::ErrorKind;
use dsh_exec_core::error::ErrorReport;
use dsh_exec_core::spec::OnTerminal;
use dsh_exec_core::{Error, exit};

use crate::cli::ColorChoice;

/// Writes one line to stderr; a closed or full stderr is not worth a panic.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}
pub(crate) use say;

/// An exit status of `dsh-exec` as the process's exit code (statuses are
/// 0 to 255: wait(2)).
pub(crate) fn status(n: i32) -> ExitCode {
    ExitCode::from(n.clamp(0, 255) as u8)
}

/// `dsh-exec: error: MESSAGE (USAGE)` and the usage exit status (125);
/// with `--json` among the options, also the error object on stdout
/// (`{"error": {"code": "USAGE", "message": ...}}`).
pub(crate) fn usage_error(message: &str) -> ExitCode {
    say!("dsh-exec: error: {message} (USAGE)");
    if json_asked() {
        print_stdout(&to_json(&ErrorReport::new("USAGE", message)));
    }
    status(exit::USAGE)
}

/// Whether `--json` is among this process's options (before `--`): a usage
/// error can come before the options are parsed.
fn json_asked() -> bool {
    std::env::args_os()
        .skip(1)
        .take_while(|a| a != "--")
        .any(|a| a == "--json")
}

/// Prints help and version as clap does; any other parse error as one line.
pub(crate) fn clap_error(e: clap::Error) -> ExitCode {
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        let _ = e.print();
        return ExitCode::SUCCESS;
    }
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand | ErrorKind::MissingSubcommand
    ) {
        // `dsh-exec job` alone: clap would print the group's description.
        if std::env::args().nth(1).as_deref() == Some("transaction") {
            return usage_error(
                "dsh-exec transaction needs a subcommand: list or prune (see dsh-exec transaction --help)",
            );
        }
        return usage_error(
            "dsh-exec job needs a subcommand: read, wait, kill, list or prune (see dsh-exec job --help)",
        );
    }
    let rendered = e.to_string();
    let message: Vec<&str> = rendered
        .lines()
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    // clap's message and its tip are sentences of their own.
    let message = message.join("; ");
    usage_error(&format!(
        "{} (see --help)",
        message.strip_prefix("error: ").unwrap_or(&message)
    ))
}

/// Writes `text` to stdout; a closed stdout (`dsh-exec ... | head -1`) is
/// not an error worth a panic.
pub(crate) fn print_stdout(text: &str) {
    let _ = write_stdout(text);
}

/// Writes `text` to stdout. Errors with what stopped the write (a full
/// disk, `> /dev/full`), except a reader that went away (EPIPE: the
/// reader chose to stop, as with `| head -1`).
pub(crate) fn write_stdout(text: &str) -> std::io::Result<()> {
    write_stdout_pieces(&[text])
}

/// [`write_stdout`] of `pieces`, one after the other (through stdout's
/// buffer), so that a text made of parts is never joined in memory.
pub(crate) fn write_stdout_pieces(pieces: &[impl AsRef<str>]) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    let written = pieces
        .iter()
        .try_for_each(|p| out.write_all(p.as_ref().as_bytes()))
        .and_then(|_| out.flush());
    match written {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e),
        _ => Ok(()),
    }
}

/// What this process's stdout is to be shown of the command's output:
/// `on_terminal` (the spec's) when it is a terminal, the exact text when it
/// is not.
pub(crate) fn stdout_shows(on_terminal: OnTerminal) -> OnTerminal {
    if std::io::stdout().is_terminal() {
        on_terminal
    } else {
        OnTerminal::Exact
    }
}

/// The attribute reset (SGR 0) that goes before the notices and the marker
/// when `shown`, the command's output as written, holds an escape and
/// `terminal` says it went to a terminal (output ending in `\x1b[8m`,
/// concealed, would hide them); empty otherwise, so that `NO_COLOR` output
/// stays free of escapes.
pub(crate) fn reset_after(shown: &str, terminal: bool) -> &'static str {
    if terminal && shown.contains('\x1b') {
        dsh_exec_core::render::ATTRIBUTE_RESET
    } else {
        ""
    }
}

/// The text result for this process's stdout: the output sections (their
/// control sequences neutralised on a terminal, as `on_terminal` says),
/// then, where needed, an attribute reset ([`reset_after`]), then the
/// notices and the marker.
///
/// In pieces, the kept output borrowed from `result` where nothing in it
/// changes ([`dsh_exec_core::render::output_pieces`]): the kept output is
/// the largest part, and written piece by piece it is never copied whole
/// (peak memory grows with the budget once).
pub(crate) fn text_for_stdout(
    result: &dsh_exec_core::RunResult,
    color: bool,
    on_terminal: OnTerminal,
) -> Vec<std::borrow::Cow<'_, str>> {
    use dsh_exec_core::render::{output_pieces, render_status};
    let mut pieces = output_pieces(result, stdout_shows(on_terminal));
    let terminal = std::io::stdout().is_terminal();
    let reset = if pieces.iter().any(|p| !reset_after(p, terminal).is_empty()) {
        dsh_exec_core::render::ATTRIBUTE_RESET
    } else {
        ""
    };
    pieces.push(reset.into());
    pieces.push(render_status(result, color).into());
    pieces
}

/// One JSON line.
pub(crate) fn to_json(value: &impl serde::Serialize) -> String {
    // Serializing plain data (strings, numbers, paths made lossy) cannot fail.
    serde_json::to_string(value).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}")) + "\n"
}

/// `dsh-exec: error: MESSAGE (CODE)` on stderr, the `{"error": ...}` object
/// on stdout with `--json`, and the infrastructure exit status.
pub(crate) fn infrastructure_error(err: &Error, json: bool) -> ExitCode {
    say!("dsh-exec: error: {} ({})", err, err.code());
    if EVENTS.load(std::sync::atomic::Ordering::Relaxed) {
        let report = ErrorReport::of(err);
        print_event(&dsh_exec_core::events::Event::Error {
            code: report.error.code,
            message: report.error.message,
        });
    } else if json {
        print_stdout(&to_json(&ErrorReport::of(err)));
    }
    status(exit::INFRASTRUCTURE)
}

/// Set by a run with `--events`: a failure is then told as an `error`
/// event on stdout.
pub(crate) static EVENTS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Writes `event` as one line on stdout (`--events`), with stdout's lock
/// held for the whole line; a closed stdout loses it (the run goes on).
/// A stdout left non-blocking by whoever started `dsh-exec` is waited on
/// (poll(2) for POLLOUT) when full, so that no line is ever cut.
pub(crate) fn print_event(event: &dsh_exec_core::events::Event) {
    use std::os::fd::AsFd;
    let Ok(mut line) = serde_json::to_vec(event) else {
        return;
    };
    line.push(b'\n');
    // The lock keeps lines whole between threads; the bytes go straight to
    // the descriptor (nothing else writes to stdout under --events, so
    // std's buffer is empty).
    let out = std::io::stdout().lock();
    let fd = out.as_fd();
    let mut rest = &line[..];
    while !rest.is_empty() {
        match nix::unistd::write(fd, rest) {
            Ok(0) => return,
            Ok(n) => rest = &rest[n..],
            Err(nix::errno::Errno::EINTR) => {}
            Err(nix::errno::Errno::EAGAIN) => {
                let mut fds = [nix::poll::PollFd::new(fd, nix::poll::PollFlags::POLLOUT)];
                match nix::poll::poll(&mut fds, nix::poll::PollTimeout::NONE) {
                    Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                    Err(_) => return,
                }
            }
            Err(_) => return,
        }
    }
}

/// Prints warnings of a preparation, one `dsh-exec: warning: ...` line each.
pub(crate) fn warn_all(warnings: &[String]) {
    for w in warnings {
        say!("dsh-exec: warning: {w}");
    }
}

/// Whether the command's own colours (SGR) are kept where its output is
/// shown on a terminal: `--color always|never` decide; under `auto`, a
/// non-empty NO_COLOR removes them.
pub(crate) fn terminal_colours(choice: ColorChoice) -> bool {
    match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
    }
}

/// Whether to colour: `--color always|never` decide; under `auto`, a
/// non-empty NO_COLOR turns colour off (no-color.org), a CLICOLOR_FORCE
/// other than `0` turns it on, and otherwise stdout being a terminal does.
pub(crate) fn use_color(choice: ColorChoice) -> bool {
    let set = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto if set("NO_COLOR").is_some() => false,
        ColorChoice::Auto if set("CLICOLOR_FORCE").is_some_and(|v| v != "0") => true,
        ColorChoice::Auto => std::io::stdout().is_terminal(),
    }
}
