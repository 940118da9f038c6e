//! Background jobs on the command line: `--background`, `--detach-after`,
//! and `dsh-exec job read|wait|kill|list|prune`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use dsh_exec_core::error::PathProblem;
use dsh_exec_core::jobs::{self, Launched, ReadReply, Status, SupervisorProgram, Waited};
use dsh_exec_core::render::terminal::shown;
use dsh_exec_core::render::{escape_own_lines, one_line, render_status};
use dsh_exec_core::spec::OnTerminal;
use dsh_exec_core::{Ambient, Error, RunResult, exit};

use super::resolve_args;
use super::supervise::SUPERVISE;
use crate::cli::{ColorChoice, JobCmd, RunArgs};
use crate::output::{
    infrastructure_error, print_stdout, say, status, stdout_shows, terminal_colours,
    text_for_stdout, to_json, usage_error, use_color, warn_all,
};

/// How long `job kill` waits for the supervisor to write the result.
const KILL_WAIT: Duration = Duration::from_secs(60);

/// The jobs root of this user.
fn root() -> Result<PathBuf, Error> {
    let ambient = Ambient::current(Some(Path::new("/"))).map_err(|e| Error::WorkdirUnusable {
        path: ".".into(),
        problem: PathProblem::Io(e),
    })?;
    jobs::jobs_root(&ambient.state_dir)
}

/// The directory of job `id`; ids are `[a-z0-9]` only, so no path can escape.
fn job_dir(id: &str) -> Result<PathBuf, ExitCode> {
    if !jobs::valid_id(id) {
        return Err(usage_error(&format!("no such job: {id}")));
    }
    let root = root().map_err(|e| infrastructure_error(&e, false))?;
    let dir = root.join(id);
    if !dir.is_dir() {
        return Err(usage_error(&format!("no such job: {id}")));
    }
    Ok(dir)
}

/// This executable as a supervisor: `dsh-exec __supervise DIR ID`.
fn supervisor_program() -> Result<SupervisorProgram, Error> {
    let path = std::env::current_exe().map_err(|e| Error::SupervisorNotStarted {
        log: format!("cannot find this executable: {e}"),
    })?;
    Ok(SupervisorProgram {
        path,
        args: vec![SUPERVISE.into()],
        die_with_launcher: false,
    })
}

/// Starts the background job of `spec` in this user's jobs root.
///
/// Errors as [`jobs::launch`].
/// `owned`: the supervisor dies with this process (the MCP server without
/// `--keep-jobs`).
pub(crate) fn launch_spec(spec: &dsh_exec_core::Spec, owned: bool) -> Result<Launched, Error> {
    let mut program = supervisor_program()?;
    program.die_with_launcher = owned;
    root().and_then(|root| jobs::launch(spec, &root, &program))
}

/// Resolves `args` and launches the job: the launched job, `--json`, the
/// colour choice and what a terminal is shown of the output; or the exit
/// status of a failure, already reported. A job whose sandbox runner
/// failed is such a failure (125), as in the foreground.
fn launch(args: RunArgs) -> Result<(Launched, bool, ColorChoice, OnTerminal), ExitCode> {
    let (spec, json, color) = resolve_args(args)?;
    super::prune::auto_prune(&spec);
    let launched = root()
        .and_then(|root| jobs::launch(&spec, &root, &supervisor_program()?))
        .map_err(|e| infrastructure_error(&e, json))?;
    warn_all(&launched.warnings);
    if let Some(result) = &launched.not_run
        && result.sandbox.as_ref().is_some_and(|s| s.runner_failed)
    {
        // As in the foreground, nothing ran: the note on stderr ("dsh-exec:
        // the sandbox runner failed, ..."), with --json the result (with
        // runner_failed), and exit 125.
        say!("{}", result.stderr.text.trim_end());
        if json {
            print_stdout(&to_json(result));
        }
        jobs::discard(&launched.dir);
        return Err(status(exit::INFRASTRUCTURE));
    }
    Ok((launched, json, color, spec.on_terminal))
}

/// `--background`: start the job, print its id (or a JSON object), exit 0.
pub(crate) fn start_background(args: RunArgs) -> ExitCode {
    let (launched, json, _, _) = match launch(args) {
        Ok(l) => l,
        Err(code) => return code,
    };
    if json {
        let started = jobs::JobStarted {
            dir: launched.dir.to_string_lossy().into_owned(),
            job_id: launched.id.clone(),
            pid: launched.pid.unwrap_or(0),
        };
        print_stdout(&to_json(&started));
    } else {
        print_stdout(&format!("{}\n", launched.id));
    }
    ExitCode::SUCCESS
}

