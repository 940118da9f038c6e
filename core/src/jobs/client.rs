//! The client side of a job: incremental reads, writes to its stdin,
//! waiting, killing.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::{Duration, Instant};

use super::protocol::{self, Progress, ReadReply, WriteReply};
use super::store::{self, Status};
use crate::result::RunResult;

/// How often a waiting client looks at a job's state.
const POLL: Duration = Duration::from_millis(20);

/// Reads what the job in `dir` wrote since the previous read; consuming.
pub fn read(dir: &Path) -> ReadReply {
    if store::status(dir) == Status::Running
        && let Some(reply) = protocol::ask(&dir.join("sock"))
    {
        return reply;
    }
    // Finished (or just finished while we asked), or lost. Taking the
    // unread output is a rename, so two readers at once cannot both get it.
    let status = store::status(dir);
    let unread = dir.join("unread.json");
    let taken = dir.join(format!("unread.{}.json", std::process::id()));
    let mut reply: ReadReply = match std::fs::rename(&unread, &taken) {
        Ok(()) => {
            let r = store::read_json(&taken).unwrap_or_default();
            let _ = std::fs::remove_file(&taken);
            r
        }
        Err(_) => ReadReply::default(),
    };
    if let Some(r) = store::result(dir) {
        reply.stdout_spill_path = r
            .stdout
            .spill_path
            .as_ref()
            .map(|p| p.to_string_lossy().into());
        reply.stderr_spill_path = r
            .stderr
            .spill_path
            .as_ref()
            .map(|p| p.to_string_lossy().into());
        reply.result = Some(r);
    }
    reply.status = Some(status);
    reply
}

/// Why a write to a job's stdin did not complete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteFailed {
    /// The job is not running (finished, lost, or its supervisor does not
    /// answer); `written` bytes had gone in before.
    NotRunning {
        /// Bytes written before.
        written: usize,
    },
    /// The supervisor refused (`stdin is not a pipe`, `stdin is closed`,
    /// `the command no longer reads its stdin`).
    Refused {
        /// Bytes written before.
        written: usize,
        /// Its reason.
        reason: String,
    },
    /// The command did not read its stdin for `limit`: `written` of the
    /// bytes went in.
    Stalled {
        /// Bytes written before.
        written: usize,
    },
    /// The job runs, but its supervisor did not answer within 5 s (a flood
    /// of clients on its socket); `written` bytes had gone in before, and
    /// the unanswered request's may have too.
    NoAnswer {
        /// Bytes written before.
        written: usize,
    },
}

impl WriteFailed {
    /// The same failure, with `earlier` more bytes counted as written
    /// before it (a write sent in several pieces).
    pub fn after(self, earlier: usize) -> WriteFailed {
        match self {
            WriteFailed::NotRunning { written } => WriteFailed::NotRunning {
                written: written + earlier,
            },
            WriteFailed::Refused { written, reason } => WriteFailed::Refused {
                written: written + earlier,
                reason,
            },
            WriteFailed::Stalled { written } => WriteFailed::Stalled {
                written: written + earlier,
            },
            WriteFailed::NoAnswer { written } => WriteFailed::NoAnswer {
                written: written + earlier,
            },
        }
    }

    /// One line for a user, about the job `id`: `job ID is not running (N
    /// bytes written)` and its kin.
    pub fn message(&self, id: &str) -> String {
        match self {
            WriteFailed::NotRunning { written } => {
                format!("job {id} is not running ({written} bytes written)")
            }
            WriteFailed::Refused { written, reason } => {
                format!("job {id}: {reason} ({written} bytes written)")
            }
            WriteFailed::Stalled { written } => {
                format!("job {id} did not read its stdin ({written} bytes written)")
            }
            WriteFailed::NoAnswer { written } => {
                format!("job {id}: its supervisor did not answer ({written} bytes written before)")
            }
        }
    }
}

/// Appends `bytes` to the stdin of the job in `dir` (started with `--stdin
/// pipe`), waiting up to `limit` for a command that reads slowly; returns
/// the number of bytes written, all of them on success.
///
/// Errors with [`WriteFailed`], saying how many bytes went in first.
pub fn write(dir: &Path, bytes: &[u8], limit: Duration) -> Result<usize, WriteFailed> {
    let end = Instant::now() + limit;
    let mut written = 0;
    while written < bytes.len() {
        if store::status(dir) != Status::Running {
            return Err(WriteFailed::NotRunning { written });
        }
        let chunk = &bytes[written..(written + protocol::MAX_WRITE).min(bytes.len())];
        let Some(reply) = protocol::ask_write(&dir.join("sock"), Some(chunk)) else {
            return Err(match store::status(dir) {
                Status::Running => WriteFailed::NoAnswer { written },
                _ => WriteFailed::NotRunning { written },
            });
        };
        if let Some(reason) = reply.error {
            return Err(WriteFailed::Refused { written, reason });
        }
        written += reply.written;
        if reply.written == 0 {
            if Instant::now() >= end {
                return Err(WriteFailed::Stalled { written });
            }
            std::thread::sleep(POLL);
        }
    }
    Ok(written)
}

