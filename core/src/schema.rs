//! The JSON Schema (draft 2020-12) of every JSON object `dsh-exec` prints,
//! generated from the types that print them and committed under `schema/`
//! (`cargo run --example gen_docs`; `tests/it/generated_docs.rs` fails on
//! drift, and the tests validate real output against each file).
//!
//! Field names and values are kept as they have been printed: a change may
//! only add.

use crate::error::ErrorReport;
use crate::jobs::{JobDetached, JobListing, JobStarted, JobWaited, ReadReply};
use crate::render::marker::ParsedStatus;
use crate::result::schema_of;

/// Every schema: (file stem under `schema/`, the schema, what prints it).
pub fn all() -> Vec<(&'static str, serde_json::Value, &'static str)> {
    vec![
        (
            "run-result",
            crate::result::json_schema(),
            "dsh-exec --json; job wait --json once finished",
        ),
        (
            "error",
            schema_of::<ErrorReport>(&[]),
            "any command with --json when dsh-exec itself fails",
        ),
        (
            "job-started",
            schema_of::<JobStarted>(&[]),
            "dsh-exec --background --json",
        ),
        (
            "job-detached",
            schema_of::<JobDetached>(&[]),
            "dsh-exec --detach-after D --json, the command still running",
        ),
        (
            "job-read",
            schema_of::<ReadReply>(&["result"]),
            "dsh-exec job read --json",
        ),
        (
            "job-wait",
            schema_of::<JobWaited>(&[]),
            "dsh-exec job wait --json",
        ),
        (
            "job-list",
            schema_of::<Vec<JobListing>>(&[]),
            "dsh-exec job list --json",
        ),
        (
            "explain",
            crate::render::explain_schema(),
            "dsh-exec explain --json",
        ),
        (
            "event",
            crate::events::json_schema(),
            "dsh-exec --events, each line",
        ),
        (
            "parse-status",
            schema_of::<ParsedStatus>(&["detached", "limit_exceeded"]),
            "dsh-exec parse-status",
        ),
    ]
}
