//! Background jobs: one supervisor process per job, its state directory, and
//! the client side of `dsh-exec job read|wait|kill|list|prune`.
//!
//! A job is started by [`crate::process::start`] like any run, inside a
//! supervisor: a `dsh-exec` process in its own session that keeps capturing
//! with the same budgets, spill files, environment, sandbox and tree sweep.
//! The supervisor serves incremental reads ([`crate::Execution::read_delta`])
//! over a Unix socket in the job's directory, and when the job ends it writes
//! the unread output and the result there, atomically (write, then rename).
//!
//! Layout of a job directory (mode 0700, inside a per-user 0700 root):
//!
//! ```text
//! meta.json     id, command, workdir, start time, supervisor and command pids
//! sock          the supervisor's Unix socket, while it runs
//! unread.json   output not yet read when the job ended
//! result.json   the result, as `--json` prints it
//! error.json    an infrastructure error that kept the job from starting
//! supervisor.log  the supervisor's own stderr
//! ```
//!
//! A job whose supervisor is gone without a result (killed with SIGKILL) is
//! `lost`. When the supervisor holds CAP_SYS_ADMIN, the command runs as the
//! init of a new PID namespace, so the kernel kills the command's whole tree
//! when the supervisor dies; otherwise only the direct child dies with it
//! (its parent-death signal).

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::output::Delta;
use crate::process::{AbortSignals, Execution, Started};
use crate::result::RunResult;
use crate::spec::Spec;

/// How often the supervisor looks for read requests while the job runs.
const TICK: Duration = Duration::from_millis(20);

/// The per-user root of job directories: `$XDG_RUNTIME_DIR/dsh-exec/jobs`,
/// else `TEMP/dsh-exec-jobs-UID`; created 0700 and refused when another user
/// owns it or it is open to others.
pub fn jobs_root(env: &[(OsString, OsString)], temp_dir: &Path) -> Result<PathBuf, Error> {
    let runtime = env
        .iter()
        .rev()
        .find(|(k, v)| k == "XDG_RUNTIME_DIR" && !v.is_empty())
        .map(|(_, v)| PathBuf::from(v));
    let uid = nix::unistd::geteuid().as_raw();
    let root = match runtime {
        Some(r) => r.join("dsh-exec").join("jobs"),
        None => temp_dir.join(format!("dsh-exec-jobs-{uid}")),
    };
    let unusable = |reason: String| Error::SpillUnusable {
        path: root.clone(),
        reason: format!("job directory: {reason}"),
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&root)
        .map_err(|e| unusable(e.to_string()))?;
    let meta = std::fs::symlink_metadata(&root).map_err(|e| unusable(e.to_string()))?;
    if !meta.is_dir() || meta.uid() != uid || meta.permissions().mode() & 0o077 != 0 {
        return Err(unusable("not a private directory of this user".into()));
    }
    Ok(root)
}

/// Creates the directory of a new job: (its id, its path).
pub fn new_job(root: &Path) -> Result<(String, PathBuf), Error> {
    for _ in 0..16 {
        let id = format!("j{}", &crate::output::random_suffix()[..8]);
        let dir = root.join(&id);
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok((id, dir)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(Error::SpillUnusable {
                    path: dir,
                    reason: e.to_string(),
                });
            }
        }
    }
    Err(Error::SpillUnusable {
        path: root.to_path_buf(),
        reason: "no free job id".into(),
    })
}

/// What `meta.json` holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobMeta {
    /// The job id, e.g. `j4k2x9qa`.
    pub job_id: String,
    /// The script given to `bash -c`.
    pub command: String,
    /// The working directory.
    pub workdir: String,
    /// When the job started, in milliseconds since the Unix epoch.
    pub started_at_ms: u64,
    /// The supervisor's pid and start time (clock ticks since boot).
    pub supervisor_pid: i32,
    /// See `supervisor_pid`.
    pub supervisor_start: u64,
    /// The command's pid (in the supervisor's PID namespace).
    pub pid: i32,
}

