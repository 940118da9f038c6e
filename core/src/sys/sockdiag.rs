//! Which Unix sockets exist, and who holds them: the kernel's own answer,
//! from sock_diag(7) (`NETLINK_SOCK_DIAG`, `SOCK_DIAG_BY_FAMILY` with
//! `AF_UNIX`, linux/unix_diag.h).
//!
//! What it relies on from the kernel: a dump lists every Unix socket of the
//! requester's network namespace with its inode number (the number
//! `/proc/PID/fd/N` shows as `socket:[N]`), its state, the name it is
//! bound to exactly as bound (`UNIX_DIAG_NAME`: an abstract name with its
//! leading NUL, never rewritten), and for a pathname socket the device and
//! inode of the socket file (`UNIX_DIAG_VFS`). So a socket is identified by
//! what it is, never by how `/proc/net/unix` prints its name (where a
//! pathname socket bound at `@x` looks like the abstract `\0x`).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use nix::libc;

/// `SOCK_DIAG_BY_FAMILY` (linux/sock_diag.h).
const SOCK_DIAG_BY_FAMILY: u16 = 20;
/// `UDIAG_SHOW_NAME`, `UDIAG_SHOW_VFS` (linux/unix_diag.h).
const UDIAG_SHOW_NAME: u32 = 0x01;
const UDIAG_SHOW_VFS: u32 = 0x02;
/// Attribute types of a reply: `UNIX_DIAG_NAME`, `UNIX_DIAG_VFS`.
const UNIX_DIAG_NAME: u16 = 0;
const UNIX_DIAG_VFS: u16 = 1;

/// One Unix socket as the kernel lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UnixSocket {
    /// The socket's inode number (`socket:[N]`).
    pub(crate) inode: u32,
    /// The name it is bound to, as bound (abstract: leading NUL).
    pub(crate) name: Option<Vec<u8>>,
    /// The socket file of a pathname socket: (major, minor, inode).
    pub(crate) file: Option<(u32, u32, u32)>,
}

