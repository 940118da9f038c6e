//! Bounded capture of one output stream: a tail buffer plus a spill file.
//!
//! Each stream keeps at most `budget` bytes, the most recent ones. The first
//! byte past the budget creates the stream's spill file (mode 0600, inside the
//! run's private 0700 spill directory), which from then on receives every byte
//! of the stream, starting with the bytes already held, so it ends up holding
//! the exact full stream. Memory stays bounded by the budget whatever the
//! command prints; a stream that fits never touches the disk.

use std::collections::VecDeque;
use std::fs::File;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use nix::fcntl::{OFlag, open, openat};
use nix::sys::stat::{Mode, fchmod, mkdirat};
use nix::unistd::{AccessFlags, access};

use serde::{Deserialize, Serialize};

use crate::error::Error;

/// The per-run private directory that holds spill files.
///
/// Its parent is checked and opened before the command starts (a missing,
/// non-directory or non-writable parent is an error before anything runs);
/// the directory itself (mode 0700, random name `dsh-exec-XXXXXXXX`) is
/// created only when a stream first outgrows its budget, so a run that fits
/// never touches the disk (creating and removing a directory costs about
/// half a millisecond on a journalling file system).
///
/// The directory and its files are created relative to descriptors, with
/// `mkdirat`, and `openat` with `O_NOFOLLOW` and `O_EXCL` (openat(2)): the
/// command may be able to write the parent (the temp dir, in
/// `workspace-write`), but replacing a path with a symlink cannot make
/// `dsh-exec` write anywhere else.
#[derive(Debug)]
pub struct SpillDir {
    parent: PathBuf,
    parent_fd: OwnedFd,
    dir: Option<(PathBuf, OwnedFd)>,
}

impl SpillDir {
    /// Checks and opens `parent` as the home of the private spill directory.
    ///
    /// Errors with [`Error::SpillUnusable`] when `parent` is missing, not a
    /// directory, or not writable and searchable (access(2)).
    pub fn new(parent: &Path) -> Result<SpillDir, Error> {
        let unusable = |reason: String| Error::SpillUnusable {
            path: parent.to_path_buf(),
            reason,
        };
        match std::fs::metadata(parent) {
            Ok(m) if !m.is_dir() => return Err(unusable("not a directory".into())),
            Ok(_) => {}
            Err(e) => return Err(unusable(e.to_string())),
        }
        access(parent, AccessFlags::W_OK | AccessFlags::X_OK)
            .map_err(|e| unusable(format!("not writable: {}", e.desc())))?;
        let parent_fd = open(
            parent,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| unusable(e.desc().into()))?;
        Ok(SpillDir {
            parent: parent.to_path_buf(),
            parent_fd,
            dir: None,
        })
    }

    /// Creates the private directory on first use: (its path, its descriptor).
    fn ensure(&mut self) -> std::io::Result<&(PathBuf, OwnedFd)> {
        if self.dir.is_none() {
            let mut attempt = 0;
            let (name, fd) = loop {
                let name = format!("dsh-exec-{}", random_suffix());
                match mkdirat(
                    &self.parent_fd,
                    name.as_str(),
                    Mode::from_bits_truncate(0o700),
                ) {
                    Ok(()) => {}
                    Err(nix::errno::Errno::EEXIST) if attempt < 16 => {
                        attempt += 1;
                        continue;
                    }
                    Err(e) => return Err(e.into()),
                }
                let fd = openat(
                    &self.parent_fd,
                    name.as_str(),
                    OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
                    Mode::empty(),
                )?;
                break (name, fd);
            };
            // The umask may have taken bits away; 0700 exactly.
            fchmod(&fd, Mode::from_bits_truncate(0o700))?;
            self.dir = Some((self.parent.join(name), fd));
        }
        self.dir
            .as_ref()
            .ok_or_else(|| std::io::Error::other("spill directory missing"))
    }

    /// Creates the file `name` (mode 0600) in the private directory:
    /// (its path, the open file).
    pub fn create_file(&mut self, name: &str) -> std::io::Result<(PathBuf, File)> {
        let (dir, dirfd) = self.ensure()?;
        let fd = openat(
            dirfd,
            name,
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o600),
        )?;
        fchmod(&fd, Mode::from_bits_truncate(0o600))?;
        Ok((dir.join(name), File::from(fd)))
    }

    /// Removes the directory if it was created and is empty. Errors are
    /// ignored: a leftover empty directory loses nothing.
    pub fn remove_if_empty(&self) {
        if let Some((path, _)) = &self.dir
            && let Some(name) = path.file_name()
        {
            let _ =
                nix::unistd::unlinkat(&self.parent_fd, name, nix::unistd::UnlinkatFlags::RemoveDir);
        }
    }
}

/// Eight random characters from `[a-z0-9]` (getrandom(2)).
pub fn random_suffix() -> String {
    let mut bytes = [0u8; 8];
    // SAFETY: getrandom fills the buffer we own.
    let n = unsafe { nix::libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    if n != bytes.len() as isize {
        // Unreachable on Linux 3.17+; the pid still makes a usable name.
        bytes = (std::process::id() as u64).to_le_bytes();
    }
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    bytes
        .iter()
        .map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char)
        .collect()
}

