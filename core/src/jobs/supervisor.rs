//! A job's supervisor: how the launcher starts it ([`launch`]) and what it
//! does ([`supervise`]).
//!
//! The supervisor is a `dsh-exec` process of its own, in its own session,
//! started through the same spawn path as any command (`exec::spawn`), with
//! an empty environment, `/` as its working directory, and four
//! descriptors: stdin (this process's, for `--stdin-file -`, else
//! `/dev/null`), `/dev/null`, its log file, and the handoff socket
//! ([`super::protocol`]). It is handed the resolved spec over that socket,
//! never as arguments, prepares and starts the command with
//! [`crate::exec::start`], answers the launcher, and then keeps capturing
//! with the same budgets, spill files, sandbox and tree sweep, serving
//! incremental reads over the job's Unix socket until the command ends.

use std::ffi::OsString;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::protocol::{Carry, HANDOFF_FD, Handoff, MAX_SPEC_BYTES, ReadReply, delta_reply, serve};
use super::store::{self, JobMeta, Status};
use crate::error::{Error, ErrorCode, PathProblem};
use crate::exec::{AbortSignals, Started, prepare, start};
use crate::result::RunResult;
use crate::spec::{Spec, StdinSource};
use crate::sys::spawn::{ChildFds, Program, spawn};

/// How long [`launch`] waits for the supervisor to start the command.
const START_WAIT: Duration = Duration::from_secs(10);

/// How often the supervisor looks for read requests while the job runs.
const TICK: Duration = Duration::from_millis(20);

/// The program that becomes a supervisor: the `dsh-exec` binary passes its
/// own executable and `__supervise`; the job directory and id are appended.
#[derive(Debug, Clone)]
pub struct SupervisorProgram {
    /// Absolute path of the executable.
    pub path: PathBuf,
    /// Arguments after `argv[0]`, before the job directory and id.
    pub args: Vec<OsString>,
    /// The supervisor dies with the launching process (its parent-death
    /// signal, SIGKILL), and with it the job's tree (see the module's
    /// documentation): for a launcher that owns its jobs, the MCP server
    /// without `--keep-jobs`, which a SIGKILL could otherwise leave behind.
    pub die_with_launcher: bool,
}

/// A job that was launched.
#[derive(Debug)]
pub struct Launched {
    /// Its id, e.g. `j4k2x9qa`.
    pub id: String,
    /// Its directory.
    pub dir: PathBuf,
    /// The command's pid (in the supervisor's PID namespace); `None` when
    /// the command never ran.
    pub pid: Option<i32>,
    /// The supervisor's pid: a child of this process until it exits (see
    /// [`Launched::reap_when_done`]).
    pub supervisor: i32,
    /// Warnings of the preparation, one line each (skipped writable roots, ...).
    pub warnings: Vec<String>,
    /// The result of a command that never ran: its deadline passed during
    /// preparation, or the sandbox runner failed (then the job should be
    /// discarded and the failure reported, as in the foreground).
    pub not_run: Option<RunResult>,
}

impl Launched {
    /// Reaps the supervisor when it exits, on a thread of its own, for a
    /// launcher that lives on (the MCP server): its pid cannot be reused
    /// while it is an unreaped child, so the wait cannot take another's
    /// status.
    pub fn reap_when_done(&self) {
        let pid = nix::unistd::Pid::from_raw(self.supervisor);
        let _ = std::thread::Builder::new()
            .name("supervisor reaper".into())
            .spawn(move || {
                let _ = nix::sys::wait::waitpid(pid, None);
            });
    }
}

/// Removes a job's directory (a job that never ran, or one shown as a
/// foreground run).
pub fn discard(dir: &Path) {
    let _ = std::fs::remove_dir_all(dir);
}

/// The last line the supervisor wrote to its log.
fn last_log_line(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("supervisor.log"))
        .ok()
        .and_then(|log| log.lines().last().map(str::to_owned))
        .unwrap_or_else(|| "no message".into())
}

/// Starts a supervisor for the run `spec` as a new job in `root` and waits
/// (at most 10 s) until it has started the command.
///
/// Errors with [`Error::JobsUnusable`], [`Error::SupervisorNotStarted`], or
/// [`Error::InJob`] for a failure of the preparation (the job directory is
/// then removed).
pub fn launch(spec: &Spec, root: &Path, program: &SupervisorProgram) -> Result<Launched, Error> {
    let (id, dir) = store::new_job(root)?;
    match hand_off(spec, &id, &dir, program) {
        Ok(launched) => Ok(launched),
        Err(e) => {
            discard(&dir);
            Err(e)
        }
    }
}

