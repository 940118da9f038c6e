//! Background jobs: start, incremental reads, wait, kill, list, lost
//! supervisors, and --detach-after. Each test has its own jobs root
//! (XDG_RUNTIME_DIR) and kills what it started.
use crate::support::*;
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

struct Jobs {
    runtime: tempfile::TempDir,
}

/// A runtime dir for the jobs of one test, with the temp dir the runs get
/// inside it (`TMP` there; see [`with_runtime`]): a runtime dir inside the
/// temp dir is not taken as dsh-exec's state directory (sandboxed runs may
/// write the temp dir), and wherever the checkout lies, /tmp or not, this
/// one is not.
pub fn runtime_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("tmp")).unwrap();
    dir
}

/// `c` with the runtime dir `runtime` (from [`runtime_dir`]) and its temp
/// dir.
pub fn with_runtime<'a>(c: &'a mut Command, runtime: &Path) -> &'a mut Command {
    c.env("XDG_RUNTIME_DIR", runtime)
        .env("TMPDIR", runtime.join("tmp"))
}

impl Jobs {
    fn new() -> Jobs {
        Jobs {
            runtime: runtime_dir(),
        }
    }

    fn cmd(&self) -> Command {
        let mut c = dsh();
        with_runtime(&mut c, self.runtime.path());
        c
    }

    fn run(&self, args: &[&str]) -> (String, i32) {
        let out = self.cmd().args(args).output().unwrap();
        (stdout(&out), code(&out))
    }

    /// `job wait ID` with a deadline: a job still running after 10 s fails
    /// the test instead of holding it for the job's own 10 min default.
    fn wait(&self, id: &str) -> (String, i32) {
        let (text, status) = self.run(&["job", "wait", id, "--timeout", "10s"]);
        assert_ne!(text, "[still running]\n", "job {id} still runs after 10 s");
        (text, status)
    }

    fn start(&self, script: &str) -> String {
        let (id, status) = self.run(&["--background", "--", script]);
        assert_eq!(status, 0, "{id}");
        id.trim().to_string()
    }

    fn dir(&self, id: &str) -> std::path::PathBuf {
        self.runtime.path().join("dsh-exec/jobs").join(id)
    }
}

impl Drop for Jobs {
    fn drop(&mut self) {
        // Kill whatever a failed test left running.
        if let Ok(entries) = std::fs::read_dir(self.runtime.path().join("dsh-exec/jobs")) {
            for e in entries.flatten() {
                let id = e.file_name().to_string_lossy().into_owned();
                let _ = self.cmd().args(["job", "kill", &id]).output();
            }
        }
    }
}

#[test]
fn reads_are_incremental_and_wait_prints_the_whole_result() {
    let jobs = Jobs::new();
    let id = jobs.start("for i in 1 2 3 4; do echo $i; sleep 0.4; done");
    let (first, status) = jobs.run(&["job", "read", &id]);
    assert_eq!(status, 0);
    assert!(first.ends_with("[running]\n"), "{first}");
    let mut seen: String = first.trim_end_matches("[running]\n").to_string();
    // A wait does not take output from the reads.
    assert_eq!(jobs.wait(&id).1, 0);
    let (rest, _) = jobs.run(&["job", "read", &id]);
    assert!(rest.ends_with("[exit code: 0]\n"), "{rest}");
    seen.push_str(rest.trim_end_matches("[exit code: 0]\n"));
    assert_eq!(seen, "1\n2\n3\n4\n", "reads repeated or lost output");
    let (again, _) = jobs.run(&["job", "read", &id]);
    assert_eq!(again, "[exit code: 0]\n");
    assert_eq!(jobs.wait(&id), ("1\n2\n3\n4\n[exit code: 0]\n".into(), 0));
}

/// A job's output read on a terminal (`job read`, `job wait`) has its
/// control sequences shown, as a run's has; in a pipe, the exact bytes.
#[test]
fn a_jobs_output_on_a_terminal_shows_its_control_sequences() {
    use crate::support::pty::Pty;
    let jobs = Jobs::new();
    let id = jobs.start("printf '\\033]0;pwned\\007\\033[31mred\\033[0m\\n'");
    assert_eq!(
        jobs.wait(&id),
        (
            "\x1b]0;pwned\x07\x1b[31mred\x1b[0m\n[exit code: 0]\n".into(),
            0
        )
    );
    let on_terminal = |args: &[&str]| {
        Pty::new(bin())
            .args(args)
            .env("XDG_RUNTIME_DIR", jobs.runtime.path())
            .env("TMPDIR", jobs.runtime.path().join("tmp"))
            .env("NO_COLOR", "1")
            .run()
            .text
    };
    assert_eq!(
        on_terminal(&["job", "read", &id]),
        "\\x1b]0;pwned\\x07red\r\n[exit code: 0]\r\n"
    );
    assert_eq!(
        on_terminal(&["job", "wait", &id]),
        "\\x1b]0;pwned\\x07red\r\n[exit code: 0]\r\n"
    );
}

