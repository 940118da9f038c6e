//! `--output-files`: the command writes its output into unnamed files
//! itself, not pipes; the result is the same, the drain still waits for a
//! leftover that holds them, and past the spill cap the disk keeps the cap,
//! not the stream. Without it the output goes through pipes, which a
//! command may reopen by path (`echo x > /dev/stderr`) without harm.
use crate::support::*;
use std::time::{Duration, Instant};

/// `file` or `pipe` for the command's stdout and stderr, as it sees them.
const KINDS: &str = "for f in /dev/stdout /dev/stderr; do \
    if [ -f $f ]; then printf 'file '; elif [ -p $f ]; then printf 'pipe '; fi; done";

#[test]
fn output_files_are_files_only_when_asked_and_nothing_reads_them_live() {
    let (text, status) = run(&["--", KINDS]);
    assert_eq!((text.as_str(), status), ("pipe pipe \n[exit code: 0]\n", 0));
    let (text, status) = run(&["--output-files", "--", KINDS]);
    assert_eq!((text.as_str(), status), ("file file \n[exit code: 0]\n", 0));
    // --file-size-max (RLIMIT_FSIZE) would count a file; --memory-max
    // would charge its page cache: pipes, as explain says.
    for flags in [
        &["--file-size-max", "1GiB"][..],
        &["--memory-max", "1GiB", "--limits", "best-effort"],
    ] {
        let mut args = vec!["--output-files"];
        args.extend(flags);
        args.extend(["--", KINDS]);
        let (v, status) = run_json(&args);
        assert_eq!(status, 0, "{flags:?}: {v}");
        assert_eq!(v["stdout"]["text"], "pipe pipe ", "{flags:?}");
        let v = Test::new()
            .args(["explain", "--json", "--output-files"])
            .args(flags)
            .args(["--", "true"])
            .run()
            .json();
        assert_eq!(v["output"], "pipes", "{flags:?}");
    }
    let v = Test::new()
        .args(["explain", "--json", "--output-files", "--", "true"])
        .run()
        .json();
    assert_eq!(v["output"], "files");
    // Where the output is read live, the flag is a usage error.
    for flag in ["--stream", "--background", "-i"] {
        let out = Test::new()
            .args(["--output-files", flag, "--", "true"])
            .run();
        out.expect_status(125);
    }
}

/// A command that reopens its stdout or stderr by path: through pipes (the
/// default) every line is kept, confined or not; under --output-files it
/// is `> FILE`'s behaviour, which the flag's help states.
#[test]
fn reopening_dev_stdout_or_stderr_by_path_keeps_every_line_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let script = "echo one; echo two > /dev/stdout; echo three >&2; echo four > /dev/stderr; \
                  echo five >> /dev/stdout";
    for confined in [false, true] {
        let mut args = vec![];
        if confined {
            args.extend(["-s", "workspace-write", "-C", dir.path().to_str().unwrap()]);
        }
        args.extend(["--", script]);
        let (v, status) = run_json(&args);
        assert_eq!(status, 0, "confined {confined}: {v}");
        assert_eq!(
            v["stdout"]["text"], "one\ntwo\nfive\n",
            "confined {confined}"
        );
        assert_eq!(v["stderr"]["text"], "three\nfour\n", "confined {confined}");
    }
    // --output-files: `> /dev/stdout` truncates, as under `> FILE`,
    // confined or not; `>>` appends.
    for confined in [false, true] {
        let mut args = vec!["--output-files"];
        if confined {
            args.extend(["-s", "workspace-write", "-C", dir.path().to_str().unwrap()]);
        }
        args.extend([
            "--",
            "echo one; echo two > /dev/stdout; echo three >> /dev/stdout",
        ]);
        let (v, status) = run_json(&args);
        assert_eq!(status, 0, "confined {confined}: {v}");
        assert_eq!(v["stdout"]["text"], "two\nthree\n", "confined {confined}");
    }
    // Without room for the spill cap, pipes, as explain says.
    let v = Test::new()
        .args([
            "explain",
            "--json",
            "--output-files",
            "--spill-max-bytes",
            "1000000GiB",
        ])
        .args(["--", "true"])
        .run()
        .json();
    assert_eq!(v["output"], "pipes");
}

