//! Transactions (`--transaction`): what a command changed under its
//! writable roots, and the decision to keep it or throw it away.
//!
//! A transaction's run writes into the upper layers of overlays
//! (`sandbox::overlay`), never into the real roots. Afterwards:
//! - `changes` reads the change set from the upper layers alone (no walk
//!   of the real tree): a whiteout (character device 0/0) is a deletion, an
//!   opaque directory (`trusted.overlay.opaque`) replaced the one beneath
//!   it, anything else was created, or modified when the real root holds
//!   the same path;
//! - [`commit`] applies an upper layer to its real root (`commit.rs`);
//! - [`discard`] removes it; [`diff`] shows it.
//!
//! A transaction's record, `STATE/transactions/ID/meta.json`, lives in the
//! state directory, which no confined run can write or read.

mod commit;
mod diff;

use std::ffi::OsStr;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::libc;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::sandbox::overlay::{LayerMeta, OnExit, Overlays, transactions_dir, valid_id};

pub use commit::{CommitOptions, CommitReport, Refusal, commit};
pub use diff::diff;

/// How many changes a result lists; the rest are counted in
/// `changes_more`.
pub const MAX_CHANGES: usize = 1000;

/// What happened to a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// The path did not exist in the real root.
    Created,
    /// The path exists in the real root and its content or metadata differ.
    Modified,
    /// The path exists in the real root and the command removed it.
    Deleted,
}

/// The type of file at a changed path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link.
    Symlink,
    /// A FIFO, socket or device.
    Special,
}

/// One changed path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Change {
    /// The path, absolute, as the real root names it.
    #[serde(serialize_with = "crate::serde_paths::lossy_path")]
    pub path: PathBuf,
    /// Created, modified or deleted (a rename is a deletion and a
    /// creation).
    pub change: ChangeKind,
    /// The type of file (for a deletion: of the file removed).
    pub kind: EntryKind,
    /// The new size in bytes, for a regular file that exists afterwards.
    pub size: Option<u64>,
    /// For a modification, what differs: `content`, `mode`, `owner`,
    /// `times`, `xattrs`, `links` (a file's hard-link count), `target` (a
    /// symlink's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub what: Vec<String>,
}

/// Where a transaction stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Its run has not ended (or its `dsh-exec` was killed: `owner` is
    /// gone, and the transaction can only be discarded).
    Running,
    /// Waiting for `commit` or `discard`.
    Pending,
    /// Applied to the real roots (every change, or every change but those
    /// refused: see the commit report).
    Committed,
    /// Thrown away.
    Discarded,
}

/// A run's transaction, as the result reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct TransactionFacts {
    /// The transaction id (`dsh-exec commit ID`).
    pub id: String,
    /// Where it stands after `--on-exit`.
    pub state: State,
    /// The first [`MAX_CHANGES`] changes, by path.
    pub changes: Vec<Change>,
    /// How many more changes there are.
    pub changes_more: u64,
    /// How many paths were created, modified and deleted (all of them, not
    /// only those listed).
    pub created: u64,
    /// See `created`.
    pub modified: u64,
    /// See `created`.
    pub deleted: u64,
    /// What `--on-exit commit` applied and refused; `null` otherwise.
    pub commit: Option<CommitReport>,
    /// What went wrong (`null`: nothing): the change set could not be read
    /// whole, or `--on-exit` could not be carried out (`not committed: the
    /// command exited with 1`: the transaction stays pending).
    pub error: Option<String>,
}

/// `meta.json`: a transaction's record.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Meta {
    /// The id.
    pub id: String,
    /// The script the run gave `bash -c`.
    pub command: String,
    /// The run's working directory.
    #[serde(with = "crate::serde_paths::exact_path")]
    pub workdir: PathBuf,
    /// When the layers were made: (seconds, nanoseconds) since the epoch.
    pub started: (i64, i64),
    /// Where it stands.
    pub state: State,
    /// The overlaid roots and their upper layers.
    pub layers: Vec<LayerMeta>,
    /// Paths `commit` never writes: the run's protected paths (git config
    /// and hooks, editor and agent files, shell start-up files, dsh-exec's
    /// own files), whether they existed or not.
    #[serde(with = "crate::serde_paths::exact_paths")]
    pub protected: Vec<PathBuf>,
    /// While it runs: the `dsh-exec` process that runs it (pid, and its
    /// start time in clock ticks since boot, so a reused pid is not taken
    /// for it).
    #[serde(default)]
    pub owner: Option<(i32, u64)>,
}

