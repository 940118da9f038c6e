//! The outcome of one run, as independent typed facts, and the exit status
//! `dsh-exec` derives from it.
//!
//! `exit_code`, `signal`, `timed_out` and `aborted` are separate fields: a
//! command can time out and still exit 0 (it trapped SIGTERM), and a caller
//! must never read a cut-short run as a clean success. The JSON form
//! (`--json`) is this type serialized with serde; its schema is
//! [`json_schema`].

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::capture::CollectedOutput;
use crate::sandbox::{Mode, Network};

/// Exit statuses of `dsh-exec` itself, as GNU `timeout(1)` has them.
pub mod exit {
    /// The deadline passed (the command may still have exited 0 after a
    /// trapped SIGTERM).
    pub const TIMEOUT: i32 = 124;
    /// `dsh-exec` itself failed: every [`crate::Error`], and a sandbox
    /// runner failure (the command never ran).
    pub const INFRASTRUCTURE: i32 = 125;
    /// A usage error: a bad flag or value, before anything ran. 125, as
    /// timeout(1), env(1) and nice(1) exit for their own failures, usage
    /// included, so that it never passes for the command's own 2 (make,
    /// grep); the JSON error object's code says `USAGE`.
    pub const USAGE: i32 = 125;
    /// Death by (or abort by) signal S gives `SIGNAL_BASE + S`, as in sh(1).
    pub const SIGNAL_BASE: i32 = 128;
}

/// A signal, by number, named as signal(7) names it: `SIGKILL`,
/// `SIGRTMIN+2`, or `SIG<n>` for a number with no name. Serialized as its
/// name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Signal(i32);

impl Signal {
    /// SIGINT (2).
    pub const SIGINT: Signal = Signal(nix::libc::SIGINT);
    /// SIGKILL (9).
    pub const SIGKILL: Signal = Signal(nix::libc::SIGKILL);
    /// SIGTERM (15).
    pub const SIGTERM: Signal = Signal(nix::libc::SIGTERM);

    /// The first signal of the deadline's escalation named as `--signal`
    /// takes it, as timeout(1)'s `-s`: `TERM`, `SIGTERM` or `15`. Errors
    /// with a one-line message for an unknown signal, and for those that
    /// stop, continue or are ignored by default (STOP, TSTP, TTIN, TTOU,
    /// CONT, CHLD, WINCH, URG): they would end nothing.
    pub fn parse_first(s: &str) -> Result<Signal, String> {
        let upper = s.to_ascii_uppercase();
        let named = if upper.starts_with("SIG") {
            upper.clone()
        } else {
            format!("SIG{upper}")
        };
        let sig = match s.parse::<i32>() {
            Ok(n) => nix::sys::signal::Signal::try_from(n).ok(),
            Err(_) => named.parse::<nix::sys::signal::Signal>().ok(),
        }
        .ok_or_else(|| {
            format!("invalid signal '{s}' (a name such as TERM, INT, KILL, or a number)")
        })?;
        use nix::sys::signal::Signal as S;
        if matches!(
            sig,
            S::SIGSTOP
                | S::SIGTSTP
                | S::SIGTTIN
                | S::SIGTTOU
                | S::SIGCONT
                | S::SIGCHLD
                | S::SIGWINCH
                | S::SIGURG
        ) {
            return Err(format!(
                "--signal {s}: {} stops, continues or is ignored by default, and would end nothing",
                sig.as_str()
            ));
        }
        Ok(Signal(sig as i32))
    }

    /// The signal numbered `n` (any number a `waitid` status can carry).
    pub fn from_number(n: i32) -> Signal {
        Signal(n)
    }

    /// Its number.
    pub fn number(self) -> i32 {
        self.0
    }

    /// Its conventional name, e.g. `SIGKILL`, `SIGRTMIN+2`.
    pub fn name(self) -> String {
        let n = self.0;
        if let Ok(sig) = nix::sys::signal::Signal::try_from(n) {
            return sig.as_str().to_string();
        }
        let (min, max) = (nix::libc::SIGRTMIN(), nix::libc::SIGRTMAX());
        if n == min {
            return "SIGRTMIN".into();
        }
        if (min..=max).contains(&n) {
            return format!("SIGRTMIN+{}", n - min);
        }
        format!("SIG{n}")
    }

