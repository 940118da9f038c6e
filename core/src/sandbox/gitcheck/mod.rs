//! Planted git metadata: what a confined run leaves in a git directory
//! that a later, unconfined git command would run.
//!
//! `git status` runs `core.fsmonitor`, a checkout runs hooks, a fetch runs
//! an `ext::` remote, in whatever repository git finds, including
//! submodules (any depth), linked worktrees and bare repositories a user
//! `cd`s into. A confined run may write anywhere under its writable roots,
//! so it could plant any of these; the protection plan keeps the config
//! and hooks of the repositories it finds read-only, but cannot foresee a
//! repository the run makes. So git metadata is judged by what exists
//! after the run against a snapshot taken before it:
//!
//! - **Before the run** ([`Snapshot::take`]) every writable root is walked
//!   (no symlink followed, every depth) and each git directory found is
//!   recorded: its (device, inode), its `config`, `config.worktree` and
//!   `commondir` bytes, and its hooks; so is every `.git` file or symlink
//!   (a pointer to a git directory elsewhere).
//! - **After the run** ([`Snapshot::check`]) the roots are walked again.
//!   A git directory that is new (not in the snapshot at that path with the
//!   same inode: made, moved or renamed into place) is judged whole: every
//!   key of its config must be on the allow-list of plain-data keys
//!   ([`config::refused`]), its `commondir` must lead to a git directory
//!   that passes, and it may hold no hook git would run. A git directory
//!   that existed is judged by what the run added: new config keys, a new
//!   `commondir`, a new or changed hook. A new or changed `.git` symlink is
//!   put aside whatever it names (git never makes one); a new or changed
//!   `.git` file passes only when the git directory it names passes, or is
//!   one git keeps for a worktree (`.git`, `.git/modules/...`,
//!   `.git/worktrees/*`).
//! - What fails is **put aside**: a new git directory or pointer is renamed
//!   `NAME.dsh-exec-quarantined` (git no longer finds it), a changed config
//!   or `commondir` is restored to its bytes from before the run (the
//!   run's version kept beside it as `NAME.dsh-exec-quarantined`), a hook
//!   is renamed. Each is reported as a protected change with its reason.
//!
//! A git directory is what git's discovery accepts (setup.c,
//! is_git_directory): a directory holding `HEAD` and either `commondir` or
//! both `objects/` and `refs/`. Everything inside a git directory is
//! walked too, `objects/` included: a repository hidden there and reached
//! through a pointer or a symlink is judged like any other.
//!
//! The walk after the run reads only the directories that changed: a
//! directory whose ctime is older than the snapshot's start, with the same
//! inode, has the entries it had then (creating, removing or renaming an
//! entry updates the directory's ctime, and no process can set a ctime:
//! inode(7)), so its listing from the snapshot is reused.
//!
//! **Budget.** Each walk visits at most [`WALK_BUDGET`] directories, and
//! goes [`MAX_DEPTH`] directories deep. A git directory found after the
//! run in a part the snapshot did not reach is judged as new (fail closed:
//! what was not seen before is not trusted). What the walk after the run
//! could not reach is reported as `unchecked`, and a directory it could not
//! reach that the run made (its birth time, statx(2) `STATX_BTIME`, at or
//! after the snapshot's start: no process can set it) is put aside whole;
//! a directory that was there before the run is never renamed for that.
//!
//! What it relies on from the kernel: `openat(2)` with `O_NOFOLLOW |
//! O_DIRECTORY` relative to a held descriptor reaches the directory named,
//! never through a symlink; `getdents64(2)` lists a directory's entries
//! with their types; rename(2) within one directory is atomic; ctime is
//! set by the kernel on every change of an inode or of a directory's
//! entries (inode(7)), from a clock no confined process may set
//! (CAP_SYS_TIME is dropped).

mod config;

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path, PathBuf};

use nix::libc;

use super::facts::ProtectedChangeFact as ProtectedChange;
use super::undo;

/// The most directories one walk visits, over all writable roots (the
/// files in them do not count: a run that makes a million files in one
/// directory makes the walk read them, not stop).
pub(crate) const WALK_BUDGET: usize = 250_000;

/// How many directories deep below a writable root the walk goes.
pub(crate) const MAX_DEPTH: usize = 256;

/// A root walked to every depth (within [`MAX_DEPTH`]).
pub(crate) const FULL: usize = usize::MAX;

/// The largest `config`, `config.worktree`, `commondir` or `.git` file
/// read: 1 MiB. A larger one cannot be judged.
const FILE_MAX: u64 = 1 << 20;

/// What a renamed entry gets appended.
const QUARANTINED: &str = ".dsh-exec-quarantined";

/// A directory as the walk saw it.
#[derive(Debug, Clone, Default)]
struct Node {
    /// (device, inode).
    id: (u64, u64),
    /// Whether `children` and `marks` are the directory's whole listing
    /// (false: the budget ran out in it).
    listed: bool,
    /// Which of the entries git looks for it holds ([`Marks`]).
    marks: u8,
    /// Its subdirectories (not symlinks), by name.
    children: BTreeMap<OsString, Node>,
}

/// Entries of a directory that make it, or its `.git`, a repository.
struct Marks;
impl Marks {
    const DOT_GIT: u8 = 1;
    const HEAD: u8 = 2;
    const OBJECTS: u8 = 4;
    const REFS: u8 = 8;
    const COMMONDIR: u8 = 16;

    /// The mark of an entry named `name`, whatever its type: git tests
    /// `objects` and `refs` with access(2) (`X_OK`, through symlinks) and
    /// reads `HEAD` through a symlink, so a symlink or a file counts too.
    fn of(name: &[u8]) -> u8 {
        match name {
            b".git" => Self::DOT_GIT,
            b"HEAD" => Self::HEAD,
            b"objects" => Self::OBJECTS,
            b"refs" => Self::REFS,
            b"commondir" => Self::COMMONDIR,
            _ => 0,
        }
    }

    /// Whether git's discovery takes a directory with these entries for a
    /// git directory.
    fn git_dir(marks: u8) -> bool {
        marks & Self::HEAD != 0
            && (marks & Self::COMMONDIR != 0
                || marks & (Self::OBJECTS | Self::REFS) == Self::OBJECTS | Self::REFS)
    }
}

/// A small file of a git directory: its identity and bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FileState {
    id: (u64, u64),
    ctime: (i64, i64),
    /// Mode bits, owner and group, to restore the file as it was.
    mode: (u32, u32, u32),
    /// `None`: not a regular file, unreadable or larger than [`FILE_MAX`].
    bytes: Option<Vec<u8>>,
}

/// A hook git would run, as judged: a digest of its bytes (SipHash-1-3
/// keyed by [`HOOK_KEYS`], random per process: both sides of the
/// comparison are this process's own reads, and a command that cannot
/// learn the keys cannot make other bytes with the same digest), `None` when they cannot be read (a symlink through
/// `/proc`, a file too large): then the entry's (device, inode, ctime)
/// stands in. The same bytes are the same hook, whatever happened to its
/// inode (a hard link made elsewhere changes the ctime, nothing else).
type HookId = (Option<u64>, Option<((u64, u64), (i64, i64))>);

/// The keys of the hooks' digests (std's `RandomState`: random keys from
/// the operating system, made once per process, never written anywhere).
static HOOK_KEYS: std::sync::OnceLock<std::collections::hash_map::RandomState> =
    std::sync::OnceLock::new();

/// A git directory as it was found.
#[derive(Debug, Clone)]
struct GitDir {
    id: (u64, u64),
    config: Option<FileState>,
    config_worktree: Option<FileState>,
    commondir: Option<FileState>,
    /// The hooks git would run (executable, not `*.sample`), by name.
    hooks: BTreeMap<OsString, HookId>,
    /// `hooks` is a symlink: its target, and its (device, inode).
    hooks_link: Option<(Vec<u8>, (u64, u64))>,
    /// `hooks` is there but cannot be listed (its mode keeps this user
    /// out): what it holds cannot be judged.
    hooks_unreadable: bool,
    /// The legacy remote files git still reads for a remote its config
    /// does not define (remote.c, `read_remotes_file` and
    /// `read_branches_file`): `remotes/NAME` (`URL:` lines) and
    /// `branches/NAME`, by that relative name. git never writes them.
    legacy: BTreeMap<OsString, FileState>,
}

/// A `.git` file or symlink.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pointer {
    id: (u64, u64),
    symlink: bool,
    /// The file's bytes (at most [`FILE_MAX`]) or the symlink's target.
    bytes: Vec<u8>,
}

/// What one walk found.
#[derive(Debug, Default)]
struct Found {
    /// Per writable root: the tree of its directories.
    trees: Vec<Node>,
    git_dirs: BTreeMap<PathBuf, GitDir>,
    pointers: BTreeMap<PathBuf, Pointer>,
    /// Directories not walked (budget or depth): path, and whether it was
    /// made during the run (birth time at or after the snapshot's start).
    unreached: Vec<(PathBuf, bool)>,
    /// Entries read so far.
    read: usize,
    /// Symlinks found in the walked part of a root walked one level deep,
    /// with what they hold.
    links: BTreeMap<PathBuf, OsString>,
    /// Directories a reference led to where the walk of their root did not
    /// go (the temp dir and caches are walked one level deep), each
    /// walked in full as a root of its own ([`follow`]).
    extra: BTreeMap<PathBuf, Node>,
}