/// `--detach-after D`: run as a job; if it ends within D, print its result as
/// a foreground run would (and keep no job); otherwise print the output so
/// far and `[detached as job ID]`, and exit 0 with the command still running.
pub(crate) fn detach_run(args: RunArgs) -> ExitCode {
    let Some(after) = args.detach_after else {
        return usage_error("--detach-after needs a duration");
    };
    let started = Instant::now();
    let (launched, json, color, on_terminal) = match launch(args) {
        Ok(l) => l,
        Err(code) => return code,
    };
    let (id, dir) = (&launched.id, &launched.dir);
    let left = after.saturating_sub(started.elapsed());
    let ended = match jobs::wait(dir, Some(left)) {
        Waited::Finished(result) => Some(result),
        Waited::Lost => {
            return infrastructure_error(&Error::JobLost { id: id.clone() }, json);
        }
        Waited::StillRunning => {
            let reply = jobs::read(dir);
            match (reply.status, reply.result) {
                // It ended while we looked: the whole result, as a foreground run.
                (Some(Status::Finished), Some(result)) => Some(Box::new(result)),
                (_, _) => {
                    let reply = ReadReply {
                        result: None,
                        ..reply
                    };
                    print_detached(id, &reply, json, on_terminal);
                    return ExitCode::SUCCESS;
                }
            }
        }
    };
    let result = ended.map(|r| *r);
    jobs::discard(dir);
    match result {
        Some(result) => print_result(&result, json, color, on_terminal),
        None => ExitCode::SUCCESS,
    }
}

/// Prints the output so far of a run left running as job `id`, and
/// `[detached as job ID]` (or the JSON object).
fn print_detached(id: &str, reply: &ReadReply, json: bool, on_terminal: OnTerminal) {
    if json {
        let detached = jobs::JobDetached {
            delta_stderr: reply.delta_stderr.clone(),
            delta_stdout: reply.delta_stdout.clone(),
            detached: true,
            job_id: id.to_string(),
            lossy: reply.lossy,
            stderr_spill_path: reply.stderr_spill_path.clone(),
            stdout_spill_path: reply.stdout_spill_path.clone(),
        };
        print_stdout(&to_json(&detached));
    } else {
        let mut text = delta_text(reply, stdout_shows(on_terminal));
        text.push_str(&format!("[detached as job {id}]\n"));
        print_stdout(&text);
    }
}

/// Prints a finished job's result as a foreground run would (its output
/// shown on a terminal as `on_terminal` says), and maps its exit status.
fn print_result(
    result: &RunResult,
    json: bool,
    color: ColorChoice,
    on_terminal: OnTerminal,
) -> ExitCode {
    if json {
        print_stdout(&to_json(result));
    } else {
        let _ = crate::output::write_stdout_pieces(&text_for_stdout(
            result,
            use_color(color),
            on_terminal,
        ));
    }
    status(result.exit_status())
}

/// A read's delta as text: stdout, then a `[stderr]` section, each shown
/// as `on_terminal` says (the control sequences of a job's output escaped
/// on a terminal; [`OnTerminal::Exact`] elsewhere) with each line shaped
/// like one of dsh-exec's own escaped, and a `[lossy: ...]` line when
/// output was dropped before it could be read.
pub(crate) fn delta_text(reply: &ReadReply, on_terminal: OnTerminal) -> String {
    let mut text = String::new();
    let mut push = |s: &str| {
        text.push_str(s);
        if !s.is_empty() && !s.ends_with('\n') {
            text.push('\n');
        }
    };
    let show = |delta: &str| escape_own_lines(&shown(delta, on_terminal)).into_owned();
    push(&show(&reply.delta_stdout));
    if !reply.delta_stderr.is_empty() {
        push("[stderr]");
        push(&show(&reply.delta_stderr));
    }
    if reply.lossy {
        let paths: Vec<&str> = [&reply.stdout_spill_path, &reply.stderr_spill_path]
            .into_iter()
            .flatten()
            .map(String::as_str)
            .collect();
        push(&format!(
            "[lossy: output was dropped before this read; full streams: {}]",
            paths.join(", ")
        ));
    }
    text
}

