//! `dsh-exec explain`: the resolved spec, each value with its origin, the
//! child environment changes, and the sandbox as it would be applied (the
//! writable roots opened as a run would open them). Runs nothing; values of
//! credential-shaped names are masked.
//!
//! The JSON form (`explain --json`) is [`Explanation`], built by
//! [`explanation`] and serialized with serde; its schema is
//! [`explain_schema`].

use std::collections::BTreeMap;

use owo_colors::OwoColorize;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::text::one_line;
use crate::capture::Keep;
use crate::limits::{LimitKind, LimitMode};
use crate::net::rules::HostRule;
use crate::request::env::{EnvPolicy, Layer, display_value};
use crate::request::shell::find_shell;
use crate::sandbox::landlock::enforcement;
use crate::sandbox::{EnforcementLevel, Network, NetworkEnforcement};
use crate::signal::Signal;
use crate::spec::Render;
use crate::units::{format_duration, format_size};
use std::path::PathBuf;

use crate::sandbox::protect::Protection;
use crate::sandbox::{self, Mode, Policy, Roots, kernel_abi, open_roots};
use crate::spec::{Origin, Sourced, Spec, StdinSource};

/// The explanation of a spec: the `explain --json` object of `dsh-exec`.
/// Nothing is run to make it; values of credential-shaped names are
/// masked. Every field is always present (`null` when it has no value).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Explanation {
    /// The script given to `bash -c`.
    pub command: String,
    /// The configuration file that supplied defaults or caps; `null` when
    /// none was read.
    pub config_file: Option<String>,
    /// The `bash` that would run the command: the first executable one on
    /// the child environment's `PATH`; `null` when there is none.
    pub shell: Option<String>,
    /// The absolute working directory.
    pub workdir: SourcedValue<String>,
    /// The deadline, in milliseconds; value `null` for no deadline.
    pub timeout_ms: SourcedValue<Option<u64>>,
    /// The grace period between the first signal and SIGKILL, in
    /// milliseconds.
    pub kill_after_ms: SourcedValue<u64>,
    /// The idle deadline (`--idle-timeout`), in milliseconds; value `null`
    /// for none.
    pub idle_timeout_ms: SourcedValue<Option<u64>>,
    /// The first signal sent at the deadline or on an abort, by name
    /// (e.g. `SIGTERM`).
    #[schemars(with = "SourcedValue<String>")]
    pub signal: SourcedValue<Signal>,
    /// The budget of stdout kept in the result, in bytes.
    pub stdout_max_bytes: SourcedValue<u64>,
    /// The budget of stderr kept in the result, in bytes.
    pub stderr_max_bytes: SourcedValue<u64>,
    /// The largest file the command may write (RLIMIT_FSIZE), in bytes;
    /// value `null`: as inherited.
    pub file_size_max_bytes: SourcedValue<Option<u64>>,
    /// The whole tree's memory (cgroup `memory.max`), in bytes; value
    /// `null`: unlimited.
    pub memory_max_bytes: SourcedValue<Option<u64>>,
    /// Processes and threads of the tree at once (cgroup `pids.max`);
    /// value `null`: unlimited.
    pub pids_max: SourcedValue<Option<u64>>,
    /// CPU time of the whole tree, in milliseconds; value `null`:
    /// unlimited.
    pub cpu_max_ms: SourcedValue<Option<u64>>,
    /// What a limit that cannot be enforced does: `strict` or
    /// `best-effort`.
    pub limits: SourcedValue<LimitMode>,
    /// How each tree limit that is set would be enforced, by limit
    /// (`memory`, `pids`, `cpu`); empty when none is set.
    #[schemars(schema_with = "limit_mechanisms_schema")]
    pub limit_mechanisms: BTreeMap<LimitKind, LimitMechanism>,
    /// How the run's whole tree is held for the kill.
    pub containment: ExplainedContainment,
    /// Where the command's stdout and stderr go while it runs: `pipes`
    /// (read by `dsh-exec`), or `files` (`--output-files`: unnamed files
    /// the command writes itself, where the spill directory's file system
    /// can make them).
    pub output: String,
    /// The most bytes one spill file holds.
    pub spill_max_bytes: SourcedValue<u64>,
    /// Which part of a stream that outgrew its budget is kept: `tail`,
    /// `head` or `head+tail`.
    pub keep: SourcedValue<Keep>,
    /// How the result's text fields are rendered: `raw` or `plain`.
    pub render: SourcedValue<Render>,
    /// The configuration file's `prune_spill_after`, in milliseconds:
    /// spill directories unchanged for this long are pruned at each start;
    /// `null` when not set.
    pub prune_spill_after_ms: Option<u64>,
    /// Where the command's stdin comes from.
    pub stdin: SourcedValue<ExplainedStdin>,
    /// The parent directory of the run's private spill directory, as
    /// resolved (see `sandbox.spill_dir` for where a confined run puts it).
    pub spill_dir: SourcedValue<String>,
    /// The child environment: what is inherited, scrubbed and set.
    pub environment: ExplainedEnvironment,
    /// The sandbox as it would be applied; `null` when neither `--sandbox`
    /// nor `--network` was given.
    pub sandbox: Option<ExplainedSandbox>,
}

/// A run's transaction as `explain` sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ExplainedTransaction {
    /// Whether `--transaction` (or `transaction = true`) was given.
    pub asked: bool,
    /// What happens when the run ends (`--on-exit`); `null` when not asked.
    pub on_exit: Option<SourcedValue<crate::sandbox::overlay::OnExit>>,
    /// Whether a transaction can run here.
    pub available: bool,
    /// The roots it overlays, or why none can be (a transaction then
    /// fails closed with `SANDBOX_UNAVAILABLE`).
    pub detail: String,
}

/// How a run's tree is held for the kill (docs/run.md, "The process
/// tree").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ExplainedContainment {
    /// `cgroup-v2`: a containment cgroup whose `cgroup.kill` reaches every
    /// process of the tree, also one that left the process group, also
    /// after `dsh-exec` itself is killed; `process-group`: no cgroup can
    /// be made (the process group and the subreaper sweep, while
    /// `dsh-exec` lives, and the watchdog's kill of the group after).
    pub mechanism: String,
    /// The directory the run's cgroup is made in
    /// (`…/dsh-exec`, one `run-PIDNS-PID-START-N` per run); `null` for
    /// `process-group`.
    pub cgroup: Option<String>,
    /// What the mechanism holds, or why no cgroup can be made.
    pub detail: String,
}

