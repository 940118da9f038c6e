//! The supervision loop: one running command, driven to its end.
//!
//! An [`Execution`] joins four parts: what the result will report
//! ([`Report`]), the command's processes ([`CommandProcs`]), the phase
//! machine ([`Phases`]) and the output pipes ([`Streams`]). The loop waits
//! on the pipes, SIGCHLD, the phase's end, a poll of the tree, aborts and
//! the caller's slice end, and after every event lets the machine advance.
//! The foreground result ([`Execution::wait`]) and incremental background
//! reads ([`Execution::run_until`] plus [`Execution::read_delta`]) are
//! projections of this one handle.

use std::future::pending;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tokio::time::sleep_until;

use super::abort::AbortSource;
use super::phases::{Cause, Effect, Phases, Processes};
use super::procs::{CommandProcs, Exit};
use super::streams::Streams;
use crate::capture::Delta;
use crate::error::Error;
use crate::result::{RunResult, SandboxFacts, TimeoutKind};
use crate::sandbox::AfterRun;
use crate::sandbox::denial::{self, DenialFact, MAX_DENIALS};
use crate::sandbox::gate::Gate;

/// The facts of a run known before it starts, for its result.
pub(crate) struct Report {
    /// `RUSAGE_CHILDREN` before the spawn, to count this run's usage.
    pub(crate) usage_before: (u64, u64, u64),
    /// How the text fields are rendered (after the denials are read from
    /// the raw text).
    pub(crate) render: crate::spec::Render,
    pub(crate) command: String,
    pub(crate) workdir: PathBuf,
    pub(crate) started: Instant,
    pub(crate) timeout: Option<Duration>,
    /// `--idle-timeout`.
    pub(crate) idle_timeout: Option<Duration>,
    /// Values the configuration file's caps lowered.
    pub(crate) capped: Vec<String>,
    /// The names scrubbed from the environment (`env_scrubbed`).
    pub(crate) env_scrubbed: Vec<String>,
    /// Sandbox facts (`denied` is decided at the end).
    pub(crate) sandbox: Option<SandboxFacts>,
    /// What to check and undo of protected paths once the tree is gone.
    pub(crate) after_run: Option<AfterRun>,
    /// What judging the output's refusals needs.
    pub(crate) denial_context: Option<denial::Context>,
    /// The run's transaction (`--transaction`): its layers, what happens
    /// at its end, and the paths `commit` never writes.
    pub(crate) transaction: Option<(
        crate::sandbox::overlay::Overlays,
        crate::sandbox::overlay::OnExit,
        Vec<PathBuf>,
    )>,
}

/// Whether the gate refused a metadata change (chmod, chown, times,
/// xattrs) outside the writable roots that this user could not have made
/// unconfined either (not its file): the command met the refusal it would
/// have met anyway, so it is no denial of the sandbox (nor would any flag
/// allow it).
fn refused_unconfined_too(d: &crate::sandbox::gate::Denial) -> bool {
    d.why == crate::sandbox::gate::Refusal::OutsideRoots
        && ["chmod", "chown", "utime", "xattr"].contains(&d.op)
        && d.path
            .as_ref()
            .is_some_and(|p| !denial::this_user_may_change(d.op, p))
}

/// A refusal of the gate, as the result reports it.
fn gate_fact(
    d: &crate::sandbox::gate::Denial,
    ctx: Option<&denial::Context>,
    policy: crate::sandbox::Network,
) -> DenialFact {
    use crate::sandbox::gate::Refusal;
    let network = d.why.is_network();
    let hint = match d.why {
        Refusal::Network => {
            let default_of = ctx.and_then(|c| c.network_default_of);
            denial::network_hint(
                policy,
                d.op,
                d.path.as_ref().and_then(|p| p.to_str()),
                default_of,
            )
        }
        Refusal::OutsideSocket => d
            .path
            .as_ref()
            .filter(|p| p.is_absolute())
            .map(|p| format!("--allow-unix-socket {}", p.display())),
        Refusal::OutsideRoots => ctx.zip(d.path.as_ref()).and_then(|(c, p)| c.hint(p)),
        Refusal::Dns => Some("the proxy in HTTPS_PROXY, which resolves names itself".into()),
        Refusal::PassedRights => {
            Some("a kernel with SO_PASSRIGHTS (Linux 6.16), or --network allow".into())
        }
        _ => None,
    };
    DenialFact {
        op: d.op.into(),
        path: d.path.as_ref().map(|p| p.to_string_lossy().into_owned()),
        errno: denial::errno_name(d.errno),
        source: "gate".into(),
        network,
        hint,
        count: d.count,
    }
}

