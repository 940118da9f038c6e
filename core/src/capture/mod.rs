//! Bounded capture of one output stream: a tail buffer plus a spill file.
//!
//! Each stream keeps at most `budget` bytes, the most recent ones. The first
//! byte past the budget creates the stream's spill file (mode 0600, inside the
//! run's private 0700 spill directory), which from then on receives every byte
//! of the stream, starting with the bytes already held, so it ends up holding
//! the exact full stream. Memory stays bounded by the budget whatever the
//! command prints; a stream that fits never touches the disk.
//!
//! While the spill file takes every byte, the tail is not copied into
//! memory at all: it is the file's last `budget` bytes, read back with
//! pread(2) when a delta or the result needs it. A stream that prints
//! gigabytes through a small budget so costs one copy (pipe to file) in
//! this process, not two. This relies on nothing but this process writing
//! the file: it is created O_EXCL in the run's private 0700 directory, and a
//! confined command cannot reach that directory (it lies outside the
//! writable roots, or is hidden). An unconfined command, which runs as the
//! same user, could rewrite the file; it could as well print those bytes.
//! Anywhere but dsh-exec's own `STATE/spill` outside the writable roots
//! (a `--spill-dir`, the temp dir as a fallback, the state directory
//! inside a writable root without a mount namespace) the [`SpillDir`] is
//! marked exposed and the tail stays in memory.
//!
//! # Output the command writes itself
//!
//! With `--output-files`, where nothing needs the bytes while the command
//! runs (no `--stream`, no terminal, no background reads, no memory or
//! file-size limit, a spill directory with room for the spill cap), the
//! command's stdout and stderr are not pipes but unnamed files
//! ([`SpillDir::unnamed_file`]):
//! the command writes its output to disk itself, and this process copies
//! nothing. At the end the file's size is the stream's total; a stream that
//! fit is read back and the file vanishes with its descriptor; one that
//! outgrew its budget is named in the private directory
//! ([`SpillDir::link`]) and its tail read back with pread(2)
//! ([`StreamCapture::take_file`]). The spill cap is kept from the file's
//! size ([`bound_file`]). The command holds a descriptor of the file, so
//! it can rewrite what it wrote there (clear `O_APPEND`, ftruncate(2)), as
//! it could have left it unwritten. Reopening `/dev/stdout` by path opens
//! the file anew (proc(5): the link names the file, not the descriptor):
//! `> /dev/stdout` truncates it, as under `> FILE` (a confined command too:
//! its ruleset has a rule for each file,
//! `sandbox::Prepared::grant_output_files`). A pipe reopened so is the same
//! pipe, which is why pipes are the default.

mod spill;
pub(crate) mod utf8;

use std::collections::VecDeque;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use self::spill::{Pruned, SpillDir, prune_spill_dirs};
pub(crate) use self::spill::{is_spill_dir_name, random_suffix};
use self::utf8::char_boundary_skip;

/// Which part of a stream that outgrew its budget the result keeps.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
pub enum Keep {
    /// The last `budget` bytes (the default, as DESIGN.md has it).
    #[default]
    #[serde(rename = "tail")]
    Tail,
    /// The first `budget` bytes.
    #[serde(rename = "head")]
    Head,
    /// The first half of the budget and the last half (the odd byte goes
    /// to the tail), with an omission line between them in the text.
    #[serde(rename = "head+tail")]
    HeadTail,
}

impl Keep {
    /// Every value, as on the command line.
    pub const ALL: [Keep; 3] = [Keep::Tail, Keep::Head, Keep::HeadTail];

    /// `tail`, `head` or `head+tail`.
    pub fn as_str(self) -> &'static str {
        match self {
            Keep::Tail => "tail",
            Keep::Head => "head",
            Keep::HeadTail => "head+tail",
        }
    }

    /// Bytes of the head a stream with `budget` keeps.
    fn head_budget(self, budget: usize) -> usize {
        match self {
            Keep::Tail => 0,
            Keep::Head => budget,
            Keep::HeadTail => budget / 2,
        }
    }
}

