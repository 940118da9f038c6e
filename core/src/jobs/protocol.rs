//! What crosses between the processes of a job.
//!
//! - **The handoff** (launcher → supervisor, over a socket pair that is the
//!   supervisor's descriptor [`HANDOFF_FD`]): the launcher writes the
//!   resolved [`Spec`] as JSON and shuts down its side; the supervisor reads
//!   it to end-of-file, prepares and starts the command, and answers with
//!   one [`Handoff`] line. The spec never appears in any process's argv,
//!   so no `-e` value is readable in `/proc/PID/cmdline`.
//! - **Reads** (client → supervisor, over the job's Unix socket): the client
//!   sends `read\n`; the supervisor answers with one [`ReadReply`] line and
//!   waits for the client to close, which confirms the delivery. A reply
//!   that was not confirmed goes back to be read again.
//! - **Progress** (client → supervisor): `progress\n`, answered with one
//!   [`Progress`] line (the bytes written so far); nothing is consumed.
//! - **Writes** to a `--stdin pipe` job's stdin: `write N\n` and N bytes
//!   (at most [`MAX_WRITE`]), `close\n`, or for a `--pty` job `resize COLS
//!   ROWS\n`; the supervisor answers with
//!   one [`WriteReply`] line. It writes what the pipe takes at once and
//!   says how much: the client sends the rest again, so a command that
//!   does not read never holds the supervisor's loop.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::store::Status;
use crate::capture::utf8::{char_boundary_skip, hold_back_partial};
use crate::error::ErrorCode;
use crate::exec::Execution;
use crate::result::RunResult;

/// The supervisor's descriptor that carries the handoff.
pub(crate) const HANDOFF_FD: i32 = 3;

/// The handoff is refused past this size: 64 MiB, far above any real spec
/// (an environment is at most a few MiB: execve(2)'s ARG_MAX).
pub(crate) const MAX_SPEC_BYTES: u64 = 64 << 20;

/// The most bytes one `write` request carries: 1 MiB (`job write` sends
/// more in several).
pub const MAX_WRITE: usize = 1 << 20;

/// The answer to a `write` or `close` request.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WriteReply {
    /// Bytes the command's stdin took (0 when its pipe is full).
    pub written: usize,
    /// Why nothing could be written (`stdin is not a pipe`, `stdin is
    /// closed`, `the command no longer reads its stdin`, `bad request`);
    /// absent on success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The answer to a `progress` request: what the command has written so
/// far, in bytes, whether or not anyone has read it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    /// Bytes of stdout.
    pub stdout_bytes: u64,
    /// Bytes of stderr.
    pub stderr_bytes: u64,
}

/// The supervisor's answer to the handoff.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Handoff {
    /// The command runs as `pid` (in the supervisor's PID namespace).
    Started {
        /// The command's pid.
        pid: i32,
        /// Warnings of the preparation (skipped writable roots, ...).
        warnings: Vec<String>,
    },
    /// The command never ran (its deadline passed during preparation, or
    /// the sandbox runner failed); its result is written.
    NotRun {
        /// The result.
        result: Box<RunResult>,
        /// Warnings of the preparation.
        warnings: Vec<String>,
    },
    /// Preparing the command failed: nothing ran.
    Failed {
        /// The failure's code.
        code: ErrorCode,
        /// The failure, as displayed.
        message: String,
    },
}

/// An incremental read, as `job read --json` prints it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ReadReply {
    /// stdout written since the previous read (lossy UTF-8).
    pub delta_stdout: String,
    /// stderr written since the previous read (lossy UTF-8).
    pub delta_stderr: String,
    /// True when output was dropped from the tail buffer before it could
    /// be read; the spill files hold it.
    pub lossy: bool,
    /// `running`, `finished` or `lost`.
    pub status: Option<Status>,
    /// The stdout spill file, once there is one.
    pub stdout_spill_path: Option<String>,
    /// The stderr spill file, once there is one.
    pub stderr_spill_path: Option<String>,
    /// The result, once the job has finished.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<RunResult>,
}

