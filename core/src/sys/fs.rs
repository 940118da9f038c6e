//! File-system calls relative to directory descriptors, for the code that
//! must not follow what the command can change: the gate (acting on an
//! inode it pinned), the protected-path undo and the git check.
//!
//! Names are single path components or byte paths given as the caller got
//! them; each call reports the errno (`Err(i32)`) or an `io::Error` as its
//! caller needs. The calls are the libc crate's, not nix's or rustix's:
//! their callers hold raw descriptor numbers (`AT_FDCWD`, and numbers the
//! gate took from a confined task) that those crates' `AsFd` arguments
//! would need an unsafe borrow for each, and the gate answers the task with
//! the raw errno. openat2(2) (Linux 5.6) is a raw system call: neither nix
//! 0.32 nor the libc crate wraps it, and rustix's would need its `fs`
//! feature and a second set of flag types for the same call.

use std::ffi::{CStr, CString, OsStr};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;

use nix::libc;

use super::sock::errno;

/// `RESOLVE_NO_MAGICLINKS` (openat2(2)): no `/proc/PID/fd`-style link.
pub(crate) const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
/// `RESOLVE_NO_SYMLINKS` (openat2(2)): no symlink anywhere on the way.
pub(crate) const RESOLVE_NO_SYMLINKS: u64 = 0x04;
/// `RESOLVE_BENEATH` (openat2(2)): fail (EXDEV) if resolution leaves
/// `dirfd`'s directory, by `..`, an absolute symlink or a mount crossing.
pub(crate) const RESOLVE_BENEATH: u64 = 0x08;
/// `RESOLVE_IN_ROOT` (openat2(2)): resolve as if `dirfd` were `/`.
pub(crate) const RESOLVE_IN_ROOT: u64 = 0x10;

fn cstring(bytes: &[u8]) -> Result<CString, i32> {
    CString::new(bytes).map_err(|_| libc::EINVAL)
}

fn owned(fd: i64) -> Result<OwnedFd, i32> {
    if fd < 0 {
        return Err(errno());
    }
    // SAFETY: a descriptor the kernel has just made; nobody else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

fn io_err(e: i32) -> io::Error {
    io::Error::from_raw_os_error(e)
}

/// openat(2) of `path` relative to `dirfd` with `flags` and `mode`
/// (`O_CLOEXEC` added).
pub(crate) fn open_at(dirfd: RawFd, path: &[u8], flags: i32, mode: u32) -> Result<OwnedFd, i32> {
    let c = cstring(path)?;
    // SAFETY: a NUL-terminated path we own; the result is checked.
    owned(i64::from(unsafe {
        libc::openat(dirfd, c.as_ptr(), flags | libc::O_CLOEXEC, mode)
    }))
}

/// openat2(2) of `path` relative to `dirfd` with `flags` (`O_CLOEXEC`
/// added) and the `resolve` flags.
pub(crate) fn open_at2(
    dirfd: RawFd,
    path: &[u8],
    flags: i32,
    resolve: u64,
) -> Result<OwnedFd, i32> {
    /// `struct open_how` (linux/openat2.h).
    #[repr(C)]
    struct OpenHow {
        flags: u64,
        mode: u64,
        resolve: u64,
    }
    let c = cstring(path)?;
    let how = OpenHow {
        flags: (flags | libc::O_CLOEXEC) as u64,
        mode: 0,
        resolve,
    };
    // SAFETY: a NUL-terminated path and an open_how we own, its size given.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dirfd,
            c.as_ptr(),
            &raw const how,
            std::mem::size_of::<OpenHow>(),
        )
    };
    owned(fd)
}

/// `path` (absolute) opened with `flags`, following no symlink anywhere on
/// the way (`RESOLVE_NO_SYMLINKS`): ELOOP when one is.
pub(crate) fn open_no_symlinks(path: &std::path::Path, flags: i32) -> io::Result<OwnedFd> {
    open_at2(
        libc::AT_FDCWD,
        path.as_os_str().as_bytes(),
        flags,
        RESOLVE_NO_SYMLINKS,
    )
    .map_err(io_err)
}

