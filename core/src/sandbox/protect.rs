//! Protected paths inside writable roots: what a confined run must not be
//! able to change, because a later, unconfined program would act on it.
//!
//! A confined run that writes `core.fsmonitor` into a repository's
//! `.git/config`, or a hook into `.git/hooks/`, makes the next `git status`
//! outside run its code. So inside every writable root these stay
//! read-only:
//! - of every repository found ([`find_repositories`]): `.git/config`,
//!   `.git/hooks/`, and `.git` when it is a file (a worktree or submodule
//!   pointer);
//! - `dsh-exec`'s own configuration file and state directory (jobs, private
//!   spill files), wherever they are;
//! - when a writable root contains `$HOME`: the shell start-up files,
//!   `~/.gitconfig`, `~/.config/git`, `~/.ssh` ([`HOME_FILES`]);
//! - every `--protect PATH`.
//!
//! Mechanism, where the supervisor may create a mount namespace
//! (CAP_SYS_ADMIN): the child enters a new mount namespace before Landlock
//! and bind-mounts each protected path read-only over itself
//! ([`Protection::mounts`]); every directory between a writable root and a
//! protected path (and `.git` itself) is bind-mounted over itself
//! read-write, so that it is a mount point and cannot be renamed away and
//! replaced by one with a planted config (rename(2): EBUSY), and a hard
//! link to a protected file fails (EXDEV). What does not exist yet cannot
//! be mounted over: a protected *file* created by the run (a new
//! `~/.bashrc`) is removed when the run ends, and reported. A repository
//! the run creates itself (`git init`) is the run's own and is not
//! protected.
//!
//! Without a mount namespace (an unprivileged `dsh-exec`) the protected
//! files are snapshotted before the run and restored after it
//! ([`Snapshot`]); `enforcement` is then `partial`, and what was restored
//! is reported.
//!
//! The gate ([`super::gate`]) also refuses metadata changes to every
//! protected inode.

use std::collections::BTreeSet;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::gate::ProtectedPath;

/// Start-up files protected in `$HOME` when a writable root contains it.
pub const HOME_FILES: [&str; 16] = [
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".zlogout",
    ".inputrc",
    ".gitconfig",
    ".config/git",
    ".config/fish",
    ".ssh",
    ".config/dsh-exec",
];

/// Directory names the repository search does not descend into.
const SKIP_DIRS: [&str; 7] = [
    ".git",
    "node_modules",
    "target",
    ".venv",
    "venv",
    "__pycache__",
    ".tox",
];

/// Directory entries the repository search reads per writable root.
pub const SCAN_BUDGET: usize = 4096;

/// How deep below a writable root repositories are looked for (the root
/// itself is depth 0); deeper ones are found when they lie on the way to
/// the working directory.
pub const SCAN_DEPTH: usize = 2;

/// How deep below the temp directory repositories are looked for: its
/// direct subdirectories (`/tmp/clone/.git`). A shared `/tmp` holds
/// whatever every program on the machine left there; reading two levels of
/// it cost more than the rest of a confined start put together (measured:
/// 111 entries, 3 ms), for repositories that are rarely anyone's work.
pub const TEMP_SCAN_DEPTH: usize = 1;

/// What to protect, and how.
#[derive(Debug, Default)]
pub struct Protection {
    /// Bind mounts for the child's mount namespace, outermost first:
    /// (path, read-only). A read-write one is an anchor: a mount point that
    /// cannot be renamed.
    pub(crate) mounts: Vec<(PathBuf, bool)>,
    /// The protected paths that exist (for the gate and the snapshot).
    pub(crate) protected: Vec<ProtectedPath>,
    /// Protected paths that do not exist: removed after the run if created.
    pub absent: Vec<PathBuf>,
    /// Notes for `explain`: a search that stopped early, a path skipped.
    pub notes: Vec<String>,
}

impl Protection {
    /// The protected paths that exist, for `explain`.
    pub fn paths(&self) -> Vec<&Path> {
        self.protected.iter().map(|p| p.path.as_path()).collect()
    }
}

/// What a protection plan needs to know beyond the writable roots.
#[derive(Debug, Clone, Default)]
pub(crate) struct Inputs<'a> {
    pub(crate) workdir: Option<&'a Path>,
    /// The temp directory's real path, searched to [`TEMP_SCAN_DEPTH`].
    pub(crate) temp_dir: Option<&'a Path>,
    pub(crate) home: Option<&'a Path>,
    pub(crate) config_file: Option<&'a Path>,
    pub(crate) state_dir: Option<&'a Path>,
    pub(crate) extra: &'a [PathBuf],
}

fn under_any<'r>(path: &Path, roots: &'r [PathBuf]) -> Option<&'r PathBuf> {
    roots
        .iter()
        .filter(|r| path.starts_with(r))
        .max_by_key(|r| r.components().count())
}

