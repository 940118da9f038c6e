//! The Landlock ruleset of a confining mode, built in the parent with the
//! `landlock` crate and enforced in the child by landlock_restrict_self(2).
//!
//! What it relies on from the kernel (Documentation/userspace-api/landlock.rst,
//! landlock(7)): a ruleset handles a set of access rights; once the child
//! restricts itself, every handled right is denied except beneath the
//! directories a rule grants it on, judged at the file actually reached
//! (symlinks resolved). Rules are granted through open descriptors, so the
//! writable roots are granted through the very `O_PATH` descriptors
//! [`super::open_roots`] opened and checked: swapping a path for a symlink
//! afterwards changes nothing. Read rights are granted under `/`, device
//! ioctls and writes only on [`super::WRITABLE_DEVICES`], and in
//! `workspace-write` every right but creating devices under each writable
//! root. Scopes (ABI 6) keep signals, and with `--network deny` abstract
//! Unix sockets, inside the sandbox; network rights (ABI 4) handle TCP bind
//! and connect with no port allowed.
//!
//! The crate is used with `CompatLevel::HardRequirement` and asked only for
//! what the running ABI knows, so nothing is silently dropped; what the ABI
//! lacks is reported as [`Enforcement::missing`]. The read grants split
//! around the read deny list are added with landlock_add_rule(2) directly,
//! on the crate's ruleset descriptor (see [`ReadSplit`]).
//!
//! Cost, measured on this project's VM: a rule is an openat(2) (about 2 us,
//! the file structure charged to the memory cgroup), the add (1 us) and a
//! close (1 us); the default deny list needs about 60 rules (every entry of
//! `/` and of the home beside the way to a denied entry), so its split
//! costs about 0.3 ms of the deny list's total.

use std::ffi::CStr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreatedAttr, Scope,
};
use nix::fcntl::{AtFlags, OFlag};
use nix::libc;
use nix::sys::stat::Mode;
use serde::Serialize;

use super::{EnforcementLevel, NetworkEnforcement};
use super::{Network, Policy, Roots, WRITABLE_DEVICES};
use crate::error::SandboxProblem;

/// The kernel's Landlock ABI version (landlock_create_ruleset(2) with
/// `LANDLOCK_CREATE_RULESET_VERSION`).
///
/// Errors when Landlock is not built in (ENOSYS), disabled at boot
/// (EOPNOTSUPP), or filtered out by seccomp.
pub fn kernel_abi() -> Result<i32, SandboxProblem> {
    crate::sys::landlock::abi_version().map_err(SandboxProblem::LandlockUnavailable)
}

/// A protection a policy relies on that the running Landlock ABI lacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unenforced {
    /// Renames and links across directories (`LANDLOCK_ACCESS_FS_REFER`, ABI 2).
    Refer,
    /// Truncation (`LANDLOCK_ACCESS_FS_TRUNCATE`, ABI 3).
    Truncate,
    /// No signals to processes outside the sandbox (`LANDLOCK_SCOPE_SIGNAL`, ABI 6).
    SignalScope,
    /// No connections to abstract Unix sockets outside the sandbox
    /// (`LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET`, ABI 6).
    AbstractUnixScope,
    /// TCP bind and connect rules (ABI 4); seccomp still refuses IP sockets,
    /// so this one does not make enforcement partial.
    TcpRules,
    /// Protected paths inside writable roots, which need a mount namespace
    /// (CAP_SYS_ADMIN): without one they are restored after the run, not
    /// kept read-only during it.
    ProtectedPaths,
}

impl Unenforced {
    /// The Landlock ABI that brought it.
    pub fn since_abi(self) -> i32 {
        match self {
            Unenforced::Refer => 2,
            Unenforced::Truncate => 3,
            Unenforced::TcpRules => 4,
            Unenforced::SignalScope | Unenforced::AbstractUnixScope => 6,
            Unenforced::ProtectedPaths => 0,
        }
    }

    /// Whether its absence makes the enforcement `partial`.
    pub fn degrades(self) -> bool {
        self != Unenforced::TcpRules
    }

