//! Resource limits: --memory-max, --pids-max, --cpu-max, --file-size-max,
//! their mechanisms (cgroups where the machine has them, accounting for CPU
//! time without), LIMIT_UNAVAILABLE and --limits best-effort, and the
//! `resources` and `limit_exceeded` facts. Tests that need a cgroup skip,
//! with the reason, where this user cannot make one.
use crate::support::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How `limit` (`memory`, `pids`, `cpu`) would be enforced for `args`, as
/// `explain --json` says: (mechanism, detail).
fn mechanism(args: &[&str], limit: &str) -> (String, String) {
    let out = Test::new()
        .args(["explain", "--json"])
        .args(args)
        .args(["--", "true"])
        .run();
    let v = out.json();
    assert_eq!(out.status, 0, "{v}");
    let m = &v["limit_mechanisms"][limit];
    (
        m["mechanism"].as_str().unwrap_or_default().to_string(),
        m["detail"].as_str().unwrap_or_default().to_string(),
    )
}

/// The directory a cgroup limit's run cgroups are made in, or `None`
/// (with the reason printed) when this user cannot make one here.
fn cgroup_base(flag: &str, value: &str, limit: &str) -> Option<PathBuf> {
    let (name, detail) = mechanism(&[flag, value], limit);
    if !name.starts_with("cgroup-") {
        eprintln!("skipped: {flag} has no cgroup here: {detail}");
        return None;
    }
    detail.split(" under ").nth(1).map(PathBuf::from)
}

/// The inode of this process's PID namespace, which the run cgroups of a
/// `dsh-exec` started here are named by (`run-PIDNS-PID-START-N`).
fn pid_namespace() -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self/ns/pid").unwrap().ino()
}

/// Run cgroups of the `dsh-exec` process `pid` left under `base`.
fn leftover_cgroups(base: &Path, pid: u32) -> Vec<String> {
    let prefix = format!("run-{}-{pid}-", pid_namespace());
    std::fs::read_dir(base)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&prefix))
                .collect()
        })
        .unwrap_or_default()
}

/// Runs the binary with `args`, returning its pid, JSON result and status.
fn run_json_pid(args: &[&str]) -> (u32, Value, i32) {
    let child = dsh()
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let v = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&out), stderr(&out)));
    (pid, v, code(&out))
}

const ALLOCATE_256_MIB: &str =
    "python3 -c 'a = [bytearray(1 << 20) for _ in range(256)]; print(\"survived\")'";

#[test]
fn a_tree_over_its_memory_limit_is_killed_and_the_result_says_why() {
    let Some(base) = cgroup_base("--memory-max", "64MiB", "memory") else {
        return;
    };
    let (pid, v, status) =
        run_json_pid(&["--json", "--memory-max", "64MiB", "--", ALLOCATE_256_MIB]);
    assert_eq!(status, 137, "{v}");
    assert_eq!(v["signal"], "SIGKILL");
    assert_eq!(v["exit_code"], Value::Null);
    assert_eq!(v["limit_exceeded"], "memory");
    assert_eq!(v["timed_out"], false);
    assert_eq!(v["stdout"]["text"], "");
    let peak = v["resources"]["peak_memory_bytes"].as_u64().unwrap();
    assert!(peak <= (64 << 20) + (4 << 20), "{v}");
    assert!(peak >= 16 << 20, "{v}");
    assert_eq!(v["limits"]["memory_max_bytes"], 64 << 20);
    assert!(
        v["limits"]["mechanism"]["memory"]
            .as_str()
            .unwrap()
            .starts_with("cgroup-"),
        "{v}"
    );
    assert!(
        v["resources"]["source"]
            .as_str()
            .unwrap()
            .contains("memory: cgroup-"),
        "{v}"
    );
    assert_eq!(leftover_cgroups(&base, pid), Vec::<String>::new());

    // The text says so above the marker, which stays the signal.
    let out = Test::new()
        .args(["--memory-max", "64MiB", "--", ALLOCATE_256_MIB])
        .run();
    out.expect_status(137);
    assert!(
        out.stdout
            .ends_with("[killed by the memory limit (64MiB)]\n[killed by signal: SIGKILL]\n"),
        "{}",
        out.stdout
    );
}