impl Meta {
    /// Whether the process that runs it is still there.
    pub fn owner_alive(&self) -> bool {
        self.owner.is_some_and(|(pid, start)| {
            crate::sys::procfs::stat(&pid.to_string())
                .is_some_and(|s| s.start_time == start && !s.is_dead())
        })
    }
}

/// Takes the transaction's lock (flock(2) on its directory, exclusive, not
/// waiting): one `commit` or `discard` at a time.
///
/// # Errors
/// [`Error::Transaction`] when another process holds it.
pub(crate) fn lock(dir: &Path, id: &str) -> Result<nix::fcntl::Flock<std::fs::File>, Error> {
    let file = std::fs::File::open(dir).map_err(|e| failed(id, e))?;
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock)
        .map_err(|_| failed(id, "being committed or discarded by another process"))
}

/// Whether `meta` may be decided now (`commit`: only a pending one;
/// `discard`: also one whose run was lost).
///
/// # Errors
/// [`Error::Transaction`] saying why not.
pub(crate) fn decidable(meta: &Meta, committing: bool) -> Result<(), Error> {
    match meta.state {
        State::Pending => Ok(()),
        State::Running if meta.owner_alive() => Err(failed(&meta.id, "its run has not ended")),
        State::Running if committing => Err(failed(
            &meta.id,
            "its run was lost (its dsh-exec was killed): discard it",
        )),
        State::Running => Ok(()),
        State::Committed | State::Discarded => Err(failed(&meta.id, "already decided")),
    }
}

/// Records a transaction whose run is starting: its record, `Running`,
/// owned by this process.
pub(crate) fn begin(overlays: &Overlays, command: &str, workdir: &Path) {
    let owner = crate::sys::procfs::stat("self").map(|s| (std::process::id() as i32, s.start_time));
    let meta = Meta {
        id: overlays.id.clone(),
        command: command.to_string(),
        workdir: workdir.to_path_buf(),
        started: overlays.started,
        state: State::Running,
        layers: overlays.layers.clone(),
        protected: Vec::new(),
        owner,
    };
    let _ = write_meta(&overlays.dir, &meta);
}

fn failed(id: &str, reason: impl std::fmt::Display) -> Error {
    Error::Transaction {
        id: id.to_string(),
        reason: reason.to_string(),
    }
}

/// The directory of transaction `id` under `state_dir`.
///
/// # Errors
/// [`Error::Transaction`] for a malformed or unknown id.
pub fn dir_of(state_dir: &Path, id: &str) -> Result<PathBuf, Error> {
    if !valid_id(id) {
        return Err(failed(id, "not a transaction id (t followed by [a-z0-9])"));
    }
    let dir = transactions_dir(state_dir).join(id);
    if !dir.join("meta.json").is_file() {
        return Err(failed(id, "no such transaction"));
    }
    Ok(dir)
}

/// Reads transaction `id`'s record.
///
/// # Errors
/// [`Error::Transaction`]: unknown id, unreadable record.
pub fn read_meta(state_dir: &Path, id: &str) -> Result<Meta, Error> {
    let dir = dir_of(state_dir, id)?;
    let text = std::fs::read(dir.join("meta.json")).map_err(|e| failed(id, e))?;
    serde_json::from_slice(&text).map_err(|e| failed(id, format!("meta.json: {e}")))
}

pub(crate) fn write_meta(dir: &Path, meta: &Meta) -> std::io::Result<()> {
    let bytes = serde_json::to_vec_pretty(meta).map_err(std::io::Error::other)?;
    let tmp = dir.join("meta.json.tmp");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(tmp, dir.join("meta.json"))
}

/// Every transaction's record under `state_dir`, oldest first (pending
/// ones; decided ones are removed).
pub fn list(state_dir: &Path) -> Vec<Meta> {
    let mut out: Vec<Meta> = std::fs::read_dir(transactions_dir(state_dir))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let id = e.file_name().to_string_lossy().into_owned();
            read_meta(state_dir, &id).ok()
        })
        .collect();
    out.sort_by_key(|m| m.started);
    out
}

