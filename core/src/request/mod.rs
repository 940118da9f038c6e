//! Request → spec: the one place where defaults are applied.
//!
//! A [`Request`] is what the user said (every field optional). [`resolve`]
//! turns it, with the process-wide facts of an [`Ambient`], into a
//! [`Spec`] in which every value is explicit and carries its
//! [`crate::spec::Origin`]. Resolution is pure: it reads nothing from the
//! file system (preparing the run opens and checks paths), so tests call it
//! directly.

pub mod config;
pub mod env;
pub mod shell;
pub use crate::units;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use self::config::Config;
use self::env::{EnvArg, EnvPlan};
use crate::sandbox::{Mode, Network, Policy};
use crate::spec::{LiveOutput, OnTerminal, Origin, Render, Sourced, Spec, StdinSource};
use crate::units::{format_duration, format_size};

/// Default deadline of a foreground run: 10 minutes.
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
    /// `--idle-timeout`: end the run when stdout and stderr stay silent
    /// this long; `Some(None)` asks for none.
    pub idle_timeout: Option<Option<Duration>>,
    /// `--transaction`: run the named writable roots on overlays and
    /// report the changes (implies `--sandbox workspace-write`).
    pub transaction: bool,
    /// `--on-exit`: what happens to the transaction when the run ends.
    pub on_exit: Option<crate::sandbox::overlay::OnExit>,
    /// `--credential`, `--inject`, `--credential-env`, `--upstream-ca`:
    /// each list given replaces the configuration file's.
    pub injection: crate::net::inject::Injection,
    /// The values of the credentials, read already (the MCP server's, read
    /// once when it started: an `fd:` source can be read once); `None`:
    /// read from the sources when the request is resolved.
    pub secrets: Option<crate::net::inject::Secrets>,
    /// Tail budget of stdout, in bytes.
    pub stdout_max_bytes: Option<u64>,
    /// Tail budget of stderr, in bytes.
    pub stderr_max_bytes: Option<u64>,
    /// `--signal`: the first signal of the deadline's and an abort's
    /// escalation (SIGKILL follows after the grace period).
    pub signal: Option<crate::signal::Signal>,
    /// `--file-size-max`: RLIMIT_FSIZE for the command, in bytes.
    pub file_size_max: Option<u64>,
    /// `--spill-max-bytes`: the cap per spill file, in bytes.
    pub spill_max_bytes: Option<u64>,
    /// `--memory-max`: the whole tree's memory, in bytes; `Some(None)`
    /// asks for none (over a configured default; a cap still applies).
    pub memory_max: Option<Option<u64>>,
    /// `--pids-max`: processes and threads of the tree at once; `Some(None)`
    /// asks for none.
    pub pids_max: Option<Option<u64>>,
    /// `--cpu-max`: CPU time of the whole tree; `Some(None)` asks for none.
    pub cpu_max: Option<Option<Duration>>,
    /// `--limits`: what a limit that cannot be enforced does.
    pub limits: Option<crate::limits::LimitMode>,
    /// `--keep`: which part of an outgrown stream the result keeps.
    pub keep: Option<crate::capture::Keep>,
    /// `--render`: how the result's text fields are rendered.
    pub render: Option<crate::spec::Render>,
    /// `--stdin pipe`: a background job's stdin stays open for `job write`.
    pub stdin_pipe: bool,
    /// `--pty`: a background job runs on a new pseudo-terminal.
    pub pty: bool,
    /// `--output-files`: the command writes its output into unnamed files
    /// itself (see [`crate::spec::Spec::output_files`]).
    pub output_files: bool,
    /// Where the command's stdin comes from; `None` is a closed pipe.
    pub stdin_file: Option<PathBuf>,
    /// `--env` entries, in the order given.
    pub env: Vec<EnvArg>,
    /// `--env-policy`; `None`: the configuration file's, else `inherit`.
    pub env_policy: Option<env::EnvPolicy>,
    /// `--dsh-env` entries (keys start with `DSH_`), in the order given.
    pub dsh_env: Vec<(String, String)>,
    /// Parent directory of the run's private spill directory.
    pub spill_dir: Option<PathBuf>,
    /// Sandbox mode; `None` runs unconfined with no sandbox facts.
    pub sandbox: Option<Mode>,
    /// Network policy; any policy without a mode implies `full-access`.
    pub network: Option<Network>,
    /// The hosts of `--network allow=HOSTS` (with `network:
    /// Some(Network::AllowList)`).
    pub network_allow: Vec<crate::net::rules::HostRule>,
    /// Workspace root for `workspace-write` (default: the workdir).
    pub workspace_root: Option<PathBuf>,
    /// Extra writable directories for `workspace-write`.
    pub writable_roots: Vec<PathBuf>,
    /// Unix sockets outside the writable roots that a confined command may
    /// connect to (`--allow-unix-socket`).
    pub allow_unix_sockets: Vec<PathBuf>,
    /// More paths kept read-only inside writable roots (`--protect`).
    pub protect: Vec<PathBuf>,
    /// Protected editor and agent files left writable (`--allow-write`;
    /// relative to the working directory).
    pub allow_write: Vec<PathBuf>,
    /// More paths unreadable in the confining modes (`--deny-read`).
    pub deny_read: Vec<PathBuf>,
    /// The read allow-list (`--read-root`): when not empty, only these,
    /// the workspace, the writable roots and [`SYSTEM_READ_ROOTS`] are
    /// readable.
    pub read_roots: Vec<PathBuf>,
    /// Entries of the read deny list lifted, or paths inside a denied
    /// directory made readable (`--allow-read`).
    pub allow_read: Vec<PathBuf>,
    /// Keep the temp directory read-only in `workspace-write`.
    pub no_temp_write: bool,
    /// Make the package caches that exist writable roots too
    /// (`--allow-caches`; see [`cache_dirs`]).
    pub allow_caches: bool,
    /// Attach the command to this terminal, uncaptured.
    pub interactive: bool,
    /// Show the output live while capturing it.
    pub stream: Option<LiveOutput>,
    /// Whether the command's SGR colours are kept where its output is
    /// shown on a terminal (`--color`, `NO_COLOR`); `None`: kept. See
    /// [`crate::spec::OnTerminal`].
    pub terminal_colours: Option<bool>,
    /// Run as a background job (`--background`, `--detach-after`): no
    /// deadline by default, no live copy, and a PID namespace where the
    /// caller may create one.
    pub background: bool,
    /// `--detach-after`: a background job that started as a foreground run,
    /// and keeps a foreground run's deadline (the configured one, else the
    /// built-in 10 minutes) unless `--timeout` says otherwise.
    pub detach: bool,
    /// The configuration file's defaults and caps ([`config::load`]).
    pub config: Option<Config>,
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
    /// Whether this process may create a PID namespace (it holds
    /// CAP_SYS_ADMIN).
    pub can_create_pid_namespace: bool,
    /// The invoking user's home directory (`$HOME`, when absolute).
    pub home: Option<PathBuf>,
    /// The directory of `dsh-exec`'s own state (jobs, private spill files):
    /// `$XDG_RUNTIME_DIR/dsh-exec` when that runtime directory exists, else
    /// `$XDG_STATE_HOME/dsh-exec`, else `~/.local/state/dsh-exec` (neither
    /// of the first two inside the temp dir), else,
    /// with no usable HOME, `TEMP/.dsh-exec-UID`. The temp dir comes last on
    /// purpose: `workspace-write` commands may write there.
    pub state_dir: PathBuf,
}