/// A resolved value with its origin: `{"value", "origin"}`, and `"capped"`
/// when a cap of the configuration file lowered it. The unit of `value` is
/// in the name of the field that holds it (`_ms`, `_bytes`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields, rename = "SourcedValue_{T}")]
pub struct SourcedValue<T> {
    /// The value.
    pub value: T,
    /// Where it came from: `flag`, `config` or `default`.
    pub origin: Origin,
    /// What was asked for and the cap that applied, e.g. `4h capped at
    /// 2h`; absent when no cap lowered the value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capped: Option<String>,
}

/// How one tree limit would be enforced: `{"mechanism", "detail"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct LimitMechanism {
    /// Its name: `cgroup-v2`, `cgroup-v1`, `accounting` (CPU time added up
    /// by `dsh-exec`) or `none` (unavailable here).
    pub mechanism: String,
    /// One line on it (`unavailable: ...` when it cannot be enforced).
    pub detail: String,
}

/// Where the command's stdin comes from, tagged by `kind`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[schemars(deny_unknown_fields)]
pub enum ExplainedStdin {
    /// `{"kind": "closed"}`: the command reads end-of-file at once.
    Closed,
    /// `{"kind": "file", "path"}`: the bytes of this file.
    File {
        /// The file (lossy UTF-8).
        path: String,
    },
    /// `{"kind": "inherited"}`: the bytes of `dsh-exec`'s own stdin
    /// (`--stdin-file -`).
    Inherited,
    /// `{"kind": "pipe"}`: a pipe kept open for `job write` (`--stdin pipe`).
    Pipe,
    /// `{"kind": "text", "bytes"}`: a text given by the caller (an MCP
    /// `run` call's `stdin`).
    Text {
        /// Its length, in bytes.
        bytes: u64,
    },
}

/// The child environment as it would be built.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ExplainedEnvironment {
    /// How many of this process's variables the command inherits.
    pub inherited_count: u64,
    /// The names scrubbed from the inherited variables, sorted (names
    /// only, never values).
    pub scrubbed: Vec<String>,
    /// Each scrubbed name with the rule that caught it, in the order of
    /// `scrubbed`.
    pub scrub_rules: Vec<ScrubbedName>,
    /// Which of this process's variables are inherited: `inherit`, `core`
    /// or `none` (`--env-policy`).
    pub policy: EnvPolicy,
    /// How many variables the policy left out, besides the scrub.
    pub policy_dropped: u64,
    /// The variables the later layers set, in merge order, the last
    /// setting of each name only; credential-shaped values masked.
    pub set: Vec<ExplainedSetting>,
    /// `--env NAME` names that are not set here, so pass nothing.
    pub missing_pass_through: Vec<String>,
}

/// A scrubbed name and the rule that caught it: `{"name", "rule"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ScrubbedName {
    /// The variable's name (lossy UTF-8).
    pub name: String,
    /// The rule, e.g. `name contains TOKEN` or `control socket`.
    pub rule: String,
}

/// A variable a layer sets: `{"name", "value", "layer"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ExplainedSetting {
    /// The variable's name.
    pub name: String,
    /// Its value (lossy UTF-8), or `<masked>` when the name or the value
    /// is credential-shaped.
    pub value: String,
    /// The layer that sets it: `override`, `explicit` (`--env`) or
    /// `managed` (`--dsh-env`).
    pub layer: Layer,
}

/// The sandbox as a run would apply it. Paths are lossy UTF-8. The parts
/// of the confining modes (`gate` to `read_denied`) are `null` in
/// `full-access`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ExplainedSandbox {
    /// Transactions (`--transaction`) in `workspace-write`: asked or not,
    /// whether one can run here and why; `null` in the other modes.
    pub transaction: Option<ExplainedTransaction>,
    /// The calls the gate (seccomp user notification) judges.
    pub gate: Option<ExplainedGate>,
    /// What bounds metadata changes (mode, owner, times, xattrs) to the
    /// writable roots.
    pub metadata: Option<String>,
    /// What the command gets of `/dev/shm`.
    pub shm: Option<String>,
    /// The private scratch directory a run gets (`read-only`,
    /// `--no-temp-write`); `null` when it gets none.
    pub scratch: Option<String>,
    /// Which pathname Unix sockets outside the run the command may connect to.
    pub unix_sockets: Option<ExplainedUnixSockets>,
    /// The paths kept read-only inside the writable roots, and how.
    pub protected: Option<ExplainedProtection>,
    /// The terminals the command may open.
    pub terminals: Option<String>,
    /// The read deny list, and how it is enforced.
    pub read_denied: Option<ExplainedReadDeny>,
    /// The parent directory of the run's spill directory under this
    /// sandbox: the top-level `spill_dir`, or `dsh-exec`'s `STATE/spill`
    /// when a writable root covers that one.
    pub spill_dir: String,
    /// The mode: `read-only`, `workspace-write` or `full-access`.
    pub mode: SourcedValue<Mode>,
    /// The network policy: `allow`, `deny`, `loopback` or `allow-list`.
    pub network: SourcedValue<Network>,
    /// Where the network policy came from, in words: `flag`, `config`, or
    /// the mode's default, `default for MODE` (`loopback` in `read-only`
    /// and `workspace-write`, `allow` in `full-access`).
    pub network_source: String,
    /// The hosts of `--network allow=` (normalized, e.g.
    /// `*.example.org:8443`); empty for the other policies.
    pub network_allow: Vec<HostRule>,
    /// How the network policy is enforced, in one line (`none` for
    /// `allow`).
    pub network_mechanism: String,
    /// Where the allow-list proxy would listen and how the command finds
    /// it; `null` without an allow-list.
    pub network_proxy: Option<String>,
    /// The credentials the proxy would inject (`--credential`, names and
    /// sources, never values), their rules (`--inject`), the phantom
    /// variables (`--credential-env`) and the upstream CA files; `null`
    /// without credentials.
    pub credentials: Option<crate::net::inject::Injection>,
    /// The workspace root, as given.
    pub workspace_root: SourcedValue<String>,
    /// Every directory the command may write under (real paths); empty
    /// outside `workspace-write`.
    pub writable: Vec<String>,
    /// The real temp directory, when it is writable; `null` otherwise.
    pub temp_dir: Option<String>,
    /// The package caches of `--allow-caches`.
    pub caches: Vec<ExplainedCache>,
    /// Writable roots that would be skipped, and why.
    pub skipped: Vec<ExplainedSkip>,
    /// What a careful user wants to know (a writable root reached through
    /// a symlink, a writable root of `/`, ...).
    pub warnings: Vec<String>,
    /// The kernel's Landlock ABI version; `null` when Landlock is
    /// unavailable.
    pub landlock_abi: Option<i32>,
    /// How completely the kernel would enforce the policy, or why it
    /// cannot.
    pub enforcement: ExplainedEnforcement,
}

