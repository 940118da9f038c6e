//! The sandbox's facts in a run's result (`RunResult.sandbox`): what was
//! enforced, and what was refused or undone.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{Mode, Network};

/// How completely the kernel enforced a sandbox policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EnforcementLevel {
    /// Every right the mode relies on is enforced.
    Full,
    /// Some are not (an older Landlock ABI); `explain` names them.
    Partial,
}

/// How IPv4/IPv6 networking is restricted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NetworkEnforcement {
    /// IPv4 and IPv6 sockets are refused (seccomp, plus Landlock TCP rules
    /// where the ABI has them).
    Full,
    /// Nothing is restricted.
    None,
    /// `loopback` and `allow-list`: the gate judges every address
    /// (seccomp user notification), and raw, packet and other sockets are
    /// refused.
    Gate,
}

/// Sandbox facts of a run (present only when a sandbox mode was asked for).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct SandboxFacts {
    /// `read-only`, `workspace-write` or `full-access`.
    #[schemars(with = "String")]
    pub mode: Mode,
    /// True when anything was refused: `denials` is not empty (kept for
    /// readers of earlier results).
    pub denied: bool,
    /// What was refused, the first 100 (see `denials_more`): each refusal
    /// of the gate, and each refused write the command's output names (a
    /// failed run only; see docs/sandbox.md).
    #[serde(default)]
    pub denials: Vec<crate::sandbox::denial::DenialFact>,
    /// How many more refusals there were than `denials` lists.
    #[serde(default)]
    pub denials_more: u64,
    /// True when a network socket, a non-loopback address or a proxy
    /// request was refused.
    #[serde(default)]
    pub network_denied: bool,
    /// `full` or `partial`: how completely the kernel enforced the mode.
    #[schemars(with = "String")]
    pub enforcement: EnforcementLevel,
    /// How reads are restricted in a confining mode (`landlock: deny list`,
    /// `landlock: read roots`, with `; mounts hide ...` where deny-list
    /// entries inside writable roots are hidden); `null` in `full-access`.
    #[serde(default)]
    pub read_enforcement: Option<String>,
    /// How the file refusals that Landlock and the read-only mount make in
    /// the kernel, without telling `dsh-exec`, were found: `output` (read
    /// from the command's output, so one the command silenced, as in
    /// `2>/dev/null`, is missed; docs/sandbox.md, "Denials"). The Linux
    /// audit records Landlock can emit (ABI 7) are not read: they need
    /// audit enabled system-wide. `null` in `full-access`. The gate's own
    /// refusals are exact whatever this says (`source: "gate"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub denials_source: Option<String>,
    /// True when confining the child failed after fork (the command never ran).
    pub runner_failed: bool,
    /// `allow`, `deny`, `loopback` or `allow-list`.
    #[schemars(with = "String")]
    pub network: Network,
    /// `full` when IPv4/IPv6 sockets are refused, `gate` when the gate
    /// judges their addresses (`loopback`, `allow-list`), `none` when
    /// allowed.
    #[schemars(with = "String")]
    pub network_enforcement: NetworkEnforcement,
    /// The hosts of `--network allow=` (normalized, e.g. `*.example.org:8443`);
    /// absent for the other policies.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub network_allow: Vec<crate::net::rules::HostRule>,
    /// Where the run's proxy listened (`127.0.0.1:PORT`); absent without
    /// an allow-list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_proxy: Option<String>,
    /// Requests the proxy refused, the first 100 (see
    /// `network_denials_more`): host, port and the reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub network_denials: Vec<crate::net::proxy::NetworkDenial>,
    /// How many more the proxy refused than `network_denials` lists.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub network_denials_more: u64,
    /// Requests the proxy let through, counted by host.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub network_allowed: std::collections::BTreeMap<String, u64>,
    /// Requests the proxy put a credential into (`--inject`): by
    /// credential name, then by host, how many; never a value. Absent
    /// when none.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub credentials_used:
        std::collections::BTreeMap<String, std::collections::BTreeMap<String, u64>>,
    /// Requests to a host an `--inject` rule names that no rule covered
    /// (another path, a `TRACE`, plain `http://`), which went on without a
    /// credential: by host, how many. Absent when none.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub credentials_missed: std::collections::BTreeMap<String, u64>,
    /// Changes the command made to protected paths, and whether they were
    /// undone (absent when none): a protected file it created (removed),
    /// or, without a mount namespace, one it modified (restored).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub protected_changes: Vec<ProtectedChangeFact>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A change to a protected path, as the result reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ProtectedChangeFact {
    /// The path.
    #[serde(serialize_with = "crate::serde_paths::lossy_path")]
    pub path: PathBuf,
    /// `created`, `modified`, `removed` or `replaced`; from the git check
    /// (docs/sandbox.md, "Planted git metadata") also `quarantined` (a git
    /// directory, pointer or hook renamed `NAME.dsh-exec-quarantined`) and
    /// `unchecked` (a directory the check could not reach).
    pub change: String,
    /// True when it was undone (renamed aside, restored or removed).
    pub restored: bool,
    /// Why, where the change was judged rather than protected outright:
    /// e.g. `config key core.fsmonitor`, `hook post-checkout`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}