/// Removes the transaction directories that hold no record and have not
/// changed for `older_than` (at least a minute: a run records its
/// transaction right after making its layers, before its command starts):
/// those of a `dsh-exec` killed in between. How many were removed.
pub fn prune_unrecorded(state_dir: &Path, older_than: std::time::Duration) -> usize {
    let floor = older_than.max(std::time::Duration::from_secs(60));
    std::fs::read_dir(transactions_dir(state_dir))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| valid_id(&e.file_name().to_string_lossy()))
        .filter(|e| !e.path().join("meta.json").exists())
        .filter(|e| {
            e.metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age >= floor)
        })
        .filter(|e| std::fs::remove_dir_all(e.path()).is_ok())
        .count()
}

/// Throws transaction `id` away: its layers and record are removed.
///
/// # Errors
/// [`Error::Transaction`]: unknown id, or the removal failed.
pub fn discard(state_dir: &Path, id: &str) -> Result<(), Error> {
    let dir = dir_of(state_dir, id)?;
    let _lock = lock(&dir, id)?;
    decidable(&read_meta(state_dir, id)?, false)?;
    std::fs::remove_dir_all(&dir).map_err(|e| failed(id, format!("{}: {e}", dir.display())))
}

/// Ends a transaction's run: records it, reads its changes, and applies
/// `on_exit`. `protected`: the run's protected paths (see [`Meta`]).
/// `failed`: why the command did not succeed (a nonzero exit, a signal, a
/// timeout, an abort), when it did not: `--on-exit commit` then leaves the
/// transaction pending rather than apply half a piece of work.
pub(crate) fn finish(
    mut overlays: Overlays,
    on_exit: OnExit,
    command: &str,
    workdir: &Path,
    protected: Vec<PathBuf>,
    failed: Option<String>,
) -> TransactionFacts {
    // The run's tree is gone; closing the mounts lets the overlays go.
    overlays.unmount();
    overlays.finished = true;
    let meta = Meta {
        id: overlays.id.clone(),
        command: command.to_string(),
        workdir: workdir.to_path_buf(),
        started: overlays.started,
        state: State::Pending,
        layers: overlays.layers.clone(),
        protected,
        owner: None,
    };
    let recorded = write_meta(&overlays.dir, &meta);
    let mut facts = facts_of(&meta);
    if let Err(e) = recorded {
        facts.error = Some(format!("meta.json: {e}"));
        return facts;
    }
    let state_dir = overlays
        .dir
        .parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_default();
    match on_exit {
        OnExit::Keep => {}
        OnExit::Discard => match discard(&state_dir, &meta.id) {
            Ok(()) => facts.state = State::Discarded,
            Err(e) => facts.error = Some(e.to_string()),
        },
        OnExit::Commit if failed.is_some() => {
            facts.error = failed.map(|why| format!("not committed: {why}"));
        }
        OnExit::Commit => match commit(&state_dir, &meta.id, CommitOptions::default()) {
            Ok(report) => {
                facts.state = report.state;
                facts.commit = Some(report);
            }
            Err(e) => facts.error = Some(e.to_string()),
        },
    }
    facts
}

/// The facts of a transaction as its record and layers stand.
pub fn facts_of(meta: &Meta) -> TransactionFacts {
    let mut all = Vec::new();
    let mut error = None;
    for layer in &meta.layers {
        if let Err(e) = changes(layer, &mut all) {
            error = Some(format!("{}: {e}", layer.upper.display()));
        }
    }
    all.sort_by(|a, b| a.path.cmp(&b.path));
    let count = |k: ChangeKind| all.iter().filter(|c| c.change == k).count() as u64;
    let (created, modified, deleted) = (
        count(ChangeKind::Created),
        count(ChangeKind::Modified),
        count(ChangeKind::Deleted),
    );
    let more = all.len().saturating_sub(MAX_CHANGES) as u64;
    all.truncate(MAX_CHANGES);
    TransactionFacts {
        id: meta.id.clone(),
        state: meta.state,
        changes: all,
        changes_more: more,
        created,
        modified,
        deleted,
        commit: None,
        error,
    }
}

/// An entry of an upper layer or of a real root.
pub(crate) struct Entry {
    pub(crate) st: libc::stat,
}