/// Output taken from the captures but not yet delivered: the bytes of a
/// UTF-8 character cut by a read (held until the rest arrives), and
/// deliveries that failed (a reader that went away).
#[derive(Default)]
pub(crate) struct Carry {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    lossy: bool,
}

impl Carry {
    /// Takes back an undelivered reply, keeping at most `cap` bytes per
    /// stream (the newest); dropping any marks the next read lossy.
    fn put_back(&mut self, reply: ReadReply, cap: usize) {
        let mut back = |text: String, held: &mut Vec<u8>| {
            let mut bytes = text.into_bytes();
            bytes.append(held);
            if bytes.len() > cap {
                bytes.drain(..bytes.len() - cap);
                self.lossy = true;
            }
            bytes
        };
        let out = back(reply.delta_stdout, &mut self.stdout);
        self.stdout = out;
        let err = back(reply.delta_stderr, &mut self.stderr);
        self.stderr = err;
        self.lossy |= reply.lossy;
    }
}

/// The output of `exec` since the previous read, with what `carry` held.
pub(crate) fn delta_reply(exec: &mut Execution, carry: &mut Carry, status: Status) -> ReadReply {
    let last = status != Status::Running;
    let (out, err) = exec.read_delta();
    let mut out_bytes = std::mem::take(&mut carry.stdout);
    out_bytes.extend_from_slice(&out.bytes);
    let mut err_bytes = std::mem::take(&mut carry.stderr);
    err_bytes.extend_from_slice(&err.bytes);
    carry.stdout = hold_back_partial(&mut out_bytes, last);
    carry.stderr = hold_back_partial(&mut err_bytes, last);
    // A lossy read starts wherever the tail buffer did: drop a cut
    // character's remains there, as the foreground tail cut does.
    if out.lossy {
        out_bytes.drain(..char_boundary_skip(&out_bytes));
    }
    if err.lossy {
        err_bytes.drain(..char_boundary_skip(&err_bytes));
    }
    let lossy = std::mem::take(&mut carry.lossy) || out.lossy || err.lossy;
    let (out_spill, err_spill) = exec.spill_paths();
    ReadReply {
        delta_stdout: String::from_utf8_lossy(&out_bytes).into_owned(),
        delta_stderr: String::from_utf8_lossy(&err_bytes).into_owned(),
        lossy,
        status: Some(status),
        stdout_spill_path: out_spill.map(|p| p.to_string_lossy().into_owned()),
        stderr_spill_path: err_spill.map(|p| p.to_string_lossy().into_owned()),
        result: None,
    }
}

/// The longest a read request may take the supervisor from its run loop,
/// whatever the client does (trickles bytes, never reads its reply).
const CLIENT_BUDGET: Duration = Duration::from_millis(200);

/// Requests answered per tick at most, so a flood of connections cannot
/// keep the supervisor from its deadline and aborts.
const CLIENTS_PER_TICK: usize = 8;

/// The longest all read requests of one tick may take together: 200 ms.
/// Clients that connect and say nothing cost the run loop no more than
/// this, however many there are.
const TICK_BUDGET: Duration = Duration::from_millis(200);

