//! Signals by name: the [`Signal`] type the spec, the result and the
//! process control share, named as signal(7) names them.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A signal, by number, named as signal(7) names it: `SIGKILL`,
/// `SIGRTMIN+2`, or `SIG<n>` for a number with no name. Serialized as its
/// name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Signal(i32);

impl Signal {
    /// SIGINT (2).
    pub const SIGINT: Signal = Signal(nix::libc::SIGINT);
    /// SIGKILL (9).
    pub const SIGKILL: Signal = Signal(nix::libc::SIGKILL);
    /// SIGTERM (15).
    pub const SIGTERM: Signal = Signal(nix::libc::SIGTERM);

    /// The first signal of the deadline's escalation named as `--signal`
    /// takes it, as timeout(1)'s `-s`: `TERM`, `SIGTERM` or `15`. Errors
    /// with a one-line message for an unknown signal, and for those that
    /// stop, continue or are ignored by default (STOP, TSTP, TTIN, TTOU,
    /// CONT, CHLD, WINCH, URG): they would end nothing.
    pub fn parse_first(s: &str) -> Result<Signal, String> {
        let upper = s.to_ascii_uppercase();
        let named = if upper.starts_with("SIG") {
            upper.clone()
        } else {
            format!("SIG{upper}")
        };
        let sig = match s.parse::<i32>() {
            Ok(n) => nix::sys::signal::Signal::try_from(n).ok(),
            Err(_) => named.parse::<nix::sys::signal::Signal>().ok(),
        }
        .ok_or_else(|| {
            format!("invalid signal '{s}' (a name such as TERM, INT, KILL, or a number)")
        })?;
        use nix::sys::signal::Signal as S;
        if matches!(
            sig,
            S::SIGSTOP
                | S::SIGTSTP
                | S::SIGTTIN
                | S::SIGTTOU
                | S::SIGCONT
                | S::SIGCHLD
                | S::SIGWINCH
                | S::SIGURG
        ) {
            return Err(format!(
                "--signal {s}: {} stops, continues or is ignored by default, and would end nothing",
                sig.as_str()
            ));
        }
        Ok(Signal(sig as i32))
    }

    /// The signal numbered `n` (any number a `waitid` status can carry).
    pub fn from_number(n: i32) -> Signal {
        Signal(n)
    }

    /// Its number.
    pub fn number(self) -> i32 {
        self.0
    }

    /// Its conventional name, e.g. `SIGKILL`, `SIGRTMIN+2`.
    pub fn name(self) -> String {
        let n = self.0;
        if let Ok(sig) = nix::sys::signal::Signal::try_from(n) {
            return sig.as_str().to_string();
        }
        let (min, max) = (nix::libc::SIGRTMIN(), nix::libc::SIGRTMAX());
        if n == min {
            return "SIGRTMIN".into();
        }
        if (min..=max).contains(&n) {
            return format!("SIGRTMIN+{}", n - min);
        }
        format!("SIG{n}")
    }

    /// The signal a name produced by [`Signal::name`] stands for.
    pub fn from_name(name: &str) -> Option<Signal> {
        if let Ok(sig) = name.parse::<nix::sys::signal::Signal>() {
            return Some(Signal(sig as i32));
        }
        if name == "SIGRTMIN" {
            return Some(Signal(nix::libc::SIGRTMIN()));
        }
        if let Some(k) = name.strip_prefix("SIGRTMIN+") {
            return k
                .parse::<i32>()
                .ok()
                .map(|k| Signal(nix::libc::SIGRTMIN() + k));
        }
        name.strip_prefix("SIG")?.parse().ok().map(Signal)
    }
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

impl Serialize for Signal {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.name())
    }
}

impl<'de> Deserialize<'de> for Signal {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Signal, D::Error> {
        let name = String::deserialize(d)?;
        Signal::from_name(&name)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown signal {name}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_names_round_trip() {
        for n in 1..=64 {
            let sig = Signal::from_number(n);
            assert_eq!(Signal::from_name(&sig.name()), Some(sig), "{n}");
        }
        assert_eq!(Signal::SIGKILL.name(), "SIGKILL");
        assert_eq!(Signal::from_number(11).name(), "SIGSEGV");
        assert_eq!(
            serde_json::to_string(&Signal::SIGTERM).unwrap(),
            "\"SIGTERM\""
        );
    }
}