impl std::str::FromStr for Keep {
    type Err = String;

    /// Parses `tail`, `head` or `head+tail`; errors with a message naming
    /// them.
    fn from_str(s: &str) -> Result<Keep, String> {
        Keep::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| format!("invalid keep '{s}' (tail, head or head+tail)"))
    }
}

/// What one stream produced, as reported in the result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct CollectedOutput {
    /// The kept text: the tail (`kept: tail` and `head+tail`) or the head
    /// (`kept: head`); invalid UTF-8 replaced by U+FFFD, a cut never inside
    /// a UTF-8 character, and where it can, at a line boundary.
    pub text: String,
    /// The kept head, for `kept: head+tail` when the stream was cut
    /// (absent otherwise); `text` is then the tail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head: Option<String>,
    /// True when bytes of the stream are not in the kept text.
    pub truncated: bool,
    /// Which part was kept: `tail`, `head` or `head+tail`.
    #[serde(default)]
    #[schemars(with = "String")]
    pub kept: Keep,
    /// Bytes of the stream in neither `text` nor `head` (in the spill file).
    #[serde(default)]
    pub omitted_bytes: u64,
    /// `raw`, or `plain` when terminal effects were applied to the text
    /// fields (`--render plain`); the byte counts and the spill file stay raw.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub render: Option<String>,
    /// Bytes the stream produced in all.
    pub total_bytes: u64,
    /// Bytes of the stream that `text` was decoded from (the kept tail).
    #[serde(skip)]
    pub kept_bytes: u64,
    /// The spill file holding the exact full stream, when it outgrew its budget.
    #[serde(serialize_with = "crate::serde_paths::lossy_opt_path")]
    pub spill_path: Option<PathBuf>,
    /// Why writing the spill file failed, when it did (bytes after the
    /// failure exist only in the tail).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spill_error: Option<String>,
    /// The spill file reached `--spill-max-bytes` and stopped growing
    /// (absent when not): it holds the stream's first bytes only.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub spill_truncated: bool,
    /// Bytes of the stream past the spill cap: in neither the spill file
    /// nor, but for the tail's last ones, the result (absent when none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub spill_dropped_bytes: u64,
    /// Bytes the live copy (`--stream`) could not show because its reader
    /// fell behind (absent when none); the tail and the spill file have them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub live_dropped_bytes: u64,
    /// `--stream`: the live output ended mid-line where the result goes
    /// (not in the JSON: the result needs a newline first).
    #[serde(skip)]
    #[schemars(skip)]
    pub live_ended_mid_line: bool,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl CollectedOutput {
    /// Bytes produced but not present in `text` or `head`.
    pub fn omitted_bytes(&self) -> u64 {
        self.total_bytes.saturating_sub(self.kept_bytes)
    }
}

/// How far into the kept text a cut looks for a line boundary: 1 KiB, or
/// an eighth of the budget when that is less. A line longer than that is
/// cut by bytes.
fn line_window(budget: usize) -> usize {
    (budget / 8).min(1024)
}

/// Where a tail cut starts: after the first `\n` within the line window of
/// `kept`, when the cut lands mid-line (`before`, the byte before the
/// kept ones, is not a `\n`), then never inside a UTF-8 character.
fn tail_start(kept: &[u8], before: Option<u8>, budget: usize) -> usize {
    let mid_line = before.is_some_and(|b| b != b'\n');
    let window = line_window(budget).min(kept.len());
    if mid_line && let Some(nl) = kept[..window].iter().position(|b| *b == b'\n') {
        return nl + 1;
    }
    char_boundary_skip(kept)
}

/// Where a head cut ends: after the last `\n` within the line window at
/// the end of `head`, when the cut lands mid-line (`next`, the byte after
/// it, is not the start of a line), else before an incomplete UTF-8
/// character.
fn head_end(head: &[u8], next_starts_line: bool, budget: usize) -> usize {
    let window = line_window(budget).min(head.len());
    if !next_starts_line
        && let Some(nl) = head[head.len() - window..]
            .iter()
            .rposition(|b| *b == b'\n')
    {
        return head.len() - window + nl + 1;
    }
    let mut h = head.to_vec();
    let held = self::utf8::hold_back_partial(&mut h, false);
    head.len() - held.len()
}

