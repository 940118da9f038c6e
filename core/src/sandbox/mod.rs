//! The sandbox policy: modes that govern file effects, writable roots, the
//! network switch, and the facts a run reports.
//!
//! - `read-only`: every path readable and executable; no file writes except
//!   to character devices such as `/dev/null`.
//! - `workspace-write`: additionally writable: the workspace root, each
//!   `--writable-root`, and the temp directory (unless `--no-temp-write`).
//! - `full-access`: no confinement; the facts are still reported.
//!
//! [`resolve`](crate::resolve) records the [`Policy`] as asked (absolute
//! paths, nothing opened). Preparing a run opens each writable root once
//! ([`open_roots`]) and grants the Landlock rule through that same
//! descriptor (`landlock.rs`), so what was checked is what is granted.
//! Confining modes also set no-new-privileges, drop every capability and
//! load seccomp filters (`seccomp.rs`); the child-side steps are in
//! `exec::child`.

pub mod defaults;
pub(crate) mod denial;
mod facts;
pub(crate) mod gate;
pub(crate) mod gitcheck;
pub(crate) mod landlock;
pub mod protect;
pub(crate) mod seccomp;
pub(crate) mod undo;

use std::fmt;
use std::os::fd::OwnedFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};

use nix::libc;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::{Error, PathProblem};
use crate::origin::Sourced;
use crate::sys::spawn::{Confinement, MountPlan};

pub use self::facts::{EnforcementLevel, NetworkEnforcement, ProtectedChangeFact, SandboxFacts};
pub use self::landlock::{Enforcement, Unenforced, kernel_abi};

/// `Display` (the name) and `FromStr` (from the name, or an error listing
/// the names) for a type with `ALL` and `as_str`.
macro_rules! named_values {
    ($ty:ty, $what:literal, $names:literal) => {
        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $ty {
            type Err = String;

            /// Parses a name; errors with a message listing the names.
            fn from_str(s: &str) -> Result<$ty, String> {
                <$ty>::ALL
                    .into_iter()
                    .find(|v| v.as_str() == s)
                    .ok_or_else(|| format!(concat!("invalid ", $what, " '{}' (", $names, ")"), s))
            }
        }
    };
}

// After the macro, which it uses.
pub mod overlay;

/// How far the command may change files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Read and execute anything but the read deny list; write nothing but
    /// a few devices (`/dev/null`, `/dev/tty`, ...) and a private scratch
    /// `$TMPDIR`.
    ReadOnly,
    /// Also write under the workspace root, writable roots and the temp dir.
    WorkspaceWrite,
    /// No confinement.
    FullAccess,
}

impl Mode {
    /// Every mode, from the most to the least confining.
    pub const ALL: [Mode; 3] = [Mode::ReadOnly, Mode::WorkspaceWrite, Mode::FullAccess];

    /// The mode's name as on the command line, e.g. `workspace-write`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::ReadOnly => "read-only",
            Mode::WorkspaceWrite => "workspace-write",
            Mode::FullAccess => "full-access",
        }
    }

    /// One line on what the mode allows, for help texts.
    pub fn describe(self) -> &'static str {
        match self {
            Mode::ReadOnly => {
                "Read and execute anything but the read deny list; write nothing but a few devices and a private scratch TMPDIR"
            }
            Mode::WorkspaceWrite => {
                "Also write under the workspace root, writable roots and the temp dir"
            }
            Mode::FullAccess => "No confinement",
        }
    }

    /// True for the modes that are enforced with Landlock.
    pub fn confines(self) -> bool {
        self != Mode::FullAccess
    }
}

named_values!(
    Mode,
    "sandbox mode",
    "read-only, workspace-write or full-access"
);

/// Whether the command may use IPv4/IPv6 sockets, and where to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Network {
    /// IPv4 and IPv6 sockets work.
    Allow,
    /// IPv4 and IPv6 sockets are refused; Unix sockets work.
    Deny,
    /// TCP and UDP to and from loopback addresses only (127.0.0.0/8, ::1).
    Loopback,
    /// `allow=HOSTS`: loopback, and the listed hosts through the run's
    /// HTTP/HTTPS proxy.
    AllowList,
}

impl Network {
    /// Every network policy.
    pub const ALL: [Network; 4] = [
        Network::Allow,
        Network::Deny,
        Network::Loopback,
        Network::AllowList,
    ];

    /// `allow`, `deny`, `loopback` or `allow-list`.
    pub fn as_str(self) -> &'static str {
        match self {
            Network::Allow => "allow",
            Network::Deny => "deny",
            Network::Loopback => "loopback",
            Network::AllowList => "allow-list",
        }
    }

    /// One line on what the policy allows, for help texts.
    pub fn describe(self) -> &'static str {
        match self {
            Network::Allow => "IPv4 and IPv6 sockets work",
            Network::Deny => "IPv4 and IPv6 sockets are refused; Unix sockets work",
            Network::Loopback => "TCP and UDP to and from 127.0.0.0/8 and ::1 only",
            Network::AllowList => {
                "loopback, and the listed hosts through an HTTP/HTTPS proxy of the run"
            }
        }
    }

    /// Whether the gate decides the addresses of IPv4/IPv6 calls
    /// (`loopback` and `allow-list`).
    pub fn gated(self) -> bool {
        matches!(self, Network::Loopback | Network::AllowList)
    }

    /// The policy of a run in `mode` when neither a flag nor the
    /// configuration file names one: `loopback` in the confining modes (a
    /// confined command reaches its own local servers and nothing off the
    /// host unless asked), `allow` in `full-access`.
    pub fn default_for(mode: Mode) -> Network {
        if mode.confines() {
            Network::Loopback
        } else {
            Network::Allow
        }
    }
}

named_values!(
    Network,
    "network policy",
    "allow, deny, loopback or allow=HOST[,HOST...]"
);

/// The sandbox policy of a run as resolved: what was asked for, with paths
/// made absolute. Nothing here has been opened or checked; [`open_roots`]
/// does that when the run is prepared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    /// The mode and its origin.
    pub mode: Sourced<Mode>,
    /// The network policy and its origin.
    pub network: Sourced<Network>,
    /// The hosts of `--network allow=` (or the configuration file's
    /// `network_allow`), in the order given; empty for the other policies.
    #[serde(default)]
    pub network_allow: Vec<crate::net::rules::HostRule>,
    /// The workspace root (absolute, as given: symlinks are followed when
    /// it is opened).
    #[serde(with = "crate::serde_paths::exact_sourced_path")]
    pub workspace_root: Sourced<PathBuf>,
    /// The workspace root's (device, inode) as a long-lived caller (the MCP
    /// server) saw it at its start: a root that is no longer that directory
    /// when a run opens it is not writable. `None`: not pinned.
    #[serde(default)]
    pub workspace_root_inode: Option<(u64, u64)>,
    /// The `--writable-root` paths (or the configuration file's), absolute,
    /// in the order given.
    #[serde(with = "crate::serde_paths::exact_paths")]
    pub writable_roots: Vec<PathBuf>,
    /// The package caches `--allow-caches` makes writable roots (absolute;
    /// see `request::cache_dirs`): those that exist, and those of the tools
    /// on `$PATH`, which `make_caches` makes when the run starts.
    #[serde(default, with = "crate::serde_paths::exact_paths")]
    pub caches: Vec<PathBuf>,
    /// The temp directory (absolute); `None` with `--no-temp-write`.
    #[serde(with = "crate::serde_paths::exact_opt_path")]
    pub temp_dir: Option<PathBuf>,
    /// `--allow-unix-socket` paths (absolute): Unix sockets outside the
    /// writable roots that the command may connect to.
    #[serde(with = "crate::serde_paths::exact_paths")]
    pub unix_sockets: Vec<PathBuf>,
    /// `--protect` paths (absolute): kept read-only inside writable roots.
    #[serde(with = "crate::serde_paths::exact_paths")]
    pub protect: Vec<PathBuf>,
    /// `--allow-write` paths (absolute; config `allow_write` too): entries
    /// of [`protect::AGENT_FILES`] left writable.
    #[serde(default, with = "crate::serde_paths::exact_paths")]
    pub allow_write: Vec<PathBuf>,
    /// The invoking user's home: its start-up files are protected when a
    /// writable root contains it.
    #[serde(with = "crate::serde_paths::exact_opt_path")]
    pub home: Option<PathBuf>,
    /// Paths unreadable in the confining modes (absolute, not yet made
    /// real): `request::READ_DENIED_IN_HOME` in each home, the state
    /// directory, `--deny-read`; less the entries `--allow-read` lifted.
    #[serde(default, with = "crate::serde_paths::exact_paths")]
    pub deny_read: Vec<PathBuf>,
    /// `--allow-read` paths inside a denied directory: readable again.
    #[serde(default, with = "crate::serde_paths::exact_paths")]
    pub read_exceptions: Vec<PathBuf>,
    /// `--read-root` paths (absolute): when not empty, reads are granted
    /// only on these, the workspace, the writable roots and
    /// `request::SYSTEM_READ_ROOTS` instead of everywhere.
    #[serde(default, with = "crate::serde_paths::exact_paths")]
    pub read_roots: Vec<PathBuf>,
    /// `dsh-exec`'s configuration file (the one read, or where one would
    /// be read): protected, so a run cannot widen a later one.
    #[serde(with = "crate::serde_paths::exact_opt_path")]
    pub config_path: Option<PathBuf>,
    /// `dsh-exec`'s state directory (jobs, private spill files): protected.
    #[serde(with = "crate::serde_paths::exact_path")]
    pub state_dir: PathBuf,
    /// Where the command's private scratch directory is made (the caller's
    /// temp dir), when it gets one: in `read-only`, and with
    /// `--no-temp-write`. Made 0700 for the run, writable by it, named by
    /// `$TMPDIR`, removed after it.
    #[serde(default, with = "crate::serde_paths::exact_opt_path")]
    pub scratch_parent: Option<PathBuf>,
    /// `--transaction`: the named writable roots run on overlays
    /// (`overlay`); `None`: no transaction.
    #[serde(default)]
    pub transaction: Option<overlay::TransactionPolicy>,
    /// `--credential`, `--inject`, `--credential-env`, `--upstream-ca`
    /// (names, sources and rules; the values are in
    /// [`crate::spec::Spec::secrets`]). Empty without them.
    #[serde(default)]
    pub injection: crate::net::inject::Injection,
}

