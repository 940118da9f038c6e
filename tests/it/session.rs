//! The command runs as the leader of a new session, with clean signal state,
//! and dies with dsh-exec.
use crate::support::*;
use std::process::Stdio;
use std::time::Duration;

#[test]
fn the_command_leads_its_own_session_without_a_terminal() {
    let (v, status) = run_json(&["--", "exec cat /proc/self/stat"]);
    assert_eq!(status, 0);
    let stat = v["stdout"]["text"].as_str().unwrap();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    // stat(5) after the command name: state ppid pgrp session tty_nr ...
    let pid: &str = stat.split_whitespace().next().unwrap();
    assert_eq!(fields[2], pid, "process group");
    assert_eq!(fields[3], pid, "session");
    assert_eq!(fields[4], "0", "controlling terminal");
}

#[test]
fn signals_ignored_or_blocked_by_the_caller_are_reset_for_the_command() {
    let script = format!(
        "trap '' INT QUIT USR1 TERM; exec {} -- 'exec grep -E \"^Sig(Blk|Ign)\" /proc/self/status'",
        bin().display()
    );
    let out = std::process::Command::new("bash")
        .args(["-c", &script])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n[exit code: 0]\n"
    );
}

#[test]
fn works_when_started_with_sigchld_ignored_and_stdio_closed() {
    // perl can set SIGCHLD to SIG_IGN before exec, which bash cannot.
    let out = std::process::Command::new("perl")
        .args([
            "-e",
            "$SIG{CHLD}='IGNORE'; exec @ARGV or die",
            bin().to_str().unwrap(),
            "--",
            "exit 5",
        ])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "[exit code: 5]\n");
    assert_eq!(code(&out), 5);
    let script = format!(
        "{} -- 'echo hi >&2; exit 6' <&- 2>&-; echo status=$?",
        bin().display()
    );
    let out = std::process::Command::new("bash")
        .args(["-c", &script])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "[stderr]\nhi\n[exit code: 6]\nstatus=6\n"
    );
}

#[test]
fn killing_dsh_exec_with_sigkill_kills_the_command_too() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let script = format!("echo $$ > {}; sleep 30", pidfile.display());
    let mut child = dsh()
        .args(["--", &script])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let bash_pid: i32 = wait_for_line(&pidfile, Duration::from_secs(10))
        .unwrap()
        .parse()
        .unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    let gone = gone_within(bash_pid, Duration::from_secs(2));
    // The grandchild `sleep 30` is not covered by the parent-death signal.
    let _ = std::process::Command::new("pkill")
        .args(["-KILL", "-s", &bash_pid.to_string()])
        .status();
    cleanup(bash_pid);
    assert!(gone, "the command's shell {bash_pid} outlived dsh-exec");
}

#[test]
fn a_closed_stdout_is_not_a_crash() {
    let script = format!(
        "{} -- 'seq 1 100000' | head -1; echo \"status=${{PIPESTATUS[0]}}\"",
        bin().display()
    );
    let out = std::process::Command::new("bash")
        .args(["-c", &script])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "1\nstatus=0\n");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
}

#[test]
fn works_as_pid_1_of_a_pid_namespace() {
    // unshare(1) makes dsh-exec the init of a new PID namespace, where every
    // orphan is its child and signals without a handler are ignored.
    let out = std::process::Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc"])
        .arg(bin())
        .args([
            "--json",
            "--timeout",
            "1s",
            "--",
            "echo pid=$PPID; (setsid sleep 50 &); sleep 30",
        ])
        .output()
        .unwrap();
    if !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("unshare failed") {
        eprintln!("skipped: no PID namespaces here");
        return;
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(code(&out), 124);
    assert_eq!(v["stdout"]["text"], "pid=1\n");
    assert_eq!(v["timed_out"], true);
}
