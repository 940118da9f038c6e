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
use nix::sys::wait::waitpid;
use nix::unistd::{AccessFlags, Pid, access};
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;
use tokio::signal::unix::{SignalKind, signal};
use tokio::time::sleep_until;

use crate::error::Error;
use crate::output::{Delta, SpillDir, StreamCapture};
use crate::result::{RunResult, SandboxFacts, signal_name};
use crate::sandbox;
use crate::spawn::{SpawnRequest, spawn};
use crate::spec::{LiveOutput, Spec, StdinSource};
use crate::sweep::Tree;

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
    /// Hands the child's stdin pipe to the feeder thread, when there is a source.
    stdin: Option<std::sync::mpsc::SyncSender<File>>,
    spill_dir: SpillDir,
    sandbox: Option<sandbox::Prepared>,
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
        StdinSource::Inherited => Some(StdinFeed::Open(
            io::stdin()
                .as_fd()
                .try_clone_to_owned()
                .map(File::from)
                .map_err(|e| Error::StdinUnreadable {
                    path: "-".into(),
                    reason: e.to_string(),
                })?,
        )),
    };
    let stdin = stdin.map(start_feeder).transpose()?;
    let spill_dir = SpillDir::new(&spec.spill_dir.value)?;
    let sandbox = spec.sandbox.as_ref().map(sandbox::prepare).transpose()?;
    Ok(Prepared {
        shell,
        env,
        stdin,
        spill_dir,
        sandbox,
    })
}

/// Where the stdin bytes come from, opened (or checked) before the spawn.
enum StdinFeed {
    /// An open file (regular file, device, our own stdin).
    Open(File),
    /// A FIFO, opened by the feeder thread: opening one for reading waits
    /// for a writer, which must not hold up the run, its deadline or aborts.
    Fifo(PathBuf),
}

fn open_stdin_file(path: &Path) -> Result<StdinFeed, Error> {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let unreadable = |reason: String| Error::StdinUnreadable {
        path: path.to_path_buf(),
        reason,
    };
    let meta = std::fs::metadata(path).map_err(|e| unreadable(e.to_string()))?;
    if meta.is_dir() {
        return Err(unreadable("is a directory".into()));
    }
    if meta.file_type().is_fifo() {
        access(path, AccessFlags::R_OK).map_err(|e| unreadable(e.desc().into()))?;
        return Ok(StdinFeed::Fifo(path.to_path_buf()));
    }
    // O_NONBLOCK so that a device cannot hold up the open; reads block again.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| unreadable(e.to_string()))?;
    let flags = nix::fcntl::fcntl(&file, nix::fcntl::FcntlArg::F_GETFL)
        .map_err(|e| unreadable(e.desc().into()))?;
    let blocking = nix::fcntl::OFlag::from_bits_truncate(flags) & !nix::fcntl::OFlag::O_NONBLOCK;
    nix::fcntl::fcntl(&file, nix::fcntl::FcntlArg::F_SETFL(blocking))
        .map_err(|e| unreadable(e.desc().into()))?;
    Ok(StdinFeed::Open(file))
}

/// Starts the thread that copies the stdin source into the child's stdin
/// pipe once it is handed the pipe; started before the spawn, so a thread
/// that cannot be created is an error before anything runs. A child that
/// exits without reading gives EPIPE: not an error.
fn start_feeder(feed: StdinFeed) -> Result<std::sync::mpsc::SyncSender<File>, Error> {
    let (tx, rx) = std::sync::mpsc::sync_channel::<File>(1);
    std::thread::Builder::new()
        .name("stdin-feeder".into())
        .spawn(move || {
            let Ok(mut sink) = rx.recv() else { return };
            let source = match feed {
                StdinFeed::Open(f) => Ok(f),
                StdinFeed::Fifo(path) => File::open(path),
            };
            if let Ok(mut source) = source {
                let _ = io::copy(&mut source, &mut sink);
            }
        })
        .map_err(|e| Error::SpawnFailed(format!("cannot start the stdin thread: {e}")))?;
    Ok(tx)
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

/// SIGINT, SIGTERM and SIGHUP sent to this process, as abort requests, and
/// the other signals whose default action would end it without cleaning up
/// (SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM), so that no signal short of SIGKILL
/// leaves the command's tree behind.
///
/// Installing replaces the default action of those signals (termination) for
/// the whole process, which is what the `dsh-exec` binary wants.
pub struct AbortSignals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
    quit: tokio::signal::unix::Signal,
    usr1: tokio::signal::unix::Signal,
    usr2: tokio::signal::unix::Signal,
    alrm: tokio::signal::unix::Signal,
}

