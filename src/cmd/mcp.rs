//! `dsh-exec mcp [RUN OPTIONS]`: a Model Context Protocol server on stdio
//! over the same engine (the official Rust SDK, rmcp, speaks the protocol).
//!
//! The server's own flags and configuration fix the policy: they are
//! resolved once into the server's spec, and every tool call's request is
//! built from the same flags with the call's arguments on top, under caps
//! that are the server's values. A call can ask for less (a shorter
//! deadline, smaller budgets, a narrower sandbox mode, a workdir inside the
//! server's), never for more: a larger value is clamped with the same
//! `capped` notice as the CLI's, a wider mode or a workdir outside is a
//! tool error. `--allow-write` is the server's alone, taken from its own
//! workdir: a call has no such argument.
//!
//! Each `run` call runs under a supervisor process of its own, the one a
//! background job has (see `dsh_exec_core::jobs`), and the call waits for
//! its result; up to `--max-parallel` at once, the rest waiting for a
//! slot. A process per run is what makes runs independent: a run's tree
//! is its supervisor's descendants (the orphans it adopts as a subreaper),
//! so its sweep, its deadline and its cancellation touch nothing of
//! another run, and the gate's own process, which acts for its run (a
//! listen(2) under `loopback`), is that run's alone. The job's directory
//! is removed when the call ends; only a spill file stays, as in the
//! foreground. `start` starts a background job as `--background` does (a
//! supervisor process, which outlives the server with `--keep-jobs`), at
//! most `--max-jobs` running at once; `read`, `write_stdin`, `wait`,
//! `kill` and `list` act on the jobs this server started. A call may ask
//! for a transaction (`--transaction`: it narrows), never leave the
//! server's; `commit`, `discard` and `diff` act only on the transactions
//! of the results this server returned. When the client
//! closes stdin, the runs in flight are ended as by a cancellation, and
//! the jobs are killed and their trees swept, unless `--keep-jobs`.

use std::collections::HashSet;
use std::path::{Component, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dsh_exec_core::request::config::{Caps, Config};
use dsh_exec_core::sandbox::Mode;
use dsh_exec_core::sandbox::overlay::OnExit;
use dsh_exec_core::spec::OnTerminal;
use dsh_exec_core::{AbortSource, Ambient, Request, RunResult, Signal, Spec, jobs, transaction};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde::Serialize;

use crate::cli::McpArgs;
use crate::mcp_tools::*;

/// The most bytes a call's command may hold: 1 MiB.
const MAX_COMMAND_BYTES: usize = 1 << 20;

/// The most bytes of `stdin` text a `run` call may carry: 8 MiB (the SDK
/// drops a message line over 16 MiB unanswered; JSON escapes can double
/// the text).
const MAX_STDIN_BYTES: usize = 8 << 20;

/// How often a long `run` reports progress, when the client asked for it.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// The longest a `wait` call waits when it names no timeout: 30 s.
const DEFAULT_WAIT: Duration = Duration::from_secs(30);

/// A job this server started.
struct Job {
    id: String,
    dir: PathBuf,
    command: String,
}

/// The server: its flags, resolved once, and its jobs.
struct Server {
    /// The server's flags as a request, without a command.
    base: Request,
    /// The spec the server's flags resolve to (with `true` as the command).
    spec: Spec,
    ambient: Ambient,
    /// The directory calls' workdirs must be inside (real path).
    root: PathBuf,
    /// Its (device, inode) at the server's start.
    root_inode: (u64, u64),
    /// The slots of `run` calls: `--max-parallel`.
    slots: tokio::sync::Semaphore,
    /// `--max-parallel`, for the messages.
    max_parallel: u32,
    /// `--max-jobs`: how many of `jobs` may run at once.
    max_jobs: u32,
    /// The jobs `start` started.
    jobs: Mutex<Vec<Job>>,
    /// The job directories of the `run` calls in flight, and of those whose
    /// call was dropped before their job ended (the server's end kills,
    /// waits for and removes them).
    runs: Mutex<Vec<PathBuf>>,
    /// `--keep-jobs`: the jobs outlive the server.
    keep_jobs: bool,
    /// The ids of the transactions of the results this server returned:
    /// the only ones `commit`, `discard` and `diff` act on.
    transactions: Mutex<HashSet<String>>,
    /// Cancelled when the client's input ends: runs in flight are ended as
    /// by a cancellation, and no call starts anything any more.
    ended: tokio_util::sync::CancellationToken,
}

/// A `run` call's job while the call is in flight. Dropped with its job
/// finished, it removes the job's directory (the spill files are
/// elsewhere and stay) and takes it off the server's `runs`; dropped with
/// its job still running (the call was dropped: the server is ending), it
/// ends the job as a cancellation does and leaves it listed, for the
/// server's end to wait for.
struct InFlight<'a> {
    server: &'a Server,
    dir: PathBuf,
}

