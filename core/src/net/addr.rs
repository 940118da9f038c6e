//! IPv4 and IPv6 socket addresses as the gate copies them from a task, and
//! the address classes the policies judge.
//!
//! The layouts are the kernel's (ip(7), ipv6(7)): `struct sockaddr_in` is
//! the family (2 bytes, host order), the port (2, network order) and the
//! address (4); `struct sockaddr_in6` is the family, the port, the flow
//! information (4), the address (16) and the scope id (4).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use nix::libc;

/// An IPv4 or IPv6 socket address copied from a task, with the bytes it
/// came as (so that the call is made with exactly what was judged, or with
/// a rewrite of it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Inet {
    /// The address.
    pub(crate) ip: IpAddr,
    /// The port.
    pub(crate) port: u16,
    /// The bytes as given (at least the family's structure size).
    pub(crate) bytes: Vec<u8>,
}

/// `sizeof(struct sockaddr_in)` and `sizeof(struct sockaddr_in6)`.
const IN_LEN: usize = 16;
const IN6_LEN: usize = 28;

impl Inet {
    /// Parses `bytes` as a socket address of `family` (`AF_INET` or
    /// `AF_INET6`); `None` when it is shorter than the structure (the
    /// kernel then fails the call with EINVAL) or of another family.
    pub(crate) fn parse(bytes: &[u8]) -> Option<Inet> {
        let family = i32::from(u16::from_ne_bytes(bytes.get(..2)?.try_into().ok()?));
        let port = u16::from_be_bytes(bytes.get(2..4)?.try_into().ok()?);
        let ip = match family {
            libc::AF_INET if bytes.len() >= IN_LEN => {
                let a: [u8; 4] = bytes[4..8].try_into().ok()?;
                IpAddr::V4(Ipv4Addr::from(a))
            }
            libc::AF_INET6 if bytes.len() >= IN6_LEN => {
                let a: [u8; 16] = bytes[8..24].try_into().ok()?;
                IpAddr::V6(Ipv6Addr::from(a))
            }
            _ => return None,
        };
        Some(Inet {
            ip,
            port,
            bytes: bytes.to_vec(),
        })
    }

    /// The same address with `ip` in place of its own, in the structure
    /// it came in: an IPv4 address goes into an IPv6 structure IPv4-mapped;
    /// an IPv6 one that maps no IPv4 address leaves an IPv4 structure as
    /// it was.
    pub(crate) fn with_ip(&self, ip: IpAddr) -> Inet {
        let mut out = self.clone();
        match self.ip {
            IpAddr::V4(_) => {
                if let IpAddr::V4(a) = unmapped(ip) {
                    out.bytes[4..8].copy_from_slice(&a.octets());
                    out.ip = IpAddr::V4(a);
                }
            }
            IpAddr::V6(_) => {
                let a = match ip {
                    IpAddr::V4(a) => a.to_ipv6_mapped(),
                    IpAddr::V6(a) => a,
                };
                out.bytes[8..24].copy_from_slice(&a.octets());
                out.ip = IpAddr::V6(a);
            }
        }
        out
    }

    /// `ADDR:PORT` (`[ADDR]:PORT` for IPv6), for denials.
    pub(crate) fn shown(&self) -> String {
        match self.ip {
            IpAddr::V4(a) => format!("{a}:{}", self.port),
            IpAddr::V6(a) => format!("[{a}]:{}", self.port),
        }
    }
}

/// The address an IPv4-mapped IPv6 address stands for (`::ffff:a.b.c.d`
/// reaches IPv4 `a.b.c.d`; ipv6(7)); any other address as it is.
pub(crate) fn unmapped(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(a) => a.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Whether `ip` is a loopback address: 127.0.0.0/8, `::1`, or an IPv4-mapped
/// 127.0.0.0/8. Nothing else: not the host's own other addresses, which
/// reach its network interfaces' services, and not NAT64 or IPv4-compatible
/// forms, which route off the host.
pub(crate) fn is_loopback(ip: IpAddr) -> bool {
    unmapped(ip).is_loopback()
}

/// Whether `ip` is the unspecified address (0.0.0.0, `::`, `::ffff:0.0.0.0`).
pub(crate) fn is_unspecified(ip: IpAddr) -> bool {
    unmapped(ip).is_unspecified()
}

/// The loopback address that stands in for the unspecified address `ip`:
/// 127.0.0.1 for IPv4 (and an IPv4-mapped one), `::1` for IPv6.
pub(crate) fn loopback_for(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(a) if a.to_ipv4_mapped().is_some() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
    }
}

