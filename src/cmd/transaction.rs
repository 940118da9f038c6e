//! `dsh-exec commit | discard | diff ID` and `dsh-exec transaction list`:
//! deciding on a transaction after its run (`--transaction`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use dsh_exec_core::error::PathProblem;
use dsh_exec_core::{Ambient, Error, transaction};

use crate::output::{infrastructure_error, print_stdout, status, to_json};

/// This user's state directory, or the error to print.
fn state_dir(json: bool) -> Result<(PathBuf, PathBuf), ExitCode> {
    match Ambient::current(None) {
        Ok(a) => Ok((a.state_dir, a.cwd)),
        Err(e) => Err(infrastructure_error(
            &Error::WorkdirUnusable {
                path: ".".into(),
                problem: PathProblem::Io(e),
            },
            json,
        )),
    }
}

/// Applies transaction `id`: prints each refused path and a summary line
/// (or one JSON object); exit 0 when everything was applied, 1 when a path
/// was refused, 125 on an error.
pub(crate) fn commit(id: &str, opts: transaction::CommitOptions, json: bool) -> ExitCode {
    let (state, _) = match state_dir(json) {
        Ok(s) => s,
        Err(code) => return code,
    };
    match transaction::commit(&state, id, opts) {
        Ok(report) => {
            if json {
                print_stdout(&to_json(&serde_json::json!({
                    "id": id,
                    "state": report.state,
                    "applied": report.applied,
                    "refused": report.refused,
                })));
            } else {
                print_stdout(&report.text(id, opts.atomic));
            }
            status(if report.refused.is_empty() { 0 } else { 1 })
        }
        Err(e) => infrastructure_error(&e, json),
    }
}

/// Throws transaction `id` away.
pub(crate) fn discard(id: &str) -> ExitCode {
    let (state, _) = match state_dir(false) {
        Ok(s) => s,
        Err(code) => return code,
    };
    match transaction::discard(&state, id) {
        Ok(()) => {
            print_stdout(&format!("[discarded transaction {id}]\n"));
            status(0)
        }
        Err(e) => infrastructure_error(&e, false),
    }
}

/// Prints transaction `id`'s changes as a diff, limited to `paths`
/// (relative ones taken from the current directory).
pub(crate) fn diff(id: &str, paths: &[PathBuf]) -> ExitCode {
    let (state, cwd) = match state_dir(false) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let only: Vec<PathBuf> = paths.iter().map(|p| real_path(&cwd.join(p))).collect();
    match transaction::diff(&state, id, &only) {
        Ok(text) => {
            print_stdout(&text);
            status(0)
        }
        Err(e) => infrastructure_error(&e, false),
    }
}

/// The real path of `abs` as far as it exists: itself, else its parent's
/// real path and its name (a deleted file), else `abs` as it is. A
/// transaction records its roots as real paths.
pub(crate) fn real_path(abs: &Path) -> PathBuf {
    std::fs::canonicalize(abs)
        .or_else(|_| {
            let parent = abs.parent().unwrap_or(Path::new("/"));
            std::fs::canonicalize(parent).map(|d| d.join(abs.file_name().unwrap_or_default()))
        })
        .unwrap_or_else(|_| abs.to_path_buf())
}

/// Lists the pending transactions.
pub(crate) fn list(json: bool) -> ExitCode {
    let (state, _) = match state_dir(json) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let all = transaction::list(&state);
    let facts: Vec<transaction::TransactionFacts> = all.iter().map(transaction::facts_of).collect();
    if json {
        let items: Vec<serde_json::Value> = all
            .iter()
            .zip(&facts)
            .map(|(m, f)| {
                serde_json::json!({
                    "id": m.id,
                    "state": match m.state {
                        transaction::State::Running if !m.owner_alive() => "lost",
                        transaction::State::Running => "running",
                        _ => "pending",
                    },
                    "command": m.command,
                    "workdir": m.workdir.to_string_lossy(),
                    "started_at_ms": m.started.0 * 1000 + m.started.1 / 1_000_000,
                    "created": f.created,
                    "modified": f.modified,
                    "deleted": f.deleted,
                })
            })
            .collect();
        print_stdout(&to_json(&items));
    } else {
        let mut text = String::new();
        for (m, f) in all.iter().zip(&facts) {
            let state = match m.state {
                transaction::State::Running if !m.owner_alive() => "lost",
                transaction::State::Running => "running",
                _ => "pending",
            };
            text.push_str(&format!(
                "{}  {state}  {} created, {} modified, {} deleted  {}  {}\n",
                m.id,
                f.created,
                f.modified,
                f.deleted,
                m.workdir.display(),
                m.command
            ));
        }
        print_stdout(&text);
    }
    status(0)
}

/// Discards the pending transactions older than `older_than`; prints how
/// many.
pub(crate) fn prune(older_than: std::time::Duration) -> ExitCode {
    let (state, _) = match state_dir(false) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let mut pruned = 0;
    for m in transaction::list(&state) {
        let started =
            std::time::Duration::new(m.started.0.max(0) as u64, m.started.1.max(0) as u32);
        let lost = m.state == transaction::State::Running && !m.owner_alive();
        let running = m.state == transaction::State::Running && !lost;
        if lost || (!running && now.saturating_sub(started) >= older_than) {
            match transaction::discard(&state, &m.id) {
                Ok(()) => pruned += 1,
                Err(e) => return infrastructure_error(&e, false),
            }
        }
    }
    pruned += transaction::prune_unrecorded(&state, older_than);
    print_stdout(&format!("pruned {pruned} transactions\n"));
    status(0)
}
