//! The task a notification came from, as the gate sees it: its descriptors
//! (taken with pidfd_getfd(2)) and the paths it names, resolved as it would
//! resolve them and pinned with `O_PATH`.
//!
//! What it relies on from the kernel:
//! - `/proc/TID/root`, `/proc/TID/cwd` and `/proc/TID/fd/N` are the task's
//!   root, working directory and open files (proc(5)); opening them, and
//!   opening a path relative to them with openat(2), resolves in the task's
//!   mount namespace, where read-only bind mounts apply;
//! - an `O_PATH` descriptor pins the inode a path named when it was
//!   opened; `/proc/self/fd/PIN` then names exactly that inode, whatever
//!   happens to the path afterwards (open(2), "O_PATH");
//! - pidfd_open(2) with `PIDFD_THREAD` (Linux 6.9) names the calling
//!   thread itself; pidfd_getfd(2) (5.6) duplicates one of its descriptors
//!   into this process, the same open file description.
//!
//! After the last /proc access and memory read of a notification, and before
//! anything is done, `SECCOMP_IOCTL_NOTIF_ID_VALID` tells whether the task
//! is still the one that made the call ([`Task::check`]): if it died and
//! its thread id was reused meanwhile, the notification is no longer
//! pending, and nothing read through that thread id is acted on. One check
//! at the end covers every access before it, since a thread id cannot come
//! back to the task that made the call.

use std::ffi::{CString, OsStr};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use nix::libc;

use crate::sys::notif::{Notification, still_valid};

/// How many thread pidfds the gate keeps.
const PIDFD_CACHE: usize = 256;

/// The mount IDs of one mount namespace.
type MountIds = std::rc::Rc<std::collections::HashSet<u64>>;

/// The mount IDs of `tid`'s mount namespace when it is not this
/// process's (`None` when it is), cached per namespace (its inode).
/// Errors with ELOOP when they cannot be read: fail closed.
fn task_mounts(tid: i32) -> Result<Option<MountIds>, i32> {
    use std::os::unix::fs::MetadataExt;
    let ns =
        |who: &str| std::fs::metadata(format!("/proc/{who}/ns/mnt")).map(|m| (m.dev(), m.ino()));
    // This process's namespace does not change: looked up once.
    static OURS: std::sync::OnceLock<Option<(u64, u64)>> = std::sync::OnceLock::new();
    let theirs = ns(&tid.to_string()).map_err(|_| libc::ELOOP)?;
    if *OURS.get_or_init(|| ns("self").ok()) == Some(theirs) {
        return Ok(None);
    }
    if let Some(known) = TASK_MOUNTS.with(|c| c.borrow().get(&theirs).cloned()) {
        return Ok(Some(known));
    }
    let ids: std::collections::HashSet<u64> = crate::sys::procfs::mountinfo(&tid.to_string())
        .map_err(|_| libc::ELOOP)?
        .into_iter()
        .map(|m| m.id)
        .collect();
    let ids = std::rc::Rc::new(ids);
    TASK_MOUNTS.with(|c| c.borrow_mut().insert(theirs, ids.clone()));
    Ok(Some(ids))
}

thread_local! {
    /// [`task_mounts`]' cache: namespace (device, inode) to mount IDs.
    static TASK_MOUNTS: std::cell::RefCell<std::collections::HashMap<(u64, u64), MountIds>> =
        std::cell::RefCell::new(std::collections::HashMap::new());

    /// The pidfds of the threads the gate's thread has served.
    static PIDFDS: std::cell::RefCell<std::collections::HashMap<i32, OwnedFd>> =
        std::cell::RefCell::new(std::collections::HashMap::new());
}

/// The calling task of one notification.
pub(crate) struct Task {
    pub(crate) tid: i32,
    id: u64,
    listener: RawFd,
}

/// Opens `path` with `flags` (close-on-exec added); errors with the errno.
fn open_at(dirfd: RawFd, path: &[u8], flags: libc::c_int) -> Result<OwnedFd, i32> {
    crate::sys::fs::open_at(dirfd, path, flags, 0)
}

use crate::sys::fs::{RESOLVE_IN_ROOT, RESOLVE_NO_MAGICLINKS, open_at2};

/// The path an open descriptor names (`/proc/self/fd/N`, proc(5)).
pub(crate) fn real_path(fd: &impl AsRawFd) -> Result<PathBuf, i32> {
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))
}

/// `st_mode` and (device, inode) of an open descriptor (fstat(2); works on
/// `O_PATH` descriptors).
pub(crate) fn stat(fd: &impl AsRawFd) -> Result<(u32, (u64, u64)), i32> {
    crate::sys::fs::fstat(fd).map(|st| (st.st_mode, (st.st_dev, st.st_ino)))
}

impl Task {
    /// The task of notification `n` on `listener`.
    pub(crate) fn new(n: &Notification, listener: RawFd) -> Task {
        Task {
            tid: n.tid,
            id: n.id,
            listener,
        }
    }

