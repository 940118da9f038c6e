//! The optional configuration file: defaults, and caps that flags cannot
//! exceed.
//!
//! Found at `$DSH_EXEC_CONFIG`, else `$XDG_CONFIG_HOME/dsh-exec/config.toml`,
//! else `~/.config/dsh-exec/config.toml`. Precedence: flag, then config file,
//! then built-in default; a value above a cap is clamped to it, and both
//! `explain` and the result say so.
//!
//! ```toml
//! [defaults]
//! timeout = "10m"            # durations as on the command line, or seconds
//! kill_after = "2s"
//! idle_timeout = "5m"         # end a run whose output stays silent this long
//! stdout_max_bytes = "1MiB"  # sizes as on the command line, or bytes
//! stderr_max_bytes = "1MiB"
//! keep = "head+tail"         # as --keep
//! spill_max_bytes = "512MiB" # as --spill-max-bytes
//! file_size_max = "1GiB"     # as --file-size-max
//! memory_max = "4GiB"        # as --memory-max
//! pids_max = 512             # as --pids-max
//! cpu_max = "30m"            # as --cpu-max
//! limits = "best-effort"     # as --limits
//! render = "plain"           # as --render
//! spill_dir = "/var/tmp"
//! sandbox = "workspace-write"
//! writable_roots = ["/srv/cache"]
//! allow_unix_sockets = ["/run/postgresql/.s.PGSQL.5432"]
//! protect = ["/srv/cache/trusted"]
//! allow_write = [".vscode"]  # added to --allow-write
//! allow_caches = true        # as --allow-caches
//! transaction = true         # as --transaction
//! on_exit = "keep"           # as --on-exit commit|discard|keep
//! deny_read = ["~/.config/op"] # added to --deny-read
//! allow_read = ["~/.npmrc"]    # added to --allow-read
//! read_roots = ["~/src"]       # as --read-root (flags replace it)
//! env_policy = "core"          # as --env-policy
//! network = "allow"            # as --network allow|deny|loopback
//! network_allow = ["pypi.org", "*.pythonhosted.org"] # as --network allow= (not with network)
//! prune_spill_after = "7d"     # prune old spill directories at each start
//!
//! [caps]
//! max_timeout = "1h"
//! max_stdout_bytes = "16MiB"
//! max_stderr_bytes = "16MiB"
//! max_spill_bytes = "1GiB"   # the largest --spill-max-bytes
//! max_memory = "8GiB"        # the largest --memory-max; also every run's limit
//! max_pids = 1024            # the largest --pids-max; also every run's limit
//! max_cpu = "1h"             # the largest --cpu-max; also every run's limit
//! max_file_size = "4GiB"     # the largest --file-size-max; also every run's limit
//! ```

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Deserializer};

use crate::error::{ConfigProblem, Error};
use crate::sandbox::Mode;
use crate::units::{parse_budget, parse_duration, parse_timeout};

/// A loaded configuration file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Config {
    /// Where it was read from.
    pub path: PathBuf,
    /// Defaults for values no flag gives.
    pub defaults: Defaults,
    /// Caps no value may exceed.
    pub caps: Caps,
}