#[test]
fn an_oom_kill_inside_the_tree_ends_the_whole_run() {
    // The kernel kills the allocating process; the shell after it would
    // go on, but the run ends as systemd's OOMPolicy=stop does.
    if cgroup_base("--memory-max", "64MiB", "memory").is_none() {
        return;
    }
    let started = Instant::now();
    let (v, status) = run_json(&[
        "--memory-max",
        "64MiB",
        "--",
        &format!("{ALLOCATE_256_MIB}; echo after; sleep 30"),
    ]);
    assert!(started.elapsed() < Duration::from_secs(20), "{v}");
    assert_eq!(v["limit_exceeded"], "memory", "{v}");
    assert_eq!(status, 143, "{v}");
    assert_eq!(v["signal"], "SIGTERM");
}

/// Processes whose command line holds `needle`.
fn processes_with(needle: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if let Ok(c) = std::fs::read(format!("/proc/{pid}/cmdline"))
            && String::from_utf8_lossy(&c).contains(needle)
            && alive(pid)
        {
            found.push(pid);
        }
    }
    found
}

#[test]
fn a_fork_bomb_never_has_more_processes_than_its_limit_and_leaves_none() {
    let Some(base) = cgroup_base("--pids-max", "32", "pids") else {
        return;
    };
    let marker = "7.3141";
    let mut child = dsh()
        .args([
            "--json",
            "--pids-max",
            "32",
            "--timeout",
            "5s",
            "--kill-after",
            "500ms",
            "--",
            &format!("for i in $(seq 2000); do (sleep {marker} &) 2>/dev/null; done; echo forked"),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut leaf = None;
    let mut most = 0u64;
    let mut samples = 0;
    while child.try_wait().unwrap().is_none() {
        if leaf.is_none() {
            leaf = leftover_cgroups(&base, pid).first().map(|n| base.join(n));
        }
        if let Some(t) = leaf
            .as_ref()
            .and_then(|l| std::fs::read_to_string(l.join("pids.current")).ok())
        {
            most = most.max(t.trim().parse().unwrap_or(0));
            samples += 1;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let out = child.wait_with_output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let leaf = leaf.expect("the run's cgroup was not found");
    assert!(samples > 10, "{samples} samples of {}", leaf.display());
    assert!(most <= 32, "{most} processes sampled in {}", leaf.display());
    let peak = v["resources"]["max_pids"].as_u64().unwrap();
    assert!((2..=32).contains(&peak), "{v}");
    assert!(
        v["limit_exceeded"] == "pids" || v["timed_out"] == true,
        "{v}"
    );
    assert_eq!(v["limit_exceeded"], "pids", "the forks were refused: {v}");
    assert_eq!(processes_with(marker), Vec::<i32>::new(), "survivors");
    assert!(!leaf.exists(), "{} was not removed", leaf.display());
}

#[test]
fn a_tree_that_used_its_cpu_time_is_stopped_as_at_the_deadline() {
    let (name, detail) = mechanism(&["--cpu-max", "1s"], "cpu");
    assert_ne!(name, "none", "{detail}");
    let started = Instant::now();
    let (v, status) = run_json(&["--cpu-max", "1s", "--", "while :; do :; done"]);
    let wall = started.elapsed();
    assert_eq!(status, 143, "{v}");
    assert_eq!(v["signal"], "SIGTERM");
    assert_eq!(v["limit_exceeded"], "cpu");
    assert_eq!(v["timed_out"], false);
    assert_eq!(v["limits"]["cpu_max_ms"], 1000);
    assert_eq!(v["limits"]["mechanism"]["cpu"], name.as_str());
    let r = &v["resources"];
    let cpu = r["cpu_user_ms"].as_u64().unwrap() + r["cpu_system_ms"].as_u64().unwrap();
    assert!((900..3000).contains(&cpu), "{r}");
    assert!(wall < Duration::from_secs(10), "{wall:?}");
    let out = Test::new()
        .args(["--cpu-max", "1s", "--", "while :; do :; done"])
        .run();
    assert!(
        out.stdout
            .ends_with("[stopped by the CPU time limit (1s)]\n[killed by signal: SIGTERM]\n"),
        "{}",
        out.stdout
    );
}

#[test]
fn cpu_time_counts_every_process_of_the_tree() {
    // Two busy loops in the background: the tree's time, not one process's.
    let (v, _) = run_json(&[
        "--cpu-max",
        "1s",
        "--timeout",
        "20s",
        "--",
        "(while :; do :; done) & (while :; do :; done) & wait",
    ]);
    assert_eq!(v["limit_exceeded"], "cpu", "{v}");
    let r = &v["resources"];
    let cpu = r["cpu_user_ms"].as_u64().unwrap() + r["cpu_system_ms"].as_u64().unwrap();
    assert!((900..4000).contains(&cpu), "{r}");
}

#[test]
fn without_a_cgroup_a_memory_limit_is_an_error_unless_best_effort() {
    let Some(user) = Unprivileged::new() else {
        return;
    };
    let probe = user.run(&["explain", "--json", "--memory-max", "64MiB", "--", "true"]);
    let v: Value = serde_json::from_slice(&probe.stdout).unwrap();
    if v["limit_mechanisms"]["memory"]["mechanism"] != "none" {
        eprintln!("skipped: user 65534 may make a memory cgroup here");
        return;
    }
    let out = user.run(&["--memory-max", "64MiB", "--", "echo ran"]);
    assert_eq!(code(&out), 125);
    assert_eq!(stdout(&out), "");
    let err = stderr(&out);
    assert!(
        err.starts_with("dsh-exec: error: limit unavailable: --memory-max 64MiB: ")
            && err.ends_with("; --limits best-effort runs without it (LIMIT_UNAVAILABLE)\n")
            && err.contains("RLIMIT_AS"),
        "{err}"
    );
    let out = user.run(&["--json", "--pids-max", "8", "--", "echo ran"]);
    assert_eq!(code(&out), 125);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["error"]["code"], "LIMIT_UNAVAILABLE", "{v}");

    let out = user.run(&[
        "--json",
        "--limits",
        "best-effort",
        "--memory-max",
        "64MiB",
        "--",
        "echo ran",
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stderr(&out).starts_with("dsh-exec: warning: --memory-max 64MiB is not enforced: "),
        "{}",
        stderr(&out)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["stdout"]["text"], "ran\n");
    assert_eq!(v["limits"]["mechanism"]["memory"], "none");
    assert_eq!(v["limits"]["not_enforced"][0]["limit"], "memory", "{v}");
    assert_eq!(v["limit_exceeded"], Value::Null);
}

#[test]
fn without_a_cgroup_cpu_time_is_accounted_across_the_tree() {
    let Some(user) = Unprivileged::new() else {
        return;
    };
    let out = user.run(&[
        "--json",
        "--cpu-max",
        "1s",
        "--",
        "(while :; do :; done) & while :; do :; done",
    ]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "no result ({e}), status {:?}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
    });
    if v["limits"]["mechanism"]["cpu"] != "accounting" {
        eprintln!("skipped: user 65534 may make a cgroup here: {v}");
        return;
    }
    assert_eq!(v["limit_exceeded"], "cpu", "{v}");
    assert_eq!(v["signal"], "SIGTERM", "{v}");
    let r = &v["resources"];
    let cpu = r["cpu_user_ms"].as_u64().unwrap() + r["cpu_system_ms"].as_u64().unwrap();
    assert!((900..4000).contains(&cpu), "{r}");
}

#[test]
fn a_write_past_the_file_size_limit_ends_the_writer_and_the_result_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let out = Test::new()
        .arg("-C")
        .arg(dir.path())
        .args([
            "--json",
            "--file-size-max",
            "1MiB",
            "--",
            "head -c 2M /dev/zero > f",
        ])
        .run();
    let v = out.json();
    // 153 = 128 + SIGXFSZ, whose default action ends the writer (the
    // write itself fails with EFBIG where SIGXFSZ is ignored).
    assert_eq!(v["exit_code"], 153, "{v}");
    assert_eq!(v["limit_exceeded"], "file_size");
    assert_eq!(v["limits"]["file_size_max_bytes"], 1 << 20);
    assert_eq!(v["limits"]["mechanism"]["file_size"], "rlimit");
    assert_eq!(
        std::fs::metadata(dir.path().join("f")).unwrap().len(),
        1 << 20
    );
    let out = Test::new()
        .arg("-C")
        .arg(dir.path())
        .args(["--file-size-max", "1MiB", "--", "head -c 2M /dev/zero > g"])
        .run();
    assert!(
        out.stdout
            .ends_with("[file size limit reached (1MiB): a write was refused]\n[exit code: 153]\n"),
        "{}",
        out.stdout
    );
}

#[test]
fn cgroup_counters_give_the_trees_figures() {
    let memory = cgroup_base("--memory-max", "512MiB", "memory").is_some();
    let pids = cgroup_base("--pids-max", "64", "pids").is_some();
    let mut args = vec!["--cpu-max", "30s"];
    if memory {
        args.extend(["--memory-max", "512MiB"]);
    }
    if pids {
        args.extend(["--pids-max", "64"]);
    }
    args.extend([
        "--",
        "python3 -c 'b = bytearray(64 << 20); b[::4096] = b\"x\" * len(b[::4096]); \
         sum(range(3 * 10 ** 6))' & sleep 0.2 & wait",
    ]);
    let (v, status) = run_json(&args);
    assert_eq!(status, 0, "{v}");
    let r = &v["resources"];
    let cpu = r["cpu_user_ms"].as_u64().unwrap() + r["cpu_system_ms"].as_u64().unwrap();
    assert!((20..5000).contains(&cpu), "{r}");
    if memory {
        let peak = r["peak_memory_bytes"].as_u64().unwrap();
        assert!((64 << 20..512 << 20).contains(&peak), "{r}");
    }
    if pids {
        let most = r["max_pids"].as_u64().unwrap();
        assert!((3..=64).contains(&most), "{r}");
    }
    assert_eq!(v["limit_exceeded"], Value::Null);
    // A quiet command uses next to nothing.
    let (v, _) = run_json(&["--cpu-max", "30s", "--", "sleep 0.2"]);
    let r = &v["resources"];
    let cpu = r["cpu_user_ms"].as_u64().unwrap() + r["cpu_system_ms"].as_u64().unwrap();
    assert!(cpu < 150, "{r}");
    assert!(v["duration_ms"].as_u64().unwrap() >= 200, "{v}");
}

#[test]
fn a_run_without_limits_reports_no_limits() {
    let (v, _) = run_json(&["--", "true"]);
    assert_eq!(v["resources"]["source"], unlimited_source());
    assert_eq!(v.get("limits"), None, "{v}");
    assert_eq!(v["limit_exceeded"], Value::Null);
}

#[test]
fn explain_names_each_limits_mechanism() {
    let (text, status) = run(&[
        "explain",
        "--memory-max",
        "64MiB",
        "--pids-max",
        "32",
        "--cpu-max",
        "1m",
        "--",
        "true",
    ]);
    assert_eq!(status, 0);
    for (row, limit) in [
        ("memory-max        64MiB: ", "memory"),
        ("pids-max          32: ", "pids"),
        ("cpu-max           1m: ", "cpu"),
    ] {
        let line = text
            .lines()
            .find(|l| l.starts_with(row))
            .unwrap_or_else(|| panic!("no {limit} row in\n{text}"));
        let (name, _) = mechanism(
            &[
                &format!("--{limit}-max"),
                if limit == "memory" { "64MiB" } else { "32" },
            ],
            limit,
        );
        let shown = if name == "none" {
            "unavailable: "
        } else {
            &name
        };
        assert!(line.contains(shown), "{line}");
    }
    assert!(text.contains("\nlimits            strict "), "{text}");
}

#[test]
fn bad_limit_values_are_usage_errors() {
    for (flag, value, says) in [
        ("--memory-max", "0", "less than 1MiB"),
        ("--memory-max", "lots", "invalid size"),
        ("--pids-max", "0", "from 1 to 4194304"),
        ("--pids-max", "-3", "from 1 to 4194304"),
        ("--cpu-max", "1ms", "less than 10ms"),
        ("--limits", "maybe", "strict or best-effort"),
    ] {
        let out = dsh().args([flag, value, "--", "true"]).output().unwrap();
        assert_eq!(code(&out), 125, "{flag} {value}");
        assert!(
            stderr(&out).contains(says),
            "{flag} {value}: {}",
            stderr(&out)
        );
    }
}

#[test]
fn a_config_cap_becomes_the_limit_of_a_run_that_sets_none() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "[caps]\nmax_cpu = \"1s\"\n").unwrap();
    let out = Test::new()
        .env("DSH_EXEC_CONFIG", &config)
        .args(["--json", "--cpu-max", "1h", "--", "while :; do :; done"])
        .run();
    let v = out.json();
    assert_eq!(v["limit_exceeded"], "cpu", "{v}");
    assert_eq!(v["limits"]["cpu_max_ms"], 1000);
    assert_eq!(
        v["capped"][0],
        format!("cpu-max 1h capped at 1s by {}", config.display())
    );
    let (v, _) = {
        let out = Test::new()
            .env("DSH_EXEC_CONFIG", &config)
            .args(["--json", "--", "true"])
            .run();
        (out.json(), 0)
    };
    assert_eq!(v["limits"]["cpu_max_ms"], 1000, "{v}");
    assert_eq!(v.get("capped"), None, "{v}");
}

