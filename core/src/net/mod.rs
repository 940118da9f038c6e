//! Network policies beyond all-or-nothing: `--network loopback` and the
//! allow-list of `--network allow=HOSTS`.
//!
//! - `loopback` is decided by the gate (`sandbox::gate::net`): every
//!   `connect`, `bind`, `listen`, `sendto` with an address, `sendmsg` and
//!   `sendmmsg` of an IPv4 or IPv6 socket is made by `dsh-exec` on the
//!   task's own socket with the address it copied and judged
//!   ([`addr`]): loopback passes, anything else gets EACCES.
//! - `allow=HOSTS` is `loopback` plus an HTTP/HTTPS proxy ([`proxy`]) on a
//!   loopback port, which reaches the listed hosts ([`rules`]) and nothing
//!   else.

pub(crate) mod addr;
pub mod proxy;
pub mod rules;

pub use addr::special_class;
