//! Preparing a run: everything checked and opened before the spawn.
//!
//! The working directory, `bash` on the child's `PATH`, the stdin source
//! (and the thread that feeds it), the spill directory's parent, and the
//! sandbox (writable roots opened once, the ruleset and filters built). Any
//! failure is an [`Error`] and nothing runs.

use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use nix::libc;
use nix::unistd::{AccessFlags, access};

use crate::capture::SpillDir;
use crate::error::{Error, PathProblem};
use crate::sandbox;
use crate::spec::{Spec, StdinSource};

use crate::request::shell::find_shell;

/// A run made ready to spawn ([`prepare`]).
pub struct Prepared {
    pub(crate) shell: PathBuf,
    pub(crate) env: Vec<(OsString, OsString)>,
    /// Hands the child's stdin pipe to the feeder thread, when there is a source.
    pub(crate) stdin: Option<std::sync::mpsc::SyncSender<File>>,
    pub(crate) spill_dir: SpillDir,
    pub(crate) sandbox: Option<sandbox::Prepared>,
    /// The allow-list proxy of `--network allow=HOSTS`, listening already.
    pub(crate) proxy: Option<crate::net::proxy::Proxy>,
    /// The run's resource limits, their cgroups made already.
    pub(crate) limiter: Option<crate::limits::Limiter>,
    /// `--pty`: the new pseudo-terminal, (master, slave).
    pub(crate) pty: Option<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)>,
    /// The (device, inode) of the working directory as checked: the child
    /// refuses to start in another one ([`pin_workdir`]).
    pub(crate) workdir_id: Option<(u64, u64)>,
    /// The output goes through pipes even where the command could write it
    /// into files itself: its bytes are read while it runs (a background
    /// job's `read`). See [`Prepared::piped_output`].
    pub(crate) piped_output: bool,
    /// Where the run's events go ([`Prepared::events`]).
    pub(crate) events: Option<crate::events::EventSink>,
    warnings: Vec<String>,
}

impl Prepared {
    /// The same, its events sent to `sink` as they happen (`--events`; see
    /// [`crate::events`] for their order): the output goes through pipes,
    /// copied to `sink` in chunks besides being captured, and the run's
    /// end sends the closing events, `exit` last.
    pub fn events(mut self, sink: crate::events::EventSink) -> Prepared {
        self.events = Some(sink);
        self
    }

    /// The same, its output read through pipes while the command runs:
    /// for a caller of [`crate::exec::Execution::read_delta`] (a
    /// background job), which output files do not serve.
    pub fn piped_output(mut self) -> Prepared {
        self.piped_output = true;
        self
    }

    /// The directories the command may write under, as opened (real
    /// paths): the writable roots of `workspace-write`, the scratch dir of
    /// `read-only`; empty without a confining mode.
    pub fn writable_roots(&self) -> Vec<PathBuf> {
        self.sandbox
            .as_ref()
            .map(|s| s.roots.writable.iter().map(|r| r.path.clone()).collect())
            .unwrap_or_default()
    }

    /// What a careful user wants to know before the run, one line each:
    /// skipped writable roots, a writable root reached through a symlink or
    /// of `/`, an `--allow-write` that lifts nothing.
    pub fn warnings(&self) -> Vec<String> {
        let Some(s) = &self.sandbox else {
            return self.warnings.clone();
        };
        let skipped = s
            .roots
            .skipped
            .iter()
            .map(|k| format!("writable root {} skipped: {}", k.path.display(), k.reason));
        skipped
            .chain(s.roots.warnings.iter().cloned())
            .chain(s.protection.warnings.iter().cloned())
            .chain(self.warnings.iter().cloned())
            .collect()
    }
}

/// Names `dir` as the temp dir in `env`: `TMPDIR` (set), and `TMP`, `TEMP`
/// and `TEMPDIR` where present (some tools read those first).
fn point_temp_at(env: &mut Vec<(OsString, OsString)>, dir: &std::path::Path) {
    let value = dir.as_os_str().to_os_string();
    for (k, v) in env.iter_mut() {
        if ["TMP", "TEMP", "TEMPDIR"].iter().any(|n| k == n) {
            *v = value.clone();
        }
    }
    env.retain(|(k, _)| k != "TMPDIR");
    env.push(("TMPDIR".into(), value));
}

