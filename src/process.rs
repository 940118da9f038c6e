//! Spawning and supervising the command: session, deadline, escalation, drain.
//!
//! One spawn path ([`start`]) yields an [`Execution`] handle. The foreground
//! result ([`Execution::wait`]) and incremental background reads
//! ([`Execution::run_until`] plus [`Execution::read_delta`]) are projections of
//! that one handle.
//!
//! The command runs as `bash -c SCRIPT`, the leader of a new session (so of a
//! new process group, with no controlling terminal), started by
//! [`crate::spawn`]. Its exit is observed with
//! `waitid(WEXITED | WNOWAIT)`, which leaves it a zombie until the run ends:
//! its pid, and so the process-group id, cannot be reused by an unrelated
//! process while `dsh-exec` may still signal the group (kill(2), waitid(2)).

use std::ffi::OsString;
use std::fs::File;
use std::future::{Future, pending};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid, waitpid};
use nix::unistd::{AccessFlags, Pid, access};
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;
use tokio::signal::unix::{SignalKind, signal};
use tokio::time::sleep_until;

use crate::error::Error;
use crate::output::{Delta, SpillDir, StreamCapture};
use crate::result::{RunResult, signal_name};
use crate::spawn::{SpawnRequest, spawn};
use crate::spec::{Spec, StdinSource};

/// How long the pipes are still read after the direct child exited, for
/// output of processes it left behind (a `tee` in a process substitution),
/// before those are sent SIGTERM: 250 ms.
pub const DRAIN: Duration = Duration::from_millis(250);

/// How long the pipes are still read after SIGKILL was sent to the group, for
/// bytes already in the pipe buffers: 100 ms. A process that escaped the group
/// and still holds a pipe open cannot hold the run beyond this.
pub const FINAL_READ: Duration = Duration::from_millis(100);

/// Used to find `bash` when the child environment has no `PATH`.
pub const FALLBACK_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

const READ_CHUNK: usize = 64 * 1024;

/// The first executable `bash` on the child environment's `PATH` (else
/// [`FALLBACK_PATH`]).
pub fn find_shell(env: &[(OsString, OsString)]) -> Option<PathBuf> {
    let path = env
        .iter()
        .rev()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| FALLBACK_PATH.into());
    path.as_bytes()
        .split(|b| *b == b':')
        .filter(|dir| !dir.is_empty())
        .map(|dir| Path::new(std::ffi::OsStr::from_bytes(dir)).join("bash"))
        .find(|p| p.is_file() && access(p, AccessFlags::X_OK).is_ok())
}

/// Everything checked and opened before the spawn.
struct Prepared {
    shell: PathBuf,
    env: Vec<(OsString, OsString)>,
    stdin: Option<File>,
    spill_dir: SpillDir,
}

fn prepare(spec: &Spec) -> Result<Prepared, Error> {
    let workdir = &spec.workdir.value;
    let unusable = |reason: String| Error::WorkdirUnusable {
        path: workdir.clone(),
        reason,
    };
    match std::fs::metadata(workdir) {
        Ok(m) if !m.is_dir() => return Err(unusable("not a directory".into())),
        Ok(_) => access(workdir, AccessFlags::X_OK)
            .map_err(|e| unusable(format!("cannot be entered: {}", e.desc())))?,
        Err(e) => return Err(unusable(e.to_string())),
    }
    let env = spec.env.child_env();
    let shell = find_shell(&env).ok_or(Error::ShellNotFound)?;
    let stdin = match &spec.stdin.value {
        StdinSource::Closed => None,
        StdinSource::File(path) => Some(open_stdin_file(path)?),
        StdinSource::Inherited => Some(
            io::stdin()
                .as_fd()
                .try_clone_to_owned()
                .map(File::from)
                .map_err(|e| Error::StdinUnreadable {
                    path: "-".into(),
                    reason: e.to_string(),
                })?,
        ),
    };
    let spill_dir = SpillDir::new(&spec.spill_dir.value)?;
    Ok(Prepared {
        shell,
        env,
        stdin,
        spill_dir,
    })
}