/// New bytes since the previous read of a stream's delta.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delta {
    /// The unread bytes still held by the tail buffer.
    pub bytes: Vec<u8>,
    /// True when unread bytes had already left the tail buffer (they are in
    /// the spill file).
    pub lossy: bool,
}

/// The live capture of one stream.
#[derive(Debug)]
pub struct StreamCapture {
    name: &'static str,
    budget: usize,
    tail: VecDeque<u8>,
    total: u64,
    read_cursor: u64,
    spill_path: Option<PathBuf>,
    spill_file: Option<File>,
    spill_error: Option<String>,
    /// The tail is the spill file's last `min(budget, total)` bytes, not
    /// `tail` (see the module documentation).
    tail_in_file: bool,
    /// The byte just before `tail`, once bytes have left it: whether the
    /// tail starts mid-line.
    before_tail: Option<u8>,
    /// What the result keeps, and the first bytes of the stream it needs
    /// for that (at most `keep.head_budget(budget)` bytes, and one more,
    /// to tell whether the head ends at a line's end).
    keep: Keep,
    head: Vec<u8>,
    /// The most bytes the spill file takes ([`StreamCapture::spill_cap`]).
    spill_cap: u64,
    /// Bytes written to the spill file, and bytes past the cap.
    spilled: u64,
    spill_dropped: u64,
}

impl StreamCapture {
    /// A capture named `name` (`stdout`, `stderr`: also the spill file's name)
    /// that keeps at most `budget` bytes in memory.
    pub fn new(name: &'static str, budget: u64) -> StreamCapture {
        let budget = usize::try_from(budget).unwrap_or(usize::MAX);
        StreamCapture {
            name,
            budget,
            tail: VecDeque::new(),
            total: 0,
            read_cursor: 0,
            spill_path: None,
            spill_file: None,
            spill_error: None,
            tail_in_file: false,
            before_tail: None,
            keep: Keep::Tail,
            head: Vec::new(),
            spill_cap: u64::MAX,
            spilled: 0,
            spill_dropped: 0,
        }
    }

    /// The same capture with its spill file capped at `cap` bytes: past it
    /// the file stops growing, the tail (in memory from then on) keeps the
    /// newest bytes, and the bytes past the cap are counted.
    pub fn spill_cap(mut self, cap: u64) -> StreamCapture {
        self.spill_cap = cap;
        self
    }

    /// The same capture keeping `keep` of the stream in the result.
    pub fn keeping(mut self, keep: Keep) -> StreamCapture {
        self.keep = keep;
        self
    }

