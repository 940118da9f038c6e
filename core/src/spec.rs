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

use crate::sandbox::Policy;
use std::ffi::OsString;

pub use crate::origin::{Origin, Sourced};

/// How the result's text fields are rendered (`--render`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Render {
    /// The bytes as the command wrote them (invalid UTF-8 replaced).
    #[default]
    Raw,
    /// Terminal effects applied, escape sequences removed (`render::plain`).
    Plain,
}

impl Render {
    /// `raw` or `plain`.
    pub fn as_str(self) -> &'static str {
        match self {
            Render::Raw => "raw",
            Render::Plain => "plain",
        }
    }
}

impl std::str::FromStr for Render {
    type Err = String;

    /// Parses `raw` or `plain`; errors with a message naming them.
    fn from_str(s: &str) -> Result<Render, String> {
        match s {
            "raw" => Ok(Render::Raw),
            "plain" => Ok(Render::Plain),
            _ => Err(format!("invalid render '{s}' (raw or plain)")),
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

/// What a terminal is shown of the command's output, where `dsh-exec`'s
/// stdout or stderr is one: the text result (stdout, the `[stderr]`
/// section) and `--stream`'s live copy. The JSON result and the spill
/// files are exact whatever this says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnTerminal {
    /// Control sequences shown, not obeyed (`\x1b]0;title\x07`): the
    /// default, so that output cannot drive a human's terminal
    /// ([`crate::render::terminal`]). SGR colours kept when `colours`
    /// (`--color`, `NO_COLOR`), removed otherwise.
    Escaped {
        /// SGR colours are kept.
        colours: bool,
    },
    /// The text exactly as captured: `--render raw` given (on the command
    /// line or in the configuration file), and wherever the output is no
    /// terminal.
    Exact,
}

impl Default for OnTerminal {
    fn default() -> OnTerminal {
        OnTerminal::Escaped { colours: true }
    }
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
    /// `--idle-timeout`: how long stdout and stderr may both stay silent
    /// while the command runs before the run is ended as at the deadline
    /// (SIGTERM, grace, SIGKILL); `None` is no idle deadline.
    pub idle_timeout: Sourced<Option<Duration>>,
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
    pub signal: Sourced<crate::signal::Signal>,
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
    pub render: Sourced<Render>,
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
    /// What a terminal is shown of the output (the text result, the live
    /// copy) where this process's stdout or stderr is one.
    #[serde(default)]
    pub on_terminal: OnTerminal,
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
    /// `--output-files`: the command writes its stdout and stderr into
    /// unnamed files itself instead of pipes, where no limit forbids it
    /// (see `crate::capture`, "Output the command writes itself").
    pub output_files: bool,
    /// The values of `--credential` (never serialized: the job handoff
    /// carries them after the spec; see [`crate::net::inject`]).
    #[serde(skip)]
    pub secrets: crate::net::inject::Secrets,
}

impl Spec {
    /// Why the output goes through pipes although `--output-files` asked
    /// for files, given `has_room` (whether the spill directory's file
    /// system has that many bytes free): `None` where the limits and the
    /// room allow files. A file-size limit (RLIMIT_FSIZE) would count a
    /// file; a memory limit's cgroup would be charged its page cache; a
    /// full disk would meet the command itself, so the spill cap and
    /// [`crate::capture::CAP_SLACK`] must fit.
    pub(crate) fn output_files_refusal(
        &self,
        has_room: impl FnOnce(u64) -> bool,
    ) -> Option<&'static str> {
        if self.idle_timeout.value.is_some() {
            Some("--idle-timeout watches the output as it comes, through pipes")
        } else if self.file_size_max.value.is_some() {
            Some("--file-size-max (RLIMIT_FSIZE) would count a file")
        } else if self.memory_max.value.is_some() {
            Some("--memory-max would be charged the output's page cache")
        } else if !has_room(
            self.spill_max_bytes
                .value
                .saturating_add(crate::capture::CAP_SLACK),
        ) {
            Some(
                "the spill directory's file system has less free than --spill-max-bytes and \
                 64 MiB (or cannot be used)",
            )
        } else {
            None
        }
    }

    /// The limits this spec sets, as [`crate::limits`] takes them.
    pub(crate) fn limits_asked(&self) -> crate::limits::Wanted {
        crate::limits::Wanted {
            tree: crate::limits::Asked {
                memory_max: self.memory_max.value,
                pids_max: self.pids_max.value,
                cpu_max: self.cpu_max.value,
            },
            file_size_max: self.file_size_max.value,
            best_effort: self.limits.value == crate::limits::LimitMode::BestEffort,
            capped: [
                self.memory_max.capped.is_some(),
                self.pids_max.capped.is_some(),
                self.cpu_max.capped.is_some(),
            ],
        }
    }

    /// The names scrubbed from the command's environment, sorted (the
    /// result's `env_scrubbed`).
    /// A name passed back with `-e NAME` is not listed: the command got it.
    pub fn env_scrubbed(&self) -> Vec<String> {
        let passed = |n: &std::ffi::OsString| {
            self.env
                .settings
                .iter()
                .any(|s| s.layer == Layer::Explicit && n == s.name.as_str())
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

fn default_render() -> Sourced<Render> {
    Sourced::pick(None, None, Render::default)
}

fn default_signal() -> Sourced<crate::signal::Signal> {
    Sourced::pick(None, None, || crate::signal::Signal::SIGTERM)
}

fn default_spill_max() -> Sourced<u64> {
    Sourced::pick(None, None, || DEFAULT_SPILL_MAX_BYTES)
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

/// Lowers a budget to its cap, noting it.
/// The cap per spill file when nothing sets one: 4 GiB. A command cannot
/// make `dsh-exec` fill the disk; past the cap the spill file stops
/// growing, the tail goes on, and the result says how much was dropped.
pub const DEFAULT_SPILL_MAX_BYTES: u64 = 4 << 30;

/// Which ambient variables reach the child (`--env-policy`, config key
/// `env_policy`), as Codex's `shell_environment_policy` has it.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum EnvPolicy {
    /// Everything but what [`scrub_rule`](crate::request::env::scrub_rule) catches (the default).
    #[default]
    Inherit,
    /// Only [`CORE_NAMES`](crate::request::env::CORE_NAMES) and `LC_*`.
    Core,
    /// Nothing ambient.
    None,
}

/// Which layer set a variable in the child environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Layer {
    /// Layer 2, a non-interactive override.
    Override,
    /// Layer 3, an explicit `--env` entry.
    Explicit,
    /// Layer 4, a managed `--dsh-env` entry.
    Managed,
}

/// A variable that one of layers 2 to 4 sets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvSetting {
    /// The variable name.
    pub name: String,
    /// Its value.
    pub value: OsString,
    /// The layer that sets it.
    pub layer: Layer,
}

/// The resolved plan for the child environment: what is inherited, what was
/// scrubbed, and what each later layer sets.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvPlan {
    /// Layer 1: ambient variables that survive the scrub, in ambient order.
    pub inherited: Vec<(OsString, OsString)>,
    /// Ambient names removed by the scrub (credential-shaped or `DSH_*`), sorted.
    pub scrubbed: Vec<OsString>,
    /// The rule that caught each of `scrubbed`, in the same order
    /// ([`scrub_rule`](crate::request::env::scrub_rule); `control socket` for [`CONTROL_SOCKETS`](crate::request::env::CONTROL_SOCKETS)).
    #[serde(default)]
    pub scrub_rules: Vec<String>,
    /// The policy (`--env-policy`).
    #[serde(default)]
    pub policy: EnvPolicy,
    /// How many ambient variables the policy left out (`core`, `none`),
    /// besides the scrub.
    #[serde(default)]
    pub policy_dropped: usize,
    /// Layers 2 to 4 in merge order; a later entry for the same name wins.
    pub settings: Vec<EnvSetting>,
    /// `--env KEY` names that had no ambient value and so set nothing.
    pub missing_pass_through: Vec<String>,
}
