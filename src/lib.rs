//! dsh-exec: run one shell command safely and report exactly what happened.
//!
//! The data flow is request → spec → execution → result → rendering:
//!
//! - [`resolve`] turns a [`Request`] (what the user said) into a [`Spec`]
//!   (every value explicit, with its origin);
//! - [`run`] prepares, spawns `bash -c` in a new session, applies the deadline
//!   and aborts, captures bounded output with spill files, and returns a
//!   [`RunResult`]; [`start`] gives the [`Execution`] handle itself, from which
//!   both the foreground result and incremental reads are projections;
//! - [`render::render_text`] and [`render::parse_status`] write and read the
//!   text form; the JSON form is the serde serialization of [`RunResult`].

#![deny(missing_docs)]

pub mod cli;
pub mod config;
pub mod env;
pub mod error;
pub mod explain;
pub mod jobs;
pub mod lossy;
pub mod output;
pub mod process;
pub mod render;
pub mod result;
pub mod sandbox;
pub mod spawn;
pub mod spec;
pub mod sweep;
pub mod units;

use std::time::Instant;

pub use error::Error;
pub use output::CollectedOutput;
pub use process::{AbortSignals, AbortSource, Execution, NoAbort, Started, start};
pub use result::RunResult;
pub use spec::{Ambient, Request, Spec, UsageError, resolve};

/// Runs `spec` to its end: the foreground projection of [`start`].
///
/// Must be called within a tokio runtime with IO and time enabled (a
/// current-thread runtime is enough). Errors only on infrastructure failures
/// ([`Error`]); a nonzero exit, a timeout or an abort is a [`RunResult`].
pub async fn run(spec: &Spec, aborts: &mut impl AbortSource) -> Result<RunResult, Error> {
    match start(spec, Instant::now())? {
        Started::Running(execution) => execution.wait(aborts).await,
        Started::NotRun(result) => Ok(*result),
    }
}