/// The `[defaults]` table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Defaults {
    /// Deadline; `Some(None)` is no deadline (`0` or `"none"`).
    #[serde(default, deserialize_with = "timeout")]
    pub timeout: Option<Option<Duration>>,
    /// Grace period between SIGTERM and SIGKILL.
    #[serde(default, deserialize_with = "duration")]
    pub kill_after: Option<Duration>,
    /// `idle_timeout`: end a run whose output stays silent this long;
    /// `Some(None)` is none (`0` or `"none"`).
    #[serde(default, deserialize_with = "timeout")]
    pub idle_timeout: Option<Option<Duration>>,
    /// Tail budget of stdout, in bytes.
    #[serde(default, deserialize_with = "budget")]
    pub stdout_max_bytes: Option<u64>,
    /// Tail budget of stderr, in bytes.
    #[serde(default, deserialize_with = "budget")]
    pub stderr_max_bytes: Option<u64>,
    /// RLIMIT_FSIZE for the command (`--file-size-max`).
    #[serde(default, deserialize_with = "size")]
    pub file_size_max: Option<u64>,
    /// The cap per spill file, in bytes (`--spill-max-bytes`).
    #[serde(default, deserialize_with = "size")]
    pub spill_max_bytes: Option<u64>,
    /// The whole tree's memory, in bytes (`--memory-max`).
    #[serde(default, deserialize_with = "memory")]
    pub memory_max: Option<u64>,
    /// Processes and threads at once (`--pids-max`).
    #[serde(default, deserialize_with = "count")]
    pub pids_max: Option<u64>,
    /// CPU time of the tree (`--cpu-max`).
    #[serde(default, deserialize_with = "cpu_time")]
    pub cpu_max: Option<Duration>,
    /// What a limit that cannot be enforced does (`--limits`):
    /// `strict` or `best-effort`.
    #[serde(default, deserialize_with = "parsed")]
    pub limits: Option<crate::limits::LimitMode>,
    /// Which part of an outgrown stream the result keeps (`--keep`):
    /// `tail`, `head` or `head+tail`.
    #[serde(default, deserialize_with = "parsed")]
    pub keep: Option<crate::capture::Keep>,
    /// How the text is rendered (`--render`): `raw` or `plain`.
    #[serde(default, deserialize_with = "parsed")]
    pub render: Option<crate::spec::Render>,
    /// Parent of the private spill directories.
    pub spill_dir: Option<PathBuf>,
    /// Sandbox mode.
    #[serde(default, deserialize_with = "mode")]
    pub sandbox: Option<Mode>,
    /// Writable roots for `workspace-write`.
    #[serde(default)]
    pub writable_roots: Vec<PathBuf>,
    /// Unix sockets a confined command may connect to.
    #[serde(default)]
    pub allow_unix_sockets: Vec<PathBuf>,
    /// Paths kept read-only inside writable roots, besides the built-in
    /// ones (added to `--protect`, not replaced by it).
    #[serde(default)]
    pub protect: Vec<PathBuf>,
    /// Entries of the protected editor and agent files left writable
    /// (added to `--allow-write`); relative to the working directory, `~/`
    /// the home.
    #[serde(default)]
    pub allow_write: Vec<PathBuf>,
    /// Make the package caches writable in `workspace-write`
    /// (`--allow-caches`); `--allow-caches` on the command line adds to it.
    #[serde(default)]
    pub allow_caches: Option<bool>,
    /// Run every command as a transaction (`--transaction`).
    #[serde(default)]
    pub transaction: Option<bool>,
    /// What happens to a transaction when its run ends (`--on-exit`).
    #[serde(default, deserialize_with = "parsed")]
    pub on_exit: Option<crate::sandbox::overlay::OnExit>,
    /// Credentials the proxy injects (`--credential NAME=SOURCE`); flags
    /// replace the list.
    #[serde(default)]
    pub credentials: Vec<crate::net::inject::Credential>,
    /// Where they go (`--inject HOST[:PORT][/PREFIX]=SCHEME:NAME`); flags
    /// replace the list.
    #[serde(default)]
    pub inject: Vec<crate::net::inject::InjectRule>,
    /// The command's phantom variables (`--credential-env NAME=VAR`);
    /// flags replace the list.
    #[serde(default)]
    pub credential_env: Vec<crate::net::inject::PhantomVar>,
    /// Certificates trusted for upstream TLS beside the system's roots
    /// (`--upstream-ca`); flags replace the list.
    #[serde(default)]
    pub upstream_ca: Vec<std::path::PathBuf>,
    /// More paths unreadable in the confining modes (added to
    /// `--deny-read`); `~/` is the home.
    #[serde(default)]
    pub deny_read: Vec<PathBuf>,
    /// The read allow-list (`--read-root`); flags replace it.
    #[serde(default)]
    pub read_roots: Vec<PathBuf>,
    /// Entries of the read deny list lifted (added to `--allow-read`).
    #[serde(default)]
    pub allow_read: Vec<PathBuf>,
    /// Which ambient variables the command inherits (`--env-policy`):
    /// `inherit`, `core` or `none`.
    #[serde(default)]
    pub env_policy: Option<crate::request::env::EnvPolicy>,
    /// Prune this user's spill directories unchanged for this long at the
    /// start of every run and job (as `dsh-exec prune --spill
    /// --older-than`); unset: never on its own.
    #[serde(default, deserialize_with = "prune_age")]
    pub prune_spill_after: Option<Duration>,
    /// The network allow-list (`--network allow=HOSTS`), the policy of runs
    /// whose flags name none; a `--network` flag replaces it.
    #[serde(default)]
    pub network_allow: Vec<crate::net::rules::HostRule>,
    /// The network policy of runs whose flags name none (`--network`):
    /// `allow`, `deny` or `loopback`; a `--network` flag replaces it.
    /// Unset: `loopback` in the confining modes, `allow` in full-access.
    /// Not beside `network_allow`, which is the `allow=` policy.
    #[serde(default, deserialize_with = "network")]
    pub network: Option<crate::sandbox::Network>,
}

