//! `--events`: NDJSON on stdout, one event a line, in the order of the run
//! (start, notices, output chunks, denials and limits, exit last), each
//! line valid under `schema/event.schema.json`.
use crate::support::*;
use serde_json::{Value, json};

/// Runs `dsh-exec --events ARGS`: (the events, exit status), each checked
/// against the event schema.
fn events(args: &[&str]) -> (Vec<Value>, i32) {
    let out = Test::new().arg("--events").args(args).run();
    let events: Vec<Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    for e in &events {
        assert_matches_schema("event", e);
    }
    (events, out.status)
}

/// Runs `command` (a `Command` for `dsh-exec --events ...`, or anything
/// that prints lines of events) with nobody reading its stdout for
/// `stall`, then reads it all: (the events, exit status).
fn read_after(
    mut command: std::process::Command,
    stall: std::time::Duration,
) -> (Vec<Value>, std::process::ExitStatus) {
    use std::io::Read;
    let mut child = command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(stall);
    let mut text = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut text)
        .unwrap();
    let status = child.wait().unwrap();
    let events = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:.80}")))
        .collect();
    (events, status)
}

/// The kinds of `events`, in order.
fn kinds(events: &[Value]) -> Vec<&str> {
    events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect()
}

#[test]
fn a_run_is_told_in_order_with_the_whole_result_last() {
    let dir = tempfile::tempdir().unwrap();
    let (ev, status) = events(&[
        "-C",
        dir.path().to_str().unwrap(),
        "--",
        "echo out; sleep 0.2; echo err >&2; sleep 0.2; exit 3",
    ]);
    assert_eq!(status, 3);
    assert_eq!(kinds(&ev), ["start", "stdout", "stderr", "exit"]);
    let start = &ev[0];
    assert_eq!(
        start["command"],
        "echo out; sleep 0.2; echo err >&2; sleep 0.2; exit 3"
    );
    assert_eq!(start["workdir"], dir.path().to_str().unwrap());
    assert!(start["pid"].as_i64().unwrap() > 1);
    assert_eq!(start["timeout_ms"], 600_000);
    assert_eq!(start["sandbox"], Value::Null);
    assert_eq!(ev[1], json!({"event": "stdout", "text": "out\n"}));
    assert_eq!(ev[2], json!({"event": "stderr", "text": "err\n"}));
    let result = &ev[3]["result"];
    assert_eq!(result["exit_code"], 3);
    assert_eq!(result["stdout"]["text"], "out\n");
    assert_eq!(result["stderr"]["text"], "err\n");
    assert_matches_schema("run-result", result);
}

#[test]
fn a_character_cut_between_writes_waits_and_other_bytes_are_base64() {
    let (ev, status) = events(&[
        "--",
        "printf 'caf\\xc3'; sleep 0.2; printf '\\xa9\\n'; sleep 0.2; printf '\\xff\\xfe' >&2",
    ]);
    assert_eq!(status, 0);
    assert_eq!(kinds(&ev), ["start", "stdout", "stdout", "stderr", "exit"]);
    assert_eq!(ev[1]["text"], "caf");
    assert_eq!(ev[2]["text"], "é\n");
    assert_eq!(
        ev[3],
        json!({"event": "stderr", "text": "//4=", "encoding": "base64"})
    );
}

/// Lays `events`' chunks of `stream` and its `dropped` counts end to end
/// and checks each chunk against `expected` at its place: no chunk joins
/// bytes across a gap, and the whole adds up. Returns (bytes sent, bytes
/// dropped).
fn stitch(events: &[Value], stream: &str, expected: &[u8]) -> (u64, u64) {
    let (mut at, mut sent, mut dropped) = (0usize, 0u64, 0u64);
    for e in events {
        if e["event"] == "dropped" && e["stream"] == stream {
            let n = e["bytes"].as_u64().unwrap();
            at += n as usize;
            dropped += n;
        } else if e["event"] == stream {
            let text = e["text"].as_str().unwrap().as_bytes();
            let there = expected.get(at..at + text.len());
            assert!(
                there == Some(text),
                "a chunk of {} bytes at {at} is not the stream's bytes there",
                text.len()
            );
            at += text.len();
            sent += text.len() as u64;
        }
    }
    assert_eq!(at, expected.len());
    (sent, dropped)
}

/// `seq 1 N`'s output.
fn seq(n: u32) -> Vec<u8> {
    (1..=n)
        .map(|i| format!("{i}\n"))
        .collect::<String>()
        .into_bytes()
}