/// The calls the gate judges: `{"calls", "mechanism"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ExplainedGate {
    /// The trapped calls, in one line.
    pub calls: String,
    /// `seccomp user notification`.
    pub mechanism: String,
}

/// The pathname Unix sockets a confined command may connect to:
/// `{"mechanism", "allowed"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ExplainedUnixSockets {
    /// `gate`.
    pub mechanism: String,
    /// The `--allow-unix-socket` sockets that exist (real paths), besides
    /// the run's own.
    pub allowed: Vec<String>,
}

/// The protected paths: `{"mechanism", "paths", "removed_if_created",
/// "notes"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ExplainedProtection {
    /// How they are kept: read-only bind mounts in a mount namespace, or
    /// restored after the run (without CAP_SYS_ADMIN).
    pub mechanism: String,
    /// The protected paths that exist.
    pub paths: Vec<String>,
    /// The protected paths that do not exist: removed after the run if
    /// created.
    pub removed_if_created: Vec<String>,
    /// A search that stopped early, a path skipped.
    pub notes: Vec<String>,
    /// The files of editors and agents the plan covers (each root, each
    /// repository found, each directory on the way to the workdir, the
    /// home in a writable root), sorted: also in `paths` or
    /// `removed_if_created` unless lifted or a symlink.
    pub agent_files: Vec<ExplainedAgentFile>,
}

/// A file or directory that editors and agents run or obey, inside a
/// writable root: `{"path", "state"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ExplainedAgentFile {
    /// Its path (real, lossy UTF-8).
    pub path: String,
    /// What a run does with it.
    pub state: AgentFileState,
}

/// What a run does with a file of an editor or agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AgentFileState {
    /// It exists and is protected as the other protected paths are
    /// (`mechanism`).
    Protected,
    /// It does not exist: removed after the run if the run makes it.
    RemovedIfCreated,
    /// `--allow-write` (or `allow_write`) lifted it: writable.
    Lifted,
    /// It is a symlink: not protected (see `notes`).
    Symlink,
}

/// What a run does with each of `p`'s files of editors and agents.
fn agent_files(p: &Protection) -> Vec<(PathBuf, AgentFileState)> {
    p.agent_files
        .iter()
        .map(|f| {
            let state = if p.lifted.contains(f) {
                AgentFileState::Lifted
            } else if p.paths().contains(&f.as_path()) {
                AgentFileState::Protected
            } else if p.absent.contains(f) {
                AgentFileState::RemovedIfCreated
            } else {
                AgentFileState::Symlink
            };
            (f.clone(), state)
        })
        .collect()
}

/// The read deny list: `{"mechanism", "paths", "exceptions", "read_roots"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ExplainedReadDeny {
    /// How it is enforced (Landlock), in one line.
    pub mechanism: String,
    /// The entries of the deny list that exist (real paths).
    pub paths: Vec<String>,
    /// Paths readable again inside a denied directory: the built-in
    /// devices and `--allow-read`.
    pub exceptions: Vec<String>,
    /// The `--read-root` paths: when not empty, reads are granted only on
    /// these, the workspace, the writable roots and the system's
    /// directories.
    pub read_roots: Vec<String>,
}

/// A package cache of `--allow-caches`: `{"path", "exists"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ExplainedCache {
    /// The cache directory.
    pub path: String,
    /// False when it would be made before the run (and kept).
    pub exists: bool,
}

/// A writable root that would be skipped: `{"path", "reason"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ExplainedSkip {
    /// The path as given.
    pub path: String,
    /// The operating system's error, or `not a directory`.
    pub reason: String,
}

/// How completely the kernel would enforce the policy: the enforcement,
/// or `{"error"}` when Landlock is unavailable (untagged).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum ExplainedEnforcement {
    /// Landlock is available.
    Landlock(LandlockEnforcement),
    /// Landlock is not: a run would fail closed.
    Unavailable(LandlockUnavailable),
}

/// The enforcement on this kernel: `{"abi", "level", "missing", "network"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct LandlockEnforcement {
    /// The kernel's Landlock ABI version.
    pub abi: i32,
    /// `full`, or `partial` when something the mode relies on is not
    /// enforced.
    pub level: EnforcementLevel,
    /// What the policy would use but is not enforced here, one line each
    /// with the ABI that would enforce it, e.g. `truncate (ABI 3)`.
    pub missing: Vec<String>,
    /// How IPv4/IPv6 networking is restricted: `full`, `gate` or `none`.
    pub network: NetworkEnforcement,
}

/// Why the enforcement cannot be known: `{"error"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct LandlockUnavailable {
    /// The error, e.g. `Landlock is not available in this kernel (ENOSYS)`.
    pub error: String,
}

/// The schema of `limit_mechanisms`: an object whose keys are limit kinds
/// (schemars leaves the keys of a map by an enum of documented variants
/// unconstrained).
fn limit_mechanisms_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let mut schema =
        <BTreeMap<String, LimitMechanism> as schemars::JsonSchema>::json_schema(generator);
    let kinds = generator.subschema_for::<LimitKind>();
    schema.insert("propertyNames".into(), kinds.to_value());
    schema
}

/// The JSON Schema (draft 2020-12) of `explain --json`, generated from
/// [`Explanation`]; committed as `schema/explain.schema.json`.
///
/// Generated for serialization: a field is required unless serde skips it
/// (only `capped`), so the fields that can be `null` are required and
/// allow `null`.
pub fn explain_schema() -> serde_json::Value {
    let generator = schemars::generate::SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator();
    serde_json::to_value(generator.into_root_schema_for::<Explanation>()).unwrap_or_default()
}

fn origin_text(o: Origin) -> &'static str {
    o.as_str()
}

/// Where the command's output goes while it runs, and why: (`pipes` or
/// `files`, the reason).
fn output_mode(spec: &Spec) -> (&'static str, String) {
    if !spec.output_files {
        return (
            "pipes",
            "read by dsh-exec into the budget and the spill files (--output-files: files)".into(),
        );
    }
    // The room of the spill directory the run would use, or its fallback.
    let room = |bytes| {
        std::iter::once(&spec.spill_dir.value)
            .chain(spec.spill_fallback.as_ref())
            .find_map(|p| crate::capture::SpillDir::new(p).ok())
            .is_some_and(|d| d.has_room(bytes))
    };
    match spec.output_files_refusal(room) {
        Some(why) => ("pipes", format!("--output-files asked, but {why}")),
        None => (
            "files",
            "unnamed files the command writes itself, where the spill directory's file system \
             can make them (flag)"
                .into(),
        ),
    }
}