impl AbortSignals {
    /// Installs the handlers. Must be called within a tokio runtime.
    pub fn install() -> io::Result<AbortSignals> {
        Ok(AbortSignals {
            int: signal(SignalKind::interrupt())?,
            term: signal(SignalKind::terminate())?,
            hup: signal(SignalKind::hangup())?,
            quit: signal(SignalKind::quit())?,
            usr1: signal(SignalKind::user_defined1())?,
            usr2: signal(SignalKind::user_defined2())?,
            alrm: signal(SignalKind::alarm())?,
        })
    }
}

impl AbortSource for AbortSignals {
    async fn next(&mut self) -> String {
        let sig = tokio::select! {
            biased;
            _ = self.int.recv() => Signal::SIGINT,
            _ = self.term.recv() => Signal::SIGTERM,
            _ = self.hup.recv() => Signal::SIGHUP,
            _ = self.quit.recv() => Signal::SIGQUIT,
            _ = self.usr1.recv() => Signal::SIGUSR1,
            _ = self.usr2.recv() => Signal::SIGUSR2,
            _ = self.alrm.recv() => Signal::SIGALRM,
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
    /// The command has the terminal (its process group is the foreground one).
    interactive: bool,
    /// Where output is copied live (`--stream`).
    live: Live,
    out: StreamCapture,
    err: StreamCapture,
    /// Read buffers, allocated once per run (a supervisor drives the run in
    /// short slices).
    out_buf: Vec<u8>,
    err_buf: Vec<u8>,
    spill_dir: SpillDir,
    sigchld: tokio::signal::unix::Signal,
    tree: Tree,
    /// Sandbox facts known before the run (`denied` is decided at the end).
    sandbox: Option<SandboxFacts>,
    /// Values the configuration file's caps lowered, for the result.
    capped: Vec<String>,
    exit: Option<Exit>,
    cause: Option<Cause>,
    phase: Phase,
    reaped: bool,
}

/// Where a run is in its life; each phase names the instant that ends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// The direct child runs.
    Running,
    /// The direct child exited: the pipes are read for leftovers' output
    /// until they close or `until` ([`DRAIN`]) passes.
    Draining { until: Instant },
    /// SIGTERM was sent to the group and the tree: SIGKILL follows at
    /// `kill_at` unless every process is gone first.
    Terminating { kill_at: Instant },
    /// SIGKILL was sent: the pipes are read for bytes already written until
    /// they close or `until` ([`FINAL_READ`]) passes.
    Killed { until: Instant },
    /// Nothing of the run is left; the result can be built.
    Done,
}

/// The live copy of the output for `--stream`. Writes block (a slow reader
/// slows the run, as with `tee`); a write error (a closed stdout) ends the
/// copy to that target, never the run.
struct Live {
    target: Option<LiveOutput>,
    stdout_ok: bool,
    stderr_ok: bool,
}

impl Live {
    fn new(target: Option<LiveOutput>) -> Live {
        Live {
            target,
            stdout_ok: true,
            stderr_ok: true,
        }
    }

