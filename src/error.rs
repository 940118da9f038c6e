//! Infrastructure failures: the only outcomes of a run that are errors.
//!
//! A nonzero exit, a timeout or an abort is a [`crate::RunResult`], never an
//! error. Each variant here has a stable machine code (shown on stderr and in
//! the `--json` error object) and makes `dsh-exec` exit with status 125, the
//! convention of GNU `timeout(1)` for "the tool itself failed".

use std::path::PathBuf;

/// Exit status of `dsh-exec` for every [`Error`] (as `timeout(1)`).
pub const INFRASTRUCTURE_EXIT_STATUS: i32 = 125;

/// An infrastructure failure: nothing ran, or the run could not be observed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The working directory does not exist, is not a directory, or cannot be entered.
    #[error("working directory {path}: {reason}")]
    WorkdirUnusable {
        /// The directory.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// `bash` was not found on `PATH` (or the fixed fallback locations).
    #[error("shell not found: no executable 'bash' on PATH")]
    ShellNotFound,
    /// The `--stdin-file` could not be opened for reading.
    #[error("stdin file {path}: {reason}")]
    StdinUnreadable {
        /// The file (`-` for this process's stdin).
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The spill directory is missing, not a directory, or not writable.
    #[error("spill directory {path}: {reason}")]
    SpillUnusable {
        /// The parent directory of the spill directory.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The configuration file cannot be read or parsed.
    #[error("config file {path}: {reason}", path = path.display())]
    ConfigInvalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, with the line and key where known.
        reason: String,
    },
    /// The directory of background jobs is missing, not private, or unusable.
    #[error("jobs directory {path}: {reason}", path = path.display())]
    JobsUnusable {
        /// The directory.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A confining sandbox mode was asked for but cannot be enforced here
    /// (no usable Landlock): nothing runs, never unconfined.
    #[error("sandbox unavailable: {0}")]
    SandboxUnavailable(String),
    /// The operating system refused to start the command (fork, exec, pipes).
    #[error("could not start the command: {0}")]
    SpawnFailed(String),
    /// Waiting on or signalling the command failed in a way that leaves its
    /// outcome unknown.
    #[error("could not supervise the command: {0}")]
    SupervisionFailed(String),
}

impl Error {
    /// The stable machine code of this failure, e.g. `WORKDIR_UNUSABLE`.
    pub fn code(&self) -> &'static str {
        match self {
            Error::WorkdirUnusable { .. } => "WORKDIR_UNUSABLE",
            Error::ShellNotFound => "SHELL_NOT_FOUND",
            Error::StdinUnreadable { .. } => "STDIN_UNREADABLE",
            Error::SpillUnusable { .. } => "SPILL_UNUSABLE",
            Error::ConfigInvalid { .. } => "CONFIG_INVALID",
            Error::JobsUnusable { .. } => "JOBS_UNUSABLE",
            Error::SandboxUnavailable(_) => "SANDBOX_UNAVAILABLE",
            Error::SpawnFailed(_) => "SPAWN_FAILED",
            Error::SupervisionFailed(_) => "SUPERVISION_FAILED",
        }
    }
}