/// `(flag)`, `(config)`, `(default)`, with a cap when one applied:
/// `(flag; 2h capped at 1h)`.
fn note<T>(s: &Sourced<T>) -> String {
    match &s.capped {
        Some(c) => format!("({}; {c})", origin_text(s.origin)),
        None => format!("({})", origin_text(s.origin)),
    }
}

fn layer_text(l: Layer) -> &'static str {
    match l {
        Layer::Override => "override",
        Layer::Explicit => "explicit",
        Layer::Managed => "managed",
    }
}

fn stdin_text(s: &StdinSource) -> String {
    match s {
        StdinSource::Closed => "closed (end-of-file at once)".into(),
        StdinSource::File(p) => format!("file {}", p.display()),
        StdinSource::Inherited => "this process's stdin".into(),
        StdinSource::Pipe => "a pipe kept open for `job write` (--stdin pipe)".into(),
        StdinSource::Text(t) => format!("{} bytes of text", t.len()),
    }
}

fn timeout_text(t: Option<std::time::Duration>) -> String {
    t.map(format_duration).unwrap_or_else(|| "none".into())
}

/// A path as a (lossy) string: JSON cannot hold non-UTF-8 bytes.
fn lossy(p: &std::path::Path) -> String {
    p.to_string_lossy().into_owned()
}

fn explained_stdin(s: &StdinSource) -> ExplainedStdin {
    match s {
        StdinSource::Closed => ExplainedStdin::Closed,
        StdinSource::File(p) => ExplainedStdin::File { path: lossy(p) },
        StdinSource::Inherited => ExplainedStdin::Inherited,
        StdinSource::Pipe => ExplainedStdin::Pipe,
        StdinSource::Text(t) => ExplainedStdin::Text {
            bytes: t.len() as u64,
        },
    }
}

/// `value` with the origin and cap of `s`.
fn sourced<T, U>(s: &Sourced<T>, value: U) -> SourcedValue<U> {
    SourcedValue {
        value,
        origin: s.origin,
        capped: s.capped.clone(),
    }
}

/// Paths as (lossy) strings.
fn lossy_all<'a>(paths: impl IntoIterator<Item = &'a std::path::Path>) -> Vec<String> {
    paths.into_iter().map(lossy).collect()
}

/// How the sandbox of a spec would be applied, as a run would prepare it.
struct Applied {
    roots: Roots,
    protection: Protection,
    mount_namespace: bool,
    read_only_tree: bool,
    spill_dir: (PathBuf, bool),
}

fn applied(spec: &Spec, policy: &Policy) -> Applied {
    let roots = open_roots(policy);
    let protection = sandbox::protection(policy, &roots, &spec.workdir.value);
    let spill_dir = sandbox::spill_parent(policy, &roots, &spec.spill_dir.value);
    Applied {
        roots,
        protection,
        mount_namespace: sandbox::has_mount_namespace(),
        read_only_tree: sandbox::read_only_tree_available(),
        spill_dir,
    }
}

/// The enforcement with what the protected paths lack without a mount
/// namespace, as a run reports it.
fn full_enforcement(policy: &Policy, abi: i32, a: &Applied) -> crate::sandbox::Enforcement {
    let mut e = enforcement(policy, abi);
    if !a.mount_namespace && !a.protection.protected.is_empty() {
        e.missing.push(crate::sandbox::Unenforced::ProtectedPaths);
    }
    e
}

/// What the gate decides, for `explain`: with a read-only mount tree (and
/// not under `-i`) the socket calls and the mode changes that set
/// set-user-ID or set-group-ID; otherwise every metadata change too.
fn gate_calls(spec: &Spec, a: &Applied) -> &'static str {
    if a.read_only_tree && !spec.interactive {
        "connect, sendto, sendmsg, sendmmsg; chmod setting set-user-ID or set-group-ID; xattr"
    } else {
        "connect, sendto, sendmsg, sendmmsg; chmod, chown, utime, xattr"
    }
}

/// What bounds metadata changes (mode, owner, times, xattrs) to the
/// writable roots.
fn metadata_mechanism(spec: &Spec, a: &Applied) -> &'static str {
    match (a.read_only_tree, spec.interactive) {
        (true, false) => "read-only mounts outside the writable roots (EROFS)",
        (true, true) => "the gate (under -i the command holds the caller's descriptors)",
        (false, _) => "the gate (no read-only mount tree without CAP_SYS_ADMIN)",
    }
}

/// The scratch directory a run gets (`read-only`, `--no-temp-write`).
fn scratch(parent: &std::path::Path) -> String {
    format!(
        "a private directory in {}, made for the run (0700) and removed after it; $TMPDIR names it",
        parent.display()
    )
}

/// What the command gets of `/dev/shm` (POSIX shared memory).
fn shm(a: &Applied) -> &'static str {
    if a.mount_namespace {
        "a private tmpfs"
    } else if a.roots.shm_shared {
        "the shared one, writable (no mount namespace without CAP_SYS_ADMIN)"
    } else {
        "the shared one, read-only (no mount namespace without CAP_SYS_ADMIN)"
    }
}

/// How Unix sockets are decided, for `explain`.
const PATHNAME_SOCKETS: &str = "pathname: the run's own sockets (the gate, by sock_diag)";

fn terminals(spec: &Spec, a: &Applied) -> &'static str {
    if spec.interactive {
        "this terminal and /dev/tty only"
    } else if a.mount_namespace {
        "the ones it makes (a private devpts)"
    } else {
        "none (a private devpts needs CAP_SYS_ADMIN)"
    }
}

fn protection_mechanism(a: &Applied) -> &'static str {
    if a.mount_namespace {
        "read-only bind mounts in a mount namespace"
    } else {
        "restored after the run (no mount namespace without CAP_SYS_ADMIN)"
    }
}

/// How the read deny list is enforced: with a mount namespace (CAP_SYS_ADMIN)
/// each denied directory is also hidden under an empty tmpfs.
fn read_deny_mechanism() -> &'static str {
    if crate::sandbox::has_mount_namespace() {
        "Landlock: read granted on every entry beside the way to each denied one; \
         each denied directory hidden under an empty read-only tmpfs (its names are not listable)"
    } else {
        "Landlock: read granted on every entry beside the way to each denied one \
         (names stay listable without a mount namespace; entries made during the run \
         directly in those directories are not readable)"
    }
}

