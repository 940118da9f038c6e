//! The per-run private spill directory and the files in it.
//!
//! What it relies on from the kernel (openat(2), mkdirat(2)): names are
//! resolved relative to a directory descriptor opened before the command
//! starts, `O_NOFOLLOW` refuses a symlink in the last component, and
//! `O_EXCL` refuses an existing file; so a command that can write the
//! parent directory (the temp dir, in `workspace-write`) cannot make
//! `dsh-exec` write anywhere else by swapping names.

use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::fcntl::{OFlag, open, openat};
use nix::sys::stat::{Mode, fchmod, mkdirat};
use nix::unistd::AccessFlags;

use crate::error::{Error, PathProblem};

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
    /// The command can write where the spill files go (no place outside
    /// its writable roots was to be had): the tails are then kept in
    /// memory, never read back from the files.
    exposed: bool,
}

impl SpillDir {
    /// Checks and opens `parent` as the home of the private spill directory.
    ///
    /// Errors with [`Error::SpillUnusable`] when `parent` is missing, not a
    /// directory, or not writable and searchable (access(2)).
    pub fn new(parent: &Path) -> Result<SpillDir, Error> {
        let unusable = |problem: PathProblem| Error::SpillUnusable {
            path: parent.to_path_buf(),
            problem,
        };
        let parent_fd = open(
            parent,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| match e {
            nix::errno::Errno::ENOTDIR => unusable(PathProblem::NotADirectory),
            other => unusable(PathProblem::Io(other.into())),
        })?;
        // Checked on the descriptor that is then used: the directory the
        // spill files go to is the one that was checked.
        nix::unistd::faccessat(
            &parent_fd,
            ".",
            AccessFlags::W_OK | AccessFlags::X_OK,
            nix::fcntl::AtFlags::empty(),
        )
        .map_err(|e| unusable(PathProblem::NotWritable(e)))?;
        Ok(SpillDir {
            parent: parent.to_path_buf(),
            parent_fd,
            dir: None,
            exposed: false,
        })
    }

    /// Marks the spill files as writable by the command: the captures keep
    /// their tails in memory (see [`SpillDir::exposed`]).
    pub fn set_exposed(&mut self) {
        self.exposed = true;
    }

    /// Whether the command can write the spill files (the tails then stay
    /// in memory: a tail read back from such a file could be forged).
    pub fn exposed(&self) -> bool {
        self.exposed
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
            OFlag::O_RDWR | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o600),
        )?;
        fchmod(&fd, Mode::from_bits_truncate(0o600))?;
        Ok((dir.join(name), File::from(fd)))
    }

    /// A file for the command to write one stream into itself (see
    /// [`crate::capture`], "Output the command writes itself"): read-write
    /// and append-only, one open file description that this process and
    /// the command share.
    ///
    /// The file is made with `O_TMPFILE` in the spill directory's parent
    /// (open(2)): it has no name, so nothing reaches it by path, and it
    /// vanishes with its last descriptor unless [`SpillDir::link`] names
    /// it (mode 0600 from then on). Errors where the file system has no
    /// `O_TMPFILE` (`EOPNOTSUPP`)
    /// or on any other failure of open(2); the caller then uses a pipe.
    pub(crate) fn unnamed_file(&self) -> std::io::Result<File> {
        let fd = openat(
            &self.parent_fd,
            ".",
            OFlag::O_TMPFILE | OFlag::O_RDWR | OFlag::O_APPEND | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o600),
        )?;
        Ok(File::from(fd))
    }

    /// Names `file`, made by [`SpillDir::unnamed_file`], `name` in the
    /// private directory (made on first use): its path. linkat(2) with
    /// `AT_SYMLINK_FOLLOW` of its `/proc/self/fd` link, which the kernel
    /// allows for a file made with `O_TMPFILE` but not `O_EXCL`.
    pub(crate) fn link(&mut self, name: &str, file: &File) -> std::io::Result<PathBuf> {
        // This user's, whatever owner a command with CAP_CHOWN gave it
        // through its descriptor; then 0600 exactly (a mode it set, or the
        // umask's, goes).
        nix::unistd::fchown(
            file,
            Some(nix::unistd::geteuid()),
            Some(nix::unistd::getegid()),
        )?;
        fchmod(file, Mode::from_bits_truncate(0o600))?;
        let (dir, dirfd) = self.ensure()?;
        nix::unistd::linkat(
            nix::fcntl::AT_FDCWD,
            format!("/proc/self/fd/{}", file.as_raw_fd()).as_str(),
            dirfd,
            name,
            nix::fcntl::AtFlags::AT_SYMLINK_FOLLOW,
        )?;
        Ok(dir.join(name))
    }

    /// Whether the spill directory's file system has `bytes` free for an
    /// unprivileged user (statvfs(3) `f_bavail`): a command writing its
    /// output straight into a spill file meets a full disk itself, so
    /// that is only done where the spill cap fits.
    pub(crate) fn has_room(&self, bytes: u64) -> bool {
        nix::sys::statvfs::fstatvfs(&self.parent_fd)
            .is_ok_and(|v| v.blocks_available().saturating_mul(v.fragment_size()) >= bytes)
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
    if crate::sys::random_bytes(&mut bytes).is_err() {
        // Unreachable on Linux 3.17+; the pid still makes a usable name.
        bytes = (std::process::id() as u64).to_le_bytes();
    }
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    bytes
        .iter()
        .map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char)
        .collect()
}

