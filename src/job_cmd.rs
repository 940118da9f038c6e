//! The binary's side of background jobs: `--background`, `--detach-after`,
//! the hidden supervisor entry point, and `dsh-exec job ...`.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::time::{Duration, Instant};

use dsh_exec::cli::{JobCmd, RunArgs};
use dsh_exec::jobs::{self, ReadReply, Status};
use dsh_exec::render::{render_status, render_text};
use dsh_exec::{Ambient, Error, RunResult};

use crate::{infrastructure_error, print_stdout, resolve_args, to_json, usage_error, use_color};

/// The hidden first argument that makes `dsh-exec` a job's supervisor:
/// `dsh-exec __supervise DIR ID ORIGINAL-ARGS...`.
pub const SUPERVISE: &str = "__supervise";

/// How long `--background` waits for the supervisor to start the command.
const START_WAIT: Duration = Duration::from_secs(10);

/// How often clients look at a job's state.
const POLL: Duration = Duration::from_millis(20);

/// The jobs root of this user.
fn root() -> Result<PathBuf, Error> {
    let ambient = Ambient::current(Some(Path::new("/"))).map_err(|e| Error::WorkdirUnusable {
        path: ".".into(),
        reason: e.to_string(),
    })?;
    jobs::jobs_root(&ambient.env, &ambient.temp_dir)
}

/// The directory of job `id`; ids are `[a-z0-9]` only, so no path can escape.
fn job_dir(id: &str) -> Result<PathBuf, ExitCode> {
    if id.is_empty()
        || !id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    {
        return Err(usage_error(&format!("no such job: {id}")));
    }
    let root = root().map_err(|e| infrastructure_error(&e, false))?;
    let dir = root.join(id);
    if !dir.is_dir() {
        return Err(usage_error(&format!("no such job: {id}")));
    }
    Ok(dir)
}