/// [`Ambient::state_dir`] from an environment and the temp dir.
pub fn state_dir(env: &[(OsString, OsString)], temp_dir: &Path) -> PathBuf {
    let get = |k: &str| {
        env.iter()
            .rev()
            .find(|(n, v)| n == k && !v.is_empty())
            .map(|(_, v)| PathBuf::from(v))
    };
    // The runtime dir must exist already (the login session makes it); a
    // state home is created on use, as long as HOME itself is a directory.
    // Neither inside the temp dir (containers set XDG_RUNTIME_DIR=/tmp/...):
    // workspace-write commands may write there, and the state directory
    // holds the spill files of every run.
    // (Compared as real paths: a runtime dir may reach the temp dir through
    // a symlink.)
    // Only when one is set: most runs have neither, and pay nothing.
    let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let outside_temp =
        |p: &PathBuf| !p.starts_with(temp_dir) && !real(p).starts_with(real(temp_dir));
    let home = get("HOME").filter(|h| h.is_absolute() && h.is_dir());
    get("XDG_RUNTIME_DIR")
        .filter(|r| r.is_absolute() && r.is_dir() && outside_temp(r))
        .or_else(|| {
            get("XDG_STATE_HOME").filter(|s| s.is_absolute() && home.is_some() && outside_temp(s))
        })
        .or_else(|| home.map(|h| h.join(".local").join("state")))
        .map(|base| base.join("dsh-exec"))
        .unwrap_or_else(|| temp_dir.join(format!(".dsh-exec-{}", nix::unistd::geteuid())))
}

/// The default parent of a run's spill directory: `STATE/spill`, inside
/// `dsh-exec`'s own state directory, which every confining mode keeps
/// unreadable (the read deny list): a confined command cannot read the
/// output of other runs, confined or not. The temp dir when the state
/// directory is the temp-dir fallback (no usable runtime dir or HOME),
/// which a confined command may be granted. `STATE/spill` is created (0700)
/// when the run is prepared.
pub fn default_spill_parent(ambient: &Ambient) -> PathBuf {
    if ambient.state_dir.starts_with(&ambient.temp_dir) {
        ambient.temp_dir.clone()
    } else {
        ambient.state_dir.join("spill")
    }
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
        // An empty TMPDIR means unset (as for mktemp(1)); a relative one is
        // taken from the current directory, as every other path is.
        let temp_dir = std::env::var_os("TMPDIR")
            .filter(|t| !t.is_empty())
            .map(|t| absolute(&cwd, PathBuf::from(t)))
            .unwrap_or_else(|| PathBuf::from("/tmp"));
        let env: Vec<(OsString, OsString)> = std::env::vars_os().collect();
        let home = env
            .iter()
            .rev()
            .find(|(k, _)| k == "HOME")
            .map(|(_, v)| PathBuf::from(v))
            .filter(|h| h.is_absolute())
            // Real, as the writable roots are, so that "a root contains
            // it" compares like with like.
            .map(|h| std::fs::canonicalize(&h).unwrap_or(h));
        Ok(Ambient {
            cwd,
            state_dir: state_dir(&env, &temp_dir),
            env,
            temp_dir,
            can_create_pid_namespace: crate::sys::caps::holds(crate::sys::caps::CAP_SYS_ADMIN),
            home,
        })
    }
}

/// A request that cannot be resolved: a usage error
/// ([`crate::exit::USAGE`]).
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

/// The script of `-i` without a command: the user's shell (`$SHELL` of
/// `env`, else `bash`), interactive, in place of `bash -c`
/// (`exec /bin/zsh -i`).
pub fn interactive_shell(env: &[(OsString, OsString)]) -> String {
    let shell = env
        .iter()
        .rev()
        .find(|(k, _)| k == "SHELL")
        .and_then(|(_, v)| v.to_str())
        .filter(|v| !v.trim().is_empty())
        .and_then(|v| shlex::try_quote(v).ok())
        .map_or_else(|| "bash".to_string(), |q| q.into_owned());
    format!("exec {shell} -i")
}

fn absolute(base: &Path, p: PathBuf) -> PathBuf {
    if p.is_absolute() { p } else { base.join(p) }
}

pub use crate::spec::DEFAULT_SPILL_MAX_BYTES;

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

