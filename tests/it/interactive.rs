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

/// A refusal known to `dsh-exec` (here a chmod outside the writable roots,
/// which the gate refuses) is told at the end, with the flag that would
/// allow it, on stderr before the marker: with stdout on the terminal too,
/// and with stdout in a file, which then holds the marker alone.
#[test]
fn at_its_end_a_refusal_is_told_on_stderr_before_the_marker() {
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("f");
    std::fs::write(&target, "x").unwrap();
    let script = format!("chmod 600 {}", target.display());
    let args = |pty: Pty| {
        pty.args(["-i", "-s", "workspace-write", "--no-temp-write"])
            .args(["--color", "never", "-C"])
            .args([ws.path()])
            .args(["--", &script])
    };
    let denial = format!(
        "[sandbox: denied chmod of {}; try --writable-root {}]",
        target.display(),
        outside.path().display()
    );
    let screen = args(Pty::new(bin())).run();
    assert!(
        screen
            .text
            .ends_with(&format!("{denial}\r\n[exit code: 1]\r\n")),
        "{}",
        screen.text
    );
    assert_eq!(screen.status, 1);
    let out_dir = tempfile::tempdir().unwrap();
    let file = out_dir.path().join("stdout");
    let screen = args(
        Pty::new("/bin/sh")
            .args(["-c", "out=$1; shift; exec \"$@\" > \"$out\"", "sh"])
            .args([file.as_os_str(), bin().as_os_str()]),
    )
    .run();
    assert!(
        screen.text.ends_with(&format!("{denial}\r\n")),
        "{}",
        screen.text
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "[exit code: 1]\n");
}

/// `-i` without a command starts `$SHELL`, interactive (`-i`), confined as
/// asked: here a script that says what it got and tries a write outside the
/// workspace.
#[test]
fn without_a_command_the_users_shell_starts_confined() {
    let ws = tempfile::tempdir().unwrap();
    let bin_dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let shell = bin_dir.path().join("my-shell");
    std::fs::write(
        &shell,
        "#!/bin/sh\necho \"my-shell $* mode=$DSH_SANDBOX_MODE\"\ntouch \"$OUT/f\" 2>/dev/null || echo refused\nexit 4\n",
    )
    .unwrap();
    let mut perms = std::fs::metadata(&shell).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&shell, perms).unwrap();
    let screen = Pty::new(bin())
        .args(["-i", "-s", "workspace-write", "--no-temp-write", "-q"])
        .args(["--color", "never", "-C"])
        .args([ws.path()])
        .env("SHELL", &shell)
        .env("OUT", outside.path())
        .run();
    assert_eq!(
        screen.text,
        "my-shell -i mode=workspace-write\r\nrefused\r\n[exit code: 4]\r\n"
    );
    assert_eq!(screen.status, 4);
    assert!(!outside.path().join("f").exists());
    // Without -i, no command is still a usage error.
    Test::new()
        .args(["-s", "workspace-write"])
        .run()
        .expect_status(125);
}
