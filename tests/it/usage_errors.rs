//! Bad input: one line on stderr, a documented status, and nothing runs.
use crate::support::*;

/// Runs with a command that would leave a file behind, and asserts it did not run.
fn assert_refused(args: &[&str], status: i32, needle: &str) {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let script = format!("touch {}", marker.display());
    let out = Test::new().args(args).args(["--", &script]).run();
    let err = &out.stderr;
    assert_eq!(out.status, status, "{args:?}: {err}");
    assert!(!marker.exists(), "{args:?}: the command ran");
    assert_eq!(err.lines().count(), 1, "{args:?}: not one line: {err}");
    assert!(err.starts_with("dsh-exec: error: "), "{err}");
    assert!(err.contains(needle), "{args:?}: {err:?} lacks {needle:?}");
}

#[test]
fn a_missing_workdir_is_an_infrastructure_error() {
    assert_refused(&["--workdir", "/nonexistent"], 125, "WORKDIR_UNUSABLE");
}

#[test]
fn a_file_as_workdir_is_an_infrastructure_error() {
    assert_refused(&["--workdir", "/etc/hostname"], 125, "not a directory");
}

#[test]
fn bad_durations_and_sizes_are_usage_errors() {
    assert_refused(&["--timeout", "abc"], 125, "--timeout");
    assert_refused(&["--timeout", "-1"], 125, "--timeout");
    assert_refused(
        &["--idle-timeout", "-1"],
        125,
        "invalid duration '-1': a duration cannot be negative (0 or none: no limit)",
    );
    assert_refused(&["--timeout", ""], 125, "--timeout");
    assert_refused(&["--kill-after", "5 parsecs"], 125, "--kill-after");
    assert_refused(&["--stdout-max-bytes", "-1"], 125, "--stdout-max-bytes");
    assert_refused(
        &["--stderr-max-bytes", "1.5"],
        125,
        "not a whole number of bytes",
    );
    assert_refused(
        &["--stdout-max-bytes", "99999999999999999999"],
        125,
        "too large",
    );
}

#[test]
fn a_bad_managed_entry_is_a_usage_error() {
    assert_refused(&["--dsh-env", "FOO=1"], 125, "DSH_");
    assert_refused(&["--dsh-env", "DSH_NOVALUE"], 125, "DSH_KEY=VALUE");
    assert_refused(&["-e", "=x"], 125, "empty");
}

#[test]
fn an_unknown_flag_is_a_usage_error() {
    assert_refused(&["--no-such-flag"], 125, "--no-such-flag");
}

#[test]
fn an_unreadable_stdin_file_is_an_infrastructure_error() {
    assert_refused(
        &["--stdin-file", "/nonexistent/in"],
        125,
        "STDIN_UNREADABLE",
    );
    assert_refused(&["--stdin-file", "/tmp"], 125, "is a directory");
}

#[test]
fn an_unusable_spill_dir_is_an_infrastructure_error() {
    assert_refused(
        &["--spill-dir", "/nonexistent/spill"],
        125,
        "SPILL_UNUSABLE",
    );
    assert_refused(&["--spill-dir", "/etc/hostname"], 125, "SPILL_UNUSABLE");
}

#[test]
fn a_missing_shell_is_an_infrastructure_error() {
    assert_refused(&["-e", "PATH=/nonexistent"], 125, "SHELL_NOT_FOUND");
}

#[test]
fn no_command_is_a_usage_error() {
    let out = Test::new().run();
    out.expect_status(125);
    assert!(out.stderr.contains("no command given"), "{}", out.stderr);
    Test::new().args(["--", ""]).run().expect_status(125);
}

#[test]
fn with_json_an_infrastructure_error_is_also_an_object_on_stdout() {
    let (v, status) = run_json(&["--workdir", "/nonexistent", "--", "true"]);
    assert_eq!(status, 125);
    assert_eq!(v["error"]["code"], "WORKDIR_UNUSABLE");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("/nonexistent")
    );
}

#[test]
fn read_restrictions_without_a_confining_mode_are_usage_errors() {
    for args in [
        &["--deny-read", "/etc"][..],
        &["-s", "full-access", "--read-root", "/usr"][..],
        &["--allow-read", "/root/.ssh"][..],
    ] {
        assert_refused(args, 125, "needs --sandbox read-only or workspace-write");
    }
}

/// clap's message and its tip read as two sentences; `dsh-exec job` alone
/// names the subcommands it needs.
#[test]
fn an_unknown_flag_and_a_missing_job_subcommand_say_what_to_do() {
    Test::new()
        .args(["--bogus", "--", "true"])
        .run()
        .expect_status(125)
        .expect_stderr(
            "dsh-exec: error: unexpected argument '--bogus' found; tip: to pass '--bogus' as a \
             value, use '-- --bogus' (see --help) (USAGE)\n",
        );
    Test::new()
        .args(["job"])
        .run()
        .expect_status(125)
        .expect_stderr(
            "dsh-exec: error: dsh-exec job needs a subcommand: read, wait, kill, list or prune \
             (see dsh-exec job --help) (USAGE)\n",
        );
}

/// A subcommand name after options runs as a command; a note says so,
/// unless `--` made that plain.
#[test]
fn a_subcommand_name_after_options_runs_as_a_command_with_a_note() {
    Test::new()
        .args(["--color", "never", "explain"])
        .run()
        .expect_status(127)
        .expect_stderr(
            "dsh-exec: note: 'explain' ran as a command; subcommands come first: dsh-exec explain ...\n",
        );
    let quiet = Test::new()
        .args(["--color", "never", "--", "explain"])
        .run();
    assert_eq!(quiet.status, 127);
    assert_eq!(quiet.stderr, "");
    // A `--` after the word does not make it meant: `explain` ran with
    // `true` as its argument.
    Test::new()
        .args(["--json", "explain", "--", "true"])
        .run()
        .expect_stderr(
            "dsh-exec: note: 'explain' ran as a command; subcommands come first: dsh-exec explain ...\n",
        );
}

#[test]
fn bad_network_policies_are_usage_errors() {
    assert_refused(
        &["--network", "sometimes"],
        125,
        "invalid network policy 'sometimes'",
    );
    assert_refused(&["--network", "allow="], 125, "needs at least one host");
    assert_refused(&["--network", "allow=*"], 125, "invalid host '*'");
    assert_refused(
        &["--network", "allow=a.org:0"],
        125,
        "the port must be 1 to 65535",
    );
    assert_refused(&["--network", "allow-list"], 125, "invalid network policy");
    assert_refused(
        &["--network", "deny", "--network", "allow=a.org"],
        125,
        "--network deny cannot be combined with --network allow=HOSTS",
    );
}

#[test]
fn a_usage_error_exits_125_and_with_json_is_an_object_on_stdout() {
    // 125, as timeout(1), env(1) and nice(1): never the command's own 2.
    let out = Test::new()
        .args(["--json", "--timeout", "soon", "--", "exit 2"])
        .run();
    out.expect_status(125);
    let v = out.json();
    assert_eq!(v["error"]["code"], "USAGE");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("invalid value 'soon' for '--timeout <DURATION>'"),
        "{v}"
    );
    assert!(out.stderr.ends_with(" (USAGE)\n"), "{}", out.stderr);
    // --json given to the command is the command's.
    let out = Test::new()
        .args(["--timeout", "soon", "--", "--json"])
        .run();
    out.expect_status(125).expect_stdout("");
}
