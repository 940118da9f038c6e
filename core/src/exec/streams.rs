//! The command's output pipes while it runs: read into the captures, copied
//! live for `--stream`.

use std::fs::File;
use std::future::pending;
use std::io;
use std::os::fd::{AsFd, OwnedFd};

use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;

use crate::capture::utf8::{char_boundary_skip, hold_back_partial};
use crate::capture::{Delta, SpillDir, StreamCapture};
use crate::error::Error;
use crate::events::{CHUNK_PERIOD, Chunk, Event, EventSink};
use crate::render::terminal::Neutraliser;
use crate::spec::{LiveOutput, OnTerminal};

/// Bytes read from a pipe at once: 256 KiB.
const READ_CHUNK: usize = 256 * 1024;

/// The capacity an output pipe grows to once a read finds it full: 1 MiB,
/// the default `/proc/sys/fs/pipe-max-size` (pipe(7), `F_SETPIPE_SZ`). A
/// command that writes a lot then wakes this process once per megabyte
/// instead of once per 64 KiB. Pipes are charged to their user's
/// `pipe-user-pages-soft` (64 MiB), so only a stream that has filled its
/// pipe grows, never one that trickles (a background job's log): a few
/// bulky runs at once cost the user's other pipes nothing. A kernel that
/// refuses keeps the default, which only costs speed.
const PIPE_CAPACITY: i32 = 1 << 20;

/// A Linux pipe's default capacity: a read this large found the pipe full.
const DEFAULT_PIPE_CAPACITY: usize = 64 * 1024;

/// Chunks the live copy may queue before it drops output: 64 reads, at
/// most 16 MiB.
const LIVE_QUEUE: usize = 64;

/// One read handed to the live copy's thread: (to this process's stderr,
/// from the command's stderr, bytes of the same stream the queue dropped
/// just before these, the bytes).
type LiveChunk = (bool, bool, u64, Vec<u8>);

/// The live copy of the output for `--stream`, written by a thread of its
/// own: a reader that is slow (or stalled: `dsh-exec --stream ... | sleep`)
/// never holds up the supervision loop, its deadline or its aborts. Past
/// [`LIVE_QUEUE`] queued chunks, output is dropped from the live copy only
/// (the capture and the spill file keep every byte) and counted. A write
/// error (a closed stdout) ends the copy to that target, never the run.
struct Live {
    tx: Option<std::sync::mpsc::SyncSender<LiveChunk>>,
    /// Told when the writer has written everything queued.
    done: Option<std::sync::mpsc::Receiver<()>>,
    target: Option<LiveOutput>,
    /// Bytes of the command's (stdout, stderr) handed to the writer, and not.
    queued: [u64; 2],
    dropped: [u64; 2],
    /// Bytes of the command's (stdout, stderr) the writer has written.
    written: std::sync::Arc<[std::sync::atomic::AtomicU64; 2]>,
    /// Set when the end of the run stops waiting for the writer: it writes
    /// nothing more (what it still holds is counted as not shown).
    abandoned: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// The last byte written to (stdout, stderr), and whether stderr was
    /// written last: whether the live output ended mid-line where the
    /// result goes.
    ends: std::sync::Arc<std::sync::Mutex<LiveEnds>>,
    /// The copy goes to an [`EventSink`] as chunk events (`--events`), not
    /// to this process's stdout and stderr.
    events: bool,
    /// Bytes of (stdout, stderr) the queue dropped since its last chunk:
    /// handed over with the next one, so that the events thread never
    /// joins bytes across a gap and says how many are missing there.
    gap: [u64; 2],
    /// The gaps left at the end, for the events thread once the queue is
    /// closed.
    tail_gap: std::sync::Arc<[std::sync::atomic::AtomicU64; 2]>,
    /// Held by the events thread while it sends an event, and by the end of
    /// the run once it stops waiting for that thread: after it, the thread
    /// sends nothing more, so the closing events (`exit` last) come last.
    sending: std::sync::Arc<std::sync::Mutex<()>>,
}

/// What the live copy wrote last, per target.
#[derive(Debug, Default, Clone, Copy)]
struct LiveEnds {
    last: [Option<u8>; 2],
    stderr_last: bool,
}