impl<'a> InFlight<'a> {
    fn new(server: &'a Server, dir: PathBuf) -> Self {
        if let Ok(mut runs) = server.runs.lock() {
            runs.push(dir.clone());
        }
        InFlight { server, dir }
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if jobs::kill(&self.dir) {
            return;
        }
        jobs::discard(&self.dir);
        if let Ok(mut runs) = self.server.runs.lock() {
            runs.retain(|d| *d != self.dir);
        }
    }
}

/// A tool call's failure that is the caller's (a tool error, not a
/// protocol error): the message says what was wrong.
fn tool_error(message: impl Into<String>) -> CallToolResponse {
    CallToolResult::error(vec![ContentBlock::text(message.into())]).into()
}

/// A call's arguments as `T`, or what is wrong with them.
fn arguments<T: serde::de::DeserializeOwned>(args: JsonObject) -> Result<T, String> {
    serde_json::from_value(args.into()).map_err(|e| format!("bad arguments: {e}"))
}

/// How narrow a sandbox mode is: a call may ask for one at least as narrow
/// as the server's (none counts as the widest).
fn narrowness(mode: Option<Mode>) -> u8 {
    match mode {
        None => 0,
        Some(Mode::FullAccess) => 1,
        Some(Mode::WorkspaceWrite) => 2,
        Some(Mode::ReadOnly) => 3,
    }
}

impl Server {
    /// Rewrites the hints of `result`'s denials for a caller of this
    /// server, who passes call arguments, not flags: a flag is one the
    /// server must be started with, except `--sandbox workspace-write`
    /// where the server allows it (the call's own `sandbox` argument).
    fn for_calls(&self, result: &mut RunResult) {
        let server_mode = self.spec.sandbox.as_ref().map(|p| p.mode.value);
        let Some(sb) = result.sandbox.as_mut() else {
            return;
        };
        for d in &mut sb.denials {
            let Some(h) = d.hint.as_deref().filter(|h| h.starts_with("--")) else {
                continue;
            };
            d.hint = Some(
                if h == "--sandbox workspace-write" && server_mode == Some(Mode::WorkspaceWrite) {
                    "the call's \"sandbox\": \"workspace-write\"".into()
                } else {
                    format!("a server started with {h}")
                },
            );
        }
    }

    /// The request of a call: the server's flags, the call's command,
    /// workdir, deadline, budgets and mode, under the server's values as
    /// caps. Errors (a tool error's message) on a workdir outside the root,
    /// a wider mode, a bad value.
    #[allow(clippy::too_many_arguments)]
    fn request(
        &self,
        command: &str,
        workdir: Option<&str>,
        timeout_ms: Option<u64>,
        idle_timeout_ms: Option<u64>,
        budgets: (Option<u64>, Option<u64>),
        sandbox: Option<&str>,
        transaction: (Option<bool>, Option<&str>),
        background: bool,
    ) -> Result<Request, String> {
        if command.len() > MAX_COMMAND_BYTES {
            return Err(format!(
                "the command is {} bytes; at most {MAX_COMMAND_BYTES}",
                command.len()
            ));
        }
        let mut req = self.base.clone();
        req.command = vec![command.to_string()];
        req.workdir = Some(self.workdir(workdir)?);
        if let Some(ms) = timeout_ms {
            if ms == 0 {
                return Err("timeout_ms must be at least 1 (the server's deadline applies when it is absent)".into());
            }
            req.timeout = Some(Some(Duration::from_millis(ms)));
        }
        if let Some(ms) = idle_timeout_ms {
            if ms == 0 {
                return Err(
                    "idle_timeout_ms must be at least 1 (the server's idle deadline \
                            applies when it is absent)"
                        .into(),
                );
            }
            // Narrower only: no longer than the server's own.
            let asked = Duration::from_millis(ms);
            let server = self.spec.idle_timeout.value;
            req.idle_timeout = Some(Some(server.map_or(asked, |s| s.min(asked))));
        }
        if let Some(n) = budgets.0 {
            req.stdout_max_bytes = Some(n);
        }
        if let Some(n) = budgets.1 {
            req.stderr_max_bytes = Some(n);
        }
        let server_mode = self.spec.sandbox.as_ref().map(|p| p.mode.value);
        if let Some(text) = sandbox {
            let mode: Mode = text.parse()?;
            if narrowness(Some(mode)) < narrowness(server_mode) {
                return Err(format!(
                    "sandbox {} is wider than the server's {}",
                    mode.as_str(),
                    server_mode.map(Mode::as_str).unwrap_or("none")
                ));
            }
            req.sandbox = Some(mode);
            // A narrower mode has no writable roots to lift a file in.
            if mode != Mode::WorkspaceWrite {
                req.allow_write.clear();
            }
        }
        self.transaction(&mut req, transaction, sandbox.is_some())?;
        // The writable root is the server's root, opened by the engine, never
        // the call's workdir: a workdir checked here could be swapped for a
        // symlink out of the root (by a job of the same server) before the
        // engine opens it; the root cannot.
        if self.spec.sandbox.is_some() || req.sandbox.is_some() || req.transaction {
            req.workspace_root = Some(self.root.clone());
        }
        // A job's output is read while it runs: pipes.
        req.output_files &= !background;
        req.background = background;
        req.detach = false;
        req.interactive = false;
        req.stream = None;
        req.config = Some(self.caps());
        Ok(req)
    }