/// The git metadata under a run's writable roots before it ran.
#[derive(Debug)]
pub(crate) struct Snapshot {
    /// The roots walked, each with its depth limit.
    roots: Vec<(PathBuf, usize)>,
    /// Every writable root, those inside another too: none is renamed.
    all_roots: Vec<PathBuf>,
    /// When the snapshot started, as the file system stamps changes: a
    /// ctime at or after it may be the run's.
    since: (i64, i64),
    before: Found,
}

/// Why a git config file holding `bytes` may not be brought into a
/// writable root, or `None` when every key of it is on the allow-list of
/// plain-data keys ([`config::refused`]; a relative path value must stay
/// below the git directory: no `..`, not absolute). A config that cannot
/// be parsed is refused: what cannot be judged is not trusted.
pub(crate) fn config_refused(bytes: &[u8]) -> Option<String> {
    let entries = match config::parse(bytes) {
        Ok(e) => e,
        Err(why) => return Some(format!("a config that cannot be judged ({why})")),
    };
    let inside = |v: &str| {
        let p = Path::new(v);
        p.is_relative() && !p.components().any(|c| c == Component::ParentDir)
    };
    entries.iter().find_map(|e| config::refused(e, &inside))
}

impl Snapshot {
    /// Puts aside `path` for `reason` ([`put_aside`], change
    /// `quarantined`).
    fn quarantine(&self, path: &Path, reason: String) -> ProtectedChange {
        put_aside(&self.roots, &self.all_roots, path, "quarantined", reason)
    }

    /// Walks the writable roots `roots` (real paths, each with how many
    /// directories deep it is walked: [`FULL`], or fewer for a shared one
    /// such as the temp dir) and records their git metadata. A root inside
    /// another that is walked in full is walked once, as part of it.
    pub(crate) fn take(roots: &[(PathBuf, usize)]) -> Snapshot {
        let outer: Vec<(PathBuf, usize)> = roots
            .iter()
            .filter(|(r, _)| {
                !roots
                    .iter()
                    .any(|(o, limit)| o != r && r.starts_with(o) && *limit == FULL)
            })
            .cloned()
            .collect();
        let since = start_stamp(outer.first().map(|(r, _)| r.as_path()));
        let mut before = Found::default();
        for (root, limit) in &outer {
            let tree = Walk {
                since,
                after: false,
                limit: *limit,
                found: &mut before,
            }
            .root(root, None);
            before.trees.push(tree);
        }
        follow(&mut before, &outer, since, false, None);
        Snapshot {
            roots: outer,
            all_roots: roots.iter().map(|(r, _)| r.clone()).collect(),
            since,
            before,
        }
    }

    /// After the run (its process tree gone): walks the roots again, puts
    /// aside what the run planted, and says what it did.
    pub(crate) fn check(&self) -> Vec<ProtectedChange> {
        let mut after = Found::default();
        for (i, (root, limit)) in self.roots.iter().enumerate() {
            let tree = Walk {
                since: self.since,
                after: true,
                limit: *limit,
                found: &mut after,
            }
            .root(root, self.before.trees.get(i));
            after.trees.push(tree);
        }
        follow(
            &mut after,
            &self.roots,
            self.since,
            true,
            Some(&self.before.extra),
        );
        let mut changes = Vec::new();
        self.judge(&after, &mut changes);
        for (dir, made) in &after.unreached {
            // A shared root (the temp dir, a cache) holds what every
            // program makes, at any moment: made during the run is not
            // made by it there, and nothing of it is renamed for that.
            let shared = self
                .roots
                .iter()
                .any(|(r, limit)| *limit != FULL && dir.starts_with(r));
            if !*made || shared {
                changes.push(ProtectedChange {
                    path: dir.clone(),
                    change: "unchecked".into(),
                    restored: false,
                    reason: Some(format!(
                        "the git check could not read it, or stopped there ({WALK_BUDGET} \
                         directories or {MAX_DEPTH} levels)"
                    )),
                });
            } else {
                changes.push(put_aside(
                    &self.roots,
                    &self.all_roots,
                    dir,
                    "unchecked",
                    "made by the run where the git check could not reach it".into(),
                ));
            }
        }
        changes
    }

    fn judge(&self, after: &Found, changes: &mut Vec<ProtectedChange>) {
        // Where the new and changed pointers lead, resolved before anything
        // is renamed.
        let pointers: Vec<(&PathBuf, &Pointer, Option<Target>)> = after
            .pointers
            .iter()
            .filter(|(path, now)| self.before.pointers.get(*path) != Some(*now))
            .map(|(path, now)| {
                let dir = path.parent().unwrap_or(path);
                let target = (!now.symlink)
                    .then(|| gitfile_target(&now.bytes, dir))
                    .flatten();
                (path, now, target)
            })
            .collect();
        // Where the references that were there before the run lead now.
        let old_targets = self.old_reference_targets(after);
        // The symlinks made at the walked top of the temp dir and caches,
        // and where they lead, also resolved before anything is renamed.
        let links: Vec<(&PathBuf, Result<Option<PathBuf>, String>)> = after
            .links
            .iter()
            .filter(|(l, to)| self.before.links.get(*l) != Some(*to))
            .map(|(l, _)| (l, resolve_no_magic(l)))
            .collect();
        // Git directories first: a pointer to one put aside goes too.
        let mut failed: BTreeMap<&Path, String> = BTreeMap::new();
        for (path, now) in &after.git_dirs {
            let empty;
            let before = match self.before.git_dirs.get(path).filter(|b| b.id == now.id) {
                Some(b) => b,
                // A writable root the run made a git directory of is never
                // renamed: what it holds is judged as added to nothing.
                None if self.roots.iter().any(|(r, _)| r == path) => {
                    empty = GitDir {
                        id: now.id,
                        config: None,
                        config_worktree: None,
                        commondir: None,
                        hooks: BTreeMap::new(),
                        hooks_link: None,
                        hooks_unreadable: false,
                        legacy: BTreeMap::new(),
                    };
                    &empty
                }
                // Where the snapshot did not reach (its budget), a git
                // directory from before the run (birth time) has no history
                // to judge against: told, not renamed.
                // Likewise one a reference of the run led to in the part of
                // the temp dir or a cache the snapshot did not walk: the
                // reference is judged instead (`judge_url`, the pointers).
                None if (self
                    .before
                    .unreached
                    .iter()
                    .any(|(u, _)| path.starts_with(u))
                    || self.followed_only_after(path))
                    && !born_since(path, self.since) =>
                {
                    if self.followed_only_after(path) {
                        // Reached by a reference that was there before
                        // the run, it would have been followed by the
                        // snapshot had it been there: it came (was made,
                        // moved, or a parent moved) during the run, and
                        // must pass as new. Reached only by references
                        // the run made, those are judged instead, and the
                        // repository (perhaps the user's) stays.
                        let via = old_targets.get(path).or_else(|| {
                            path.parent()
                                .filter(|_| path.file_name() == Some(OsStr::new(".git")))
                                .and_then(|top| old_targets.get(top))
                        });
                        if let Some(via) = via {
                            let via = match via {
                                Via::Url => Via::url_to(now),
                                v => *v,
                            };
                            if let Some(r) = self.judge_whole_as(path, now, after, via) {
                                let reason = format!(
                                    "reached by a reference from before the run, where the \
                                     snapshot found no repository: {r}"
                                );
                                failed.insert(path, reason.clone());
                                changes.push(self.quarantine(path, reason));
                            }
                        }
                        continue;
                    }
                    let reason: String = "beyond the snapshot's budget: not judged".into();
                    changes.push(ProtectedChange {
                        path: path.clone(),
                        change: "unchecked".into(),
                        restored: false,
                        reason: Some(reason),
                    });
                    continue;
                }
                None => {
                    if let Some(reason) = self.judge_whole(path, now, after) {
                        failed.insert(path, reason.clone());
                        changes.push(self.quarantine(path, reason));
                    }
                    continue;
                }
            };
            for (name, was, is) in [
                ("config", &before.config, &now.config),
                (
                    "config.worktree",
                    &before.config_worktree,
                    &now.config_worktree,
                ),
            ] {
                if was == is {
                    continue;
                }
                if let Some(reason) =
                    self.judge_config_change(path, was.as_ref(), is.as_ref(), after)
                {
                    changes.push(restore(path, name, was.as_ref(), reason));
                }
            }
            if before.commondir != now.commondir
                && let Some(reason) = self.judge_commondir(path, now.commondir.as_ref(), after)
            {
                changes.push(restore(
                    path,
                    "commondir",
                    before.commondir.as_ref(),
                    reason,
                ));
            }
            for (name, f) in &now.legacy {
                let same = before
                    .legacy
                    .get(name)
                    .is_some_and(|b| b.id == f.id && b.bytes == f.bytes);
                if !same {
                    changes.push(
                        self.quarantine(
                            &path.join(name),
                            "a legacy remote file made or changed during the run (git reads it \
                         for a remote its config does not define, and never writes it)"
                                .into(),
                        ),
                    );
                }
            }
            if now.hooks_unreadable && !before.hooks_unreadable {
                changes.push(self.quarantine(
                    &path.join("hooks"),
                    "a hooks directory that cannot be read".into(),
                ));
                continue;
            }
            if before.hooks_link != now.hooks_link && now.hooks_link.is_some() {
                changes.push(self.quarantine(
                    &path.join("hooks"),
                    "a hooks symlink made during the run".into(),
                ));
                continue;
            }
            // Where the hooks are: through a symlinked hooks directory, at
            // its real path (renamed there, inside the roots only).
            let hooks_dir = match &now.hooks_link {
                Some(_) => real_dir(&path.join("hooks")).unwrap_or_else(|_| path.join("hooks")),
                None => path.join("hooks"),
            };
            for (name, id) in &now.hooks {
                if before.hooks.get(name) != Some(id) {
                    changes.push(self.quarantine(
                        &hooks_dir.join(name),
                        format!(
                            "hook {} made or changed during the run",
                            name.to_string_lossy()
                        ),
                    ));
                }
            }
        }
        for (path, now, target) in pointers {
            // Inside a git directory put aside whole: gone with it.
            if failed.keys().any(|f| path.starts_with(f) && path != f) {
                continue;
            }
            let reason = if now.symlink && path.file_name() == Some(OsStr::new(".git")) {
                Some("a .git symlink made or changed during the run".to_string())
            } else if now.symlink {
                Some(
                    "a symlink to a directory in a git directory, made or changed during the run"
                        .to_string(),
                )
            } else {
                match target {
                    None => None,
                    Some(Err(unjudged)) => Some(unjudged),
                    Some(Ok(target)) => match failed.get(target.as_path()) {
                        Some(r) => Some(format!("names {}, put aside: {r}", target.display())),
                        None => self
                            .judge_target(&target, after)
                            .map(|r| format!("names {}: {r}", target.display())),
                    },
                }
            };
            if let Some(reason) = reason {
                changes.push(self.quarantine(path, reason));
            }
        }
        // A symlink made during the run at the walked top of the temp dir
        // or a cache leads a user who enters it to repositories the
        // snapshot has no history of: each must pass as new, whatever its
        // age (an earlier confined run may have planted it there).
        for (link, target) in links {
            let reason = match target {
                Err(why) => Some(format!("a symlink that {why}")),
                Ok(None) => None,
                Ok(Some(t)) => after
                    .git_dirs
                    .iter()
                    .filter(|(p, _)| p.starts_with(&t) && self.followed_only_after(p))
                    .find_map(|(p, g)| {
                        failed
                            .get(p.as_path())
                            .cloned()
                            .or_else(|| self.judge_whole(p, g, after))
                            .map(|r| format!("names {}: {r}", p.display()))
                    }),
            };
            if let Some(reason) = reason {
                changes.push(self.quarantine(link, reason));
            }
        }
    }

