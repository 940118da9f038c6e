//! `commit`: a transaction's upper layers applied to their real roots.
//!
//! Written as an attacker reads it: the upper layer is what a confined
//! command made, and the real tree may have been changed by anyone since.
//! - Every real directory is reached from the root's descriptor with
//!   openat2(2) `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
//!   RESOLVE_NO_MAGICLINKS`: a symlink planted anywhere on the way (in the
//!   real tree, since the upper layer's directories are the real ones'
//!   names) fails that path instead of leading outside the root.
//! - The upper layer is read with `O_NOFOLLOW` relative to held
//!   descriptors; a symlink in it is committed as a symlink, never
//!   followed.
//! - A file is written under a temporary name beside its target
//!   (`O_CREAT | O_EXCL | O_NOFOLLOW`), given its owner, mode, extended
//!   attributes and times, then renamed over the target (rename(2) is
//!   atomic within a directory): no reader sees half a file.
//! - A path is refused, and named, when it is protected (the run's
//!   protected paths: git config and hooks, editor and agent files, shell
//!   start-up files, dsh-exec's own), or when the real path changed after
//!   the transaction started: its ctime is at or after the start (no
//!   process can set a ctime: inode(7)). `--atomic` refuses the whole
//!   commit instead.
//! - Git metadata the commit brings in is judged as a confined run's is:
//!   a snapshot of every git directory under the root before, a check
//!   after (`sandbox::gitcheck`), which puts aside planted hooks and
//!   command-running config.
//!
//! What the kernel relies on: openat2(2) resolve flags (Linux 5.6);
//! renameat(2) atomic replacement; the overlay's upper layer format
//! (overlayfs.rst).

use std::ffi::{OsStr, OsString};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::libc;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{
    EntryKind, Meta, State, failed, is_opaque, overlay_xattr, read_meta, sorted_names, stat_at,
    write_meta,
};
use crate::error::Error;
use crate::sandbox::overlay::LayerMeta;
use crate::sys::fs::{RESOLVE_BENEATH, RESOLVE_NO_MAGICLINKS, RESOLVE_NO_SYMLINKS};

/// A path `commit` did not apply, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Refusal {
    /// The real path.
    #[serde(serialize_with = "crate::serde_paths::lossy_path")]
    pub path: PathBuf,
    /// Why: `protected path`, `changed in the real tree after the
    /// transaction started`, a planted git file put aside, or the
    /// operating system's error.
    pub reason: String,
}

/// What a commit did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct CommitReport {
    /// Paths written, made or removed.
    pub applied: u64,
    /// Paths not applied (protected, conflicting, put aside, failed).
    pub refused: Vec<Refusal>,
    /// `committed` when every change was applied (the transaction is
    /// gone), `pending` when some were refused: those stay in the
    /// transaction (`diff` shows them, `discard` drops them, `commit
    /// --force` applies conflicting ones), and with `--atomic` nothing was
    /// applied.
    pub state: super::State,
}

impl CommitReport {
    /// The report as `dsh-exec commit` prints it: a `refused: PATH
    /// (REASON)` line for each refused path, then one summary line.
    pub fn text(&self, id: &str, atomic: bool) -> String {
        let mut text: String = self
            .refused
            .iter()
            .map(|r| format!("refused: {} ({})\n", r.path.display(), r.reason))
            .collect();
        let (n, m) = (self.applied, self.refused.len());
        text.push_str(&match (self.state, atomic) {
            (State::Committed, _) => {
                format!("[committed transaction {id}: {n} applied, {m} refused]\n")
            }
            (_, true) if n == 0 => {
                format!("[transaction {id} not committed (--atomic): {m} refused]\n")
            }
            _ => format!(
                "[committed transaction {id}: {n} applied, {m} refused; the refused stay \
                 pending: diff, discard, or commit --force for conflicts]\n"
            ),
        });
        text
    }
}

/// How a commit treats what it would refuse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CommitOptions {
    /// Apply nothing when any path would be refused.
    pub atomic: bool,
    /// Apply paths changed in the real tree after the transaction started
    /// too (never protected paths or planted git metadata).
    pub force: bool,
}

/// One step of a commit, in walk order (a directory before what it holds).
enum Op {
    /// Remove the real path (a whiteout, or an entry an opaque directory
    /// hid).
    Remove,
    /// Make or update a directory (its real entries the upper one lacks,
    /// when opaque, are `Remove` steps of their own).
    Dir,
    /// A directory the real root has as it is: only what it holds changed.
    Enter,
    /// Write a file, symlink or FIFO from the upper layer.
    Put,
    /// A directory deeper than [`super::MAX_DEPTH`] levels: neither judged
    /// by the git check nor applied, refused whole.
    TooDeep,
}

struct Step {
    rel: PathBuf,
    op: Op,
    /// For `Put`/`Dir`: the real path exists and is not a directory of
    /// the same type (removed first).
    replace: bool,
}