/// Reads up to 8 bytes or EOF from `stream` before `deadline`: the request
/// line, or the reader's closing confirmation.
fn read_until(stream: &UnixStream, deadline: Instant) -> Option<Vec<u8>> {
    let mut got = Vec::new();
    let mut buf = [0u8; 8];
    loop {
        let left = deadline.checked_duration_since(Instant::now())?;
        stream
            .set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .ok()?;
        match (&*stream).read(&mut buf) {
            Ok(0) => return Some(got),
            Ok(n) => {
                got.extend_from_slice(&buf[..n]);
                if got.contains(&b'\n') || got.len() >= 8 {
                    return Some(got);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
}

/// Reads a request line (at most 32 bytes with its newline) from `stream`
/// before `deadline`: the line, and any bytes read past it.
fn read_request(stream: &UnixStream, deadline: Instant) -> Option<(String, Vec<u8>)> {
    let mut got = Vec::new();
    let mut buf = [0u8; 64];
    loop {
        if let Some(end) = got.iter().position(|b| *b == b'\n') {
            let rest = got.split_off(end + 1);
            return Some((String::from_utf8(got).ok()?, rest));
        }
        if got.len() > 32 {
            return None;
        }
        let left = deadline.checked_duration_since(Instant::now())?;
        stream
            .set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .ok()?;
        match (&*stream).read(&mut buf) {
            Ok(0) => return None,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
}

/// Reads the rest of a `write` request's `len` bytes after `have`.
fn read_payload(
    stream: &UnixStream,
    mut have: Vec<u8>,
    len: usize,
    deadline: Instant,
) -> Option<Vec<u8>> {
    if have.len() > len {
        return None;
    }
    have.reserve(len - have.len());
    let mut buf = vec![0u8; 64 * 1024];
    while have.len() < len {
        let left = deadline.checked_duration_since(Instant::now())?;
        stream
            .set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .ok()?;
        let want = (len - have.len()).min(buf.len());
        match (&*stream).read(&mut buf[..want]) {
            Ok(0) => return None,
            Ok(n) => have.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    Some(have)
}

/// Performs a `write N` or `close` request on `exec`.
fn write_request(
    exec: &mut Execution,
    stream: &UnixStream,
    line: &str,
    rest: Vec<u8>,
    deadline: Instant,
) -> WriteReply {
    use crate::exec::StdinRefusal;
    let refused = |r: StdinRefusal| WriteReply {
        written: 0,
        error: Some(
            match r {
                StdinRefusal::NotAPipe => "stdin is not a pipe (start the job with --stdin pipe)",
                StdinRefusal::Closed => "stdin is closed",
                StdinRefusal::Gone => "the command no longer reads its stdin",
            }
            .into(),
        ),
    };
    let bad = || WriteReply {
        written: 0,
        error: Some("bad request".into()),
    };
    if line == "close\n" {
        return match exec.close_stdin() {
            Ok(()) => WriteReply::default(),
            Err(r) => refused(r),
        };
    }
    if let Some(size) = line.strip_prefix("resize ") {
        let mut parts = size.split_whitespace().map(str::parse::<u16>);
        return match (parts.next(), parts.next()) {
            (Some(Ok(cols)), Some(Ok(rows))) if cols > 0 && rows > 0 => {
                match exec.resize(cols, rows) {
                    Ok(()) => WriteReply::default(),
                    Err(StdinRefusal::NotAPipe) => WriteReply {
                        written: 0,
                        error: Some("the job has no terminal (start it with --pty)".into()),
                    },
                    Err(r) => refused(r),
                }
            }
            _ => bad(),
        };
    }
    let Some(len) = line
        .strip_prefix("write ")
        .and_then(|n| n.trim_end().parse::<usize>().ok())
        .filter(|n| *n <= MAX_WRITE)
    else {
        return bad();
    };
    let Some(bytes) = read_payload(stream, rest, len, deadline) else {
        return bad();
    };
    match exec.write_stdin(&bytes) {
        Ok(written) => WriteReply {
            written,
            error: None,
        },
        Err(r) => refused(r),
    }
}

/// Answers pending read and write requests, each within [`CLIENT_BUDGET`].
/// A read reply its reader did not take (it closed first, or did not
/// confirm in time) goes back to the carry, so the next read has it.
pub(crate) fn serve(listener: &UnixListener, exec: &mut Execution, carry: &mut Carry, cap: usize) {
    let tick_end = Instant::now() + TICK_BUDGET;
    for _ in 0..CLIENTS_PER_TICK {
        if Instant::now() >= tick_end {
            return;
        }
        let Ok((stream, _)) = listener.accept() else {
            return;
        };
        let deadline = (Instant::now() + CLIENT_BUDGET).min(tick_end);
        let _ = stream.set_nonblocking(false);
        let Some((line, rest)) = read_request(&stream, deadline) else {
            continue;
        };
        if line == "progress\n" {
            let (stdout_bytes, stderr_bytes) = exec.bytes_so_far();
            answer(
                &stream,
                &Progress {
                    stdout_bytes,
                    stderr_bytes,
                },
                deadline,
            );
            continue;
        }
        if line != "read\n" {
            let reply = write_request(exec, &stream, &line, rest, deadline);
            answer(&stream, &reply, deadline);
            continue;
        }
        if !rest.is_empty() {
            continue;
        }
        let reply = delta_reply(exec, carry, Status::Running);
        let Ok(mut bytes) = serde_json::to_vec(&reply) else {
            continue;
        };
        bytes.push(b'\n');
        let left = deadline.saturating_duration_since(Instant::now());
        let _ = stream.set_write_timeout(Some(left.max(Duration::from_millis(1))));
        // The reader confirms by closing: EOF after the reply means it got it.
        let delivered = (&stream).write_all(&bytes).is_ok()
            && read_until(&stream, deadline).is_some_and(|rest| rest.is_empty());
        if !delivered {
            carry.put_back(reply, cap);
        }
    }
}

/// Writes `reply` as one JSON line to `stream`, within `deadline`; a
/// client that does not take it loses it (nothing is consumed by these).
fn answer(stream: &UnixStream, reply: &impl Serialize, deadline: Instant) {
    if let Ok(mut bytes) = serde_json::to_vec(reply) {
        bytes.push(b'\n');
        let left = deadline.saturating_duration_since(Instant::now());
        let _ = stream.set_write_timeout(Some(left.max(Duration::from_millis(1))));
        let _ = (&*stream).write_all(&bytes);
    }
}

/// Sends a `write` of `bytes` (at most [`MAX_WRITE`]), or a `close` when
/// `bytes` is `None`, to the supervisor listening on `sock`; `None` when it
/// does not answer (gone, or finished meanwhile).
pub(crate) fn ask_write(sock: &Path, bytes: Option<&[u8]>) -> Option<WriteReply> {
    match bytes {
        Some(b) => ask_request(sock, format!("write {}\n", b.len()).as_bytes(), b),
        None => ask_request(sock, b"close\n", &[]),
    }
}

/// Sends the request `line` (and `payload`) to the supervisor listening
/// on `sock` and reads its one-line answer ([`WriteReply`] or
/// [`Progress`]); `None` when it does not answer.
pub(crate) fn ask_request<T: serde::de::DeserializeOwned>(
    sock: &Path,
    line: &[u8],
    payload: &[u8],
) -> Option<T> {
    let mut stream = UnixStream::connect(sock).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    stream
        .set_write_timeout(Some(Duration::from_secs(5)))
        .ok()?;
    stream.write_all(line).ok()?;
    stream.write_all(payload).ok()?;
    let mut line = String::new();
    BufReader::new(&stream).read_line(&mut line).ok()?;
    serde_json::from_str(&line).ok()
}

/// Asks the supervisor listening on `sock` for a read; `None` when it does
/// not answer (gone, or finished meanwhile).
pub(crate) fn ask(sock: &Path) -> Option<ReadReply> {
    let mut stream = UnixStream::connect(sock).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    stream.write_all(b"read\n").ok()?;
    let mut line = String::new();
    BufReader::new(&stream).read_line(&mut line).ok()?;
    let reply = serde_json::from_str(&line).ok()?;
    // Closing confirms the delivery (the supervisor waits for EOF).
    drop(stream);
    Some(reply)
}
