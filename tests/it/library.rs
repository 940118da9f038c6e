//! The library API drives a run from a tokio program (examples/run_from_tokio).
use crate::support::*;

#[test]
fn the_tokio_example_runs_a_command_through_the_library() {
    let out = std::process::Command::new(example("run_from_tokio"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.starts_with(
            "hello from bash\n[stderr]\noops\n[exit code: 3]\nexit status for the caller: 3\n\
             parsed back: Some(ParsedStatus { exit_code: Some(3), signal: None, timed_out: false, aborted: false, detached: None, limit_exceeded: None })\n"
        ),
        "{text}"
    );
    let json = text
        .lines()
        .last()
        .unwrap()
        .strip_prefix("as JSON: ")
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    assert_eq!(v["timeout_ms"], 5000);
}

#[test]
fn the_events_example_receives_the_runs_events_as_typed_values() {
    let out = std::process::Command::new(example("events_from_tokio"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "start: echo one; sleep 0.1; echo two >&2\nstdout: one\nstderr: two\nexit: Some(0)\n"
    );
}
