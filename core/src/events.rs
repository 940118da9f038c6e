//! Live events of a run (`--events`): what happens, as it happens, one
//! typed [`Event`] at a time, ending with the whole [`RunResult`].
//!
//! The command line writes them as NDJSON on stdout, one JSON object a
//! line; a library caller hands [`crate::Prepared::events`] an
//! [`EventSink`] and receives the same values. The order of one run:
//!
//! 1. `start`: a summary of the resolved spec and the command's pid;
//! 2. `notice`: each warning of the preparation and each value a cap
//!    lowered;
//! 3. `stdout` and `stderr`: the output in chunks, coalesced so that each
//!    stream has at most [`CHUNKS_PER_SECOND`] a second; text where the
//!    chunk is UTF-8 (a character cut by a chunk's end waits for the next),
//!    base64 with `"encoding": "base64"` where it is not;
//! 4. when the run has ended, from the same facts as the result: one
//!    `denial` per denial, `limit` when a limit was reached;
//! 5. `exit`, last, with the whole result.
//!
//! Memory stays bounded: each stream's chunk in the making holds at most
//! that stream's budget (`--stdout-max-bytes`, `--stderr-max-bytes`); a
//! consumer slower than the command loses the oldest of it from the events
//! only, told by a `dropped` event that counts the bytes, and the capture
//! and the spill file keep every byte, as under `--stream`.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use serde::{Deserialize, Serialize};

use crate::limits::LimitKind;
use crate::result::RunResult;
use crate::sandbox::denial::DenialFact;

/// The most chunk events a stream gets in a second: 20 (one each
/// [`CHUNK_PERIOD`]).
pub const CHUNKS_PER_SECOND: u32 = 20;

/// How long output is gathered into one chunk: 50 ms.
pub const CHUNK_PERIOD: Duration = Duration::from_millis(1000 / CHUNKS_PER_SECOND as u64);

/// Where a run's events go: called once per event, in order, from the
/// thread that drives the run and, for the output's chunks, from a thread
/// of its own (never two calls at once).
pub type EventSink = Arc<dyn Fn(Event) + Send + Sync>;

/// One event of a run (`--events`: one JSON object per line, its kind in
/// `event`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "event", rename_all = "snake_case")]
#[schemars(deny_unknown_fields)]
pub enum Event {
    /// The command was started: the resolved spec's summary.
    Start(Start),
    /// Output the command wrote on stdout.
    Stdout(Chunk),
    /// Output the command wrote on stderr.
    Stderr(Chunk),
    /// A warning of the preparation, or a value a cap lowered.
    Notice {
        /// The notice, one line.
        text: String,
    },
    /// Output the events could not carry: a consumer slower than the
    /// command (the result and its spill file still hold it).
    Dropped {
        /// `stdout` or `stderr`.
        stream: String,
        /// How many bytes, since the previous `dropped` event of the stream.
        bytes: u64,
    },
    /// A refusal of the sandbox, as the result's `sandbox.denials` has it
    /// (sent when the run has ended).
    Denial(DenialFact),
    /// The resource limit the run reached (sent when the run has ended).
    Limit {
        /// `memory`, `cpu`, `pids` or `file_size`.
        kind: LimitKind,
    },
    /// The run has ended: its whole result, as `--json` prints it. Always
    /// the last event.
    Exit {
        /// The result.
        result: Box<RunResult>,
    },
    /// `dsh-exec` itself failed (exit status 125); nothing more follows.
    Error {
        /// The stable code, as in `{"error": {"code", ...}}`.
        code: String,
        /// What failed, one line.
        message: String,
    },
}

/// The `start` event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Start {
    /// The script given to `bash -c`.
    pub command: String,
    /// The absolute working directory (lossy UTF-8).
    pub workdir: String,
    /// The command's pid.
    pub pid: i32,
    /// The deadline, in milliseconds; `null` for none.
    pub timeout_ms: Option<u64>,
    /// The idle deadline, in milliseconds; `null` for none.
    pub idle_timeout_ms: Option<u64>,
    /// The budget of stdout kept in the result, in bytes.
    pub stdout_max_bytes: u64,
    /// The budget of stderr kept in the result, in bytes.
    pub stderr_max_bytes: u64,
    /// The sandbox mode; `null` without one.
    pub sandbox: Option<String>,
    /// The network policy (`allow`, `deny`, `loopback`, `allow-list`);
    /// `null` without a sandbox.
    pub network: Option<String>,
}

/// A chunk of one stream's output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Chunk {
    /// The bytes: as text, or base64 when `encoding` says so.
    pub text: String,
    /// `base64` when the bytes are not UTF-8; absent for text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding: Option<String>,
}

impl Chunk {
    /// The chunk of `bytes`: text when they are UTF-8, else base64.
    pub fn of(bytes: &[u8]) -> Chunk {
        match std::str::from_utf8(bytes) {
            Ok(text) => Chunk {
                text: text.to_owned(),
                encoding: None,
            },
            Err(_) => Chunk {
                text: base64::engine::general_purpose::STANDARD.encode(bytes),
                encoding: Some("base64".into()),
            },
        }
    }

    /// The bytes the chunk carries; `None` for base64 that does not decode.
    pub fn bytes(&self) -> Option<Vec<u8>> {
        match self.encoding.as_deref() {
            None => Some(self.text.as_bytes().to_vec()),
            Some(_) => base64::engine::general_purpose::STANDARD
                .decode(&self.text)
                .ok(),
        }
    }
}

/// The events a result adds at the end of its run: its denials, its
/// limit, and the `exit` event with the result itself.
pub fn closing(result: &RunResult) -> Vec<Event> {
    let mut events: Vec<Event> = result
        .sandbox
        .iter()
        .flat_map(|s| s.denials.iter().cloned().map(Event::Denial))
        .collect();
    if let Some(kind) = result.limit_exceeded {
        events.push(Event::Limit { kind });
    }
    events.push(Event::Exit {
        result: Box::new(result.clone()),
    });
    events
}

/// The JSON Schema of one event line.
pub fn json_schema() -> serde_json::Value {
    crate::result::schema_of::<Event>(&["encoding"])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunk_is_text_when_it_can_be_and_base64_when_not() {
        let c = Chunk::of("héllo\n".as_bytes());
        assert_eq!(
            serde_json::to_string(&Event::Stdout(c.clone())).unwrap(),
            r#"{"event":"stdout","text":"héllo\n"}"#
        );
        assert_eq!(c.bytes().unwrap(), "héllo\n".as_bytes());
        let c = Chunk::of(b"\xff\x00a");
        assert_eq!(
            serde_json::to_string(&Event::Stderr(c.clone())).unwrap(),
            r#"{"event":"stderr","text":"/wBh","encoding":"base64"}"#
        );
        assert_eq!(c.bytes().unwrap(), b"\xff\x00a");
    }
}
