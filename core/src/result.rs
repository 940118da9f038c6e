//! The outcome of one run, as independent typed facts, and the exit status
//! `dsh-exec` derives from it.
//!
//! `exit_code`, `signal`, `timed_out` and `aborted` are separate fields: a
//! command can time out and still exit 0 (it trapped SIGTERM), and a caller
//! must never read a cut-short run as a clean success. The JSON form
//! (`--json`) is this type serialized with serde; its schema is
//! [`json_schema`].

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use crate::exit;
pub use crate::limits::Resources;
pub use crate::signal::Signal;

use crate::capture::CollectedOutput;
pub use crate::sandbox::{EnforcementLevel, NetworkEnforcement, ProtectedChangeFact, SandboxFacts};

/// Which deadline ended a run ([`RunResult::timeout_kind`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TimeoutKind {
    /// `--timeout`: the run's deadline from its start.
    Deadline,
    /// `--idle-timeout`: no byte on stdout or stderr for that long while
    /// the command ran.
    Idle,
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
    /// True when the deadline, or the idle deadline, was the first cause to
    /// cut the run short.
    pub timed_out: bool,
    /// Which deadline ended a timed-out run: `deadline` (`--timeout`) or
    /// `idle` (`--idle-timeout`: stdout and stderr stayed silent that
    /// long); absent when `timed_out` is false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_kind: Option<TimeoutKind>,
    /// True when a signal sent to `dsh-exec` was the first cause to cut the run short.
    pub aborted: bool,
    /// The signal `dsh-exec` received when `aborted` (e.g. `SIGINT`); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub aborted_by: Option<Signal>,
    /// The deadline applied, in milliseconds; `null` for no deadline.
    pub timeout_ms: Option<u64>,
    /// The idle deadline applied (`--idle-timeout`), in milliseconds;
    /// absent when there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_timeout_ms: Option<u64>,
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
    /// The run's transaction (`--transaction`): its id, where it stands,
    /// and every change the command made under the overlaid roots; absent
    /// without a transaction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transaction: Option<crate::transaction::TransactionFacts>,
}

/// The JSON Schema (draft 2020-12) of the `--json` result, generated from
/// [`RunResult`]; committed as `schema/run-result.schema.json`.
///
/// Every field is always present (`null` when it has no value), except the
/// ones serde skips when empty (`aborted_by`, `spill_error`, `capped`,
/// `transaction` and a change's `what`,
/// `live_dropped_bytes`, `protected_changes`, `denials_source` outside the
/// confining modes, a stream's `head` and
/// `render`, and the `network_*` facts of an allow-list); schemars leaves `Option` fields out of `required`, so
/// they are put back here.
pub fn json_schema() -> serde_json::Value {
    schema_of::<RunResult>(&[])
}

/// The fields of [`RunResult`] and its parts that are absent when empty
/// (see [`json_schema`]).
const SOMETIMES: [&str; 23] = [
    "limits",
    "transaction",
    "what",
    "timeout_kind",
    "idle_timeout_ms",
    "denials_source",
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
    "credentials_used",
    "credentials_missed",
];

/// The JSON Schema of `T` with every property required but those serde
/// may leave out: [`RunResult`]'s sometimes-absent fields and `also`
/// (schemars leaves `Option` fields out of `required`; here they are
/// always present, `null` when empty). Applies to the root and every
/// definition that has properties.
pub(crate) fn schema_of<T: schemars::JsonSchema>(also: &[&str]) -> serde_json::Value {
    let mut schema = serde_json::to_value(schemars::schema_for!(T)).unwrap_or_default();
    let require_all = |obj: &mut serde_json::Value| {
        let Some(props) = obj.get("properties").and_then(|p| p.as_object()) else {
            return;
        };
        let names: Vec<serde_json::Value> = props
            .keys()
            .filter(|k| !SOMETIMES.contains(&k.as_str()) && !also.contains(&k.as_str()))
            .cloned()
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