/// What one stream produced, as reported in the result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct CollectedOutput {
    /// The kept tail as text: invalid UTF-8 replaced by U+FFFD, never starting
    /// inside a UTF-8 character.
    pub text: String,
    /// True when earlier bytes were dropped from the tail.
    pub truncated: bool,
    /// Bytes the stream produced in all.
    pub total_bytes: u64,
    /// Bytes of the stream that `text` was decoded from (the kept tail).
    #[serde(skip)]
    pub kept_bytes: u64,
    /// The spill file holding the exact full stream, when it outgrew its budget.
    #[serde(serialize_with = "crate::lossy::opt_path")]
    pub spill_path: Option<PathBuf>,
    /// Why writing the spill file failed, when it did (bytes after the
    /// failure exist only in the tail).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spill_error: Option<String>,
}

impl CollectedOutput {
    /// Bytes produced but not present in `text` (the omitted head).
    pub fn omitted_bytes(&self) -> u64 {
        self.total_bytes.saturating_sub(self.kept_bytes)
    }
}

/// New bytes since the previous [`StreamCapture::read_delta`].
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
        }
    }

    /// Takes `chunk`, the next bytes of the stream; opens the spill file in
    /// `spill_dir` when the stream first outgrows its budget.
    pub fn push(&mut self, chunk: &[u8], spill_dir: &mut SpillDir) {
        if chunk.is_empty() {
            return;
        }
        let outgrows = self.tail.len() + chunk.len() > self.budget;
        if outgrows && self.spill_path.is_none() && self.spill_error.is_none() {
            self.open_spill(spill_dir);
        }
        if let Some(file) = &mut self.spill_file
            && let Err(e) = file.write_all(chunk)
        {
            self.spill_error = Some(e.to_string());
            self.spill_file = None;
        }
        self.total += chunk.len() as u64;
        let keep = &chunk[chunk.len().saturating_sub(self.budget)..];
        let excess = (self.tail.len() + keep.len()).saturating_sub(self.budget);
        self.tail.drain(..excess);
        self.tail.extend(keep);
    }

    fn open_spill(&mut self, spill_dir: &mut SpillDir) {
        let created = spill_dir.create_file(self.name).and_then(|(path, mut f)| {
            let (a, b) = self.tail.as_slices();
            f.write_all(a)?;
            f.write_all(b)?;
            Ok((path, f))
        });
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
        self.total += text.len() as u64;
        self.tail.extend(text.as_bytes());
    }

    /// Bytes the stream produced so far.
    pub fn total_bytes(&self) -> u64 {
        self.total
    }

    /// The spill file's path, once the stream has outgrown its budget.
    pub fn spill_path(&self) -> Option<&Path> {
        self.spill_path.as_deref()
    }

    /// Consumes the bytes produced since the previous call (the background
    /// projection of the same capture).
    pub fn read_delta(&mut self) -> Delta {
        let held_from = self.total - self.tail.len() as u64;
        let lossy = self.read_cursor < held_from;
        let start = self.read_cursor.max(held_from) - held_from;
        let bytes = self.tail.range(start as usize..).copied().collect();
        self.read_cursor = self.total;
        Delta { bytes, lossy }
    }

    /// Finishes the capture: closes the spill file and renders the tail.
    pub fn finish(mut self) -> CollectedOutput {
        drop(self.spill_file.take());
        let truncated = self.total > self.tail.len() as u64;
        let bytes = self.tail.make_contiguous();
        let skip = if truncated {
            char_boundary_skip(bytes)
        } else {
            0
        };
        let kept = &bytes[skip..];
        CollectedOutput {
            text: String::from_utf8_lossy(kept).into_owned(),
            truncated,
            total_bytes: self.total,
            kept_bytes: kept.len() as u64,
            spill_path: self.spill_path,
            spill_error: self.spill_error,
        }
    }
}

/// Leading bytes to drop so a tail cut does not start inside a UTF-8
/// character: the continuation bytes (`0b10xxxxxx`) before the first
/// character start, at most 3 (the longest UTF-8 sequence is 4 bytes).
pub fn char_boundary_skip(bytes: &[u8]) -> usize {
    bytes
        .iter()
        .take(3)
        .take_while(|b| (**b & 0xC0) == 0x80)
        .count()
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
            let skip = if out.truncated { char_boundary_skip(tail) } else { 0 };
            prop_assert!(skip <= 3);
            prop_assert_eq!(&out.text, &String::from_utf8_lossy(&tail[skip..]));
            prop_assert_eq!(out.truncated, all.len() as u64 > budget);
            prop_assert_eq!(out.omitted_bytes(), (all.len() - held + skip) as u64);
            match &out.spill_path {
                Some(p) => prop_assert_eq!(&std::fs::read(p).unwrap(), &all),
                None => prop_assert!(!out.truncated),
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