/// The sandbox part of the explanation (`None` without a sandbox).
fn explained_sandbox(spec: &Spec) -> Option<ExplainedSandbox> {
    let policy = spec.sandbox.as_ref()?;
    let a = applied(spec, policy);
    let roots = &a.roots;
    let (landlock_abi, enforcement) = match kernel_abi() {
        Ok(abi) => {
            let e = full_enforcement(policy, abi, &a);
            let explained = LandlockEnforcement {
                abi: e.abi,
                level: e.level(),
                missing: e.missing.iter().map(|m| m.describe()).collect(),
                network: e.network,
            };
            (Some(abi), ExplainedEnforcement::Landlock(explained))
        }
        Err(e) => (
            None,
            ExplainedEnforcement::Unavailable(LandlockUnavailable {
                error: e.to_string(),
            }),
        ),
    };
    let confining = policy.mode.value.confines();
    Some(ExplainedSandbox {
        transaction: (policy.mode.value == Mode::WorkspaceWrite).then(|| {
            let (available, detail) = transaction_detail(policy, roots);
            ExplainedTransaction {
                asked: policy.transaction.is_some(),
                on_exit: policy
                    .transaction
                    .as_ref()
                    .map(|t| sourced(&t.on_exit, t.on_exit.value)),
                available,
                detail,
            }
        }),
        gate: confining.then(|| ExplainedGate {
            calls: gate_calls(spec, &a).into(),
            mechanism: "seccomp user notification".into(),
        }),
        metadata: confining.then(|| metadata_mechanism(spec, &a).into()),
        shm: confining.then(|| shm(&a).into()),
        scratch: policy.scratch_parent.as_deref().map(scratch),
        unix_sockets: confining.then(|| ExplainedUnixSockets {
            mechanism: "gate".into(),
            allowed: lossy_all(roots.unix_sockets.iter().map(|(_, p)| p.as_path())),
        }),
        protected: confining.then(|| ExplainedProtection {
            mechanism: protection_mechanism(&a).into(),
            paths: lossy_all(a.protection.paths()),
            removed_if_created: lossy_all(a.protection.absent.iter().map(|p| p.as_path())),
            notes: a.protection.notes.clone(),
            agent_files: agent_files(&a.protection)
                .into_iter()
                .map(|(path, state)| ExplainedAgentFile {
                    path: lossy(&path),
                    state,
                })
                .collect(),
        }),
        terminals: confining.then(|| terminals(spec, &a).into()),
        read_denied: confining.then(|| ExplainedReadDeny {
            mechanism: read_deny_mechanism().into(),
            paths: lossy_all(roots.read_denied.iter().map(|p| p.as_path())),
            exceptions: lossy_all(roots.read_exceptions.iter().map(|p| p.as_path())),
            read_roots: lossy_all(roots.read_roots.iter().map(|p| p.as_path())),
        }),
        spill_dir: lossy(&a.spill_dir.0),
        mode: sourced(&policy.mode, policy.mode.value),
        network: sourced(&policy.network, policy.network.value),
        network_source: policy.network_source(),
        network_allow: policy.network_allow.clone(),
        network_mechanism: network_mechanism(policy.network.value).into(),
        network_proxy: (policy.network.value == Network::AllowList).then(|| PROXY_WHERE.into()),
        credentials: (!policy.injection.is_empty()).then(|| policy.injection.clone()),
        workspace_root: sourced(&policy.workspace_root, lossy(&policy.workspace_root.value)),
        writable: lossy_all(roots.writable_paths()),
        temp_dir: roots.temp_dir.as_deref().map(lossy),
        caches: policy
            .caches
            .iter()
            .map(|c| ExplainedCache {
                path: lossy(c),
                exists: c.is_dir(),
            })
            .collect(),
        skipped: roots
            .skipped
            .iter()
            .map(|s| ExplainedSkip {
                path: lossy(&s.path),
                reason: s.reason.clone(),
            })
            .collect(),
        warnings: roots
            .warnings
            .iter()
            .chain(&a.protection.warnings)
            .cloned()
            .collect(),
        landlock_abi,
        enforcement,
    })
}

/// Whether a transaction can run, and the roots it overlays or why not.
fn transaction_detail(policy: &Policy, roots: &crate::sandbox::Roots) -> (bool, String) {
    match crate::sandbox::overlay::availability(policy, roots) {
        Ok(overlaid) => (
            true,
            format!(
                "overlays over {} (upper layers in {}); the temp dir, caches and /dev/shm are \
                 written directly",
                overlaid
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                crate::sandbox::overlay::transactions_dir(&policy.state_dir).display()
            ),
        ),
        Err(why) => (false, format!("unavailable: {why}")),
    }
}

/// Where the allow-list proxy listens, as `explain` can tell before a run.
const PROXY_WHERE: &str = "http://dsh-exec:TOKEN@127.0.0.1:PORT (a port and a token picked \
     when the run starts), set in HTTP_PROXY, HTTPS_PROXY, ALL_PROXY and their lower-case forms \
     over any other value; NO_PROXY=localhost,127.0.0.1,::1 unless -e sets it (loopback is \
     reached directly, not through the proxy)";

/// How a network policy is enforced, in one line.
fn network_mechanism(network: crate::sandbox::Network) -> &'static str {
    use crate::sandbox::Network;
    match network {
        Network::Allow => "none",
        Network::Deny => {
            "seccomp: IPv4, IPv6, packet and vsock sockets and most netlink families refused \
             (EACCES, recorded by the gate), io_uring refused; Landlock TCP bind/connect rules \
             where the ABI has them (4+)"
        }
        Network::Loopback => {
            "gate (seccomp user notification): connect, bind, listen, sendto, sendmsg and \
             sendmmsg of IPv4/IPv6 sockets made by dsh-exec with the copied address, loopback \
             only (EACCES otherwise; wildcard binds narrowed to loopback); seccomp: raw, packet, \
             vsock, SCTP and MPTCP sockets, source routes and interface options refused, io_uring \
             refused"
        }
        Network::AllowList => {
            "as loopback, plus an HTTP/HTTPS proxy of the run that reaches only the listed hosts \
             (CONNECT tunnels untouched, plain http:// forwarded); names resolved by the proxy, \
             private, loopback, link-local and metadata addresses only when listed exactly; DNS \
             to loopback port 53 refused"
        }
    }
}

