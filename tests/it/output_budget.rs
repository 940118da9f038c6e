//! Each stream keeps its tail within its budget; the full stream is spilled.
use crate::support::*;
use std::os::unix::fs::PermissionsExt;

#[test]
fn five_megabytes_with_a_64k_budget_keeps_the_tail_and_spills_every_byte() {
    let dir = tempfile::tempdir().unwrap();
    let spill_parent = dir.path().join("spill");
    std::fs::create_dir(&spill_parent).unwrap();
    // 5 MB of distinct lines, so a wrong offset would show.
    let script = "seq 1 1000000 | head -c 5000000";
    let expected = std::process::Command::new("bash")
        .args(["-c", script])
        .output()
        .unwrap()
        .stdout;
    assert_eq!(expected.len(), 5_000_000);
    let (v, status) = run_json(&[
        "--stdout-max-bytes",
        "64KiB",
        "--spill-dir",
        spill_parent.to_str().unwrap(),
        "--",
        script,
    ]);
    assert_eq!(status, 0);
    let out = &v["stdout"];
    assert_eq!(out["truncated"], true);
    assert_eq!(out["total_bytes"], 5_000_000);
    // The last 64 KiB, from the first line that starts in them (the cut
    // fell mid-line; a line boundary lies within the first 1 KiB).
    let window = &expected[expected.len() - 65536..];
    let first_line = window.iter().position(|b| *b == b'\n').unwrap() + 1;
    assert!(first_line <= 1024 && expected[expected.len() - 65537] != b'\n');
    let tail = &window[first_line..];
    assert_eq!(out["text"].as_str().unwrap().as_bytes(), tail);
    assert_eq!(out["omitted_bytes"], 5_000_000 - tail.len() as u64);
    let spill = std::path::PathBuf::from(out["spill_path"].as_str().unwrap());
    assert_eq!(spill.file_name().unwrap(), "stdout");
    assert!(spill.starts_with(&spill_parent));
    let spilled = std::fs::read(&spill).unwrap();
    assert!(spilled == expected, "spill file differs from the stream");
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&spill), 0o600);
    assert_eq!(mode(spill.parent().unwrap()), 0o700);
    assert_eq!(v["stderr"]["spill_path"], serde_json::Value::Null);
}

#[test]
fn the_rendered_text_opens_with_the_truncation_line() {
    let dir = tempfile::tempdir().unwrap();
    let (text, status) = run(&[
        "--stdout-max-bytes",
        "4",
        "--spill-dir",
        dir.path().to_str().unwrap(),
        "--",
        "printf 0123456789",
    ]);
    assert_eq!(status, 0);
    let spill_dir = std::fs::read_dir(dir.path())
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    assert_eq!(
        text,
        format!(
            "[stdout truncated: 6 earlier bytes omitted; full stream: {}/stdout]\n6789\n[exit code: 0]\n",
            spill_dir.display()
        )
    );
}

#[test]
fn exactly_the_budget_of_a_long_stream_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let (v, _) = run_json(&[
        "--stdout-max-bytes",
        "1024",
        "--spill-dir",
        dir.path().to_str().unwrap(),
        "--",
        "head -c 300000 /dev/zero | tr '\\0' X",
    ]);
    assert_eq!(v["stdout"]["text"], "X".repeat(1024));
    assert_eq!(v["stdout"]["total_bytes"], 300000);
}

#[test]
fn a_stream_within_budget_leaves_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let (v, status) = run_json(&[
        "--spill-dir",
        dir.path().to_str().unwrap(),
        "--",
        "echo small; echo err >&2",
    ]);
    assert_eq!(status, 0);
    assert_eq!(v["stdout"]["spill_path"], serde_json::Value::Null);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn a_tail_cut_never_splits_a_utf8_character() {
    let dir = tempfile::tempdir().unwrap();
    // Test::run asserts that stdout is valid UTF-8.
    let out = Test::new()
        .args([
            "--stdout-max-bytes",
            "1001",
            "--spill-dir",
            dir.path().to_str().unwrap(),
        ])
        .args(["--", "printf 'é%.0s' {1..40000}"])
        .run();
    let text = &out.stdout;
    out.expect_status(0);
    let body = text.lines().nth(1).unwrap();
    assert_eq!(body, "é".repeat(500));
    assert!(
        text.starts_with("[stdout truncated: 79000 earlier bytes omitted; full stream: "),
        "{}",
        &text[..100]
    );
}

#[test]
fn stderr_has_its_own_budget() {
    let dir = tempfile::tempdir().unwrap();
    let (v, _) = run_json(&[
        "--stderr-max-bytes",
        "3",
        "--spill-dir",
        dir.path().to_str().unwrap(),
        "--",
        "echo out; printf abcdef >&2",
    ]);
    assert_eq!(v["stdout"]["text"], "out\n");
    assert_eq!(v["stderr"]["text"], "def");
    assert_eq!(v["stderr"]["truncated"], true);
    let spill = v["stderr"]["spill_path"].as_str().unwrap();
    assert_eq!(std::fs::read(spill).unwrap(), b"abcdef");
}

