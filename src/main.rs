//! The `dsh-exec` binary: parse, call the library, print, exit with the
//! mapped status. Everything else lives in the library.

use std::io::{IsTerminal, Read, Write};
use std::process::ExitCode;

use clap::error::ErrorKind;
use dsh_exec::cli::{ColorChoice, RunArgs, Sub};
use dsh_exec::error::INFRASTRUCTURE_EXIT_STATUS;
use dsh_exec::explain::{explain_json, explain_text};
use dsh_exec::render::{parse_status, render_status, render_text, render_truncations};
use dsh_exec::{AbortSignals, Ambient, Error, Spec, resolve};

/// Writes one line to stderr; a closed or full stderr is not worth a panic.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod job_cmd;

/// Exit status of a usage error (bad flag or value), as clap and `timeout(1)`.
const USAGE_EXIT_STATUS: u8 = 2;

fn main() -> ExitCode {
    startup_hygiene();
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if argv.get(1).is_some_and(|a| a == job_cmd::SUPERVISE) {
        return job_cmd::supervise_main(&argv);
    }
    let cli = match dsh_exec::cli::parse() {
        Ok(cli) => cli,
        Err(e) => return clap_error(e),
    };
    match cli.subcommand {
        Some(Sub::Explain(args)) => explain(*args),
        Some(Sub::ParseStatus { file }) => parse_status_cmd(file),
        Some(Sub::Job(cmd)) => job_cmd::job(cmd),
        None if cli.run.background => job_cmd::start_background(cli.run, &argv),
        None if cli.run.detach_after.is_some() => job_cmd::detach_run(cli.run, &argv),
        None => run(cli.run),
    }
}

/// Undoes what a parent may have left on this process: SIGCHLD ignored (which
/// would make the child's status unobtainable) and blocked signals (which
/// would delay aborts). Children get default dispositions in `process`.
fn startup_hygiene() {
    use nix::sys::signal::{SigHandler, SigSet, SigmaskHow, Signal, sigprocmask};
    // SAFETY: restoring the default disposition installs no handler code.
    unsafe {
        let _ = nix::sys::signal::signal(Signal::SIGCHLD, SigHandler::SigDfl);
    }
    let _ = sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None);
    // Not dumpable: /proc/PID/environ of dsh-exec, which still holds the
    // secrets scrubbed from the child's environment, is then unreadable to
    // the command (unless it has CAP_SYS_PTRACE, which confined runs drop).
    let _ = nix::sys::prctl::set_dumpable(false);
    // Orphans of the command become our children, so the sweep finds them.
    let _ = dsh_exec::sweep::become_subreaper();
}

pub(crate) fn usage_error(message: &str) -> ExitCode {
    say!("dsh-exec: error: {message}");
    ExitCode::from(USAGE_EXIT_STATUS)
}

/// Prints help and version as clap does; any other parse error as one line.
pub(crate) fn clap_error(e: clap::Error) -> ExitCode {
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        let _ = e.print();
        return ExitCode::SUCCESS;
    }
    let rendered = e.to_string();
    let message: Vec<&str> = rendered
        .lines()
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let message = message.join(" ");
    usage_error(&format!(
        "{} (see --help)",
        message.strip_prefix("error: ").unwrap_or(&message)
    ))
}

pub(crate) fn print_stdout(text: &str) {
    // A closed stdout (`dsh-exec ... | head -1`) is not an error worth a panic.
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|_| out.flush());
}

pub(crate) fn to_json(value: &impl serde::Serialize) -> String {
    // Serializing plain data (strings, numbers, paths made lossy) cannot fail.
    serde_json::to_string(value).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}")) + "\n"
}