    /// What is not enforced, with the ABI that would enforce it, e.g.
    /// `truncate (ABI 3)`.
    pub fn describe(self) -> String {
        let since = self.since_abi();
        match self {
            Unenforced::Refer => format!("refer: rename and link across directories (ABI {since})"),
            Unenforced::Truncate => format!("truncate (ABI {since})"),
            Unenforced::SignalScope => {
                format!("signal scope: no signals to processes outside the sandbox (ABI {since})")
            }
            Unenforced::AbstractUnixScope => format!("abstract Unix socket scope (ABI {since})"),
            Unenforced::TcpRules => {
                format!("Landlock TCP rules (ABI {since}; seccomp still refuses IP sockets)")
            }
            Unenforced::ProtectedPaths => "protected paths read-only (no mount namespace without \
                 CAP_SYS_ADMIN; they are restored after the run instead)"
                .into(),
        }
    }
}

/// How completely the kernel enforces a policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Enforcement {
    /// The kernel's Landlock ABI version (0 when there is none).
    pub abi: i32,
    /// What the policy would use but this ABI does not have.
    pub missing: Vec<Unenforced>,
    /// How IPv4/IPv6 networking is restricted.
    pub network: NetworkEnforcement,
}

impl Enforcement {
    /// True when something the mode relies on is not enforced.
    pub fn is_partial(&self) -> bool {
        self.missing.iter().any(|m| m.degrades())
    }

    /// `full` or `partial`.
    pub fn level(&self) -> EnforcementLevel {
        if self.is_partial() {
            EnforcementLevel::Partial
        } else {
            EnforcementLevel::Full
        }
    }
}

impl Serialize for Enforcement {
    /// `{"abi", "level", "missing": [description...], "network"}`, as
    /// `explain --json` shows it.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("Enforcement", 4)?;
        st.serialize_field("abi", &self.abi)?;
        st.serialize_field("level", &self.level())?;
        let missing: Vec<String> = self.missing.iter().map(|m| m.describe()).collect();
        st.serialize_field("missing", &missing)?;
        st.serialize_field("network", &self.network)?;
        st.end()
    }
}

/// The rights on a writable device (a terminal the command made): the file
/// rights but execute, as bits of `landlock_path_beneath_attr`.
pub(crate) fn device_access(abi: i32) -> u64 {
    (AccessFs::from_file(ABI::from(abi)) & !AccessFs::Execute).bits()
}

/// The rights on a file the command writes its output into
/// (`--output-files`): writing and truncating it, so that reopening
/// `/dev/stdout` by path behaves as under `> FILE` (its magic link names
/// the file, whose own rule then applies: a rule on a file that is not a
/// directory covers that file, Documentation/userspace-api/landlock.rst),
/// as bits of `landlock_path_beneath_attr`.
pub(crate) fn output_file_access(abi: i32) -> u64 {
    (AccessFs::from_file(ABI::from(abi)) & (AccessFs::WriteFile | AccessFs::Truncate)).bits()
}

/// The rights on a writable root, as bits of `landlock_path_beneath_attr`:
/// everything but making devices (a private /dev/shm granted in the
/// child).
pub(crate) fn writable_access(abi: i32) -> u64 {
    (AccessFs::from_all(ABI::from(abi)) & !(AccessFs::MakeChar | AccessFs::MakeBlock)).bits()
}

/// The enforcement a policy gets on a kernel with Landlock ABI `abi`.
pub fn enforcement(policy: &Policy, abi: i32) -> Enforcement {
    let deny = policy.network.value == Network::Deny;
    let confining = policy.mode.value.confines();
    let relied_on = [
        (Unenforced::Refer, confining),
        (Unenforced::Truncate, confining),
        (Unenforced::SignalScope, confining),
        (
            Unenforced::AbstractUnixScope,
            confining || deny || policy.network.value.gated(),
        ),
        (Unenforced::TcpRules, deny),
    ];
    Enforcement {
        abi,
        missing: relied_on
            .into_iter()
            .filter(|(right, used)| *used && abi < right.since_abi())
            .map(|(right, _)| right)
            .collect(),
        network: match policy.network.value {
            Network::Deny => NetworkEnforcement::Full,
            Network::Allow => NetworkEnforcement::None,
            Network::Loopback | Network::AllowList => NetworkEnforcement::Gate,
        },
    }
}

/// The rights that act on a directory's entries rather than on a file's
/// content: listing, making and removing entries, renaming (refer). Granted
/// beneath a split directory (see [`split`]) they let the command list it
/// and, in a writable root, make and remove entries, but read no file.
fn entry_rights(rights: BitFlags<AccessFs>) -> BitFlags<AccessFs> {
    rights
        & !(AccessFs::ReadFile
            | AccessFs::WriteFile
            | AccessFs::Execute
            | AccessFs::Truncate
            | AccessFs::IoctlDev)
}

