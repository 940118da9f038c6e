//! `-i`: the command gets the terminal, confined as any run, and the marker
//! follows when it ends. Driven under a real pseudo-terminal (Python's pty).
use crate::support::pty::Pty;
use crate::support::*;

#[test]
fn an_interactive_shell_runs_confined_and_the_marker_follows_exit() {
    let dir = tempfile::tempdir().unwrap();
    let screen = Pty::new(bin())
        .args([
            "-i",
            "--color",
            "never",
            "-s",
            "read-only",
            "-C",
            dir.path().to_str().unwrap(),
        ])
        .args(["--", "bash --norc --noprofile -i"])
        .env("WS", dir.path())
        // The prompt of bash --norc: `bash-5.2$ ` (or `# ` for root).
        .type_after(
            "bash-",
            b"echo mode=$DSH_SANDBOX_MODE; touch $WS/f; tty; exit 3\n",
        )
        .run();
    let text = screen.text.replace('\r', "");
    // The banner names the mode, the network policy (here the mode's
    // default, with the flag that opens it) and where the command may
    // write: in read-only, its private scratch dir alone.
    let banner = text
        .lines()
        .find(|l| {
            l.starts_with(
                "dsh-exec: interactive, sandbox read-only, network loopback (default for \
                 read-only; --network allow opens it); writable: ",
            )
        })
        .unwrap_or_else(|| panic!("no banner: {text}"));
    assert!(banner.ends_with("; exit to leave"), "{banner}");
    assert!(text.contains("mode=read-only\n"), "{text}");
    assert!(text.contains("cannot touch"), "{text}");
    assert!(
        text.contains("\n/dev/pts/"),
        "the command had no terminal: {text}"
    );
    assert!(text.ends_with("[exit code: 3]\n"), "{text}");
    assert_eq!(screen.status, 3, "{text}");
    assert!(!dir.path().join("f").exists());
}

#[test]
fn interactive_without_a_terminal_is_a_usage_error() {
    // A Test's stdin is /dev/null unless it is given bytes.
    Test::new()
        .args(["-i", "--", "echo ran"])
        .run()
        .expect_status(125)
        .expect_stdout("")
        .expect_stderr("dsh-exec: error: --interactive needs a terminal on stdin (USAGE)\n");
}
