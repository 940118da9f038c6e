//! Where a resolved value came from: a flag, the configuration file, or a
//! built-in default. Every value of the spec carries its origin, so
//! `explain` can say why a run is configured as it is.

use serde::{Deserialize, Serialize};

/// Where a resolved value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// A command-line flag (or a library caller's explicit value).
    Flag,
    /// The configuration file (its path is `Spec::config_file`).
    Config,
    /// A built-in default.
    Default,
}

impl Origin {
    /// `flag`, `config` or `default`.
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Flag => "flag",
            Origin::Config => "config",
            Origin::Default => "default",
        }
    }
}

/// A resolved value and its origin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sourced<T> {
    /// The value.
    pub value: T,
    /// Where it came from.
    pub origin: Origin,
    /// Set when a cap of the configuration file lowered the value: what was
    /// asked for and which cap applied, e.g. `2h capped at 1h`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capped: Option<String>,
}

impl<T> Sourced<T> {
    /// Flag over config file over built-in default.
    pub(crate) fn pick(flag: Option<T>, config: Option<T>, default: impl FnOnce() -> T) -> Self {
        let (value, origin) = match (flag, config) {
            (Some(v), _) => (v, Origin::Flag),
            (None, Some(v)) => (v, Origin::Config),
            (None, None) => (default(), Origin::Default),
        };
        Sourced {
            value,
            origin,
            capped: None,
        }
    }
}
