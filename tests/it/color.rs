//! Colour: on a terminal or when forced; never when piped unless asked.
use crate::support::pty::Pty;
use crate::support::*;

const GREEN_MARKER: &str = "\u{1b}[1m\u{1b}[32m[exit code: 0]";

/// Runs dsh-exec with `args` and `env` on a pseudo-terminal and returns
/// what it printed.
fn under_pty(args: &[&str], env: &[(&str, &str)]) -> String {
    let mut pty = Pty::new(bin()).args(args);
    for (k, v) in env {
        pty = pty.env(k, v);
    }
    pty.run().text
}

#[test]
fn auto_colours_on_a_terminal() {
    let text = under_pty(&["--", "true"], &[]);
    assert!(text.contains(GREEN_MARKER), "{text:?}");
    let text = under_pty(&["--timeout", "100ms", "--", "sleep 5"], &[]);
    assert!(
        text.contains("\u{1b}[33m[timed out after 100ms]"),
        "{text:?}"
    );
    assert!(
        text.contains("\u{1b}[31m[killed by signal: SIGTERM]"),
        "{text:?}"
    );
}

#[test]
fn no_color_wins_on_a_terminal() {
    let text = under_pty(&["--", "true"], &[("NO_COLOR", "1")]);
    assert!(!text.contains('\u{1b}'), "{text:?}");
    let text = under_pty(&["--color", "never", "--", "true"], &[]);
    assert!(!text.contains('\u{1b}'), "{text:?}");
}

#[test]
fn piped_output_is_plain_unless_forced() {
    Test::new()
        .args(["--", "exit 1"])
        .run()
        .expect_stdout("[exit code: 1]\n");
    Test::new()
        .env("CLICOLOR_FORCE", "1")
        .args(["--", "exit 1"])
        .run()
        .expect_stdout("\u{1b}[1m\u{1b}[31m[exit code: 1]\u{1b}[39m\u{1b}[0m\n");
    let always = Test::new().args(["--color", "always", "--", "true"]).run();
    assert!(always.stdout.starts_with(GREEN_MARKER));
}

/// Output that ends in a concealing escape (`ESC[8m`) cannot hide the
/// marker: on a terminal the escape is shown, not obeyed; under `--render
/// raw` it is passed on, and an attribute reset follows before the marker,
/// as it does after a colour left on.
#[test]
fn a_concealing_escape_at_the_end_of_the_output_cannot_hide_the_marker() {
    let conceal = "printf 'x\\033[8m\\n'";
    let text = under_pty(&["--color", "never", "--", conceal], &[]);
    assert_eq!(text, "x\\x1b[8m\r\n[exit code: 0]\r\n");
    let text = under_pty(&["--render", "raw", "--color", "never", "--", conceal], &[]);
    assert!(
        text.ends_with("x\u{1b}[8m\r\n\u{1b}[0m[exit code: 0]\r\n"),
        "{text:?}"
    );
    let text = under_pty(&["--", "printf 'x\\033[31m\\n'"], &[]);
    assert_eq!(
        text,
        format!("x\u{1b}[31m\r\n\u{1b}[0m{GREEN_MARKER}\u{1b}[39m\u{1b}[0m\r\n")
    );
}