/// The directories of the repositories in `root` (those with a `.git`
/// entry): `root` itself and its subdirectories to `max_depth`, within
/// [`SCAN_BUDGET`] entries, plus every directory between `root` and
/// `workdir` (git looks for the repository upward from where it runs).
/// Symlinks are not followed. A search that ran out of budget says so.
pub(crate) fn find_repositories(
    root: &Path,
    max_depth: usize,
    workdir: Option<&Path>,
    notes: &mut Vec<String>,
) -> Vec<PathBuf> {
    let mut found = BTreeSet::new();
    let has_git = |d: &Path| std::fs::symlink_metadata(d.join(".git")).is_ok();
    let mut budget = SCAN_BUDGET;
    let mut level = vec![root.to_path_buf()];
    for depth in 0..=max_depth {
        let mut next = Vec::new();
        for dir in level {
            if has_git(&dir) {
                found.insert(dir.clone());
            }
            if depth == max_depth {
                continue;
            }
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.flatten() {
                if budget == 0 {
                    break;
                }
                budget -= 1;
                let name = e.file_name();
                if SKIP_DIRS.iter().any(|s| name == *s) {
                    continue;
                }
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    next.push(e.path());
                }
            }
        }
        level = next;
    }
    if budget == 0 {
        notes.push(format!(
            "repository search in {} stopped after {SCAN_BUDGET} entries",
            root.display()
        ));
    }
    if let Some(w) = workdir.filter(|w| w.starts_with(root)) {
        for d in w.ancestors().take_while(|d| d.starts_with(root)) {
            if has_git(d) {
                found.insert(d.to_path_buf());
            }
        }
    }
    found.into_iter().collect()
}

/// The protection of a run whose writable roots (real paths) are `roots`.
pub(crate) fn plan(roots: &[PathBuf], inputs: &Inputs) -> Protection {
    let mut p = Protection::default();
    let mut wanted: Vec<PathBuf> = Vec::new();
    let mut anchors: BTreeSet<PathBuf> = BTreeSet::new();
    for root in roots {
        let depth = if inputs.temp_dir == Some(root.as_path()) {
            TEMP_SCAN_DEPTH
        } else {
            SCAN_DEPTH
        };
        for repo in find_repositories(root, depth, inputs.workdir, &mut p.notes) {
            let git = repo.join(".git");
            match std::fs::symlink_metadata(&git) {
                Ok(m) if m.is_dir() => {
                    anchors.insert(git.clone());
                    wanted.push(git.join("config"));
                    wanted.push(git.join("hooks"));
                }
                Ok(m) if m.is_file() => wanted.push(git),
                _ => p
                    .notes
                    .push(format!("{} is a symlink: not protected", git.display())),
            }
        }
    }
    if let Some(home) = inputs.home
        && under_any(home, roots).is_some()
    {
        wanted.extend(HOME_FILES.iter().map(|f| home.join(f)));
    }
    wanted.extend(inputs.config_file.map(Path::to_path_buf));
    wanted.extend(inputs.state_dir.map(Path::to_path_buf));
    wanted.extend(inputs.extra.iter().cloned());
    wanted.sort();
    wanted.dedup();
    for path in wanted {
        let Some(root) = under_any(&path, roots) else {
            continue; // outside every writable root: read-only anyway
        };
        if path == *root {
            p.notes.push(format!(
                "{} is a writable root: it cannot also be protected",
                path.display()
            ));
            continue;
        }
        // Every directory between the root and the path is an anchor.
        for dir in path
            .ancestors()
            .skip(1)
            .take_while(|d| *d != root.as_path())
        {
            anchors.insert(dir.to_path_buf());
        }
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_symlink() => p
                .notes
                .push(format!("{} is a symlink: not protected", path.display())),
            Ok(m) => {
                p.protected.push(ProtectedPath {
                    path: path.clone(),
                    id: (m.dev(), m.ino()),
                    dir: m.is_dir(),
                });
            }
            Err(_) => p.absent.push(path),
        }
    }
    let read_only: BTreeSet<PathBuf> = p.protected.iter().map(|x| x.path.clone()).collect();
    let mut mounts: Vec<(PathBuf, bool)> = anchors
        .into_iter()
        .filter(|a| {
            !read_only.contains(a) && std::fs::symlink_metadata(a).is_ok_and(|m| m.is_dir())
        })
        .map(|a| (a, false))
        .collect();
    mounts.extend(read_only.into_iter().map(|r| (r, true)));
    // Outermost first: a bind mount hides what was mounted below it before.
    mounts.sort_by_key(|(path, _)| path.components().count());
    p.mounts = mounts;
    p
}

