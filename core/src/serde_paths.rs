//! Serializing paths, which may not be UTF-8.
//!
//! serde refuses a `Path` that is not valid UTF-8. Two representations are
//! used instead:
//!
//! - `lossy_*`, for what `dsh-exec` prints (`--json`, `explain --json`): a
//!   string with U+FFFD in place of invalid bytes; the exact bytes stay in
//!   the files themselves.
//! - `exact_*`, for what one `dsh-exec` process hands another (the spec a
//!   job's supervisor receives): a string when the path is UTF-8, else its
//!   bytes as an array, so every path round-trips byte for byte.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::origin::Sourced;

/// A path as a (lossy) string.
pub fn lossy_path<S: Serializer>(p: &Path, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&p.to_string_lossy())
}

/// An optional path as a (lossy) string or `null`.
pub fn lossy_opt_path<S: Serializer>(p: &Option<PathBuf>, s: S) -> Result<S::Ok, S::Error> {
    match p {
        Some(p) => lossy_path(p, s),
        None => s.serialize_none(),
    }
}

/// A path exactly: text when UTF-8, else bytes.
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum Exact {
    Text(String),
    Bytes(Vec<u8>),
}

impl Exact {
    fn of(p: &Path) -> Exact {
        match p.to_str() {
            Some(s) => Exact::Text(s.to_owned()),
            None => Exact::Bytes(p.as_os_str().as_bytes().to_vec()),
        }
    }

    fn into_path(self) -> PathBuf {
        match self {
            Exact::Text(s) => s.into(),
            Exact::Bytes(b) => OsString::from_vec(b).into(),
        }
    }
}

/// `#[serde(with = "exact_path")]`: a `PathBuf`, byte for byte.
pub mod exact_path {
    use super::*;

    /// Serializes `p` exactly.
    pub fn serialize<S: Serializer>(p: &Path, s: S) -> Result<S::Ok, S::Error> {
        Exact::of(p).serialize(s)
    }

    /// Deserializes what [`serialize`] wrote.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<PathBuf, D::Error> {
        Exact::deserialize(d).map(Exact::into_path)
    }
}

/// `#[serde(with = "exact_opt_path")]`: an `Option<PathBuf>`, byte for byte.
pub mod exact_opt_path {
    use super::*;

    /// Serializes `p` exactly.
    pub fn serialize<S: Serializer>(p: &Option<PathBuf>, s: S) -> Result<S::Ok, S::Error> {
        p.as_deref().map(Exact::of).serialize(s)
    }

    /// Deserializes what [`serialize`] wrote.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<PathBuf>, D::Error> {
        Ok(Option::<Exact>::deserialize(d)?.map(Exact::into_path))
    }
}

/// `#[serde(with = "exact_paths")]`: a `Vec<PathBuf>`, byte for byte.
pub mod exact_paths {
    use super::*;

    /// Serializes `ps` exactly.
    pub fn serialize<S: Serializer>(ps: &[PathBuf], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(ps.iter().map(|p| Exact::of(p)))
    }

    /// Deserializes what [`serialize`] wrote.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<PathBuf>, D::Error> {
        Ok(Vec::<Exact>::deserialize(d)?
            .into_iter()
            .map(Exact::into_path)
            .collect())
    }
}

/// `#[serde(with = "exact_sourced_path")]`: a `Sourced<PathBuf>`, byte for byte.
pub mod exact_sourced_path {
    use super::*;

    /// Serializes `p` exactly.
    pub fn serialize<S: Serializer>(p: &Sourced<PathBuf>, s: S) -> Result<S::Ok, S::Error> {
        Sourced {
            value: Exact::of(&p.value),
            origin: p.origin,
            capped: p.capped.clone(),
        }
        .serialize(s)
    }

    /// Deserializes what [`serialize`] wrote.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Sourced<PathBuf>, D::Error> {
        let s = Sourced::<Exact>::deserialize(d)?;
        Ok(Sourced {
            value: s.value.into_path(),
            origin: s.origin,
            capped: s.capped,
        })
    }
}
