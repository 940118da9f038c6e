//! Sockets, decided by the gate: `connect`, `sendto` with an address,
//! `sendmsg` and `sendmmsg`.
//!
//! Landlock (ABI 7 and older) has no right for reaching a pathname Unix
//! socket, and a filter cannot read the address a call passes. So these
//! calls come here, and every one is carried out by this process on the
//! task's own socket (duplicated with pidfd_getfd(2)), with the address and
//! the data copied once from the task's memory: the task cannot swap the
//! address, the data or the descriptor after the check, because the kernel
//! never reads them again.
//!
//! - A pathname Unix socket is reached only when the socket file, resolved
//!   as the task would resolve it and pinned with `O_PATH`, is one of
//!   `--allow-unix-socket`, or is bound to a socket a process of the run
//!   holds (sock_diag(7), [`super::diag`]): the sockets the command makes
//!   itself, never a server's outside the run, wherever its file lies (a
//!   tmux or X11 socket in /tmp, a writable root). The call then goes to
//!   exactly the pinned inode (`/proc/self/fd/PIN`). Everything else gets
//!   EACCES.
//! - An abstract Unix socket is reached only when the run's own processes
//!   hold the socket bound to that name, byte for byte as the kernel lists
//!   it: the rule Landlock's abstract-socket scope (ABI 6) applies to the
//!   task's own calls; after a connect, the peer's credentials
//!   (`SO_PEERCRED`) are checked again, and a peer outside the run is
//!   disconnected at once (ECONNREFUSED).
//! - Descriptors passed in a `SCM_RIGHTS` message are the task's, and are
//!   duplicated into the message this process sends; `SCM_CREDENTIALS`
//!   must name the task itself.
//! - IPv4 and IPv6 under `--network loopback` and `allow=HOSTS`: the
//!   address must be loopback, and the socket must not be bound elsewhere
//!   ([`judge_inet`]); `bind` and `listen` are made here too, narrowing the
//!   unspecified address to loopback. Everything else gets EACCES, with no
//!   packet sent. In `full-access` under these policies, Unix sockets are
//!   let through, but one that reaches a server outside the run takes no
//!   descriptors (`SO_PASSRIGHTS`).
//! - Other families (IPv4, IPv6 under `--network allow`, netlink, ...) are
//!   sent or connected as asked.
//!
//! A call that may block (a blocking socket) runs on a blocking thread and
//! is answered from there, so the supervision loop, its deadline and its
//! aborts never wait on it. The connecting process, as the listener sees it
//! (`SO_PEERCRED`), is `dsh-exec`: same uid and gid, another pid.

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use nix::libc;

use super::table::Trap;
use super::task::{Task, pin_path, stat};
use super::{GatePolicy, Outcome, Reach, Refusal};
use crate::net::addr::{Inet, is_loopback, is_unspecified, loopback_for};
use crate::sandbox::Network;
use crate::sys::notif::read_bytes;
use crate::sys::sock;

/// `NETLINK_AUDIT` (linux/netlink.h).
const NETLINK_AUDIT: i32 = 9;

/// The largest socket address (`struct sockaddr_storage`): 128 bytes.
const SOCKADDR_MAX: usize = 128;

/// The most data one gated send copies: 4 MiB. A stream socket sends at most
/// this much per call (a short write, as a stream socket may make); a
/// larger datagram gets EMSGSIZE.
const SEND_MAX: usize = 4 << 20;

/// The most iovecs and messages one call may carry (`UIO_MAXIOV`).
const UIO_MAXIOV: usize = 1024;

/// The most ancillary data one message may carry: 64 KiB.
const CONTROL_MAX: usize = 64 * 1024;

/// The most data the gate holds for sends not yet done, over all of them:
/// 64 MiB. A send that would go past it fails with EAGAIN, so that a
/// command cannot make dsh-exec hold its memory many times over (one
/// `sendmmsg` of 1,024 times 4 MiB of untouched pages, threads doing it at
/// once).
const IN_FLIGHT_MAX: usize = 64 << 20;

/// The bytes copied for sends not yet done ([`IN_FLIGHT_MAX`]).
static IN_FLIGHT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A share of [`IN_FLIGHT`], given back when the send is done.
struct InFlight(usize);