/// The longest line the live copy holds back to judge it: 8 KiB. A line
/// of `dsh-exec`'s own shape is shorter (a truncation line with a path of
/// PATH_MAX is about 4.2 KiB); a longer one is shown as it comes.
const LINE_HOLD_MAX: usize = 8 * 1024;

/// The live copy's escaping of one stream: a line that reads as one of
/// `dsh-exec`'s own is shown with a backslash in front, as in the text
/// result ([`crate::render::escape_own_lines`]), so that `--stream` output
/// cannot forge a notice above the marker. Only a line that could be one
/// is held back until its end (`\n` or `\r`) or [`LINE_HOLD_MAX`]: one
/// that starts, or starts again after a carriage return, with `[`, `\`,
/// whitespace, an escape, or a multi-byte character (a no-break space);
/// every other byte is shown as it comes.
#[derive(Debug, Default)]
struct LineEscaper {
    /// Bytes of the current line held back; empty when not holding.
    held: Vec<u8>,
    holding: bool,
    /// The next byte starts a line (or follows a carriage return).
    mid_line: bool,
}

impl LineEscaper {
    fn could_start_own_line(b: u8) -> bool {
        matches!(b, b'[' | b'\\' | b' ' | b'\t' | 0x0b | 0x0c | 0x1b) || b >= 0xc2
    }

    /// The bytes to show now for `bytes`, the next of the stream. Whole runs
    /// of a line already judged harmless are copied at once.
    fn feed(&mut self, bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(bytes.len() + 1);
        let ends_line = |b: &u8| *b == b'\n' || *b == b'\r';
        let mut rest = bytes;
        while let Some(&b) = rest.first() {
            if self.holding {
                let room = LINE_HOLD_MAX - self.held.len();
                let upto = rest.iter().take(room).position(ends_line);
                match upto {
                    Some(i) => {
                        self.held.extend_from_slice(&rest[..=i]);
                        rest = &rest[i + 1..];
                        self.release(&mut out);
                        self.mid_line = false;
                    }
                    None if rest.len() < room => {
                        self.held.extend_from_slice(rest);
                        rest = &[];
                    }
                    None => {
                        self.held.extend_from_slice(&rest[..room]);
                        rest = &rest[room..];
                        out.append(&mut self.held);
                        self.holding = false;
                        self.mid_line = true;
                    }
                }
            } else if self.mid_line {
                match rest.iter().position(ends_line) {
                    Some(i) => {
                        out.extend_from_slice(&rest[..=i]);
                        rest = &rest[i + 1..];
                        self.mid_line = false;
                    }
                    None => {
                        out.extend_from_slice(rest);
                        rest = &[];
                    }
                }
            } else if Self::could_start_own_line(b) {
                self.holding = true;
            } else {
                self.mid_line = true;
            }
        }
        out
    }

    /// Shows the held line: escaped when it reads as one of dsh-exec's.
    fn release(&mut self, out: &mut Vec<u8>) {
        let line = std::mem::take(&mut self.held);
        self.holding = false;
        let end = line
            .iter()
            .rposition(|b| *b != b'\n' && *b != b'\r')
            .map_or(0, |i| i + 1);
        match crate::render::text::escaped_line(&String::from_utf8_lossy(&line[..end])) {
            Some(escaped) => {
                out.extend_from_slice(escaped.as_bytes());
                out.extend_from_slice(&line[end..]);
            }
            None => out.extend_from_slice(&line),
        }
    }

    /// What is still held, at the end of the stream.
    fn finish(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        if self.holding {
            self.release(&mut out);
        }
        out
    }
}

/// How long the end of a run waits for the live copy to be written: 2 s.
/// A reader that stopped reading altogether cannot keep `dsh-exec` alive;
/// what it did not take is counted as not shown.
const LIVE_FLUSH: std::time::Duration = std::time::Duration::from_secs(2);

