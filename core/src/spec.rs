//! The spec: a fully resolved run, every value explicit and carrying its
//! origin.
//!
//! [`crate::resolve`] builds it from a [`crate::Request`]; nothing downstream
//! re-defaults. It is `Serialize + Deserialize` so that one process can hand
//! it to another exactly (a background job's supervisor receives it over a
//! pipe, never as arguments), paths byte for byte.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::request::env::EnvPlan;
use crate::sandbox::Policy;

/// Where a resolved value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// A command-line flag (or a library caller's explicit value).
    Flag,
    /// The configuration file (its path is [`Spec::config_file`]).
    Config,
    /// A built-in default.
    Default,
}

impl Origin {
    /// `flag`, `config` or `default`.
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Flag => "flag",
            Origin::Config => "config",
            Origin::Default => "default",
        }
    }
}

/// A resolved value and its origin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sourced<T> {
    /// The value.
    pub value: T,
    /// Where it came from.
    pub origin: Origin,
    /// Set when a cap of the configuration file lowered the value: what was
    /// asked for and which cap applied, e.g. `2h capped at 1h`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capped: Option<String>,
}

impl<T> Sourced<T> {
    /// Flag over config file over built-in default.
    pub(crate) fn pick(flag: Option<T>, config: Option<T>, default: impl FnOnce() -> T) -> Self {
        let (value, origin) = match (flag, config) {
            (Some(v), _) => (v, Origin::Flag),
            (None, Some(v)) => (v, Origin::Config),
            (None, None) => (default(), Origin::Default),
        };
        Sourced {
            value,
            origin,
            capped: None,
        }
    }
}

/// Where the command's stdin comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "path")]
pub enum StdinSource {
    /// A pipe closed at once: the command reads end-of-file.
    Closed,
    /// The bytes of this file, then end-of-file.
    File(#[serde(with = "crate::serde_paths::exact_path")] PathBuf),
    /// The bytes of `dsh-exec`'s own stdin (`--stdin-file -`), then end-of-file.
    Inherited,
    /// A pipe kept open for a background job (`--stdin pipe`): `job write`
    /// appends to it, `job write --close` closes it.
    Pipe,
    /// These bytes, then end-of-file (an MCP `run` call's `stdin` text).
    Text(String),
}

/// Where `--stream` copies the command's output as it is produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LiveOutput {
    /// stdout to this process's stdout, stderr to its stderr.
    Mirrored,
    /// Both to this process's stderr (stdout carries the JSON result).
    Stderr,
}

/// A fully resolved run: every value explicit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spec {
    /// The script given to `bash -c`.
    pub script: String,
    /// Absolute working directory (not yet checked: preparing the run does that).
    #[serde(with = "crate::serde_paths::exact_sourced_path")]
    pub workdir: Sourced<PathBuf>,
    /// Deadline from the start of the run; `None` is no deadline.
    pub timeout: Sourced<Option<Duration>>,
    /// Grace period between SIGTERM and SIGKILL.
    pub kill_after: Sourced<Duration>,
    /// Tail budget of stdout, in bytes.
    pub stdout_max_bytes: Sourced<u64>,
    /// Tail budget of stderr, in bytes.
    pub stderr_max_bytes: Sourced<u64>,
    /// The configuration file's `prune_spill_after`: spill directories
    /// unchanged for this long are pruned when a run or job starts.
    #[serde(default)]
    pub prune_spill_after: Option<Duration>,
    /// The first signal of the escalation (`--signal`; SIGTERM).
    #[serde(default = "default_signal")]
    pub signal: Sourced<crate::result::Signal>,
    /// RLIMIT_FSIZE of the command, in bytes (`--file-size-max`); `None`:
    /// as inherited.
    #[serde(default = "default_file_size")]
    pub file_size_max: Sourced<Option<u64>>,
    /// The whole tree's memory, in bytes (`--memory-max`); `None`: unlimited.
    #[serde(default = "default_unlimited")]
    pub memory_max: Sourced<Option<u64>>,
    /// Processes and threads of the tree at once (`--pids-max`); `None`:
    /// unlimited.
    #[serde(default = "default_unlimited")]
    pub pids_max: Sourced<Option<u64>>,
    /// CPU time of the whole tree (`--cpu-max`); `None`: unlimited.
    #[serde(default = "default_unlimited")]
    pub cpu_max: Sourced<Option<Duration>>,
    /// What a limit that cannot be enforced does (`--limits`; strict).
    #[serde(default = "default_limits")]
    pub limits: Sourced<crate::limits::LimitMode>,
    /// The cap per spill file, in bytes (`--spill-max-bytes`; 4 GiB).
    #[serde(default = "default_spill_max")]
    pub spill_max_bytes: Sourced<u64>,
    /// Which part of an outgrown stream the result keeps (`--keep`).
    #[serde(default = "default_keep")]
    pub keep: Sourced<crate::capture::Keep>,
    /// How the result's text fields are rendered (`--render`).
    #[serde(default = "default_render")]
    pub render: Sourced<crate::render::plain::Render>,
    /// Where stdin comes from.
    pub stdin: Sourced<StdinSource>,
    /// Parent directory of the run's private spill directory (absolute).
    #[serde(with = "crate::serde_paths::exact_sourced_path")]
    pub spill_dir: Sourced<PathBuf>,
    /// Where the spill directory goes when the default `spill_dir`
    /// (`STATE/spill`) cannot be created (a read-only home): the temp dir.
    /// `None` when `spill_dir` was given or is the temp dir already.
    #[serde(default, with = "crate::serde_paths::exact_opt_path")]
    pub spill_fallback: Option<PathBuf>,
    /// The child environment plan.
    pub env: EnvPlan,
    /// The sandbox policy; `None` when neither `--sandbox` nor `--network`
    /// was given.
    pub sandbox: Option<Policy>,
    /// The command gets this terminal (stdin, stdout, stderr, foreground
    /// process group); its output is not captured.
    pub interactive: bool,
    /// Copy the output live (`--stream`), besides capturing it.
    pub stream: Option<LiveOutput>,
    /// The configuration file that supplied defaults or caps, if any.
    #[serde(with = "crate::serde_paths::exact_opt_path")]
    pub config_file: Option<PathBuf>,
    /// Run the command as the init of a new PID namespace (background jobs,
    /// when privileged): the kernel then ends the whole tree with it.
    pub pid_namespace: bool,
    /// Run the command on a new pseudo-terminal (`--pty`, background jobs):
    /// its output is the terminal's, stderr merged; `job write` types.
    #[serde(default)]
    pub pty: bool,
}

