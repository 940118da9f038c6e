//! File metadata, decided by the gate: mode (`chmod` and its variants),
//! owner (`chown`, ...), times (`utimensat`, ...) and extended attributes.
//!
//! Landlock governs opening, creating, removing and renaming files, not
//! changing the metadata of existing ones, and a filter cannot tell which
//! file a path or descriptor names. So every such call comes here: its
//! target is pinned (a path with `O_PATH`, a descriptor with pidfd_getfd),
//! judged by the real path of the pinned inode, and the change is made by
//! this process on that very inode (`/proc/self/fd/PIN`, or the duplicated
//! descriptor), never by letting the task's call continue. Allowed:
//! - only on inodes under a writable root, and not on a protected path
//!   (`.git/config`, `.git/hooks`, ...: [`super::GatePolicy`]);
//! - never a set-user-ID bit; set-group-ID only on directories (an
//!   inherited set-group-ID directory is harmless, a set-group-ID file is
//!   not);
//! - extended attributes only in the `user.` namespace and POSIX ACLs:
//!   never `security.*` (file capabilities!) or `trusted.*`.
//!
//! The change is made with this process's credentials: an unprivileged
//! `dsh-exec` can do no more than the command's own uid could; a root one
//! can change files of any owner inside the writable roots, as a root
//! command in a CI container expects.

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;

use nix::libc;

use super::table::{Follow, Judges, Names, Sets, TimesLayout, Trap};
use super::task::{Task, pin_path, real_path, stat};
use super::{GatePolicy, Outcome, Refusal};
use crate::sys::notif::{PATH_MAX, read_bytes, read_cstring};

/// How the target of a metadata call is named.
enum Target {
    /// A path, relative to a directory descriptor of the task (`AT_FDCWD`:
    /// its working directory).
    Path {
        dirfd: i32,
        path: Vec<u8>,
        follow: bool,
        empty_path: bool,
    },
    /// One of the task's open descriptors.
    Fd(u64),
}

/// What the call changes.
use crate::sys::fs::Change;

impl Change {
    fn op(&self) -> &'static str {
        match self {
            Change::Mode(_) => "chmod",
            Change::Owner(..) => "chown",
            Change::Times(_) => "utime",
            Change::SetXattr { .. } | Change::RemoveXattr(_) => "xattr",
        }
    }
}

/// The largest extended attribute value (XATTR_SIZE_MAX, 64 KiB) and name
/// (XATTR_NAME_MAX, 255 bytes).
const XATTR_SIZE_MAX: usize = 64 * 1024;
const XATTR_NAME_MAX: usize = 255;

fn read_path(task: &Task, addr: u64) -> Result<Vec<u8>, i32> {
    if addr == 0 {
        return Err(libc::EFAULT);
    }
    read_cstring(task.tid, addr, PATH_MAX - 1)
}

fn read_name(task: &Task, addr: u64) -> Result<CString, i32> {
    let name = read_cstring(task.tid, addr, XATTR_NAME_MAX).map_err(|e| match e {
        libc::ENAMETOOLONG => libc::ERANGE,
        e => e,
    })?;
    CString::new(name).map_err(|_| libc::EINVAL)
}

fn timespec(sec: i64, nsec: i64) -> libc::timespec {
    libc::timespec {
        tv_sec: sec,
        tv_nsec: nsec,
    }
}

/// Reads a `struct timespec[2]`, `struct timeval[2]` or `struct utimbuf`
/// (16, 16 or 8 bytes a time) as utimensat's times; `None` for a NULL
/// pointer.
fn read_times(
    task: &Task,
    addr: u64,
    kind: TimesLayout,
) -> Result<Option<[libc::timespec; 2]>, i32> {
    if addr == 0 {
        return Ok(None);
    }
    let word =
        |b: &[u8], i: usize| i64::from_ne_bytes(b[i * 8..i * 8 + 8].try_into().unwrap_or([0; 8]));
    Ok(Some(match kind {
        TimesLayout::Timespec => {
            let b = read_bytes(task.tid, addr, 32)?;
            [
                timespec(word(&b, 0), word(&b, 1)),
                timespec(word(&b, 2), word(&b, 3)),
            ]
        }
        TimesLayout::Timeval => {
            let b = read_bytes(task.tid, addr, 32)?;
            let usec = |v: i64| {
                if (0..1_000_000).contains(&v) {
                    Ok(v * 1000)
                } else {
                    Err(libc::EINVAL)
                }
            };
            [
                timespec(word(&b, 0), usec(word(&b, 1))?),
                timespec(word(&b, 2), usec(word(&b, 3))?),
            ]
        }
        TimesLayout::Utimbuf => {
            let b = read_bytes(task.tid, addr, 16)?;
            [timespec(word(&b, 0), 0), timespec(word(&b, 1), 0)]
        }
    }))
}