/// A job's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// The supervisor runs the command.
    Running,
    /// The job ended; its result is written.
    Finished,
    /// The supervisor is gone without a result.
    Lost,
}

/// An incremental read, as `job read --json` prints it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ReadReply {
    /// stdout written since the previous read (lossy UTF-8).
    pub delta_stdout: String,
    /// stderr written since the previous read (lossy UTF-8).
    pub delta_stderr: String,
    /// True when output was dropped from the tail buffer before it could
    /// be read; the spill files hold it.
    pub lossy: bool,
    /// `running`, `finished` or `lost`.
    pub status: Option<Status>,
    /// The stdout spill file, once there is one.
    pub stdout_spill_path: Option<String>,
    /// The stderr spill file, once there is one.
    pub stderr_spill_path: Option<String>,
    /// The result, once the job has finished.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<RunResult>,
}

/// Writes `bytes` to `path` atomically (a temporary file, then rename(2)).
fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Option<T> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

/// The start time of `pid`, if it runs (not a zombie).
fn start_time(pid: i32) -> Option<u64> {
    crate::sweep::live_start_time(pid)
}

/// The job's metadata, once its supervisor has started the command.
pub fn meta(dir: &Path) -> Option<JobMeta> {
    read_json(&dir.join("meta.json"))
}

/// The job's result, once it has finished.
pub fn result(dir: &Path) -> Option<RunResult> {
    read_json(&dir.join("result.json"))
}

/// The job's state: finished when its result is written, running while its
/// supervisor (same pid, same start time) lives, lost otherwise.
pub fn status(dir: &Path) -> Status {
    if dir.join("result.json").exists() {
        return Status::Finished;
    }
    match meta(dir) {
        Some(m) if start_time(m.supervisor_pid) == Some(m.supervisor_start) => Status::Running,
        _ => Status::Lost,
    }
}

/// Reads what the job wrote since the previous read; consuming.
pub fn read(dir: &Path) -> ReadReply {
    if status(dir) == Status::Running
        && let Some(reply) = ask_supervisor(dir)
    {
        return reply;
    }
    // Finished (or just finished while we asked), or lost.
    let status = status(dir);
    let mut reply: ReadReply = read_json(&dir.join("unread.json")).unwrap_or_default();
    if reply.delta_stdout.is_empty() && reply.delta_stderr.is_empty() && !reply.lossy {
        // Nothing left; keep the spill paths.
    } else {
        let consumed = ReadReply {
            stdout_spill_path: reply.stdout_spill_path.clone(),
            stderr_spill_path: reply.stderr_spill_path.clone(),
            ..ReadReply::default()
        };
        let _ = serde_json::to_vec(&consumed).map(|b| write_atomic(&dir.join("unread.json"), &b));
    }
    reply.status = Some(status);
    reply.result = result(dir);
    reply
}

fn ask_supervisor(dir: &Path) -> Option<ReadReply> {
    let mut stream = UnixStream::connect(dir.join("sock")).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    stream.write_all(b"read\n").ok()?;
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line).ok()?;
    serde_json::from_str(&line).ok()
}

fn delta_reply(exec: &mut Execution, status: Status) -> ReadReply {
    let (out, err): (Delta, Delta) = exec.read_delta();
    let (out_spill, err_spill) = exec.spill_paths();
    ReadReply {
        delta_stdout: String::from_utf8_lossy(&out.bytes).into_owned(),
        delta_stderr: String::from_utf8_lossy(&err.bytes).into_owned(),
        lossy: out.lossy || err.lossy,
        status: Some(status),
        stdout_spill_path: out_spill.map(|p| p.to_string_lossy().into_owned()),
        stderr_spill_path: err_spill.map(|p| p.to_string_lossy().into_owned()),
        result: None,
    }
}

