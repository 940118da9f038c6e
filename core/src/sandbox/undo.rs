//! Undoing a run's changes to protected paths, as an attacker would have
//! it undone: never through a symlink or a directory the run put in place.
//!
//! After a confined run, dsh-exec (unconfined, often root) writes and
//! removes files at paths inside writable roots, where the run could have
//! replaced any directory on the way with a symlink to somewhere else, or
//! with a directory of its own. So every path is walked from its writable
//! root one component at a time, relative to a descriptor of the directory
//! reached so far, without following symlinks (`O_NOFOLLOW`,
//! `AT_SYMLINK_NOFOLLOW`), and each directory is compared with the (device,
//! inode) it had before the run ([`Anchor`]). A component found replaced is
//! taken away (a symlink or file unlinked, a directory renamed aside) and,
//! when the original is still in the same directory under another name,
//! renamed back. Writes go to a new file created in the directory reached
//! (`O_CREAT | O_EXCL | O_NOFOLLOW`) and renamed over the name; removals
//! are unlinkat(2), or a removal of a whole tree that follows no symlink
//! (std's `remove_dir_all`, started from the pinned directory).
//!
//! What it relies on from the kernel: the `*at` calls act on the directory
//! a descriptor names, whatever happens to its path (openat(2)); a
//! descriptor names the same directory for as long as it is open; rename(2)
//! within one directory is atomic.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::libc;

use super::protect::ProtectedChange;

/// A path inside a writable root, as it was before the run: the root, and
/// each component below it with the (device, inode) it had (`None`: it did
/// not exist).
#[derive(Debug, Clone)]
pub(crate) struct Anchor {
    pub(crate) path: PathBuf,
    root: PathBuf,
    parts: Vec<(OsString, Option<(u64, u64)>)>,
}

pub(crate) use crate::sys::fs::stat_at;

fn is_dir(st: &libc::stat) -> bool {
    st.st_mode & libc::S_IFMT == libc::S_IFDIR
}

/// What a directory the run put in place of a protected one is renamed to
/// (with `.N` when taken).
const REPLACED: &str = ".dsh-exec-replaced";

/// The directory `name` in `dir`, not following a symlink.
pub(crate) fn open_dir_at(dir: RawFd, name: &OsStr) -> io::Result<OwnedFd> {
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW;
    crate::sys::fs::open_at(dir, name.as_bytes(), flags, 0).map_err(io::Error::from_raw_os_error)
}

/// A directory (a writable root, a submodule's git directory), opened
/// without following a symlink anywhere on its path (openat2(2),
/// `RESOLVE_NO_SYMLINKS`): ELOOP when one is on the way.
pub(crate) fn open_root(root: &Path) -> io::Result<OwnedFd> {
    open_no_symlinks(root, libc::O_RDONLY | libc::O_DIRECTORY)
}

pub(crate) use crate::sys::fs::open_no_symlinks;

/// Removes `name` from `dir` whatever it is, following no symlink: a
/// directory with everything in it, anything else unlinked.
pub(crate) fn remove_at(dir: RawFd, name: &OsStr) -> bool {
    let Ok(st) = stat_at(dir, name) else {
        return true;
    };
    if is_dir(&st) {
        // std's remove_dir_all opens each directory with O_NOFOLLOW and
        // removes relative to it; the path names `name` in the pinned
        // directory through its descriptor.
        let mut path = PathBuf::from(format!("/proc/self/fd/{dir}"));
        path.push(name);
        std::fs::remove_dir_all(&path).is_ok()
    } else {
        crate::sys::fs::unlink_at(dir, name)
    }
}

/// Removes the directory `path` and everything in it, reached from its
/// parent without following a symlink on the way (the parent is not
/// writable by the run: the caller's temp dir in `read-only`).
pub(crate) fn remove_dir(path: &Path) {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return;
    };
    if let Ok(dir) = open_root(parent) {
        remove_at(dir.as_raw_fd(), name);
    }
}