/// Why an address the proxy resolved is not public, or `None` when it is:
/// the classes a name must not be rebound to unless a rule names the name
/// or the address exactly.
///
/// Sources: RFC 6890 (special-purpose registries), RFC 1918 (private),
/// RFC 6598 (shared, carrier-grade NAT), RFC 3927 and RFC 4291 (link-local;
/// 169.254.169.254 and fd00:ec2::254 are the cloud metadata services),
/// RFC 4193 (unique local), RFC 5771 (multicast).
pub fn special_class(ip: IpAddr) -> Option<&'static str> {
    match unmapped(ip) {
        IpAddr::V4(a) => {
            let o = a.octets();
            if a == Ipv4Addr::new(169, 254, 169, 254) {
                Some("a cloud metadata address")
            } else if a.is_loopback() {
                Some("a loopback address")
            } else if a.is_private() || (o[0] == 100 && (o[1] & 0xc0) == 64) {
                Some("a private address")
            } else if a.is_link_local() {
                Some("a link-local address")
            } else if a.is_unspecified() || o[0] == 0 {
                Some("an unspecified address")
            } else if a.is_multicast() || a.is_broadcast() || o[0] >= 240 {
                Some("a multicast, broadcast or reserved address")
            } else {
                None
            }
        }
        IpAddr::V6(a) => {
            let s = a.segments();
            if a == "fd00:ec2::254"
                .parse::<Ipv6Addr>()
                .unwrap_or(Ipv6Addr::UNSPECIFIED)
            {
                Some("a cloud metadata address")
            } else if a.is_loopback() {
                Some("a loopback address")
            } else if a.is_unspecified() {
                Some("an unspecified address")
            } else if (s[0] & 0xfe00) == 0xfc00 {
                Some("a private address")
            } else if (s[0] & 0xffc0) == 0xfe80 {
                Some("a link-local address")
            } else if a.is_multicast() {
                Some("a multicast, broadcast or reserved address")
            } else if s[..4] == [0; 4] && (s[4] == 0 || (s[4] == 0xffff && s[5] == 0)) {
                // IPv4-compatible (::a.b.c.d), IPv4-translated
                // (::ffff:0:a.b.c.d, RFC 2765) and the rest of ::/80.
                Some("a multicast, broadcast or reserved address")
            } else if s[0] == 0x64 && s[1] == 0xff9b {
                // NAT64 (RFC 6052): judge the IPv4 address inside.
                let v4 =
                    Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
                special_class(IpAddr::V4(v4))
            } else {
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(port: u16, a: [u8; 4]) -> Vec<u8> {
        let mut b = (libc::AF_INET as u16).to_ne_bytes().to_vec();
        b.extend(port.to_be_bytes());
        b.extend(a);
        b.extend([0; 8]);
        b
    }

    #[test]
    fn addresses_parse_from_the_kernel_s_layouts_and_rewrite_in_place() {
        let a = Inet::parse(&v4(8080, [0, 0, 0, 0])).unwrap();
        assert_eq!((a.ip, a.port), ("0.0.0.0".parse().unwrap(), 8080));
        let b = a.with_ip(loopback_for(a.ip));
        assert_eq!(b.bytes, v4(8080, [127, 0, 0, 1]));
        assert_eq!(b.shown(), "127.0.0.1:8080");
        assert!(Inet::parse(&v4(1, [1, 2, 3, 4])[..15]).is_none());
        let mut six = (libc::AF_INET6 as u16).to_ne_bytes().to_vec();
        six.extend(443u16.to_be_bytes());
        six.extend([0; 4]);
        six.extend("::ffff:0.0.0.0".parse::<Ipv6Addr>().unwrap().octets());
        six.extend([0; 4]);
        let c = Inet::parse(&six).unwrap();
        assert!(is_unspecified(c.ip));
        let d = c.with_ip(loopback_for(c.ip));
        assert_eq!(d.ip, "::ffff:127.0.0.1".parse::<IpAddr>().unwrap());
        assert!(is_loopback(d.ip));
    }

    #[test]
    fn only_loopback_is_loopback() {
        for yes in ["127.0.0.1", "127.9.8.7", "::1", "::ffff:127.0.0.2"] {
            assert!(is_loopback(yes.parse().unwrap()), "{yes}");
        }
        for no in [
            "192.0.2.2",
            "0.0.0.0",
            "::",
            "::127.0.0.1",
            "64:ff9b::7f00:1",
            "::ffff:10.0.0.1",
        ] {
            assert!(!is_loopback(no.parse().unwrap()), "{no}");
        }
    }

    #[test]
    fn special_classes_cover_rebinding_targets() {
        for (ip, class) in [
            ("127.0.0.1", "a loopback address"),
            ("10.1.2.3", "a private address"),
            ("100.64.0.1", "a private address"),
            ("169.254.169.254", "a cloud metadata address"),
            ("169.254.1.1", "a link-local address"),
            ("::ffff:192.168.0.1", "a private address"),
            ("fd00:ec2::254", "a cloud metadata address"),
            ("fe80::1", "a link-local address"),
            ("64:ff9b::a00:1", "a private address"),
            ("0.1.2.3", "an unspecified address"),
            (
                "::ffff:0:7f00:1",
                "a multicast, broadcast or reserved address",
            ),
        ] {
            assert_eq!(special_class(ip.parse().unwrap()), Some(class), "{ip}");
        }
        for public in ["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"] {
            assert_eq!(special_class(public.parse().unwrap()), None);
        }
    }
}