#[test]
fn a_read_after_the_tail_moved_on_is_lossy_and_names_the_spill_file() {
    let jobs = Jobs::new();
    let spill = tempfile::tempdir().unwrap();
    let (id, _) = jobs.run(&[
        "--background",
        "--stdout-max-bytes",
        "1K",
        "--spill-dir",
        spill.path().to_str().unwrap(),
        "--",
        "seq 1 100000; sleep 0.5",
    ]);
    let id = id.trim();
    let expected = Command::new("seq")
        .args(["1", "100000"])
        .output()
        .unwrap()
        .stdout;
    // Until seq is done, which the spill file shows without taking output
    // (a read would move the read position).
    let spilled = || {
        let run_dir = std::fs::read_dir(spill.path()).ok()?.next()?.ok()?.path();
        let len = std::fs::metadata(run_dir.join("stdout")).ok()?.len();
        (len == expected.len() as u64).then_some(())
    };
    poll_until(Duration::from_secs(10), spilled)
        .expect("the job did not write all of seq's output within 10 s");
    let (json, _) = jobs.run(&["job", "read", id, "--json"]);
    let v: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["lossy"], true, "{v}");
    let path = v["stdout_spill_path"].as_str().unwrap();
    jobs.wait(id);
    assert_eq!(std::fs::read(path).unwrap(), expected);
    assert!(expected.ends_with(v["delta_stdout"].as_str().unwrap().as_bytes()));
}

/// Host pids of processes whose command line is exactly `cmdline` (the
/// pids a job echoes are its PID namespace's, not these).
fn pids_of(cmdline: &str) -> Vec<i32> {
    let out = Command::new("pgrep")
        .args(["-x", "-f", cmdline])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Waits up to 10 s for `n` processes running exactly `cmdline`.
fn wait_for_pids(cmdline: &str, n: usize) -> Vec<i32> {
    poll_until(Duration::from_secs(10), || {
        Some(pids_of(cmdline)).filter(|pids| pids.len() == n)
    })
    .unwrap_or_else(|| panic!("{n} processes '{cmdline}' did not appear within 10 s"))
}

#[test]
fn kill_ends_the_whole_tree_and_a_second_kill_exits_1() {
    let jobs = Jobs::new();
    let id = jobs.start("sleep 1001 & sleep 1001 & echo started; wait");
    let sleeps = wait_for_pids("sleep 1001", 2);
    assert_eq!(
        jobs.run(&["job", "kill", &id]),
        (format!("job {id} killed\n"), 0)
    );
    let survivors: Vec<i32> = sleeps
        .iter()
        .copied()
        .filter(|p| !gone_within(*p, Duration::from_secs(2)))
        .collect();
    survivors.iter().for_each(|p| cleanup(*p));
    assert!(survivors.is_empty(), "{survivors:?} survived");
    let (text, status) = jobs.run(&["job", "kill", &id]);
    assert_eq!(status, 1, "{text}");
}

#[test]
fn detach_after_prints_the_output_so_far_and_the_job_finishes_later() {
    let jobs = Jobs::new();
    let (text, status) = jobs.run(&[
        "--detach-after",
        "500ms",
        "--",
        "echo early; sleep 2; echo late",
    ]);
    assert_eq!(status, 0);
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("early"));
    let id = lines
        .next()
        .and_then(|l| l.strip_prefix("[detached as job "))
        .and_then(|l| l.strip_suffix(']'))
        .expect("a detached line")
        .to_string();
    assert_eq!(lines.next(), None);
    let (result, status) = jobs.wait(&id);
    assert_eq!(
        (result.as_str(), status),
        ("early\nlate\n[exit code: 0]\n", 0)
    );
    // A command that ends in time is reported as a foreground run.
    assert_eq!(
        jobs.run(&["--detach-after", "5s", "--", "echo quick; exit 3"]),
        ("quick\n[exit code: 3]\n".into(), 3)
    );
}

