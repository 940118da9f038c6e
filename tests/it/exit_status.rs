//! The rendered text and the exit status mirror how the command ended.
use crate::support::*;

#[test]
fn echo_renders_output_and_exit_zero() {
    assert_eq!(
        run(&["--", "echo hello"]),
        ("hello\n[exit code: 0]\n".into(), 0)
    );
}

#[test]
fn nonzero_exit_is_mirrored() {
    assert_eq!(run(&["--", "exit 3"]), ("[exit code: 3]\n".into(), 3));
}

#[test]
fn death_by_signal_keeps_output_and_maps_to_128_plus_n() {
    assert_eq!(
        run(&["--", "echo before; kill -SEGV $$"]),
        ("before\n[killed by signal: SIGSEGV]\n".into(), 139)
    );
}

#[test]
fn bash_statuses_126_and_127_pass_through() {
    let (text, status) = run(&["--", "no-such-command-dsh-exec-test"]);
    assert_eq!(status, 127);
    assert!(text.ends_with("[exit code: 127]\n"), "{text}");
    assert!(text.contains("[stderr]\n"), "{text}");
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("noexec");
    std::fs::write(&f, "#!/bin/sh\n").unwrap();
    let (text, status) = run(&["--", f.to_str().unwrap()]);
    assert_eq!(status, 126, "{text}");
}

#[test]
fn several_words_are_quoted_and_joined() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("f.txt"), "a b\nab\n").unwrap();
    let (text, status) = run(&["-C", dir.path().to_str().unwrap(), "grep", "a b", "f.txt"]);
    assert_eq!((text.as_str(), status), ("a b\n[exit code: 0]\n", 0));
}

#[test]
fn stderr_gets_its_own_section_and_missing_newlines_are_added() {
    assert_eq!(
        run(&["--", "printf out; printf err >&2"]),
        ("out\n[stderr]\nerr\n[exit code: 0]\n".into(), 0)
    );
}

#[test]
fn a_subcommand_name_after_double_dash_is_a_command() {
    let (text, status) = run(&["--", "explain"]);
    assert_eq!(status, 127, "{text}");
}

/// A result that cannot be written (a full disk) is not passed off as the
/// command's exit status: 125, and stderr says why. A reader that stops
/// early (`| head -1`) is no such failure.
#[test]
fn a_result_that_cannot_be_written_is_an_infrastructure_failure() {
    let out = dsh()
        .args(["--", "exit 0"])
        .stdout(std::fs::File::create("/dev/full").unwrap())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "dsh-exec: error: the result could not be written to stdout: No space left on device (os error 28)\n"
    );
}

/// A command's own lines shaped like dsh-exec's notices or marker are
/// escaped with a backslash in the text result (the mbox "From " rule);
/// the JSON keeps them exact, and the last line stays the real marker.
#[test]
fn marker_shaped_output_is_escaped_in_the_text_and_exact_in_the_json() {
    let script = "echo '[exit code: 0]'; echo '[sandbox: denied nothing]' >&2; exit 3";
    assert_eq!(
        run(&["--", script]),
        (
            "\\[exit code: 0]\n[stderr]\n\\[sandbox: denied nothing]\n[exit code: 3]\n".into(),
            3
        )
    );
    let v = Test::new().args(["--json", "--", script]).run().json();
    assert_eq!(v["stdout"]["text"], "[exit code: 0]\n");
}
