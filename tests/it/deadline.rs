//! The deadline: SIGTERM to the group, SIGKILL after the grace period.
use crate::support::*;
use std::time::{Duration, Instant};

#[test]
fn timeout_keeps_output_and_reports_sigterm() {
    let t0 = Instant::now();
    let (text, status) = run(&["--timeout", "300ms", "--", "echo before; sleep 30"]);
    assert_eq!(
        text,
        "before\n[timed out after 300ms]\n[killed by signal: SIGTERM]\n"
    );
    assert_eq!(status, 124);
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
}

#[test]
fn a_command_trapping_term_is_killed_after_the_grace_period() {
    let t0 = Instant::now();
    let (v, status) = run_json(&[
        "--timeout",
        "300ms",
        "--kill-after",
        "500ms",
        "--",
        "trap '' TERM; echo armed; sleep 30",
    ]);
    let took = t0.elapsed();
    assert_eq!(status, 124);
    assert_eq!(v["timed_out"], true);
    assert_eq!(v["aborted"], false);
    assert_eq!(v["signal"], "SIGKILL");
    assert_eq!(v["exit_code"], serde_json::Value::Null);
    assert_eq!(v["stdout"]["text"], "armed\n");
    assert!(
        took >= Duration::from_millis(800),
        "SIGKILL before the grace ended: {took:?}"
    );
    assert!(took < Duration::from_secs(10), "{took:?}");
}

#[test]
fn a_command_that_traps_term_and_exits_zero_still_reports_the_timeout() {
    let (text, status) = run(&[
        "--timeout",
        "300ms",
        "--",
        "trap 'echo caught; exit 0' TERM; sleep 30 & wait",
    ]);
    assert_eq!(text, "caught\n[timed out after 300ms]\n[exit code: 0]\n");
    assert_eq!(status, 124);
}

#[test]
fn no_deadline_with_zero_or_none() {
    for t in ["0", "none"] {
        let (v, status) = run_json(&["--timeout", t, "--", "echo ok"]);
        assert_eq!(status, 0);
        assert_eq!(v["timeout_ms"], serde_json::Value::Null);
    }
}

#[test]
fn default_deadline_is_ten_minutes() {
    let (v, _) = run_json(&["--", "true"]);
    assert_eq!(v["timeout_ms"], 600_000);
}

#[test]
fn signal_names_the_first_signal_of_the_escalation() {
    // As timeout -s INT: the command's INT trap runs, and its exit status
    // is the command's own; the deadline is still reported.
    Test::new()
        .args(["--timeout", "300ms", "--signal", "INT", "--"])
        .arg("trap 'echo got INT; exit 5' INT; sleep 5 & wait")
        .run()
        .expect_status(124)
        .expect_stdout("got INT\n[timed out after 300ms]\n[exit code: 5]\n");
    // A number works too; KILL leaves no trap a chance.
    Test::new()
        .args([
            "--timeout",
            "200ms",
            "--signal",
            "9",
            "--",
            "trap '' TERM; sleep 5",
        ])
        .run()
        .expect_status(124)
        .expect_stdout("[timed out after 200ms]\n[killed by signal: SIGKILL]\n");
    for bad in ["STOP", "CONT", "NOPE", "0"] {
        let out = Test::new().args(["--signal", bad, "--", "true"]).run();
        assert_eq!(out.status, 125, "{bad}: {}", out.stderr);
        assert!(out.stderr.contains("--signal"), "{}", out.stderr);
    }
}

#[test]
fn a_fractional_deadline_reads_back_as_written() {
    Test::new()
        .args(["-t", "1.5", "--", "sleep 5"])
        .run()
        .expect_status(124)
        .expect_stdout("[timed out after 1.5s]\n[killed by signal: SIGTERM]\n");
    let (text, _) = run(&[
        "explain",
        "-t",
        "0.25s",
        "--stdout-max-bytes",
        "1.5K",
        "--",
        "true",
    ]);
    assert!(text.contains("timeout           250ms "), "{text}");
    assert!(text.contains("stdout-max-bytes  1536 "), "{text}");
}