#[test]
fn a_supervisor_killed_with_sigkill_takes_the_tree_along_and_the_job_is_lost() {
    let jobs = Jobs::new();
    let id = jobs.start("sleep 1002 & sleep 1002 & wait");
    let sleeps = wait_for_pids("sleep 1002", 2);
    let record: Value =
        serde_json::from_slice(&std::fs::read(jobs.dir(&id).join("supervisor.json")).unwrap())
            .unwrap();
    let supervisor = record["pid"].as_i64().unwrap();
    Command::new("kill")
        .args(["-KILL", &supervisor.to_string()])
        .status()
        .unwrap();
    let survivors: Vec<i32> = sleeps
        .iter()
        .copied()
        .filter(|p| !gone_within(*p, Duration::from_secs(2)))
        .collect();
    survivors.iter().for_each(|p| cleanup(*p));
    let (read, _) = jobs.run(&["job", "read", &id]);
    assert!(read.ends_with("[lost]\n"), "{read}");
    let (list, _) = jobs.run(&["job", "list"]);
    assert!(list.contains(&format!("{id}  lost")), "{list}");
    assert!(
        survivors.is_empty(),
        "{survivors:?} outlived their supervisor"
    );
}

#[test]
fn two_jobs_keep_their_outputs_apart_and_are_both_listed() {
    let jobs = Jobs::new();
    let a = jobs.start("echo from-a; sleep 0.3");
    let b = jobs.start("echo from-b >&2; sleep 0.3");
    let (list, _) = jobs.run(&["job", "list", "--json"]);
    let v: Value = serde_json::from_str(&list).unwrap();
    let ids: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["job_id"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&a.as_str()) && ids.contains(&b.as_str()),
        "{list}"
    );
    assert_eq!(jobs.wait(&a).0, "from-a\n[exit code: 0]\n");
    assert_eq!(jobs.wait(&b).0, "[stderr]\nfrom-b\n[exit code: 0]\n");
    assert_eq!(jobs.run(&["job", "prune"]).0, "pruned 2 jobs\n");
    // Piped: rows alone, and none when there are none.
    assert_eq!(jobs.run(&["job", "list"]).0, "");
}

#[test]
fn wait_with_a_timeout_leaves_the_job_running() {
    let jobs = Jobs::new();
    let id = jobs.start("sleep 30");
    assert_eq!(
        jobs.run(&["job", "wait", &id, "--timeout", "200ms"]),
        ("[still running]\n".into(), 124)
    );
    assert_eq!(jobs.run(&["job", "kill", &id]).1, 0);
}

#[test]
fn the_jobs_root_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let jobs = Jobs::new();
    let id = jobs.start("true");
    jobs.wait(&id);
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&jobs.runtime.path().join("dsh-exec/jobs")), 0o700);
    assert_eq!(mode(&jobs.dir(&id)), 0o700);
    let (_, status) = jobs.run(&["job", "read", "../etc"]);
    assert_eq!(status, 125);
}

#[test]
fn a_character_split_between_two_reads_arrives_whole() {
    let jobs = Jobs::new();
    let id = jobs.start("printf 'caf\\303'; sleep 0.8; printf '\\251 ok\\n'");
    // Reads until one has output (a read with none takes nothing).
    let first = poll_until(Duration::from_secs(5), || {
        let (text, _) = jobs.run(&["job", "read", &id]);
        (text != "[running]\n").then_some(text)
    })
    .expect("the job printed nothing within 5 s");
    assert_eq!(first, "caf\n[running]\n");
    jobs.wait(&id);
    let (rest, _) = jobs.run(&["job", "read", &id]);
    assert_eq!(rest, "é ok\n[exit code: 0]\n");
}

#[test]
fn stdin_dash_feeds_a_background_job() {
    let jobs = Jobs::new();
    let out = Test::new()
        .env("XDG_RUNTIME_DIR", jobs.runtime.path())
        .env("TMPDIR", jobs.runtime.path().join("tmp"))
        .args(["--background", "--stdin-file", "-", "--", "tr a-z A-Z"])
        .stdin("hello\n")
        .run();
    let id = out.stdout.trim().to_string();
    assert_eq!(jobs.wait(&id).0, "HELLO\n[exit code: 0]\n");
}