impl Policy {
    /// The confining mode whose default the network policy is, when it is
    /// one: no flag and no configuration file named a policy, and the
    /// mode confines (so the policy is `loopback`, see
    /// [`Network::default_for`]).
    pub fn network_default_of(&self) -> Option<Mode> {
        (self.network.origin == crate::origin::Origin::Default && self.mode.value.confines())
            .then_some(self.mode.value)
    }

    /// Where the network policy came from, in words: `flag`, `config`, or
    /// `default for MODE` (e.g. `default for workspace-write`).
    pub fn network_source(&self) -> String {
        match self.network.origin {
            crate::origin::Origin::Default => format!("default for {}", self.mode.value),
            other => other.as_str().into(),
        }
    }
}

/// A path given as writable that cannot be used: skipped, with a warning.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skipped {
    /// The path as given.
    #[serde(serialize_with = "crate::serde_paths::lossy_path")]
    pub path: PathBuf,
    /// Why it was skipped: the operating system's error, or `not a directory`.
    pub reason: String,
}

/// One writable root, opened: its descriptor (`O_PATH`, symlinks followed
/// once, at open) and the real path that descriptor names
/// (`/proc/self/fd/N`).
#[derive(Debug)]
pub struct Root {
    /// The real path of the opened directory.
    pub path: PathBuf,
    /// The directory, as opened; the Landlock rule is granted through it.
    pub(crate) fd: OwnedFd,
    /// Named by the caller (the workspace root or a `--writable-root`),
    /// not a scratch root (temp dir, caches, `/dev/shm`): a transaction
    /// overlays these.
    pub named: bool,
}

/// The writable roots of a policy, opened ([`open_roots`]).
#[derive(Debug, Default)]
pub struct Roots {
    /// Every directory the command may write under, in `workspace-write`:
    /// the workspace root, each usable `--writable-root`, the temp dir; no
    /// path twice. Empty in the other modes.
    pub writable: Vec<Root>,
    /// The real temp directory, when it exists and is writable by policy.
    pub temp_dir: Option<PathBuf>,
    /// Writable roots that were skipped (missing, or not directories).
    pub skipped: Vec<Skipped>,
    /// What a careful user wants to know: a writable root reached through
    /// a symlink (a confined run could have planted it), a writable root of
    /// `/`, an `--allow-unix-socket` that is no socket.
    pub warnings: Vec<String>,
    /// The `--allow-unix-socket` sockets that exist: (device, inode) and
    /// real path, as stat(2) saw them when the run was prepared.
    pub unix_sockets: Vec<((u64, u64), PathBuf)>,
    /// The shared `/dev/shm` is a writable root (no mount namespace for a
    /// private one).
    pub shm_shared: bool,
    /// The run's private scratch directory, also among `writable` (only
    /// when a run is prepared, not for `explain`).
    pub scratch: Option<PathBuf>,
    /// Removes the scratch directory when dropped: a preparation that
    /// fails after it was made leaves nothing behind.
    pub(crate) scratch_guard: Option<ScratchGuard>,
    /// The entries of the read deny list that exist, real paths (a
    /// symlink's target), no path twice: the Landlock ruleset grants no
    /// file read beneath them.
    pub read_denied: Vec<PathBuf>,
    /// Some of `read_denied` are the same entries seen through another
    /// mount (a bind mount): the split then checks directories by inode.
    pub read_aliases: bool,
    /// The `--allow-read` exceptions inside them that exist, real paths.
    pub read_exceptions: Vec<PathBuf>,
    /// Under `--read-root`: every path reads are granted on (the roots
    /// given, the workspace, the system's directories), real paths that
    /// exist; empty: reads are granted on `/`.
    pub read_roots: Vec<PathBuf>,
}

impl Roots {
    /// The real paths of the writable roots.
    pub fn writable_paths(&self) -> Vec<&Path> {
        self.writable.iter().map(|r| r.path.as_path()).collect()
    }
}

/// Opens `path` as a directory with `O_PATH`, and returns the descriptor
/// with the real path it names. With `follow` false, no symlink is
/// followed anywhere on the path (openat2(2), `RESOLVE_NO_SYMLINKS`): a
/// directory on the way that an earlier run could have replaced with a
/// symlink (it was in a writable root) would otherwise grant its target.
fn open_dir(path: &Path, follow: bool) -> Result<Root, PathProblem> {
    use nix::fcntl::{OFlag, open};
    let fd = if follow {
        open(
            path,
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .map_err(|e| match e {
            nix::errno::Errno::ENOTDIR => PathProblem::NotADirectory,
            other => PathProblem::Io(other.into()),
        })?
    } else {
        open_no_symlinks(path).map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => {
                let real = std::fs::canonicalize(path).unwrap_or_default();
                PathProblem::Io(std::io::Error::other(format!(
                    "reached through a symlink (to {}): not followed; give the real directory",
                    real.display()
                )))
            }
            Some(libc::ENOTDIR) => PathProblem::NotADirectory,
            _ => PathProblem::Io(e),
        })?
    };
    let real = crate::sys::fd_path(&fd).map_err(PathProblem::Io)?;
    Ok(Root {
        path: real,
        fd,
        named: false,
    })
}

/// `path` opened as a directory with `O_PATH`, following no symlink on the
/// way (`undo::open_no_symlinks`): ELOOP when one is.
fn open_no_symlinks(path: &Path) -> std::io::Result<OwnedFd> {
    undo::open_no_symlinks(path, libc::O_PATH | libc::O_DIRECTORY)
}

/// The protection's bind mounts plus an anchor (a directory bind-mounted
/// over itself) for every directory between a writable root and a hidden
/// entry: a mount point cannot be renamed (EBUSY), so the run cannot move
/// the directory that holds the entry to a name the next run would not
/// hide. Outermost first, no path twice.
fn with_anchors(
    mounts: &[(PathBuf, bool)],
    hidden: &[&PathBuf],
    roots: &Roots,
) -> Vec<(PathBuf, bool)> {
    let mut all: Vec<(PathBuf, bool)> = mounts.to_vec();
    for entry in hidden {
        let Some(root) = roots.writable.iter().find(|r| entry.starts_with(&r.path)) else {
            continue;
        };
        for dir in entry.ancestors().skip(1) {
            if dir == root.path || !dir.starts_with(&root.path) {
                break;
            }
            if !all.iter().any(|(p, _)| p == dir) {
                all.push((dir.to_path_buf(), false));
            }
        }
    }
    all.sort_by_key(|(p, _)| p.components().count());
    all
}

/// One line of `/proc/self/mountinfo` (proc(5)): the file system (device
/// number), the directory of it that is mounted (`root`), and where.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Mount {
    dev: Vec<u8>,
    root: PathBuf,
    mount_point: PathBuf,
    /// An overlayfs's layers (`lowerdir`, `upperdir`; overlayfs.rst): it
    /// shows their files under its own superblock.
    layers: Vec<PathBuf>,
}

/// The mounts of a `/proc/self/mountinfo` table ([`procfs::parse_mountinfo`]),
/// with an overlayfs's `lowerdir` and `upperdir` layers read from its
/// super options (several lower layers are `:`-separated).
fn parse_mountinfo(table: &[u8]) -> Vec<Mount> {
    use crate::sys::procfs;
    procfs::parse_mountinfo(table)
        .into_iter()
        .map(|m| {
            let layers = match m.fstype.as_slice() {
                b"overlay" => m
                    .super_options
                    .split(|&b| b == b',')
                    .filter_map(|o| {
                        o.strip_prefix(b"lowerdir=")
                            .or_else(|| o.strip_prefix(b"upperdir="))
                    })
                    .flat_map(|dirs| {
                        dirs.split(|&b| b == b':')
                            .map(procfs::unescape)
                            .collect::<Vec<_>>()
                    })
                    .filter(|d| d.is_absolute())
                    .collect(),
                _ => Vec::new(),
            };
            Mount {
                dev: m.dev,
                root: m.root,
                mount_point: m.mount_point,
                layers,
            }
        })
        .collect()
}

