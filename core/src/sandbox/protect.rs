//! Protected paths inside writable roots: what a confined run must not be
//! able to change, because a later, unconfined program would act on it.
//!
//! A confined run that writes `core.fsmonitor` into a repository's
//! `.git/config`, or a hook into `.git/hooks/`, makes the next `git status`
//! outside run its code. So inside every writable root these stay
//! read-only:
//! - of every repository found (`find_repositories`): `.git/config`,
//!   `.git/hooks/`, `.git/config.worktree`, `.git/commondir`, and the
//!   hooks of the git directories of its submodules (`.git/modules/...`)
//!   and linked worktrees (`.git/worktrees/*`); everything else a run does
//!   to git metadata is judged after it (`gitcheck`);
//! - `dsh-exec`'s own configuration file and state directory (jobs, private
//!   spill files), wherever they are;
//! - when a writable root contains `$HOME`: the shell start-up files,
//!   `~/.gitconfig`, `~/.config/git`, `~/.ssh` ([`HOME_FILES`]);
//! - the files editors and coding agents run or obey on their own
//!   ([`AGENT_FILES`]: `.vscode/`, `.claude/`, `.mcp.json`, `.envrc`, ...)
//!   in each writable root, in each repository found, in each directory
//!   between a writable root and the working directory, and in `$HOME`
//!   when a writable root contains it; `--allow-write PATH` lifts one;
//! - every `--protect PATH`.
//!
//! Mechanism, where the supervisor may create a mount namespace
//! (CAP_SYS_ADMIN): the child enters a new mount namespace before Landlock
//! and bind-mounts each protected path read-only over itself
//! (`Protection::mounts`); every directory between a writable root and a
//! protected path (and `.git` itself) is bind-mounted over itself
//! read-write, so that it is a mount point and cannot be renamed away and
//! replaced by one with a planted config (rename(2): EBUSY), and a hard
//! link to a protected file fails (EXDEV). What does not exist yet cannot
//! be mounted over: a protected path created by the run (a new
//! `~/.bashrc`, a `.vscode/` directory with everything in it) is removed
//! when the run ends, and reported. A repository
//! the run creates itself (`git init`) is the run's own and is not
//! protected.
//!
//! Without a mount namespace (an unprivileged `dsh-exec`) the protected
//! files are snapshotted before the run and restored after it
//! ([`Snapshot`]); `enforcement` is then `partial`, and what was restored
//! is reported.
//!
//! The gate (`gate`) also refuses metadata changes to every
//! protected inode.

use std::collections::BTreeSet;
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::gate::ProtectedPath;
use super::undo::{self, Anchor};

/// Files protected in `$HOME` when a writable root contains it: those a
/// later program run outside reads as instructions (start-up files, and
/// configs that name commands to run or places to fetch code from). Not
/// everything in a home that runs code can be listed (`~/.local/bin` early
/// in `PATH`, Python's user site-packages): a writable root that contains
/// `$HOME` is warned about.
pub const HOME_FILES: [&str; 54] = [
    // shells
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".bash_aliases",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".zlogout",
    ".inputrc",
    ".config/fish",
    ".pam_environment",
    ".config/environment.d",
    ".kshrc",
    ".mkshrc",
    ".cshrc",
    ".tcshrc",
    ".oh-my-zsh",
    // sessions and services
    ".xinitrc",
    ".xprofile",
    ".config/autostart",
    ".config/systemd/user",
    // git and ssh
    ".gitconfig",
    ".config/git",
    ".ssh",
    ".gnupg",
    // tools that run what their config names, or fetch code from where it says
    ".cargo/env",
    ".cargo/config.toml",
    ".cargo/config",
    ".npmrc",
    ".yarnrc",
    ".yarnrc.yml",
    ".config/pip",
    ".pip",
    ".kube/config",
    ".aws/config",
    ".docker/config.json",
    // editors
    ".vimrc",
    ".config/nvim",
    ".emacs",
    ".emacs.d/init.el",
    ".emacs.d/early-init.el",
    ".vim",
    ".local/share/nvim/site",
    ".tmux.conf",
    ".config/tmux",
    // debuggers, other VCSs and REPLs that run their start-up files
    ".gdbinit",
    ".config/gdb",
    ".hgrc",
    ".psqlrc",
    ".ipython",
    // dsh-exec's own configuration
    ".config/dsh-exec",
];