#[test]
fn a_forged_result_does_not_end_a_running_job() {
    let jobs = Jobs::new();
    let id = jobs.start("sleep 30");
    std::fs::write(jobs.dir(&id).join("result.json"), "{}").unwrap();
    let (list, _) = jobs.run(&["job", "list"]);
    assert!(list.contains(&format!("{id}  running")), "{list}");
    assert_eq!(jobs.run(&["job", "kill", &id]).1, 0);
}

#[test]
fn prune_spill_removes_only_spill_files_of_the_expected_shape() {
    let jobs = Jobs::new();
    let spill = tempfile::tempdir().unwrap();
    let (id, _) = jobs.run(&[
        "--background",
        "--stdout-max-bytes",
        "4",
        "--spill-dir",
        spill.path().to_str().unwrap(),
        "--",
        "seq 1 100",
    ]);
    let id = id.trim();
    jobs.wait(id);
    assert_eq!(std::fs::read_dir(spill.path()).unwrap().count(), 1);
    assert_eq!(jobs.run(&["job", "prune", "--spill"]).0, "pruned 1 job\n");
    assert_eq!(std::fs::read_dir(spill.path()).unwrap().count(), 0);
}

#[test]
fn a_background_job_whose_sandbox_cannot_start_is_an_error() {
    let jobs = Jobs::new();
    let out = Command::new(example("seccomp_errno"))
        .args(["landlock_restrict_self", "--"])
        .arg(bin())
        .args(["--background", "-s", "read-only", "--", "echo ran"])
        .env("XDG_RUNTIME_DIR", jobs.runtime.path())
        .env("TMPDIR", jobs.runtime.path().join("tmp"))
        .output()
        .unwrap();
    assert_eq!(code(&out), 125, "{}", stderr(&out));
    assert_eq!(stdout(&out), "");
}