fn open_stdin_file(path: &Path) -> Result<File, Error> {
    let unreadable = |reason: String| Error::StdinUnreadable {
        path: path.to_path_buf(),
        reason,
    };
    let file = File::open(path).map_err(|e| unreadable(e.to_string()))?;
    match file.metadata() {
        Ok(m) if m.is_dir() => Err(unreadable("is a directory".into())),
        Ok(_) => Ok(file),
        Err(e) => Err(unreadable(e.to_string())),
    }
}

/// A source of abort requests: each value names the cause (for signals, the
/// signal name such as `SIGINT`). The first request starts the SIGTERM →
/// grace → SIGKILL escalation; a further one sends SIGKILL at once.
pub trait AbortSource {
    /// Resolves with the next abort request; may never resolve.
    fn next(&mut self) -> impl Future<Output = String>;
}

/// No abort source: the run ends only by itself or by its deadline.
pub struct NoAbort;

impl AbortSource for NoAbort {
    async fn next(&mut self) -> String {
        pending().await
    }
}

/// SIGINT, SIGTERM and SIGHUP sent to this process, as abort requests.
///
/// Installing replaces the default action of those signals (termination) for
/// the whole process, which is what the `dsh-exec` binary wants.
pub struct AbortSignals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl AbortSignals {
    /// Installs the handlers. Must be called within a tokio runtime.
    pub fn install() -> io::Result<AbortSignals> {
        Ok(AbortSignals {
            int: signal(SignalKind::interrupt())?,
            term: signal(SignalKind::terminate())?,
            hup: signal(SignalKind::hangup())?,
        })
    }
}

impl AbortSource for AbortSignals {
    async fn next(&mut self) -> String {
        let sig = tokio::select! {
            _ = self.int.recv() => Signal::SIGINT,
            _ = self.term.recv() => Signal::SIGTERM,
            _ = self.hup.recv() => Signal::SIGHUP,
        };
        sig.as_str().to_string()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Cause {
    Timeout,
    Abort(String),
}

/// How the direct child ended: exit code or terminating signal number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Exit {
    Code(i32),
    Signal(i32),
}

/// A running (or finished) command and its output captures.
pub struct Execution {
    pid: Pid,
    command: String,
    workdir: PathBuf,
    started: Instant,
    timeout: Option<Duration>,
    deadline: Option<Instant>,
    kill_after: Duration,
    stdout: Option<pipe::Receiver>,
    stderr: Option<pipe::Receiver>,
    out: StreamCapture,
    err: StreamCapture,
    spill_dir: SpillDir,
    sigchld: tokio::signal::unix::Signal,
    exit: Option<Exit>,
    cause: Option<Cause>,
    term_sent: Option<Instant>,
    kill_sent: Option<Instant>,
    exited_at: Option<Instant>,
    reaped: bool,
}

/// Either a started command, or a run whose deadline passed during
/// preparation (nothing was spawned).
pub enum Started {
    Running(Box<Execution>),
    ExpiredBeforeSpawn(Box<RunResult>),
}

fn receiver(fd: OwnedFd) -> Result<pipe::Receiver, Error> {
    pipe::Receiver::from_owned_fd(fd).map_err(|e| Error::SpawnFailed(e.to_string()))
}

/// Prepares and spawns the command of `spec`; the deadline counts from `started`.
///
/// Must be called within a tokio runtime with IO and time enabled. Errors with
/// the infrastructure failures of [`Error`]; nothing runs when it errors.
pub fn start(spec: &Spec, started: Instant) -> Result<Started, Error> {
    let deadline = spec.timeout.value.map(|t| started + t);
    let prepared = prepare(spec)?;
    if deadline.is_some_and(|d| Instant::now() >= d) {
        let empty = || StreamCapture::new("", 0).finish();
        return Ok(Started::ExpiredBeforeSpawn(Box::new(RunResult {
            command: spec.script.clone(),
            workdir: spec.workdir.value.clone(),
            exit_code: None,
            signal: None,
            timed_out: true,
            aborted: false,
            aborted_by: None,
            timeout_ms: spec.timeout.value.map(|t| t.as_millis() as u64),
            duration_ms: started.elapsed().as_millis() as u64,
            stdout: empty(),
            stderr: empty(),
            sandbox: None,
        })));
    }
    // Registered before the spawn so that the child's exit cannot be missed.
    let sigchld = signal(SignalKind::child()).map_err(|e| Error::SpawnFailed(e.to_string()))?;

    let spawned = spawn(&SpawnRequest {
        shell: &prepared.shell,
        script: &spec.script,
        workdir: &spec.workdir.value,
        env: &prepared.env,
    })
    .map_err(|e| Error::SpawnFailed(e.to_string()))?;
    let pid = Pid::from_raw(spawned.pid);

    // Without a source the pipe's write end is dropped here: end-of-file.
    if let Some(mut source) = prepared.stdin {
        let mut sink = File::from(spawned.stdin);
        // A child that exits without reading gives EPIPE: not an error.
        std::thread::spawn(move || {
            let _ = io::copy(&mut source, &mut sink);
        });
    }
    let stdout = receiver(spawned.stdout)?;
    let stderr = receiver(spawned.stderr)?;

    Ok(Started::Running(Box::new(Execution {
        pid,
        command: spec.script.clone(),
        workdir: spec.workdir.value.clone(),
        started,
        timeout: spec.timeout.value,
        deadline,
        kill_after: spec.kill_after.value,
        stdout: Some(stdout),
        stderr: Some(stderr),
        out: StreamCapture::new("stdout", spec.stdout_max_bytes.value),
        err: StreamCapture::new("stderr", spec.stderr_max_bytes.value),
        spill_dir: prepared.spill_dir,
        sigchld,
        exit: None,
        cause: None,
        term_sent: None,
        kill_sent: None,
        exited_at: None,
        reaped: false,
    })))
}

async fn read_from(pipe: &mut Option<pipe::Receiver>, buf: &mut [u8]) -> io::Result<usize> {
    match pipe {
        Some(p) => p.read(buf).await,
        None => pending().await,
    }
}

async fn sleep_opt(at: Option<Instant>) {
    match at {
        Some(t) => sleep_until(t.into()).await,
        None => pending().await,
    }
}

impl Execution {
    /// The process id of the direct child (`bash`), also its process-group id.
    pub fn pid(&self) -> i32 {
        self.pid.as_raw()
    }