/// The read grants of a ruleset, split so that nothing beneath a denied
/// path is granted: a directory with a denied path beneath it keeps only
/// [`entry_rights`] (a rule is hierarchical: it could not be granted on the
/// directory without reaching the denied entry), and each of its entries
/// gets the rights itself, or is split in turn, or gets nothing when it is
/// denied.
///
/// Read at preparation, before the command runs: entries made later
/// directly in a split directory get the entry rights alone (listable, not
/// readable). A symlink gets no rule: what it names has its own. Names in a
/// denied directory stay listable (`ls ~/.ssh` shows them); their content
/// does not.
///
/// Each directory is listed through a descriptor of it, and its entries are
/// opened relative to that descriptor (openat(2), `O_NOFOLLOW`): what is
/// granted is what was listed, even if a path above is swapped meanwhile.
/// The rules are added with landlock_add_rule(2) directly: the crate would
/// fstat(2) every descriptor again to drop directory rights from a file,
/// and the listing already gave a file only a file's rights
/// ([`file_rights`]). A directory put in place of a file since it was
/// listed gets the file's rights; a file in place of a directory makes the
/// kernel refuse the directory rights (EINVAL), and the ruleset fails:
/// fail closed.
///
/// A bind mount can show a directory a second time, somewhere else (a bind
/// of `/` under `/run/host`): the deny list then holds the denied entries
/// under both paths ([`super::open_roots`] adds them from mountinfo), and a
/// directory reached through one that is, by inode, a directory being
/// split through the other (`/run/host/tmp` when `/tmp` is split) gets only
/// the entry rights, because a Landlock rule is attached to the inode and
/// would reach the denied entry through the other path. `split_dirs` holds
/// those inodes; it is empty when no mount shows a denied entry twice, and
/// then nothing is checked.
struct ReadSplit<'a> {
    ruleset: BorrowedFd<'a>,
    split_dirs: std::collections::HashSet<(u64, u64)>,
}

/// The (device, inode) of every existing directory above a `denied` path
/// (the directories [`ReadSplit`] splits).
fn split_dir_inodes(denied: &[std::path::PathBuf]) -> std::collections::HashSet<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let mut seen = std::collections::HashSet::new();
    let mut out = std::collections::HashSet::new();
    for d in denied {
        for a in d.ancestors().skip(1) {
            if !seen.insert(a.to_path_buf()) {
                continue;
            }
            if let Ok(m) = std::fs::symlink_metadata(a)
                && m.is_dir()
            {
                out.insert((m.dev(), m.ino()));
            }
        }
    }
    out
}

/// Whether `path` is `dir` or lies beneath it, compared as bytes (both are
/// absolute and normalized): the split makes this comparison for every
/// entry it lists against every denied path beneath it, and
/// `Path::starts_with`, which walks components, made it a third of the
/// split's cost.
fn beneath(path: &[u8], dir: &[u8]) -> bool {
    path.starts_with(dir)
        && (path.len() == dir.len() || dir.ends_with(b"/") || path[dir.len()] == b'/')
}