/// Every Unix socket of this process's network namespace that is bound to
/// a name. Errors when sock_diag is unavailable (no `CONFIG_UNIX_DIAG`).
pub(crate) fn bound_unix_sockets() -> io::Result<Vec<UnixSocket>> {
    // SAFETY: socket(2) returns a new descriptor or -1.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_SOCK_DIAG,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor we own.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    // struct nlmsghdr (16 bytes) + struct unix_diag_req (24 bytes).
    let mut req = Vec::with_capacity(40);
    req.extend_from_slice(&40u32.to_ne_bytes());
    req.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    req.extend_from_slice(&((libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16).to_ne_bytes());
    req.extend_from_slice(&1u32.to_ne_bytes()); // seq
    req.extend_from_slice(&0u32.to_ne_bytes()); // pid
    req.push(libc::AF_UNIX as u8); // sdiag_family
    req.push(0); // sdiag_protocol
    req.extend_from_slice(&0u16.to_ne_bytes()); // pad
    req.extend_from_slice(&u32::MAX.to_ne_bytes()); // udiag_states: all
    req.extend_from_slice(&0u32.to_ne_bytes()); // udiag_ino: any
    req.extend_from_slice(&(UDIAG_SHOW_NAME | UDIAG_SHOW_VFS).to_ne_bytes());
    req.extend_from_slice(&u32::MAX.to_ne_bytes()); // cookie
    req.extend_from_slice(&u32::MAX.to_ne_bytes());
    // SAFETY: sends our buffer on our socket (to the kernel: address 0).
    let sent = unsafe { libc::send(sock.as_raw_fd(), req.as_ptr().cast(), req.len(), 0) };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut found = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        // SAFETY: receives into our buffer.
        let n = unsafe { libc::recv(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = n as usize;
        if n == 0 {
            return Ok(found);
        }
        if parse_messages(&buf[..n], &mut found)? {
            return Ok(found);
        }
    }
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Parses one datagram of netlink messages into `found`; true at the end
/// of the dump (`NLMSG_DONE`). Errors on `NLMSG_ERROR` or a malformed
/// message.
fn parse_messages(mut b: &[u8], found: &mut Vec<UnixSocket>) -> io::Result<bool> {
    let bad = || io::Error::new(io::ErrorKind::InvalidData, "malformed sock_diag reply");
    while b.len() >= 16 {
        let len = u32_at(b, 0) as usize;
        let kind = u16_at(b, 4);
        if len < 16 || len > b.len() {
            return Err(bad());
        }
        match kind {
            k if k == libc::NLMSG_DONE as u16 => return Ok(true),
            k if k == libc::NLMSG_ERROR as u16 => {
                let errno = if len >= 20 {
                    -(u32_at(b, 16) as i32)
                } else {
                    libc::EIO
                };
                return Err(io::Error::from_raw_os_error(errno));
            }
            _ => {
                // struct unix_diag_msg: family, type, state, pad, ino,
                // cookie[2] (16 bytes), then attributes.
                let msg = &b[16..len];
                if msg.len() < 16 {
                    return Err(bad());
                }
                let mut s = UnixSocket {
                    inode: u32_at(msg, 4),
                    name: None,
                    file: None,
                };
                let mut attrs = &msg[16..];
                while attrs.len() >= 4 {
                    let alen = u16_at(attrs, 0) as usize;
                    let atype = u16_at(attrs, 2);
                    if alen < 4 || alen > attrs.len() {
                        return Err(bad());
                    }
                    let data = &attrs[4..alen];
                    match atype {
                        UNIX_DIAG_NAME => s.name = Some(data.to_vec()),
                        UNIX_DIAG_VFS if data.len() >= 8 => {
                            // struct unix_diag_vfs: vfs_ino, vfs_dev (the
                            // kernel's dev_t: major << 20 | minor).
                            let dev = u32_at(data, 4);
                            s.file = Some((dev >> 20, dev & 0xf_ffff, u32_at(data, 0)));
                        }
                        _ => {}
                    }
                    let step = (alen + 3) & !3;
                    attrs = &attrs[step.min(attrs.len())..];
                }
                if s.name.is_some() {
                    found.push(s);
                }
            }
        }
        let step = (len + 3) & !3;
        b = &b[step.min(b.len())..];
    }
    Ok(false)
}

/// The inodes of the bound sockets whose socket file is (device, inode)
/// `file`, as stat(2) gives them.
pub(crate) fn bound_to_file(sockets: &[UnixSocket], file: (u64, u64)) -> Vec<u32> {
    let (major, minor) = (libc::major(file.0), libc::minor(file.0));
    sockets
        .iter()
        .filter(|s| s.file == Some((major, minor, file.1 as u32)))
        .map(|s| s.inode)
        .collect()
}

/// The inodes of the sockets bound to the abstract `name` (its first byte
/// the NUL), byte for byte.
pub(crate) fn bound_to_name(sockets: &[UnixSocket], name: &[u8]) -> Vec<u32> {
    sockets
        .iter()
        .filter(|s| s.file.is_none() && s.name.as_deref() == Some(name))
        .map(|s| s.inode)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    #[test]
    fn a_listener_is_found_by_its_file_and_not_by_a_lookalike_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let ino = {
            let link = std::fs::read_link(format!("/proc/self/fd/{}", listener.as_raw_fd()));
            let link = link.unwrap().to_string_lossy().into_owned();
            link.trim_start_matches("socket:[")
                .trim_end_matches(']')
                .parse::<u32>()
                .unwrap()
        };
        let st = nix::sys::stat::stat(&path).unwrap();
        let all = bound_unix_sockets().unwrap();
        assert_eq!(bound_to_file(&all, (st.st_dev, st.st_ino)), vec![ino]);
        // Its path, taken as an abstract name, names nothing.
        let mut name = vec![0u8];
        name.extend_from_slice(path.as_os_str().as_encoded_bytes());
        assert!(bound_to_name(&all, &name).is_empty());
    }
}