/// Whether `name` is a spill directory's name: `dsh-exec-` and eight of
/// `[a-z0-9]` ([`random_suffix`]).
pub(crate) fn is_spill_dir_name(name: &std::ffi::OsStr) -> bool {
    name.to_str()
        .and_then(|n| n.strip_prefix("dsh-exec-"))
        .is_some_and(|s| {
            s.len() == 8
                && s.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        })
}

/// What [`prune_spill_dirs`] removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pruned {
    /// Spill directories removed.
    pub dirs: usize,
    /// Bytes of the spill files in them.
    pub bytes: u64,
}

/// Removes from `parent` this user's spill directories that nothing has
/// changed for `older_than` (modification times of the directory and of
/// its files): only a directory of the exact shape `dsh-exec` makes,
/// `dsh-exec-XXXXXXXX` (eight of `[a-z0-9]`), mode 0700, this user's,
/// holding nothing but regular files `stdout` and `stderr` of this user.
/// Anything else is left alone. Each directory is opened without following
/// a symlink and its files are removed relative to that descriptor, so a
/// swapped path removes nothing else. A spill directory still being
/// written (a running job's) is recent, hence kept.
///
/// Errors with [`Error::SpillUnusable`] when `parent` exists but cannot be
/// read; a missing `parent` prunes nothing.
pub fn prune_spill_dirs(parent: &Path, older_than: std::time::Duration) -> Result<Pruned, Error> {
    use nix::fcntl::AtFlags;
    use nix::sys::stat::{fstat, fstatat};
    use nix::unistd::{UnlinkatFlags, unlinkat};
    let unusable = |problem: PathProblem| Error::SpillUnusable {
        path: parent.to_path_buf(),
        problem,
    };
    let entries = match std::fs::read_dir(parent) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Pruned::default()),
        Err(e) => return Err(unusable(PathProblem::Io(e))),
    };
    let parent_fd = open(
        parent,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| unusable(PathProblem::Io(e.into())))?;
    let uid = nix::unistd::geteuid().as_raw();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs() as i64;
    let old = |mtime: i64| now.saturating_sub(mtime) >= older_than.as_secs() as i64;
    let mut pruned = Pruned::default();
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !is_spill_dir_name(&name) {
            continue;
        }
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let Ok(dir) = openat(&parent_fd, name.as_os_str(), flags, Mode::empty()) else {
            continue;
        };
        let Ok(st) = fstat(&dir) else { continue };
        if st.st_uid != uid || st.st_mode & 0o7777 != 0o700 || !old(st.st_mtime) {
            continue;
        }
        let Ok(listing) = std::fs::read_dir(format!("/proc/self/fd/{}", dir.as_raw_fd())) else {
            continue;
        };
        let mut files = Vec::new();
        let mut shaped = true;
        for f in listing.flatten() {
            let fname = f.file_name();
            let ok = (fname == "stdout" || fname == "stderr")
                && fstatat(&dir, fname.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW).is_ok_and(|s| {
                    s.st_uid == uid
                        && s.st_mode & nix::libc::S_IFMT == nix::libc::S_IFREG
                        && old(s.st_mtime)
                        && {
                            files.push((fname.clone(), s.st_size as u64));
                            true
                        }
                });
            if !ok {
                shaped = false;
                break;
            }
        }
        if !shaped {
            continue;
        }
        let bytes: u64 = files.iter().map(|(_, n)| n).sum();
        let removed = files
            .iter()
            .all(|(f, _)| unlinkat(&dir, f.as_os_str(), UnlinkatFlags::NoRemoveDir).is_ok());
        if removed && unlinkat(&parent_fd, name.as_os_str(), UnlinkatFlags::RemoveDir).is_ok() {
            pruned.dirs += 1;
            pruned.bytes += bytes;
        }
    }
    Ok(pruned)
}