/// Applies transaction `id` to its real roots. Each change applied leaves
/// the upper layer; when all were, the transaction is removed, else what
/// was refused stays pending (see [`CommitReport::state`]).
///
/// # Errors
/// [`Error::Transaction`]: unknown id, a transaction already decided or
/// still running, one another process is deciding, a root that is no
/// longer the directory it ran on.
pub fn commit(state_dir: &Path, id: &str, opts: CommitOptions) -> Result<CommitReport, Error> {
    let dir = super::dir_of(state_dir, id)?;
    let _lock = super::lock(&dir, id)?;
    let mut meta = read_meta(state_dir, id)?;
    super::decidable(&meta, true)?;
    let mut plans = Vec::new();
    for layer in &meta.layers {
        let real = super::open_real_root(layer)
            .map_err(|e| failed(id, format!("{}: {e}", layer.root.display())))?;
        let upper =
            crate::sys::fs::open_no_symlinks(&layer.upper, libc::O_RDONLY | libc::O_DIRECTORY)
                .map_err(|e| failed(id, format!("{}: {e}", layer.upper.display())))?;
        let mut steps = Vec::new();
        // The root itself: its own mode, owner and xattrs.
        if let (Some(old), Some(new)) = (
            stat_at(real.as_raw_fd(), OsStr::new(".")),
            stat_at(upper.as_raw_fd(), OsStr::new(".")),
        ) {
            let same = unchanged(upper.as_raw_fd(), Some(&real), OsStr::new("."), &old, &new);
            steps.push(Step {
                rel: PathBuf::new(),
                op: if same { Op::Enter } else { Op::Dir },
                replace: false,
            });
        }
        plan(&upper, Some(&real), Path::new(""), &mut steps, 0, false);
        plans.push((layer, real, upper, steps));
    }
    // The git snapshot first: its walk takes time, and a real path
    // changed during it must still be judged a conflict (below, and again
    // right before each write).
    let roots: Vec<(PathBuf, usize)> = meta
        .layers
        .iter()
        .map(|l| (l.root.clone(), crate::sandbox::gitcheck::FULL))
        .collect();
    let git = crate::sandbox::gitcheck::Snapshot::take(&roots);
    let mut report = CommitReport {
        applied: 0,
        refused: Vec::new(),
        state: State::Pending,
    };
    let refuse = |meta: &Meta,
                  layer: &LayerMeta,
                  real: &OwnedFd,
                  upper: &OwnedFd,
                  s: &Step|
     -> Option<String> {
        match s.op {
            Op::Enter => return None,
            Op::TooDeep => {
                return Some(format!(
                    "deeper than {} levels: not judged, not committed",
                    super::MAX_DEPTH
                ));
            }
            _ => {}
        }
        let path = layer.root.join(&s.rel);
        // A protected path, or what holds one and would be removed or
        // replaced with it (`.git` made a file).
        let removes = matches!(s.op, Op::Remove) || s.replace;
        if meta
            .protected
            .iter()
            .any(|p| path.starts_with(p) || (removes && p.starts_with(&path)))
        {
            return Some("protected path".into());
        }
        if let Some(why) = plants_git(real, upper, &layer.root, s, meta.started) {
            return Some(why);
        }
        // What a removal or replacement takes away is judged whole: an
        // edit made meanwhile deep inside a removed directory counts.
        conflict(real, &s.rel, meta.started, removes, !opts.force)
    };
    let mut refused: Vec<(usize, usize)> = Vec::new();
    for (li, (layer, real, upper, steps)) in plans.iter().enumerate() {
        for (si, s) in steps.iter().enumerate() {
            if let Some(reason) = refuse(&meta, layer, real, upper, s) {
                refused.push((li, si));
                report.refused.push(super::commit::Refusal {
                    path: layer.root.join(&s.rel),
                    reason,
                });
            }
        }
    }
    if opts.atomic && !report.refused.is_empty() {
        return Ok(report);
    }
    for (li, (layer, real, upper, steps)) in plans.iter().enumerate() {
        // Directories whose times are set after what they hold.
        let mut dirs: Vec<&Step> = Vec::new();
        let mut links = Links::new();
        // Taken out of the layer once all are written: until then the
        // layer's link counts and directory times are as the run left them.
        let mut applied: Vec<&Step> = Vec::new();
        // What makes git run something (a repository's HEAD, config,
        // hooks, a `.git` pointer) goes last, right before the git check
        // judges it: until then no repository the commit brings is one
        // git would use.
        let first: Vec<usize> = (0..steps.len())
            .filter(|i| !activates_git(&steps[*i]))
            .collect();
        let last: Vec<usize> = (0..steps.len())
            .filter(|i| activates_git(&steps[*i]))
            .collect();
        for (phase, order) in [first, last].iter().enumerate() {
            if phase == 1 {
                // Deepest first, so that setting a directory's times is the
                // last change made in it; before the files that make git run
                // something, so that nothing delays the git check after them.
                dirs.sort_by_key(|s| std::cmp::Reverse(s.rel.components().count()));
                for s in &dirs {
                    let _ = copy_times(real, upper, &s.rel);
                }
            }
            for &si in order {
                let s = &steps[si];
                if refused.contains(&(li, si)) {
                    continue;
                }
                // A step below a refused directory step is refused with it.
                if refused.iter().any(|(l, r)| {
                    *l == li && matches!(steps[*r].op, Op::Dir) && s.rel.starts_with(&steps[*r].rel)
                }) {
                    continue;
                }
                // Changed since it was judged (a walk ago)?
                let removes = matches!(s.op, Op::Remove) || s.replace;
                if !opts.force
                    && !matches!(s.op, Op::Enter)
                    && let Some(reason) = conflict(real, &s.rel, meta.started, removes, !opts.force)
                {
                    report.refused.push(Refusal {
                        path: layer.root.join(&s.rel),
                        reason,
                    });
                    continue;
                }
                match apply(real, upper, s, &mut links) {
                    Ok(()) if matches!(s.op, Op::Enter) => dirs.push(s),
                    Ok(()) => {
                        report.applied += 1;
                        if matches!(s.op, Op::Dir) {
                            dirs.push(s);
                        } else {
                            applied.push(s);
                        }
                    }
                    Err(e) => report.refused.push(Refusal {
                        path: layer.root.join(&s.rel),
                        reason: e.to_string(),
                    }),
                }
            }
        }
        // The files that make git run something changed their
        // directories' times: set again.
        if applied.iter().any(|s| activates_git(s)) {
            for s in &dirs {
                let _ = copy_times(real, upper, &s.rel);
            }
        }
        // What stays pending must still say what the command did: under a
        // directory that replaced its real one (opaque) and holds a refused
        // path, the applied entries stay in the layer too (taken out, the
        // directory would hide them as removed), and the mark stays. (A
        // second commit finds them unchanged, or changed by this one: a
        // conflict, which --force applies.)
        let refused_here: Vec<PathBuf> = report
            .refused
            .iter()
            .filter_map(|r| r.path.strip_prefix(&layer.root).ok().map(Path::to_path_buf))
            .collect();
        let held = |rel: &Path| {
            rel.ancestors().skip(1).any(|a| {
                refused_here.iter().any(|r| r.starts_with(a) && r != a)
                    && open_beneath(upper, a).is_ok_and(|d| super::is_opaque(&d))
            })
        };
        for s in applied {
            if refused_here.is_empty() || !held(&s.rel) {
                forget(upper, s);
            }
        }
        // An opaque directory with nothing refused beneath it now matches
        // its real directory: no longer opaque, it shows nothing removed.
        for s in &dirs {
            if !refused_here
                .iter()
                .any(|r| r.starts_with(&s.rel) && *r != s.rel)
            {
                unmark_opaque(upper, &s.rel);
            }
        }
    }
    let steps_refused = !report.refused.is_empty();
    for c in git.check() {
        report.refused.push(Refusal {
            path: c.path.clone(),
            reason: c
                .reason
                .clone()
                .unwrap_or_else(|| "planted git metadata, put aside".into()),
        });
    }
    if !steps_refused {
        meta.state = State::Committed;
        let _ = write_meta(&dir, &meta);
        let _ = std::fs::remove_dir_all(&dir);
        report.state = State::Committed;
    }
    Ok(report)
}

