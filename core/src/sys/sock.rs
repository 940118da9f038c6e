//! Socket calls on raw address bytes, for the gate, which performs a
//! confined task's socket calls on its own duplicate of the task's socket
//! with the address it copied and judged (socket(7), ip(7), unix(7)).
//!
//! Addresses stay the bytes of a `struct sockaddr_*` as the task passed
//! them, so that what was judged is exactly what is used. Each call
//! returns the kernel's result, or the errno to answer the task with.

use std::os::fd::{AsRawFd, RawFd};

use nix::libc;

/// The current errno (EIO if there is none).
pub(crate) fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// A system call's return value, or the errno when it is negative.
pub(crate) fn result(rc: isize) -> Result<i64, i32> {
    if rc < 0 { Err(errno()) } else { Ok(rc as i64) }
}

/// A socket option read into a `T` (getsockopt(2)), or the errno. `T` is
/// plain data the kernel fills (an int, a `timeval`, a `ucred`).
fn get_option<T: Copy>(sock: &impl AsRawFd, level: i32, name: i32, mut v: T) -> Result<T, i32> {
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes (the size of `T`)
    // into the value we own; every `T` used here is plain data for which
    // any bytes are a valid value.
    let rc =
        unsafe { libc::getsockopt(sock.as_raw_fd(), level, name, (&raw mut v).cast(), &mut len) };
    if rc == 0 { Ok(v) } else { Err(errno()) }
}

/// Sets a socket option from a `T` (setsockopt(2)), or the errno.
fn set_option<T: Copy>(sock: &impl AsRawFd, level: i32, name: i32, v: T) -> Result<(), i32> {
    // SAFETY: setsockopt reads `size_of::<T>()` bytes of the value we own.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            level,
            name,
            (&raw const v).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if rc == 0 { Ok(()) } else { Err(errno()) }
}

/// An int-valued socket option (getsockopt(2)), or the errno.
pub(crate) fn get_int(sock: &impl AsRawFd, level: i32, name: i32) -> Result<i32, i32> {
    get_option(sock, level, name, 0 as libc::c_int)
}

/// Sets an int-valued socket option (setsockopt(2)), or the errno.
pub(crate) fn set_int(sock: &impl AsRawFd, level: i32, name: i32, v: i32) -> Result<(), i32> {
    set_option(sock, level, name, v as libc::c_int)
}

/// The send timeout of a socket (`SO_SNDTIMEO`, socket(7)), or `None`.
pub(crate) fn send_timeout(sock: &impl AsRawFd) -> Option<libc::timeval> {
    let zero = libc::timeval {
        tv_sec: 0,
        tv_usec: 0,
    };
    get_option(sock, libc::SOL_SOCKET, libc::SO_SNDTIMEO, zero).ok()
}

/// Sets the send timeout of a socket; false when it could not be set.
pub(crate) fn set_send_timeout(sock: &impl AsRawFd, tv: libc::timeval) -> bool {
    set_option(sock, libc::SOL_SOCKET, libc::SO_SNDTIMEO, tv).is_ok()
}

/// The pid of a connected Unix socket's peer (`SO_PEERCRED`, unix(7)), as
/// it was when the connection was made.
pub(crate) fn peer_pid(sock: &impl AsRawFd) -> Option<i32> {
    let none = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    get_option(sock, libc::SOL_SOCKET, libc::SO_PEERCRED, none)
        .ok()
        .map(|c| c.pid)
        .filter(|pid| *pid > 0)
}

/// The address a socket is bound to (getsockname(2)), at most `max` bytes.
pub(crate) fn local_address(sock: &impl AsRawFd, max: usize) -> Option<Vec<u8>> {
    let mut storage = vec![0u8; max];
    let mut len = max as libc::socklen_t;
    // SAFETY: getsockname writes at most `len` bytes into our buffer.
    let rc = unsafe { libc::getsockname(sock.as_raw_fd(), storage.as_mut_ptr().cast(), &mut len) };
    if rc != 0 {
        return None;
    }
    storage.truncate((len as usize).min(max));
    Some(storage)
}

/// bind(2) to the address `addr`.
pub(crate) fn bind(sock: &impl AsRawFd, addr: &[u8]) -> Result<i64, i32> {
    // SAFETY: the kernel reads `addr.len()` bytes of our buffer.
    let rc = unsafe {
        libc::bind(
            sock.as_raw_fd(),
            addr.as_ptr().cast(),
            addr.len() as libc::socklen_t,
        )
    };
    result(rc as isize)
}

