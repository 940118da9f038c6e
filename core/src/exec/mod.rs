//! Running a spec: prepare, spawn, supervise.
//!
//! [`prepare`] checks and opens everything a run needs ([`prepare.rs`]);
//! [`start`] spawns `bash -c -- SCRIPT` as the leader of a new session
//! ([`spawn`], with the child's steps in [`child`]) and returns the
//! [`Execution`] handle ([`supervise`]), whose loop drives the phase
//! machine ([`phases`]) over the command's processes ([`procs`], [`crate::proctree`]), its
//! pipes ([`streams`]) and abort requests ([`abort`]).
//!
//! [`prepare.rs`]: prepare

pub(crate) mod abort;
pub(crate) mod phases;
pub(crate) mod prepare;
pub(crate) mod procs;
pub(crate) mod streams;
pub(crate) mod supervise;

use std::fs::File;
use std::os::fd::AsFd;
use std::time::Instant;

use tokio::signal::unix::{SignalKind, signal};

pub use self::abort::{AbortSignals, AbortSource, NoAbort};
pub use self::phases::{DRAIN, FINAL_READ};
pub use self::prepare::{Prepared, prepare, stdin_holds_data};
pub use self::supervise::{Execution, StdinRefusal};

use self::phases::Phases;
use self::procs::CommandProcs;
use self::streams::{LiveCopy, OutputFiles, Streams};
use self::supervise::Report;
use crate::capture::StreamCapture;
use crate::error::Error;
use crate::events::Event;
use crate::proctree::Tree;
use crate::result::RunResult;
use crate::sandbox;
use crate::sandbox::gate::Gate;
use crate::spec::Spec;
use crate::sys::spawn::{ChildFds, Program, spawn};

/// Sets up this process for supervising commands; the `dsh-exec` binary
/// calls it first thing.
///
/// - SIGCHLD back to its default (a parent that ignored it would make the
///   child's status unobtainable: waitid(2) then fails with ECHILD), and an
///   empty signal mask (blocked signals would delay aborts).
/// - Not dumpable (prctl(2) `PR_SET_DUMPABLE`): `/proc/PID/environ` of
///   `dsh-exec`, which still holds the secrets scrubbed from the child's
///   environment, is then unreadable to the command (unless it has
///   CAP_SYS_PTRACE, which confined runs drop).
/// - A child subreaper (`PR_SET_CHILD_SUBREAPER`): orphans of the command
///   become this process's children, so the sweep finds them.
pub fn init_process() {
    use nix::sys::signal::{SigSet, SigmaskHow, sigprocmask};
    crate::sys::default_sigchld();
    let _ = sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None);
    let _ = nix::sys::prctl::set_dumpable(false);
    let _ = crate::proctree::become_subreaper();
}

/// Gives the signals that abort a run back their default action (end the
/// process), for a caller whose run has ended (its tree is gone) and who
/// only writes its result now: a reader that stopped reading can then
/// still be answered by SIGINT, SIGTERM or SIGHUP, which the runtime's
/// handlers would otherwise take and nothing would act on. Process-wide:
/// for the command line, not for a library caller that goes on.
pub fn release_abort_signals() {
    use nix::sys::signal::Signal;
    crate::sys::default_dispositions(&[
        Signal::SIGINT,
        Signal::SIGTERM,
        Signal::SIGHUP,
        Signal::SIGQUIT,
        Signal::SIGUSR1,
        Signal::SIGUSR2,
        Signal::SIGALRM,
    ]);
}

/// Overwrites, in this process's initial environment block, the values of
/// the variables named in `names` (those the scrub withheld from the
/// command) with NUL bytes; returns how many it overwrote.
///
/// `/proc/PID/environ` shows that very block (proc(5): the memory from
/// `env_start` to `env_end`, fields 50 and 51 of `/proc/PID/stat` since
/// Linux 3.5), whatever `setenv(3)` did since: a root command with
/// CAP_SYS_PTRACE reads it despite `PR_SET_DUMPABLE`. Call it once the
/// spec (and with it the child's environment and every `-e NAME` value)
/// is resolved: afterwards `getenv(3)` of those names in this process
/// gives an empty string. Errors when `/proc/self/stat` cannot be read or
/// parsed; nothing is overwritten then.
pub fn wipe_scrubbed_environ(names: &[std::ffi::OsString]) -> std::io::Result<usize> {
    crate::sys::environ::wipe_values(names)
}

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
        timeout_kind: None,
        aborted: false,
        aborted_by: None,
        timeout_ms: spec.timeout.value.map(|t| t.as_millis() as u64),
        idle_timeout_ms: spec.idle_timeout.value.map(|t| t.as_millis() as u64),
        capped: spec.capped_notes(),
        duration_ms: started.elapsed().as_millis() as u64,
        stdout: StreamCapture::new("stdout", 0).finish(),
        stderr: stderr.finish(),
        sandbox: None,
        env_scrubbed: spec.env_scrubbed(),
        resources: None,
        limit_exceeded: None,
        limits: None,
        transaction: None,
    }
}

