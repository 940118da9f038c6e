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
//! meta.json     id, command, workdir, start time, command pid
//! supervisor.json  the supervisor's pid and start time (by the launcher)
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
/// else `$XDG_STATE_HOME/dsh-exec/jobs`, else `~/.local/state/dsh-exec/jobs`,
/// else `TEMP/dsh-exec-jobs-UID`. Created 0700; refused when it, or the
/// `dsh-exec` directory above it, belongs to another user or is open to
/// others. (The temp dir comes last: `workspace-write` lets commands write
/// there, and job state must be out of their reach.)
pub fn jobs_root(env: &[(OsString, OsString)], temp_dir: &Path) -> Result<PathBuf, Error> {
    let get = |k: &str| {
        env.iter()
            .rev()
            .find(|(n, v)| n == k && !v.is_empty())
            .map(|(_, v)| PathBuf::from(v))
    };
    let uid = nix::unistd::geteuid().as_raw();
    // The runtime dir must exist already (the login session makes it); a
    // state home is created, as long as HOME itself is a directory.
    let home = get("HOME").filter(|h| h.is_absolute() && h.is_dir());
    let root = get("XDG_RUNTIME_DIR")
        .filter(|r| r.is_absolute() && r.is_dir())
        .or_else(|| get("XDG_STATE_HOME").filter(|s| s.is_absolute() && home.is_some()))
        .or_else(|| home.map(|h| h.join(".local").join("state")))
        .map(|base| base.join("dsh-exec").join("jobs"))
        .unwrap_or_else(|| temp_dir.join(format!("dsh-exec-jobs-{uid}")));
    let unusable = |reason: String| Error::JobsUnusable {
        path: root.clone(),
        reason,
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&root)
        .map_err(|e| unusable(e.to_string()))?;
    let private = |p: &Path, mask: u32| {
        std::fs::symlink_metadata(p)
            .is_ok_and(|m| m.is_dir() && m.uid() == uid && m.permissions().mode() & mask == 0)
    };
    let parent_ok = match root.parent() {
        Some(p) if p.file_name().is_some_and(|n| n == "dsh-exec") => private(p, 0o022),
        _ => true,
    };
    if !private(&root, 0o077) || !parent_ok {
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
                return Err(Error::JobsUnusable {
                    path: dir,
                    reason: e.to_string(),
                });
            }
        }
    }
    Err(Error::JobsUnusable {
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
    let stored: Stored = read_json(&dir.join("result.json"))?;
    let mut result = stored.result;
    result.stdout.kept_bytes = stored.stdout_kept_bytes;
    result.stderr.kept_bytes = stored.stderr_kept_bytes;
    Some(result)
}

/// The job's state: finished when its result is written, running while its
/// supervisor (same pid, same start time) lives, lost otherwise.
pub fn status(dir: &Path) -> Status {
    // The supervisor's own record comes first: a result file alone (which a
    // command with write access to the directory could forge) does not end
    // a job whose supervisor still runs.
    if let Some(s) = supervisor(dir)
        && start_time(s.pid) == Some(s.start)
    {
        return Status::Running;
    }
    // A directory younger than the launcher's wait, with no supervisor yet:
    // a job being started (not lost; prune must leave it).
    if supervisor(dir).is_none()
        && std::fs::metadata(dir)
            .and_then(|m| m.modified())
            .is_ok_and(|t| t.elapsed().is_ok_and(|age| age < Duration::from_secs(15)))
    {
        return Status::Running;
    }
    if dir.join("result.json").exists() {
        Status::Finished
    } else {
        Status::Lost
    }
}

/// The supervisor of a job: pid and start time, written by the launcher
/// as soon as the supervisor process exists.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Supervisor {
    /// Its pid.
    pub pid: i32,
    /// Its start time (clock ticks since boot).
    pub start: u64,
}

/// The job's supervisor record.
pub fn supervisor(dir: &Path) -> Option<Supervisor> {
    read_json(&dir.join("supervisor.json"))
}

/// Records the supervisor `pid` of the job in `dir` (by the launcher, right
/// after starting it), so the job counts as running from then on.
pub fn record_supervisor(dir: &Path, pid: i32) -> std::io::Result<()> {
    let s = Supervisor {
        pid,
        start: start_time(pid).unwrap_or(0),
    };
    write_atomic(&dir.join("supervisor.json"), &serde_json::to_vec(&s)?)
}