/// Takes an applied step's entry out of the upper layer (a file, symlink,
/// FIFO or whiteout), so that what stays pending is what was refused.
fn forget(upper: &OwnedFd, s: &Step) {
    let (parent, name) = split(&s.rel);
    if let Ok(dir) = open_beneath(upper, parent)
        && let Some(e) = stat_at(dir.as_raw_fd(), name)
        && e.kind() != EntryKind::Dir
    {
        crate::sys::fs::unlink_at(dir.as_raw_fd(), name);
    }
}

/// Removes the opaque mark of the upper directory `rel`, if it has one.
fn unmark_opaque(upper: &OwnedFd, rel: &Path) {
    if let Ok(dir) = open_beneath(upper, rel)
        && super::is_opaque(&dir)
    {
        let _ = crate::sys::fs::remove_xattr(&dir, super::OPAQUE);
    }
}

/// The steps that bring the real directory `real` (if it exists) to the
/// upper directory `upper`, at `at` relative to the root.
/// `replaced`: an opaque directory above (see `walk` in mod.rs).
fn plan(
    upper: &OwnedFd,
    real: Option<&OwnedFd>,
    at: &Path,
    out: &mut Vec<Step>,
    depth: usize,
    replaced: bool,
) {
    if depth >= super::MAX_DEPTH {
        out.push(Step {
            rel: at.to_path_buf(),
            op: Op::TooDeep,
            replace: false,
        });
        return;
    }
    let names = sorted_names(upper.as_raw_fd());
    let replaced = replaced || is_opaque(upper);
    for (name, _) in super::hidden(real, &names, replaced) {
        out.push(Step {
            rel: at.join(&name),
            op: Op::Remove,
            replace: false,
        });
    }
    for name in names {
        let Some(new) = stat_at(upper.as_raw_fd(), &name) else {
            continue;
        };
        let rel = at.join(&name);
        let old = real.and_then(|r| stat_at(r.as_raw_fd(), &name));
        if new.is_whiteout() {
            if old.is_some() {
                out.push(Step {
                    rel,
                    op: Op::Remove,
                    replace: false,
                });
            }
            continue;
        }
        let replace = old.as_ref().is_some_and(|o| o.kind() != new.kind());
        if new.kind() == EntryKind::Dir {
            let same = old
                .as_ref()
                .is_some_and(|o| !replace && unchanged(upper.as_raw_fd(), real, &name, o, &new));
            out.push(Step {
                rel: rel.clone(),
                op: if same { Op::Enter } else { Op::Dir },
                replace,
            });
            if let Ok(sub) = crate::sandbox::undo::open_dir_at(upper.as_raw_fd(), &name) {
                let real_sub = real
                    .filter(|_| !replace && old.is_some())
                    .and_then(|r| crate::sandbox::undo::open_dir_at(r.as_raw_fd(), &name).ok());
                plan(&sub, real_sub.as_ref(), &rel, out, depth + 1, replaced);
            }
        } else {
            // A copy-up that changed nothing (opened for writing, nothing
            // written) is no step.
            if let Some(o) = &old
                && !replace
                && unchanged(upper.as_raw_fd(), real, &name, o, &new)
            {
                continue;
            }
            out.push(Step {
                rel,
                op: Op::Put,
                replace,
            });
        }
    }
}

