//! An overlay file system made as a detached mount (the new mount API:
//! fsopen(2), fsconfig(2), fsmount(2); Linux 5.2), for a transaction's
//! writable root.
//!
//! What it relies on from the kernel (Documentation/filesystems/overlayfs.rst):
//! - every write through the overlay lands in the upper layer: a file
//!   changed is first copied up whole (`metacopy=off`), a removed entry
//!   leaves a whiteout (a character device 0/0), a directory removed and
//!   made again is marked opaque (the `trusted.overlay.opaque` xattr);
//!   the lower layer is never written;
//! - with `redirect_dir=off` a directory of the lower layer cannot be
//!   renamed (EXDEV: `mv` then copies and removes), so no redirect xattr
//!   ever asks a reader of the upper layer to look elsewhere;
//! - the mount made by fsmount(2) belongs to no namespace until
//!   move_mount(2) attaches it, and its descriptor keeps it usable
//!   (`/proc/self/fd/N/...` walks into it) until the last reference goes;
//! - the layers are named by `/proc/self/fd/N` of directories this process
//!   opened, so the lower layer is the very directory that was checked,
//!   whatever its path holds by then (a magic link resolves to the open
//!   file, proc(5)).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};

use nix::libc::{self, c_char, c_int, c_uint};

const FSOPEN_CLOEXEC: c_uint = 1;
const FSCONFIG_SET_FLAG: c_uint = 0;
const FSCONFIG_SET_STRING: c_uint = 1;
const FSCONFIG_CMD_CREATE: c_uint = 6;
const FSMOUNT_CLOEXEC: c_uint = 1;
/// `MOUNT_ATTR_NODEV` (linux/mount.h): no device file is opened through
/// the mount, as for every writable root (`child::read_only_tree`).
const MOUNT_ATTR_NODEV: c_uint = 0x4;

/// The messages the kernel left on a file-system context (fsopen(2):
/// reading the descriptor returns them one at a time, `e ...` for errors),
/// joined by `; `.
fn context_messages(fs: &OwnedFd) -> String {
    let mut out = Vec::new();
    let mut buf = [0u8; 512];
    loop {
        // SAFETY: read into a buffer we own, at most its length.
        let n = unsafe { libc::read(fs.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n <= 0 {
            break;
        }
        let line = String::from_utf8_lossy(&buf[..n as usize]);
        out.push(
            line.trim_start_matches(['e', 'w', 'i', ' '])
                .trim()
                .to_string(),
        );
    }
    out.join("; ")
}

fn set(fs: &OwnedFd, cmd: c_uint, key: &str, value: Option<&str>) -> io::Result<()> {
    let key = CString::new(key).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let value = value
        .map(CString::new)
        .transpose()
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let value_ptr = value
        .as_ref()
        .map_or(std::ptr::null::<c_char>(), |v| v.as_ptr());
    // SAFETY: fsconfig with our descriptor and C strings that outlive the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_fsconfig,
            fs.as_raw_fd(),
            cmd,
            if cmd == FSCONFIG_CMD_CREATE {
                std::ptr::null()
            } else {
                key.as_ptr()
            },
            value_ptr,
            0 as c_int,
        )
    };
    if rc == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// A detached overlay mount over `lower` with `upper` and `work` (three
/// directories this process holds open; `upper` and `work` on one file
/// system, empty at first), `nodev`. Its descriptor is the mount's root.
///
/// # Errors
/// ENOSYS on a kernel without the new mount API, ENODEV without overlayfs,
/// EPERM without CAP_SYS_ADMIN, and the kernel's own message (an upper
/// file system without xattrs or whiteouts, say) in the error's text.
pub(crate) fn mount(lower: &impl AsFd, upper: &impl AsFd, work: &impl AsFd) -> io::Result<OwnedFd> {
    // SAFETY: fsopen with a literal name; the descriptor is ours.
    let fs = unsafe { libc::syscall(libc::SYS_fsopen, c"overlay".as_ptr(), FSOPEN_CLOEXEC) };
    if fs < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor, owned by nobody else.
    let fs = unsafe { OwnedFd::from_raw_fd(fs as c_int) };
    let path = |fd: &dyn AsFd| format!("/proc/self/fd/{}", fd.as_fd().as_raw_fd());
    let with_messages = |e: io::Error| {
        let said = context_messages(&fs);
        if said.is_empty() {
            e
        } else {
            io::Error::new(e.kind(), format!("{e}: {said}"))
        }
    };
    set(&fs, FSCONFIG_SET_STRING, "lowerdir", Some(&path(lower))).map_err(with_messages)?;
    set(&fs, FSCONFIG_SET_STRING, "upperdir", Some(&path(upper))).map_err(with_messages)?;
    set(&fs, FSCONFIG_SET_STRING, "workdir", Some(&path(work))).map_err(with_messages)?;
    for (key, value) in [
        ("redirect_dir", "off"),
        ("metacopy", "off"),
        ("index", "off"),
    ] {
        set(&fs, FSCONFIG_SET_STRING, key, Some(value)).map_err(with_messages)?;
    }
    // No sync of the upper file system at unmount (`volatile`, Linux 5.10):
    // a run's unmount otherwise waits for the upper file system's journal
    // (about 20 ms here). The upper layer is read back right after, never
    // mounted again; like the files any unconfined command writes, it is
    // as durable as the page cache until the kernel writes it back.
    if let Err(e) = set(&fs, FSCONFIG_SET_FLAG, "volatile", None) {
        // A kernel before 5.10: the sync stays.
        if e.raw_os_error() != Some(libc::EINVAL) {
            return Err(with_messages(e));
        }
    }
    set(&fs, FSCONFIG_CMD_CREATE, "", None).map_err(with_messages)?;
    // SAFETY: fsmount of our configured context.
    let mnt = unsafe {
        libc::syscall(
            libc::SYS_fsmount,
            fs.as_raw_fd(),
            FSMOUNT_CLOEXEC,
            MOUNT_ATTR_NODEV,
        )
    };
    if mnt < 0 {
        return Err(with_messages(io::Error::last_os_error()));
    }
    // SAFETY: a new descriptor, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(mnt as c_int) })
}