impl Entry {
    pub(crate) fn kind(&self) -> EntryKind {
        match self.st.st_mode & libc::S_IFMT {
            libc::S_IFREG => EntryKind::File,
            libc::S_IFDIR => EntryKind::Dir,
            libc::S_IFLNK => EntryKind::Symlink,
            _ => EntryKind::Special,
        }
    }

    /// A whiteout: a character device 0/0 (overlayfs.rst, "whiteouts and
    /// opaque directories").
    pub(crate) fn is_whiteout(&self) -> bool {
        self.st.st_mode & libc::S_IFMT == libc::S_IFCHR && self.st.st_rdev == 0
    }
}

/// The extended attribute that marks an opaque directory: what was beneath
/// it in the lower layer is hidden (overlayfs.rst).
pub(crate) const OPAQUE: &str = "trusted.overlay.opaque";

/// Whether the directory open as `dir` is opaque.
pub(crate) fn is_opaque(dir: &OwnedFd) -> bool {
    crate::sys::fs::xattrs(dir)
        .iter()
        .any(|(n, v)| n.as_bytes() == OPAQUE.as_bytes() && v.as_slice() == b"y")
}

/// Extended attributes that belong to the overlay itself, never to the
/// file.
pub(crate) fn overlay_xattr(name: &[u8]) -> bool {
    // Mounted without `userxattr`: `user.overlay.*` are the file's own.
    name.starts_with(b"trusted.overlay.")
}

pub(crate) fn stat_at(dir: RawFd, name: &OsStr) -> Option<Entry> {
    crate::sys::fs::stat_at(dir, name)
        .ok()
        .map(|st| Entry { st })
}

/// The names in directory `dir`, sorted.
pub(crate) fn sorted_names(dir: RawFd) -> Vec<std::ffi::OsString> {
    let mut names = crate::sandbox::undo::names(dir);
    names.sort();
    names
}

/// Opens the real root of `layer` (no symlink on the way) and checks it is
/// the directory the run overlaid.
pub(crate) fn open_real_root(layer: &LayerMeta) -> std::io::Result<OwnedFd> {
    let fd = crate::sys::fs::open_no_symlinks(&layer.root, libc::O_RDONLY | libc::O_DIRECTORY)?;
    let st = crate::sys::fs::fstat(&fd).map_err(std::io::Error::from_raw_os_error)?;
    if (st.st_dev, st.st_ino) != layer.root_id {
        return Err(std::io::Error::other(
            "the root is no longer the directory the transaction ran on",
        ));
    }
    Ok(fd)
}