/// fstat(2) of a descriptor (`O_PATH` ones too).
pub(crate) fn fstat(fd: &impl AsRawFd) -> Result<libc::stat, i32> {
    // SAFETY: fstat fills the zeroed stat we own.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(fd.as_raw_fd(), &mut st) != 0 {
            return Err(errno());
        }
        Ok(st)
    }
}

/// lstat of `name` in `dir` (fstatat(2), `AT_SYMLINK_NOFOLLOW`).
pub(crate) fn stat_at(dir: RawFd, name: &OsStr) -> io::Result<libc::stat> {
    let c = cstring(name.as_bytes()).map_err(io_err)?;
    // SAFETY: fstatat fills the zeroed stat we own.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstatat(dir, c.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(st)
    }
}

/// When `name` in `dir` was created (statx(2) `STATX_BTIME`, not following
/// a final symlink): (seconds, nanoseconds) since the epoch, or `None`
/// when the file system does not record it (or it cannot be read).
pub(crate) fn birth_time_at(dir: RawFd, name: &OsStr) -> Option<(i64, i64)> {
    let c = cstring(name.as_bytes()).ok()?;
    // SAFETY: statx fills the zeroed buffer we own; a NUL-terminated name.
    unsafe {
        let mut st: libc::statx = std::mem::zeroed();
        let rc = libc::statx(
            dir,
            c.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
            libc::STATX_BTIME,
            &mut st,
        );
        (rc == 0 && st.stx_mask & libc::STATX_BTIME != 0)
            .then_some((st.stx_btime.tv_sec, i64::from(st.stx_btime.tv_nsec)))
    }
}

/// The ID of the mount a descriptor lies on (statx(2) `STATX_MNT_ID`,
/// Linux 5.8), as mountinfo's first field shows it; `None` when the kernel
/// does not say.
pub(crate) fn mount_id(fd: &impl AsRawFd) -> Option<u64> {
    // SAFETY: statx fills the zeroed buffer we own; the path is empty
    // (AT_EMPTY_PATH: the descriptor itself).
    unsafe {
        let mut st: libc::statx = std::mem::zeroed();
        let rc = libc::statx(
            fd.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            libc::STATX_MNT_ID,
            &mut st,
        );
        (rc == 0 && st.stx_mask & libc::STATX_MNT_ID != 0).then_some(st.stx_mnt_id)
    }
}

/// The file status flags of a descriptor (fcntl(2) `F_GETFL`), or -1.
pub(crate) fn status_flags(fd: &impl AsRawFd) -> i32 {
    // SAFETY: F_GETFL takes no pointer.
    unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) }
}

/// unlinkat(2) of a non-directory `name` in `dir`; true when removed.
pub(crate) fn unlink_at(dir: RawFd, name: &OsStr) -> bool {
    let Ok(c) = cstring(name.as_bytes()) else {
        return false;
    };
    // SAFETY: a NUL-terminated name we own.
    unsafe { libc::unlinkat(dir, c.as_ptr(), 0) == 0 }
}

