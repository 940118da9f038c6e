//! Exit statuses of `dsh-exec` itself, as GNU `timeout(1)` has them: 124
//! for a timeout, 125 for the tool's own failure, 128+N for a signal.

/// The deadline passed (the command may still have exited 0 after a
/// trapped SIGTERM).
pub const TIMEOUT: i32 = 124;
/// `dsh-exec` itself failed: every [`crate::Error`], and a sandbox
/// runner failure (the command never ran).
pub const INFRASTRUCTURE: i32 = 125;
/// A usage error: a bad flag or value, before anything ran. 125, as
/// timeout(1), env(1) and nice(1) exit for their own failures, usage
/// included, so that it never passes for the command's own 2 (make,
/// grep); the JSON error object's code says `USAGE`.
pub const USAGE: i32 = 125;
/// Death by (or abort by) signal S gives `SIGNAL_BASE + S`, as in sh(1).
pub const SIGNAL_BASE: i32 = 128;
