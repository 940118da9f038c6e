//! Request → spec: the one place where defaults are applied.
//!
//! A [`Request`] is what the user said (every field optional). [`resolve`]
//! turns it into a [`Spec`] in which every value is explicit and carries its
//! [`Origin`]. Nothing downstream re-defaults; `explain` prints the spec.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use crate::config::Config;
use crate::env::{EnvArg, EnvPlan};
use crate::sandbox::{Mode, Network, Policy, Skipped};
use crate::units::{format_duration, format_size};

/// Default deadline: 10 minutes.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);
/// Default grace period between SIGTERM and SIGKILL: 2 seconds.
pub const DEFAULT_KILL_AFTER: Duration = Duration::from_secs(2);
/// Default tail budget of each stream: 1 MiB.
pub const DEFAULT_MAX_BYTES: u64 = 1 << 20;

/// What the user asked for; `None` means "use the default".
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// The command words. One word is a script for `bash -c`; several are
    /// shell-quoted and joined with spaces.
    pub command: Vec<String>,
    /// Working directory (relative paths are taken from the current one).
    pub workdir: Option<PathBuf>,
    /// Deadline: `Some(None)` asks for no deadline.
    pub timeout: Option<Option<Duration>>,
    /// Grace period between SIGTERM and SIGKILL.
    pub kill_after: Option<Duration>,
    /// Tail budget of stdout, in bytes.
    pub stdout_max_bytes: Option<u64>,
    /// Tail budget of stderr, in bytes.
    pub stderr_max_bytes: Option<u64>,
    /// Where the command's stdin comes from; `None` is a closed pipe.
    pub stdin_file: Option<PathBuf>,
    /// `--env` entries, in the order given.
    pub env: Vec<EnvArg>,
    /// `--dsh-env` entries (keys start with `DSH_`), in the order given.
    pub dsh_env: Vec<(String, String)>,
    /// Parent directory of the run's private spill directory.
    pub spill_dir: Option<PathBuf>,
    /// Sandbox mode; `None` runs unconfined with no sandbox facts.
    pub sandbox: Option<Mode>,
    /// Network switch; `Some(Deny)` without a mode implies `full-access`.
    pub network: Option<Network>,
    /// Workspace root for `workspace-write` (default: the workdir).
    pub workspace_root: Option<PathBuf>,
    /// Extra writable directories for `workspace-write`.
    pub writable_roots: Vec<PathBuf>,
    /// Keep the temp directory read-only in `workspace-write`.
    pub no_temp_write: bool,
    /// Attach the command to this terminal, uncaptured.
    pub interactive: bool,
    /// Show the output live while capturing it.
    pub stream: Option<LiveOutput>,
    /// The configuration file's defaults and caps ([`crate::config::load`]).
    pub config: Option<Config>,
}

/// Where `--stream` copies the command's output as it is produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LiveOutput {
    /// stdout to this process's stdout, stderr to its stderr.
    Mirrored,
    /// Both to this process's stderr (stdout carries the JSON result).
    Stderr,
}

/// The process-wide facts `resolve` reads: passed in so that resolution is a
/// pure function that tests can call directly.
#[derive(Debug, Clone)]
pub struct Ambient {
    /// The current directory of `dsh-exec`.
    pub cwd: PathBuf,
    /// The environment of `dsh-exec`, in order.
    pub env: Vec<(OsString, OsString)>,
    /// The temp directory (`$TMPDIR`, else `/tmp`).
    pub temp_dir: PathBuf,
}