    /// True while the notification is pending: the tid still names the task.
    pub(crate) fn valid(&self) -> bool {
        still_valid(self.listener, self.id)
    }

    /// Fails with ESRCH once the notification is no longer pending.
    pub(crate) fn check(&self) -> Result<(), i32> {
        if self.valid() {
            Ok(())
        } else {
            Err(libc::ESRCH)
        }
    }

    /// The open file behind the task's descriptor `fd`, duplicated into this
    /// process (pidfd_getfd(2)); EBADF when it has none. Callers [`check`]
    /// before they act on it.
    ///
    /// [`check`]: Task::check
    pub(crate) fn take_fd(&self, fd: u64) -> Result<OwnedFd, i32> {
        let fd = i32::try_from(fd).map_err(|_| libc::EBADF)?;
        let getfd = |pidfd: RawFd| {
            crate::sys::pidfd::get_fd(pidfd, fd).map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))
        };
        let mapped = |e: i32| if e == libc::EPERM { libc::EACCES } else { e };
        // A pidfd per thread, kept while the thread lives: a pidfd never
        // follows its id to a new thread, so a cached one that fails (its
        // thread died: ESRCH, or its files are gone: EBADF) is dropped and
        // the call tried once more with a fresh one.
        if let Some(cached) = PIDFDS.with(|c| c.borrow().get(&self.tid).map(|p| p.as_raw_fd())) {
            if let Ok(dup) = getfd(cached) {
                return Ok(dup);
            }
            PIDFDS.with(|c| c.borrow_mut().remove(&self.tid));
        }
        let pidfd = crate::sys::pidfd::open_thread(self.tid)
            .map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))?;
        let dup = getfd(pidfd.as_raw_fd()).map_err(mapped)?;
        PIDFDS.with(|c| {
            let mut c = c.borrow_mut();
            if c.len() >= PIDFD_CACHE {
                c.clear();
            }
            c.insert(self.tid, pidfd);
        });
        Ok(dup)
    }

    /// The directory a path of the task's is resolved from: its root for an
    /// absolute path, its working directory for `AT_FDCWD`, else its open
    /// directory `dirfd`.
    fn base(&self, dirfd: i32, absolute: bool) -> Result<OwnedFd, i32> {
        let link = if absolute {
            format!("/proc/{}/root", self.tid)
        } else if dirfd == libc::AT_FDCWD {
            format!("/proc/{}/cwd", self.tid)
        } else {
            format!("/proc/{}/fd/{}", self.tid, dirfd)
        };
        open_at(libc::AT_FDCWD, link.as_bytes(), libc::O_PATH)
    }

    /// Pins the inode `path` names for the task, relative to its `dirfd`
    /// (`AT_FDCWD`: its working directory), as an `O_PATH` descriptor:
    /// following a final symlink when `follow`, and naming `dirfd` itself
    /// when `path` is empty and `empty_path` (`AT_EMPTY_PATH`). Errors with
    /// the errno the task's own call would have met (ENOENT, ENOTDIR,
    /// ELOOP, EACCES, ...). Callers [`check`] before they act on it.
    ///
    /// [`check`]: Task::check
    pub(crate) fn pin(
        &self,
        dirfd: i32,
        path: &[u8],
        follow: bool,
        empty_path: bool,
    ) -> Result<OwnedFd, i32> {
        let fd = self.pin_in_any_view(dirfd, path, follow, empty_path)?;
        self.in_task_view(&fd)?;
        Ok(fd)
    }

    /// Fails (ELOOP, as for a magic link) when `fd` lies on a mount the
    /// task cannot see. In a mount namespace of its own (the mount tier)
    /// the task's paths are resolved from its root, working directory or
    /// descriptors, whose mounts are its own; but an absolute symlink met
    /// on a relative path is resolved from this process's root, in the
    /// host's namespace, where the mounts that hide the read deny list's
    /// entries do not exist (`ln -s ~/.aws l; chmod g+s l` would reach the
    /// real one). The task's mount IDs (mountinfo, proc(5)) are read once
    /// per namespace; STATX_MNT_ID (statx(2), Linux 5.8) gives the mount
    /// of the descriptor. Without either the check fails closed.
    fn in_task_view(&self, fd: &OwnedFd) -> Result<(), i32> {
        let Some(mounts) = task_mounts(self.tid)? else {
            return Ok(()); // our own namespace: every mount is the task's
        };
        let mnt_id = crate::sys::fs::mount_id(fd).ok_or(libc::ELOOP)?;
        if mounts.contains(&mnt_id) {
            Ok(())
        } else {
            Err(libc::ELOOP)
        }
    }

    fn pin_in_any_view(
        &self,
        dirfd: i32,
        path: &[u8],
        follow: bool,
        empty_path: bool,
    ) -> Result<OwnedFd, i32> {
        if path.is_empty() {
            if !empty_path {
                return Err(libc::ENOENT);
            }
            return self.base(dirfd, false);
        }
        let absolute = path.first() == Some(&b'/');
        if absolute && let Some((link, rest)) = self.own_link(path)? {
            // /proc/self/fd/N and the like: the task's descriptor N (what
            // gnulib's chmod of "/proc/self/fd/N" means), its working
            // directory or its root; and what lies beneath them
            // (`/proc/self/fd/4/src/file`, as GNU tar names files when it
            // sets their extended attributes), resolved from there as the
            // kernel would, magic links aside.
            let (dirfd, absolute) = match link {
                OwnLink::Fd(fd) => (fd, false),
                OwnLink::Cwd => (libc::AT_FDCWD, false),
                OwnLink::Root => (libc::AT_FDCWD, true),
            };
            let base = self.base(dirfd, absolute)?;
            if rest.is_empty() {
                return Ok(base);
            }
            let resolve = RESOLVE_NO_MAGICLINKS | if absolute { RESOLVE_IN_ROOT } else { 0 };
            let flags = libc::O_PATH | if follow { 0 } else { libc::O_NOFOLLOW };
            return open_at2(base.as_raw_fd(), &rest, flags, resolve);
        }
        let base = self.base(dirfd, absolute)?;
        let rel: &[u8] = if absolute {
            let trimmed = &path[path.iter().take_while(|b| **b == b'/').count()..];
            if trimmed.is_empty() { b"." } else { trimmed }
        } else {
            path
        };
        // No magic link is followed on the way (/proc/PID/fd/N, /cwd,
        // /root: resolved here they would name dsh-exec's, or jump out of
        // the task's view), and an absolute path stays in the task's root,
        // its symlinks included (openat2(2), Linux 5.6).
        let resolve = RESOLVE_NO_MAGICLINKS | if absolute { RESOLVE_IN_ROOT } else { 0 };
        let flags = libc::O_PATH | if follow { 0 } else { libc::O_NOFOLLOW };
        open_at2(base.as_raw_fd(), rel, flags, resolve)
    }

    /// What `path` names when it starts with one of the task's own magic
    /// links: `/proc/self/fd/N`, `/proc/thread-self/fd/N`, `/proc/PID/fd/N`
    /// or `/proc/PID/task/TID/fd/N` with the task's own ids, or the same
    /// with `cwd` or `root` in place of `fd/N` (`.` and repeated slashes
    /// allowed); with the rest of the path after it (empty when none).
    /// `None` for any other path.
    fn own_link(&self, path: &[u8]) -> Result<Option<(OwnLink, Vec<u8>)>, i32> {
        let parts: Vec<&[u8]> = path
            .split(|b| *b == b'/')
            .filter(|p| !p.is_empty() && *p != b".")
            .collect();
        let number = |p: &[u8]| std::str::from_utf8(p).ok()?.parse::<i32>().ok();
        let tid = self.tid;
        let own_pid = |pid: &[u8]| number(pid).is_some_and(|p| p == tid || Some(p) == self.tgid());
        let after = match parts.as_slice() {
            [b"proc", b"self" | b"thread-self", after @ ..] => after,
            [b"proc", pid, b"task", t, after @ ..] if number(t) == Some(tid) && own_pid(pid) => {
                after
            }
            [b"proc", pid, after @ ..] if own_pid(pid) => after,
            _ => return Ok(None),
        };
        let (link, rest) = match after {
            [b"fd", n, rest @ ..] => (OwnLink::Fd(number(n).ok_or(libc::ENOENT)?), rest),
            [b"cwd", rest @ ..] => (OwnLink::Cwd, rest),
            [b"root", rest @ ..] => (OwnLink::Root, rest),
            _ => return Ok(None),
        };
        Ok(Some((link, rest.join(&b'/'))))
    }

    /// The task's thread-group id (its process), from `/proc/TID/status`.
    pub(crate) fn tgid(&self) -> Option<i32> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.tid)).ok()?;
        let tgid = status
            .lines()
            .find_map(|l| l.strip_prefix("Tgid:"))?
            .trim()
            .parse()
            .ok()?;
        self.valid().then_some(tgid)
    }
}

/// One of a task's own magic links in `/proc` (see `Task::own_link`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OwnLink {
    /// `fd/N`: its descriptor N.
    Fd(i32),
    /// `cwd`: its working directory.
    Cwd,
    /// `root`: its root directory.
    Root,
}

/// The `/proc/self/fd/PIN` path of a pinned inode, for the system calls that
/// take a path: it resolves to exactly that inode.
pub(crate) fn pin_path(pin: &impl AsRawFd) -> CString {
    // A formatted number holds no NUL.
    CString::new(format!("/proc/self/fd/{}", pin.as_raw_fd())).unwrap_or_default()
}

/// A path as the task gave it, for messages.
pub(crate) fn display(path: &[u8]) -> PathBuf {
    PathBuf::from(OsStr::from_bytes(path))
}
