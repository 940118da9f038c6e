//! Processes the command leaves behind never make dsh-exec hang.
use crate::support::*;
use std::time::{Duration, Instant};

#[test]
fn a_background_sleep_holding_stdout_is_killed_and_the_run_returns_promptly() {
    let t0 = Instant::now();
    let (v, status) = run_json(&["--", "sleep 30 & echo $!; echo done"]);
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    assert_eq!(status, 0);
    let text = v["stdout"]["text"].as_str().unwrap();
    let mut lines = text.lines();
    let pid: i32 = lines.next().unwrap().parse().unwrap();
    assert_eq!(lines.next(), Some("done"));
    let gone = gone_within(pid, Duration::from_secs(2));
    cleanup(pid);
    assert!(gone, "sleep {pid} survived the run");
}

#[test]
fn a_leftover_that_closed_its_output_is_killed_too() {
    let (v, status) = run_json(&["--", "sleep 30 >/dev/null 2>&1 & echo $!"]);
    assert_eq!(status, 0);
    let pid: i32 = v["stdout"]["text"]
        .as_str()
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let gone = gone_within(pid, Duration::from_secs(2));
    cleanup(pid);
    assert!(gone, "sleep {pid} survived the run");
}

#[test]
fn output_of_a_process_substitution_after_bash_exits_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let t0 = Instant::now();
    let script = format!(
        "exec > >(tee -a {}/ps.log) 2>&1; echo done",
        dir.path().display()
    );
    let (text, status) = run(&["--", &script]);
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    assert_eq!((text.as_str(), status), ("done\n[exit code: 0]\n", 0));
}