    /// Takes `chunk`, the next bytes of the stream; opens the spill file in
    /// `spill_dir` when the stream first outgrows its budget.
    pub fn push(&mut self, chunk: &[u8], spill_dir: &mut SpillDir) {
        if chunk.is_empty() {
            return;
        }
        let want = self.keep.head_budget(self.budget).saturating_add(1);
        if self.head.len() < want {
            let take = (want - self.head.len()).min(chunk.len());
            self.head.extend_from_slice(&chunk[..take]);
        }
        let outgrows = self.tail.len() + chunk.len() > self.budget;
        if outgrows && self.spill_path.is_none() && self.spill_error.is_none() {
            self.open_spill(spill_dir);
        }
        if self.spill_file.is_some() && self.spilled + chunk.len() as u64 > self.spill_cap {
            // The cap: the file takes what fits, then nothing more; the
            // tail comes back into memory and goes on there.
            let fits = (self.spill_cap - self.spilled.min(self.spill_cap)) as usize;
            if let Some(file) = &mut self.spill_file
                && file.write_all(&chunk[..fits]).is_ok()
            {
                self.spilled += fits as u64;
            }
            self.spill_dropped += (chunk.len() - fits) as u64;
            // The tail as it stands before this chunk (total not yet counted).
            self.load_tail();
            self.spill_file = None;
            self.total += chunk.len() as u64;
            self.keep_in_tail(chunk);
            return;
        }
        if self.spill_file.is_none() && self.spill_path.is_some() && self.spill_error.is_none() {
            // Past the cap already.
            self.spill_dropped += chunk.len() as u64;
            self.total += chunk.len() as u64;
            self.keep_in_tail(chunk);
            return;
        }
        if let Some(file) = &mut self.spill_file {
            match file.write_all(chunk) {
                Ok(()) if !spill_dir.exposed() => {
                    self.spilled += chunk.len() as u64;
                    self.total += chunk.len() as u64;
                    if !self.tail_in_file {
                        self.tail_in_file = true;
                        // Emptied, not freed: the allocator would keep
                        // the pages anyway, and [`Self::load_tail`]
                        // reads the tail back into this buffer.
                        self.tail.clear();
                    }
                    return;
                }
                Ok(()) => self.spilled += chunk.len() as u64,
                Err(e) => {
                    // The file holds the stream up to this chunk (a partial
                    // write only adds bytes past `total`): the tail comes
                    // back from it, and from here on lives in memory only.
                    self.load_tail();
                    self.spill_error = Some(e.to_string());
                    self.spill_file = None;
                }
            }
        }
        self.total += chunk.len() as u64;
        self.keep_in_tail(chunk);
    }

    /// Appends `chunk` to the in-memory tail, keeping its last `budget`
    /// bytes and the byte before them.
    fn keep_in_tail(&mut self, chunk: &[u8]) {
        let from = chunk.len().saturating_sub(self.budget);
        let keep = &chunk[from..];
        let excess = (self.tail.len() + keep.len()).saturating_sub(self.budget);
        if from > 0 {
            self.before_tail = Some(chunk[from - 1]);
        } else if excess > 0 {
            self.before_tail = self.tail.get(excess - 1).copied();
        }
        self.tail.drain(..excess);
        self.tail.extend(keep);
    }

    /// Brings the tail back into memory from the spill file, when it lives
    /// there. A file made shorter behind this process's back gives a shorter
    /// tail (what could be read), never an error.
    fn load_tail(&mut self) {
        if !std::mem::take(&mut self.tail_in_file) {
            return;
        }
        let Some(file) = &self.spill_file else {
            return;
        };
        let n = (self.budget as u64).min(self.total);
        // Into the buffer the tail had before it moved to the file (its
        // capacity is the budget when the budget was filled in memory):
        // a second buffer of the budget's size would stay resident beside
        // the first, and peak memory would grow with the output.
        let mut buf = Vec::from(std::mem::take(&mut self.tail));
        buf.clear();
        buf.resize(n as usize, 0);
        let got = read_fully_at(file, &mut buf, self.total - n);
        buf.truncate(got);
        // The byte before the tail, where there is one.
        if self.total > n {
            let mut byte = [0u8];
            if read_fully_at(file, &mut byte, self.total - n - 1) == 1 {
                self.before_tail = Some(byte[0]);
            }
        }
        self.tail = VecDeque::from(buf);
    }

    fn open_spill(&mut self, spill_dir: &mut SpillDir) {
        let created = spill_dir.create_file(self.name).and_then(|(path, mut f)| {
            let (a, b) = self.tail.as_slices();
            f.write_all(a)?;
            f.write_all(b)?;
            Ok((path, f))
        });
        self.spilled = self.tail.len() as u64;
        match created {
            Ok((path, f)) => {
                self.spill_file = Some(f);
                self.spill_path = Some(path);
            }
            Err(e) => self.spill_error = Some(format!("spill file: {e}")),
        }
    }

    /// Takes a note that `dsh-exec` itself adds to the stream (it never
    /// outgrows an unlimited budget, so no spill directory is needed).
    pub fn push_text(&mut self, text: &str) {
        self.load_tail();
        self.total += text.len() as u64;
        self.tail.extend(text.as_bytes());
    }