/// `dsh-exec job ...`.
pub(crate) fn job(cmd: JobCmd) -> ExitCode {
    match cmd {
        JobCmd::Read { id, json } => read(&id, json),
        JobCmd::Wait { id, timeout, json } => wait(&id, timeout.and_then(|t| t.0), json),
        JobCmd::Kill { id } => kill(&id),
        JobCmd::Write {
            id,
            data,
            file,
            close,
            timeout,
        } => write(&id, data, file, close, timeout),
        JobCmd::Resize { id, size } => resize(&id, size),
        JobCmd::List { json } => list(json),
        JobCmd::Prune { spill } => prune(spill),
    }
}

fn read(id: &str, json: bool) -> ExitCode {
    let dir = match job_dir(id) {
        Ok(d) => d,
        Err(code) => return code,
    };
    let reply = jobs::read(&dir);
    if json {
        print_stdout(&to_json(&reply));
        return ExitCode::SUCCESS;
    }
    // A job's output on a terminal is shown as a run's is, its colours
    // kept unless NO_COLOR.
    let on_terminal = OnTerminal::Escaped {
        colours: terminal_colours(ColorChoice::Auto),
    };
    let mut text = delta_text(&reply, stdout_shows(on_terminal));
    match (&reply.status, &reply.result) {
        (Some(Status::Finished), Some(result)) => text.push_str(&render_status(result, false)),
        (Some(Status::Lost), _) => text.push_str("[lost]\n"),
        _ => text.push_str("[running]\n"),
    }
    print_stdout(&text);
    ExitCode::SUCCESS
}

fn wait(id: &str, timeout: Option<Duration>, json: bool) -> ExitCode {
    let dir = match job_dir(id) {
        Ok(d) => d,
        Err(code) => return code,
    };
    match jobs::wait(&dir, timeout) {
        Waited::Finished(result) => print_result(
            &result,
            json,
            ColorChoice::Auto,
            OnTerminal::Escaped {
                colours: terminal_colours(ColorChoice::Auto),
            },
        ),
        Waited::Lost => {
            print_pending(Status::Lost, json);
            status(exit::INFRASTRUCTURE)
        }
        Waited::StillRunning => {
            print_pending(Status::Running, json);
            status(exit::TIMEOUT)
        }
    }
}

/// A wait that ended without a result: `{"status": ...}` with `--json`,
/// else `[lost]` or `[still running]`.
fn print_pending(state: Status, json: bool) {
    if json {
        print_stdout(&to_json(&jobs::JobWaited::Pending { status: state }));
    } else if state == Status::Lost {
        print_stdout("[lost]\n");
    } else {
        print_stdout("[still running]\n");
    }
}

/// `job write`'s DATA with its escapes applied: `\n`, `\r`, `\t`, `\0`,
/// `\e` (ESC), `\\` and `\xHH`; any other backslash stays as written.
fn unescape_data(data: &str) -> Vec<u8> {
    let b = data.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' || i + 1 == b.len() {
            out.push(b[i]);
            i += 1;
            continue;
        }
        let hex = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
        let (byte, used) = match b[i + 1] {
            b'n' => (b'\n', 2),
            b'r' => (b'\r', 2),
            b't' => (b'\t', 2),
            b'0' => (0, 2),
            b'e' => (0x1b, 2),
            b'\\' => (b'\\', 2),
            b'x' => match (
                b.get(i + 2).and_then(|c| hex(*c)),
                b.get(i + 3).and_then(|c| hex(*c)),
            ) {
                (Some(h), Some(l)) => (h * 16 + l, 4),
                _ => (b'\\', 1),
            },
            _ => (b'\\', 1),
        };
        out.push(byte);
        i += used;
    }
    out
}

fn write(
    id: &str,
    data: Option<String>,
    file: Option<PathBuf>,
    close: bool,
    timeout: Option<Duration>,
) -> ExitCode {
    use std::io::Read;
    let dir = match job_dir(id) {
        Ok(d) => d,
        Err(code) => return code,
    };
    // A file or stdin is sent as it is read, a megabyte at a time, so that
    // /dev/zero or a long stream never sits in memory whole.
    let source: Option<Box<dyn Read>> = match (data.as_deref(), &file) {
        (Some("-"), _) => Some(Box::new(std::io::stdin())),
        (Some(d), _) => Some(Box::new(std::io::Cursor::new(unescape_data(d)))),
        (None, Some(path)) => match std::fs::File::open(path) {
            Ok(f) => Some(Box::new(f)),
            Err(e) => return usage_error(&format!("cannot read {}: {e}", path.display())),
        },
        (None, None) if close => None,
        (None, None) => return usage_error("job write needs DATA, --file FILE or --close"),
    };
    let failed = |e: jobs::WriteFailed| {
        let why = e.message(id);
        say!("dsh-exec: {why}");
        ExitCode::from(1)
    };
    if let Some(mut source) = source {
        let mut chunk = vec![0u8; 1 << 20];
        let mut total = 0;
        loop {
            let n = match source.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    say!("dsh-exec: reading the data: {e} ({total} bytes written)");
                    return ExitCode::from(1);
                }
            };
            match jobs::write(&dir, &chunk[..n], timeout.unwrap_or(WRITE_WAIT)) {
                Ok(w) => total += w,
                Err(e) => return failed(e.after(total)),
            }
        }
    }
    if close && let Err(e) = jobs::close_stdin(&dir) {
        return failed(e);
    }
    ExitCode::SUCCESS
}