/// Lowers a limit (or "unlimited") to the cap, noting it: a cap of the
/// configuration file binds every run, also one that sets no limit.
fn cap_limit<T: Copy + PartialOrd>(
    s: &mut Sourced<Option<T>>,
    cap: Option<T>,
    show: impl Fn(T) -> String,
) {
    if let Some(max) = cap
        && s.value.is_none_or(|v| v > max)
    {
        let asked = s.value.map(&show).unwrap_or_else(|| "unlimited".into());
        s.capped = Some(format!("{asked} capped at {}", show(max)));
        s.value = Some(max);
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

/// Resolves a request into a spec, applying every default in one place.
///
/// Errors with a [`UsageError`] when the command is missing (but for an
/// interactive run, which then starts the user's shell:
/// [`interactive_shell`]) or empty.
pub fn resolve(req: Request, ambient: &Ambient) -> Result<Spec, UsageError> {
    let script = if req.command.is_empty() && req.interactive {
        interactive_shell(&ambient.env)
    } else {
        command_script(&req.command)?
    };
    let cwd = &ambient.cwd;
    if req.pty && (!req.background || req.detach) {
        return Err(UsageError(
            "--pty needs --background: the terminal's output is read with job read".into(),
        ));
    }
    if req.output_files && (req.background || req.interactive || req.stream.is_some() || req.pty) {
        return Err(UsageError(
            "--output-files: the output is read live there: not with --background, \
             --detach-after, -i, --stream or --pty"
                .into(),
        ));
    }
    if req.pty && (req.stdin_file.is_some() || req.interactive) {
        return Err(UsageError(
            "--pty gives the command a terminal of its own: no --stdin-file or -i beside it".into(),
        ));
    }
    if req.stdin_pipe && !req.background {
        return Err(UsageError(
            "--stdin pipe needs --background: a foreground run's stdin is closed or a file".into(),
        ));
    }
    if req.stdin_pipe && req.stdin_file.is_some() {
        return Err(UsageError(
            "--stdin pipe and --stdin-file cannot be given together".into(),
        ));
    }
    let stdin = if req.stdin_pipe {
        Some(StdinSource::Pipe)
    } else {
        req.stdin_file.clone().map(|p| {
            if p.as_os_str() == "-" {
                StdinSource::Inherited
            } else {
                StdinSource::File(absolute(cwd, p))
            }
        })
    };
    let workdir = Sourced::pick(req.workdir.clone().map(|p| absolute(cwd, p)), None, || {
        cwd.clone()
    });
    let sandbox = resolve_sandbox(&req, ambient, &workdir.value);
    // Read restrictions asked for on the command line must not be silently
    // without effect: they need a confining mode.
    let confining = sandbox.as_ref().is_some_and(|p| p.mode.value.confines());
    for (flag, given) in [
        ("--deny-read", !req.deny_read.is_empty()),
        ("--allow-read", !req.allow_read.is_empty()),
        ("--read-root", !req.read_roots.is_empty()),
    ] {
        if given && !confining {
            return Err(UsageError(format!(
                "{flag} needs --sandbox read-only or workspace-write"
            )));
        }
    }
    // A transaction overlays writable roots: workspace-write's.
    if let Some(p) = sandbox.as_ref().filter(|p| p.transaction.is_some())
        && p.mode.value != Mode::WorkspaceWrite
    {
        return Err(UsageError(format!(
            "--transaction needs --sandbox workspace-write (the writable roots it runs on \
             overlays), not {}",
            p.mode.value
        )));
    }
    if req.on_exit.is_some() && sandbox.as_ref().is_none_or(|p| p.transaction.is_none()) {
        return Err(UsageError("--on-exit needs --transaction".into()));
    }
    // --allow-write lifts protected files, which only writable roots hold.
    if !req.allow_write.is_empty()
        && !sandbox
            .as_ref()
            .is_some_and(|p| p.mode.value == Mode::WorkspaceWrite)
    {
        return Err(UsageError(
            "--allow-write needs --sandbox workspace-write".into(),
        ));
    }
    if let Some(policy) = &sandbox {
        let from_config = req
            .config
            .as_ref()
            .map_or(0, |c| c.defaults.allow_write.len());
        for (i, path) in policy.allow_write.iter().enumerate() {
            if let Some(why) = allow_write_problem(path, policy) {
                let named = if i < from_config {
                    "allow_write (configuration file)"
                } else {
                    "--allow-write"
                };
                return Err(UsageError(format!("{named} {}: {why}", path.display())));
            }
        }
    }
    // Credentials: checked against the allow-list, then read (a source
    // that is missing or empty is a usage error: nothing runs).
    // The flags' declarations replace the configuration file's as a whole
    // (a credential, its rules and its phantom belong together); the
    // file's apply to the runs with an allow-list alone, so that a
    // --network deny or loopback run is not refused for them.
    let allow = sandbox
        .as_ref()
        .filter(|p| p.network.value == crate::sandbox::Network::AllowList)
        .map(|p| &p.network_allow[..]);
    let (injection, from_config) = if !req.injection.is_empty() {
        (req.injection.clone(), false)
    } else {
        match (req.config.as_ref().map(|c| &c.defaults), allow) {
            (Some(d), Some(_)) => (
                crate::net::inject::Injection {
                    credentials: d.credentials.clone(),
                    inject: d.inject.clone(),
                    phantom_env: d.credential_env.clone(),
                    upstream_ca: d.upstream_ca.clone(),
                },
                true,
            ),
            _ => (crate::net::inject::Injection::default(), false),
        }
    };
    // Paths made absolute now: a job's supervisor runs elsewhere.
    let injection = crate::net::inject::Injection {
        upstream_ca: injection
            .upstream_ca
            .iter()
            .map(|p| absolute(cwd, p.clone()))
            .collect(),
        credentials: injection
            .credentials
            .iter()
            .map(|c| crate::net::inject::Credential {
                name: c.name.clone(),
                source: match &c.source {
                    crate::net::inject::Source::File(p) => {
                        crate::net::inject::Source::File(absolute(cwd, p.clone()))
                    }
                    other => other.clone(),
                },
            })
            .collect(),
        ..injection
    };
    let from_where = |e: String| {
        UsageError(if from_config {
            format!("{e} (from the configuration file's credentials)")
        } else {
            e
        })
    };
    injection.check(allow).map_err(from_where)?;
    crate::net::inject::check_upstream_ca(&injection.upstream_ca).map_err(from_where)?;
    for c in &injection.credentials {
        if let crate::net::inject::Source::Env(var) = &c.source
            && req.env.iter().any(|e| match e {
                EnvArg::Set(k, _) | EnvArg::PassThrough(k) => k == var,
            })
        {
            return Err(UsageError(format!(
                "--env {var} would give the command the value of --credential {c}: the \
                 command gets a phantom (--credential-env {}=VAR)",
                c.name
            )));
        }
    }
    let secrets = match &req.secrets {
        Some(s) => s.clone(),
        None => crate::net::inject::Secrets::load(&injection.credentials, &ambient.env)
            .map_err(from_where)?,
    };
    let mut sandbox = sandbox;
    if let Some(p) = sandbox.as_mut() {
        p.injection = injection.clone();
        // A file: source is a file the command must not read: it joins
        // the read deny list, which only a confining mode enforces.
        for c in &injection.credentials {
            if let crate::net::inject::Source::File(path) = &c.source {
                if !p.mode.value.confines() {
                    return Err(UsageError(format!(
                        "--credential {c}: a file: source needs --sandbox read-only or \
                         workspace-write, which keep the file from the command (in \
                         full-access it reads what dsh-exec reads); or use env: or fd:"
                    )));
                }
                let path = absolute(cwd, path.clone());
                if !p.deny_read.contains(&path) {
                    p.deny_read.push(path);
                }
            }
        }
    }
    let mut managed = req.dsh_env.clone();
    if let Some(policy) = &sandbox {
        managed.push(("DSH_SANDBOX_MODE".into(), policy.mode.value.as_str().into()));
        // Always, `allow` too: the default depends on the mode, so an
        // absent variable would leave the command to guess.
        managed.push((
            "DSH_SANDBOX_NETWORK".into(),
            policy.network.value.as_str().into(),
        ));
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
    // A background job has no deadline unless one is asked for.
    let builtin_timeout = (!req.background || req.detach).then_some(DEFAULT_TIMEOUT);
    let mut timeout = Sourced::pick(req.timeout, defaults.timeout, || builtin_timeout);
    cap_timeout(&mut timeout, caps.max_timeout);
    let mut stdout_max_bytes =
        Sourced::pick(req.stdout_max_bytes, defaults.stdout_max_bytes, || {
            DEFAULT_MAX_BYTES
        });
    cap_budget(&mut stdout_max_bytes, caps.max_stdout_bytes);
    let mut stderr_max_bytes =
        Sourced::pick(req.stderr_max_bytes, defaults.stderr_max_bytes, || {
            DEFAULT_MAX_BYTES
        });
    cap_budget(&mut stderr_max_bytes, caps.max_stderr_bytes);
    let mut spill_max_bytes = Sourced::pick(req.spill_max_bytes, defaults.spill_max_bytes, || {
        DEFAULT_SPILL_MAX_BYTES
    });
    cap_budget(&mut spill_max_bytes, caps.max_spill_bytes);
    let mut memory_max = Sourced::pick(req.memory_max, defaults.memory_max.map(Some), || None);
    cap_limit(&mut memory_max, caps.max_memory, format_size);
    let mut pids_max = Sourced::pick(req.pids_max, defaults.pids_max.map(Some), || None);
    cap_limit(&mut pids_max, caps.max_pids, |n| n.to_string());
    let mut cpu_max = Sourced::pick(req.cpu_max, defaults.cpu_max.map(Some), || None);
    cap_limit(&mut cpu_max, caps.max_cpu, format_duration);
    let mut file_size_max = Sourced::pick(
        req.file_size_max.map(Some),
        defaults.file_size_max.map(Some),
        || None,
    );
    cap_limit(&mut file_size_max, caps.max_file_size, format_size);
    let spill_dir = Sourced::pick(
        req.spill_dir.map(|p| absolute(cwd, p)),
        defaults.spill_dir.map(|p| absolute(cwd, p)),
        || default_spill_parent(ambient),
    );
    let spill_fallback = (spill_dir.origin == Origin::Default
        && spill_dir.value != ambient.temp_dir)
        .then(|| absolute(cwd, ambient.temp_dir.clone()));
    let render = Sourced::pick(req.render, defaults.render, Default::default);
    // `--render raw`, asked for, means the exact bytes, also on a
    // terminal; by default a terminal is shown the control sequences.
    let on_terminal = if render.value == Render::Raw && render.origin != Origin::Default {
        OnTerminal::Exact
    } else {
        OnTerminal::Escaped {
            colours: req.terminal_colours.unwrap_or(true),
        }
    };
    Ok(Spec {
        script,
        workdir,
        timeout,
        kill_after: Sourced::pick(req.kill_after, defaults.kill_after, || DEFAULT_KILL_AFTER),
        idle_timeout: Sourced::pick(req.idle_timeout, defaults.idle_timeout, || None),
        stdout_max_bytes,
        stderr_max_bytes,
        keep: Sourced::pick(req.keep, defaults.keep, Default::default),
        spill_max_bytes,
        file_size_max,
        memory_max,
        pids_max,
        cpu_max,
        limits: Sourced::pick(req.limits, defaults.limits, Default::default),
        signal: Sourced::pick(req.signal, None, || crate::signal::Signal::SIGTERM),
        prune_spill_after: defaults.prune_spill_after,
        render,
        stdin: Sourced::pick(stdin, None, || StdinSource::Closed),
        spill_dir,
        spill_fallback,
        env: EnvPlan::build(
            &ambient.env,
            req.interactive || req.pty,
            sandbox.as_ref().is_some_and(|p| p.mode.value.confines()),
            req.env_policy
                .or_else(|| req.config.as_ref().and_then(|c| c.defaults.env_policy))
                .unwrap_or_default(),
            &req.env,
            &managed,
        )
        .on_terminal(req.pty)
        .withholding(
            injection
                .credentials
                .iter()
                .filter_map(|c| match &c.source {
                    crate::net::inject::Source::Env(var) => Some(var.as_str()),
                    _ => None,
                }),
        ),
        secrets,
        sandbox,
        interactive: req.interactive,
        stream: if req.background { None } else { req.stream },
        on_terminal,
        config_file: req.config.map(|c| c.path),
        pid_namespace: req.background && ambient.can_create_pid_namespace,
        pty: req.pty,
        output_files: req.output_files,
    })
}

pub use crate::sandbox::defaults::{
    READ_DENIED_IN_HOME, READABLE_DEVICES, SYSTEM_READ_ROOTS, cache_dirs,
};

/// Why `path` (absolute) cannot be lifted with `--allow-write`, if it
/// cannot: it must name an entry of
/// [`AGENT_FILES`](crate::sandbox::protect::AGENT_FILES) (whether the
/// entry is protected in a run is known when the run is prepared: one that
/// is not gets a warning), and never `dsh-exec`'s own configuration or
/// state. Checked here, before anything runs, so that a typo is a usage
/// error rather than a lift of nothing.
fn allow_write_problem(path: &Path, policy: &Policy) -> Option<String> {
    use crate::sandbox::protect::AGENT_FILES;
    let own = [
        Some(policy.state_dir.clone()),
        policy.config_path.clone(),
        policy.home.as_ref().map(|h| h.join(".config/dsh-exec")),
    ];
    if own.iter().flatten().any(|o| path.starts_with(o)) {
        return Some("dsh-exec's own configuration and state stay protected".into());
    }
    let is_entry = |p: &Path| {
        p.file_name()
            .is_some_and(|n| AGENT_FILES.iter().any(|e| n == *e))
    };
    if is_entry(path) {
        return None;
    }
    if let Some(entry) = path.ancestors().skip(1).find(|a| is_entry(a)) {
        return Some(format!(
            "it lies inside the protected {0}; --allow-write lifts a whole entry: \
             --allow-write {0}",
            entry.display()
        ));
    }
    Some(format!(
        "it names no protected entry (one of {})",
        AGENT_FILES.join(", ")
    ))
}

/// `path` with a leading `~/` taken from `home`.
fn tilde(path: &Path, home: Option<&Path>) -> PathBuf {
    match (path.strip_prefix("~"), home) {
        (Ok(rest), Some(home)) => home.join(rest),
        _ => path.to_path_buf(),
    }
}

/// Whether a program named `name` is an executable file in one of the
/// absolute directories of `$PATH` in `env`.
fn on_path(env: &[(OsString, OsString)], name: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let Some((_, path)) = env.iter().rev().find(|(k, _)| k == "PATH") else {
        return false;
    };
    std::env::split_paths(path)
        .filter(|d| d.is_absolute())
        .any(|d| {
            std::fs::metadata(d.join(name))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// The sandbox policy of a request, paths made absolute.
fn resolve_sandbox(req: &Request, ambient: &Ambient, workdir: &Path) -> Option<Policy> {
    let config_mode = req.config.as_ref().and_then(|c| c.defaults.sandbox);
    let config_allow: Vec<crate::net::rules::HostRule> = req
        .config
        .iter()
        .flat_map(|c| c.defaults.network_allow.clone())
        .collect();
    // The configuration file's `network`; `allow` alone asks for nothing
    // an unconfined run does not have already.
    let config_network = req.config.as_ref().and_then(|c| c.defaults.network);
    let config_transaction = req.config.as_ref().and_then(|c| c.defaults.transaction);
    let transaction = if req.transaction {
        Some(crate::origin::Origin::Flag)
    } else if config_transaction == Some(true) {
        Some(crate::origin::Origin::Config)
    } else {
        None
    };
    if req.sandbox.is_none()
        && transaction.is_none()
        && config_mode.is_none()
        && req.network.is_none()
        && config_allow.is_empty()
        && config_network.is_none_or(|n| n == Network::Allow)
    {
        return None;
    }
    // A transaction's writes must all land in its layers: it confines as
    // workspace-write unless a mode was named.
    let mode = Sourced::pick(req.sandbox, config_mode, || {
        if transaction.is_some() {
            Mode::WorkspaceWrite
        } else {
            Mode::FullAccess
        }
    });
    // A flag's policy, else the configuration file's (its allow-list or its
    // `network`), else the mode's default: `loopback` in the confining
    // modes, `allow` in full-access.
    let default = || Network::default_for(mode.value);
    let (network, network_allow) = match req.network {
        Some(Network::AllowList) => (
            Sourced::pick(Some(Network::AllowList), None, default),
            req.network_allow.clone(),
        ),
        Some(n) => (Sourced::pick(Some(n), None, default), Vec::new()),
        None if !config_allow.is_empty() => (
            Sourced::pick(None, Some(Network::AllowList), default),
            config_allow,
        ),
        None => (Sourced::pick(None, config_network, default), Vec::new()),
    };
    // read-only, and workspace-write without the temp dir, get a private
    // scratch directory: no temp dir at all breaks pytest, heredocs and sort.
    let scratch =
        mode.value == Mode::ReadOnly || (mode.value == Mode::WorkspaceWrite && req.no_temp_write);
    // Flags replace the configuration file's list, as for every other value.
    let writable_roots = match (&req.writable_roots[..], &req.config) {
        ([], Some(c)) => c.defaults.writable_roots.clone(),
        (flags, _) => flags.to_vec(),
    };
    let allow_caches = req.allow_caches
        || req
            .config
            .as_ref()
            .is_some_and(|c| c.defaults.allow_caches == Some(true));
    // The caches that exist, and those of the tools on $PATH (made when the
    // run starts, as the tool would make them).
    let caches: Vec<PathBuf> = if allow_caches && mode.value == Mode::WorkspaceWrite {
        cache_dirs(&ambient.env, ambient.home.as_deref())
            .into_iter()
            .filter(|(dir, tools)| dir.is_dir() || tools.iter().any(|t| on_path(&ambient.env, t)))
            .map(|(dir, _)| dir)
            .collect()
    } else {
        Vec::new()
    };
    let unix_sockets = match (&req.allow_unix_sockets[..], &req.config) {
        ([], Some(c)) => c.defaults.allow_unix_sockets.clone(),
        (flags, _) => flags.to_vec(),
    };
    // The read deny list: the defaults in each home, the state directory
    // (jobs, private spill files), the configuration file's and the flags'
    // additions; then the lifted entries removed, and those inside a denied
    // directory kept as exceptions.
    let home = ambient.home.as_deref();
    let mut homes: Vec<&Path> = home.into_iter().collect();
    if nix::unistd::geteuid().is_root() && home != Some(Path::new("/root")) {
        homes.push(Path::new("/root"));
    }
    let config_lists = |pick: fn(&config::Defaults) -> &Vec<PathBuf>| -> Vec<PathBuf> {
        req.config
            .iter()
            .flat_map(|c| pick(&c.defaults).clone())
            .collect()
    };
    let allow_read: Vec<PathBuf> = config_lists(|d| &d.allow_read)
        .iter()
        .chain(&req.allow_read)
        .map(|p| absolute(&ambient.cwd, tilde(p, home)))
        .collect();
    let deny_read: Vec<PathBuf> = homes
        .iter()
        .flat_map(|h| READ_DENIED_IN_HOME.iter().map(|e| h.join(e)))
        // The state directory, unless it is the fallback inside the temp
        // dir (no home): denying it would split the temp dir's grant, and
        // no new file directly in $TMPDIR could be written. It stays
        // protected (read-only) there.
        .chain(Some(ambient.state_dir.clone()).filter(|s| !s.starts_with(&ambient.temp_dir)))
        .chain(std::iter::once(PathBuf::from("/dev")))
        .chain(
            config_lists(|d| &d.deny_read)
                .iter()
                .chain(&req.deny_read)
                .map(|p| absolute(&ambient.cwd, tilde(p, home))),
        )
        .filter(|d| !allow_read.iter().any(|a| d.starts_with(a)))
        .collect();
    let read_exceptions: Vec<PathBuf> = allow_read
        .into_iter()
        .chain(READABLE_DEVICES.iter().map(PathBuf::from))
        .filter(|a| deny_read.iter().any(|d| a.starts_with(d) && a != d))
        .collect();
    let read_roots: Vec<PathBuf> = match (&req.read_roots[..], &req.config) {
        ([], Some(c)) => c.defaults.read_roots.clone(),
        (flags, _) => flags.to_vec(),
    }
    .into_iter()
    .map(|p| absolute(&ambient.cwd, tilde(&p, home)))
    .collect();
    // Protected paths add up: the configuration file's and the flags'.
    let protect: Vec<PathBuf> = req
        .config
        .iter()
        .flat_map(|c| c.defaults.protect.clone())
        .chain(req.protect.iter().cloned())
        .collect();
    // So do the lifted ones, taken from the workdir: `.vscode` is the
    // workdir's.
    let allow_write: Vec<PathBuf> = config_lists(|d| &d.allow_write)
        .iter()
        .chain(&req.allow_write)
        .map(|p| absolute(workdir, tilde(p, home)))
        .collect();
    Some(Policy {
        injection: Default::default(),
        mode,
        network,
        network_allow,
        workspace_root_inode: None,
        workspace_root: Sourced::pick(
            req.workspace_root
                .clone()
                .map(|p| absolute(&ambient.cwd, p)),
            None,
            || workdir.to_path_buf(),
        ),
        writable_roots: writable_roots
            .into_iter()
            .map(|p| absolute(&ambient.cwd, p))
            .collect(),
        caches,
        temp_dir: (!req.no_temp_write).then(|| absolute(&ambient.cwd, ambient.temp_dir.clone())),
        unix_sockets: unix_sockets
            .into_iter()
            .map(|p| absolute(&ambient.cwd, p))
            .collect(),
        protect: protect
            .into_iter()
            .map(|p| absolute(&ambient.cwd, p))
            .collect(),
        allow_write,
        home: ambient.home.clone(),
        deny_read,
        read_exceptions,
        read_roots,
        config_path: req
            .config
            .as_ref()
            .map(|c| c.path.clone())
            .or_else(|| config::location(&ambient.env).map(|(p, _)| p))
            .map(|p| absolute(&ambient.cwd, p)),
        state_dir: ambient.state_dir.clone(),
        scratch_parent: scratch.then(|| absolute(&ambient.cwd, ambient.temp_dir.clone())),
        transaction: transaction.map(|origin| crate::sandbox::overlay::TransactionPolicy {
            origin,
            on_exit: Sourced::pick(
                req.on_exit,
                req.config.as_ref().and_then(|c| c.defaults.on_exit),
                || crate::sandbox::overlay::OnExit::Keep,
            ),
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runtime_dir_inside_the_temp_dir_is_not_the_state_dir() {
        let temp = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        let runtime = temp.path().join("runtime-0");
        std::fs::create_dir(&runtime).unwrap();
        let env: Vec<(OsString, OsString)> = vec![
            ("XDG_RUNTIME_DIR".into(), runtime.clone().into()),
            ("HOME".into(), home.path().into()),
        ];
        assert_eq!(
            state_dir(&env, temp.path()),
            home.path().join(".local/state/dsh-exec")
        );
        let elsewhere = tempfile::tempdir().unwrap();
        let env: Vec<(OsString, OsString)> = vec![
            ("XDG_RUNTIME_DIR".into(), elsewhere.path().into()),
            ("HOME".into(), home.path().into()),
        ];
        assert_eq!(
            state_dir(&env, temp.path()),
            elsewhere.path().join("dsh-exec")
        );
        // Nor one that reaches the temp dir through a symlink.
        let link = elsewhere.path().join("run");
        std::os::unix::fs::symlink(&runtime, &link).unwrap();
        let env: Vec<(OsString, OsString)> = vec![
            ("XDG_RUNTIME_DIR".into(), link.into()),
            ("HOME".into(), home.path().into()),
        ];
        assert_eq!(
            state_dir(&env, temp.path()),
            home.path().join(".local/state/dsh-exec")
        );
    }
    use crate::spec::Origin;

    fn ambient() -> Ambient {
        Ambient {
            cwd: "/work".into(),
            env: vec![],
            temp_dir: "/tmp".into(),
            can_create_pid_namespace: false,
            home: Some("/home/u".into()),
            state_dir: "/home/u/.local/state/dsh-exec".into(),
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
        assert_eq!(
            spec.spill_dir.value,
            PathBuf::from("/home/u/.local/state/dsh-exec/spill")
        );
    }

    #[test]
    fn a_terminal_is_shown_escapes_unless_raw_is_asked_for() {
        let on_terminal = |render, colours| {
            let req = Request {
                command: vec!["x".into()],
                render,
                terminal_colours: colours,
                ..Request::default()
            };
            resolve(req, &ambient()).unwrap().on_terminal
        };
        assert_eq!(
            on_terminal(None, None),
            OnTerminal::Escaped { colours: true }
        );
        assert_eq!(
            on_terminal(Some(Render::Plain), Some(false)),
            OnTerminal::Escaped { colours: false }
        );
        assert_eq!(on_terminal(Some(Render::Raw), None), OnTerminal::Exact);
    }

    #[test]
    fn interactive_without_a_command_is_the_users_shell() {
        let shell = |env: Vec<(&str, &str)>| {
            let req = Request {
                interactive: true,
                ..Request::default()
            };
            let env = env.into_iter().map(|(k, v)| (k.into(), v.into())).collect();
            resolve(req, &Ambient { env, ..ambient() }).unwrap().script
        };
        assert_eq!(shell(vec![("SHELL", "/bin/zsh")]), "exec /bin/zsh -i");
        assert_eq!(
            shell(vec![("SHELL", "/opt/my shell")]),
            "exec '/opt/my shell' -i"
        );
        assert_eq!(shell(vec![("SHELL", "")]), "exec bash -i");
        assert_eq!(shell(vec![]), "exec bash -i");
        // Without -i, no command is still a usage error.
        assert!(resolve(Request::default(), &ambient()).is_err());
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
    fn the_network_policy_is_the_flag_s_then_the_file_s_then_the_mode_s_default() {
        let config = |network: Option<Network>, sandbox: Option<Mode>| Config {
            path: "/c.toml".into(),
            defaults: config::Defaults {
                network,
                sandbox,
                ..Default::default()
            },
            caps: Default::default(),
        };
        let policy = |sandbox: Option<Mode>, network: Option<Network>, config: Option<Config>| {
            let req = Request {
                command: vec!["true".into()],
                sandbox,
                network,
                config,
                ..Request::default()
            };
            let spec = resolve(req, &ambient()).unwrap();
            spec.sandbox.map(|p| {
                let net = spec
                    .env
                    .settings
                    .iter()
                    .find(|s| s.name == "DSH_SANDBOX_NETWORK");
                assert_eq!(
                    net.map(|s| s.value.clone()),
                    Some(p.network.value.as_str().into())
                );
                (p.network.value, p.network.origin, p.network_source())
            })
        };
        let default =
            |n: Network, mode: &str| Some((n, Origin::Default, format!("default for {mode}")));
        // No flag, no file: loopback when the mode confines, allow otherwise.
        assert_eq!(
            policy(Some(Mode::ReadOnly), None, None),
            default(Network::Loopback, "read-only")
        );
        assert_eq!(
            policy(Some(Mode::WorkspaceWrite), None, None),
            default(Network::Loopback, "workspace-write")
        );
        assert_eq!(
            policy(Some(Mode::FullAccess), None, None),
            default(Network::Allow, "full-access")
        );
        // The file's mode is a mode like the flag's.
        assert_eq!(
            policy(None, None, Some(config(None, Some(Mode::WorkspaceWrite)))),
            default(Network::Loopback, "workspace-write")
        );
        // A flag and the file's key open it (or close it further).
        assert_eq!(
            policy(Some(Mode::WorkspaceWrite), Some(Network::Allow), None),
            Some((Network::Allow, Origin::Flag, "flag".into()))
        );
        assert_eq!(
            policy(
                Some(Mode::ReadOnly),
                None,
                Some(config(Some(Network::Allow), None))
            ),
            Some((Network::Allow, Origin::Config, "config".into()))
        );
        assert_eq!(
            policy(
                Some(Mode::WorkspaceWrite),
                Some(Network::Deny),
                Some(config(Some(Network::Allow), None))
            ),
            Some((Network::Deny, Origin::Flag, "flag".into()))
        );
        // The file's `network` alone: deny and loopback confine the network
        // of every run (in full-access, as `--network` alone does); allow
        // asks for nothing an unconfined run lacks.
        assert_eq!(
            policy(None, None, Some(config(Some(Network::Deny), None))),
            Some((Network::Deny, Origin::Config, "config".into()))
        );
        assert_eq!(
            policy(None, None, Some(config(Some(Network::Allow), None))),
            None
        );
        assert_eq!(policy(None, None, None), None);
    }

    #[test]
    fn empty_commands_are_usage_errors() {
        assert!(command_script(&[]).is_err());
        assert!(command_script(&["  ".into()]).is_err());
    }

    #[test]
    fn a_background_job_has_no_default_deadline_but_keeps_an_asked_one() {
        let job = |timeout| Request {
            command: vec!["true".into()],
            background: true,
            timeout,
            stream: Some(LiveOutput::Mirrored),
            ..Request::default()
        };
        let spec = resolve(job(None), &ambient()).unwrap();
        assert_eq!(spec.timeout.value, None);
        assert_eq!(spec.timeout.origin, Origin::Default);
        assert_eq!(spec.stream, None);
        let spec = resolve(job(Some(Some(Duration::from_secs(5)))), &ambient()).unwrap();
        assert_eq!(spec.timeout.value, Some(Duration::from_secs(5)));
        // --detach-after started as a foreground run: its deadline stays.
        let detached = Request {
            detach: true,
            ..job(None)
        };
        let spec = resolve(detached, &ambient()).unwrap();
        assert_eq!(spec.timeout.value, Some(DEFAULT_TIMEOUT));
        assert_eq!(spec.timeout.origin, Origin::Default);
    }

    /// The supervisor handoff: every field of a spec survives serialization,
    /// non-UTF-8 paths and environment values included.
    #[test]
    fn a_limit_cap_lowers_a_larger_limit_and_binds_a_run_that_sets_none() {
        let config = |caps: config::Caps| Config {
            path: "/etc/dsh.toml".into(),
            caps,
            ..Config::default()
        };
        let caps = config::Caps {
            max_memory: Some(1 << 30),
            max_pids: Some(256),
            max_cpu: Some(Duration::from_secs(60)),
            max_file_size: Some(1 << 20),
            ..config::Caps::default()
        };
        let asked = Request {
            command: vec!["true".into()],
            memory_max: Some(Some(2 << 30)),
            pids_max: Some(Some(100)),
            config: Some(config(caps.clone())),
            ..Request::default()
        };
        let spec = resolve(asked, &ambient()).unwrap();
        assert_eq!(spec.memory_max.value, Some(1 << 30));
        assert_eq!(spec.pids_max.value, Some(100));
        assert_eq!(spec.cpu_max.value, Some(Duration::from_secs(60)));
        assert_eq!(spec.file_size_max.value, Some(1 << 20));
        // Only what was asked for is noted; the rest is the operator's.
        assert_eq!(
            spec.capped_notes(),
            ["memory-max 2GiB capped at 1GiB by /etc/dsh.toml"]
        );
        assert_eq!(
            spec.cpu_max.capped.as_deref(),
            Some("unlimited capped at 1m")
        );
        let none = resolve(
            Request {
                command: vec!["true".into()],
                ..Request::default()
            },
            &ambient(),
        )
        .unwrap();
        assert_eq!(
            (
                none.memory_max.value,
                none.pids_max.value,
                none.cpu_max.value
            ),
            (None, None, None)
        );
        assert_eq!(none.limits.value, crate::limits::LimitMode::Strict);
    }

    #[test]
    fn a_spec_round_trips_through_its_serialized_form() {
        use std::os::unix::ffi::OsStringExt;
        let odd = || PathBuf::from(OsString::from_vec(b"/w/\xff\xfe".to_vec()));
        let ambient = Ambient {
            env: vec![
                ("PLAIN".into(), "1".into()),
                ("BYTES".into(), OsString::from_vec(b"\x80\x81".to_vec())),
                ("MY_TOKEN".into(), "s3cret".into()),
            ],
            can_create_pid_namespace: true,
            ..ambient()
        };
        let req = Request {
            command: vec!["echo".into(), "a b".into()],
            workdir: Some(odd()),
            timeout: Some(Some(Duration::from_millis(1500))),
            kill_after: Some(Duration::from_millis(300)),
            idle_timeout: Some(Some(Duration::from_millis(700))),
            stdout_max_bytes: Some(10),
            stderr_max_bytes: Some(20),
            keep: Some(crate::capture::Keep::HeadTail),
            spill_max_bytes: Some(1 << 20),
            file_size_max: Some(1 << 30),
            memory_max: Some(Some(64 << 20)),
            pids_max: Some(Some(32)),
            cpu_max: Some(Some(Duration::from_millis(2500))),
            limits: Some(crate::limits::LimitMode::BestEffort),
            signal: Some(crate::signal::Signal::SIGINT),
            render: Some(crate::spec::Render::Plain),
            stdin_file: Some(odd()),
            stdin_pipe: false,
            pty: false,
            output_files: false,
            env_policy: None,
            env: vec![
                EnvArg::Set("A".into(), "b".into()),
                EnvArg::PassThrough("MY_TOKEN".into()),
            ],
            dsh_env: vec![("DSH_X".into(), "y".into())],
            spill_dir: Some("/spill".into()),
            sandbox: Some(Mode::WorkspaceWrite),
            network: Some(Network::AllowList),
            network_allow: vec!["*.example.org:8443".parse().unwrap()],
            workspace_root: Some("/ws".into()),
            writable_roots: vec![odd(), "/cache".into()],
            allow_unix_sockets: vec![odd()],
            protect: vec![odd()],
            allow_write: vec!["/ws/.vscode".into()],
            deny_read: vec![],
            read_roots: vec![],
            allow_read: vec![],
            no_temp_write: false,
            allow_caches: false,
            transaction: false,
            on_exit: None,
            interactive: false,
            stream: None,
            terminal_colours: Some(false),
            background: true,
            detach: false,
            config: Some(Config {
                path: odd(),
                ..Config::default()
            }),
            injection: Default::default(),
            secrets: None,
        };
        let spec = resolve(req, &ambient).unwrap();
        let text = serde_json::to_string(&spec).unwrap();
        let back: Spec = serde_json::from_str(&text).unwrap();
        assert_eq!(back, spec);
        assert!(spec.pid_namespace);
        assert_eq!(spec.env.child_env(), back.env.child_env());
    }
}