#[test]
fn output_past_the_budget_spills_and_the_events_stay_bounded() {
    let (ev, status) = events(&["--stdout-max-bytes", "4K", "--", "seq 1 2000000"]);
    assert_eq!(status, 0);
    let result = &ev.last().unwrap()["result"];
    assert_eq!(ev.last().unwrap()["event"], "exit");
    let expected = seq(2_000_000);
    assert_eq!(result["stdout"]["total_bytes"], expected.len());
    let spill = result["stdout"]["spill_path"].as_str().unwrap();
    assert_eq!(std::fs::read(spill).unwrap(), expected);
    // No chunk holds more than the budget.
    assert!(
        ev.iter()
            .filter(|e| e["event"] == "stdout")
            .all(|e| e["text"].as_str().unwrap().len() <= 4096)
    );
    // Every byte is in a chunk at its place or counted in a `dropped`
    // event there; the result counts the same.
    let (sent, dropped) = stitch(&ev, "stdout", &expected);
    assert!(sent > 0);
    assert_eq!(
        result["stdout"]["live_dropped_bytes"].as_u64().unwrap_or(0),
        dropped
    );
    let _ = std::fs::remove_dir_all(std::path::Path::new(spill).parent().unwrap());
}

#[test]
fn a_slow_consumer_gets_every_gap_told_where_it_is() {
    // The consumer starts reading after 0.5 s: the queue to the events
    // thread overflows while it is blocked, and those gaps are told too.
    for _ in 0..3 {
        let mut c = dsh();
        c.args(["--events", "--", "seq 1 2000000; seq 1 300000 >&2"]);
        let (ev, status) = read_after(c, std::time::Duration::from_millis(500));
        assert!(status.success());
        assert_eq!(ev.last().unwrap()["event"], "exit");
        let result = &ev.last().unwrap()["result"];
        let (_, out_dropped) = stitch(&ev, "stdout", &seq(2_000_000));
        let (_, err_dropped) = stitch(&ev, "stderr", &seq(300_000));
        assert_eq!(
            result["stdout"]["live_dropped_bytes"].as_u64().unwrap_or(0),
            out_dropped
        );
        assert_eq!(
            result["stderr"]["live_dropped_bytes"].as_u64().unwrap_or(0),
            err_dropped
        );
        for s in ["stdout", "stderr"] {
            if let Some(p) = result[s]["spill_path"].as_str() {
                let _ = std::fs::remove_dir_all(std::path::Path::new(p).parent().unwrap());
            }
        }
    }
}

#[test]
fn a_limit_and_the_idle_deadline_come_as_events() {
    let dir = tempfile::tempdir().unwrap();
    let (ev, status) = events(&[
        "--idle-timeout",
        "300ms",
        "--file-size-max",
        "1K",
        "-C",
        dir.path().to_str().unwrap(),
        "--",
        "head -c 4096 /dev/zero > f; sleep 0.1; echo done; sleep 30",
    ]);
    assert_eq!(status, 124);
    assert_eq!(
        kinds(&ev),
        ["start", "stderr", "stdout", "limit", "exit"],
        "{ev:?}"
    );
    assert_eq!(ev[2]["text"], "done\n");
    assert_eq!(ev[3], json!({"event": "limit", "kind": "file_size"}));
    assert_eq!(ev[4]["result"]["timeout_kind"], "idle");
}

#[test]
fn a_failure_of_dsh_exec_is_an_error_event() {
    let (ev, status) = events(&["-C", "/nonexistent/dir", "--", "true"]);
    assert_eq!(status, 125);
    assert_eq!(kinds(&ev), ["error"]);
    assert_eq!(ev[0]["code"], "WORKDIR_UNUSABLE");
}

#[test]
fn events_exclude_the_other_output_forms() {
    for other in ["--json", "--stream", "--output-files"] {
        let out = Test::new().args(["--events", other, "--", "true"]).run();
        assert_eq!(out.status, 125, "{other}: {}", out.stderr);
        assert!(
            out.stderr.contains(&format!(
                "the argument '--events' cannot be used with '{other}'"
            )),
            "{}",
            out.stderr
        );
    }
}

