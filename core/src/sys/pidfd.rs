//! Process descriptors: a pidfd names one process (or thread) for its whole
//! life and never follows its pid to a new process (pidfd_open(2), since
//! Linux 5.3). Also waitid(2) without reaping.

use std::io;
use std::os::fd::{AsFd, OwnedFd, RawFd};

use rustix::process::{
    Pid, PidfdFlags, PidfdGetfdFlags, WaitId, WaitIdOptions, pidfd_getfd, pidfd_open, waitid,
};

/// `PIDFD_THREAD` (include/uapi/linux/pidfd.h, Linux 6.9): a pidfd for one
/// thread rather than a thread-group leader. The header defines it as
/// `O_EXCL`; rustix names only `PIDFD_NONBLOCK`.
const PIDFD_THREAD: u32 = nix::libc::O_EXCL as u32;

fn pid(raw: i32) -> io::Result<Pid> {
    Pid::from_raw(raw).ok_or_else(|| io::Error::from_raw_os_error(nix::libc::ESRCH))
}

/// A pidfd for process `pid` (pidfd_open(2)).
pub(crate) fn open(raw: i32) -> io::Result<OwnedFd> {
    Ok(pidfd_open(pid(raw)?, PidfdFlags::empty())?)
}

/// A pidfd for thread `tid` (pidfd_open(2) with `PIDFD_THREAD`).
pub(crate) fn open_thread(tid: i32) -> io::Result<OwnedFd> {
    Ok(pidfd_open(
        pid(tid)?,
        PidfdFlags::from_bits_retain(PIDFD_THREAD),
    )?)
}

/// Sends signal number `sig` to the process `fd` names
/// (pidfd_send_signal(2), no siginfo). True when it was sent; false too
/// for a number that is no standard signal (the sweep sends only those:
/// `--signal` takes names nix knows).
pub(crate) fn send_signal(fd: &impl AsFd, sig: i32) -> bool {
    rustix::process::Signal::from_named_raw(sig)
        .is_some_and(|s| rustix::process::pidfd_send_signal(fd, s).is_ok())
}

/// A duplicate, in this process, of descriptor `target` of the process
/// `pidfd` names (pidfd_getfd(2), Linux 5.6; needs
/// PTRACE_MODE_ATTACH_REALCREDS over it).
pub(crate) fn get_fd(pidfd: RawFd, target: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: `pidfd` is open for the duration of this call (the caller
    // holds it); the borrow ends before the call returns.
    let pidfd = unsafe { std::os::fd::BorrowedFd::borrow_raw(pidfd) };
    Ok(pidfd_getfd(pidfd, target, PidfdGetfdFlags::empty())?)
}

/// How a child ended, as waitid(2) reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// `CLD_EXITED`: it exited with this status.
    Exited(i32),
    /// `CLD_KILLED` or `CLD_DUMPED`: this signal number ended it.
    Killed(i32),
}

/// How child `pid` ended, if it has, leaving it a zombie (waitid(2) with
/// `WEXITED | WNOHANG | WNOWAIT`): its pid stays reserved until it is
/// reaped. Any signal number, real-time ones included, is reported.
pub(crate) fn ended(raw: i32) -> io::Result<Option<Ended>> {
    let options = WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT;
    let Some(status) = waitid(WaitId::Pid(pid(raw)?), options)? else {
        return Ok(None);
    };
    Ok(if status.exited() {
        status.exit_status().map(Ended::Exited)
    } else if status.killed() || status.dumped() {
        status.terminating_signal().map(Ended::Killed)
    } else {
        None
    })
}