/// Closes the stdin of the job in `dir` (started with `--stdin pipe`): the
/// command reads end-of-file.
///
/// Errors as [`write()`].
pub fn close_stdin(dir: &Path) -> Result<(), WriteFailed> {
    if store::status(dir) != Status::Running {
        return Err(WriteFailed::NotRunning { written: 0 });
    }
    match protocol::ask_write(&dir.join("sock"), None) {
        None => Err(WriteFailed::NotRunning { written: 0 }),
        Some(WriteReply {
            error: Some(reason),
            ..
        }) => Err(WriteFailed::Refused { written: 0, reason }),
        Some(_) => Ok(()),
    }
}

/// Sets the window size of the `--pty` job in `dir`'s terminal.
///
/// Errors as [`write()`] (`the job has no terminal` without `--pty`).
pub fn resize(dir: &Path, cols: u16, rows: u16) -> Result<(), WriteFailed> {
    if store::status(dir) != Status::Running {
        return Err(WriteFailed::NotRunning { written: 0 });
    }
    let line = format!("resize {cols} {rows}\n");
    match protocol::ask_request::<WriteReply>(&dir.join("sock"), line.as_bytes(), &[]) {
        None => Err(WriteFailed::NotRunning { written: 0 }),
        Some(WriteReply {
            error: Some(reason),
            ..
        }) => Err(WriteFailed::Refused { written: 0, reason }),
        Some(_) => Ok(()),
    }
}

/// What the running job in `dir` has written so far, without consuming
/// any of it; `None` when it does not run (or its supervisor does not
/// answer within 5 s).
pub fn progress(dir: &Path) -> Option<Progress> {
    if store::status(dir) != Status::Running {
        return None;
    }
    protocol::ask_request(&dir.join("sock"), b"progress\n", &[])
}

/// How a wait for a job ended.
#[derive(Debug)]
pub enum Waited {
    /// The job finished; its result.
    Finished(Box<RunResult>),
    /// The supervisor is gone without a result.
    Lost,
    /// The job still runs after the wait's limit.
    StillRunning,
}

/// Waits for the job in `dir` to end, at most `limit` (`None`: as long as
/// it takes).
pub fn wait(dir: &Path, limit: Option<Duration>) -> Waited {
    let end = limit.map(|t| Instant::now() + t);
    loop {
        match store::status(dir) {
            Status::Finished => {
                return match store::result(dir) {
                    Some(r) => Waited::Finished(Box::new(r)),
                    None => Waited::Lost,
                };
            }
            Status::Lost => return Waited::Lost,
            Status::Running if end.is_some_and(|e| Instant::now() >= e) => {
                return Waited::StillRunning;
            }
            Status::Running => std::thread::sleep(POLL),
        }
    }
}

/// Sends SIGTERM to the job's supervisor, which then ends the job like an
/// abort: SIGTERM, grace, SIGKILL and the sweep. Returns false when the job
/// was not running.
///
/// The supervisor is known by more than its record says (a file a command
/// could have forged): the process must have the recorded pid and start
/// time, and its command line must end with this job's directory and id,
/// as the launcher started it; it is then signalled through a pidfd, so it
/// cannot be swapped between the check and the signal.
pub fn kill(dir: &Path) -> bool {
    let Some(s) = store::supervisor(dir) else {
        return false;
    };
    if store::status(dir) != Status::Running {
        return false;
    }
    let Some(id) = dir.file_name() else {
        return false;
    };
    let mut expected = dir.as_os_str().as_bytes().to_vec();
    expected.push(0);
    expected.extend_from_slice(id.as_bytes());
    expected.push(0);
    let seen = crate::proctree::Seen {
        pid: s.pid,
        start_time: s.start,
        pgrp: 0,
    };
    crate::proctree::signal_verified(seen, nix::sys::signal::Signal::SIGTERM, |cmdline| {
        cmdline.ends_with(&expected)
    })
}