    /// A call's `transaction` and `on_exit` on `req`. A transaction narrows
    /// (nothing reaches the real tree until committed), so a call may ask
    /// for one, under a server whose mode is wider than workspace-write too
    /// (the call's mode is then workspace-write, unless it named one);
    /// `false` under a server that runs transactions would widen, and
    /// `on_exit` needs a transaction.
    fn transaction(
        &self,
        req: &mut Request,
        (asked, on_exit): (Option<bool>, Option<&str>),
        mode_named: bool,
    ) -> Result<(), String> {
        let server = self
            .spec
            .sandbox
            .as_ref()
            .is_some_and(|p| p.transaction.is_some());
        match asked {
            Some(false) if server => {
                return Err(
                    "transaction false: this server runs every command as a transaction \
                     (--transaction); a call cannot run outside one"
                        .into(),
                );
            }
            Some(true) => {
                req.transaction = true;
                let server_mode = self.spec.sandbox.as_ref().map(|p| p.mode.value);
                if !mode_named && server_mode == Some(Mode::FullAccess) {
                    req.sandbox = Some(Mode::WorkspaceWrite);
                }
            }
            _ => {}
        }
        if let Some(text) = on_exit {
            if !server && !req.transaction {
                return Err(
                    "on_exit needs a transaction: the call's \"transaction\": true, or a \
                     server started with --transaction"
                        .into(),
                );
            }
            req.on_exit = Some(text.parse::<OnExit>()?);
        }
        Ok(())
    }

    /// Notes the transaction of a result this server returns, which
    /// `commit`, `discard` and `diff` may then act on.
    fn made(&self, result: &RunResult) {
        if let Some(t) = &result.transaction
            && let Ok(mut ids) = self.transactions.lock()
        {
            ids.insert(t.id.clone());
        }
    }