/// A spill directory other than dsh-exec's own (a --spill-dir, the temp
/// dir) may be written by others: the tail the result reports is the one
/// kept in memory, not read back from a file someone rewrote.
#[test]
fn a_spill_file_rewritten_in_a_shared_directory_does_not_change_the_reported_tail() {
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "head -c 3000 /dev/zero | tr '\\0' a; echo; echo GENUINE-END; sleep 0.3; \
         for f in {d}/*/stdout; do printf 'FORGED!!!!!!\\n' | dd of=\"$f\" bs=1 \
         seek=$(( $(stat -c %s \"$f\") - 12 )) conv=notrunc 2>/dev/null; done",
        d = dir.path().display()
    );
    let v = Test::new()
        .args(["--json", "--stdout-max-bytes", "1K", "--spill-dir"])
        .arg(dir.path())
        .args(["--", &script])
        .run()
        .json();
    let text = v["stdout"]["text"].as_str().unwrap();
    assert!(text.ends_with("aaaa\nGENUINE-END\n"), "{v}");
}

/// `dsh-exec prune --spill` removes spill directories nothing changed for
/// the given age, of the exact shape dsh-exec makes, and nothing else.
#[test]
fn prune_spill_removes_old_spill_directories_of_the_exact_shape_only() {
    let dir = tempfile::tempdir().unwrap();
    let spill = |script: &str| {
        let v = Test::new()
            .args(["--json", "--stdout-max-bytes", "1", "--spill-dir"])
            .arg(dir.path())
            .args(["--", script])
            .run()
            .json();
        std::path::PathBuf::from(v["stdout"]["spill_path"].as_str().unwrap())
    };
    let old = spill("echo old");
    let recent = spill("echo recent");
    let extra = spill("echo extra");
    std::fs::write(extra.parent().unwrap().join("notes"), "mine").unwrap();
    let lookalike = dir.path().join("dsh-exec-notmine0");
    std::fs::create_dir(&lookalike).unwrap();
    std::fs::write(lookalike.join("stdout"), "x").unwrap();
    std::os::unix::fs::symlink(old.parent().unwrap(), dir.path().join("dsh-exec-symlink8"))
        .unwrap();
    // Ten days old: the files, then their directories.
    for p in [&old, &extra] {
        let touch = |path: &std::path::Path| {
            let s = std::process::Command::new("touch")
                .args(["-h", "-d", "10 days ago"])
                .arg(path)
                .status()
                .unwrap();
            assert!(s.success());
        };
        touch(p);
        touch(p.parent().unwrap());
    }
    Test::new()
        .args(["prune", "--spill", "--spill-dir"])
        .arg(dir.path())
        .run()
        .expect_status(0)
        .expect_stdout("pruned 1 spill directory (4 bytes)\n");
    assert!(!old.parent().unwrap().exists(), "the old one stayed");
    assert!(recent.exists() && extra.exists() && lookalike.exists());
    Test::new()
        .args(["prune"])
        .run()
        .expect_status(125)
        .expect_stderr(
            "dsh-exec: error: prune needs --spill (spill directories are what it removes) (USAGE)\n",
        );
}

/// The configuration file's `prune_spill_after` prunes at each start.
#[test]
fn prune_spill_after_in_the_config_prunes_old_spill_directories_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let spills = dir.path().join("spills");
    std::fs::create_dir(&spills).unwrap();
    let cfg = dir.path().join("config.toml");
    let write_cfg = |prune: &str| {
        std::fs::write(
            &cfg,
            format!(
                "[defaults]\nspill_dir = {:?}\n{prune}",
                spills.to_str().unwrap()
            ),
        )
        .unwrap()
    };
    write_cfg("");
    let spill = || {
        let v = Test::new()
            .env("DSH_EXEC_CONFIG", &cfg)
            .args(["--json", "--stdout-max-bytes", "1", "--", "echo x"])
            .run()
            .json();
        std::path::PathBuf::from(v["stdout"]["spill_path"].as_str().unwrap())
    };
    let old = spill();
    age_ten_days(&old);
    // Without the key nothing is pruned; with it, the next run prunes.
    spill();
    assert!(old.exists());
    write_cfg("prune_spill_after = \"7d\"\n");
    let recent = spill();
    assert!(!old.parent().unwrap().exists(), "the old one stayed");
    assert!(recent.exists());
}