fn resize(id: &str, (cols, rows): (u16, u16)) -> ExitCode {
    let dir = match job_dir(id) {
        Ok(d) => d,
        Err(code) => return code,
    };
    match jobs::resize(&dir, cols, rows) {
        Ok(()) => ExitCode::SUCCESS,
        Err(jobs::WriteFailed::Refused { reason, .. }) => {
            say!("dsh-exec: job {id}: {reason}");
            ExitCode::from(1)
        }
        Err(_) => {
            say!("dsh-exec: job {id} is not running");
            ExitCode::from(1)
        }
    }
}

/// How long `job write` waits for a command that does not read: 10 s.
const WRITE_WAIT: Duration = Duration::from_secs(10);

fn kill(id: &str) -> ExitCode {
    let dir = match job_dir(id) {
        Ok(d) => d,
        Err(code) => return code,
    };
    if !jobs::kill(&dir) {
        let state = match jobs::status(&dir) {
            Status::Lost => "is lost",
            _ => "had already finished",
        };
        print_stdout(&format!("job {id} {state}; nothing changed\n"));
        return ExitCode::from(1);
    }
    // The supervisor escalates (SIGTERM, grace, SIGKILL) and writes the result.
    let _ = jobs::wait(&dir, Some(KILL_WAIT));
    print_stdout(&format!("job {id} killed\n"));
    ExitCode::SUCCESS
}

fn list(json: bool) -> ExitCode {
    let all = match root().and_then(|r| jobs::all(&r)) {
        Ok(j) => j,
        Err(e) => return infrastructure_error(&e, false),
    };
    let rows: Vec<jobs::JobListing> = all
        .iter()
        .map(|(id, dir)| {
            let meta = jobs::meta(dir);
            let result = jobs::result(dir);
            jobs::JobListing {
                command: meta.as_ref().map(|m| m.command.clone()),
                exit_status: result.as_ref().map(|r| r.exit_status()),
                job_id: id.clone(),
                started_at_ms: meta.as_ref().map(|m| m.started_at_ms),
                status: jobs::status(dir),
            }
        })
        .collect();
    if json {
        print_stdout(&to_json(&rows));
        return ExitCode::SUCCESS;
    }
    if rows.is_empty() {
        // For a reader; a script reading rows reads none.
        if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
            print_stdout("no jobs\n");
        }
        return ExitCode::SUCCESS;
    }
    let mut text = String::new();
    // A header for the reader on a terminal; none for a pipe, so that
    // scripts read rows alone.
    if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        text.push_str(&format!(
            "{:<10} {:<9} {:<19} {:>4}  {}\n",
            "JOB", "STATUS", "STARTED", "EXIT", "COMMAND"
        ));
    }
    // One row a job whatever its command holds: a newline in it would
    // start a row of its own (the JSON form keeps the command exact).
    for r in &rows {
        let started = r
            .started_at_ms
            .map(format_time)
            .unwrap_or_else(|| "-".into());
        let exit = r
            .exit_status
            .map(|e| e.to_string())
            .unwrap_or_else(|| "-".into());
        text.push_str(&format!(
            "{:<10} {:<9} {:<19} {:>4}  {}\n",
            one_line(&r.job_id),
            r.status.as_str(),
            started,
            exit,
            one_line(r.command.as_deref().unwrap_or(""))
        ));
    }
    print_stdout(&text);
    ExitCode::SUCCESS
}

/// `YYYY-MM-DD HH:MM:SS` (UTC) of milliseconds since the epoch.
fn format_time(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

fn prune(spill: bool) -> ExitCode {
    match root().and_then(|r| jobs::prune(&r, spill)) {
        Ok(n) => {
            let noun = if n == 1 { "job" } else { "jobs" };
            print_stdout(&format!("pruned {n} {noun}\n"));
            ExitCode::SUCCESS
        }
        Err(e) => infrastructure_error(&e, false),
    }
}