impl Live {
    /// The live copy to `target`; where that is a terminal, shown as
    /// `on_terminal` says ([`crate::render::terminal`]).
    fn new(target: Option<LiveOutput>, on_terminal: OnTerminal) -> Result<Live, Error> {
        let mut live = Live {
            tx: None,
            done: None,
            target,
            queued: [0, 0],
            dropped: [0, 0],
            written: Default::default(),
            abandoned: Default::default(),
            ends: Default::default(),
            events: false,
            gap: [0, 0],
            tail_gap: Default::default(),
            sending: Default::default(),
        };
        if let Some(target) = target {
            use std::io::IsTerminal;
            use std::sync::atomic::Ordering;
            // Per stream of the command (stdout, stderr): whether it goes
            // to a terminal, and so is neutralised on its way.
            let colours = match on_terminal {
                OnTerminal::Escaped { colours } => Some(colours),
                OnTerminal::Exact => None,
            };
            let to_terminal = |to_stderr: bool| {
                if to_stderr {
                    io::stderr().is_terminal()
                } else {
                    io::stdout().is_terminal()
                }
            };
            let mut neutralisers: [Option<Neutraliser>; 2] = [false, true].map(|from_stderr| {
                let to_stderr = from_stderr || target == LiveOutput::Stderr;
                colours
                    .filter(|_| to_terminal(to_stderr))
                    .map(Neutraliser::new)
            });
            let (tx, rx) = std::sync::mpsc::sync_channel::<LiveChunk>(LIVE_QUEUE);
            let (done_tx, done_rx) = std::sync::mpsc::channel();
            let written = live.written.clone();
            let abandoned = live.abandoned.clone();
            let ends = live.ends.clone();
            std::thread::Builder::new()
                .name("live-output".into())
                .spawn(move || {
                    use std::io::Write;
                    let (mut stdout_ok, mut stderr_ok) = (true, true);
                    let mut escapers = [LineEscaper::default(), LineEscaper::default()];
                    let mut targets = [false, false];
                    // Checked with the stream's lock held: the result, written
                    // under the same lock once the copy is abandoned, is never
                    // followed by live output.
                    let mut write = |to_stderr: bool, bytes: &[u8]| -> bool {
                        if bytes.is_empty() {
                            return true;
                        }
                        let ok = if to_stderr && stderr_ok {
                            let mut e = io::stderr().lock();
                            stderr_ok = !abandoned.load(Ordering::SeqCst)
                                && e.write_all(bytes).and_then(|_| e.flush()).is_ok();
                            stderr_ok
                        } else if !to_stderr && stdout_ok {
                            let mut o = io::stdout().lock();
                            stdout_ok = !abandoned.load(Ordering::SeqCst)
                                && o.write_all(bytes).and_then(|_| o.flush()).is_ok();
                            stdout_ok
                        } else {
                            false
                        };
                        if ok && let Ok(mut e) = ends.lock() {
                            e.last[usize::from(to_stderr)] = bytes.last().copied();
                            e.stderr_last = to_stderr;
                        }
                        ok
                    };
                    for (to_stderr, from_stderr, _, bytes) in rx {
                        let side = usize::from(from_stderr);
                        targets[side] = to_stderr;
                        let shown = match &mut neutralisers[side] {
                            Some(n) => escapers[side].feed(&n.feed(&bytes)),
                            None => escapers[side].feed(&bytes),
                        };
                        if write(to_stderr, &shown) {
                            written[side].fetch_add(bytes.len() as u64, Ordering::Relaxed);
                        }
                    }
                    for side in 0..2 {
                        let mut rest = match &mut neutralisers[side] {
                            Some(n) => escapers[side].feed(&n.finish()),
                            None => Vec::new(),
                        };
                        rest.extend(escapers[side].finish());
                        write(targets[side], &rest);
                    }
                    let _ = done_tx.send(());
                })
                .map_err(|source| Error::Runtime {
                    what: "the live output thread",
                    source,
                })?;
            live.tx = Some(tx);
            live.done = Some(done_rx);
        }
        Ok(live)
    }