#[test]
fn each_denial_of_the_result_is_an_event_before_exit() {
    let dir = tempfile::tempdir().unwrap();
    let (ev, status) = events(&[
        "--sandbox",
        "workspace-write",
        "-C",
        dir.path().to_str().unwrap(),
        "--",
        "echo x > /etc/dsh-exec-events-test",
    ]);
    assert_eq!(status, 1);
    let denials: Vec<Value> = ev
        .iter()
        .filter(|e| e["event"] == "denial")
        .map(|e| {
            let mut d = e.clone();
            d.as_object_mut().unwrap().remove("event");
            d
        })
        .collect();
    let exit = ev.last().unwrap();
    assert_eq!(exit["event"], "exit");
    assert_eq!(json!(denials), exit["result"]["sandbox"]["denials"]);
    assert_eq!(denials[0]["path"], "/etc/dsh-exec-events-test");
    assert_eq!(ev[0]["sandbox"], "workspace-write");
    assert_eq!(ev[0]["network"], "loopback");
}

#[test]
fn a_consumer_that_stalls_costs_the_events_not_the_run() {
    // Nobody reads the events for 3 s while 200 MB go by under a 64 KiB
    // budget, then 3 MB on stderr: the run still ends, its exit event
    // comes last (after the end stopped waiting for the events), and every
    // byte is in the spill file.
    let mut c = dsh();
    c.args([
        "--events",
        "--stdout-max-bytes",
        "64K",
        "--",
        "head -c 200000000 /dev/zero; head -c 3000000 /dev/zero | tr '\\0' b >&2",
    ]);
    let (events, status) = read_after(c, std::time::Duration::from_secs(3));
    assert_eq!(status.code(), Some(0));
    let last = events.last().unwrap();
    assert_eq!(last["event"], "exit");
    let stdout = &last["result"]["stdout"];
    assert_eq!(stdout["total_bytes"], 200_000_000);
    let spill = stdout["spill_path"].as_str().unwrap();
    assert_eq!(std::fs::metadata(spill).unwrap().len(), 200_000_000);
    let sent: u64 = events
        .iter()
        .filter(|e| e["event"] == "stdout")
        .map(|e| e["text"].as_str().unwrap().len() as u64)
        .sum();
    let not_sent = stdout["live_dropped_bytes"].as_u64().unwrap_or(0);
    // The chunk being written when the end stopped waiting for the
    // consumer (2 s) still arrives, but is counted as not sent: at most
    // one chunk, a budget's worth, counts twice.
    let both = sent + not_sent;
    assert!(
        (200_000_000..=200_000_000 + 65_536).contains(&both),
        "{sent} + {not_sent}"
    );
    assert!(sent < 200_000_000 / 10, "{sent}");
    let _ = std::fs::remove_dir_all(std::path::Path::new(spill).parent().unwrap());
}

#[test]
fn a_non_blocking_stdout_still_gets_whole_lines_and_the_exit_event() {
    // Whoever starts dsh-exec may leave its stdout non-blocking (a Node.js
    // parent does): a full pipe then answers EAGAIN, which must not cut a
    // line or lose the rest.
    let launcher = format!(
        "import os; os.set_blocking(1, False); os.execv({bin:?}, ['dsh-exec', '--events', '--', \
         'seq 1 300000; sleep 0.3; seq 1 300000 >&2; echo end'])",
        bin = bin().to_str().unwrap()
    );
    let mut c = std::process::Command::new("python3");
    c.args(["-c", &launcher]);
    let (events, status) = read_after(c, std::time::Duration::from_secs(1));
    assert!(status.success());
    let last = events.last().unwrap();
    assert_eq!(last["event"], "exit");
    stitch(
        &events,
        "stdout",
        &[seq(300_000), b"end\n".to_vec()].concat(),
    );
    stitch(&events, "stderr", &seq(300_000));
}

#[test]
fn sigterm_ends_dsh_exec_stuck_writing_to_a_consumer_that_stopped_reading() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    // The command ends at its deadline; dsh-exec then only writes events
    // to a pipe nobody reads. SIGTERM must still end it. The spill file
    // (`yes` fills a gigabyte in that second) goes into a directory the
    // test removes.
    let spill = tempfile::tempdir().unwrap();
    let mut child = dsh()
        .args(["--events", "--timeout", "1s", "--spill-dir"])
        .arg(spill.path())
        .args(["--", "yes"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(4));
    assert!(
        child.try_wait().unwrap().is_none(),
        "it did not wait to write"
    );
    kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
    let ended = poll_until(std::time::Duration::from_secs(3), || {
        child.try_wait().unwrap()
    });
    let status = ended.expect("SIGTERM did not end dsh-exec");
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(15)
    );
}