fn unchanged(
    upper: RawFd,
    real: Option<&OwnedFd>,
    name: &OsStr,
    old: &super::Entry,
    new: &super::Entry,
) -> bool {
    super::differences(upper, real, name, old, new).is_empty()
}

/// Whether step `s` writes a file that makes git run something or find a
/// repository: a repository's `HEAD`, `config`, `config.worktree`,
/// `commondir`, `gitdir`, a hook, or a `.git` pointer (file or symlink).
/// Directories are made in walk order. Only the order of a commit depends
/// on it; the git check after the commit is what judges.
fn activates_git(s: &Step) -> bool {
    if !matches!(s.op, Op::Put) {
        return false;
    }
    let rel = &s.rel;
    let name = rel.file_name().and_then(OsStr::to_str).unwrap_or("");
    let in_hooks = rel
        .parent()
        .and_then(Path::file_name)
        .is_some_and(|p| p == "hooks");
    in_hooks
        || [
            "HEAD",
            "config",
            "config.worktree",
            "commondir",
            "gitdir",
            ".git",
        ]
        .contains(&name)
}

/// The largest config file judged before a commit; a larger one is
/// refused (git's own config files are a few KiB).
const CONFIG_MAX: u64 = 1 << 20;

/// Why step `s` would bring git something to run, judged before anything
/// is written (the git check after the commit judges again, whole):
/// - the config of a git directory (one holding `HEAD`, `commondir`, or
///   `objects` and `refs`, in the layer or the real tree) with a key off
///   the allow-list of plain-data keys (`gitcheck::config_refused`), or
///   one that is a symlink or cannot be read;
/// - a hook of a git directory that is not a `*.sample` file (an
///   executable, or a symlink to one), or any symlink in a git directory
///   (git makes none);
/// - a `.git` symlink (git never makes one), or a `.git` file or
///   `commondir` that points anywhere but into a git directory's own
///   `modules/` or `worktrees/` beneath the root, or at a `.git` directory
///   beneath the root: what git keeps for submodules and worktrees.
fn plants_git(
    real: &OwnedFd,
    upper: &OwnedFd,
    root: &Path,
    s: &Step,
    since: (i64, i64),
) -> Option<String> {
    if !matches!(s.op, Op::Put) {
        return None;
    }
    let (parent, name) = split(&s.rel);
    let name = name.to_str().unwrap_or("");
    let exists = |path: &Path| {
        [upper, real].iter().any(|root| {
            let (p, n) = split(path);
            open_beneath(root, p)
                .ok()
                .and_then(|d| stat_at(d.as_raw_fd(), n))
                .is_some_and(|e| !e.is_whiteout())
        })
    };
    let git_dir = |dir: &Path| {
        exists(&dir.join("HEAD"))
            || exists(&dir.join("commondir"))
            || (exists(&dir.join("objects")) && exists(&dir.join("refs")))
    };
    let from = open_beneath(upper, parent).ok()?;
    let entry = stat_at(from.as_raw_fd(), OsStr::new(name))?;
    let read = |max: u64| -> Option<Vec<u8>> {
        let fd = crate::sys::fs::open_at(
            from.as_raw_fd(),
            name.as_bytes(),
            libc::O_RDONLY | libc::O_NOFOLLOW,
            0,
        )
        .ok()?;
        let mut bytes = Vec::new();
        use std::io::Read;
        std::fs::File::from(fd)
            .take(max)
            .read_to_end(&mut bytes)
            .ok()?;
        Some(bytes)
    };
    if name == ".git" {
        if entry.kind() != EntryKind::File {
            return Some("a .git symlink or special file".into());
        }
        let Some(bytes) = read(4096) else {
            return Some("a .git file that cannot be read".into());
        };
        let target = std::str::from_utf8(&bytes)
            .ok()
            .and_then(|t| t.trim_end().strip_prefix("gitdir: "));
        return match target {
            Some(t) if git_keeps(root, parent, t) && plain_path(real, upper, parent, t, root) => {
                None
            }
            _ => {
                Some("a .git file pointing outside the repository's modules/ and worktrees/".into())
            }
        };
    }
    if name == "commondir" && git_dir(parent) {
        let bytes = read(4096)?;
        let target = std::str::from_utf8(&bytes).ok().map(str::trim_end);
        return match target {
            Some(t)
                if commondir_kept(root, parent, t) && plain_path(real, upper, parent, t, root) =>
            {
                None
            }
            _ => Some("a commondir pointing elsewhere than the repository's own .git".into()),
        };
    }
    if ["config", "config.worktree"].contains(&name) && git_dir(parent) {
        if entry.kind() != EntryKind::File {
            return Some("a config that is not a file".into());
        }
        if entry.st.st_size as u64 > CONFIG_MAX {
            return Some("a config too large to judge".into());
        }
        let Some(bytes) = read(CONFIG_MAX) else {
            return Some("a config that cannot be read".into());
        };
        return crate::sandbox::gitcheck::config_refused(&bytes);
    }
    // A symlink out of the root into a repository made during the run (in
    // the temp dir, which the run writes directly): git, run in the
    // link, finds that repository, which no check of the roots judged.
    if entry.kind() == EntryKind::Symlink
        && let Some(repo) = repository_made_since(root, parent, &from, name, since)
    {
        return Some(format!(
            "a symlink into a repository made during the run ({})",
            repo.display()
        ));
    }
    // A symlink in a git directory (`hooks`, `modules`, `objects`...)
    // leads git elsewhere; git makes none.
    if entry.kind() == EntryKind::Symlink && git_dir(parent) {
        return Some(format!("a symlink in a git directory ({name})"));
    }
    let in_hooks = parent.file_name().is_some_and(|p| p == "hooks");
    let hooks_of = parent.parent().unwrap_or(Path::new(""));
    if in_hooks
        && !name.ends_with(".sample")
        && (entry.kind() == EntryKind::Symlink
            || (entry.kind() == EntryKind::File && entry.st.st_mode & 0o111 != 0))
        && git_dir(hooks_of)
    {
        return Some(format!("hook {name}"));
    }
    None
}