    /// The live copy as chunk events to `sink` (see [`crate::events`]):
    /// a thread of its own gathers each stream's bytes for
    /// [`CHUNK_PERIOD`] at most, and never holds more than `caps` (the
    /// streams' budgets) of a stream: past that, the oldest bytes go from
    /// the events only, and a `dropped` event says how many.
    fn events(sink: EventSink, caps: [u64; 2]) -> Result<Live, Error> {
        use std::sync::atomic::Ordering;
        use std::sync::mpsc::RecvTimeoutError;
        let mut live = Live::new(None, OnTerminal::Exact)?;
        live.target = Some(LiveOutput::Mirrored);
        live.events = true;
        let (tx, rx) = std::sync::mpsc::sync_channel::<LiveChunk>(LIVE_QUEUE);
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let written = live.written.clone();
        let abandoned = live.abandoned.clone();
        let tail_gap = live.tail_gap.clone();
        let sending = live.sending.clone();
        let caps = caps.map(|c| usize::try_from(c).unwrap_or(usize::MAX).max(4));
        // Sends one event unless the end of the run has stopped waiting for
        // this thread (then nothing more: the closing events are last).
        let emit = move |event: Event| -> bool {
            let Ok(_held) = sending.lock() else {
                return false;
            };
            if abandoned.load(Ordering::SeqCst) {
                return false;
            }
            sink(event);
            true
        };
        std::thread::Builder::new()
            .name("events".into())
            .spawn(move || {
                let mut held: [Vec<u8>; 2] = Default::default();
                let mut lost = [0u64; 2];
                let mut next = std::time::Instant::now();
                // Sends what `side` holds (all of it when `whole`, else up
                // to a character cut at its end), after a `dropped` event
                // for the bytes lost before it; false once stopped.
                let send = |side: usize,
                            held: &mut [Vec<u8>; 2],
                            lost: &mut [u64; 2],
                            whole: bool|
                 -> bool {
                    let name = ["stdout", "stderr"][side];
                    if lost[side] > 0 {
                        let bytes = std::mem::take(&mut lost[side]);
                        if !emit(Event::Dropped {
                            stream: name.into(),
                            bytes,
                        }) {
                            return false;
                        }
                    }
                    let partial = hold_back_partial(&mut held[side], whole);
                    let bytes = std::mem::replace(&mut held[side], partial);
                    if bytes.is_empty() {
                        return true;
                    }
                    let n = bytes.len() as u64;
                    let chunk = Chunk::of(&bytes);
                    let sent = emit(if side == 0 {
                        Event::Stdout(chunk)
                    } else {
                        Event::Stderr(chunk)
                    });
                    if sent {
                        written[side].fetch_add(n, Ordering::Relaxed);
                    }
                    sent
                };
                'run: loop {
                    let wait = if held.iter().any(|h| !h.is_empty()) || lost != [0, 0] {
                        next.saturating_duration_since(std::time::Instant::now())
                    } else {
                        std::time::Duration::from_secs(3600)
                    };
                    let ended = match rx.recv_timeout(wait) {
                        Ok((_, from_stderr, gap, bytes)) => {
                            let side = usize::from(from_stderr);
                            if gap > 0 {
                                // Never join bytes across what the queue
                                // dropped: what is held goes out now, then
                                // the count of the missing bytes.
                                if !send(side, &mut held, &mut lost, true) {
                                    break 'run;
                                }
                                lost[side] += gap;
                            }
                            let h = &mut held[side];
                            h.extend_from_slice(&bytes);
                            if h.len() > caps[side] {
                                let mut cut = h.len() - caps[side];
                                cut += char_boundary_skip(&h[cut..]);
                                h.drain(..cut);
                                lost[side] += cut as u64;
                            }
                            false
                        }
                        Err(RecvTimeoutError::Timeout) => false,
                        Err(RecvTimeoutError::Disconnected) => true,
                    };
                    if !ended && std::time::Instant::now() < next {
                        continue;
                    }
                    for side in 0..2 {
                        if !send(side, &mut held, &mut lost, ended) {
                            break 'run;
                        }
                        if ended {
                            // What the queue dropped after its last chunk
                            // comes after all that was held.
                            lost[side] += tail_gap[side].load(Ordering::SeqCst);
                            if !send(side, &mut held, &mut lost, true) {
                                break 'run;
                            }
                        }
                    }
                    next = std::time::Instant::now() + CHUNK_PERIOD;
                    if ended {
                        break;
                    }
                }
                let _ = done_tx.send(());
            })
            .map_err(|source| Error::Runtime {
                what: "the events thread",
                source,
            })?;
        live.tx = Some(tx);
        live.done = Some(done_rx);
        Ok(live)
    }

    fn copy(&mut self, bytes: &[u8], from_stderr: bool) {
        let to_stderr = match self.target {
            None => return,
            Some(LiveOutput::Stderr) => true,
            Some(LiveOutput::Mirrored) => from_stderr,
        };
        let Some(tx) = &self.tx else { return };
        let side = usize::from(from_stderr);
        match tx.try_send((to_stderr, from_stderr, self.gap[side], bytes.to_vec())) {
            Ok(()) => {
                self.queued[side] += bytes.len() as u64;
                self.gap[side] = 0;
            }
            Err(_) => {
                self.dropped[side] += bytes.len() as u64;
                self.gap[side] += bytes.len() as u64;
            }
        }
    }

    /// Waits, at most [`LIVE_FLUSH`], for the queued live output to be
    /// written (as fast as its reader takes it); the bytes of (stdout,
    /// stderr) not shown live.
    /// Whether the live output ended mid-line where the result's end
    /// follows it: with `--json` ([`LiveOutput::Stderr`]) this process's
    /// stderr, whose last byte written is not a newline; otherwise its
    /// stdout: the last byte written to stdout, or to stderr when stderr was
    /// written last and is the same file as stdout (`2>&1`), is not a
    /// newline.
    fn ended_mid_line(&self) -> bool {
        let Ok(e) = self.ends.lock() else {
            return false;
        };
        if self.events {
            return false;
        }
        if self.target == Some(LiveOutput::Stderr) {
            return e.last[1].is_some_and(|b| b != b'\n');
        }
        let same_file = {
            let id = |fd: std::os::fd::BorrowedFd<'_>| {
                nix::sys::stat::fstat(fd).ok().map(|s| (s.st_dev, s.st_ino))
            };
            let (out, err) = (id(io::stdout().as_fd()), id(io::stderr().as_fd()));
            out.is_some() && out == err
        };
        let last = if e.stderr_last && same_file {
            e.last[1]
        } else {
            e.last[0]
        };
        last.is_some_and(|b| b != b'\n')
    }

    fn finish(&mut self) -> [u64; 2] {
        use std::sync::atomic::Ordering;
        for (side, gap) in self.gap.iter().enumerate() {
            self.tail_gap[side].store(*gap, Ordering::SeqCst);
        }
        drop(self.tx.take());
        if let Some(done) = self.done.take()
            && done.recv_timeout(LIVE_FLUSH).is_err()
        {
            // A chunk being written now still reaches the reader before
            // the result (both hold the stream's lock) but is counted as
            // not shown: waiting for it could wait forever.
            self.abandoned.store(true, Ordering::SeqCst);
            if self.events {
                // The event being sent goes first; none follows it.
                drop(self.sending.lock());
            }
        }
        let mut dropped = self.dropped;
        for (side, d) in dropped.iter_mut().enumerate() {
            *d += self.queued[side].saturating_sub(self.written[side].load(Ordering::Relaxed));
        }
        dropped
    }
}