/// The other paths at which the `denied` paths (real, absolute) can be
/// reached through `mounts`: a path lies in the file system of the mount
/// with the longest mount point above it; any other mount of the same
/// file system (a bind mount) whose root is above that place shows it
/// again beneath its mount point, and one whose root is beneath it shows a
/// part of it at its mount point. Both are denied too.
fn mount_aliases(mounts: &[Mount], denied: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for d in denied {
        // Every mount on the way to it, the visible one and those it
        // shadows (a tmpfs over `~/.config` hides the `gh` beneath, which a
        // bind of `/` made earlier still shows).
        for home in mounts.iter().filter(|m| d.starts_with(&m.mount_point)) {
            let Ok(rest) = d.strip_prefix(&home.mount_point) else {
                continue;
            };
            let inside = home.root.join(rest);
            for m in mounts.iter().filter(|m| m.dev == home.dev && *m != home) {
                push_alias(&mut out, d, seen_at(&inside, &m.root, &m.mount_point));
            }
        }
        // An overlay shows its layers' files under its own superblock.
        for m in mounts.iter() {
            for layer in &m.layers {
                push_alias(&mut out, d, seen_at(d, layer, &m.mount_point));
            }
        }
    }
    out
}

/// Where `path` (a place in a file system) shows through a mount of that
/// file system's `root` at `mount_point`: beneath the mount point when
/// `root` lies above it, the mount point itself when `root` lies inside it
/// (a part of it shows there); `None` otherwise.
fn seen_at(path: &Path, root: &Path, mount_point: &Path) -> Option<PathBuf> {
    match path.strip_prefix(root) {
        // `join("")` would leave a trailing slash, which is not the path
        // the split compares.
        Ok(below) if below.as_os_str().is_empty() => Some(mount_point.to_path_buf()),
        Ok(below) => Some(mount_point.join(below)),
        Err(_) => root.starts_with(path).then(|| mount_point.to_path_buf()),
    }
}

/// Adds `alias` of the denied path `denied` to `out`, once, unless it is
/// that path itself.
fn push_alias(out: &mut Vec<PathBuf>, denied: &Path, alias: Option<PathBuf>) {
    if let Some(alias) = alias
        && alias != denied
        && !out.contains(&alias)
    {
        out.push(alias);
    }
}

/// Real paths as far as they exist: a path's longest existing ancestor
/// made real (canonicalize(3)), the rest appended; for many paths, each
/// directory on the way made real once: an entry that is no symlink (lstat(2)) or does not
/// exist is its parent's real path and its name, so the deny list's
/// thirty-odd entries in the home cost one lstat each and one
/// canonicalize(3) of the home, not a readlink(2) of every component of
/// every entry. A symlink is followed whole (canonicalize), and where it
/// leads nowhere it stands for itself, as when it does not exist.
#[derive(Default)]
pub(crate) struct RealPaths(std::collections::HashMap<PathBuf, PathBuf>);

impl RealPaths {
    /// The real path of `path` as far as it exists.
    pub(crate) fn real(&mut self, path: &Path) -> PathBuf {
        if let Some(r) = self.0.get(path) {
            return r.clone();
        }
        let r = match (path.is_absolute(), path.parent(), path.file_name()) {
            (true, Some(parent), Some(name)) => {
                let symlink =
                    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
                match symlink.then(|| std::fs::canonicalize(path).ok()).flatten() {
                    Some(r) => r,
                    None => self.real(parent).join(name),
                }
            }
            _ => walk_up_to_real(path),
        };
        self.0.insert(path.to_path_buf(), r.clone());
        r
    }
}

/// A real path as far as it exists ([`RealPaths`]) by canonicalize(3) of
/// each ancestor in turn, for `/` and for a path that is not absolute or
/// ends in `..`.
fn walk_up_to_real(path: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut at = path.to_path_buf();
    loop {
        if let Ok(mut r) = std::fs::canonicalize(&at) {
            r.extend(rest.iter().rev());
            return r;
        }
        match (at.file_name().map(|n| n.to_os_string()), at.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                at = parent.to_path_buf();
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// The real targets of the symlinks inside the denied directories: those
/// outside every denied entry. Each denied directory is scanned breadth
/// first, its shallow entries (where dotfile managers put their links)
/// before its deep ones, with a budget of its own of [`SYMLINK_SCAN`]
/// entries: a big cache in one (`~/.kube/cache`) cannot use up the scan of
/// another (`~/.ssh`).
fn symlink_targets(denied: &[PathBuf], state_dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    // Not /dev: its symlinks name /proc/self (whose target is this
    // process's, not the command's) and devices, which have rules of their
    // own. Not the state directory: dsh-exec's own, with a directory per
    // job (the scan would spend its budget there, 70 us on this machine).
    let tops = denied
        .iter()
        .filter(|d| d.is_dir() && !d.starts_with("/dev") && !d.starts_with(state_dir));
    for top in tops {
        let mut budget = SYMLINK_SCAN;
        let mut queue = std::collections::VecDeque::from([top.clone()]);
        'scan: while let Some(dir) = queue.pop_front() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.flatten() {
                if budget == 0 {
                    break 'scan;
                }
                budget -= 1;
                let Ok(kind) = e.file_type() else { continue };
                if kind.is_dir() {
                    queue.push_back(e.path());
                } else if kind.is_symlink()
                    && let Ok(t) = std::fs::canonicalize(e.path())
                    && !t.starts_with("/proc")
                    && !denied.iter().any(|d| t.starts_with(d))
                    && !out.contains(&t)
                {
                    out.push(t);
                }
            }
        }
    }
    out
}

/// How many entries of each denied directory are looked at for symlinks.
const SYMLINK_SCAN: usize = 1024;

/// Opens the writable roots of `policy`, each once: a root that is missing
/// or not a directory is skipped with its reason, and so is a
/// `--writable-root` that is itself a symlink (not followed: whoever could
/// write its parent could swap it while `dsh-exec` starts). The workspace
/// root, which is also the working directory, is followed, with a warning
/// when it is a symlink. A root of `/` is flagged. The temp directory is
/// added when it exists (silently left out otherwise: nobody named it).
pub fn open_roots(policy: &Policy) -> Roots {
    let mut roots = Roots::default();
    if policy.mode.value.confines() {
        let real = |paths: &[PathBuf]| {
            let mut out: Vec<PathBuf> = Vec::new();
            for p in paths {
                if let Ok(r) = std::fs::canonicalize(p)
                    && !out.contains(&r)
                {
                    out.push(r);
                }
            }
            out
        };
        // Every entry, whether it exists or not: one made later (by another
        // process, or `gh auth login` during a job) is then unreadable too,
        // its existing parent being split. Made real as far as it exists.
        let mut real_paths = RealPaths::default();
        for p in &policy.deny_read {
            let r = real_paths.real(p);
            if !roots.read_denied.contains(&r) {
                roots.read_denied.push(r);
            }
        }
        // What a symlink inside a denied directory points at is denied too
        // (dotfile managers keep ~/.aws/credentials elsewhere).
        let targets = symlink_targets(&roots.read_denied, &policy.state_dir);
        for t in targets {
            if !roots.read_denied.contains(&t) {
                roots.read_denied.push(t);
            }
        }
        // The same directories seen through other mounts (a bind of `/`
        // or of the home elsewhere): a Landlock rule lands on the inode, so
        // a grant on the other path would reach the denied entry too.
        if let Ok(table) = std::fs::read("/proc/self/mountinfo") {
            let mounts = parse_mountinfo(&table);
            for alias in mount_aliases(&mounts, &roots.read_denied) {
                roots.read_aliases = true;
                if !roots.read_denied.contains(&alias) {
                    roots.read_denied.push(alias);
                }
            }
        }
        roots.read_exceptions = real(&policy.read_exceptions);
        if !policy.read_roots.is_empty() {
            let system = defaults::SYSTEM_READ_ROOTS.iter().map(PathBuf::from);
            let all: Vec<PathBuf> = policy
                .read_roots
                .iter()
                .cloned()
                .chain(std::iter::once(policy.workspace_root.value.clone()))
                .chain(system)
                .collect();
            roots.read_roots = real(&all);
        }
    }
    // The temp dir follows no symlink either: TMPDIR may name a directory
    // in a writable root of an earlier run.
    let temp = policy.temp_dir.as_ref().map(|t| (t, open_dir(t, false)));
    if let Some((t, Err(problem))) = &temp
        && t.exists()
    {
        roots.warnings.push(format!(
            "the temp dir {} is not writable: {problem}",
            t.display()
        ));
    }
    let temp = temp.and_then(|(_, r)| r.ok());
    roots.temp_dir = temp.as_ref().map(|r| r.path.clone());
    for path in &policy.unix_sockets {
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        match std::fs::metadata(path) {
            Ok(m) if m.file_type().is_socket() => {
                let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.clone());
                roots.unix_sockets.push(((m.dev(), m.ino()), real));
            }
            Ok(_) => roots.warnings.push(format!(
                "--allow-unix-socket {} is not a socket; skipped",
                path.display()
            )),
            Err(e) => roots.warnings.push(format!(
                "--allow-unix-socket {} skipped: {e}",
                path.display()
            )),
        }
    }
    if policy.mode.value != Mode::WorkspaceWrite {
        return roots;
    }
    let asked = std::iter::once((&policy.workspace_root.value, true))
        .chain(policy.writable_roots.iter().map(|r| (r, false)));
    for (i, (path, follow)) in asked.enumerate() {
        // A workspace root pinned by its inode (the MCP server's, checked
        // once at its start) must still be that directory, as opened now:
        // a command that can rename one of its parents could otherwise
        // move the path anywhere between two runs.
        let pinned = |root: Root| match (i, policy.workspace_root_inode) {
            (0, Some((dev, ino))) => match nix::sys::stat::fstat(&root.fd) {
                Ok(st) if st.st_dev == dev && st.st_ino == ino => Ok(root),
                _ => Err(PathProblem::Io(std::io::Error::other(
                    "it is no longer the directory it was when the server started (a \
                     parent was renamed); not writable",
                ))),
            },
            _ => Ok(root),
        };
        match open_dir(path, follow).and_then(pinned) {
            Ok(mut root) => {
                root.named = true;
                if roots.writable.iter().any(|r| r.path == root.path) {
                    continue;
                }
                if root.path != *path && path.is_symlink() {
                    let what = if i == 0 {
                        "the workspace root"
                    } else {
                        "writable root"
                    };
                    roots.warnings.push(format!(
                        "{what} {} is a symlink: {} is what becomes writable",
                        path.display(),
                        root.path.display()
                    ));
                }
                roots.writable.push(root);
            }
            Err(problem) => roots.skipped.push(Skipped {
                path: path.clone(),
                reason: problem.to_string(),
            }),
        }
    }
    // A cache that does not exist (yet: `explain`) is no writable root.
    let caches = policy.caches.iter().filter_map(|c| open_dir(c, false).ok());
    for root in caches {
        if !roots.writable.iter().any(|r| r.path == root.path) {
            roots.writable.push(root);
        }
    }
    if let Some(root) = temp
        && !roots.writable.iter().any(|r| r.path == root.path)
    {
        roots.writable.push(root);
    }
    // POSIX shared memory and semaphores (Python's multiprocessing): with a
    // mount namespace the command gets a private /dev/shm; without one the
    // shared one is writable, as the temp dir is.
    if !has_mount_namespace()
        && let Ok(root) = open_dir(Path::new(SHM_DIR), false)
        && !roots.writable.iter().any(|r| r.path == root.path)
    {
        roots.shm_shared = true;
        roots.writable.push(root);
    }
    if let Some(home) = &policy.home
        && let Some(root) = roots
            .writable
            .iter()
            .find(|r| home.starts_with(&r.path) && r.path != Path::new("/"))
    {
        roots.warnings.push(format!(
            "the writable root {} contains $HOME: its start-up files and the configs of \
             git, ssh, cargo, npm, pip and others stay read-only, but not everything in it \
             that later runs code (~/.local/bin, Python's user site-packages)",
            root.path.display()
        ));
    }
    refuse_kernel_file_systems(&mut roots);
    if roots.writable.iter().any(|r| r.path == Path::new("/")) {
        roots
            .warnings
            .push("a writable root is /: workspace-write then allows writing anywhere".into());
    }
    roots
}

