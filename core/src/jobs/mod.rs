//! Background jobs: one supervisor process per job, its state directory, and
//! the client side of `dsh-exec job read|write|wait|kill|list|prune`.
//!
//! A job is started by [`launch`]: a supervisor process (`supervisor.rs`)
//! receives the resolved spec over a socket pair, runs it with
//! [`crate::exec::start`] like any run (same budgets, spill files,
//! environment, sandbox and tree sweep), serves incremental reads over a
//! Unix socket in the job's directory (`protocol.rs`), and when the job ends
//! writes the unread output and the result there (`store.rs`). Clients read,
//! wait and kill through `client.rs`.
//!
//! A job whose supervisor is gone without a result (killed with SIGKILL) is
//! `lost`. When the supervisor holds CAP_SYS_ADMIN, the command runs as the
//! init of a new PID namespace, so the kernel kills the command's whole tree
//! when the supervisor dies; otherwise only the direct child dies with it
//! (its parent-death signal).

mod client;
mod protocol;
mod reports;
mod store;
mod supervisor;

pub use self::client::{
    Waited, WriteFailed, close_stdin, kill, progress, read, resize, wait, write,
};
pub use self::protocol::{Progress, ReadReply, WriteReply};
pub use self::reports::{JobDetached, JobListing, JobStarted, JobWaited};
pub use self::store::{
    JobMeta, Status, SupervisorRecord, all, jobs_root, meta, prune, result, status, supervisor,
    valid_id,
};
pub use self::supervisor::{Launched, SupervisorProgram, discard, launch, supervise};
