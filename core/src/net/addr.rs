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
/// reach its network interfaces' services, and not the other forms that
/// carry a loopback address ([`embedded_ipv4`]: IPv4-compatible, NAT64,
/// 6to4, Teredo, ISATAP), which the kernel sends to a route, a translator
/// or a tunnel, never to loopback: the gate refuses them as it refuses
/// every address that is not loopback.
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

/// A way an IPv6 address carries an IPv4 address, which a router, a
/// tunnel or a translator on the path may deliver to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Embedding {
    /// IPv4-mapped, `::ffff:a.b.c.d` (RFC 4291 2.5.5.2): the kernel
    /// reaches the IPv4 address itself (ipv6(7)).
    Mapped,
    /// IPv4-compatible, `::a.b.c.d` (RFC 4291 2.5.5.1, deprecated).
    Compatible,
    /// IPv4-translated, `::ffff:0:a.b.c.d` (RFC 2765 2.1).
    Translated,
    /// NAT64's well-known prefix `64:ff9b::/96` (RFC 6052 2.1).
    Nat64,
    /// NAT64's local-use prefix `64:ff9b:1::/48` (RFC 8215), read at the
    /// prefix length given (48, 56, 64 or 96; RFC 6052 2.2): the network
    /// picks it, so every reading is judged.
    Nat64Local(u8),
    /// 6to4, `2002:a.b.c.d::/48` (RFC 3056 2).
    SixToFour,
    /// Teredo's server address, `2001:0:a.b.c.d::/64` (RFC 4380 4).
    TeredoServer,
    /// Teredo's client address, the last 32 bits inverted (RFC 4380 4).
    TeredoClient,
    /// An ISATAP interface identifier, `::0:5efe:a.b.c.d` or
    /// `::200:5efe:a.b.c.d` under any /64 prefix (RFC 5214 6.1).
    Isatap,
}

impl std::fmt::Display for Embedding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Embedding::Mapped => f.write_str("IPv4-mapped"),
            Embedding::Compatible => f.write_str("IPv4-compatible"),
            Embedding::Translated => f.write_str("IPv4-translated"),
            Embedding::Nat64 => f.write_str("NAT64"),
            Embedding::Nat64Local(n) => write!(f, "local-use NAT64, read as /{n}"),
            Embedding::SixToFour => f.write_str("6to4"),
            Embedding::TeredoServer => f.write_str("Teredo server"),
            Embedding::TeredoClient => f.write_str("Teredo client"),
            Embedding::Isatap => f.write_str("ISATAP"),
        }
    }
}