/// Files and directories that editors and coding agents run or obey on
/// their own when they are opened in a directory (or `cd` enters it): a
/// confined run that writes one there reaches the next, unconfined, session.
/// Protected in each writable root, in each repository the plan finds, in
/// each directory between a writable root and the working directory (where
/// an editor or agent would be opened), and in `$HOME` when a writable root
/// contains it. `--allow-write PATH` lifts one entry.
pub const AGENT_FILES: [&str; 9] = [
    // VS Code: a task of tasks.json with `"runOn": "folderOpen"` runs when
    // the folder is opened; settings.json names interpreters, formatters,
    // terminal profiles and their environment; launch.json, the programs
    // a debug session starts.
    ".vscode",
    // JetBrains IDEs: run configurations, external tools, start-up tasks.
    ".idea",
    // Claude Code: settings.json grants permissions and runs hooks (shell
    // commands); commands/ and agents/ are instructions it follows.
    ".claude",
    // Codex CLI: its configuration (approval policy, sandbox mode, MCP
    // servers) and prompts.
    ".codex",
    // Cursor: rules it obeys, and mcp.json, the servers it starts.
    ".cursor",
    // Gemini CLI: settings.json (tools, MCP servers, sandbox) and commands.
    ".gemini",
    // A project's MCP servers: commands an agent starts (Claude Code).
    ".mcp.json",
    // direnv runs .envrc whenever a shell enters the directory or one below.
    ".envrc",
    // direnv's layouts, which .envrc puts first on PATH (a virtualenv's bin).
    ".direnv",
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

/// Directories the repository search looks at per writable root.
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
    /// The writable roots (real paths) the plan was made for.
    pub(crate) roots: Vec<PathBuf>,
    /// The worktrees of the repositories found with a `.git` directory.
    pub(crate) repositories: Vec<PathBuf>,
    /// The entries of [`AGENT_FILES`] the plan covers, real paths, sorted:
    /// each is protected (in `protected` or `absent`), lifted, or a symlink
    /// (not protected, said in `notes`).
    pub agent_files: Vec<PathBuf>,
    /// The entries of `agent_files` that `--allow-write` lifted: writable.
    pub lifted: Vec<PathBuf>,
    /// What the caller is told before the run: an `--allow-write` that
    /// lifts nothing here.
    pub warnings: Vec<String>,
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
    /// The `--allow-write` paths, real (but for their last component).
    pub(crate) allow_write: &'a [PathBuf],
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
                // Only directories count (the entry's type comes with the
                // listing): a run that fills a root with files does not
                // use up the next run's search.
                if !e.file_type().is_ok_and(|t| t.is_dir()) {
                    continue;
                }
                if budget == 0 {
                    break;
                }
                budget -= 1;
                let name = e.file_name();
                if SKIP_DIRS.iter().any(|s| name == *s) {
                    continue;
                }
                next.push(e.path());
            }
        }
        level = next;
    }
    if budget == 0 {
        notes.push(format!(
            "repository search in {} stopped after {SCAN_BUDGET} directories",
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

/// The files of a git directory through which git runs commands or finds
/// another config (gitrepository-layout(5)): `config`, `hooks/`,
/// `config.worktree` (read with `extensions.worktreeConfig`) and
/// `commondir` (where a worktree's config, hooks and objects are).
fn git_dir_files(git: &Path) -> [PathBuf; 4] {
    ["config", "hooks", "config.worktree", "commondir"].map(|f| git.join(f))
}

/// The git directories below `.git/modules` (submodules, whose names may
/// hold slashes: three levels are looked at) and `.git/worktrees/*`.
fn nested_git_dirs(git: &Path) -> Vec<PathBuf> {
    let dirs = |d: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(d)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.path())
            .collect()
    };
    let mut found = dirs(&git.join("worktrees"));
    let mut level = dirs(&git.join("modules"));
    for _ in 0..3 {
        let mut next = Vec::new();
        for d in level {
            if d.join("HEAD").exists() {
                found.push(d);
            } else {
                next.extend(dirs(&d));
            }
        }
        level = next;
    }
    found
}

/// The protection of a run whose writable roots (real paths) are `roots`.
pub(crate) fn plan(roots: &[PathBuf], inputs: &Inputs) -> Protection {
    let mut p = Protection::default();
    let mut wanted: Vec<PathBuf> = Vec::new();
    let mut anchors: BTreeSet<PathBuf> = BTreeSet::new();
    // Where an editor or agent would be opened: each root, each repository,
    // each directory on the way to the workdir, the home.
    let mut places: BTreeSet<PathBuf> = roots.iter().cloned().collect();
    if let Some(w) = inputs.workdir
        && let Some(root) = under_any(w, roots)
    {
        places.extend(
            w.ancestors()
                .take_while(|d| d.starts_with(root))
                .map(Path::to_path_buf),
        );
    }
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
                    // A repository's own top (not a linked worktree's,
                    // whose `.git` is a file: `git worktree remove` must
                    // be able to remove it, and a mount point cannot be).
                    places.insert(repo.clone());
                    p.repositories.push(repo.clone());
                    anchors.insert(git.clone());
                    wanted.extend(git_dir_files(&git));
                    // The git directories of its submodules and linked
                    // worktrees keep only their hooks read-only: git
                    // rewrites their config (`submodule update` sets
                    // core.worktree each time) and removes them (`worktree
                    // remove`), and what a run changes there is judged
                    // after it (`gitcheck`), as a `.git` file is.
                    for sub in nested_git_dirs(&git) {
                        let hooks = sub.join("hooks");
                        if std::fs::symlink_metadata(&hooks).is_ok() {
                            wanted.push(hooks);
                        }
                    }
                }
                Ok(m) if m.is_file() => {}
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
        places.insert(home.to_path_buf());
    }
    wanted.extend(inputs.config_file.map(Path::to_path_buf));
    wanted.extend(inputs.state_dir.map(Path::to_path_buf));
    wanted.extend(inputs.extra.iter().cloned());
    // The agents' and editors' files, but those `--allow-write` lifts
    // (never one that another rule protects too: dsh-exec's own, a
    // `--protect`).
    let others: BTreeSet<PathBuf> = wanted.iter().cloned().collect();
    let mut agent_files: Vec<PathBuf> = places
        .iter()
        .flat_map(|place| AGENT_FILES.iter().map(move |f| place.join(f)))
        .collect();
    agent_files.sort();
    agent_files.dedup();
    for path in &agent_files {
        if inputs.allow_write.contains(path) && !others.contains(path) {
            p.lifted.push(path.clone());
        } else {
            wanted.push(path.clone());
        }
    }
    for asked in inputs.allow_write {
        if !agent_files.contains(asked) {
            p.warnings.push(format!(
                "--allow-write {} lifts nothing: no protected file of an editor or agent is \
                 there (dsh-exec explain lists them)",
                asked.display()
            ));
        } else if others.contains(asked) {
            p.warnings.push(format!(
                "--allow-write {} lifts nothing: --protect or dsh-exec's own state keeps it \
                 protected",
                asked.display()
            ));
        }
    }
    p.agent_files = agent_files;
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
                let pin = nix::fcntl::open(
                    &path,
                    nix::fcntl::OFlag::O_PATH
                        | nix::fcntl::OFlag::O_NOFOLLOW
                        | nix::fcntl::OFlag::O_CLOEXEC,
                    nix::sys::stat::Mode::empty(),
                )
                .ok()
                .map(std::sync::Arc::new);
                p.protected.push(ProtectedPath {
                    path: path.clone(),
                    id: (m.dev(), m.ino()),
                    dir: m.is_dir(),
                    _pin: pin,
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
    p.roots = roots.to_vec();
    p
}

/// The largest file a snapshot keeps: 1 MiB; the most files: 256.
const SNAPSHOT_FILE_MAX: u64 = 1 << 20;
const SNAPSHOT_FILES_MAX: usize = 256;

/// Below the top of the protected directories of editors and agents
/// (`.claude/commands/`, `.cursor/rules/`), which a snapshot also keeps:
/// the most files (a budget of their own, so that a big `.direnv` cannot
/// starve `.git/config`), directories and levels.
const DEEP_FILES_MAX: usize = 256;
const DEEP_DIRS_MAX: usize = 256;
const DEEP_LEVELS: usize = 8;

/// One protected path as it was before the run.
#[derive(Debug)]
enum Kept {
    /// A regular file: its bytes and mode.
    File {
        anchor: Anchor,
        bytes: Vec<u8>,
        mode: u32,
    },
    /// A directory.
    Dir { anchor: Anchor, tree: Tree },
}

/// A directory as it was: its mode, the names it held, its regular files
/// (name, bytes, mode), and the subdirectories kept too (name, (device,
/// inode), what they held): only in the directories of editors and agents.
#[derive(Debug)]
struct Tree {
    mode: u32,
    names: BTreeSet<OsString>,
    files: Vec<(OsString, Vec<u8>, u32)>,
    dirs: Vec<(OsString, (u64, u64), Tree)>,
}

impl Tree {
    /// The directory at `path` one level down: its regular files within
    /// `count < max`.
    fn keep(path: &Path, count: &mut usize, max: usize, notes: &mut Vec<String>) -> Option<Tree> {
        let m = std::fs::symlink_metadata(path).ok()?;
        if !m.is_dir() {
            return None;
        }
        let names: BTreeSet<OsString> = std::fs::read_dir(path)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        let files = names
            .iter()
            .filter_map(|n| {
                let (bytes, mode) = read_kept(&path.join(n), count, max, notes)?;
                Some((n.clone(), bytes, mode))
            })
            .collect();
        Some(Tree {
            mode: m.permissions().mode() & 0o7777,
            names,
            files,
            dirs: Vec::new(),
        })
    }

    /// The tree kept at `rel` below this one.
    fn at(&mut self, rel: &[OsString]) -> Option<&mut Tree> {
        let Some((first, rest)) = rel.split_first() else {
            return Some(self);
        };
        let (_, _, sub) = self.dirs.iter_mut().find(|(n, _, _)| n == first)?;
        sub.at(rest)
    }
}

/// The protected files of a run without a mount namespace, as they were
/// before it, to restore after it (`undo`: never through a
/// symlink or a directory the run put in place).
#[derive(Debug, Default)]
pub struct Snapshot {
    kept: Vec<Kept>,
    absent: Vec<Anchor>,
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

/// The bytes and mode of the regular file at `path`, if it is one small
/// enough to keep and `count` (the files kept so far) is below `max`.
fn read_kept(
    path: &Path,
    count: &mut usize,
    max: usize,
    notes: &mut Vec<String>,
) -> Option<(Vec<u8>, u32)> {
    let m = std::fs::symlink_metadata(path).ok()?;
    if !m.is_file() {
        return None;
    }
    if m.len() > SNAPSHOT_FILE_MAX || *count >= max {
        notes.push(format!("{} is too large to snapshot", path.display()));
        return None;
    }
    let bytes = std::fs::read(path).ok()?;
    *count += 1;
    Some((bytes, m.permissions().mode() & 0o7777))
}

/// The anchors of `paths`, each from the writable root it lies under.
pub(crate) fn anchors(paths: &[PathBuf], roots: &[PathBuf]) -> Vec<Anchor> {
    paths
        .iter()
        .filter_map(|p| Anchor::record(under_any(p, roots)?, p))
        .collect()
}

impl Snapshot {
    /// Takes the snapshot of `protection`'s paths: files whole, and each
    /// protected directory's regular files one level down; then, within a
    /// budget of their own and breadth first, the subdirectories of the
    /// directories of editors and agents ([`AGENT_FILES`]), whose nested
    /// files they obey too (`.claude/commands/`, `.cursor/rules/`).
    pub(crate) fn take(protection: &Protection) -> Snapshot {
        let roots = &protection.roots;
        let mut s = Snapshot {
            absent: anchors(&protection.absent, roots),
            ..Snapshot::default()
        };
        let mut count = 0;
        let mut deep = std::collections::VecDeque::new();
        for p in &protection.protected {
            let Some(anchor) = under_any(&p.path, roots).and_then(|r| Anchor::record(r, &p.path))
            else {
                continue;
            };
            if p.dir {
                let Some(tree) = Tree::keep(&p.path, &mut count, SNAPSHOT_FILES_MAX, &mut s.notes)
                else {
                    continue;
                };
                if protection.agent_files.contains(&p.path) {
                    deep.push_back((s.kept.len(), Vec::new()));
                }
                s.kept.push(Kept::Dir { anchor, tree });
            } else if let Some((bytes, mode)) =
                read_kept(&p.path, &mut count, SNAPSHOT_FILES_MAX, &mut s.notes)
            {
                s.kept.push(Kept::File {
                    anchor,
                    bytes,
                    mode,
                });
            }
        }
        let (mut files, mut dirs) = (0, 0);
        while let Some((k, rel)) = deep.pop_front() {
            let Some(Kept::Dir { anchor, tree }) = s.kept.get_mut(k) else {
                continue;
            };
            let dir = rel.iter().fold(anchor.path.clone(), |d, n| d.join(n));
            let Some(tree) = tree.at(&rel) else { continue };
            if rel.len() >= DEEP_LEVELS {
                s.notes
                    .push(format!("{} is too deep to snapshot", dir.display()));
                continue;
            }
            for name in &tree.names {
                let path = dir.join(name);
                let Ok(m) = std::fs::symlink_metadata(&path) else {
                    continue;
                };
                if !m.is_dir() {
                    continue;
                }
                if dirs >= DEEP_DIRS_MAX {
                    s.notes
                        .push(format!("{} is too large to snapshot", path.display()));
                    continue;
                }
                let Some(sub) = Tree::keep(&path, &mut files, DEEP_FILES_MAX, &mut s.notes) else {
                    continue;
                };
                dirs += 1;
                tree.dirs.push((name.clone(), (m.dev(), m.ino()), sub));
                let mut below = rel.clone();
                below.push(name.clone());
                deep.push_back((k, below));
            }
        }
        s
    }

    /// Compares with the snapshot and undoes the run's changes: a directory
    /// on the way or a protected directory replaced is put back; modified
    /// or removed files are written back; files new in a protected
    /// directory and protected paths the run created are removed.
    pub fn restore(&self) -> Vec<ProtectedChange> {
        let mut changes = Vec::new();
        for k in &self.kept {
            match k {
                Kept::File {
                    anchor,
                    bytes,
                    mode,
                } => {
                    let Some(parent) = anchor.reach_parent(&mut changes) else {
                        continue;
                    };
                    restore_file(
                        &parent,
                        anchor.name(),
                        bytes,
                        *mode,
                        &anchor.path,
                        &mut changes,
                    );
                }
                Kept::Dir { anchor, tree } => {
                    let Some(parent) = anchor.reach_parent(&mut changes) else {
                        continue;
                    };
                    let Some(id) = anchor.id() else { continue };
                    restore_tree(&parent, anchor.name(), id, tree, &anchor.path, &mut changes);
                }
            }
        }
        changes.extend(remove_created(&self.absent));
        changes
    }
}

/// Puts the kept directory `name` in `parent` (`id` before the run) back
/// as `tree` says, its kept subdirectories first: the directory itself if
/// replaced, then its files; then names new in it are removed (among them
/// a directory of the run's renamed aside in its place). `path` names it.
fn restore_tree(
    parent: &OwnedFd,
    name: &OsStr,
    id: (u64, u64),
    tree: &Tree,
    path: &Path,
    changes: &mut Vec<ProtectedChange>,
) {
    let dir = match undo::directory_at(parent.as_raw_fd(), name, id, tree.mode) {
        Ok((dir, replaced)) => {
            if replaced {
                changes.push(ProtectedChange {
                    path: path.to_path_buf(),
                    change: "replaced",
                    restored: true,
                });
            }
            dir
        }
        Err(_) => {
            changes.push(ProtectedChange {
                path: path.to_path_buf(),
                change: "replaced",
                restored: false,
            });
            return;
        }
    };
    for (sub, id, subtree) in &tree.dirs {
        restore_tree(&dir, sub, *id, subtree, &path.join(sub), changes);
    }
    for (file, bytes, mode) in &tree.files {
        restore_file(&dir, file, bytes, *mode, &path.join(file), changes);
    }
    for new in undo::names(dir.as_raw_fd()) {
        if !tree.names.contains(&new) {
            changes.push(ProtectedChange {
                path: path.join(&new),
                change: "created",
                restored: undo::remove_at(dir.as_raw_fd(), &new),
            });
        }
    }
}

/// Puts the kept file `name` in `dir` back if it differs; what it did goes
/// into `changes` (`path` names it).
fn restore_file(
    dir: &OwnedFd,
    name: &OsStr,
    bytes: &[u8],
    mode: u32,
    path: &Path,
    changes: &mut Vec<ProtectedChange>,
) {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let at = PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd())).join(name);
    let now = std::fs::symlink_metadata(&at);
    let same = now
        .as_ref()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o7777 == mode)
        && std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&at)
            .and_then(|mut f| {
                let mut b = Vec::new();
                f.read_to_end(&mut b).map(|_| b)
            })
            .is_ok_and(|b| b == bytes);
    if same {
        return;
    }
    let change = match &now {
        Err(_) => "removed",
        Ok(m) if !m.is_file() => "replaced",
        Ok(_) => "modified",
    };
    if now.as_ref().is_ok_and(|m| !m.is_file()) {
        undo::remove_at(dir.as_raw_fd(), name);
    }
    changes.push(ProtectedChange {
        path: path.to_path_buf(),
        change,
        restored: undo::write_at(dir.as_raw_fd(), name, bytes, mode).is_ok(),
    });
}

/// Removes the protected paths of `absent` that now exist (the run created
/// them), reaching each from its writable root without following a
/// symlink: a symlink the run put on the way is itself what is removed.
pub(crate) fn remove_created(absent: &[Anchor]) -> Vec<ProtectedChange> {
    let mut changes = Vec::new();
    for a in absent {
        let Some(parent) = a.reach_parent(&mut changes) else {
            continue;
        };
        let at = PathBuf::from(format!("/proc/self/fd/{}", parent.as_raw_fd())).join(a.name());
        if std::fs::symlink_metadata(&at).is_ok() {
            changes.push(ProtectedChange {
                path: a.path.clone(),
                change: "created",
                restored: undo::remove_at(parent.as_raw_fd(), a.name()),
            });
        }
    }
    changes
}