/// The git directory git would find from where the symlink `name` (in the
/// layer directory `from`, at `dir` beneath `root`) leads, when it lies
/// outside `root` and was made at or after `since` (its birth time, or its
/// ctime where the file system keeps none: no process can set either):
/// git's discovery goes up from the link's target through every parent
/// (a `.git` entry, or a bare repository's `HEAD`, `objects` and `refs`).
fn repository_made_since(
    root: &Path,
    dir: &Path,
    from: &OwnedFd,
    name: &str,
    since: (i64, i64),
) -> Option<PathBuf> {
    let target = crate::sys::fs::read_link_at(from.as_raw_fd(), OsStr::new(name)).ok()?;
    let target = Path::new(OsStr::from_bytes(&target));
    let real = std::fs::canonicalize(root.join(dir).join(target)).ok()?;
    if real.starts_with(root) {
        // Judged with the roots (the git check).
        return None;
    }
    let made = |p: &Path| {
        let (Some(parent), Some(n)) = (p.parent(), p.file_name()) else {
            return false;
        };
        let Ok(d) = crate::sys::fs::open_no_symlinks(parent, libc::O_PATH | libc::O_DIRECTORY)
        else {
            return false;
        };
        let born = crate::sys::fs::birth_time_at(d.as_raw_fd(), n);
        let ctime = stat_at(d.as_raw_fd(), n).map(|e| (e.st.st_ctime, e.st.st_ctime_nsec));
        born.or(ctime).is_some_and(|t| t >= since)
    };
    for anc in real.ancestors() {
        let dot_git = anc.join(".git");
        let bare = ["HEAD", "objects", "refs"]
            .iter()
            .all(|n| anc.join(n).symlink_metadata().is_ok());
        for candidate in [dot_git.as_path(), anc] {
            let is_repo = if candidate == anc {
                bare
            } else {
                candidate.symlink_metadata().is_ok()
            };
            if is_repo && made(candidate) {
                return Some(candidate.to_path_buf());
            }
        }
    }
    None
}

/// Whether git, following `target` from `dir` (relative to `root`), meets
/// no symlink on the way, in the tree as the commit would leave it (the
/// layer's entry where it has one, else the real one): [`lexical`]
/// resolves `..` by name, which is what git does only where no symlink
/// intervenes.
fn plain_path(real: &OwnedFd, upper: &OwnedFd, dir: &Path, target: &str, root: &Path) -> bool {
    let Some(resolved) = lexical(root, dir, target) else {
        return false;
    };
    let seen = |rel: &Path| -> Option<super::Entry> {
        let (p, n) = split(rel);
        let in_upper = open_beneath(upper, p)
            .ok()
            .and_then(|d| stat_at(d.as_raw_fd(), n));
        match in_upper {
            Some(e) if e.is_whiteout() => None,
            Some(e) => Some(e),
            None => open_beneath(real, p)
                .ok()
                .and_then(|d| stat_at(d.as_raw_fd(), n)),
        }
    };
    [dir, resolved.as_path()].iter().all(|path| {
        let mut at = PathBuf::new();
        path.components().all(|c| {
            at.push(c);
            seen(&at).is_none_or(|e| e.kind() != EntryKind::Symlink)
        })
    })
}