/// Every IPv4 address that `a` carries, with the form that carries it:
/// none for most addresses, one for most forms, two for Teredo (server and
/// client), four readings for local-use NAT64, and a 6to4 or Teredo prefix
/// may come with an ISATAP interface identifier too.
///
/// Sources: RFC 4291 2.5.5 (IPv4-mapped and -compatible), RFC 2765 2.1
/// (IPv4-translated), RFC 6052 2.1 and 2.2 (NAT64 and where each prefix
/// length puts the IPv4 address: around bits 64 to 71, which stay zero),
/// RFC 8215 (NAT64 local use), RFC 3056 2 (6to4), RFC 4380 4 (Teredo: the
/// client address is sent inverted), RFC 5214 6.1 (ISATAP).
pub(crate) fn embedded_ipv4(a: Ipv6Addr) -> Vec<(Embedding, Ipv4Addr)> {
    let o = a.octets();
    let at = |i: [usize; 4]| Ipv4Addr::new(o[i[0]], o[i[1]], o[i[2]], o[i[3]]);
    let low = at([12, 13, 14, 15]);
    let zero = |r: std::ops::Range<usize>| o[r].iter().all(|b| *b == 0);
    let mut out = Vec::new();
    if zero(0..10) && o[10..12] == [0xff, 0xff] {
        out.push((Embedding::Mapped, low));
    } else if zero(0..8) && o[8..10] == [0xff, 0xff] && zero(10..12) {
        out.push((Embedding::Translated, low));
    } else if zero(0..12) && u32::from(low) > 1 {
        // Not :: nor ::1, which are IPv6's own (RFC 4291 2.5.5.1).
        out.push((Embedding::Compatible, low));
    } else if o[..4] == [0, 0x64, 0xff, 0x9b] && zero(4..12) {
        out.push((Embedding::Nat64, low));
    } else if o[..6] == [0, 0x64, 0xff, 0x9b, 0, 1] {
        for (n, i) in [
            (48, [6, 7, 9, 10]),
            (56, [7, 9, 10, 11]),
            (64, [9, 10, 11, 12]),
            (96, [12, 13, 14, 15]),
        ] {
            out.push((Embedding::Nat64Local(n), at(i)));
        }
    } else if o[..2] == [0x20, 0x02] {
        out.push((Embedding::SixToFour, at([2, 3, 4, 5])));
    } else if o[..4] == [0x20, 0x01, 0, 0] {
        out.push((Embedding::TeredoServer, at([4, 5, 6, 7])));
        out.push((Embedding::TeredoClient, Ipv4Addr::from(!u32::from(low))));
    }
    // The universal/local and group bits of the first octet aside.
    if o[8] & !0x03 == 0 && o[9..12] == [0, 0x5e, 0xfe] {
        out.push((Embedding::Isatap, low));
    }
    out
}

/// Why an address is special: its class, and the IPv4 address inside it
/// that made it so, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Special {
    /// The class, as [`special_class`] names it.
    pub(crate) class: &'static str,
    /// The embedded IPv4 address judged, and how it is embedded.
    pub(crate) via: Option<(Embedding, Ipv4Addr)>,
}

/// The class of a cloud metadata address.
pub(crate) const METADATA: &str = "a cloud metadata address";

/// The IPv4 addresses of the clouds' instance metadata and credential
/// services: 169.254.169.254 (AWS, Google Cloud, Azure, Oracle Cloud,
/// OpenStack and most others), 169.254.170.2 (AWS ECS task credentials),
/// 169.254.170.23 (AWS EKS Pod Identity), 169.254.42.42 (Scaleway),
/// 100.100.100.200 (Alibaba Cloud) and 168.63.129.16 (Azure's WireServer,
/// a public address that only Azure's hosts answer).
const METADATA_V4: [Ipv4Addr; 6] = [
    Ipv4Addr::new(169, 254, 169, 254),
    Ipv4Addr::new(169, 254, 170, 2),
    Ipv4Addr::new(169, 254, 170, 23),
    Ipv4Addr::new(169, 254, 42, 42),
    Ipv4Addr::new(100, 100, 100, 200),
    Ipv4Addr::new(168, 63, 129, 16),
];

/// Their IPv6 counterparts: `fd00:ec2::254` (AWS), `fd00:ec2::23` (AWS EKS
/// Pod Identity), `fd20:ce::254` (Google Cloud) and `fd00:42::42`
/// (Scaleway).
const METADATA_V6: [Ipv6Addr; 4] = [
    Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254),
    Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x23),
    Ipv6Addr::new(0xfd20, 0xce, 0, 0, 0, 0, 0, 0x254),
    Ipv6Addr::new(0xfd00, 0x42, 0, 0, 0, 0, 0, 0x42),
];

/// The class of a documentation address (RFC 5737, RFC 3849, RFC 9637).
const DOCUMENTATION: &str = "a documentation address";

/// The class of a benchmarking address (RFC 2544, RFC 5180).
const BENCHMARKING: &str = "a benchmarking address";