    /// The signal a name produced by [`Signal::name`] stands for.
    pub fn from_name(name: &str) -> Option<Signal> {
        if let Ok(sig) = name.parse::<nix::sys::signal::Signal>() {
            return Some(Signal(sig as i32));
        }
        if name == "SIGRTMIN" {
            return Some(Signal(nix::libc::SIGRTMIN()));
        }
        if let Some(k) = name.strip_prefix("SIGRTMIN+") {
            return k
                .parse::<i32>()
                .ok()
                .map(|k| Signal(nix::libc::SIGRTMIN() + k));
        }
        name.strip_prefix("SIG")?.parse().ok().map(Signal)
    }
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

impl Serialize for Signal {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.name())
    }
}

impl<'de> Deserialize<'de> for Signal {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Signal, D::Error> {
        let name = String::deserialize(d)?;
        Signal::from_name(&name)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown signal {name}")))
    }
}

/// How completely the kernel enforced a sandbox policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EnforcementLevel {
    /// Every right the mode relies on is enforced.
    Full,
    /// Some are not (an older Landlock ABI); `explain` names them.
    Partial,
}

/// How IPv4/IPv6 networking is restricted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
    /// failed run only; see the README, "denied").
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
    /// `created`, `modified`, `removed` or `replaced`.
    pub change: String,
    /// True when it was undone.
    pub restored: bool,
}

/// The outcome of one run: the `--json` object of `dsh-exec`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct RunResult {
    /// The script given to `bash -c`.
    pub command: String,
    /// The absolute working directory.
    #[serde(serialize_with = "crate::serde_paths::lossy_path")]
    pub workdir: PathBuf,
    /// Exit code of `bash`; `null` when it died from a signal.
    pub exit_code: Option<i32>,
    /// Name of the signal that killed `bash` (e.g. `SIGKILL`); `null` on a normal exit.
    #[schemars(with = "Option<String>")]
    pub signal: Option<Signal>,
    /// True when the deadline was the first cause to cut the run short.
    pub timed_out: bool,
    /// True when a signal sent to `dsh-exec` was the first cause to cut the run short.
    pub aborted: bool,
    /// The signal `dsh-exec` received when `aborted` (e.g. `SIGINT`); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub aborted_by: Option<Signal>,
    /// The deadline applied, in milliseconds; `null` for no deadline.
    pub timeout_ms: Option<u64>,
    /// Values the configuration file's caps lowered (absent when none), e.g.
    /// `timeout 2h capped at 1h by /home/u/.config/dsh-exec/config.toml`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capped: Vec<String>,
    /// Wall time from the start of preparation to the end of the run, in
    /// milliseconds (monotonic clock).
    pub duration_ms: u64,
    /// What the command wrote to stdout.
    pub stdout: CollectedOutput,
    /// What the command wrote to stderr.
    pub stderr: CollectedOutput,
    /// Sandbox facts; `null` when no sandbox mode was given.
    pub sandbox: Option<SandboxFacts>,
    /// The names of the variables scrubbed from the command's environment
    /// (sorted; names only, never values): an agent whose `npm publish`
    /// failed can see that `NPM_TOKEN` was withheld. `-e NAME` passes one.
    #[serde(default)]
    pub env_scrubbed: Vec<String>,
    /// What the command's processes used; `null` when it never ran.
    #[serde(default)]
    pub resources: Option<Resources>,
    /// The resource limit the run reached, if one did: `memory` (the
    /// kernel's OOM killer ended a process; the run is then ended),
    /// `cpu` (the tree used its CPU time and was ended as at the deadline),
    /// `pids` (a fork or thread was refused), `file_size` (a process was
    /// ended by SIGXFSZ). The first that ended the run, else the first
    /// reached in that order; `null` when none was.
    #[serde(default)]
    pub limit_exceeded: Option<crate::limits::LimitKind>,
    /// The limits set and how each was enforced; absent when none was set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<crate::limits::LimitFacts>,
}

/// What a run's processes used, from getrusage(2) `RUSAGE_CHILDREN` of
/// `dsh-exec`: it is the subreaper of the command's tree and reaps every
/// process of it, so the figures cover the whole tree, orphans included,
/// once each has been reaped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Resources {
    /// User CPU time of the tree, in milliseconds.
    pub cpu_user_ms: u64,
    /// System CPU time of the tree, in milliseconds.
    pub cpu_system_ms: u64,
    /// The largest resident set of any one process of the tree, in bytes
    /// (`ru_maxrss`; not the sum: that takes a cgroup). In a program that
    /// runs several commands through the library, the largest of any so far.
    pub peak_memory_bytes: u64,
    /// The most processes and threads of the tree at once: `null` without a
    /// cgroup to count them.
    pub max_pids: Option<u64>,
    /// Where the figures come from: `getrusage(RUSAGE_CHILDREN)`, or for
    /// a run with limits, the cgroup files read per figure (`cpu:
    /// cgroup-v2 cpu.stat; memory: cgroup-v1 memory.max_usage_in_bytes
    /// (the tree's sum); pids: cgroup-v1 pids.peak`).
    pub source: String,
}