#[test]
fn output_that_fits_leaves_nothing_behind_and_outgrown_output_is_named_0600() {
    let dir = tempfile::tempdir().unwrap();
    let spill = dir.path().to_str().unwrap();
    let (v, status) = run_json(&[
        "--output-files",
        "--spill-dir",
        spill,
        "--",
        "seq 3; seq 2 >&2",
    ]);
    assert_eq!(status, 0);
    assert_eq!(v["stdout"]["text"], "1\n2\n3\n");
    assert_eq!(v["stderr"]["text"], "1\n2\n");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    let (v, status) = run_json(&[
        "--output-files",
        "--spill-dir",
        spill,
        "--stdout-max-bytes",
        "5",
        "--",
        "seq 1000",
    ]);
    assert_eq!(status, 0);
    let path = std::path::PathBuf::from(v["stdout"]["spill_path"].as_str().unwrap());
    let expected: String = (1..=1000).map(|n| format!("{n}\n")).collect();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), expected);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert_eq!(v["stdout"]["text"], "1000\n");
    assert_eq!(v["stdout"]["total_bytes"], expected.len());
}

#[test]
fn a_leftover_holding_the_output_is_drained_and_one_that_does_not_is_not_waited_for() {
    // A process substitution writes after the shell has exited.
    let (text, _) = run(&["--output-files", "--", "echo hi > >(sleep 0.1; tr a-z A-Z)"]);
    assert_eq!(text, "HI\n[exit code: 0]\n");
    // A leftover that holds stdout past the drain (250 ms) is ended; what
    // it wrote before is kept.
    let t = Instant::now();
    let (text, _) = run(&[
        "--output-files",
        "--",
        "(echo early; sleep 30; echo never) & echo main",
    ]);
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    assert!(
        text.contains("early\n") && text.contains("main\n") && !text.contains("never"),
        "{text}"
    );
    // One that holds no descriptor of the output is not drained.
    let t = Instant::now();
    let (text, _) = run(&[
        "--output-files",
        "--",
        "sleep 30 >/dev/null 2>&1 & echo main",
    ]);
    assert_eq!(text, "main\n[exit code: 0]\n");
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
}

#[test]
fn past_the_spill_cap_the_disk_keeps_the_cap_and_the_result_the_tail() {
    let dir = tempfile::tempdir().unwrap();
    // 300 MiB through a 1 MiB cap. After the write the command waits for
    // the cap's check (every 250 ms) and reports the blocks its stdout
    // holds on disk: the cap, the budget and the 64 MiB slack at most, not
    // the 300 MiB written.
    let (v, status) = run_json(&[
        "--output-files",
        "--spill-dir",
        dir.path().to_str().unwrap(),
        "--stdout-max-bytes",
        "1KiB",
        "--spill-max-bytes",
        "1MiB",
        "--",
        "[ -f /dev/stdout ] || exit 9; head -c 300M /dev/zero; sleep 0.8; \
         stat -L -c %b /dev/stdout >&2; echo; echo end",
    ]);
    assert_eq!(status, 0, "{v}");
    let blocks: u64 = v["stderr"]["text"]
        .as_str()
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(blocks * 512 < 80 << 20, "{} bytes on disk", blocks * 512);
    let out = &v["stdout"];
    let total = (300u64 << 20) + 5;
    assert_eq!(out["total_bytes"], total);
    assert_eq!(out["spill_truncated"], true);
    assert_eq!(out["spill_dropped_bytes"], total - (1 << 20));
    assert!(out["text"].as_str().unwrap().ends_with("\nend\n"), "{out}");
    let spill = std::path::PathBuf::from(out["spill_path"].as_str().unwrap());
    assert_eq!(std::fs::metadata(&spill).unwrap().len(), 1 << 20);
}