/// Whether a `.git` file in `dir` (relative to the root) naming `target`
/// points where git itself puts a submodule's or worktree's git
/// directory: a relative path, no `..` past the root, into a `.git`
/// directory's `modules/` or `worktrees/`.
fn git_keeps(root: &Path, dir: &Path, target: &str) -> bool {
    let Some(resolved) = lexical(root, dir, target) else {
        return false;
    };
    let parts: Vec<&OsStr> = resolved.iter().collect();
    parts
        .windows(2)
        .any(|w| w[0] == ".git" && (w[1] == "modules" || w[1] == "worktrees"))
}

/// Whether a `commondir` in `dir` naming `target` leads to a `.git`
/// directory beneath the root (a worktree's `../..`).
fn commondir_kept(root: &Path, dir: &Path, target: &str) -> bool {
    lexical(root, dir, target).is_some_and(|r| r.file_name().is_some_and(|n| n == ".git"))
}

/// `target` taken from `dir` (relative to `root`), `..` resolved by name,
/// relative to `root`; an absolute `target` must lie beneath `root` (git
/// writes a worktree's `.git` file with an absolute path); `None` when it
/// leaves the root.
fn lexical(root: &Path, dir: &Path, target: &str) -> Option<PathBuf> {
    let t = Path::new(target);
    let (mut out, t) = match t.strip_prefix(root) {
        Ok(rest) => (PathBuf::new(), rest),
        Err(_) if t.is_absolute() => return None,
        Err(_) => (dir.to_path_buf(), t),
    };
    for c in t.components() {
        match c {
            std::path::Component::Normal(n) => out.push(n),
            std::path::Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            std::path::Component::CurDir => {}
            _ => return None,
        }
    }
    Some(out)
}

/// Why the real path `rel` may not be overwritten or removed: it changed
/// at or after `since` (its ctime; a path that does not exist has not;
/// only with `times`, which `--force` turns off); with `whole` (a
/// directory about to be removed), anything beneath it did, or it holds
/// a mount point (the layer never saw what is mounted there: removing it
/// would reach into another file system), a tree too deep, or a directory
/// that cannot be read (whatever `times` says).
fn conflict(
    real: &OwnedFd,
    rel: &Path,
    since: (i64, i64),
    whole: bool,
    times: bool,
) -> Option<String> {
    const CHANGED: &str = "changed in the real tree after the transaction started";
    let (parent, name) = split(rel);
    // The directory on the way gone or replaced: applying under it fails
    // on its own, and says so.
    let dir = open_beneath(real, parent).ok()?;
    let e = stat_at(dir.as_raw_fd(), name)?;
    if times && (e.st.st_ctime, e.st.st_ctime_nsec) >= since {
        return Some(CHANGED.into());
    }
    if !whole || e.kind() != EntryKind::Dir {
        return None;
    }
    let parent_dev = crate::sys::fs::fstat(&dir).map(|st| st.st_dev).ok()?;
    if e.st.st_dev != parent_dev {
        return Some("a mount point: not removed".into());
    }
    let Ok(sub) = crate::sandbox::undo::open_dir_at(dir.as_raw_fd(), name) else {
        return Some("cannot be read to be judged: not removed".into());
    };
    match changed_within(&sub, since, 0, e.st.st_dev) {
        Within::Unchanged => None,
        Within::Changed if times => Some(CHANGED.into()),
        Within::Changed => None,
        Within::TooDeep => Some(format!(
            "holds a tree deeper than {} levels: not judged, not removed",
            super::MAX_DEPTH
        )),
        Within::Mount => Some("holds a mount point: not removed".into()),
        Within::Unreadable => Some("holds a directory that cannot be read: not removed".into()),
    }
}

/// What [`changed_within`] found.
enum Within {
    Unchanged,
    Changed,
    TooDeep,
    Mount,
    Unreadable,
}

/// What lies beneath the directory `dir` (on device `dev`): anything with
/// a ctime at or after `since`, a mount point, a directory that cannot be
/// read, or a tree too deep to judge (refused, never removed unjudged).
/// A change found first is reported first; the walk goes on past it for
/// what no `--force` may override.
fn changed_within(dir: &OwnedFd, since: (i64, i64), depth: usize, dev: u64) -> Within {
    if depth >= super::MAX_DEPTH {
        return Within::TooDeep;
    }
    let mut changed = false;
    for name in sorted_names(dir.as_raw_fd()) {
        let Some(e) = stat_at(dir.as_raw_fd(), &name) else {
            continue;
        };
        if (e.st.st_ctime, e.st.st_ctime_nsec) >= since {
            changed = true;
        }
        if e.kind() != EntryKind::Dir {
            continue;
        }
        if e.st.st_dev != dev {
            return Within::Mount;
        }
        let Ok(sub) = crate::sandbox::undo::open_dir_at(dir.as_raw_fd(), &name) else {
            return Within::Unreadable;
        };
        match changed_within(&sub, since, depth + 1, dev) {
            Within::Unchanged => {}
            Within::Changed => changed = true,
            found => return found,
        }
    }
    if changed {
        Within::Changed
    } else {
        Within::Unchanged
    }
}