/// Appends `layer`'s changes to `out`; errors when part of the layer is
/// deeper than [`MAX_DEPTH`] (not listed, and refused by `commit`).
fn changes(layer: &LayerMeta, out: &mut Vec<Change>) -> std::io::Result<()> {
    let upper = crate::sys::fs::open_no_symlinks(&layer.upper, libc::O_RDONLY | libc::O_DIRECTORY)?;
    let real = open_real_root(layer).ok();
    // The root's own mode, owner and xattrs.
    if let Some(r) = &real {
        let dot = OsStr::new(".");
        if let (Some(old), Some(new)) =
            (stat_at(r.as_raw_fd(), dot), stat_at(upper.as_raw_fd(), dot))
        {
            let what = differences(upper.as_raw_fd(), Some(r), dot, &old, &new);
            if !what.is_empty() {
                out.push(Change {
                    path: layer.root.clone(),
                    change: ChangeKind::Modified,
                    kind: EntryKind::Dir,
                    size: None,
                    what,
                });
            }
        }
    }
    let mut too_deep = None;
    // The root's entries shared among threads (a stat and an xattr list
    // per changed path on each side: the cores add up on a large layer).
    let names = sorted_names(upper.as_raw_fd());
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(4);
    if threads < 2 || names.len() < 16 {
        walk_names(
            &upper,
            real.as_ref(),
            &layer.root,
            &names,
            out,
            0,
            &mut too_deep,
            false,
        );
    } else {
        let per = names.len().div_ceil(threads);
        let parts: Vec<(Vec<Change>, Option<PathBuf>)> = std::thread::scope(|s| {
            let handles: Vec<_> = names
                .chunks(per)
                .map(|chunk| {
                    let (upper, real) = (&upper, real.as_ref());
                    s.spawn(move || {
                        let (mut out, mut deep) = (Vec::new(), None);
                        walk_names(
                            upper,
                            real,
                            &layer.root,
                            chunk,
                            &mut out,
                            0,
                            &mut deep,
                            false,
                        );
                        (out, deep)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                .collect()
        });
        for (part, deep) in parts {
            out.extend(part);
            if too_deep.is_none() {
                too_deep = deep;
            }
        }
    }
    match too_deep {
        Some(at) => Err(std::io::Error::other(format!(
            "{} is deeper than {MAX_DEPTH} levels: what it holds is not listed, and commit \
             refuses it",
            at.display()
        ))),
        None => Ok(()),
    }
}

/// How deep the walk of an upper layer goes: as deep as the git check
/// judges (`sandbox::gitcheck::MAX_DEPTH`), so that nothing is committed
/// that was not judged.
pub(crate) const MAX_DEPTH: usize = crate::sandbox::gitcheck::MAX_DEPTH;

/// `replaced`: a directory above was opaque, so this one replaces its real
/// counterpart whole too (a lookup through the overlay stops at an opaque
/// directory: nothing beneath it is merged with the lower layer).
fn walk(
    upper: &OwnedFd,
    real: Option<&OwnedFd>,
    at: &Path,
    out: &mut Vec<Change>,
    depth: usize,
    too_deep: &mut Option<PathBuf>,
    replaced: bool,
) {
    if depth >= MAX_DEPTH {
        too_deep.get_or_insert_with(|| at.to_path_buf());
        return;
    }
    let names = sorted_names(upper.as_raw_fd());
    let replaced = replaced || is_opaque(upper);
    for (name, e) in hidden(real, &names, replaced) {
        out.push(Change {
            path: at.join(&name),
            change: ChangeKind::Deleted,
            kind: e.kind(),
            size: None,
            what: Vec::new(),
        });
    }
    walk_names(upper, real, at, &names, out, depth, too_deep, replaced);
}

/// The entries of the real directory `real` that an upper directory
/// holding `names` (sorted) hides, when it `replaced` the real one (opaque,
/// or below an opaque one): what the command removed. None otherwise.
pub(crate) fn hidden(
    real: Option<&OwnedFd>,
    names: &[std::ffi::OsString],
    replaced: bool,
) -> Vec<(std::ffi::OsString, Entry)> {
    let Some(real) = real.filter(|_| replaced) else {
        return Vec::new();
    };
    sorted_names(real.as_raw_fd())
        .into_iter()
        .filter(|name| names.binary_search(name).is_err())
        .filter_map(|name| stat_at(real.as_raw_fd(), &name).map(|e| (name, e)))
        .collect()
}

/// [`walk`] of the entries `names` of the upper directory `upper`.
#[allow(clippy::too_many_arguments)]
fn walk_names(
    upper: &OwnedFd,
    real: Option<&OwnedFd>,
    at: &Path,
    names: &[std::ffi::OsString],
    out: &mut Vec<Change>,
    depth: usize,
    too_deep: &mut Option<PathBuf>,
    replaced: bool,
) {
    for name in names {
        let Some(new) = stat_at(upper.as_raw_fd(), name) else {
            continue;
        };
        let path = at.join(name);
        let old = real.and_then(|r| stat_at(r.as_raw_fd(), name));
        if new.is_whiteout() {
            if let Some(old) = old {
                out.push(Change {
                    path,
                    change: ChangeKind::Deleted,
                    kind: old.kind(),
                    size: None,
                    what: Vec::new(),
                });
            }
            continue;
        }
        let size = (new.kind() == EntryKind::File).then_some(new.st.st_size as u64);
        let what = match &old {
            None => None,
            Some(old) if old.kind() != new.kind() => {
                out.push(Change {
                    path: path.clone(),
                    change: ChangeKind::Deleted,
                    kind: old.kind(),
                    size: None,
                    what: Vec::new(),
                });
                None
            }
            Some(old) => Some(differences(upper.as_raw_fd(), real, name, old, &new)),
        };
        match what {
            None => out.push(Change {
                path: path.clone(),
                change: ChangeKind::Created,
                kind: new.kind(),
                size,
                what: Vec::new(),
            }),
            Some(what) if !what.is_empty() => out.push(Change {
                path: path.clone(),
                change: ChangeKind::Modified,
                kind: new.kind(),
                size,
                what,
            }),
            Some(_) => {}
        }
        if new.kind() == EntryKind::Dir
            && let Ok(sub) = crate::sandbox::undo::open_dir_at(upper.as_raw_fd(), name)
        {
            let real_sub = real
                .filter(|_| old.as_ref().is_some_and(|o| o.kind() == EntryKind::Dir))
                .and_then(|r| crate::sandbox::undo::open_dir_at(r.as_raw_fd(), name).ok());
            walk(
                &sub,
                real_sub.as_ref(),
                &path,
                out,
                depth + 1,
                too_deep,
                replaced,
            );
        }
    }
}

/// What differs between the real `old` and the upper `new` entry `name`
/// (same type). A directory's times are left out: they change with every
/// entry made or removed in it, which the entries themselves report.
fn differences(
    upper: RawFd,
    real: Option<&OwnedFd>,
    name: &OsStr,
    old: &Entry,
    new: &Entry,
) -> Vec<String> {
    let mut what = Vec::new();
    let (o, n) = (&old.st, &new.st);
    let kind = new.kind();
    match kind {
        EntryKind::File => {
            // Bytes compared whatever the times say (`touch -r` can put
            // them back): only files the command opened for writing were
            // copied up, so this reads what the copy-up wrote.
            if o.st_size != n.st_size || !same_bytes(upper, real, name) {
                what.push("content");
            }
            if (o.st_mtime, o.st_mtime_nsec) != (n.st_mtime, n.st_mtime_nsec) {
                what.push("times");
            }
        }
        EntryKind::Symlink => {
            let target = |dir: RawFd| crate::sys::fs::read_link_at(dir, name).ok();
            if target(upper) != real.and_then(|r| target(r.as_raw_fd())) {
                what.push("target");
            }
            if (o.st_mtime, o.st_mtime_nsec) != (n.st_mtime, n.st_mtime_nsec) {
                what.push("times");
            }
        }
        EntryKind::Special => {
            if (o.st_mtime, o.st_mtime_nsec) != (n.st_mtime, n.st_mtime_nsec) {
                what.push("times");
            }
        }
        EntryKind::Dir => {}
    }
    if kind != EntryKind::Symlink && o.st_mode & 0o7777 != n.st_mode & 0o7777 {
        what.push("mode");
    }
    if (o.st_uid, o.st_gid) != (n.st_uid, n.st_gid) {
        what.push("owner");
    }
    // A hard link made or split (a copy-up splits one: overlayfs.rst).
    if kind == EntryKind::File && o.st_nlink != n.st_nlink {
        what.push("links");
    }
    if kind != EntryKind::Symlink
        && xattrs_of(upper, name)
            != real
                .map(|r| xattrs_of(r.as_raw_fd(), name))
                .unwrap_or_default()
    {
        what.push("xattrs");
    }
    what.into_iter().map(String::from).collect()
}

/// The file's own extended attributes (not the overlay's), sorted.
pub(crate) fn xattrs_of(dir: RawFd, name: &OsStr) -> Vec<(std::ffi::CString, Vec<u8>)> {
    let mut x = crate::sys::fs::xattrs_at(dir, name, |n| !overlay_xattr(n));
    x.sort();
    x
}

/// Whether the regular files `name` in `upper` and in `real` hold the
/// same bytes.
fn same_bytes(upper: RawFd, real: Option<&OwnedFd>, name: &OsStr) -> bool {
    use std::io::Read;
    let Some(real) = real else {
        return false;
    };
    let open = |dir: RawFd| {
        crate::sys::fs::open_at(dir, name.as_bytes(), libc::O_RDONLY | libc::O_NOFOLLOW, 0)
            .map(std::fs::File::from)
            .ok()
    };
    let (Some(mut a), Some(mut b)) = (open(upper), open(real.as_raw_fd())) else {
        return false;
    };
    let (mut x, mut y) = (vec![0u8; 64 * 1024], vec![0u8; 64 * 1024]);
    loop {
        let (n, m) = match (a.read(&mut x), b.read(&mut y)) {
            (Ok(n), Ok(m)) => (n, m),
            _ => return false,
        };
        if n != m || x[..n] != y[..m] {
            return false;
        }
        if n == 0 {
            return true;
        }
    }
}
