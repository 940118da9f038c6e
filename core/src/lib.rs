//! The engine of `dsh-exec`: run one shell command safely and report exactly
//! what happened. The `dsh-exec` binary is a thin command line over it; this
//! crate knows nothing of command-line parsing.
//!
//! The data flow is request → spec → exec → capture → result → rendering,
//! with the sandbox and background jobs beside it:
//!
//! - [`resolve`] turns a [`Request`] (what the user said) and the
//!   [`Ambient`] facts of the process into a [`Spec`] (every value explicit,
//!   with its origin) — `request/`, `spec.rs`;
//! - [`prepare`] checks and opens what the run needs, [`start`] spawns
//!   `bash -c` in a new session and returns the [`Execution`], whose loop
//!   applies the deadline and aborts, drains and sweeps the process tree;
//!   [`run`] does all three — `exec/`;
//! - output is captured in bounded tails with spill files — `capture/`;
//! - confining modes are enforced with Landlock and seccomp — `sandbox/`;
//!   memory, process and CPU limits with cgroups — `limits/`;
//! - the outcome is a [`RunResult`] of typed facts — `result.rs`;
//! - [`render`] writes the text form and reads its marker back; the JSON
//!   form is the serde serialization of [`RunResult`];
//! - [`jobs`] runs a spec in a supervisor process of its own and serves
//!   incremental reads.
//!
//! Failures of the tool itself are [`Error`]s with stable codes; a nonzero
//! exit, a timeout or an abort is a result, never an error.

#![deny(missing_docs)]
// Only `sys` talks to the kernel directly; it alone allows `unsafe`.
#![deny(unsafe_code)]

// The layer order is `ORDER` in `tests/layering.rs`, which checks that
// each module uses only those before it; `docs/layout.md` explains it.
mod capture;
pub mod error;
pub mod events;
mod exec;
pub mod exit;
pub mod jobs;
pub mod limits;
pub mod net;
pub mod origin;
mod proctree;
pub mod render;
pub mod request;
pub mod result;
pub mod sandbox;
pub mod schema;
mod serde_paths;
pub mod signal;
pub mod spec;
#[allow(unsafe_code)]
mod sys;
pub mod transaction;
pub mod units;

pub use capture::{CollectedOutput, Delta, Keep, Pruned, prune_spill_dirs};
pub use error::{Error, ErrorCode};
pub use exec::{
    AbortSignals, AbortSource, DRAIN, Execution, FINAL_READ, NoAbort, Prepared, Started,
    StdinRefusal, init_process, prepare, release_abort_signals, run, start, stdin_holds_data,
    wipe_scrubbed_environ,
};
pub use request::{Ambient, Request, UsageError, resolve};
pub use result::RunResult;
pub use signal::Signal;
pub use spec::Spec;