/// A new pseudo-terminal for `--pty`, 80 columns by 24 rows
/// (openpty(3)): (master, slave), both close-on-exec; the master
/// non-blocking, for the supervision loop.
///
/// Errors with [`Error::Runtime`] when none can be had (no `/dev/ptmx`).
fn open_pty() -> Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd), Error> {
    let fail = |e: nix::errno::Errno| Error::Runtime {
        what: "the pseudo-terminal (openpty)",
        source: io::Error::from(e),
    };
    let size = nix::pty::Winsize {
        ws_row: 24,
        ws_col: 80,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let pty = nix::pty::openpty(Some(&size), None).map_err(fail)?;
    for fd in [&pty.master, &pty.slave] {
        nix::fcntl::fcntl(
            fd,
            nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
        )
        .map_err(fail)?;
    }
    nix::fcntl::fcntl(
        &pty.master,
        nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
    )
    .map_err(fail)?;
    Ok((pty.master, pty.slave))
}

/// The (device, inode) of the working directory, opened once: beneath the
/// workspace root (openat2(2) `RESOLVE_BENEATH` from the root as pinned)
/// when a sandbox has one and the workdir lies in it, so that a path made
/// to lead out of the root (`d` swapped for a symlink to `../outside` by
/// another run of the same MCP server) fails here with EXDEV; and the child
/// compares the directory it enters with this one (`sys::child`, step 5).
fn pin_workdir(spec: &Spec) -> io::Result<(u64, u64)> {
    use crate::sys::fs::{RESOLVE_BENEATH, RESOLVE_NO_MAGICLINKS, open_at, open_at2};
    use std::os::unix::ffi::OsStrExt;
    let workdir = &spec.workdir.value;
    let flags = nix::libc::O_PATH | nix::libc::O_DIRECTORY;
    let beneath = spec.sandbox.as_ref().and_then(|p| {
        let root = &p.workspace_root.value;
        let rel = workdir.strip_prefix(root).ok()?;
        Some((root, rel, p.workspace_root_inode))
    });
    let fd = match beneath {
        Some((root, rel, pinned)) => {
            let root_fd = open_at(nix::libc::AT_FDCWD, root.as_os_str().as_bytes(), flags, 0)
                .map_err(io::Error::from_raw_os_error)?;
            let st = crate::sys::fs::fstat(&root_fd).map_err(io::Error::from_raw_os_error)?;
            if pinned.is_some_and(|id| id != (st.st_dev, st.st_ino)) {
                return Err(io::Error::other(
                    "the workspace root was replaced after it was resolved",
                ));
            }
            if rel.as_os_str().is_empty() {
                root_fd
            } else {
                open_at2(
                    root_fd.as_raw_fd(),
                    rel.as_os_str().as_bytes(),
                    flags,
                    RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
                )
                .map_err(|e| match e {
                    nix::libc::EXDEV => io::Error::other(format!(
                        "it leads out of the workspace root {}",
                        root.display()
                    )),
                    e => io::Error::from_raw_os_error(e),
                })?
            }
        }
        None => open_at(
            nix::libc::AT_FDCWD,
            workdir.as_os_str().as_bytes(),
            flags,
            0,
        )
        .map_err(io::Error::from_raw_os_error)?,
    };
    let st = crate::sys::fs::fstat(&fd).map_err(io::Error::from_raw_os_error)?;
    Ok((st.st_dev, st.st_ino))
}

/// Checks and opens everything the run of `spec` needs.
///
/// Errors with [`Error::WorkdirUnusable`], [`Error::ShellNotFound`],
/// [`Error::StdinUnreadable`], [`Error::SpillUnusable`],
/// [`Error::SandboxUnavailable`], [`Error::LimitUnavailable`] or [`Error::Runtime`] (the feeder thread, the pseudo-terminal);
/// nothing has run then.
pub fn prepare(spec: &Spec) -> Result<Prepared, Error> {
    let workdir = &spec.workdir.value;
    let unusable = |problem: PathProblem| Error::WorkdirUnusable {
        path: workdir.clone(),
        problem,
    };
    match std::fs::metadata(workdir) {
        Ok(m) if !m.is_dir() => return Err(unusable(PathProblem::NotADirectory)),
        Ok(_) => access(workdir, AccessFlags::X_OK)
            .map_err(|e| unusable(PathProblem::NotSearchable(e)))?,
        Err(e) => return Err(unusable(PathProblem::Io(e))),
    }
    let workdir_id = pin_workdir(spec).map_err(|e| unusable(PathProblem::Io(e)))?;
    let mut env = spec.env.child_env();
    let shell = find_shell(&env).ok_or(Error::ShellNotFound)?;
    let limiter = crate::limits::Limiter::prepare(&spec.limits_asked())?;
    let stdin = match &spec.stdin.value {
        StdinSource::Closed | StdinSource::Pipe => None,
        StdinSource::File(path) => Some(open_stdin_file(path)?),
        StdinSource::Text(text) => Some(StdinFeed::Open(text_file(text).map_err(|e| {
            Error::StdinUnreadable {
                path: "the text".into(),
                problem: PathProblem::Io(e),
            }
        })?)),
        StdinSource::Inherited => Some(StdinFeed::Open(
            io::stdin()
                .as_fd()
                .try_clone_to_owned()
                .map(File::from)
                .map_err(|e| Error::StdinUnreadable {
                    path: "-".into(),
                    problem: PathProblem::Io(e),
                })?,
        )),
    };
    let stdin = stdin.map(start_feeder).transpose()?;
    let pty = spec.pty.then(open_pty).transpose()?;
    let pty_path = pty
        .as_ref()
        .and_then(|(_, slave)| nix::unistd::ttyname(slave).ok());
    // The allow-list proxy listens before the command starts (and before
    // the sandbox is prepared: the files of an injecting proxy's CA must
    // exist when the Landlock ruleset grants what is readable), and the
    // command is pointed at it; its variables win over any of the same
    // name (the gate would refuse another proxy anyway). Without it the
    // run does not start: fail closed.
    let proxy = match &spec.sandbox {
        Some(policy) if policy.network.value == sandbox::Network::AllowList => {
            let proxy = crate::net::proxy::Proxy::start(
                policy.network_allow.clone(),
                Some((&policy.injection, spec.secrets.clone())),
                &std::env::temp_dir(),
            )
            .map_err(|e| {
                Error::SandboxUnavailable(crate::error::SandboxProblem::Policy(format!(
                    "the --network allow= proxy cannot start: {e}"
                )))
            })?;
            // NO_PROXY is the command's to choose: an explicit --env entry
            // keeps its value (the proxy variables are not: another proxy
            // could not be reached anyway).
            let explicit = |k: &str| {
                spec.env
                    .settings
                    .iter()
                    .any(|s| s.name == k && s.layer == crate::request::env::Layer::Explicit)
            };
            // So are the CA variables of an injecting proxy: a client told
            // to trust something else then fails its handshake (`tls
            // pinned`), as the user asked.
            let ca_var = |k: &str| crate::net::inject::CA_VARS.contains(&k);
            for (k, v) in proxy.env(&env) {
                if (k.eq_ignore_ascii_case("no_proxy") || ca_var(&k)) && explicit(&k) {
                    continue;
                }
                env.retain(|(name, _)| name.as_os_str() != k.as_str());
                env.push((k.into(), v.into()));
            }
            Some(proxy)
        }
        _ => None,
    };
    let run = sandbox::RunContext {
        pty: pty_path.as_deref(),
        interactive: spec.interactive,
        pid_namespace: spec.pid_namespace,
        workdir: &spec.workdir.value,
    };
    let sandbox = spec
        .sandbox
        .as_ref()
        .map(|policy| sandbox::prepare(policy, run))
        .transpose()?;
    // Inside a transaction's overlay the child finds the working directory
    // as the overlay shows it: the same directory, another (device, inode).
    let workdir_id = match sandbox.as_ref().and_then(|s| s.overlays.as_ref()) {
        Some(o) => {
            let real = std::fs::canonicalize(workdir).map_err(|e| unusable(PathProblem::Io(e)))?;
            match o.layer_of(&real) {
                Some(_) => o.id_seen(&real).ok_or_else(|| {
                    unusable(PathProblem::Io(io::Error::other(
                        "not found through the transaction's overlay",
                    )))
                })?,
                None => workdir_id,
            }
        }
        None => workdir_id,
    };
    if let Some(scratch) = sandbox.as_ref().and_then(|s| s.roots.scratch.as_ref()) {
        point_temp_at(&mut env, scratch);
    } else if let Some(temp) = sandbox.as_ref().and_then(|s| s.roots.temp_dir.as_ref())
        && !env.iter().any(|(k, _)| k == "TMPDIR")
    {
        // --env-policy none: the command would fall back to /tmp, which
        // may not be the temp dir the sandbox grants.
        point_temp_at(&mut env, temp);
    }
    let (spill_parent, moved, spill_warning) = spill_parent(spec, sandbox.as_ref())?;
    let mut spill_dir = SpillDir::new(&spill_parent)?;
    // The tails are read back from the spill files only where no other
    // process is meant to write: the default STATE/spill, outside this
    // run's writable roots. Anywhere else (a --spill-dir, the temp dir as
    // the fallback, where a confined run of another spec may write; STATE
    // inside a writable root without a mount namespace) they stay in
    // memory, so that nobody can forge the tail a result reports.
    let private = spec.spill_dir.origin == crate::spec::Origin::Default
        && spec.spill_fallback.is_some()
        && spill_parent == spec.spill_dir.value;
    let in_writable_root = match (&spec.sandbox, sandbox.as_ref()) {
        (Some(policy), Some(prepared)) if policy.mode.value.confines() => {
            let real =
                std::fs::canonicalize(&spill_parent).unwrap_or_else(|_| spill_parent.clone());
            prepared
                .roots
                .writable
                .iter()
                .any(|r| real.starts_with(&r.path))
        }
        _ => false,
    };
    if !private || in_writable_root {
        spill_dir.set_exposed();
    }
    let mut warnings: Vec<String> = spill_warning.into_iter().collect();
    warnings.extend(limiter.iter().flat_map(|l| l.warnings()));
    // An --allow-read entry that does not exist lifts nothing: say so
    // rather than drop it (the ordinary devices may well be missing).
    if let Some(policy) = &spec.sandbox {
        for p in &policy.read_exceptions {
            let device = crate::request::READABLE_DEVICES
                .iter()
                .any(|d| Path::new(d) == p);
            if !device && std::fs::symlink_metadata(p).is_err() {
                warnings.push(format!(
                    "--allow-read {}: no such file or directory; nothing lifted",
                    p.display()
                ));
            }
        }
    }
    if moved && spec.spill_dir.origin != crate::spec::Origin::Default {
        warnings.push(format!(
            "spill directory {} is writable by the confined command; spilling to {} instead",
            spec.spill_dir.value.display(),
            spill_parent.display()
        ));
    }
    Ok(Prepared {
        shell,
        env,
        stdin,
        spill_dir,
        limiter,
        pty,
        sandbox,
        proxy,
        workdir_id: Some(workdir_id),
        piped_output: false,
        events: None,
        warnings,
    })
}

/// Where the run's spill directory goes ([`sandbox::spill_parent`]), the
/// private one created when it moved. Returns the parent, whether it moved,
/// and a warning when it could not move where it should have.
fn spill_parent(
    spec: &Spec,
    sandbox: Option<&sandbox::Prepared>,
) -> Result<(PathBuf, bool, Option<String>), Error> {
    let mut asked = &spec.spill_dir.value;
    // The default parent (`STATE/spill`, see `request::default_spill_parent`)
    // is made on first use. It lies in this user's runtime dir or home,
    // where no other user can have put it in place. When it cannot be made
    // (a read-only home), the temp dir serves, as it did before.
    if let Some(fallback) = &spec.spill_fallback
        && !asked.is_dir()
        && make_private_dir(asked).is_err()
    {
        asked = fallback;
    }
    let (Some(policy), Some(prepared)) = (&spec.sandbox, sandbox) else {
        return Ok((asked.clone(), false, None));
    };
    let (parent, moved) = sandbox::spill_parent(policy, &prepared.roots, asked);
    if moved && let Err(e) = make_private_dir(&parent) {
        // STATE/spill cannot be made (a read-only home, no runtime dir):
        // the asked place serves, which the command can write; the tails
        // are then kept in memory (see `SpillDir::set_exposed`), and the
        // warning says so.
        return Ok((
            asked.clone(),
            false,
            Some(format!(
                "{e}; spilling to {} instead, where the confined command can change the spill files",
                asked.display()
            )),
        ));
    }
    Ok((parent, moved, None))
}

/// Creates `path` and its missing parents, mode 0700.
///
/// Errors with [`Error::SpillUnusable`].
fn make_private_dir(path: &Path) -> Result<(), Error> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
        .map_err(|e| Error::SpillUnusable {
            path: path.to_path_buf(),
            problem: PathProblem::Io(e),
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

/// `text` in an anonymous file (memfd_create(2)), read from its start.
fn text_file(text: &str) -> io::Result<File> {
    use std::io::{Seek, Write};
    let fd =
        nix::sys::memfd::memfd_create(c"dsh-exec-stdin", nix::sys::memfd::MFdFlags::MFD_CLOEXEC)
            .map_err(io::Error::from)?;
    let mut file = File::from(fd);
    file.write_all(text.as_bytes())?;
    file.rewind()?;
    Ok(file)
}

fn open_stdin_file(path: &Path) -> Result<StdinFeed, Error> {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let unreadable = |problem: PathProblem| Error::StdinUnreadable {
        path: path.to_path_buf(),
        problem,
    };
    let meta = std::fs::metadata(path).map_err(|e| unreadable(PathProblem::Io(e)))?;
    if meta.is_dir() {
        return Err(unreadable(PathProblem::IsADirectory));
    }
    if meta.file_type().is_fifo() {
        access(path, AccessFlags::R_OK).map_err(|e| unreadable(PathProblem::NotReadable(e)))?;
        return Ok(StdinFeed::Fifo(path.to_path_buf()));
    }
    // O_NONBLOCK so that a device cannot hold up the open (reads block
    // again), O_NOCTTY so that a terminal never becomes the controlling
    // terminal of a job's supervisor, which leads a session.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY)
        .open(path)
        .map_err(|e| unreadable(PathProblem::Io(e)))?;
    let flags = nix::fcntl::fcntl(&file, nix::fcntl::FcntlArg::F_GETFL)
        .map_err(|e| unreadable(PathProblem::NotReadable(e)))?;
    let blocking = nix::fcntl::OFlag::from_bits_truncate(flags) & !nix::fcntl::OFlag::O_NONBLOCK;
    nix::fcntl::fcntl(&file, nix::fcntl::FcntlArg::F_SETFL(blocking))
        .map_err(|e| unreadable(PathProblem::NotReadable(e)))?;
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
        .map_err(|source| Error::Runtime {
            what: "the stdin thread",
            source,
        })?;
    Ok(tx)
}

/// Whether this process's own stdin holds bytes right now: a pipe or socket
/// with bytes waiting (FIONREAD, ioctl_tty(2)), or a regular file with bytes
/// past its offset. A terminal, `/dev/null` or an empty pipe does not.
pub fn stdin_holds_data() -> bool {
    let stdin = io::stdin();
    let Ok(meta) = nix::sys::stat::fstat(stdin.as_fd()) else {
        return false;
    };
    match meta.st_mode & libc::S_IFMT {
        libc::S_IFIFO | libc::S_IFSOCK => crate::sys::bytes_readable(&stdin).is_some_and(|n| n > 0),
        libc::S_IFREG => nix::unistd::lseek(stdin.as_fd(), 0, nix::unistd::Whence::SeekCur)
            .is_ok_and(|at| meta.st_size > at),
        _ => false,
    }
}
