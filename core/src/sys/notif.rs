//! The seccomp user-notification ABI (seccomp_unotify(2)), and reading the
//! memory of the task that made the call.
//!
//! What it relies on from the kernel:
//! - a filter returning `SECCOMP_RET_USER_NOTIF` suspends the calling task
//!   in the system call until the listener answers with
//!   `SECCOMP_IOCTL_NOTIF_SEND` (Linux 5.0); the answer is the call's
//!   return value or `-errno`;
//! - the listener is readable (`POLLIN`) while a notification waits to be
//!   received, and `SECCOMP_IOCTL_NOTIF_RECV` then does not block (a
//!   notification whose task was interrupted meanwhile gives `ENOENT`);
//!   when every task using the filter is gone it reports `POLLHUP`;
//! - `SECCOMP_IOCTL_NOTIF_ID_VALID` tells whether the notification is still
//!   pending, so a pid read from it still names the task that made the
//!   call (checked after every read of its memory or its /proc entries);
//! - when the listener is closed, pending and future notifications fail
//!   with `ENOSYS`: a command that outlives its supervisor is refused
//!   everything the gate decides, never let through.
//!
//! The arguments a notification carries are register values; whatever they
//! point to is read here once ([`read_bytes`], [`read_cstring`]) into this
//! process's memory, and every decision and action uses that copy. The
//! gate never answers "continue" (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`).

use std::io;
use std::os::fd::{AsRawFd, RawFd};

use nix::libc;

/// The longest path the gate reads: `PATH_MAX` (4096 bytes with its NUL).
pub(crate) const PATH_MAX: usize = 4096;

/// One notification as received: its id, the calling task (a thread id in
/// this process's PID namespace), the system call number and its six
/// argument registers.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Notification {
    pub(crate) id: u64,
    pub(crate) tid: i32,
    pub(crate) nr: i64,
    pub(crate) args: [u64; 6],
}

/// The buffer sizes the running kernel uses for its notification structures
/// (`SECCOMP_GET_NOTIF_SIZES`): they may be larger than this build's
/// `struct seccomp_notif`, which must then not be handed to the kernel.
fn notif_sizes() -> io::Result<libc::seccomp_notif_sizes> {
    const SECCOMP_GET_NOTIF_SIZES: libc::c_uint = 3;
    let mut sizes = libc::seccomp_notif_sizes {
        seccomp_notif: 0,
        seccomp_notif_resp: 0,
        seccomp_data: 0,
    };
    // SAFETY: the kernel fills the struct we own.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            SECCOMP_GET_NOTIF_SIZES,
            0,
            &mut sizes as *mut libc::seccomp_notif_sizes,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(sizes)
}

/// Receive and answer notifications on a listener descriptor.
#[derive(Debug)]
pub(crate) struct Abi {
    /// Bytes of the kernel's `struct seccomp_notif`.
    notif_size: usize,
    /// Bytes of the kernel's `struct seccomp_notif_resp`.
    resp_size: usize,
}

impl Abi {
    /// The ABI of the running kernel.
    ///
    /// Errors when the kernel has no user notifications.
    pub(crate) fn new() -> io::Result<Abi> {
        let s = notif_sizes()?;
        Ok(Abi {
            notif_size: usize::from(s.seccomp_notif)
                .max(std::mem::size_of::<libc::seccomp_notif>()),
            resp_size: usize::from(s.seccomp_notif_resp)
                .max(std::mem::size_of::<libc::seccomp_notif_resp>()),
        })
    }

    /// Receives the next notification; `Ok(None)` when none is pending (or
    /// the one that was has been withdrawn: its task was interrupted or
    /// died).
    pub(crate) fn recv(&self, listener: &impl AsRawFd) -> io::Result<Option<Notification>> {
        if !readable(listener.as_raw_fd())? {
            return Ok(None);
        }
        self.recv_ready(listener)
    }

    /// Receives the notification poll(2) has just reported readable.
    pub(crate) fn recv_ready(&self, listener: &impl AsRawFd) -> io::Result<Option<Notification>> {
        let fd = listener.as_raw_fd();
        // Zeroed, as the kernel requires, and as large as it says.
        let mut buf = vec![0u64; self.notif_size.div_ceil(8)];
        // SAFETY: the buffer is at least the kernel's notification size.
        let rc = unsafe { libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_RECV, buf.as_mut_ptr()) };
        if rc != 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::ENOENT) | Some(libc::EINTR) => Ok(None),
                _ => Err(e),
            };
        }
        // SAFETY: the buffer begins with a struct seccomp_notif as filled.
        let n = unsafe { &*(buf.as_ptr() as *const libc::seccomp_notif) };
        Ok(Some(Notification {
            id: n.id,
            tid: n.pid as i32,
            nr: i64::from(n.data.nr),
            args: n.data.args,
        }))
    }

    /// Answers notification `id`: `Ok(value)` is the call's return value,
    /// `Err(errno)` its failure. An answer to a notification whose task is
    /// gone is dropped by the kernel (ENOENT): not an error.
    pub(crate) fn answer(&self, listener: RawFd, id: u64, outcome: Result<i64, i32>) {
        let mut buf = vec![0u64; self.resp_size.div_ceil(8)];
        let (val, error) = match outcome {
            Ok(v) => (v, 0),
            Err(e) => (0, -e),
        };
        // SAFETY: the buffer begins with a struct seccomp_notif_resp, zeroed.
        unsafe {
            let resp = &mut *(buf.as_mut_ptr() as *mut libc::seccomp_notif_resp);
            resp.id = id;
            resp.val = val;
            resp.error = error;
            resp.flags = 0;
            libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_SEND, buf.as_mut_ptr());
        }
    }
}