/// How deep the git check walks an `--allow-caches` cache: 3, where
/// cargo (`$CARGO_HOME/git/db/NAME`, `checkouts/NAME/REV`) and Go
/// (`$GOMODCACHE/cache/vcs/HASH`) keep the repositories they fetch into.
const CACHE_GIT_DEPTH: usize = 3;

/// File systems whose entries only the kernel makes, by statfs(2) `f_type`
/// (linux/magic.h) and by their name in mountinfo (proc(5)): proc(5),
/// sysfs(5), cgroups(7) v1 and v2, debugfs, tracefs, securityfs, bpffs,
/// pstore, configfs, efivarfs, selinuxfs, devpts, mqueue (mq_overview(7)),
/// binfmt_misc, fusectl. A write there changes the kernel's state (a
/// sysctl, the run's own cgroup, a freezer), not a file.
const KERNEL_FILE_SYSTEMS: [(u64, &str); 16] = [
    (0x9fa0, "proc"),
    (0x6265_6572, "sysfs"),
    (0x0027_e0eb, "cgroup"),
    (0x6367_7270, "cgroup2"),
    (0x6462_6720, "debugfs"),
    (0x7472_6163, "tracefs"),
    (0x7363_6673, "securityfs"),
    (0xcafe_4a11, "bpf"),
    (0x6165_676c, "pstore"),
    (0x6265_6570, "configfs"),
    (0xde5e_81e4, "efivarfs"),
    (0xf97c_ff8c, "selinuxfs"),
    (0x1cd1, "devpts"),
    (0x1980_0202, "mqueue"),
    (0x4249_4e4d, "binfmt_misc"),
    (0x6573_5543, "fusectl"),
];

/// Skips every writable root that is on a kernel file system
/// ([`KERNEL_FILE_SYSTEMS`]) or has one mounted inside it (`/`, `/sys`,
/// a chroot's `sys/`): Landlock grants writes to all of a root's
/// hierarchy, mounts included, and a confined command must not move
/// itself out of its containment cgroup, freeze a process past the run or
/// write a sysctl. With the reason, as a root that cannot be opened is.
fn refuse_kernel_file_systems(roots: &mut Roots) {
    let table = std::fs::read("/proc/self/mountinfo").unwrap_or_default();
    let kernel_mounts: Vec<(PathBuf, &'static str)> = crate::sys::procfs::parse_mountinfo(&table)
        .into_iter()
        .filter_map(|m| {
            KERNEL_FILE_SYSTEMS
                .iter()
                .find(|(_, name)| m.fstype == name.as_bytes())
                .map(|(_, name)| (m.mount_point, *name))
        })
        .collect();
    let mut skipped = Vec::new();
    roots.writable.retain(|r| {
        let on = rustix::fs::fstatfs(&r.fd).ok().and_then(|s| {
            KERNEL_FILE_SYSTEMS
                .iter()
                .find(|(magic, _)| *magic == s.f_type as u64)
                .map(|(_, name)| (r.path.clone(), *name))
        });
        let inside = || {
            kernel_mounts
                .iter()
                .find(|(at, _)| at.starts_with(&r.path))
                .cloned()
        };
        match on.or_else(inside) {
            Some((at, name)) => {
                skipped.push(Skipped {
                    path: r.path.clone(),
                    reason: format!(
                        "{name} is mounted at {}: writes to a kernel file system are never granted",
                        at.display()
                    ),
                });
                false
            }
            None => true,
        }
    });
    if let Some(t) = &roots.temp_dir
        && skipped.iter().any(|s| &s.path == t)
    {
        roots.temp_dir = None;
    }
    roots.skipped.extend(skipped);
}

/// Makes the run's scratch directory in `parent` (0700, a fresh name) and
/// adds it to `roots` as a writable root; a warning when it cannot be made
/// (the run then has none).
fn add_scratch(roots: &mut Roots, parent: &Path) {
    use std::os::unix::fs::DirBuilderExt;
    let mut made = Err(std::io::Error::from_raw_os_error(libc::EEXIST));
    for _ in 0..8 {
        let dir = parent.join(format!(
            ".dsh-exec-scratch-{}",
            crate::capture::random_suffix()
        ));
        // mkdir(2) with a fresh name: made here, or an error (never an
        // existing directory, whoever made it).
        made = std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map(|()| dir);
        if !made
            .as_ref()
            .is_err_and(|e| e.kind() == std::io::ErrorKind::AlreadyExists)
        {
            break;
        }
    }
    let opened = made
        .map_err(PathProblem::Io)
        .and_then(|dir| open_dir(&dir, false).inspect_err(|_| undo::remove_dir(&dir)));
    match opened {
        Ok(root) => {
            roots.scratch = Some(root.path.clone());
            roots.scratch_guard = Some(ScratchGuard(root.path.clone()));
            roots.writable.push(root);
        }
        Err(problem) => roots.warnings.push(format!(
            "no scratch directory in {}: {problem}",
            parent.display()
        )),
    }
}

/// Where POSIX shared memory lives (shm_overview(7)).
pub const SHM_DIR: &str = "/dev/shm";

/// Character devices that stay writable in every confining mode. Terminals
/// are not among them: the command gets its own under `-i` (and
/// `/dev/tty`), and otherwise only the ones it makes, in a private devpts.
pub const WRITABLE_DEVICES: [&str; 5] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];