#[test]
fn a_client_trickling_bytes_cannot_hold_the_deadline_off() {
    use std::io::Write;
    let jobs = Jobs::new();
    let (id, _) = jobs.run(&[
        "--background",
        "--timeout",
        "1s",
        "--kill-after",
        "200ms",
        "--",
        "sleep 30",
    ]);
    let id = id.trim().to_string();
    let sock = jobs.dir(&id).join("sock");
    let t0 = std::time::Instant::now();
    let trickler = std::thread::spawn(move || {
        let mut s = std::os::unix::net::UnixStream::connect(sock).unwrap();
        for _ in 0..40 {
            if s.write_all(b"x").is_err() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    let (text, status) = jobs.run(&["job", "wait", &id]);
    let took = t0.elapsed();
    trickler.join().unwrap();
    assert_eq!(status, 124, "{text}");
    assert!(
        took < Duration::from_secs(3),
        "the deadline waited for a client: {took:?}"
    );
}

#[test]
fn without_a_runtime_dir_jobs_live_under_the_state_home() {
    let home = tempfile::tempdir().unwrap();
    let v = Test::new()
        .env("HOME", home.path())
        .args(["--background", "--json", "--", "true"])
        .run()
        .json();
    let dir = v["dir"].as_str().unwrap();
    assert!(
        dir.starts_with(&format!(
            "{}/.local/state/dsh-exec/jobs/",
            home.path().display()
        )),
        "{dir}"
    );
    let id = v["job_id"].as_str().unwrap();
    let wait = Test::new()
        .env("HOME", home.path())
        .args(["job", "wait", id, "--timeout", "10s"])
        .run();
    assert_eq!(wait.stdout, "[exit code: 0]\n");
}

/// Every process's command line, as `/proc/PID/cmdline` shows it to anyone
/// on the host.
fn all_cmdlines() -> Vec<(i32, Vec<u8>)> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| Some((pid, std::fs::read(format!("/proc/{pid}/cmdline")).ok()?)))
        .collect()
}

#[test]
fn no_env_value_appears_in_any_command_line_while_the_job_runs() {
    let jobs = Jobs::new();
    let secret = "hunter2-cmdline-probe";
    let (id, status) = jobs.run(&[
        "--background",
        "-e",
        &format!("PROBE_VALUE={secret}"),
        "--",
        "echo got:$PROBE_VALUE; sleep 30",
    ]);
    assert_eq!(status, 0, "{id}");
    let id = id.trim();
    // The command has the value: the handoff carried it.
    let seen = poll_until(Duration::from_secs(5), || {
        let (text, _) = jobs.run(&["job", "read", id]);
        text.contains("got:").then_some(text)
    })
    .expect("the job printed nothing");
    assert!(seen.starts_with(&format!("got:{secret}\n")), "{seen}");
    let record: Value =
        serde_json::from_slice(&std::fs::read(jobs.dir(id).join("supervisor.json")).unwrap())
            .unwrap();
    let supervisor = record["pid"].as_i64().unwrap() as i32;
    let cmdline = std::fs::read(format!("/proc/{supervisor}/cmdline")).unwrap();
    assert!(
        cmdline.starts_with(b"dsh-exec\0__supervise\0"),
        "{}",
        String::from_utf8_lossy(&cmdline)
    );
    // The supervisor itself has an empty environment (root may read it
    // despite it being not dumpable).
    if let Ok(environ) = std::fs::read(format!("/proc/{supervisor}/environ")) {
        assert_eq!(String::from_utf8_lossy(&environ), "");
    }
    let leaks: Vec<i32> = all_cmdlines()
        .into_iter()
        .filter(|(_, c)| c.windows(secret.len()).any(|w| w == secret.as_bytes()))
        .map(|(pid, _)| pid)
        .collect();
    assert!(leaks.is_empty(), "the value is in the cmdline of {leaks:?}");
    assert_eq!(jobs.run(&["job", "kill", id]).1, 0);
}

#[test]
fn a_relative_tmpdir_is_taken_from_the_current_directory() {
    // The supervisor runs from /: the spec it is handed must hold absolute
    // paths only. With no runtime dir and no home, the state directory (and
    // so the jobs and the spill directory) falls back to the temp dir.
    let cwd = tempfile::tempdir().unwrap();
    std::fs::create_dir(cwd.path().join("tmp")).unwrap();
    let at_cwd = |args: &[&str]| {
        dsh()
            .current_dir(cwd.path())
            .env("TMPDIR", "tmp")
            .env_remove("XDG_RUNTIME_DIR")
            .env("HOME", "/nonexistent-home")
            .args(args)
            .output()
            .unwrap()
    };
    let out = at_cwd(&[
        "--background",
        "--json",
        "--stdout-max-bytes",
        "1",
        "--",
        "echo hello",
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = v["job_id"].as_str().unwrap();
    let waited = at_cwd(&["job", "wait", id, "--timeout", "10s"]);
    assert_eq!(code(&waited), 0, "{}", stdout(&waited));
    let read = at_cwd(&["job", "read", id, "--json"]);
    let v: Value = serde_json::from_slice(&read.stdout).unwrap();
    let spill = v["result"]["stdout"]["spill_path"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        spill.starts_with(&format!("{}/tmp/dsh-exec-", cwd.path().display())),
        "{spill}"
    );
    assert_eq!(std::fs::read(&spill).unwrap(), b"hello\n");
}

#[test]
fn job_list_has_a_header_on_a_terminal_and_none_when_piped() {
    let jobs = Jobs::new();
    let id = jobs.start("true");
    jobs.wait(&id);
    let header = "JOB        STATUS    STARTED             EXIT  COMMAND";
    let (piped, status) = jobs.run(&["job", "list"]);
    assert_eq!(status, 0);
    assert!(!piped.contains(header), "{piped}");
    assert!(piped.starts_with(&id), "{piped}");
    let screen = crate::support::pty::Pty::new(bin())
        .args(["job", "list"])
        .env("XDG_RUNTIME_DIR", jobs.runtime.path())
        .env("TMPDIR", jobs.runtime.path().join("tmp"))
        .run();
    assert!(screen.text.contains(header), "{:?}", screen.text);
    assert!(screen.text.contains(&id), "{:?}", screen.text);
}

#[test]
fn a_detached_job_keeps_the_foreground_deadline() {
    let jobs = Jobs::new();
    // explain shows the deadline a --detach-after job gets; --background
    // has none.
    let (text, _) = jobs.run(&["explain", "--detach-after", "5s", "--", "true"]);
    assert!(text.contains("timeout           10m "), "{text}");
    let (text, _) = jobs.run(&["explain", "--background", "--", "true"]);
    assert!(text.contains("timeout           none "), "{text}");
    // And the job is held to it: detached after 100 ms, killed at 600 ms.
    let (out, status) = jobs.run(&[
        "--detach-after",
        "100ms",
        "--timeout",
        "600ms",
        "--",
        "sleep 30",
    ]);
    assert_eq!(status, 0, "{out}");
    let id = out
        .lines()
        .last()
        .and_then(|l| l.strip_prefix("[detached as job "))
        .and_then(|l| l.strip_suffix(']'))
        .unwrap_or_else(|| panic!("{out}"))
        .to_string();
    let (waited, status) = jobs.run(&["job", "wait", &id]);
    assert_eq!(status, 124, "{waited}");
    assert!(waited.contains("[timed out after 600ms]"), "{waited}");
}

#[test]
fn a_background_job_honours_its_limits_and_wait_reports_what_it_used() {
    let jobs = Jobs::new();
    let (id, status) = jobs.run(&[
        "--background",
        "--cpu-max",
        "1s",
        "--kill-after",
        "300ms",
        "--",
        "while :; do :; done",
    ]);
    assert_eq!(status, 0, "{id}");
    let id = id.trim();
    let (text, status) = jobs.run(&["job", "wait", id, "--json", "--timeout", "20s"]);
    let v: Value = serde_json::from_str(&text).unwrap();
    // As the init of its PID namespace, a job's bash may ignore SIGTERM:
    // SIGKILL follows after the grace period.
    assert!([143, 137].contains(&status), "{v}");
    assert_eq!(v["limit_exceeded"], "cpu", "{v}");
    let r = &v["resources"];
    let cpu = r["cpu_user_ms"].as_u64().unwrap() + r["cpu_system_ms"].as_u64().unwrap();
    assert!((900..3000).contains(&cpu), "{r}");
    let (read, _) = jobs.run(&["job", "read", id]);
    assert!(
        read.contains("[stopped by the CPU time limit (1s)]\n[killed by signal: SIG"),
        "{read}"
    );
}

#[test]
fn a_stdin_pipe_job_takes_writes_and_reads_end_of_file_on_close() {
    let jobs = Jobs::new();
    let (id, status) = jobs.run(&[
        "--background",
        "--stdin",
        "pipe",
        "--",
        "read -r x; echo got:$x; wc -c",
    ]);
    assert_eq!(status, 0, "{id}");
    let id = id.trim();
    assert_eq!(
        jobs.run(&["job", "write", id, "hello\\n"]),
        (String::new(), 0)
    );
    let seen = poll_until(Duration::from_secs(10), || {
        let (text, _) = jobs.run(&["job", "read", id]);
        text.starts_with("got:hello\n").then_some(text)
    });
    assert!(seen.is_some(), "no got:hello");
    // 3 MiB, more than a pipe holds: written in pieces as the command reads.
    let mut c = jobs.cmd();
    c.args(["job", "write", id, "-", "--close"])
        .stdin(std::process::Stdio::piped());
    let mut child = c.spawn().unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(&vec![b'z'; 3 << 20]).unwrap();
    }
    assert!(child.wait().unwrap().success());
    let (text, status) = jobs.wait(id);
    assert_eq!(status, 0);
    assert_eq!(text, "got:hello\n3145728\n[exit code: 0]\n");
    // It has finished: nothing more goes in.
    let out = jobs.cmd().args(["job", "write", id, "x"]).output().unwrap();
    assert_eq!(code(&out), 1);
    assert_eq!(
        stderr(&out),
        format!("dsh-exec: job {id} is not running (0 bytes written)\n")
    );
}

#[test]
fn a_job_without_a_stdin_pipe_refuses_writes_and_a_foreground_run_cannot_have_one() {
    let jobs = Jobs::new();
    let id = jobs.start("sleep 5");
    let out = jobs
        .cmd()
        .args(["job", "write", &id, "x"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 1);
    assert_eq!(
        stderr(&out),
        format!(
            "dsh-exec: job {id}: stdin is not a pipe (start the job with --stdin pipe) (0 bytes written)\n"
        )
    );
    let _ = jobs.run(&["job", "kill", &id]);
    let out = dsh()
        .args(["--stdin", "pipe", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 125);
    assert!(stderr(&out).contains("--stdin pipe needs --background"));
    // A command that never reads: the write gives up after its timeout.
    let (id, _) = jobs.run(&["--background", "--stdin", "pipe", "--", "sleep 30"]);
    let id = id.trim();
    let mut c = jobs.cmd();
    c.args(["job", "write", id, "-", "--timeout", "300ms"])
        .stdin(std::process::Stdio::piped());
    let mut child = c.stderr(std::process::Stdio::piped()).spawn().unwrap();
    {
        use std::io::Write;
        let _ = child.stdin.take().unwrap().write_all(&vec![b'z'; 1 << 20]);
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(code(&out), 1);
    assert!(
        stderr(&out).starts_with(&format!("dsh-exec: job {id} did not read its stdin (")),
        "{}",
        stderr(&out)
    );
    let _ = jobs.run(&["job", "kill", id]);
}

/// Reads the job until its output so far holds `needle` (10 s at most).
fn read_until_seen(jobs: &Jobs, id: &str, needle: &str) -> String {
    let mut seen = String::new();
    let found = poll_until(Duration::from_secs(10), || {
        seen.push_str(&jobs.run(&["job", "read", id]).0.replace("[running]\n", ""));
        seen.contains(needle).then_some(())
    });
    assert!(found.is_some(), "no {needle:?} in {seen:?}");
    seen
}

#[test]
fn a_pty_job_is_a_terminal_that_job_write_types_into_and_job_resize_sizes() {
    let jobs = Jobs::new();
    let (id, status) = jobs.run(&["--background", "--pty", "--", "python3 -i -q"]);
    assert_eq!(status, 0, "{id}");
    let id = id.trim();
    assert_eq!(jobs.run(&["job", "write", id, "1+1\\n"]).1, 0);
    let seen = read_until_seen(&jobs, id, "\n2\r\n");
    assert!(seen.contains(">>> "), "{seen:?}");
    assert_eq!(jobs.run(&["job", "resize", id, "120x40"]).1, 0);
    assert_eq!(
        jobs.run(&[
            "job",
            "write",
            id,
            "import os; print(os.get_terminal_size(), os.environ['TERM'], os.isatty(2))\\n"
        ])
        .1,
        0
    );
    read_until_seen(
        &jobs,
        id,
        "os.terminal_size(columns=120, lines=40) xterm-256color True",
    );
    // End-of-file typed on the terminal ends the REPL.
    assert_eq!(jobs.run(&["job", "write", id, "--close"]).1, 0);
    let (text, status) = jobs.wait(id);
    assert_eq!(status, 0, "{text}");
    assert!(text.ends_with("[exit code: 0]\n"), "{text}");
}

#[test]
fn a_pty_job_in_a_confining_mode_has_its_terminal_and_no_other() {
    let jobs = Jobs::new();
    let ws = tempfile::tempdir().unwrap();
    let (id, status) = jobs.run(&[
        "--background",
        "--pty",
        "--sandbox",
        "workspace-write",
        "-C",
        ws.path().to_str().unwrap(),
        "--",
        "read -r x; stty size; echo to-tty > /dev/tty; echo got:$x",
    ]);
    assert_eq!(status, 0, "{id}");
    let id = id.trim();
    assert_eq!(jobs.run(&["job", "resize", id, "100x30"]).1, 0);
    assert_eq!(jobs.run(&["job", "write", id, "yes\\n"]).1, 0);
    let (text, status) = jobs.wait(id);
    assert_eq!(status, 0, "{text}");
    // The terminal echoes the typed line; \r\n is its line ending.
    assert_eq!(
        text,
        "yes\r\n30 100\r\nto-tty\r\ngot:yes\r\n[exit code: 0]\n"
    );
}

#[test]
fn pty_needs_a_background_job_and_resize_needs_a_pty() {
    let out = dsh().args(["--pty", "--", "true"]).output().unwrap();
    assert_eq!(code(&out), 125);
    assert!(
        stderr(&out).contains("--pty needs --background"),
        "{}",
        stderr(&out)
    );
    let jobs = Jobs::new();
    let id = jobs.start("sleep 5");
    let out = jobs
        .cmd()
        .args(["job", "resize", &id, "80x24"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 1);
    assert_eq!(
        stderr(&out),
        format!("dsh-exec: job {id}: the job has no terminal (start it with --pty)\n")
    );
    let out = jobs
        .cmd()
        .args(["job", "resize", &id, "80by24"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 125);
    let _ = jobs.run(&["job", "kill", &id]);
}

#[test]
fn every_job_output_matches_its_schema() {
    let jobs = Jobs::new();
    let (text, status) = jobs.run(&[
        "--background",
        "--json",
        "--",
        "echo one; sleep 0.3; echo two",
    ]);
    assert_eq!(status, 0, "{text}");
    let started: Value = serde_json::from_str(&text).unwrap();
    assert_matches_schema("job-started", &started);
    let id = started["job_id"].as_str().unwrap().to_string();
    let (text, _) = jobs.run(&["job", "list", "--json"]);
    let listed: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(listed[0]["job_id"], id.as_str());
    assert_matches_schema("job-list", &listed);
    let (text, _) = jobs.run(&["job", "read", &id, "--json"]);
    let read: Value = serde_json::from_str(&text).unwrap();
    assert_matches_schema("job-read", &read);
    let (text, status) = jobs.run(&["job", "wait", &id, "--timeout", "10s", "--json"]);
    assert_eq!(status, 0, "{text}");
    let waited: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(waited["exit_code"], 0);
    assert_matches_schema("job-wait", &waited);
    assert_matches_schema("run-result", &waited);
    let (text, _) = jobs.run(&["job", "read", &id, "--json"]);
    let last: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(last["status"], "finished");
    assert_matches_schema("job-read", &last);
    let (text, _) = jobs.run(&["job", "list", "--json"]);
    let listed: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(listed[0]["exit_status"], 0);
    assert_matches_schema("job-list", &listed);

    let (text, status) = jobs.run(&[
        "--detach-after",
        "100ms",
        "--json",
        "--",
        "echo early; sleep 5",
    ]);
    assert_eq!(status, 0, "{text}");
    let detached: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(detached["detached"], true);
    assert_eq!(detached["delta_stdout"], "early\n");
    assert_matches_schema("job-detached", &detached);
    let id = detached["job_id"].as_str().unwrap().to_string();
    let (text, status) = jobs.run(&["job", "wait", &id, "--timeout", "50ms", "--json"]);
    assert_eq!(status, 124, "{text}");
    let pending: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(pending, serde_json::json!({"status": "running"}));
    assert_matches_schema("job-wait", &pending);
    let (_, status) = jobs.run(&["job", "kill", &id]);
    assert_eq!(status, 0);
}

#[test]
fn a_command_with_line_breaks_is_one_row_of_job_list() {
    let jobs = Jobs::new();
    // The second line is a comment, shaped like a row of its own, after a
    // carriage return and an erase-line sequence that would wipe the real
    // row on a terminal.
    let command =
        "true \r\x1b[2K\n# jforged01  running   2020-01-01 00:00:00    -  forged\u{2028}x\t.";
    let id = jobs.start(command);
    // The texts of read and wait do not show the command.
    assert_eq!(jobs.wait(&id).0, "[exit code: 0]\n");
    assert_eq!(jobs.run(&["job", "read", &id]).0, "[exit code: 0]\n");
    let shown =
        "true \\r\\x1b[2K\\n# jforged01  running   2020-01-01 00:00:00    -  forged\\u2028x\\t.";
    let (piped, status) = jobs.run(&["job", "list"]);
    assert_eq!(status, 0);
    assert_eq!(piped.lines().count(), 1, "{piped:?}");
    assert!(piped.starts_with(&format!("{id}  finished  ")), "{piped:?}");
    assert!(piped.ends_with(&format!("    0  {shown}\n")), "{piped:?}");
    // The JSON form keeps the command exact.
    let (json, _) = jobs.run(&["job", "list", "--json"]);
    let listed: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(listed[0]["command"], command, "{json}");
    // On a terminal: the header, then the same single row.
    let screen = crate::support::pty::Pty::new(bin())
        .args(["job", "list"])
        .env("XDG_RUNTIME_DIR", jobs.runtime.path())
        .env("TMPDIR", jobs.runtime.path().join("tmp"))
        .run();
    let header = "JOB        STATUS    STARTED             EXIT  COMMAND";
    assert_eq!(
        screen.text,
        format!("{header}\r\n{}\r\n", piped.trim_end()),
        "{:?}",
        screen.text
    );
    // Nor does --detach-after's.
    let script = "sleep 5\n# [exit code: 0]";
    let (detached, _) = jobs.run(&["--detach-after", "100ms", "--", script]);
    let other = detached
        .strip_prefix("[detached as job ")
        .and_then(|l| l.strip_suffix("]\n"))
        .unwrap_or_else(|| panic!("{detached:?}"));
    assert_eq!(jobs.run(&["job", "kill", other]).1, 0);
}