/// `--spill-max-bytes`: the spill file stops at the cap, the tail goes on,
/// and the result says how much was dropped; the config caps the flag.
#[test]
fn a_spill_file_stops_at_its_cap_and_the_result_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let (v, status) = run_json(&[
        "--stdout-max-bytes",
        "64K",
        "--spill-max-bytes",
        "1MiB",
        "--spill-dir",
        dir.path().to_str().unwrap(),
        "--",
        "head -c 5000000 /dev/zero | tr '\\0' a; echo; echo last",
    ]);
    assert_eq!(status, 0);
    let out = &v["stdout"];
    assert_eq!(out["total_bytes"], 5_000_006);
    assert_eq!(out["spill_truncated"], true);
    assert_eq!(out["spill_dropped_bytes"], 5_000_006 - (1 << 20));
    assert!(out["text"].as_str().unwrap().ends_with("a\nlast\n"));
    let spill = std::path::PathBuf::from(out["spill_path"].as_str().unwrap());
    assert_eq!(std::fs::metadata(&spill).unwrap().len(), 1 << 20);
    // The text result names the cap.
    let out = Test::new()
        .args([
            "--stdout-max-bytes",
            "10",
            "--spill-max-bytes",
            "100",
            "--spill-dir",
        ])
        .arg(dir.path())
        .args(["--", "seq 1 100"])
        .run();
    let first = out.stdout.lines().next().unwrap();
    assert!(
        first.starts_with("[stdout truncated: 282 earlier bytes omitted; spill file ")
            && first.ends_with(
                " holds the first 100 bytes only (--spill-max-bytes); 192 later bytes dropped]"
            ),
        "{first}"
    );
    // A config cap lowers the flag, and says so.
    let cfg = dir.path().join("config.toml");
    std::fs::write(&cfg, "[caps]\nmax_spill_bytes = \"1KiB\"\n").unwrap();
    let out = Test::new()
        .env("DSH_EXEC_CONFIG", &cfg)
        .args(["--spill-max-bytes", "1MiB", "--", "true"])
        .run();
    assert!(
        out.stdout
            .starts_with("[spill-max-bytes 1MiB capped at 1KiB by "),
        "{}",
        out.stdout
    );
}

/// `--file-size-max`: RLIMIT_FSIZE for the command, which it cannot raise;
/// the output pipes are no files, and the spill files are dsh-exec's.
#[test]
fn file_size_max_bounds_the_files_the_command_writes_not_its_output() {
    let dir = tempfile::tempdir().unwrap();
    let out = Test::new()
        .arg("-C")
        .arg(dir.path())
        .args(["--file-size-max", "1M", "--stdout-max-bytes", "4K", "--"])
        .arg(
            "head -c 5M /dev/zero > f 2>/dev/null; echo rc=$?; stat -c %s f; \
             ulimit -f unlimited 2>/dev/null || echo raise refused; \
             head -c 2M /dev/zero | wc -c",
        )
        .run();
    // 153 = 128 + SIGXFSZ; bash says so on its stderr.
    assert!(
        out.stdout
            .starts_with("rc=153\n1048576\nraise refused\n2097152\n[stderr]\nbash: line 1: "),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains(" File size limit exceeded"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.ends_with("[exit code: 0]\n"), "{}", out.stdout);
    let (text, _) = run(&["explain", "--file-size-max", "1M", "--", "true"]);
    assert!(
        text.contains("file-size-max     1MiB (RLIMIT_FSIZE)"),
        "{text}"
    );
}

/// `prune --spill` without `--spill-dir` looks where runs spill: the
/// configuration file's `spill_dir` too, not only the built-in places.
#[test]
fn prune_spill_looks_in_the_configured_spill_dir() {
    let dir = tempfile::tempdir().unwrap();
    let spills = dir.path().join("spills");
    std::fs::create_dir(&spills).unwrap();
    let cfg = dir.path().join("config.toml");
    std::fs::write(
        &cfg,
        format!("[defaults]\nspill_dir = {:?}\n", spills.to_str().unwrap()),
    )
    .unwrap();
    let v = Test::new()
        .env("DSH_EXEC_CONFIG", &cfg)
        .args(["--json", "--stdout-max-bytes", "1", "--", "echo x"])
        .run()
        .json();
    let old = std::path::PathBuf::from(v["stdout"]["spill_path"].as_str().unwrap());
    assert!(old.starts_with(&spills), "{v}");
    age_ten_days(&old);
    Test::new()
        .env("DSH_EXEC_CONFIG", &cfg)
        .args(["prune", "--spill"])
        .run()
        .expect_status(0);
    assert!(
        !old.parent().unwrap().exists(),
        "the configured spill dir was not pruned"
    );
}

/// Makes the spill file `file` and its directory ten days old.
fn age_ten_days(file: &std::path::Path) {
    for p in [file, file.parent().unwrap()] {
        let s = std::process::Command::new("touch")
            .args(["-h", "-d", "10 days ago"])
            .arg(p)
            .status()
            .unwrap();
        assert!(s.success());
    }
}