    /// The spill cap, in bytes.
    pub(crate) fn cap(&self) -> u64 {
        self.spill_cap
    }

    /// The budget, in bytes.
    pub(crate) fn budget(&self) -> u64 {
        self.budget as u64
    }

    /// Bytes pushed so far.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The spill file's path, once the stream has outgrown its budget.
    pub fn spill_path(&self) -> Option<&Path> {
        self.spill_path.as_deref()
    }

    /// Consumes the bytes produced since the previous call (the background
    /// projection of the same capture).
    pub fn read_delta(&mut self) -> Delta {
        self.load_tail();
        let held_from = self.total - self.tail.len() as u64;
        let lossy = self.read_cursor < held_from;
        let start = self.read_cursor.max(held_from) - held_from;
        let bytes = self.tail.range(start as usize..).copied().collect();
        self.read_cursor = self.total;
        Delta { bytes, lossy }
    }

    /// Finishes the capture: closes the spill file and renders the tail.
    ///
    /// A stream that fit its budget is kept whole, whatever `keep` says.
    pub fn finish(mut self) -> CollectedOutput {
        self.load_tail();
        drop(self.spill_file.take());
        let truncated = self.total > self.tail.len() as u64;
        let budget = self.budget;
        let head_budget = self.keep.head_budget(budget);
        // The kept bytes become the text in place where they are valid
        // UTF-8: one copy of the tail in memory, not two.
        let owned = |mut b: Vec<u8>, from: usize| -> String {
            b.drain(..from);
            String::from_utf8(b)
                .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
        };
        if !truncated || self.keep == Keep::Tail {
            let bytes = Vec::from(std::mem::take(&mut self.tail));
            let from = if truncated {
                tail_start(&bytes, self.before_tail, budget)
            } else {
                0
            };
            let kept_bytes = (bytes.len() - from) as u64;
            return self.collected(owned(bytes, from), None, truncated, kept_bytes);
        }
        let h = &self.head[..head_budget.min(self.head.len())];
        let next = self.head.get(h.len()).is_none_or(|b| *b == b'\n') || h.last() == Some(&b'\n');
        let h = &h[..head_end(h, next, budget)];
        let lossy = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        let (text, head, kept_bytes) = if self.keep == Keep::Head {
            (lossy(h), None, h.len() as u64)
        } else {
            // head+tail: the tail's share, after the head's.
            let bytes = self.tail.make_contiguous();
            let share = budget - head_budget;
            let t_from = bytes.len().saturating_sub(share);
            let before = if t_from > 0 {
                Some(bytes[t_from - 1])
            } else {
                self.before_tail
            };
            let t = &bytes[t_from..];
            let t = &t[tail_start(t, before, budget)..];
            (lossy(t), Some(lossy(h)), (h.len() + t.len()) as u64)
        };
        self.collected(text, head, truncated, kept_bytes)
    }

    /// The result's part for this stream, given its kept text (and head).
    fn collected(
        self,
        text: String,
        head: Option<String>,
        truncated: bool,
        kept_bytes: u64,
    ) -> CollectedOutput {
        CollectedOutput {
            text,
            head,
            truncated,
            kept: self.keep,
            omitted_bytes: self.total.saturating_sub(kept_bytes),
            render: None,
            total_bytes: self.total,
            kept_bytes,
            spill_path: self.spill_path,
            spill_error: self.spill_error,
            spill_truncated: self.spill_dropped > 0,
            spill_dropped_bytes: self.spill_dropped,
            live_dropped_bytes: 0,
            live_ended_mid_line: false,
        }
    }
}

/// Room left above the spill cap in a file the command writes itself
/// before [`bound_file`] frees what lies past the cap: 64 MiB. The file's
/// blocks on disk so stay within the cap, the budget, this slack and what
/// the command writes between two checks.
pub(crate) const CAP_SLACK: u64 = 64 << 20;