/// The class of an IPv4 address of its own.
fn ipv4_class(a: Ipv4Addr) -> Option<&'static str> {
    let o = a.octets();
    if METADATA_V4.contains(&a) {
        Some(METADATA)
    } else if matches!(o, [192, 0, 2, _] | [198, 51, 100, _] | [203, 0, 113, _]) {
        Some(DOCUMENTATION)
    } else if o[0] == 198 && (o[1] & 0xfe) == 18 {
        Some(BENCHMARKING)
    } else if a.is_loopback() {
        Some("a loopback address")
    } else if a.is_private() || (o[0] == 100 && (o[1] & 0xc0) == 64) {
        Some("a private address")
    } else if a.is_link_local() {
        Some("a link-local address")
    } else if a.is_unspecified() || o[0] == 0 {
        Some("an unspecified address")
    } else if a.is_multicast()
        || a.is_broadcast()
        || o[0] >= 240
        || matches!(o, [192, 0, 0, _] | [192, 88, 99, _])
    {
        // 240.0.0.0/4 (RFC 1112), 192.0.0.0/24 (IETF protocol
        // assignments, RFC 6890 2.2.2) and 192.88.99.0/24 (the deprecated
        // 6to4 relay anycast, RFC 7526).
        Some(RESERVED)
    } else {
        None
    }
}

/// The class of a reserved address.
const RESERVED: &str = "a multicast, broadcast or reserved address";

/// Why `ip` is not public, and through which embedded IPv4 address; `None`
/// when it is. See [`special_class`].
pub(crate) fn classify(ip: IpAddr) -> Option<Special> {
    let a = match ip {
        IpAddr::V4(a) => return ipv4_class(a).map(|class| Special { class, via: None }),
        IpAddr::V6(a) => a,
    };
    let s = a.segments();
    let own = if METADATA_V6.contains(&a) {
        Some(METADATA)
    } else if a.is_loopback() {
        Some("a loopback address")
    } else if a.is_unspecified() {
        Some("an unspecified address")
    } else if (s[0] & 0xfe00) == 0xfc00 {
        Some("a private address")
    } else if (s[0] & 0xffc0) == 0xfe80 {
        Some("a link-local address")
    } else if a.is_multicast() {
        Some(RESERVED)
    } else {
        None
    };
    if let Some(class) = own {
        return Some(Special { class, via: None });
    }
    // An embedded IPv4 address is judged as that address would be; a
    // metadata one first, since only its address may reach it.
    let inside = embedded_ipv4(a);
    let metadata = inside
        .iter()
        .find(|(_, v4)| ipv4_class(*v4) == Some(METADATA));
    if let Some(&via) = metadata {
        return Some(Special {
            class: METADATA,
            via: Some(via),
        });
    }
    if let Some((Embedding::Nat64Local(_), _)) = inside.first() {
        // The prefix is for a network's own translator, whose IPv4 side
        // may be private (RFC 8215), at a length it picks: local, as
        // fc00::/7 is, whatever it carries.
        return Some(Special {
            class: "a private address",
            via: None,
        });
    }
    let judged = inside.iter().find_map(|&(e, v4)| {
        ipv4_class(v4).map(|class| Special {
            class,
            via: Some((e, v4)),
        })
    });
    if judged.is_some() {
        return judged;
    }
    match inside.first().map(|(e, _)| *e) {
        // Forms out of use, which the kernel does not reach as IPv4
        // (ipv6(7) maps ::ffff:0:0/96 alone): nothing public lies there.
        Some(Embedding::Compatible | Embedding::Translated) => Some(Special {
            class: RESERVED,
            via: None,
        }),
        Some(Embedding::Mapped | Embedding::Nat64) => None,
        // Outside 2000::/3 (global unicast, RFC 4291 2.4) nothing else is
        // assigned: ::/8 and the rest are reserved by the IETF.
        _ if (s[0] & 0xe000) != 0x2000 => Some(Special {
            class: RESERVED,
            via: None,
        }),
        // 2001:db8::/32 (RFC 3849) and 3fff::/20 (RFC 9637) are for
        // documentation, 2001:2::/48 for benchmarking (RFC 5180).
        _ if (s[0] == 0x2001 && s[1] == 0xdb8) || (s[0] == 0x3fff && s[1] < 0x1000) => {
            Some(Special {
                class: DOCUMENTATION,
                via: None,
            })
        }
        _ if s[0] == 0x2001 && s[1] == 2 && s[2] == 0 => Some(Special {
            class: BENCHMARKING,
            via: None,
        }),
        _ => None,
    }
}