#[test]
fn the_command_starts_inside_its_cgroups() {
    let (cpu, _) = mechanism(&["--cpu-max", "1h"], "cpu");
    let memory = cgroup_base("--memory-max", "1GiB", "memory").is_some();
    let mut args = vec!["--cpu-max", "1h"];
    if memory {
        args.extend(["--memory-max", "1GiB"]);
    }
    args.extend(["--", "cat /proc/self/cgroup"]);
    let (pid, v, status) = {
        let mut all = vec!["--json"];
        all.extend(args);
        run_json_pid(&all)
    };
    assert_eq!(status, 0, "{v}");
    let text = v["stdout"]["text"].as_str().unwrap();
    let path = |hierarchy: &str| {
        text.lines()
            .find_map(|l| {
                let mut parts = l.splitn(3, ':');
                let (_, list, path) = (parts.next()?, parts.next()?, parts.next()?);
                (list == hierarchy || list.split(',').any(|c| c == hierarchy)).then_some(path)
            })
            .unwrap_or_else(|| panic!("no {hierarchy} line in\n{text}"))
            .to_string()
    };
    let leaf = format!("/dsh-exec/run-{}-{pid}-", pid_namespace());
    if cpu == "cgroup-v2" {
        assert!(path("").contains(&leaf), "{text}");
    }
    if memory {
        assert!(path("memory").contains(&leaf), "{text}");
    }
}

