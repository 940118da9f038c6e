//! The sandbox policy: modes that govern file effects, writable roots, the
//! network switch, and the facts a run reports.
//!
//! - `read-only`: every path readable and executable; no file writes except
//!   to character devices such as `/dev/null`.
//! - `workspace-write`: additionally writable: the workspace root, each
//!   `--writable-root`, and the temp directory (unless `--no-temp-write`).
//! - `full-access`: no confinement; the facts are still reported.
//!
//! Confining modes are enforced with Landlock ([`ruleset`]) and also set
//! no-new-privileges and drop every capability; `--network deny` adds a
//! seccomp filter ([`network`]). The child-side steps are in
//! [`crate::spawn`].

pub mod network;
pub mod ruleset;
pub mod syscalls;

use std::path::PathBuf;

use serde::Serialize;

use crate::spec::Sourced;

/// How far the command may change files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Read and execute anything; write nothing but character devices.
    ReadOnly,
    /// Also write under the workspace root, writable roots and the temp dir.
    WorkspaceWrite,
    /// No confinement.
    FullAccess,
}

impl Mode {
    /// The mode's name as on the command line, e.g. `workspace-write`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::ReadOnly => "read-only",
            Mode::WorkspaceWrite => "workspace-write",
            Mode::FullAccess => "full-access",
        }
    }

    /// True for the modes that are enforced with Landlock.
    pub fn confines(self) -> bool {
        self != Mode::FullAccess
    }
}

/// Whether the command may use IPv4/IPv6 sockets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Network {
    /// IPv4 and IPv6 sockets work.
    Allow,
    /// IPv4 and IPv6 sockets are refused; Unix sockets work.
    Deny,
}

impl Network {
    /// `allow` or `deny`.
    pub fn as_str(self) -> &'static str {
        match self {
            Network::Allow => "allow",
            Network::Deny => "deny",
        }
    }
}

/// A path given as writable that does not exist: skipped, with a warning.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skipped {
    #[serde(serialize_with = "crate::lossy::path")]
    /// The path as given.
    pub path: PathBuf,
    /// Why it was skipped.
    pub reason: String,
}

/// The resolved sandbox policy of a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Policy {
    /// The mode and its origin.
    pub mode: Sourced<Mode>,
    /// The network switch and its origin.
    pub network: Sourced<Network>,
    /// The workspace root, absolute with symlinks resolved.
    #[serde(serialize_with = "crate::lossy::sourced_path")]
    pub workspace_root: Sourced<PathBuf>,
    /// The temp directory, absolute with symlinks resolved; `None` with
    /// `--no-temp-write` (or when it does not exist).
    #[serde(serialize_with = "crate::lossy::opt_path")]
    pub temp_dir: Option<PathBuf>,
    /// Every directory the command may write under, in `workspace-write`:
    /// the workspace root, each existing `--writable-root`, the temp dir.
    /// Empty in the other modes.
    #[serde(serialize_with = "crate::lossy::paths")]
    pub writable: Vec<PathBuf>,
    /// Writable paths that were skipped (missing, or not directories).
    pub skipped: Vec<Skipped>,
    /// Things a careful user wants to know about the policy: a writable
    /// root reached through a symlink (a confined run could have planted
    /// it), a writable root of `/`.
    pub warnings: Vec<String>,
}

/// Character devices that stay writable in every confining mode.
pub const WRITABLE_DEVICES: [&str; 7] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
];

/// Output substrings (compared in lower case) that show a denied write.
pub const DENIAL_MARKERS: [&str; 3] = [
    "permission denied",
    "read-only file system",
    "operation not permitted",
];

/// The conservative denial classification: true only when a confining mode
/// was active, the command failed, and its output shows a permission,
/// read-only-file-system or operation-not-permitted failure.
pub fn looks_denied(mode: Mode, failed: bool, stdout: &str, stderr: &str) -> bool {
    if !mode.confines() || !failed {
        return false;
    }
    [stdout, stderr].iter().any(|text| {
        let lower = text.to_lowercase();
        DENIAL_MARKERS.iter().any(|m| lower.contains(m))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denial_is_conservative() {
        let ws = Mode::WorkspaceWrite;
        assert!(looks_denied(
            ws,
            true,
            "",
            "touch: cannot touch '/x': Permission denied\n"
        ));
        assert!(looks_denied(
            Mode::ReadOnly,
            true,
            "",
            "bash: /f: Read-only file system"
        ));
        assert!(!looks_denied(ws, false, "", "Permission denied"));
        assert!(!looks_denied(
            Mode::FullAccess,
            true,
            "",
            "Permission denied"
        ));
        assert!(!looks_denied(ws, true, "", ""));
        assert!(!looks_denied(ws, true, "/tmp/x/sandbox/package.json\n", ""));
    }
}

/// A policy made ready to apply: what the child does to itself, and how
/// completely the kernel enforces it.
#[derive(Debug)]
pub struct Prepared {
    /// What the child applies to itself; `None` when nothing is confined.
    pub confinement: Option<crate::spawn::Confinement>,
    /// How completely the kernel enforces the policy.
    pub enforcement: ruleset::Enforcement,
}

/// Checks the kernel and builds the Landlock ruleset and seccomp filter.
///
/// Errors with [`crate::Error::SandboxUnavailable`] (fail closed, nothing
/// runs) when a confining mode has no usable Landlock, or when the ruleset or
/// filter cannot be built.
pub fn prepare(policy: &Policy) -> Result<Prepared, crate::Error> {
    let unavailable = crate::Error::SandboxUnavailable;
    let confining = policy.mode.value.confines();
    let deny = policy.network.value == Network::Deny;
    // full-access without network rules needs nothing from the kernel.
    let abi = if confining {
        ruleset::kernel_abi().map_err(unavailable)?
    } else {
        ruleset::kernel_abi().unwrap_or(0)
    };
    let enforcement = ruleset::enforcement(policy, abi);
    if !confining && !deny {
        return Ok(Prepared {
            confinement: None,
            enforcement,
        });
    }
    // Network rules and scopes need Landlock too, but without it (full-access
    // with --network deny) the seccomp filter still refuses IP sockets.
    let ruleset = if confining || abi >= 4 {
        Some(ruleset::build(policy, abi).map_err(unavailable)?)
    } else {
        None
    };
    let mut seccomp = Vec::new();
    if confining {
        seccomp.push(syscalls::confining_filter(policy.mode.value).map_err(unavailable)?);
        seccomp.push(syscalls::xattr_filter().map_err(unavailable)?);
    }
    if deny {
        seccomp.push(network::deny_ip_sockets().map_err(unavailable)?);
    }
    Ok(Prepared {
        confinement: Some(crate::spawn::Confinement {
            drop_capabilities: confining,
            ruleset,
            seccomp,
        }),
        enforcement,
    })
}

/// The facts a run reports about its sandbox.
pub fn facts(
    policy: &Policy,
    enforcement: &ruleset::Enforcement,
    runner_failed: bool,
    denied: bool,
) -> crate::result::SandboxFacts {
    crate::result::SandboxFacts {
        mode: policy.mode.value.as_str().into(),
        denied,
        enforcement: enforcement.level.into(),
        runner_failed,
        network: policy.network.value.as_str().into(),
        network_enforcement: enforcement.network.into(),
    }
}