/// Renames `name` in `dir` to a free `NAME SUFFIX[.N]`.
pub(crate) fn rename_aside(dir: RawFd, name: &OsStr, suffix: &str) -> io::Result<OsString> {
    for n in 0..100 {
        let mut aside = name.to_os_string();
        aside.push(suffix);
        if n > 0 {
            aside.push(format!(".{n}"));
        }
        match crate::sys::fs::rename_noreplace(dir, name, &aside) {
            Ok(()) => return Ok(aside),
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {}
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::from_raw_os_error(libc::EEXIST))
}

/// The name in `dir` of the entry whose (device, inode) is `id`.
fn find_by_id(dir: RawFd, id: (u64, u64)) -> Option<OsString> {
    let list = open_dir_at(dir, OsStr::new(".")).ok()?;
    let path = format!("/proc/self/fd/{}", list.as_raw_fd());
    std::fs::read_dir(path).ok()?.flatten().find_map(|e| {
        let st = stat_at(dir, &e.file_name()).ok()?;
        ((st.st_dev, st.st_ino) == id).then(|| e.file_name())
    })
}

impl Anchor {
    /// Records `path` (inside `root`, both real paths) as it is now.
    pub(crate) fn record(root: &Path, path: &Path) -> Option<Anchor> {
        let rel = path.strip_prefix(root).ok()?;
        let mut parts = Vec::new();
        let mut at = root.to_path_buf();
        let mut exists = true;
        for c in rel.components() {
            at.push(c);
            let id = if exists {
                std::fs::symlink_metadata(&at).ok().map(|m| {
                    (
                        std::os::unix::fs::MetadataExt::dev(&m),
                        std::os::unix::fs::MetadataExt::ino(&m),
                    )
                })
            } else {
                None
            };
            exists = id.is_some();
            parts.push((c.as_os_str().to_os_string(), id));
        }
        (!parts.is_empty()).then(|| Anchor {
            path: path.to_path_buf(),
            root: root.to_path_buf(),
            parts,
        })
    }

    /// The (device, inode) the path itself had before the run.
    pub(crate) fn id(&self) -> Option<(u64, u64)> {
        self.parts.last().and_then(|(_, id)| *id)
    }

    /// The last component's name.
    pub(crate) fn name(&self) -> &OsStr {
        &self.parts[self.parts.len() - 1].0
    }

    /// The path of the first `n` components, for reports.
    fn prefix(&self, n: usize) -> PathBuf {
        let mut p = self.root.clone();
        for (name, _) in &self.parts[..n] {
            p.push(name);
        }
        p
    }

    /// Re-establishes the directories on the way to the path (every
    /// component but the last) and returns the last one's directory, or
    /// `None` when the path cannot exist any more (a directory on the way
    /// that did not exist before is gone again) or cannot be reached (one
    /// that existed is gone). What was found replaced goes into `changes`.
    pub(crate) fn reach_parent(&self, changes: &mut Vec<ProtectedChange>) -> Option<OwnedFd> {
        let mut dir = open_root(&self.root).ok()?;
        for (i, (name, id)) in self.parts[..self.parts.len() - 1].iter().enumerate() {
            let fd = dir.as_raw_fd();
            let now = stat_at(fd, name);
            let as_before = match (&now, id) {
                (Ok(st), Some(id)) => is_dir(st) && (st.st_dev, st.st_ino) == *id,
                // It did not exist: any directory the run made is the run's.
                (Ok(st), None) => is_dir(st),
                (Err(_), _) => false,
            };
            if as_before {
                dir = open_dir_at(fd, name).ok()?;
                continue;
            }
            let Ok(st) = now else {
                // Gone: a path below a directory that did not exist is gone
                // too; one that existed cannot be brought back from here.
                if id.is_some() {
                    changes.push(ProtectedChange {
                        path: self.prefix(i + 1),
                        change: "removed",
                        restored: false,
                    });
                }
                return None;
            };
            // Replaced: a symlink (or file) is taken away; a directory of
            // the run's is renamed aside.
            let taken = if is_dir(&st) {
                rename_aside(fd, name, REPLACED).is_ok()
            } else {
                remove_at(fd, name)
            };
            let back = match id {
                Some(id) if taken => find_by_id(fd, *id)
                    .and_then(|from| crate::sys::fs::rename_noreplace(fd, &from, name).ok())
                    .is_some(),
                _ => false,
            };
            changes.push(ProtectedChange {
                path: self.prefix(i + 1),
                change: "replaced",
                restored: taken && (back || id.is_none()),
            });
            if !back {
                return None;
            }
            dir = open_dir_at(fd, name).ok()?;
        }
        Some(dir)
    }
}

/// Writes `bytes` with `mode` as `name` in `dir`: a new file beside it
/// (`O_CREAT | O_EXCL | O_NOFOLLOW`), renamed over the name; a directory
/// in its place is removed first.
pub(crate) fn write_at(dir: RawFd, name: &OsStr, bytes: &[u8], mode: u32) -> io::Result<()> {
    use std::io::Write;
    if stat_at(dir, name).is_ok_and(|st| is_dir(&st)) {
        remove_at(dir, name);
    }
    let mut tmp = OsString::from(".");
    tmp.push(name);
    tmp.push(".dsh-exec-restore");
    remove_at(dir, &tmp);
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW;
    let fd = crate::sys::fs::open_at(dir, tmp.as_bytes(), flags, mode)
        .map_err(io::Error::from_raw_os_error)?;
    let mut f = std::fs::File::from(fd);
    f.write_all(bytes)?;
    // The mode apart from the umask.
    nix::sys::stat::fchmod(&f, nix::sys::stat::Mode::from_bits_retain(mode))?;
    if let Err(e) = crate::sys::fs::rename_at(dir, &tmp, name) {
        remove_at(dir, &tmp);
        return Err(e);
    }
    Ok(())
}

/// The names in the directory `dir` (a descriptor of it).
pub(crate) fn names(dir: RawFd) -> Vec<OsString> {
    let Ok(list) = open_dir_at(dir, OsStr::new(".")) else {
        return Vec::new();
    };
    std::fs::read_dir(format!("/proc/self/fd/{}", list.as_raw_fd()))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name())
        .collect()
}

/// The directory `name` in `dir` as it was (`id`), made so if needed: a
/// symlink or file in its place is removed, another directory renamed
/// aside, the original brought back by its inode if it is still in `dir`,
/// else a new empty one made with `mode`. The second value says whether it
/// had to be replaced.
pub(crate) fn directory_at(
    dir: RawFd,
    name: &OsStr,
    id: (u64, u64),
    mode: u32,
) -> io::Result<(OwnedFd, bool)> {
    let now = stat_at(dir, name);
    if now
        .as_ref()
        .is_ok_and(|st| is_dir(st) && (st.st_dev, st.st_ino) == id)
    {
        return Ok((open_dir_at(dir, name)?, false));
    }
    if let Ok(st) = now {
        if is_dir(&st) {
            rename_aside(dir, name, REPLACED)?;
        } else if !remove_at(dir, name) {
            return Err(io::Error::from_raw_os_error(libc::EPERM));
        }
    }
    let back = find_by_id(dir, id)
        .and_then(|from| crate::sys::fs::rename_noreplace(dir, &from, name).ok());
    if back.is_none() {
        crate::sys::fs::mkdir_at(dir, name, mode)?;
    }
    Ok((open_dir_at(dir, name)?, true))
}
