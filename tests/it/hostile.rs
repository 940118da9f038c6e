//! Inputs from a hostile review: each once broke a promise (no panic, no
//! hang, nothing lost, nothing leaked).
use crate::support::*;
use serde_json::Value;
use std::os::unix::ffi::OsStrExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn death_by_a_real_time_signal_is_a_result() {
    assert_eq!(
        run(&["--", "echo before; kill -34 $$"]),
        ("before\n[killed by signal: SIGRTMIN]\n".into(), 162)
    );
    assert_eq!(
        run(&["--", "kill -40 $$"]),
        ("[killed by signal: SIGRTMIN+6]\n".into(), 168)
    );
}

/// A FIFO named `fifo` in `dir` (mkfifo(1)).
fn make_fifo(dir: &std::path::Path) -> std::path::PathBuf {
    let fifo = dir.join("fifo");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    fifo
}

#[test]
fn a_fifo_as_stdin_with_no_writer_does_not_hang_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = make_fifo(dir.path());
    let t0 = Instant::now();
    let (text, status) = run(&[
        "--timeout",
        "2s",
        "--stdin-file",
        fifo.to_str().unwrap(),
        "--",
        "echo ran",
    ]);
    assert_eq!((text.as_str(), status), ("ran\n[exit code: 0]\n", 0));
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
}

#[test]
fn a_fifo_as_stdin_delivers_what_its_writer_writes() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = make_fifo(dir.path());
    let writer = Command::new("bash")
        .args(["-c", &format!("sleep 0.2; echo fed > {}", fifo.display())])
        .spawn()
        .unwrap();
    let (text, _) = run(&[
        "--timeout",
        "5s",
        "--stdin-file",
        fifo.to_str().unwrap(),
        "--",
        "cat",
    ]);
    writer.wait_with_output().unwrap();
    assert_eq!(text, "fed\n[exit code: 0]\n");
}

#[test]
fn non_utf8_paths_still_give_one_valid_json_object() {
    let dir = tempfile::tempdir().unwrap();
    let odd = dir.path().join(std::ffi::OsStr::from_bytes(b"b\xffd"));
    std::fs::create_dir(&odd).unwrap();
    let out = Test::new()
        .args(["--json", "-C"])
        .arg(&odd)
        .args(["--", "echo hi; exit 3"])
        .run();
    out.expect_status(3);
    let v = out.json();
    assert_eq!(v["stdout"]["text"], "hi\n");
    assert!(v["workdir"].as_str().unwrap().ends_with("/b\u{FFFD}d"));
    let out = Test::new()
        .args(["explain", "--json", "-C"])
        .arg(&odd)
        .args(["--", "true"])
        .run();
    out.expect_status(0);
    let _: Value = out.json();
}

#[test]
fn an_unwritable_stderr_is_not_a_panic() {
    let out = Command::new("bash")
        .args([
            "-c",
            &format!(
                "{} -C /nonexistent -- true 2>/dev/full; echo status=$?",
                bin().display()
            ),
        ])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "status=125\n");
}

#[test]
fn a_confined_command_cannot_read_the_secrets_from_its_parent() {
    let out = dsh()
        .env("MY_API_KEY", "supersecret123")
        .args(["-s", "read-only", "--", "cat /proc/$PPID/environ"])
        .output()
        .unwrap();
    let text = stdout(&out);
    assert!(!text.contains("supersecret123"), "{text}");
    assert!(text.contains("Permission denied"), "{text}");
}

#[test]
fn a_script_starting_with_a_dash_is_a_command_not_a_bash_option() {
    let (text, status) = run(&["--", "-x"]);
    assert_eq!(status, 127);
    assert_eq!(
        text,
        "[stderr]\nbash: line 1: -x: command not found\n[exit code: 127]\n"
    );
}

#[test]
fn descriptors_inherited_without_close_on_exec_are_not_passed_on() {
    let script = format!(
        "exec 9</dev/null; {} -- 'ls /proc/self/fd'",
        bin().display()
    );
    let out = Command::new("bash").args(["-c", &script]).output().unwrap();
    // 3 is the directory ls itself opened to list the descriptors.
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "0\n1\n2\n3\n[exit code: 0]\n"
    );
}