/// A policy made ready to apply: what the child does to itself, and how
/// completely the kernel enforces it.
#[derive(Debug)]
pub struct Prepared {
    /// What the child applies to itself; `None` when nothing is confined.
    pub(crate) confinement: Option<Confinement>,
    /// How completely the kernel enforces the policy.
    pub enforcement: Enforcement,
    /// The writable roots, as opened.
    pub roots: Roots,
    /// The protected paths inside the writable roots.
    pub protection: protect::Protection,
    /// What to undo after the run: a snapshot of the protected files where
    /// no mount namespace protects them, and the protected files that did
    /// not exist.
    pub(crate) after_run: AfterRun,
    /// The network policy and whether the mode confines: what the gate
    /// needs besides the roots.
    pub(crate) network: Network,
    pub(crate) confining: bool,
    /// The transaction's layers (`--transaction`), mounted detached until
    /// the child attaches them.
    pub overlays: Option<overlay::Overlays>,
}

impl Prepared {
    /// Lets the confined command write and truncate `files`, the unnamed
    /// files of `--output-files` ([`landlock::output_file_access`]), as an
    /// unconfined one may: a rule for each in the ruleset the child will
    /// enforce. Nothing to do where no mode confines.
    ///
    /// Errors when the kernel refuses a rule.
    pub(crate) fn grant_output_files(
        &self,
        files: [std::os::fd::BorrowedFd<'_>; 2],
    ) -> Result<(), Error> {
        let ruleset = self
            .confinement
            .as_ref()
            .and_then(|c| c.ruleset.as_ref())
            .filter(|_| self.confining);
        if let Some(ruleset) = ruleset {
            use std::os::fd::AsFd;
            for file in files {
                crate::sys::landlock::add_path_beneath(
                    ruleset.as_fd(),
                    file,
                    landlock::output_file_access(self.enforcement.abi),
                )
                .map_err(|source| {
                    Error::SandboxUnavailable(crate::error::SandboxProblem::SplitPath {
                        path: "the output files (--output-files)".into(),
                        source,
                    })
                })?;
            }
        }
        Ok(())
    }
}

/// A run's scratch directory, removed (with everything in it, following no
/// symlink) when this is dropped: after the run, or on any way out before
/// it (a sandbox runner failure, a spawn error, a deadline already past).
#[derive(Debug)]
pub(crate) struct ScratchGuard(PathBuf);

impl Drop for ScratchGuard {
    fn drop(&mut self) {
        undo::remove_dir(&self.0);
    }
}

/// What the end of a confined run checks and undoes.
#[derive(Debug, Default)]
pub(crate) struct AfterRun {
    pub(crate) snapshot: Option<protect::Snapshot>,
    pub(crate) absent: Vec<undo::Anchor>,
    /// The run's scratch directory, removed after it (or when the run
    /// never starts: dropped).
    pub(crate) scratch: Option<ScratchGuard>,
    /// The git metadata under the writable roots before the run, to judge
    /// what the run planted (`gitcheck`); `None` outside `workspace-write`.
    pub(crate) git: Option<gitcheck::Snapshot>,
}

impl AfterRun {
    /// Undoes the run's changes to protected paths; what it found.
    pub(crate) fn undo(&self) -> Vec<ProtectedChangeFact> {
        let changes = match &self.snapshot {
            Some(s) => s.restore(),
            None => protect::remove_created(&self.absent),
        };
        let mut changes: Vec<ProtectedChangeFact> = changes
            .into_iter()
            .map(|c| ProtectedChangeFact {
                path: c.path,
                change: c.change.into(),
                restored: c.restored,
                reason: None,
            })
            .collect();
        changes.extend(self.git.iter().flat_map(gitcheck::Snapshot::check));
        if let Some(scratch) = &self.scratch {
            undo::remove_dir(&scratch.0);
        }
        changes.dedup_by(|a, b| a.path == b.path);
        changes
    }
}

/// What preparing a sandbox needs to know about the run besides its policy.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RunContext<'a> {
    /// The command gets this terminal (`-i`).
    pub(crate) interactive: bool,
    /// The slave of the command's own pseudo-terminal (`--pty`).
    pub(crate) pty: Option<&'a Path>,
    /// The command leads a new PID namespace.
    pub(crate) pid_namespace: bool,
    pub(crate) workdir: &'a Path,
}

/// The protected paths of `policy` with its writable roots opened as
/// `roots` (none outside `workspace-write`).
pub fn protection(policy: &Policy, roots: &Roots, workdir: &Path) -> protect::Protection {
    if policy.mode.value != Mode::WorkspaceWrite {
        return protect::Protection::default();
    }
    let real_roots: Vec<PathBuf> = roots.writable.iter().map(|r| r.path.clone()).collect();
    // Compared with the plan's real paths; the entry itself is not
    // followed (a `.vscode` that is a symlink is not lifted by its target).
    let mut real_paths = RealPaths::default();
    let allow_write: Vec<PathBuf> = policy
        .allow_write
        .iter()
        .map(|a| match (a.parent(), a.file_name()) {
            (Some(parent), Some(name)) => real_paths.real(parent).join(name),
            _ => a.clone(),
        })
        .collect();
    protect::plan(
        &real_roots,
        &protect::Inputs {
            workdir: std::fs::canonicalize(workdir).ok().as_deref(),
            temp_dir: roots.temp_dir.as_deref(),
            home: policy.home.as_deref(),
            config_file: policy.config_path.as_deref(),
            state_dir: Some(&policy.state_dir),
            extra: &policy.protect,
            allow_write: &allow_write,
        },
    )
}

/// Where a confined run's spill directory goes: `asked`, unless a writable
/// root covers it (the temp dir in `workspace-write`: the command could
/// rename the spill directory and make the reported "full stream" hold
/// other bytes); then `STATE/spill`, `dsh-exec`'s own directory, which the
/// run keeps read-only. Returns the parent and whether it moved.
pub fn spill_parent(policy: &Policy, roots: &Roots, asked: &Path) -> (PathBuf, bool) {
    let real = std::fs::canonicalize(asked).unwrap_or_else(|_| asked.to_path_buf());
    let writable = roots.writable.iter().any(|r| real.starts_with(&r.path));
    if !policy.mode.value.confines() || !writable {
        return (asked.to_path_buf(), false);
    }
    (policy.state_dir.join("spill"), true)
}

/// Whether this process can give a confined command a mount namespace
/// (CAP_SYS_ADMIN): protected paths are then read-only binds and the
/// command gets a private devpts; otherwise they are restored after the run.
pub fn has_mount_namespace() -> bool {
    crate::sys::caps::holds(crate::sys::caps::CAP_SYS_ADMIN)
}

/// CAP_NET_BIND_SERVICE, CAP_NET_BROADCAST, CAP_NET_ADMIN, CAP_NET_RAW
/// (capabilities(7)): dropped under `--network deny` in `full-access`.
const NETWORK_CAPABILITIES: [u32; 4] = [10, 11, 12, 13];

/// Whether a confined run gets a read-only mount tree (CAP_SYS_ADMIN and
/// mount_setattr(2)): metadata changes outside the writable roots are then
/// refused by the kernel rather than decided by the gate.
pub fn read_only_tree_available() -> bool {
    has_mount_namespace() && mount_setattr_available()
}

/// The capabilities a confined command keeps (of those `dsh-exec` holds:
/// as root, so that a CI checkout or an archive of another uid's files is
/// as usable confined as unconfined). Each is kept only where something
/// else already bounds every effect it has (capabilities(7)):
///
/// - CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH (bits 1, 2): reading,
///   writing and searching files whatever their mode. Landlock bounds every
///   write (and, with read rules, every read) to the writable roots whatever
///   the caller's capabilities: its checks come after the mode bits and do
///   not consult them. What CAP_DAC_READ_SEARCH adds beyond mode bits,
///   open_by_handle_at(2) (a file by its handle, no path walked), is refused
///   by the filter.
///
/// Dropped: every other one, among them CAP_SYS_ADMIN (mounts, namespaces),
/// CAP_SYS_PTRACE, CAP_NET_ADMIN and CAP_NET_RAW, CAP_MKNOD, CAP_SYS_MODULE,
/// CAP_SYS_RAWIO, CAP_SETUID/CAP_SETGID, CAP_SETFCAP (file capabilities),
/// CAP_FSETID (a write by root would keep a set-user-ID bit), CAP_KILL.
const KEPT_ALWAYS: u64 = (1 << 1) | (1 << 2);

/// Kept too where the read-only mount tree bounds them: CAP_CHOWN (bit 0)
/// and CAP_FOWNER (bit 3), chown and the owner-only changes (chmod,
/// utimes, ACLs, and removing others' files in a sticky directory) of files
/// of any owner: outside the writable roots every such change fails with
/// EROFS, and set-user-ID bits are refused by the filter and the gate.
/// Without the tree the gate makes these changes on the command's behalf.
const KEPT_WITH_TREE: u64 = (1 << 0) | (1 << 3);

/// Whether the kernel has mount_setattr(2) (Linux 5.12), which a read-only
/// mount tree needs.
fn mount_setattr_available() -> bool {
    crate::sys::mount_setattr_available()
}