    /// Where the references of `after` that were there before the run
    /// lead now (real paths), and how git uses what they lead to: `.git`
    /// files and symlinks, symlinks at the walked top of the temp dir and
    /// caches, `commondir`, and repository locations in config entries
    /// that were in the same git directory's config before.
    fn old_reference_targets(&self, after: &Found) -> BTreeMap<PathBuf, Via> {
        let mut out = BTreeMap::new();
        for (path, p) in &after.pointers {
            if self.before.pointers.get(path) != Some(p) {
                continue;
            }
            let dir = path.parent().unwrap_or(path);
            let t = if p.symlink {
                real_dir(path).ok()
            } else {
                gitfile_target(&p.bytes, dir).and_then(Result::ok)
            };
            out.extend(t.map(|t| (t, Via::Pointer)));
        }
        for (link, to) in &self.before.links {
            if after.links.get(link).is_none_or(|now| now == to) {
                out.extend(real_dir(link).ok().map(|t| (t, Via::Pointer)));
            }
        }
        let entries_of = |g: &GitDir| -> Vec<config::Entry> {
            [&g.config, &g.config_worktree]
                .into_iter()
                .flatten()
                .filter_map(|f| f.bytes.as_deref().and_then(|b| config::parse(b).ok()))
                .flatten()
                .collect()
        };
        for (path, g) in &after.git_dirs {
            let Some(b) = self.before.git_dirs.get(path) else {
                continue;
            };
            if b.commondir == g.commondir
                && let Some(bytes) = g.commondir.as_ref().and_then(|c| c.bytes.as_deref())
                && let Ok(t) = real_dir(&path.join(OsStr::from_bytes(trim_newlines(bytes))))
            {
                out.insert(t, Via::Pointer);
            }
            let was = entries_of(b);
            let now = entries_of(g);
            let bases = url_bases(path, &now);
            for e in now.iter().filter(|e| url_key(e) && was.contains(e)) {
                for c in entry_candidates(e, &now, &bases) {
                    if let Ok(t) = real_dir(&c) {
                        out.entry(t).or_insert(Via::Url);
                    }
                }
            }
        }
        out
    }

    /// Whether the git directory at `path` has no history in the
    /// snapshot: the snapshot neither found it nor walked where it lies
    /// (a part of the temp dir or a cache only the walk after the run
    /// followed a reference into; see [`follow`]).
    fn followed_only_after(&self, path: &Path) -> bool {
        let walked = |(r, limit): &(PathBuf, usize)| {
            let Ok(rel) = path.strip_prefix(r) else {
                return false;
            };
            // Within the depth its walk went to, and a `.git` just below.
            let n = rel.components().count();
            *limit == FULL
                || n <= *limit
                || (n == *limit + 1 && path.file_name() == Some(OsStr::new(".git")))
        };
        !self.before.git_dirs.contains_key(path)
            && !self.before.git_dirs.keys().any(|g| path.starts_with(g))
            && !self.before.extra.keys().any(|e| path.starts_with(e))
            && !self.roots.iter().any(walked)
    }

    /// Why a remote URL entry `e` of the git directory `git_dir` must go:
    /// a local repository it names, in a part of the temp dir or a cache
    /// the snapshot did not walk, that would not pass as new (its hooks
    /// run on a push to it; githooks(5)).
    fn judge_url(
        &self,
        git_dir: &Path,
        e: &config::Entry,
        entries: &[config::Entry],
        after: &Found,
    ) -> Option<String> {
        if !url_key(e) {
            return None;
        }
        let bases = url_bases(git_dir, entries);
        for c in entry_candidates(e, entries, &bases) {
            // Read now, not from the walk: a repository the follow could
            // not reach (its budget) is judged all the same.
            let (at, g) = match git_dir_at(&c, after) {
                Located::GitDir(at, g) => (at, g),
                Located::Nothing => continue,
                Located::Unjudged(why) => return Some(format!("{} {why}", e.name())),
            };
            if !self.followed_only_after(&at) {
                continue; // judged where it lies, as any git directory
            }
            // Made during the run, the reference is judged as leading to a
            // new repository, whatever the repository's age: an earlier
            // confined run may have planted it where no snapshot looks.
            if let Some(r) = self.judge_whole_as(&at, &g, after, Via::url_to(&g)) {
                return Some(format!("{} names {}: {r}", e.name(), at.display()));
            }
        }
        None
    }

    /// Why a git directory that is new at `path` must go, if it must.
    fn judge_whole(&self, path: &Path, g: &GitDir, after: &Found) -> Option<String> {
        self.judge_whole_as(path, g, after, Via::Pointer)
    }

    /// [`Self::judge_whole`] for a use of it `via` a reference: only the
    /// hooks that use runs count.
    fn judge_whole_as(&self, path: &Path, g: &GitDir, after: &Found, via: Via) -> Option<String> {
        for file in [&g.config, &g.config_worktree].into_iter().flatten() {
            let Some(bytes) = &file.bytes else {
                return Some("a config that cannot be read".into());
            };
            let entries = match config::parse(bytes) {
                Ok(e) => e,
                Err(e) => return Some(format!("a config git may read otherwise ({e})")),
            };
            if let Some(r) = entries.iter().find_map(|e| {
                self.refused(path, e)
                    .or_else(|| self.judge_url_once(path, e, &entries, after))
            }) {
                return Some(r);
            }
        }
        if let Some(r) = self.judge_commondir(path, g.commondir.as_ref(), after) {
            return Some(r);
        }
        if g.hooks_link.is_some() {
            return Some("a hooks symlink".into());
        }
        if g.hooks_unreadable {
            return Some("a hooks directory that cannot be read".into());
        }
        if let Some(name) = g.legacy.keys().next() {
            return Some(format!("a legacy remote file {}", name.to_string_lossy()));
        }
        g.hooks
            .keys()
            .find(|name| via.runs(name))
            .map(|name| format!("hook {}", name.to_string_lossy()))
    }

    /// Why the change of a config from `was` to `is` must be undone: a key
    /// added that is not on the allow-list, or a config that cannot be
    /// judged.
    fn judge_config_change(
        &self,
        git_dir: &Path,
        was: Option<&FileState>,
        is: Option<&FileState>,
        after: &Found,
    ) -> Option<String> {
        let is = is?;
        let Some(bytes) = &is.bytes else {
            return Some("a config that cannot be read".into());
        };
        let now = match config::parse(bytes) {
            Ok(e) => e,
            Err(e) => return Some(format!("a config git may read otherwise ({e})")),
        };
        let mut before: Vec<config::Entry> = was
            .and_then(|w| w.bytes.as_deref())
            .and_then(|b| config::parse(b).ok())
            .unwrap_or_default();
        before.sort();
        for e in &now {
            // Each entry that was there before is spent once.
            if let Ok(i) = before.binary_search(e) {
                before.remove(i);
                continue;
            }
            if let Some(r) = self
                .refused(git_dir, e)
                .or_else(|| self.judge_url_once(git_dir, e, &now, after))
            {
                return Some(r);
            }
        }
        None
    }

