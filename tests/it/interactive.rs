//! `-i`: the command gets the terminal, confined as any run, and the marker
//! follows when it ends. Driven under a real pseudo-terminal (Python's pty).
use crate::support::*;

const PTY_DRIVER: &str = r#"
import os, pty, select, sys, time
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
out = b""
def pump(seconds):
    global out
    end = time.time() + seconds
    while time.time() < end:
        if select.select([fd], [], [], 0.05)[0]:
            try:
                data = os.read(fd, 4096)
            except OSError:
                return False
            if not data:
                return False
            out += data
    return True
pump(1.0)
os.write(fd, b"echo mode=$DSH_SANDBOX_MODE; touch $WS/f; tty; exit 3\n")
end = time.time() + 10
while time.time() < end and pump(0.2):
    pass
_, status = os.waitpid(pid, 0)
sys.stdout.write(out.decode(errors="replace"))
sys.stdout.write("status=%d\n" % os.waitstatus_to_exitcode(status))
"#;

#[test]
fn an_interactive_shell_runs_confined_and_the_marker_follows_exit() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new("python3")
        .args(["-c", PTY_DRIVER, bin().to_str().unwrap()])
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
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).replace('\r', "");
    assert!(text.contains("mode=read-only\n"), "{text}");
    assert!(text.contains("cannot touch"), "{text}");
    assert!(
        text.contains("\n/dev/pts/"),
        "the command had no terminal: {text}"
    );
    assert!(text.ends_with("[exit code: 3]\nstatus=3\n"), "{text}");
    assert!(!dir.path().join("f").exists());
}

#[test]
fn interactive_without_a_terminal_is_a_usage_error() {
    // A Test's stdin is /dev/null unless it is given bytes.
    Test::new()
        .args(["-i", "--", "echo ran"])
        .run()
        .expect_status(2)
        .expect_stdout("")
        .expect_stderr("dsh-exec: error: --interactive needs a terminal on stdin\n");
}
