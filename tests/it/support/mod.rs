//! Shared helpers: run the real `dsh-exec` binary and inspect real processes.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// Path of the built binary.
pub fn bin() -> PathBuf {
    assert_cmd::cargo::cargo_bin("dsh-exec")
}

/// A command for the binary with a small, known environment.
pub fn dsh() -> Command {
    let mut c = Command::new(bin());
    c.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", "/nonexistent-home");
    c
}

/// Runs `dsh-exec ARGS` and returns (stdout as text, exit status).
pub fn run(args: &[&str]) -> (String, i32) {
    let out = dsh().args(args).output().expect("spawn dsh-exec");
    (stdout(&out), code(&out))
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).expect("stdout is UTF-8")
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn code(out: &Output) -> i32 {
    out.status.code().expect("dsh-exec exited normally")
}

/// Runs `dsh-exec --json ARGS` and returns (parsed object, exit status).
pub fn run_json(args: &[&str]) -> (serde_json::Value, i32) {
    let out = dsh()
        .arg("--json")
        .args(args)
        .output()
        .expect("spawn dsh-exec");
    let v = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    (v, code(&out))
}

/// True while `pid` exists and is not a zombie.
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat
                .rsplit(')')
                .next()
                .and_then(|s| s.split_whitespace().next());
            state != Some("Z") && state != Some("X")
        }
        Err(_) => false,
    }
}

/// Waits up to `limit` for `pid` to be gone; true when it is.
pub fn gone_within(pid: i32, limit: Duration) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if !alive(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    !alive(pid)
}

/// Kills `pid` if it is still alive (test cleanup after a failure).
pub fn cleanup(pid: i32) {
    if alive(pid) {
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    }
}

/// Waits up to `limit` for `path` to hold a whole line; returns it trimmed.
pub fn wait_for_line(path: &std::path::Path, limit: Duration) -> Option<String> {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if let Ok(s) = std::fs::read_to_string(path)
            && s.ends_with('\n')
        {
            return Some(s.trim().to_string());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}

/// An example binary of this crate, built (or found up to date) by cargo
/// first, so that a filtered test run never uses a stale one.
pub fn example(name: &str) -> PathBuf {
    let mut path = bin();
    path.pop();
    let path = path.join("examples").join(name);
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "--quiet", "--example", name])
        .status()
        .expect("run cargo");
    assert!(status.success(), "cargo build --example {name}");
    path
}