    /// [`Self::judge_url`], at most 4 remotes deep (a cycle of remotes
    /// that name each other ends there).
    fn judge_url_once(
        &self,
        git_dir: &Path,
        e: &config::Entry,
        entries: &[config::Entry],
        after: &Found,
    ) -> Option<String> {
        thread_local! {
            static DEPTH: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
        }
        if DEPTH.get() >= 4 {
            return None;
        }
        DEPTH.set(DEPTH.get() + 1);
        let r = self.judge_url(git_dir, e, entries, after);
        DEPTH.set(DEPTH.get() - 1);
        r
    }

    fn refused(&self, git_dir: &Path, e: &config::Entry) -> Option<String> {
        // A path (`core.worktree`) is taken where the kernel resolves it
        // (a symlink, then `..`), and must lie in a root walked in full:
        // git recurses into the repositories below a worktree.
        // A submodule's git directory (`TOP/.git/modules/NAME`) may have
        // its worktree anywhere in its superproject's, where git put it:
        // that reaches nothing the superproject does not.
        let parts: Vec<&OsStr> = git_dir.components().map(|c| c.as_os_str()).collect();
        let superproject: Option<PathBuf> = parts
            .windows(2)
            .rposition(|w| w[0] == ".git" && w[1] == "modules")
            .map(|i| parts[..i].iter().collect());
        config::refused(e, &|rel: &str| {
            let joined = git_dir.join(rel);
            let real = real_dir(&joined).unwrap_or_else(|_| normalize(&joined));
            self.roots
                .iter()
                .any(|(r, limit)| *limit == FULL && real.starts_with(r))
                || superproject
                    .as_ref()
                    .is_some_and(|top| real.starts_with(top))
        })
    }

    /// Why a `commondir` (bytes) in the git directory `git_dir` must go.
    fn judge_commondir(
        &self,
        git_dir: &Path,
        commondir: Option<&FileState>,
        after: &Found,
    ) -> Option<String> {
        let file = commondir?;
        let Some(bytes) = &file.bytes else {
            return Some("a commondir that cannot be read".into());
        };
        let text = trim_newlines(bytes);
        let target = match real_dir(&git_dir.join(OsStr::from_bytes(text))) {
            Ok(t) => t,
            Err(unjudged) => return Some(format!("commondir {unjudged}")),
        };
        self.judge_target(&target, after)
            .map(|r| format!("commondir {}: {r}", target.display()))
    }

    /// Why a git directory newly named by a pointer (`.git` file,
    /// `commondir`) must not be: one git keeps for a worktree (`.git`,
    /// `.git/modules/...`, `.git/worktrees/*`) that was there before the
    /// run, or lies outside the writable roots, is trusted (it is already
    /// in use where it is); any other is judged whole.
    fn judge_target(&self, target: &Path, after: &Found) -> Option<String> {
        // Trusted by its place only where the run could not have made it:
        // outside the writable roots, or in the snapshot from before the
        // run, the same directory still.
        let inside = self.roots.iter().any(|(r, _)| target.starts_with(r));
        let from_before = self
            .before
            .git_dirs
            .get(target)
            .zip(after.git_dirs.get(target))
            .is_some_and(|(b, a)| b.id == a.id);
        if kept_for_a_worktree(target) && (!inside || from_before) {
            return None;
        }
        let g = match after.git_dirs.get(target) {
            Some(g) => g.clone(),
            None => {
                let fd = undo::open_root(target).ok()?;
                read_git_dir(&fd)?
            }
        };
        // A pointer made during the run to a repository the snapshot has no
        // history of is judged as pointing at a new one, whatever its age:
        // an earlier confined run may have planted it there.
        self.judge_whole(target, &g, after)
    }
}

/// Whether `dir` is a git directory git keeps for a worktree: `.git`,
/// or one inside a `.git/modules/` or `.git/worktrees/`.
fn kept_for_a_worktree(dir: &Path) -> bool {
    if dir.file_name() == Some(OsStr::new(".git")) {
        return true;
    }
    let parts: Vec<&OsStr> = dir.components().map(|c| c.as_os_str()).collect();
    parts
        .windows(2)
        .any(|w| w[0] == ".git" && (w[1] == "modules" || w[1] == "worktrees"))
}

/// `path` with `.` and `..` taken lexically.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

fn trim_newlines(mut b: &[u8]) -> &[u8] {
    while let [rest @ .., b'\n' | b'\r'] = b {
        b = rest;
    }
    b
}

/// Where a pointer leads: the git directory's real path, or why it cannot
/// be judged.
type Target = Result<PathBuf, String>;

/// The directory a `.git` file names, as git reads it (setup.c,
/// read_gitfile_gently): `gitdir: PATH`, the whole file but its trailing
/// newlines; PATH relative to the file's directory `here` when not
/// absolute. `None` when the file is no pointer git would follow (git
/// refuses it: "invalid gitfile format"); else where it leads
/// ([`real_dir`]).
fn gitfile_target(bytes: &[u8], here: &Path) -> Option<Target> {
    let named = trim_newlines(bytes).strip_prefix(b"gitdir: ")?;
    Some(real_dir(&here.join(OsStr::from_bytes(named))))
}

/// The real path of the directory `path` leads to, resolved by the kernel
/// as git's would (symlinks followed where they stand, `..` from the
/// directory reached), but through no magic link (openat2(2)
/// `RESOLVE_NO_MAGICLINKS`): `/proc/self/cwd` names another directory for
/// git than for `dsh-exec`. Err (the reason) when it cannot be judged so:
/// missing, not a directory, or through `/proc`.
fn real_dir(path: &Path) -> Result<PathBuf, String> {
    use crate::sys::fs::{RESOLVE_NO_MAGICLINKS, open_at2};
    let flags = libc::O_PATH | libc::O_DIRECTORY;
    let fd = open_at2(
        libc::AT_FDCWD,
        path.as_os_str().as_bytes(),
        flags,
        RESOLVE_NO_MAGICLINKS,
    )
    .map_err(|e| {
        format!(
            "names {}, which cannot be judged ({})",
            path.display(),
            std::io::Error::from_raw_os_error(e)
        )
    })?;
    std::fs::read_link(fd_path(fd.as_raw_fd()))
        .map_err(|e| format!("names {}, which cannot be judged ({e})", path.display()))
}

/// Puts aside the entry at `path` (renamed `NAME.dsh-exec-quarantined`,
/// or with a random suffix when the run has taken the first hundred such
/// names), reached from `/` without following a symlink. Only inside a
/// writable root: a root itself, or anything outside, is never renamed
/// (reported, `restored: false`).
fn put_aside(
    roots: &[(PathBuf, usize)],
    all_roots: &[PathBuf],
    path: &Path,
    change: &'static str,
    reason: String,
) -> ProtectedChange {
    let inside = roots.iter().any(|(r, _)| path.starts_with(r))
        && !all_roots.iter().any(|r| r.starts_with(path));
    let moved = inside
        && match (path.parent(), path.file_name()) {
            (Some(parent), Some(name)) => {
                undo::open_root(parent).is_ok_and(|dir| aside(dir.as_raw_fd(), name))
            }
            _ => false,
        };
    ProtectedChange {
        path: path.to_path_buf(),
        change: change.into(),
        restored: moved,
        reason: Some(reason),
    }
}

/// Renames `name` in `dir` aside: `NAME.dsh-exec-quarantined[.N]`, else
/// (the run took those names, or the name is too long to extend) a random
/// `.dsh-exec-quarantined-HEX` beside it; where no rename is possible, a
/// planted entry is removed (following no symlink).
fn aside(dir: RawFd, name: &OsStr) -> bool {
    if undo::rename_aside(dir, name, QUARANTINED).is_ok() {
        return true;
    }
    let mut random = [0u8; 8];
    let _ = crate::sys::random_bytes(&mut random);
    let hex: String = random.iter().map(|b| format!("{b:02x}")).collect();
    let short = OsString::from(format!("{QUARANTINED}-{hex}"));
    crate::sys::fs::rename_noreplace(dir, name, &short).is_ok() || undo::remove_at(dir, name)
}

/// Restores `name` in the git directory `git_dir` to what it was (`was`;
/// `None`: it did not exist), keeping the run's version beside it as
/// `NAME.dsh-exec-quarantined`.
fn restore(git_dir: &Path, name: &str, was: Option<&FileState>, reason: String) -> ProtectedChange {
    let path = git_dir.join(name);
    let done = undo::open_root(git_dir).is_ok_and(|dir| {
        let fd = dir.as_raw_fd();
        let aside = aside(fd, OsStr::new(name));
        match was.and_then(|w| Some((w.bytes.as_ref()?, w.mode))) {
            Some((bytes, (mode, uid, gid))) => {
                undo::write_at(fd, OsStr::new(name), bytes, mode & 0o777).is_ok() && {
                    // Its owner as before (dsh-exec may be root).
                    let _ = nix::unistd::fchownat(
                        &dir,
                        name,
                        Some(uid.into()),
                        Some(gid.into()),
                        nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
                    );
                    true
                }
            }
            None => aside,
        }
    });
    ProtectedChange {
        path,
        change: if was.is_some() { "modified" } else { "created" }.into(),
        restored: done,
        reason: Some(reason),
    }
}