pub(crate) fn resolve_args(args: RunArgs) -> Result<(Spec, bool, ColorChoice), ExitCode> {
    let (json, color) = (args.json, args.color);
    // Background jobs have no deadline unless --timeout gives one.
    let job = args.background || args.detach_after.is_some();
    let ambient = match Ambient::current(args.workdir.as_deref()) {
        Ok(a) => a,
        Err(e) => {
            let err = Error::WorkdirUnusable {
                path: ".".into(),
                reason: format!("current directory: {e}"),
            };
            return Err(infrastructure_error(&err, json));
        }
    };
    let mut request = args.into_request();
    if job && request.timeout.is_none() {
        request.timeout = Some(None);
    }
    request.config = match dsh_exec::config::load(&ambient.env) {
        Ok(c) => c,
        Err(e) => return Err(infrastructure_error(&e, json)),
    };
    match resolve(request, &ambient) {
        Ok(spec) => {
            if let Some(policy) = &spec.sandbox {
                for s in &policy.skipped {
                    say!(
                        "dsh-exec: warning: writable root {} skipped: {}",
                        s.path.display(),
                        s.reason
                    );
                }
                for w in &policy.warnings {
                    say!("dsh-exec: warning: {w}");
                }
            }
            Ok((spec, json, color))
        }
        Err(e) => Err(usage_error(&e.0)),
    }
}

pub(crate) fn infrastructure_error(err: &Error, json: bool) -> ExitCode {
    say!("dsh-exec: error: {} ({})", err, err.code());
    if json {
        let obj = serde_json::json!({"error": {"code": err.code(), "message": err.to_string()}});
        print_stdout(&to_json(&obj));
    }
    ExitCode::from(INFRASTRUCTURE_EXIT_STATUS as u8)
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

fn run(args: RunArgs) -> ExitCode {
    if args.interactive && !std::io::stdin().is_terminal() {
        return usage_error("--interactive needs a terminal on stdin");
    }
    let (spec, json, color) = match resolve_args(args) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return infrastructure_error(&Error::SpawnFailed(e.to_string()), json),
    };
    let outcome = runtime.block_on(async {
        let mut aborts = AbortSignals::install().map_err(|e| Error::SpawnFailed(e.to_string()))?;
        dsh_exec::run(&spec, &mut aborts).await
    });
    let result = match outcome {
        Ok(r) => r,
        Err(e) => return infrastructure_error(&e, json),
    };
    if json {
        print_stdout(&to_json(&result));
    } else if spec.stream.is_some() {
        // The output was shown live: only where the full streams are (when
        // they outgrew their budgets), the notices and the marker follow.
        print_stdout(&(render_truncations(&result) + &render_status(&result, use_color(color))));
    } else {
        print_stdout(&render_text(&result, use_color(color)));
    }
    ExitCode::from(result.exit_status().clamp(0, 255) as u8)
}

fn explain(args: RunArgs) -> ExitCode {
    let (spec, json, color) = match resolve_args(args) {
        Ok(r) => r,
        Err(code) => return code,
    };
    if json {
        print_stdout(&to_json(&explain_json(&spec)));
    } else {
        print_stdout(&explain_text(&spec, use_color(color)));
    }
    ExitCode::SUCCESS
}

/// The last `keep` bytes of `r`: memory stays bounded whatever the input.
fn read_tail(mut r: impl Read, keep: usize) -> std::io::Result<Vec<u8>> {
    let mut tail = Vec::with_capacity(keep * 2);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match r.read(&mut buf) {
            Ok(0) => return Ok(tail),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        tail.extend_from_slice(&buf[..n]);
        if tail.len() > keep {
            tail.drain(..tail.len() - keep);
        }
    }
}

/// How much of a rendered result `parse-status` reads: its last 64 KiB,
/// where the marker line is.
const PARSE_STATUS_TAIL: usize = 64 * 1024;

fn parse_status_cmd(file: Option<std::path::PathBuf>) -> ExitCode {
    let file = file.filter(|f| f.as_os_str() != "-");
    let read = match &file {
        Some(path) => std::fs::File::open(path).and_then(|f| read_tail(f, PARSE_STATUS_TAIL)),
        None => read_tail(std::io::stdin().lock(), PARSE_STATUS_TAIL),
    };
    let bytes = match read {
        Ok(b) => b,
        Err(e) => {
            let name = file
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| "stdin".into());
            return usage_error(&format!("cannot read {name}: {e}"));
        }
    };
    match parse_status(&String::from_utf8_lossy(&bytes)) {
        Some(status) => {
            print_stdout(&to_json(&status));
            ExitCode::SUCCESS
        }
        None => {
            say!("dsh-exec: error: the last line is no exit marker");
            ExitCode::from(1)
        }
    }
}