/// A running (or finished) command and its output captures.
pub struct Execution {
    pub(crate) report: Report,
    pub(crate) procs: CommandProcs,
    pub(crate) phases: Phases,
    pub(crate) streams: Streams,
    /// Registered before the spawn, so that the child's exit cannot be missed.
    pub(crate) sigchld: tokio::signal::unix::Signal,
    /// The sandbox's gate (confining modes), on a thread of its own.
    pub(crate) gate: Option<Gate>,
    /// The allow-list proxy, stopped when the execution ends.
    pub(crate) proxy: Option<crate::net::proxy::Proxy>,
    /// The run's limits; after `procs`, so that a dropped execution's tree
    /// is gone before its cgroups are removed.
    pub(crate) limiter: Option<crate::limits::Limiter>,
    /// The write end of the command's stdin under `--stdin pipe`
    /// (non-blocking); `None` once closed, or for any other stdin.
    pub(crate) stdin_pipe: Option<std::fs::File>,
    /// The run was started with `--stdin pipe` or `--pty`.
    pub(crate) stdin_kept: bool,
    /// `--pty`: the terminal's master, for its window size and end-of-file.
    pub(crate) pty: Option<std::fs::File>,
    /// Bytes of output seen so far (both streams), for the idle deadline.
    pub(crate) seen_output: u64,
    /// Where the run's events go (`--events`): [`Execution::finish`]
    /// sends the closing ones.
    pub(crate) events: Option<crate::events::EventSink>,
}