/// How often the files the command writes itself are checked against the
/// spill cap ([`crate::capture::bound_file`]): every 250 ms.
const BOUND_EVERY: std::time::Duration = std::time::Duration::from_millis(250);

/// How often, once the direct child has exited, the processes it left are
/// checked for descriptors of the output files: every 20 ms, as the tree
/// is polled while it dies ([`super::phases::TREE_POLL`]).
const HOLDERS_EVERY: std::time::Duration = super::phases::TREE_POLL;

/// The command's stdout and stderr as unnamed files it writes itself (see
/// [`crate::capture`], "Output the command writes itself"), made before the
/// spawn; the command gets descriptors of the same open file descriptions.
///
/// A pipe tells its reader when the last writer is gone (end of file); a
/// file does not. Its writers are the command's processes, so once the
/// direct child has exited, the processes it left are searched for a
/// descriptor of the file (`/proc/PID/task/TID/fd`, proc(5), compared by
/// the names its links read, see [`crate::proctree::tree_holds_links`]):
/// the run drains while one holds it, as it does while one holds a pipe. (inotify(7) `IN_CLOSE_WRITE` would tell
/// the last close at once, but closing an inotify instance waits for an
/// SRCU grace period, several milliseconds on every run.)
pub(crate) struct OutputFiles {
    files: [File; 2],
}