/// Keeps a file the command writes itself ([`SpillDir::unnamed_file`])
/// within its spill cap while it grows: once its size passes `cap` by
/// [`CAP_SLACK`], the blocks between `cap` (or `budget`, the most a head
/// keeps, when that is more) and the last `budget` bytes (less the slack)
/// are freed with fallocate(2)
/// `FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE`; they read as zeros, and
/// [`StreamCapture::take_file`] cuts the file back to `cap` at the end. A
/// file system without hole punching keeps them (the check of free room
/// before the run allowed for the cap). Returns the file's size in bytes.
pub(crate) fn bound_file(file: &File, cap: u64, budget: u64) -> u64 {
    let Ok(size) = file.metadata().map(|m| m.len()) else {
        return 0;
    };
    let keep_from = size.saturating_sub(budget.saturating_add(CAP_SLACK)) & !4095;
    // Never the head: `--keep head` reads up to a budget from the start.
    let from = cap.max(budget).saturating_add(4095) & !4095;
    if size > cap.saturating_add(CAP_SLACK) && keep_from > from {
        use nix::fcntl::{FallocateFlags, fallocate};
        let _ = fallocate(
            file,
            FallocateFlags::FALLOC_FL_PUNCH_HOLE | FallocateFlags::FALLOC_FL_KEEP_SIZE,
            from as i64,
            (keep_from - from) as i64,
        );
    }
    size
}

impl StreamCapture {
    /// The capture of a stream the command wrote into `file` itself
    /// ([`SpillDir::unnamed_file`]), once every writer is gone: `self` as
    /// made by [`StreamCapture::new`] with its keep and cap, no bytes pushed.
    ///
    /// The stream is the file: its size is the total. One that fits the
    /// budget is read into memory and the file dropped (it has no name, so
    /// nothing is left). One that outgrew it has its head and tail read
    /// into memory, is cut to the spill cap where it passed it (as a piped
    /// stream's spill file stops there), and is then named in `spill_dir`.
    /// A failure to name it is a `spill_error`.
    pub(crate) fn take_file(mut self, file: File, spill_dir: &mut SpillDir) -> StreamCapture {
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        let read = |at: u64, n: u64| -> Vec<u8> {
            let mut buf = vec![0u8; n as usize];
            let got = read_fully_at(&file, &mut buf, at);
            buf.truncate(got);
            buf
        };
        if size <= self.budget as u64 {
            let bytes = read(0, size);
            self.total = bytes.len() as u64;
            self.head = bytes[..bytes.len().min(self.keep.head_budget(self.budget) + 1)].to_vec();
            self.tail = VecDeque::from(bytes);
            return self;
        }
        // Head and tail are read before the file has a name: until then
        // nothing but the command's descriptors (all closed now) could
        // write it, so what the result shows is what the command wrote,
        // whoever can write the spill directory.
        let want = self.keep.head_budget(self.budget).saturating_add(1) as u64;
        self.head = read(0, want.min(size));
        self.total = size;
        self.spill_file = Some(file);
        self.tail_in_file = true;
        self.load_tail();
        let Some(file) = self.spill_file.take() else {
            return self;
        };
        if size > self.spill_cap {
            let _ = file.set_len(self.spill_cap);
            self.spilled = self.spill_cap;
            self.spill_dropped = size - self.spill_cap;
        } else {
            // Blocks the command reserved past the end (fallocate(2) with
            // FALLOC_FL_KEEP_SIZE) go with a truncation to below it: one
            // byte longer, then back (ftruncate(2) frees what lies past
            // the new end). Every writer is gone by now.
            let _ = file.set_len(size + 1).and_then(|()| file.set_len(size));
            self.spilled = size;
        }
        match spill_dir.link(self.name, &file) {
            Ok(path) => self.spill_path = Some(path),
            Err(e) => self.spill_error = Some(format!("spill file: {e}")),
        }
        self
    }
}