/// Why an address the proxy resolved is not public, or `None` when it is:
/// the classes a name must not be rebound to unless a rule names the name
/// or the address exactly.
///
/// An IPv6 address that carries an IPv4 address (IPv4-mapped and
/// -compatible, NAT64, 6to4, Teredo, ISATAP: see `embedded_ipv4`) is of
/// the class of that IPv4 address, since a translator, a relay or a tunnel
/// on the path may deliver to it; the local-use NAT64 prefix is private,
/// and the rest of the space outside 2000::/3 reserved.
///
/// The classes follow the IANA IPv4 and IPv6 Special-Purpose Address
/// Registries (RFC 6890, and the RFCs each entry names): loopback (RFC
/// 1122, RFC 4291), private (RFC 1918, RFC 4193; RFC 6598's shared
/// carrier-grade NAT space 100.64.0.0/10 counts as private), link-local
/// (RFC 3927, RFC 4291), unspecified and "this network" (0.0.0.0/8, `::`),
/// documentation (192.0.2.0/24, 198.51.100.0/24 and 203.0.113.0/24, RFC
/// 5737; 2001:db8::/32, RFC 3849; 3fff::/20, RFC 9637), benchmarking
/// (198.18.0.0/15, RFC 2544; 2001:2::/48, RFC 5180), and multicast,
/// broadcast or reserved (RFC 5771, 240.0.0.0/4, the IETF protocol
/// assignments 192.0.0.0/24 of RFC 6890 2.2.2, the deprecated 6to4 relay
/// anycast 192.88.99.0/24 of RFC 7526, and IPv6 outside 2000::/3). A cloud
/// metadata address (`METADATA_V4`, `METADATA_V6`: 169.254.169.254,
/// 100.100.100.200, `fd00:ec2::254`, `fd20:ce::254`, ...) is a class of its
/// own, which only a rule naming the address reaches.
pub fn special_class(ip: IpAddr) -> Option<&'static str> {
    classify(ip).map(|s| s.class)
}