impl Ambient {
    /// Reads the facts of the running process.
    ///
    /// Errors when the current directory cannot be determined (it was
    /// removed, or is not searchable) and no absolute fallback is given.
    /// `fallback_cwd` stands in for a current directory that was removed
    /// (an absolute `--workdir` makes the current one irrelevant).
    pub fn current(fallback_cwd: Option<&Path>) -> std::io::Result<Ambient> {
        let cwd = match (std::env::current_dir(), fallback_cwd) {
            (Ok(cwd), _) => cwd,
            (Err(_), Some(f)) if f.is_absolute() => f.to_path_buf(),
            (Err(e), _) => return Err(e),
        };
        // An empty TMPDIR means unset (as for mktemp(1)).
        let temp_dir = std::env::var_os("TMPDIR")
            .filter(|t| !t.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/tmp"));
        Ok(Ambient {
            cwd,
            env: std::env::vars_os().collect(),
            temp_dir,
        })
    }
}

/// Where a resolved value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// A command-line flag.
    Flag,
    /// The configuration file (its path is [`Spec::config_file`]).
    Config,
    /// A built-in default.
    Default,
}

/// A resolved value and its origin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Sourced<T> {
    /// The value.
    pub value: T,
    /// Where it came from.
    pub origin: Origin,
    /// Set when a cap of the configuration file lowered the value: what was
    /// asked for and which cap applied, e.g. `2h capped at 1h`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capped: Option<String>,
}

impl<T> Sourced<T> {
    fn pick(flag: Option<T>, default: impl FnOnce() -> T) -> Sourced<T> {
        Sourced::pick3(flag, None, default)
    }

    /// Flag over config file over built-in default.
    fn pick3(flag: Option<T>, config: Option<T>, default: impl FnOnce() -> T) -> Sourced<T> {
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

/// Lowers a budget to its cap, noting it.
fn cap_budget(s: &mut Sourced<u64>, cap: Option<u64>) {
    if let Some(max) = cap
        && s.value > max
    {
        s.capped = Some(format!(
            "{} capped at {}",
            format_size(s.value),
            format_size(max)
        ));
        s.value = max;
    }
}

/// Lowers a deadline (or "no deadline") to the cap, noting it.
fn cap_timeout(s: &mut Sourced<Option<Duration>>, cap: Option<Duration>) {
    if let Some(max) = cap
        && s.value.is_none_or(|t| t > max)
    {
        let asked = s
            .value
            .map(format_duration)
            .unwrap_or_else(|| "none".into());
        s.capped = Some(format!("{asked} capped at {}", format_duration(max)));
        s.value = Some(max);
    }
}

/// Where the command's stdin comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "path")]
pub enum StdinSource {
    /// A pipe closed at once: the command reads end-of-file.
    Closed,
    /// The bytes of this file, then end-of-file.
    File(PathBuf),
    /// The bytes of `dsh-exec`'s own stdin (`--stdin-file -`), then end-of-file.
    Inherited,
}

/// A fully resolved run: every value explicit.
#[derive(Debug, Clone)]
pub struct Spec {
    /// The script given to `bash -c`.
    pub script: String,
    /// Absolute working directory (not yet checked: `prepare` does that).
    pub workdir: Sourced<PathBuf>,
    /// Deadline from the start of the run; `None` is no deadline.
    pub timeout: Sourced<Option<Duration>>,
    /// Grace period between SIGTERM and SIGKILL.
    pub kill_after: Sourced<Duration>,
    /// Tail budget of stdout, in bytes.
    pub stdout_max_bytes: Sourced<u64>,
    /// Tail budget of stderr, in bytes.
    pub stderr_max_bytes: Sourced<u64>,
    /// Where stdin comes from.
    pub stdin: Sourced<StdinSource>,
    /// Parent directory of the run's private spill directory.
    pub spill_dir: Sourced<PathBuf>,
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
    pub config_file: Option<PathBuf>,
    /// Run the command as the init of a new PID namespace (background jobs,
    /// when privileged): the kernel then ends the whole tree with it.
    pub pid_namespace: bool,
}

impl Spec {
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
        ]
        .into_iter()
        .filter_map(|(name, capped)| capped.map(|c| format!("{name} {c}{by}")))
        .collect()
    }
}

