//! The JSON objects the job commands print besides a [`RunResult`] and a
//! [`ReadReply`](super::ReadReply): typed, with schemas in `schema/`
//! ([`crate::schema`]). Field names and values are those the commands have
//! always printed; fields are declared in the order they print.

use serde::{Deserialize, Serialize};

use super::Status;
use crate::result::RunResult;

/// `--background --json`: the job just started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct JobStarted {
    /// The job's directory (lossy UTF-8).
    pub dir: String,
    /// The job's id, e.g. `j4k2x9qa`, for `dsh-exec job read|write|wait|kill`.
    pub job_id: String,
    /// The command's pid (its `bash`, in the supervisor's PID namespace);
    /// 0 when it never ran.
    pub pid: i32,
}

/// `--detach-after D --json` when the command still runs after D: its
/// output so far and the job to follow it with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct JobDetached {
    /// stderr so far (lossy UTF-8).
    pub delta_stderr: String,
    /// stdout so far (lossy UTF-8).
    pub delta_stdout: String,
    /// Always true: the command runs on as a job.
    pub detached: bool,
    /// The job's id.
    pub job_id: String,
    /// True when output was dropped from the tail before it could be read;
    /// the spill files hold it.
    pub lossy: bool,
    /// The stderr spill file, once there is one.
    pub stderr_spill_path: Option<String>,
    /// The stdout spill file, once there is one.
    pub stdout_spill_path: Option<String>,
}

/// One row of `job list --json` (the command prints an array of them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct JobListing {
    /// The script given to `bash -c`; `null` when the job's metadata is
    /// unreadable.
    pub command: Option<String>,
    /// `dsh-exec`'s exit status for the run once it finished (as a
    /// foreground run would exit), else `null`.
    pub exit_status: Option<i32>,
    /// The job's id.
    pub job_id: String,
    /// When the job started, in milliseconds since the Unix epoch; `null`
    /// when its metadata is unreadable.
    pub started_at_ms: Option<u64>,
    /// `running`, `finished` or `lost`.
    pub status: Status,
}

/// `job wait --json`: the result once the job finished, else its status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
#[schemars(deny_unknown_fields)]
pub enum JobWaited {
    /// The job finished: its result, as `--json` prints a foreground run's.
    Finished(Box<RunResult>),
    /// The job still runs (the wait's limit passed) or is lost.
    Pending {
        /// `running` or `lost`.
        status: Status,
    },
}