/// The coarse clock now (clock_gettime(2) `CLOCK_REALTIME_COARSE`), which
/// local file systems stamp changes from (current_time(), fs/inode.c;
/// multigrain stamps are finer, never older): a change after this moment
/// has a ctime at or after it. On file systems stamped by another clock
/// (NFS, FUSE: the server's) a second is taken off for skew.
fn start_stamp(root: Option<&Path>) -> (i64, i64) {
    use nix::sys::statfs;
    use nix::time::{ClockId, clock_gettime};
    let coarse = match clock_gettime(ClockId::CLOCK_REALTIME_COARSE) {
        Ok(ts) => (ts.tv_sec(), ts.tv_nsec()),
        // Unreachable on Linux 2.6.32+; a second back is always safe.
        Err(_) => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            (now.as_secs() as i64 - 1, 0)
        }
    };
    let local = root.is_some_and(|r| {
        statfs::statfs(r).is_ok_and(|f| {
            [
                statfs::EXT4_SUPER_MAGIC,
                statfs::XFS_SUPER_MAGIC,
                statfs::BTRFS_SUPER_MAGIC,
                statfs::TMPFS_MAGIC,
                statfs::OVERLAYFS_SUPER_MAGIC,
            ]
            .contains(&f.filesystem_type())
        })
    });
    if local {
        coarse
    } else {
        (coarse.0 - 1, coarse.1)
    }
}

/// Whether `path` was created at or after `since` (statx(2) birth time;
/// false where the file system keeps none).
fn born_since(path: &Path, since: (i64, i64)) -> bool {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return false;
    };
    undo::open_root(parent).is_ok_and(|dir| {
        crate::sys::fs::birth_time_at(dir.as_raw_fd(), name).is_some_and(|b| b >= since)
    })
}

/// Whether a ctime is at or after `since`. A ctime with no nanoseconds
/// comes from a file system that stamps whole seconds (or two, FAT):
/// compared by the second, less one.
fn changed_since(ctime: (i64, i64), since: (i64, i64)) -> bool {
    if ctime.1 == 0 {
        return ctime.0 >= since.0 - 1;
    }
    ctime >= since
}

fn ctime(st: &libc::stat) -> (i64, i64) {
    (st.st_ctime, st.st_ctime_nsec)
}

/// The path of an open descriptor, to reach what is in it through the
/// descriptor (proc(5), `/proc/self/fd`).
fn fd_path(fd: RawFd) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{fd}"))
}

fn open_dir_at(dir: RawFd, name: &[u8]) -> Option<OwnedFd> {
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW;
    crate::sys::fs::open_at(dir, name, flags, 0).ok()
}

/// A walk of the writable roots.
struct Walk<'a> {
    since: (i64, i64),
    /// This is the walk after the run: directories unchanged since the
    /// snapshot are not read again.
    after: bool,
    /// Below this depth only `.git` entries and what is inside git
    /// directories are walked.
    limit: usize,
    found: &'a mut Found,
}

/// Where a directory of the walk is: opened, or not yet (reached as a
/// path relative to the nearest opened ancestor, through directories
/// unchanged since the snapshot: no symlink can be on that way).
enum At {
    Open(OwnedFd),
    Relative(RawFd, PathBuf),
}

impl Walk<'_> {
    fn root(&mut self, root: &Path, previous: Option<&Node>) -> Node {
        let Ok(fd) = undo::open_root(root) else {
            return Node::default();
        };
        let Ok(st) = crate::sys::fs::fstat(&fd) else {
            return Node::default();
        };
        let mut path = root.to_path_buf();
        self.dir(At::Open(fd), &st, &mut path, previous, 0)
    }

    /// The directory at `at` (stat `st`) at `path`, `depth` below its
    /// root; `previous`: the snapshot's node for the same path.
    fn dir(
        &mut self,
        at: At,
        st: &libc::stat,
        path: &mut PathBuf,
        previous: Option<&Node>,
        depth: usize,
    ) -> Node {
        let id = (st.st_dev, st.st_ino);
        let previous = previous.filter(|p| p.id == id);
        let mut node = Node {
            id,
            ..Node::default()
        };
        self.found.read += 1;
        // Unchanged since the snapshot: its listing then is its listing
        // now, and it need not be opened unless git's files are in it.
        let reuse =
            previous.filter(|p| self.after && p.listed && !changed_since(ctime(st), self.since));
        let needs_fd = reuse.is_none_or(|p| p.marks & (Marks::DOT_GIT | Marks::HEAD) != 0);
        let (fd, base, prefix) = match at {
            At::Open(fd) => {
                let raw = fd.as_raw_fd();
                (Some(fd), raw, PathBuf::new())
            }
            At::Relative(base, rel) if needs_fd => {
                let Some(fd) = open_dir_at(base, rel.as_os_str().as_bytes()) else {
                    // Not readable (a mode that keeps this user out): what
                    // cannot be walked is not trusted, when the command
                    // (this user) could have made it so; another user's
                    // private directory (in a shared /tmp) it could not
                    // have written either.
                    let ours = undo::stat_at(base, rel.as_os_str())
                        .is_ok_and(|st| st.st_uid == nix::unistd::geteuid().as_raw());
                    if ours {
                        let made = crate::sys::fs::birth_time_at(base, rel.as_os_str())
                            .is_some_and(|b| b >= self.since);
                        self.found
                            .unreached
                            .push((path.clone(), self.after && made));
                    }
                    return node;
                };
                let raw = fd.as_raw_fd();
                (Some(fd), raw, PathBuf::new())
            }
            At::Relative(base, rel) => (None, base, rel),
        };
        let names: Vec<OsString> = match (reuse, &fd) {
            (Some(p), _) => {
                node.listed = true;
                node.marks = p.marks;
                p.children.keys().cloned().collect()
            }
            (None, Some(fd)) => {
                let Some(listing) = self.list(fd) else {
                    self.found.unreached.push((path.clone(), false));
                    return node;
                };
                node.listed = listing.complete;
                node.marks = listing.marks;
                // Inside a git directory a symlink to a directory is a
                // pointer too: git follows `modules/NAME` or
                // `worktrees/NAME` where it leads. (`hooks` and the hooks
                // in it are judged as hooks; `.git` as a pointer.)
                let in_git = Marks::git_dir(listing.marks)
                    || path.components().any(|c| c.as_os_str() == ".git");
                if self.limit != FULL && depth < self.limit && !in_git {
                    for n in &listing.symlinks {
                        let to = std::fs::read_link(fd_path(fd.as_raw_fd()).join(n))
                            .map(PathBuf::into_os_string)
                            .unwrap_or_default();
                        self.found.links.insert(path.join(n), to);
                    }
                }
                if in_git && path.file_name() != Some(OsStr::new("hooks")) {
                    for name in &listing.symlinks {
                        if name == "hooks" || name == ".git" {
                            continue;
                        }
                        if let Some(p) = read_dir_symlink(fd.as_raw_fd(), name) {
                            self.found.pointers.insert(path.join(name), p);
                        }
                    }
                }
                listing.subdirs
            }
            (None, None) => return node,
        };
        let git_dir = Marks::git_dir(node.marks);
        if let Some(fd) = &fd {
            if git_dir && let Some(g) = read_git_dir(fd) {
                self.found.git_dirs.insert(path.clone(), g);
            }
            if node.marks & Marks::DOT_GIT != 0
                && let Some(p) = read_pointer(fd.as_raw_fd())
            {
                self.found.pointers.insert(path.join(".git"), p);
            }
        }
        let in_git = git_dir || path.components().any(|c| c.as_os_str() == ".git");
        for name in names {
            if depth >= self.limit && !in_git && name != ".git" {
                continue;
            }
            let rel = prefix.join(&name);
            let Ok(st) = undo::stat_at(base, rel.as_os_str()) else {
                continue;
            };
            self.child(
                &mut node,
                name,
                st,
                At::Relative(base, rel),
                path,
                previous,
                depth,
            );
        }
        node
    }

    /// Visits the subdirectory `name` (stat `st`, at `at`) of `node`.
    #[allow(clippy::too_many_arguments)]
    fn child(
        &mut self,
        node: &mut Node,
        name: OsString,
        st: libc::stat,
        at: At,
        path: &mut PathBuf,
        previous: Option<&Node>,
        depth: usize,
    ) {
        if st.st_mode & libc::S_IFMT != libc::S_IFDIR {
            return;
        }
        let before = previous.and_then(|p| p.children.get(&name));
        path.push(&name);
        if depth + 1 > MAX_DEPTH || self.found.read >= WALK_BUDGET {
            // Made during the run (its birth time, which no process can
            // set: statx(2)) and not judged: put aside whole. Anything
            // else, or where the file system keeps no birth time: told.
            // (Or moved here: a rename keeps the birth time but sets the
            // ctime.) Not judged by its owner: a root run's gate makes
            // chown(2) for the command, so a directory the run made can be
            // another user's.
            // At the depth limit, a directory that was not at this path
            // with this inode before the run (moved here, or under a
            // directory moved or made since) is the run's too: moving an
            // old tree below the limit sets the ctime of the moved
            // directory only, not of what it holds.
            let elsewhere_before =
                depth + 1 > MAX_DEPTH && before.is_none_or(|b| b.id != (st.st_dev, st.st_ino));
            let made = elsewhere_before
                || changed_since(ctime(&st), self.since)
                || match &at {
                    At::Relative(base, rel) => {
                        crate::sys::fs::birth_time_at(*base, rel.as_os_str())
                            .is_some_and(|b| b >= self.since)
                    }
                    At::Open(_) => false,
                };
            self.found
                .unreached
                .push((path.clone(), self.after && made));
            // Kept by name (not listed), so that the walk after the run,
            // reusing this listing, comes here again and tells it.
            node.children.insert(
                name,
                Node {
                    id: (st.st_dev, st.st_ino),
                    ..Node::default()
                },
            );
        } else {
            let child = self.dir(at, &st, path, before, depth + 1);
            node.children.insert(name, child);
        }
        path.pop();
    }

    /// Reads the directory `fd`: its subdirectories and marks.
    fn list(&mut self, fd: &OwnedFd) -> Option<Listing> {
        use std::mem::MaybeUninit;
        // On the heap: inlined into the recursive walk, a buffer on the
        // stack made every level 32 KiB deep, and a tree of 240 levels
        // overflowed the main thread's stack before the check could judge.
        let mut buf = vec![MaybeUninit::<u8>::uninit(); 32 << 10];
        let mut dir = rustix::fs::RawDir::new(fd, &mut buf);
        let mut listing = Listing {
            complete: true,
            ..Listing::default()
        };
        while let Some(entry) = dir.next() {
            let Ok(entry) = entry else {
                listing.complete = false;
                break;
            };
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            listing.marks |= Marks::of(name);
            use rustix::fs::FileType;
            let is_dir = match entry.file_type() {
                FileType::Directory => true,
                FileType::Unknown => undo::stat_at(fd.as_raw_fd(), OsStr::from_bytes(name))
                    .is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR),
                _ => false,
            };
            if is_dir {
                listing.subdirs.push(OsStr::from_bytes(name).to_os_string());
            } else if entry.file_type() == FileType::Symlink {
                listing
                    .symlinks
                    .push(OsStr::from_bytes(name).to_os_string());
            }
        }
        // In name order, as the snapshot's listing is reused after the
        // run: both walks meet the budget at the same place.
        listing.subdirs.sort();
        Some(listing)
    }
}