/// The `[caps]` table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Caps {
    /// Longest deadline; also replaces "no deadline". At least 1 ms.
    #[serde(default, deserialize_with = "cap_timeout")]
    pub max_timeout: Option<Duration>,
    /// Largest stdout budget, in bytes.
    #[serde(default, deserialize_with = "budget")]
    pub max_stdout_bytes: Option<u64>,
    /// Largest stderr budget, in bytes.
    #[serde(default, deserialize_with = "budget")]
    pub max_stderr_bytes: Option<u64>,
    /// Largest spill file, in bytes (`--spill-max-bytes` cannot exceed it).
    #[serde(default, deserialize_with = "size")]
    pub max_spill_bytes: Option<u64>,
    /// Largest `--memory-max`, in bytes; a run that sets none gets it.
    #[serde(default, deserialize_with = "memory")]
    pub max_memory: Option<u64>,
    /// Largest `--pids-max`; a run that sets none gets it.
    #[serde(default, deserialize_with = "count")]
    pub max_pids: Option<u64>,
    /// Largest `--cpu-max`; a run that sets none gets it.
    #[serde(default, deserialize_with = "cpu_time")]
    pub max_cpu: Option<Duration>,
    /// Largest `--file-size-max`, in bytes; a run that sets none gets it.
    #[serde(default, deserialize_with = "size")]
    pub max_file_size: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    defaults: Defaults,
    #[serde(default)]
    caps: Caps,
}

/// A duration, size or count written as a string, or as a bare number.
enum Text {
    Str(String),
    Int(u64),
    Float(f64),
}

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Text, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Text;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string such as \"30s\" or \"1GiB\", or a whole number")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Text, E> {
                Ok(Text::Str(v.to_string()))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Text, E> {
                Ok(Text::Int(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Text, E> {
                u64::try_from(v)
                    .map(Text::Int)
                    .map_err(|_| E::custom(format!("{v} is negative")))
            }
            fn visit_i128<E: serde::de::Error>(self, v: i128) -> Result<Text, E> {
                u64::try_from(v)
                    .map(Text::Int)
                    .map_err(|_| E::custom(format!("{v} is out of range")))
            }
            fn visit_u128<E: serde::de::Error>(self, v: u128) -> Result<Text, E> {
                u64::try_from(v)
                    .map(Text::Int)
                    .map_err(|_| E::custom(format!("{v} is out of range")))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Text, E> {
                Ok(Text::Float(v))
            }
        }
        d.deserialize_any(Visitor)
    }
}

impl Text {
    fn into_string(self) -> String {
        match self {
            Text::Str(s) => s,
            Text::Int(n) => n.to_string(),
            Text::Float(f) => f.to_string(),
        }
    }
}

fn timeout<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<Duration>>, D::Error> {
    let text = Text::deserialize(d)?.into_string();
    parse_timeout(&text)
        .map(Some)
        .map_err(serde::de::Error::custom)
}

fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    let text = Text::deserialize(d)?.into_string();
    parse_duration(&text)
        .map(Some)
        .map_err(serde::de::Error::custom)
}

/// `prune_spill_after`: at least an hour. Pruning is unattended, and a
/// shorter age would remove the spill files of runs that are still going
/// but quiet, and those the last results name.
fn prune_age<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    let text = Text::deserialize(d)?.into_string();
    match parse_duration(&text).map_err(serde::de::Error::custom)? {
        d if d < Duration::from_secs(3600) => Err(serde::de::Error::custom(format!(
            "prune_spill_after '{text}' is less than 1h: it would remove the spill files of \
             quiet runs still going (leave it out to never prune)"
        ))),
        d => Ok(Some(d)),
    }
}

/// A byte size as on the command line (`512MiB`), or a number of bytes.
fn size<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let text = Text::deserialize(d)?.into_string();
    crate::units::parse_size(&text)
        .map(Some)
        .map_err(serde::de::Error::custom)
}

fn memory<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let text = Text::deserialize(d)?.into_string();
    crate::units::parse_memory_max(&text)
        .map(Some)
        .map_err(serde::de::Error::custom)
}

fn count<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let text = Text::deserialize(d)?.into_string();
    crate::units::parse_pids_max(&text)
        .map(Some)
        .map_err(serde::de::Error::custom)
}

fn cpu_time<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    let text = Text::deserialize(d)?.into_string();
    crate::units::parse_cpu_max(&text)
        .map(Some)
        .map_err(serde::de::Error::custom)
}