/// The rows of the files of editors and agents: each one that exists, the
/// absent ones by directory, the lifted ones.
fn agent_file_rows(p: &Protection) -> Vec<(String, String, String)> {
    let files = agent_files(p);
    let mut rows = Vec::new();
    let mut name = "agent-files";
    for (path, state) in &files {
        if *state == AgentFileState::Protected {
            rows.push((
                name.into(),
                path.display().to_string(),
                "(protected)".into(),
            ));
            name = "";
        }
    }
    // The absent ones, one row per directory.
    let mut absent: Vec<(PathBuf, Vec<String>)> = Vec::new();
    for (path, state) in &files {
        let (Some(dir), Some(entry)) = (path.parent(), path.file_name()) else {
            continue;
        };
        if *state != AgentFileState::RemovedIfCreated {
            continue;
        }
        let entry = entry.to_string_lossy().into_owned();
        match absent.iter_mut().find(|(d, _)| d == dir) {
            Some((_, entries)) => entries.push(entry),
            None => absent.push((dir.to_path_buf(), vec![entry])),
        }
    }
    for (dir, entries) in absent {
        rows.push((
            name.into(),
            format!("{}/{{{}}}", dir.display(), entries.join(",")),
            "(removed after the run if created)".into(),
        ));
        name = "";
    }
    for (path, state) in &files {
        if *state == AgentFileState::Lifted {
            rows.push((
                "allow-write".into(),
                path.display().to_string(),
                "(lifted: writable)".into(),
            ));
        }
    }
    rows
}

/// The sandbox rows of the text explanation.
fn sandbox_rows(spec: &Spec, policy: &Policy) -> Vec<(String, String, String)> {
    let a = applied(spec, policy);
    let roots = &a.roots;
    let o = |o: Origin| format!("({})", origin_text(o));
    let mut rows = vec![
        (
            "sandbox".into(),
            policy.mode.value.as_str().into(),
            match (&policy.transaction, policy.mode.origin) {
                (Some(_), Origin::Default) => "(implied by --transaction)".into(),
                (_, origin) => o(origin),
            },
        ),
        (
            "network".into(),
            policy.network.value.as_str().into(),
            format!("({})", policy.network_source()),
        ),
    ];
    for (i, h) in policy.network_allow.iter().enumerate() {
        let name = if i == 0 { "allow-hosts" } else { "" };
        let note = if h.port.is_none() {
            "(ports 80 and 443)"
        } else {
            "(this port)"
        };
        rows.push((name.into(), h.to_string(), note.into()));
    }
    if policy.network.value == crate::sandbox::Network::AllowList {
        rows.push(("proxy".into(), PROXY_WHERE.into(), String::new()));
    }
    // The credentials: one row each, the label on the first of a kind.
    let inj = &policy.injection;
    let listed: [(&str, Vec<(String, String)>); 4] = [
        (
            "credentials",
            inj.credentials
                .iter()
                .map(|c| {
                    let note = "(read by dsh-exec; never given to the command)";
                    (c.to_string(), note.into())
                })
                .collect(),
        ),
        (
            "inject",
            inj.inject
                .iter()
                .map(|r| {
                    (
                        r.to_string(),
                        "(TLS ended by the proxy with the run's CA)".into(),
                    )
                })
                .collect(),
        ),
        (
            "phantoms",
            inj.phantom_env
                .iter()
                .map(|p| {
                    (
                        format!("{}={}", p.var, crate::net::inject::PHANTOM_PREFIX),
                        format!(
                            "(phantom of {}; refused anywhere no rule sends it)",
                            p.credential
                        ),
                    )
                })
                .collect(),
        ),
        (
            "upstream-ca",
            inj.upstream_ca
                .iter()
                .map(|f| (f.display().to_string(), String::new()))
                .collect(),
        ),
    ];
    for (label, entries) in listed {
        for (i, (value, note)) in entries.into_iter().enumerate() {
            rows.push((if i == 0 { label } else { "" }.into(), value, note));
        }
    }
    if policy.network.value != crate::sandbox::Network::Allow {
        rows.push((
            "net-mechanism".into(),
            network_mechanism(policy.network.value).into(),
            String::new(),
        ));
    }
    if policy.mode.value == Mode::WorkspaceWrite {
        rows.push((
            "workspace-root".into(),
            policy.workspace_root.value.display().to_string(),
            o(policy.workspace_root.origin),
        ));
        for (i, w) in roots.writable_paths().into_iter().enumerate() {
            let name = if i == 0 { "writable" } else { "" };
            rows.push((name.into(), w.display().to_string(), String::new()));
        }
        for (i, c) in policy.caches.iter().enumerate() {
            let name = if i == 0 { "caches" } else { "" };
            let note = if c.is_dir() {
                "(--allow-caches)"
            } else {
                "(--allow-caches; made before the run, and kept)"
            };
            rows.push((name.into(), c.display().to_string(), note.into()));
        }
        if roots.temp_dir.is_none() {
            rows.push((
                "temp-dir".into(),
                "read-only (--no-temp-write)".into(),
                String::new(),
            ));
        }
        let (available, detail) = transaction_detail(policy, roots);
        match &policy.transaction {
            Some(t) => rows.push((
                "transaction".into(),
                format!("on exit: {}; {detail}", t.on_exit.value),
                format!("(on exit: {})", origin_text(t.on_exit.origin)),
            )),
            None => rows.push((
                "transaction".into(),
                format!(
                    "no (--transaction: {})",
                    if available { "available" } else { &detail }
                ),
                String::new(),
            )),
        }
    }
    for w in roots.warnings.iter().chain(&a.protection.warnings) {
        rows.push(("warning".into(), w.clone(), String::new()));
    }
    for s in &roots.skipped {
        rows.push((
            "skipped".into(),
            format!("{} ({})", s.path.display(), s.reason),
            "(warning)".into(),
        ));
    }
    if policy.mode.value.confines() {
        rows.push(("gate".into(), gate_calls(spec, &a).into(), String::new()));
        rows.push((
            "metadata".into(),
            metadata_mechanism(spec, &a).into(),
            String::new(),
        ));
        rows.push(("/dev/shm".into(), shm(&a).into(), String::new()));
        for (i, p) in roots.read_denied.iter().enumerate() {
            let name = if i == 0 { "read-denied" } else { "" };
            rows.push((name.into(), p.display().to_string(), String::new()));
        }
        for p in &roots.read_exceptions {
            let built_in = crate::request::READABLE_DEVICES
                .iter()
                .any(|d| p == std::path::Path::new(d));
            let why = if built_in {
                "(built in)"
            } else {
                "(--allow-read)"
            };
            rows.push(("read-allowed".into(), p.display().to_string(), why.into()));
        }
        if !roots.read_denied.is_empty() {
            rows.push((
                "read-deny".into(),
                read_deny_mechanism().into(),
                String::new(),
            ));
        }
        for (i, p) in roots.read_roots.iter().enumerate() {
            let name = if i == 0 { "read-roots" } else { "" };
            rows.push((name.into(), p.display().to_string(), "(--read-root)".into()));
        }
        if let Some(parent) = &policy.scratch_parent {
            rows.push(("scratch".into(), scratch(parent), String::new()));
        }
        let mut sockets = vec![PATHNAME_SOCKETS.to_string()];
        sockets.extend(
            roots
                .unix_sockets
                .iter()
                .map(|(_, p)| format!("and {}", p.display())),
        );
        sockets.push("abstract: the run's own (Landlock scope and the gate)".into());
        for (i, line) in sockets.into_iter().enumerate() {
            let name = if i == 0 { "unix-sockets" } else { "" };
            rows.push((name.into(), line, String::new()));
        }
        let shown = 12;
        let paths = a.protection.paths();
        for (i, p) in paths.iter().take(shown).enumerate() {
            let (name, note) = if i == 0 {
                ("protected", format!("({})", protection_mechanism(&a)))
            } else {
                ("", String::new())
            };
            rows.push((name.into(), p.display().to_string(), note));
        }
        if paths.len() > shown {
            rows.push((
                "".into(),
                format!("... {} more", paths.len() - shown),
                String::new(),
            ));
        }
        if !a.protection.absent.is_empty() {
            // Under the protected paths' header, or as its own row when
            // no protected path exists yet.
            let (name, more) = if paths.is_empty() {
                ("protected", "")
            } else {
                ("", " more")
            };
            rows.push((
                name.into(),
                format!(
                    "{}{more} removed after the run if created",
                    a.protection.absent.len()
                ),
                String::new(),
            ));
        }
        rows.extend(agent_file_rows(&a.protection));
        for n in &a.protection.notes {
            rows.push(("note".into(), n.clone(), String::new()));
        }
        rows.push((
            "terminals".into(),
            terminals(spec, &a).into(),
            String::new(),
        ));
    }
    match kernel_abi() {
        Ok(abi) => {
            let e = full_enforcement(policy, abi, &a);
            let level = match e.level() {
                crate::result::EnforcementLevel::Full => "full",
                crate::result::EnforcementLevel::Partial => "partial",
            };
            rows.push((
                "landlock".into(),
                format!("ABI {abi}, enforcement {level}"),
                String::new(),
            ));
            for (i, m) in e.missing.iter().enumerate() {
                let name = if i == 0 { "not enforced" } else { "" };
                rows.push((name.into(), m.describe(), String::new()));
            }
        }
        Err(e) => rows.push(("landlock".into(), e.to_string(), "(unavailable)".into())),
    }
    rows
}

