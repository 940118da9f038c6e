//! Stdin is a pipe: closed at once, or fed from --stdin-file and then closed.
use crate::support::*;
use std::process::Stdio;
use std::time::{Duration, Instant};

#[test]
fn without_stdin_file_cat_sees_end_of_file_at_once() {
    let t0 = Instant::now();
    assert_eq!(run(&["--", "cat"]), ("[exit code: 0]\n".into(), 0));
    assert!(t0.elapsed() < Duration::from_secs(5));
}

#[test]
fn cat_returns_at_once_even_when_this_process_stdin_never_closes() {
    // dsh-exec's own stdin is a pipe whose write end stays open (as under
    // `sleep 100 | dsh-exec -- cat`): the command must not inherit it.
    let t0 = Instant::now();
    let mut child = dsh()
        .args(["--", "cat"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let held_open = child.stdin.take();
    let out = child.wait_with_output().unwrap();
    drop(held_open);
    assert_eq!(stdout(&out), "[exit code: 0]\n");
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
}

#[test]
fn stdin_file_bytes_reach_the_command_then_end_of_file() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("in.txt");
    std::fs::write(&f, "line one\nline two\n").unwrap();
    assert_eq!(
        run(&["--stdin-file", f.to_str().unwrap(), "--", "wc -l; cat"]),
        ("2\n[exit code: 0]\n".into(), 0)
    );
}

#[test]
fn a_command_that_does_not_read_a_large_stdin_file_is_not_a_failure() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("big");
    std::fs::write(&f, vec![b'x'; 8 << 20]).unwrap();
    assert_eq!(
        run(&["--stdin-file", f.to_str().unwrap(), "--", "echo ignored"]),
        ("ignored\n[exit code: 0]\n".into(), 0)
    );
}

#[test]
fn dash_reads_this_process_stdin() {
    Test::new()
        .args(["--stdin-file", "-", "--", "tr a-z A-Z"])
        .stdin("hello\n")
        .run()
        .expect_stdout("HELLO\n[exit code: 0]\n");
}

#[test]
fn stdin_with_data_but_no_stdin_file_gets_a_note_unless_quiet() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input");
    std::fs::write(&input, "hi\n").unwrap();
    let run_with = |args: &[&str]| {
        let out = dsh()
            .args(args)
            .stdin(std::fs::File::open(&input).unwrap())
            .output()
            .unwrap();
        (stdout(&out), stderr(&out))
    };
    assert_eq!(
        run_with(&["--", "cat"]),
        (
            "[exit code: 0]\n".to_string(),
            "dsh-exec: note: stdin is not passed to the command; use --stdin-file - (or --quiet)\n"
                .to_string()
        )
    );
    assert_eq!(
        run_with(&["-q", "--", "cat"]),
        ("[exit code: 0]\n".to_string(), String::new())
    );
    assert_eq!(
        run_with(&["--stdin-file", "-", "--", "cat"]),
        ("hi\n[exit code: 0]\n".to_string(), String::new())
    );
    // No data, no note.
    let out = dsh().args(["--", "true"]).output().unwrap();
    assert_eq!(stderr(&out), "");
}
