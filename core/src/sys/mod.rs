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
//! - [`spawn`]: clone3(2) of the command, and [`child`], the literal code
//!   the child runs between clone and execve(2) (async-signal-safe only).

pub(crate) mod caps;
pub(crate) mod child;
pub(crate) mod notif;
pub(crate) mod pidfd;
pub(crate) mod procfs;
pub(crate) mod sock;
pub(crate) mod sockdiag;
pub(crate) mod spawn;

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