    /// `id`, if a result of this server's made it.
    fn ours<'a>(&self, id: &'a str) -> Result<&'a str, String> {
        let ids = self
            .transactions
            .lock()
            .map_err(|_| "the transaction list is unusable")?;
        if ids.contains(id) {
            Ok(id)
        } else {
            Err(format!("no transaction {id} was made by this server"))
        }
    }

    /// The configuration of calls: the server's file's defaults, and as
    /// caps the server's own values (and the file's, where lower).
    fn caps(&self) -> Config {
        let file = self.base.config.clone().unwrap_or_default();
        let min = |a: Option<u64>, b: u64| Some(a.map_or(b, |a| a.min(b)));
        let s = &self.spec;
        let caps = Caps {
            max_timeout: match (file.caps.max_timeout, s.timeout.value) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            },
            max_stdout_bytes: min(file.caps.max_stdout_bytes, s.stdout_max_bytes.value),
            max_stderr_bytes: min(file.caps.max_stderr_bytes, s.stderr_max_bytes.value),
            max_spill_bytes: min(file.caps.max_spill_bytes, s.spill_max_bytes.value),
            max_memory: file.caps.max_memory.or(s.memory_max.value),
            max_pids: file.caps.max_pids.or(s.pids_max.value),
            max_cpu: file.caps.max_cpu.or(s.cpu_max.value),
            max_file_size: file.caps.max_file_size.or(s.file_size_max.value),
        };
        // The file's `allow_write` is in the server's own list already,
        // taken from the server's workdir (see `mcp`).
        let defaults = dsh_exec_core::request::config::Defaults {
            allow_write: Vec::new(),
            ..file.defaults
        };
        Config {
            path: PathBuf::from("the server"),
            defaults,
            caps,
        }
    }

    /// A call's workdir: inside the server's root (its real path checked
    /// after resolving symlinks); when absent, the server's own (`-C`) if
    /// that is inside the root, else the root.
    fn workdir(&self, asked: Option<&str>) -> Result<PathBuf, String> {
        let Some(asked) = asked else {
            return Ok(std::fs::canonicalize(&self.spec.workdir.value)
                .ok()
                .filter(|w| w.starts_with(&self.root))
                .unwrap_or_else(|| self.root.clone()));
        };
        let path = self.root.join(asked);
        let real =
            std::fs::canonicalize(&path).map_err(|e| format!("workdir {}: {e}", path.display()))?;
        if !real.starts_with(&self.root) {
            return Err(format!(
                "workdir {} is outside the server's workspace root {}",
                real.display(),
                self.root.display()
            ));
        }
        Ok(real)
    }

    /// The spec of a call's request, its workspace root pinned to the
    /// directory the server's root was at the server's start.
    fn resolve(&self, req: Request) -> Result<Spec, String> {
        let mut spec = dsh_exec_core::resolve(req, &self.ambient).map_err(|e| e.0)?;
        if let Some(policy) = spec.sandbox.as_mut() {
            policy.workspace_root_inode = Some(self.root_inode);
        }
        Ok(spec)
    }

    /// The job `id`, if this server started it.
    fn job(&self, id: &str) -> Result<PathBuf, String> {
        let jobs = self.jobs.lock().map_err(|_| "the job list is unusable")?;
        jobs.iter()
            .find(|j| j.id == id)
            .map(|j| j.dir.clone())
            .ok_or_else(|| format!("no job {id} was started by this server"))
    }

    async fn run(&self, args: JsonObject, ctx: &RequestContext<RoleServer>) -> CallToolResponse {
        let p: RunParams = match arguments(args) {
            Ok(p) => p,
            Err(e) => return tool_error(e),
        };
        if p.stdin.as_ref().is_some_and(|s| s.len() > MAX_STDIN_BYTES) {
            return tool_error(format!("stdin is larger than {MAX_STDIN_BYTES} bytes"));
        }
        let req = match self.request(
            &p.command,
            p.workdir.as_deref(),
            p.timeout_ms,
            p.idle_timeout_ms,
            (p.stdout_max_bytes, p.stderr_max_bytes),
            p.sandbox.as_deref(),
            (p.transaction, p.on_exit.as_deref()),
            false,
        ) {
            Ok(r) => r,
            Err(e) => return tool_error(e),
        };
        let spec = match self.resolve(req) {
            Ok(mut s) => {
                if let Some(text) = p.stdin {
                    s.stdin.value = dsh_exec_core::spec::StdinSource::Text(text);
                }
                s
            }
            Err(e) => return tool_error(e),
        };
        let progress = ctx.meta.get_progress_token();
        let _slot = match self.slots.try_acquire() {
            Ok(slot) => slot,
            Err(_) => {
                let waiting = Instant::now();
                let acquire = self.slots.acquire();
                tokio::pin!(acquire);
                loop {
                    tokio::select! {
                        slot = &mut acquire => match slot {
                            Ok(slot) => break slot,
                            Err(_) => return tool_error("the server is ending"),
                        },
                        () = tokio::time::sleep(PROGRESS_EVERY), if progress.is_some() => {
                            let ms = waiting.elapsed().as_millis();
                            let message = format!(
                                "waiting {ms} ms for a run slot: {} runs in flight \
                                 (--max-parallel {})",
                                self.max_parallel, self.max_parallel
                            );
                            notify(ctx, progress.as_ref(), 0, message).await;
                        }
                        () = ctx.ct.cancelled() => return tool_error("cancelled before it started"),
                        () = self.ended.cancelled() => return tool_error("the session ended"),
                    }
                }
            }
        };
        if self.ended.is_cancelled() {
            return tool_error("the session ended");
        }
        let started = Instant::now();
        let launched = match super::job::launch_spec(&spec, true) {
            Ok(l) => l,
            Err(e) => return tool_error(format!("{e} ({})", e.code())),
        };
        // The supervisor is this process's child: its exit, which comes
        // right after it has written the result, ends the wait.
        let supervisor = nix::unistd::Pid::from_raw(launched.supervisor);
        let mut exited =
            tokio::task::spawn_blocking(move || nix::sys::wait::waitpid(supervisor, None));
        let run = InFlight::new(self, launched.dir.clone());
        if let Some(mut result) = launched.not_run {
            self.for_calls(&mut result);
            self.made(&result);
            return result_response(&result);
        }
        let mut next_report = progress.as_ref().map(|_| started + PROGRESS_EVERY);
        let mut cancelled = false;
        loop {
            let report = async {
                match next_report {
                    Some(t) => tokio::time::sleep_until(t.into()).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = &mut exited => break,
                // Cancelled: the same escalation as a SIGTERM sent to
                // dsh-exec (SIGTERM, then SIGKILL after the grace period),
                // by its supervisor; the call answers once it has ended.
                () = ctx.ct.cancelled(), if !cancelled => {
                    cancelled = true;
                    jobs::kill(&run.dir);
                }
                // The client is gone: as a cancellation.
                () = self.ended.cancelled(), if !cancelled => {
                    cancelled = true;
                    jobs::kill(&run.dir);
                }
                () = report => {
                    next_report = Some(Instant::now() + PROGRESS_EVERY);
                    let dir = run.dir.clone();
                    let bytes = tokio::task::spawn_blocking(move || jobs::progress(&dir))
                        .await
                        .ok()
                        .flatten();
                    if let Some(p) = bytes {
                        let elapsed = started.elapsed().as_millis();
                        let message = format!(
                            "{elapsed} ms, {} bytes of stdout, {} of stderr",
                            p.stdout_bytes, p.stderr_bytes
                        );
                        notify(ctx, progress.as_ref(), elapsed, message).await;
                    }
                }
            }
        }
        let Some(mut result) = jobs::result(&run.dir) else {
            return tool_error("the run's supervisor ended without a result");
        };
        drop(run);
        self.for_calls(&mut result);
        self.made(&result);
        result_response(&result)
    }

    async fn start(&self, args: JsonObject) -> CallToolResponse {
        let p: StartParams = match arguments(args) {
            Ok(p) => p,
            Err(e) => return tool_error(e),
        };
        let mut req = match self.request(
            &p.command,
            p.workdir.as_deref(),
            p.timeout_ms,
            p.idle_timeout_ms,
            (None, None),
            p.sandbox.as_deref(),
            (p.transaction, p.on_exit.as_deref()),
            true,
        ) {
            Ok(r) => r,
            Err(e) => return tool_error(e),
        };
        req.pty = p.pty;
        req.stdin_pipe = p.stdin_pipe && !p.pty;
        let spec = match self.resolve(req) {
            Ok(s) => s,
            Err(e) => return tool_error(e),
        };
        if self.ended.is_cancelled() {
            return tool_error("the session ended");
        }
        // Counted and listed with no await in between: the runtime has one
        // thread, so no other call's `start` comes between the two.
        let running = self.jobs.lock().map_or(0, |jobs| {
            jobs.iter()
                .filter(|j| jobs::status(&j.dir) == jobs::Status::Running)
                .count()
        });
        if running >= self.max_jobs as usize {
            return tool_error(format!(
                "{running} jobs of this server are running, as many as --max-jobs {} allows: \
                 wait for one or kill one",
                self.max_jobs
            ));
        }
        let launched = match super::job::launch_spec(&spec, !self.keep_jobs) {
            Ok(l) => l,
            Err(e) => return tool_error(format!("{e} ({})", e.code())),
        };
        launched.reap_when_done();
        if let Some(result) = launched.not_run {
            jobs::discard(&launched.dir);
            self.made(&result);
            return result_response(&result);
        }
        if let Ok(mut jobs) = self.jobs.lock() {
            jobs.push(Job {
                id: launched.id.clone(),
                dir: launched.dir.clone(),
                command: spec.script.clone(),
            });
        }
        if let Some(ms) = p.detach_after_ms {
            let dir = launched.dir.clone();
            let limit = Duration::from_millis(ms);
            let waited = tokio::task::spawn_blocking(move || jobs::wait(&dir, Some(limit))).await;
            if let Ok(jobs::Waited::Finished(mut result)) = waited {
                self.for_calls(&mut result);
                self.made(&result);
                // As --detach-after: a run that ended in time is a
                // foreground run, and leaves no job.
                if let Ok(mut jobs) = self.jobs.lock() {
                    jobs.retain(|j| j.dir != launched.dir);
                }
                jobs::discard(&launched.dir);
                let text = dsh_exec_core::render::render_text(&result, false, OnTerminal::Exact);
                return json_response(
                    &text,
                    &Started_ {
                        job_id: None,
                        pid: launched.pid,
                        warnings: launched.warnings,
                        capped: spec.capped_notes(),
                        detached: None,
                        result: Some(*result),
                    },
                );
            }
        }
        let detached = p.detach_after_ms.map(|_| jobs::read(&launched.dir));
        let mut text = detached
            .as_ref()
            .map(|r| super::job::delta_text(r, OnTerminal::Exact))
            .unwrap_or_default();
        text.push_str(&match p.detach_after_ms {
            Some(_) => format!("[detached as job {}]\n", launched.id),
            None => format!("started job {}\n", launched.id),
        });
        json_response(
            &text,
            &Started_ {
                job_id: Some(launched.id),
                pid: launched.pid,
                warnings: launched.warnings,
                capped: spec.capped_notes(),
                detached,
                result: None,
            },
        )
    }

    fn read(&self, args: JsonObject) -> CallToolResponse {
        let p: JobParams = match arguments(args) {
            Ok(p) => p,
            Err(e) => return tool_error(e),
        };
        let dir = match self.job(&p.job_id) {
            Ok(d) => d,
            Err(e) => return tool_error(e),
        };
        let mut reply = jobs::read(&dir);
        if let Some(r) = reply.result.as_mut() {
            self.for_calls(r);
            self.made(r);
        }
        // As `job read` shows it: the job's lines shaped like dsh-exec's own
        // escaped, so that none passes for a status line.
        let mut text = super::job::delta_text(&reply, OnTerminal::Exact);
        match &reply.result {
            Some(r) => text.push_str(&dsh_exec_core::render::render_status(r, false)),
            None => text.push_str("[running]\n"),
        }
        json_response(&text, &reply)
    }

    fn write_stdin(&self, args: JsonObject) -> CallToolResponse {
        let p: WriteParams = match arguments(args) {
            Ok(p) => p,
            Err(e) => return tool_error(e),
        };
        let dir = match self.job(&p.job_id) {
            Ok(d) => d,
            Err(e) => return tool_error(e),
        };
        let failed = |e: jobs::WriteFailed| tool_error(e.message(&p.job_id));
        let written = match jobs::write(&dir, p.data.as_bytes(), Duration::from_secs(10)) {
            Ok(n) => n,
            Err(e) => return failed(e),
        };
        if p.close
            && let Err(e) = jobs::close_stdin(&dir)
        {
            return failed(e);
        }
        json_response(
            &format!("{written} bytes written"),
            &Written {
                written,
                closed: p.close,
            },
        )
    }

    async fn wait(&self, args: JsonObject) -> CallToolResponse {
        let p: WaitParams = match arguments(args) {
            Ok(p) => p,
            Err(e) => return tool_error(e),
        };
        let dir = match self.job(&p.job_id) {
            Ok(d) => d,
            Err(e) => return tool_error(e),
        };
        let limit = p.timeout_ms.map_or(DEFAULT_WAIT, Duration::from_millis);
        let waited = tokio::task::spawn_blocking(move || jobs::wait(&dir, Some(limit))).await;
        let (status, result) = match waited {
            Ok(jobs::Waited::Finished(mut r)) => {
                self.for_calls(&mut r);
                self.made(&r);
                ("finished", Some(*r))
            }
            Ok(jobs::Waited::StillRunning) => ("running", None),
            Ok(jobs::Waited::Lost) | Err(_) => ("lost", None),
        };
        let text = match &result {
            Some(r) => dsh_exec_core::render::render_text(r, false, OnTerminal::Exact),
            None => format!(
                "[{}]\n",
                if status == "running" {
                    "still running"
                } else {
                    "lost"
                }
            ),
        };
        json_response(
            &text,
            &WaitResult {
                status: status.into(),
                result,
            },
        )
    }

    async fn kill(&self, args: JsonObject) -> CallToolResponse {
        let p: JobParams = match arguments(args) {
            Ok(p) => p,
            Err(e) => return tool_error(e),
        };
        let dir = match self.job(&p.job_id) {
            Ok(d) => d,
            Err(e) => return tool_error(e),
        };
        let killed = jobs::kill(&dir);
        if killed {
            let _ = tokio::task::spawn_blocking(move || {
                jobs::wait(&dir, Some(Duration::from_secs(10)))
            })
            .await;
        }
        json_response(
            if killed {
                "killed"
            } else {
                "it had already ended"
            },
            &Killed { killed },
        )
    }

    fn list(&self) -> CallToolResponse {
        let listed = self
            .jobs
            .lock()
            .map(|jobs| {
                jobs.iter()
                    .map(|j| ListedJob {
                        job_id: j.id.clone(),
                        status: serde_json::to_value(jobs::status(&j.dir))
                            .ok()
                            .and_then(|v| v.as_str().map(String::from))
                            .unwrap_or_default(),
                        command: j.command.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let listed = Listed { jobs: listed };
        let text = listed
            .jobs
            .iter()
            // One line a job, as `job list`'s rows: the command's control
            // characters escaped (structuredContent keeps it exact).
            .map(|j| {
                let command = dsh_exec_core::render::one_line(&j.command);
                format!("{} {} {command}\n", j.job_id, j.status)
            })
            .collect::<String>();
        json_response(&text, &listed)
    }

    /// `commit`: applies a transaction of this server's to the real tree.
    fn commit(&self, args: JsonObject) -> CallToolResponse {
        let p: CommitParams = match arguments(args) {
            Ok(p) => p,
            Err(e) => return tool_error(e),
        };
        let id = match self.ours(&p.transaction_id) {
            Ok(id) => id,
            Err(e) => return tool_error(e),
        };
        let opts = transaction::CommitOptions {
            atomic: p.atomic,
            force: p.force,
        };
        let report = match transaction::commit(&self.ambient.state_dir, id, opts) {
            Ok(r) => r,
            Err(e) => return tool_error(format!("{e} ({})", e.code())),
        };
        // As `dsh-exec commit` prints it.
        let text = report.text(id, p.atomic);
        json_response(
            &text,
            &Committed {
                transaction_id: id.to_string(),
                state: report.state,
                applied: report.applied,
                refused: report.refused,
            },
        )
    }

    /// `discard`: throws a transaction of this server's away.
    fn discard(&self, args: JsonObject) -> CallToolResponse {
        let p: DiscardParams = match arguments(args) {
            Ok(p) => p,
            Err(e) => return tool_error(e),
        };
        let id = match self.ours(&p.transaction_id) {
            Ok(id) => id,
            Err(e) => return tool_error(e),
        };
        if let Err(e) = transaction::discard(&self.ambient.state_dir, id) {
            return tool_error(format!("{e} ({})", e.code()));
        }
        json_response(
            &format!("[discarded transaction {id}]\n"),
            &Discarded {
                transaction_id: id.to_string(),
                state: transaction::State::Discarded,
            },
        )
    }

    /// `diff`: a transaction of this server's as a diff, limited to the
    /// paths asked for (relative to the root, or absolute inside it or
    /// inside another root of the transaction).
    fn diff(&self, args: JsonObject) -> CallToolResponse {
        let p: DiffParams = match arguments(args) {
            Ok(p) => p,
            Err(e) => return tool_error(e),
        };
        let id = match self.ours(&p.transaction_id) {
            Ok(id) => id,
            Err(e) => return tool_error(e),
        };
        let state = &self.ambient.state_dir;
        let meta = match transaction::read_meta(state, id) {
            Ok(m) => m,
            Err(e) => return tool_error(format!("{e} ({})", e.code())),
        };
        let mut only = Vec::new();
        for asked in &p.paths {
            let real = super::transaction::real_path(&self.root.join(asked));
            let inside = !real.components().any(|c| c == Component::ParentDir)
                && (real.starts_with(&self.root)
                    || meta.layers.iter().any(|l| real.starts_with(&l.root)));
            if !inside {
                return tool_error(format!(
                    "path {} is outside the server's workspace root {} and the \
                     transaction's roots",
                    real.display(),
                    self.root.display()
                ));
            }
            only.push(real);
        }
        match transaction::diff(state, id, &only) {
            Ok(diff) => json_response(
                &diff,
                &Diffed {
                    transaction_id: id.to_string(),
                    diff: diff.clone(),
                },
            ),
            Err(e) => tool_error(format!("{e} ({})", e.code())),
        }
    }

    /// Kills every job this server started that still runs, and waits
    /// (10 s at most each) for its supervisor to sweep its tree.
    /// All at once: each job's supervisor escalates on its own (SIGTERM,
    /// grace, SIGKILL), so the whole takes one grace period, not one per
    /// job (an MCP client gives a closing server a couple of seconds).
    ///
    /// The runs whose calls were in flight go the same way whatever
    /// `keep_jobs` says (a run lives as long as its call), and their
    /// directories are removed.
    fn kill_jobs(&self, keep_jobs: bool) {
        let mut dirs: Vec<PathBuf> = self
            .runs
            .lock()
            .map(|runs| runs.clone())
            .unwrap_or_default();
        let runs = dirs.len();
        if !keep_jobs && let Ok(jobs) = self.jobs.lock() {
            dirs.extend(jobs.iter().map(|j| j.dir.clone()));
        }
        let killed: Vec<bool> = dirs.iter().map(|d| jobs::kill(d)).collect();
        let end = Instant::now() + Duration::from_secs(10);
        for (i, dir) in dirs.iter().enumerate() {
            if killed[i] {
                let left = end.saturating_duration_since(Instant::now());
                let _ = jobs::wait(dir, Some(left));
            }
            if i < runs {
                jobs::discard(dir);
            }
        }
    }
}

/// Sends a progress notification for the call of `ctx`, when it asked for
/// them (`token`): `progress` (milliseconds) and `message`.
async fn notify(
    ctx: &RequestContext<RoleServer>,
    token: Option<&rmcp::model::ProgressToken>,
    progress: u128,
    message: String,
) {
    if let Some(token) = token {
        let _ = ctx
            .peer
            .notify_progress(
                ProgressNotificationParam::new(token.clone(), progress as f64)
                    .with_message(message),
            )
            .await;
    }
}

/// The text (rendered result, marker last) as `content`, the result as
/// `structuredContent`.
fn result_response(result: &RunResult) -> CallToolResponse {
    let mut text = dsh_exec_core::render::render_text(result, false, OnTerminal::Exact);
    // A caller of this server decides with the tools, not the CLI.
    if let Some(t) = &result.transaction {
        let id = &t.id;
        text = text.replace(
            &format!("dsh-exec commit {id} | discard {id})]"),
            &format!("the commit or discard tool, transaction_id {id})]"),
        );
    }
    json_response(&text, result)
}

fn json_response(text: &str, value: &impl Serialize) -> CallToolResponse {
    let mut r = CallToolResult::success(vec![ContentBlock::text(text.to_string())]);
    r.structured_content = serde_json::to_value(value).ok();
    r.into()
}

/// The rmcp handler: the server, shared with the tasks of its calls.
#[derive(Clone)]
struct Handler(Arc<Server>);

impl ServerHandler for Handler {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("dsh-exec", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Runs shell commands under this server's sandbox, deadline and budgets: run (to \
                 the end), start (a background job), read, write_stdin, wait, kill, list. A call \
                 may ask for less than the server allows, never for more. With transaction \
                 (run, start), a command's writes wait on an overlay: diff shows them, commit \
                 applies them to the real tree, discard throws them away.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        let server = &self.0;
        Ok(match request.name.as_ref() {
            "run" => server.run(args, &context).await,
            "start" => server.start(args).await,
            // Socket round trips with their own timeouts (a write waits up
            // to 10 s for a command that reads slowly): off the runtime's
            // thread, which also drives an in-flight run's deadline.
            // A transaction's commit, discard and diff walk and copy trees.
            "read" | "write_stdin" | "commit" | "discard" | "diff" => {
                let (server, name) = (Arc::clone(server), request.name.clone());
                tokio::task::spawn_blocking(move || match name.as_ref() {
                    "read" => server.read(args),
                    "commit" => server.commit(args),
                    "discard" => server.discard(args),
                    "diff" => server.diff(args),
                    _ => server.write_stdin(args),
                })
                .await
                .unwrap_or_else(|_| tool_error("the call failed"))
            }
            "wait" => server.wait(args).await,
            "kill" => server.kill(args).await,
            "list" => match arguments::<NoParams>(args) {
                Ok(_) => server.list(),
                Err(e) => tool_error(e),
            },
            other => {
                return Err(ErrorData::invalid_params(
                    format!("unknown tool {other}"),
                    None,
                ));
            }
        })
    }
}

/// `dsh-exec mcp`: serves until the client closes stdin, then kills the
/// jobs it started unless `keep_jobs`.
pub(crate) fn mcp(args: McpArgs) -> std::process::ExitCode {
    use crate::output::{infrastructure_error, usage_error};
    let McpArgs {
        keep_jobs,
        max_parallel,
        max_jobs,
        run: args,
    } = args;
    if !args.command.is_empty() {
        return usage_error("dsh-exec mcp takes no command: the tool calls bring them");
    }
    if args.background
        || args.detach_after.is_some()
        || args.interactive
        || args.stream
        || args.pty
        || args.stdin.is_some()
        || args.stdin_file.is_some()
    {
        return usage_error(
            "dsh-exec mcp: a call chooses its stdin and whether it runs in the background \
             (run's stdin; start's pty, stdin_pipe, detach_after_ms): no --background, \
             --detach-after, -i, --stream, --pty, --stdin or --stdin-file",
        );
    }
    let mut probe = args.clone();
    probe.command = vec!["true".into()];
    let (spec, _, _) = match super::resolve_args(probe.clone()) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let ambient = match Ambient::current(args.workdir.as_deref()) {
        Ok(a) => a,
        Err(e) => return usage_error(&format!("current directory: {e}")),
    };
    let mut base = match probe.into_request() {
        Ok(r) => r,
        Err(e) => return usage_error(&e),
    };
    base.config = spec.config_file.as_ref().and_then(|_| {
        dsh_exec_core::request::config::load(&ambient.env)
            .ok()
            .flatten()
    });
    // `--allow-write .vscode` is the server's workdir's, resolved once: a
    // call's workdir must not move it to another directory (a call can only
    // narrow the policy).
    base.allow_write = spec
        .sandbox
        .as_ref()
        .map(|p| p.allow_write.clone())
        .unwrap_or_default();
    // The server's credentials were read once, now; every call's spec
    // carries them (a call names none of its own).
    if let Some(p) = &spec.sandbox {
        base.injection = p.injection.clone();
    }
    base.secrets = Some(spec.secrets.clone());
    let root_dir = spec
        .sandbox
        .as_ref()
        .map(|p| p.workspace_root.value.clone())
        .unwrap_or_else(|| spec.workdir.value.clone());
    let root = match std::fs::canonicalize(&root_dir) {
        Ok(r) => r,
        Err(e) => {
            let err = dsh_exec_core::Error::WorkdirUnusable {
                path: root_dir,
                problem: dsh_exec_core::error::PathProblem::Io(e),
            };
            return infrastructure_error(&err, false);
        }
    };
    let root_inode = match std::fs::metadata(&root) {
        Ok(m) => {
            use std::os::unix::fs::MetadataExt;
            (m.dev(), m.ino())
        }
        Err(e) => return usage_error(&format!("workspace root {}: {e}", root.display())),
    };
    let server = Arc::new(Server {
        base,
        spec,
        ambient,
        root,
        root_inode,
        slots: tokio::sync::Semaphore::new(max_parallel as usize),
        max_parallel,
        max_jobs,
        jobs: Mutex::new(Vec::new()),
        runs: Mutex::new(Vec::new()),
        keep_jobs,
        transactions: Mutex::new(HashSet::new()),
        ended: tokio_util::sync::CancellationToken::new(),
    });
    let runtime = match super::run::runtime() {
        Ok(r) => r,
        Err(e) => return infrastructure_error(&e, false),
    };
    // The session ends when the client closes stdin, or when a signal
    // that would end dsh-exec arrives (SIGINT, SIGTERM, SIGHUP, ...): then
    // the runtime is dropped with the calls in flight, and a run's
    // Execution, dropped, kills its tree; the jobs go as below.
    let served = runtime.block_on(async {
        let mut signals = dsh_exec_core::AbortSignals::install()?;
        // Stdio, with the requests' ids made unique among those in flight
        // before rmcp sees them (see mcp_ids: rmcp trusts the client there).
        let (stdin, stdout) = rmcp::transport::stdio();
        let transport = crate::mcp_ids::UniqueIds::new(
            rmcp::transport::async_rw::AsyncRwTransport::new_server(stdin, stdout),
            server.ended.clone(),
        );
        let service = Handler(server.clone()).serve(transport).await?;
        tokio::select! {
            done = service.waiting() => { done?; Ok(None) }
            sig = signals.next() => Ok(Some(sig)),
        }
    });
    // Not drop(): that waits for the thread blocked reading stdin, which a
    // signal leaves open; the calls in flight are dropped either way.
    runtime.shutdown_timeout(Duration::from_millis(500));
    server.kill_jobs(keep_jobs);
    let served: Result<Option<Signal>, Box<dyn std::error::Error>> = served;
    match served {
        Ok(None) => std::process::ExitCode::SUCCESS,
        Ok(Some(sig)) => std::process::ExitCode::from(
            (dsh_exec_core::exit::SIGNAL_BASE + sig.number()).min(255) as u8,
        ),
        Err(e) => {
            crate::output::say!("dsh-exec: error: the MCP session failed: {e}");
            std::process::ExitCode::from(dsh_exec_core::exit::INFRASTRUCTURE as u8)
        }
    }
}