#[test]
fn help_after_the_options_is_the_bash_builtin() {
    let (text, status) = run(&["help", "true"]);
    assert_eq!(status, 0);
    assert!(text.starts_with("true: true\n"), "{text}");
}

#[test]
fn an_empty_tmpdir_means_the_default_temp_dir() {
    Test::new()
        .env("TMPDIR", "")
        .args(["--", "echo hi"])
        .run()
        .expect_stdout("hi\n[exit code: 0]\n")
        .expect_status(0);
}

#[test]
fn a_removed_current_directory_does_not_matter_with_an_absolute_workdir() {
    let dir = tempfile::tempdir().unwrap();
    let gone = dir.path().join("gone");
    let script = format!(
        "mkdir {g} && cd {g} && rmdir {g} && {} -C /tmp -- pwd",
        bin().display(),
        g = gone.display()
    );
    let out = Command::new("bash").args(["-c", &script]).output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "/tmp\n[exit code: 0]\n"
    );
}

#[test]
fn out_of_range_deadlines_and_budgets_are_usage_errors() {
    for args in [
        ["--timeout", "500us"],
        ["--timeout", "0.0000000001"],
        ["--stdout-max-bytes", "2GiB"],
        ["--stderr-max-bytes", "1TiB"],
    ] {
        let out = Test::new().args(args).args(["--", "echo ran"]).run();
        assert_eq!(out.status, 125, "{args:?}");
        assert_eq!(out.stdout, "");
    }
}

#[test]
fn parse_status_reads_dash_as_stdin_and_rejects_impossible_markers() {
    let feed = |input: &str, args: &[&str]| {
        let out = Test::new()
            .arg("parse-status")
            .args(args)
            .stdin(input)
            .run();
        (out.stdout, out.status)
    };
    assert_eq!(
        feed("[exit code: 4]\n", &["-"]),
        (
            "{\"exit_code\":4,\"signal\":null,\"timed_out\":false,\"aborted\":false}\n".into(),
            0
        )
    );
    for bad in [
        "[exit code: -1]\n",
        "[exit code: +7]\n",
        "[killed by signal: SIGFOO]\n",
    ] {
        assert_eq!(feed(bad, &[]).1, 1, "{bad}");
    }
}

#[test]
fn other_terminating_signals_also_abort_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let script = format!("sleep 30 & echo $! > {}; wait", pidfile.display());
    let child = dsh()
        .args(["--json", "--", &script])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let sleep_pid: i32 = wait_for_line(&pidfile, Duration::from_secs(10))
        .unwrap()
        .parse()
        .unwrap();
    Command::new("kill")
        .args(["-USR1", &child.id().to_string()])
        .status()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let gone = gone_within(sleep_pid, Duration::from_secs(2));
    cleanup(sleep_pid);
    assert_eq!(code(&out), 138);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["aborted_by"], "SIGUSR1");
    assert!(gone, "the sleep survived SIGUSR1 to dsh-exec");
}

#[test]
fn leftovers_get_no_time_past_the_deadline() {
    let t0 = Instant::now();
    let (v, status) = run_json(&[
        "--timeout",
        "1s",
        "--kill-after",
        "30s",
        "--",
        "(trap '' TERM; sleep 8; echo late) & echo started",
    ]);
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    assert_eq!(status, 0);
    assert_eq!(v["stdout"]["text"], "started\n");
}

#[test]
fn an_unprivileged_command_cannot_read_the_secrets_from_its_parent() {
    // As an ordinary user (setpriv), with no sandbox: dsh-exec is not
    // dumpable, so its /proc/PID/environ is closed to its own uid. (A copy
    // of the binary that user can execute: the checkout may sit in a
    // private directory.)
    let Some(user) = crate::support::Unprivileged::new() else {
        return;
    };
    let out = user.run_with(
        &[("MY_API_KEY", std::ffi::OsStr::new("supersecret123"))],
        &["--", "cat /proc/$PPID/environ"],
    );
    let text = stdout(&out);
    assert!(!text.contains("supersecret123"), "{text}");
    assert!(
        text.contains("Permission denied"),
        "status {:?}, stdout {text}, stderr {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}