impl OutputFiles {
    /// Makes the two files in `spill_dir`'s parent. Errors where either
    /// cannot be made; the caller then uses pipes.
    pub(crate) fn new(spill_dir: &SpillDir) -> io::Result<OutputFiles> {
        Ok(OutputFiles {
            files: [spill_dir.unnamed_file()?, spill_dir.unnamed_file()?],
        })
    }

    /// The descriptors the child gets as stdout and stderr (duplicated by
    /// the spawn).
    pub(crate) fn child_fds(&self) -> [std::os::fd::BorrowedFd<'_>; 2] {
        [self.files[0].as_fd(), self.files[1].as_fd()]
    }
}

/// The timers of output files ([`Streams::written`]).
struct FileTimers {
    bound: tokio::time::Interval,
    holders: tokio::time::Interval,
    searching: bool,
}

/// One output pipe and its capture.
struct Stream {
    pipe: Option<pipe::Receiver>,
    /// The file the command writes this stream into itself, instead of
    /// the pipe, and whether a descriptor of the command's may still
    /// write it.
    file: Option<File>,
    writing: bool,
    capture: StreamCapture,
    /// Read buffer, allocated once per run (a supervisor drives the run in
    /// short slices).
    buf: Vec<u8>,
    /// The pipe was grown to [`PIPE_CAPACITY`] (or that was tried).
    grown: bool,
}

impl Stream {
    fn new(
        fd: Option<OwnedFd>,
        name: &'static str,
        budget: u64,
        keep: crate::capture::Keep,
        spill_cap: u64,
        terminal: bool,
    ) -> Result<Stream, Error> {
        // A pseudo-terminal's master is no FIFO, which tokio's pipe checks
        // for; it is read the same way (non-blocking, set by its opener),
        // and its EIO once every slave is closed ends it like end-of-file.
        let pipe = fd
            .map(|fd| {
                if terminal {
                    pipe::Receiver::from_owned_fd_unchecked(fd)
                } else {
                    pipe::Receiver::from_owned_fd(fd)
                }
            })
            .transpose()
            .map_err(|source| Error::Runtime {
                what: "the output pipes",
                source,
            })?;
        Ok(Stream {
            buf: if pipe.is_some() {
                vec![0u8; READ_CHUNK]
            } else {
                Vec::new()
            },
            pipe,
            file: None,
            writing: false,
            capture: StreamCapture::new(name, budget)
                .keeping(keep)
                .spill_cap(spill_cap),
            grown: false,
        })
    }

    /// The stream as the command writes it into `file` itself.
    fn written_to(mut self, file: File) -> Stream {
        self.file = Some(file);
        self.writing = true;
        self
    }

    /// Bytes of the stream so far.
    fn total(&self) -> u64 {
        match &self.file {
            Some(f) => f.metadata().map(|m| m.len()).unwrap_or(0),
            None => self.capture.total(),
        }
    }

    /// The capture, the file the command wrote taken in.
    fn into_capture(mut self, spill_dir: &mut SpillDir) -> StreamCapture {
        match self.file.take() {
            Some(f) => self.capture.take_file(f, spill_dir),
            None => self.capture,
        }
    }

    async fn read(&mut self) -> io::Result<usize> {
        match &mut self.pipe {
            Some(p) => p.read(&mut self.buf).await,
            None => pending().await,
        }
    }

    /// Takes the outcome of a read: bytes into the capture (and the live
    /// copy), end-of-file or an error closes the pipe.
    fn took(&mut self, read: io::Result<usize>, live: &mut Live, spill: &mut SpillDir, err: bool) {
        match read {
            Ok(n) if n > 0 => {
                if n >= DEFAULT_PIPE_CAPACITY
                    && !self.grown
                    && let Some(p) = &self.pipe
                {
                    self.grown = true;
                    let _ = nix::fcntl::fcntl(p, nix::fcntl::FcntlArg::F_SETPIPE_SZ(PIPE_CAPACITY));
                }
                live.copy(&self.buf[..n], err);
                self.capture.push(&self.buf[..n], spill);
            }
            _ => self.pipe = None,
        }
    }
}

