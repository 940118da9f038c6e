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
//! lacks is reported as [`Enforcement::missing`].

use std::os::fd::OwnedFd;
use std::path::Path;

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreatedAttr, Scope,
};
use nix::libc;
use serde::Serialize;

use super::{Network, Policy, Roots, WRITABLE_DEVICES};
use crate::error::SandboxProblem;
use crate::result::{EnforcementLevel, NetworkEnforcement};

/// The kernel's Landlock ABI version (landlock_create_ruleset(2) with
/// `LANDLOCK_CREATE_RULESET_VERSION`).
///
/// Errors when Landlock is not built in (ENOSYS), disabled at boot
/// (EOPNOTSUPP), or filtered out by seccomp.
pub fn kernel_abi() -> Result<i32, SandboxProblem> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: a query that takes no pointers.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if v < 0 {
        return Err(SandboxProblem::LandlockUnavailable(
            nix::errno::Errno::last(),
        ));
    }
    Ok(v as i32)
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
        (Unenforced::AbstractUnixScope, confining || deny),
        (Unenforced::TcpRules, deny),
    ];
    Enforcement {
        abi,
        missing: relied_on
            .into_iter()
            .filter(|(right, used)| *used && abi < right.since_abi())
            .map(|(right, _)| right)
            .collect(),
        network: if deny {
            NetworkEnforcement::Full
        } else {
            NetworkEnforcement::None
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

/// Splits the grant of `rights` beneath `top` so that nothing beneath a
/// `denied` path is granted: `top` keeps only [`entry_rights`] (a rule is
/// hierarchical: it could not be granted on `top` without reaching the
/// denied entry), and each entry of `top` gets `rights` itself, or is split
/// in turn when a denied path lies beneath it, or gets nothing when it is
/// denied. The grants are pushed to `out` as (path, rights).
///
/// Read at preparation, before the command runs: entries made later
/// directly in a split directory get the entry rights alone (listable, not
/// readable). A symlink gets no rule: what it names has its own. Names in a
/// denied directory stay listable (`ls ~/.ssh` shows them); their content
/// does not.
fn split(
    top: &Path,
    rights: BitFlags<AccessFs>,
    denied: &[std::path::PathBuf],
    out: &mut Vec<(std::path::PathBuf, BitFlags<AccessFs>)>,
) {
    split_entry(top, true, rights, denied, out);
}

/// [`split`] of one entry, `dir` when it is a directory (as readdir(3)'s
/// `d_type` said): a file gets only the rights a file can have.
fn split_entry(
    top: &Path,
    dir: bool,
    rights: BitFlags<AccessFs>,
    denied: &[std::path::PathBuf],
    out: &mut Vec<(std::path::PathBuf, BitFlags<AccessFs>)>,
) {
    if denied.iter().any(|d| d == top) {
        return;
    }
    if !dir {
        out.push((top.to_path_buf(), rights & file_rights()));
        return;
    }
    if !denied.iter().any(|d| d.starts_with(top)) {
        out.push((top.to_path_buf(), rights));
        return;
    }
    out.push((top.to_path_buf(), entry_rights(rights)));
    let Ok(entries) = std::fs::read_dir(top) else {
        return;
    };
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_symlink() {
            continue;
        }
        split_entry(&entry.path(), kind.is_dir(), rights, denied, out);
    }
}

/// The rights a rule on a file that is not a directory may hold.
fn file_rights() -> BitFlags<AccessFs> {
    AccessFs::from_file(ABI::V6)
}

/// Adds a rule granting `rights` on `path` (`split` gave a file only a
/// file's rights), opened with `O_PATH|O_NOFOLLOW`: a symlink put in place
/// since the path was listed gets the rule itself, which grants nothing
/// through it; a directory put in place of a file (or the reverse) fails
/// the ruleset (`CompatLevel::HardRequirement`): fail closed.
fn add_path_rule(
    created: landlock::RulesetCreated,
    path: &Path,
    rights: BitFlags<AccessFs>,
) -> Result<landlock::RulesetCreated, SandboxProblem> {
    use std::os::fd::FromRawFd;
    use std::os::unix::ffi::OsStrExt;
    let problem = |source: std::io::Error| SandboxProblem::SplitPath {
        path: path.to_path_buf(),
        source,
    };
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| problem(std::io::Error::from_raw_os_error(libc::EINVAL)))?;
    // SAFETY: open with our C string; the result is checked.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        let e = std::io::Error::last_os_error();
        // Gone since it was listed: nothing to grant.
        if e.raw_os_error() == Some(libc::ENOENT) {
            return Ok(created);
        }
        return Err(problem(e));
    }
    // SAFETY: a fresh descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    if rights.is_empty() {
        return Ok(created);
    }
    created
        .add_rule(PathBeneath::new(fd, rights))
        .map_err(SandboxProblem::Ruleset)
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
        // Reads everywhere but the read deny list: `/` split along the way
        // to each denied entry (see `split`), and the exceptions inside.
        let mut reads = Vec::new();
        if roots.read_roots.is_empty() {
            split(Path::new("/"), read_rights, &roots.read_denied, &mut reads);
        }
        // --read-root: only the roots (each split likewise).
        for root in &roots.read_roots {
            let dir = std::fs::symlink_metadata(root).is_ok_and(|m| m.is_dir());
            split_entry(root, dir, read_rights, &roots.read_denied, &mut reads);
        }
        reads.extend(roots.read_exceptions.iter().map(|p| {
            let dir = std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir());
            let rights = if dir {
                read_rights
            } else {
                read_rights & file_rights()
            };
            (p.clone(), rights)
        }));
        for (path, rights) in reads {
            created = add_path_rule(created, &path, rights)?;
        }
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
    let fd: Option<OwnedFd> = created.into();
    fd.ok_or(SandboxProblem::NoRuleset)
}
