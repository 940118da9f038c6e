//! The hosts of `--network allow=HOST[,HOST...]`: how a rule is written,
//! and which destinations it lets through the proxy.
//!
//! A rule is a name or an address, with an optional port:
//! - `example.org`: that name exactly;
//! - `*.example.org`: every name below it (`a.example.org`,
//!   `a.b.example.org`), not `example.org` itself, as a TLS wildcard and
//!   sandbox-runtime's allow-list read it;
//! - `10.0.0.5`, `[::1]`: that address;
//! - any of them with `:PORT` (`example.org:8443`, `[::1]:8080`): that port
//!   only. Without one, ports 80 and 443.
//!
//! Names are compared in lower case, without a final dot (RFC 4343: DNS
//! names are case-insensitive).

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The ports a rule without one allows: 80 (http) and 443 (https).
pub const DEFAULT_PORTS: [u16; 2] = [80, 443];

/// What a rule names.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum HostPattern {
    /// One name, exactly (lower case, no final dot).
    Name(String),
    /// Every name below this suffix (`*.example.org` holds `example.org`).
    Below(String),
    /// One address.
    Addr(IpAddr),
}

/// One entry of `--network allow=`: a host pattern and its port.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HostRule {
    /// The host.
    pub host: HostPattern,
    /// The one port allowed; `None`: [`DEFAULT_PORTS`].
    pub port: Option<u16>,
}

/// A name as compared: lower case, without a final dot.
pub fn normalize(name: &str) -> String {
    name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase()
}

/// Whether `name` (normalized) is a DNS name a rule may hold: labels of
/// letters, digits, `-` and `_`, 1 to 63 bytes each, 253 bytes in all
/// (RFC 1035 2.3.4; `_` for service names such as `_dmarc`).
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

impl HostRule {
    /// Whether this rule lets `host` (normalized name or address literal)
    /// on `port` through.
    pub fn matches(&self, host: &str, port: u16) -> bool {
        let port_ok = match self.port {
            Some(p) => p == port,
            None => DEFAULT_PORTS.contains(&port),
        };
        port_ok
            && match &self.host {
                HostPattern::Name(n) => n == host,
                HostPattern::Below(suffix) => host
                    .strip_suffix(suffix.as_str())
                    .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
                HostPattern::Addr(a) => parse_addr(host) == Some(*a),
            }
    }

    /// Whether this rule names `host` itself (an exact name, or the very
    /// address): what lets a destination resolve to a private address.
    pub fn names_exactly(&self, host: &str) -> bool {
        match &self.host {
            HostPattern::Name(n) => n == host,
            HostPattern::Below(_) => false,
            HostPattern::Addr(a) => parse_addr(host) == Some(*a),
        }
    }

    /// Whether this rule names the address `addr` itself.
    pub fn names_addr(&self, addr: IpAddr) -> bool {
        matches!(self.host, HostPattern::Addr(a) if a == addr)
    }
}

/// An address literal as a host is written: `10.0.0.5`, `::1` or `[::1]`.
pub fn parse_addr(host: &str) -> Option<IpAddr> {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    bare.parse().ok()
}

impl FromStr for HostRule {
    type Err = String;

