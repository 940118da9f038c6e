//! The hidden entry point of a background job's supervisor:
//! `dsh-exec __supervise DIR ID`, with the spec handed over on descriptor 3
//! (see `dsh_exec_core::jobs`).

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use dsh_exec_core::exit;

use super::run::runtime;
use crate::output::{say, status, usage_error};

/// The hidden first argument that makes `dsh-exec` a job's supervisor.
pub(crate) const SUPERVISE: &str = "__supervise";

/// Runs the job in DIR as its supervisor; exits 0 once its result is
/// written, 125 when it could not be started or supervised.
pub(crate) fn main(argv: &[OsString]) -> ExitCode {
    let (Some(dir), Some(id), None) = (argv.get(2), argv.get(3), argv.get(4)) else {
        return usage_error("internal: __supervise DIR ID");
    };
    let dir = PathBuf::from(dir);
    let id = id.to_string_lossy().into_owned();
    let outcome = runtime().and_then(|rt| rt.block_on(dsh_exec_core::jobs::supervise(&dir, &id)));
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            say!("dsh-exec: error: {e} ({})", e.code());
            status(exit::INFRASTRUCTURE)
        }
    }
}