#[test]
fn where_clone3_is_refused_the_child_joins_its_v2_cgroup_itself() {
    // Container runtimes' seccomp policies answer clone3 with ENOSYS.
    let (cpu, detail) = mechanism(&["--cpu-max", "1h"], "cpu");
    if cpu != "cgroup-v2" {
        eprintln!("skipped: no v2 cgroup here: {detail}");
        return;
    }
    let out = Command::new(example("seccomp_errno"))
        .args(["clone3", "--"])
        .arg(bin())
        .args(["--json", "--cpu-max", "1h", "--", "cat /proc/self/cgroup"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["exit_code"], 0, "{v}");
    assert!(
        v["stdout"]["text"]
            .as_str()
            .unwrap()
            .lines()
            .any(|l| l.starts_with("0::") && l.contains("/dsh-exec/run-")),
        "{v}"
    );
}

#[test]
fn a_nested_run_stays_inside_the_outer_runs_limits_and_leaves_no_cgroup() {
    let (cpu, detail) = mechanism(&["--cpu-max", "1s"], "cpu");
    if !cpu.starts_with("cgroup-") {
        eprintln!("skipped: no cgroup for CPU time here: {detail}");
        return;
    }
    let inner = format!(
        "{} --cpu-max 20s --timeout 15s -- 'while :; do :; done'",
        bin().display()
    );
    let started = Instant::now();
    let (pid, v, _) = run_json_pid(&[
        "--json",
        "--cpu-max",
        "1s",
        "--timeout",
        "30s",
        "--",
        &inner,
    ]);
    assert_eq!(v["limit_exceeded"], "cpu", "{v}");
    assert!(started.elapsed() < Duration::from_secs(12), "{v}");
    let r = &v["resources"];
    let used = r["cpu_user_ms"].as_u64().unwrap() + r["cpu_system_ms"].as_u64().unwrap();
    assert!(
        used >= 900,
        "the outer run did not count the inner one's CPU: {r}"
    );

    // Nested v1 cgroups are removed with the outer ones.
    let bases: Vec<PathBuf> = [
        ("--pids-max", "30", "pids"),
        ("--memory-max", "256MiB", "memory"),
    ]
    .into_iter()
    .filter_map(|(f, val, l)| cgroup_base(f, val, l))
    .collect();
    if bases.is_empty() {
        return;
    }
    let inner = format!(
        "{} --pids-max 5 --memory-max 64MiB -- true",
        bin().display()
    );
    let (pid2, v, status) = run_json_pid(&[
        "--json",
        "--limits",
        "best-effort",
        "--pids-max",
        "30",
        "--memory-max",
        "256MiB",
        "--",
        &inner,
    ]);
    assert_eq!(status, 0, "{v}");
    for base in &bases {
        assert_eq!(leftover_cgroups(base, pid), Vec::<String>::new());
        assert_eq!(
            leftover_cgroups(base, pid2),
            Vec::<String>::new(),
            "{}",
            base.display()
        );
    }
}

#[test]
fn an_operators_cap_is_enforced_even_under_best_effort() {
    let Some(user) = Unprivileged::new() else {
        return;
    };
    let config = user.dir.path().join("config.toml");
    std::fs::write(&config, "[caps]\nmax_memory = \"1GiB\"\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = user.run_with(
        &[("DSH_EXEC_CONFIG", config.as_os_str())],
        &["--limits", "best-effort", "--", "echo ran"],
    );
    if code(&out) == 0 {
        eprintln!("skipped: user 65534 may make a memory cgroup here");
        return;
    }
    assert_eq!(code(&out), 125);
    assert_eq!(stdout(&out), "");
    assert!(
        stderr(&out).starts_with(
            "dsh-exec: error: limit unavailable: --memory-max 1GiB (set by a cap of the configuration file, which --limits best-effort does not lift): "
        ),
        "{}",
        stderr(&out)
    );
}

#[test]
fn none_lifts_a_configured_default_limit_but_not_a_cap() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "[defaults]\ncpu_max = \"1s\"\n").unwrap();
    let out = Test::new()
        .env("DSH_EXEC_CONFIG", &config)
        .args(["explain", "--json", "--cpu-max", "none", "--", "true"])
        .run();
    assert_eq!(
        out.json()["cpu_max_ms"]["value"],
        Value::Null,
        "{}",
        out.stdout
    );
    assert_eq!(out.json()["cpu_max_ms"]["origin"], "flag");
    let out = Test::new()
        .env("DSH_EXEC_CONFIG", &config)
        .args(["explain", "--json", "--", "true"])
        .run();
    assert_eq!(out.json()["cpu_max_ms"]["value"], 1000);
    std::fs::write(&config, "[caps]\nmax_cpu = \"1s\"\n").unwrap();
    let out = Test::new()
        .env("DSH_EXEC_CONFIG", &config)
        .args(["--json", "--cpu-max", "none", "--", "true"])
        .run();
    let v = out.json();
    assert_eq!(v["limits"]["cpu_max_ms"], 1000, "{v}");
    assert_eq!(
        v["capped"][0],
        format!("cpu-max unlimited capped at 1s by {}", config.display())
    );
}

#[test]
fn socket_buffers_count_against_the_memory_limit() {
    // Loopback TCP pairs whose send queues are filled and never read: v1
    // charges them only under memory.kmem.tcp.limit_in_bytes, which the
    // memory limit also sets; v2 counts them in memory.max.
    if cgroup_base("--memory-max", "64MiB", "memory").is_none() {
        return;
    }
    let script = r#"
import socket
socks, total = [], 0
for i in range(60):
    l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(1)
    c = socket.socket(); c.setblocking(False)
    try: c.connect(l.getsockname())
    except BlockingIOError: pass
    s, _ = l.accept(); socks += [l, c, s]
    try:
        while True: total += c.send(b"x" * 65536)
    except OSError: pass
print(total >> 20)
"#;
    let (v, _) = run_json(&[
        "--memory-max",
        "64MiB",
        "--",
        &format!("python3 -c '{script}'"),
    ]);
    let queued: u64 = v["stdout"]["text"]
        .as_str()
        .unwrap()
        .trim()
        .parse()
        .unwrap_or(0);
    // Unlimited, 60 pairs queue some 200 MB here.
    assert!(queued <= 72, "{queued} MiB queued under a 64MiB limit: {v}");
}