    fn copy(&mut self, bytes: &[u8], from_stderr: bool) {
        use std::io::Write;
        let to_stderr = match self.target {
            None => return,
            Some(LiveOutput::Stderr) => true,
            Some(LiveOutput::Mirrored) => from_stderr,
        };
        if to_stderr && self.stderr_ok {
            let mut e = io::stderr().lock();
            self.stderr_ok = e.write_all(bytes).and_then(|_| e.flush()).is_ok();
        } else if !to_stderr && self.stdout_ok {
            let mut o = io::stdout().lock();
            self.stdout_ok = o.write_all(bytes).and_then(|_| o.flush()).is_ok();
        }
    }
}

/// How often the tree is re-read while waiting for it to die, since the
/// death of a grandchild sends no signal here.
const TREE_POLL: Duration = Duration::from_millis(20);

/// Either a started command, or the result of a run whose command never
/// ran: its deadline passed during preparation, or confining the child
/// failed (`sandbox.runner_failed`).
pub enum Started {
    /// The command runs: drive it with [`Execution::wait`] or [`Execution::run_until`].
    Running(Box<Execution>),
    /// The command never ran; this is its result.
    NotRun(Box<RunResult>),
}

/// The result of a run whose command never ran, with `stderr_note` as its
/// stderr text.
fn not_run(spec: &Spec, started: Instant, stderr_note: &str) -> RunResult {
    let mut stderr = StreamCapture::new("stderr", u64::MAX);
    stderr.push_text(stderr_note);
    RunResult {
        command: spec.script.clone(),
        workdir: spec.workdir.value.clone(),
        exit_code: None,
        signal: None,
        timed_out: false,
        aborted: false,
        aborted_by: None,
        timeout_ms: spec.timeout.value.map(|t| t.as_millis() as u64),
        capped: spec.capped_notes(),
        duration_ms: started.elapsed().as_millis() as u64,
        stdout: StreamCapture::new("stdout", 0).finish(),
        stderr: stderr.finish(),
        sandbox: None,
    }
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
    let facts = |runner_failed| {
        spec.sandbox
            .as_ref()
            .zip(prepared.sandbox.as_ref())
            .map(|(policy, p)| sandbox::facts(policy, &p.enforcement, runner_failed, false))
    };
    if deadline.is_some_and(|d| Instant::now() >= d) {
        let mut result = not_run(spec, started, "");
        result.timed_out = true;
        result.sandbox = facts(false);
        return Ok(Started::NotRun(Box::new(result)));
    }
    let tree = Tree::before_spawn();
    // Registered before the spawn so that the child's exit cannot be missed.
    let sigchld = signal(SignalKind::child()).map_err(|e| Error::SpawnFailed(e.to_string()))?;

    let spawned = spawn(&SpawnRequest {
        shell: &prepared.shell,
        script: &spec.script,
        workdir: &spec.workdir.value,
        env: &prepared.env,
        confine: prepared
            .sandbox
            .as_ref()
            .and_then(|p| p.confinement.as_ref()),
        interactive: spec.interactive,
        pid_namespace: spec.pid_namespace,
    });
    let spawned = match spawned {
        Ok(s) => s,
        Err(e) if e.confinement => {
            let note =
                format!("dsh-exec: the sandbox runner failed, the command did not run: {e}\n");
            let mut result = not_run(spec, started, &note);
            result.sandbox = facts(true);
            return Ok(Started::NotRun(Box::new(result)));
        }
        Err(e) => return Err(Error::SpawnFailed(e.to_string())),
    };
    let pid = Pid::from_raw(spawned.pid);

    // Without a source the pipe's write end is dropped here: end-of-file.
    if let (Some(feeder), Some(sink)) = (prepared.stdin, spawned.stdin) {
        let _ = feeder.send(File::from(sink));
    }
    let stdout = spawned.stdout.map(receiver).transpose()?;
    let stderr = spawned.stderr.map(receiver).transpose()?;

    Ok(Started::Running(Box::new(Execution {
        pid,
        command: spec.script.clone(),
        workdir: spec.workdir.value.clone(),
        started,
        timeout: spec.timeout.value,
        deadline,
        kill_after: spec.kill_after.value,
        stdout,
        stderr,
        interactive: spec.interactive,
        live: Live::new(spec.stream),
        out_buf: vec![0u8; READ_CHUNK],
        err_buf: vec![0u8; READ_CHUNK],
        out: StreamCapture::new("stdout", spec.stdout_max_bytes.value),
        err: StreamCapture::new("stderr", spec.stderr_max_bytes.value),
        spill_dir: prepared.spill_dir,
        sigchld,
        tree,
        sandbox: facts(false),
        capped: spec.capped_notes(),
        exit: None,
        cause: None,
        phase: Phase::Running,
        reaped: false,
    })))
}

/// How `pid` ended, if it has, leaving it a zombie (waitid(2) with
/// `WEXITED | WNOHANG | WNOWAIT`). Read from the raw `siginfo_t`, so that a
/// death by any signal, real-time ones included, is understood.
fn exited_status(pid: Pid) -> io::Result<Option<Exit>> {
    use nix::libc;
    // SAFETY: waitid fills the zeroed siginfo_t we own.
    let info = unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let flags = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
        if libc::waitid(libc::P_PID, pid.as_raw() as libc::id_t, &mut info, flags) == -1 {
            return Err(io::Error::last_os_error());
        }
        info
    };
    // SAFETY: the fields of a SIGCHLD siginfo_t filled by waitid.
    let (si_pid, status) = unsafe { (info.si_pid(), info.si_status()) };
    if si_pid == 0 {
        return Ok(None);
    }
    Ok(match info.si_code {
        libc::CLD_EXITED => Some(Exit::Code(status)),
        libc::CLD_KILLED | libc::CLD_DUMPED => Some(Exit::Signal(status)),
        _ => None,
    })
}