/// The explanation of `spec`, as `explain --json` prints it. Runs
/// nothing; opens the writable roots and probes the kernel as a run would.
pub fn explanation(spec: &Spec) -> Explanation {
    let env = &spec.env;
    let ms = |d: std::time::Duration| d.as_millis() as u64;
    Explanation {
        command: spec.script.clone(),
        config_file: spec.config_file.as_deref().map(lossy),
        shell: find_shell(&env.child_env()).map(|p| lossy(&p)),
        workdir: sourced(&spec.workdir, lossy(&spec.workdir.value)),
        timeout_ms: sourced(&spec.timeout, spec.timeout.value.map(ms)),
        kill_after_ms: sourced(&spec.kill_after, ms(spec.kill_after.value)),
        idle_timeout_ms: sourced(&spec.idle_timeout, spec.idle_timeout.value.map(ms)),
        signal: sourced(&spec.signal, spec.signal.value),
        stdout_max_bytes: sourced(&spec.stdout_max_bytes, spec.stdout_max_bytes.value),
        stderr_max_bytes: sourced(&spec.stderr_max_bytes, spec.stderr_max_bytes.value),
        file_size_max_bytes: sourced(&spec.file_size_max, spec.file_size_max.value),
        memory_max_bytes: sourced(&spec.memory_max, spec.memory_max.value),
        pids_max: sourced(&spec.pids_max, spec.pids_max.value),
        cpu_max_ms: sourced(&spec.cpu_max, spec.cpu_max.value.map(ms)),
        limits: sourced(&spec.limits, spec.limits.value),
        limit_mechanisms: crate::limits::explained(&spec.limits_asked())
            .into_iter()
            .map(|(kind, _, name, line)| {
                let mechanism = LimitMechanism {
                    mechanism: name.into(),
                    detail: line,
                };
                (kind, mechanism)
            })
            .collect(),
        containment: {
            let (mechanism, cgroup, detail) = crate::limits::containment_explained();
            ExplainedContainment {
                mechanism: mechanism.into(),
                cgroup: cgroup.map(|p| lossy(&p)),
                detail,
            }
        },
        output: output_mode(spec).0.into(),
        spill_max_bytes: sourced(&spec.spill_max_bytes, spec.spill_max_bytes.value),
        keep: sourced(&spec.keep, spec.keep.value),
        render: sourced(&spec.render, spec.render.value),
        prune_spill_after_ms: spec.prune_spill_after.map(ms),
        stdin: sourced(&spec.stdin, explained_stdin(&spec.stdin.value)),
        spill_dir: sourced(&spec.spill_dir, lossy(&spec.spill_dir.value)),
        environment: ExplainedEnvironment {
            inherited_count: env.inherited.len() as u64,
            scrubbed: env
                .scrubbed
                .iter()
                .map(|n| n.to_string_lossy().into_owned())
                .collect(),
            scrub_rules: env
                .scrubbed
                .iter()
                .zip(&env.scrub_rules)
                .map(|(n, r)| ScrubbedName {
                    name: n.to_string_lossy().into_owned(),
                    rule: r.clone(),
                })
                .collect(),
            policy: env.policy,
            policy_dropped: env.policy_dropped as u64,
            set: env
                .effective_settings()
                .iter()
                .map(|s| ExplainedSetting {
                    name: s.name.clone(),
                    value: display_value(&s.name, &s.value),
                    layer: s.layer,
                })
                .collect(),
            missing_pass_through: env.missing_pass_through.clone(),
        },
        sandbox: explained_sandbox(spec),
    }
}

/// The explanation as one JSON object: [`explanation`] as a
/// [`serde_json::Value`] (its keys sorted when printed).
pub fn explain_json(spec: &Spec) -> Value {
    // Plain data (strings, numbers, string-keyed maps) always converts.
    serde_json::to_value(explanation(spec)).unwrap_or_default()
}

/// Colours one aligned row for a terminal: names bold, the sandbox mode by
/// how much it allows, warnings yellow, what is not enforced red.
fn paint_row(name: &str, value: &str, line: &str) -> String {
    let (head, rest) = line.split_at(name.len().min(line.len()));
    let head = head.bold().to_string();
    let rest = match (name, value) {
        ("sandbox", "read-only") => rest.green().to_string(),
        ("sandbox", "workspace-write") => rest.yellow().to_string(),
        ("sandbox", _) => rest.red().to_string(),
        ("skipped" | "warning", _) => rest.yellow().to_string(),
        ("not enforced", _) | ("", _) if line.contains("(ABI") => rest.red().to_string(),
        ("landlock", v) if v.contains("partial") || !v.starts_with("ABI") => rest.red().to_string(),
        ("landlock", _) => rest.green().to_string(),
        _ => rest.to_string(),
    };
    head + &rest
}