    /// True once the direct child has exited and both pipes are closed.
    pub fn is_finished(&self) -> bool {
        self.exit.is_some() && self.stdout.is_none() && self.stderr.is_none()
    }

    /// Consumes the output produced since the previous call: (stdout, stderr).
    pub fn read_delta(&mut self) -> (Delta, Delta) {
        (self.out.read_delta(), self.err.read_delta())
    }

    /// Drives the run until it finishes (`Ok(true)`) or `until` passes
    /// (`Ok(false)`), capturing output and applying the deadline, aborts and
    /// the leftover drain.
    ///
    /// Errors with [`Error::SupervisionFailed`] when the child's status
    /// cannot be read.
    pub async fn run_until(
        &mut self,
        until: Option<Instant>,
        aborts: &mut impl AbortSource,
    ) -> Result<bool, Error> {
        let mut out_buf = vec![0u8; READ_CHUNK];
        let mut err_buf = vec![0u8; READ_CHUNK];
        // A status change may predate this call (or the signal registration).
        self.poll_exit()?;
        while !self.is_finished() {
            let deadline = match (&self.cause, self.exit) {
                (None, None) => self.deadline,
                _ => None,
            };
            let grace_end = match self.kill_sent {
                None => self.term_sent.map(|t| t + self.kill_after),
                Some(_) => None,
            };
            let drain_end = match self.term_sent {
                None => self.exited_at.map(|t| t + DRAIN),
                Some(_) => None,
            };
            let final_read_end = self.kill_sent.map(|t| t + FINAL_READ);
            tokio::select! {
                r = read_from(&mut self.stdout, &mut out_buf) => match r {
                    Ok(n) if n > 0 => self.out.push(&out_buf[..n], &mut self.spill_dir),
                    _ => self.stdout = None,
                },
                r = read_from(&mut self.stderr, &mut err_buf) => match r {
                    Ok(n) if n > 0 => self.err.push(&err_buf[..n], &mut self.spill_dir),
                    _ => self.stderr = None,
                },
                _ = self.sigchld.recv(), if self.exit.is_none() => self.poll_exit()?,
                _ = sleep_opt(deadline) => {
                    self.cause = Some(Cause::Timeout);
                    self.terminate();
                }
                _ = sleep_opt(grace_end) => self.kill(),
                _ = sleep_opt(drain_end) => self.terminate(),
                _ = sleep_opt(final_read_end), if self.exit.is_some() => {
                    self.stdout = None;
                    self.stderr = None;
                }
                name = aborts.next() => self.abort(name),
                _ = sleep_opt(until) => return Ok(false),
            }
        }
        Ok(true)
    }