/// renameat2(2) of `from` to `to`, both in `dir`, never replacing
/// (`RENAME_NOREPLACE`: EEXIST when `to` exists).
pub(crate) fn rename_noreplace(dir: RawFd, from: &OsStr, to: &OsStr) -> io::Result<()> {
    let (from, to) = (
        cstring(from.as_bytes()).map_err(io_err)?,
        cstring(to.as_bytes()).map_err(io_err)?,
    );
    // SAFETY: NUL-terminated names we own.
    let rc =
        unsafe { libc::renameat2(dir, from.as_ptr(), dir, to.as_ptr(), libc::RENAME_NOREPLACE) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// renameat(2) of `from` to `to`, both in `dir`, replacing `to`.
pub(crate) fn rename_at(dir: RawFd, from: &OsStr, to: &OsStr) -> io::Result<()> {
    let (from, to) = (
        cstring(from.as_bytes()).map_err(io_err)?,
        cstring(to.as_bytes()).map_err(io_err)?,
    );
    // SAFETY: NUL-terminated names we own.
    if unsafe { libc::renameat(dir, from.as_ptr(), dir, to.as_ptr()) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// mkdirat(2) of `name` in `dir` with `mode` (less the umask).
pub(crate) fn mkdir_at(dir: RawFd, name: &OsStr, mode: u32) -> io::Result<()> {
    let c = cstring(name.as_bytes()).map_err(io_err)?;
    // SAFETY: a NUL-terminated name we own.
    if unsafe { libc::mkdirat(dir, c.as_ptr(), mode) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// A metadata change the gate makes on an inode it pinned.
pub(crate) enum Change {
    /// chmod(2): the new mode bits.
    Mode(u32),
    /// chown(2): the new owner and group (`u32::MAX`: unchanged).
    Owner(u32, u32),
    /// Access and modification times as utimensat(2) takes them; `None` is
    /// "now" for both.
    Times(Option<[libc::timespec; 2]>),
    /// setxattr(2).
    SetXattr {
        /// The attribute's name.
        name: CString,
        /// Its value.
        value: Vec<u8>,
        /// `XATTR_CREATE`, `XATTR_REPLACE` or 0.
        flags: i32,
    },
    /// removexattr(2) of this name.
    RemoveXattr(CString),
}

/// Makes `change` on the inode `fd` pins. With `by_path` (an `O_PATH`
/// pin, which the f-calls refuse) the call goes through the pin itself
/// (`AT_EMPTY_PATH`) or its `/proc/self/fd/N` path `path`; a symlink's
/// mode and extended attributes cannot be changed (`is_link`). Returns 0
/// or the errno.
pub(crate) fn change_inode(
    fd: RawFd,
    path: &CStr,
    by_path: bool,
    is_link: bool,
    change: &Change,
) -> Result<i64, i32> {
    let empty = c"";
    // SAFETY: each call takes our pinned descriptor or its /proc/self/fd
    // path, and buffers we own.
    let rc = unsafe {
        match change {
            Change::Mode(_) if is_link => return Err(libc::EOPNOTSUPP),
            Change::Mode(m) if by_path => {
                // fchmodat2(2) on the pin itself (Linux 6.6), else through
                // its /proc/self/fd path.
                let rc = libc::syscall(
                    libc::SYS_fchmodat2,
                    fd,
                    empty.as_ptr(),
                    *m,
                    libc::AT_EMPTY_PATH,
                );
                if rc == 0 {
                    0
                } else {
                    libc::chmod(path.as_ptr(), *m)
                }
            }
            Change::Mode(m) => libc::fchmod(fd, *m),
            Change::Owner(u, g) if by_path => {
                libc::fchownat(fd, empty.as_ptr(), *u, *g, libc::AT_EMPTY_PATH)
            }
            Change::Owner(u, g) => libc::fchown(fd, *u, *g),
            Change::Times(t) => {
                let times = t.as_ref().map_or(std::ptr::null(), |t| t.as_ptr());
                if by_path {
                    libc::utimensat(fd, empty.as_ptr(), times, libc::AT_EMPTY_PATH)
                } else {
                    libc::futimens(fd, times)
                }
            }
            Change::SetXattr { .. } | Change::RemoveXattr(_) if is_link => {
                return Err(libc::EPERM);
            }
            Change::SetXattr { name, value, flags } if by_path => libc::setxattr(
                path.as_ptr(),
                name.as_ptr(),
                value.as_ptr().cast(),
                value.len(),
                *flags,
            ),
            Change::SetXattr { name, value, flags } => libc::fsetxattr(
                fd,
                name.as_ptr(),
                value.as_ptr().cast(),
                value.len(),
                *flags,
            ),
            Change::RemoveXattr(name) if by_path => libc::removexattr(path.as_ptr(), name.as_ptr()),
            Change::RemoveXattr(name) => libc::fremovexattr(fd, name.as_ptr()),
        }
    };
    if rc != 0 {
        return Err(errno());
    }
    Ok(0)
}

/// The directory an `O_PATH` descriptor names, opened again for reading
/// (`/proc/self/fd/N`, which resolves to the open file itself: proc(5)),
/// for calls that refuse `O_PATH` descriptors.
pub(crate) fn reopen_dir(fd: &impl AsRawFd) -> io::Result<OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(path)?;
    Ok(OwnedFd::from(file))
}

/// Every extended attribute of the file `fd` is open on (flistxattr(2),
/// fgetxattr(2)): (name, value) pairs, in the kernel's order. A file
/// system without xattrs gives none.
pub(crate) fn xattrs(fd: &impl AsRawFd) -> Vec<(CString, Vec<u8>)> {
    let fd = fd.as_raw_fd();
    let mut names = vec![0u8; 4096];
    // SAFETY: flistxattr writes at most `names.len()` bytes into our buffer.
    let n = unsafe { libc::flistxattr(fd, names.as_mut_ptr().cast(), names.len()) };
    if n <= 0 {
        return Vec::new();
    }
    names.truncate(n as usize);
    // SAFETY: fgetxattr writes at most the buffer's length into it.
    values(
        &names,
        |_| true,
        |name, buf| unsafe {
            libc::fgetxattr(fd, name.as_ptr(), buf.as_mut_ptr().cast(), buf.len())
        },
    )
}

/// The values of the attributes named in `names` (a listxattr(2) buffer:
/// names each ended by NUL) that `keep` accepts, read by `get` (a
/// getxattr(2) variant into the buffer given; negative: not read, the
/// attribute is left out).
fn values(
    names: &[u8],
    keep: impl Fn(&[u8]) -> bool,
    get: impl Fn(&CStr, &mut [u8]) -> isize,
) -> Vec<(CString, Vec<u8>)> {
    let mut out = Vec::new();
    for name in names
        .split(|b| *b == 0)
        .filter(|n| !n.is_empty() && keep(n))
    {
        let Ok(name) = CString::new(name) else {
            continue;
        };
        let mut value = vec![0u8; 64 * 1024];
        let n = get(&name, &mut value);
        if n >= 0 {
            value.truncate(n as usize);
            out.push((name, value));
        }
    }
    out
}

/// Sets the extended attribute `name` to `value` on the file `fd` is open
/// on (fsetxattr(2), flags 0: created or replaced).
pub(crate) fn set_xattr(fd: &impl AsRawFd, name: &CStr, value: &[u8]) -> io::Result<()> {
    // SAFETY: fsetxattr reads our C string and buffer.
    let rc = unsafe {
        libc::fsetxattr(
            fd.as_raw_fd(),
            name.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Sets the access and modification times of the file `fd` is open on
/// (futimens(2); an `O_PATH` descriptor through utimensat(2) with
/// `AT_EMPTY_PATH`): (seconds, nanoseconds) each.
pub(crate) fn set_times(fd: &impl AsRawFd, atime: (i64, i64), mtime: (i64, i64)) -> io::Result<()> {
    utimens(fd.as_raw_fd(), c"", atime, mtime, libc::AT_EMPTY_PATH)
}

/// utimensat(2) of `path` relative to `dir` with `flags`: access and
/// modification times as (seconds, nanoseconds).
fn utimens(
    dir: RawFd,
    path: &CStr,
    atime: (i64, i64),
    mtime: (i64, i64),
    flags: i32,
) -> io::Result<()> {
    let times = [atime, mtime].map(|(tv_sec, tv_nsec)| libc::timespec { tv_sec, tv_nsec });
    // SAFETY: utimensat with the caller's descriptor and C string, and the
    // two timespecs we own.
    let rc = unsafe { libc::utimensat(dir, path.as_ptr(), times.as_ptr(), flags) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Makes the symlink `name` in `dir` pointing at `target` (symlinkat(2)).
pub(crate) fn symlink_at(target: &[u8], dir: RawFd, name: &OsStr) -> io::Result<()> {
    let target = CString::new(target).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let name =
        CString::new(name.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: symlinkat with our C strings.
    let rc = unsafe { libc::symlinkat(target.as_ptr(), dir, name.as_ptr()) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Makes the FIFO `name` in `dir` with `mode` (mkfifoat(3)).
pub(crate) fn mkfifo_at(dir: RawFd, name: &OsStr, mode: u32) -> io::Result<()> {
    let name =
        CString::new(name.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: mkfifoat with our C string.
    let rc = unsafe { libc::mkfifoat(dir, name.as_ptr(), mode) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The target of the symlink `name` in `dir` (readlinkat(2)).
pub(crate) fn read_link_at(dir: RawFd, name: &OsStr) -> io::Result<Vec<u8>> {
    let name =
        CString::new(name.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let mut buf = vec![0u8; libc::PATH_MAX as usize];
    // SAFETY: readlinkat writes at most `buf.len()` bytes into our buffer.
    let n = unsafe { libc::readlinkat(dir, name.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    buf.truncate(n as usize);
    Ok(buf)
}

/// Sets the access and modification times of `name` in `dir`, not
/// following a symlink (utimensat(2), `AT_SYMLINK_NOFOLLOW`: a symlink's
/// own times).
pub(crate) fn set_times_at(
    dir: RawFd,
    name: &OsStr,
    atime: (i64, i64),
    mtime: (i64, i64),
) -> io::Result<()> {
    let name =
        CString::new(name.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    utimens(dir, &name, atime, mtime, libc::AT_SYMLINK_NOFOLLOW)
}

/// The time now on the coarse real-time clock (clock_gettime(2),
/// `CLOCK_REALTIME_COARSE`): the clock a file's ctime is taken from
/// (current_time(), fs/inode.c), so that a change made after this reading,
/// even in the same clock tick, has a ctime at or after it.
pub(crate) fn realtime_coarse_now() -> (i64, i64) {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime fills the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &mut ts) };
    (ts.tv_sec, ts.tv_nsec)
}

/// Removes the extended attribute `name` of the file `fd` is open on
/// (fremovexattr(2)).
pub(crate) fn remove_xattr(fd: &impl AsRawFd, name: &str) -> io::Result<()> {
    let name = CString::new(name).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: fremovexattr with our C string.
    let rc = unsafe { libc::fremovexattr(fd.as_raw_fd(), name.as_ptr()) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// listxattrat(2) (Linux 6.13; the same number on every architecture, from
/// the generic syscall table).
const SYS_LISTXATTRAT: libc::c_long = 465;

/// Every extended attribute of `name` in `dir` whose name `keep` accepts,
/// not following a symlink: the names from listxattrat(2) relative to
/// `dir` (before Linux 6.13, llistxattr(2) on `/proc/self/fd/DIR/NAME`),
/// the values of those kept from lgetxattr(2). One call for a file with
/// none kept, the common case, and no descriptor opened.
pub(crate) fn xattrs_at(
    dir: RawFd,
    name: &OsStr,
    keep: impl Fn(&[u8]) -> bool,
) -> Vec<(CString, Vec<u8>)> {
    let mut path = format!("/proc/self/fd/{dir}/").into_bytes();
    path.extend_from_slice(name.as_bytes());
    let (Ok(path), Ok(cname)) = (CString::new(path), CString::new(name.as_bytes())) else {
        return Vec::new();
    };
    let mut names = vec![0u8; 4096];
    // SAFETY: listxattrat and llistxattr write at most `names.len()` bytes
    // into our buffer; the C strings outlive the calls.
    let n = unsafe {
        let n = libc::syscall(
            SYS_LISTXATTRAT,
            dir,
            cname.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW as libc::c_uint,
            names.as_mut_ptr(),
            names.len(),
        );
        if n == -1 && errno() == libc::ENOSYS {
            libc::llistxattr(path.as_ptr(), names.as_mut_ptr().cast(), names.len()) as i64
        } else {
            n
        }
    };
    if n <= 0 {
        return Vec::new();
    }
    names.truncate(n as usize);
    // SAFETY: lgetxattr writes at most the buffer's length into it; the C
    // strings outlive the call.
    values(&names, keep, |attr, buf| unsafe {
        libc::lgetxattr(
            path.as_ptr(),
            attr.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    })
}