/// The writable roots a read-only tree keeps writable: each outermost one
/// (a root inside another is part of its clone), with the (device, inode)
/// of the descriptor it was opened as.
fn tree_roots(roots: &Roots) -> Vec<(std::ffi::CString, u64, u64)> {
    use std::os::unix::ffi::OsStrExt;
    let outer = |r: &&Root| {
        !roots
            .writable
            .iter()
            .any(|o| o.path != r.path && r.path.starts_with(&o.path))
    };
    roots
        .writable
        .iter()
        .filter(outer)
        .filter_map(|r| {
            let st = nix::sys::stat::fstat(&r.fd).ok()?;
            let path = std::ffi::CString::new(r.path.as_os_str().as_bytes()).ok()?;
            Some((path, st.st_dev, st.st_ino))
        })
        .collect()
}

/// The terminal at `path` as the child re-opens it: its path, device
/// number, and which of this process's 0, 1, 2 are it (bits).
fn terminal_fds(path: &Path) -> Option<(std::ffi::CString, u64, u8)> {
    use std::os::fd::AsFd;
    use std::os::unix::ffi::OsStrExt;
    let rdev = std::fs::metadata(path).ok()?.rdev();
    let mut fds = 0u8;
    let (stdin, stdout, stderr) = (std::io::stdin(), std::io::stdout(), std::io::stderr());
    let std_fds = [stdin.as_fd(), stdout.as_fd(), stderr.as_fd()];
    for (fd, fd_ref) in std_fds.into_iter().enumerate() {
        if let Ok(st) = nix::sys::stat::fstat(fd_ref)
            && st.st_mode & libc::S_IFMT == libc::S_IFCHR
            && st.st_rdev == rdev
        {
            fds |= 1 << fd;
        }
    }
    let path = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    Some((path, rdev, fds))
}

/// The terminal on this process's stdin, for `-i` (ttyname(3)).
fn own_terminal() -> Option<PathBuf> {
    nix::unistd::ttyname(std::io::stdin()).ok()
}

/// Makes the `--allow-caches` directories that do not exist yet, as the
/// tool would on first use (mode 0777 less the umask, parents included).
/// Outside the sandbox, before the command runs. mkdir(2) never follows a
/// final symlink; a symlink on the way (planted by an earlier run in a home
/// that was writable) could at most get an empty directory made where it
/// points, and the cache is then no writable root: `open_roots` refuses
/// any symlink on the way to a cache (openat2(2) `RESOLVE_NO_SYMLINKS`).
/// A cache that cannot be made is no writable root either.
pub(crate) fn make_caches(policy: &Policy) {
    for dir in &policy.caches {
        let _ = std::fs::DirBuilder::new().recursive(true).create(dir);
    }
}