fn split(rel: &Path) -> (&Path, &OsStr) {
    (
        rel.parent().unwrap_or(Path::new("")),
        rel.file_name().unwrap_or(OsStr::new(".")),
    )
}

/// The directory `rel` beneath `root`, no symlink followed, never leaving
/// `root`.
fn open_beneath(root: &OwnedFd, rel: &Path) -> std::io::Result<OwnedFd> {
    let path = if rel.as_os_str().is_empty() {
        OsStr::new(".")
    } else {
        rel.as_os_str()
    };
    crate::sys::fs::open_at2(
        root.as_raw_fd(),
        path.as_bytes(),
        libc::O_RDONLY | libc::O_DIRECTORY,
        RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
    )
    .map_err(std::io::Error::from_raw_os_error)
}

/// Hard links of the upper layer: its (device, inode) of a file with more
/// than one link, and the first path committed for it.
type Links = std::collections::HashMap<(u64, u64), PathBuf>;

fn apply(real: &OwnedFd, upper: &OwnedFd, s: &Step, links: &mut Links) -> std::io::Result<()> {
    let (parent, name) = split(&s.rel);
    let dir = open_beneath(real, parent)?;
    let from = open_beneath(upper, parent)?;
    let (dfd, ufd) = (dir.as_raw_fd(), from.as_raw_fd());
    match s.op {
        Op::Remove => {
            if crate::sandbox::undo::remove_at(dfd, name) {
                Ok(())
            } else {
                Err(std::io::Error::other("could not be removed"))
            }
        }
        Op::Dir => {
            let new =
                stat_at(ufd, name).ok_or_else(|| std::io::Error::other("gone from the layer"))?;
            if s.replace && !crate::sandbox::undo::remove_at(dfd, name) {
                return Err(std::io::Error::other("could not be replaced"));
            }
            if stat_at(dfd, name).is_none() {
                crate::sys::fs::mkdir_at(dfd, name, 0o700)?;
            }
            let target = crate::sandbox::undo::open_dir_at(dfd, name)?;
            let source = crate::sandbox::undo::open_dir_at(ufd, name)?;
            set_metadata(&target, &source, &new.st, false)
        }
        Op::TooDeep => Ok(()),
        Op::Put => {
            // Paths the command linked together stay one file.
            let linked = stat_at(ufd, name)
                .filter(|e| e.kind() == EntryKind::File && e.st.st_nlink > 1)
                .map(|e| (e.st.st_dev, e.st.st_ino));
            if let Some(first) = linked.and_then(|id| links.get(&id)) {
                return link(real, first, &dir, name, s.replace);
            }
            put(&dir, ufd, name, s.replace)?;
            if let Some(id) = linked {
                links.insert(id, s.rel.clone());
            }
            Ok(())
        }
        Op::Enter => Ok(()),
    }
}

/// Owner, mode and extended attributes of `source` given to `target`
/// (both open files; `times`: the times too).
fn set_metadata(
    target: &OwnedFd,
    source: &OwnedFd,
    st: &libc::stat,
    times: bool,
) -> std::io::Result<()> {
    nix::unistd::fchown(
        target,
        Some(nix::unistd::Uid::from_raw(st.st_uid)),
        Some(nix::unistd::Gid::from_raw(st.st_gid)),
    )?;
    nix::sys::stat::fchmod(
        target,
        nix::sys::stat::Mode::from_bits_retain(st.st_mode & 0o7777),
    )?;
    let wanted: Vec<_> = crate::sys::fs::xattrs(source)
        .into_iter()
        .filter(|(n, _)| !overlay_xattr(n.as_bytes()))
        .collect();
    // Those the command removed (a directory keeps its own otherwise).
    for (n, _) in crate::sys::fs::xattrs(target) {
        if !overlay_xattr(n.as_bytes())
            && !wanted.iter().any(|(w, _)| *w == n)
            && let Ok(name) = n.into_string()
        {
            crate::sys::fs::remove_xattr(target, &name)?;
        }
    }
    for (n, v) in wanted {
        crate::sys::fs::set_xattr(target, &n, &v)?;
    }
    if times {
        crate::sys::fs::set_times(
            target,
            (st.st_atime, st.st_atime_nsec),
            (st.st_mtime, st.st_mtime_nsec),
        )?;
    }
    Ok(())
}

fn copy_times(real: &OwnedFd, upper: &OwnedFd, rel: &Path) -> std::io::Result<()> {
    let target = open_beneath(real, rel)?;
    let st = crate::sys::fs::fstat(&open_beneath(upper, rel)?)
        .map_err(std::io::Error::from_raw_os_error)?;
    crate::sys::fs::set_times(
        &target,
        (st.st_atime, st.st_atime_nsec),
        (st.st_mtime, st.st_mtime_nsec),
    )
}