/// A request that cannot be resolved: a usage error (exit status 2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// Joins command words into one `bash -c` script: one word is the script
/// itself; several are shell-quoted (POSIX rules, `shlex`) and joined.
///
/// Errors when there is no word, the script is empty, or a word holds NUL.
pub fn command_script(words: &[String]) -> Result<String, UsageError> {
    let script = match words {
        [] => {
            return Err(UsageError(
                "no command given (usage: dsh-exec [OPTIONS] -- COMMAND...)".into(),
            ));
        }
        [one] => one.clone(),
        many => shlex::try_join(many.iter().map(String::as_str))
            .map_err(|e| UsageError(format!("cannot quote the command: {e}")))?,
    };
    if script.trim().is_empty() {
        return Err(UsageError("the command is empty".into()));
    }
    if script.contains('\0') {
        return Err(UsageError("the command contains a NUL byte".into()));
    }
    Ok(script)
}

fn absolute(base: &Path, p: PathBuf) -> PathBuf {
    if p.is_absolute() { p } else { base.join(p) }
}

/// Resolves a request into a spec, applying every default in one place.
///
/// Errors with a [`UsageError`] when the command is missing or empty.
pub fn resolve(req: Request, ambient: &Ambient) -> Result<Spec, UsageError> {
    let script = command_script(&req.command)?;
    let cwd = &ambient.cwd;
    let stdin = req.stdin_file.clone().map(|p| {
        if p.as_os_str() == "-" {
            StdinSource::Inherited
        } else {
            StdinSource::File(absolute(cwd, p))
        }
    });
    let workdir = Sourced::pick(req.workdir.clone().map(|p| absolute(cwd, p)), || {
        cwd.clone()
    });
    let sandbox = resolve_sandbox(&req, ambient, &workdir.value);
    let mut managed = req.dsh_env.clone();
    if let Some(policy) = &sandbox {
        managed.push(("DSH_SANDBOX_MODE".into(), policy.mode.value.as_str().into()));
        if policy.network.value == Network::Deny {
            managed.push(("DSH_SANDBOX_NETWORK".into(), "deny".into()));
        }
    }
    let defaults = req
        .config
        .as_ref()
        .map(|c| c.defaults.clone())
        .unwrap_or_default();
    let caps = req
        .config
        .as_ref()
        .map(|c| c.caps.clone())
        .unwrap_or_default();
    let mut timeout = Sourced::pick3(req.timeout, defaults.timeout, || Some(DEFAULT_TIMEOUT));
    cap_timeout(&mut timeout, caps.max_timeout);
    let mut stdout_max_bytes =
        Sourced::pick3(req.stdout_max_bytes, defaults.stdout_max_bytes, || {
            DEFAULT_MAX_BYTES
        });
    cap_budget(&mut stdout_max_bytes, caps.max_stdout_bytes);
    let mut stderr_max_bytes =
        Sourced::pick3(req.stderr_max_bytes, defaults.stderr_max_bytes, || {
            DEFAULT_MAX_BYTES
        });
    cap_budget(&mut stderr_max_bytes, caps.max_stderr_bytes);
    Ok(Spec {
        script,
        workdir,
        timeout,
        kill_after: Sourced::pick3(req.kill_after, defaults.kill_after, || DEFAULT_KILL_AFTER),
        stdout_max_bytes,
        stderr_max_bytes,
        stdin: Sourced::pick(stdin, || StdinSource::Closed),
        spill_dir: Sourced::pick3(
            req.spill_dir.map(|p| absolute(cwd, p)),
            defaults.spill_dir.map(|p| absolute(cwd, p)),
            || ambient.temp_dir.clone(),
        ),
        env: EnvPlan::build(&ambient.env, req.interactive, &req.env, &managed),
        sandbox,
        interactive: req.interactive,
        stream: req.stream,
        config_file: req.config.map(|c| c.path),
        pid_namespace: false,
    })
}