fn hand_off(
    spec: &Spec,
    id: &str,
    dir: &Path,
    program: &SupervisorProgram,
) -> Result<Launched, Error> {
    let not_started = |log: String| Error::SupervisorNotStarted { log };
    let io_fail = |e: std::io::Error| not_started(e.to_string());
    let log = File::create(dir.join("supervisor.log")).map_err(|e| Error::JobsUnusable {
        path: dir.to_path_buf(),
        problem: PathProblem::Io(e),
    })?;
    let (ours, theirs) = UnixStream::pair().map_err(io_fail)?;
    let null = File::open("/dev/null").map_err(io_fail)?;
    // `--stdin-file -` means this process's stdin: the supervisor feeds it.
    let stdin = match spec.stdin.value {
        StdinSource::Inherited => std::io::stdin().as_fd().try_clone_to_owned(),
        _ => null.as_fd().try_clone_to_owned(),
    }
    .map_err(io_fail)?;
    let mut argv: Vec<&[u8]> = vec![b"dsh-exec"];
    argv.extend(program.args.iter().map(|a| a.as_bytes()));
    argv.push(dir.as_os_str().as_bytes());
    argv.push(id.as_bytes());
    let fds = [stdin.as_fd(), null.as_fd(), log.as_fd(), theirs.as_fd()];
    let spawned = spawn(&Program {
        path: &program.path,
        argv: &argv,
        // Nothing of this process's environment: the spec carries the
        // command's, and the supervisor needs none.
        env: &[],
        workdir: Path::new("/"),
        workdir_id: None,
        fds: ChildFds::Given(&fds),
        // It must outlive this process, unless its launcher owns it.
        parent_death: program.die_with_launcher,
        pid_namespace: false,
        confine: None,
        file_size_max: None,
        cpu_rlimit: None,
        cgroups: &[],
        cgroups_required: false,
        cgroup_dir: None,
        controlling_tty: false,
    })
    .map_err(|e| io_fail(e.error))?;
    drop(theirs);
    // From here the job counts as running (a prune cannot take it).
    let _ = store::record_supervisor(dir, spawned.pid);
    let reap = || {
        let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(spawned.pid), None);
    };
    let reply = send_spec_and_wait(&ours, spec);
    let reply = match reply {
        Some(r) => r,
        None => {
            // It died (or hangs) without answering: the log says why.
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(spawned.pid),
                nix::sys::signal::Signal::SIGKILL,
            );
            reap();
            return Err(not_started(last_log_line(dir)));
        }
    };
    match reply {
        Handoff::Started { pid, warnings } => Ok(Launched {
            id: id.to_string(),
            dir: dir.to_path_buf(),
            supervisor: spawned.pid,
            pid: Some(pid),
            warnings,
            not_run: None,
        }),
        Handoff::NotRun { result, warnings } => Ok(Launched {
            id: id.to_string(),
            dir: dir.to_path_buf(),
            supervisor: spawned.pid,
            pid: None,
            warnings,
            not_run: Some(*result),
        }),
        Handoff::Failed { code, message } => {
            reap();
            Err(Error::InJob { code, message })
        }
    }
}