/// The explanation as aligned, human-readable text, coloured when `color`.
pub fn explain_text(spec: &Spec, color: bool) -> String {
    let env = &spec.env;
    let shell = find_shell(&env.child_env())
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "NOT FOUND on PATH".into());
    let mut rows: Vec<(String, String, String)> = vec![
        ("command".into(), spec.script.clone(), String::new()),
        ("shell".into(), format!("{shell} -c COMMAND"), String::new()),
    ];
    if let Some(path) = &spec.config_file {
        rows.push(("config".into(), path.display().to_string(), String::new()));
    }
    let mut row = |name: &str, value: String, note: String| {
        rows.push((name.into(), value, note));
    };
    row(
        "workdir",
        spec.workdir.value.display().to_string(),
        note(&spec.workdir),
    );
    if !spec.workdir.value.is_dir() {
        row(
            "warning",
            "the workdir is not a directory: a run fails (WORKDIR_UNUSABLE)".into(),
            String::new(),
        );
    }
    row(
        "timeout",
        timeout_text(spec.timeout.value),
        note(&spec.timeout),
    );
    row("signal", spec.signal.value.name(), note(&spec.signal));
    row(
        "kill-after",
        format_duration(spec.kill_after.value),
        note(&spec.kill_after),
    );
    row(
        "idle-timeout",
        timeout_text(spec.idle_timeout.value),
        note(&spec.idle_timeout),
    );
    row(
        "stdout-max-bytes",
        format_size(spec.stdout_max_bytes.value),
        note(&spec.stdout_max_bytes),
    );
    row(
        "stderr-max-bytes",
        format_size(spec.stderr_max_bytes.value),
        note(&spec.stderr_max_bytes),
    );
    if let Some(max) = spec.file_size_max.value {
        row(
            "file-size-max",
            format!("{} (RLIMIT_FSIZE)", format_size(max)),
            note(&spec.file_size_max),
        );
    }
    let limits = crate::limits::explained(&spec.limits_asked());
    for (kind, value, _, line) in &limits {
        let origin = match kind {
            crate::limits::LimitKind::Memory => note(&spec.memory_max),
            crate::limits::LimitKind::Pids => note(&spec.pids_max),
            _ => note(&spec.cpu_max),
        };
        let fails = if line.starts_with("unavailable: ")
            && spec.limits.value == crate::limits::LimitMode::Strict
        {
            " (a run fails: LIMIT_UNAVAILABLE; --limits best-effort runs without it)"
        } else {
            ""
        };
        row(&kind.flag()[2..], format!("{value}: {line}{fails}"), origin);
    }
    if !limits.is_empty() {
        row(
            "limits",
            spec.limits.value.as_str().into(),
            note(&spec.limits),
        );
    }
    let (mechanism, cgroup, detail) = crate::limits::containment_explained();
    let place = cgroup
        .map(|c| format!(" under {}", c.display()))
        .unwrap_or_default();
    row(
        "containment",
        format!("{mechanism}{place}: {detail}"),
        String::new(),
    );
    let (output, why) = output_mode(spec);
    row("output", format!("{output}: {why}"), String::new());
    row(
        "spill-max-bytes",
        format_size(spec.spill_max_bytes.value),
        note(&spec.spill_max_bytes),
    );
    row("keep", spec.keep.value.as_str().into(), note(&spec.keep));
    row(
        "render",
        spec.render.value.as_str().into(),
        note(&spec.render),
    );
    row("stdin", stdin_text(&spec.stdin.value), note(&spec.stdin));
    if let Some(age) = spec.prune_spill_after {
        row(
            "prune-spill",
            format!("after {} unchanged, at each start", format_duration(age)),
            "(config)".into(),
        );
    }
    let moved = spec
        .sandbox
        .as_ref()
        .map(|p| sandbox::spill_parent(p, &open_roots(p), &spec.spill_dir.value))
        .filter(|(_, moved)| *moved);
    match moved {
        Some((actual, _)) => row(
            "spill-dir",
            actual.display().to_string(),
            format!(
                "({}; {} is writable by the command)",
                origin_text(spec.spill_dir.origin),
                spec.spill_dir.value.display()
            ),
        ),
        None => row(
            "spill-dir",
            spec.spill_dir.value.display().to_string(),
            note(&spec.spill_dir),
        ),
    }
    if let Some(policy) = &spec.sandbox {
        rows.extend(sandbox_rows(spec, policy));
    }
    // Every value is one line, whatever a path, a variable or the command
    // holds: a line break or an escape sequence in one cannot make a row
    // of its own or drive the terminal.
    let rows: Vec<(String, String, String)> = rows
        .into_iter()
        .map(|(n, v, o)| (n, one_line(&v).into_owned(), one_line(&o).into_owned()))
        .collect();
    let width = rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
    let vwidth = rows.iter().map(|r| r.1.len()).max().unwrap_or(0).min(48);
    let mut text = String::new();
    for (name, value, origin) in rows {
        let line = format!("{name:width$}  {value:vwidth$}  {origin}");
        let line = line.trim_end();
        if color {
            text.push_str(&paint_row(&name, &value, line));
        } else {
            text.push_str(line);
        }
        text.push('\n');
    }
    text.push_str(&if color {
        "environment:".bold().to_string()
    } else {
        "environment:".into()
    });
    text.push('\n');
    text.push_str(&format!(
        "  inherited  {} variables from this process\n",
        env.inherited.len()
    ));
    if env.policy_dropped > 0 {
        let policy = match env.policy {
            crate::request::env::EnvPolicy::Core => "core",
            _ => "none",
        };
        text.push_str(&format!(
            "  dropped    {} variables (--env-policy {policy})\n",
            env.policy_dropped
        ));
    }
    // Names and the rule that caught each; never a value.
    for (name, rule) in env.scrubbed.iter().zip(&env.scrub_rules) {
        text.push_str(&format!(
            "  scrubbed   {} ({rule})\n",
            one_line(&name.to_string_lossy())
        ));
    }
    for s in env.effective_settings() {
        text.push_str(&format!(
            "  {:9}  {}={}\n",
            layer_text(s.layer),
            one_line(&s.name),
            one_line(&display_value(&s.name, &s.value))
        ));
    }
    for name in &env.missing_pass_through {
        let name = one_line(name);
        text.push_str(&format!(
            "  skipped    {name} (--env {name}: not set here)\n"
        ));
    }
    text
}
