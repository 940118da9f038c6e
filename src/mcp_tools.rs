//! The MCP server's tools: each tool's arguments and structured result as
//! types, and the list `tools/list` answers with their JSON Schemas. Kept
//! apart from the server so that `examples/gen_docs.rs` can write the list
//! to `schema/mcp-tools.json` (drift-tested) without the server.

use std::sync::Arc;

use dsh_exec_core::{RunResult, jobs, transaction};
use rmcp::model::{JsonObject, Tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `run`: one command, to its end.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RunParams {
    /// The script for `bash -c` (at most 1 MiB).
    pub(crate) command: String,
    /// Working directory, relative to the server's workspace root or
    /// absolute inside it [default: the root].
    #[serde(default)]
    pub(crate) workdir: Option<String>,
    /// Deadline in milliseconds (no more than the server's; 0 is refused)
    /// [default: the server's].
    #[serde(default)]
    pub(crate) timeout_ms: Option<u64>,
    /// End the run as at the deadline when stdout and stderr stay silent
    /// this many milliseconds (no more than the server's `--idle-timeout`;
    /// 0 is refused) [default: the server's, else none].
    #[serde(default)]
    pub(crate) idle_timeout_ms: Option<u64>,
    /// Bytes of stdout kept (no more than the server's).
    #[serde(default)]
    pub(crate) stdout_max_bytes: Option<u64>,
    /// Bytes of stderr kept (no more than the server's).
    #[serde(default)]
    pub(crate) stderr_max_bytes: Option<u64>,
    /// Text fed to the command's stdin, then end-of-file [default: none, stdin closed].
    #[serde(default)]
    pub(crate) stdin: Option<String>,
    /// A sandbox mode no wider than the server's: read-only,
    /// workspace-write or full-access [default: the server's].
    #[serde(default)]
    pub(crate) sandbox: Option<String>,
    /// Run as a transaction (`--transaction`): the writable roots on
    /// overlays, nothing reaching the real tree until `commit`; the result's
    /// `transaction` lists the changes. `false` is refused by a server
    /// started with `--transaction` [default: the server's].
    #[serde(default)]
    pub(crate) transaction: Option<bool>,
    /// What happens to the transaction when the run ends: `commit`,
    /// `discard` or `keep` (for `commit`, `discard` or `diff` later); only
    /// with a transaction [default: the server's `--on-exit`, else keep].
    #[serde(default)]
    pub(crate) on_exit: Option<String>,
}

/// `start`: a background job.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct StartParams {
    /// The script for `bash -c` (at most 1 MiB).
    pub(crate) command: String,
    /// Working directory, as for `run`.
    #[serde(default)]
    pub(crate) workdir: Option<String>,
    /// Deadline in milliseconds (no more than the server's) [default:
    /// the server's, as `--background` with the server's flags].
    #[serde(default)]
    pub(crate) timeout_ms: Option<u64>,
    /// End the job as at its deadline when its output stays silent this
    /// many milliseconds (no more than the server's `--idle-timeout`; 0
    /// is refused) [default: the server's, else none].
    #[serde(default)]
    pub(crate) idle_timeout_ms: Option<u64>,
    /// Run the command on a new pseudo-terminal (80x24): `write_stdin`
    /// types into it, `read` gives what it shows.
    #[serde(default)]
    pub(crate) pty: bool,
    /// Keep the command's stdin open for `write_stdin` (implied by `pty`).
    #[serde(default)]
    pub(crate) stdin_pipe: bool,
    /// A sandbox mode no wider than the server's.
    #[serde(default)]
    pub(crate) sandbox: Option<String>,
    /// Run as a transaction, as for `run`; the id is in the job's result.
    #[serde(default)]
    pub(crate) transaction: Option<bool>,
    /// What happens to the transaction when the job ends, as for `run`.
    #[serde(default)]
    pub(crate) on_exit: Option<String>,
    /// As `--detach-after`: wait this many milliseconds first; a command
    /// that ends by then returns its result and leaves no job, one that
    /// still runs returns its output so far and its job id.
    #[serde(default)]
    pub(crate) detach_after_ms: Option<u64>,
}

/// A job this server started.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct JobParams {
    /// The id `start` returned.
    pub(crate) job_id: String,
}

/// `write_stdin`: bytes for a job's stdin or terminal.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct WriteParams {
    /// The id `start` returned.
    pub(crate) job_id: String,
    /// The text to write, as it is (a newline is not added).
    #[serde(default)]
    pub(crate) data: String,
    /// Then close the job's stdin (on a terminal: type end-of-file, ^D).
    #[serde(default)]
    pub(crate) close: bool,
}

/// `wait`: for a job's end.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct WaitParams {
    /// The id `start` returned.
    pub(crate) job_id: String,
    /// Give up after this many milliseconds [default: 30000].
    #[serde(default)]
    pub(crate) timeout_ms: Option<u64>,
}

/// No arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NoParams {}

/// `commit`: apply a transaction to the real tree.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CommitParams {
    /// The id of a transaction this server's run or job made (its
    /// result's `transaction.id`).
    pub(crate) transaction_id: String,
    /// Apply nothing when any path would be refused [default: false, apply
    /// the rest and name the refused].
    #[serde(default)]
    pub(crate) atomic: bool,
    /// Also apply paths changed in the real tree after the transaction
    /// started (never protected paths or planted git metadata).
    #[serde(default)]
    pub(crate) force: bool,
}

/// `discard`: throw a transaction away.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DiscardParams {
    /// The id of a transaction this server's run or job made.
    pub(crate) transaction_id: String,
}