/// Reads what the job wrote since the previous read; consuming.
pub fn read(dir: &Path) -> ReadReply {
    if status(dir) == Status::Running
        && let Some(reply) = ask_supervisor(dir)
    {
        return reply;
    }
    // Finished (or just finished while we asked), or lost. Taking the
    // unread output is a rename, so two readers at once cannot both get it.
    let status = status(dir);
    let unread = dir.join("unread.json");
    let taken = dir.join(format!("unread.{}.json", std::process::id()));
    let mut reply: ReadReply = match std::fs::rename(&unread, &taken) {
        Ok(()) => {
            let r = read_json(&taken).unwrap_or_default();
            let _ = std::fs::remove_file(&taken);
            r
        }
        Err(_) => ReadReply::default(),
    };
    if let Some(r) = result(dir) {
        reply.stdout_spill_path = r
            .stdout
            .spill_path
            .as_ref()
            .map(|p| p.to_string_lossy().into());
        reply.stderr_spill_path = r
            .stderr
            .spill_path
            .as_ref()
            .map(|p| p.to_string_lossy().into());
        reply.result = Some(r);
    }
    reply.status = Some(status);
    reply
}

fn ask_supervisor(dir: &Path) -> Option<ReadReply> {
    let mut stream = UnixStream::connect(dir.join("sock")).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    stream.write_all(b"read\n").ok()?;
    let mut line = String::new();
    BufReader::new(&stream).read_line(&mut line).ok()?;
    let reply = serde_json::from_str(&line).ok()?;
    // Closing confirms the delivery (the supervisor waits for EOF).
    drop(stream);
    Some(reply)
}

/// Output taken from the captures but not yet delivered: the bytes of a
/// UTF-8 character cut by a read (held until the rest arrives), and
/// deliveries that failed (a reader that went away).
#[derive(Default)]
struct Carry {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    lossy: bool,
}

impl Carry {
    /// Takes back an undelivered reply, keeping at most `cap` bytes per
    /// stream (the newest); dropping any marks the next read lossy.
    fn put_back(&mut self, reply: ReadReply, cap: usize) {
        let mut back = |text: String, held: &mut Vec<u8>| {
            let mut bytes = text.into_bytes();
            bytes.append(held);
            if bytes.len() > cap {
                bytes.drain(..bytes.len() - cap);
                self.lossy = true;
            }
            bytes
        };
        let out = back(reply.delta_stdout, &mut self.stdout);
        self.stdout = out;
        let err = back(reply.delta_stderr, &mut self.stderr);
        self.stderr = err;
        self.lossy |= reply.lossy;
    }
}

/// Splits off the bytes of an incomplete UTF-8 character at the end of
/// `bytes` (at most 3), unless `last` says no more bytes will come.
fn hold_back_partial(bytes: &mut Vec<u8>, last: bool) -> Vec<u8> {
    if last {
        return Vec::new();
    }
    // Only the last character matters: find where it starts (at most 3
    // bytes back) and hold it if it is shorter than its lead byte says.
    let n = bytes.len();
    for back in 1..=n.min(4) {
        let b = bytes[n - back];
        if b & 0xC0 == 0x80 {
            continue; // a continuation byte: look further back
        }
        let want = match b {
            0x00..=0x7F => 1,
            0xC2..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF4 => 4,
            _ => return Vec::new(), // not a lead byte: invalid anyway
        };
        return if back < want {
            bytes.split_off(n - back)
        } else {
            Vec::new()
        };
    }
    Vec::new()
}

fn delta_reply(exec: &mut Execution, carry: &mut Carry, status: Status) -> ReadReply {
    let last = status != Status::Running;
    let (out, err): (Delta, Delta) = exec.read_delta();
    let mut out_bytes = std::mem::take(&mut carry.stdout);
    out_bytes.extend_from_slice(&out.bytes);
    let mut err_bytes = std::mem::take(&mut carry.stderr);
    err_bytes.extend_from_slice(&err.bytes);
    carry.stdout = hold_back_partial(&mut out_bytes, last);
    carry.stderr = hold_back_partial(&mut err_bytes, last);
    // A lossy read starts wherever the tail buffer did: drop a cut
    // character's remains there, as the foreground tail cut does.
    if out.lossy {
        out_bytes.drain(..crate::output::char_boundary_skip(&out_bytes));
    }
    if err.lossy {
        err_bytes.drain(..crate::output::char_boundary_skip(&err_bytes));
    }
    let lossy = std::mem::take(&mut carry.lossy) || out.lossy || err.lossy;
    let (out_spill, err_spill) = exec.spill_paths();
    ReadReply {
        delta_stdout: String::from_utf8_lossy(&out_bytes).into_owned(),
        delta_stderr: String::from_utf8_lossy(&err_bytes).into_owned(),
        lossy,
        status: Some(status),
        stdout_spill_path: out_spill.map(|p| p.to_string_lossy().into_owned()),
        stderr_spill_path: err_spill.map(|p| p.to_string_lossy().into_owned()),
        result: None,
    }
}

