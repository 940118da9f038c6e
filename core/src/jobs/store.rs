//! Where jobs live: the per-user jobs root, one private directory per job,
//! and the files in it.
//!
//! ```text
//! meta.json        id, command, workdir, start time, command pid (by the supervisor)
//! supervisor.json  the supervisor's pid and start time (by the launcher)
//! sock             the supervisor's Unix socket, while it runs
//! unread.json      output not yet read when the job ended
//! result.json      the result, with the kept byte counts
//! supervisor.log   the supervisor's own stderr
//! ```
//!
//! Files are written atomically (a temporary file, then rename(2)). A job
//! counts as running while its supervisor (same pid, same start time)
//! lives, whatever the files say.

use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, PathProblem};
use crate::result::RunResult;

/// A job's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// The supervisor runs the command.
    Running,
    /// The job ended; its result is written.
    Finished,
    /// The supervisor is gone without a result.
    Lost,
}

impl Status {
    /// `running`, `finished` or `lost`, as the JSON says.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Running => "running",
            Status::Finished => "finished",
            Status::Lost => "lost",
        }
    }
}

/// The per-user root of job directories: `STATE/jobs`, with `state_dir`
/// the directory of `dsh-exec`'s own state ([`crate::Ambient::state_dir`]).
/// Created 0700; refused when it, or the `dsh-exec` directory above it,
/// belongs to another user or is open to others.
///
/// Errors with [`Error::JobsUnusable`].
pub fn jobs_root(state_dir: &Path) -> Result<PathBuf, Error> {
    let uid = nix::unistd::geteuid().as_raw();
    let root = state_dir.join("jobs");
    let unusable = |problem: PathProblem| Error::JobsUnusable {
        path: root.clone(),
        problem,
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&root)
        .map_err(|e| unusable(PathProblem::Io(e)))?;
    let private = |p: &Path, mask: u32| {
        std::fs::symlink_metadata(p)
            .is_ok_and(|m| m.is_dir() && m.uid() == uid && m.permissions().mode() & mask == 0)
    };
    let parent_ok = match root.parent() {
        Some(p) => private(p, 0o022),
        None => true,
    };
    if !private(&root, 0o077) || !parent_ok {
        return Err(unusable(PathProblem::NotPrivate));
    }
    Ok(root)
}

/// True for a well-formed job id: `[a-z0-9]+`, so that no id can name a
/// path outside the jobs root.
pub fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

/// Creates the directory of a new job: (its id, its path).
///
/// Errors with [`Error::JobsUnusable`].
pub fn new_job(root: &Path) -> Result<(String, PathBuf), Error> {
    for _ in 0..16 {
        let id = format!("j{}", &crate::capture::random_suffix()[..8]);
        let dir = root.join(&id);
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok((id, dir)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(Error::JobsUnusable {
                    path: dir,
                    problem: PathProblem::Io(e),
                });
            }
        }
    }
    Err(Error::JobsUnusable {
        path: root.to_path_buf(),
        problem: PathProblem::Io(std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            "no free job id",
        )),
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

/// Writes `bytes` to `path` atomically (a temporary file, then rename(2)).
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

pub(crate) fn write_json(path: &Path, value: &impl Serialize) -> std::io::Result<()> {
    write_atomic(path, &serde_json::to_vec(value)?)
}

pub(crate) fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Option<T> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

/// The job's metadata, once its supervisor has started the command.
pub fn meta(dir: &Path) -> Option<JobMeta> {
    read_json(&dir.join("meta.json"))
}

/// `result.json`: the result, and the kept byte counts of its streams,
/// which the `--json` form leaves out but its truncation lines need.
#[derive(Serialize, Deserialize)]
struct StoredResult {
    result: RunResult,
    stdout_kept_bytes: u64,
    stderr_kept_bytes: u64,
}

impl From<&RunResult> for StoredResult {
    fn from(result: &RunResult) -> StoredResult {
        StoredResult {
            result: result.clone(),
            stdout_kept_bytes: result.stdout.kept_bytes,
            stderr_kept_bytes: result.stderr.kept_bytes,
        }
    }
}

impl From<StoredResult> for RunResult {
    fn from(stored: StoredResult) -> RunResult {
        let mut result = stored.result;
        result.stdout.kept_bytes = stored.stdout_kept_bytes;
        result.stderr.kept_bytes = stored.stderr_kept_bytes;
        result
    }
}

/// Writes the job's result.
pub(crate) fn write_result(dir: &Path, result: &RunResult) -> std::io::Result<()> {
    write_json(&dir.join("result.json"), &StoredResult::from(result))
}

/// The job's result, once it has finished.
pub fn result(dir: &Path) -> Option<RunResult> {
    read_json::<StoredResult>(&dir.join("result.json")).map(RunResult::from)
}

/// The supervisor of a job: pid and start time, written by the launcher
/// as soon as the supervisor process exists.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct SupervisorRecord {
    /// Its pid.
    pub pid: i32,
    /// Its start time (clock ticks since boot).
    pub start: u64,
}