/// Reads from `file` at `offset` until `buf` is full, end of file or an
/// error (EINTR is retried); returns the bytes read.
fn read_fully_at(file: &File, buf: &mut [u8], offset: u64) -> usize {
    let mut got = 0;
    while got < buf.len() {
        match file.read_at(&mut buf[got..], offset + got as u64) {
            Ok(0) => break,
            Ok(k) => got += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    got
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fits_in_budget_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut sd = SpillDir::new(dir.path()).unwrap();
        let mut c = StreamCapture::new("stdout", 10);
        c.push(b"hello", &mut sd);
        c.push(b"world", &mut sd);
        let out = c.finish();
        assert_eq!(out.text, "helloworld");
        assert!(!out.truncated);
        assert_eq!(out.spill_path, None);
        sd.remove_if_empty();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn outgrowing_keeps_tail_and_spills_everything() {
        let dir = tempfile::tempdir().unwrap();
        let mut sd = SpillDir::new(dir.path()).unwrap();
        let mut c = StreamCapture::new("stdout", 4);
        c.push(b"abc", &mut sd);
        c.push(b"defgh", &mut sd);
        c.push(b"ij", &mut sd);
        let out = c.finish();
        assert_eq!(out.text, "ghij");
        assert!(out.truncated);
        assert_eq!(out.total_bytes, 10);
        assert_eq!(out.omitted_bytes(), 6);
        let path = out.spill_path.unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"abcdefghij");
    }

    #[test]
    fn tail_cut_never_splits_a_character() {
        let dir = tempfile::tempdir().unwrap();
        let mut sd = SpillDir::new(dir.path()).unwrap();
        let mut c = StreamCapture::new("stdout", 5);
        c.push("éééé".as_bytes(), &mut sd);
        let out = c.finish();
        assert_eq!(out.text, "éé");
        assert_eq!(out.omitted_bytes(), 4);
    }

    #[test]
    fn deltas_consume_and_report_loss() {
        let dir = tempfile::tempdir().unwrap();
        let mut sd = SpillDir::new(dir.path()).unwrap();
        let mut c = StreamCapture::new("stdout", 4);
        c.push(b"ab", &mut sd);
        assert_eq!(
            c.read_delta(),
            Delta {
                bytes: b"ab".to_vec(),
                lossy: false
            }
        );
        assert_eq!(
            c.read_delta(),
            Delta {
                bytes: vec![],
                lossy: false
            }
        );
        c.push(b"cdefgh", &mut sd);
        assert_eq!(
            c.read_delta(),
            Delta {
                bytes: b"efgh".to_vec(),
                lossy: true
            }
        );
    }

    #[test]
    fn a_spill_write_that_fails_brings_the_tail_back_and_keeps_every_byte() {
        let dir = tempfile::tempdir().unwrap();
        let mut sd = SpillDir::new(dir.path()).unwrap();
        let mut c = StreamCapture::new("stdout", 4);
        c.push(b"abcdef", &mut sd);
        assert!(
            c.tail_in_file,
            "a spilling stream keeps its tail in the file"
        );
        // Writes now fail (EBADF), reads still work: the disk is full.
        let path = c.spill_path.clone().unwrap();
        c.spill_file = Some(File::open(&path).unwrap());
        c.push(b"gh", &mut sd);
        let out = c.finish();
        assert_eq!(out.text, "efgh");
        assert_eq!(out.total_bytes, 8);
        assert!(out.spill_error.is_some());
        // The file has what came before the failure; the tail has the rest.
        assert_eq!(std::fs::read(&path).unwrap(), b"abcdef");
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn tail_and_spill_are_exact_for_any_bytes_and_budget(
            chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..300), 0..20),
            budget in 0u64..700,
        ) {
            let dir = tempfile::tempdir().unwrap();
            let mut sd = SpillDir::new(dir.path()).unwrap();
            let mut c = StreamCapture::new("stdout", budget);
            for chunk in &chunks {
                c.push(chunk, &mut sd);
            }
            let all: Vec<u8> = chunks.concat();
            let out = c.finish();
            prop_assert_eq!(out.total_bytes, all.len() as u64);
            let held = all.len().min(budget as usize);
            let tail = &all[all.len() - held..];
            let before = (all.len() > held).then(|| all[all.len() - held - 1]);
            let skip = if out.truncated { tail_start(tail, before, budget as usize) } else { 0 };
            prop_assert!(skip <= 3 || tail[..skip].ends_with(b"\n"));
            prop_assert_eq!(&out.text, &String::from_utf8_lossy(&tail[skip..]));
            prop_assert_eq!(out.truncated, all.len() as u64 > budget);
            prop_assert_eq!(out.omitted_bytes(), (all.len() - held + skip) as u64);
            match &out.spill_path {
                Some(p) => prop_assert_eq!(&std::fs::read(p).unwrap(), &all),
                None => prop_assert!(!out.truncated),
            }
        }

        #[test]
        fn deltas_are_the_newest_bytes_whether_the_tail_is_in_memory_or_the_file(
            chunks in prop::collection::vec(
                (prop::collection::vec(any::<u8>(), 0..300), any::<bool>()), 0..20),
            budget in 0u64..700,
        ) {
            let dir = tempfile::tempdir().unwrap();
            let mut sd = SpillDir::new(dir.path()).unwrap();
            let mut c = StreamCapture::new("stdout", budget);
            let mut unread: Vec<u8> = Vec::new();
            let mut all: Vec<u8> = Vec::new();
            for (chunk, read) in &chunks {
                c.push(chunk, &mut sd);
                unread.extend(chunk);
                all.extend(chunk);
                if *read {
                    let d = c.read_delta();
                    let held = unread.len().min(budget as usize).min(all.len());
                    prop_assert_eq!(&d.bytes, &unread[unread.len() - held..]);
                    prop_assert_eq!(d.lossy, unread.len() > held);
                    unread.clear();
                }
            }
            let out = c.finish();
            prop_assert_eq!(out.total_bytes, all.len() as u64);
            if let Some(p) = &out.spill_path {
                prop_assert_eq!(&std::fs::read(p).unwrap(), &all);
            }
        }

        #[test]
        fn a_capped_spill_file_holds_the_first_bytes_and_the_tail_the_last(
            chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..300), 0..20),
            budget in 0u64..400,
            cap in 0u64..2000,
            exposed in any::<bool>(),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let mut sd = SpillDir::new(dir.path()).unwrap();
            if exposed {
                sd.set_exposed();
            }
            let mut c = StreamCapture::new("stdout", budget).spill_cap(cap);
            for chunk in &chunks {
                c.push(chunk, &mut sd);
            }
            let all: Vec<u8> = chunks.concat();
            let out = c.finish();
            prop_assert_eq!(out.total_bytes, all.len() as u64);
            let held = all.len().min(budget as usize);
            let tail = &all[all.len() - held..];
            prop_assert!(String::from_utf8_lossy(tail).ends_with(&out.text));
            if let Some(p) = &out.spill_path {
                let spilled = std::fs::read(p).unwrap();
                // The file opens with the bytes held at the first overflow
                // (at most the budget), then takes what fits under the cap.
                let keep = (cap.max(spilled.len() as u64) as usize).min(all.len());
                prop_assert_eq!(&spilled[..], &all[..spilled.len()]);
                prop_assert!(spilled.len() <= keep);
                prop_assert_eq!(out.spill_dropped_bytes, (all.len() - spilled.len()) as u64);
                prop_assert_eq!(out.spill_truncated, spilled.len() < all.len());
            }
        }

        #[test]
        fn a_cut_utf8_text_never_starts_with_a_replacement(
            text in "\\PC{0,200}", budget in 1u64..400,
        ) {
            prop_assume!(!text.contains(char::REPLACEMENT_CHARACTER));
            let dir = tempfile::tempdir().unwrap();
            let mut sd = SpillDir::new(dir.path()).unwrap();
            let mut c = StreamCapture::new("stdout", budget);
            c.push(text.as_bytes(), &mut sd);
            let out = c.finish();
            prop_assert!(!out.text.contains(char::REPLACEMENT_CHARACTER));
            prop_assert!(text.ends_with(&out.text));
        }
    }
}