/// The largest file a snapshot keeps: 1 MiB; the most files: 256.
const SNAPSHOT_FILE_MAX: u64 = 1 << 20;
const SNAPSHOT_FILES_MAX: usize = 256;

/// One file as it was before the run.
#[derive(Debug)]
struct Kept {
    path: PathBuf,
    bytes: Vec<u8>,
    mode: u32,
}

/// The protected files of a run without a mount namespace, as they were
/// before it, to restore after it.
#[derive(Debug, Default)]
pub struct Snapshot {
    files: Vec<Kept>,
    /// Protected directories and the names they held.
    dirs: Vec<(PathBuf, BTreeSet<std::ffi::OsString>)>,
    absent: Vec<PathBuf>,
    /// Notes: what could not be kept.
    pub notes: Vec<String>,
}

/// A change the run made to a protected path, and what was done about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtectedChange {
    /// The path.
    pub path: PathBuf,
    /// `modified`, `created`, `removed` or `replaced`.
    pub change: &'static str,
    /// Whether it was undone.
    pub restored: bool,
}

fn keep_file(path: &Path, files: &mut Vec<Kept>, notes: &mut Vec<String>) {
    let Ok(m) = std::fs::symlink_metadata(path) else {
        return;
    };
    if !m.is_file() {
        return;
    }
    if m.len() > SNAPSHOT_FILE_MAX || files.len() >= SNAPSHOT_FILES_MAX {
        notes.push(format!("{} is too large to snapshot", path.display()));
        return;
    }
    if let Ok(bytes) = std::fs::read(path) {
        files.push(Kept {
            path: path.to_path_buf(),
            bytes,
            mode: m.permissions().mode() & 0o7777,
        });
    }
}

impl Snapshot {
    /// Takes the snapshot of `protection`'s paths: files whole, and each
    /// protected directory's regular files one level down.
    pub(crate) fn take(protection: &Protection) -> Snapshot {
        let mut s = Snapshot {
            absent: protection.absent.clone(),
            ..Snapshot::default()
        };
        for p in &protection.protected {
            if p.dir {
                let names: BTreeSet<_> = std::fs::read_dir(&p.path)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .map(|e| e.file_name())
                    .collect();
                for n in &names {
                    keep_file(&p.path.join(n), &mut s.files, &mut s.notes);
                }
                s.dirs.push((p.path.clone(), names));
            } else {
                keep_file(&p.path, &mut s.files, &mut s.notes);
            }
        }
        s
    }

    /// Compares with the snapshot and undoes the run's changes: modified or
    /// removed files are written back (never through a symlink: one put in
    /// their place is removed first), files new in a protected directory
    /// and protected files the run created are removed.
    pub fn restore(&self) -> Vec<ProtectedChange> {
        let mut changes = Vec::new();
        for k in &self.files {
            let now = std::fs::symlink_metadata(&k.path);
            let same = now
                .as_ref()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o7777 == k.mode)
                && std::fs::read(&k.path).is_ok_and(|b| b == k.bytes);
            if same {
                continue;
            }
            let change = if now.is_err() { "removed" } else { "modified" };
            if now.as_ref().is_ok_and(|m| !m.is_file()) {
                let _ = std::fs::remove_file(&k.path).or_else(|_| std::fs::remove_dir_all(&k.path));
            }
            let restored = write_back(k).is_ok();
            changes.push(ProtectedChange {
                path: k.path.clone(),
                change,
                restored,
            });
        }
        for (dir, names) in &self.dirs {
            for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                if !names.contains(&e.file_name()) {
                    let path = e.path();
                    let restored = remove_any(&path);
                    changes.push(ProtectedChange {
                        path,
                        change: "created",
                        restored,
                    });
                }
            }
        }
        changes.extend(remove_created(&self.absent));
        changes
    }
}

/// Removes the protected paths in `absent` that now exist (the run
/// created them).
pub(crate) fn remove_created(absent: &[PathBuf]) -> Vec<ProtectedChange> {
    absent
        .iter()
        .filter(|a| std::fs::symlink_metadata(a).is_ok())
        .map(|a| ProtectedChange {
            path: a.clone(),
            change: "created",
            restored: remove_any(a),
        })
        .collect()
}

fn remove_any(path: &Path) -> bool {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(path).is_ok(),
        Ok(_) => std::fs::remove_file(path).is_ok(),
        Err(_) => true,
    }
}

/// Writes a kept file back: a new file beside it, then rename(2) over the
/// path, so that nothing the run left there (a symlink) is written through.
fn write_back(k: &Kept) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = k.path.with_file_name(format!(
        ".{}.dsh-exec-restore",
        k.path
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default()
    ));
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(k.mode)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(&tmp)?;
    f.write_all(&k.bytes)?;
    f.set_permissions(std::fs::Permissions::from_mode(k.mode))?;
    std::fs::rename(&tmp, &k.path)
}