/// Checks the kernel, opens the writable roots, finds the protected paths,
/// and builds the Landlock ruleset, the seccomp filters and the mount plan.
///
/// Errors with [`Error::SandboxUnavailable`] (fail closed, nothing runs)
/// when a confining mode has no usable Landlock, or when the ruleset or a
/// filter cannot be built.
pub(crate) fn prepare(policy: &Policy, run: RunContext) -> Result<Prepared, Error> {
    let confining = policy.mode.value.confines();
    let deny = policy.network.value == Network::Deny;
    let gated = policy.network.value.gated();
    let privileged = has_mount_namespace();
    // full-access without network rules needs nothing from the kernel.
    let abi = if confining {
        kernel_abi().map_err(Error::SandboxUnavailable)?
    } else {
        kernel_abi().unwrap_or(0)
    };
    let mut enforcement = landlock::enforcement(policy, abi);
    make_caches(policy);
    let mut roots = open_roots(policy);
    if let Some(parent) = &policy.scratch_parent {
        add_scratch(&mut roots, parent);
    }
    if policy.mode.value == Mode::WorkspaceWrite {
        // Created before the run, so that it exists to be protected; with
        // the directories dsh-exec itself writes during the run (this
        // run's spill directory, a job started meanwhile), which restoring
        // the protected state directory after the run would otherwise take
        // for the command's.
        for dir in [
            policy.state_dir.join("spill"),
            policy.state_dir.join("jobs"),
        ] {
            let _ = std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir);
        }
    }
    // A shared temp dir, and the package caches, are walked one
    // level deep (their direct subdirectories, `/tmp/clone/.git`):
    // they hold whatever every program on the machine left there,
    // and reading all of it cost more than the rest of a confined
    // start (docs/sandbox.md, "Planted git metadata").
    // The caches three levels: where the package managers keep
    // the repositories they fetch and fetch into again
    // (`$CARGO_HOME/git/db/NAME`, Go's `cache/vcs/HASH`).
    let walked: Option<Vec<(PathBuf, usize)>> =
        (policy.mode.value == Mode::WorkspaceWrite).then(|| {
            let cache = |p: &Path| {
                policy
                    .caches
                    .iter()
                    .any(|c| std::fs::canonicalize(c).is_ok_and(|c| c == p))
            };
            roots
                .writable
                .iter()
                // A transaction's roots are not written by the run: its
                // commit judges what it brings (`transaction::commit`).
                .filter(|r| !(policy.transaction.is_some() && r.named))
                .map(|r| {
                    let limit = if roots.temp_dir.as_deref() == Some(r.path.as_path()) {
                        protect::TEMP_SCAN_DEPTH
                    } else if cache(&r.path) {
                        CACHE_GIT_DEPTH
                    } else {
                        gitcheck::FULL
                    };
                    (r.path.clone(), limit)
                })
                .collect()
        });
    // The git snapshot and the protection plan read the same trees and
    // depend on nothing of each other: on a thread of its own, the walk
    // costs a run only what exceeds the plan's search.
    let (protection, git) = std::thread::scope(|s| {
        let git = walked
            .as_ref()
            .map(|w| s.spawn(move || gitcheck::Snapshot::take(w)));
        let protection = protection(policy, &roots, run.workdir);
        let git = git.map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)));
        (protection, git)
    });
    let after_run = AfterRun {
        snapshot: (!privileged && !protection.protected.is_empty())
            .then(|| protect::Snapshot::take(&protection)),
        absent: protect::anchors(&protection.absent, &protection.roots),
        scratch: roots.scratch_guard.take(),
        git,
    };
    if !privileged && !protection.protected.is_empty() {
        enforcement.missing.push(Unenforced::ProtectedPaths);
    }
    if !confining && !deny && !gated {
        return Ok(Prepared {
            confinement: None,
            enforcement,
            roots,
            protection,
            after_run,
            network: policy.network.value,
            confining,
            overlays: None,
        });
    }
    // The terminal the command may use: its own under -i, else only the
    // ones it makes (a private devpts, where a mount namespace can be had).
    let private_devpts = confining && privileged && !run.interactive;
    let terminal = if run.interactive {
        own_terminal()
    } else {
        run.pty.map(Path::to_path_buf)
    };
    // Network rules and scopes need Landlock too, but without it (full-access
    // with --network deny) the seccomp filter still refuses IP sockets.
    // Under loopback and allow-list in full-access, a domain of the
    // abstract-socket scope alone (ABI 6): it also keeps the command from
    // ptrace(2)-ing processes outside it (Landlock restricts ptrace to a
    // domain's own and nested ones), which could make its connections.
    let ruleset = if confining || (deny && abi >= 4) || (gated && abi >= 6) {
        Some(
            landlock::build(policy, &roots, abi, terminal.as_deref())
                .map_err(Error::SandboxUnavailable)?,
        )
    } else {
        None
    };
    let unavailable =
        |e: String| Error::SandboxUnavailable(crate::error::SandboxProblem::Seccomp(e));
    let policy_refused =
        |e: String| Error::SandboxUnavailable(crate::error::SandboxProblem::Policy(e));
    // One program (seccomp::chain), in the order the separately loaded
    // filters were decided before: the most recently loaded first on a
    // tie between errno refusals (io_uring under --network deny gets
    // EACCES), the gate's notification last.
    // The x32 guard in every filtered run: the deny filter matches x86_64
    // numbers only too.
    let mut programs: Vec<_> = seccomp::x32_guard().into_iter().collect();
    if deny || gated {
        programs.push(seccomp::deny_ip_sockets().map_err(unavailable)?);
    }
    if gated {
        programs.push(seccomp::gated_sockopts().map_err(unavailable)?);
    }
    // The kernel bounds metadata changes where every mount outside the
    // writable roots is read-only; elsewhere the gate does.
    let read_only_tree = confining && privileged && mount_setattr_available();
    // Not under -i: the command then inherits the caller's descriptors
    // (a redirected stdout), opened through the host's writable mounts,
    // which a metadata change through the descriptor, or through its
    // /proc/self/fd link (/dev/stdout), would reach.
    // Under --pty likewise: the terminal was opened through the host's
    // devpts, where fchmod(2) of it would let another user in.
    let gated_metadata = if read_only_tree && !run.interactive && run.pty.is_none() {
        seccomp::GatedMetadata::SetId
    } else {
        seccomp::GatedMetadata::All
    };
    if confining {
        programs.push(seccomp::confining_filter().map_err(unavailable)?);
        programs.push(seccomp::enosys_filter().map_err(unavailable)?);
        programs.push(seccomp::gate_filter(gated_metadata).map_err(unavailable)?);
        // No private IPC namespace without CAP_SYS_ADMIN: no System V IPC.
        if !privileged {
            programs.push(seccomp::sysv_ipc_filter().map_err(unavailable)?);
        }
    }
    if deny {
        programs.push(seccomp::deny_ip_sockets_gated().map_err(unavailable)?);
    }
    if gated {
        programs.push(seccomp::gated_ip_calls().map_err(unavailable)?);
    }
    // The one program is the gate's, loaded last with its listener.
    let (filters, gate) = (
        Vec::new(),
        Some(seccomp::chain(programs).map_err(unavailable)?),
    );
    // A writable root inside an entry of the read deny list (`-C
    // ~/.password-store/sub`) would grant reads of that part of it: the
    // run does not start, and says how to ask for it.
    // (/dev/shm, granted in the gate tier, is one of the devices /dev keeps.)
    if let Some((root, entry)) = roots.writable.iter().find_map(|r| {
        roots
            .read_denied
            .iter()
            .filter(|d| d.as_path() != Path::new("/dev"))
            .find(|d| r.path.starts_with(d) && r.path != **d)
            .map(|d| (&r.path, d))
    }) {
        return Err(Error::SandboxUnavailable(
            crate::error::SandboxProblem::Policy(format!(
                "the writable root {} lies inside {}, which the read deny list keeps \
                 unreadable; --allow-read {} to work there",
                root.display(),
                entry.display(),
                entry.display()
            )),
        ));
    }
    // Entries of the read deny list inside writable roots: a writable root
    // grants reads beneath it, and Landlock cannot take one back; split,
    // the root would refuse new files in every directory along the way,
    // and a rename or hard link of the entry within it would reach the next
    // run. So each is hidden under a mount (an empty read-only tmpfs, or
    // /dev/null for a file), which also keeps it from being renamed or
    // linked; without a mount namespace the run cannot be confined so, and
    // does not start.
    let hidden: Vec<&PathBuf> = if policy.mode.value == Mode::WorkspaceWrite {
        roots
            .read_denied
            .iter()
            .filter(|d| roots.writable.iter().any(|r| d.starts_with(&r.path)))
            // /dev inside a writable root (`--writable-root /`, which is
            // warned about) stays: the command's devices live there.
            .filter(|d| !d.starts_with("/dev"))
            .filter(|d| std::fs::symlink_metadata(d).is_ok())
            .collect()
    } else {
        Vec::new()
    };
    // With a mount namespace every other directory on the read deny list
    // is hidden too, so its names are not listable: Landlock cannot refuse
    // them (listing `~` needs the read-directory right on `~`, which covers
    // `~/.ssh` beneath it), an empty tmpfs over it can. Not one that holds
    // what the run may read or where it works (an `--allow-read` exception,
    // a read root, a writable root, the workdir), and not the devices.
    let mut hidden = hidden;
    if privileged && confining {
        let workdir = std::fs::canonicalize(run.workdir).unwrap_or_else(|_| run.workdir.into());
        let needed: Vec<&Path> = roots
            .read_exceptions
            .iter()
            .chain(&roots.read_roots)
            .map(PathBuf::as_path)
            .chain(roots.writable.iter().map(|r| r.path.as_path()))
            .chain([workdir.as_path()])
            .collect();
        for d in &roots.read_denied {
            let skip = hidden.contains(&d)
                || ["/dev", "/proc", "/sys"].iter().any(|s| d.starts_with(s))
                || needed.iter().any(|n| n.starts_with(d))
                || !std::fs::symlink_metadata(d).is_ok_and(|m| m.is_dir());
            if !skip {
                hidden.push(d);
            }
        }
    }
    // dsh-exec's own state directory inside a writable root (the home as
    // the workspace) is protected read-only there already; without a mount
    // namespace it stays readable rather than refusing every such run.
    let unhideable: Vec<&&PathBuf> = hidden
        .iter()
        .filter(|d| !d.starts_with(&policy.state_dir))
        .collect();
    if !unhideable.is_empty() && !privileged {
        let names: Vec<String> = unhideable.iter().map(|d| d.display().to_string()).collect();
        return Err(Error::SandboxUnavailable(
            crate::error::SandboxProblem::Policy(format!(
                "the writable roots hold {} on the read deny list, which cannot be hidden there \
             without a mount namespace (CAP_SYS_ADMIN); keep it out of the writable roots, or \
             --allow-read it",
                names.join(", ")
            )),
        ));
    }
    // A transaction: the named roots on overlays. The command sees the
    // overlays' inodes, not the roots': its Landlock grant is the overlay
    // mount's (a rule on the root would sit on the mount point, which a
    // path walk inside the overlay never meets: landlock.rst, and
    // security/landlock/fs.c skipping hidden mount points). Protected
    // paths inside an overlay are not bound over (their files are the
    // lower layer's; `commit` refuses changes to them instead); a read
    // deny entry inside one cannot be hidden there, so the run does not
    // start.
    let overlays = match &policy.transaction {
        Some(_) => {
            let o = overlay::make(policy, &roots, read_only_tree)?;
            if let Some(d) = hidden
                .iter()
                .find(|d| o.layers.iter().any(|l| d.starts_with(&l.root)))
            {
                return Err(policy_refused(format!(
                    "--transaction: {} is on the read deny list and inside an overlaid root, \
                     where it cannot be hidden; keep it out of the writable roots, or \
                     --allow-read it",
                    d.display()
                )));
            }
            if let Some(ruleset) = &ruleset {
                use std::os::fd::AsFd;
                for (layer, mount) in o.layers.iter().zip(&o.mounts) {
                    crate::sys::landlock::add_path_beneath(
                        ruleset.as_fd(),
                        mount.as_fd(),
                        landlock::writable_access(abi),
                    )
                    .map_err(|source| {
                        Error::SandboxUnavailable(crate::error::SandboxProblem::SplitPath {
                            path: layer.root.clone(),
                            source,
                        })
                    })?;
                }
            }
            Some(o)
        }
        None => None,
    };
    let in_overlay = |p: &Path| {
        overlays
            .as_ref()
            .is_some_and(|o| o.layers.iter().any(|l| p.starts_with(&l.root)))
    };
    // Every layer reaches the child, or the run does not start: a root
    // left without its overlay would be written for real.
    let overlay_mounts = overlays
        .iter()
        .flat_map(|o| o.layers.iter().zip(&o.mounts))
        .map(|(l, m)| {
            use std::os::fd::AsRawFd;
            std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(l.root.as_os_str()))
                .map(|path| (path, l.root_id.0, l.root_id.1, m.as_raw_fd()))
                .map_err(|_| {
                    policy_refused(format!("{}: a NUL byte in the path", l.root.display()))
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mounts = (privileged && (confining || run.pid_namespace)).then(|| MountPlan {
        overlays: overlay_mounts,
        hides: hidden
            .iter()
            .filter_map(|d| {
                let dir = std::fs::symlink_metadata(d).is_ok_and(|m| m.is_dir());
                std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(d.as_os_str()))
                    .ok()
                    .map(|c| (c, dir))
            })
            .collect(),
        binds: with_anchors(&protection.mounts, &hidden, &roots)
            .iter()
            .filter(|(p, _)| !in_overlay(p))
            .filter_map(|(p, ro)| {
                std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(p.as_os_str()))
                    .ok()
                    .map(|c| (c, *ro))
            })
            .collect(),
        private_devpts,
        pts_access: landlock::device_access(abi),
        fresh_proc: run.pid_namespace,
        shm_access: if confining {
            landlock::writable_access(abi)
        } else {
            0
        },
        tree_roots: read_only_tree.then(|| tree_roots(&roots)),
        terminal: (read_only_tree && run.interactive)
            .then(|| terminal.as_deref().and_then(terminal_fds))
            .flatten(),
    });
    if let Some(n) = mounts
        .as_ref()
        .and_then(|m| m.tree_roots.as_ref())
        .map(Vec::len)
        .filter(|n| *n > crate::sys::child::MAX_TREE_ROOTS)
    {
        return Err(policy_refused(format!(
            "{n} separate writable roots; a read-only mount tree takes at most {}",
            crate::sys::child::MAX_TREE_ROOTS
        )));
    }
    let keep_capabilities = if confining {
        KEPT_ALWAYS | if read_only_tree { KEPT_WITH_TREE } else { 0 }
    } else {
        NETWORK_CAPABILITIES
            .iter()
            .fold(u64::MAX, |keep, cap| keep & !(1u64 << cap))
    };
    Ok(Prepared {
        confinement: Some(Confinement {
            drop_capabilities: confining || deny || gated,
            keep_capabilities,
            // unshare(CLONE_NEWIPC) needs CAP_SYS_ADMIN.
            ipc_namespace: confining && privileged,
            mounts,
            ruleset,
            filters,
            gate,
        }),
        enforcement,
        roots,
        protection,
        after_run,
        network: policy.network.value,
        confining,
        overlays,
    })
}