/// The target and change of a metadata call laid out as `names` and
/// `sets` say ([`table`](super::table)), read from arguments `a`.
fn decode(task: &Task, names: Names, sets: Sets, a: &[u64; 6]) -> Result<(Target, Change), i32> {
    let path = |dirfd: u64, addr: u64, follow: bool, empty_path: bool| -> Result<Target, i32> {
        Ok(Target::Path {
            dirfd: dirfd as i32,
            path: read_path(task, addr)?,
            follow,
            empty_path,
        })
    };
    let arg = |i: u8| a[usize::from(i)];
    let at_flags = |follow: Follow| match follow {
        Follow::Always => (true, false),
        Follow::Never => (false, false),
        Follow::Flags(i) => (
            arg(i) & libc::AT_SYMLINK_NOFOLLOW as u64 == 0,
            arg(i) & libc::AT_EMPTY_PATH as u64 != 0,
        ),
    };
    // The change's memory is read first, as the kernel copies times and
    // attribute values before it looks the path up.
    let change = match sets {
        Sets::Mode(i) => Change::Mode(arg(i) as u32),
        Sets::Owner(u, g) => Change::Owner(arg(u) as u32, arg(g) as u32),
        Sets::Times(i, layout) => Change::Times(read_times(task, arg(i), layout)?),
        Sets::SetXattr {
            name,
            value,
            size,
            flags,
        } => {
            let size = arg(size) as usize;
            if size > XATTR_SIZE_MAX {
                return Err(libc::E2BIG);
            }
            Change::SetXattr {
                name: read_name(task, arg(name))?,
                value: read_bytes(task.tid, arg(value), size)?,
                flags: arg(flags) as i32,
            }
        }
        Sets::SetXattrArgs => {
            // struct xattr_args { u64 value; u32 size; u32 flags; }
            let b = read_bytes(task.tid, a[4], 16)?;
            let value_ptr = u64::from_ne_bytes(b[0..8].try_into().unwrap_or([0; 8]));
            let size = u32::from_ne_bytes(b[8..12].try_into().unwrap_or([0; 4])) as usize;
            let flags = u32::from_ne_bytes(b[12..16].try_into().unwrap_or([0; 4])) as i32;
            if size > XATTR_SIZE_MAX {
                return Err(libc::E2BIG);
            }
            Change::SetXattr {
                name: read_name(task, a[3])?,
                value: read_bytes(task.tid, value_ptr, size)?,
                flags,
            }
        }
        Sets::RemoveXattr(i) => Change::RemoveXattr(read_name(task, arg(i))?),
    };
    let target = match names {
        Names::Fd => Target::Fd(a[0]),
        Names::Path {
            dirfd,
            path: p,
            follow,
        } => {
            let dirfd = dirfd.map_or(libc::AT_FDCWD as u64, arg);
            let (follow, empty) = at_flags(follow);
            path(dirfd, arg(p), follow, empty)?
        }
        // futimens(3): a NULL path is the descriptor itself.
        Names::PathOrFd if a[1] == 0 => Target::Fd(a[0]),
        Names::PathOrFd => {
            let (follow, empty) = at_flags(Follow::Flags(3));
            path(a[0], a[1], follow, empty)?
        }
    };
    Ok((target, change))
}

/// Extended attribute names the command may set or remove.
fn xattr_allowed(name: &CString) -> bool {
    let n = name.as_bytes();
    n.starts_with(b"user.") || n == b"system.posix_acl_access" || n == b"system.posix_acl_default"
}

/// A pinned target: the descriptor, and whether it is a path pin (`O_PATH`)
/// or the task's own open file.
struct Pinned {
    fd: OwnedFd,
    by_path: bool,
    mode: u32,
    id: (u64, u64),
    real: PathBuf,
}

/// Decides and performs one metadata call (the table's handler for every
/// [`Judges::Metadata`] entry).
pub(crate) fn metadata(
    task: &Task,
    trap: &Trap,
    args: &[u64; 6],
    policy: &GatePolicy,
) -> Result<Outcome, i32> {
    let Judges::Metadata(names, sets) = trap.judges else {
        return Err(libc::ENOSYS);
    };
    let (target, change) = decode(task, names, sets, args)?;
    Ok(Outcome::Done(decide_and_change(
        task, target, change, policy,
    )))
}