/// A run that never started, its closing events sent where `prepared`
/// says ([`Prepared::events`]).
fn told_not_run(prepared: &Prepared, result: RunResult) -> Started {
    if let Some(sink) = &prepared.events {
        crate::events::closing(&result)
            .into_iter()
            .for_each(|e| sink(e));
    }
    Started::NotRun(Box::new(result))
}

/// Spawns the command of `spec`, prepared as `prepared`; the deadline counts
/// from `started` (taken before preparing).
///
/// Must be called within a tokio runtime with IO and time enabled. Errors
/// with [`Error::SpawnFailed`] or [`Error::Runtime`]; nothing runs when it
/// errors.
pub fn start(spec: &Spec, mut prepared: Prepared, started: Instant) -> Result<Started, Error> {
    let deadline = spec.timeout.value.map(|t| started + t);
    let facts = |runner_failed| {
        spec.sandbox
            .as_ref()
            .zip(prepared.sandbox.as_ref())
            .map(|(policy, p)| {
                let hidden = p
                    .confinement
                    .as_ref()
                    .and_then(|c| c.mounts.as_ref())
                    .is_some_and(|m| !m.hides.is_empty());
                sandbox::facts(policy, &p.enforcement, runner_failed, false, hidden)
            })
    };
    if deadline.is_some_and(|d| Instant::now() >= d) {
        let mut result = not_run(spec, started, "");
        result.timed_out = true;
        result.sandbox = facts(false);
        return Ok(told_not_run(&prepared, result));
    }
    // Forked before the tree is recorded: the sweep never takes it for
    // one of the command's processes.
    let watchdog = {
        let cgroup_kill = prepared
            .limiter
            .as_ref()
            .and_then(|l| l.v2_dir())
            .and_then(|d| {
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(d.join("cgroup.kill"))
                    .ok()
            });
        crate::sys::watchdog::Watchdog::start(cgroup_kill.as_ref().map(|f| f.as_fd())).ok()
    };
    let tree = Tree::before_spawn();
    let usage_before = crate::limits::usage::children_usage();
    let runtime = |source| Error::Runtime {
        what: "the SIGCHLD handler",
        source,
    };
    // Registered before the spawn so that the child's exit cannot be missed.
    let sigchld = signal(SignalKind::child()).map_err(runtime)?;
    let argv: [&[u8]; 4] = [b"bash", b"-c", b"--", spec.script.as_bytes()];
    let cgroups = prepared
        .limiter
        .as_ref()
        .map(|l| l.join_fds())
        .unwrap_or_default();
    let pty = prepared.pty.take();
    // The command writes its output into files itself where it asked to
    // (`--output-files`) and nothing needs the bytes while it runs (see
    // `crate::capture`): no terminal, no live copy, no background reads;
    // no file-size limit (RLIMIT_FSIZE would
    // count its output) and no memory limit (the cgroup would be charged
    // the output's page cache); a spill directory with room for the spill
    // cap. The files have no name until the run is over, so where the
    // spill directory lies does not matter (`StreamCapture::take_file`).
    let files = (spec.output_files
        && !spec.interactive
        && pty.is_none()
        && spec.stream.is_none()
        && !prepared.piped_output
        && prepared.events.is_none()
        && spec
            .output_files_refusal(|bytes| prepared.spill_dir.has_room(bytes))
            .is_none())
    .then(|| OutputFiles::new(&prepared.spill_dir).ok())
    .flatten();
    if let (Some(files), Some(sandbox)) = (&files, prepared.sandbox.as_ref()) {
        sandbox.grant_output_files(files.child_fds())?;
    }
    let slaves: Vec<std::os::fd::BorrowedFd> = pty
        .as_ref()
        .map(|(_, slave)| vec![slave.as_fd(); 3])
        .unwrap_or_default();
    let spawned = spawn(&Program {
        path: &prepared.shell,
        // `--` ends bash's options, so a script such as `-x` is a command.
        argv: &argv,
        env: &prepared.env,
        workdir: &spec.workdir.value,
        workdir_id: prepared.workdir_id,
        fds: if spec.interactive {
            ChildFds::Terminal
        } else if pty.is_some() {
            ChildFds::Given(&slaves)
        } else if let Some(files) = &files {
            ChildFds::Outputs(files.child_fds())
        } else {
            ChildFds::Pipes
        },
        controlling_tty: pty.is_some(),
        parent_death: true,
        pid_namespace: spec.pid_namespace,
        confine: prepared
            .sandbox
            .as_ref()
            .and_then(|p| p.confinement.as_ref()),
        file_size_max: spec.file_size_max.value,
        cpu_rlimit: prepared
            .limiter
            .as_ref()
            .and_then(|l| l.cpu_rlimit(spec.kill_after.value)),
        cgroups: &cgroups,
        cgroups_required: spec.limits.value == crate::limits::LimitMode::Strict
            && prepared.limiter.as_ref().is_some_and(|l| l.limits_any()),
        cgroup_dir: prepared.limiter.as_ref().and_then(|l| l.v2_dir_fd()),
    });
    let spawned = match spawned {
        Ok(s) => s,
        Err(e) if e.cgroup => {
            return Err(Error::LimitUnavailable {
                limit: "the run's cgroup".into(),
                reason: e.error.to_string(),
            });
        }
        Err(e) if e.confinement => {
            let note = format!(
                "dsh-exec: the sandbox runner failed, the command did not run: {}\n",
                e.error
            );
            let mut result = not_run(spec, started, &note);
            result.sandbox = facts(true);
            return Ok(told_not_run(&prepared, result));
        }
        Err(e) => return Err(Error::SpawnFailed(e.error)),
    };
    let gate = match (spawned.listener, prepared.sandbox.as_ref()) {
        (Some(listener), Some(sandbox)) => {
            let policy = sandbox.gate_policy(tree.clone());
            match policy.map(|p| Gate::start(listener, p)) {
                Some(Ok(g)) => Some(g),
                // The command already waits on the gate: without it, it
                // must not run. Its gated calls fail once the listener
                // closes; it is killed with the rest.
                Some(Err(source)) => {
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(spawned.pid),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                    let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(spawned.pid), None);
                    return Err(Error::Runtime {
                        what: "the sandbox gate",
                        source,
                    });
                }
                None => None,
            }
        }
        _ => None,
    };
    if let Some(proxy) = prepared.proxy.as_ref() {
        proxy.admit(tree.clone());
    }
    if let Some(limiter) = prepared.limiter.as_mut() {
        limiter.joined(spawned.cgroup_failed);
    }
    let procs = CommandProcs::new(spawned.pid, tree, spec.interactive)
        .watched(watchdog)
        .first_signal(spec.signal.value)
        .in_cgroup(prepared.limiter.as_ref().and_then(|l| l.v2_dir()));
    // Without a source the pipe's write end is dropped here: end-of-file;
    // `--stdin pipe` keeps it, non-blocking, for `job write`.
    let mut stdin_pipe = None;
    match (&prepared.stdin, spawned.stdin) {
        (Some(feeder), Some(sink)) => {
            let _ = feeder.send(File::from(sink));
        }
        (None, Some(sink)) if spec.stdin.value == crate::spec::StdinSource::Pipe => {
            let _ = nix::fcntl::fcntl(
                &sink,
                nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
            );
            stdin_pipe = Some(File::from(sink));
        }
        _ => {}
    }
    let mut sandbox = facts(false);
    if let (Some(facts), Some(proxy)) = (sandbox.as_mut(), prepared.proxy.as_ref()) {
        facts.network_proxy = Some(proxy.addr().to_string());
    }
    // `--pty`: the terminal's output is stdout, stderr an empty pipe; input
    // and the window size go to the master.
    let (stdout, stderr, pty_master) = match pty {
        Some((master, slave)) => {
            drop(slave);
            let runtime = |source| Error::Runtime {
                what: "the pseudo-terminal",
                source,
            };
            let reader = master.try_clone().map_err(runtime)?;
            let (empty, _closed) = nix::unistd::pipe().map_err(|e| runtime(e.into()))?;
            stdin_pipe = Some(File::from(master.try_clone().map_err(runtime)?));
            (Some(reader), Some(empty), Some(File::from(master)))
        }
        None => (spawned.stdout, spawned.stderr, None),
    };
    let terminal = pty_master.is_some();
    let budgets = (spec.stdout_max_bytes.value, spec.stderr_max_bytes.value);
    // For the events: the preparation's warnings and what caps lowered.
    let notices: Vec<String> = match &prepared.events {
        Some(_) => prepared
            .warnings()
            .into_iter()
            .chain(spec.capped_notes())
            .collect(),
        None => Vec::new(),
    };
    let streams = match files {
        Some(files) => Streams::written(
            files,
            budgets,
            spec.keep.value,
            spec.spill_max_bytes.value,
            prepared.spill_dir,
        )?,
        None => Streams::new(
            (stdout, stderr, terminal),
            budgets,
            spec.keep.value,
            spec.spill_max_bytes.value,
            prepared.spill_dir,
            match &prepared.events {
                Some(sink) => LiveCopy::Events(sink.clone()),
                None => LiveCopy::Shown(spec.stream, spec.on_terminal),
            },
        )?,
    };
    if let Some(sink) = &prepared.events {
        sink(Event::Start(crate::events::Start {
            command: spec.script.clone(),
            workdir: spec.workdir.value.to_string_lossy().into_owned(),
            pid: spawned.pid,
            timeout_ms: spec.timeout.value.map(|t| t.as_millis() as u64),
            idle_timeout_ms: spec.idle_timeout.value.map(|t| t.as_millis() as u64),
            stdout_max_bytes: spec.stdout_max_bytes.value,
            stderr_max_bytes: spec.stderr_max_bytes.value,
            sandbox: spec
                .sandbox
                .as_ref()
                .map(|p| p.mode.value.as_str().to_owned()),
            network: spec.sandbox.as_ref().map(|p| p.network.value.to_string()),
        }));
        for text in notices {
            sink(Event::Notice { text });
        }
    }
    Ok(Started::Running(Box::new(Execution {
        report: Report {
            usage_before,
            render: spec.render.value,
            command: spec.script.clone(),
            workdir: spec.workdir.value.clone(),
            started,
            timeout: spec.timeout.value,
            idle_timeout: spec.idle_timeout.value,
            capped: spec.capped_notes(),
            env_scrubbed: spec.env_scrubbed(),
            sandbox,
            denial_context: prepared
                .sandbox
                .as_ref()
                .zip(spec.sandbox.as_ref())
                .map(|(s, policy)| s.denial_context(policy, &spec.workdir.value)),
            after_run: prepared
                .sandbox
                .as_mut()
                .map(|s| std::mem::take(&mut s.after_run)),
            transaction: prepared
                .sandbox
                .as_mut()
                .and_then(|s| {
                    let overlays = s.overlays.take()?;
                    crate::transaction::begin(&overlays, &spec.script, &spec.workdir.value);
                    let p = &s.protection;
                    let protected: Vec<std::path::PathBuf> = p
                        .paths()
                        .into_iter()
                        .map(std::path::Path::to_path_buf)
                        .chain(p.absent.iter().cloned())
                        .chain(
                            p.agent_files
                                .iter()
                                .filter(|f| !p.lifted.contains(f))
                                .cloned(),
                        )
                        .collect();
                    Some((overlays, protected))
                })
                .zip(spec.sandbox.as_ref().and_then(|p| p.transaction.as_ref()))
                .map(|((o, protected), t)| (o, t.on_exit.value, protected)),
        },
        procs,
        phases: Phases::new(deadline, spec.kill_after.value)
            .with_idle(spec.idle_timeout.value, Instant::now()),
        streams,
        sigchld,
        gate,
        proxy: prepared.proxy.take(),
        limiter: prepared.limiter.take(),
        stdin_pipe,
        stdin_kept: spec.stdin.value == crate::spec::StdinSource::Pipe || spec.pty,
        pty: pty_master,
        seen_output: 0,
        events: prepared.events.take(),
    })))
}

/// Prepares and runs `spec` to its end: the foreground projection.
///
/// Must be called within a tokio runtime with IO and time enabled (a
/// current-thread runtime is enough). Errors only on infrastructure failures
/// ([`Error`]); a nonzero exit, a timeout or an abort is a [`RunResult`].
pub async fn run(spec: &Spec, aborts: &mut impl AbortSource) -> Result<RunResult, Error> {
    let started = Instant::now();
    let prepared = prepare(spec)?;
    match start(spec, prepared, started)? {
        Started::Running(execution) => execution.wait(aborts).await,
        Started::NotRun(result) => Ok(*result),
    }
}