/// The longest a read request may take the supervisor from its run loop,
/// whatever the client does (trickles bytes, never reads its reply).
const CLIENT_BUDGET: Duration = Duration::from_millis(200);

/// Requests answered per tick at most, so a flood of connections cannot
/// keep the supervisor from its deadline and aborts.
const CLIENTS_PER_TICK: usize = 8;

/// Reads up to 8 bytes or EOF from `stream` before `deadline`: the request
/// line, or the reader's closing confirmation.
fn read_until(stream: &UnixStream, deadline: Instant) -> Option<Vec<u8>> {
    use std::io::Read;
    let mut got = Vec::new();
    let mut buf = [0u8; 8];
    loop {
        let left = deadline.checked_duration_since(Instant::now())?;
        stream
            .set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .ok()?;
        match (&*stream).read(&mut buf) {
            Ok(0) => return Some(got),
            Ok(n) => {
                got.extend_from_slice(&buf[..n]);
                if got.contains(&b'\n') || got.len() >= 8 {
                    return Some(got);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
}

/// Answers pending read requests, each within [`CLIENT_BUDGET`]. A reply
/// its reader did not take (it closed first, or did not confirm in time)
/// goes back to the carry, so the next read has it.
fn serve(listener: &UnixListener, exec: &mut Execution, carry: &mut Carry, cap: usize) {
    for _ in 0..CLIENTS_PER_TICK {
        let Ok((stream, _)) = listener.accept() else {
            return;
        };
        let deadline = Instant::now() + CLIENT_BUDGET;
        let _ = stream.set_nonblocking(false);
        if read_until(&stream, deadline).as_deref() != Some(b"read\n") {
            continue;
        }
        let reply = delta_reply(exec, carry, Status::Running);
        let Ok(mut bytes) = serde_json::to_vec(&reply) else {
            continue;
        };
        bytes.push(b'\n');
        let left = deadline.saturating_duration_since(Instant::now());
        let _ = stream.set_write_timeout(Some(left.max(Duration::from_millis(1))));
        // The reader confirms by closing: EOF after the reply means it got it.
        let delivered = (&stream).write_all(&bytes).is_ok()
            && read_until(&stream, deadline).is_some_and(|rest| rest.is_empty());
        if !delivered {
            carry.put_back(reply, cap);
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
    let meta = JobMeta {
        job_id: job_id.to_string(),
        command: spec.script.clone(),
        workdir: spec.workdir.value.to_string_lossy().into_owned(),
        started_at_ms,
        pid: exec.pid(),
    };
    if let Ok(bytes) = serde_json::to_vec(&meta) {
        let _ = write_atomic(&dir.join("meta.json"), &bytes);
    }
    let mut carry = Carry::default();
    // Undelivered output held for the next read: bounded like the tails.
    let carry_cap = usize::try_from(
        spec.stdout_max_bytes
            .value
            .max(spec.stderr_max_bytes.value)
            .max(64 * 1024),
    )
    .unwrap_or(usize::MAX);
    loop {
        let finished = exec
            .run_until(Some(Instant::now() + TICK), &mut aborts)
            .await?;
        serve(&listener, &mut exec, &mut carry, carry_cap);
        if finished {
            break;
        }
    }
    let unread = delta_reply(&mut exec, &mut carry, Status::Finished);
    let result = exec.finish();
    write_end(dir, &unread, &result);
    let _ = std::fs::remove_file(dir.join("sock"));
    Ok(())
}

/// `result.json`: the result, and the kept byte counts that its JSON form
/// leaves out (the truncation line of a rendered result needs them).
#[derive(Serialize, Deserialize)]
struct Stored {
    result: RunResult,
    stdout_kept_bytes: u64,
    stderr_kept_bytes: u64,
}

fn write_end(dir: &Path, unread: &ReadReply, result: &RunResult) {
    if let Ok(bytes) = serde_json::to_vec(unread) {
        let _ = write_atomic(&dir.join("unread.json"), &bytes);
    }
    let stored = Stored {
        result: result.clone(),
        stdout_kept_bytes: result.stdout.kept_bytes,
        stderr_kept_bytes: result.stderr.kept_bytes,
    };
    if let Ok(bytes) = serde_json::to_vec(&stored) {
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
    let Some(s) = supervisor(dir) else {
        return false;
    };
    if status(dir) != Status::Running {
        return false;
    }
    let seen = crate::sweep::Seen {
        pid: s.pid,
        start_time: s.start,
        pgrp: 0,
    };
    crate::sweep::signal_one(seen, nix::sys::signal::Signal::SIGTERM)
}