fn cap_timeout<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    let text = Text::deserialize(d)?.into_string();
    match parse_timeout(&text).map_err(serde::de::Error::custom)? {
        Some(t) => Ok(Some(t)),
        None => Err(serde::de::Error::custom(format!(
            "max_timeout '{text}' would allow no run at all (leave it out for no cap)"
        ))),
    }
}

fn budget<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let text = Text::deserialize(d)?.into_string();
    parse_budget(&text)
        .map(Some)
        .map_err(serde::de::Error::custom)
}

/// `allow`, `deny` or `loopback`; an allow-list is `network_allow`.
fn network<'de, D: Deserializer<'de>>(d: D) -> Result<Option<crate::sandbox::Network>, D::Error> {
    use crate::sandbox::Network;
    let text = String::deserialize(d)?;
    match text.parse::<Network>() {
        Ok(Network::AllowList) | Err(_) if text.starts_with("allow") && text != "allow" => {
            Err(serde::de::Error::custom(format!(
                "invalid network policy '{text}': write an allow-list as network_allow = \
                 [\"HOST\", ...]"
            )))
        }
        Ok(Network::AllowList) | Err(_) => Err(serde::de::Error::custom(format!(
            "invalid network policy '{text}' (allow, deny or loopback)"
        ))),
        Ok(n) => Ok(Some(n)),
    }
}

fn mode<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Mode>, D::Error> {
    let text = String::deserialize(d)?;
    text.parse::<Mode>()
        .map(Some)
        .map_err(serde::de::Error::custom)
}

/// Where the configuration file is looked for, from the environment of
/// `dsh-exec` (`DSH_EXEC_CONFIG`, `XDG_CONFIG_HOME`, `HOME`), and whether it
/// was named explicitly (then it must exist).
pub fn location(env: &[(OsString, OsString)]) -> Option<(PathBuf, bool)> {
    let get = |k: &str| {
        env.iter()
            .rev()
            .find(|(n, v)| n == k && !v.is_empty())
            .map(|(_, v)| PathBuf::from(v))
    };
    if let Some(p) = get("DSH_EXEC_CONFIG") {
        return Some((p, true));
    }
    let base = get("XDG_CONFIG_HOME").or_else(|| get("HOME").map(|h| h.join(".config")))?;
    Some((base.join("dsh-exec").join("config.toml"), false))
}

/// Loads the configuration file, if there is one.
///
/// Errors with [`Error::ConfigInvalid`] (naming the file, line and key) when
/// a file that exists cannot be read or parsed, or when `$DSH_EXEC_CONFIG`
/// names a missing file.
pub fn load(env: &[(OsString, OsString)]) -> Result<Option<Config>, Error> {
    let Some((path, explicit)) = location(env) else {
        return Ok(None);
    };
    // A default location that cannot even be looked at (missing, or under
    // a directory closed to this user, as with a HOME kept across a change
    // of user) means no configuration; a file that is there must be valid.
    if !explicit && std::fs::metadata(&path).is_err() {
        return Ok(None);
    }
    let text = read_bounded(&path).map_err(|e| invalid(&path, e.into()))?;
    parse(&path, &text).map(Some)
}

/// The largest configuration file read: 1 MiB.
pub const CONFIG_MAX_BYTES: u64 = 1 << 20;

/// Reads a configuration file that must be a regular file of at most
/// [`CONFIG_MAX_BYTES`]: a FIFO would hold `dsh-exec` before any deadline
/// starts, and `/dev/zero` never ends. Opened with `O_NONBLOCK`, so that
/// even the open cannot wait.
fn read_bounded(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    if meta.len() > CONFIG_MAX_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "larger than 1 MiB",
        ));
    }
    let mut text = String::new();
    file.take(CONFIG_MAX_BYTES).read_to_string(&mut text)?;
    Ok(text)
}

/// Parses configuration text read from `path`.
///
/// Errors with [`Error::ConfigInvalid`], naming the line and key at fault.
pub fn parse(path: &Path, text: &str) -> Result<Config, Error> {
    let file: File = toml::from_str(text).map_err(|e| {
        let message = e.message().trim().replace('\n', " ");
        let line = e
            .span()
            .map(|span| text[..span.start.min(text.len())].matches('\n').count() + 1);
        let key = line
            .and_then(|n| text.lines().nth(n - 1))
            .and_then(|l| l.split_once('='))
            .map(|(key, _)| key.trim().to_string());
        invalid(path, ConfigProblem::Parse { line, key, message })
    })?;
    if file.defaults.network.is_some() && !file.defaults.network_allow.is_empty() {
        // Named by the line of `network`, as a parse error would be.
        let line = text
            .lines()
            .position(|l| {
                l.split_once('=')
                    .is_some_and(|(k, _)| k.trim() == "network")
            })
            .map(|n| n + 1);
        return Err(invalid(
            path,
            ConfigProblem::Parse {
                line,
                key: Some("network".into()),
                message: "network and network_allow cannot both be given: network_allow is the \
                          allow= policy (leave network out)"
                    .into(),
            },
        ));
    }
    Ok(Config {
        path: path.to_path_buf(),
        defaults: file.defaults,
        caps: file.caps,
    })
}

