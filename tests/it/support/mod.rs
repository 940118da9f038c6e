//! Shared helpers: run the real `dsh-exec` binary and inspect real processes.

use std::ffi::OsStr;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

pub mod pty;

/// Path of the built binary.
pub fn bin() -> PathBuf {
    assert_cmd::cargo::cargo_bin("dsh-exec")
}

/// Replaces `c`'s environment with a small, known one: this process's
/// `PATH`, and a `HOME` that does not exist.
pub fn known_env(c: &mut Command) -> &mut Command {
    c.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", "/nonexistent-home")
}

/// A command for the binary with a small, known environment.
pub fn dsh() -> Command {
    let mut c = Command::new(bin());
    known_env(&mut c);
    c
}

/// One run of the binary, built up and then [`run`](Test::run) to its end
/// (after casey/just's `Test`): it starts from [`dsh`]'s small environment,
/// takes arguments, environment variables and stdin, and gives an
/// [`Outcome`] to assert on.
///
/// ```ignore
/// Test::new()
///     .args(["--", "exit 3"])
///     .run()
///     .expect_status(3)
///     .expect_stdout("[exit code: 3]\n");
/// ```
pub struct Test {
    command: Command,
    stdin: Option<Vec<u8>>,
}

impl Test {
    /// A run of the binary with no arguments yet and stdin at end of file.
    pub fn new() -> Test {
        Test {
            command: dsh(),
            stdin: None,
        }
    }

    /// A run in `tier`: for [`Tier::Gate`], under `setpriv
    /// --bounding-set=-sys_admin`, so that the binary holds every
    /// capability but CAP_SYS_ADMIN and confines without a mount namespace,
    /// as in a container without it.
    pub fn in_tier(tier: Tier) -> Test {
        match tier {
            Tier::MountNamespace => Test::new(),
            Tier::Gate if !has_sys_admin() => Test::new(),
            Tier::Gate => {
                let mut command = Command::new("setpriv");
                known_env(&mut command);
                command.arg("--bounding-set=-sys_admin").arg(bin());
                Test {
                    command,
                    stdin: None,
                }
            }
        }
    }

    /// Appends one argument (any `OsStr`, so paths need no conversion).
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Test {
        self.command.arg(arg);
        self
    }

    /// Appends arguments.
    pub fn args<I, S>(mut self, args: I) -> Test
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.command.args(args);
        self
    }

    /// Sets `key` to `value` in the binary's environment.
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Test {
        self.command.env(key, value);
        self
    }

    /// Feeds `bytes` to the binary's stdin, then closes it (without this,
    /// stdin is `/dev/null`).
    pub fn stdin(mut self, bytes: impl Into<Vec<u8>>) -> Test {
        self.stdin = Some(bytes.into());
        self
    }

    /// Runs the binary to its end. Panics when it cannot be spawned or is
    /// killed by a signal, or when its stdout is not UTF-8.
    pub fn run(mut self) -> Outcome {
        self.command
            .stdin(if self.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = self.command.spawn().expect("spawn dsh-exec");
        // Written from a thread, so a large input cannot deadlock against
        // output that fills its pipe; a binary that exits without reading
        // it all is not an error of the test.
        let feeder = self.stdin.map(|bytes| {
            let mut pipe = child.stdin.take().expect("piped stdin");
            std::thread::spawn(move || match pipe.write_all(&bytes) {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                    panic!("writing dsh-exec's stdin: {e}")
                }
                _ => {}
            })
        });
        let out = child.wait_with_output().expect("wait for dsh-exec");
        if let Some(feeder) = feeder {
            feeder.join().expect("stdin feeder");
        }
        Outcome {
            stdout: stdout(&out),
            stderr: stderr(&out),
            status: code(&out),
        }
    }
}

/// How a confined run is enforced: with a mount namespace (read-only mount
/// tree, bind mounts; needs CAP_SYS_ADMIN), or without one (the gate
/// decides metadata changes, protected files are restored after the run).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    MountNamespace,
    Gate,
}