/// `RUSAGE_CHILDREN` of this process: (user µs, system µs, max RSS bytes).
pub(crate) fn children_usage() -> (u64, u64, u64) {
    // SAFETY: getrusage fills the struct we own.
    let mut u: nix::libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { nix::libc::getrusage(nix::libc::RUSAGE_CHILDREN, &mut u) } != 0 {
        return (0, 0, 0);
    }
    let us = |t: nix::libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    (us(u.ru_utime), us(u.ru_stime), u.ru_maxrss as u64 * 1024)
}

impl Resources {
    /// The usage since `before` ([`children_usage`] taken before the spawn).
    pub(crate) fn since(before: (u64, u64, u64)) -> Resources {
        let now = children_usage();
        Resources {
            cpu_user_ms: now.0.saturating_sub(before.0) / 1000,
            cpu_system_ms: now.1.saturating_sub(before.1) / 1000,
            peak_memory_bytes: now.2,
            max_pids: None,
            source: "getrusage(RUSAGE_CHILDREN)".into(),
        }
    }
}

/// The JSON Schema (draft 2020-12) of the `--json` result, generated from
/// [`RunResult`]; committed as `schema/run-result.schema.json`.
///
/// Every field is always present (`null` when it has no value), except the
/// ones serde skips when empty (`aborted_by`, `spill_error`, `capped`,
/// `live_dropped_bytes`, `protected_changes`, a stream's `head` and
/// `render`, and the `network_*` facts of an allow-list); schemars leaves `Option` fields out of `required`, so
/// they are put back here.
pub fn json_schema() -> serde_json::Value {
    const SOMETIMES: [&str; 16] = [
        "limits",
        "not_enforced",
        "spill_truncated",
        "spill_dropped_bytes",
        "head",
        "render",
        "aborted_by",
        "spill_error",
        "capped",
        "live_dropped_bytes",
        "protected_changes",
        "network_allow",
        "network_proxy",
        "network_denials",
        "network_denials_more",
        "network_allowed",
    ];
    let mut schema = serde_json::to_value(schemars::schema_for!(RunResult)).unwrap_or_default();
    let require_all = |obj: &mut serde_json::Value| {
        let names: Vec<serde_json::Value> = obj["properties"]
            .as_object()
            .map(|p| {
                p.keys()
                    .filter(|k| !SOMETIMES.contains(&k.as_str()))
                    .cloned()
            })
            .into_iter()
            .flatten()
            .map(serde_json::Value::String)
            .collect();
        obj["required"] = serde_json::Value::Array(names);
    };
    require_all(&mut schema);
    if let Some(defs) = schema.get_mut("$defs").and_then(|d| d.as_object_mut()) {
        for def in defs.values_mut() {
            require_all(def);
        }
    }
    schema
}

impl RunResult {
    /// The exit status `dsh-exec` exits with, following `timeout(1)`:
    /// [`exit::INFRASTRUCTURE`] when the sandbox runner failed (nothing ran),
    /// [`exit::TIMEOUT`] when timed out, 128+S when aborted by signal S,
    /// otherwise the command's exit code, or 128+S when the command was
    /// killed by signal S. A run that never spawned (its deadline passed
    /// during preparation) has neither code nor signal: [`exit::TIMEOUT`].
    pub fn exit_status(&self) -> i32 {
        if self.sandbox.as_ref().is_some_and(|s| s.runner_failed) {
            return exit::INFRASTRUCTURE;
        }
        if self.timed_out {
            return exit::TIMEOUT;
        }
        if let Some(sig) = self.aborted_by {
            return exit::SIGNAL_BASE + sig.number();
        }
        match (self.exit_code, self.signal) {
            (Some(code), _) => code,
            (None, Some(sig)) => exit::SIGNAL_BASE + sig.number(),
            (None, None) => exit::TIMEOUT,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_names_round_trip() {
        for n in 1..=64 {
            let sig = Signal::from_number(n);
            assert_eq!(Signal::from_name(&sig.name()), Some(sig), "{n}");
        }
        assert_eq!(Signal::SIGKILL.name(), "SIGKILL");
        assert_eq!(Signal::from_number(11).name(), "SIGSEGV");
        assert_eq!(
            serde_json::to_string(&Signal::SIGTERM).unwrap(),
            "\"SIGTERM\""
        );
    }
}