/// Where the live copy of the output goes.
pub(crate) enum LiveCopy {
    /// `--stream`'s target (none without it), shown as `OnTerminal` says
    /// where it is a terminal.
    Shown(Option<LiveOutput>, OnTerminal),
    /// Chunk events (`--events`).
    Events(EventSink),
}

/// stdout and stderr of the command, the spill directory they overflow
/// into, and the live copy.
pub(crate) struct Streams {
    out: Stream,
    err: Stream,
    spill_dir: SpillDir,
    live: Live,
    /// For [`OutputFiles`]: the timers of the spill cap's check and of the
    /// search for processes still holding the files, and whether that
    /// search is due (a process held one at the last).
    files: Option<FileTimers>,
}

impl Streams {
    /// The captures of a spawned command's pipes (`None` for an interactive
    /// run, whose output is not captured): (stdout, stderr, whether stdout
    /// is a pseudo-terminal's master).
    pub(crate) fn new(
        (stdout, stderr, terminal): (Option<OwnedFd>, Option<OwnedFd>, bool),
        budgets: (u64, u64),
        keep: crate::capture::Keep,
        spill_cap: u64,
        spill_dir: SpillDir,
        live: LiveCopy,
    ) -> Result<Streams, Error> {
        let live = match live {
            LiveCopy::Events(sink) => Live::events(sink, [budgets.0, budgets.1])?,
            LiveCopy::Shown(target, on_terminal) => Live::new(target, on_terminal)?,
        };
        Ok(Streams {
            out: Stream::new(stdout, "stdout", budgets.0, keep, spill_cap, terminal)?,
            err: Stream::new(stderr, "stderr", budgets.1, keep, spill_cap, false)?,
            spill_dir,
            live,
            files: None,
        })
    }

    /// The captures of a command that writes its output into `files`
    /// itself, once it has been spawned.
    pub(crate) fn written(
        files: OutputFiles,
        budgets: (u64, u64),
        keep: crate::capture::Keep,
        spill_cap: u64,
        spill_dir: SpillDir,
    ) -> Result<Streams, Error> {
        let OutputFiles { files: [out, err] } = files;
        let every = |period| {
            // The first tick one period on, not at once.
            let mut t = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
            t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            t
        };
        Ok(Streams {
            out: Stream::new(None, "stdout", budgets.0, keep, spill_cap, false)?.written_to(out),
            err: Stream::new(None, "stderr", budgets.1, keep, spill_cap, false)?.written_to(err),
            spill_dir,
            live: Live::new(None, OnTerminal::Exact)?,
            files: Some(FileTimers {
                bound: every(BOUND_EVERY),
                holders: every(HOLDERS_EVERY),
                searching: false,
            }),
        })
    }

    /// Output files: waits for the spill cap's next check, or for the next
    /// search for holders while one is due. Pending forever once no
    /// process of the command can write them.
    async fn watch_files(&mut self) {
        let Some(timers) = &mut self.files else {
            return pending().await;
        };
        if !self.out.writing && !self.err.writing {
            return pending().await;
        }
        let searching = timers.searching;
        tokio::select! {
            _ = timers.bound.tick() => {
                for s in [&self.out, &self.err] {
                    if let Some(f) = &s.file {
                        crate::capture::bound_file(f, s.capture.cap(), s.capture.budget());
                    }
                }
            }
            // Wakes the loop, which searches again (`holders_gone`).
            _ = timers.holders.tick(), if searching => {}
        }
    }

    /// Whether an output file may still be written by the command.
    pub(crate) fn files_open(&self) -> bool {
        self.files.is_some() && (self.out.writing || self.err.writing)
    }