fn invalid(path: &Path, problem: ConfigProblem) -> Error {
    Error::ConfigInvalid {
        path: path.to_path_buf(),
        problem,
    }
}

/// A value parsed from its string form (`FromStr`), with the parser's
/// message as the error.
fn parsed<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: std::str::FromStr<Err = String>,
{
    let s = String::deserialize(d)?;
    s.parse().map(Some).map_err(serde::de::Error::custom)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_file_parses() {
        let c = parse(
            Path::new("/c.toml"),
            "[defaults]\ntimeout = \"2m\"\nkill_after = 1\nstdout_max_bytes = \"64K\"\n\
             sandbox = \"read-only\"\nwritable_roots = [\"/w\"]\n[caps]\nmax_timeout = \"1h\"\n",
        )
        .unwrap();
        assert_eq!(c.defaults.timeout, Some(Some(Duration::from_secs(120))));
        assert_eq!(c.defaults.kill_after, Some(Duration::from_secs(1)));
        assert_eq!(c.defaults.stdout_max_bytes, Some(65536));
        assert_eq!(c.defaults.sandbox, Some(Mode::ReadOnly));
        assert_eq!(c.caps.max_timeout, Some(Duration::from_secs(3600)));
    }

    #[test]
    fn errors_name_the_line_and_key() {
        let err = parse(Path::new("/c.toml"), "[defaults]\n\ntimeout = \"abc\"\n").unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with("config file /c.toml: line 3, key timeout: invalid duration 'abc'"),
            "{text}"
        );
        let err = parse(Path::new("/c.toml"), "[defaults]\ntimeot = \"1s\"\n").unwrap_err();
        assert!(
            err.to_string()
                .contains("line 2, key timeot: unknown field `timeot`"),
            "{err}"
        );
    }

    #[test]
    fn the_network_key_takes_a_plain_policy_and_not_beside_an_allow_list() {
        use crate::sandbox::Network;
        for (text, policy) in [
            ("allow", Network::Allow),
            ("deny", Network::Deny),
            ("loopback", Network::Loopback),
        ] {
            let c = parse(
                Path::new("/c.toml"),
                &format!("[defaults]\nnetwork = \"{text}\"\n"),
            )
            .unwrap();
            assert_eq!(c.defaults.network, Some(policy));
        }
        let err = |text: &str| parse(Path::new("/c.toml"), text).unwrap_err().to_string();
        assert_eq!(
            err("[defaults]\nnetwork = \"none\"\n"),
            "config file /c.toml: line 2, key network: invalid network policy 'none' \
             (allow, deny or loopback)"
        );
        assert_eq!(
            err("[defaults]\nnetwork = \"allow=pypi.org\"\n"),
            "config file /c.toml: line 2, key network: invalid network policy \
             'allow=pypi.org': write an allow-list as network_allow = [\"HOST\", ...]"
        );
        assert_eq!(
            err("[defaults]\nnetwork_allow = [\"pypi.org\"]\nnetwork = \"allow\"\n"),
            "config file /c.toml: line 3, key network: network and network_allow cannot both \
             be given: network_allow is the allow= policy (leave network out)"
        );
    }

    #[test]
    fn a_cap_must_allow_some_run() {
        for bad in ["0", "none", "0.5ms"] {
            let text = format!("[caps]\nmax_timeout = \"{bad}\"\n");
            assert!(parse(Path::new("/c.toml"), &text).is_err(), "{bad}");
        }
    }

    #[test]
    fn location_order() {
        let env = |pairs: &[(&str, &str)]| -> Vec<(OsString, OsString)> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect()
        };
        assert_eq!(
            location(&env(&[("HOME", "/h"), ("DSH_EXEC_CONFIG", "/x.toml")])),
            Some(("/x.toml".into(), true))
        );
        assert_eq!(
            location(&env(&[("HOME", "/h"), ("XDG_CONFIG_HOME", "/x")])),
            Some(("/x/dsh-exec/config.toml".into(), false))
        );
        assert_eq!(
            location(&env(&[("HOME", "/h")])),
            Some(("/h/.config/dsh-exec/config.toml".into(), false))
        );
    }
}