impl Prepared {
    /// What judging the run's refusals from its output needs.
    pub(crate) fn denial_context(&self, policy: &Policy, workdir: &Path) -> denial::Context {
        let env: Vec<(std::ffi::OsString, std::ffi::OsString)> = std::env::vars_os().collect();
        denial::Context {
            mode: Some(policy.mode.value),
            workdir: std::fs::canonicalize(workdir).unwrap_or_else(|_| workdir.to_path_buf()),
            writable: self.roots.writable.iter().map(|r| r.path.clone()).collect(),
            protected: self
                .protection
                .protected
                .iter()
                .map(|p| p.path.clone())
                .chain(self.protection.absent.iter().cloned())
                .collect(),
            liftable: self
                .protection
                .agent_files
                .iter()
                .filter(|f| !self.protection.lifted.contains(f))
                .cloned()
                .collect(),
            caches: defaults::cache_dirs(&env, policy.home.as_deref())
                .into_iter()
                .map(|(dir, _)| dir)
                .collect(),
            home: policy.home.clone(),
            read_only_tree: self
                .confinement
                .as_ref()
                .and_then(|c| c.mounts.as_ref())
                .is_some_and(|m| m.tree_roots.is_some()),
            read_denied: self.roots.read_denied.clone(),
            read_exceptions: self.roots.read_exceptions.clone(),
            read_roots: self.roots.read_roots.clone(),
            state_dir: std::fs::canonicalize(&policy.state_dir).ok(),
            secret_files: policy
                .injection
                .credentials
                .iter()
                .filter_map(|c| match &c.source {
                    crate::net::inject::Source::File(p) => std::fs::canonicalize(p).ok(),
                    _ => None,
                })
                .collect(),
            network_default_of: policy.network_default_of(),
        }
    }

    /// What the gate of the run allows, with `tree` the run's processes;
    /// `None` when the run has no gate.
    pub(crate) fn gate_policy(&self, tree: crate::proctree::Tree) -> Option<gate::GatePolicy> {
        let confinement = self.confinement.as_ref()?;
        confinement.gate.as_ref()?;
        let mut policy = gate::GatePolicy::new(
            self.roots.writable.iter().map(|r| r.path.clone()).collect(),
            self.protection.protected.clone(),
            self.roots.unix_sockets.clone(),
            tree,
        );
        policy.network = self.network;
        policy.unix_confined = self.confining;
        // pidfd_getfd(2) needs the caller's permitted set to hold the
        // task's (ptrace(2), PTRACE_MODE_ATTACH_REALCREDS): in full-access
        // the command keeps all but the network capabilities, and so does
        // the gate; those it makes calls with are never more than the
        // command's own.
        if !self.confining {
            policy.capabilities |= confinement.keep_capabilities;
        }
        Some(policy)
    }
}

/// The facts a run reports about its sandbox.
pub(crate) fn facts(
    policy: &Policy,
    enforcement: &Enforcement,
    runner_failed: bool,
    denied: bool,
    hidden: bool,
) -> SandboxFacts {
    let confining = policy.mode.value.confines();
    let reads = match (confining, policy.read_roots.is_empty(), hidden) {
        (false, _, _) => None,
        (true, true, false) => Some("landlock: deny list"),
        (true, true, true) => Some("landlock: deny list; mounts hide its directories"),
        (true, false, false) => Some("landlock: read roots"),
        (true, false, true) => {
            Some("landlock: read roots; mounts hide the deny list's directories")
        }
    };
    SandboxFacts {
        read_enforcement: reads.map(String::from),
        denials_source: confining.then(|| "output".to_string()),
        mode: policy.mode.value,
        denied,
        enforcement: if enforcement.is_partial() {
            EnforcementLevel::Partial
        } else {
            EnforcementLevel::Full
        },
        runner_failed,
        protected_changes: Vec::new(),
        denials: Vec::new(),
        denials_more: 0,
        network_denied: false,
        network: policy.network.value,
        network_enforcement: match policy.network.value {
            Network::Deny => NetworkEnforcement::Full,
            Network::Allow => NetworkEnforcement::None,
            Network::Loopback | Network::AllowList => NetworkEnforcement::Gate,
        },
        network_allow: policy.network_allow.clone(),
        network_proxy: None,
        network_denials: Vec::new(),
        network_denials_more: 0,
        network_allowed: Default::default(),
        credentials_used: Default::default(),
        credentials_missed: Default::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_paths_agree_with_canonicalizing_every_ancestor() {
        let dir = tempfile::tempdir().unwrap();
        let d = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(d.join("real/sub")).unwrap();
        std::os::unix::fs::symlink(d.join("real"), d.join("link")).unwrap();
        std::os::unix::fs::symlink(d.join("nowhere"), d.join("dangling")).unwrap();
        std::fs::write(d.join("real/file"), "x").unwrap();
        let paths = [
            "real",
            "real/sub",
            "real/file",
            "real/missing",
            "real/missing/deeper",
            "link",
            "link/sub",
            "link/missing/deeper",
            "dangling",
            "dangling/below",
            "missing/deeper/still",
        ];
        let mut memo = RealPaths::default();
        for p in paths {
            let p = d.join(p);
            assert_eq!(memo.real(&p), walk_up_to_real(&p), "{}", p.display());
        }
        assert_eq!(memo.real(Path::new("/")), PathBuf::from("/"));
        assert_eq!(
            memo.real(&d.join("link/missing")),
            d.join("real/missing"),
            "a symlinked directory on the way is followed"
        );
    }

    #[test]
    fn mountinfo_lines_parse_with_their_escapes() {
        let table = b"22 27 0:21 / /proc rw,relatime - proc proc rw\n\
            36 27 254:0 /home/a\\040b /mnt/x\\134y rw - ext4 /dev/vda rw\n\
            37 27 0:60 / /mnt/ov rw shared:5 - overlay ov rw,lowerdir=/root:/srv/b,upperdir=/mnt/up,workdir=/mnt/wk\n\
            garbage\n";
        assert_eq!(
            parse_mountinfo(table),
            [
                Mount {
                    dev: b"0:21".to_vec(),
                    root: "/".into(),
                    mount_point: "/proc".into(),
                    layers: vec![],
                },
                Mount {
                    dev: b"254:0".to_vec(),
                    root: "/home/a b".into(),
                    mount_point: "/mnt/x\\y".into(),
                    layers: vec![],
                },
                Mount {
                    dev: b"0:60".to_vec(),
                    root: "/".into(),
                    mount_point: "/mnt/ov".into(),
                    layers: vec!["/root".into(), "/srv/b".into(), "/mnt/up".into()],
                },
            ]
        );
    }

    #[test]
    fn a_bind_of_an_ancestor_or_of_a_part_of_a_denied_path_is_denied_too() {
        let m = |dev: &str, root: &str, at: &str| Mount {
            dev: dev.as_bytes().to_vec(),
            root: root.into(),
            mount_point: at.into(),
            layers: vec![],
        };
        let mounts = [
            m("254:0", "/", "/"),
            m("0:6", "/", "/dev"),
            m("254:0", "/", "/run/host"),
            m("254:0", "/root", "/srv/home"),
            m("254:0", "/root/.ssh/keys", "/mnt/keys"),
            m("254:0", "/etc", "/mnt/etc"),
            m("0:6", "/", "/chroot/dev"),
        ];
        let denied = [PathBuf::from("/root/.ssh"), PathBuf::from("/dev")];
        assert_eq!(
            mount_aliases(&mounts, &denied),
            [
                PathBuf::from("/run/host/root/.ssh"),
                PathBuf::from("/srv/home/.ssh"),
                PathBuf::from("/mnt/keys"),
                // The directory the devtmpfs is mounted on, as the bind of
                // `/` shows it: what lies in it beneath the mount.
                PathBuf::from("/run/host/dev"),
                PathBuf::from("/chroot/dev"),
            ]
        );
        // A bind of the denied entry itself, and one of its parent made
        // after a tmpfs was mounted over the entry (the tmpfs shadows it at
        // its own path, not through the bind).
        let mounts = [
            m("254:0", "/", "/"),
            m("0:50", "/", "/root/.ssh"),
            m("254:0", "/root/.ssh", "/mnt/s"),
            m("254:0", "/root", "/mnt/h"),
        ];
        assert_eq!(
            mount_aliases(&mounts, &[PathBuf::from("/root/.ssh")]),
            [PathBuf::from("/mnt/s"), PathBuf::from("/mnt/h/.ssh")]
        );
        // An overlay whose lower layer is the home.
        let overlay = Mount {
            layers: vec!["/root".into()],
            ..m("0:60", "/", "/mnt/ov")
        };
        assert_eq!(
            mount_aliases(
                &[m("254:0", "/", "/"), overlay],
                &[PathBuf::from("/root/.ssh")]
            ),
            [PathBuf::from("/mnt/ov/.ssh")]
        );
    }
}