/// A name for the file being written beside its target, random so that
/// no name of the change set (nor one made meanwhile) is taken for it, and
/// short whatever the target's length (NAME_MAX is 255 bytes):
/// `.dsh-exec-commit-XXXXXXXX`, made with `O_EXCL`.
fn temp_name() -> OsString {
    OsString::from(format!(
        ".dsh-exec-commit-{}",
        &crate::capture::random_suffix()[..8]
    ))
}

/// `name` in `dir` made a hard link of the committed `first` (relative to
/// the root), through a temporary name renamed over it.
fn link(
    real: &OwnedFd,
    first: &Path,
    dir: &OwnedFd,
    name: &OsStr,
    replace: bool,
) -> std::io::Result<()> {
    let (parent, first_name) = split(first);
    let from = open_beneath(real, parent)?;
    let tmp = temp_name();
    nix::unistd::linkat(
        &from,
        first_name,
        dir,
        tmp.as_os_str(),
        nix::fcntl::AtFlags::empty(),
    )?;
    if replace {
        crate::sandbox::undo::remove_at(dir.as_raw_fd(), name);
    }
    if let Err(e) = crate::sys::fs::rename_at(dir.as_raw_fd(), &tmp, name) {
        crate::sandbox::undo::remove_at(dir.as_raw_fd(), &tmp);
        return Err(e);
    }
    Ok(())
}

/// The file, symlink or FIFO `name` of the upper directory `ufd` put in
/// place of `name` in `dfd`.
fn put(dir: &OwnedFd, ufd: RawFd, name: &OsStr, replace: bool) -> std::io::Result<()> {
    let dfd = dir.as_raw_fd();
    let new = stat_at(ufd, name).ok_or_else(|| std::io::Error::other("gone from the layer"))?;
    let tmp = temp_name();
    match new.kind() {
        EntryKind::File => {
            let source =
                crate::sys::fs::open_at(ufd, name.as_bytes(), libc::O_RDONLY | libc::O_NOFOLLOW, 0)
                    .map_err(std::io::Error::from_raw_os_error)?;
            let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW;
            let target = crate::sys::fs::open_at(dfd, tmp.as_bytes(), flags, 0o600)
                .map_err(std::io::Error::from_raw_os_error)?;
            let (mut from, mut to) = (std::fs::File::from(source), std::fs::File::from(target));
            let done = std::io::copy(&mut from, &mut to).and_then(|_| {
                let (t, s): (OwnedFd, OwnedFd) = (to.try_clone()?.into(), from.try_clone()?.into());
                set_metadata(&t, &s, &new.st, true)
            });
            if let Err(e) = done {
                crate::sandbox::undo::remove_at(dfd, &tmp);
                return Err(e);
            }
        }
        EntryKind::Symlink => {
            let target = crate::sys::fs::read_link_at(ufd, name)?;
            crate::sys::fs::symlink_at(&target, dfd, &tmp)?;
            let _ = nix::unistd::fchownat(
                dir,
                tmp.as_os_str(),
                Some(nix::unistd::Uid::from_raw(new.st.st_uid)),
                Some(nix::unistd::Gid::from_raw(new.st.st_gid)),
                nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
            );
            let _ = crate::sys::fs::set_times_at(
                dfd,
                &tmp,
                (new.st.st_atime, new.st.st_atime_nsec),
                (new.st.st_mtime, new.st.st_mtime_nsec),
            );
        }
        EntryKind::Special if new.st.st_mode & libc::S_IFMT == libc::S_IFIFO => {
            crate::sys::fs::mkfifo_at(dfd, &tmp, new.st.st_mode & 0o7777)?;
            let fifo =
                crate::sys::fs::open_at(dfd, tmp.as_bytes(), libc::O_PATH | libc::O_NOFOLLOW, 0)
                    .map_err(std::io::Error::from_raw_os_error)?;
            let _ = nix::unistd::fchownat(
                &fifo,
                "",
                Some(nix::unistd::Uid::from_raw(new.st.st_uid)),
                Some(nix::unistd::Gid::from_raw(new.st.st_gid)),
                nix::fcntl::AtFlags::AT_EMPTY_PATH,
            );
            // The mode apart from the umask (mkfifo(3) applies it).
            nix::sys::stat::fchmodat(
                dir,
                tmp.as_os_str(),
                nix::sys::stat::Mode::from_bits_retain(new.st.st_mode & 0o7777),
                nix::sys::stat::FchmodatFlags::FollowSymlink,
            )?;
            let _ = crate::sys::fs::set_times_at(
                dfd,
                &tmp,
                (new.st.st_atime, new.st.st_atime_nsec),
                (new.st.st_mtime, new.st.st_mtime_nsec),
            );
        }
        EntryKind::Special | EntryKind::Dir => {
            return Err(std::io::Error::other(
                "a socket or device file is not committed",
            ));
        }
    }
    if replace {
        crate::sandbox::undo::remove_at(dfd, name);
    }
    if let Err(e) = crate::sys::fs::rename_at(dfd, &tmp, name) {
        crate::sandbox::undo::remove_at(dfd, &tmp);
        return Err(e);
    }
    Ok(())
}