impl Spec {
    /// The names scrubbed from the command's environment, sorted (the
    /// result's `env_scrubbed`).
    /// A name passed back with `-e NAME` is not listed: the command got it.
    pub fn env_scrubbed(&self) -> Vec<String> {
        let passed = |n: &std::ffi::OsString| {
            self.env
                .settings
                .iter()
                .any(|s| s.layer == crate::request::env::Layer::Explicit && n == s.name.as_str())
        };
        self.env
            .scrubbed
            .iter()
            .filter(|n| !passed(n))
            .map(|n| n.to_string_lossy().into_owned())
            .collect()
    }

    /// One line per value given by a flag or the configuration file that a
    /// cap lowered, e.g.
    /// `timeout 2h capped at 1h by /home/u/.config/dsh-exec/config.toml`.
    /// A built-in default above a cap is lowered silently (`explain` still
    /// shows it): nobody asked for it.
    pub fn capped_notes(&self) -> Vec<String> {
        let by = self
            .config_file
            .as_ref()
            .map(|p| format!(" by {}", p.display()))
            .unwrap_or_default();
        let asked = |origin: Origin, capped: &Option<String>| match origin {
            Origin::Default => None,
            _ => capped.clone(),
        };
        [
            ("timeout", asked(self.timeout.origin, &self.timeout.capped)),
            (
                "stdout-max-bytes",
                asked(self.stdout_max_bytes.origin, &self.stdout_max_bytes.capped),
            ),
            (
                "stderr-max-bytes",
                asked(self.stderr_max_bytes.origin, &self.stderr_max_bytes.capped),
            ),
            (
                "spill-max-bytes",
                asked(self.spill_max_bytes.origin, &self.spill_max_bytes.capped),
            ),
            (
                "memory-max",
                asked(self.memory_max.origin, &self.memory_max.capped),
            ),
            (
                "pids-max",
                asked(self.pids_max.origin, &self.pids_max.capped),
            ),
            ("cpu-max", asked(self.cpu_max.origin, &self.cpu_max.capped)),
            (
                "file-size-max",
                asked(self.file_size_max.origin, &self.file_size_max.capped),
            ),
        ]
        .into_iter()
        .filter_map(|(name, capped)| capped.map(|c| format!("{name} {c}{by}")))
        .collect()
    }
}

fn default_keep() -> Sourced<crate::capture::Keep> {
    Sourced::pick(None, None, crate::capture::Keep::default)
}

fn default_render() -> Sourced<crate::render::plain::Render> {
    Sourced::pick(None, None, crate::render::plain::Render::default)
}

fn default_signal() -> Sourced<crate::result::Signal> {
    Sourced::pick(None, None, || crate::result::Signal::SIGTERM)
}

fn default_spill_max() -> Sourced<u64> {
    Sourced::pick(None, None, || crate::request::DEFAULT_SPILL_MAX_BYTES)
}

fn default_file_size() -> Sourced<Option<u64>> {
    Sourced::pick(None, None, || None)
}

fn default_unlimited<T>() -> Sourced<Option<T>> {
    Sourced::pick(None, None, || None)
}

fn default_limits() -> Sourced<crate::limits::LimitMode> {
    Sourced::pick(None, None, Default::default)
}