#[derive(Default)]
struct Listing {
    complete: bool,
    marks: u8,
    subdirs: Vec<OsString>,
    /// The symlinks among the entries.
    symlinks: Vec<OsString>,
}

/// A file in `dir` opened as git would read it (following a symlink,
/// as git does) but through no magic link (openat2(2)
/// `RESOLVE_NO_MAGICLINKS`: `/proc/self/cwd` names another directory for
/// git than for `dsh-exec`), `O_PATH`: nothing is opened for reading yet,
/// so a device or FIFO is never acted on.
fn open_no_magic(dir: RawFd, name: &[u8]) -> Option<OwnedFd> {
    use crate::sys::fs::{RESOLVE_NO_MAGICLINKS, open_at2};
    open_at2(dir, name, libc::O_PATH, RESOLVE_NO_MAGICLINKS).ok()
}

/// The bytes of the regular file `fd` (an `O_PATH` descriptor), at most
/// [`FILE_MAX`]: re-opened for reading through its own descriptor.
fn read_regular(fd: &OwnedFd, st: &libc::stat) -> Option<Vec<u8>> {
    use std::io::Read;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG || st.st_size as u64 > FILE_MAX {
        return None;
    }
    let file = std::fs::File::open(fd_path(fd.as_raw_fd())).ok()?;
    let mut bytes = Vec::new();
    file.take(FILE_MAX + 1).read_to_end(&mut bytes).ok()?;
    (bytes.len() as u64 <= FILE_MAX).then_some(bytes)
}

/// A small file in `dir` (`config`, `commondir`), read as git reads it
/// ([`open_no_magic`]); `None` when there is nothing there.
fn read_file(dir: RawFd, name: &[u8]) -> Option<FileState> {
    let entry = undo::stat_at(dir, OsStr::from_bytes(name)).ok()?;
    let state = |st: &libc::stat, bytes| FileState {
        id: (st.st_dev, st.st_ino),
        ctime: ctime(st),
        mode: (st.st_mode & 0o7777, st.st_uid, st.st_gid),
        bytes,
    };
    let Some(fd) = open_no_magic(dir, name) else {
        // A dangling symlink, or one through /proc: judged by the entry
        // itself, as a file that cannot be read.
        return Some(state(&entry, None));
    };
    let st = crate::sys::fs::fstat(&fd).ok()?;
    let bytes = read_regular(&fd, &st);
    Some(state(&st, bytes))
}

/// The git directory `fd` as git would use it.
fn read_git_dir(fd: &OwnedFd) -> Option<GitDir> {
    let st = crate::sys::fs::fstat(fd).ok()?;
    let raw = fd.as_raw_fd();
    let mut g = GitDir {
        id: (st.st_dev, st.st_ino),
        config: read_file(raw, b"config"),
        config_worktree: read_file(raw, b"config.worktree"),
        commondir: read_file(raw, b"commondir"),
        hooks: BTreeMap::new(),
        hooks_link: None,
        hooks_unreadable: false,
        legacy: legacy_remotes(raw),
    };
    if let Ok(link) = undo::stat_at(raw, OsStr::new("hooks"))
        && link.st_mode & libc::S_IFMT == libc::S_IFLNK
    {
        let target = std::fs::read_link(fd_path(raw).join("hooks"))
            .map(|t| t.into_os_string().into_vec())
            .unwrap_or_default();
        g.hooks_link = Some((target, (link.st_dev, link.st_ino)));
    }
    // A symlinked hooks directory is read where it leads (git follows it),
    // through no magic link; judged by its entries like any other.
    let hooks = if g.hooks_link.is_some() {
        open_no_magic(raw, b"hooks").and_then(|fd| {
            let st = crate::sys::fs::fstat(&fd).ok()?;
            if st.st_mode & libc::S_IFMT != libc::S_IFDIR {
                return None;
            }
            crate::sys::fs::open_at(fd.as_raw_fd(), b".", libc::O_RDONLY | libc::O_DIRECTORY, 0)
                .ok()
        })
    } else {
        open_dir_at(raw, b"hooks")
    };
    let Some(hooks) = hooks else {
        g.hooks_unreadable = undo::stat_at(raw, OsStr::new("hooks"))
            .is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR);
        return Some(g);
    };
    let hooks_fd = hooks.as_raw_fd();
    let Some(names) = list_names(&hooks) else {
        g.hooks_unreadable = true;
        return Some(g);
    };
    for name in names {
        if name.as_bytes().ends_with(b".sample") {
            continue;
        }
        let Ok(entry) = undo::stat_at(hooks_fd, &name) else {
            continue;
        };
        let entry_id = ((entry.st_dev, entry.st_ino), ctime(&entry));
        // git runs an executable regular file, following a symlink.
        let id = match open_no_magic(hooks_fd, name.as_bytes()) {
            Some(fd) => {
                let Ok(st) = crate::sys::fs::fstat(&fd) else {
                    continue;
                };
                if st.st_mode & libc::S_IFMT != libc::S_IFREG || st.st_mode & 0o111 == 0 {
                    continue;
                }
                match read_regular(&fd, &st) {
                    Some(bytes) => {
                        use std::hash::BuildHasher;
                        let keys =
                            HOOK_KEYS.get_or_init(std::collections::hash_map::RandomState::new);
                        (Some(keys.hash_one(&bytes)), None)
                    }
                    None => (None, Some(entry_id)),
                }
            }
            // A symlink that does not lead to a file here (dangling: its
            // target may be made later; or through /proc, which leads git
            // elsewhere): counted, by the entry itself.
            None => (None, Some(entry_id)),
        };
        g.hooks.insert(name, id);
    }
    Some(g)
}

/// The files in `remotes/` and `branches/` of the git directory `dir`
/// (see [`GitDir::legacy`]), at most 256 of each.
fn legacy_remotes(dir: RawFd) -> BTreeMap<OsString, FileState> {
    let mut out = BTreeMap::new();
    for sub in ["remotes", "branches"] {
        let Some(fd) = open_dir_at(dir, sub.as_bytes()) else {
            continue;
        };
        for name in list_names(&fd).unwrap_or_default().into_iter().take(256) {
            if let Some(f) = read_file(fd.as_raw_fd(), name.as_bytes()) {
                let mut key = OsString::from(format!("{sub}/"));
                key.push(&name);
                out.insert(key, f);
            }
        }
    }
    out
}

/// The names in the directory `dir`, or `None` when it cannot be listed.
fn list_names(dir: &OwnedFd) -> Option<Vec<OsString>> {
    use std::mem::MaybeUninit;
    let mut buf = vec![MaybeUninit::<u8>::uninit(); 8 << 10];
    let mut it = rustix::fs::RawDir::new(dir, &mut buf);
    let mut names = Vec::new();
    while let Some(entry) = it.next() {
        let name = entry.ok()?.file_name().to_bytes().to_vec();
        if name != b"." && name != b".." {
            names.push(OsString::from_vec(name));
        }
    }
    Some(names)
}