/// The sandbox policy of a request: paths made absolute with symlinks
/// resolved (Landlock judges a path at its target), missing ones skipped.
fn resolve_sandbox(req: &Request, ambient: &Ambient, workdir: &Path) -> Option<Policy> {
    let config_mode = req.config.as_ref().and_then(|c| c.defaults.sandbox);
    if req.sandbox.is_none() && config_mode.is_none() && req.network.is_none() {
        return None;
    }
    let mode = Sourced::pick3(req.sandbox, config_mode, || Mode::FullAccess);
    // Flags replace the configuration file's list, as for every other value.
    let writable_roots = match (&req.writable_roots[..], &req.config) {
        ([], Some(c)) => c.defaults.writable_roots.clone(),
        (flags, _) => flags.to_vec(),
    };
    let network = Sourced::pick(req.network, || Network::Allow);
    let workspace_root = Sourced::pick(
        req.workspace_root
            .clone()
            .map(|p| absolute(&ambient.cwd, p)),
        || workdir.to_path_buf(),
    );
    let temp_dir = if req.no_temp_write {
        None
    } else {
        std::fs::canonicalize(&ambient.temp_dir).ok()
    };
    let mut writable: Vec<PathBuf> = Vec::new();
    let mut skipped = Vec::new();
    let mut warnings = Vec::new();
    if mode.value == Mode::WorkspaceWrite {
        let roots = std::iter::once(workspace_root.value.clone()).chain(
            writable_roots
                .iter()
                .map(|p| absolute(&ambient.cwd, p.clone())),
        );
        for root in roots {
            match std::fs::canonicalize(&root) {
                Ok(real) if !real.is_dir() => skipped.push(Skipped {
                    path: root,
                    reason: "not a directory".into(),
                }),
                Ok(real) if !writable.contains(&real) => {
                    if real != root && root.is_symlink() {
                        warnings.push(format!(
                            "writable root {} is a symlink to {}",
                            root.display(),
                            real.display()
                        ));
                    }
                    writable.push(real)
                }
                Ok(_) => {}
                Err(e) => skipped.push(Skipped {
                    path: root,
                    reason: e.to_string(),
                }),
            }
        }
        if let Some(t) = &temp_dir
            && !writable.contains(t)
        {
            writable.push(t.clone());
        }
    }
    if writable.iter().any(|w| w == Path::new("/")) {
        warnings.push("a writable root is /: workspace-write then allows writing anywhere".into());
    }
    Some(Policy {
        mode,
        network,
        workspace_root,
        temp_dir,
        writable,
        skipped,
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ambient() -> Ambient {
        Ambient {
            cwd: "/work".into(),
            env: vec![],
            temp_dir: "/tmp".into(),
        }
    }

    #[test]
    fn defaults_and_origins() {
        let req = Request {
            command: vec!["echo hi".into()],
            ..Request::default()
        };
        let spec = resolve(req, &ambient()).unwrap();
        assert_eq!(spec.script, "echo hi");
        assert_eq!(spec.workdir.value, PathBuf::from("/work"));
        assert_eq!(spec.workdir.origin, Origin::Default);
        assert_eq!(spec.timeout.value, Some(DEFAULT_TIMEOUT));
        assert_eq!(spec.stdout_max_bytes.value, 1 << 20);
        assert_eq!(spec.stdin.value, StdinSource::Closed);
        assert_eq!(spec.spill_dir.value, PathBuf::from("/tmp"));
    }

    #[test]
    fn flags_win_and_paths_are_absolute() {
        let req = Request {
            command: vec!["grep".into(), "a b".into(), "f.txt".into()],
            workdir: Some("sub".into()),
            timeout: Some(None),
            stdin_file: Some("-".into()),
            ..Request::default()
        };
        let spec = resolve(req, &ambient()).unwrap();
        assert_eq!(spec.script, "grep 'a b' f.txt");
        assert_eq!(spec.workdir.value, PathBuf::from("/work/sub"));
        assert_eq!(spec.workdir.origin, Origin::Flag);
        assert_eq!(spec.timeout.value, None);
        assert_eq!(spec.stdin.value, StdinSource::Inherited);
    }

    #[test]
    fn empty_commands_are_usage_errors() {
        assert!(command_script(&[]).is_err());
        assert!(command_script(&["  ".into()]).is_err());
    }
}