/// Whether this process holds CAP_SYS_ADMIN (bit 21 of CapEff).
pub fn has_sys_admin() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << 21) != 0)
}

/// The tiers a confined run can be tested in here: both with
/// CAP_SYS_ADMIN and `setpriv` (util-linux), else the gate's alone.
pub fn tiers() -> Vec<Tier> {
    let setpriv = Command::new("setpriv")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    match (has_sys_admin(), setpriv) {
        (true, true) => vec![Tier::MountNamespace, Tier::Gate],
        (true, false) => {
            eprintln!("note: setpriv is missing: the tier without a mount namespace is not tested");
            vec![Tier::MountNamespace]
        }
        (false, _) => vec![Tier::Gate],
    }
}

/// What a [`Test`] run did. The `expect_*` methods assert and return the
/// outcome, so that they chain.
pub struct Outcome {
    /// Everything the binary wrote to stdout.
    pub stdout: String,
    /// Everything the binary wrote to stderr (lossy UTF-8).
    pub stderr: String,
    /// The binary's exit status.
    pub status: i32,
}

impl Outcome {
    /// Stdout parsed as one JSON value; panics, showing it, when it is not.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}):\n{}\nstderr:\n{}",
                self.stdout, self.stderr
            )
        })
    }

    /// Asserts the exit status (the message shows stdout and stderr).
    pub fn expect_status(&self, status: i32) -> &Outcome {
        assert_eq!(
            self.status, status,
            "exit status\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }

    /// Asserts the whole of stdout.
    pub fn expect_stdout(&self, stdout: &str) -> &Outcome {
        assert_eq!(self.stdout, stdout, "stdout\nstderr:\n{}", self.stderr);
        self
    }

    /// Asserts the whole of stderr.
    pub fn expect_stderr(&self, stderr: &str) -> &Outcome {
        assert_eq!(self.stderr, stderr, "stderr\nstdout:\n{}", self.stdout);
        self
    }
}

/// Runs `dsh-exec ARGS` and returns (stdout as text, exit status).
pub fn run(args: &[&str]) -> (String, i32) {
    let out = Test::new().args(args).run();
    (out.stdout, out.status)
}

/// Runs `dsh-exec --json ARGS` and returns (parsed object, exit status).
pub fn run_json(args: &[&str]) -> (serde_json::Value, i32) {
    let out = Test::new().arg("--json").args(args).run();
    (out.json(), out.status)
}

/// Stdout of a finished process, which must be UTF-8.
pub fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).expect("stdout is UTF-8")
}

/// Stderr of a finished process (lossy UTF-8).
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Exit status of a finished process, which must not have died by a signal.
pub fn code(out: &Output) -> i32 {
    out.status.code().expect("dsh-exec exited normally")
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

/// Calls `probe` every 10 ms until it gives `Some`, for at most `limit`,
/// and returns that value; `None` when `limit` passed first. `probe` runs at
/// least once, and once more after the deadline, so a slow machine does not
/// turn a late success into a failure.
pub fn poll_until<T>(limit: Duration, mut probe: impl FnMut() -> Option<T>) -> Option<T> {
    let end = Instant::now() + limit;
    loop {
        let past_deadline = Instant::now() >= end;
        if let Some(value) = probe() {
            return Some(value);
        }
        if past_deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits up to `limit` for `pid` to be gone; true when it is.
pub fn gone_within(pid: i32, limit: Duration) -> bool {
    poll_until(limit, || (!alive(pid)).then_some(())).is_some()
}

/// Kills `pid` if it is still alive (test cleanup after a failure).
pub fn cleanup(pid: i32) {
    if alive(pid) {
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    }
}

/// Waits up to `limit` for `path` to hold a whole line; returns it trimmed.
pub fn wait_for_line(path: &std::path::Path, limit: Duration) -> Option<String> {
    poll_until(limit, || {
        let s = std::fs::read_to_string(path).ok()?;
        s.ends_with('\n').then(|| s.trim().to_string())
    })
}

/// An example binary of the workspace, built (or found up to date) by cargo
/// first, so that a filtered test run never uses a stale one.
pub fn example(name: &str) -> PathBuf {
    let mut path = bin();
    path.pop();
    let path = path.join("examples").join(name);
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "--quiet", "--workspace", "--example", name])
        .status()
        .expect("run cargo");
    assert!(status.success(), "cargo build --example {name}");
    path
}

/// Processes whose command line names `marker` (a path unique to a test).
pub fn processes_naming(marker: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.windows(marker.len()).any(|w| w == marker.as_bytes()))
        })
        .filter(|pid| alive(*pid))
        .collect()
}

