//! `--stream`: output appears live, is still captured, and is not printed twice.
use crate::support::*;
use std::io::{BufRead, BufReader, Read};
use std::process::Stdio;
use std::time::{Duration, Instant};

#[test]
fn the_first_line_appears_before_the_run_ends() {
    let t0 = Instant::now();
    let mut child = dsh()
        .args([
            "--stream",
            "--",
            "echo first; sleep 2; echo second; echo err >&2",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    let first_at = t0.elapsed();
    assert_eq!(first, "first\n");
    assert!(
        first_at < Duration::from_millis(1500),
        "first line after {first_at:?}"
    );
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(0));
    assert_eq!(rest, "second\n[exit code: 0]\n");
    assert_eq!(err, "err\n");
}

#[test]
fn with_json_the_live_output_goes_to_stderr_and_the_object_alone_to_stdout() {
    let out = Test::new()
        .args([
            "--stream",
            "--json",
            "--",
            "echo out; sleep 0.2; echo err >&2; exit 2",
        ])
        .run();
    // The log the live copy makes ends as the text form does: the marker
    // says how the run ended.
    out.expect_status(2)
        .expect_stderr("out\nerr\n[exit code: 2]\n");
    let v = out.json();
    assert_eq!(v["stdout"]["text"], "out\n");
    assert_eq!(v["stderr"]["text"], "err\n");
}

#[test]
fn streaming_keeps_the_budget_and_the_spill_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = Test::new()
        .args([
            "--stream",
            "--json",
            "--stdout-max-bytes",
            "10",
            "--spill-dir",
            dir.path().to_str().unwrap(),
        ])
        .args(["--", "seq 1 1000"])
        .run();
    let all = std::process::Command::new("seq")
        .args(["1", "1000"])
        .output()
        .unwrap()
        .stdout;
    let v = out.json();
    let (live, end) = out.stderr.as_bytes().split_at(all.len());
    assert_eq!(live, all);
    assert_eq!(
        String::from_utf8_lossy(end),
        format!(
            "[stdout: {} bytes shown live, 9 kept; full stream: {}]\n[exit code: 0]\n",
            all.len(),
            v["stdout"]["spill_path"].as_str().unwrap()
        )
    );
    assert_eq!(v["stdout"]["truncated"], true);
    assert_eq!(
        std::fs::read(v["stdout"]["spill_path"].as_str().unwrap()).unwrap(),
        all
    );
}

#[test]
fn the_text_end_names_the_spill_file_of_an_outgrown_stream() {
    let dir = tempfile::tempdir().unwrap();
    let out = Test::new()
        .args([
            "--stream",
            "--stdout-max-bytes",
            "10",
            "--spill-dir",
            dir.path().to_str().unwrap(),
        ])
        .args(["--", "seq 1 10"])
        .run();
    let spill_dir = std::fs::read_dir(dir.path())
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    out.expect_stdout(&format!(
        "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n[stdout: 21 bytes shown live, 9 kept; full stream: {}/stdout]\n[exit code: 0]\n",
        spill_dir.display()
    ));
}

#[test]
fn the_marker_gets_a_line_of_its_own_after_output_without_a_newline() {
    let (text, status) = run(&["--stream", "--", "printf abc"]);
    assert_eq!((text.as_str(), status), ("abc\n[exit code: 0]\n", 0));
}

#[test]
fn a_reader_that_stops_reading_does_not_hold_the_deadline_off() {
    // The live copy goes to a pipe nobody reads: the command must still be
    // killed at its deadline.
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    // `yes` spills a gigabyte or more in that second: into `dir`, removed
    // with it.
    let mut child = dsh()
        .args(["--stream", "--timeout", "1s", "--kill-after", "200ms"])
        .arg("--spill-dir")
        .arg(dir.path())
        .arg("--")
        .arg(format!("echo $$ > {}; exec yes", pidfile.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid: i32 = wait_for_line(&pidfile, Duration::from_secs(10))
        .expect("the command started")
        .parse()
        .unwrap();
    let gone = gone_within(pid, Duration::from_secs(5));
    cleanup(pid);
    // Now drain, so dsh-exec can write its end and exit.
    let mut sink = Vec::new();
    child.stdout.take().unwrap().read_to_end(&mut sink).unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(124));
    assert!(
        gone,
        "the command outlived its deadline while the reader stalled"
    );
    let text = String::from_utf8_lossy(&sink);
    assert!(
        text.ends_with("[timed out after 1s]\n[killed by signal: SIGTERM]\n"),
        "{}",
        &text[text.len().saturating_sub(300)..]
    );
}

/// A reader that stalls past the live copy's flush wait gets the result
/// last all the same: nothing of the live copy follows the marker.
#[test]
fn a_stalled_reader_gets_the_marker_last() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = dsh()
        .args(["--stream", "--spill-dir"])
        .arg(dir.path())
        .args(["--", "seq 1 400000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Longer than the 2 s the end of the run waits for the live copy.
    std::thread::sleep(Duration::from_secs(3));
    let mut sink = Vec::new();
    child.stdout.take().unwrap().read_to_end(&mut sink).unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(0));
    let text = String::from_utf8_lossy(&sink);
    assert!(
        text.ends_with("400000\n[exit code: 0]\n"),
        "{}",
        &text[text.len().saturating_sub(300)..]
    );
}

#[test]
fn live_output_cannot_forge_a_notice_and_the_marker_gets_its_own_line() {
    // Escaped as in the text result: parse-status is not fooled.
    let out = Test::new()
        .args(["--stream", "--"])
        .arg("echo '[timed out after 1s]'; printf 'x\\r[aborted by SIGTERM]\\n'")
        .run();
    assert_eq!(
        out.stdout,
        "\\[timed out after 1s]\nx\r\\[aborted by SIGTERM]\n[exit code: 0]\n"
    );
    // stderr ending mid-line on the same file as stdout (2>&1): the marker
    // still starts a line.
    let both = std::process::Command::new("bash")
        .args(["-c", "\"$0\" --stream -- 'printf partial >&2' 2>&1"])
        .arg(bin())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap())
        .env("HOME", "/nonexistent-home")
        .output()
        .unwrap();
    assert_eq!(stdout(&both), "partial\n[exit code: 0]\n");
    // The kept head ended in a newline, the live output did not.
    let spill = tempfile::tempdir().unwrap();
    let out = Test::new()
        .arg("--spill-dir")
        .arg(spill.path())
        .args([
            "--stream",
            "--keep",
            "head",
            "--stdout-max-bytes",
            "4",
            "--",
        ])
        .arg("printf '1\\n2\\n3 4 5'")
        .run();
    assert!(
        out.stdout
            .starts_with("1\n2\n3 4 5\n[stdout: 9 bytes shown live, 4 kept; full stream: "),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.ends_with("/stdout]\n[exit code: 0]\n"),
        "{}",
        out.stdout
    );
}

/// With `--json`, a CI log made of the live copy never stops without
/// saying how the run ended: a timeout's notice and the marker follow it on
/// stderr, on a line of their own after output that ended mid-line.
#[test]
fn with_json_the_live_log_ends_with_the_notices_and_the_marker() {
    let out = Test::new()
        .args([
            "--stream",
            "--json",
            "--timeout",
            "300ms",
            "--",
            "echo started; printf partial; sleep 10",
        ])
        .run();
    out.expect_status(124)
        .expect_stderr("started\npartial\n[timed out after 300ms]\n[killed by signal: SIGTERM]\n");
    assert_eq!(out.json()["timed_out"], true);
}