impl ReadSplit<'_> {
    /// Grants `rights` beneath `path` (opened relative to `at` by `name`,
    /// or absolute), split where a path of `denied` lies beneath it; `dir`
    /// when it is a directory. `denied` may hold paths elsewhere: only
    /// those beneath `path` are looked at further down.
    fn entry(
        &self,
        at: Option<BorrowedFd<'_>>,
        name: &CStr,
        path: &Path,
        dir: bool,
        rights: BitFlags<AccessFs>,
        denied: &[&[u8]],
    ) -> Result<(), SandboxProblem> {
        let here = path.as_os_str().as_bytes();
        let denied: Vec<&[u8]> = denied
            .iter()
            .copied()
            .filter(|d| beneath(d, here))
            .collect();
        if denied.contains(&here) {
            return Ok(());
        }
        if !dir {
            return self.grant(at, name, path, rights & file_rights());
        }
        if denied.is_empty() {
            return self.grant(at, name, path, rights);
        }
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let Some(fd) = open_entry(at, name, path, flags)? else {
            return Ok(());
        };
        add_beneath(self.ruleset, fd.as_fd(), entry_rights(rights)).map_err(split_problem(path))?;
        let mut listing = nix::dir::Dir::from_fd(fd).map_err(|e| split_problem(path)(e.into()))?;
        let mut entries = Vec::new();
        for entry in listing.iter() {
            let entry = entry.map_err(|e| split_problem(path)(e.into()))?;
            let name = entry.file_name();
            if name == c"." || name == c".." {
                continue;
            }
            entries.push((name.to_owned(), entry.file_type()));
        }
        let at = listing.as_fd();
        for (name, kind) in entries {
            use nix::dir::Type;
            let kind = match kind {
                Some(kind) => kind,
                // DT_UNKNOWN (some file systems): ask.
                None => {
                    match nix::sys::stat::fstatat(at, name.as_c_str(), AtFlags::AT_SYMLINK_NOFOLLOW)
                    {
                        Ok(st) if st.st_mode & libc::S_IFMT == libc::S_IFDIR => Type::Directory,
                        Ok(st) if st.st_mode & libc::S_IFMT == libc::S_IFLNK => Type::Symlink,
                        Ok(_) => Type::File,
                        Err(_) => continue, // gone since it was listed
                    }
                }
            };
            if kind == Type::Symlink {
                continue;
            }
            let child = path.join(std::ffi::OsStr::from_bytes(name.to_bytes()));
            self.entry(
                Some(at),
                &name,
                &child,
                kind == Type::Directory,
                rights,
                &denied,
            )?;
        }
        Ok(())
    }

    /// One rule: `rights` beneath `name` (relative to `at`, or absolute),
    /// opened `O_PATH|O_NOFOLLOW`: a symlink put in place since it was
    /// listed gets the rule itself, which grants nothing through it. A
    /// directory that is, by inode, one of `split_dirs` (a split directory
    /// seen again through another mount) gets only the entry rights.
    fn grant(
        &self,
        at: Option<BorrowedFd<'_>>,
        name: &CStr,
        path: &Path,
        rights: BitFlags<AccessFs>,
    ) -> Result<(), SandboxProblem> {
        if rights.is_empty() {
            return Ok(());
        }
        let flags = OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let Some(fd) = open_entry(at, name, path, flags)? else {
            return Ok(());
        };
        let mut rights = rights;
        if !self.split_dirs.is_empty() {
            let st = nix::sys::stat::fstat(&fd).map_err(|e| split_problem(path)(e.into()))?;
            if self.split_dirs.contains(&(st.st_dev, st.st_ino)) {
                rights = entry_rights(rights);
            }
        }
        add_beneath(self.ruleset, fd.as_fd(), rights).map_err(split_problem(path))
    }
}

/// `name` opened relative to `at` (absolute without it); `None` when it is
/// gone since it was listed (nothing to grant).
fn open_entry(
    at: Option<BorrowedFd<'_>>,
    name: &CStr,
    path: &Path,
    flags: OFlag,
) -> Result<Option<OwnedFd>, SandboxProblem> {
    let opened = match at {
        Some(at) => nix::fcntl::openat(at, name, flags, Mode::empty()),
        None => nix::fcntl::open(name, flags, Mode::empty()),
    };
    match opened {
        Ok(fd) => Ok(Some(fd)),
        Err(nix::errno::Errno::ENOENT) => Ok(None),
        Err(e) => Err(split_problem(path)(e.into())),
    }
}

fn split_problem(path: &Path) -> impl FnOnce(std::io::Error) -> SandboxProblem + '_ {
    move |source| SandboxProblem::SplitPath {
        path: path.to_path_buf(),
        source,
    }
}

/// landlock_add_rule(2) of a `LANDLOCK_RULE_PATH_BENEATH` rule: `rights`
/// beneath the file or directory `parent` names
/// (`struct landlock_path_beneath_attr`, packed, in
/// include/uapi/linux/landlock.h).
fn add_beneath(
    ruleset: BorrowedFd<'_>,
    parent: BorrowedFd<'_>,
    rights: BitFlags<AccessFs>,
) -> std::io::Result<()> {
    crate::sys::landlock::add_path_beneath(ruleset, parent, rights.bits())
}

/// The rights a rule on a file that is not a directory may hold.
fn file_rights() -> BitFlags<AccessFs> {
    AccessFs::from_file(ABI::V6)
}

/// A path as a C string, for [`ReadSplit`].
fn c_path(path: &Path) -> Result<std::ffi::CString, SandboxProblem> {
    std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| split_problem(path)(std::io::Error::from_raw_os_error(libc::EINVAL)))
}