/// The job's supervisor record.
pub fn supervisor(dir: &Path) -> Option<SupervisorRecord> {
    read_json(&dir.join("supervisor.json"))
}

/// Records the supervisor `pid` of the job in `dir` (by the launcher, right
/// after starting it), so the job counts as running from then on.
pub(crate) fn record_supervisor(dir: &Path, pid: i32) -> std::io::Result<()> {
    let record = SupervisorRecord {
        pid,
        start: crate::proctree::live_start_time(pid).unwrap_or(0),
    };
    write_json(&dir.join("supervisor.json"), &record)
}

/// How long a job directory without a supervisor record counts as being
/// started (not lost; prune must leave it): longer than a launcher waits.
const STARTING: Duration = Duration::from_secs(15);

/// The job's state: finished when its result is written, running while its
/// supervisor (same pid, same start time) lives, lost otherwise.
pub fn status(dir: &Path) -> Status {
    let record = supervisor(dir);
    // The supervisor's own record comes first: a result file alone (which a
    // command with write access to the directory could forge) does not end
    // a job whose supervisor still runs.
    if let Some(s) = record
        && crate::proctree::live_start_time(s.pid) == Some(s.start)
    {
        return Status::Running;
    }
    if record.is_none()
        && std::fs::metadata(dir)
            .and_then(|m| m.modified())
            .is_ok_and(|t| t.elapsed().is_ok_and(|age| age < STARTING))
    {
        return Status::Running;
    }
    if dir.join("result.json").exists() {
        Status::Finished
    } else {
        Status::Lost
    }
}

/// The jobs in `root`, oldest first: (id, directory).
///
/// Errors with [`Error::JobsUnusable`] when the root cannot be listed.
pub fn all(root: &Path) -> Result<Vec<(String, PathBuf)>, Error> {
    let mut jobs: Vec<(String, PathBuf)> = std::fs::read_dir(root)
        .map_err(|e| Error::JobsUnusable {
            path: root.to_path_buf(),
            problem: PathProblem::Io(e),
        })?
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
        .collect();
    jobs.sort_by_key(|(_, dir)| meta(dir).map(|m| m.started_at_ms).unwrap_or(0));
    Ok(jobs)
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
        .is_some_and(crate::capture::is_spill_dir_name);
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

/// Removes the directories of finished and lost jobs in `root` (with their
/// spill files when `spill`); returns how many were removed.
///
/// Errors with [`Error::JobsUnusable`] when the root cannot be listed.
pub fn prune(root: &Path, spill: bool) -> Result<usize, Error> {
    let mut pruned = 0;
    for (_, dir) in all(root)? {
        if status(&dir) == Status::Running {
            continue;
        }
        if spill && let Some(result) = result(&dir) {
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
    Ok(pruned)
}
