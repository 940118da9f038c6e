//! Network policies beyond all-or-nothing: `--network loopback` and the
//! allow-list of `--network allow=HOSTS`.
//!
//! - `loopback` is decided by the gate (`sandbox::gate::net`): every
//!   `connect`, `bind`, `listen`, `sendto` with an address, `sendmsg` and
//!   `sendmmsg` of an IPv4 or IPv6 socket is made by `dsh-exec` on the
//!   task's own socket with the address it copied and judged
//!   (`addr.rs`): loopback passes, anything else gets EACCES.
//! - `allow=HOSTS` is `loopback` plus an HTTP/HTTPS proxy ([`proxy`]) on a
//!   loopback port, which reaches the listed hosts ([`rules`]) and nothing
//!   else, one judged request per client connection (`http1.rs` frames
//!   the messages).
//!
//! What this relies on from the kernel:
//! - seccomp_unotify(2): a trapped call waits until the supervisor answers,
//!   and the supervisor's answer is the call's result; the task's memory
//!   is read once (process_vm_readv(2) or /proc/PID/mem) and
//!   `SECCOMP_IOCTL_NOTIF_ID_VALID` is checked after, so a recycled pid is
//!   not trusted. The gate never answers `CONTINUE` after reading memory
//!   (only `bind` of a socket that is not IPv4/IPv6 continues, judged by
//!   the socket alone).
//! - pidfd_getfd(2): the duplicate is the task's very socket (the same
//!   open file description), so a connect, bind or send made on it is the
//!   task's; it needs ptrace access (PTRACE_MODE_ATTACH_REALCREDS), which
//!   is why the gate keeps the capabilities the command keeps.
//! - ip(7), ipv6(7): an unbound socket is bound by `listen` and by a send
//!   to the unspecified address (autobind), and the kernel drops packets
//!   to 127.0.0.0/8 that arrive on other interfaces (martians), so a
//!   socket bound to loopback is reached from this host alone.
//! - socket(7) `SO_PASSRIGHTS` (Linux 6.16): a socket with it cleared
//!   takes no `SCM_RIGHTS`; the sender gets EPERM.
//! - Documentation/userspace-api/landlock.rst: a process in a Landlock
//!   domain cannot ptrace(2) one outside it (any ABI), and the
//!   abstract-socket scope (ABI 6) keeps abstract Unix sockets inside.

pub(crate) mod addr;
pub(crate) mod http1;
pub mod inject;
pub(crate) mod mitm;
pub mod proxy;
pub mod rules;

pub use addr::special_class;