/// `diff`: a transaction's changes.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DiffParams {
    /// The id of a transaction this server's run or job made.
    pub(crate) transaction_id: String,
    /// Only the changes at or under these paths, relative to the server's
    /// workspace root or absolute inside it (or inside another root of the
    /// transaction) [default: every change].
    #[serde(default)]
    pub(crate) paths: Vec<String>,
}

/// What `start` returns.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Started_ {
    /// The job's id, for `read`, `write_stdin`, `wait` and `kill`; `null`
    /// when the command ended within `detach_after_ms` (see `result`).
    pub(crate) job_id: Option<String>,
    /// The command's pid (its `bash`), in the supervisor's PID namespace.
    pub(crate) pid: Option<i32>,
    /// Warnings of the preparation.
    pub(crate) warnings: Vec<String>,
    /// Values the server's policy lowered (`timeout 1h capped at 10m by
    /// the server`), as the result's `capped`.
    pub(crate) capped: Vec<String>,
    /// With `detach_after_ms`: the output so far of a job left running
    /// (as `read` gives it), else absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) detached: Option<jobs::ReadReply>,
    /// With `detach_after_ms`: the result of a command that ended in time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) result: Option<RunResult>,
}

/// What `write_stdin` returns.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Written {
    /// Bytes written.
    pub(crate) written: usize,
    /// The stdin was closed (or end-of-file typed).
    pub(crate) closed: bool,
}

/// What `wait` returns.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct WaitResult {
    /// `finished`, `running` (the wait's limit passed) or `lost`.
    pub(crate) status: String,
    /// The result, once finished.
    pub(crate) result: Option<RunResult>,
}

/// What `commit` returns.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Committed {
    /// The transaction's id.
    pub(crate) transaction_id: String,
    /// `committed`.
    pub(crate) state: transaction::State,
    /// Paths written, made or removed in the real tree.
    pub(crate) applied: u64,
    /// Paths not applied (protected, changed meanwhile in the real tree,
    /// put aside, failed), each with its reason.
    pub(crate) refused: Vec<transaction::Refusal>,
}

/// What `discard` returns.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Discarded {
    /// The transaction's id.
    pub(crate) transaction_id: String,
    /// `discarded`.
    pub(crate) state: transaction::State,
}

/// What `diff` returns.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Diffed {
    /// The transaction's id.
    pub(crate) transaction_id: String,
    /// A unified diff of the text files changed, and a line for each other
    /// change (binary files with their sizes, directories, symlinks,
    /// removals); empty when nothing changed under the paths asked for.
    pub(crate) diff: String,
}

/// What `kill` returns.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Killed {
    /// True when the job was running and was killed; false when it had
    /// already ended.
    pub(crate) killed: bool,
}

/// One job of `list`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ListedJob {
    /// The job's id.
    pub(crate) job_id: String,
    /// `running`, `finished` or `lost`.
    pub(crate) status: String,
    /// Its command.
    pub(crate) command: String,
}

/// What `list` returns.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Listed {
    /// The jobs this server started, oldest first.
    pub(crate) jobs: Vec<ListedJob>,
}

/// The JSON Schema of `T` as a JSON object.
pub(crate) fn schema<T: JsonSchema>() -> Arc<JsonObject> {
    let value = serde_json::to_value(schemars::schema_for!(T)).unwrap_or_default();
    Arc::new(value.as_object().cloned().unwrap_or_default())
}

/// A tool with its input and output schemas.
pub(crate) fn tool<I: JsonSchema, O: JsonSchema>(
    name: &'static str,
    description: &'static str,
) -> Tool {
    let mut t = Tool::new(name, description, schema::<I>());
    t.output_schema = Some(schema::<O>());
    t
}

/// The server's tools, as `tools/list` gives them.
pub(crate) fn tools() -> Vec<Tool> {
    vec![
        tool::<RunParams, RunResult>(
            "run",
            "Run one shell command (bash -c) to its end under the server's policy; returns \
             the rendered result (output tail, notices, then the marker [exit code: N] or \
             [killed by signal: X]) and the result object. With transaction, its writes \
             wait on an overlay for commit or discard (the result's transaction lists them).",
        ),
        tool::<StartParams, Started_>(
            "start",
            "Start a background job; returns its id. Use read for its output, write_stdin \
             for its input (with pty or stdin_pipe), wait and kill.",
        ),
        tool::<JobParams, jobs::ReadReply>(
            "read",
            "The job's output since the previous read (consuming), and its status.",
        ),
        tool::<WriteParams, Written>(
            "write_stdin",
            "Write text to a job's stdin (started with stdin_pipe) or type it on its \
             terminal (pty); close ends its stdin.",
        ),
        tool::<WaitParams, WaitResult>(
            "wait",
            "Wait for a job's end (at most timeout_ms) and return its result.",
        ),
        tool::<JobParams, Killed>("kill", "Kill a job's whole tree (SIGTERM, grace, SIGKILL)."),
        tool::<NoParams, Listed>("list", "The jobs this server started."),
        tool::<CommitParams, Committed>(
            "commit",
            "Apply a transaction (a run or job of this server with transaction) to the real \
             tree; a path changed meanwhile in the real tree, or protected, is refused and \
             named (atomic: then nothing is applied).",
        ),
        tool::<DiscardParams, Discarded>(
            "discard",
            "Throw a transaction of this server's away; the real tree stays as it is.",
        ),
        tool::<DiffParams, Diffed>(
            "diff",
            "A transaction's changes: a unified diff of text files, a line for each other \
             change; paths limits it.",
        ),
    ]
}