/// Answers every pending read request.
fn serve(listener: &UnixListener, exec: &mut Execution) {
    while let Ok((stream, _)) = listener.accept() {
        let _ = stream.set_nonblocking(false);
        let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
        let mut line = String::new();
        let mut reader = BufReader::new(&stream);
        if reader.read_line(&mut line).is_ok() && line.trim() == "read" {
            let reply = delta_reply(exec, Status::Running);
            if let Ok(mut bytes) = serde_json::to_vec(&reply) {
                bytes.push(b'\n');
                let _ = (&stream).write_all(&bytes);
            }
        }
    }
}

/// Runs `spec` as the job in `dir`: the body of the supervisor process.
/// Returns when the job has ended and its result is written.
///
/// Errors before the command starts are written to `error.json` (and
/// returned); afterwards only the result is written.
pub async fn supervise(dir: &Path, spec: &Spec, job_id: &str) -> Result<(), Error> {
    let fail = |e: Error| {
        let obj = serde_json::json!({"code": e.code(), "message": e.to_string()});
        let _ = write_atomic(&dir.join("error.json"), obj.to_string().as_bytes());
        e
    };
    let io_fail = |e: std::io::Error| fail(Error::SpawnFailed(format!("job socket: {e}")));
    let listener = UnixListener::bind(dir.join("sock")).map_err(io_fail)?;
    listener.set_nonblocking(true).map_err(io_fail)?;
    let mut aborts =
        AbortSignals::install().map_err(|e| fail(Error::SpawnFailed(e.to_string())))?;
    let started = Instant::now();
    let started_at_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let mut exec = match crate::process::start(spec, started).map_err(fail)? {
        Started::Running(exec) => exec,
        Started::NotRun(result) => {
            write_end(dir, &ReadReply::default(), &result);
            return Ok(());
        }
    };
    let me = std::process::id() as i32;
    let meta = JobMeta {
        job_id: job_id.to_string(),
        command: spec.script.clone(),
        workdir: spec.workdir.value.to_string_lossy().into_owned(),
        started_at_ms,
        supervisor_pid: me,
        supervisor_start: start_time(me).unwrap_or(0),
        pid: exec.pid(),
    };
    if let Ok(bytes) = serde_json::to_vec(&meta) {
        let _ = write_atomic(&dir.join("meta.json"), &bytes);
    }
    loop {
        let finished = exec
            .run_until(Some(Instant::now() + TICK), &mut aborts)
            .await?;
        serve(&listener, &mut exec);
        if finished {
            break;
        }
    }
    let unread = delta_reply(&mut exec, Status::Finished);
    let result = exec.finish();
    write_end(dir, &unread, &result);
    let _ = std::fs::remove_file(dir.join("sock"));
    Ok(())
}

fn write_end(dir: &Path, unread: &ReadReply, result: &RunResult) {
    if let Ok(bytes) = serde_json::to_vec(unread) {
        let _ = write_atomic(&dir.join("unread.json"), &bytes);
    }
    if let Ok(bytes) = serde_json::to_vec(result) {
        let _ = write_atomic(&dir.join("result.json"), &bytes);
    }
}

/// True when this process holds CAP_SYS_ADMIN, which a new PID namespace
/// needs.
pub fn can_use_pid_namespace() -> bool {
    const CAP_SYS_ADMIN: u32 = 21;
    crate::spawn::effective_capabilities().is_some_and(|caps| caps & (1 << CAP_SYS_ADMIN) != 0)
}

/// Sends SIGTERM to the job's supervisor (if it is still the process that
/// started the job), which then ends the job like an abort: SIGTERM, grace,
/// SIGKILL and the sweep. Returns false when the job was not running.
pub fn kill(dir: &Path) -> bool {
    let Some(m) = meta(dir) else { return false };
    if status(dir) != Status::Running {
        return false;
    }
    let seen = crate::sweep::Seen {
        pid: m.supervisor_pid,
        start_time: m.supervisor_start,
        pgrp: 0,
    };
    crate::sweep::signal_one(seen, nix::sys::signal::Signal::SIGTERM)
}