/// connect(2) to the address `addr`.
pub(crate) fn connect(sock: &impl AsRawFd, addr: &[u8]) -> Result<i64, i32> {
    // SAFETY: the kernel reads `addr.len()` bytes of our buffer.
    let rc = unsafe {
        libc::connect(
            sock.as_raw_fd(),
            addr.as_ptr().cast(),
            addr.len() as libc::socklen_t,
        )
    };
    result(rc as isize)
}

/// listen(2).
pub(crate) fn listen(sock: &impl AsRawFd, backlog: i32) -> Result<i64, i32> {
    // SAFETY: integer arguments only.
    let rc = unsafe { libc::listen(sock.as_raw_fd(), backlog) };
    result(rc as isize)
}

/// shutdown(2) both ways; errors are ignored (the socket may be gone).
/// A listening socket shut down wakes its accept(2) with EINVAL.
pub(crate) fn shutdown(sock: RawFd) {
    // SAFETY: integer arguments only; a closed descriptor gives EBADF.
    unsafe { libc::shutdown(sock, libc::SHUT_RDWR) };
}

/// sendto(2) of `data` to `addr` (a non-null pointer even when empty, as
/// the task passed it).
pub(crate) fn send_to(
    sock: &impl AsRawFd,
    data: &[u8],
    flags: i32,
    addr: &[u8],
) -> Result<i64, i32> {
    let (name, len) = (addr.as_ptr(), addr.len() as libc::socklen_t);
    // SAFETY: the kernel reads `data` and `addr`, buffers we own.
    let rc = unsafe {
        libc::sendto(
            sock.as_raw_fd(),
            data.as_ptr().cast(),
            data.len(),
            flags,
            name.cast(),
            len,
        )
    };
    result(rc)
}

/// sendmsg(2) of one buffer, with the address `addr` (`None`: none) and the
/// ancillary data `control` (empty: none), its bytes as the task laid them
/// out (cmsg(3)).
pub(crate) fn send_message(
    sock: &impl AsRawFd,
    data: &mut [u8],
    addr: Option<&[u8]>,
    control: &mut [u8],
    flags: i32,
) -> Result<i64, i32> {
    let mut iov = libc::iovec {
        iov_base: data.as_mut_ptr().cast(),
        iov_len: data.len(),
    };
    // SAFETY: a zeroed msghdr whose pointers go into buffers we own, all of
    // which outlive the call.
    let rc = unsafe {
        let mut h: libc::msghdr = std::mem::zeroed();
        if let Some(addr) = addr {
            h.msg_name = addr.as_ptr() as *mut libc::c_void;
            h.msg_namelen = addr.len() as libc::socklen_t;
        }
        h.msg_iov = &mut iov;
        h.msg_iovlen = 1;
        if !control.is_empty() {
            h.msg_control = control.as_mut_ptr().cast();
            h.msg_controllen = control.len();
        }
        libc::sendmsg(sock.as_raw_fd(), &h, flags)
    };
    result(rc)
}

/// The IPv4 and IPv6 addresses of this host's interfaces (getifaddrs(3)),
/// in the order listed; empty when the list cannot be had. Raw: nix wraps
/// getifaddrs only with its `net` feature, which brings a crate more.
pub(crate) fn interface_addresses() -> Vec<std::net::IpAddr> {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    let mut out = Vec::new();
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs allocates a list we walk and then free; each
    // address is read per its family's structure (sockaddr_in for AF_INET,
    // sockaddr_in6 for AF_INET6).
    unsafe {
        if libc::getifaddrs(&mut head) != 0 {
            return out;
        }
        let mut at = head;
        while !at.is_null() {
            let a = (*at).ifa_addr;
            if !a.is_null() {
                match i32::from((*a).sa_family) {
                    libc::AF_INET => {
                        let sin = &*(a as *const libc::sockaddr_in);
                        out.push(IpAddr::V4(Ipv4Addr::from(u32::from_be(
                            sin.sin_addr.s_addr,
                        ))));
                    }
                    libc::AF_INET6 => {
                        let sin6 = &*(a as *const libc::sockaddr_in6);
                        out.push(IpAddr::V6(Ipv6Addr::from(sin6.sin6_addr.s6_addr)));
                    }
                    _ => {}
                }
            }
            at = (*at).ifa_next;
        }
        libc::freeifaddrs(head);
    }
    out
}