/// The `.git` entry of the directory `dir`, when it is a file or symlink.
fn read_pointer(dir: RawFd) -> Option<Pointer> {
    let st = undo::stat_at(dir, OsStr::new(".git")).ok()?;
    let id = (st.st_dev, st.st_ino);
    match st.st_mode & libc::S_IFMT {
        libc::S_IFLNK => {
            let target = std::fs::read_link(fd_path(dir).join(".git")).ok()?;
            Some(Pointer {
                id,
                symlink: true,
                bytes: target.into_os_string().into_vec(),
            })
        }
        libc::S_IFREG => {
            let file = read_file(dir, b".git")?;
            Some(Pointer {
                id,
                symlink: false,
                // Unreadable or too large: git cannot use it either, but
                // it is still judged as a change.
                bytes: file.bytes.unwrap_or_default(),
            })
        }
        _ => None,
    }
}

/// The symlink `name` in `dir`, when it leads to a directory (through no
/// magic link, as [`open_no_magic`]), as a pointer.
fn read_dir_symlink(dir: RawFd, name: &OsStr) -> Option<Pointer> {
    let link = undo::stat_at(dir, name).ok()?;
    let to = open_no_magic(dir, name.as_bytes())?;
    let st = crate::sys::fs::fstat(&to).ok()?;
    if st.st_mode & libc::S_IFMT != libc::S_IFDIR {
        return None;
    }
    let target = std::fs::read_link(fd_path(dir).join(name)).ok()?;
    Some(Pointer {
        id: (link.st_dev, link.st_ino),
        symlink: true,
        bytes: target.into_os_string().into_vec(),
    })
}

/// The local paths a repository-location value `url` may name, as git
/// takes it (git-fetch(1), GIT URLS; transport.c, `url_is_local_not_ssh`):
/// a `file://` URL, its host ignored and its path percent-decoded; an
/// absolute path; a relative path (no `:` before its first `/`), taken from
/// each of `bases` (git resolves it from where it runs: the worktree, or
/// the git directory); none for a network transport or a bare remote name.
/// Each with the suffixes `git receive-pack` and `upload-pack` try
/// (path.c, `enter_repo`): `P/.git`, `P`, `P.git/.git`, `P.git`.
fn url_candidates(url: &str, bases: &[PathBuf]) -> Vec<PathBuf> {
    let named: Vec<PathBuf> = if let Some(rest) = url.strip_prefix("file://") {
        let path = match rest.find('/') {
            Some(i) => &rest[i..],
            None => return Vec::new(),
        };
        vec![PathBuf::from(OsString::from_vec(percent_decode(path)))]
    } else if url.contains("://") {
        return Vec::new();
    } else {
        let colon = url.find(':');
        let slash = url.find('/');
        if colon.is_some_and(|c| slash.is_none_or(|s| c < s)) || url.is_empty() {
            return Vec::new(); // scp-like `host:path`
        }
        if url.starts_with('/') {
            vec![PathBuf::from(url)]
        } else if let Some(rest) = url.strip_prefix('~') {
            // `~/P` and `~USER/P` (path.c, `interpolate_path`): the home of
            // whoever runs git later, this user's (`$HOME`) or USER's.
            let (user, path) = rest.split_once('/').unwrap_or((rest, ""));
            let home = if user.is_empty() {
                std::env::var_os("HOME").map(PathBuf::from)
            } else {
                nix::unistd::User::from_name(user)
                    .ok()
                    .flatten()
                    .map(|u| u.dir)
            };
            home.map(|h| vec![h.join(path)]).unwrap_or_default()
        } else {
            bases.iter().map(|b| b.join(url)).collect()
        }
    };
    let mut out = Vec::new();
    for p in named {
        let mut dot_git = p.as_os_str().to_os_string();
        dot_git.push(".git");
        let dot_git = PathBuf::from(dot_git);
        out.extend([p.join(".git"), p, dot_git.join(".git"), dot_git]);
    }
    out
}

/// `%XX` escapes decoded (git's `url_decode`); anything else as it is.
fn percent_decode(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%'
            && let (Some(h), Some(l)) = (
                b.get(i + 1).copied().and_then(hex),
                b.get(i + 2).copied().and_then(hex),
            )
        {
            out.push((h * 16 + l) as u8);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    out
}

/// Where git may run when it uses the git directory `git_dir` whose config
/// has `entries`: the git directory, its worktree (the parent of a `.git`),
/// and `core.worktree` (relative to the git directory).
fn url_bases(git_dir: &Path, entries: &[config::Entry]) -> Vec<PathBuf> {
    let mut out = vec![git_dir.to_path_buf()];
    if git_dir.file_name() == Some(OsStr::new(".git"))
        && let Some(top) = git_dir.parent()
    {
        out.push(top.to_path_buf());
    }
    for e in entries {
        if e.section == "core"
            && e.key == "worktree"
            && let Some(w) = &e.value
        {
            out.push(git_dir.join(w));
        }
    }
    // Each linked worktree's top (`worktrees/NAME/gitdir` names its
    // `.git` file): git resolves a relative remote from there too.
    if let Ok(names) = std::fs::read_dir(git_dir.join("worktrees")) {
        for n in names.flatten().take(1024) {
            if let Ok(b) = std::fs::read(n.path().join("gitdir"))
                && b.len() as u64 <= FILE_MAX
                && let Some(top) = Path::new(OsStr::from_bytes(trim_newlines(&b))).parent()
            {
                out.push(top.to_path_buf());
            }
        }
    }
    out
}

/// What a candidate location ([`url_candidates`]) is to git.
enum Located {
    /// A git directory (its real path), with what the walk found there or
    /// as read now.
    GitDir(PathBuf, Box<GitDir>),
    /// Nothing git would enter: missing, or no git directory.
    Nothing,
    /// Something that cannot be judged: reached through a magic link
    /// (`/proc/self/cwd` leads git, run elsewhere, somewhere else than
    /// `dsh-exec`), or unreadable; why.
    Unjudged(String),
}

/// What the candidate location `c` is, as git would enter it: resolved by
/// the kernel through no magic link, through a gitfile (`gitdir: PATH`)
/// when it is a file.
fn git_dir_at(c: &Path, after: &Found) -> Located {
    // As the walk found it, also when it was put aside meanwhile.
    let named = normalize(c);
    if let Some(g) = after.git_dirs.get(&named) {
        return Located::GitDir(named, Box::new(g.clone()));
    }
    let resolved = match resolve_no_magic(c) {
        Ok(Some(p)) => p,
        Ok(None) => return Located::Nothing,
        Err(why) => return Located::Unjudged(why),
    };
    let c = match std::fs::symlink_metadata(&resolved) {
        Ok(m) if m.is_file() => {
            let Some(bytes) = std::fs::read(&resolved)
                .ok()
                .filter(|b| b.len() as u64 <= FILE_MAX)
            else {
                return Located::Unjudged(format!("names {}, which cannot be read", c.display()));
            };
            let Some(parent) = resolved.parent() else {
                return Located::Nothing;
            };
            match gitfile_target(&bytes, parent) {
                None => return Located::Nothing,
                Some(Ok(t)) => t,
                Some(Err(why)) => return Located::Unjudged(why),
            }
        }
        Ok(_) => resolved,
        Err(_) => return Located::Nothing,
    };
    if let Some(g) = after.git_dirs.get(&c) {
        return Located::GitDir(c, Box::new(g.clone()));
    }
    let Ok(fd) = undo::open_root(&c) else {
        return Located::Nothing;
    };
    let Some(names) = list_names(&fd) else {
        return Located::Unjudged(format!("names {}, which cannot be listed", c.display()));
    };
    let marks = names.iter().fold(0, |m, n| m | Marks::of(n.as_bytes()));
    if !Marks::git_dir(marks) {
        return Located::Nothing;
    }
    match read_git_dir(&fd) {
        Some(g) => Located::GitDir(c, Box::new(g)),
        None => Located::Nothing,
    }
}

/// The real path `path` leads to, resolved by the kernel through no magic
/// link (openat2(2) `RESOLVE_NO_MAGICLINKS`, `O_PATH`): `Ok(None)` when
/// nothing is there, `Err` (why) when it leads through a magic link or
/// cannot be resolved otherwise.
fn resolve_no_magic(path: &Path) -> Result<Option<PathBuf>, String> {
    use crate::sys::fs::{RESOLVE_NO_MAGICLINKS, open_at2};
    match open_at2(
        libc::AT_FDCWD,
        path.as_os_str().as_bytes(),
        libc::O_PATH,
        RESOLVE_NO_MAGICLINKS,
    ) {
        Ok(fd) => std::fs::read_link(fd_path(fd.as_raw_fd()))
            .map(Some)
            .map_err(|e| format!("names {}, which cannot be judged ({e})", path.display())),
        Err(libc::ENOENT | libc::ENOTDIR) => Ok(None),
        Err(e) => Err(format!(
            "names {}, which cannot be judged ({})",
            path.display(),
            std::io::Error::from_raw_os_error(e)
        )),
    }
}

/// Whether the config entry `e` names a repository location: a remote's
/// or submodule's URL, or a key that takes a remote name but which git
/// also takes a URL or path in (`branch.*.remote`, `branch.*.pushRemote`,
/// `remote.pushDefault`, with a `/` or `:` in its value).
fn url_key(e: &config::Entry) -> bool {
    e.section == "remote" && e.subsection.is_some() && (e.key == "url" || e.key == "pushurl")
        || e.section == "submodule" && e.key == "url"
        || remote_name_key(e)
}

/// Whether `e` takes a remote's name (`branch.*.remote`,
/// `branch.*.pushRemote`, `remote.pushDefault`): git takes a name no
/// `remote.NAME.*` section defines as a URL or path (remote.c,
/// `remote_get` and `add_url_alias`), relative to where it runs.
fn remote_name_key(e: &config::Entry) -> bool {
    (e.section == "branch" && (e.key == "remote" || e.key == "pushremote"))
        || (e.section == "remote" && e.subsection.is_none() && e.key == "pushdefault")
}

/// The locations a repository-location entry `e` of a config with
/// `entries` may name (none for the name of a remote `entries` defines).
fn entry_candidates(
    e: &config::Entry,
    entries: &[config::Entry],
    bases: &[PathBuf],
) -> Vec<PathBuf> {
    let value = e.value.as_deref().unwrap_or("");
    if remote_name_key(e)
        && entries
            .iter()
            .any(|d| d.section == "remote" && d.subsection.as_deref() == Some(value))
    {
        return Vec::new();
    }
    url_candidates(value, bases)
}

/// How git comes to use a git directory that a reference names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Via {
    /// As the repository itself (a `.git` file or symlink, `commondir`):
    /// every hook.
    Pointer,
    /// As a remote (a URL): a fetch or clone runs `git upload-pack` there,
    /// which runs no hook; a push runs `git receive-pack`, which runs the
    /// receiving side's hooks (githooks(5)).
    Url,
    /// As a remote whose config lets a push update its worktree
    /// (`receive.denyCurrentBranch = updateInstead`): that runs the hooks a
    /// checkout runs too (`post-index-change`, ...), so every hook counts.
    UrlWithWorktree,
}