impl InFlight {
    /// Reserves `bytes`; EAGAIN when that would pass [`IN_FLIGHT_MAX`].
    fn reserve(bytes: usize) -> Result<InFlight, i32> {
        use std::sync::atomic::Ordering;
        let mut now = IN_FLIGHT.load(Ordering::Relaxed);
        loop {
            let next = now.checked_add(bytes).filter(|n| *n <= IN_FLIGHT_MAX);
            let Some(next) = next else {
                return Err(libc::EAGAIN);
            };
            match IN_FLIGHT.compare_exchange_weak(now, next, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return Ok(InFlight(bytes)),
                Err(seen) => now = seen,
            }
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        IN_FLIGHT.fetch_sub(self.0, std::sync::atomic::Ordering::AcqRel);
    }
}

/// A socket address, copied from the task and judged.
struct Dest {
    /// The address to use: the task's, or `/proc/self/fd/PIN` for a pinned
    /// pathname socket.
    bytes: Vec<u8>,
    /// The pinned socket file, kept open while the call is made.
    _pin: Option<OwnedFd>,
    /// An abstract Unix address: the peer is checked after a connect.
    abstract_unix: bool,
    /// An IPv4/IPv6 address judged under `loopback` or `allow-list`.
    inet: bool,
}

/// A `sockaddr_un` naming `path`, or `None` when it does not fit.
fn sockaddr_un(path: &[u8]) -> Option<Vec<u8>> {
    if path.len() >= 108 {
        return None;
    }
    let mut b = (libc::AF_UNIX as u16).to_ne_bytes().to_vec();
    b.extend_from_slice(path);
    b.push(0);
    Some(b)
}

fn family(addr: &[u8]) -> Option<i32> {
    Some(i32::from(u16::from_ne_bytes(
        addr.get(..2)?.try_into().ok()?,
    )))
}

/// An int-valued socket option of `sock` (getsockopt(2)), or the errno.
fn int_opt(sock: &impl AsRawFd, level: i32, name: i32) -> Result<i32, i32> {
    sock::get_int(sock, level, name)
}

/// The `SO_DOMAIN` of a socket.
fn domain(sock: &impl AsRawFd) -> Result<i32, i32> {
    int_opt(sock, libc::SOL_SOCKET, libc::SO_DOMAIN)
}

/// Judges the address `addr` the task passes with a call on `sock`.
fn judge(
    task: &Task,
    sock: &OwnedFd,
    addr: Vec<u8>,
    op: &'static str,
    policy: &GatePolicy,
) -> Result<Dest, i32> {
    let plain = |bytes| {
        Ok(Dest {
            bytes,
            _pin: None,
            abstract_unix: false,
            inet: false,
        })
    };
    let dom = domain(sock)?;
    if policy.network.gated() && (dom == libc::AF_INET || dom == libc::AF_INET6) {
        return judge_inet(sock, dom, addr, op, policy).map(|bytes| Dest {
            bytes,
            _pin: None,
            abstract_unix: false,
            inet: true,
        });
    }
    // The socket's own family decides (an address of another family fails
    // in the kernel as it would for the task).
    // In full-access under loopback and allow-list, Unix sockets are seen
    // only so that no descriptor comes in from a server outside the run.
    let unix_seen = policy.unix_confined || policy.network.gated();
    if dom != libc::AF_UNIX || family(&addr) != Some(libc::AF_UNIX) || !unix_seen {
        return plain(addr);
    }
    let path = &addr[2..];
    match path.first() {
        // Unnamed (autobind): nothing is reached.
        None => plain(addr),
        Some(0) => {
            // Abstract: the name is every byte given (trailing NULs included).
            if policy.abstract_held_by_run(path) {
                Ok(Dest {
                    bytes: addr,
                    _pin: None,
                    abstract_unix: true,
                    inet: false,
                })
            } else {
                let name = format!("@{}", String::from_utf8_lossy(&path[1..]));
                policy.record(
                    op,
                    Some(PathBuf::from(name)),
                    libc::EACCES,
                    Refusal::OutsideSocket,
                );
                Err(libc::EACCES)
            }
        }
        Some(_) => {
            let end = path.iter().position(|b| *b == 0).unwrap_or(path.len());
            let path = &path[..end];
            let shown = super::task::display(path);
            // connect(2) follows symlinks to the socket file.
            let pin = match task.pin(libc::AT_FDCWD, path, true, false) {
                Ok(p) => p,
                Err(libc::ENOENT) => return Err(libc::ENOENT),
                Err(e) => return Err(e),
            };
            let (mode, id) = stat(&pin)?;
            if mode & libc::S_IFMT != libc::S_IFSOCK {
                return Err(libc::ECONNREFUSED);
            }
            match policy.socket_file_reachable(id) {
                Reach::No if policy.unix_confined => {
                    policy.record(op, Some(shown), libc::EACCES, Refusal::OutsideSocket);
                    return Err(libc::EACCES);
                }
                // A server outside the run could pass in a socket of the
                // host's (SCM_RIGHTS) that no network policy would see: under
                // loopback and allow-list the socket takes no descriptors,
                // or the call is refused where the kernel cannot say so.
                Reach::No | Reach::Listed if policy.network.gated() => {
                    if refuse_passed_rights(sock).is_err() {
                        policy.record(op, Some(shown), libc::EACCES, Refusal::PassedRights);
                        return Err(libc::EACCES);
                    }
                }
                Reach::No | Reach::Listed | Reach::Run => {}
            }
            let bytes = sockaddr_un(pin_path(&pin).as_bytes()).ok_or(libc::ENAMETOOLONG)?;
            Ok(Dest {
                bytes,
                _pin: Some(pin),
                abstract_unix: false,
                inet: false,
            })
        }
    }
}

/// The pid of a connected Unix socket's peer (`SO_PEERCRED`).
fn peer_pid(sock: &impl AsRawFd) -> Option<i32> {
    sock::peer_pid(sock)
}

/// A socket(2) or socketpair(2) the filter sent here: refused, and
/// recorded as a network denial. Only what the network policy refuses
/// comes here (the filter decides by the family and protocol in the
/// registers).
pub(crate) fn refuse_socket(
    _task: &Task,
    trap: &Trap,
    a: &[u64; 6],
    policy: &GatePolicy,
) -> Result<Outcome, i32> {
    let family = a[0] as i32;
    if trap.nr == libc::SYS_socket && family == libc::AF_NETLINK && a[2] as i32 == NETLINK_AUDIT {
        // As a kernel without audit answers: libaudit (PAM's runuser,
        // su, sudo) takes EAFNOSUPPORT for "no audit here" and goes on,
        // where EACCES fails the login. Not a denial worth a notice.
        return Err(libc::EAFNOSUPPORT);
    }
    // Under loopback and allow-list the family is allowed, and only the
    // type or protocol refused: name it.
    let name = match family {
        libc::AF_INET | libc::AF_INET6 if policy.network.gated() => {
            format!(
                "{} {}",
                family_name(family),
                type_name(a[1] as i32, a[2] as i32)
            )
        }
        _ => family_name(family),
    };
    policy.record(
        trap.name,
        Some(PathBuf::from(name)),
        libc::EACCES,
        Refusal::Network,
    );
    Err(libc::EACCES)
}

/// The name of an address family, for a denial (`AF_INET`, ...).
fn family_name(family: i32) -> String {
    match family {
        libc::AF_INET => "AF_INET".into(),
        libc::AF_INET6 => "AF_INET6".into(),
        libc::AF_VSOCK => "AF_VSOCK".into(),
        libc::AF_PACKET => "AF_PACKET".into(),
        libc::AF_NETLINK => "AF_NETLINK".into(),
        other => format!("family {other}"),
    }
}

/// The type and protocol of a refused IPv4/IPv6 socket, for a denial
/// (`SOCK_RAW`, `protocol 132`, ...).
fn type_name(kind: i32, protocol: i32) -> String {
    match kind & 0xf {
        libc::SOCK_STREAM | libc::SOCK_DGRAM => format!("protocol {protocol}"),
        libc::SOCK_RAW => "SOCK_RAW".into(),
        libc::SOCK_SEQPACKET => "SOCK_SEQPACKET".into(),
        10 => "SOCK_PACKET".into(),
        t => format!("type {t}"),
    }
}

/// Clears `SO_PASSRIGHTS` (Linux 6.16) on `sock`: descriptors sent to it
/// are refused to their sender (socket(7)). Errors where the kernel lacks
/// the option.
fn refuse_passed_rights(sock: &OwnedFd) -> Result<(), i32> {
    sock::set_int(
        sock,
        libc::SOL_SOCKET,
        crate::sandbox::seccomp::SO_PASSRIGHTS,
        0,
    )
}

/// The address `sock` is bound to (getsockname(2)); `None` for a socket of
/// another family.
fn bound(sock: &OwnedFd) -> Option<Inet> {
    Inet::parse(&sock::local_address(sock, SOCKADDR_MAX)?)
}

/// Whether an IPv6 socket takes IPv6 alone (`IPV6_V6ONLY`, ipv6(7)).
fn v6only(sock: &OwnedFd) -> bool {
    int_opt(sock, libc::IPPROTO_IPV6, libc::IPV6_V6ONLY).is_ok_and(|v| v != 0)
}

/// The loopback address an unbound or wildcard-bound socket of `dom` gets
/// instead, on `port`: 127.0.0.1; for IPv6 `::1`, or the IPv4-mapped
/// 127.0.0.1 on a dual-stack socket, whose clients most often come over
/// IPv4 (`http://127.0.0.1:PORT`).
fn loopback_bind(sock: &OwnedFd, dom: i32, port: u16) -> Vec<u8> {
    let mut b = (dom as u16).to_ne_bytes().to_vec();
    b.extend(port.to_be_bytes());
    if dom == libc::AF_INET {
        b.extend([127, 0, 0, 1]);
        b.extend([0; 8]);
    } else {
        b.extend([0; 4]);
        let ip: std::net::Ipv6Addr = if v6only(sock) {
            std::net::Ipv6Addr::LOCALHOST
        } else {
            std::net::Ipv4Addr::LOCALHOST.to_ipv6_mapped()
        };
        b.extend(ip.octets());
        b.extend([0; 4]);
    }
    b
}

fn bind_to(sock: &OwnedFd, bytes: &[u8]) -> Result<i64, i32> {
    sock::bind(sock, bytes)
}

/// Judges the destination `addr` of an IPv4/IPv6 socket under `loopback`
/// and `allow-list`, and returns the bytes to use: the address itself when
/// it is a loopback one, a loopback address for the unspecified one (which
/// the kernel would take for this host), EACCES for anything else, with no
/// packet sent. The socket must not be bound to a non-loopback address;
/// an unbound datagram socket is bound to loopback first, so that a send
/// does not bind it to every address of the host (ip(7): autobind).
fn judge_inet(
    sock: &OwnedFd,
    dom: i32,
    addr: Vec<u8>,
    op: &'static str,
    policy: &GatePolicy,
) -> Result<Vec<u8>, i32> {
    match family(&addr) {
        // AF_UNSPEC: a datagram socket's connect dissolves its association.
        Some(libc::AF_UNSPEC) if op == "connect" => return Ok(addr),
        Some(libc::AF_INET) | Some(libc::AF_INET6) => {}
        _ => return Err(libc::EAFNOSUPPORT),
    }
    let dest = Inet::parse(&addr).ok_or(libc::EINVAL)?;
    let refuse = |shown: String, why: Refusal| {
        policy.record(op, Some(PathBuf::from(shown)), libc::EACCES, why);
        Err(libc::EACCES)
    };
    let own = bound(sock);
    if let Some(own) = &own
        && !is_loopback(own.ip)
        && !is_unspecified(own.ip)
    {
        return refuse(format!("from {}", own.shown()), Refusal::Network);
    }
    let dest = if is_unspecified(dest.ip) {
        dest.with_ip(loopback_for(dest.ip))
    } else {
        dest
    };
    if !is_loopback(dest.ip) {
        return refuse(dest.shown(), Refusal::Network);
    }
    if policy.network == Network::AllowList && dest.port == 53 {
        // The proxy resolves names; DNS through a resolver on loopback
        // (systemd-resolved's 127.0.0.53) would carry data to any name.
        return refuse(dest.shown(), Refusal::Dns);
    }
    if op != "connect" && !is_stream(sock) && own.as_ref().is_none_or(|o| o.port == 0) {
        // Bound to match the destination's form on a dual-stack socket.
        let mut at = loopback_bind(sock, dom, 0);
        if dom == libc::AF_INET6 && dest.ip == std::net::IpAddr::V6(std::net::Ipv6Addr::LOCALHOST) {
            at[8..24].copy_from_slice(&std::net::Ipv6Addr::LOCALHOST.octets());
        }
        // EINVAL: bound meanwhile by another thread; the send decides.
        let _ = bind_to(sock, &at);
    }
    Ok(dest.bytes)
}

/// bind(2) under `loopback` and `allow-list`: an IPv4/IPv6 socket is bound
/// by the gate to the address it copied, when that is a loopback one; the
/// unspecified address (all of the host's) becomes loopback
/// ([`loopback_bind`]); anything else gets EACCES. Another socket's bind
/// goes on in the kernel, decided by the socket the descriptor named: a
/// thread that swaps an IPv4 socket in meanwhile gets a socket bound by
/// the kernel, but `listen`, `connect` and every send with an address then
/// refuse a socket bound to anything but loopback ([`judge_inet`]).
pub(crate) fn bind(
    task: &Task,
    _trap: &Trap,
    a: &[u64; 6],
    policy: &GatePolicy,
) -> Result<Outcome, i32> {
    let sock = task.take_fd(a[0])?;
    let dom = domain(&sock)?;
    if policy.network.gated() && dom == libc::AF_UNIX && socket_type(&sock) == libc::SOCK_DGRAM {
        // A bound datagram socket takes messages from anyone who can reach
        // its name, a server outside the run among them: under loopback and
        // allow-list it takes no descriptors (SO_PASSRIGHTS), or is not
        // bound where the kernel cannot say so.
        if refuse_passed_rights(&sock).is_err() {
            policy.record("bind", None, libc::EACCES, Refusal::PassedRights);
            return Err(libc::EACCES);
        }
    }
    if !policy.network.gated() || (dom != libc::AF_INET && dom != libc::AF_INET6) {
        return Ok(Outcome::Continue);
    }
    let addr = read_addr(task, a[1], a[2])?;
    if !matches!(family(&addr), Some(libc::AF_INET) | Some(libc::AF_INET6)) {
        return Err(libc::EAFNOSUPPORT);
    }
    let asked = Inet::parse(&addr).ok_or(libc::EINVAL)?;
    if (dom == libc::AF_INET) != asked.ip.is_ipv4() {
        // The kernel's answer to a structure of the other family.
        return Err(libc::EAFNOSUPPORT);
    }
    let bytes = if is_unspecified(asked.ip) {
        // The caller's port, flow information and scope id kept.
        let lo = Inet::parse(&loopback_bind(&sock, dom, asked.port))
            .map(|l| l.ip)
            .ok_or(libc::EINVAL)?;
        asked.with_ip(lo).bytes
    } else if is_loopback(asked.ip) {
        addr
    } else {
        policy.record(
            "bind",
            Some(PathBuf::from(asked.shown())),
            libc::EACCES,
            Refusal::Network,
        );
        return Err(libc::EACCES);
    };
    task.check()?;
    Ok(Outcome::Done(bind_to(&sock, &bytes)))
}

/// listen(2), made by the gate on the task's socket (it reads no memory):
/// an IPv4/IPv6 socket not yet bound is bound to loopback first, since
/// listen would bind it to every address of the host; one bound to
/// anything but loopback gets EACCES.
pub(crate) fn listen(
    task: &Task,
    _trap: &Trap,
    a: &[u64; 6],
    policy: &GatePolicy,
) -> Result<Outcome, i32> {
    let sock = task.take_fd(a[0])?;
    let dom = domain(&sock)?;
    if policy.network.gated() && (dom == libc::AF_INET || dom == libc::AF_INET6) {
        match bound(&sock) {
            Some(own) if own.port == 0 => {
                bind_to(&sock, &loopback_bind(&sock, dom, 0))?;
            }
            Some(own) if is_loopback(own.ip) => {}
            Some(own) => {
                policy.record(
                    "listen",
                    Some(PathBuf::from(own.shown())),
                    libc::EACCES,
                    Refusal::Network,
                );
                return Err(libc::EACCES);
            }
            None => return Err(libc::EINVAL),
        }
    }
    task.check()?;
    Ok(Outcome::Done(sock::listen(&sock, a[1] as i32)))
}

fn read_addr(task: &Task, addr: u64, len: u64) -> Result<Vec<u8>, i32> {
    let len = usize::try_from(len).map_err(|_| libc::EINVAL)?;
    if len > SOCKADDR_MAX {
        return Err(libc::EINVAL);
    }
    if addr == 0 {
        return Err(libc::EFAULT);
    }
    read_bytes(task.tid, addr, len)
}

pub(crate) fn connect(
    task: &Task,
    _trap: &Trap,
    a: &[u64; 6],
    policy: &GatePolicy,
) -> Result<Outcome, i32> {
    let addr = read_addr(task, a[1], a[2])?;
    let sock = task.take_fd(a[0])?;
    let dest = judge(task, &sock, addr, "connect", policy)?;
    task.check()?;
    if dest.inet {
        return Ok(connect_inet(sock, dest.bytes));
    }
    let check = policy.peer_check();
    Ok(Outcome::Blocking(Box::new(move || {
        // The whole Dest moves in, its pin with it (a closure would
        // otherwise capture only the fields it names).
        let dest = dest;
        let result = sock::connect(&sock, &dest.bytes);
        if result.is_ok() && dest.abstract_unix {
            // The listener may have changed hands between the check and the
            // connect: the peer must still be one of the run's processes.
            if !peer_pid(&sock).is_some_and(&check) {
                sock::shutdown(sock.as_raw_fd());
                return Err(libc::ECONNREFUSED);
            }
        }
        result
    })))
}

/// How long a gated connect to loopback may take on the gate's own thread
/// before the rest of the wait moves to a call thread: 5 ms. A loopback
/// handshake is done within the connect call unless the listener's accept
/// queue is full; answering from the thread that received the notification
/// spares a cross-CPU wake-up, about half of what the gate adds to a
/// connect.
const INLINE_CONNECT: libc::timeval = libc::timeval {
    tv_sec: 0,
    tv_usec: 5_000,
};

/// The socket's send timeout (`get` = `None`), or sets it to `get`.
fn timeout_opt(sock: &OwnedFd, get: Option<libc::timeval>) -> Option<libc::timeval> {
    match get {
        None => sock::send_timeout(sock),
        Some(set) => sock::set_send_timeout(sock, set).then_some(set),
    }
}

/// Connects an IPv4/IPv6 socket to the loopback address `bytes` (judged
/// already). A non-blocking socket, or a datagram one, is connected at
/// once. A blocking stream socket is given [`INLINE_CONNECT`] as its send
/// timeout, which bounds a blocking connect (socket(7), `SO_SNDTIMEO`),
/// for the attempt made here; its own timeout is put back at once. If the
/// handshake has not completed by then, a call thread waits for it
/// (poll(2) for writability, then `SO_ERROR`) for as long as the socket's
/// own timeout says (none: until it completes), and answers as the
/// kernel's connect would have.
fn connect_inet(sock: OwnedFd, bytes: Vec<u8>) -> Outcome {
    let raw_connect = |s: &OwnedFd| sock::connect(s, &bytes);
    let flags = crate::sys::fs::status_flags(&sock);
    if flags < 0 || flags & libc::O_NONBLOCK != 0 || !is_stream(&sock) {
        return Outcome::Done(raw_connect(&sock));
    }
    let Some(own) = timeout_opt(&sock, None) else {
        return Outcome::Done(raw_connect(&sock));
    };
    let shorter = own.tv_sec == 0 && own.tv_usec == 0
        || (own.tv_sec, own.tv_usec) > (INLINE_CONNECT.tv_sec, INLINE_CONNECT.tv_usec);
    if !shorter || timeout_opt(&sock, Some(INLINE_CONNECT)).is_none() {
        return Outcome::Done(raw_connect(&sock));
    }
    let first = raw_connect(&sock);
    timeout_opt(&sock, Some(own));
    if first != Err(libc::EINPROGRESS) {
        return Outcome::Done(first);
    }
    Outcome::Blocking(Box::new(move || {
        let ms = if own.tv_sec == 0 && own.tv_usec == 0 {
            -1
        } else {
            (own.tv_sec * 1000 + own.tv_usec / 1000).max(1) as libc::c_int
        };
        if crate::sys::poll_one(sock.as_raw_fd(), libc::POLLOUT, ms).0 == 0 {
            return Err(libc::EINPROGRESS);
        }
        match int_opt(&sock, libc::SOL_SOCKET, libc::SO_ERROR)? {
            0 => Ok(0),
            e => Err(e),
        }
    }))
}

/// The data of `len` bytes at `addr`, at most [`SEND_MAX`] (a stream socket
/// may send less than asked; a datagram may not).
fn read_data(task: &Task, sock: &OwnedFd, addr: u64, len: usize) -> Result<Vec<u8>, i32> {
    let len = if len > SEND_MAX {
        if is_stream(sock) {
            SEND_MAX
        } else {
            return Err(libc::EMSGSIZE);
        }
    } else {
        len
    };
    read_bytes(task.tid, addr, len)
}

/// The `SO_TYPE` of a socket (`SOCK_STREAM`, `SOCK_DGRAM`, ...); 0 when
/// it cannot be read.
fn socket_type(sock: &OwnedFd) -> i32 {
    int_opt(sock, libc::SOL_SOCKET, libc::SO_TYPE).unwrap_or(0)
}

fn is_stream(sock: &OwnedFd) -> bool {
    socket_type(sock) == libc::SOCK_STREAM
}

pub(crate) fn sendto(
    task: &Task,
    _trap: &Trap,
    a: &[u64; 6],
    policy: &GatePolicy,
) -> Result<Outcome, i32> {
    let sock = task.take_fd(a[0])?;
    let addr = read_addr(task, a[4], a[5])?;
    let data = read_data(task, &sock, a[1], a[2] as usize)?;
    let flags = a[3] as i32;
    let dest = judge(task, &sock, addr, "sendto", policy)?;
    let held = InFlight::reserve(data.len())?;
    task.check()?;
    let inline = inline_send(&sock, policy);
    let work = move || {
        let (dest, _held) = (dest, held);
        sock::send_to(&sock, &data, flags, &dest.bytes)
    };
    Ok(if inline {
        Outcome::Done(work())
    } else {
        Outcome::Blocking(Box::new(work))
    })
}

/// Whether a send on `sock` is made on the gate's own thread: a datagram
/// on an IPv4/IPv6 socket under `loopback` and `allow-list`, which goes
/// only to loopback, where the kernel hands it to the receiving socket (or
/// drops it) within the call and never waits for room (udp(7)).
fn inline_send(sock: &OwnedFd, policy: &GatePolicy) -> bool {
    policy.network.gated()
        && matches!(domain(sock), Ok(libc::AF_INET) | Ok(libc::AF_INET6))
        && socket_type(sock) == libc::SOCK_DGRAM
}

/// One message copied from the task, ready to send: what a `struct msghdr`
/// points to, owned here.
struct Message {
    dest: Option<Dest>,
    data: Vec<u8>,
    control: Vec<u8>,
    /// The task's descriptors of `SCM_RIGHTS`, duplicated, kept open until sent.
    _fds: Vec<OwnedFd>,
}

fn word(b: &[u8], at: usize) -> u64 {
    u64::from_ne_bytes(b[at..at + 8].try_into().unwrap_or([0; 8]))
}

/// Copies the message of the `struct msghdr` at `addr` (56 bytes on LP64:
/// name, namelen, iov, iovlen, control, controllen, flags).
fn read_message(
    task: &Task,
    sock: &OwnedFd,
    addr: u64,
    op: &'static str,
    policy: &GatePolicy,
    budget: usize,
) -> Result<Message, i32> {
    let h = read_bytes(task.tid, addr, 56)?;
    let (name, namelen) = (
        word(&h, 0),
        u64::from(u32::from_ne_bytes(h[8..12].try_into().unwrap_or([0; 4]))),
    );
    let (iov, iovlen) = (word(&h, 16), word(&h, 24) as usize);
    let (control, controllen) = (word(&h, 32), word(&h, 40) as usize);
    let dest = if name != 0 && namelen != 0 {
        Some(judge(
            task,
            sock,
            read_addr(task, name, namelen)?,
            op,
            policy,
        )?)
    } else {
        None
    };
    if iovlen > UIO_MAXIOV {
        return Err(libc::EMSGSIZE);
    }
    let iovs = read_bytes(task.tid, iov, iovlen * 16)?;
    let stream = is_stream(sock);
    let mut data = Vec::new();
    let limit = SEND_MAX.min(budget);
    for i in 0..iovlen {
        let (base, len) = (word(&iovs, i * 16), word(&iovs, i * 16 + 8) as usize);
        let room = limit - data.len();
        if len > room && !stream {
            return Err(if room < SEND_MAX - data.len() {
                libc::EAGAIN
            } else {
                libc::EMSGSIZE
            });
        }
        data.extend(read_bytes(task.tid, base, len.min(room))?);
        if data.len() == limit {
            break;
        }
    }
    if controllen > CONTROL_MAX {
        return Err(libc::ENOBUFS);
    }
    let mut control = read_bytes(task.tid, control, controllen)?;
    let dom = domain(sock)?;
    let inet_gated = policy.network.gated() && (dom == libc::AF_INET || dom == libc::AF_INET6);
    let fds = rewrite_control(task, &mut control, inet_gated)?;
    Ok(Message {
        dest,
        data,
        control,
        _fds: fds,
    })
}

/// Walks the ancillary messages (cmsg(3): `len: size_t, level: int, type:
/// int`, data, each aligned to 8 bytes): the task's descriptors of
/// `SCM_RIGHTS` become duplicates of ours, and `SCM_CREDENTIALS` must name
/// the task's own process and ids.
///
/// On an IPv4/IPv6 socket under `loopback` and `allow-list` only the
/// messages in [`INET_CONTROL_KEPT`] pass: the others choose a source
/// address, an interface, a next hop or a source route (ip(7), ipv6(7)),
/// all ways past the destination the gate judged; they get EPERM.
fn rewrite_control(task: &Task, control: &mut [u8], inet_gated: bool) -> Result<Vec<OwnedFd>, i32> {
    const HDR: usize = 16;
    let mut fds = Vec::new();
    let mut at = 0;
    while at + HDR <= control.len() {
        let len = usize::try_from(word(control, at)).map_err(|_| libc::EINVAL)?;
        let end = at.checked_add(len).ok_or(libc::EINVAL)?;
        if len < HDR || end > control.len() {
            return Err(libc::EINVAL);
        }
        let level = i32::from_ne_bytes(control[at + 8..at + 12].try_into().unwrap_or([0; 4]));
        let kind = i32::from_ne_bytes(control[at + 12..at + 16].try_into().unwrap_or([0; 4]));
        if level == libc::SOL_SOCKET && kind == libc::SCM_RIGHTS {
            for slot in (at + HDR..at + len).step_by(4) {
                if slot + 4 > at + len {
                    break;
                }
                let theirs =
                    i32::from_ne_bytes(control[slot..slot + 4].try_into().unwrap_or([0; 4]));
                let ours = task.take_fd(theirs as u64)?;
                control[slot..slot + 4].copy_from_slice(&ours.as_raw_fd().to_ne_bytes());
                fds.push(ours);
            }
        } else if level == libc::SOL_SOCKET && kind == libc::SCM_CREDENTIALS {
            if len < HDR + 12 {
                return Err(libc::EINVAL);
            }
            let field = |i: usize| {
                u32::from_ne_bytes(
                    control[at + HDR + i * 4..at + HDR + i * 4 + 4]
                        .try_into()
                        .unwrap_or([0; 4]),
                )
            };
            let own = task.tgid().map(|p| p as u32);
            let (uid, gid) = (
                nix::unistd::getuid().as_raw(),
                nix::unistd::getgid().as_raw(),
            );
            if Some(field(0)) != own || field(1) != uid || field(2) != gid {
                return Err(libc::EPERM);
            }
        } else if level == libc::SOL_SOCKET {
            // SO_MARK, SO_PRIORITY and the like: settings a task sets on its
            // own socket with its own privileges, not with dsh-exec's.
            return Err(libc::EPERM);
        } else if inet_gated && !INET_CONTROL_KEPT.contains(&(level, kind)) {
            return Err(libc::EPERM);
        }
        at = end.checked_add(7).ok_or(libc::EINVAL)? & !7;
    }
    Ok(fds)
}

/// The ancillary messages an IPv4/IPv6 send keeps under `loopback` and
/// `allow-list` (level, type): IP_TOS, IP_TTL, IPV6_HOPLIMIT, IPV6_TCLASS
/// and UDP_SEGMENT, which change how a datagram is sent, not where.
const INET_CONTROL_KEPT: [(i32, i32); 5] = [
    (libc::IPPROTO_IP, libc::IP_TOS),
    (libc::IPPROTO_IP, libc::IP_TTL),
    (libc::IPPROTO_IPV6, libc::IPV6_HOPLIMIT),
    (libc::IPPROTO_IPV6, libc::IPV6_TCLASS),
    (libc::IPPROTO_UDP, 103), // UDP_SEGMENT (linux/udp.h)
];

/// Sends one copied message on `sock`.
fn send_message(sock: &OwnedFd, m: &mut Message, flags: i32) -> Result<i64, i32> {
    let addr = m.dest.as_ref().map(|d| d.bytes.as_slice());
    sock::send_message(sock, &mut m.data, addr, &mut m.control, flags)
}

pub(crate) fn sendmsg(
    task: &Task,
    _trap: &Trap,
    a: &[u64; 6],
    policy: &GatePolicy,
) -> Result<Outcome, i32> {
    let sock = task.take_fd(a[0])?;
    let mut m = read_message(task, &sock, a[1], "sendmsg", policy, SEND_MAX)?;
    let held = InFlight::reserve(m.data.len())?;
    let flags = a[2] as i32;
    task.check()?;
    if inline_send(&sock, policy) {
        let result = send_message(&sock, &mut m, flags);
        drop(held);
        return Ok(Outcome::Done(result));
    }
    Ok(Outcome::Blocking(Box::new(move || {
        let _held = held;
        send_message(&sock, &mut m, flags)
    })))
}

/// sendmmsg(2): each `struct mmsghdr` (a msghdr and its `msg_len`, 64 bytes)
/// is copied and judged first; they are then sent in order, and the count
/// of each sent one is written back to `msg_len`. Returns the number sent,
/// or the first error when none was.
pub(crate) fn sendmmsg(
    task: &Task,
    _trap: &Trap,
    a: &[u64; 6],
    policy: &GatePolicy,
) -> Result<Outcome, i32> {
    let sock = task.take_fd(a[0])?;
    let vlen = (a[2] as usize).min(UIO_MAXIOV);
    let flags = a[3] as i32;
    // All the messages together carry at most SEND_MAX: those past it are
    // not sent (sendmmsg(2) may send fewer than asked).
    let mut messages = Vec::with_capacity(vlen);
    let mut copied = 0;
    for i in 0..vlen {
        if copied == SEND_MAX && i > 0 {
            break;
        }
        let m = read_message(
            task,
            &sock,
            a[1] + 64 * i as u64,
            "sendmmsg",
            policy,
            SEND_MAX - copied,
        );
        match m {
            Ok(m) => {
                copied += m.data.len();
                messages.push(m);
            }
            // One that does not fit what is left waits for the next call.
            Err(libc::EAGAIN) if i > 0 => break,
            Err(e) => return Err(e),
        }
    }
    let held = InFlight::reserve(copied)?;
    // The counts are written back through the task's memory as it is now:
    // /proc/TID/mem is bound to this address space, so a write after the
    // task has died goes nowhere, never into a process that took its id
    // (proc(5)); opened before the check that the task is still the caller.
    let mem = std::fs::OpenOptions::new()
        .write(true)
        .open(format!("/proc/{}/mem", task.tid))
        .map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))?;
    task.check()?;
    let base = a[1];
    Ok(Outcome::Blocking(Box::new(move || {
        use std::os::unix::fs::FileExt;
        let _held = held;
        let mut sent = 0i64;
        for (i, m) in messages.iter_mut().enumerate() {
            match send_message(&sock, m, flags) {
                Ok(n) => {
                    let at = base + 64 * i as u64 + 56;
                    let _ = mem.write_all_at(&(n as u32).to_ne_bytes(), at);
                    sent += 1;
                }
                Err(e) if sent == 0 => return Err(e),
                Err(_) => break,
            }
        }
        Ok(sent)
    })))
}

impl std::fmt::Debug for Dest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Dest({})",
            std::ffi::OsStr::from_bytes(&self.bytes).to_string_lossy()
        )
    }
}
