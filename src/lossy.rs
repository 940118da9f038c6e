//! Serializing paths that may not be UTF-8.
//!
//! serde refuses a `Path` that is not valid UTF-8, which would turn a run
//! in a directory with such a name into a serialization error. JSON output
//! shows these paths with U+FFFD in place of the invalid bytes instead; the
//! exact bytes stay in the files themselves.

use std::path::{Path, PathBuf};

use serde::Serializer;

/// A path as a (lossy) string.
pub fn path<S: Serializer>(p: &Path, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&p.to_string_lossy())
}

/// An optional path as a (lossy) string or `null`.
pub fn opt_path<S: Serializer>(p: &Option<PathBuf>, s: S) -> Result<S::Ok, S::Error> {
    match p {
        Some(p) => path(p, s),
        None => s.serialize_none(),
    }
}

/// A list of paths as (lossy) strings.
pub fn paths<S: Serializer>(ps: &[PathBuf], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(ps.iter().map(|p| p.to_string_lossy()))
}

/// A path with its origin, the path as a (lossy) string.
pub fn sourced_path<S: Serializer>(
    p: &crate::spec::Sourced<PathBuf>,
    s: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeStruct;
    let mut st = s.serialize_struct("Sourced", 3)?;
    st.serialize_field("value", &p.value.to_string_lossy())?;
    st.serialize_field("origin", &p.origin)?;
    if let Some(c) = &p.capped {
        st.serialize_field("capped", c)?;
    }
    st.end()
}