impl Via {
    /// How a URL uses the git directory `g`: with its worktree
    /// updated by a push when its config says `updateInstead`.
    fn url_to(g: &GitDir) -> Via {
        let update_instead = [&g.config, &g.config_worktree]
            .into_iter()
            .flatten()
            .filter_map(|c| c.bytes.as_deref().and_then(|b| config::parse(b).ok()))
            .flatten()
            .any(|e| {
                e.section == "receive"
                    && e.key == "denycurrentbranch"
                    && e.value
                        .as_deref()
                        .is_some_and(|v| v.eq_ignore_ascii_case("updateinstead"))
            });
        if update_instead {
            Via::UrlWithWorktree
        } else {
            Via::Url
        }
    }
}

impl Via {
    /// Whether a use this way runs the hook `name`.
    fn runs(self, name: &OsStr) -> bool {
        match self {
            Via::Pointer | Via::UrlWithWorktree => true,
            Via::Url => [
                "pre-receive",
                "update",
                "proc-receive",
                "post-receive",
                "post-update",
                "push-to-checkout",
                "reference-transaction",
            ]
            .iter()
            .any(|h| name == *h),
        }
    }
}

/// The directories the git directories and pointers of `found` lead to:
/// the targets of `.git` files, of symlinks ([`read_pointer`],
/// [`read_dir_symlink`]), of `commondir`, and the local repositories of
/// remote URLs.
fn references(found: &Found) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for (path, p) in &found.pointers {
        let dir = path.parent().unwrap_or(path);
        let target = if p.symlink {
            real_dir(path).ok()
        } else {
            gitfile_target(&p.bytes, dir).and_then(Result::ok)
        };
        out.extend(target);
    }
    for (path, g) in &found.git_dirs {
        if let Some(bytes) = g.commondir.as_ref().and_then(|c| c.bytes.as_deref()) {
            out.extend(real_dir(&path.join(OsStr::from_bytes(trim_newlines(bytes)))).ok());
        }
        for file in [&g.config, &g.config_worktree].into_iter().flatten() {
            let Some(entries) = file.bytes.as_deref().and_then(|b| config::parse(b).ok()) else {
                continue;
            };
            let bases = url_bases(path, &entries);
            for e in entries.iter().filter(|e| url_key(e)) {
                for c in entry_candidates(e, &entries, &bases) {
                    out.extend(real_dir(&c).ok());
                }
            }
        }
        // A worktree's `.gitmodules` names the URLs `git submodule update
        // --init` clones from and records (absolute ones are paths here).
        if path.file_name() == Some(OsStr::new(".git"))
            && let Some(top) = path.parent()
            && let Some(entries) = std::fs::read(top.join(".gitmodules"))
                .ok()
                .filter(|b| b.len() as u64 <= FILE_MAX)
                .and_then(|b| config::parse(&b).ok())
        {
            // A relative URL is taken from the superproject's remote
            // (submodule.c, `resolve_relative_url`): each of its local
            // locations.
            let remotes: Vec<PathBuf> = g
                .config
                .as_ref()
                .and_then(|c| c.bytes.as_deref())
                .and_then(|b| config::parse(b).ok())
                .unwrap_or_default()
                .iter()
                .filter(|e| e.section == "remote" && e.key == "url")
                .flat_map(|e| url_candidates(e.value.as_deref().unwrap_or(""), &[top.into()]))
                .collect();
            for e in entries.iter().filter(|e| url_key(e)) {
                let v = e.value.as_deref().unwrap_or("");
                let relative = v.starts_with("./") || v.starts_with("../");
                let bases: Vec<PathBuf> = if relative {
                    remotes.clone()
                } else {
                    Vec::new()
                };
                for c in url_candidates(v, &bases) {
                    out.extend(real_dir(&normalize(&c)).ok());
                }
            }
        }
    }
    // Symlinks in the walked part of the temp dir and caches
    // (`/tmp/clone` -> `/tmp/a/b/clone`): a user who enters one enters
    // where it leads.
    for link in found.links.keys() {
        out.extend(real_dir(link).ok());
    }
    out.sort();
    out.dedup();
    out
}

/// Walks in full, as roots of their own, the directories the references
/// of `found` lead to ([`references`]) inside a writable root walked one
/// level deep (the temp dir, a cache) below where its walk went, so that
/// a repository the workspace points at is judged wherever it lies; again
/// for what those lead to, at most 8 rounds. `previous`: the snapshot's
/// (for the walk after the run, whose `found` also walks every directory
/// the snapshot followed).
fn follow(
    found: &mut Found,
    roots: &[(PathBuf, usize)],
    since: (i64, i64),
    after: bool,
    previous: Option<&BTreeMap<PathBuf, Node>>,
) {
    // Deeper below a root walked one level deep than its walk went (what
    // lies within that depth, with a `.git` in it, was walked already).
    let shallow = |t: &Path| {
        roots.iter().any(|(r, limit)| {
            *limit != FULL
                && t.strip_prefix(r)
                    .is_ok_and(|rel| rel.components().count() > *limit)
        }) && !roots
            .iter()
            .any(|(r, limit)| *limit == FULL && t.starts_with(r))
    };
    let mut first: Vec<PathBuf> = previous
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default();
    for _ in 0..8 {
        let mut targets = std::mem::take(&mut first);
        targets.extend(references(found));
        targets.retain(|t| {
            shallow(t)
                && !found.extra.contains_key(t)
                && !found.git_dirs.contains_key(t)
                && !found.git_dirs.contains_key(&t.join(".git"))
        });
        targets.sort();
        targets.dedup();
        if targets.is_empty() {
            break;
        }
        for t in targets {
            let before = previous.and_then(|p| p.get(&t));
            let node = Walk {
                since,
                after,
                limit: FULL,
                found,
            }
            .root(&t, before);
            found.extra.insert(t, node);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointers_are_read_as_git_reads_them() {
        let dir = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(ws.join(".git/modules/sub")).unwrap();
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        std::os::unix::fs::symlink("../.git", ws.join("sub/link")).unwrap();
        let here = ws.join("sub");
        // Trailing newlines dropped; `..` from where a symlink leads.
        assert_eq!(
            gitfile_target(b"gitdir: ../.git/modules/sub\n\r\n", &here),
            Some(Ok(ws.join(".git/modules/sub")))
        );
        assert_eq!(
            gitfile_target(b"gitdir: link/modules/../modules/sub", &here),
            Some(Ok(ws.join(".git/modules/sub")))
        );
        // No pointer at all; a missing target; one through /proc.
        assert_eq!(gitfile_target(b"gitdir:../x", &here), None);
        assert!(matches!(
            gitfile_target(b"gitdir: ../missing", &here),
            Some(Err(_))
        ));
        assert!(matches!(
            gitfile_target(b"gitdir: /proc/self/cwd", &here),
            Some(Err(_))
        ));
        assert!(kept_for_a_worktree(Path::new("/w/.git")));
        assert!(kept_for_a_worktree(Path::new("/w/.git/modules/a/b")));
        assert!(kept_for_a_worktree(Path::new("/w/.git/worktrees/x")));
        assert!(!kept_for_a_worktree(Path::new("/w/fixtures/evil.git")));
        assert!(!kept_for_a_worktree(Path::new("/w/modules/x")));
    }

    #[test]
    fn a_git_directory_is_what_git_discovery_accepts() {
        let m = |names: &[&str]| names.iter().fold(0, |m, n| m | Marks::of(n.as_bytes()));
        assert!(Marks::git_dir(m(&["HEAD", "objects", "refs"])));
        assert!(Marks::git_dir(m(&["HEAD", "commondir"])));
        assert!(!Marks::git_dir(m(&["HEAD", "objects"])));
        assert!(!Marks::git_dir(m(&["objects", "refs", "config"])));
    }
}