/// Builds the ruleset of a policy and returns its descriptor (close-on-exec)
/// for landlock_restrict_self(2) in the child: file rights in confining
/// modes (the writable ones through `roots`' descriptors), network rights
/// and the abstract-socket scope with `--network deny` (in `full-access`
/// too).
///
/// Errors when the kernel refuses the ruleset or a rule, or a granted
/// system path cannot be opened.
pub fn build(
    policy: &Policy,
    roots: &Roots,
    abi: i32,
    terminal: Option<&Path>,
) -> Result<OwnedFd, SandboxProblem> {
    let abi = ABI::from(abi);
    let all = AccessFs::from_all(abi);
    let device_rights = AccessFs::from_file(abi) & !AccessFs::Execute;
    let writable_rights = all & !(AccessFs::MakeChar | AccessFs::MakeBlock);
    // Device ioctls only on the writable devices (a loop-control ioctl could
    // otherwise attach and detach block devices).
    let read_rights = AccessFs::from_read(abi);

    let confining = policy.mode.value.confines();
    let deny = policy.network.value == Network::Deny;
    let mut ruleset = Ruleset::default().set_compatibility(CompatLevel::HardRequirement);
    if confining {
        ruleset = ruleset
            .handle_access(all)
            .map_err(SandboxProblem::Ruleset)?;
    }
    if deny && !AccessNet::from_all(abi).is_empty() {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(abi))
            .map_err(SandboxProblem::Ruleset)?;
    }
    // Confining modes: no signals to, and no abstract Unix sockets of,
    // processes outside the sandbox (X11 and D-Bus listen on abstract
    // sockets); --network deny alone: the abstract sockets.
    let scopes: BitFlags<Scope> = if confining {
        Scope::from_all(abi)
    } else {
        Scope::from_all(abi) & Scope::AbstractUnixSocket
    };
    if !scopes.is_empty() {
        ruleset = ruleset.scope(scopes).map_err(SandboxProblem::Ruleset)?;
    }
    let mut created = ruleset.create().map_err(SandboxProblem::Ruleset)?;
    if confining {
        // System paths: root-owned, not something the command can swap.
        let mut system: Vec<(&Path, BitFlags<AccessFs>)> = Vec::new();
        for dev in WRITABLE_DEVICES {
            let path = Path::new(dev);
            if path.exists() {
                system.push((path, device_rights));
            }
        }
        // Under -i: the command's own terminal, and /dev/tty (which names
        // it), and no other.
        if let Some(t) = terminal {
            system.push((t, device_rights));
            system.push((Path::new("/dev/tty"), device_rights));
        }
        for (path, rights) in system {
            let fd = PathFd::new(path).map_err(|source| SandboxProblem::RulePath {
                path: path.to_path_buf(),
                source,
            })?;
            created = created
                .add_rule(PathBeneath::new(fd, rights))
                .map_err(SandboxProblem::Ruleset)?;
        }
    }
    // In read-only the writable roots are the run's scratch directory alone.
    // A denied entry inside one is hidden under a mount (`sandbox::prepare`).
    if confining {
        for root in &roots.writable {
            created = created
                .add_rule(PathBeneath::new(&root.fd, writable_rights))
                .map_err(SandboxProblem::Ruleset)?;
        }
    }
    let fd: OwnedFd = Option::from(created).ok_or(SandboxProblem::NoRuleset)?;
    if confining {
        // Reads everywhere but the read deny list: `/` split along the way
        // to each denied entry (see `ReadSplit`), and the exceptions inside.
        let split = ReadSplit {
            ruleset: fd.as_fd(),
            split_dirs: if roots.read_aliases {
                split_dir_inodes(&roots.read_denied)
            } else {
                Default::default()
            },
        };
        let denied: Vec<&[u8]> = roots
            .read_denied
            .iter()
            .map(|d| d.as_os_str().as_bytes())
            .collect();
        if roots.read_roots.is_empty() {
            split.entry(None, c"/", Path::new("/"), true, read_rights, &denied)?;
        }
        // --read-root: only the roots (each split likewise).
        for root in &roots.read_roots {
            let dir = std::fs::symlink_metadata(root).is_ok_and(|m| m.is_dir());
            split.entry(None, &c_path(root)?, root, dir, read_rights, &denied)?;
        }
        for p in &roots.read_exceptions {
            let dir = std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir());
            let rights = if dir {
                read_rights
            } else {
                read_rights & file_rights()
            };
            split.grant(None, &c_path(p)?, p, rights)?;
        }
    }
    Ok(fd)
}