/// Fails unless `value` is valid against the committed schema
/// `schema/STEM.schema.json`, and unless that schema refuses `value` with
/// an unknown field added (an object) or in its items (an array).
pub fn assert_matches_schema(stem: &str, value: &serde_json::Value) {
    let path = format!("{}/schema/{stem}.schema.json", env!("CARGO_MANIFEST_DIR"));
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(value)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{stem}: {errors:?}\n{value}");
    let mut extra = value.clone();
    let target = match &mut extra {
        serde_json::Value::Array(items) => items.first_mut(),
        other => Some(other),
    };
    if let Some(serde_json::Value::Object(map)) = target {
        map.insert("surprise".into(), serde_json::Value::Bool(true));
        assert!(!validator.is_valid(&extra), "{stem} takes an unknown field");
    }
}

/// Whether runs here get a containment cgroup (`explain`'s `containment`
/// row says cgroup-v2): then their CPU time is read from its `cpu.stat`.
pub fn contained() -> bool {
    let out = dsh().args(["explain", "--", "true"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).contains("containment       cgroup-v2")
}

/// The `resources.source` of a run without limits here.
pub fn unlimited_source() -> &'static str {
    if contained() {
        "cpu: cgroup-v2 cpu.stat; the rest: getrusage(RUSAGE_CHILDREN)"
    } else {
        "getrusage(RUSAGE_CHILDREN)"
    }
}

/// The binary, copied where an unprivileged user can run it.
pub struct Unprivileged {
    /// Holds the copy of the binary (0755).
    pub dir: tempfile::TempDir,
}

impl Unprivileged {
    pub fn new() -> Option<Unprivileged> {
        if !nix_is_root() {
            eprintln!("skipped: dropping to an unprivileged user needs root");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::copy(bin(), dir.path().join("dsh-exec")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        Some(Unprivileged { dir })
    }

    /// `dsh-exec ARGS` as user and group 65534, in the temp dir.
    pub fn run(&self, args: &[&str]) -> std::process::Output {
        self.run_with(&[], args)
    }

    /// The same, with `env` set as well.
    ///
    /// The copy of the binary was just written: a process another test
    /// forks meanwhile holds the write descriptor until its execve (the
    /// descriptor is close-on-exec, not close-on-fork), and executing the
    /// copy then fails with ETXTBSY (execve(2)). That is retried.
    pub fn run_with(
        &self,
        env: &[(&str, &std::ffi::OsStr)],
        args: &[&str],
    ) -> std::process::Output {
        for _ in 0..50 {
            let mut c = Command::new("setpriv");
            let out = known_env(&mut c)
                .env("TMPDIR", "/tmp")
                .envs(env.iter().copied())
                .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                .arg(self.dir.path().join("dsh-exec"))
                .args(args)
                .current_dir("/tmp")
                .stdin(Stdio::null())
                .output()
                .unwrap();
            if !String::from_utf8_lossy(&out.stderr).contains("Text file busy") {
                return out;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        panic!("the copy of dsh-exec stayed busy (ETXTBSY) for a second");
    }
}

pub fn nix_is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}
