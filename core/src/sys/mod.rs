//! The one place that talks to the kernel: every `unsafe` block and raw
//! system call of the core lives under this module, each wrapper written
//! once, with the man page or kernel document it relies on.
//!
//! Where `rustix` or `nix` offers a call, the wrapper uses it; a call that
//! stays raw says why beside it. The rest of the crate is
//! `#![deny(unsafe_code)]` (`lib.rs`), and this module alone allows it.
//!
//! - [`caps`]: capability sets (capget(2), capset(2));
//! - [`pidfd`]: process descriptors (pidfd_open(2), pidfd_send_signal(2),
//!   pidfd_getfd(2)) and waitid(2) without reaping;
//! - [`procfs`]: the `/proc` files read (proc_pid_stat(5),
//!   `task/TID/children`, proc_pid_mountinfo(5)), one parser each;
//! - [`notif`]: the seccomp user-notification ABI (seccomp_unotify(2))
//!   and reading a notifying task's memory; [`sockdiag`]: which Unix
//!   sockets exist and where they are bound (sock_diag(7));
//! - [`fs`]: calls relative to directory descriptors (openat2(2),
//!   fstatat(2), renameat2(2), statx(2)) and the gate's metadata changes
//!   on a pinned inode; [`sock`]: socket calls on raw address bytes;
//! - [`landlock`]: the Landlock ABI query and path rules on an open
//!   descriptor (landlock(7));
//! - [`spawn`]: clone3(2) of the command, and [`child`], the literal code
//!   the child runs between clone and execve(2) (async-signal-safe only).

pub(crate) mod caps;
pub(crate) mod child;
pub(crate) mod environ;
pub(crate) mod fs;
pub(crate) mod landlock;
pub(crate) mod notif;
pub(crate) mod overlay;
pub(crate) mod pidfd;
pub(crate) mod procfs;
pub(crate) mod sock;
pub(crate) mod sockdiag;
pub(crate) mod spawn;
pub(crate) mod watchdog;

use std::io;
use std::os::fd::AsFd;
use std::path::PathBuf;

/// The path an open descriptor names (`/proc/self/fd/N`, proc(5)).
pub(crate) fn fd_path(fd: &impl AsFd) -> io::Result<PathBuf> {
    use std::os::fd::AsRawFd;
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_fd().as_raw_fd()))
}

/// Waits up to `timeout_ms` milliseconds (-1: no limit) for `events` on
/// descriptor `fd` (poll(2), one pollfd): poll's return value (1 when an
/// event came, 0 on the timeout, -1 on an error such as EINTR) and the
/// events returned.
pub(crate) fn poll_one(fd: std::os::fd::RawFd, events: i16, timeout_ms: i32) -> (i32, i16) {
    let mut p = nix::libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    // SAFETY: one pollfd we own, for the duration of the call.
    let n = unsafe { nix::libc::poll(&mut p, 1, timeout_ms) };
    (n, p.revents)
}

/// Fills `buf` from the kernel's random source (getrandom(2), flags 0:
/// blocks only until the pool is first initialized, early at boot). Errors
/// when fewer bytes came (unreachable on Linux 3.17+ for 256 bytes or
/// fewer).
pub(crate) fn random_bytes(buf: &mut [u8]) -> io::Result<()> {
    // SAFETY: getrandom writes at most `buf.len()` bytes into our buffer.
    let n = unsafe { nix::libc::getrandom(buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n == buf.len() as isize {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Restores SIGCHLD's default disposition (sigaction(2), `SIG_DFL`): a
/// parent that ignored it would make children's statuses unobtainable
/// (waitid(2) then fails with ECHILD).
pub(crate) fn default_sigchld() {
    use nix::sys::signal::{SigHandler, Signal, signal};
    // SAFETY: the default disposition installs no handler code.
    let _ = unsafe { signal(Signal::SIGCHLD, SigHandler::SigDfl) };
}

/// Restores the default disposition (sigaction(2), `SIG_DFL`: end the
/// process) of `signals`.
pub(crate) fn default_dispositions(signals: &[nix::sys::signal::Signal]) {
    use nix::sys::signal::{SigHandler, signal};
    for sig in signals {
        // SAFETY: the default disposition installs no handler code.
        let _ = unsafe { signal(*sig, SigHandler::SigDfl) };
    }
}

/// Sets a terminal's window size (ioctl_tty(2) `TIOCSWINSZ`); false when
/// the descriptor is no terminal or is gone.
pub(crate) fn set_window_size(tty: &impl AsFd, rows: u16, cols: u16) -> bool {
    use std::os::fd::AsRawFd;
    let size = nix::libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads the winsize we own.
    unsafe { nix::libc::ioctl(tty.as_fd().as_raw_fd(), nix::libc::TIOCSWINSZ, &size) == 0 }
}

/// Bytes waiting to be read in a pipe or socket (ioctl(2) `FIONREAD`,
/// pipe(7), unix(7)); `None` when the kernel does not say.
pub(crate) fn bytes_readable(fd: &impl AsFd) -> Option<usize> {
    use std::os::fd::AsRawFd;
    let mut n: nix::libc::c_int = 0;
    // SAFETY: FIONREAD writes the int we own.
    let rc = unsafe { nix::libc::ioctl(fd.as_fd().as_raw_fd(), nix::libc::FIONREAD, &mut n) };
    (rc == 0).then_some(n.max(0) as usize)
}

/// Takes ownership of descriptor `fd`, inherited from the process that
/// started this one, if it is open and a socket (fstat(2)); `None` else.
/// The caller must be the only code that uses `fd`: the launcher put it
/// there for it alone.
pub(crate) fn take_inherited_socket(fd: std::os::fd::RawFd) -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    let st = fs::fstat(&fd).ok()?;
    if st.st_mode & nix::libc::S_IFMT != nix::libc::S_IFSOCK {
        return None;
    }
    // SAFETY: `fd` is open (fstat succeeded), a socket, and by the
    // contract above owned by nobody else in this process.
    Some(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

/// Takes ownership of descriptor `fd`, inherited from the process that
/// started this one, if it is open (fcntl(2) `F_GETFD`); `None` else. For
/// `--credential NAME=fd:N`: the caller hands descriptor N to dsh-exec
/// alone, which reads it once and closes it.
pub(crate) fn take_inherited_fd(fd: std::os::fd::RawFd) -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: `fd` is only queried; F_GETFD fails with EBADF when it is
    // not open.
    if fd < 0 || unsafe { nix::libc::fcntl(fd, nix::libc::F_GETFD) } < 0 {
        return None;
    }
    // SAFETY: `fd` is open, and by the contract above owned by nobody
    // else in this process.
    Some(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

/// Whether the kernel has mount_setattr(2) (Linux 5.12): called with no
/// descriptor, it fails with EBADF where it exists and ENOSYS where not.
pub(crate) fn mount_setattr_available() -> bool {
    // SAFETY: a system call with integer arguments and null pointers.
    let rc = unsafe {
        nix::libc::syscall(
            nix::libc::SYS_mount_setattr,
            -1,
            std::ptr::null::<nix::libc::c_char>(),
            0,
            std::ptr::null::<nix::libc::c_void>(),
            0,
        )
    };
    rc == -1 && nix::errno::Errno::last() != nix::errno::Errno::ENOSYS
}
