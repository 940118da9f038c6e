//! `parse-status` inverts the final marker of every rendered result.
use crate::support::*;

/// `dsh-exec parse-status` fed `text` on stdin: (stdout, exit status).
fn parse_status(text: &str) -> (String, i32) {
    let out = Test::new().arg("parse-status").stdin(text).run();
    (out.stdout, out.status)
}

#[test]
fn real_results_round_trip() {
    let cases = [
        (vec!["--", "echo hi"], "{\"exit_code\":0,\"signal\":null}\n"),
        (
            vec!["--", "exit 42"],
            "{\"exit_code\":42,\"signal\":null}\n",
        ),
        (
            vec!["--", "kill -TERM $$"],
            "{\"exit_code\":null,\"signal\":\"SIGTERM\"}\n",
        ),
        (
            vec!["--", "kill -USR1 $$"],
            "{\"exit_code\":null,\"signal\":\"SIGUSR1\"}\n",
        ),
        (
            vec!["--timeout", "200ms", "--", "sleep 5"],
            "{\"exit_code\":null,\"signal\":\"SIGTERM\"}\n",
        ),
        (
            vec!["--color", "always", "--", "exit 7"],
            "{\"exit_code\":7,\"signal\":null}\n",
        ),
    ];
    for (args, expected) in cases {
        let (rendered, _) = run(&args);
        assert_eq!(
            parse_status(&rendered),
            (expected.to_string(), 0),
            "{args:?}: {rendered}"
        );
    }
}

#[test]
fn text_without_a_marker_exits_1() {
    assert_eq!(parse_status("hello\n").1, 1);
    assert_eq!(parse_status("").1, 1);
    assert_eq!(parse_status("[exit code: 0]\ntrailing output\n").1, 1);
}

#[test]
fn a_file_argument_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("result.txt");
    std::fs::write(&f, "out\n[killed by signal: SIGKILL]\n").unwrap();
    Test::new()
        .args(["parse-status", f.to_str().unwrap()])
        .run()
        .expect_stdout("{\"exit_code\":null,\"signal\":\"SIGKILL\"}\n")
        .expect_status(0);
}
