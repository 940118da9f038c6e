//! Which `bash` a run executes.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::unistd::{AccessFlags, access};

/// Used to find `bash` when the child environment has no `PATH`.
pub const FALLBACK_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The first executable `bash` on the child environment's `PATH` (else
/// [`FALLBACK_PATH`]). Relative entries are skipped: they would be checked
/// here from this process's directory and executed from the workdir.
pub fn find_shell(env: &[(OsString, OsString)]) -> Option<PathBuf> {
    let path = env
        .iter()
        .rev()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| FALLBACK_PATH.into());
    path.as_bytes()
        .split(|b| *b == b':')
        .filter(|dir| dir.first() == Some(&b'/'))
        .map(|dir| Path::new(std::ffi::OsStr::from_bytes(dir)).join("bash"))
        .find(|p| p.is_file() && access(p, AccessFlags::X_OK).is_ok())
}