/// Why bytes could not be written to a command's stdin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StdinRefusal {
    /// The run's stdin is not a kept pipe (no `--stdin pipe`).
    NotAPipe,
    /// It was closed (`job write --close`).
    Closed,
    /// The command closed its end, or exited: EPIPE.
    Gone,
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
        self.procs.pid()
    }

    /// True once the direct child has exited, both pipes are closed (or their
    /// reading was cut off) and nothing the command started is left.
    pub fn is_finished(&self) -> bool {
        self.phases.is_done()
    }

    /// The spill files of (stdout, stderr), once the streams outgrew their budgets.
    pub fn spill_paths(&self) -> (Option<&Path>, Option<&Path>) {
        self.streams.spill_paths()
    }

    /// Writes as much of `bytes` to the command's stdin as the pipe takes
    /// now (it never blocks: 0 when the pipe is full); returns how many.
    ///
    /// Errors with a [`StdinRefusal`] when there is no such pipe (any
    /// stdin but `--stdin pipe`), when it was closed, or when the command
    /// no longer reads it.
    pub fn write_stdin(&mut self, bytes: &[u8]) -> Result<usize, StdinRefusal> {
        use std::io::Write;
        let pipe = match (&mut self.stdin_pipe, self.stdin_kept) {
            (Some(p), _) => p,
            (None, true) => return Err(StdinRefusal::Closed),
            (None, false) => return Err(StdinRefusal::NotAPipe),
        };
        loop {
            return match pipe.write(bytes) {
                Ok(n) => Ok(n),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(0),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    self.stdin_pipe = None;
                    Err(StdinRefusal::Gone)
                }
            };
        }
    }

    /// Closes the command's stdin (`--stdin pipe`): it reads end-of-file.
    /// On a terminal (`--pty`) it types the end-of-file character (VEOF,
    /// ^D), which ends the read of a line-reading program, and the
    /// terminal stays open.
    ///
    /// Errors as [`Execution::write_stdin`] when there is no open pipe.
    pub fn close_stdin(&mut self) -> Result<(), StdinRefusal> {
        if self.pty.is_some() {
            let veof = self
                .pty
                .as_ref()
                .and_then(|m| nix::sys::termios::tcgetattr(m).ok())
                .map(|t| t.control_chars[nix::sys::termios::SpecialCharacterIndices::VEOF as usize])
                .unwrap_or(4);
            return self.write_stdin(&[veof]).map(|_| ());
        }
        match (self.stdin_pipe.take(), self.stdin_kept) {
            (Some(_), _) => Ok(()),
            (None, true) => Err(StdinRefusal::Closed),
            (None, false) => Err(StdinRefusal::NotAPipe),
        }
    }

    /// Sets the window size of the command's terminal (`--pty`) to `cols`
    /// by `rows` (TIOCSWINSZ on the master, tty_ioctl(4)); the kernel sends
    /// SIGWINCH to the terminal's foreground process group.
    ///
    /// Errors with [`StdinRefusal::NotAPipe`] when the run has no terminal.
    pub fn resize(&mut self, cols: u16, rows: u16) -> Result<(), StdinRefusal> {
        let Some(master) = &self.pty else {
            return Err(StdinRefusal::NotAPipe);
        };
        if crate::sys::set_window_size(master, rows, cols) {
            Ok(())
        } else {
            Err(StdinRefusal::Gone)
        }
    }

    /// Bytes the command has written so far: (stdout, stderr).
    pub fn bytes_so_far(&self) -> (u64, u64) {
        self.streams.totals()
    }

    /// Consumes the output produced since the previous call: (stdout, stderr).
    pub fn read_delta(&mut self) -> (Delta, Delta) {
        self.streams.read_delta()
    }

    fn poll_exit(&mut self) -> Result<(), Error> {
        self.procs
            .poll_exit()
            .map_err(|source| Error::SupervisionFailed {
                what: "waitid",
                source,
            })
    }

    /// Reads the limits' counters; a limit reached ends the run as the
    /// deadline does.
    fn check_limits(&mut self) {
        let Some(limiter) = self.limiter.as_mut() else {
            return;
        };
        let tree = self.procs.tree();
        let before = self.report.usage_before;
        let reached = limiter.check(|| {
            let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
                .ok()
                .flatten()
                .unwrap_or(1)
                .max(1) as u64;
            let reaped = crate::limits::usage::children_usage();
            tree.cpu_ticks() * 1_000_000 / hz
                + reaped.0.saturating_sub(before.0)
                + reaped.1.saturating_sub(before.1)
        });
        if let Some(kind) = reached {
            self.phases.exceeded(kind, Instant::now(), &mut self.procs);
        }
    }

    fn advance(&mut self) {
        let (out, err) = self.streams.totals();
        if out + err != self.seen_output {
            self.seen_output = out + err;
            self.phases.output(Instant::now());
        }
        if self.procs.exited() && self.streams.files_open() {
            // Output files: closed once no process left holds them (a
            // thread group whose leader exited included, which the tree
            // counts as gone).
            self.streams.holders_gone(self.procs.tree());
        }
        let closed = self.streams.closed();
        self.phases.advance(Instant::now(), closed, &mut self.procs);
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
        while !self.phases.is_done() {
            let now = Instant::now();
            let wake = self.phases.wake(self.procs.exited(), now);
            let limits = match (&mut self.limiter, self.phases.cause()) {
                (Some(l), None) => l.next_check(now),
                _ => None,
            };
            tokio::select! {
                _ = sleep_opt(limits) => self.check_limits(),
                _ = self.streams.read_some() => {}
                _ = self.sigchld.recv() => self.poll_exit()?,
                _ = sleep_opt(wake.phase_end) => {
                    // Bytes the command wrote while this process was stopped
                    // or starved wait in the pipes: they count before the
                    // idle deadline is judged (one read; the loop then
                    // computes the idle deadline again).
                    if self.phases.idle_may_end(Instant::now()) && self.streams.output_waiting() {
                        self.streams.read_some().await;
                        self.advance();
                        continue;
                    }
                    if self.phases.phase_ended(Instant::now(), &mut self.procs) == Effect::StopReading {
                        self.streams.stop_reading();
                    }
                }
                _ = sleep_opt(wake.poll) => self.phases.poll(&mut self.procs),
                sig = aborts.next() => self.phases.abort(sig, Instant::now(), &mut self.procs),
                _ = sleep_opt(until) => return Ok(false),
            }
            self.advance();
        }
        Ok(true)
    }

    /// Drives the run to its end and returns the foreground result.
    ///
    /// Errors as [`Execution::run_until`].
    pub async fn wait(mut self, aborts: &mut impl AbortSource) -> Result<RunResult, Error> {
        self.run_until(None, aborts).await?;
        Ok(self.finish())
    }

    /// Ends the run: kills what is left, reaps the direct child, removes an
    /// unused spill directory, and builds the result. Called on a run that
    /// has not finished, it kills the command's whole tree first.
    pub fn finish(mut self) -> RunResult {
        self.procs.release(self.phases.is_done());
        let (exit_code, signal) = match self.procs.exit() {
            Some(Exit::Code(c)) => (Some(c), None),
            Some(Exit::Signal(s)) => (None, Some(s)),
            None => (None, None),
        };
        let aborted_by = match self.phases.cause() {
            Some(Cause::Abort(sig)) => Some(sig),
            _ => None,
        };
        let timeout_kind = match self.phases.cause() {
            Some(Cause::Timeout) => Some(TimeoutKind::Deadline),
            Some(Cause::Idle) => Some(TimeoutKind::Idle),
            _ => None,
        };
        let limit_cause = match self.phases.cause() {
            Some(Cause::Limit(kind)) => Some(kind),
            _ => None,
        };
        let mut resources = crate::limits::Resources::since(self.report.usage_before);
        if let Some(l) = &self.limiter {
            l.account(&mut resources);
        }
        let (out, err, spill_dir, live_dropped, live_mid_line) = self.streams.into_parts();
        let (mut out, mut err) = (out.finish(), err.finish());
        out.live_dropped_bytes = live_dropped[0];
        out.live_ended_mid_line = live_mid_line;
        err.live_dropped_bytes = live_dropped[1];
        if out.spill_path.is_none() && err.spill_path.is_none() {
            // Created, but no spill file could be opened in it.
            spill_dir.remove_if_empty();
        }
        let report = self.report;
        let gate_denials = self.gate.as_ref().map(|g| g.denials()).unwrap_or_default();
        // The tree is gone: nothing can change the protected paths now.
        let protected_changes = report
            .after_run
            .as_ref()
            .map(AfterRun::undo)
            .unwrap_or_default();
        // The tree is gone too: the layers hold everything it changed.
        let unsuccessful = match (timeout_kind, &aborted_by, exit_code, signal) {
            (Some(_), _, _, _) => Some("the command timed out".to_string()),
            (_, Some(sig), _, _) => Some(format!("the run was aborted by {sig}")),
            (_, _, Some(0), _) => None,
            (_, _, Some(code), _) => Some(format!("the command exited with {code}")),
            (_, _, None, Some(sig)) => Some(format!("the command was killed by {sig}")),
            (_, _, None, None) => Some("the command did not finish".to_string()),
        };
        let transaction = report.transaction.map(|(overlays, on_exit, protected)| {
            crate::transaction::finish(
                overlays,
                on_exit,
                &report.command,
                &report.workdir,
                protected,
                unsuccessful,
            )
        });
        let failed = exit_code != Some(0);
        let sandbox = report.sandbox.map(|mut facts| {
            let mut denials: Vec<DenialFact> = gate_denials
                .kept
                .iter()
                .filter(|d| !refused_unconfined_too(d))
                .map(|d| gate_fact(d, report.denial_context.as_ref(), facts.network))
                .collect();
            if let Some(ctx) = &report.denial_context {
                // The gate's fact of a path is the exact one; the output's
                // message about the same path adds nothing.
                let from_output = denial::from_output(ctx, failed, &out.text, &err.text)
                    .into_iter()
                    .filter(|o| !denials.iter().any(|g| g.path == o.path));
                denials.extend(from_output.collect::<Vec<_>>());
            }
            // Before the list is cut: a refusal past the 100th counts too.
            let proxy = self.proxy.as_ref().map(|p| p.stats()).unwrap_or_default();
            facts.network_denied = gate_denials.network
                || denials.iter().any(|d| d.network)
                || !proxy.denials.is_empty();
            facts.network_denials = proxy.denials;
            facts.network_denials_more = proxy.denials_more;
            facts.network_allowed = proxy.allowed;
            facts.credentials_used = proxy.credentials_used;
            facts.credentials_missed = proxy.credentials_missed;
            let extra = denials.len().saturating_sub(MAX_DENIALS) as u64;
            denials.truncate(MAX_DENIALS);
            facts.denials_more = gate_denials.more + extra;
            facts.denied =
                !denials.is_empty() || facts.denials_more > 0 || !facts.network_denials.is_empty();
            facts.denials = denials;
            facts.protected_changes = protected_changes;
            facts
        });
        let limit_exceeded = self.limiter.as_ref().and_then(|l| {
            let cpu_us = (resources.cpu_user_ms + resources.cpu_system_ms) * 1000;
            l.exceeded(limit_cause, signal, &err.text, cpu_us)
        });
        let limits = self
            .limiter
            .as_ref()
            .filter(|l| l.limits_any())
            .map(|l| l.facts());
        crate::render::plain::apply(report.render, &mut out);
        crate::render::plain::apply(report.render, &mut err);
        let result = RunResult {
            command: report.command,
            workdir: report.workdir,
            exit_code,
            signal,
            timed_out: timeout_kind.is_some(),
            timeout_kind,
            aborted: aborted_by.is_some(),
            aborted_by,
            timeout_ms: report.timeout.map(|t| t.as_millis() as u64),
            idle_timeout_ms: report.idle_timeout.map(|t| t.as_millis() as u64),
            capped: report.capped,
            duration_ms: report.started.elapsed().as_millis() as u64,
            stdout: out,
            stderr: err,
            sandbox,
            env_scrubbed: report.env_scrubbed,
            resources: Some(resources),
            limit_exceeded,
            limits,
            transaction,
        };
        if let Some(sink) = &self.events {
            crate::events::closing(&result)
                .into_iter()
                .for_each(|e| sink(e));
        }
        result
    }
}
