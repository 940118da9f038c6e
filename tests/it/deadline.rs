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

#[test]
fn an_idle_timeout_ends_a_command_that_stays_silent() {
    let t0 = Instant::now();
    let (text, status) = run(&["--idle-timeout", "300ms", "--", "echo a; sleep 30"]);
    assert_eq!(
        text,
        "a\n[timed out: no output for 300ms]\n[killed by signal: SIGTERM]\n"
    );
    assert_eq!(status, 124);
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    let (v, status) = run_json(&["--idle-timeout", "300ms", "--", "sleep 30"]);
    assert_eq!(status, 124);
    assert_eq!(v["timed_out"], true);
    assert_eq!(v["timeout_kind"], "idle");
    assert_eq!(v["idle_timeout_ms"], 300);
    assert_eq!(v["signal"], "SIGTERM");
    assert_matches_schema("run-result", &v);
}

#[test]
fn output_on_either_stream_keeps_an_idle_deadline_away() {
    // 1.2 s in all, never 400 ms without a byte: stdout, then stderr.
    let script = "for i in 1 2 3 4; do echo $i; sleep 0.15; echo e$i >&2; sleep 0.15; done";
    let (v, status) = run_json(&["--idle-timeout", "400ms", "--", script]);
    assert_eq!(status, 0, "{v}");
    assert_eq!(v["timed_out"], false);
    assert_eq!(v.get("timeout_kind"), None);
    assert_eq!(v["stdout"]["text"], "1\n2\n3\n4\n");
    assert_eq!(v["stderr"]["text"], "e1\ne2\ne3\ne4\n");
}

#[test]
fn the_deadline_is_told_apart_from_the_idle_deadline() {
    let (v, status) = run_json(&[
        "--timeout",
        "300ms",
        "--idle-timeout",
        "10s",
        "--",
        "sleep 30",
    ]);
    assert_eq!(status, 124);
    assert_eq!(v["timeout_kind"], "deadline");
    assert_eq!(v["idle_timeout_ms"], 10000);
    let (v, _) = run_json(&["--", "true"]);
    assert_eq!(v.get("idle_timeout_ms"), None);
    assert_eq!(v.get("timeout_kind"), None);
}

#[test]
fn an_idle_timeout_comes_from_the_config_file_and_parse_status_reads_its_notice() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("dsh-exec")).unwrap();
    std::fs::write(
        dir.path().join("dsh-exec/config.toml"),
        "[defaults]\nidle_timeout = \"250ms\"\n",
    )
    .unwrap();
    let out = dsh()
        .env("XDG_CONFIG_HOME", dir.path())
        .args(["--", "sleep 30"])
        .output()
        .unwrap();
    assert_eq!(
        stdout(&out),
        "[timed out: no output for 250ms]\n[killed by signal: SIGTERM]\n"
    );
    assert_eq!(code(&out), 124);
    let parsed = Test::new().arg("parse-status").stdin(stdout(&out)).run();
    assert_eq!(
        parsed.stdout,
        "{\"exit_code\":null,\"signal\":\"SIGTERM\",\"timed_out\":true,\"aborted\":false}\n"
    );
}

#[test]
fn output_files_give_way_to_pipes_under_an_idle_timeout() {
    let (v, status) = run_json(&[
        "--output-files",
        "--idle-timeout",
        "300ms",
        "--",
        "echo x; sleep 30",
    ]);
    assert_eq!(status, 124);
    assert_eq!(v["stdout"]["text"], "x\n");
    assert_eq!(v["timeout_kind"], "idle");
    let out = dsh()
        .args([
            "explain",
            "--output-files",
            "--idle-timeout",
            "1s",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    assert!(
        stdout(&out).contains("--idle-timeout watches the output as it comes, through pipes"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn output_written_while_dsh_exec_was_stopped_counts_before_the_idle_deadline() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    // The command writes every 100 ms; dsh-exec is stopped for 2.5 s
    // (longer than the idle deadline): on SIGCONT, the lines waiting in
    // the pipe are read before the idle deadline is judged.
    let child = dsh()
        .args([
            "--json",
            "--idle-timeout",
            "1s",
            "--",
            "for i in $(seq 1 30); do echo $i; sleep 0.1; done",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = Pid::from_raw(child.id() as i32);
    std::thread::sleep(Duration::from_millis(500));
    kill(pid, Signal::SIGSTOP).unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    kill(pid, Signal::SIGCONT).unwrap();
    let out = child.wait_with_output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["timed_out"], false, "{v}");
    let expected: String = (1..=30).map(|i| format!("{i}\n")).collect();
    assert_eq!(v["stdout"]["text"], expected);
}