    /// Parses `HOST`, `HOST:PORT`, `*.SUFFIX[:PORT]`, `ADDR`, `[ADDR6]:PORT`.
    ///
    /// Errors with a one-line message naming the entry.
    fn from_str(s: &str) -> Result<HostRule, String> {
        let bad = |why: &str| format!("invalid host '{s}' in --network allow=: {why}");
        if s.is_empty() {
            return Err(bad("empty"));
        }
        if s.contains("://") || s.contains('/') {
            return Err(bad(
                "a host, not a URL: write pypi.org, not https://pypi.org/",
            ));
        }
        // [v6] or [v6]:port; a bare v6 address has several colons.
        let (host, port) = if let Some(rest) = s.strip_prefix('[') {
            let (addr, after) = rest.split_once(']').ok_or_else(|| bad("no closing ']'"))?;
            let port = match after {
                "" => None,
                p => Some(p.strip_prefix(':').ok_or_else(|| bad("junk after ']'"))?),
            };
            (addr, port)
        } else if s.matches(':').count() > 1 {
            (s, None)
        } else {
            match s.split_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (s, None),
            }
        };
        let port = match port {
            None => None,
            Some(p) => match p.parse::<u16>() {
                Ok(0) | Err(_) => return Err(bad("the port must be 1 to 65535")),
                Ok(n) => Some(n),
            },
        };
        if let Ok(addr) = host.parse::<IpAddr>() {
            return Ok(HostRule {
                host: HostPattern::Addr(addr),
                port,
            });
        }
        let (wild, name) = match host.strip_prefix("*.") {
            Some(rest) => (true, normalize(rest)),
            None => (false, normalize(host)),
        };
        if name.contains('*') {
            return Err(bad("'*' only as a whole first label, as in *.example.org"));
        }
        if !valid_name(&name) {
            return Err(bad("not a host name or an address"));
        }
        Ok(HostRule {
            host: if wild {
                HostPattern::Below(name)
            } else {
                HostPattern::Name(name)
            },
            port,
        })
    }
}

impl fmt::Display for HostRule {
    /// The rule as it would be written, normalized: `*.example.org:8443`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            HostPattern::Name(n) => f.write_str(n)?,
            HostPattern::Below(n) => write!(f, "*.{n}")?,
            HostPattern::Addr(IpAddr::V6(a)) if self.port.is_some() => write!(f, "[{a}]")?,
            HostPattern::Addr(a) => write!(f, "{a}")?,
        }
        match self.port {
            Some(p) => write!(f, ":{p}"),
            None => Ok(()),
        }
    }
}

impl Serialize for HostRule {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for HostRule {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<HostRule, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl schemars::JsonSchema for HostRule {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "HostRule".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "A host of --network allow=: example.org, *.example.org, 10.0.0.5 or [::1], each with an optional :PORT"
        })
    }
}

/// Parses the comma-separated list of one `allow=HOSTS` value.
///
/// Errors with the first bad entry's message.
pub fn parse_list(list: &str) -> Result<Vec<HostRule>, String> {
    if list.trim().is_empty() {
        return Err(
            "--network allow= needs at least one host (--network allow, with no list, \
             allows every host)"
                .into(),
        );
    }
    list.split(',').map(|h| h.trim().parse()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(s: &str) -> HostRule {
        s.parse().unwrap()
    }

    #[test]
    fn rules_parse_names_wildcards_addresses_and_ports() {
        assert_eq!(
            rule("Example.ORG."),
            HostRule {
                host: HostPattern::Name("example.org".into()),
                port: None
            }
        );
        assert_eq!(rule("*.example.org:8443").to_string(), "*.example.org:8443");
        assert_eq!(rule("[::1]:8080").to_string(), "[::1]:8080");
        assert_eq!(rule("::1").to_string(), "::1");
        assert_eq!(rule("10.0.0.5:5432").port, Some(5432));
        for bad in [
            "",
            "*",
            "*.",
            "a.*.b",
            "ex ample.org",
            "a:0",
            "a:70000",
            "a:",
            "[::1",
            "-a.org",
        ] {
            assert!(bad.parse::<HostRule>().is_err(), "{bad:?} parsed");
        }
        assert!(parse_list(" ").is_err());
        assert_eq!(parse_list("a.org, b.org:81").unwrap().len(), 2);
    }

    #[test]
    fn a_wildcard_holds_names_below_it_and_not_itself() {
        let r = rule("*.example.org");
        assert!(r.matches("a.example.org", 443));
        assert!(r.matches("a.b.example.org", 80));
        assert!(!r.matches("example.org", 443));
        assert!(!r.matches("badexample.org", 443));
        assert!(!r.matches("a.example.org", 8443));
        assert!(!r.names_exactly("a.example.org"));
        let r = rule("localhost:8080");
        assert!(r.matches("localhost", 8080));
        assert!(!r.matches("localhost", 80));
        assert!(r.names_exactly("localhost"));
        let r = rule("[::1]:9");
        assert!(r.matches("::1", 9) && r.matches("[::1]", 9));
        assert!(r.names_addr("::1".parse().unwrap()));
    }
}
