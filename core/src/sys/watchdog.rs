//! The watchdog: a small process that kills a run's process group (and its
//! cgroup, where it has one) when `dsh-exec` dies without ending the run
//! itself: `kill -9` of `dsh-exec`, an OOM kill, a crash. Only the command's
//! direct child has the parent-death signal (prctl(2)
//! `PR_SET_PDEATHSIG`); the rest of its tree would run on, reparented to
//! init.
//!
//! The watchdog is forked from `dsh-exec` before the command is spawned (so
//! the sweep, which excludes the children `dsh-exec` had before the spawn,
//! never takes it for one of the command's), closes every descriptor but
//! the read end of a pipe (and the cgroup's `cgroup.kill`), leaves
//! `dsh-exec`'s session (setsid(2): a signal to `dsh-exec`'s process group
//! from a terminal or a CI runner does not reach it) and keeps every signal
//! blocked. `dsh-exec` writes the command's process-group id into the pipe
//! once it is spawned, and kills the watchdog (SIGKILL) when the run has
//! ended and its tree is gone. End of file on the pipe means `dsh-exec` is
//! gone (the kernel
//! closes a dead process's descriptors: the pipe's last write end): the
//! watchdog then sends SIGKILL to the process group (kill(2) with a negative
//! pid) and writes `1` to `cgroup.kill` (Linux 5.14, cgroups(7): every
//! process of the cgroup, forks in flight included). A descendant that left
//! the process group (setsid(2)) is reached only through the cgroup.
//!
//! Between fork and exit the watchdog makes only system calls (no
//! allocation, no lock): the fork copied one thread of a process that may
//! hold locks in others.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use nix::libc;

/// A running watchdog (see the module documentation).
#[derive(Debug)]
pub(crate) struct Watchdog {
    pid: libc::pid_t,
    /// The pipe's write end: `P` + the group id.
    tx: Option<OwnedFd>,
}

impl Watchdog {
    /// Forks the watchdog; `cgroup_kill`: the run's `cgroup.kill`, opened
    /// for writing. Errors when pipe2(2) or fork(2) fail.
    pub(crate) fn start(cgroup_kill: Option<BorrowedFd>) -> io::Result<Watchdog> {
        let mut fds = [-1 as libc::c_int; 2];
        // SAFETY: pipe2 fills the array we own.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } == -1 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: two descriptors pipe2 has just made, owned here only.
        let (rx, tx) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let kill_fd = cgroup_kill.map_or(-1, |f| f.as_raw_fd());
        // SAFETY: every signal is blocked around fork(2), so no handler of
        // this process runs in the child (which keeps them blocked); the
        // child runs `watch`, system calls only, and never returns.
        let pid = unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
            let pid = libc::fork();
            if pid == 0 {
                watch(rx.as_raw_fd(), kill_fd);
            }
            let errno = *libc::__errno_location();
            libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
            *libc::__errno_location() = errno;
            pid
        };
        if pid == -1 {
            return Err(io::Error::last_os_error());
        }
        drop(rx);
        Ok(Watchdog { pid, tx: Some(tx) })
    }

    /// The command's process group is `pgid`: the one to kill.
    pub(crate) fn arm(&self, pgid: i32) {
        let mut msg = [0u8; 5];
        msg[0] = b'P';
        msg[1..].copy_from_slice(&pgid.to_ne_bytes());
        self.send(&msg);
    }

    fn send(&self, msg: &[u8]) {
        if let Some(tx) = &self.tx {
            // SAFETY: a write of a buffer we own to our pipe; the pipe's
            // capacity (64 KiB) holds the 5 bytes ever sent.
            unsafe {
                libc::write(tx.as_raw_fd(), msg.as_ptr().cast(), msg.len());
            }
        }
    }

    /// The run has ended and its tree is gone: the watchdog is killed
    /// (SIGKILL, before its pipe closes, so it never acts) and reaped. It
    /// is this process's child, unreaped until then: its pid cannot have
    /// been reused.
    pub(crate) fn stand_down(&mut self) {
        if self.tx.is_none() {
            return;
        }
        // SAFETY: kill and waitpid of our own unreaped child.
        unsafe {
            libc::kill(self.pid, libc::SIGKILL);
            while libc::waitpid(self.pid, std::ptr::null_mut(), 0) == -1
                && *libc::__errno_location() == libc::EINTR
            {}
        }
        self.tx = None;
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.stand_down();
    }
}

/// The watchdog's life, in the forked child: never returns.
///
/// # Safety
/// Only in the child of fork(2); `rx` and `kill_fd` (or -1) are open.
unsafe fn watch(rx: libc::c_int, kill_fd: libc::c_int) -> ! {
    // SAFETY: close_range, setsid, prctl, read, kill, write and _exit on
    // descriptors and buffers of this frame.
    unsafe {
        // Every descriptor but these two: the watchdog must hold no pipe
        // of the command (its output would never end) and no write end
        // of its own pipe.
        let (lo, hi) = if kill_fd >= 0 {
            (rx.min(kill_fd), rx.max(kill_fd))
        } else {
            (rx, rx)
        };
        let close = |from: libc::c_int, to: libc::c_uint| {
            if from >= 0 && (from as libc::c_uint) <= to {
                libc::syscall(libc::SYS_close_range, from as libc::c_uint, to, 0u32);
            }
        };
        if lo > 0 {
            close(0, (lo - 1) as libc::c_uint);
        }
        if hi > lo + 1 {
            close(lo + 1, (hi - 1) as libc::c_uint);
        }
        close(hi + 1, libc::c_uint::MAX);
        libc::setsid();
        libc::prctl(libc::PR_SET_NAME, c"dsh-exec-watch".as_ptr());
        let mut pgid: libc::pid_t = 0;
        let mut buf = [0u8; 8];
        let mut have = 0usize;
        loop {
            let n = libc::read(rx, buf[have..].as_mut_ptr().cast(), buf.len() - have);
            if n == -1 && *libc::__errno_location() == libc::EINTR {
                continue;
            }
            if n <= 0 {
                // dsh-exec is gone without ending the run.
                if pgid > 1 {
                    libc::kill(-pgid, libc::SIGKILL);
                }
                if kill_fd >= 0 {
                    libc::write(kill_fd, b"1".as_ptr().cast(), 1);
                }
                libc::_exit(0);
            }
            have += n as usize;
            while have > 0 {
                match buf[0] {
                    b'P' if have >= 5 => {
                        pgid = i32::from_ne_bytes([buf[1], buf[2], buf[3], buf[4]]);
                        buf.copy_within(5..have, 0);
                        have -= 5;
                    }
                    b'P' => break,
                    // Nothing else is ever sent.
                    _ => libc::_exit(0),
                }
            }
        }
    }
}