    /// Drives the run to its end and returns the foreground result.
    pub async fn wait(mut self, aborts: &mut impl AbortSource) -> Result<RunResult, Error> {
        self.run_until(None, aborts).await?;
        Ok(self.finish())
    }

    fn abort(&mut self, name: String) {
        if self.cause.is_none() && self.exit.is_none() {
            self.cause = Some(Cause::Abort(name));
            self.terminate();
        } else {
            self.kill();
        }
    }

    fn poll_exit(&mut self) -> Result<(), Error> {
        if self.exit.is_some() {
            return Ok(());
        }
        let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
        let exit = match waitid(Id::Pid(self.pid), flags) {
            Ok(WaitStatus::Exited(_, code)) => Exit::Code(code),
            Ok(WaitStatus::Signaled(_, sig, _)) => Exit::Signal(sig as i32),
            Ok(_) => return Ok(()),
            Err(e) => return Err(Error::SupervisionFailed(format!("waitid: {}", e.desc()))),
        };
        self.exit = Some(exit);
        self.exited_at = Some(Instant::now());
        Ok(())
    }

    /// SIGTERM (and SIGCONT, so a stopped process sees it) to the group, once.
    fn terminate(&mut self) {
        if self.term_sent.is_none() {
            let _ = killpg(self.pid, Signal::SIGTERM);
            let _ = killpg(self.pid, Signal::SIGCONT);
            self.term_sent = Some(Instant::now());
        }
    }

    /// SIGKILL to the group, once.
    fn kill(&mut self) {
        if self.kill_sent.is_none() {
            let _ = killpg(self.pid, Signal::SIGKILL);
            self.kill_sent = Some(Instant::now());
        }
    }

    /// Ends the run: kills what is left in the group, reaps the direct child,
    /// removes an unused spill directory, and builds the result.
    fn finish(mut self) -> RunResult {
        self.release();
        let (exit_code, signal) = match self.exit {
            Some(Exit::Code(c)) => (Some(c), None),
            Some(Exit::Signal(s)) => (None, Some(signal_name(s))),
            None => (None, None),
        };
        let aborted_by = match &self.cause {
            Some(Cause::Abort(name)) => Some(name.clone()),
            _ => None,
        };
        let out = std::mem::replace(&mut self.out, StreamCapture::new("", 0)).finish();
        let err = std::mem::replace(&mut self.err, StreamCapture::new("", 0)).finish();
        if out.spill_path.is_none() && err.spill_path.is_none() {
            // Created, but no spill file could be opened in it.
            self.spill_dir.remove_if_empty();
        }
        RunResult {
            command: self.command.clone(),
            workdir: self.workdir.clone(),
            exit_code,
            signal,
            timed_out: self.cause == Some(Cause::Timeout),
            aborted: aborted_by.is_some(),
            aborted_by,
            timeout_ms: self.timeout.map(|t| t.as_millis() as u64),
            duration_ms: self.started.elapsed().as_millis() as u64,
            stdout: out,
            stderr: err,
            sandbox: None,
        }
    }

    /// Kills the group and reaps the direct child, once. While the child is
    /// unreaped its pid cannot be reused, so the group id still names ours.
    fn release(&mut self) {
        if self.reaped {
            return;
        }
        self.kill();
        let _ = waitpid(self.pid, None);
        self.reaped = true;
    }
}

impl Drop for Execution {
    /// A handle dropped before its end (a cancelled future) still kills the
    /// group and reaps the child: nothing is left running.
    fn drop(&mut self) {
        self.release();
    }
}
