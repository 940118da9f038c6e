//! The integration tests: one crate that drives the built `dsh-exec` binary
//! on real commands, signals, files and terminals.
//!
//! Layout:
//! - `support/`: the shared helpers: `Test`, a builder for one run of the
//!   binary, and its `Outcome`; `dsh`, `run` and `run_json` for the plain
//!   cases; `alive`, `gone_within` and `cleanup` for the processes a test
//!   starts; `poll_until` and `wait_for_line`, waits that have a deadline;
//!   `example`, which builds an example binary.
//!   `support/pty.rs` runs a program on a real pseudo-terminal (python3's
//!   `pty` module) and returns what the terminal showed.
//! - one module per behaviour (`abort`, `jobs`, `sandbox`, ...), each opening
//!   with a `//!` line that says what it covers.
//!
//! Run one behaviour with `cargo test --test it jobs::`.

mod support;

mod abort;
mod agent_files;
mod color;
mod config;
mod containment;
mod credentials;
mod deadline;
mod denials;
mod environment;
mod events;
mod exit_status;
mod explain;
mod generated_docs;
mod git_plants;
mod hostile;
mod interactive;
mod jobs;
mod json_result;
mod json_schema;
mod keep_render;
mod leftovers;
mod library;
mod limits;
mod load;
mod mcp;
mod network;
mod output_budget;
mod output_files;
mod parse_status;
mod read_deny;
mod real_work;
mod sandbox;
mod sandbox_hardening;
mod session;
mod stdin;
mod stream;
mod terminal;
mod transaction;
mod tree_sweep;
mod usage_errors;