    /// Output files, once the direct child has exited: marks each file no
    /// process of `tree` holds as closed (see [`OutputFiles`]).
    pub(crate) fn holders_gone(&mut self, tree: &crate::proctree::Tree) {
        let Some(timers) = &mut self.files else {
            return;
        };
        // The files as this process's descriptors name them: `PATH/#INODE
        // (deleted)`, one name per unnamed file of that file system.
        let links: Vec<std::path::PathBuf> = [&self.out, &self.err]
            .iter()
            .map(|s| match (&s.file, s.writing) {
                (Some(f), true) => {
                    use std::os::fd::AsRawFd;
                    std::fs::read_link(format!("/proc/self/fd/{}", f.as_raw_fd()))
                        .unwrap_or_default()
                }
                _ => std::path::PathBuf::new(),
            })
            .collect();
        if links.iter().all(|l| l.as_os_str().is_empty()) {
            return;
        }
        let held = crate::proctree::tree_holds_links(tree, &links);
        self.out.writing &= held[0];
        self.err.writing &= held[1];
        timers.searching = self.out.writing || self.err.writing;
    }

    /// Reads the next chunk from whichever pipe has one (output files: see
    /// [`Streams::watch_files`]); pending forever once both are closed.
    /// Cancel-safe: a read that did not complete took no bytes.
    pub(crate) async fn read_some(&mut self) {
        if self.files.is_some() {
            return self.watch_files().await;
        }
        let Streams {
            out,
            err,
            spill_dir,
            live,
            ..
        } = self;
        tokio::select! {
            r = out.read() => out.took(r, live, spill_dir, false),
            r = err.read() => err.took(r, live, spill_dir, true),
        }
    }

    /// Whether a pipe has bytes waiting to be read now, asked of the kernel
    /// (poll(2) with no wait), not of the runtime, whose readiness may lag
    /// behind after this process was stopped.
    pub(crate) fn output_waiting(&self) -> bool {
        let mut fds: Vec<nix::poll::PollFd> = [&self.out, &self.err]
            .iter()
            .filter_map(|s| s.pipe.as_ref())
            .map(|p| nix::poll::PollFd::new(p.as_fd(), nix::poll::PollFlags::POLLIN))
            .collect();
        !fds.is_empty()
            && nix::poll::poll(&mut fds, nix::poll::PollTimeout::ZERO).is_ok_and(|n| n > 0)
    }

    /// True when both pipes are closed (or their reading was cut off), and
    /// no descriptor of the command's writes an output file.
    pub(crate) fn closed(&self) -> bool {
        [&self.out, &self.err]
            .iter()
            .all(|s| s.pipe.is_none() && !s.writing)
    }

    /// Stops reading; what was read is kept (what the command writes into
    /// an output file still lands there, until its processes are gone).
    pub(crate) fn stop_reading(&mut self) {
        for s in [&mut self.out, &mut self.err] {
            s.pipe = None;
            s.writing = false;
        }
    }

    /// Consumes the output produced since the previous call: (stdout,
    /// stderr). Output files have no deltas (empty): a run whose output is
    /// read while it runs (a background job) gets pipes.
    pub(crate) fn read_delta(&mut self) -> (Delta, Delta) {
        (self.out.capture.read_delta(), self.err.capture.read_delta())
    }

    /// The captures, to finish, the spill directory, and the bytes of
    /// (stdout, stderr) the live copy could not show; waits for the live
    /// copy to be written.
    /// The captures, the spill directory, the bytes of (stdout, stderr) not
    /// shown live, and whether the live output ended mid-line where stdout
    /// goes.
    pub(crate) fn into_parts(mut self) -> (StreamCapture, StreamCapture, SpillDir, [u64; 2], bool) {
        let dropped = self.live.finish();
        let mid_line = self.live.ended_mid_line();
        let mut spill_dir = self.spill_dir;
        let out = self.out.into_capture(&mut spill_dir);
        let err = self.err.into_capture(&mut spill_dir);
        (out, err, spill_dir, dropped, mid_line)
    }

    /// Bytes of (stdout, stderr) so far.
    pub(crate) fn totals(&self) -> (u64, u64) {
        (self.out.total(), self.err.total())
    }

    /// The spill files of (stdout, stderr), once the streams outgrew their budgets.
    pub(crate) fn spill_paths(&self) -> (Option<&std::path::Path>, Option<&std::path::Path>) {
        (self.out.capture.spill_path(), self.err.capture.spill_path())
    }
}