fn decide_and_change(
    task: &Task,
    target: Target,
    change: Change,
    policy: &GatePolicy,
) -> Result<i64, i32> {
    let op = change.op();
    let asked = match &target {
        Target::Path { path, .. } => Some(super::task::display(path)),
        Target::Fd(_) => None,
    };
    let pinned = match target {
        Target::Path {
            dirfd,
            path,
            follow,
            empty_path,
        } => {
            let fd = task.pin(dirfd, &path, follow, empty_path)?;
            let (mode, id) = stat(&fd)?;
            Pinned {
                mode,
                id,
                real: real_path(&fd)?,
                fd,
                by_path: true,
            }
        }
        Target::Fd(n) => {
            let fd = task.take_fd(n)?;
            let (mode, id) = stat(&fd)?;
            if mode & libc::S_IFMT == libc::S_IFREG
                && open_for_writing(&fd)
                && real_path(&fd).is_ok_and(|r| policy.under_writable(&r))
            {
                // A regular file open for writing under a writable root
                // (tar and cp -a change metadata through exactly such
                // descriptors): no lookup of the path is spent on it. Being
                // open for writing alone proves nothing: under -i the
                // command inherits the caller's redirections.
                return fast_change(task, fd, mode, id, change, policy);
            }
            Pinned {
                mode,
                id,
                real: real_path(&fd)?,
                fd,
                by_path: false,
            }
        }
    };
    // Reported by its real path (the file the call reached), or as named
    // for an anonymous inode.
    let refuse = |errno: i32, why: Refusal| {
        let shown = if pinned.real.is_absolute() {
            pinned.real.clone()
        } else {
            asked.clone().unwrap_or_else(|| pinned.real.clone())
        };
        policy.record(op, Some(shown), errno, why);
        Err(errno)
    };
    // An anonymous inode (pipe, socket, eventfd) names no file anywhere.
    let anonymous = !pinned.real.is_absolute();
    if !anonymous && let Err(why) = policy.may_change(&pinned.real, pinned.id) {
        return refuse(libc::EPERM, why);
    }
    if anonymous
        && pinned.mode & libc::S_IFMT == libc::S_IFSOCK
        && matches!(change, Change::Owner(..))
    {
        return refuse(libc::EPERM, Refusal::SocketOwner);
    }
    match &change {
        Change::Mode(m) if m & libc::S_ISUID != 0 => return refuse(libc::EPERM, Refusal::SetUid),
        Change::Mode(m)
            if m & libc::S_ISGID != 0 && pinned.mode & libc::S_IFMT != libc::S_IFDIR =>
        {
            return refuse(libc::EPERM, Refusal::SetGidFile);
        }
        Change::SetXattr { name, .. } | Change::RemoveXattr(name) if !xattr_allowed(name) => {
            return refuse(libc::EPERM, Refusal::XattrNamespace);
        }
        _ => {}
    }
    task.check()?;
    apply(&pinned, &change)
}

/// Whether a descriptor was opened for writing (fcntl(2) `F_GETFL`).
fn open_for_writing(fd: &OwnedFd) -> bool {
    let flags = crate::sys::fs::status_flags(fd);
    flags >= 0 && flags & libc::O_PATH == 0 && flags & libc::O_ACCMODE != libc::O_RDONLY
}

/// The change through a descriptor the command holds open for writing on a
/// regular file (see [`decide_and_change`]): the same rules, but the path
/// is looked up only to name a refusal.
fn fast_change(
    task: &Task,
    fd: OwnedFd,
    mode: u32,
    id: (u64, u64),
    change: Change,
    policy: &GatePolicy,
) -> Result<i64, i32> {
    let refuse = |errno: i32, why: Refusal| {
        policy.record(change.op(), real_path(&fd).ok(), errno, why);
        Err(errno)
    };
    if policy.protected.iter().any(|p| p.id == id) {
        return refuse(libc::EPERM, Refusal::Protected);
    }
    if let Some(why) = forbidden(&change, mode) {
        return refuse(libc::EPERM, why);
    }
    task.check()?;
    apply(
        &Pinned {
            fd,
            by_path: false,
            mode,
            id,
            real: PathBuf::new(),
        },
        &change,
    )
}

/// What the change itself may not do, whatever the file: a set-user-ID
/// bit, a set-group-ID bit on a file other than a directory, an extended
/// attribute outside `user.*` and the POSIX ACLs.
fn forbidden(change: &Change, file_mode: u32) -> Option<Refusal> {
    match change {
        Change::Mode(m) if m & libc::S_ISUID != 0 => Some(Refusal::SetUid),
        Change::Mode(m) if m & libc::S_ISGID != 0 && file_mode & libc::S_IFMT != libc::S_IFDIR => {
            Some(Refusal::SetGidFile)
        }
        Change::SetXattr { name, .. } | Change::RemoveXattr(name) if !xattr_allowed(name) => {
            Some(Refusal::XattrNamespace)
        }
        _ => None,
    }
}

/// Makes the change on the pinned inode.
fn apply(pinned: &Pinned, change: &Change) -> Result<i64, i32> {
    let is_link = pinned.mode & libc::S_IFMT == libc::S_IFLNK;
    let path = pin_path(&pinned.fd);
    crate::sys::fs::change_inode(
        pinned.fd.as_raw_fd(),
        &path,
        pinned.by_path,
        is_link,
        change,
    )
}
