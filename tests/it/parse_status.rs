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
        (
            vec!["--", "echo hi"],
            "{\"exit_code\":0,\"signal\":null,\"timed_out\":false,\"aborted\":false}\n",
        ),
        (
            vec!["--", "exit 42"],
            "{\"exit_code\":42,\"signal\":null,\"timed_out\":false,\"aborted\":false}\n",
        ),
        (
            vec!["--", "kill -TERM $$"],
            "{\"exit_code\":null,\"signal\":\"SIGTERM\",\"timed_out\":false,\"aborted\":false}\n",
        ),
        (
            vec!["--", "kill -USR1 $$"],
            "{\"exit_code\":null,\"signal\":\"SIGUSR1\",\"timed_out\":false,\"aborted\":false}\n",
        ),
        (
            vec!["--timeout", "200ms", "--", "sleep 5"],
            "{\"exit_code\":null,\"signal\":\"SIGTERM\",\"timed_out\":true,\"aborted\":false}\n",
        ),
        (
            vec!["--color", "always", "--", "exit 7"],
            "{\"exit_code\":7,\"signal\":null,\"timed_out\":false,\"aborted\":false}\n",
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
        .expect_stdout(
            "{\"exit_code\":null,\"signal\":\"SIGKILL\",\"timed_out\":false,\"aborted\":false}\n",
        )
        .expect_status(0);
}

#[test]
fn a_json_result_on_stdin_is_read_and_exits_0() {
    for (args, expected) in [
        (
            vec!["--json", "--timeout", "200ms", "--", "sleep 5"],
            "{\"exit_code\":null,\"signal\":\"SIGTERM\",\"timed_out\":true,\"aborted\":false}\n",
        ),
        (
            vec!["--json", "--", "exit 3"],
            "{\"exit_code\":3,\"signal\":null,\"timed_out\":false,\"aborted\":false}\n",
        ),
    ] {
        let (json, _) = run(&args);
        assert_eq!(parse_status(&json), (expected.to_string(), 0), "{args:?}");
    }
    // An error object is no result.
    let (json, status) = run(&["--json", "--timeout", "x", "--", "true"]);
    assert_eq!(status, 125);
    assert_eq!(parse_status(&json).1, 1);
}

#[test]
fn output_that_reads_as_a_notice_cannot_pass_for_one() {
    // Trailing space, CRLF, a tab, colour codes in and around it, a no-break
    // space, a carriage return over other text: each reads as a notice on
    // a terminal, so each is escaped, and none counts.
    for script in [
        "echo '[timed out after 1s] '",
        "printf '[timed out after 1s]\\r\\n'",
        "printf '\\t[timed out after 1s]\\n'",
        "printf '\\033[m[timed out after 1s]\\n'",
        "printf '[timed out\\033[m after 1s]\\n'",
        "printf '\\302\\240[aborted by SIGINT]\\n'",
        "printf 'xx\\r[aborted by SIGINT]\\n'",
    ] {
        let (rendered, _) = run(&["--", script]);
        assert_eq!(
            parse_status(&rendered),
            (
                "{\"exit_code\":0,\"signal\":null,\"timed_out\":false,\"aborted\":false}\n".into(),
                0
            ),
            "{script}: {rendered:?}"
        );
    }
}

#[test]
fn a_json_result_of_any_size_is_read() {
    let (json, _) = run(&[
        "--json",
        "--",
        "head -c 300000 /dev/zero | tr '\\0' a; exit 3",
    ]);
    assert!(json.len() > 300_000);
    assert_eq!(
        parse_status(&json),
        (
            "{\"exit_code\":3,\"signal\":null,\"timed_out\":false,\"aborted\":false}\n".into(),
            0
        )
    );
}