/// Starts the supervisor for the run `args` (already validated) and waits
/// until it has started the command: (job id, job dir, command pid).
fn launch(args: &RunArgs, argv: &[OsString]) -> Result<(String, PathBuf, i32), ExitCode> {
    let json = args.json;
    let fail = |e: Error| infrastructure_error(&e, json);
    let root = root().map_err(fail)?;
    let (id, dir) = jobs::new_job(&root).map_err(fail)?;
    let exe = std::env::current_exe().map_err(|e| fail(Error::SpawnFailed(e.to_string())))?;
    let log = std::fs::File::create(dir.join("supervisor.log"))
        .map_err(|e| fail(Error::SpawnFailed(e.to_string())))?;
    let mut cmd = std::process::Command::new(exe);
    // `--stdin-file -` means this process's stdin: the supervisor feeds it.
    let stdin = match args.stdin_file.as_deref() {
        Some(p) if p.as_os_str() == "-" => Stdio::inherit(),
        _ => Stdio::null(),
    };
    cmd.arg(SUPERVISE)
        .arg(&dir)
        .arg(&id)
        .args(&argv[1..])
        .stdin(stdin)
        .stdout(Stdio::null())
        .stderr(log);
    // SAFETY: system calls only; no async runtime has started in this
    // process. The supervisor gets a session of its own, and descriptors
    // this process inherited (a caller's `3>&1`) close at its exec, so it
    // holds nothing of the caller's open for the job's life.
    unsafe {
        cmd.pre_exec(|| {
            nix::unistd::setsid().map_err(std::io::Error::from)?;
            const CLOSE_RANGE_CLOEXEC: u32 = 4;
            nix::libc::syscall(
                nix::libc::SYS_close_range,
                3u32,
                u32::MAX,
                CLOSE_RANGE_CLOEXEC,
            );
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| fail(Error::SpawnFailed(e.to_string())))?;
    // From here the job counts as running (a prune cannot take it).
    let _ = jobs::record_supervisor(&dir, child.id() as i32);
    let end = Instant::now() + START_WAIT;
    loop {
        if let Some(meta) = jobs::meta(&dir) {
            return Ok((id, dir, meta.pid));
        }
        if let Ok(text) = std::fs::read_to_string(dir.join("error.json")) {
            let _ = child.wait();
            let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
            let message = v["message"].as_str().unwrap_or("the job could not start");
            crate::say!(
                "dsh-exec: error: {message} ({})",
                v["code"].as_str().unwrap_or("SPAWN_FAILED")
            );
            if json {
                print_stdout(&to_json(&serde_json::json!({"error": v})));
            }
            let _ = std::fs::remove_dir_all(&dir);
            return Err(ExitCode::from(125));
        }
        if let Some(result) = jobs::result(&dir) {
            // Ended before its metadata was read: a command that never ran
            // (the sandbox runner failed) is an error, as in the foreground.
            if result.sandbox.as_ref().is_some_and(|s| s.runner_failed) {
                crate::say!("dsh-exec: error: {}", result.stderr.text.trim_end());
                let _ = std::fs::remove_dir_all(&dir);
                return Err(ExitCode::from(125));
            }
            return Ok((id, dir, 0));
        }
        if matches!(child.try_wait(), Ok(Some(_))) || Instant::now() > end {
            let log = std::fs::read_to_string(dir.join("supervisor.log")).unwrap_or_default();
            return Err(fail(Error::SpawnFailed(format!(
                "the job supervisor did not start: {}",
                log.lines().last().unwrap_or("no message")
            ))));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// `--background`: start the job, print its id (or a JSON object), exit 0.
pub fn start_background(args: RunArgs, argv: &[OsString]) -> ExitCode {
    let json = args.json;
    if let Err(code) = resolve_args(args.clone()) {
        return code;
    }
    match launch(&args, argv) {
        Ok((id, dir, pid)) => {
            if json {
                let obj =
                    serde_json::json!({"job_id": id, "pid": pid, "dir": dir.to_string_lossy()});
                print_stdout(&to_json(&obj));
            } else {
                print_stdout(&format!("{id}\n"));
            }
            ExitCode::SUCCESS
        }
        Err(code) => code,
    }
}

/// `--detach-after D`: run as a job; if it ends within D, print its result as
/// a foreground run would; otherwise print the output so far and
/// `[detached as job ID]`, and exit 0 with the command still running.
pub fn detach_run(args: RunArgs, argv: &[OsString]) -> ExitCode {
    let (json, color) = (args.json, args.color);
    let Some(after) = args.detach_after else {
        return usage_error("--detach-after needs a duration");
    };
    if let Err(code) = resolve_args(args.clone()) {
        return code;
    }
    let started = Instant::now();
    let (id, dir, _) = match launch(&args, argv) {
        Ok(j) => j,
        Err(code) => return code,
    };
    loop {
        match jobs::status(&dir) {
            Status::Finished => {
                // It ended in time: a foreground run, with no job to keep.
                let code = print_result(&dir, json, color);
                let _ = std::fs::remove_dir_all(&dir);
                return code;
            }
            Status::Lost => return infrastructure_error(&lost(&id), json),
            Status::Running if started.elapsed() >= after => break,
            Status::Running => std::thread::sleep(POLL),
        }
    }
    let reply = jobs::read(&dir);
    if reply.status == Some(Status::Finished) {
        // It ended while we looked: the whole result, as a foreground run.
        return print_result(&dir, json, color);
    }
    if json {
        let obj = serde_json::json!({
            "detached": true,
            "job_id": id,
            "delta_stdout": reply.delta_stdout,
            "delta_stderr": reply.delta_stderr,
            "lossy": reply.lossy,
            "stdout_spill_path": reply.stdout_spill_path,
            "stderr_spill_path": reply.stderr_spill_path,
        });
        print_stdout(&to_json(&obj));
    } else {
        let mut text = delta_text(&reply);
        text.push_str(&format!("[detached as job {id}]\n"));
        print_stdout(&text);
    }
    ExitCode::SUCCESS
}

fn lost(id: &str) -> Error {
    Error::SupervisionFailed(format!("job {id} is lost: its supervisor is gone"))
}

/// Prints a finished job's result as a foreground run would, and maps its
/// exit status.
fn print_result(dir: &Path, json: bool, color: dsh_exec::cli::ColorChoice) -> ExitCode {
    let Some(result) = jobs::result(dir) else {
        return infrastructure_error(&Error::SupervisionFailed("no result".into()), json);
    };
    if json {
        print_stdout(&to_json(&result));
    } else {
        print_stdout(&render_text(&result, use_color(color)));
    }
    exit_of(&result)
}

fn exit_of(result: &RunResult) -> ExitCode {
    ExitCode::from(result.exit_status().clamp(0, 255) as u8)
}

/// The output part of a read: stdout, a `[stderr]` section, and a note when
/// output was dropped before it could be read.
fn delta_text(reply: &ReadReply) -> String {
    let mut text = String::new();
    let mut push = |s: &str| {
        text.push_str(s);
        if !s.is_empty() && !s.ends_with('\n') {
            text.push('\n');
        }
    };
    push(&reply.delta_stdout);
    if !reply.delta_stderr.is_empty() {
        push("[stderr]");
        push(&reply.delta_stderr);
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

/// The hidden supervisor: `dsh-exec __supervise DIR ID ORIGINAL-ARGS...`.
pub fn supervise_main(argv: &[OsString]) -> ExitCode {
    let (Some(dir), Some(id)) = (argv.get(2), argv.get(3)) else {
        return usage_error("internal: __supervise DIR ID ARGS");
    };
    let dir = PathBuf::from(dir);
    let id = id.to_string_lossy().into_owned();
    let original = std::iter::once(OsString::from("dsh-exec")).chain(argv[4..].iter().cloned());
    let matches = match dsh_exec::cli::command().try_get_matches_from(original) {
        Ok(m) => m,
        Err(e) => return crate::clap_error(e),
    };
    let cli = match <dsh_exec::cli::Cli as clap::FromArgMatches>::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => return crate::clap_error(e),
    };
    let (mut spec, _, _) = match resolve_args(cli.run) {
        Ok(r) => r,
        Err(code) => return code,
    };
    spec.stream = None;
    spec.pid_namespace = jobs::can_use_pid_namespace();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return infrastructure_error(&Error::SpawnFailed(e.to_string()), false),
    };
    match runtime.block_on(jobs::supervise(&dir, &spec, &id)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            crate::say!("dsh-exec: error: {e} ({})", e.code());
            ExitCode::from(125)
        }
    }
}

/// `dsh-exec job ...`.
pub fn job(cmd: JobCmd) -> ExitCode {
    match cmd {
        JobCmd::Read { id, json } => read(&id, json),
        JobCmd::Wait { id, timeout, json } => wait(&id, timeout.and_then(|t| t.0), json),
        JobCmd::Kill { id } => kill(&id),
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
    let mut text = delta_text(&reply);
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
    let end = timeout.map(|t| Instant::now() + t);
    loop {
        match jobs::status(&dir) {
            Status::Finished => return print_result(&dir, json, dsh_exec::cli::ColorChoice::Auto),
            Status::Lost => {
                print_stdout(if json {
                    "{\"status\":\"lost\"}\n"
                } else {
                    "[lost]\n"
                });
                return ExitCode::from(125);
            }
            Status::Running if end.is_some_and(|e| Instant::now() >= e) => {
                print_stdout(if json {
                    "{\"status\":\"running\"}\n"
                } else {
                    "[still running]\n"
                });
                return ExitCode::from(124);
            }
            Status::Running => std::thread::sleep(POLL),
        }
    }
}

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
    let end = Instant::now() + Duration::from_secs(60);
    while jobs::status(&dir) == Status::Running && Instant::now() < end {
        std::thread::sleep(POLL);
    }
    print_stdout(&format!("job {id} killed\n"));
    ExitCode::SUCCESS
}

fn all_jobs() -> Result<Vec<(String, PathBuf)>, ExitCode> {
    let root = root().map_err(|e| infrastructure_error(&e, false))?;
    let mut jobs: Vec<(String, PathBuf)> = std::fs::read_dir(&root)
        .map_err(|e| infrastructure_error(&Error::SupervisionFailed(e.to_string()), false))?
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
        .collect();
    jobs.sort_by_key(|(_, dir)| jobs::meta(dir).map(|m| m.started_at_ms).unwrap_or(0));
    Ok(jobs)
}

fn list(json: bool) -> ExitCode {
    let jobs = match all_jobs() {
        Ok(j) => j,
        Err(code) => return code,
    };
    let rows: Vec<serde_json::Value> = jobs
        .iter()
        .map(|(id, dir)| {
            let meta = jobs::meta(dir);
            let result = jobs::result(dir);
            serde_json::json!({
                "job_id": id,
                "status": jobs::status(dir),
                "command": meta.as_ref().map(|m| m.command.clone()),
                "started_at_ms": meta.as_ref().map(|m| m.started_at_ms),
                "exit_status": result.as_ref().map(|r| r.exit_status()),
            })
        })
        .collect();
    if json {
        print_stdout(&to_json(&rows));
        return ExitCode::SUCCESS;
    }
    if rows.is_empty() {
        print_stdout("no jobs\n");
        return ExitCode::SUCCESS;
    }
    let mut text = String::new();
    for r in &rows {
        let started = r["started_at_ms"]
            .as_u64()
            .map(format_time)
            .unwrap_or_else(|| "-".into());
        let exit = r["exit_status"]
            .as_i64()
            .map(|e| e.to_string())
            .unwrap_or_else(|| "-".into());
        text.push_str(&format!(
            "{:<10} {:<9} {:<19} {:>4}  {}\n",
            r["job_id"].as_str().unwrap_or(""),
            r["status"].as_str().unwrap_or(""),
            started,
            exit,
            r["command"].as_str().unwrap_or("")
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

/// Removes a spill file, and its directory once empty, only when the path
/// has the exact shape dsh-exec gives them (`.../dsh-exec-XXXXXXXX/stdout`
/// or `stderr`, a regular file of this user): a recorded path is never
/// trusted further than that.
fn remove_spill_file(path: &Path) {
    use nix::fcntl::{AtFlags, OFlag, open};
    use nix::sys::stat::{Mode, fstat, fstatat};
    use nix::unistd::{UnlinkatFlags, unlinkat};
    let Some(name) = path
        .file_name()
        .filter(|n| *n == "stdout" || *n == "stderr")
    else {
        return;
    };
    let Some(parent) = path.parent() else { return };
    let dir_ok = parent
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| {
            n.strip_prefix("dsh-exec-").is_some_and(|s| {
                s.len() == 8
                    && s.bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
            })
        });
    if !dir_ok {
        return;
    }
    // The directory itself must not be a symlink (a command could have
    // swapped it), and both it and the file must be this user's.
    let uid = nix::unistd::geteuid().as_raw();
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let Ok(dir) = open(parent, flags, Mode::empty()) else {
        return;
    };
    let mine = fstat(&dir).is_ok_and(|st| st.st_uid == uid);
    let file_ok = fstatat(&dir, name, AtFlags::AT_SYMLINK_NOFOLLOW)
        .is_ok_and(|st| st.st_uid == uid && (st.st_mode & nix::libc::S_IFMT) == nix::libc::S_IFREG);
    if mine && file_ok && unlinkat(&dir, name, UnlinkatFlags::NoRemoveDir).is_ok() {
        let _ = std::fs::remove_dir(parent);
    }
}

fn prune(spill: bool) -> ExitCode {
    let jobs = match all_jobs() {
        Ok(j) => j,
        Err(code) => return code,
    };
    let mut pruned = 0;
    for (_, dir) in jobs {
        if jobs::status(&dir) == Status::Running {
            continue;
        }
        if spill && let Some(result) = jobs::result(&dir) {
            for path in [&result.stdout.spill_path, &result.stderr.spill_path]
                .into_iter()
                .flatten()
            {
                remove_spill_file(path);
            }
        }
        if std::fs::remove_dir_all(&dir).is_ok() {
            pruned += 1;
        }
    }
    print_stdout(&format!("pruned {pruned} jobs\n"));
    ExitCode::SUCCESS
}
