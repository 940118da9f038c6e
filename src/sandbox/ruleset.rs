//! The Landlock ruleset of a confining mode, built in the parent with the
//! `landlock` crate and enforced in the child by `landlock_restrict_self`.
//!
//! Every filesystem right the running kernel's Landlock ABI knows is handled
//! (Documentation/userspace-api/landlock.rst): read rights (and device
//! ioctls) are granted under `/`, and in `workspace-write` every right but
//! creating block or character devices under each writable root. The
//! writable character devices of [`super::WRITABLE_DEVICES`] get the file
//! rights. Where the ABI has scopes (6+), signals to processes outside the
//! sandbox are refused, and with `--network deny` connections to abstract
//! Unix sockets outside it too; where it has network rights (4+), TCP bind
//! and connect are handled with no port allowed.
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

use super::{Mode, Network, Policy, WRITABLE_DEVICES};

/// The kernel's Landlock ABI version (landlock_create_ruleset(2) with
/// `LANDLOCK_CREATE_RULESET_VERSION`).
///
/// Errors with a message when Landlock is not built in (ENOSYS), disabled at
/// boot (EOPNOTSUPP), or filtered out by seccomp.
pub fn kernel_abi() -> Result<i32, String> {
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
        let e = std::io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::ENOSYS) => "Landlock is not available in this kernel (ENOSYS)".into(),
            Some(libc::EOPNOTSUPP) => "Landlock is disabled in this kernel (EOPNOTSUPP)".into(),
            _ => format!("Landlock is unusable: {e}"),
        });
    }
    Ok(v as i32)
}

/// How completely the kernel enforces a policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Enforcement {
    /// The kernel's Landlock ABI version.
    pub abi: i32,
    /// `full` when every right the mode needs is enforced, else `partial`.
    pub level: &'static str,
    /// What the mode would use but this ABI does not have, e.g.
    /// `truncate (ABI 3)`.
    pub missing: Vec<String>,
    /// `full` (seccomp, plus Landlock TCP rules from ABI 4) when the network
    /// is denied; `none` when it is allowed.
    pub network: &'static str,
}

/// Rights a confining mode relies on and the ABI that brought each.
const NEEDED: [(&str, i32); 4] = [
    ("refer: rename and link across directories", 2),
    ("truncate", 3),
    (
        "signal scope: no signals to processes outside the sandbox",
        6,
    ),
    ("abstract Unix socket scope", 6),
];

/// The enforcement a policy gets on a kernel with Landlock ABI `abi`.
pub fn enforcement(policy: &Policy, abi: i32) -> Enforcement {
    let deny = policy.network.value == Network::Deny;
    let confining = policy.mode.value.confines();
    let mut missing: Vec<String> = NEEDED
        .iter()
        .filter(|(name, since)| {
            let abstract_scope = name.starts_with("abstract");
            abi < *since && ((confining && !abstract_scope) || (deny && abstract_scope))
        })
        .map(|(name, since)| format!("{name} (ABI {since})"))
        .collect();
    if deny && abi < 4 {
        missing.push("Landlock TCP rules (ABI 4; seccomp still refuses IP sockets)".into());
    }
    let partial = missing.iter().any(|m| !m.starts_with("Landlock TCP"));
    Enforcement {
        abi,
        level: if partial { "partial" } else { "full" },
        missing,
        network: if deny { "full" } else { "none" },
    }
}

/// Builds the ruleset of a policy and returns its descriptor (close-on-exec)
/// for `landlock_restrict_self` in the child: file rights in confining
/// modes, network rights and the abstract-socket scope with `--network
/// deny` (in `full-access` too).
///
/// Errors with a message when a rule cannot be added (a writable root that
/// vanished, a kernel that refuses the ruleset).
pub fn build(policy: &Policy, abi: i32) -> Result<OwnedFd, String> {
    let abi = ABI::from(abi);
    let all = AccessFs::from_all(abi);
    let device_rights = AccessFs::from_file(abi) & !AccessFs::Execute;
    let writable_rights = all & !(AccessFs::MakeChar | AccessFs::MakeBlock);
    // Device ioctls only on the writable devices (a loop-control ioctl could
    // otherwise attach and detach block devices).
    let read_rights = AccessFs::from_read(abi);
    let fail = |e: &dyn std::fmt::Display| format!("Landlock ruleset: {e}");

    let confining = policy.mode.value.confines();
    let deny = policy.network.value == Network::Deny;
    let mut ruleset = Ruleset::default().set_compatibility(CompatLevel::HardRequirement);
    if confining {
        ruleset = ruleset.handle_access(all).map_err(|e| fail(&e))?;
    }
    if deny && !AccessNet::from_all(abi).is_empty() {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(abi))
            .map_err(|e| fail(&e))?;
    }
    let scopes: BitFlags<Scope> = match (confining, deny) {
        (true, true) => Scope::from_all(abi),
        (true, false) => Scope::from_all(abi) & Scope::Signal,
        (false, _) => Scope::from_all(abi) & Scope::AbstractUnixSocket,
    };
    if !scopes.is_empty() {
        ruleset = ruleset.scope(scopes).map_err(|e| fail(&e))?;
    }
    let mut rules: Vec<(&Path, BitFlags<AccessFs>)> = Vec::new();
    if confining {
        rules.push((Path::new("/"), read_rights));
        for dev in WRITABLE_DEVICES.iter().chain(&["/dev/pts"]) {
            let path = Path::new(dev);
            if path.exists() {
                rules.push((path, device_rights));
            }
        }
    }
    if policy.mode.value == Mode::WorkspaceWrite {
        rules.extend(
            policy
                .writable
                .iter()
                .map(|r| (r.as_path(), writable_rights)),
        );
    }
    let mut created = ruleset.create().map_err(|e| fail(&e))?;
    for (path, rights) in rules {
        let fd = PathFd::new(path).map_err(|e| format!("{}: {e}", path.display()))?;
        created = created
            .add_rule(PathBeneath::new(fd, rights))
            .map_err(|e| fail(&e))?;
    }
    let fd: Option<OwnedFd> = created.into();
    fd.ok_or_else(|| "Landlock ruleset: the kernel returned no ruleset".into())
}
