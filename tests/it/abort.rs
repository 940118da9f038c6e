//! SIGINT, SIGTERM or SIGHUP sent to dsh-exec abort the run like a deadline.
use crate::support::*;
use std::process::Stdio;
use std::time::Duration;

fn abort_with(signal: &str, expected_status: i32) {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let script = format!("echo $$ > {}; echo started; sleep 30", pidfile.display());
    let child = dsh()
        .args(["--json", "--", &script])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let bash_pid: i32 = wait_for_line(&pidfile, Duration::from_secs(10))
        .expect("command started")
        .parse()
        .unwrap();
    let status = std::process::Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let gone = gone_within(bash_pid, Duration::from_secs(2));
    cleanup(bash_pid);
    assert_eq!(code(&out), expected_status);
    assert_eq!(v["aborted"], true);
    assert_eq!(v["aborted_by"], format!("SIG{signal}"));
    assert_eq!(v["timed_out"], false);
    assert_eq!(v["signal"], "SIGTERM");
    assert_eq!(v["stdout"]["text"], "started\n");
    assert!(gone, "the command's shell {bash_pid} survived");
}

#[test]
fn sigint_aborts_with_130() {
    abort_with("INT", 130);
}

#[test]
fn sigterm_aborts_with_143() {
    abort_with("TERM", 143);
}

#[test]
fn sighup_aborts_with_129() {
    abort_with("HUP", 129);
}

#[test]
fn the_rendered_text_names_the_abort() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let script = format!("echo $$ > {}; sleep 30", pidfile.display());
    let child = dsh()
        .args(["--", &script])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_line(&pidfile, Duration::from_secs(10)).expect("command started");
    std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        stdout(&out),
        "[aborted by SIGINT]\n[killed by signal: SIGTERM]\n"
    );
    assert_eq!(code(&out), 130);
}
