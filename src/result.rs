//! The outcome of one run, as independent facts.
//!
//! `exit_code`, `signal`, `timed_out` and `aborted` are separate fields: a
//! command can time out and still exit 0 (it trapped SIGTERM), and a caller
//! must never read a cut-short run as a clean success. The JSON form
//! (`--json`) is this type serialized with serde.

use std::path::PathBuf;

use nix::sys::signal::Signal;
use serde::{Deserialize, Serialize};

use crate::output::CollectedOutput;

/// Exit status of `dsh-exec` when the deadline passed (as `timeout(1)`).
pub const TIMEOUT_EXIT_STATUS: i32 = 124;

/// Sandbox facts of a run (present only when a sandbox mode was asked for).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct SandboxFacts {
    /// `read-only`, `workspace-write` or `full-access`.
    pub mode: String,
    /// True when the command failed and its output shows a denied write.
    pub denied: bool,
    /// `full` or `partial`: how completely the kernel enforced the mode.
    pub enforcement: String,
    /// True when confining the child failed after fork (the command never ran).
    pub runner_failed: bool,
    /// `allow` or `deny`.
    pub network: String,
    /// `full` when IPv4/IPv6 sockets are refused, `none` when allowed.
    pub network_enforcement: String,
}

/// The outcome of one run: the `--json` object of `dsh-exec`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct RunResult {
    /// The script given to `bash -c`.
    pub command: String,
    /// The absolute working directory.
    #[serde(serialize_with = "crate::lossy::path")]
    pub workdir: PathBuf,
    /// Exit code of `bash`; `null` when it died from a signal.
    pub exit_code: Option<i32>,
    /// Name of the signal that killed `bash` (e.g. `SIGKILL`); `null` on a normal exit.
    pub signal: Option<String>,
    /// True when the deadline was the first cause to cut the run short.
    pub timed_out: bool,
    /// True when a signal sent to `dsh-exec` was the first cause to cut the run short.
    pub aborted: bool,
    /// The signal `dsh-exec` received when `aborted` (e.g. `SIGINT`); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aborted_by: Option<String>,
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
}

/// The JSON Schema (draft 2020-12) of the `--json` result, generated from
/// [`RunResult`]; committed as `schema/run-result.schema.json`.
///
/// Every field is always present (`null` when it has no value), except the
/// ones serde skips when empty (`aborted_by`, `spill_error`, `capped`); schemars
/// leaves `Option` fields out of `required`, so they are put back here.
pub fn json_schema() -> serde_json::Value {
    const SOMETIMES: [&str; 3] = ["aborted_by", "spill_error", "capped"];
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
    /// 125 when the sandbox runner failed (nothing ran), 124 when timed out, 128+S when aborted by signal S, otherwise the
    /// command's exit code, or 128+S when the command was killed by signal S.
    pub fn exit_status(&self) -> i32 {
        if self.sandbox.as_ref().is_some_and(|s| s.runner_failed) {
            return crate::error::INFRASTRUCTURE_EXIT_STATUS;
        }
        if self.timed_out {
            return TIMEOUT_EXIT_STATUS;
        }
        if let Some(n) = self.aborted_by.as_deref().and_then(signal_number) {
            return 128 + n;
        }
        match (
            self.exit_code,
            self.signal.as_deref().and_then(signal_number),
        ) {
            (Some(code), _) => code,
            (None, Some(n)) => 128 + n,
            (None, None) => TIMEOUT_EXIT_STATUS,
        }
    }
}

/// The conventional name of signal number `n`: `SIGKILL`, `SIGRTMIN+2`, or
/// `SIG<n>` for a number with no name (signal(7)).
pub fn signal_name(n: i32) -> String {
    if let Ok(sig) = Signal::try_from(n) {
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

/// The number of a signal name produced by [`signal_name`].
pub fn signal_number(name: &str) -> Option<i32> {
    if let Ok(sig) = name.parse::<Signal>() {
        return Some(sig as i32);
    }
    if name == "SIGRTMIN" {
        return Some(nix::libc::SIGRTMIN());
    }
    if let Some(k) = name.strip_prefix("SIGRTMIN+") {
        return k.parse::<i32>().ok().map(|k| nix::libc::SIGRTMIN() + k);
    }
    name.strip_prefix("SIG")?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_names_round_trip() {
        for n in 1..=64 {
            assert_eq!(signal_number(&signal_name(n)), Some(n), "{n}");
        }
        assert_eq!(signal_name(9), "SIGKILL");
        assert_eq!(signal_name(11), "SIGSEGV");
    }
}
