//! Infrastructure failures: the only outcomes of a run that are errors.
//!
//! A nonzero exit, a timeout or an abort is a [`crate::RunResult`], never an
//! error. Each variant here is one user-visible failure mode with a stable
//! machine code ([`Error::code`], shown on stderr and in the `--json` error
//! object); every one makes `dsh-exec` exit with
//! [`crate::exit::INFRASTRUCTURE`] (125), the convention of GNU `timeout(1)`
//! for "the tool itself failed". The cause, where there is one, is the
//! error's [`std::error::Error::source`].

use std::io;
use std::path::PathBuf;

/// What is wrong with a path `dsh-exec` was given (a directory, a file).
#[derive(Debug, thiserror::Error)]
pub enum PathProblem {
    /// It exists but is not a directory.
    #[error("not a directory")]
    NotADirectory,
    /// It is a directory where a file was wanted.
    #[error("is a directory")]
    IsADirectory,
    /// A directory without search (execute) permission for this user.
    #[error("cannot be entered: {}", .0.desc())]
    NotSearchable(#[source] nix::errno::Errno),
    /// A directory this user cannot create entries in.
    #[error("not writable: {}", .0.desc())]
    NotWritable(#[source] nix::errno::Errno),
    /// A file this user cannot read.
    #[error("{}", .0.desc())]
    NotReadable(#[source] nix::errno::Errno),
    /// A directory that another user owns, or that others may write or read.
    #[error("not a private directory of this user")]
    NotPrivate,
    /// Opening, creating or inspecting it failed.
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// Why the configuration file was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigProblem {
    /// The file could not be read (missing, unreadable, not a regular file).
    #[error(transparent)]
    Read(#[from] io::Error),
    /// The TOML is malformed or a value is invalid.
    #[error("{place}{message}", place = place(*.line, .key.as_deref()))]
    Parse {
        /// 1-based line of the fault, where known.
        line: Option<usize>,
        /// The key on that line, where there is one.
        key: Option<String>,
        /// What is wrong, in one line.
        message: String,
    },
}

fn place(line: Option<usize>, key: Option<&str>) -> String {
    match (line, key) {
        (Some(l), Some(k)) => format!("line {l}, key {k}: "),
        (Some(l), None) => format!("line {l}: "),
        _ => String::new(),
    }
}

/// Why a confining sandbox cannot be applied here (fail closed).
#[derive(Debug, thiserror::Error)]
pub enum SandboxProblem {
    /// landlock_create_ruleset(2) is not there or refused: ENOSYS (not built
    /// in), EOPNOTSUPP (disabled at boot), or a seccomp filter of our own
    /// caller.
    #[error("{}", landlock_text(*.0))]
    LandlockUnavailable(#[source] nix::errno::Errno),
    /// The kernel refused the ruleset or one of its rules.
    #[error("Landlock ruleset: {0}")]
    Ruleset(#[source] landlock::RulesetError),
    /// A path the ruleset grants could not be opened.
    #[error("{path}: {source}", path = .path.display())]
    RulePath {
        /// The path.
        path: PathBuf,
        /// Why it could not be opened.
        #[source]
        source: landlock::PathFdError,
    },
    /// A path of the read deny list's split could not be opened.
    #[error("{path}: {source}", path = .path.display())]
    SplitPath {
        /// The path.
        path: PathBuf,
        /// Why it could not be opened (open(2) with `O_PATH|O_NOFOLLOW`).
        #[source]
        source: std::io::Error,
    },
    /// The kernel returned no ruleset descriptor.
    #[error("Landlock ruleset: the kernel returned no ruleset")]
    NoRuleset,
    /// A seccomp filter could not be built for this architecture.
    #[error("seccomp filter: {0}")]
    Seccomp(String),
    /// What the policy asks cannot be enforced here (the message says what
    /// and what to do instead).
    #[error("{0}")]
    Policy(String),
}

fn landlock_text(e: nix::errno::Errno) -> String {
    match e {
        nix::errno::Errno::ENOSYS => "Landlock is not available in this kernel (ENOSYS)".into(),
        nix::errno::Errno::EOPNOTSUPP => "Landlock is disabled in this kernel (EOPNOTSUPP)".into(),
        other => format!("Landlock is unusable: {}", io::Error::from(other)),
    }
}

/// An infrastructure failure: nothing ran, or the run could not be observed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The working directory does not exist, is not a directory, or cannot be entered.
    #[error("working directory {path}: {problem}", path = .path.display())]
    WorkdirUnusable {
        /// The directory.
        path: PathBuf,
        /// What is wrong with it.
        #[source]
        problem: PathProblem,
    },
    /// `bash` was not found on the child environment's `PATH` (or the fallback).
    #[error("shell not found: no executable 'bash' on PATH")]
    ShellNotFound,
    /// The `--stdin-file` could not be opened for reading.
    #[error("stdin file {path}: {problem}", path = .path.display())]
    StdinUnreadable {
        /// The file (`-` for this process's stdin).
        path: PathBuf,
        /// What is wrong with it.
        #[source]
        problem: PathProblem,
    },
    /// The spill directory's parent is missing, not a directory, or not writable.
    #[error("spill directory {path}: {problem}", path = .path.display())]
    SpillUnusable {
        /// The parent directory of the spill directory.
        path: PathBuf,
        /// What is wrong with it.
        #[source]
        problem: PathProblem,
    },
    /// The configuration file cannot be read or parsed.
    #[error("config file {path}: {problem}", path = .path.display())]
    ConfigInvalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, with the line and key where known.
        #[source]
        problem: ConfigProblem,
    },
    /// The directory of background jobs (or one job's) is missing, not
    /// private, or unusable.
    #[error("jobs directory {path}: {problem}", path = .path.display())]
    JobsUnusable {
        /// The directory (or the job's socket in it).
        path: PathBuf,
        /// What is wrong with it.
        #[source]
        problem: PathProblem,
    },
    /// A confining sandbox mode was asked for but cannot be enforced here:
    /// nothing runs, never unconfined.
    #[error("sandbox unavailable: {0}")]
    SandboxUnavailable(#[source] SandboxProblem),
    /// A resource limit (`--memory-max`, `--pids-max`, `--cpu-max`) cannot
    /// be enforced here as asked: nothing runs, never silently unlimited.
    /// `--limits best-effort` turns this into a warning.
    #[error("limit unavailable: {limit}: {reason}; --limits best-effort runs without it")]
    LimitUnavailable {
        /// The flag and value, e.g. `--memory-max 64MiB`.
        limit: String,
        /// Why, e.g. `no cgroup hierarchy with the memory controller is mounted`.
        reason: String,
    },
    /// The operating system refused to start the command (pipes, clone,
    /// execve, a string holding NUL).
    #[error("could not start the command: {0}")]
    SpawnFailed(#[source] io::Error),
    /// A job's supervisor process could not be started, or exited before it
    /// started the command; `log` is the last line it wrote.
    #[error("the job supervisor did not start: {log}")]
    SupervisorNotStarted {
        /// The supervisor's last line of stderr, or why it could not be spawned.
        log: String,
    },
    /// This process's own machinery failed: the async runtime, signal
    /// handlers, the stdin feeder thread.
    #[error("could not set up {what}: {source}")]
    Runtime {
        /// What could not be set up, e.g. `the signal handlers`.
        what: &'static str,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// Waiting on the command failed in a way that leaves its outcome unknown.
    #[error("could not supervise the command: {what}: {source}")]
    SupervisionFailed {
        /// The call that failed, e.g. `waitid`.
        what: &'static str,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// A failure that a background job's supervisor met while preparing the
    /// command, reported back to the launcher (which prints it as its own).
    #[error("{message}")]
    InJob {
        /// The failure's code, as the supervisor's [`Error::code`] gave it.
        code: ErrorCode,
        /// The failure, as the supervisor's error displayed it.
        message: String,
    },
    /// A transaction (`commit`, `discard`, `diff`) is unknown, already
    /// decided, or could not be read or applied.
    #[error("transaction {id}: {reason}")]
    Transaction {
        /// The transaction id as given.
        id: String,
        /// What went wrong, e.g. `no such transaction`.
        reason: String,
    },
    /// A background job's supervisor is gone without writing a result: its
    /// outcome is unknown.
    #[error("job {id} is lost: its supervisor is gone")]
    JobLost {
        /// The job id.
        id: String,
    },
}

/// The stable machine code of an [`Error`], as printed (`WORKDIR_UNUSABLE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
    /// [`Error::WorkdirUnusable`].
    WorkdirUnusable,
    /// [`Error::ShellNotFound`].
    ShellNotFound,
    /// [`Error::StdinUnreadable`].
    StdinUnreadable,
    /// [`Error::SpillUnusable`].
    SpillUnusable,
    /// [`Error::ConfigInvalid`].
    ConfigInvalid,
    /// [`Error::JobsUnusable`].
    JobsUnusable,
    /// [`Error::SandboxUnavailable`].
    SandboxUnavailable,
    /// [`Error::LimitUnavailable`].
    LimitUnavailable,
    /// [`Error::SpawnFailed`], [`Error::SupervisorNotStarted`].
    SpawnFailed,
    /// [`Error::Runtime`].
    RuntimeFailed,
    /// [`Error::SupervisionFailed`], [`Error::JobLost`].
    SupervisionFailed,
    /// [`Error::Transaction`].
    TransactionFailed,
}

impl ErrorCode {
    /// The code as printed, e.g. `WORKDIR_UNUSABLE`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::WorkdirUnusable => "WORKDIR_UNUSABLE",
            ErrorCode::ShellNotFound => "SHELL_NOT_FOUND",
            ErrorCode::StdinUnreadable => "STDIN_UNREADABLE",
            ErrorCode::SpillUnusable => "SPILL_UNUSABLE",
            ErrorCode::ConfigInvalid => "CONFIG_INVALID",
            ErrorCode::JobsUnusable => "JOBS_UNUSABLE",
            ErrorCode::SandboxUnavailable => "SANDBOX_UNAVAILABLE",
            ErrorCode::LimitUnavailable => "LIMIT_UNAVAILABLE",
            ErrorCode::SpawnFailed => "SPAWN_FAILED",
            ErrorCode::RuntimeFailed => "RUNTIME_FAILED",
            ErrorCode::SupervisionFailed => "SUPERVISION_FAILED",
            ErrorCode::TransactionFailed => "TRANSACTION_FAILED",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Error {
    /// The stable machine code of this failure.
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::WorkdirUnusable { .. } => ErrorCode::WorkdirUnusable,
            Error::ShellNotFound => ErrorCode::ShellNotFound,
            Error::StdinUnreadable { .. } => ErrorCode::StdinUnreadable,
            Error::SpillUnusable { .. } => ErrorCode::SpillUnusable,
            Error::ConfigInvalid { .. } => ErrorCode::ConfigInvalid,
            Error::JobsUnusable { .. } => ErrorCode::JobsUnusable,
            Error::SandboxUnavailable(_) => ErrorCode::SandboxUnavailable,
            Error::LimitUnavailable { .. } => ErrorCode::LimitUnavailable,
            Error::SpawnFailed(_) | Error::SupervisorNotStarted { .. } => ErrorCode::SpawnFailed,
            Error::Runtime { .. } => ErrorCode::RuntimeFailed,
            Error::SupervisionFailed { .. } | Error::JobLost { .. } => ErrorCode::SupervisionFailed,
            Error::Transaction { .. } => ErrorCode::TransactionFailed,
            Error::InJob { code, .. } => *code,
        }
    }
}

/// The object `dsh-exec` prints on stdout with `--json` when it fails
/// itself (`schema/error.schema.json`): `{"error": {"code", "message"}}`.
#[derive(
    Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[schemars(deny_unknown_fields)]
pub struct ErrorReport {
    /// The failure.
    pub error: ErrorDetail,
}

/// The failure of an [`ErrorReport`].
#[derive(
    Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[schemars(deny_unknown_fields)]
pub struct ErrorDetail {
    /// The stable code: an [`ErrorCode`] (`WORKDIR_UNUSABLE`, ...) or
    /// `USAGE` for bad input (exit status 125).
    pub code: String,
    /// What went wrong, in one line.
    pub message: String,
}

impl ErrorReport {
    /// The report of `err`.
    pub fn of(err: &Error) -> ErrorReport {
        ErrorReport::new(err.code().as_str(), err.to_string())
    }

    /// A report with `code` and `message`.
    pub fn new(code: &str, message: impl Into<String>) -> ErrorReport {
        ErrorReport {
            error: ErrorDetail {
                code: code.to_string(),
                message: message.into(),
            },
        }
    }
}