/// Makes this process's group the terminal's foreground group again after
/// an interactive run. From a background group tcsetpgrp(3) raises SIGTTOU,
/// which is blocked around the call.
fn take_back_terminal() {
    use nix::sys::signal::{SigSet, SigmaskHow, sigprocmask};
    let mut ttou = SigSet::empty();
    ttou.add(Signal::SIGTTOU);
    let mut old = SigSet::empty();
    if sigprocmask(SigmaskHow::SIG_BLOCK, Some(&ttou), Some(&mut old)).is_ok() {
        let _ = nix::unistd::tcsetpgrp(io::stdin(), nix::unistd::getpgrp());
        let _ = sigprocmask(SigmaskHow::SIG_SETMASK, Some(&old), None);
    }
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

    /// True once the direct child has exited, both pipes are closed (or their
    /// reading was cut off) and nothing the command started is left.
    pub fn is_finished(&self) -> bool {
        self.phase == Phase::Done
    }

    /// The spill files of (stdout, stderr), once the streams outgrew their budgets.
    pub fn spill_paths(&self) -> (Option<&Path>, Option<&Path>) {
        (self.out.spill_path(), self.err.spill_path())
    }

    /// Consumes the output produced since the previous call: (stdout, stderr).
    pub fn read_delta(&mut self) -> (Delta, Delta) {
        (self.out.read_delta(), self.err.read_delta())
    }

    fn pipes_closed(&self) -> bool {
        self.stdout.is_none() && self.stderr.is_none()
    }

    /// Drives the run until it finishes (`Ok(true)`) or `until` passes
    /// (`Ok(false)`), capturing output and applying the deadline, aborts, the
    /// drain and the sweep of leftovers.
    ///
    /// Errors with [`Error::SupervisionFailed`] when the child's status
    /// cannot be read.
    pub async fn run_until(
        &mut self,
        until: Option<Instant>,
        aborts: &mut impl AbortSource,
    ) -> Result<bool, Error> {
        // A status change may predate this call (or the signal registration).
        self.poll_exit()?;
        self.advance();
        while !self.is_finished() {
            let (phase_end, poll) = match self.phase {
                Phase::Running => (self.deadline, None),
                Phase::Draining { until } => (Some(until), None),
                Phase::Terminating { kill_at } => (Some(kill_at), Some(Instant::now() + TREE_POLL)),
                // Without the direct child's exit there is nothing to cut
                // short: wait for it (SIGKILL cannot be caught).
                Phase::Killed { until } => {
                    (self.exit.map(|_| until), Some(Instant::now() + TREE_POLL))
                }
                Phase::Done => break,
            };
            tokio::select! {
                r = read_from(&mut self.stdout, &mut self.out_buf) => match r {
                    Ok(n) if n > 0 => {
                        self.live.copy(&self.out_buf[..n], false);
                        self.out.push(&self.out_buf[..n], &mut self.spill_dir);
                    }
                    _ => self.stdout = None,
                },
                r = read_from(&mut self.stderr, &mut self.err_buf) => match r {
                    Ok(n) if n > 0 => {
                        self.live.copy(&self.err_buf[..n], true);
                        self.err.push(&self.err_buf[..n], &mut self.spill_dir);
                    }
                    _ => self.stderr = None,
                },
                _ = self.sigchld.recv() => {
                    self.poll_exit()?;
                    self.tree.reap_orphans(self.pid.as_raw());
                }
                _ = sleep_opt(phase_end) => self.phase_ended(),
                _ = sleep_opt(poll) => {
                    if matches!(self.phase, Phase::Killed { .. }) {
                        // Catch what was forked while SIGKILL was on its way.
                        self.tree.signal(&self.tree.live(), Signal::SIGKILL);
                    }
                }
                name = aborts.next() => self.abort(name),
                _ = sleep_opt(until) => return Ok(false),
            }
            self.advance();
        }
        Ok(true)
    }

    /// The current phase's end instant has passed.
    fn phase_ended(&mut self) {
        match self.phase {
            Phase::Running => {
                self.cause = Some(Cause::Timeout);
                self.terminate();
            }
            Phase::Draining { .. } => self.terminate(),
            Phase::Terminating { .. } => self.kill(),
            Phase::Killed { .. } => {
                if self.exit.is_some() {
                    // A holder of the pipes survived SIGKILL (or escaped the
                    // sweep): stop reading, keep what was read.
                    self.stdout = None;
                    self.stderr = None;
                    self.phase = Phase::Done;
                }
            }
            Phase::Done => {}
        }
    }

    /// Moves to the next phase when the current one's goal is reached.
    fn advance(&mut self) {
        if self.exit.is_none() || !self.pipes_closed() {
            if self.phase == Phase::Running && self.exit.is_some() {
                self.phase = Phase::Draining {
                    until: self.bounded_by_deadline(Instant::now() + DRAIN),
                };
            }
            return;
        }
        // The direct child has exited and the pipes are closed.
        match self.phase {
            Phase::Running | Phase::Draining { .. } => {
                if self.tree.live().is_empty() {
                    self.phase = Phase::Done;
                } else {
                    self.terminate();
                }
            }
            Phase::Terminating { .. } | Phase::Killed { .. } => {
                if self.tree.live().is_empty() {
                    self.phase = Phase::Done;
                }
            }
            Phase::Done => {}
        }
    }

    /// Drives the run to its end and returns the foreground result.
    pub async fn wait(mut self, aborts: &mut impl AbortSource) -> Result<RunResult, Error> {
        self.run_until(None, aborts).await?;
        Ok(self.finish())
    }

    fn abort(&mut self, name: String) {
        match self.phase {
            Phase::Running => {
                self.cause = Some(Cause::Abort(name));
                self.terminate();
            }
            Phase::Draining { .. } | Phase::Terminating { .. } => self.kill(),
            Phase::Killed { .. } | Phase::Done => {}
        }
    }

    fn poll_exit(&mut self) -> Result<(), Error> {
        if self.exit.is_some() {
            return Ok(());
        }
        self.exit = exited_status(self.pid)
            .map_err(|e| Error::SupervisionFailed(format!("waitid: {e}")))?;
        Ok(())
    }

    /// SIGTERM (and SIGCONT, so a stopped process sees it) to the group and
    /// to every process of the tree; SIGKILL follows after the grace period.
    fn terminate(&mut self) {
        let _ = killpg(self.pid, Signal::SIGTERM);
        let _ = killpg(self.pid, Signal::SIGCONT);
        // Members of the group got it from killpg: one SIGTERM each (a
        // second could run a TERM trap twice).
        let outside: Vec<_> = self
            .tree
            .live()
            .into_iter()
            .filter(|p| p.pgrp != self.pid.as_raw())
            .collect();
        self.tree.signal(&outside, Signal::SIGTERM);
        self.tree.signal(&outside, Signal::SIGCONT);
        let kill_at = Instant::now() + self.kill_after;
        self.phase = Phase::Terminating {
            kill_at: if self.exit.is_some() {
                self.bounded_by_deadline(kill_at)
            } else {
                kill_at
            },
        };
    }

    /// Leftovers of a command that has exited get no time past the run's
    /// deadline: `at`, or the deadline if that comes first.
    fn bounded_by_deadline(&self, at: Instant) -> Instant {
        match self.deadline {
            Some(d) => at.min(d.max(Instant::now())),
            None => at,
        }
    }

    /// SIGKILL to the group and to every process of the tree.
    fn kill(&mut self) {
        let _ = killpg(self.pid, Signal::SIGKILL);
        self.tree.signal(&self.tree.live(), Signal::SIGKILL);
        self.phase = Phase::Killed {
            until: Instant::now() + FINAL_READ,
        };
    }

    /// Ends the run: kills what is left in the group, reaps the direct child,
    /// removes an unused spill directory, and builds the result. Called on a
    /// run that has not finished, it kills the command's whole tree first.
    pub fn finish(mut self) -> RunResult {
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
        let sandbox = self.sandbox.clone().map(|mut facts| {
            let mode = match facts.mode.as_str() {
                "read-only" => sandbox::Mode::ReadOnly,
                "workspace-write" => sandbox::Mode::WorkspaceWrite,
                _ => sandbox::Mode::FullAccess,
            };
            facts.denied = sandbox::looks_denied(mode, exit_code != Some(0), &out.text, &err.text);
            facts
        });
        RunResult {
            command: self.command.clone(),
            workdir: self.workdir.clone(),
            exit_code,
            signal,
            timed_out: self.cause == Some(Cause::Timeout),
            aborted: aborted_by.is_some(),
            aborted_by,
            timeout_ms: self.timeout.map(|t| t.as_millis() as u64),
            capped: std::mem::take(&mut self.capped),
            duration_ms: self.started.elapsed().as_millis() as u64,
            stdout: out,
            stderr: err,
            sandbox,
        }
    }

    /// Kills whatever is left (nothing, after a finished run), reaps the
    /// orphans and then the direct child, once. While the direct child is
    /// unreaped its pid cannot be reused, so the group id still names ours.
    fn release(&mut self) {
        if self.reaped {
            return;
        }
        let _ = killpg(self.pid, Signal::SIGKILL);
        if self.phase != Phase::Done {
            // Dropped mid-run: a finished run has just found its tree empty.
            self.tree.signal(&self.tree.live(), Signal::SIGKILL);
        }
        self.tree.reap_orphans(self.pid.as_raw());
        let _ = waitpid(self.pid, None);
        self.reaped = true;
        if self.interactive {
            take_back_terminal();
        }
    }
}

impl Drop for Execution {
    /// A handle dropped before its end (a cancelled future) still kills the
    /// group and reaps the child: nothing is left running.
    fn drop(&mut self) {
        self.release();
    }
}