/// Every IPv4 address `ip` reaches or carries: itself when it is IPv4,
/// and each embedded one.
pub(crate) fn ipv4_inside(ip: IpAddr) -> Vec<Ipv4Addr> {
    match ip {
        IpAddr::V4(a) => vec![a],
        IpAddr::V6(a) => embedded_ipv4(a).into_iter().map(|(_, v4)| v4).collect(),
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
            "::ffff:0:127.0.0.1",
            "2002:7f00:1::1",
            "2001:0:7f00:1::1",
            "2001:db8::200:5efe:7f00:1",
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
            ("::ffff:0:7f00:1", "a loopback address"),
            ("::ffff:0:5db8:d70e", RESERVED),
            ("::5db8:d70e", RESERVED),
            ("0:0:0:1::", RESERVED),
            ("64:ff9b:2::1", RESERVED),
            ("4000::1", RESERVED),
            ("64:ff9b:1::5db8:d70e", "a private address"),
            ("64:ff9b:1:5db8:d7:e00::", "a private address"),
            // RFC 6890's registries: documentation, benchmarking, the IETF's
            // protocol assignments, 240.0.0.0/4.
            ("192.0.2.1", DOCUMENTATION),
            ("198.51.100.255", DOCUMENTATION),
            ("203.0.113.7", DOCUMENTATION),
            ("2001:db8::1", DOCUMENTATION),
            ("2001:db8:ffff::1", DOCUMENTATION),
            ("3fff::1", DOCUMENTATION),
            ("3fff:fff::1", DOCUMENTATION),
            ("::ffff:203.0.113.7", DOCUMENTATION),
            ("64:ff9b::c633:6401", DOCUMENTATION),
            ("198.18.0.1", BENCHMARKING),
            ("198.19.255.254", BENCHMARKING),
            ("2001:2::1", BENCHMARKING),
            ("2002:c612:1::1", BENCHMARKING),
            ("192.0.0.8", RESERVED),
            ("192.0.0.170", RESERVED),
            ("192.88.99.1", RESERVED),
            ("240.0.0.1", RESERVED),
            ("100.64.0.0", "a private address"),
            ("100.127.255.255", "a private address"),
            // Other clouds' metadata services.
            ("100.100.100.200", METADATA),
            ("169.254.170.2", METADATA),
            ("169.254.170.23", METADATA),
            ("169.254.42.42", METADATA),
            ("168.63.129.16", METADATA),
            ("fd20:ce::254", METADATA),
            ("fd00:ec2::23", METADATA),
            ("fd00:42::42", METADATA),
            ("::ffff:100.100.100.200", METADATA),
            ("2002:a83f:8110::1", METADATA),
        ] {
            assert_eq!(special_class(ip.parse().unwrap()), Some(class), "{ip}");
        }
        for public in [
            "93.184.215.14",
            "2606:2800:21f:cb07:6820:80da:af6b:8b2c",
            "::ffff:93.184.215.14",
            "64:ff9b::5db8:d70e",
            "2002:5db8:d70e::1",
            "2001:0:5db8:d70e:0:0:a247:28f1",
            "2606:2800:21f:cb07:200:5efe:5db8:d70e",
            // Next to the special ranges.
            "192.0.1.255",
            "192.0.3.0",
            "198.17.255.255",
            "198.20.0.0",
            "198.51.99.255",
            "203.0.114.0",
            "100.63.255.255",
            "100.128.0.0",
            "168.63.129.17",
            "2001:db9::1",
            "2001:2:1::1",
            "3fff:1000::1",
        ] {
            assert_eq!(special_class(public.parse().unwrap()), None, "{public}");
        }
    }

    fn six(a: &str) -> Ipv6Addr {
        a.parse().unwrap()
    }

    fn four(a: &str) -> Ipv4Addr {
        a.parse().unwrap()
    }

    #[test]
    fn each_form_yields_the_ipv4_address_it_carries() {
        use Embedding::*;
        for (ip, want) in [
            // RFC 4291 2.5.5.2 and 2.5.5.1.
            ("::ffff:127.0.0.1", vec![(Mapped, "127.0.0.1")]),
            ("::10.1.2.3", vec![(Compatible, "10.1.2.3")]),
            // RFC 2765 2.1.
            ("::ffff:0:a9fe:a9fe", vec![(Translated, "169.254.169.254")]),
            // RFC 6052 2.1; 2.4's example 192.0.2.33 in the well-known prefix.
            ("64:ff9b::c000:221", vec![(Nat64, "192.0.2.33")]),
            // RFC 8215 with RFC 6052 2.2's lengths: 192.0.2.33 at /48, then
            // at /96.
            (
                "64:ff9b:1:c000:2:2100::",
                vec![
                    (Nat64Local(48), "192.0.2.33"),
                    (Nat64Local(56), "0.2.33.0"),
                    (Nat64Local(64), "2.33.0.0"),
                    (Nat64Local(96), "0.0.0.0"),
                ],
            ),
            (
                "64:ff9b:1::c000:221",
                vec![
                    (Nat64Local(48), "0.0.0.0"),
                    (Nat64Local(56), "0.0.0.0"),
                    (Nat64Local(64), "0.0.0.192"),
                    (Nat64Local(96), "192.0.2.33"),
                ],
            ),
            // RFC 3056 2: 2002:V4ADDR::/48.
            ("2002:7f00:1::1", vec![(SixToFour, "127.0.0.1")]),
            (
                "2002:a9fe:a9fe:1:2:3:4:5",
                vec![(SixToFour, "169.254.169.254")],
            ),
            // RFC 4380 4: server 65.54.227.120, client 192.0.2.45 sent
            // inverted (port 40000, cone flag set).
            (
                "2001:0:4136:e378:8000:63bf:3fff:fdd2",
                vec![
                    (TeredoServer, "65.54.227.120"),
                    (TeredoClient, "192.0.2.45"),
                ],
            ),
            (
                "2001:0:7f00:1::f5ff:fffe",
                vec![(TeredoServer, "127.0.0.1"), (TeredoClient, "10.0.0.1")],
            ),
            // RFC 5214 6.1, under any prefix: local and global forms.
            ("fe80::5efe:c0a8:101", vec![(Isatap, "192.168.1.1")]),
            ("2001:db8::200:5efe:7f00:1", vec![(Isatap, "127.0.0.1")]),
            (
                "2002:5db8:d70e:1:200:5efe:a00:1",
                vec![(SixToFour, "93.184.215.14"), (Isatap, "10.0.0.1")],
            ),
            // None.
            ("::", vec![]),
            ("::1", vec![]),
            ("2606:2800:21f:cb07:6820:80da:af6b:8b2c", vec![]),
            ("2001:db8::7f00:1", vec![]),
            ("2003:7f00:1::1", vec![]),
            ("2001:1:7f00:1::1", vec![]),
            ("2001:db8::400:5efe:7f00:1", vec![]),
        ] {
            let want: Vec<(Embedding, Ipv4Addr)> =
                want.into_iter().map(|(e, a)| (e, four(a))).collect();
            assert_eq!(embedded_ipv4(six(ip)), want, "{ip}");
        }
    }

    #[test]
    fn every_embedded_special_address_is_judged_as_the_address_itself() {
        for inner in [
            "127.0.0.1",
            "10.0.0.1",
            "172.16.5.4",
            "192.168.1.1",
            "100.64.0.1",
            "169.254.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
        ] {
            let a = four(inner);
            let class = special_class(IpAddr::V4(a)).unwrap();
            let [p, q, r, t] = a.octets().map(u16::from);
            let (hi, lo) = ((p << 8) | q, (r << 8) | t);
            for ip in [
                format!("::ffff:{inner}"),
                format!("::ffff:0:{inner}"),
                format!("64:ff9b::{inner}"),
                format!("2002:{hi:x}:{lo:x}::1"),
                format!("2001:0:{hi:x}:{lo:x}::1"),
                format!("2001:0:5db8:d70e::{:x}:{:x}", !hi, !lo),
                format!("2001:db8:1:2:0:5efe:{hi:x}:{lo:x}"),
                format!("2001:db8:1:2:200:5efe:{hi:x}:{lo:x}"),
            ] {
                let got = classify(ip.parse().unwrap()).unwrap();
                assert_eq!(got.class, class, "{ip}");
                if !ip.starts_with("::ffff:") {
                    assert_eq!(got.via.map(|(_, v)| v), Some(a), "{ip}");
                }
                // Whatever it carries, it is not loopback to the gate.
                assert!(!is_loopback(ip.parse().unwrap()) || ip.starts_with("::ffff:127."));
            }
        }
        // A metadata reading wins over another special one.
        let teredo = classify(six("2001:0:a00:1::5601:5601").into()).unwrap();
        assert_eq!(teredo.class, METADATA);
        assert_eq!(
            teredo.via,
            Some((Embedding::TeredoClient, four("169.254.169.254")))
        );
        // Local-use NAT64 is private whatever it carries; metadata first.
        let local = classify(six("64:ff9b:1::a9fe:a9fe").into()).unwrap();
        assert_eq!(local.class, METADATA);
        assert_eq!(
            local.via,
            Some((Embedding::Nat64Local(96), four("169.254.169.254")))
        );
    }
}