/// Writes the spec (then a NUL byte and the credentials' values, which
/// the spec's JSON never holds: see `Secrets::to_wire`), shuts down the
/// writing side, and reads the answer line within [`START_WAIT`]; `None`
/// when none came.
fn send_spec_and_wait(stream: &UnixStream, spec: &Spec) -> Option<Handoff> {
    let mut bytes = zeroize::Zeroizing::new(serde_json::to_vec(spec).ok()?);
    if !spec.secrets.is_empty() {
        bytes.push(0);
        bytes.extend_from_slice(&spec.secrets.to_wire());
    }
    let end = Instant::now() + START_WAIT;
    let left = || {
        end.checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
    };
    // One deadline for the whole handoff: the timeouts apply per call.
    let mut written = 0;
    while written < bytes.len() {
        stream.set_write_timeout(Some(left()?)).ok()?;
        match (&*stream).write(&bytes[written..]) {
            Ok(0) => return None,
            Ok(n) => written += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    stream.shutdown(std::net::Shutdown::Write).ok()?;
    let mut reply = Vec::new();
    loop {
        stream.set_read_timeout(Some(left()?)).ok()?;
        let mut buf = [0u8; 4096];
        match (&*stream).read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                reply.extend_from_slice(&buf[..n]);
                if reply.contains(&b'\n') {
                    break;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    serde_json::from_slice(reply.split(|b| *b == b'\n').next()?).ok()
}

/// Takes the handoff socket this process was started with, if descriptor
/// [`HANDOFF_FD`] is one.
fn take_handoff() -> Result<UnixStream, Error> {
    let fd = HANDOFF_FD;
    // Nothing else in this process uses it: the launcher put it there for
    // the supervisor alone.
    match crate::sys::take_inherited_socket(fd) {
        Some(socket) => Ok(UnixStream::from(socket)),
        None => Err(Error::SupervisorNotStarted {
            log: format!("descriptor {fd} is not the handoff socket"),
        }),
    }
}

fn read_spec(stream: &UnixStream) -> Result<Spec, String> {
    let mut bytes = zeroize::Zeroizing::new(Vec::new());
    stream
        .take(MAX_SPEC_BYTES)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("reading the job's spec: {e}"))?;
    // JSON never holds a raw NUL: what follows one is the credentials.
    let (json, wire) = match bytes.iter().position(|b| *b == 0) {
        Some(at) => (&bytes[..at], Some(&bytes[at + 1..])),
        None => (&bytes[..], None),
    };
    let mut spec: Spec =
        serde_json::from_slice(json).map_err(|e| format!("the job's spec is malformed: {e}"))?;
    if let Some(wire) = wire {
        spec.secrets = crate::net::inject::Secrets::from_wire(wire)
            .ok_or("the job's credentials are malformed")?;
    }
    Ok(spec)
}

fn answer(stream: &UnixStream, reply: &Handoff) {
    if let Ok(mut line) = serde_json::to_vec(reply) {
        line.push(b'\n');
        let mut w = stream;
        let _ = w.write_all(&line);
    }
}

/// Writes what a finished job leaves: the output nobody read, and the result.
fn write_end(dir: &Path, unread: &ReadReply, result: &RunResult) {
    let _ = store::write_json(&dir.join("unread.json"), unread);
    let _ = store::write_result(dir, result);
}

/// The body of the supervisor process of the job `id` in `dir`: takes the
/// spec from the handoff socket, runs it, answers the launcher, serves reads,
/// and writes the result. Returns when the job has ended.
///
/// Must run within a tokio runtime with IO and time enabled. Errors (also
/// reported to the launcher when it still waits) when the job could not be
/// started or supervised.
pub async fn supervise(dir: &Path, id: &str) -> Result<(), Error> {
    let handoff = take_handoff()?;
    let failed = |e: Error| {
        answer(
            &handoff,
            &Handoff::Failed {
                code: e.code(),
                message: e.to_string(),
            },
        );
        e
    };
    let spec = read_spec(&handoff).map_err(|message| {
        // The launcher is gone or broken: nobody will ever read this job.
        discard(dir);
        failed(Error::InJob {
            code: ErrorCode::RuntimeFailed,
            message,
        })
    })?;
    let sock = dir.join("sock");
    let listener = UnixListener::bind(&sock)
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .map_err(|e| {
            failed(Error::JobsUnusable {
                path: sock.clone(),
                problem: PathProblem::Io(e),
            })
        })?;
    let mut aborts = AbortSignals::install().map_err(|source| {
        failed(Error::Runtime {
            what: "the signal handlers",
            source,
        })
    })?;
    let started = Instant::now();
    let started_at_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    // A job's output is read while it runs: pipes. A spec asking for
    // output files is an MCP server's `run` call, whose output nobody
    // reads before its end (the CLI refuses `--output-files` with
    // `--background` and `--detach-after`; the server clears it for
    // `start`).
    let mut prepared = prepare(&spec).map_err(failed)?;
    if !spec.output_files {
        prepared = prepared.piped_output();
    }
    let warnings = prepared.warnings();
    let mut exec = match start(&spec, prepared, started).map_err(failed)? {
        Started::Running(exec) => exec,
        Started::NotRun(result) => {
            write_end(dir, &ReadReply::default(), &result);
            answer(&handoff, &Handoff::NotRun { result, warnings });
            return Ok(());
        }
    };
    let meta = JobMeta {
        job_id: id.to_string(),
        command: spec.script.clone(),
        workdir: spec.workdir.value.to_string_lossy().into_owned(),
        started_at_ms,
        pid: exec.pid(),
    };
    let _ = store::write_json(&dir.join("meta.json"), &meta);
    answer(
        &handoff,
        &Handoff::Started {
            pid: exec.pid(),
            warnings,
        },
    );
    drop(handoff);
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
    let _ = std::fs::remove_file(&sock);
    Ok(())
}