impl Abi {
    /// Lets the call of notification `id` go on in the kernel as made
    /// (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`, Linux 5.5): seccomp_unotify(2)
    /// warns that the kernel then reads the arguments anew, so it is only
    /// for verdicts that read none of the task's memory.
    pub(crate) fn continue_call(&self, listener: RawFd, id: u64) {
        let mut buf = vec![0u64; self.resp_size.div_ceil(8)];
        // SAFETY: the buffer begins with a struct seccomp_notif_resp, zeroed.
        unsafe {
            let resp = &mut *(buf.as_mut_ptr() as *mut libc::seccomp_notif_resp);
            resp.id = id;
            resp.flags = libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32;
            libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_SEND, buf.as_mut_ptr());
        }
    }
}

/// True while notification `id` is still pending: its task is the one that
/// made the call (seccomp_unotify(2), `SECCOMP_IOCTL_NOTIF_ID_VALID`).
pub(crate) fn still_valid(listener: RawFd, id: u64) -> bool {
    let mut id = id;
    // SAFETY: the ioctl reads the u64 we own.
    unsafe {
        libc::ioctl(
            listener,
            libc::SECCOMP_IOCTL_NOTIF_ID_VALID,
            &mut id as *mut u64,
        ) == 0
    }
}

/// Whether a notification waits on `fd` (poll(2) with no timeout).
/// Errors with `ENOTCONN` once every task using the filter is gone.
fn readable(fd: RawFd) -> io::Result<bool> {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd we own, no timeout.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return if e.raw_os_error() == Some(libc::EINTR) {
            Ok(false)
        } else {
            Err(e)
        };
    }
    if p.revents & libc::POLLIN != 0 {
        return Ok(true);
    }
    if p.revents & (libc::POLLHUP | libc::POLLERR) != 0 {
        return Err(io::Error::from_raw_os_error(libc::ENOTCONN));
    }
    Ok(false)
}

/// Copies `len` bytes at `addr` of task `tid` into this process
/// (process_vm_readv(2); needs the ptrace access a parent has to its
/// children, or CAP_SYS_PTRACE). Errors with EFAULT when not all of it could
/// be read.
pub(crate) fn read_bytes(tid: i32, addr: u64, len: usize) -> Result<Vec<u8>, i32> {
    let mut out = vec![0u8; len];
    if len == 0 {
        return Ok(out);
    }
    let local = libc::iovec {
        iov_base: out.as_mut_ptr().cast(),
        iov_len: len,
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: len,
    };
    // SAFETY: reads into the buffer we own; the remote range is only read.
    let n = unsafe { libc::process_vm_readv(tid, &local, 1, &remote, 1, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EFAULT));
    }
    if n as usize != len {
        return Err(libc::EFAULT);
    }
    Ok(out)
}

/// Copies the NUL-terminated string at `addr` of task `tid` (at most
/// `max` bytes, NUL excluded), reading page by page so that a string that
/// ends just before an unmapped page is still read. Errors with
/// ENAMETOOLONG past `max`, EFAULT for an unreadable address.
pub(crate) fn read_cstring(tid: i32, addr: u64, max: usize) -> Result<Vec<u8>, i32> {
    const PAGE: u64 = 4096;
    let mut out = Vec::new();
    let mut at = addr;
    loop {
        let chunk = (PAGE - at % PAGE) as usize;
        let bytes = read_bytes(tid, at, chunk)?;
        if let Some(end) = bytes.iter().position(|b| *b == 0) {
            out.extend_from_slice(&bytes[..end]);
            return if out.len() > max {
                Err(libc::ENAMETOOLONG)
            } else {
                Ok(out)
            };
        }
        out.extend_from_slice(&bytes);
        if out.len() > max {
            return Err(libc::ENAMETOOLONG);
        }
        at += chunk as u64;
    }
}

/// `SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP` (Linux 6.6): the notifying task and
/// the thread waiting on the listener wake each other on the current CPU,
/// which spares two cross-CPU wake-ups per call: a gate answering tens of
/// thousands of `chmod`s (tar) spends most of its time in them otherwise.
const SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP: u64 = 1;

/// Asks for synchronous wake-ups on `listener` (`SECCOMP_IOCTL_NOTIF_SET_FLAGS`
/// with [`SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP`]). A kernel without it says
/// EINVAL, and the gate works as well, only slower: the result is ignored.
pub(crate) fn sync_wake_up(listener: RawFd) {
    // SAFETY: the flags are the ioctl's argument itself, no pointer.
    unsafe {
        libc::ioctl(
            listener,
            libc::SECCOMP_IOCTL_NOTIF_SET_FLAGS,
            SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP,
        );
    }
}