/// What a red team found in output files, each held now: a small spill cap
/// never frees the head `--keep head` reads; blocks the command reserves
/// past the end of its stdout (fallocate(2) `FALLOC_FL_KEEP_SIZE`) are
/// freed before the file is named; a writer thread whose thread group's
/// leader has exited is still waited for.
#[test]
fn the_head_the_reserved_blocks_and_a_leaderless_writer_are_handled() {
    let dir = tempfile::tempdir().unwrap();
    let spill = dir.path().to_str().unwrap();
    // 170 MB through a 4 KiB cap: the cap's check frees blocks while it
    // runs, never those of the 64 KiB head.
    let (v, status) = run_json(&[
        "--output-files",
        "--spill-dir",
        spill,
        "--keep",
        "head",
        "--stdout-max-bytes",
        "64KiB",
        "--spill-max-bytes",
        "4KiB",
        "--",
        "seq 1 20000000; sleep 0.6",
    ]);
    assert_eq!(status, 0);
    let head = v["stdout"]["text"].as_str().unwrap();
    assert!(
        head.starts_with("1\n2\n3\n") && !head.contains('\0'),
        "{}",
        &head[..64]
    );
    // 256 MiB reserved past the end of a 100 kB stdout.
    let (v, status) = run_json(&[
        "--output-files",
        "--spill-dir",
        spill,
        "--stdout-max-bytes",
        "4KiB",
        "--",
        "head -c 100000 /dev/zero | tr '\\0' a; python3 -c 'import ctypes; \
         assert ctypes.CDLL(None).fallocate(1, 1, ctypes.c_long(0), ctypes.c_long(256 << 20)) == 0'",
    ]);
    assert_eq!(status, 0, "{v}");
    let path = std::path::PathBuf::from(v["stdout"]["spill_path"].as_str().unwrap());
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(&path).unwrap();
    assert_eq!(m.len(), 100_000);
    assert!(
        m.blocks() * 512 < 1 << 20,
        "{} bytes on disk",
        m.blocks() * 512
    );
    // The leader of a thread group exits (exit(2) of one thread) once its
    // other thread runs; that one writes 50 ms later, after the shell has
    // exited (it waits for the leader's flag), inside the drain.
    let flag = dir.path().join("started");
    let script = format!(
        "python3 -c 'import ctypes, os, threading, time\n\
         def w():\n    time.sleep(0.05); os.write(1, b\"hidden\\n\")\n\
         threading.Thread(target=w).start(); open(\"{f}\", \"w\").close()\n\
         ctypes.CDLL(None).syscall(60, 0)' & \
         while [ ! -e {f} ]; do sleep 0.01; done; echo start",
        f = flag.display()
    );
    let (text, status) = run(&["--output-files", "--", &script]);
    assert_eq!(status, 0);
    assert!(
        text.contains("start\n") && text.contains("hidden\n") && text.ends_with("[exit code: 0]\n"),
        "{text}"
    );
}

/// A confined command that holds CAP_CHOWN (root's run keeps it) gives its
/// stdout file away through its descriptor; the named spill file is this
/// user's all the same, mode 0600.
#[test]
fn a_spill_file_given_away_by_the_command_is_taken_back() {
    if !nix_is_root() {
        eprintln!("skipped: needs root (a command that can chown to another user)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (v, status) = run_json(&[
        "--output-files",
        "--stdout-max-bytes",
        "10",
        "-s",
        "workspace-write",
        "-C",
        dir.path().to_str().unwrap(),
        "--",
        "seq 100; chmod 0666 /proc/self/fd/1; chown 65534:65534 /proc/self/fd/1",
    ]);
    assert_eq!(status, 0, "{v}");
    let path = std::path::PathBuf::from(v["stdout"]["spill_path"].as_str().unwrap());
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(&path).unwrap();
    assert_eq!((m.uid(), m.gid(), m.mode() & 0o7777), (0, 0, 0o600));
}
